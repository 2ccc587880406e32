//! Everything a start does before it makes anything: the checks (each a
//! clear error naming the service and the key) and the rendered
//! configuration and arguments. Nothing here changes the host.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::run::StartOptions;
use crate::spec::{ServiceKind, ServicePlan, ServiceSpec};
use crate::{template, ServiceError, MARKER, MASK};

/// A start, checked and worked out, before anything is made.
pub(crate) struct Prepared {
    /// The spec.
    pub spec: ServiceSpec,
    /// Where the configuration came from.
    pub config_origin: Option<String>,
    /// The program, as a path.
    pub program: String,
    /// The server's version line.
    pub version: Option<String>,
    /// The checked listen address (its port picked if it was 0).
    pub listen: SocketAddr,
    /// Where the document root goes.
    pub root: Root,
    /// The scratch directory to make.
    pub scratch: PathBuf,
    /// The document root.
    pub document_root: PathBuf,
    /// The configuration file to write, and its text (secrets in it).
    pub config: Option<(PathBuf, String)>,
    /// The configuration as the description shows it (secrets masked).
    pub config_shown: Option<String>,
    /// The arguments as the description shows them (secrets masked).
    pub argv_shown: Vec<String>,
    /// The `workers` variable.
    pub workers: String,
    /// The secrets' values, to mask in log tails.
    pub secrets: Vec<String>,
    /// What the gate execs, prepared before the fork.
    pub exec: (CString, Vec<CString>, CString),
    /// For Samba: the test user and its password (from
    /// `secrets.password`).
    pub samba_user: Option<(String, String)>,
}

