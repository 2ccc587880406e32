//! Copying a run from one store to another, row for row: SQLite to
//! PostgreSQL, back, or between two files.
//!
//! Every column of every table a run owns is copied as stored (the JSON
//! texts byte for byte, the HDR histograms as their bytes), in one
//! transaction on the destination, so a copy is whole or absent. The run
//! keeps its id when the destination has none of that number; the rows
//! below it (points, samples, events …) get the destination's own ids,
//! which no report shows.

use crate::sql::{Dialect, Exec, Row, Val};
use crate::{Result, RunStatus, Store, StoreError};

/// The columns of `run` copied as they are (all but `id`).
const RUN_COLUMNS: &[&str] = &[
    "study_name",
    "study_file",
    "study_text",
    "description",
    "options_json",
    "status",
    "started_at",
    "ended_at",
    "benchlab_version",
    "controller_host",
    "controller_pid",
];

/// What a table's rows hang from.
#[derive(Clone, Copy)]
enum Parent {
    /// `run_id` → run.
    Run,
    /// `point_id` → point.
    Point,
    /// `sample_id` → sample.
    Sample,
}

/// A table a run owns, below `run`.
struct Table {
    name: &'static str,
    parent: Parent,
    /// Has an `id` the destination assigns anew (and rows below may
    /// reference).
    id: bool,
    /// Every other column (the parent key excluded), in the order copied.
    columns: &'static [&'static str],
}

/// Tables that are no run's (a bisection spans runs; the queue holds
/// studies to run): `copy` leaves them.
#[cfg(all(test, feature = "postgres"))]
pub(crate) const NOT_A_RUNS: &[&str] = &[
    "bisection",
    "bisection_run",
    "queue_entry",
    "queue_claim",
    "host_lease",
    "host_hold",
    "queue_wait",
];

/// The tables below `run`, parents before children. The test
/// `every_column_is_copied` checks this list against the schema.
const TABLES: &[Table] = &[
    Table {
        name: "configuration",
        parent: Parent::Run,
        id: false,
        columns: &["idx", "name", "description", "spec_json"],
    },
    Table {
        name: "host",
        parent: Parent::Run,
        id: false,
        columns: &["name", "roles", "inventory_json"],
    },
    Table {
        name: "run_plan",
        parent: Parent::Run,
        id: false,
        columns: &["version", "plan"],
    },
    Table {
        name: "published",
        parent: Parent::Run,
        id: false,
        columns: &["report"],
    },
    Table {
        name: "run_reading",
        parent: Parent::Run,
        id: false,
        columns: &["version", "origin"],
    },
    Table {
        name: "run_event",
        parent: Parent::Run,
        id: true,
        columns: &["at", "kind", "message"],
    },
    Table {
        name: "setting_change",
        parent: Parent::Run,
        id: true,
        columns: &[
            "config_idx",
            "host",
            "phase",
            "setting",
            "before",
            "after",
            "status",
            "note",
        ],
    },
    Table {
        name: "service",
        parent: Parent::Run,
        id: true,
        columns: &["config_idx", "name", "description"],
    },
    Table {
        name: "decision",
        parent: Parent::Run,
        id: false,
        columns: &[
            "config_idx",
            "workload_idx",
            "point_idx",
            "metric",
            "verdict",
            "repetitions",
            "margin_pct",
            "advantage_pct",
            "ci_lo_pct",
            "ci_hi_pct",
            "mde_pct",
        ],
    },
    Table {
        name: "run_design",
        parent: Parent::Run,
        id: false,
        columns: &[
            "comparisons",
            "decided",
            "rounds",
            "repetitions",
            "elapsed_s",
            "fixed_repetitions",
            "fixed_s",
            "stop",
        ],
    },
    Table {
        name: "point",
        parent: Parent::Run,
        id: true,
        columns: &[
            "config_idx",
            "workload_idx",
            "workload_name",
            "kind",
            "point_idx",
            "label",
            "params_json",
        ],
    },
    Table {
        name: "sample",
        parent: Parent::Point,
        id: true,
        columns: &[
            "repetition",
            "status",
            "reason",
            "started_at",
            "ended_at",
            "metrics_json",
        ],
    },
    Table {
        name: "monitor",
        parent: Parent::Point,
        id: false,
        columns: &["repetition", "host", "summary_json", "series_json"],
    },
    Table {
        name: "stack_recording",
        parent: Parent::Point,
        id: false,
        columns: &[
            "repetition",
            "host",
            "hz",
            "unwind",
            "window_s",
            "samples",
            "busy_samples",
            "perf_cpu_s",
            "perf_window_cpu_s",
            "script_cpu_s",
            "perf_version",
            "reason",
        ],
    },
    Table {
        name: "stack_profile",
        parent: Parent::Point,
        id: false,
        columns: &[
            "repetition",
            "host",
            "side",
            "recorded_on",
            "samples",
            "folded_z",
        ],
    },
    Table {
        name: "side_result",
        parent: Parent::Sample,
        id: false,
        columns: &["side", "result_json"],
    },
    Table {
        name: "target_result",
        parent: Parent::Sample,
        id: false,
        columns: &["target", "side", "result_json"],
    },
    Table {
        name: "sample_note",
        parent: Parent::Sample,
        id: false,
        columns: &["text"],
    },
    Table {
        name: "histogram",
        parent: Parent::Sample,
        id: false,
        columns: &[
            "side", "name", "unit", "count", "min", "max", "mean", "stddev", "hdr_v2",
        ],
    },
];

