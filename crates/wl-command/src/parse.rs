//! The output parsers: a tool's output is outside input, read with the
//! field's maintained parsers (serde_json, regex, csv); only the selectors
//! (a JSON path, a CSV cell, a `key: value` line) are ours.

use std::collections::BTreeMap;

use regex::Regex;

/// How a command's output is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParserKind {
    /// A JSON document; a metric's selector is a path
    /// (`jobs[0].read.bw_bytes`, `percentile["99.000000"]`).
    Json,
    /// Regular expressions with named groups; a selector is a group name.
    Regex,
    /// CSV with a header row; a selector is a column, optionally with the
    /// row: `rps[test=SET]` (the row whose `test` is `SET`) or `rps[2]`
    /// (the third data row); the first data row otherwise.
    Csv,
    /// `key: value` (or `key = value`) lines; a selector is the key, the
    /// value the number the value part starts with.
    Lines,
}

/// The parser names, as study files and tool files spell them.
pub const PARSERS: &[&str] = &["json", "regex", "csv", "lines"];

impl ParserKind {
    /// From its name.
    pub fn from_name(s: &str) -> Option<ParserKind> {
        match s {
            "json" => Some(ParserKind::Json),
            "regex" => Some(ParserKind::Regex),
            "csv" => Some(ParserKind::Csv),
            "lines" => Some(ParserKind::Lines),
            _ => None,
        }
    }
}

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq)]
pub enum Seg {
    /// An object member.
    Key(String),
    /// An array element.
    Index(usize),
}

/// Reads a JSON path: `a.b[0].c`, `a["key.with.dots"]`, `[0].x`.
pub fn json_path(p: &str) -> Result<Vec<Seg>, String> {
    let b = p.as_bytes();
    let mut segs = Vec::new();
    let mut i = 0;
    if p.is_empty() {
        return Err("an empty path".into());
    }
    while i < b.len() {
        match b[i] {
            b'[' => {
                let close = p[i..]
                    .find(']')
                    .map(|c| c + i)
                    .ok_or_else(|| format!("`[` at {i} is not closed"))?;
                let inner = &p[i + 1..close];
                if inner.starts_with('"') {
                    // A quoted key may hold `]`: find its closing quote.
                    let end = p[i + 2..]
                        .find("\"]")
                        .map(|e| e + i + 2)
                        .ok_or_else(|| format!("quoted key at {i} is not closed with \"]"))?;
                    segs.push(Seg::Key(p[i + 2..end].to_string()));
                    i = end + 2;
                } else {
                    let n: usize = inner.trim().parse().map_err(|_| {
                        format!("`[{inner}]` is not an index (a number, or a quoted key [\"k\"])")
                    })?;
                    segs.push(Seg::Index(n));
                    i = close + 1;
                }
            }
            b'.' if i == 0 || i + 1 == b.len() => {
                return Err(format!("a `.` at {i} with no key beside it"))
            }
            b'.' => {
                i += 1;
                if matches!(b[i], b'.' | b'[') {
                    return Err(format!("an empty key at {i}"));
                }
            }
            _ => {
                if i > 0 && b[i - 1] == b']' {
                    return Err(format!("a key right after `]` at {i}: write `].key`"));
                }
                let end = p[i..].find(['.', '[']).map(|e| e + i).unwrap_or(b.len());
                segs.push(Seg::Key(p[i..end].to_string()));
                i = end;
            }
        }
    }
    Ok(segs)
}

fn show_path(segs: &[Seg]) -> String {
    let mut s = String::new();
    for seg in segs {
        match seg {
            Seg::Key(k) if k.contains(['.', '[', ']']) => s.push_str(&format!("[\"{k}\"]")),
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(n) => s.push_str(&format!("[{n}]")),
        }
    }
    if s.is_empty() {
        "the document".into()
    } else {
        format!("`{s}`")
    }
}

