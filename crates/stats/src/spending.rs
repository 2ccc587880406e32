//! Group-sequential critical values: how wide the interval must be at each
//! look so that looking after every unit (a round or a block pair) and
//! stopping at the first decision keeps the error rate of the whole
//! sequence at α.
//!
//! # Method
//!
//! The error probability is spent over the looks by a spending function
//! (K. K. G. Lan and D. L. DeMets, "Discrete sequential boundaries for
//! clinical trials", Biometrika 70 (1983) 659–663): by the look at n units
//! the probability that any interval so far has missed the true value is at
//! most α·F(n), with F increasing from 0 to 1. Given the critical values of
//! the earlier looks, the one at look n is the c for which the probability
//! of first crossing ±c at look n is α·(F(n) − F(n−1)); that probability
//! comes from the joint normal distribution of the running sums of the
//! units (independent increments), integrated look by look over the region
//! where no earlier boundary was crossed (C. Jennison and B. W. Turnbull,
//! *Group Sequential Methods with Applications to Clinical Trials*,
//! Chapman & Hall 2000, ch. 19), here on a fine uniform grid.
//!
//! F is open-ended, F(n) = 1 − exp(−κ·((n − 2)/(H − 2))^ρ) with H the
//! planned number of units: nothing is spent at the first look (one
//! degree of freedom decides nothing), most of α within the plan
//! (1 − e^−κ = 95 % of it by H), and the rest stays for units added later
//! (`run --until-decided`), whose looks then need no new plan: the error
//! rate stays at α however long the comparison continues. ρ = 3 makes the
//! early looks strict and the late ones close to a fixed test's (the shape
//! of O'Brien and Fleming's test, Biometrics 35 (1979) 549–556), which is
//! what needed the fewest repetitions in `tests/sequential_simulation.rs`
//! among the shapes tried (docs/methods.md).
//!
//! The boundaries are for a known variance. With the variance estimated
//! from n units, each look's nominal tail probability is converted to the
//! Student-t quantile with n − 1 degrees of freedom (the "significance
//! level approach", Jennison and Turnbull §3.8 and §11.2). Looking after
//! every unit, that alone exceeds α (5.6 % instead of 5 % at 16 planned
//! units, 5.3 % at 50, in simulation), because the looks share one
//! variance estimate; the boundaries are therefore computed for
//! α·(1 − 0.5/√H), which brings every case simulated back within α (the
//! test `unknown_variance_keeps_alpha`).

use crate::dist::{normal_cdf, normal_pdf, normal_upper_quantile, t_upper_quantile};

/// Shape of the spending function (see the module documentation).
const SPEND_RHO: f64 = 3.0;
/// Share of α spent by the planned number of units: 1 − e^−κ.
const SPEND_KAPPA: f64 = 3.0;
/// The boundaries are computed for α·(1 − T_SHRINK/√H) so that, with the
/// variance estimated, the whole sequence stays within α (see the module
/// documentation).
const T_SHRINK: f64 = 0.5;

/// The first look: with one unit there is no estimate of spread.
pub(crate) const FIRST_LOOK: usize = 2;

/// Grid step of the running sum, in standard deviations of one unit.
const STEP: f64 = 0.2;
/// The running sum's density is negligible beyond this many of its own
/// standard deviations, and one unit's increment beyond this many of one.
const REACH: f64 = 8.0;

fn spent(alpha: f64, n: usize, horizon: f64) -> f64 {
    let start = FIRST_LOOK as f64;
    let x = ((n as f64 - start).max(0.0) / (horizon - start).max(1.0)).powf(SPEND_RHO);
    alpha * (1.0 - (-SPEND_KAPPA * x).exp())
}

/// Two-sided critical values, one per look n = [`FIRST_LOOK`]..=`last`, on
/// the Student-t scale with n − 1 degrees of freedom, for total error α
/// and the planned number of units `horizon`. The value for look n does not
/// depend on `last`, so a longer list extends a shorter one.
pub(crate) fn critical_values(alpha: f64, horizon: usize, last: usize) -> Vec<f64> {
    let shrink = (1.0 - T_SHRINK / (horizon as f64).sqrt()).max(0.5);
    z_boundaries(alpha * shrink, horizon as f64, last)
        .into_iter()
        .enumerate()
        .map(|(i, z)| {
            let n = FIRST_LOOK + i;
            let tail = 1.0 - normal_cdf(z);
            if tail <= 0.0 {
                f64::INFINITY
            } else {
                t_upper_quantile(tail.min(0.4999), n - 1)
            }
        })
        .collect()
}

