//! Replaying a load file: N clients, each a thread with its own back end
//! (its own SMB connection) and its own directory, started together
//! behind the point's gate, for a ramp-up and a measured interval — or
//! for an exact number of passes (a fixed amount of work, for checks).
//!
//! # What is counted
//!
//! An operation counts when it *completes* inside the measured interval
//! (the phase is read after it returns). Its type's count, its latency
//! (one clock read before, one after) and — for `ReadX`/`WriteX` — its
//! line's `size` field (dbench's and nbench's byte accounting) and the
//! bytes actually moved are recorded. An operation whose outcome (success
//! or failure) differs from the status the trace expects is an *error* of
//! its type; one the back end cannot perform is *unsupported*, and is
//! neither done nor an error.
//!
//! Between the clock reads the loop does only the operation: paths are C
//! strings made before the gate, handles live in an array indexed by the
//! trace's renumbered handles, and the I/O buffer is allocated once.

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use benchlab_core::cost::LoopCost;
use benchlab_core::cpu::CpuSnapshot;
use benchlab_core::result::CpuUsage;

use crate::backend::{Backend, Local, Outcome};
use crate::latency::Latency;
use crate::loadfile::{disposition, LoadFile, OpKind, FILE_DIRECTORY_FILE, N_OPS};
use crate::procs::Prefix;
use crate::smb::{url_escape, Credentials, Dialect, Smb, SmbClient};
use crate::smb1::Smb1;

/// Where the clients replay.
#[derive(Debug, Clone)]
pub enum Target {
    /// A local or mounted directory (must exist).
    Local {
        /// The directory.
        dir: PathBuf,
    },
    /// An SMB share.
    Smb {
        /// `host:port` (an IPv6 host in brackets).
        server: String,
        /// The share's name.
        share: String,
        /// The dialect.
        dialect: Dialect,
        /// The client stack (the native one speaks only SMB1).
        client: SmbClient,
        /// The user.
        user: String,
        /// Its password.
        password: String,
    },
}

/// A replay to run.
#[derive(Debug, Clone)]
pub struct Replay {
    /// Where.
    pub target: Target,
    /// The clients' first number (0-based; client `i` replays in
    /// `clients/client<i+1>`).
    pub first: u32,
    /// How many clients this host runs.
    pub count: u32,
    /// Ramp-up, not counted.
    pub ramp_up: Duration,
    /// The measured interval.
    pub measure: Duration,
    /// `Some(n)`: each client replays the file exactly `n` times, all of
    /// it counted, instead of the timed phases.
    pub passes: Option<u64>,
    /// Remove the run's directory afterwards.
    pub cleanup: bool,
}

/// What one client (or, merged, a host's clients) did in the measured
/// interval.
pub struct Tally {
    /// Operations done, by type.
    pub ops: [u64; N_OPS],
    /// Outcomes that differ from the trace's, by type.
    pub errors: [u64; N_OPS],
    /// Operations the back end cannot perform, by type.
    pub unsupported: [u64; N_OPS],
    /// Σ `size` of completed `ReadX` lines.
    pub read_bytes: u64,
    /// Σ `size` of completed `WriteX` lines.
    pub write_bytes: u64,
    /// Bytes actually read.
    pub read_moved: u64,
    /// Bytes actually written.
    pub write_moved: u64,
    /// Latency by type.
    pub latency: Vec<Latency>,
    /// Whole passes completed (over the whole run).
    pub passes: u64,
    /// The first error.
    pub first_error: Option<FirstError>,
    /// CPU time of a client process over the measured interval (s); 0
    /// for threads, whose CPU time is their process's.
    pub cpu_s: f64,
}

/// The first operation whose outcome differed from the trace's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstError {
    /// The client (1-based).
    pub client: u32,
    /// The load file's line.
    pub line: u32,
    /// The operation.
    pub kind: OpKind,
    /// It failed with this errno (0: it succeeded where the trace
    /// expects a failure, or its handle was not open).
    pub errno: i32,
}

impl Tally {
    pub(crate) fn new() -> Tally {
        Tally {
            ops: [0; N_OPS],
            errors: [0; N_OPS],
            unsupported: [0; N_OPS],
            read_bytes: 0,
            write_bytes: 0,
            read_moved: 0,
            write_moved: 0,
            latency: (0..N_OPS)
                .map(|_| Latency::with_digits(crate::latency::DIGITS))
                .collect(),
            passes: 0,
            first_error: None,
            cpu_s: 0.0,
        }
    }

