//! Decide, then stop: the sequential verdict of a comparison, looked at
//! after every unit of repetitions (a round of alternating repetitions, or
//! a pair of adjacent blocks), with the error rate kept at α however many
//! looks are taken and whenever the comparison stops.
//!
//! # The unit
//!
//! A unit holds A's and B's repetitions run close together in time: one
//! round when the configurations alternate, one block of each when they
//! run in blocks (A B, then B A, …, the ABBA order). Its figures are the
//! two sides' means within the unit. Whatever drifts on the machine moves
//! both figures of a unit alike, so the comparison works on the units'
//! pairs: Fieller's interval for the ratio of A's mean to B's with the
//! covariance of the pairs (E. C. Fieller, "Some problems in interval
//! estimation", JRSS B 16 (1954) 175–185, the correlated case), the
//! variance estimated from the units themselves with n − 1 degrees of
//! freedom. A drift between the two halves of a unit (B's block runs
//! after A's) alternates in sign from one block pair to the next, so it
//! adds to the spread of the units rather than to the difference; the
//! same holds for the random order within a round.
//!
//! # Looking after every unit
//!
//! The interval at look n uses the group-sequential critical value of
//! look n ([`crate::spending`]): the intervals of all looks cover the true
//! ratio together with probability 1 − α (repeated confidence intervals,
//! C. Jennison and B. W. Turnbull, "Interim analyses: the repeated
//! confidence interval approach", JRSS B 51 (1989) 305–361), so a verdict
//! taken at whichever look first decides has the error rate of one
//! interval.
//!
//! # Verdicts
//!
//! With the margin m, the smallest difference that matters:
//!
//! * **better** when the whole 1 − α repeated interval of A's advantage
//!   lies above +m; **worse** when it lies below −m;
//! * **equivalent** when the whole 1 − 2α repeated interval lies inside
//!   (−m, +m): the two one-sided tests of D. J. Schuirmann (J.
//!   Pharmacokinetics and Biopharmaceutics 15 (1987) 657–680), made
//!   sequential as in C. Jennison and B. W. Turnbull, "Sequential
//!   equivalence testing and repeated confidence intervals, with
//!   applications to normal and binary responses", Biometrics 49 (1993)
//!   31–43;
//! * **undecided** when the budget of units is spent first, with the
//!   smallest difference the data so far could have called at 80 % power;
//! * **continue** otherwise.
//!
//! Identical configurations are then called better or worse at most α/2
//! of the time each, and a difference of at least the margin is called
//! equivalent at most α of the time.

use serde::{Deserialize, Serialize};

use crate::compare::{advantage_pct, ratio_to_pct, Better};
use crate::dist::{normal_upper_quantile, t_upper_quantile};
use crate::spending::{critical_values, FIRST_LOOK};
use crate::summary::Interval;

/// The margin a study gets when it names none, in percent: the smallest
/// difference that matters (docs/methods.md says why 2 %).
pub const DEFAULT_MARGIN_PCT: f64 = 2.0;

/// The error rate of the sequential rule: at most this share of
/// comparisons of identical configurations is called better or worse.
pub const DEFAULT_ALPHA: f64 = 0.05;

/// The power at which [`Decision::mde_pct`] is stated.
pub const MDE_POWER: f64 = 0.80;

/// What a unit of repetitions is, from the study's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitKind {
    /// One round: every configuration once, in a random order.
    Round,
    /// One block of each configuration, adjacent (ABBA order).
    BlockPair,
}

/// When the data are looked at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Design {
    /// After every unit, stopping at the first decision.
    #[default]
    Sequential,
    /// Once, after the whole budget: the classic fixed design (a seed's
    /// published repetitions), judged by the same verdicts with plain
    /// 1 − α and 1 − 2α intervals.
    Fixed,
}

/// The sequential verdict of a comparison, from A's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A is better than B by more than the margin.
    Better,
    /// A is worse than B by more than the margin.
    Worse,
    /// A and B differ by less than the margin.
    Equivalent,
    /// The budget is spent and none of the above is shown.
    Undecided,
    /// Not decided yet and the budget allows more units.
    Continue,
}

