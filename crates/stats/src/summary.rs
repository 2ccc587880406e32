//! Descriptive statistics of one sample and their confidence intervals.

use serde::{Deserialize, Serialize};

use crate::t_dist::student_t_975;

/// Nominal confidence level of every interval this crate computes.
pub(crate) const LEVEL_95: f64 = 0.95;

/// A two-sided confidence interval `[lo, hi]`.
///
/// Invariant: `lo <= hi`, and `level` is in `[0, 1]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower bound, in the unit of the statistic it brackets.
    pub lo: f64,
    /// Upper bound, in the unit of the statistic it brackets.
    pub hi: f64,
    /// Confidence level: the nominal level (0.95) for the Student-t
    /// intervals, or the exact achieved coverage for the order-statistic
    /// interval of the median (e.g. 0.96875 for six runs).
    pub level: f64,
}

impl Interval {
    /// Whether `x` lies within the closed interval.
    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }
}

/// Descriptive statistics of one sample, as produced by [`summarize`].
///
/// Invariants: `n >= 1`; `min <= median <= max`; `min <= mean <= max`;
/// `stddev >= 0`; every interval that is present contains its point
/// estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of observations.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divisor n − 1, Bessel's correction);
    /// 0 when n < 2.
    pub stddev: f64,
    /// Smallest observation.
    pub min: f64,
    /// Largest observation.
    pub max: f64,
    /// Median; the mean of the two middle values when n is even.
    pub median: f64,
    /// Coefficient of variation, `stddev / |mean|` (a fraction, not a
    /// percentage). `None` when the mean is 0, where it is undefined.
    pub cv: Option<f64>,
    /// Two-sided 95 % Student-t interval for the mean,
    /// `mean ± t(0.975; n−1) · stddev / √n`. `None` when n < 2: one
    /// observation says nothing about spread.
    ///
    /// This is the interval netperf builds from its iterations
    /// (`netlib.c: calculate_confidence()`: `t · sqrt(popvar / (n−1))`,
    /// which equals `t · stddev / √n`). It assumes independent runs whose
    /// mean is approximately normal.
    pub mean_ci: Option<Interval>,
    /// Distribution-free interval for the median from order statistics.
    ///
    /// For the sorted sample x(1) ≤ … ≤ x(n), the interval
    /// [x(k), x(n−k+1)] covers the population median with probability
    /// 1 − 2·P(Bin(n, ½) ≤ k − 1), whatever the distribution (continuous).
    /// We take the largest k — the narrowest symmetric pair — whose
    /// coverage is at least 95 %, and report that exact coverage as
    /// `level`. Sources: J.-Y. Le Boudec, *Performance Evaluation of
    /// Computer and Communication Systems* (EPFL Press, 2010), Theorem 2.1
    /// and Table A.1; W. J. Conover, *Practical Nonparametric Statistics*,
    /// 3rd ed., §3.2.
    ///
    /// With n < 6 no pair reaches 95 % (the widest, [min, max], covers
    /// 1 − 2·0.5ⁿ: 0.5, 0.75, 0.875, 0.9375 for n = 2..=5). We then return
    /// [min, max] and say so through `level`, which is below 0.95: callers
    /// must read it rather than assume 95 %. `None` when n < 2, where the
    /// only candidate, [x, x], has coverage 0.
    pub median_ci: Option<Interval>,
}