    /// Its exact state as bytes (a client process's result).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 * 1024);
        let mut put = |v: u64| out.extend_from_slice(&v.to_le_bytes());
        for a in [&self.ops, &self.errors, &self.unsupported] {
            for v in a.iter() {
                put(*v);
            }
        }
        for v in [
            self.read_bytes,
            self.write_bytes,
            self.read_moved,
            self.write_moved,
            self.passes,
            self.cpu_s.to_bits(),
        ] {
            put(v);
        }
        match self.first_error {
            None => put(u64::MAX),
            Some(e) => {
                put(u64::from(e.client));
                put(u64::from(e.line));
                put(e.kind as u64);
                put(e.errno as u64);
            }
        }
        for l in &self.latency {
            l.encode(&mut out);
        }
        out
    }

    /// Reads what [`Tally::encode`] wrote.
    pub(crate) fn decode(mut buf: &[u8]) -> Result<Tally, String> {
        use crate::latency::take_u64;
        let b = &mut buf;
        let mut t = Tally::new();
        for a in [&mut t.ops, &mut t.errors, &mut t.unsupported] {
            for v in a.iter_mut() {
                *v = take_u64(b)?;
            }
        }
        t.read_bytes = take_u64(b)?;
        t.write_bytes = take_u64(b)?;
        t.read_moved = take_u64(b)?;
        t.write_moved = take_u64(b)?;
        t.passes = take_u64(b)?;
        t.cpu_s = f64::from_bits(take_u64(b)?);
        let client = take_u64(b)?;
        if client != u64::MAX {
            let line = take_u64(b)? as u32;
            let kind = crate::loadfile::ALL_OPS
                .get(take_u64(b)? as usize)
                .copied()
                .ok_or("a bad operation number")?;
            t.first_error = Some(FirstError {
                client: client as u32,
                line,
                kind,
                errno: take_u64(b)? as i32,
            });
        }
        for l in t.latency.iter_mut() {
            *l = Latency::decode(b)?;
        }
        Ok(t)
    }

    pub(crate) fn merge(&mut self, o: &Tally) {
        for i in 0..N_OPS {
            self.ops[i] += o.ops[i];
            self.errors[i] += o.errors[i];
            self.unsupported[i] += o.unsupported[i];
            self.latency[i].merge(&o.latency[i]);
        }
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.read_moved += o.read_moved;
        self.write_moved += o.write_moved;
        self.passes += o.passes;
        self.cpu_s += o.cpu_s;
        if self.first_error.is_none() {
            self.first_error = o.first_error;
        }
    }
}

/// The result of a host's replay.
pub struct Outcomes {
    /// All its clients' tallies, merged.
    pub tally: Tally,
    /// The measured interval's length (s).
    pub measure_s: f64,
    /// This process's CPU use over it.
    pub cpu: CpuUsage,
    /// The run directory (relative to the target's root).
    pub run_dir: String,
}

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Setting up failed (nothing was measured).
    #[error("{0}")]
    Setup(String),
    /// The point's gate failed or the run was aborted.
    #[error("{0}")]
    Gate(String),
    /// Stopped from outside.
    #[error("aborted")]
    Aborted,
}

pub(crate) const WARMUP: u8 = 0;
pub(crate) const MEASURE: u8 = 1;
pub(crate) const STOP: u8 = 2;

/// One client's prepared paths: for each trace path, the full path (or
/// URL), its directory and its last component (for `FIND_FIRST`).
struct Paths {
    full: Vec<CString>,
    dir: Vec<CString>,
    name: Vec<Vec<u8>>,
}

fn client_paths(file: &LoadFile, prefix: &str, client: u32, smb: bool) -> Result<Paths, String> {
    let mut p = Paths {
        full: Vec::with_capacity(file.paths.len()),
        dir: Vec::with_capacity(file.paths.len()),
        name: Vec::with_capacity(file.paths.len()),
    };
    for tp in &file.paths {
        let rel = tp.for_client(client);
        let rel = if smb {
            url_escape(rel.as_bytes())
        } else {
            rel.into_bytes()
        };
        let (dir, name) = match rel.iter().rposition(|&b| b == b'/') {
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => (&rel[..0], &rel[..]),
        };
        let join = |tail: &[u8]| {
            let mut v = prefix.as_bytes().to_vec();
            if !tail.is_empty() {
                v.push(b'/');
                v.extend_from_slice(tail);
            }
            CString::new(v).map_err(|_| format!("path {:?} holds a NUL byte", tp.text))
        };
        p.full.push(join(&rel)?);
        p.dir.push(join(dir)?);
        p.name.push(name.to_vec());
    }
    Ok(p)
}

