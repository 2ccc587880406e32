//! Whether the kernel can give the huge pages guests will ask for: tried
//! before anything starts, not guessed from /proc/meminfo (free memory
//! may be too fragmented for 2 MiB pages, or held by other pools).

use std::path::Path;

use benchlab_env::journal::Journal;
use benchlab_env::pool;

use crate::GuestError;

/// The kernel's pool of default-size (2 MiB) huge pages.
pub const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

/// The pool's size now (the tests' check that it is back).
#[cfg(test)]
fn pool() -> Result<u64, GuestError> {
    let text = std::fs::read_to_string(NR_HUGEPAGES)
        .map_err(|e| GuestError::Io(format!("reading {NR_HUGEPAGES}: {e}")))?;
    text.trim()
        .parse()
        .map_err(|_| GuestError::Io(format!("{NR_HUGEPAGES} reads `{}`", text.trim())))
}

/// Asks the kernel for `need` huge pages more than its pool holds, the
/// way a guest's boot does, reads back how many it granted, and gives
/// them back at once, each step under the host's pool lock and journaled
/// as a number of pages (in `journal_dir`), so that a controller killed
/// in between leaves it for `benchlab restore` and a run beside this one
/// keeps its own pages. Returns the pages granted (at most `need`).
pub fn probe(need: u64, journal_dir: &Path) -> Result<u64, GuestError> {
    if need == 0 {
        return Ok(0);
    }
    let mut journal = Journal::create(journal_dir, "guest-hugepages-probe", None)?;
    let setting = "guest huge pages probe (vm.nr_hugepages)";
    let granted = match pool::add(NR_HUGEPAGES, need, &mut journal, setting) {
        Ok(g) => g,
        Err(e) => {
            // Refused as a whole (no permission, no hugetlb): nothing
            // changed, and the journal says so.
            journal.finish()?;
            return Err(GuestError::Io(format!("{NR_HUGEPAGES}: {e}")));
        }
    };
    // The journal stays, for `benchlab restore`, only if this fails.
    give_back(granted, &mut journal, setting)?;
    journal.finish()?;
    Ok(granted)
}

/// Adds `n` pages to the pool for a guest (journaled in `journal` as a
/// number of pages, under the pool lock); the pages granted.
pub(crate) fn reserve(n: u64, journal: &mut Journal, setting: &str) -> Result<u64, GuestError> {
    Ok(pool::add(NR_HUGEPAGES, n, journal, setting)?)
}

/// Takes `n` pages this run added off the pool as it is now, not back to
/// a size read earlier: another guest may have reserved pages since.
pub(crate) fn give_back(n: u64, journal: &mut Journal, setting: &str) -> Result<(), GuestError> {
    pool::take_back(NR_HUGEPAGES, n, journal, setting).map_err(|e| {
        GuestError::Io(format!(
            "giving {n} huge pages back: {e}; `benchlab restore` takes them off"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One page asked, granted and given back: the pool is as it was, the
    /// journal gone. Without root the probe's error names the file.
    #[test]
    fn a_probe_gives_back_what_it_was_granted() {
        let dir = tempfile::tempdir().unwrap();
        let before = pool().unwrap();
        match probe(1, dir.path()) {
            // One 2 MiB page: any machine that runs the tests has it.
            Ok(granted) => assert_eq!(granted, 1),
            // Not root: nothing was changed, and the journal went.
            Err(e) => {
                // SAFETY: geteuid(2) has no preconditions.
                assert_ne!(unsafe { libc::geteuid() }, 0, "{e}");
                assert!(e.to_string().contains(NR_HUGEPAGES), "{e}");
            }
        }
        assert_eq!(pool().unwrap(), before);
        assert!(benchlab_env::journal::pending(dir.path()).is_empty());
        assert_eq!(probe(0, dir.path()).unwrap(), 0);
    }
}
