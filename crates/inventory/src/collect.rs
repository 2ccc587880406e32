//! Reading the sources: `/proc`, `/sys`, os-release, `uname(2)` and, when
//! installed, `ethtool` and `ip`.
//!
//! Every path goes through [`Collector::path`], so that tests can point the
//! collector at a fake tree; the live collector uses `/`. Warning policy: an
//! item whose absence is normal (a virtual NIC's speed, a board without
//! `board_name`) is left `None` quietly; an item that should be there but is
//! not (no DMI at all, no cpufreq, a file that exists but cannot be read)
//! gets one warning line saying what is missing and the usual reason.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use crate::parse::{
    distribution_name, format_cpu_list, keep_filesystem, normalise_whitespace, parse_bracketed,
    parse_cache_size, parse_cpu_list, parse_cpuinfo, parse_ethtool_firmware, parse_ip_addr_json,
    parse_meminfo, parse_mounts, parse_os_release, rfc3339_utc, IfAddrs,
};
use crate::{
    CacheInfo, CpuInfo, Disk, Filesystem, Inventory, MemoryInfo, Nic, OsInfo, SystemInfo, Tools,
};

/// How long `ethtool` or `ip` may take. Both answer in milliseconds; the
/// limit only guards against a wedged driver holding the RTNL lock, so that
/// `collect()` cannot hang a study.
const TOOL_TIMEOUT: Duration = Duration::from_secs(5);

/// Flags worth showing next to the model name when comparing two hosts:
/// running under a hypervisor, an invariant TSC (clock source
/// stability), and the vector/crypto extensions that change the cost of
/// checksums, TLS and compression. x86 names first, then ARM's `Features`.
/// Not `ht`: x86 sets it on every multi-core part, SMT or not.
const NOTABLE_FLAGS: &[&str] = &[
    "hypervisor",
    "constant_tsc",
    "nonstop_tsc",
    "pdpe1gb",
    "aes",
    "sha_ni",
    "avx",
    "avx2",
    "avx512f",
    "asimd",
    "sha2",
    "atomics",
    "sve",
    "sve2",
];

/// Sysctls deliberately not collected although they match the patterns:
/// `net.ipv4.tcp_fastopen_key` and `net.core.netdev_rss_key` are secret keys
/// (an appendix is meant to be published), and reading `vm.stat_refresh`
/// is not a read at all: it makes every CPU flush its counters.
const SKIPPED_SYSCTLS: &[&str] = &[
    "net.ipv4.tcp_fastopen_key",
    "net.core.netdev_rss_key",
    "vm.stat_refresh",
];

const DMI_DIR: &str = "/sys/class/dmi/id";
const CPU_DIR: &str = "/sys/devices/system/cpu";

pub(crate) struct Collector {
    root: PathBuf,
    /// Whether to run `ethtool` and `ip`; off for fake trees in tests.
    run_tools: bool,
    warnings: Vec<String>,
}

/// The fields of `uname(2)`.
struct Uts {
    sysname: String,
    nodename: String,
    release: String,
    version: String,
    machine: String,
}

impl Collector {
    pub(crate) fn live() -> Self {
        Collector {
            root: PathBuf::from("/"),
            run_tools: true,
            warnings: Vec::new(),
        }
    }

    #[cfg(test)]
    pub(crate) fn at_root(root: &Path) -> Self {
        Collector {
            root: root.to_path_buf(),
            run_tools: false,
            warnings: Vec::new(),
        }
    }

    pub(crate) fn collect(mut self) -> Inventory {
        let collected_at = rfc3339_utc(SystemTime::now());
        let uts = uname();
        let hostname = match &uts {
            Some(u) => u.nodename.clone(),
            None => self
                .read_optional("host", "/proc/sys/kernel/hostname")
                .unwrap_or_default(),
        };
        let system = self.system();
        let cpuinfo = self
            .read_required("cpu", "/proc/cpuinfo")
            .map(|text| parse_cpuinfo(&text))
            .unwrap_or_default();
        let online = self.online_cpus(&cpuinfo);
        let cpu = self.cpu(&cpuinfo, &online);
        let memory = self.memory();
        let os = self.os(uts.as_ref(), &online);
        let nics = self.nics();
        let disks = self.disks();
        let filesystems = self.filesystems();
        let sysctls = self.sysctls();
        Inventory {
            hostname,
            collected_at,
            system,
            cpu,
            memory,
            os,
            nics,
            disks,
            filesystems,
            sysctls,
            tools: Tools::default(),
            warnings: self.warnings,
            guest: None,
        }
    }

    // ---- file access -------------------------------------------------------

    fn path(&self, absolute: &str) -> PathBuf {
        self.root.join(absolute.trim_start_matches('/'))
    }

    fn warn(&mut self, message: String) {
        self.warnings.push(message);
    }

