//! Issues 13 and 36: a table's verdicts are the sequential rule's (here a
//! fixed design's one look): *equivalent* only when the whole interval
//! lies inside ±margin; an interval merely too wide is *undecided*, with
//! the difference its data could detect, in every renderer and in the
//! headline findings — never "no difference".

use benchlab_core::decision::Decided;
use benchlab_core::plan::RunOptions;
use benchlab_core::study::Selection;
use benchlab_core::Better;
use benchlab_report::figures::{advantages, judge};
use benchlab_report::model::{Cell, Decision, Row, Table};
use benchlab_report::{html, render, Format, RunReport};
use benchlab_stats as stats;
use benchlab_store::{ConfigRow, RunRow, RunStatus};

/// The margin of these tables, in percent (the default).
const MARGIN: f64 = 2.0;

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
    let mut decisions = Vec::new();
    let rows = rows
        .iter()
        .map(|(label, base, other)| {
            let cells = vec![cell(base), cell(other)];
            let mut advantages = advantages(&cells, stats::Better::Lower);
            let j = judge(
                cells[1].as_ref().unwrap(),
                cells[0].as_ref().unwrap(),
                stats::Better::Lower,
                MARGIN,
            );
            if let (Some(a), Some(j)) = (advantages[0].as_mut(), j) {
                a.decided = Some(j.verdict);
                decisions.push(Decision {
                    configuration: "pinned".into(),
                    control: false,
                    workload: "pingpong".into(),
                    point: format!("protocol={label}"),
                    metric: "rtt_half_stddev_us".into(),
                    verdict: j.verdict,
                    repetitions: j.repetitions,
                    margin_pct: MARGIN,
                    advantage_pct: Some(j.advantage_pct),
                    ci_lo_pct: j.ci_pct.map(|c| c.0),
                    ci_hi_pct: j.ci_pct.map(|c| c.1),
                    mde_pct: j.mde_pct,
                });
            }
            Row {
                label: label.to_string(),
                advantages,
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
        design: None,
        decisions,
        stacks: Default::default(),
        failures: Vec::new(),
        hosts: Vec::new(),
        repetition_rule: "a fixed 3 repetition(s) per point".into(),
        order: String::new(),
        left_out: Vec::new(),
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
/// pinned, 3 repetitions each. The interval is far too wide: undecided,
/// with the difference the data could detect, never "no difference" nor
/// "equivalent", in every format.
#[test]
fn demo_jitter_is_undecided_everywhere() {
    let r = report(&[("tcp", &[3.0, 25.8, 48.6], &[2.6, 2.7, 2.8])]);
    let adv = r.tables[0].rows[0].advantages[0].as_ref().unwrap();
    assert_eq!(adv.decided, Some(Decided::Undecided));
    let d = &r.decisions[0];
    assert_eq!(d.repetitions, 3);
    let mde = d
        .mde_pct
        .expect("an undecided verdict says what it could detect");
    assert!(mde > 2.0, "{d:?}");

    let term = render(&r, Format::Table);
    assert!(term.contains("89.53% ~"), "{term}");
    let md = render(&r, Format::Markdown);
    assert!(md.contains("89.53% ~"), "{md}");
    assert!(md.contains("~ = undecided"), "{md}");
    let json: serde_json::Value = serde_json::from_str(&render(&r, Format::Json)).unwrap();
    assert_eq!(
        json["tables"][0]["rows"][0]["advantages"][0]["decided"],
        "undecided"
    );
    assert_eq!(json["decisions"][0]["mde_pct"], mde);
    let csv = render(&r, Format::Csv);
    let line = csv.lines().nth(2).unwrap();
    assert!(
        line.contains(",undecided,2,3,") && line.ends_with(&format!(",{mde}")),
        "{csv}"
    );
    let page = html::render_html(&r);
    let findings = &page[page.find("Headline findings").unwrap()..];
    let findings = &findings[..findings.find("</ul>").unwrap()];
    assert!(
        findings.contains("undecided in 1 (+89.53%; could detect ±"),
        "{findings}"
    );
    assert!(findings.contains("n = 3 per side"), "{findings}");
    for never in ["no difference", "equivalent", "no significant difference"] {
        assert!(!findings.contains(never), "{findings}");
    }
}

/// A difference whose whole interval lies inside ±2 % is *equivalent*
/// (≈), and the findings say so with the margin; no detectable effect is
/// offered.
#[test]
fn an_interval_inside_the_margin_is_equivalent() {
    let r = report(&[(
        "udp",
        &[100.0, 100.1, 99.9, 100.0, 100.05, 99.95],
        &[100.02, 100.08, 99.92, 100.0, 100.03, 99.97],
    )]);
    let d = &r.decisions[0];
    assert_eq!(d.verdict, Decided::Equivalent, "{d:?}");
    assert_eq!(d.mde_pct, None);
    let md = render(&r, Format::Markdown);
    let row = md.lines().find(|l| l.starts_with("| udp")).unwrap();
    assert!(row.contains(" ≈") && !row.contains('~'), "{row}");
    let page = html::render_html(&r);
    assert!(page.contains("equivalent within ±2% in 1"), "{page}");
    assert!(!page.contains("undecided in"));
}
