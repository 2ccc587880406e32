//! One sample of a host: every counter and gauge the monitor records, read
//! from /proc into one row of numbers whose meaning the [`Layout`] gives.

use std::io;

use serde::{Deserialize, Serialize};

use crate::procfs::{cpu_index, diskstats_line, lines, netdev_line, num, words, ProcFile};

/// CPU time modes per CPU, in `/proc/stat`'s order (USER_HZ ticks).
pub const CPU_MODES: [&str; 8] = [
    "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
];
/// Machine-wide figures of `/proc/stat`: counters, then gauges.
pub const SYSTEM_FIELDS: [&str; 4] = [
    "context_switches",
    "interrupts",
    "procs_running",
    "procs_blocked",
];
/// Counters per network interface (`/proc/net/dev`).
pub const NIC_FIELDS: [&str; 8] = [
    "rx_bytes",
    "rx_packets",
    "rx_errors",
    "rx_drops",
    "tx_bytes",
    "tx_packets",
    "tx_errors",
    "tx_drops",
];
/// The position of each [`NIC_FIELDS`] among a `/proc/net/dev` line's
/// numbers.
const NIC_POSITIONS: [usize; 8] = [0, 1, 2, 3, 8, 9, 10, 11];
/// Figures per block device (`/proc/diskstats`); `in_flight` is a gauge.
pub const DISK_FIELDS: [&str; 8] = [
    "reads",
    "read_bytes",
    "read_ms",
    "writes",
    "write_bytes",
    "write_ms",
    "in_flight",
    "io_ms",
];
/// The position of each [`DISK_FIELDS`] among a `/proc/diskstats` line's
/// numbers after the name; sectors are 512 bytes whatever the device's.
const DISK_POSITIONS: [usize; 8] = [0, 2, 3, 4, 6, 7, 8, 9];
const SECTOR_FIELDS: [bool; 8] = [false, true, false, false, true, false, false, false];
/// Memory gauges (`/proc/meminfo`, KiB) and the keys they are read from.
pub const MEMORY_FIELDS: [(&str, &str); 6] = [
    ("free_kib", "MemFree:"),
    ("available_kib", "MemAvailable:"),
    ("buffers_kib", "Buffers:"),
    ("cached_kib", "Cached:"),
    ("dirty_kib", "Dirty:"),
    ("writeback_kib", "Writeback:"),
];

/// What each number of a sample row means: the host's CPUs, softirq
/// kinds, interfaces and block devices as found at warm-up. A row holds,
/// in order: [`CPU_MODES`] per CPU, [`SYSTEM_FIELDS`], softirqs per kind
/// per CPU, [`NIC_FIELDS`] per interface, [`DISK_FIELDS`] per device,
/// [`MEMORY_FIELDS`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// CPUs (`cpu0` … `cpu{n-1}`; an offline CPU's figures stay still).
    pub cpus: usize,
    /// Softirq kinds (`NET_RX` …), as `/proc/softirqs` lists them.
    pub softirqs: Vec<String>,
    /// Network interfaces of the host's network namespace.
    pub nics: Vec<String>,
    /// Whole block devices with a non-zero size.
    pub disks: Vec<String>,
}

impl Layout {
    /// Numbers per row.
    pub fn width(&self) -> usize {
        self.memory_base() + MEMORY_FIELDS.len()
    }

    /// Index of CPU `cpu`'s mode `mode` (an index into [`CPU_MODES`]).
    pub fn cpu(&self, cpu: usize, mode: usize) -> usize {
        cpu * CPU_MODES.len() + mode
    }

    /// Index of a [`SYSTEM_FIELDS`] entry.
    pub fn system(&self, field: usize) -> usize {
        self.cpus * CPU_MODES.len() + field
    }

    /// Index of softirq kind `kind` on CPU `cpu`.
    pub fn softirq(&self, kind: usize, cpu: usize) -> usize {
        self.system(SYSTEM_FIELDS.len()) + kind * self.cpus + cpu
    }

