//! benchlab's test helpers, the one home for them: the integration tests
//! (`tests/it`, one binary) and the crates' own tests use them.
//!
//! - [`Scratch`]: a scratch directory and store, and the benchlab binary
//!   run on them; [`assert_success`], [`repo`].
//! - [`lock`]: which tests may run beside which ([`exclusive`] for a named
//!   machine-wide resource, [`alone`] for a test nothing may run beside).
//! - [`Bed`]: a test bed of network namespaces; [`left`]: "nothing left"
//!   checks by the test's own marker.
//! - [`browser`]: a real chromium and `benchlab serve`; [`schema`]: the
//!   report schema's checker; [`pg`]: a real PostgreSQL server.
//!
//! And a test that cannot run here never counts as a pass:
//!
//! cargo's harness knows only pass and fail (and `#[ignore]`, decided at
//! compile time), so a test that finds no `sshd` and returns early shows
//! as passed. Two helpers make the reason visible instead:
//!
//! - [`missing`]: something the set-up (`scripts/setup.sh`) provides is
//!   absent — a program, root. Under CI (`CI=true`) the test fails naming
//!   it, since there the set-up has run and the absence is a fault;
//!   elsewhere the test is recorded as skipped.
//! - [`unsupported`]: a property of this machine no set-up can change — a
//!   kernel without netem, no IRQ that accepts a new affinity. Elsewhere
//!   the test is recorded as skipped; under CI it fails too, since CI's
//!   machine is the one the suite is made for and a skipped test there
//!   tested nothing.
//!
//! A skipped test prints `SKIP <test>: <why>` on standard error and
//! appends the same line to the skip file, which `scripts/test.sh` empties
//! before the tests and summarises after them (`N skipped: …`). The skip
//! file is `$BENCHLAB_SKIP_FILE`, or `benchlab-skips.txt` in the cargo
//! target directory the test binary runs from.
//!
//! ```no_run
//! #[test]
//! fn a_server_reached_over_ssh() {
//!     let Some(sshd) = benchlab_testkit::find_program("sshd") else {
//!         return benchlab_testkit::missing("sshd (openssh-server)");
//!     };
//!     // …
//! #   let _ = sshd;
//! }
//! ```

#![warn(missing_docs)]

use std::fmt::Display;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

pub mod bed;
pub mod browser;
pub mod left;
pub mod lock;
pub mod pg;
pub mod schema;
mod scratch;

pub use bed::Bed;
pub use lock::{alone, exclusive, Resource};
pub use scratch::{
    assert_success, benchlab_bin, listening_agent, output_ok, repo, said, ListeningAgent, Scratch,
};

/// The variable naming the skip file; `scripts/test.sh` sets it.
pub const SKIP_FILE_VAR: &str = "BENCHLAB_SKIP_FILE";
/// The skip file's name in the target directory when the variable is unset.
pub const SKIP_FILE_NAME: &str = "benchlab-skips.txt";

/// True when running under CI (`CI=true`, as `.ci/run` sets it).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The calling test cannot run because `what`, which the set-up provides,
/// is absent. Under CI this panics naming it; elsewhere it records the
/// test as skipped. Call it as `return missing("…")`.
pub fn missing(what: impl Display) {
    missing_in(
        under_ci(),
        skip_file().as_deref(),
        &test_name(),
        &what.to_string(),
    );
}

/// The calling test cannot run because this machine lacks `why`, which no
/// set-up can provide (a kernel feature, a kind of hardware). Records the
/// test as skipped; under CI it fails instead: CI's machine is the one the
/// suite is made for, and a skipped test there tested nothing. Call it as
/// `return unsupported("…")`.
pub fn unsupported(why: impl Display) {
    let (test, why) = (test_name(), why.to_string());
    if under_ci() {
        panic!("{test} cannot run here: {why} (CI=true, so this is a failure)");
    }
    record_skip(skip_file().as_deref(), &test, &why);
}

fn missing_in(ci: bool, file: Option<&Path>, test: &str, what: &str) {
    if ci {
        panic!(
            "{test} cannot run: missing {what} (CI=true, so this is a failure: scripts/setup.sh should have provided it)"
        );
    }
    record_skip(file, test, &format!("missing {what}"));
}