impl Outcome {
    /// Whether the comparison is over (anything but [`Outcome::Continue`]).
    pub fn is_final(self) -> bool {
        self != Outcome::Continue
    }

    /// Whether a difference or an equivalence was shown.
    pub fn is_decided(self) -> bool {
        matches!(self, Outcome::Better | Outcome::Worse | Outcome::Equivalent)
    }
}

/// Why a [`SequentialRule`] cannot be built. The messages name what is
/// allowed; the caller adds the file and key.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleError {
    /// The margin is negative, NaN or infinite.
    Margin(f64),
    /// α is not in (0, 0.5).
    Alpha(f64),
    /// The budget allows no look at which a verdict is possible.
    BudgetTooSmall {
        /// The budget asked for, in units.
        max_units: usize,
        /// The fewest units at which a verdict is possible.
        min_units: usize,
    },
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuleError::Margin(m) => write!(
                f,
                "margin {m} is not allowed: a margin is a finite percentage of 0 or more, e.g. \"2%\""
            ),
            RuleError::Alpha(a) => write!(
                f,
                "error rate {a} is not allowed: it must be above 0 and below 0.5, e.g. 0.05"
            ),
            RuleError::BudgetTooSmall {
                max_units,
                min_units,
            } => write!(
                f,
                "a budget of {max_units} units (rounds or block pairs) is too small: no verdict \
                 is possible before {min_units}"
            ),
        }
    }
}

impl std::error::Error for RuleError {}

/// When a comparison is decided, and when to give up.
///
/// Build with [`SequentialRule::new`]; [`SequentialRule::plan`] computes
/// the critical values once for many calls of [`Plan::decide`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequentialRule {
    /// The smallest difference that matters, in percent (≥ 0).
    pub margin_pct: f64,
    /// The error rate (see [`DEFAULT_ALPHA`]).
    pub alpha: f64,
    /// The budget: at most this many units per comparison.
    pub max_units: usize,
    /// The number of units the error rate was planned for: the spending
    /// function's scale. [`SequentialRule::new`] sets it to `max_units`;
    /// [`SequentialRule::extended`] keeps it when a finished comparison is
    /// continued, so that the looks already taken keep their meaning.
    pub planned_units: usize,
    /// What a unit is.
    pub unit: UnitKind,
    /// When the data are looked at.
    #[serde(default)]
    pub design: Design,
}

impl SequentialRule {
    /// A checked rule at [`DEFAULT_ALPHA`] planned for its budget.
    pub fn new(margin_pct: f64, max_units: usize, unit: UnitKind) -> Result<Self, RuleError> {
        Self::with_alpha(margin_pct, DEFAULT_ALPHA, max_units, unit)
    }

    /// [`SequentialRule::new`] with another error rate.
    pub fn with_alpha(
        margin_pct: f64,
        alpha: f64,
        max_units: usize,
        unit: UnitKind,
    ) -> Result<Self, RuleError> {
        if !margin_pct.is_finite() || margin_pct < 0.0 {
            return Err(RuleError::Margin(margin_pct));
        }
        if !(alpha > 0.0 && alpha < 0.5) {
            return Err(RuleError::Alpha(alpha));
        }
        let rule = SequentialRule {
            margin_pct,
            alpha,
            max_units,
            planned_units: max_units.max(FIRST_LOOK),
            unit,
            design: Design::Sequential,
        };
        let min_units = rule.min_units();
        if max_units < min_units {
            return Err(RuleError::BudgetTooSmall {
                max_units,
                min_units,
            });
        }
        Ok(rule)
    }

    /// The classic fixed design of `units` units: one look at the end,
    /// with the same verdicts ([`Design::Fixed`]).
    pub fn fixed(margin_pct: f64, units: usize, unit: UnitKind) -> Result<Self, RuleError> {
        Ok(SequentialRule {
            design: Design::Fixed,
            ..Self::new(margin_pct, units, unit)?
        })
    }

    /// The same rule with a larger budget, for continuing a comparison
    /// that was undecided: the planned units stay, so the error rate of
    /// the whole sequence, old looks and new, stays at α.
    pub fn extended(&self, max_units: usize) -> SequentialRule {
        SequentialRule {
            max_units: max_units.max(self.max_units),
            ..self.clone()
        }
    }