    /// Index of interface `nic`'s [`NIC_FIELDS`] entry `field`.
    pub fn nic(&self, nic: usize, field: usize) -> usize {
        self.softirq(self.softirqs.len(), 0) + nic * NIC_FIELDS.len() + field
    }

    /// Index of device `disk`'s [`DISK_FIELDS`] entry `field`.
    pub fn disk(&self, disk: usize, field: usize) -> usize {
        self.nic(self.nics.len(), 0) + disk * DISK_FIELDS.len() + field
    }

    fn memory_base(&self) -> usize {
        self.disk(self.disks.len(), 0)
    }

    /// Index of a [`MEMORY_FIELDS`] entry.
    pub fn memory(&self, field: usize) -> usize {
        self.memory_base() + field
    }

    /// Whether the number at `index` is a gauge (a level, averaged) rather
    /// than a counter (whose differences count).
    pub fn is_gauge(&self, index: usize) -> bool {
        let procs = index == self.system(2) || index == self.system(3);
        let disk_base = self.disk(0, 0);
        let in_flight = index >= disk_base
            && index < self.memory_base()
            && (index - disk_base) % DISK_FIELDS.len() == 6;
        procs || in_flight || index >= self.memory_base()
    }
}

/// The open /proc files of a host and the names it matches lines with.
pub struct Sampler {
    stat: ProcFile,
    softirqs: Option<ProcFile>,
    netdev: Option<ProcFile>,
    diskstats: Option<ProcFile>,
    meminfo: Option<ProcFile>,
    layout: Layout,
}

impl Sampler {
    /// Opens the files and finds the host's layout (this allocates; the
    /// samples after it do not). Only `/proc/stat` is required: a host
    /// without another file records none of its figures.
    pub fn new() -> io::Result<Sampler> {
        let mut stat = ProcFile::open("/proc/stat")?;
        let mut cpus = 0;
        for l in lines(stat.read()?) {
            if let Some(i) = words(l).next().and_then(cpu_index) {
                cpus = cpus.max(i + 1);
            }
        }
        let mut softirqs = ProcFile::open("/proc/softirqs").ok();
        let mut kinds = Vec::new();
        if let Some(f) = softirqs.as_mut() {
            for (n, l) in lines(f.read()?).enumerate() {
                if n == 0 {
                    cpus = cpus.max(words(l).count());
                    continue;
                }
                if let Some(k) = words(l).next().and_then(|w| w.strip_suffix(b":")) {
                    kinds.push(String::from_utf8_lossy(k).into_owned());
                }
            }
        }
        let mut netdev = ProcFile::open("/proc/net/dev").ok();
        let mut nics = Vec::new();
        if let Some(f) = netdev.as_mut() {
            for l in lines(f.read()?) {
                if let Some((name, _)) = netdev_line(l) {
                    nics.push(String::from_utf8_lossy(name).into_owned());
                }
            }
        }
        let diskstats = ProcFile::open("/proc/diskstats").ok();
        let disks = if diskstats.is_some() {
            whole_disks()
        } else {
            Vec::new()
        };
        let meminfo = ProcFile::open("/proc/meminfo").ok();
        Ok(Sampler {
            stat,
            softirqs,
            netdev,
            diskstats,
            meminfo,
            layout: Layout {
                cpus,
                softirqs: kinds,
                nics,
                disks,
            },
        })
    }

