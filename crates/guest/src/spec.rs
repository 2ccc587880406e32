//! What a guest is asked to be, and the checks that refuse what this
//! host cannot give before anything starts.

pub use benchlab_core::study::{Accel, GuestNet as Net, GuestSpec};

/// A guest to boot: the study's host name and its `guest` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The study's name of the host.
    pub name: String,
    /// Its `guest = { … }`.
    pub guest: GuestSpec,
}

impl std::ops::Deref for Spec {
    type Target = GuestSpec;
    fn deref(&self) -> &GuestSpec {
        &self.guest
    }
}

/// Huge page size used for guest memory, KiB.
pub const HUGEPAGE_KIB: u64 = 2048;
/// Least guest memory that boots the Debian kernel with the overlay, MiB.
pub const MIN_MEMORY_MIB: u64 = 256;

/// This host's online CPUs.
pub fn online_cpus() -> Vec<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<usize>().ok()),
        }
    }
    out
}

/// A /proc/meminfo value, KiB.
pub fn meminfo_kib(key: &str) -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

impl Spec {
    /// Checks what this host can give: vCPUs, memory, pinned CPUs. Each
    /// problem names the key (`guest.vcpus` of host `NAME`) and what is
    /// allowed.
    pub fn check_host(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let key = |k: &str| format!("host `{}`: guest.{k}", self.name);
        let online = online_cpus();
        if self.vcpus == 0 || self.vcpus as usize > online.len() {
            problems.push(format!(
                "{} = {}: this host has {} CPU(s); allowed 1 … {}",
                key("vcpus"),
                self.vcpus,
                online.len(),
                online.len()
            ));
        }
        let avail_mib = meminfo_kib("MemAvailable").unwrap_or(0) / 1024;
        // Half of what is free: the host's own programs (the clients, the
        // controller) need the rest.
        let limit = avail_mib / 2;
        if self.memory_mib < MIN_MEMORY_MIB || self.memory_mib > limit {
            problems.push(format!(
                "{} = {} MiB: allowed {MIN_MEMORY_MIB} … {limit} MiB (half of this host's {avail_mib} MiB available)",
                key("memory"),
                self.memory_mib
            ));
        }
        if !self.cpus.is_empty() {
            if self.cpus.len() != self.vcpus as usize {
                problems.push(format!(
                    "{} has {} CPU(s) for {} vCPU(s): give one host CPU per vCPU",
                    key("cpus"),
                    self.cpus.len(),
                    self.vcpus
                ));
            }
            for c in &self.cpus {
                if !online.contains(c) {
                    problems.push(format!(
                        "{}: CPU {c} is not an online CPU of this host (online: {})",
                        key("cpus"),
                        list(&online)
                    ));
                }
            }
        }
        if self.hugepages && !(self.memory_mib * 1024).is_multiple_of(HUGEPAGE_KIB) {
            problems.push(format!(
                "{} with hugepages: memory must be a multiple of {} MiB",
                key("memory"),
                HUGEPAGE_KIB / 1024
            ));
        }
        problems
    }

    /// Huge pages this guest needs.
    pub fn hugepages_needed(&self) -> u64 {
        if self.hugepages {
            self.memory_mib * 1024 / HUGEPAGE_KIB
        } else {
            0
        }
    }
}

/// `0-1,3` style list.
pub fn list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            name: "g".into(),
            guest: GuestSpec {
                vcpus: 1,
                memory_mib: 512,
                cpus: vec![],
                hugepages: false,
                net: Net::Bridge {
                    bridge: "br0".into(),
                    netns: None,
                    ip: "10.0.0.2/24".into(),
                },
                accel: Accel::Tcg,
                kernel: None,
            },
        }
    }

    #[test]
    fn too_many_vcpus_and_unknown_cpus_are_refused_by_key() {
        let mut s = spec();
        s.guest.vcpus = 100_000;
        s.guest.cpus = vec![99_999];
        let p = s.check_host().join("\n");
        assert!(p.contains("guest.vcpus = 100000"), "{p}");
        assert!(
            p.contains("guest.cpus: CPU 99999 is not an online CPU"),
            "{p}"
        );
        assert!(p.contains("one host CPU per vCPU"), "{p}");
    }

    #[test]
    fn too_much_memory_is_refused_with_the_limit() {
        let mut s = spec();
        s.guest.memory_mib = 1 << 40;
        let p = s.check_host().join("\n");
        assert!(
            p.contains("guest.memory") && p.contains("allowed 256"),
            "{p}"
        );
    }

    #[test]
    fn a_fitting_guest_passes() {
        assert!(spec().check_host().is_empty(), "{:?}", spec().check_host());
    }
}
