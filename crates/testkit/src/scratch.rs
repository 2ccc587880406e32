//! Helpers for binary-level tests: a temp dir per test, the benchlab
//! binary, study files written on the fly.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch directory that is removed at the end of the test.
pub struct Scratch {
    /// The directory, removed when the scratch is dropped.
    pub dir: tempfile::TempDir,
    // A test that runs benchlab shares the suite with the others: the
    // suite's `alone` tests wait for it (see `crate::lock`).
    _suite: crate::lock::Shared,
}

impl Default for Scratch {
    fn default() -> Scratch {
        Scratch::new()
    }
}

impl Scratch {
    /// A fresh scratch directory; holds the suite's shared side while it
    /// lives.
    pub fn new() -> Scratch {
        Scratch {
            _suite: crate::lock::shared(),
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// `name` inside the scratch directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The scratch store.
    pub fn db(&self) -> PathBuf {
        self.path("benchlab.db")
    }

    /// Writes a study file and returns its path.
    pub fn study(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).expect("write study");
        p
    }

    /// `benchlab --db <scratch db> ARGS…`
    pub fn benchlab(&self) -> Command {
        let mut c = Command::new(benchlab_bin());
        c.arg("--db").arg(self.db());
        // Each test keeps its restore journal to itself: a journal another
        // test (or another benchlab on this machine) has open would
        // otherwise stop this run's preflight.
        c.env("BENCHLAB_STATE_DIR", self.path("state"));
        c
    }

    /// `benchlab --db <scratch db> ARGS…`, its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.benchlab().args(args).output().expect("run benchlab")
    }

    /// `benchlab --db <scratch db> ARGS…`, asserted to succeed: its
    /// standard output.
    pub fn run_ok(&self, args: &[&str]) -> String {
        String::from_utf8(output_ok(self.benchlab().args(args)).stdout).expect("utf-8 output")
    }

    /// `benchlab run [EXTRA…] STUDY`, its services' scratch files under
    /// the scratch directory (TMPDIR), asserted to succeed.
    pub fn run_study(&self, study: &Path, extra: &[&str]) -> Output {
        output_ok(self.benchlab_tmp().arg("run").args(extra).arg(study))
    }

    /// The directory the runs of [`run_study`](Self::run_study) and
    /// [`benchlab_tmp`](Self::benchlab_tmp) keep their scratch files in
    /// (their TMPDIR), made on first use.
    pub fn tmp(&self) -> PathBuf {
        let tmp = self.path("tmp");
        std::fs::create_dir_all(&tmp).expect("scratch tmp");
        tmp
    }

    /// [`benchlab`](Self::benchlab) with TMPDIR the scratch's
    /// [`tmp`](Self::tmp): what the run leaves is seen there.
    pub fn benchlab_tmp(&self) -> Command {
        let mut c = self.benchlab();
        c.env("TMPDIR", self.tmp());
        c
    }

    /// Nothing of this scratch's runs is left, within `secs`: no process
    /// `procs` finds, nothing in [`tmp`](Self::tmp), no restore journal.
    pub fn assert_nothing_left<T: std::fmt::Debug>(&self, secs: u64, procs: impl Fn() -> Vec<T>) {
        crate::left::wait_gone(secs, &self.path("tmp"), procs);
        crate::left::assert_no_journal(&self.path("state"));
    }

    /// A client-side counter (`counters.NAME` of each client's result in
    /// the store), summed over every sample of the store.
    pub fn client_counter(&self, name: &str) -> u64 {
        let db = rusqlite::Connection::open(self.db()).expect("open the scratch store");
        let mut st = db
            .prepare("SELECT result_json FROM side_result WHERE side = 'client'")
            .expect("the side results");
        let rows = st
            .query_map([], |r| r.get::<_, String>(0))
            .expect("the side results")
            .map(|r| r.expect("a side result"));
        rows.map(|j| {
            let v: serde_json::Value = serde_json::from_str(&j).expect("a result's JSON");
            v["counters"][name].as_u64().unwrap_or(0)
        })
        .sum()
    }

