//! The until-decided design's keys (issue 36): margins per study,
//! workload and metric, the budget, and the errors that name the file,
//! the key and what is allowed.

use benchlab_core::fake::FAKE;
use benchlab_core::plan::{Plan, RunOptions};
use benchlab_core::study::{DesignKind, Study, StudyError, DEFAULT_MARGIN_PCT};
use benchlab_core::Registry;

fn registry() -> Registry {
    let mut r = Registry::new();
    r.add(&FAKE);
    r
}

fn parse(text: &str) -> Result<Study, StudyError> {
    Study::parse("d.toml", text, &registry())
}

const TWO: &str = r#"
[[configuration]]
name = "a"
[[configuration]]
name = "b"
set = { value = 105 }
[[workload]]
kind = "fake"
size = [1, 2]
sleep_s = 2
"#;

fn study(head: &str) -> String {
    format!("[study]\nname = \"d\"\n{head}\n{TWO}")
}

fn refused(text: &str, line: usize, key: &str, needles: &[&str]) {
    let e = parse(text).expect_err("the study must be refused");
    let shown = e.to_string();
    assert_eq!((e.file.as_str(), e.line), ("d.toml", line), "{shown}");
    assert_eq!(e.key, key, "{shown}");
    for n in needles {
        assert!(shown.contains(n), "`{n}` missing from: {shown}");
    }
}

#[test]
fn margins_resolve_metric_then_workload_then_study_then_default() {
    let s = parse(&study("")).unwrap();
    assert_eq!(s.design.kind, DesignKind::Fixed);
    assert_eq!(s.margin_pct(0, "score"), DEFAULT_MARGIN_PCT);

    let s = parse(&study("design = \"until-decided\"\nmargin = \"3%\"")).unwrap();
    assert_eq!(s.design.kind, DesignKind::UntilDecided);
    assert_eq!(s.margin_pct(0, "score"), 3.0);

    let text = study("margin = { default = \"3%\", latency_us = \"7.5%\" }")
        .replace("sleep_s = 2", "sleep_s = 2\nmargin = { score = \"1%\" }");
    let s = parse(&text).unwrap();
    assert_eq!(s.margin_pct(0, "score"), 1.0);
    assert_eq!(s.margin_pct(0, "latency_us"), 7.5);

    let text = study("margin = \"3%\"").replace("sleep_s = 2", "sleep_s = 2\nmargin = \"0%\"");
    let s = parse(&text).unwrap();
    assert_eq!(s.margin_pct(0, "score"), 0.0);
}

#[test]
fn a_negative_or_non_numeric_margin_is_refused() {
    refused(
        &study("margin = \"-2%\""),
        3,
        "study.margin",
        &["-2% is negative", "\"2%\""],
    );
    refused(&study("margin = 2"), 3, "study.margin", &["a percentage"]);
    refused(
        &study("margin = \"two%\""),
        3,
        "study.margin",
        &["a percentage"],
    );
    let text = study("").replace("sleep_s = 2", "sleep_s = 2\nmargin = { score = \"x\" }");
    refused(&text, 14, "workload[0].margin.score", &["a percentage"]);
    let text = study("").replace("sleep_s = 2", "sleep_s = 2\nmargin = { scroe = \"1%\" }");
    refused(
        &text,
        14,
        "workload[0].margin.scroe",
        &[
            "no workload here has a metric `scroe`",
            "score",
            "latency_us",
        ],
    );
}

