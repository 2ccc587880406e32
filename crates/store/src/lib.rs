//! The result store: the only crate that speaks SQL.
//!
//! SQLite in WAL mode, schema versioned through `PRAGMA user_version` and a
//! list of migrations applied in order. A run holds its study file text,
//! its options, its configurations, every host's inventory, its points, and
//! every repetition's result — each committed the moment it finishes, so an
//! interruption loses nothing that was done.

use std::path::Path;

use base64::Engine;
use benchlab_core::plan::RunOptions;
use benchlab_core::recorder::HistogramData;
use benchlab_core::{Params, Sample, SideResult};
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("database: {0}")]
    Sql(#[from] rusqlite::Error),
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
    /// The database cannot be written and needs a migration first.
    #[error("the database is read-only and has schema version {found}; this benchlab needs {known}: open it once where it can be written")]
    ReadOnlyOld {
        /// The database's version.
        found: i64,
        /// The version this binary needs.
        known: i64,
    },
    /// No such run.
    #[error("no run {0} in this database (see `benchlab list`)")]
    NoRun(i64),
}

type Result<T> = std::result::Result<T, StoreError>;

impl StoreError {
    /// The database's file system is full.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, StoreError::Sql(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::DiskFull)
    }

    /// SQLite found the file damaged: not a database, or a malformed one.
    pub fn is_damaged_database(&self) -> bool {
        matches!(self, StoreError::Sql(rusqlite::Error::SqliteFailure(f, _))
            if matches!(f.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase))
    }
}

/// The database's schema version, refused when newer than this benchlab's.
fn check_version(conn: &Connection) -> Result<i64> {
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
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE run (
    id               INTEGER PRIMARY KEY,
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
    controller_pid   INTEGER
);
CREATE TABLE configuration (
    run_id      INTEGER NOT NULL REFERENCES run(id),
    idx         INTEGER NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL,
    spec_json   TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
);
CREATE TABLE host (
    run_id         INTEGER NOT NULL REFERENCES run(id),
    name           TEXT NOT NULL,
    roles          TEXT NOT NULL,
    inventory_json TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE TABLE point (
    id            INTEGER PRIMARY KEY,
    run_id        INTEGER NOT NULL REFERENCES run(id),
    config_idx    INTEGER NOT NULL,
    workload_idx  INTEGER NOT NULL,
    workload_name TEXT NOT NULL,
    kind          TEXT NOT NULL,
    point_idx     INTEGER NOT NULL,
    label         TEXT NOT NULL,
    params_json   TEXT NOT NULL,
    UNIQUE (run_id, config_idx, workload_idx, point_idx)
);
CREATE TABLE sample (
    id           INTEGER PRIMARY KEY,
    point_id     INTEGER NOT NULL REFERENCES point(id),
    repetition   INTEGER NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'skipped')),
    reason       TEXT,
    started_at   TEXT NOT NULL,
    ended_at     TEXT NOT NULL,
    metrics_json TEXT NOT NULL,
    UNIQUE (point_id, repetition)
);
CREATE TABLE side_result (
    sample_id   INTEGER NOT NULL REFERENCES sample(id),
    side        TEXT NOT NULL CHECK (side IN ('client', 'server')),
    result_json TEXT NOT NULL,
    PRIMARY KEY (sample_id, side)
);
CREATE TABLE histogram (
    sample_id  INTEGER NOT NULL REFERENCES sample(id),
    side       TEXT NOT NULL,
    name       TEXT NOT NULL,
    unit       TEXT NOT NULL,
    count      INTEGER NOT NULL,
    min        INTEGER NOT NULL,
    max        INTEGER NOT NULL,
    mean       REAL NOT NULL,
    stddev     REAL NOT NULL,
    hdr_v2     BLOB NOT NULL,
    PRIMARY KEY (sample_id, side, name)
);
CREATE TABLE run_event (
    run_id  INTEGER NOT NULL REFERENCES run(id),
    at      TEXT NOT NULL,
    kind    TEXT NOT NULL,
    message TEXT NOT NULL
);
"#,
    r#"
