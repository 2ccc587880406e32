//! Inputs for fuzzing benchlab's parsers (issue 14, item 3): arbitrary
//! text, and structured mutations of real files (the shipped studies,
//! profiles, templates and figures) that keep most of a valid document so
//! that the parsers get past their first syntax check into the checks of
//! keys, types and cross-references, where the bugs live.
//!
//! The fuzz targets themselves are in `tests/fuzz.rs`; this library holds
//! what they share: the budget, the mutation strategies and a runner that
//! counts executions.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Cases per target in CI. The parsers take 5–200 µs a case, so the eight
/// targets' 800 000 cases run in about 20 s on the project's 2-core
/// machine (well within CI's minutes, with room for a loaded machine);
/// `BENCHLAB_FUZZ_CASES` sets more for a long run.
pub const CI_CASES: u32 = 100_000;

/// The environment variable that sets the cases per target for long runs.
pub const CASES_VAR: &str = "BENCHLAB_FUZZ_CASES";

/// Cases per target: `BENCHLAB_FUZZ_CASES` when set (a long run), else
/// [`CI_CASES`]. A malformed value is a test failure, not a silent default:
/// a long run that quietly ran the CI budget would report the wrong count.
pub fn cases() -> u32 {
    match std::env::var(CASES_VAR) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{CASES_VAR}={v:?}: expected a count of cases")),
        Err(_) => CI_CASES,
    }
}

/// What one fuzz target did.
#[derive(Debug, Clone)]
pub struct Tally {
    /// The target's name.
    pub target: String,
    /// Inputs tried.
    pub executions: u64,
    /// Of which the parser accepted.
    pub accepted: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// Runs `check` on `budget` inputs from `strategy`; `check` returns whether
/// the parser accepted the input (an `Err` is a broken property). A panic
/// in the parser fails the test with the smallest input proptest finds.
/// Prints one line per target with the execution count, so that the
/// figures of a run are in its output.
pub fn fuzz<S: Strategy>(
    target: &str,
    budget: u32,
    strategy: S,
    check: impl Fn(S::Value) -> Result<bool, TestCaseError>,
) -> Tally
where
    S::Value: std::fmt::Debug,
{
    let mut runner = TestRunner::new(Config {
        cases: budget,
        // Every failing case found is kept as a named regression test in
        // tests/fuzz.rs instead of a file that nobody reads.
        failure_persistence: None,
        // The parsers reject most inputs; rejection is not a skip here.
        max_global_rejects: budget.saturating_mul(4),
        ..Config::default()
    });
    let executions = std::cell::Cell::new(0u64);
    let accepted = std::cell::Cell::new(0u64);
    let start = Instant::now();
    let result = runner.run(&strategy, |input| {
        executions.set(executions.get() + 1);
        if check(input)? {
            accepted.set(accepted.get() + 1);
        }
        Ok(())
    });
    let tally = Tally {
        target: target.to_string(),
        executions: executions.get(),
        accepted: accepted.get(),
        elapsed: start.elapsed(),
    };
    println!(
        "fuzz {}: {} executions ({} accepted), {:.1} s",
        tally.target,
        tally.executions,
        tally.accepted,
        tally.elapsed.as_secs_f64()
    );
    if let Err(e) = result {
        panic!("fuzz {target}: {e}");
    }
    tally
}

/// The repository's root (this crate is `crates/fuzz`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file of `dir` (relative to the repository) whose name ends with
/// `ext`, sorted, as (name, text). Read at run time so that a new shipped
/// file is fuzzed without touching the tests.
pub fn shipped(dir: &str, ext: &str) -> Vec<(String, String)> {
    let dir = repo_root().join(dir);
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.to_string_lossy().ends_with(ext))
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), text)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no *{ext} in {}", dir.display());
    out
}

/// One edit of a text.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Remove a line.
    DeleteLine(Index),
    /// Repeat a line right after itself.
    DuplicateLine(Index),
    /// Exchange two lines.
    SwapLines(Index, Index),
    /// Replace one character.
    FlipChar(Index, char),
    /// Insert a line (a key = value, a table header, a token).
    InsertLine(Index, String),
    /// Replace a line.
    ReplaceLine(Index, String),
    /// Replace the value of one of the `key = value` lines, keeping its
    /// key: the document stays valid up to that value.
    ReplaceValue(Index, String),
    /// Insert text in the middle of a line.
    InsertText(Index, String),
    /// Cut the text short.
    Truncate(Index),
}

