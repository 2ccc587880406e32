//! System monitors: what a host did while a repetition ran. A sampler
//! thread reads /proc once per interval — CPU time by mode per CPU,
//! context switches, interrupts, run queue, softirqs by kind and CPU,
//! every interface's counters, every block device's I/O, memory — into
//! rows of numbers ([`Series`]), kept compact (column-wise differences,
//! variable-length integers) for the store, and summarised per
//! repetition ([`Summary`]) for the report.
//!
//! The sampler must not disturb what is measured: it is pinned to a
//! housekeeping CPU when the configuration pins its sides (the caller
//! chooses it, [`housekeeping_cpu`]), reads each file with one `pread`
//! per call into buffers sized at warm-up, and allocates nothing per
//! sample while the rows reserved from the expected duration last.

mod procfs;
mod sampler;
mod series;
mod summary;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use sampler::{
    Layout, Sampler, CPU_MODES, DISK_FIELDS, MEMORY_FIELDS, NIC_FIELDS, SYSTEM_FIELDS,
};
pub use series::Series;
pub use summary::{CpuShare, DiskSummary, MemorySummary, NicSummary, Summary};

/// Default sampling interval: per second, as sar and mmtests' monitors.
pub const DEFAULT_INTERVAL_MS: u32 = 1000;
/// The shortest interval a study may ask for.
pub const MIN_INTERVAL_MS: u32 = 100;
/// The longest.
pub const MAX_INTERVAL_MS: u32 = 60_000;

/// How a repetition's monitor samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Time between samples.
    pub interval_ms: u32,
    /// The CPU the sampler thread runs on (`None`: wherever the scheduler
    /// puts it, when the configuration pins nothing or leaves no CPU free).
    pub cpu: Option<usize>,
    /// How long the repetition is expected to run, to reserve its rows.
    pub expected_s: f64,
}

/// A running monitor; [`Monitor::stop`] ends it and returns its samples.
pub struct Monitor {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<io::Result<Series>>,
}

impl Monitor {
    /// Starts the sampler thread and returns once its first sample is
    /// taken (so that the repetition starts inside the window).
    pub fn start(settings: &Settings) -> io::Result<Monitor> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::sync_channel::<io::Result<()>>(1);
        let s = settings.clone();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("benchlab-monitor".into())
            .spawn(move || run(&s, &flag, ready_tx))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Monitor { stop, thread }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(match thread.join() {
                Ok(Err(e)) => e,
                _ => io::Error::other("the monitor thread ended before its first sample"),
            }),
        }
    }

    /// Takes a last sample (the window ends now) and returns the series.
    pub fn stop(self) -> io::Result<Series> {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        self.thread
            .join()
            .map_err(|_| io::Error::other("the monitor thread panicked"))?
    }
}

/// Pins the calling thread to one CPU.
fn pin(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::other(format!("CPU {cpu} is out of range")));
    }
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays within it
    // (checked above); sched_setaffinity(0) applies to this thread.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(io::Error::other(format!(
            "cannot pin the monitor to CPU {cpu}: {}",
            io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// The sampler thread: warm-up (files, layout, reserved rows), then one
/// row per interval until told to stop, and a last row then.
fn run(
    s: &Settings,
    stop: &AtomicBool,
    ready: mpsc::SyncSender<io::Result<()>>,
) -> io::Result<Series> {
    let warm = (|| {
        if let Some(cpu) = s.cpu {
            pin(cpu)?;
        }
        Sampler::new()
    })();
    let mut sampler = match warm {
        Ok(x) => x,
        Err(e) => {
            let _ = ready.send(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(e);
        }
    };
    let width = sampler.layout().width();
    let interval = Duration::from_millis(u64::from(s.interval_ms.max(1)));
    // Rows for the expected duration and half as much again, plus a few
    // for the set-up and collection around it.
    let rows =
        (s.expected_s.max(0.0) * 1.5 * 1000.0 / f64::from(s.interval_ms.max(1))) as usize + 16;
    let mut values: Vec<u64> = Vec::with_capacity(rows * width);
    let mut t_ms: Vec<u64> = Vec::with_capacity(rows);
    let start_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let start = Instant::now();
    values.resize(width, 0);
    if let Err(e) = sampler.sample(&mut values[..width]) {
        let _ = ready.send(Err(io::Error::new(e.kind(), e.to_string())));
        return Err(e);
    }
    t_ms.push(0);
    let _ = ready.send(Ok(()));
    let mut next = start + interval;
    loop {
        let now = Instant::now();
        let stopping = stop.load(Ordering::Acquire);
        if !stopping && now < next {
            std::thread::park_timeout(next - now);
            continue;
        }
        // The previous row is the starting point of this one: a line
        // missing this time keeps its last value.
        let at = values.len();
        values.extend_from_within(at - width..at);
        sampler.sample(&mut values[at..])?;
        t_ms.push(start.elapsed().as_millis() as u64);
        if stopping {
            break;
        }
        next += interval;
        // Behind by more than an interval (the host was starved): skip
        // the missed ticks instead of sampling back to back.
        if next < Instant::now() {
            next = Instant::now() + interval;
        }
    }
    Ok(Series {
        start_unix_ms,
        interval_ms: s.interval_ms,
        pinned_cpu: s.cpu,
        layout: sampler.layout().clone(),
        t_ms,
        values,
    })
}

/// The CPU a monitor should run on: the lowest online CPU that none of
/// `measured` uses (the sides' pinned CPUs, a shield), so that sampling
/// never takes time from the measured CPUs. `None` when nothing is
/// pinned (the scheduler's choice disturbs no placement) or when every
/// CPU is measured (then no CPU is better than another).
pub fn housekeeping_cpu(measured: &[usize], online: usize) -> Option<usize> {
    if measured.is_empty() {
        return None;
    }
    (0..online).find(|c| !measured.contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_monitor_samples_until_stopped() {
        let m = Monitor::start(&Settings {
            interval_ms: 100,
            cpu: Some(0),
            expected_s: 0.3,
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(350));
        let s = m.stop().unwrap();
        // The first row, three or four ticks and the last row.
        assert!((4..=6).contains(&s.rows()), "{} rows", s.rows());
        assert_eq!(s.values.len(), s.rows() * s.layout.width());
        assert!(s.t_ms.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(s.pinned_cpu, Some(0));
    }

    #[test]
    fn housekeeping_avoids_the_measured_cpus() {
        assert_eq!(housekeeping_cpu(&[], 4), None);
        assert_eq!(housekeeping_cpu(&[0, 1], 4), Some(2));
        assert_eq!(housekeeping_cpu(&[1], 2), Some(0));
        assert_eq!(housekeeping_cpu(&[0, 1], 2), None);
    }
}
