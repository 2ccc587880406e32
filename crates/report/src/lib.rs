//! Reports: a run's stored rows become a [`model::RunReport`] (plain,
//! serializable data: tables, cells with their spread, advantages with
//! their confidence intervals and verdicts), which the renderers turn into
//! text. Rendering never measures and never queries.

pub mod compare;
pub mod crosscheck;
pub mod html;
pub mod import;
pub mod model;
pub mod render;
pub mod text;
pub mod views;

pub use model::{build, RunReport};
pub use render::{render, Format};
