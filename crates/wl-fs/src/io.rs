//! The measured I/O of one (file size, record size) cell: IOzone's
//! syscall sequence for each selected pattern, in IOzone's order, on one
//! file.
//!
//! Each timed window starts immediately before the first I/O call and
//! ends after the loop, plus `fsync` when `include_fsync` (IOzone `-e`)
//! and plus `close` when `include_close` (IOzone `-c`); otherwise those
//! happen after the window. Buffers, the random permutation and the file
//! handle are all prepared before the window; the loops do only the I/O
//! calls, a 16-byte stamp per written record and an 8-byte compare per
//! read record (which is what lets every read be checked against the
//! offset it should have come from, at a cost of a few nanoseconds per
//! call of several microseconds).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use benchlab_core::cost::LoopCost;
use benchlab_core::sys;
use benchlab_core::WorkloadError;

use crate::pattern::{geometry, permutation, stride_next, Pattern};

/// Alignment of the I/O buffers: `O_DIRECT` needs buffers, offsets and
/// lengths aligned to the device's logical block size, at most one page.
pub const ALIGN: usize = 4096;

/// Written into the tail stamp of every record: `offset ^ TAIL_MAGIC`.
const TAIL_MAGIC: u64 = 0xB3AC_41AB_F5F5_0001;

/// What one cell does.
#[derive(Debug, Clone)]
pub struct CellSpec {
    /// The file (it must not exist; it is removed at the end).
    pub path: PathBuf,
    /// File size in bytes (IOzone uses `file / record` whole records).
    pub file_size: u64,
    /// Record size in bytes.
    pub record_size: u64,
    /// Stride read's stride in records (IOzone `-j`, default 17).
    pub stride: u64,
    /// The patterns to time, in IOzone's order.
    pub patterns: Vec<Pattern>,
    /// `O_DIRECT` on the nine read()/write() patterns (IOzone `-I`).
    pub direct: bool,
    /// fsync (fflush for stdio) inside the timed window (`-e`).
    pub include_fsync: bool,
    /// close (fclose) inside the timed window (`-c`).
    pub include_close: bool,
    /// Read the whole file back after the last pattern and check every
    /// byte (untimed).
    pub verify: bool,
    /// Keep the file after the cell (IOzone `-w`); for tests that inspect
    /// it (the target's cleanup removes it anyway).
    pub keep_file: bool,
}

/// One pattern's figure.
#[derive(Debug, Clone, PartialEq)]
pub struct PatternResult {
    /// Which pattern.
    pub pattern: Pattern,
    /// Bytes moved in the timed window (= IOzone's filebytes).
    pub bytes: u64,
    /// Length of the timed window, s.
    pub elapsed_s: f64,
    /// IOzone's rate: `floor(floor(bytes / time) / 1024)` KiB/s.
    pub kib_s: f64,
}

/// The figures of one cell.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CellResult {
    /// One per timed pattern, in order.
    pub patterns: Vec<PatternResult>,
    /// Records whose offset stamp the timed read loops checked.
    pub checked_reads: u64,
    /// Records the final verification pass read and compared in full.
    pub verified_records: u64,
}

/// A zeroed, `ALIGN`-aligned buffer (for `O_DIRECT`).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// The buffer is plain memory owned by this value.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` zeroed bytes (len > 0).
    pub fn new(len: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(len.max(1), ALIGN).expect("layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, len }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes while self lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len.max(1), ALIGN).expect("layout");
        // SAFETY: allocated with this layout in `new`.
        unsafe { std::alloc::dealloc(self.ptr, layout) }
    }
}

/// The body byte at position `i` of every record (the stamps overwrite
/// the first and last 8 bytes).
fn body_byte(i: usize) -> u8 {
    (i.wrapping_mul(31).wrapping_add(7) % 251) as u8
}

/// Fills a record buffer with the body pattern.
pub fn fill_body(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = body_byte(i);
    }
}

/// Stamps a record buffer with the file offset it is written at: the
/// first 8 bytes hold the offset, the last 8 `offset ^ TAIL_MAGIC` (so a
/// torn or misplaced record shows).
#[inline(always)]
pub fn stamp(buf: &mut [u8], offset: u64) {
    let n = buf.len();
    buf[..8].copy_from_slice(&offset.to_le_bytes());
    buf[n - 8..].copy_from_slice(&(offset ^ TAIL_MAGIC).to_le_bytes());
}

/// The head stamp of a record buffer.
#[inline(always)]
pub fn head(buf: &[u8]) -> u64 {
    u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"))
}

/// Whether a record read back is exactly what was written at `offset`.
pub fn record_ok(buf: &[u8], offset: u64) -> bool {
    let n = buf.len();
    head(buf) == offset
        && u64::from_le_bytes(buf[n - 8..].try_into().expect("8 bytes")) == offset ^ TAIL_MAGIC
        && buf[8..n - 8]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == body_byte(i + 8))
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("paths have no NUL")
}

fn last_err() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// An I/O error with what was done, and a plain hint for the errors a
/// user can act on.
fn io_err(what: &str, path: &Path, e: std::io::Error) -> WorkloadError {
    let hint = match e.raw_os_error() {
        Some(libc::ENOSPC) => " — the file system is full (the file does not fit)",
        Some(libc::EDQUOT) => " — the disk quota is exhausted",
        _ => "",
    };
    WorkloadError::io(format!("{what} {}{hint}", path.display()), e)
}

