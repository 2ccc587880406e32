//! A host's repetition in a few figures: the shares of CPU time by mode
//! per CPU, rates of the counters, means of the gauges, over the window
//! from the first sample to the last.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::sampler::{CPU_MODES, MEMORY_FIELDS};
use crate::series::Series;

/// One CPU's time by mode, in percent of its time over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuShare {
    /// User (with nice) time.
    pub user_pct: f64,
    /// System time.
    pub system_pct: f64,
    /// Hard interrupts.
    pub irq_pct: f64,
    /// Softirqs (the network stack's receive work, mostly).
    pub softirq_pct: f64,
    /// Idle waiting for I/O.
    pub iowait_pct: f64,
    /// Taken by the hypervisor.
    pub steal_pct: f64,
    /// Idle.
    pub idle_pct: f64,
    /// Everything but idle and iowait (mpstat's complement of %idle and
    /// %iowait).
    pub busy_pct: f64,
}

/// One interface's traffic over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NicSummary {
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets dropped, both directions.
    pub drops: u64,
    /// Errors, both directions.
    pub errors: u64,
    /// Received, bytes per second.
    pub rx_bytes_per_s: f64,
    /// Sent, bytes per second.
    pub tx_bytes_per_s: f64,
}

/// One block device's I/O over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskSummary {
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Reads and writes per second.
    pub ops_per_s: f64,
    /// Mean requests in flight at the samples (the queue).
    pub in_flight_mean: f64,
    /// Mean time per request, queue and service (iostat's await), ms.
    pub await_ms: f64,
}

/// Memory over the window: the means of the samples, KiB.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemorySummary {
    /// MemFree.
    pub free_kib: f64,
    /// MemAvailable.
    pub available_kib: f64,
    /// Page cache (Cached + Buffers).
    pub cache_kib: f64,
    /// Dirty.
    pub dirty_kib: f64,
    /// Under writeback.
    pub writeback_kib: f64,
}

/// A host's monitors over one repetition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// From the first sample to the last, s.
    pub elapsed_s: f64,
    /// Samples taken.
    pub samples: usize,
    /// The CPU the sampler ran on, when pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_cpu: Option<usize>,
    /// Per CPU, in CPU order.
    pub cpus: Vec<CpuShare>,
    /// CPU time spent busy on all CPUs together, s (for CPU per
    /// operation).
    pub cpu_busy_s: f64,
    /// Context switches per second.
    pub context_switches_per_s: f64,
    /// Interrupts per second (all lines).
    pub interrupts_per_s: f64,
    /// Mean runnable tasks (`procs_running`) at the samples.
    pub run_queue_mean: f64,
    /// Softirqs per second by kind, all CPUs (kinds that ran).
    pub softirqs_per_s: BTreeMap<String, f64>,
    /// Interfaces that moved a packet.
    pub nics: BTreeMap<String, NicSummary>,
    /// Devices that completed a request.
    pub disks: BTreeMap<String, DiskSummary>,
    /// Memory.
    pub memory: MemorySummary,
}

