//! Issue 36's "Done when" items run through `benchlab run` as a user
//! would: a planted difference (the fake system with 3 % noise, 5 %
//! better under one configuration) is called *better* in each of three
//! runs seeded differently, its interval containing +5 %; and
//! `--until-decided` is refused, naming the store and the flag, on a run
//! with nothing left to decide and on a run still being run.

use std::time::{Duration, Instant};

use benchlab_testkit::Scratch;

/// The planted study: `plus5` scores 5 % more than `base`; both have the
/// same latency, which a wide margin lets the rule call equivalent in a
/// few rounds (the score's 2 % margin is what the test is about).
fn planted(seed: u64) -> String {
    format!(
        r#"
[study]
name = "planted-{seed}"
design = "until-decided"
margin = {{ default = "2%", latency_us = "10%" }}
max_repetitions = 40

[defaults]
quiesce_s = 0

[[configuration]]
name = "base"

[[configuration]]
name = "plus5"
set = {{ value = 105 }}

[[workload]]
name = "w"
kind = "fake"
noise = 0.03
step = 0
seed = {seed}
"#
    )
}

/// `benchlab run`'s failure: its standard error.
fn refused(s: &Scratch, args: &[&str]) -> String {
    let out = s.run(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?} must be refused:\n{err}"
    );
    err
}

#[test]
fn a_planted_five_percent_is_called_better_in_three_runs_of_three() {
    let s = Scratch::new();
    for (run, seed) in [(1, 31), (2, 32), (3, 33)] {
        let study = s.study(&format!("planted{seed}.toml"), &planted(seed));
        s.run_ok(&["run", study.to_str().unwrap()]);
        let j = s.json(&run.to_string());
        let decisions = j["decisions"].as_array().expect("the decisions");
        let score = decisions
            .iter()
            .find(|d| d["metric"] == "score")
            .unwrap_or_else(|| panic!("seed {seed}: no score verdict in {decisions:?}"));
        assert_eq!(score["configuration"], "plus5", "seed {seed}: {score}");
        assert_eq!(score["verdict"], "better", "seed {seed}: {score}");
        assert_eq!(score["margin_pct"], 2.0, "seed {seed}: {score}");
        let (lo, hi) = (
            score["ci_lo_pct"].as_f64().expect("a lower bound"),
            score["ci_hi_pct"].as_f64().expect("an upper bound"),
        );
        // Better: the whole interval beyond the margin, and the planted
        // +5 % inside it.
        assert!(2.0 < lo && lo <= 5.0 && 5.0 <= hi, "seed {seed}: {score}");
        let reps = score["repetitions"].as_u64().expect("repetitions");
        assert!((2..40).contains(&reps), "seed {seed}: {score}");
        let latency = decisions
            .iter()
            .find(|d| d["metric"] == "latency_us")
            .expect("the latency's verdict");
        assert_eq!(latency["verdict"], "equivalent", "seed {seed}: {latency}");
        assert_eq!(j["design"]["stop"], "all_decided", "seed {seed}: {j}");
    }

    // Every comparison of run 1 is decided: another round adds nothing.
    let err = refused(&s, &["run", "--resume", "1", "--until-decided"]);
    let db = s.db();
    for want in [
        db.to_str().unwrap(),
        "--until-decided",
        "run 1 has no undecided point: all 2 comparison(s) are decided",
    ] {
        assert!(err.contains(want), "{want:?} missing from:\n{err}");
    }
}

#[test]
fn until_decided_is_refused_on_a_run_still_running() {
    let s = Scratch::new();
    let study = s.study(
        "slow.toml",
        r#"
[study]
name = "slow"
[defaults]
repetitions = 40
quiesce_s = 0
[[configuration]]
name = "a"
[[configuration]]
name = "b"
[[workload]]
kind = "fake"
sleep_s = 0.2
noise = 0.03
"#,
    );
    let mut child = s
        .benchlab()
        .args(["run", study.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start benchlab run");
    let deadline = Instant::now() + Duration::from_secs(60);
    while samples(&s) < 2 {
        assert!(Instant::now() < deadline, "the run never got going");
        std::thread::sleep(Duration::from_millis(50));
    }
    let args = ["run", "--resume", "1", "--until-decided"];
    // On the run's own host, its restore journal says it is running.
    let here = refused(&s, &args);
    // Another controller's journal knows nothing of it: the store's
    // record of the run's process refuses it.
    let out = s
        .benchlab()
        .env("BENCHLAB_STATE_DIR", s.path("another-state"))
        .args(args)
        .output()
        .expect("run benchlab");
    let elsewhere = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{elsewhere}");
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(child.wait().expect("the run ends").code(), Some(130));
    let pid = child.id();
    for want in [
        &format!("a run is in progress on this host: process {pid}"),
        study.to_str().unwrap(),
    ] {
        assert!(here.contains(want), "{want:?} missing from:\n{here}");
    }
    for want in [
        s.db().to_str().unwrap(),
        "--until-decided",
        &format!("run 1 is still being run by process {pid}"),
    ] {
        assert!(
            elsewhere.contains(want),
            "{want:?} missing from:\n{elsewhere}"
        );
    }
}

/// Repetitions stored so far (0 while the store has no tables yet).
fn samples(s: &Scratch) -> i64 {
    let Ok(db) = rusqlite::Connection::open(s.db()) else {
        return 0;
    };
    db.query_row("SELECT count(*) FROM sample", [], |r| r.get(0))
        .unwrap_or(0)
}

/// A time budget is held against one round as the run's options make
/// it: refused at full length naming the file and the key, by `check` and
/// by `run` before anything runs; accepted for a quick trial at a scale
/// whose round fits in it.
#[test]
fn a_budget_is_held_against_the_round_at_the_runs_scale() {
    let s = Scratch::new();
    let study = s.study(
        "budget.toml",
        r#"[study]
name = "budget"
design = "until-decided"
max_duration = "5s"
[defaults]
quiesce_s = 1
[[configuration]]
name = "a"
[[configuration]]
name = "b"
[[workload]]
kind = "fake"
size = [1, 2]
sleep_s = 2
"#,
    );
    let path = study.to_str().unwrap();
    for args in [vec!["check", path], vec!["run", path]] {
        let err = refused(&s, &args);
        for want in [
            &format!("{path}:4:"),
            "key `study.max_duration`",
            "5s is less than one round",
        ] {
            assert!(
                err.contains(want),
                "{args:?}: {want:?} missing from:\n{err}"
            );
        }
    }
    assert_eq!(samples(&s), 0, "a refused run ran nothing");
    let out = s.run_ok(&["check", "--scale", "0.1", path]);
    assert!(out.contains("max_duration 5s"), "{out}");
}
