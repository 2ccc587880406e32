//! Helpers for binary-level tests: a temp dir per test, the benchlab
//! binary, study files written on the fly.

#![allow(dead_code)]

pub mod browser;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch directory that is removed at the end of the test.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

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
        let mut c = Command::new(env!("CARGO_BIN_EXE_benchlab"));
        c.arg("--db").arg(self.db());
        // Each test keeps its restore journal to itself: a journal another
        // test (or another benchlab on this machine) has open would
        // otherwise stop this run's preflight.
        c.env("BENCHLAB_STATE_DIR", self.path("state"));
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.benchlab().args(args).output().expect("run benchlab")
    }

    pub fn run_ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "benchlab {args:?} failed with {}:\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    /// `benchlab run [EXTRA…] STUDY`, its services' scratch files under
    /// the scratch directory (TMPDIR), asserted to succeed.
    pub fn run_study(&self, study: &Path, extra: &[&str]) -> Output {
        let tmp = self.path("tmp");
        std::fs::create_dir_all(&tmp).expect("scratch tmp");
        let out = self
            .benchlab()
            .env("TMPDIR", &tmp)
            .arg("run")
            .args(extra)
            .arg(study)
            .output()
            .expect("run benchlab");
        assert_success(&out);
        out
    }

    pub fn json(&self, run: &str) -> serde_json::Value {
        serde_json::from_str(&self.run_ok(&["show", run, "--format", "json"])).expect("json output")
    }
}

/// Asserts a command succeeded, showing its output when it did not.
pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "{}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The repository root (for shipped studies).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}
