//! The practical out-of-cache form: the cell's I/O runs while the agent
//! process sits in a memory cgroup with a small limit. Page cache is
//! charged to the memory cgroup of the process that brings it in, so a
//! file several times the limit cannot stay cached, without a file larger
//! than RAM.
//!
//! Why the whole process moves, not a thread or a child: cgroup v1
//! charges memory per address space (the `mm`'s owner), not per thread,
//! and writing to `cgroup.procs` moves every thread of the agent at once.
//! The agent runs one side at a time, so nothing else of it is charged
//! meanwhile; it moves back to where it was before the cgroup is removed.
//! Charges made inside stay with the removed group's parent (v1
//! reparents them), which is harmless: they are reclaimable page cache.
//!
//! cgroup v1 (`memory.limit_in_bytes`, this host) and v2 (`memory.max`)
//! are both handled; v2 is untested here (it also needs the memory
//! controller delegated to the agent's cgroup).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use benchlab_core::WorkloadError;

/// Where the v1 memory controller is mounted on Debian and most systems.
const V1_ROOT: &str = "/sys/fs/cgroup/memory";
/// The v2 unified hierarchy.
const V2_ROOT: &str = "/sys/fs/cgroup";
/// The prefix of benchlab's cgroups, so leftovers are recognizable.
pub const CGROUP_PREFIX: &str = "benchlab-fs.";

/// Which cgroup interface limited the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// cgroup v1 memory controller (`memory.limit_in_bytes`).
    V1,
    /// cgroup v2 (`memory.max`).
    V2,
}

/// A memory cgroup benchlab created; removed on drop (after moving the
/// process back if it is inside).
pub struct MemCgroup {
    dir: PathBuf,
    home: PathBuf,
    version: Version,
    limit: u64,
    entered: bool,
}

fn write(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}

/// The directory of this process's own memory cgroup.
fn own_cgroup() -> Option<(Version, PathBuf)> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    if Path::new(V1_ROOT).join("memory.limit_in_bytes").exists() {
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, ctrl, path) = (parts.next()?, parts.next()?, parts.next()?);
            if ctrl.split(',').any(|c| c == "memory") {
                return Some((
                    Version::V1,
                    Path::new(V1_ROOT).join(path.trim_start_matches('/')),
                ));
            }
        }
    }
    let controllers =
        std::fs::read_to_string(Path::new(V2_ROOT).join("cgroup.controllers")).ok()?;
    if !controllers.split_whitespace().any(|c| c == "memory") {
        return None;
    }
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some((
        Version::V2,
        Path::new(V2_ROOT).join(path.trim_start_matches('/')),
    ))
}

impl MemCgroup {
    /// Creates a cgroup with this memory limit under the process's own
    /// memory cgroup. A host without a usable memory controller gives
    /// [`WorkloadError::Unsupported`].
    pub fn create(limit: u64) -> Result<MemCgroup, WorkloadError> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let (version, home) = own_cgroup().ok_or_else(|| {
            WorkloadError::Unsupported(
                "out-of-cache (cgroup form) needs the memory cgroup controller (v1 at /sys/fs/cgroup/memory or v2 with memory enabled); use out_of_cache = \"big-file\"".into(),
            )
        })?;
        sweep_leftovers(&home);
        let name = format!(
            "{CGROUP_PREFIX}{}.{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let dir = home.join(&name);
        std::fs::create_dir(&dir).map_err(|e| {
            WorkloadError::Unsupported(format!(
                "cannot create the memory cgroup {} (root needed): {e}",
                dir.display()
            ))
        })?;
        let cg = MemCgroup {
            dir,
            home,
            version,
            limit,
            entered: false,
        };
        let file = match version {
            Version::V1 => "memory.limit_in_bytes",
            Version::V2 => "memory.max",
        };
        write(&cg.dir.join(file), &limit.to_string()).map_err(|e| {
            WorkloadError::Unsupported(format!("cannot set {} of {}: {e}", file, cg.dir.display()))
        })?;
        if version == Version::V1 {
            // Swap must not stand in for the limit (no effect without swap).
            let _ = write(
                &cg.dir.join("memory.memsw.limit_in_bytes"),
                &limit.to_string(),
            );
        }
        Ok(cg)
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// v1 or v2.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The limit in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Moves this whole process (all threads) into the cgroup.
    pub fn enter(&mut self) -> Result<(), WorkloadError> {
        write(
            &self.dir.join("cgroup.procs"),
            &std::process::id().to_string(),
        )
        .map_err(|e| {
            WorkloadError::Unsupported(format!(
                "cannot move the I/O process into {}: {e}",
                self.dir.display()
            ))
        })?;
        self.entered = true;
        Ok(())
    }

    /// Moves the process back to its own cgroup.
    pub fn leave(&mut self) {
        if self.entered {
            let _ = write(
                &self.home.join("cgroup.procs"),
                &std::process::id().to_string(),
            );
            self.entered = false;
        }
    }

    /// The highest memory use the cgroup saw (page cache included), bytes.
    pub fn peak_bytes(&self) -> Option<u64> {
        let file = match self.version {
            Version::V1 => "memory.max_usage_in_bytes",
            Version::V2 => "memory.peak",
        };
        std::fs::read_to_string(self.dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The page cache charged to the cgroup now, bytes (v1 `cache`, v2
    /// `file` of memory.stat).
    pub fn file_bytes(&self) -> Option<u64> {
        let key = match self.version {
            Version::V1 => "cache",
            Version::V2 => "file",
        };
        let text = std::fs::read_to_string(self.dir.join("memory.stat")).ok()?;
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        })
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        self.leave();
        // rmdir can fail with EBUSY for a moment after the last task left.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Removes benchlab cgroups left by agents that were killed inside them
/// (their process is gone, so the group is empty and can go).
fn sweep_leftovers(home: &Path) {
    let Ok(entries) = std::fs::read_dir(home) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_prefix(CGROUP_PREFIX) else {
            continue;
        };
        let pid = rest.split('.').next().unwrap_or("");
        if !pid.is_empty() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}
