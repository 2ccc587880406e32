//! The guest kernel: Debian's `linux-image-*-amd64` package, fetched with
//! `apt-get download` and unpacked (never installed: installing pulls
//! initramfs-tools and udev into the host) into benchlab's cache by
//! `scripts/guest-kernel.sh`, and the modules the initramfs needs, found
//! with their dependencies in the unpacked tree.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::GuestError;

/// The command that fetches the guest kernel into the cache.
pub const FETCH_COMMAND: &str = "bash scripts/guest-kernel.sh";

/// The modules the initramfs loads, by the name the kernel gives them:
/// the PCI transport, the console port the agent talks over, the 9p file
/// system the host's root arrives by, the overlay over it, and the NIC.
/// Debian builds each as a module; their dependencies are added.
pub const NEEDED_MODULES: &[&str] = &[
    "virtio_pci",
    "virtio_console",
    "9pnet_virtio",
    "9p",
    "overlay",
    "virtio_net",
];

/// Where unpacked kernels live: `$BENCHLAB_CACHE_DIR/guest`, else
/// `/var/cache/benchlab/guest` (one directory per kernel release).
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("BENCHLAB_CACHE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("guest"),
        _ => PathBuf::from("/var/cache/benchlab/guest"),
    }
}

/// An unpacked kernel package.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The release (`6.1.0-56-amd64`).
    pub release: String,
    /// The bzImage.
    pub image: PathBuf,
    /// `lib/modules/<release>` of the unpacked package.
    pub modules: PathBuf,
}

impl Kernel {
    /// The newest kernel in the cache, or an error naming the command
    /// that fetches one.
    pub fn find() -> Result<Kernel, GuestError> {
        Self::find_in(&cache_dir())
    }

    /// The newest kernel under `dir`.
    pub fn find_in(dir: &Path) -> Result<Kernel, GuestError> {
        let missing = || GuestError::Missing {
            what: format!("no guest kernel in {}", dir.display()),
            fix: FETCH_COMMAND.into(),
        };
        let mut found: Vec<Kernel> = Vec::new();
        for e in fs::read_dir(dir).map_err(|_| missing())?.flatten() {
            let release = e.file_name().to_string_lossy().to_string();
            let image = e.path().join("boot").join(format!("vmlinuz-{release}"));
            let modules = e.path().join("lib/modules").join(&release);
            if image.is_file() && modules.is_dir() {
                found.push(Kernel {
                    release,
                    image,
                    modules,
                });
            }
        }
        found.sort_by_key(|k| version_key(&k.release));
        found.pop().ok_or_else(missing)
    }

    /// The module files to load for `wanted`, dependencies first.
    pub fn module_order(&self, wanted: &[&str]) -> Result<Vec<PathBuf>, GuestError> {
        let index = module_index(&self.modules.join("kernel"))?;
        let builtin = fs::read_to_string(self.modules.join("modules.builtin")).unwrap_or_default();
        let builtin: BTreeSet<String> = builtin
            .lines()
            .filter_map(|l| l.rsplit('/').next())
            .map(|f| canonical(f.trim_end_matches(".ko")))
            .collect();
        let mut order = Vec::new();
        let mut seen = BTreeSet::new();
        for w in wanted {
            visit(&canonical(w), &index, &builtin, &mut seen, &mut order, 0)?;
        }
        Ok(order)
    }
}