    /// The fewest units at which any verdict is possible: the first look
    /// (two units, the fewest that estimate a spread). Noisy data need
    /// more; [`Decision::mde_pct`] says how far they are.
    pub fn min_units(&self) -> usize {
        FIRST_LOOK
    }

    /// The critical values for every look of the budget.
    pub fn plan(&self) -> Plan {
        let (decide, equivalent) = match self.design {
            Design::Sequential => (
                critical_values(self.alpha, self.planned_units, self.max_units),
                critical_values(2.0 * self.alpha, self.planned_units, self.max_units),
            ),
            Design::Fixed => {
                let once = |alpha: f64| {
                    let mut c = vec![f64::INFINITY; self.max_units + 1 - FIRST_LOOK];
                    c[self.max_units - FIRST_LOOK] =
                        t_upper_quantile(alpha / 2.0, self.max_units - 1);
                    c
                };
                (once(self.alpha), once(2.0 * self.alpha))
            }
        };
        Plan {
            rule: self.clone(),
            decide,
            equivalent,
            z_power: normal_upper_quantile(1.0 - MDE_POWER),
        }
    }

    /// One sentence for reports.
    pub fn describe(&self) -> String {
        let unit = match self.unit {
            UnitKind::Round => "rounds",
            UnitKind::BlockPair => "block pairs",
        };
        format!(
            "sequential: a look after every one of at most {} {unit}, each comparison stopped \
             once better or worse by more than {}% or equivalent within ±{}%, error rate {} %",
            self.max_units,
            self.margin_pct,
            self.margin_pct,
            self.alpha * 100.0
        )
    }
}

/// A [`SequentialRule`] with its critical values computed.
#[derive(Debug, Clone)]
pub struct Plan {
    rule: SequentialRule,
    /// Critical value (t scale) at look n = FIRST_LOOK + i, level 1 − α.
    decide: Vec<f64>,
    /// The same at level 1 − 2α, for equivalence.
    equivalent: Vec<f64>,
    /// The normal quantile of [`MDE_POWER`].
    z_power: f64,
}

/// One unit's figures: the means of A's and B's repetitions in it, and how
/// many there were.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Unit {
    /// A's mean in this unit.
    pub a: f64,
    /// B's mean in this unit.
    pub b: f64,
    /// A's repetitions in this unit.
    pub reps_a: u32,
    /// B's repetitions in this unit.
    pub reps_b: u32,
    /// The mean of ln of A's repetitions minus that of B's, when every
    /// repetition is positive: the unit's figure on the log scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_ratio: Option<f64>,
}

impl Unit {
    /// A round's unit: one repetition each.
    pub fn round(a: f64, b: f64) -> Unit {
        Unit {
            a,
            b,
            reps_a: 1,
            reps_b: 1,
            log_ratio: log_mean(&[a]).zip(log_mean(&[b])).map(|(a, b)| a - b),
        }
    }

    /// A unit from each side's repetitions in it; `None` when a side has
    /// none or a figure is not finite.
    pub fn from_repetitions(a: &[f64], b: &[f64]) -> Option<Unit> {
        Some(Unit {
            a: crate::summary::mean(a)?,
            b: crate::summary::mean(b)?,
            reps_a: a.len() as u32,
            reps_b: b.len() as u32,
            log_ratio: log_mean(a).zip(log_mean(b)).map(|(a, b)| a - b),
        })
    }
}

/// The mean of the logs, when every value is positive and finite.
fn log_mean(values: &[f64]) -> Option<f64> {
    let ok = !values.is_empty() && values.iter().all(|v| v.is_finite() && *v > 0.0);
    ok.then(|| values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64)
}

/// The units of a comparison so far, summed as they come (Welford's
/// updates of the means and co-moments: B. P. Welford, Technometrics 4
/// (1962) 419–420), so that a look costs the same however many units
/// came before it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Units {
    n: usize,
    a: f64,
    b: f64,
    m_aa: f64,
    m_ab: f64,
    m_bb: f64,
    reps_a: u32,
    reps_b: u32,
    all_finite: bool,
    /// Whether every unit has its log ratio, and their mean and
    /// co-moment (Welford's, as the others).
    all_log: bool,
    log_mean: f64,
    m_log: f64,
}