#[test]
fn a_budget_smaller_than_one_round_is_refused() {
    // One round: 2 points × 2 configurations × (2 s + 1 s of quiesce +
    // the plan's overhead).
    let reg = registry();
    let s = parse(&study("")).unwrap();
    let round = s.round_s(&reg, RunOptions::default());
    assert!(round > 12.0 && round < 13.0, "{round}");
    // Refused where the run's options are known: a 5 s budget holds no
    // full-length round, but a round at a tenth of the time fits in it.
    let short = parse(&study("design = \"until-decided\"\nmax_duration = \"5s\"")).unwrap();
    let e = short
        .check_budget(&reg, RunOptions::default())
        .expect_err("5 s holds no round");
    let shown = e.to_string();
    assert_eq!(
        (e.file.as_str(), e.line, e.key.as_str()),
        ("d.toml", 4, "study.max_duration"),
        "{shown}"
    );
    for n in ["less than one round", "at least", "12"] {
        assert!(shown.contains(n), "`{n}` missing from: {shown}");
    }
    assert!(!shown.contains("at this run's scale"), "{shown}");
    let tenth = RunOptions {
        scale: 0.1,
        quick: false,
    };
    assert!(short.round_s(&reg, tenth) < 5.0);
    short
        .check_budget(&reg, tenth)
        .expect("a tenth of a round fits in 5 s");
    let double = RunOptions {
        scale: 2.0,
        quick: false,
    };
    let e = short.check_budget(&reg, double).unwrap_err();
    assert!(e.to_string().contains("at this run's scale"), "{e}");
    refused(
        &study("max_duration = \"soon\""),
        3,
        "study.max_duration",
        &["\"30m\""],
    );
    refused(
        &study("max_repetitions = 1"),
        3,
        "study.max_repetitions",
        &["≥ 2", "one round"],
    );
    let s = parse(&study(
        "design = \"until-decided\"\nmax_duration = \"1m\"\nmax_repetitions = 9",
    ))
    .unwrap();
    assert_eq!(s.design.max_duration_s, Some(60.0));
    assert_eq!(s.design.max_repetitions, 9);
    let s = parse(&study("max_duration = 600")).unwrap();
    assert_eq!(s.design.max_duration_s, Some(600.0));
}

#[test]
fn the_design_must_fit_the_order_and_the_repetitions() {
    refused(
        &study("design = \"decide\""),
        3,
        "study.design",
        &["\"fixed\"", "\"until-decided\""],
    );
    refused(
        &study("design = \"until-decided\"\norder = \"sequential\""),
        3,
        "study.design",
        &["alternate or run in ABBA blocks"],
    );
    let text = study("design = \"until-decided\"").replace(
        "sleep_s = 2",
        "sleep_s = 2\nrepetitions = { min = 2, max = 5, target_ci = \"2%\" }",
    );
    refused(&text, 3, "study.design", &["replaces adaptive repetitions"]);
    // --design on the command line replaces a sequential order (a seed's
    // published design) by the one the study would get without the key,
    // and says why; the fixed design keeps it.
    let mut s = parse(&study("order = \"sequential\"")).unwrap();
    assert!(s.set_design(DesignKind::Fixed).is_ok());
    assert_eq!(s.order, benchlab_core::study::Order::Sequential);
    s.set_design(DesignKind::UntilDecided).unwrap();
    assert!(
        matches!(s.order, benchlab_core::study::Order::Alternate { .. }),
        "{:?}",
        s.order
    );
    assert!(
        s.order_why
            .contains("instead of the file's order = \"sequential\""),
        "{}",
        s.order_why
    );
}

#[test]
fn rounds_follow_the_order_abba_where_blocks() {
    let reg = registry();
    let s = parse(&study("design = \"until-decided\"\norder = \"blocks\"")).unwrap();
    let plan = Plan::new(&s, &reg, RunOptions::default());
    let cfgs = |round: u32| -> Vec<(usize, usize, u32)> {
        plan.round_units(&s, round, &[(0, 0), (0, 1)], |_| round)
            .iter()
            .map(|u| {
                let p = &plan.points[u.point];
                (p.config, p.point, u.repetition)
            })
            .collect()
    };
    assert_eq!(cfgs(0), [(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)]);
    assert_eq!(cfgs(1), [(1, 0, 1), (1, 1, 1), (0, 0, 1), (0, 1, 1)]);
    // Only the rows asked for run.
    assert_eq!(plan.round_units(&s, 2, &[(0, 1)], |_| 2).len(), 2);
    assert_eq!(s.block_of(5, 3), 5);

    let s = parse(&study(
        "design = \"until-decided\"\norder = \"alternate\"\nseed = 3",
    ))
    .unwrap();
    let plan = Plan::new(&s, &reg, RunOptions::default());
    let firsts: Vec<usize> = (0..8)
        .map(|r| plan.points[plan.round_units(&s, r, &[(0, 0)], |_| r)[0].point].config)
        .collect();
    assert!(firsts.contains(&0) && firsts.contains(&1), "{firsts:?}");
    for r in 0..8 {
        let u = plan.round_units(&s, r, &[(0, 0)], |_| r);
        assert_eq!(u.len(), 2);
        assert_ne!(
            plan.points[u[0].point].config,
            plan.points[u[1].point].config
        );
    }
}