    /// `benchlab report RUN --md r.md --html r.html` in the scratch: the
    /// Markdown and the HTML.
    pub fn report_md_html(&self, run: &str) -> (String, String) {
        let md = self.path("r.md");
        let html = self.path("r.html");
        self.run_ok(&[
            "report",
            run,
            "--md",
            md.to_str().expect("a UTF-8 path"),
            "--html",
            html.to_str().expect("a UTF-8 path"),
        ]);
        (
            std::fs::read_to_string(md).expect("the Markdown report"),
            std::fs::read_to_string(html).expect("the HTML report"),
        )
    }

    /// `benchlab show RUN --format json`, parsed.
    pub fn json(&self, run: &str) -> serde_json::Value {
        serde_json::from_str(&self.run_ok(&["show", run, "--format", "json"])).expect("json output")
    }
}

/// Asserts a command succeeded, showing its output when it did not.
pub fn assert_success(out: &Output) {
    assert!(out.status.success(), "{}", said(out));
}

/// Runs `cmd` to its end and asserts it succeeded, showing the command,
/// its status and both outputs when it did not: its output.
pub fn output_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", said(&out));
    out
}

/// A finished command's status and both outputs, for a failure message.
pub fn said(out: &Output) -> String {
    format!(
        "failed with {}:\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The repository root (for shipped studies and fixtures).
pub fn repo() -> &'static Path {
    // This crate is crates/testkit.
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The benchlab binary the tests run: `$CARGO_BIN_EXE_benchlab` when
/// cargo sets it at run time, else the one cargo built next to the test
/// binary (`target/<profile>/deps/it-…` → `target/<profile>/benchlab`);
/// cargo builds it before any integration test of the root package.
pub fn benchlab_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CARGO_BIN_EXE_benchlab") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut dir = exe.parent().expect("the test binary's directory");
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir = dir.parent().expect("the profile directory");
    }
    let bin = dir.join("benchlab");
    assert!(
        bin.is_file(),
        "no benchlab binary at {} (run the tests with `cargo test`, which builds it)",
        bin.display()
    );
    bin
}

/// A `benchlab agent --listen 127.0.0.1:0` this test started, with the
/// address it said it listens on.
pub struct ListeningAgent {
    /// The agent's process (kill it when done).
    pub child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Its standard error after the listening line: it logs sessions,
    /// refusals and handshake failures there.
    pub stderr: std::process::ChildStderr,
}

/// Starts an agent that listens on a loopback port with `key_file`, in
/// `state_dir` (`BENCHLAB_STATE_DIR`) when given, and waits for the line
/// that names its port.
pub fn listening_agent(key_file: &Path, state_dir: Option<&Path>) -> ListeningAgent {
    use std::io::Read;
    let mut cmd = std::process::Command::new(benchlab_bin());
    cmd.args(["agent", "--listen", "127.0.0.1:0", "--key-file"])
        .arg(key_file)
        .stderr(std::process::Stdio::piped());
    if let Some(dir) = state_dir {
        cmd.env("BENCHLAB_STATE_DIR", dir);
    }
    let mut child = cmd.spawn().expect("start benchlab agent --listen");
    let mut stderr = child.stderr.take().expect("the agent's standard error");
    // Byte by byte: what follows the first line stays for the caller.
    let (mut line, mut b) = (Vec::new(), [0u8; 1]);
    while stderr.read(&mut b).unwrap_or(0) == 1 && b[0] != b'\n' {
        line.push(b[0]);
    }
    let line = String::from_utf8_lossy(&line).into_owned();
    let addr = line
        .strip_prefix("benchlab agent listening on ")
        .unwrap_or_else(|| panic!("the agent said `{line}`"))
        .to_string();
    ListeningAgent {
        child,
        addr,
        stderr,
    }
}
