//! Workload shapes as data: what serves a workload's clients, whether it
//! has a clients axis, how each metric combines over clients and targets,
//! and which report views it asks for.
//!
//! The engine and the renderers interpret these declarations; none of them
//! looks at a workload's kind or at its metric names to decide anything
//! (the review of the first issues found both: a sum-or-mean rule read from
//! metric-name prefixes, a report that parsed IOzone point labels).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use crate::combine::Combine;
use crate::param::{ParamDefault, ParamKind, ParamSpec};
use crate::recorder::HistogramData;
use crate::result::SideResult;

/// What serves a workload's clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerSide {
    /// benchlab's own server side (`net.*`): an agent runs
    /// [`crate::Workload::serve`].
    Own,
    /// A real third-party server (a web server, a broker, a file server)
    /// that benchlab starts or is pointed at; its server side only
    /// *observes* it (CPU time, RSS, context switches of its processes).
    Service,
    /// No server at all (`fs.matrix`).
    None,
}

/// The figure a matrix view summarises each table with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatrixSummary {
    /// Geometric mean over the cells (IOzone studies' headline).
    GeoMean,
    /// Plain mean over the cells.
    Mean,
}

/// A report view a workload asks for. Owned strings, because views are
/// stored with the run's resolved plan and read back by later versions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "view", rename_all = "lowercase")]
pub enum ViewSpec {
    /// Configurations as columns, one row per value of `row_param`.
    Table {
        /// The parameter whose values form rows.
        row_param: String,
    },
    /// A matrix per metric: rows × columns of two parameters (IOzone's
    /// file size × record size), with a summary figure.
    Matrix {
        /// The parameter of the rows.
        row_param: String,
        /// The parameter of the columns.
        col_param: String,
        /// The metrics, one matrix each.
        metrics: Vec<String>,
        /// How each matrix is summarised.
        summary: MatrixSummary,
    },
    /// A metric against a parameter, one line per configuration: a scaling
    /// curve when `x_param` is `clients` (seed 004's Figure 2). The
    /// renderers mark each line's peak, its value there, and how far it
    /// falls after it.
    Curve {
        /// The x axis (`clients`).
        x_param: String,
        /// The y axis.
        metric: String,
    },
    /// A time series each repetition records per interval (mq.latency's
    /// per-second mean latency, seed 003's Figures 6–7): one chart per
    /// configuration, one line per point, drawn from the repetition that
    /// gives the point's quoted `metric`; a band of each interval's spread
    /// (or its lowest and highest values) where the workload records it. Text
    /// renderers show each line's summary.
    Series {
        /// The series of each interval's figure (`interval_mean_ns`).
        series: String,
        /// The series of each interval's lowest value, for the band.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<String>,
        /// The series of each interval's highest value, for the band.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<String>,
        /// The series of each interval's standard deviation: with it the
        /// band drawn is the interval's mean ± one standard deviation,
        /// within its min and max (see `benchlab_report::series`), and
        /// min–max only sums a line up.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spread: Option<String>,
        /// The series counting each interval's observations: an interval
        /// without any is a gap, not a zero.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<String>,
        /// The chart's caption.
        title: String,
        /// The unit shown (`ms`).
        unit: String,
        /// Stored value × `scale` = the value in `unit`.
        scale: f64,
        /// The parameter holding an interval's length in seconds (the x
        /// axis is then time); without it the x axis counts intervals.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interval_param: Option<String>,
        /// The metric whose quoted repetition is drawn (the study's
        /// selection rule picks it, as for the tables).
        metric: String,
    },
}

/// The name of the clients axis in study files and point parameters.
pub const CLIENTS: &str = "clients";

/// The `clients` parameter, for the option table of a workload that
/// declares [`crate::Workload::clients_axis`]: its values form the sweep,
/// and the engine spreads each point's clients over the client hosts.
pub const CLIENTS_PARAM: ParamSpec = ParamSpec {
    name: CLIENTS,
    kind: ParamKind::Count,
    default: ParamDefault::Int(1),
    help: "simultaneous clients, spread evenly over the client hosts (a sweep such as [1, 2, 4] or \"1..64\" gives a scaling curve)",
};

/// This client side's share of a point's clients: indices
/// `first .. first + count` of `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientShare {
    /// Index of this side's first client.
    pub first: u32,
    /// How many clients this side runs.
    pub count: u32,
    /// Clients of the point over all client hosts.
    pub total: u32,
}

