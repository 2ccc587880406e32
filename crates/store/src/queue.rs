//! The lab's queue: studies submitted to run, claimed by workers under a
//! lease that their heartbeat renews (docs/lab.md).
//!
//! Every decision is one transaction on the store: a claim takes the next
//! entry under a row lock (PostgreSQL's `FOR UPDATE SKIP LOCKED`; SQLite's
//! `BEGIN IMMEDIATE`, one writer at a time), and every later write of the
//! holder names the attempt it claimed, so a worker whose lease expired and
//! was taken over changes nothing any more. Lease times are the database's
//! clock, never a worker's: the machines of a lab need not agree on the
//! time.

use serde::{Deserialize, Serialize};

use crate::sql::{vals, Dialect, Exec, Row};
use crate::{Result, Store, StoreError, MIGRATIONS};

/// The first statement of the migration that made the queue: a store
/// whose schema is older has no queue.
const QUEUE_TABLE: &str = "CREATE TABLE queue_entry";

/// The schema version that has the queue.
pub fn queue_schema_version() -> i64 {
    MIGRATIONS
        .iter()
        .position(|m| m.contains(QUEUE_TABLE))
        .map(|i| i as i64 + 1)
        .expect("a migration makes the queue")
}

/// The database's clock, in seconds since the epoch.
fn now_sql(d: Dialect) -> &'static str {
    match d {
        Dialect::Sqlite => "((julianday('now') - 2440587.5) * 86400.0)",
        Dialect::Postgres => "(extract(epoch FROM clock_timestamp())::DOUBLE PRECISION)",
    }
}

/// Where an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryStatus {
    /// Waiting for a worker (or for its lease to be taken over).
    Queued,
    /// A worker holds it.
    Running,
    /// Its run completed.
    Finished,
    /// Its run completed with failed repetitions, or stopped at one.
    Failed,
    /// It failed too often to be tried again; the reasons say why.
    Parked,
    /// `benchlab cancel`.
    Cancelled,
}

impl EntryStatus {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryStatus::Queued => "queued",
            EntryStatus::Running => "running",
            EntryStatus::Finished => "finished",
            EntryStatus::Failed => "failed",
            EntryStatus::Parked => "parked",
            EntryStatus::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Result<EntryStatus> {
        Ok(match s {
            "queued" => EntryStatus::Queued,
            "running" => EntryStatus::Running,
            "finished" => EntryStatus::Finished,
            "failed" => EntryStatus::Failed,
            "parked" => EntryStatus::Parked,
            "cancelled" => EntryStatus::Cancelled,
            other => return Err(StoreError::Type(format!("queue_entry.status `{other}`"))),
        })
    }
}

/// A study to queue.
#[derive(Debug, Clone)]
pub struct NewEntry<'a> {
    /// `[study] name`.
    pub study_name: &'a str,
    /// The study file as given.
    pub study_file: &'a str,
    /// Its text.
    pub study_text: &'a str,
    /// The lab file (`--hosts`) as given, and its text.
    pub lab: Option<(&'a str, &'a str)>,
    /// Run again this many seconds after each start (`--every`).
    pub every_s: Option<i64>,
    /// Higher runs first.
    pub priority: i64,
    /// When submitted, RFC 3339.
    pub submitted_at: &'a str,
}

/// A queued study as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// Entry id.
    pub id: i64,
    /// Study name.
    pub study_name: String,
    /// Study file as given.
    pub study_file: String,
    /// Study text.
    pub study_text: String,
    /// Lab file as given.
    pub lab_file: Option<String>,
    /// Lab file text.
    pub lab_text: Option<String>,
    /// `--every`, in seconds.
    pub every_s: Option<i64>,
    /// Priority.
    pub priority: i64,
    /// Status.
    pub status: EntryStatus,
    /// Submitted, RFC 3339.
    pub submitted_at: String,
    /// The worker that holds (or last held) it.
    pub worker: Option<String>,
    /// Its last heartbeat, RFC 3339 (the worker's clock, for people).
    pub heartbeat_at: Option<String>,
    /// Seconds left on the lease (negative: expired), by the database's
    /// clock.
    pub lease_left_s: Option<f64>,
    /// The run it made.
    pub run_id: Option<i64>,
    /// How many times it was claimed.
    pub attempts: i64,
    /// Why earlier attempts ended, one line each.
    pub reasons: String,
    /// A plain `benchlab run`'s hold on its hosts, not a submitted study:
    /// its own process holds it and no worker takes it over.
    pub by_hand: bool,
}

