//! A study's history: its stored runs as series, one per table row,
//! metric and configuration, with the change points
//! [`benchlab_stats::change_points`] finds in each. `benchlab history`
//! prints it and `benchlab serve` draws it (`/history?study=NAME`): one
//! builder, so the two always group and judge the same runs.
//!
//! A series is the completed, measured runs of one study name whose
//! stored plans have the same fingerprint
//! ([`benchlab_core::resolved::ResolvedPlan::fingerprint`], which covers the run's
//! options too): a changed plan starts a new series.

use std::collections::BTreeMap;

use benchlab_core::resolved::ResolvedPlan;
use benchlab_core::Better;
use benchlab_stats::{change_points, ChangePointOptions, Segmentation};
use benchlab_store::{RunRow, RunStatus, Store};

use crate::{load, LoadError, RunReport, RunSelection};

/// Why there is no history to show.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// No run has that study name.
    #[error("the store has no run of a study named `{name}` (studies stored: {stored})")]
    NoStudy {
        /// The name asked for.
        name: String,
        /// The names stored, comma-separated (or `none`).
        stored: String,
    },
    /// Runs exist, but none is a completed measurement.
    #[error("study `{name}` has no completed measured run ({left_out})")]
    NoMeasuredRun {
        /// The study.
        name: String,
        /// What was left out, in words.
        left_out: String,
    },
    /// The fingerprint asked for names no series of the study.
    #[error("study `{name}` has no series with plan fingerprint `{fingerprint}` (it has: {have})")]
    NoSeries {
        /// The study.
        name: String,
        /// The fingerprint asked for.
        fingerprint: String,
        /// The study's fingerprints.
        have: String,
    },
    /// A run could not be read.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] benchlab_store::StoreError),
}

/// One group of runs of a study: the same plan fingerprint.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesGroup {
    /// The plan fingerprint (`none` for runs stored without a plan).
    pub fingerprint: String,
    /// Its runs, oldest first.
    pub runs: Vec<i64>,
    /// Whether its runs are `--quick` or scaled trials.
    pub trial: bool,
}

/// One series: a (table, workload, fixed values and row, configuration)
/// over the runs, in run order.
#[derive(Debug, Clone)]
pub struct Series {
    /// The table's title (the metric with its unit).
    pub title: String,
    /// The workload's name.
    pub workload: String,
    /// The fixed parameters and the row (`size=64`).
    pub where_: String,
    /// The configuration (the column).
    pub configuration: String,
    /// Which way is better.
    pub better: Better,
    /// Decimals shown.
    pub decimals: usize,
    /// (run id, quoted figure).
    pub values: Vec<(i64, f64)>,
    /// The detector's answer (None: a figure is not finite).
    pub segmentation: Option<Segmentation>,
    /// The smallest difference that matters to this metric, in percent:
    /// the newest run's margin for it (its verdicts'), else the default.
    /// A change within it is not a regression for `--fail-on-change`.
    pub margin_pct: f64,
    /// The newest run's verdict on this configuration against the first
    /// at this row (none for the first configuration).
    pub newest: Option<crate::model::Decision>,
}

/// What a change point is, against the series' margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Better by more than the margin.
    Better,
    /// Worse by more than the margin.
    Worse,
    /// A change the detector found, within ±margin: not one that matters.
    WithinMargin,
}

impl ChangeKind {
    /// In words: `better`, `worse`, `within the ±2% margin`.
    pub fn text(self, margin_pct: f64) -> String {
        match self {
            ChangeKind::Better => "better".into(),
            ChangeKind::Worse => "worse".into(),
            ChangeKind::WithinMargin => format!("within the ±{margin_pct}% margin"),
        }
    }
}

impl Series {
    /// `title · workload · where · configuration`.
    pub fn label(&self) -> String {
        format!(
            "{} · {} · {} · {}",
            self.title, self.workload, self.where_, self.configuration
        )
    }

    /// A change from mean `before` to mean `after` (`change_pct`: its
    /// size in percent of `before`, when defined), against the margin.
    pub fn change_kind(&self, before: f64, after: f64, change_pct: Option<f64>) -> ChangeKind {
        if change_pct.is_some_and(|p| p.abs() <= self.margin_pct) {
            return ChangeKind::WithinMargin;
        }
        if is_better(self.better, before, after) {
            ChangeKind::Better
        } else {
            ChangeKind::Worse
        }
    }

