//! Plain, serializable results. Every renderer, the store and the
//! statistics work from these; nothing here knows how it will be shown.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::recorder::{HistogramData, Series};

/// CPU use of one side over its measured interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// Wall-clock length of the interval.
    pub elapsed_s: f64,
    /// CPU time of the benchlab process itself (user + system).
    pub process_cpu_s: f64,
    /// `process_cpu_s / elapsed_s` × 100 (can exceed 100 with threads).
    pub process_util_pct: f64,
    /// System-wide utilization over all CPUs from `/proc/stat`, as netperf
    /// reports it (`100 − 100·Δidle/Δtotal`): other load counts too.
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
}

/// The result of one repetition of one point: the derived metrics and both
/// sides' raw results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Derived figures, keyed by metric name (see the workload's
    /// [`crate::MetricSpec`]s), units in the names.
    pub metrics: BTreeMap<String, f64>,
    /// The client side's raw result.
    pub client: SideResult,
    /// The server side's raw result, when the workload has one.
    pub server: Option<SideResult>,
}
