//! Property tests of the sequential verdict: invariants that hold for any
//! units, not just the simulated ones.

use benchlab_stats::{Better, Outcome, SequentialRule, Unit, UnitKind, Units};
use proptest::prelude::*;

/// Positive units (throughputs, latencies) around 100 with spread up to
/// about ±30 %.
fn units() -> impl Strategy<Value = Vec<Unit>> {
    prop::collection::vec((70.0_f64..130.0, 70.0_f64..130.0), 1..40)
        .prop_map(|v| v.into_iter().map(|(a, b)| Unit::round(a, b)).collect())
}

fn better() -> impl Strategy<Value = Better> {
    prop_oneof![Just(Better::Higher), Just(Better::Lower)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The verdict follows from the intervals, the intervals hold the
    /// point estimate, and the equivalence interval (1 − 2α) lies within
    /// the decision interval (1 − α).
    #[test]
    fn outcome_agrees_with_the_intervals(
        us in units(),
        better in better(),
        margin in 0.0_f64..10.0,
        spare in 0_usize..20,
    ) {
        let rule = SequentialRule::new(margin, (us.len() + spare).max(2), UnitKind::Round).unwrap();
        let d = rule.plan().decide(&us, better).unwrap();
        if let Some(ci) = &d.ci_pct {
            prop_assert!(ci.lo <= d.advantage_pct && d.advantage_pct <= ci.hi);
            if let Some(eq) = &d.equivalence_ci_pct {
                prop_assert!(ci.lo <= eq.lo + 1e-9 && eq.hi <= ci.hi + 1e-9, "{:?} {:?}", ci, eq);
            }
        }
        match d.outcome {
            Outcome::Better => prop_assert!(d.ci_pct.as_ref().unwrap().lo > margin),
            Outcome::Worse => prop_assert!(d.ci_pct.as_ref().unwrap().hi < -margin),
            Outcome::Equivalent => {
                let eq = d.equivalence_ci_pct.as_ref().unwrap();
                prop_assert!(eq.lo > -margin && eq.hi < margin);
            }
            Outcome::Undecided => prop_assert_eq!(us.len(), rule.max_units),
            Outcome::Continue => prop_assert!(us.len() < rule.max_units),
        }
        prop_assert_eq!(d.mde_pct.is_some() && d.outcome.is_decided(), false);
        if let Some(mde) = d.mde_pct {
            prop_assert!(mde > margin);
        }
    }

    /// Figures in other units (ms instead of s) give the same verdict.
    #[test]
    fn verdict_is_scale_free(us in units(), better in better(), scale in 0.001_f64..1000.0) {
        let rule = SequentialRule::new(2.0, us.len().max(2), UnitKind::Round).unwrap();
        let plan = rule.plan();
        let scaled: Vec<Unit> = us.iter().map(|u| Unit::round(u.a * scale, u.b * scale)).collect();
        let (d, s) = (plan.decide(&us, better).unwrap(), plan.decide(&scaled, better).unwrap());
        prop_assert_eq!(d.outcome, s.outcome);
        prop_assert!((d.advantage_pct - s.advantage_pct).abs() < 1e-6);
    }

    /// Summing the units one by one gives what the whole list gives.
    #[test]
    fn running_sums_match_the_list(us in units(), better in better()) {
        let rule = SequentialRule::new(2.0, us.len().max(2), UnitKind::Round).unwrap();
        let plan = rule.plan();
        let mut running = Units::new();
        for (i, u) in us.iter().enumerate() {
            running.push(*u);
            let (a, b) = (
                plan.decide_units(&running, better).unwrap(),
                plan.decide(&us[..=i], better).unwrap(),
            );
            prop_assert_eq!(a.outcome, b.outcome);
            prop_assert!((a.advantage_pct - b.advantage_pct).abs() < 1e-9);
        }
    }

    /// A fixed design never decides before its one look.
    #[test]
    fn a_fixed_design_looks_once(us in units(), better in better()) {
        prop_assume!(us.len() >= 3);
        let rule = SequentialRule::fixed(2.0, us.len(), UnitKind::Round).unwrap();
        let plan = rule.plan();
        for n in 1..us.len() {
            prop_assert_eq!(plan.decide(&us[..n], better).unwrap().outcome, Outcome::Continue);
        }
        prop_assert!(plan.decide(&us, better).unwrap().outcome.is_final());
    }
}
