//! The guest kernel: Debian's `linux-image-*-amd64` package, fetched with
//! `apt-get download` and unpacked (never installed: installing pulls
//! initramfs-tools and udev into the host) into benchlab's cache by
//! `scripts/guest-kernel.sh`, and the modules the initramfs needs, found
//! with their dependencies in the unpacked tree.
//!
//! A guest boots the kernel its study names (`guest.kernel`, a release
//! fetched on demand by the same script, or an unpacked tree's path), or
//! else the cache's default: the one `guest-kernel.sh` fetched without a
//! release, so that fetching another kernel for one study never changes
//! what every other guest boots.

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

/// The script that fetches a kernel into the cache, carried in the
/// binary so that a study naming a kernel not yet fetched gets it
/// wherever benchlab runs from.
const FETCH_SCRIPT: &str = include_str!("../../../scripts/guest-kernel.sh");

/// The file in the cache that names the default kernel.
const DEFAULT_FILE: &str = "default";

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

/// An unpacked kernel in `root` (`boot/vmlinuz-RELEASE`,
/// `lib/modules/RELEASE`), `None` when it is not one.
fn unpacked(root: &Path, release: &str) -> Option<Kernel> {
    let image = root.join("boot").join(format!("vmlinuz-{release}"));
    let modules = root.join("lib/modules").join(release);
    (image.is_file() && modules.is_dir()).then(|| Kernel {
        release: release.to_string(),
        image,
        modules,
    })
}

/// Debian's own flavour: no `-rt-`, `-cloud-` or other variant in its
/// release, which a guest asked for nothing in particular should boot.
fn plain_flavour(release: &str) -> bool {
    let parts: Vec<&str> = release.split('-').collect();
    parts.len() >= 2
        && parts[parts.len() - 1] == "amd64"
        && parts[parts.len() - 2]
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_digit())
}

impl Kernel {
    /// The cache's default kernel, or an error naming the command that
    /// fetches one.
    pub fn find() -> Result<Kernel, GuestError> {
        Self::find_in(&cache_dir())
    }

    /// The default kernel under `dir`: the one its `default` file names,
    /// else the newest of Debian's plain flavour, else the newest.
    pub fn find_in(dir: &Path) -> Result<Kernel, GuestError> {
        let missing = || GuestError::Missing {
            what: format!("no guest kernel in {}", dir.display()),
            fix: FETCH_COMMAND.into(),
        };
        if let Ok(name) = fs::read_to_string(dir.join(DEFAULT_FILE)) {
            if let Some(k) = unpacked(&dir.join(name.trim()), name.trim()) {
                return Ok(k);
            }
        }
        let mut found: Vec<Kernel> = Vec::new();
        for e in fs::read_dir(dir).map_err(|_| missing())?.flatten() {
            let release = e.file_name().to_string_lossy().to_string();
            found.extend(unpacked(&e.path(), &release));
        }
        found.sort_by_key(|k| (plain_flavour(&k.release), version_key(&k.release)));
        found.pop().ok_or_else(missing)
    }

    /// The kernel a study's `guest.kernel` names, as it is now: a release
    /// in the cache, or an unpacked tree at an absolute path. `None`
    /// names the default.
    pub fn named(kernel: Option<&str>) -> Result<Kernel, GuestError> {
        let Some(name) = kernel else {
            return Self::find();
        };
        let path = Path::new(name);
        if path.is_absolute() {
            let boot = path.join("boot");
            let releases: Vec<String> = fs::read_dir(&boot)
                .map_err(|e| GuestError::Kernel(format!("{}: {e}", boot.display())))?
                .flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()?
                        .strip_prefix("vmlinuz-")
                        .map(str::to_string)
                })
                .collect();
            let [release] = releases.as_slice() else {
                return Err(GuestError::Kernel(format!(
                    "{}: expected one boot/vmlinuz-RELEASE, found {}",
                    path.display(),
                    releases.len()
                )));
            };
            return unpacked(path, release).ok_or_else(|| {
                GuestError::Kernel(format!(
                    "{}: no lib/modules/{release} beside boot/vmlinuz-{release}",
                    path.display()
                ))
            });
        }
        unpacked(&cache_dir().join(name), name).ok_or_else(|| {
            GuestError::Kernel(format!(
                "kernel {name} is not in {} (`{FETCH_COMMAND} {name}` fetches it)",
                cache_dir().display()
            ))
        })
    }

    /// The kernel `guest.kernel` names, fetched into the cache first when
    /// it is a release not there yet; then checked to have every module
    /// the initramfs loads. The error says which of the two failed.
    pub fn ensure(kernel: Option<&str>) -> Result<Kernel, GuestError> {
        let k = match kernel {
            Some(name) if !Path::new(name).is_absolute() => match Self::named(Some(name)) {
                Ok(k) => k,
                Err(_) => {
                    fetch(name)?;
                    Self::named(Some(name))?
                }
            },
            other => Self::named(other)?,
        };
        let missing: Vec<&str> = NEEDED_MODULES
            .iter()
            .copied()
            .filter(|m| k.module_order(&[m]).is_err())
            .collect();
        if !missing.is_empty() {
            return Err(GuestError::Kernel(format!(
                "{} cannot boot a guest: it has no module {} (a guest needs {} as modules or built in)",
                k.release,
                missing.join(", "),
                NEEDED_MODULES.join(", ")
            )));
        }
        Ok(k)
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

/// Fetches release `release` into the cache with the script benchlab
/// carries (`guest-kernel.sh RELEASE`); its error is the script's own.
pub fn fetch(release: &str) -> Result<(), GuestError> {
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(FETCH_SCRIPT)
        .arg("guest-kernel.sh")
        .arg(release)
        .env(
            "BENCHLAB_CACHE_DIR",
            cache_dir().parent().unwrap_or(Path::new("/")),
        )
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| GuestError::Kernel(format!("cannot run bash for {FETCH_COMMAND}: {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    Err(GuestError::Kernel(format!(
        "cannot fetch kernel {release}: {}",
        lines[lines.len().saturating_sub(3)..].join(" | ")
    )))
}

