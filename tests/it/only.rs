//! Part of a study (issue 37): `benchlab run --only configuration=…
//! --only workload=…` runs only those, stores only those, and every
//! format of its report says what was left out; an unknown name is
//! refused before anything starts. Driven by the `fake` workload, whose
//! figures are known.

use benchlab_testkit::{repo, schema, Scratch};

/// Four configurations 10 points apart, two workloads.
const STUDY: &str = r#"
[study]
name = "only"

[defaults]
repetitions = 2
quiesce_s = 0

[[configuration]]
name = "a"
[[configuration]]
name = "b"
set = { value = 110 }
[[configuration]]
name = "c"
set = { value = 120 }
[[configuration]]
name = "d"
set = { value = 130 }

[[workload]]
name = "one"
kind = "fake"
size = [1, 2]

[[workload]]
name = "two"
kind = "fake"
size = 1
"#;

const LEFT_OUT: [&str; 2] = [
    "ran 2 of 4 configurations: left out a, c (--only)",
    "ran 1 of 2 workloads: left out two (--only)",
];

/// (configuration names, workload names, ok samples) of run 1 as stored.
fn stored(db: &std::path::Path) -> (Vec<String>, Vec<String>, i64) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let strings = |sql: &str| -> Vec<String> {
        let mut st = conn.prepare(sql).unwrap();
        let rows = st.query_map([], |r| r.get(0)).unwrap();
        rows.map(Result::unwrap).collect()
    };
    let configs = strings("SELECT name FROM configuration WHERE run_id = 1 ORDER BY idx");
    let workloads =
        strings("SELECT DISTINCT workload_name FROM point WHERE run_id = 1 ORDER BY workload_idx");
    let ok = conn
        .query_row(
            "SELECT count(*) FROM sample s JOIN point p ON p.id = s.point_id
             WHERE p.run_id = 1 AND s.status = 'ok'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    (configs, workloads, ok)
}

#[test]
fn only_runs_the_part_named_and_every_format_says_what_was_left_out() {
    let s = Scratch::new();
    let path = s.study("only.toml", STUDY);
    let path = path.to_str().unwrap();
    let only = ["--only", "configuration=b,d", "--only", "workload=one"];

    let check = s.run_ok(&[&["check"][..], &only, &[path]].concat());
    assert!(
        check.contains("2 configuration(s), 1 workload(s), 4 points, 8 repetitions to run"),
        "{check}"
    );
    for line in LEFT_OUT {
        assert!(check.contains(line), "{check}");
    }

    let out = s.run_ok(&[&["run"][..], &only, &[path]].concat());
    assert_eq!(
        stored(&s.db()),
        (vec!["b".into(), "d".into()], vec!["one".into()], 8)
    );
    for line in LEFT_OUT {
        assert!(
            flat(&out).contains(&format!("Part of the study: {line}")),
            "{out}"
        );
    }

    // The stored plan holds the part and what was left out.
    let conn = rusqlite::Connection::open(s.db()).unwrap();
    let plan: String = conn
        .query_row("SELECT plan FROM run_plan WHERE run_id = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
    assert_eq!(
        plan["study"]["left_out"],
        serde_json::json!({
            "configurations": ["a", "c"],
            "of_configurations": 4,
            "workloads": ["two"],
            "of_workloads": 2
        })
    );

    // JSON (valid against its schema), Markdown and HTML.
    let j = s.json("1");
    assert_eq!(j["left_out"], serde_json::json!(LEFT_OUT));
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/report.schema.json")).unwrap(),
    )
    .unwrap();
    let problems = schema::validate(&schema, &j);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(j["tables"][0]["columns"], serde_json::json!(["b", "d"]));
    let md = s.run_ok(&["show", "1", "--format", "markdown"]);
    for line in LEFT_OUT {
        assert!(md.contains(&format!("Part of the study: {line}.")), "{md}");
    }
    let html = s.path("r.html");
    s.run_ok(&["report", "1", "--html", html.to_str().unwrap()]);
    let html = std::fs::read_to_string(html).unwrap();
    for line in LEFT_OUT {
        assert!(
            html.contains(&format!("Part of the study: {line}")),
            "{line}"
        );
    }
}

#[test]
fn an_unknown_name_is_refused_naming_those_the_study_has() {
    let s = Scratch::new();
    let path = s.study("only.toml", STUDY);
    let path = path.to_str().unwrap();
    for cmd in ["check", "run"] {
        let out = s.run(&[
            cmd,
            "--only",
            "configuration=b,guest",
            "--only",
            "workload=three",
            path,
        ]);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                r#"{path}: --only configuration: the study has no configuration "guest" (configurations: "a", "b", "c", "d"); --only workload: the study has no workload "three" (workloads: "one", "two")"#
            )),
            "{cmd}: {err}"
        );
    }
    // Refused before anything started: no run was stored.
    let list = s.run_ok(&["list"]);
    assert!(list.starts_with("no runs in"), "{list}");

    let out = s.run(&["run", "--only", "configurations=a", path]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"no key `configurations`: --only takes "configuration", "workload""#),
        "{err}"
    );
}

/// The text with every run of white space made one space: the terminal
/// writer wraps long lines at its width.
fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
