//! The normal and Student-t distribution functions the sequential rule
//! needs at arbitrary levels (the interval of [`crate::compare`] needs only
//! t(0.975), which [`crate::student_t_975`] tabulates).
//!
//! Both are written out rather than taken from a special-function crate:
//! the normal one is a single Chebyshev formula and the t one, for the
//! integer degrees of freedom the rule uses, a finite sum.

/// P(Z ≤ x) for a standard normal Z: Φ(x) = erfc(−x/√2)/2.
pub(crate) fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// Complementary error function, with fractional error below 1.2·10⁻⁷
/// everywhere (a Chebyshev fit: W. H. Press et al., *Numerical Recipes in
/// C*, 2nd ed., §6.2, `erfcc`). Relative accuracy in the tails is what a
/// small p-value and the spending boundaries' tail probabilities (10⁻⁴ to
/// 10⁻⁸) need; the tests check it against tabulated values.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let ans = t * poly.exp();
    if x >= 0.0 {
        ans
    } else {
        2.0 - ans
    }
}

/// The standard normal density.
pub(crate) fn normal_pdf(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// The x with P(Z > x) = `upper` (0 < upper < 1), by bisection on
/// [`normal_cdf`]: no closed form is needed for the few calls made.
pub(crate) fn normal_upper_quantile(upper: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0_f64, 40.0_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if 1.0 - normal_cdf(mid) > upper && normal_cdf(-mid) > upper {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// P(|T| ≤ t) for Student's t with `df` ≥ 1 degrees of freedom, by the
/// exact finite series of M. Abramowitz and I. A. Stegun, *Handbook of
/// Mathematical Functions* (1964), 26.7.3 (odd ν) and 26.7.4 (even ν), in
/// θ = atan(t/√ν).
fn t_central(theta: f64, df: usize) -> f64 {
    let (s, c) = theta.sin_cos();
    let c2 = c * c;
    if df % 2 == 1 {
        // (2/π)·(θ + sinθ·(cosθ + (2/3)cos³θ + (2·4)/(3·5)cos⁵θ + …)),
        // the last power cos^(ν−2)θ.
        let mut term = c;
        let mut sum = if df >= 3 { c } else { 0.0 };
        let mut k = 1;
        while k + 2 < df {
            term *= c2 * (k + 1) as f64 / (k + 2) as f64;
            sum += term;
            k += 2;
        }
        2.0 / std::f64::consts::PI * (theta + s * sum)
    } else {
        // sinθ·(1 + (1/2)cos²θ + (1·3)/(2·4)cos⁴θ + …), the last power
        // cos^(ν−2)θ.
        let mut term = 1.0;
        let mut sum = 1.0;
        let mut k = 1;
        while k + 1 < df {
            term *= c2 * k as f64 / (k + 1) as f64;
            sum += term;
            k += 2;
        }
        s * sum
    }
}

/// The t with P(T > t) = `upper` for Student's t with `df` ≥ 1 degrees of
/// freedom (0 < upper < ½): from the exact series up to
/// [`CORNISH_FISHER_DF`], by the expansion beyond.
pub(crate) fn t_upper_quantile(upper: f64, df: usize) -> f64 {
    debug_assert!(df >= 1 && upper > 0.0 && upper < 0.5);
    if df > CORNISH_FISHER_DF {
        t_upper_quantile_expansion(upper, df)
    } else {
        t_upper_quantile_series(upper, df)
    }
}

/// [`t_upper_quantile`] from the exact series, at any `df`: bisection in
/// θ = atan(t/√ν) on [`t_central`], so that even the 1 − 10⁻⁹ quantile at
/// one degree of freedom (about 3·10⁸) is found without an unbounded
/// search.
fn t_upper_quantile_series(upper: f64, df: usize) -> f64 {
    let target = 1.0 - 2.0 * upper;
    let (mut lo, mut hi) = (0.0_f64, std::f64::consts::FRAC_PI_2);
    for _ in 0..80 {
        let mid = 0.5 * (lo + hi);
        if t_central(mid, df) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (0.5 * (lo + hi)).tan() * (df as f64).sqrt()
}

/// Beyond this many degrees of freedom the series of [`t_central`] (ν/2
/// terms per evaluation) gives way to the expansion, which is then exact
/// to far more digits than the boundaries need (tested below).
const CORNISH_FISHER_DF: usize = 100;

/// The t quantile from the normal one by the Cornish–Fisher expansion in
/// 1/ν (Abramowitz and Stegun 26.7.5, after G. W. Hill, Algorithm 396,
/// CACM 13 (1970) 617–619), to the 1/ν⁴ term.
fn t_upper_quantile_expansion(upper: f64, df: usize) -> f64 {
    let z = normal_upper_quantile(upper);
    let nu = df as f64;
    let z2 = z * z;
    let g1 = z * (z2 + 1.0) / 4.0;
    let g2 = z * ((5.0 * z2 + 16.0) * z2 + 3.0) / 96.0;
    let g3 = z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / 384.0;
    let g4 = z * ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) / 92160.0;
    z + g1 / nu + g2 / (nu * nu) + g3 / nu.powi(3) + g4 / nu.powi(4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::student_t_975;

    /// erfc against Abramowitz & Stegun Table 7.1 and Φ against the
    /// standard normal table.
    #[test]
    fn erfc_known_values() {
        for (x, want) in [
            (0.0, 1.0),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.157_299_207_050_285_1),
            (2.0, 0.004_677_734_981_047_266),
            (3.0, 2.209_049_699_858_544e-5),
            (-1.0, 1.842_700_792_949_715),
        ] {
            let got = erfc(x);
            assert!(((got - want) / want).abs() < 1.2e-7, "erfc({x}) = {got}");
        }
        assert!((normal_cdf(1.96) - 0.975_002_104_851_78).abs() < 1e-7);
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
    }

    #[test]
    fn normal_known_values() {
        // The fit's relative error bound is 1.2·10⁻⁷.
        let near = |x: f64, want: f64| (x / want - 1.0).abs() < 1.2e-7;
        assert!(near(normal_cdf(0.0), 0.5));
        assert!(near(normal_cdf(-1.959_963_985), 0.025));
        assert!(near(normal_cdf(-1.644_853_627), 0.05));
        // Far tail, relative accuracy: Φ(−6) = 9.8659·10⁻¹⁰.
        assert!(near(normal_cdf(-6.0), 9.865_876_450e-10));
        assert!((normal_upper_quantile(0.025) - 1.959_964).abs() < 1e-5);
        assert!((normal_upper_quantile(0.2) - 0.841_621).abs() < 1e-5);
    }

    /// The expansion against the exact series where both apply.
    #[test]
    fn expansion_agrees_with_the_series() {
        for df in [101, 150, 400, 1000] {
            for upper in [0.05, 1e-3, 1e-5, 1e-7] {
                let exact = t_upper_quantile_series(upper, df);
                let approx = t_upper_quantile_expansion(upper, df);
                assert!(
                    (approx / exact - 1.0).abs() < 1e-6,
                    "{df} {upper}: {approx} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn t_quantile_matches_the_table() {
        for df in (1..=30).chain([40, 60, 120]) {
            let t = t_upper_quantile(0.025, df);
            assert!((t - student_t_975(df)).abs() < 6e-4, "df {df}: {t}");
        }
        // Closed forms: ν = 1 is Cauchy, ν = 2 has t = (2p−1)/√(2p(1−p)).
        let p: f64 = 1.0 - 1e-6;
        let cauchy = (std::f64::consts::PI * (p - 0.5)).tan();
        assert!((t_upper_quantile(1e-6, 1) / cauchy - 1.0).abs() < 1e-6);
        let two = (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt();
        assert!((t_upper_quantile(1e-6, 2) / two - 1.0).abs() < 1e-6);
        // Large ν approaches the normal quantile from above.
        let z = normal_upper_quantile(1e-4);
        let t = t_upper_quantile(1e-4, 2000);
        assert!(t > z && t - z < 0.01, "{t} vs {z}");
    }
}
