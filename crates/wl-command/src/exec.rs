//! Running one command: placeholders substituted, the program started in a
//! process group of its own, its output collected, a time limit and the
//! run's abort flag honoured, and nothing of it left running afterwards.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How much of each output stream is kept; a tool printing more is cut
/// (the parsers need its results, which tools print in kilobytes).
const OUTPUT_CAP: usize = 64 << 20;
/// How often the wait looks at the abort flag and the clock.
const POLL: Duration = Duration::from_millis(20);

/// Replaces `{name}` placeholders; `{{` and `}}` are literal braces.
/// `lookup` gives a placeholder's value, or `None` for an unknown one.
pub fn substitute(
    template: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
        } else if tail.starts_with('}') {
            return Err(format!(
                "a lone `}}` in `{template}` (write `}}}}` for a brace)"
            ));
        } else {
            let end = tail
                .find('}')
                .ok_or_else(|| format!("`{{` without `}}` in `{template}`"))?;
            let name = &tail[1..end];
            let value = lookup(name)
                .ok_or_else(|| format!("unknown placeholder `{{{name}}}` in `{template}`"))?;
            out.push_str(&value);
            rest = &tail[end + 1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The placeholders a template uses.
pub fn placeholders(template: &str) -> Result<Vec<String>, String> {
    let names = std::cell::RefCell::new(Vec::new());
    substitute(template, &|n| {
        names.borrow_mut().push(n.to_string());
        Some(String::new())
    })?;
    Ok(names.into_inner())
}

/// The argv of a command line: without a shell, the template is split
/// into words first (quotes as a shell reads them) and each word
/// substituted, so that a value never splits or joins words; with
/// `shell`, the line is substituted with every value quoted and run by
/// `sh -c`.
pub fn argv(
    template: &str,
    shell: bool,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, String> {
    if shell {
        let quoted = |n: &str| {
            lookup(n).map(|v| {
                shlex::try_quote(&v)
                    .map(|q| q.into_owned())
                    .unwrap_or_else(|_| "''".into())
            })
        };
        let line = substitute(template, &quoted)?;
        return Ok(vec!["sh".into(), "-c".into(), line]);
    }
    let words = shlex::split(template).ok_or_else(|| format!("`{template}`: unbalanced quotes"))?;
    if words.is_empty() {
        return Err("an empty command".into());
    }
    words.iter().map(|w| substitute(w, lookup)).collect()
}

/// The path of `program` on this host's PATH (or itself when it has a
/// slash and is executable).
pub fn find_program(program: &str) -> Option<PathBuf> {
    let runnable = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
            .unwrap_or(false)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return runnable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(program))
        .find(|p| runnable(p))
}

/// What a finished command left.
#[derive(Debug)]
pub struct Outcome {
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// Exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// Wall-clock time from start to exit.
    pub wall: Duration,
    /// CPU time (user + system) of the program and the children it waited
    /// for.
    pub cpu_s: f64,
}

impl Outcome {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// "exited with status 2" / "was killed by signal 11".
    pub fn status_text(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exited with status {c}"),
            (None, Some(s)) => format!("was killed by signal {s}"),
            _ => "ended".into(),
        }
    }
}

/// Why a command did not finish.
#[derive(Debug)]
pub enum ExecError {
    /// The program is not there.
    NotFound(String),
    /// It could not be started.
    Spawn(String, std::io::Error),
    /// It ran past its time limit and was killed with its process group.
    Timeout {
        /// The limit.
        after: Duration,
        /// The end of what it printed on standard error.
        stderr: String,
    },
    /// The run was stopped from outside; the command was killed.
    Aborted,
}

/// The last `lines` lines of a text (at most 2000 characters), for a
/// failed point's reason.
pub fn tail(text: &str, lines: usize) -> String {
    let t = text.trim_end();
    let start = t
        .rmatch_indices('\n')
        .nth(lines.saturating_sub(1))
        .map(|(i, _)| i + 1)
        .unwrap_or(0);
    let mut s = &t[start..];
    if s.len() > 2000 {
        let mut cut = s.len() - 2000;
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        s = &s[cut..];
    }
    s.to_string()
}

fn reader(mut r: impl Read + Send + 'static, tx: mpsc::Sender<(bool, Vec<u8>)>, is_err: bool) {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            match r.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if buf.len() < OUTPUT_CAP {
                        buf.extend_from_slice(&chunk[..n.min(OUTPUT_CAP - buf.len())]);
                    }
                }
            }
        }
        let _ = tx.send((is_err, buf));
    });
}