/// Tokens that break parsers in interesting ways: numbers at and beyond
/// the limits of their types, quoting, nesting, template braces, CSV
/// separators, control and multi-byte characters.
pub const TOKENS: &[&str] = &[
    "=",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "{{",
    "}}",
    "{{ x }}",
    "\"",
    "'",
    "'''",
    "\"\"\"",
    "\\",
    ",",
    ",,",
    "#",
    ".",
    "-",
    "0",
    "-1",
    "1e309",
    "-0.0",
    "nan",
    "inf",
    "-inf",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "0x7fffffff",
    "1.5",
    "true",
    "[]",
    "{}",
    "[1, 2]",
    "\"\"",
    "\u{0}",
    "\t",
    "\r",
    "é",
    "𝄞",
    "\u{feff}",
    "1979-05-27T07:32:00Z",
];

/// Keys the parsers know (studies, hosts, services, profiles), so that an
/// inserted line often hits a real check rather than "unknown key".
pub const KEYS: &[&str] = &[
    "name",
    "kind",
    "server",
    "client",
    "targets",
    "service",
    "host",
    "local",
    "netns",
    "ssh",
    "agent",
    "key_file",
    "address",
    "port",
    "bind",
    "config",
    "vars",
    "argv",
    "cpus",
    "nice",
    "sched",
    "priority",
    "numa_node",
    "launcher",
    "repetitions",
    "duration_s",
    "warmup_s",
    "quiesce_s",
    "select",
    "on_error",
    "order",
    "step",
    "status",
    "rows",
    "profile",
    "shield",
    "load",
    "workers",
    "command",
    "set",
    "ready_timeout_s",
    "stop_timeout_s",
    "probe",
    "restart",
    "document_root",
    "secrets",
    "sysctl",
    "governor",
    "dma_latency_us",
    "transparent_hugepages",
    "required",
];

/// A token, a key, or arbitrary text.
pub fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(TOKENS).prop_map(str::to_string),
        2 => prop::sample::select(KEYS).prop_map(str::to_string),
        1 => any::<String>(),
    ]
}

/// A line to insert: `key = value`, a table header, or a token.
pub fn line() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_string),
        1 => "[a-z_.]{1,12}",
    ];
    prop_oneof![
        4 => (key.clone(), token()).prop_map(|(k, v)| format!("{k} = {v}")),
        1 => (key.clone(), token()).prop_map(|(k, v)| format!("{k} = \"{v}\"")),
        1 => key.clone().prop_map(|k| format!("[{k}]")),
        1 => key.prop_map(|k| format!("[[{k}]]")),
        1 => token(),
    ]
}

/// One mutation.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => any::<Index>().prop_map(Mutation::DeleteLine),
        2 => any::<Index>().prop_map(Mutation::DuplicateLine),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        3 => (any::<Index>(), any::<char>()).prop_map(|(i, c)| Mutation::FlipChar(i, c)),
        3 => (any::<Index>(), line()).prop_map(|(i, l)| Mutation::InsertLine(i, l)),
        3 => (any::<Index>(), token()).prop_map(|(i, t)| Mutation::InsertText(i, t)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
    ]
}

/// Byte offsets of the character boundaries of `s` (including its end).
fn boundaries(s: &str) -> Vec<usize> {
    s.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()))
        .collect()
}

/// Applies `m` to `text`.
pub fn apply(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<&str> = text.split('\n').collect();
    match m {
        Mutation::DeleteLine(i) => {
            lines.remove(i.index(lines.len()));
            lines.join("\n")
        }
        Mutation::DuplicateLine(i) => {
            let k = i.index(lines.len());
            lines.insert(k, lines[k]);
            lines.join("\n")
        }
        Mutation::SwapLines(a, b) => {
            let n = lines.len();
            lines.swap(a.index(n), b.index(n));
            lines.join("\n")
        }
        Mutation::InsertLine(i, l) => {
            let k = i.index(lines.len() + 1);
            lines.insert(k, l);
            lines.join("\n")
        }
        Mutation::ReplaceLine(i, l) => {
            let k = i.index(lines.len());
            lines[k] = l;
            lines.join("\n")
        }
        Mutation::ReplaceValue(i, v) => {
            let keyed: Vec<usize> = (0..lines.len())
                .filter(|&k| lines[k].contains('=') && !lines[k].trim_start().starts_with('#'))
                .collect();
            if keyed.is_empty() {
                return text.to_string();
            }
            let k = keyed[i.index(keyed.len())];
            let key = lines[k].split_once('=').map(|(k, _)| k).unwrap_or("");
            let line = format!("{key}= {v}");
            lines[k] = &line;
            lines.join("\n")
        }
        Mutation::FlipChar(i, c) => {
            let b = boundaries(text);
            if b.len() < 2 {
                return c.to_string();
            }
            let k = i.index(b.len() - 1);
            format!("{}{c}{}", &text[..b[k]], &text[b[k + 1]..])
        }
        Mutation::InsertText(i, t) => {
            let b = boundaries(text);
            let at = b[i.index(b.len())];
            format!("{}{t}{}", &text[..at], &text[at..])
        }
        Mutation::Truncate(i) => {
            let b = boundaries(text);
            text[..b[i.index(b.len())]].to_string()
        }
    }
}

