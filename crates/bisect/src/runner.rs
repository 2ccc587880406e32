//! A bisection run for real: each round of each step a stored run of the
//! study with two configurations, the bound and the candidate, in ABBA
//! blocks; the figures read back from the store and handed to the
//! [`Search`]. An interrupted bisection replays its stored rounds into a
//! new search, resumes a round left unfinished, and goes on from there.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context, Result};
use benchlab_core::plan::RunOptions;
use benchlab_core::study::{Order, Study};
use benchlab_core::units::now_rfc3339;
use benchlab_core::Registry;
use benchlab_engine::Observer;
use benchlab_store::{BisectionRunRow, BisectionStatus, RunStatus, SampleStatus, Store};
use serde::{Deserialize, Serialize};

use crate::judge::{Pair, SequentialJudge};
use crate::search::{Next, Outcome, Search, Settings, Step};
use crate::versions::{GitSource, Version};

/// Everything a bisection was asked, as stored: a resumed bisection reads
/// this, never the study file again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The study file as given.
    pub study_file: String,
    /// Its text when the bisection started.
    pub study_text: String,
    /// Its `[study] name`.
    pub study_name: String,
    /// The workload measured.
    pub workload: String,
    /// Its parameter that takes each version's value.
    pub param: String,
    /// The metric compared.
    pub metric: String,
    /// The versions, good first, bad last.
    pub versions: Vec<Version>,
    /// How steps decide.
    pub settings: Settings,
    /// Repetitions of each configuration in one round.
    pub repetitions: u32,
    /// ABBA blocks of each configuration in one round.
    pub blocks: u32,
    /// Git versions: the repository and the build.
    pub git: Option<GitSource>,
    /// The parameter takes text: values are TOML strings, not literals.
    pub quote_values: bool,
    /// The key is `host.NAME.kernel`: each version is the kernel of the
    /// guest host NAME, which each side of a step boots as a copy of its
    /// own (`NAME-bound`, `NAME-candidate`); `param` is then `kernel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// The configurations' names in a step's run.
pub const BOUND: &str = "bound";
/// See [`BOUND`].
pub const CANDIDATE: &str = "candidate";

impl Request {
    /// Version `i` as every reader names it: ``#3 `label` ``.
    pub fn version_name(&self, i: usize) -> String {
        match self.versions.get(i) {
            Some(v) => format!("#{i} `{}`", v.label),
            None => format!("#{i}"),
        }
    }

    /// The study of one round: the study file with the bound and the
    /// candidate as its two configurations, in ABBA blocks.
    pub fn step_study(&self, reg: &Registry, bound: usize, candidate: usize) -> Result<Study> {
        let value = |v: &Version| -> String {
            if self.quote_values {
                toml::Value::String(v.value.clone()).to_string()
            } else {
                v.value.clone()
            }
        };
        let config = |name: &str, v: &Version| {
            format!(
                "\n[[configuration]]\nname = \"{name}\"\ndescription = {}\nset = {{ {} = {} }}\n",
                toml::Value::String(v.label.clone()),
                self.param,
                value(v)
            )
        };
        let mut text = self.study_text.clone();
        text.push_str(
            "\n# Added by benchlab bisect: the version run as the bound, and the candidate.\n",
        );
        match &self.host {
            None => {
                text.push_str(&config(BOUND, &self.versions[bound]));
                text.push_str(&config(CANDIDATE, &self.versions[candidate]));
            }
            Some(host) => {
                for (side, v) in [(BOUND, bound), (CANDIDATE, candidate)] {
                    text.push_str(&self.guest_copy(host, side, &self.versions[v])?);
                }
            }
        }
        let mut study = Study::parse(&self.study_file, &text, reg)?;
        study.order = Order::Blocks {
            blocks: self.blocks,
        };
        study.order_why =
            "benchlab bisect: the bound and the candidate in ABBA blocks, so that drift cancels"
                .into();
        for w in &mut study.workloads {
            w.repetitions = self.repetitions;
            w.adaptive = None;
        }
        Ok(study)
    }

