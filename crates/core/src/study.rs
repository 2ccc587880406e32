//! Study files: TOML read in two stages. Stage one turns the text into
//! typed values, checking every key and value against what is allowed;
//! stage two checks what spans keys (names, sweeps, each workload's own
//! cross-parameter rules) on every expanded point. Nothing runs until both
//! stages pass, and every error names the file, line, key and what is
//! allowed.

use std::fmt;
use std::ops::Range;

mod hostmap;
mod lab;
mod services;

pub use lab::HOST_SPEC_FORMS;
pub use services::ServiceDecl;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::envspec::{EnvSpec, LoadKind, LoadSpec};
use crate::param::{quoted_list, ParamDefault, ParamKind, Params, Value};
use crate::placement::{parse_cpu_list, Placement, SchedPolicy};
use crate::shape::ServerSide;
use crate::units::parse_size;
use crate::workload::{Registry, Workload};

/// A study-file error, with where it is and what would be allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct StudyError {
    /// The file name as given.
    pub file: String,
    /// 1-based line (0 when unknown).
    pub line: usize,
    /// 1-based column (0 when unknown).
    pub column: usize,
    /// The key path, e.g. `workload[2].message_size`.
    pub key: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl fmt::Display for StudyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Line 0: the error is not in a file's text (a command-line
        // option, an unreadable file), so no position is shown.
        if self.line == 0 {
            write!(f, "{}: ", self.file)?;
        } else {
            write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        }
        if !self.key.is_empty() {
            write!(f, "key `{}`: ", self.key)?;
        }
        write!(f, "{}", self.message)
    }
}

/// Order in which units run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// configuration → workload → point → repetition.
    Sequential,
    /// workload → point → repetition → configuration: configurations
    /// alternate at every repetition, which spreads slow drifts of a noisy
    /// machine evenly over them.
    Interleaved,
}

/// How the figure quoted for a point is chosen from its repetitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Selection {
    /// The median of the repetitions, with its confidence interval.
    Median,
    /// The repetition whose figure is the median (seeds 000, 001).
    MedianRun,
    /// The repetition whose standard deviation is the median (seed 003:
    /// "chose the run which corresponded to the median standard
    /// deviation"); the standard deviation of a metric `x_mean_…` is its
    /// companion `x_stddev_…`. Metrics without one fall back to the median
    /// run.
    MedianStddevRun,
    /// The mean of the repetitions.
    Mean,
}

/// What a failed point does to the study.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Record the failure and go on (the default).
    Continue,
    /// Record the failure and stop the run.
    Stop,
}

/// Adaptive repetitions (`repetitions = { min = 3, max = 10, target_ci =
/// "2%" }`): repeat a point until the 95 % confidence interval of its
/// headline figure is within ±`target_ci_pct` % of it, between `min` and
/// `max` repetitions. The stop rule itself is `benchlab_stats::should_stop`.
///
/// Invariant: `1 <= min <= max`, `target_ci_pct > 0`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Adaptive {
    /// Fewest repetitions.
    pub min: u32,
    /// Most repetitions (the planned count).
    pub max: u32,
    /// Target half-width of the interval, in percent of the figure.
    pub target_ci_pct: f64,
}

/// The study's `[defaults]`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Defaults {
    /// Repetitions of every point (with `adaptive`: the most).
    pub repetitions: u32,
    /// Adaptive repetitions, when `repetitions` is a table.
    pub adaptive: Option<Adaptive>,
    /// Warm-up before each measured interval, s.
    pub warmup_s: f64,
    /// Pause between points, s.
    pub quiesce_s: f64,
    /// Measured time of one repetition, s.
    pub duration_s: f64,
    /// How the quoted figure is chosen.
    pub select: Selection,
    /// What a failed point does.
    pub on_error: OnError,
}

/// Defaults used when `[defaults]` does not give a key.
pub const DEFAULT_REPETITIONS: u32 = 3;
/// Default warm-up (s).
pub const DEFAULT_WARMUP_S: f64 = 1.0;
/// Default quiesce (s).
pub const DEFAULT_QUIESCE_S: f64 = 1.0;
/// Default duration (s): netperf's `-l` default.
pub const DEFAULT_DURATION_S: f64 = 10.0;

/// One `[[configuration]]`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Configuration {
    /// The study's services as this configuration runs them (its
    /// `service.NAME` overrides applied).
    #[serde(default)]
    pub services: Vec<ServiceDecl>,
    /// Unique name; a table column.
    pub name: String,
    /// Free text.
    pub description: String,
    /// Placement of server sides.
    pub server: Placement,
    /// Placement of client sides.
    pub client: Placement,
    /// Profile, shielding and background load.
    pub env: EnvSpec,
    /// `hosts = { b1 = "b1-direct" }`: within this configuration, every
    /// workload side and service placed on a key's host runs on the
    /// mapped host instead (seed 003's bridged vs passthrough networking
    /// as two test beds). Workloads and reports keep the study's names
    /// (`metric@b1`), so the configurations' columns line up; empty: the
    /// study's hosts as they are. Plans stored before this key read as
    /// empty.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub hosts: std::collections::BTreeMap<String, String>,
}

impl Configuration {
    /// The host that a side or service the study places on `name` runs
    /// on in this configuration (`name` itself unless `hosts` maps it).
    pub fn host<'a>(&'a self, name: &'a str) -> &'a str {
        self.hosts.get(name).map(String::as_str).unwrap_or(name)
    }
}

/// How the controller reaches a host's agent.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// A child process on this machine.
    Local,
    /// A child process in a network namespace (`ip netns exec NAME`).
    Netns(String),
    /// A TCP connection to `benchlab agent --listen ADDRESS`, authenticated
    /// with a shared key (hosts without SSH).
    Tcp {
        /// The agent's `host:port`.
        agent: String,
        /// The file holding the shared key.
        key_file: String,
    },
    /// `ssh DESTINATION benchlab agent --stdio`.
    Ssh {
        /// `user@host` or a host alias of the user's ssh config.
        destination: String,
        /// `-p PORT`.
        port: Option<u16>,
        /// `-i FILE`.
        identity: Option<String>,
        /// Extra arguments before the destination (`["-o", "Foo=bar"]`).
        options: Vec<String>,
    },
}

/// One `[[host]]`: where a side of a workload runs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Host {
    /// Name used by workloads' `server`, `client` and `targets`.
    pub name: String,
    /// The control route.
    pub transport: Transport,
    /// The data address the other side connects to (an IP address or a
    /// host name, resolved by the controller); `None`: 127.0.0.1 for local
    /// hosts, the SSH destination's host for SSH hosts.
    pub address: Option<String>,
    /// A fixed data port for server sides (0: any free port).
    pub data_port: u16,
    /// The benchlab binary on that host (default: this binary's path for
    /// local and namespace hosts, `benchlab` on the PATH over SSH).
    pub benchlab: Option<String>,
    /// Copy this binary there when it is missing or of another version.
    pub deploy: bool,
}

/// Names of the hosts workloads use when they name none.
pub const DEFAULT_SERVER_HOST: &str = "sut";
/// See [`DEFAULT_SERVER_HOST`].
pub const DEFAULT_CLIENT_HOST: &str = "generator";

/// One `[[workload]]`, validated.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkloadEntry {
    /// Unique name (default: the kind, numbered when repeated).
    pub name: String,
    /// The workload kind.
    pub kind: String,
    /// Repetitions of each point (with `adaptive`: the most).
    pub repetitions: u32,
    /// Adaptive repetitions, when `repetitions` is a table.
    pub adaptive: Option<Adaptive>,
    /// Pause after each unit, s.
    pub quiesce_s: f64,
    /// The parameter that forms table rows.
    pub rows: String,
    /// Swept parameters with their values, in the workload's parameter order.
    pub axes: Vec<(String, Vec<Value>)>,
    /// Parameters with a single value (given or default).
    pub base: Params,
    /// Per configuration, the parameters its `set` table overrides.
    pub overrides: Vec<Params>,
    /// Hosts of the server side: one, or several `targets` driven at once.
    pub servers: Vec<String>,
    /// Host of the client side(s): the first of `client_hosts`.
    pub client: String,
    /// Every client (load generator) host; several only for a workload
    /// with a clients axis, whose clients are spread over them.
    #[serde(default)]
    pub client_hosts: Vec<String>,
    /// The services it drives (a service workload): one target each.
    #[serde(default)]
    pub services: Vec<String>,
}

