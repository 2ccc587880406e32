//! The file operations a replaying client performs, and the local (or
//! mounted) directory back end — dbench's case.
//!
//! A back end is one client's connection to the file system: the SMB back
//! end ([`crate::smb`]) holds one libsmbclient context (one TCP connection
//! to the server) per client, the local one nothing. Paths arrive as
//! prepared C strings (full paths or `smb://` URLs made before the
//! measured loop), so no operation allocates — except `Deltree`, which
//! walks a tree of unknown shape (2 lines in 458 344 of Debian's
//! client.txt).

use std::ffi::{CStr, CString};

/// What an operation came to: success, an OS error (`errno`), or an
/// operation the back end cannot perform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It succeeded.
    Ok,
    /// It failed with this errno.
    Err(i32),
    /// The back end has no such operation (libsmbclient has no byte-range
    /// locks and no flush).
    Unsupported,
}

impl Outcome {
    fn of(r: libc::c_int) -> Outcome {
        if r < 0 {
            Outcome::Err(errno())
        } else {
            Outcome::Ok
        }
    }
}

/// The calling thread's errno.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// One client's file operations.
pub trait Backend {
    /// An open file or directory.
    type File;
    /// The replay loop's name in `bench/cost`'s log of a count-allocs
    /// build: the workload it serves.
    const COST_LABEL: &'static str;
    /// Opens a file with POSIX `flags` (`O_RDWR`, `O_CREAT`, `O_TRUNC`);
    /// `dir`: open a directory instead. A file that turns out to be a
    /// directory is opened as one.
    fn open(&mut self, path: &CStr, flags: libc::c_int, dir: bool) -> Result<Self::File, i32>;
    /// Closes it.
    fn close(&mut self, f: Self::File) -> Outcome;
    /// Reads up to `buf.len()` bytes at `offset`: the count read.
    fn read_at(&mut self, f: &mut Self::File, buf: &mut [u8], offset: u64) -> Result<usize, i32>;
    /// Writes `buf` at `offset`: the count written.
    fn write_at(&mut self, f: &mut Self::File, buf: &[u8], offset: u64) -> Result<usize, i32>;
    /// Stats a path.
    fn stat(&mut self, path: &CStr) -> Outcome;
    /// Stats an open file.
    fn fstat(&mut self, f: &mut Self::File) -> Outcome;
    /// Sets a file's times to now (`path`: the name it was opened by).
    fn set_times(&mut self, f: &mut Self::File, path: &CStr) -> Outcome;
    /// File-system information of the client's root.
    fn statfs(&mut self) -> Outcome;
    /// Lists directory `dir`; the number of names matching `pattern`
    /// (DOS wildcards).
    fn find(&mut self, dir: &CStr, pattern: &[u8]) -> Result<u32, i32>;
    /// Removes a file.
    fn unlink(&mut self, path: &CStr) -> Outcome;
    /// Renames.
    fn rename(&mut self, from: &CStr, to: &CStr) -> Outcome;
    /// Makes a directory.
    fn mkdir(&mut self, path: &CStr) -> Outcome;
    /// Removes an empty directory.
    fn rmdir(&mut self, path: &CStr) -> Outcome;
    /// Removes a directory tree (nothing to do when it does not exist).
    fn deltree(&mut self, path: &CStr) -> Outcome;
    /// Locks (`lock`) or unlocks a byte range.
    fn lock(&mut self, f: &mut Self::File, offset: u64, size: u64, lock: bool) -> Outcome;
    /// Flushes a file to stable storage.
    fn flush(&mut self, f: &mut Self::File) -> Outcome;
}

/// The walk `Deltree` takes on a server: removes each listed entry of
/// `dir` (a directory by `deltree`, a file by `unlink`), then `dir`
/// itself. `names` come from the back end's own listing; `spell` turns a
/// listed name into the back end's path component (a URL escape for
/// libsmbclient, the name as is for the native client). Shared by both SMB
/// back ends; it allocates, as `Deltree` is rare (2 lines of the trace).
pub(crate) fn remove_listed<B: Backend>(
    b: &mut B,
    dir: &CStr,
    names: Vec<(Vec<u8>, bool)>,
    spell: impl Fn(&[u8]) -> Vec<u8>,
) -> Outcome {
    for (name, is_dir) in names {
        let mut child = dir.to_bytes().to_vec();
        child.push(b'/');
        child.extend_from_slice(&spell(&name));
        let Ok(child) = CString::new(child) else {
            continue;
        };
        let r = if is_dir {
            b.deltree(&child)
        } else {
            b.unlink(&child)
        };
        if let Outcome::Err(e) = r {
            return Outcome::Err(e);
        }
    }
    b.rmdir(dir)
}

/// A local or mounted directory, through the kernel's system calls (as
/// dbench drives it: `Flush` is `fsync`, as in dbench's fileio back end;
/// benchlab also performs what dbench leaves out locally —
/// `QUERY_FS_INFORMATION` as `statvfs`, `SET_FILE_INFORMATION` as
/// `futimens`, `LockX`/`UnlockX` as `fcntl` byte-range locks — so that
/// every line of the mix does work).
pub struct Local {
    root: CString,
}

impl Local {
    /// A client whose `QUERY_FS_INFORMATION` asks about `root`.
    pub fn new(root: CString) -> Local {
        Local { root }
    }
}

