//! The result store: the only crate that speaks SQL.
//!
//! Two backends behind one [`Store`]: SQLite (the embedded default, one
//! file, WAL mode) and PostgreSQL (a lab's shared store, which several
//! controllers write to at once). `--db postgres://…` or
//! `postgresql://…` picks PostgreSQL, anything else is a SQLite file
//! ([`Target`]). Both get the same schema from the same migrations
//! ([`sql::render`] maps the few type names that differ) and every query
//! is written once ([`sql::Exec`]).
//!
//! A run holds its study file text, its options, its configurations, every
//! host's inventory, its points, and every repetition's result — each
//! committed the moment it finishes, so an interruption loses nothing that
//! was done. Ids come from the database (SQLite's rowid, PostgreSQL's
//! identity sequences), never from the client, so concurrent writers never
//! collide. [`Store::copy_run`] moves a run between stores exactly.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use benchlab_core::plan::RunOptions;
use benchlab_core::recorder::HistogramData;
use benchlab_core::setting::{ChangeStatus, Phase};
use benchlab_core::{Params, Sample, SideResult};
use serde::{Deserialize, Serialize};

mod bisection;
mod copy;
mod decision;
#[cfg(feature = "postgres")]
mod pg;
mod queue;
mod sql;
mod stacks;
mod target;
mod upgrade;

pub use bisection::{BisectionRow, BisectionRunRow, BisectionStatus};
pub use copy::Copied;
#[cfg(feature = "postgres")]
pub use pg::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_STATEMENT_TIMEOUT, MIN_SERVER_VERSION, STATEMENT_TIMEOUT_PARAM,
};
pub use queue::{
    newest_periodic, queue_schema_version, Busy, Claim, EntryStatus, Holding, HostHold, NewEntry,
    Pick, QueueEntry, Wait, WorkerId, WorkerSeen,
};
pub use stacks::{StackProfileRow, StackRecordingRow};
pub use target::{is_postgres_url, redact, Target, POSTGRES_SCHEMES};
pub use upgrade::{upgrade_command, Resolvers, UpgradeError};

use sql::{vals, Dialect, Exec, Row};

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("database: {0}")]
    Sql(#[from] rusqlite::Error),
    /// PostgreSQL failed.
    #[cfg(feature = "postgres")]
    #[error("PostgreSQL: {}", pg::error_text(.0))]
    Postgres(#[source] tokio_postgres::Error),
    /// Stored JSON did not parse.
    #[error("stored data is corrupt: {0}")]
    Json(#[from] serde_json::Error),
    /// The database is newer than this benchlab.
    #[error("the database has schema version {found}, newer than this benchlab's {known}: use a newer benchlab")]
    TooNew {
        /// The database's version.
        found: i64,
        /// The newest this binary knows.
        known: i64,
    },
    /// No such run.
    #[error("no run {0} in this database (see `benchlab list`)")]
    NoRun(i64),
    /// A reading command (or a database that cannot be written) found a
    /// schema older than this benchlab's: reading never migrates a store.
    #[error("{db} has schema version {found}, older than this benchlab's {known}: reading never changes a store; upgrade it once with `benchlab --db {db} store upgrade`")]
    TooOld {
        /// The database, its password masked.
        db: String,
        /// The database's version.
        found: i64,
        /// The newest this binary knows.
        known: i64,
    },
    /// A store of an older schema that cannot be written here.
    #[error("{db} has schema version {found}, older than this benchlab's {known}, and cannot be written here (a read-only file or file system): copy it where it can be written and upgrade the copy with `benchlab --db COPY store upgrade`")]
    CannotUpgrade {
        /// The database, its password masked.
        db: String,
        /// The database's version.
        found: i64,
        /// The newest this binary knows.
        known: i64,
    },
    /// A PostgreSQL server could not be reached or refused the connection.
    #[error("cannot connect to {db}: {why}")]
    Connect {
        /// The database, its password masked.
        db: String,
        /// What the client or the server said.
        why: String,
    },
    /// The server did not answer within its bound.
    #[error("{db} did not answer {what} within {bound_s} s: the server is not responding (the URL's `statement_timeout`, in seconds, sets the bound)")]
    Timeout {
        /// The database, its password masked.
        db: String,
        /// What was asked.
        what: String,
        /// The bound, in seconds.
        bound_s: f64,
    },
    /// A command that only reads found no store where it was pointed:
    /// nothing was created.
    #[error("{db}: no benchlab store here ({why}): `benchlab --db {db} store upgrade` creates it")]
    NoStore {
        /// The database, its password masked.
        db: String,
        /// What is there instead.
        why: String,
    },
    /// The PostgreSQL server is older than the store needs.
    #[error("{db} runs PostgreSQL {found} (server_version_num); the store needs {min} or newer")]
    ServerVersion {
        /// The database, its password masked.
        db: String,
        /// The server's `server_version_num`.
        found: String,
        /// The oldest accepted `server_version_num`.
        min: i64,
    },
    /// A PostgreSQL URL given to a benchlab built without the backend.
    #[error("{0} is a PostgreSQL database, but this benchlab was built without PostgreSQL (cargo feature `postgres` of benchlab-store)")]
    NoPostgres(String),
    /// A value of an unexpected type in a column.
    #[error("unexpected stored value: {0}")]
    Type(String),
    /// A run cannot be copied as it is.
    #[error("run {run}: {why}")]
    Copy {
        /// The run in the source store.
        run: i64,
        /// Why not.
        why: String,
    },
}

#[cfg(feature = "postgres")]
impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> StoreError {
        StoreError::Postgres(e)
    }
}

type Result<T> = std::result::Result<T, StoreError>;

/// How long opening a SQLite store waits for another connection's lock.
const OPEN_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl StoreError {
    /// The database's file system is full.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, StoreError::Sql(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::DiskFull)
    }

    /// SQLite found the database locked by another connection.
    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Sql(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::DatabaseBusy)
    }

    /// SQLite found the file damaged: not a database, or a malformed one.
    pub fn is_damaged_database(&self) -> bool {
        matches!(self, StoreError::Sql(rusqlite::Error::SqliteFailure(f, _))
            if matches!(f.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase))
    }
}

/// The database's schema version, refused when newer than this benchlab's.
fn check_version(conn: &rusqlite::Connection) -> Result<i64> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            found: version,
            known: SCHEMA_VERSION,
        });
    }
    Ok(version)
}

/// SQLite refused a write because the file or its file system is
/// read-only (or, for a WAL database there, could not open it at all).
fn is_read_only(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::CannotOpen))
}

/// Migrations, in order; migration `i` brings the schema to version `i+1`.
/// Written once for both backends: see [`sql::render`] for the tokens.
pub(crate) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE run (
    id               {id},
    study_name       TEXT NOT NULL,
    study_file       TEXT NOT NULL,
    study_text       TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    options_json     TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('running', 'completed', 'interrupted', 'failed')),
    started_at       TEXT NOT NULL,
    ended_at         TEXT,
    benchlab_version TEXT NOT NULL,
    controller_host  TEXT NOT NULL,
    controller_pid   {int}
);
CREATE TABLE configuration (
    run_id      {int} NOT NULL REFERENCES run(id),
    idx         {int} NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL,
    spec_json   TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
);
CREATE TABLE host (
    run_id         {int} NOT NULL REFERENCES run(id),
    name           TEXT NOT NULL,
    roles          TEXT NOT NULL,
    inventory_json TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE TABLE point (
    id            {id},
    run_id        {int} NOT NULL REFERENCES run(id),
    config_idx    {int} NOT NULL,
    workload_idx  {int} NOT NULL,
    workload_name TEXT NOT NULL,
    kind          TEXT NOT NULL,
    point_idx     {int} NOT NULL,
    label         TEXT NOT NULL,
    params_json   TEXT NOT NULL,
    UNIQUE (run_id, config_idx, workload_idx, point_idx)
);
CREATE TABLE sample (
    id           {id},
    point_id     {int} NOT NULL REFERENCES point(id),
    repetition   {int} NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'skipped')),
    reason       TEXT,
    started_at   TEXT NOT NULL,
    ended_at     TEXT NOT NULL,
    metrics_json TEXT NOT NULL,
    UNIQUE (point_id, repetition)
);
CREATE TABLE side_result (
    sample_id   {int} NOT NULL REFERENCES sample(id),
    side        TEXT NOT NULL CHECK (side IN ('client', 'server')),
    result_json TEXT NOT NULL,
    PRIMARY KEY (sample_id, side)
);
CREATE TABLE histogram (
    sample_id  {int} NOT NULL REFERENCES sample(id),
    side       TEXT NOT NULL,
    name       TEXT NOT NULL,
    unit       TEXT NOT NULL,
    count      {int} NOT NULL,
    min        {int} NOT NULL,
    max        {int} NOT NULL,
    mean       {real} NOT NULL,
    stddev     {real} NOT NULL,
    hdr_v2     {blob} NOT NULL,
    PRIMARY KEY (sample_id, side, name)
);
CREATE TABLE run_event (
    run_id  {int} NOT NULL REFERENCES run(id),
    at      TEXT NOT NULL,
    kind    TEXT NOT NULL,
    message TEXT NOT NULL
);
"#,
    r#"
