//! What the engine tells of a run's progress, as it goes.

use std::fmt;

/// One repetition to run, as the run's estimate sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlannedUnit {
    /// Index of its workload in the study.
    pub workload: usize,
    /// Its expected duration, in seconds.
    pub expected_s: f64,
}

/// A run is about to run its repetitions.
#[derive(Debug, Clone, PartialEq)]
pub struct RunStart {
    /// The repetitions left to run, in order.
    pub units: Vec<PlannedUnit>,
    /// How many were done before (a resumed run).
    pub already: usize,
}

/// A round of the until-decided design is about to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoundStart {
    /// The round, from 0.
    pub round: u32,
    /// Points (across configurations) still undecided, which it runs.
    pub points: usize,
    /// Points in all.
    pub rows: usize,
    /// Its expected duration, in seconds.
    pub expected_s: f64,
}

/// One repetition: which, of what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitInfo<'a> {
    /// Its index among [`RunStart::units`].
    pub index: usize,
    /// The configuration's name.
    pub configuration: &'a str,
    /// The workload's name.
    pub workload: &'a str,
    /// The point's label.
    pub point: &'a str,
    /// The repetition, from 0.
    pub repetition: u32,
    /// The point's repetitions.
    pub repetitions: u32,
}

impl fmt::Display for UnitInfo<'_> {
    /// `configuration · workload · point · rep n/N`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} · {} · {} · rep {}/{}",
            self.configuration,
            self.workload,
            self.point,
            self.repetition + 1,
            self.repetitions
        )
    }
}

/// A sample's headline figure: its workload's first table metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Headline {
    /// The metric's name.
    pub metric: &'static str,
    /// Its value.
    pub value: f64,
    /// Decimals shown in tables.
    pub decimals: usize,
}

/// How a repetition ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnitResult<'a> {
    /// A sample was stored, with its headline figure if it has one.
    Ok(Option<Headline>),
    /// The repetition could not run here (recorded as skipped).
    Skipped(&'a str),
    /// The repetition failed.
    Failed(&'a str),
}

impl fmt::Display for UnitResult<'_> {
    /// `metric = value`, `ok`, `skipped: reason` or `FAILED: reason`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnitResult::Ok(Some(h)) => write!(f, "{} = {:.*}", h.metric, h.decimals, h.value),
            UnitResult::Ok(None) => f.write_str("ok"),
            UnitResult::Skipped(reason) => write!(f, "skipped: {reason}"),
            UnitResult::Failed(reason) => write!(f, "FAILED: {reason}"),
        }
    }
}

/// Told of a run's progress. Called on the engine's thread, between
/// repetitions, never inside a measured interval.
pub trait Observer {
    /// The repetitions about to run.
    fn start(&mut self, run: &RunStart);
    /// A repetition begins.
    fn begin(&mut self, unit: &UnitInfo<'_>);
    /// A repetition ended (and was stored).
    fn end(&mut self, unit: &UnitInfo<'_>, result: &UnitResult<'_>);
    /// Repetition `index` is not needed (adaptive repetitions stopped its
    /// point).
    fn skip(&mut self, index: usize);
    /// No more repetitions will run.
    fn finish(&mut self);
    /// Something the user should read about the run that is not a
    /// repetition: a configuration's settings applied, skipped or failed,
    /// a revert that failed, an earlier run's settings restored. The
    /// engine prints nothing itself; this is how it speaks.
    fn note(&mut self, _text: &str) {}
    /// A round of the until-decided design begins (its repetitions follow
    /// with a [`Observer::start`] of their own).
    fn round(&mut self, _round: &RoundStart) {}
}

/// An observer that is told nothing worth keeping.
impl Observer for () {
    fn start(&mut self, _: &RunStart) {}
    fn begin(&mut self, _: &UnitInfo<'_>) {}
    fn end(&mut self, _: &UnitInfo<'_>, _: &UnitResult<'_>) {}
    fn skip(&mut self, _: usize) {}
    fn finish(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_and_result_read_as_the_progress_lines_always_did() {
        let u = UnitInfo {
            index: 0,
            configuration: "a",
            workload: "w",
            point: "size=1",
            repetition: 1,
            repetitions: 3,
        };
        assert_eq!(u.to_string(), "a · w · size=1 · rep 2/3");
        let h = Headline {
            metric: "mb_s",
            value: 1.23456,
            decimals: 2,
        };
        assert_eq!(UnitResult::Ok(Some(h)).to_string(), "mb_s = 1.23");
        assert_eq!(UnitResult::Ok(None).to_string(), "ok");
        assert_eq!(UnitResult::Skipped("x").to_string(), "skipped: x");
        assert_eq!(UnitResult::Failed("y").to_string(), "FAILED: y");
    }
}