-- Workloads with several targets (seed 003's two guests): each target's
-- own sides, next to the aggregate sample.
CREATE TABLE target_result (
    sample_id   INTEGER NOT NULL REFERENCES sample(id),
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
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES run(id),
    config_idx  INTEGER NOT NULL,
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
    run_id   INTEGER PRIMARY KEY REFERENCES run(id),
    version  INTEGER NOT NULL,
    plan     TEXT NOT NULL
);
"#,
    // Managed services as they ran: name, version, effective
    // configuration (secrets masked), placement — the appendix's source.
    r#"
CREATE TABLE service (
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES run(id),
    config_idx  INTEGER NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL
);
CREATE INDEX service_run ON service(run_id);
"#,
];

/// One setting a configuration changed on a host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingChangeRow {
    /// Index of the configuration in the study.
    pub config_idx: usize,
    /// The host.
    pub host: String,
    /// `apply` or `revert`.
    pub phase: String,
    /// The setting.
    pub setting: String,
    /// Value before.
    pub before: Option<String>,
    /// Value after.
    pub after: Option<String>,
    /// `applied`, `unchanged`, `skipped`, `failed`, `reverted`, `revert failed`.
    pub status: String,
    /// Why, or what else to know.
    pub note: String,
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
    pub metrics: std::collections::BTreeMap<String, f64>,
}

/// The store.
pub struct Store {
    conn: Connection,
}