/// An open file descriptor, closed on drop unless closed explicitly.
struct Fd(libc::c_int);

impl Fd {
    fn open(path: &Path, flags: libc::c_int) -> std::io::Result<Fd> {
        let c = cpath(path);
        // SAFETY: a valid C string; the mode is used only with O_CREAT.
        let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o640) };
        if fd < 0 {
            Err(last_err())
        } else {
            Ok(Fd(fd))
        }
    }

    fn fsync(&self) -> std::io::Result<()> {
        // SAFETY: an open descriptor.
        if unsafe { libc::fsync(self.0) } != 0 {
            return Err(last_err());
        }
        Ok(())
    }

    fn close(mut self) -> std::io::Result<()> {
        let fd = std::mem::replace(&mut self.0, -1);
        // SAFETY: an open descriptor, closed once.
        if unsafe { libc::close(fd) } != 0 {
            return Err(last_err());
        }
        Ok(())
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        if self.0 >= 0 {
            // SAFETY: an open descriptor, closed once.
            unsafe { libc::close(self.0) };
        }
    }
}

/// A stdio stream with a record-sized buffer (IOzone's `setvbuf(…,
/// _IOFBF, reclen)`); the buffer outlives the stream.
struct Stream {
    f: *mut libc::FILE,
    _buf: AlignedBuf,
}

impl Stream {
    fn open(path: &Path, mode: &str, reclen: usize) -> std::io::Result<Stream> {
        let c = cpath(path);
        let m = CString::new(mode).expect("mode");
        // SAFETY: valid C strings.
        let f = unsafe { libc::fopen(c.as_ptr(), m.as_ptr()) };
        if f.is_null() {
            return Err(last_err());
        }
        let mut buf = AlignedBuf::new(reclen);
        // SAFETY: f is open and not yet used; buf lives as long as f.
        let rc = unsafe {
            libc::setvbuf(
                f,
                buf.as_mut_slice().as_mut_ptr() as *mut libc::c_char,
                libc::_IOFBF,
                reclen,
            )
        };
        let s = Stream { f, _buf: buf };
        if rc != 0 {
            return Err(std::io::Error::other("setvbuf failed"));
        }
        Ok(s)
    }

    fn fd(&self) -> libc::c_int {
        // SAFETY: an open stream.
        unsafe { libc::fileno(self.f) }
    }

    fn fflush(&self) -> std::io::Result<()> {
        // SAFETY: an open stream.
        if unsafe { libc::fflush(self.f) } != 0 {
            return Err(last_err());
        }
        Ok(())
    }

    fn fsync(&self) -> std::io::Result<()> {
        // SAFETY: the stream's descriptor.
        if unsafe { libc::fsync(self.fd()) } != 0 {
            return Err(last_err());
        }
        Ok(())
    }

    fn close(mut self) -> std::io::Result<()> {
        let f = std::mem::replace(&mut self.f, std::ptr::null_mut());
        // SAFETY: an open stream, closed once.
        if unsafe { libc::fclose(f) } != 0 {
            return Err(last_err());
        }
        Ok(())
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if !self.f.is_null() {
            // SAFETY: an open stream, closed once.
            unsafe { libc::fclose(self.f) };
        }
    }
}

fn rate(bytes: u64, elapsed_s: f64) -> f64 {
    let t = elapsed_s.max(1e-9);
    ((bytes as f64 / t).floor() / 1024.0).floor()
}

/// `read()` of exactly `buf.len()` bytes; a short read is an error (the
/// file is never shorter than the records IOzone reads).
///
/// Both this and [`write_full`] (and [`seek`]) make their system call
/// inline (`benchlab_core::sys`), not through glibc's `read()`/`write()`:
/// those are pthread cancellation points, and in a process with more than
/// one thread (an agent is one) glibc brackets each call with two atomic
/// read-modify-writes that single-threaded IOzone and the limit program
/// never pay. `bench/per-op` (callgrind, user-space instructions per
/// record over the nine patterns) went from 83.4 to 41.1 with libc's
/// `syscall()` (the limit program: 32.9); the figures of the inline call
/// are in bench/README.md.
#[inline(always)]
fn read_full(fd: libc::c_int, buf: &mut [u8]) -> std::io::Result<()> {
    let r = sys::read(fd, buf);
    if r.is(buf.len()) {
        Ok(())
    } else {
        Err(read_failed(r, buf.len()))
    }
}

/// The error of a read that did not return the whole record.
#[cold]
#[inline(never)]
fn read_failed(r: sys::Ret, want: usize) -> std::io::Error {
    match r.result() {
        Ok(n) => std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("short read: {n} of {want} bytes"),
        ),
        Err(e) => e,
    }
}

/// `write()` of exactly `buf.len()` bytes; a short write is an error
/// (IOzone: "Short write"), which is how a full file system shows first.
#[inline(always)]
fn write_full(fd: libc::c_int, buf: &[u8]) -> std::io::Result<()> {
    let r = sys::write(fd, buf);
    if r.is(buf.len()) {
        Ok(())
    } else {
        Err(write_failed(r))
    }
}