-- Workloads with several targets (seed 003's two guests): each target's
-- own sides, next to the aggregate sample.
CREATE TABLE target_result (
    sample_id   {int} NOT NULL REFERENCES sample(id),
    target      TEXT NOT NULL,
    side        TEXT NOT NULL CHECK (side IN ('client', 'server')),
    result_json TEXT NOT NULL,
    PRIMARY KEY (sample_id, target, side)
);
"#,
    r#"
-- What each configuration changed on each host (profile settings, shield,
-- background load) with before and after values, when it was applied and
-- when it was reverted: the report's "settings changed" appendix.
CREATE TABLE setting_change (
    id          {id},
    run_id      {int} NOT NULL REFERENCES run(id),
    config_idx  {int} NOT NULL,
    host        TEXT NOT NULL,
    phase       TEXT NOT NULL CHECK (phase IN ('apply', 'revert')),
    setting     TEXT NOT NULL,
    before      TEXT,
    after       TEXT,
    status      TEXT NOT NULL,
    note        TEXT NOT NULL
);
CREATE INDEX setting_change_run ON setting_change(run_id);
"#,
    // The run's resolved plan (typed study, metric specs, views), so
    // that reports never parse the study text again.
    r#"
CREATE TABLE run_plan (
    run_id   {int} PRIMARY KEY REFERENCES run(id),
    version  {int} NOT NULL,
    plan     TEXT NOT NULL
);
"#,
    // Managed services as they ran: name, version, effective
    // configuration (secrets masked), placement — the appendix's source.
    r#"
CREATE TABLE service (
    id          {id},
    run_id      {int} NOT NULL REFERENCES run(id),
    config_idx  {int} NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL
);
CREATE INDEX service_run ON service(run_id);
"#,
    // Events get an id of their own: their order was SQLite's hidden
    // rowid, which PostgreSQL has no twin of. The rebuilt table numbers
    // the old events in their order.
    r#"
CREATE TABLE run_event_new (
    id      {id},
    run_id  {int} NOT NULL REFERENCES run(id),
    at      TEXT NOT NULL,
    kind    TEXT NOT NULL,
    message TEXT NOT NULL
);
INSERT INTO run_event_new (run_id, at, kind, message)
    SELECT run_id, at, kind, message FROM run_event ORDER BY {rowid};
DROP TABLE run_event;
ALTER TABLE run_event_new RENAME TO run_event;
CREATE INDEX run_event_run ON run_event(run_id);
"#,
    // What a reader needs, stored when the run is recorded (issue 24):
    // the workloads' notes on each repetition, an imported run's figures
    // as parsed tables, and how a run's reading came to be (recorded, or
    // resolved once when an older store was upgraded).
    r#"
CREATE TABLE sample_note (
    sample_id {int} NOT NULL REFERENCES sample(id),
    text      TEXT NOT NULL,
    PRIMARY KEY (sample_id, text)
);
CREATE TABLE published (
    run_id  {int} PRIMARY KEY REFERENCES run(id),
    report  TEXT NOT NULL
);
CREATE TABLE run_reading (
    run_id  {int} PRIMARY KEY REFERENCES run(id),
    version {int} NOT NULL,
    origin  TEXT NOT NULL
);
"#,
    // The system monitors of every host over every repetition: the
    // summary the report reads, and the samples themselves in their
    // compact form (see benchlab_monitor::Series) for time series.
    r#"
CREATE TABLE monitor (
    point_id     {int} NOT NULL REFERENCES point(id),
    repetition   {int} NOT NULL,
    host         TEXT NOT NULL,
    summary_json TEXT NOT NULL,
    series_json  TEXT NOT NULL,
    PRIMARY KEY (point_id, repetition, host)
);
"#,
    // `benchlab bisect`: a bisection (what was asked, how it ended) and
    // the runs of its steps, so that an interrupted one resumes without
    // repeating a finished round.
    r#"
CREATE TABLE bisection (
    id          {id},
    study_name  TEXT NOT NULL,
    spec_json   TEXT NOT NULL,
    status      TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    ended_at    TEXT,
    result_json TEXT
);
CREATE TABLE bisection_run (
    bisection_id {int} NOT NULL REFERENCES bisection(id),
    seq          {int} NOT NULL,
    step         {int} NOT NULL,
    round        {int} NOT NULL,
    bound        {int} NOT NULL,
    candidate    {int} NOT NULL,
    run_id       {int} NOT NULL REFERENCES run(id),
    PRIMARY KEY (bisection_id, seq)
);
"#,
    // Call-stack profiles (issue 40): each host's recording of a
    // repetition, and its sides' folded stacks, compressed.
    r#"
CREATE TABLE stack_recording (
    point_id     {int} NOT NULL REFERENCES point(id),
    repetition   {int} NOT NULL,
    host         TEXT NOT NULL,
    hz           {int} NOT NULL,
    unwind       TEXT NOT NULL,
    window_s     {real} NOT NULL,
    samples      {int} NOT NULL,
    busy_samples {int} NOT NULL,
    perf_cpu_s   {real} NOT NULL,
    perf_window_cpu_s {real} NOT NULL,
    script_cpu_s {real} NOT NULL,
    perf_version TEXT NOT NULL,
    reason       TEXT,
    PRIMARY KEY (point_id, repetition, host)
);
CREATE TABLE stack_profile (
    point_id    {int} NOT NULL REFERENCES point(id),
    repetition  {int} NOT NULL,
    host        TEXT NOT NULL,
    side        TEXT NOT NULL,
    recorded_on TEXT NOT NULL,
    samples     {int} NOT NULL,
    folded_z    {blob} NOT NULL,
    PRIMARY KEY (point_id, repetition, host, side)
);
"#,
    // The until-decided design (issue 36): each comparison's verdict as
    // the sequential rule left it, and what the run cost against the
    // fixed design — the report reads them, never recomputes them.
    r#"
CREATE TABLE decision (
    run_id        {int} NOT NULL REFERENCES run(id),
    config_idx    {int} NOT NULL,
    workload_idx  {int} NOT NULL,
    point_idx     {int} NOT NULL,
    metric        TEXT NOT NULL,
    verdict       TEXT NOT NULL CHECK (verdict IN ('better', 'worse', 'equivalent', 'undecided')),
    repetitions   {int} NOT NULL,
    margin_pct    {real} NOT NULL,
    advantage_pct {real},
    ci_lo_pct     {real},
    ci_hi_pct     {real},
    mde_pct       {real},
    PRIMARY KEY (run_id, config_idx, workload_idx, point_idx, metric)
);
CREATE TABLE run_design (
    run_id            {int} PRIMARY KEY REFERENCES run(id),
    comparisons       {int} NOT NULL,
    decided           {int} NOT NULL,
    rounds            {int} NOT NULL,
    repetitions       {int} NOT NULL,
    elapsed_s         {real} NOT NULL,
    fixed_repetitions {int} NOT NULL,
    fixed_s           {real} NOT NULL,
    stop              TEXT NOT NULL
);
"#,
    // The lab's queue (docs/lab.md): studies waiting for a worker, the
    // worker holding each under a lease (database clock, seconds since the
    // epoch), and every holding from claim to end, so that one entry is
    // never run by two workers at once can be checked afterwards.
    r#"
CREATE TABLE queue_entry (
    id           {id},
    study_name   TEXT NOT NULL,
    study_file   TEXT NOT NULL,
    study_text   TEXT NOT NULL,
    lab_file     TEXT,
    lab_text     TEXT,
    every_s      {int},
    not_before   {real},
    priority     {int} NOT NULL DEFAULT 0,
    status       TEXT NOT NULL CHECK (status IN ('queued', 'running', 'finished', 'failed', 'parked', 'cancelled')),
    submitted_at TEXT NOT NULL,
    worker       TEXT,
    worker_host  TEXT,
    worker_pid   {int},
    run_floor    {int},
    run_id       {int},
    lease_until  {real},
    heartbeat_at TEXT,
    attempts     {int} NOT NULL DEFAULT 0,
    reasons      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX queue_entry_status ON queue_entry(status, priority);
CREATE TABLE queue_claim (
    entry_id {int} NOT NULL REFERENCES queue_entry(id),
    attempt  {int} NOT NULL,
    worker   TEXT NOT NULL,
    from_s   {real} NOT NULL,
    to_s     {real} NOT NULL,
    outcome  TEXT,
    PRIMARY KEY (entry_id, attempt)
);
"#,
    // Hosts leased across the lab (docs/lab.md): a host is in at most one
    // run at a time, whichever worker runs it. `host_lease` is the live
    // lease (database clock, renewed with its entry's), `host_hold` every
    // holding from claim to end or last heartbeat, so that no host in two
    // runs at once can be checked afterwards; `queue_wait` says why each
    // worker passed a queued entry over (a host it cannot reach, or one
    // another run holds).
    r#"
CREATE TABLE host_lease (
    host        TEXT PRIMARY KEY,
    entry_id    {int} NOT NULL,
    attempt     {int} NOT NULL,
    worker      TEXT NOT NULL,
    lease_until {real} NOT NULL
);
CREATE TABLE host_hold (
    host     TEXT NOT NULL,
    entry_id {int} NOT NULL,
    attempt  {int} NOT NULL,
    worker   TEXT NOT NULL,
    from_s   {real} NOT NULL,
    to_s     {real} NOT NULL,
    PRIMARY KEY (host, entry_id, attempt)
);
CREATE TABLE queue_wait (
    entry_id {int} NOT NULL,
    worker   TEXT NOT NULL,
    reason   TEXT NOT NULL,
    at_s     {real} NOT NULL,
    PRIMARY KEY (entry_id, worker)
);
"#,
    // A plain `benchlab run` leases its hosts too (docs/lab.md): as an
    // entry its own process holds, by hand, which no worker takes over.
    r#"
ALTER TABLE queue_entry ADD COLUMN by_hand {int} NOT NULL DEFAULT 0;
"#,
];

/// The system monitors of one host over one repetition of a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorRow {
    /// The point.
    pub point_id: i64,
    /// The repetition, 0-based.
    pub repetition: u32,
    /// The host (the study's name).
    pub host: String,
    /// What the samples come to.
    pub summary: benchlab_monitor::Summary,
}

