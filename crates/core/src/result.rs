//! Plain, serializable results. Every renderer, the store and the
//! statistics work from these; nothing here knows how it will be shown.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::recorder::{HistogramData, Series};

/// CPU use of one side over its measured interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// Wall-clock length of the interval.
    #[serde(with = "nan_as_null")]
    pub elapsed_s: f64,
    /// CPU time of the benchlab process itself (user + system).
    #[serde(with = "nan_as_null")]
    pub process_cpu_s: f64,
    /// `process_cpu_s / elapsed_s` × 100 (can exceed 100 with threads).
    #[serde(with = "nan_as_null")]
    pub process_util_pct: f64,
    /// System-wide utilization over all CPUs from `/proc/stat`, as netperf
    /// reports it (`100 − 100·Δidle/Δtotal`): other load counts too.
    #[serde(with = "nan_as_null")]
    pub system_util_pct: f64,
    /// The number of CPUs `/proc/stat` listed.
    pub ncpus: u32,
}

/// What one side (client or server) of a workload returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideResult {
    /// Exact event counts (`bytes`, `calls`, `transactions` …).
    pub counters: BTreeMap<String, u64>,
    /// Measured quantities (`elapsed_s` …).
    #[serde(with = "nan_map_as_null")]
    pub values: BTreeMap<String, f64>,
    /// Latency distributions.
    pub histograms: BTreeMap<String, HistogramData>,
    /// Downsampled time series (for jitter charts).
    pub series: BTreeMap<String, Series>,
    /// CPU use over the measured interval, when measured.
    pub cpu: Option<CpuUsage>,
    /// Peak resident set size of the process that ran this side, in KiB.
    pub peak_rss_kib: u64,
}

impl SideResult {
    /// A counter, 0 when absent.
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// A value, NaN when absent.
    pub fn value(&self, name: &str) -> f64 {
        self.values.get(name).copied().unwrap_or(f64::NAN)
    }

    /// An engine-provided value (a managed service's CPU …), NaN when
    /// absent.
    pub fn engine(&self, m: crate::engine_metric::EngineMetric) -> f64 {
        self.value(m.name())
    }

    /// Sets an engine-provided value.
    pub fn set_engine(&mut self, m: crate::engine_metric::EngineMetric, v: f64) {
        self.values.insert(m.name().to_string(), v);
    }
}

/// The result of one repetition of one point: the derived metrics and both
/// sides' raw results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Derived figures, keyed by metric name (see the workload's
    /// [`crate::MetricSpec`]s), units in the names.
    #[serde(with = "nan_map_as_null")]
    pub metrics: BTreeMap<String, f64>,
    /// The client side's raw result.
    pub client: SideResult,
    /// The server side's raw result, when the workload has one.
    pub server: Option<SideResult>,
    /// With several targets: each target's raw results, by host name.
    /// The metrics above are then the aggregate plus each target's own
    /// figures as `metric@host` (their one copy), and `client`/`server`
    /// are empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub targets: BTreeMap<String, TargetSides>,
}

/// One target's raw results in a sample of several targets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetSides {
    /// Its client hosts' merged result.
    pub client: SideResult,
    /// Its server side's result, when the workload has one.
    pub server: Option<SideResult>,
}

/// Serde for `f64` fields that may be NaN ("not measured"): JSON has no
/// NaN, and serde_json writes it as `null`, which it then refuses to read
/// back as a number. Here NaN ↔ `null` both ways.
pub mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes NaN (and infinities) as `null`.
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }

    /// Reads `null` as NaN.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

/// [`nan_as_null`] for maps of `f64`.
pub mod nan_map_as_null {
    use std::collections::BTreeMap;

    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes non-finite values as `null`.
    pub fn serialize<S: Serializer>(m: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(m.len()))?;
        for (k, v) in m {
            map.serialize_entry(k, &v.is_finite().then_some(*v))?;
        }
        map.end()
    }

    /// Reads `null` as NaN.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        let m = BTreeMap::<String, Option<f64>>::deserialize(d)?;
        Ok(m.into_iter()
            .map(|(k, v)| (k, v.unwrap_or(f64::NAN)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_survives_json() {
        let mut r = SideResult {
            cpu: Some(CpuUsage {
                elapsed_s: 0.0,
                process_cpu_s: 0.0,
                process_util_pct: f64::NAN,
                system_util_pct: f64::NAN,
                ncpus: 2,
            }),
            ..SideResult::default()
        };
        r.values.insert("x".into(), f64::NAN);
        let back: SideResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert!(back.value("x").is_nan());
        assert!(back.cpu.unwrap().system_util_pct.is_nan());
        let mut s = Sample::default();
        s.metrics.insert("m".into(), f64::INFINITY);
        let back: Sample = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert!(back.metrics["m"].is_nan());
    }
}
