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

/// Exact sample standard deviation (n − 1) from integer sums, without
/// cancellation: var = (n·Σx² − (Σx)²) / (n(n−1)); 0 below two values.
/// Shared by [`LatencyRecorder`] and [`crate::latency::Latency`].
pub(crate) fn exact_stddev(count: u64, sum: u128, sum_sq: u128) -> f64 {
    if count < 2 {
        return 0.0;
    }
    let n = count as u128;
    let num = n * sum_sq - sum * sum;
    (num as f64 / (n as f64 * (n - 1) as f64)).sqrt()
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
///
/// The histogram's counts are kept in a flat array laid out as
/// HdrHistogram lays out its own (lowest 1 ns, [`MAX_LATENCY_NS`],
/// [`SIGNIFICANT_DIGITS`]), indexed with constant shifts; the
/// `hdrhistogram::Histogram` is built from them only when asked for
/// (percentiles, serialization). It holds exactly the counts, total, min and
/// max that `Histogram::saturating_record` would have (pinned by a test), so
/// percentiles are as accurate as before. Why: `saturating_record` re-derives
/// the bucket from run-time fields, checks the index twice (`Option`, then
/// `get_mut`), saturates the count and the total and tracks its own min and
/// max: 60 user-space instructions per record in `net.pingpong`'s client
/// loop (callgrind, `bench/per-op`), besides the ~30 of the sums, extremes
/// and series here. The flat record is 15 instructions (bin, clamp,
/// increment), 38 with the rest (the loop's disassembly).
pub struct LatencyRecorder {
    counts: Box<[u64; BINS]>,
    count: u64,
    sum: u128,
    sum_sq: u128,
    min: u64,
    max: u64,
    series: Vec<u64>,
    series_cap: usize,
    stride: u64,
    /// The count at which the next series point is due: the next multiple
    /// of `stride` (one comparison per record instead of a mask and a test).
    next_point: u64,
}

// The histogram's geometry, as `Histogram::new_with_bounds(1,
// MAX_LATENCY_NS, SIGNIFICANT_DIGITS)` derives it. With a lowest value of 1
// the unit magnitude is 0. Unit resolution is kept up to 2·10^digits, whose
// next power of two is the sub-bucket count.
const SUB_BUCKET_MAGNITUDE: u32 = (2 * 10u64.pow(SIGNIFICANT_DIGITS as u32))
    .next_power_of_two()
    .trailing_zeros();
/// log2 of half a sub-bucket count: each bucket past the first adds this
/// many bins.
const HALF_MAGNITUDE: u32 = SUB_BUCKET_MAGNITUDE - 1;
/// Values below this all go to bucket 0, one bin each.
const SUB_BUCKET_MASK: u64 = (1 << SUB_BUCKET_MAGNITUDE) - 1;
/// 64 less the bits of the largest value of bucket 0.
const LEADING_ZERO_BASE: u32 = 64 - SUB_BUCKET_MAGNITUDE;
/// Buckets that cover [`MAX_LATENCY_NS`] (HdrHistogram's `buckets_to_cover`).
const BUCKETS: u32 = {
    let mut untrackable = 1u64 << SUB_BUCKET_MAGNITUDE;
    let mut n = 1;
    while untrackable <= MAX_LATENCY_NS {
        untrackable <<= 1;
        n += 1;
    }
    n
};
/// Length of the counts array (HdrHistogram's `num_bins`).
const BINS: usize = ((BUCKETS + 1) << HALF_MAGNITUDE) as usize;
/// Where a value past the last bin goes: [`MAX_LATENCY_NS`]'s bin, as
/// `saturating_record` clamps it.
const SATURATED_INDEX: usize = bin_of(MAX_LATENCY_NS);

/// The bin of `v` (≥ 1) in HdrHistogram's layout: bucket `b` is how many
/// powers of two `v` lies above bucket 0's range, and within it `v >> b`
/// lies in the upper half of the sub-buckets, so the bin is
/// `(b << HALF_MAGNITUDE) + (v >> b)`; for bucket 0 that is `v` itself.
/// May lie past the last bin for values above [`MAX_LATENCY_NS`]'s bucket.
#[inline(always)]
const fn bin_of(v: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (v | SUB_BUCKET_MASK).leading_zeros();
    ((bucket as usize) << HALF_MAGNITUDE) + (v >> bucket) as usize
}

/// The value `saturating_record` records for `ns`: at least 1, and
/// [`MAX_LATENCY_NS`] for values past the last bin.
fn saturated(ns: u64) -> u64 {
    let v = ns.max(1);
    if bin_of(v) < BINS {
        v
    } else {
        MAX_LATENCY_NS
    }
}

/// The lowest value of bin `i` (HdrHistogram's `value_for`).
fn bin_value(i: usize) -> u64 {
    let bucket = (i >> HALF_MAGNITUDE) as i32 - 1;
    let sub = (i & ((1 << HALF_MAGNITUDE) - 1)) as u64 + (1 << HALF_MAGNITUDE);
    if bucket < 0 {
        // The lower half of bucket 0.
        sub - (1 << HALF_MAGNITUDE)
    } else {
        sub << bucket
    }
}

impl LatencyRecorder {
    /// A recorder whose series keeps at most `series_cap` points (≥ 2).
    pub fn new(series_cap: usize) -> Self {
        let series_cap = series_cap.max(2);
        // All counts are allocated now; recording never allocates.
        let counts: Box<[u64; BINS]> = vec![0u64; BINS]
            .into_boxed_slice()
            .try_into()
            .expect("BINS counts");
        LatencyRecorder {
            counts,
            count: 0,
            sum: 0,
            sum_sq: 0,
            min: u64::MAX,
            max: 0,
            series: Vec::with_capacity(series_cap),
            series_cap,
            stride: 1,
            next_point: 0,
        }
    }

    /// Records one value in ns.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        // 0 is counted as 1, as before (the histogram's lowest value).
        let i = bin_of(ns.max(1));
        // A constant bound: the compiler drops the index check.
        let i = if i < BINS { i } else { SATURATED_INDEX };
        self.counts[i] += 1;
        if self.count == self.next_point {
            self.keep_point(ns);
        }
        self.count += 1;
        self.sum += ns as u128;
        self.sum_sq += (ns as u128) * (ns as u128);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// Keeps `ns` as the series point due at this count, thinning first
    /// when the series is full. Runs once per `stride` records.
    #[inline(never)]
    fn keep_point(&mut self, ns: u64) {
        if self.series.len() == self.series_cap {
            self.thin();
        }
        // After thinning the doubled stride may skip this count.
        if self.count & (self.stride - 1) == 0 {
            self.series.push(ns);
        }
        self.next_point = (self.count | (self.stride - 1)) + 1;
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
        exact_stddev(self.count, self.sum, self.sum_sq)
    }

    /// Value at quantile `q` (0..=1) from the histogram.
    pub fn quantile(&self, q: f64) -> u64 {
        self.histogram().value_at_quantile(q)
    }

    /// The HDR histogram of the values recorded so far: the counts as
    /// `Histogram::saturating_record` of `ns.max(1)` would have them, with
    /// the same total, minimum and maximum (the exact extremes are recorded
    /// in their own bins, every other bin by its lowest value).
    pub fn histogram(&self) -> Histogram<u64> {
        let mut hist = Histogram::new_with_bounds(1, MAX_LATENCY_NS, SIGNIFICANT_DIGITS)
            .expect("valid histogram bounds");
        hist.auto(false);
        if self.count == 0 {
            return hist;
        }
        // The extremes as `saturating_record` saw them. Any value of a bin
        // counts in that bin alone, so the bins of the extremes are recorded
        // at the extremes and every other bin at its lowest value, which
        // lies between them: the same counts, total, min and max.
        let (lo, hi) = (saturated(self.min), saturated(self.max));
        let (lo_bin, hi_bin) = (bin_of(lo), bin_of(hi));
        for (i, &c) in self.counts.iter().enumerate() {
            if c > 0 {
                let v = match i {
                    _ if i == lo_bin => lo,
                    _ if i == hi_bin => hi,
                    _ => bin_value(i),
                };
                hist.record_n(v, c).expect("a value within the bounds");
            }
        }
        hist
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
            hdr_v2_base64: encode_histogram(&self.histogram()),
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
    use proptest::prelude::*;

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

    /// The histogram as it was built before the flat counts: HdrHistogram's
    /// own `saturating_record` of `ns.max(1)`.
    fn reference(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, MAX_LATENCY_NS, SIGNIFICANT_DIGITS).unwrap();
        h.auto(false);
        for &v in values {
            h.saturating_record(v.max(1));
        }
        h
    }

    fn recorded(values: &[u64]) -> LatencyRecorder {
        let mut r = LatencyRecorder::new(64);
        for &v in values {
            r.record(v);
        }
        r
    }

    const QUANTILES: &[f64] = &[
        0.0, 1e-6, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1.0,
    ];

    /// The flat counts give the very histogram `saturating_record` gave:
    /// equal (counts, total, min, max), the same serialization and the
    /// same value at every quantile.
    fn assert_same_histogram(values: &[u64]) {
        let want = reference(values);
        let r = recorded(values);
        let got = r.histogram();
        assert_eq!(got.distinct_values(), want.distinct_values());
        assert_eq!(got.len(), want.len());
        assert_eq!(got.min(), want.min(), "min of {values:?}");
        assert_eq!(got.max(), want.max(), "max of {values:?}");
        assert_eq!(got.min_nz(), want.min_nz(), "min_nz of {values:?}");
        assert!(got == want, "histograms differ for {values:?}");
        for &q in QUANTILES {
            assert_eq!(got.value_at_quantile(q), want.value_at_quantile(q), "q {q}");
            assert_eq!(r.quantile(q), want.value_at_quantile(q), "q {q}");
        }
        assert_eq!(r.histogram_data().hdr_v2_base64, encode_histogram(&want));
    }

    #[test]
    fn geometry_is_hdrhistograms() {
        let h = reference(&[]);
        assert_eq!(BINS, h.distinct_values());
        for v in [1, 2047, 2048, 4095, 4096, 1 << 20, MAX_LATENCY_NS] {
            assert_eq!(bin_value(bin_of(v)), h.lowest_equivalent(v), "{v}");
        }
    }

    #[test]
    fn flat_counts_equal_saturating_record_at_the_edges() {
        let edges = [
            0,
            1,
            2,
            1023,
            1024,
            2047,
            2048,
            2049,
            4095,
            4096,
            4097,
            999_999,
            MAX_LATENCY_NS - 1,
            MAX_LATENCY_NS,
            MAX_LATENCY_NS + 1,
            // Past the maximum but still inside the last bucket.
            MAX_LATENCY_NS + 5_000_000_000,
            // Past the last bin: saturated. (Not near u64::MAX: the exact
            // sum of squares, a u128, would overflow.)
            1 << 40,
            1 << 50,
        ];
        for &v in &edges {
            assert_same_histogram(&[v]);
            assert_same_histogram(&[v, v]);
            assert_same_histogram(&[5000, v, 7]);
        }
        assert_same_histogram(&edges);
        assert_same_histogram(&[]);
    }

    proptest! {
        #[test]
        fn flat_counts_equal_saturating_record(
            values in prop::collection::vec(
                prop_oneof![
                    0u64..5000,
                    0u64..100_000_000,
                    (0u32..51).prop_map(|s| 1u64 << s),
                    0u64..1 << 50,
                ],
                0..200,
            )
        ) {
            assert_same_histogram(&values);
        }

        #[test]
        fn series_keeps_every_stride_th_value(cap in 2usize..40, n in 0u64..3000) {
            let mut r = LatencyRecorder::new(cap);
            for v in 0..n {
                r.record(v);
            }
            let s = r.series();
            prop_assert!(s.values.len() <= cap);
            // The stride the per-record mask test thinned to before.
            let (mut len, mut stride) = (0u64, 1u64);
            for c in 0..n {
                if c % stride == 0 {
                    if len == cap as u64 {
                        len = len.div_ceil(2);
                        stride *= 2;
                    }
                    len += (c % stride == 0) as u64;
                }
            }
            prop_assert_eq!(s.stride, stride);
            // Every stride-th observation from the first, none left out.
            let want: Vec<u64> = (0..n).step_by(s.stride as usize).collect();
            prop_assert_eq!(s.values, want);
        }
    }
}
