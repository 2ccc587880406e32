//! Comparing two systems: the "% advantage" of published reports, and a
//! verdict that only calls a difference real when its confidence interval
//! clears the noise band.

use serde::{Deserialize, Serialize};

use crate::blocks::Drift;
use crate::bootstrap::{bootstrap_ratio_ci, Statistic, BOOTSTRAP_RESAMPLES};
use crate::rank::{mann_whitney, RankTest};
use crate::summary::{all_finite, mean, Interval, LEVEL_95};
use crate::t_dist::student_t_975;

/// Default half-width of the noise band, in percent: differences whose
/// whole confidence interval stays within ±1 % are not called.
///
/// One percent is criterion.rs's default `noise_threshold` (0.01 in
/// `Criterion::default()`): "changes smaller than this are considered
/// noise", applied there, as here, together with the confidence interval.
/// With it, seed 000's optimized UDP rows that show a 0.01 % advantage from
/// single runs could never be called wins. Studies with noisier targets
/// should widen it.
pub const DEFAULT_NOISE_PCT: f64 = 1.0;

/// Significance level of the rank test that must not contradict a verdict
/// (the conventional 5 %, matching the 95 % intervals).
pub const SIGNIFICANCE: f64 = 0.05;

/// Which direction of a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Larger is better: throughput, transactions per second.
    Higher,
    /// Smaller is better: latency, CPU service demand.
    Lower,
}

impl Better {
    /// The direction in one word, as every reader prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Better::Higher => "higher",
            Better::Lower => "lower",
        }
    }
}

/// The outcome of [`compare`], from A's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole confidence interval of A's advantage lies above
    /// `+noise_pct`.
    Better,
    /// The whole confidence interval of A's advantage lies below
    /// `−noise_pct`.
    Worse,
    /// No difference beyond the noise: the whole confidence interval lies
    /// inside the noise band `[−noise_pct, +noise_pct]`.
    WithinNoise,
    /// Nothing decided: the interval straddles an edge of the noise band
    /// (or is unbounded), so the data allow both a real difference and
    /// none; or the interval clears the band but the rank test could have
    /// confirmed it at these sample sizes and did not (p >
    /// [`SIGNIFICANCE`]). Not "no difference": more repetitions may decide
    /// ([`Comparison::repetitions_to_decide`]).
    Inconclusive,
    /// A or B has fewer than two samples, so there is no estimate of
    /// spread and no interval.
    Insufficient,
}

/// A's advantage over B with its confidence interval and verdict, as
/// returned by [`compare`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Point estimate, in percent: [`advantage_pct`] of A's mean over B's.
    pub advantage_pct: f64,
    /// Two-sided 95 % confidence interval of the advantage, in percent
    /// (Fieller's interval for the ratio of means, mapped to percent; see
    /// [`compare`]). `None` when either side has fewer than two samples, or
    /// when B's mean is so uncertain that the ratio has no bounded interval.
    /// When present it contains `advantage_pct`.
    pub ci_pct: Option<Interval>,
    /// What may honestly be said about the difference.
    pub verdict: Verdict,
    /// The two-sided Mann-Whitney U test of the repetitions (see
    /// [`mann_whitney`]); `None` only when a sample is empty.
    pub rank_test: Option<RankTest>,
    /// Percentile-bootstrap 95 % interval of the advantage of the medians
    /// (A's median over B's, mapped to percent like `ci_pct`; see
    /// [`bootstrap_ratio_ci`]), for reports that quote medians. `None` when
    /// either side has fewer than two samples.
    pub median_ci_pct: Option<Interval>,
    /// For an [`Verdict::Inconclusive`] interval: about how many
    /// repetitions per side would likely decide, from the observed means
    /// and spreads (see [`repetitions_to_decide`]). `None` otherwise, when
    /// the rank test vetoed the interval, or when more than
    /// [`MAX_REPETITIONS_ESTIMATE`] would be needed.
    #[serde(default)]
    pub repetitions_to_decide: Option<usize>,
    /// How the repetitions were ordered in time and so what the interval
    /// can say about drift (see [`Drift`]).
    #[serde(default)]
    pub drift: Drift,
}

impl Comparison {
    /// Whether the verdict rests on the normal-theory interval alone
    /// because no rank test can reach p ≤ [`SIGNIFICANCE`] with so few
    /// repetitions (3 against 3: the smallest possible p is 0.1). Reports
    /// must flag such verdicts.
    pub fn small_n(&self) -> bool {
        self.rank_test
            .as_ref()
            .is_some_and(|t| !t.can_decide(SIGNIFICANCE))
    }
}