/// The error of a write that did not take the whole record.
#[cold]
#[inline(never)]
fn write_failed(r: sys::Ret) -> std::io::Error {
    match r.result() {
        Ok(_) => std::io::Error::from_raw_os_error(libc::ENOSPC),
        Err(e) => e,
    }
}

#[inline(always)]
fn seek(fd: libc::c_int, off: i64, whence: libc::c_int) -> std::io::Result<()> {
    let r = sys::lseek(fd, off, whence);
    if r.failed() {
        Err(r.error())
    } else {
        Ok(())
    }
}

/// Runs one cell: every selected pattern in IOzone's order, then the
/// optional verification, then removes the file.
///
/// Run by an agent, the cell is on its side's thread, which owns its
/// descriptor table (the agent's `placed`, `benchlab_core::placement::
/// own_fd_table`), so the loops' `read`/`write`/`lseek` take the kernel's
/// single-owner paths, as single-threaded IOzone and the limit program do:
/// record rewrite went from 0.92 to 1.00 × the limit in `bench/fs-vs-fio`.
pub fn run_cell(spec: &CellSpec, abort: &AtomicBool) -> Result<CellResult, WorkloadError> {
    let result = run_cell_inner(spec, abort);
    // The file is removed whatever happened (IOzone unlinks after each
    // cell, unless -w); a full file system must be left empty again.
    if !spec.keep_file || result.is_err() {
        let _ = std::fs::remove_file(&spec.path);
    }
    result
}

fn run_cell_inner(spec: &CellSpec, abort: &AtomicBool) -> Result<CellResult, WorkloadError> {
    let (n, filebytes) = geometry(spec.file_size, spec.record_size);
    if n == 0 {
        return Err(WorkloadError::Other(format!(
            "record size {} is larger than the file size {}",
            spec.record_size, spec.file_size
        )));
    }
    let reclen = spec.record_size as usize;
    let mut buf = AlignedBuf::new(reclen);
    fill_body(buf.as_mut_slice());
    let dflag = if spec.direct { libc::O_DIRECT } else { 0 };
    let mut out = CellResult::default();

    // Tests 1–9 need the file that "write" creates (IOzone requires -i 0);
    // without a timed write it is created here, untimed.
    if !spec.patterns.contains(&Pattern::Write) {
        write_pass(spec, &mut buf, n, dflag, false)?;
    }
    let perm = if spec
        .patterns
        .iter()
        .any(|p| matches!(p, Pattern::RandomRead | Pattern::RandomWrite))
    {
        permutation(n)
    } else {
        Vec::new()
    };

    for &p in &spec.patterns {
        if abort.load(Ordering::Relaxed) {
            return Err(WorkloadError::Aborted);
        }
        let (elapsed_s, checked) = match p {
            Pattern::Write => (write_pass(spec, &mut buf, n, dflag, true)?, 0),
            Pattern::Rewrite => (rewrite_pass(spec, &mut buf, n, dflag)?, 0),
            Pattern::Read | Pattern::Reread => read_pass(spec, &mut buf, n, dflag, p)?,
            Pattern::RandomRead => random_read_pass(spec, &mut buf, &perm, dflag)?,
            Pattern::RandomWrite => random_write_pass(spec, &mut buf, &perm, dflag)?,
            Pattern::BkwdRead => {
                // IOzone runs this pass twice and reports the first.
                let first = bkwd_pass(spec, &mut buf, n, dflag)?;
                bkwd_pass(spec, &mut buf, n, dflag)?;
                first
            }
            Pattern::RecordRewrite => (record_rewrite_pass(spec, &mut buf, n, dflag)?, 0),
            Pattern::StrideRead => stride_pass(spec, &mut buf, n, dflag)?,
            Pattern::Fwrite | Pattern::Frewrite => (fwrite_pass(spec, &mut buf, n)?, 0),
            Pattern::Fread | Pattern::Freread => fread_pass(spec, &mut buf, n)?,
        };
        out.checked_reads += checked;
        out.patterns.push(PatternResult {
            pattern: p,
            bytes: filebytes,
            elapsed_s,
            kib_s: rate(filebytes, elapsed_s),
        });
    }
    if spec.verify {
        out.verified_records = verify_file(spec, n)?;
    }
    Ok(out)
}

/// Ends a timed window per `-e`/`-c`: returns the elapsed time, and does
/// the rest (fsync, close) after it.
fn finish_fd(spec: &CellSpec, fd: Fd, t0: Instant, what: &str) -> Result<f64, WorkloadError> {
    let path = spec.path.as_path();
    if spec.include_fsync {
        fd.fsync()
            .map_err(|e| io_err(&format!("{what}: fsync"), path, e))?;
    }
    let elapsed = if spec.include_close {
        fd.close()
            .map_err(|e| io_err(&format!("{what}: close"), path, e))?;
        return Ok(t0.elapsed().as_secs_f64());
    } else {
        t0.elapsed().as_secs_f64()
    };
    if !spec.include_fsync {
        fd.fsync()
            .map_err(|e| io_err(&format!("{what}: fsync"), path, e))?;
    }
    fd.close()
        .map_err(|e| io_err(&format!("{what}: close"), path, e))?;
    Ok(elapsed)
}

