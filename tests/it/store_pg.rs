//! The PostgreSQL store through the binary (issue 15 item 3): real
//! `benchlab run` controllers writing one database at once, `benchlab copy`
//! between SQLite and PostgreSQL with the report JSON unchanged, and
//! secrets and bad URLs. The server is Debian's PostgreSQL 15, started by
//! the tests on a Unix socket (`benchlab_testkit::pg`).

use std::path::Path;
use std::process::{Command, Output};

use benchlab_testkit::pg;
use benchlab_testkit::Scratch;

const STUDY: &str = r#"
[study]
name = "pg-store"
description = "the fake workload into a shared store"

[defaults]
repetitions = 2
quiesce_s = 0

[[configuration]]
name = "base"

[[configuration]]
name = "better"
set = { value = 110, latency_us = 8 }

[[workload]]
name = "fake"
kind = "fake"
size = [64, "1KiB"]
value = 100
latency_us = 10
step = 0.5

[[workload]]
name = "broken"
kind = "fake"
fail = true
"#;

/// The same study, slower: each run lasts a few seconds, so that two
/// controllers started together write at the same time.
fn slow_study(name: &str) -> String {
    STUDY
        .replace("name = \"pg-store\"", &format!("name = \"{name}\""))
        .replace("step = 0.5", "step = 0.5\nsleep_s = 0.25")
}

pub(crate) fn server() -> Option<pg::Shared> {
    match pg::shared() {
        Ok(s) => Some(s),
        Err(what) => {
            benchlab_testkit::missing(what);
            None
        }
    }
}

/// `benchlab --db DB ARGS…` with a state directory of the scratch's own
/// (the lab tests give each worker one: its run lock and journals).
pub(crate) fn benchlab(s: &Scratch, db: &str, state: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_benchlab"));
    c.arg("--db").arg(db);
    c.env("BENCHLAB_STATE_DIR", s.path(state));
    c.env_remove("BENCHLAB_DB");
    c
}

pub(crate) fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed with {}:\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `benchlab --db DB report RUN --json FILE`, read back as bytes.
fn report_json(s: &Scratch, db: &str, run: &str, file: &str) -> String {
    let path = s.path(file);
    ok(
        benchlab(s, db, "state")
            .args(["report", run, "--json"])
            .arg(&path)
            .output()
            .unwrap(),
        "report",
    );
    std::fs::read_to_string(path).unwrap()
}

fn copy(s: &Scratch, from: &str, to: &str, runs: &[&str]) -> String {
    ok(
        benchlab(s, from, "state")
            .args(["copy", "--from", from, "--to", to])
            .args(runs)
            .output()
            .unwrap(),
        "copy",
    )
}

#[test]
fn copy_round_trips_a_run_exactly() {
    let Some(pg) = server() else { return };
    let s = Scratch::new();
    let sqlite = s.db().display().to_string();
    let study = s.study("pg.toml", STUDY);
    let out = benchlab(&s, &sqlite, "state")
        .arg("run")
        .arg(&study)
        .output()
        .unwrap();
    // The broken workload fails its points: exit 3, the run is stored.
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let original = report_json(&s, &sqlite, "1", "original.json");
    let parsed: serde_json::Value = serde_json::from_str(&original).unwrap();
    assert_eq!(parsed["run"]["id"], 1);
    assert!(
        original.contains("\"reason\""),
        "the failed points are in the report"
    );

    // SQLite → PostgreSQL.
    let url = pg.create_database("copy_round_trip");
    let said = copy(&s, &sqlite, &url, &[]);
    assert!(
        said.starts_with("run 1: copied to postgres:///copy_round_trip"),
        "{said}"
    );
    assert_eq!(report_json(&s, &url, "1", "pg.json"), original);
    // Again: nothing new.
    assert!(copy(&s, &sqlite, &url, &["1"]).contains("run 1: already in"));
    // PostgreSQL → a new SQLite file, and SQLite → SQLite.
    let back = s.path("back.db").display().to_string();
    copy(&s, &url, &back, &["1"]);
    assert_eq!(report_json(&s, &back, "1", "back.json"), original);
    let again = s.path("again.db").display().to_string();
    copy(&s, &back, &again, &[]);
    assert_eq!(report_json(&s, &again, "1", "again.json"), original);
    assert!(
        pg.psql("copy_round_trip", "SELECT count(*) FROM run")
            .trim()
            == "1"
    );
}

