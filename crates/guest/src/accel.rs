//! Which acceleration a guest gets: KVM only where a probe guest (this
//! kernel and initramfs, loading its modules and powering off) really
//! runs under it. Some machines expose a `/dev/kvm` that cannot run a
//! stock kernel (a paravirtual KVM: the guest stops with "KVM internal
//! error. Suberror: 1"), so the device's presence proves nothing. The
//! answer is cached per boot of this host.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::kernel::Kernel;
use crate::spec::Accel;
use crate::GuestError;

/// How long the probe guest may take (it needs about a second under KVM).
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);
/// The mark every output puts on an emulated guest's figures (the
/// report's read model, in crates/report, uses the same words).
pub use benchlab_core::study::EMULATED;

/// The probe's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvmProbe {
    /// A stock kernel runs under KVM here.
    pub works: bool,
    /// Why not (or "ok").
    pub reason: String,
    /// This host's boot the answer holds for.
    pub boot_id: String,
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn cache_file() -> PathBuf {
    crate::kernel::cache_dir().join("kvm-probe.json")
}

/// The acceleration a guest asking for `requested` runs with here, and,
/// when it is emulated, why. `accel = "kvm"` where KVM cannot run a
/// guest is refused with the probe's reason.
pub fn resolve(requested: Accel, host: &str) -> Result<(Accel, Option<String>), GuestError> {
    if requested == Accel::Tcg {
        return Ok((Accel::Tcg, Some("accel = \"tcg\" asked".into())));
    }
    let probe = probe()?;
    match (requested, probe.works) {
        (_, true) => Ok((Accel::Kvm, None)),
        (Accel::Kvm, false) => Err(GuestError::Refused(format!(
            "host `{host}`: guest.accel = \"kvm\": KVM cannot run a guest on this machine ({}); allowed here: \"auto\" or \"tcg\" (TCG emulation: {EMULATED})",
            probe.reason
        ))),
        _ => Ok((
            Accel::Tcg,
            Some(format!("KVM cannot run a guest here ({})", probe.reason)),
        )),
    }
}

/// The KVM probe's answer, from the cache when it holds for this boot.
pub fn probe() -> Result<KvmProbe, GuestError> {
    let id = boot_id();
    if let Ok(text) = std::fs::read_to_string(cache_file()) {
        if let Ok(p) = serde_json::from_str::<KvmProbe>(&text) {
            if p.boot_id == id {
                return Ok(p);
            }
        }
    }
    let (works, reason) = if !Path::new("/dev/kvm").exists() {
        (false, "no /dev/kvm".to_string())
    } else {
        run_probe()?
    };
    let p = KvmProbe {
        works,
        reason,
        boot_id: id,
    };
    let _ = std::fs::create_dir_all(crate::kernel::cache_dir());
    let tmp = cache_file().with_extension("part");
    if std::fs::write(&tmp, serde_json::to_vec(&p).expect("serializes")).is_ok() {
        let _ = std::fs::rename(&tmp, cache_file());
    }
    Ok(p)
}

/// Boots the probe guest under KVM: it loads the initramfs's modules,
/// prints a mark on its console and powers off.
fn run_probe() -> Result<(bool, String), GuestError> {
    let qemu = crate::qemu_path()?;
    let kernel = Kernel::find()?;
    let initrd = crate::initramfs::cached(&kernel)?;
    let dir = std::env::temp_dir().join(format!("benchlab-kvm-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| GuestError::Io(format!("{}: {e}", dir.display())))?;
    let console = dir.join("console.log");
    let log = dir.join("qemu.log");
    let out = std::fs::File::create(&log).map_err(|e| GuestError::Io(e.to_string()))?;
    let mut child = Command::new(qemu)
        .args(["-accel", "kvm", "-cpu", "host", "-m", "256", "-smp", "1"])
        .args([
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
        ])
        .arg("-kernel")
        .arg(&kernel.image)
        .arg("-initrd")
        .arg(&initrd)
        .args(["-append", "console=ttyS0 panic=-1 benchlab_probe=1"])
        .arg("-serial")
        .arg(format!("file:{}", console.display()))
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(|e| GuestError::Io(e.to_string()))?)
        .stderr(out)
        .spawn()
        .map_err(|e| GuestError::Io(format!("cannot start the KVM probe guest: {e}")))?;
    let start = Instant::now();
    let result = loop {
        let con = std::fs::read_to_string(&console).unwrap_or_default();
        let err = std::fs::read_to_string(&log).unwrap_or_default();
        if con.contains("benchlab-guest-probe-ok") {
            break (true, "ok".to_string());
        }
        // A stopped vCPU leaves QEMU running (paused): read its message.
        if let Some(l) = err
            .lines()
            .find(|l| l.contains("KVM internal error") || l.contains("failed to initialize kvm"))
        {
            break (false, l.trim().to_string());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let last = err.lines().last().unwrap_or("").trim().to_string();
            break (
                false,
                format!("the probe guest ended ({status}) without booting: {last}"),
            );
        }
        if start.elapsed() > PROBE_TIMEOUT {
            break (
                false,
                format!(
                    "the probe guest did not boot within {} s",
                    PROBE_TIMEOUT.as_secs()
                ),
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(result)
}