/// The boundaries on the normal scale (Z = running sum / √n) of the
/// spending function.
fn z_boundaries(alpha: f64, horizon: f64, last: usize) -> Vec<f64> {
    let spends: Vec<f64> = (FIRST_LOOK..=last)
        .map(|n| {
            let before = if n == FIRST_LOOK {
                0.0
            } else {
                spent(alpha, n - 1, horizon)
            };
            spent(alpha, n, horizon) - before
        })
        .collect();
    boundaries_for(&spends)
}

/// Two-sided boundaries on the normal scale for looks at n = FIRST_LOOK,
/// FIRST_LOOK + 1, … units (each unit one independent N(0, 1) increment
/// of the running sum under no difference), where look i may first cross
/// with probability `spends[i]`. A spend of 0 skips the look (its boundary
/// is infinite).
fn boundaries_for(spends: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(spends.len());
    let Some(&first) = spends.first() else {
        return out;
    };
    let n0 = FIRST_LOOK;
    let c0 = if first > 0.0 {
        normal_upper_quantile(first / 2.0)
    } else {
        f64::INFINITY
    };
    out.push(c0);
    let kernel: Vec<f64> = (0..=(REACH / STEP).ceil() as usize)
        .map(|j| normal_pdf(j as f64 * STEP))
        .collect();
    // Probability mass of the running sum's grid cells s = i·STEP, i ≥ 0,
    // inside the continuation region (the density is symmetric).
    let sd0 = (n0 as f64).sqrt();
    let mut mass = region(n0, c0 * sd0, |s| normal_pdf(s / sd0) / sd0);
    for (k, &target) in spends.iter().enumerate().skip(1) {
        let n = n0 + k;
        let top = (mass.len() - 1) as isize;
        // Probability of first leaving through ±b at this look: twice the
        // upper exit, by symmetry.
        let exit = |b: f64| -> f64 {
            let mut p = 0.0;
            for i in -top..=top {
                let s = i as f64 * STEP;
                if s > b - REACH - 2.0 {
                    p += mass[i.unsigned_abs()] * normal_cdf(s - b);
                }
            }
            2.0 * p
        };
        let b = if target > 0.0 {
            let (mut lo, mut hi) = (0.0_f64, 60.0 * (n as f64).sqrt());
            for _ in 0..100 {
                let mid = 0.5 * (lo + hi);
                if exit(mid) > target {
                    lo = mid;
                } else {
                    hi = mid;
                }
                if hi - lo < 1e-10 {
                    break;
                }
            }
            0.5 * (lo + hi)
        } else {
            f64::INFINITY
        };
        out.push(b / (n as f64).sqrt());
        // The density at this look inside (−b, b): the cells' masses
        // carried forward by one unit's N(0, 1) increment.
        let reach = kernel.len() as isize - 1;
        let old = mass;
        mass = region(n, b, |s| {
            let i0 = (s / STEP).round() as isize;
            let mut acc = 0.0;
            for src in (i0 - reach).max(-top)..=(i0 + reach).min(top) {
                acc += old[src.unsigned_abs()] * kernel[(i0 - src).unsigned_abs()];
            }
            acc
        });
    }
    out
}