/// Checks everything and works the start out.
pub(crate) fn prepare(plan: &ServicePlan, opts: &StartOptions) -> Result<Prepared, ServiceError> {
    let spec = &plan.spec;
    // The plan may come over the wire: check it again here.
    spec.validate()?;
    plan.check_variables()?;
    let secrets = crate::secrets::resolve_with(spec, &opts.secrets)?;
    let program = match spec.kind.program() {
        Some((p, _)) => p.to_string(),
        None => spec.argv[0].clone(),
    };
    let program = find_program(spec, &program)?;
    let version = version_of(spec.kind, &program);
    check_cpus(spec)?;
    if crate::samba::is(spec.kind) {
        crate::samba::check_root(spec).map_err(|(key, message)| ServiceError::Spec {
            service: spec.name.clone(),
            key,
            message,
        })?;
    }
    let listen = check_port(spec)?;
    let kind_vars = kind_variables(spec, listen)?;
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
        Root::InScratch | Root::Image(_) if crate::samba::is(spec.kind) => scratch.join("share"),
        Root::InScratch | Root::Image(_) => scratch.join("htdocs"),
        Root::Create(p) | Root::Ours(p) => p.clone(),
    };
    let config_file = plan.template.as_ref().map(|t| scratch.join(&t.file_name));
    let mut vars = variables(
        spec,
        listen,
        &scratch,
        &document_root,
        config_file.as_deref(),
    );
    for (k, v) in kind_vars {
        vars.entry(k).or_insert(v);
    }
    for (host, address) in &plan.hosts {
        vars.insert(
            format!("{}{host}", crate::template::HOST_PREFIX),
            address.clone(),
        );
    }
    let workers = vars["workers"].clone();
    if matches!(spec.kind, ServiceKind::Nginx | ServiceKind::Apache2) {
        check_reachable(spec, &vars["user"], &document_root)?;
    }
    // Rendered twice: with the secrets for the server, masked for the
    // description.
    let (mut real, mut masked) = (vars.clone(), vars);
    for (k, v) in &secrets {
        real.insert(k.clone(), v.clone());
        masked.insert(k.clone(), MASK.into());
    }
    let (config, config_shown) = match &plan.template {
        None => (None, None),
        Some(t) => {
            let terr = |message: String| ServiceError::Template {
                service: spec.name.clone(),
                template: t.origin.clone(),
                message,
            };
            (
                Some(template::render(&t.text, &real).map_err(terr)?),
                Some(template::render(&t.text, &masked).map_err(terr)?),
            )
        }
    };
    let p = program.display().to_string();
    let (argv, argv_shown) = match spec.kind {
        ServiceKind::Nginx | ServiceKind::Apache2 => {
            let a = server_argv(
                spec.kind,
                &p,
                config_file.as_deref().expect("servers have a template"),
                &scratch,
            );
            (a.clone(), a)
        }
        ServiceKind::Samba => {
            let a =
                crate::samba::argv(&p, config_file.as_deref().expect("servers have a template"));
            (a.clone(), a)
        }
        ServiceKind::Rabbitmq => {
            let a = rabbitmq_argv(
                &p,
                config_file.as_deref().expect("rabbitmq has a template"),
                &scratch,
                &real,
            );
            (a.clone(), a)
        }
        ServiceKind::Command => {
            let (mut a, mut shown) = (render_argv(spec, &real)?, render_argv(spec, &masked)?);
            a[0] = p.clone();
            shown[0] = p.clone();
            (a, shown)
        }
    };
    // RabbitMQ starts through a shell that first runs its epmd (see
    // rabbitmq_argv).
    let exec_program = match spec.kind {
        ServiceKind::Rabbitmq => Path::new("/bin/sh"),
        _ => program.as_path(),
    };
    let exec = (
        cstring(&spec.name, exec_program.as_os_str().as_bytes())?,
        argv.iter()
            .map(|a| cstring(&spec.name, a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()?,
        cstring(&spec.name, scratch.as_os_str().as_bytes())?,
    );
    let samba_user = crate::samba::is(spec.kind).then(|| {
        (
            real["user"].clone(),
            secrets
                .get(crate::samba::PASSWORD_SECRET)
                .cloned()
                .unwrap_or_default(),
        )
    });
    Ok(Prepared {
        samba_user,
        spec: spec.clone(),
        config_origin: plan.template.as_ref().map(|t| t.origin.clone()),
        program: p,
        version,
        listen,
        root,
        scratch,
        document_root,
        config: config_file.zip(config),
        config_shown,
        argv_shown,
        workers,
        secrets: secrets.into_values().collect(),
        exec,
    })
}

/// The uid and gid of a user, `None` when it does not exist.
pub(crate) fn user_ids(name: &str) -> Option<(u32, u32)> {
    let c = CString::new(name).ok()?;
    // SAFETY: getpwnam_r with our own buffers; the result points into them.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        let r = libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut out);
        (r == 0 && !out.is_null()).then_some((pw.pw_uid, pw.pw_gid))
    }
}

/// A server started as root serves files as its `user` (www-data): every
/// existing directory above the document root must let that user through,
/// or every request would get a 403 — an error now, naming the directory,
/// rather than a run of failed requests.
fn check_reachable(
    spec: &ServiceSpec,
    user: &str,
    document_root: &Path,
) -> Result<(), ServiceError> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        // Not root: the workers run as this user, who made the directories.
        return Ok(());
    }
    let Some((uid, gid)) = user_ids(user) else {
        return Err(ServiceError::Spec {
            service: spec.name.clone(),
            key: "vars.user".into(),
            message: format!("user `{user}` does not exist on host `{}`", spec.host),
        });
    };
    for dir in document_root.ancestors().skip(1) {
        let Ok(m) = fs::metadata(dir) else { continue };
        let mode = m.mode();
        let through = if m.uid() == uid {
            mode & 0o100 != 0
        } else if m.gid() == gid {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        };
        if !through {
            let key = if spec.document_root.is_some() {
                "document_root"
            } else {
                "scratch"
            };
            return Err(ServiceError::Spec {
                service: spec.name.clone(),
                key: key.into(),
                message: format!(
                    "{} (mode {:04o}) does not let the server's user `{user}` through to {}: every request would be refused; choose a place under a directory others may enter (such as /tmp or /srv)",
                    dir.display(),
                    mode & 0o7777,
                    document_root.display()
                ),
            });
        }
    }
    Ok(())
}

