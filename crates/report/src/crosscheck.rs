//! `[[study.crosscheck]]`: a native workload against a classic tool on the
//! same hosts and configurations, per paired point: the ratio of their
//! figures with its confidence interval, and whether they agree within the
//! native metric's margin, by the rule every comparison uses.

use benchlab_core::study::Crosscheck;
use benchlab_stats as stats;

use crate::model::{CrosscheckRow, PointResult};

fn finite(v: Option<&Vec<f64>>) -> Vec<f64> {
    v.map(|v| v.iter().copied().filter(|x| x.is_finite()).collect())
        .unwrap_or_default()
}

/// The rows of every cross-check of a run; `margin_pct` gives a check's
/// margin (its native metric's, as the study sets it).
pub fn rows(
    checks: &[Crosscheck],
    points: &[PointResult],
    margin_pct: impl Fn(&Crosscheck) -> f64,
) -> Vec<CrosscheckRow> {
    let mut out = Vec::new();
    for c in checks {
        for n in points.iter().filter(|p| p.workload == c.native) {
            let fixed = c
                .when
                .iter()
                .all(|(k, v)| n.params.get(k).map(|x| x.label()) == Some(v.clone()));
            if !fixed {
                continue;
            }
            let Some(k) = points.iter().find(|p| {
                p.workload == c.classic
                    && p.configuration == n.configuration
                    && c.map
                        .iter()
                        .all(|(np, cp)| match (n.params.get(np), p.params.get(cp)) {
                            (Some(a), Some(b)) => match (a.as_f64(), b.as_f64()) {
                                (Some(x), Some(y)) => x == y,
                                _ => a.label() == b.label(),
                            },
                            _ => false,
                        })
            }) else {
                continue;
            };
            let a = finite(n.metrics.get(&c.native_metric));
            let b = finite(k.metrics.get(&c.classic_metric));
            if a.is_empty() || b.is_empty() {
                continue;
            }
            let (ratio, ci, verdict) = agreement(&a, &b, margin_pct(c));
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            out.push(CrosscheckRow {
                native: c.native.clone(),
                classic: c.classic.clone(),
                native_metric: c.native_metric.clone(),
                classic_metric: c.classic_metric.clone(),
                configuration: n.configuration.clone(),
                point: n.label.clone(),
                native_mean: mean(&a),
                classic_mean: mean(&b),
                n: (a.len(), b.len()),
                ratio,
                ci,
                verdict: verdict.to_string(),
            });
        }
    }
    out
}

/// Native over classic: the ratio of the means, the interval that decided
/// and the verdict. The repetitions pair by number (a failed one shifts the
/// pairing, which costs power, not validity) and are judged with one look
/// by the sequential rule at the margin: *agree* is its *equivalent*,
/// DISAGREE its *better* or *worse*.
fn agreement(a: &[f64], b: &[f64], margin_pct: f64) -> (f64, Option<(f64, f64)>, String) {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (ma, mb) = (mean(a), mean(b));
    if mb == 0.0 || !ma.is_finite() || !mb.is_finite() {
        return (f64::NAN, None, "no ratio (a figure is 0)".into());
    }
    let ratio = ma / mb;
    let units: Vec<stats::Unit> = a
        .iter()
        .zip(b)
        .map(|(x, y)| stats::Unit::round(*x, *y))
        .collect();
    let decision = stats::SequentialRule::fixed(margin_pct, units.len(), stats::UnitKind::Round)
        .ok()
        .and_then(|rule| rule.plan().decide(&units, stats::Better::Higher));
    let Some(d) = decision else {
        return (ratio, None, "too few repetitions".into());
    };
    let to_ratio = |i: &stats::Interval| (1.0 + i.lo / 100.0, 1.0 + i.hi / 100.0);
    let (ci, verdict) = match d.outcome {
        stats::Outcome::Equivalent => (d.equivalence_ci_pct.as_ref(), "agree".to_string()),
        stats::Outcome::Better | stats::Outcome::Worse => {
            (d.ci_pct.as_ref(), "DISAGREE".to_string())
        }
        stats::Outcome::Undecided | stats::Outcome::Continue => (
            d.ci_pct.as_ref(),
            match d.mde_pct {
                Some(m) => format!("undecided (±{m:.1}%)"),
                None => "undecided".to_string(),
            },
        ),
    };
    (ratio, ci.map(to_ratio), verdict)
}

/// The columns of a cross-check table.
pub(crate) const HEAD: [&str; 8] = [
    "configuration",
    "point",
    "native",
    "classic",
    "ratio",
    "interval",
    "n",
    "verdict",
];

