//! Reports: [`load`] turns what the runs stored into one
//! [`model::RunReport`] (plain, serializable data: tables, cells with
//! their spread, advantages with their confidence intervals and verdicts,
//! views, appendices), which every renderer turns into text. Rendering
//! never measures and never queries; loading never consults the registry
//! of workloads ([`upgrade`] brings an older store up once).

pub mod build;
pub mod compare;
pub mod crosscheck;
pub mod emulated;
pub mod figures;
pub mod format;
pub mod history;
pub mod html;
pub mod import;
pub mod load;
pub mod model;
pub mod monitors;
pub mod pairs;
pub mod progress;
pub mod render;
pub mod series;
pub mod text;
pub mod upgrade;
pub mod views;

pub use load::{load, ColumnSpec, LoadError, RunSelection};
pub use model::RunReport;
pub use progress::{progress, Progress};
pub use render::{render, Format};
pub use upgrade::{upgrade, UpgradeError};
