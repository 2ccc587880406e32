//! How a metric's figures combine across the parts of a point (client
//! hosts, targets): a rule every layer names, so it depends on nothing.

use serde::{Deserialize, Serialize};

/// How a metric combines across the client hosts of a point and across
/// the targets driven at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Combine {
    /// Throughputs and counts: the whole is the sum of its parts.
    Sum,
    /// Latencies, percentages, sizes: the plain mean of the parts.
    Mean,
    /// The largest part (a maximum latency, the longest interval).
    Max,
    /// The smallest part (a minimum latency).
    Min,
    /// Not a function of the parts' figures (percentiles): the raw results
    /// are merged (counters added, HDR histograms merged) and the workload
    /// derives the metric again from the merge.
    Merged,
}

impl Combine {
    /// Combines figures of the parts; `None` for [`Combine::Merged`] (the
    /// caller recomputes it) and for no parts.
    pub fn apply(self, parts: &[f64]) -> Option<f64> {
        if parts.is_empty() {
            return None;
        }
        let sum: f64 = parts.iter().sum();
        match self {
            Combine::Sum => Some(sum),
            Combine::Mean => Some(sum / parts.len() as f64),
            Combine::Max => parts.iter().copied().reduce(f64::max),
            Combine::Min => parts.iter().copied().reduce(f64::min),
            Combine::Merged => None,
        }
    }
}
