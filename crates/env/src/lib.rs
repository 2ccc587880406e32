//! benchlab's environment control: what a configuration changes on a host
//! besides the workload's own parameters — a tuning profile, CPU
//! shielding, a background load — applied so that it can always be undone.
//!
//! Every change goes through the [`journal`]: the original value is on
//! disk before the change is made, so `benchlab restore` undoes a crashed
//! run. A [`Session`] is one configuration applied on one host: made by
//! [`Session::apply`], told when points start and end (the background
//! load restarts at every point), and ended by [`Session::revert`].
//!
//! [`target`] makes and removes scratch file systems (an image on a loop
//! device, or a block device, formatted and mounted), with a janitor that
//! undoes them if the process dies: fs.matrix's targets and a Samba
//! share's `document_fs`.

pub mod journal;
pub mod load;
pub mod pool;
pub mod profile;
pub mod session;
pub mod shield;
pub mod sys;
pub mod target;

pub use session::{restore_all, ChangeReport, ChangeStatus, LoadUsage, Session, SessionSpec};

/// Errors of environment control.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A profile file is malformed.
    #[error("{file}: {message}")]
    Profile {
        /// The profile's name or path.
        file: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// A required setting is missing on this host (nothing was changed).
    #[error(
        "required setting {setting} cannot be applied on this host: {reason} (nothing was changed)"
    )]
    Required {
        /// The setting.
        setting: String,
        /// Why.
        reason: String,
    },
    /// An unrestored journal exists.
    #[error("an unrestored journal from an earlier run exists ({0}): run `benchlab restore` first (or `benchlab run --restore-first`)")]
    Unrestored(String),
    /// A file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl EnvError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        EnvError::Io {
            context: context.into(),
            source,
        }
    }
}
