//! Issue 6: reports and comparisons from stored runs — Markdown and JSON
//! snapshots of the fake workload, the JSON schema, `compare` and its exit
//! code, `report` files, and the HTML report of the demo study rendered by
//! headless Chromium.

mod common;
#[path = "common/schema.rs"]
mod schema;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{repo, Scratch};

/// The fake study of `tests/pipeline.rs`, with a third configuration that
/// is worse than the base, and 4 repetitions so that the rank test can
/// decide (4 against 4: smallest possible p = 2/70 ≈ 0.029).
const STUDY: &str = r#"
[study]
name = "fake-report"
description = "known numbers through the whole pipeline into every report format"

[defaults]
repetitions = 4
quiesce_s = 0

[[configuration]]
name = "base"
description = "the reference"

[[configuration]]
name = "better"
description = "scores 10 % higher, latency 20 % lower"
set = { value = 110, latency_us = 8 }

[[configuration]]
name = "same"
description = "scores 0.2 % higher: within the noise band"
set = { value = 100.2 }

[[workload]]
name = "fake"
kind = "fake"
size = [64, 32]
value = 100
latency_us = 10
step = 0.5
"#;

/// Compares `text` with `tests/snapshots/NAME`, or writes the snapshot
/// when `UPDATE_SNAPSHOTS=1`.
fn snapshot(name: &str, text: &str) {
    let path = repo().join("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_SNAPSHOTS=1 writes it)", path.display()));
    assert_eq!(
        text, want,
        "snapshot {name} differs (UPDATE_SNAPSHOTS=1 rewrites it)"
    );
}

