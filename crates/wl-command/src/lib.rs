//! Any benchmark under benchlab. `command` runs a program on the
//! workload's client host and reads its metrics from its output with a
//! parser (`json`, `regex`, `csv`, `lines`); `command.client` does the same
//! against a study's `[[service]]` (iperf3's server, redis-server), which
//! the service machinery starts, probes, journals and stops. The classic
//! tools' adapters are the same workload declared as data: `tools/*.toml`,
//! compiled in and registered as `tool.NAME`.
//!
//! Each metric declares its unit and which direction is better, so that
//! the engine's statistics, verdicts and advantages treat a tool's figure
//! like a native workload's.

pub mod def;
pub mod exec;
pub mod parse;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use benchlab_core::param::{ParamDefault, ParamKind, ParamSpec, DURATION};
use benchlab_core::ValidationError;
use benchlab_core::{
    Better, ClientCtx, Combine, MetricSpec, Params, Sample, ServerSide, SideResult, Value,
    Workload, WorkloadError,
};

use def::{MetricDef, ServerMode, ToolDef};
use exec::ExecError;
use parse::ParserKind;

/// The tool files shipped with benchlab (`tools/` at the repository root),
/// compiled in so that a copied binary and every agent have them.
pub const SHIPPED: &[(&str, &str)] = &[
    ("fio", include_str!("../../../tools/fio.toml")),
    ("iperf3", include_str!("../../../tools/iperf3.toml")),
    ("sockperf", include_str!("../../../tools/sockperf.toml")),
    (
        "sysbench-cpu",
        include_str!("../../../tools/sysbench-cpu.toml"),
    ),
    (
        "sysbench-memory",
        include_str!("../../../tools/sysbench-memory.toml"),
    ),
    (
        "sysbench-fileio",
        include_str!("../../../tools/sysbench-fileio.toml"),
    ),
    (
        "redis-benchmark",
        include_str!("../../../tools/redis-benchmark.toml"),
    ),
    ("pgbench", include_str!("../../../tools/pgbench.toml")),
    ("stress-ng", include_str!("../../../tools/stress-ng.toml")),
    ("hyperfine", include_str!("../../../tools/hyperfine.toml")),
    ("netperf", include_str!("../../../tools/netperf.toml")),
    ("iozone", include_str!("../../../tools/iozone.toml")),
    (
        "sfnt-pingpong",
        include_str!("../../../tools/sfnt-pingpong.toml"),
    ),
];

/// Parameters every command workload has.
const TIMEOUT_HELP: &str = "time limit of one run of the command (s): past it the command and its process group are killed and the point fails";
const SCRATCH_PARENT: ParamSpec = ParamSpec {
    name: "scratch_parent",
    kind: ParamKind::Text,
    default: ParamDefault::Unset,
    help: "where the run's scratch directory ({scratch}, the command's working directory, removed after) is made (default: the host's temporary directory)",
};

const INLINE_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "command",
        kind: ParamKind::Text,
        default: ParamDefault::Unset,
        help: "the command line: words split as a shell would (quotes), run without a shell; placeholders {NAME} for every parameter, {scratch}, {repetition}, {host.NAME} (the data address of the study's host NAME), and for command.client {server.host}, {server.port}",
    },
    ParamSpec {
        name: "shell",
        kind: ParamKind::Bool,
        default: ParamDefault::Bool(false),
        help: "run the command through `sh -c` (pipes, redirections); substituted values are quoted",
    },
    ParamSpec {
        name: "parser",
        kind: ParamKind::Choice(parse::PARSERS),
        default: ParamDefault::Str("lines"),
        help: "how the output is read: json (a path per metric), regex (named groups of `pattern`), csv (a column), lines (`key: value`)",
    },
    ParamSpec {
        name: "pattern",
        kind: ParamKind::Text,
        default: ParamDefault::Unset,
        help: "parser = \"regex\": the regular expression, with a named group per metric ((?P<rate>[0-9.]+))",
    },
    ParamSpec {
        name: "metrics",
        kind: ParamKind::Text,
        default: ParamDefault::Unset,
        help: "the metrics, one per line or `;`-separated: `NAME (UNIT) higher|lower: SELECTOR`, optionally `* FACTOR` or `/ DIVISOR`",
    },
    ParamSpec {
        name: "output",
        kind: ParamKind::Text,
        default: ParamDefault::Unset,
        help: "a file the command writes its results to ({scratch}/out.json), parsed instead of its standard output",
    },
    ParamSpec {
        name: "stderr",
        kind: ParamKind::Bool,
        default: ParamDefault::Bool(false),
        help: "parse standard error instead of standard output",
    },
    ParamSpec {
        name: "timeout_s",
        // Not `Seconds`: `run --scale` and `--quick` shrink durations, and
        // a limit shrunk with them would kill a tool's start-up.
        kind: ParamKind::Float,
        default: ParamDefault::Float(600.0),
        help: TIMEOUT_HELP,
    },
    SCRATCH_PARENT,
    DURATION,
    ParamSpec {
        name: "message_size",
        kind: ParamKind::Bytes,
        default: ParamDefault::Unset,
        help: "a sweepable size for {message_size}",
    },
    ParamSpec {
        name: "clients",
        kind: ParamKind::Count,
        default: ParamDefault::Unset,
        help: "a sweepable count for {clients}",
    },
    ParamSpec {
        name: "threads",
        kind: ParamKind::Count,
        default: ParamDefault::Unset,
        help: "a sweepable count for {threads}",
    },
    ParamSpec {
        name: "size",
        kind: ParamKind::Bytes,
        default: ParamDefault::Unset,
        help: "a sweepable size for {size}",
    },
    ParamSpec {
        name: "arg",
        kind: ParamKind::Text,
        default: ParamDefault::Unset,
        help: "a sweepable word for {arg}",
    },
    ParamSpec {
        name: "build",
        kind: ParamKind::Text,
        default: ParamDefault::Unset,
        help: "a directory for {build}: the build of the version under test, which `benchlab bisect --repo` sets per configuration",
    },
];