/// How `NTCreateX`'s disposition opens a file (dbench's mapping:
/// `FILE_CREATE` does not add `O_EXCL`).
fn open_flags(disp: u32) -> libc::c_int {
    libc::O_RDWR
        | match disp {
            disposition::OPEN => 0,
            disposition::CREATE | disposition::OPEN_IF => libc::O_CREAT,
            disposition::OVERWRITE => libc::O_TRUNC,
            _ => libc::O_CREAT | libc::O_TRUNC,
        }
}

pub(crate) struct Client<'a, B: Backend> {
    backend: B,
    file: &'a LoadFile,
    paths: Paths,
    handles: Vec<Option<B::File>>,
    handle_path: Vec<u32>,
    buf: Vec<u8>,
    pub(crate) tally: Tally,
    number: u32,
    /// A client process measures its own CPU time.
    own_cpu: bool,
}

/// This process's CPU time (user + system, s).
fn process_cpu_s() -> f64 {
    // SAFETY: getrusage fills the zeroed struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

impl<B: Backend> Client<'_, B> {
    /// Performs one operation: whether it succeeded, `None` when the back
    /// end cannot do it; and the bytes it moved.
    #[inline]
    fn perform(&mut self, i: usize) -> (Option<bool>, u64) {
        let op = self.file.ops[i];
        let b = &mut self.backend;
        let h = op.handle as usize;
        let ok = |o: Outcome| match o {
            Outcome::Ok => Some(true),
            Outcome::Err(_) => Some(false),
            Outcome::Unsupported => None,
        };
        match op.kind {
            OpKind::NtCreateX => {
                let path = &self.paths.full[op.path as usize];
                let dir = op.options & FILE_DIRECTORY_FILE != 0;
                if dir && op.disposition != disposition::OPEN {
                    // The trace's directory creates: mkdir, then open it
                    // (an existing directory is not an error: dbench).
                    let _ = b.mkdir(path);
                }
                match b.open(path, open_flags(op.disposition), dir) {
                    Ok(f) => {
                        if op.expect_ok {
                            if let Some(old) = self.handles[h].replace(f) {
                                let _ = b.close(old);
                            }
                            self.handle_path[h] = op.path;
                        } else {
                            // An unexpected success: not kept open.
                            let _ = b.close(f);
                        }
                        (Some(true), 0)
                    }
                    Err(_) => (Some(false), 0),
                }
            }
            OpKind::Close => match self.handles[h].take() {
                Some(f) => (ok(b.close(f)), 0),
                None => (Some(false), 0),
            },
            OpKind::ReadX | OpKind::WriteX => {
                let Some(f) = self.handles[h].as_mut() else {
                    return (Some(false), 0);
                };
                let len = op.size as usize;
                let r = if op.kind == OpKind::ReadX {
                    b.read_at(f, &mut self.buf[..len], op.offset)
                } else {
                    b.write_at(f, &self.buf[..len], op.offset)
                };
                match r {
                    Ok(n) => (Some(true), n as u64),
                    Err(_) => (Some(false), 0),
                }
            }
            OpKind::QPathInfo => (ok(b.stat(&self.paths.full[op.path as usize])), 0),
            OpKind::QFileInfo => match self.handles[h].as_mut() {
                Some(f) => (ok(b.fstat(f)), 0),
                None => (Some(false), 0),
            },
            OpKind::SFileInfo => match self.handles[h].as_mut() {
                Some(f) => (
                    ok(b.set_times(f, &self.paths.full[self.handle_path[h] as usize])),
                    0,
                ),
                None => (Some(false), 0),
            },
            OpKind::QFsInfo => (ok(b.statfs()), 0),
            OpKind::Find => {
                let p = op.path as usize;
                match b.find(&self.paths.dir[p], &self.paths.name[p]) {
                    // No match is the trace's NT_STATUS_NO_SUCH_FILE.
                    Ok(n) => (Some(n > 0), 0),
                    Err(_) => (Some(false), 0),
                }
            }
            OpKind::Unlink => (ok(b.unlink(&self.paths.full[op.path as usize])), 0),
            OpKind::Rename => (
                ok(b.rename(
                    &self.paths.full[op.path as usize],
                    &self.paths.full[op.path2 as usize],
                )),
                0,
            ),
            OpKind::Mkdir => match b.mkdir(&self.paths.full[op.path as usize]) {
                // Several clients share `clients`: it existing is fine.
                Outcome::Err(e) if e == libc::EEXIST => (Some(true), 0),
                o => (ok(o), 0),
            },
            OpKind::Rmdir => (ok(b.rmdir(&self.paths.full[op.path as usize])), 0),
            OpKind::Deltree => (ok(b.deltree(&self.paths.full[op.path as usize])), 0),
            OpKind::LockX | OpKind::UnlockX => match self.handles[h].as_mut() {
                Some(f) => (
                    ok(b.lock(f, op.offset, u64::from(op.size), op.kind == OpKind::LockX)),
                    0,
                ),
                None => (Some(false), 0),
            },
            OpKind::Flush => match self.handles[h].as_mut() {
                Some(f) => (ok(b.flush(f)), 0),
                None => (Some(false), 0),
            },
        }
    }

    /// Replays until told to stop (or for `passes` passes).
    pub(crate) fn run(&mut self, phase: &AtomicU8, passes: Option<u64>) {
        let n = self.file.ops.len();
        // A process's CPU time from the measured interval's start (seen at
        // the first operation that starts in it) to its end.
        let mut cpu_from =
            (self.own_cpu && phase.load(Ordering::Relaxed) == MEASURE).then(process_cpu_s);
        let cost = LoopCost::start();
        'passes: loop {
            for i in 0..n {
                match phase.load(Ordering::Relaxed) {
                    STOP => break 'passes,
                    MEASURE if self.own_cpu && cpu_from.is_none() => {
                        cpu_from = Some(process_cpu_s())
                    }
                    _ => {}
                }
                let t0 = Instant::now();
                let (result, moved) = self.perform(i);
                let ns = t0.elapsed().as_nanos() as u64;
                if phase.load(Ordering::Relaxed) != MEASURE {
                    continue;
                }
                let op = self.file.ops[i];
                let k = op.kind as usize;
                let t = &mut self.tally;
                match result {
                    None => t.unsupported[k] += 1,
                    Some(success) => {
                        t.ops[k] += 1;
                        t.latency[k].record(ns);
                        if success != op.expect_ok {
                            t.errors[k] += 1;
                            if t.first_error.is_none() {
                                t.first_error = Some(FirstError {
                                    client: self.number,
                                    line: op.line,
                                    kind: op.kind,
                                    errno: if success { 0 } else { crate::backend::errno() },
                                });
                            }
                        } else if success {
                            match op.kind {
                                OpKind::ReadX => {
                                    t.read_bytes += u64::from(op.size);
                                    t.read_moved += moved;
                                }
                                OpKind::WriteX => {
                                    t.write_bytes += u64::from(op.size);
                                    t.write_moved += moved;
                                }
                                _ => {}
                            }
                        }
                    }
                }
            }
            self.tally.passes += 1;
            if passes.is_some_and(|p| self.tally.passes >= p) {
                break;
            }
        }
        let ops: u64 = self.tally.ops.iter().chain(&self.tally.unsupported).sum();
        cost.end(B::COST_LABEL, ops);
        if let Some(from) = cpu_from {
            self.tally.cpu_s = process_cpu_s() - from;
        }
        // Handles the stop left open (not measured).
        for slot in self.handles.iter_mut() {
            if let Some(f) = slot.take() {
                let _ = self.backend.close(f);
            }
        }
    }
}

