//! The Mann-Whitney U (Wilcoxon rank-sum) test: does one sample tend to
//! hold larger values than the other? Distribution-free, so it needs no
//! normality assumption; its price is that with very few repetitions it
//! cannot reach significance at all, which [`RankTest::min_p`] states.
//!
//! Sources: H. B. Mann and D. R. Whitney, "On a test of whether one of two
//! random variables is stochastically larger than the other", Ann. Math.
//! Statist. 18 (1947) 50–60; M. Hollander and D. A. Wolfe, *Nonparametric
//! Statistical Methods*, 2nd ed. (Wiley, 1999), §4.1. The p-value follows
//! R's `wilcox.test(x, y, exact = NULL, correct = TRUE)`: exact when both
//! samples have fewer than 50 values and there are no ties, otherwise the
//! normal approximation with tie and continuity corrections.

use serde::{Deserialize, Serialize};

use crate::dist::normal_cdf;
use crate::summary::all_finite;

/// Largest sample size (each side) for which the exact distribution is
/// used, as R's `wilcox.test` (`n.x < 50 && n.y < 50`).
pub const EXACT_LIMIT: usize = 50;

/// The result of [`mann_whitney`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankTest {
    /// U of the first sample: the number of pairs (a, b) with a > b, plus
    /// half the number of ties (R's `W`). 0 ≤ U ≤ n_a·n_b.
    pub u: f64,
    /// Two-sided p-value in [0, 1].
    pub p_value: f64,
    /// Whether `p_value` comes from the exact distribution (else the normal
    /// approximation).
    pub exact: bool,
    /// The smallest two-sided p-value any rank test can reach with these
    /// sample sizes: 2 / C(n_a + n_b, n_a), capped at 1. Above 0.05 the test
    /// cannot call any difference significant, however large (3 vs 3
    /// repetitions: 0.1).
    pub min_p: f64,
}

impl RankTest {
    /// Whether a rank test at these sample sizes can reach p ≤ `alpha` at
    /// all.
    pub fn can_decide(&self, alpha: f64) -> bool {
        self.min_p <= alpha
    }
}

/// Two-sided Mann-Whitney U test of sample A against sample B.
///
/// `None` when either sample is empty or holds NaN or an infinity. The
/// result does not depend on the order of either sample.
///
/// ```
/// // R: wilcox.test(c(1, 2, 3), c(4, 5, 6)) → W = 0, p-value = 0.1
/// let t = benchlab_stats::mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
/// assert_eq!(t.u, 0.0);
/// assert!((t.p_value - 0.1).abs() < 1e-12);
/// assert!(!t.can_decide(0.05));
/// ```
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<RankTest> {
    if a.is_empty() || b.is_empty() || !all_finite(a) || !all_finite(b) {
        return None;
    }
    let (m, n) = (a.len(), b.len());
    // Midranks of the pooled sample; tie groups for the variance correction.
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0; // Σ (t³ − t) over tie groups
    let mut ties = false;
    let mut i = 0;
    while i < pooled.len() {
        let mut j = i;
        while j + 1 < pooled.len() && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        if t > 1.0 {
            ties = true;
            tie_term += t * t * t - t;
        }
        // Ranks i+1 ..= j+1 share their mean.
        let midrank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_a += midrank * pooled[i..=j].iter().filter(|p| p.1).count() as f64;
        i = j + 1;
    }
    let (mf, nf) = (m as f64, n as f64);
    let u = rank_sum_a - mf * (mf + 1.0) / 2.0;
    let min_p = (2.0 / binomial(m + n, m)).min(1.0);
    let half = mf * nf / 2.0;

    if m < EXACT_LIMIT && n < EXACT_LIMIT && !ties {
        let counts = u_distribution(m, n);
        let total: f64 = counts.iter().map(|&c| c as f64).sum();
        // U is an integer without ties.
        let k = u.round() as usize;
        let tail = if u > half {
            counts[k..].iter().map(|&c| c as f64).sum::<f64>()
        } else {
            counts[..=k].iter().map(|&c| c as f64).sum::<f64>()
        };
        return Some(RankTest {
            u,
            p_value: (2.0 * tail / total).min(1.0),
            exact: true,
            min_p,
        });
    }

    let big_n = mf + nf;
    let var = mf * nf / 12.0 * ((big_n + 1.0) - tie_term / (big_n * (big_n - 1.0)));
    let p_value = if var <= 0.0 {
        // Every value equal: no evidence of any difference.
        1.0
    } else {
        let z = u - half;
        let correction = 0.5 * z.signum();
        let z = (z - correction) / var.sqrt();
        (2.0 * normal_cdf(-z.abs())).min(1.0)
    };
    Some(RankTest {
        u,
        p_value,
        exact: false,
        min_p,
    })
}

