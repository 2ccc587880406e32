//! The SMB back end: Samba's own client library, libsmbclient, loaded at
//! run time.
//!
//! # Why libsmbclient, and why loaded with `dlopen`
//!
//! Measured here against smbd 4.17 on 127.0.0.1 (64 MiB file, 64 KiB
//! I/Os; `../shared/reference/server-tools.md` §7.7): libsmbclient (through
//! the `pavao` crate, release) wrote 318 MB/s and read 447 MB/s; the
//! pure-Rust `smb` 0.12 crate wrote 181 MB/s and read at 1.5 MB/s, each
//! 64 KiB read stalling ≈44 ms (a Nagle/delayed-ACK pattern), and took
//! 148 s to build. libsmbclient is also the stack that speaks every
//! dialect the seed compares — SMB1 (NT1, seed 004's Windows 95 clients)
//! as well as SMB2 and SMB3 — and it is Samba's own, so a difference
//! between configurations is the server's, not a young client's.
//!
//! benchlab calls it through a thin FFI of its own rather than `pavao`:
//! it needs what `pavao` does not expose — the dialect
//! (`smbc_setOptionProtocols`), one context per client (one TCP
//! connection each, as NetBench's clients had), and the directory,
//! rename, stat and statvfs calls of the mix. The library is `dlopen`ed
//! on first use, so the benchlab binary starts and runs every other
//! workload on hosts without it, and a missing library is a clear error
//! naming the Debian package (`libsmbclient`).
//!
//! libsmbclient has no byte-range lock and no flush call (checked in
//! Debian 12's `libsmbclient.h`, Samba 4.17.12: no lock, flush or fsync
//! entry point; its only locking words are `smbc_thread_impl`'s mutex
//! hooks): `LockX`, `UnlockX` and `Flush` lines are counted as
//! *unsupported* (per type) over SMB, never as done.
//!
//! # Where the client's instructions go
//!
//! `bench/fileserver-callgrind` (one SMB1 client, 19 s, the trace's first
//! 4850 lines looped; callgrind, so independent of the machine's load):
//! benchlab's replay loop took 12.2–12.7 M instructions per MB against
//! nbench's 6.5–6.8 M (× 1.81–1.93 over three runs).
//! benchlab's own code — the loop, its two clock reads, the histogram,
//! the auth callback — is at most 0.35 % of it (≈ 415 instructions per
//! operation of ≈ 119 000); the rest is libsmbclient and the Samba
//! libraries below it. Over half of the loop is one libsmbclient routine:
//! every path-based call (open, stat, opendir, unlink, rename, utimes,
//! statvfs; ≈ 2 300 per pass of those lines) parses its URL and looks its
//! server up, and *both* steps call `smbc_set_credentials_with_fallback`,
//! which reloads the credentials from the loaded configuration by a
//! linear, case-insensitive search of Samba's parameter table
//! (`lpcfg_map_parameter`/`strwicmp`): ≈ 65 000 instructions a time,
//! ≈ 130 000 per path call, 6.6 M per MB (54 % of the loop). nbench's raw
//! SMB1 client sends the same requests with none of that (its `NTCreateX`
//! ≈ 24 000 instructions, libsmbclient's open ≈ 178 000). No option of the library
//! turns it off, and benchlab already makes at most one path-based call
//! per trace operation (a directory create aside: `mkdir`, then the
//! `stat` that opens it), with its URLs built before the gate, so the gap
//! is the client stack's, not benchlab's: closing it takes another SMB
//! client (Samba's raw client library is private to Samba) — benchlab's
//! own SMB1 client, [`crate::smb1`] (`smb_client = "native"`), which also
//! performs the locks and flushes.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use crate::backend::{errno, Backend, Outcome};

/// libsmbclient's context (opaque).
#[repr(C)]
pub struct SmbcCtx {
    _private: [u8; 0],
}

/// libsmbclient's open file or directory (opaque).
#[repr(C)]
pub struct SmbcFile {
    _private: [u8; 0],
}

/// `struct smbc_dirent`.
#[repr(C)]
struct Dirent {
    smbc_type: u32,
    dirlen: u32,
    commentlen: u32,
    comment: *mut c_char,
    namelen: u32,
    name: [c_char; 1],
}