    /// The study's guest host `host` as a `[[host]]` of its own for one
    /// side of a step, booting the version's kernel, with the side's
    /// configuration that puts it in the host's place. Both copies keep
    /// the guest's address (and so its MAC): they never run at once, and
    /// the hosts that talk to it see one machine rebooted.
    fn guest_copy(&self, host: &str, side: &str, v: &Version) -> Result<String> {
        let doc: toml::Table = toml::from_str(&self.study_text)
            .with_context(|| format!("{}: not valid TOML", self.study_file))?;
        let mut copy = doc
            .get("host")
            .and_then(toml::Value::as_array)
            .and_then(|hs| {
                hs.iter()
                    .filter_map(toml::Value::as_table)
                    .find(|h| h.get("name").and_then(toml::Value::as_str) == Some(host))
            })
            .cloned()
            .with_context(|| format!("{}: no [[host]] named `{host}`", self.study_file))?;
        let name = format!("{host}-{side}");
        copy.insert("name".into(), toml::Value::String(name.clone()));
        copy.get_mut("guest")
            .and_then(toml::Value::as_table_mut)
            .with_context(|| format!("{}: host `{host}` has no guest table", self.study_file))?
            .insert("kernel".into(), toml::Value::String(v.value.clone()));
        let mut wrap = toml::Table::new();
        wrap.insert("host".into(), toml::Value::Array(vec![copy.into()]));
        Ok(format!(
            "\n{}\n[[configuration]]\nname = \"{side}\"\ndescription = {}\nhosts = {{ {} = {} }}\n",
            toml::to_string(&wrap)?,
            toml::Value::String(v.label.clone()),
            toml::Value::String(host.to_string()),
            toml::Value::String(name),
        ))
    }

    /// A round's run description: how a round left unlinked by a killed
    /// controller is found again.
    pub fn round_description(id: i64, seq: usize) -> String {
        format!("benchlab bisect {id}, round {seq}")
    }
}

/// One finished step with the runs of its rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepEvidence {
    /// The step.
    pub step: Step,
    /// Its rounds' runs.
    pub runs: Vec<i64>,
}

/// How a bisection ended, as stored and printed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finished {
    /// The bisection's id.
    pub id: i64,
    /// What was asked.
    pub request: Request,
    /// Every step's evidence.
    pub steps: Vec<StepEvidence>,
    /// The outcome.
    pub outcome: Outcome,
}

/// The bisection stopped at a signal; `benchlab bisect --resume ID` goes on.
#[derive(Debug)]
pub struct Interrupted {
    /// The bisection.
    pub id: i64,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "bisection {} was interrupted: `benchlab bisect --resume {}` goes on without repeating a finished round",
            self.id, self.id
        )
    }
}

impl std::error::Error for Interrupted {}

/// What a bisection needs from its caller.
pub struct Bisector<'a> {
    /// The result store.
    pub store: &'a mut Store,
    /// The workloads this benchlab knows.
    pub registry: &'a Registry,
    /// Set to stop cleanly (Ctrl-C, SIGTERM).
    pub interrupt: &'a AtomicBool,
    /// Told of each round's repetitions.
    pub observer: &'a mut dyn Observer,
    /// Told of each step as it finishes.
    pub on_step: &'a mut dyn FnMut(&Request, &StepEvidence),
}