/// The number at `path` in `doc`.
pub fn json_number(doc: &serde_json::Value, path: &[Seg]) -> Result<f64, String> {
    let mut v = doc;
    for (i, seg) in path.iter().enumerate() {
        let at = show_path(&path[..i]);
        v = match (seg, v) {
            (Seg::Key(k), serde_json::Value::Object(m)) => m.get(k).ok_or_else(|| {
                let mut keys: Vec<&str> = m.keys().map(|k| k.as_str()).take(12).collect();
                if m.len() > 12 {
                    keys.push("…");
                }
                format!("no key `{k}` in {at} (its keys: {})", keys.join(", "))
            })?,
            (Seg::Index(n), serde_json::Value::Array(a)) => a
                .get(*n)
                .ok_or_else(|| format!("no element [{n}] in {at}: it has {}", a.len()))?,
            (Seg::Key(k), other) => {
                return Err(format!(
                    "{at} is {}, not an object: cannot take `{k}`",
                    json_type(other)
                ))
            }
            (Seg::Index(n), other) => {
                return Err(format!(
                    "{at} is {}, not an array: cannot take [{n}]",
                    json_type(other)
                ))
            }
        };
    }
    match v {
        serde_json::Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| format!("{} is not a finite number", show_path(path))),
        serde_json::Value::String(s) => leading_number(s).ok_or_else(|| {
            format!(
                "{} is the string {s:?}, which is not a number",
                show_path(path)
            )
        }),
        other => Err(format!(
            "{} is {}, not a number",
            show_path(path),
            json_type(other)
        )),
    }
}

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Reads a JSON document from a tool's output. Some tools print a line
/// of their own before the document (fio's "note:" lines when it falls
/// back from an option): the document then starts at the first `{` or `[`
/// that begins a line.
pub fn json_doc(text: &str) -> Result<serde_json::Value, String> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(first) => {
            for (i, _) in text.match_indices(['{', '[']) {
                if i == 0 || text.as_bytes()[i - 1] == b'\n' {
                    if let Ok(v) = serde_json::from_str(&text[i..]) {
                        return Ok(v);
                    }
                }
            }
            Err(format!(
                "the output is not JSON ({first}); it begins {}",
                excerpt(text)
            ))
        }
    }
}

/// The first 120 characters of a text, for error messages.
pub fn excerpt(text: &str) -> String {
    let t = text.trim_start();
    if t.is_empty() {
        return "empty".into();
    }
    let cut: String = t.chars().take(120).collect();
    if cut.len() < t.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

/// The number a text starts with (`"10.0005s"` → 10.0005, `" 12,345 "`
/// → 12345: thousands separators are dropped).
pub fn leading_number(s: &str) -> Option<f64> {
    let t = s.trim_start();
    let end = t
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E' | ',')))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let cand: String = t[..end].chars().filter(|c| *c != ',').collect();
    // Shrink until it parses: "12e" or "3." followed by text.
    let mut n = cand.len();
    while n > 0 {
        if let Ok(x) = cand[..n].parse::<f64>() {
            if x.is_finite() {
                return Some(x);
            }
            return None;
        }
        n -= 1;
    }
    None
}

/// Compiles the regex patterns (multi-line: `^` and `$` match at lines).
pub fn compile_patterns(patterns: &[String]) -> Result<Vec<Regex>, String> {
    patterns
        .iter()
        .map(|p| {
            regex::RegexBuilder::new(p)
                .multi_line(true)
                .build()
                .map_err(|e| format!("pattern {p:?} does not compile: {e}"))
        })
        .collect()
}

/// The named groups the patterns define.
pub fn group_names(patterns: &[Regex]) -> Vec<String> {
    patterns
        .iter()
        .flat_map(|r| r.capture_names().flatten().map(String::from))
        .collect()
}

/// Every named group of the patterns' first matches, as numbers.
pub fn regex_values(patterns: &[Regex], text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for r in patterns {
        if let Some(c) = r.captures(text) {
            for name in r.capture_names().flatten() {
                if let Some(m) = c.name(name) {
                    out.entry(name.to_string())
                        .or_insert_with(|| m.as_str().to_string());
                }
            }
        }
    }
    out
}

/// Which row of a CSV table a selector means.
#[derive(Debug, Clone, PartialEq)]
pub enum CsvRow {
    /// The n-th data row (0-based).
    Nth(usize),
    /// The first row whose `column` holds `value`.
    Where {
        /// The key column.
        column: String,
        /// Its value in the wanted row.
        value: String,
    },
}

/// Reads a CSV selector: `COLUMN`, `COLUMN[N]` or `COLUMN[KEY=VALUE]`.
pub fn csv_selector(s: &str) -> Result<(String, CsvRow), String> {
    let Some(open) = s.find('[') else {
        if s.trim().is_empty() {
            return Err("an empty column name".into());
        }
        return Ok((s.trim().to_string(), CsvRow::Nth(0)));
    };
    let Some(inner) = s[open + 1..].strip_suffix(']') else {
        return Err(format!("`{s}`: a row selector ends with `]`"));
    };
    let column = s[..open].trim().to_string();
    if column.is_empty() {
        return Err(format!("`{s}`: no column before `[`"));
    }
    let row =
        match inner.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => CsvRow::Where {
                column: k.trim().to_string(),
                value: v.trim().to_string(),
            },
            Some(_) => return Err(format!("`{s}`: `[KEY=VALUE]` needs a key column")),
            None => CsvRow::Nth(inner.trim().parse().map_err(|_| {
                format!("`{s}`: `[{inner}]` is neither a row number nor KEY=VALUE")
            })?),
        };
    Ok((column, row))
}