impl Default for ClientShare {
    fn default() -> Self {
        ClientShare {
            first: 0,
            count: 1,
            total: 1,
        }
    }
}

impl ClientShare {
    /// Spreads `total` clients evenly over `hosts` client hosts: the first
    /// `total % hosts` hosts take one more. Hosts whose share would be
    /// empty get none (the caller skips them).
    pub fn spread(total: u32, hosts: usize) -> Vec<ClientShare> {
        let hosts = hosts.max(1) as u32;
        let base = total / hosts;
        let extra = total % hosts;
        let mut first = 0;
        let mut out = Vec::new();
        for i in 0..hosts {
            let count = base + u32::from(i < extra);
            if count > 0 {
                out.push(ClientShare {
                    first,
                    count,
                    total,
                });
            }
            first += count;
        }
        out
    }
}

/// The service a [`ServerSide::Service`] workload drives, as its client
/// side sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceInfo {
    /// The study's name of the service (`web`).
    pub name: String,
    /// Its kind (`nginx`, `apache2`, `command`, `external`).
    pub kind: String,
    /// The directory it serves files from, when it has one and benchlab
    /// may write there (a workload puts its content in place).
    pub document_root: Option<PathBuf>,
    /// Its port.
    pub port: u16,
}

/// Merges the raw results of several client sides of one point: counters
/// add, histograms merge exactly, series are kept from the first part that
/// has them, values follow `value_rule`, CPU use adds its times, and the
/// peak RSS is the largest.
pub fn merge_sides(
    parts: Vec<SideResult>,
    value_rule: &dyn Fn(&str) -> Combine,
) -> Result<SideResult, String> {
    let mut parts = parts.into_iter();
    let Some(mut out) = parts.next() else {
        return Ok(SideResult::default());
    };
    let rest: Vec<SideResult> = parts.collect();
    if rest.is_empty() {
        return Ok(out);
    }
    for p in &rest {
        for (k, v) in &p.counters {
            *out.counters.entry(k.clone()).or_insert(0) += v;
        }
        for (k, h) in &p.histograms {
            let merged = match out.histograms.get(k) {
                Some(mine) => mine.merge(h)?,
                None => h.clone(),
            };
            out.histograms.insert(k.clone(), merged);
        }
        for (k, s) in &p.series {
            out.series.entry(k.clone()).or_insert_with(|| s.clone());
        }
        out.peak_rss_kib = out.peak_rss_kib.max(p.peak_rss_kib);
        if let (Some(a), Some(b)) = (out.cpu.as_mut(), p.cpu.as_ref()) {
            a.process_cpu_s += b.process_cpu_s;
            a.elapsed_s = a.elapsed_s.max(b.elapsed_s);
            a.process_util_pct = if a.elapsed_s > 0.0 {
                100.0 * a.process_cpu_s / a.elapsed_s
            } else {
                f64::NAN
            };
            a.system_util_pct = (a.system_util_pct + b.system_util_pct) / 2.0;
        }
    }
    let names: Vec<String> = out.values.keys().cloned().collect();
    for name in names {
        let mut vals = vec![out.values[&name]];
        vals.extend(rest.iter().filter_map(|p| p.values.get(&name).copied()));
        let rule = match value_rule(&name) {
            // A value has no raw parts to merge: its largest stands.
            Combine::Merged => Combine::Max,
            r => r,
        };
        if let Some(v) = rule.apply(&vals) {
            out.values.insert(name, v);
        }
    }
    Ok(out)
}