/// benchlab's variables, then the study's `vars` over the defaults.
fn variables(
    spec: &ServiceSpec,
    listen: SocketAddr,
    scratch: &Path,
    document_root: &Path,
    config_file: Option<&Path>,
) -> BTreeMap<String, String> {
    let s = |p: &Path| p.display().to_string();
    let workers = spec
        .cpus
        .as_ref()
        .map(|c| c.len())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut vars: BTreeMap<String, String> = [
        ("port", listen.port().to_string()),
        ("bind", spec.bind.to_string()),
        // `[::1]:8080` for IPv6: the form both nginx and apache2 take.
        ("listen", listen.to_string()),
        ("scratch", s(scratch)),
        ("document_root", s(document_root)),
        ("workers", workers.to_string()),
        ("user", "www-data".into()),
        ("group", "www-data".into()),
        ("modules", "/usr/lib/apache2/modules".into()),
        ("access_log", s(&scratch.join("access.log"))),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if let Some(c) = config_file {
        vars.insert("config".into(), s(c));
    }
    vars.extend(spec.vars.clone());
    vars
}

/// The variables of `kind = "rabbitmq"` ([`crate::spec::RABBITMQ_VARS`]):
/// the user's name, and free ports on the bind address for epmd and the
/// Erlang distribution unless the study's `vars` pin them (then they
/// are checked free).
fn kind_variables(
    spec: &ServiceSpec,
    listen: SocketAddr,
) -> Result<Vec<(String, String)>, ServiceError> {
    if spec.kind != ServiceKind::Rabbitmq {
        return Ok(Vec::new());
    }
    let mut out = vec![("amqp_user".to_string(), "benchlab".to_string())];
    // Held open until all are picked, so that two picks differ.
    let mut held = Vec::new();
    for key in ["epmd_port", "dist_port"] {
        let want = match spec.vars.get(key) {
            None => 0,
            Some(v) => match v.parse::<u16>() {
                Ok(p) if p != 0 && p != listen.port() => p,
                _ => {
                    return Err(ServiceError::Spec {
                        service: spec.name.clone(),
                        key: format!("vars.{key}"),
                        message: format!(
                            "`{v}` is not a port from 1 to 65535 other than the AMQP port {}",
                            listen.port()
                        ),
                    })
                }
            },
        };
        let l = match TcpListener::bind((spec.bind, want)) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                return Err(ServiceError::Spec {
                    service: spec.name.clone(),
                    key: format!("vars.{key}"),
                    message: format!(
                        "port {want} is already in use on {} (another epmd or Erlang node?): choose another, or leave it out to have a free one picked",
                        spec.bind
                    ),
                })
            }
            Err(source) => {
                return Err(ServiceError::Io {
                    service: spec.name.clone(),
                    context: format!("bind {}:{want} for {key}", spec.bind),
                    source,
                })
            }
        };
        let port = l.local_addr().map(|a| a.port()).unwrap_or(want);
        held.push(l);
        out.push((key.to_string(), port.to_string()));
    }
    Ok(out)
}

