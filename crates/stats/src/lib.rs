//! Pure statistics for benchlab.
//!
//! Everything in this crate is a pure function of its arguments: no I/O, no
//! clocks, no global state; the bootstrap's pseudo-random draws are seeded
//! from the data, so results are reproducible. The crate knows nothing of
//! workloads, stores or reports; those crates feed it plain `f64` samples and
//! render what comes back.
//!
//! # What is here
//!
//! * [`summarize`] — n, mean, sample standard deviation, min, max, median,
//!   coefficient of variation, a Student-t confidence interval for the mean
//!   and a distribution-free confidence interval for the median.
//! * Building blocks: [`sum`], [`mean`], [`median`], [`percentile`],
//!   [`geometric_mean`], [`student_t_975`].
//! * Aggregates as the seeds use them: [`geometric_mean`] over sub-tests
//!   (seed 001's 13 IOzone tests), [`mean`] over sizes (seed 000's
//!   "Average" rows), [`sum`] or [`mean`] over targets (seed 003).
//! * Run selection as the published studies do it: [`median_run`] ("we ran
//!   the test three times and report the results from the median run") and
//!   [`median_stddev_run`] ("chose the run which corresponded to the median
//!   standard deviation").
//! * Comparisons: [`advantage_pct`] reproduces the "% advantage" columns of
//!   the published reports; [`compare`] adds a confidence interval for the
//!   advantage and a [`Verdict`] that calls a difference real only when the
//!   whole interval lies outside the noise band and a rank test
//!   ([`mann_whitney`]) does not contradict it, "no difference" only when
//!   the whole interval lies inside the band, and "inconclusive" (with
//!   [`repetitions_to_decide`]) when it straddles the band;
//!   [`bootstrap_ratio_ci`] gives the interval of the ratio of medians;
//!   [`compare_blocked`] compares configurations that ran in blocks, with
//!   the drift between blocks in the interval ([`block_spread`]) or, with
//!   one block each, declared unknown ([`Drift`]).
//! * History: [`change_points`] finds where a series of runs changed
//!   (E-Divisive means with a seeded permutation test).
//! * Adaptive repetitions: [`should_stop`] under a [`StopRule`].
//! * Decide, then stop: [`Plan::decide`] under a [`SequentialRule`] gives
//!   each comparison's [`Outcome`] after every round or block pair —
//!   better or worse by more than the margin, equivalent within it,
//!   undecided when the budget is spent, or continue — with the error
//!   rate kept although it looks after every unit.
//!
//! # Conventions
//!
//! * A sample that is empty or holds a non-finite value (NaN, ±∞) has no
//!   statistics: the functions return `None` rather than a NaN that would
//!   leak into tables and JSON. The one exception is [`sum`], an aggregate
//!   for which the empty sum is 0 and IEEE propagation is the useful answer.
//! * Confidence intervals are two-sided. Their `level` is the nominal level
//!   (0.95) for the parametric intervals and the exact achieved coverage for
//!   the order-statistic interval of the median, which can never be exactly
//!   95 % (see [`Summary::median_ci`]).
//! * Every method and constant cites its source next to the code.

#![warn(missing_docs)]

mod adaptive;
mod blocks;
mod bootstrap;
mod changepoint;
mod compare;
mod dist;
mod rank;
mod runs;
mod sequential;
mod spending;
mod summary;
mod t_dist;

pub use adaptive::{half_width_pct, should_stop, StopDecision, StopRule};
pub use blocks::{block_spread, compare_blocked, BlockSpread, Blocked, Drift};
pub use bootstrap::{bootstrap_ratio_ci, Statistic, BOOTSTRAP_RESAMPLES};
pub use changepoint::{change_points, ChangePoint, ChangePointOptions, Segmentation};
pub use compare::{
    advantage_pct, compare, repetitions_to_decide, Better, Comparison, Verdict, DEFAULT_NOISE_PCT,
    MAX_REPETITIONS_ESTIMATE, SIGNIFICANCE,
};
pub use rank::{mann_whitney, RankTest};
pub use runs::{median_run, median_stddev_run};
pub use sequential::{
    decide, fixed_design_units, Decision, Design, Outcome, Plan, RuleError, SequentialRule, Unit,
    UnitKind, Units, DEFAULT_ALPHA, DEFAULT_MARGIN_PCT, MDE_POWER,
};
pub use summary::{geometric_mean, mean, median, percentile, sum, summarize, Interval, Summary};
pub use t_dist::student_t_975;