/// Sleeps `d` unless `abort` is set first.
fn sleep_unless(d: Duration, abort: &AtomicBool) -> Result<(), ReplayError> {
    let until = Instant::now() + d;
    loop {
        if abort.load(Ordering::Relaxed) {
            return Err(ReplayError::Aborted);
        }
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        std::thread::sleep((until - now).min(benchlab_core::workload::ABORT_POLL));
    }
}

fn unique_run_dir() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("benchlab-fileserver-{}-{nanos}", std::process::id())
}

/// What the SMB errno of a first contact means.
fn smb_contact_error(e: i32, url: &str, user: &str) -> String {
    let what = match e {
        libc::EACCES | libc::EPERM => format!(
            "logon refused for user `{user}` (wrong user or password, or no access to the share)"
        ),
        libc::ECONNREFUSED => "connection refused (is the server running on that port?)".into(),
        libc::ENOENT | libc::ENODEV => "no such share".into(),
        libc::ETIMEDOUT | libc::EHOSTUNREACH | libc::ENETUNREACH => "server unreachable".into(),
        libc::EPROTONOSUPPORT | libc::ECONNRESET | libc::EINVAL => {
            "no dialect in common with the server (see `dialect`)".into()
        }
        _ => std::io::Error::from_raw_os_error(e).to_string(),
    };
    format!("SMB {url}: {what} (errno {e})")
}

