//! The like-for-like comparisons a study declares (`[[study.compare]]`),
//! drawn at the peaks of each scaling curve as seed 004's Table 1 does:
//! "A is N× faster than B" and A's % advantage over B, each figure at its
//! own line's peak.

use crate::format::group_thousands;
use crate::model::{Cell, CurveView, PairRow, PeakAt, RunReport, Table, View};
use crate::views;
use benchlab_core::study::Comparison;
use benchlab_core::Better;

/// The declared pairs of which both sides are lines of `v`.
pub fn pairs(v: &CurveView, compare: &[Comparison]) -> Vec<PairRow> {
    let peak = |name: &str| {
        let l = v.lines.iter().find(|l| l.configuration == name)?;
        Some(l.peak.as_ref().map(|p| PeakAt {
            x: p.x.clone(),
            value: p.value,
        }))
    };
    compare
        .iter()
        .filter_map(|c| {
            let (a, b) = (peak(&c.a)?, peak(&c.b)?);
            let (times, advantage_pct) = match (&a, &b) {
                (Some(a), Some(b)) if a.value != 0.0 && b.value != 0.0 => match v.better {
                    Better::Higher => (
                        Some(a.value / b.value),
                        Some((a.value - b.value) / b.value.abs() * 100.0),
                    ),
                    Better::Lower => (
                        Some(b.value / a.value),
                        Some((b.value - a.value) / b.value.abs() * 100.0),
                    ),
                },
                _ => (None, None),
            };
            Some(PairRow {
                label: c.label.clone(),
                a: c.a.clone(),
                b: c.b.clone(),
                a_peak: a,
                b_peak: b,
                times,
                advantage_pct,
            })
        })
        .collect()
}

/// `v` with the study's pairs: they replace the comparisons of every line
/// with the first (which compare unlike with unlike), in the table and in
/// the sentences under the curve.
pub fn apply(v: &mut CurveView, compare: &[Comparison]) {
    let rows = pairs(v, compare);
    if rows.is_empty() {
        return;
    }
    v.ratios.clear();
    v.findings = views::findings(v);
    let what = v.metric.replace('_', " ");
    for p in &rows {
        let (Some(a), Some(b), Some(t)) = (&p.a_peak, &p.b_peak, p.times) else {
            continue;
        };
        v.findings.push(format!(
            "{}: at their peaks {} is {t:.2}× faster than {} ({} against {} {what}).",
            p.label,
            p.a,
            p.b,
            group_thousands(a.value, v.decimals),
            group_thousands(b.value, v.decimals)
        ));
    }
    v.pairs = rows;
}

/// One column of a comparison across runs, as [`carried`] reads it.
pub struct PairColumn<'a> {
    /// The run the column comes from.
    pub run: i64,
    /// Its configuration's name in that run.
    pub configuration: &'a str,
    /// The column's label in the comparison (`3:nginx-1cpu`).
    pub label: &'a str,
    /// That run's curve of the compared view, if it has one.
    pub view: Option<&'a CurveView>,
}

