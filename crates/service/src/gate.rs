//! Starting a server through a gate, so that a SIGKILL of the starter at
//! any moment is safe.
//!
//! The child is forked, puts itself in a process group of its own, takes
//! its placement and its output files, and then blocks on a pipe. Only
//! after the parent has journaled the group's id and start time does the
//! parent write the byte that lets it exec the server. If the parent dies
//! before that, the child reads end-of-file and exits without ever
//! running the server; if it dies after, the journal names the group.
//!
//! `std::process::Command` cannot do this: its `spawn` returns only once
//! the child has exec'd. Between `fork` and `exec` the child only makes
//! async-signal-safe calls on memory prepared before the fork (the parent
//! may have other threads, whose locks the child must not touch).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What to run.
pub struct Launch {
    /// The program (a path).
    pub program: CString,
    /// Its arguments, the program's name first.
    pub argv: Vec<CString>,
    /// Its working directory.
    pub cwd: CString,
    /// Where its standard output and error go.
    pub output: File,
    /// CPUs it (and everything it starts) may run on.
    pub cpus: Option<Vec<usize>>,
}

/// A forked child waiting at the gate.
pub struct Gated {
    pid: i32,
    gate: Option<OwnedFd>,
    errors: Option<OwnedFd>,
}

/// The step of the child that failed, sent back with its errno.
const STEP_AFFINITY: i32 = 1;
const STEP_CHDIR: i32 = 2;
const STEP_EXEC: i32 = 3;

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two fds; O_CLOEXEC so that no server inherits them.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds are fresh and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Forks the child; it waits at the gate until [`Gated::release`].
pub fn spawn(l: &Launch) -> io::Result<Gated> {
    let (gate_r, gate_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let devnull = File::open("/dev/null")?;
    let mut ptrs: Vec<*const libc::c_char> = l.argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: a zeroed cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if let Some(cpus) = &l.cpus {
        for &c in cpus {
            if c < libc::CPU_SETSIZE as usize {
                // SAFETY: c is within the set.
                unsafe { libc::CPU_SET(c, &mut set) };
            }
        }
    }
    let pin = l.cpus.is_some();
    let (gate_fd, err_fd, gate_w_fd, err_r_fd, null_fd, out_fd) = (
        gate_r.as_raw_fd(),
        err_w.as_raw_fd(),
        gate_w.as_raw_fd(),
        err_r.as_raw_fd(),
        devnull.as_raw_fd(),
        l.output.as_raw_fd(),
    );
    // SAFETY: fork; the child below makes only async-signal-safe calls on
    // memory prepared above, and leaves by exec or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: the child. Each call is async-signal-safe.
        unsafe {
            let fail = |step: i32| -> ! {
                let errno = *libc::__errno_location();
                // A stack buffer: no allocation after fork.
                let mut msg = [0u8; 8];
                msg[..4].copy_from_slice(&step.to_ne_bytes());
                msg[4..].copy_from_slice(&errno.to_ne_bytes());
                libc::write(err_fd, msg.as_ptr().cast(), msg.len());
                libc::_exit(127)
            };
            // The parent's ends: while the child held the gate's write
            // end itself, it would never see the gate close.
            libc::close(gate_w_fd);
            libc::close(err_r_fd);
            libc::setpgid(0, 0);
            // Rust ignores SIGPIPE; the server gets the default back, and
            // no signal blocked by whichever thread forked.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            if pin && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
            {
                fail(STEP_AFFINITY);
            }
            libc::dup2(null_fd, 0);
            libc::dup2(out_fd, 1);
            libc::dup2(out_fd, 2);
            if libc::chdir(l.cwd.as_ptr()) != 0 {
                fail(STEP_CHDIR);
            }
            // The gate: one byte means go; end-of-file means the starter
            // died before journaling us, so never run the server.
            let mut b = 0u8;
            loop {
                let n = libc::read(gate_fd, (&mut b as *mut u8).cast(), 1);
                if n == 1 {
                    break;
                }
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                libc::_exit(0);
            }
            libc::execv(l.program.as_ptr(), ptrs.as_ptr());
            fail(STEP_EXEC);
        }
    }
    // The parent sets the group too, so that it exists whichever of the
    // two runs first (the usual job-control idiom).
    // SAFETY: setpgid on our own child.
    unsafe { libc::setpgid(pid, pid) };
    drop(gate_r);
    drop(err_w);
    Ok(Gated {
        pid,
        gate: Some(gate_w),
        errors: Some(err_r),
    })
}

impl Gated {
    /// The child's pid, which is also its process group's id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Lets the child exec the server. `Err` says which step failed in
    /// the child (placement, working directory, exec); the child has then
    /// exited (it is reaped by the caller's usual wait).
    pub fn release(mut self) -> io::Result<()> {
        let gate = self.gate.take().expect("released once");
        let b = [b'g'];
        // SAFETY: writing one byte to our pipe.
        let n = unsafe { libc::write(gate.as_raw_fd(), b.as_ptr().cast(), 1) };
        let write_err = (n != 1).then(io::Error::last_os_error);
        drop(gate);
        let errors = self.errors.take().expect("released once");
        // End-of-file: the write end closed on exec (O_CLOEXEC), so the
        // server runs. Eight bytes: a step and an errno.
        let mut buf = [0u8; 8];
        let mut got = 0;
        let mut f = File::from(errors);
        while got < buf.len() {
            match io::Read::read(&mut f, &mut buf[got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if got == buf.len() {
            let step = i32::from_ne_bytes(buf[..4].try_into().expect("4 bytes"));
            let errno = i32::from_ne_bytes(buf[4..].try_into().expect("4 bytes"));
            let what = match step {
                STEP_AFFINITY => "pin it to its CPUs",
                STEP_CHDIR => "enter its scratch directory",
                _ => "execute the program",
            };
            return Err(io::Error::other(format!(
                "cannot {what}: {}",
                io::Error::from_raw_os_error(errno)
            )));
        }
        match write_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Closes the gate without releasing: the child exits without running
    /// anything; it is reaped here.
    pub fn abandon(mut self) {
        self.gate.take();
        self.errors.take();
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
    }
}

impl Drop for Gated {
    fn drop(&mut self) {
        if self.gate.is_some() {
            self.gate.take();
            let mut status = 0;
            // SAFETY: waiting for our own child, which exits at once.
            unsafe { libc::waitpid(self.pid, &mut status, 0) };
        }
    }
}
