//! `benchlab submit`, `queue`, `cancel` and `worker`: the command line of
//! a lab's queue (benchlab_lab).

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use benchlab_core::plan::RunOptions;
use benchlab_core::study::Study;
use benchlab_core::units::now_rfc3339;
use benchlab_engine::Outcome;
use benchlab_lab::{Executor, Job, WorkerOptions};
use benchlab_store::{NewEntry, Store};

use crate::commands::{execute, options};
use crate::open::{load_study, open_existing_store, open_store};
use crate::runner;
use crate::{registry, HostArgs};

/// `benchlab submit`: the study must pass `check` as it would run.
pub(crate) fn submit(
    db: &Path,
    study: &Path,
    every: Option<&str>,
    priority: i64,
    hosts: &HostArgs,
) -> Result<i32> {
    if !hosts.host.is_empty() {
        bail!(
            "submit: --host is not stored with an entry; put the placement in a lab file (--hosts)"
        );
    }
    let reg = registry();
    let s = load_study(study, &reg, hosts)?;
    crate::envcmd::check_profiles(&s)?;
    // A worker runs the entry at full scale.
    s.check_budget(&reg, RunOptions::default())?;
    let every_s = every.map(benchlab_lab::parse_every).transpose()?;
    let lab = match &hosts.lab {
        Some(p) => Some((
            p.display().to_string(),
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the lab file {}", p.display()))?,
        )),
        None => None,
    };
    // The study as written, not as placed: the worker places it again
    // from the stored lab text, as `run --hosts` would.
    let text = std::fs::read_to_string(study)
        .with_context(|| format!("cannot read {}", study.display()))?;
    let store = open_store(db)?;
    let id = store.submit(&NewEntry {
        study_name: &s.name,
        study_file: &study.display().to_string(),
        study_text: &text,
        lab: lab.as_ref().map(|(f, t)| (f.as_str(), t.as_str())),
        every_s,
        priority,
        submitted_at: &now_rfc3339(),
    })?;
    writeln!(
        std::io::stdout(),
        "queued entry {id}: study `{}`{} in {}",
        s.name,
        every_s
            .map(|e| format!(", every {e} s"))
            .unwrap_or_default(),
        store.target()
    )?;
    Ok(0)
}

/// Opens a lab's store for the queue's commands other than `submit`.
/// They never migrate it: many workers of several benchlab versions share
/// one store, and its upgrade is one deliberate command, not a side
/// effect of whichever worker starts first. `queue` only reads, and
/// keeps the read-only store.
fn open_lab_store(db: &Path, write: bool) -> Result<Store> {
    let target = benchlab_store::Target::from_path(db);
    match Store::open_read_only(db) {
        Err(benchlab_store::StoreError::TooOld { found, known, .. }) => {
            let queue = benchlab_store::queue_schema_version();
            bail!(
                "{target} has schema version {found}{}, older than this benchlab's {known}: the queue's commands do not upgrade a lab's store; upgrade it once with `benchlab --db {target} store upgrade` (stop the workers of older benchlab versions first)",
                if found < queue {
                    format!(", without the queue (version {queue})")
                } else {
                    String::new()
                }
            )
        }
        Err(e) => Err(e).with_context(|| format!("cannot open the store {target}")),
        Ok(probe) => {
            let store = if write {
                drop(probe);
                open_existing_store(db)?
            } else {
                probe
            };
            benchlab_lab::require_queue(&store)?;
            Ok(store)
        }
    }
}

/// `benchlab queue`.
pub(crate) fn queue(db: &Path) -> Result<i32> {
    let store = open_lab_store(db, false)?;
    let entries = store.queue_entries()?;
    let mut changes = std::collections::BTreeMap::new();
    for study in benchlab_store::newest_periodic(&entries).keys() {
        if let Some(c) = benchlab_report::history::newest_change(&store, study)? {
            changes.insert(study.to_string(), c);
        }
    }
    let text = benchlab_lab::render_queue(&entries, &store.queue_waits()?, &changes);
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(0)
}

