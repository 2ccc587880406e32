//! A lab of many machines (docs/lab.md): studies queued in the lab's
//! store, and workers that claim them one at a time under a lease their
//! heartbeat renews, run each exactly as `benchlab run` would (the caller
//! hands in that path as an [`Executor`]), and resume a run whose worker
//! died once its lease has expired.
//!
//! Everything that two workers could disagree on is decided by one
//! transaction of the store (`Store::claim_entry`, `renew_lease`,
//! `end_attempt`); this crate only loops, keeps the heartbeat and says
//! what happened.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use benchlab_core::study::{Host, Study, Transport};
use benchlab_core::units::now_rfc3339;
use benchlab_engine::Outcome;
use benchlab_store::{
    Busy, Claim, EntryStatus, NewEntry, Pick, QueueEntry, RunStatus, Store, Target, Wait, WorkerId,
};

/// How often a claim that failed is tried before the entry is parked
/// (an expired lease counts: a study that kills its worker is one).
pub const MAX_ATTEMPTS: i64 = 3;

/// `--every`: `N` followed by `s`, `m`, `h` or `d` (`90s`, `6h`, `1d`).
pub fn parse_every(text: &str) -> Result<i64> {
    let t = text.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: i64 = num.parse().ok().filter(|n| *n > 0).with_context(|| {
        format!(
            "--every {text}: expected a positive whole number followed by s, m, h or d (e.g. 1d)"
        )
    })?;
    let unit_s = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => bail!("--every {text}: the unit must be s, m, h or d (e.g. 30m, 1d), not `{unit}`"),
    };
    Ok(n * unit_s)
}

/// Refuses a store without the queue, naming the command that adds it.
pub fn require_queue(store: &Store) -> Result<()> {
    if !store.has_queue()? {
        bail!(
            "{} has no queue (schema version {}; the queue came with version {}): upgrade it with `benchlab --db {} store upgrade`, run once with this benchlab",
            store.target(),
            store.schema_version()?,
            benchlab_store::queue_schema_version(),
            store.target()
        );
    }
    Ok(())
}

/// `benchlab queue`: one line per entry, then why earlier attempts ended,
/// why workers pass a queued entry over (`waits`), and on the newest
/// entry of a periodic study the newest change point of its series
/// (`changes`, by study name).
pub fn render_queue(
    entries: &[QueueEntry],
    waits: &[Wait],
    changes: &std::collections::BTreeMap<String, String>,
) -> String {
    if entries.is_empty() {
        return "the queue is empty (`benchlab submit STUDY` adds to it)\n".into();
    }
    let newest = benchlab_store::newest_periodic(entries);
    let mut out = String::new();
    out.push_str(&format!(
        "{:>4}  {:<9} {:>3}  {:<24} {:<6} {:<20} {}\n",
        "id", "status", "pri", "study", "run", "worker", "heartbeat / lease"
    ));
    for e in entries {
        let lease = e.lease_text();
        out.push_str(&format!(
            "{:>4}  {:<9} {:>3}  {:<24} {:<6} {:<20} {}{}\n",
            e.id,
            e.status.as_str(),
            e.priority,
            e.study_name,
            e.run_id
                .map(|r| r.to_string())
                .unwrap_or_else(|| "-".into()),
            e.worker.as_deref().unwrap_or("-"),
            lease,
            match e.every_s {
                Some(s) => format!("every {s} s"),
                None => String::new(),
            }
        ));
        for line in e.reasons.lines() {
            out.push_str(&format!("        {line}\n"));
        }
        for w in waits.iter().filter(|w| w.entry_id == e.id) {
            out.push_str(&format!(
                "        waiting: {} ({:.0} s ago)\n",
                w.reason, w.age_s
            ));
        }
        if newest.get(e.study_name.as_str()) == Some(&e.id) {
            if let Some(c) = changes.get(&e.study_name) {
                out.push_str(&format!("        CHANGE POINT in its series: {c}\n"));
            }
        }
    }
    out
}