impl Bisector<'_> {
    /// Stores a new bisection and runs it.
    pub fn start(self, request: Request) -> Result<Finished> {
        let spec = serde_json::to_value(&request)?;
        let id = self
            .store
            .create_bisection(&request.study_name, &spec, &now_rfc3339())?;
        self.drive(id, request)
    }

    /// Goes on with a stored bisection.
    pub fn resume(self, id: i64) -> Result<Finished> {
        let row = self
            .store
            .bisection(id)?
            .with_context(|| format!("no bisection {id} in the store"))?;
        if row.status == BisectionStatus::Finished {
            bail!("bisection {id} is finished: nothing to resume");
        }
        let request: Request = serde_json::from_value(row.spec)
            .with_context(|| format!("bisection {id}: its stored request"))?;
        self.drive(id, request)
    }

    fn drive(mut self, id: i64, request: Request) -> Result<Finished> {
        let mut search = Search::new(request.versions.len(), request.settings, SequentialJudge)
            .context("a bisection needs two versions and at least one round")?;
        let linked = self.store.bisection_runs(id)?;
        let mut runs: Vec<i64> = Vec::new();
        let mut evidence = Vec::new();
        let mut seq = 0usize;
        while let Some(row) = planned_round(id, seq, &search.next()) {
            let step = row.step as usize;
            let run_id = self.round(&request, row, linked.get(seq).copied())?;
            search.record(units(self.store, run_id, &request)?);
            runs.push(run_id);
            if search.steps().len() > step {
                let e = StepEvidence {
                    step: search.steps()[step].clone(),
                    runs: std::mem::take(&mut runs),
                };
                (self.on_step)(&request, &e);
                evidence.push(e);
            }
            seq += 1;
        }
        let outcome = search
            .outcome()
            .cloned()
            .context("the search stopped without an outcome")?;
        let finished = Finished {
            id,
            request,
            steps: evidence,
            outcome,
        };
        self.store.finish_bisection(
            id,
            &now_rfc3339(),
            &serde_json::to_value(&finished.outcome)?,
        )?;
        Ok(finished)
    }

    /// One round's run: the stored one when it finished, resumed when it
    /// did not, a new one otherwise.
    fn round(
        &mut self,
        request: &Request,
        mut row: BisectionRunRow,
        stored: Option<BisectionRunRow>,
    ) -> Result<i64> {
        if let Some(s) = &stored {
            same_round(&row, s)?;
        }
        let existing = match stored {
            Some(s) => Some(s.run_id),
            None => round_run(self.store, &row)?.map(|r| r.id),
        };
        if self.interrupt.load(Ordering::SeqCst) {
            return Err(Interrupted {
                id: row.bisection_id,
            }
            .into());
        }
        if let Some(run_id) = existing {
            row.run_id = run_id;
            self.store.link_bisection_run(&row)?;
            if self.store.run(run_id)?.status != RunStatus::Completed {
                let out = benchlab_engine::Run {
                    store: self.store,
                    registry: self.registry,
                    interrupt: self.interrupt,
                    observer: self.observer,
                    restore_first: false,
                    rule: &benchlab_engine::Sequential::default(),
                }
                .resume(run_id)?;
                if out.interrupted {
                    return Err(Interrupted {
                        id: row.bisection_id,
                    }
                    .into());
                }
            }
            return Ok(run_id);
        }
        if let Some(git) = &request.git {
            for v in [row.bound, row.candidate] {
                git.build(&request.versions[v as usize])?;
            }
        }
        let mut study =
            request.step_study(self.registry, row.bound as usize, row.candidate as usize)?;
        study.description = Request::round_description(row.bisection_id, row.seq as usize);
        let out = benchlab_engine::Run {
            store: self.store,
            registry: self.registry,
            interrupt: self.interrupt,
            observer: self.observer,
            restore_first: false,
            rule: &benchlab_engine::Sequential::default(),
        }
        .start(&study, RunOptions::default())?;
        row.run_id = out.run_id;
        self.store.link_bisection_run(&row)?;
        if out.interrupted {
            return Err(Interrupted {
                id: row.bisection_id,
            }
            .into());
        }
        Ok(out.run_id)
    }
}

