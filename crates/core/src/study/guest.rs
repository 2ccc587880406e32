//! `[[host]] guest = { … }`: a host benchlab boots as a QEMU guest for the
//! configurations that use it (crates/guest does the booting; this is the
//! study file's side: the keys, their types and what each allows).

use super::values::type_name;
use super::{Ctx, DeValue, StudyError, Val};

/// The mark every output puts on an emulated (TCG) guest's figures: the
/// run's notes, the inventory and every rendering of the report.
pub const EMULATED: &str = "emulated, not a virtualization measurement";

/// How a guest runs its instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// Hardware virtualization; refused where KVM cannot run a guest.
    Kvm,
    /// QEMU's emulator: the guest's figures are emulated, not a
    /// virtualization measurement.
    Tcg,
    /// KVM where a probe guest runs under it, else TCG (marked emulated).
    Auto,
}

impl Accel {
    /// The spelling in study files.
    pub fn as_str(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
            Accel::Auto => "auto",
        }
    }
}

/// A guest's NIC.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum GuestNet {
    /// A tap enslaved to an existing bridge, with a virtio NIC in the
    /// guest (the usual KVM set-up).
    Bridge {
        /// The bridge.
        bridge: String,
        /// The network namespace it lives in (`None`: the controller's).
        netns: Option<String>,
        /// The guest's address with its prefix (`10.203.3.12/24`).
        ip: String,
    },
    /// A tap of its own whose host end lives in `netns` with address
    /// `peer`: no bridge on the path. The nearest stand-in here for a
    /// passed-through NIC, which has no host bridge either; it is still
    /// an emulated virtio NIC, not VT-d.
    Direct {
        /// Where the tap's host end lives (`None`: the controller's).
        netns: Option<String>,
        /// The guest's address with its prefix (`10.203.5.2/30`).
        ip: String,
        /// The host end's address with its prefix (`10.203.5.1/30`).
        peer: String,
    },
}

impl GuestNet {
    /// The guest's address with its prefix.
    pub fn ip(&self) -> &str {
        match self {
            GuestNet::Bridge { ip, .. } | GuestNet::Direct { ip, .. } => ip,
        }
    }

    /// "bridge" or "direct".
    pub fn kind(&self) -> &'static str {
        match self {
            GuestNet::Bridge { .. } => "bridge",
            GuestNet::Direct { .. } => "direct",
        }
    }

    /// Where the tap's host end lives.
    pub fn netns(&self) -> Option<&str> {
        match self {
            GuestNet::Bridge { netns, .. } | GuestNet::Direct { netns, .. } => netns.as_deref(),
        }
    }
}

/// What a guest host is asked to be.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GuestSpec {
    /// Virtual CPUs.
    pub vcpus: u32,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// Host CPUs the vCPU threads are pinned to, one per vCPU (empty: not
    /// pinned).
    pub cpus: Vec<usize>,
    /// Memory from 2 MiB huge pages, reserved for the guest's life.
    pub hugepages: bool,
    /// The NIC.
    pub net: GuestNet,
    /// Acceleration.
    pub accel: Accel,
    /// The kernel it boots: a Debian kernel release (`6.1.0-50-amd64`,
    /// the `linux-image-RELEASE` package, fetched into benchlab's cache),
    /// or the absolute path of a directory laid out as an unpacked
    /// package (`boot/vmlinuz-RELEASE`, `lib/modules/RELEASE`). `None`:
    /// the cache's default kernel. Plans stored before this key read as
    /// `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
}

/// Whether `s` may be a kernel release: what `linux-image-RELEASE` and
/// `uname -r` spell (digits first; letters, digits, `.+~_-`).
pub fn is_kernel_release(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+~_-".contains(c))
}

const GUEST_KEYS: &[&str] = &[
    "vcpus",
    "memory",
    "cpus",
    "hugepages",
    "net",
    "bridge",
    "netns",
    "ip",
    "peer",
    "accel",
    "kernel",
];

/// Checks `a.b.c.d/len`.
fn is_cidr(s: &str) -> bool {
    match s.split_once('/') {
        Some((a, l)) => {
            a.parse::<std::net::Ipv4Addr>().is_ok() && l.parse::<u8>().is_ok_and(|l| l <= 32)
        }
        None => false,
    }
}