impl Store {
    /// Opens (creating if needed) and migrates a store.
    ///
    /// A database this benchlab cannot write (a read-only file system or
    /// file) is opened read-only when its schema is current: it can be
    /// listed, shown and reported, and any write fails with SQLite's
    /// "readonly database" error.
    pub fn open(path: &Path) -> Result<Store> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        // The version first: a newer database is refused before anything
        // (not even the journal mode, which rewrites the header) changes.
        match check_version(&conn) {
            // A WAL database on a read-only file system cannot even be
            // read this way (SQLite cannot make its `-shm` file).
            Err(StoreError::Sql(e)) if path.exists() && is_read_only(&e) => {
                return Store::open_read_only(path)
            }
            r => r?,
        };
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(e) if is_read_only(&e) => return Store::open_read_only(path),
            r => r?,
        }
        // FULL: a committed sample survives a power cut, not just a crash.
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let mut store = Store { conn };
        store.migrate()?;
        Ok(store)
    }

    /// Opens a database that cannot be written. `immutable`: a WAL
    /// database on a read-only file system has no `-shm` file and cannot
    /// make one, and nobody can write it there either.
    fn open_read_only(path: &Path) -> Result<Store> {
        use rusqlite::OpenFlags;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
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
        let conn = Connection::open_with_flags(uri(""), flags)?;
        let conn = match conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)) {
            Ok(_) => conn,
            Err(_) => Connection::open_with_flags(uri("&immutable=1"), flags)?,
        };
        let version = check_version(&conn)?;
        if version < SCHEMA_VERSION {
            return Err(StoreError::ReadOnlyOld {
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        Ok(Store { conn })
    }

    fn migrate(&mut self) -> Result<()> {
        let version = check_version(&self.conn)?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            // IMMEDIATE, and the version read again under the write lock:
            // two controllers opening a new database at once would
            // otherwise both apply the first migration, and the second
            // fail with "table run already exists".
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let now: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if now > i as i64 {
                continue;
            }
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
            tx.commit()?;
        }
        Ok(())
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// `PRAGMA integrity_check`: `"ok"` when the database is sound.
    pub fn integrity_check(&self) -> Result<String> {
        Ok(self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))?)
    }

    /// Creates a run in state `running`; returns its id.
    pub fn create_run(&self, run: &NewRun) -> Result<i64> {
        self.conn.execute(
            "INSERT INTO run (study_name, study_file, study_text, description, options_json, status,
                              started_at, benchlab_version, controller_host, controller_pid)
             VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?7, ?8, ?9)",
            params![
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
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Records a configuration of a run (idempotent).
    pub fn add_configuration(&self, run_id: i64, c: &ConfigRow) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO configuration (run_id, idx, name, description, spec_json)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                run_id,
                c.idx as i64,
                c.name,
                c.description,
                c.spec.to_string()
            ],
        )?;
        Ok(())
    }

    /// Records (or replaces) a host's inventory.
    pub fn add_host(&self, run_id: i64, h: &HostRow) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO host (run_id, name, roles, inventory_json) VALUES (?1, ?2, ?3, ?4)",
            params![run_id, h.name, h.roles, h.inventory.to_string()],
        )?;
        Ok(())
    }

    /// Returns the id of a point, creating it the first time.
    pub fn ensure_point(&self, run_id: i64, p: &PointRow) -> Result<i64> {
        self.conn.execute(
            "INSERT OR IGNORE INTO point (run_id, config_idx, workload_idx, workload_name, kind,
                                          point_idx, label, params_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                run_id,
                p.config_idx as i64,
                p.workload_idx as i64,
                p.workload_name,
                p.kind,
                p.point_idx as i64,
                p.label,
                p.params.canonical()
            ],
        )?;
        Ok(self.conn.query_row(
            "SELECT id FROM point WHERE run_id = ?1 AND config_idx = ?2 AND workload_idx = ?3 AND point_idx = ?4",
            params![run_id, p.config_idx as i64, p.workload_idx as i64, p.point_idx as i64],
            |r| r.get(0),
        )?)
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
        let tx = self.conn.transaction()?;
        let metrics = sample.map(|s| s.metrics.clone()).unwrap_or_default();
        tx.execute(
            "INSERT INTO sample (point_id, repetition, status, reason, started_at, ended_at, metrics_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                point_id,
                repetition as i64,
                status.as_str(),
                reason,
                started_at,
                ended_at,
                serde_json::to_string(&metrics)?
            ],
        )?;
        let sample_id = tx.last_insert_rowid();
        if let Some(s) = sample.filter(|s| !s.targets.is_empty()) {
            for (target, t) in &s.targets {
                let sides = [("client", Some(&t.client)), ("server", t.server.as_ref())];
                for (side, result) in sides {
                    let Some(result) = result else { continue };
                    tx.execute(
                        "INSERT INTO target_result (sample_id, target, side, result_json) VALUES (?1, ?2, ?3, ?4)",
                        params![sample_id, target, side, serde_json::to_string(result)?],
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
                tx.execute(
                    "INSERT INTO side_result (sample_id, side, result_json) VALUES (?1, ?2, ?3)",
                    params![sample_id, side, serde_json::to_string(&rest)?],
                )?;
                for (name, h) in hists {
                    let blob = base64::engine::general_purpose::STANDARD
                        .decode(&h.hdr_v2_base64)
                        .unwrap_or_default();
                    tx.execute(
                        "INSERT INTO histogram (sample_id, side, name, unit, count, min, max, mean, stddev, hdr_v2)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                        params![sample_id, side, name, h.unit, h.count as i64, h.min as i64, h.max as i64, h.mean, h.stddev, blob],
                    )?;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Sets a run's status (and its end time, unless running), and clears
    /// or sets the controller pid.
    pub fn set_run_status(&self, run_id: i64, status: RunStatus, at: &str) -> Result<()> {
        let ended = (status != RunStatus::Running).then_some(at);
        let pid = (status == RunStatus::Running).then_some(std::process::id() as i64);
        self.conn.execute(
            "UPDATE run SET status = ?2, ended_at = ?3, controller_pid = ?4 WHERE id = ?1",
            params![run_id, status.as_str(), ended, pid],
        )?;
        Ok(())
    }

    /// Appends an event (started, interrupted, resumed …) to a run's log.
    pub fn add_event(&self, run_id: i64, at: &str, kind: &str, message: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO run_event (run_id, at, kind, message) VALUES (?1, ?2, ?3, ?4)",
            params![run_id, at, kind, message],
        )?;
        Ok(())
    }

    /// Stores a run's resolved plan (JSON, with its version); a plan is
    /// written once and kept.
    pub fn set_plan(&self, run_id: i64, version: u32, plan: &str) -> Result<()> {
        self.conn.execute(
            "INSERT OR IGNORE INTO run_plan (run_id, version, plan) VALUES (?1, ?2, ?3)",
            params![run_id, version, plan],
        )?;
        Ok(())
    }

    /// A run's stored plan, when it has one (runs made before plans were
    /// stored have none).
    pub fn plan(&self, run_id: i64) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT plan FROM run_plan WHERE run_id = ?1",
                params![run_id],
                |r| r.get(0),
            )
            .optional()?)
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
        self.conn.execute(
            "INSERT INTO service (run_id, config_idx, name, description) VALUES (?1, ?2, ?3, ?4)",
            params![run_id, config_idx as i64, name, description.to_string()],
        )?;
        Ok(())
    }

    /// The services of a run: (configuration index, name, description),
    /// in the order they started.
    pub fn services(&self, run_id: i64) -> Result<Vec<(usize, String, serde_json::Value)>> {
        let mut st = self.conn.prepare(
            "SELECT config_idx, name, description FROM service WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = st.query_map(params![run_id], |r| {
            Ok((
                r.get::<_, i64>(0)? as usize,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (c, n, d) = row?;
            out.push((c, n, serde_json::from_str(&d)?));
        }
        Ok(out)
    }

    /// Records what a configuration changed (or undid) on a host.
    pub fn add_setting_changes(&mut self, run_id: i64, rows: &[SettingChangeRow]) -> Result<()> {
        let tx = self.conn.transaction()?;
        for r in rows {
            tx.execute(
                "INSERT INTO setting_change (run_id, config_idx, host, phase, setting, before, after, status, note) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![run_id, r.config_idx as i64, r.host, r.phase, r.setting, r.before, r.after, r.status, r.note],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// What a run's configurations changed, in the order recorded.
    pub fn setting_changes(&self, run_id: i64) -> Result<Vec<SettingChangeRow>> {
        let mut st = self.conn.prepare(
            "SELECT config_idx, host, phase, setting, before, after, status, note FROM setting_change WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = st.query_map([run_id], |r| {
            Ok(SettingChangeRow {
                config_idx: r.get::<_, i64>(0)? as usize,
                host: r.get(1)?,
                phase: r.get(2)?,
                setting: r.get(3)?,
                before: r.get(4)?,
                after: r.get(5)?,
                status: r.get(6)?,
                note: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// A run's events, oldest first: (at, kind, message).
    pub fn events(&self, run_id: i64) -> Result<Vec<(String, String, String)>> {
        let mut st = self
            .conn
            .prepare("SELECT at, kind, message FROM run_event WHERE run_id = ?1 ORDER BY rowid")?;
        let rows = st.query_map([run_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// All runs, newest first.
    pub fn runs(&self) -> Result<Vec<RunRow>> {
        let mut st = self
            .conn
            .prepare(&format!("{RUN_SELECT} ORDER BY id DESC"))?;
        let rows = st.query_map([], run_row)?;
        let rows: Vec<_> = rows.collect::<rusqlite::Result<_>>()?;
        rows.into_iter().map(finish_run_row).collect()
    }

    /// One run.
    pub fn run(&self, run_id: i64) -> Result<RunRow> {
        let row = self
            .conn
            .query_row(&format!("{RUN_SELECT} WHERE id = ?1"), [run_id], run_row)
            .optional()?
            .ok_or(StoreError::NoRun(run_id))?;
        finish_run_row(row)
    }

    /// The newest run's id, if any.
    pub fn latest_run(&self) -> Result<Option<i64>> {
        Ok(self
            .conn
            .query_row("SELECT max(id) FROM run", [], |r| r.get(0))?)
    }

    /// A run's configurations, by index.
    pub fn configurations(&self, run_id: i64) -> Result<Vec<ConfigRow>> {
        let mut st = self.conn.prepare(
            "SELECT idx, name, description, spec_json FROM configuration WHERE run_id = ?1 ORDER BY idx",
        )?;
        let rows = st.query_map([run_id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get::<_, String>(3)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (idx, name, description, spec) = row?;
            out.push(ConfigRow {
                idx: idx as usize,
                name,
                description,
                spec: serde_json::from_str(&spec)?,
            });
        }
        Ok(out)
    }

    /// A run's hosts.
    pub fn hosts(&self, run_id: i64) -> Result<Vec<HostRow>> {
        let mut st = self.conn.prepare(
            "SELECT name, roles, inventory_json FROM host WHERE run_id = ?1 ORDER BY name",
        )?;
        let rows = st.query_map([run_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get::<_, String>(2)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (name, roles, inv) = row?;
            out.push(HostRow {
                name,
                roles,
                inventory: serde_json::from_str(&inv)?,
            });
        }
        Ok(out)
    }

    /// A run's points.
    pub fn points(&self, run_id: i64) -> Result<Vec<PointRow>> {
        let mut st = self.conn.prepare(
            "SELECT id, config_idx, workload_idx, workload_name, kind, point_idx, label, params_json
             FROM point WHERE run_id = ?1 ORDER BY workload_idx, point_idx, config_idx",
        )?;
        let rows = st.query_map([run_id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, String>(7)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, c, w, workload_name, kind, p, label, params) = row?;
            out.push(PointRow {
                id,
                config_idx: c as usize,
                workload_idx: w as usize,
                workload_name,
                kind,
                point_idx: p as usize,
                label,
                params: serde_json::from_str(&params)?,
            });
        }
        Ok(out)
    }

    /// A run's repetitions (metrics only), in point and repetition order.
    pub fn samples(&self, run_id: i64) -> Result<Vec<SampleRow>> {
        let mut st = self.conn.prepare(
            "SELECT s.point_id, s.repetition, s.status, s.reason, s.started_at, s.ended_at, s.metrics_json
             FROM sample s JOIN point p ON p.id = s.point_id
             WHERE p.run_id = ?1 ORDER BY s.point_id, s.repetition",
        )?;
        let rows = st.query_map([run_id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (point_id, rep, status, reason, started_at, ended_at, metrics) = row?;
            out.push(SampleRow {
                point_id,
                repetition: rep as u32,
                status: SampleStatus::parse(&status),
                reason,
                started_at,
                ended_at,
                metrics: serde_json::from_str(&metrics)?,
            });
        }
        Ok(out)
    }

    /// The raw side results of one repetition, histograms included.
    pub fn side_results(
        &self,
        point_id: i64,
        repetition: u32,
    ) -> Result<Vec<(String, SideResult)>> {
        let sample_id: Option<i64> = self
            .conn
            .query_row(
                "SELECT id FROM sample WHERE point_id = ?1 AND repetition = ?2",
                params![point_id, repetition as i64],
                |r| r.get(0),
            )
            .optional()?;
        let Some(sample_id) = sample_id else {
            return Ok(Vec::new());
        };
        let mut st = self.conn.prepare(
            "SELECT side, result_json FROM side_result WHERE sample_id = ?1 ORDER BY side",
        )?;
        let rows: Vec<(String, String)> = st
            .query_map([sample_id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut out = Vec::new();
        for (side, json) in rows {
            let mut result: SideResult = serde_json::from_str(&json)?;
            let mut hs = self.conn.prepare(
                "SELECT name, unit, count, min, max, mean, stddev, hdr_v2 FROM histogram
                 WHERE sample_id = ?1 AND side = ?2",
            )?;
            let hists = hs.query_map(params![sample_id, side], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    HistogramData {
                        unit: r.get(1)?,
                        count: r.get::<_, i64>(2)? as u64,
                        min: r.get::<_, i64>(3)? as u64,
                        max: r.get::<_, i64>(4)? as u64,
                        mean: r.get(5)?,
                        stddev: r.get(6)?,
                        hdr_v2_base64: base64::engine::general_purpose::STANDARD
                            .encode(r.get::<_, Vec<u8>>(7)?),
                    },
                ))
            })?;
            for h in hists {
                let (name, data) = h?;
                result.histograms.insert(name, data);
            }
            out.push((side, result));
        }
        Ok(out)
    }

    /// Per target, the raw side results of one repetition of a workload
    /// with several targets: (target, side, result).
    pub fn target_results(
        &self,
        point_id: i64,
        repetition: u32,
    ) -> Result<Vec<(String, String, SideResult)>> {
        let mut st = self.conn.prepare(
            "SELECT t.target, t.side, t.result_json FROM target_result t
             JOIN sample s ON s.id = t.sample_id
             WHERE s.point_id = ?1 AND s.repetition = ?2 ORDER BY t.target, t.side",
        )?;
        let rows: Vec<(String, String, String)> = st
            .query_map(params![point_id, repetition as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        rows.into_iter()
            .map(|(t, side, json)| Ok((t, side, serde_json::from_str(&json)?)))
            .collect()
    }

    /// (config, workload, point, repetition) of every recorded repetition
    /// of a run, failed ones included: a resumed run skips all of them.
    pub fn done_units(
        &self,
        run_id: i64,
    ) -> Result<std::collections::HashSet<(usize, usize, usize, u32)>> {
        let mut st = self.conn.prepare(
            "SELECT p.config_idx, p.workload_idx, p.point_idx, s.repetition
             FROM sample s JOIN point p ON p.id = s.point_id WHERE p.run_id = ?1",
        )?;
        let rows = st.query_map([run_id], |r| {
            Ok((
                r.get::<_, i64>(0)? as usize,
                r.get::<_, i64>(1)? as usize,
                r.get::<_, i64>(2)? as usize,
                r.get::<_, i64>(3)? as u32,
            ))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

const RUN_SELECT: &str =
    "SELECT id, study_name, study_file, study_text, description, options_json, status,
    started_at, ended_at, benchlab_version, controller_host, controller_pid FROM run";

type RawRun = (RunRow, String);

fn run_row(r: &rusqlite::Row) -> rusqlite::Result<RawRun> {
    Ok((
        RunRow {
            id: r.get(0)?,
            study_name: r.get(1)?,
            study_file: r.get(2)?,
            study_text: r.get(3)?,
            description: r.get(4)?,
            options: RunOptions::default(),
            status: RunStatus::parse(&r.get::<_, String>(6)?),
            started_at: r.get(7)?,
            ended_at: r.get(8)?,
            benchlab_version: r.get(9)?,
            controller_host: r.get(10)?,
            controller_pid: r.get(11)?,
        },
        r.get(5)?,
    ))
}

fn finish_run_row((mut row, options): RawRun) -> Result<RunRow> {
    row.options = serde_json::from_str(&options)?;
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchlab_core::recorder::LatencyRecorder;
    use benchlab_core::Value;

    #[test]
    fn round_trip_and_uniqueness() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let run = store
            .create_run(&NewRun {
                study_name: "s",
                study_file: "s.toml",
                study_text: "[study]\nname='s'",
                description: "",
                options: RunOptions {
                    scale: 0.5,
                    quick: true,
                },
                started_at: "2026-01-01T00:00:00.000Z",
                controller_host: "h",
            })
            .unwrap();
        let mut params = Params::default();
        params.set("message_size", Value::Int(1024));
        let point = PointRow {
            id: 0,
            config_idx: 1,
            workload_idx: 0,
            workload_name: "net.stream".into(),
            kind: "net.stream".into(),
            point_idx: 3,
            label: "message_size=1024".into(),
            params,
        };
        let pid = store.ensure_point(run, &point).unwrap();
        assert_eq!(store.ensure_point(run, &point).unwrap(), pid);
        let mut rec = LatencyRecorder::new(8);
        for v in [5, 6, 7] {
            rec.record(v);
        }
        let mut sample = Sample::default();
        sample.metrics.insert("x".into(), 1.5);
        sample
            .client
            .histograms
            .insert("rtt".into(), rec.histogram_data());
        sample.client.counters.insert("bytes".into(), 42);
        store
            .record_sample(pid, 0, SampleStatus::Ok, None, "a", "b", Some(&sample))
            .unwrap();
        store
            .record_sample(pid, 1, SampleStatus::Failed, Some("boom"), "a", "b", None)
            .unwrap();
        assert!(store
            .record_sample(pid, 1, SampleStatus::Ok, None, "a", "b", None)
            .is_err());
        let samples = store.samples(run).unwrap();
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].metrics["x"], 1.5);
        assert_eq!(samples[1].reason.as_deref(), Some("boom"));
        let sides = store.side_results(pid, 0).unwrap();
        assert_eq!(sides[0].1, sample.client);
        let done = store.done_units(run).unwrap();
        assert!(done.contains(&(1, 0, 3, 0)) && done.contains(&(1, 0, 3, 1)));
        store
            .set_run_status(run, RunStatus::Interrupted, "c")
            .unwrap();
        let r = store.run(run).unwrap();
        assert_eq!(r.status, RunStatus::Interrupted);
        assert_eq!(
            r.options,
            RunOptions {
                scale: 0.5,
                quick: true
            }
        );
        assert_eq!(store.integrity_check().unwrap(), "ok");
        drop(store);
        // Reopening does not migrate twice.
        let store = Store::open(&path).unwrap();
        assert_eq!(store.runs().unwrap().len(), 1);
    }
}
