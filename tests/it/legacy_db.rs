//! A database written by an earlier benchlab (commit e844575, before runs
//! stored their resolved plan) still shows and reports, with every figure
//! unchanged. `tests/fixtures/legacy-v0/` holds that database, the study
//! that made it, and the figures that benchlab printed
//! (`show 1 --format json`, flattened to CSV).

use benchlab_testkit::{repo, Scratch};

/// (workload, metric, fixed, row, configuration) → (value, values).
type Figures =
    std::collections::BTreeMap<(String, String, String, String, String), (f64, Vec<f64>)>;

fn expected() -> Figures {
    let text = std::fs::read_to_string(repo().join("tests/fixtures/legacy-v0/figures.csv"))
        .expect("figures.csv");
    let mut out = Figures::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 7, "{line}");
        let values = f[6]
            .split(' ')
            .filter(|v| !v.is_empty())
            .map(|v| v.parse().expect("number"))
            .collect();
        out.insert(
            (
                f[0].into(),
                f[1].into(),
                f[2].into(),
                f[3].into(),
                f[4].into(),
            ),
            (f[5].parse().expect("number"), values),
        );
    }
    out
}

fn shown(json: &serde_json::Value) -> Figures {
    let mut out = Figures::new();
    for t in json["tables"].as_array().expect("tables") {
        let cols: Vec<String> = t["columns"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| c.as_str().expect("column").to_string())
            .collect();
        for r in t["rows"].as_array().expect("rows") {
            for (col, c) in cols.iter().zip(r["cells"].as_array().expect("cells")) {
                let key = (
                    t["workload"].as_str().unwrap_or_default().to_string(),
                    t["metric"].as_str().unwrap_or_default().to_string(),
                    t["fixed"].as_str().unwrap_or_default().to_string(),
                    r["label"].as_str().unwrap_or_default().to_string(),
                    col.clone(),
                );
                let values = c["values"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
                    .unwrap_or_default();
                out.insert(key, (c["value"].as_f64().unwrap_or(f64::NAN), values));
            }
        }
    }
    out
}

/// A figure's repetition values from the points of `show --format json`:
/// the point of that workload and configuration whose parameters have the
/// table's fixed values and the row's value.
fn point_values(
    json: &serde_json::Value,
    (workload, metric, fixed, row, config): &(String, String, String, String, String),
) -> Vec<f64> {
    let label = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let point = json["points"]
        .as_array()
        .expect("points")
        .iter()
        .find(|p| {
            let params = p["params"].as_object().expect("params");
            p["workload"] == workload.as_str()
                && p["configuration"] == config.as_str()
                && fixed.split(' ').filter(|f| !f.is_empty()).all(|f| {
                    let (k, v) = f.split_once('=').expect("k=v");
                    params.get(k).map(label).as_deref() == Some(v)
                })
                && params.values().any(|v| &label(v) == row)
        })
        .unwrap_or_else(|| panic!("no point for {workload} {config} {fixed} {row}"));
    point["metrics"][metric.as_str()]
        .as_array()
        .unwrap_or_else(|| panic!("{metric} not stored"))
        .iter()
        .filter_map(|v| v.as_f64())
        .collect()
}

/// A copy of the fixture, upgraded once as its user would
/// (`benchlab store upgrade`: reading commands never upgrade).
fn scratch_with_fixture() -> Scratch {
    let s = Scratch::new();
    std::fs::copy(repo().join("tests/fixtures/legacy-v0/legacy.db"), s.db()).expect("copy db");
    s.run_ok(&["store", "upgrade"]);
    s
}

#[test]
fn legacy_database_shows_every_figure_unchanged() {
    let s = scratch_with_fixture();
    let want = expected();
    assert_eq!(want.len(), 20, "the fixture's figure count");
    let json = s.json("1");
    let got = shown(&json);
    let mut in_tables = 0;
    for (key, (value, values)) in &want {
        match got.get(key) {
            Some((v, vs)) => {
                assert_eq!(v, value, "{key:?}");
                assert_eq!(vs, values, "{key:?}");
                in_tables += 1;
            }
            // Issue 13 made the IOzone tables show each cell's plain mean
            // (seed 001's Appendix D figure) instead of its geometric
            // mean: those figures are still every point's stored metrics.
            None => assert_eq!(
                &point_values(&json, key),
                values,
                "{key:?} neither in a table nor in its point"
            ),
        }
    }
    assert_eq!(in_tables, 12, "fake and net.rr tables are as they were");
    // The text form and the list still read it.
    let text = s.run_ok(&["show", "1"]);
    assert!(text.contains("study legacy-v0"), "{text}");
    assert!(s.run_ok(&["list"]).contains("legacy-v0"));
}

#[test]
fn legacy_database_reports_in_every_format() {
    let s = scratch_with_fixture();
    let (html, md, json) = (s.path("r.html"), s.path("r.md"), s.path("r.json"));
    s.run_ok(&[
        "report",
        "1",
        "--html",
        html.to_str().unwrap(),
        "--md",
        md.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("legacy-v0"), "{md}");
    let html = std::fs::read_to_string(html).unwrap();
    assert!(html.contains("<svg"), "charts in the HTML");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).expect("report JSON parses");
    assert!(j.is_object());
}

/// Replaces a run's stored study text, as if the study's keys had been
/// renamed since (a text that no longer validates).
fn break_study_text(s: &Scratch) {
    let db = rusqlite::Connection::open(s.db()).expect("open db");
    let n = db
        .execute(
            "UPDATE run SET study_text = '[study]\nname = 1\nno_such_key = true\n' WHERE id = 1",
            [],
        )
        .expect("update");
    assert_eq!(n, 1);
}

#[test]
fn a_legacy_run_is_resolved_once_and_then_reads_from_its_plan() {
    let s = scratch_with_fixture();
    // The upgrade resolved the plan from the study text and kept it.
    let first = shown(&s.json("1"));
    break_study_text(&s);
    assert_eq!(shown(&s.json("1")), first, "read from the kept plan");
}

#[test]
fn a_new_run_never_reads_its_study_text_again() {
    let s = Scratch::new();
    let study = std::fs::read_to_string(repo().join("tests/fixtures/legacy-v0/legacy.toml"))
        .expect("study")
        // Only the fake workload: quick and exact.
        .split("[[workload]]\nname = \"rr\"")
        .next()
        .expect("text")
        .to_string();
    let f = s.study("fake.toml", &study);
    s.run_ok(&["run", f.to_str().unwrap()]);
    let before = s.json("1");
    break_study_text(&s);
    let after = s.json("1");
    assert_eq!(shown(&after), shown(&before));
    assert!(!shown(&after).is_empty());
    s.run_ok(&["report", "1", "--md", s.path("r.md").to_str().unwrap()]);
}
