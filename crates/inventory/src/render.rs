//! Rendering an inventory for people: an aligned, sectioned text listing of
//! one host, and a Markdown table with one column per host laid out like the
//! "System configuration information" appendix of a published comparison.
//! Both are pure functions of [`Inventory`]; nothing here reads the system.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::parse::parse_cpu_list;
use crate::{CacheInfo, Disk, Filesystem, GuestFacts, Inventory, Nic};

/// What a value the collector could not read is shown as.
const UNKNOWN: &str = "unknown";
/// What a Markdown cell shows when a host has no such item at all (a third
/// NIC on a host with two), as the seeds' appendices do.
const ABSENT: &str = "N/A";

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;
const TIB: u64 = 1024 * GIB;

/// A sectioned listing of one host, labels aligned within each section:
/// System, CPU, Memory, Operating system, Network interfaces, Disks, File
/// systems, Sysctls, then Tools and Warnings when there are any.
pub fn render_text(inv: &Inventory) -> String {
    let mut sections: Vec<(&str, Vec<(String, String)>)> = Vec::new();
    let pairs = |rows: &[(&str, String)]| -> Vec<(String, String)> {
        rows.iter()
            .map(|(label, value)| (label.to_string(), value.clone()))
            .collect()
    };

    sections.push((
        "Host",
        pairs(&[
            ("Host name", text_or_unknown(&inv.hostname)),
            ("Collected at", text_or_unknown(&inv.collected_at)),
        ]),
    ));
    sections.push((
        "System",
        pairs(&[
            ("Vendor and model", system_model(inv)),
            ("Board", board(inv)),
            ("BIOS name and version", bios(inv)),
        ]),
    ));

    let cpu = &inv.cpu;
    let mut cpu_rows = vec![
        ("Model", opt(&cpu.model_name)),
        ("Vendor", opt(&cpu.vendor)),
        ("Family / model / stepping", family_model_stepping(inv)),
        ("Microcode", opt(&cpu.microcode)),
        ("Processor packages", opt_num(cpu.sockets)),
        ("Cores per package", opt_num(cpu.cores_per_socket)),
        ("Threads per core", opt_num(cpu.threads_per_core)),
        ("SMT control", opt(&cpu.smt_control)),
        ("Logical CPUs", cpu.logical_cpus.to_string()),
        ("NUMA nodes", opt_num(cpu.numa_nodes)),
        ("Frequency", frequency(inv)),
        ("Flags", flags(inv)),
    ];
    let cache_labels = ["L1 cache", "L2 cache", "L3 cache", "L4 cache"];
    for (level, label) in (1u8..).zip(cache_labels) {
        if let Some(summary) = cache_summary(inv, level) {
            cpu_rows.push((label, summary));
        }
    }
    sections.push(("CPU", pairs(&cpu_rows)));

    sections.push((
        "Memory",
        pairs(&[
            ("Total", opt_bytes(inv.memory.total_bytes)),
            ("Swap", opt_bytes(inv.memory.swap_total_bytes)),
            ("Huge pages", hugepages(inv)),
        ]),
    ));

    let os = &inv.os;
    sections.push((
        "Operating system",
        pairs(&[
            ("Distribution", opt(&os.distribution)),
            ("Kernel", kernel(inv)),
            ("Kernel build", opt(&os.kernel_version)),
            ("Architecture", opt(&os.machine)),
            ("Boot command line", opt(&os.cmdline)),
            ("Clock source", clocksource(inv)),
            ("Transparent huge pages", thp(inv)),
            ("CPU frequency driver", opt(&os.cpufreq_driver)),
            ("CPU frequency governor", governor(inv)),
            ("Energy-performance preference", epp(inv)),
            ("Turbo / boost", boost(inv)),
            ("cpuidle driver", cpuidle(inv)),
        ]),
    ));

    sections.push((
        "Network interfaces",
        inv.nics
            .iter()
            .map(|n| (n.name.clone(), nic_summary(n)))
            .collect(),
    ));
    sections.push((
        "Disks",
        inv.disks
            .iter()
            .map(|d| (d.name.clone(), disk_summary(d)))
            .collect(),
    ));
    sections.push((
        "File systems",
        inv.filesystems
            .iter()
            .map(|f| (f.mount_point.clone(), fs_summary(f)))
            .collect(),
    ));
    sections.push((
        "Sysctls",
        inv.sysctls
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    ));
    if !inv.tools.extra.is_empty() {
        sections.push((
            "Tools",
            inv.tools
                .extra
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ));
    }
    if !inv.warnings.is_empty() {
        sections.push((
            "Warnings",
            inv.warnings
                .iter()
                .map(|w| (String::new(), format!("- {w}")))
                .collect(),
        ));
    }

    let mut out = String::new();
    for (i, (title, rows)) in sections.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(title);
        out.push('\n');
        if rows.is_empty() {
            out.push_str("  (none)\n");
            continue;
        }
        let width = rows
            .iter()
            .map(|(l, _)| l.chars().count())
            .max()
            .unwrap_or(0);
        for (label, value) in rows {
            if label.is_empty() {
                let _ = writeln!(out, "  {value}");
            } else {
                let _ = writeln!(out, "  {label:<width$}  {value}");
            }
        }
    }
    out
}

