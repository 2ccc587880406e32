//! What a study says about a service (`[[service]]`), and the plan the
//! controller makes of it before anything starts.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};

use crate::{template, ServiceError};

/// The templates shipped with benchlab (`services/` at the repository
/// root), compiled in so that a copied binary has them.
pub const SHIPPED: &[(&str, &str)] = &[
    ("nginx", include_str!("../../../services/nginx.conf")),
    ("apache2", include_str!("../../../services/apache2.conf")),
    ("smb", include_str!("../../../services/smb.conf")),
    ("rabbitmq", include_str!("../../../services/rabbitmq.conf")),
];

/// Variables benchlab always sets itself; a study cannot override them.
pub const RESERVED_VARS: &[&str] = &[
    "port",
    "bind",
    "listen",
    "scratch",
    "document_root",
    "config",
];

/// Variables benchlab sets with a default that a study's `vars` may
/// override.
pub const DEFAULT_VARS: &[&str] = &["workers", "user", "group", "modules", "access_log"];

/// Default readiness timeout (s): nginx and apache2 answer in well under
/// a second here; RabbitMQ (later) takes ≈15 s.
pub const DEFAULT_READY_TIMEOUT_S: f64 = 30.0;
/// Default grace between SIGTERM and SIGKILL (s).
pub const DEFAULT_STOP_TIMEOUT_S: f64 = 10.0;
/// Default host: the controller's own machine.
pub const DEFAULT_HOST: &str = "local";

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceKind {
    /// Debian's nginx, run as `nginx -c CONF -p SCRATCH/ -e SCRATCH/error.log`
    /// with `daemon off; master_process on;`.
    Nginx,
    /// Debian's apache2, run as `apache2 -f CONF -d SCRATCH -DFOREGROUND`.
    Apache2,
    /// Any program (`argv`), run in the foreground.
    Command,
    /// Debian's Samba file server, run as `smbd --foreground
    /// --no-process-group -s CONF` with its test user in a tdbsam database
    /// of the scratch directory (see [`crate::samba`]).
    Samba,
    /// Debian's RabbitMQ, run from `/usr/lib/rabbitmq/bin` as a plain
    /// process with its own epmd (see [`RABBITMQ_VARS`]).
    Rabbitmq,
}

/// Variables benchlab sets for `kind = "rabbitmq"` (a study's `vars` may
/// override them): the broker's user, and the ports of its epmd and of its
/// Erlang distribution (picked free at start), all bound to `bind` only.
pub const RABBITMQ_VARS: &[&str] = &["amqp_user", "epmd_port", "dist_port"];