/// A validated study.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Study {
    /// The file name as given.
    pub file: String,
    /// The file's text, stored with every run.
    pub text: String,
    /// `[study] name`.
    pub name: String,
    /// `[study] description`.
    pub description: String,
    /// Execution order.
    pub order: Order,
    /// `[defaults]`.
    pub defaults: Defaults,
    /// Configurations (at least one).
    pub configurations: Vec<Configuration>,
    /// Workloads (at least one).
    pub workloads: Vec<WorkloadEntry>,
    /// Hosts: those of `[[host]]`, plus `sut` and `generator` on this
    /// machine when the file does not define them.
    pub hosts: Vec<Host>,
    /// `[[service]]`: the real servers workloads drive.
    #[serde(default)]
    pub services: Vec<ServiceDecl>,
    /// `[[study.step]]`: the preparation steps of the study being
    /// reproduced and what became of each here, in file order.
    #[serde(default)]
    pub steps: Vec<Step>,
}

/// One step of the study being reproduced (`[[study.step]]`) and its
/// status here: deviations on the record.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Step {
    /// The step as the reproduced study describes it.
    pub step: String,
    /// What became of it here.
    pub status: StepStatus,
}

/// The status of a [`Step`]: `applied` (optionally `applied: note`),
/// `approximated: how` or `not possible here: why`.
///
/// Serialized as the study file writes it (`"approximated: how"`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum StepStatus {
    /// Done as the study did it, with an optional note (where, by what).
    Applied(Option<String>),
    /// Done differently; how.
    Approximated(String),
    /// Not done; why.
    NotPossible(String),
}

impl StepStatus {
    /// The status as a study file writes it.
    pub fn text(&self) -> String {
        match self {
            StepStatus::Applied(None) => "applied".into(),
            StepStatus::Applied(Some(note)) => format!("applied: {note}"),
            StepStatus::Approximated(how) => format!("approximated: {how}"),
            StepStatus::NotPossible(why) => format!("not possible here: {why}"),
        }
    }

    /// Reads `applied`, `applied: note`, `approximated: how` or `not
    /// possible here: why` (the reason must not be empty).
    pub fn parse(s: &str) -> Result<StepStatus, String> {
        let s = s.trim();
        let reason = |rest: &str, what: &str| {
            let r = rest.trim();
            if r.is_empty() {
                Err(format!("`{s}`: say {what} after the colon"))
            } else {
                Ok(r.to_string())
            }
        };
        if s == "applied" {
            Ok(StepStatus::Applied(None))
        } else if let Some(rest) = s.strip_prefix("applied:") {
            reason(rest, "a note, or write just \"applied\"").map(|n| StepStatus::Applied(Some(n)))
        } else if let Some(rest) = s.strip_prefix("approximated:") {
            reason(rest, "how").map(StepStatus::Approximated)
        } else if let Some(rest) = s.strip_prefix("not possible here:") {
            reason(rest, "why").map(StepStatus::NotPossible)
        } else {
            Err(format!(
                "`{s}` (allowed: \"applied\" or \"applied: note\", \"approximated: how\", \"not possible here: why\")"
            ))
        }
    }
}

impl From<StepStatus> for String {
    fn from(s: StepStatus) -> String {
        s.text()
    }
}

impl TryFrom<String> for StepStatus {
    type Error = String;
    fn try_from(s: String) -> Result<StepStatus, String> {
        StepStatus::parse(&s)
    }
}

