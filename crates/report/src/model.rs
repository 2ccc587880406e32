//! The report model and how it is built from stored rows.

use std::collections::BTreeMap;

use benchlab_core::resolved::ResolvedPlan;
use benchlab_core::setting::ChangeStatus;
use benchlab_core::study::{Selection, Study};
use benchlab_core::{Better, Value};
use benchlab_stats as stats;
use benchlab_store::{
    ConfigRow, Event, HostRow, NoteRow, PointRow, RunRow, SampleRow, SampleStatus, ServiceRow,
};
use serde::{Deserialize, Serialize};

use crate::views::{self, View, WorkloadPlan};

/// The noise band within which a difference is not called real, in %.
pub const NOISE_PCT: f64 = stats::DEFAULT_NOISE_PCT;

/// One figure of a table: the quoted value of a (configuration, point)
/// and the repetitions it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// The quoted figure (by the study's selection rule).
    pub value: f64,
    /// Confidence interval of the quoted figure, when there are enough
    /// repetitions.
    pub ci: Option<stats::Interval>,
    /// Every successful repetition's figure, in repetition order.
    pub values: Vec<f64>,
    /// Repetitions that failed or were skipped.
    pub failed: usize,
    /// The block each of `values` ran in, when the configurations ran in
    /// blocks (sequential or blocks order); empty when they alternated at
    /// every repetition or the figures come from elsewhere (another run, a
    /// paper). Comparisons of blocked cells use the blocks' spread.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<u32>,
}

/// The advantage of one configuration over the first at one row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Advantage {
    /// % advantage of the quoted figures, as the seeds compute it:
    /// (A − B)/B for higher-is-better, (B − A)/B for lower-is-better.
    pub pct: f64,
    /// The comparison of all repetitions (CI and verdict), when both sides
    /// have at least two.
    pub comparison: Option<stats::Comparison>,
}

/// One row of a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The row's value of the row parameter (or "Average").
    pub label: String,
    /// One cell per configuration (None: no successful repetition).
    pub cells: Vec<Option<Cell>>,
    /// For configurations 1.., their advantage over configuration 0.
    pub advantages: Vec<Option<Advantage>>,
}

/// A table: one metric of one workload at fixed values of the other swept
/// parameters; rows = the row parameter, columns = configurations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// Workload name.
    pub workload: String,
    /// Workload kind.
    pub kind: String,
    /// Metric key.
    pub metric: String,
    /// Caption with unit.
    pub title: String,
    /// The other swept parameters' values (`protocol=tcp`), or empty.
    pub fixed: String,
    /// The row parameter.
    pub row_param: String,
    /// Better direction.
    pub better: Better,
    /// Decimals shown.
    pub decimals: usize,
    /// Decimals of the "% advantage" columns.
    #[serde(default = "two")]
    pub advantage_decimals: usize,
    /// Configuration names, in study order.
    pub columns: Vec<String>,
    /// Rows in sweep order.
    pub rows: Vec<Row>,
    /// The "Average" row over all rows, when the workload has one.
    pub average: Option<Row>,
}

fn two() -> usize {
    2
}

/// A repetition that did not produce a figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// Configuration name.
    pub configuration: String,
    /// Workload name.
    pub workload: String,
    /// Point label.
    pub point: String,
    /// Repetition.
    pub repetition: u32,
    /// failed or skipped.
    pub status: SampleStatus,
    /// Why.
    pub reason: String,
}

/// Every stored figure of one point under one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// Configuration name.
    pub configuration: String,
    /// Workload name.
    pub workload: String,
    /// Workload kind.
    pub kind: String,
    /// Swept values.
    pub label: String,
    /// Effective parameters.
    pub params: BTreeMap<String, Value>,
    /// Per metric, the repetitions' figures in order (NaN for failed).
    pub metrics: BTreeMap<String, Vec<f64>>,
    /// Per metric, the summary of the successful repetitions.
    pub summaries: BTreeMap<String, stats::Summary>,
}

/// A setting a configuration changed on a host, before → after (the
/// environment layer records these when it applies a profile; the store
/// keeps them per run, configuration and host).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingChange {
    /// Configuration name.
    pub configuration: String,
    /// Host name.
    pub host: String,
    /// The setting (`sysctl net.core.rmem_max`, `cpufreq governor`, …).
    pub setting: String,
    /// Its value before the configuration was applied (None: absent).
    pub before: Option<String>,
    /// Its value while the configuration ran (None: removed).
    pub after: Option<String>,
    /// What became of it.
    pub status: ChangeStatus,
    /// Why it was skipped or failed, or any other remark.
    pub note: Option<String>,
}