/// What a worker was asked to run.
pub struct Job<'a> {
    /// The claimed entry.
    pub claim: &'a Claim,
    /// The run to resume (an earlier attempt's), or `None` for a new one.
    pub resume: Option<i64>,
    /// Undo first what a dead run left changed on the hosts (its
    /// journals): set when this attempt follows one that ended badly.
    pub restore_first: bool,
}

/// A host's lab-wide name, the key of its lease: the same machine (or
/// namespace, or guest) whichever study or lab file names it, and
/// whatever role it plays. Local, namespace and guest hosts are on the
/// worker's own machine (`machine`); SSH and agent hosts are the machine
/// they reach (an SSH user is not part of it). An agent reached at a
/// loopback address is this machine, the one a local host is: a run
/// through it and a local run change the same host.
pub fn host_key(h: &Host, machine: &str) -> String {
    match &h.transport {
        Transport::Local => format!("local@{machine}"),
        Transport::Netns(ns) => format!("netns:{ns}@{machine}"),
        Transport::Guest(_) => format!("guest:{}@{machine}", h.name),
        Transport::Ssh {
            destination, port, ..
        } => {
            let machine = destination.rsplit('@').next().unwrap_or(destination);
            match port {
                Some(p) => format!("ssh:{machine}:{p}"),
                None => format!("ssh:{machine}"),
            }
        }
        Transport::Tcp { agent, .. } if is_loopback(agent) => format!("local@{machine}"),
        Transport::Tcp { agent, .. } => format!("agent:{agent}"),
    }
}

