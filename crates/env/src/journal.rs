//! The restore journal: every original value is written to disk, and
//! fsync'd, *before* benchlab changes it, so that whatever happens next —
//! an error, Ctrl-C, SIGKILL, a power cut — `benchlab restore` can put the
//! machine back.
//!
//! A journal is a JSON-lines file in the journal directory, one per
//! session (a host's configuration). Entries are only ever appended; an
//! entry for a change that never happened (the process died between
//! writing the entry and making the change) restores a value that is
//! already there, which is harmless, so every restore action is
//! idempotent. Restoring walks all entries of all files newest first, then
//! removes the files — the only files benchlab deletes here are its own
//! journals.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::EnvError;

/// Where journals live: `$BENCHLAB_STATE_DIR/journal`, or
/// `/var/lib/benchlab/journal` (on disk, not /run: a crash journal must
/// outlive the process that wrote it, and its restore is harmless after a
/// reboot).
pub fn journal_dir() -> PathBuf {
    match std::env::var_os("BENCHLAB_STATE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("journal"),
        _ => PathBuf::from("/var/lib/benchlab/journal"),
    }
}

/// One change benchlab made, with what it takes to undo it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A value in a file of /proc or /sys (sysctl, governor, IRQ affinity,
    /// I/O scheduler, transparent hugepages …).
    File {
        /// The file.
        path: String,
        /// Its content before (trimmed; bracketed choice already picked).
        before: String,
    },
    /// A systemd service benchlab stopped.
    Service {
        /// The unit.
        name: String,
    },
    /// The tuned profile that was active before benchlab switched it
    /// (`None`: tuned was off).
    Tuned {
        /// The previous profile.
        before: Option<String>,
    },
    /// A file system benchlab remounted with other options.
    Remount {
        /// The mount point.
        target: String,
        /// Options that put it back.
        restore_options: String,
    },
    /// A cgroup directory benchlab created.
    CgroupDir {
        /// The directory.
        path: String,
        /// Where its tasks go back to before it is removed (a `tasks` or
        /// `cgroup.procs` file).
        parent_tasks: String,
    },
    /// Tasks benchlab moved from one cgroup to another.
    TasksMoved {
        /// The `tasks` file of the cgroup they came from.
        back_to: String,
        /// Their ids.
        tids: Vec<i32>,
    },
    /// A scratch directory benchlab created (the background load's files).
    ScratchDir {
        /// The directory; removed with everything in it.
        path: String,
    },
    /// A process group benchlab started (a background-load worker).
    ProcessGroup {
        /// The group id (= the leader's pid).
        pgid: i32,
        /// The leader's start time in clock ticks since boot
        /// (/proc/PID/stat field 22), so that a recycled id is not killed.
        start_ticks: u64,
    },
}

/// A journal entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Position in its journal.
    pub seq: u64,
    /// When it was written (ns since the Unix epoch): orders entries of
    /// several journals for restore.
    pub at_ns: u128,
    /// The study's name of the host.
    pub host: String,
    /// The network namespace the change was made in, when not the
    /// initial one (`net.*` sysctls are per namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// The writer's network namespace (`net:[4026531833]`, from
    /// /proc/self/ns/net), so that `net.*` sysctls are put back in the
    /// namespace they were changed in, whoever restores them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns_id: Option<String>,
    /// Human name of the setting (`sysctl net.core.rmem_max`).
    pub setting: String,
    /// What to undo.
    pub change: Change,
}

/// An open journal that entries are appended to.
pub struct Journal {
    path: PathBuf,
    file: File,
    seq: u64,
    host: String,
    netns: Option<String>,
    netns_id: Option<String>,
    entries: Vec<Entry>,
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn fsync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

impl Journal {
    /// Creates a new journal file in `dir` (made if missing).
    pub fn create(dir: &Path, host: &str, netns: Option<String>) -> Result<Journal, EnvError> {
        fs::create_dir_all(dir)
            .map_err(|e| EnvError::io(format!("create {}", dir.display()), e))?;
        let name: String = host
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!(
            "{}-{}-{}.jsonl",
            now_ns(),
            std::process::id(),
            name
        ));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| EnvError::io(format!("create journal {}", path.display()), e))?;
        // The directory entry must be durable too, or a crash could lose
        // the whole file.
        fsync_dir(dir);
        Ok(Journal {
            path,
            file,
            seq: 0,
            host: host.into(),
            netns,
            netns_id: own_netns_id(),
            entries: Vec::new(),
        })
    }

    /// The journal's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes an entry and waits until it is on disk. Call *before* making
    /// the change.
    pub fn record(&mut self, setting: &str, change: Change) -> Result<(), EnvError> {
        self.seq += 1;
        let entry = Entry {
            seq: self.seq,
            at_ns: now_ns(),
            host: self.host.clone(),
            netns: self.netns.clone(),
            netns_id: self.netns_id.clone(),
            setting: setting.into(),
            change,
        };
        let mut line = serde_json::to_string(&entry).expect("journal entries serialize");
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_data())
            .map_err(|e| EnvError::io(format!("write journal {}", self.path.display()), e))?;
        self.entries.push(entry);
        Ok(())
    }

    /// The entries written so far, oldest first.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Removes the journal after everything in it was undone.
    pub fn finish(self) -> Result<(), EnvError> {
        drop(self.file);
        fs::remove_file(&self.path)
            .map_err(|e| EnvError::io(format!("remove journal {}", self.path.display()), e))?;
        if let Some(dir) = self.path.parent() {
            fsync_dir(dir);
        }
        Ok(())
    }
}

/// The journal files in `dir` (ours: `*.jsonl`), oldest first.
pub fn pending(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

/// Reads every entry of a journal file. A torn last line (the process died
/// while writing it) is ignored: its change was never made.
pub fn read(path: &Path) -> Result<Vec<Entry>, EnvError> {
    let f = File::open(path).map_err(|e| EnvError::io(format!("read {}", path.display()), e))?;
    let mut entries = Vec::new();
    for line in BufReader::new(f).lines() {
        let line = line.map_err(|e| EnvError::io(format!("read {}", path.display()), e))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Entry>(&line) {
            Ok(e) => entries.push(e),
            Err(_) => break,
        }
    }
    Ok(entries)
}

/// This process's network namespace, as /proc/self/ns/net names it.
pub fn own_netns_id() -> Option<String> {
    std::fs::read_link("/proc/self/ns/net")
        .ok()
        .map(|p| p.display().to_string())
}

/// One line of what a session did, for the terminal and the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeReport {
    /// The setting.
    pub setting: String,
    /// Its value before.
    pub before: Option<String>,
    /// Its value after.
    pub after: Option<String>,
    /// What happened.
    pub status: benchlab_core::setting::ChangeStatus,
    /// Why (for skips and failures) or what else to know.
    pub note: String,
}
