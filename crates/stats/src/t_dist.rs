//! Critical values of Student's t distribution for two-sided 95 % intervals.
//!
//! benchlab needs exactly one quantile, t(0.975; df), so it embeds a table
//! instead of pulling in a special-function library. netperf does the same
//! (`netlib.c: calculate_confidence()` carries a two-sided t table up to 30
//! degrees of freedom, beginning 12.706, 4.303, 3.182, …).

/// t(0.975; df) for df = 1..=30, then the anchor rows below.
///
/// Source: NIST/SEMATECH e-Handbook of Statistical Methods, §1.3.6.7.2
/// "Critical Values of the Student's t Distribution", column 0.975 (the
/// upper critical value of a two-sided 95 % interval); the same values as
/// netperf's table. Every entry is checked in the tests against a numerical
/// integration of the t density to be correctly rounded to three decimals.
const T_975_SMALL: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, // 1..=10
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, // 11..=20
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042, // 21..=30
];

/// Anchor rows (df, t(0.975; df)) beyond 30. Rows 40..=100 are from the same
/// NIST table (which lists every df up to 100); the row for 120 is the last
/// finite row of the classic tables (Abramowitz & Stegun, *Handbook of
/// Mathematical Functions*, Table 26.10). All are checked like the rows above.
const T_975_ANCHORS: [(usize, f64); 7] = [
    (30, 2.042),
    (40, 2.021),
    (50, 2.009),
    (60, 2.000),
    (80, 1.990),
    (100, 1.984),
    (120, 1.980),
];

/// z(0.975), the limit of t(0.975; df) as df → ∞ (standard normal quantile).
const Z_975: f64 = 1.960;

/// Upper 0.975 quantile of Student's t distribution with `df` degrees of
/// freedom: the multiplier of the standard error in a two-sided 95 %
/// confidence interval.
///
/// * `df` in 1..=30: the tabulated value (NIST/SEMATECH e-Handbook
///   §1.3.6.7.2, three decimals).
/// * `df` > 30: linear interpolation in 1/df between the tabulated rows 30,
///   40, 50, 60, 80, 100, 120 and ∞ (= 1.960). Interpolating in the
///   reciprocal of df ("harmonic interpolation", the rule that Abramowitz &
///   Stegun give with Table 26.10 as interpolation in 120/ν) works because
///   t(0.975; df) is nearly linear in 1/df; the error is below 0.001 for
///   every df, which the tests check against numerical integration.
/// * `df` = 0: `f64::INFINITY`. With no degrees of freedom the spread is
///   unknown and no finite interval is honest; callers should not ask.
///
/// The function is non-increasing in `df` and never below 1.960.
///
/// ```
/// assert_eq!(benchlab_stats::student_t_975(4), 2.776);
/// assert!(benchlab_stats::student_t_975(1_000_000) < 1.961);
/// ```
pub fn student_t_975(df: usize) -> f64 {
    if df == 0 {
        return f64::INFINITY;
    }
    if df <= T_975_SMALL.len() {
        return T_975_SMALL[df - 1];
    }
    let x = 1.0 / df as f64;
    for pair in T_975_ANCHORS.windows(2) {
        let (d0, t0) = pair[0];
        let (d1, t1) = pair[1];
        if df <= d1 {
            return lerp_reciprocal(x, d0, t0, d1, t1);
        }
    }
    // Between the last anchor and infinity (1/df = 0).
    let (d_last, t_last) = T_975_ANCHORS[T_975_ANCHORS.len() - 1];
    Z_975 + (t_last - Z_975) * x * d_last as f64
}

