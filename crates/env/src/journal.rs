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
//!
//! Several runs may share a host and its journal directory (two users, or
//! a lab's agent and a local run). A journal's writer holds an exclusive
//! `flock` on it for as long as it is open, and the kernel releases that
//! lock when the writer's process ends, however it ends. So a journal
//! whose lock is held belongs to a run in progress ([`live`]): restore
//! leaves it alone and a preflight names it; one whose lock is free was
//! left by a run that is over ([`pending`]). A process id would not do: a
//! killed agent stays in /proc as a zombie until it is reaped, and a pid
//! is reused. A forked child holds its parent's locks until it execs or
//! exits, so a run that has just died may hold one a moment longer:
//! [`settle`] gives such runs [`DYING_GRACE`] to let go.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    /// Pages benchlab added to a kernel pool that several runs share
    /// (`vm.nr_hugepages`): undone by taking this many off the pool as it
    /// is then, under the pool's lock ([`crate::pool`]), never by writing
    /// back a size read earlier (another run may have added pages since).
    PoolPages {
        /// The pool's file.
        path: String,
        /// The pages added (negative: taken back, by a later entry that
        /// cancels part of an earlier one).
        pages: i64,
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
        let mut attempt = 0;
        let (path, file) = loop {
            let stem = format!("{}-{}-{}", now_ns(), std::process::id(), name);
            let path = dir.join(format!("{stem}.jsonl"));
            // Made under a name that restore does not read, locked, and
            // only then given its name: a journal is never seen unlocked
            // while its run lives (a restore beside it would take it for a
            // crash's).
            let new = dir.join(format!(".{stem}.new"));
            let file = OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(&new)
                .map_err(|e| EnvError::io(format!("create journal {}", new.display()), e))?;
            file.lock()
                .map_err(|e| EnvError::io(format!("lock journal {}", new.display()), e))?;
            match fs::rename(&new, &path) {
                Ok(()) => break (path, file),
                // A restore swept it as a dead writer's between its
                // creation and its lock ([`sweep_unnamed`]): make another.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempt < 3 => {
                    attempt += 1;
                }
                Err(e) => {
                    return Err(EnvError::io(
                        format!("create journal {}", path.display()),
                        e,
                    ));
                }
            }
        };
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

    /// Removes the journal after everything in it was undone. The lock
    /// goes with the file (the file is removed first, so that nobody sees
    /// it unlocked).
    pub fn finish(self) -> Result<(), EnvError> {
        fs::remove_file(&self.path)
            .map_err(|e| EnvError::io(format!("remove journal {}", self.path.display()), e))?;
        let dir = self.path.parent().map(Path::to_path_buf);
        drop(self);
        if let Some(dir) = dir {
            fsync_dir(&dir);
        }
        Ok(())
    }
}

