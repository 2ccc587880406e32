//! A running service: start (checks, journal, gate, probe), observation,
//! liveness, stop.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use benchlab_env::journal::{Change, Journal};
use serde::{Deserialize, Serialize};

use crate::prepare::{prepare, Prepared, Root};
use crate::procfs::{self, ServiceUsage};
use crate::spec::{Probe, Restart, ServiceKind, ServicePlan, ServiceSpec};
use crate::{gate, probe, ServiceError, MARKER};

/// How many lines of each log an error or a death report carries.
const LOG_LINES: usize = 20;
/// How often a starting server is probed.
const PROBE_EVERY: Duration = Duration::from_millis(20);
/// How long a group may take to vanish after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Where a service's files go, and where its journal is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartOptions {
    /// The directory in which benchlab makes the service's scratch
    /// directory (config, logs, pid file, default document root).
    pub scratch_base: PathBuf,
    /// The restore journal's directory.
    pub journal_dir: PathBuf,
    /// Secret values the controller handed over (a guest's agent, which
    /// cannot read the controller's environment); empty: each secret is
    /// resolved from its source on this host.
    pub secrets: crate::SecretValues,
}

impl StartOptions {
    /// Scratch under `scratch_base` (default: the temporary directory),
    /// journal in benchlab's usual journal directory.
    pub fn new(scratch_base: Option<PathBuf>) -> StartOptions {
        StartOptions {
            scratch_base: scratch_base.unwrap_or_else(std::env::temp_dir),
            journal_dir: benchlab_env::journal::journal_dir(),
            secrets: crate::SecretValues::default(),
        }
    }
}

/// What the appendix records of a started service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceDescription {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: ServiceKind,
    /// The study's name of its host.
    pub host: String,
    /// The server's own version line (`nginx/1.22.1`,
    /// `Apache/2.4.71 (Debian)`); `None` for a command.
    pub version: Option<String>,
    /// The program that runs.
    pub program: String,
    /// Its arguments (secrets masked).
    pub argv: Vec<String>,
    /// Where the configuration came from (`services/nginx.conf` or the
    /// user's file).
    pub config_origin: Option<String>,
    /// The effective configuration, verbatim (secrets masked).
    pub config: Option<String>,
    /// The address it listens on.
    pub listen: SocketAddr,
    /// Where it serves files from.
    pub document_root: PathBuf,
    /// The CPUs it may run on (`None`: any).
    pub cpus: Option<Vec<usize>>,
    /// The `workers` template variable it got.
    pub workers: String,
    /// When it is restarted.
    pub restart: Restart,
    /// Its readiness probe.
    pub probe: Probe,
    /// Its process group.
    pub pgid: i32,
    /// Its scratch directory (removed when it stops).
    pub scratch: PathBuf,
    /// The file system benchlab made for the document root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_fs: Option<crate::spec::DocumentFs>,
    /// How long it took from release to ready (s).
    pub ready_after_s: f64,
}

impl ServiceDescription {
    /// The placement in words.
    pub fn placement(&self) -> String {
        match &self.cpus {
            None => "any CPU".into(),
            Some(c) => format!(
                "CPU{} {}",
                if c.len() == 1 { "" } else { "s" },
                c.iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }
}

/// Whether a service is still running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Liveness {
    /// Its main process runs.
    Alive,
    /// Its main process ended by itself.
    Died {
        /// How: `exited with code 1`, `killed by signal 9 (SIGKILL)`.
        reason: String,
        /// The last lines of its logs.
        log: String,
    },
}

/// How a stop went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopReport {
    /// How the main process ended.
    pub exit: String,
    /// It had died by itself before the stop.
    pub died_before: bool,
    /// SIGTERM was not enough within the grace period: SIGKILL was sent.
    pub forced: bool,
    /// Its use just before the stop.
    pub usage: ServiceUsage,
    /// The server's own counters just before the stop, where its kind
    /// keeps some benchlab reads (RabbitMQ: `rabbit_global_counters`,
    /// summed over queue types: `messages_received_total`,
    /// `messages_confirmed_total`, `messages_delivered_total`,
    /// `messages_acknowledged_total`). A check of the load's figures by
    /// the other side, wherever the server runs (in a guest, nothing of
    /// its files is reachable from the controller after the stop).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub own_counters: BTreeMap<String, u64>,
}

