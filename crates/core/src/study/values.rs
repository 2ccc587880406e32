//! Reading TOML values: the context that turns a span into an error with
//! file, line and column, and the typed readers every section uses.

use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::StudyError;
use crate::param::{quoted_list, ParamKind, Value};
use crate::placement::parse_cpu_list;
use crate::units::parse_size;

pub(super) type Tab<'i> = DeTable<'i>;
pub(super) type Val<'i> = Spanned<DeValue<'i>>;

pub(super) struct Ctx<'a> {
    pub(super) file: &'a str,
    pub(super) text: &'a str,
}

impl Ctx<'_> {
    pub(super) fn err(
        &self,
        span: Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> StudyError {
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

    pub(super) fn check_keys(
        &self,
        table: &Tab,
        path: &str,
        allowed: &[&str],
    ) -> Result<(), StudyError> {
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

    /// The entries of `[[study.KEY]]`, each with its path
    /// (`study.KEY[i]`), its value (for its span) and its table, its keys checked against `keys`; none when the
    /// study has no such list. `what` says what a list entry holds.
    pub(super) fn study_entries<'t, 'i>(
        &self,
        doc: &'t Tab<'i>,
        key: &str,
        keys: &[&str],
        what: &str,
    ) -> Result<Vec<(String, &'t Val<'i>, &'t Tab<'i>)>, StudyError> {
        let Some(v) = doc.get("study").and_then(|s| match s.get_ref() {
            DeValue::Table(t) => t.get(key),
            _ => None,
        }) else {
            return Ok(Vec::new());
        };
        let DeValue::Array(items) = v.get_ref() else {
            return Err(self.err(
                v.span(),
                &format!("study.{key}"),
                format!("expected [[study.{key}]] entries ({what})"),
            ));
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("study.{key}[{i}]");
            let t = self.table(item, &path)?;
            self.check_keys(t, &path, keys)?;
            out.push((path, item, t));
        }
        Ok(out)
    }

    pub(super) fn table<'t, 'i>(
        &self,
        v: &'t Val<'i>,
        path: &str,
    ) -> Result<&'t Tab<'i>, StudyError> {
        match v.get_ref() {
            DeValue::Table(t) => Ok(t),
            other => Err(self.err(
                v.span(),
                path,
                format!("expected a table, found {}", type_name(other)),
            )),
        }
    }

    pub(super) fn string(&self, v: &Val, path: &str) -> Result<String, StudyError> {
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
    pub(super) fn name_list(
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

    pub(super) fn choice(
        &self,
        v: &Val,
        path: &str,
        allowed: &[&str],
    ) -> Result<String, StudyError> {
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

    pub(super) fn count(&self, v: &Val, path: &str, min: i64) -> Result<i64, StudyError> {
        let i = self.scalar(v, path, ParamKind::Count)?;
        match i {
            Value::Int(i) if i >= min => Ok(i),
            _ => Err(self.err(v.span(), path, format!("must be an integer ≥ {min}"))),
        }
    }

    /// A count of repetitions: at least `min`, at most
    /// [`MAX_REPETITIONS`](super::MAX_REPETITIONS).
    pub(super) fn repetition_count(
        &self,
        v: &Val,
        path: &str,
        min: i64,
    ) -> Result<u32, StudyError> {
        let n = self.count(v, path, min)?;
        if n > i64::from(super::MAX_REPETITIONS) {
            return Err(self.err(
                v.span(),
                path,
                format!(
                    "{n} repetitions: allowed is at most {} (each repetition of every point is run and stored; split the study instead)",
                    super::MAX_REPETITIONS
                ),
            ));
        }
        Ok(n as u32)
    }

    pub(super) fn seconds(&self, v: &Val, path: &str) -> Result<f64, StudyError> {
        match self.scalar(v, path, ParamKind::Seconds)? {
            Value::Float(f) => Ok(f),
            _ => unreachable!("seconds are floats"),
        }
    }

    /// Converts one scalar to a normalized parameter value.
    pub(super) fn scalar(&self, v: &Val, path: &str, kind: ParamKind) -> Result<Value, StudyError> {
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

    pub(super) fn int(&self, v: &Val, path: &str) -> Result<i64, StudyError> {
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
    pub(super) fn param_values(
        &self,
        v: &Val,
        path: &str,
        kind: ParamKind,
    ) -> Result<Vec<Value>, StudyError> {
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

    pub(super) fn boolean(&self, v: &Val, path: &str) -> Result<bool, StudyError> {
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
    pub(super) fn words(&self, v: &Val, path: &str) -> Result<Vec<String>, StudyError> {
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

    pub(super) fn cpu_list(&self, v: &Val, path: &str) -> Result<Vec<usize>, StudyError> {
        let text = match v.get_ref() {
            DeValue::Integer(_) => self.int(v, path)?.to_string(),
            _ => self.string(v, path)?,
        };
        parse_cpu_list(&text).map_err(|m| self.err(v.span(), path, m))
    }
}

pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

pub(super) fn type_name(v: &DeValue) -> &'static str {
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
