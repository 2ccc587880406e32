//! Kernel pools that every run on a host shares, `vm.nr_hugepages` the
//! one benchlab changes: each run (a guest's boot, preflight's probe) adds
//! the pages it needs and later takes exactly those off again, never
//! writes back a size it read earlier. Each read-modify-write holds an
//! exclusive lock on one file for the host, so two runs (two users, a
//! lab's agent and a local run, tests in parallel) cannot interleave a
//! read and a write and lose each other's pages; and the journal records
//! the change as a number of pages ([`Change::PoolPages`]), so a restore
//! takes off what the crashed run added and leaves the others' pages.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::journal::{Change, Journal};
use crate::EnvError;

/// The lock file: in benchlab's default state directory whatever
/// `BENCHLAB_STATE_DIR` says, since the pool is the kernel's, one per
/// host (runs with different state directories still share it); in the
/// state directory given when the default cannot be made.
pub fn lock_path() -> PathBuf {
    let default = Path::new("/var/lib/benchlab");
    if fs::create_dir_all(default).is_ok() {
        return default.join("pools.lock");
    }
    let dir = crate::journal::journal_dir()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let _ = fs::create_dir_all(&dir);
    dir.join("pools.lock")
}

/// The pool lock, held until dropped.
pub struct PoolLock {
    _file: File,
}

/// Takes the host's pool lock (waits for another run's adjustment, which
/// lasts a read and a write).
pub fn lock() -> Result<PoolLock, EnvError> {
    let path = lock_path();
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| EnvError::io(format!("open {}", path.display()), e))?;
    file.lock()
        .map_err(|e| EnvError::io(format!("lock {}", path.display()), e))?;
    Ok(PoolLock { _file: file })
}

/// A pool's size now.
pub fn read(path: &str) -> Result<u64, EnvError> {
    let text = fs::read_to_string(path).map_err(|e| EnvError::io(format!("read {path}"), e))?;
    text.trim().parse().map_err(|_| {
        EnvError::io(
            format!("read {path}"),
            std::io::Error::other(format!("it reads `{}`", text.trim())),
        )
    })
}

fn write(path: &str, n: u64) -> Result<(), EnvError> {
    fs::write(path, n.to_string()).map_err(|e| EnvError::io(format!("write {path} = {n}"), e))
}

/// Adds `n` pages to the pool at `path` under the lock, journaled first
/// (as `setting`); returns how many the kernel granted (at most `n`). A
/// shortfall is journaled too, so that the journal always sums to what
/// this run holds.
pub fn add(path: &str, n: u64, journal: &mut Journal, setting: &str) -> Result<u64, EnvError> {
    if n == 0 {
        return Ok(0);
    }
    let _lock = lock()?;
    let before = read(path)?;
    journal.record(
        setting,
        Change::PoolPages {
            path: path.into(),
            pages: n as i64,
        },
    )?;
    if let Err(e) = write(path, before + n) {
        journal.record(
            setting,
            Change::PoolPages {
                path: path.into(),
                pages: -(n as i64),
            },
        )?;
        return Err(e);
    }
    let granted = read(path)?.saturating_sub(before).min(n);
    if granted < n {
        journal.record(
            setting,
            Change::PoolPages {
                path: path.into(),
                pages: -((n - granted) as i64),
            },
        )?;
    }
    Ok(granted)
}

/// Takes `n` pages this run added off the pool at `path` as it is now,
/// under the lock, and journals that they are back.
pub fn take_back(path: &str, n: u64, journal: &mut Journal, setting: &str) -> Result<(), EnvError> {
    if n == 0 {
        return Ok(());
    }
    let _lock = lock()?;
    write(path, read(path)?.saturating_sub(n))?;
    journal.record(
        setting,
        Change::PoolPages {
            path: path.into(),
            pages: -(n as i64),
        },
    )
}

/// Undoes a journaled [`Change::PoolPages`]: `pages` off the pool (on
/// for a negative count) as it is now, under the lock.
pub fn undo(path: &str, pages: i64) -> Result<String, String> {
    let _lock = lock().map_err(|e| e.to_string())?;
    let now = read(path).map_err(|e| e.to_string())?;
    let to = if pages >= 0 {
        now.saturating_sub(pages as u64)
    } else {
        now + pages.unsigned_abs()
    };
    write(path, to).map_err(|e| e.to_string())?;
    Ok(format!("{path}: {now} -> {to}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool's arithmetic on a plain file: two runs' additions, one
    /// taken back, one crashed run's undone from its journal; the other
    /// run's pages stay.
    #[test]
    fn adds_and_take_backs_are_deltas() {
        let dir = tempfile::tempdir().unwrap();
        let pool = dir.path().join("nr_hugepages");
        let path = pool.to_str().unwrap();
        fs::write(&pool, "10\n").unwrap();
        let mut a = Journal::create(dir.path(), "a", None).unwrap();
        let mut b = Journal::create(dir.path(), "b", None).unwrap();
        assert_eq!(add(path, 4, &mut a, "a's guest").unwrap(), 4);
        assert_eq!(add(path, 3, &mut b, "b's guest").unwrap(), 3);
        assert_eq!(read(path).unwrap(), 17);
        // `a` crashed: its journal is undone newest first.
        for e in crate::journal::read(a.path()).unwrap().iter().rev() {
            if let Change::PoolPages { path, pages } = &e.change {
                undo(path, *pages).unwrap();
            }
        }
        assert_eq!(read(path).unwrap(), 13, "b's 3 pages stay");
        take_back(path, 3, &mut b, "b's guest").unwrap();
        assert_eq!(read(path).unwrap(), 10);
        // b's journal sums to nothing held.
        let held: i64 = crate::journal::read(b.path())
            .unwrap()
            .iter()
            .map(|e| match e.change {
                Change::PoolPages { pages, .. } => pages,
                _ => 0,
            })
            .sum();
        assert_eq!(held, 0);
    }
}
