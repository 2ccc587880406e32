//! The command line's side of a run: the signal handlers, the progress
//! printer handed to the engine, and the report of a stored run.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use anyhow::Result;
use benchlab_core::plan::RunOptions;
use benchlab_core::study::Study;
use benchlab_core::Registry;
use benchlab_engine::Outcome;
use benchlab_store::Store;

use crate::progress::Printer;

pub(crate) use benchlab_engine::stored_plan;

/// The interrupt flag, set by the first Ctrl-C or SIGTERM; a second one
/// exits at once.
pub(crate) fn interrupt_flag() -> Result<Arc<AtomicBool>> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    if let Some(f) = FLAG.get() {
        return Ok(f.clone());
    }
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(
            sig,
            crate::EXIT_INTERRUPTED,
            flag.clone(),
        )?;
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok(FLAG.get_or_init(|| flag).clone())
}

/// Starts a new run of a study, its progress printed on standard error.
pub(crate) fn start(
    store: &mut Store,
    reg: &Registry,
    study: &Study,
    opts: RunOptions,
    restore_first: bool,
) -> Result<Outcome> {
    let interrupt = interrupt_flag()?;
    let mut printer = Printer::default();
    benchlab_engine::Run {
        store,
        registry: reg,
        interrupt: &interrupt,
        observer: &mut printer,
        restore_first,
    }
    .start(study, opts)
}

/// Resumes an unfinished run with its first missing repetition.
pub(crate) fn resume(
    store: &mut Store,
    reg: &Registry,
    run_id: i64,
    restore_first: bool,
) -> Result<Outcome> {
    let interrupt = interrupt_flag()?;
    let mut printer = Printer::default();
    benchlab_engine::Run {
        store,
        registry: reg,
        interrupt: &interrupt,
        observer: &mut printer,
        restore_first,
    }
    .resume(run_id)
}

/// Builds the report of a stored run.
pub(crate) fn report(
    store: &Store,
    reg: &Registry,
    run_id: i64,
) -> Result<benchlab_report::RunReport> {
    if crate::import_cmd::is_published_run(store, run_id)? {
        return crate::import_cmd::published_report(store, run_id);
    }
    let run = store.run(run_id)?;
    let plan = stored_plan(store, reg, run_id)?;
    let study = &plan.study;
    let byte_params = |kind: &str| crate::report_cmd::byte_params(reg, kind);
    let aid = benchlab_report::views::ViewAid {
        notes: &crate::report_cmd::measurement_notes,
        byte_params: &byte_params,
    };
    let mut r = benchlab_report::build(
        &run,
        &plan,
        &store.configurations(run_id)?,
        &store.points(run_id)?,
        &store.samples(run_id)?,
        &store.hosts(run_id)?,
        &aid,
    );
    r.notes = benchlab_report::model::notes(
        &store.points(run_id)?,
        &store.samples(run_id)?,
        reg,
        &store.configurations(run_id)?,
    );
    r.settings = settings_changed(store, study, run_id)?;
    r.services = benchlab_report::model::services(&r.configurations, store.services(run_id)?);
    Ok(r)
}

/// What each configuration changed on each host, once per setting (an
/// interleaved study applies a configuration at every repetition), with
/// any revert that failed.
fn settings_changed(
    store: &Store,
    study: &Study,
    run_id: i64,
) -> Result<Vec<benchlab_report::model::SettingChange>> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for row in store.setting_changes(run_id)? {
        let keep = row.phase == "apply" || row.status == "revert failed";
        if !keep
            || !seen.insert((
                row.config_idx,
                row.host.clone(),
                row.setting.clone(),
                row.phase.clone(),
            ))
        {
            continue;
        }
        out.push(benchlab_report::model::SettingChange {
            configuration: study
                .configurations
                .get(row.config_idx)
                .map(|c| c.name.clone())
                .unwrap_or_else(|| format!("#{}", row.config_idx)),
            host: row.host,
            setting: row.setting,
            before: row.before,
            after: row.after,
            status: row.status,
            note: (!row.note.is_empty()).then_some(row.note),
        });
    }
    Ok(out)
}
