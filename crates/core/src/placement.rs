//! Where and how a side runs: CPU list, nice value, real-time scheduling
//! policy, NUMA node, memory locking, a cpuset to join and a launcher
//! prefix. Everything but the launcher is applied by the side's own thread
//! (each side runs on a thread of its own in its agent); the launcher wraps
//! the agent process itself, so the controller applies it when it starts
//! the agent.

use serde::{Deserialize, Serialize};

/// A real-time scheduling policy (`chrt -f` / `chrt -r`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedPolicy {
    /// `SCHED_FIFO`: runs until it blocks or a higher priority wakes.
    Fifo,
    /// `SCHED_RR`: like FIFO, with a time slice among equal priorities.
    Rr,
}

impl SchedPolicy {
    /// The name used in study files.
    pub fn name(self) -> &'static str {
        match self {
            SchedPolicy::Fifo => "fifo",
            SchedPolicy::Rr => "rr",
        }
    }
}

/// Placement of one side of a workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// CPUs the side may run on; `None` leaves the affinity alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Vec<usize>>,
    /// Nice value (−20 … 19); `None` leaves it alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
    /// Real-time policy and priority (1 … 99); `None` keeps SCHED_OTHER.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched: Option<(SchedPolicy, i32)>,
    /// NUMA node whose memory the side allocates from (`MPOL_BIND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// Lock the agent's memory (`mlockall(MCL_CURRENT | MCL_FUTURE)`), so
    /// no page fault lands in a measured loop.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mlockall: bool,
    /// A command prefix the side's agent is started under (seed 002:
    /// `["onload", "--profile=latency"]`). Applied by the controller.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launcher: Vec<String>,
    /// A cgroup `tasks` file the side's thread joins before it is pinned
    /// (set by the runner when a configuration shields CPUs, not by users).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_tasks: Option<String>,
}

/// The largest CPU number a list may name: what `sched_setaffinity` can
/// pin (`CPU_SETSIZE` − 1). Checked while parsing, so that a range such as
/// `"0-4294967295"` is an error rather than billions of entries (issue 14:
/// the fuzzer's second find, an allocation failure that aborted).
pub const MAX_CPU: usize = libc::CPU_SETSIZE as usize - 1;

