//! Pure parsers for the text formats the collector reads, kept apart from the
//! file access so that each can be tested on fixed sample text.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::Filesystem;

/// `/proc/meminfo` → name → value. Values carrying the `kB` unit are
/// converted to bytes (the kernel's "kB" is 1024 bytes, see proc(5));
/// unitless values (`HugePages_Total`) are counts and kept as they are.
pub(crate) fn parse_meminfo(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let Some(Ok(value)) = words.next().map(str::parse::<u64>) else {
            continue;
        };
        let value = match words.next() {
            Some("kB") => value.saturating_mul(1024),
            _ => value,
        };
        out.insert(key.trim().to_string(), value);
    }
    out
}

/// `/proc/cpuinfo` → one map per blank-line-separated block. On x86 every
/// block is a processor; on ARM a trailing block without `processor` holds
/// board-wide keys such as `Hardware`.
pub(crate) fn parse_cpuinfo(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut blocks = Vec::new();
    let mut current = BTreeMap::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            if !current.is_empty() {
                blocks.push(std::mem::take(&mut current));
            }
            continue;
        }
        if let Some((key, value)) = line.split_once(':') {
            current.insert(key.trim().to_string(), value.trim().to_string());
        }
    }
    if !current.is_empty() {
        blocks.push(current);
    }
    blocks
}

/// The selected entry of a sysfs choice file: `mq-deadline [none]` → `none`,
/// `always [madvise] never` → `madvise`. A file holding a single word without
/// brackets (a queue with no elevator support prints just `none`) yields that
/// word.
pub(crate) fn parse_bracketed(line: &str) -> Option<String> {
    if let Some(start) = line.find('[') {
        let rest = &line[start + 1..];
        let end = rest.find(']')?;
        let inner = rest[..end].trim();
        return (!inner.is_empty()).then(|| inner.to_string());
    }
    let mut words = line.split_whitespace();
    match (words.next(), words.next()) {
        (Some(only), None) => Some(only.to_string()),
        _ => None,
    }
}

/// os-release(5): `KEY=value` lines, values optionally quoted with shell
/// quoting rules (of which only `\"`, `\\`, `\$` and `` \` `` escapes are
/// allowed inside double quotes).
pub(crate) fn parse_os_release(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, raw)) = line.split_once('=') else {
            continue;
        };
        let value = if raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"') {
            let mut unescaped = String::new();
            let mut chars = raw[1..raw.len() - 1].chars();
            while let Some(c) = chars.next() {
                if c == '\\' {
                    if let Some(next) = chars.next() {
                        unescaped.push(next);
                    }
                } else {
                    unescaped.push(c);
                }
            }
            unescaped
        } else if raw.len() >= 2 && raw.starts_with('\'') && raw.ends_with('\'') {
            raw[1..raw.len() - 1].to_string()
        } else {
            raw.to_string()
        };
        out.insert(key.trim().to_string(), value);
    }
    out
}

/// The distribution's display name: `PRETTY_NAME`, else `NAME VERSION`.
pub(crate) fn distribution_name(os_release: &BTreeMap<String, String>) -> Option<String> {
    if let Some(pretty) = os_release.get("PRETTY_NAME").filter(|s| !s.is_empty()) {
        return Some(pretty.clone());
    }
    let name = os_release.get("NAME")?;
    Some(match os_release.get("VERSION") {
        Some(version) => format!("{name} {version}"),
        None => name.clone(),
    })
}

/// `/proc/self/mounts` (fstab(5) format): device, mount point, type, options,
/// with space, tab, newline and backslash escaped as octal (`\040`).
pub(crate) fn parse_mounts(text: &str) -> Vec<Filesystem> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            Some(Filesystem {
                device: unescape_octal(fields.next()?),
                mount_point: unescape_octal(fields.next()?),
                fs_type: unescape_octal(fields.next()?),
                options: unescape_octal(fields.next()?),
            })
        })
        .collect()
}

fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let digits = &bytes[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(byte) = u8::try_from(value) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Pseudo file systems say nothing about the storage under test. tmpfs is
/// kept only where benchmarks commonly put scratch files (`/tmp`,
/// `/dev/shm`).
const PSEUDO_FS: &[&str] = &[
    "proc",
    "sysfs",
    "cgroup",
    "cgroup2",
    "devpts",
    "devtmpfs",
    "mqueue",
    "tracefs",
    "debugfs",
    "securityfs",
    "pstore",
    "bpf",
    "autofs",
    "configfs",
    "fusectl",
    "hugetlbfs",
    "binfmt_misc",
    "efivarfs",
    "rpc_pipefs",
    "nsfs",
    "selinuxfs",
    "ramfs",
    "nfsd",
];

pub(crate) fn keep_filesystem(fs: &Filesystem) -> bool {
    if fs.fs_type == "tmpfs" {
        return fs.mount_point == "/tmp" || fs.mount_point == "/dev/shm";
    }
    !PSEUDO_FS.contains(&fs.fs_type.as_str())
}

/// Kernel CPU-list syntax (`0-3,8,10-11`) → sorted CPU numbers. An empty
/// string is a valid empty list.
pub(crate) fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi): (u32, u32) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
                if hi < lo {
                    return None;
                }
                cpus.extend(lo..=hi);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// Sorted CPU numbers → kernel CPU-list syntax, the inverse of
/// [`parse_cpu_list`].
pub(crate) fn format_cpu_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            end += 1;
            i += 1;
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// A sysfs cache size (`32K`, `20480K`, `1M`) → bytes.
pub(crate) fn parse_cache_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, multiplier) = match text.chars().last()? {
        'K' | 'k' => (&text[..text.len() - 1], 1024),
        'M' | 'm' => (&text[..text.len() - 1], 1024 * 1024),
        'G' | 'g' => (&text[..text.len() - 1], 1024 * 1024 * 1024),
        _ => (text, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(multiplier)
}

/// The `firmware-version:` line of `ethtool -i`; empty and `N/A` (what
/// virtual drivers print) mean "not reported".
pub(crate) fn parse_ethtool_firmware(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix("firmware-version:"))
        .map(str::trim)
        .filter(|v| !v.is_empty() && *v != "N/A" && *v != "n/a")
        .map(str::to_string)
}

/// Addresses of one interface: (`IPv4 addr/prefix`, `IPv6 addr/prefix`).
pub(crate) type IfAddrs = (Vec<String>, Vec<String>);

/// `ip -j addr` (iproute2's JSON) → interface name → addresses.
pub(crate) fn parse_ip_addr_json(text: &str) -> Result<BTreeMap<String, IfAddrs>, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let links = value
        .as_array()
        .ok_or_else(|| "expected a JSON array of links".to_string())?;
    let mut out = BTreeMap::new();
    for link in links {
        let Some(name) = link.get("ifname").and_then(|n| n.as_str()) else {
            continue;
        };
        let entry: &mut IfAddrs = out.entry(name.to_string()).or_default();
        let infos = link.get("addr_info").and_then(|a| a.as_array());
        for info in infos.into_iter().flatten() {
            let (Some(family), Some(local)) = (
                info.get("family").and_then(|f| f.as_str()),
                info.get("local").and_then(|l| l.as_str()),
            ) else {
                continue;
            };
            let addr = match info.get("prefixlen").and_then(|p| p.as_u64()) {
                Some(prefix) => format!("{local}/{prefix}"),
                None => local.to_string(),
            };
            match family {
                "inet" => entry.0.push(addr),
                "inet6" => entry.1.push(addr),
                _ => {}
            }
        }
    }
    Ok(out)
}