/// One setting a configuration changed on a host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingChangeRow {
    /// Index of the configuration in the study.
    pub config_idx: usize,
    /// The host.
    pub host: String,
    /// Applied or undone.
    pub phase: Phase,
    /// The setting.
    pub setting: String,
    /// Value before.
    pub before: Option<String>,
    /// Value after.
    pub after: Option<String>,
    /// What became of it.
    pub status: ChangeStatus,
    /// Why, or what else to know.
    pub note: String,
}

/// One entry of a run's log (started, resumed, interrupted, completed,
/// imported …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// When (RFC 3339).
    pub at: String,
    /// What happened, one word (`started`).
    pub kind: String,
    /// The details.
    pub message: String,
}

/// A managed service as it started for a configuration (each start: a
/// restart is recorded again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceRow {
    /// Index of the configuration in the study.
    pub config_idx: usize,
    /// The study's name of the service.
    pub name: String,
    /// What the service crate described when it started (version,
    /// effective configuration with secrets masked, placement …).
    pub description: serde_json::Value,
}

/// One side of one target of a repetition of a workload with several
/// targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetResult {
    /// The target (its host).
    pub target: String,
    /// Which side.
    pub side: String,
    /// What that side returned.
    pub result: SideResult,
}

/// One repetition of one point under one configuration: what a resumed
/// run skips once it is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct UnitKey {
    /// Configuration index.
    pub config: usize,
    /// Workload index.
    pub workload: usize,
    /// Point index within the workload.
    pub point: usize,
    /// Repetition, 0-based.
    pub repetition: u32,
}

/// A workload's remark on one repetition, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoteRow {
    /// The point.
    pub point_id: i64,
    /// The repetition.
    pub repetition: u32,
    /// The remark.
    pub text: String,
}

/// The version of a run's reading pieces this benchlab stores: 1, the
/// plan (version 2, with its expanded points and byte-count parameters),
/// the workloads' notes per repetition and an import's parsed figures.
pub const READING_VERSION: i64 = 1;

/// How a run's reading pieces (plan, notes, published figures) came to
/// be in the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// The version of what was stored (see the report crate's loader).
    pub version: i64,
    /// `recorded` (stored as the run was made), or what resolved them
    /// later (`resolved at upgrade by benchlab 0.1.0 …`).
    pub origin: String,
}

impl UnitKey {
    /// The key of a planned unit.
    pub fn of(plan: &benchlab_core::plan::Plan, u: &benchlab_core::plan::Unit) -> UnitKey {
        let p = &plan.points[u.point];
        UnitKey {
            config: p.config,
            workload: p.workload,
            point: p.point,
            repetition: u.repetition,
        }
    }
}

impl Reading {
    /// The reading of a run whose pieces are stored as it is recorded.
    pub fn recorded() -> Reading {
        Reading {
            version: READING_VERSION,
            origin: "recorded".into(),
        }
    }
}

/// The newest schema version this binary knows.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Status of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Running, or its controller died without a word.
    Running,
    /// Every unit ran.
    Completed,
    /// Stopped by Ctrl-C or a signal; resumable.
    Interrupted,
    /// Stopped by an error (or `on_error = "stop"`); resumable.
    Failed,
}

impl RunStatus {
    fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
        }
    }

    fn parse(s: &str) -> RunStatus {
        match s {
            "completed" => RunStatus::Completed,
            "interrupted" => RunStatus::Interrupted,
            "failed" => RunStatus::Failed,
            _ => RunStatus::Running,
        }
    }
}

/// Status of one repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleStatus {
    /// Measured.
    Ok,
    /// Failed; the reason says why.
    Failed,
    /// The host lacks what the workload needs.
    Skipped,
}

impl SampleStatus {
    fn as_str(self) -> &'static str {
        match self {
            SampleStatus::Ok => "ok",
            SampleStatus::Failed => "failed",
            SampleStatus::Skipped => "skipped",
        }
    }

    fn parse(s: &str) -> SampleStatus {
        match s {
            "ok" => SampleStatus::Ok,
            "skipped" => SampleStatus::Skipped,
            _ => SampleStatus::Failed,
        }
    }
}

/// A new run, as the runner creates it.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    /// `[study] name`.
    pub study_name: &'a str,
    /// The study file path as given.
    pub study_file: &'a str,
    /// The study file's text.
    pub study_text: &'a str,
    /// `[study] description`.
    pub description: &'a str,
    /// Run options (scale, quick).
    pub options: RunOptions,
    /// Start time, RFC 3339.
    pub started_at: &'a str,
    /// The controller's host name.
    pub controller_host: &'a str,
}

/// A stored run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    /// Run id.
    pub id: i64,
    /// Study name.
    pub study_name: String,
    /// Study file path as given.
    pub study_file: String,
    /// Study file text.
    pub study_text: String,
    /// Study description.
    pub description: String,
    /// Options the run used.
    pub options: RunOptions,
    /// Status.
    pub status: RunStatus,
    /// Start, RFC 3339.
    pub started_at: String,
    /// End, RFC 3339 (None while running).
    pub ended_at: Option<String>,
    /// benchlab version.
    pub benchlab_version: String,
    /// Controller host name.
    pub controller_host: String,
    /// Controller process id while running.
    pub controller_pid: Option<i64>,
}

/// A stored configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigRow {
    /// Index in the study.
    pub idx: usize,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Its placement and settings, as JSON.
    pub spec: serde_json::Value,
}

