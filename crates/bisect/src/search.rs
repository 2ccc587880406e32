//! The narrowing, as a pure state machine: it asks for a pair of versions
//! to measure, is handed their figures, and moves a bound. No I/O: the
//! runner (`runner.rs`) feeds it stored runs, a simulation feeds it
//! drawn numbers, and a resumed bisection replays the stored rounds into
//! a new one and arrives where the old one stopped.
//!
//! Versions are indices into an ordered list, 0 the good end and `n − 1`
//! the bad end. Step 0 measures bad beside good: a regression beyond the
//! margin goes on, no difference stops ("no difference between good and
//! bad"), bad faster than good stops (given the wrong way round). Each
//! later step measures the middle of the range beside the good bound and
//! compares with half the step-0 effect as margin: a candidate as slow as
//! bad (worse by more than half the effect) becomes the bad bound,
//! anything else the good bound. The range halves each step, so the
//! steps are 1 + ⌈log₂(n − 1)⌉.
//!
//! An undecided comparison runs another round of repetitions, pooled with
//! the earlier ones, up to `rounds` in all. A step still undecided then
//! ends the bisection undecided at that step: a point estimate nearer bad
//! or nearer good is not a verdict, and blaming a version on it would
//! send the user after the wrong change. The step's judgement carries the
//! smallest effect its data could have detected.

use benchlab_stats::Better;
use serde::{Deserialize, Serialize};

use crate::judge::{Judge, Judgement, Pair, StepVerdict};

/// How a bisection decides.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The direction of the figure.
    pub better: Better,
    /// The smallest slowdown worth finding, percent: step 0's margin.
    pub margin_pct: f64,
    /// Rounds of repetitions a step may run before it must decide (≥ 1).
    pub rounds: u32,
}

/// What a finished step decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Step 0: bad is slower than good; the search goes on.
    Regression,
    /// Step 0: no difference between good and bad.
    NoDifference,
    /// Step 0: good is slower than bad.
    WrongWayRound,
    /// Still undecided when the rounds were spent: the bisection stops.
    Undecided,
    /// The candidate is as slow as bad: the new bad bound.
    Bad,
    /// The candidate is not: the new good bound.
    Good,
}

impl Decision {
    /// What the step decided, in the words every reader shows.
    pub fn words(self) -> &'static str {
        match self {
            Decision::Regression => "bad is slower than good: bisecting",
            Decision::NoDifference => "no difference between good and bad",
            Decision::WrongWayRound => "good is slower than bad",
            Decision::Undecided => "undecided when the rounds were spent: the bisection stops here",
            Decision::Bad => "as slow as bad: the new bad bound",
            Decision::Good => "not as slow as bad: the new good bound",
        }
    }
}

/// One finished step and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Its number, from 0.
    pub index: usize,
    /// The version it ran beside (the good bound).
    pub bound: usize,
    /// The version it measured.
    pub candidate: usize,
    /// Rounds it took.
    pub rounds: u32,
    /// The margin it compared with, percent.
    pub margin_pct: f64,
    /// The candidate against the bound.
    pub judgement: Judgement,
    /// What it decided.
    pub decision: Decision,
}

/// How a bisection ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Outcome {
    /// The first bad version, with the step whose comparison showed it
    /// slow beside a good one.
    FirstBad {
        /// Its index.
        index: usize,
        /// The step whose judgement is its effect.
        evidence: usize,
    },
    /// No difference between good and bad.
    NoDifference,
    /// Good is slower than bad.
    WrongWayRound,
    /// A step could not decide in its rounds: step 0 (good and bad could
    /// not be told apart, nor shown the same) or a narrowing step (the
    /// first bad version lies after `good` and at or before `bad`).
    Undecided {
        /// The step that could not decide.
        #[serde(default)]
        step: usize,
        /// The good bound when it stopped.
        #[serde(default)]
        good: usize,
        /// The bad bound when it stopped.
        #[serde(default)]
        bad: usize,
    },
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Run a round: `candidate` beside `bound`.
    Measure {
        /// The step, from 0.
        step: usize,
        /// The round within it, from 0.
        round: u32,
        /// The version run as the bound.
        bound: usize,
        /// The version measured.
        candidate: usize,
    },
    /// Finished.
    Done,
}