/// `benchlab cancel ID`.
pub(crate) fn cancel(db: &Path, id: i64) -> Result<i32> {
    let store = open_lab_store(db, true)?;
    let user = std::env::var("USER").unwrap_or_else(|_| "someone".into());
    match store.cancel_entry(id, &format!("cancelled by {user} at {}", now_rfc3339()))? {
        None => bail!(
            "no entry {id} in the queue of {} (see `benchlab queue`)",
            store.target()
        ),
        Some(s @ (benchlab_store::EntryStatus::Queued | benchlab_store::EntryStatus::Running)) => {
            writeln!(
                std::io::stdout(),
                "entry {id} cancelled{}",
                if s == benchlab_store::EntryStatus::Running {
                    " (its worker stops the run at its next heartbeat; the run stays resumable)"
                } else {
                    ""
                }
            )?;
            Ok(0)
        }
        Some(s) => bail!("entry {id} is {} already: nothing to cancel", s.as_str()),
    }
}

/// `benchlab worker`'s options.
pub(crate) struct WorkerArgs {
    pub(crate) name: Option<String>,
    pub(crate) max_entries: Option<usize>,
    pub(crate) until_empty: bool,
    pub(crate) lease: f64,
    pub(crate) poll: f64,
    pub(crate) hosts: Option<std::path::PathBuf>,
}

/// Runs a queue entry as `benchlab run` (or `run --resume`) would.
struct RunAsCli {
    reg: benchlab_core::Registry,
}

impl RunAsCli {
    /// The entry's study, placed by its stored lab file, as `run --hosts`
    /// would place it.
    fn placed(&self, e: &benchlab_store::QueueEntry) -> Result<Study> {
        let mut s = Study::parse(&e.study_file, &e.study_text, &self.reg)?;
        s.place_hosts(e.lab_file.as_deref().zip(e.lab_text.as_deref()), &[])?;
        Ok(s)
    }
}

impl Executor for RunAsCli {
    fn hosts(&mut self, e: &benchlab_store::QueueEntry) -> Result<Vec<(String, String)>> {
        Ok(benchlab_lab::study_hosts(
            &self.placed(e)?,
            &benchlab_lab::hostname(),
        ))
    }

    fn run(&mut self, store: &mut Store, job: &Job) -> Result<Outcome> {
        let e = &job.claim.entry;
        let study = match job.resume {
            Some(id) => benchlab_engine::stored_plan(store, &self.reg, id)?.study,
            None => {
                let s = self.placed(e)?;
                crate::envcmd::check_profiles(&s)?;
                s
            }
        };
        let what = match job.resume {
            Some(id) => runner::Action::Resume(id),
            None => runner::Action::Start(&study, options(false, None)?),
        };
        execute(store, &self.reg, &study, what, job.restore_first, false)
    }
}

/// `benchlab worker`.
pub(crate) fn worker(db: &Path, args: &WorkerArgs) -> Result<i32> {
    if !(args.lease.is_finite() && args.lease >= 1.0) {
        bail!(
            "--lease {}: expected a number of seconds, at least 1",
            args.lease
        );
    }
    if !(args.poll.is_finite() && args.poll > 0.0) {
        bail!(
            "--poll {}: expected a positive number of seconds",
            args.poll
        );
    }
    // A worker never makes or upgrades a store: a mistyped --db is an
    // error.
    let mut store = open_lab_store(db, true)?;
    let reach = match &args.hosts {
        Some(p) => Some(benchlab_lab::Reach::of_lab(
            &p.display().to_string(),
            &std::fs::read_to_string(p)
                .with_context(|| format!("--hosts: cannot read the lab file {}", p.display()))?,
            &benchlab_lab::hostname(),
        )?),
        None => None,
    };
    let opts = WorkerOptions {
        db: store.target().clone(),
        name: args
            .name
            .clone()
            .unwrap_or_else(|| format!("{}:{}", benchlab_lab::hostname(), std::process::id())),
        lease_s: args.lease,
        max_entries: args.max_entries,
        until_empty: args.until_empty,
        poll_s: args.poll,
        reach,
    };
    let interrupt = crate::runner::interrupt_flag()?;
    let mut exec = RunAsCli { reg: registry() };
    let summary = benchlab_lab::work(&mut store, &opts, &mut exec, &interrupt)?;
    eprintln!(
        "benchlab worker {}: {} entr{} done{}",
        opts.name,
        summary.entries,
        if summary.entries == 1 { "y" } else { "ies" },
        if summary.interrupted {
            ", stopped by a signal"
        } else {
            ""
        }
    );
    Ok(if summary.interrupted {
        crate::EXIT_INTERRUPTED
    } else {
        0
    })
}