impl Ctx<'_> {
    /// `guest = { … }` of `path` (a `[[host]]`).
    pub(super) fn guest(&self, v: &Val, path: &str) -> Result<GuestSpec, StudyError> {
        let gpath = format!("{path}.guest");
        let t = self.table(v, &gpath)?;
        self.check_keys(t, &gpath, GUEST_KEYS)?;
        let key = |k: &str| format!("{gpath}.{k}");
        let need = |k: &str, what: &str| -> Result<&Val, StudyError> {
            t.get(k)
                .ok_or_else(|| self.err(v.span(), &key(k), format!("missing: {what}")))
        };
        let vv = need("vcpus", "how many virtual CPUs (e.g. 4)")?;
        let vcpus = self.int(vv, &key("vcpus"))?;
        if !(1..=1024).contains(&vcpus) {
            return Err(self.err(
                vv.span(),
                &key("vcpus"),
                format!("{vcpus}: allowed 1 … 1024 (and at most this host's CPUs)"),
            ));
        }
        let mv = need(
            "memory",
            "the guest's memory in MiB (e.g. 1024) or as \"1G\"",
        )?;
        let memory_mib = match mv.get_ref() {
            DeValue::Integer(_) => self.int(mv, &key("memory"))?,
            DeValue::String(s) => {
                let s = s.trim();
                let (num, mul) = match s.char_indices().last() {
                    Some((i, 'M' | 'm')) => (&s[..i], 1),
                    Some((i, 'G' | 'g')) => (&s[..i], 1024),
                    _ => (s, 1),
                };
                match num.trim().parse::<i64>() {
                    Ok(n) => n * mul,
                    Err(_) => {
                        return Err(self.err(
                            mv.span(),
                            &key("memory"),
                            format!("`{s}`: expected MiB as a number, or \"512M\" / \"2G\""),
                        ))
                    }
                }
            }
            other => {
                return Err(self.err(
                    mv.span(),
                    &key("memory"),
                    format!(
                        "expected MiB as a number, or \"512M\" / \"2G\", found {}",
                        type_name(other)
                    ),
                ))
            }
        };
        if memory_mib < 256 {
            return Err(self.err(
                mv.span(),
                &key("memory"),
                format!(
                    "{memory_mib} MiB: at least 256 MiB (the Debian kernel with the overlay root)"
                ),
            ));
        }
        let mut cpus = Vec::new();
        if let Some(c) = t.get("cpus") {
            match c.get_ref() {
                DeValue::Array(a) => {
                    for (j, x) in a.iter().enumerate() {
                        let n = self.int(x, &format!("{}[{j}]", key("cpus")))?;
                        if n < 0 {
                            return Err(self.err(
                                x.span(),
                                &key("cpus"),
                                format!("{n} is not a CPU number"),
                            ));
                        }
                        cpus.push(n as usize);
                    }
                }
                other => {
                    return Err(self.err(
                        c.span(),
                        &key("cpus"),
                        format!(
                            "expected a list of host CPUs, one per vCPU (e.g. [2, 3]), found {}",
                            type_name(other)
                        ),
                    ))
                }
            }
            if cpus.len() != vcpus as usize {
                return Err(self.err(
                    c.span(),
                    &key("cpus"),
                    format!(
                        "{} CPU(s) for {vcpus} vCPU(s): give one host CPU per vCPU",
                        cpus.len()
                    ),
                ));
            }
        }
        let hugepages = t
            .get("hugepages")
            .map(|h| self.boolean(h, &key("hugepages")))
            .transpose()?
            .unwrap_or(false);
        if hugepages && memory_mib % 2 != 0 {
            return Err(self.err(
                mv.span(),
                &key("memory"),
                "with hugepages = true: a multiple of 2 MiB (the huge page size)",
            ));
        }
        let accel = match t.get("accel") {
            None => Accel::Auto,
            Some(a) => match self.string(a, &key("accel"))?.as_str() {
                "kvm" => Accel::Kvm,
                "tcg" => Accel::Tcg,
                "auto" => Accel::Auto,
                other => return Err(self.err(a.span(), &key("accel"), format!("`{other}`: allowed \"kvm\", \"tcg\" or \"auto\" (KVM where it can run a guest, else TCG, marked emulated)"))),
            },
        };
        let opt = |k: &str| -> Result<Option<String>, StudyError> {
            t.get(k).map(|x| self.string(x, &key(k))).transpose()
        };
        let kernel = opt("kernel")?;
        if let Some(k) = &kernel {
            let path = std::path::Path::new(k);
            if !(is_kernel_release(k) || path.is_absolute() && !k.contains(char::is_whitespace)) {
                return Err(self.err(
                    t.get("kernel").unwrap().span(),
                    &key("kernel"),
                    format!("`{k}`: allowed a Debian kernel release as in linux-image-RELEASE (e.g. \"6.1.0-50-amd64\", \"6.12.100+deb12-amd64\", \"6.1.0-57-rt-amd64\"), or the absolute path of an unpacked kernel (boot/vmlinuz-RELEASE and lib/modules/RELEASE under it)"),
                ));
            }
        }
        let netns = opt("netns")?;
        if let Some(ns) = &netns {
            if ns.is_empty() || ns.contains('/') {
                return Err(self.err(
                    t.get("netns").unwrap().span(),
                    &key("netns"),
                    "expected a network namespace name (see `ip netns list`)",
                ));
            }
        }
        let iv = need(
            "ip",
            "the guest's address with its prefix (e.g. \"10.203.3.12/24\")",
        )?;
        let ip = self.string(iv, &key("ip"))?;
        if !is_cidr(&ip) {
            return Err(self.err(
                iv.span(),
                &key("ip"),
                format!(
                    "`{ip}`: expected an IPv4 address with its prefix, e.g. \"10.203.3.12/24\""
                ),
            ));
        }
        let nv = need(
            "net",
            "\"bridge\" (a tap on an existing bridge) or \"direct\" (a tap of its own)",
        )?;
        let net = match self.string(nv, &key("net"))?.as_str() {
            "bridge" => {
                if let Some(p) = t.get("peer") {
                    return Err(self.err(p.span(), &key("peer"), "only net = \"direct\" takes a peer address"));
                }
                let bridge = opt("bridge")?.ok_or_else(|| self.err(nv.span(), &key("bridge"), "missing: net = \"bridge\" needs the bridge the guest's tap joins (a test bed's is `<testbed>-br` in namespace `bl-<testbed>-switch`)"))?;
                GuestNet::Bridge { bridge, netns, ip }
            }
            "direct" => {
                if let Some(b) = t.get("bridge") {
                    return Err(self.err(b.span(), &key("bridge"), "only net = \"bridge\" takes a bridge"));
                }
                let pv = t.get("peer").ok_or_else(|| self.err(nv.span(), &key("peer"), "missing: net = \"direct\" needs the tap's host-end address with its prefix (e.g. \"10.203.5.1/30\")"))?;
                let peer = self.string(pv, &key("peer"))?;
                if !is_cidr(&peer) {
                    return Err(self.err(pv.span(), &key("peer"), format!("`{peer}`: expected an IPv4 address with its prefix, e.g. \"10.203.5.1/30\"")));
                }
                GuestNet::Direct { netns, ip, peer }
            }
            other => return Err(self.err(nv.span(), &key("net"), format!("`{other}`: allowed \"bridge\" (a tap on an existing bridge) or \"direct\" (a tap of its own, no bridge: the nearest stand-in here for a passed-through NIC)"))),
        };
        Ok(GuestSpec {
            vcpus: vcpus as u32,
            memory_mib: memory_mib as u64,
            cpus,
            hugepages,
            net,
            accel,
            kernel,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::study::{Accel, GuestNet, Study, Transport};

    fn parse(guest: &str) -> Result<Study, String> {
        let mut reg = crate::workload::Registry::new();
        reg.add(&crate::fake::FAKE);
        Study::parse(
            "s.toml",
            &format!(
                "[study]\nname = \"s\"\n[[host]]\nname = \"vm\"\nguest = {{ {guest} }}\n[[workload]]\nkind = \"fake\"\nserver = \"vm\"\n"
            ),
            &reg,
        )
        .map_err(|e| e.to_string())
    }

    const BRIDGE: &str = "vcpus = 2, memory = \"1G\", cpus = [0, 1], hugepages = true, net = \"bridge\", bridge = \"br0\", netns = \"ns\", ip = \"10.0.0.5/24\"";

    #[test]
    fn a_bridged_guest_reads_with_its_address_from_its_nic() {
        let s = parse(BRIDGE).unwrap();
        let h = s.hosts.iter().find(|h| h.name == "vm").unwrap();
        assert_eq!(h.address.as_deref(), Some("10.0.0.5"));
        let Transport::Guest(g) = &h.transport else {
            panic!("{:?}", h.transport)
        };
        assert_eq!(
            (g.vcpus, g.memory_mib, g.cpus.clone()),
            (2, 1024, vec![0, 1])
        );
        assert!(g.hugepages);
        assert_eq!(g.accel, Accel::Auto);
        assert_eq!(g.kernel, None);
        let s = parse(&format!("{BRIDGE}, kernel = \"6.12.100+deb12-rt-amd64\"")).unwrap();
        let Transport::Guest(g) = &s.hosts.iter().find(|h| h.name == "vm").unwrap().transport
        else {
            panic!()
        };
        assert_eq!(g.kernel.as_deref(), Some("6.12.100+deb12-rt-amd64"));
        assert_eq!(
            g.net,
            GuestNet::Bridge {
                bridge: "br0".into(),
                netns: Some("ns".into()),
                ip: "10.0.0.5/24".into()
            }
        );
    }

    #[test]
    fn bad_guest_keys_are_refused_naming_the_key_and_what_is_allowed() {
        let cases = [
            (
                BRIDGE.replace("cpus = [0, 1]", "cpus = [0]"),
                "host[0].guest.cpus",
                "one host CPU per vCPU",
            ),
            (
                BRIDGE.replace("net = \"bridge\"", "net = \"sriov\""),
                "host[0].guest.net",
                "allowed \"bridge\"",
            ),
            (
                format!("{BRIDGE}, accel = \"hvf\""),
                "host[0].guest.accel",
                "allowed \"kvm\", \"tcg\" or \"auto\"",
            ),
            (
                BRIDGE.replace("memory = \"1G\"", "memory = 64"),
                "host[0].guest.memory",
                "at least 256 MiB",
            ),
            (
                BRIDGE.replace("ip = \"10.0.0.5/24\"", "ip = \"10.0.0.5\""),
                "host[0].guest.ip",
                "with its prefix",
            ),
            (
                BRIDGE.replace(", bridge = \"br0\"", ""),
                "host[0].guest.bridge",
                "missing",
            ),
            (
                format!("{BRIDGE}, kernel = \"linux 6.1\""),
                "host[0].guest.kernel",
                "allowed a Debian kernel release",
            ),
            (
                format!("{BRIDGE}, kernel = \"vmlinuz\""),
                "host[0].guest.kernel",
                "absolute path",
            ),
            (
                format!("{BRIDGE}, disk = \"x.img\""),
                "host[0].guest.disk",
                "",
            ),
            (
                BRIDGE.replace("net = \"bridge\", bridge = \"br0\"", "net = \"direct\""),
                "host[0].guest.peer",
                "missing",
            ),
        ];
        for (text, key, what) in cases {
            let e = parse(&text).unwrap_err();
            assert!(
                e.contains(&format!("key `{key}`")) && e.contains(what),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn a_guest_is_one_route_among_the_others() {
        let mut reg = crate::workload::Registry::new();
        reg.add(&crate::fake::FAKE);
        let e = Study::parse(
            "s.toml",
            &format!("[study]\nname = \"s\"\n[[host]]\nname = \"vm\"\nnetns = \"x\"\naddress = \"10.0.0.1\"\nguest = {{ {BRIDGE} }}\n[[workload]]\nkind = \"fake\"\n"),
            &reg,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("give only one of local, netns, ssh, agent, guest"),
            "{e}"
        );
    }
}