/// The parts of a Markdown report that do not depend on the clock or the
/// machine: without the run line (times) and Appendix A (this host).
fn stable_markdown(md: &str) -> String {
    let body = md.split("\n## Appendix A").next().unwrap();
    body.lines()
        .filter(|l| !l.starts_with("Run "))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The JSON report without what depends on the clock or the machine: run
/// times and host, inventories, events and processes' peak RSS.
fn stable_json(mut j: serde_json::Value) -> String {
    for k in [
        "started_at",
        "ended_at",
        "controller_host",
        "controller_pid",
        "study_file",
    ] {
        j["run"][k] = serde_json::Value::Null;
    }
    j["hosts"] = serde_json::json!([]);
    j["events"] = serde_json::json!([]);
    for p in j["points"].as_array_mut().unwrap() {
        for part in ["metrics", "summaries"] {
            let m = p[part].as_object_mut().unwrap();
            m.retain(|k, _| !k.ends_with("_peak_rss_kib"));
        }
    }
    serde_json::to_string_pretty(&j).unwrap() + "\n"
}

fn schema() -> serde_json::Value {
    let text = std::fs::read_to_string(repo().join("docs/report.schema.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn assert_valid(j: &serde_json::Value) {
    let errors = schema::validate(&schema(), j);
    assert!(
        errors.is_empty(),
        "schema violations:\n{}",
        errors.join("\n")
    );
}

#[test]
fn fake_markdown_and_json_snapshots_and_schema() {
    let s = Scratch::new();
    let study = s.study("fake.toml", STUDY);
    s.run_ok(&["run", study.to_str().unwrap()]);
    let md_path = s.path("r.md");
    let json_path = s.path("r.json");
    let csv_dir = s.path("csv");
    s.run_ok(&[
        "report",
        "1",
        "--md",
        md_path.to_str().unwrap(),
        "--json",
        json_path.to_str().unwrap(),
        "--csv",
        csv_dir.to_str().unwrap(),
    ]);
    let md = std::fs::read_to_string(&md_path).unwrap();
    snapshot("fake_report.md", &stable_markdown(&md));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_valid(&j);
    snapshot("fake_report.json", &stable_json(j.clone()));

    // The verdicts the fake numbers imply: "better" is better in both
    // metrics with a decisive rank test (p = 2/70); "same" is 0.2 % up,
    // inside the ±1 % noise band.
    let score = &j["tables"][0];
    assert_eq!(score["metric"], "score");
    for row in score["rows"].as_array().unwrap() {
        let better = &row["advantages"][0]["comparison"];
        assert_eq!(better["verdict"], "better");
        let p = better["rank_test"]["p_value"].as_f64().unwrap();
        assert!((p - 2.0 / 70.0).abs() < 1e-12, "{p}");
        assert_eq!(
            row["advantages"][1]["comparison"]["verdict"],
            "within_noise"
        );
        assert_eq!(row["cells"][0]["values"].as_array().unwrap().len(), 4);
    }
    assert_eq!(j["repetition_rule"], "a fixed 4 repetition(s) per point");

    // CSV: every raw repetition of every metric.
    let reps = std::fs::read_to_string(csv_dir.join("repetitions.csv")).unwrap();
    let score_lines = reps.lines().filter(|l| l.contains(",score,")).count();
    assert_eq!(score_lines, 3 * 2 * 4, "{reps}");
    assert!(
        reps.contains("1,base,fake,fake,size=64,score,3,101.5"),
        "{reps}"
    );
    assert!(csv_dir.join("tables.csv").exists());
}

#[test]
fn compare_across_runs_and_fail_on_regression() {
    let s = Scratch::new();
    let study = s.study("fake.toml", STUDY);
    s.run_ok(&["run", study.to_str().unwrap()]);
    s.run_ok(&["run", study.to_str().unwrap()]);
    // Run 2's "better" against run 1's "base": better, exit 0.
    let out = s.run(&[
        "compare",
        "1:base",
        "2:better",
        "--fail-on-regression",
        "5%",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2:better advantage"), "{text}");
    // The other way round it is a 9 % (score) and 24 % (latency) regression.
    let out = s.run(&[
        "compare",
        "2:better",
        "1:base",
        "--fail-on-regression",
        "5%",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("regression(s) beyond 5%"), "{err}");
    // A threshold above the loss: no failure; --baseline picks the column.
    let out = s.run(&[
        "compare",
        "1:base",
        "2:better",
        "--baseline",
        "2:better",
        "--fail-on-regression",
        "30",
    ]);
    assert_eq!(out.status.code(), Some(0));
    // Within the noise band is never a regression, at any threshold.
    let out = s.run(&["compare", "1:base", "2:same", "--fail-on-regression", "0%"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A whole run: all its configurations; JSON of a comparison validates.
    let j: serde_json::Value =
        serde_json::from_str(&s.run_ok(&["compare", "1", "2:base", "--format", "json"])).unwrap();
    assert_valid(&j);
    assert_eq!(
        j["tables"][0]["columns"],
        serde_json::json!(["1:base", "1:better", "1:same", "2:base"])
    );
    let out = s.run(&["compare", "1:nope", "2"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no configuration `nope`"));
}

fn find_chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}

/// Runs headless Chromium with a hard time limit; returns its stdout.
fn chromium(bin: &str, profile: &Path, args: &[&str]) -> String {
    let mut child = Command::new(bin)
        .args([
            "--headless",
            // Root in CI and containers: Chromium's sandbox needs user
            // namespaces it may not have.
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).ok();
        s
    });
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium {args:?}: {status}");
            break;
        }
        if Instant::now() > until {
            child.kill().ok();
            child.wait().ok();
            panic!("chromium {args:?} did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().unwrap()
}

/// The demo study (every network workload, two configurations) at a tenth
/// of its durations, reported as HTML, opened in headless Chromium: every
/// chart has a non-empty rendered box and marks, a screenshot is taken,
/// and the file names no external URL.
#[test]
fn demo_html_report_renders_in_chromium() {
    let s = Scratch::new();
    let demo = repo().join("studies/demo.toml");
    // Exit status 3 (some repetitions failed) still leaves a report.
    let out = s.run(&["run", demo.to_str().unwrap(), "--scale", "0.1"]);
    assert!(
        matches!(out.status.code(), Some(0) | Some(3)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html_path = s.path("demo.html");
    s.run_ok(&["report", "1", "--html", html_path.to_str().unwrap()]);
    let html = std::fs::read_to_string(&html_path).unwrap();
    for bad in ["http://", "https://", "url(", " src=", "@import", "<link"] {
        assert!(
            !html.contains(bad),
            "the report must be self-contained: found {bad}"
        );
    }
    let charts = html.matches("<svg class=\"chart\"").count();
    assert!(charts >= 6, "{charts} charts");
    assert!(html.contains("Headline findings"));
    assert!(html.contains("Appendix A — system configuration"));
    assert!(html.contains("Appendix B — methodology"));
    assert!(html.contains("a fixed 3 repetition(s) per point"));
    assert!(html.contains("[[workload]]"), "the study file verbatim");

    let Some(bin) = find_chromium() else {
        return benchlab_testkit::missing("chromium, for the browser check (Debian's chromium)");
    };
    let url = format!("file://{}", html_path.display());
    let profile = s.path("chromium-profile");
    let dom = chromium(
        bin,
        &profile,
        &["--virtual-time-budget=5000", "--dump-dom", &url],
    );
    let start = dom
        .find("<pre id=\"chart-check\">")
        .expect("chart-check element in the DOM")
        + "<pre id=\"chart-check\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let check: serde_json::Value = serde_json::from_str(&dom[start..end])
        .unwrap_or_else(|e| panic!("chart check `{}`: {e}", &dom[start..end]));
    let check = check.as_array().unwrap();
    assert_eq!(check.len(), charts, "every chart reported");
    for c in check {
        let (w, h, marks) = (
            c["width"].as_f64().unwrap(),
            c["height"].as_f64().unwrap(),
            c["marks"].as_u64().unwrap(),
        );
        assert!(
            w > 10.0 && h > 1.0 && marks > 0,
            "chart rendered empty: {c}"
        );
    }
    let shot = s.path("demo.png");
    chromium(
        bin,
        &profile,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,3000",
            &url,
        ],
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.len() > 10_000 && png.starts_with(b"\x89PNG"),
        "{} bytes",
        png.len()
    );
    // Kept for a human look after the test.
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("demo-report.png");
    std::fs::copy(&shot, &keep).ok();
    std::fs::copy(&html_path, keep.with_extension("html")).ok();
    eprintln!("screenshot: {}", keep.display());
}
