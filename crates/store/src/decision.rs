//! The until-decided design's results: each comparison's verdict as the
//! sequential rule left it after a run's last round, and the run's cost
//! against the fixed design.

use benchlab_core::decision::{ComparisonDecision, Decided, DesignSummary, StopReason};

use crate::sql::{vals, Row};
use crate::{Result, Store, StoreError};

fn stop_name(s: StopReason) -> &'static str {
    match s {
        StopReason::AllDecided => "all_decided",
        StopReason::MaxRepetitions => "max_repetitions",
        StopReason::MaxDuration => "max_duration",
        StopReason::Stopped => "stopped",
    }
}

fn stop_parse(s: &str) -> Result<StopReason> {
    Ok(match s {
        "all_decided" => StopReason::AllDecided,
        "max_repetitions" => StopReason::MaxRepetitions,
        "max_duration" => StopReason::MaxDuration,
        "stopped" => StopReason::Stopped,
        other => return Err(StoreError::Type(format!("stop reason `{other}`"))),
    })
}

fn decision_row(r: &Row) -> Result<ComparisonDecision> {
    let verdict = r.text(4)?;
    Ok(ComparisonDecision {
        config: r.int(0)? as usize,
        workload: r.int(1)? as usize,
        point: r.int(2)? as usize,
        metric: r.text(3)?,
        verdict: Decided::parse(&verdict)
            .ok_or_else(|| StoreError::Type(format!("verdict `{verdict}`")))?,
        repetitions: r.int(5)? as u32,
        margin_pct: r.real(6)?,
        advantage_pct: r.opt_real(7)?,
        ci_lo_pct: r.opt_real(8)?,
        ci_hi_pct: r.opt_real(9)?,
        mde_pct: r.opt_real(10)?,
    })
}

impl Store {
    /// Stores the verdicts of a run's comparisons after a round, each
    /// replacing the one stored before for the same comparison.
    pub fn set_decisions(&self, run_id: i64, rows: &[ComparisonDecision]) -> Result<()> {
        self.transaction(|tx| {
            for d in rows {
                tx.exec(
                    "INSERT INTO decision (run_id, config_idx, workload_idx, point_idx, metric, verdict, repetitions, margin_pct, advantage_pct, ci_lo_pct, ci_hi_pct, mde_pct)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                     ON CONFLICT (run_id, config_idx, workload_idx, point_idx, metric) DO UPDATE SET
                       verdict = excluded.verdict, repetitions = excluded.repetitions,
                       margin_pct = excluded.margin_pct, advantage_pct = excluded.advantage_pct,
                       ci_lo_pct = excluded.ci_lo_pct, ci_hi_pct = excluded.ci_hi_pct,
                       mde_pct = excluded.mde_pct",
                    vals![
                        run_id,
                        d.config,
                        d.workload,
                        d.point,
                        d.metric.as_str(),
                        d.verdict.as_str(),
                        d.repetitions,
                        d.margin_pct,
                        d.advantage_pct,
                        d.ci_lo_pct,
                        d.ci_hi_pct,
                        d.mde_pct
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// A run's stored verdicts (none for a run of the fixed design), by
    /// workload, point, configuration and metric.
    pub fn decisions(&self, run_id: i64) -> Result<Vec<ComparisonDecision>> {
        self.query(
            "SELECT config_idx, workload_idx, point_idx, metric, verdict, repetitions, margin_pct, advantage_pct, ci_lo_pct, ci_hi_pct, mde_pct
             FROM decision WHERE run_id = ?1
             ORDER BY workload_idx, point_idx, config_idx, metric",
            vals![run_id],
        )?
        .iter()
        .map(decision_row)
        .collect()
    }

    /// Stores what an until-decided run cost and found (replacing what an
    /// earlier session of it stored).
    pub fn set_design_summary(&self, run_id: i64, s: &DesignSummary) -> Result<()> {
        self.exec(
            "INSERT INTO run_design (run_id, comparisons, decided, rounds, repetitions, elapsed_s, fixed_repetitions, fixed_s, stop)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (run_id) DO UPDATE SET
               comparisons = excluded.comparisons, decided = excluded.decided,
               rounds = excluded.rounds, repetitions = excluded.repetitions,
               elapsed_s = excluded.elapsed_s, fixed_repetitions = excluded.fixed_repetitions,
               fixed_s = excluded.fixed_s, stop = excluded.stop",
            vals![
                run_id,
                s.comparisons,
                s.decided,
                s.rounds,
                s.repetitions,
                s.elapsed_s,
                s.fixed_repetitions,
                s.fixed_s,
                stop_name(s.stop)
            ],
        )?;
        Ok(())
    }

    /// What an until-decided run cost and found; `None` for a run of the
    /// fixed design.
    pub fn design_summary(&self, run_id: i64) -> Result<Option<DesignSummary>> {
        let rows = self.query(
            "SELECT comparisons, decided, rounds, repetitions, elapsed_s, fixed_repetitions, fixed_s, stop
             FROM run_design WHERE run_id = ?1",
            vals![run_id],
        )?;
        let Some(r) = rows.first() else {
            return Ok(None);
        };
        Ok(Some(DesignSummary {
            comparisons: r.int(0)? as u32,
            decided: r.int(1)? as u32,
            rounds: r.int(2)? as u32,
            repetitions: r.int(3)? as u32,
            elapsed_s: r.real(4)?,
            fixed_repetitions: r.int(5)? as u32,
            fixed_s: r.real(6)?,
            stop: stop_parse(&r.text(7)?)?,
        }))
    }
}
