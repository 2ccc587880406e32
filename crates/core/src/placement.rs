//! Where and how a side runs: CPU list and nice value, applied to the
//! calling thread (each side runs on a thread of its own in its agent).

use serde::{Deserialize, Serialize};

/// Placement of one side of a workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// CPUs the side may run on; `None` leaves the affinity alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Vec<usize>>,
    /// Nice value (−20 … 19); `None` leaves it alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
}

/// Parses a CPU list such as `"0"`, `"0,2"` or `"0-3,8"`.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("`{text}` is not a CPU list (examples: \"0\", \"0,2\", \"0-3,8\")");
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| bad())?;
                let b: usize = b.trim().parse().map_err(|_| bad())?;
                if a > b {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
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
    /// Human form: `cpus 0-1, nice -5`, or `default`.
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
        if parts.is_empty() {
            "default".into()
        } else {
            parts.join(", ")
        }
    }

    /// Applies the placement to the calling thread.
    pub fn apply_to_current_thread(&self) -> Result<(), String> {
        if let Some(cpus) = &self.cpus {
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
        }
        if let Some(nice) = self.nice {
            // On Linux, PRIO_PROCESS with a thread id sets that thread's nice.
            // SAFETY: plain syscalls without pointers.
            let rc = unsafe {
                let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                libc::setpriority(libc::PRIO_PROCESS, tid, nice)
            };
            if rc != 0 {
                return Err(format!(
                    "cannot set nice {nice}: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        Ok(())
    }
}

/// The CPUs this process may run on now.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8"), Ok(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpu_list("1, 0"), Ok(vec![0, 1]));
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("").is_err());
    }

    #[test]
    fn pin_to_cpu0() {
        let p = Placement {
            cpus: Some(vec![0]),
            nice: Some(1),
        };
        std::thread::spawn(move || p.apply_to_current_thread())
            .join()
            .unwrap()
            .unwrap();
    }
}