/// Whether an agent's `HOST:PORT` names this machine by a loopback
/// address (`127.0.0.0/8`, `[::1]`, `localhost`).
fn is_loopback(agent: &str) -> bool {
    let host = agent.rsplit_once(':').map_or(agent, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The hosts a placed study's runs use: (its name in the study, its
/// lab-wide name), each once.
pub fn study_hosts(study: &Study, machine: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for name in study.used_hosts() {
        if let Some(h) = study.hosts.iter().find(|h| h.name == name) {
            let key = host_key(h, machine);
            if !out.iter().any(|(_, k)| *k == key) {
                out.push((name.to_string(), key));
            }
        }
    }
    out
}

/// The hosts a worker may use (`--hosts LAB`): their lab-wide names.
#[derive(Debug, Clone)]
pub struct Reach {
    /// The lab file, as given (for messages).
    pub file: String,
    /// Lab-wide names of its hosts.
    pub hosts: Vec<String>,
}

impl Reach {
    /// The hosts of a lab file, on this worker's `machine`.
    pub fn of_lab(file: &str, text: &str, machine: &str) -> Result<Reach> {
        let hosts = benchlab_core::study::lab_hosts(file, text)?;
        if hosts.is_empty() {
            bail!("{file}: --hosts names no [[host]]: this worker could take nothing");
        }
        Ok(Reach {
            file: file.to_string(),
            hosts: hosts.iter().map(|h| host_key(h, machine)).collect(),
        })
    }
}

/// What the worker makes of a candidate entry: the hosts it needs, or
/// why it passes the entry over (a host it cannot reach).
fn pick(exec: &mut dyn Executor, reach: Option<&Reach>, worker: &str, e: &QueueEntry) -> Pick {
    let hosts = match exec.hosts(e) {
        Ok(h) => h,
        Err(err) => return Pick::Skip(format!("worker {worker} cannot place it: {err:#}")),
    };
    if let Some(reach) = reach {
        let out: Vec<String> = hosts
            .iter()
            .filter(|(_, key)| !reach.hosts.contains(key))
            .map(|(name, key)| format!("`{name}` ({key})"))
            .collect();
        if !out.is_empty() {
            return Pick::Skip(format!(
                "worker {worker} cannot reach host{} {}: not among its --hosts {}",
                if out.len() == 1 { "" } else { "s" },
                out.join(", "),
                reach.file
            ));
        }
    }
    Pick::Take(hosts.into_iter().map(|(_, key)| key).collect())
}

/// Runs a job exactly as `benchlab run` (or `run --resume`) does.
pub trait Executor {
    /// The hosts the entry's run would use: (name in the study, lab-wide
    /// name from [`host_key`]).
    fn hosts(&mut self, entry: &QueueEntry) -> Result<Vec<(String, String)>>;

    /// Runs it into `store`; stops early when the interrupt flag is set.
    fn run(&mut self, store: &mut Store, job: &Job) -> Result<Outcome>;
}

/// How a worker works.
pub struct WorkerOptions {
    /// The lab's store.
    pub db: Target,
    /// Its name in the queue.
    pub name: String,
    /// Seconds a claim holds without a heartbeat.
    pub lease_s: f64,
    /// Stop after this many entries.
    pub max_entries: Option<usize>,
    /// Stop when nothing is queued or running any more (instead of
    /// waiting for new entries).
    pub until_empty: bool,
    /// Seconds between looks at an empty queue.
    pub poll_s: f64,
    /// The hosts it may use (`--hosts`); `None`: any.
    pub reach: Option<Reach>,
}

/// The machine's host name (the runs' `controller_host`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// Renews a claim's lease every third of it on a connection of its own,
/// until stopped; when the lease is lost (the entry was cancelled or
/// taken over) it raises `lost` and the interrupt, so that the run stops
/// at its next repetition.
struct Heartbeat {
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Heartbeat {
    fn start(
        who: String,
        db: &Target,
        claim: &Claim,
        lease_s: f64,
        interrupt: Arc<AtomicBool>,
        lost: Arc<AtomicBool>,
    ) -> Result<Heartbeat> {
        let store =
            Store::open_existing(db).with_context(|| format!("heartbeat: cannot open {db}"))?;
        let (stop, stopped) = mpsc::channel();
        let (id, attempt) = (claim.entry.id, claim.attempt);
        let every = Duration::from_secs_f64(lease_s / 3.0);
        let thread = std::thread::spawn(move || {
            let mut last_ok = Instant::now();
            loop {
                match store.renew_lease(id, attempt, lease_s, &now_rfc3339()) {
                    Ok(true) => last_ok = Instant::now(),
                    Ok(false) => {
                        eprintln!("{who}: entry {id}: the lease is gone (cancelled, or taken over): stopping its run");
                        lost.store(true, Ordering::SeqCst);
                        interrupt.store(true, Ordering::SeqCst);
                        return;
                    }
                    // A store that cannot be reached for a whole lease may
                    // have let another worker take the entry: stop rather
                    // than measure it twice.
                    Err(e) if last_ok.elapsed().as_secs_f64() >= lease_s => {
                        eprintln!("{who}: entry {id}: no heartbeat for a whole lease ({e}): stopping its run");
                        lost.store(true, Ordering::SeqCst);
                        interrupt.store(true, Ordering::SeqCst);
                        return;
                    }
                    Err(e) => eprintln!("{who}: entry {id}: heartbeat failed: {e}"),
                }
                if stopped.recv_timeout(every) != Err(mpsc::RecvTimeoutError::Timeout) {
                    return;
                }
            }
        });
        Ok(Heartbeat { stop, thread })
    }

    fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// Seconds a plain `benchlab run`'s hold on its hosts lasts without a
/// heartbeat (renewed every third of it while the run lives).
pub const BY_HAND_LEASE_S: f64 = 30.0;

/// A plain `benchlab run`'s hold on its hosts (docs/lab.md): an entry of
/// the lab's queue that the run's own process claims with the hosts'
/// leases and renews while it runs, so that no worker (and no other
/// plain run) uses those hosts meanwhile. End it with [`HandHold::end`].
pub struct HandHold {
    claim: Claim,
    heartbeat: Heartbeat,
    lost: Arc<AtomicBool>,
}

/// How often a plain run waiting for a host asks for it again.
const HAND_WAIT_POLL: Duration = Duration::from_secs(1);

/// Who holds a host, for a plain run that waits for it.
fn holder_text(busy: &Busy) -> String {
    if busy.by_hand {
        format!(
            "a plain `benchlab run` of study `{}` ({}, entry {})",
            busy.study, busy.worker, busy.entry_id
        )
    } else {
        format!(
            "entry {} of the queue (study `{}`), run by worker {}",
            busy.entry_id, busy.study, busy.worker
        )
    }
}

/// Sleeps `d`, or less when `interrupt` is raised: whether it was.
fn interrupted_within(interrupt: &AtomicBool, d: Duration) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if interrupt.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    interrupt.load(Ordering::SeqCst)
}

/// Leases the hosts `study` uses for a plain `benchlab run` in `store`,
/// waiting (and saying for which run) while another run holds one of
/// them, until `interrupt`. A lost hold (the entry
/// cancelled, or its lease taken after the store was unreachable for a
/// whole lease) raises `interrupt`, and the run stops as on Ctrl-C.
pub fn hold_by_hand(store: &Store, study: &Study, interrupt: &Arc<AtomicBool>) -> Result<HandHold> {
    let machine = hostname();
    let pid = std::process::id();
    let name = format!("run:{machine}:{pid}");
    let hosts = study_hosts(study, &machine);
    let keys: Vec<String> = hosts.iter().map(|(_, k)| k.clone()).collect();
    let me = WorkerId {
        name: &name,
        host: &machine,
        pid: pid as i64,
    };
    let entry = NewEntry {
        study_name: &study.name,
        study_file: &study.file,
        study_text: &study.text,
        lab: None,
        every_s: None,
        priority: 0,
        submitted_at: &now_rfc3339(),
    };
    // A host another run holds is waited for, as a worker waits: the
    // user asked for this run, and it runs when the host is free. Said
    // once per holder; Ctrl-C stops the wait with nothing run.
    let mut told: Option<(String, i64)> = None;
    let claim = loop {
        let mut claimed = store.claim_by_hand(&entry, &me, &keys, BY_HAND_LEASE_S)?;
        // A plain run of this machine killed a moment ago holds its hosts
        // until its lease runs out: its process is gone, so it holds
        // nothing (`--resume` of a killed run must not wait for that).
        if let Err(Busy {
            by_hand: true,
            holder: Some((on, pid)),
            entry_id,
            ..
        }) = &claimed
        {
            if *on == machine && !benchlab_engine::is_live_benchlab(*pid) {
                store.end_gone_by_hand(*entry_id)?;
                claimed = store.claim_by_hand(&entry, &me, &keys, BY_HAND_LEASE_S)?;
            }
        }
        let busy = match claimed {
            Ok(c) => break c,
            Err(busy) => busy,
        };
        let name = hosts
            .iter()
            .find(|(_, k)| *k == busy.host)
            .map_or("?", |(n, _)| n.as_str());
        if told.as_ref() != Some(&(busy.host.clone(), busy.entry_id)) {
            told = Some((busy.host.clone(), busy.entry_id));
            eprintln!(
                "benchlab run: waiting for host `{name}` ({}): it is in another run, {}; this run starts when that one ends (`benchlab --db {} queue` shows it; Ctrl-C stops waiting)",
                busy.host,
                holder_text(&busy),
                store.target(),
            );
        }
        if interrupted_within(interrupt, HAND_WAIT_POLL) {
            bail!(
                "interrupted while waiting for host `{name}` ({}), which is in another run, {}: nothing ran",
                busy.host,
                holder_text(&busy)
            );
        }
    };
    let lost = Arc::new(AtomicBool::new(false));
    let heartbeat = Heartbeat::start(
        "benchlab run".into(),
        store.target(),
        &claim,
        BY_HAND_LEASE_S,
        interrupt.clone(),
        lost.clone(),
    )?;
    Ok(HandHold {
        claim,
        heartbeat,
        lost,
    })
}

impl HandHold {
    /// The entry that holds the hosts.
    pub fn entry_id(&self) -> i64 {
        self.claim.entry.id
    }

    /// Ends the hold with how the run ended: the hosts are free again.
    pub fn end(self, store: &Store, result: &Result<Outcome>) -> Result<()> {
        self.heartbeat.stop();
        let (id, attempt) = (self.claim.entry.id, self.claim.attempt);
        if self.lost.load(Ordering::SeqCst) {
            store.release_hosts(id, attempt)?;
            return Ok(());
        }
        let (status, run_id, reason) = ending(
            result,
            |run| {
                (
                    EntryStatus::Failed,
                    format!("stopped by a signal; `benchlab run --resume {run}` continues it"),
                )
            },
            EntryStatus::Failed,
        );
        store.end_attempt(id, attempt, status, run_id, &reason)?;
        Ok(())
    }
}

/// What a worker did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WorkerSummary {
    /// Entries it ended (finished, failed, parked, given back).
    pub entries: usize,
    /// Stopped by a signal.
    pub interrupted: bool,
}

/// The worker loop: claim, run, end, take the next.
pub fn work(
    store: &mut Store,
    opts: &WorkerOptions,
    exec: &mut dyn Executor,
    interrupt: &Arc<AtomicBool>,
) -> Result<WorkerSummary> {
    require_queue(store)?;
    let host = hostname();
    let me = WorkerId {
        name: &opts.name,
        host: &host,
        pid: std::process::id() as i64,
    };
    let mut summary = WorkerSummary::default();
    loop {
        if interrupt.load(Ordering::SeqCst) {
            summary.interrupted = true;
            return Ok(summary);
        }
        if opts.max_entries.is_some_and(|m| summary.entries >= m) {
            return Ok(summary);
        }
        // Entries this worker cannot run (a host it cannot reach): with
        // --until-empty it does not wait for them.
        let mut cannot = Vec::new();
        let claim = store.claim_entry_with(&me, opts.lease_s, &mut |e| {
            let p = pick(exec, opts.reach.as_ref(), &opts.name, e);
            if matches!(p, Pick::Skip(_)) {
                cannot.push(e.id);
            }
            p
        })?;
        let Some(claim) = claim else {
            if opts.until_empty
                && store.queue_entries()?.iter().all(|e| match e.status {
                    EntryStatus::Queued => cannot.contains(&e.id),
                    EntryStatus::Running => false,
                    _ => true,
                })
            {
                if !cannot.is_empty() {
                    eprintln!(
                        "benchlab worker {}: nothing left it can run (entr{} {} wait{} for hosts it cannot reach: see `benchlab queue`)",
                        opts.name,
                        if cannot.len() == 1 { "y" } else { "ies" },
                        cannot.iter().map(i64::to_string).collect::<Vec<_>>().join(", "),
                        if cannot.len() == 1 { "s" } else { "" }
                    );
                }
                return Ok(summary);
            }
            std::thread::sleep(Duration::from_secs_f64(opts.poll_s));
            continue;
        };
        let stop = run_claim(store, opts, exec, interrupt, &claim)?;
        summary.entries += 1;
        if stop {
            summary.interrupted = true;
            return Ok(summary);
        }
    }
}

/// How an attempt ends after its run: its status, run and reason. A run
/// stopped by a signal ends as `signal` says (given the run); a run that
/// could not be made (an error) as `error`.
fn ending(
    result: &Result<Outcome>,
    signal: impl Fn(i64) -> (EntryStatus, String),
    error: EntryStatus,
) -> (EntryStatus, Option<i64>, String) {
    match result {
        Ok(o) if o.interrupted => {
            let (status, why) = signal(o.run_id);
            (status, Some(o.run_id), why)
        }
        Ok(o) if o.failed > 0 || o.stopped => (
            EntryStatus::Failed,
            Some(o.run_id),
            format!(
                "run {} {} ({} repetition(s) failed)",
                o.run_id,
                o.status_text(),
                o.failed
            ),
        ),
        Ok(o) => (EntryStatus::Finished, Some(o.run_id), String::new()),
        Err(e) => (error, None, format!("{e:#}")),
    }
}

/// Runs one claimed entry and ends its attempt; `true` when the worker
/// was stopped by a signal.
fn run_claim(
    store: &mut Store,
    opts: &WorkerOptions,
    exec: &mut dyn Executor,
    interrupt: &Arc<AtomicBool>,
    claim: &Claim,
) -> Result<bool> {
    let (id, attempt) = (claim.entry.id, claim.attempt);
    eprintln!(
        "benchlab worker {}: entry {id} ({}), attempt {attempt}, hosts {}{}",
        opts.name,
        claim.entry.study_name,
        if claim.hosts.is_empty() {
            "none".to_string()
        } else {
            claim.hosts.join(", ")
        },
        match (&claim.took_over_from, claim.earlier_run) {
            (Some(w), Some(r)) => format!(": worker {w}'s lease expired, resuming run {r}"),
            (Some(w), None) => format!(": worker {w}'s lease expired before its run began"),
            (None, Some(r)) => format!(": resuming run {r}"),
            (None, None) => String::new(),
        }
    );
    let mut resume = None;
    if let Some(run_id) = claim.earlier_run {
        let run = store.run(run_id)?;
        match run.status {
            RunStatus::Completed => {
                // The earlier holder finished the run and died before it
                // could say so.
                store.end_attempt(id, attempt, EntryStatus::Finished, Some(run_id), "")?;
                return Ok(false);
            }
            RunStatus::Running => {
                // Its controller is gone (its lease expired): the run is
                // interrupted, as `--resume` expects it.
                let at = now_rfc3339();
                store.set_run_status(run_id, RunStatus::Interrupted, &at)?;
                store.add_event(
                    run_id,
                    &at,
                    "interrupted",
                    &format!(
                        "worker {} stopped renewing its lease; worker {} resumes the run",
                        claim.took_over_from.as_deref().unwrap_or("?"),
                        opts.name
                    ),
                )?;
                resume = Some(run_id);
            }
            RunStatus::Interrupted | RunStatus::Failed => resume = Some(run_id),
        }
    }
    let lost = Arc::new(AtomicBool::new(false));
    let heartbeat = Heartbeat::start(
        format!("benchlab worker {}", opts.name),
        &opts.db,
        claim,
        opts.lease_s,
        interrupt.clone(),
        lost.clone(),
    )?;
    let job = Job {
        claim,
        resume,
        restore_first: claim.attempt > 1,
    };
    let result = exec.run(store, &job);
    heartbeat.stop();
    if lost.load(Ordering::SeqCst) {
        // Not ours any more: whoever holds it now decides. The interrupt
        // was ours, not a signal's. Its hosts' holdings end now, when
        // the run really stopped.
        interrupt.store(false, Ordering::SeqCst);
        store.release_hosts(id, attempt)?;
        return Ok(false);
    }
    let (status, run_id, reason) = ending(
        &result,
        |_| {
            (
                EntryStatus::Queued,
                format!(
                    "worker {} was stopped by a signal; the run is resumed by the next worker",
                    opts.name
                ),
            )
        },
        if attempt >= MAX_ATTEMPTS {
            EntryStatus::Parked
        } else {
            EntryStatus::Queued
        },
    );
    store.end_attempt(id, attempt, status, run_id, &reason)?;
    eprintln!(
        "benchlab worker {}: entry {id}: {}{}",
        opts.name,
        status.as_str(),
        if reason.is_empty() {
            String::new()
        } else {
            format!(": {reason}")
        }
    );
    Ok(matches!(&result, Ok(o) if o.interrupted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reads_whole_units_and_refuses_the_rest() {
        assert_eq!(parse_every("90s").unwrap(), 90);
        assert_eq!(parse_every("30m").unwrap(), 1800);
        assert_eq!(parse_every("1d").unwrap(), 86400);
        for bad in ["", "d", "0h", "1w", "1.5h", "-1d"] {
            let e = parse_every(bad).unwrap_err().to_string();
            assert!(e.contains("--every"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_agent_at_a_loopback_address_is_this_machine() {
        for here in [
            "127.0.0.1:7300",
            "127.3.0.1:1",
            "[::1]:7300",
            "localhost:7300",
        ] {
            assert!(is_loopback(here), "{here}");
        }
        for there in [
            "10.0.0.1:7300",
            "[fe80::1]:7300",
            "db1.lab:7300",
            "localhost.lab:1",
        ] {
            assert!(!is_loopback(there), "{there}");
        }
    }
}
