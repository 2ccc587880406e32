//! `[[study.crosscheck]]`: a native workload against a classic tool on the
//! same hosts and configurations, per paired point: the ratio of their
//! figures with its confidence interval, and whether they disagree beyond
//! the noise.

use std::fmt::Write;

use benchlab_core::study::Crosscheck;

use crate::model::{CrosscheckRow, PointResult, NOISE_PCT};

fn finite(v: Option<&Vec<f64>>) -> Vec<f64> {
    v.map(|v| v.iter().copied().filter(|x| x.is_finite()).collect())
        .unwrap_or_default()
}

/// The rows of every cross-check of a run.
pub fn rows(checks: &[Crosscheck], points: &[PointResult]) -> Vec<CrosscheckRow> {
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
            let cmp = benchlab_stats::compare(&a, &b, benchlab_stats::Better::Higher, NOISE_PCT);
            let (ratio, ci, verdict) = match &cmp {
                Some(cmp) => (
                    1.0 + cmp.advantage_pct / 100.0,
                    cmp.ci_pct
                        .as_ref()
                        .map(|i| (1.0 + i.lo / 100.0, 1.0 + i.hi / 100.0)),
                    match cmp.verdict {
                        benchlab_stats::Verdict::WithinNoise => "agree",
                        benchlab_stats::Verdict::Better | benchlab_stats::Verdict::Worse => {
                            "DISAGREE"
                        }
                        benchlab_stats::Verdict::Inconclusive => "inconclusive",
                        benchlab_stats::Verdict::Insufficient => "too few repetitions",
                    },
                ),
                None => (f64::NAN, None, "no ratio (a figure is 0)"),
            };
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

/// The columns of a cross-check table.
const HEAD: [&str; 8] = [
    "configuration",
    "point",
    "native",
    "classic",
    "ratio",
    "95% CI",
    "n",
    "verdict",
];

/// What the verdicts mean, under every rendering of the tables.
fn legend() -> String {
    format!("agree: the ratio's 95% interval lies within 1 ± {NOISE_PCT}%; DISAGREE: it lies outside that band (a difference beyond the noise); inconclusive: it straddles an edge.")
}

/// The rows grouped per (native, classic) pair, in order, with the title.
fn grouped(rows: &[CrosscheckRow]) -> Vec<(String, Vec<&CrosscheckRow>)> {
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
fn cells(r: &CrosscheckRow) -> Vec<String> {
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

/// The cross-check tables as HTML: a section of the report, each verdict
/// coloured as the report's advantages are (a disagreement red).
pub fn html(rows: &[CrosscheckRow], o: &mut String) {
    if rows.is_empty() {
        return;
    }
    use crate::format::esc;
    o.push_str("<h2 id=\"crosscheck\">Cross-checks: native workloads against classic tools</h2>\n");
    for (i, (title, these)) in grouped(rows).into_iter().enumerate() {
        let _ = writeln!(
            o,
            "<h3 id=\"crosscheck-{i}\">{}</h3>\n<table><tr>",
            esc(&title)
        );
        for (c, h) in HEAD.iter().enumerate() {
            let class = if (2..=4).contains(&c) || c == 6 {
                ""
            } else {
                " class=\"l\""
            };
            let _ = write!(o, "<th{class}>{}</th>", esc(h));
        }
        o.push_str("</tr>\n");
        for r in these {
            o.push_str("<tr>");
            for (c, cell) in cells(r).iter().enumerate() {
                let class = match c {
                    7 => match r.verdict.as_str() {
                        "DISAGREE" => "l worse",
                        "agree" => "l noise",
                        _ => "l inconclusive",
                    },
                    2..=4 | 6 => "",
                    _ => "l",
                };
                if class.is_empty() {
                    let _ = write!(o, "<td>{}</td>", esc(cell));
                } else {
                    let _ = write!(o, "<td class=\"{class}\">{}</td>", esc(cell));
                }
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
    }
    let _ = writeln!(o, "<p class=\"legend\">{}</p>", esc(&legend()));
}

/// The cross-check tables as text (Markdown with `md`).
pub fn text(rows: &[CrosscheckRow], md: bool, out: &mut String) {
    for (title, these) in grouped(rows) {
        out.push('\n');
        if md {
            let _ = writeln!(out, "## {title}\n");
            let _ = writeln!(out, "| {} |", HEAD.join(" | "));
            let _ = writeln!(out, "|---|---|---:|---:|---:|---|---|---|");
        } else {
            let _ = writeln!(out, "{title}");
        }
        let mut table = vec![HEAD.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
        table.extend(these.into_iter().map(cells));
        if md {
            for row in &table[1..] {
                let _ = writeln!(out, "| {} |", row.join(" | "));
            }
        } else {
            let widths: Vec<usize> = (0..table[0].len())
                .map(|i| {
                    table
                        .iter()
                        .map(|r| r[i].chars().count())
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            for row in &table {
                let mut line = String::from(" ");
                for (i, cell) in row.iter().enumerate() {
                    let pad = widths[i] - cell.chars().count();
                    if (2..=4).contains(&i) {
                        line.push_str(&format!(" {}{cell}", " ".repeat(pad)));
                    } else {
                        line.push_str(&format!(" {cell}{}", " ".repeat(pad)));
                    }
                }
                let _ = writeln!(out, "{}", line.trim_end());
            }
        }
        let _ = writeln!(out, "{}{}", if md { "\n" } else { "  " }, legend());
    }
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
        let r = rows(&[check], &points);
        assert_eq!(r.len(), 2);
        assert!((r[0].ratio - 1.0).abs() < 1e-9);
        assert_eq!(r[0].verdict, "agree");
        assert!((r[1].ratio - 1.5).abs() < 1e-9);
        assert_eq!(r[1].verdict, "DISAGREE");
        let (lo, hi) = r[1].ci.unwrap();
        assert!(lo < 1.5 && hi > 1.5 && lo > 1.01);
        let mut s = String::new();
        text(&r, false, &mut s);
        assert!(s.contains("Cross-check · stream (tp) / iperf3 (tp)"), "{s}");
        assert!(s.contains("1.500") && s.contains("DISAGREE"), "{s}");
        let mut h = String::new();
        html(&r, &mut h);
        assert!(
            h.contains("<h3 id=\"crosscheck-0\">Cross-check · stream (tp) / iperf3 (tp)"),
            "{h}"
        );
        assert!(h.contains("<td class=\"l worse\">DISAGREE</td>"), "{h}");
        assert!(h.contains("<td class=\"l noise\">agree</td>"), "{h}");
        assert!(h.contains("<td>1.500</td>"), "{h}");
        assert!(h.contains("<td class=\"l\">[1."), "{h}");
        assert_eq!(h.matches("<tr>").count(), 3, "{h}");
        let mut none = String::new();
        html(&[], &mut none);
        assert!(none.is_empty());
    }
}
