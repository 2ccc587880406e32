//! Recorders for measured loops. They are allocated before the loop and
//! never allocate, lock or log while recording.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest latency a histogram holds: 60 s in ns. Larger values saturate.
pub const MAX_LATENCY_NS: u64 = 60_000_000_000;
/// Significant digits of the histograms (HdrHistogram's precision: 0.1 %).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A serialized HDR histogram (V2 encoding, base64) with its exact
/// summary. Percentiles taken from it have 3 significant digits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramData {
    /// Unit of the recorded values (always `ns` for latencies).
    pub unit: String,
    /// Number of recorded values.
    pub count: u64,
    /// Exact minimum.
    pub min: u64,
    /// Exact maximum.
    pub max: u64,
    /// Exact mean (NaN when empty).
    #[serde(with = "crate::result::nan_as_null")]
    pub mean: f64,
    /// Exact sample standard deviation (n − 1).
    pub stddev: f64,
    /// `hdr-v2` serialization, base64.
    pub hdr_v2_base64: String,
}

impl HistogramData {
    /// Decodes the histogram for percentile queries.
    pub fn decode(&self) -> Result<Histogram<u64>, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.hdr_v2_base64)
            .map_err(|e| e.to_string())?;
        Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("{e:?}"))
    }
}

/// The `hdr-v2` serialization of a histogram, base64.
pub(crate) fn encode_histogram(hist: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2Serializer::new()
        .serialize(hist, &mut bytes)
        .expect("serialize into memory");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A time series thinned to at most `capacity` points by keeping every
/// `stride`-th value; the stride doubles whenever the buffer fills, so the
/// points stay evenly spread over the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Unit of the values.
    pub unit: String,
    /// Value `i` is the `i·stride`-th observation.
    pub stride: u64,
    /// The kept observations.
    pub values: Vec<u64>,
}

/// Records latencies: exact count, min, max, sum and sum of squares, an
/// HDR histogram for percentiles, and a thinned series.
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    count: u64,
    sum: u128,
    sum_sq: u128,
    min: u64,
    max: u64,
    series: Vec<u64>,
    series_cap: usize,
    stride: u64,
}

impl LatencyRecorder {
    /// A recorder whose series keeps at most `series_cap` points (≥ 2).
    pub fn new(series_cap: usize) -> Self {
        let mut hist = Histogram::new_with_bounds(1, MAX_LATENCY_NS, SIGNIFICANT_DIGITS)
            .expect("valid histogram bounds");
        // All counts are allocated now; recording must never resize.
        hist.auto(false);
        let series_cap = series_cap.max(2);
        LatencyRecorder {
            hist,
            count: 0,
            sum: 0,
            sum_sq: 0,
            min: u64::MAX,
            max: 0,
            series: Vec::with_capacity(series_cap),
            series_cap,
            stride: 1,
        }
    }

    /// Records one value in ns.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
        // The stride is a power of two, so a mask replaces a division.
        if self.count & (self.stride - 1) == 0 {
            if self.series.len() == self.series_cap {
                self.thin();
            }
            if self.count & (self.stride - 1) == 0 {
                self.series.push(ns);
            }
        }
        self.count += 1;
        self.sum += ns as u128;
        self.sum_sq += (ns as u128) * (ns as u128);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// Halves the series in place (keeps even positions) and doubles the
    /// stride. Runs rarely (log2 of the count) and never allocates.
    #[cold]
    fn thin(&mut self) {
        let len = self.series.len();
        for i in 0..len.div_ceil(2) {
            self.series[i] = self.series[2 * i];
        }
        self.series.truncate(len.div_ceil(2));
        self.stride *= 2;
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact mean in ns.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            return f64::NAN;
        }
        self.sum as f64 / self.count as f64
    }

    /// Exact sample standard deviation (n − 1) in ns, computed from integer
    /// sums without cancellation: var = (n·Σx² − (Σx)²) / (n(n−1)).
    pub fn stddev(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let n = self.count as u128;
        let num = n * self.sum_sq - self.sum * self.sum;
        (num as f64 / (n as f64 * (n - 1) as f64)).sqrt()
    }

    /// Value at quantile `q` (0..=1) from the histogram.
    pub fn quantile(&self, q: f64) -> u64 {
        self.hist.value_at_quantile(q)
    }

    /// Serializes the histogram and the summary.
    pub fn histogram_data(&self) -> HistogramData {
        HistogramData {
            unit: "ns".into(),
            count: self.count,
            min: if self.count == 0 { 0 } else { self.min },
            max: self.max,
            mean: self.mean(),
            stddev: self.stddev(),
            hdr_v2_base64: encode_histogram(&self.hist),
        }
    }

    /// The thinned series.
    pub fn series(&self) -> Series {
        Series {
            unit: "ns".into(),
            stride: self.stride,
            values: self.series.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_moments_and_percentiles() {
        let mut r = LatencyRecorder::new(16);
        for v in 1..=1000u64 {
            r.record(v * 1000);
        }
        assert_eq!(r.count(), 1000);
        assert_eq!(r.mean(), 500_500.0);
        // stddev of 1000..=1_000_000 step 1000 (n-1): 1000 * sqrt(1000*1001/12)
        let expect = 1000.0 * (1000.0f64 * 1001.0 / 12.0).sqrt();
        assert!((r.stddev() - expect).abs() < 1e-6 * expect);
        let p50 = r.quantile(0.5) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.002, "{p50}");
        let h = r.histogram_data();
        assert_eq!((h.min, h.max, h.count), (1000, 1_000_000, 1000));
        let back = h.decode().unwrap();
        assert_eq!(back.len(), 1000);
        let s = r.series();
        assert!(s.values.len() <= 16);
        // The series keeps every stride-th observation, starting at the first.
        for (i, v) in s.values.iter().enumerate() {
            assert_eq!(*v, (i as u64 * s.stride + 1) * 1000);
        }
    }
}
