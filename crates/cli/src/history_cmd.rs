//! `benchlab history STUDY`: the stored runs of one study as series, one
//! per table row, metric and configuration, with the change points
//! `benchlab_stats::change_points` finds in each.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::{bail, Result};
use benchlab_core::{Better, Registry};
use benchlab_report::RunReport;
use benchlab_stats::{change_points, ChangePointOptions, Segmentation};
use benchlab_store::{RunStatus, Store};

use crate::registry;

/// Exit code of `history --fail-on-change` when a change is found.
pub const EXIT_CHANGE: i32 = 1;

/// What `benchlab history` was asked.
pub(crate) struct HistoryArgs<'a> {
    /// A study name as stored, or a study file whose name is read.
    pub(crate) study: &'a str,
    /// Exit with [`EXIT_CHANGE`] when a change point is found.
    pub(crate) fail_on_change: bool,
    /// Only changes at this run or later count for `fail_on_change`.
    pub(crate) since: Option<i64>,
    /// The detector's settings.
    pub(crate) options: ChangePointOptions,
}

/// The report of one stored run. Every report this command reads comes
/// through here, so that it follows the CLI's one loader (`show`'s).
fn load_report(store: &Store, _reg: &Registry, run_id: i64) -> Result<RunReport> {
    Ok(benchlab_report::load(
        store,
        &benchlab_report::RunSelection::Run(run_id),
    )?)
}

/// One series: a (workload, metric, fixed values, row, configuration)
/// over the runs, in run order.
struct Series {
    title: String,
    workload: String,
    where_: String,
    configuration: String,
    better: Better,
    decimals: usize,
    /// (run id, quoted figure).
    values: Vec<(i64, f64)>,
}

impl Series {
    fn key(&self) -> (&str, &str, &str, &str) {
        (
            &self.title,
            &self.workload,
            &self.where_,
            &self.configuration,
        )
    }
}

