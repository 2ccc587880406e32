//! `perf record` on this host: checked before a run, started beside a
//! repetition, stopped with it, and symbolized here by `perf script`, so
//! that what leaves the host is folded text that needs none of its
//! binaries.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::split::{split, SCRIPT_FIELDS};
use crate::{Plan, Recording, StacksError, Unwind};

/// The Debian package that has `perf`.
pub const PERF_PACKAGE: &str = "linux-perf";
/// How many bytes of user stack a DWARF sample copies: perf's default,
/// deep enough for benchlab's loops and a server's request path.
const DWARF_STACK_BYTES: u32 = 8192;
/// How long a stopped `perf record` may take to write its file.
const STOP_GRACE: Duration = Duration::from_secs(30);

fn err(msg: impl Into<String>) -> StacksError {
    StacksError(msg.into())
}

/// The installed perf's version line, or why there is none.
pub fn perf_version() -> Result<String, StacksError> {
    match Command::new("perf")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => Err(err(format!(
            "`perf --version` failed ({}): {}; install the Debian package `{PERF_PACKAGE}` for this kernel",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(err(format!(
            "`perf` is not installed on this host: install the Debian package `{PERF_PACKAGE}` (apt-get install {PERF_PACKAGE})"
        ))),
        Err(e) => Err(err(format!("cannot run `perf`: {e}"))),
    }
}

fn read_sysctl(name: &str) -> Option<i64> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Whether this host lets this process sample every CPU with its
/// kernel stacks at `hz`: perf installed, `kernel.perf_event_paranoid`
/// low enough for a non-root agent, the rate within
/// `kernel.perf_event_max_sample_rate`, and a one-off recording that
/// works. Returns perf's version.
pub fn check(hz: u32, unwind: Unwind) -> Result<String, StacksError> {
    let version = perf_version()?;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if let (false, Some(p)) = (root, read_sysctl("kernel.perf_event_paranoid")) {
        // 1 and above forbid CPU-wide events to unprivileged users, 2 and
        // above kernel stacks (Documentation/admin-guide/perf-security).
        if p > 0 {
            return Err(err(format!(
                "kernel.perf_event_paranoid is {p} on this host: a non-root agent may sample every CPU only at 0 or below (sysctl -w kernel.perf_event_paranoid=0), or run the agent as root"
            )));
        }
    }
    if let Some(max) = read_sysctl("kernel.perf_event_max_sample_rate") {
        if i64::from(hz) > max {
            return Err(err(format!(
                "{hz} Hz is above this host's kernel.perf_event_max_sample_rate ({max}): ask for at most {max} Hz, or raise the sysctl"
            )));
        }
    }
    let dir = scratch_dir()?;
    let out = dir.join("check.data");
    let r = Command::new("perf")
        .args(record_args(hz, unwind, &out))
        .args(["--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    match r {
        Ok(o) if o.status.success() => Ok(version),
        Ok(o) => Err(err(format!(
            "a trial `perf record -a` failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ))),
        Err(e) => Err(err(format!("cannot run `perf record`: {e}"))),
    }
}

/// A directory of this process's own for perf's file (created here, so
/// removing it removes nothing else).
fn scratch_dir() -> Result<PathBuf, StacksError> {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "benchlab-stacks-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir).map_err(|e| err(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

fn record_args(hz: u32, unwind: Unwind, out: &Path) -> Vec<String> {
    let mut a = vec![
        "record".to_string(),
        "-q".into(),
        "-a".into(),
        "-F".into(),
        hz.to_string(),
        "-e".into(),
        "cpu-clock".into(),
        "-o".into(),
        out.display().to_string(),
    ];
    match unwind {
        Unwind::Fp => a.push("-g".into()),
        Unwind::Dwarf => {
            a.push("--call-graph".into());
            a.push(format!("dwarf,{DWARF_STACK_BYTES}"));
        }
    }
    a
}

/// CPU time process `pid` (perf record: one thread) has run, s, from
/// `/proc/PID/schedstat` (ns; readable until the process is reaped).
fn cpu_so_far(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// A running `perf record`.
pub struct Recorder {
    child: Child,
    /// perf's CPU time when its window opened (read by a thread that
    /// waits for it): what it took before (start-up, synthesizing every
    /// process's maps) is not the window's.
    at_window: std::sync::mpsc::Receiver<Option<f64>>,
    dir: PathBuf,
    plan: Plan,
    started: Instant,
    version: String,
}

impl Recorder {
    /// Starts sampling every CPU: after `plan.delay_ms`, for
    /// `plan.length_ms` (or until stopped).
    pub fn start(plan: Plan) -> Result<Recorder, StacksError> {
        let version = perf_version()?;
        let dir = scratch_dir()?;
        let out = dir.join("perf.data");
        let log = std::fs::File::create(dir.join("perf.log"))
            .map_err(|e| err(format!("cannot create perf's log: {e}")))?;
        // perf enables its events `delay` after it started its workload,
        // and stops when the workload ends: `sleep` bounds the window.
        let total_ms = plan.delay_ms + plan.length_ms.unwrap_or(24 * 3600 * 1000);
        let mut args = record_args(plan.hz, plan.unwind, &out);
        if plan.delay_ms > 0 {
            args.push("-D".into());
            args.push(plan.delay_ms.to_string());
        }
        args.extend([
            "--".into(),
            "sleep".into(),
            format!("{:.3}", total_ms as f64 / 1000.0),
        ]);
        let child = Command::new("perf")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(err(format!("cannot start `perf record`: {e}")));
            }
        };
        if let Err(e) = wait_until_sampling(&mut child, &dir) {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        let (tx, at_window) = std::sync::mpsc::channel();
        let (pid, delay) = (child.id(), Duration::from_millis(plan.delay_ms));
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            let _ = tx.send(cpu_so_far(pid));
        });
        Ok(Recorder {
            child,
            at_window,
            dir,
            plan,
            started: Instant::now(),
            version,
        })
    }

    /// Stops sampling (at once, if its window has not ended) and returns
    /// the host's folded stacks by side.
    pub fn stop(mut self) -> Result<Recording, StacksError> {
        let result = self.finish();
        let _ = std::fs::remove_dir_all(&self.dir);
        result
    }

    fn finish(&mut self) -> Result<Recording, StacksError> {
        let elapsed = self.started.elapsed();
        let pid = self.child.id() as libc::pid_t;
        // perf's CPU time in its window: from when it opened to now (or
        // to perf's end, read from the unreaped process).
        let opened = self.at_window.try_recv().ok().flatten();
        let window_cpu_s = match (opened, cpu_so_far(pid as u32)) {
            (Some(a), Some(b)) => (b - a).max(0.0),
            _ => 0.0,
        };
        // Not reaped yet (a zombie ignores it): the rusage comes with the
        // reaping below.
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let (status, perf_cpu_s) = wait_rusage(&mut self.child, STOP_GRACE)?;
        let log = std::fs::read_to_string(self.dir.join("perf.log")).unwrap_or_default();
        let data = self.dir.join("perf.data");
        // SIGINT ends perf record normally: it writes its file, ends its
        // workload with SIGTERM and exits as the workload did.
        let ok = status.success() || matches!(status.signal(), Some(libc::SIGINT | libc::SIGTERM));
        if !ok || !data.exists() {
            return Err(err(format!(
                "perf record failed ({status}): {}",
                last_lines(&log)
            )));
        }
        let delay = Duration::from_millis(self.plan.delay_ms);
        let mut window = elapsed.saturating_sub(delay);
        if let Some(l) = self.plan.length_ms {
            window = window.min(Duration::from_millis(l));
        }
        let (text, script_cpu_s) = script(&data)?;
        let s = split(&text, &self.plan.roots)?;
        Ok(Recording {
            hz: self.plan.hz,
            unwind: self.plan.unwind,
            window_s: window.as_secs_f64(),
            samples: s.samples,
            busy_samples: s.busy_samples,
            perf_cpu_s,
            perf_window_cpu_s: window_cpu_s,
            script_cpu_s,
            perf_version: self.version.clone(),
            sides: s.sides,
        })
    }
}

/// How long `perf record` may take to set up (read every process's maps
/// and the kernel's symbols) before it starts its workload: a fraction
/// of a second on a host, many seconds in a TCG guest.
const READY_LIMIT: Duration = Duration::from_secs(50);

/// Waits until `perf record` has set up and started its workload (its
/// child has become `sleep`): only from then does its `-D` delay run.
/// Returning earlier would let a point start, and in a slow guest end,
/// before perf samples anything.
fn wait_until_sampling(child: &mut Child, dir: &Path) -> Result<(), StacksError> {
    let pid = child.id();
    let until = Instant::now() + READY_LIMIT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(dir.join("perf.log")).unwrap_or_default();
            return Err(err(format!(
                "perf record ended before sampling ({status}): {}",
                last_lines(&log)
            )));
        }
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        let started = children.split_whitespace().any(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == "sleep")
        });
        if started {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(err(format!(
                "perf record did not start sampling within {} s",
                READY_LIMIT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // A recorder dropped without `stop` (a lost session) takes its
        // perf with it.
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn last_lines(log: &str) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let n = lines.len();
    lines[n.saturating_sub(3)..].join(" / ")
}

/// Waits for `child` (killing it after `limit`) and returns its status
/// and the CPU time it used (user + system), s.
fn wait_rusage(
    child: &mut Child,
    limit: Duration,
) -> Result<(std::process::ExitStatus, f64), StacksError> {
    let pid = child.id() as libc::pid_t;
    let until = Instant::now() + limit;
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 on our own child.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            let cpu = tv(ru.ru_utime) + tv(ru.ru_stime);
            return Ok((std::process::ExitStatus::from_raw(status), cpu));
        }
        if r < 0 {
            return Err(err(format!(
                "waiting for perf: {}",
                std::io::Error::last_os_error()
            )));
        }
        if Instant::now() > until {
            // SAFETY: our own child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `perf script` of a recording: its text and its CPU time, s.
/// `--no-inline` keeps perf from asking addr2line about every frame
/// (minutes on a large library; the inlined frames are not worth it).
fn script(data: &Path) -> Result<(String, f64), StacksError> {
    let mut child = Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(data)
        .args(["-F", SCRIPT_FIELDS, "--no-inline", "--show-task-events"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| err(format!("cannot start `perf script`: {e}")))?;
    let mut text = String::new();
    let read = child.stdout.take().map(|mut o| o.read_to_string(&mut text));
    let (status, cpu) = wait_rusage(&mut child, Duration::from_secs(600))?;
    if let Some(Err(e)) = read {
        return Err(err(format!("reading `perf script`: {e}")));
    }
    if !status.success() {
        return Err(err(format!("perf script failed ({status})")));
    }
    Ok((text, cpu))
}
