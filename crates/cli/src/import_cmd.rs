//! `benchlab import FILE.csv`: published figures (the figures CSV layout of
//! `benchlab_report::import`) stored as a run marked *published, not
//! measured*, so that `show`, `compare` and `report` put them beside
//! measured runs.
//!
//! The run keeps the file's text as its study text, each configuration
//! the spec `{"published": true}`, and the figures as the importer parsed
//! them (layout v1, versioned by its header), which its report reads:
//! the text is never parsed again. It has no points and no samples:
//! nothing was measured.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use benchlab_core::plan::RunOptions;
use benchlab_core::units::now_rfc3339;
use benchlab_report::import::{self, PUBLISHED};
use benchlab_store::{NewRun, Reading, RunStatus};

/// The event kind that records an import.
const EVENT: &str = "imported";

/// `benchlab import FILE [--name NAME]`: checks the whole file first, then
/// stores it as one completed run; prints the run's id.
pub(crate) fn import(db: &Path, file: &Path, name: Option<&str>) -> Result<i32> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let shown = file.display().to_string();
    let name = match name {
        Some(n) => n.to_string(),
        None => file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| shown.clone()),
    };
    let report = import::figures_csv(&name, &text).with_context(|| shown.clone())?;
    let figures: usize = report
        .tables
        .iter()
        .flat_map(|t| &t.rows)
        .map(|r| r.cells.iter().flatten().count())
        .sum();
    let store = crate::open::open_store(db)?;
    let at = now_rfc3339();
    let description = format!("published figures from {shown} ({PUBLISHED})");
    let run_id = store.create_run(&NewRun {
        study_name: &name,
        study_file: &shown,
        study_text: &text,
        description: &description,
        options: RunOptions {
            scale: 1.0,
            quick: false,
        },
        started_at: &at,
        controller_host: "",
    })?;
    for c in &report.configurations {
        store.add_configuration(run_id, c)?;
    }
    store.set_published(
        run_id,
        &serde_json::to_string(&report).context("the parsed figures")?,
    )?;
    store.set_reading(run_id, &Reading::recorded())?;
    store.add_event(
        run_id,
        &at,
        EVENT,
        &format!(
            "{} table(s), {figures} figure(s) from {shown}: {PUBLISHED}",
            report.tables.len()
        ),
    )?;
    store.set_run_status(run_id, RunStatus::Completed, &at)?;
    writeln!(
        std::io::stdout(),
        "benchlab: run {run_id}: {} table(s), {figures} figure(s) from {shown}, {PUBLISHED} (configurations: {}); `benchlab show {run_id}` prints them, `benchlab compare` puts them beside measured runs",
        report.tables.len(),
        report
            .configurations
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    Ok(0)
}