/// The hosts' system configuration side by side, as data: one column per
/// host, rows after the seeds' Appendix A. Every renderer (Markdown, HTML,
/// CSV) writes this one structure, so no renderer parses another's output.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HostTable {
    /// The column heads: one label per host.
    pub hosts: Vec<String>,
    /// The rows, in order.
    pub rows: Vec<Row>,
}

/// One row of a [`HostTable`]: a section heading, or a label with one
/// value per host.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Row {
    /// A section ("General", "CPU" …): the rows below it until the next.
    Heading(String),
    /// An item's label and its value on each host, in column order.
    Values(String, Vec<String>),
}

impl Row {
    /// Whether the hosts' values differ (a heading never does).
    pub fn differs(&self) -> bool {
        match self {
            Row::Heading(_) => false,
            Row::Values(_, v) => v.iter().any(|x| x != &v[0]),
        }
    }
}

impl HostTable {
    /// The table as CSV: `section,System,HOST…` then one line per item,
    /// the section being the heading above it.
    pub fn csv(&self) -> String {
        let field = |s: &str| {
            if s.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        };
        let mut out = String::from("section,System");
        for h in &self.hosts {
            out.push(',');
            out.push_str(&field(h));
        }
        out.push('\n');
        let mut section = "";
        for row in &self.rows {
            match row {
                Row::Heading(title) => section = title,
                Row::Values(label, values) => {
                    let _ = write!(out, "{},{}", field(section), field(label));
                    for v in values {
                        out.push(',');
                        out.push_str(&field(v));
                    }
                    out.push('\n');
                }
            }
        }
        out
    }

    /// The table in Markdown: one table, sections as bold rows.
    pub fn markdown(&self) -> String {
        let mut out = String::from("| System |");
        for label in &self.hosts {
            let _ = write!(out, " {} |", cell(label));
        }
        out.push_str("\n|---|");
        for _ in &self.hosts {
            out.push_str("---|");
        }
        out.push('\n');
        for row in &self.rows {
            match row {
                Row::Heading(title) => {
                    let _ = write!(out, "| **{}** |", cell(title));
                    for _ in &self.hosts {
                        out.push_str("  |");
                    }
                }
                Row::Values(label, values) => {
                    let _ = write!(out, "| {} |", cell(label));
                    for value in values {
                        let _ = write!(out, " {} |", cell(value));
                    }
                }
            }
            out.push('\n');
        }
        out
    }
}

/// One Markdown table, one column per host, rows after the seeds' Appendix A
/// (General, CPU, Memory, Operating system, Network interfaces, Disks, File
/// systems), then the sysctls that differ between hosts (with two or more
/// hosts; the full list is in [`render_text`]), the callers' tool versions,
/// and collection time and warning count.
///
/// NICs, disks and file systems are matched by position ("Network interface
/// #1" …), physical NICs before virtual ones, because hosts rarely share
/// interface or device names.
pub fn render_markdown(hosts: &[(&str, &Inventory)]) -> String {
    host_table(hosts).markdown()
}

