//! Issue 13: "no difference" only when the whole interval lies inside the
//! noise band; an interval merely too wide is *inconclusive*, in every
//! renderer and in the headline findings, with the repetitions that would
//! likely decide.

use benchlab_core::plan::RunOptions;
use benchlab_core::study::Selection;
use benchlab_core::Better;
use benchlab_report::figures::advantages;
use benchlab_report::model::{Cell, Row, Table};
use benchlab_report::{html, render, Format, RunReport};
use benchlab_stats as stats;
use benchlab_store::{ConfigRow, RunRow, RunStatus};

fn cell(values: &[f64]) -> Option<Cell> {
    let s = stats::summarize(values).unwrap();
    Some(Cell {
        value: s.median,
        ci: s.median_ci,
        values: values.to_vec(),
        failed: 0,
        blocks: Vec::new(),
    })
}

/// One table, two configurations, lower is better: each row's
/// (baseline, other) repetitions.
fn report(rows: &[(&str, &[f64], &[f64])]) -> RunReport {
    let rows = rows
        .iter()
        .map(|(label, base, other)| {
            let cells = vec![cell(base), cell(other)];
            Row {
                label: label.to_string(),
                advantages: advantages(&cells, stats::Better::Lower),
                cells,
            }
        })
        .collect();
    RunReport {
        run: RunRow {
            id: 1,
            study_name: "verdicts".into(),
            study_file: String::new(),
            study_text: String::new(),
            description: String::new(),
            options: RunOptions {
                scale: 1.0,
                quick: false,
            },
            status: RunStatus::Completed,
            started_at: String::new(),
            ended_at: None,
            benchlab_version: String::new(),
            controller_host: String::new(),
            controller_pid: None,
        },
        configurations: ["default", "pinned"]
            .iter()
            .enumerate()
            .map(|(idx, n)| ConfigRow {
                idx,
                name: n.to_string(),
                description: String::new(),
                spec: serde_json::Value::Null,
            })
            .collect(),
        selection: Selection::Median,
        tables: vec![Table {
            workload: "pingpong".into(),
            kind: "net.pingpong".into(),
            metric: "rtt_half_stddev_us".into(),
            title: "Ping-pong jitter, RTT/2 stddev (µs)".into(),
            fixed: String::new(),
            row_param: "protocol".into(),
            better: Better::Lower,
            decimals: 3,
            advantage_decimals: 2,
            columns: vec!["default".into(), "pinned".into()],
            rows,
            average: None,
        }],
        points: Vec::new(),
        crosschecks: Vec::new(),
        series: Vec::new(),
        monitors: Default::default(),
        emulated: Vec::new(),
        failures: Vec::new(),
        hosts: Vec::new(),
        repetition_rule: "a fixed 3 repetition(s) per point".into(),
        order: String::new(),
        control: Vec::new(),
        settings: Vec::new(),
        events: Vec::new(),
        latency: Vec::new(),
        services: Vec::new(),
        views: Vec::new(),
        notes: Vec::new(),
        steps: Vec::new(),
    }
}

/// The demo's jitter: 25.8 µs unpinned (spread 3 … 49) against 2.7 µs
/// pinned, 3 repetitions each. The interval is unbounded: inconclusive,
/// never "no difference", in every format.
#[test]
fn demo_jitter_is_inconclusive_everywhere() {
    let r = report(&[("tcp", &[3.0, 25.8, 48.6], &[2.6, 2.7, 2.8])]);
    let adv = r.tables[0].rows[0].advantages[0].as_ref().unwrap();
    let c = adv.comparison.as_ref().unwrap();
    assert_eq!(c.verdict, stats::Verdict::Inconclusive);
    let n = c.repetitions_to_decide.unwrap();

    let term = render(&r, Format::Table);
    assert!(term.contains(&format!("89.53% ~ n≈{n}")), "{term}");
    let md = render(&r, Format::Markdown);
    assert!(md.contains(&format!("89.53% ~ n≈{n}")), "{md}");
    assert!(md.contains("~ = inconclusive"), "{md}");
    let json: serde_json::Value = serde_json::from_str(&render(&r, Format::Json)).unwrap();
    let jc = &json["tables"][0]["rows"][0]["advantages"][0]["comparison"];
    assert_eq!(jc["verdict"], "inconclusive");
    assert_eq!(jc["repetitions_to_decide"], n);
    let csv = render(&r, Format::Csv);
    assert!(
        csv.lines().nth(2).unwrap().ends_with(",inconclusive"),
        "{csv}"
    );
    let page = html::render_html(&r);
    let findings = &page[page.find("Headline findings").unwrap()..];
    let findings = &findings[..findings.find("</ul>").unwrap()];
    assert!(findings.contains("inconclusive in 1"), "{findings}");
    assert!(
        findings.contains(&format!(
            "about {n} repetitions per side would likely decide"
        )),
        "{findings}"
    );
    assert!(!findings.contains("no difference"), "{findings}");
    assert!(
        !findings.contains("no significant difference"),
        "{findings}"
    );
}

/// A difference whose whole interval lies inside ±1 % is "no difference"
/// (≈), and the findings say so; no estimate is offered.
#[test]
fn an_interval_inside_the_band_is_no_difference() {
    let r = report(&[(
        "udp",
        &[100.0, 100.1, 99.9, 100.0, 100.05, 99.95],
        &[100.02, 100.08, 99.92, 100.0, 100.03, 99.97],
    )]);
    let c = r.tables[0].rows[0].advantages[0]
        .as_ref()
        .unwrap()
        .comparison
        .clone()
        .unwrap();
    assert_eq!(c.verdict, stats::Verdict::WithinNoise, "{c:?}");
    assert_eq!(c.repetitions_to_decide, None);
    let md = render(&r, Format::Markdown);
    let row = md.lines().find(|l| l.starts_with("| udp")).unwrap();
    assert!(row.contains(" ≈") && !row.contains('~'), "{row}");
    let page = html::render_html(&r);
    assert!(page.contains("no difference beyond ±1% in 1"));
    assert!(!page.contains("inconclusive in"));
}
