//! What the until-decided design found, as the engine stores it and the
//! report reads it: per comparison its verdict, margin and repetitions,
//! per run how much was decided and at what cost.

use serde::{Deserialize, Serialize};

/// A comparison's verdict under the sequential rule, from the compared
/// configuration's point of view against the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decided {
    /// Better by more than nothing, beyond the margin's rule.
    Better,
    /// Worse, likewise.
    Worse,
    /// The difference lies within ±margin.
    Equivalent,
    /// The budget ran out first.
    Undecided,
}

impl Decided {
    /// The word stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Decided::Better => "better",
            Decided::Worse => "worse",
            Decided::Equivalent => "equivalent",
            Decided::Undecided => "undecided",
        }
    }

    /// The verdict stored as `text`.
    pub fn parse(text: &str) -> Option<Decided> {
        Some(match text {
            "better" => Decided::Better,
            "worse" => Decided::Worse,
            "equivalent" => Decided::Equivalent,
            "undecided" => Decided::Undecided,
            _ => return None,
        })
    }

    /// Whether more rounds could change it.
    pub fn is_decided(self) -> bool {
        self != Decided::Undecided
    }
}

/// One comparison of one point: configuration `config` against the
/// first, on `metric`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonDecision {
    /// The compared configuration (index in the study; never 0).
    pub config: usize,
    /// The workload (index in the study).
    pub workload: usize,
    /// The point within the workload.
    pub point: usize,
    /// The metric compared.
    pub metric: String,
    /// The verdict.
    pub verdict: Decided,
    /// Successful repetitions per side it rests on (the fewer of the two).
    pub repetitions: u32,
    /// The margin it was decided against, in percent.
    pub margin_pct: f64,
    /// The compared configuration's advantage, in percent.
    pub advantage_pct: Option<f64>,
    /// The interval of the advantage the rule used, in percent.
    pub ci_lo_pct: Option<f64>,
    /// Its upper end.
    pub ci_hi_pct: Option<f64>,
    /// For an undecided comparison: the smallest difference the data so
    /// far would detect at 80 % power, in percent.
    pub mde_pct: Option<f64>,
}

/// Why an until-decided run stopped adding rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Every comparison of every point was decided.
    AllDecided,
    /// The undecided points reached `max_repetitions`.
    MaxRepetitions,
    /// Another round would have passed `max_duration`.
    MaxDuration,
    /// Ctrl-C, or a failed point with `on_error = "stop"`.
    Stopped,
}

impl StopReason {
    /// In words, for events and reports.
    pub fn text(self) -> &'static str {
        match self {
            StopReason::AllDecided => "every comparison decided",
            StopReason::MaxRepetitions => "max_repetitions reached",
            StopReason::MaxDuration => "max_duration reached",
            StopReason::Stopped => "the run was stopped",
        }
    }
}

/// What an until-decided run cost and found, for the report's header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesignSummary {
    /// Comparisons in all (every point, metric and configuration against
    /// the first, the A/A control's included).
    pub comparisons: u32,
    /// Of those, decided.
    pub decided: u32,
    /// Rounds run.
    pub rounds: u32,
    /// Repetitions run (units, every configuration's).
    pub repetitions: u32,
    /// Seconds spent running repetitions.
    pub elapsed_s: f64,
    /// Repetitions the study's fixed design would have run.
    pub fixed_repetitions: u32,
    /// Seconds the fixed design would have taken (the plan's estimate).
    pub fixed_s: f64,
    /// Why it stopped.
    pub stop: StopReason,
}