/// Percentage advantage of A over B, the "% advantage" column of the
/// published comparison reports.
///
/// * [`Better::Higher`]: `(A − B) / |B| · 100`
/// * [`Better::Lower`]: `(B − A) / |B| · 100`
///
/// so a positive result always means A is better. This reproduces every
/// "Red Hat advantage" cell of seed 000's four tables from the published
/// inputs (e.g. 897.68 vs 832.68 Mb/s → 7.81 %, 50.46 vs 73.46 µs →
/// 31.31 %); the tests check all 96. The denominator is `|B|`, the usual
/// definition of relative change, which equals B for the positive metrics
/// of every report and keeps the sign meaningful otherwise.
///
/// `None` when B is 0 (the relative change is undefined), when A or B is
/// not finite, or when the result would overflow.
///
/// ```
/// use benchlab_stats::{advantage_pct, Better};
/// let tcp = advantage_pct(897.68, 832.68, Better::Higher).unwrap();
/// assert_eq!(format!("{tcp:.2}"), "7.81");
/// let rtt = advantage_pct(50.46, 73.46, Better::Lower).unwrap();
/// assert_eq!(format!("{rtt:.2}"), "31.31");
/// ```
pub fn advantage_pct(a: f64, b: f64, better: Better) -> Option<f64> {
    if b == 0.0 || !a.is_finite() || !b.is_finite() {
        return None;
    }
    let diff = match better {
        Better::Higher => a - b,
        Better::Lower => b - a,
    };
    let pct = diff / b.abs() * 100.0;
    pct.is_finite().then_some(pct)
}

/// Compare sample A against sample B: A's advantage in percent (of the
/// means, as [`advantage_pct`]), its 95 % confidence interval and a verdict.
///
/// # Method
///
/// The interval is Fieller's interval for the ratio of means ρ = μ_A / μ_B
/// of two independent samples (E. C. Fieller, "Some problems in interval
/// estimation", JRSS B 16 (1954) 175–185): the set of ρ for which
/// `|m_A − ρ·m_B| / sqrt(v_A + ρ²·v_B) ≤ t`, with `v = s²/n` the squared
/// standard error of each mean. Unequal variances are allowed, with
/// Welch–Satterthwaite degrees of freedom evaluated at the estimate
/// ρ̂ = m_A/m_B, as in the non-iterative heteroscedastic interval of
/// Tamhane & Logan (J. Biopharm. Stat. 14 (2004) 843–856), implemented by
/// R's `mratios::ttestratio(var.equal = FALSE)`. Unlike dividing a Welch
/// interval for the difference by m_B, Fieller's interval accounts for the
/// uncertainty of the denominator, so it is honest when B is noisy. The
/// degrees of freedom are rounded down to use the t table of
/// [`student_t_975`]; rounding down widens the interval slightly
/// (conservative). The ratio interval is mapped to percent by the same
/// formula as [`advantage_pct`], then widened, if rounding left it short,
/// to contain the point estimate.
///
/// When B's mean is not significantly different from zero
/// (`t²·v_B ≥ m_B²`), the Fieller set is unbounded: `ci_pct` is `None` and
/// the verdict is `Inconclusive`. Two constant samples give a zero-width
/// interval, so a constant difference is called however small the samples
/// are — the data show no noise to speak of.
///
/// # Verdict
///
/// [`Verdict::Better`] when the whole interval is above `+noise_pct`,
/// [`Verdict::Worse`] when it is wholly below `−noise_pct`,
/// [`Verdict::WithinNoise`] when it lies wholly inside the band,
/// [`Verdict::Inconclusive`] when it straddles an edge of the band or is
/// unbounded (with an estimate of the repetitions that would likely
/// decide, [`repetitions_to_decide`]), and [`Verdict::Insufficient`] when
/// either side has fewer than two samples (the point estimate is still
/// given). This is criterion.rs's rule (`compare_to_threshold` in its
/// report module: improved or regressed only when both bounds of the
/// interval lie beyond the noise threshold on the same side): a change is
/// real only if its interval clears the noise band. Use
/// [`DEFAULT_NOISE_PCT`] unless a study says otherwise.
///
/// The interval assumes approximately normal means. A distribution-free
/// check guards against outliers and skew: when the Mann-Whitney test
/// *could* reach p ≤ [`SIGNIFICANCE`] at these sample sizes (from 4
/// against 4 repetitions) but does not, a Better or Worse becomes
/// Inconclusive — criterion.rs likewise requires both its test (a bootstrap
/// t-test) and its interval to agree. When the rank test cannot reach
/// significance at all (3 against 3), the interval decides alone and
/// [`Comparison::small_n`] says so, so that reports flag the verdict
/// instead of hiding how little data it rests on.
///
/// # None
///
/// When either sample is empty or holds NaN or an infinity, when B's mean
/// is 0, or when `noise_pct` is negative or NaN.
///
/// ```
/// use benchlab_stats::{compare, Better, Verdict, DEFAULT_NOISE_PCT};
/// let a = [102.0, 104.0, 103.0, 105.0, 101.0];
/// let b = [100.0, 101.0, 99.0, 100.0, 100.0];
/// let c = compare(&a, &b, Better::Higher, DEFAULT_NOISE_PCT).unwrap();
/// assert_eq!(format!("{:.2}", c.advantage_pct), "3.00");
/// assert_eq!(c.verdict, Verdict::Better);
/// ```
pub fn compare(a: &[f64], b: &[f64], better: Better, noise_pct: f64) -> Option<Comparison> {
    if noise_pct.is_nan() || noise_pct < 0.0 || !all_finite(a) || !all_finite(b) {
        return None;
    }
    let mean_a = mean(a)?;
    let mean_b = mean(b)?;
    let point = advantage_pct(mean_a, mean_b, better)?;
    if a.len() < 2 || b.len() < 2 {
        return Some(Comparison {
            advantage_pct: point,
            ci_pct: None,
            verdict: Verdict::Insufficient,
            rank_test: mann_whitney(a, b),
            median_ci_pct: None,
            repetitions_to_decide: None,
            drift: Drift::Alternated,
        });
    }
    let ci_pct = fieller_ratio_95(a, mean_a, b, mean_b).map(|(lo, hi)| {
        let (lo, hi) = within_sign(lo, hi, a, b);
        let (p, q) = ratio_to_pct(lo, hi, mean_b, better);
        Interval {
            lo: p.min(point),
            hi: q.max(point),
            level: LEVEL_95,
        }
    });
    let rank_test = mann_whitney(a, b);
    let by_interval = by_interval(ci_pct.as_ref(), noise_pct);
    let verdict = vetoed(by_interval, rank_test.as_ref());
    // The estimate models the interval only: not offered when the
    // interval decided and the rank test vetoed it.
    let repetitions_to_decide = (by_interval == Verdict::Inconclusive)
        .then(|| repetitions_to_decide(a, b, better, noise_pct))
        .flatten();
    Some(Comparison {
        advantage_pct: point,
        ci_pct,
        verdict,
        rank_test,
        median_ci_pct: median_ci_pct(a, b, better),
        repetitions_to_decide,
        drift: Drift::Alternated,
    })
}