type Ctx = *mut SmbcCtx;
type AuthFn = extern "C" fn(
    Ctx,
    *const c_char,
    *const c_char,
    *mut c_char,
    c_int,
    *mut c_char,
    c_int,
    *mut c_char,
    c_int,
);

/// The per-context operations (`smbc_getFunction…`).
#[derive(Clone, Copy)]
struct Ops {
    open: unsafe extern "C" fn(Ctx, *const c_char, c_int, libc::mode_t) -> *mut SmbcFile,
    read: unsafe extern "C" fn(Ctx, *mut SmbcFile, *mut c_void, usize) -> isize,
    write: unsafe extern "C" fn(Ctx, *mut SmbcFile, *const c_void, usize) -> isize,
    lseek: unsafe extern "C" fn(Ctx, *mut SmbcFile, libc::off_t, c_int) -> libc::off_t,
    close: unsafe extern "C" fn(Ctx, *mut SmbcFile) -> c_int,
    stat: unsafe extern "C" fn(Ctx, *const c_char, *mut libc::stat) -> c_int,
    fstat: unsafe extern "C" fn(Ctx, *mut SmbcFile, *mut libc::stat) -> c_int,
    statvfs: unsafe extern "C" fn(Ctx, *mut c_char, *mut libc::statvfs) -> c_int,
    unlink: unsafe extern "C" fn(Ctx, *const c_char) -> c_int,
    rename: unsafe extern "C" fn(Ctx, *const c_char, Ctx, *const c_char) -> c_int,
    mkdir: unsafe extern "C" fn(Ctx, *const c_char, libc::mode_t) -> c_int,
    rmdir: unsafe extern "C" fn(Ctx, *const c_char) -> c_int,
    opendir: unsafe extern "C" fn(Ctx, *const c_char) -> *mut SmbcFile,
    readdir: unsafe extern "C" fn(Ctx, *mut SmbcFile) -> *mut Dirent,
    closedir: unsafe extern "C" fn(Ctx, *mut SmbcFile) -> c_int,
    utimes: unsafe extern "C" fn(Ctx, *const c_char, *mut libc::timeval) -> c_int,
}

/// The library's entry points.
struct Lib {
    new_context: unsafe extern "C" fn() -> Ctx,
    init_context: unsafe extern "C" fn(Ctx) -> Ctx,
    free_context: unsafe extern "C" fn(Ctx, c_int) -> c_int,
    set_protocols: unsafe extern "C" fn(Ctx, *const c_char, *const c_char) -> c_int,
    set_auth: unsafe extern "C" fn(Ctx, AuthFn),
    set_user_data: unsafe extern "C" fn(Ctx, *mut c_void),
    get_user_data: unsafe extern "C" fn(Ctx) -> *mut c_void,
    set_no_anonymous: unsafe extern "C" fn(Ctx, c_int),
    set_debug: unsafe extern "C" fn(Ctx, c_int),
    getters: [*mut c_void; 16],
}

// SAFETY: the entry points are plain function addresses.
unsafe impl Send for Lib {}
// SAFETY: as above; they are only read.
unsafe impl Sync for Lib {}

const LIBRARY: &str = "libsmbclient.so.0";

/// A symbol's address as the function pointer type `F`.
///
/// # Safety
/// `F` must be a function pointer type matching the symbol's C signature.
unsafe fn fn_ptr<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: same size; the caller vouches for the signature.
    unsafe { std::mem::transmute_copy(&p) }
}

fn sym(handle: *mut c_void, name: &str) -> Result<*mut c_void, String> {
    let c = CString::new(name).expect("no NUL in symbol names");
    // SAFETY: a handle from dlopen and a valid name.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    if p.is_null() {
        Err(format!(
            "{LIBRARY} has no {name} (libsmbclient 4.x is needed)"
        ))
    } else {
        Ok(p)
    }
}

const GETTERS: [&str; 16] = [
    "smbc_getFunctionOpen",
    "smbc_getFunctionRead",
    "smbc_getFunctionWrite",
    "smbc_getFunctionLseek",
    "smbc_getFunctionClose",
    "smbc_getFunctionStat",
    "smbc_getFunctionFstat",
    "smbc_getFunctionStatVFS",
    "smbc_getFunctionUnlink",
    "smbc_getFunctionRename",
    "smbc_getFunctionMkdir",
    "smbc_getFunctionRmdir",
    "smbc_getFunctionOpendir",
    "smbc_getFunctionReaddir",
    "smbc_getFunctionClosedir",
    "smbc_getFunctionUtimes",
];

