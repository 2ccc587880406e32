//! A running service: start (checks, journal, gate, probe), observation,
//! liveness, stop.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use benchlab_env::journal::{Change, Journal};
use serde::{Deserialize, Serialize};

use crate::procfs::{self, ServiceUsage};
use crate::spec::{Probe, Restart, SecretSource, ServiceKind, ServicePlan, ServiceSpec};
use crate::{gate, probe, template, ServiceError, MARKER, MASK};

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
}

impl StartOptions {
    /// Scratch under `scratch_base` (default: the temporary directory),
    /// journal in benchlab's usual journal directory.
    pub fn new(scratch_base: Option<PathBuf>) -> StartOptions {
        StartOptions {
            scratch_base: scratch_base.unwrap_or_else(std::env::temp_dir),
            journal_dir: benchlab_env::journal::journal_dir(),
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
    for name in ["error.log", "output.log"] {
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
    let mut t = text.to_string();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        t = t.replace(s.as_str(), MASK);
    }
    t
}

/// What was made so far by a start, undone if it fails.
struct Partial {
    name: String,
    journal: Option<Journal>,
    dirs: Vec<PathBuf>,
    pid: Option<i32>,
    exit: Option<String>,
}

impl Partial {
    fn io(&self, context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServiceError {
        let (service, context) = (self.name.clone(), context.into());
        move |source| ServiceError::Io {
            service,
            context,
            source,
        }
    }

    fn journal(&mut self, setting: String, change: Change) -> Result<(), ServiceError> {
        let j = self.journal.as_mut().expect("open while starting");
        j.record(&setting, change)
            .map_err(|source| ServiceError::Journal {
                service: self.name.clone(),
                source,
            })
    }

    /// Makes a directory of ours: journaled first, then made with the
    /// marker in it.
    fn make_dir(&mut self, what: &str, dir: &Path, journal: bool) -> Result<(), ServiceError> {
        if journal {
            self.journal(
                format!("service {} {what}", self.name),
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

    /// Stops what started and removes what was made; the journal goes
    /// only when everything is undone.
    fn undo(mut self) -> Result<(), String> {
        if let Some(pid) = self.pid {
            terminate(pid, &mut self.exit, Duration::from_secs(5));
        }
        let mut problems = Vec::new();
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

    /// Fails the start: undoes, and says so in the error.
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

fn resolve_secrets(spec: &ServiceSpec) -> Result<BTreeMap<String, String>, ServiceError> {
    let mut out = BTreeMap::new();
    for (name, src) in &spec.secrets {
        let err = |message: String| ServiceError::Spec {
            service: spec.name.clone(),
            key: format!("secrets.{name}"),
            message,
        };
        let value = match src {
            SecretSource::Env(var) => std::env::var(var).map_err(|_| {
                err(format!(
                    "environment variable {var} is not set on host `{}`",
                    spec.host
                ))
            })?,
            SecretSource::File(p) => {
                let t = fs::read_to_string(p)
                    .map_err(|e| err(format!("cannot read {}: {e}", p.display())))?;
                t.strip_suffix('\n')
                    .map(|s| s.strip_suffix('\r').unwrap_or(s))
                    .unwrap_or(&t)
                    .to_string()
            }
        };
        if value.is_empty() {
            return Err(err("is empty".into()));
        }
        out.insert(name.clone(), value);
    }
    Ok(out)
}

fn is_executable(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds a program: a path as given, else on the PATH and in the sbin
/// directories (an agent's PATH may lack them; nginx and apache2 live
/// there).
fn find_program(spec: &ServiceSpec, program: &str) -> Result<PathBuf, ServiceError> {
    let hint = spec
        .kind
        .program()
        .map(|(_, pkg)| format!(": install the Debian package `{pkg}` (apt-get install {pkg})"))
        .unwrap_or_default();
    if program.contains('/') {
        let p = PathBuf::from(program);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(ServiceError::MissingProgram {
                service: spec.name.clone(),
                program: program.into(),
                looked: "no executable file there".into(),
                hint,
            })
        };
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for extra in ["/usr/local/sbin", "/usr/sbin", "/sbin"] {
        if !dirs.iter().any(|d| d == Path::new(extra)) {
            dirs.push(extra.into());
        }
    }
    dirs.iter()
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
        .ok_or_else(|| ServiceError::MissingProgram {
            service: spec.name.clone(),
            program: program.into(),
            looked: format!("no `{program}` in PATH or the sbin directories"),
            hint,
        })
}

/// The server's version line, from `nginx -v` / `apache2 -v`.
fn version_of(kind: ServiceKind, program: &Path) -> Option<String> {
    let out = std::process::Command::new(program)
        .arg("-v")
        .output()
        .ok()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let key = match kind {
        ServiceKind::Nginx => "nginx version:",
        ServiceKind::Apache2 => "Server version:",
        ServiceKind::Command => return None,
    };
    text.lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .map(|v| v.trim().to_string())
}

/// The CPUs this process may use.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed set, filled by the kernel.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer and size.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: c is within the set.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

fn check_cpus(spec: &ServiceSpec) -> Result<(), ServiceError> {
    let Some(cpus) = &spec.cpus else {
        return Ok(());
    };
    let allowed = allowed_cpus();
    let missing: Vec<String> = cpus
        .iter()
        .filter(|c| !allowed.contains(c))
        .map(|c| c.to_string())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(ServiceError::Spec {
        service: spec.name.clone(),
        key: "cpus".into(),
        message: format!(
            "CPU {} not available on host `{}` (allowed: {})",
            missing.join(","),
            spec.host,
            allowed
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
    })
}

/// Checks that the port is free on the bind address (port 0: picks one).
fn check_port(spec: &ServiceSpec) -> Result<SocketAddr, ServiceError> {
    match TcpListener::bind((spec.bind, spec.port)) {
        Ok(l) => l.local_addr().map_err(|source| ServiceError::Io {
            service: spec.name.clone(),
            context: "read the picked port".into(),
            source,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(ServiceError::PortInUse {
            service: spec.name.clone(),
            bind: spec.bind.to_string(),
            port: spec.port,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => Err(ServiceError::Spec {
            service: spec.name.clone(),
            key: "bind".into(),
            message: format!("{} is not an address of host `{}`", spec.bind, spec.host),
        }),
        Err(source) => Err(ServiceError::Io {
            service: spec.name.clone(),
            context: format!("bind {}:{}", spec.bind, spec.port),
            source,
        }),
    }
}

/// Where the document root goes.
enum Root {
    /// In the scratch directory.
    InScratch,
    /// At the user's path, which does not exist yet.
    Create(PathBuf),
    /// At the user's path, a directory benchlab made before (it holds the
    /// marker): benchlab's, so it is journaled and removed as such.
    Ours(PathBuf),
}

fn check_root(spec: &ServiceSpec) -> Result<Root, ServiceError> {
    let Some(p) = &spec.document_root else {
        return Ok(Root::InScratch);
    };
    match fs::symlink_metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match p.parent() {
            Some(parent) if parent.is_dir() => Ok(Root::Create(p.clone())),
            _ => Err(ServiceError::Spec {
                service: spec.name.clone(),
                key: "document_root".into(),
                message: format!(
                    "the directory that would hold {} does not exist",
                    p.display()
                ),
            }),
        },
        Ok(m) if m.is_dir() && p.join(MARKER).is_file() => Ok(Root::Ours(p.clone())),
        Ok(_) => Err(ServiceError::NotOurs {
            service: spec.name.clone(),
            key: "document_root".into(),
            path: p.display().to_string(),
        }),
        Err(source) => Err(ServiceError::Io {
            service: spec.name.clone(),
            context: format!("look at document_root {}", p.display()),
            source,
        }),
    }
}

fn cstring(name: &str, s: &[u8]) -> Result<CString, ServiceError> {
    CString::new(s).map_err(|_| ServiceError::Spec {
        service: name.into(),
        key: "argv".into(),
        message: "an argument holds a NUL byte".into(),
    })
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

impl Service {
    /// Starts a service: every check first (nothing is made before they
    /// pass), then — journal first — its scratch directory, its document
    /// root and its process group, then waits until its probe answers.
    /// On any failure everything made is removed again and the error
    /// carries the server's last log lines.
    pub fn start(plan: &ServicePlan, opts: &StartOptions) -> Result<Service, ServiceError> {
        let spec = &plan.spec;
        // The plan may come over the wire: check it again here.
        spec.validate()?;
        plan.check_variables()?;
        let secrets = resolve_secrets(spec)?;
        let program = match spec.kind.program() {
            Some((p, _)) => p.to_string(),
            None => spec.argv[0].clone(),
        };
        let program = find_program(spec, &program)?;
        let version = version_of(spec.kind, &program);
        check_cpus(spec)?;
        let listen = check_port(spec)?;
        let root = check_root(spec)?;
        if !opts.scratch_base.is_dir() {
            return Err(ServiceError::Spec {
                service: spec.name.clone(),
                key: "scratch".into(),
                message: format!("{} is not a directory", opts.scratch_base.display()),
            });
        }
        let scratch = opts.scratch_base.join(format!(
            "benchlab-service-{}-{}-{}",
            spec.name,
            std::process::id(),
            unique()
        ));
        let document_root = match &root {
            Root::InScratch => scratch.join("htdocs"),
            Root::Create(p) | Root::Ours(p) => p.clone(),
        };
        let config_file = plan.template.as_ref().map(|t| scratch.join(&t.file_name));

        // The variables: benchlab's, the study's, then the secrets.
        let workers = spec
            .cpus
            .as_ref()
            .map(|c| c.len())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let mut vars: BTreeMap<String, String> = BTreeMap::new();
        let s = |p: &Path| p.display().to_string();
        vars.insert("port".into(), listen.port().to_string());
        vars.insert("bind".into(), spec.bind.to_string());
        vars.insert("listen".into(), listen.to_string());
        vars.insert("scratch".into(), s(&scratch));
        vars.insert("document_root".into(), s(&document_root));
        if let Some(c) = &config_file {
            vars.insert("config".into(), s(c));
        }
        vars.insert("workers".into(), workers.to_string());
        vars.insert("user".into(), "www-data".into());
        vars.insert("group".into(), "www-data".into());
        vars.insert("modules".into(), "/usr/lib/apache2/modules".into());
        vars.insert("access_log".into(), s(&scratch.join("access.log")));
        vars.extend(spec.vars.clone());
        let mut masked = vars.clone();
        for (k, v) in &secrets {
            vars.insert(k.clone(), v.clone());
            masked.insert(k.clone(), MASK.into());
        }
        let secret_values: Vec<String> = secrets.into_values().collect();

        let (config, config_shown) = match &plan.template {
            None => (None, None),
            Some(t) => {
                let terr = |message: String| ServiceError::Template {
                    service: spec.name.clone(),
                    template: t.origin.clone(),
                    message,
                };
                (
                    Some(template::render(&t.text, &vars).map_err(terr)?),
                    Some(template::render(&t.text, &masked).map_err(terr)?),
                )
            }
        };
        let render_argv = |vars: &BTreeMap<String, String>| -> Result<Vec<String>, ServiceError> {
            spec.argv
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    template::render(a, vars).map_err(|message| ServiceError::Spec {
                        service: spec.name.clone(),
                        key: format!("argv[{i}]"),
                        message,
                    })
                })
                .collect()
        };
        let p = program.display().to_string();
        let (argv, argv_shown) = match spec.kind {
            ServiceKind::Nginx => {
                let cf = s(config_file.as_ref().expect("nginx has a template"));
                let a = vec![
                    p.clone(),
                    "-c".into(),
                    cf,
                    "-p".into(),
                    format!("{}/", scratch.display()),
                    "-e".into(),
                    s(&scratch.join("error.log")),
                ];
                (a.clone(), a)
            }
            ServiceKind::Apache2 => {
                let cf = s(config_file.as_ref().expect("apache2 has a template"));
                let a = vec![
                    p.clone(),
                    "-f".into(),
                    cf,
                    "-d".into(),
                    s(&scratch),
                    "-DFOREGROUND".into(),
                ];
                (a.clone(), a)
            }
            ServiceKind::Command => {
                let mut a = render_argv(&vars)?;
                let mut shown = render_argv(&masked)?;
                a[0] = p.clone();
                shown[0] = p.clone();
                (a, shown)
            }
        };
        let launch_argv = argv
            .iter()
            .map(|a| cstring(&spec.name, a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let program_c = cstring(&spec.name, program.as_os_str().as_bytes())?;
        let cwd_c = cstring(&spec.name, scratch.as_os_str().as_bytes())?;

        // Every check passed. From here on, journal first.
        test_pause("journal");
        let journal = Journal::create(&opts.journal_dir, &spec.host, None).map_err(|source| {
            ServiceError::Journal {
                service: spec.name.clone(),
                source,
            }
        })?;
        let mut partial = Partial {
            name: spec.name.clone(),
            journal: Some(journal),
            dirs: Vec::new(),
            pid: None,
            exit: None,
        };
        macro_rules! tryp {
            ($e:expr) => {
                match $e {
                    Ok(v) => v,
                    Err(e) => {
                        let msg = e.to_string();
                        return Err(match partial.undo() {
                            Ok(()) => e,
                            Err(u) => ServiceError::Start {
                                service: spec.name.clone(),
                                message: format!("{msg} (and undoing the start failed: {u})"),
                                log: String::new(),
                            },
                        });
                    }
                }
            };
        }
        tryp!(partial.make_dir("scratch directory", &scratch, true));
        test_pause("scratch");
        match &root {
            Root::InScratch => tryp!(partial.make_dir("document root", &document_root, false)),
            Root::Create(p) => tryp!(partial.make_dir("document root", p, true)),
            Root::Ours(p) => {
                tryp!(partial.journal(
                    format!("service {} document root", spec.name),
                    Change::ScratchDir {
                        path: p.display().to_string()
                    }
                ));
                partial.dirs.push(p.clone());
            }
        }
        if let (Some(path), Some(text)) = (&config_file, &config) {
            // 0600: it may hold secrets; the server reads it as root.
            let written = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .and_then(|mut f| f.write_all(text.as_bytes()));
            tryp!(written.map_err(partial.io(format!("write {}", path.display()))));
        }
        let output = tryp!(OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(scratch.join("output.log"))
            .map_err(partial.io("create output.log")));
        let launch = gate::Launch {
            program: program_c,
            argv: launch_argv,
            cwd: cwd_c,
            output,
            cpus: spec.cpus.clone(),
        };
        let gated = tryp!(gate::spawn(&launch).map_err(partial.io("fork the server's process")));
        let pid = gated.pid();
        partial.pid = Some(pid);
        test_pause("forked");
        // The child exists (it waits at the gate): its start time is its
        // fork's, which exec does not change.
        let ticks = benchlab_env::sys::start_ticks(pid).unwrap_or(0);
        if let Err(e) = partial.journal(
            format!("service {} process group", spec.name),
            Change::ProcessGroup {
                pgid: pid,
                start_ticks: ticks,
            },
        ) {
            gated.abandon();
            partial.exit = Some("never started".into());
            let msg = e.to_string();
            return Err(match partial.undo() {
                Ok(()) => e,
                Err(u) => ServiceError::Start {
                    service: spec.name.clone(),
                    message: format!("{msg} (and undoing the start failed: {u})"),
                    log: String::new(),
                },
            });
        }
        test_pause("journaled");
        let released = Instant::now();
        if let Err(e) = gated.release() {
            let log = log_tail(&scratch, &secret_values);
            return Err(partial.fail(format!("cannot start {p}: {e}"), log));
        }
        test_pause("released");

        // Ready when the probe answers; dead if the leader ends first.
        let target = probe::target(listen);
        let deadline = released + Duration::from_secs_f64(spec.ready_timeout_s);
        loop {
            reap(pid, &mut partial.exit);
            if let Some(reason) = partial.exit.clone() {
                let log = log_tail(&scratch, &secret_values);
                return Err(partial.fail(format!("{p} {reason} while starting"), log));
            }
            match probe::attempt(&spec.probe, target) {
                Ok(()) => break,
                Err(why) if Instant::now() >= deadline => {
                    let log = log_tail(&scratch, &secret_values);
                    return Err(partial.fail(
                        format!(
                            "{p} did not become ready within {} s (last probe: {why}); it was stopped",
                            spec.ready_timeout_s
                        ),
                        log,
                    ));
                }
                Err(_) => std::thread::sleep(PROBE_EVERY),
            }
        }
        let desc = ServiceDescription {
            name: spec.name.clone(),
            kind: spec.kind,
            host: spec.host.clone(),
            version,
            program: p,
            argv: argv_shown,
            config_origin: plan.template.as_ref().map(|t| t.origin.clone()),
            config: config_shown,
            listen,
            document_root,
            cpus: spec.cpus.clone(),
            workers: vars["workers"].clone(),
            restart: spec.restart,
            probe: spec.probe.clone(),
            pgid: pid,
            scratch: scratch.clone(),
            ready_after_s: released.elapsed().as_secs_f64(),
        };
        let own_root = match root {
            Root::InScratch => None,
            Root::Create(p) | Root::Ours(p) => Some(p),
        };
        Ok(Service {
            desc,
            pid,
            exit: None,
            scratch,
            own_root,
            journal: partial.journal.take(),
            secrets: secret_values,
            stop_grace: Duration::from_secs_f64(spec.stop_timeout_s),
        })
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

    /// Whether it still runs, or how it died (exit code or signal).
    pub fn check_alive(&mut self) -> Liveness {
        reap(self.pid, &mut self.exit);
        match &self.exit {
            None => Liveness::Alive,
            Some(reason) => Liveness::Died {
                reason: format!("{} {reason}", self.desc.kind),
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
        let forced = terminate(self.pid, &mut self.exit, self.stop_grace);
        let mut problems = Vec::new();
        if !procfs::live_members(self.pid).is_empty() {
            problems.push(format!(
                "process group {} is still alive after SIGKILL",
                self.pid
            ));
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
            return Err(ServiceError::Start {
                service: self.desc.name.clone(),
                message: format!("stopping: {}", problems.join("; ")),
                log: String::new(),
            });
        }
        Ok(StopReport {
            exit: self.exit.clone().unwrap_or_else(|| "unknown".into()),
            died_before,
            forced,
            usage,
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
    fn exit_reasons() {
        assert_eq!(exit_reason(1 << 8), "exited with code 1");
        assert_eq!(exit_reason(9), "killed by signal 9 (SIGKILL)");
        assert_eq!(exit_reason(15), "killed by signal 15 (SIGTERM)");
    }

    #[test]
    fn masking() {
        assert_eq!(
            mask("pw=hunter2 ok", &["hunter2".into(), String::new()]),
            format!("pw={MASK} ok")
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
            ready_after_s: 0.0,
        };
        assert_eq!(d.placement(), "any CPU");
        d.cpus = Some(vec![0]);
        assert_eq!(d.placement(), "CPU 0");
        d.cpus = Some(vec![0, 1]);
        assert_eq!(d.placement(), "CPUs 0,1");
    }

    #[test]
    fn a_missing_server_names_its_debian_package() {
        let spec: ServiceSpec = serde_json::from_str(r#"{"name":"web","kind":"apache2"}"#).unwrap();
        let e = find_program(&spec, "benchlab-no-such-apache2").unwrap_err();
        assert_eq!(
            e.to_string(),
            "service `web`: benchlab-no-such-apache2 is not installed (no `benchlab-no-such-apache2` in PATH or the sbin directories): install the Debian package `apache2` (apt-get install apache2)"
        );
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