/// Single-quotes a word for `sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// How benchlab runs RabbitMQ: `sh -c SCRIPT`, where the script makes the
/// broker's directories in the scratch directory, writes the environment
/// (also to `rabbitmq-env.sh`, and a `rabbitmqctl` wrapper that uses it
/// and forbids every Erlang VM it starts to daemonise an epmd: the CLI's
/// epmd check starts one whenever the broker's is gone, and a daemonised
/// epmd outlives the service),
/// starts epmd in the foreground *in the service's process group* — so
/// that a stop, or `benchlab restore` after a SIGKILL, ends it with the
/// broker (a daemonised epmd, as Erlang starts by itself, would outlive
/// both; `-start_epmd false` forbids that) — waits until epmd answers,
/// then execs rabbitmq-server. Every path Debian's scripts would read
/// under /etc/rabbitmq points into the scratch directory instead. No
/// secret is in the script: the password is only in the 0600 config.
fn rabbitmq_argv(
    program: &str,
    config: &Path,
    scratch: &Path,
    vars: &BTreeMap<String, String>,
) -> Vec<String> {
    let d = scratch.display().to_string();
    let q = |s: &str| sh_quote(s);
    let sub = |name: &str| q(&format!("{d}/{name}"));
    let bind = &vars["bind"];
    let tuple = format!("{{{}}}", bind.replace('.', ","));
    let (epmd, dist, workers) = (&vars["epmd_port"], &vars["dist_port"], &vars["workers"]);
    let env: Vec<(&str, String)> = vec![
        ("HOME", sub("home")),
        ("RABBITMQ_NODENAME", q(&format!("rabbit@{bind}"))),
        ("RABBITMQ_USE_LONGNAME", "true".into()),
        ("RABBITMQ_CONFIG_FILE", q(&config.display().to_string())),
        ("RABBITMQ_CONFIG_FILES", sub("conf.d")),
        ("RABBITMQ_ADVANCED_CONFIG_FILE", sub("advanced.config")),
        ("RABBITMQ_CONF_ENV_FILE", sub("rabbitmq-env.conf")),
        ("RABBITMQ_MNESIA_BASE", sub("mnesia")),
        ("RABBITMQ_LOG_BASE", sub("log")),
        ("RABBITMQ_ENABLED_PLUGINS_FILE", sub("enabled_plugins")),
        ("RABBITMQ_NODE_IP_ADDRESS", q(bind)),
        ("RABBITMQ_NODE_PORT", q(&vars["port"])),
        ("RABBITMQ_DIST_PORT", q(dist)),
        // Makes Debian's `rabbitmq-server` script `exec` the Erlang VM
        // instead of running it in the background behind `wait || true`:
        // the service's process is then the VM itself, so a killed broker
        // reads "killed by signal 9", not "exited with code 0". The script
        // reads this variable for that choice only (RabbitMQ 3.10's
        // `sbin/rabbitmq-server`); `-noinput` stays, and SIGTERM still
        // stops the VM gracefully.
        ("RUNNING_UNDER_SYSTEMD", "true".into()),
        ("ERL_EPMD_ADDRESS", q(bind)),
        ("ERL_EPMD_PORT", q(epmd)),
        (
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
            q(&format!(
                "-start_epmd false -kernel inet_dist_use_interface {tuple} +S {workers}:{workers}"
            )),
        ),
        (
            "RABBITMQ_CTL_ERL_ARGS",
            q(&format!(
                "-start_epmd false -kernel inet_dist_use_interface {tuple}"
            )),
        ),
    ];
    let exports = env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    let script = format!(
        "set -e\n\
         mkdir -p {home} {mnesia} {log}\n\
         echo '[].' > {plugins}\n\
         printf '%s\\n' {export_line} > {envfile}\n\
         printf '#!/bin/sh\\n. %s\\nERL_FLAGS=\"-start_epmd false\" exec /usr/lib/rabbitmq/bin/rabbitmqctl \"$@\"\\n' {envfile} > {ctl}\n\
         chmod 0700 {ctl}\n\
         export {exports}\n\
         /usr/bin/epmd -address {bind_q} -port {epmd_q} &\n\
         i=0\n\
         until /usr/bin/epmd -port {epmd_q} -names >/dev/null 2>&1; do\n\
         i=$((i+1)); [ $i -lt 200 ] || {{ echo 'benchlab: epmd did not start' >&2; exit 1; }}; sleep 0.05\n\
         done\n\
         exec {program}\n",
        home = sub("home"),
        mnesia = sub("mnesia"),
        log = sub("log"),
        plugins = sub("enabled_plugins"),
        export_line = q(&format!("export {exports}")),
        envfile = sub("rabbitmq-env.sh"),
        ctl = sub("rabbitmqctl"),
        bind_q = q(bind),
        epmd_q = q(epmd),
        program = q(program),
    );
    vec!["/bin/sh".into(), "-c".into(), script, "rabbitmq".into()]
}