impl Table {
    fn parent_column(&self) -> &'static str {
        match self.parent {
            Parent::Run => "run_id",
            Parent::Point => "point_id",
            Parent::Sample => "sample_id",
        }
    }

    /// `SELECT [t.id,] t.parent, t.columns… FROM table t …` for one run,
    /// in id order (the order events, changes and services were written).
    fn select(&self) -> String {
        let mut cols = Vec::new();
        if self.id {
            cols.push("t.id".to_string());
        }
        cols.push(format!("t.{}", self.parent_column()));
        cols.extend(self.columns.iter().map(|c| format!("t.{c}")));
        let join = match self.parent {
            Parent::Run => "WHERE t.run_id = ?1".to_string(),
            Parent::Point => "JOIN point p ON p.id = t.point_id WHERE p.run_id = ?1".to_string(),
            Parent::Sample => "JOIN sample s ON s.id = t.sample_id JOIN point p ON p.id = s.point_id WHERE p.run_id = ?1".to_string(),
        };
        let order = if self.id {
            "t.id".to_string()
        } else {
            let mut o = vec![format!("t.{}", self.parent_column())];
            o.extend(self.columns.iter().take(2).map(|c| format!("t.{c}")));
            o.join(", ")
        };
        format!(
            "SELECT {} FROM {} t {join} ORDER BY {order}",
            cols.join(", "),
            self.name
        )
    }

    /// `INSERT INTO table (parent, columns…) VALUES (…) [RETURNING id]`.
    fn insert(&self) -> String {
        let n = self.columns.len() + 1;
        let marks: Vec<String> = (1..=n).map(|i| format!("?{i}")).collect();
        format!(
            "INSERT INTO {} ({}, {}) VALUES ({}){}",
            self.name,
            self.parent_column(),
            self.columns.join(", "),
            marks.join(", "),
            if self.id { " RETURNING id" } else { "" }
        )
    }
}

/// The outcome of copying one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copied {
    /// Copied: the run's id in the destination (the source's id when it
    /// was free).
    New(i64),
    /// The destination already holds this run (same study, start time,
    /// controller host and benchlab version): nothing was written.
    Already(i64),
}

/// A run's rows, read from its store.
struct Dump {
    run: Row,
    tables: Vec<Vec<Row>>,
}

impl Store {
    /// Copies run `run_id` of this store into `to`, exactly: every row the
    /// run owns, in one transaction. A run that is still `running` is
    /// refused (its controller is still writing it, or died: resume or
    /// interrupt it first).
    pub fn copy_run(&self, run_id: i64, to: &Store) -> Result<Copied> {
        let status = self.run(run_id)?.status;
        if status == RunStatus::Running {
            return Err(StoreError::Copy {
                run: run_id,
                why: "it is still running (or its controller died): let it finish, or resume and interrupt it, before copying".into(),
            });
        }
        // Read everything first: `to` may be the same store, whose
        // connection cannot be borrowed twice.
        let dump = self.with(|c| {
            let run = c.query_one(
                &format!("SELECT {} FROM run WHERE id = ?1", RUN_COLUMNS.join(", ")),
                &[Val::Int(run_id)],
            )?;
            let tables = TABLES
                .iter()
                .map(|t| c.query(&t.select(), &[Val::Int(run_id)]))
                .collect::<Result<_>>()?;
            Ok(Dump { run, tables })
        })?;
        to.transaction(|tx| write(tx, run_id, &dump))
    }
}