/// A CSV table: its header and rows.
pub struct CsvTable {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// Reads CSV text with a header row.
pub fn csv_table(text: &str) -> Result<CsvTable, String> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let header: Vec<String> = r
        .headers()
        .map_err(|e| format!("the output is not CSV: {e}"))?
        .iter()
        .map(String::from)
        .collect();
    let mut rows = Vec::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| format!("the output is not CSV: {e}"))?;
        rows.push(rec.iter().map(String::from).collect());
    }
    Ok(CsvTable { header, rows })
}

impl CsvTable {
    fn col(&self, name: &str) -> Result<usize, String> {
        self.header.iter().position(|h| h == name).ok_or_else(|| {
            format!(
                "no column `{name}` (the header: {})",
                self.header.join(", ")
            )
        })
    }

    /// The number in `column` of the selected row.
    pub fn number(&self, column: &str, row: &CsvRow) -> Result<f64, String> {
        let c = self.col(column)?;
        let r = match row {
            CsvRow::Nth(n) => self
                .rows
                .get(*n)
                .ok_or_else(|| format!("no data row {n}: the output has {}", self.rows.len()))?,
            CsvRow::Where { column: k, value } => {
                let kc = self.col(k)?;
                self.rows
                    .iter()
                    .find(|r| r.get(kc).map(|x| x == value).unwrap_or(false))
                    .ok_or_else(|| format!("no row whose `{k}` is `{value}`"))?
            }
        };
        let cell = r.get(c).map(String::as_str).unwrap_or("");
        leading_number(cell)
            .ok_or_else(|| format!("column `{column}` holds {cell:?}, which is not a number"))
    }
}

