//! A table's figures: the quoted value of a cell by the study's selection
//! rule, average rows, and advantages with their intervals and verdicts
//! (blocked when the configurations ran in blocks).

//! How the report model is built from stored rows: tables, their cells
//! and advantages, notes, services and latency views.

//! The report model and how it is built from stored rows.

use crate::model::{Advantage, Cell, Row, NOISE_PCT};
use benchlab_core::study::Selection;
use benchlab_stats as stats;
use std::collections::BTreeMap;

/// The quoted figure of a cell and its interval. `stddevs`, aligned with
/// `values`, are each repetition's standard deviation, for
/// [`Selection::MedianStddevRun`].
pub(crate) fn quoted(
    values: &[f64],
    stddevs: Option<&[f64]>,
    selection: Selection,
) -> Option<(f64, Option<stats::Interval>)> {
    let s = stats::summarize(values)?;
    Some(match selection {
        Selection::Median => (s.median, s.median_ci),
        Selection::Mean => (s.mean, s.mean_ci),
        Selection::MedianRun => (values[stats::median_run(values)?], None),
        Selection::MedianStddevRun => match stddevs.and_then(stats::median_stddev_run) {
            Some(i) => (values[i], None),
            None => (values[stats::median_run(values)?], None),
        },
    })
}
/// The metric holding the per-repetition standard deviation of `name`:
/// `x_mean_unit` → `x_stddev_unit` (e.g. `rtt_half_mean_us` →
/// `rtt_half_stddev_us`).
pub(crate) fn stddev_companion(name: &str) -> Option<String> {
    name.contains("_mean")
        .then(|| name.replacen("_mean", "_stddev", 1))
}
/// `values` and its companion standard deviations, keeping only the
/// repetitions where both are finite, so that they stay aligned.
pub(crate) fn with_stddevs(all: &[f64], sd: Option<&Vec<f64>>) -> (Vec<f64>, Option<Vec<f64>>) {
    match sd {
        Some(sd) if sd.len() == all.len() => {
            let (v, s): (Vec<f64>, Vec<f64>) = all
                .iter()
                .zip(sd)
                .filter(|(v, s)| v.is_finite() && s.is_finite())
                .map(|(v, s)| (*v, *s))
                .unzip();
            (v, Some(s))
        }
        _ => (
            all.iter().copied().filter(|x| x.is_finite()).collect(),
            None,
        ),
    }
}
/// The "Average" row over a table's rows: per configuration the mean of the
/// quoted figures (seed 000's "Average" rows), present only when every row
/// has a figure. The seeds compute its advantage from the averages, not by
/// averaging the advantages (32.93 % against 32.92 % in Figure 9), and so
/// does benchlab.
pub(crate) fn average_row(rows: &[Row], columns: usize, better: stats::Better) -> Row {
    let cells: Vec<Option<Cell>> = (0..columns)
        .map(|c| {
            let vals: Vec<f64> = rows
                .iter()
                .filter_map(|r| r.cells[c].as_ref().map(|x| x.value))
                .collect();
            (vals.len() == rows.len() && !vals.is_empty()).then(|| Cell {
                value: stats::mean(&vals).unwrap_or(f64::NAN),
                ci: None,
                values: vals,
                failed: 0,
                blocks: Vec::new(),
            })
        })
        .collect();
    let advantages = cells
        .iter()
        .skip(1)
        .map(|c| match (c, &cells[0]) {
            (Some(a), Some(b)) => {
                stats::advantage_pct(a.value, b.value, better).map(|pct| Advantage {
                    pct,
                    comparison: None,
                    decided: None,
                })
            }
            _ => None,
        })
        .collect();
    Row {
        label: "Average".into(),
        cells,
        advantages,
    }
}
/// Each configuration's advantage over the first (the baseline), with the
/// comparison of their repetitions when both have at least two.
pub fn advantages(cells: &[Option<Cell>], better: stats::Better) -> Vec<Option<Advantage>> {
    advantages_with(cells, better, None)
}
/// Block numbers of an A/A control's figures, moved clear of the first
/// configuration's when they count as more blocks of it.
pub(crate) const CONTROL_BLOCKS: u32 = 1 << 20;
/// [`advantages`], with `control` the column of an A/A control that
/// repeats the first configuration: for the spread between blocks, its
/// blocks count as more blocks of the first configuration (with one block
/// each otherwise, they are what lets drift be measured at all).
///
/// When every cell carries its blocks (the configurations ran in blocks),
/// the comparisons are [`stats::compare_blocked`] with the row's
/// [`stats::block_spread`]; otherwise [`stats::compare`].
pub(crate) fn advantages_with(
    cells: &[Option<Cell>],
    better: stats::Better,
    control: Option<usize>,
) -> Vec<Option<Advantage>> {
    let present: Vec<&Cell> = cells.iter().flatten().collect();
    let blocked = !present.is_empty() && present.iter().all(|c| !c.blocks.is_empty());
    let spread = if blocked {
        // The first configuration with its control, then the others.
        let mut first = (Vec::new(), Vec::new());
        for (i, c) in cells.iter().enumerate() {
            if let (Some(c), true) = (c, i == 0 || Some(i) == control) {
                let shift = if i == 0 { 0 } else { CONTROL_BLOCKS };
                first.0.extend_from_slice(&c.values);
                first.1.extend(c.blocks.iter().map(|b| b + shift));
            }
        }
        let mut sides = vec![stats::Blocked {
            values: &first.0,
            blocks: &first.1,
        }];
        for (i, c) in cells.iter().enumerate() {
            if let (Some(c), false) = (c, i == 0 || Some(i) == control) {
                sides.push(stats::Blocked {
                    values: &c.values,
                    blocks: &c.blocks,
                });
            }
        }
        let sides: Vec<_> = sides.into_iter().filter(|s| !s.values.is_empty()).collect();
        stats::block_spread(&sides)
    } else {
        None
    };
    cells
        .iter()
        .skip(1)
        .map(|c| match (c, &cells[0]) {
            (Some(a), Some(b)) => stats::advantage_pct(a.value, b.value, better).map(|pct| {
                let comparison = if blocked {
                    stats::compare_blocked(
                        stats::Blocked {
                            values: &a.values,
                            blocks: &a.blocks,
                        },
                        stats::Blocked {
                            values: &b.values,
                            blocks: &b.blocks,
                        },
                        spread,
                        better,
                        NOISE_PCT,
                    )
                } else {
                    stats::compare(&a.values, &b.values, better, NOISE_PCT)
                };
                Advantage {
                    pct,
                    comparison: comparison.filter(|c| c.verdict != stats::Verdict::Insufficient),
                    decided: None,
                }
            }),
            _ => None,
        })
        .collect()
}
/// A comparison judged by the sequential rule's one look (a fixed
/// design): what [`judge`] finds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judged {
    /// The verdict.
    pub verdict: benchlab_core::decision::Decided,
    /// A's advantage over B from the means over the units, in percent.
    pub advantage_pct: f64,
    /// The interval that decided (1 − 2α for equivalent, 1 − α else).
    pub ci_pct: Option<(f64, f64)>,
    /// Undecided: the smallest difference the data would detect at 80 %
    /// power, in percent.
    pub mde_pct: Option<f64>,
    /// Repetitions per side it rests on (the fewer of the two).
    pub repetitions: u32,
}