/// How long reading a server's own counters before its stop may take
/// (rabbitmqctl starts an Erlang VM: about 1 s on this machine's CPUs,
/// tens of seconds in an emulated guest).
pub const OWN_COUNTERS_TIMEOUT: Duration = Duration::from_secs(90);

/// The counters of RabbitMQ's `rabbit_global_counters:overview()` that
/// a stop report carries.
const RABBITMQ_COUNTERS: [&str; 4] = [
    "messages_received_total",
    "messages_confirmed_total",
    "messages_delivered_total",
    "messages_acknowledged_total",
];

/// Sums each of `keys` over every `key => N` in an Erlang map's printed
/// form (the overview has one map per protocol and queue type).
fn sum_erlang_counters(text: &str, keys: &[&str]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for key in keys {
        let pat = format!("{key} => ");
        let mut total = 0u64;
        let mut found = false;
        let mut rest = text;
        while let Some(i) = rest.find(&pat) {
            rest = &rest[i + pat.len()..];
            let n: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            if let Ok(n) = n.parse::<u64>() {
                total += n;
                found = true;
            }
        }
        if found {
            out.insert(key.to_string(), total);
        }
    }
    out
}

/// Runs `cmd` to its end, or kills it after `limit`; its standard output
/// if it succeeded.
fn output_within(mut cmd: std::process::Command, limit: Duration) -> Option<String> {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = reader.join().ok()?;
    status.filter(|s| s.success()).map(|_| text)
}

/// A started service. Dropping it stops it.
pub struct Service {
    desc: ServiceDescription,
    pid: i32,
    exit: Option<String>,
    scratch: PathBuf,
    own_root: Option<PathBuf>,
    journal: Option<Journal>,
    secrets: Vec<String>,
    stop_grace: Duration,
    fs: Option<benchlab_env::target::Prepared>,
}

/// A test hook: with `BENCHLAB_TEST_SERVICE_PAUSE=<step>`, a start stops
/// at that step (saying so on standard error) until it is killed, so that
/// tests can kill a starter at a known moment. Steps: `journal`,
/// `scratch`, `forked`, `journaled`, `released`.
fn test_pause(step: &str) {
    if std::env::var("BENCHLAB_TEST_SERVICE_PAUSE").is_ok_and(|s| s == step) {
        eprintln!("benchlab-service: paused at {step}");
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

/// How a waited-for process ended.
pub fn exit_reason(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exited with code {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        let s = libc::WTERMSIG(status);
        let name = match s {
            libc::SIGHUP => "SIGHUP",
            libc::SIGINT => "SIGINT",
            libc::SIGQUIT => "SIGQUIT",
            libc::SIGILL => "SIGILL",
            libc::SIGABRT => "SIGABRT",
            libc::SIGBUS => "SIGBUS",
            libc::SIGFPE => "SIGFPE",
            libc::SIGKILL => "SIGKILL",
            libc::SIGSEGV => "SIGSEGV",
            libc::SIGPIPE => "SIGPIPE",
            libc::SIGTERM => "SIGTERM",
            _ => "",
        };
        if name.is_empty() {
            format!("killed by signal {s}")
        } else {
            format!("killed by signal {s} ({name})")
        }
    } else {
        format!("ended with wait status {status}")
    }
}

/// Reaps the group leader if it has ended.
fn reap(pid: i32, exit: &mut Option<String>) {
    if exit.is_some() {
        return;
    }
    let mut status = 0;
    // SAFETY: waiting, without blocking, for our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    if r == pid {
        *exit = Some(exit_reason(status));
    } else if r < 0 {
        // Not our child (any more): someone else reaped it.
        *exit = Some("ended (reaped elsewhere)".into());
    }
}

fn group_gone(pid: i32, exit: &mut Option<String>) -> bool {
    reap(pid, exit);
    exit.is_some() && procfs::live_members(pid).is_empty()
}

fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGTERM to the group, `grace` to go, then SIGKILL. Returns whether
/// SIGKILL was needed. The leader is reaped, so until then its pid (the
/// group's id) cannot be reused, and a group with members keeps its id:
/// signals only go while the group is ours.
fn terminate(pid: i32, exit: &mut Option<String>, grace: Duration) -> bool {
    if group_gone(pid, exit) {
        return false;
    }
    // SAFETY: kill(2) on the group we started.
    unsafe { libc::kill(-pid, libc::SIGTERM) };
    if wait_until(grace, || group_gone(pid, exit)) {
        return false;
    }
    if exit.is_none() || !procfs::live_members(pid).is_empty() {
        // SAFETY: as above.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    wait_until(KILL_WAIT, || group_gone(pid, exit));
    true
}

/// Removes a directory benchlab made (it holds the marker).
fn remove_ours(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        return Ok(());
    }
    if !dir.join(MARKER).is_file() {
        return Err(format!(
            "{} has no {MARKER}: left in place (benchlab removes only what it made)",
            dir.display()
        ));
    }
    fs::remove_dir_all(dir).map_err(|e| format!("cannot remove {}: {e}", dir.display()))
}

/// The last lines of a service's logs (error log first), secrets masked.
fn log_tail(scratch: &Path, secrets: &[String]) -> String {
    let mut out = String::new();
    let mut names: Vec<String> = vec!["error.log".into(), "output.log".into()];
    // RabbitMQ logs to log/rabbit@ADDRESS.log (RABBITMQ_LOG_BASE).
    if let Ok(rd) = fs::read_dir(scratch.join("log")) {
        let mut logs: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| n.ends_with(".log"))
            .map(|n| format!("log/{n}"))
            .collect();
        logs.sort();
        names.extend(logs);
    }
    for name in &names {
        let Ok(text) = fs::read_to_string(scratch.join(name)) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() {
            continue;
        }
        for l in &lines[lines.len().saturating_sub(LOG_LINES)..] {
            out.push_str(&format!("  {name}: {l}\n"));
        }
    }
    mask(&out, secrets)
}