/// Parses a CPU list such as `"0"`, `"0,2"` or `"0-3,8"`.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    let bad = || format!("`{text}` is not a CPU list (examples: \"0\", \"0,2\", \"0-3,8\")");
    let cpu = |s: &str| -> Result<usize, String> {
        let n: usize = s.trim().parse().map_err(|_| bad())?;
        if n > MAX_CPU {
            return Err(format!(
                "`{text}`: CPU {n} is beyond the largest CPU benchlab can pin ({MAX_CPU})"
            ));
        }
        Ok(n)
    };
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (cpu(a)?, cpu(b)?);
                if a > b {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(cpu(part)?),
        }
    }
    if cpus.is_empty() {
        return Err(format!("`{text}` names no CPU"));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

impl Placement {
    /// Human form: `cpus 0-1, nice -5, fifo 1, mlockall`, or `default`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = &self.cpus {
            parts.push(format!(
                "cpus {}",
                c.iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if let Some(n) = self.nice {
            parts.push(format!("nice {n}"));
        }
        if let Some((policy, prio)) = self.sched {
            parts.push(format!("{} {prio}", policy.name()));
        }
        if let Some(node) = self.numa_node {
            parts.push(format!("numa node {node}"));
        }
        if self.mlockall {
            parts.push("mlockall".into());
        }
        if !self.launcher.is_empty() {
            parts.push(format!("under `{}`", self.launcher.join(" ")));
        }
        if parts.is_empty() {
            "default".into()
        } else {
            parts.join(", ")
        }
    }

    /// Applies the placement to the calling thread (and, for `mlockall`,
    /// to its process). The order matters: the cgroup first (a cpuset
    /// limits which affinities are allowed), then memory policy and
    /// affinity, then priorities.
    pub fn apply_to_current_thread(&self) -> Result<(), String> {
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        if let Some(tasks) = &self.cgroup_tasks {
            // cgroup v1 `tasks` moves one thread; v2 threaded `cgroup.threads`
            // likewise. Writing our own tid puts just this side there.
            std::fs::write(tasks, tid.to_string())
                .map_err(|e| format!("cannot join the cgroup of {tasks}: {e}"))?;
        }
        if let Some(node) = self.numa_node {
            bind_memory_to_node(node)?;
            if self.cpus.is_none() {
                let list =
                    std::fs::read_to_string(format!("/sys/devices/system/node/node{node}/cpulist"))
                        .map_err(|e| format!("NUMA node {node}: {e}"))?;
                set_affinity(&parse_cpu_list(list.trim())?)?;
            }
        }
        if let Some(cpus) = &self.cpus {
            set_affinity(cpus)?;
        }
        if let Some(nice) = self.nice {
            // On Linux, PRIO_PROCESS with a thread id sets that thread's nice.
            // SAFETY: plain syscall without pointers.
            let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
            if rc != 0 {
                return Err(format!(
                    "cannot set nice {nice}: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        if let Some((policy, prio)) = self.sched {
            let param = libc::sched_param {
                sched_priority: prio,
            };
            let pol = match policy {
                SchedPolicy::Fifo => libc::SCHED_FIFO,
                SchedPolicy::Rr => libc::SCHED_RR,
            };
            // SAFETY: param is a valid sched_param; pid 0 is this thread.
            if unsafe { libc::sched_setscheduler(0, pol, &param) } != 0 {
                return Err(format!(
                    "cannot set {} priority {prio}: {}",
                    policy.name(),
                    std::io::Error::last_os_error()
                ));
            }
        }
        if self.mlockall {
            // SAFETY: plain syscall with flag arguments.
            if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
                return Err(format!(
                    "cannot lock memory (mlockall): {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        Ok(())
    }
}

fn set_affinity(cpus: &[usize]) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it for
    // indices below CPU_SETSIZE, which we check.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c >= libc::CPU_SETSIZE as usize {
                return Err(format!("CPU {c} is beyond CPU_SETSIZE"));
            }
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "cannot pin to CPUs {:?}: {}",
                cpus,
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// `set_mempolicy(MPOL_BIND, {node})` for the calling thread.
fn bind_memory_to_node(node: u32) -> Result<(), String> {
    if !std::path::Path::new(&format!("/sys/devices/system/node/node{node}")).exists() {
        return Err(format!("NUMA node {node} does not exist on this host"));
    }
    if node >= 1024 {
        return Err(format!("NUMA node {node} is beyond the supported 1024"));
    }
    const MPOL_BIND: libc::c_long = 2;
    let mut mask = [0u64; 16];
    mask[(node / 64) as usize] |= 1u64 << (node % 64);
    // SAFETY: mask holds 1024 bits, which is what maxnode says.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            MPOL_BIND,
            mask.as_ptr(),
            1024 as libc::c_ulong,
        )
    };
    if rc != 0 {
        return Err(format!(
            "cannot bind memory to NUMA node {node}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The CPUs this process may run on now.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Gives the calling thread a file-descriptor table of its own that holds
/// only descriptors 0–2 and `keep`; false where the kernel cannot
/// (`close_range` arrived in Linux 5.9), and the thread then keeps sharing.
///
/// Why: while a thread shares its table with other threads, every
/// `read`/`write`/`lseek`/`send`/`recv` it makes takes and drops a
/// reference on the file (two atomic operations) and, on a regular file,
/// its position lock; a single-threaded program (IOzone, netperf, sockperf,
/// the limit programs in `bench/limit`) pays neither. Measured with two C
/// loops pinned to one CPU, medians: record rewrite (a 64 KiB `write` and an
/// `lseek` in the page cache) 2259 ns single-threaded, 2421 ns with a second,
/// sleeping thread, 2255 ns with that thread and a table of its own; UDP
/// ping-pong, both ends on one CPU, 10 528 / 10 700 / 10 436 ns per round
/// trip. Measured loops therefore run on threads that own their table.
///
/// Only for a thread that uses no other descriptor afterwards: the copies
/// of everything else are closed (so no socket or pipe of the process is
/// held open by this thread), and what it opens from now on is in its
/// table alone, invisible to other threads (a thread it starts shares it).
pub fn own_fd_table(keep: Option<std::os::fd::RawFd>) -> bool {
    let close = |from: u32, to: u32, flags: libc::c_uint| {
        // SAFETY: plain syscall on this thread's table; by this function's
        // contract the thread uses none of the descriptors it closes.
        unsafe { libc::syscall(libc::SYS_close_range, from, to, flags) == 0 }
    };
    match keep {
        Some(fd) if fd >= 3 => {
            let fd = fd as u32;
            close(fd + 1, u32::MAX, libc::CLOSE_RANGE_UNSHARE) && (fd == 3 || close(3, fd - 1, 0))
        }
        _ => close(3, u32::MAX, libc::CLOSE_RANGE_UNSHARE),
    }
}

#[cfg(test)]
mod tests {
    /// Whether `fd` is open in the calling thread's descriptor table.
    fn is_open(fd: i32) -> bool {
        // SAFETY: F_GETFD only reads the table.
        (unsafe { libc::fcntl(fd, libc::F_GETFD) }) >= 0
    }

    #[test]
    fn own_fd_table_keeps_only_what_it_is_told() {
        use std::os::fd::AsRawFd;
        let a = std::fs::File::open("/dev/null").unwrap();
        let b = std::fs::File::open("/dev/null").unwrap();
        let (fa, fb) = (a.as_raw_fd(), b.as_raw_fd());
        let seen = std::thread::spawn(move || {
            assert!(is_open(fa) && is_open(fb));
            assert!(
                own_fd_table(Some(fb)),
                "close_range(CLOSE_RANGE_UNSHARE) failed"
            );
            let kept = (is_open(fa), is_open(fb));
            // What the thread opens now is in its table alone.
            let own = std::fs::File::open("/dev/null").unwrap();
            assert!(is_open(own.as_raw_fd()));
            drop(own);
            assert!(own_fd_table(None));
            (kept, is_open(fb))
        })
        .join()
        .unwrap();
        assert_eq!(
            seen,
            ((false, true), false),
            "(a, b) kept, then b after a bare call"
        );
        // The process's own table lost nothing.
        assert!(is_open(fa) && is_open(fb));
        drop((a, b));
    }

    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8"), Ok(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpu_list("1, 0"), Ok(vec![0, 1]));
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("").is_err());
    }

    /// Issue 14, found by the fuzzer (crates/fuzz): a huge range was
    /// expanded before anything checked it, and the allocation aborted.
    #[test]
    fn issue_14_huge_cpu_ranges_are_errors() {
        for text in [
            "0-4294967295",
            "0-18446744073709551615",
            "1024",
            "5,0-99999999",
        ] {
            let e = parse_cpu_list(text).unwrap_err();
            assert!(
                e.contains("beyond the largest CPU benchlab can pin (1023)"),
                "{e}"
            );
        }
        assert_eq!(parse_cpu_list("1023").unwrap(), [1023]);
        assert_eq!(parse_cpu_list("0-1023").unwrap().len(), 1024);
    }

    #[test]
    fn pin_to_cpu0() {
        let p = Placement {
            cpus: Some(vec![0]),
            nice: Some(1),
            ..Default::default()
        };
        std::thread::spawn(move || p.apply_to_current_thread())
            .join()
            .unwrap()
            .unwrap();
    }

    #[test]
    fn fifo_and_numa_node_0() {
        // SCHED_FIFO needs CAP_SYS_NICE (or an RLIMIT_RTPRIO): root here.
        benchlab_testkit::require!(root);
        let p = Placement {
            sched: Some((SchedPolicy::Fifo, 1)),
            numa_node: Some(0),
            ..Default::default()
        };
        let policy = std::thread::spawn(move || {
            p.apply_to_current_thread().unwrap();
            // SAFETY: plain syscall.
            unsafe { libc::sched_getscheduler(0) }
        })
        .join()
        .unwrap();
        assert_eq!(policy, libc::SCHED_FIFO);
        let bad = Placement {
            numa_node: Some(999),
            ..Default::default()
        };
        let err = std::thread::spawn(move || bad.apply_to_current_thread())
            .join()
            .unwrap()
            .unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
    }
}