/// The pairs a comparison across runs (`benchlab compare`) carries: each
/// run's declared pairs whose two configurations are both columns from
/// that run, named by the columns' labels. A pair is never formed across
/// runs: the study declared it between its own configurations, measured
/// in one run. With columns from several runs, a pair's label names its
/// run, since two runs of one study declare the same labels.
pub fn carried(columns: &[PairColumn<'_>]) -> Vec<Comparison> {
    let several = columns.iter().any(|c| c.run != columns[0].run);
    let column = |run: i64, config: &str| {
        columns
            .iter()
            .find(|c| c.run == run && c.configuration == config)
    };
    let mut out: Vec<Comparison> = Vec::new();
    let mut runs: Vec<i64> = Vec::new();
    for c in columns {
        if runs.contains(&c.run) {
            continue;
        }
        runs.push(c.run);
        let Some(v) = c.view else { continue };
        for p in &v.pairs {
            let (Some(a), Some(b)) = (column(c.run, &p.a), column(c.run, &p.b)) else {
                continue;
            };
            out.push(Comparison {
                a: a.label.to_string(),
                b: b.label.to_string(),
                label: if several {
                    format!("run {}: {}", c.run, p.label)
                } else {
                    p.label.clone()
                },
            });
        }
    }
    out
}

/// The metric under which published figures quote a pair's ratio of
/// peaks ("N times", `studies/published/seed-004-peaks.csv`).
pub const RATIO_METRIC: &str = "peak_ratio";
/// The metric under which they quote A's % advantage at the peaks.
pub const ADVANTAGE_METRIC: &str = "peak_advantage_pct";

/// A run's figure for row `label` of a published table of pairs (metric
/// [`RATIO_METRIC`] or [`ADVANTAGE_METRIC`]), so that `benchlab compare`
/// puts the seed's ratio beside the run's: the pair of that label on the
/// run's curve of the table's workload, kind and fixed values. The pair
/// is the run's whichever of its configurations the column names (a pair
/// spans two). None for any other table.
pub fn cell(report: &RunReport, t: &Table, label: &str) -> Option<Cell> {
    let ratio = match t.metric.as_str() {
        RATIO_METRIC => true,
        ADVANTAGE_METRIC => false,
        _ => return None,
    };
    let value = report.views.iter().find_map(|v| match v {
        View::Curve(c) if c.workload == t.workload && c.kind == t.kind && c.fixed == t.fixed => {
            let p = c.pairs.iter().find(|p| p.label == label)?;
            if ratio {
                p.times
            } else {
                p.advantage_pct
            }
        }
        _ => None,
    })?;
    Some(Cell {
        value,
        ci: None,
        values: vec![value],
        failed: 0,
        blocks: Vec::new(),
    })
}

/// The pair table: a header and one row per pair.
pub fn rows(v: &CurveView) -> Vec<Vec<String>> {
    let peak = |p: &Option<PeakAt>| match p {
        Some(p) => format!(
            "{} at {}",
            group_thousands(p.value, v.decimals),
            views::x_words(&v.x_param, &p.x)
        ),
        None => "-".into(),
    };
    let mut out = vec![vec![
        "comparison".to_string(),
        "A".into(),
        "B".into(),
        "A's peak".into(),
        "B's peak".into(),
        "A is faster than B by".into(),
        "A's advantage".into(),
    ]];
    for p in &v.pairs {
        out.push(vec![
            p.label.clone(),
            p.a.clone(),
            p.b.clone(),
            peak(&p.a_peak),
            peak(&p.b_peak),
            p.times
                .map(|t| format!("{t:.2} times"))
                .unwrap_or_else(|| "-".into()),
            p.advantage_pct
                .map(|a| format!("{a:+.1} %"))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    out
}

/// The pair table's caption.
pub fn caption(v: &CurveView) -> String {
    format!(
        "{}: the study's comparisons at the peaks ({})",
        views::caption(&v.workload, &v.fixed),
        v.title
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CurveLine, CurvePoint, Peak};

    fn line(name: &str, values: &[f64]) -> CurveLine {
        let points: Vec<Option<CurvePoint>> = values
            .iter()
            .map(|v| {
                Some(CurvePoint {
                    value: *v,
                    ci: None,
                    n: 1,
                })
            })
            .collect();
        let (index, value) = values
            .iter()
            .copied()
            .enumerate()
            .fold((0, f64::MIN), |b, (i, v)| if v > b.1 { (i, v) } else { b });
        CurveLine {
            configuration: name.into(),
            points,
            peak: Some(Peak {
                index,
                x: ["1", "8", "16"][index].into(),
                value,
                decline: None,
            }),
        }
    }

    fn curve() -> CurveView {
        CurveView {
            workload: "netbench".into(),
            kind: "fileserver.load".into(),
            fixed: String::new(),
            x_param: "clients".into(),
            metric: "mbits_per_s".into(),
            title: "Throughput (Mbit/s)".into(),
            decimals: 1,
            better: Better::Higher,
            x: vec!["1".into(), "8".into(), "16".into()],
            x_values: vec![1.0, 8.0, 16.0],
            lines: vec![
                line("linux-1cpu", &[50.0, 100.0, 90.0]),
                line("nt-1cpu", &[80.0, 150.0, 140.0]),
                line("linux-4cpu", &[60.0, 109.1, 120.0]),
                line("nt-4cpu", &[90.0, 200.0, 294.6]),
            ],
            ratios: Vec::new(),
            notes: Vec::new(),
            findings: Vec::new(),
            pairs: Vec::new(),
        }
    }

    fn pair(a: &str, b: &str, label: &str) -> Comparison {
        Comparison {
            a: a.into(),
            b: b.into(),
            label: label.into(),
        }
    }

    #[test]
    fn pairs_compare_peaks_like_with_like_as_table_1_does() {
        let mut v = curve();
        apply(
            &mut v,
            &[
                pair("nt-1cpu", "linux-1cpu", "NT over Linux on 1 CPU"),
                pair("nt-4cpu", "linux-4cpu", "NT over Linux on 4 CPUs"),
                pair("nt-4cpu", "gone", "not a line here"),
            ],
        );
        assert_eq!(v.pairs.len(), 2, "a pair without both lines is left out");
        assert!(v.ratios.is_empty(), "no comparison with the first line");
        // 150 / 100 and 294.6 / 120, at each line's own peak.
        assert!((v.pairs[0].times.unwrap() - 1.5).abs() < 1e-12);
        assert!((v.pairs[0].advantage_pct.unwrap() - 50.0).abs() < 1e-9);
        assert!((v.pairs[1].times.unwrap() - 2.455).abs() < 1e-12);
        let rows = rows(&v);
        assert_eq!(
            rows[2],
            [
                "NT over Linux on 4 CPUs",
                "nt-4cpu",
                "linux-4cpu",
                "294.6 at 16 clients",
                "120.0 at 16 clients",
                "2.46 times",
                "+145.5 %"
            ]
        );
        assert!(v.findings.iter().any(|f| f
            == "NT over Linux on 1 CPU: at their peaks nt-1cpu is 1.50× faster than linux-1cpu (150.0 against 100.0 mbits per s)."));
    }

    /// `benchlab compare` carries a run's pairs whose two configurations
    /// are both its columns, under the columns' labels, and forms none
    /// across runs.
    #[test]
    fn a_comparison_across_runs_carries_each_runs_own_pairs() {
        let mut run1 = curve();
        apply(
            &mut run1,
            &[
                pair("nt-1cpu", "linux-1cpu", "NT over Linux on 1 CPU"),
                pair("nt-4cpu", "linux-4cpu", "NT over Linux on 4 CPUs"),
            ],
        );
        let col = |run, configuration, label, view| PairColumn {
            run,
            configuration,
            label,
            view,
        };
        // One run, two of its configurations: the pair between them.
        let one = carried(&[
            col(1, "nt-1cpu", "1:nt-1cpu", Some(&run1)),
            col(1, "linux-1cpu", "1:linux-1cpu", Some(&run1)),
        ]);
        assert_eq!(
            one,
            [pair("1:nt-1cpu", "1:linux-1cpu", "NT over Linux on 1 CPU")]
        );
        // Run 3's nt-4cpu beside run 1's linux-4cpu is no pair (the study
        // paired its own two); run 1's 1-CPU pair is carried and says
        // which run it is from.
        let run3 = run1.clone();
        let several = carried(&[
            col(1, "nt-1cpu", "1:nt-1cpu", Some(&run1)),
            col(1, "linux-1cpu", "1:linux-1cpu", Some(&run1)),
            col(1, "linux-4cpu", "1:linux-4cpu", Some(&run1)),
            col(3, "nt-4cpu", "3:nt-4cpu", Some(&run3)),
        ]);
        assert_eq!(
            several,
            [pair(
                "1:nt-1cpu",
                "1:linux-1cpu",
                "run 1: NT over Linux on 1 CPU"
            )]
        );
        // Applied to the comparison's curve (lines named by the columns),
        // the pair table has the pair at the columns' peaks.
        let mut compared = curve();
        for l in &mut compared.lines {
            l.configuration = format!("1:{}", l.configuration);
        }
        apply(&mut compared, &several);
        let rows = rows(&compared);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1][0], "run 1: NT over Linux on 1 CPU");
        assert_eq!(rows[1][5], "1.50 times");
    }
}
