//! The report model: plain, serializable data that every renderer reads
//! (tables, cells, advantages, views, appendices). How it is built from
//! stored rows is [`crate::build`]; how its figures are written is
//! [`crate::format`].

use std::collections::BTreeMap;

use benchlab_core::decision::{Decided, DesignSummary};
use benchlab_core::setting::ChangeStatus;
use benchlab_core::study::Selection;
use benchlab_core::{Better, Value};
use benchlab_stats as stats;
use benchlab_store::{ConfigRow, Event, HostRow, RunRow, SampleStatus};
use serde::{Deserialize, Serialize};

pub use benchlab_core::resolved::MetricInfo;
use benchlab_core::{MatrixSummary, ViewSpec};

/// Most time-series points a report keeps per view (evenly thinned), so
/// that an HTML report stays small.
pub const MAX_SERIES_POINTS: usize = 400;

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
    /// The comparison of all repetitions (Fieller's interval, the rank
    /// test), when both sides have at least two. Its `verdict` is the
    /// retired ±1 % band's, kept for readers of older JSON; reports judge
    /// by `decided`.
    pub comparison: Option<stats::Comparison>,
    /// The sequential rule's verdict on this advantage: the run's stored
    /// decision (until-decided design), or the rule's one look at the
    /// repetitions there are (a fixed design, an older run, a comparison
    /// of runs). Its interval, margin and repetitions are in
    /// [`RunReport::decisions`]. `None` where no verdict is possible
    /// (fewer than two units: one repetition, one block each, a published
    /// figure, an Average row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<Decided>,
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
    /// What `--only` left out of the study file, one line per kind
    /// (`ran 2 of 4 configurations: left out …`); every header says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
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
    pub crosschecks: Vec<CrosscheckRow>,
    /// The time series the workloads declare ([`ViewSpec::Series`]): per
    /// workload and configuration, each point's series in its quoted
    /// repetition, from the stored side results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<SeriesView>,
    /// The system monitors of every host at every point, where they
    /// differ between configurations, and their per-second CPU charts.
    #[serde(default, skip_serializing_if = "MonitorReport::is_empty")]
    pub monitors: MonitorReport,
    /// The configurations that ran on emulated (TCG) guests, whose
    /// figures every rendering marks: not a virtualization measurement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub emulated: Vec<Emulated>,
    /// The until-decided design's cost and outcome (`None` for a run of
    /// the fixed design).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<DesignSummary>,
    /// Every comparison's verdict under the sequential rule, the A/A
    /// control's included: an until-decided run's as it stored them; for
    /// a fixed design, an older run or a comparison of runs, the rule's
    /// one look at the repetitions there are (docs/methods.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<Decision>,
    /// The call-stack profiles (`stacks` in the study): each side's
    /// folded stacks, what sampling cost, and what grew against the
    /// first configuration.
    #[serde(default, skip_serializing_if = "crate::stacks::StacksReport::is_empty")]
    pub stacks: crate::stacks::StacksReport,
}

/// One comparison's verdict under the sequential rule: a configuration
/// against the first at one point, on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The compared configuration.
    pub configuration: String,
    /// Whether it is the A/A control (the first configuration repeated):
    /// a better or worse verdict of it is a false positive of this run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub control: bool,
    /// The workload.
    pub workload: String,
    /// The point's label.
    pub point: String,
    /// The metric compared.
    pub metric: String,
    /// The verdict.
    pub verdict: Decided,
    /// Successful repetitions per side it rests on (the fewer of the two).
    pub repetitions: u32,
    /// The margin it was decided against, in percent.
    pub margin_pct: f64,
    /// The compared configuration's advantage, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advantage_pct: Option<f64>,
    /// The interval of the advantage the sequential rule used (valid
    /// under its repeated looks), in percent: its lower end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_lo_pct: Option<f64>,
    /// Its upper end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_hi_pct: Option<f64>,
    /// Undecided only: the smallest difference the data so far would
    /// detect at 80 % power, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mde_pct: Option<f64>,
}

/// A configuration whose figures came, in part, from emulated guests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Emulated {
    /// The configuration (a comparison's column label).
    pub configuration: String,
    /// Its emulated guests, in the order its points use them.
    pub guests: Vec<EmulatedGuest>,
}

/// One emulated guest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulatedGuest {
    /// The study's host name.
    pub host: String,
    /// Why it ran emulated (`KVM cannot run a guest here (…)`).
    pub reason: String,
}

/// What the monitors recorded for a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MonitorReport {
    /// Per (configuration, point, host), in the plan's order.
    pub points: Vec<MonitorPoint>,
    /// Where a configuration's monitors differ from the first
    /// configuration's at the same point and host.
    pub differences: Vec<MonitorDifference>,
    /// Per (configuration, point, host), CPU busy per CPU each interval
    /// of one repetition (the median run of the headline metric).
    pub charts: Vec<SeriesView>,
}

