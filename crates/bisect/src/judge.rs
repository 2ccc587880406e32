//! The step decision: is the candidate better than, worse than or no
//! different from the bound it ran beside, or is it too early to say?
//!
//! Behind a trait of our own so that the narrowing (`search.rs`) does not
//! care which verdict rule answers: [`SequentialJudge`] answers with
//! benchlab's sequential verdict (valid under a look after every round),
//! [`CompareJudge`] with the fixed-sample `benchlab_stats::compare`.

use benchlab_stats::{
    compare, Better, Interval, Outcome as SeqOutcome, SequentialRule, Unit, UnitKind, Verdict,
};
use serde::{Deserialize, Serialize};

/// What one comparison of a candidate with its bound allows to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepVerdict {
    /// The candidate is better than the bound by more than the margin.
    Better,
    /// The candidate is worse than the bound by more than the margin.
    Worse,
    /// The difference lies within the margin either way.
    NoDifference,
    /// The data allow both: more repetitions may decide.
    Undecided,
}

impl StepVerdict {
    /// The verdict in the words the command prints.
    pub fn words(self) -> &'static str {
        match self {
            StepVerdict::Better => "better",
            StepVerdict::Worse => "worse",
            StepVerdict::NoDifference => "no difference",
            StepVerdict::Undecided => "undecided",
        }
    }
}

/// A candidate's figures against its bound's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// What may be said.
    pub verdict: StepVerdict,
    /// The candidate's advantage over the bound, percent (negative:
    /// slower), of the means.
    pub effect_pct: f64,
    /// Its 95 % confidence interval, when the samples bound one.
    pub ci_pct: Option<(f64, f64)>,
    /// Repetitions of the bound and of the candidate the verdict rests on.
    pub n: (usize, usize),
    /// Undecided: the smallest advantage, percent either way, the rule
    /// would call at its stated power with data this spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mde_pct: Option<f64>,
}

impl Judgement {
    /// The effect with its interval, as every reader shows it:
    /// `-7.41 % [-8.02, -6.80]`.
    pub fn effect_text(&self) -> String {
        match self.ci_pct {
            Some((lo, hi)) => format!("{:+.2} % [{lo:+.2}, {hi:+.2}]", self.effect_pct),
            None => format!("{:+.2} % (no interval)", self.effect_pct),
        }
    }
}

/// One unit of a step: a block of the bound's repetitions and the
/// candidate's block next to it in time (ABBA: AB, BA, …), so that drift
/// the two share cancels in their difference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    /// The bound's figures in the unit.
    pub bound: Vec<f64>,
    /// The candidate's figures in the unit.
    pub candidate: Vec<f64>,
}

/// A verdict rule for one step.
pub trait Judge {
    /// The candidate against the bound over every unit so far, in time
    /// order; a difference counts only beyond `margin_pct` (percent of the
    /// bound's figure); `max_units` is the step's budget.
    fn judge(&self, units: &[Pair], better: Better, margin_pct: f64, max_units: usize)
        -> Judgement;
}

fn flat(units: &[Pair]) -> (Vec<f64>, Vec<f64>) {
    let bound = units.iter().flat_map(|u| u.bound.iter().copied()).collect();
    let candidate = units
        .iter()
        .flat_map(|u| u.candidate.iter().copied())
        .collect();
    (bound, candidate)
}

fn undecided(n: (usize, usize)) -> Judgement {
    Judgement {
        verdict: StepVerdict::Undecided,
        effect_pct: f64::NAN,
        ci_pct: None,
        n,
        mde_pct: None,
    }
}

/// benchlab's sequential verdict (`benchlab_stats::SequentialRule`): the
/// units are the block pairs, the interval a repeated one, so that a step
/// may look after every round and stop as soon as it is decided with its
/// error rate still the rule's.
#[derive(Debug, Clone, Copy, Default)]
pub struct SequentialJudge;