/// A command workload: the inline `command` kinds, or a tool file's.
pub struct CommandWorkload {
    kind: &'static str,
    summary: &'static str,
    params: &'static [ParamSpec],
    row: &'static str,
    server: ServerMode,
    tool: Option<Tool>,
}

struct Tool {
    def: ToolDef,
    metrics: Vec<MetricSpec>,
    /// The patterns and the retry rule's, compiled once.
    patterns: Vec<regex::Regex>,
    retry: Option<(def::RetryDef, regex::Regex)>,
}

/// `kind = "command"`: a command on its own.
pub static COMMAND: CommandWorkload = CommandWorkload {
    kind: "command",
    summary:
        "any program on the client host; metrics read from its output (json, regex, csv, lines)",
    params: INLINE_PARAMS,
    row: "message_size",
    server: ServerMode::None,
    tool: None,
};

/// `kind = "command.client"`: a command against a study's `[[service]]`.
pub static COMMAND_CLIENT: CommandWorkload = CommandWorkload {
    kind: "command.client",
    summary: "any program on the client host against a [[service]] (service = \"NAME\"), reached at {server.host}:{server.port}; metrics read from its output",
    params: INLINE_PARAMS,
    row: "message_size",
    server: ServerMode::Service,
    tool: None,
};

impl CommandWorkload {
    /// A tool file's workload.
    pub fn from_tool(def: ToolDef) -> Result<CommandWorkload, String> {
        let mut params = Vec::new();
        for p in &def.param {
            params.push(p.spec()?);
        }
        if !def.param.iter().any(|p| p.name == "timeout_s") {
            params.push(ParamSpec {
                name: "timeout_s",
                kind: ParamKind::Float,
                default: ParamDefault::Float(def.timeout_s),
                help: TIMEOUT_HELP,
            });
        }
        params.push(SCRATCH_PARENT);
        let tool_name = def.kind.trim_start_matches("tool.").to_string();
        let metrics = def.metric.iter().map(|m| m.spec(&tool_name)).collect();
        let w = CommandWorkload {
            kind: def::intern(&def.kind),
            summary: def::intern(&def.summary),
            params: Box::leak(params.into_boxed_slice()),
            row: def::intern(&def.row),
            server: def.server,
            tool: Some(Tool {
                patterns: parse::compile_patterns(&def.pattern)?,
                retry: match &def.retry {
                    Some(r) => Some((r.clone(), r.pattern()?)),
                    None => None,
                },
                def,
                metrics,
            }),
        };
        // Every placeholder of the tool's templates must be known.
        w.check_placeholders(&w.recipe(&Params::default()).map_err(|e| e.message)?, None)
            .map_err(|e| e.message)?;
        Ok(w)
    }

