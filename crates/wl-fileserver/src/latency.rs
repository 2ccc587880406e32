//! Per-operation-type latency recorders that merge across clients.
//!
//! Two significant digits (1 % resolution) rather than core's three: a
//! point holds one histogram per operation type (17) per client, and with
//! 128 clients three digits would pin ≈0.5 GB of counts; file-operation
//! latencies are not read to 0.1 % anyway. Count, sum, sum of squares,
//! minimum and maximum are exact beside the histogram.

pub use benchlab_core::latency::{take_u64, Latency};

/// Significant digits of the per-type histograms: every recorder of this
/// crate is made with `Latency::with_digits(DIGITS)`.
pub const DIGITS: u8 = 2;