impl QueueEntry {
    /// A running entry's last heartbeat and its lease, as `benchlab queue`
    /// and serve show it; empty for an entry that is not running.
    pub fn lease_text(&self) -> String {
        match (self.status, self.lease_left_s) {
            (EntryStatus::Running, Some(left)) if left >= 0.0 => format!(
                "{} (lease {left:.0} s left)",
                self.heartbeat_at.as_deref().unwrap_or("none yet")
            ),
            (EntryStatus::Running, Some(left)) => format!(
                "{} (lease expired {:.0} s ago: another worker takes it over)",
                self.heartbeat_at.as_deref().unwrap_or("none"),
                -left
            ),
            _ => String::new(),
        }
    }
}

/// Who claims: a worker's name, machine and process.
#[derive(Debug, Clone)]
pub struct WorkerId<'a> {
    /// `--name` (default: host:pid).
    pub name: &'a str,
    /// The machine's host name (the runs' `controller_host`).
    pub host: &'a str,
    /// The process id (the runs' `controller_pid`).
    pub pid: i64,
}

/// An entry a worker now holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The entry.
    pub entry: QueueEntry,
    /// The attempt this claim is (1 for the first): every later write
    /// names it.
    pub attempt: i64,
    /// The run an earlier attempt made, to be resumed.
    pub earlier_run: Option<i64>,
    /// The worker whose lease expired, when this claim took it over.
    pub took_over_from: Option<String>,
    /// The hosts leased with it (lab-wide names).
    pub hosts: Vec<String>,
}

/// One holding of an entry by a worker: from its claim to its end (or,
/// for a worker that died, its last heartbeat), database clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Holding {
    /// The entry.
    pub entry_id: i64,
    /// The attempt.
    pub attempt: i64,
    /// The worker.
    pub worker: String,
    /// Claimed at, seconds since the epoch.
    pub from_s: f64,
    /// Last heartbeat or end, seconds since the epoch.
    pub to_s: f64,
    /// How it ended (`finished`, `failed: …`, `lease expired`), or
    /// nothing while held.
    pub outcome: Option<String>,
}

/// What a worker makes of a candidate entry while claiming.
#[derive(Debug, Clone, PartialEq)]
pub enum Pick {
    /// Take it, with the lab-wide names of the hosts its run uses (each
    /// leased in the claim's transaction, or the entry is passed over).
    Take(Vec<String>),
    /// Pass it over, saying why (shown by `benchlab queue`).
    Skip(String),
}

/// One holding of a host by an entry's attempt: from its claim to its
/// end (or last heartbeat), database clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostHold {
    /// The host's lab-wide name.
    pub host: String,
    /// The entry.
    pub entry_id: i64,
    /// The attempt.
    pub attempt: i64,
    /// The worker.
    pub worker: String,
    /// Claimed at, seconds since the epoch.
    pub from_s: f64,
    /// Last heartbeat or end, seconds since the epoch.
    pub to_s: f64,
}

/// Who holds a host another claim wanted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Busy {
    /// The host's lab-wide name.
    pub host: String,
    /// The entry whose run holds it.
    pub entry_id: i64,
    /// That entry's study.
    pub study: String,
    /// Its worker (a plain run's: `benchlab run` and its process).
    pub worker: String,
    /// Whether that run is a plain `benchlab run`.
    pub by_hand: bool,
    /// The holder's machine and process (a plain run's own), when known.
    pub holder: Option<(String, i64)>,
    /// Seconds left on its lease, by the database's clock.
    pub lease_left_s: f64,
}

impl Busy {
    /// Why a worker passes an entry over (`benchlab queue`).
    pub fn wait_reason(&self) -> String {
        format!(
            "waiting for host {}: entry {}'s run holds it (worker {})",
            self.host, self.entry_id, self.worker
        )
    }
}

/// Why a worker passed a queued entry over, last time it looked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    /// The entry.
    pub entry_id: i64,
    /// The worker.
    pub worker: String,
    /// Why.
    pub reason: String,
    /// Seconds since it looked, by the database's clock.
    pub age_s: f64,
}

/// A worker as the store has heard of it: every worker that claimed an
/// entry or passed one over. A worker writes to the store only then and
/// at its heartbeats, so an idle worker's last word is its last claim's
/// end or its last look at a waiting entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerSeen {
    /// Its name (`--name`; a plain run's `run:MACHINE:PID`).
    pub worker: String,
    /// Seconds since its last heartbeat, claim, end or look at a queued
    /// entry, by the database's clock.
    pub last_heard_s: f64,
    /// Entries it has claimed (attempts, over its life).
    pub claims: i64,
}