/// Quantiles shown in latency-distribution charts, with their labels.
pub const LATENCY_QUANTILES: [(f64, &str); 9] = [
    (0.0, "min"),
    (0.1, "p10"),
    (0.25, "p25"),
    (0.5, "p50"),
    (0.75, "p75"),
    (0.9, "p90"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (1.0, "max"),
];

/// Most time-series points a report keeps per view (evenly thinned), so
/// that an HTML report stays small.
pub const MAX_SERIES_POINTS: usize = 400;

/// The latency distribution and time series of one repetition of one
/// point (the median run of its headline figure): the data of the latency
/// and jitter charts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyView {
    /// Configuration name.
    pub configuration: String,
    /// Workload name.
    pub workload: String,
    /// Point label.
    pub point: String,
    /// The repetition shown.
    pub repetition: u32,
    /// Histogram name (e.g. `rtt_half`).
    pub name: String,
    /// Values at [`LATENCY_QUANTILES`], in µs (from the HDR histogram,
    /// three significant digits; min and max exact).
    pub quantiles_us: Vec<f64>,
    /// The time series in µs, thinned to at most [`MAX_SERIES_POINTS`].
    pub series_us: Vec<f64>,
    /// Observations between two series points.
    pub series_stride: u64,
}

/// Latency views of every point whose sides recorded histograms: for each
/// point, the median run of its headline metric (the first table metric),
/// whose side results `side_results(point_id, repetition)` supplies.
pub fn latency_views(
    points: &[PointRow],
    samples: &[SampleRow],
    plan: &ResolvedPlan,
    mut side_results: impl FnMut(i64, u32) -> Vec<(String, benchlab_core::SideResult)>,
    configurations: &[ConfigRow],
) -> Vec<LatencyView> {
    let mut out = Vec::new();
    for p in points {
        let (Some(shape), Some(entry)) = (
            plan.workloads.get(p.workload_idx),
            plan.study.workloads.get(p.workload_idx),
        ) else {
            continue;
        };
        let mut fixed = p.params.clone();
        fixed.0.remove(&entry.rows);
        let Some(spec) = shape.table_metrics(&fixed).into_iter().next() else {
            continue;
        };
        let reps: Vec<&SampleRow> = samples
            .iter()
            .filter(|s| s.point_id == p.id && s.status == SampleStatus::Ok)
            .collect();
        let values: Vec<f64> = reps
            .iter()
            .map(|s| s.metrics.get(&spec.name).copied().unwrap_or(f64::NAN))
            .collect();
        let Some(i) = stats::median_run(&values) else {
            continue;
        };
        let rep = reps[i].repetition;
        for (side, r) in side_results(p.id, rep) {
            for (name, h) in &r.histograms {
                let Ok(hist) = h.decode() else { continue };
                if h.count == 0 {
                    continue;
                }
                let quantiles_us = LATENCY_QUANTILES
                    .iter()
                    .map(|(q, _)| match *q {
                        0.0 => h.min as f64 / 1e3,
                        1.0 => h.max as f64 / 1e3,
                        q => hist.value_at_quantile(q) as f64 / 1e3,
                    })
                    .collect();
                let (series_us, series_stride) = match r.series.get(name) {
                    Some(s) => {
                        let step = s.values.len().div_ceil(MAX_SERIES_POINTS).max(1);
                        (
                            s.values
                                .iter()
                                .step_by(step)
                                .map(|v| *v as f64 / 1e3)
                                .collect(),
                            s.stride * step as u64,
                        )
                    }
                    None => (Vec::new(), 0),
                };
                out.push(LatencyView {
                    configuration: configurations
                        .get(p.config_idx)
                        .map(|c| c.name.clone())
                        .unwrap_or_default(),
                    workload: p.workload_name.clone(),
                    point: p.label.clone(),
                    repetition: rep,
                    name: format!("{name} ({side})"),
                    quantiles_us,
                    series_us,
                    series_stride,
                });
            }
        }
    }
    out
}