fn load() -> Result<Lib, String> {
    let name = CString::new(LIBRARY).expect("no NUL");
    // SAFETY: dlopen of a system library by name.
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return Err(format!(
            "cannot load {LIBRARY}: install the Debian package `libsmbclient` (apt-get install libsmbclient)"
        ));
    }
    // SAFETY (every transmute below): each symbol has the C signature
    // that libsmbclient.h declares for it.
    unsafe {
        let mut getters = [std::ptr::null_mut(); 16];
        for (g, name) in getters.iter_mut().zip(GETTERS) {
            *g = sym(h, name)?;
        }
        Ok(Lib {
            new_context: fn_ptr(sym(h, "smbc_new_context")?),
            init_context: fn_ptr(sym(h, "smbc_init_context")?),
            free_context: fn_ptr(sym(h, "smbc_free_context")?),
            set_protocols: fn_ptr(sym(h, "smbc_setOptionProtocols")?),
            set_auth: fn_ptr(sym(h, "smbc_setFunctionAuthDataWithContext")?),
            set_user_data: fn_ptr(sym(h, "smbc_setOptionUserData")?),
            get_user_data: fn_ptr(sym(h, "smbc_getOptionUserData")?),
            set_no_anonymous: fn_ptr(sym(h, "smbc_setOptionNoAutoAnonymousLogin")?),
            set_debug: fn_ptr(sym(h, "smbc_setDebug")?),
            getters,
        })
    }
}

fn lib() -> Result<&'static Lib, String> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// The SMB dialects a study may choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SMB1 (`NT1`), the dialect of seed 004's Windows 95 and NT 4 clients.
    Smb1,
    /// SMB 2.002 – 2.1.
    Smb2,
    /// SMB 3.0 – 3.1.1.
    Smb3,
    /// Whatever client and server negotiate (SMB1 … 3.1.1).
    Any,
}

impl Dialect {
    /// The study-file words.
    pub const NAMES: &'static [&'static str] = &["smb1", "smb2", "smb3", "any"];

    /// From a study-file word.
    pub fn parse(s: &str) -> Option<Dialect> {
        Some(match s {
            "smb1" => Dialect::Smb1,
            "smb2" => Dialect::Smb2,
            "smb3" => Dialect::Smb3,
            "any" => Dialect::Any,
            _ => return None,
        })
    }

    /// libsmbclient's `client min protocol` and `client max protocol`.
    fn range(self) -> (&'static CStr, &'static CStr) {
        match self {
            Dialect::Smb1 => (c"NT1", c"NT1"),
            Dialect::Smb2 => (c"SMB2_02", c"SMB2_10"),
            Dialect::Smb3 => (c"SMB3_00", c"SMB3_11"),
            Dialect::Any => (c"NT1", c"SMB3_11"),
        }
    }
}

/// Which SMB client a `fileserver.load` client speaks through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmbClient {
    /// Samba's libsmbclient (every dialect; no locks, no flush).
    Libsmbclient,
    /// benchlab's own SMB1 client ([`crate::smb1`]; `smb1` only, every
    /// operation of the mix).
    Native,
}

impl SmbClient {
    /// The study-file words.
    pub const NAMES: &'static [&'static str] = &["libsmbclient", "native"];

    /// From a study-file word.
    pub fn parse(s: &str) -> Option<SmbClient> {
        Some(match s {
            "libsmbclient" => SmbClient::Libsmbclient,
            "native" => SmbClient::Native,
            _ => return None,
        })
    }
}

/// Who connects.
pub struct Credentials {
    user: CString,
    password: CString,
    workgroup: CString,
}

impl Credentials {
    /// The test user and its password.
    pub fn new(user: &str, password: &str) -> Result<Credentials, String> {
        let c = |what: &str, s: &str| {
            CString::new(s).map_err(|_| format!("the SMB {what} holds a NUL byte"))
        };
        Ok(Credentials {
            user: c("user", user)?,
            password: c("password", password)?,
            workgroup: c"WORKGROUP".to_owned(),
        })
    }
}