fn mask(text: &str, secrets: &[String]) -> String {
    benchlab_core::redact::redact_known(text, secrets)
}

/// What was made so far by a start, undone if it fails.
struct Partial {
    name: String,
    journal: Option<Journal>,
    dirs: Vec<PathBuf>,
    pid: Option<i32>,
    exit: Option<String>,
    /// The effective configuration a server reported (Samba's
    /// `testparm -s`), shown instead of the rendered template.
    effective_config: Option<String>,
    /// The document root's file system, when benchlab made one.
    fs: Option<benchlab_env::target::Prepared>,
}

/// Unmounts and removes a document root's file system: its contents
/// first (everything on it was written for benchlab: the file system is
/// benchlab's own, formatted at start), then the target's cleanup
/// (`benchlab_env::target`).
fn remove_fs(fs: benchlab_env::target::Prepared) -> Result<(), String> {
    let dir = fs.work_dir().to_path_buf();
    if let Ok(entries) = fs::read_dir(&dir) {
        for e in entries.flatten() {
            let p = e.path();
            let r = if p.is_dir() && !p.is_symlink() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
            r.map_err(|e| format!("empty {}: {e}", dir.display()))?;
        }
    }
    fs.cleanup()
}

impl Partial {
    /// Opens the service's own journal: nothing is made before it exists.
    fn open(spec: &ServiceSpec, opts: &StartOptions) -> Result<Partial, ServiceError> {
        let journal = Journal::create(&opts.journal_dir, &spec.host, None).map_err(|source| {
            ServiceError::Journal {
                service: spec.name.clone(),
                source,
            }
        })?;
        Ok(Partial {
            name: spec.name.clone(),
            journal: Some(journal),
            dirs: Vec::new(),
            pid: None,
            exit: None,
            effective_config: None,
            fs: None,
        })
    }

