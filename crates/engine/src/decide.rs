//! The until-decided design: rounds in the study's order until every
//! comparison of every point is decided or the budget is spent. After
//! each round the sequential rule looks at every comparison of the points
//! that ran; a point whose comparisons are all decided runs no more, so
//! the rounds that remain go to the undecided ones.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use benchlab_core::decision::{ComparisonDecision, Decided, DesignSummary, StopReason};
use benchlab_core::plan::{Plan, RunOptions, Unit};
use benchlab_core::study::Study;
use benchlab_core::units::format_duration;
use benchlab_core::{Better, Registry};
use benchlab_store::{PointRow, SampleStatus, Store};

use crate::engine::Engine;
use crate::observer::{PlannedUnit, RoundStart, RunStart};

/// The two sides of one comparison: the compared configuration (`a`)
/// and the first (`b`), with the block each repetition ran in.
#[derive(Debug, Clone, Copy)]
pub struct Sides<'a> {
    /// The compared configuration's values.
    pub a: &'a [f64],
    /// Their blocks.
    pub a_blocks: &'a [u32],
    /// The first configuration's values.
    pub b: &'a [f64],
    /// Their blocks.
    pub b_blocks: &'a [u32],
}

/// One comparison put to the sequential rule after a round.
#[derive(Debug, Clone, Copy)]
pub struct Question<'a> {
    /// The data so far.
    pub sides: Sides<'a>,
    /// Which direction is better.
    pub better: Better,
    /// The smallest difference that matters, in percent.
    pub margin_pct: f64,
    /// The study's cap on repetitions per side, which the rule's error
    /// rate is planned for.
    pub planned_repetitions: u32,
    /// The cap now: larger than the planned one when a run is continued
    /// past it (`--until-decided --max-repetitions`).
    pub max_repetitions: u32,
    /// Whether the configurations ran in blocks (ABBA) rather than
    /// alternating at every repetition.
    pub blocked: bool,
}

/// What the rule says of one comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    /// The verdict so far.
    pub verdict: Decided,
    /// The compared configuration's advantage, in percent.
    pub advantage_pct: Option<f64>,
    /// The rule's interval of the advantage, in percent.
    pub ci_pct: Option<(f64, f64)>,
    /// For an undecided comparison, the smallest difference the data so
    /// far would detect at 80 % power, in percent.
    pub mde_pct: Option<f64>,
}

/// A sequential rule: what may be said of a comparison after any round,
/// with an error rate that holds although it is asked after every one.
pub trait Decider {
    /// The verdict on `q`'s data so far.
    fn decide(&self, q: &Question<'_>) -> Answer;
}

/// One point's repetitions under one configuration, as stored.
#[derive(Debug, Default, Clone)]
struct Reps {
    /// (repetition, metrics) of the successful ones.
    ok: Vec<(u32, BTreeMap<String, f64>)>,
    /// Every repetition run, failed and skipped ones included.
    attempts: u32,
    /// The next repetition's number.
    next: u32,
}

/// Every stored repetition of a run, by (configuration, workload, point).
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    reps: BTreeMap<(usize, usize, usize), Reps>,
    points: Vec<PointRow>,
}

impl Ledger {
    pub(crate) fn load(store: &Store, run_id: i64) -> Result<Ledger> {
        let points = store.points(run_id)?;
        let mut reps: BTreeMap<(usize, usize, usize), Reps> = BTreeMap::new();
        let by_id: BTreeMap<i64, &PointRow> = points.iter().map(|p| (p.id, p)).collect();
        for s in store.samples(run_id)? {
            let Some(p) = by_id.get(&s.point_id) else {
                continue;
            };
            let r = reps
                .entry((p.config_idx, p.workload_idx, p.point_idx))
                .or_default();
            r.attempts += 1;
            r.next = r.next.max(s.repetition + 1);
            if s.status == SampleStatus::Ok {
                r.ok.push((s.repetition, s.metrics));
            }
        }
        Ok(Ledger { reps, points })
    }

    fn get(&self, c: usize, w: usize, p: usize) -> Option<&Reps> {
        self.reps.get(&(c, w, p))
    }

    /// The next repetition number of plan point `i`.
    fn next(&self, plan: &Plan, i: usize) -> u32 {
        let p = &plan.points[i];
        self.get(p.config, p.workload, p.point)
            .map(|r| r.next)
            .unwrap_or(0)
    }

    /// Repetitions run of a row under its configuration with the fewest.
    fn fewest_attempts(&self, n_cfg: usize, (w, p): (usize, usize)) -> u32 {
        (0..n_cfg)
            .map(|c| self.get(c, w, p).map(|r| r.attempts).unwrap_or(0))
            .min()
            .unwrap_or(0)
    }
}

