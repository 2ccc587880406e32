//! The `[testbed]` table: its types, the TOML parser and the validation that
//! runs before anything is created.
//!
//! Parsing is done in two stages, as everywhere in benchlab: the TOML text is
//! read into a generic table, and every key is then checked by hand, so that
//! each error names the file, the key (`testbed.host[2].rate_mbit`) and what
//! is allowed. Other top-level keys of the file (a study file has many) are
//! ignored.
//!
//! ## Names
//!
//! Everything a test bed creates is named after it, so that a look at
//! `ip netns list` tells whose objects are whose:
//!
//! | object | name | lives in |
//! |---|---|---|
//! | host namespace | `bl-<testbed>-<host>` | — |
//! | switch namespace (bridge topology) | `bl-<testbed>-switch` | — |
//! | host's veth end | `<testbed>-<host>` | the host's namespace |
//! | switch's veth end (bridge topology) | `<testbed>-<host>-s` | the switch namespace |
//! | bridge | `<testbed>-br` | the switch namespace |
//! | link `i`'s veth ends (`[[testbed.link]]`) | `<testbed>_l<i>` | both hosts' namespaces |
//!
//! Linux interface names have at most 15 characters (`IFNAMSIZ` − 1), so the
//! test bed's name and a host's name may together have at most
//! [`MAX_COMBINED_NAME_LEN`] (12) characters. The rule is the same for both
//! topologies, so that switching topology never makes a valid file invalid.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Longest test bed name: it prefixes every object the bed creates.
pub const MAX_TESTBED_NAME_LEN: usize = 8;
/// Longest interface name Linux accepts (`IFNAMSIZ` = 16, with the NUL).
pub const MAX_IFNAME_LEN: usize = 15;
/// Longest `len(testbed name) + len(host name)`: the longest derived
/// interface name, `<testbed>-<host>-s`, adds three characters.
pub const MAX_COMBINED_NAME_LEN: usize = MAX_IFNAME_LEN - 3;
/// The host name reserved for the switch namespace of a bridge bed.
pub const RESERVED_HOST_NAME: &str = "switch";
/// Largest accepted rate, in Mbit/s (1 Tbit/s): far above what veth moves.
pub const MAX_RATE_MBIT: f64 = 1_000_000.0;
/// Smallest accepted rate, in Mbit/s (8 kbit/s = 1 kB/s).
pub const MIN_RATE_MBIT: f64 = 0.008;
/// Largest accepted one-way delay, in ms.
pub const MAX_DELAY_MS: f64 = 10_000.0;

/// How the hosts are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Topology {
    /// Exactly two hosts joined by one veth pair.
    Direct,
    /// Every host joined by a veth pair to a Linux bridge that lives in a
    /// switch namespace of its own.
    Bridge,
}

impl Topology {
    /// The spelling used in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::Direct => "direct",
            Topology::Bridge => "bridge",
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An IPv4 network, `a.b.c.d/len`. Invariant (once validated): the host bits
/// of `network` are zero and `prefix_len` ≤ 30.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subnet {
    /// The network address.
    pub network: Ipv4Addr,
    /// The prefix length.
    pub prefix_len: u8,
}

impl Subnet {
    /// Number of usable host addresses (network and broadcast excluded).
    pub fn capacity(&self) -> u32 {
        if self.prefix_len >= 31 {
            return 0;
        }
        (1u32 << (32 - u32::from(self.prefix_len))) - 2
    }

    /// The address of host `index` (1-based): `network + index`.
    pub fn host(&self, index: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network).wrapping_add(index))
    }
}

impl fmt::Display for Subnet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix_len)
    }
}