/// A against B under the sequential rule with one look at the units
/// there are (`SequentialRule::fixed`): the verdict of a fixed design,
/// an older run or a comparison of runs, in the words of the
/// until-decided design. A unit is a block pair when both cells carry
/// their blocks (A's and B's repetitions of one block), a round (the
/// i-th repetition of each) otherwise; repetitions of different runs
/// have no rounds in common, and pairing them by number is as good as
/// any other pairing of independent samples. `None` with fewer than two
/// units (one repetition, one block each), where nothing can be decided.
pub fn judge(a: &Cell, b: &Cell, better: stats::Better, margin_pct: f64) -> Option<Judged> {
    use benchlab_core::decision::Decided;
    let blocked = !a.blocks.is_empty() && !b.blocks.is_empty();
    let units: Vec<stats::Unit> = if blocked {
        let mut by: BTreeMap<u32, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for (v, k) in a.values.iter().zip(&a.blocks) {
            by.entry(*k).or_default().0.push(*v);
        }
        for (v, k) in b.values.iter().zip(&b.blocks) {
            by.entry(*k).or_default().1.push(*v);
        }
        by.values()
            .filter_map(|(x, y)| stats::Unit::from_repetitions(x, y))
            .collect()
    } else {
        a.values
            .iter()
            .zip(&b.values)
            .map(|(x, y)| stats::Unit::round(*x, *y))
            .collect()
    };
    let kind = if blocked {
        stats::UnitKind::BlockPair
    } else {
        stats::UnitKind::Round
    };
    let rule = stats::SequentialRule::fixed(margin_pct, units.len(), kind).ok()?;
    let d = rule.plan().decide(&units, better)?;
    let verdict = match d.outcome {
        stats::Outcome::Better => Decided::Better,
        stats::Outcome::Worse => Decided::Worse,
        stats::Outcome::Equivalent => Decided::Equivalent,
        stats::Outcome::Undecided | stats::Outcome::Continue => Decided::Undecided,
    };
    let ci = if verdict == Decided::Equivalent {
        d.equivalence_ci_pct
    } else {
        d.ci_pct
    };
    Some(Judged {
        verdict,
        advantage_pct: d.advantage_pct,
        ci_pct: ci.map(|i| (i.lo, i.hi)),
        mde_pct: d.mde_pct.filter(|_| verdict == Decided::Undecided),
        repetitions: a.values.len().min(b.values.len()) as u32,
    })
}