/// The newest entry of each periodic study (by study name): the one the
/// change point of its series is flagged on (`benchlab queue`, serve).
pub fn newest_periodic(entries: &[QueueEntry]) -> std::collections::BTreeMap<&str, i64> {
    let mut newest = std::collections::BTreeMap::new();
    for e in entries.iter().filter(|e| e.every_s.is_some()) {
        let id = newest.entry(e.study_name.as_str()).or_insert(e.id);
        *id = (*id).max(e.id);
    }
    newest
}

const ENTRY_SELECT: &str =
    "SELECT id, study_name, study_file, study_text, lab_file, lab_text, every_s, priority,
    status, submitted_at, worker, heartbeat_at, lease_until, run_id, attempts, reasons, by_hand
    FROM queue_entry";

fn entry_row(r: &Row, now: f64) -> Result<QueueEntry> {
    let lease_until = match &r.0[12] {
        crate::sql::Val::Null => None,
        _ => Some(r.real(12)?),
    };
    Ok(QueueEntry {
        id: r.int(0)?,
        study_name: r.text(1)?,
        study_file: r.text(2)?,
        study_text: r.text(3)?,
        lab_file: r.opt_text(4)?,
        lab_text: r.opt_text(5)?,
        every_s: r.opt_int(6)?,
        priority: r.int(7)?,
        status: EntryStatus::parse(&r.text(8)?)?,
        submitted_at: r.text(9)?,
        worker: r.opt_text(10)?,
        heartbeat_at: r.opt_text(11)?,
        lease_left_s: lease_until.map(|u| u - now),
        run_id: r.opt_int(13)?,
        attempts: r.int(14)?,
        reasons: r.text(15)?,
        by_hand: r.int(16)? != 0,
    })
}

fn now(c: &mut dyn Exec) -> Result<f64> {
    let sql = format!("SELECT {}", now_sql(c.dialect()));
    c.query_one(&sql, &[])?.real(0)
}

/// The run a holder made: its runs carry the holder's host and process,
/// and the only one it made after its claim is the entry's. Found from
/// the store alone, so a worker killed before it said which run it made
/// still leaves it findable.
fn run_of_holder(c: &mut dyn Exec, host: &str, pid: i64, floor: i64) -> Result<Option<i64>> {
    c.query_opt(
        "SELECT max(id) FROM run WHERE controller_host = ?1 AND controller_pid = ?2 AND id > ?3",
        vals![host, pid, floor],
    )?
    .map(|r| r.opt_int(0))
    .transpose()
    .map(Option::flatten)
}

impl Store {
    /// Whether this store has the queue (its schema is new enough).
    pub fn has_queue(&self) -> Result<bool> {
        Ok(self.schema_version()? >= queue_schema_version())
    }

    /// Queues a study; returns the entry's id.
    pub fn submit(&self, e: &NewEntry) -> Result<i64> {
        self.with(|c| insert_entry(c, e, false))
    }

    /// Every entry, in the order workers take them (running first, then
    /// queued by priority, then the rest newest first).
    pub fn queue_entries(&self) -> Result<Vec<QueueEntry>> {
        self.with(|c| {
            let now = now(c)?;
            c.query(
                &format!(
                    "{ENTRY_SELECT} ORDER BY CASE status WHEN 'running' THEN 0 WHEN 'queued' THEN 1 ELSE 2 END,
                     CASE WHEN status = 'queued' THEN -priority ELSE 0 END, id"
                ),
                &[],
            )?
            .iter()
            .map(|r| entry_row(r, now))
            .collect()
        })
    }

    /// One entry.
    pub fn queue_entry(&self, id: i64) -> Result<Option<QueueEntry>> {
        self.with(|c| {
            let now = now(c)?;
            c.query_opt(&format!("{ENTRY_SELECT} WHERE id = ?1"), vals![id])?
                .map(|r| entry_row(&r, now))
                .transpose()
        })
    }