/// The keys and values of the `key = value` lines of `seeds`: the fuzzer's
/// dictionary, so that inserted lines use the names a parser knows
/// (workload parameters included) and values of the forms it expects.
pub fn dictionary(seeds: &[String]) -> (Vec<String>, Vec<String>) {
    let mut keys: Vec<String> = KEYS.iter().map(|k| k.to_string()).collect();
    let mut values: Vec<String> = Vec::new();
    for line in seeds.iter().flat_map(|s| s.lines()) {
        if let Some((k, v)) = line.split_once('=') {
            let (k, v) = (k.trim(), v.trim());
            if !k.is_empty() && !k.starts_with('#') && k.len() < 40 {
                keys.push(k.to_string());
            }
            if !v.is_empty() && v.len() < 80 {
                values.push(v.to_string());
            }
        }
    }
    keys.sort();
    keys.dedup();
    values.sort();
    values.dedup();
    values.extend(TOKENS.iter().map(|t| t.to_string()));
    (keys, values)
}

/// Numbers at the edges of the integer types, for ranges and sizes.
const EDGES: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "64",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
];

/// Values built from parts: ranges (`"A..B"`, `"A..B step C"`) and sizes
/// (`"NUNIT"`) over edge numbers, as quoted TOML strings.
pub fn composite() -> impl Strategy<Value = String> {
    let n = || prop::sample::select(EDGES);
    let unit = prop::sample::select(&["", "k", "KiB", "M", "G", "TiB", "x"][..]);
    prop_oneof![
        (n(), n()).prop_map(|(a, b)| format!("\"{a}..{b}\"")),
        (n(), n(), n()).prop_map(|(a, b, c)| format!("\"{a}..{b} step {c}\"")),
        (n(), unit.clone(), n(), unit).prop_map(|(a, u, b, v)| format!("\"{a}{u}..{b}{v}\"")),
        n().prop_map(str::to_string),
    ]
}

/// A line made from the dictionary: `key = value`, with a known or edge
/// value, or a table header.
fn dictionary_line(keys: Vec<String>, values: Vec<String>) -> impl Strategy<Value = String> {
    let key = prop::sample::select(keys);
    prop_oneof![
        4 => (key.clone(), prop::sample::select(values)).prop_map(|(k, v)| format!("{k} = {v}")),
        2 => (key.clone(), composite()).prop_map(|(k, v)| format!("{k} = {v}")),
        1 => key.prop_map(|k| format!("[[{k}]]")),
    ]
}

/// One of `seeds` (as its index) with one to six mutations applied, the
/// inserted lines drawn from the seeds' own keys and values as often as
/// from the generic ones.
pub fn mutated(seeds: Vec<String>) -> impl Strategy<Value = (usize, String)> {
    let n = seeds.len();
    let (keys, values) = dictionary(&seeds);
    let m = prop_oneof![
        2 => mutation(),
        1 => (any::<Index>(), dictionary_line(keys.clone(), values.clone()))
            .prop_map(|(i, l)| Mutation::InsertLine(i, l)),
        1 => (any::<Index>(), dictionary_line(keys, values.clone()))
            .prop_map(|(i, l)| Mutation::ReplaceLine(i, l)),
        // A known key with another value: the value checks themselves.
        2 => (any::<Index>(), prop_oneof![prop::sample::select(values), composite()])
            .prop_map(|(i, v)| Mutation::ReplaceValue(i, v)),
    ];
    (0..n, prop::collection::vec(m, 1..=6)).prop_map(move |(k, ms)| {
        let text = ms.iter().fold(seeds[k].clone(), |t, m| apply(&t, m));
        (k, text)
    })
}