    fn io(&self, context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServiceError {
        let (service, context) = (self.name.clone(), context.into());
        move |source| ServiceError::Io {
            service,
            context,
            source,
        }
    }

    /// Journals a change of this service (`what`: `scratch directory`,
    /// `process group` …).
    fn journal(&mut self, what: &str, change: Change) -> Result<(), ServiceError> {
        let j = self.journal.as_mut().expect("open while starting");
        j.record(&format!("service {} {what}", self.name), change)
            .map_err(|source| ServiceError::Journal {
                service: self.name.clone(),
                source,
            })
    }

    /// Makes a directory of ours: journaled first (unless inside one that
    /// is), then made with the marker in it.
    fn make_dir(&mut self, what: &str, dir: &Path, journal: bool) -> Result<(), ServiceError> {
        if journal {
            self.journal(
                what,
                Change::ScratchDir {
                    path: dir.display().to_string(),
                },
            )?;
        }
        fs::create_dir(dir).map_err(self.io(format!("create {}", dir.display())))?;
        self.dirs.push(dir.to_path_buf());
        // Readable by the server's unprivileged workers (www-data).
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
            .map_err(self.io(format!("set the mode of {}", dir.display())))?;
        fs::write(
            dir.join(MARKER),
            format!(
                "made by benchlab for service `{}` (pid {}); removed when it stops\n",
                self.name,
                std::process::id()
            ),
        )
        .map_err(self.io(format!("write {}", dir.join(MARKER).display())))
    }

    /// Makes the document root's file system (an image in the scratch
    /// directory, formatted and mounted by env's target code, as
    /// fs.matrix's targets are, whose janitor undoes it if this process
    /// dies) and links the document root to it.
    fn make_fs(
        &mut self,
        spec: &crate::spec::DocumentFs,
        scratch: &Path,
        root: &Path,
    ) -> Result<(), ServiceError> {
        let target = benchlab_env::target::TargetSpec {
            path: scratch.join("document.img"),
            mkfs: Some(spec.mkfs.clone()),
            mkfs_options: spec.mkfs_options.clone(),
            mount_options: spec.mount_options.clone(),
            image_size: Some(spec.image_size),
        };
        let made = benchlab_env::target::prepare(&target).map_err(|e| ServiceError::Spec {
            service: self.name.clone(),
            key: "document_fs".into(),
            message: e.to_string(),
        })?;
        let dir = made.work_dir().to_path_buf();
        self.fs = Some(made);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))
            .map_err(self.io(format!("set the mode of {}", dir.display())))?;
        std::os::unix::fs::symlink(&dir, root).map_err(self.io(format!(
            "link {} to {}",
            root.display(),
            dir.display()
        )))
    }

    /// Makes the directories and files, and forks the server's process,
    /// which waits at the gate.
    fn lay_out(&mut self, p: &Prepared) -> Result<gate::Gated, ServiceError> {
        self.make_dir("scratch directory", &p.scratch, true)?;
        test_pause("scratch");
        match &p.root {
            Root::InScratch => self.make_dir("document root", &p.document_root, false)?,
            Root::Image(fs) => self.make_fs(fs, &p.scratch, &p.document_root)?,
            Root::Create(d) => self.make_dir("document root", d, true)?,
            Root::Ours(d) => {
                self.journal(
                    "document root",
                    Change::ScratchDir {
                        path: d.display().to_string(),
                    },
                )?;
                self.dirs.push(d.clone());
            }
        }
        if let Some((path, text)) = &p.config {
            // 0600: it may hold secrets; the server reads it as root.
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .map_err(self.io(format!("write {}", path.display())))?;
        }
        if let (Some((user, password)), Some((config, _))) = (&p.samba_user, &p.config) {
            let effective =
                crate::samba::lay_out(&p.scratch, config, &p.document_root, user, password)
                    .map_err(|message| ServiceError::Start {
                        service: self.name.clone(),
                        message: mask(&message, &p.secrets),
                        log: String::new(),
                    })?;
            self.effective_config = Some(effective);
        }
        let output = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(p.scratch.join("output.log"))
            .map_err(self.io("create output.log"))?;
        let (program, argv, cwd) = p.exec.clone();
        let launch = gate::Launch {
            program,
            argv,
            cwd,
            output,
            cpus: p.spec.cpus.clone(),
        };
        let gated = gate::spawn(&launch).map_err(self.io("fork the server's process"))?;
        self.pid = Some(gated.pid());
        Ok(gated)
    }

    /// Stops what started and removes what was made; the journal goes
    /// only when everything is undone.
    fn undo(mut self) -> Result<(), String> {
        if let Some(pid) = self.pid {
            terminate(pid, &mut self.exit, Duration::from_secs(5));
        }
        let mut problems = Vec::new();
        if let Some(made) = self.fs.take() {
            if let Err(e) = remove_fs(made) {
                problems.push(e);
            }
        }
        for d in self.dirs.iter().rev() {
            if let Err(e) = remove_ours(d) {
                problems.push(e);
            }
        }
        if let Some(j) = self.journal.take() {
            if problems.is_empty() {
                if let Err(e) = j.finish() {
                    problems.push(e.to_string());
                }
            } else {
                problems.push(format!(
                    "journal kept at {}: run `benchlab restore`",
                    j.path().display()
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// A step failed: undoes, and returns its error (with what undoing
    /// could not do).
    fn abort(self, e: ServiceError) -> ServiceError {
        let name = self.name.clone();
        match self.undo() {
            Ok(()) => e,
            Err(u) => ServiceError::Start {
                service: name,
                message: format!("{e} (and undoing the start failed: {u})"),
                log: String::new(),
            },
        }
    }

    /// The server did not start: undoes, and says so in the error.
    fn fail(self, message: String, log: String) -> ServiceError {
        let name = self.name.clone();
        let message = match self.undo() {
            Ok(()) => message,
            Err(e) => format!("{message} (and undoing the start failed: {e})"),
        };
        ServiceError::Start {
            service: name,
            message,
            log,
        }
    }
}

/// Probes until the server answers; fails if its main process ends first
/// or the time runs out.
fn wait_ready(
    p: &Prepared,
    mut partial: Partial,
    released: Instant,
) -> Result<Partial, ServiceError> {
    let pid = partial.pid.expect("started");
    let target = probe::target(p.listen);
    let deadline = released + Duration::from_secs_f64(p.spec.ready_timeout_s);
    loop {
        reap(pid, &mut partial.exit);
        if let Some(reason) = partial.exit.clone() {
            let log = log_tail(&p.scratch, &p.secrets);
            return Err(partial.fail(format!("{} {reason} while starting", p.program), log));
        }
        match probe::attempt(&p.spec.probe(), target) {
            Ok(()) => return Ok(partial),
            Err(why) if Instant::now() >= deadline => {
                let log = log_tail(&p.scratch, &p.secrets);
                return Err(partial.fail(
                    format!(
                        "{} did not become ready within {} s (last probe: {why}); it was stopped",
                        p.program, p.spec.ready_timeout_s
                    ),
                    log,
                ));
            }
            Err(_) => std::thread::sleep(PROBE_EVERY),
        }
    }
}

impl Service {
    /// Every check a start makes — the spec, the template's variables,
    /// secrets, the program, CPUs, the port, the document root, the
    /// scratch base — on this host, starting and creating nothing.
    pub fn check(plan: &ServicePlan, opts: &StartOptions) -> Result<(), ServiceError> {
        crate::prepare::prepare(plan, opts).map(drop)
    }

    /// Starts a service: every check first (nothing is made before they
    /// pass), then — journal first — its scratch directory, its document
    /// root and its process group, then waits until its probe answers.
    /// On any failure everything made is removed again and the error
    /// carries the server's last log lines.
    pub fn start(plan: &ServicePlan, opts: &StartOptions) -> Result<Service, ServiceError> {
        let p = prepare(plan, opts)?;
        // Every check passed. From here on, journal first.
        test_pause("journal");
        let mut partial = Partial::open(&p.spec, opts)?;
        let gated = match partial.lay_out(&p) {
            Ok(g) => g,
            Err(e) => return Err(partial.abort(e)),
        };
        let pid = gated.pid();
        test_pause("forked");
        // The child exists (it waits at the gate): its start time is its
        // fork's, which exec does not change.
        let start_ticks = benchlab_env::sys::start_ticks(pid).unwrap_or(0);
        let group = Change::ProcessGroup {
            pgid: pid,
            start_ticks,
        };
        if let Err(e) = partial.journal("process group", group) {
            gated.abandon();
            partial.exit = Some("never started".into());
            return Err(partial.abort(e));
        }
        test_pause("journaled");
        let released = Instant::now();
        if let Err(e) = gated.release() {
            let log = log_tail(&p.scratch, &p.secrets);
            return Err(partial.fail(format!("cannot start {}: {e}", p.program), log));
        }
        test_pause("released");
        let partial = wait_ready(&p, partial, released)?;
        Ok(Service::running(p, partial, released))
    }

    fn running(p: Prepared, mut partial: Partial, released: Instant) -> Service {
        let pid = partial.pid.expect("started");
        let desc = ServiceDescription {
            name: p.spec.name.clone(),
            kind: p.spec.kind,
            host: p.spec.host.clone(),
            version: p.version,
            program: p.program,
            argv: p.argv_shown,
            config_origin: p.config_origin,
            config: partial.effective_config.take().or(p.config_shown),
            listen: p.listen,
            document_root: p.document_root,
            cpus: p.spec.cpus.clone(),
            workers: p.workers,
            restart: p.spec.restart,
            probe: p.spec.probe(),
            pgid: pid,
            scratch: p.scratch.clone(),
            document_fs: p.spec.document_fs.clone(),
            ready_after_s: released.elapsed().as_secs_f64(),
        };
        Service {
            desc,
            pid,
            exit: None,
            scratch: p.scratch,
            own_root: match p.root {
                Root::InScratch | Root::Image(_) => None,
                Root::Create(d) | Root::Ours(d) => Some(d),
            },
            journal: partial.journal.take(),
            secrets: p.secrets,
            stop_grace: Duration::from_secs_f64(p.spec.stop_timeout_s),
            fs: partial.fs.take(),
        }
    }

    /// The server's name in messages: the kind, or a command's program.
    fn who(&self) -> String {
        match self.desc.kind {
            ServiceKind::Command => Path::new(&self.desc.program).file_name().map_or_else(
                || self.desc.program.clone(),
                |f| f.to_string_lossy().into_owned(),
            ),
            k => k.name().to_string(),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.desc.name
    }

    /// What the appendix records of it.
    pub fn description(&self) -> &ServiceDescription {
        &self.desc
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.desc.listen
    }

    /// Its process group (= its main process).
    pub fn pgid(&self) -> i32 {
        self.pid
    }

    /// A snapshot of what its processes use now.
    pub fn usage(&self) -> ServiceUsage {
        procfs::group_usage(self.pid)
    }

    /// The server's own counters, where its kind keeps some benchlab
    /// reads (see [`StopReport::own_counters`]); empty when it keeps none
    /// or they cannot be read within [`OWN_COUNTERS_TIMEOUT`].
    pub fn own_counters(&self) -> BTreeMap<String, u64> {
        match self.desc.kind {
            ServiceKind::Rabbitmq => {
                // The wrapper the start script wrote: the broker's own
                // environment (node name, cookie's home, epmd port).
                let mut cmd = std::process::Command::new(self.scratch.join("rabbitmqctl"));
                cmd.args(["-q", "eval", "rabbit_global_counters:overview()."]);
                output_within(cmd, OWN_COUNTERS_TIMEOUT)
                    .map(|t| sum_erlang_counters(&t, &RABBITMQ_COUNTERS))
                    .unwrap_or_default()
            }
            _ => BTreeMap::new(),
        }
    }

    /// Whether it still runs, or how it died (exit code or signal).
    pub fn check_alive(&mut self) -> Liveness {
        reap(self.pid, &mut self.exit);
        match &self.exit {
            None => Liveness::Alive,
            Some(reason) => Liveness::Died {
                reason: format!("{} {reason}", self.who()),
                log: log_tail(&self.scratch, &self.secrets),
            },
        }
    }

    /// Stops it: SIGTERM to its group, the grace period, then SIGKILL;
    /// removes its scratch directory (and a document root benchlab made)
    /// and finishes its journal.
    pub fn stop(mut self) -> Result<StopReport, ServiceError> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<StopReport, ServiceError> {
        let usage = self.usage();
        reap(self.pid, &mut self.exit);
        let died_before = self.exit.is_some();
        let own_counters = if died_before {
            BTreeMap::new()
        } else {
            self.own_counters()
        };
        let forced = terminate(self.pid, &mut self.exit, self.stop_grace);
        benchlab_env::sys::kill_escaped(&self.scratch);
        let mut problems = Vec::new();
        if !procfs::live_members(self.pid).is_empty() {
            problems.push(format!(
                "process group {} is still alive after SIGKILL",
                self.pid
            ));
        }
        if let Some(made) = self.fs.take() {
            if let Err(e) = remove_fs(made) {
                problems.push(e);
            }
        }
        for d in std::iter::once(&self.scratch).chain(self.own_root.iter()) {
            if let Err(e) = remove_ours(d) {
                problems.push(e);
            }
        }
        if let Some(j) = self.journal.take() {
            if problems.is_empty() {
                if let Err(e) = j.finish() {
                    problems.push(e.to_string());
                }
            } else {
                problems.push(format!(
                    "journal kept at {}: run `benchlab restore`",
                    j.path().display()
                ));
            }
        }
        if !problems.is_empty() {
            return Err(ServiceError::Stop {
                service: self.desc.name.clone(),
                message: problems.join("; "),
            });
        }
        Ok(StopReport {
            exit: self.exit.clone().unwrap_or_else(|| "unknown".into()),
            died_before,
            forced,
            usage,
            own_counters,
        })
    }
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("name", &self.desc.name)
            .field("kind", &self.desc.kind)
            .field("listen", &self.desc.listen)
            .field("pgid", &self.pid)
            .field("exit", &self.exit)
            .finish()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.journal.is_some() {
            let _ = self.stop_inner();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rabbitmq_counters_are_summed_over_queue_types() {
        let text = "#{protocol => amqp091, queue_type => rabbit_classic_queue} => #{messages_delivered_total => 7, messages_acknowledged_total => 5},\n                    #{protocol => amqp091, queue_type => rabbit_quorum_queue} => #{messages_delivered_total => 3, messages_acknowledged_total => 0},\n                    #{protocol => amqp091} => #{messages_received_total => 10, messages_confirmed_total => 10}";
        let c = sum_erlang_counters(text, &RABBITMQ_COUNTERS);
        assert_eq!(c["messages_received_total"], 10);
        assert_eq!(c["messages_confirmed_total"], 10);
        assert_eq!(c["messages_delivered_total"], 10);
        assert_eq!(c["messages_acknowledged_total"], 5);
        assert!(sum_erlang_counters("ok", &RABBITMQ_COUNTERS).is_empty());
    }

    #[test]
    fn exit_reasons() {
        assert_eq!(exit_reason(1 << 8), "exited with code 1");
        assert_eq!(exit_reason(9), "killed by signal 9 (SIGKILL)");
        assert_eq!(exit_reason(15), "killed by signal 15 (SIGTERM)");
    }

    #[test]
    fn masking() {
        assert_eq!(
            mask("pw=hunter2 ok", &["hunter2".into(), String::new()]),
            format!("pw={} ok", crate::MASK)
        );
    }

    #[test]
    fn placement_words() {
        let mut d = ServiceDescription {
            name: "w".into(),
            kind: ServiceKind::Nginx,
            host: "local".into(),
            version: None,
            program: "nginx".into(),
            argv: vec![],
            config_origin: None,
            config: None,
            listen: "127.0.0.1:1".parse().unwrap(),
            document_root: "/x".into(),
            cpus: None,
            workers: "2".into(),
            restart: Restart::Never,
            probe: Probe::Tcp,
            pgid: 1,
            scratch: "/s".into(),
            document_fs: None,
            ready_after_s: 0.0,
        };
        assert_eq!(d.placement(), "any CPU");
        d.cpus = Some(vec![0]);
        assert_eq!(d.placement(), "CPU 0");
        d.cpus = Some(vec![0, 1]);
        assert_eq!(d.placement(), "CPUs 0,1");
    }

    #[test]
    fn files_we_did_not_make_are_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let theirs = d.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        fs::write(theirs.join("index.html"), "x").unwrap();
        assert!(remove_ours(&theirs).unwrap_err().contains("left in place"));
        assert!(theirs.join("index.html").exists());
        fs::write(theirs.join(MARKER), "").unwrap();
        remove_ours(&theirs).unwrap();
        assert!(!theirs.exists());
    }
}