    /// Cancels an entry that has not ended: a queued one is never taken,
    /// a running one's worker stops its run at its next heartbeat (the
    /// run stays resumable). Returns the status it had.
    pub fn cancel_entry(&self, id: i64, reason: &str) -> Result<Option<EntryStatus>> {
        self.transaction(|tx| {
            let Some(row) = tx.query_opt("SELECT status FROM queue_entry WHERE id = ?1", vals![id])?
            else {
                return Ok(None);
            };
            let was = EntryStatus::parse(&row.text(0)?)?;
            if matches!(was, EntryStatus::Queued | EntryStatus::Running) {
                tx.exec(
                    "UPDATE queue_entry SET status = 'cancelled', reasons = reasons || ?2 WHERE id = ?1",
                    vals![id, format!("{reason}\n")],
                )?;
            }
            Ok(Some(was))
        })
    }

    /// Takes the next entry: the queued one of highest priority (oldest
    /// first), or a running one whose lease expired (its holder died).
    /// The entry is held for `lease_s` seconds, renewed by [`Store::renew_lease`].
    /// Leases no host: see [`Store::claim_entry_with`].
    pub fn claim_entry(&self, me: &WorkerId, lease_s: f64) -> Result<Option<Claim>> {
        self.claim_entry_with(me, lease_s, &mut |_| Pick::Take(Vec::new()))
    }

    /// [`Store::claim_entry`], asking `pick` about each candidate in
    /// turn (taken-over runs first, so that a dead run's hosts are
    /// restored before another entry may use them; then by priority,
    /// oldest first): an entry it skips, or one whose hosts another
    /// attempt's unexpired lease holds, is passed over with the reason
    /// stored for `benchlab queue`; the first it takes is claimed with
    /// its hosts leased, all in one transaction.
    pub fn claim_entry_with(
        &self,
        me: &WorkerId,
        lease_s: f64,
        pick: &mut dyn FnMut(&QueueEntry) -> Pick,
    ) -> Result<Option<Claim>> {
        self.claim_transaction(|tx| {
            end_lapsed_by_hand(tx, None)?;
            let d = tx.dialect();
            let now_expr = now_sql(d);
            let due = format!(
                "((status = 'queued' AND (not_before IS NULL OR not_before <= {now_expr}))
                  OR (status = 'running' AND by_hand = 0 AND lease_until < {now_expr}))"
            );
            // SKIP LOCKED: an entry another worker is claiming right now is
            // passed over, not waited for. SQLite holds the write lock for
            // the whole transaction (BEGIN IMMEDIATE), so there is nothing to
            // skip.
            let lock = match d {
                Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
                Dialect::Sqlite => "",
            };
            let candidates: Vec<i64> = tx
                .query(
                    &format!(
                        "SELECT id FROM queue_entry WHERE {due}
                         ORDER BY CASE status WHEN 'running' THEN 0 ELSE 1 END, priority DESC, id"
                    ),
                    &[],
                )?
                .iter()
                .map(|r| r.int(0))
                .collect::<Result<_>>()?;
            for id in candidates {
                let Some(row) = tx.query_opt(
                    &format!(
                        "SELECT id, status, worker, worker_host, worker_pid, run_floor, run_id, attempts
                         FROM queue_entry WHERE id = ?1 AND {due}{lock}"
                    ),
                    vals![id],
                )?
                else {
                    continue;
                };
                let now = now(tx)?;
                let entry = entry_row(
                    &tx.query_one(&format!("{ENTRY_SELECT} WHERE id = ?1"), vals![id])?,
                    now,
                )?;
                let hosts = match pick(&entry) {
                    Pick::Skip(reason) => {
                        note_wait(tx, id, me.name, &reason)?;
                        continue;
                    }
                    Pick::Take(hosts) => hosts,
                };
                let attempt = row.int(7)? + 1;
                if let Some(busy) = lease_hosts(tx, &hosts, id, attempt, me.name, lease_s)? {
                    note_wait(tx, id, me.name, &busy.wait_reason())?;
                    continue;
                }
                return claim_row(tx, me, lease_s, &row, &hosts).map(Some);
            }
            Ok(None)
        })
    }

    /// A plain `benchlab run`'s hold on its hosts (docs/lab.md): an entry
    /// of the queue made and claimed by the run's own process in one
    /// transaction, with `hosts` leased as a worker's claim leases them,
    /// all or none. `Err(busy)` names the run that holds one of them, and
    /// nothing is stored. The hold is renewed and ended as a worker's
    /// claim is ([`Store::renew_lease`], [`Store::end_attempt`]); no worker
    /// takes it over when its lease runs out.
    pub fn claim_by_hand(
        &self,
        e: &NewEntry,
        me: &WorkerId,
        hosts: &[String],
        lease_s: f64,
    ) -> Result<std::result::Result<Claim, Busy>> {
        self.claim_transaction(|tx| {
            end_lapsed_by_hand(tx, None)?;
            let id = insert_entry(tx, e, true)?;
            if let Some(busy) = lease_hosts(tx, hosts, id, 1, me.name, lease_s)? {
                tx.exec("DELETE FROM queue_entry WHERE id = ?1", vals![id])?;
                return Ok(Err(busy));
            }
            let row = tx.query_one(
                "SELECT id, status, worker, worker_host, worker_pid, run_floor, run_id, attempts
                 FROM queue_entry WHERE id = ?1",
                vals![id],
            )?;
            claim_row(tx, me, lease_s, &row, hosts).map(Ok)
        })
    }

    /// Ends plain run `id`'s hold on its hosts when its process is known
    /// to be gone (it died on this machine before its lease ran out).
    pub fn end_gone_by_hand(&self, id: i64) -> Result<()> {
        self.claim_transaction(|tx| end_lapsed_by_hand(tx, Some(id)))
    }

    /// Why workers passed queued entries over, by entry then worker.
    pub fn queue_waits(&self) -> Result<Vec<Wait>> {
        self.with(|c| {
            let now = now(c)?;
            c.query(
                "SELECT w.entry_id, w.worker, w.reason, w.at_s FROM queue_wait w
                 JOIN queue_entry e ON e.id = w.entry_id AND e.status = 'queued'
                 ORDER BY w.entry_id, w.worker",
                &[],
            )?
            .iter()
            .map(|r| {
                Ok(Wait {
                    entry_id: r.int(0)?,
                    worker: r.text(1)?,
                    reason: r.text(2)?,
                    age_s: now - r.real(3)?,
                })
            })
            .collect()
        })
    }

    /// Every worker the store has heard of, by name.
    pub fn queue_workers(&self) -> Result<Vec<WorkerSeen>> {
        self.with(|c| {
            let now = now(c)?;
            c.query(
                "SELECT worker, max(t), sum(claim) FROM (
                     SELECT worker, to_s AS t, 1 AS claim FROM queue_claim
                     UNION ALL SELECT worker, at_s AS t, 0 AS claim FROM queue_wait
                 ) AS heard GROUP BY worker ORDER BY worker",
                &[],
            )?
            .iter()
            .map(|r| {
                Ok(WorkerSeen {
                    worker: r.text(0)?,
                    last_heard_s: now - r.real(1)?,
                    claims: r.int(2)?,
                })
            })
            .collect()
        })
    }

    /// Every holding of a host, by host then time.
    pub fn host_holds(&self) -> Result<Vec<HostHold>> {
        self.query(
            "SELECT host, entry_id, attempt, worker, from_s, to_s FROM host_hold ORDER BY host, from_s",
            &[],
        )?
        .iter()
        .map(|r| {
            Ok(HostHold {
                host: r.text(0)?,
                entry_id: r.int(1)?,
                attempt: r.int(2)?,
                worker: r.text(3)?,
                from_s: r.real(4)?,
                to_s: r.real(5)?,
            })
        })
        .collect()
    }
}

