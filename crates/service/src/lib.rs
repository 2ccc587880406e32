//! benchlab's managed services: real third-party servers (Debian's nginx
//! and apache2, or any command) that a server workload loads and benchlab
//! observes.
//!
//! A study's `[[service]]` table is a [`ServiceSpec`]. On the controller
//! it becomes a [`ServicePlan`] (validated, its configuration template
//! read, every template variable checked) before anything starts; the
//! plan travels to the agent of the service's host, which runs it as a
//! [`Service`]:
//!
//! - **start**: the checks first (the server binary, the port, the
//!   template, the document root, the CPUs), then — journal first — the
//!   scratch directory and the server's process group are written to the
//!   restore journal *before* they exist, the server is released from a
//!   gate only once its group is on disk, and a readiness probe waits for
//!   it. A SIGKILL of the starter at any moment leaves nothing that
//!   `benchlab restore` does not remove.
//! - **observe**: [`Service::usage`] snapshots CPU time, RSS and context
//!   switches of every process in the group; [`ServiceUsage::delta`] gives
//!   the figures over a measured interval.
//! - **check**: [`Service::check_alive`] says whether the server died by
//!   itself and how (exit code or signal).
//! - **stop**: SIGTERM to the group, a grace period, SIGKILL; the scratch
//!   directory is removed and the journal finished.
//!
//! benchlab deletes only what it created: every directory it makes holds
//! a marker file ([`MARKER`]), and a directory without one is never
//! written into or removed.

pub mod gate;
mod prepare;
pub mod probe;
pub mod procfs;
pub mod run;
pub mod samba;
pub mod secrets;
pub mod spec;
pub mod template;

pub use procfs::{ServiceUsage, UsageDelta};
pub use run::{Liveness, Service, ServiceDescription, StartOptions, StopReport};
pub use secrets::SecretValues;
pub use spec::{Probe, Restart, SecretSource, ServiceKind, ServicePlan, ServiceSpec, Template};

/// The file benchlab puts in every directory it creates for a service:
/// only a directory holding it is ever written into or removed.
pub const MARKER: &str = ".benchlab-owned";

/// What a masked secret looks like in descriptions and errors.
pub const MASK: &str = benchlab_core::redact::MASK;

/// Errors of managed services. Every message names the service.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A key of the `[[service]]` table is wrong.
    #[error("service `{service}`: {key}: {message}")]
    Spec {
        /// The service's name.
        service: String,
        /// The key.
        key: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// A template is malformed or uses a variable nobody sets.
    #[error("service `{service}`: template {template}: {message}")]
    Template {
        /// The service's name.
        service: String,
        /// The template's origin (`services/nginx.conf` or the user's file).
        template: String,
        /// What is wrong.
        message: String,
    },
    /// The server's program is not installed.
    #[error("service `{service}`: {program} is not installed ({looked}){hint}")]
    MissingProgram {
        /// The service's name.
        service: String,
        /// The program.
        program: String,
        /// Where benchlab looked.
        looked: String,
        /// What to install, when known.
        hint: String,
    },
    /// The port is taken.
    #[error("service `{service}`: port {port} is already in use on {bind} (another server listens there): choose another `port`, or stop that server")]
    PortInUse {
        /// The service's name.
        service: String,
        /// The bind address.
        bind: String,
        /// The port.
        port: u16,
    },
    /// A directory exists that benchlab did not create.
    #[error("service `{service}`: {key} {path} exists and was not created by benchlab (no {MARKER} in it): benchlab never writes into or deletes what it did not create; name a path that does not exist yet (benchlab makes it and removes it when the service stops), a directory benchlab made (holding {MARKER}), or leave {key} out (benchlab makes one in its scratch directory)")]
    NotOurs {
        /// The service's name.
        service: String,
        /// The key (`document_root`).
        key: String,
        /// The directory.
        path: String,
    },
    /// The server did not start, died while starting, or never answered
    /// its probe; everything started was stopped again.
    #[error("service `{service}`: {message}{}", log_tail(.log))]
    Start {
        /// The service's name.
        service: String,
        /// What happened.
        message: String,
        /// The last lines of the server's error log and output.
        log: String,
    },
    /// Stopping left something behind (kept in the journal for
    /// `benchlab restore`).
    #[error("service `{service}`: stopping: {message}")]
    Stop {
        /// The service's name.
        service: String,
        /// What could not be undone.
        message: String,
    },
    /// A file operation failed.
    #[error("service `{service}`: {context}: {source}")]
    Io {
        /// The service's name.
        service: String,
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Writing the restore journal failed (nothing was started).
    #[error("service `{service}`: {source}")]
    Journal {
        /// The service's name.
        service: String,
        /// The journal's error.
        source: benchlab_env::EnvError,
    },
}

fn log_tail(log: &str) -> String {
    if log.trim().is_empty() {
        String::new()
    } else {
        format!("; the server's last log lines:\n{log}")
    }
}