/// Runs the replay on this host: sets the clients up (their back ends,
/// their paths, the run directory), arrives at `gate` (which returns when
/// every client host is ready), runs the phases and cleans up.
pub fn run(
    spec: &Replay,
    file: &Arc<LoadFile>,
    abort: &AtomicBool,
    gate: &dyn Fn() -> Result<(), String>,
) -> Result<Outcomes, ReplayError> {
    let run_dir = unique_run_dir();
    match &spec.target {
        Target::Local { dir } => {
            let root = dir.join(&run_dir);
            std::fs::create_dir(&root).map_err(|e| {
                ReplayError::Setup(format!("create the run directory {}: {e}", root.display()))
            })?;
            let prefix = root.display().to_string();
            let made = |i: u32| {
                let c = CString::new(prefix.as_bytes()).expect("a path without NUL");
                Ok(Local::new(c)).map(|b| (b, i))
            };
            let r = drive(spec, file, abort, gate, &prefix, false, made);
            if spec.cleanup {
                let _ = std::fs::remove_dir_all(&root);
            }
            r.map(|(tally, measure_s, cpu)| Outcomes {
                tally,
                measure_s,
                cpu,
                run_dir,
            })
        }
        Target::Smb {
            server,
            share,
            dialect,
            client: SmbClient::Libsmbclient,
            user,
            password,
        } => {
            let share_url = format!("smb://{server}/{share}");
            let prefix = format!("{share_url}/{run_dir}");
            let creds = || Credentials::new(user, password).map_err(ReplayError::Setup);
            // First contact: logon, the share, the run directory.
            let admin = Smb::new(&share_url, *dialect, creds()?).map_err(ReplayError::Setup)?;
            let made = |i: u32| {
                let mut b = Smb::new(&share_url, *dialect, creds()?).map_err(ReplayError::Setup)?;
                // Connect now, not in the measured loop.
                if let Outcome::Err(e) = b.stat(&CString::new(prefix.clone()).expect("no NUL")) {
                    return Err(ReplayError::Setup(format!(
                        "client {}: {}",
                        i + 1,
                        smb_contact_error(e, &share_url, user)
                    )));
                }
                Ok((b, i))
            };
            let on = SmbRun {
                share_url: &share_url,
                user,
                run_dir,
                prefix: Prefix {
                    text: &prefix,
                    urls: true,
                },
            };
            on.run(spec, file, abort, gate, admin, made)
        }
        Target::Smb {
            server,
            share,
            dialect,
            client: SmbClient::Native,
            user,
            password,
        } => {
            let share_url = format!("smb://{server}/{share}");
            if *dialect != Dialect::Smb1 {
                return Err(ReplayError::Setup(format!(
                    "SMB {share_url}: the native client speaks only SMB1 (dialect = \"smb1\"), not {dialect:?}"
                )));
            }
            let connect = |who: &str| {
                Smb1::connect(server, share, user, password).map_err(|e| {
                    ReplayError::Setup(format!(
                        "{who}{}: {}",
                        smb_contact_error(e.errno, &share_url, user),
                        e.detail
                    ))
                })
            };
            let admin = connect("")?;
            let made = |i: u32| connect(&format!("client {}: ", i + 1)).map(|b| (b, i));
            let on = SmbRun {
                share_url: &share_url,
                user,
                prefix: Prefix {
                    text: &run_dir,
                    urls: false,
                },
                run_dir: run_dir.clone(),
            };
            on.run(spec, file, abort, gate, admin, made)
        }
    }
}