/// The step in progress: its pair and the figures of its rounds so far.
#[derive(Debug, Clone)]
struct Current {
    bound: usize,
    candidate: usize,
    rounds: u32,
    units: Vec<Pair>,
}

/// The most steps a bisection of `n` versions takes: 1 + ⌈log₂(n − 1)⌉.
pub fn max_steps(n: usize) -> usize {
    let range = n.saturating_sub(1).max(1);
    1 + (usize::BITS - (range - 1).leading_zeros()) as usize
}

/// A bisection over `n` ordered versions.
#[derive(Debug, Clone)]
pub struct Search<J> {
    settings: Settings,
    judge: J,
    good: usize,
    bad: usize,
    steps: Vec<Step>,
    current: Option<Current>,
    outcome: Option<Outcome>,
}

impl<J: Judge> Search<J> {
    /// A bisection between version 0 (good) and `n − 1` (bad). `None`
    /// when there are fewer than two versions or no rounds.
    pub fn new(n: usize, settings: Settings, judge: J) -> Option<Search<J>> {
        if n < 2
            || settings.rounds == 0
            || settings.margin_pct.is_nan()
            || settings.margin_pct < 0.0
        {
            return None;
        }
        let mut s = Search {
            settings,
            judge,
            good: 0,
            bad: n - 1,
            steps: Vec::new(),
            current: None,
            outcome: None,
        };
        s.open(0, n - 1);
        Some(s)
    }

    fn open(&mut self, bound: usize, candidate: usize) {
        self.current = Some(Current {
            bound,
            candidate,
            rounds: 0,
            units: Vec::new(),
        });
    }

    /// The next thing to do.
    pub fn next(&self) -> Next {
        match &self.current {
            Some(c) if self.outcome.is_none() => Next::Measure {
                step: self.steps.len(),
                round: c.rounds,
                bound: c.bound,
                candidate: c.candidate,
            },
            _ => Next::Done,
        }
    }

