//! Plumbing shared by the three network workloads, one module per concern:
//!
//! - [`params`]: the `protocol` parameter and parameter helpers;
//! - [`sock`]: socket setup (listen / accept / connect with abort polling,
//!   buffer sizes, options);
//! - [`sysio`]: thin `send`/`recv` wrappers for the measured loops;
//! - [`timer`]: the phase timer that ends warm-up and the measured
//!   interval, and the watchdog that wakes a blocked call;
//! - [`exchange`]: the request/response exchange used by `net.rr` and
//!   `net.pingpong` (both sides);
//! - [`results`]: a side's result and the helpers that turn CPU figures
//!   into metrics.

pub(crate) mod exchange;
pub(crate) mod params;
pub(crate) mod results;
pub(crate) mod sock;
pub(crate) mod sysio;
pub(crate) mod timer;
