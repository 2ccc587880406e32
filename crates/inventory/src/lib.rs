//! The system-configuration appendix, collected automatically.
//!
//! Published OS comparisons end with an "Appendix A – system configuration
//! information": processor packages, cores and threads, caches, RAM, BIOS,
//! kernel, distribution, NICs, disks and file systems, one column per system
//! under test. A reader needs it to judge whether two results are comparable
//! at all. This crate gathers what the kernel itself can tell about those
//! items into a plain, serde-serializable [`Inventory`], so that it can be
//! stored with every run and rendered later ([`render_text`],
//! [`render_markdown`]) — measuring produces data, rendering is a separate
//! layer.
//!
//! Sources are read directly: `/proc` (cpuinfo, meminfo, mounts, cmdline,
//! sysctls), `/sys` (CPU topology and caches, cpufreq, cpuidle, DMI, NICs,
//! block devices), `/etc/os-release`, `uname(2)`, and — only when installed —
//! `ethtool -i` (NIC firmware) and `ip -j addr` (addresses). Items that a
//! container, a VM or an unprivileged user cannot see become `None` or empty
//! and are explained in [`Inventory::warnings`]; [`collect`] never fails.
//!
//! What the kernel cannot tell (power supplies, fans, DIMM part numbers —
//! those need root and `dmidecode`) is not collected; a caller can add such
//! facts by hand to [`Tools::extra`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod collect;
mod parse;
mod render;

pub use render::{host_table, render_markdown, render_text, HostTable, Row as HostTableRow};

/// Everything known about one host at one moment.
///
/// Invariant: produced by [`collect`] (or deserialized from its JSON); every
/// field that could not be read is `None`/empty and has a matching line in
/// `warnings`. `#[serde(default)]` lets a newer benchlab read inventories
/// stored by an older one that lacked some field.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Inventory {
    /// The node name from `uname(2)` (the UTS namespace's host name).
    pub hostname: String,
    /// When the inventory was taken, RFC 3339 in UTC with second precision,
    /// e.g. `2025-03-01T12:00:00Z`.
    pub collected_at: String,
    pub system: SystemInfo,
    pub cpu: CpuInfo,
    pub memory: MemoryInfo,
    pub os: OsInfo,
    /// Every entry of `/sys/class/net`, sorted by name.
    pub nics: Vec<Nic>,
    /// Every entry of `/sys/block` except `loop*` and `ram*`, sorted by name.
    pub disks: Vec<Disk>,
    /// Real file systems from `/proc/self/mounts`, in mount order, one per
    /// mount point (the visible, last-mounted one).
    pub filesystems: Vec<Filesystem>,
    /// `net.core.*`, `net.ipv4.tcp_*`, `net.ipv4.udp_*` and `vm.*`, keyed like
    /// `sysctl(8)` names (`net.core.rmem_max`), values with runs of
    /// whitespace collapsed to one space (`4096 131072 6291456`).
    pub sysctls: BTreeMap<String, String>,
    pub tools: Tools,
    /// One line per item that could not be read, saying what and why.
    pub warnings: Vec<String>,
    /// What benchlab booted when the host is a QEMU guest (the controller
    /// adds it to the inventory the guest's agent took).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest: Option<GuestFacts>,
}

/// A QEMU guest as booted: what the inventory appendix says of it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct GuestFacts {
    /// The study's host name.
    pub host: String,
    /// QEMU's version.
    pub qemu: String,
    /// The machine type.
    pub machine: String,
    /// "kvm" or "tcg".
    pub accel: String,
    /// Why the guest is emulated (TCG), when it is.
    pub emulated: Option<String>,
    /// vCPUs.
    pub vcpus: u32,
    /// Host CPU of each vCPU's thread (`None`: not pinned).
    pub vcpu_cpus: Vec<Option<usize>>,
    /// Each vCPU's QEMU thread id.
    pub vcpu_threads: Vec<i32>,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// "2 MiB huge pages (hugetlb memfd, preallocated)" or "anonymous".
    pub memory_backing: String,
    /// The NIC and where it is joined.
    pub nic: String,
    /// The guest's kernel release.
    pub kernel: String,
    /// Seconds from QEMU's start to the guest's agent channel being up.
    pub boot_s: f64,
}

