//! benchlab's core: the workload interface and its registry, study files and
//! their validation, sweep expansion into a run plan, the recorders that
//! measured loops write into, and the plain result types every other layer
//! (store, statistics, reports) consumes.
//!
//! This crate does no I/O beyond reading the study file and `/proc` for CPU
//! accounting, and prints nothing: measuring produces data, rendering is
//! somebody else's job.

pub mod combine;
pub mod cost;
pub mod cpu;
pub mod decision;
pub mod engine_metric;
pub mod envspec;
pub mod fake;
pub mod latency;
pub mod param;
pub mod placement;
pub mod plan;
pub mod recorder;
pub mod redact;
pub mod resolved;
pub mod result;
pub mod setting;
pub mod shape;
pub mod study;
pub mod sys;
pub mod units;
pub mod workload;

pub use combine::Combine;
pub use param::{ParamKind, ParamSpec, Params, Value};
pub use result::{CpuUsage, Sample, SideResult, TargetSides};
pub use shape::{
    ClientShare, MatrixSummary, ServerSide, ServiceInfo, ViewSpec, CLIENTS, CLIENTS_PARAM,
};
pub use workload::{
    Better, ClientCtx, Gate, MetricSpec, OpenGate, Registry, ServerCtx, ValidationError, Workload,
    WorkloadError, ABORT_POLL,
};

/// The version of benchlab, recorded with every run.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