/// The rows of the design: every (workload, point) of the plan, in plan
/// order.
fn rows(plan: &Plan) -> Vec<(usize, usize)> {
    let mut rows: Vec<(usize, usize)> = Vec::new();
    for p in &plan.points {
        if !rows.contains(&(p.workload, p.point)) {
            rows.push((p.workload, p.point));
        }
    }
    rows
}

/// The block repetition `rep` ran in: its own under the until-decided
/// design (each round is a block per configuration), the order's share
/// otherwise.
fn block_of(study: &Study, rep: u32, planned: u32) -> u32 {
    study.block_of(rep, planned)
}

/// Every comparison of row `(w, p)`: each metric of its table under each
/// configuration against the first, put to `rule`.
pub(crate) fn decide_row(
    study: &Study,
    reg: &Registry,
    ledger: &Ledger,
    rule: &dyn Decider,
    (w, p): (usize, usize),
) -> Vec<ComparisonDecision> {
    let entry = &study.workloads[w];
    let Some(wl) = reg.get(&entry.kind) else {
        return Vec::new();
    };
    let Some(first) = ledger
        .points
        .iter()
        .find(|x| x.config_idx == 0 && x.workload_idx == w && x.point_idx == p)
    else {
        return Vec::new();
    };
    let empty = Reps::default();
    let side = |c: usize, metric: &str| -> (Vec<f64>, Vec<u32>) {
        let r = ledger.get(c, w, p).unwrap_or(&empty);
        r.ok.iter()
            .filter_map(|(rep, m)| {
                let v = *m.get(metric)?;
                v.is_finite()
                    .then(|| (v, block_of(study, *rep, entry.repetitions)))
            })
            .unzip()
    };
    let mut out = Vec::new();
    for spec in wl.table_metrics(&first.params) {
        let (b, b_blocks) = side(0, spec.name);
        let margin_pct = study.margin_pct(w, spec.name);
        for c in 1..study.configurations.len() {
            let (a, a_blocks) = side(c, spec.name);
            let q = Question {
                sides: Sides {
                    a: &a,
                    a_blocks: &a_blocks,
                    b: &b,
                    b_blocks: &b_blocks,
                },
                better: spec.better,
                margin_pct,
                planned_repetitions: study.design.max_repetitions,
                max_repetitions: study.design.cap(),
                blocked: !study.order.alternates(),
            };
            let ans = rule.decide(&q);
            out.push(ComparisonDecision {
                config: c,
                workload: w,
                point: p,
                metric: spec.name.to_string(),
                verdict: ans.verdict,
                repetitions: a.len().min(b.len()) as u32,
                margin_pct,
                advantage_pct: ans.advantage_pct,
                ci_lo_pct: ans.ci_pct.map(|c| c.0),
                ci_hi_pct: ans.ci_pct.map(|c| c.1),
                mde_pct: ans.mde_pct.filter(|_| !ans.verdict.is_decided()),
            });
        }
    }
    out
}

/// The rows another round would run: those with an undecided comparison
/// below `max_repetitions`. A row with no comparison (one configuration)
/// runs its fixed count: there is nothing to decide.
fn open_rows(
    study: &Study,
    opts: RunOptions,
    ledger: &Ledger,
    decisions: &BTreeMap<(usize, usize), Vec<ComparisonDecision>>,
) -> Vec<(usize, usize)> {
    let n_cfg = study.configurations.len();
    decisions
        .iter()
        .filter(|&(&r, ds)| {
            let done = ledger.fewest_attempts(n_cfg, r);
            if ds.is_empty() {
                let fixed = if opts.quick {
                    1
                } else {
                    study.workloads[r.0].repetitions
                };
                done < fixed
            } else {
                done < study.design.cap() && ds.iter().any(|d| !d.verdict.is_decided())
            }
        })
        .map(|(&r, _)| r)
        .collect()
}

/// Every row's comparisons: those the store holds as decided stay as
/// they were decided (a comparison stops at its verdict, even while other
/// comparisons of its point go on), the others as the rule sees the
/// stored data.
fn decide_all(
    study: &Study,
    reg: &Registry,
    ledger: &Ledger,
    rule: &dyn Decider,
    rows: &[(usize, usize)],
    stored: &[ComparisonDecision],
) -> BTreeMap<(usize, usize), Vec<ComparisonDecision>> {
    rows.iter()
        .map(|&r| {
            let now = decide_row(study, reg, ledger, rule, r);
            let kept = now
                .into_iter()
                .map(|d| {
                    stored
                        .iter()
                        .find(|o| same_comparison(o, &d) && o.verdict.is_decided())
                        .cloned()
                        .unwrap_or(d)
                })
                .collect();
            (r, kept)
        })
        .collect()
}

