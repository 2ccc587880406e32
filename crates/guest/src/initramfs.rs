//! The initramfs benchlab builds for its guests: Debian's static busybox,
//! the kernel modules the early boot needs, and a short init script that
//! mounts this host's root read-only over 9p under a tmpfs overlay, sets
//! up the NIC and hands over to `benchlab guest-init` in the new root.
//!
//! The archive is an uncompressed cpio "newc" archive (the kernel unpacks
//! it as is; compressing a few MB would cost more boot time under TCG
//! than reading them).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::kernel::{Kernel, NEEDED_MODULES};
use crate::GuestError;

/// Debian's statically linked busybox (package `busybox-static`).
pub const BUSYBOX: &str = "/bin/busybox";

/// The mount tag of the host's root file system.
pub const ROOT_TAG: &str = "hostroot";

/// The early init. Kernel parameters of the form `benchlab_x=…` reach it
/// as environment variables (the kernel passes unknown `name=value`
/// parameters without a dot to init).
const INIT: &str = r#"#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sysfs /sys
$B mount -t devtmpfs devtmpfs /dev
fail() {
  echo "benchlab-guest: $*" > /dev/console
  $B poweroff -f
}
for m in $($B cat /modules); do
  $B insmod "/lib/modules/$m" || fail "cannot load module $m"
done
if [ -n "$benchlab_probe" ]; then
  echo "benchlab-guest-probe-ok" > /dev/console
  $B poweroff -f
fi
$B mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /lower || fail "cannot mount the host's root over 9p"
$B mount -t tmpfs -o mode=0755 rw /rw || fail "cannot mount the overlay's tmpfs"
$B mkdir -p /rw/upper /rw/work
$B mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot || fail "cannot mount the overlay"
$B ip link set lo up
if [ -n "$benchlab_ip" ]; then
  $B ip link set eth0 up || fail "no NIC eth0"
  $B ip addr add "$benchlab_ip" dev eth0 || fail "cannot set address $benchlab_ip"
fi
[ -n "$benchlab_hostname" ] && $B hostname "$benchlab_hostname"
$B umount /proc /sys /dev
exec $B switch_root /newroot "$benchlab_exe" guest-init
"#;

/// A cpio "newc" archive being written.
struct Cpio<W: Write> {
    out: W,
    ino: u32,
    written: u64,
}

impl<W: Write> Cpio<W> {
    fn entry(
        &mut self,
        name: &str,
        mode: u32,
        rdev: (u32, u32),
        data: &[u8],
    ) -> std::io::Result<()> {
        self.ino += 1;
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.ino,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() + 1,
            0
        );
        self.put(header.as_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&[0])?;
        self.pad()?;
        self.put(data)?;
        self.pad()
    }

    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.written += b.len() as u64;
        self.out.write_all(b)
    }

    fn pad(&mut self) -> std::io::Result<()> {
        let n = (4 - (self.written % 4) as usize) % 4;
        self.put(&[0u8; 3][..n])
    }

    fn dir(&mut self, name: &str) -> std::io::Result<()> {
        self.entry(name, 0o040755, (0, 0), &[])
    }

    fn file(&mut self, name: &str, mode: u32, data: &[u8]) -> std::io::Result<()> {
        self.entry(name, 0o100000 | mode, (0, 0), data)
    }

    fn finish(mut self) -> std::io::Result<W> {
        self.entry("TRAILER!!!", 0, (0, 0), &[])?;
        Ok(self.out)
    }
}

/// Builds the initramfs for `kernel` at `path` (written to a temporary
/// name and renamed, so a reader never sees half an archive).
pub fn build(kernel: &Kernel, path: &Path) -> Result<(), GuestError> {
    let busybox = fs::read(BUSYBOX).map_err(|_| GuestError::Missing {
        what: format!("no static busybox at {BUSYBOX}"),
        fix: "apt-get install busybox-static (or bash scripts/setup.sh)".into(),
    })?;
    let modules = kernel.module_order(NEEDED_MODULES)?;
    let io = |e: std::io::Error| GuestError::Io(format!("writing {}: {e}", path.display()));
    let part = path.with_extension("part");
    let file = fs::File::create(&part).map_err(io)?;
    let mut c = Cpio {
        out: std::io::BufWriter::new(file),
        ino: 0,
        written: 0,
    };
    for d in [
        "bin",
        "dev",
        "proc",
        "sys",
        "lower",
        "rw",
        "newroot",
        "lib",
        "lib/modules",
    ] {
        c.dir(d).map_err(io)?;
    }
    // The kernel opens /dev/console for init before devtmpfs is mounted.
    c.entry("dev/console", 0o020600, (5, 1), &[]).map_err(io)?;
    c.file("bin/busybox", 0o755, &busybox).map_err(io)?;
    c.file("init", 0o755, INIT.as_bytes()).map_err(io)?;
    let mut list = String::new();
    for m in &modules {
        let name = m
            .file_name()
            .and_then(|n| n.to_str())
            .expect("module names are UTF-8");
        let data = fs::read(m).map_err(io)?;
        c.file(&format!("lib/modules/{name}"), 0o644, &data)
            .map_err(io)?;
        list.push_str(name);
        list.push('\n');
    }
    c.file("modules", 0o644, list.as_bytes()).map_err(io)?;
    let mut out = c.finish().map_err(io)?;
    out.flush().map_err(io)?;
    drop(out);
    fs::rename(&part, path).map_err(io)?;
    Ok(())
}

/// The initramfs for `kernel` in the cache, built if missing (keyed by
/// the kernel release and this benchlab's version, as the init script
/// may change with it).
pub fn cached(kernel: &Kernel) -> Result<PathBuf, GuestError> {
    let path = crate::kernel::cache_dir().join(format!(
        "initramfs-{}-benchlab-{}.cpio",
        kernel.release,
        env!("CARGO_PKG_VERSION")
    ));
    if !path.is_file() {
        build(kernel, &path)?;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_entries_are_aligned_and_terminated() {
        let mut c = Cpio {
            out: Vec::new(),
            ino: 0,
            written: 0,
        };
        c.file("init", 0o755, b"abcde").unwrap();
        let out = c.finish().unwrap();
        assert_eq!(out.len() % 4, 0);
        assert!(out.starts_with(b"070701"));
        // name "init\0" after the 110-byte header, padded to 116, then data.
        assert_eq!(&out[110..115], b"init\0");
        assert_eq!(&out[116..121], b"abcde");
        assert!(out.windows(10).any(|w| w == b"TRAILER!!!"));
    }
}