fn open(spec: &CellSpec, flags: libc::c_int, what: &str) -> Result<Fd, WorkloadError> {
    let fd = Fd::open(&spec.path, flags).map_err(|e| {
        if e.raw_os_error() == Some(libc::EINVAL) && flags & libc::O_DIRECT != 0 {
            WorkloadError::Unsupported(format!(
                "the file system of {} refuses O_DIRECT (direct I/O): {e}",
                spec.path.display()
            ))
        } else {
            io_err(&format!("{what}: open"), &spec.path, e)
        }
    })?;
    // Before each timed pass IOzone fsyncs the fresh descriptor, untimed.
    fd.fsync()
        .map_err(|e| io_err(&format!("{what}: fsync"), &spec.path, e))?;
    Ok(fd)
}

/// write: IOzone's sanity step (create, truncate, close, unlink), then
/// `creat()`, close, open `O_RDWR`, and sequential writes of new blocks.
// Never inlined: bench/cost attributes instructions to the pass.
#[inline(never)]
fn write_pass(
    spec: &CellSpec,
    buf: &mut AlignedBuf,
    n: u64,
    dflag: libc::c_int,
    timed: bool,
) -> Result<f64, WorkloadError> {
    let path = spec.path.as_path();
    let what = "write";
    // O_EXCL on the first create: the file must be ours (the target
    // directory is benchlab's own, so it never exists).
    let f = Fd::open(path, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY)
        .map_err(|e| io_err("write: create", path, e))?;
    // SAFETY: an open descriptor.
    if unsafe { libc::ftruncate(f.0, 0) } != 0 {
        return Err(io_err("write: ftruncate", path, last_err()));
    }
    f.close().map_err(|e| io_err("write: close", path, e))?;
    std::fs::remove_file(path).map_err(|e| io_err("write: unlink", path, e))?;
    Fd::open(
        path,
        libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_TRUNC,
    )
    .map_err(|e| io_err("write: creat", path, e))?
    .close()
    .map_err(|e| io_err("write: close", path, e))?;
    let fd = open(spec, libc::O_RDWR | dflag, what)?;
    let rec = spec.record_size;
    let b = buf.as_mut_slice();
    let t0 = Instant::now();
    let cost = LoopCost::start();
    for i in 0..n {
        stamp(b, i * rec);
        // `move`: the error path gets `i` by value, so that the loop
        // keeps it in a register instead of storing it for a reference.
        write_full(fd.0, b).map_err(move |e| {
            io_err(&format!("write: record at offset {} of", i * rec), path, e)
        })?;
    }
    cost.end("fs.matrix write", n);
    let elapsed = finish_fd(spec, fd, t0, what)?;
    Ok(if timed { elapsed } else { 0.0 })
}

// Never inlined: bench/cost attributes instructions to the pass.
#[inline(never)]
fn rewrite_pass(
    spec: &CellSpec,
    buf: &mut AlignedBuf,
    n: u64,
    dflag: libc::c_int,
) -> Result<f64, WorkloadError> {
    let path = spec.path.as_path();
    let fd = open(spec, libc::O_RDWR | dflag, "rewrite")?;
    let rec = spec.record_size;
    let b = buf.as_mut_slice();
    let t0 = Instant::now();
    let cost = LoopCost::start();
    for i in 0..n {
        stamp(b, i * rec);
        write_full(fd.0, b).map_err(move |e| {
            io_err(
                &format!("rewrite: record at offset {} of", i * rec),
                path,
                e,
            )
        })?;
    }
    cost.end("fs.matrix rewrite", n);
    finish_fd(spec, fd, t0, "rewrite")
}

/// Records a read loop found at the wrong offset: a counter and the first
/// offset, two integer updates per record and only on a mismatch, so the
/// check costs the measured loop next to nothing.
#[derive(Default)]
struct Misreads {
    bad: u64,
    first: u64,
}

impl Misreads {
    /// Notes a record whose stamp is `got` where `want` was expected.
    ///
    /// The mismatch is handled out of line: inline, the compiler turned
    /// the two updates into three conditional moves with their loads,
    /// tests and a store (10 instructions) run for every record; now a
    /// record that matches costs a comparison and a branch never taken.
    /// Backward read's loop went from 32 to 25 instructions per record
    /// besides its two library calls (disassembly), and `bench/per-op`'s
    /// fs figure (callgrind, per record over the ten passes) from 43.9 to
    /// 38.0 (the limit, which checks nothing: 32.9).
    #[inline(always)]
    fn check(&mut self, got: u64, want: u64) {
        if got != want {
            self.note(want);
        }
    }

    #[cold]
    #[inline(never)]
    fn note(&mut self, want: u64) {
        if self.bad == 0 {
            self.first = want;
        }
        self.bad += 1;
    }

    /// Fails when any record came from the wrong offset.
    fn result(&self, spec: &CellSpec, what: &str) -> Result<(), WorkloadError> {
        if self.bad == 0 {
            return Ok(());
        }
        Err(WorkloadError::Other(format!(
            "{what}: {} record(s) of {} came back with the wrong contents (first at offset {})",
            self.bad,
            spec.path.display(),
            self.first
        )))
    }
}