/// Kills a process group (`ESRCH`, nothing left, is fine).
fn kill_group(pgid: i32) {
    // SAFETY: kill(2) with a negative pid signals that process group; no
    // memory is involved.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Runs `argv` in `cwd` with `env` added, until it exits, `timeout`
/// passes or `abort` is set. The program leads a process group of its
/// own, and the whole group is killed when the wait ends however it ends,
/// so that nothing the command started outlives its point (a daemon that
/// leaves the group with setsid is beyond this reach). It also dies with
/// the thread that started it (`PR_SET_PDEATHSIG`), should the agent die.
pub fn run(
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
    timeout: Duration,
    abort: &AtomicBool,
) -> Result<Outcome, ExecError> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    // SAFETY: prctl(2) is async-signal-safe; the closure touches no
    // memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ExecError::NotFound(argv[0].clone()))
        }
        Err(e) => return Err(ExecError::Spawn(argv[0].clone(), e)),
    };
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    reader(child.stdout.take().expect("piped"), tx.clone(), false);
    reader(child.stderr.take().expect("piped"), tx, true);

    let mut status = 0i32;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut stopped: Option<ExecError> = None;
    loop {
        // SAFETY: wait4 on our own child with valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // Not our child any more (cannot happen: std::process::Child
            // does not reap); stop waiting rather than spin.
            break;
        }
        let over = start.elapsed() >= timeout;
        if over || abort.load(Ordering::Relaxed) {
            kill_group(pid);
            // SAFETY: as above, blocking now that it was killed.
            unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            stopped = Some(if over {
                ExecError::Timeout {
                    after: timeout,
                    stderr: String::new(),
                }
            } else {
                ExecError::Aborted
            });
            break;
        }
        std::thread::sleep(POLL);
    }
    let wall = start.elapsed();
    // Whatever it left in its group goes too.
    kill_group(pid);
    drop(child);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok((false, b)) => out = b,
            Ok((true, b)) => err = b,
            // A process outside the group still holds the pipe: what was
            // read so far is lost with the reader, which ends when it does.
            Err(_) => break,
        }
    }
    let stderr = String::from_utf8_lossy(&err).into_owned();
    if let Some(e) = stopped {
        return Err(match e {
            ExecError::Timeout { after, .. } => ExecError::Timeout {
                after,
                stderr: tail(&stderr, 5),
            },
            other => other,
        });
    }
    let cpu = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Ok(Outcome {
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr,
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
        wall,
        cpu_s: cpu(usage.ru_utime) + cpu(usage.ru_stime),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(n: &str) -> Option<String> {
        match n {
            "message_size" => Some("1024".into()),
            "name" => Some("a b; rm -rf /".into()),
            _ => None,
        }
    }

    #[test]
    fn placeholders_substitute_per_word() {
        let a = argv("tool -m {message_size} --name={name} '{{x}}'", false, &vars).unwrap();
        assert_eq!(a, ["tool", "-m", "1024", "--name=a b; rm -rf /", "{x}"]);
        let a = argv("echo {name} | wc -c", true, &vars).unwrap();
        assert_eq!(a[2], "echo 'a b; rm -rf /' | wc -c");
        let e = argv("tool {nope}", false, &vars).unwrap_err();
        assert!(e.contains("unknown placeholder `{nope}`"), "{e}");
        assert!(argv("tool 'x", false, &vars)
            .unwrap_err()
            .contains("unbalanced"));
        assert!(substitute("a } b", &vars).unwrap_err().contains("lone"));
        assert!(substitute("a {b", &vars).unwrap_err().contains("without"));
        assert_eq!(placeholders("{a} {{b}} {c}").unwrap(), ["a", "c"]);
    }

    #[test]
    fn tails_are_short() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("abc", 5), "abc");
        assert_eq!(tail(&"é".repeat(3000), 1).chars().count(), 1000);
    }

    #[test]
    fn a_command_runs_and_its_status_is_kept() {
        let abort = AtomicBool::new(false);
        let dir = std::env::temp_dir();
        let o = run(
            &[
                "sh".into(),
                "-c".into(),
                "echo out; echo err >&2; exit 3".into(),
            ],
            &dir,
            &[],
            Duration::from_secs(10),
            &abort,
        )
        .unwrap();
        assert_eq!(o.stdout, "out\n");
        assert_eq!(o.stderr, "err\n");
        assert_eq!(o.code, Some(3));
        assert_eq!(o.status_text(), "exited with status 3");
        let e = run(
            &["/nonexistent/x".into()],
            &dir,
            &[],
            Duration::from_secs(1),
            &abort,
        );
        assert!(matches!(e, Err(ExecError::NotFound(_))));
    }
}
