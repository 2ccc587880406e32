//! Call-stack profiles: `perf record` samples every CPU of a host while a
//! point is measured ([`record`]), `perf script` symbolizes the samples
//! on that host, and each sample goes to the side whose process it hit
//! (benchlab's server or client agent and what they started, a managed
//! service, the kernel's threads, idle, anything else) as folded stacks
//! ([`split`]): text in the field's format (`a;b;c 12`), the same on
//! every host and readable without the binaries that made it.
//!
//! The analysis ([`analysis`]) is pure: two configurations' profiles of
//! one point, each normalized to CPU time per operation, give a
//! differential profile and the functions whose inclusive time per
//! operation grew or shrank most. [`flame`] draws both kinds of flame
//! graph as self-contained SVG without scripts.

pub mod analysis;
pub mod flame;
mod procs;
pub mod record;
pub mod split;

use serde::{Deserialize, Serialize};

pub use benchlab_core::study::{StackRepetitions, Stacks, Unwind};

/// The side of benchlab's server agent (its own server side and what it
/// started: the managed services that are not named otherwise).
pub const SIDE_SERVER: &str = "server";
/// The side of the client agents (benchlab's own client side and the
/// programs a `command` workload runs).
pub const SIDE_CLIENT: &str = "client";
/// Kernel threads (kthreadd's descendants: softirq threads, workers).
pub const SIDE_KERNEL: &str = "kernel";
/// The idle task (pid 0), with the interrupts it served.
pub const SIDE_IDLE: &str = "idle";
/// Every other process of the host; folded to its command name only.
pub const SIDE_OTHER: &str = "other";
/// The prefix of a managed service's side (`service:web`).
pub const SERVICE_PREFIX: &str = "service:";

/// A process whose descendants (and itself) form a side: an agent, or a
/// managed service's leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Root {
    /// The process id, in the host's pid namespace.
    pub pid: u32,
    /// The side it stands for ([`SIDE_SERVER`], [`SIDE_CLIENT`],
    /// `service:NAME`).
    pub side: String,
}

/// What one recording samples: how, when, and whose processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Samples per second and CPU.
    pub hz: u32,
    /// How user stacks are walked.
    pub unwind: Unwind,
    /// How long after the start sampling begins (the warm-up), ms.
    pub delay_ms: u64,
    /// How long it samples (the measured interval), ms; `None`: until
    /// stopped.
    pub length_ms: Option<u64>,
    /// The processes whose descendants form the sides.
    pub roots: Vec<Root>,
}

/// One side's folded stacks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideStacks {
    /// The side ([`SIDE_SERVER`], …).
    pub side: String,
    /// Its samples.
    pub samples: u64,
    /// Folded stacks, one `frame;frame;… count` line each, root first
    /// (the process's command name).
    pub folded: String,
}

/// A host's recording of one repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    /// Samples per second and CPU.
    pub hz: u32,
    /// How user stacks were walked.
    pub unwind: Unwind,
    /// How long sampling ran, s.
    pub window_s: f64,
    /// Every sample of the host (all CPUs, idle included).
    pub samples: u64,
    /// The samples of a process other than the idle task: the host's
    /// busy CPU time is `busy_samples / hz` seconds.
    pub busy_samples: u64,
    /// CPU time (user + system) `perf record` took, s: the sampler's
    /// cost while the point ran.
    pub perf_cpu_s: f64,
    /// The part of it inside the sampling window, s: the sampler's cost
    /// to the measured interval (start-up, before it, is not).
    pub perf_window_cpu_s: f64,
    /// CPU time `perf script` took to symbolize, s (after the point).
    pub script_cpu_s: f64,
    /// The perf version that recorded.
    pub perf_version: String,
    /// The sides, in the order of their first sample.
    pub sides: Vec<SideStacks>,
}

/// Why a recording could not be made (the point's measurement is kept).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StacksError(pub String);
