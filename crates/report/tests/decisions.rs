//! Issue 36: an until-decided run's verdicts, margins, repetitions and
//! detectable effects in every format, its header's cost against the
//! fixed design, and an A/A control called better or worse as a warning
//! in every format (one place decides it: `marks::control_warning`).

use benchlab_core::decision::{Decided, DesignSummary, StopReason};
use benchlab_report::model::Decision;
use benchlab_report::{html, import, render, render_with, Format, RunReport};

fn decision(configuration: &str, control: bool, verdict: Decided) -> Decision {
    Decision {
        configuration: configuration.into(),
        control,
        workload: "w".into(),
        point: "size=1".into(),
        metric: "ops".into(),
        verdict,
        repetitions: 7,
        margin_pct: 2.0,
        advantage_pct: Some(if verdict == Decided::Better {
            5.12
        } else {
            0.31
        }),
        ci_lo_pct: Some(if verdict == Decided::Better {
            3.4
        } else {
            -1.2
        }),
        ci_hi_pct: Some(if verdict == Decided::Better { 6.9 } else { 1.7 }),
        mde_pct: (verdict == Decided::Undecided).then_some(3.25),
    }
}

fn report(control: Decided) -> RunReport {
    let text = format!(
        "{}\nt,higher,,size,1,2,1,base,10\nt,higher,,size,1,2,1,plus5,10.5\n",
        import::HEADER
    );
    let mut r = import::figures_csv("s", &text).unwrap();
    r.design = Some(DesignSummary {
        comparisons: 3,
        decided: 2,
        rounds: 7,
        repetitions: 21,
        elapsed_s: 12.5,
        fixed_repetitions: 60,
        fixed_s: 35.0,
        stop: StopReason::MaxRepetitions,
    });
    r.decisions = vec![
        decision("plus5", false, Decided::Better),
        decision("other", false, Decided::Undecided),
        decision("base (A/A)", true, control),
    ];
    r
}

/// Each format's output, its whitespace runs made one space (the
/// terminal wraps long lines); the terminal's with its detail
/// (`--verbose`), where every verdict has its row.
fn formats(r: &RunReport) -> Vec<(&'static str, String)> {
    let one = |s: String| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let verbose = benchlab_report::Layout {
        width: 100,
        verbose: true,
    };
    vec![
        ("terminal", one(render_with(r, Format::Table, verbose))),
        ("markdown", one(render(r, Format::Markdown))),
        ("html", one(html::render_html(r))),
    ]
}

#[test]
fn verdicts_margins_repetitions_and_cost_in_every_format() {
    let r = report(Decided::Equivalent);
    for (name, out) in formats(&r) {
        for want in [
            "Until decided: 2 of 3 comparisons decided in 7 rounds (21 repetitions, 12 s; max_repetitions reached); fixed design: 60 repetitions, about 35 s.",
            "vs",
            "better",
            "undecided",
            "equivalent",
            "+5.12%",
            "[+3.40%, +6.90%]",
            "±2%",
            "±3.25%",
            "(A/A control)",
        ] {
            assert!(out.contains(want), "{name} lacks {want:?}:\n{out}");
        }
        assert!(!out.contains("Warning: the A/A control"), "{name}:\n{out}");
    }
    // The terminal's summary counts them in the headline findings, with
    // what they rest on and what the undecided one could detect.
    let summary = render(&r, Format::Table);
    let summary = summary.split_whitespace().collect::<Vec<_>>().join(" ");
    for want in [
        "plus5 vs base — w · ops: better in 1 (+5.12%) of 1; n = 7 per side.",
        "other vs base — w · ops: undecided in 1 (+0.31%; could detect ±3.25%) of 1",
    ] {
        assert!(summary.contains(want), "summary lacks {want:?}:\n{summary}");
    }
    let html = html::render_html(&r);
    assert!(html.contains("class=\"better\""), "{html}");
    assert!(html.contains("class=\"undecided\""), "{html}");
    let json: serde_json::Value = serde_json::from_str(&render(&r, Format::Json)).unwrap();
    assert_eq!(json["design"]["decided"], 2);
    assert_eq!(json["design"]["stop"], "max_repetitions");
    assert_eq!(json["decisions"][0]["verdict"], "better");
    assert_eq!(json["decisions"][0]["repetitions"], 7);
    assert!(json["decisions"][0].get("mde_pct").is_none());
    assert_eq!(json["decisions"][1]["mde_pct"], 3.25);
    assert_eq!(json["decisions"][2]["control"], true);
    assert!(json["decisions"][0].get("control").is_none());
}

#[test]
fn an_aa_control_called_better_is_a_warning_in_every_format() {
    let r = report(Decided::Worse);
    for (name, out) in formats(&r) {
        assert!(
            out.contains("Warning: the A/A control (the first configuration against itself) was called better or worse in 1 of 1 comparison(s)"),
            "{name}:\n{out}"
        );
        assert!(out.contains("w · size=1 · ops: worse"), "{name}:\n{out}");
    }
    assert!(html::render_html(&r).contains("class=\"warning\""));
}

#[test]
fn a_fixed_design_report_has_no_design_fields() {
    let mut r = report(Decided::Equivalent);
    r.design = None;
    r.decisions.clear();
    let json = render(&r, Format::Json);
    assert!(!json.contains("\"design\""), "{json}");
    assert!(!json.contains("\"decisions\""), "{json}");
    for (name, out) in formats(&r) {
        assert!(!out.contains("Until decided"), "{name}:\n{out}");
    }
}
