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

/// What a run does once the engine holds the store.
pub(crate) enum Action<'s> {
    /// A new run of a study with these options.
    Start(&'s Study, RunOptions),
    /// Resume an unfinished run with its first missing repetition.
    Resume(i64),
    /// Add rounds to a stored run's undecided points (`--until-decided`),
    /// up to the cap when given.
    UntilDecided(i64, Option<u32>),
}

/// Runs `action` with the progress printed on standard error, under
/// benchlab's sequential rule.
pub(crate) fn run(
    store: &mut Store,
    reg: &Registry,
    action: Action<'_>,
    restore_first: bool,
) -> Result<Outcome> {
    let interrupt = interrupt_flag()?;
    let mut printer = Printer::default();
    let run = benchlab_engine::Run {
        store,
        registry: reg,
        interrupt: &interrupt,
        observer: &mut printer,
        restore_first,
        rule: &benchlab_engine::Sequential::default(),
    };
    match action {
        Action::Start(study, opts) => run.start(study, opts),
        Action::Resume(id) => run.resume(id),
        Action::UntilDecided(id, cap) => run.until_decided(id, cap),
    }
}
