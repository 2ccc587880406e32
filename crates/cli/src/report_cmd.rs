//! `benchlab compare` and `benchlab report`: stored runs → comparison
//! tables and report files.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use benchlab_report::compare::regressions;
use benchlab_report::{load, ColumnSpec, RunSelection};

/// Exit code of `compare --fail-on-regression` when a regression is found.
pub const EXIT_REGRESSION: i32 = 1;

/// A percentage such as `5%` or `5`.
pub(crate) fn parse_pct(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a percentage (e.g. 5%)"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("`{s}` must be a non-negative percentage"))
    }
}

/// `benchlab compare SPEC… [--baseline SPEC] [--fail-on-regression PCT]`.
pub(crate) fn compare(
    db: &Path,
    specs: &[String],
    baseline: Option<&str>,
    fail_on_regression: Option<f64>,
    (format, layout): (benchlab_report::Format, benchlab_report::Layout),
) -> Result<i32> {
    let store = crate::open::open_read(db)?;
    let columns = specs
        .iter()
        .map(|s| s.parse())
        .collect::<Result<Vec<ColumnSpec>, _>>()?;
    let baseline = baseline.map(str::parse).transpose()?;
    let report = load(&store, &RunSelection::Columns { columns, baseline })?;
    if report.configurations.len() < 2 {
        bail!(
            "compare needs at least two columns: give two runs, or a run with two configurations"
        );
    }
    let text = benchlab_report::render_with(&report, format, layout);
    std::io::stdout().write_all(text.as_bytes())?;
    if let Some(threshold) = fail_on_regression {
        let found = regressions(&report, threshold);
        if !found.is_empty() {
            eprintln!(
                "benchlab: {} regression(s) beyond {threshold}% against {}:",
                found.len(),
                report
                    .tables
                    .first()
                    .map(|t| t.columns[0].as_str())
                    .unwrap_or("the baseline")
            );
            for r in &found {
                eprintln!("  {} · {}: {:.2}%", r.column, r.what, r.pct);
            }
            return Ok(EXIT_REGRESSION);
        }
    }
    Ok(0)
}

/// Where `benchlab report` writes.
pub(crate) struct Outputs {
    pub html: Option<PathBuf>,
    pub md: Option<PathBuf>,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
}

/// `benchlab report RUN… --html F --md F --json F --csv DIR`.
pub(crate) fn report(db: &Path, runs: &[String], out: &Outputs) -> Result<i32> {
    if out.html.is_none() && out.md.is_none() && out.json.is_none() && out.csv.is_none() {
        bail!("nothing to write: give at least one of --html, --md, --json, --csv");
    }
    let store = crate::open::open_read(db)?;
    let runs: Vec<String> = if runs.is_empty() {
        vec![store
            .latest_run()?
            .context("the store has no runs yet")?
            .to_string()]
    } else {
        runs.to_vec()
    };
    let report = load(&store, &RunSelection::from_specs(&runs, None)?)?;
    let write = |path: &Path, text: &str| -> Result<()> {
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("benchlab: wrote {}", path.display());
        Ok(())
    };
    if let Some(p) = &out.html {
        write(p, &benchlab_report::html::render_html(&report))?;
    }
    if let Some(p) = &out.md {
        write(
            p,
            &benchlab_report::render(&report, benchlab_report::Format::Markdown),
        )?;
    }
    if let Some(p) = &out.json {
        write(
            p,
            &benchlab_report::render(&report, benchlab_report::Format::Json),
        )?;
    }
    if let Some(dir) = &out.csv {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write(
            &dir.join("tables.csv"),
            &benchlab_report::render(&report, benchlab_report::Format::Csv),
        )?;
        write(
            &dir.join("repetitions.csv"),
            &benchlab_report::render::repetitions_csv(&report),
        )?;
    }
    Ok(0)
}
