//! Percentile bootstrap intervals for the ratio of two samples' medians or
//! means, deterministic so that a report is reproducible.
//!
//! Source: B. Efron and R. J. Tibshirani, *An Introduction to the
//! Bootstrap* (Chapman & Hall, 1993), ch. 13 (the percentile interval) and
//! §19.3 (about 1000 or more resamples for percentile intervals). Each side
//! is resampled on its own, with replacement, as for two independent
//! samples (ibid., §8.3).
//!
//! The resampling draws come from SplitMix64 (G. L. Steele, D. Lea and
//! C. H. Flood, "Fast splittable pseudorandom number generators", OOPSLA
//! 2014), seeded from the sorted data: the same samples in any order give
//! the same interval, and no global random state is touched.

use serde::{Deserialize, Serialize};

use crate::summary::{median_of_sorted, sorted_finite, Interval};

/// Resamples per interval: ten times Efron & Tibshirani's minimum for
/// percentile intervals, so that the 2.5 % and 97.5 % quantiles rest on
/// 250 draws each.
pub const BOOTSTRAP_RESAMPLES: usize = 10_000;

/// Which statistic of each sample the ratio is taken of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Statistic {
    /// The median.
    Median,
    /// The arithmetic mean.
    Mean,
}

impl Statistic {
    fn of_sorted(self, sorted: &[f64]) -> f64 {
        match self {
            Statistic::Median => median_of_sorted(sorted),
            Statistic::Mean => sorted.iter().sum::<f64>() / sorted.len() as f64,
        }
    }
}

/// Percentile-bootstrap interval at `level` (e.g. 0.95) for
/// `stat(A) / stat(B)`, from `resamples` resamples of each side.
///
/// The interval is widened, if needed, to contain the point estimate
/// `stat(A)/stat(B)` of the original samples (the percentile interval need
/// not contain it when the bootstrap distribution is skewed; a reported
/// interval that excludes its own estimate would confuse every reader).
///
/// `None` when a sample is empty or not finite, when `level` is not in
/// (0, 1), when `resamples` is 0, or when some resample of B has a
/// statistic of 0 (the ratio is undefined).
///
/// ```
/// use benchlab_stats::{bootstrap_ratio_ci, Statistic, BOOTSTRAP_RESAMPLES};
/// let a = [110.0, 111.0, 109.0, 110.5, 112.0];
/// let b = [100.0, 101.0, 99.0, 100.5, 99.5];
/// let ci = bootstrap_ratio_ci(&a, &b, Statistic::Median, BOOTSTRAP_RESAMPLES, 0.95).unwrap();
/// assert!(ci.lo > 1.0 && ci.hi < 1.2);
/// ```
pub fn bootstrap_ratio_ci(
    a: &[f64],
    b: &[f64],
    stat: Statistic,
    resamples: usize,
    level: f64,
) -> Option<Interval> {
    if resamples == 0 || !(level > 0.0 && level < 1.0) {
        return None;
    }
    let sa = sorted_finite(a)?;
    let sb = sorted_finite(b)?;
    let point = stat.of_sorted(&sa) / stat.of_sorted(&sb);
    if !point.is_finite() {
        return None;
    }
    let mut rng = SplitMix64(seed_of(&sa, &sb));
    let mut ra = vec![0.0; sa.len()];
    let mut rb = vec![0.0; sb.len()];
    let mut ratios = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        resample(&sa, &mut ra, &mut rng);
        resample(&sb, &mut rb, &mut rng);
        let r = stat.of_sorted(&ra) / stat.of_sorted(&rb);
        if !r.is_finite() {
            return None;
        }
        ratios.push(r);
    }
    ratios.sort_by(f64::total_cmp);
    let alpha = (1.0 - level) / 2.0;
    let lo = quantile_sorted(&ratios, alpha);
    let hi = quantile_sorted(&ratios, 1.0 - alpha);
    Some(Interval {
        lo: lo.min(point),
        hi: hi.max(point),
        level,
    })
}