/// A whole run, ready to render.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The run.
    pub run: RunRow,
    /// Its configurations.
    pub configurations: Vec<ConfigRow>,
    /// How quoted figures were chosen.
    pub selection: Selection,
    /// The tables.
    pub tables: Vec<Table>,
    /// Every point's figures.
    pub points: Vec<PointResult>,
    /// Repetitions without a figure.
    pub failures: Vec<Failure>,
    /// Every host of the run with its roles and inventory (the
    /// system-configuration appendix).
    pub hosts: Vec<HostRow>,
    /// How many repetitions each point got, in words (the methodology
    /// appendix states it with the n of every figure).
    #[serde(default)]
    pub repetition_rule: String,
    /// The order the configurations ran in and why, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub order: String,
    /// With an A/A control (`[study] control = true`): its comparisons
    /// with the first configuration, the machine against itself. The
    /// control is not a column of the tables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub control: Vec<ControlComparison>,
    /// The settings each configuration changed (empty when none did, or
    /// when the store does not record them).
    #[serde(default)]
    pub settings: Vec<SettingChange>,
    /// The run's events (started, resumed, interrupted, completed).
    #[serde(default)]
    pub events: Vec<Event>,
    /// Latency distributions and time series (ping-pong and other
    /// workloads that record histograms), for the HTML charts.
    #[serde(default)]
    pub latency: Vec<LatencyView>,
    /// The matrix and curve views the workloads declare (their table
    /// views are [`RunReport::tables`]).
    #[serde(default)]
    pub views: Vec<View>,
    /// The workloads' remarks on their results (a clipped socket buffer
    /// …), each with the points it concerns.
    #[serde(default)]
    pub notes: Vec<Note>,
    /// The reproduced study's preparation steps and their status here
    /// (`[[study.step]]`), for the methodology appendix.
    #[serde(default)]
    pub steps: Vec<benchlab_core::study::Step>,
    /// The real servers the run started, each time it started one.
    #[serde(default)]
    pub services: Vec<ServiceRecord>,
    /// `[[study.crosscheck]]`: each native point over its classic tool's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crosschecks: Vec<crate::crosscheck::CrosscheckRow>,
}

/// One comparison of the A/A control with the configuration it repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlComparison {
    /// The table it belongs to (as the renderers title it).
    pub table: String,
    /// The row.
    pub row: String,
    /// The control's advantage over the first configuration, with its
    /// verdict: anything but "no difference" or "inconclusive" is a false
    /// positive of this run.
    pub advantage: Option<Advantage>,
}

impl RunReport {
    /// The A/A control's verdicts: (called better or worse, compared).
    pub fn control_false_positives(&self) -> (usize, usize) {
        let compared: Vec<&stats::Comparison> = self
            .control
            .iter()
            .filter_map(|c| c.advantage.as_ref()?.comparison.as_ref())
            .collect();
        let called = compared
            .iter()
            .filter(|c| matches!(c.verdict, stats::Verdict::Better | stats::Verdict::Worse))
            .count();
        (called, compared.len())
    }
}

/// A managed service as it ran, for the appendix: what the service crate
/// described when it started (version, effective configuration with
/// secrets masked, placement …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceRecord {
    /// The configuration it ran for.
    pub configuration: String,
    /// The study's name of the service.
    pub name: String,
    /// The service's description as stored.
    pub description: serde_json::Value,
}

impl ServiceRecord {
    fn text(&self, key: &str) -> String {
        match &self.description[key] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => String::new(),
            other => other.to_string(),
        }
    }

    /// `nginx/1.22.1` (or the program for a command).
    pub fn version(&self) -> String {
        let v = self.text("version");
        if v.is_empty() {
            self.text("program")
        } else {
            v
        }
    }

    /// Where it ran and on which CPUs.
    pub fn placement(&self) -> String {
        let cpus = match self.description["cpus"].as_array() {
            Some(c) if !c.is_empty() => format!(
                "CPU{} {}",
                if c.len() == 1 { "" } else { "s" },
                c.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            _ => "any CPU".into(),
        };
        format!("{} on {}, {cpus}", self.text("listen"), self.text("host"))
    }

    /// The effective configuration file, verbatim (secrets masked).
    pub fn config(&self) -> String {
        self.text("config")
    }

    /// Where the configuration came from.
    pub fn config_origin(&self) -> String {
        self.text("config_origin")
    }
}

