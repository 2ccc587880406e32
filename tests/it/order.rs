//! Execution order and what the verdicts may claim from it (issue 30):
//! configurations run one after the other get no verdict beyond
//! "inconclusive — one block each, drift unknown" in every format, costly
//! switches run in ABBA blocks, and an A/A control shows the machine
//! against itself. Driven by the `fake` workload, whose figures are known.

use benchlab_testkit::Scratch;

/// Two configurations 10 % apart, four repetitions each: called better
/// whenever the order lets drift be told from a difference.
const STUDY: &str = r#"
[study]
name = "order"
ORDER

[defaults]
repetitions = 4
quiesce_s = 0

[[configuration]]
name = "base"

[[configuration]]
name = "faster"
set = { value = 110 }

[[workload]]
name = "fake"
kind = "fake"
size = [64, 128]
value = 100
step = 0.5
"#;

fn study(order: &str) -> String {
    STUDY.replace("ORDER", order)
}

#[test]
fn one_block_each_is_marked_drift_unknown_in_every_format() {
    let s = Scratch::new();
    let path = s.study("seq.toml", &study("order = \"sequential\""));
    let out = s.run_ok(&["run", path.to_str().unwrap()]);
    // Terminal: the mark on every advantage, the legend, and the order.
    assert!(out.contains("~‡"), "{out}");
    assert!(
        flat(&out).contains("‡ = one block each, drift unknown"),
        "{out}"
    );
    assert!(
        flat(&out).contains("Order: sequential: every repetition of one configuration"),
        "{out}"
    );
    // JSON: inconclusive, drift unknown, although the interval clears
    // the band.
    let j = s.json("1");
    for t in j["tables"].as_array().unwrap() {
        for row in t["rows"].as_array().unwrap() {
            let c = &row["advantages"][0]["comparison"];
            assert_eq!(c["verdict"], "inconclusive", "{c}");
            assert_eq!(c["drift"], "unknown", "{c}");
        }
    }
    assert!(
        j["order"].as_str().unwrap().starts_with("sequential"),
        "{}",
        j["order"]
    );
    // Markdown and HTML.
    let md = s.run_ok(&["show", "1", "--format", "markdown"]);
    assert!(md.contains("~‡"), "{md}");
    assert!(md.contains("Order: sequential"), "{md}");
    let html_path = s.path("r.html");
    s.run_ok(&["report", "1", "--html", html_path.to_str().unwrap()]);
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("~‡"), "no mark in the HTML");
    assert!(html.contains("rest on one block each, drift unknown"));
}

#[test]
fn the_default_order_alternates_and_says_why() {
    let s = Scratch::new();
    let path = s.study("alt.toml", &study(""));
    let check = s.run_ok(&["check", path.to_str().unwrap()]);
    assert!(
        check.contains("order: alternate: the configurations in a random order"),
        "{check}"
    );
    s.run_ok(&["run", path.to_str().unwrap()]);
    let j = s.json("1");
    assert!(
        j["order"].as_str().unwrap().contains("the default here"),
        "{}",
        j["order"]
    );
    // The same difference, alternated: called, and no drift mark.
    let c = &j["tables"][0]["rows"][0]["advantages"][0]["comparison"];
    assert_eq!(c["verdict"], "better", "{c}");
    assert_eq!(c["drift"], "alternated", "{c}");
}

#[test]
fn a_profile_difference_runs_in_abba_blocks_and_measures_drift() {
    let s = Scratch::new();
    let text = study("").replace(
        "set = { value = 110 }",
        "set = { value = 110 }\nprofile = \"latency-performance\"",
    );
    let path = s.study("blocks.toml", &text);
    let check = s.run_ok(&["check", path.to_str().unwrap()]);
    assert!(
        check.contains("order: blocks: 2 blocks per configuration in ABBA order"),
        "{check}"
    );
    assert!(
        check.contains("the profile (configuration `faster`)"),
        "{check}"
    );
}

#[test]
fn an_aa_control_shows_the_machine_against_itself() {
    let s = Scratch::new();
    // Noise, no difference: base and its control differ by chance only.
    let text = study("control = true").replace("step = 0.5", "step = 0\nnoise = 0.02\nseed = 5");
    let path = s.study("aa.toml", &text);
    let out = s.run_ok(&["run", path.to_str().unwrap()]);
    assert!(
        out.contains("The machine against itself (A/A control)"),
        "{out}"
    );
    let j = s.json("1");
    // Not a column.
    assert_eq!(
        j["tables"][0]["columns"],
        serde_json::json!(["base", "faster"])
    );
    // One comparison per table row: 2 metrics × 2 sizes.
    let control = j["control"].as_array().unwrap();
    assert_eq!(control.len(), 4, "{control:?}");
    for c in control {
        assert!(c["advantage"]["comparison"]["verdict"].is_string(), "{c}");
    }
    let md = s.run_ok(&["show", "1", "--format", "markdown"]);
    assert!(
        md.contains("# The machine against itself (A/A control)"),
        "{md}"
    );
    // `--aa` does the same for a study without the key.
    let plain = s.study("plain.toml", &study(""));
    s.run_ok(&["run", "--aa", plain.to_str().unwrap()]);
    assert_eq!(s.json("2")["control"].as_array().unwrap().len(), 4);
}

/// The text with every run of white space made one space: the terminal
/// writer wraps long lines at its width.
fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
