//! What a command workload is made of: its command line, its parser and
//! the metrics it reads, declared either in a tool file (`tools/*.toml`,
//! an adapter shipped as data) or in a study's `kind = "command"` table.

use std::collections::HashSet;
use std::sync::Mutex;

use benchlab_core::param::{ParamDefault, ParamKind, ParamSpec};
use benchlab_core::{Better, Combine, MetricSpec};
use serde::Deserialize;

use crate::parse::{self, ParserKind};

/// Gives a string the program's lifetime. The workload interface hands
/// out `&'static` names (metric and parameter tables are constants for the
/// native workloads); a tool's or a study's names are made once and kept,
/// each distinct string once, so repeated calls do not grow memory.
pub fn intern(s: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut g = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let set = g.get_or_insert_with(HashSet::new);
    if let Some(k) = set.get(s) {
        return k;
    }
    let k: &'static str = Box::leak(s.to_string().into_boxed_str());
    set.insert(k);
    k
}

/// What serves a command's client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerMode {
    /// Nothing: the command runs alone (fio, sysbench, hyperfine).
    #[default]
    None,
    /// A study's `[[service]]` (iperf3's server, redis-server), started,
    /// probed, journaled and stopped by the service machinery; the command
    /// reaches it at `{server.host}`:`{server.port}`.
    Service,
}

/// One metric read from the output.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricDef {
    /// The metric's key (`write_MiBps`): letters, digits, `_`.
    pub name: String,
    /// Its unit, shown in table captions (`MiB/s`).
    pub unit: String,
    /// Which direction is better.
    pub better: Better,
    /// Where the parser finds it (a JSON path, a group, a column, a key).
    pub select: String,
    /// Multiplies the parsed number (bits to 10^6 bit/s: 1e-6).
    #[serde(default = "one")]
    pub scale: f64,
    /// Table caption without the unit; default: the name.
    #[serde(default)]
    pub label: Option<String>,
    /// Decimals shown.
    #[serde(default = "two")]
    pub decimals: usize,
    /// How it combines over several targets; default: sum when higher is
    /// better, mean when lower.
    #[serde(default)]
    pub combine: Option<Combine>,
    /// Whether tables show it (all are stored either way).
    #[serde(default = "yes")]
    pub table: bool,
}

fn one() -> f64 {
    1.0
}
fn two() -> usize {
    2
}
fn yes() -> bool {
    true
}

impl MetricDef {
    /// The metric as the workload interface declares it.
    pub fn spec(&self, tool: &str) -> MetricSpec {
        let label = match &self.label {
            Some(l) => format!("{l} ({})", self.unit),
            None => format!("{tool} {} ({})", self.name, self.unit),
        };
        MetricSpec {
            name: intern(&self.name),
            label: intern(&label),
            better: self.better,
            decimals: self.decimals,
            combine: self.combine.unwrap_or(match self.better {
                Better::Higher => Combine::Sum,
                Better::Lower => Combine::Mean,
            }),
        }
    }
}

/// Metric names the workload sets itself.
pub const OWN_METRICS: &[&str] = &["command_wall_s", "command_cpu_s"];

/// Checks a metric list against a parser: names well formed and unique,
/// selectors readable by the parser (and, for regex, groups the patterns
/// define). Returns the message of the first problem.
pub fn check_metrics(
    metrics: &[MetricDef],
    parser: ParserKind,
    groups: &[String],
) -> Result<(), String> {
    if metrics.is_empty() {
        return Err("no metrics: declare at least one".into());
    }
    let mut seen = HashSet::new();
    for m in metrics {
        if m.name.is_empty()
            || !m
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(format!(
                "metric name `{}`: use letters, digits and `_`",
                m.name
            ));
        }
        if OWN_METRICS.contains(&m.name.as_str()) {
            return Err(format!("metric name `{}` is benchlab's own", m.name));
        }
        if !seen.insert(m.name.as_str()) {
            return Err(format!("metric `{}` is declared twice", m.name));
        }
        if !m.scale.is_finite() || m.scale == 0.0 {
            return Err(format!(
                "metric `{}`: scale must be a non-zero number",
                m.name
            ));
        }
        let bad = |e: String| format!("metric `{}`: selector `{}`: {e}", m.name, m.select);
        match parser {
            ParserKind::Json => {
                parse::json_path(&m.select).map_err(bad)?;
            }
            ParserKind::Csv => {
                parse::csv_selector(&m.select).map_err(bad)?;
            }
            ParserKind::Regex => {
                if !groups.iter().any(|g| g == &m.select) {
                    return Err(bad(format!(
                        "no such named group in the pattern (groups: {})",
                        if groups.is_empty() {
                            "none".to_string()
                        } else {
                            groups.join(", ")
                        }
                    )));
                }
            }
            ParserKind::Lines => {
                if m.select.trim().is_empty() {
                    return Err(bad("an empty key".into()));
                }
            }
        }
    }
    Ok(())
}