/// Fills `out` with a sorted resample (with replacement) of `sorted`.
fn resample(sorted: &[f64], out: &mut [f64], rng: &mut SplitMix64) {
    let n = sorted.len() as u64;
    for x in out.iter_mut() {
        *x = sorted[rng.below(n) as usize];
    }
    out.sort_by(f64::total_cmp);
}

/// The R/Hyndman–Fan type 7 quantile of a sorted, non-empty slice.
pub(crate) fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// FNV-1a over the bit patterns of both sorted samples (with their
/// lengths, so that moving a value from A to B changes the seed).
fn seed_of(a: &[f64], b: &[f64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |x: u64| {
        for byte in x.to_le_bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(a.len() as u64);
    a.iter().for_each(|x| eat(x.to_bits()));
    eat(b.len() as u64);
    b.iter().for_each(|x| eat(x.to_bits()));
    h
}

/// SplitMix64 (Steele, Lea & Flood 2014), the generator Java's
/// `SplittableRandom` uses.
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A draw in 0..n by multiply-shift (D. Lemire, "Fast random integer
    /// generation in an interval", ACM TOMACS 29 (2019)); the bias, at most
    /// n/2⁶⁴, is immaterial for samples of repetitions.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first outputs of SplitMix64 from state 0, recomputed for this
    /// test with a line-by-line Python transliteration of S. Vigna's
    /// reference `splitmix64.c` (prng.di.unimi.it).
    #[test]
    fn splitmix_reference_sequence() {
        let mut r = SplitMix64(0);
        assert_eq!(r.next(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(r.next(), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn constant_samples_give_the_exact_ratio() {
        let ci = bootstrap_ratio_ci(&[2.0; 3], &[1.0; 3], Statistic::Median, 1000, 0.95).unwrap();
        assert_eq!((ci.lo, ci.hi), (2.0, 2.0));
    }

    /// With one value per side every resample is the sample itself.
    #[test]
    fn single_values() {
        let ci = bootstrap_ratio_ci(&[3.0], &[2.0], Statistic::Mean, 100, 0.95).unwrap();
        assert_eq!((ci.lo, ci.hi), (1.5, 1.5));
    }

    /// Three values against three: each side's bootstrap median takes one
    /// of the three values (a resample median is a data value for odd n),
    /// so the interval's ends are ratios of data values.
    #[test]
    fn three_against_three_bounds_are_data_ratios() {
        let a = [10.0, 11.0, 12.0];
        let b = [5.0, 6.0, 7.0];
        let ci = bootstrap_ratio_ci(&a, &b, Statistic::Median, 10_000, 0.95).unwrap();
        let ratios: Vec<f64> = a
            .iter()
            .flat_map(|x| b.iter().map(move |y| x / y))
            .collect();
        assert!(ratios.iter().any(|r| (r - ci.lo).abs() < 1e-12), "{ci:?}");
        assert!(ratios.iter().any(|r| (r - ci.hi).abs() < 1e-12), "{ci:?}");
        assert!(ci.lo <= 11.0 / 6.0 && 11.0 / 6.0 <= ci.hi);
    }

    #[test]
    fn rejects_bad_input() {
        assert!(bootstrap_ratio_ci(&[], &[1.0], Statistic::Mean, 10, 0.95).is_none());
        assert!(bootstrap_ratio_ci(&[1.0], &[0.0], Statistic::Mean, 10, 0.95).is_none());
        assert!(bootstrap_ratio_ci(&[1.0], &[1.0], Statistic::Mean, 0, 0.95).is_none());
        assert!(bootstrap_ratio_ci(&[1.0], &[1.0], Statistic::Mean, 10, 1.0).is_none());
    }

    #[test]
    fn type_7_quantiles() {
        // R: quantile(1:10, c(0.025, 0.5, 0.975)) → 1.225 5.5 9.775
        let xs: Vec<f64> = (1..=10).map(f64::from).collect();
        assert!((quantile_sorted(&xs, 0.025) - 1.225).abs() < 1e-12);
        assert_eq!(quantile_sorted(&xs, 0.5), 5.5);
        assert!((quantile_sorted(&xs, 0.975) - 9.775).abs() < 1e-12);
    }
}