/// The services of a run, once per (configuration, name, configuration
/// text): a restart with the same set-up is not listed again.
pub fn services(configurations: &[ConfigRow], rows: Vec<ServiceRow>) -> Vec<ServiceRecord> {
    let mut out: Vec<ServiceRecord> = Vec::new();
    for row in rows {
        let c = row.config_idx;
        let r = ServiceRecord {
            configuration: configurations
                .get(c)
                .map(|x| x.name.clone())
                .unwrap_or_else(|| format!("#{c}")),
            name: row.name,
            description: row.description,
        };
        if !out.iter().any(|o| {
            o.configuration == r.configuration
                && o.name == r.name
                && o.version() == r.version()
                && o.placement_key() == r.placement_key()
        }) {
            out.push(r);
        }
    }
    out
}

impl ServiceRecord {
    /// What makes two starts the same set-up: the configuration text and
    /// the CPUs (the port and scratch paths differ at every start).
    fn placement_key(&self) -> String {
        format!("{}", self.description["cpus"])
    }
}

/// Each workload's view plan from the run's stored plan: the views and
/// metrics its workload declared, and which of its parameters are byte
/// counts.
pub fn plans(plan: &ResolvedPlan) -> Vec<WorkloadPlan> {
    plan.study
        .workloads
        .iter()
        .zip(&plan.workloads)
        .map(|(entry, shape)| {
            let mut metrics = shape.metrics.clone();
            for t in &shape.tables {
                for m in &t.metrics {
                    if !metrics.iter().any(|x| x.name == m.name) {
                        metrics.push(m.clone());
                    }
                }
            }
            WorkloadPlan {
                workload: entry.name.clone(),
                kind: entry.kind.clone(),
                views: shape.views.clone(),
                metrics,
                byte_params: shape.byte_params.clone(),
                table_metrics: shape
                    .tables
                    .iter()
                    .flat_map(|t| t.metrics.iter().map(|m| m.name.clone()))
                    .collect(),
            }
        })
        .collect()
}

/// A workload's remark on its results ([`benchlab_core::Workload::notes`]),
/// once per distinct text, with every (configuration · point) it concerns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    /// Workload name.
    pub workload: String,
    /// The remark.
    pub text: String,
    /// `configuration · point` of every repetition it was made for, once
    /// each.
    pub points: Vec<String>,
}

/// The notes a run stored on its repetitions ([`NoteRow`]), once per
/// distinct text of each workload, with the points they concern.
pub fn notes(points: &[PointRow], configurations: &[ConfigRow], stored: &[NoteRow]) -> Vec<Note> {
    let mut out: Vec<Note> = Vec::new();
    for p in points {
        let at = format!(
            "{} · {}",
            configurations
                .get(p.config_idx)
                .map(|c| c.name.as_str())
                .unwrap_or("?"),
            p.label
        );
        for n in stored.iter().filter(|n| n.point_id == p.id) {
            let i = match out
                .iter()
                .position(|o| o.workload == p.workload_name && o.text == n.text)
            {
                Some(i) => i,
                None => {
                    out.push(Note {
                        workload: p.workload_name.clone(),
                        text: n.text.clone(),
                        points: Vec::new(),
                    });
                    out.len() - 1
                }
            };
            if !out[i].points.contains(&at) {
                out[i].points.push(at.clone());
            }
        }
    }
    out
}

/// The repetition rule of a study, in words.
pub fn repetition_rule(study: &Study) -> String {
    let describe = |w: &benchlab_core::study::WorkloadEntry| match w.adaptive {
        Some(a) => stats::StopRule::new(a.min, a.max, a.target_ci_pct)
            .map(|r| r.describe())
            .unwrap_or_default(),
        None => format!("a fixed {} repetition(s) per point", w.repetitions),
    };
    if study.workloads.iter().any(|w| w.adaptive.is_some()) {
        let mut rules: Vec<String> = study.workloads.iter().map(describe).collect();
        rules.dedup();
        if rules.len() == 1 {
            return rules.remove(0);
        }
        return study
            .workloads
            .iter()
            .map(|w| format!("{}: {}", w.name, describe(w)))
            .collect::<Vec<_>>()
            .join("; ");
    }
    let mut counts: Vec<u32> = study.workloads.iter().map(|w| w.repetitions).collect();
    counts.sort_unstable();
    counts.dedup();
    match counts.as_slice() {
        [] => "no workloads".into(),
        [n] => format!("a fixed {n} repetition(s) per point"),
        _ => {
            let per: Vec<String> = study
                .workloads
                .iter()
                .map(|w| format!("{} {}", w.name, w.repetitions))
                .collect();
            format!("fixed repetitions per point: {}", per.join(", "))
        }
    }
}