/// Reads a study's compact metric list (`kind = "command"`): one metric
/// per line or `;`-separated, each `NAME (UNIT) higher|lower: SELECTOR`,
/// optionally ending in `* FACTOR` or `/ DIVISOR`:
///
/// ```text
/// rate (ops/s) higher: operations per second
/// p99 (ms) lower: latency.p99 / 1000
/// ```
pub fn compact_metrics(text: &str) -> Result<Vec<MetricDef>, String> {
    let mut out = Vec::new();
    for entry in text
        .split(['\n', ';'])
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let want = "expected `NAME (UNIT) higher|lower: SELECTOR`";
        let (head, select) = entry
            .split_once(':')
            .ok_or_else(|| format!("`{entry}`: {want}"))?;
        let head = head.trim();
        let (name, rest) = head
            .split_once('(')
            .ok_or_else(|| format!("`{entry}`: no (UNIT) after the name; {want}"))?;
        let (unit, better) = rest
            .split_once(')')
            .ok_or_else(|| format!("`{entry}`: `(` without `)`; {want}"))?;
        let better = match better.trim() {
            "higher" => Better::Higher,
            "lower" => Better::Lower,
            other => {
                return Err(format!(
                    "`{entry}`: `{other}` is not a direction (allowed: \"higher\", \"lower\")"
                ))
            }
        };
        let (select, scale) = split_scale(select.trim()).map_err(|e| format!("`{entry}`: {e}"))?;
        out.push(MetricDef {
            name: name.trim().to_string(),
            unit: unit.trim().to_string(),
            better,
            select: select.to_string(),
            scale,
            label: None,
            decimals: 2,
            combine: None,
            table: true,
        });
    }
    if out.is_empty() {
        return Err("no metrics: give at least one `NAME (UNIT) higher|lower: SELECTOR`".into());
    }
    Ok(out)
}

/// `sel * 1e-6` → (`sel`, 1e-6); `sel / 1024` → (`sel`, 1/1024).
fn split_scale(s: &str) -> Result<(&str, f64), String> {
    if let Some(i) = s.rfind([' ', '\t']) {
        let (left, factor) = (s[..i].trim_end(), s[i + 1..].trim());
        for (op, inv) in [("*", false), ("/", true)] {
            if let Some(sel) = left.strip_suffix(op) {
                let f: f64 = factor
                    .parse()
                    .map_err(|_| format!("`{factor}` after `{op}` is not a number"))?;
                if !f.is_finite() || f == 0.0 {
                    return Err(format!("`{op} {factor}`: a non-zero number is needed"));
                }
                return Ok((sel.trim_end(), if inv { 1.0 / f } else { f }));
            }
        }
    }
    Ok((s, 1.0))
}

/// One parameter a tool file declares.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamDef {
    /// The key in study files (`block_size`).
    pub name: String,
    /// `bytes`, `count`, `seconds`, `float`, `bool`, `text` or `choice`.
    pub kind: String,
    /// For `choice`: the allowed words.
    #[serde(default)]
    pub choices: Vec<String>,
    /// The default; none: unset (`duration_s`: the study's `[defaults]`).
    #[serde(default)]
    pub default: Option<toml::Value>,
    /// One line of help.
    pub help: String,
}