fn copy_into(dst: *mut c_char, len: c_int, src: &CStr) {
    let bytes = src.to_bytes_with_nul();
    if len <= 0 || bytes.len() > len as usize {
        return;
    }
    // SAFETY: dst holds `len` bytes (libsmbclient's buffer), src fits.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), dst, bytes.len()) };
}

extern "C" fn auth(
    ctx: Ctx,
    _srv: *const c_char,
    _shr: *const c_char,
    wg: *mut c_char,
    wglen: c_int,
    un: *mut c_char,
    unlen: c_int,
    pw: *mut c_char,
    pwlen: c_int,
) {
    let Ok(lib) = lib() else { return };
    // SAFETY: the user data is the Credentials the context was made
    // with, alive as long as the context.
    let creds = unsafe { ((lib.get_user_data)(ctx) as *const Credentials).as_ref() };
    if let Some(c) = creds {
        copy_into(wg, wglen, &c.workgroup);
        copy_into(un, unlen, &c.user);
        copy_into(pw, pwlen, &c.password);
    }
}

/// One SMB client: a libsmbclient context (its own connection to the
/// server) and the share's URL prefix.
pub struct Smb {
    ctx: Ctx,
    ops: Ops,
    /// The statvfs target (the share's URL), writable as the API wants.
    root: Vec<u8>,
    _creds: Box<Credentials>,
}

// SAFETY: a context is used by one thread at a time (the client that owns
// it); libsmbclient is initialised for threads (smbc_thread_posix).
unsafe impl Send for Smb {}

impl Smb {
    /// A client of `smb://server/share` speaking `dialect`. Nothing is
    /// sent until the first operation.
    pub fn new(share_url: &str, dialect: Dialect, creds: Credentials) -> Result<Smb, String> {
        let lib = lib()?;
        let creds = Box::new(creds);
        // SAFETY: the documented set-up sequence of a libsmbclient context.
        unsafe {
            let ctx = (lib.new_context)();
            if ctx.is_null() {
                return Err(format!("smbc_new_context failed: errno {}", errno()));
            }
            (lib.set_debug)(ctx, 0);
            let (min, max) = dialect.range();
            (lib.set_protocols)(ctx, min.as_ptr(), max.as_ptr());
            (lib.set_no_anonymous)(ctx, 1);
            (lib.set_user_data)(ctx, &*creds as *const Credentials as *mut c_void);
            (lib.set_auth)(ctx, auth);
            if (lib.init_context)(ctx).is_null() {
                let e = errno();
                (lib.free_context)(ctx, 1);
                return Err(format!("smbc_init_context failed: errno {e}"));
            }
            let g = |i: usize| {
                let getter: unsafe extern "C" fn(Ctx) -> *mut c_void = fn_ptr(lib.getters[i]);
                getter(ctx)
            };
            let ops = Ops {
                open: fn_ptr(g(0)),
                read: fn_ptr(g(1)),
                write: fn_ptr(g(2)),
                lseek: fn_ptr(g(3)),
                close: fn_ptr(g(4)),
                stat: fn_ptr(g(5)),
                fstat: fn_ptr(g(6)),
                statvfs: fn_ptr(g(7)),
                unlink: fn_ptr(g(8)),
                rename: fn_ptr(g(9)),
                mkdir: fn_ptr(g(10)),
                rmdir: fn_ptr(g(11)),
                opendir: fn_ptr(g(12)),
                readdir: fn_ptr(g(13)),
                closedir: fn_ptr(g(14)),
                utimes: fn_ptr(g(15)),
            };
            let mut root = share_url.as_bytes().to_vec();
            root.push(0);
            Ok(Smb {
                ctx,
                ops,
                root,
                _creds: creds,
            })
        }
    }