// Never inlined: bench/cost attributes instructions to the pass.
#[inline(never)]
fn read_pass(
    spec: &CellSpec,
    buf: &mut AlignedBuf,
    n: u64,
    dflag: libc::c_int,
    pattern: Pattern,
) -> Result<(f64, u64), WorkloadError> {
    let path = spec.path.as_path();
    let fd = open(spec, libc::O_RDONLY | dflag, "read")?;
    let rec = spec.record_size;
    let b = buf.as_mut_slice();
    // IOzone's untimed priming: one read, then back to 0.
    read_full(fd.0, b).map_err(|e| io_err("read: read", path, e))?;
    seek(fd.0, 0, libc::SEEK_SET).map_err(|e| io_err("read: lseek", path, e))?;
    let mut misreads = Misreads::default();
    let t0 = Instant::now();
    let cost = LoopCost::start();
    for i in 0..n {
        read_full(fd.0, b).map_err(|e| io_err("read: read", path, e))?;
        misreads.check(head(b), i * rec);
    }
    cost.end(pattern.cost_label(), n);
    let elapsed = finish_fd(spec, fd, t0, "read")?;
    misreads.result(spec, "read")?;
    Ok((elapsed, n))
}

// One function per pattern, never inlined: bench/cost attributes
// instructions to the pass.
#[inline(never)]
fn random_read_pass(
    spec: &CellSpec,
    buf: &mut AlignedBuf,
    perm: &[u64],
    dflag: libc::c_int,
) -> Result<(f64, u64), WorkloadError> {
    random_pass(spec, buf, perm, dflag, false)
}

#[inline(never)]
fn random_write_pass(
    spec: &CellSpec,
    buf: &mut AlignedBuf,
    perm: &[u64],
    dflag: libc::c_int,
) -> Result<(f64, u64), WorkloadError> {
    random_pass(spec, buf, perm, dflag, true)
}

#[inline(always)]
fn random_pass(
    spec: &CellSpec,
    buf: &mut AlignedBuf,
    perm: &[u64],
    dflag: libc::c_int,
    write: bool,
) -> Result<(f64, u64), WorkloadError> {
    let path = spec.path.as_path();
    let what = if write { "random write" } else { "random read" };
    // IOzone opens both with O_RDWR|O_CREAT.
    let fd = open(spec, libc::O_RDWR | libc::O_CREAT | dflag, what)?;
    let rec = spec.record_size;
    let b = buf.as_mut_slice();
    let mut misreads = Misreads::default();
    let t0 = Instant::now();
    let cost = LoopCost::start();
    if write {
        for &r in perm {
            let off = r * rec;
            seek(fd.0, off as i64, libc::SEEK_SET)
                .map_err(|e| io_err("random write: lseek", path, e))?;
            stamp(b, off);
            write_full(fd.0, b).map_err(move |e| {
                io_err(&format!("random write: record at offset {off} of"), path, e)
            })?;
        }
    } else {
        for &r in perm {
            let off = r * rec;
            seek(fd.0, off as i64, libc::SEEK_SET)
                .map_err(|e| io_err("random read: lseek", path, e))?;
            read_full(fd.0, b).map_err(|e| io_err("random read: read", path, e))?;
            misreads.check(head(b), off);
        }
    }
    let p = if write {
        Pattern::RandomWrite
    } else {
        Pattern::RandomRead
    };
    cost.end(p.cost_label(), perm.len() as u64);
    let elapsed = finish_fd(spec, fd, t0, what)?;
    misreads.result(spec, what)?;
    Ok((elapsed, if write { 0 } else { perm.len() as u64 }))
}

/// Backward read: `lseek(−reclen, SEEK_END)`, then read and step back two
/// records, so records n−1 … 0. The step after the last read (record 0)
/// would seek before the file start and is not made.
// Never inlined: bench/cost attributes instructions to the pass.
#[inline(never)]
fn bkwd_pass(
    spec: &CellSpec,
    buf: &mut AlignedBuf,
    n: u64,
    dflag: libc::c_int,
) -> Result<(f64, u64), WorkloadError> {
    let path = spec.path.as_path();
    let fd = open(spec, libc::O_RDONLY | dflag, "backward read")?;
    let rec = spec.record_size;
    let b = buf.as_mut_slice();
    let mut misreads = Misreads::default();
    let back = -2 * rec as i64;
    let t0 = Instant::now();
    seek(fd.0, -(rec as i64), libc::SEEK_END)
        .map_err(|e| io_err("backward read: lseek", path, e))?;
    let cost = LoopCost::start();
    for i in 0..n {
        read_full(fd.0, b).map_err(|e| io_err("backward read: read", path, e))?;
        let want = (n - 1 - i) * rec;
        misreads.check(head(b), want);
        if i + 1 < n {
            seek(fd.0, back, libc::SEEK_CUR)
                .map_err(|e| io_err("backward read: lseek", path, e))?;
        }
    }
    cost.end("fs.matrix bkwd-read", n);
    let elapsed = finish_fd(spec, fd, t0, "backward read")?;
    misreads.result(spec, "backward read")?;
    Ok((elapsed, n))
}