    /// What the rows mean.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Reads every file into `row` (of the layout's width). A figure whose
    /// line is missing this time (an offline CPU, an interface gone) keeps
    /// the value `row` held, so the caller passes the previous sample.
    pub fn sample(&mut self, row: &mut [u64]) -> io::Result<()> {
        let lay = &self.layout;
        debug_assert_eq!(row.len(), lay.width());
        for l in lines(self.stat.read()?) {
            let mut w = words(l);
            let Some(key) = w.next() else { continue };
            if let Some(cpu) = cpu_index(key) {
                if cpu < lay.cpus {
                    for (mode, v) in w.take(CPU_MODES.len()).enumerate() {
                        row[lay.cpu(cpu, mode)] = num(v);
                    }
                }
                continue;
            }
            let field = match key {
                b"ctxt" => 0,
                b"intr" => 1,
                b"procs_running" => 2,
                b"procs_blocked" => 3,
                _ => continue,
            };
            if let Some(v) = w.next() {
                row[lay.system(field)] = num(v);
            }
        }
        if let Some(f) = self.softirqs.as_mut() {
            let mut kind = 0;
            for (n, l) in lines(f.read()?).enumerate() {
                if n == 0 || kind >= lay.softirqs.len() {
                    continue;
                }
                for (cpu, v) in words(l).skip(1).take(lay.cpus).enumerate() {
                    row[lay.softirq(kind, cpu)] = num(v);
                }
                kind += 1;
            }
        }
        if let Some(f) = self.netdev.as_mut() {
            for l in lines(f.read()?) {
                let Some((name, rest)) = netdev_line(l) else {
                    continue;
                };
                let Some(nic) = lay.nics.iter().position(|n| n.as_bytes() == name) else {
                    continue;
                };
                let mut field = 0;
                for (pos, v) in words(rest).enumerate() {
                    if field < NIC_POSITIONS.len() && NIC_POSITIONS[field] == pos {
                        row[lay.nic(nic, field)] = num(v);
                        field += 1;
                    }
                }
            }
        }
        if let Some(f) = self.diskstats.as_mut() {
            for l in lines(f.read()?) {
                let Some((name, rest)) = diskstats_line(l) else {
                    continue;
                };
                let Some(disk) = lay.disks.iter().position(|d| d.as_bytes() == name) else {
                    continue;
                };
                let mut field = 0;
                for (pos, v) in rest.enumerate() {
                    if field < DISK_POSITIONS.len() && DISK_POSITIONS[field] == pos {
                        let n = num(v);
                        row[lay.disk(disk, field)] = if SECTOR_FIELDS[field] { n * 512 } else { n };
                        field += 1;
                    }
                }
            }
        }
        if let Some(f) = self.meminfo.as_mut() {
            for l in lines(f.read()?) {
                let mut w = words(l);
                let Some(key) = w.next() else { continue };
                if let Some(i) = MEMORY_FIELDS.iter().position(|(_, k)| k.as_bytes() == key) {
                    row[lay.memory(i)] = w.next().map(num).unwrap_or(0);
                }
            }
        }
        Ok(())
    }
}

/// The whole block devices of `/sys/block` whose size is not zero (an
/// unbound loop device has none and is left out).
fn whole_disks() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir("/sys/block")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    std::fs::read_to_string(format!("/sys/block/{n}/size"))
                        .map(|s| s.trim() != "0")
                        .unwrap_or(false)
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_reads_this_machine() {
        let mut s = Sampler::new().unwrap();
        let lay = s.layout().clone();
        assert!(lay.cpus >= 1);
        assert!(lay.nics.iter().any(|n| n == "lo"), "{:?}", lay.nics);
        assert!(lay.softirqs.iter().any(|k| k == "NET_RX"));
        let mut row = vec![0; lay.width()];
        s.sample(&mut row).unwrap();
        let ticks: u64 = (0..CPU_MODES.len()).map(|m| row[lay.cpu(0, m)]).sum();
        assert!(ticks > 0);
        assert!(row[lay.system(0)] > 0, "context switches");
        assert!(row[lay.memory(0)] > 0, "free memory");
        assert!(row[lay.system(2)] >= 1, "this thread runs");
        assert!(lay.is_gauge(lay.memory(3)));
        assert!(lay.is_gauge(lay.system(2)));
        assert!(!lay.is_gauge(lay.system(0)));
        assert!(!lay.is_gauge(lay.cpu(0, 0)));
    }
}