impl ParamDef {
    /// The parameter as the workload interface declares it.
    pub fn spec(&self) -> Result<ParamSpec, String> {
        let kind = match self.kind.as_str() {
            "bytes" => ParamKind::Bytes,
            "count" => ParamKind::Count,
            "seconds" => ParamKind::Seconds,
            "float" => ParamKind::Float,
            "bool" => ParamKind::Bool,
            "text" => ParamKind::Text,
            "choice" if !self.choices.is_empty() => {
                let words: Vec<&'static str> = self.choices.iter().map(|c| intern(c)).collect();
                ParamKind::Choice(Box::leak(words.into_boxed_slice()))
            }
            "choice" => return Err(format!("`{}`: a choice needs `choices`", self.name)),
            other => {
                return Err(format!(
                "`{}`: kind `{other}` (allowed: bytes, count, seconds, float, bool, text, choice)",
                self.name
            ))
            }
        };
        let bad = || {
            format!(
                "`{}`: default {:?} does not fit kind `{}`",
                self.name, self.default, self.kind
            )
        };
        let default = match (&self.default, kind) {
            (None, _) if self.name == "duration_s" => ParamDefault::Study,
            (None, _) => ParamDefault::Unset,
            (Some(toml::Value::Integer(i)), ParamKind::Bytes | ParamKind::Count) if *i >= 0 => {
                ParamDefault::Int(*i)
            }
            (Some(toml::Value::String(s)), ParamKind::Bytes) => {
                ParamDefault::Int(benchlab_core::units::parse_size(s).map_err(|_| bad())? as i64)
            }
            (Some(toml::Value::Integer(i)), ParamKind::Seconds | ParamKind::Float) => {
                ParamDefault::Float(*i as f64)
            }
            (Some(toml::Value::Float(f)), ParamKind::Seconds | ParamKind::Float) => {
                ParamDefault::Float(*f)
            }
            (Some(toml::Value::Boolean(b)), ParamKind::Bool) => ParamDefault::Bool(*b),
            (Some(toml::Value::String(s)), ParamKind::Text) => ParamDefault::Str(intern(s)),
            (Some(toml::Value::String(s)), ParamKind::Choice(c)) if c.contains(&s.as_str()) => {
                ParamDefault::Str(intern(s))
            }
            _ => return Err(bad()),
        };
        Ok(ParamSpec {
            name: intern(&self.name),
            kind,
            default,
            help: intern(&self.help),
        })
    }
}

/// A tool file (`tools/NAME.toml`): an adapter shipped as data.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDef {
    /// The study's `kind` (`tool.fio`).
    pub kind: String,
    /// One line for `benchlab workloads`.
    pub summary: String,
    /// The program that must be installed on the client host.
    pub program: String,
    /// The Debian package that installs it, when Debian ships it.
    #[serde(default)]
    pub package: Option<String>,
    /// Where to get it otherwise.
    #[serde(default)]
    pub url: Option<String>,
    /// The command line: words split as a shell would (quotes), but run
    /// without one; `{param}` placeholders substituted word by word.
    pub command: String,
    /// Run `command` through `sh -c` (values substituted quoted).
    #[serde(default)]
    pub shell: bool,
    /// Commands run first, in the same scratch directory (untimed: a
    /// sysbench fileio `prepare`).
    #[serde(default)]
    pub before: Vec<String>,
    /// How the output is read.
    pub parser: ParserKind,
    /// For `regex`: the patterns (named groups).
    #[serde(default)]
    pub pattern: Vec<String>,
    /// A file the tool writes its results to (a template:
    /// `{scratch}/out.json`), parsed instead of its standard output.
    #[serde(default)]
    pub output: Option<String>,
    /// Parse standard error instead of standard output.
    #[serde(default)]
    pub stderr: bool,
    /// What serves it.
    #[serde(default)]
    pub server: ServerMode,
    /// The parameter whose values are table rows.
    pub row: String,
    /// The default time limit of one run (s).
    pub timeout_s: f64,
    /// The parameters.
    #[serde(default)]
    pub param: Vec<ParamDef>,
    /// The metrics.
    pub metric: Vec<MetricDef>,
    /// When an attempt is refused before it measured anything, try again.
    #[serde(default)]
    pub retry: Option<RetryDef>,
}

/// A tool's refusal that measured nothing (iperf3's server still closing
/// the previous test answers "the server is busy" before any data moves):
/// the command is run again after a pause, a bounded number of times, and
/// the sample counts the attempts refused (`retries.NAME`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryDef {
    /// The reason's name, the counter's suffix (`server_busy`).
    pub name: String,
    /// A regular expression matched against the attempt's standard output
    /// and standard error; a match means the attempt was refused.
    pub when: String,
    /// How many more attempts at most.
    pub attempts: u32,
    /// The first pause (s); each next pause is twice as long, at most 2 s.
    pub wait_s: f64,
}

impl RetryDef {
    /// The pause before retry `n` (1-based).
    pub fn pause(&self, n: u32) -> std::time::Duration {
        let s = self.wait_s * 2f64.powi(n.saturating_sub(1).min(16) as i32);
        std::time::Duration::from_secs_f64(s.min(2.0))
    }