/// Stores a new queued entry (`by_hand`: a plain run's, which it claims
/// at once); returns its id.
fn insert_entry(c: &mut dyn Exec, e: &NewEntry, by_hand: bool) -> Result<i64> {
    c.query_one(
        "INSERT INTO queue_entry (study_name, study_file, study_text, lab_file, lab_text, every_s,
                                  priority, status, submitted_at, by_hand)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8, ?9) RETURNING id",
        vals![
            e.study_name,
            e.study_file,
            e.study_text,
            e.lab.map(|l| l.0),
            e.lab.map(|l| l.1),
            e.every_s,
            e.priority,
            e.submitted_at,
            i64::from(by_hand)
        ],
    )?
    .int(0)
}

/// Records why worker `worker` passed entry `id` over (its last reason).
fn note_wait(tx: &mut dyn Exec, id: i64, worker: &str, reason: &str) -> Result<()> {
    let now_expr = now_sql(tx.dialect());
    tx.exec(
        &format!(
            "INSERT INTO queue_wait (entry_id, worker, reason, at_s) VALUES (?1, ?2, ?3, {now_expr})
             ON CONFLICT (entry_id, worker) DO UPDATE SET reason = excluded.reason, at_s = excluded.at_s"
        ),
        vals![id, worker, reason],
    )?;
    Ok(())
}