impl ServiceKind {
    /// Lower-case name, as in study files.
    pub fn name(self) -> &'static str {
        match self {
            ServiceKind::Nginx => "nginx",
            ServiceKind::Apache2 => "apache2",
            ServiceKind::Command => "command",
            ServiceKind::Samba => "samba",
            ServiceKind::Rabbitmq => "rabbitmq",
        }
    }

    /// Variables this kind's start sets besides [`RESERVED_VARS`] and
    /// [`DEFAULT_VARS`].
    pub fn own_vars(self) -> &'static [&'static str] {
        match self {
            ServiceKind::Rabbitmq => RABBITMQ_VARS,
            _ => &[],
        }
    }

    /// The server's program and the Debian package that installs it.
    pub fn program(self) -> Option<(&'static str, &'static str)> {
        match self {
            ServiceKind::Nginx => Some(("nginx", "nginx")),
            ServiceKind::Apache2 => Some(("apache2", "apache2")),
            // Not /usr/sbin's wrapper, which switches to the rabbitmq
            // user and /var/lib/rabbitmq.
            ServiceKind::Rabbitmq => {
                Some(("/usr/lib/rabbitmq/bin/rabbitmq-server", "rabbitmq-server"))
            }
            ServiceKind::Command => None,
            ServiceKind::Samba => Some(("smbd", "samba")),
        }
    }

    /// The readiness probe used when `probe` is not given: a listening
    /// socket is not a serving smbd or a booted broker, so Samba is probed
    /// with an SMB negotiate and RabbitMQ with the AMQP header; the others
    /// with a connection.
    pub fn default_probe(self) -> Probe {
        match self {
            ServiceKind::Samba => Probe::Smb,
            ServiceKind::Rabbitmq => Probe::Amqp,
            ServiceKind::Nginx | ServiceKind::Apache2 | ServiceKind::Command => Probe::Tcp,
        }
    }

    /// For a kind whose user benchlab creates (RabbitMQ's broker user,
    /// Samba's test user): the environment variable its `password` secret
    /// comes from when the study names none. It is the one the kind's
    /// workloads read by default (`password_env`), and `benchlab run`
    /// fills it with a generated password when it is unset, so that a
    /// study needs no secret of its own.
    pub fn password_env(self) -> Option<&'static str> {
        match self {
            ServiceKind::Rabbitmq => Some("BENCHLAB_MQ_PASSWORD"),
            ServiceKind::Samba => Some("BENCHLAB_SMB_PASSWORD"),
            _ => None,
        }
    }

    /// The shipped template used when `config` is not given.
    pub fn default_template(self) -> Option<&'static str> {
        match self {
            ServiceKind::Nginx => Some("nginx"),
            ServiceKind::Apache2 => Some("apache2"),
            ServiceKind::Rabbitmq => Some("rabbitmq"),
            ServiceKind::Command => None,
            ServiceKind::Samba => Some("smb"),
        }
    }
}

impl fmt::Display for ServiceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// When the service is restarted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Restart {
    /// Started once per configuration, stopped at its end.
    #[default]
    Never,
    /// Restarted before every point (Mindcraft restarted the servers
    /// before each test).
    Point,
}

/// How benchlab knows the server is ready.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Probe {
    /// A TCP connection to the port is accepted (`probe = "tcp"`).
    #[default]
    Tcp,
    /// An HTTP/1.0 `GET` of this path gets an answer below 500
    /// (`probe = { http = "/" }`).
    Http(String),
    /// The server answers the AMQP 0-9-1 protocol header with
    /// `connection.start` (`probe = "amqp"`): a broker past its boot.
    Amqp,
    /// The server answers an SMB negotiate request with a valid SMB1 or
    /// SMB2 negotiate response (`probe = "smb"`): a file server whose
    /// protocol engine is up, not just its socket. `kind = "samba"` is
    /// always probed so.
    Smb,
}

/// Where a secret comes from; resolved on the service's host when the
/// service starts, never stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretSource {
    /// An environment variable (`{ env = "VAR" }`).
    Env(String),
    /// The content of a file, without its trailing newline
    /// (`{ file = "path" }`).
    File(PathBuf),
}

/// One `[[service]]` of a study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceSpec {
    /// Its name, used by workloads (`service = "web"`).
    pub name: String,
    /// Which server.
    pub kind: ServiceKind,
    /// The study's name of the host it runs on (the engine routes the
    /// start to that host's agent).
    #[serde(default = "default_host")]
    pub host: String,
    /// The address it listens on.
    #[serde(default = "default_bind")]
    pub bind: IpAddr,
    /// Its port; 0: a free port picked at start.
    #[serde(default)]
    pub port: u16,
    /// A shipped template (`nginx`, `apache2`) or the path of the user's
    /// own (relative paths: from the study file's directory). Default:
    /// the kind's shipped template; a command has none unless given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// Extra template variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, String>,
    /// CPUs the server's processes may run on (`"0"`, `"0-1"`, `[0, 1]`);
    /// none: wherever the scheduler puts them.
    #[serde(
        default,
        deserialize_with = "cpu_list",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpus: Option<Vec<usize>>,
    /// When it is restarted.
    #[serde(default)]
    pub restart: Restart,
    /// How long it may take to become ready (s).
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout_s: f64,
    /// How long it may take to stop after SIGTERM before SIGKILL (s).
    #[serde(default = "default_stop_timeout")]
    pub stop_timeout_s: f64,
    /// The readiness probe; none given: the kind's own
    /// ([`ServiceKind::default_probe`]). Kept optional so that an explicit
    /// choice can be told from the default and honoured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    /// For `kind = "command"`: the program and its arguments (template
    /// variables allowed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// Where the served files go (absolute; must not exist yet, or be one
    /// benchlab made). Default: a directory in the scratch directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_root: Option<PathBuf>,
    /// Secrets by template-variable name: `{ env = "VAR" }` or
    /// `{ file = "path" }`. Only where they come from is kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, SecretSource>,
    /// A file system benchlab makes for the document root (a Samba
    /// share's directory): an image in the scratch directory, formatted
    /// and mounted as fs.matrix's targets are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_fs: Option<DocumentFs>,
}

