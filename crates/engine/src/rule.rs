//! The sequential rule the until-decided design runs under: benchlab's
//! statistics ([`benchlab_stats::SequentialRule`]), fed the units of
//! repetitions that ran close together — a round where configurations
//! alternate, a block pair where they run in blocks.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use benchlab_core::decision::Decided;
use benchlab_stats::{Outcome, Plan, SequentialRule, Unit, UnitKind};

use crate::decide::{Answer, Decider, Question};

/// What a plan is computed for: the margin's bits, the planned and the
/// current budget in units, and what a unit is.
type PlanKey = (u64, usize, usize, UnitKind);

/// The rule, with each (margin, budget, unit) plan's critical values
/// computed once per run rather than at every look.
#[derive(Default)]
pub struct Sequential {
    plans: RefCell<HashMap<PlanKey, Option<Plan>>>,
}

impl Sequential {
    fn plan<T>(
        &self,
        margin_pct: f64,
        planned: usize,
        max: usize,
        unit: UnitKind,
        f: impl FnOnce(&Plan) -> T,
    ) -> Option<T> {
        let mut plans = self.plans.borrow_mut();
        let plan = plans
            .entry((margin_pct.to_bits(), planned, max, unit))
            .or_insert_with(|| {
                // Planned for the study's budget; a larger one (a run
                // continued past it) extends that plan, so the looks
                // already taken keep their meaning.
                SequentialRule::new(margin_pct, planned, unit)
                    .ok()
                    .map(|r| r.extended(max).plan())
            });
        plan.as_ref().map(f)
    }
}

/// The units of a comparison: the repetitions of each block (a round, or
/// one block of a pair) that both sides ran, in time order, each side's
/// mean in it.
fn units(q: &Question<'_>) -> Vec<Unit> {
    let mut by_block: BTreeMap<u32, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for (v, b) in q.sides.a.iter().zip(q.sides.a_blocks) {
        by_block.entry(*b).or_default().0.push(*v);
    }
    for (v, b) in q.sides.b.iter().zip(q.sides.b_blocks) {
        by_block.entry(*b).or_default().1.push(*v);
    }
    by_block
        .values()
        .filter_map(|(a, b)| Unit::from_repetitions(a, b))
        .collect()
}

impl Decider for Sequential {
    fn decide(&self, q: &Question<'_>) -> Answer {
        let units = units(q);
        let unit = if q.blocked {
            UnitKind::BlockPair
        } else {
            UnitKind::Round
        };
        let better = q.better;
        let planned = q.planned_repetitions as usize;
        let max = (q.max_repetitions as usize).max(units.len());
        let d = self
            .plan(q.margin_pct, planned, max, unit, |p| {
                p.decide(&units, better)
            })
            .flatten();
        let Some(d) = d else {
            return Answer {
                verdict: Decided::Undecided,
                advantage_pct: None,
                ci_pct: None,
                mde_pct: None,
            };
        };
        let verdict = match d.outcome {
            Outcome::Better => Decided::Better,
            Outcome::Worse => Decided::Worse,
            Outcome::Equivalent => Decided::Equivalent,
            Outcome::Undecided | Outcome::Continue => Decided::Undecided,
        };
        // The interval that decided: the 1 − 2α one for equivalence.
        let ci = if verdict == Decided::Equivalent {
            d.equivalence_ci_pct
        } else {
            d.ci_pct
        };
        Answer {
            verdict,
            advantage_pct: Some(d.advantage_pct),
            ci_pct: ci.map(|i| (i.lo, i.hi)),
            mde_pct: d.mde_pct,
        }
    }
}