    /// The program a point needs and where to get it, for a tool; the
    /// command's first word for an inline command without a shell.
    pub fn program(&self, params: &Params) -> Option<(String, String)> {
        match &self.tool {
            Some(t) => {
                let mut how = Vec::new();
                if let Some(p) = &t.def.package {
                    how.push(format!("Debian package `{p}` (apt-get install {p})"));
                }
                if let Some(u) = &t.def.url {
                    how.push(u.clone());
                }
                Some((t.def.program.clone(), how.join(", or ")))
            }
            None => {
                if params.bool("shell").unwrap_or(false) {
                    return None;
                }
                let words = shlex::split(params.str("command").ok()?)?;
                let first = words.first()?;
                (!first.contains('{')).then(|| (first.clone(), "it is not on the PATH".into()))
            }
        }
    }

    /// A program this point needs that this host lacks, with where to get
    /// it (`benchlab check` shows it; the run skips the point).
    pub fn missing_here(&self, params: &Params) -> Option<String> {
        let (program, how) = self.program(params)?;
        if exec::find_program(&program).is_some() {
            return None;
        }
        Some(format!("`{program}` is not installed: {how}"))
    }
}

/// What one point runs: the templates with the point's parser and metrics.
struct Recipe {
    command: String,
    shell: bool,
    before: Vec<String>,
    parser: ParserKind,
    patterns: Vec<regex::Regex>,
    metrics: Vec<MetricDef>,
    output: Option<String>,
    stderr: bool,
    retry: Option<(def::RetryDef, regex::Regex)>,
}

type Problem = ValidationError;

impl CommandWorkload {
    fn recipe(&self, params: &Params) -> Result<Recipe, Problem> {
        if let Some(t) = &self.tool {
            let d = &t.def;
            return Ok(Recipe {
                command: d.command.clone(),
                shell: d.shell,
                before: d.before.clone(),
                parser: d.parser,
                patterns: t.patterns.clone(),
                metrics: d.metric.clone(),
                output: d.output.clone(),
                stderr: d.stderr,
                retry: t.retry.clone(),
            });
        }
        let command = params.str("command").map_err(|_| {
            ValidationError::new(
                "command",
                "missing: the command line to run (command = \"program arg …\")",
            )
        })?;
        let parser = ParserKind::from_name(params.str("parser").unwrap_or("lines"))
            .expect("a choice of PARSERS");
        let patterns = match (parser, params.str("pattern")) {
            (ParserKind::Regex, Ok(p)) => parse::compile_patterns(&[p.to_string()])
                .map_err(|e| ValidationError::new("pattern", e))?,
            (ParserKind::Regex, Err(_)) => {
                return Err(ValidationError::new(
                    "pattern",
                    "missing: parser = \"regex\" needs a pattern with a named group per metric",
                ))
            }
            (_, Ok(_)) => {
                return Err(ValidationError::new(
                    "pattern",
                    "is only for parser = \"regex\"",
                ))
            }
            (_, Err(_)) => Vec::new(),
        };
        let metrics = match params.str("metrics") {
            Ok(text) => {
                def::compact_metrics(text).map_err(|e| ValidationError::new("metrics", e))?
            }
            Err(_) => return Err(ValidationError::new(
                "metrics",
                "missing: the metrics to read, `NAME (UNIT) higher|lower: SELECTOR`, one per line",
            )),
        };
        def::check_metrics(&metrics, parser, &parse::group_names(&patterns))
            .map_err(|e| ValidationError::new("metrics", e))?;
        Ok(Recipe {
            command: command.to_string(),
            shell: params.bool("shell").unwrap_or(false),
            before: Vec::new(),
            parser,
            patterns,
            metrics,
            output: params.str("output").ok().map(String::from),
            stderr: params.bool("stderr").unwrap_or(false),
            retry: None,
        })
    }