/// A release's flavour: its parts from the first that starts with a
/// letter (`amd64`, `rt-amd64`, `cloud-amd64`).
fn flavour(release: &str) -> String {
    let parts: Vec<&str> = release.split('-').collect();
    let k = parts
        .iter()
        .position(|p| p.starts_with(|c: char| c.is_ascii_alphabetic()))
        .unwrap_or(parts.len());
    parts[k..].join("-")
}

/// The releases in the cache from `from` to `to`, both included, of
/// their flavour, in version order from `from`'s side: the kernels a
/// bisection between the two can boot without fetching one. Only the two
/// ends when the flavours differ.
pub fn cached_between(from: &str, to: &str) -> Vec<String> {
    let ends = vec![from.to_string(), to.to_string()];
    if flavour(from) != flavour(to) {
        return ends;
    }
    let (a, b) = (version_key(from), version_key(to));
    let (lo, hi) = if a <= b { (&a, &b) } else { (&b, &a) };
    let mut found: Vec<String> = fs::read_dir(cache_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|r| flavour(r) == flavour(from) && r != from && r != to)
        .filter(|r| unpacked(&cache_dir().join(r), r).is_some())
        .filter(|r| {
            let k = version_key(r);
            &k > lo && &k < hi
        })
        .collect();
    found.sort_by_key(|r| version_key(r));
    if a > b {
        found.reverse();
    }
    let mut out = vec![from.to_string()];
    out.extend(found);
    out.push(to.to_string());
    out
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

    fn fake_kernel(root: &Path, release: &str) {
        fs::create_dir_all(root.join("boot")).unwrap();
        fs::write(root.join("boot").join(format!("vmlinuz-{release}")), "").unwrap();
        fs::create_dir_all(root.join("lib/modules").join(release).join("kernel")).unwrap();
    }

    #[test]
    fn the_default_is_named_else_the_newest_plain_flavour() {
        let d = tempfile::tempdir().unwrap();
        for r in [
            "6.1.0-50-amd64",
            "6.1.0-57-rt-amd64",
            "6.12.100+deb12-cloud-amd64",
        ] {
            fake_kernel(&d.path().join(r), r);
        }
        assert_eq!(Kernel::find_in(d.path()).unwrap().release, "6.1.0-50-amd64");
        fake_kernel(&d.path().join("6.1.0-47-amd64"), "6.1.0-47-amd64");
        fs::write(d.path().join(DEFAULT_FILE), "6.1.0-47-amd64\n").unwrap();
        assert_eq!(Kernel::find_in(d.path()).unwrap().release, "6.1.0-47-amd64");
        assert!(plain_flavour("6.12.100+deb12-amd64"));
        assert!(!plain_flavour("6.12.100+deb12-rt-amd64"));
    }

    #[test]
    fn a_path_names_an_unpacked_tree_and_its_one_release() {
        let d = tempfile::tempdir().unwrap();
        fake_kernel(d.path(), "6.1.0-50-amd64");
        let k = Kernel::named(Some(d.path().to_str().unwrap())).unwrap();
        assert_eq!(k.release, "6.1.0-50-amd64");
        // Modules missing: refused, naming the module and what is needed.
        let e = Kernel::ensure(Some(d.path().to_str().unwrap()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot boot a guest: it has no module virtio_pci, virtio_console, 9pnet_virtio, 9p, overlay, virtio_net"),
            "{e}"
        );
        fake_kernel(d.path(), "6.1.0-57-amd64");
        let e = Kernel::named(Some(d.path().to_str().unwrap()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expected one boot/vmlinuz-RELEASE, found 2"),
            "{e}"
        );
    }

    #[test]
    fn flavours_are_the_parts_after_the_version() {
        assert_eq!(flavour("6.1.0-50-amd64"), "amd64");
        assert_eq!(flavour("6.1.0-57-rt-amd64"), "rt-amd64");
        assert_eq!(flavour("6.12.100+deb12-amd64"), "amd64");
        assert_eq!(
            cached_between("6.1.0-50-amd64", "6.1.0-50-rt-amd64"),
            ["6.1.0-50-amd64", "6.1.0-50-rt-amd64"]
        );
    }

    #[test]
    fn non_elf_has_no_section() {
        assert!(elf_section(b"not an elf file at all, just text", ".modinfo").is_none());
    }
}
