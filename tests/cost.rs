//! Issue 29: a measured loop that gains a system call fails CI.
//!
//! Runs `bench/cost --check` on the two workloads whose system calls per
//! operation are exact counts, not timings: `net.pingpong` (per round
//! trip, TCP and UDP) and `fs.matrix` (per record, each of the nine
//! patterns), against their limit programs (bench/limit), with this
//! build of benchlab. The counts do not depend on the machine's load, so
//! the test cannot flake on a busy machine; it only gets slower.

use std::path::Path;
use std::process::Command;

use benchlab_testkit::{find_program, missing};

#[test]
fn measured_loops_make_no_more_system_calls_than_their_limits() {
    for tool in ["strace", "gcc", "python3"] {
        if find_program(tool).is_none() {
            return missing(tool);
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().unwrap();
    let r = Command::new(root.join("bench/cost"))
        .args([
            "--check",
            "--figures",
            "syscalls",
            "--cases",
            "net.pingpong,fs.matrix",
        ])
        .env("BENCH_BENCHLAB", env!("CARGO_BIN_EXE_benchlab"))
        .env("BENCH_OUT", out.path())
        .env("BENCH_DIR", out.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        r.status.success(),
        "bench/cost --check failed:\n{stdout}\n{stderr}"
    );
    // Every case was measured, on both sides, and the limit's own counts
    // are what its loops make by construction: an independent reference.
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let row = |case: &str| {
        let words: Vec<&str> = case.split(' ').collect();
        rows.iter()
            .find(|r| r.len() > words.len() + 2 && r[..words.len()] == words[..])
            .unwrap_or_else(|| panic!("no row for {case}:\n{stdout}"))
            .clone()
    };
    for (case, limit) in [
        // send + recv on each end.
        ("net.pingpong tcp syscalls/op", "4.00"),
        ("net.pingpong udp syscalls/op", "4.00"),
        // One read() or write() per record, plus an lseek() where the
        // pattern moves.
        ("fs.matrix write syscalls/op", "1.00"),
        ("fs.matrix read syscalls/op", "1.00"),
        ("fs.matrix random-read syscalls/op", "2.00"),
        ("fs.matrix bkwd-read syscalls/op", "2.00"),
        ("fs.matrix record-rewrite syscalls/op", "2.00"),
        ("fs.matrix stride-read syscalls/op", "2.00"),
    ] {
        let r = row(case);
        let n = case.split(' ').count();
        assert_eq!(r[n + 1], limit, "{case}: the limit's count\n{stdout}");
    }
    assert!(stdout.contains("within budget"), "{stdout}");
}