fn same_comparison(a: &ComparisonDecision, b: &ComparisonDecision) -> bool {
    (a.config, a.workload, a.point, &a.metric) == (b.config, b.workload, b.point, &b.metric)
}

/// Refuses `--until-decided` on a run that another round would not
/// change: every comparison decided, or every undecided one at the cap.
pub(crate) fn refuse_if_decided(
    store: &Store,
    reg: &Registry,
    study: &Study,
    run_id: i64,
    rule: &dyn Decider,
    opts: RunOptions,
) -> Result<()> {
    let plan = Plan::new(study, reg, opts);
    let ledger = Ledger::load(store, run_id)?;
    let stored = store.decisions(run_id)?;
    let decisions = decide_all(study, reg, &ledger, rule, &rows(&plan), &stored);
    if !open_rows(study, opts, &ledger, &decisions).is_empty() {
        return Ok(());
    }
    let all: Vec<&ComparisonDecision> = decisions.values().flatten().collect();
    let undecided = all.iter().filter(|d| !d.verdict.is_decided()).count();
    if undecided == 0 {
        bail!(
            "run {run_id} has no undecided point: all {} comparison(s) are decided, so there is nothing to add",
            all.len()
        );
    }
    bail!(
        "run {run_id}'s {undecided} undecided comparison(s) have reached their cap of {} repetitions per side: give --max-repetitions with a larger cap (the rule's error rate stays planned for max_repetitions = {})",
        study.design.cap(),
        study.design.max_repetitions
    )
}

/// What the until-decided loop ended with.
pub(crate) struct Ended {
    pub(crate) failed: usize,
    pub(crate) stopped: bool,
}

