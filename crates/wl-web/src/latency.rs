//! A latency recorder that merges: one per generator thread, added together
//! after the run. It keeps the exact count, sum, sum of squares, minimum and
//! maximum beside the HDR histogram, so the mean and standard deviation are
//! exact and only percentiles carry the histogram's 3 significant digits
//! (core's `LatencyRecorder` has no merge, and a series per request is not
//! wanted here).

use base64::Engine;
use benchlab_core::recorder::{HistogramData, MAX_LATENCY_NS, SIGNIFICANT_DIGITS};
use hdrhistogram::serialization::{Serializer, V2Serializer};
use hdrhistogram::Histogram;

/// Latencies in ns.
pub struct Latency {
    hist: Histogram<u64>,
    count: u64,
    sum: u128,
    sum_sq: u128,
    min: u64,
    max: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty recorder, all histogram counts allocated now.
    pub fn new() -> Self {
        let mut hist = Histogram::new_with_bounds(1, MAX_LATENCY_NS, SIGNIFICANT_DIGITS)
            .expect("valid histogram bounds");
        // Recording must never resize (no allocation in the measured loop).
        hist.auto(false);
        Latency {
            hist,
            count: 0,
            sum: 0,
            sum_sq: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Records one latency.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
        self.count += 1;
        self.sum += u128::from(ns);
        self.sum_sq += u128::from(ns) * u128::from(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// Adds another recorder's values.
    pub fn merge(&mut self, other: &Latency) {
        self.hist
            .add(&other.hist)
            .expect("histograms of equal bounds add");
        self.count += other.count;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact mean in ns (NaN when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            f64::NAN
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Value at quantile `q` in ns (0 when empty).
    pub fn quantile(&self, q: f64) -> u64 {
        self.hist.value_at_quantile(q)
    }

    /// Exact sample standard deviation (n − 1).
    pub fn stddev(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let n = self.count as u128;
        let num = n * self.sum_sq - self.sum * self.sum;
        (num as f64 / (n as f64 * (n - 1) as f64)).sqrt()
    }

    /// The serialized form stored with results.
    pub fn data(&self) -> HistogramData {
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(&self.hist, &mut bytes)
            .expect("serialize into memory");
        HistogramData {
            unit: "ns".into(),
            count: self.count,
            min: if self.count == 0 { 0 } else { self.min },
            max: self.max,
            mean: self.mean(),
            stddev: self.stddev(),
            hdr_v2_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_equals_recording_all() {
        let (mut a, mut b, mut all) = (Latency::new(), Latency::new(), Latency::new());
        for v in 1..=500u64 {
            a.record(v * 1000);
            all.record(v * 1000);
        }
        for v in 501..=1000u64 {
            b.record(v * 1000);
            all.record(v * 1000);
        }
        a.merge(&b);
        assert_eq!(a.count(), 1000);
        assert_eq!(a.mean(), all.mean());
        assert_eq!(a.stddev(), all.stddev());
        assert_eq!(a.quantile(0.99), all.quantile(0.99));
        let d = a.data();
        assert_eq!((d.min, d.max), (1000, 1_000_000));
        assert_eq!(d.decode().unwrap().len(), 1000);
    }
}