impl Units {
    /// No units yet.
    pub fn new() -> Units {
        Units {
            all_finite: true,
            all_log: true,
            ..Units::default()
        }
    }

    /// Adds the next unit in time order.
    pub fn push(&mut self, u: Unit) {
        self.all_finite &= u.a.is_finite() && u.b.is_finite();
        self.n += 1;
        let n = self.n as f64;
        let (da, db) = (u.a - self.a, u.b - self.b);
        self.a += da / n;
        self.b += db / n;
        self.m_aa += da * (u.a - self.a);
        self.m_ab += da * (u.b - self.b);
        self.m_bb += db * (u.b - self.b);
        self.reps_a += u.reps_a;
        self.reps_b += u.reps_b;
        match u.log_ratio.filter(|d| d.is_finite()) {
            Some(d) if self.all_log => {
                let dl = d - self.log_mean;
                self.log_mean += dl / n;
                self.m_log += dl * (d - self.log_mean);
            }
            _ => self.all_log = false,
        }
    }

    /// The mean of the units' log ratios and its standard error (NaN with
    /// one unit), when every unit has one.
    fn log_ratio(&self) -> Option<(f64, f64)> {
        (self.all_log && self.n >= 1).then(|| {
            let n = self.n as f64;
            let se = if self.n >= 2 {
                (self.m_log / (n - 1.0) / n).max(0.0).sqrt()
            } else {
                f64::NAN
            };
            (self.log_mean, se)
        })
    }

    /// How many units.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn moments(&self) -> Moments {
        let d = (self.n as f64 - 1.0).max(1.0);
        Moments {
            n: self.n as f64,
            a: self.a,
            b: self.b,
            s_aa: self.m_aa / d,
            s_ab: self.m_ab / d,
            s_bb: self.m_bb / d,
        }
    }
}

impl FromIterator<Unit> for Units {
    fn from_iter<I: IntoIterator<Item = Unit>>(iter: I) -> Units {
        let mut units = Units::new();
        for u in iter {
            units.push(u);
        }
        units
    }
}

/// The verdict of a comparison at one look, with what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The verdict.
    pub outcome: Outcome,
    /// A's advantage over B in percent, from the means over all units
    /// (as [`advantage_pct`]).
    pub advantage_pct: f64,
    /// The repeated confidence interval of the advantage at level 1 − α
    /// (better, worse); `None` when unbounded.
    pub ci_pct: Option<Interval>,
    /// The repeated interval at level 1 − 2α (equivalent); `None` when
    /// unbounded.
    pub equivalence_ci_pct: Option<Interval>,
    /// The margin the verdict used, in percent.
    pub margin_pct: f64,
    /// Units looked at (this is look number `units`).
    pub units: usize,
    /// The budget in units.
    pub max_units: usize,
    /// A's repetitions in those units.
    pub repetitions_a: u32,
    /// B's repetitions in those units.
    pub repetitions_b: u32,
    /// For an undecided (or continuing) comparison: the smallest true
    /// advantage, in percent beyond which (±) the rule would call better
    /// or worse with [`MDE_POWER`] probability from data as spread as
    /// these at this look. `None` when decided or when too few units
    /// give an interval.
    pub mde_pct: Option<f64>,
    /// The spread of one unit's advantage, in percent (the standard error
    /// of the advantage times √units): what [`fixed_design_units`] needs
    /// to say what a fixed design would have cost. `None` with one unit.
    #[serde(default)]
    pub unit_sd_pct: Option<f64>,
}

impl Plan {
    /// The rule this plan is for.
    pub fn rule(&self) -> &SequentialRule {
        &self.rule
    }

    /// The critical value of look `n` at level 1 − α (t scale); `None`
    /// before the first look or beyond the budget.
    pub fn critical(&self, n: usize) -> Option<f64> {
        n.checked_sub(FIRST_LOOK)
            .and_then(|i| self.decide.get(i))
            .copied()
    }