/// `document_fs = { mkfs = "xfs", image_size = "1GiB", mount_options =
/// "noatime" }`: the document root on a file system of its own, made in
/// an image file of the scratch directory (fs.matrix's targets: loop
/// device with direct I/O, `mkfs`, `mount -o`), unmounted and removed
/// when the service stops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentFs {
    /// `ext4` or `xfs`.
    pub mkfs: String,
    /// The image's size in bytes (`"1GiB"` or a number).
    #[serde(deserialize_with = "size")]
    pub image_size: u64,
    /// Extra mkfs arguments.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mkfs_options: String,
    /// `mount -o` options.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mount_options: String,
}

/// File systems `document_fs` can make.
pub const DOCUMENT_FS: &[&str] = &["ext4", "xfs"];

/// A size: bytes, or a string with a unit (`"64MiB"`).
fn size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a size in bytes (a number, or a string such as \"1GiB\")")
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::custom(format!("{v} is not a size")))
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<u64, E> {
            benchlab_core::units::parse_size(s).map_err(E::custom)
        }
    }
    d.deserialize_any(V)
}

fn default_host() -> String {
    DEFAULT_HOST.into()
}
fn default_bind() -> IpAddr {
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}
fn default_ready_timeout() -> f64 {
    DEFAULT_READY_TIMEOUT_S
}
fn default_stop_timeout() -> f64 {
    DEFAULT_STOP_TIMEOUT_S
}

/// `cpus` as a CPU-list string or an array of CPU numbers.
fn cpu_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<usize>>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<Vec<usize>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a CPU list such as \"0\", \"0-1\" or [0, 1]")
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
            benchlab_core::placement::parse_cpu_list(s)
                .map(Some)
                .map_err(E::custom)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut a: A,
        ) -> Result<Self::Value, A::Error> {
            let mut v: Vec<usize> = Vec::new();
            while let Some(c) = a.next_element::<usize>()? {
                v.push(c);
            }
            if v.is_empty() {
                return Err(serde::de::Error::custom("the CPU list is empty"));
            }
            v.sort_unstable();
            v.dedup();
            Ok(Some(v))
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(V)
        }
    }
    d.deserialize_any(V)
}

/// A configuration template, read on the controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Template {
    /// Where it came from: `services/nginx.conf` (shipped) or the user's
    /// path.
    pub origin: String,
    /// The file name it gets in the scratch directory.
    pub file_name: String,
    /// Its text.
    pub text: String,
}

/// A service ready to be started: the spec, checked, with its template
/// read. This is what the controller sends to the service host's agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServicePlan {
    /// The spec (secrets only by where they come from).
    pub spec: ServiceSpec,
    /// The configuration template; `None` for a command without one.
    pub template: Option<Template>,
    /// The data address of each study host that `argv` or the template
    /// names (`{{host.NAME}}`), by the study's host name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, String>,
}