impl Engine<'_> {
    /// The until-decided design: rounds until every comparison is
    /// decided, `max_repetitions` or `max_duration` is reached, or the run
    /// is stopped. Each round's verdicts are stored as it ends, so that
    /// an interrupted run reports what it had decided.
    pub(crate) fn until_decided(&mut self, rule: &dyn Decider) -> Result<Ended> {
        let study = self.ctx.study;
        let mut plan = Plan::new(study, self.reg, self.opts);
        let max = study.design.cap();
        for p in &mut plan.points {
            p.repetitions = max;
        }
        let fixed = Plan::new(study, self.reg, self.opts);
        let n_cfg = study.configurations.len();
        let all_rows = rows(&plan);
        let started = Instant::now();
        let budget = study.design.max_duration_s.map(Duration::from_secs_f64);
        let (mut failed, mut stopped) = (0, false);
        let mut ledger = Ledger::load(self.ctx.store, self.ctx.run_id)?;
        let before = ledger.reps.values().map(|r| r.attempts).sum::<u32>();
        let mut round = all_rows
            .iter()
            .map(|&r| ledger.fewest_attempts(n_cfg, r))
            .max()
            .unwrap_or(0);
        let mut rounds_run = 0u32;
        let stored = self.ctx.store.decisions(self.ctx.run_id)?;
        let mut decisions = decide_all(study, self.reg, &ledger, rule, &all_rows, &stored);
        let stop = loop {
            if self.ctx.interrupt.load(Ordering::Relaxed) || stopped {
                break StopReason::Stopped;
            }
            let open = open_rows(study, self.opts, &ledger, &decisions);
            if open.is_empty() {
                let undecided = decisions
                    .values()
                    .flatten()
                    .any(|d| !d.verdict.is_decided());
                break if undecided {
                    StopReason::MaxRepetitions
                } else {
                    StopReason::AllDecided
                };
            }
            let units = plan.round_units(study, round, &open, |i| ledger.next(&plan, i));
            let expected = Duration::from_secs_f64(plan.expected_s(&units));
            if let Some(b) = budget {
                // The first round of a session always runs: the study's
                // budget holds one (checked when the file was read).
                if rounds_run > 0 && started.elapsed() + expected > b {
                    break StopReason::MaxDuration;
                }
            }
            self.observer.round(&RoundStart {
                round,
                points: open.len(),
                rows: all_rows.len(),
                expected_s: expected.as_secs_f64(),
            });
            let (f, s) = self.run_round(&plan, &units)?;
            failed += f;
            stopped = s;
            rounds_run += 1;
            round += 1;
            ledger = Ledger::load(self.ctx.store, self.ctx.run_id)?;
            let mut changed = Vec::new();
            for &r in &open {
                let before = &decisions[&r];
                let now: Vec<ComparisonDecision> = decide_row(study, self.reg, &ledger, rule, r)
                    .into_iter()
                    .map(|d| match before.iter().find(|o| same_comparison(o, &d)) {
                        // Decided in an earlier round: it stopped there.
                        Some(o) if o.verdict.is_decided() => o.clone(),
                        _ => {
                            if d.verdict.is_decided() {
                                self.announce(&d);
                            }
                            d
                        }
                    })
                    .collect();
                changed.extend(now.iter().cloned());
                decisions.insert(r, now);
            }
            self.ctx.store.set_decisions(self.ctx.run_id, &changed)?;
        };
        let ran = ledger.reps.values().map(|r| r.attempts).sum::<u32>();
        let all: Vec<&ComparisonDecision> = decisions.values().flatten().collect();
        let summary = DesignSummary {
            comparisons: all.len() as u32,
            decided: all.iter().filter(|d| d.verdict.is_decided()).count() as u32,
            rounds: round,
            repetitions: ran,
            elapsed_s: started.elapsed().as_secs_f64()
                + self
                    .ctx
                    .store
                    .design_summary(self.ctx.run_id)?
                    .filter(|_| before > 0)
                    .map(|s| s.elapsed_s)
                    .unwrap_or(0.0),
            fixed_repetitions: fixed.units.len() as u32,
            fixed_s: fixed.expected_s(&fixed.units),
            stop,
        };
        // Stored whatever was decided, including before this session (a
        // fixed run continued with --until-decided stores its verdicts
        // here for the first time).
        let every: Vec<ComparisonDecision> = all.into_iter().cloned().collect();
        self.ctx.store.set_decisions(self.ctx.run_id, &every)?;
        self.ctx
            .store
            .set_design_summary(self.ctx.run_id, &summary)?;
        self.ctx.event(
            "decided",
            &format!(
                "{} of {} comparison(s) decided in {} round(s), {} repetition(s), {} ({}); the fixed design: {} repetition(s), about {}",
                summary.decided,
                summary.comparisons,
                summary.rounds,
                summary.repetitions,
                format_duration(summary.elapsed_s),
                stop.text(),
                summary.fixed_repetitions,
                format_duration(summary.fixed_s)
            ),
        );
        Ok(Ended { failed, stopped })
    }

    /// Runs one round's units with the quiesce after each; returns the
    /// failed repetitions and whether the study said stop.
    fn run_round(&mut self, plan: &Plan, units: &[Unit]) -> Result<(usize, bool)> {
        let done = self.ctx.store.done_units(self.ctx.run_id)?.len();
        self.observer.start(&RunStart {
            units: units
                .iter()
                .map(|u| PlannedUnit {
                    workload: plan.points[u.point].workload,
                    expected_s: plan.points[u.point].expected_s,
                })
                .collect(),
            already: done,
        });
        let mut adaptive = crate::runner::AdaptiveState::default();
        let mut failed = 0;
        for (n, unit) in units.iter().enumerate() {
            if self.ctx.interrupt.load(Ordering::Relaxed) {
                break;
            }
            match self.repetition(plan, n, unit, &mut adaptive)? {
                crate::runner::Step::Skipped => continue,
                crate::runner::Step::Next => {}
                crate::runner::Step::Failed => failed += 1,
                crate::runner::Step::Stop => return Ok((failed + 1, true)),
                crate::runner::Step::Interrupted => break,
            }
            let q = plan.points[unit.point].quiesce_s;
            if q > 0.0 {
                crate::runner::sleep_interruptibly(Duration::from_secs_f64(q), self.ctx.interrupt);
            }
        }
        Ok((failed, false))
    }

    /// An event for a comparison the round decided.
    fn announce(&self, d: &ComparisonDecision) {
        let study = self.ctx.study;
        let point = self
            .ctx
            .study
            .workloads
            .get(d.workload)
            .map(|w| w.name.as_str())
            .unwrap_or("?");
        let ci = match (d.ci_lo_pct, d.ci_hi_pct) {
            (Some(lo), Some(hi)) => format!(" [{lo:+.2}%, {hi:+.2}%]"),
            _ => String::new(),
        };
        self.ctx.event(
            "decision",
            &format!(
                "{} vs {} · {point} · point {} · {}: {} after {} repetition(s){} (margin ±{}%)",
                study.configurations[d.config].name,
                study.configurations[0].name,
                d.point,
                d.metric,
                d.verdict.as_str(),
                d.repetitions,
                ci,
                d.margin_pct
            ),
        );
    }
}