/// Linear interpolation in x = 1/df between (1/d0, t0) and (1/d1, t1).
fn lerp_reciprocal(x: f64, d0: usize, t0: f64, d1: usize, t1: f64) -> f64 {
    let x0 = 1.0 / d0 as f64;
    let x1 = 1.0 / d1 as f64;
    t1 + (t0 - t1) * (x - x1) / (x0 - x1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Γ((ν+1)/2) / Γ(ν/2) for integer ν by the recurrence
    /// c(ν+2) = c(ν)·(ν+1)/ν, from c(1) = 1/√π and c(2) = √π/2.
    fn gamma_ratio(nu: usize) -> f64 {
        let sqrt_pi = std::f64::consts::PI.sqrt();
        let (mut c, mut k) = if nu % 2 == 1 {
            (1.0 / sqrt_pi, 1)
        } else {
            (sqrt_pi / 2.0, 2)
        };
        while k < nu {
            c *= (k as f64 + 1.0) / k as f64;
            k += 2;
        }
        c
    }

    /// P(T ≤ t) for t ≥ 0, by composite Simpson integration of the density.
    /// An independent check of the table, not used by the library.
    fn t_cdf(t: f64, nu: usize) -> f64 {
        let nu_f = nu as f64;
        let norm = gamma_ratio(nu) / (nu_f * std::f64::consts::PI).sqrt();
        let density = |x: f64| norm * (1.0 + x * x / nu_f).powf(-(nu_f + 1.0) / 2.0);
        let steps = 4000;
        let h = t / steps as f64;
        let mut acc = density(0.0) + density(t);
        for i in 1..steps {
            let w = if i % 2 == 1 { 4.0 } else { 2.0 };
            acc += w * density(i as f64 * h);
        }
        0.5 + acc * h / 3.0
    }

    /// Standard normal CDF for t ≥ 0 by the same integration.
    fn normal_cdf(t: f64) -> f64 {
        let density = |x: f64| (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
        let steps = 4000;
        let h = t / steps as f64;
        let mut acc = density(0.0) + density(t);
        for i in 1..steps {
            let w = if i % 2 == 1 { 4.0 } else { 2.0 };
            acc += w * density(i as f64 * h);
        }
        0.5 + acc * h / 3.0
    }

    #[test]
    fn integration_check_is_itself_right() {
        // Cauchy (ν = 1) has a closed form: F(t) = 1/2 + atan(t)/π.
        let t = 3.0_f64;
        let exact = 0.5 + t.atan() / std::f64::consts::PI;
        assert!((t_cdf(t, 1) - exact).abs() < 1e-9);
        assert!((normal_cdf(1.959964) - 0.975).abs() < 1e-6);
    }

    #[test]
    fn table_rows_are_correctly_rounded() {
        // A value rounded to three decimals lies within ±0.0005 of the true
        // quantile, so the CDF brackets 0.975 across that window.
        let mut rows: Vec<(usize, f64)> = (1..=30).map(|d| (d, T_975_SMALL[d - 1])).collect();
        rows.extend_from_slice(&T_975_ANCHORS);
        for (df, t) in rows {
            assert!(t_cdf(t - 0.0005, df) < 0.975, "df {df}: {t} too large");
            assert!(t_cdf(t + 0.0005, df) > 0.975, "df {df}: {t} too small");
        }
        assert!(normal_cdf(Z_975 - 0.0005) < 0.975);
        assert!(normal_cdf(Z_975 + 0.0005) > 0.975);
    }

    #[test]
    fn interpolated_values_are_within_a_thousandth() {
        let dfs = (31..=130).chain([150, 200, 300, 500, 1000, 5000]);
        for df in dfs {
            let t = student_t_975(df);
            assert!(t_cdf(t - 0.001, df) < 0.975, "df {df}: {t} too large");
            assert!(t_cdf(t + 0.001, df) > 0.975, "df {df}: {t} too small");
        }
    }

    #[test]
    fn known_values() {
        assert_eq!(student_t_975(1), 12.706);
        assert_eq!(student_t_975(2), 4.303);
        assert_eq!(student_t_975(9), 2.262);
        assert_eq!(student_t_975(30), 2.042);
        assert_eq!(student_t_975(40), 2.021);
        assert_eq!(student_t_975(120), 1.980);
        assert!((student_t_975(240) - 1.970).abs() < 1e-12);
        assert!((student_t_975(usize::MAX) - 1.960).abs() < 1e-12);
        assert_eq!(student_t_975(0), f64::INFINITY);
    }

    #[test]
    fn monotone_and_bounded_below() {
        let mut prev = student_t_975(1);
        for df in 2..=10_000 {
            let t = student_t_975(df);
            assert!(t <= prev, "df {df}: {t} > {prev}");
            assert!(t >= Z_975);
            prev = t;
        }
    }
}
