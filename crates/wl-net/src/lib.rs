//! benchlab's network workloads, each a [`benchlab_core::Workload`] with a
//! client and a server side that talk only over their data socket, so the
//! two can run in separate processes or on separate hosts:
//!
//! - [`STREAM`] (`net.stream`): one-way bulk throughput, netperf
//!   `TCP_STREAM` / `UDP_STREAM`;
//! - [`RR`] (`net.rr`): one request/response in flight, netperf `TCP_RR` /
//!   `UDP_RR`: transactions/s and the round-trip latency derived from it;
//! - [`PINGPONG`] (`net.pingpong`): every round trip timed on its own,
//!   sfnt-pingpong: RTT/2 mean, jitter, percentiles and a time series.
//!
//! Every point is one fresh data connection, as in netperf: the server binds
//! port 0, reports it, serves exactly one client and returns. The measured
//! loops only send and receive; warm-up and the end of the run are flags set
//! by a timer thread, buffers and recorders are allocated beforehand, and
//! each module documents where it follows the classic tool and where (and
//! why) it does not.

#![warn(missing_docs)]

mod common;
pub mod pingpong;
pub mod rr;
pub mod stream;

pub use pingpong::{NetPingpong, PINGPONG};
pub use rr::{NetRr, RR};
pub use stream::{NetStream, STREAM};