/// Fieller's ratio interval `(lo, hi)` intersected with the ratios the
/// samples allow: when every figure of both sides is positive (a
/// throughput, a latency), so are both means and their ratio, so the
/// interval starts at 0 at the lowest — never an advantage below −100 %
/// for a higher-is-better metric nor above +100 % for a lower-is-better
/// one. Intersecting a confidence set with the parameter space keeps its
/// coverage (M. Mandelkern, "Setting confidence intervals for bounded
/// parameters", Statistical Science 17 (2002) 149–172); what is left
/// still says honestly how little the data pin down.
pub(crate) fn within_sign(lo: f64, hi: f64, a: &[f64], b: &[f64]) -> (f64, f64) {
    if a.iter().chain(b).all(|&x| x > 0.0) {
        (lo.max(0.0), hi.max(0.0))
    } else {
        (lo, hi)
    }
}

/// The verdict the interval alone gives (see [`compare`]).
pub(crate) fn by_interval(ci_pct: Option<&Interval>, noise_pct: f64) -> Verdict {
    match ci_pct {
        Some(ci) if ci.lo > noise_pct => Verdict::Better,
        Some(ci) if ci.hi < -noise_pct => Verdict::Worse,
        Some(ci) if ci.lo >= -noise_pct && ci.hi <= noise_pct => Verdict::WithinNoise,
        _ => Verdict::Inconclusive,
    }
}

/// A Better or Worse that a rank test able to decide at these sample
/// sizes did not confirm becomes Inconclusive (see [`compare`]).
pub(crate) fn vetoed(by_interval: Verdict, rank_test: Option<&RankTest>) -> Verdict {
    let contradicted =
        rank_test.is_some_and(|t| t.can_decide(SIGNIFICANCE) && t.p_value > SIGNIFICANCE);
    match by_interval {
        Verdict::Better | Verdict::Worse if contradicted => Verdict::Inconclusive,
        v => v,
    }
}

/// The percentile-bootstrap interval of the advantage of the medians.
pub(crate) fn median_ci_pct(a: &[f64], b: &[f64], better: Better) -> Option<Interval> {
    bootstrap_ratio_ci(a, b, Statistic::Median, BOOTSTRAP_RESAMPLES, LEVEL_95).and_then(|r| {
        let m_b = crate::summary::median(b)?;
        let m_a = crate::summary::median(a)?;
        let point = advantage_pct(m_a, m_b, better)?;
        let (p, q) = ratio_to_pct(r.lo, r.hi, m_b, better);
        Some(Interval {
            lo: p.min(point),
            hi: q.max(point),
            level: LEVEL_95,
        })
    })
}

/// The largest estimate [`repetitions_to_decide`] gives; beyond it, the
/// answer is "more than this" (`None`).
pub const MAX_REPETITIONS_ESTIMATE: usize = 1000;

/// About how many repetitions per side would likely turn an inconclusive
/// comparison into a decision, if the observed means and spreads held.
///
/// # Method
///
/// For `n` = the larger sample's size + 1, + 2, …, the interval of
/// [`compare`] is recomputed as it would be with `n` repetitions on each
/// side and the same means and sample variances (Fieller's interval with
/// the equal-`n` Welch degrees of freedom); the estimate is the first `n`
/// whose interval is decided: wholly beyond the noise band (a difference)
/// or wholly inside it (none). This is a planning figure in the spirit of
/// a power calculation at the observed effect — the next repetitions will
/// move the means and spreads, so about half the time more are needed —
/// not a promise. The rank test's veto is not modelled.
///
/// `None` when either sample has fewer than two values or is not finite,
/// when B's mean is 0, when `noise_pct` is negative or NaN, when the
/// advantage sits exactly on a band edge (no `n` decides), or when more
/// than [`MAX_REPETITIONS_ESTIMATE`] would be needed.
///
/// ```
/// use benchlab_stats::{repetitions_to_decide, Better};
/// // +5 % with about 4 % spread per repetition: wide at 3 a side.
/// let a = [100.0, 105.0, 110.0];
/// let b = [97.0, 100.0, 103.0];
/// let n = repetitions_to_decide(&a, &b, Better::Higher, 1.0).unwrap();
/// assert!(n > 3 && n < 20, "{n}");
/// ```
pub fn repetitions_to_decide(
    a: &[f64],
    b: &[f64],
    better: Better,
    noise_pct: f64,
) -> Option<usize> {
    if a.len() < 2
        || b.len() < 2
        || !all_finite(a)
        || !all_finite(b)
        || noise_pct.is_nan()
        || noise_pct < 0.0
    {
        return None;
    }
    let (mean_a, mean_b) = (mean(a)?, mean(b)?);
    let point = advantage_pct(mean_a, mean_b, better)?;
    if point.abs() == noise_pct {
        return None;
    }
    let (var_a, var_b) = (sample_variance(a, mean_a), sample_variance(b, mean_b));
    (a.len().max(b.len()) + 1..=MAX_REPETITIONS_ESTIMATE).find(|&n| {
        let moments = |mean, var| Moments { mean, var, n };
        fieller_from_moments(moments(mean_a, var_a), moments(mean_b, var_b)).is_some_and(
            |(lo, hi)| {
                let (lo, hi) = ratio_to_pct(lo, hi, mean_b, better);
                lo > noise_pct || hi < -noise_pct || (lo >= -noise_pct && hi <= noise_pct)
            },
        )
    })
}