/// The `key: value` (or `key = value`) lines of a text, first occurrence
/// of each key kept.
pub fn lines_values(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let split = match (line.find(':'), line.find('=')) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(i) = split {
            let key = line[..i].trim();
            if !key.is_empty() {
                out.entry(key.to_string())
                    .or_insert_with(|| line[i + 1..].trim().to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_read_and_fail_with_the_place() {
        let doc: serde_json::Value = serde_json::from_str(
            r#"{"jobs":[{"read":{"bw_bytes":1048576,"clat_ns":{"percentile":{"99.000000":1234}}}}],"s":"12.5"}"#,
        )
        .unwrap();
        let p = json_path("jobs[0].read.bw_bytes").unwrap();
        assert_eq!(json_number(&doc, &p).unwrap(), 1048576.0);
        let p = json_path(r#"jobs[0].read.clat_ns.percentile["99.000000"]"#).unwrap();
        assert_eq!(json_number(&doc, &p).unwrap(), 1234.0);
        assert_eq!(json_number(&doc, &json_path("s").unwrap()).unwrap(), 12.5);
        let e = json_number(&doc, &json_path("jobs[0].read.bw").unwrap()).unwrap_err();
        assert!(
            e.contains("no key `bw` in `jobs[0].read`") && e.contains("bw_bytes"),
            "{e}"
        );
        let e = json_number(&doc, &json_path("jobs[3]").unwrap()).unwrap_err();
        assert!(e.contains("no element [3] in `jobs`: it has 1"), "{e}");
        let e = json_number(&doc, &json_path("jobs[0]").unwrap()).unwrap_err();
        assert!(e.contains("is an object, not a number"), "{e}");
        for bad in ["", "a..b", ".a", "a.", "a[x]", "a[0", "a[0]b"] {
            assert!(json_path(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn json_after_a_note_line_and_garbage() {
        let v =
            json_doc("note: both iodepth >= 1 and synchronous I/O engine\n{\"a\": 1}\n").unwrap();
        assert_eq!(v["a"], 1);
        let e = json_doc("Segmentation fault\n").unwrap_err();
        assert!(e.contains("not JSON") && e.contains("Segmentation"), "{e}");
    }

    #[test]
    fn numbers_lead_values() {
        assert_eq!(leading_number(" 10.0005s"), Some(10.0005));
        assert_eq!(leading_number("12,345 (1234.5 per second)"), Some(12345.0));
        assert_eq!(leading_number("1e6 ops"), Some(1e6));
        assert_eq!(leading_number("3.e"), Some(3.0));
        assert_eq!(leading_number("n/a"), None);
        assert_eq!(leading_number(""), None);
    }

    #[test]
    fn csv_cells_by_column_and_row() {
        let t = csv_table(
            "\"test\",\"rps\",\"avg_latency_ms\"\n\"SET\",\"1000.50\",\"0.2\"\n\"GET\",\"2000\",\"0.1\"\n",
        )
        .unwrap();
        let (c, r) = csv_selector("rps[test=GET]").unwrap();
        assert_eq!(t.number(&c, &r).unwrap(), 2000.0);
        let (c, r) = csv_selector("rps").unwrap();
        assert_eq!(t.number(&c, &r).unwrap(), 1000.5);
        let (c, r) = csv_selector("avg_latency_ms[1]").unwrap();
        assert_eq!(t.number(&c, &r).unwrap(), 0.1);
        let e = t.number("p99", &CsvRow::Nth(0)).unwrap_err();
        assert!(
            e.contains("no column `p99`") && e.contains("avg_latency_ms"),
            "{e}"
        );
        let (c, r) = csv_selector("rps[test=LPUSH]").unwrap();
        assert!(t
            .number(&c, &r)
            .unwrap_err()
            .contains("no row whose `test` is `LPUSH`"));
        assert!(csv_selector("rps[").is_err());
        assert!(csv_selector("rps[x]").is_err());
        assert!(csv_selector("[1]").is_err());
    }

    #[test]
    fn lines_and_regex() {
        let text = "CPU speed:\n    events per second:  2712.67\nGeneral statistics:\n    total time:                          10.0005s\nx = 4\n";
        let v = lines_values(text);
        assert_eq!(leading_number(&v["events per second"]), Some(2712.67));
        assert_eq!(leading_number(&v["total time"]), Some(10.0005));
        assert_eq!(v["x"], "4");
        let rs = compile_patterns(&[
            "(?P<mib>[0-9.]+) MiB transferred \\((?P<rate>[0-9.]+) MiB/sec\\)".into(),
        ])
        .unwrap();
        let got = regex_values(&rs, "102400.00 MiB transferred (10236.54 MiB/sec)\n");
        assert_eq!(got["rate"], "10236.54");
        assert_eq!(group_names(&rs), ["mib", "rate"]);
        assert!(compile_patterns(&["(".into()]).is_err());
    }
}
