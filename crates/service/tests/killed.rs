//! A starter SIGKILLed at any moment of a start leaves nothing that the
//! restore path (`benchlab restore`: `benchlab_env::restore_all`) does not
//! remove: no nginx, no scratch directory, no journal.
//!
//! The starter is this test binary run again as a child process (the
//! ignored `starter_helper` below), killed at each step of the start
//! (`BENCHLAB_TEST_SERVICE_PAUSE` holds it there) and at a few moments
//! measured from the start's beginning.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use benchlab_env::journal::{self, Change};
use benchlab_service::{Service, StartOptions};
use common::*;

const BASE_VAR: &str = "BENCHLAB_TEST_STARTER_BASE";
const JOURNAL_VAR: &str = "BENCHLAB_TEST_STARTER_JOURNAL";

#[test]
#[ignore = "helper: run as a child process by the tests of this file"]
fn starter_helper() {
    let (Ok(base), Ok(journal_dir)) = (std::env::var(BASE_VAR), std::env::var(JOURNAL_VAR)) else {
        eprintln!("starter_helper only runs as the child of a test of tests/killed.rs");
        return;
    };
    let opts = StartOptions {
        scratch_base: base.into(),
        journal_dir: journal_dir.into(),
        secrets: Default::default(),
    };
    eprintln!("benchlab-service: starting");
    let _svc = Service::start(&plan("name='web'\nkind='nginx'"), &opts).unwrap();
    eprintln!("benchlab-service: paused at ready");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Runs the helper; returns it once it said `line`.
fn starter(d: &Dirs, pause: Option<&str>, line: &str) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "starter_helper",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(BASE_VAR, d.base.path())
    .env(JOURNAL_VAR, d.journal.path())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    match pause {
        Some(step) => cmd.env("BENCHLAB_TEST_SERVICE_PAUSE", step),
        None => cmd.env_remove("BENCHLAB_TEST_SERVICE_PAUSE"),
    };
    let mut child = cmd.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut l = String::new();
        if err.read_line(&mut l).unwrap() == 0 {
            let _ = child.kill();
            panic!("the starter ended before saying `{line}`: {said}");
        }
        said.push_str(&l);
        if l.trim() == line {
            break;
        }
    }
    // Keep draining its standard error so that it never blocks on it.
    std::thread::spawn(move || {
        let mut sink = String::new();
        while err.read_line(&mut sink).unwrap_or(0) > 0 {
            sink.clear();
        }
    });
    child
}

/// The process groups journaled so far.
fn journaled_groups(d: &Dirs) -> Vec<i32> {
    let mut out = Vec::new();
    // The starter's forked child may hold the journal's lock a moment
    // after the starter died.
    journal::settle(d.journal.path(), journal::DYING_GRACE);
    for f in journal::pending(d.journal.path()) {
        for e in journal::read(&f).unwrap() {
            if let Change::ProcessGroup { pgid, .. } = e.change {
                out.push(pgid);
            }
        }
    }
    out
}

/// Kills the starter, runs the restore path, checks that nothing is left.
/// `running`: how many processes of the server ran at least before the
/// restore (at `released` nginx has exec'd but may not have forked its
/// workers yet).
fn kill_and_restore(d: &Dirs, mut child: Child, running: usize) {
    child.kill().unwrap();
    child.wait().unwrap();
    let groups = journaled_groups(d);
    if running > 0 {
        assert_eq!(groups.len(), 1, "{groups:?}");
        let live = benchlab_service::procfs::live_members(groups[0]);
        assert!(live.len() >= running, "nginx was not running: {live:?}");
    }
    let changes = benchlab_env::restore_all(d.journal.path()).unwrap();
    for c in &changes {
        assert_eq!(c.status, benchlab_env::ChangeStatus::Reverted, "{c:?}");
    }
    // A starter killed before it journaled the server's group leaves a
    // child waiting at the gate, which sees the gate close and exits by
    // itself: give it a moment.
    let until = Instant::now() + Duration::from_secs(5);
    while !processes_under(d.base.path()).is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    for g in &groups {
        d.assert_nothing_left(Some(*g));
    }
    d.assert_nothing_left(None);
}

#[test]
fn a_starter_killed_at_each_step_leaves_nothing_after_restore() {
    require_root();
    require("nginx", "nginx");
    for step in [
        "journal",
        "scratch",
        "forked",
        "journaled",
        "released",
        "ready",
    ] {
        let d = Dirs::new();
        let child = starter(
            &d,
            Some(step),
            &format!("benchlab-service: paused at {step}"),
        );
        if step != "journal" {
            assert_eq!(
                d.scratch_entries().len(),
                1,
                "{step}: no scratch directory yet"
            );
        }
        let running = match step {
            "released" => 1,
            "ready" => 2,
            _ => 0,
        };
        kill_and_restore(&d, child, running);
    }
}

#[test]
fn a_starter_killed_at_moments_of_its_start_leaves_nothing_after_restore() {
    require_root();
    require("nginx", "nginx");
    for delay_ms in [0, 1, 2, 4, 8, 16, 32] {
        let d = Dirs::new();
        let child = starter(&d, None, "benchlab-service: starting");
        std::thread::sleep(Duration::from_millis(delay_ms));
        kill_and_restore(&d, child, 0);
    }
}