    /// Checks the rule; the compiled `when`.
    pub fn pattern(&self) -> Result<regex::Regex, String> {
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(format!(
                "retry.name `{}`: use letters, digits and `_`",
                self.name
            ));
        }
        if !(1..=20).contains(&self.attempts) {
            return Err(format!(
                "retry.attempts = {}: allowed 1 to 20",
                self.attempts
            ));
        }
        if !(self.wait_s.is_finite() && self.wait_s > 0.0 && self.wait_s <= 2.0) {
            return Err(format!(
                "retry.wait_s = {}: allowed more than 0 up to 2 (s)",
                self.wait_s
            ));
        }
        regex::Regex::new(&self.when).map_err(|e| format!("retry.when: {e}"))
    }
}

impl ToolDef {
    /// Reads and checks a tool file.
    pub fn parse(text: &str) -> Result<ToolDef, String> {
        let def: ToolDef = toml::from_str(text).map_err(|e| e.to_string())?;
        if !def.kind.starts_with("tool.") {
            return Err(format!(
                "kind `{}`: a tool's kind starts with `tool.`",
                def.kind
            ));
        }
        let patterns = parse::compile_patterns(&def.pattern)?;
        if def.parser == ParserKind::Regex && patterns.is_empty() {
            return Err("parser = \"regex\" needs pattern = [\"…(?P<name>…)…\"]".into());
        }
        check_metrics(&def.metric, def.parser, &parse::group_names(&patterns))?;
        if !def.param.iter().any(|p| p.name == def.row) {
            return Err(format!("row `{}` is not one of its parameters", def.row));
        }
        if def.timeout_s.is_nan() || def.timeout_s <= 0.0 {
            return Err("timeout_s must be more than 0".into());
        }
        if let Some(r) = &def.retry {
            r.pattern()?;
        }
        Ok(def)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_metric_lists() {
        let m = compact_metrics(
            "rate (ops/s) higher: operations per second\np99 (ms) lower: latency.p99 / 1000; bw (10^6 b/s) higher: end.bits * 1e-6",
        )
        .unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].name, "rate");
        assert_eq!(m[0].select, "operations per second");
        assert_eq!(m[1].better, Better::Lower);
        assert_eq!(m[1].select, "latency.p99");
        assert_eq!(m[1].scale, 0.001);
        assert_eq!(m[2].scale, 1e-6);
        assert_eq!(m[2].unit, "10^6 b/s");
        for (bad, says) in [
            ("rate higher: x", "no (UNIT)"),
            ("rate (x) faster: x", "`faster` is not a direction"),
            ("rate (x) higher", "expected `NAME (UNIT)"),
            ("rate (x) higher: x * y", "`y` after `*`"),
            ("", "no metrics"),
        ] {
            let e = compact_metrics(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let two = compact_metrics("a (s) lower: x; a (s) lower: y").unwrap();
        assert!(check_metrics(&two, ParserKind::Lines, &[])
            .unwrap_err()
            .contains("declared twice"));
        let g = compact_metrics("a (s) lower: nope").unwrap();
        assert!(check_metrics(&g, ParserKind::Regex, &["rate".into()])
            .unwrap_err()
            .contains("no such named group in the pattern (groups: rate)"));
    }

    #[test]
    fn a_bad_retry_rule_names_its_key() {
        let base = "kind = \"tool.x\"\nsummary = \"x\"\nprogram = \"x\"\ncommand = \"x\"\nparser = \"lines\"\nrow = \"n\"\ntimeout_s = 1\n[[param]]\nname = \"n\"\nkind = \"count\"\nhelp = \"x\"\n[[metric]]\nname = \"a\"\nunit = \"s\"\nbetter = \"lower\"\nselect = \"a\"\n";
        let with = |retry: &str| ToolDef::parse(&format!("{base}[retry]\n{retry}"));
        assert!(with("name = \"busy\"\nwhen = \"busy\"\nattempts = 3\nwait_s = 0.1").is_ok());
        for (retry, says) in [
            (
                "name = \"b\"\nwhen = \"(\"\nattempts = 3\nwait_s = 0.1",
                "retry.when:",
            ),
            (
                "name = \"b\"\nwhen = \"b\"\nattempts = 0\nwait_s = 0.1",
                "retry.attempts = 0: allowed 1 to 20",
            ),
            (
                "name = \"b\"\nwhen = \"b\"\nattempts = 3\nwait_s = 5",
                "retry.wait_s = 5",
            ),
            (
                "name = \"a b\"\nwhen = \"b\"\nattempts = 3\nwait_s = 1",
                "retry.name `a b`",
            ),
        ] {
            let e = with(retry).unwrap_err();
            assert!(e.contains(says), "{retry}: {e}");
        }
    }
}