type Tab<'i> = DeTable<'i>;
type Val<'i> = Spanned<DeValue<'i>>;

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, key: &str, message: impl Into<String>) -> StudyError {
        let start = span.start.min(self.text.len());
        let before = &self.text[..start];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
        StudyError {
            file: self.file.to_string(),
            line,
            column,
            key: key.to_string(),
            message: message.into(),
        }
    }

    fn check_keys(&self, table: &Tab, path: &str, allowed: &[&str]) -> Result<(), StudyError> {
        for (k, _) in table.iter() {
            if !allowed.contains(&k.get_ref().as_ref()) {
                return Err(self.err(
                    k.span(),
                    &join(path, k.get_ref()),
                    format!("unknown key (allowed here: {})", allowed.join(", ")),
                ));
            }
        }
        Ok(())
    }

    fn table<'t, 'i>(&self, v: &'t Val<'i>, path: &str) -> Result<&'t Tab<'i>, StudyError> {
        match v.get_ref() {
            DeValue::Table(t) => Ok(t),
            other => Err(self.err(
                v.span(),
                path,
                format!("expected a table, found {}", type_name(other)),
            )),
        }
    }

    fn string(&self, v: &Val, path: &str) -> Result<String, StudyError> {
        match v.get_ref() {
            DeValue::String(s) => Ok(s.to_string()),
            other => Err(self.err(
                v.span(),
                path,
                format!("expected a string, found {}", type_name(other)),
            )),
        }
    }

    /// A list of distinct names, each one of `allowed` (`targets`,
    /// `client`, `service`); with `one_ok`, a single name stands for a list
    /// of one. `expected` says what is allowed when it is neither.
    fn name_list(
        &self,
        v: &Val,
        path: &str,
        allowed: &[&str],
        one_ok: bool,
        expected: &str,
    ) -> Result<Vec<String>, StudyError> {
        let list = match v.get_ref() {
            DeValue::Array(a) if !a.is_empty() => a,
            DeValue::Array(_) => return Err(self.err(v.span(), path, expected)),
            _ if one_ok => return Ok(vec![self.choice(v, path, allowed)?]),
            _ => return Err(self.err(v.span(), path, expected)),
        };
        let mut out: Vec<String> = Vec::new();
        for (j, x) in list.iter().enumerate() {
            let key = format!("{path}[{j}]");
            let name = self.choice(x, &key, allowed)?;
            if out.contains(&name) {
                return Err(self.err(x.span(), &key, format!("`{name}` is listed twice")));
            }
            out.push(name);
        }
        Ok(out)
    }

    fn choice(&self, v: &Val, path: &str, allowed: &[&str]) -> Result<String, StudyError> {
        let s = self.string(v, path).map_err(|mut e| {
            e.message = format!("{} (allowed: {})", e.message, quoted_list(allowed));
            e
        })?;
        if allowed.contains(&s.as_str()) {
            Ok(s)
        } else {
            Err(self.err(
                v.span(),
                path,
                format!("`{s}` is not allowed (allowed: {})", quoted_list(allowed)),
            ))
        }
    }

    /// `[[study.step]]`: tables of `step` and `status`.
    fn steps(&self, v: &Val) -> Result<Vec<Step>, StudyError> {
        let DeValue::Array(items) = v.get_ref() else {
            return Err(self.err(
                v.span(),
                "study.step",
                "expected [[study.step]] entries (a list of tables with step and status)",
            ));
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("study.step[{i}]");
            let t = self.table(item, &path)?;
            self.check_keys(t, &path, STEP_KEYS)?;
            let field = |k: &str, what: &str| match t.get(k) {
                Some(x) => self.string(x, &join(&path, k)).map(|s| (s, x.span())),
                None => Err(self.err(
                    item.span(),
                    &join(&path, k),
                    format!("missing: every step needs {what}"),
                )),
            };
            let (step, span) = field("step", "the step as the reproduced study describes it")?;
            if step.trim().is_empty() {
                return Err(self.err(span, &join(&path, "step"), "must not be empty"));
            }
            let (status, span) = field("status", "a status")?;
            let status = StepStatus::parse(&status)
                .map_err(|m| self.err(span, &join(&path, "status"), m))?;
            out.push(Step { step, status });
        }
        Ok(out)
    }

    /// `repetitions`: an integer ≥ 1, or `{ min, max, target_ci }`.
    fn repetitions(&self, v: &Val, path: &str) -> Result<(u32, Option<Adaptive>), StudyError> {
        const KEYS: &[&str] = &["min", "max", "target_ci"];
        let DeValue::Table(t) = v.get_ref() else {
            // Not a table: the integer form, with its own errors, which
            // mention the table form too.
            return self.count(v, path, 1).map(|n| (n as u32, None)).map_err(|mut e| {
                e.message = format!(
                    "{} (or a table {{ min = 3, max = 10, target_ci = \"2%\" }} for adaptive repetitions; allowed keys: {})",
                    e.message,
                    KEYS.join(", ")
                );
                e
            });
        };
        self.check_keys(t, path, KEYS)?;
        let min = match t.get("min") {
            Some(x) => self.count(x, &join(path, "min"), 1)? as u32,
            None => DEFAULT_REPETITIONS,
        };
        let Some(max_v) = t.get("max") else {
            return Err(self.err(
                v.span(),
                path,
                "adaptive repetitions need `max` (allowed keys: min, max, target_ci)",
            ));
        };
        let max = self.count(max_v, &join(path, "max"), 1)? as u32;
        if max < min {
            return Err(self.err(
                max_v.span(),
                &join(path, "max"),
                format!("{max} is less than min = {min}"),
            ));
        }
        let Some(target) = t.get("target_ci") else {
            return Err(self.err(
                v.span(),
                path,
                "adaptive repetitions need `target_ci`, e.g. \"2%\" (allowed keys: min, max, target_ci)",
            ));
        };
        let tpath = join(path, "target_ci");
        let pct = match target.get_ref() {
            DeValue::String(s) => s
                .trim()
                .strip_suffix('%')
                .and_then(|n| n.trim().parse::<f64>().ok()),
            _ => None,
        };
        let Some(pct) = pct.filter(|p| p.is_finite() && *p > 0.0) else {
            return Err(self.err(
                target.span(),
                &tpath,
                "expected a positive percentage such as \"2%\" (the 95 % interval's half-width relative to the figure)",
            ));
        };
        Ok((
            max,
            Some(Adaptive {
                min,
                max,
                target_ci_pct: pct,
            }),
        ))
    }

    fn count(&self, v: &Val, path: &str, min: i64) -> Result<i64, StudyError> {
        let i = self.scalar(v, path, ParamKind::Count)?;
        match i {
            Value::Int(i) if i >= min => Ok(i),
            _ => Err(self.err(v.span(), path, format!("must be an integer ≥ {min}"))),
        }
    }

    fn seconds(&self, v: &Val, path: &str) -> Result<f64, StudyError> {
        match self.scalar(v, path, ParamKind::Seconds)? {
            Value::Float(f) => Ok(f),
            _ => unreachable!("seconds are floats"),
        }
    }

    /// Converts one scalar to a normalized parameter value.
    fn scalar(&self, v: &Val, path: &str, kind: ParamKind) -> Result<Value, StudyError> {
        let found = |what: &DeValue| {
            self.err(
                v.span(),
                path,
                format!("expected {}, found {}", kind.describe(), type_name(what)),
            )
        };
        let raw = v.get_ref();
        match (kind, raw) {
            (ParamKind::Bytes, DeValue::Integer(_)) | (ParamKind::Count, DeValue::Integer(_)) => {
                let i = self.int(v, path)?;
                if i < 0 {
                    return Err(self.err(
                        v.span(),
                        path,
                        format!("{i} is negative: expected {}", kind.describe()),
                    ));
                }
                Ok(Value::Int(i))
            }
            (ParamKind::Bytes, DeValue::String(s)) => match parse_size(s) {
                Ok(b) if b <= i64::MAX as u64 => Ok(Value::Int(b as i64)),
                Ok(_) => Err(self.err(v.span(), path, format!("`{s}` is too large"))),
                Err(m) => Err(self.err(v.span(), path, format!("bad size: {m}"))),
            },
            (ParamKind::Factor, DeValue::Integer(_) | DeValue::Float(_)) => {
                match self.scalar(v, path, ParamKind::Float)? {
                    Value::Float(x) if x > 0.0 => Ok(Value::Float(x)),
                    _ => Err(self.err(v.span(), path, format!("expected {}", kind.describe()))),
                }
            }
            (ParamKind::Seconds | ParamKind::Float, DeValue::Integer(_)) => {
                Ok(Value::Float(self.int(v, path)? as f64))
            }
            (ParamKind::Seconds | ParamKind::Float, DeValue::Float(f)) => {
                let x: f64 = f.as_str().replace('_', "").parse().unwrap_or(f64::NAN);
                if !x.is_finite() {
                    return Err(self.err(
                        v.span(),
                        path,
                        format!("{} is not a finite number", f.as_str()),
                    ));
                }
                if kind == ParamKind::Seconds && x < 0.0 {
                    return Err(self.err(
                        v.span(),
                        path,
                        format!("{x} is negative: expected {}", kind.describe()),
                    ));
                }
                Ok(Value::Float(x))
            }
            (ParamKind::Bool, DeValue::Boolean(b)) => Ok(Value::Bool(*b)),
            (ParamKind::Text, DeValue::String(s)) => Ok(Value::Str(s.to_string())),
            (ParamKind::Choice(allowed), DeValue::String(s)) => {
                if allowed.contains(&s.as_ref()) {
                    Ok(Value::Str(s.to_string()))
                } else {
                    Err(self.err(
                        v.span(),
                        path,
                        format!("`{s}` is not allowed (allowed: {})", quoted_list(allowed)),
                    ))
                }
            }
            (_, other) => Err(found(other)),
        }
    }

    fn int(&self, v: &Val, path: &str) -> Result<i64, StudyError> {
        match v.get_ref() {
            DeValue::Integer(i) => {
                let digits = i.as_str().replace('_', "");
                let digits = digits
                    .trim_start_matches("0x")
                    .trim_start_matches("0o")
                    .trim_start_matches("0b");
                i64::from_str_radix(digits, i.radix()).map_err(|_| {
                    self.err(v.span(), path, format!("`{}` is out of range", i.as_str()))
                })
            }
            other => Err(self.err(
                v.span(),
                path,
                format!("expected an integer, found {}", type_name(other)),
            )),
        }
    }

    /// A parameter value: a scalar, or a non-empty list of scalars (a sweep).
    fn param_values(&self, v: &Val, path: &str, kind: ParamKind) -> Result<Vec<Value>, StudyError> {
        match v.get_ref() {
            DeValue::Array(items) => {
                if items.is_empty() {
                    return Err(self.err(
                        v.span(),
                        path,
                        format!(
                            "empty sweep: give one value or a list of at least one value ({})",
                            kind.describe()
                        ),
                    ));
                }
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    if let DeValue::Array(_) = item.get_ref() {
                        return Err(self.err(
                            item.span(),
                            &p,
                            "nested lists are not allowed in a sweep",
                        ));
                    }
                    let value = self.scalar(item, &p, kind)?;
                    if out.contains(&value) {
                        return Err(self.err(
                            item.span(),
                            &p,
                            format!("`{}` is listed twice in this sweep", value.label()),
                        ));
                    }
                    out.push(value);
                }
                Ok(out)
            }
            // A doubling range of sizes (`"1MiB..4GiB"`), IOzone's `-n/-g`
            // and `-y/-q` sweeps.
            DeValue::String(s) if kind == ParamKind::Bytes && s.contains("..") => {
                let sizes = crate::units::parse_size_range(s)
                    .map_err(|m| self.err(v.span(), path, format!("bad size range: {m}")))?;
                Ok(sizes.into_iter().map(|b| Value::Int(b as i64)).collect())
            }
            // A count range (`"1..64"` doubles, `"4..32 step 4"` steps),
            // the usual form of a clients axis.
            DeValue::String(s) if kind == ParamKind::Count && s.contains("..") => {
                let counts = crate::units::parse_count_range(s)
                    .map_err(|m| self.err(v.span(), path, format!("bad count range: {m}")))?;
                Ok(counts.into_iter().map(|n| Value::Int(n as i64)).collect())
            }
            _ => Ok(vec![self.scalar(v, path, kind)?]),
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn type_name(v: &DeValue) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "a list",
        DeValue::Table(_) => "a table",
    }
}