/// A replay over SMB: where its clients work.
struct SmbRun<'a> {
    share_url: &'a str,
    user: &'a str,
    run_dir: String,
    prefix: Prefix<'a>,
}

impl SmbRun<'_> {
    /// Makes the run directory through `admin`, runs the client
    /// processes (`make`), removes the directory when told.
    fn run<B: Backend>(
        self,
        spec: &Replay,
        file: &Arc<LoadFile>,
        abort: &AtomicBool,
        gate: &dyn Fn() -> Result<(), String>,
        mut admin: B,
        make: impl Fn(u32) -> Made<B>,
    ) -> Result<Outcomes, ReplayError> {
        let run_path = CString::new(self.prefix.text).expect("no NUL");
        if let Outcome::Err(e) = admin.mkdir(&run_path) {
            return Err(ReplayError::Setup(smb_contact_error(
                e,
                self.share_url,
                self.user,
            )));
        }
        let r = crate::procs::drive(spec, file, abort, gate, self.prefix, make);
        if spec.cleanup {
            let _ = admin.deltree(&run_path);
        }
        r.map(|(tally, measure_s, cpu)| Outcomes {
            tally,
            measure_s,
            cpu,
            run_dir: self.run_dir,
        })
    }
}

pub(crate) type Made<B> = Result<(B, u32), ReplayError>;

/// A client ready to replay: its paths made, its handle table and buffer
/// allocated.
pub(crate) fn new_client<'a, B: Backend>(
    file: &'a LoadFile,
    backend: B,
    prefix: &str,
    number: u32,
    smb: bool,
    own_cpu: bool,
) -> Result<Client<'a, B>, ReplayError> {
    let paths = client_paths(file, prefix, number, smb).map_err(ReplayError::Setup)?;
    Ok(Client {
        backend,
        file,
        paths,
        handles: (0..file.handle_slots).map(|_| None).collect(),
        handle_path: vec![0; file.handle_slots],
        // A byte pattern, not zeros: nothing on the way may treat the
        // data as sparse.
        buf: vec![0xa5; file.max_io.max(1) as usize],
        tally: Tally::new(),
        number,
        own_cpu,
    })
}

/// The measured interval's start and end (CPU snapshots and instants).
pub(crate) type Interval = (CpuSnapshot, Instant, Option<(CpuSnapshot, Instant)>);

/// Runs the phases once the clients are released at `begin`: ramp-up,
/// measured interval (or, with passes, nothing: the clients end by
/// themselves).
pub(crate) fn phases(
    spec: &Replay,
    abort: &AtomicBool,
    phase: &AtomicU8,
    begin: CpuSnapshot,
) -> Result<Interval, ReplayError> {
    if spec.passes.is_some() {
        return Ok((begin, Instant::now(), None));
    }
    sleep_unless(spec.ramp_up, abort)?;
    let m0 = CpuSnapshot::take();
    let t0 = Instant::now();
    phase.store(MEASURE, Ordering::SeqCst);
    sleep_unless(spec.measure, abort)?;
    phase.store(STOP, Ordering::SeqCst);
    let t1 = Instant::now();
    Ok((m0, t0, Some((CpuSnapshot::take(), t1))))
}