/// Record rewrite: the first record, written over and over.
// Never inlined: bench/cost attributes instructions to the pass.
#[inline(never)]
fn record_rewrite_pass(
    spec: &CellSpec,
    buf: &mut AlignedBuf,
    n: u64,
    dflag: libc::c_int,
) -> Result<f64, WorkloadError> {
    let path = spec.path.as_path();
    let fd = open(spec, libc::O_RDWR | libc::O_CREAT | dflag, "record rewrite")?;
    let b = buf.as_mut_slice();
    stamp(b, 0);
    let t0 = Instant::now();
    let cost = LoopCost::start();
    for _ in 0..n {
        write_full(fd.0, b).map_err(|e| io_err("record rewrite: write", path, e))?;
        seek(fd.0, 0, libc::SEEK_SET).map_err(|e| io_err("record rewrite: lseek", path, e))?;
    }
    cost.end("fs.matrix record-rewrite", n);
    finish_fd(spec, fd, t0, "record rewrite")
}

// Never inlined: bench/cost attributes instructions to the pass.
#[inline(never)]
fn stride_pass(
    spec: &CellSpec,
    buf: &mut AlignedBuf,
    n: u64,
    dflag: libc::c_int,
) -> Result<(f64, u64), WorkloadError> {
    let path = spec.path.as_path();
    let fd = open(spec, libc::O_RDONLY | dflag, "stride read")?;
    let rec = spec.record_size;
    let stride = spec.stride;
    let b = buf.as_mut_slice();
    let mut misreads = Misreads::default();
    let (mut pos, mut wrap) = (0u64, 0u64);
    let t0 = Instant::now();
    let cost = LoopCost::start();
    for _ in 0..n {
        read_full(fd.0, b).map_err(|e| io_err("stride read: read", path, e))?;
        misreads.check(head(b), pos * rec);
        pos = stride_next(pos, &mut wrap, n, stride);
        seek(fd.0, (pos * rec) as i64, libc::SEEK_SET)
            .map_err(|e| io_err("stride read: lseek", path, e))?;
    }
    cost.end("fs.matrix stride-read", n);
    let elapsed = finish_fd(spec, fd, t0, "stride read")?;
    misreads.result(spec, "stride read")?;
    Ok((elapsed, n))
}

/// Ends a stdio window per `-e` (fflush + fsync for writers, fflush for
/// readers) and `-c` (fclose).
fn finish_stream(
    spec: &CellSpec,
    s: Stream,
    t0: Instant,
    what: &str,
    writer: bool,
) -> Result<f64, WorkloadError> {
    let path = spec.path.as_path();
    if spec.include_fsync {
        s.fflush()
            .map_err(|e| io_err(&format!("{what}: fflush"), path, e))?;
        if writer {
            s.fsync()
                .map_err(|e| io_err(&format!("{what}: fsync"), path, e))?;
        }
    }
    if spec.include_close {
        s.close()
            .map_err(|e| io_err(&format!("{what}: fclose"), path, e))?;
        return Ok(t0.elapsed().as_secs_f64());
    }
    let elapsed = t0.elapsed().as_secs_f64();
    s.close()
        .map_err(|e| io_err(&format!("{what}: fclose"), path, e))?;
    Ok(elapsed)
}

/// fwrite / frewrite: `fopen("r+")` (overwrite in place), a record-sized
/// stdio buffer, `fwrite(buf, reclen, 1)` per record. Never `O_DIRECT`.
fn fwrite_pass(spec: &CellSpec, buf: &mut AlignedBuf, n: u64) -> Result<f64, WorkloadError> {
    let path = spec.path.as_path();
    let reclen = spec.record_size as usize;
    let s = Stream::open(path, "r+", reclen).map_err(|e| io_err("fwrite: fopen", path, e))?;
    s.fsync().map_err(|e| io_err("fwrite: fsync", path, e))?;
    let b = buf.as_mut_slice();
    let t0 = Instant::now();
    for i in 0..n {
        stamp(b, i * spec.record_size);
        // SAFETY: b is valid for reclen bytes; s is open.
        let k = unsafe { libc::fwrite(b.as_ptr() as *const libc::c_void, reclen, 1, s.f) };
        if k != 1 {
            let e = last_err();
            let e = if e.raw_os_error().unwrap_or(0) == 0 {
                std::io::Error::from_raw_os_error(libc::EIO)
            } else {
                e
            };
            return Err(io_err("fwrite: fwrite", path, e));
        }
    }
    finish_stream(spec, s, t0, "fwrite", true)
}

/// fread / freread: `fopen("r")`, a record-sized stdio buffer,
/// `fread(buf, reclen, 1)` per record.
fn fread_pass(spec: &CellSpec, buf: &mut AlignedBuf, n: u64) -> Result<(f64, u64), WorkloadError> {
    let path = spec.path.as_path();
    let reclen = spec.record_size as usize;
    let s = Stream::open(path, "r", reclen).map_err(|e| io_err("fread: fopen", path, e))?;
    let b = buf.as_mut_slice();
    let mut misreads = Misreads::default();
    let t0 = Instant::now();
    for i in 0..n {
        // SAFETY: b is valid for reclen bytes; s is open.
        let k = unsafe { libc::fread(b.as_mut_ptr() as *mut libc::c_void, reclen, 1, s.f) };
        if k != 1 {
            return Err(io_err(
                "fread: fread",
                path,
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "short read"),
            ));
        }
        misreads.check(head(b), i * spec.record_size);
    }
    let elapsed = finish_stream(spec, s, t0, "fread", false)?;
    misreads.result(spec, "fread")?;
    Ok((elapsed, n))
}