/// Leases `hosts` to entry `id`'s `attempt`, all or none: `Some(busy)`
/// when one is held by another attempt whose lease has not expired. The
/// upsert takes a host only where its lease ran out, on the row as the
/// database has it when the statement runs (a concurrent claim of the
/// same host waits for this one's commit, then finds it held).
fn lease_hosts(
    tx: &mut dyn Exec,
    hosts: &[String],
    id: i64,
    attempt: i64,
    worker: &str,
    lease_s: f64,
) -> Result<Option<Busy>> {
    if hosts.is_empty() {
        return Ok(None);
    }
    let now_expr = now_sql(tx.dialect());
    tx.exec("SAVEPOINT lease_hosts", &[])?;
    for host in hosts {
        let n = tx.exec(
            &format!(
                "INSERT INTO host_lease (host, entry_id, attempt, worker, lease_until)
                 VALUES (?1, ?2, ?3, ?4, {now_expr} + ?5)
                 ON CONFLICT (host) DO UPDATE SET entry_id = excluded.entry_id,
                    attempt = excluded.attempt, worker = excluded.worker,
                    lease_until = excluded.lease_until
                 WHERE host_lease.lease_until < {now_expr}"
            ),
            vals![host, id, attempt, worker, lease_s],
        )?;
        if n == 0 {
            tx.exec("ROLLBACK TO SAVEPOINT lease_hosts", &[])?;
            tx.exec("RELEASE SAVEPOINT lease_hosts", &[])?;
            let r = tx.query_one(
                &format!(
                    "SELECT l.entry_id, coalesce(e.study_name, '?'), l.worker, coalesce(e.by_hand, 0),
                            l.lease_until - {now_expr}, e.worker_host, e.worker_pid
                     FROM host_lease l LEFT JOIN queue_entry e ON e.id = l.entry_id WHERE l.host = ?1"
                ),
                vals![host],
            )?;
            return Ok(Some(Busy {
                host: host.clone(),
                entry_id: r.int(0)?,
                study: r.text(1)?,
                worker: r.text(2)?,
                by_hand: r.int(3)? != 0,
                lease_left_s: r.real(4)?,
                holder: r.opt_text(5)?.zip(r.opt_int(6)?),
            }));
        }
        tx.exec(
            &format!(
                "INSERT INTO host_hold (host, entry_id, attempt, worker, from_s, to_s)
                 VALUES (?1, ?2, ?3, ?4, {now_expr}, {now_expr})"
            ),
            vals![host, id, attempt, worker],
        )?;
    }
    tx.exec("RELEASE SAVEPOINT lease_hosts", &[])?;
    Ok(None)
}

/// Marks entry row `row` (as the claim selected it) running under
/// worker `me`: the claim of [`Store::claim_entry_with`] once its hosts
/// are leased.
fn claim_row(
    tx: &mut dyn Exec,
    me: &WorkerId,
    lease_s: f64,
    row: &Row,
    hosts: &[String],
) -> Result<Claim> {
    let now_expr = now_sql(tx.dialect());
    let id = row.int(0)?;
    let took_over = row.text(1)? == "running";
    let earlier_holder = row.opt_text(2)?;
    let mut earlier_run = row.opt_int(6)?;
    if earlier_run.is_none() {
        if let (Some(host), Some(pid), Some(floor)) =
            (row.opt_text(3)?, row.opt_int(4)?, row.opt_int(5)?)
        {
            earlier_run = run_of_holder(tx, &host, pid, floor)?;
        }
    }
    let attempt = row.int(7)? + 1;
    let floor = tx
        .query_one("SELECT coalesce(max(id), 0) FROM run", &[])?
        .int(0)?;
    if took_over {
        let prev = attempt - 1;
        tx.exec(
            "UPDATE queue_claim SET outcome = 'lease expired' WHERE entry_id = ?1 AND attempt = ?2",
            vals![id, prev],
        )?;
        tx.exec(
            "UPDATE queue_entry SET reasons = reasons || ?2 WHERE id = ?1",
            vals![
                id,
                format!(
                    "attempt {prev}: the lease of worker {} expired (no heartbeat)\n",
                    earlier_holder.as_deref().unwrap_or("?")
                )
            ],
        )?;
    }
    tx.exec(
                &format!(
                    "UPDATE queue_entry SET status = 'running', worker = ?2, worker_host = ?3, worker_pid = ?4,
                        run_floor = ?5, run_id = ?6, attempts = ?7, lease_until = {now_expr} + ?8,
                        heartbeat_at = NULL
                     WHERE id = ?1"
                ),
                vals![id, me.name, me.host, me.pid, floor, earlier_run, attempt, lease_s],
            )?;
    tx.exec(
        &format!(
            "INSERT INTO queue_claim (entry_id, attempt, worker, from_s, to_s)
                     VALUES (?1, ?2, ?3, {now_expr}, {now_expr})"
        ),
        vals![id, attempt, me.name],
    )?;
    tx.exec("DELETE FROM queue_wait WHERE entry_id = ?1", vals![id])?;
    let now = now(tx)?;
    let entry = entry_row(
        &tx.query_one(&format!("{ENTRY_SELECT} WHERE id = ?1"), vals![id])?,
        now,
    )?;
    Ok(Claim {
        entry,
        attempt,
        earlier_run,
        took_over_from: took_over.then(|| earlier_holder.unwrap_or_default()),
        hosts: hosts.to_vec(),
    })
}