fn is_identifier(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl ServiceSpec {
    fn err(&self, key: &str, message: impl Into<String>) -> ServiceError {
        ServiceError::Spec {
            service: self.name.clone(),
            key: key.into(),
            message: message.into(),
        }
    }

    /// Checks every key on its own and against the others.
    pub fn validate(&self) -> Result<(), ServiceError> {
        if self.name.is_empty()
            || self.name.len() > 64
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(self.err("name", "must be 1 to 64 letters, digits, `-`, `_` or `.`"));
        }
        if self.host.is_empty() {
            return Err(self.err("host", "must name one of the study's hosts"));
        }
        match self.kind {
            ServiceKind::Command if self.argv.is_empty() => {
                return Err(self.err(
                    "argv",
                    "kind = \"command\" needs argv = [\"program\", \"arg\", …]",
                ))
            }
            ServiceKind::Command => {}
            k if !self.argv.is_empty() => {
                return Err(self.err(
                    "argv",
                    format!("is only for kind = \"command\"; benchlab runs {k} itself"),
                ))
            }
            _ => {}
        }
        if self.kind == ServiceKind::Rabbitmq && !self.bind.is_ipv4() {
            return Err(self.err(
                "bind",
                format!("{}: kind = \"rabbitmq\" takes an IPv4 address (its epmd and Erlang distribution are bound to it)", self.bind),
            ));
        }
        for (key, v) in [
            ("ready_timeout_s", self.ready_timeout_s),
            ("stop_timeout_s", self.stop_timeout_s),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 3600.0) {
                return Err(self.err(key, format!("{v} is not a time from 0 to 3600 s")));
            }
        }
        if let Some(Probe::Http(path)) = &self.probe {
            if !path.starts_with('/') || path.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(self.err(
                    "probe",
                    format!("http path `{path}` must start with `/` and hold no spaces"),
                ));
            }
        }
        for name in self.vars.keys() {
            if !is_identifier(name) {
                return Err(self.err(
                    "vars",
                    format!("`{name}` is not a variable name (letters, digits and _)"),
                ));
            }
            if RESERVED_VARS.contains(&name.as_str()) {
                return Err(self.err(
                    "vars",
                    format!(
                        "`{name}` is set by benchlab (it sets {}); use the service's own key instead",
                        RESERVED_VARS.join(", ")
                    ),
                ));
            }
        }
        for (name, src) in &self.secrets {
            if !is_identifier(name) || RESERVED_VARS.contains(&name.as_str()) {
                return Err(self.err(
                    "secrets",
                    format!("`{name}` is not a free variable name (letters, digits and _; not one of {})", RESERVED_VARS.join(", ")),
                ));
            }
            if self.vars.contains_key(name)
                || DEFAULT_VARS.contains(&name.as_str())
                || self.kind.own_vars().contains(&name.as_str())
            {
                return Err(self.err(
                    "secrets",
                    format!("`{name}` is also a plain variable: a secret needs a name of its own"),
                ));
            }
            match src {
                SecretSource::Env(v) if v.is_empty() || v.contains('=') => {
                    return Err(self.err(
                        &format!("secrets.{name}.env"),
                        "must name an environment variable",
                    ))
                }
                SecretSource::File(p) if !p.is_absolute() => {
                    return Err(self.err(
                        &format!("secrets.{name}.file"),
                        format!(
                        "{} is not an absolute path (the plan makes study-relative paths absolute)",
                        p.display()
                    ),
                    ))
                }
                _ => {}
            }
        }
        if let Some(d) = &self.document_root {
            if !d.is_absolute() {
                return Err(self.err(
                    "document_root",
                    format!("{} is not an absolute path", d.display()),
                ));
            }
        }
        if self.cpus.as_ref().is_some_and(|c| c.is_empty()) {
            return Err(self.err("cpus", "the CPU list is empty"));
        }
        if self.kind == ServiceKind::Samba {
            crate::samba::validate(self).map_err(|(key, m)| self.err(&key, m))?;
        }
        if let Some(fs) = &self.document_fs {
            if self.document_root.is_some() {
                return Err(self.err(
                    "document_fs",
                    "give either document_root (a directory) or document_fs (a file system benchlab makes), not both",
                ));
            }
            if !DOCUMENT_FS.contains(&fs.mkfs.as_str()) {
                return Err(self.err(
                    "document_fs.mkfs",
                    format!("`{}` is not one of {}", fs.mkfs, DOCUMENT_FS.join(", ")),
                ));
            }
            // mkfs.xfs refuses file systems under 300 MiB.
            let least: u64 = if fs.mkfs == "xfs" {
                300 << 20
            } else {
                16 << 20
            };
            if fs.image_size < least {
                return Err(self.err(
                    "document_fs.image_size",
                    format!(
                        "{} bytes is too small for {} (at least {} MiB)",
                        fs.image_size,
                        fs.mkfs,
                        least >> 20
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether benchlab or the study sets variable `name` (its value may
    /// only be known at start).
    pub fn sets(&self, name: &str) -> bool {
        RESERVED_VARS.contains(&name)
            || DEFAULT_VARS.contains(&name)
            || self.kind.own_vars().contains(&name)
            || self.vars.contains_key(name)
            || self.secrets.contains_key(name)
    }

    /// The readiness probe: the one given, else the kind's default.
    pub fn probe(&self) -> Probe {
        self.probe
            .clone()
            .unwrap_or_else(|| self.kind.default_probe())
    }

    /// Checks the spec, reads its template (`base_dir`: the study file's
    /// directory, for relative paths) and checks that every variable the
    /// template and `argv` use is set — all before anything starts. A
    /// `{{host.NAME}}` is set by [`ServiceSpec::plan_with`] only.
    pub fn plan(&self, base_dir: &Path) -> Result<ServicePlan, ServiceError> {
        self.plan_with(base_dir, &mut |_| None)
    }

    /// [`ServiceSpec::plan`], with `address` giving the data address of a
    /// study host that `argv` or the template names (`{{host.NAME}}`);
    /// `None`: it has none, which the variable check reports.
    pub fn plan_with(
        &self,
        base_dir: &Path,
        address: &mut dyn FnMut(&str) -> Option<String>,
    ) -> Result<ServicePlan, ServiceError> {
        let mut spec = self.clone();
        if let Some(var) = spec.kind.password_env() {
            spec.secrets
                .entry("password".into())
                .or_insert_with(|| SecretSource::Env(var.into()));
        }
        for src in spec.secrets.values_mut() {
            if let SecretSource::File(p) = src {
                if p.is_relative() {
                    *p = base_dir.join(&*p);
                }
            }
        }
        spec.validate()?;
        spec.probe = Some(spec.probe());
        let template = match spec.config.as_deref().or(spec.kind.default_template()) {
            None => None,
            Some(name) => Some(match SHIPPED.iter().find(|(n, _)| *n == name) {
                Some((n, text)) => Template {
                    origin: format!("services/{n}.conf"),
                    file_name: format!("{n}.conf"),
                    text: text.to_string(),
                },
                None => {
                    let path = base_dir.join(name);
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        spec.err(
                            "config",
                            format!(
                                "cannot read {} ({e}); a shipped template is one of: {}",
                                path.display(),
                                SHIPPED
                                    .iter()
                                    .map(|(n, _)| *n)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )
                    })?;
                    Template {
                        origin: path.display().to_string(),
                        file_name: path
                            .file_name()
                            .map(|f| f.to_string_lossy().into_owned())
                            .unwrap_or_else(|| "service.conf".into()),
                        text,
                    }
                }
            }),
        };
        let mut named: Vec<String> = spec.argv.iter().flat_map(|a| template::hosts(a)).collect();
        if let Some(t) = &template {
            named.extend(template::hosts(&t.text));
        }
        let mut hosts = BTreeMap::new();
        for h in named {
            if let Some(a) = address(&h) {
                hosts.insert(h, a);
            }
        }
        let plan = ServicePlan {
            spec,
            template,
            hosts,
        };
        plan.check_variables()?;
        Ok(plan)
    }
}

impl ServicePlan {
    /// Checks that every variable of the template and `argv` is set, and
    /// what the kind needs of a template.
    pub fn check_variables(&self) -> Result<(), ServiceError> {
        let spec = &self.spec;
        // `config` (the rendered file's path) exists only with a template.
        let known = |n: &str| match n.strip_prefix(template::HOST_PREFIX) {
            Some(h) => self.hosts.contains_key(h),
            None => spec.sets(n) && (n != "config" || self.template.is_some()),
        };
        if let Some(t) = &self.template {
            let terr = |message: String| ServiceError::Template {
                service: spec.name.clone(),
                template: t.origin.clone(),
                message,
            };
            let uses = template::uses(&t.text).map_err(terr)?;
            if let Some(missing) = template::unset(&uses, known) {
                return Err(terr(format!(
                    "variable(s) not set: {missing}; benchlab sets {} and {}; add others to the service's `vars`{}",
                    RESERVED_VARS.join(", "),
                    DEFAULT_VARS.join(", "),
                    host_hint(&uses, known)
                )));
            }
            if spec.kind == ServiceKind::Nginx && !says_daemon_off(&t.text) {
                return Err(terr(
                    "an nginx configuration must say `daemon off;`: benchlab runs the server as a foreground process in a process group of its own (a daemon would leave it)".into(),
                ));
            }
        }
        for (i, a) in spec.argv.iter().enumerate() {
            let aerr = |message: String| ServiceError::Spec {
                service: spec.name.clone(),
                key: format!("argv[{i}]"),
                message,
            };
            let uses = template::uses(a).map_err(aerr)?;
            if let Some(missing) = template::unset(&uses, known) {
                return Err(aerr(format!(
                    "variable(s) not set: {missing}{}",
                    host_hint(&uses, known)
                )));
            }
        }
        Ok(())
    }
}

/// What an unset variable's error adds when one is a `{{host.NAME}}`.
fn host_hint(uses: &[template::Use], known: impl Fn(&str) -> bool) -> &'static str {
    if uses
        .iter()
        .any(|u| u.name.starts_with(template::HOST_PREFIX) && !known(&u.name))
    {
        " ({{host.NAME}} is the data address of the study's host NAME, set when that host has one)"
    } else {
        ""
    }
}

/// Whether an nginx configuration has `daemon off;` outside comments.
fn says_daemon_off(text: &str) -> bool {
    text.lines().any(|l| {
        let code = l.split('#').next().unwrap_or("");
        let words: Vec<&str> = code
            .split(|c: char| c.is_whitespace() || c == ';')
            .filter(|w| !w.is_empty())
            .collect();
        words.windows(2).any(|w| w == ["daemon", "off"])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ServiceSpec, String> {
        toml::from_str::<ServiceSpec>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_minimal_table_gets_the_defaults() {
        let s = parse("name = \"web\"\nkind = \"nginx\"\n").unwrap();
        assert_eq!(s.host, "local");
        assert_eq!(s.bind, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(s.port, 0);
        assert_eq!(s.probe, None);
        assert_eq!(s.probe(), Probe::Tcp);
        assert_eq!(s.restart, Restart::Never);
        assert_eq!(s.ready_timeout_s, DEFAULT_READY_TIMEOUT_S);
        s.validate().unwrap();
        let plan = s.plan(Path::new("/nonexistent")).unwrap();
        assert_eq!(plan.template.unwrap().origin, "services/nginx.conf");
    }

    #[test]
    fn every_key_parses() {
        let s = parse(
            r#"
            name = "web"
            kind = "command"
            host = "srv"
            bind = "::1"
            port = 8080
            vars = { threads = "4" }
            cpus = "0-1"
            restart = "point"
            ready_timeout_s = 5
            stop_timeout_s = 2.5
            probe = { http = "/index.html" }
            argv = ["/bin/server", "--port", "{{port}}", "--threads", "{{threads}}"]
            document_root = "/srv/bench"
            secrets = { password = { env = "PW" }, key = { file = "key.txt" } }
            "#,
        )
        .unwrap();
        assert_eq!(s.cpus, Some(vec![0, 1]));
        assert_eq!(s.probe, Some(Probe::Http("/index.html".into())));
        assert_eq!(s.restart, Restart::Point);
        assert_eq!(s.secrets["password"], SecretSource::Env("PW".into()));
        let plan = s.plan(Path::new("/study")).unwrap();
        assert_eq!(
            plan.spec.secrets["key"],
            SecretSource::File("/study/key.txt".into())
        );
        assert!(plan.template.is_none());
        assert_eq!(
            parse("name='a'\nkind='nginx'\ncpus=[1,0,1]").unwrap().cpus,
            Some(vec![0, 1])
        );
    }

    #[test]
    fn secrets_serialize_only_where_they_come_from() {
        let s = parse("name='a'\nkind='nginx'\nsecrets = { pw = { env = 'PW' } }").unwrap();
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains(r#""secrets":{"pw":{"env":"PW"}}"#), "{json}");
    }

    #[test]
    fn bad_tables_name_the_key_and_what_is_allowed() {
        let e = parse("name='a'\nkind='lighttpd'").unwrap_err();
        assert!(
            e.contains("unknown variant `lighttpd`") && e.contains("nginx"),
            "{e}"
        );
        let e = parse("name='a'\nkind='nginx'\nprot=1").unwrap_err();
        assert!(e.contains("unknown field `prot`"), "{e}");
        let e = parse("name='a'\nkind='nginx'\ncpus='2-1'").unwrap_err();
        assert!(e.contains("not a CPU list"), "{e}");
        let e = parse("name='a'\nkind='nginx'\nprobe='udp'").unwrap_err();
        assert!(e.contains("udp"), "{e}");

        let check = |text: &str| {
            parse(text)
                .unwrap()
                .plan(Path::new("/nonexistent"))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            check("name='a'\nkind='command'"),
            "service `a`: argv: kind = \"command\" needs argv = [\"program\", \"arg\", …]"
        );
        assert!(check("name='a'\nkind='nginx'\nargv=['x']")
            .contains("argv: is only for kind = \"command\""));
        assert!(check("name='a b'\nkind='nginx'").contains("name: must be"));
        assert!(check("name='a'\nkind='nginx'\nready_timeout_s=0")
            .contains("ready_timeout_s: 0 is not a time"));
        assert!(check("name='a'\nkind='nginx'\nprobe={http='x'}").contains("probe: http path `x`"));
        assert!(check("name='a'\nkind='nginx'\nvars={port='1'}")
            .contains("vars: `port` is set by benchlab"));
        assert!(check("name='a'\nkind='nginx'\ndocument_root='www'")
            .contains("document_root: www is not an absolute path"));
        assert!(
            check("name='a'\nkind='nginx'\nvars={pw='1'}\nsecrets={pw={env='X'}}")
                .contains("secrets: `pw` is also a plain variable")
        );
        let e = check("name='a'\nkind='nginx'\nconfig='my.conf'");
        assert!(
            e.starts_with("service `a`: config: cannot read /nonexistent/my.conf")
                && e.contains("nginx, apache2"),
            "{e}"
        );
    }

    #[test]
    fn rabbitmq_has_a_password_secret_and_an_ipv4_address() {
        let check = |text: &str| {
            parse(text)
                .unwrap()
                .plan(Path::new("/nonexistent"))
                .map(drop)
                .map_err(|e| e.to_string())
        };
        // Without a password secret: the one `benchlab run` generates.
        let plan = parse("name='mq'\nkind='rabbitmq'")
            .unwrap()
            .plan(Path::new("/nonexistent"))
            .unwrap();
        assert_eq!(
            plan.spec.secrets["password"],
            SecretSource::Env("BENCHLAB_MQ_PASSWORD".into())
        );
        let e = check("name='mq'\nkind='rabbitmq'\nbind='::1'\nsecrets={password={env='P'}}")
            .unwrap_err();
        assert!(
            e.contains("bind: ::1: kind = \"rabbitmq\" takes an IPv4"),
            "{e}"
        );
        let e =
            check("name='mq'\nkind='rabbitmq'\nsecrets={password={env='P'},epmd_port={env='P'}}")
                .unwrap_err();
        assert!(
            e.contains("secrets: `epmd_port` is also a plain variable"),
            "{e}"
        );
        check("name='mq'\nkind='rabbitmq'\nprobe='amqp'\nvars={amqp_user='u'}\nsecrets={password={env='P'}}")
            .unwrap();
        let s = parse("name='mq'\nkind='rabbitmq'\nprobe='amqp'").unwrap();
        assert_eq!(s.probe, Some(Probe::Amqp));
        let s = parse("name='mq'\nkind='rabbitmq'").unwrap();
        assert_eq!(
            s.probe(),
            Probe::Amqp,
            "a broker's default probe speaks AMQP"
        );
    }

    #[test]
    fn a_host_variable_is_the_address_the_controller_gives() {
        let c = parse("name='c'\nkind='command'\nargv=['/bin/x', '-c', '{{host.gen}}']").unwrap();
        let e = c.plan(Path::new("/")).unwrap_err().to_string();
        assert!(e.contains("argv[2]") && e.contains("`host.gen`"), "{e}");
        let mut asked = Vec::new();
        let plan = c
            .plan_with(Path::new("/"), &mut |h| {
                asked.push(h.to_string());
                Some("10.1.0.2".into())
            })
            .unwrap();
        assert_eq!(asked, ["gen"]);
        assert_eq!(plan.hosts["gen"], "10.1.0.2");
    }

    #[test]
    fn an_unset_variable_names_itself_and_the_template() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("my.conf"),
            "daemon off;\nlisten {{listen}};\nroot {{docroot}};\n",
        )
        .unwrap();
        let s = parse("name='web'\nkind='nginx'\nconfig='my.conf'").unwrap();
        let e = s.plan(dir.path()).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "service `web`: template {}: variable(s) not set: `docroot` (line 3)",
                dir.path().join("my.conf").display()
            )),
            "{e}"
        );
        let mut s2 = s.clone();
        s2.vars.insert("docroot".into(), "/x".into());
        s2.plan(dir.path()).unwrap();
        let c = parse("name='c'\nkind='command'\nargv=['/bin/x', '{{portt}}']").unwrap();
        assert_eq!(
            c.plan(dir.path()).unwrap_err().to_string(),
            "service `c`: argv[1]: variable(s) not set: `portt` (line 1)"
        );
    }

    #[test]
    fn a_user_nginx_config_must_stay_in_the_foreground() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("n.conf"), "# daemon off;\nevents {}\n").unwrap();
        let s = parse("name='web'\nkind='nginx'\nconfig='n.conf'").unwrap();
        assert!(s
            .plan(dir.path())
            .unwrap_err()
            .to_string()
            .contains("must say `daemon off;`"));
        std::fs::write(dir.path().join("n.conf"), "daemon  off ;\nevents {}\n").unwrap();
        s.plan(dir.path()).unwrap();
    }

    #[test]
    fn shipped_templates_use_only_variables_benchlab_sets() {
        for (name, text) in SHIPPED {
            let uses = template::uses(text).unwrap();
            // RabbitMQ's template takes its user's password from the
            // secret that validate() demands.
            let own = if *name == "rabbitmq" {
                &["amqp_user", "epmd_port", "dist_port", "password"][..]
            } else {
                &[]
            };
            let known = |n: &str| {
                RESERVED_VARS.contains(&n) || DEFAULT_VARS.contains(&n) || own.contains(&n)
            };
            assert_eq!(template::unset(&uses, known), None, "{name}");
        }
        assert!(says_daemon_off(SHIPPED[0].1));
    }
}