impl ConfigRow {
    /// Whether the configuration holds published figures (imported by
    /// `benchlab import`), not measurements.
    pub fn is_published(&self) -> bool {
        self.spec.get("published") == Some(&serde_json::Value::Bool(true))
    }
}

/// A stored host's name and roles, without its inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostName {
    /// Host name in the study.
    pub name: String,
    /// Roles it played, as stored (`sut`, `generator`).
    pub roles: String,
}

/// A stored host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostRow {
    /// Host name in the study (`local` for now).
    pub name: String,
    /// Roles it played (`sut`, `generator`).
    pub roles: String,
    /// Its inventory.
    pub inventory: serde_json::Value,
}

/// A stored point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointRow {
    /// Row id.
    pub id: i64,
    /// Configuration index.
    pub config_idx: usize,
    /// Workload index.
    pub workload_idx: usize,
    /// Workload name.
    pub workload_name: String,
    /// Workload kind.
    pub kind: String,
    /// Point index within the workload.
    pub point_idx: usize,
    /// Label of swept values.
    pub label: String,
    /// Effective parameters.
    pub params: Params,
}

/// A stored repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleRow {
    /// Row id of its point.
    pub point_id: i64,
    /// Repetition number.
    pub repetition: u32,
    /// Status.
    pub status: SampleStatus,
    /// Why it failed or was skipped.
    pub reason: Option<String>,
    /// Start, RFC 3339.
    pub started_at: String,
    /// End, RFC 3339.
    pub ended_at: String,
    /// Metrics (empty unless ok).
    pub metrics: BTreeMap<String, f64>,
}

/// Which backend a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// A SQLite file.
    Sqlite,
    /// A PostgreSQL database.
    Postgres,
}

/// An open connection of either backend.
enum Conn {
    Sqlite(rusqlite::Connection),
    // Boxed: one store per process, and the enum stays small.
    #[cfg(feature = "postgres")]
    Postgres(Box<pg::Pg>),
}

/// The store.
///
/// Every method takes `&self` or `&mut self` as it did when the store was
/// SQLite only; the connection sits in a `RefCell` because the PostgreSQL
/// client needs `&mut` for every statement. A store is used by one thread
/// at a time (it is `Send`, not `Sync`), as a SQLite connection is.
pub struct Store {
    conn: RefCell<Conn>,
    target: Target,
}

impl Store {
    /// Opens (creating if needed) and migrates a store. A path that reads
    /// `postgres://…` or `postgresql://…` is a PostgreSQL URL (see
    /// [`Store::open_target`]); anything else is a SQLite file.
    ///
    /// A SQLite database this benchlab cannot write (a read-only file
    /// system or file) is opened read-only when its schema is current: it
    /// can be listed, shown and reported, and any write fails with
    /// SQLite's "readonly database" error.
    pub fn open(path: &Path) -> Result<Store> {
        Store::open_target(&Target::from_path(path))
    }