/// `testbed` belongs to `benchlab testbed`, which reads the same file.
const TOP_KEYS: &[&str] = &[
    "study",
    "defaults",
    "configuration",
    "host",
    "service",
    "workload",
    "testbed",
];
const HOST_KEYS: &[&str] = &[
    "name",
    "local",
    "netns",
    "ssh",
    "port",
    "identity",
    "ssh_options",
    "agent",
    "key_file",
    "address",
    "data_port",
    "benchlab",
    "deploy",
];
const STUDY_KEYS: &[&str] = &["name", "description", "order", "step"];
const STEP_KEYS: &[&str] = &["step", "status"];
const DEFAULT_KEYS: &[&str] = &[
    "repetitions",
    "warmup_s",
    "quiesce_s",
    "duration_s",
    "select",
    "on_error",
];
const CONFIG_KEYS: &[&str] = &[
    "name",
    "description",
    "server",
    "client",
    "set",
    "profile",
    "shield",
    "load",
    "service",
    "hosts",
];
const PLACEMENT_KEYS: &[&str] = &[
    "cpus",
    "nice",
    "sched",
    "priority",
    "numa_node",
    "mlockall",
    "launcher",
];
const LOAD_KEYS: &[&str] = &["kind", "workers", "command", "cpus"];
const SCHEDS: &[&str] = &["fifo", "rr", "other"];
/// Keys of `[[workload]]` that are not workload parameters.
const WORKLOAD_RESERVED: &[&str] = &[
    "kind",
    "name",
    "repetitions",
    "quiesce_s",
    "rows",
    "server",
    "client",
    "targets",
    "service",
];
const ORDERS: &[&str] = &["sequential", "interleaved"];
const SELECTIONS: &[&str] = &["median", "median-run", "median-stddev-run", "mean"];
const ON_ERRORS: &[&str] = &["continue", "stop"];

impl Study {
    /// Reads and validates a study file.
    pub fn load(path: &std::path::Path, registry: &Registry) -> Result<Study, StudyError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| StudyError {
            file: file.clone(),
            line: 0,
            column: 0,
            key: String::new(),
            message: format!("cannot read the study file: {e}"),
        })?;
        Study::parse(&file, &text, registry)
    }

    /// Validates a study given as text (`file` names it in errors).
    pub fn parse(file: &str, text: &str, registry: &Registry) -> Result<Study, StudyError> {
        let cx = Ctx { file, text };
        let doc = DeTable::parse(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let msg = e.message().trim().to_string();
            cx.err(span, "", format!("not valid TOML: {msg}"))
        })?;
        let doc = doc.get_ref();
        cx.check_keys(doc, "", TOP_KEYS)?;

        // One function per section, in dependency order: hosts before the
        // services that run on them, both before the workloads that use
        // them.
        let header = cx.header(doc)?;
        let defaults = cx.defaults(doc)?;
        let mut configs = cx.configurations(doc)?;
        let hosts = cx.hosts(doc)?;
        let host_names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        let services = cx.configured_services(doc, &host_names, &mut configs, registry)?;
        let workloads = cx.workloads(doc, &defaults, &configs, &host_names, &services, registry)?;
        cx.host_maps(&mut configs, &host_names, &workloads, &services)?;
        let Header {
            name,
            description,
            order,
            steps,
        } = header;
        let configurations = configs.list;
        Ok(Study {
            file: file.to_string(),
            text: text.to_string(),
            name,
            description,
            order,
            defaults,
            configurations,
            workloads,
            hosts,
            services,
            steps,
        })
    }

    /// Every host a workload side or a managed service runs on in any
    /// configuration (the study's names after each configuration's
    /// `hosts` map), each once, in order of first use.
    pub fn used_hosts(&self) -> Vec<&str> {
        let mut used: Vec<&str> = Vec::new();
        for c in &self.configurations {
            let sides = self
                .workloads
                .iter()
                .flat_map(|w| w.servers.iter().chain(&w.client_hosts));
            // Configuration services carry their mapped hosts already.
            let services = c
                .services
                .iter()
                .filter(|d| d.address.is_none())
                .map(|d| d.host.as_str());
            for h in sides.map(|h| c.host(h)).chain(services) {
                if !used.contains(&h) {
                    used.push(h);
                }
            }
        }
        used
    }

    /// A host by name (every name a workload uses exists).
    pub fn host(&self, name: &str) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .expect("workload hosts are validated")
    }
}

