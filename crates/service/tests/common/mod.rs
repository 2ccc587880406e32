//! Helpers of the service tests: private scratch and journal directories,
//! plans, a tiny HTTP client, and the "nothing left behind" check.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use benchlab_service::{ServicePlan, ServiceSpec, StartOptions};

/// A test's own directories: the scratch base (readable by the servers'
/// www-data workers) and the journal directory.
pub struct Dirs {
    pub base: tempfile::TempDir,
    pub journal: tempfile::TempDir,
}

impl Dirs {
    pub fn new() -> Dirs {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Dirs {
            base,
            journal: tempfile::tempdir().unwrap(),
        }
    }

    pub fn opts(&self) -> StartOptions {
        StartOptions {
            scratch_base: self.base.path().to_path_buf(),
            journal_dir: self.journal.path().to_path_buf(),
            secrets: Default::default(),
        }
    }

    /// What is in the scratch base (names).
    pub fn scratch_entries(&self) -> Vec<String> {
        entries(self.base.path())
    }

    /// The journal files left.
    pub fn journals(&self) -> Vec<String> {
        entries(self.journal.path())
    }

    /// Nothing of a service is left: no live process in its group, no
    /// process working in the scratch base, no scratch directory, no
    /// journal.
    pub fn assert_nothing_left(&self, pgid: Option<i32>) {
        if let Some(g) = pgid {
            let live = benchlab_service::procfs::live_members(g);
            assert!(live.is_empty(), "process group {g} still has {live:?}");
        }
        let users = processes_under(self.base.path());
        assert!(
            users.is_empty(),
            "processes still work under the scratch base: {users:?}"
        );
        assert_eq!(self.scratch_entries(), Vec::<String>::new(), "scratch left");
        assert_eq!(self.journals(), Vec::<String>::new(), "journal left");
    }
}

pub fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Live processes whose working directory is under `dir` (a service's
/// processes work in its scratch directory).
pub fn processes_under(dir: &Path) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for pid in benchlab_env::sys::all_pids() {
        let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) else {
            continue;
        };
        if !cwd.starts_with(dir) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 2..].split_whitespace().next())
            .unwrap_or("?");
        if state == "Z" || state == "X" {
            continue;
        }
        let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .replace('\0', " ");
        out.push((pid, cmd));
    }
    out
}

/// A spec from TOML.
pub fn spec(toml_text: &str) -> ServiceSpec {
    toml::from_str(toml_text).unwrap()
}

/// A plan from TOML; relative paths from `dir`.
pub fn plan_in(toml_text: &str, dir: &Path) -> ServicePlan {
    spec(toml_text).plan(dir).unwrap()
}

/// A plan from TOML.
pub fn plan(toml_text: &str) -> ServicePlan {
    plan_in(toml_text, Path::new("/"))
}

/// One HTTP/1.0 GET: (status, body).
pub fn get(addr: SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header end");
    let head = String::from_utf8_lossy(&all[..end]).to_string();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, all[end + 4..].to_vec())
}

/// `Cpus_allowed_list` of a process.
pub fn cpus_allowed(pid: i32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

/// Lines of a file.
pub fn line_count(p: &Path) -> usize {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .count()
}

/// Writes a file of `len` bytes into a directory.
pub fn put_file(dir: &Path, name: &str, len: usize) -> PathBuf {
    let p = dir.join(name);
    let body: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
    std::fs::write(&p, body).unwrap();
    p
}

/// Whether the test runs as root (servers drop to www-data only then).
pub fn require_root() {
    // SAFETY: geteuid has no side effects.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the service tests start real servers and run as root"
    );
}

/// Whether a program is installed, else a failure naming the package.
pub fn require(program: &str, package: &str) {
    assert!(
        ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
            .iter()
            .any(|d| Path::new(d).join(program).exists()),
        "{program} is missing: install the Debian package `{package}` (scripts/setup installs it)"
    );
}
