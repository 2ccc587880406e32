//! Whether the kernel can give the huge pages guests will ask for: tried
//! before anything starts, not guessed from /proc/meminfo (free memory
//! may be too fragmented for 2 MiB pages, or held by other pools).

use std::fs;
use std::path::Path;

use benchlab_env::journal::{Change, Journal};

use crate::GuestError;

/// The kernel's pool of default-size (2 MiB) huge pages.
pub const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

/// The pool's size now.
pub(crate) fn pool() -> Result<u64, GuestError> {
    let text = fs::read_to_string(NR_HUGEPAGES)
        .map_err(|e| GuestError::Io(format!("reading {NR_HUGEPAGES}: {e}")))?;
    text.trim()
        .parse()
        .map_err(|_| GuestError::Io(format!("{NR_HUGEPAGES} reads `{}`", text.trim())))
}

/// Asks the kernel for `need` huge pages more than its pool holds, the
/// way a guest's boot does, reads back how many it granted, and gives
/// them back at once. The change is journaled (in `journal_dir`) before
/// it is made, so that a controller killed in between leaves it for
/// `benchlab restore`. Returns the pages granted (at most `need`).
pub fn probe(need: u64, journal_dir: &Path) -> Result<u64, GuestError> {
    if need == 0 {
        return Ok(0);
    }
    let before = pool()?;
    let mut journal = Journal::create(journal_dir, "guest-hugepages-probe", None)?;
    journal.record(
        "guest huge pages probe (vm.nr_hugepages)",
        Change::File {
            path: NR_HUGEPAGES.into(),
            before: before.to_string(),
        },
    )?;
    if let Err(e) = fs::write(NR_HUGEPAGES, (before + need).to_string()) {
        // Refused as a whole (no permission, no hugetlb): nothing changed.
        journal.finish()?;
        return Err(GuestError::Io(format!("writing {NR_HUGEPAGES}: {e}")));
    }
    let granted = pool().map(|now| now.saturating_sub(before).min(need));
    // What was granted goes back now. The pool is read again just before
    // (another program may have changed it meanwhile) and only our pages
    // are taken off it; the journal stays, for `benchlab restore`, only
    // if that fails.
    give_back(*granted.as_ref().unwrap_or(&need))?;
    journal.finish()?;
    granted
}

/// Takes `n` pages off the pool as it is now, not back to a size read
/// earlier: another guest may have reserved pages since.
pub(crate) fn give_back(n: u64) -> Result<(), GuestError> {
    let rest = pool()?.saturating_sub(n);
    fs::write(NR_HUGEPAGES, rest.to_string()).map_err(|e| {
        GuestError::Io(format!(
            "giving huge pages back ({NR_HUGEPAGES} = {rest}): {e}; `benchlab restore` puts it back"
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
