//! Results and metrics: a side's result, the CPU figures and how metrics
//! combine over targets.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use benchlab_core::{Combine, CpuUsage, MetricSpec, SideResult, WorkloadError};

/// Reports a side's outcome as [`WorkloadError::Aborted`] whenever the abort
/// flag is set when it returns. The two sides see the abort at different
/// moments (the timer thread polls every [`benchlab_core::ABORT_POLL`]); the side that
/// notices second usually first sees the connection the other has just
/// closed, as an error or as an ordinary end, and either is a consequence
/// of the abort: the controller has abandoned the point anyway.
pub(crate) fn abort_wins<T>(
    r: Result<T, WorkloadError>,
    abort: &AtomicBool,
) -> Result<T, WorkloadError> {
    if abort.load(Ordering::Relaxed) {
        return Err(WorkloadError::Aborted);
    }
    r
}

/// Builds a side's result; `peak_rss_kib` is read now, at the end of the
/// side's work.
pub(crate) fn side_result(
    counters: &[(&str, u64)],
    values: &[(&str, f64)],
    cpu: Option<CpuUsage>,
) -> SideResult {
    SideResult {
        counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        values: values.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        cpu,
        peak_rss_kib: benchlab_core::cpu::peak_rss_kib(),
        ..SideResult::default()
    }
}

/// Inserts a metric unless it is not a finite number (for example CPU
/// figures when `/proc/stat` was unreadable): a missing metric is honest,
/// a NaN would poison statistics and JSON.
pub(crate) fn put(metrics: &mut BTreeMap<String, f64>, name: &str, v: f64) {
    if v.is_finite() {
        metrics.insert(name.to_string(), v);
    }
}

/// `{side}_cpu_pct` (this process, getrusage) and `{side}_system_cpu_pct`
/// (whole host, /proc/stat, as netperf).
pub(crate) fn put_cpu(metrics: &mut BTreeMap<String, f64>, side: &str, cpu: Option<&CpuUsage>) {
    if let Some(c) = cpu {
        put(metrics, &format!("{side}_cpu_pct"), c.process_util_pct);
        put(
            metrics,
            &format!("{side}_system_cpu_pct"),
            c.system_util_pct,
        );
    }
}

/// Metrics that are averaged over targets: CPU percentages of both sides
/// and the measured interval.
pub(crate) fn mean_metrics(names: &[&'static str]) -> Vec<MetricSpec> {
    names
        .iter()
        .map(|n| MetricSpec::lower(n, n, 2).with(Combine::Mean))
        .collect()
}

/// Counts and throughputs that add up over targets.
pub(crate) fn sum_metrics(names: &[&'static str]) -> Vec<MetricSpec> {
    names.iter().map(|n| MetricSpec::higher(n, n, 0)).collect()
}

/// The CPU figures every net workload reports for both sides.
pub(crate) const CPU_METRICS: &[&str] = &[
    "client_cpu_pct",
    "client_system_cpu_pct",
    "server_cpu_pct",
    "server_system_cpu_pct",
    "elapsed_s",
];

/// The server's result, which every net workload needs.
pub(crate) fn need_server(
    server: Option<SideResult>,
    kind: &str,
) -> Result<SideResult, WorkloadError> {
    server
        .ok_or_else(|| WorkloadError::Other(format!("{kind}: the server side's result is missing")))
}

/// The client context's server address.
pub(crate) fn server_addr(
    server: Option<SocketAddr>,
    kind: &str,
) -> Result<SocketAddr, WorkloadError> {
    server.ok_or_else(|| WorkloadError::Other(format!("{kind}: no server address given")))
}