/// Arbitrary input as text: random bytes (read as a file is, lossily),
/// random Unicode, or random lines of tokens.
pub fn arbitrary_text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        any::<String>(),
        prop::collection::vec(line(), 0..24).prop_map(|l| l.join("\n")),
    ]
}

/// Well-formed-looking input that is not from a shipped file: either a
/// mutated seed or arbitrary text, 3 to 1.
pub fn input(seeds: Vec<String>) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => mutated(seeds).prop_map(|(_, t)| t),
        1 => arbitrary_text(),
    ]
}

/// One edit of a byte stream (frames, records).
#[derive(Debug, Clone)]
pub enum ByteMutation {
    /// Flip one bit.
    FlipBit(Index, u8),
    /// Overwrite one byte.
    SetByte(Index, u8),
    /// Insert bytes.
    Insert(Index, Vec<u8>),
    /// Remove a range (start, length up to 64).
    Delete(Index, u8),
    /// Repeat a range (start, length up to 255) right after itself.
    Duplicate(Index, u8),
    /// Cut the stream short.
    Truncate(Index),
}

/// One byte mutation.
pub fn byte_mutation() -> impl Strategy<Value = ByteMutation> {
    prop_oneof![
        3 => (any::<Index>(), 0u8..8).prop_map(|(i, b)| ByteMutation::FlipBit(i, b)),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| ByteMutation::SetByte(i, b)),
        2 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(i, b)| ByteMutation::Insert(i, b)),
        2 => (any::<Index>(), 1u8..64).prop_map(|(i, n)| ByteMutation::Delete(i, n)),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(i, n)| ByteMutation::Duplicate(i, n)),
        2 => any::<Index>().prop_map(ByteMutation::Truncate),
    ]
}

/// Applies `m` to `bytes`.
pub fn apply_bytes(bytes: &[u8], m: &ByteMutation) -> Vec<u8> {
    let mut v = bytes.to_vec();
    let n = v.len();
    match m {
        ByteMutation::FlipBit(i, b) if n > 0 => v[i.index(n)] ^= 1 << b,
        ByteMutation::SetByte(i, b) if n > 0 => v[i.index(n)] = *b,
        ByteMutation::Insert(i, b) => {
            let at = i.index(n + 1);
            v.splice(at..at, b.iter().copied());
        }
        ByteMutation::Delete(i, len) if n > 0 => {
            let at = i.index(n);
            v.drain(at..(at + *len as usize).min(n));
        }
        ByteMutation::Duplicate(i, len) if n > 0 => {
            let at = i.index(n);
            let range = v[at..(at + *len as usize).min(n)].to_vec();
            let end = at + range.len();
            v.splice(end..end, range);
        }
        ByteMutation::Truncate(i) => v.truncate(i.index(n + 1)),
        _ => {}
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;

    #[test]
    fn mutations_keep_text_valid_utf8_and_change_it() {
        // Each mutation kind applied to a small text must give a String
        // (no boundary panics) and, for most kinds, a different one.
        let text = "a = 1\nb = \"é\"\n[c]\n";
        let mut runner = TestRunner::default();
        let mut changed = 0;
        for _ in 0..500 {
            let m = mutation().new_tree(&mut runner).unwrap().current();
            if apply(text, &m) != text {
                changed += 1;
            }
        }
        assert!(
            changed > 300,
            "only {changed} of 500 mutations changed the text"
        );
    }

    #[test]
    fn each_mutation_kind_does_what_it_says() {
        let idx = |n: usize| {
            let mut runner = TestRunner::default();
            // Find an Index that maps to `n` of 3.
            loop {
                let i = any::<Index>().new_tree(&mut runner).unwrap().current();
                if i.index(3) == n {
                    return i;
                }
            }
        };
        let t = "x\ny\nz";
        assert_eq!(apply(t, &Mutation::DeleteLine(idx(1))), "x\nz");
        assert_eq!(apply(t, &Mutation::DuplicateLine(idx(0))), "x\nx\ny\nz");
        assert_eq!(apply(t, &Mutation::SwapLines(idx(0), idx(2))), "z\ny\nx");
    }
}
