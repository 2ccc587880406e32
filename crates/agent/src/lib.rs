//! The control protocol between the controller (`benchlab run`) and the
//! agents that execute workload sides, and both ends of it.
//!
//! Frames are a 4-byte big-endian length followed by that many bytes of
//! JSON, capped at [`MAX_FRAME`] (iperf3's habit: length-prefixed JSON with a
//! size cap). The first exchange is a version handshake; a mismatch is
//! refused naming both versions. Every request gets exactly one response.
//! Local runs use the same protocol through a child process
//! (`benchlab agent --stdio`), so local and remote paths cannot drift.
//!
//! The agent executes only the requests below — workload sides from its own
//! registry and inventory — never a command sent over the wire.

pub mod channel;
pub mod client;
pub mod frame;
pub mod listen;
pub mod protocol;
pub mod server;
pub mod service;
mod stacks;

pub use client::{AgentError, AgentHandle};
pub use protocol::{Request, Response, PROTOCOL_VERSION};
pub use service::{ServiceCallError, StartedService};