/// Orders releases numerically (`6.1.0-56` after `6.1.0-9`).
fn version_key(release: &str) -> Vec<u64> {
    release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Module names use `_` and `-` interchangeably.
fn canonical(name: &str) -> String {
    name.replace('-', "_")
}

fn visit(
    name: &str,
    index: &BTreeMap<String, PathBuf>,
    builtin: &BTreeSet<String>,
    seen: &mut BTreeSet<String>,
    order: &mut Vec<PathBuf>,
    depth: usize,
) -> Result<(), GuestError> {
    if !seen.insert(name.to_string()) {
        return Ok(());
    }
    let Some(path) = index.get(name) else {
        if builtin.contains(name) {
            return Ok(());
        }
        return Err(GuestError::Kernel(format!(
            "the guest kernel has no module `{name}`"
        )));
    };
    if depth > 32 {
        return Err(GuestError::Kernel(format!(
            "module dependencies of `{name}` nest too deep"
        )));
    }
    for dep in module_depends(path)? {
        visit(&canonical(&dep), index, builtin, seen, order, depth + 1)?;
    }
    order.push(path.clone());
    Ok(())
}

/// Every `.ko` under `dir`, by canonical name.
fn module_index(dir: &Path) -> Result<BTreeMap<String, PathBuf>, GuestError> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = fs::read_dir(&d)
            .map_err(|e| GuestError::Kernel(format!("cannot read {}: {e}", d.display())))?;
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some(n) = p.file_name().and_then(|n| n.to_str()) {
                if let Some(stem) = n.strip_suffix(".ko") {
                    out.insert(canonical(stem), p.clone());
                }
            }
        }
    }
    Ok(out)
}

/// The `depends=` list of a module's `.modinfo` section (the package
/// ships no modules.dep: depmod makes it at install time).
pub fn module_depends(path: &Path) -> Result<Vec<String>, GuestError> {
    let data =
        fs::read(path).map_err(|e| GuestError::Kernel(format!("{}: {e}", path.display())))?;
    let info = elf_section(&data, ".modinfo").ok_or_else(|| {
        GuestError::Kernel(format!(
            "{}: not an uncompressed ELF64 module with .modinfo",
            path.display()
        ))
    })?;
    Ok(info
        .split(|&b| b == 0)
        .filter_map(|kv| kv.strip_prefix(b"depends="))
        .flat_map(|v| {
            String::from_utf8_lossy(v)
                .split(',')
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|d| !d.is_empty())
        .collect())
}

fn u16_at(d: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_le_bytes(d.get(at..at + 2)?.try_into().ok()?) as usize)
}
fn u32_at(d: &[u8], at: usize) -> Option<usize> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?) as usize)
}
fn u64_at(d: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(d.get(at..at + 8)?.try_into().ok()?)).ok()
}

/// A section of a little-endian ELF64 file, by name.
fn elf_section<'a>(d: &'a [u8], name: &str) -> Option<&'a [u8]> {
    if d.get(0..4)? != b"\x7fELF" || *d.get(4)? != 2 || *d.get(5)? != 1 {
        return None;
    }
    let shoff = u64_at(d, 0x28)?;
    let shentsize = u16_at(d, 0x3a)?;
    let shnum = u16_at(d, 0x3c)?;
    let shstrndx = u16_at(d, 0x3e)?;
    let header = |i: usize| -> Option<(usize, usize, usize)> {
        let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
        Some((u32_at(d, h)?, u64_at(d, h + 24)?, u64_at(d, h + 32)?))
    };
    let (_, stroff, strsize) = header(shstrndx)?;
    let strtab = d.get(stroff..stroff.checked_add(strsize)?)?;
    for i in 0..shnum {
        let (n, off, size) = header(i)?;
        let sname = strtab.get(n..)?.split(|&b| b == 0).next()?;
        if sname == name.as_bytes() {
            return d.get(off..off.checked_add(size)?);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_order_numerically() {
        assert!(version_key("6.1.0-56-amd64") > version_key("6.1.0-9-amd64"));
    }

    #[test]
    fn a_missing_cache_names_the_fetch_command() {
        let d = tempfile::tempdir().unwrap();
        let e = Kernel::find_in(d.path()).unwrap_err().to_string();
        assert!(e.contains(FETCH_COMMAND), "{e}");
    }

    #[test]
    fn non_elf_has_no_section() {
        assert!(elf_section(b"not an elf file at all, just text", ".modinfo").is_none());
    }
}