impl FromStr for Subnet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, len) = s
            .split_once('/')
            .ok_or_else(|| format!("`{s}` is not of the form a.b.c.d/len"))?;
        let network: Ipv4Addr = addr
            .parse()
            .map_err(|_| format!("`{addr}` is not an IPv4 address"))?;
        let prefix_len: u8 = len
            .parse()
            .ok()
            .filter(|l| *l <= 32)
            .ok_or_else(|| format!("`{len}` is not a prefix length (0-32)"))?;
        if prefix_len > 30 {
            return Err(format!(
                "/{prefix_len} leaves no room for two hosts; use /30 or shorter"
            ));
        }
        let mask = u32::MAX
            .checked_shl(32 - u32::from(prefix_len))
            .unwrap_or(0);
        let bits = u32::from(network);
        if bits & !mask != 0 {
            return Err(format!(
                "{network} has host bits set for /{prefix_len}; did you mean {}/{prefix_len}?",
                Ipv4Addr::from(bits & mask)
            ));
        }
        Ok(Subnet {
            network,
            prefix_len,
        })
    }
}

impl Serialize for Subnet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Subnet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One host of a test bed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// `[a-z0-9-]`, unique within the bed, not `switch`.
    pub name: String,
    /// Rate limit of the host's link in Mbit/s, both directions (tc tbf).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_mbit: Option<f64>,
    /// One-way delay of the host's link in ms, both directions (tc netem;
    /// only on kernels that have it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<f64>,
}

impl HostSpec {
    /// The rate in bit/s, if one is set.
    pub fn rate_bit_s(&self) -> Option<u64> {
        self.rate_mbit.map(|m| (m * 1e6).round() as u64)
    }

    /// The one-way delay in µs, if a non-zero one is set.
    pub fn delay_us(&self) -> Option<u64> {
        self.delay_ms
            .map(|ms| (ms * 1e3).round() as u64)
            .filter(|us| *us > 0)
    }
}

/// A validated `[testbed]` table (see [`parse_spec`] and
/// [`TestbedSpec::validate`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestbedSpec {
    /// `[a-z0-9-]`, 1–8 characters; prefixes everything the bed creates.
    pub name: String,
    /// How the hosts are joined.
    pub topology: Topology,
    /// Host `i` (1-based, in file order) gets address `network + i`.
    pub subnet: Subnet,
    /// The hosts, in file order (`[[testbed.host]]`).
    #[serde(rename = "host")]
    pub hosts: Vec<HostSpec>,
    /// Extra point-to-point links (`[[testbed.link]]`), beside the
    /// topology's: a second, direct path between two hosts. State files
    /// written before links existed read as none.
    #[serde(default, rename = "link", skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkSpec>,
}

/// One `[[testbed.link]]`: a veth pair straight between two hosts of the
/// bed, on a subnet of its own, so that one bed offers a bridged and a
/// direct path between the same namespaces (seed 003's bridged vs PCI
/// passthrough networking). Not shaped: a host's `rate_mbit` and
/// `delay_ms` stay on its topology link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// The two hosts it joins; the first gets `subnet`'s first address.
    pub hosts: [String; 2],
    /// The link's own network (`"10.203.1.0/30"`), apart from the bed's
    /// and every other link's.
    pub subnet: Subnet,
}

impl LinkSpec {
    /// The address of end `end` (0 or 1) of the link.
    pub fn address(&self, end: usize) -> Ipv4Addr {
        self.subnet.host(end as u32 + 1)
    }
}

/// Most `[[testbed.link]]`s of a bed (interface names `<testbed>_l<i>`
/// stay within Linux's 15 characters).
pub const MAX_LINKS: usize = 100;

/// Why a `[testbed]` table was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SpecError {
    /// The file is not TOML, or has no `[testbed]` table.
    #[error("{file}: {message}")]
    File {
        /// The file name as given to [`parse_spec`].
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A key has a value that is not allowed.
    #[error("{file}: `{key}`: {message}")]
    Key {
        /// The file name as given to [`parse_spec`].
        file: String,
        /// The full key, e.g. `testbed.host[2].rate_mbit`.
        key: String,
        /// What is wrong and what is allowed.
        message: String,
    },
}

const TESTBED_KEYS: &[&str] = &["name", "topology", "subnet", "host", "link"];
const HOST_KEYS: &[&str] = &["name", "rate_mbit", "delay_ms"];
const LINK_KEYS: &[&str] = &["hosts", "subnet"];

