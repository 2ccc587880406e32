//! A stored bisection as a reader sees it (`benchlab serve`): what it was
//! asked, every finished step with its evidence, the round in progress,
//! how it ended and where it stands. The steps are replayed from the
//! stored rounds' runs through the same [`Search`] and verdict rule that
//! ran them (the store keeps the runs, not the judgements), so a page
//! shows what `benchlab bisect` printed; nothing is run or written.

use anyhow::{Context, Result};
use benchlab_store::{BisectionRow, BisectionRunRow, BisectionStatus, RunStatus, Store};

use crate::judge::SequentialJudge;
use crate::runner::{planned_round, round_run, same_round, units, Request, StepEvidence};
use crate::search::{Outcome, Search};

/// Where a bisection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// It reached an outcome.
    Finished,
    /// Its controller is measuring a round (or runs on another machine,
    /// whose processes cannot be seen from here).
    Running,
    /// Stopped before an outcome in the middle of a round (Ctrl-C, a
    /// killed controller, an error): `benchlab bisect --resume ID` goes
    /// on.
    Interrupted,
    /// Not finished, and no round's run is being measured: stopped
    /// between two rounds, or its controller is building the next
    /// round's versions (the store cannot tell these apart).
    Between,
}

impl State {
    /// The state in one word.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Finished => "finished",
            State::Running => "running",
            State::Interrupted => "interrupted",
            State::Between => "between rounds",
        }
    }
}

/// A round whose run has not completed: linked to the bisection, or
/// found by its description (a round is linked when its run ends).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenRound {
    /// The round.
    pub round: BisectionRunRow,
    /// Its run's status.
    pub run_status: RunStatus,
}

/// A stored bisection, replayed.
#[derive(Debug, Clone)]
pub struct Stored {
    /// Its row: id, status, start and end.
    pub row: BisectionRow,
    /// What was asked.
    pub request: Request,
    /// The finished steps with their rounds' runs.
    pub steps: Vec<StepEvidence>,
    /// Every round linked to it, in order.
    pub rounds: Vec<BisectionRunRow>,
    /// The round whose run has not completed, if any.
    pub open: Option<OpenRound>,
    /// How it ended, once it has.
    pub outcome: Option<Outcome>,
    /// Where it stands.
    pub state: State,
}

/// Bisection `id` replayed from the store; `None` when there is none.
pub fn stored(store: &Store, id: i64) -> Result<Option<Stored>> {
    let Some(row) = store.bisection(id)? else {
        return Ok(None);
    };
    let request: Request = serde_json::from_value(row.spec.clone())
        .with_context(|| format!("bisection {id}: its stored request"))?;
    let rounds = store.bisection_runs(id)?;
    let mut search = Search::new(request.versions.len(), request.settings, SequentialJudge)
        .with_context(|| format!("bisection {id}: fewer than two versions, or no rounds"))?;
    let mut steps = Vec::new();
    let mut runs = Vec::new();
    let mut open = None;
    for r in &rounds {
        let Some(planned) = planned_round(id, r.seq as usize, &search.next()) else {
            break;
        };
        same_round(&planned, r)?;
        let run = store.run(r.run_id)?;
        if run.status != RunStatus::Completed {
            open = Some((*r, run));
            break;
        }
        search.record(units(store, r.run_id, &request)?);
        runs.push(r.run_id);
        let step = planned.step as usize;
        if search.steps().len() > step {
            steps.push(StepEvidence {
                step: search.steps()[step].clone(),
                runs: std::mem::take(&mut runs),
            });
        }
    }
    // The round being measured is linked only when its run ends: until
    // then it is the run of its description (as a resumed bisection
    // finds it).
    if open.is_none() {
        if let Some(mut planned) = planned_round(id, rounds.len(), &search.next()) {
            if let Some(run) = round_run(store, &planned)? {
                planned.run_id = run.id;
                open = Some((planned, run));
            }
        }
    }
    let outcome = match (search.outcome(), &row.result) {
        (Some(o), _) => Some(o.clone()),
        (None, Some(v)) => Some(
            serde_json::from_value(v.clone())
                .with_context(|| format!("bisection {id}: its stored result"))?,
        ),
        (None, None) => None,
    };
    let state = match &open {
        _ if row.status == BisectionStatus::Finished => State::Finished,
        None => State::Between,
        Some((_, run)) if run.status == RunStatus::Running => {
            match benchlab_engine::controller_alive(run) {
                Some(false) => State::Interrupted,
                // Another machine's controller cannot be seen from here.
                Some(true) | None => State::Running,
            }
        }
        Some(_) => State::Interrupted,
    };
    let open = open.map(|(round, run)| OpenRound {
        round,
        run_status: run.status,
    });
    Ok(Some(Stored {
        row,
        request,
        steps,
        rounds,
        open,
        outcome,
        state,
    }))
}
