//! Bisections (`benchlab bisect`): what each was asked and how it ended,
//! and the runs of its steps. A bisection spans runs and is not one run's:
//! `copy` moves runs and leaves these tables alone.

use serde::{Deserialize, Serialize};

use crate::sql::{vals, Row};
use crate::{Result, Store, StoreError};

/// Where a bisection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BisectionStatus {
    /// Running, interrupted, or its controller died: resumable.
    Running,
    /// It reached an outcome (`result`).
    Finished,
}

impl BisectionStatus {
    fn as_str(self) -> &'static str {
        match self {
            BisectionStatus::Running => "running",
            BisectionStatus::Finished => "finished",
        }
    }

    fn parse(s: &str) -> BisectionStatus {
        match s {
            "finished" => BisectionStatus::Finished,
            _ => BisectionStatus::Running,
        }
    }
}

/// A stored bisection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectionRow {
    /// Its id.
    pub id: i64,
    /// The study it bisects.
    pub study_name: String,
    /// What was asked (the bisect crate's typed request, as JSON).
    pub spec: serde_json::Value,
    /// Where it stands.
    pub status: BisectionStatus,
    /// Start, RFC 3339.
    pub started_at: String,
    /// End, RFC 3339.
    pub ended_at: Option<String>,
    /// How it ended (the bisect crate's typed result, as JSON).
    pub result: Option<serde_json::Value>,
}

/// One round of a bisection's step: the run that measured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BisectionRunRow {
    /// The bisection.
    pub bisection_id: i64,
    /// The round's number over the whole bisection, from 0.
    pub seq: u32,
    /// Its step, from 0.
    pub step: u32,
    /// Its round within the step, from 0.
    pub round: u32,
    /// The index of the version run as the bound.
    pub bound: u32,
    /// The index of the version measured.
    pub candidate: u32,
    /// The run.
    pub run_id: i64,
}

fn json(text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| StoreError::Type(format!("bisection JSON: {e}")))
}

fn bisection_row(r: &Row) -> Result<BisectionRow> {
    Ok(BisectionRow {
        id: r.int(0)?,
        study_name: r.text(1)?,
        spec: json(&r.text(2)?)?,
        status: BisectionStatus::parse(&r.text(3)?),
        started_at: r.text(4)?,
        ended_at: r.opt_text(5)?,
        result: r.opt_text(6)?.as_deref().map(json).transpose()?,
    })
}

const BISECTION_RUN_SELECT: &str =
    "SELECT bisection_id, seq, step, round, bound, candidate, run_id FROM bisection_run";

fn bisection_run_row(r: &Row) -> Result<BisectionRunRow> {
    let u32_at = |i: usize| -> Result<u32> {
        u32::try_from(r.int(i)?).map_err(|e| StoreError::Type(format!("column {i}: {e}")))
    };
    Ok(BisectionRunRow {
        bisection_id: r.int(0)?,
        seq: u32_at(1)?,
        step: u32_at(2)?,
        round: u32_at(3)?,
        bound: u32_at(4)?,
        candidate: u32_at(5)?,
        run_id: r.int(6)?,
    })
}

const BISECTION_SELECT: &str =
    "SELECT id, study_name, spec_json, status, started_at, ended_at, result_json FROM bisection";

impl Store {
    /// Stores a new bisection, running; returns its id.
    pub fn create_bisection(
        &self,
        study_name: &str,
        spec: &serde_json::Value,
        started_at: &str,
    ) -> Result<i64> {
        self.query(
            "INSERT INTO bisection (study_name, spec_json, status, started_at)
             VALUES (?1, ?2, 'running', ?3) RETURNING id",
            vals![study_name, spec.to_string(), started_at],
        )?
        .first()
        .ok_or_else(|| StoreError::Type("INSERT … RETURNING id returned no row".into()))?
        .int(0)
    }

    /// One bisection; `None` when there is none of that id.
    pub fn bisection(&self, id: i64) -> Result<Option<BisectionRow>> {
        self.query(&format!("{BISECTION_SELECT} WHERE id = ?1"), vals![id])?
            .first()
            .map(bisection_row)
            .transpose()
    }

    /// Every bisection, newest first.
    pub fn bisections(&self) -> Result<Vec<BisectionRow>> {
        self.query(&format!("{BISECTION_SELECT} ORDER BY id DESC"), &[])?
            .iter()
            .map(bisection_row)
            .collect()
    }

    /// Records how a bisection ended.
    pub fn finish_bisection(&self, id: i64, at: &str, result: &serde_json::Value) -> Result<()> {
        self.exec(
            "UPDATE bisection SET status = ?2, ended_at = ?3, result_json = ?4 WHERE id = ?1",
            vals![
                id,
                BisectionStatus::Finished.as_str(),
                at,
                result.to_string()
            ],
        )?;
        Ok(())
    }

    /// Links a round's run to its bisection (a second link of the same
    /// round replaces the first: a round whose run was abandoned).
    pub fn link_bisection_run(&self, r: &BisectionRunRow) -> Result<()> {
        self.exec(
            "INSERT INTO bisection_run (bisection_id, seq, step, round, bound, candidate, run_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (bisection_id, seq) DO UPDATE SET step = excluded.step,
                 round = excluded.round, bound = excluded.bound,
                 candidate = excluded.candidate, run_id = excluded.run_id",
            vals![
                r.bisection_id,
                r.seq,
                r.step,
                r.round,
                r.bound,
                r.candidate,
                r.run_id
            ],
        )?;
        Ok(())
    }

    /// A bisection's rounds, in order.
    pub fn bisection_runs(&self, id: i64) -> Result<Vec<BisectionRunRow>> {
        self.query(
            &format!("{BISECTION_RUN_SELECT} WHERE bisection_id = ?1 ORDER BY seq"),
            vals![id],
        )?
        .iter()
        .map(bisection_run_row)
        .collect()
    }

    /// The bisection rounds a run measured (none for a run of no
    /// bisection), in bisection and round order.
    pub fn bisection_rounds_of_run(&self, run_id: i64) -> Result<Vec<BisectionRunRow>> {
        self.query(
            &format!("{BISECTION_RUN_SELECT} WHERE run_id = ?1 ORDER BY bisection_id, seq"),
            vals![run_id],
        )?
        .iter()
        .map(bisection_run_row)
        .collect()
    }
}