    /// Opens an existing store for reading only (every command that only
    /// reads: `list`, `show`, `report`, `compare`, `history`, `serve`):
    /// nothing is created, migrated or written, no file is left beside a
    /// SQLite store ([`sqlite_read_only`]), and a run being written by
    /// another process stays readable (WAL). A missing store, or a schema
    /// other than this binary's, is an error naming the command that
    /// makes or upgrades it. A PostgreSQL session is made read-only, so
    /// that the server itself refuses any write.
    pub fn open_read_only(path: &Path) -> Result<Store> {
        let target = Target::from_path(path);
        let conn = match &target {
            Target::Sqlite(path) => {
                if !path.exists() {
                    return Err(no_store(&target, "the file does not exist"));
                }
                Conn::Sqlite(sqlite_read_only(path)?)
            }
            #[cfg(feature = "postgres")]
            Target::Postgres(url) => {
                let mut pg = pg::Pg::connect(url, &target.redacted())?;
                pg.read_only()?;
                if !pg.has_store()? {
                    return Err(no_store(&target, "the database has no benchlab tables"));
                }
                Conn::Postgres(Box::new(pg))
            }
            #[cfg(not(feature = "postgres"))]
            Target::Postgres(_) => return Err(StoreError::NoPostgres(target.redacted())),
        };
        let store = Store {
            conn: RefCell::new(conn),
            target,
        };
        let found = store.schema_version()?;
        if found == 0 && store.backend() == Backend::Sqlite && !store.sqlite_has_tables()? {
            return Err(no_store(&store.target, "the file holds no benchlab tables"));
        }
        if found > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                found,
                known: SCHEMA_VERSION,
            });
        }
        if found < SCHEMA_VERSION {
            return Err(StoreError::TooOld {
                db: store.target.redacted(),
                found,
                known: SCHEMA_VERSION,
            });
        }
        Ok(store)
    }

    /// Opens a store that must already exist, for a command that reads
    /// (`show`, `report`, `compare`, `copy --from`): a missing SQLite file
    /// or a database without benchlab's tables is [`StoreError::NoStore`]
    /// and nothing is created, so that a mistyped `--db` is an error and
    /// not a new empty store. An existing store of an older schema is
    /// migrated as [`Store::open_target`] would.
    pub fn open_existing(target: &Target) -> Result<Store> {
        match target {
            Target::Sqlite(path) => {
                if !path.exists() {
                    return Err(no_store(target, "the file does not exist"));
                }
                let probe = sqlite_read_only(path)?;
                let version: i64 = probe.query_row("PRAGMA user_version", [], |r| r.get(0))?;
                let tables: i64 = probe.query_row(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                    [],
                    |r| r.get(0),
                )?;
                drop(probe);
                if version == 0 && tables == 0 {
                    return Err(no_store(target, "the file holds no benchlab tables"));
                }
                Store::open_target(target)
            }
            #[cfg(feature = "postgres")]
            Target::Postgres(url) => {
                let mut pg = pg::Pg::connect(url, &target.redacted())?;
                if !pg.has_store()? {
                    return Err(no_store(target, "the database has no benchlab tables"));
                }
                pg.migrate(MIGRATIONS.len())?;
                Ok(Store {
                    conn: RefCell::new(Conn::Postgres(Box::new(pg))),
                    target: target.clone(),
                })
            }
            #[cfg(not(feature = "postgres"))]
            Target::Postgres(_) => Err(StoreError::NoPostgres(target.redacted())),
        }
    }

    /// A SQLite store that holds at least one table.
    fn sqlite_has_tables(&self) -> Result<bool> {
        let n = self.with(|c| {
            c.query_one(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                &[],
            )?
            .int(0)
        })?;
        Ok(n > 0)
    }

    /// Opens a `--db` value: a PostgreSQL URL or a SQLite path.
    pub fn open_db(db: &str) -> Result<Store> {
        Store::open_target(&Target::parse(db))
    }

    /// Opens (creating a SQLite file if needed) and migrates a store. A
    /// PostgreSQL database must exist; an unreachable server, a refused
    /// login or a server older than [`MIN_SERVER_VERSION`] is an error
    /// before anything is written.
    pub fn open_target(target: &Target) -> Result<Store> {
        Store::open_at(target, MIGRATIONS.len())
    }

    /// Opens a store migrated only up to `version` (tests of migrations).
    fn open_at(target: &Target, version: usize) -> Result<Store> {
        let conn = match target {
            Target::Sqlite(path) => {
                // SQLite answers some lock conflicts with SQLITE_BUSY at
                // once, without its busy handler: switching a new file to
                // WAL while another connection does the same is one (a
                // fresh CI run of the fault suite's two controllers
                // creating one database failed "database is locked" so).
                // Every step below is idempotent or transactional, so the
                // whole open is tried again, within the same 10 s bound.
                let deadline = std::time::Instant::now() + OPEN_BUSY_WAIT;
                loop {
                    match Store::open_sqlite(path, version) {
                        Err(e) if e.is_busy() && std::time::Instant::now() < deadline => {
                            std::thread::sleep(std::time::Duration::from_millis(20));
                        }
                        r => break r?,
                    }
                }
            }
            #[cfg(feature = "postgres")]
            Target::Postgres(url) => {
                let mut pg = pg::Pg::connect(url, &target.redacted())?;
                pg.migrate(version)?;
                Conn::Postgres(Box::new(pg))
            }
            #[cfg(not(feature = "postgres"))]
            Target::Postgres(_) => return Err(StoreError::NoPostgres(target.redacted())),
        };
        Ok(Store {
            conn: RefCell::new(conn),
            target: target.clone(),
        })
    }

    /// One try at opening and migrating a SQLite store; a read-only file
    /// gives a read-only store.
    fn open_sqlite(path: &Path, version: usize) -> Result<Conn> {
        let mut conn = rusqlite::Connection::open(path)?;
        conn.busy_timeout(OPEN_BUSY_WAIT)?;
        // The version first: a newer database is refused before
        // anything (not even the journal mode, which rewrites the
        // header) changes.
        match check_version(&conn) {
            // A WAL database on a read-only file system cannot even
            // be read this way (SQLite cannot make its `-shm` file).
            Err(StoreError::Sql(e)) if path.exists() && is_read_only(&e) => {
                return sqlite_cannot_write(path)
            }
            r => r?,
        };
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(e) if is_read_only(&e) => return sqlite_cannot_write(path),
            r => r?,
        }
        // FULL: a committed sample survives a power cut, not just a crash.
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        migrate_sqlite(&mut conn, version)?;
        Ok(Conn::Sqlite(conn))
    }

    /// Where this store is (print it: its password is masked).
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Which backend this store runs on.
    pub fn backend(&self) -> Backend {
        match &*self.conn.borrow() {
            Conn::Sqlite(_) => Backend::Sqlite,
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => Backend::Postgres,
        }
    }

    /// Runs `f` on the connection.
    fn with<T>(&self, f: impl FnOnce(&mut dyn Exec) -> Result<T>) -> Result<T> {
        match &mut *self.conn.borrow_mut() {
            Conn::Sqlite(c) => f(c),
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => f(c.as_mut()),
        }
    }

    /// Runs `f` in a transaction, committed when `f` returns `Ok` and
    /// rolled back otherwise.
    fn transaction<T>(&self, f: impl FnOnce(&mut dyn Exec) -> Result<T>) -> Result<T> {
        match &mut *self.conn.borrow_mut() {
            Conn::Sqlite(c) => {
                let mut tx = c.transaction()?;
                let out = f(&mut tx)?;
                tx.commit()?;
                Ok(out)
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.transaction(f),
        }
    }

    /// [`Store::transaction`] that takes the write lock at its start
    /// (SQLite's `BEGIN IMMEDIATE`): a claim reads and then writes, and
    /// two SQLite claims must not both read before either writes.
    /// PostgreSQL's claim locks its row itself (`FOR UPDATE`).
    fn claim_transaction<T>(&self, f: impl FnOnce(&mut dyn Exec) -> Result<T>) -> Result<T> {
        match &mut *self.conn.borrow_mut() {
            Conn::Sqlite(c) => {
                let mut tx =
                    c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                let out = f(&mut tx)?;
                tx.commit()?;
                Ok(out)
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.transaction(f),
        }
    }

    fn exec(&self, sql: &str, params: &[sql::Val]) -> Result<u64> {
        self.with(|c| c.exec(sql, params))
    }

    fn query(&self, sql: &str, params: &[sql::Val]) -> Result<Vec<Row>> {
        self.with(|c| c.query(sql, params))
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64> {
        match &mut *self.conn.borrow_mut() {
            Conn::Sqlite(c) => Ok(c.query_row("PRAGMA user_version", [], |r| r.get(0))?),
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => c.schema_version(),
        }
    }

    /// `"ok"` when the database is sound: SQLite's `PRAGMA
    /// integrity_check`. A PostgreSQL server checks its own pages and
    /// enforces every constraint on each write; there the check is that
    /// every run's rows hang together (no point, sample or result without
    /// its parent), which the foreign keys guarantee unless someone
    /// dropped them.
    pub fn integrity_check(&self) -> Result<String> {
        match &mut *self.conn.borrow_mut() {
            Conn::Sqlite(c) => Ok(c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?),
            #[cfg(feature = "postgres")]
            Conn::Postgres(c) => {
                let orphans = c
                    .query_one(
                        "SELECT (SELECT count(*) FROM point p WHERE NOT EXISTS (SELECT 1 FROM run r WHERE r.id = p.run_id))
                              + (SELECT count(*) FROM sample s WHERE NOT EXISTS (SELECT 1 FROM point p WHERE p.id = s.point_id))
                              + (SELECT count(*) FROM side_result x WHERE NOT EXISTS (SELECT 1 FROM sample s WHERE s.id = x.sample_id))
                              + (SELECT count(*) FROM histogram h WHERE NOT EXISTS (SELECT 1 FROM sample s WHERE s.id = h.sample_id))",
                        &[],
                    )?
                    .int(0)?;
                Ok(if orphans == 0 {
                    "ok".to_string()
                } else {
                    format!("{orphans} rows without their parent")
                })
            }
        }
    }

    /// Creates a run in state `running`; returns its id.
    pub fn create_run(&self, run: &NewRun) -> Result<i64> {
        self.query(
            "INSERT INTO run (study_name, study_file, study_text, description, options_json, status,
                              started_at, benchlab_version, controller_host, controller_pid)
             VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?7, ?8, ?9) RETURNING id",
            vals![
                run.study_name,
                run.study_file,
                run.study_text,
                run.description,
                serde_json::to_string(&run.options)?,
                run.started_at,
                benchlab_core::VERSION,
                run.controller_host,
                std::process::id() as i64,
            ],
        )?
        .first()
        .ok_or_else(|| StoreError::Type("INSERT … RETURNING id returned no row".into()))?
        .int(0)
    }

    /// Records a configuration of a run (idempotent).
    pub fn add_configuration(&self, run_id: i64, c: &ConfigRow) -> Result<()> {
        self.exec(
            "INSERT INTO configuration (run_id, idx, name, description, spec_json)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (run_id, idx) DO UPDATE SET name = excluded.name,
                 description = excluded.description, spec_json = excluded.spec_json",
            vals![
                run_id,
                c.idx,
                c.name.as_str(),
                c.description.as_str(),
                c.spec.to_string()
            ],
        )?;
        Ok(())
    }

    /// Records (or replaces) a host's inventory.
    pub fn add_host(&self, run_id: i64, h: &HostRow) -> Result<()> {
        self.exec(
            "INSERT INTO host (run_id, name, roles, inventory_json) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (run_id, name) DO UPDATE SET roles = excluded.roles,
                 inventory_json = excluded.inventory_json",
            vals![
                run_id,
                h.name.as_str(),
                h.roles.as_str(),
                h.inventory.to_string()
            ],
        )?;
        Ok(())
    }

    /// Returns the id of a point, creating it the first time.
    pub fn ensure_point(&self, run_id: i64, p: &PointRow) -> Result<i64> {
        self.with(|c| {
            c.exec(
                "INSERT INTO point (run_id, config_idx, workload_idx, workload_name, kind,
                                    point_idx, label, params_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING",
                vals![
                    run_id,
                    p.config_idx,
                    p.workload_idx,
                    p.workload_name.as_str(),
                    p.kind.as_str(),
                    p.point_idx,
                    p.label.as_str(),
                    p.params.canonical()
                ],
            )?;
            c.query_one(
                "SELECT id FROM point WHERE run_id = ?1 AND config_idx = ?2 AND workload_idx = ?3 AND point_idx = ?4",
                vals![run_id, p.config_idx, p.workload_idx, p.point_idx],
            )?
            .int(0)
        })
    }

    /// Records one repetition and commits it at once. A repetition is
    /// stored at most once: recording it again is an error.
    #[allow(clippy::too_many_arguments)]
    pub fn record_sample(
        &mut self,
        point_id: i64,
        repetition: u32,
        status: SampleStatus,
        reason: Option<&str>,
        started_at: &str,
        ended_at: &str,
        sample: Option<&Sample>,
    ) -> Result<()> {
        let metrics = sample.map(|s| s.metrics.clone()).unwrap_or_default();
        self.transaction(|tx| {
            let sample_id = tx
                .query_one(
                    "INSERT INTO sample (point_id, repetition, status, reason, started_at, ended_at, metrics_json)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
                    vals![
                        point_id,
                        repetition,
                        status.as_str(),
                        reason,
                        started_at,
                        ended_at,
                        serde_json::to_string(&metrics)?
                    ],
                )?
                .int(0)?;
            if let Some(s) = sample.filter(|s| !s.targets.is_empty()) {
                for (target, t) in &s.targets {
                    let sides = [("client", Some(&t.client)), ("server", t.server.as_ref())];
                    for (side, result) in sides {
                        let Some(result) = result else { continue };
                        tx.exec(
                            "INSERT INTO target_result (sample_id, target, side, result_json) VALUES (?1, ?2, ?3, ?4)",
                            vals![sample_id, target, side, serde_json::to_string(result)?],
                        )?;
                    }
                }
            }
            if let Some(s) = sample.filter(|s| s.targets.is_empty()) {
                let sides = [("client", Some(&s.client)), ("server", s.server.as_ref())];
                for (side, result) in sides {
                    let Some(result) = result else { continue };
                    // Histograms go to their own table as binary HDR; the JSON
                    // keeps everything else.
                    let mut rest = result.clone();
                    let hists = std::mem::take(&mut rest.histograms);
                    tx.exec(
                        "INSERT INTO side_result (sample_id, side, result_json) VALUES (?1, ?2, ?3)",
                        vals![sample_id, side, serde_json::to_string(&rest)?],
                    )?;
                    for (name, h) in hists {
                        let blob = base64::engine::general_purpose::STANDARD
                            .decode(&h.hdr_v2_base64)
                            .unwrap_or_default();
                        tx.exec(
                            "INSERT INTO histogram (sample_id, side, name, unit, count, min, max, mean, stddev, hdr_v2)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                            vals![sample_id, side, name, h.unit, h.count, h.min, h.max, h.mean, h.stddev, blob],
                        )?;
                    }
                }
            }
            Ok(())
        })
    }

    /// Sets a run's status (and its end time, unless running), and clears
    /// or sets the controller pid.
    pub fn set_run_status(&self, run_id: i64, status: RunStatus, at: &str) -> Result<()> {
        let ended = (status != RunStatus::Running).then_some(at);
        let pid = (status == RunStatus::Running).then_some(std::process::id() as i64);
        self.exec(
            "UPDATE run SET status = ?2, ended_at = ?3, controller_pid = ?4 WHERE id = ?1",
            vals![run_id, status.as_str(), ended, pid],
        )?;
        Ok(())
    }

    /// Appends an event (started, interrupted, resumed …) to a run's log.
    pub fn add_event(&self, run_id: i64, at: &str, kind: &str, message: &str) -> Result<()> {
        self.with(|c| insert_event(c, run_id, at, kind, message))
    }

    /// Stores a run's resolved plan (JSON, with its version); a plan is
    /// written once and kept.
    pub fn set_plan(&self, run_id: i64, version: u32, plan: &str) -> Result<()> {
        self.with(|c| insert_plan(c, run_id, version, plan))
    }

    /// Records a workload's remarks on one repetition (each distinct
    /// text once).
    pub fn add_notes(&self, point_id: i64, repetition: u32, texts: &[String]) -> Result<()> {
        self.with(|c| upgrade::insert_notes(c, point_id, repetition, texts))
    }

    /// A run's notes, in point, repetition and text order.
    pub fn notes(&self, run_id: i64) -> Result<Vec<NoteRow>> {
        self.query(
            "SELECT s.point_id, s.repetition, n.text FROM sample_note n
             JOIN sample s ON s.id = n.sample_id JOIN point p ON p.id = s.point_id
             WHERE p.run_id = ?1 ORDER BY s.point_id, s.repetition, n.text",
            vals![run_id],
        )?
        .iter()
        .map(|r| {
            Ok(NoteRow {
                point_id: r.int(0)?,
                repetition: r.int(1)? as u32,
                text: r.text(2)?,
            })
        })
        .collect()
    }

    /// Stores an imported run's figures, parsed (JSON); kept once written.
    pub fn set_published(&self, run_id: i64, report: &str) -> Result<()> {
        self.with(|c| upgrade::insert_published(c, run_id, report))
    }

    /// The runs that hold published figures (imported, not measured):
    /// one query for a whole runs list.
    pub fn published_runs(&self) -> Result<std::collections::BTreeSet<i64>> {
        self.query("SELECT run_id FROM published", &[])?
            .iter()
            .map(|r| r.int(0))
            .collect()
    }

    /// An imported run's parsed figures, when stored.
    pub fn published(&self, run_id: i64) -> Result<Option<String>> {
        self.with(|c| {
            c.query_opt(
                "SELECT report FROM published WHERE run_id = ?1",
                vals![run_id],
            )?
            .map(|r| r.text(0))
            .transpose()
        })
    }

    /// Marks how a run's reading pieces came to be.
    pub fn set_reading(&self, run_id: i64, reading: &Reading) -> Result<()> {
        self.with(|c| set_reading_in(c, run_id, reading))
    }

    /// The runs whose reading pieces are missing or older than
    /// `version`, oldest first.
    fn runs_to_upgrade(&self, version: i64) -> Result<Vec<i64>> {
        self.query(
            "SELECT r.id FROM run r LEFT JOIN run_reading g ON g.run_id = r.id
             WHERE g.version IS NULL OR g.version < ?1 ORDER BY r.id",
            vals![version],
        )?
        .iter()
        .map(|r| r.int(0))
        .collect()
    }

    /// How a run's reading pieces came to be (None: stored by a benchlab
    /// before they were, and not upgraded yet).
    pub fn reading(&self, run_id: i64) -> Result<Option<Reading>> {
        self.with(|c| {
            c.query_opt(
                "SELECT version, origin FROM run_reading WHERE run_id = ?1",
                vals![run_id],
            )?
            .map(|r| {
                Ok(Reading {
                    version: r.int(0)?,
                    origin: r.text(1)?,
                })
            })
            .transpose()
        })
    }

    /// A run's stored plan, when it has one (runs made before plans were
    /// stored have none).
    pub fn plan(&self, run_id: i64) -> Result<Option<String>> {
        self.with(|c| {
            c.query_opt("SELECT plan FROM run_plan WHERE run_id = ?1", vals![run_id])?
                .map(|r| r.text(0))
                .transpose()
        })
    }

    /// Records a host's monitor samples of a repetition (again for a
    /// repetition run again: the newer samples replace the older).
    pub fn add_monitor(
        &mut self,
        point_id: i64,
        repetition: u32,
        host: &str,
        series: &benchlab_monitor::Series,
    ) -> Result<()> {
        let summary = serde_json::to_string(&series.summary())?;
        let series = serde_json::to_string(series)?;
        self.transaction(|tx| {
            tx.exec(
                "DELETE FROM monitor WHERE point_id = ?1 AND repetition = ?2 AND host = ?3",
                vals![point_id, repetition, host],
            )?;
            tx.exec(
                "INSERT INTO monitor (point_id, repetition, host, summary_json, series_json) VALUES (?1, ?2, ?3, ?4, ?5)",
                vals![point_id, repetition, host, summary, series],
            )?;
            Ok(())
        })
    }

    /// The monitor summaries of a run, by point, repetition and host.
    pub fn monitors(&self, run_id: i64) -> Result<Vec<MonitorRow>> {
        self.query(
            "SELECT m.point_id, m.repetition, m.host, m.summary_json FROM monitor m
             JOIN point p ON p.id = m.point_id WHERE p.run_id = ?1
             ORDER BY m.point_id, m.repetition, m.host",
            vals![run_id],
        )?
        .iter()
        .map(|r| {
            Ok(MonitorRow {
                point_id: r.int(0)?,
                repetition: r.int(1)? as u32,
                host: r.text(2)?,
                summary: serde_json::from_str(&r.text(3)?)?,
            })
        })
        .collect()
    }

    /// A host's monitor samples of one repetition, when recorded.
    pub fn monitor_series(
        &self,
        point_id: i64,
        repetition: u32,
        host: &str,
    ) -> Result<Option<benchlab_monitor::Series>> {
        self.with(|c| {
            c.query_opt(
                "SELECT series_json FROM monitor WHERE point_id = ?1 AND repetition = ?2 AND host = ?3",
                vals![point_id, repetition, host],
            )?
            .map(|r| Ok(serde_json::from_str(&r.text(0)?)?))
            .transpose()
        })
    }

    /// Records a service a configuration started (each start: a restart
    /// is recorded again).
    pub fn add_service(
        &self,
        run_id: i64,
        config_idx: usize,
        name: &str,
        description: &serde_json::Value,
    ) -> Result<()> {
        self.exec(
            "INSERT INTO service (run_id, config_idx, name, description) VALUES (?1, ?2, ?3, ?4)",
            vals![run_id, config_idx, name, description.to_string()],
        )?;
        Ok(())
    }

    /// The services of a run, in the order they started.
    pub fn services(&self, run_id: i64) -> Result<Vec<ServiceRow>> {
        self.query(
            "SELECT config_idx, name, description FROM service WHERE run_id = ?1 ORDER BY id",
            vals![run_id],
        )?
        .iter()
        .map(|r| {
            Ok(ServiceRow {
                config_idx: r.int(0)? as usize,
                name: r.text(1)?,
                description: serde_json::from_str(&r.text(2)?)?,
            })
        })
        .collect()
    }

    /// Records what a configuration changed (or undid) on a host.
    pub fn add_setting_changes(&mut self, run_id: i64, rows: &[SettingChangeRow]) -> Result<()> {
        self.transaction(|tx| {
            for r in rows {
                tx.exec(
                    "INSERT INTO setting_change (run_id, config_idx, host, phase, setting, before, after, status, note) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    vals![run_id, r.config_idx, &r.host, r.phase.name(), &r.setting, r.before.as_deref(), r.after.as_deref(), r.status.name(), &r.note],
                )?;
            }
            Ok(())
        })
    }

    /// What a run's configurations changed, in the order recorded.
    pub fn setting_changes(&self, run_id: i64) -> Result<Vec<SettingChangeRow>> {
        self.query(
            "SELECT config_idx, host, phase, setting, before, after, status, note FROM setting_change WHERE run_id = ?1 ORDER BY id",
            vals![run_id],
        )?
        .iter()
        .map(|r| {
            Ok(SettingChangeRow {
                config_idx: r.int(0)? as usize,
                host: r.text(1)?,
                phase: {
                    let t = r.text(2)?;
                    Phase::parse(&t)
                        .ok_or_else(|| StoreError::Type(format!("setting_change.phase `{t}`")))?
                },
                setting: r.text(3)?,
                before: r.opt_text(4)?,
                after: r.opt_text(5)?,
                status: {
                    let t = r.text(6)?;
                    ChangeStatus::parse(&t)
                        .ok_or_else(|| StoreError::Type(format!("setting_change.status `{t}`")))?
                },
                note: r.text(7)?,
            })
        })
        .collect()
    }

    /// A run's events, oldest first.
    pub fn events(&self, run_id: i64) -> Result<Vec<Event>> {
        self.query(
            "SELECT at, kind, message FROM run_event WHERE run_id = ?1 ORDER BY id",
            vals![run_id],
        )?
        .iter()
        .map(|r| {
            Ok(Event {
                at: r.text(0)?,
                kind: r.text(1)?,
                message: r.text(2)?,
            })
        })
        .collect()
    }

    /// All runs, newest first.
    pub fn runs(&self) -> Result<Vec<RunRow>> {
        self.query(&format!("{RUN_SELECT} ORDER BY id DESC"), &[])?
            .iter()
            .map(run_row)
            .collect()
    }

    /// One run.
    pub fn run(&self, run_id: i64) -> Result<RunRow> {
        let row = self
            .with(|c| c.query_opt(&format!("{RUN_SELECT} WHERE id = ?1"), vals![run_id]))?
            .ok_or(StoreError::NoRun(run_id))?;
        run_row(&row)
    }

    /// The newest run's id, if any.
    pub fn latest_run(&self) -> Result<Option<i64>> {
        self.with(|c| c.query_one("SELECT max(id) FROM run", &[])?.opt_int(0))
    }

    /// A run's configurations, by index.
    pub fn configurations(&self, run_id: i64) -> Result<Vec<ConfigRow>> {
        self.query(
            "SELECT idx, name, description, spec_json FROM configuration WHERE run_id = ?1 ORDER BY idx",
            vals![run_id],
        )?
        .iter()
        .map(|r| {
            Ok(ConfigRow {
                idx: r.int(0)? as usize,
                name: r.text(1)?,
                description: r.text(2)?,
                spec: serde_json::from_str(&r.text(3)?)?,
            })
        })
        .collect()
    }

    /// Every run's configuration names, by run, in index order: one
    /// query for a whole runs list (`configurations` per run also reads
    /// and parses every configuration's spec).
    pub fn configuration_names(&self) -> Result<BTreeMap<i64, Vec<String>>> {
        let mut out: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for r in self.query(
            "SELECT run_id, name FROM configuration ORDER BY run_id, idx",
            &[],
        )? {
            out.entry(r.int(0)?).or_default().push(r.text(1)?);
        }
        Ok(out)
    }

    /// Every run's hosts with their roles, by run, in name order: one
    /// query for a whole runs list or host picker, without reading the
    /// inventories (`hosts` per run reads and parses each one; at 1,000
    /// runs that made the list slow).
    pub fn host_names(&self) -> Result<BTreeMap<i64, Vec<HostName>>> {
        let mut out: BTreeMap<i64, Vec<HostName>> = BTreeMap::new();
        for r in self.query(
            "SELECT run_id, name, roles FROM host ORDER BY run_id, name",
            &[],
        )? {
            out.entry(r.int(0)?).or_default().push(HostName {
                name: r.text(1)?,
                roles: r.text(2)?,
            });
        }
        Ok(out)
    }

    /// Every run's failed and recorded repetitions, by run: one query
    /// for a whole runs list, which flags a run that completed with
    /// failures (runs without a recorded repetition are absent).
    pub fn repetition_counts(&self) -> Result<BTreeMap<i64, (i64, i64)>> {
        let mut out = BTreeMap::new();
        for r in self.query(
            "SELECT p.run_id, SUM(CASE WHEN s.status = 'failed' THEN 1 ELSE 0 END), COUNT(*)
             FROM sample s JOIN point p ON p.id = s.point_id GROUP BY p.run_id",
            &[],
        )? {
            out.insert(r.int(0)?, (r.int(1)?, r.int(2)?));
        }
        Ok(out)
    }

    /// A run's hosts.
    pub fn hosts(&self, run_id: i64) -> Result<Vec<HostRow>> {
        self.query(
            "SELECT name, roles, inventory_json FROM host WHERE run_id = ?1 ORDER BY name",
            vals![run_id],
        )?
        .iter()
        .map(|r| {
            Ok(HostRow {
                name: r.text(0)?,
                roles: r.text(1)?,
                inventory: serde_json::from_str(&r.text(2)?)?,
            })
        })
        .collect()
    }

    /// A run's points.
    pub fn points(&self, run_id: i64) -> Result<Vec<PointRow>> {
        self.query(
            "SELECT id, config_idx, workload_idx, workload_name, kind, point_idx, label, params_json
             FROM point WHERE run_id = ?1 ORDER BY workload_idx, point_idx, config_idx",
            vals![run_id],
        )?
        .iter()
        .map(|r| {
            Ok(PointRow {
                id: r.int(0)?,
                config_idx: r.int(1)? as usize,
                workload_idx: r.int(2)? as usize,
                workload_name: r.text(3)?,
                kind: r.text(4)?,
                point_idx: r.int(5)? as usize,
                label: r.text(6)?,
                params: serde_json::from_str(&r.text(7)?)?,
            })
        })
        .collect()
    }

    /// A run's repetitions (metrics only), in point and repetition order.
    pub fn samples(&self, run_id: i64) -> Result<Vec<SampleRow>> {
        self.query(
            "SELECT s.point_id, s.repetition, s.status, s.reason, s.started_at, s.ended_at, s.metrics_json
             FROM sample s JOIN point p ON p.id = s.point_id
             WHERE p.run_id = ?1 ORDER BY s.point_id, s.repetition",
            vals![run_id],
        )?
        .iter()
        .map(|r| {
            Ok(SampleRow {
                point_id: r.int(0)?,
                repetition: r.int(1)? as u32,
                status: SampleStatus::parse(&r.text(2)?),
                reason: r.opt_text(3)?,
                started_at: r.text(4)?,
                ended_at: r.text(5)?,
                metrics: serde_json::from_str(&r.text(6)?)?,
            })
        })
        .collect()
    }

    /// The raw side results of one repetition, histograms included.
    pub fn side_results(
        &self,
        point_id: i64,
        repetition: u32,
    ) -> Result<Vec<(String, SideResult)>> {
        self.with(|c| {
            let Some(sample_id) = c
                .query_opt(
                    "SELECT id FROM sample WHERE point_id = ?1 AND repetition = ?2",
                    vals![point_id, repetition],
                )?
                .map(|r| r.int(0))
                .transpose()?
            else {
                return Ok(Vec::new());
            };
            let sides = c.query(
                "SELECT side, result_json FROM side_result WHERE sample_id = ?1 ORDER BY side",
                vals![sample_id],
            )?;
            let mut out = Vec::new();
            for row in sides {
                let side = row.text(0)?;
                let mut result: SideResult = serde_json::from_str(&row.text(1)?)?;
                let hists = c.query(
                    "SELECT name, unit, count, min, max, mean, stddev, hdr_v2 FROM histogram
                     WHERE sample_id = ?1 AND side = ?2",
                    vals![sample_id, side.as_str()],
                )?;
                for h in hists {
                    result.histograms.insert(
                        h.text(0)?,
                        HistogramData {
                            unit: h.text(1)?,
                            count: h.int(2)? as u64,
                            min: h.int(3)? as u64,
                            max: h.int(4)? as u64,
                            mean: h.real(5)?,
                            stddev: h.real(6)?,
                            hdr_v2_base64: base64::engine::general_purpose::STANDARD
                                .encode(h.blob(7)?),
                        },
                    );
                }
                out.push((side, result));
            }
            Ok(out)
        })
    }

    /// Per target, the raw side results of one repetition of a workload
    /// with several targets.
    pub fn target_results(&self, point_id: i64, repetition: u32) -> Result<Vec<TargetResult>> {
        self.query(
            "SELECT t.target, t.side, t.result_json FROM target_result t
             JOIN sample s ON s.id = t.sample_id
             WHERE s.point_id = ?1 AND s.repetition = ?2 ORDER BY t.target, t.side",
            vals![point_id, repetition],
        )?
        .iter()
        .map(|r| {
            Ok(TargetResult {
                target: r.text(0)?,
                side: r.text(1)?,
                result: serde_json::from_str(&r.text(2)?)?,
            })
        })
        .collect()
    }

    /// Every recorded repetition of a run, failed ones included: a
    /// resumed run skips all of them.
    pub fn done_units(&self, run_id: i64) -> Result<std::collections::HashSet<UnitKey>> {
        self.query(
            "SELECT p.config_idx, p.workload_idx, p.point_idx, s.repetition
             FROM sample s JOIN point p ON p.id = s.point_id WHERE p.run_id = ?1",
            vals![run_id],
        )?
        .iter()
        .map(|r| {
            Ok(UnitKey {
                config: r.int(0)? as usize,
                workload: r.int(1)? as usize,
                point: r.int(2)? as usize,
                repetition: r.int(3)? as u32,
            })
        })
        .collect()
    }
}