/// How benchlab runs nginx and apache2: in the foreground, every path in
/// the scratch directory (nginx's `-e` keeps even its start-up errors out
/// of /var/log).
fn server_argv(kind: ServiceKind, program: &str, config: &Path, scratch: &Path) -> Vec<String> {
    let s = |p: &Path| p.display().to_string();
    match kind {
        ServiceKind::Nginx => vec![
            program.into(),
            "-c".into(),
            s(config),
            "-p".into(),
            format!("{}/", scratch.display()),
            "-e".into(),
            s(&scratch.join("error.log")),
        ],
        _ => vec![
            program.into(),
            "-f".into(),
            s(config),
            "-d".into(),
            s(scratch),
            "-DFOREGROUND".into(),
        ],
    }
}

fn render_argv(
    spec: &ServiceSpec,
    vars: &BTreeMap<String, String>,
) -> Result<Vec<String>, ServiceError> {
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
}

fn is_executable(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds a program: a path as given, else on the PATH and in the sbin
/// directories (an agent's PATH may lack them; nginx and apache2 live
/// there).
pub(crate) fn find_program(spec: &ServiceSpec, program: &str) -> Result<PathBuf, ServiceError> {
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

/// RabbitMQ's version, from its installed release directory
/// (`rabbitmq_server-3.10.8`), and Erlang/OTP's: asking the broker needs
/// it running, and this is known before the start.
fn rabbitmq_version(program: &Path) -> Option<String> {
    let lib = program.parent()?.parent()?.join("lib");
    let rabbit = fs::read_dir(lib)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("rabbitmq_server-")
                .map(str::to_string)
        })
        .max()?;
    let otp = fs::read_dir("/usr/lib/erlang/releases")
        .ok()
        .and_then(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| fs::read_to_string(e.path().join("OTP_VERSION")).ok())
                .map(|v| v.trim().to_string())
                .max()
        });
    Some(match otp {
        Some(o) => format!("RabbitMQ {rabbit} (Erlang/OTP {o})"),
        None => format!("RabbitMQ {rabbit}"),
    })
}

/// The server's version line, from `nginx -v` / `apache2 -v`.
fn version_of(kind: ServiceKind, program: &Path) -> Option<String> {
    if crate::samba::is(kind) {
        return crate::samba::version(program);
    }
    if kind == ServiceKind::Rabbitmq {
        return rabbitmq_version(program);
    }
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
        ServiceKind::Command | ServiceKind::Samba | ServiceKind::Rabbitmq => return None,
    };
    text.lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .map(|v| v.trim().to_string())
}

/// The CPUs a service may be placed on: the host's online CPUs. Not this
/// thread's affinity — an agent started under `taskset` may still place a
/// server elsewhere; a cgroup that forbids a CPU makes the child's
/// `sched_setaffinity` fail, which the start reports.
fn allowed_cpus() -> Vec<usize> {
    if let Some(online) = fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| benchlab_core::placement::parse_cpu_list(t.trim()).ok())
    {
        return online;
    }
    // Without /sys: the CPUs this thread may use.
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
            "CPU {} not online on host `{}` (online: {})",
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
pub(crate) enum Root {
    /// In the scratch directory.
    InScratch,
    /// At the user's path, which does not exist yet.
    Create(PathBuf),
    /// At the user's path, a directory benchlab made before (it holds the
    /// marker): benchlab's, so it is journaled and removed as such.
    Ours(PathBuf),
    /// On a file system benchlab makes in an image of the scratch
    /// directory; the document root in the scratch directory is a
    /// symbolic link to its directory.
    Image(crate::spec::DocumentFs),
}

fn check_root(spec: &ServiceSpec) -> Result<Root, ServiceError> {
    if let Some(fs) = &spec.document_fs {
        return Ok(Root::Image(fs.clone()));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_server_names_its_debian_package() {
        let spec: ServiceSpec = serde_json::from_str(r#"{"name":"web","kind":"apache2"}"#).unwrap();
        let e = find_program(&spec, "benchlab-no-such-apache2").unwrap_err();
        assert_eq!(
            e.to_string(),
            "service `web`: benchlab-no-such-apache2 is not installed (no `benchlab-no-such-apache2` in PATH or the sbin directories): install the Debian package `apache2` (apt-get install apache2)"
        );
    }
}
