//! benchlab's engine: checks every host of a study, expands it into
//! repetitions, applies each configuration, starts its services, drives
//! the agents through every repetition and records each sample the moment
//! it finishes. The command line parses, prints and builds the registry;
//! the engine is told nothing about terminals and reports its progress to
//! an [`Observer`].

mod combine;
mod context;
mod decide;
mod engine;
mod envrun;
mod guests;
mod hosts;
mod lock;
mod monitors;
mod observer;
mod profile;
mod rule;
mod runner;
mod secrets;
mod services;
mod stacks;
mod unit;

pub use decide::{Answer, Decider, Question, Sides};
pub use hosts::spawn_for_restore;
pub use lock::{state_dir, RunLock};
pub use observer::{Headline, Observer, PlannedUnit, RoundStart, RunStart, UnitInfo, UnitResult};
pub use profile::{load_profile, LoadedProfile};
pub use rule::Sequential;
pub use runner::{controller_alive, is_live_benchlab, refuse_reopen, stored_plan, Outcome, Run};
pub use secrets::generate_passwords;
pub use services::check as check_service;
