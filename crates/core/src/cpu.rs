//! CPU accounting for one side of a workload: the process's own CPU time
//! (getrusage) and the system-wide utilization from `/proc/stat`, the way
//! netperf's `procstat` method computes it.

use crate::result::CpuUsage;
use std::time::Instant;

/// A snapshot taken just before and just after a measured interval.
#[derive(Debug, Clone)]
pub struct CpuSnapshot {
    at: Instant,
    process_cpu_s: f64,
    /// (idle, total) jiffies summed over all CPUs, if /proc/stat was readable.
    system: Option<(u64, u64)>,
    ncpus: u32,
}

fn rusage_self() -> libc::rusage {
    // SAFETY: getrusage only writes into the struct we pass.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    }
}

fn tv_s(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

/// Peak resident set size of this process in KiB (`ru_maxrss`).
pub fn peak_rss_kib() -> u64 {
    rusage_self().ru_maxrss.max(0) as u64
}

/// Reads the aggregate `cpu` line of `/proc/stat`: (idle, total, ncpus).
/// Total is user+nice+system+idle+iowait+irq+softirq+steal; guest time is
/// already inside user and nice, so it is not added twice.
fn proc_stat() -> Option<(u64, u64, u32)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let mut lines = text.lines();
    let first = lines.next()?;
    let fields: Vec<u64> = first
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|f| f.parse().ok())
        .collect();
    if fields.len() < 4 {
        return None;
    }
    let idle = fields[3];
    let total = fields.iter().sum();
    let ncpus = lines
        .take_while(|l| l.starts_with("cpu"))
        .filter(|l| l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count() as u32;
    Some((idle, total, ncpus))
}

impl CpuSnapshot {
    /// Takes a snapshot now.
    pub fn take() -> Self {
        let ru = rusage_self();
        let stat = proc_stat();
        CpuSnapshot {
            at: Instant::now(),
            process_cpu_s: tv_s(ru.ru_utime) + tv_s(ru.ru_stime),
            system: stat.map(|(i, t, _)| (i, t)),
            ncpus: stat.map(|s| s.2).unwrap_or(1),
        }
    }

    /// The usage between `self` and a later snapshot.
    pub fn usage_until(&self, end: &CpuSnapshot) -> CpuUsage {
        let elapsed_s = end.at.duration_since(self.at).as_secs_f64();
        let process_cpu_s = (end.process_cpu_s - self.process_cpu_s).max(0.0);
        let system_util_pct = match (self.system, end.system) {
            (Some((i0, t0)), Some((i1, t1))) if t1 > t0 => {
                100.0 - 100.0 * (i1.saturating_sub(i0)) as f64 / (t1 - t0) as f64
            }
            _ => f64::NAN,
        };
        CpuUsage {
            elapsed_s,
            process_cpu_s,
            process_util_pct: if elapsed_s > 0.0 {
                100.0 * process_cpu_s / elapsed_s
            } else {
                f64::NAN
            },
            system_util_pct,
            ncpus: end.ncpus,
        }
    }
}

/// netperf's service demand: CPU µs per unit of work, from the
/// system-wide utilization (`SD = util% · 10000 / units_per_s · ncpus`,
/// netlib.c `calc_service_demand_internal`). For streams the unit is a KB
/// (1024 bytes), for request/response a transaction.
pub fn service_demand_system(cpu: &CpuUsage, units_per_s: f64) -> f64 {
    if units_per_s <= 0.0 {
        return f64::NAN;
    }
    cpu.system_util_pct * 10000.0 / units_per_s * cpu.ncpus as f64
}

/// Service demand from the process's own CPU time: µs of this process's CPU
/// per unit (KB or transaction).
pub fn service_demand_process(cpu: &CpuUsage, units: f64) -> f64 {
    if units <= 0.0 {
        return f64::NAN;
    }
    cpu.process_cpu_s * 1e6 / units
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netperf_service_demand_example() {
        // classic-tools.md 1.6: 81560 KB/s at 100 % on 2 CPUs → 24.52 µs/KB.
        let cpu = CpuUsage {
            elapsed_s: 5.0,
            process_cpu_s: 0.0,
            process_util_pct: 0.0,
            system_util_pct: 100.0,
            ncpus: 2,
        };
        let sd = service_demand_system(&cpu, 81560.0);
        assert!((sd - 24.52).abs() < 0.01, "{sd}");
    }

    #[test]
    fn snapshot_reads_proc() {
        let a = CpuSnapshot::take();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let u = a.usage_until(&CpuSnapshot::take());
        assert!(u.ncpus >= 1);
        assert!(u.process_cpu_s >= 0.0);
        assert!(peak_rss_kib() > 0);
    }
}