/// What the verdicts mean, under every rendering of the tables.
pub(crate) fn legend() -> String {
    "agree: equivalent within the native metric's margin (the ratio's 90% interval lies within 1 ± margin); DISAGREE: the 95% interval lies beyond it; undecided (±X%): neither, and X is the difference the repetitions could detect (the sequential rule with one look, docs/methods.md).".to_string()
}

/// The rows grouped per (native, classic) pair, in order, with the title.
pub(crate) fn grouped(rows: &[CrosscheckRow]) -> Vec<(String, Vec<&CrosscheckRow>)> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if !pairs.contains(&(r.native.as_str(), r.classic.as_str())) {
            pairs.push((&r.native, &r.classic));
        }
    }
    pairs
        .into_iter()
        .map(|(native, classic)| {
            let these: Vec<&CrosscheckRow> = rows
                .iter()
                .filter(|r| r.native == native && r.classic == classic)
                .collect();
            let (nm, cm) = (&these[0].native_metric, &these[0].classic_metric);
            let title = format!(
                "Cross-check · {native} ({nm}) / {classic} ({cm}): native over classic, mean of the repetitions"
            );
            (title, these)
        })
        .collect()
}

/// One row's cells, in [`HEAD`]'s order.
pub(crate) fn cells(r: &CrosscheckRow) -> Vec<String> {
    vec![
        r.configuration.clone(),
        r.point.clone(),
        format!("{:.2}", r.native_mean),
        format!("{:.2}", r.classic_mean),
        format!("{:.3}", r.ratio),
        r.ci.map(|(l, h)| format!("[{l:.3}, {h:.3}]"))
            .unwrap_or_else(|| "-".into()),
        format!("{}/{}", r.n.0, r.n.1),
        r.verdict.clone(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchlab_core::Value;
    use std::collections::BTreeMap;

    fn point(workload: &str, config: &str, size: i64, values: &[f64]) -> PointResult {
        let mut params = BTreeMap::new();
        params.insert("message_size".to_string(), Value::Int(size));
        params.insert("protocol".to_string(), Value::Str("tcp".into()));
        let mut metrics = BTreeMap::new();
        metrics.insert("tp".to_string(), values.to_vec());
        PointResult {
            configuration: config.into(),
            workload: workload.into(),
            kind: String::new(),
            label: format!("message_size={size}"),
            params,
            metrics,
            summaries: BTreeMap::new(),
        }
    }

    #[test]
    fn ratios_pair_points_by_the_mapping() {
        let check = Crosscheck {
            native: "stream".into(),
            classic: "iperf3".into(),
            native_metric: "tp".into(),
            classic_metric: "tp".into(),
            map: [("message_size".to_string(), "message_size".to_string())].into(),
            when: [("protocol".to_string(), "tcp".to_string())].into(),
        };
        let points = vec![
            point(
                "stream",
                "a",
                1024,
                &[100.0, 100.1, 99.9, 100.0, 100.05, 99.95],
            ),
            point(
                "iperf3",
                "a",
                1024,
                &[100.0, 100.05, 99.95, 100.0, 100.1, 99.9],
            ),
            point("stream", "a", 4096, &[150.0, 151.0, 149.0, 150.0]),
            point("iperf3", "a", 4096, &[100.0, 100.5, 99.5, 100.0]),
            // No classic point of that size: no row.
            point("stream", "a", 8192, &[1.0, 1.0]),
        ];
        let r = rows(&[check], &points, |_| 2.0);
        assert_eq!(r.len(), 2);
        assert!((r[0].ratio - 1.0).abs() < 1e-9);
        assert_eq!(r[0].verdict, "agree");
        assert!((r[1].ratio - 1.5).abs() < 1e-9);
        assert_eq!(r[1].verdict, "DISAGREE");
        let (lo, hi) = r[1].ci.unwrap();
        assert!(lo < 1.5 && hi > 1.5 && lo > 1.01);
        let text = format!("{}\nt,higher,,size,1,2,1,a,1\n", crate::import::HEADER);
        let mut report = crate::import::figures_csv("s", &text).unwrap();
        report.crosschecks = r;
        let verbose = crate::Layout {
            width: 120,
            verbose: true,
        };
        let s = crate::render_with(&report, crate::Format::Table, verbose);
        assert!(s.contains("Cross-check · stream (tp) / iperf3 (tp)"), "{s}");
        assert!(s.contains("1.500") && s.contains("DISAGREE"), "{s}");
        let h = crate::html::render_body(&report);
        assert!(h.contains("Cross-check · stream (tp) / iperf3 (tp)"), "{h}");
        assert!(h.contains("<td class=\"l worse\">DISAGREE</td>"), "{h}");
        assert!(h.contains("<td class=\"l noise\">agree</td>"), "{h}");
        assert!(h.contains("<td>1.500</td>"), "{h}");
        assert!(h.contains("<td class=\"l\">[1."), "{h}");
    }
}
