//! "Nothing left" checks: what a test's runs may leave behind, counted
//! by the test's own marker (its scratch directory in a process's command
//! line or environment), never machine-wide, so that a test running
//! beside it cannot move the count.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A live process: its id and command line (arguments joined by spaces).
pub type Proc = (i32, String);

/// Every live process (but this one) for which `keep` holds, given its
/// command line and its environment (`NAME=value` entries, NUL-separated).
pub fn processes(keep: impl Fn(&str, &[u8]) -> bool) -> Vec<Proc> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if keep(&cmd, &env) {
            out.push((pid, cmd));
        }
    }
    out
}

/// Ids of the processes whose command line names `program` and `dir`
/// (a managed server started from a test's scratch).
pub fn program_under(program: &str, dir: &Path) -> Vec<i32> {
    let needle = dir.display().to_string();
    processes(|cmd, _| cmd.contains(program) && cmd.contains(&needle))
        .into_iter()
        .map(|(pid, _)| pid)
        .collect()
}

/// A process's parent, from /proc/PID/status.
pub fn parent(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|pp| pp.trim().parse().ok())
}

/// The main process of a group (a server's master): the one whose
/// parent is not in the group.
pub fn main_of(pids: &[i32]) -> Option<i32> {
    pids.iter()
        .copied()
        .find(|&p| parent(p).is_some_and(|pp| !pids.contains(&pp)))
}

/// Spawns `run` (a `benchlab run` whose servers start under `dir`) with
/// its output piped, and returns it with the pid of the main process of
/// `program` once that is up (within 60 s, else the run is killed and
/// its error output shown).
// The caller waits for the child it gets back.
#[allow(clippy::zombie_processes)]
pub fn start_and_find(mut run: Command, program: &str, dir: &Path) -> (Child, i32) {
    let mut child = run
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn benchlab run");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(m) = main_of(&program_under(program, dir)) {
            return (child, m);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait for benchlab run");
            panic!(
                "{program} never started: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Processes naming `dir` in their command line or environment.
pub fn naming(dir: &Path) -> Vec<Proc> {
    let needle = dir.display().to_string();
    processes(|cmd, env| cmd.contains(&needle) || String::from_utf8_lossy(env).contains(&needle))
}

/// Waits `after` (into a point's measured interval), SIGKILLs `pid` (a
/// server of the run `child`), and waits for the run, which must end
/// with exit status 3: some repetitions failed, the run went on.
pub fn kill_mid_run(child: Child, pid: i32, after: Duration) -> std::process::Output {
    std::thread::sleep(after);
    // SAFETY: a plain kill(2) of a process the test found.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let out = child.wait_with_output().expect("wait for benchlab run");
    assert_eq!(
        out.status.code(),
        Some(3),
        "some repetitions failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The entries of `dir` (none when it does not exist).
pub fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Waits up to `secs` until `procs` finds no process and `dir` is empty
/// (a killed server's helpers exit, and its scratch goes, a moment after
/// the run); panics naming what is left.
pub fn wait_gone<T: std::fmt::Debug>(secs: u64, dir: &Path, procs: impl Fn() -> Vec<T>) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let ours = procs();
        let files = entries(dir);
        if ours.is_empty() && files.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "left behind: processes {ours:?}, files {files:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Asserts no restore journal is pending in the state directory `state`:
/// no `*.jsonl` in its `journal` directory (benchlab_env::journal's
/// files; the directory may hold others, as its lock).
pub fn assert_no_journal(state: &Path) {
    let pending: Vec<PathBuf> = entries(&state.join("journal"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert!(pending.is_empty(), "journals left: {pending:?}");
}