/// The round `next` asks for, as round `seq` of bisection `id` (its run
/// not known yet: 0); `None` when the search is done.
pub(crate) fn planned_round(id: i64, seq: usize, next: &Next) -> Option<BisectionRunRow> {
    match *next {
        Next::Measure {
            step,
            round,
            bound,
            candidate,
        } => Some(BisectionRunRow {
            bisection_id: id,
            seq: seq as u32,
            step: step as u32,
            round,
            bound: bound as u32,
            candidate: candidate as u32,
            run_id: 0,
        }),
        Next::Done => None,
    }
}

/// Refuses a stored round that is not the one this benchlab's search
/// plans in its place: the bisection was run by another benchlab, whose
/// search the stored rounds followed.
pub(crate) fn same_round(planned: &BisectionRunRow, stored: &BisectionRunRow) -> Result<()> {
    if (stored.step, stored.round, stored.bound, stored.candidate)
        != (
            planned.step,
            planned.round,
            planned.bound,
            planned.candidate,
        )
    {
        bail!(
            "bisection {}: its stored round {} measured #{} beside #{}, where this benchlab's search measures #{} beside #{}: it was run by another benchlab (resume it with that one)",
            planned.bisection_id, planned.seq, stored.candidate, stored.bound, planned.candidate, planned.bound
        );
    }
    Ok(())
}

/// The run of a round not linked to its bisection yet, found by its
/// description: a round is linked when its run ends, so a round being
/// measured, or one whose controller was killed, is found this way.
pub(crate) fn round_run(
    store: &Store,
    round: &BisectionRunRow,
) -> Result<Option<benchlab_store::RunRow>> {
    let description = Request::round_description(round.bisection_id, round.seq as usize);
    Ok(store
        .runs()?
        .into_iter()
        .filter(|r| r.description == description)
        .min_by_key(|r| r.id))
}

/// A round's run as units: the bound's and the candidate's figures of the
/// measured metric, block by block (ABBA: the k-th block of each side ran
/// next to each other).
pub(crate) fn units(store: &Store, run_id: i64, request: &Request) -> Result<Vec<Pair>> {
    let configs: BTreeMap<usize, String> = store
        .configurations(run_id)?
        .into_iter()
        .map(|c| (c.idx, c.name))
        .collect();
    let points: BTreeMap<i64, bool> = store
        .points(run_id)?
        .into_iter()
        .filter(|p| p.workload_name == request.workload)
        .filter_map(|p| Some((p.id, configs.get(&p.config_idx)? == BOUND)))
        .collect();
    let per_block = (request.repetitions / request.blocks).max(1);
    let mut pairs: Vec<Pair> = (0..request.blocks)
        .map(|_| Pair {
            bound: Vec::new(),
            candidate: Vec::new(),
        })
        .collect();
    for s in store.samples(run_id)? {
        let Some(&is_bound) = points.get(&s.point_id) else {
            continue;
        };
        let Some(v) = s.metrics.get(&request.metric) else {
            continue;
        };
        if s.status != SampleStatus::Ok {
            continue;
        }
        // Each block runs its share of the repetitions in order.
        let block = ((s.repetition / per_block) as usize).min(pairs.len() - 1);
        if is_bound {
            pairs[block].bound.push(*v);
        } else {
            pairs[block].candidate.push(*v);
        }
    }
    // A block whose repetitions all failed leaves its pair without a side:
    // the pair says nothing.
    pairs.retain(|p| !p.bound.is_empty() && !p.candidate.is_empty());
    if pairs.is_empty() {
        bail!(
            "run {run_id} measured no `{}` of the bound or the candidate: `benchlab show {run_id}` says why",
            request.metric
        );
    }
    Ok(pairs)
}

/// Where the builds of a repository's versions go by default: one
/// directory per repository and build command, so that another bisection
/// of the same repository reuses what was built.
pub fn default_builds(repo: &std::path::Path, build: &str) -> PathBuf {
    // FNV-1a: a stable name, not a secret.
    let key = format!("{}\n{build}", repo.display());
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let name = repo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repo".into());
    benchlab_engine::state_dir()
        .join("bisect-builds")
        .join(format!("{name}-{hash:016x}"))
}
