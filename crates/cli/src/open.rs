//! The small core every command shares: opening `--db` (to write, or to
//! read only: reading never writes) and loading a study with its hosts
//! placed.

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

/// Opens `--db` for a command that only reads runs (`list`, `show`,
/// `report`, `compare`, `history`): read-only, nothing created, migrated
/// or resolved. A store an older benchlab wrote is refused with the
/// command that upgrades it (`benchlab store upgrade`), or read as it is
/// when only some of its runs lack their reading pieces (those runs name
/// the command when asked for).
pub(crate) fn open_read(path: &Path) -> Result<Store> {
    let target = benchlab_store::Target::from_path(path);
    Store::open_read_only(path).with_context(|| format!("cannot open the store {target}"))
}

/// Resolves what an older benchlab stored, once (`benchlab store
/// upgrade`, and the first writing command): the store's own migration,
/// given what only this binary knows (its workloads, the importer).
pub(crate) fn upgrade_runs(store: &Store) -> Result<Vec<i64>, benchlab_store::UpgradeError> {
    let registry = registry();
    let published = |run: &benchlab_store::RunRow| {
        benchlab_report::import::figures_csv(&run.study_name, &run.study_text)
            .map(|r| serde_json::to_string(&r).expect("a report serializes"))
            .map_err(|e| format!("its imported figures ({}): {e}", run.study_file))
    };
    store.upgrade_runs(&benchlab_store::Resolvers {
        registry: &registry,
        published: &published,
    })
}

/// [`upgrade_runs`] for a writing command: a store that cannot be
/// written (or a run that cannot be upgraded) is said so, and the
/// command goes on: its other runs still report.
pub(crate) fn upgrade_store(store: &Store) {
    match upgrade_runs(store) {
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
    load_part(path, reg, hosts, &crate::OnlyArgs::default())
}

/// [`load_study`], cut down to the part `--only` names before anything
/// is planned or started.
pub(crate) fn load_part(
    path: &Path,
    reg: &benchlab_core::Registry,
    hosts: &crate::HostArgs,
    only: &crate::OnlyArgs,
) -> Result<Study> {
    let only = benchlab_core::study::Only::parse(&only.only)?;
    let mut s = Study::load(path, reg)?;
    s.keep_only(&only)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn demo(only: &[&str]) -> Study {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../studies/demo.toml");
        let only = crate::OnlyArgs {
            only: only.iter().map(|s| s.to_string()).collect(),
        };
        load_part(&path, &registry(), &crate::HostArgs::default(), &only)
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// The demo's iperf3 service is driven only by its iperf3 workload:
    /// a part without that workload neither checks nor starts it, and
    /// the cross-check of the native stream with iperf3 goes too.
    #[test]
    fn a_service_only_left_out_workloads_drive_is_left_out() {
        let whole = demo(&[]);
        assert_eq!(whole.services.len(), 1);
        assert_eq!(whole.crosschecks.len(), 1);

        let part = demo(&["workload=stream,rr"]);
        let names: Vec<&str> = part.workloads.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["stream", "rr"]);
        assert!(part.services.is_empty(), "{:?}", part.services);
        assert!(part.configurations.iter().all(|c| c.services.is_empty()));
        assert!(part.crosschecks.is_empty());
        assert_eq!(
            part.left_out.lines(),
            ["ran 2 of 4 workloads: left out pingpong, iperf3 (--only)"]
        );

        let part = demo(&["workload=iperf3", "configuration=split-cpus"]);
        assert_eq!(part.services.len(), 1);
        assert_eq!(part.configurations.len(), 1);
        assert_eq!(part.configurations[0].services.len(), 1);
    }
}
