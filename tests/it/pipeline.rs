//! The whole pipeline — study → plan → agents → store → statistics →
//! tables and JSON — driven by the `fake` workload, whose figures are
//! known exactly.

use benchlab_testkit::Scratch;

const STUDY: &str = r#"
# What the system monitors record depends on the machine: not snapshotted.
monitors = false
[study]
name = "fake-pipeline"
description = "known numbers through the whole pipeline"

[defaults]
repetitions = 3
quiesce_s = 0

[[configuration]]
name = "base"
description = "the reference"

[[configuration]]
name = "better"
description = "scores 10 % higher, latency 20 % lower"
set = { value = 110, latency_us = 8 }

[[workload]]
name = "fake"
kind = "fake"
size = [64, "1KiB", 32]
value = 100
latency_us = 10
step = 0.5
"#;

/// The tables part of `show` (the first line carries times).
fn tables(text: &str) -> String {
    // Without the host lines too (this machine's CPU and kernel), which
    // other tests check.
    text.lines()
        .skip(1)
        .filter(|l| !l.starts_with("  host "))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn fake_study_table_snapshot() {
    let s = Scratch::new();
    let study = s.study("fake.toml", STUDY);
    let out = s.run_ok(&["run", study.to_str().unwrap()]);
    crate::report::snapshot("fake_table.txt", &tables(&out));
    // `show` renders the same tables from the store alone.
    assert_eq!(tables(&s.run_ok(&["show", "1"])), tables(&out));
}

#[test]
fn fake_study_json_and_csv() {
    let s = Scratch::new();
    let study = s.study("fake.toml", STUDY);
    s.run_ok(&["run", study.to_str().unwrap()]);
    let j = s.json("1");
    assert_eq!(j["run"]["status"], "completed");
    assert_eq!(j["run"]["study_name"], "fake-pipeline");
    let tables = j["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 2, "score and latency");
    let score = &tables[0];
    assert_eq!(score["metric"], "score");
    assert_eq!(score["columns"], serde_json::json!(["base", "better"]));
    // Rows are in numeric order of the swept size, whatever the study order.
    let labels: Vec<&str> = score["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["32", "64", "1024"]);
    for row in score["rows"].as_array().unwrap() {
        // Repetitions 0, 1, 2 give value + 0.5·rep: median value + 0.5.
        assert_eq!(
            row["cells"][0]["values"],
            serde_json::json!([100.0, 100.5, 101.0])
        );
        assert_eq!(row["cells"][0]["value"], 100.5);
        assert_eq!(row["cells"][1]["value"], 110.5);
        let adv = row["advantages"][0]["pct"].as_f64().unwrap();
        assert!((adv - 10.0 / 100.5 * 100.0).abs() < 1e-9, "{adv}");
        assert_eq!(row["advantages"][0]["comparison"]["verdict"], "better");
    }
    let latency = &tables[1];
    assert_eq!(latency["better"], "lower");
    let adv = latency["rows"][0]["advantages"][0]["pct"].as_f64().unwrap();
    assert!((adv - (10.5 - 8.5) / 10.5 * 100.0).abs() < 1e-9, "{adv}");

    // Every repetition is stored with both sides' raw results.
    assert_eq!(j["points"].as_array().unwrap().len(), 6);
    let csv = s.run_ok(&["show", "1", "--format", "csv"]);
    assert_eq!(csv.lines().count(), 1 + 2 * 3 * 2, "{csv}");
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .starts_with("1,fake,fake,score,,size,32,base,100.5,"),
        "{csv}"
    );
    let md = s.run_ok(&["show", "1", "--format", "markdown"]);
    assert!(
        md.contains("| size | base | better | better advantage |"),
        "{md}"
    );
    // Appendix A: both roles' host, with this machine's kernel.
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert!(md.contains("## Appendix A — system configuration"), "{md}");
    assert!(md.contains(kernel.trim()), "{md}");
    // The hosts in one line each: the terminal's detail (its summary
    // fits a screen).
    let table = s.run_ok(&["show", "1", "--verbose"]);
    assert!(table.contains("  host generator (client): "), "{table}");
    assert!(table.contains("  host sut (server): "), "{table}");
    assert_eq!(j["hosts"].as_array().unwrap().len(), 2);
}

#[test]
fn failed_points_are_recorded_and_the_study_goes_on() {
    let s = Scratch::new();
    let study = s.study(
        "fail.toml",
        r#"
[study]
name = "failing"
[defaults]
repetitions = 2
quiesce_s = 0
[[workload]]
kind = "fake"
size = [1, 2]
[[workload]]
name = "broken"
kind = "fake"
fail = true
[[workload]]
name = "after"
kind = "fake"
"#,
    );
    let out = s.run(&["run", study.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("2 repetition(s) without a figure"),
        "{stdout}"
    );
    assert!(stdout.contains("fake failure requested"), "{stdout}");
    let j = s.json("1");
    let failures = j["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 2);
    assert_eq!(failures[0]["workload"], "broken");
    assert_eq!(failures[0]["status"], "failed");
    assert!(failures[0]["reason"]
        .as_str()
        .unwrap()
        .contains("client side: fake failure requested"));
    // The workload after the broken one still ran.
    let after = j["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["workload"] == "after")
        .unwrap();
    assert_eq!(after["metrics"]["score"].as_array().unwrap().len(), 2);
}

#[test]
fn on_error_stop_ends_the_run() {
    let s = Scratch::new();
    let study = s.study(
        "stop.toml",
        "[study]\nname = \"stop\"\n[defaults]\nrepetitions = 1\nquiesce_s = 0\non_error = \"stop\"\n[[workload]]\nkind = \"fake\"\nfail = true\n[[workload]]\nname = \"never\"\nkind = \"fake\"\n",
    );
    let out = s.run(&["run", study.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    let j = s.json("1");
    assert_eq!(j["run"]["status"], "failed");
    assert!(j["points"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["workload"] != "never"));
}

#[test]
fn a_broken_study_names_file_line_and_key() {
    let s = Scratch::new();
    let study = s.study(
        "broken.toml",
        "[study]\nname = \"b\"\n[[workload]]\nkind = \"fake\"\nsize = \"4 parsecs\"\n",
    );
    let out = s.run(&["run", study.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.toml:5:"), "{err}");
    assert!(err.contains("key `workload[0].size`"), "{err}");
    assert!(err.contains("unknown size unit"), "{err}");
    // Nothing ran, nothing was stored.
    assert!(s.run_ok(&["list"]).contains("no runs"));
}

#[test]
fn quick_runs_are_marked() {
    let s = Scratch::new();
    let study = s.study("q.toml", STUDY);
    s.run_ok(&["run", "--quick", study.to_str().unwrap()]);
    let j = s.json("1");
    assert_eq!(
        j["run"]["options"],
        serde_json::json!({"scale": 0.05, "quick": true})
    );
    assert_eq!(
        j["points"][0]["metrics"]["score"].as_array().unwrap().len(),
        1
    );
    assert!(s.run_ok(&["list"]).contains("(trial)"));
}

/// Every shipped study is a fixture: it validates, and its plan has the
/// seeds' sweeps.
#[test]
fn shipped_studies_validate() {
    let s = Scratch::new();
    let dir = benchlab_testkit::repo().join("studies");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let out = s.run_ok(&["check", path.to_str().unwrap()]);
            assert!(out.contains("is valid"), "{out}");
            seen += 1;
        }
    }
    assert!(seen >= 3);
    // Seed 000: 12 sizes × 2 protocols of stream, 11 × 2 of rr as run
    // (1-byte transactions under the seed's -m labels), 11 × 2 of rr as
    // meant, 8 receive buffers, for each of 2 configurations, 3 repetitions
    // each.
    // Every seed study puts its seed's preparation steps on the record.
    for seed in [
        "seed-000-network",
        "seed-001-iozone",
        "seed-002-pingpong",
        "seed-002-realtime",
        "seed-003-broker",
    ] {
        let out = s.run_ok(&["check", dir.join(format!("{seed}.toml")).to_str().unwrap()]);
        assert!(
            out.contains("steps of the reproduced study on record"),
            "{seed}: {out}"
        );
    }
    // Seed 003's bridged vs passthrough networking: the same brokers,
    // reached through the test bed's bridge or over direct links.
    let out = s.run_ok(&["check", dir.join("seed-003-broker.toml").to_str().unwrap()]);
    assert!(
        out.contains("4 configuration(s)")
            && out.contains(
                "configuration host-direct: runs on other hosts: b1 → b1-direct, b2 → b2-direct"
            )
            && out.contains(
                "configuration guest-direct: runs on other hosts: b1 → g1-direct, b2 → g2-direct"
            ),
        "{out}"
    );
    let bed = benchlab_testbed::parse_spec(
        "seed-003-broker.toml",
        &std::fs::read_to_string(dir.join("seed-003-broker.toml")).unwrap(),
    )
    .unwrap();
    assert_eq!(bed.links.len(), 2, "a direct link to each broker");
    let out = s.run_ok(&["check", dir.join("seed-000-network.toml").to_str().unwrap()]);
    assert!(
        out.contains("steps of the reproduced study on record: 20 (5 applied, 10 approximated, 5 not possible here)"),
        "{out}"
    );
    let points = 2 * (12 * 2 + 11 * 2 + 11 * 2 + 8);
    assert!(
        out.contains(&format!("{points} points, {} repetitions", points * 3)),
        "{out}"
    );
}