impl Series {
    /// The summary of the window from the first sample to the last (all
    /// zeros with fewer than two samples).
    pub fn summary(&self) -> Summary {
        let lay = &self.layout;
        let n = self.rows();
        let mut s = Summary {
            samples: n,
            pinned_cpu: self.pinned_cpu,
            ..Summary::default()
        };
        if n < 2 {
            return s;
        }
        let (a, b) = (self.row(0), self.row(n - 1));
        let d = |i: usize| b[i].saturating_sub(a[i]);
        let elapsed_s = (self.t_ms[n - 1] - self.t_ms[0]) as f64 / 1000.0;
        s.elapsed_s = elapsed_s;
        let per_s = |x: u64| {
            if elapsed_s > 0.0 {
                x as f64 / elapsed_s
            } else {
                0.0
            }
        };
        let mean = |i: usize| (0..n).map(|r| self.row(r)[i] as f64).sum::<f64>() / n as f64;
        // USER_HZ is 100 on every Linux ABI (sysconf(_SC_CLK_TCK)).
        let hz = 100.0;
        for cpu in 0..lay.cpus {
            let m: Vec<u64> = (0..CPU_MODES.len()).map(|k| d(lay.cpu(cpu, k))).collect();
            let total: u64 = m.iter().sum();
            let pct = |x: u64| {
                if total > 0 {
                    100.0 * x as f64 / total as f64
                } else {
                    0.0
                }
            };
            // user, nice, system, idle, iowait, irq, softirq, steal
            let busy = total - m[3] - m[4];
            s.cpu_busy_s += busy as f64 / hz;
            s.cpus.push(CpuShare {
                user_pct: pct(m[0] + m[1]),
                system_pct: pct(m[2]),
                idle_pct: pct(m[3]),
                iowait_pct: pct(m[4]),
                irq_pct: pct(m[5]),
                softirq_pct: pct(m[6]),
                steal_pct: pct(m[7]),
                busy_pct: pct(busy),
            });
        }
        s.context_switches_per_s = per_s(d(lay.system(0)));
        s.interrupts_per_s = per_s(d(lay.system(1)));
        s.run_queue_mean = mean(lay.system(2));
        for (k, kind) in lay.softirqs.iter().enumerate() {
            let c: u64 = (0..lay.cpus).map(|cpu| d(lay.softirq(k, cpu))).sum();
            if c > 0 {
                s.softirqs_per_s.insert(kind.clone(), per_s(c));
            }
        }
        for (i, name) in lay.nics.iter().enumerate() {
            let f = |k| d(lay.nic(i, k));
            let nic = NicSummary {
                rx_bytes: f(0),
                rx_packets: f(1),
                tx_bytes: f(4),
                tx_packets: f(5),
                errors: f(2) + f(6),
                drops: f(3) + f(7),
                rx_bytes_per_s: per_s(f(0)),
                tx_bytes_per_s: per_s(f(4)),
            };
            if nic.rx_packets + nic.tx_packets > 0 {
                s.nics.insert(name.clone(), nic);
            }
        }
        for (i, name) in lay.disks.iter().enumerate() {
            let f = |k| d(lay.disk(i, k));
            let ops = f(0) + f(3);
            if ops == 0 {
                continue;
            }
            s.disks.insert(
                name.clone(),
                DiskSummary {
                    reads: f(0),
                    writes: f(3),
                    read_bytes: f(1),
                    write_bytes: f(4),
                    ops_per_s: per_s(ops),
                    in_flight_mean: mean(lay.disk(i, 6)),
                    await_ms: (f(2) + f(5)) as f64 / ops as f64,
                },
            );
        }
        let mem = |name: &str| {
            MEMORY_FIELDS
                .iter()
                .position(|(n, _)| *n == name)
                .map(|i| mean(lay.memory(i)))
                .unwrap_or(0.0)
        };
        s.memory = MemorySummary {
            free_kib: mem("free_kib"),
            available_kib: mem("available_kib"),
            cache_kib: mem("cached_kib") + mem("buffers_kib"),
            dirty_kib: mem("dirty_kib"),
            writeback_kib: mem("writeback_kib"),
        };
        s
    }
}

#[cfg(test)]
mod tests {
    use crate::{Layout, Series};

    #[test]
    fn shares_rates_and_means() {
        let layout = Layout {
            cpus: 2,
            softirqs: vec!["NET_RX".into(), "TIMER".into()],
            nics: vec!["eth0".into()],
            disks: vec!["vda".into()],
        };
        let w = layout.width();
        let mut a = vec![0u64; w];
        let mut b = vec![0u64; w];
        // CPU 0: 100 ticks, 90 user; CPU 1: 100 ticks, 40 softirq.
        b[layout.cpu(0, 0)] = 90;
        b[layout.cpu(0, 3)] = 10;
        b[layout.cpu(1, 6)] = 40;
        b[layout.cpu(1, 3)] = 60;
        b[layout.system(0)] = 2000;
        a[layout.system(2)] = 1;
        b[layout.system(2)] = 3;
        b[layout.softirq(0, 1)] = 500;
        b[layout.nic(0, 0)] = 1_000_000;
        b[layout.nic(0, 1)] = 700;
        b[layout.disk(0, 3)] = 10;
        b[layout.disk(0, 4)] = 40960;
        b[layout.disk(0, 5)] = 25;
        let s = Series {
            start_unix_ms: 0,
            interval_ms: 1000,
            pinned_cpu: None,
            layout,
            t_ms: vec![0, 2000],
            values: [a, b].concat(),
        }
        .summary();
        assert_eq!(s.cpus[0].busy_pct, 90.0);
        assert_eq!(s.cpus[1].softirq_pct, 40.0);
        assert_eq!(s.cpus[1].busy_pct, 40.0);
        assert!((s.cpu_busy_s - 1.3).abs() < 1e-9);
        assert_eq!(s.context_switches_per_s, 1000.0);
        assert_eq!(s.run_queue_mean, 2.0);
        assert_eq!(s.softirqs_per_s["NET_RX"], 250.0);
        assert!(!s.softirqs_per_s.contains_key("TIMER"));
        assert_eq!(s.nics["eth0"].rx_bytes, 1_000_000);
        assert_eq!(s.disks["vda"].write_bytes, 40960);
        assert_eq!(s.disks["vda"].await_ms, 2.5);
    }
}