/// Reads the `[testbed]` table of `text` (a study file or a file of its own;
/// other top-level keys are ignored) and validates it. `file_name` is used in
/// error messages only.
pub fn parse_spec(file_name: &str, text: &str) -> Result<TestbedSpec, SpecError> {
    let file_err = |message: String| SpecError::File {
        file: file_name.to_string(),
        message,
    };
    let key_err = |key: String, message: String| SpecError::Key {
        file: file_name.to_string(),
        key,
        message,
    };
    let doc: toml::Table = toml::from_str(text).map_err(|e| file_err(format!("not TOML: {e}")))?;
    let tb = match doc.get("testbed") {
        None => return Err(file_err("has no [testbed] table".into())),
        Some(toml::Value::Table(t)) => t,
        Some(other) => {
            return Err(key_err(
                "testbed".into(),
                format!("must be a table ([testbed]), got {}", other.type_str()),
            ))
        }
    };
    for key in tb.keys() {
        if !TESTBED_KEYS.contains(&key.as_str()) {
            return Err(key_err(
                format!("testbed.{key}"),
                format!("unknown key; allowed: {}", TESTBED_KEYS.join(", ")),
            ));
        }
    }
    let name =
        get_str(tb, "name", "testbed.name").map_err(|m| key_err("testbed.name".into(), m))?;
    let topology = match get_str(tb, "topology", "testbed.topology")
        .map_err(|m| key_err("testbed.topology".into(), m))?
        .as_str()
    {
        "direct" => Topology::Direct,
        "bridge" => Topology::Bridge,
        other => {
            return Err(key_err(
                "testbed.topology".into(),
                format!("`{other}` is not a topology; allowed: \"direct\" (two hosts, one veth pair), \"bridge\" (hosts on a bridge in a switch namespace)"),
            ))
        }
    };
    let subnet_text =
        get_str(tb, "subnet", "testbed.subnet").map_err(|m| key_err("testbed.subnet".into(), m))?;
    let subnet: Subnet = subnet_text.parse().map_err(|m: String| {
        key_err(
            "testbed.subnet".into(),
            format!("{m} (expected an IPv4 network such as \"10.203.0.0/24\")"),
        )
    })?;
    let host_values = match tb.get("host") {
        None => {
            return Err(key_err(
                "testbed.host".into(),
                "missing; add one [[testbed.host]] table per host".into(),
            ))
        }
        Some(toml::Value::Array(a)) => a,
        Some(other) => {
            return Err(key_err(
                "testbed.host".into(),
                format!(
                    "must be an array of tables ([[testbed.host]]), got {}",
                    other.type_str()
                ),
            ))
        }
    };
    let mut hosts = Vec::with_capacity(host_values.len());
    for (i, value) in host_values.iter().enumerate() {
        let prefix = format!("testbed.host[{}]", i + 1);
        let table = value.as_table().ok_or_else(|| {
            key_err(
                prefix.clone(),
                format!(
                    "must be a table ([[testbed.host]]), got {}",
                    value.type_str()
                ),
            )
        })?;
        for key in table.keys() {
            if !HOST_KEYS.contains(&key.as_str()) {
                return Err(key_err(
                    format!("{prefix}.{key}"),
                    format!("unknown key; allowed: {}", HOST_KEYS.join(", ")),
                ));
            }
        }
        let name =
            get_str(table, "name", &prefix).map_err(|m| key_err(format!("{prefix}.name"), m))?;
        let rate_mbit = get_number(table, "rate_mbit")
            .map_err(|m| key_err(format!("{prefix}.rate_mbit"), m))?;
        let delay_ms =
            get_number(table, "delay_ms").map_err(|m| key_err(format!("{prefix}.delay_ms"), m))?;
        hosts.push(HostSpec {
            name,
            rate_mbit,
            delay_ms,
        });
    }
    let links = match tb.get("link") {
        None => Vec::new(),
        Some(toml::Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, v)| parse_link(i, v).map_err(|(k, m)| key_err(k, m)))
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(key_err(
                "testbed.link".into(),
                format!(
                    "must be an array of tables ([[testbed.link]]), got {}",
                    other.type_str()
                ),
            ))
        }
    };
    let spec = TestbedSpec {
        name,
        topology,
        subnet,
        hosts,
        links,
    };
    spec.validate(file_name)?;
    Ok(spec)
}

