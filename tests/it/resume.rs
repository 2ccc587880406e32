//! Regression test for issue 2's resume rule: a study interrupted with
//! SIGINT and resumed yields the same set of repetitions as an
//! uninterrupted run, none twice, and the database stays sound.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use benchlab_testkit::Scratch;

const STUDY: &str = r#"
[study]
name = "resumable"
order = "interleaved"
[defaults]
repetitions = 2
quiesce_s = 0
[[configuration]]
name = "a"
[[configuration]]
name = "b"
[[workload]]
kind = "fake"
size = [1, 2, 3, 4]
sleep_s = 0.25
"#;

type Key = (i64, i64, i64, i64);

fn units(db: &std::path::Path, run: i64) -> Vec<Key> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn
        .prepare(
            "SELECT p.config_idx, p.workload_idx, p.point_idx, s.repetition FROM sample s
             JOIN point p ON p.id = s.point_id WHERE p.run_id = ?1 AND s.status = 'ok'",
        )
        .unwrap();
    let rows = st
        .query_map([run], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// Repetitions stored so far by a run being created (0 while its
/// database has no tables yet).
fn started_units(db: &std::path::Path) -> usize {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT count(*) FROM sample WHERE status = 'ok'", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n as usize)
    .unwrap_or(0)
}

fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // The parent pid is the 2nd field after the parenthesised command.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        if after.split(' ').nth(1).and_then(|x| x.parse::<u32>().ok()) == Some(pid) {
            out.push(p);
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
        .unwrap_or(false)
}

#[test]
fn interrupted_and_resumed_equals_uninterrupted() {
    // The reference: one uninterrupted run.
    let whole = Scratch::new();
    let study = whole.study("r.toml", STUDY);
    whole.run_ok(&["run", study.to_str().unwrap()]);
    let reference: BTreeSet<Key> = units(&whole.db(), 1).into_iter().collect();
    assert_eq!(reference.len(), 16);

    // The same study, interrupted after a few repetitions.
    let s = Scratch::new();
    let study = s.study("r.toml", STUDY);
    let mut child = s
        .benchlab()
        .args(["run", study.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut agents = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "the run never got going");
        std::thread::sleep(Duration::from_millis(50));
        // Preflight starts one host's agent and collects its inventory
        // before it starts the next, and the first repetition the
        // monitor's: every agent seen is checked gone below.
        for a in children(child.id()) {
            if !agents.contains(&a) {
                agents.push(a);
            }
        }
        // The file exists a moment before its tables do.
        if s.db().exists() && started_units(&s.db()) >= 3 {
            break;
        }
    }
    assert!(agents.len() >= 2, "a server and a client agent: {agents:?}");
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("--resume 1"), "{stderr}");
    for a in &agents {
        assert!(!alive(*a), "agent {a} outlived the interrupted run");
    }
    let partial = units(&s.db(), 1);
    assert!(
        partial.len() >= 3 && partial.len() < 16,
        "{}",
        partial.len()
    );
    assert_eq!(s.json("1")["run"]["status"], "interrupted");

    // Resume: only the missing repetitions run.
    let out = s.run(&["run", "--resume", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("({} already done)", partial.len())),
        "{err}"
    );
    let resumed = units(&s.db(), 1);
    let set: BTreeSet<Key> = resumed.iter().copied().collect();
    assert_eq!(resumed.len(), set.len(), "a repetition ran twice");
    assert_eq!(set, reference);
    for k in &partial {
        assert!(set.contains(k));
    }
    assert_eq!(s.json("1")["run"]["status"], "completed");

    // A completed run cannot be resumed.
    let again = s.run(&["run", "--resume", "1"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already complete"));

    let conn = rusqlite::Connection::open(s.db()).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}