/// The density `f` at the grid points s = i·STEP, i ≥ 0, inside (−b, b),
/// weighted by the length of each point's cell inside the region (in units
/// of STEP's cell), up to where the density of a sum of n units is
/// negligible.
fn region(n: usize, b: f64, f: impl Fn(f64) -> f64) -> Vec<f64> {
    let reach = (REACH * (n as f64).sqrt() + REACH).min(b);
    let points = (reach / STEP).ceil() as usize + 1;
    (0..points)
        .map(|i| {
            let s = i as f64 * STEP;
            let cell_hi = (s + STEP / 2.0).min(b);
            let cell_lo = s - STEP / 2.0;
            let share = ((cell_hi - cell_lo) / STEP).clamp(0.0, 1.0);
            f(s) * share * STEP
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first look, at one degree of freedom, spends nothing: no
    /// t-quantile there is small enough to decide anything useful. The
    /// second spends its share at once, as a single two-sided test.
    #[test]
    fn the_first_look_spends_nothing() {
        let z = z_boundaries(0.05, 10.0, 3);
        assert!(z[0].is_infinite());
        let share = 0.05 * (1.0 - (-SPEND_KAPPA * (1.0_f64 / 8.0).powf(SPEND_RHO)).exp());
        assert!(
            (z[1] - normal_upper_quantile(share / 2.0)).abs() < 1e-6,
            "{z:?}"
        );
    }

    /// Two equally spaced looks (at 2 and 4 units; the look at 3 skipped)
    /// against the published constants for α = 0.05 (Jennison & Turnbull
    /// 2000, Tables 2.1 and 2.3): Pocock's test has 2.178 at both looks,
    /// O'Brien & Fleming's 2.797 then 1.977. Given the first boundary's
    /// spend, the integration must find the second.
    #[test]
    fn integration_reproduces_published_two_look_tests() {
        let tail = |c: f64| 2.0 * (1.0 - normal_cdf(c));
        let pocock = boundaries_for(&[tail(2.178), 0.0, 0.05 - tail(2.178)]);
        assert!(pocock[1].is_infinite());
        assert!((pocock[2] - 2.178).abs() < 2e-3, "{pocock:?}");
        let obf = boundaries_for(&[tail(2.797), 0.0, 0.05 - tail(2.797)]);
        assert!((obf[2] - 1.977).abs() < 2e-3, "{obf:?}");
    }

    /// Within the plan the boundaries fall as the spending speeds up (the
    /// shape of O'Brien and Fleming's test: strict early, near the fixed
    /// test's late); beyond it the spending slows and they widen again, so
    /// that α is never used up.
    #[test]
    fn boundaries_widen_beyond_the_plan() {
        let z = z_boundaries(0.05, 20.0, 40);
        assert!(z[1..].iter().all(|c| c.is_finite() && *c > 1.96), "{z:?}");
        assert!(z[18] > 2.0 && z[18] < 3.0, "{}", z[18]);
        assert!(z[38] > z[18] + 0.5, "{z:?}");
    }

    #[test]
    fn longer_lists_extend_shorter_ones() {
        let a = critical_values(0.05, 30, 10);
        let b = critical_values(0.05, 30, 40);
        assert_eq!(a[..], b[..a.len()]);
        assert!(a[0] > 100.0, "one degree of freedom: {}", a[0]);
    }

    /// The calibration, checked: Gaussian units with unknown variance,
    /// looked at after every unit up to twice the plan, cross the t-scale
    /// boundaries (two-sided, any look) in at most α of the paths —
    /// within the simulation's own error (2.33 standard errors). Without
    /// the shrinking of α they crossed in 5.6 % at 16 planned units
    /// (docs/methods.md).
    #[test]
    fn unknown_variance_keeps_alpha() {
        let mut state: u64 = 12345;
        let mut uniform = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (((z ^ (z >> 31)) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let paths = 20_000;
        for (alpha, horizon) in [(0.05, 6), (0.05, 16), (0.10, 8), (0.10, 16), (0.05, 40)] {
            let t = critical_values(alpha, horizon, 2 * horizon);
            let mut crossed = 0;
            for _ in 0..paths {
                let (mut mean, mut ss) = (0.0_f64, 0.0_f64);
                for n in 1..=2 * horizon {
                    let (u, v) = (uniform(), uniform());
                    let x = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
                    let d = x - mean;
                    mean += d / n as f64;
                    ss += d * (x - mean);
                    if n >= FIRST_LOOK {
                        let se = (ss / (n - 1) as f64 / n as f64).sqrt();
                        if (mean / se).abs() >= t[n - FIRST_LOOK] {
                            crossed += 1;
                            break;
                        }
                    }
                }
            }
            let rate = crossed as f64 / paths as f64;
            let tolerance = 2.33 * (alpha * (1.0 - alpha) / paths as f64).sqrt();
            assert!(
                rate <= alpha + tolerance,
                "α {alpha}, {horizon} planned: crossed in {rate}"
            );
        }
    }
}
