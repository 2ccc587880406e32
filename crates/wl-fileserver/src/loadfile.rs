//! dbench's load-file format (tridge's NetBench trace), parsed once into
//! a compact operation list before anything is measured.
//!
//! One operation per line: an optional leading target time (ignored: the
//! replay is closed-loop, as dbench's without `-R`), the operation's name,
//! its fields, and — last — the status the trace expects (`NT_STATUS_…`
//! or `0x…`). Paths are double-quoted, `\`-separated and live under
//! `\clients\client1\…`; each replaying client substitutes its own
//! directory for `client1` (dbench does the same). Numbers are decimal or
//! `0x` hexadecimal. Lines starting with `#`, and lines of fewer than two
//! tokens, are skipped.
//!
//! *Differs from dbench*: a line with an unknown operation or a malformed
//! status is an error naming the file, the line and what is allowed,
//! where dbench skips it with a warning — a mistyped mix would otherwise
//! replay silently as a different one.

use std::collections::HashMap;
use std::path::Path;

/// The operations of the format, in dbench's result-table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OpKind {
    /// Open or create a file or directory (`NTCreateX`).
    NtCreateX,
    /// Close a handle.
    Close,
    /// Rename a path.
    Rename,
    /// Remove a file.
    Unlink,
    /// Remove a directory tree.
    Deltree,
    /// Remove an empty directory.
    Rmdir,
    /// Make a directory.
    Mkdir,
    /// Stat a path (`QUERY_PATH_INFORMATION`).
    QPathInfo,
    /// Stat a handle (`QUERY_FILE_INFORMATION`).
    QFileInfo,
    /// File-system information (`QUERY_FS_INFORMATION`).
    QFsInfo,
    /// Set a handle's information (`SET_FILE_INFORMATION`): its times.
    SFileInfo,
    /// List a directory with a pattern (`FIND_FIRST`).
    Find,
    /// Write at an offset.
    WriteX,
    /// Read at an offset.
    ReadX,
    /// Lock a byte range.
    LockX,
    /// Unlock a byte range.
    UnlockX,
    /// Flush a handle to stable storage.
    Flush,
}

/// Every operation, indexed by `OpKind as usize`.
pub const ALL_OPS: [OpKind; 17] = [
    OpKind::NtCreateX,
    OpKind::Close,
    OpKind::Rename,
    OpKind::Unlink,
    OpKind::Deltree,
    OpKind::Rmdir,
    OpKind::Mkdir,
    OpKind::QPathInfo,
    OpKind::QFileInfo,
    OpKind::QFsInfo,
    OpKind::SFileInfo,
    OpKind::Find,
    OpKind::WriteX,
    OpKind::ReadX,
    OpKind::LockX,
    OpKind::UnlockX,
    OpKind::Flush,
];

/// How many kinds there are.
pub const N_OPS: usize = ALL_OPS.len();