/// One `[[testbed.link]]` (0-based `i`); an error is (key, message).
fn parse_link(i: usize, value: &toml::Value) -> Result<LinkSpec, (String, String)> {
    let prefix = format!("testbed.link[{}]", i + 1);
    let table = value.as_table().ok_or_else(|| {
        (
            prefix.clone(),
            format!(
                "must be a table ([[testbed.link]]), got {}",
                value.type_str()
            ),
        )
    })?;
    for key in table.keys() {
        if !LINK_KEYS.contains(&key.as_str()) {
            return Err((
                format!("{prefix}.{key}"),
                format!("unknown key; allowed: {}", LINK_KEYS.join(", ")),
            ));
        }
    }
    let hosts_key = format!("{prefix}.hosts");
    let two = "must be a list of two host names of this bed, e.g. [\"gen\", \"b1\"]";
    let hosts = match table.get("hosts") {
        Some(toml::Value::Array(a)) if a.len() == 2 => match (&a[0], &a[1]) {
            (toml::Value::String(x), toml::Value::String(y)) => [x.clone(), y.clone()],
            _ => return Err((hosts_key, two.into())),
        },
        None => return Err((hosts_key, format!("missing; {two}"))),
        Some(_) => return Err((hosts_key, two.into())),
    };
    let subnet_key = format!("{prefix}.subnet");
    let subnet = get_str(table, "subnet", &prefix)
        .map_err(|m| (subnet_key.clone(), m))?
        .parse()
        .map_err(|m: String| {
            (
                subnet_key,
                format!("{m} (expected the link's own network, such as \"10.203.1.0/30\")"),
            )
        })?;
    Ok(LinkSpec { hosts, subnet })
}

fn get_str(table: &toml::Table, key: &str, context: &str) -> Result<String, String> {
    match table.get(key) {
        None => Err(format!("missing (required in {context})")),
        Some(toml::Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("must be a string, got {}", other.type_str())),
    }
}

fn get_number(table: &toml::Table, key: &str) -> Result<Option<f64>, String> {
    match table.get(key) {
        None => Ok(None),
        Some(toml::Value::Integer(i)) => Ok(Some(*i as f64)),
        Some(toml::Value::Float(f)) => Ok(Some(*f)),
        Some(other) => Err(format!("must be a number, got {}", other.type_str())),
    }
}

