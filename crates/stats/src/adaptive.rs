//! The adaptive-repetition stop rule: repeat a point until the confidence
//! interval of its headline figure is narrow enough, within a minimum and a
//! maximum number of repetitions.
//!
//! The rule uses the Student-t interval of the mean (see
//! [`crate::Summary::mean_ci`]) because it exists from two repetitions on and
//! shrinks smoothly with n; the order-statistic interval of the median only
//! reaches 95 % from six repetitions and narrows in jumps. This is the
//! rule netperf applies with `-I 95,2 -i max,min` ("repeat until the 95 %
//! interval is within ±1 % of the mean, between min and max iterations";
//! `netlib.c: calculate_confidence()`), with the width given as the whole
//! half-width in percent.

use serde::{Deserialize, Serialize};

use crate::summary::summarize;

/// When to stop repeating a point.
///
/// Invariant (checked by [`StopRule::new`]): `1 <= min <= max`,
/// `target_ci_pct > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StopRule {
    /// Never stop before this many successful repetitions.
    pub min: u32,
    /// Always stop after this many repetitions.
    pub max: u32,
    /// Stop once the 95 % interval's half-width is at most this percentage
    /// of the mean's magnitude.
    pub target_ci_pct: f64,
}

impl StopRule {
    /// A checked rule; `None` unless `1 <= min <= max` and
    /// `target_ci_pct` is positive and finite.
    pub fn new(min: u32, max: u32, target_ci_pct: f64) -> Option<StopRule> {
        (min >= 1 && min <= max && target_ci_pct.is_finite() && target_ci_pct > 0.0).then_some(
            StopRule {
                min,
                max,
                target_ci_pct,
            },
        )
    }

    /// One sentence for reports: how many repetitions each figure got.
    pub fn describe(&self) -> String {
        format!(
            "adaptive: at least {} and at most {} repetitions per point, stopping once the 95 % confidence interval of the mean is within ±{}% of it",
            self.min, self.max, self.target_ci_pct
        )
    }
}

/// What [`should_stop`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopDecision {
    /// Run another repetition.
    Continue,
    /// The interval is narrow enough.
    TargetReached,
    /// `max` repetitions were done (successful or not).
    CapReached,
}

/// The stop rule. `values` are the headline figures of the successful
/// repetitions so far; `attempts` counts every repetition run, failed ones
/// included (so that a point that keeps failing stops at the cap).
///
/// ```
/// use benchlab_stats::{should_stop, StopDecision, StopRule};
/// let rule = StopRule::new(3, 10, 2.0).unwrap();
/// assert_eq!(should_stop(&[100.0, 101.0], 2, &rule), StopDecision::Continue);
/// assert_eq!(should_stop(&[100.0, 100.5, 100.2], 3, &rule), StopDecision::TargetReached);
/// assert_eq!(should_stop(&[100.0, 150.0, 60.0], 10, &rule), StopDecision::CapReached);
/// ```
pub fn should_stop(values: &[f64], attempts: u32, rule: &StopRule) -> StopDecision {
    if values.len() >= rule.min as usize {
        if let Some(hw) = half_width_pct(values) {
            if hw <= rule.target_ci_pct {
                return StopDecision::TargetReached;
            }
        }
    }
    if attempts >= rule.max {
        StopDecision::CapReached
    } else {
        StopDecision::Continue
    }
}

/// Half-width of the 95 % Student-t interval of the mean, in percent of
/// |mean|. `None` for fewer than two values, non-finite values or a zero
/// mean.
pub fn half_width_pct(values: &[f64]) -> Option<f64> {
    let s = summarize(values)?;
    let ci = s.mean_ci?;
    if s.mean == 0.0 {
        return None;
    }
    Some((ci.hi - s.mean) / s.mean.abs() * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 100, 102, 98: mean 100, s = 2, half-width = 4.303 · 2/√3 = 4.969 %.
    #[test]
    fn half_width_known_value() {
        let hw = half_width_pct(&[100.0, 102.0, 98.0]).unwrap();
        assert!((hw - 4.303 * 2.0 / 3.0_f64.sqrt()).abs() < 1e-9, "{hw}");
        let rule = StopRule::new(3, 10, 5.0).unwrap();
        assert_eq!(
            should_stop(&[100.0, 102.0, 98.0], 3, &rule),
            StopDecision::TargetReached
        );
        let rule = StopRule::new(3, 10, 4.9).unwrap();
        assert_eq!(
            should_stop(&[100.0, 102.0, 98.0], 3, &rule),
            StopDecision::Continue
        );
    }

    #[test]
    fn min_is_respected_even_when_constant() {
        let rule = StopRule::new(3, 5, 1.0).unwrap();
        assert_eq!(should_stop(&[5.0, 5.0], 2, &rule), StopDecision::Continue);
        assert_eq!(
            should_stop(&[5.0, 5.0, 5.0], 3, &rule),
            StopDecision::TargetReached
        );
    }

    #[test]
    fn failures_count_towards_the_cap() {
        let rule = StopRule::new(3, 5, 1.0).unwrap();
        assert_eq!(should_stop(&[], 4, &rule), StopDecision::Continue);
        assert_eq!(should_stop(&[], 5, &rule), StopDecision::CapReached);
    }

    #[test]
    fn invalid_rules() {
        assert!(StopRule::new(0, 3, 1.0).is_none());
        assert!(StopRule::new(4, 3, 1.0).is_none());
        assert!(StopRule::new(1, 3, 0.0).is_none());
        assert!(StopRule::new(1, 3, f64::NAN).is_none());
    }
}