impl Ctx<'_> {
    fn host(&self, item: &Val, path: &str) -> Result<Host, StudyError> {
        let t = self.table(item, path)?;
        self.check_keys(t, path, HOST_KEYS)?;
        let key = |k: &str| format!("{path}.{k}");
        let name = match t.get("name") {
            Some(n) => self.string(n, &key("name"))?,
            None => {
                return Err(self.err(
                    item.span(),
                    &key("name"),
                    "missing: every host needs a name",
                ))
            }
        };
        if name.trim().is_empty() {
            return Err(self.err(
                t.get("name").unwrap().span(),
                &key("name"),
                "must not be empty",
            ));
        }
        let routes: Vec<&str> = ["local", "netns", "ssh", "agent"]
            .into_iter()
            .filter(|k| t.get(*k).is_some())
            .collect();
        if routes.len() > 1 {
            let span = t.get(routes[1]).unwrap().span();
            return Err(self.err(
                span,
                &key(routes[1]),
                format!(
                    "a host is reached one way: give only one of local, netns, ssh, agent (found {})",
                    routes.join(", ")
                ),
            ));
        }
        if routes.first() != Some(&"agent") {
            if let Some(v) = t.get("key_file") {
                return Err(self.err(
                    v.span(),
                    &key("key_file"),
                    "only hosts with `agent = \"host:port\"` take this key",
                ));
            }
        }
        if routes.first() != Some(&"ssh") {
            for k in ["port", "identity", "ssh_options"] {
                if let Some(v) = t.get(k) {
                    return Err(self.err(
                        v.span(),
                        &key(k),
                        "only SSH hosts (`ssh = \"user@host\"`) take this key",
                    ));
                }
            }
        }
        let transport = match routes.first() {
            None => Transport::Local,
            Some(&"local") => {
                let v = t.get("local").unwrap();
                match v.get_ref() {
                    DeValue::Boolean(true) => Transport::Local,
                    _ => {
                        return Err(self.err(
                            v.span(),
                            &key("local"),
                            "expected `local = true` (or leave it out)",
                        ))
                    }
                }
            }
            Some(&"agent") => {
                let v = t.get("agent").unwrap();
                let agent = self.string(v, &key("agent"))?;
                if !agent.contains(':') {
                    return Err(self.err(
                        v.span(),
                        &key("agent"),
                        "expected the `host:port` a `benchlab agent --listen` serves on",
                    ));
                }
                let key_file = match t.get("key_file") {
                    Some(k) => self.string(k, &key("key_file"))?,
                    None => return Err(self.err(v.span(), &key("key_file"), "missing: an agent reached over TCP needs `key_file`, the shared key it checks")),
                };
                Transport::Tcp { agent, key_file }
            }
            Some(&"netns") => {
                let v = t.get("netns").unwrap();
                let ns = self.string(v, &key("netns"))?;
                if ns.is_empty() || ns.contains('/') {
                    return Err(self.err(
                        v.span(),
                        &key("netns"),
                        "expected a network namespace name (see `ip netns list`)",
                    ));
                }
                Transport::Netns(ns)
            }
            _ => {
                let v = t.get("ssh").unwrap();
                let destination = self.string(v, &key("ssh"))?;
                if destination.is_empty() || destination.starts_with('-') {
                    return Err(self.err(
                        v.span(),
                        &key("ssh"),
                        "expected an SSH destination such as \"root@10.0.0.2\" or a host alias",
                    ));
                }
                let port = match t.get("port") {
                    Some(p) => {
                        let n = self.int(p, &key("port"))?;
                        if !(1..=65535).contains(&n) {
                            return Err(self.err(
                                p.span(),
                                &key("port"),
                                format!("{n} is not a port (1 … 65535)"),
                            ));
                        }
                        Some(n as u16)
                    }
                    None => None,
                };
                let identity = t
                    .get("identity")
                    .map(|v| self.string(v, &key("identity")))
                    .transpose()?;
                let mut options = Vec::new();
                if let Some(v) = t.get("ssh_options") {
                    match v.get_ref() {
                        DeValue::Array(a) => {
                            for (j, o) in a.iter().enumerate() {
                                options
                                    .push(self.string(o, &format!("{}[{j}]", key("ssh_options")))?);
                            }
                        }
                        _ => return Err(self.err(
                            v.span(),
                            &key("ssh_options"),
                            "expected a list of ssh arguments, e.g. [\"-o\", \"ConnectTimeout=5\"]",
                        )),
                    }
                }
                Transport::Ssh {
                    destination,
                    port,
                    identity,
                    options,
                }
            }
        };
        let address = t
            .get("address")
            .map(|v| self.string(v, &key("address")))
            .transpose()?;
        if address.is_none() {
            if let Transport::Netns(_) = transport {
                return Err(self.err(item.span(), &key("address"), "missing: a namespace host needs the data address other hosts reach it at (e.g. \"10.203.0.1\")"));
            }
        }
        let data_port = match t.get("data_port") {
            Some(p) => {
                let n = self.int(p, &key("data_port"))?;
                if !(0..=65535).contains(&n) {
                    return Err(self.err(
                        p.span(),
                        &key("data_port"),
                        format!("{n} is not a port (0 … 65535; 0 = any)"),
                    ));
                }
                n as u16
            }
            None => 0,
        };
        let benchlab = t
            .get("benchlab")
            .map(|v| self.string(v, &key("benchlab")))
            .transpose()?;
        let deploy = match t.get("deploy") {
            Some(v) => match v.get_ref() {
                DeValue::Boolean(b) => *b,
                other => {
                    return Err(self.err(
                        v.span(),
                        &key("deploy"),
                        format!("expected true or false, found {}", type_name(other)),
                    ))
                }
            },
            None => false,
        };
        Ok(Host {
            name,
            transport,
            address,
            data_port,
            benchlab,
            deploy,
        })
    }

    fn placement(&self, v: &Val, path: &str) -> Result<Placement, StudyError> {
        let t = self.table(v, path)?;
        self.check_keys(t, path, PLACEMENT_KEYS)?;
        let mut p = Placement::default();
        if let Some(c) = t.get("cpus") {
            let key = format!("{path}.cpus");
            let text = match c.get_ref() {
                DeValue::Integer(_) => self.int(c, &key)?.to_string(),
                _ => self.string(c, &key)?,
            };
            p.cpus = Some(parse_cpu_list(&text).map_err(|m| self.err(c.span(), &key, m))?);
        }
        if let Some(n) = t.get("nice") {
            let key = format!("{path}.nice");
            let nice = self.int(n, &key)?;
            if !(-20..=19).contains(&nice) {
                return Err(self.err(
                    n.span(),
                    &key,
                    format!("{nice} is out of range (allowed: -20 … 19)"),
                ));
            }
            p.nice = Some(nice as i32);
        }
        let policy = match t.get("sched") {
            Some(v) => Some(self.choice(v, &format!("{path}.sched"), SCHEDS)?),
            None => None,
        };
        match (policy.as_deref(), t.get("priority")) {
            (Some("fifo" | "rr"), prio) => {
                let prio = match prio {
                    Some(v) => {
                        let key = format!("{path}.priority");
                        let n = self.int(v, &key)?;
                        if !(1..=99).contains(&n) {
                            return Err(self.err(
                                v.span(),
                                &key,
                                format!("{n} is out of range (allowed: 1 … 99)"),
                            ));
                        }
                        n as i32
                    }
                    // chrt's and seed 002's `run -s fifo -P 1`.
                    None => 1,
                };
                let pol = if policy.as_deref() == Some("fifo") {
                    SchedPolicy::Fifo
                } else {
                    SchedPolicy::Rr
                };
                p.sched = Some((pol, prio));
            }
            (_, Some(v)) => {
                return Err(self.err(
                    v.span(),
                    &format!("{path}.priority"),
                    "a priority needs a real-time policy (allowed: sched = \"fifo\" or \"rr\")",
                ))
            }
            _ => {}
        }
        if let Some(v) = t.get("numa_node") {
            let key = format!("{path}.numa_node");
            let n = self.int(v, &key)?;
            if !(0..1024).contains(&n) {
                return Err(self.err(v.span(), &key, "must be a node number (0 … 1023)"));
            }
            p.numa_node = Some(n as u32);
        }
        if let Some(v) = t.get("mlockall") {
            p.mlockall = self.boolean(v, &format!("{path}.mlockall"))?;
        }
        if let Some(v) = t.get("launcher") {
            p.launcher = self.words(v, &format!("{path}.launcher"))?;
        }
        Ok(p)
    }

    fn boolean(&self, v: &Val, path: &str) -> Result<bool, StudyError> {
        match v.get_ref() {
            DeValue::Boolean(b) => Ok(*b),
            other => Err(self.err(
                v.span(),
                path,
                format!("expected true or false, found {}", type_name(other)),
            )),
        }
    }

    /// A command: a list of strings, or one string split at whitespace.
    fn words(&self, v: &Val, path: &str) -> Result<Vec<String>, StudyError> {
        let words: Vec<String> = match v.get_ref() {
            DeValue::String(s) => s.split_whitespace().map(str::to_string).collect(),
            DeValue::Array(a) => a
                .iter()
                .map(|w| self.string(w, path))
                .collect::<Result<_, _>>()?,
            other => {
                return Err(self.err(
                    v.span(),
                    path,
                    format!(
                        "expected a command (a string or a list of strings), found {}",
                        type_name(other)
                    ),
                ))
            }
        };
        if words.is_empty() {
            return Err(self.err(v.span(), path, "must not be empty"));
        }
        Ok(words)
    }

    fn cpu_list(&self, v: &Val, path: &str) -> Result<Vec<usize>, StudyError> {
        let text = match v.get_ref() {
            DeValue::Integer(_) => self.int(v, path)?.to_string(),
            _ => self.string(v, path)?,
        };
        parse_cpu_list(&text).map_err(|m| self.err(v.span(), path, m))
    }

    /// `profile`, `shield` and `load` of a configuration.
    fn env(&self, t: &Tab, path: &str) -> Result<EnvSpec, StudyError> {
        let mut env = EnvSpec::default();
        if let Some(v) = t.get("profile") {
            let key = format!("{path}.profile");
            let named = |v: &Val, key: &str| -> Result<String, StudyError> {
                let name = self.string(v, key).map_err(|mut e| {
                    e.message = format!(
                        "{} (allowed: a profile name or file, or a table of them by workload name)",
                        e.message
                    );
                    e
                })?;
                if name.trim().is_empty() {
                    return Err(self.err(v.span(), key, "must name a profile or a profile file"));
                }
                Ok(name)
            };
            match v.get_ref() {
                DeValue::Table(pt) => {
                    for (k, pv) in pt.iter() {
                        let name = named(pv, &format!("{key}.{}", k.get_ref()))?;
                        if k.get_ref() == "default" {
                            env.profile = Some(name);
                        } else {
                            env.profile_for.insert(k.get_ref().to_string(), name);
                        }
                    }
                }
                _ => env.profile = Some(named(v, &key)?),
            }
        }
        if let Some(v) = t.get("shield") {
            let key = format!("{path}.shield");
            // Checked against the host's CPUs when applied: the hosts of a
            // study need not look like the machine that validates it.
            let cpus = self.cpu_list(v, &key)?;
            env.shield = Some(cpus);
        }
        if let Some(v) = t.get("load") {
            let key = format!("{path}.load");
            let lt = self.table(v, &key)?;
            self.check_keys(lt, &key, LOAD_KEYS)?;
            let kind = match lt.get("kind") {
                Some(k) => self.choice(k, &format!("{key}.kind"), &["build", "command"])?,
                None if lt.get("command").is_some() => "command".into(),
                None => "build".into(),
            };
            let kind = match (kind.as_str(), lt.get("command")) {
                ("command", Some(c)) => {
                    let c = self.string(c, &format!("{key}.command"))?;
                    if c.trim().is_empty() {
                        return Err(self.err(v.span(), &format!("{key}.command"), "must not be empty"));
                    }
                    LoadKind::Command(c)
                }
                ("command", None) => {
                    return Err(self.err(
                        v.span(),
                        &format!("{key}.command"),
                        "missing: kind = \"command\" needs the command to run in a loop",
                    ))
                }
                (_, Some(c)) => {
                    return Err(self.err(
                        c.span(),
                        &format!("{key}.command"),
                        "only kind = \"command\" runs a command (the built-in load is kind = \"build\")",
                    ))
                }
                _ => LoadKind::Build,
            };
            let workers = match lt.get("workers") {
                Some(w) => self.count(w, &format!("{key}.workers"), 1)? as usize,
                // Like `make -j(N+1)`: one more worker than CPUs keeps
                // every CPU busy while one worker waits on I/O.
                None => crate::placement::online_cpus() + 1,
            };
            let cpus = match lt.get("cpus") {
                Some(c) => Some(self.cpu_list(c, &format!("{key}.cpus"))?),
                None => None,
            };
            env.load = Some(LoadSpec {
                kind,
                workers,
                cpus,
            });
        }
        Ok(env)
    }
}