    /// The verdict after `units` (in time order; all of them so far).
    ///
    /// `None` when there are no units, a figure is not finite, B's mean
    /// is 0, or there are more units than the budget.
    pub fn decide(&self, units: &[Unit], better: Better) -> Option<Decision> {
        self.decide_units(&units.iter().copied().collect(), better)
    }

    /// [`Plan::decide`] from the units summed so far.
    pub fn decide_units(&self, units: &Units, better: Better) -> Option<Decision> {
        let n = units.len();
        if n == 0 || n > self.rule.max_units || !units.all_finite {
            return None;
        }
        let m = units.moments();
        // Positive figures (every throughput, latency and rate) are
        // compared on the log scale: exp(mean d ± c·se(d)) with d a unit's
        // mean log of A's repetitions minus that of B's (a paired t
        // interval of the log ratio). Noise on these figures is
        // multiplicative (a latency doubles, it does not gain 10 µs), and
        // Fieller's interval on the raw scale becomes unbounded as soon as
        // B's mean is not clear of 0 at the look's critical value, which a
        // noisy B at the first looks often is (found by the demo:
        // split-CPU latencies 4 to 9 times the same-CPU ones were
        // "undecided, could detect ±1,800 %"). Logs of repetitions, not of
        // a unit's means: the log of a mean is biased by its spread, and
        // unequally for sides with unequal repetitions per unit (A's two
        // blocks against B's one with a control). Figures that may be 0 or
        // negative keep Fieller's interval of the ratio of the means.
        let log = units.log_ratio();
        let point = match log {
            Some((mean, _)) => advantage_pct(mean.exp(), 1.0, better)?,
            None => advantage_pct(m.a, m.b, better)?,
        };
        let interval = |c: Option<f64>, level: f64| {
            let c = c.filter(|c| c.is_finite())?;
            let (lo, hi, base) = match log {
                Some((mean, se)) => {
                    let half = c * se;
                    if !half.is_finite() {
                        return None;
                    }
                    ((mean - half).exp(), (mean + half).exp(), 1.0)
                }
                None => {
                    let (lo, hi) = m.fieller(c)?;
                    (lo, hi, m.b)
                }
            };
            let (p, q) = ratio_to_pct(lo, hi, base, better);
            Some(Interval {
                lo: p.min(point),
                hi: q.max(point),
                level,
            })
        };
        let index = n.checked_sub(FIRST_LOOK);
        let c = index.and_then(|i| self.decide.get(i).copied());
        let c_eq = index.and_then(|i| self.equivalent.get(i).copied());
        let ci = interval(c, 1.0 - self.rule.alpha);
        let eq = interval(c_eq, 1.0 - 2.0 * self.rule.alpha);
        let margin = self.rule.margin_pct;
        let outcome = match (&ci, &eq) {
            (Some(ci), _) if ci.lo > margin => Outcome::Better,
            (Some(ci), _) if ci.hi < -margin => Outcome::Worse,
            (_, Some(eq)) if eq.lo > -margin && eq.hi < margin => Outcome::Equivalent,
            _ if n >= self.rule.max_units => Outcome::Undecided,
            _ => Outcome::Continue,
        };
        // The advantage's standard error in percent: on the log scale
        // 100·se(ln ratio), else the delta method's.
        let se = (n >= 2)
            .then(|| match log {
                Some((_, se)) => Some(se * 100.0),
                None => m.se_ratio().map(|se| se / m.b.abs() * 100.0),
            })
            .flatten()
            .filter(|se| se.is_finite());
        let mde_pct = (!outcome.is_decided())
            .then(|| {
                let c = c.filter(|c| c.is_finite())?;
                let mde = margin + (c + self.z_power) * se?;
                mde.is_finite().then_some(mde)
            })
            .flatten();
        Some(Decision {
            outcome,
            advantage_pct: point,
            ci_pct: ci,
            equivalence_ci_pct: eq,
            margin_pct: margin,
            units: n,
            max_units: self.rule.max_units,
            repetitions_a: units.reps_a,
            repetitions_b: units.reps_b,
            mde_pct,
            unit_sd_pct: se.map(|se| se * (n as f64).sqrt()),
        })
    }
}