/// Ends the holds of plain `benchlab run`s whose process stopped
/// renewing their lease (killed, or its machine gone), or of the one
/// whose process is known to be gone (`gone`: its entry): no worker
/// takes such a run over, so it is marked failed here, its hosts freed,
/// and the reason says how to continue it.
fn end_lapsed_by_hand(tx: &mut dyn Exec, gone: Option<i64>) -> Result<()> {
    let now_expr = now_sql(tx.dialect());
    let which = match gone {
        Some(id) => format!("id = {id}"),
        None => format!("lease_until < {now_expr}"),
    };
    let lapsed =
        format!("SELECT id FROM queue_entry WHERE by_hand = 1 AND status = 'running' AND {which}");
    tx.exec(
        &format!(
            "UPDATE queue_claim SET outcome = 'lease expired'
             WHERE outcome IS NULL AND entry_id IN ({lapsed})"
        ),
        &[],
    )?;
    tx.exec(
        &format!("DELETE FROM host_lease WHERE entry_id IN ({lapsed})"),
        &[],
    )?;
    tx.exec(
        &format!(
            "UPDATE queue_entry SET status = 'failed', lease_until = NULL,
                reasons = reasons || 'attempt ' || attempts || ': ' || ?1
             WHERE id IN ({lapsed})"
        ),
        vals!["its `benchlab run` stopped renewing the lease (killed, or its machine stopped); `benchlab run --resume RUN` continues the run\n"],
    )?;
    Ok(())
}

/// Frees the hosts attempt `attempt` of entry `id` leased (those still
/// its) and ends their holdings now.
fn release(tx: &mut dyn Exec, id: i64, attempt: i64) -> Result<()> {
    let now_expr = now_sql(tx.dialect());
    tx.exec(
        "DELETE FROM host_lease WHERE entry_id = ?1 AND attempt = ?2",
        vals![id, attempt],
    )?;
    tx.exec(
        &format!("UPDATE host_hold SET to_s = {now_expr} WHERE entry_id = ?1 AND attempt = ?2"),
        vals![id, attempt],
    )?;
    Ok(())
}

impl Store {
    /// Frees the hosts an attempt leased, once its run has stopped: for a
    /// worker whose entry was taken from it (cancelled, or its lease
    /// lost), whose holdings then end when its run really stopped.
    pub fn release_hosts(&self, id: i64, attempt: i64) -> Result<()> {
        self.transaction(|tx| release(tx, id, attempt))
    }

