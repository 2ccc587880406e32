//! SMB clients as processes, one per client (libsmbclient's and the
//! native SMB1 client's alike, so that both are measured the same way).
//!
//! Debian's libsmbclient is built without its thread hooks
//! (`smbc_thread_posix` is not exported), and without them its global
//! state (talloc stack frames, the loaded configuration) is shared by
//! every context: two threads with contexts of their own crashed it here
//! at once (SIGSEGV, SIGABRT). So each SMB client is a process of its own
//! — as dbench's and smbtorture's clients are, and as NetBench's were
//! machines of their own: it makes its context and connects, says it is
//! ready through a pipe, waits for the start, replays, and writes its
//! tally back through the pipe. The phase is one byte in memory shared
//! with the parent, read after every operation as the threads read
//! theirs. A client measures its own CPU time over the measured interval.
//!
//! A client process dies with the thread that forked it
//! (`PR_SET_PDEATHSIG`), so a killed benchlab leaves none behind.

use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use benchlab_core::cpu::CpuSnapshot;
use benchlab_core::result::CpuUsage;

use crate::backend::Backend;
use crate::loadfile::LoadFile;
use crate::replay::{new_client, phases, Made, Replay, ReplayError, Tally, MEASURE, STOP, WARMUP};

/// What the parent and its client processes share.
struct Shared {
    /// The phase (`WARMUP`, `MEASURE`, `STOP`).
    phase: AtomicU8,
    /// Set once: the clients start.
    go: AtomicU8,
}

/// A page of anonymous shared memory holding [`Shared`].
struct SharedMap(*mut Shared);

impl SharedMap {
    fn new(phase: u8) -> Result<SharedMap, ReplayError> {
        // SAFETY: an anonymous shared mapping of one page.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ReplayError::Setup(format!(
                "map shared memory for the clients: {}",
                std::io::Error::last_os_error()
            )));
        }
        let p = p.cast::<Shared>();
        // SAFETY: a fresh mapping, large and aligned enough.
        unsafe {
            p.write(Shared {
                phase: AtomicU8::new(phase),
                go: AtomicU8::new(0),
            })
        };
        Ok(SharedMap(p))
    }

    fn get(&self) -> &Shared {
        // SAFETY: initialised in new, unmapped only in drop.
        unsafe { &*self.0 }
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: our mapping, unmapped once.
        unsafe { libc::munmap(self.0.cast(), 4096) };
    }
}

/// What the clients' paths start with.
#[derive(Clone, Copy)]
pub(crate) struct Prefix<'a> {
    /// The run directory's URL (libsmbclient) or share-relative path
    /// (the native client).
    pub text: &'a str,
    /// The paths are libsmbclient URLs (a `%` escaped).
    pub urls: bool,
}

struct Kid {
    number: u32,
    pid: libc::pid_t,
    pipe: std::fs::File,
}

/// How a waited-for process ended.
fn ended(status: i32) -> Option<String> {
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        None
    } else if libc::WIFEXITED(status) {
        Some(format!("exited with code {}", libc::WEXITSTATUS(status)))
    } else if libc::WIFSIGNALED(status) {
        Some(format!("killed by signal {}", libc::WTERMSIG(status)))
    } else {
        Some(format!("ended with wait status {status}"))
    }
}

fn reap(pid: libc::pid_t) -> Option<String> {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return ended(status);
        }
        if r < 0 && crate::backend::errno() != libc::EINTR {
            return Some("lost (waitpid failed)".into());
        }
    }
}

/// The body of a client process; its exit code.
fn child<B: Backend>(
    spec: &Replay,
    file: &LoadFile,
    prefix: Prefix<'_>,
    make: &dyn Fn(u32) -> Made<B>,
    i: u32,
    shared: &Shared,
    mut pipe: std::fs::File,
) -> i32 {
    // Die with the thread that forked us.
    // SAFETY: prctl on ourselves.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let fail = |mut pipe: std::fs::File, e: ReplayError| {
        let _ = pipe.write_all(format!("E{e}").as_bytes());
        1
    };
    let backend = match make(i) {
        Ok((b, _)) => b,
        Err(e) => return fail(pipe, e),
    };
    let mut client = match new_client(
        file,
        backend,
        prefix.text,
        spec.first + i + 1,
        prefix.urls,
        true,
    ) {
        Ok(c) => c,
        Err(e) => return fail(pipe, e),
    };
    if pipe.write_all(b"R").is_err() {
        return 1;
    }
    // Waiting for the start is not measured: a millisecond's poll is
    // enough.
    while shared.go.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    client.run(&shared.phase, spec.passes);
    let bytes = client.tally.encode();
    if pipe.write_all(&bytes).is_err() {
        return 1;
    }
    0
}