/// True when the process runs as root (the tests that make namespaces,
/// mounts and cgroups need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Where `program` is installed: the first match on `PATH`, then in
/// `/usr/sbin` and `/sbin` (daemons and mkfs tools live there and are not
/// on every user's `PATH`).
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Returns from the calling test through [`missing`] when root or one of
/// the programs is absent: `require!(root, "ip", "tc")`, or
/// `require!("mkfs.xfs")` for programs only.
#[macro_export]
macro_rules! require {
    (root $(, $program:expr)* $(,)?) => {
        if !$crate::is_root() {
            return $crate::missing("root");
        }
        $crate::require!($($program),*);
    };
    ($($program:expr),* $(,)?) => {
        $(
            if $crate::find_program($program).is_none() {
                return $crate::missing(format!("the program `{}`", $program));
            }
        )*
    };
}

/// The test's name as the harness runs it: `binary::path::to::test`.
/// libtest names each test's thread after the test; the binary's name
/// (cargo's `name-hash`) tells which crate or file it is in.
fn test_name() -> String {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("<unnamed test>");
    let binary = std::env::args()
        .next()
        .map(PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .map(|n| match n.rsplit_once('-') {
            Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
            _ => n,
        })
        .unwrap_or_default();
    if binary.is_empty() {
        test.to_string()
    } else {
        format!("{binary}::{test}")
    }
}

/// The skip file: `$BENCHLAB_SKIP_FILE`, else `benchlab-skips.txt` in the
/// target directory (`target/debug/deps/<test binary>` → `target`).
pub fn skip_file() -> Option<PathBuf> {
    skip_file_for(
        std::env::var_os(SKIP_FILE_VAR).map(PathBuf::from),
        &std::env::current_exe().ok()?,
    )
}

fn skip_file_for(var: Option<PathBuf>, exe: &Path) -> Option<PathBuf> {
    if var.is_some() {
        return var;
    }
    let dir = exe.parent()?;
    // Tests run from target/<profile>/deps, doc tests elsewhere.
    let target = if dir.file_name()? == "deps" {
        dir.parent()?.parent()?
    } else {
        dir.parent()?
    };
    Some(target.join(SKIP_FILE_NAME))
}

fn record_skip(file: Option<&Path>, test: &str, why: &str) {
    // One line, one write: appends from parallel tests do not interleave.
    let line = format!("SKIP {test}: {}\n", why.replace('\n', " "));
    eprint!("{line}");
    let Some(file) = file else { return };
    let written = OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        // The skip must not vanish: without its record it would count as
        // a pass.
        panic!(
            "{test} is skipped ({why}) but the skip file {} cannot be written: {e}",
            file.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_name_has_the_binary_and_the_test() {
        let name = test_name();
        assert!(
            name.ends_with("tests::the_test_name_has_the_binary_and_the_test"),
            "{name}"
        );
        assert!(name.starts_with("benchlab_testkit::"), "{name}");
    }

    #[test]
    fn programs_are_found_on_path_and_in_sbin() {
        assert!(find_program("sh").is_some());
        assert!(find_program("no-such-program-benchlab").is_none());
    }

    #[test]
    fn the_skip_file_is_the_variable_or_in_the_target_directory() {
        let exe = Path::new("/w/target/debug/deps/hosts-0123abcd");
        assert_eq!(
            skip_file_for(None, exe).unwrap(),
            Path::new("/w/target/benchlab-skips.txt")
        );
        assert_eq!(
            skip_file_for(Some("/tmp/s".into()), exe).unwrap(),
            Path::new("/tmp/s")
        );
    }

    #[test]
    fn a_skip_outside_ci_is_one_line_in_the_skip_file() {
        let dir = std::env::temp_dir().join(format!("benchlab-testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("skips");
        missing_in(false, Some(&file), "hosts::ssh", "sshd\n(openssh-server)");
        record_skip(Some(&file), "hosts::netem", "no netem");
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            text,
            "SKIP hosts::ssh: missing sshd (openssh-server)\nSKIP hosts::netem: no netem\n"
        );
    }

    #[test]
    #[should_panic(expected = "hosts::ssh cannot run: missing sshd (CI=true")]
    fn a_missing_need_under_ci_fails_naming_it() {
        missing_in(true, None, "hosts::ssh", "sshd");
    }

    #[test]
    #[should_panic(expected = "cannot be written")]
    fn a_skip_that_cannot_be_recorded_fails() {
        record_skip(Some(Path::new("/proc/no/such/dir/skips")), "t", "why");
    }
}