/// The hosts' [`HostTable`]: what [`render_markdown`] writes.
pub fn host_table(hosts: &[(&str, &Inventory)]) -> HostTable {
    let mut rows: Vec<Row> = Vec::new();
    let heading = |rows: &mut Vec<Row>, title: &str| rows.push(Row::Heading(title.to_string()));
    let row = |rows: &mut Vec<Row>, label: &str, value: &dyn Fn(&Inventory) -> String| {
        rows.push(Row::Values(
            label.to_string(),
            hosts.iter().map(|(_, inv)| value(inv)).collect(),
        ));
    };

    heading(&mut rows, "General");
    row(&mut rows, "Vendor and model number", &system_model);
    row(&mut rows, "Motherboard", &board);
    row(&mut rows, "BIOS name and version", &bios);
    row(&mut rows, "Number of processor packages", &|i| {
        opt_num(i.cpu.sockets)
    });
    row(&mut rows, "Number of cores per processor", &|i| {
        opt_num(i.cpu.cores_per_socket)
    });
    row(&mut rows, "Number of hardware threads per core", &|i| {
        opt_num(i.cpu.threads_per_core)
    });
    row(&mut rows, "SMT (Hyper-Threading) control", &|i| {
        opt(&i.cpu.smt_control)
    });
    row(&mut rows, "Number of logical CPUs", &|i| {
        i.cpu.logical_cpus.to_string()
    });
    row(&mut rows, "NUMA nodes", &|i| opt_num(i.cpu.numa_nodes));

    heading(&mut rows, "CPU");
    row(&mut rows, "Vendor", &|i| opt(&i.cpu.vendor));
    row(&mut rows, "CPU model", &|i| opt(&i.cpu.model_name));
    row(
        &mut rows,
        "Family / model / stepping",
        &family_model_stepping,
    );
    row(&mut rows, "Microcode", &|i| opt(&i.cpu.microcode));
    row(&mut rows, "Core frequency", &frequency);
    for level in 1u8..=4 {
        if hosts
            .iter()
            .any(|(_, inv)| inv.cpu.caches.iter().any(|c| c.level == level))
        {
            row(&mut rows, &format!("L{level} cache"), &|i| {
                cache_summary(i, level).unwrap_or_else(|| ABSENT.to_string())
            });
        }
    }
    row(&mut rows, "Notable flags", &flags);

    heading(&mut rows, "Memory");
    // "GB" as in the seeds and the JEDEC memory convention (JESD100B.01):
    // 2^30 bytes. MemTotal reads a little below the installed DIMM total.
    row(&mut rows, "Total RAM in system (GB)", &|i| {
        i.memory
            .total_bytes
            .map_or_else(|| UNKNOWN.to_string(), |b| format!("{:.1}", gib(b)))
    });
    row(&mut rows, "Swap (GB)", &|i| {
        i.memory
            .swap_total_bytes
            .map_or_else(|| UNKNOWN.to_string(), |b| format!("{:.1}", gib(b)))
    });
    row(&mut rows, "Huge pages", &hugepages);

    heading(&mut rows, "Operating system");
    row(&mut rows, "Distribution", &|i| opt(&i.os.distribution));
    row(&mut rows, "Kernel", &kernel);
    row(&mut rows, "Boot command line", &|i| opt(&i.os.cmdline));
    row(&mut rows, "Clock source", &clocksource);
    row(&mut rows, "Transparent huge pages", &thp);
    row(&mut rows, "CPU frequency driver", &|i| {
        opt(&i.os.cpufreq_driver)
    });
    row(&mut rows, "CPU frequency governor", &governor);
    row(&mut rows, "Energy-performance preference", &epp);
    row(&mut rows, "Turbo / boost", &boost);
    row(&mut rows, "cpuidle driver", &cpuidle);

    heading(&mut rows, "Network interfaces");
    let max_nics = hosts.iter().map(|(_, i)| i.nics.len()).max().unwrap_or(0);
    for n in 0..max_nics {
        row(&mut rows, &format!("Network interface #{}", n + 1), &|i| {
            nics_physical_first(i).get(n).map_or_else(
                || ABSENT.to_string(),
                |nic| format!("{}: {}", nic.name, nic_summary(nic)),
            )
        });
    }

    heading(&mut rows, "Disks");
    let max_disks = hosts.iter().map(|(_, i)| i.disks.len()).max().unwrap_or(0);
    for n in 0..max_disks {
        row(&mut rows, &format!("Disk #{}", n + 1), &|i| {
            i.disks.get(n).map_or_else(
                || ABSENT.to_string(),
                |d| format!("{}: {}", d.name, disk_summary(d)),
            )
        });
    }

    heading(&mut rows, "File systems");
    let max_fs = hosts
        .iter()
        .map(|(_, i)| i.filesystems.len())
        .max()
        .unwrap_or(0);
    for n in 0..max_fs {
        row(&mut rows, &format!("File system #{}", n + 1), &|i| {
            i.filesystems.get(n).map_or_else(
                || ABSENT.to_string(),
                |f| format!("{}: {}", f.mount_point, fs_summary(f)),
            )
        });
    }

    if hosts.len() >= 2 {
        let keys: BTreeSet<&String> = hosts.iter().flat_map(|(_, i)| i.sysctls.keys()).collect();
        let differing: Vec<&String> = keys
            .iter()
            .copied()
            .filter(|key| {
                let values: BTreeSet<Option<&String>> =
                    hosts.iter().map(|(_, i)| i.sysctls.get(*key)).collect();
                values.len() > 1
            })
            .collect();
        heading(&mut rows, "Sysctls that differ");
        if differing.is_empty() {
            row(&mut rows, "(none differ; sysctls compared)", &|i| {
                i.sysctls.len().to_string()
            });
        }
        for key in differing {
            row(&mut rows, key, &|i| {
                i.sysctls
                    .get(key)
                    .cloned()
                    .unwrap_or_else(|| ABSENT.to_string())
            });
        }
    }

    let tool_keys: BTreeSet<&String> = hosts
        .iter()
        .flat_map(|(_, i)| i.tools.extra.keys())
        .collect();
    if !tool_keys.is_empty() {
        heading(&mut rows, "Tools");
        for key in tool_keys {
            row(&mut rows, key, &|i| {
                i.tools
                    .extra
                    .get(key)
                    .cloned()
                    .unwrap_or_else(|| ABSENT.to_string())
            });
        }
    }

    if hosts.iter().any(|(_, i)| i.guest.is_some()) {
        // A guest's machine as QEMU was asked for it; hosts that are no
        // guest show the absent mark.
        heading(&mut rows, "Guest (QEMU)");
        let g = guest_cell;
        row(&mut rows, "QEMU version", &|i| g(i, &|g| g.qemu.clone()));
        row(&mut rows, "Machine type", &|i| g(i, &|g| g.machine.clone()));
        row(&mut rows, "Acceleration", &|i| g(i, &guest_accel));
        row(&mut rows, "vCPUs → host CPUs", &|i| g(i, &vcpu_map));
        row(&mut rows, "Memory (MiB), backing", &|i| {
            g(i, &|g| format!("{}, {}", g.memory_mib, g.memory_backing))
        });
        row(&mut rows, "NIC", &|i| g(i, &|g| g.nic.clone()));
        row(&mut rows, "Boot to agent (s)", &|i| {
            g(i, &|g| format!("{:.1}", g.boot_s))
        });
    }

    heading(&mut rows, "Collection");
    row(&mut rows, "Collected at", &|i| {
        text_or_unknown(&i.collected_at)
    });
    row(&mut rows, "Items not collected (warnings)", &|i| {
        i.warnings.len().to_string()
    });

    HostTable {
        hosts: hosts.iter().map(|(label, _)| label.to_string()).collect(),
        rows,
    }
}

