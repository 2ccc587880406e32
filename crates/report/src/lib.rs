//! Reports: [`load`] turns what the runs stored into one
//! [`model::RunReport`] (plain, serializable data: tables, cells with
//! their spread, advantages with their confidence intervals and verdicts,
//! views, appendices), which every renderer turns into text. Rendering
//! never measures and never queries; loading never consults the registry
//! of workloads, and never writes (the store's own upgrade brings an older
//! store up once: `benchlab store upgrade`).

pub mod build;
pub mod compare;
pub mod crosscheck;
pub mod document;
pub mod emulated;
pub mod figures;
pub mod flame;
pub mod format;
pub mod history;
pub mod html;
pub mod import;
pub mod load;
pub mod markdown;
pub mod model;
pub mod monitors;
pub mod pairs;
pub mod progress;
pub mod render;
pub mod series;
pub mod stacks;
pub mod svg;
pub mod terminal;
pub mod text;
pub mod views;

pub use document::Document;
pub use load::{load, ColumnSpec, LoadError, RunSelection};
pub use model::RunReport;
pub use progress::{progress, Progress};
pub use render::{render, render_with, Format};
pub use terminal::Layout;