/// The units a fixed design (one look, [`Design::Fixed`]) needs to call a
/// true advantage of twice the margin better with probability `power`,
/// when one unit's advantage spreads by `unit_sd_pct` (normal
/// approximation: ((z(1 − α/2) + z(power))·sd / margin)², at least 2).
/// For reports' "the fixed design would have cost" and for `check`'s
/// planning. `None` when the margin is 0 or an argument is not finite.
///
/// ```
/// use benchlab_stats::fixed_design_units;
/// // 5 % noise per repetition, alternating: a round's advantage spreads
/// // by 5·√2 ≈ 7.1 %; with a 2 % margin, about 98 rounds.
/// assert_eq!(fixed_design_units(5.0 * 2f64.sqrt(), 2.0, 0.05, 0.8), Some(99));
/// ```
pub fn fixed_design_units(
    unit_sd_pct: f64,
    margin_pct: f64,
    alpha: f64,
    power: f64,
) -> Option<usize> {
    if !(unit_sd_pct.is_finite() && margin_pct.is_finite() && margin_pct > 0.0)
        || !(alpha > 0.0 && alpha < 1.0 && power > 0.0 && power < 1.0)
    {
        return None;
    }
    let z = normal_upper_quantile(alpha / 2.0) + normal_upper_quantile(1.0 - power);
    let n = (z * unit_sd_pct.abs() / margin_pct).powi(2).ceil();
    (n < 1e9).then_some((n as usize).max(FIRST_LOOK))
}

/// [`Plan::decide`] for a single call: computes the plan first. A caller
/// that looks after every unit should keep one [`Plan`] instead.
pub fn decide(units: &[Unit], better: Better, rule: &SequentialRule) -> Option<Decision> {
    rule.plan().decide(units, better)
}

/// Means, variances and covariance of the units' pairs (divisor n − 1;
/// 0 with one unit).
struct Moments {
    n: f64,
    a: f64,
    b: f64,
    s_aa: f64,
    s_ab: f64,
    s_bb: f64,
}