#[test]
fn two_controllers_run_studies_into_one_postgres_database_at_once() {
    benchlab_testkit::require!(root, "unshare", "hostname");
    let Some(pg) = server() else { return };
    let s = Scratch::new();
    let url = pg.create_database("two_controllers");
    let studies = [
        s.study("a.toml", &slow_study("controller-a")),
        s.study("b.toml", &slow_study("controller-b")),
    ];
    // Each controller is a machine of its own: its own restore journal
    // and its own host name (a UTS namespace), so that each has a host
    // `local` of its own (a host is in one run at a time across a lab)
    // and their runs overlap; both write the same database.
    let children: Vec<_> = studies
        .iter()
        .enumerate()
        .map(|(i, study)| {
            let mut c = Command::new("unshare");
            c.args(["--uts", "sh", "-c", r#"hostname "$0" && exec "$@""#])
                .arg(format!("controller-{i}"))
                .arg(env!("CARGO_BIN_EXE_benchlab"))
                .args(["--db", &url, "run"])
                .arg(study)
                .env("BENCHLAB_STATE_DIR", s.path(&format!("state-{i}")))
                .env_remove("BENCHLAB_DB");
            c.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let list = ok(
        benchlab(&s, &url, "state").arg("list").output().unwrap(),
        "list",
    );
    assert_eq!(list.lines().count(), 2, "{list}");
    let mut spans = Vec::new();
    for run in ["1", "2"] {
        let json: serde_json::Value =
            serde_json::from_str(&report_json(&s, &url, run, &format!("r{run}.json"))).unwrap();
        assert_eq!(json["run"]["status"], "completed", "{list}");
        spans.push((
            json["run"]["started_at"].as_str().unwrap().to_string(),
            json["run"]["ended_at"].as_str().unwrap().to_string(),
        ));
        // Every repetition arrived: 2 configurations × (2 sizes + 1
        // broken point) × 2 repetitions.
        let count = pg.psql(
            "two_controllers",
            &format!("SELECT count(*) FROM sample s JOIN point p ON p.id = s.point_id WHERE p.run_id = {run}"),
        );
        assert_eq!(count.trim(), "12", "run {run}");
    }
    let names = pg.psql(
        "two_controllers",
        "SELECT study_name FROM run ORDER BY study_name",
    );
    assert_eq!(names, "controller-a\ncontroller-b\n");
    // RFC 3339 in UTC sorts as text: the two runs overlapped in time, so
    // the database really had two writers at once.
    let (a, b) = (&spans[0], &spans[1]);
    assert!(
        a.0 < b.1 && b.0 < a.1,
        "the runs did not overlap: {spans:?}"
    );
}

#[test]
fn a_password_in_the_url_is_never_printed_or_stored() {
    let Some(pg) = server() else { return };
    let s = Scratch::new();
    pg.create_database("secrets");
    let secret = pg::password();
    let url = pg.password_url("secrets");
    let study = s.study("pg.toml", STUDY);
    let run = benchlab(&s, &url, "state")
        .arg("run")
        .arg(&study)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(3));
    let list = benchlab(&s, &url, "state").arg("list").output().unwrap();
    let help = Command::new(env!("CARGO_BIN_EXE_benchlab"))
        .arg("--help")
        .env("BENCHLAB_DB", &url)
        .output()
        .unwrap();
    let wrong = benchlab(&s, &url.replace(&secret, "not-the-password"), "state")
        .arg("list")
        .output()
        .unwrap();
    assert!(!wrong.status.success());
    let wrong_err = String::from_utf8_lossy(&wrong.stderr).to_string();
    assert!(
        wrong_err.contains("password authentication failed"),
        "{wrong_err}"
    );
    assert!(
        wrong_err.contains(&format!("{}:***@", pg::PASSWORD_USER)),
        "{wrong_err}"
    );
    for out in [&run, &list, &help, &wrong] {
        for text in [&out.stdout, &out.stderr] {
            let text = String::from_utf8_lossy(text);
            assert!(!text.contains(&secret), "{text}");
            assert!(!text.contains("not-the-password"), "{text}");
        }
    }
    assert!(String::from_utf8_lossy(&run.stderr).contains(":***@"));
    let dump = pg.dump("secrets");
    assert!(dump.contains("pg-store"), "the run is in the database");
    assert!(!dump.contains(&secret));
    // The files a run leaves on this machine: the state directory.
    assert_no_secret_under(&s.path("state"), &secret);
}

fn assert_no_secret_under(dir: &Path, secret: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            assert_no_secret_under(&p, secret);
        } else if let Ok(bytes) = std::fs::read(&p) {
            assert!(
                !String::from_utf8_lossy(&bytes).contains(secret),
                "{}",
                p.display()
            );
        }
    }
}

#[test]
fn an_unreachable_postgres_stops_a_run_before_it_starts() {
    let s = Scratch::new();
    let url = format!(
        "postgres://lab:hidden@/bench?host={}",
        s.path("no-server").display()
    );
    let study = s.study("pg.toml", STUDY);
    let out = benchlab(&s, &url, "state")
        .arg("run")
        .arg(&study)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot open the store postgres://lab:***@/bench?host=")
            && err.contains("cannot connect to"),
        "{err}"
    );
    assert!(!err.contains("hidden"), "{err}");
    assert!(out.stdout.is_empty(), "nothing ran");
    // Bad input to copy: a --from that does not exist is not created.
    let out = benchlab(&s, "x.db", "state")
        .args(["copy", "--from"])
        .arg(s.path("missing.db"))
        .args(["--to"])
        .arg(s.path("to.db"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.db: no such store"));
    assert!(!s.path("missing.db").exists() && !s.path("to.db").exists());
}

/// In a shared store a running run may belong to another controller: its
/// process id means nothing here, and resuming it would measure twice.
#[test]
fn a_run_of_another_controller_is_not_resumed_here() {
    let s = Scratch::new();
    let db = s.db().display().to_string();
    let study = s.study("pg.toml", STUDY);
    let out = benchlab(&s, &db, "state")
        .arg("run")
        .arg(&study)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    rusqlite::Connection::open(s.db())
        .unwrap()
        .execute(
            "UPDATE run SET status = 'running', controller_host = 'lab-controller-7', controller_pid = 1",
            [],
        )
        .unwrap();
    let out = benchlab(&s, &db, "state")
        .args(["run", "--resume", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("run 1 is running on the controller lab-controller-7"),
        "{err}"
    );
}