fn write(tx: &mut dyn Exec, run_id: i64, dump: &Dump) -> Result<Copied> {
    if tx.dialect() == Dialect::Postgres {
        // Serialise with other writers of `run`: between the check that
        // the id is free and moving the id sequence past it, no
        // controller may take an id from the sequence.
        tx.exec("LOCK TABLE run IN EXCLUSIVE MODE", &[])?;
    }
    // study_name, started_at, benchlab_version, controller_host.
    let key = |i: usize| dump.run.0[i].clone();
    if let Some(r) = tx.query_opt(
        "SELECT id FROM run WHERE study_name = ?1 AND started_at = ?2 AND benchlab_version = ?3 AND controller_host = ?4",
        &[key(0), key(6), key(8), key(9)],
    )? {
        return Ok(Copied::Already(r.int(0)?));
    }
    let free = tx
        .query_opt("SELECT id FROM run WHERE id = ?1", &[Val::Int(run_id)])?
        .is_none();
    let marks: Vec<String> = (1..=RUN_COLUMNS.len()).map(|i| format!("?{i}")).collect();
    let new_id = if free {
        let mut params = dump.run.0.clone();
        params.push(Val::Int(run_id));
        tx.exec(
            &format!(
                "INSERT INTO run ({}, id) VALUES ({}, ?{})",
                RUN_COLUMNS.join(", "),
                marks.join(", "),
                RUN_COLUMNS.len() + 1
            ),
            &params,
        )?;
        if tx.dialect() == Dialect::Postgres {
            // An id given explicitly does not move the identity sequence:
            // move it past the largest id, or the next controller's run
            // would collide with this one.
            tx.query(
                "SELECT setval(pg_get_serial_sequence('run', 'id'), (SELECT max(id) FROM run))",
                &[],
            )?;
        }
        run_id
    } else {
        tx.query_one(
            &format!(
                "INSERT INTO run ({}) VALUES ({}) RETURNING id",
                RUN_COLUMNS.join(", "),
                marks.join(", ")
            ),
            &dump.run.0,
        )?
        .int(0)?
    };
    let mut points = std::collections::HashMap::new();
    let mut samples = std::collections::HashMap::new();
    for (table, rows) in TABLES.iter().zip(&dump.tables) {
        let insert = table.insert();
        for row in rows {
            let mut vals = row.0.clone();
            let old_id = if table.id { Some(vals.remove(0)) } else { None };
            let parent = match vals[0] {
                Val::Int(p) => p,
                _ => {
                    return Err(StoreError::Type(format!(
                        "{}: a parent id that is not an integer",
                        table.name
                    )))
                }
            };
            let mapped = match table.parent {
                Parent::Run => Some(new_id),
                Parent::Point => points.get(&parent).copied(),
                Parent::Sample => samples.get(&parent).copied(),
            };
            // A run that is not running is not written, so every child
            // finds its parent; a miss means the run was resumed while it
            // was read.
            let Some(mapped) = mapped else {
                return Err(StoreError::Copy {
                    run: run_id,
                    why: format!("a row of {} without its parent {parent}", table.name),
                });
            };
            vals[0] = Val::Int(mapped);
            if table.id {
                let id = tx.query_one(&insert, &vals)?.int(0)?;
                let Some(Val::Int(old)) = old_id else {
                    return Err(StoreError::Type(format!(
                        "{}: an id that is not an integer",
                        table.name
                    )));
                };
                match table.name {
                    "point" => points.insert(old, id),
                    "sample" => samples.insert(old, id),
                    _ => None,
                };
            } else {
                tx.exec(&insert, &vals)?;
            }
        }
    }
    Ok(Copied::New(new_id))
}

#[cfg(all(test, feature = "postgres"))]
pub(crate) fn copied_columns() -> Vec<(String, Vec<String>)> {
    let mut out = vec![(
        "run".to_string(),
        std::iter::once("id")
            .chain(RUN_COLUMNS.iter().copied())
            .map(String::from)
            .collect(),
    )];
    for t in TABLES {
        let mut cols: Vec<String> = Vec::new();
        if t.id {
            cols.push("id".into());
        }
        cols.push(t.parent_column().into());
        cols.extend(t.columns.iter().map(|c| c.to_string()));
        out.push((t.name.to_string(), cols));
    }
    out
}
