//! `[defaults]`: repetitions, times, the quoted figure's selection and what
//! a failed point does, for every workload that does not give its own.

use super::values::join;
use super::{Ctx, DeValue, StudyError, Tab, Val};

/// How the figure quoted for a point is chosen from its repetitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Selection {
    /// The median of the repetitions, with its confidence interval.
    Median,
    /// The repetition whose figure is the median (seeds 000, 001).
    MedianRun,
    /// The repetition whose standard deviation is the median (seed 003:
    /// "chose the run which corresponded to the median standard
    /// deviation"); the standard deviation of a metric `x_mean_…` is its
    /// companion `x_stddev_…`. Metrics without one fall back to the median
    /// run.
    MedianStddevRun,
    /// The mean of the repetitions.
    Mean,
}

/// What a failed point does to the study.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Record the failure and go on (the default).
    Continue,
    /// Record the failure and stop the run.
    Stop,
}

/// Adaptive repetitions (`repetitions = { min = 3, max = 10, target_ci =
/// "2%" }`): repeat a point until the 95 % confidence interval of its
/// headline figure is within ±`target_ci_pct` % of it, between `min` and
/// `max` repetitions. The stop rule itself is `benchlab_stats::should_stop`.
///
/// Invariant: `1 <= min <= max`, `target_ci_pct > 0`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Adaptive {
    /// Fewest repetitions.
    pub min: u32,
    /// Most repetitions (the planned count).
    pub max: u32,
    /// Target half-width of the interval, in percent of the figure.
    pub target_ci_pct: f64,
}

/// The study's `[defaults]`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Defaults {
    /// Repetitions of every point (with `adaptive`: the most).
    pub repetitions: u32,
    /// Adaptive repetitions, when `repetitions` is a table.
    pub adaptive: Option<Adaptive>,
    /// Warm-up before each measured interval, s.
    pub warmup_s: f64,
    /// Pause between points, s.
    pub quiesce_s: f64,
    /// Measured time of one repetition, s.
    pub duration_s: f64,
    /// How the quoted figure is chosen.
    pub select: Selection,
    /// What a failed point does.
    pub on_error: OnError,
}

/// Defaults used when `[defaults]` does not give a key.
pub const DEFAULT_REPETITIONS: u32 = 3;

/// The most repetitions any count in a study may ask for (fixed,
/// adaptive or a budget): past any design that finishes, and small enough
/// that a plan of every unit stays small.
pub const MAX_REPETITIONS: u32 = 1_000;
/// Default warm-up (s).
pub const DEFAULT_WARMUP_S: f64 = 1.0;
/// Default quiesce (s).
pub const DEFAULT_QUIESCE_S: f64 = 1.0;
/// Default duration (s): netperf's `-l` default.
pub const DEFAULT_DURATION_S: f64 = 10.0;

const DEFAULT_KEYS: &[&str] = &[
    "repetitions",
    "warmup_s",
    "quiesce_s",
    "duration_s",
    "select",
    "on_error",
];
const SELECTIONS: &[&str] = &["median", "median-run", "median-stddev-run", "mean"];
const ON_ERRORS: &[&str] = &["continue", "stop"];

impl Ctx<'_> {
    /// `[defaults]`.
    pub(super) fn defaults(&self, doc: &Tab) -> Result<Defaults, StudyError> {
        let mut defaults = Defaults {
            repetitions: DEFAULT_REPETITIONS,
            adaptive: None,
            warmup_s: DEFAULT_WARMUP_S,
            quiesce_s: DEFAULT_QUIESCE_S,
            duration_s: DEFAULT_DURATION_S,
            select: Selection::Median,
            on_error: OnError::Continue,
        };
        if let Some(v) = doc.get("defaults") {
            let t = self.table(v, "defaults")?;
            self.check_keys(t, "defaults", DEFAULT_KEYS)?;
            if let Some(x) = t.get("repetitions") {
                (defaults.repetitions, defaults.adaptive) =
                    self.repetitions(x, "defaults.repetitions")?;
            }
            if let Some(x) = t.get("warmup_s") {
                defaults.warmup_s = self.seconds(x, "defaults.warmup_s")?;
            }
            if let Some(x) = t.get("quiesce_s") {
                defaults.quiesce_s = self.seconds(x, "defaults.quiesce_s")?;
            }
            if let Some(x) = t.get("duration_s") {
                defaults.duration_s = self.seconds(x, "defaults.duration_s")?;
                if defaults.duration_s <= 0.0 {
                    return Err(self.err(
                        x.span(),
                        "defaults.duration_s",
                        "must be more than 0 seconds",
                    ));
                }
            }
            if let Some(x) = t.get("select") {
                defaults.select = match self.choice(x, "defaults.select", SELECTIONS)?.as_str() {
                    "median-run" => Selection::MedianRun,
                    "median-stddev-run" => Selection::MedianStddevRun,
                    "mean" => Selection::Mean,
                    _ => Selection::Median,
                };
            }
            if let Some(x) = t.get("on_error") {
                defaults.on_error = match self.choice(x, "defaults.on_error", ON_ERRORS)?.as_str() {
                    "stop" => OnError::Stop,
                    _ => OnError::Continue,
                };
            }
        }

        Ok(defaults)
    }

    /// `repetitions`: an integer ≥ 1, or `{ min, max, target_ci }`.
    pub(super) fn repetitions(
        &self,
        v: &Val,
        path: &str,
    ) -> Result<(u32, Option<Adaptive>), StudyError> {
        const KEYS: &[&str] = &["min", "max", "target_ci"];
        let DeValue::Table(t) = v.get_ref() else {
            // Not a table: the integer form, with its own errors, which
            // mention the table form too.
            return self.repetition_count(v, path, 1).map(|n| (n, None)).map_err(|mut e| {
                e.message = format!(
                    "{} (or a table {{ min = 3, max = 10, target_ci = \"2%\" }} for adaptive repetitions; allowed keys: {})",
                    e.message,
                    KEYS.join(", ")
                );
                e
            });
        };
        self.check_keys(t, path, KEYS)?;
        let min = match t.get("min") {
            Some(x) => self.repetition_count(x, &join(path, "min"), 1)?,
            None => DEFAULT_REPETITIONS,
        };
        let Some(max_v) = t.get("max") else {
            return Err(self.err(
                v.span(),
                path,
                "adaptive repetitions need `max` (allowed keys: min, max, target_ci)",
            ));
        };
        let max = self.repetition_count(max_v, &join(path, "max"), 1)?;
        if max < min {
            return Err(self.err(
                max_v.span(),
                &join(path, "max"),
                format!("{max} is less than min = {min}"),
            ));
        }
        let Some(target) = t.get("target_ci") else {
            return Err(self.err(
                v.span(),
                path,
                "adaptive repetitions need `target_ci`, e.g. \"2%\" (allowed keys: min, max, target_ci)",
            ));
        };
        let tpath = join(path, "target_ci");
        let pct = match target.get_ref() {
            DeValue::String(s) => s
                .trim()
                .strip_suffix('%')
                .and_then(|n| n.trim().parse::<f64>().ok()),
            _ => None,
        };
        let Some(pct) = pct.filter(|p| p.is_finite() && *p > 0.0) else {
            return Err(self.err(
                target.span(),
                &tpath,
                "expected a positive percentage such as \"2%\" (the 95 % interval's half-width relative to the figure)",
            ));
        };
        Ok((
            max,
            Some(Adaptive {
                min,
                max,
                target_ci_pct: pct,
            }),
        ))
    }
}