impl OpKind {
    /// The name in load files.
    pub fn file_name(self) -> &'static str {
        match self {
            OpKind::NtCreateX => "NTCreateX",
            OpKind::Close => "Close",
            OpKind::Rename => "Rename",
            OpKind::Unlink => "Unlink",
            OpKind::Deltree => "Deltree",
            OpKind::Rmdir => "Rmdir",
            OpKind::Mkdir => "Mkdir",
            OpKind::QPathInfo => "QUERY_PATH_INFORMATION",
            OpKind::QFileInfo => "QUERY_FILE_INFORMATION",
            OpKind::QFsInfo => "QUERY_FS_INFORMATION",
            OpKind::SFileInfo => "SET_FILE_INFORMATION",
            OpKind::Find => "FIND_FIRST",
            OpKind::WriteX => "WriteX",
            OpKind::ReadX => "ReadX",
            OpKind::LockX => "LockX",
            OpKind::UnlockX => "UnlockX",
            OpKind::Flush => "Flush",
        }
    }

    /// The short lower-case name used in metric names (dbench's result
    /// table names: `ntcreatex`, `qpathinfo`, `find` …).
    pub fn key(self) -> &'static str {
        match self {
            OpKind::NtCreateX => "ntcreatex",
            OpKind::Close => "close",
            OpKind::Rename => "rename",
            OpKind::Unlink => "unlink",
            OpKind::Deltree => "deltree",
            OpKind::Rmdir => "rmdir",
            OpKind::Mkdir => "mkdir",
            OpKind::QPathInfo => "qpathinfo",
            OpKind::QFileInfo => "qfileinfo",
            OpKind::QFsInfo => "qfsinfo",
            OpKind::SFileInfo => "sfileinfo",
            OpKind::Find => "find",
            OpKind::WriteX => "writex",
            OpKind::ReadX => "readx",
            OpKind::LockX => "lockx",
            OpKind::UnlockX => "unlockx",
            OpKind::Flush => "flush",
        }
    }

    fn from_file_name(s: &str) -> Option<OpKind> {
        ALL_OPS.iter().copied().find(|k| k.file_name() == s)
    }

    /// The fields after the name and before the status.
    fn fields(self) -> &'static str {
        match self {
            OpKind::NtCreateX => "\"path\" create_options create_disposition handle",
            OpKind::Close | OpKind::Flush => "handle",
            OpKind::Rename => "\"old\" \"new\"",
            OpKind::Unlink => "\"path\" attributes",
            OpKind::Deltree | OpKind::Rmdir | OpKind::Mkdir => "\"path\"",
            OpKind::QPathInfo => "\"path\" level",
            OpKind::QFileInfo | OpKind::SFileInfo => "handle level",
            OpKind::QFsInfo => "level",
            OpKind::Find => "\"pattern\" level max_count expected_count",
            OpKind::WriteX | OpKind::ReadX => "handle offset size ret_size",
            OpKind::LockX | OpKind::UnlockX => "handle offset size",
        }
    }

    fn field_count(self) -> usize {
        self.fields().split_whitespace().count()
    }
}

/// `NTCreateX`'s create_options bit for a directory (`FILE_DIRECTORY_FILE`).
pub const FILE_DIRECTORY_FILE: u32 = 0x1;

/// `NTCreateX` create dispositions.
pub mod disposition {
    /// Replace if it exists, else create.
    pub const SUPERSEDE: u32 = 0;
    /// Open; fail if it does not exist.
    pub const OPEN: u32 = 1;
    /// Create; fail if it exists.
    pub const CREATE: u32 = 2;
    /// Open, or create if it does not exist.
    pub const OPEN_IF: u32 = 3;
    /// Open and truncate; fail if it does not exist.
    pub const OVERWRITE: u32 = 4;
    /// Open and truncate, or create.
    pub const OVERWRITE_IF: u32 = 5;
}

/// One operation of the trace. Paths are indices into
/// [`LoadFile::paths`]; handles are dense slots (the trace's handle
/// numbers, renumbered), so that a replaying client keeps its open handles
/// in a plain array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    /// Which operation.
    pub kind: OpKind,
    /// Its path (or pattern, or old name), if it has one.
    pub path: u32,
    /// A rename's new name.
    pub path2: u32,
    /// Its handle slot, if it has one.
    pub handle: u32,
    /// Offset of a read, write or lock.
    pub offset: u64,
    /// Size of a read, write or lock.
    pub size: u32,
    /// `NTCreateX`'s create_options.
    pub options: u32,
    /// `NTCreateX`'s create_disposition.
    pub disposition: u32,
    /// The trace expects success (`NT_STATUS_OK` or `0x0`).
    pub expect_ok: bool,
    /// Its line in the load file (1-based).
    pub line: u32,
}

/// A path of the trace, relative and `/`-separated; `client_relative`
/// when it lies under `clients/client1`, whose `client1` each client
/// replaces with its own directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracePath {
    /// The path, `/`-separated, without a leading `/`.
    pub text: String,
    /// Index of `client1` in `text` when the path is under
    /// `clients/client1`.
    pub client_at: Option<usize>,
}

