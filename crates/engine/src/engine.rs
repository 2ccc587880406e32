//! A run in progress: the state its repetitions share, driven by the
//! runner's loop (`runner.rs`) and by one repetition's stages (`unit.rs`).

use benchlab_core::plan::RunOptions;
use benchlab_core::Registry;

use crate::context::RunCtx;
use crate::envrun::EnvControl;
use crate::monitors::Monitors;
use crate::observer::Observer;
use crate::services::Services;

/// A run in progress: everything its repetitions share.
pub(crate) struct Engine<'a> {
    pub(crate) reg: &'a Registry,
    /// The sequential rule of the until-decided design.
    pub(crate) rule: &'a dyn crate::Decider,
    pub(crate) opts: RunOptions,
    pub(crate) observer: &'a mut dyn Observer,
    // Fields drop in order: the configuration's agents go before the
    // pool's, as they did when these were the runner's locals.
    /// The configuration applied on the hosts.
    pub(crate) env: EnvControl,
    /// The managed services of the configuration in force.
    pub(crate) svc: Services,
    /// The hosts' system monitors.
    pub(crate) monitors: Monitors,
    /// The hosts' call-stack recordings.
    pub(crate) stacks: crate::stacks::Stacks,
    /// The study, the agents, the store.
    pub(crate) ctx: RunCtx<'a>,
}

impl Engine<'_> {
    /// Hands the notes gathered so far to the observer.
    pub(crate) fn tell(&mut self) {
        for n in self.ctx.notes.drain(..) {
            self.observer.note(&n);
        }
    }
}
