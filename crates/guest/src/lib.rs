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
pub mod hugepages;
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

/// Where a shell looks for programs when `PATH` is unset (Debian's
/// default for root, which covers the other users' too).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where QEMU is on the `PATH` (as a user's shell would find it; the
/// default path when `PATH` is unset), or what installs it. No fallback
/// directory: a QEMU the user's shell would not run is not the one they
/// set up, and a test must be able to hide it.
pub fn qemu_path() -> Result<std::path::PathBuf, GuestError> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    find_program(QEMU, &path).ok_or_else(|| GuestError::Missing {
        what: format!(
            "its `guest` needs {QEMU}, and none is on the PATH ({})",
            path.to_string_lossy()
        ),
        fix: "apt-get install qemu-system-x86".into(),
    })
}

/// The first executable file `name` in the directories of `path`. Empty
/// entries (the current directory to a shell) are skipped: where the
/// controller happens to run from must not pick its emulator.
fn find_program(name: &str, path: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn programs_are_found_on_the_path_only_and_only_if_executable() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let plain = a.join("prog");
        std::fs::write(&plain, "").unwrap();
        let exe = b.join("prog");
        std::fs::write(&exe, "").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths([&a, &b]).unwrap();
        // Not executable in `a`: the one in `b`.
        assert_eq!(find_program("prog", &path), Some(exe.clone()));
        // Only `a` on the PATH: none, whatever /usr/bin holds.
        assert_eq!(find_program("prog", a.as_os_str()), None);
        assert_eq!(find_program("sh", a.as_os_str()), None);
    }
}
