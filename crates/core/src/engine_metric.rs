//! Figures the engine adds to a repetition's results, beside a workload's
//! own: peak memory of the benchlab sides, and what a managed service's
//! processes used over the point. A workload reads them through these
//! handles (`server.engine(SERVICE_CPU_S)`), so a renamed figure is a
//! compile error rather than a silent NaN, and each carries how several
//! targets' figures combine.

use crate::combine::Combine;

/// One engine-provided figure: its stored name and how the figures of
/// several targets combine into one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineMetric {
    name: &'static str,
    combine: Combine,
}

impl EngineMetric {
    /// The name it is stored under, in a sample's metrics or a side's
    /// values and counters.
    pub const fn name(self) -> &'static str {
        self.name
    }

    /// How several targets' figures combine (the sum of two guests'
    /// service CPU; the larger of two peaks).
    pub const fn combine(self) -> Combine {
        self.combine
    }
}

const fn metric(name: &'static str, combine: Combine) -> EngineMetric {
    EngineMetric { name, combine }
}

/// Peak resident set of the process that ran the client side, in KiB.
pub const CLIENT_PEAK_RSS_KIB: EngineMetric = metric("client_peak_rss_kib", Combine::Max);
/// Peak resident set of benchlab's server side, in KiB.
pub const SERVER_PEAK_RSS_KIB: EngineMetric = metric("server_peak_rss_kib", Combine::Max);
/// CPU seconds a managed service's processes used over the point.
pub const SERVICE_CPU_S: EngineMetric = metric("service_cpu_s", Combine::Sum);
/// That CPU time over the point's wall time, in % of one CPU.
pub const SERVICE_UTIL_PCT: EngineMetric = metric("service_util_pct", Combine::Sum);
/// The service's processes' resident set at the end of the point, in KiB.
pub const SERVICE_RSS_KIB: EngineMetric = metric("service_rss_kib", Combine::Sum);
/// The wall time the service's usage was measured over, in seconds.
pub const SERVICE_ELAPSED_S: EngineMetric = metric("service_elapsed_s", Combine::Mean);
/// Voluntary context switches of the service's processes over the point.
pub const SERVICE_VOLUNTARY_CTXT_SWITCHES: EngineMetric =
    metric("service_voluntary_ctxt_switches", Combine::Sum);
/// Involuntary context switches of the service's processes over the point.
pub const SERVICE_NONVOLUNTARY_CTXT_SWITCHES: EngineMetric =
    metric("service_nonvoluntary_ctxt_switches", Combine::Sum);

/// Every engine-provided figure.
pub const ALL: &[EngineMetric] = &[
    CLIENT_PEAK_RSS_KIB,
    SERVER_PEAK_RSS_KIB,
    SERVICE_CPU_S,
    SERVICE_UTIL_PCT,
    SERVICE_RSS_KIB,
    SERVICE_ELAPSED_S,
    SERVICE_VOLUNTARY_CTXT_SWITCHES,
    SERVICE_NONVOLUNTARY_CTXT_SWITCHES,
];

/// The engine figure stored under `name`, if it is one.
pub fn by_name(name: &str) -> Option<EngineMetric> {
    ALL.iter().copied().find(|m| m.name == name)
}
