//! One run at a time per controller: a run holds `run.lock` in benchlab's
//! state directory (`$BENCHLAB_STATE_DIR`, or `/var/lib/benchlab`) for as
//! long as it lives. A second `benchlab run` (or `benchlab restore`) then
//! says which run is in progress, instead of reading that run's live
//! restore journal as settings an earlier run left changed.
//!
//! The lock is the kernel's (`flock`): it goes with the process, so a run
//! that crashed holds nothing and its journal is then what `benchlab
//! restore` is for. The file's text (pid, study, start) is only what the
//! message says.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// benchlab's state directory on this host.
pub fn state_dir() -> PathBuf {
    match std::env::var_os("BENCHLAB_STATE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from("/var/lib/benchlab"),
    }
}

/// A held run lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

impl RunLock {
    /// Takes the lock for a run of `study` (its file), or says which run
    /// holds it.
    pub fn acquire(study: &str) -> Result<RunLock> {
        Self::acquire_in(&state_dir(), study)
    }

    /// [`RunLock::acquire`] in state directory `dir`.
    pub fn acquire_in(dir: &Path, study: &str) -> Result<RunLock> {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        let path = dir.join("run.lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("open {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                bail!("{}", in_progress(holder.trim()));
            }
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("lock {}", path.display()))
            }
        }
        file.set_len(0)?;
        file.rewind()?;
        writeln!(
            file,
            "pid {} study {} since {}",
            std::process::id(),
            study,
            benchlab_core::units::now_rfc3339()
        )?;
        file.sync_data()?;
        Ok(RunLock { _file: file })
    }

    /// Whether a live run holds the lock: `Some(message)` saying which.
    pub fn held() -> Option<String> {
        Self::held_in(&state_dir())
    }

    /// [`RunLock::held`] in state directory `dir`.
    pub fn held_in(dir: &Path) -> Option<String> {
        let path = dir.join("run.lock");
        let mut file = OpenOptions::new().read(true).open(path).ok()?;
        match file.try_lock_shared() {
            Ok(()) => None,
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                Some(in_progress(holder.trim()))
            }
            Err(TryLockError::Error(_)) => None,
        }
    }
}

fn in_progress(holder: &str) -> String {
    let (pid, rest) = holder
        .strip_prefix("pid ")
        .and_then(|r| r.split_once(" study "))
        .unwrap_or(("?", holder));
    let (study, since) = rest.rsplit_once(" since ").unwrap_or((rest, "?"));
    format!(
        "a run is in progress on this host: process {pid}, study {study}, since {since}; wait for it to finish or stop it (Ctrl-C in its terminal, or kill -INT {pid}): its settings are put back when it ends"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_says_who_holds_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        assert_eq!(RunLock::held_in(dir), None);
        let first = RunLock::acquire_in(dir, "studies/a.toml").unwrap();
        // flock locks belong to the open file description: a second open
        // in this same process conflicts as another process would.
        let e = RunLock::acquire_in(dir, "studies/b.toml")
            .unwrap_err()
            .to_string();
        let pid = std::process::id();
        assert!(
            e.contains(&format!("process {pid}, study studies/a.toml")),
            "{e}"
        );
        assert!(e.starts_with("a run is in progress"), "{e}");
        assert!(RunLock::held_in(dir).unwrap().contains("studies/a.toml"));
        drop(first);
        assert_eq!(RunLock::held_in(dir), None);
        let again = RunLock::acquire_in(dir, "studies/b.toml").unwrap();
        drop(again);
    }
}