    /// Renews a held lease for `lease_s` more seconds and records the run
    /// it is making. `false`: the entry is no longer this attempt's
    /// (cancelled, or taken over after the lease expired): stop.
    pub fn renew_lease(
        &self,
        id: i64,
        attempt: i64,
        lease_s: f64,
        heartbeat_at: &str,
    ) -> Result<bool> {
        self.transaction(|tx| {
            let now_expr = now_sql(tx.dialect());
            let n = tx.exec(
                &format!(
                    "UPDATE queue_entry SET lease_until = {now_expr} + ?3, heartbeat_at = ?4
                     WHERE id = ?1 AND attempts = ?2 AND status = 'running'"
                ),
                vals![id, attempt, lease_s, heartbeat_at],
            )?;
            if n == 0 {
                return Ok(false);
            }
            // Its hosts' leases with it: one another claim took after they
            // ran out (a heartbeat late by a whole lease) is lost, and so
            // is the entry.
            let renewed = tx.exec(
                &format!(
                    "UPDATE host_lease SET lease_until = {now_expr} + ?3 WHERE entry_id = ?1 AND attempt = ?2"
                ),
                vals![id, attempt, lease_s],
            )?;
            let held = tx
                .query_one(
                    "SELECT count(*) FROM host_hold WHERE entry_id = ?1 AND attempt = ?2",
                    vals![id, attempt],
                )?
                .int(0)?;
            if renewed as i64 != held {
                return Ok(false);
            }
            tx.exec(
                &format!(
                    "UPDATE host_hold SET to_s = {now_expr} WHERE entry_id = ?1 AND attempt = ?2"
                ),
                vals![id, attempt],
            )?;
            let row = tx.query_one(
                "SELECT worker_host, worker_pid, run_floor, run_id FROM queue_entry WHERE id = ?1",
                vals![id],
            )?;
            if row.opt_int(3)?.is_none() {
                let run = run_of_holder(tx, &row.text(0)?, row.int(1)?, row.int(2)?)?;
                tx.exec(
                    "UPDATE queue_entry SET run_id = ?2 WHERE id = ?1",
                    vals![id, run],
                )?;
            }
            tx.exec(
                &format!(
                    "UPDATE queue_claim SET to_s = {now_expr} WHERE entry_id = ?1 AND attempt = ?2"
                ),
                vals![id, attempt],
            )?;
            Ok(true)
        })
    }

    /// Ends a held attempt: `status` finished, failed or parked, or
    /// queued again (to be tried again). `reason` is added to the entry's
    /// reasons unless empty. `false`: the entry was no longer this
    /// attempt's, and nothing changed.
    pub fn end_attempt(
        &self,
        id: i64,
        attempt: i64,
        status: EntryStatus,
        run_id: Option<i64>,
        reason: &str,
    ) -> Result<bool> {
        self.transaction(|tx| {
            let now_expr = now_sql(tx.dialect());
            let line = if reason.is_empty() {
                String::new()
            } else {
                format!("attempt {attempt}: {reason}\n")
            };
            let n = tx.exec(
                "UPDATE queue_entry SET status = ?3, run_id = coalesce(?4, run_id), lease_until = NULL,
                    reasons = reasons || ?5
                 WHERE id = ?1 AND attempts = ?2 AND status = 'running'",
                vals![id, attempt, status.as_str(), run_id, line],
            )?;
            let outcome = if reason.is_empty() {
                status.as_str().to_string()
            } else {
                format!("{}: {reason}", status.as_str())
            };
            tx.exec(
                &format!(
                    "UPDATE queue_claim SET to_s = {now_expr}, outcome = coalesce(outcome, ?3)
                     WHERE entry_id = ?1 AND attempt = ?2"
                ),
                vals![id, attempt, outcome],
            )?;
            // Its hosts are free again (unless another attempt took them
            // over: those rows are not this attempt's any more).
            release(tx, id, attempt)?;
            // A periodic study queues its next run, due `every_s` after
            // this attempt's claim, when this one has ended for good.
            if n > 0 && matches!(status, EntryStatus::Finished | EntryStatus::Failed) {
                tx.exec(
                    "INSERT INTO queue_entry (study_name, study_file, study_text, lab_file, lab_text, every_s,
                                              not_before, priority, status, submitted_at)
                     SELECT e.study_name, e.study_file, e.study_text, e.lab_file, e.lab_text, e.every_s,
                            c.from_s + e.every_s, e.priority, 'queued', e.submitted_at
                     FROM queue_entry e JOIN queue_claim c ON c.entry_id = e.id AND c.attempt = ?2
                     WHERE e.id = ?1 AND e.every_s IS NOT NULL",
                    vals![id, attempt],
                )?;
            }
            Ok(n > 0)
        })
    }

    /// Every holding of every entry, by entry and attempt.
    pub fn holdings(&self) -> Result<Vec<Holding>> {
        self.query(
            "SELECT entry_id, attempt, worker, from_s, to_s, outcome FROM queue_claim ORDER BY entry_id, attempt",
            &[],
        )?
        .iter()
        .map(|r| {
            Ok(Holding {
                entry_id: r.int(0)?,
                attempt: r.int(1)?,
                worker: r.text(2)?,
                from_s: r.real(3)?,
                to_s: r.real(4)?,
                outcome: r.opt_text(5)?,
            })
        })
        .collect()
    }
}