    /// Lists a directory's names (for `Deltree`).
    fn names(&mut self, dir: &CStr) -> Result<Vec<(Vec<u8>, bool)>, i32> {
        // SAFETY: our context and a valid URL.
        let d = unsafe { (self.ops.opendir)(self.ctx, dir.as_ptr()) };
        if d.is_null() {
            return Err(errno());
        }
        let mut out = Vec::new();
        loop {
            // SAFETY: d is open.
            let e = unsafe { (self.ops.readdir)(self.ctx, d) };
            if e.is_null() {
                break;
            }
            // SAFETY: a dirent of libsmbclient's, its name NUL-terminated.
            let (name, kind) = unsafe {
                (
                    CStr::from_ptr((*e).name.as_ptr()).to_bytes().to_vec(),
                    (*e).smbc_type,
                )
            };
            if name != b"." && name != b".." {
                // SMBC_DIR = 7.
                out.push((name, kind == 7));
            }
        }
        // SAFETY: d is open, closed once.
        unsafe { (self.ops.closedir)(self.ctx, d) };
        Ok(out)
    }
}

impl Drop for Smb {
    fn drop(&mut self) {
        if let Ok(lib) = lib() {
            // SAFETY: our context, freed once; 1: close its connections.
            unsafe { (lib.free_context)(self.ctx, 1) };
        }
    }
}

fn outcome(r: c_int) -> Outcome {
    if r < 0 {
        Outcome::Err(errno())
    } else {
        Outcome::Ok
    }
}

/// An open SMB file, or a directory.
///
/// libsmbclient's `open` refuses directories (EISDIR) and its `opendir`
/// lists the whole directory when it opens it, which an `NTCreateX` of a
/// directory does not. A directory "handle" is therefore a `stat` of the
/// path (one request, as the create is), and its close sends nothing —
/// 11 of Debian's 79 230 `NTCreateX` lines open directories.
pub enum SmbFile {
    /// An open file.
    File(*mut SmbcFile),
    /// A directory, checked to exist.
    Dir,
}

// SAFETY: it travels only with the client (thread) that owns its context.
unsafe impl Send for SmbFile {}

impl Backend for Smb {
    const COST_LABEL: &'static str = "fileserver.load client";
    type File = SmbFile;

    fn open(&mut self, path: &CStr, flags: c_int, dir: bool) -> Result<SmbFile, i32> {
        let as_dir = |me: &mut Smb| match me.stat(path) {
            Outcome::Ok => Ok(SmbFile::Dir),
            _ => Err(errno()),
        };
        if dir {
            return as_dir(self);
        }
        // SAFETY: our context and a valid URL.
        let f = unsafe { (self.ops.open)(self.ctx, path.as_ptr(), flags, 0o644) };
        if !f.is_null() {
            return Ok(SmbFile::File(f));
        }
        match errno() {
            libc::EISDIR => as_dir(self),
            e => Err(e),
        }
    }

    fn close(&mut self, f: SmbFile) -> Outcome {
        match f {
            // SAFETY: an open file of this context, closed once.
            SmbFile::File(p) => outcome(unsafe { (self.ops.close)(self.ctx, p) }),
            SmbFile::Dir => Outcome::Ok,
        }
    }

    fn read_at(&mut self, f: &mut SmbFile, buf: &mut [u8], offset: u64) -> Result<usize, i32> {
        let SmbFile::File(p) = *f else {
            return Err(libc::EISDIR);
        };
        // SAFETY: an open file; lseek only sets the client's offset (no
        // request goes to the server), then one read request.
        unsafe {
            if (self.ops.lseek)(self.ctx, p, offset as libc::off_t, libc::SEEK_SET) < 0 {
                return Err(errno());
            }
            let n = (self.ops.read)(self.ctx, p, buf.as_mut_ptr().cast(), buf.len());
            if n < 0 {
                Err(errno())
            } else {
                Ok(n as usize)
            }
        }
    }

    fn write_at(&mut self, f: &mut SmbFile, buf: &[u8], offset: u64) -> Result<usize, i32> {
        let SmbFile::File(p) = *f else {
            return Err(libc::EISDIR);
        };
        // SAFETY: as in read_at.
        unsafe {
            if (self.ops.lseek)(self.ctx, p, offset as libc::off_t, libc::SEEK_SET) < 0 {
                return Err(errno());
            }
            let n = (self.ops.write)(self.ctx, p, buf.as_ptr().cast(), buf.len());
            if n < 0 {
                Err(errno())
            } else {
                Ok(n as usize)
            }
        }
    }

    fn stat(&mut self, path: &CStr) -> Outcome {
        // SAFETY: a zeroed buffer libsmbclient fills.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: our context, a valid URL and buffer.
        outcome(unsafe { (self.ops.stat)(self.ctx, path.as_ptr(), &mut st) })
    }