/// A local open file descriptor.
pub struct Fd(libc::c_int);

impl Backend for Local {
    const COST_LABEL: &'static str = "fileserver.local client";
    type File = Fd;

    fn open(&mut self, path: &CStr, flags: libc::c_int, dir: bool) -> Result<Fd, i32> {
        let dir_flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        let fl = if dir {
            dir_flags
        } else {
            flags | libc::O_CLOEXEC
        };
        // SAFETY: a valid C string; the mode is used only with O_CREAT.
        let mut fd = unsafe { libc::open(path.as_ptr(), fl, 0o644) };
        if fd < 0 && !dir && errno() == libc::EISDIR {
            // SAFETY: as above.
            fd = unsafe { libc::open(path.as_ptr(), dir_flags) };
        }
        if fd < 0 {
            Err(errno())
        } else {
            Ok(Fd(fd))
        }
    }

    fn close(&mut self, f: Fd) -> Outcome {
        // SAFETY: our descriptor, closed once (it is moved in).
        Outcome::of(unsafe { libc::close(f.0) })
    }

    fn read_at(&mut self, f: &mut Fd, buf: &mut [u8], offset: u64) -> Result<usize, i32> {
        // SAFETY: buf is valid for its length.
        let n = unsafe { libc::pread(f.0, buf.as_mut_ptr().cast(), buf.len(), offset as i64) };
        if n < 0 {
            Err(errno())
        } else {
            Ok(n as usize)
        }
    }

    fn write_at(&mut self, f: &mut Fd, buf: &[u8], offset: u64) -> Result<usize, i32> {
        // SAFETY: buf is valid for its length.
        let n = unsafe { libc::pwrite(f.0, buf.as_ptr().cast(), buf.len(), offset as i64) };
        if n < 0 {
            Err(errno())
        } else {
            Ok(n as usize)
        }
    }

    fn stat(&mut self, path: &CStr) -> Outcome {
        // SAFETY: a zeroed stat buffer filled by the kernel.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers.
        Outcome::of(unsafe { libc::stat(path.as_ptr(), &mut st) })
    }

    fn fstat(&mut self, f: &mut Fd) -> Outcome {
        // SAFETY: as in stat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers.
        Outcome::of(unsafe { libc::fstat(f.0, &mut st) })
    }

    fn set_times(&mut self, f: &mut Fd, _path: &CStr) -> Outcome {
        // SAFETY: a null times pointer means "now".
        Outcome::of(unsafe { libc::futimens(f.0, std::ptr::null()) })
    }

    fn statfs(&mut self) -> Outcome {
        // SAFETY: a zeroed buffer filled by the kernel.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers.
        Outcome::of(unsafe { libc::statvfs(self.root.as_ptr(), &mut s) })
    }

    fn find(&mut self, dir: &CStr, pattern: &[u8]) -> Result<u32, i32> {
        // SAFETY: a valid C string.
        let d = unsafe { libc::opendir(dir.as_ptr()) };
        if d.is_null() {
            return Err(errno());
        }
        let mut matches = 0;
        loop {
            // SAFETY: d is an open DIR.
            let e = unsafe { libc::readdir(d) };
            if e.is_null() {
                break;
            }
            // SAFETY: readdir's entry holds a NUL-terminated name.
            let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." && crate::loadfile::wildcard_match(pattern, name) {
                matches += 1;
            }
        }
        // SAFETY: d is open, closed once.
        unsafe { libc::closedir(d) };
        Ok(matches)
    }

    fn unlink(&mut self, path: &CStr) -> Outcome {
        // SAFETY: a valid C string.
        Outcome::of(unsafe { libc::unlink(path.as_ptr()) })
    }

    fn rename(&mut self, from: &CStr, to: &CStr) -> Outcome {
        // SAFETY: valid C strings.
        Outcome::of(unsafe { libc::rename(from.as_ptr(), to.as_ptr()) })
    }

    fn mkdir(&mut self, path: &CStr) -> Outcome {
        // SAFETY: a valid C string.
        Outcome::of(unsafe { libc::mkdir(path.as_ptr(), 0o755) })
    }

    fn rmdir(&mut self, path: &CStr) -> Outcome {
        // SAFETY: a valid C string.
        Outcome::of(unsafe { libc::rmdir(path.as_ptr()) })
    }

    fn deltree(&mut self, path: &CStr) -> Outcome {
        use std::os::unix::ffi::OsStrExt;
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
        match std::fs::remove_dir_all(p) {
            Ok(()) => Outcome::Ok,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Outcome::Ok,
            Err(e) => Outcome::Err(e.raw_os_error().unwrap_or(libc::EIO)),
        }
    }

    fn lock(&mut self, f: &mut Fd, offset: u64, size: u64, lock: bool) -> Outcome {
        // SAFETY: a zeroed flock, filled in below.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = if lock { libc::F_WRLCK } else { libc::F_UNLCK } as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = offset as libc::off_t;
        fl.l_len = size as libc::off_t;
        // SAFETY: our descriptor and a valid flock.
        Outcome::of(unsafe { libc::fcntl(f.0, libc::F_SETLK, &fl) })
    }

    fn flush(&mut self, f: &mut Fd) -> Outcome {
        // SAFETY: our descriptor.
        Outcome::of(unsafe { libc::fsync(f.0) })
    }
}