    /// The newest run's verdict in words: `run 12: worse than base,
    /// -5.10% [-7.20%, -3.00%], margin ±2%, 8 repetitions per side`.
    pub fn newest_text(&self, base: &str) -> Option<String> {
        let d = self.newest.as_ref()?;
        let run = self.values.last().map(|v| v.0).unwrap_or_default();
        let adv = match (d.advantage_pct, d.ci_lo_pct.zip(d.ci_hi_pct)) {
            (Some(a), Some((lo, hi))) => format!(", {a:+.2}% [{lo:+.2}%, {hi:+.2}%]"),
            (Some(a), None) => format!(", {a:+.2}%"),
            _ => String::new(),
        };
        let mde = d
            .mde_pct
            .map(|m| format!(", detectable at 80% power: ±{m:.2}%"))
            .unwrap_or_default();
        Some(format!(
            "run {run}: {} against {base}{adv}, margin ±{}%, {} repetitions per side{mde}",
            d.verdict.as_str(),
            d.margin_pct,
            d.repetitions
        ))
    }

    fn key(&self) -> (&str, &str, &str, &str) {
        (
            &self.title,
            &self.workload,
            &self.where_,
            &self.configuration,
        )
    }
}

/// A study's history: the series of one plan fingerprint.
#[derive(Debug, Clone)]
pub struct History {
    /// The study name.
    pub study: String,
    /// The series group shown.
    pub group: SeriesGroup,
    /// The study's other groups (other plans, other options), newest
    /// first.
    pub other_groups: Vec<SeriesGroup>,
    /// What was left out of every group, in words (not completed,
    /// published).
    pub left_out: Vec<String>,
    /// The runs of the group, as stored.
    pub runs: Vec<RunRow>,
    /// Every series, in the order first seen.
    pub series: Vec<Series>,
    /// The detector's settings.
    pub options: ChangePointOptions,
}

impl History {
    /// The number of change points over every series.
    pub fn change_count(&self) -> usize {
        self.series
            .iter()
            .map(|s| s.segmentation.as_ref().map_or(0, |g| g.changes.len()))
            .sum()
    }
}

/// The fingerprint of a stored run's plan (`none` without one).
pub fn run_fingerprint(store: &Store, run: &RunRow) -> Result<String, HistoryError> {
    Ok(match store.plan(run.id)? {
        Some(text) => match ResolvedPlan::from_json(&text) {
            Ok(plan) => plan.fingerprint(&run.options),
            Err(_) => "unreadable".into(),
        },
        None => "none".into(),
    })
}

