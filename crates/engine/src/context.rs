//! What the parts of a run share: the study, the agents of its hosts, the
//! store and the interrupt flag, in one place instead of threaded through
//! every call.

use std::sync::atomic::AtomicBool;

use benchlab_core::study::Study;
use benchlab_store::Store;

use crate::hosts::Pool;

/// The run's shared state, lent to the configuration and service
/// controllers for each call.
pub(crate) struct RunCtx<'a> {
    /// The study being run.
    pub(crate) study: &'a Study,
    /// The agents of every host.
    pub(crate) pool: Pool,
    /// The result store.
    pub(crate) store: &'a mut Store,
    /// The run's id in the store.
    pub(crate) run_id: i64,
    /// Set by a signal: stop cleanly.
    pub(crate) interrupt: &'a AtomicBool,
    /// Notes for the user not yet handed to the observer.
    pub(crate) notes: Vec<String>,
}

impl RunCtx<'_> {
    /// Records an event of the run; best effort (an event that cannot be
    /// stored must not stop the run).
    pub(crate) fn event(&self, kind: &str, message: &str) {
        let _ = self.store.add_event(
            self.run_id,
            &benchlab_core::units::now_rfc3339(),
            kind,
            message,
        );
    }
}
