//! Issue 6: adaptive repetitions. The fake workload's figures are known
//! (value + step · repetition), so the stop rule's decisions are too:
//!
//! * step 0.5, target ±2 %: after 3 repetitions (100, 100.5, 101) the 95 %
//!   interval of the mean is ±4.303 · 0.5/√3 / 100.5 = ±1.24 %: stop at 3.
//! * step 0.5, target ±0.5 %: the spread grows with every repetition of a
//!   linear series, the half-width never drops below 0.97 %: stop at the cap.
//!
//! `--resume` continues the same rule from the stored repetitions.

use benchlab_testkit::Scratch;

const STUDY: &str = r#"
[study]
name = "adaptive"
[defaults]
repetitions = { min = 3, max = 8, target_ci = "2%" }
quiesce_s = 0
[[configuration]]
name = "a"
[[workload]]
name = "easy"
kind = "fake"
size = [1, 2]
step = 0.5
[[workload]]
name = "hard"
kind = "fake"
size = 1
step = 0.5
repetitions = { min = 3, max = 6, target_ci = "0.5%" }
"#;

/// (workload, point label) → number of ok repetitions.
fn counts(db: &std::path::Path) -> Vec<(String, String, i64)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn
        .prepare(
            "SELECT p.workload_name, p.label, count(*) FROM sample s JOIN point p ON p.id = s.point_id
             WHERE s.status = 'ok' GROUP BY p.id ORDER BY p.workload_idx, p.point_idx",
        )
        .unwrap();
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

fn expected() -> Vec<(String, String, i64)> {
    vec![
        ("easy".into(), "size=1".into(), 3),
        ("easy".into(), "size=2".into(), 3),
        ("hard".into(), "-".into(), 6),
    ]
}

#[test]
fn stops_at_target_or_cap_and_reports_the_rule() {
    let s = Scratch::new();
    let study = s.study("a.toml", STUDY);
    let check = s.run_ok(&["check", study.to_str().unwrap()]);
    assert!(check.contains("× 8 repetition(s)"), "{check}");
    s.run_ok(&["run", study.to_str().unwrap()]);
    assert_eq!(counts(&s.db()), expected());

    let md = s.run_ok(&["show", "1", "--format", "markdown"]);
    assert!(
        md.contains("Repetitions: easy: adaptive: at least 3 and at most 8 repetitions per point, stopping once the 95 % confidence interval of the mean is within ±2% of it; hard: adaptive: at least 3 and at most 6"),
        "{md}"
    );
    let j = s.json("1");
    let hard = j["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["workload"] == "hard")
        .unwrap();
    assert_eq!(
        hard["rows"][0]["cells"][0]["values"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    // Each stop is an event of the run, with its reason.
    let conn = rusqlite::Connection::open(s.db()).unwrap();
    let events: Vec<String> = conn
        .prepare("SELECT message FROM run_event WHERE kind = 'adaptive' ORDER BY rowid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events[0]
            .contains("easy · size=1: stopped after 3 repetition(s): 95% interval ±1.24% ≤ ±2%"),
        "{events:?}"
    );
}

#[test]
fn resume_continues_the_rule() {
    let s = Scratch::new();
    let study = s.study("a.toml", STUDY);
    s.run_ok(&["run", study.to_str().unwrap()]);
    // Pretend the run was interrupted: drop the last repetitions of two
    // points, as if they had never run.
    let conn = rusqlite::Connection::open(s.db()).unwrap();
    conn.execute_batch(
        "DELETE FROM side_result WHERE sample_id IN (SELECT s.id FROM sample s JOIN point p ON p.id = s.point_id
             WHERE (p.workload_name = 'hard' AND s.repetition >= 4) OR (p.label = 'size=2' AND s.repetition = 2));
         DELETE FROM histogram WHERE sample_id IN (SELECT s.id FROM sample s JOIN point p ON p.id = s.point_id
             WHERE (p.workload_name = 'hard' AND s.repetition >= 4) OR (p.label = 'size=2' AND s.repetition = 2));
         DELETE FROM sample WHERE id IN (SELECT s.id FROM sample s JOIN point p ON p.id = s.point_id
             WHERE (p.workload_name = 'hard' AND s.repetition >= 4) OR (p.label = 'size=2' AND s.repetition = 2));
         UPDATE run SET status = 'interrupted', controller_pid = NULL;",
    )
    .unwrap();
    drop(conn);
    let before = counts(&s.db());
    assert_eq!(before[2].2, 4);
    s.run_ok(&["run", "--resume", "1"]);
    assert_eq!(counts(&s.db()), expected());
}