/// Maps an interval `[lo, hi]` of the ratio A/B to the advantage in
/// percent, `(low, high)`: advantage = σ·(ρ − 1)·100, with σ = ±1 from the
/// direction and the sign of B (|B| in [`advantage_pct`]); the map is
/// increasing when σ > 0, so the ends are reordered.
pub(crate) fn ratio_to_pct(lo: f64, hi: f64, b: f64, better: Better) -> (f64, f64) {
    let sigma = match better {
        Better::Higher => b.signum(),
        Better::Lower => -b.signum(),
    };
    let (p, q) = (sigma * (lo - 1.0) * 100.0, sigma * (hi - 1.0) * 100.0);
    (p.min(q), p.max(q))
}

/// Fieller's 95 % interval `(lo, hi)` for μ_A/μ_B with Welch–Satterthwaite
/// degrees of freedom at the estimate (see [`compare`]). Both samples have
/// n ≥ 2 and finite values; `mean_b != 0`. `None` when unbounded.
fn fieller_ratio_95(a: &[f64], mean_a: f64, b: &[f64], mean_b: f64) -> Option<(f64, f64)> {
    fieller_from_moments(
        Moments {
            mean: mean_a,
            var: sample_variance(a, mean_a),
            n: a.len(),
        },
        Moments {
            mean: mean_b,
            var: sample_variance(b, mean_b),
            n: b.len(),
        },
    )
}

/// A sample's mean, sample variance and size: all Fieller's interval needs.
#[derive(Clone, Copy)]
struct Moments {
    mean: f64,
    var: f64,
    n: usize,
}

/// [`fieller_ratio_95`] from the samples' moments (n ≥ 2 each), so that
/// [`repetitions_to_decide`] can ask what the interval would be at other
/// sample sizes.
fn fieller_from_moments(a: Moments, b: Moments) -> Option<(f64, f64)> {
    let (na, nb) = (a.n as f64, b.n as f64);
    let va = a.var / na;
    let vb = b.var / nb;
    let r = a.mean / b.mean;
    // Welch–Satterthwaite: ν = (v_A + ρ²v_B)² / (v_A²/(n_A−1) + ρ⁴v_B²/(n_B−1)),
    // at least 1 (as mratios does), rounded down for the table.
    let spread = va + r * r * vb;
    let df = spread * spread / (va * va / (na - 1.0) + (r * r * vb).powi(2) / (nb - 1.0));
    fieller_95(a.mean, va, b.mean, vb, df)
}

