//! What a service's processes use, read from /proc: snapshots that the
//! engine takes at the start and end of a measured interval and diffs.

use std::fs;

use serde::{Deserialize, Serialize};

/// One snapshot of every process in a service's process group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceUsage {
    /// When it was taken (the middle of its scan): CLOCK_MONOTONIC of the
    /// service's host (ns); only differences between two snapshots of one
    /// host mean anything.
    pub monotonic_ns: u64,
    /// CPU time (user + system) of the group's processes and of their
    /// children they waited for (s) — so that a worker that exits and is
    /// reaped keeps counting in its parent, and the sum never goes down.
    pub cpu_s: f64,
    /// Resident memory of the group's processes (KiB; shared pages count
    /// once per process, as `ps` shows them).
    pub rss_kib: u64,
    /// Voluntary context switches of every live thread (waits: the
    /// server blocked on I/O or a lock).
    pub voluntary_ctxt_switches: u64,
    /// Involuntary context switches of every live thread (preemptions:
    /// the server competed for a CPU).
    pub nonvoluntary_ctxt_switches: u64,
    /// Processes in the group.
    pub processes: u32,
    /// Threads in the group.
    pub threads: u32,
}

/// What a service used over an interval (between two snapshots).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UsageDelta {
    /// The interval (s).
    pub elapsed_s: f64,
    /// CPU seconds used (`service_cpu_s`).
    pub cpu_s: f64,
    /// `cpu_s / elapsed_s` × 100: 100 = one CPU kept busy
    /// (`service_util_pct`).
    pub util_pct: f64,
    /// RSS at the end of the interval (`service_rss_kib`).
    pub rss_kib: u64,
    /// Voluntary context switches over the interval.
    pub voluntary_ctxt_switches: u64,
    /// Involuntary context switches over the interval.
    pub nonvoluntary_ctxt_switches: u64,
}

impl ServiceUsage {
    /// The use between this snapshot and a later one. Context switches of
    /// threads that exited in between are lost with them (the kernel keeps
    /// them only per live thread), so those counts saturate at 0 rather
    /// than go negative.
    pub fn delta(&self, later: &ServiceUsage) -> UsageDelta {
        let elapsed_s = later.monotonic_ns.saturating_sub(self.monotonic_ns) as f64 / 1e9;
        let cpu_s = (later.cpu_s - self.cpu_s).max(0.0);
        UsageDelta {
            elapsed_s,
            cpu_s,
            util_pct: if elapsed_s > 0.0 {
                100.0 * cpu_s / elapsed_s
            } else {
                f64::NAN
            },
            rss_kib: later.rss_kib,
            voluntary_ctxt_switches: later
                .voluntary_ctxt_switches
                .saturating_sub(self.voluntary_ctxt_switches),
            nonvoluntary_ctxt_switches: later
                .nonvoluntary_ctxt_switches
                .saturating_sub(self.nonvoluntary_ctxt_switches),
        }
    }
}

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The fields of /proc/PID/stat after the command name (field 3 onward).
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name (field 2) may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The live processes of a group (not zombies).
pub fn live_members(pgid: i32) -> Vec<i32> {
    benchlab_env::sys::live_members(pgid)
}

/// Sums a `Name:\tvalue` line of a status file.
fn status_value(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Takes a snapshot of a process group.
pub fn group_usage(pgid: i32) -> ServiceUsage {
    // SAFETY: sysconf has no side effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // SAFETY: as above.
    let page_kib = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) / 1024) as u64;
    let begun = monotonic_ns();
    let mut u = ServiceUsage::default();
    let mut ticks = 0u64;
    for pid in benchlab_env::sys::all_pids() {
        let Some(f) = stat_fields(pid) else { continue };
        if f.get(2).and_then(|g| g.parse::<i32>().ok()) != Some(pgid) {
            continue;
        }
        let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        // Fields 14–17 (utime, stime, cutime, cstime) are at 11–14 here;
        // 20 (num_threads) at 17; 24 (rss, pages) at 21.
        ticks += num(11) + num(12) + num(13) + num(14);
        u.processes += 1;
        u.threads += num(17) as u32;
        u.rss_kib += num(21) * page_kib;
        // /proc/PID/status counts the main thread's switches only: every
        // thread's own status file is read.
        if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.filter_map(Result::ok) {
                let Ok(text) = fs::read_to_string(t.path().join("status")) else {
                    continue;
                };
                u.voluntary_ctxt_switches += status_value(&text, "voluntary_ctxt_switches:");
                u.nonvoluntary_ctxt_switches += status_value(&text, "nonvoluntary_ctxt_switches:");
            }
        }
    }
    u.cpu_s = ticks as f64 / hz;
    // A scan of /proc takes milliseconds (4 ms for nginx, 15 ms for
    // apache2's 130 threads here, more under load): the snapshot is dated
    // at its middle, not its start, so that two snapshots' interval is
    // not skewed by the scan.
    u.monotonic_ns = begun + (monotonic_ns() - begun) / 2;
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_subtract_and_saturate() {
        let a = ServiceUsage {
            monotonic_ns: 1_000_000_000,
            cpu_s: 1.0,
            rss_kib: 100,
            voluntary_ctxt_switches: 10,
            nonvoluntary_ctxt_switches: 50,
            processes: 3,
            threads: 3,
        };
        let b = ServiceUsage {
            monotonic_ns: 3_000_000_000,
            cpu_s: 2.5,
            rss_kib: 120,
            voluntary_ctxt_switches: 25,
            nonvoluntary_ctxt_switches: 40,
            processes: 3,
            threads: 3,
        };
        let d = a.delta(&b);
        assert_eq!(d.elapsed_s, 2.0);
        assert_eq!(d.cpu_s, 1.5);
        assert_eq!(d.util_pct, 75.0);
        assert_eq!(d.rss_kib, 120);
        assert_eq!(d.voluntary_ctxt_switches, 15);
        assert_eq!(d.nonvoluntary_ctxt_switches, 0);
    }

    #[test]
    fn our_own_group_is_seen() {
        // The test process's own group: at least this process, with its
        // threads, some CPU time and resident memory.
        // SAFETY: getpgrp has no side effects.
        let pgid = unsafe { libc::getpgrp() };
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let u = group_usage(pgid);
        assert!(u.processes >= 1 && u.threads >= 1, "{u:?}");
        assert!(u.rss_kib > 0 && u.cpu_s > 0.0, "{u:?}");
        assert!(u.voluntary_ctxt_switches + u.nonvoluntary_ctxt_switches > 0);
        assert!(live_members(pgid).contains(&(std::process::id() as i32)));
    }
}