    /// The units (block pairs, in time order) of the round
    /// [`Search::next`] asked for; every round of a step has as many.
    pub fn record(&mut self, units: Vec<Pair>) {
        let Some(mut c) = self.current.take() else {
            return;
        };
        c.rounds += 1;
        let max_units = units.len() * self.settings.rounds as usize;
        c.units.extend(units);
        let first = self.steps.is_empty();
        let margin_pct = if first {
            self.settings.margin_pct
        } else {
            // Slower than good by the margin asked, the slowdown step 0
            // showed bad has beyond it, or by half bad's slowdown when
            // that is nearer (a regression barely beyond the margin). Not
            // half bad's slowdown always: step 0 stops at the first round
            // its interval clears the margin, which favours rounds that
            // overstate the slowdown, and half of an overstated slowdown
            // sits near bad, where a bad candidate cannot be told from it.
            let half = self.steps[0].judgement.effect_pct.abs() / 2.0;
            half.min(self.settings.margin_pct)
        };
        let j = self
            .judge
            .judge(&c.units, self.settings.better, margin_pct, max_units);
        let spent = c.rounds >= self.settings.rounds;
        let decided = if first {
            match j.verdict {
                StepVerdict::Worse => Some(Decision::Regression),
                StepVerdict::Better => Some(Decision::WrongWayRound),
                StepVerdict::NoDifference => Some(Decision::NoDifference),
                StepVerdict::Undecided => None,
            }
        } else {
            // One question only: is the candidate slower than good by more
            // than the margin (as slow as bad) or not? The repeated
            // interval wholly on one side of −margin answers it, at the
            // rule's error rate whatever round it is read at; faster than
            // good, or within the margin, is not the slowdown looked for.
            match (j.verdict, j.ci_pct) {
                (StepVerdict::Worse, _) => Some(Decision::Bad),
                (StepVerdict::Better | StepVerdict::NoDifference, _) => Some(Decision::Good),
                (StepVerdict::Undecided, Some((_, hi))) if hi < -margin_pct => Some(Decision::Bad),
                (StepVerdict::Undecided, Some((lo, _))) if lo > -margin_pct => Some(Decision::Good),
                (StepVerdict::Undecided, _) => None,
            }
        };
        if decided.is_none() && !spent {
            self.current = Some(c);
            return;
        }
        let decision = decided.unwrap_or(Decision::Undecided);
        self.steps.push(Step {
            index: self.steps.len(),
            bound: c.bound,
            candidate: c.candidate,
            rounds: c.rounds,
            margin_pct,
            judgement: j,
            decision,
        });
        match decision {
            Decision::NoDifference => self.outcome = Some(Outcome::NoDifference),
            Decision::WrongWayRound => self.outcome = Some(Outcome::WrongWayRound),
            Decision::Undecided => {
                self.outcome = Some(Outcome::Undecided {
                    step: self.steps.len() - 1,
                    good: self.good,
                    bad: self.bad,
                })
            }
            Decision::Bad => self.bad = c.candidate,
            Decision::Good => self.good = c.candidate,
            Decision::Regression => {}
        }
        if self.outcome.is_none() {
            if self.bad - self.good == 1 {
                let evidence = self
                    .steps
                    .iter()
                    .rposition(|s| {
                        s.candidate == self.bad
                            && matches!(s.decision, Decision::Bad | Decision::Regression)
                    })
                    .unwrap_or(0);
                self.outcome = Some(Outcome::FirstBad {
                    index: self.bad,
                    evidence,
                });
            } else {
                self.open(self.good, self.good + (self.bad - self.good) / 2);
            }
        }
    }