impl MonitorReport {
    /// Nothing recorded (monitors off, an imported or older run).
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

/// One host's monitors at one point under one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorPoint {
    /// Configuration name.
    pub configuration: String,
    /// Workload name.
    pub workload: String,
    /// Point label.
    pub point: String,
    /// The host (the study's name).
    pub host: String,
    /// Repetitions whose summaries are averaged.
    pub repetitions: usize,
    /// The mean of those summaries (counters: the mean per repetition).
    pub summary: benchlab_monitor::Summary,
    /// Figures per operation, when the point has an operation rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_operation: Option<PerOperation>,
    /// Interrupts per MB moved by the host's interfaces and disks, when
    /// it moved at least 1 MB per repetition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupts_per_mb: Option<f64>,
}

/// The host's work divided by the point's operations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerOperation {
    /// The metric read as the rate, as the workload declared it
    /// (`Workload::operation_rate`, stored with the run's plan).
    pub metric: String,
    /// Its mean over the repetitions, per second.
    pub rate_per_s: f64,
    /// CPU time of every CPU of the host per operation, µs.
    pub cpu_us: f64,
    /// Context switches per operation.
    pub context_switches: f64,
    /// Interrupts per operation.
    pub interrupts: f64,
}

/// A monitor figure that differs between two configurations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorDifference {
    /// Workload name.
    pub workload: String,
    /// Point label.
    pub point: String,
    /// Host.
    pub host: String,
    /// The configuration that differs.
    pub configuration: String,
    /// The configuration it is compared with (the first).
    pub baseline: String,
    /// The figure (`CPU 1 in softirq`, `context switches`).
    pub what: String,
    /// Its value under `configuration`.
    pub value: f64,
    /// Its value under `baseline`.
    pub baseline_value: f64,
    /// `%` or `/s`.
    pub unit: String,
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
    /// The A/A control's verdicts under the sequential rule: (called
    /// better or worse, compared).
    pub fn control_false_positives(&self) -> (usize, usize) {
        let control: Vec<&Decision> = self.decisions.iter().filter(|d| d.control).collect();
        let called = control
            .iter()
            .filter(|d| matches!(d.verdict, Decided::Better | Decided::Worse))
            .count();
        (called, control.len())
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

impl ServiceRecord {
    /// What makes two starts the same set-up: the configuration text and
    /// the CPUs (the port and scratch paths differ at every start).
    pub(crate) fn placement_key(&self) -> String {
        format!("{}", self.description["cpus"])
    }
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

/// What the views of one workload are built from: plain data, so that
/// it can be read from a stored plan as well as from the registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadPlan {
    /// The workload's name in the study (points carry it).
    pub workload: String,
    /// Its kind.
    pub kind: String,
    /// The views it asks for.
    pub views: Vec<ViewSpec>,
    /// Every metric it derives.
    pub metrics: Vec<MetricInfo>,
    /// Parameters whose values are byte counts (axis labels `64KiB`).
    #[serde(default)]
    pub byte_params: Vec<String>,
    /// The metrics of its tables: a matrix of one of them also gets its
    /// summary as a table, with advantages and verdicts.
    #[serde(default)]
    pub table_metrics: Vec<String>,
}
impl WorkloadPlan {
    pub(crate) fn metric(&self, name: &str) -> MetricInfo {
        self.metrics
            .iter()
            .find(|m| m.name == name)
            .cloned()
            .unwrap_or_else(|| MetricInfo {
                name: name.to_string(),
                label: name.to_string(),
                better: Better::Higher,
                decimals: 0,
                combine: benchlab_core::Combine::Mean,
            })
    }

    /// Whether the workload asks for tables (every workload does unless
    /// it declares views without one).
    pub fn has_table(&self) -> bool {
        self.views.is_empty()
            || self
                .views
                .iter()
                .any(|v| matches!(v, ViewSpec::Table { .. }))
    }
}
/// Notes on how the figures of a view were obtained, supplied by the
/// caller from the view's points (a cache mode, a size scale).
pub type Notes<'a> = &'a dyn Fn(&[&PointResult]) -> Vec<String>;
/// A view ready to render.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "view", rename_all = "lowercase")]
pub enum View {
    /// Matrices of two parameters, one per configuration and metric.
    Matrix(MatrixView),
    /// A metric against a parameter, one line per configuration.
    Curve(CurveView),
}
impl View {
    /// The workload the view belongs to.
    pub fn workload(&self) -> &str {
        match self {
            View::Matrix(m) => &m.workload,
            View::Curve(c) => &c.workload,
        }
    }
}
/// One matrix: a configuration's figures of one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Matrix {
    /// Configuration name.
    pub configuration: String,
    /// Metric key.
    pub metric: String,
    /// The metric's caption.
    pub title: String,
    /// Decimals shown.
    pub decimals: usize,
    /// Better direction (the heat map's colour runs from worse to better).
    pub better: Better,
    /// `cells[row][col]`: the quoted figure, None where the point was not
    /// planned or has no figure.
    pub cells: Vec<Vec<Option<f64>>>,
    /// The view's summary over the cells, when every planned cell has a
    /// figure.
    pub summary: Option<f64>,
}
/// The matrices of one workload at fixed values of its other swept
/// parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixView {
    /// Workload name.
    pub workload: String,
    /// Workload kind.
    pub kind: String,
    /// The other swept parameters' values (`cache=direct`), or empty.
    pub fixed: String,
    /// The parameter of the rows.
    pub row_param: String,
    /// The parameter of the columns.
    pub col_param: String,
    /// Row labels, in numeric order.
    pub rows: Vec<String>,
    /// Column labels, in numeric order.
    pub cols: Vec<String>,
    /// How each matrix is summarised.
    pub summary: MatrixSummary,
    /// How the figures were obtained.
    pub notes: Vec<String>,
    /// Per configuration (study order), per metric (the view's order).
    pub matrices: Vec<Matrix>,
}
impl MatrixView {
    /// The summary's name in words.
    pub fn summary_text(&self) -> &'static str {
        match self.summary {
            MatrixSummary::GeoMean => "geometric mean",
            MatrixSummary::Mean => "mean",
        }
    }
}
/// One figure of a curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// The quoted figure.
    pub value: f64,
    /// Its confidence interval, when there are enough repetitions.
    pub ci: Option<stats::Interval>,
    /// Repetitions behind it.
    pub n: usize,
}
/// Where a line is best, and how far it falls after that.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    /// Index into the curve's x values.
    pub index: usize,
    /// The x label there.
    pub x: String,
    /// The figure there.
    pub value: f64,
    /// After the peak: the last x with a figure, its figure and how much
    /// worse it is than the peak in % of the peak (falls for
    /// higher-is-better, rises for lower-is-better); None when the peak is
    /// the last figure.
    pub decline: Option<Decline>,
}
/// The drop after a peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decline {
    /// The last x with a figure.
    pub x: String,
    /// Its figure.
    pub value: f64,
    /// How much worse than the peak, in % of the peak.
    pub pct: f64,
}
/// One configuration's line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurveLine {
    /// Configuration name.
    pub configuration: String,
    /// One entry per x value (None: no figure).
    pub points: Vec<Option<CurvePoint>>,
    /// Its peak, when it has any figure.
    pub peak: Option<Peak>,
}
/// A configuration's peak against the first configuration's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeakRatio {
    /// The configuration.
    pub configuration: String,
    /// The baseline (the first configuration with a peak).
    pub baseline: String,
    /// How many times better its peak is than the baseline's (peak ÷
    /// baseline peak when higher is better, the inverse when lower is).
    pub ratio: f64,
}
/// A metric against a parameter, one line per configuration: a scaling
/// curve when the parameter is `clients`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurveView {
    /// Workload name.
    pub workload: String,
    /// Workload kind.
    pub kind: String,
    /// The other swept parameters' values, or empty.
    pub fixed: String,
    /// The x parameter.
    pub x_param: String,
    /// Metric key.
    pub metric: String,
    /// The metric's caption.
    pub title: String,
    /// Decimals shown.
    pub decimals: usize,
    /// Better direction.
    pub better: Better,
    /// The x labels, in numeric order.
    pub x: Vec<String>,
    /// The x values (NaN for a non-numeric parameter).
    #[serde(with = "nan_vec")]
    pub x_values: Vec<f64>,
    /// One line per configuration with figures.
    pub lines: Vec<CurveLine>,
    /// Each other configuration's peak against the baseline's.
    pub ratios: Vec<PeakRatio>,
    /// How the figures were obtained.
    pub notes: Vec<String>,
    /// The sentences every renderer prints under the curve: where each
    /// line peaks and falls, and how the peaks compare.
    pub findings: Vec<String>,
    /// The study's declared comparisons (`[[study.compare]]`) at the
    /// peaks, when it declares any among these lines; they replace
    /// `ratios`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<PairRow>,
}

