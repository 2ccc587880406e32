//! benchlab's test bed: hosts that are network namespaces on this machine,
//! joined by veth pairs (`direct`) or a Linux bridge in a namespace of its
//! own (`bridge`), with link rates set by tc tbf — and a delaying TCP/UDP
//! relay that stands in for netem's delay on kernels built without netem.
//!
//! - [`spec`]: the `[testbed]` table of a study file, parsed and validated
//!   before anything is created ([`parse_spec`]);
//! - [`bed`]: [`up`], [`down`] and [`status`], crash-proof through a state
//!   file that records every object before it is made;
//! - [`owned`]: a study's bed brought up by its run and taken down after
//!   it ([`RunBed`]), unless the user brought it up;
//! - [`relay`]: [`relay::start`] a relay that holds every TCP chunk and UDP
//!   datagram for a fixed time, and reports the hold it actually applied.
//!
//! A bed's traffic never leaves the machine: every address lives in a
//! namespace the bed made, and nothing is created in the root namespace.
//! Everything here needs root except the relay and the spec parser; tests
//! that need root fail under CI without it and are reported as skipped
//! elsewhere.
//!
//! The crate drives iproute2 (`ip`, `tc`) as child processes and reports
//! their exit status and standard error; it prints nothing.

#![warn(missing_docs)]

pub mod bed;
pub mod owned;
pub mod relay;
pub mod spec;

pub use bed::{
    default_state_dir, down, in_netns, netem_available, status, up, DownReport, HostInfo,
    KilledProcess, Object, ObjectStatus, Status, TbfParams, Testbed, TestbedError,
};
pub use owned::{restore_left, study_testbed, RunBed};
pub use relay::{RelayConfig, RelayHandle, RelayProtocol, RelayStats};
pub use spec::{parse_spec, HostSpec, SpecError, Subnet, TestbedSpec, Topology};
