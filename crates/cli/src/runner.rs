//! The command line's side of a run: the signal handlers and the progress
//! printer handed to the engine.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use anyhow::Result;
use benchlab_core::plan::RunOptions;
use benchlab_core::study::Study;
use benchlab_core::Registry;
use benchlab_engine::Outcome;
use benchlab_store::Store;

use crate::progress::Printer;

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