/// Makes the clients, runs them behind the gate, merges their tallies.
fn drive<B: Backend + Send>(
    spec: &Replay,
    file: &Arc<LoadFile>,
    abort: &AtomicBool,
    gate: &dyn Fn() -> Result<(), String>,
    prefix: &str,
    smb: bool,
    make: impl Fn(u32) -> Made<B>,
) -> Result<(Tally, f64, CpuUsage), ReplayError>
where
    B::File: Send,
{
    let mut clients = Vec::with_capacity(spec.count as usize);
    for i in 0..spec.count {
        let (backend, _) = make(i)?;
        clients.push(new_client(
            file,
            backend,
            prefix,
            spec.first + i + 1,
            smb,
            false,
        )?);
    }
    let phase = AtomicU8::new(if spec.passes.is_some() {
        MEASURE
    } else {
        WARMUP
    });
    let start = Barrier::new(clients.len() + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .into_iter()
            .map(|mut c| {
                let (phase, start) = (&phase, &start);
                s.spawn(move || {
                    start.wait();
                    c.run(phase, spec.passes);
                    c.tally
                })
            })
            .collect();
        let gated = gate().map_err(ReplayError::Gate);
        if gated.is_err() {
            phase.store(STOP, Ordering::SeqCst);
        }
        let begin = CpuSnapshot::take();
        start.wait();
        let timed = gated.and_then(|()| phases(spec, abort, &phase, begin));
        if timed.is_err() {
            phase.store(STOP, Ordering::SeqCst);
        }
        let mut total = Tally::new();
        for h in handles {
            match h.join() {
                Ok(t) => total.merge(&t),
                Err(_) => {
                    return Err(ReplayError::Setup("a client thread panicked".into()));
                }
            }
        }
        let (m0, t0, end) = timed?;
        let (m1, t1) = end.unwrap_or_else(|| (CpuSnapshot::take(), Instant::now()));
        Ok((total, (t1 - t0).as_secs_f64(), m0.usage_until(&m1)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIX: &str = r#"Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x2 1 NT_STATUS_OK
Close 1 NT_STATUS_OK
NTCreateX "\clients\client1\a.dat" 0x40 0x5 2 NT_STATUS_OK
WriteX 2 0 8192 8192 NT_STATUS_OK
WriteX 2 8192 100 100 NT_STATUS_OK
ReadX 2 0 4096 4096 NT_STATUS_OK
LockX 2 0 10 NT_STATUS_OK
UnlockX 2 0 10 NT_STATUS_OK
Flush 2 NT_STATUS_OK
QUERY_FILE_INFORMATION 2 258 NT_STATUS_OK
SET_FILE_INFORMATION 2 1004 NT_STATUS_OK
Close 2 NT_STATUS_OK
FIND_FIRST "\clients\client1\A.*" 260 1366 1 NT_STATUS_OK
FIND_FIRST "\clients\client1\B.*" 260 1366 0 NT_STATUS_NO_SUCH_FILE
QUERY_PATH_INFORMATION "\clients\client1\missing" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
QUERY_FS_INFORMATION 1 NT_STATUS_OK
Rename "\clients\client1\a.dat" "\clients\client1\b.dat" NT_STATUS_OK
NTCreateX "\clients\client1\gone" 0x40 0x1 3 NT_STATUS_OBJECT_NAME_NOT_FOUND
Mkdir "\clients\client1\sub" NT_STATUS_OK
Rmdir "\clients\client1\sub" NT_STATUS_OK
"#;

    #[test]
    fn local_passes_do_exactly_the_mix_and_leave_its_files() {
        let d = tempfile::tempdir().unwrap();
        let file = Arc::new(LoadFile::parse("mix", MIX).unwrap());
        let spec = Replay {
            target: Target::Local {
                dir: d.path().to_path_buf(),
            },
            first: 0,
            count: 3,
            ramp_up: Duration::ZERO,
            measure: Duration::ZERO,
            passes: Some(4),
            cleanup: false,
        };
        let out = run(&spec, &file, &AtomicBool::new(false), &|| Ok(())).unwrap();
        let t = &out.tally;
        assert_eq!(t.errors, [0; N_OPS], "{:?}", t.first_error);
        assert_eq!(t.passes, 12);
        for k in crate::loadfile::ALL_OPS {
            assert_eq!(t.ops[k as usize], 12 * file.totals.ops[k as usize], "{k:?}");
        }
        assert_eq!(t.write_bytes, 12 * 8292);
        assert_eq!(t.read_bytes, 12 * 4096);
        assert_eq!(t.read_moved, 12 * 4096);
        for c in 1..=3 {
            let f = d
                .path()
                .join(&out.run_dir)
                .join(format!("clients/client{c}/b.dat"));
            assert_eq!(std::fs::metadata(&f).unwrap().len(), 8292, "{f:?}");
        }
        assert!(!d.path().join(&out.run_dir).join("clients/client4").exists());
    }

    #[test]
    fn a_failed_gate_stops_the_clients() {
        let d = tempfile::tempdir().unwrap();
        let file = Arc::new(LoadFile::parse("mix", MIX).unwrap());
        let spec = Replay {
            target: Target::Local {
                dir: d.path().to_path_buf(),
            },
            first: 0,
            count: 2,
            ramp_up: Duration::from_secs(5),
            measure: Duration::from_secs(5),
            passes: None,
            cleanup: true,
        };
        let e = run(&spec, &file, &AtomicBool::new(false), &|| {
            Err("another host failed".into())
        })
        .err()
        .unwrap();
        assert_eq!(e.to_string(), "another host failed");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