/// The runs of the series: the study's completed, measured runs run with
/// the newest one's options, oldest first; and what was left out, in words.
fn select_runs(store: &Store, name: &str) -> Result<(Vec<i64>, Vec<String>)> {
    let all = store.runs()?;
    let mut of_study: Vec<_> = all.iter().filter(|r| r.study_name == name).collect();
    if of_study.is_empty() {
        let mut names: Vec<&str> = all.iter().map(|r| r.study_name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        bail!(
            "the store has no run of a study named `{name}` (studies stored: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
    }
    of_study.sort_by_key(|r| r.id);
    let mut left_out = Vec::new();
    let unfinished = of_study
        .iter()
        .filter(|r| r.status != RunStatus::Completed)
        .count();
    if unfinished > 0 {
        left_out.push(format!("{unfinished} not completed"));
    }
    of_study.retain(|r| r.status == RunStatus::Completed);
    let mut published = 0;
    let mut measured = Vec::new();
    for r in of_study {
        if store
            .configurations(r.id)?
            .iter()
            .any(benchlab_report::import::is_published)
        {
            published += 1;
        } else {
            measured.push(r);
        }
    }
    if published > 0 {
        left_out.push(format!("{published} published (not measured here)"));
    }
    let Some(newest) = measured.last().map(|r| r.options) else {
        bail!(
            "study `{name}` has no completed measured run ({})",
            left_out.join(", ")
        );
    };
    // A --quick or scaled run measures shorter points: its figures are not
    // the same series.
    let other_options = measured.iter().filter(|r| r.options != newest).count();
    if other_options > 0 {
        left_out.push(format!(
            "{other_options} run with other options than the newest (--quick or --scale)"
        ));
    }
    Ok((
        measured
            .iter()
            .filter(|r| r.options == newest)
            .map(|r| r.id)
            .collect(),
        left_out,
    ))
}

/// Every table row of every run, as series in the order first seen.
fn collect_series(reports: &[RunReport]) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for report in reports {
        for table in &report.tables {
            for row in &table.rows {
                for (c, cell) in row.cells.iter().enumerate() {
                    let Some(cell) = cell else { continue };
                    let where_ = if table.fixed.is_empty() {
                        format!("{}={}", table.row_param, row.label)
                    } else {
                        format!("{}, {}={}", table.fixed, table.row_param, row.label)
                    };
                    let s = Series {
                        title: table.title.clone(),
                        workload: table.workload.clone(),
                        where_,
                        configuration: table.columns[c].clone(),
                        better: table.better,
                        decimals: table.decimals,
                        values: Vec::new(),
                    };
                    let i = match out.iter().position(|o| o.key() == s.key()) {
                        Some(i) => i,
                        None => {
                            out.push(s);
                            out.len() - 1
                        }
                    };
                    out[i].values.push((report.run.id, cell.value));
                }
            }
        }
    }
    out
}

/// `benchlab history STUDY [--fail-on-change] [--since RUN]`.
pub(crate) fn history(db: &Path, args: &HistoryArgs) -> Result<i32> {
    let reg = registry();
    let name = if Path::new(args.study).is_file() {
        benchlab_core::study::Study::load(Path::new(args.study), &reg)?.name
    } else {
        args.study.to_string()
    };
    let store = crate::open::open_read(db)?;
    let (runs, left_out) = select_runs(&store, &name)?;
    let reports = runs
        .iter()
        .map(|&id| load_report(&store, &reg, id))
        .collect::<Result<Vec<_>>>()?;
    let series = collect_series(&reports);
    let o = &args.options;
    let mut out = String::new();
    writeln!(
        out,
        "study `{name}`: {} completed run{} ({}){}",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        runs.iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        if left_out.is_empty() {
            String::new()
        } else {
            format!("; left out: {}", left_out.join(", "))
        }
    )?;
    writeln!(
        out,
        "series: runs of the same study name (the store keeps no plan fingerprint: a plan changed under the same name continues the series)"
    )?;
    writeln!(
        out,
        "change points: E-Divisive means (Matteson & James 2014), permutation test p ≤ {} ({} permutations), segments of {} runs or more",
        o.significance, o.permutations, o.min_segment
    )?;
    // (series title, run id of the change) of every change that counts
    // for --fail-on-change.
    let mut counted: Vec<(String, i64)> = Vec::new();
    let mut found = 0;
    for s in &series {
        let label = format!(
            "{} · {} · {} · {}",
            s.title, s.workload, s.where_, s.configuration
        );
        writeln!(out, "\n{label} ({} is better)", better_word(s.better))?;
        let values: Vec<f64> = s.values.iter().map(|v| v.1).collect();
        let seg = change_points(&values, o);
        let changes = seg.as_ref().map_or(&[][..], |g| &g.changes[..]);
        for (i, &(run, v)) in s.values.iter().enumerate() {
            write!(out, "  run {run:>5}  {v:>14.*}", s.decimals)?;
            if let Some(c) = changes.iter().find(|c| c.index == i) {
                found += 1;
                let pct = c
                    .change_pct
                    .map(|p| format!("{p:+.2} %, "))
                    .unwrap_or_default();
                let judged = match (s.better, c.after_mean > c.before_mean) {
                    (Better::Higher, true) | (Better::Lower, false) => "better",
                    _ => "worse",
                };
                write!(
                    out,
                    "  ← change at run {run}: mean {:.*} → {:.*} ({pct}{judged}), p = {:.3}",
                    s.decimals, c.before_mean, s.decimals, c.after_mean, c.p_value
                )?;
                if args.since.is_none_or(|since| run >= since) {
                    counted.push((label.clone(), run));
                }
            }
            writeln!(out)?;
        }
        writeln!(out, "  {}", verdict(seg.as_ref(), values.len(), o))?;
    }
    let newest = runs.last().copied().unwrap_or_default();
    writeln!(
        out,
        "\n{found} change point{} in {} series; the newest run ({newest}) is {}",
        if found == 1 { "" } else { "s" },
        series.len(),
        if found == 0 {
            "in an unchanged series".to_string()
        } else {
            "after the change points marked above".to_string()
        }
    )?;
    std::io::stdout().write_all(out.as_bytes())?;
    if args.fail_on_change && !counted.is_empty() {
        eprintln!(
            "benchlab: --fail-on-change: {} change point{}{}: {}",
            counted.len(),
            if counted.len() == 1 { "" } else { "s" },
            args.since
                .map(|s| format!(" at or after run {s}"))
                .unwrap_or_default(),
            counted
                .iter()
                .map(|(l, r)| format!("{l} at run {r}"))
                .collect::<Vec<_>>()
                .join("; ")
        );
        return Ok(EXIT_CHANGE);
    }
    Ok(0)
}

fn better_word(b: Better) -> &'static str {
    match b {
        Better::Higher => "higher",
        Better::Lower => "lower",
    }
}

/// The line under a series: what the detector concluded.
fn verdict(seg: Option<&Segmentation>, n: usize, o: &ChangePointOptions) -> String {
    match seg {
        None => "not tested: a figure is not finite".into(),
        Some(g) if !g.changes.is_empty() => match g.rejected_p_value {
            Some(p) => format!(
                "{} change point{} (the next strongest split: p = {p:.3})",
                g.changes.len(),
                if g.changes.len() == 1 { "" } else { "s" }
            ),
            None => format!(
                "{} change point{} (no segment left long enough to split again)",
                g.changes.len(),
                if g.changes.len() == 1 { "" } else { "s" }
            ),
        },
        Some(g) => match g.rejected_p_value {
            Some(p) => format!("no change (the strongest split: p = {p:.3})"),
            None => format!(
                "too short to test: {n} run{}, a change needs {} on either side",
                if n == 1 { "" } else { "s" },
                o.min_segment.max(2)
            ),
        },
    }
}