/// Summarize a sample: n, mean, sample standard deviation, min, max, median,
/// coefficient of variation and confidence intervals for the mean and the
/// median (see the fields of [`Summary`] for the methods).
///
/// Returns `None` for an empty sample and for a sample holding any NaN or
/// infinite value: a non-finite measurement is a bug upstream, and silently
/// skipping it would bias every statistic here.
///
/// ```
/// let s = benchlab_stats::summarize(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
/// assert_eq!(s.mean, 3.0);
/// assert_eq!(s.median, 3.0);
/// let ci = s.mean_ci.unwrap();
/// assert!(ci.lo < 3.0 && 3.0 < ci.hi);
/// ```
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    let sorted = sorted_finite(xs)?;
    let n = sorted.len();
    let min = sorted[0];
    let max = sorted[n - 1];
    let mean = mean_of_finite(xs, min, max);
    let median = median_of_sorted(&sorted);
    let stddev = if n < 2 {
        0.0
    } else {
        // Two-pass variance: subtracting the mean first avoids the
        // cancellation of the one-pass Σx² − n·mean² formula (the formula
        // netperf uses) when the spread is small relative to the mean.
        let ss = neumaier_sum(xs.iter().map(|&x| (x - mean) * (x - mean)));
        (ss / (n - 1) as f64).sqrt()
    };
    let cv = if mean == 0.0 {
        None
    } else {
        Some(stddev / mean.abs())
    };
    let mean_ci = (n >= 2).then(|| {
        let half = student_t_975(n - 1) * stddev / (n as f64).sqrt();
        Interval {
            lo: mean - half,
            hi: mean + half,
            level: LEVEL_95,
        }
    });
    let median_ci = median_interval(&sorted);
    Some(Summary {
        n,
        mean,
        stddev,
        min,
        max,
        median,
        cv,
        mean_ci,
        median_ci,
    })
}

/// Sum of the values, with Neumaier's compensated summation so that long
/// series of nearly equal numbers keep their low-order digits (A. Neumaier,
/// "Rundungsfehleranalyse einiger Verfahren zur Summation endlicher Summen",
/// ZAMM 54 (1974) 39–51).
///
/// This is the aggregate used where reports add per-target results (e.g.
/// "we summed the results for each guest"). The empty sum is 0; NaN and
/// infinities propagate as IEEE arithmetic does.
///
/// ```
/// assert_eq!(benchlab_stats::sum(&[0.1; 10]), 1.0);
/// assert_eq!(benchlab_stats::sum(&[]), 0.0);
/// ```
pub fn sum(xs: &[f64]) -> f64 {
    neumaier_sum(xs.iter().copied())
}

/// Arithmetic mean.
///
/// `None` for an empty sample or one holding NaN or an infinity. The result
/// is clamped to `[min, max]`, where the exact mean always lies, so that
/// rounding can never put it outside the data.
///
/// ```
/// assert_eq!(benchlab_stats::mean(&[1.0, 2.0, 6.0]), Some(3.0));
/// assert_eq!(benchlab_stats::mean(&[]), None);
/// ```
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || !all_finite(xs) {
        return None;
    }
    let (min, max) = min_max(xs);
    Some(mean_of_finite(xs, min, max))
}

/// Median: the middle value of the sorted sample, or the mean of the two
/// middle values when n is even.
///
/// `None` for an empty sample or one holding NaN or an infinity.
///
/// ```
/// assert_eq!(benchlab_stats::median(&[3.0, 1.0, 2.0]), Some(2.0));
/// assert_eq!(benchlab_stats::median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
/// ```
pub fn median(xs: &[f64]) -> Option<f64> {
    sorted_finite(xs).map(|s| median_of_sorted(&s))
}

/// Geometric mean, computed as exp(mean(ln x)) so that long products cannot
/// overflow or underflow.
///
/// The geometric mean is the right average of ratios and normalized scores
/// (P. J. Fleming and J. J. Wallace, "How not to lie with statistics: the
/// correct way to summarize benchmark results", CACM 29(3), 1986), which is
/// why benchlab uses it to aggregate over targets.
///
/// `None` for an empty sample, or when any value is ≤ 0, NaN or infinite:
/// the logarithm is undefined there. Clamped to `[min, max]` like [`mean`].
///
/// ```
/// let g = benchlab_stats::geometric_mean(&[1.0, 4.0, 16.0]).unwrap();
/// assert!((g - 4.0).abs() < 1e-12);
/// assert_eq!(benchlab_stats::geometric_mean(&[1.0, 0.0]), None);
/// ```
pub fn geometric_mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|&x| x <= 0.0 || !x.is_finite()) {
        return None;
    }
    let (min, max) = min_max(xs);
    let mean_ln = neumaier_sum(xs.iter().map(|x| x.ln())) / xs.len() as f64;
    Some(mean_ln.exp().clamp(min, max))
}

