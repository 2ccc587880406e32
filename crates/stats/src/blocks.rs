//! Comparisons of configurations that ran in blocks: drift between the
//! blocks measured and carried into the interval, or, with one block per
//! configuration and nothing to measure it by, declared unknown.
//!
//! # Why blocks need their own interval
//!
//! [`compare`](crate::compare) treats the repetitions of A and B as
//! independent samples of the same conditions. That holds when the
//! configurations alternate at every repetition: whatever drifts on the
//! machine (other load, caches, clock frequency, writeback) reaches both
//! alike and shows up as spread. When every repetition of A runs before
//! every repetition of B, the drift between the two stretches of time is
//! added to the difference of the means and to nothing else, so the
//! interval is too narrow and the verdict can report the drift as a
//! difference (the A/A test of issue 30 called 2 of 11 identical
//! comparisons real). The repetitions inside one block are then
//! *pseudoreplicates* (Hurlbert, "Pseudoreplication and the design of
//! ecological field experiments", Ecological Monographs 54 (1984)
//! 187–211): the unit that was replicated against drift is the block.
//!
//! # The two-level model
//!
//! A repetition's figure is `μ_c + b_j + e_ij`: the configuration's mean,
//! the effect of the block it ran in (variance σ_b²) and the repetition's
//! own noise (variance σ_w²). The mean of a configuration's n repetitions
//! over blocks of sizes m_j then has the variance
//! `σ_w²/n + σ_b²·Σm_j²/n²` (one-way random-effects model; Searle, Casella
//! & McCulloch, *Variance Components*, Wiley 1992, §3.6). Both components
//! are estimated by the analysis of variance: σ_w² from the repetitions
//! around their block means (n − B degrees of freedom), σ_b² from the
//! spread of the block means less the part the within-block noise
//! explains, clipped at 0 (the method-of-moments estimator of §3.5 there).
//! Drift on one machine is taken to be relative, so σ_b² is pooled over
//! the configurations of a row as a squared coefficient of variation,
//! weighted by B − 1; a configuration that ran in one block borrows it.
//! The degrees of freedom of the combined error follow Satterthwaite
//! (Biometrics Bulletin 2 (1946) 110–114), with the pooled block term
//! counted once. The interval is Fieller's, as in [`compare`], from these
//! variances.
//!
//! When no configuration of the row ran in two blocks or more, σ_b² cannot
//! be estimated at all: the interval of [`compare`] is still given, but no
//! verdict beyond [`Verdict::Inconclusive`] is, and the comparison is
//! marked [`Drift::Unknown`].

use serde::{Deserialize, Serialize};

use crate::compare::{
    advantage_pct, by_interval, compare, fieller_95, median_ci_pct, ratio_to_pct, vetoed,
    within_sign, Better, Comparison, Verdict,
};
use crate::rank::mann_whitney;
use crate::summary::{all_finite, mean, Interval, LEVEL_95};

/// How the repetitions of a comparison were ordered in time, and so what
/// its interval can say about drift.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Drift {
    /// The configurations alternated at every repetition: drift reached
    /// both sides alike and widens the interval as spread.
    #[default]
    Alternated,
    /// The configurations ran in blocks and some ran in two or more: the
    /// spread between blocks was measured and is part of the interval.
    Measured,
    /// One block per configuration and no other block to measure drift
    /// by: a difference between the blocks may be drift, so the verdict is
    /// at most [`Verdict::Inconclusive`].
    Unknown,
}

impl Drift {
    /// The mark reports print beside a verdict, if any.
    pub fn mark(self) -> Option<&'static str> {
        match self {
            Drift::Unknown => Some("one block each, drift unknown"),
            Drift::Alternated | Drift::Measured => None,
        }
    }
}

/// One configuration's repetitions with the block each ran in (blocks
/// numbered in any way; equal numbers mean the same block).
#[derive(Debug, Clone, Copy)]
pub struct Blocked<'a> {
    /// The figures.
    pub values: &'a [f64],
    /// The block of each figure, aligned with `values`.
    pub blocks: &'a [u32],
}

/// The between-block variance of a row, relative to the configurations'
/// means (a squared coefficient of variation), pooled as [`block_spread`]
/// describes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockSpread {
    /// σ_b² / μ², pooled.
    pub rel_var: f64,
    /// Its degrees of freedom: Σ (B − 1) over the configurations with two
    /// blocks or more.
    pub df: f64,
}

/// Per block: (size, mean), in block order.
fn block_means(side: Blocked<'_>) -> Vec<(usize, f64)> {
    let mut ids: Vec<u32> = side.blocks.to_vec();
    ids.sort_unstable();
    ids.dedup();
    ids.iter()
        .map(|&id| {
            let vals: Vec<f64> = side
                .values
                .iter()
                .zip(side.blocks)
                .filter(|(_, &b)| b == id)
                .map(|(&v, _)| v)
                .collect();
            (vals.len(), vals.iter().sum::<f64>() / vals.len() as f64)
        })
        .collect()
}