/// The quoted figure of a cell and its interval. `stddevs`, aligned with
/// `values`, are each repetition's standard deviation, for
/// [`Selection::MedianStddevRun`].
pub(crate) fn quoted(
    values: &[f64],
    stddevs: Option<&[f64]>,
    selection: Selection,
) -> Option<(f64, Option<stats::Interval>)> {
    let s = stats::summarize(values)?;
    Some(match selection {
        Selection::Median => (s.median, s.median_ci),
        Selection::Mean => (s.mean, s.mean_ci),
        Selection::MedianRun => (values[stats::median_run(values)?], None),
        Selection::MedianStddevRun => match stddevs.and_then(stats::median_stddev_run) {
            Some(i) => (values[i], None),
            None => (values[stats::median_run(values)?], None),
        },
    })
}

/// The metric holding the per-repetition standard deviation of `name`:
/// `x_mean_unit` → `x_stddev_unit` (e.g. `rtt_half_mean_us` →
/// `rtt_half_stddev_us`).
fn stddev_companion(name: &str) -> Option<String> {
    name.contains("_mean")
        .then(|| name.replacen("_mean", "_stddev", 1))
}

/// `values` and its companion standard deviations, keeping only the
/// repetitions where both are finite, so that they stay aligned.
fn with_stddevs(all: &[f64], sd: Option<&Vec<f64>>) -> (Vec<f64>, Option<Vec<f64>>) {
    match sd {
        Some(sd) if sd.len() == all.len() => {
            let (v, s): (Vec<f64>, Vec<f64>) = all
                .iter()
                .zip(sd)
                .filter(|(v, s)| v.is_finite() && s.is_finite())
                .map(|(v, s)| (*v, *s))
                .unzip();
            (v, Some(s))
        }
        _ => (
            all.iter().copied().filter(|x| x.is_finite()).collect(),
            None,
        ),
    }
}

fn sort_key(v: Option<&Value>) -> (f64, String) {
    match v {
        Some(v) => (v.as_f64().unwrap_or(f64::NAN), v.label()),
        None => (f64::NAN, String::new()),
    }
}