    /// The recipe's templates, each with the key a problem in it is
    /// reported under (a tool's: its `kind`).
    fn templates<'r>(&self, r: &'r Recipe) -> Vec<(&'static str, &'r str)> {
        let key = |k: &'static str| if self.tool.is_some() { "kind" } else { k };
        let mut templates = vec![(key("command"), r.command.as_str())];
        templates.extend(r.before.iter().map(|b| (key("command"), b.as_str())));
        if let Some(o) = &r.output {
            templates.push((key("output"), o.as_str()));
        }
        templates
    }

    /// Checks every placeholder of the recipe's templates: a parameter
    /// (with a value, when `params` is given) or one of benchlab's own.
    fn check_placeholders(&self, r: &Recipe, params: Option<&Params>) -> Result<(), Problem> {
        for (k, t) in self.templates(r) {
            for name in exec::placeholders(t).map_err(|e| ValidationError::new(k, e))? {
                let name = name.strip_suffix(CEIL).unwrap_or(&name).to_string();
                if BUILTIN.contains(&name.as_str()) {
                    continue;
                }
                if let Some(host) = name.strip_prefix(HOST_PREFIX) {
                    // Which hosts exist is the study's to say (host_refs).
                    if host.is_empty() {
                        return Err(ValidationError::new(
                            k,
                            "`{host.}` names no host: `{host.NAME}` with a [[host]]'s name",
                        ));
                    }
                    continue;
                }
                if SERVER_BUILTIN.contains(&name.as_str()) {
                    if self.server == ServerMode::Service {
                        continue;
                    }
                    return Err(ValidationError::new(k, format!("`{{{name}}}`: `{}` has no server (kind = \"command.client\" with service = \"NAME\" has one)", self.kind)));
                }
                if !self.params.iter().any(|p| p.name == name) {
                    return Err(ValidationError::new(
                        k,
                        format!(
                            "unknown placeholder `{{{name}}}` (parameters: {}; benchlab's: {}, host.NAME)",
                            self.params
                                .iter()
                                .map(|p| p.name)
                                .collect::<Vec<_>>()
                                .join(", "),
                            BUILTIN.join(", ")
                        ),
                    ));
                }
                if let Some(p) = params {
                    if p.get(&name).is_none() {
                        return Err(ValidationError::new(
                            name.clone(),
                            format!("missing: the command uses `{{{name}}}`, so give it a value"),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// `{duration_s:ceil}`: the value rounded up to a whole number, at least 1
/// (tools whose seconds are integers: iperf3 -t 0 would run for ever, and
/// `run --quick` makes durations fractions of a second).
const CEIL: &str = ":ceil";

/// Placeholders benchlab sets for every command.
const BUILTIN: &[&str] = &["scratch", "repetition"];
/// `{host.NAME}`: the data address of the study's host NAME.
const HOST_PREFIX: &str = "host.";
/// Placeholders set when a service serves the command.
const SERVER_BUILTIN: &[&str] = &["server", "server.host", "server.port"];

/// A parameter's value as a command line gets it: integers plain, whole
/// seconds without a fraction (`-t 10`, not `-t 10.0`).
fn word(v: &Value) -> String {
    match v {
        Value::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", *f as i64),
        other => other.label(),
    }
}

/// The scratch directory of one run, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn make(parent: &Path) -> Result<Scratch, WorkloadError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = parent.join(format!(
            "benchlab-command-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir)
            .map_err(|e| WorkloadError::io(format!("making {}", dir.display()), e))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Workload for CommandWorkload {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn summary(&self) -> &'static str {
        self.summary
    }

    fn params(&self) -> &'static [ParamSpec] {
        self.params
    }

    fn row_param(&self) -> &'static str {
        self.row
    }

    fn validate(&self, params: &Params) -> Result<(), ValidationError> {
        let r = self.recipe(params)?;
        self.check_placeholders(&r, Some(params))?;
        if let Ok(t) = params.f64("timeout_s") {
            if t <= 0.0 {
                return Err(ValidationError::new(
                    "timeout_s",
                    "must be more than 0 seconds",
                ));
            }
        }
        Ok(())
    }

    fn host_refs(&self, params: &Params) -> Vec<(String, String)> {
        let Ok(r) = self.recipe(params) else {
            return Vec::new();
        };
        let mut refs: Vec<(String, String)> = Vec::new();
        for (k, t) in self.templates(&r) {
            for name in exec::placeholders(t).unwrap_or_default() {
                if let Some(host) = name.strip_prefix(HOST_PREFIX) {
                    if !host.is_empty() && !refs.iter().any(|(_, h)| h == host) {
                        refs.push((k.to_string(), host.to_string()));
                    }
                }
            }
        }
        refs
    }

    fn table_metrics(&self, params: &Params) -> Vec<MetricSpec> {
        let tool = self.kind.trim_start_matches("tool.");
        match &self.tool {
            Some(t) => t
                .metrics
                .iter()
                .zip(&t.def.metric)
                .filter(|(_, d)| d.table)
                .map(|(s, _)| *s)
                .collect(),
            None => self
                .recipe(params)
                .map(|r| r.metrics.iter().map(|m| m.spec(tool)).collect())
                .unwrap_or_default(),
        }
    }

    fn metrics(&self, params: &Params) -> Vec<MetricSpec> {
        let tool = self.kind.trim_start_matches("tool.");
        let mut all: Vec<MetricSpec> = match &self.tool {
            Some(t) => t.metrics.clone(),
            None => self
                .recipe(params)
                .map(|r| r.metrics.iter().map(|m| m.spec(tool)).collect())
                .unwrap_or_default(),
        };
        all.push(MetricSpec {
            name: "command_wall_s",
            label: "Command wall-clock time (s)",
            better: Better::Lower,
            decimals: 3,
            combine: Combine::Max,
        });
        all.push(MetricSpec::lower(
            "command_cpu_s",
            "Command CPU time, user + system (s)",
            3,
        ));
        all
    }

    fn expected_duration(&self, params: &Params) -> Duration {
        Duration::from_secs_f64(params.f64("duration_s").unwrap_or(1.0).max(0.0))
    }

    fn server_side(&self) -> ServerSide {
        match self.server {
            ServerMode::None => ServerSide::None,
            ServerMode::Service => ServerSide::Service,
        }
    }

    fn run_client(&self, params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
        let r = self
            .recipe(params)
            .map_err(|e| WorkloadError::Other(e.to_string()))?;
        if let Some(missing) = self.missing_here(params) {
            return Err(WorkloadError::Unsupported(missing));
        }
        let parent = match params.str("scratch_parent") {
            Ok(p) => PathBuf::from(p),
            Err(_) => std::env::temp_dir(),
        };
        let scratch = Scratch::make(&parent)?;
        let server = ctx.server;
        let scratch_text = scratch.0.display().to_string();
        let lookup = |name: &str| -> Option<String> {
            if let Some(base) = name.strip_suffix(CEIL) {
                let x = params.get(base)?.as_f64()?;
                return Some(format!("{}", x.ceil().max(1.0) as i64));
            }
            match name {
                "scratch" => Some(scratch_text.clone()),
                "repetition" => Some(ctx.repetition.to_string()),
                "server" => server.map(|s| s.to_string()),
                "server.host" => server.map(|s| s.ip().to_string()),
                "server.port" => server.map(|s| s.port().to_string()),
                other => match other.strip_prefix(HOST_PREFIX) {
                    Some(host) => ctx.hosts.get(host).cloned(),
                    None => params.get(other).map(word),
                },
            }
        };
        let mut env: Vec<(String, String)> = params
            .0
            .iter()
            .map(|(k, v)| (format!("BENCHLAB_{}", k.to_uppercase()), word(v)))
            .collect();
        env.push(("BENCHLAB_SCRATCH".into(), scratch_text.clone()));
        // A shell script's view of `{host.NAME}`: BENCHLAB_HOST_NAME.
        for (name, address) in &ctx.hosts {
            let var: String = name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            env.push((format!("BENCHLAB_HOST_{var}"), address.clone()));
        }
        if let Some(s) = server {
            env.push(("BENCHLAB_SERVER_HOST".into(), s.ip().to_string()));
            env.push(("BENCHLAB_SERVER_PORT".into(), s.port().to_string()));
        }
        let timeout = Duration::from_secs_f64(params.f64("timeout_s").unwrap_or(600.0));
        let shown_argv = |template: &str| -> Result<(Vec<String>, String), WorkloadError> {
            let argv = exec::argv(template, r.shell, &lookup).map_err(WorkloadError::Other)?;
            let shown = argv.join(" ");
            Ok((argv, shown))
        };
        let start = |argv: &[String], shown: &str| -> Result<exec::Outcome, WorkloadError> {
            exec::run(argv, &scratch.0, &env, timeout, &ctx.abort).map_err(|e| match e {
                ExecError::NotFound(p) => {
                    WorkloadError::Unsupported(format!("`{p}` is not installed on this host"))
                }
                ExecError::Spawn(p, e) => WorkloadError::io(format!("starting `{p}`"), e),
                ExecError::Timeout { after, stderr } => WorkloadError::Other(format!(
                    "`{shown}` ran past its time limit of {} s (timeout_s) and was killed with its process group{}",
                    after.as_secs_f64(),
                    if stderr.is_empty() { String::new() } else { format!("; stderr: {stderr}") }
                )),
                ExecError::Aborted => WorkloadError::Aborted,
            })
        };
        let succeeded = |o: exec::Outcome, shown: &str| -> Result<exec::Outcome, WorkloadError> {
            if !o.success() {
                let (which, text) = if o.stderr.trim().is_empty() {
                    ("stdout", &o.stdout)
                } else {
                    ("stderr", &o.stderr)
                };
                return Err(WorkloadError::Other(format!(
                    "`{shown}` {}; {which}: {}",
                    o.status_text(),
                    exec::tail(text, 10)
                )));
            }
            Ok(o)
        };
        for b in &r.before {
            let (argv, shown) = shown_argv(b)?;
            succeeded(start(&argv, &shown)?, &shown)?;
        }
        let (argv, shown) = shown_argv(&r.command)?;
        let mut refused = 0u32;
        let o = loop {
            let o = start(&argv, &shown)?;
            let Some((rule, when)) = &r.retry else {
                break o;
            };
            if !(when.is_match(&o.stdout) || when.is_match(&o.stderr)) {
                break o;
            }
            if refused == rule.attempts {
                let (which, text) = if when.is_match(&o.stderr) {
                    ("stderr", &o.stderr)
                } else {
                    ("stdout", &o.stdout)
                };
                return Err(WorkloadError::Other(format!(
                    "`{shown}` was refused ({}) on every one of {} attempts; the last one's {which}: {}",
                    rule.name,
                    rule.attempts + 1,
                    exec::tail(text, 10)
                )));
            }
            refused += 1;
            // The pause, cut short when the point is abandoned.
            let until = std::time::Instant::now() + rule.pause(refused);
            while std::time::Instant::now() < until {
                if ctx.abort.load(std::sync::atomic::Ordering::Relaxed) {
                    return Err(WorkloadError::Aborted);
                }
                std::thread::sleep(Duration::from_millis(10).min(rule.pause(refused)));
            }
        };
        let o = succeeded(o, &shown)?;
        let text = match &r.output {
            Some(file) => {
                let path = substitute_path(file, &lookup, &scratch.0)?;
                std::fs::read_to_string(&path).map_err(|e| {
                    WorkloadError::io(
                        format!("reading the command's output file {}", path.display()),
                        e,
                    )
                })?
            }
            None if r.stderr => o.stderr.clone(),
            None => o.stdout.clone(),
        };
        let values = read_metrics(&r, &text).map_err(|e| {
            WorkloadError::Other(format!("{}'s output: {e}", self.program_name(params)))
        })?;
        let mut side = SideResult {
            values,
            ..SideResult::default()
        };
        side.values
            .insert("command_wall_s".into(), o.wall.as_secs_f64());
        side.values.insert("command_cpu_s".into(), o.cpu_s);
        if let Some((rule, _)) = &r.retry {
            side.counters
                .insert(format!("retries.{}", rule.name), u64::from(refused));
        }
        side.peak_rss_kib = benchlab_core::cpu::peak_rss_kib();
        Ok(side)
    }

    fn combine(
        &self,
        params: &Params,
        client: SideResult,
        server: Option<SideResult>,
    ) -> Result<Sample, WorkloadError> {
        let mut sample = Sample::default();
        for m in self.metrics(params) {
            let v = client.value(m.name);
            if !v.is_finite() {
                return Err(WorkloadError::Other(format!(
                    "metric `{}` was not read from the output",
                    m.name
                )));
            }
            sample.metrics.insert(m.name.to_string(), v);
        }
        sample.client = client;
        sample.server = server;
        Ok(sample)
    }
}

impl CommandWorkload {
    /// Reads one run's output as a point with `params` would: the
    /// declared metrics, scaled, or the message the point would fail with
    /// (the parser's, naming the metric and the place).
    pub fn read_output(
        &self,
        params: &Params,
        text: &str,
    ) -> Result<BTreeMap<String, f64>, String> {
        let r = self.recipe(params).map_err(|e| e.to_string())?;
        read_metrics(&r, text)
    }

    fn program_name(&self, params: &Params) -> String {
        self.program(params)
            .map(|(p, _)| format!("`{p}`"))
            .unwrap_or_else(|| "the command".into())
    }
}

fn substitute_path(
    template: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    scratch: &Path,
) -> Result<PathBuf, WorkloadError> {
    let p = PathBuf::from(exec::substitute(template, lookup).map_err(WorkloadError::Other)?);
    Ok(if p.is_absolute() { p } else { scratch.join(p) })
}

/// Every declared metric read from `text`, scaled.
fn read_metrics(r: &Recipe, text: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut out = BTreeMap::new();
    let mut range = Ok(());
    let mut put = |m: &MetricDef, x: f64| {
        let v = x * m.scale;
        if !v.is_finite() && range.is_ok() {
            range = Err(format!(
                "metric `{}`: {x:e} × its scale {} is out of range",
                m.name, m.scale
            ));
        }
        out.insert(m.name.clone(), v);
    };
    match r.parser {
        ParserKind::Json => {
            let doc = parse::json_doc(text)?;
            // iperf3 -J reports its failures (a busy server, a refused
            // connection) in the document, exiting 0 at times.
            if let Some(e) = doc.get("error").and_then(|e| e.as_str()) {
                return Err(format!("it reported an error: {e}"));
            }
            for m in &r.metrics {
                let path =
                    parse::json_path(&m.select).map_err(|e| format!("path `{}`: {e}", m.select))?;
                put(
                    m,
                    parse::json_number(&doc, &path)
                        .map_err(|e| format!("metric `{}`: {e}", m.name))?,
                );
            }
        }
        ParserKind::Regex => {
            let groups = parse::regex_values(&r.patterns, text);
            for m in &r.metrics {
                let raw = groups.get(&m.select).ok_or_else(|| {
                    format!(
                        "metric `{}`: the pattern's group `{}` matched nothing; the output begins {}",
                        m.name,
                        m.select,
                        parse::excerpt(text)
                    )
                })?;
                put(
                    m,
                    parse::leading_number(raw).ok_or_else(|| {
                        format!(
                            "metric `{}`: group `{}` holds {raw:?}, not a number",
                            m.name, m.select
                        )
                    })?,
                );
            }
        }
        ParserKind::Csv => {
            let table = parse::csv_table(text)?;
            for m in &r.metrics {
                let (col, row) = parse::csv_selector(&m.select)?;
                put(
                    m,
                    table
                        .number(&col, &row)
                        .map_err(|e| format!("metric `{}`: {e}", m.name))?,
                );
            }
        }
        ParserKind::Lines => {
            let lines = parse::lines_values(text);
            for m in &r.metrics {
                let raw = lines.get(m.select.trim()).ok_or_else(|| {
                    format!(
                        "metric `{}`: no line `{}: VALUE`; the output begins {}",
                        m.name,
                        m.select.trim(),
                        parse::excerpt(text)
                    )
                })?;
                put(
                    m,
                    parse::leading_number(raw).ok_or_else(|| {
                        format!(
                            "metric `{}`: `{}` is {raw:?}, not a number",
                            m.name,
                            m.select.trim()
                        )
                    })?,
                );
            }
        }
    }
    range?;
    Ok(out)
}

/// Every command workload: `command`, `command.client` and one per
/// shipped tool file, built once.
pub fn workloads() -> &'static [&'static dyn Workload] {
    static ALL: OnceLock<Vec<&'static dyn Workload>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all: Vec<&'static dyn Workload> = vec![&COMMAND, &COMMAND_CLIENT];
        for w in tools() {
            all.push(*w);
        }
        all
    })
}

/// The shipped tools' workloads.
pub fn tools() -> &'static [&'static CommandWorkload] {
    static TOOLS: OnceLock<Vec<&'static CommandWorkload>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        SHIPPED
            .iter()
            .map(|(name, text)| {
                let def = ToolDef::parse(text)
                    .unwrap_or_else(|e| panic!("tools/{name}.toml (compiled in): {e}"));
                let w = CommandWorkload::from_tool(def)
                    .unwrap_or_else(|e| panic!("tools/{name}.toml (compiled in): {e}"));
                &*Box::leak(Box::new(w))
            })
            .collect()
    })
}

