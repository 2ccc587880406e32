//! Workload parameters: declared once per workload as a table of
//! [`ParamSpec`]s (like fio's option table), which drives study-file
//! validation, sweep expansion, `benchlab workloads` help and the docs.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The type of a parameter, which decides how study-file values are read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamKind {
    /// A byte count: an integer or a string with a unit (`"64KiB"`).
    Bytes,
    /// A non-negative integer count.
    Count,
    /// Seconds, integer or float.
    Seconds,
    /// A floating-point number.
    Float,
    /// A factor that `run --scale` multiplies, like durations (a workload
    /// uses it to shrink sizes for trial runs).
    Factor,
    /// `true` or `false`.
    Bool,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// Free text: a path, a list of options (checked by the workload's
    /// own `validate`).
    Text,
}

impl ParamKind {
    /// What the study file may hold for this kind, for error messages.
    pub fn describe(&self) -> String {
        match self {
            ParamKind::Bytes => "a size in bytes (integer, or a string such as \"64KiB\")".into(),
            ParamKind::Count => "a non-negative integer".into(),
            ParamKind::Seconds => "a number of seconds".into(),
            ParamKind::Float => "a number".into(),
            ParamKind::Factor => "a positive number (multiplied by `run --scale`)".into(),
            ParamKind::Bool => "true or false".into(),
            ParamKind::Choice(c) => format!("one of {}", quoted_list(c)),
            ParamKind::Text => "a string".into(),
        }
    }
}

/// Formats `["a", "b"]` as `"a", "b"` for messages.
pub fn quoted_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The default of a parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamDefault {
    /// No default: the parameter is left unset (for example, socket buffer
    /// sizes that are left to the kernel's autotuning when not given).
    Unset,
    /// Taken from the study's `[defaults]` table key of the same name.
    Study,
    /// An integer (bytes or count).
    Int(i64),
    /// A float (seconds or number).
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A word (for choices).
    Str(&'static str),
}

/// One parameter of a workload.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    /// The key in the study file, with its unit in the name where it has one.
    pub name: &'static str,
    /// How values are read.
    pub kind: ParamKind,
    /// The value when the study does not give one.
    pub default: ParamDefault,
    /// One line of help for docs and `benchlab workloads`.
    pub help: &'static str,
}

/// A normalized parameter value: sizes become byte counts, durations
/// seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// A boolean.
    Bool(bool),
    /// An integer (bytes, counts).
    Int(i64),
    /// A float (seconds, numbers).
    Float(f64),
    /// A word.
    Str(String),
}

impl Value {
    /// The value for table rows and labels (`65507`, `tcp`, `1.5`).
    pub fn label(&self) -> String {
        match self {
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => format!("{f}"),
            Value::Str(s) => s.clone(),
        }
    }

    /// The value as a float, for sorting rows numerically.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    pub(crate) fn from_default(d: ParamDefault) -> Option<Value> {
        match d {
            ParamDefault::Unset | ParamDefault::Study => None,
            ParamDefault::Int(i) => Some(Value::Int(i)),
            ParamDefault::Float(f) => Some(Value::Float(f)),
            ParamDefault::Bool(b) => Some(Value::Bool(b)),
            ParamDefault::Str(s) => Some(Value::Str(s.to_string())),
        }
    }
}

/// The parameters of one point: every declared parameter that has a value.
/// A `BTreeMap` so that its JSON form is canonical (used as the point key).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Params(pub BTreeMap<String, Value>);

/// A parameter was missing or of the wrong type when a workload read it.
/// The study loader validates first, so this means a bug or a hand-made
/// request.
#[derive(Debug, thiserror::Error)]
#[error("parameter `{name}`: {problem}")]
pub struct ParamError {
    /// The parameter.
    pub name: String,
    /// What is wrong.
    pub problem: String,
}

impl Params {
    /// The raw value, if set.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    /// Sets a value.
    pub fn set(&mut self, name: &str, value: Value) {
        self.0.insert(name.to_string(), value);
    }

    fn missing(name: &str) -> ParamError {
        ParamError {
            name: name.into(),
            problem: "missing".into(),
        }
    }

    fn wrong(name: &str, want: &str) -> ParamError {
        ParamError {
            name: name.into(),
            problem: format!("expected {want}"),
        }
    }

    /// An integer (bytes or count) that may be unset.
    pub fn opt_u64(&self, name: &str) -> Result<Option<u64>, ParamError> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Value::Int(i)) if *i >= 0 => Ok(Some(*i as u64)),
            Some(_) => Err(Self::wrong(name, "a non-negative integer")),
        }
    }

    /// An integer (bytes or count).
    pub fn u64(&self, name: &str) -> Result<u64, ParamError> {
        self.opt_u64(name)?.ok_or_else(|| Self::missing(name))
    }

    /// A number (seconds or float); integers are accepted.
    pub fn f64(&self, name: &str) -> Result<f64, ParamError> {
        match self.0.get(name) {
            None => Err(Self::missing(name)),
            Some(v) => v.as_f64().ok_or_else(|| Self::wrong(name, "a number")),
        }
    }

    /// A boolean.
    pub fn bool(&self, name: &str) -> Result<bool, ParamError> {
        match self.0.get(name) {
            None => Err(Self::missing(name)),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(Self::wrong(name, "true or false")),
        }
    }

    /// A word.
    pub fn str(&self, name: &str) -> Result<&str, ParamError> {
        match self.0.get(name) {
            None => Err(Self::missing(name)),
            Some(Value::Str(s)) => Ok(s),
            Some(_) => Err(Self::wrong(name, "a string")),
        }
    }

    /// Every parameter of `specs` that has a fixed default, at that default
    /// (`Unset` and study-level defaults are left out).
    pub fn defaults(specs: &[ParamSpec]) -> Params {
        let mut p = Params::default();
        for spec in specs {
            if let Some(v) = Value::from_default(spec.default) {
                p.set(spec.name, v);
            }
        }
        p
    }

    /// The canonical JSON form, used as the point's identity in the store.
    pub fn canonical(&self) -> String {
        serde_json::to_string(&self.0).expect("params serialize")
    }
}

/// Standard parameter: the measured duration of one repetition.
pub const DURATION: ParamSpec = ParamSpec {
    name: "duration_s",
    kind: ParamKind::Seconds,
    default: ParamDefault::Study,
    help: "measured time of one repetition, in seconds (default: [defaults] duration_s)",
};

/// Standard parameter: the warm-up before the measured interval.
pub const WARMUP: ParamSpec = ParamSpec {
    name: "warmup_s",
    kind: ParamKind::Seconds,
    default: ParamDefault::Study,
    help: "warm-up before the measured interval, in seconds; not counted (default: [defaults] warmup_s)",
};
