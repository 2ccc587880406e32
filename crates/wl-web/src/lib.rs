//! benchlab's web workload, `web.load`: WebBench-style HTTP/1.x load
//! against a real web server (nginx, apache2, …) that benchlab observes
//! rather than implements.
//!
//! - [`load`]: the [`LOAD`] workload (`web.load`) the registry holds;
//! - [`gen`]: the load generator (epoll, closed and open loop);
//! - [`http`]: the response parser it uses;
//! - [`fileset`]: the SPECweb96 file set, generated into the server's
//!   document root and removed afterwards, or a URL list.

#![warn(missing_docs)]

pub mod fileset;
pub mod gen;
pub mod http;
pub mod load;

pub use load::{WebLoad, LOAD};