    /// The finished steps.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// How it ended, once it has.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    /// The current bounds: (good, bad).
    pub fn bounds(&self) -> (usize, usize) {
        (self.good, self.bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::SequentialJudge;

    /// A version's figures: `value(i)` times a small deterministic wobble.
    fn figures(value: f64, salt: u64, n: usize, noise: f64) -> Vec<f64> {
        (0..n as u64)
            .map(|k| {
                let mut z = salt.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(k);
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z ^= z >> 31;
                let u = (z >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                value * (1.0 + noise * u)
            })
            .collect()
    }

    fn run(values: &[f64], settings: Settings, noise: f64) -> Search<SequentialJudge> {
        let mut s = Search::new(values.len(), settings, SequentialJudge).unwrap();
        let mut salt = 1;
        while let Next::Measure {
            bound, candidate, ..
        } = s.next()
        {
            let units = (0..4)
                .map(|_| {
                    salt += 2;
                    Pair {
                        bound: figures(values[bound], salt, 2, noise),
                        candidate: figures(values[candidate], salt + 1, 2, noise),
                    }
                })
                .collect();
            s.record(units);
        }
        s
    }

    const SETTINGS: Settings = Settings {
        better: Better::Higher,
        margin_pct: 2.0,
        rounds: 4,
    };

    #[test]
    fn a_step_is_found_at_every_position_within_the_step_bound() {
        for n in [2, 3, 5, 8, 32, 33] {
            for at in 1..n {
                let values: Vec<f64> = (0..n).map(|i| if i < at { 100.0 } else { 92.0 }).collect();
                let s = run(&values, SETTINGS, 0.02);
                assert_eq!(
                    s.outcome(),
                    Some(&Outcome::FirstBad {
                        index: at,
                        evidence: s.steps().iter().rposition(|st| st.candidate == at).unwrap()
                    }),
                    "n {n} at {at}: {:#?}",
                    s.steps()
                );
                assert!(
                    s.steps().len() <= max_steps(n),
                    "n {n} at {at}: {} steps",
                    s.steps().len()
                );
            }
        }
        assert_eq!(max_steps(32), 6);
        assert_eq!(max_steps(2), 1);
    }

    #[test]
    fn no_difference_and_the_wrong_way_round_stop_at_step_0() {
        let s = run(&[100.0; 16], SETTINGS, 0.01);
        assert_eq!(s.outcome(), Some(&Outcome::NoDifference));
        assert_eq!(s.steps().len(), 1);
        let faster: Vec<f64> = (0..16).map(|i| if i < 9 { 100.0 } else { 110.0 }).collect();
        let s = run(&faster, SETTINGS, 0.01);
        assert_eq!(s.outcome(), Some(&Outcome::WrongWayRound));
        // Lower is better: a latency that grew is the regression.
        let slower: Vec<f64> = (0..16).map(|i| if i < 9 { 100.0 } else { 110.0 }).collect();
        let s = run(
            &slower,
            Settings {
                better: Better::Lower,
                ..SETTINGS
            },
            0.01,
        );
        assert!(
            matches!(s.outcome(), Some(Outcome::FirstBad { index: 9, .. })),
            "{:?}",
            s.outcome()
        );
    }

    #[test]
    fn an_undecided_step_pools_rounds_then_stops_at_the_budget() {
        // Noise far beyond the margin: step 0 can never decide.
        let s = run(&[100.0, 100.0, 100.0], SETTINGS, 0.6);
        assert_eq!(s.steps()[0].rounds, SETTINGS.rounds, "{:?}", s.steps());
        assert_eq!(s.steps()[0].judgement.n, (32, 32));
        assert_eq!(
            s.outcome(),
            Some(&Outcome::Undecided {
                step: 0,
                good: 0,
                bad: 2
            })
        );
        let mde = s.steps()[0].judgement.mde_pct.expect("a detectable effect");
        assert!(mde > SETTINGS.margin_pct, "{mde}");
    }

    #[test]
    fn a_narrowing_step_still_undecided_stops_the_bisection_there() {
        // Good and bad far apart and quiet, so step 0 decides; the middle
        // version is a drawn mix, every other unit 4 % slower than good,
        // 2 % on average: the narrowing margin (the 2 % asked, nearer
        // than half bad's 20 %), so no number of rounds can call it as
        // slow as bad or not.
        let n = 9;
        let mut s = Search::new(n, SETTINGS, SequentialJudge).unwrap();
        let mut salt = 1;
        while let Next::Measure {
            bound, candidate, ..
        } = s.next()
        {
            let units = (0..4)
                .map(|u| {
                    salt += 2;
                    // The middle versions: every other unit 4 % slower.
                    let value = |v: usize| match v {
                        0 => 100.0,
                        v if v == n - 1 => 80.0,
                        _ if u % 2 == 0 => 96.0,
                        _ => 100.0,
                    };
                    Pair {
                        bound: figures(value(bound), salt + 1, 2, 0.01),
                        candidate: figures(value(candidate), salt, 2, 0.01),
                    }
                })
                .collect();
            s.record(units);
        }
        let steps = s.steps();
        assert_eq!(steps.len(), 2, "{steps:#?}");
        assert_eq!(steps[0].decision, Decision::Regression);
        assert_eq!(steps[1].decision, Decision::Undecided, "{steps:#?}");
        assert_eq!(steps[1].rounds, SETTINGS.rounds);
        assert_eq!(
            s.outcome(),
            Some(&Outcome::Undecided {
                step: 1,
                good: 0,
                bad: 8
            })
        );
        assert!(steps[1].judgement.mde_pct.is_some(), "{:?}", steps[1]);
    }

    #[test]
    fn replaying_the_same_figures_arrives_at_the_same_state() {
        let values: Vec<f64> = (0..20).map(|i| if i < 13 { 100.0 } else { 94.0 }).collect();
        let a = run(&values, SETTINGS, 0.03);
        let b = run(&values, SETTINGS, 0.03);
        assert_eq!(a.steps(), b.steps());
        assert!(Search::new(1, SETTINGS, SequentialJudge).is_none());
        assert!(Search::new(
            2,
            Settings {
                rounds: 0,
                ..SETTINGS
            },
            SequentialJudge
        )
        .is_none());
    }
}

#[cfg(test)]
mod simulation {
    use super::*;
    use crate::judge::SequentialJudge;

    /// SplitMix64: the trials' draws, fixed by their seed.
    struct Draws(u64);

    impl Draws {
        fn uniform(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }

        /// Box and Muller's normal draw.
        fn normal(&mut self) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    /// A bisection of `values` as the CLI runs one: rounds of 8
    /// repetitions a side in 4 ABBA blocks, each figure with normal noise
    /// of `noise` and a linear drift of `drift` per repetition slot.
    fn bisect(
        values: &[f64],
        settings: Settings,
        noise: f64,
        drift: f64,
        seed: u64,
    ) -> Search<SequentialJudge> {
        let mut s = Search::new(values.len(), settings, SequentialJudge).unwrap();
        let mut d = Draws(seed);
        let mut slot = 0.0;
        while let Next::Measure {
            bound, candidate, ..
        } = s.next()
        {
            let units = (0..4)
                .map(|block| {
                    let mut side = |v: f64| -> Vec<f64> {
                        (0..2)
                            .map(|_| {
                                slot += 1.0;
                                v * (1.0 + noise * d.normal()) * (1.0 + drift * slot)
                            })
                            .collect()
                    };
                    // ABBA: the bound first in even blocks.
                    if block % 2 == 0 {
                        let b = side(values[bound]);
                        let c = side(values[candidate]);
                        Pair {
                            bound: b,
                            candidate: c,
                        }
                    } else {
                        let c = side(values[candidate]);
                        let b = side(values[bound]);
                        Pair {
                            bound: b,
                            candidate: c,
                        }
                    }
                })
                .collect();
            s.record(units);
        }
        s
    }

    /// The simulation at the search's level, where trials are
    /// cheap: a 5 % step in 16 versions under 3 % normal noise and a
    /// drift, margin 2.5 %, 12 rounds a step (the CLI test's settings),
    /// 100 seeded trials at positions 1 to 15. Measured before the
    /// narrowing margin was capped at the margin asked: 362 of 400 right
    /// with 8 rounds (every miss undecided), 395 of 400 with 12; after:
    /// 386 and 399.
    #[test]
    fn a_planted_step_is_found_in_nearly_every_seeded_trial_and_a_a_stops_at_once() {
        let settings = Settings {
            better: Better::Higher,
            margin_pct: 2.5,
            rounds: 12,
        };
        let n = 16;
        let trials = 100;
        let mut missed = Vec::new();
        for t in 0..trials {
            let at = 1 + (t * 7) % (n - 1);
            let values: Vec<f64> = (0..n).map(|i| if i < at { 100.0 } else { 95.0 }).collect();
            let s = bisect(&values, settings, 0.03, 0.0005, t as u64 + 1);
            match s.outcome() {
                Some(Outcome::FirstBad { index, .. }) if *index == at => {
                    assert!(s.steps().len() <= max_steps(n), "{:#?}", s.steps())
                }
                other => missed.push(format!("trial {t}, step at {at}: {other:?}")),
            }
        }
        // 19 of 20 is 95 of 100.
        assert!(
            missed.len() <= 5,
            "{} of {trials} missed: {missed:#?}",
            missed.len()
        );
        for t in 0..50 {
            let s = bisect(&[100.0; 16], settings, 0.03, 0.0005, 10_000 + t);
            assert_eq!(
                s.outcome(),
                Some(&Outcome::NoDifference),
                "trial {t}: {:#?}",
                s.steps()
            );
            assert_eq!(s.steps().len(), 1);
        }
    }
}