/// Reads the whole file back (buffered, untimed) and compares every byte
/// of every record with what the writers put there.
fn verify_file(spec: &CellSpec, n: u64) -> Result<u64, WorkloadError> {
    let path = spec.path.as_path();
    let fd = Fd::open(path, libc::O_RDONLY).map_err(|e| io_err("verify: open", path, e))?;
    let mut buf = AlignedBuf::new(spec.record_size as usize);
    let mut bad = 0u64;
    let mut first_bad = 0u64;
    for i in 0..n {
        read_full(fd.0, buf.as_mut_slice()).map_err(|e| io_err("verify: read", path, e))?;
        let off = i * spec.record_size;
        if !record_ok(buf.as_slice(), off) {
            bad += 1;
            first_bad = if bad == 1 { off } else { first_bad };
        }
    }
    if bad > 0 {
        return Err(WorkloadError::Other(format!(
            "verification: {bad} of {n} records of {} differ from what was written (first at offset {first_bad})",
            path.display()
        )));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &Path, patterns: Vec<Pattern>) -> CellSpec {
        CellSpec {
            path: dir.join("cell.tmp"),
            file_size: 1 << 20,
            record_size: 16 << 10,
            stride: 17,
            patterns,
            direct: false,
            include_fsync: true,
            include_close: true,
            verify: true,
            keep_file: false,
        }
    }

    #[test]
    fn all_patterns_run_and_verify() {
        let d = tempfile::tempdir().unwrap();
        let s = spec(d.path(), Pattern::ALL.to_vec());
        let r = run_cell(&s, &AtomicBool::new(false)).unwrap();
        assert_eq!(r.patterns.len(), 13);
        for p in &r.patterns {
            assert_eq!(p.bytes, 1 << 20, "{:?}: bytes moved = file size", p.pattern);
            assert!(p.kib_s > 0.0 && p.elapsed_s > 0.0);
        }
        // Read patterns checked every record they read: read, reread,
        // random, bkwd, stride, fread, freread = 7 × 64.
        assert_eq!(r.checked_reads, 7 * 64);
        assert_eq!(r.verified_records, 64);
        assert!(!s.path.exists(), "the file is removed after the cell");
    }

    #[test]
    fn a_subset_creates_the_file_untimed() {
        let d = tempfile::tempdir().unwrap();
        let s = spec(d.path(), vec![Pattern::RandomRead]);
        let r = run_cell(&s, &AtomicBool::new(false)).unwrap();
        assert_eq!(r.patterns.len(), 1);
        assert_eq!(r.checked_reads, 64);
    }

    #[test]
    fn corrupted_data_is_caught() {
        assert!(record_ok(
            &{
                let mut b = vec![0u8; 4096];
                fill_body(&mut b);
                stamp(&mut b, 8192);
                b
            },
            8192
        ));
        let mut b = vec![0u8; 4096];
        fill_body(&mut b);
        stamp(&mut b, 8192);
        assert!(!record_ok(&b, 4096), "misplaced record");
        b[100] ^= 1;
        assert!(!record_ok(&b, 8192), "flipped body byte");
    }

    #[test]
    fn rate_is_iozones_integer_kib() {
        assert_eq!(rate(1 << 20, 1.0), 1024.0);
        assert_eq!(rate(1_000_000, 1.0), 976.0);
    }
}

#[cfg(test)]
mod real_file_tests {
    //! Each pattern's offsets checked on a real file: the file starts as
    //! a hole (zeros), so a record carries a stamp only if it was written.
    use super::*;

    fn sparse(dir: &Path, n: u64, rec: u64) -> CellSpec {
        let path = dir.join("f.tmp");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(n * rec)
            .unwrap();
        CellSpec {
            path,
            file_size: n * rec,
            record_size: rec,
            stride: 17,
            patterns: vec![],
            direct: false,
            include_fsync: false,
            include_close: false,
            verify: false,
            keep_file: false,
        }
    }

    fn stamped(spec: &CellSpec, n: u64) -> Vec<bool> {
        let data = std::fs::read(&spec.path).unwrap();
        assert_eq!(data.len() as u64, spec.file_size, "the file keeps its size");
        (0..n)
            .map(|i| {
                let r =
                    &data[(i * spec.record_size) as usize..((i + 1) * spec.record_size) as usize];
                record_ok(r, i * spec.record_size)
            })
            .collect()
    }

    #[test]
    fn random_write_covers_every_record_once() {
        let d = tempfile::tempdir().unwrap();
        let (n, rec) = (100, 4096);
        let s = sparse(d.path(), n, rec);
        let mut buf = AlignedBuf::new(rec as usize);
        fill_body(buf.as_mut_slice());
        let perm = permutation(n);
        random_pass(&s, &mut buf, &perm, 0, true).unwrap();
        assert!(
            stamped(&s, n).iter().all(|&ok| ok),
            "every record written at its own offset"
        );
        // The same permutation read back: every record once, each stamp
        // matching the offset the loop asked for.
        let (_, checked) = random_pass(&s, &mut buf, &perm, 0, false).unwrap();
        assert_eq!(checked, n);
    }