/// The study's completed measured runs, grouped by plan fingerprint
/// (first the group of the newest run that is not a trial), and what was
/// left out.
pub fn groups(store: &Store, name: &str) -> Result<(Vec<SeriesGroup>, Vec<String>), HistoryError> {
    let all = store.runs()?;
    let mut of_study: Vec<&RunRow> = all.iter().filter(|r| r.study_name == name).collect();
    if of_study.is_empty() {
        let mut names: Vec<&str> = all.iter().map(|r| r.study_name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        return Err(HistoryError::NoStudy {
            name: name.to_string(),
            stored: if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            },
        });
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
    let published = store.published_runs()?;
    let n_published = of_study
        .iter()
        .filter(|r| published.contains(&r.id))
        .count();
    if n_published > 0 {
        left_out.push(format!("{n_published} published (not measured here)"));
    }
    of_study.retain(|r| !published.contains(&r.id));
    let mut by_print: BTreeMap<String, SeriesGroup> = BTreeMap::new();
    for r in &of_study {
        let fingerprint = run_fingerprint(store, r)?;
        by_print
            .entry(fingerprint.clone())
            .or_insert_with(|| SeriesGroup {
                fingerprint,
                runs: Vec::new(),
                trial: r.options.quick || r.options.scale != 1.0,
            })
            .runs
            .push(r.id);
    }
    // Measured groups before trials (a `--quick` check after a change
    // does not hide the series), then the newest first.
    let mut out: Vec<SeriesGroup> = by_print.into_values().collect();
    out.sort_by_key(|g| (g.trial, std::cmp::Reverse(g.runs.last().copied())));
    if out.is_empty() {
        return Err(HistoryError::NoMeasuredRun {
            name: name.to_string(),
            left_out: left_out.join(", "),
        });
    }
    Ok((out, left_out))
}

/// The history of study `name`: the series of the group with
/// `fingerprint`, or of the newest run that is not a trial (`--quick`,
/// `--scale`) when there is one.
pub fn history(
    store: &Store,
    name: &str,
    fingerprint: Option<&str>,
    options: ChangePointOptions,
) -> Result<History, HistoryError> {
    let (mut all, left_out) = groups(store, name)?;
    let at =
        match fingerprint {
            None => 0,
            Some(f) => all.iter().position(|g| g.fingerprint == f).ok_or_else(|| {
                HistoryError::NoSeries {
                    name: name.to_string(),
                    fingerprint: f.to_string(),
                    have: all
                        .iter()
                        .map(|g| g.fingerprint.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            })?,
        };
    let group = all.remove(at);
    let mut reports = Vec::with_capacity(group.runs.len());
    let mut runs = Vec::with_capacity(group.runs.len());
    for &id in &group.runs {
        let report = load(store, &RunSelection::Run(id))?;
        runs.push(report.run.clone());
        reports.push(report);
    }
    let mut series = collect_series(&reports);
    for s in &mut series {
        let values: Vec<f64> = s.values.iter().map(|v| v.1).collect();
        s.segmentation = change_points(&values, &options);
    }
    Ok(History {
        study: name.to_string(),
        group,
        other_groups: all,
        left_out,
        runs,
        series,
        options,
    })
}

/// The newest change point in study `name`'s series (the default
/// detector, as `benchlab history` runs it), in words: `change at run 9
/// in Fake score (points) …: mean 100.00 → 115.00 (+15.00 %)`. `None`
/// when the study has no measured run or no change: the flag of a
/// periodic study in `benchlab queue` and serve's queue page.
pub fn newest_change(store: &Store, name: &str) -> Result<Option<String>, HistoryError> {
    let h = match history(store, name, None, ChangePointOptions::default()) {
        Ok(h) => h,
        Err(HistoryError::NoStudy { .. } | HistoryError::NoMeasuredRun { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut newest: Option<(i64, String)> = None;
    for s in &h.series {
        for c in s.segmentation.iter().flat_map(|g| &g.changes) {
            let run = s.values[c.index].0;
            if newest.as_ref().is_none_or(|(r, _)| run > *r) {
                let pct = c
                    .change_pct
                    .map(|p| format!(" ({p:+.2} %)"))
                    .unwrap_or_default();
                newest = Some((
                    run,
                    format!(
                        "change at run {run} in {}: mean {:.*} → {:.*}{pct}",
                        s.label(),
                        s.decimals,
                        c.before_mean,
                        s.decimals,
                        c.after_mean
                    ),
                ));
            }
        }
    }
    Ok(newest.map(|(_, text)| text))
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
                        segmentation: None,
                        margin_pct: benchlab_stats::DEFAULT_MARGIN_PCT,
                        newest: None,
                    };
                    let i = match out.iter().position(|o| o.key() == s.key()) {
                        Some(i) => i,
                        None => {
                            out.push(s);
                            out.len() - 1
                        }
                    };
                    out[i].values.push((report.run.id, cell.value));
                    // The newest run's margin and verdict (runs come
                    // oldest first).
                    let d = (c > 0)
                        .then(|| crate::document::marks::decision_at(report, table, &row.label, c))
                        .flatten();
                    out[i].newest = d.cloned();
                    if let Some(m) = report
                        .decisions
                        .iter()
                        .find(|d| d.workload == table.workload && d.metric == table.metric)
                    {
                        out[i].margin_pct = m.margin_pct;
                    }
                }
            }
        }
    }
    out
}

/// Whether a change from `before` to `after` is better, for `better`.
pub fn is_better(better: Better, before: f64, after: f64) -> bool {
    match better {
        Better::Higher => after > before,
        Better::Lower => after < before,
    }
}