/// The `pct`-th percentile (0 ≤ pct ≤ 100), by linear interpolation
/// between order statistics: R's default `quantile(type = 7)` and NumPy's
/// default (R. J. Hyndman and Y. Fan, "Sample quantiles in statistical
/// packages", The American Statistician 50 (1996) 361–365, definition 7).
///
/// `None` for an empty or non-finite sample, or `pct` outside [0, 100].
///
/// ```
/// // R: quantile(c(1, 2, 3, 4, 10), 0.9) → 7.6
/// let p90 = benchlab_stats::percentile(&[10.0, 1.0, 3.0, 2.0, 4.0], 90.0).unwrap();
/// assert!((p90 - 7.6).abs() < 1e-12);
/// ```
pub fn percentile(xs: &[f64], pct: f64) -> Option<f64> {
    if !(0.0..=100.0).contains(&pct) {
        return None;
    }
    let sorted = sorted_finite(xs)?;
    Some(crate::bootstrap::quantile_sorted(&sorted, pct / 100.0))
}

/// Whether every value is finite (neither NaN nor ±∞).
pub(crate) fn all_finite(xs: &[f64]) -> bool {
    xs.iter().all(|x| x.is_finite())
}

/// A sorted copy of a non-empty, all-finite sample; `None` otherwise.
pub(crate) fn sorted_finite(xs: &[f64]) -> Option<Vec<f64>> {
    if xs.is_empty() || !all_finite(xs) {
        return None;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(sorted)
}

/// Median of a non-empty sorted slice.
pub(crate) fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        // Halve first: (a + b) / 2 can overflow for values near f64::MAX,
        // a/2 + b/2 cannot, and it stays within [a, b] by monotone rounding.
        sorted[n / 2 - 1] / 2.0 + sorted[n / 2] / 2.0
    }
}

/// Mean of a non-empty, all-finite sample whose extremes are known.
fn mean_of_finite(xs: &[f64], min: f64, max: f64) -> f64 {
    let n = xs.len() as f64;
    let total = neumaier_sum(xs.iter().copied());
    let m = if total.is_finite() {
        total / n
    } else {
        // The sum overflowed; dividing first cannot.
        neumaier_sum(xs.iter().map(|&x| x / n))
    };
    m.clamp(min, max)
}