/// Runs of whitespace (sysctls such as `tcp_rmem` separate with tabs) → one
/// space, ends trimmed.
pub(crate) fn normalise_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// RFC 3339 timestamp in UTC with second precision. Times before the epoch
/// (a badly wrong clock) are clamped to it.
pub(crate) fn rfc3339_utc(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → proleptic Gregorian (year, month, day).
/// Howard Hinnant's `civil_from_days`,
/// <https://howardhinnant.github.io/date_algorithms.html#civil_from_days>.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let day = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Both are within their small ranges, so the casts cannot truncate.
    (year, month as u32, day as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MEMINFO: &str = "\
MemTotal:       24684096 kB
MemFree:        23796040 kB
SwapTotal:             0 kB
HugePages_Total:      16
HugePages_Free:       12
Hugepagesize:       2048 kB
";

    #[test]
    fn meminfo_converts_kb_to_bytes_and_keeps_counts() {
        let m = parse_meminfo(MEMINFO);
        assert_eq!(m["MemTotal"], 24_684_096 * 1024);
        assert_eq!(m["SwapTotal"], 0);
        assert_eq!(m["HugePages_Total"], 16);
        assert_eq!(m["HugePages_Free"], 12);
        assert_eq!(m["Hugepagesize"], 2 * 1024 * 1024);
    }

    const CPUINFO_X86: &str = "\
processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 45
model name\t: Intel(R) Xeon(R) CPU E5-2690 0 @ 2.90GHz
stepping\t: 6
microcode\t: 0x71a
cpu MHz\t\t: 2899.951
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu vme ht avx aes constant_tsc

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) CPU E5-2690 0 @ 2.90GHz
physical id\t: 1
core id\t\t: 0

";

    #[test]
    fn cpuinfo_splits_processors_and_trims_keys_and_values() {
        let blocks = parse_cpuinfo(CPUINFO_X86);
        assert_eq!(blocks.len(), 2);
        assert_eq!(
            blocks[0]["model name"],
            "Intel(R) Xeon(R) CPU E5-2690 0 @ 2.90GHz"
        );
        assert_eq!(blocks[0]["cpu family"], "6");
        assert_eq!(blocks[0]["cpu MHz"], "2899.951");
        assert_eq!(blocks[0]["flags"], "fpu vme ht avx aes constant_tsc");
        assert_eq!(blocks[1]["processor"], "1");
        assert_eq!(blocks[1]["physical id"], "1");
    }

    #[test]
    fn cpuinfo_arm_keeps_the_trailing_board_block() {
        let text = "processor\t: 0\nFeatures\t: fp asimd aes\nCPU implementer\t: 0x41\n\n\
                    Hardware\t: BCM2835\nRevision\t: c03111\n";
        let blocks = parse_cpuinfo(text);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0]["CPU implementer"], "0x41");
        assert_eq!(blocks[1]["Hardware"], "BCM2835");
    }

    #[test]
    fn bracketed_choice_is_selected() {
        assert_eq!(
            parse_bracketed("mq-deadline [none]").as_deref(),
            Some("none")
        );
        assert_eq!(
            parse_bracketed("[mq-deadline] kyber bfq none\n").as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(
            parse_bracketed("always defer defer+madvise [madvise] never").as_deref(),
            Some("madvise")
        );
        assert_eq!(parse_bracketed("none\n").as_deref(), Some("none"));
        assert_eq!(parse_bracketed("a b"), None);
        assert_eq!(parse_bracketed(""), None);
    }

    const OS_RELEASE: &str = r#"
# a comment
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
ID=debian
QUOTED="say \"hi\" \\ \$HOME"
SINGLE='single quoted'
"#;

    #[test]
    fn os_release_unquotes_and_unescapes() {
        let m = parse_os_release(OS_RELEASE);
        assert_eq!(m["PRETTY_NAME"], "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(m["ID"], "debian");
        assert_eq!(m["VERSION_ID"], "12");
        assert_eq!(m["QUOTED"], r#"say "hi" \ $HOME"#);
        assert_eq!(m["SINGLE"], "single quoted");
        assert_eq!(
            distribution_name(&m).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
    }

    #[test]
    fn distribution_falls_back_to_name_and_version() {
        let m = parse_os_release("NAME=Fedora\nVERSION=\"40 (Server)\"\n");
        assert_eq!(distribution_name(&m).as_deref(), Some("Fedora 40 (Server)"));
        assert_eq!(distribution_name(&BTreeMap::new()), None);
    }

    #[test]
    fn mounts_are_unescaped_and_filtered() {
        let text = "\
/dev/sda1 / ext4 rw,relatime 0 0
proc /proc proc rw,nosuid 0 0
tmpfs /run tmpfs rw,nosuid 0 0
tmpfs /tmp tmpfs rw,nosuid 0 0
/dev/sdb1 /mnt/with\\040space xfs rw,noatime 0 0
cgroup2 /sys/fs/cgroup cgroup2 rw 0 0
";
        let all = parse_mounts(text);
        assert_eq!(all.len(), 6);
        assert_eq!(all[4].mount_point, "/mnt/with space");
        let kept: Vec<_> = all.iter().filter(|f| keep_filesystem(f)).collect();
        let points: Vec<_> = kept.iter().map(|f| f.mount_point.as_str()).collect();
        assert_eq!(points, ["/", "/tmp", "/mnt/with space"]);
        assert_eq!(kept[0].options, "rw,relatime");
    }

    #[test]
    fn octal_unescape_leaves_other_backslashes_alone() {
        assert_eq!(unescape_octal(r"a\134b"), r"a\b");
        assert_eq!(unescape_octal(r"a\9b"), r"a\9b");
        assert_eq!(unescape_octal(r"end\04"), r"end\04");
        assert_eq!(unescape_octal(r"tab\011x"), "tab\tx");
    }

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(format_cpu_list(&[11, 0, 1, 2, 3, 8, 10]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn cache_sizes() {
        assert_eq!(parse_cache_size("32K\n"), Some(32 * 1024));
        assert_eq!(parse_cache_size("20480K"), Some(20 * 1024 * 1024));
        assert_eq!(parse_cache_size("1M"), Some(1024 * 1024));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size(""), None);
    }

    #[test]
    fn ethtool_firmware_line() {
        let text = "driver: ixgbe\nversion: 6.8.0\nfirmware-version: 0x800007f6, 1.3089.0\n\
                    bus-info: 0000:03:00.0\n";
        assert_eq!(
            parse_ethtool_firmware(text).as_deref(),
            Some("0x800007f6, 1.3089.0")
        );
        assert_eq!(
            parse_ethtool_firmware("driver: veth\nfirmware-version: \n"),
            None
        );
        assert_eq!(parse_ethtool_firmware("firmware-version: N/A\n"), None);
    }

    #[test]
    fn ip_addr_json() {
        let text = r#"[{"ifindex":1,"ifname":"lo","addr_info":[
            {"family":"inet","local":"127.0.0.1","prefixlen":8},
            {"family":"inet6","local":"::1","prefixlen":128}]},
            {"ifindex":2,"ifname":"ifb0","addr_info":[]},
            {"ifindex":3,"ifname":"eth0","addr_info":[
            {"family":"inet","local":"192.0.2.2","prefixlen":24},
            {"family":"inet6","local":"fd00::2","prefixlen":64}]}]"#;
        let m = parse_ip_addr_json(text).unwrap();
        assert_eq!(m["lo"].0, ["127.0.0.1/8"]);
        assert_eq!(m["lo"].1, ["::1/128"]);
        assert!(m["ifb0"].0.is_empty());
        assert_eq!(m["eth0"].0, ["192.0.2.2/24"]);
        assert!(parse_ip_addr_json("{}").is_err());
        assert!(parse_ip_addr_json("not json").is_err());
    }

    #[test]
    fn whitespace_is_normalised() {
        assert_eq!(
            normalise_whitespace("4096\t131072\t6291456\n"),
            "4096 131072 6291456"
        );
        assert_eq!(normalise_whitespace("  212992\n"), "212992");
    }

    #[test]
    fn rfc3339_known_instants() {
        let at = |s: u64| rfc3339_utc(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(at(4_107_542_399), "2100-02-28T23:59:59Z");
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH - Duration::from_secs(5)),
            "1970-01-01T00:00:00Z"
        );
    }
}