/// Within-block variance and its degrees of freedom (n − B); `None` when
/// every block holds one repetition.
fn within(side: Blocked<'_>, means: &[(usize, f64)]) -> Option<(f64, f64)> {
    let n = side.values.len();
    let df = n.checked_sub(means.len()).filter(|&d| d > 0)? as f64;
    let mut ids: Vec<u32> = side.blocks.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let ss: f64 = side
        .values
        .iter()
        .zip(side.blocks)
        .map(|(&v, b)| {
            let j = ids.binary_search(b).expect("block listed");
            (v - means[j].1).powi(2)
        })
        .sum();
    Some((ss / df, df))
}

fn valid(side: Blocked<'_>) -> bool {
    !side.values.is_empty() && side.values.len() == side.blocks.len() && all_finite(side.values)
}

/// The pooled between-block variance of the configurations of one row
/// (see the module documentation): `None` when none of them ran in two
/// blocks or more, or when a side is malformed (lengths differ, a value is
/// not finite, a mean is 0).
pub fn block_spread(sides: &[Blocked<'_>]) -> Option<BlockSpread> {
    let (mut sum, mut df) = (0.0, 0.0);
    for &side in sides {
        if !valid(side) {
            return None;
        }
        let means = block_means(side);
        let b = means.len();
        if b < 2 {
            continue;
        }
        let m = mean(side.values)?;
        if m == 0.0 {
            return None;
        }
        let mm = means.iter().map(|x| x.1).sum::<f64>() / b as f64;
        let s_m2 = means.iter().map(|x| (x.1 - mm).powi(2)).sum::<f64>() / (b - 1) as f64;
        let inv_size = means.iter().map(|x| 1.0 / x.0 as f64).sum::<f64>() / b as f64;
        let s_w2 = within(side, &means).map_or(0.0, |w| w.0);
        let sigma_b2 = (s_m2 - s_w2 * inv_size).max(0.0);
        sum += (b - 1) as f64 * sigma_b2 / (m * m);
        df += (b - 1) as f64;
    }
    (df > 0.0).then(|| BlockSpread {
        rel_var: sum / df,
        df,
    })
}

/// The squared standard error of a side's mean under the two-level model,
/// split into its within-block part (with its degrees of freedom) and its
/// block part.
struct SideError {
    mean: f64,
    within: Option<(f64, f64)>,
    block: f64,
}

fn side_error(side: Blocked<'_>, spread: BlockSpread) -> Option<SideError> {
    let means = block_means(side);
    let n = side.values.len() as f64;
    let m = mean(side.values)?;
    let sum_m2: f64 = means.iter().map(|x| (x.0 * x.0) as f64).sum();
    Some(SideError {
        mean: m,
        within: within(side, &means).map(|(v, df)| (v / n, df)),
        block: spread.rel_var * m * m * sum_m2 / (n * n),
    })
}

/// Compares A against B when the configurations ran in blocks: as
/// [`compare`], with the interval from the two-level model when `spread`
/// (the row's [`block_spread`]) is known, and with the verdict capped at
/// [`Verdict::Inconclusive`] and [`Drift::Unknown`] when it is not.
///
/// `None` as for [`compare`], or when a side's blocks and values differ in
/// length.
///
/// ```
/// use benchlab_stats::{block_spread, compare_blocked, Better, Blocked, Drift, Verdict};
/// // A/A in one block each: B's block ran 4 % slower, nothing says why.
/// let (a, b) = ([100.0, 101.0, 99.0, 100.0], [96.0, 96.5, 95.5, 96.0]);
/// let one = [0, 0, 0, 0];
/// let (sa, sb) = (Blocked { values: &a, blocks: &one }, Blocked { values: &b, blocks: &one });
/// let c = compare_blocked(sa, sb, block_spread(&[sa, sb]), Better::Higher, 1.0).unwrap();
/// assert_eq!((c.verdict, c.drift), (Verdict::Inconclusive, Drift::Unknown));
/// ```
pub fn compare_blocked(
    a: Blocked<'_>,
    b: Blocked<'_>,
    spread: Option<BlockSpread>,
    better: Better,
    noise_pct: f64,
) -> Option<Comparison> {
    if a.values.len() != a.blocks.len() || b.values.len() != b.blocks.len() {
        return None;
    }
    let mut plain = compare(a.values, b.values, better, noise_pct)?;
    if plain.verdict == Verdict::Insufficient {
        return Some(plain);
    }
    let Some(spread) = spread else {
        plain.drift = Drift::Unknown;
        plain.verdict = Verdict::Inconclusive;
        // More repetitions inside the same blocks cannot tell drift from
        // a difference; more blocks (or a control) can.
        plain.repetitions_to_decide = None;
        return Some(plain);
    };
    let (ea, eb) = (side_error(a, spread)?, side_error(b, spread)?);
    let r = ea.mean / eb.mean;
    let wa = ea.within.map_or(0.0, |w| w.0);
    let wb = eb.within.map_or(0.0, |w| w.0) * r * r;
    let blk = ea.block + eb.block * r * r;
    let (va, vb) = (wa + ea.block, eb.within.map_or(0.0, |w| w.0) + eb.block);
    // Satterthwaite over the within-block terms and the one pooled block
    // term; a missing within term (one repetition per block) adds nothing.
    let denom = ea.within.map_or(0.0, |w| wa * wa / w.1)
        + eb.within.map_or(0.0, |w| wb * wb / w.1)
        + blk * blk / spread.df;
    let total = wa + wb + blk;
    let df = if denom > 0.0 {
        total * total / denom
    } else {
        spread.df
    };
    let point = advantage_pct(ea.mean, eb.mean, better)?;
    let ci_pct = fieller_95(ea.mean, va, eb.mean, vb, df).map(|(lo, hi)| {
        let (lo, hi) = within_sign(lo, hi, a.values, b.values);
        let (p, q) = ratio_to_pct(lo, hi, eb.mean, better);
        Interval {
            lo: p.min(point),
            hi: q.max(point),
            level: LEVEL_95,
        }
    });
    let rank_test = mann_whitney(a.values, b.values);
    let verdict = vetoed(by_interval(ci_pct.as_ref(), noise_pct), rank_test.as_ref());
    Some(Comparison {
        advantage_pct: point,
        ci_pct,
        verdict,
        rank_test,
        median_ci_pct: median_ci_pct(a.values, b.values, better),
        repetitions_to_decide: None,
        drift: Drift::Measured,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side<'a>(values: &'a [f64], blocks: &'a [u32]) -> Blocked<'a> {
        Blocked { values, blocks }
    }

    #[test]
    fn one_block_each_is_at_most_inconclusive() {
        let a = [110.0, 111.0, 109.0, 110.0, 110.5];
        let b = [100.0, 100.5, 99.5, 100.0, 100.2];
        let z = [0; 5];
        let (sa, sb) = (side(&a, &z), side(&b, &z));
        assert_eq!(block_spread(&[sa, sb]), None);
        let c = compare_blocked(sa, sb, None, Better::Higher, 1.0).unwrap();
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert_eq!(c.drift, Drift::Unknown);
        assert_eq!(c.drift.mark(), Some("one block each, drift unknown"));
        // The plain comparison would have called it.
        assert_eq!(
            compare(&a, &b, Better::Higher, 1.0).unwrap().verdict,
            Verdict::Better
        );
    }

    #[test]
    fn block_spread_measures_drift_between_blocks() {
        // Two blocks each, 2 % apart in A, 2 % in B, tiny noise within.
        let a = [100.0, 100.1, 102.0, 102.1];
        let b = [90.0, 90.1, 91.8, 91.9];
        let blocks = [0, 0, 1, 1];
        let s = block_spread(&[side(&a, &blocks), side(&b, &blocks)]).unwrap();
        assert_eq!(s.df, 2.0);
        // Block means differ by 2 % of the mean: variance of two values
        // d apart is d²/2, so rel ≈ (0.02)²/2 = 2e-4.
        assert!((s.rel_var - 2e-4).abs() < 3e-5, "{}", s.rel_var);
        // No drift: the within-block noise explains the block means.
        let flat = [100.0, 101.0, 100.5, 100.6];
        let s = block_spread(&[side(&flat, &blocks)]).unwrap();
        assert_eq!(s.rel_var, 0.0);
    }

    #[test]
    fn measured_drift_widens_the_interval() {
        let a = [100.0, 100.2, 103.0, 103.2];
        let b = [97.0, 97.2, 100.0, 100.2];
        let blocks = [0, 0, 1, 1];
        let (sa, sb) = (side(&a, &blocks), side(&b, &blocks));
        let spread = block_spread(&[sa, sb]);
        let c = compare_blocked(sa, sb, spread, Better::Higher, 1.0).unwrap();
        assert_eq!(c.drift, Drift::Measured);
        let plain = compare(&a, &b, Better::Higher, 1.0).unwrap();
        let width = |c: &Comparison| {
            let ci = c.ci_pct.as_ref().unwrap();
            ci.hi - ci.lo
        };
        assert!(width(&c) > width(&plain), "{c:?} vs {plain:?}");
        assert!((c.advantage_pct - plain.advantage_pct).abs() < 1e-12);
    }

    #[test]
    fn a_large_difference_survives_measured_drift() {
        // 30 % apart, blocks 1 % apart: still called.
        let a = [130.0, 130.5, 131.3, 131.0, 130.2, 131.5];
        let b = [100.0, 100.3, 101.0, 101.2, 100.1, 100.9];
        let blocks = [0, 0, 0, 1, 1, 1];
        let (sa, sb) = (side(&a, &blocks), side(&b, &blocks));
        let c = compare_blocked(sa, sb, block_spread(&[sa, sb]), Better::Higher, 1.0).unwrap();
        assert_eq!(c.verdict, Verdict::Better, "{c:?}");
    }

    #[test]
    fn malformed_sides_give_none() {
        let a = [1.0, 2.0];
        assert!(
            compare_blocked(side(&a, &[0]), side(&a, &[0, 0]), None, Better::Higher, 1.0).is_none()
        );
        assert_eq!(block_spread(&[side(&[f64::NAN, 1.0], &[0, 1])]), None);
    }
}