/// One configuration's chart of one series of one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesView {
    /// Workload name.
    pub workload: String,
    /// Workload kind.
    pub kind: String,
    /// Configuration name.
    pub configuration: String,
    /// The stored series drawn (`interval_mean_ns`).
    pub series: String,
    /// The chart's caption.
    pub title: String,
    /// The unit of every value (`ms`).
    pub unit: String,
    /// The x axis: `s` (time from the start of the measured interval) or
    /// `interval` (a count).
    pub x_unit: String,
    /// One line per point, in the plan's order.
    pub lines: Vec<SeriesLine>,
    /// What the band around each line is, in words (`mean ± 1 standard
    /// deviation, within min–max`); empty: min–max, or none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub band: String,
}

/// One point's series in one repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesLine {
    /// The point's label (`size=16`).
    pub point: String,
    /// The side that recorded it (`client`, or a target's side).
    pub side: String,
    /// The repetition drawn (the one the study's selection quotes).
    pub repetition: u32,
    /// The end of each interval, in `x_unit`.
    pub x: Vec<f64>,
    /// Each interval's figure (None: an interval without observations).
    pub mean: Vec<Option<f64>>,
    /// Each interval's lowest value, when recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub min: Vec<Option<f64>>,
    /// Each interval's highest value, when recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub max: Vec<Option<f64>>,
    /// The band drawn, its lower edge per interval, when it is not
    /// min–max (see [`SeriesView::band`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub low: Vec<Option<f64>>,
    /// The band's upper edge per interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub high: Vec<Option<f64>>,
    /// The summary the text renderers print.
    pub summary: SeriesSummary,
}