/// "No benchlab store here", naming the store without its password.
fn no_store(target: &Target, why: &str) -> StoreError {
    StoreError::NoStore {
        db: target.redacted(),
        why: why.to_string(),
    }
}

/// Opens a SQLite database that cannot (or must not) be written.
/// `immutable`: a WAL database on a read-only file system has no `-shm`
/// file and cannot make one, and nobody can write it there either.
/// A SQLite store opened to write that cannot be written (a read-only
/// file or file system): read-only when its schema is current, so that
/// a write fails with SQLite's "readonly database"; an older schema
/// cannot be upgraded here.
fn sqlite_cannot_write(path: &Path) -> Result<Conn> {
    match Store::open_read_only(path) {
        Err(StoreError::TooOld { db, found, known }) => {
            Err(StoreError::CannotUpgrade { db, found, known })
        }
        r => r.map(|s| s.conn.into_inner()),
    }
}

/// Appends an event to a run's log.
fn insert_event(c: &mut dyn Exec, run_id: i64, at: &str, kind: &str, message: &str) -> Result<()> {
    c.exec(
        "INSERT INTO run_event (run_id, at, kind, message) VALUES (?1, ?2, ?3, ?4)",
        vals![run_id, at, kind, message],
    )?;
    Ok(())
}

/// Stores a run's resolved plan unless it has one.
fn insert_plan(c: &mut dyn Exec, run_id: i64, version: u32, plan: &str) -> Result<()> {
    c.exec(
        "INSERT INTO run_plan (run_id, version, plan) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
        vals![run_id, version, plan],
    )?;
    Ok(())
}