/// Frequencies of U = 0 ..= m·n over all C(m+n, m) equally likely
/// arrangements of m and n untied values: the coefficients of the Gaussian
/// binomial coefficient [m+n choose m]_q = Π_{i=1..m} (1 − q^{n+i}) / (1 − q^i)
/// (Andrews, *The Theory of Partitions*, Thm 3.1; the link to U is
/// Mann & Whitney's recurrence). Integer arithmetic, so exact; i128 holds
/// every coefficient for m, n < 50 (C(98, 49) ≈ 2.5·10²⁸).
fn u_distribution(m: usize, n: usize) -> Vec<i128> {
    let len = m * n + 1;
    let mut c = vec![0_i128; len];
    c[0] = 1;
    for i in 1..=m {
        // Multiply by (1 − q^{n+i}), from the top so each term is read
        // before it is changed.
        let s = n + i;
        for k in (s..len).rev() {
            c[k] -= c[k - s];
        }
        // Divide by (1 − q^i): b[k] = a[k] + b[k − i].
        for k in i..len {
            c[k] += c[k - i];
        }
    }
    c
}

/// C(n, k) as a float (for `min_p`; large values only lose digits that do
/// not matter for a p-value floor).
fn binomial(n: usize, k: usize) -> f64 {
    let k = k.min(n - k);
    (1..=k).fold(1.0, |acc, i| acc * (n - k + i) as f64 / i as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent reference: enumerate every way of choosing which m of
    /// the m+n pooled (untied) values belong to A and count U directly.
    fn brute_force_counts(m: usize, n: usize) -> Vec<u64> {
        let mut counts = vec![0_u64; m * n + 1];
        let total = m + n;
        for mask in 0_u32..(1 << total) {
            if mask.count_ones() as usize != m {
                continue;
            }
            // Position p holds value p; U = pairs (a in A, b in B) with a > b.
            let mut u = 0;
            for p in 0..total {
                if mask & (1 << p) != 0 {
                    u += (0..p).filter(|&q| mask & (1 << q) == 0).count();
                }
            }
            counts[u] += 1;
        }
        counts
    }

    #[test]
    fn exact_distribution_matches_enumeration() {
        for m in 1..=7 {
            for n in 1..=7 {
                let dp: Vec<u64> = u_distribution(m, n).iter().map(|&c| c as u64).collect();
                assert_eq!(dp, brute_force_counts(m, n), "m = {m}, n = {n}");
            }
        }
        // The total is C(m+n, m) even at the exact limit.
        let c = u_distribution(49, 49);
        let total: i128 = c.iter().sum();
        assert_eq!(total, 25_477_612_258_980_856_902_730_428_600); // C(98, 49)
        assert!(c.iter().all(|&x| x > 0));
    }

    /// R 4.x: `wilcox.test(c(1,2,3), c(4,5,6))` → W = 0, p-value = 0.1:
    /// the two most extreme of C(6,3) = 20 arrangements.
    #[test]
    fn three_against_three() {
        let t = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert_eq!((t.u, t.exact), (0.0, true));
        assert!((t.p_value - 0.1).abs() < 1e-15);
        assert!((t.min_p - 0.1).abs() < 1e-15);
        let t = mann_whitney(&[4.0, 5.0, 6.0], &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(t.u, 9.0);
        assert!((t.p_value - 0.1).abs() < 1e-15);
    }

    /// The example of R's `?wilcox.test` (Hollander & Wolfe 1973, p. 69:
    /// permeability constants, x at term, y at 12–26 weeks):
    /// `wilcox.test(x, y, alternative = "g")` → W = 35, p-value = 0.1272,
    /// so the two-sided p is 0.2544. Also checked here against the
    /// enumeration: P(U ≥ 35) for m = 10, n = 5 is 382 / 3003.
    #[test]
    fn hollander_wolfe_example() {
        let x = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46];
        let y = [1.15, 0.88, 0.90, 0.74, 1.21];
        let t = mann_whitney(&x, &y).unwrap();
        assert_eq!(t.u, 35.0);
        assert!(t.exact);
        let counts = brute_force_counts(10, 5);
        let upper: u64 = counts[35..].iter().sum();
        assert_eq!((upper, counts.iter().sum::<u64>()), (382, 3003));
        assert!((t.p_value - 2.0 * 382.0 / 3003.0).abs() < 1e-12);
        assert_eq!(format!("{:.4}", t.p_value / 2.0), "0.1272");
    }

    /// Ties force the normal approximation. Reference computed by hand
    /// (R's formula): a = 1 2 2 3 4, b = 2 3 5 5 6. Pooled midranks:
    /// 1→1, 2→3 (×3), 3→5.5 (×2), 4→7, 5→8.5 (×2), 6→10.
    /// Rank sum of a = 1 + 3 + 3 + 5.5 + 7 = 19.5, U = 19.5 − 15 = 4.5.
    /// Ties: groups of 3, 2, 2 → Σ(t³ − t) = 24 + 6 + 6 = 36.
    /// σ² = 25/12 · (11 − 36/90) = 22.083…; z = (4.5 − 12.5 + 0.5)/σ =
    /// −1.595 99; p = 2Φ(z) = 0.110 49 (Python: math.erfc(1.595 99/√2)).
    #[test]
    fn ties_use_the_corrected_normal_approximation() {
        let t = mann_whitney(&[1.0, 2.0, 2.0, 3.0, 4.0], &[2.0, 3.0, 5.0, 5.0, 6.0]).unwrap();
        assert_eq!(t.u, 4.5);
        assert!(!t.exact);
        let sigma = (25.0_f64 / 12.0 * (11.0 - 36.0 / 90.0)).sqrt();
        let z = (4.5 - 12.5 + 0.5) / sigma;
        assert!((z + 1.595_99).abs() < 1e-5, "{z}");
        assert!((t.p_value - 0.110_49).abs() < 1e-5, "{}", t.p_value);
    }

    #[test]
    fn all_equal_is_no_evidence() {
        let t = mann_whitney(&[5.0; 4], &[5.0; 3]).unwrap();
        assert_eq!((t.u, t.p_value), (6.0, 1.0));
    }

    #[test]
    fn rejects_bad_input() {
        assert!(mann_whitney(&[], &[1.0]).is_none());
        assert!(mann_whitney(&[1.0], &[f64::NAN]).is_none());
    }

    #[test]
    fn min_p_values() {
        let p = |m: usize, n: usize| mann_whitney(&vec![1.0; m], &vec![2.0; n]).unwrap().min_p;
        assert!((p(3, 3) - 0.1).abs() < 1e-15);
        assert!((p(3, 4) - 2.0 / 35.0).abs() < 1e-15);
        assert!((p(4, 4) - 2.0 / 70.0).abs() < 1e-15);
        assert_eq!(p(1, 1), 1.0);
    }
}