/// A line in figures: the spread of its interval figures and the
/// extremes of the band.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesSummary {
    /// Intervals with a figure.
    pub intervals: usize,
    /// Intervals without observations (latencytest's "stalled").
    pub empty: usize,
    /// Mean of the interval figures.
    #[serde(with = "benchlab_core::result::nan_as_null")]
    pub mean: f64,
    /// Standard deviation of the interval figures (seed 003's Figure 7).
    #[serde(with = "benchlab_core::result::nan_as_null")]
    pub stddev: f64,
    /// Lowest interval figure.
    #[serde(with = "benchlab_core::result::nan_as_null")]
    pub lowest: f64,
    /// Highest interval figure.
    #[serde(with = "benchlab_core::result::nan_as_null")]
    pub highest: f64,
    /// Lowest single value of any interval (the band's floor), when
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Highest single value of any interval (the band's ceiling), when
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
}

/// One declared pair at the peaks of one curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairRow {
    /// What the pair stands for (the study's label).
    pub label: String,
    /// The configuration compared.
    pub a: String,
    /// The configuration it is compared against.
    pub b: String,
    /// `a`'s peak: its x label and figure (None: no figure).
    pub a_peak: Option<PeakAt>,
    /// `b`'s peak.
    pub b_peak: Option<PeakAt>,
    /// How many times better `a`'s peak is than `b`'s (a ÷ b when higher
    /// is better, b ÷ a when lower is): seed 004's "N times faster".
    pub times: Option<f64>,
    /// `a`'s advantage over `b` at the peaks, in %: (a − b)/b when higher
    /// is better, (b − a)/b when lower is.
    pub advantage_pct: Option<f64>,
}

/// Where a line peaks and its figure there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeakAt {
    /// The x label of the peak.
    pub x: String,
    /// The figure there.
    pub value: f64,
}
/// Serde for a vector of floats that may hold NaN (JSON null).
mod nan_vec {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let o: Vec<Option<f64>> = v.iter().map(|x| x.is_finite().then_some(*x)).collect();
        o.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let o = Vec::<Option<f64>>::deserialize(d)?;
        Ok(o.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
    }
}

/// One paired point: the native figure over the classic one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrosscheckRow {
    /// Native workload name.
    pub native: String,
    /// Classic workload name.
    pub classic: String,
    /// The native workload's metric compared (`throughput_mbps`).
    pub native_metric: String,
    /// The classic tool's metric it is compared with (`throughput_Mbps`).
    pub classic_metric: String,
    /// Configuration name.
    pub configuration: String,
    /// The native point's label.
    pub point: String,
    /// Mean of the native repetitions.
    pub native_mean: f64,
    /// Mean of the classic repetitions.
    pub classic_mean: f64,
    /// Repetitions with a figure (native, classic).
    pub n: (usize, usize),
    /// native mean / classic mean.
    pub ratio: f64,
    /// The interval that decided, as a ratio (90 % for `agree`, 95 %
    /// else), when both sides have two repetitions or more and it is
    /// bounded.
    pub ci: Option<(f64, f64)>,
    /// `agree` (equivalent within the native metric's margin), `DISAGREE`
    /// (beyond it), `undecided (±X%)` (X: the difference it could detect), `too few repetitions`.
    pub verdict: String,
}