    #[test]
    fn record_rewrite_touches_only_the_first_record() {
        let d = tempfile::tempdir().unwrap();
        let (n, rec) = (20, 8192);
        let s = sparse(d.path(), n, rec);
        let mut buf = AlignedBuf::new(rec as usize);
        fill_body(buf.as_mut_slice());
        record_rewrite_pass(&s, &mut buf, n, 0).unwrap();
        let st = stamped(&s, n);
        assert!(st[0]);
        assert!(st[1..].iter().all(|&ok| !ok), "{st:?}");
    }

    #[test]
    fn reads_follow_their_sequences_on_a_real_file() {
        let d = tempfile::tempdir().unwrap();
        let (n, rec) = (64, 4096);
        let s = sparse(d.path(), n, rec);
        let mut buf = AlignedBuf::new(rec as usize);
        fill_body(buf.as_mut_slice());
        rewrite_pass(&s, &mut buf, n, 0).unwrap();
        assert!(stamped(&s, n).iter().all(|&ok| ok));
        // Each loop compares every record's stamp with the offset its
        // sequence (bkwd: n−1 … 0; stride: 0, 17, 34, 51, 1, …) expects,
        // and fails on the first disagreement.
        assert_eq!(bkwd_pass(&s, &mut buf, n, 0).unwrap().1, n);
        assert_eq!(stride_pass(&s, &mut buf, n, 0).unwrap().1, n);
        assert_eq!(read_pass(&s, &mut buf, n, 0, Pattern::Read).unwrap().1, n);
        assert_eq!(fread_pass(&s, &mut buf, n).unwrap().1, n);
        // A wrong record is noticed: swap two records on disk.
        let mut data = std::fs::read(&s.path).unwrap();
        let r = rec as usize;
        let (a, b) = data.split_at_mut(r);
        a.swap_with_slice(&mut b[..r]);
        std::fs::write(&s.path, &data).unwrap();
        let e = stride_pass(&s, &mut buf, n, 0).unwrap_err().to_string();
        assert!(e.contains("wrong contents"), "{e}");
        // Every loop counts both and names the first it met.
        assert!(
            e.contains("2 record(s)") && e.contains("first at offset 0)"),
            "{e}"
        );
        let e = bkwd_pass(&s, &mut buf, n, 0).unwrap_err().to_string();
        assert!(
            e.contains("2 record(s)") && e.contains("first at offset 4096)"),
            "{e}"
        );
        let e = read_pass(&s, &mut buf, n, 0, Pattern::Read)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("2 record(s)") && e.contains("first at offset 0)"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod cache_tests {
    //! Direct I/O leaves the page cache alone; buffered I/O fills it.
    //! Residency is read with mincore(2) on the kept file, so other load
    //! on the machine does not disturb the check.
    use super::*;

    /// Pages of `path` in the page cache, and the file's pages.
    fn resident(path: &Path) -> (usize, usize) {
        let f = std::fs::File::open(path).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        use std::os::fd::AsRawFd;
        // SAFETY: a read-only shared mapping of an open file, unmapped below.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        let pages = len.div_ceil(4096);
        let mut vec = vec![0u8; pages];
        // SAFETY: addr maps len bytes; vec has one byte per page.
        let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
        // SAFETY: mapped above.
        unsafe { libc::munmap(addr, len) };
        assert_eq!(rc, 0);
        (vec.iter().filter(|&&b| b & 1 == 1).count(), pages)
    }

    fn cell(dir: &Path, direct: bool) -> CellSpec {
        CellSpec {
            path: dir.join(if direct { "direct.tmp" } else { "cached.tmp" }),
            file_size: 32 << 20,
            record_size: 64 << 10,
            stride: 17,
            // The nine read()/write() patterns: the stdio ones are
            // buffered even in direct mode, as in IOzone -I.
            patterns: Pattern::ALL.into_iter().filter(|p| !p.stdio()).collect(),
            direct,
            include_fsync: false,
            include_close: false,
            verify: false,
            keep_file: true,
        }
    }

    #[test]
    fn direct_io_does_not_fill_the_page_cache() {
        // /var/tmp: a disk file system (tmpfs may not take O_DIRECT).
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let s = cell(d.path(), true);
        match run_cell(&s, &AtomicBool::new(false)) {
            Err(WorkloadError::Unsupported(why)) => {
                return benchlab_testkit::unsupported(why);
            }
            r => {
                r.unwrap();
            }
        }
        let (cached, pages) = resident(&s.path);
        assert!(
            cached * 20 < pages,
            "direct: {cached} of {pages} pages cached"
        );
        let b = cell(d.path(), false);
        run_cell(&b, &AtomicBool::new(false)).unwrap();
        let (cached, pages) = resident(&b.path);
        assert!(
            cached * 2 > pages,
            "buffered: only {cached} of {pages} pages cached"
        );
    }
}