/// The command workload of `kind`, for callers that hold a kind (the
/// CLI's `check` asks it what a point needs installed).
pub fn command_workload(kind: &str) -> Option<&'static CommandWorkload> {
    match kind {
        "command" => Some(&COMMAND),
        "command.client" => Some(&COMMAND_CLIENT),
        _ => tools().iter().copied().find(|t| t.kind == kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_file_is_shipped_and_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".toml"))
            .map(|n| n.trim_end_matches(".toml").to_string())
            .collect();
        on_disk.sort();
        let mut shipped: Vec<String> = SHIPPED.iter().map(|(n, _)| n.to_string()).collect();
        shipped.sort();
        assert_eq!(on_disk, shipped, "tools/ and SHIPPED differ");
        for t in tools() {
            assert!(t.kind.starts_with("tool."));
            assert!(
                !t.table_metrics(&Params::default()).is_empty(),
                "{}",
                t.kind
            );
        }
    }

    /// iperf3's refusals are retried only when no interval was measured:
    /// a test that failed halfway is a failed repetition, not a refusal.
    #[test]
    fn iperf3_retries_refusals_only() {
        let w = command_workload("tool.iperf3").unwrap();
        let rule = w.tool.as_ref().unwrap().def.retry.as_ref().unwrap();
        let when = rule.pattern().unwrap();
        let doc = |intervals: &str, error: &str| {
            format!("{{\n\t\"start\":\t{{\n\t}},\n\t\"intervals\":\t[{intervals}],\n\t\"end\":\t{{\n\t}},\n\t\"error\":\t\"{error}\"\n}}")
        };
        for e in [
            "the server is busy running a test. try again later",
            "unable to connect to server: Connection refused",
            "unable to receive control message: Connection reset by peer",
        ] {
            assert!(when.is_match(&doc("", e)), "{e}");
            assert!(
                !when.is_match(&doc("{\"sum\": {}}", e)),
                "{e} after an interval"
            );
        }
        for e in [
            "unable to connect to server: No route to host",
            "control socket has closed unexpectedly",
        ] {
            assert!(!when.is_match(&doc("", e)), "{e}");
        }
    }

    /// Every tool with a Debian package is in scripts/packages.txt, the
    /// one list scripts/setup.sh installs from, under its program.
    #[test]
    fn every_tools_package_is_in_the_setup_list() {
        let list = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/packages.txt"),
        )
        .unwrap();
        let lines: Vec<Vec<&str>> = list
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| l.split_whitespace().collect())
            .collect();
        for t in tools() {
            let Some(pkg) = &t.tool.as_ref().unwrap().def.package else {
                continue;
            };
            let program = &t.tool.as_ref().unwrap().def.program;
            assert!(
                lines.iter().any(|l| l[0].split(',').any(|p| p == "tool")
                    && l[1] == program
                    && l[2] == pkg),
                "{}: no `tool {program} {pkg}` line in scripts/packages.txt",
                t.kind
            );
        }
    }

    fn inline(pairs: &[(&str, Value)]) -> Params {
        let mut p = Params::defaults(INLINE_PARAMS);
        p.set("duration_s", Value::Float(1.0));
        for (k, v) in pairs {
            p.set(k, v.clone());
        }
        p
    }

    fn s(x: &str) -> Value {
        Value::Str(x.into())
    }

    /// A figure the scale takes past f64's range is an error naming the
    /// metric, not an infinity in the store.
    #[test]
    fn a_scaled_figure_out_of_range_is_refused() {
        let p = inline(&[
            ("command", s("true")),
            ("parser", s("json")),
            ("metrics", s("a (x) higher: x * 100")),
        ]);
        assert_eq!(COMMAND.read_output(&p, r#"{"x": 2}"#).unwrap()["a"], 200.0);
        let e = COMMAND.read_output(&p, r#"{"x": 1e308}"#).unwrap_err();
        assert!(
            e.contains("metric `a`: 1e308 × its scale 100 is out of range"),
            "{e}"
        );
    }

    #[test]
    fn inline_validation_names_the_key() {
        let ok = inline(&[
            ("command", s("echo rate: {duration_s}")),
            ("metrics", s("rate (1/s) higher: rate")),
        ]);
        COMMAND.validate(&ok).unwrap();
        let cases = [
            (
                vec![("metrics", s("rate (1/s) higher: rate"))],
                "command",
                "missing",
            ),
            (vec![("command", s("echo"))], "metrics", "missing"),
            (
                vec![
                    ("command", s("echo {nope}")),
                    ("metrics", s("a (s) lower: a")),
                ],
                "command",
                "unknown placeholder `{nope}`",
            ),
            (
                vec![
                    ("command", s("echo {message_size}")),
                    ("metrics", s("a (s) lower: a")),
                ],
                "message_size",
                "missing: the command uses",
            ),
            (
                vec![
                    ("command", s("echo {server.port}")),
                    ("metrics", s("a (s) lower: a")),
                ],
                "command",
                "has no server",
            ),
            (
                vec![
                    ("command", s("echo")),
                    ("parser", s("json")),
                    ("metrics", s("a (s) lower: jobs[0")),
                ],
                "metrics",
                "is not closed",
            ),
            (
                vec![
                    ("command", s("echo")),
                    ("parser", s("regex")),
                    ("pattern", s("(?P<x>[0-9]+)")),
                    ("metrics", s("a (s) lower: y")),
                ],
                "metrics",
                "groups: x",
            ),
            (
                vec![
                    ("command", s("echo")),
                    ("parser", s("regex")),
                    ("metrics", s("a (s) lower: y")),
                ],
                "pattern",
                "missing",
            ),
        ];
        for (pairs, key, says) in cases {
            let ValidationError { key: k, message: m } =
                COMMAND.validate(&inline(&pairs)).unwrap_err();
            assert_eq!(k, key, "{m}");
            assert!(m.contains(says), "{key}: {m}");
        }
        COMMAND_CLIENT
            .validate(&inline(&[
                ("command", s("echo {server.host} {server.port}")),
                ("metrics", s("a (s) lower: a")),
            ]))
            .unwrap();
    }
}
