//! Change points in a series of runs: E-Divisive means.
//!
//! Method: D. S. Matteson and N. A. James, "A Nonparametric Approach for
//! Multiple Change Point Analysis of Multivariate Data", Journal of the
//! American Statistical Association 109 (2014), 334–345 — the energy
//! statistic with exponent α = 1 (differences of means and of spread both
//! count), hierarchical bisection, and a permutation test of each new
//! split (their section 3.2). Performance CI uses the same method: D. Daly
//! et al., "The Use of Change Point Detection to Identify Software
//! Performance Regressions in a Continuous Integration System", ICPE 2020
//! (MongoDB), and Apache Otava (formerly Hunter, DataStax).
//!
//! As in the paper, a split of a segment is searched over the change τ
//! and a right limit κ inside the segment, so that a short excursion inside
//! a long segment (a level that went up and came back) stands out rather
//! than being averaged with what follows it. The permutation test shuffles each current segment within itself, so
//! that change points already accepted are respected, and compares the best
//! statistic over all segments with the observed one:
//! p = (1 + #{permuted ≥ observed}) / (1 + permutations), which is never 0
//! and keeps the test's level exact under exchangeability.

use crate::bootstrap::SplitMix64;

/// How [`change_points`] searches and tests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePointOptions {
    /// A split is accepted when its permutation p-value is at most this.
    pub significance: f64,
    /// Permutations per test; the smallest p-value is 1 / (permutations + 1).
    pub permutations: usize,
    /// Fewest values on either side of a change (at least 2: the statistic
    /// needs a pair within each side).
    pub min_segment: usize,
    /// Seed of the permutations (the same series and seed give the same
    /// answer).
    pub seed: u64,
}

/// The defaults: p ≤ 0.01 with 199 permutations, segments of 3 runs or
/// more. Matteson & James and the ecp package test at 0.05; a lab that
/// looks at dozens of series after every run needs fewer false alarms per
/// series than that, and a 3-run segment is the shortest whose mean is not
/// one outlier.
impl Default for ChangePointOptions {
    fn default() -> Self {
        ChangePointOptions {
            significance: 0.01,
            permutations: 199,
            min_segment: 3,
            seed: 0x5eed_c4a9,
        }
    }
}

/// One accepted change.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangePoint {
    /// Index of the first value after the change.
    pub index: usize,
    /// The permutation p-value of the split when it was accepted.
    pub p_value: f64,
    /// The energy statistic q̂ of the split (in the series' unit).
    pub statistic: f64,
    /// Mean of the segment that ends at the change (final segmentation).
    pub before_mean: f64,
    /// Mean of the segment that starts at the change.
    pub after_mean: f64,
    /// (after − before) / before in %, None when the mean before is 0.
    pub change_pct: Option<f64>,
}

/// What [`change_points`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Segmentation {
    /// The accepted changes, by index.
    pub changes: Vec<ChangePoint>,
    /// The p-value of the strongest split that was tested and rejected
    /// (None when no segment was long enough to test another split).
    pub rejected_p_value: Option<f64>,
}