    /// Trimmed contents, `None` on any error: for files whose absence is
    /// normal and not worth a warning.
    fn read_quiet(&self, absolute: &str) -> Option<String> {
        let text = fs::read_to_string(self.path(absolute)).ok()?;
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_string())
    }

    /// Trimmed contents; a missing file is `None` quietly, a file that exists
    /// but cannot be read (permissions, EIO) is `None` with a warning.
    fn read_optional(&mut self, section: &str, absolute: &str) -> Option<String> {
        match fs::read_to_string(self.path(absolute)) {
            Ok(text) => {
                let text = text.trim();
                (!text.is_empty()).then(|| text.to_string())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                self.warn(format!("{section}: cannot read {absolute}: {e}"));
                None
            }
        }
    }

    /// Contents of a file that every Linux system has; any failure warns
    /// (typically `/proc` not mounted in a minimal container).
    fn read_required(&mut self, section: &str, absolute: &str) -> Option<String> {
        match fs::read_to_string(self.path(absolute)) {
            Ok(text) => Some(text),
            Err(e) => {
                self.warn(format!("{section}: cannot read {absolute}: {e}"));
                None
            }
        }
    }

    /// Sorted entry names of a directory, or the error.
    fn list_dir(&self, absolute: &str) -> io::Result<Vec<String>> {
        let mut names: Vec<String> = fs::read_dir(self.path(absolute))?
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        Ok(names)
    }

    // ---- system ------------------------------------------------------------

    fn system(&mut self) -> SystemInfo {
        if !self.path(DMI_DIR).is_dir() {
            self.warn(format!(
                "system: {DMI_DIR} absent (no DMI/SMBIOS tables: a microVM such as \
                 Firecracker, a board without SMBIOS, or /sys not mounted); vendor, product \
                 and BIOS unknown"
            ));
            return SystemInfo::default();
        }
        let mut field = |name: &str| self.read_optional("system", &format!("{DMI_DIR}/{name}"));
        SystemInfo {
            sys_vendor: field("sys_vendor"),
            product_name: field("product_name"),
            product_version: field("product_version"),
            board_vendor: field("board_vendor"),
            board_name: field("board_name"),
            bios_vendor: field("bios_vendor"),
            bios_version: field("bios_version"),
            bios_date: field("bios_date"),
        }
    }

    // ---- CPU ---------------------------------------------------------------

    /// Online CPUs from sysfs, else the `processor` numbers of cpuinfo.
    fn online_cpus(&mut self, cpuinfo: &[BTreeMap<String, String>]) -> Vec<u32> {
        if let Some(cpus) = self
            .read_optional("cpu", &format!("{CPU_DIR}/online"))
            .and_then(|text| parse_cpu_list(&text))
            .filter(|cpus| !cpus.is_empty())
        {
            return cpus;
        }
        let cpus: Vec<u32> = cpuinfo
            .iter()
            .filter_map(|block| block.get("processor")?.parse().ok())
            .collect();
        if cpus.is_empty() {
            self.warn(format!(
                "cpu: neither {CPU_DIR}/online nor /proc/cpuinfo lists any CPU"
            ));
        }
        cpus
    }

    fn cpu(&mut self, cpuinfo: &[BTreeMap<String, String>], online: &[u32]) -> CpuInfo {
        // The first non-empty value under any of the keys, in any block:
        // ARM keeps `Hardware` in a trailing board-wide block.
        let lookup = |keys: &[&str]| -> Option<String> {
            keys.iter().find_map(|key| {
                cpuinfo
                    .iter()
                    .find_map(|block| block.get(*key).filter(|v| !v.is_empty()))
                    .cloned()
            })
        };
        let flags: Vec<String> = lookup(&["flags", "Features"])
            .map(|f| f.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let notable_flags = NOTABLE_FLAGS
            .iter()
            .filter(|notable| flags.iter().any(|f| f == *notable))
            .map(|f| f.to_string())
            .collect();
        let cur_freq_khz = lookup(&["cpu MHz"])
            .and_then(|mhz| mhz.parse::<f64>().ok())
            .filter(|mhz| mhz.is_finite() && *mhz > 0.0)
            .map(|mhz| (mhz * 1000.0).round() as u64);
        let (sockets, cores_per_socket, threads_per_core) = self.topology(cpuinfo, online);
        let first = online.first().copied().unwrap_or(0);
        let freq = |c: &mut Self, name: &str| {
            c.read_optional("cpu", &format!("{CPU_DIR}/cpu{first}/cpufreq/{name}"))
                .and_then(|v| v.parse::<u64>().ok())
        };
        let min_freq_khz = freq(self, "cpuinfo_min_freq");
        let max_freq_khz = freq(self, "cpuinfo_max_freq");
        // Kernels without CONFIG_NUMA have no node directory: not a fault.
        let numa_nodes = self
            .read_quiet("/sys/devices/system/node/online")
            .and_then(|text| parse_cpu_list(&text))
            .map(|nodes| nodes.len() as u32);
        let caches = self.caches(online);
        let logical_cpus = if online.is_empty() {
            // Last resort so that the invariant "never 0" holds; this counts
            // the CPUs the scheduler may use, not necessarily all online ones.
            thread::available_parallelism().map_or(1, |n| n.get() as u32)
        } else {
            online.len() as u32
        };
        CpuInfo {
            model_name: lookup(&[
                "model name",
                "Processor",
                "cpu model",
                "Hardware",
                "uarch",
                "cpu",
            ]),
            vendor: lookup(&["vendor_id", "CPU implementer", "vendor"]),
            family: lookup(&["cpu family", "CPU architecture"]),
            model: lookup(&["model", "CPU part"]),
            stepping: lookup(&["stepping", "CPU revision"]),
            microcode: lookup(&["microcode"]),
            sockets,
            cores_per_socket,
            threads_per_core,
            // Absent before Linux 4.19 and on architectures without SMT
            // control: not worth a warning.
            smt_control: self.read_quiet(&format!("{CPU_DIR}/smt/control")),
            logical_cpus,
            numa_nodes,
            cur_freq_khz,
            min_freq_khz,
            max_freq_khz,
            flags_count: flags.len(),
            notable_flags,
            caches,
        }
    }

    /// (packages, cores per package, threads per core). Sysfs topology is
    /// preferred because it exists on every architecture; cpuinfo's
    /// `physical id`/`core id` is the fallback (x86 only).
    fn topology(
        &mut self,
        cpuinfo: &[BTreeMap<String, String>],
        online: &[u32],
    ) -> (Option<u32>, Option<u32>, Option<u32>) {
        // (package key, core key) per online CPU. The core key is the set of
        // CPUs sharing the core, unique machine-wide; `core_id` alone repeats
        // across packages and, on some ARM systems, across clusters.
        let mut keys: Vec<(String, String)> = Vec::new();
        for cpu in online {
            let base = format!("{CPU_DIR}/cpu{cpu}/topology");
            let package = self
                .read_quiet(&format!("{base}/physical_package_id"))
                .filter(|id| id != "-1")
                .or_else(|| self.read_quiet(&format!("{base}/package_cpus_list")))
                .or_else(|| self.read_quiet(&format!("{base}/core_siblings_list")));
            let core = self
                .read_quiet(&format!("{base}/core_cpus_list"))
                .or_else(|| self.read_quiet(&format!("{base}/thread_siblings_list")));
            match (package, core) {
                (Some(package), Some(core)) => keys.push((package, core)),
                _ => {
                    keys.clear();
                    break;
                }
            }
        }
        if keys.is_empty() {
            for block in cpuinfo.iter().filter(|b| b.contains_key("processor")) {
                match (block.get("physical id"), block.get("core id")) {
                    (Some(package), Some(core)) => {
                        keys.push((package.clone(), format!("{package}:{core}")))
                    }
                    _ => {
                        keys.clear();
                        break;
                    }
                }
            }
        }
        if keys.is_empty() {
            self.warn(
                "cpu: no topology in sysfs or /proc/cpuinfo; packages, cores and threads unknown"
                    .to_string(),
            );
            return (None, None, None);
        }
        let mut cores_by_package: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        let mut threads_by_core: BTreeMap<&str, u32> = BTreeMap::new();
        for (package, core) in &keys {
            cores_by_package
                .entry(package)
                .or_default()
                .insert(core.as_str());
            *threads_by_core.entry(core).or_default() += 1;
        }
        let sockets = cores_by_package.len() as u32;
        let cores = cores_by_package.values().map(|c| c.len() as u32).max();
        let threads = threads_by_core.values().copied().max();
        (Some(sockets), cores, threads)
    }

    fn caches(&mut self, online: &[u32]) -> Vec<CacheInfo> {
        let Some(&first) = online.first() else {
            return Vec::new();
        };
        let dir = format!("{CPU_DIR}/cpu{first}/cache");
        let names = match self.list_dir(&dir) {
            Ok(names) => names,
            Err(e) => {
                self.warn(format!(
                    "cpu: cannot list {dir}: {e} (some hypervisors and ARM firmware describe \
                     no caches); cache sizes unknown"
                ));
                return Vec::new();
            }
        };
        let mut indexes: Vec<u32> = names
            .iter()
            .filter_map(|n| n.strip_prefix("index")?.parse().ok())
            .collect();
        indexes.sort_unstable();
        let mut caches = Vec::new();
        for index in indexes {
            let base = format!("{dir}/index{index}");
            let Some(level) = self
                .read_optional("cpu", &format!("{base}/level"))
                .and_then(|l| l.parse::<u8>().ok())
            else {
                self.warn(format!("cpu: {base}/level unreadable; cache skipped"));
                continue;
            };
            // Distinct sharing sets across all online CPUs = instances.
            let mut sets = BTreeSet::new();
            let mut complete = true;
            for cpu in online {
                match self.read_quiet(&format!(
                    "{CPU_DIR}/cpu{cpu}/cache/index{index}/shared_cpu_list"
                )) {
                    Some(list) => {
                        sets.insert(list);
                    }
                    None => complete = false,
                }
            }
            caches.push(CacheInfo {
                level,
                kind: self.read_quiet(&format!("{base}/type")).unwrap_or_default(),
                size_bytes: self
                    .read_quiet(&format!("{base}/size"))
                    .and_then(|s| parse_cache_size(&s)),
                shared_cpu_list: self
                    .read_quiet(&format!("{base}/shared_cpu_list"))
                    .unwrap_or_default(),
                instances: complete.then_some(sets.len() as u32),
            });
        }
        caches
    }

    // ---- memory ------------------------------------------------------------

    fn memory(&mut self) -> MemoryInfo {
        let Some(text) = self.read_required("memory", "/proc/meminfo") else {
            return MemoryInfo::default();
        };
        let m = parse_meminfo(&text);
        let total_bytes = m.get("MemTotal").copied();
        if total_bytes.is_none() {
            self.warn("memory: /proc/meminfo has no MemTotal".to_string());
        }
        MemoryInfo {
            total_bytes,
            swap_total_bytes: m.get("SwapTotal").copied(),
            hugepages_total: m.get("HugePages_Total").copied(),
            hugepages_free: m.get("HugePages_Free").copied(),
            hugepage_size_bytes: m.get("Hugepagesize").copied(),
        }
    }

    // ---- operating system --------------------------------------------------

    fn os(&mut self, uts: Option<&Uts>, online: &[u32]) -> OsInfo {
        let mut os = OsInfo::default();
        match uts {
            Some(u) => {
                os.kernel_name = Some(u.sysname.clone());
                os.kernel_release = Some(u.release.clone());
                os.kernel_version = Some(u.version.clone());
                os.machine = Some(u.machine.clone());
            }
            None => {
                self.warn("os: uname(2) failed; kernel read from /proc/sys/kernel".to_string());
                os.kernel_name = self.read_optional("os", "/proc/sys/kernel/ostype");
                os.kernel_release = self.read_optional("os", "/proc/sys/kernel/osrelease");
                os.kernel_version = self.read_optional("os", "/proc/sys/kernel/version");
            }
        }

        // os-release(5): /etc first, /usr/lib as the vendor fallback.
        let os_release = self
            .read_quiet("/etc/os-release")
            .or_else(|| self.read_quiet("/usr/lib/os-release"));
        os.distribution = os_release.and_then(|text| distribution_name(&parse_os_release(&text)));
        if os.distribution.is_none() {
            self.warn(
                "os: no usable /etc/os-release or /usr/lib/os-release; distribution unknown"
                    .to_string(),
            );
        }
        os.cmdline = self
            .read_required("os", "/proc/cmdline")
            .map(|c| c.trim().to_string());

        let clocksource = "/sys/devices/system/clocksource/clocksource0";
        os.clocksource_current =
            self.read_optional("os", &format!("{clocksource}/current_clocksource"));
        os.clocksource_available = self
            .read_optional("os", &format!("{clocksource}/available_clocksource"))
            .map(|a| a.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        if os.clocksource_current.is_none() {
            self.warn(format!(
                "os: {clocksource} unreadable; clock source unknown"
            ));
        }

        let thp = "/sys/kernel/mm/transparent_hugepage";
        os.thp_enabled = self
            .read_optional("os", &format!("{thp}/enabled"))
            .and_then(|line| parse_bracketed(&line));
        os.thp_defrag = self
            .read_optional("os", &format!("{thp}/defrag"))
            .and_then(|line| parse_bracketed(&line));
        if os.thp_enabled.is_none() {
            self.warn(format!(
                "os: {thp} unreadable (kernel built without transparent huge pages?)"
            ));
        }

        self.cpufreq(&mut os, online);

        let cpuidle = format!("{CPU_DIR}/cpuidle");
        os.cpuidle_driver = self.read_optional("os", &format!("{cpuidle}/current_driver"));
        os.cpuidle_governor = self
            .read_optional("os", &format!("{cpuidle}/current_governor"))
            .or_else(|| self.read_quiet(&format!("{cpuidle}/current_governor_ro")));
        os
    }

    fn cpufreq(&mut self, os: &mut OsInfo, online: &[u32]) {
        let Some(&first) = online.first() else {
            return;
        };
        if !self.path(&format!("{CPU_DIR}/cpu{first}/cpufreq")).is_dir() {
            self.warn(format!(
                "os: no {CPU_DIR}/cpu{first}/cpufreq (no frequency-scaling driver: usual in \
                 VMs, or the firmware owns the frequency); governor unknown"
            ));
            return;
        }
        os.cpufreq_driver = self.read_optional(
            "os",
            &format!("{CPU_DIR}/cpu{first}/cpufreq/scaling_driver"),
        );
        os.cpufreq_governors = self.per_cpu_values(online, "cpufreq/scaling_governor");
        // Only HWP/CPPC drivers (intel_pstate, amd-pstate-epp) have an EPP.
        os.energy_performance_preferences =
            self.per_cpu_values(online, "cpufreq/energy_performance_preference");
        os.boost = match self.read_quiet(&format!("{CPU_DIR}/cpufreq/boost")) {
            Some(v) => Some(v == "1"),
            // intel_pstate has no global `boost` file; it spells it inverted.
            None => self
                .read_quiet(&format!("{CPU_DIR}/intel_pstate/no_turbo"))
                .map(|v| v == "0"),
        };
    }

    /// Distinct values of a per-CPU sysfs file → the CPUs that have each.
    fn per_cpu_values(&self, online: &[u32], file: &str) -> BTreeMap<String, String> {
        let mut by_value: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for &cpu in online {
            if let Some(value) = self.read_quiet(&format!("{CPU_DIR}/cpu{cpu}/{file}")) {
                by_value.entry(value).or_default().push(cpu);
            }
        }
        by_value
            .into_iter()
            .map(|(value, cpus)| (value, format_cpu_list(&cpus)))
            .collect()
    }

    // ---- network interfaces ------------------------------------------------

    fn nics(&mut self) -> Vec<Nic> {
        let dir = "/sys/class/net";
        let names = match self.list_dir(dir) {
            Ok(names) => names,
            Err(e) => {
                self.warn(format!("nics: cannot list {dir}: {e}"));
                return Vec::new();
            }
        };
        let ethtool = if self.run_tools {
            let found = find_program("ethtool");
            if found.is_none() {
                self.warn(
                    "nics: ethtool not installed; NIC firmware versions not collected".to_string(),
                );
            }
            found
        } else {
            None
        };
        let mut addresses = if self.run_tools {
            self.ip_addresses()
        } else {
            BTreeMap::new()
        };
        let mut nics = Vec::new();
        for name in names {
            let base = format!("{dir}/{name}");
            // Interfaces without a `device` link (lo, bridges, veth, bonds,
            // tunnels) have no hardware and so no driver of their own.
            let device = self.path(&format!("{base}/device"));
            let driver = if fs::symlink_metadata(&device).is_ok() {
                match fs::read_link(device.join("driver")) {
                    Ok(target) => target.file_name().map(|n| n.to_string_lossy().into_owned()),
                    Err(e) => {
                        self.warn(format!("nics: {name}: no driver link: {e}"));
                        None
                    }
                }
            } else {
                Some("virtual".to_string())
            };
            // `speed` fails with EINVAL when the link is down or the driver
            // does not know (virtual links), and virtio reports -1: all mean
            // "unknown", not an error worth a warning.
            let speed_mbps = self
                .read_quiet(&format!("{base}/speed"))
                .and_then(|s| s.parse::<i64>().ok())
                .and_then(|s| u64::try_from(s).ok())
                .filter(|&s| s > 0);
            let queues = self.list_dir(&format!("{base}/queues")).ok();
            let count = |prefix: &str| {
                queues
                    .as_ref()
                    .map(|q| q.iter().filter(|n| n.starts_with(prefix)).count() as u32)
            };
            let firmware_version = match (&ethtool, driver.as_deref()) {
                (Some(ethtool), Some(d)) if d != "virtual" => run_tool(ethtool, &["-i", &name])
                    .ok()
                    .and_then(|out| parse_ethtool_firmware(&out)),
                _ => None,
            };
            let (ipv4, ipv6) = addresses.remove(&name).unwrap_or_default();
            nics.push(Nic {
                driver,
                firmware_version,
                speed_mbps,
                mtu: self
                    .read_optional("nics", &format!("{base}/mtu"))
                    .and_then(|m| m.parse().ok()),
                mac: self.read_optional("nics", &format!("{base}/address")),
                operstate: self.read_optional("nics", &format!("{base}/operstate")),
                rx_queues: count("rx-"),
                tx_queues: count("tx-"),
                ipv4,
                ipv6,
                name,
            });
        }
        nics
    }

    fn ip_addresses(&mut self) -> BTreeMap<String, IfAddrs> {
        let Some(ip) = find_program("ip") else {
            self.warn("nics: iproute2 `ip` not installed; addresses not collected".to_string());
            return BTreeMap::new();
        };
        let parsed = run_tool(&ip, &["-j", "addr", "show"]).and_then(|out| {
            // iproute2 before 4.13 and busybox `ip` have no JSON output.
            parse_ip_addr_json(&out).map_err(|e| format!("unparsable output ({e})"))
        });
        parsed.unwrap_or_else(|e| {
            self.warn(format!("nics: `ip -j addr`: {e}; addresses not collected"));
            BTreeMap::new()
        })
    }

    // ---- disks -------------------------------------------------------------

    fn disks(&mut self) -> Vec<Disk> {
        let dir = "/sys/block";
        let names = match self.list_dir(dir) {
            Ok(names) => names,
            Err(e) => {
                self.warn(format!("disks: cannot list {dir}: {e}"));
                return Vec::new();
            }
        };
        let mut disks = Vec::new();
        // loop and ram devices are images and RAM disks, not storage.
        for name in names
            .into_iter()
            .filter(|n| !n.starts_with("loop") && !n.starts_with("ram"))
        {
            let base = format!("{dir}/{name}");
            let number = |c: &mut Self, file: &str| {
                c.read_optional("disks", &format!("{base}/{file}"))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            // `size` counts 512-byte sectors whatever the logical block size
            // (include/linux/blkdev.h, SECTOR_SHIFT).
            let size_bytes = number(self, "size").and_then(|s| s.checked_mul(512));
            let read_ahead_kb = number(self, "queue/read_ahead_kb");
            let nr_requests = number(self, "queue/nr_requests");
            disks.push(Disk {
                // Virtual disks (device-mapper, md, zram) have no `device`.
                model: self.read_quiet(&format!("{base}/device/model")),
                vendor: self.read_quiet(&format!("{base}/device/vendor")),
                size_bytes,
                rotational: self
                    .read_optional("disks", &format!("{base}/queue/rotational"))
                    .map(|r| r == "1"),
                scheduler: self
                    .read_optional("disks", &format!("{base}/queue/scheduler"))
                    .and_then(|line| parse_bracketed(&line)),
                read_ahead_kb,
                nr_requests,
                name,
            });
        }
        disks
    }

    // ---- file systems ------------------------------------------------------

    fn filesystems(&mut self) -> Vec<Filesystem> {
        let Some(text) = self.read_required("filesystems", "/proc/self/mounts") else {
            return Vec::new();
        };
        let mut out: Vec<Filesystem> = Vec::new();
        for fs in parse_mounts(&text).into_iter().filter(keep_filesystem) {
            // A later mount on the same point hides the earlier one; keep the
            // visible one, in the place the mount point first appeared.
            match out.iter_mut().find(|f| f.mount_point == fs.mount_point) {
                Some(hidden) => *hidden = fs,
                None => out.push(fs),
            }
        }
        out
    }

    // ---- sysctls -----------------------------------------------------------

    fn sysctls(&mut self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut denied = Vec::new();
        self.sysctl_dir("net/core", None, &mut out, &mut denied);
        self.sysctl_dir("net/ipv4", Some(&["tcp_", "udp_"]), &mut out, &mut denied);
        self.sysctl_dir("vm", None, &mut out, &mut denied);
        if !denied.is_empty() {
            // Mode 0600 entries (net.core.bpf_jit_*, vm.mmap_rnd_bits) are
            // root-only.
            self.warn(format!(
                "sysctls: {} readable by root only, not collected: {}",
                denied.len(),
                denied.join(", ")
            ));
        }
        out
    }

    /// Every readable file under `/proc/sys/{rel}`. With `prefixes`, only
    /// files of this directory whose names start with one of them (no
    /// recursion); without, the whole subtree.
    fn sysctl_dir(
        &mut self,
        rel: &str,
        prefixes: Option<&[&str]>,
        out: &mut BTreeMap<String, String>,
        denied: &mut Vec<String>,
    ) {
        let dir = format!("/proc/sys/{rel}");
        let names = match self.list_dir(&dir) {
            Ok(names) => names,
            Err(e) => {
                self.warn(format!("sysctls: cannot list {dir}: {e}"));
                return;
            }
        };
        for name in names {
            if let Some(prefixes) = prefixes {
                if !prefixes.iter().any(|p| name.starts_with(p)) {
                    continue;
                }
            }
            let child = format!("{rel}/{name}");
            let path = self.path(&format!("/proc/sys/{child}"));
            let Ok(meta) = fs::metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                if prefixes.is_none() {
                    self.sysctl_dir(&child, None, out, denied);
                }
                continue;
            }
            let key = child.replace('/', ".");
            // Write-only entries (vm.drop_caches, vm.compact_memory) are
            // triggers with nothing to read; checked by mode because root
            // could open them anyway.
            if SKIPPED_SYSCTLS.contains(&key.as_str()) || meta.permissions().mode() & 0o444 == 0 {
                continue;
            }
            match fs::read_to_string(&path) {
                Ok(value) => {
                    out.insert(key, normalise_whitespace(&value));
                }
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => denied.push(key),
                Err(e) => self.warn(format!("sysctls: cannot read {key}: {e}")),
            }
        }
    }
}

fn uname() -> Option<Uts> {
    // SAFETY: `utsname` is a struct of `c_char` arrays, for which all-zero
    // bytes are a valid value.
    let mut buf: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `buf` is a valid, writable `utsname`; uname(2) writes only
    // NUL-terminated strings within its fields.
    if unsafe { libc::uname(&mut buf) } != 0 {
        return None;
    }
    let text = |field: &[libc::c_char]| {
        let bytes: Vec<u8> = field
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Some(Uts {
        sysname: text(&buf.sysname),
        nodename: text(&buf.nodename),
        release: text(&buf.release),
        version: text(&buf.version),
        machine: text(&buf.machine),
    })
}

/// An executable named `name` on `PATH` or in the sbin directories, which a
/// non-root user's `PATH` often lacks although ethtool and ip live there.
fn find_program(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(
        ["/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"]
            .iter()
            .map(PathBuf::from),
    );
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Runs a tool with C locale and returns its standard output if it exits
/// successfully within [`TOOL_TIMEOUT`].
fn run_tool(program: &Path, args: &[&str]) -> Result<String, String> {
    let shown = format!("{} {}", program.display(), args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {shown}: {e}"))?;
    // Read on another thread: output larger than the pipe buffer would
    // otherwise block the child and turn into a false timeout.
    let mut stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let reader = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + TOOL_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = reader.join();
                return Err(format!("{shown} timed out after {TOOL_TIMEOUT:?}"));
            }
            Err(e) => return Err(format!("{shown}: {e}")),
        }
    };
    let output = reader.join().map_err(|_| "reader thread panicked")?;
    if !status.success() {
        return Err(format!("{shown} exited with {status}"));
    }
    Ok(String::from_utf8_lossy(&output).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn put(root: &Path, rel: &str, contents: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, contents).unwrap();
    }

    /// A fake two-core, four-thread, one-package host with cpufreq, DMI, a
    /// physical NIC and a rotational disk: the paths this VM lacks.
    fn fake_host(root: &Path) {
        put(
            root,
            "proc/cpuinfo",
            "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Fake CPU @ 2.90GHz\n\
             cpu MHz\t\t: 2899.951\nflags\t\t: fpu ht avx2 aes\n\n\
             processor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Fake CPU @ 2.90GHz\n\n",
        );
        put(
            root,
            "proc/meminfo",
            "MemTotal: 1024 kB\nSwapTotal: 0 kB\nHugePages_Total: 4\nHugePages_Free: 4\n\
             Hugepagesize: 2048 kB\n",
        );
        put(root, "proc/cmdline", "ro quiet\n");
        put(
            root,
            "proc/self/mounts",
            "/dev/sda1 / ext4 rw 0 0\nproc /proc proc rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n\
             tmpfs /tmp tmpfs rw,size=1g 0 0\n",
        );
        put(root, "proc/sys/net/core/rmem_max", "212992\n");
        put(root, "proc/sys/net/core/netdev_rss_key", "aa:bb\n");
        put(
            root,
            "proc/sys/net/ipv4/tcp_rmem",
            "4096\t131072\t6291456\n",
        );
        put(root, "proc/sys/net/ipv4/udp_mem", "1 2 3\n");
        put(root, "proc/sys/net/ipv4/ip_forward", "0\n");
        put(root, "proc/sys/vm/swappiness", "60\n");
        put(root, "proc/sys/vm/drop_caches", "0\n");
        let drop = root.join("proc/sys/vm/drop_caches");
        fs::set_permissions(drop, fs::Permissions::from_mode(0o200)).unwrap();
        put(root, "etc/os-release", "PRETTY_NAME=\"Fake Linux 1\"\n");
        put(root, "sys/class/dmi/id/sys_vendor", "Dell Inc.\n");
        put(root, "sys/class/dmi/id/product_name", "PowerEdge R720\n");
        put(root, "sys/class/dmi/id/bios_version", "1.5.1\n");

        let cpu = "sys/devices/system/cpu";
        put(root, &format!("{cpu}/online"), "0-3\n");
        for n in 0..4 {
            let core = if n % 2 == 0 { "0,2" } else { "1,3" };
            let t = format!("{cpu}/cpu{n}/topology");
            put(root, &format!("{t}/physical_package_id"), "0\n");
            put(root, &format!("{t}/core_cpus_list"), &format!("{core}\n"));
            let c = format!("{cpu}/cpu{n}/cache");
            put(root, &format!("{c}/index0/level"), "1\n");
            put(root, &format!("{c}/index0/type"), "Data\n");
            put(root, &format!("{c}/index0/size"), "32K\n");
            put(root, &format!("{c}/index0/shared_cpu_list"), core);
            put(root, &format!("{c}/index3/level"), "3\n");
            put(root, &format!("{c}/index3/type"), "Unified\n");
            put(root, &format!("{c}/index3/size"), "20480K\n");
            put(root, &format!("{c}/index3/shared_cpu_list"), "0-3\n");
            let governor = if n < 2 { "performance" } else { "powersave" };
            let f = format!("{cpu}/cpu{n}/cpufreq");
            put(root, &format!("{f}/scaling_governor"), governor);
            put(root, &format!("{f}/scaling_driver"), "intel_pstate\n");
            put(root, &format!("{f}/cpuinfo_max_freq"), "3800000\n");
        }
        put(root, &format!("{cpu}/intel_pstate/no_turbo"), "0\n");
        put(root, &format!("{cpu}/smt/control"), "on\n");
        put(
            root,
            &format!("{cpu}/cpuidle/current_driver"),
            "intel_idle\n",
        );
        put(root, &format!("{cpu}/cpuidle/current_governor"), "menu\n");
        let cs = "sys/devices/system/clocksource/clocksource0";
        put(root, &format!("{cs}/current_clocksource"), "tsc\n");
        put(
            root,
            &format!("{cs}/available_clocksource"),
            "tsc hpet acpi_pm \n",
        );
        let thp = "sys/kernel/mm/transparent_hugepage";
        put(root, &format!("{thp}/enabled"), "always [madvise] never\n");
        put(
            root,
            &format!("{thp}/defrag"),
            "[always] defer madvise never\n",
        );

        put(root, "sys/class/net/lo/mtu", "65536\n");
        put(root, "sys/class/net/lo/operstate", "unknown\n");
        put(root, "sys/class/net/eth0/mtu", "9000\n");
        put(root, "sys/class/net/eth0/speed", "10000\n");
        put(root, "sys/class/net/eth0/address", "aa:bb:cc:dd:ee:ff\n");
        put(root, "sys/class/net/eth0/queues/rx-0/x", "");
        put(root, "sys/class/net/eth0/queues/rx-1/x", "");
        put(root, "sys/class/net/eth0/queues/tx-0/x", "");
        fs::create_dir_all(root.join("sys/class/net/eth0/device")).unwrap();
        symlink(
            "../../../bus/pci/drivers/ixgbe",
            root.join("sys/class/net/eth0/device/driver"),
        )
        .unwrap();

        put(root, "sys/block/loop0/size", "100\n");
        put(root, "sys/block/sda/size", "1000215216\n");
        put(root, "sys/block/sda/queue/rotational", "1\n");
        put(
            root,
            "sys/block/sda/queue/scheduler",
            "mq-deadline [none]\n",
        );
        put(root, "sys/block/sda/device/model", "ST1000NM0033    \n");
        put(root, "sys/block/sda/device/vendor", "ATA\n");
    }

    #[test]
    fn fake_tree_is_read_completely() {
        let dir = tempfile::tempdir().unwrap();
        fake_host(dir.path());
        let inv = Collector::at_root(dir.path()).collect();

        assert_eq!(inv.system.sys_vendor.as_deref(), Some("Dell Inc."));
        assert_eq!(inv.system.bios_version.as_deref(), Some("1.5.1"));
        assert_eq!(inv.system.board_name, None);

        let cpu = &inv.cpu;
        assert_eq!(cpu.model_name.as_deref(), Some("Fake CPU @ 2.90GHz"));
        assert_eq!(cpu.logical_cpus, 4);
        assert_eq!(
            (cpu.sockets, cpu.cores_per_socket, cpu.threads_per_core),
            (Some(1), Some(2), Some(2))
        );
        assert_eq!(cpu.cur_freq_khz, Some(2_899_951));
        assert_eq!(cpu.max_freq_khz, Some(3_800_000));
        assert_eq!(cpu.flags_count, 4);
        assert_eq!(cpu.notable_flags, ["aes", "avx2"]);
        assert_eq!(cpu.smt_control.as_deref(), Some("on"));
        assert_eq!(cpu.caches.len(), 2);
        assert_eq!(cpu.caches[0].level, 1);
        assert_eq!(cpu.caches[0].size_bytes, Some(32 * 1024));
        assert_eq!(cpu.caches[0].instances, Some(2));
        assert_eq!(cpu.caches[1].size_bytes, Some(20 * 1024 * 1024));
        assert_eq!(cpu.caches[1].instances, Some(1));

        assert_eq!(inv.memory.total_bytes, Some(1024 * 1024));
        assert_eq!(inv.memory.hugepages_total, Some(4));

        let os = &inv.os;
        assert_eq!(os.distribution.as_deref(), Some("Fake Linux 1"));
        assert_eq!(os.cmdline.as_deref(), Some("ro quiet"));
        assert_eq!(os.clocksource_current.as_deref(), Some("tsc"));
        assert_eq!(os.clocksource_available, ["tsc", "hpet", "acpi_pm"]);
        assert_eq!(os.thp_enabled.as_deref(), Some("madvise"));
        assert_eq!(os.thp_defrag.as_deref(), Some("always"));
        assert_eq!(os.cpufreq_driver.as_deref(), Some("intel_pstate"));
        let governors: Vec<_> = os
            .cpufreq_governors
            .iter()
            .map(|(g, c)| (g.as_str(), c.as_str()))
            .collect();
        assert_eq!(governors, [("performance", "0-1"), ("powersave", "2-3")]);
        assert!(os.energy_performance_preferences.is_empty());
        assert_eq!(os.boost, Some(true));
        assert_eq!(os.cpuidle_driver.as_deref(), Some("intel_idle"));
        assert_eq!(os.cpuidle_governor.as_deref(), Some("menu"));

        let names: Vec<_> = inv.nics.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["eth0", "lo"]);
        let eth0 = &inv.nics[0];
        assert_eq!(eth0.driver.as_deref(), Some("ixgbe"));
        assert_eq!(eth0.speed_mbps, Some(10_000));
        assert_eq!(eth0.mtu, Some(9000));
        assert_eq!((eth0.rx_queues, eth0.tx_queues), (Some(2), Some(1)));
        let lo = &inv.nics[1];
        assert_eq!(lo.driver.as_deref(), Some("virtual"));
        assert_eq!(lo.speed_mbps, None);
        assert_eq!(lo.operstate.as_deref(), Some("unknown"));

        assert_eq!(inv.disks.len(), 1, "loop devices are skipped");
        let sda = &inv.disks[0];
        assert_eq!(sda.model.as_deref(), Some("ST1000NM0033"));
        assert_eq!(sda.size_bytes, Some(1_000_215_216 * 512));
        assert_eq!(sda.rotational, Some(true));
        assert_eq!(sda.scheduler.as_deref(), Some("none"));

        let mounts: Vec<_> = inv
            .filesystems
            .iter()
            .map(|f| (f.mount_point.as_str(), f.options.as_str()))
            .collect();
        assert_eq!(mounts, [("/", "rw"), ("/tmp", "rw,size=1g")]);

        let keys: Vec<_> = inv.sysctls.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "net.core.rmem_max",
                "net.ipv4.tcp_rmem",
                "net.ipv4.udp_mem",
                "vm.swappiness"
            ]
        );
        assert_eq!(inv.sysctls["net.ipv4.tcp_rmem"], "4096 131072 6291456");

        assert!(inv.warnings.is_empty(), "{:#?}", inv.warnings);
    }

    #[test]
    fn empty_tree_warns_instead_of_failing() {
        let dir = tempfile::tempdir().unwrap();
        let inv = Collector::at_root(dir.path()).collect();
        assert!(inv.cpu.logical_cpus > 0);
        assert!(inv.nics.is_empty() && inv.disks.is_empty() && inv.sysctls.is_empty());
        let all = inv.warnings.join("\n");
        for expected in ["/proc/cpuinfo", "/proc/meminfo", "dmi", "/sys/class/net"] {
            assert!(
                all.contains(expected),
                "no warning about {expected}:\n{all}"
            );
        }
    }

    #[test]
    fn run_tool_reports_failure_and_captures_output() {
        let sh = find_program("sh").expect("sh");
        assert_eq!(run_tool(&sh, &["-c", "echo hi"]).unwrap(), "hi\n");
        assert!(run_tool(&sh, &["-c", "exit 3"]).is_err());
        assert!(run_tool(Path::new("/nonexistent/tool"), &[]).is_err());
        // More than a pipe buffer of output must not look like a hang.
        let big = run_tool(&sh, &["-c", "head -c 200000 /dev/zero"]).unwrap();
        assert_eq!(big.len(), 200_000);
    }
}
