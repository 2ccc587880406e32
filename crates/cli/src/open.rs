//! The small core every command shares: opening `--db` (to write, to
//! read, upgraded once) and loading a study with its hosts placed.

use std::path::Path;

use anyhow::{Context, Result};
use benchlab_core::study::Study;
use benchlab_store::Store;

use crate::registry;

/// Opens `--db`: a SQLite file or a PostgreSQL URL. Messages name it with
/// its password masked.
pub(crate) fn open_store(path: &Path) -> Result<Store> {
    let target = benchlab_store::Target::from_path(path);
    Store::open_target(&target).with_context(|| format!("cannot open the store {target}"))
}

/// Opens `--db` for a command that only reads: a store that is not there
/// is an error, and nothing is created (a mistyped `--db` must not leave
/// an empty database behind).
pub(crate) fn open_existing_store(path: &Path) -> Result<Store> {
    let target = benchlab_store::Target::from_path(path);
    Store::open_existing(&target).with_context(|| format!("cannot open the store {target}"))
}

/// Opens `--db` for a command that reads runs, first upgrading what an
/// older benchlab stored ([`upgrade_store`]).
pub(crate) fn open_read(path: &Path) -> Result<Store> {
    let store = open_existing_store(path)?;
    upgrade_store(&store);
    Ok(store)
}

/// Brings runs an older benchlab stored up to what reports read, once;
/// a store that cannot be written (or a run that cannot be upgraded) is
/// said so and read as it is: its other runs still report.
pub(crate) fn upgrade_store(store: &Store) {
    match benchlab_report::upgrade(store, &registry()) {
        Ok(runs) if !runs.is_empty() => eprintln!(
            "benchlab: upgraded run(s) {} stored by an older benchlab (once: their plans, notes and figures are now stored)",
            runs.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")
        ),
        Ok(_) => {}
        Err(e) => eprintln!("benchlab: cannot upgrade this store's older runs: {e}"),
    }
}

/// Reads a study and places its hosts as `--hosts` and `--host` say. The
/// run stores the placed study in its plan, so its report and `--resume`
/// know where each side ran.
pub(crate) fn load_study(
    path: &Path,
    reg: &benchlab_core::Registry,
    hosts: &crate::HostArgs,
) -> Result<Study> {
    let mut s = Study::load(path, reg)?;
    let lab = match &hosts.lab {
        Some(p) => Some((
            p.display().to_string(),
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the lab file {}", p.display()))?,
        )),
        None => None,
    };
    s.place_hosts(
        lab.as_ref().map(|(f, t)| (f.as_str(), t.as_str())),
        &hosts.host,
    )?;
    Ok(s)
}