/// Platform identity from DMI/SMBIOS (`/sys/class/dmi/id`).
///
/// Absent on boards without SMBIOS (many ARM boards) and in microVMs such as
/// Firecracker; serial numbers and UUIDs are root-only and deliberately not
/// read, since an appendix is meant to be published.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SystemInfo {
    pub sys_vendor: Option<String>,
    pub product_name: Option<String>,
    pub product_version: Option<String>,
    pub board_vendor: Option<String>,
    pub board_name: Option<String>,
    pub bios_vendor: Option<String>,
    pub bios_version: Option<String>,
    pub bios_date: Option<String>,
}

/// Processor identity, topology, frequency and caches.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuInfo {
    /// `model name` (x86), else `Processor`/`Hardware`/`cpu model`/`uarch`.
    pub model_name: Option<String>,
    /// `vendor_id` (x86, e.g. `GenuineIntel`) or `CPU implementer` (ARM).
    pub vendor: Option<String>,
    pub family: Option<String>,
    pub model: Option<String>,
    pub stepping: Option<String>,
    pub microcode: Option<String>,
    /// Distinct physical packages among online CPUs.
    pub sockets: Option<u32>,
    /// Largest number of distinct cores found in one package.
    pub cores_per_socket: Option<u32>,
    /// Largest number of hardware threads found on one core. On hybrid parts
    /// (performance and efficiency cores) not every core has this many.
    pub threads_per_core: Option<u32>,
    /// `/sys/devices/system/cpu/smt/control`: `on`, `off`, `forceoff`,
    /// `notsupported` or `notimplemented` — whether SMT (Hyper-Threading)
    /// was switched off, which `threads_per_core` alone cannot tell.
    pub smt_control: Option<String>,
    /// Online logical CPUs; never 0 after [`collect`].
    pub logical_cpus: u32,
    pub numa_nodes: Option<u32>,
    /// `cpu MHz` of the first CPU in `/proc/cpuinfo`, a momentary reading.
    pub cur_freq_khz: Option<u64>,
    /// cpufreq's hardware limits (`cpuinfo_min_freq`/`cpuinfo_max_freq`).
    pub min_freq_khz: Option<u64>,
    pub max_freq_khz: Option<u64>,
    /// Number of feature flags (`flags` on x86, `Features` on ARM).
    pub flags_count: usize,
    /// The flags from a short list that matter when comparing results
    /// (virtualization, invariant TSC, vector and crypto extensions).
    pub notable_flags: Vec<String>,
    /// The caches of the first online CPU, in `index*` order.
    pub caches: Vec<CacheInfo>,
}

/// One cache as the first online CPU sees it
/// (`/sys/devices/system/cpu/cpuN/cache/indexM`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CacheInfo {
    pub level: u8,
    /// `Data`, `Instruction` or `Unified`.
    #[serde(rename = "type")]
    pub kind: String,
    pub size_bytes: Option<u64>,
    /// CPUs sharing this cache instance, kernel list syntax (`0-3,8`).
    pub shared_cpu_list: String,
    /// Distinct instances of this cache across online CPUs (e.g. one L3 per
    /// package or per CCX).
    pub instances: Option<u32>,
}

/// Memory as the kernel sees it (`/proc/meminfo`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryInfo {
    /// `MemTotal`: usable RAM, a little below the installed DIMM capacity
    /// because firmware and the kernel image reserve some.
    pub total_bytes: Option<u64>,
    pub swap_total_bytes: Option<u64>,
    /// Persistent huge pages of the default size (`HugePages_Total`).
    pub hugepages_total: Option<u64>,
    pub hugepages_free: Option<u64>,
    pub hugepage_size_bytes: Option<u64>,
}

