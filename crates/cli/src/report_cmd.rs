//! `benchlab compare` and `benchlab report`: stored runs → comparison
//! tables and report files.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use benchlab_core::units::format_size;
use benchlab_core::{ParamKind, Registry};
use benchlab_report::compare::{combine, regressions, Side};
use benchlab_report::model::PointResult;
use benchlab_report::RunReport;
use benchlab_store::Store;

use crate::{registry, runner};

/// Exit code of `compare --fail-on-regression` when a regression is found.
pub const EXIT_REGRESSION: i32 = 1;

/// `RUN` or `RUN:CONFIG`.
struct Spec {
    run: i64,
    config: Option<String>,
}

fn parse_spec(s: &str) -> Result<Spec> {
    let (run, config) = match s.split_once(':') {
        Some((r, c)) => (r, Some(c.to_string())),
        None => (s, None),
    };
    let run = run
        .parse()
        .with_context(|| format!("`{s}`: expected RUN or RUN:CONFIG with a numeric run id"))?;
    Ok(Spec { run, config })
}

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

/// A compared column: (index of its run's report, configuration index,
/// label `RUN:CONFIG`).
type Column = (usize, usize, String);

/// Loads each run once and expands specs into sides: `RUN` gives every
/// configuration of the run, `RUN:CONFIG` one.
fn load(store: &Store, specs: &[String]) -> Result<(Vec<RunReport>, Vec<Column>)> {
    let reg = registry();
    let mut reports: Vec<RunReport> = Vec::new();
    let mut sides = Vec::new();
    for raw in specs {
        let spec = parse_spec(raw)?;
        let r = match reports.iter().position(|r| r.run.id == spec.run) {
            Some(i) => i,
            None => {
                reports.push(runner::report(store, &reg, spec.run)?);
                reports.len() - 1
            }
        };
        let configs = &reports[r].configurations;
        match &spec.config {
            Some(name) => {
                let c = configs
                    .iter()
                    .position(|c| &c.name == name)
                    .with_context(|| {
                        format!(
                            "run {} has no configuration `{name}` (it has: {})",
                            spec.run,
                            configs
                                .iter()
                                .map(|c| c.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })?;
                sides.push((r, c, format!("{}:{name}", spec.run)));
            }
            None => {
                for (c, conf) in configs.iter().enumerate() {
                    sides.push((r, c, format!("{}:{}", spec.run, conf.name)));
                }
            }
        }
    }
    Ok((reports, sides))
}

fn combined(reports: &[RunReport], sides: &[(usize, usize, String)], baseline: usize) -> RunReport {
    let s: Vec<Side> = sides
        .iter()
        .map(|(r, c, label)| Side {
            label: label.clone(),
            report: &reports[*r],
            config: *c,
        })
        .collect();
    combine(&s, baseline)
}

/// `benchlab compare SPEC… [--baseline SPEC] [--fail-on-regression PCT]`.
pub(crate) fn compare(
    db: &Path,
    specs: &[String],
    baseline: Option<&str>,
    fail_on_regression: Option<f64>,
    format: benchlab_report::Format,
) -> Result<i32> {
    let store = crate::commands::open_existing_store(db)?;
    let (reports, sides) = load(&store, specs)?;
    if sides.len() < 2 {
        bail!(
            "compare needs at least two columns: give two runs, or a run with two configurations"
        );
    }
    let base = match baseline {
        None => 0,
        Some(b) => {
            let spec = parse_spec(b)?;
            let wanted = match &spec.config {
                Some(c) => format!("{}:{c}", spec.run),
                None => {
                    // A bare run id: its first configuration.
                    sides
                        .iter()
                        .find(|s| s.2.starts_with(&format!("{}:", spec.run)))
                        .map(|s| s.2.clone())
                        .unwrap_or_default()
                }
            };
            sides
                .iter()
                .position(|s| s.2 == wanted)
                .with_context(|| format!("--baseline {b} is not one of the compared columns"))?
        }
    };
    let report = combined(&reports, &sides, base);
    let text = benchlab_report::render(&report, format);
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

/// Notes on how the figures of a view's points were obtained, read from
/// the measurements the points recorded (a cgroup's memory limit, a
/// file-size scale, stdio that stays buffered under direct I/O, a loop
/// device without direct I/O).
///
/// These are `fs.matrix`'s observations; the report crate only prints
/// them. They belong in the workload's own crate, behind a `notes` hook
/// of the workload interface, once core has one: they are kept here, in
/// the glue that knows the registered workloads, until then.
pub(crate) fn measurement_notes(points: &[&PointResult]) -> Vec<String> {
    let mut notes = Vec::new();
    let first = |k: &str| {
        points
            .iter()
            .find_map(|p| p.metrics.get(k).and_then(|v| v.first().copied()))
    };
    if let Some(v) = first("cgroup_version") {
        let limit = first("cgroup_limit_bytes").unwrap_or(f64::NAN);
        let peak = points
            .iter()
            .filter_map(|p| p.metrics.get("cgroup_peak_bytes"))
            .flatten()
            .fold(0.0f64, |a, &b| a.max(b));
        notes.push(format!(
            "out-of-cache form: cgroup-v{v} memory limit {} (highest use seen {}), page cache included",
            format_size(limit as u64),
            format_size(peak as u64)
        ));
    }
    if first("big_file").is_some() {
        notes.push("out-of-cache form: big-file (the file is larger than RAM)".into());
    }
    let scaled: Vec<(u64, u64)> = points
        .iter()
        .filter_map(|p| {
            let real = p.metrics.get("file_bytes")?.first().copied()? as u64;
            let nominal = p.params.get("file_size")?.as_f64()? as u64;
            (real != nominal).then_some((nominal, real))
        })
        .collect();
    if let (Some(lo), Some(hi)) = (scaled.iter().min(), scaled.iter().max()) {
        notes.push(format!(
            "trial run at a size scale: rows keep the nominal file sizes; the files were {} ({} row) … {} ({} row)",
            format_size(lo.1),
            format_size(lo.0),
            format_size(hi.1),
            format_size(hi.0)
        ));
    }
    if first("stdio_buffered").is_some() {
        notes.push("fwrite, frewrite, fread and freread are buffered: stdio never uses O_DIRECT (as IOzone -I)".into());
    }
    if first("loop_direct_io") == Some(0.0) {
        notes.push(
            "the image's loop device has no direct I/O: the host's page cache sits under it".into(),
        );
    }
    notes
}

/// The parameters of workload `kind` whose values are byte counts, for
/// the axis labels of its views (`64KiB`). The stored plan does not hold
/// parameter kinds yet: the registry answers for the kinds it knows, and
/// an unknown kind's axes show plain numbers.
pub(crate) fn byte_params(reg: &Registry, kind: &str) -> Vec<String> {
    reg.get(kind)
        .map(|wl| {
            wl.params()
                .iter()
                .filter(|p| p.kind == ParamKind::Bytes)
                .map(|p| p.name.to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A run's report as `benchlab report` writes it: the tables and views,
/// with the run's events and its latency distributions (`benchlab serve`
/// shows the same).
pub(crate) fn full_report(store: &Store, reg: &Registry, id: i64) -> Result<RunReport> {
    let mut r = runner::report(store, reg, id)?;
    r.events = store.events(id)?;
    // Published figures have no distributions to draw.
    if !crate::import_cmd::is_published_run(store, id)? {
        let plan = runner::stored_plan(store, reg, id)?;
        r.latency = benchlab_report::model::latency_views(
            &store.points(id)?,
            &store.samples(id)?,
            &plan,
            |point, rep| store.side_results(point, rep).unwrap_or_default(),
            &r.configurations,
        );
    }
    Ok(r)
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
    let store = crate::commands::open_existing_store(db)?;
    let runs: Vec<String> = if runs.is_empty() {
        vec![store
            .latest_run()?
            .context("the store has no runs yet")?
            .to_string()]
    } else {
        runs.to_vec()
    };
    let single = runs.len() == 1 && !runs[0].contains(':');
    let report = if single {
        full_report(&store, &registry(), parse_spec(&runs[0])?.run)?
    } else {
        let (reports, sides) = load(&store, &runs)?;
        combined(&reports, &sides, 0)
    };
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