/// Builds the tables, views and appendices of a run from its stored
/// resolved plan (the typed study and what its workloads declared when it
/// was made), its rows and its workloads' `notes` ([`notes`]); the loader
/// ([`crate::load`]) adds what the store keeps beside (events, settings,
/// services, latency distributions).
pub(crate) fn build(
    run: &RunRow,
    plan: &ResolvedPlan,
    configurations: &[ConfigRow],
    points: &[PointRow],
    samples: &[SampleRow],
    hosts: &[HostRow],
    notes: &[Note],
) -> RunReport {
    let study = &plan.study;
    let plans = plans(plan);
    let selection = study.defaults.select;
    let mut by_point: BTreeMap<i64, Vec<&SampleRow>> = BTreeMap::new();
    for s in samples {
        by_point.entry(s.point_id).or_default().push(s);
    }
    let config_name = |i: usize| {
        configurations
            .get(i)
            .map(|c| c.name.clone())
            .unwrap_or_else(|| format!("#{i}"))
    };

    let mut failures = Vec::new();
    let mut results = Vec::new();
    for p in points {
        let reps = by_point.get(&p.id).cloned().unwrap_or_default();
        let mut metrics: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let names: std::collections::BTreeSet<String> = reps
            .iter()
            .flat_map(|s| s.metrics.keys().cloned())
            .collect();
        for s in &reps {
            if s.status != SampleStatus::Ok {
                failures.push(Failure {
                    configuration: config_name(p.config_idx),
                    workload: p.workload_name.clone(),
                    point: p.label.clone(),
                    repetition: s.repetition,
                    status: s.status,
                    reason: s.reason.clone().unwrap_or_default(),
                });
            }
            for n in &names {
                metrics
                    .entry(n.clone())
                    .or_default()
                    .push(s.metrics.get(n).copied().unwrap_or(f64::NAN));
            }
        }
        let summaries = metrics
            .iter()
            .filter_map(|(k, v)| {
                let ok: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
                stats::summarize(&ok).map(|s| (k.clone(), s))
            })
            .collect();
        results.push((p, reps, metrics, summaries));
    }

    // The A/A control is the last configuration: compared, then taken
    // out of the columns.
    let control = (study.control && configurations.len() > 1).then(|| configurations.len() - 1);
    let shown = &configurations[..control.unwrap_or(configurations.len())];
    let mut control_rows = Vec::new();
    let mut tables = Vec::new();
    for (w, entry) in study.workloads.iter().enumerate() {
        let Some(wl) = plan.workloads.get(w) else {
            continue;
        };
        let planned_reps = if run.options.quick {
            1
        } else {
            entry.repetitions
        };
        if !plans.get(w).is_none_or(WorkloadPlan::has_table) {
            continue;
        }
        let wpoints: Vec<_> = results.iter().filter(|r| r.0.workload_idx == w).collect();
        if wpoints.is_empty() {
            continue;
        }
        // Group points by the swept values other than the row parameter.
        let others: Vec<&str> = entry
            .axes
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| *n != entry.rows)
            .collect();
        let group_of = |p: &PointRow| {
            others
                .iter()
                .map(|n| {
                    format!(
                        "{n}={}",
                        p.params.get(n).map(|v| v.label()).unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut groups: Vec<String> = Vec::new();
        for r in &wpoints {
            let g = group_of(r.0);
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        for g in groups {
            let gpoints: Vec<_> = wpoints.iter().filter(|r| group_of(r.0) == g).collect();
            // Captions come from what is fixed within the table: the row
            // parameter varies, so the workload does not see it.
            let mut fixed = gpoints[0].0.params.clone();
            fixed.0.remove(&entry.rows);
            let specs = wl.table_metrics(&fixed);
            // Row values in numeric order.
            let mut row_values: Vec<(f64, String)> = Vec::new();
            for r in &gpoints {
                let k = sort_key(r.0.params.get(&entry.rows));
                if !row_values.iter().any(|x| x.1 == k.1) {
                    row_values.push(k);
                }
            }
            row_values.sort_by(|a, b| {
                a.0.partial_cmp(&b.0)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(a.1.cmp(&b.1))
            });
            for spec in specs {
                let better = spec.better;
                let sbetter = match better {
                    Better::Higher => stats::Better::Higher,
                    Better::Lower => stats::Better::Lower,
                };
                let mut rows = Vec::new();
                for (_, rv) in &row_values {
                    let mut cells = Vec::new();
                    for c in 0..configurations.len() {
                        let r = gpoints.iter().find(|r| {
                            r.0.config_idx == c
                                && r.0
                                    .params
                                    .get(&entry.rows)
                                    .map(|v| v.label())
                                    .unwrap_or_default()
                                    == *rv
                        });
                        cells.push(r.and_then(|r| {
                            let all = r.2.get(&spec.name)?;
                            let sd = stddev_companion(&spec.name).and_then(|n| r.2.get(&n));
                            let (values, stddevs) = match selection {
                                Selection::MedianStddevRun => with_stddevs(all, sd),
                                _ => (
                                    all.iter().copied().filter(|x| x.is_finite()).collect(),
                                    None,
                                ),
                            };
                            let failed =
                                r.1.iter().filter(|s| s.status != SampleStatus::Ok).count();
                            let (value, ci) = quoted(&values, stddevs.as_deref(), selection)?;
                            let blocks = if study.order.alternates() {
                                Vec::new()
                            } else {
                                let sd = (selection == Selection::MedianStddevRun)
                                    .then_some(sd)
                                    .flatten();
                                kept(all, sd)
                                    .map(|i| study.order.block(r.1[i].repetition, planned_reps))
                                    .collect()
                            };
                            Some(Cell {
                                value,
                                ci,
                                values,
                                failed,
                                blocks,
                            })
                        }));
                    }
                    let mut advantages = advantages_with(&cells, sbetter, control);
                    if let Some(k) = control {
                        cells.remove(k);
                        let adv = advantages.remove(k - 1);
                        control_rows.push(ControlComparison {
                            table: [entry.name.as_str(), spec.label.as_str(), g.as_str()]
                                .iter()
                                .filter(|s| !s.is_empty())
                                .copied()
                                .collect::<Vec<_>>()
                                .join(" · "),
                            row: rv.clone(),
                            advantage: adv,
                        });
                    }
                    rows.push(Row {
                        label: rv.clone(),
                        cells,
                        advantages,
                    });
                }
                let average = wl
                    .average_row
                    .then(|| average_row(&rows, shown.len(), sbetter));
                tables.push(Table {
                    workload: entry.name.clone(),
                    kind: entry.kind.clone(),
                    metric: spec.name.to_string(),
                    title: spec.label.to_string(),
                    fixed: g.clone(),
                    row_param: entry.rows.clone(),
                    better,
                    decimals: spec.decimals,
                    advantage_decimals: 2,
                    columns: shown.iter().map(|c| c.name.clone()).collect(),
                    rows,
                    average,
                });
            }
        }
    }

    let points: Vec<PointResult> = results
        .into_iter()
        .map(|(p, _, metrics, summaries)| PointResult {
            configuration: config_name(p.config_idx),
            workload: p.workload_name.clone(),
            kind: p.kind.clone(),
            label: p.label.clone(),
            params: p.params.0.clone(),
            metrics,
            summaries,
        })
        .collect();
    let names: Vec<String> = shown.iter().map(|c| c.name.clone()).collect();
    // A view's notes: those made on any of its points.
    let view_notes = |vpoints: &[&PointResult]| -> Vec<String> {
        notes
            .iter()
            .filter(|n| {
                vpoints.iter().any(|p| {
                    p.workload == n.workload
                        && n.points
                            .iter()
                            .any(|at| *at == format!("{} · {}", p.configuration, p.label))
                })
            })
            .map(|n| n.text.clone())
            .collect()
    };
    let views = views::build(&plans, &points, &names, selection, &view_notes);
    let mut report = RunReport {
        run: run.clone(),
        configurations: shown.to_vec(),
        selection,
        tables,
        points,
        failures,
        hosts: hosts.to_vec(),
        repetition_rule: repetition_rule(study),
        order: study.order_text(),
        control: control_rows,
        settings: Vec::new(),
        events: Vec::new(),
        latency: Vec::new(),
        views,
        notes: notes.to_vec(),
        steps: study.steps.clone(),
        services: Vec::new(),
        crosschecks: Vec::new(),
    };
    report.crosschecks = crate::crosscheck::rows(&study.crosschecks, &report.points);
    // Summaries derived from several points (seed 001's Figure 1) become
    // ordinary tables, so every renderer shows them.
    let summaries = views::summary_tables(&plans, &report.points, &names, selection);
    report.tables.extend(summaries);
    report
}

/// The "Average" row over a table's rows: per configuration the mean of the
/// quoted figures (seed 000's "Average" rows), present only when every row
/// has a figure. The seeds compute its advantage from the averages, not by
/// averaging the advantages (32.93 % against 32.92 % in Figure 9), and so
/// does benchlab.
pub(crate) fn average_row(rows: &[Row], columns: usize, better: stats::Better) -> Row {
    let cells: Vec<Option<Cell>> = (0..columns)
        .map(|c| {
            let vals: Vec<f64> = rows
                .iter()
                .filter_map(|r| r.cells[c].as_ref().map(|x| x.value))
                .collect();
            (vals.len() == rows.len() && !vals.is_empty()).then(|| Cell {
                value: stats::mean(&vals).unwrap_or(f64::NAN),
                ci: None,
                values: vals,
                failed: 0,
                blocks: Vec::new(),
            })
        })
        .collect();
    let advantages = cells
        .iter()
        .skip(1)
        .map(|c| match (c, &cells[0]) {
            (Some(a), Some(b)) => {
                stats::advantage_pct(a.value, b.value, better).map(|pct| Advantage {
                    pct,
                    comparison: None,
                })
            }
            _ => None,
        })
        .collect();
    Row {
        label: "Average".into(),
        cells,
        advantages,
    }
}

/// Each configuration's advantage over the first (the baseline), with the
/// comparison of their repetitions when both have at least two.
pub fn advantages(cells: &[Option<Cell>], better: stats::Better) -> Vec<Option<Advantage>> {
    advantages_with(cells, better, None)
}

/// Block numbers of an A/A control's figures, moved clear of the first
/// configuration's when they count as more blocks of it.
const CONTROL_BLOCKS: u32 = 1 << 20;

/// [`advantages`], with `control` the column of an A/A control that
/// repeats the first configuration: for the spread between blocks, its
/// blocks count as more blocks of the first configuration (with one block
/// each otherwise, they are what lets drift be measured at all).
///
/// When every cell carries its blocks (the configurations ran in blocks),
/// the comparisons are [`stats::compare_blocked`] with the row's
/// [`stats::block_spread`]; otherwise [`stats::compare`].
pub(crate) fn advantages_with(
    cells: &[Option<Cell>],
    better: stats::Better,
    control: Option<usize>,
) -> Vec<Option<Advantage>> {
    let present: Vec<&Cell> = cells.iter().flatten().collect();
    let blocked = !present.is_empty() && present.iter().all(|c| !c.blocks.is_empty());
    let spread = if blocked {
        // The first configuration with its control, then the others.
        let mut first = (Vec::new(), Vec::new());
        for (i, c) in cells.iter().enumerate() {
            if let (Some(c), true) = (c, i == 0 || Some(i) == control) {
                let shift = if i == 0 { 0 } else { CONTROL_BLOCKS };
                first.0.extend_from_slice(&c.values);
                first.1.extend(c.blocks.iter().map(|b| b + shift));
            }
        }
        let mut sides = vec![stats::Blocked {
            values: &first.0,
            blocks: &first.1,
        }];
        for (i, c) in cells.iter().enumerate() {
            if let (Some(c), false) = (c, i == 0 || Some(i) == control) {
                sides.push(stats::Blocked {
                    values: &c.values,
                    blocks: &c.blocks,
                });
            }
        }
        let sides: Vec<_> = sides.into_iter().filter(|s| !s.values.is_empty()).collect();
        stats::block_spread(&sides)
    } else {
        None
    };
    cells
        .iter()
        .skip(1)
        .map(|c| match (c, &cells[0]) {
            (Some(a), Some(b)) => stats::advantage_pct(a.value, b.value, better).map(|pct| {
                let comparison = if blocked {
                    stats::compare_blocked(
                        stats::Blocked {
                            values: &a.values,
                            blocks: &a.blocks,
                        },
                        stats::Blocked {
                            values: &b.values,
                            blocks: &b.blocks,
                        },
                        spread,
                        better,
                        NOISE_PCT,
                    )
                } else {
                    stats::compare(&a.values, &b.values, better, NOISE_PCT)
                };
                Advantage {
                    pct,
                    comparison: comparison.filter(|c| c.verdict != stats::Verdict::Insufficient),
                }
            }),
            _ => None,
        })
        .collect()
}

/// Indices of the figures a cell keeps: finite, and with a finite
/// companion standard deviation when `sd` is given (as [`with_stddevs`]).
fn kept<'a>(all: &'a [f64], sd: Option<&'a Vec<f64>>) -> impl Iterator<Item = usize> + 'a {
    let sd = sd.filter(|sd| sd.len() == all.len());
    (0..all.len()).filter(move |&i| all[i].is_finite() && sd.is_none_or(|sd| sd[i].is_finite()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 003's rule: of nine runs, the one with the median standard
    /// deviation is quoted, whatever its mean.
    #[test]
    fn median_stddev_run_quotes_the_run_with_the_median_stddev() {
        let means = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0];
        let sds = [0.31, 0.12, 0.57, 0.44, 0.29, 0.90, 0.33, 0.21, 0.48];
        // Sorted stddevs: .12 .21 .29 .31 .33 … → 0.33, run 6 (mean 16).
        let (v, s) = with_stddevs(&means, Some(&sds.to_vec()));
        let (value, ci) = quoted(&v, s.as_deref(), Selection::MedianStddevRun).unwrap();
        assert_eq!((value, ci), (16.0, None));
        // Without a companion metric: the median run.
        let (value, _) = quoted(&means, None, Selection::MedianStddevRun).unwrap();
        assert_eq!(value, 14.0);
        // A failed repetition (NaN) drops from both, keeping them aligned.
        let (v, s) = with_stddevs(&[1.0, f64::NAN, 3.0], Some(&vec![0.5, 0.1, 0.2]));
        assert_eq!((v, s), (vec![1.0, 3.0], Some(vec![0.5, 0.2])));
        assert_eq!(
            stddev_companion("rtt_half_mean_us").as_deref(),
            Some("rtt_half_stddev_us")
        );
        assert_eq!(stddev_companion("rtt_us"), None);
    }
}
