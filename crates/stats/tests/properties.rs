//! Property tests for benchlab-stats: invariants that must hold for every
//! sample, not just the hand-checked ones in the unit tests.

use benchlab_stats::{
    advantage_pct, bootstrap_ratio_ci, compare, geometric_mean, mann_whitney, mean, median,
    median_run, median_stddev_run, percentile, should_stop, student_t_975, summarize, Better,
    Statistic, StopDecision, StopRule, Verdict, MAX_REPETITIONS_ESTIMATE, SIGNIFICANCE,
};
use proptest::prelude::*;

/// Finite samples spanning several orders of magnitude, both signs.
fn sample() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(-1e9_f64..1e9, 1..64)
}

/// Samples drawn from a handful of values, so that ties are common.
fn tied_sample() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec((0_u8..5).prop_map(f64::from), 1..24)
}

/// Positive samples, as throughputs and latencies are.
fn positive_sample() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(1e-6_f64..1e9, 1..64)
}

fn better() -> impl Strategy<Value = Better> {
    prop_oneof![Just(Better::Higher), Just(Better::Lower)]
}

fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

proptest! {
    #[test]
    fn summary_point_estimates_lie_within_the_data(xs in sample()) {
        let s = summarize(&xs).unwrap();
        prop_assert_eq!(s.n, xs.len());
        prop_assert!(s.min <= s.median && s.median <= s.max, "{:?}", s);
        prop_assert!(s.min <= s.mean && s.mean <= s.max, "{:?}", s);
        prop_assert!(s.stddev >= 0.0);
        prop_assert_eq!(Some(s.mean), mean(&xs));
        prop_assert_eq!(Some(s.median), median(&xs));
    }

    #[test]
    fn summary_intervals_contain_their_estimates(xs in sample()) {
        let s = summarize(&xs).unwrap();
        match &s.mean_ci {
            Some(ci) => {
                prop_assert!(ci.contains(s.mean), "{:?} vs {}", ci, s.mean);
                prop_assert_eq!(ci.level, 0.95);
            }
            None => prop_assert!(xs.len() < 2),
        }
        match &s.median_ci {
            Some(ci) => {
                prop_assert!(ci.contains(s.median), "{:?} vs {}", ci, s.median);
                prop_assert!(s.min <= ci.lo && ci.hi <= s.max);
                prop_assert!((0.0..=1.0).contains(&ci.level));
                // Honest coverage: 95 % or more from six runs up, and the
                // true, lower coverage of [min, max] below that.
                if xs.len() >= 6 {
                    prop_assert!(ci.level >= 0.95, "{:?}", ci);
                } else {
                    prop_assert!(ci.level < 0.95, "{:?}", ci);
                    prop_assert_eq!((ci.lo, ci.hi), (s.min, s.max));
                }
            }
            None => prop_assert!(xs.len() < 2),
        }
    }

    #[test]
    fn summary_ignores_order(xs in sample()) {
        let mut reversed = xs.clone();
        reversed.reverse();
        let (a, b) = (summarize(&xs).unwrap(), summarize(&reversed).unwrap());
        prop_assert_eq!((a.min, a.max, a.median), (b.min, b.max, b.median));
        prop_assert_eq!(a.median_ci, b.median_ci);
    }

    #[test]
    fn median_run_odd_points_at_the_median(xs in sample(), extra in -1e9_f64..1e9) {
        let mut xs = xs;
        if xs.len() % 2 == 0 {
            xs.push(extra);
        }
        let i = median_run(&xs).unwrap();
        prop_assert_eq!(xs[i], median(&xs).unwrap());
    }

    #[test]
    fn median_run_picks_lower_middle_and_earliest_tie(xs in tied_sample()) {
        let i = median_run(&xs).unwrap();
        let lower_middle = sorted(&xs)[(xs.len() - 1) / 2];
        prop_assert_eq!(xs[i], lower_middle);
        prop_assert!(xs[..i].iter().all(|&x| x != lower_middle));
    }

    #[test]
    fn median_stddev_run_agrees_with_median_run(xs in tied_sample()) {
        prop_assert_eq!(median_stddev_run(&xs), median_run(&xs));
    }

    #[test]
    fn geometric_mean_at_most_arithmetic_mean(xs in positive_sample()) {
        let g = geometric_mean(&xs).unwrap();
        let a = mean(&xs).unwrap();
        let s = sorted(&xs);
        prop_assert!(s[0] <= g && g <= s[s.len() - 1]);
        // AM–GM; the tolerance covers rounding when all values are equal.
        prop_assert!(g <= a * (1.0 + 1e-12), "gm {} > am {}", g, a);
    }

    #[test]
    fn advantage_sign_follows_the_difference(a in 1e-6_f64..1e9, b in 1e-6_f64..1e9) {
        let hi = advantage_pct(a, b, Better::Higher).unwrap();
        let lo = advantage_pct(a, b, Better::Lower).unwrap();
        prop_assert_eq!(hi, -lo);
        if a > b {
            prop_assert!(hi > 0.0 && lo < 0.0);
        } else if a < b {
            prop_assert!(hi < 0.0 && lo > 0.0);
        } else {
            prop_assert!(hi == 0.0 && lo == 0.0);
        }
    }

    #[test]
    fn compare_identical_is_never_a_difference(
        xs in positive_sample(),
        better in better(),
        noise in 0.0_f64..10.0,
    ) {
        let c = compare(&xs, &xs, better, noise).unwrap();
        prop_assert_eq!(c.advantage_pct, 0.0);
        prop_assert!(
            !matches!(c.verdict, Verdict::Better | Verdict::Worse),
            "{:?}", c
        );
        if xs.len() < 2 {
            prop_assert_eq!(c.verdict, Verdict::Insufficient);
        }
    }

    #[test]
    fn compare_interval_contains_point_and_agrees_with_verdict(
        a in positive_sample(),
        b in positive_sample(),
        better in better(),
        noise in 0.0_f64..10.0,
    ) {
        let c = compare(&a, &b, better, noise).unwrap();
        let point = advantage_pct(mean(&a).unwrap(), mean(&b).unwrap(), better).unwrap();
        prop_assert_eq!(c.advantage_pct, point);
        if a.len() < 2 || b.len() < 2 {
            prop_assert_eq!(c.verdict, Verdict::Insufficient);
            prop_assert!(c.ci_pct.is_none());
        } else if let Some(ci) = &c.ci_pct {
            prop_assert!(ci.lo <= c.advantage_pct && c.advantage_pct <= ci.hi, "{:?}", c);
            let by_interval = if ci.lo > noise {
                Verdict::Better
            } else if ci.hi < -noise {
                Verdict::Worse
            } else if ci.lo >= -noise && ci.hi <= noise {
                Verdict::WithinNoise
            } else {
                Verdict::Inconclusive
            };
            // The rank test can only veto a call, never make one; a vetoed
            // call is inconclusive, not "no difference".
            let t = c.rank_test.as_ref().unwrap();
            let vetoed = t.can_decide(SIGNIFICANCE) && t.p_value > SIGNIFICANCE;
            let expected = match by_interval {
                Verdict::Better | Verdict::Worse if vetoed => Verdict::Inconclusive,
                v => v,
            };
            prop_assert_eq!(c.verdict, expected);
            // Only an interval that straddles the band gets an estimate,
            // and it is always more than the repetitions already made.
            if by_interval != Verdict::Inconclusive {
                prop_assert_eq!(c.repetitions_to_decide, None);
            }
            if let Some(n) = c.repetitions_to_decide {
                prop_assert!(n > a.len().max(b.len()) && n <= MAX_REPETITIONS_ESTIMATE);
            }
            prop_assert_eq!(c.small_n(), !t.can_decide(SIGNIFICANCE));
            if let Some(m) = &c.median_ci_pct {
                let point = advantage_pct(median(&a).unwrap(), median(&b).unwrap(), better).unwrap();
                prop_assert!(m.lo <= point && point <= m.hi, "{:?} {}", m, point);
            }
        } else {
            // Unbounded: anything is possible, nothing decided.
            prop_assert_eq!(c.verdict, Verdict::Inconclusive);
        }
    }

    #[test]
    fn compare_swapping_direction_mirrors_the_interval(
        a in prop::collection::vec(1.0_f64..1e6, 2..32),
        b in prop::collection::vec(1.0_f64..1e6, 2..32),
    ) {
        let h = compare(&a, &b, Better::Higher, 1.0).unwrap();
        let l = compare(&a, &b, Better::Lower, 1.0).unwrap();
        prop_assert_eq!(h.advantage_pct, -l.advantage_pct);
        match (h.ci_pct, l.ci_pct) {
            (Some(x), Some(y)) => {
                let tol = 1e-9 * (1.0 + x.lo.abs().max(x.hi.abs()));
                prop_assert!((x.lo + y.hi).abs() <= tol && (x.hi + y.lo).abs() <= tol);
            }
            (None, None) => {}
            other => prop_assert!(false, "{:?}", other),
        }
        let mirrored = match h.verdict {
            Verdict::Better => Verdict::Worse,
            Verdict::Worse => Verdict::Better,
            v => v,
        };
        prop_assert_eq!(l.verdict, mirrored);
    }

    #[test]
    fn t_quantile_is_non_increasing(df in 1_usize..100_000) {
        prop_assert!(student_t_975(df + 1) <= student_t_975(df));
        prop_assert!(student_t_975(df) >= 1.96);
    }

    #[test]
    fn rank_test_ignores_order_and_is_antisymmetric(
        a in prop::collection::vec((0_u8..20).prop_map(f64::from), 1..30),
        b in prop::collection::vec((0_u8..20).prop_map(f64::from), 1..30),
    ) {
        let t = mann_whitney(&a, &b).unwrap();
        let mut ra = a.clone();
        ra.reverse();
        let t2 = mann_whitney(&ra, &sorted(&b)).unwrap();
        prop_assert_eq!(&t, &t2);
        let s = mann_whitney(&b, &a).unwrap();
        prop_assert_eq!(t.u + s.u, (a.len() * b.len()) as f64);
        prop_assert!((t.p_value - s.p_value).abs() < 1e-12);
        prop_assert!((0.0..=1.0).contains(&t.p_value));
        prop_assert!(t.p_value >= t.min_p - 1e-12 || !t.exact);
    }

    #[test]
    fn bootstrap_contains_its_estimate_and_ignores_order(
        a in prop::collection::vec(1.0_f64..1e6, 1..12),
        b in prop::collection::vec(1.0_f64..1e6, 1..12),
        mean_stat in any::<bool>(),
    ) {
        let stat = if mean_stat { Statistic::Mean } else { Statistic::Median };
        let ci = bootstrap_ratio_ci(&a, &b, stat, 500, 0.95).unwrap();
        let point = match stat {
            Statistic::Median => median(&a).unwrap() / median(&b).unwrap(),
            Statistic::Mean => mean(&a).unwrap() / mean(&b).unwrap(),
        };
        prop_assert!(ci.lo <= point * (1.0 + 1e-12) && point <= ci.hi * (1.0 + 1e-12), "{:?} {}", ci, point);
        let mut ra = a.clone();
        ra.reverse();
        prop_assert_eq!(bootstrap_ratio_ci(&ra, &sorted(&b), stat, 500, 0.95).unwrap(), ci);
    }

    #[test]
    fn percentiles_are_ordered_and_ignore_order(xs in sample(), p in 0.0_f64..100.0, q in 0.0_f64..100.0) {
        let (lo, hi) = (p.min(q), p.max(q));
        let a = percentile(&xs, lo).unwrap();
        let b = percentile(&xs, hi).unwrap();
        prop_assert!(a <= b);
        let s = sorted(&xs);
        prop_assert!(s[0] <= a && b <= s[s.len() - 1]);
        prop_assert_eq!(percentile(&s, lo), Some(a));
        // The same middle value, up to the rounding of a + ½(b − a)
        // against a/2 + b/2: a few ulps of the two middle values, not of
        // their mean (±9·10⁸ around a median of −852 failed a bound on
        // the median's size in one CI run).
        let (p50, m) = (percentile(&xs, 50.0).unwrap(), median(&xs).unwrap());
        let middle = s[(s.len() - 1) / 2].abs().max(s[s.len() / 2].abs()).max(1.0);
        prop_assert!((p50 - m).abs() <= 4.0 * f64::EPSILON * middle, "{} vs {}", p50, m);
    }

    /// Fleming & Wallace's point: the geometric mean of the ratios equals
    /// the ratio of the geometric means, so normalizing before or after
    /// aggregating gives the same answer (the arithmetic mean lacks this).
    #[test]
    fn geometric_mean_of_ratios_is_ratio_of_geometric_means(
        pairs in prop::collection::vec((1e-3_f64..1e6, 1e-3_f64..1e6), 1..20),
    ) {
        let a: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let b: Vec<f64> = pairs.iter().map(|p| p.1).collect();
        let ratios: Vec<f64> = pairs.iter().map(|p| p.0 / p.1).collect();
        let lhs = geometric_mean(&ratios).unwrap();
        let rhs = geometric_mean(&a).unwrap() / geometric_mean(&b).unwrap();
        prop_assert!((lhs - rhs).abs() <= 1e-9 * lhs.max(rhs), "{} vs {}", lhs, rhs);
    }

    #[test]
    fn stop_rule_respects_min_and_max(
        xs in prop::collection::vec(1.0_f64..1e3, 0..12),
        extra_failures in 0_u32..4,
        min in 1_u32..5,
        span in 0_u32..6,
        target in 0.1_f64..20.0,
    ) {
        let rule = StopRule::new(min, min + span, target).unwrap();
        let attempts = xs.len() as u32 + extra_failures;
        let d = should_stop(&xs, attempts, &rule);
        if attempts >= rule.max {
            prop_assert_ne!(d, StopDecision::Continue);
        }
        if d == StopDecision::TargetReached {
            prop_assert!(xs.len() >= min as usize);
        }
        if xs.len() < min as usize && attempts < rule.max {
            prop_assert_eq!(d, StopDecision::Continue);
        }
    }
}