/// Marks how a run's reading pieces came to be.
fn set_reading_in(c: &mut dyn Exec, run_id: i64, reading: &Reading) -> Result<()> {
    c.exec(
        "INSERT INTO run_reading (run_id, version, origin) VALUES (?1, ?2, ?3)
         ON CONFLICT (run_id) DO UPDATE SET version = excluded.version, origin = excluded.origin",
        vals![run_id, reading.version, reading.origin.as_str()],
    )?;
    Ok(())
}

/// Opens a SQLite store to read, leaving no file behind.
///
/// A read-only connection (`mode=ro`) to a WAL database still creates its
/// `-wal` and `-shm` files when they are missing, and cannot remove them
/// when it closes (SQLite's "read-only databases" in wal.html): a reader
/// would leave two files beside every store it looked at. So a store at
/// rest — no `-wal` or `-journal` beside it, hence no writer connected
/// and nothing committed outside the main file — is opened `immutable`,
/// which reads the main file alone and takes no lock. A store with a
/// writer (a run in progress: `serve` follows it) is read through that
/// writer's WAL with `mode=ro`, which then creates nothing; where even
/// that cannot open (a read-only file system), the main file is read
/// `immutable` as it is.
fn sqlite_read_only(path: &Path) -> Result<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let uri = |extra: &str| {
        // Percent-encode what a URI would read otherwise.
        let p = path
            .display()
            .to_string()
            .replace('%', "%25")
            .replace('?', "%3f")
            .replace('#', "%23");
        format!("file:{p}?mode=ro{extra}")
    };
    let beside = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        std::path::PathBuf::from(p).exists()
    };
    let immutable = || rusqlite::Connection::open_with_flags(uri("&immutable=1"), flags);
    let conn = if beside("-wal") || beside("-journal") {
        let conn = rusqlite::Connection::open_with_flags(uri(""), flags)?;
        match conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)) {
            Ok(_) => conn,
            Err(_) => immutable()?,
        }
    } else {
        immutable()?
    };
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(conn)
}

