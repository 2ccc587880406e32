//! Issue 36: an until-decided study run through `benchlab run`, its
//! report read back in every format. The fake system with 3 % noise is
//! 5 % faster under `plus5`: the sequential rule calls it better within
//! its repetitions, and the terminal, Markdown, HTML and JSON reports
//! each show that verdict with the repetitions it rests on, the header's
//! count of decided comparisons and the fixed design's cost, and the
//! A/A control's verdict beside it (a warning wherever it is better or
//! worse).

use benchlab_testkit::Scratch;

const STUDY: &str = r#"
[study]
name = "planted"
design = "until-decided"
margin = "2%"
control = true
max_repetitions = 40

[defaults]
quiesce_s = 0

[[configuration]]
name = "base"

[[configuration]]
name = "plus5"
set = { value = 105 }

[[workload]]
name = "w"
kind = "fake"
noise = 0.03
step = 0
seed = 7
"#;

/// The whitespace runs of `s` made one space (the terminal wraps).
fn one(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The decisions table's line (or HTML row) of `text` that names `who`
/// and `metric` (at the study's one point, `w · -`).
fn row_of<'a>(text: &'a str, sep: &str, who: &str, metric: &str) -> &'a str {
    text.split(sep)
        .find(|r| r.contains(who) && r.contains("w · -") && r.contains(metric))
        .unwrap_or_else(|| panic!("no row names {who:?} and {metric:?}:\n{text}"))
}

#[test]
fn a_planted_difference_reads_better_with_its_repetitions_in_every_format() {
    let s = Scratch::new();
    let study = s.study("planted.toml", STUDY);
    s.run_ok(&["run", study.to_str().unwrap()]);

    let j = s.json("1");
    let decisions = j["decisions"].as_array().expect("the decisions");
    let real: Vec<_> = decisions.iter().filter(|d| d["control"] != true).collect();
    let control: Vec<_> = decisions.iter().filter(|d| d["control"] == true).collect();
    assert!(!real.is_empty() && !control.is_empty(), "{decisions:?}");
    // `value` moves the fake system's score, not its latency.
    let plus5 = real
        .iter()
        .find(|d| d["metric"] == "score")
        .expect("the score's verdict");
    assert_eq!(plus5["configuration"], "plus5", "{plus5}");
    assert_eq!(plus5["verdict"], "better", "{plus5}");
    assert_eq!(plus5["margin_pct"], 2.0, "{plus5}");
    let (lo, hi) = (
        plus5["ci_lo_pct"].as_f64().unwrap(),
        plus5["ci_hi_pct"].as_f64().unwrap(),
    );
    assert!(lo <= 5.0 && 5.0 <= hi, "{plus5}");
    let reps = plus5["repetitions"].as_u64().unwrap();
    assert!((2..=40).contains(&reps), "{plus5}");
    let design = &j["design"];
    let decided = decisions
        .iter()
        .filter(|d| d["verdict"] != "undecided")
        .count();
    assert_eq!(design["comparisons"], decisions.len(), "{design}");
    assert_eq!(design["decided"], decided, "{design}");
    let counted = |n: &serde_json::Value, noun: &str| {
        let n = n.as_u64().unwrap();
        format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
    };
    let header = format!(
        "Until decided: {decided} of {} decided in {} ({},",
        counted(&serde_json::json!(decisions.len()), "comparison"),
        counted(&design["rounds"], "round"),
        counted(&design["repetitions"], "repetition"),
    );
    let fixed = format!(
        "fixed design: {}, about",
        counted(&design["fixed_repetitions"], "repetition")
    );
    let aa_called = control
        .iter()
        .any(|d| d["verdict"] == "better" || d["verdict"] == "worse");

    // Every verdict's row is the terminal's detail; its summary counts
    // them, the A/A control's beside the real ones.
    let summary = one(&s.run_ok(&["show", "1"]));
    assert!(summary.contains(&header), "{summary}");
    assert!(
        summary.contains("plus5 vs base — w · Fake score"),
        "{summary}"
    );
    assert!(summary.contains("base (A/A control) vs base"), "{summary}");
    let terminal = s.run_ok(&["show", "1", "--verbose"]);
    let (md, html) = s.report_md_html("1");
    for (name, text) in [("terminal", &terminal), ("markdown", &md), ("html", &html)] {
        let flat = one(text);
        assert!(flat.contains(&header), "{name} lacks {header:?}:\n{text}");
        assert!(flat.contains(&fixed), "{name} lacks {fixed:?}:\n{text}");
        assert!(flat.contains("base (A/A control)"), "{name}:\n{text}");
        assert!(
            flat.contains("until decided: rounds until every comparison is better, worse or equivalent within its margin, at most 40 per point"),
            "{name}:\n{text}"
        );
        assert_eq!(
            flat.contains("Warning: the A/A control"),
            aa_called,
            "{name}:\n{text}"
        );
    }
    // The verdict and its repetitions on the comparison's own row.
    let t = row_of(&terminal, "\n", "plus5 vs base", "score");
    let words: Vec<&str> = t.split_whitespace().collect();
    assert!(
        words.contains(&"better") && words.contains(&reps.to_string().as_str()),
        "{t}"
    );
    let m = row_of(&md, "\n", "plus5 vs base", "score");
    assert!(
        m.contains("| better |") && m.contains(&format!("| {reps} |")),
        "{m}"
    );
    let h = row_of(&html, "<tr", "plus5 vs base", "score");
    assert!(
        h.contains(r#"class="better">better<"#) && h.contains(&format!(">{reps}<")),
        "{h}"
    );
}