fn min_max(xs: &[f64]) -> (f64, f64) {
    xs.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// Neumaier's variant of Kahan summation (see [`sum`] for the reference).
fn neumaier_sum(values: impl Iterator<Item = f64>) -> f64 {
    let mut total = 0.0_f64;
    let mut compensation = 0.0_f64;
    for x in values {
        let t = total + x;
        if total.abs() >= x.abs() {
            compensation += (total - t) + x;
        } else {
            compensation += (x - t) + total;
        }
        total = t;
    }
    let result = total + compensation;
    // With infinities the compensation becomes NaN; plain IEEE is the
    // better answer then.
    if result.is_nan() && !total.is_nan() {
        total
    } else {
        result
    }
}

/// Order-statistic confidence interval for the median of a sorted sample;
/// see [`Summary::median_ci`] for the method and its sources.
fn median_interval(sorted: &[f64]) -> Option<Interval> {
    let n = sorted.len();
    if n < 2 {
        return None;
    }
    // Trimming `trim` order statistics from each end gives
    // [x(trim+1), x(n−trim)], with coverage 1 − 2·P(X ≤ trim), X ~ Bin(n, ½).
    // The binomial terms are built in log space: 2⁻ⁿ underflows past n ≈ 1074.
    let ln_half_pow_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_choose = 0.0_f64; // ln C(n, trim)
    let mut cdf = ln_half_pow_n.exp(); // P(X ≤ trim), trim = 0
    let mut trim = 0;
    // Trim while coverage stays ≥ 95 %, but never past the middle, so the
    // interval always brackets the sample median.
    while trim < (n - 1) / 2 {
        let i = trim + 1;
        ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        let next = cdf + (ln_choose + ln_half_pow_n).exp();
        if 1.0 - 2.0 * next < LEVEL_95 {
            break;
        }
        cdf = next;
        trim = i;
    }
    // When n < 6 even trim = 0 ([min, max]) misses 95 %; it is returned
    // anyway, with its true, lower coverage in `level`.
    Some(Interval {
        lo: sorted[trim],
        hi: sorted[n - 1 - trim],
        level: 1.0 - 2.0 * cdf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn summarize_one_to_five() {
        let s = summarize(&[5.0, 3.0, 1.0, 4.0, 2.0]).unwrap();
        assert_eq!(s.n, 5);
        assert_eq!(s.mean, 3.0);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 5.0);
        // Σ(x − 3)² = 10, / (n − 1) = 2.5.
        assert!(close(s.stddev, 2.5_f64.sqrt(), 1e-15));
        assert!(close(s.cv.unwrap(), 2.5_f64.sqrt() / 3.0, 1e-15));
        // 3 ± 2.776 · √2.5 / √5 = 3 ± 2.776 · √0.5 = 3 ± 1.962929…
        let ci = s.mean_ci.unwrap();
        let half = 2.776 * 0.5_f64.sqrt();
        assert!(close(ci.lo, 3.0 - half, 1e-12));
        assert!(close(ci.hi, 3.0 + half, 1e-12));
        assert_eq!(ci.level, 0.95);
        // n = 5 < 6: [min, max] with coverage 1 − 2/32 = 0.9375.
        let mci = s.median_ci.unwrap();
        assert_eq!((mci.lo, mci.hi), (1.0, 5.0));
        assert!(close(mci.level, 0.9375, 1e-15));
    }

    #[test]
    fn summarize_single_and_pair() {
        let s = summarize(&[7.0]).unwrap();
        assert_eq!((s.n, s.mean, s.stddev, s.median), (1, 7.0, 0.0, 7.0));
        assert_eq!(s.mean_ci, None);
        assert_eq!(s.median_ci, None);

        let s = summarize(&[1.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.0);
        assert!(close(s.stddev, 2.0_f64.sqrt(), 1e-15));
        // 2 ± 12.706 · √2 / √2 = 2 ± 12.706.
        let ci = s.mean_ci.unwrap();
        assert!(close(ci.lo, 2.0 - 12.706, 1e-12));
        assert!(close(ci.hi, 2.0 + 12.706, 1e-12));
        let mci = s.median_ci.unwrap();
        assert_eq!((mci.lo, mci.hi, mci.level), (1.0, 3.0, 0.5));
    }

    #[test]
    fn summarize_rejects_empty_and_non_finite() {
        assert_eq!(summarize(&[]), None);
        assert_eq!(summarize(&[1.0, f64::NAN]), None);
        assert_eq!(summarize(&[1.0, f64::INFINITY]), None);
        assert_eq!(summarize(&[f64::NEG_INFINITY]), None);
    }

    #[test]
    fn cv_is_none_for_zero_mean() {
        let s = summarize(&[-1.0, 1.0]).unwrap();
        assert_eq!(s.mean, 0.0);
        assert_eq!(s.cv, None);
        let s = summarize(&[-2.0, -4.0]).unwrap();
        assert!(close(s.cv.unwrap(), 2.0_f64.sqrt() / 3.0, 1e-15));
    }

    /// Order statistics and coverages, hand-checked against
    /// 1 − 2·Σ_{i<k} C(n, i)/2ⁿ and Le Boudec's Table A.1.
    #[test]
    fn median_ci_order_statistics() {
        let cases: [(usize, usize, usize, f64); 9] = [
            (6, 1, 6, 1.0 - 2.0 / 64.0),
            (7, 1, 7, 1.0 - 2.0 / 128.0),
            (8, 1, 8, 1.0 - 2.0 / 256.0),
            (9, 2, 8, 1.0 - 2.0 * 10.0 / 512.0),
            (10, 2, 9, 1.0 - 2.0 * 11.0 / 1024.0),
            (12, 3, 10, 1.0 - 2.0 * 79.0 / 4096.0),
            (20, 6, 15, 0.958_610_534_667_968_8),
            (100, 40, 61, 0.964_799_799_782_295_2),
            (1000, 469, 532, 0.953_708_802_639_501_5),
        ];
        for (n, lo_rank, hi_rank, level) in cases {
            // x(i) = i makes the ranks readable in the bounds.
            let xs: Vec<f64> = (1..=n).rev().map(|i| i as f64).collect();
            let ci = summarize(&xs).unwrap().median_ci.unwrap();
            assert_eq!(ci.lo, lo_rank as f64, "n = {n}");
            assert_eq!(ci.hi, hi_rank as f64, "n = {n}");
            assert!(close(ci.level, level, 1e-9), "n = {n}: {}", ci.level);
        }
    }

    /// The floating-point search against exact integer arithmetic: trimming
    /// `t` from each end is allowed iff 2·Σ_{i≤t} C(n, i) / 2ⁿ ≤ 0.05, i.e.
    /// 40·Σ_{i≤t} C(n, i) ≤ 2ⁿ. C(n, i) and 2ⁿ fit in u128 for n ≤ 120.
    #[test]
    fn median_ci_matches_exact_integer_binomials() {
        for n in 6..=120_usize {
            let mut choose: u128 = 1; // C(n, 0)
            let mut partial: u128 = 1;
            let mut trim = 0;
            for i in 1..=(n - 1) / 2 {
                choose = choose * (n - i + 1) as u128 / i as u128;
                if 40 * (partial + choose) > 1_u128 << n {
                    break;
                }
                partial += choose;
                trim = i;
            }
            let exact_level = 1.0 - 2.0 * (partial as f64) / (1_u128 << n) as f64;
            let xs: Vec<f64> = (0..n).map(|i| i as f64).collect();
            let ci = summarize(&xs).unwrap().median_ci.unwrap();
            assert_eq!(ci.lo, trim as f64, "n = {n}");
            assert_eq!(ci.hi, (n - 1 - trim) as f64, "n = {n}");
            assert!(close(ci.level, exact_level, 1e-12), "n = {n}");
        }
    }

    #[test]
    fn median_ci_small_n_reports_true_coverage() {
        for n in 2..6 {
            let xs: Vec<f64> = (0..n).map(|i| i as f64).collect();
            let ci = summarize(&xs).unwrap().median_ci.unwrap();
            assert_eq!((ci.lo, ci.hi), (0.0, (n - 1) as f64));
            assert_eq!(ci.level, 1.0 - 2.0 * 0.5_f64.powi(n));
            assert!(ci.level < 0.95);
        }
    }

    #[test]
    fn median_ci_huge_n_does_not_underflow() {
        let xs: Vec<f64> = (0..5000).map(|i| i as f64).collect();
        let ci = summarize(&xs).unwrap().median_ci.unwrap();
        assert!(ci.level >= 0.95 && ci.level < 0.96, "{}", ci.level);
        // Normal approximation: n/2 ∓ 1.96·√n/2 ≈ 2500 ∓ 69.3.
        assert!((2425.0..=2435.0).contains(&ci.lo), "{}", ci.lo);
        assert!((2564.0..=2574.0).contains(&ci.hi), "{}", ci.hi);
    }

    #[test]
    fn median_values() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[2.0]), Some(2.0));
        assert_eq!(median(&[9.0, 1.0, 5.0]), Some(5.0));
        assert_eq!(median(&[1.0, 2.0, 3.0, 10.0]), Some(2.5));
        assert_eq!(median(&[f64::MAX, f64::MAX]), Some(f64::MAX));
        assert_eq!(median(&[1.0, f64::NAN, 2.0]), None);
    }

    #[test]
    fn mean_and_sum() {
        assert_eq!(mean(&[]), None);
        assert_eq!(mean(&[2.0, 4.0, 9.0]), Some(5.0));
        assert_eq!(mean(&[f64::NAN]), None);
        // Naive summation gives 0.30000000000000004 / 3 > 0.1.
        assert_eq!(mean(&[0.1, 0.1, 0.1]), Some(0.1));
        // The overflow fallback.
        assert_eq!(mean(&[f64::MAX, f64::MAX]), Some(f64::MAX));
        assert_eq!(sum(&[]), 0.0);
        assert_eq!(sum(&[1.0, 2.0, 3.5]), 6.5);
        // Compensation keeps the 1.0 that naive summation loses.
        assert_eq!(sum(&[1e16, 1.0, -1e16]), 1.0);
        assert!(sum(&[1.0, f64::NAN]).is_nan());
        assert_eq!(sum(&[1.0, f64::INFINITY]), f64::INFINITY);
    }

    #[test]
    fn geometric_mean_values() {
        assert!(close(geometric_mean(&[2.0, 8.0]).unwrap(), 4.0, 1e-12));
        assert!(close(
            geometric_mean(&[1.0, 10.0, 100.0]).unwrap(),
            10.0,
            1e-12
        ));
        assert_eq!(geometric_mean(&[5.0]), Some(5.0));
        assert_eq!(geometric_mean(&[3.0, 3.0, 3.0]), Some(3.0));
        assert_eq!(geometric_mean(&[]), None);
        assert_eq!(geometric_mean(&[1.0, -1.0]), None);
        assert_eq!(geometric_mean(&[1.0, 0.0]), None);
        assert_eq!(geometric_mean(&[1.0, f64::NAN]), None);
        assert_eq!(geometric_mean(&[1.0, f64::INFINITY]), None);
        // No overflow where the product would: (1e200)^3.
        let g = geometric_mean(&[1e200, 1e200, 1e200]).unwrap();
        assert!(close(g / 1e200, 1.0, 1e-12));
    }

    #[test]
    fn summary_round_trips_through_json() {
        let s = summarize(&[1.0, 2.0, 4.0, 8.0, 16.0, 32.0]).unwrap();
        let json = serde_json::to_string(&s).unwrap();
        let back: Summary = serde_json::from_str(&json).unwrap();
        // serde_json without its `float_roundtrip` feature may parse the
        // last bit of a float differently; everything else is exact.
        let near = |x: f64, y: f64| (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(1.0);
        assert_eq!(
            (back.n, back.min, back.max, back.median),
            (s.n, s.min, s.max, s.median)
        );
        assert!(near(back.mean, s.mean) && near(back.stddev, s.stddev));
        assert!(near(back.cv.unwrap(), s.cv.unwrap()));
        let (b, o) = (back.mean_ci.unwrap(), s.mean_ci.unwrap());
        assert!(near(b.lo, o.lo) && near(b.hi, o.hi) && b.level == o.level);
        assert_eq!(back.median_ci, s.median_ci);
        // A zero mean serializes its undefined cv as null, not as NaN.
        let s = summarize(&[-1.0, 1.0]).unwrap();
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"cv\":null"), "{json}");
        assert_eq!(serde_json::from_str::<Summary>(&json).unwrap(), s);
    }
}