impl Judge for SequentialJudge {
    fn judge(
        &self,
        units: &[Pair],
        better: Better,
        margin_pct: f64,
        max_units: usize,
    ) -> Judgement {
        let (b, c) = flat(units);
        let n = (b.len(), c.len());
        let Ok(rule) = SequentialRule::new(margin_pct, max_units, UnitKind::BlockPair) else {
            return undecided(n);
        };
        // A is the candidate: the advantage is the candidate's.
        let Some(units) = units
            .iter()
            .map(|u| Unit::from_repetitions(&u.candidate, &u.bound))
            .collect::<Option<Vec<Unit>>>()
        else {
            return undecided(n);
        };
        let Some(d) = rule.plan().decide(&units, better) else {
            return undecided(n);
        };
        let (verdict, ci) = match d.outcome {
            SeqOutcome::Better => (StepVerdict::Better, d.ci_pct),
            SeqOutcome::Worse => (StepVerdict::Worse, d.ci_pct),
            SeqOutcome::Equivalent => (StepVerdict::NoDifference, d.equivalence_ci_pct),
            SeqOutcome::Undecided | SeqOutcome::Continue => (StepVerdict::Undecided, d.ci_pct),
        };
        Judgement {
            verdict,
            effect_pct: d.advantage_pct,
            ci_pct: ci.map(|Interval { lo, hi, .. }| (lo, hi)),
            n,
            mde_pct: d.mde_pct,
        }
    }
}

/// benchlab's report verdict: the candidate's advantage with Fieller's
/// interval over every repetition, a difference real only when the whole
/// interval lies beyond the margin and the rank test does not contradict
/// it. A fixed-sample rule: looking again after more rounds raises its
/// error rate; kept to compare the two rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompareJudge;

impl Judge for CompareJudge {
    fn judge(
        &self,
        units: &[Pair],
        better: Better,
        margin_pct: f64,
        _max_units: usize,
    ) -> Judgement {
        let (bound, candidate) = flat(units);
        let n = (bound.len(), candidate.len());
        let Some(c) = compare(&candidate, &bound, better, margin_pct) else {
            return undecided(n);
        };
        let verdict = match c.verdict {
            Verdict::Better => StepVerdict::Better,
            Verdict::Worse => StepVerdict::Worse,
            Verdict::WithinNoise => StepVerdict::NoDifference,
            Verdict::Inconclusive | Verdict::Insufficient => StepVerdict::Undecided,
        };
        Judgement {
            verdict,
            effect_pct: c.advantage_pct,
            ci_pct: c.ci_pct.map(|Interval { lo, hi, .. }| (lo, hi)),
            n,
            mde_pct: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Units of `k` figures each side, the candidate at `ratio` of the
    /// bound, with a small alternating wobble.
    fn units(ratio: f64, units: usize) -> Vec<Pair> {
        (0..units)
            .map(|u| {
                let w = |i: usize| 1.0 + 0.004 * (((u * 3 + i) % 5) as f64 - 2.0);
                Pair {
                    bound: (0..3).map(|i| 100.0 * w(i)).collect(),
                    candidate: (0..3).map(|i| 100.0 * ratio * w(i + 1)).collect(),
                }
            })
            .collect()
    }

    #[test]
    fn both_rules_call_a_clear_slowdown_worse_and_a_tie_no_difference() {
        let judges: [&dyn Judge; 2] = [&SequentialJudge, &CompareJudge];
        for j in judges {
            let r = j.judge(&units(0.92, 6), Better::Higher, 4.0, 16);
            assert_eq!(r.verdict, StepVerdict::Worse, "{r:?}");
            assert!((r.effect_pct + 8.0).abs() < 0.5, "{r:?}");
            assert_eq!(r.n, (18, 18));
            let r = j.judge(&units(1.0, 6), Better::Higher, 4.0, 16);
            assert_eq!(r.verdict, StepVerdict::NoDifference, "{r:?}");
            // Lower is better: a larger latency is worse.
            let r = j.judge(&units(1.08, 6), Better::Lower, 4.0, 16);
            assert_eq!(r.verdict, StepVerdict::Worse, "{r:?}");
        }
    }

    #[test]
    fn one_unit_or_a_spread_beyond_the_margin_leaves_it_undecided() {
        let r = SequentialJudge.judge(&units(0.9, 1), Better::Higher, 4.0, 16);
        assert_eq!(r.verdict, StepVerdict::Undecided, "{r:?}");
        let spread: Vec<Pair> = (0..4)
            .map(|u| Pair {
                bound: vec![100.0 + 30.0 * (u % 2) as f64],
                candidate: vec![96.0 - 30.0 * (u % 2) as f64],
            })
            .collect();
        let r = SequentialJudge.judge(&spread, Better::Higher, 4.0, 16);
        assert_eq!(r.verdict, StepVerdict::Undecided, "{r:?}");
    }
}