impl TracePath {
    /// The path for client `n` (1-based), as dbench names it.
    pub fn for_client(&self, n: u32) -> String {
        match self.client_at {
            None => self.text.clone(),
            Some(i) => format!(
                "{}client{n}{}",
                &self.text[..i],
                &self.text[i + "client1".len()..]
            ),
        }
    }
}

/// Totals of one pass of a load file, computed from its lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassTotals {
    /// Operations per kind.
    pub ops: [u64; N_OPS],
    /// Σ `size` of `ReadX` lines (dbench's accounting).
    pub read_bytes: u64,
    /// Σ `size` of `WriteX` lines.
    pub write_bytes: u64,
}

/// A parsed load file.
#[derive(Debug, Clone)]
pub struct LoadFile {
    /// Where it came from.
    pub origin: String,
    /// The operations, in order.
    pub ops: Vec<Op>,
    /// The distinct paths.
    pub paths: Vec<TracePath>,
    /// How many handle slots a client needs.
    pub handle_slots: usize,
    /// The largest read or write.
    pub max_io: u32,
    /// The totals of one pass.
    pub totals: PassTotals,
}

/// Why a load file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadFileError {
    /// It cannot be read.
    #[error("load file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line is malformed.
    #[error("load file {path} line {line}: {message}")]
    Line {
        /// The file.
        path: String,
        /// The line (1-based).
        line: usize,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// It has no operations.
    #[error("load file {path}: no operations (one per line: `Name fields… STATUS`)")]
    Empty {
        /// The file.
        path: String,
    },
}

/// Splits a line into tokens: words separated by spaces, double-quoted
/// strings as one token (without their quotes).
fn tokens(line: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('"') {
            let end = r
                .find('"')
                .ok_or_else(|| "a quoted path is not closed by `\"`".to_string())?;
            out.push(&r[..end]);
            rest = r[end + 1..].trim_start();
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            out.push(&rest[..end]);
            rest = rest[end..].trim_start();
        }
    }
    Ok(out)
}

/// A number as dbench reads it (`strtol(…, 0)`: decimal or `0x` hex).
fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Whether a status means success; `None` when it is not a status.
fn status_ok(s: &str) -> Option<bool> {
    if s.starts_with("NT_STATUS_") {
        Some(s == "NT_STATUS_OK")
    } else if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok().map(|v| v == 0)
    } else {
        None
    }
}

/// Turns a trace path into a relative `/` path.
fn trace_path(raw: &str) -> TracePath {
    let text = raw.replace('\\', "/").trim_start_matches('/').to_string();
    let client_at = if text == "clients/client1" || text.starts_with("clients/client1/") {
        Some("clients/".len())
    } else {
        None
    };
    TracePath { text, client_at }
}

struct Builder {
    paths: Vec<TracePath>,
    path_ix: HashMap<String, u32>,
    handles: HashMap<u64, u32>,
}

impl Builder {
    fn path(&mut self, raw: &str) -> u32 {
        let p = trace_path(raw);
        if let Some(&i) = self.path_ix.get(&p.text) {
            return i;
        }
        let i = self.paths.len() as u32;
        self.path_ix.insert(p.text.clone(), i);
        self.paths.push(p);
        i
    }

    fn handle(&mut self, n: u64) -> u32 {
        let next = self.handles.len() as u32;
        *self.handles.entry(n).or_insert(next)
    }
}