impl WorkloadEntry {
    /// The points of this workload: the cartesian product of its axes, the
    /// first axis outermost, each merged over the fixed parameters.
    pub fn points(&self) -> Vec<Params> {
        let mut points = vec![self.base.clone()];
        for (name, values) in &self.axes {
            let mut next = Vec::with_capacity(points.len() * values.len());
            for p in &points {
                for v in values {
                    let mut q = p.clone();
                    q.set(name, v.clone());
                    next.push(q);
                }
            }
            points = next;
        }
        points
    }

    /// A short label of a point: its swept values (`protocol=tcp message_size=1024`).
    pub fn label(&self, params: &Params) -> String {
        let parts: Vec<String> = self
            .axes
            .iter()
            .map(|(n, _)| {
                format!(
                    "{n}={}",
                    params.get(n).map(|v| v.label()).unwrap_or_default()
                )
            })
            .collect();
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(" ")
        }
    }
}

/// `[study]`'s values.
struct Header {
    name: String,
    description: String,
    order: Order,
    steps: Vec<Step>,
}

/// `[[configuration]]`s with what later sections complete: their `set`
/// tables (checked against the workloads' parameters) and `service`
/// overrides (checked against the services).
struct Configs<'i> {
    list: Vec<Configuration>,
    sets: Vec<Vec<(String, Val<'i>)>>,
    services: Vec<Option<Val<'i>>>,
    /// Each configuration's `hosts` table, read once the hosts and
    /// workloads are known.
    hosts: Vec<Option<Val<'i>>>,
}

