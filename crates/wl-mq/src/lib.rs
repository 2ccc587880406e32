//! benchlab's message-queue workloads against a real AMQP 0-9-1 broker
//! (Debian's RabbitMQ as a managed service, or any broker at an address):
//!
//! - [`throughput`]: `mq.throughput`, qpid-perftest's semantics
//!   (transfers/s, MiB/s, per-publisher and per-subscriber rates);
//! - [`latency`]: `mq.latency`, qpid-latencytest's semantics (a paced
//!   sender, one-way latency per interval) plus percentiles, latency from
//!   the intended send time and the achieved rate;
//! - [`amqp`]: the minimal blocking client both use;
//! - [`common`]: what both read (the broker's address and login).

#![warn(missing_docs)]

pub mod amqp;
pub mod common;
pub mod latency;
pub mod throughput;

pub use latency::{MqLatency, LATENCY};
pub use throughput::{MqThroughput, THROUGHPUT};