impl LoadFile {
    /// Reads and parses a load file.
    pub fn read(path: &Path) -> Result<LoadFile, LoadFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| LoadFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        LoadFile::parse(&path.display().to_string(), &text)
    }

    /// Parses load-file text; `origin` names it in errors.
    pub fn parse(origin: &str, text: &str) -> Result<LoadFile, LoadFileError> {
        let mut b = Builder {
            paths: Vec::new(),
            path_ix: HashMap::new(),
            handles: HashMap::new(),
        };
        let mut ops = Vec::new();
        let mut totals = PassTotals::default();
        let mut max_io = 0u32;
        for (i, line) in text.lines().enumerate() {
            let lineno = i + 1;
            let err = |message: String| LoadFileError::Line {
                path: origin.to_string(),
                line: lineno,
                message,
            };
            if line.trim_start().starts_with('#') {
                continue;
            }
            let mut t = tokens(line).map_err(err)?;
            if t.len() < 2 {
                continue;
            }
            // An optional leading target time (timed load files).
            if t[0].parse::<f64>().is_ok() && OpKind::from_file_name(t[1]).is_some() {
                t.remove(0);
            }
            let name = t[0];
            if name.starts_with("SMB") {
                return Err(err(format!(
                    "`{name}` is a dbench-1 operation; this is dbench 4's format (NTCreateX, ReadX, WriteX …)"
                )));
            }
            let kind = OpKind::from_file_name(name).ok_or_else(|| {
                err(format!(
                    "unknown operation `{name}`; known: {}",
                    ALL_OPS
                        .iter()
                        .map(|k| k.file_name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            let status = *t.last().expect("at least two tokens");
            let expect_ok = status_ok(status).ok_or_else(|| {
                err(format!(
                    "{name}: the last field `{status}` is not a status (NT_STATUS_… or 0x…)"
                ))
            })?;
            let f = &t[1..t.len() - 1];
            if f.len() != kind.field_count() {
                return Err(err(format!(
                    "{name} takes {} field(s) before the status ({}), found {}",
                    kind.field_count(),
                    kind.fields(),
                    f.len()
                )));
            }
            let num = |j: usize| {
                number(f[j]).ok_or_else(|| {
                    err(format!(
                        "{name}: field {} `{}` is not a number ({})",
                        j + 1,
                        f[j],
                        kind.fields()
                    ))
                })
            };
            let mut op = Op {
                kind,
                path: u32::MAX,
                path2: u32::MAX,
                handle: u32::MAX,
                offset: 0,
                size: 0,
                options: 0,
                disposition: 0,
                expect_ok,
                line: lineno as u32,
            };
            match kind {
                OpKind::NtCreateX => {
                    op.path = b.path(f[0]);
                    op.options = num(1)? as u32;
                    op.disposition = num(2)? as u32;
                    if op.disposition > disposition::OVERWRITE_IF {
                        return Err(err(format!(
                            "NTCreateX: create_disposition {} is not one of 0 (supersede) … 5 (overwrite_if)",
                            f[2]
                        )));
                    }
                    op.handle = b.handle(num(3)?);
                }
                OpKind::Close | OpKind::Flush | OpKind::QFileInfo | OpKind::SFileInfo => {
                    op.handle = b.handle(num(0)?);
                }
                OpKind::Rename => {
                    op.path = b.path(f[0]);
                    op.path2 = b.path(f[1]);
                }
                OpKind::Unlink
                | OpKind::Deltree
                | OpKind::Rmdir
                | OpKind::Mkdir
                | OpKind::QPathInfo
                | OpKind::Find => op.path = b.path(f[0]),
                OpKind::QFsInfo => {}
                OpKind::WriteX | OpKind::ReadX | OpKind::LockX | OpKind::UnlockX => {
                    op.handle = b.handle(num(0)?);
                    op.offset = num(1)?;
                    let size = num(2)?;
                    op.size = u32::try_from(size)
                        .ok()
                        .filter(|s| *s <= 16 << 20)
                        .ok_or_else(|| err(format!("{name}: size {size} is over 16 MiB")))?;
                    if matches!(kind, OpKind::WriteX | OpKind::ReadX) {
                        max_io = max_io.max(op.size);
                    }
                }
            }
            totals.ops[kind as usize] += 1;
            match kind {
                OpKind::ReadX => totals.read_bytes += u64::from(op.size),
                OpKind::WriteX => totals.write_bytes += u64::from(op.size),
                _ => {}
            }
            ops.push(op);
        }
        if ops.is_empty() {
            return Err(LoadFileError::Empty {
                path: origin.to_string(),
            });
        }
        Ok(LoadFile {
            origin: origin.to_string(),
            ops,
            handle_slots: b.handles.len(),
            paths: b.paths,
            max_io,
            totals,
        })
    }
}

/// Whether `name` matches a DOS wildcard `pattern` (`*`, `?`; case
/// insensitive, as an SMB server matches `FIND_FIRST` patterns; `*.*`
/// matches every name). Allocation-free: it runs in the measured loop.
pub fn wildcard_match(pattern: &[u8], name: &[u8]) -> bool {
    if pattern == b"*.*" || pattern == b"*" {
        return true;
    }
    let (mut p, mut n) = (0, 0);
    let (mut star, mut mark) = (usize::MAX, 0);
    while n < name.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p].eq_ignore_ascii_case(&name[n])) {
            p += 1;
            n += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = p;
            mark = n;
            p += 1;
        } else if star != usize::MAX {
            p = star + 1;
            mark += 1;
            n = mark;
        } else {
            return false;
        }
    }
    while p < pattern.len() && pattern[p] == b'*' {
        p += 1;
    }
    p == pattern.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x2 16385 NT_STATUS_OK
Close 16385 NT_STATUS_OK
# a comment
NTCreateX "\clients\client1\f.dat" 0x40 0x2 9938 NT_STATUS_OK
WriteX 9938 0 65536 65536 NT_STATUS_OK
1.5 ReadX 9938 0x1000 4096 4096 NT_STATUS_OK
QUERY_PATH_INFORMATION "\clients\client1\nope" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
Close 9938 0x0
"#;

    #[test]
    fn parses_dbench_lines() {
        let f = LoadFile::parse("t", SAMPLE).unwrap();
        assert_eq!(f.ops.len(), 9);
        assert_eq!(f.handle_slots, 2);
        assert_eq!(f.totals.write_bytes, 65536);
        assert_eq!(f.totals.read_bytes, 4096);
        assert_eq!(f.totals.ops[OpKind::Close as usize], 2);
        let read = f.ops[6];
        assert_eq!(
            (read.kind, read.offset, read.size),
            (OpKind::ReadX, 4096, 4096)
        );
        assert_eq!(read.line, 8);
        assert!(!f.ops[7].expect_ok);
        assert!(f.ops[8].expect_ok);
        assert_eq!(f.ops[4].handle, f.ops[8].handle);
        let p = &f.paths[f.ops[4].path as usize];
        assert_eq!(p.text, "clients/client1/f.dat");
        assert_eq!(p.for_client(12), "clients/client12/f.dat");
        let shared = &f.paths[f.ops[1].path as usize];
        assert_eq!(shared.for_client(3), "clients");
    }

    #[test]
    fn bad_lines_name_the_line_and_what_is_allowed() {
        let e = LoadFile::parse(
            "mix.txt",
            "Close 1 NT_STATUS_OK\nFrobnicate 1 NT_STATUS_OK\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with(
                "load file mix.txt line 2: unknown operation `Frobnicate`; known: NTCreateX"
            ),
            "{e}"
        );
        let e = LoadFile::parse("m", "Close 1 OK\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 1: Close: the last field `OK` is not a status"),
            "{e}"
        );
        let e = LoadFile::parse("m", "ReadX 1 0 NT_STATUS_OK\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ReadX takes 4 field(s)"), "{e}");
        let e = LoadFile::parse("m", "ReadX 1 zero 5 5 NT_STATUS_OK\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("field 2 `zero` is not a number"), "{e}");
        let e = LoadFile::parse("m", "# nothing\n").unwrap_err().to_string();
        assert!(e.contains("no operations"), "{e}");
        let e = LoadFile::parse("m", "NTCreateX \"\\a 0x40 0x1 1 NT_STATUS_OK\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not closed"), "{e}");
    }

    #[test]
    fn dos_wildcards() {
        assert!(wildcard_match(b"*.*", b"anything"));
        assert!(wildcard_match(b"FILLER.*", b"filler.000"));
        assert!(!wildcard_match(b"FILLER.*", b"fill.000"));
        assert!(wildcard_match(b"a?c*", b"abcdef"));
        assert!(!wildcard_match(b"a?c", b"abcd"));
        assert!(wildcard_match(b"*.PRN", b"x.prn"));
    }
}