/// Kernel, distribution and the kernel-side tunables that decide performance
/// before any sysctl is touched.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct OsInfo {
    /// `uname -s`, e.g. `Linux`.
    pub kernel_name: Option<String>,
    /// `uname -r`, e.g. `6.8.0-45-generic`.
    pub kernel_release: Option<String>,
    /// `uname -v`, the build string (`#1 SMP PREEMPT_DYNAMIC …`).
    pub kernel_version: Option<String>,
    /// `uname -m`, e.g. `x86_64`.
    pub machine: Option<String>,
    /// `PRETTY_NAME` from os-release(5).
    pub distribution: Option<String>,
    /// `/proc/cmdline`.
    pub cmdline: Option<String>,
    pub clocksource_current: Option<String>,
    pub clocksource_available: Vec<String>,
    /// The selected value of `/sys/kernel/mm/transparent_hugepage/enabled`.
    pub thp_enabled: Option<String>,
    pub thp_defrag: Option<String>,
    /// `scaling_driver`, e.g. `intel_pstate`, `acpi-cpufreq`, `amd-pstate-epp`.
    pub cpufreq_driver: Option<String>,
    /// Each distinct `scaling_governor` → the CPUs using it (`0-15`).
    pub cpufreq_governors: BTreeMap<String, String>,
    /// Each distinct `energy_performance_preference` → the CPUs using it.
    pub energy_performance_preferences: BTreeMap<String, String>,
    /// Turbo/boost allowed (`cpufreq/boost`, or `intel_pstate/no_turbo`
    /// inverted).
    pub boost: Option<bool>,
    pub cpuidle_driver: Option<String>,
    pub cpuidle_governor: Option<String>,
}

/// One network interface (`/sys/class/net/NAME`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Nic {
    pub name: String,
    /// Kernel driver (`ixgbe`, `virtio_net`), or `virtual` for interfaces
    /// without a backing device (lo, bridges, veth, bonds).
    pub driver: Option<String>,
    /// From `ethtool -i`, when ethtool is installed and the driver reports it.
    pub firmware_version: Option<String>,
    /// Link speed; `None` when the link is down, virtual or unknown.
    pub speed_mbps: Option<u64>,
    pub mtu: Option<u32>,
    pub mac: Option<String>,
    /// `up`, `down`, `unknown` (normal for lo), …
    pub operstate: Option<String>,
    pub rx_queues: Option<u32>,
    pub tx_queues: Option<u32>,
    /// `address/prefix`, from `ip -j addr` when iproute2 is installed.
    pub ipv4: Vec<String>,
    pub ipv6: Vec<String>,
}

/// One whole block device (`/sys/block/NAME`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Disk {
    pub name: String,
    pub model: Option<String>,
    pub vendor: Option<String>,
    pub size_bytes: Option<u64>,
    pub rotational: Option<bool>,
    /// The active I/O scheduler (the bracketed entry of `queue/scheduler`).
    pub scheduler: Option<String>,
    pub read_ahead_kb: Option<u64>,
    pub nr_requests: Option<u64>,
}

/// One mounted file system (`/proc/self/mounts`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Filesystem {
    pub device: String,
    pub mount_point: String,
    pub fs_type: String,
    pub options: String,
}

/// Versions of the software doing the measuring, filled by the caller.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Tools {
    /// Free-form facts, e.g. `benchlab` → `0.1.0`, `netperf` → `2.7.0`.
    pub extra: BTreeMap<String, String>,
}

/// Take the inventory of this host. Never fails and never hangs for long:
/// anything unreadable is left empty and explained in
/// [`Inventory::warnings`]; the external tools get a few seconds each.
pub fn collect() -> Inventory {
    collect::Collector::live().collect()
}