/// Change points of `series` by E-Divisive means (see the module docs),
/// with a seeded permutation test of each split. None when a value is not
/// finite, `significance` is not in (0, 1] or `permutations` is 0; a series
/// shorter than twice the minimum segment has no changes.
pub fn change_points(series: &[f64], opts: &ChangePointOptions) -> Option<Segmentation> {
    if series.iter().any(|x| !x.is_finite())
        || !(opts.significance > 0.0 && opts.significance <= 1.0)
        || opts.permutations == 0
    {
        return None;
    }
    let min = opts.min_segment.max(2);
    let mut rng = SplitMix64(opts.seed);
    // Segment starts; the last segment ends at the series' end.
    let mut starts = vec![0usize];
    let mut accepted: Vec<(usize, f64, f64)> = Vec::new();
    let mut shuffled = series.to_vec();
    let rejected_p_value = loop {
        let Some((split, observed)) = best_over_segments(series, &starts, min) else {
            break None;
        };
        let mut as_large = 0usize;
        for _ in 0..opts.permutations {
            shuffle_segments(&mut shuffled, &starts, &mut rng);
            let q = best_over_segments(&shuffled, &starts, min).map_or(0.0, |(_, q)| q);
            if q >= observed {
                as_large += 1;
            }
        }
        let p = (1 + as_large) as f64 / (1 + opts.permutations) as f64;
        if p > opts.significance {
            break Some(p);
        }
        accepted.push((split, p, observed));
        let at = starts.partition_point(|&s| s < split);
        starts.insert(at, split);
    };
    accepted.sort_by_key(|c| c.0);
    let changes = accepted
        .iter()
        .map(|&(index, p_value, statistic)| {
            let i = starts
                .binary_search(&index)
                .expect("an accepted split starts a segment");
            let end = starts.get(i + 1).copied().unwrap_or(series.len());
            let before_mean = mean_of(&series[starts[i - 1]..index]);
            let after_mean = mean_of(&series[index..end]);
            ChangePoint {
                index,
                p_value,
                statistic,
                before_mean,
                after_mean,
                change_pct: (before_mean != 0.0)
                    .then(|| (after_mean - before_mean) / before_mean.abs() * 100.0),
            }
        })
        .collect();
    Some(Segmentation {
        changes,
        rejected_p_value,
    })
}