/// Forks the clients, runs them behind the gate, merges their tallies.
pub(crate) fn drive<B: Backend>(
    spec: &Replay,
    file: &Arc<LoadFile>,
    abort: &AtomicBool,
    gate: &dyn Fn() -> Result<(), String>,
    prefix: Prefix<'_>,
    make: impl Fn(u32) -> Made<B>,
) -> Result<(Tally, f64, CpuUsage), ReplayError> {
    let map = SharedMap::new(if spec.passes.is_some() {
        MEASURE
    } else {
        WARMUP
    })?;
    let shared = map.get();
    let mut kids: Vec<Kid> = Vec::with_capacity(spec.count as usize);
    let stop_all = |kids: Vec<Kid>, shared: &Shared| {
        shared.phase.store(STOP, Ordering::SeqCst);
        shared.go.store(1, Ordering::SeqCst);
        for k in kids {
            drop(k.pipe);
            reap(k.pid);
        }
    };
    for i in 0..spec.count {
        let mut fds = [0; 2];
        // SAFETY: a pipe for this client's messages.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
            let e = std::io::Error::last_os_error();
            stop_all(kids, shared);
            return Err(ReplayError::Setup(format!("make a pipe for a client: {e}")));
        }
        // SAFETY: fork; the child runs only `child` and then _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: the child's ends: the write end is ours, the read
            // end the parent's.
            unsafe { libc::close(fds[0]) };
            // SAFETY: fds[1] is an open descriptor owned from here on.
            let pipe = unsafe { std::fs::File::from_raw_fd(fds[1]) };
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                child(spec, file, prefix, &make, i, shared, pipe)
            }))
            .unwrap_or(3);
            // SAFETY: the child ends here, without running the parent's
            // destructors or atexit handlers.
            unsafe { libc::_exit(code) };
        }
        // SAFETY: the parent keeps the read end only.
        unsafe { libc::close(fds[1]) };
        // SAFETY: fds[0] is an open descriptor owned from here on.
        let pipe = unsafe { std::fs::File::from_raw_fd(fds[0]) };
        if pid < 0 {
            let e = std::io::Error::last_os_error();
            stop_all(kids, shared);
            return Err(ReplayError::Setup(format!("fork a client: {e}")));
        }
        kids.push(Kid {
            number: spec.first + i + 1,
            pid,
            pipe,
        });
    }
    // Every client connected, or why not.
    let mut setup_err = None;
    for k in kids.iter_mut() {
        let mut b = [0u8; 1];
        match k.pipe.read(&mut b) {
            Ok(1) if b[0] == b'R' => {}
            Ok(1) => {
                let mut msg = String::new();
                let _ = k.pipe.read_to_string(&mut msg);
                setup_err.get_or_insert(msg);
            }
            _ => {
                setup_err.get_or_insert(format!("client {} ended while connecting", k.number));
            }
        }
    }
    if let Some(e) = setup_err {
        stop_all(kids, shared);
        return Err(ReplayError::Setup(e));
    }
    let gated = gate().map_err(ReplayError::Gate);
    if gated.is_err() {
        shared.phase.store(STOP, Ordering::SeqCst);
    }
    let begin = CpuSnapshot::take();
    shared.go.store(1, Ordering::SeqCst);
    let timed = gated.and_then(|()| phases(spec, abort, &shared.phase, begin));
    if timed.is_err() {
        shared.phase.store(STOP, Ordering::SeqCst);
    }
    let mut total = Tally::new();
    let mut problem = None;
    for mut k in kids {
        let mut bytes = Vec::new();
        let read = k.pipe.read_to_end(&mut bytes);
        let how = reap(k.pid);
        match (
            how,
            read.map_err(|e| e.to_string())
                .and_then(|_| Tally::decode(&bytes)),
        ) {
            (None, Ok(t)) => total.merge(&t),
            (Some(how), _) => {
                problem.get_or_insert(format!("client {} process {how}", k.number));
            }
            (None, Err(e)) => {
                problem.get_or_insert(format!("client {}: its result: {e}", k.number));
            }
        }
    }
    let (m0, t0, end) = timed?;
    if let Some(p) = problem {
        return Err(ReplayError::Setup(p));
    }
    let (m1, t1) = end.unwrap_or_else(|| (CpuSnapshot::take(), std::time::Instant::now()));
    let mut cpu = m0.usage_until(&m1);
    // The clients' own CPU time, which this process's does not include.
    cpu.process_cpu_s += total.cpu_s;
    if cpu.elapsed_s > 0.0 {
        cpu.process_util_pct = 100.0 * cpu.process_cpu_s / cpu.elapsed_s;
    }
    Ok((total, (t1 - t0).as_secs_f64(), cpu))
}
