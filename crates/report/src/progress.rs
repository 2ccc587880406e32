//! How far a run has got, from what it stored: its expanded plan (the
//! units in execution order, each with the time it was expected to take)
//! against the repetitions recorded so far.

use benchlab_core::plan::Unit;
use benchlab_core::resolved::ResolvedPlan;
use benchlab_store::{RunStatus, Store, UnitKey};

use crate::load::LoadError;

/// How far a run has got, in units (one repetition of one point under one
/// configuration).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Progress {
    /// Units stored (failed ones included).
    pub done: usize,
    /// Units in the plan.
    pub total: usize,
    /// Estimated seconds left (None when nothing has run yet, or the run
    /// is not running).
    pub left_s: Option<f64>,
}

/// Units done and planned, and the time left: the plan's guess for the
/// units still to run, times the ratio of the wall time the run has taken
/// since its first repetition to the plan's guess for the units done (as
/// `benchlab run`'s bar corrects its guesses, in one ratio for the whole
/// run). Points that adaptive repetitions stopped early count as still to
/// run until the run ends; the gap of a resumed run counts as time taken.
/// None for a run whose plan holds no expanded points (an imported run).
pub fn progress(store: &Store, run_id: i64) -> Result<Option<Progress>, LoadError> {
    let run = store.run(run_id)?;
    let Some(text) = store.plan(run_id)? else {
        return Ok(None);
    };
    let stored = ResolvedPlan::from_json(&text).map_err(|e| LoadError::Unreadable {
        run: run_id,
        why: e.to_string(),
    })?;
    let Some(plan) = stored.expanded else {
        return Ok(None);
    };
    let done = store.done_units(run_id)?;
    let (finished, todo): (Vec<&Unit>, Vec<&Unit>) = plan
        .units
        .iter()
        .partition(|u| done.contains(&UnitKey::of(&plan, u)));
    let left_s = if run.status == RunStatus::Running && !finished.is_empty() {
        let first = store
            .samples(run_id)?
            .iter()
            .filter_map(|s| epoch_s(&s.started_at))
            .fold(f64::INFINITY, f64::min);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let guessed_done = plan.expected_s(finished.iter().copied());
        let ratio = if first.is_finite() && guessed_done > 0.0 {
            ((now - first) / guessed_done).max(0.0)
        } else {
            1.0
        };
        Some(plan.expected_s(todo.iter().copied()) * ratio)
    } else {
        None
    };
    Ok(Some(Progress {
        done: finished.len(),
        total: plan.units.len(),
        left_s,
    }))
}

/// Seconds since the epoch of an RFC 3339 UTC time as benchlab writes it
/// (`2026-11-21T08:23:05.123Z`); the inverse of
/// [`benchlab_core::units::rfc3339`], with Howard Hinnant's
/// `days_from_civil`.
pub(crate) fn epoch_s(s: &str) -> Option<f64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':');
    let (h, min) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let sec: f64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + min * 60) as f64 + sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_inverts_rfc3339() {
        for secs in [0u64, 86_399, 951_782_400, 1_795_000_123] {
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(secs * 1000 + 250);
            let s = benchlab_core::units::rfc3339(t);
            assert_eq!(epoch_s(&s), Some(secs as f64 + 0.25), "{s}");
        }
        for bad in [
            "",
            "2026-13-01T00:00:00Z",
            "2026-01-01 00:00:00Z",
            "x-y-zTa:b:cZ",
        ] {
            assert_eq!(epoch_s(bad), None, "{bad}");
        }
    }
}