fn mean_of(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Fisher–Yates within each segment.
fn shuffle_segments(x: &mut [f64], starts: &[usize], rng: &mut SplitMix64) {
    for (k, &a) in starts.iter().enumerate() {
        let b = starts.get(k + 1).copied().unwrap_or(x.len());
        let seg = &mut x[a..b];
        for i in (1..seg.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            seg.swap(i, j);
        }
    }
}

/// The best split (absolute index, q̂) over every segment long enough.
fn best_over_segments(x: &[f64], starts: &[usize], min: usize) -> Option<(usize, f64)> {
    let mut best: Option<(usize, f64)> = None;
    for (k, &a) in starts.iter().enumerate() {
        let b = starts.get(k + 1).copied().unwrap_or(x.len());
        if let Some((m, q)) = best_split(&x[a..b], min) {
            if best.is_none_or(|(_, bq)| q > bq) {
                best = Some((a + m, q));
            }
        }
    }
    best
}

/// The split of one segment that maximises Matteson & James's q̂ (their
/// eq. 5 with α = 1) over the change τ and the right limit κ: X = the
/// values in [0, τ), Y = those in [τ, κ), m = |X|, r = |Y|,
///
/// q̂ = m·r/(m+r) · [ 2/(m·r) Σ|xᵢ−yⱼ| − 2/(m(m−1)) Σ|xᵢ−xₖ| − 2/(r(r−1)) Σ|yⱼ−yₖ| ].
///
/// Returns (τ, q̂). With each value's prefix sums of distances, every
/// (τ, κ) costs O(1): O(n²) time and memory per segment.
fn best_split(seg: &[f64], min: usize) -> Option<(usize, f64)> {
    let n = seg.len();
    if n < 2 * min {
        return None;
    }
    // prefix[k·(n+1) + i] = Σ_{j<i} |seg[k] − seg[j]|.
    let w = n + 1;
    let mut prefix = vec![0.0; n * w];
    for (k, &x) in seg.iter().enumerate() {
        let row = &mut prefix[k * w..(k + 1) * w];
        for (i, &y) in seg.iter().enumerate() {
            row[i + 1] = row[i] + (x - y).abs();
        }
    }
    let p = |k: usize, i: usize| prefix[k * w + i];
    let mut best: Option<(usize, f64)> = None;
    // Σ of distances within [0, τ), kept as τ grows.
    let mut left = 0.0;
    for tau in 1..=n - min {
        left += p(tau - 1, tau - 1);
        if tau < min {
            continue;
        }
        let mf = tau as f64;
        let (mut right, mut between) = (0.0, 0.0);
        for kappa in tau + 1..=n {
            // seg[kappa - 1] joins Y.
            let k = kappa - 1;
            right += p(k, k) - p(k, tau);
            between += p(k, tau);
            let r = kappa - tau;
            if r < min {
                continue;
            }
            let rf = r as f64;
            let energy = 2.0 * between / (mf * rf)
                - 2.0 * left / (mf * (mf - 1.0))
                - 2.0 * right / (rf * (rf - 1.0));
            let q = mf * rf / (mf + rf) * energy;
            if best.is_none_or(|(_, bq)| q > bq) {
                best = Some((tau, q));
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Normal draws (Box–Muller) from a seed, for synthetic series.
    fn normals(seed: u64, n: usize) -> Vec<f64> {
        let mut rng = SplitMix64(seed);
        let mut unit = || ((rng.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        (0..n)
            .map(|_| (-2.0 * unit().ln()).sqrt() * (std::f64::consts::TAU * unit()).cos())
            .collect()
    }

    /// `levels` as (value, runs), each value with 3 % relative noise.
    fn series(seed: u64, levels: &[(f64, usize)]) -> Vec<f64> {
        let n = levels.iter().map(|l| l.1).sum();
        let z = normals(seed, n);
        let mut out = Vec::with_capacity(n);
        for &(v, runs) in levels {
            for _ in 0..runs {
                out.push(v * (1.0 + 0.03 * z[out.len()]));
            }
        }
        out
    }

    #[test]
    fn a_ten_percent_step_after_twenty_runs_is_found_there() {
        // 50 series of 40 runs: 20 at 100, 20 at 110, noise 3 %.
        let tries = 50;
        let mut exact = 0;
        for seed in 0..tries {
            let s = series(seed, &[(100.0, 20), (110.0, 20)]);
            let found = change_points(&s, &ChangePointOptions::default()).unwrap();
            assert!(
                !found.changes.is_empty(),
                "seed {seed}: no change found in {s:?}"
            );
            let first = &found.changes[0];
            assert!(first.p_value <= 0.01, "{first:?}");
            let pct = first.change_pct.unwrap();
            assert!((5.0..15.0).contains(&pct), "seed {seed}: {first:?}");
            if found.changes.len() == 1 && first.index == 20 {
                exact += 1;
            }
        }
        println!("step found exactly at run 21 (index 20), alone: {exact} of {tries} series");
        // A 3.3 σ step located from the data: at most a few series may put
        // it one run off or add a second change.
        assert!(exact * 10 >= tries * 9, "{exact} of {tries}");
        // The first series, which the docs quote, exactly.
        let s = series(0, &[(100.0, 20), (110.0, 20)]);
        let found = change_points(&s, &ChangePointOptions::default()).unwrap();
        assert_eq!(found.changes.len(), 1, "{found:?}");
        assert_eq!(found.changes[0].index, 20, "{found:?}");
    }

    #[test]
    fn pure_noise_rarely_reports_a_change() {
        let tries = 200u64;
        let mut false_alarms = 0;
        for seed in 1000..1000 + tries {
            let s = series(seed, &[(100.0, 40)]);
            let found = change_points(&s, &ChangePointOptions::default()).unwrap();
            if !found.changes.is_empty() {
                false_alarms += 1;
            } else {
                assert!(found.rejected_p_value.unwrap() > 0.01);
            }
        }
        let rate = false_alarms as f64 / tries as f64 * 100.0;
        println!("pure noise (40 runs, 3 %): {false_alarms} of {tries} series report a change ({rate:.1} %)");
        assert!(rate < 5.0, "{rate} %");
    }

    #[test]
    fn two_changes_are_both_found() {
        let s = series(7, &[(100.0, 15), (120.0, 15), (100.0, 15)]);
        let found = change_points(&s, &ChangePointOptions::default()).unwrap();
        let at: Vec<usize> = found.changes.iter().map(|c| c.index).collect();
        assert_eq!(at, [15, 30], "{found:?}");
        // Means of the final segments on either side.
        assert!((found.changes[0].after_mean - found.changes[1].before_mean).abs() < 1e-12);
        assert!(found.changes[1].change_pct.unwrap() < -10.0);
    }

    #[test]
    fn the_same_seed_gives_the_same_answer() {
        let s = series(3, &[(100.0, 8), (104.0, 8)]);
        let o = ChangePointOptions::default();
        assert_eq!(change_points(&s, &o), change_points(&s, &o));
    }

    #[test]
    fn minimum_segment_and_edge_cases() {
        // 30 runs at 100 then 4 at 150: segments of 4 find the change at
        // run 30; segments of 5 cannot put a change closer than 5 runs to
        // the end.
        let s = series(5, &[(100.0, 30), (150.0, 4)]);
        let four = ChangePointOptions {
            min_segment: 4,
            ..Default::default()
        };
        let found = change_points(&s, &four).unwrap();
        assert_eq!(found.changes[0].index, 30, "{found:?}");
        assert!(found.changes[0].change_pct.unwrap() > 40.0, "{found:?}");
        let five = ChangePointOptions {
            min_segment: 5,
            ..Default::default()
        };
        let found = change_points(&s, &five).unwrap();
        assert!(
            found
                .changes
                .iter()
                .all(|c| c.index + 5 <= s.len() && c.index >= 5),
            "{found:?}"
        );
        // A constant series: every permutation ties, p = 1.
        let flat = change_points(&[5.0; 12], &ChangePointOptions::default()).unwrap();
        assert!(flat.changes.is_empty());
        assert_eq!(flat.rejected_p_value, Some(1.0));
        // Too short to split.
        let short = change_points(&[1.0, 2.0, 3.0], &ChangePointOptions::default()).unwrap();
        assert_eq!(short.rejected_p_value, None);
        assert!(change_points(&[1.0, f64::NAN], &ChangePointOptions::default()).is_none());
        let bad = ChangePointOptions {
            significance: 0.0,
            ..Default::default()
        };
        assert!(change_points(&[1.0; 8], &bad).is_none());
    }

    /// q̂ from its definition, against the prefix sums.
    #[test]
    fn best_split_matches_the_definition() {
        let s = series(11, &[(100.0, 6), (107.0, 7), (100.0, 5)]);
        let pairs = |v: &[f64]| {
            let mut t = 0.0;
            for i in 0..v.len() {
                for k in i + 1..v.len() {
                    t += (v[i] - v[k]).abs();
                }
            }
            t
        };
        let direct = |tau: usize, kappa: usize| {
            let (x, y) = (&s[..tau], &s[tau..kappa]);
            let between: f64 = x
                .iter()
                .flat_map(|a| y.iter().map(move |b| (a - b).abs()))
                .sum();
            let (mf, rf) = (x.len() as f64, y.len() as f64);
            mf * rf / (mf + rf)
                * (2.0 * between / (mf * rf)
                    - pairs(x) / (mf * (mf - 1.0) / 2.0)
                    - pairs(y) / (rf * (rf - 1.0) / 2.0))
        };
        let mut best = (0, f64::MIN);
        for tau in 3..=s.len() - 3 {
            for kappa in tau + 3..=s.len() {
                let q = direct(tau, kappa);
                if q > best.1 {
                    best = (tau, q);
                }
            }
        }
        let (tau, q) = best_split(&s, 3).unwrap();
        assert_eq!(tau, best.0);
        assert!((q - best.1).abs() < 1e-9 * best.1.abs(), "{q} vs {best:?}");
    }
}