    fn fstat(&mut self, f: &mut SmbFile) -> Outcome {
        let SmbFile::File(p) = *f else {
            // A directory was stat'ed when "opened".
            return Outcome::Ok;
        };
        // SAFETY: as in stat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: an open file and a valid buffer.
        outcome(unsafe { (self.ops.fstat)(self.ctx, p, &mut st) })
    }

    fn set_times(&mut self, _f: &mut SmbFile, path: &CStr) -> Outcome {
        // SAFETY: a null times pointer means "now".
        outcome(unsafe { (self.ops.utimes)(self.ctx, path.as_ptr(), std::ptr::null_mut()) })
    }

    fn statfs(&mut self) -> Outcome {
        // SAFETY: a zeroed buffer libsmbclient fills.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: our context, the NUL-terminated share URL.
        outcome(unsafe { (self.ops.statvfs)(self.ctx, self.root.as_mut_ptr().cast(), &mut s) })
    }

    fn find(&mut self, dir: &CStr, pattern: &[u8]) -> Result<u32, i32> {
        // SAFETY: our context and a valid URL.
        let d = unsafe { (self.ops.opendir)(self.ctx, dir.as_ptr()) };
        if d.is_null() {
            return Err(errno());
        }
        let mut matches = 0;
        loop {
            // SAFETY: d is open.
            let e = unsafe { (self.ops.readdir)(self.ctx, d) };
            if e.is_null() {
                break;
            }
            // SAFETY: a dirent of libsmbclient's, its name NUL-terminated.
            let name = unsafe { CStr::from_ptr((*e).name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." && crate::loadfile::wildcard_match(pattern, name) {
                matches += 1;
            }
        }
        // SAFETY: d is open, closed once.
        unsafe { (self.ops.closedir)(self.ctx, d) };
        Ok(matches)
    }

    fn unlink(&mut self, path: &CStr) -> Outcome {
        // SAFETY: our context and a valid URL.
        outcome(unsafe { (self.ops.unlink)(self.ctx, path.as_ptr()) })
    }

    fn rename(&mut self, from: &CStr, to: &CStr) -> Outcome {
        // SAFETY: our context (both sides) and valid URLs.
        outcome(unsafe { (self.ops.rename)(self.ctx, from.as_ptr(), self.ctx, to.as_ptr()) })
    }

    fn mkdir(&mut self, path: &CStr) -> Outcome {
        // SAFETY: our context and a valid URL.
        outcome(unsafe { (self.ops.mkdir)(self.ctx, path.as_ptr(), 0o755) })
    }

    fn rmdir(&mut self, path: &CStr) -> Outcome {
        // SAFETY: our context and a valid URL.
        outcome(unsafe { (self.ops.rmdir)(self.ctx, path.as_ptr()) })
    }

    fn deltree(&mut self, path: &CStr) -> Outcome {
        let names = match self.names(path) {
            Ok(n) => n,
            Err(e) if e == libc::ENOENT => return Outcome::Ok,
            Err(e) => return Outcome::Err(e),
        };
        crate::backend::remove_listed(self, path, names, url_escape)
    }

    fn lock(&mut self, _f: &mut SmbFile, _offset: u64, _size: u64, _lock: bool) -> Outcome {
        Outcome::Unsupported
    }

    fn flush(&mut self, _f: &mut SmbFile) -> Outcome {
        Outcome::Unsupported
    }
}

/// A path's bytes as libsmbclient's URLs want them: it decodes `%XX`, so
/// a `%` of a name is written `%25`.
pub fn url_escape(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len());
    for &b in name {
        if b == b'%' {
            out.extend_from_slice(b"%25");
        } else {
            out.push(b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialect_words() {
        for w in Dialect::NAMES {
            assert!(Dialect::parse(w).is_some());
        }
        assert_eq!(Dialect::parse("nt1"), None);
        assert_eq!(Dialect::Smb1.range().0, c"NT1");
    }

    #[test]
    fn percent_signs_are_escaped() {
        assert_eq!(url_escape(b"a%b"), b"a%25b");
        assert_eq!(url_escape(b"~$CHAP10.DOC"), b"~$CHAP10.DOC");
    }
}