// ---- value formatting shared by both renderers ------------------------------

/// A guest row's cell: the absent mark on a host that is no guest.
fn guest_cell(i: &Inventory, f: &dyn Fn(&GuestFacts) -> String) -> String {
    i.guest.as_ref().map_or_else(|| ABSENT.to_string(), f)
}

/// "tcg (emulated: why)" or "kvm".
fn guest_accel(g: &GuestFacts) -> String {
    match &g.emulated {
        Some(why) => format!(
            "{} (emulated, not a virtualization measurement: {why})",
            g.accel
        ),
        None => g.accel.clone(),
    }
}

/// "0→1, 1→3" (vCPU → host CPU), "not pinned" for a vCPU left to the
/// scheduler.
fn vcpu_map(g: &GuestFacts) -> String {
    if g.vcpu_cpus.is_empty() {
        return format!("{} vCPU(s), not pinned", g.vcpus);
    }
    g.vcpu_cpus
        .iter()
        .enumerate()
        .map(|(v, c)| match c {
            Some(c) => format!("{v}→{c}"),
            None => format!("{v}→not pinned"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Escapes what would break a table cell: pipes and line breaks.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn opt(value: &Option<String>) -> String {
    value.clone().unwrap_or_else(|| UNKNOWN.to_string())
}

fn opt_num<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| UNKNOWN.to_string(), |v| v.to_string())
}

fn text_or_unknown(text: &str) -> String {
    if text.is_empty() {
        UNKNOWN.to_string()
    } else {
        text.to_string()
    }
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / GIB as f64
}

/// Binary units, exact when the size is a whole number of the unit
/// (`32 KiB`, `20 MiB`), else one decimal (`23.5 GiB`).
fn human_bytes(bytes: u64) -> String {
    for (unit, name) in [(TIB, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")] {
        if bytes >= unit {
            return if bytes.is_multiple_of(unit) {
                format!("{} {name}", bytes / unit)
            } else {
                format!("{:.1} {name}", bytes as f64 / unit as f64)
            };
        }
    }
    format!("{bytes} B")
}

fn opt_bytes(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| UNKNOWN.to_string(), human_bytes)
}

fn joined(parts: &[&Option<String>]) -> String {
    let present: Vec<&str> = parts.iter().filter_map(|p| p.as_deref()).collect();
    if present.is_empty() {
        UNKNOWN.to_string()
    } else {
        present.join(" ")
    }
}

fn system_model(inv: &Inventory) -> String {
    let s = &inv.system;
    joined(&[&s.sys_vendor, &s.product_name, &s.product_version])
}

fn board(inv: &Inventory) -> String {
    joined(&[&inv.system.board_vendor, &inv.system.board_name])
}

fn bios(inv: &Inventory) -> String {
    let s = &inv.system;
    let name = joined(&[&s.bios_vendor, &s.bios_version]);
    match &s.bios_date {
        Some(date) if name != UNKNOWN => format!("{name} ({date})"),
        _ => name,
    }
}

fn family_model_stepping(inv: &Inventory) -> String {
    let c = &inv.cpu;
    if c.family.is_none() && c.model.is_none() && c.stepping.is_none() {
        return UNKNOWN.to_string();
    }
    format!(
        "{} / {} / {}",
        opt(&c.family),
        opt(&c.model),
        opt(&c.stepping)
    )
}

fn mhz(khz: u64) -> u64 {
    (khz + 500) / 1000
}

fn frequency(inv: &Inventory) -> String {
    let c = &inv.cpu;
    let mut parts = Vec::new();
    if let Some(cur) = c.cur_freq_khz {
        parts.push(format!("{} MHz now", mhz(cur)));
    }
    match (c.min_freq_khz, c.max_freq_khz) {
        (Some(min), Some(max)) => parts.push(format!("{}-{} MHz range", mhz(min), mhz(max))),
        (None, Some(max)) => parts.push(format!("{} MHz max", mhz(max))),
        _ => {}
    }
    if parts.is_empty() {
        UNKNOWN.to_string()
    } else {
        parts.join(", ")
    }
}

fn flags(inv: &Inventory) -> String {
    let c = &inv.cpu;
    if c.flags_count == 0 {
        return UNKNOWN.to_string();
    }
    if c.notable_flags.is_empty() {
        format!("{} flags", c.flags_count)
    } else {
        format!(
            "{} flags, including {}",
            c.flags_count,
            c.notable_flags.join(" ")
        )
    }
}

/// A cache level in the seeds' style: `32 KiB I + 32 KiB D per core`,
/// `32 MiB per package`, with the instance count when known.
fn cache_summary(inv: &Inventory, level: u8) -> Option<String> {
    let mut caches: Vec<&CacheInfo> = inv.cpu.caches.iter().filter(|c| c.level == level).collect();
    // Instruction before data, as the seeds write it ("32 KB I + 32 KB D").
    caches.sort_by_key(|c| match c.kind.as_str() {
        "Instruction" => 0,
        "Data" => 1,
        _ => 2,
    });
    let first = caches.first()?;
    let sizes: Vec<String> = caches
        .iter()
        .map(|c| {
            let size = opt_bytes(c.size_bytes);
            match c.kind.as_str() {
                "Instruction" => format!("{size} I"),
                "Data" => format!("{size} D"),
                _ => size,
            }
        })
        .collect();
    let mut text = sizes.join(" + ");
    let _ = write!(text, " {}", cache_scope(inv, first));
    if let Some(n) = first.instances {
        let plural = if n == 1 { "" } else { "s" };
        let _ = write!(text, " ({n} instance{plural})");
    }
    Some(text)
}

/// Who shares one instance of the cache, judged by how many CPUs its
/// `shared_cpu_list` names against the topology.
fn cache_scope(inv: &Inventory, cache: &CacheInfo) -> String {
    let Some(shared) = parse_cpu_list(&cache.shared_cpu_list).map(|c| c.len() as u32) else {
        return format!("shared by CPUs {}", cache.shared_cpu_list);
    };
    let c = &inv.cpu;
    let threads = c.threads_per_core.unwrap_or(1);
    let per_package = match (c.sockets, c.cores_per_socket) {
        (Some(_), Some(cores)) => Some(cores * threads),
        _ => None,
    };
    if shared == threads {
        "per core".to_string()
    } else if shared <= 1 {
        "per CPU".to_string()
    } else if Some(shared) == per_package {
        "per package".to_string()
    } else {
        format!("shared by {shared} CPUs")
    }
}

fn hugepages(inv: &Inventory) -> String {
    let m = &inv.memory;
    match (m.hugepages_total, m.hugepage_size_bytes) {
        (Some(total), Some(size)) => {
            let mut text = format!("{total} × {}", human_bytes(size));
            if let Some(free) = m.hugepages_free {
                let _ = write!(text, " ({free} free)");
            }
            text
        }
        _ => UNKNOWN.to_string(),
    }
}

fn kernel(inv: &Inventory) -> String {
    let os = &inv.os;
    match (&os.kernel_release, &os.machine) {
        (Some(release), Some(machine)) => format!("{release} ({machine})"),
        (Some(release), None) => release.clone(),
        _ => UNKNOWN.to_string(),
    }
}

fn clocksource(inv: &Inventory) -> String {
    let os = &inv.os;
    let current = opt(&os.clocksource_current);
    if os.clocksource_available.is_empty() {
        current
    } else {
        format!(
            "{current} (available: {})",
            os.clocksource_available.join(", ")
        )
    }
}

fn thp(inv: &Inventory) -> String {
    let os = &inv.os;
    if os.thp_enabled.is_none() && os.thp_defrag.is_none() {
        return UNKNOWN.to_string();
    }
    format!(
        "enabled {}, defrag {}",
        opt(&os.thp_enabled),
        opt(&os.thp_defrag)
    )
}

/// `performance (all CPUs)` when uniform, else each value with its CPUs.
fn per_cpu(values: &BTreeMap<String, String>, logical_cpus: u32) -> String {
    if values.is_empty() {
        return UNKNOWN.to_string();
    }
    if values.len() == 1 {
        let (value, cpus) = values.iter().next().expect("one entry");
        if parse_cpu_list(cpus).is_some_and(|c| c.len() as u32 == logical_cpus) {
            return format!("{value} (all CPUs)");
        }
    }
    values
        .iter()
        .map(|(value, cpus)| format!("{value} (CPUs {cpus})"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn governor(inv: &Inventory) -> String {
    per_cpu(&inv.os.cpufreq_governors, inv.cpu.logical_cpus)
}

fn epp(inv: &Inventory) -> String {
    per_cpu(&inv.os.energy_performance_preferences, inv.cpu.logical_cpus)
}

fn boost(inv: &Inventory) -> String {
    match inv.os.boost {
        Some(true) => "enabled".to_string(),
        Some(false) => "disabled".to_string(),
        None => UNKNOWN.to_string(),
    }
}

fn cpuidle(inv: &Inventory) -> String {
    let os = &inv.os;
    match (&os.cpuidle_driver, &os.cpuidle_governor) {
        (Some(driver), Some(governor)) => format!("{driver} (governor {governor})"),
        (Some(driver), None) => driver.clone(),
        (None, Some(governor)) => format!("{UNKNOWN} (governor {governor})"),
        (None, None) => UNKNOWN.to_string(),
    }
}

fn nics_physical_first(inv: &Inventory) -> Vec<&Nic> {
    let (mut physical, virtual_): (Vec<&Nic>, Vec<&Nic>) = inv
        .nics
        .iter()
        .partition(|n| n.driver.as_deref() != Some("virtual"));
    physical.extend(virtual_);
    physical
}

fn nic_summary(nic: &Nic) -> String {
    let mut parts = vec![match &nic.driver {
        Some(driver) => driver.clone(),
        None => format!("driver {UNKNOWN}"),
    }];
    if let Some(fw) = &nic.firmware_version {
        parts.push(format!("firmware {fw}"));
    }
    if let Some(speed) = nic.speed_mbps {
        parts.push(format!("{speed} Mb/s"));
    }
    if let Some(mtu) = nic.mtu {
        parts.push(format!("MTU {mtu}"));
    }
    if let Some(state) = &nic.operstate {
        parts.push(state.clone());
    }
    if let Some(mac) = &nic.mac {
        parts.push(mac.clone());
    }
    if let (Some(rx), Some(tx)) = (nic.rx_queues, nic.tx_queues) {
        parts.push(format!("{rx} rx / {tx} tx queues"));
    }
    parts.extend(nic.ipv4.iter().cloned());
    parts.extend(nic.ipv6.iter().cloned());
    parts.join(", ")
}

fn disk_summary(disk: &Disk) -> String {
    let mut parts = Vec::new();
    let identity = joined(&[&disk.vendor, &disk.model]);
    if identity != UNKNOWN {
        parts.push(identity);
    }
    parts.push(opt_bytes(disk.size_bytes));
    match disk.rotational {
        Some(true) => parts.push("rotational".to_string()),
        Some(false) => parts.push("non-rotational".to_string()),
        None => {}
    }
    if let Some(scheduler) = &disk.scheduler {
        parts.push(format!("scheduler {scheduler}"));
    }
    if let Some(kb) = disk.read_ahead_kb {
        parts.push(format!("read-ahead {kb} KiB"));
    }
    if let Some(n) = disk.nr_requests {
        parts.push(format!("nr_requests {n}"));
    }
    parts.join(", ")
}

fn fs_summary(fs: &Filesystem) -> String {
    format!("{} on {} ({})", fs.fs_type, fs.device, fs.options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CpuInfo, MemoryInfo, OsInfo, SystemInfo, Tools};

    fn host(name: &str, governor: &str, rmem_max: &str) -> Inventory {
        let mut inv = Inventory {
            hostname: name.to_string(),
            collected_at: "2025-01-02T03:04:05Z".to_string(),
            system: SystemInfo {
                sys_vendor: Some("Dell Inc.".into()),
                product_name: Some("PowerEdge R720".into()),
                bios_vendor: Some("Dell".into()),
                bios_version: Some("1.5.1".into()),
                ..Default::default()
            },
            cpu: CpuInfo {
                model_name: Some("Intel(R) Xeon(R) CPU E5-2690 0 @ 2.90GHz".into()),
                vendor: Some("GenuineIntel".into()),
                family: Some("6".into()),
                model: Some("45".into()),
                stepping: Some("6".into()),
                sockets: Some(2),
                cores_per_socket: Some(8),
                threads_per_core: Some(2),
                logical_cpus: 32,
                cur_freq_khz: Some(2_900_000),
                flags_count: 90,
                notable_flags: vec!["aes".into(), "avx".into()],
                caches: vec![
                    CacheInfo {
                        level: 1,
                        kind: "Data".into(),
                        size_bytes: Some(32 * KIB),
                        shared_cpu_list: "0,16".into(),
                        instances: Some(16),
                    },
                    CacheInfo {
                        level: 1,
                        kind: "Instruction".into(),
                        size_bytes: Some(32 * KIB),
                        shared_cpu_list: "0,16".into(),
                        instances: Some(16),
                    },
                    CacheInfo {
                        level: 2,
                        kind: "Unified".into(),
                        size_bytes: Some(256 * KIB),
                        shared_cpu_list: "0,16".into(),
                        instances: Some(16),
                    },
                    CacheInfo {
                        level: 3,
                        kind: "Unified".into(),
                        size_bytes: Some(20 * MIB),
                        shared_cpu_list: "0-7,16-23".into(),
                        instances: Some(2),
                    },
                ],
                ..Default::default()
            },
            memory: MemoryInfo {
                total_bytes: Some(128 * GIB),
                hugepages_total: Some(0),
                hugepages_free: Some(0),
                hugepage_size_bytes: Some(2 * MIB),
                ..Default::default()
            },
            os: OsInfo {
                kernel_release: Some("2.6.32-358.1.1.el6.x86_64".into()),
                machine: Some("x86_64".into()),
                distribution: Some("Red Hat Enterprise Linux 6.4".into()),
                cpufreq_governors: [(governor.to_string(), "0-31".to_string())].into(),
                ..Default::default()
            },
            nics: vec![
                Nic {
                    name: "lo".into(),
                    driver: Some("virtual".into()),
                    mtu: Some(65536),
                    ..Default::default()
                },
                Nic {
                    name: "em1".into(),
                    driver: Some("igb".into()),
                    speed_mbps: Some(1000),
                    ipv4: vec!["10.0.0.1/24".into()],
                    ..Default::default()
                },
            ],
            disks: vec![Disk {
                name: "sda".into(),
                model: Some("PERC H710P".into()),
                size_bytes: Some(73 * GIB),
                rotational: Some(true),
                scheduler: Some("deadline".into()),
                ..Default::default()
            }],
            filesystems: vec![Filesystem {
                device: "/dev/sda1".into(),
                mount_point: "/".into(),
                fs_type: "ext4".into(),
                options: "rw|odd".into(),
            }],
            sysctls: [
                ("net.core.rmem_max".to_string(), rmem_max.to_string()),
                ("vm.swappiness".to_string(), "60".to_string()),
            ]
            .into(),
            tools: Tools::default(),
            warnings: Vec::new(),
            guest: None,
        };
        inv.tools.extra.insert("benchlab".into(), "0.1.0".into());
        inv
    }

    #[test]
    fn a_guest_gets_its_rows_and_a_host_that_is_none_the_absent_mark() {
        let metal = host("metal", "performance", "212992");
        let mut vm = host("vm", "performance", "212992");
        vm.guest = Some(GuestFacts {
            host: "g1".into(),
            qemu: "7.2.19".into(),
            machine: "q35".into(),
            accel: "tcg".into(),
            emulated: Some("KVM cannot run a guest here".into()),
            vcpus: 2,
            vcpu_cpus: vec![Some(1), None],
            vcpu_threads: vec![101, 102],
            memory_mib: 4096,
            memory_backing: "2 MiB huge pages".into(),
            nic: "virtio-net-pci on tap t0".into(),
            kernel: "6.1.0".into(),
            boot_s: 12.34,
        });
        let table = host_table(&[("metal", &metal), ("g1", &vm)]);
        let cells = |label: &str| -> Vec<String> {
            table
                .rows
                .iter()
                .find_map(|r| match r {
                    Row::Values(l, v) if l == label => Some(v.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| panic!("no row {label}"))
        };
        assert!(table.rows.contains(&Row::Heading("Guest (QEMU)".into())));
        assert_eq!(
            cells("Acceleration"),
            [
                ABSENT.to_string(),
                "tcg (emulated, not a virtualization measurement: KVM cannot run a guest here)"
                    .to_string()
            ]
        );
        assert_eq!(cells("vCPUs → host CPUs")[1], "0→1, 1→not pinned");
        assert_eq!(cells("Memory (MiB), backing")[1], "4096, 2 MiB huge pages");
        assert_eq!(cells("Boot to agent (s)")[1], "12.3");
        // No guest, no guest section.
        let plain = host_table(&[("metal", &metal)]);
        assert!(!plain.rows.contains(&Row::Heading("Guest (QEMU)".into())));
    }

    #[test]
    fn text_has_sections_and_aligned_values() {
        let inv = host("sut", "performance", "212992");
        let text = render_text(&inv);
        for section in [
            "\nCPU\n",
            "\nMemory\n",
            "\nOperating system\n",
            "\nNetwork interfaces\n",
            "\nDisks\n",
            "\nFile systems\n",
            "\nSysctls\n",
            "\nTools\n",
        ] {
            assert!(text.contains(section), "missing {section:?} in\n{text}");
        }
        // Labels are padded to the longest in their section.
        let width = "Family / model / stepping".len();
        let l1 = format!(
            "\n  {:<width$}  32 KiB I + 32 KiB D per core (16 instances)\n",
            "L1 cache"
        );
        assert!(text.contains(&l1), "{text}");
        assert!(text.contains("20 MiB per package (2 instances)"), "{text}");
        assert!(text.contains("\n  Total       128 GiB\n"), "{text}");
        assert!(
            text.contains("CPU frequency governor         performance (all CPUs)\n"),
            "{text}"
        );
        assert!(text.contains("2.6.32-358.1.1.el6.x86_64 (x86_64)"));
        assert!(
            text.contains("em1  igb, 1000 Mb/s, 10.0.0.1/24\n"),
            "{text}"
        );
        assert!(text.contains("net.core.rmem_max  212992\n"), "{text}");
        assert!(!text.contains("Warnings"));
    }

    #[test]
    fn markdown_has_one_column_per_host_and_escapes_cells() {
        let a = host("a", "performance", "212992");
        let b = host("b", "powersave", "16777216");
        let md = render_markdown(&[("SUT", &a), ("Load generator", &b)]);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines[0], "| System | SUT | Load generator |");
        assert_eq!(lines[1], "|---|---|---|");
        for line in &lines {
            // Four unescaped pipes: label + two hosts.
            let pipes = line.matches('|').count() - line.matches("\\|").count();
            assert_eq!(pipes, 4, "bad row {line:?}");
        }
        for expected in [
            "| **General** |  |  |",
            "| Number of processor packages | 2 | 2 |",
            "| Number of cores per processor | 8 | 8 |",
            "| Number of hardware threads per core | 2 | 2 |",
            "| CPU model | Intel(R) Xeon(R) CPU E5-2690 0 @ 2.90GHz | Intel(R) Xeon(R) CPU E5-2690 0 @ 2.90GHz |",
            "| L2 cache | 256 KiB per core (16 instances) | 256 KiB per core (16 instances) |",
            "| Total RAM in system (GB) | 128.0 | 128.0 |",
            "| Kernel | 2.6.32-358.1.1.el6.x86_64 (x86_64) | 2.6.32-358.1.1.el6.x86_64 (x86_64) |",
            "| Distribution | Red Hat Enterprise Linux 6.4 | Red Hat Enterprise Linux 6.4 |",
            "| CPU frequency governor | performance (all CPUs) | powersave (all CPUs) |",
            "| Network interface #1 | em1: igb, 1000 Mb/s, 10.0.0.1/24 | em1: igb, 1000 Mb/s, 10.0.0.1/24 |",
            "| Network interface #2 | lo: virtual, MTU 65536 | lo: virtual, MTU 65536 |",
            "| Disk #1 | sda: PERC H710P, 73 GiB, rotational, scheduler deadline | sda: PERC H710P, 73 GiB, rotational, scheduler deadline |",
            "| File system #1 | /: ext4 on /dev/sda1 (rw\\|odd) | /: ext4 on /dev/sda1 (rw\\|odd) |",
            "| net.core.rmem_max | 212992 | 16777216 |",
            "| benchlab | 0.1.0 | 0.1.0 |",
        ] {
            assert!(md.contains(expected), "missing {expected:?} in\n{md}");
        }
        assert!(
            !md.contains("vm.swappiness"),
            "identical sysctls are not listed"
        );
    }

    /// Markdown, CSV and the differing-row mark come from one structure:
    /// a value holding `|` and `,` reaches the CSV whole (no renderer
    /// re-parses another's output), and a differing sysctl is marked.
    #[test]
    fn one_table_for_every_format() {
        let a = host("a", "performance", "212992");
        let b = host("b", "powersave", "16777216");
        let t = host_table(&[("SUT", &a), ("gen, 2", &b)]);
        assert_eq!(t.hosts, ["SUT", "gen, 2"]);
        assert_eq!(
            t.markdown(),
            render_markdown(&[("SUT", &a), ("gen, 2", &b)])
        );
        let csv = t.csv();
        let mut lines = csv.lines();
        assert_eq!(lines.next(), Some("section,System,SUT,\"gen, 2\""));
        assert!(
            csv.contains("\nFile systems,File system #1,/: ext4 on /dev/sda1 (rw|odd),/: ext4 on /dev/sda1 (rw|odd)\n"),
            "{csv}"
        );
        let row = |label: &str| {
            t.rows
                .iter()
                .find(|r| matches!(r, Row::Values(l, _) if l == label))
                .unwrap_or_else(|| panic!("no row {label}"))
        };
        assert!(row("net.core.rmem_max").differs());
        assert!(!row("CPU model").differs());
        assert!(!Row::Heading("CPU".into()).differs());
    }

    #[test]
    fn markdown_fills_missing_items_with_na() {
        let a = host("a", "performance", "1");
        let mut b = host("b", "performance", "1");
        b.nics.clear();
        b.disks.clear();
        b.sysctls.clear();
        let md = render_markdown(&[("a", &a), ("b", &b)]);
        assert!(md.contains("| Network interface #2 | lo: virtual, MTU 65536 | N/A |"));
        assert!(md.contains("| vm.swappiness | 60 | N/A |"), "{md}");
        let single = render_markdown(&[("a", &a)]);
        assert!(!single.contains("Sysctls that differ"));
        assert!(render_markdown(&[]).starts_with("| System |\n|---|\n"));
    }

    #[test]
    fn cache_scope_and_sizes() {
        assert_eq!(human_bytes(32 * KIB), "32 KiB");
        assert_eq!(human_bytes(24_684_096 * KIB), "23.5 GiB");
        assert_eq!(human_bytes(512), "512 B");
        let mut inv = host("a", "performance", "1");
        inv.cpu.threads_per_core = Some(1);
        inv.cpu.caches[0].shared_cpu_list = "0".into();
        assert_eq!(cache_scope(&inv, &inv.cpu.caches[0]), "per core");
        inv.cpu.caches[0].shared_cpu_list = "0-3".into();
        assert_eq!(cache_scope(&inv, &inv.cpu.caches[0]), "shared by 4 CPUs");
    }
}
