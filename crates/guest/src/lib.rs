//! QEMU guests as study hosts.
//!
//! A guest boots Debian's kernel (unpacked into a cache, see [`kernel`])
//! with an initramfs benchlab builds ([`initramfs`]) that mounts this
//! host's root read-only over 9p under a tmpfs overlay: every program the
//! host has (nginx, smbd, RabbitMQ, benchlab itself) runs in the guest
//! unchanged, and no disk image is downloaded. benchlab's agents in the
//! guest talk to the controller over one virtio-serial port ([`mux`],
//! [`init`]): no SSH, no network needed for control. [`vm`] starts QEMU
//! with QMP, pins its vCPU threads, backs its memory with huge pages,
//! joins its NIC to a bridge or gives it a link of its own, and journals
//! all of it so that `benchlab restore` undoes what a killed controller
//! left.

pub mod accel;
pub mod init;
pub mod initramfs;
pub mod kernel;
pub mod mux;
pub mod qmp;
pub mod spec;
pub mod vm;

pub use spec::{Accel, GuestSpec, Net, Spec};
pub use vm::Guest;

/// Errors of guests.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    /// Something this host lacks, with the command that provides it.
    #[error("{what}: run `{fix}`")]
    Missing {
        /// What is missing.
        what: String,
        /// The set-up command that brings it.
        fix: String,
    },
    /// The guest kernel or its modules.
    #[error("guest kernel: {0}")]
    Kernel(String),
    /// A file or socket operation.
    #[error("{0}")]
    Io(String),
    /// The guest did not come up.
    #[error("guest did not boot: {0}")]
    Boot(String),
    /// The request cannot be met on this host (the key and what is
    /// allowed are in the message).
    #[error("{0}")]
    Refused(String),
    /// QMP.
    #[error("QMP: {0}")]
    Qmp(String),
    /// The journal.
    #[error(transparent)]
    Env(#[from] benchlab_env::EnvError),
}

/// The QEMU binary (`qemu-system-x86` package).
pub const QEMU: &str = "qemu-system-x86_64";

/// Where QEMU is, or what installs it.
pub fn qemu_path() -> Result<std::path::PathBuf, GuestError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([std::path::PathBuf::from("/usr/bin")])
        .map(|d| d.join(QEMU))
        .find(|p| p.is_file())
        .ok_or_else(|| GuestError::Missing {
            what: format!("no {QEMU}"),
            fix: "apt-get install qemu-system-x86 (or bash scripts/setup.sh)".into(),
        })
}