/// Fieller's 95 % interval for μ_A/μ_B from the two means, the squared
/// standard errors of the means (`va`, `vb`) and the degrees of freedom of
/// the combined error (at least 1, rounded down for the t table). `None`
/// when unbounded (B's mean within t standard errors of 0).
pub(crate) fn fieller_95(
    mean_a: f64,
    va: f64,
    mean_b: f64,
    vb: f64,
    df: f64,
) -> Option<(f64, f64)> {
    let r = mean_a / mean_b;
    let spread = va + r * r * vb;
    if spread == 0.0 {
        // Both samples constant: the ratio is known exactly.
        return Some((r, r));
    }
    let df = if df.is_finite() {
        df.max(1.0).floor() as usize
    } else {
        1
    };
    let t = student_t_975(df);
    // g ≥ 1 means m_B is within t standard errors of 0: the set of ρ is
    // unbounded (Fieller 1954).
    let g = t * t * vb / (mean_b * mean_b);
    if g.is_nan() || g >= 1.0 {
        return None;
    }
    // Roots of ρ²(m_B² − t²v_B) − 2ρ·m_A·m_B + (m_A² − t²v_A) = 0, divided
    // through by m_B².
    let half = t / mean_b.abs() * (va * (1.0 - g) + r * r * vb).sqrt();
    let lo = (r - half) / (1.0 - g);
    let hi = (r + half) / (1.0 - g);
    (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
}

/// Sample variance (divisor n − 1) of a sample with n ≥ 2 and known mean.
pub(crate) fn sample_variance(xs: &[f64], mean: f64) -> f64 {
    let ss: f64 = xs.iter().map(|&x| (x - mean) * (x - mean)).sum();
    ss / (xs.len() - 1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 000 (Principled Technologies, "Comparing network performance:
    /// Red Hat Enterprise Linux 6 vs. Microsoft Windows Server 2012"),
    /// every row of Figures 2, 4, 9 and 10: message size, then out-of-box
    /// RHEL, Windows, published advantage, then optimized RHEL, Windows,
    /// published advantage. Throughput in 10⁶ b/s, latency in µs.
    type Row = (&'static str, f64, f64, &'static str, f64, f64, &'static str);

    const TCP_STREAM: [Row; 12] = [
        ("32", 897.68, 832.68, "7.81", 1044.92, 1039.45, "0.53"),
        ("64", 1658.16, 1627.13, "1.91", 2095.32, 2029.09, "3.26"),
        ("128", 2851.11, 2041.81, "39.64", 3907.90, 2643.84, "47.81"),
        (
            "256", 4419.73, 2047.50, "115.86", 7129.39, 2923.70, "143.85",
        ),
        (
            "512", 8607.41, 2045.76, "320.74", 9828.32, 2671.09, "267.95",
        ),
        (
            "1024", 8678.31, 2056.95, "321.90", 9840.46, 2673.83, "268.03",
        ),
        (
            "2048", 8683.02, 2037.70, "326.12", 9824.61, 2665.22, "268.62",
        ),
        (
            "4096", 8630.58, 2042.16, "322.62", 9660.46, 2666.18, "262.33",
        ),
        (
            "8192", 8624.96, 2041.91, "322.40", 9549.95, 3235.02, "195.21",
        ),
        (
            "16384", 8422.96, 2048.03, "311.27", 9381.22, 3200.53, "193.11",
        ),
        (
            "32768", 8750.67, 2046.31, "327.63", 9633.31, 2662.86, "261.77",
        ),
        (
            "65507", 8679.33, 2047.97, "323.80", 9301.49, 3202.70, "190.43",
        ),
    ];

    const UDP_STREAM: [Row; 12] = [
        ("32", 261.20, 67.21, "288.63", 348.03, 72.72, "378.59"),
        ("64", 518.32, 126.21, "310.68", 698.38, 139.04, "402.29"),
        ("128", 1040.83, 254.29, "309.31", 1392.89, 278.09, "400.88"),
        ("256", 2111.50, 505.04, "318.09", 2758.45, 660.69, "317.51"),
        ("512", 4375.00, 974.90, "348.76", 5473.36, 1314.16, "316.49"),
        (
            "1024", 3860.51, 1834.50, "110.44", 6836.92, 1947.50, "251.06",
        ),
        (
            "2048", 5049.16, 1483.68, "240.31", 7325.47, 2248.62, "225.78",
        ),
        (
            "4096", 9086.05, 2466.47, "268.38", 7450.47, 4526.42, "64.60",
        ),
        ("8192", 3793.38, 2724.16, "39.25", 7344.22, 6016.42, "22.07"),
        (
            "16384", 4835.84, 1982.14, "143.97", 9924.79, 9923.92, "0.01",
        ),
        (
            "32768", 5142.80, 1436.45, "258.02", 8393.38, 8392.39, "0.01",
        ),
        (
            "65507", 4789.19, 258.90, "1749.82", 8389.68, 8388.79, "0.01",
        ),
    ];

    const TCP_RR: [Row; 12] = [
        ("1", 50.46, 73.46, "31.31", 37.95, 57.79, "34.33"),
        ("2", 50.70, 74.75, "32.17", 37.98, 57.32, "33.74"),
        ("4", 50.33, 74.67, "32.60", 37.99, 59.23, "35.86"),
        ("8", 50.36, 75.33, "33.15", 37.99, 59.38, "36.02"),
        ("16", 50.54, 75.96, "33.46", 37.97, 58.99, "35.63"),
        ("32", 50.44, 76.71, "34.25", 37.94, 59.40, "36.13"),
        ("64", 50.68, 74.33, "31.82", 37.96, 59.27, "35.95"),
        ("128", 50.12, 75.08, "33.24", 37.97, 59.49, "36.17"),
        ("256", 50.30, 74.97, "32.91", 37.96, 59.18, "35.86"),
        ("512", 50.48, 75.98, "33.56", 37.96, 59.64, "36.35"),
        ("1024", 50.40, 76.01, "33.69", 37.94, 59.20, "35.91"),
        ("Average", 50.44, 75.20, "32.93", 37.96, 58.99, "35.65"),
    ];

    const UDP_RR: [Row; 12] = [
        ("1", 47.93, 66.92, "28.38", 35.79, 54.76, "34.64"),
        ("2", 47.79, 66.62, "28.26", 35.85, 54.71, "34.47"),
        ("4", 48.06, 66.35, "27.57", 35.81, 55.14, "35.06"),
        ("8", 47.96, 66.94, "28.35", 35.82, 54.47, "34.24"),
        ("16", 48.07, 67.26, "28.53", 35.83, 54.99, "34.84"),
        ("32", 47.93, 66.92, "28.38", 35.81, 54.23, "33.97"),
        ("64", 47.98, 68.32, "29.77", 35.79, 54.99, "34.92"),
        ("128", 47.87, 66.70, "28.23", 35.84, 54.54, "34.29"),
        ("256", 47.80, 66.82, "28.46", 35.80, 54.60, "34.43"),
        ("512", 47.99, 67.16, "28.54", 35.83, 54.90, "34.74"),
        ("1024", 47.92, 66.97, "28.45", 35.81, 54.79, "34.64"),
        ("Average", 47.94, 67.00, "28.45", 35.82, 54.74, "34.56"),
    ];

    fn check_table(name: &str, rows: &[Row], better: Better) {
        for &(size, oob_a, oob_b, oob_pct, opt_a, opt_b, opt_pct) in rows {
            for (config, a, b, published) in [
                ("out-of-box", oob_a, oob_b, oob_pct),
                ("optimized", opt_a, opt_b, opt_pct),
            ] {
                let got = advantage_pct(a, b, better).unwrap();
                assert_eq!(
                    format!("{got:.2}"),
                    published,
                    "{name} {size} {config}: {a} vs {b} gave {got}"
                );
            }
        }
    }

    #[test]
    fn seed_000_tcp_stream_advantages() {
        check_table("TCP stream", &TCP_STREAM, Better::Higher);
    }

    #[test]
    fn seed_000_udp_stream_advantages() {
        check_table("UDP stream", &UDP_STREAM, Better::Higher);
    }

    #[test]
    fn seed_000_tcp_rr_advantages() {
        check_table("TCP RR", &TCP_RR, Better::Lower);
    }

    #[test]
    fn seed_000_udp_rr_advantages() {
        check_table("UDP RR", &UDP_RR, Better::Lower);
    }

    /// The "Average" rows of Figures 9 and 10 are the column means of the
    /// eleven message sizes, and their advantage is the advantage of the
    /// averages (32.93 %), not the average of the advantages (32.92 %).
    #[test]
    fn seed_000_average_rows_are_column_means() {
        for rows in [&TCP_RR, &UDP_RR] {
            let (body, avg) = rows.split_at(11);
            let avg = avg[0];
            let col = |f: fn(&Row) -> f64| mean(&body.iter().map(f).collect::<Vec<_>>());
            let oob_a = col(|r| r.1).unwrap();
            let oob_b = col(|r| r.2).unwrap();
            let opt_a = col(|r| r.4).unwrap();
            let opt_b = col(|r| r.5).unwrap();
            assert_eq!(format!("{oob_a:.2}"), format!("{:.2}", avg.1));
            assert_eq!(format!("{oob_b:.2}"), format!("{:.2}", avg.2));
            assert_eq!(format!("{opt_a:.2}"), format!("{:.2}", avg.4));
            assert_eq!(format!("{opt_b:.2}"), format!("{:.2}", avg.5));
        }
        let mean_of_advantages = mean(
            &TCP_RR[..11]
                .iter()
                .map(|r| advantage_pct(r.1, r.2, Better::Lower).unwrap())
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert_eq!(format!("{mean_of_advantages:.2}"), "32.92");
    }

    #[test]
    fn advantage_edge_cases() {
        assert_eq!(advantage_pct(1.0, 0.0, Better::Higher), None);
        assert_eq!(advantage_pct(1.0, -0.0, Better::Lower), None);
        assert_eq!(advantage_pct(f64::NAN, 1.0, Better::Higher), None);
        assert_eq!(advantage_pct(1.0, f64::INFINITY, Better::Higher), None);
        assert_eq!(advantage_pct(f64::MAX, 1e-300, Better::Higher), None);
        assert_eq!(advantage_pct(5.0, 5.0, Better::Higher), Some(0.0));
        assert_eq!(advantage_pct(150.0, 100.0, Better::Higher), Some(50.0));
        assert_eq!(advantage_pct(150.0, 100.0, Better::Lower), Some(-50.0));
        assert_eq!(advantage_pct(50.0, 100.0, Better::Lower), Some(50.0));
        // |B|: moving from −10 to −5 is an improvement when higher is better.
        assert_eq!(advantage_pct(-5.0, -10.0, Better::Higher), Some(50.0));
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Hand-checked with the closed form of `mratios::ttestratio` (tA, tB,
    /// tC) at t(0.975; 5) = 2.571: m_A = 103, m_B = 100, s²_A = 2.5,
    /// s²_B = 0.5, n = 5 each; Welch df at ρ̂ = 1.03 is 5.62 → 5.
    /// Ratio interval [1.0100516173459797, 1.0500845584998995].
    #[test]
    fn compare_hand_checked_fieller() {
        let a = [102.0, 104.0, 103.0, 105.0, 101.0];
        let b = [100.0, 101.0, 99.0, 100.0, 100.0];
        let c = compare(&a, &b, Better::Higher, 1.0).unwrap();
        assert!(close(c.advantage_pct, 3.0));
        let ci = c.ci_pct.clone().unwrap();
        assert!(close(ci.lo, 1.005_161_734_598), "{}", ci.lo);
        assert!(close(ci.hi, 5.008_455_849_990), "{}", ci.hi);
        assert_eq!(ci.level, 0.95);
        assert_eq!(c.verdict, Verdict::Better);
        // A wider band reaches into the interval: [1.005, 5.008] straddles
        // its edge at +2 %, so nothing is decided.
        let c = compare(&a, &b, Better::Higher, 2.0).unwrap();
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert!(c.repetitions_to_decide.is_some_and(|n| n > 5));
        // A band wider than the whole interval: no difference.
        let c = compare(&a, &b, Better::Higher, 6.0).unwrap();
        assert_eq!(c.verdict, Verdict::WithinNoise);
        assert_eq!(c.repetitions_to_decide, None);
        // For a lower-is-better metric the same data make A worse.
        let c = compare(&a, &b, Better::Lower, 1.0).unwrap();
        assert!(close(c.advantage_pct, -3.0));
        let ci = c.ci_pct.clone().unwrap();
        assert!(close(ci.lo, -5.008_455_849_990));
        assert!(close(ci.hi, -1.005_161_734_598));
        assert_eq!(c.verdict, Verdict::Worse);
        // Swapping the sides is not a mirror image: B is 2.91 % below A
        // (3 % of 103), with interval [−4.770 %, −0.995 %] — inside the
        // 1 % band at its upper end, so inconclusive at 1 %, Worse at 0.5 %.
        let c = compare(&b, &a, Better::Higher, 1.0).unwrap();
        assert!(close(c.advantage_pct, -300.0 / 103.0));
        let ci = c.ci_pct.clone().unwrap();
        assert!(close(ci.lo, -4.769_573_849_505), "{}", ci.lo);
        assert!(close(ci.hi, -0.995_158_779_350), "{}", ci.hi);
        assert_eq!(c.verdict, Verdict::Inconclusive);
        let c = compare(&b, &a, Better::Higher, 0.5).unwrap();
        assert_eq!(c.verdict, Verdict::Worse);
    }

    /// Second hand-checked case: a 1.67 % difference whose interval,
    /// [−7.15 %, +11.18 %] (Welch df 9.76 → 9, t = 2.262), straddles zero.
    #[test]
    fn compare_straddling_interval_is_inconclusive() {
        let a = [10.0, 11.0, 9.0, 10.0, 10.0, 11.0];
        let b = [10.0, 9.0, 11.0, 10.0, 10.0, 10.0];
        let c = compare(&a, &b, Better::Higher, DEFAULT_NOISE_PCT).unwrap();
        assert!(close(c.advantage_pct, 100.0 / 60.0));
        let ci = c.ci_pct.unwrap();
        assert!(close(ci.lo, -7.149_875_476_024), "{}", ci.lo);
        assert!(close(ci.hi, 11.179_172_327_731), "{}", ci.hi);
        // The interval allows −7 % and +11 %: not "no difference".
        assert_eq!(c.verdict, Verdict::Inconclusive);
        // With s ≈ 0.75 a side and +1.67 % against the 1 % band, the
        // interval must shrink to a half-width under 0.67 %: n in the
        // hundreds at this spread.
        let n = c.repetitions_to_decide.unwrap();
        assert!((100..=1000).contains(&n), "{n}");
        // At that n, the projected interval decides and one fewer does not.
        let (ma, mb) = (mean(&a).unwrap(), mean(&b).unwrap());
        let (va, vb) = (sample_variance(&a, ma), sample_variance(&b, mb));
        let decided = |n: usize| {
            let m = |mean, var| Moments { mean, var, n };
            let (lo, hi) = fieller_from_moments(m(ma, va), m(mb, vb)).unwrap();
            let (lo, _) = ratio_to_pct(lo, hi, mb, Better::Higher);
            lo > DEFAULT_NOISE_PCT
        };
        assert!(decided(n) && !decided(n - 1));
    }

    /// The demo's ping-pong jitter (issue 13): about 2.7 µs pinned against
    /// 25.8 µs unpinned at 3 repetitions each, the unpinned ones spread
    /// from 3 to 49 µs. The interval is unbounded (B's mean is within t
    /// standard errors of 0 at 2 degrees of freedom): inconclusive, never
    /// "no difference", with an estimate of the repetitions that decide.
    #[test]
    fn demo_jitter_is_inconclusive_not_no_difference() {
        let pinned = [2.6, 2.7, 2.8];
        let unpinned = [3.0, 25.8, 48.6];
        let c = compare(&pinned, &unpinned, Better::Lower, DEFAULT_NOISE_PCT).unwrap();
        assert!(close(c.advantage_pct, (25.8 - 2.7) / 25.8 * 100.0));
        assert_eq!(c.ci_pct, None);
        assert_eq!(c.verdict, Verdict::Inconclusive);
        // g = t²·s_B²/(n·m_B²) < 1 needs n > t²·520/666 (about 6 at
        // t ≈ 2.5); the bounded interval clears the band from n = 7.
        assert_eq!(c.repetitions_to_decide, Some(7));
        assert!(compare(
            &[2.6, 2.7, 2.8, 2.7, 2.6, 2.8, 2.7, 2.6, 2.8, 2.7, 2.6, 2.8],
            &[3.0, 25.8, 48.6, 3.0, 25.8, 48.6, 3.0, 25.8, 48.6, 3.0, 25.8, 48.6],
            Better::Lower,
            DEFAULT_NOISE_PCT
        )
        .is_some_and(|c| c.verdict == Verdict::Better));
    }

    #[test]
    fn repetitions_to_decide_edges() {
        // Too few, on the band's edge, or beyond the cap.
        assert_eq!(
            repetitions_to_decide(&[1.0], &[1.0, 2.0], Better::Higher, 1.0),
            None
        );
        assert_eq!(
            repetitions_to_decide(
                &[101.0, 99.0, 103.0],
                &[100.0, 98.0, 102.0],
                Better::Higher,
                1.0
            ),
            None
        );
        assert_eq!(
            repetitions_to_decide(&[1.0, 100.0], &[50.0, 51.0], Better::Higher, 1.0),
            None
        );
        // A clear difference at small spread decides at the next size.
        assert_eq!(
            repetitions_to_decide(&[110.0, 111.0], &[100.0, 101.0], Better::Higher, 1.0),
            Some(3)
        );
    }

    #[test]
    fn compare_insufficient_and_invalid() {
        let c = compare(&[110.0], &[100.0, 101.0], Better::Higher, 1.0).unwrap();
        assert_eq!(c.verdict, Verdict::Insufficient);
        assert_eq!(c.ci_pct, None);
        assert!(close(c.advantage_pct, 110.0 / 100.5 * 100.0 - 100.0));
        let c = compare(&[1.0, 2.0], &[3.0], Better::Lower, 1.0).unwrap();
        assert_eq!(c.verdict, Verdict::Insufficient);

        assert_eq!(compare(&[], &[1.0, 2.0], Better::Higher, 1.0), None);
        assert_eq!(compare(&[1.0, 2.0], &[], Better::Higher, 1.0), None);
        assert_eq!(
            compare(&[1.0, 2.0], &[-1.0, 1.0], Better::Higher, 1.0),
            None
        );
        assert_eq!(
            compare(&[1.0, f64::NAN], &[1.0, 2.0], Better::Higher, 1.0),
            None
        );
        assert_eq!(
            compare(&[1.0, 2.0], &[1.0, 2.0], Better::Higher, -1.0),
            None
        );
        assert_eq!(
            compare(&[1.0, 2.0], &[1.0, 2.0], Better::Higher, f64::NAN),
            None
        );
    }

    #[test]
    fn compare_unbounded_when_b_is_indistinguishable_from_zero() {
        // m_B = 0.5 with s_B ≈ 7.8: zero is well inside B's interval.
        let c = compare(&[10.0, 11.0, 12.0], &[-5.0, 0.5, 6.0], Better::Higher, 1.0).unwrap();
        assert_eq!(c.ci_pct, None);
        assert_eq!(c.verdict, Verdict::Inconclusive);
    }

    /// The demo's UDP 16 KiB stream (issue 26): three repetitions, one
    /// side spread ±71 %, and Fieller's interval reached −103 %: a
    /// throughput below zero. Positive figures keep the ratio positive.
    #[test]
    fn positive_figures_never_give_an_advantage_below_minus_100() {
        let noisy = [900.0, 3800.0, 7100.0];
        let steady = [4000.0, 4100.0, 4050.0];
        let (ma, mb) = (mean(&noisy).unwrap(), mean(&steady).unwrap());
        let (lo, _) = fieller_ratio_95(&noisy, ma, &steady, mb).unwrap();
        assert!(lo < 0.0, "the unbounded-below case: {lo}");
        let c = compare(&noisy, &steady, Better::Higher, 1.0).unwrap();
        let ci = c.ci_pct.clone().unwrap();
        assert_eq!(ci.lo, -100.0);
        assert!(ci.hi > c.advantage_pct);
        assert_eq!(c.verdict, Verdict::Inconclusive);
        // Lower is better: the mirror bound, +100 % (A at zero latency).
        let c = compare(&noisy, &steady, Better::Lower, 1.0).unwrap();
        assert_eq!(c.ci_pct.unwrap().hi, 100.0);
        // Figures that may be negative keep Fieller's interval as it is.
        let shifted: Vec<f64> = noisy.iter().map(|x| x - 1000.0).collect();
        let c = compare(&shifted, &steady, Better::Higher, 1.0).unwrap();
        assert!(c.ci_pct.unwrap().lo < -100.0);
    }

    #[test]
    fn compare_constant_samples() {
        let c = compare(&[5.0, 5.0], &[5.0, 5.0, 5.0], Better::Higher, 0.0).unwrap();
        let ci = c.ci_pct.unwrap();
        assert_eq!((ci.lo, ci.hi), (0.0, 0.0));
        assert_eq!(c.verdict, Verdict::WithinNoise);
        let c = compare(&[110.0, 110.0], &[100.0, 100.0], Better::Higher, 1.0).unwrap();
        assert_eq!(c.verdict, Verdict::Better);
    }

    #[test]
    fn compare_negative_baseline_keeps_the_sign_convention() {
        // Higher is better; A ≈ −5, B ≈ −10: A is better by ~50 % of |B|.
        let c = compare(
            &[-5.1, -4.9, -5.0],
            &[-10.1, -9.9, -10.0],
            Better::Higher,
            1.0,
        )
        .unwrap();
        assert!(close(c.advantage_pct, 50.0));
        let ci = c.ci_pct.unwrap();
        assert!(ci.lo <= 50.0 && 50.0 <= ci.hi && ci.lo > 1.0);
        assert_eq!(c.verdict, Verdict::Better);
    }

    #[test]
    fn enums_serialize_in_snake_case() {
        assert_eq!(
            serde_json::to_string(&Verdict::WithinNoise).unwrap(),
            "\"within_noise\""
        );
        assert_eq!(
            serde_json::to_string(&Verdict::Inconclusive).unwrap(),
            "\"inconclusive\""
        );
        assert_eq!(serde_json::to_string(&Better::Lower).unwrap(), "\"lower\"");
        let c = compare(&[1.0, 1.1], &[1.0, 1.2], Better::Higher, 1.0).unwrap();
        let back: Comparison = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }
}