impl Drop for Journal {
    /// A journal dropped unfinished (an error unwinding a run) is left for
    /// restore at once: closing alone would keep it locked while a child
    /// this process forked meanwhile still holds a copy of the descriptor.
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// A journal taken for restoring ([`claim`]); let go when dropped.
pub struct Claim(File);

impl Drop for Claim {
    /// Explicitly, for the reason [`Journal`]'s drop gives.
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// How long a run that has just died may still hold its journals' locks
/// (its forked children exiting, its agents noticing their controller is
/// gone): [`settle`] waits that long before calling a journal live.
pub const DYING_GRACE: Duration = Duration::from_secs(3);

/// The journal files in `dir` left by runs that are over (crashed,
/// killed), oldest first: what `benchlab restore` undoes and what makes a
/// preflight refuse. Journals of runs in progress are left out ([`live`]).
pub fn pending(dir: &Path) -> Vec<PathBuf> {
    all(dir).into_iter().filter(|p| !held(p)).collect()
}

/// The journal files in `dir` whose run is in progress (its lock held):
/// its changes are its own to undo.
pub fn live(dir: &Path) -> Vec<PathBuf> {
    all(dir).into_iter().filter(|p| held(p)).collect()
}

/// Waits up to `grace` for the journals of `dir` that are locked to be
/// let go (a run that has just died), and returns those still locked
/// then: the runs in progress.
pub fn settle(dir: &Path, grace: Duration) -> Vec<PathBuf> {
    let until = Instant::now() + grace;
    loop {
        let live = live(dir);
        if live.is_empty() || Instant::now() >= until {
            return live;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Takes a journal's lock for restoring it: `None` when its run holds it
/// (or the file is gone). The lock is held until the file is dropped, so
/// two restores do not undo one journal twice.
pub fn claim(path: &Path) -> Option<Claim> {
    let f = File::open(path).ok()?;
    f.try_lock().ok()?;
    let claimed = Claim(f);
    // Removed (restored by another) between the listing and the lock?
    path.exists().then_some(claimed)
}

/// Whether a journal's writer holds its lock. Any error but "held" (the
/// file removed meanwhile, a file system without locks) counts as not
/// held, as before locks existed.
fn held(path: &Path) -> bool {
    let Ok(f) = File::open(path) else {
        return false;
    };
    match f.try_lock_shared() {
        Ok(()) => {
            // Let go explicitly: closing alone keeps the lock while a
            // child this process forks meanwhile holds a copy of the
            // descriptor, and a restore would then find the journal
            // locked and skip it.
            let _ = f.unlock();
            false
        }
        Err(fs::TryLockError::WouldBlock) => true,
        Err(_) => false,
    }
}

/// Takes a journal that was just listed as [`pending`]: tries for up to
/// `grace`, since a process forking at that moment may hold a copy of
/// another reader's descriptor (and so its lock) until it execs. `None`
/// when the journal is gone (restored by another) or stays locked.
pub fn claim_pending(path: &Path, grace: Duration) -> Option<Claim> {
    let until = Instant::now() + grace;
    loop {
        if let Some(f) = claim(path) {
            return Some(f);
        }
        if !path.exists() || Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Removes the journals of `dir` that were never given their name: the
/// writer died between creating one (under a hidden `.NAME.new`) and
/// renaming it. Such a file is empty (entries are written only after
/// the rename), so nothing is lost; one whose writer still lives (its
/// lock held) is left alone.
pub fn sweep_unnamed(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir) else {
        return;
    };
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with('.') && name.ends_with(".new")) {
            continue;
        }
        let path = e.path();
        let Ok(f) = File::open(&path) else {
            continue;
        };
        let empty = f.metadata().is_ok_and(|m| m.is_file() && m.len() == 0);
        if empty && f.try_lock().is_ok() {
            let _ = fs::remove_file(&path);
        }
    }
}

fn all(dir: &Path) -> Vec<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Looking at a journal leaves no lock behind, even when another
    /// thread forks at that moment (the child holds a copy of the
    /// descriptor until it execs): a restore can claim it right after.
    #[test]
    fn looking_at_a_journal_leaves_no_lock_in_a_forked_child() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("1-1-dead.jsonl");
        fs::write(&j, "").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spawner = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = Command::new("true").status();
                }
            })
        };
        let mut refused = 0;
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            assert!(!held(&j));
            if claim(&j).is_none() {
                refused += 1;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spawner.join().unwrap();
        assert_eq!(refused, 0, "claims refused after a look");
    }

    /// A writer killed between creating its journal and naming it leaves
    /// an empty hidden file: swept; one whose writer lives is kept.
    #[test]
    fn unnamed_journals_of_dead_writers_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dir.path().join(".1-1-a.new");
        let alive = dir.path().join(".2-2-b.new");
        let other = dir.path().join(".hidden");
        fs::write(&dead, "").unwrap();
        fs::write(&alive, "").unwrap();
        fs::write(&other, "").unwrap();
        let holder = File::open(&alive).unwrap();
        holder.lock().unwrap();
        sweep_unnamed(dir.path());
        assert!(!dead.exists());
        assert!(alive.exists());
        assert!(other.exists());
        holder.unlock().unwrap();
        sweep_unnamed(dir.path());
        assert!(!alive.exists());
    }

    /// The state letter of a process (`R`, `S`, `Z` …) from /proc.
    fn state(pid: u32) -> char {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit(')')
            .next()
            .and_then(|r| r.trim_start().chars().next())
            .unwrap_or('?')
    }

    /// A journal is a live run's while its writer holds it, whoever the
    /// writer is, and left by a run that is over once the writer is gone —
    /// a zombie included (the previous test by pid counted one as alive,
    /// and the next run started over unrestored settings).
    #[test]
    fn a_journal_is_live_while_its_lock_is_held_and_pending_after() {
        let dir = tempfile::tempdir().unwrap();
        // Our own open journal is a run in progress.
        let mine = Journal::create(dir.path(), "host-a", None).unwrap();
        assert_eq!(live(dir.path()), [mine.path().to_path_buf()]);
        assert!(pending(dir.path()).is_empty());
        assert!(
            claim(mine.path()).is_none(),
            "a live journal is not restored"
        );
        // Dropped unfinished (a crash): left for restore.
        let path = mine.path().to_path_buf();
        drop(mine);
        assert_eq!(pending(dir.path()), std::slice::from_ref(&path));
        fs::remove_file(&path).unwrap();

        // Another process holds one: flock(1) takes the same lock (`-o`:
        // in itself only, not in the command it runs).
        let theirs = dir.path().join("1-1-host-b.jsonl");
        fs::write(&theirs, "").unwrap();
        let mut holder = Command::new("flock")
            .arg("-o")
            .arg(&theirs)
            .args(["sleep", "30"])
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while live(dir.path()).is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(live(dir.path()), std::slice::from_ref(&theirs));
        assert!(pending(dir.path()).is_empty());
        holder.kill().unwrap();
        // Not waited for yet: a zombie, whose lock the kernel released.
        let until = Instant::now() + Duration::from_secs(10);
        while state(holder.id()) != 'Z' && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(state(holder.id()), 'Z');
        assert_eq!(pending(dir.path()), std::slice::from_ref(&theirs));
        assert!(live(dir.path()).is_empty());
        holder.wait().unwrap();

        // A restore claims it: a second restore, or a probe, keeps off.
        let claimed = claim(&theirs).expect("free to claim");
        assert!(claim(&theirs).is_none());
        assert_eq!(live(dir.path()), std::slice::from_ref(&theirs));
        drop(claimed);
        // settle returns at once when nothing is held.
        let t = Instant::now();
        assert!(settle(dir.path(), DYING_GRACE).is_empty());
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    /// A run that has just died may hold its lock a moment longer (a
    /// forked child not yet gone): settle waits for it to let go.
    #[test]
    fn settle_waits_for_a_dying_run() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("1-1-dying.jsonl");
        fs::write(&j, "").unwrap();
        let mut holder = Command::new("flock")
            .arg("-o")
            .arg(&j)
            .args(["sleep", "0.7"])
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while live(dir.path()).is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!live(dir.path()).is_empty());
        assert!(settle(dir.path(), DYING_GRACE).is_empty());
        assert_eq!(pending(dir.path()), [j]);
        holder.wait().unwrap();
    }
}