/// Indices of the figures a cell keeps: finite, and with a finite
/// companion standard deviation when `sd` is given (as [`with_stddevs`]).
pub(crate) fn kept<'a>(
    all: &'a [f64],
    sd: Option<&'a Vec<f64>>,
) -> impl Iterator<Item = usize> + 'a {
    let sd = sd.filter(|sd| sd.len() == all.len());
    (0..all.len()).filter(move |&i| all[i].is_finite() && sd.is_none_or(|sd| sd[i].is_finite()))
}
#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 003's rule: of nine runs, the one with the median standard
    /// deviation is quoted, whatever its mean.
    #[test]
    fn median_stddev_run_quotes_the_run_with_the_median_stddev() {
        let means = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0];
        let sds = [0.31, 0.12, 0.57, 0.44, 0.29, 0.90, 0.33, 0.21, 0.48];
        // Sorted stddevs: .12 .21 .29 .31 .33 … → 0.33, run 6 (mean 16).
        let (v, s) = with_stddevs(&means, Some(&sds.to_vec()));
        let (value, ci) = quoted(&v, s.as_deref(), Selection::MedianStddevRun).unwrap();
        assert_eq!((value, ci), (16.0, None));
        // Without a companion metric: the median run.
        let (value, _) = quoted(&means, None, Selection::MedianStddevRun).unwrap();
        assert_eq!(value, 14.0);
        // A failed repetition (NaN) drops from both, keeping them aligned.
        let (v, s) = with_stddevs(&[1.0, f64::NAN, 3.0], Some(&vec![0.5, 0.1, 0.2]));
        assert_eq!((v, s), (vec![1.0, 3.0], Some(vec![0.5, 0.2])));
        assert_eq!(
            stddev_companion("rtt_half_mean_us").as_deref(),
            Some("rtt_half_stddev_us")
        );
        assert_eq!(stddev_companion("rtt_us"), None);
    }
}
