//! Background load (seed 002 ran `make clean; make -j11` in an endless
//! loop on both systems). Either the built-in load that behaves like a
//! parallel build — N workers alternating compile-like CPU bursts,
//! fork/exec of short processes, small-file writes and reads, and memory
//! churn — or a user command run in a loop by each worker.
//!
//! Seed 002 restarted its load "at various standardized spots" so that
//! equivalent points saw an equivalent phase of the build; benchlab
//! restarts it at the start of every point, and the built-in workers
//! follow the same pseudo-random phase sequence after each restart.
//!
//! Each worker is a process group of its own with a parent-death signal,
//! journaled, and killed as a group at the end of the point.

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use benchlab_core::envspec::{LoadKind, LoadSpec};

use crate::journal::{Change, Journal};
use crate::sys;
use crate::EnvError;

/// The hidden subcommand that runs one built-in worker.
pub const WORKER_SUBCOMMAND: &str = "__load-worker";

/// A running load.
pub struct Load {
    workers: Vec<Child>,
    started: Instant,
}

/// Starts the load's workers (the scratch directory `dir` exists and is
/// journaled by the caller).
pub fn start(spec: &LoadSpec, dir: &str, journal: &mut Journal) -> Result<Load, EnvError> {
    let exe = std::env::current_exe().map_err(|e| EnvError::io("find benchlab's own binary", e))?;
    let mut workers = Vec::with_capacity(spec.workers);
    for i in 0..spec.workers {
        let mut cmd = match &spec.kind {
            LoadKind::Build => {
                let mut c = Command::new(&exe);
                c.arg(WORKER_SUBCOMMAND).arg(i.to_string()).arg(dir);
                c
            }
            LoadKind::Command(text) => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(format!("while :; do {text}\ndone"));
                c
            }
        };
        cmd.current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let cpus = spec.cpus.clone();
        let agent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Dies with the agent that started it, even on SIGKILL.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // An agent killed before the line above ran (after the
                // fork) never sends that signal, and has not journaled
                // this worker either: it must not start at all (found by
                // tests/it/faults.rs, a worker outliving its killed agent).
                if libc::getppid() != agent {
                    libc::_exit(1);
                }
                if let Some(cpus) = &cpus {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    for &c in cpus {
                        if c < libc::CPU_SETSIZE as usize {
                            libc::CPU_SET(c, &mut set);
                        }
                    }
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| EnvError::io("start a background-load worker", e))?;
        let pid = child.id() as i32;
        let record = journal.record(
            &format!("background-load worker {i}"),
            Change::ProcessGroup {
                pgid: pid,
                start_ticks: sys::start_ticks(pid).unwrap_or(0),
            },
        );
        workers.push(child);
        if let Err(e) = record {
            let mut l = Load {
                workers,
                started: Instant::now(),
            };
            l.stop();
            return Err(e);
        }
    }
    Ok(Load {
        workers,
        started: Instant::now(),
    })
}

/// CPU time (s) of every process in a group, including its waited-for
/// children (fields 14–17 of /proc/PID/stat).
fn group_cpu_s(pgid: i32) -> f64 {
    // SAFETY: sysconf has no side effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut ticks = 0u64;
    for pid in sys::all_pids() {
        if sys::pgrp(pid) != Some(pgid) {
            continue;
        }
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let f: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        // Fields after the name start at field 3; utime is field 14.
        for i in 11..15 {
            ticks += f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    ticks as f64 / hz
}

impl Load {
    /// Stops every worker (and whatever it started) and says how much CPU
    /// the load used since it started.
    pub fn stop(&mut self) -> crate::LoadUsage {
        let elapsed_s = self.started.elapsed().as_secs_f64();
        let mut cpu_s = 0.0;
        for w in &self.workers {
            let pgid = w.id() as i32;
            cpu_s += group_cpu_s(pgid);
            // SAFETY: kill(2) on the group we created.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
        for w in &mut self.workers {
            let _ = w.wait();
        }
        // Grandchildren of a killed group (a make's compilers) were killed
        // with it; anything re-parented and still alive in a group is
        // killed again here.
        for w in &self.workers {
            let _ = sys::kill_group(w.id() as i32, 0);
        }
        let n = self.workers.len();
        self.workers.clear();
        crate::LoadUsage {
            workers: n as u32,
            cpu_s,
            elapsed_s,
            util_pct: if elapsed_s > 0.0 {
                100.0 * cpu_s / elapsed_s
            } else {
                f64::NAN
            },
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        if !self.workers.is_empty() {
            self.stop();
        }
    }
}

/// A small deterministic generator (xorshift64*), so that every restart of
/// a worker goes through the same phases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// Body of a built-in worker: never returns (it is killed).
pub fn worker_main(index: u64, dir: &str) -> ! {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (index + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut buf = vec![0u8; 256 * 1024];
    let mut sink = 0u64;
    let mut round = 0u64;
    loop {
        round += 1;
        match rng.range(0, 9) {
            // Compiling: most of a build's time is CPU-bound work over a
            // working set that fits in cache.
            0..=4 => {
                let passes = rng.range(20, 200);
                for p in 0..passes {
                    for (i, b) in buf.iter_mut().enumerate() {
                        *b = b.wrapping_mul(31).wrapping_add((i as u64 ^ p) as u8);
                    }
                    sink = sink.wrapping_add(buf[(p as usize * 4099) % buf.len()] as u64);
                }
            }
            // The driver starting the compiler, assembler and linker.
            5 | 6 => {
                for _ in 0..rng.range(1, 6) {
                    let _ = Command::new("true")
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status();
                }
            }
            // Writing objects and reading sources.
            7 | 8 => {
                let n = rng.range(4, 24);
                for f in 0..n {
                    let len = rng.range(4, 64) as usize * 1024;
                    let path = format!("{dir}/w{index}-{f}.o");
                    if fs::write(&path, &buf[..len.min(buf.len())]).is_ok() {
                        if let Ok(back) = fs::read(&path) {
                            sink = sink.wrapping_add(back.len() as u64);
                        }
                    }
                }
                for f in 0..n {
                    let _ = fs::remove_file(format!("{dir}/w{index}-{f}.o"));
                }
            }
            // Memory churn: a big translation unit's peak, then freed.
            _ => {
                let mib = rng.range(8, 64) as usize;
                let mut v = vec![0u8; mib << 20];
                for i in (0..v.len()).step_by(4096) {
                    v[i] = (i as u64 ^ round) as u8;
                }
                sink = sink.wrapping_add(v[v.len() / 2] as u64);
            }
        }
        // Keeps the work from being optimized away.
        std::hint::black_box(sink);
    }
}