/// Checks a name against `[a-z0-9-]`, starting and ending with a letter or
/// digit (a leading `-` would read as an option to `ip`).
fn check_name(name: &str, max_len: usize) -> Result<(), String> {
    let allowed = "allowed: 1 to {max} characters of a-z, 0-9 and '-', starting and ending with a letter or digit";
    let allowed = allowed.replace("{max}", &max_len.to_string());
    if name.is_empty() || name.len() > max_len {
        return Err(format!("`{name}` has {} characters; {allowed}", name.len()));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !name.chars().all(|c| ok_char(c) || c == '-')
        || !name.starts_with(ok_char)
        || !name.ends_with(ok_char)
    {
        return Err(format!("`{name}` is not a valid name; {allowed}"));
    }
    Ok(())
}

/// Validates a test bed name alone (used by `down` and `status`, whose only
/// input is the name, so that it cannot point outside the state directory).
pub fn check_testbed_name(name: &str) -> Result<(), String> {
    check_name(name, MAX_TESTBED_NAME_LEN)
}

impl TestbedSpec {
    /// Checks every rule that spans keys. [`parse_spec`] calls it; call it
    /// yourself on a spec built in code (`file` names it in errors).
    pub fn validate(&self, file: &str) -> Result<(), SpecError> {
        let err = |key: String, message: String| SpecError::Key {
            file: file.to_string(),
            key,
            message,
        };
        check_testbed_name(&self.name).map_err(|m| err("testbed.name".into(), m))?;
        let n = self.hosts.len();
        match self.topology {
            Topology::Direct if n != 2 => {
                return Err(err(
                    "testbed.host".into(),
                    format!("topology \"direct\" joins exactly 2 hosts, found {n}; use topology \"bridge\" for more"),
                ))
            }
            Topology::Bridge if n < 2 => {
                return Err(err(
                    "testbed.host".into(),
                    format!("topology \"bridge\" needs at least 2 hosts, found {n}"),
                ))
            }
            _ => {}
        }
        let subnet = self.subnet.to_string();
        let _: Subnet = subnet
            .parse()
            .map_err(|m: String| err("testbed.subnet".into(), m))?;
        if n as u64 > u64::from(self.subnet.capacity()) {
            return Err(err(
                "testbed.subnet".into(),
                format!(
                    "{subnet} has room for {} hosts, the bed has {n}",
                    self.subnet.capacity()
                ),
            ));
        }
        let max_host_len = MAX_COMBINED_NAME_LEN.saturating_sub(self.name.len());
        for (i, host) in self.hosts.iter().enumerate() {
            let key = |k: &str| format!("testbed.host[{}].{k}", i + 1);
            check_name(&host.name, MAX_COMBINED_NAME_LEN).map_err(|m| err(key("name"), m))?;
            if host.name == RESERVED_HOST_NAME {
                return Err(err(
                    key("name"),
                    format!("`{RESERVED_HOST_NAME}` is reserved for the bridge's namespace; choose another name"),
                ));
            }
            if host.name.len() > max_host_len {
                let longest = switch_interface(&self.name, &host.name);
                return Err(err(
                    key("name"),
                    format!(
                        "`{}` is too long: the derived interface name `{longest}` would have {} characters and Linux allows {MAX_IFNAME_LEN}; \
                         the test bed name and a host name may have {MAX_COMBINED_NAME_LEN} characters together, so with testbed.name `{}` a host name may have {max_host_len}",
                        host.name,
                        longest.len(),
                        self.name
                    ),
                ));
            }
            if self.hosts[..i].iter().any(|h| h.name == host.name) {
                return Err(err(
                    key("name"),
                    format!("`{}` names two hosts; host names must be unique", host.name),
                ));
            }
            if let Some(rate) = host.rate_mbit {
                if !(MIN_RATE_MBIT..=MAX_RATE_MBIT).contains(&rate) {
                    return Err(err(
                        key("rate_mbit"),
                        format!("{rate} is out of range; allowed: {MIN_RATE_MBIT} to {MAX_RATE_MBIT} (Mbit/s), or leave it out for no limit"),
                    ));
                }
            }
            if let Some(delay) = host.delay_ms {
                if !(0.0..=MAX_DELAY_MS).contains(&delay) {
                    return Err(err(
                        key("delay_ms"),
                        format!(
                            "{delay} is out of range; allowed: 0 to {MAX_DELAY_MS} (ms, one way)"
                        ),
                    ));
                }
            }
        }
        self.validate_links(file)
    }

    /// The `[[testbed.link]]` rules: at most [`MAX_LINKS`], each between
    /// two different hosts of the bed, once per pair, on a subnet that
    /// overlaps neither the bed's nor another link's (the routes would
    /// clash).
    fn validate_links(&self, file: &str) -> Result<(), SpecError> {
        let err = |key: String, message: String| SpecError::Key {
            file: file.to_string(),
            key,
            message,
        };
        if self.links.len() > MAX_LINKS {
            return Err(err(
                "testbed.link".into(),
                format!("{} links; allowed: at most {MAX_LINKS}", self.links.len()),
            ));
        }
        let names: Vec<&str> = self.hosts.iter().map(|h| h.name.as_str()).collect();
        let overlap = |a: &Subnet, b: &Subnet| {
            let len = a.prefix_len.min(b.prefix_len);
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(a.network) & mask == u32::from(b.network) & mask
        };
        for (i, link) in self.links.iter().enumerate() {
            let key = |k: &str| format!("testbed.link[{}].{k}", i + 1);
            for h in &link.hosts {
                if !names.contains(&h.as_str()) {
                    return Err(err(
                        key("hosts"),
                        format!(
                            "`{h}` is not a host of this bed; hosts: {}",
                            names.join(", ")
                        ),
                    ));
                }
            }
            if link.hosts[0] == link.hosts[1] {
                return Err(err(
                    key("hosts"),
                    format!("joins `{}` to itself; name two hosts", link.hosts[0]),
                ));
            }
            let same_pair = |l: &LinkSpec| {
                l.hosts == link.hosts
                    || (l.hosts[0] == link.hosts[1] && l.hosts[1] == link.hosts[0])
            };
            if self.links[..i].iter().any(same_pair) {
                return Err(err(
                    key("hosts"),
                    format!(
                        "`{}` and `{}` are joined by an earlier link already",
                        link.hosts[0], link.hosts[1]
                    ),
                ));
            }
            if overlap(&link.subnet, &self.subnet) {
                return Err(err(
                    key("subnet"),
                    format!(
                        "{} overlaps the bed's subnet {}; give the link a network of its own",
                        link.subnet, self.subnet
                    ),
                ));
            }
            if let Some(j) = self.links[..i]
                .iter()
                .position(|l| overlap(&l.subnet, &link.subnet))
            {
                return Err(err(
                    key("subnet"),
                    format!(
                        "{} overlaps testbed.link[{}]'s {}; give each link a network of its own",
                        link.subnet,
                        j + 1,
                        self.links[j].subnet
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The namespace of host `host`.
    pub fn netns(&self, host: &HostSpec) -> String {
        host_netns(&self.name, &host.name)
    }

    /// The address of the `index`-th host (0-based index into `hosts`).
    pub fn address(&self, index: usize) -> Ipv4Addr {
        self.subnet.host(index as u32 + 1)
    }
}

/// Namespace of a host: `bl-<testbed>-<host>`.
pub fn host_netns(testbed: &str, host: &str) -> String {
    format!("bl-{testbed}-{host}")
}

/// Namespace of the bridge of a bridge bed: `bl-<testbed>-switch`.
pub fn switch_netns(testbed: &str) -> String {
    format!("bl-{testbed}-{RESERVED_HOST_NAME}")
}

/// The host's veth end, in the host's namespace: `<testbed>-<host>`.
pub fn host_interface(testbed: &str, host: &str) -> String {
    format!("{testbed}-{host}")
}

/// The switch's veth end towards a host, in the switch namespace:
/// `<testbed>-<host>-s`.
pub fn switch_interface(testbed: &str, host: &str) -> String {
    format!("{testbed}-{host}-s")
}

/// Link `index`'s (0-based) veth end, in each of its two hosts'
/// namespaces: `<testbed>_l<index>` (the `_`, which no host name has, keeps it apart from a host's `<testbed>-<host>`).
pub fn link_interface(testbed: &str, index: usize) -> String {
    format!("{testbed}_l{index}")
}

/// The bridge, in the switch namespace: `<testbed>-br`.
pub fn bridge_name(testbed: &str) -> String {
    format!("{testbed}-br")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEMO: &str = r#"
        title = "a study with other keys"
        [workload]
        kind = "net.stream"

        [testbed]
        name = "demo"
        topology = "direct"
        subnet = "10.203.0.0/24"
        [[testbed.host]]
        name = "sut"
        rate_mbit = 200
        delay_ms = 1.0
        [[testbed.host]]
        name = "gen"
    "#;

    fn key_error(text: &str) -> (String, String) {
        match parse_spec("s.toml", text).unwrap_err() {
            SpecError::Key { file, key, message } => {
                assert_eq!(file, "s.toml");
                (key, message)
            }
            other => panic!("expected a key error, got {other}"),
        }
    }

    fn with(replace: &str, by: &str) -> String {
        assert!(DEMO.contains(replace), "{replace}");
        DEMO.replacen(replace, by, 1)
    }

    const LINKED: &str = r#"
        [testbed]
        name = "s3"
        topology = "bridge"
        subnet = "10.203.0.0/24"
        [[testbed.host]]
        name = "gen"
        [[testbed.host]]
        name = "b1"
        [[testbed.host]]
        name = "b2"
        [[testbed.link]]
        hosts = ["gen", "b1"]
        subnet = "10.203.1.0/30"
        [[testbed.link]]
        hosts = ["gen", "b2"]
        subnet = "10.203.1.4/30"
    "#;

    #[test]
    fn links_are_read_and_checked() {
        let spec = parse_spec("s.toml", LINKED).unwrap();
        assert_eq!(spec.links.len(), 2);
        assert_eq!(spec.links[1].hosts, ["gen".to_string(), "b2".to_string()]);
        assert_eq!(spec.links[1].address(0), Ipv4Addr::new(10, 203, 1, 5));
        assert_eq!(spec.links[1].address(1), Ipv4Addr::new(10, 203, 1, 6));
        assert_eq!(link_interface("s3", 1), "s3_l1");
        let bad = |from: &str, to: &str| {
            assert!(LINKED.contains(from), "{from}");
            let e = parse_spec("s.toml", &LINKED.replacen(from, to, 1)).unwrap_err();
            match e {
                SpecError::Key { key, message, .. } => (key, message),
                other => panic!("expected a key error, got {other}"),
            }
        };
        let (k, m) = bad("[\"gen\", \"b2\"]", "[\"gen\", \"b9\"]");
        assert_eq!(k, "testbed.link[2].hosts");
        assert!(
            m.contains("`b9` is not a host") && m.contains("gen, b1, b2"),
            "{m}"
        );
        let (k, m) = bad("[\"gen\", \"b2\"]", "[\"b2\", \"b2\"]");
        assert_eq!(k, "testbed.link[2].hosts");
        assert!(m.contains("to itself"), "{m}");
        let (k, m) = bad("[\"gen\", \"b2\"]", "[\"b1\", \"gen\"]");
        assert!(m.contains("earlier link"), "{k}: {m}");
        let (k, m) = bad("[\"gen\", \"b2\"]", "\"gen\"");
        assert_eq!(k, "testbed.link[2].hosts");
        assert!(m.contains("list of two host names"), "{m}");
        let (k, m) = bad("10.203.1.0/30", "10.203.0.0/30");
        assert_eq!(k, "testbed.link[1].subnet");
        assert!(m.contains("overlaps the bed's subnet"), "{m}");
        let (k, m) = bad("10.203.1.4/30", "10.203.1.0/29");
        assert_eq!(k, "testbed.link[2].subnet");
        assert!(m.contains("overlaps testbed.link[1]"), "{m}");
        let (k, m) = bad("subnet = \"10.203.1.4/30\"", "mtu = 9000");
        assert_eq!(k, "testbed.link[2].mtu");
        assert!(m.contains("allowed: hosts, subnet"), "{m}");
    }

    #[test]
    fn parses_the_example_and_ignores_other_keys() {
        let spec = parse_spec("s.toml", DEMO).unwrap();
        assert_eq!(spec.name, "demo");
        assert_eq!(spec.topology, Topology::Direct);
        assert_eq!(spec.subnet.to_string(), "10.203.0.0/24");
        assert_eq!(spec.hosts.len(), 2);
        assert_eq!(spec.hosts[0].rate_bit_s(), Some(200_000_000));
        assert_eq!(spec.hosts[0].delay_us(), Some(1000));
        assert_eq!(spec.hosts[1].rate_mbit, None);
        assert_eq!(spec.address(0), Ipv4Addr::new(10, 203, 0, 1));
        assert_eq!(spec.address(1), Ipv4Addr::new(10, 203, 0, 2));
        assert_eq!(spec.netns(&spec.hosts[0]), "bl-demo-sut");
        // Round trip through serde (the state file stores the spec).
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<TestbedSpec>(&json).unwrap(), spec);
    }

    #[test]
    fn a_file_of_its_own_parses_too() {
        let text = "[testbed]\nname='b'\ntopology='bridge'\nsubnet='10.9.0.0/29'\n\
                    [[testbed.host]]\nname='a'\n[[testbed.host]]\nname='b'\n[[testbed.host]]\nname='c'\n";
        let spec = parse_spec("bed.toml", text).unwrap();
        assert_eq!(spec.hosts.len(), 3);
        assert_eq!(spec.address(2), Ipv4Addr::new(10, 9, 0, 3));
    }

    #[test]
    fn errors_name_the_file_the_key_and_what_is_allowed() {
        let (key, msg) = key_error(&with("name = \"demo\"", "name = \"Demo\""));
        assert_eq!(key, "testbed.name");
        assert!(msg.contains("a-z, 0-9"), "{msg}");

        let (key, msg) = key_error(&with("name = \"demo\"", "name = \"demodemo9\""));
        assert_eq!(key, "testbed.name");
        assert!(msg.contains("1 to 8"), "{msg}");

        let (key, msg) = key_error(&with("\"direct\"", "\"star\""));
        assert_eq!(key, "testbed.topology");
        assert!(msg.contains("\"bridge\""), "{msg}");

        let (key, msg) = key_error(&with("10.203.0.0/24", "10.203.0.1/24"));
        assert_eq!(key, "testbed.subnet");
        assert!(msg.contains("did you mean 10.203.0.0/24"), "{msg}");

        let (key, _) = key_error(&with("10.203.0.0/24", "10.203.0.0/31"));
        assert_eq!(key, "testbed.subnet");

        let (key, msg) = key_error(&with("rate_mbit = 200", "rate_mbit = 0"));
        assert_eq!(key, "testbed.host[1].rate_mbit");
        assert!(msg.contains("allowed"), "{msg}");

        let (key, msg) = key_error(&with("rate_mbit = 200", "rate_mbit = \"fast\""));
        assert_eq!(key, "testbed.host[1].rate_mbit");
        assert!(msg.contains("number"), "{msg}");

        let (key, _) = key_error(&with("delay_ms = 1.0", "delay_ms = -1"));
        assert_eq!(key, "testbed.host[1].delay_ms");

        let (key, msg) = key_error(&with("delay_ms = 1.0", "colour = 1"));
        assert_eq!(key, "testbed.host[1].colour");
        assert!(msg.contains("rate_mbit"), "{msg}");

        let (key, msg) = key_error(&with("subnet =", "mtu = 9000\nsubnet ="));
        assert_eq!(key, "testbed.mtu");
        assert!(msg.contains("topology"), "{msg}");

        let (key, msg) = key_error(&with("name = \"gen\"", "name = \"sut\""));
        assert_eq!(key, "testbed.host[2].name");
        assert!(msg.contains("unique"), "{msg}");

        let (key, _) = key_error(&with("name = \"gen\"", "name = \"switch\""));
        assert_eq!(key, "testbed.host[2].name");

        let (key, msg) = key_error(&with(
            "name = \"gen\"",
            "name = \"gen\"\n[[testbed.host]]\nname = \"x\"",
        ));
        assert_eq!(key, "testbed.host");
        assert!(msg.contains("exactly 2"), "{msg}");
    }

    #[test]
    fn interface_names_must_fit_ifnamsiz() {
        // 4 + 8 = 12 characters: `demo-abcdefgh-s` has 15.
        let ok = with("name = \"gen\"", "name = \"abcdefgh\"");
        parse_spec("s.toml", &ok).unwrap();
        assert_eq!(switch_interface("demo", "abcdefgh").len(), MAX_IFNAME_LEN);
        let (key, msg) = key_error(&with("name = \"gen\"", "name = \"abcdefghi\""));
        assert_eq!(key, "testbed.host[2].name");
        assert!(msg.contains("demo-abcdefghi-s"), "{msg}");
        assert!(msg.contains("15"), "{msg}");
    }

    #[test]
    fn missing_table_and_bad_toml_name_the_file() {
        let e = parse_spec("x.toml", "title = 'no bed'").unwrap_err();
        assert_eq!(e.to_string(), "x.toml: has no [testbed] table");
        let e = parse_spec("x.toml", "[testbed").unwrap_err();
        assert!(e.to_string().starts_with("x.toml: not TOML"), "{e}");
        let (key, _) = key_error("[testbed]\nname='a'\ntopology='direct'\nsubnet='10.0.0.0/24'\n");
        assert_eq!(key, "testbed.host");
    }

    #[test]
    fn subnet_capacity_bounds_the_host_count() {
        let mut text =
            String::from("[testbed]\nname='b'\ntopology='bridge'\nsubnet='10.9.0.0/30'\n");
        for h in ["a", "b", "c"] {
            text.push_str(&format!("[[testbed.host]]\nname='{h}'\n"));
        }
        let (key, msg) = key_error(&text);
        assert_eq!(key, "testbed.subnet");
        assert!(msg.contains("room for 2"), "{msg}");
    }
}