impl Ctx<'_> {
    /// `[study]`.
    fn header(&self, doc: &Tab) -> Result<Header, StudyError> {
        let name;
        let mut description = String::new();
        let mut order = Order::Sequential;
        let mut steps = Vec::new();
        match doc.get("study") {
            Some(v) => {
                let t = self.table(v, "study")?;
                self.check_keys(t, "study", STUDY_KEYS)?;
                match t.get("name") {
                    Some(n) => name = self.string(n, "study.name")?,
                    None => {
                        return Err(self.err(
                            v.span(),
                            "study.name",
                            "missing: every study needs a name",
                        ))
                    }
                }
                if name.trim().is_empty() {
                    return Err(self.err(
                        t.get("name").unwrap().span(),
                        "study.name",
                        "must not be empty",
                    ));
                }
                if let Some(d) = t.get("description") {
                    description = self.string(d, "study.description")?;
                }
                if let Some(o) = t.get("order") {
                    order = match self.choice(o, "study.order", ORDERS)?.as_str() {
                        "interleaved" => Order::Interleaved,
                        _ => Order::Sequential,
                    };
                }
                if let Some(v) = t.get("step") {
                    steps = self.steps(v)?;
                }
            }
            None => {
                return Err(self.err(
                    0..0,
                    "study",
                    "missing: a study file needs a [study] table with a name",
                ))
            }
        }

        Ok(Header {
            name,
            description,
            order,
            steps,
        })
    }

    /// `[defaults]`.
    fn defaults(&self, doc: &Tab) -> Result<Defaults, StudyError> {
        let mut defaults = Defaults {
            repetitions: DEFAULT_REPETITIONS,
            adaptive: None,
            warmup_s: DEFAULT_WARMUP_S,
            quiesce_s: DEFAULT_QUIESCE_S,
            duration_s: DEFAULT_DURATION_S,
            select: Selection::Median,
            on_error: OnError::Continue,
        };
        if let Some(v) = doc.get("defaults") {
            let t = self.table(v, "defaults")?;
            self.check_keys(t, "defaults", DEFAULT_KEYS)?;
            if let Some(x) = t.get("repetitions") {
                (defaults.repetitions, defaults.adaptive) =
                    self.repetitions(x, "defaults.repetitions")?;
            }
            if let Some(x) = t.get("warmup_s") {
                defaults.warmup_s = self.seconds(x, "defaults.warmup_s")?;
            }
            if let Some(x) = t.get("quiesce_s") {
                defaults.quiesce_s = self.seconds(x, "defaults.quiesce_s")?;
            }
            if let Some(x) = t.get("duration_s") {
                defaults.duration_s = self.seconds(x, "defaults.duration_s")?;
                if defaults.duration_s <= 0.0 {
                    return Err(self.err(
                        x.span(),
                        "defaults.duration_s",
                        "must be more than 0 seconds",
                    ));
                }
            }
            if let Some(x) = t.get("select") {
                defaults.select = match self.choice(x, "defaults.select", SELECTIONS)?.as_str() {
                    "median-run" => Selection::MedianRun,
                    "median-stddev-run" => Selection::MedianStddevRun,
                    "mean" => Selection::Mean,
                    _ => Selection::Median,
                };
            }
            if let Some(x) = t.get("on_error") {
                defaults.on_error = match self.choice(x, "defaults.on_error", ON_ERRORS)?.as_str() {
                    "stop" => OnError::Stop,
                    _ => OnError::Continue,
                };
            }
        }

        Ok(defaults)
    }

    /// `[[configuration]]` (a default one when there is none).
    fn configurations<'i>(&self, doc: &Tab<'i>) -> Result<Configs<'i>, StudyError> {
        let mut configurations = Vec::new();
        let mut config_sets: Vec<Vec<(String, Val)>> = Vec::new();
        let mut config_services: Vec<Option<Val>> = Vec::new();
        let mut config_hosts: Vec<Option<Val>> = Vec::new();
        if let Some(v) = doc.get("configuration") {
            let items = match v.get_ref() {
                DeValue::Array(a) => a,
                _ => {
                    return Err(self.err(
                        v.span(),
                        "configuration",
                        "expected [[configuration]] entries (a list of tables)",
                    ))
                }
            };
            for (i, item) in items.iter().enumerate() {
                let path = format!("configuration[{i}]");
                let t = self.table(item, &path)?;
                self.check_keys(t, &path, CONFIG_KEYS)?;
                let name = match t.get("name") {
                    Some(n) => self.string(n, &format!("{path}.name"))?,
                    None => {
                        return Err(self.err(
                            item.span(),
                            &format!("{path}.name"),
                            "missing: every configuration needs a name",
                        ))
                    }
                };
                if name.trim().is_empty() {
                    return Err(self.err(
                        t.get("name").unwrap().span(),
                        &format!("{path}.name"),
                        "must not be empty",
                    ));
                }
                if configurations
                    .iter()
                    .any(|c: &Configuration| c.name == name)
                {
                    return Err(self.err(
                        t.get("name").unwrap().span(),
                        &format!("{path}.name"),
                        format!("configuration `{name}` is defined twice: names must be unique"),
                    ));
                }
                let description = match t.get("description") {
                    Some(d) => self.string(d, &format!("{path}.description"))?,
                    None => String::new(),
                };
                let mut sides = [Placement::default(), Placement::default()];
                for (side, slot) in ["server", "client"].iter().zip(sides.iter_mut()) {
                    if let Some(p) = t.get(*side) {
                        *slot = self.placement(p, &format!("{path}.{side}"))?;
                    }
                }
                let mut set = Vec::new();
                if let Some(s) = t.get("set") {
                    let st = self.table(s, &format!("{path}.set"))?;
                    for (k, v) in st.iter() {
                        set.push((k.get_ref().to_string(), v.clone()));
                    }
                }
                config_sets.push(set);
                config_services.push(t.get("service").cloned());
                config_hosts.push(t.get("hosts").cloned());
                let env = self.env(t, &path)?;
                let [server, client] = sides;
                configurations.push(Configuration {
                    services: Vec::new(),
                    name,
                    description,
                    server,
                    client,
                    env,
                    hosts: Default::default(),
                });
            }
        }
        if configurations.is_empty() {
            config_services.push(None);
            config_hosts.push(None);
            configurations.push(Configuration {
                services: Vec::new(),
                name: "default".into(),
                description: "the system as it is".into(),
                server: Placement::default(),
                client: Placement::default(),
                env: EnvSpec::default(),
                hosts: Default::default(),
            });
            config_sets.push(Vec::new());
        }

        Ok(Configs {
            list: configurations,
            sets: config_sets,
            services: config_services,
            hosts: config_hosts,
        })
    }

    /// `[[host]]`, plus the local `sut` and `generator` when not defined.
    fn hosts(&self, doc: &Tab) -> Result<Vec<Host>, StudyError> {
        let mut hosts: Vec<Host> = Vec::new();
        if let Some(v) = doc.get("host") {
            let items = match v.get_ref() {
                DeValue::Array(a) => a,
                _ => {
                    return Err(self.err(
                        v.span(),
                        "host",
                        "expected [[host]] entries (a list of tables)",
                    ))
                }
            };
            for (i, item) in items.iter().enumerate() {
                let path = format!("host[{i}]");
                let host = self.host(item, &path)?;
                if hosts.iter().any(|h| h.name == host.name) {
                    let span = self
                        .table(item, &path)?
                        .get("name")
                        .map(|n| n.span())
                        .unwrap_or(item.span());
                    return Err(self.err(
                        span,
                        &format!("{path}.name"),
                        format!(
                            "host `{}` is defined twice: names must be unique",
                            host.name
                        ),
                    ));
                }
                hosts.push(host);
            }
        }
        for name in [DEFAULT_SERVER_HOST, DEFAULT_CLIENT_HOST] {
            if !hosts.iter().any(|h| h.name == name) {
                hosts.push(Host {
                    name: name.to_string(),
                    transport: Transport::Local,
                    address: None,
                    data_port: 0,
                    benchlab: None,
                    deploy: false,
                });
            }
        }
        Ok(hosts)
    }

    /// `[[service]]`, and each configuration's view of the services (its
    /// `service.NAME` overrides applied).
    fn configured_services(
        &self,
        doc: &Tab,
        host_names: &[&str],
        configs: &mut Configs,
        registry: &Registry,
    ) -> Result<Vec<ServiceDecl>, StudyError> {
        let configurations = &mut configs.list;
        let config_services = &configs.services;
        let services = self.services(
            doc.get("service"),
            host_names,
            DEFAULT_SERVER_HOST,
            registry,
        )?;
        for (i, (c, over)) in configurations.iter_mut().zip(config_services).enumerate() {
            c.services = services.clone();
            if let Some(v) = over {
                let path = format!("configuration[{i}].service");
                for o in self.service_overrides(v, &path, &services, registry)? {
                    if let Some(slot) = c.services.iter_mut().find(|s| s.name == o.name) {
                        *slot = o;
                    }
                }
            }
        }

        Ok(services)
    }

    /// `[[workload]]`: each validated against its workload's option table
    /// and rules, with every configuration's `set` applied; a `set` key no
    /// workload has is an error.
    fn workloads(
        &self,
        doc: &Tab,
        defaults: &Defaults,
        configs: &Configs,
        host_names: &[&str],
        services: &[ServiceDecl],
        registry: &Registry,
    ) -> Result<Vec<WorkloadEntry>, StudyError> {
        let configurations = &configs.list;
        let config_sets = &configs.sets;
        let items = match doc.get("workload") {
            Some(v) => match v.get_ref() {
                DeValue::Array(a) if !a.is_empty() => a,
                _ => {
                    return Err(self.err(
                        v.span(),
                        "workload",
                        "expected [[workload]] entries (a list of tables)",
                    ))
                }
            },
            None => {
                return Err(self.err(
                    0..0,
                    "workload",
                    format!(
                        "missing: a study needs at least one [[workload]] (kinds: {})",
                        registry.kinds().join(", ")
                    ),
                ))
            }
        };
        let mut workloads: Vec<WorkloadEntry> = Vec::new();
        let mut used_set_keys = vec![vec![false; 0]; configurations.len()];
        for (c, set) in config_sets.iter().enumerate() {
            used_set_keys[c] = vec![false; set.len()];
        }
        for (i, item) in items.iter().enumerate() {
            let path = format!("workload[{i}]");
            let t = self.table(item, &path)?;
            let kind = match t.get("kind") {
                Some(k) => self.string(k, &format!("{path}.kind"))?,
                None => {
                    return Err(self.err(
                        item.span(),
                        &format!("{path}.kind"),
                        format!(
                            "missing: every workload needs a kind (one of {})",
                            registry.kinds().join(", ")
                        ),
                    ))
                }
            };
            let wl: &dyn Workload = match registry.get(&kind) {
                Some(w) => w,
                None => {
                    return Err(self.err(
                        t.get("kind").unwrap().span(),
                        &format!("{path}.kind"),
                        format!(
                            "unknown workload `{kind}` (known: {})",
                            registry.kinds().join(", ")
                        ),
                    ))
                }
            };
            let mut allowed: Vec<&str> = WORKLOAD_RESERVED.to_vec();
            allowed.extend(wl.params().iter().map(|p| p.name));
            self.check_keys(t, &path, &allowed)?;

            let name = match t.get("name") {
                Some(n) => self.string(n, &format!("{path}.name"))?,
                None => {
                    let same = workloads.iter().filter(|w| w.kind == kind).count();
                    if same == 0 {
                        kind.clone()
                    } else {
                        format!("{kind}#{}", same + 1)
                    }
                }
            };
            if workloads.iter().any(|w| w.name == name) {
                return Err(self.err(
                    t.get("name").map(|n| n.span()).unwrap_or(item.span()),
                    &format!("{path}.name"),
                    format!(
                        "workload name `{name}` is used twice: give each workload a unique name"
                    ),
                ));
            }
            let (repetitions, adaptive) = match t.get("repetitions") {
                Some(r) => self.repetitions(r, &format!("{path}.repetitions"))?,
                None => (defaults.repetitions, defaults.adaptive),
            };
            let quiesce_s = match t.get("quiesce_s") {
                Some(q) => self.seconds(q, &format!("{path}.quiesce_s"))?,
                None => defaults.quiesce_s,
            };

            let mut axes = Vec::new();
            let mut base = Params::default();
            for spec in wl.params() {
                let key = format!("{path}.{}", spec.name);
                match t.get(spec.name) {
                    Some(v) => {
                        let values = self.param_values(v, &key, spec.kind)?;
                        if values.len() == 1 {
                            base.set(spec.name, values.into_iter().next().unwrap());
                        } else {
                            axes.push((spec.name.to_string(), values));
                        }
                    }
                    None => {
                        let value = match spec.default {
                            ParamDefault::Study => match spec.name {
                                "duration_s" => Some(Value::Float(defaults.duration_s)),
                                "warmup_s" => Some(Value::Float(defaults.warmup_s)),
                                other => unreachable!("no study default for `{other}`"),
                            },
                            d => Value::from_default(d),
                        };
                        if let Some(value) = value {
                            base.set(spec.name, value);
                        }
                    }
                }
            }
            if let Some(Value::Float(d)) = base.get("duration_s") {
                if *d <= 0.0 {
                    return Err(self.err(
                        t.get("duration_s").map(|v| v.span()).unwrap_or(item.span()),
                        &format!("{path}.duration_s"),
                        "must be more than 0 seconds",
                    ));
                }
            }
            let rows = match t.get("rows") {
                Some(r) => {
                    let names: Vec<&str> = wl.params().iter().map(|p| p.name).collect();
                    self.choice(r, &format!("{path}.rows"), &names)?
                }
                None => {
                    let default = wl.row_param();
                    if axes.iter().any(|(n, _)| n == default) || axes.is_empty() {
                        default.to_string()
                    } else {
                        axes.last().unwrap().0.clone()
                    }
                }
            };

            // Configuration overrides for this workload.
            let mut overrides = Vec::with_capacity(configurations.len());
            for (c, set) in config_sets.iter().enumerate() {
                let mut o = Params::default();
                for (j, (k, v)) in set.iter().enumerate() {
                    if let Some(spec) = wl.params().iter().find(|p| p.name == k) {
                        let key = format!("configuration[{c}].set.{k}");
                        o.set(k, self.scalar(v, &key, spec.kind)?);
                        used_set_keys[c][j] = true;
                    }
                }
                overrides.push(o);
            }

            let host_key = |key: &str| -> Result<Option<String>, StudyError> {
                match t.get(key) {
                    None => Ok(None),
                    Some(v) => self
                        .choice(v, &format!("{path}.{key}"), host_names)
                        .map(Some),
                }
            };
            let client_hosts = match t.get("client") {
                None => vec![DEFAULT_CLIENT_HOST.to_string()],
                Some(v) => {
                    let key = format!("{path}.client");
                    let list = self.name_list(
                        v,
                        &key,
                        host_names,
                        true,
                        &format!(
                            "expected a host name or a non-empty list of them (hosts: {})",
                            quoted_list(host_names)
                        ),
                    )?;
                    if list.len() > 1 && !wl.clients_axis() {
                        return Err(self.err(
                            v.span(),
                            &key,
                            format!(
                                "`{kind}` runs one client per target: several client hosts need a workload with a clients axis"
                            ),
                        ));
                    }
                    list
                }
            };
            let client = client_hosts[0].clone();
            let servers = match (t.get("targets"), host_key("server")?) {
                (Some(v), None) => self.name_list(
                    v,
                    &format!("{path}.targets"),
                    host_names,
                    false,
                    &format!(
                        "expected a non-empty list of host names (hosts: {})",
                        quoted_list(host_names)
                    ),
                )?,
                (Some(v), Some(_)) => {
                    return Err(self.err(
                        v.span(),
                        &format!("{path}.targets"),
                        "give either `server` (one host) or `targets` (several), not both",
                    ))
                }
                (None, server) => vec![server.unwrap_or_else(|| DEFAULT_SERVER_HOST.to_string())],
            };
            // A workload that drives a real server: its services are its
            // targets, and their hosts the server hosts.
            let mut servers = servers;
            let service_names = match t.get("service") {
                None => Vec::new(),
                Some(v) => {
                    let key = format!("{path}.service");
                    let names: Vec<&str> = services.iter().map(|s| s.name.as_str()).collect();
                    if wl.server_side() != ServerSide::Service {
                        return Err(self.err(
                            v.span(),
                            &key,
                            format!("`{kind}` runs its own server side: `service` is for workloads that drive a real server"),
                        ));
                    }
                    let out = self.name_list(
                        v,
                        &key,
                        &names,
                        true,
                        "expected a service name or a non-empty list of them",
                    )?;
                    let host_of = |n: &String| {
                        services
                            .iter()
                            .find(|s| &s.name == n)
                            .map(|s| s.host.as_str())
                    };
                    for (j, n) in out.iter().enumerate() {
                        if out[..j].iter().any(|o| host_of(o) == host_of(n)) {
                            return Err(self.err(
                                v.span(),
                                &key,
                                format!("`{n}` shares its host with another listed service (each target is one host)"),
                            ));
                        }
                    }
                    out
                }
            };
            if wl.server_side() == ServerSide::Service {
                if service_names.is_empty() {
                    return Err(self.err(
                        item.span(),
                        &format!("{path}.service"),
                        format!("missing: `{kind}` drives a real server: name its [[service]] (service = \"NAME\")"),
                    ));
                }
                for key in ["server", "targets"] {
                    if let Some(v) = t.get(key) {
                        return Err(self.err(
                            v.span(),
                            &format!("{path}.{key}"),
                            "a service workload's targets are its services' hosts: give `service` instead",
                        ));
                    }
                }
                servers = service_names
                    .iter()
                    .map(|n| {
                        services
                            .iter()
                            .find(|s| &s.name == n)
                            .expect("chosen")
                            .host
                            .clone()
                    })
                    .collect();
            }
            let entry = WorkloadEntry {
                services: service_names,
                name,
                kind,
                repetitions,
                adaptive,
                quiesce_s,
                rows,
                axes,
                base,
                overrides,
                servers,
                client,
                client_hosts,
            };

            // Stage two: every expanded point must satisfy the workload's own rules.
            for point in entry.points() {
                for o in &entry.overrides {
                    let mut p = point.clone();
                    p.0.extend(o.0.clone());
                    if let Err((key, msg)) = wl.validate(&p) {
                        let span = t.get(key.as_str()).map(|v| v.span()).unwrap_or(item.span());
                        return Err(self.err(span, &format!("{path}.{key}"), msg));
                    }
                }
            }
            workloads.push(entry);
        }
        for (c, set) in config_sets.iter().enumerate() {
            for (j, (k, v)) in set.iter().enumerate() {
                if !used_set_keys[c][j] {
                    return Err(self.err(v.span(), &format!("configuration[{c}].set.{k}"), "no workload of this study has this parameter, so setting it would change nothing"));
                }
            }
        }

        Ok(workloads)
    }
}