impl Moments {
    /// Fieller's interval for μ_A/μ_B at critical value `c`: the ρ with
    /// n·(ā − ρb̄)² ≤ c²·(s_aa − 2ρ·s_ab + ρ²·s_bb). `None` when the set is
    /// unbounded (B's mean not clear of 0 at this c).
    fn fieller(&self, c: f64) -> Option<(f64, f64)> {
        if !c.is_finite() {
            return None;
        }
        let k = c * c / self.n;
        let qa = self.b * self.b - k * self.s_bb;
        let qb = self.a * self.b - k * self.s_ab;
        let qc = self.a * self.a - k * self.s_aa;
        if qa <= 0.0 {
            return None;
        }
        let disc = (qb * qb - qa * qc).max(0.0).sqrt();
        let (lo, hi) = ((qb - disc) / qa, (qb + disc) / qa);
        (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
    }

    /// The standard error of the ratio's numerator A − ρ̂B per unit mean,
    /// s(A − ρ̂B)/√n (the delta method's standard error of ρ̂ times |b̄|).
    fn se_ratio(&self) -> Option<f64> {
        let r = self.a / self.b;
        let v = (self.s_aa - 2.0 * r * self.s_ab + r * r * self.s_bb).max(0.0) / self.n;
        v.is_finite().then(|| v.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(pairs: &[(f64, f64)]) -> Vec<Unit> {
        pairs.iter().map(|&(a, b)| Unit::round(a, b)).collect()
    }

    #[test]
    fn bad_rules_are_refused_with_what_is_allowed() {
        let e = SequentialRule::new(-1.0, 20, UnitKind::Round).unwrap_err();
        assert!(e.to_string().contains("0 or more"), "{e}");
        assert!(SequentialRule::new(f64::NAN, 20, UnitKind::Round).is_err());
        let e = SequentialRule::new(2.0, 1, UnitKind::Round).unwrap_err();
        assert_eq!(
            e,
            RuleError::BudgetTooSmall {
                max_units: 1,
                min_units: 2
            }
        );
        assert!(SequentialRule::with_alpha(2.0, 0.0, 20, UnitKind::Round).is_err());
        assert!(SequentialRule::new(0.0, 2, UnitKind::Round).is_ok());
    }

    #[test]
    fn a_clear_difference_is_called_and_stops() {
        let rule = SequentialRule::new(2.0, 30, UnitKind::Round).unwrap();
        let plan = rule.plan();
        let units = rounds(&[
            (110.0, 100.0),
            (111.0, 100.5),
            (109.5, 99.0),
            (110.2, 100.1),
            (110.8, 100.3),
            (109.9, 99.8),
        ]);
        let d = plan.decide(&units, Better::Higher).unwrap();
        assert_eq!(d.outcome, Outcome::Better, "{d:?}");
        assert!(d.ci_pct.as_ref().unwrap().lo > 2.0);
        assert_eq!((d.repetitions_a, d.repetitions_b, d.units), (6, 6, 6));
        assert_eq!(d.mde_pct, None);
        // Lower is better: the same data make A worse.
        let d = plan.decide(&units, Better::Lower).unwrap();
        assert_eq!(d.outcome, Outcome::Worse);
    }

    #[test]
    fn identical_quiet_configurations_are_equivalent() {
        let rule = SequentialRule::new(2.0, 30, UnitKind::Round).unwrap();
        let plan = rule.plan();
        let units = rounds(&[
            (100.0, 100.2),
            (100.3, 99.9),
            (99.8, 100.1),
            (100.1, 100.0),
            (100.2, 99.7),
            (99.9, 100.2),
        ]);
        let d = plan.decide(&units, Better::Higher).unwrap();
        assert_eq!(d.outcome, Outcome::Equivalent, "{d:?}");
        let eq = d.equivalence_ci_pct.unwrap();
        assert!(eq.lo > -2.0 && eq.hi < 2.0 && eq.level == 0.9);
    }

    #[test]
    fn noisy_data_continue_then_end_undecided_with_a_detectable_effect() {
        let pairs = [(100.0, 95.0), (90.0, 104.0), (108.0, 97.0), (95.0, 101.0)];
        let rule = SequentialRule::new(2.0, 4, UnitKind::Round).unwrap();
        let d = decide(&rounds(&pairs[..3]), Better::Higher, &rule).unwrap();
        assert_eq!(d.outcome, Outcome::Continue);
        let d = decide(&rounds(&pairs), Better::Higher, &rule).unwrap();
        assert_eq!(d.outcome, Outcome::Undecided);
        let mde = d.mde_pct.unwrap();
        assert!(mde > 2.0, "{mde}");
        // More units than the budget: not this rule's question.
        assert!(decide(&rounds(&[(1.0, 1.0); 5]), Better::Higher, &rule).is_none());
    }

    /// The units' pairing removes what moves both sides alike: a drift of
    /// 20 % over the run around a constant 5 % difference is no noise.
    #[test]
    fn drift_shared_by_a_unit_cancels() {
        let units: Vec<Unit> = (0..6)
            .map(|i| {
                let drift = 1.0 + 0.04 * i as f64;
                Unit::round(105.0 * drift, 100.0 * drift)
            })
            .collect();
        let rule = SequentialRule::new(2.0, 10, UnitKind::Round).unwrap();
        let d = decide(&units, Better::Higher, &rule).unwrap();
        assert_eq!(d.outcome, Outcome::Better, "{d:?}");
        let ci = d.ci_pct.unwrap();
        assert!((ci.lo - 5.0).abs() < 1e-9 && (ci.hi - 5.0).abs() < 1e-9);
    }

    #[test]
    fn extending_keeps_the_plan() {
        let rule = SequentialRule::new(2.0, 10, UnitKind::BlockPair).unwrap();
        let more = rule.extended(25);
        assert_eq!((more.max_units, more.planned_units), (25, 10));
        let (p, q) = (rule.plan(), more.plan());
        for n in 2..=10 {
            assert_eq!(p.critical(n), q.critical(n));
        }
        assert!(q.critical(25).is_some() && p.critical(11).is_none());
    }

    #[test]
    fn serde_names() {
        assert_eq!(
            serde_json::to_string(&Outcome::Equivalent).unwrap(),
            "\"equivalent\""
        );
        assert_eq!(
            serde_json::to_string(&UnitKind::BlockPair).unwrap(),
            "\"block_pair\""
        );
    }
}
