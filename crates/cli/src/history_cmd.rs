//! `benchlab history STUDY`: the stored runs of one study as series, one
//! per table row, metric and configuration, with the change points
//! `benchlab_stats::change_points` finds in each; the series are built by
//! `benchlab_report::history`, as `benchlab serve`'s history page does.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::Result;
use benchlab_core::Better;
use benchlab_stats::{ChangePointOptions, Segmentation};

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

/// `benchlab history STUDY [--fail-on-change] [--since RUN]`.
pub(crate) fn history(db: &Path, args: &HistoryArgs) -> Result<i32> {
    let reg = registry();
    let name = if Path::new(args.study).is_file() {
        benchlab_core::study::Study::load(Path::new(args.study), &reg)?.name
    } else {
        args.study.to_string()
    };
    let store = crate::open::open_read(db)?;
    let h = benchlab_report::history::history(&store, &name, None, args.options)?;
    let runs = &h.group.runs;
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
        if h.left_out.is_empty() {
            String::new()
        } else {
            format!("; left out: {}", h.left_out.join(", "))
        }
    )?;
    writeln!(
        out,
        "series: runs of the same study name and plan fingerprint {}{}",
        h.group.fingerprint,
        if h.other_groups.is_empty() {
            String::new()
        } else {
            format!(
                " (other plans or options, not in this series: {})",
                h.other_groups
                    .iter()
                    .map(|g| format!(
                        "{} with run{} {}",
                        g.fingerprint,
                        if g.runs.len() == 1 { "" } else { "s" },
                        g.runs
                            .iter()
                            .map(i64::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
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
    for s in &h.series {
        let label = s.label();
        writeln!(out, "\n{label} ({} is better)", better_word(s.better))?;
        let seg = s.segmentation.as_ref();
        let changes = seg.map_or(&[][..], |g| &g.changes[..]);
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
        writeln!(out, "  {}", verdict(seg, s.values.len(), o))?;
    }
    let newest = runs.last().copied().unwrap_or_default();
    writeln!(
        out,
        "\n{found} change point{} in {} series; the newest run ({newest}) is {}",
        if found == 1 { "" } else { "s" },
        h.series.len(),
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