impl HistogramData {
    /// The exact merge of two recordings: the HDR histograms add, count,
    /// min and max are exact, and mean and standard deviation are pooled
    /// exactly from each part's count, mean and (n − 1) deviation.
    pub fn merge(&self, other: &HistogramData) -> Result<HistogramData, String> {
        if self.count == 0 {
            return Ok(other.clone());
        }
        if other.count == 0 {
            return Ok(self.clone());
        }
        let mut a = self.decode()?;
        let b = other.decode()?;
        a.add(&b)
            .map_err(|e| format!("merging histograms: {e:?}"))?;
        let (n1, n2) = (self.count as f64, other.count as f64);
        let n = n1 + n2;
        let mean = (n1 * self.mean + n2 * other.mean) / n;
        // Sums of squared deviations about each part's mean, moved to the
        // pooled mean (the parallel form of Welford's update).
        let ss = |c: f64, m: f64, sd: f64| (c - 1.0).max(0.0) * sd * sd + c * (m - mean).powi(2);
        let total_ss = ss(n1, self.mean, self.stddev) + ss(n2, other.mean, other.stddev);
        let stddev = if n > 1.0 {
            (total_ss / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        Ok(HistogramData {
            unit: self.unit.clone(),
            count: self.count + other.count,
            min: self.min.min(other.min),
            max: self.max.max(other.max),
            mean,
            stddev,
            hdr_v2_base64: crate::recorder::encode_histogram(&a),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::LatencyRecorder;

    #[test]
    fn combine_rules() {
        let v = [1.0, 4.0, 2.5];
        assert_eq!(Combine::Sum.apply(&v), Some(7.5));
        assert_eq!(Combine::Mean.apply(&v), Some(2.5));
        assert_eq!(Combine::Max.apply(&v), Some(4.0));
        assert_eq!(Combine::Min.apply(&v), Some(1.0));
        assert_eq!(Combine::Merged.apply(&v), None);
        assert_eq!(Combine::Sum.apply(&[]), None);
    }

    #[test]
    fn spread_is_even_and_covers_every_index_once() {
        for total in 0..40u32 {
            for hosts in 1..5usize {
                let s = ClientShare::spread(total, hosts);
                let counts: Vec<u32> = s.iter().map(|c| c.count).collect();
                assert_eq!(counts.iter().sum::<u32>(), total);
                if let (Some(a), Some(b)) = (counts.iter().max(), counts.iter().min()) {
                    assert!(a - b <= 1, "{total} over {hosts}: {counts:?}");
                }
                let mut next = 0;
                for c in &s {
                    assert_eq!(c.first, next);
                    assert!(c.count > 0);
                    next += c.count;
                }
            }
        }
    }

    fn recorded(values: &[u64]) -> HistogramData {
        let mut r = LatencyRecorder::new(0);
        for v in values {
            r.record(*v);
        }
        r.histogram_data()
    }

    #[test]
    fn histogram_merge_equals_one_recorder_of_everything() {
        let a: Vec<u64> = (1..=500).map(|i| 1000 + i * 37 % 900).collect();
        let b: Vec<u64> = (1..=300).map(|i| 5000 + i * 53 % 4000).collect();
        let merged = recorded(&a).merge(&recorded(&b)).unwrap();
        let all: Vec<u64> = a.iter().chain(&b).copied().collect();
        let whole = recorded(&all);
        assert_eq!(merged.count, whole.count);
        assert_eq!(merged.min, whole.min);
        assert_eq!(merged.max, whole.max);
        assert!((merged.mean - whole.mean).abs() < 1e-9 * whole.mean);
        assert!((merged.stddev - whole.stddev).abs() < 1e-9 * whole.stddev);
        let (m, w) = (merged.decode().unwrap(), whole.decode().unwrap());
        for q in [0.5, 0.9, 0.99, 0.999] {
            assert_eq!(m.value_at_quantile(q), w.value_at_quantile(q));
        }
    }

    #[test]
    fn merge_sides_adds_counters_and_follows_value_rules() {
        let mut a = SideResult::default();
        a.counters.insert("requests".into(), 10);
        a.values.insert("elapsed_s".into(), 2.0);
        a.values.insert("rate".into(), 5.0);
        a.histograms.insert("latency".into(), recorded(&[10, 20]));
        let mut b = SideResult::default();
        b.counters.insert("requests".into(), 7);
        b.values.insert("elapsed_s".into(), 3.0);
        b.values.insert("rate".into(), 1.0);
        b.histograms.insert("latency".into(), recorded(&[30]));
        let rule = |n: &str| {
            if n == "rate" {
                Combine::Sum
            } else {
                Combine::Max
            }
        };
        let m = merge_sides(vec![a, b], &rule).unwrap();
        assert_eq!(m.counter("requests"), 17);
        assert_eq!(m.value("elapsed_s"), 3.0);
        assert_eq!(m.value("rate"), 6.0);
        assert_eq!(m.histograms["latency"].count, 3);
        assert_eq!(m.histograms["latency"].max, 30);
    }
}