/// Applies SQLite's migrations up to `upto`, each in its own transaction
/// with the version it reaches (`PRAGMA user_version`).
fn migrate_sqlite(conn: &mut rusqlite::Connection, upto: usize) -> Result<()> {
    let version = check_version(conn)?;
    for (i, sql) in MIGRATIONS
        .iter()
        .enumerate()
        .take(upto)
        .skip(version as usize)
    {
        // IMMEDIATE, and the version read again under the write lock: two
        // controllers opening a new database at once would otherwise both
        // apply the first migration, and the second fail with "table run
        // already exists".
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let now: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if now > i as i64 {
            continue;
        }
        tx.execute_batch(&sql::render(sql, Dialect::Sqlite))?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

const RUN_SELECT: &str =
    "SELECT id, study_name, study_file, study_text, description, options_json, status,
    started_at, ended_at, benchlab_version, controller_host, controller_pid FROM run";

fn run_row(r: &Row) -> Result<RunRow> {
    Ok(RunRow {
        id: r.int(0)?,
        study_name: r.text(1)?,
        study_file: r.text(2)?,
        study_text: r.text(3)?,
        description: r.text(4)?,
        options: serde_json::from_str(&r.text(5)?)?,
        status: RunStatus::parse(&r.text(6)?),
        started_at: r.text(7)?,
        ended_at: r.opt_text(8)?,
        benchlab_version: r.text(9)?,
        controller_host: r.text(10)?,
        controller_pid: r.opt_int(11)?,
    })
}

// The suite runs on both backends, so it needs the PostgreSQL one.
#[cfg(all(test, feature = "postgres"))]
mod tests;
