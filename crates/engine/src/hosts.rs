//! Hosts and their agents: how each host is reached (a local child,
//! `ip netns exec`, or SSH), deploying this binary where asked, resolving
//! data addresses, and the preflight that proves every host reachable,
//! of the same version, and able to reach the others' data ports before
//! the first point runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use benchlab_agent::{AgentError, AgentHandle, Request, Response};
use benchlab_core::placement::Placement;
use benchlab_core::study::{Host, Study, Transport};
use benchlab_core::{Params, Registry, ServerSide};

/// The side of a workload an agent runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Role {
    Server,
    Client,
    /// The host's system monitors (never under a launcher).
    Monitor,
}

/// Where deployed binaries go on SSH hosts, relative to the login
/// directory, when the host does not name a path.
const DEPLOY_PATH: &str = ".cache/benchlab/benchlab";
/// How long the preflight's data-path probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

fn exe() -> Result<String> {
    Ok(std::env::current_exe()
        .context("cannot find the benchlab binary")?
        .display()
        .to_string())
}

/// How to describe a host's control route in messages.
pub(crate) fn route(host: &Host) -> String {
    match &host.transport {
        Transport::Local => "local".into(),
        Transport::Netns(ns) => format!("netns {ns}"),
        Transport::Ssh { destination, .. } => format!("ssh {destination}"),
        Transport::Tcp { agent, .. } => format!("agent {agent}"),
        Transport::Guest(g) => format!(
            "guest: {} vCPU(s), {} MiB, net {}, accel {}",
            g.vcpus,
            g.memory_mib,
            g.net.kind(),
            g.accel.as_str()
        ),
    }
}

/// The benchlab binary's path on a host.
fn remote_path(host: &Host) -> Result<String> {
    Ok(match (&host.benchlab, &host.transport) {
        (Some(p), _) => p.clone(),
        (None, Transport::Ssh { .. }) if host.deploy => DEPLOY_PATH.into(),
        (None, Transport::Ssh { .. }) => "benchlab".into(),
        (None, _) => exe()?,
    })
}

/// `ssh [options] DESTINATION --` with the host's port, identity and
/// options. BatchMode: a study runs unattended, so a password prompt
/// must fail fast instead of hanging; the user's ssh config and agent
/// still apply.
fn ssh_command(host: &Host) -> Command {
    let Transport::Ssh {
        destination,
        port,
        identity,
        options,
    } = &host.transport
    else {
        unreachable!("ssh_command on a non-SSH host");
    };
    let mut c = Command::new("ssh");
    c.args(["-T", "-o", "BatchMode=yes"]);
    if let Some(p) = port {
        c.arg("-p").arg(p.to_string());
    }
    if let Some(i) = identity {
        c.arg("-i").arg(i);
    }
    c.args(options).arg(destination).arg("--");
    c
}

/// Quotes a word for the remote shell ssh runs commands with.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The command that starts a host's agent, under `launcher` (a prefix
/// such as `onload --profile=latency`) when one is given.
fn agent_command(host: &Host, launcher: &[String]) -> Result<Command> {
    let path = remote_path(host)?;
    Ok(match &host.transport {
        Transport::Local => {
            let mut c = match launcher.split_first() {
                Some((first, rest)) => {
                    let mut c = Command::new(first);
                    c.args(rest).arg(&path);
                    c
                }
                None => Command::new(&path),
            };
            c.args(["agent", "--stdio"]);
            c
        }
        Transport::Netns(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).args(launcher);
            c.args([&path, "agent", "--stdio"]);
            c
        }
        Transport::Ssh { .. } => {
            let mut c = ssh_command(host);
            let mut words: Vec<String> = launcher.iter().map(|w| sh_quote(w)).collect();
            words.push(sh_quote(&path));
            c.arg(format!("{} agent --stdio", words.join(" ")));
            c
        }
        Transport::Tcp { .. } => unreachable!("TCP agents are connected to, not started"),
        Transport::Guest(_) => unreachable!("a guest's agents are started through its Guest"),
    })
}

/// Starts an agent on a host to restore its journals (outside a run).
pub fn spawn_for_restore(host: &Host) -> Result<AgentHandle> {
    if let Transport::Tcp { .. } = host.transport {
        bail!("restore through a listening TCP agent is not supported: run `benchlab restore` on that host");
    }
    // A guest's own changes live in its memory and went with it; what
    // booting it changed here (QEMU, its scratch directory, huge pages)
    // is journaled on this machine.
    let mut host = host.clone();
    if let Transport::Guest(_) = host.transport {
        host.transport = Transport::Local;
    }
    let cmd = agent_command(&host, &[])?;
    Ok(AgentHandle::spawn(cmd, &format!("{}/restore", host.name))?)
}

/// Copies this binary to an SSH host when it is missing there or of
/// another version (`deploy = true`).
fn deploy(host: &Host) -> Result<()> {
    let path = remote_path(host)?;
    let version = ssh_command(host)
        .arg(format!("{} --version", sh_quote(&path)))
        .stdin(Stdio::null())
        .output()
        .context("cannot run ssh")?;
    let want = format!("benchlab {}", benchlab_core::VERSION);
    if version.status.success() && String::from_utf8_lossy(&version.stdout).trim() == want {
        return Ok(());
    }
    let bin = std::fs::File::open(exe()?).context("cannot read this benchlab binary")?;
    let script = format!(
        "set -e; p={}; mkdir -p \"$(dirname \"$p\")\"; cat > \"$p.part\"; chmod 755 \"$p.part\"; mv -f \"$p.part\" \"$p\"",
        sh_quote(&path)
    );
    let out = ssh_command(host)
        .arg(script)
        .stdin(Stdio::from(bin))
        .output()
        .context("cannot run ssh")?;
    if !out.status.success() {
        bail!(
            "copying benchlab to {path} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The data address of a host: its `address`, else 127.0.0.1 for local
/// hosts and the SSH destination's host name.
fn resolve(host: &Host) -> Result<IpAddr> {
    let name = match (&host.address, &host.transport) {
        (Some(a), _) => a.clone(),
        (None, Transport::Local) => return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        (None, Transport::Ssh { destination, .. }) => {
            let h = destination.rsplit('@').next().unwrap_or(destination);
            h.trim_start_matches('[').trim_end_matches(']').to_string()
        }
        (None, Transport::Tcp { agent, .. }) => agent
            .rsplit_once(':')
            .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']').to_string())
            .unwrap_or_default(),
        (None, Transport::Netns(_) | Transport::Guest(_)) => bail!("no data address"),
    };
    if let Ok(ip) = name.parse() {
        return Ok(ip);
    }
    (name.as_str(), 0)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve its data address `{name}`"))?
        .next()
        .map(|a| a.ip())
        .with_context(|| format!("`{name}` has no address"))
}

/// A host's name, the roles it plays (`client,server`) and its inventory.
pub(crate) type HostInventory = (String, String, serde_json::Value);

/// What the study's configurations use, each after its `hosts` map: the
/// one account of which host plays which role in which configuration,
/// read by the preflight (what to check and probe), the inventory
/// appendix (the roles) and a guest's boot (its first agent, its data
/// paths). Which hosts a configuration uses at all is
/// `Study::configuration_hosts`.
#[derive(Default)]
pub(crate) struct Uses {
    /// Per host, each role it plays (`server`, `client`, `service`) with
    /// the configurations (indices) that give it.
    roles: BTreeMap<String, BTreeMap<&'static str, Vec<usize>>>,
    /// Per configuration, the (client host, server host) pairs of its
    /// workloads.
    pairs: Vec<Vec<(String, String)>>,
    /// Per client host, the agents it needs at once (one per target).
    slots: BTreeMap<String, usize>,
    /// Configuration names, for the roles' text.
    configs: Vec<String>,
}

impl Uses {
    /// Every configuration's hosts: a host only one configuration moves a
    /// side to is checked before the first point too. A workload without
    /// a server side (`command`, `fs.matrix`) pairs its client with no
    /// server: its `server` host (`sut` unless named) serves it nothing,
    /// so no reach probe goes there (from a guest, `sut`'s 127.0.0.1 is
    /// the guest itself and the probe would fail).
    pub(crate) fn of(study: &Study, reg: &Registry) -> Uses {
        let mut u = Uses {
            roles: BTreeMap::new(),
            pairs: vec![Vec::new(); study.configurations.len()],
            slots: BTreeMap::new(),
            configs: study
                .configurations
                .iter()
                .map(|c| c.name.clone())
                .collect(),
        };
        let mut add = |host: &str, role: &'static str, config: usize| {
            let c = u
                .roles
                .entry(host.to_string())
                .or_default()
                .entry(role)
                .or_default();
            if !c.contains(&config) {
                c.push(config);
            }
        };
        for (ci, config) in study.configurations.iter().enumerate() {
            for w in &study.workloads {
                let served = reg
                    .get(&w.kind)
                    .is_none_or(|k| k.server_side() != ServerSide::None);
                for s in w.servers.iter().map(|s| config.host(s)) {
                    add(s, "server", ci);
                    for c in w
                        .client_hosts
                        .iter()
                        .map(|c| config.host(c))
                        .filter(|_| served)
                    {
                        let pair = (c.to_string(), s.to_string());
                        if !u.pairs[ci].contains(&pair) {
                            u.pairs[ci].push(pair);
                        }
                    }
                }
                for c in w.client_hosts.iter().map(|c| config.host(c)) {
                    add(c, "client", ci);
                    let n = u.slots.entry(c.to_string()).or_default();
                    *n = (*n).max(w.servers.len());
                }
            }
            // A managed service's host is reached even when no workload
            // names it (its service is still checked, started and stopped
            // there); configuration services carry their mapped hosts.
            for d in config.services.iter().filter(|d| d.address.is_none()) {
                add(&d.host, "service", ci);
            }
        }
        u
    }

    /// The roles a host plays in any configuration.
    fn roles_of(&self, host: &str) -> Vec<&'static str> {
        self.roles
            .get(host)
            .map(|r| r.keys().copied().collect())
            .unwrap_or_default()
    }

    /// A host's roles for the inventory appendix (`server,client in b`).
    fn role_text(&self, host: &str) -> String {
        let all = self.configs.len();
        self.roles[host]
            .iter()
            .map(|(role, configs)| {
                if configs.len() == all {
                    role.to_string()
                } else {
                    let names: Vec<&str> =
                        configs.iter().map(|&i| self.configs[i].as_str()).collect();
                    format!("{role} in {}", names.join(" and "))
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Every configuration's pairs, once each.
    fn all_pairs(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for p in self.pairs.iter().flatten() {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        out
    }
}

/// A guest booted during the run, as recorded: its facts and its host's
/// inventory (the guest's own kernel's, with the facts under `guest`).
pub(crate) struct Booted {
    /// What QEMU and the guest are.
    pub(crate) facts: benchlab_guest::vm::Facts,
    /// The host's inventory row.
    pub(crate) inventory: HostInventory,
}

/// Every agent of a run, started lazily and keyed by (host, role, slot):
/// a host that serves several targets' clients at once gets one client
/// agent per target.
pub(crate) struct Pool {
    hosts: BTreeMap<String, Host>,
    addresses: HashMap<String, IpAddr>,
    agents: HashMap<(String, Role, usize), AgentHandle>,
    /// Launcher prefixes of server and client agents (the current
    /// configuration's).
    launchers: [Vec<String>; 2],
    /// Each used host's kernel (`boot_id`), in study order: hosts that
    /// share one are network namespaces of one machine.
    pub(crate) boot_ids: Vec<(String, String)>,
    /// The guests running now, by host name (stopped, and all they made
    /// undone, when the pool is dropped).
    guests: BTreeMap<String, benchlab_guest::Guest>,
    /// Which host each configuration uses, in which role.
    uses: Uses,
    /// Guests whose emulation the user was told of.
    told_emulated: BTreeSet<String>,
}

impl Pool {
    /// The data address of a host.
    pub(crate) fn address(&self, host: &str) -> IpAddr {
        self.addresses[host]
    }

    /// The data address of any of the study's hosts, also one no side
    /// runs on (a command's `{host.NAME}`): resolved once, then kept.
    pub(crate) fn address_of(&mut self, host: &str) -> Result<IpAddr> {
        if let Some(ip) = self.addresses.get(host) {
            return Ok(*ip);
        }
        let h = self
            .hosts
            .get(host)
            .with_context(|| format!("no host is named `{host}`"))?;
        let ip = resolve(h).with_context(|| format!("host `{host}` ({})", route(h)))?;
        self.addresses.insert(host.to_string(), ip);
        Ok(ip)
    }

    /// Where a server side on `host` listens: its data address if that is
    /// a loopback address (so nothing is exposed), else every address of
    /// the host (its data address may be a relay's or a NAT's), on the
    /// host's data port.
    pub(crate) fn bind_address(&self, host: &str) -> SocketAddr {
        let ip = self.address(host);
        let bind = match ip {
            _ if ip.is_loopback() => ip,
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        };
        SocketAddr::new(bind, self.hosts[host].data_port)
    }

    fn name(host: &str, role: Role, slot: usize) -> String {
        let role = match role {
            Role::Server => "server",
            Role::Client => "client",
            Role::Monitor => "monitor",
        };
        if slot == 0 {
            format!("{host}/{role}")
        } else {
            format!("{host}/{role}#{}", slot + 1)
        }
    }

    /// Makes the agents of later points start under these launchers
    /// (agents running under other ones are stopped).
    pub(crate) fn set_launchers(&mut self, server: &[String], client: &[String]) {
        if self.launchers[0] != server || self.launchers[1] != client {
            self.kill_all();
            self.launchers = [server.to_vec(), client.to_vec()];
        }
    }

    /// The study's definition of a host.
    pub(crate) fn host(&self, name: &str) -> &Host {
        &self.hosts[name]
    }

    fn spawn(&self, host: &str, role: Role, slot: usize) -> Result<AgentHandle, AgentError> {
        let launcher: &[String] = match role {
            Role::Server => &self.launchers[0],
            Role::Client => &self.launchers[1],
            Role::Monitor => &[],
        };
        self.spawn_named(host, &Self::name(host, role, slot), launcher)
    }

    /// Starts an agent that holds a configuration's environment on a host
    /// (kept apart from the workload agents, which are restarted after
    /// failed points).
    pub(crate) fn spawn_env(&self, host: &str) -> Result<AgentHandle, AgentError> {
        self.spawn_named(host, &format!("{host}/env"), &[])
    }

    /// Starts an environment agent on this machine outside any network
    /// namespace, for what belongs to the machine rather than to a
    /// namespace host (a shield, a background load): `ip netns exec` gives
    /// its agents a mount namespace without the machine's cgroup mounts.
    pub(crate) fn spawn_env_machine(&self, host: &str) -> Result<AgentHandle, AgentError> {
        // A guest is a machine of its own.
        if let Transport::Guest(_) = self.hosts[host].transport {
            return self.spawn_env(host);
        }
        let mut h = self.hosts[host].clone();
        h.transport = Transport::Local;
        let name = format!("{host}/machine-env");
        let cmd = agent_command(&h, &[]).map_err(|e| AgentError::Spawn {
            name: name.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
        AgentHandle::spawn(cmd, &name)
    }

    fn spawn_named(
        &self,
        host: &str,
        name: &str,
        launcher: &[String],
    ) -> Result<AgentHandle, AgentError> {
        let h = &self.hosts[host];
        let name = name.to_string();
        if let Transport::Tcp { agent, key_file } = &h.transport {
            let refused = |reason: String| AgentError::Refused {
                name: name.clone(),
                reason,
            };
            let addr = agent
                .to_socket_addrs()
                .map_err(|e| refused(format!("cannot resolve {agent}: {e}")))?
                .next()
                .ok_or_else(|| refused(format!("{agent} has no address")))?;
            let key = benchlab_agent::channel::load_key(std::path::Path::new(key_file))
                .map_err(|e| refused(e.to_string()))?;
            let stream = benchlab_agent::listen::connect(addr, &key, Duration::from_secs(10))
                .map_err(|e| refused(e.to_string()))?;
            if !launcher.is_empty() {
                return Err(refused(
                    "a launcher prefix needs an agent that benchlab starts (local, netns or ssh), not a listening TCP agent".into(),
                ));
            }
            return AgentHandle::over_tcp(stream, &name);
        }
        if let Transport::Guest(_) = &h.transport {
            let guest = self.guests.get(host).ok_or_else(|| AgentError::Refused {
                name: name.clone(),
                reason:
                    "the guest is not running (it boots when a configuration that uses it starts)"
                        .into(),
            })?;
            if guest.watch().is_none_or(|w| w.gone()) {
                return Err(AgentError::Refused {
                    name: name.clone(),
                    reason: "the guest has ended (its QEMU was killed or crashed); it boots again when the next configuration that uses it starts".into(),
                });
            }
            let path = remote_path(h).map_err(|e| AgentError::Spawn {
                name: name.clone(),
                source: std::io::Error::other(e.to_string()),
            })?;
            let mut argv = launcher.to_vec();
            argv.extend([path, "agent".into(), "--stdio".into()]);
            return AgentHandle::spawn(guest.command(&argv), &name);
        }
        let cmd = agent_command(h, launcher).map_err(|e| AgentError::Spawn {
            name: name.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
        AgentHandle::spawn(cmd, &name)
    }

    /// The guests among `hosts`, each with a handle that tells whether it
    /// still runs.
    pub(crate) fn guest_watches(
        &self,
        hosts: &[&str],
    ) -> Vec<(String, benchlab_guest::mux::Watch)> {
        let mut out: Vec<(String, benchlab_guest::mux::Watch)> = Vec::new();
        for h in hosts {
            if out.iter().any(|(n, _)| n == h) {
                continue;
            }
            if let Some(w) = self.guests.get(*h).and_then(|g| g.watch()) {
                out.push((h.to_string(), w));
            }
        }
        out
    }

    /// Whether a host is a guest benchlab boots.
    pub(crate) fn is_guest(&self, host: &str) -> bool {
        self.hosts
            .get(host)
            .is_some_and(|h| matches!(h.transport, Transport::Guest(_)))
    }

    /// The guests configuration `config` of `study` uses: the hosts its
    /// workloads' sides, targets and services land on after its `hosts`
    /// map.
    pub(crate) fn guests_of(&self, study: &Study, config: usize) -> Vec<String> {
        study
            .configuration_hosts(&study.configurations[config])
            .into_iter()
            .filter(|h| self.is_guest(h))
            .map(str::to_string)
            .collect()
    }

    /// The guests running now that configuration `config` does not use.
    pub(crate) fn guests_leaving(&self, study: &Study, config: usize) -> Vec<String> {
        let keep = self.guests_of(study, config);
        self.guests
            .keys()
            .filter(|h| !keep.contains(h))
            .cloned()
            .collect()
    }

    /// Whether a guest was booted (and not stopped since) and still runs
    /// (`Some(false)`: its QEMU ended, killed or crashed).
    pub(crate) fn guest_state(&self, host: &str) -> Option<bool> {
        self.guests
            .get(host)
            .map(|g| g.watch().is_some_and(|w| !w.gone()))
    }

    /// Boots a guest and proves its agent of this version: returns its
    /// facts and inventory. On any failure nothing of it is left.
    pub(crate) fn boot_guest(&mut self, host: &str, interrupt: &AtomicBool) -> Result<Booted> {
        let h = self.hosts[host].clone();
        let Transport::Guest(g) = &h.transport else {
            bail!("host `{host}` is not a guest");
        };
        let spec = benchlab_guest::Spec {
            name: host.to_string(),
            guest: g.clone(),
        };
        let guest = benchlab_guest::Guest::boot(&spec, &benchlab_env::journal::journal_dir())?;
        let facts = guest.facts.clone();
        self.guests.insert(host.to_string(), guest);
        match self.greet_guest(host, interrupt) {
            Ok((mut inventory, boot_id)) => {
                inventory["guest"] = serde_json::to_value(&facts).unwrap_or_default();
                self.boot_ids.retain(|(h, _)| h != host);
                self.boot_ids.push((host.to_string(), boot_id));
                Ok(Booted {
                    facts,
                    inventory: (host.to_string(), self.uses.role_text(host), inventory),
                })
            }
            Err(e) => {
                self.stop_guest(host);
                Err(e)
            }
        }
    }

    /// A booted guest's first agent: its version, its inventory, its
    /// kernel's boot id.
    fn greet_guest(
        &mut self,
        host: &str,
        interrupt: &AtomicBool,
    ) -> Result<(serde_json::Value, String)> {
        // Services are started by the host's server-role agent.
        let roles = self.uses.roles_of(host);
        let role = if roles.contains(&"server") || roles.contains(&"service") {
            Role::Server
        } else {
            Role::Client
        };
        let agent = self.agent(host, role, 0).context("unreachable")?;
        if agent.version != benchlab_core::VERSION {
            bail!(
                "runs benchlab {}, this controller is {}",
                agent.version,
                benchlab_core::VERSION
            );
        }
        let inventory =
            match agent.request(&Request::Inventory, Duration::from_secs(60), interrupt)? {
                Response::Inventory { inventory } => inventory,
                other => bail!("bad inventory answer {other:?}"),
            };
        let boot_id = match agent.request(&Request::EnvProbe, Duration::from_secs(30), interrupt)? {
            Response::EnvProbed { boot_id, .. } => boot_id,
            other => bail!("bad probe answer {other:?}"),
        };
        Ok((inventory, boot_id))
    }

    /// Proves, for configuration `config`, that each client host reaches
    /// each server host's data port where either end is one of `booted`.
    pub(crate) fn probe_guests(
        &mut self,
        config: usize,
        booted: &[String],
        interrupt: &AtomicBool,
    ) -> Result<()> {
        let pairs: Vec<(String, String)> = self.uses.pairs[config]
            .iter()
            .filter(|(c, s)| booted.contains(c) || booted.contains(s))
            .cloned()
            .collect();
        for (client, server) in pairs {
            self.probe(&client, &server, interrupt).with_context(|| {
                format!(
                    "host `{client}` cannot reach host `{server}`'s data address {}",
                    self.address(&server)
                )
            })?;
        }
        Ok(())
    }

    /// Stops a guest: its agents first (their services must already be
    /// stopped), then QEMU, its journal closed and its huge pages given
    /// back. Returns what could not be undone; `None` if it was not
    /// running.
    pub(crate) fn stop_guest(&mut self, host: &str) -> Option<Vec<String>> {
        let guest = self.guests.remove(host)?;
        let alive = guest.watch().is_some_and(|w| !w.gone());
        let mine: Vec<(String, Role, usize)> = self
            .agents
            .keys()
            .filter(|(h, _, _)| h == host)
            .cloned()
            .collect();
        for key in mine {
            if let Some(mut a) = self.agents.remove(&key) {
                // A dead guest's agents cannot answer: no 5 s wait each.
                if alive {
                    a.shutdown();
                } else {
                    a.kill_now();
                }
            }
        }
        self.boot_ids.retain(|(h, _)| h != host);
        Some(guest.stop())
    }

    /// The guests running now, by name.
    pub(crate) fn running_guests(&self) -> Vec<String> {
        self.guests.keys().cloned().collect()
    }

    /// Whether the user is yet to be told that this guest is emulated
    /// (once per guest and run, whatever the number of boots).
    pub(crate) fn first_emulated_note(&mut self, host: &str) -> bool {
        self.told_emulated.insert(host.to_string())
    }

    /// The agent for a side, started if needed.
    pub(crate) fn agent(
        &mut self,
        host: &str,
        role: Role,
        slot: usize,
    ) -> Result<&mut AgentHandle, AgentError> {
        let key = (host.to_string(), role, slot);
        if !self.agents.contains_key(&key) {
            let a = self.spawn(host, role, slot)?;
            self.agents.insert(key.clone(), a);
        }
        Ok(self.agents.get_mut(&key).expect("just inserted"))
    }

    /// Takes an agent out of the pool (to drive several at once from
    /// threads); give it back with [`Pool::put`].
    pub(crate) fn take(
        &mut self,
        host: &str,
        role: Role,
        slot: usize,
    ) -> Result<AgentHandle, AgentError> {
        self.agent(host, role, slot)?;
        Ok(self
            .agents
            .remove(&(host.to_string(), role, slot))
            .expect("present"))
    }

    /// Returns an agent taken with [`Pool::take`].
    pub(crate) fn put(&mut self, host: &str, role: Role, slot: usize, agent: AgentHandle) {
        self.agents.insert((host.to_string(), role, slot), agent);
    }

    /// Kills one agent (a lost one), to be started afresh when needed.
    pub(crate) fn discard(&mut self, host: &str, role: Role, slot: usize) {
        if let Some(mut a) = self.agents.remove(&(host.to_string(), role, slot)) {
            a.kill_now();
        }
    }

    /// Kills every agent at once; they are started afresh when needed.
    pub(crate) fn kill_all(&mut self) {
        for (_, mut a) in self.agents.drain() {
            a.kill_now();
        }
    }

    /// Stops every agent in order.
    pub(crate) fn shutdown(mut self) {
        for (_, a) in self.agents.drain() {
            a.shutdown();
        }
    }

    /// Starts the agents of every host the study uses and checks, before
    /// anything runs, that each is reachable and of this version and that
    /// every client host reaches every server host's data port. Reports
    /// one line per failing host. Returns the pool and each host's
    /// inventory with its roles. Guests are checked but not booted: each
    /// boots, and is proved and inventoried, when a configuration that
    /// uses it starts (`guests.rs`).
    pub(crate) fn preflight(
        study: &Study,
        reg: &Registry,
        interrupt: &AtomicBool,
        restore_first: bool,
    ) -> Result<(Pool, Vec<HostInventory>, Vec<String>)> {
        let mut notes = Vec::new();
        let mut pending_restore = false;
        let mut boot_ids = Vec::new();
        let uses = Uses::of(study, reg);
        let roles: BTreeMap<String, Vec<&str>> = uses
            .roles
            .iter()
            .map(|(h, r)| (h.clone(), r.keys().copied().collect()))
            .collect();
        let mut problems: Vec<String> = Vec::new();
        let mut inventories = Vec::new();
        let mut pool = Pool {
            hosts: study
                .hosts
                .iter()
                .map(|h| (h.name.clone(), h.clone()))
                .collect(),
            addresses: HashMap::new(),
            agents: HashMap::new(),
            launchers: [Vec::new(), Vec::new()],
            boot_ids: Vec::new(),
            guests: BTreeMap::new(),
            uses: Uses::default(),
            told_emulated: BTreeSet::new(),
        };
        // Guests are checked (all of them) here, but none boots: each
        // boots when a configuration that uses it starts (see
        // `guests.rs`), after every other host's journals were probed, so
        // that a booting guest's journal on this machine is never taken
        // for an earlier run's.
        for host in roles.keys() {
            if let Transport::Guest(g) = &pool.hosts[host].transport {
                let spec = benchlab_guest::Spec {
                    name: host.clone(),
                    guest: g.clone(),
                };
                problems.extend(benchlab_guest::Guest::preflight(&spec));
            }
        }
        problems.extend(guest_cpu_conflicts(study, roles.keys()));
        if problems.is_empty() {
            problems.extend(unreservable_hugepages(study, roles.keys()));
        }
        if !problems.is_empty() {
            bail!(
                "preflight failed; nothing was run:\n  {}",
                problems.join("\n  ")
            );
        }
        for host in roles.keys() {
            let rs = &roles[host];
            let h = pool.hosts[host].clone();
            let what = format!("host `{host}` ({})", route(&h));
            match resolve(&h) {
                Ok(ip) => {
                    pool.addresses.insert(host.clone(), ip);
                }
                Err(e) => {
                    problems.push(format!("{what}: {e:#}"));
                    continue;
                }
            }
            if let Transport::Guest(_) = &h.transport {
                continue;
            }
            if h.deploy {
                if let Transport::Ssh { .. } = h.transport {
                    if let Err(e) = deploy(&h) {
                        problems.push(format!("{what}: {e:#}"));
                        continue;
                    }
                }
            }
            let mut started = Vec::new();
            // Services are started by the host's server-role agent.
            if rs.contains(&"server") || rs.contains(&"service") {
                started.push((Role::Server, 0));
            }
            if rs.contains(&"client") {
                for slot in 0..uses.slots[host] {
                    started.push((Role::Client, slot));
                }
            }
            let mut inventory = None;
            for (role, slot) in started {
                let agent = match pool.agent(host, role, slot) {
                    Ok(a) => a,
                    Err(e) => {
                        problems.push(format!("{what}: unreachable: {e}"));
                        break;
                    }
                };
                if agent.version != benchlab_core::VERSION {
                    problems.push(format!(
                        "{what}: runs benchlab {}, this controller is {} (set `deploy = true` to copy this binary there)",
                        agent.version,
                        benchlab_core::VERSION
                    ));
                    break;
                }
                if inventory.is_none() {
                    match agent.request(&Request::Inventory, Duration::from_secs(60), interrupt) {
                        Ok(Response::Inventory { inventory: inv }) => inventory = Some(inv),
                        Ok(other) => {
                            problems.push(format!("{what}: bad inventory answer {other:?}"))
                        }
                        Err(e) => problems.push(format!("{what}: {e}")),
                    }
                    match agent.request(&Request::EnvProbe, Duration::from_secs(30), interrupt) {
                        Ok(Response::EnvProbed {
                            boot_id,
                            journals,
                            live,
                        }) => {
                            if !live.is_empty() {
                                notes.push(format!(
                                    "{what}: another run is in progress on this host (journal {}): its settings are its own to put back, and this run leaves them alone",
                                    live.join(", ")
                                ));
                            }
                            if !journals.is_empty() && !restore_first {
                                problems.push(format!(
                                    "{what}: an earlier run left settings changed (unrestored journal {}): run `benchlab restore {}` to put them back, or `benchlab run --restore-first`",
                                    journals.join(", "),
                                    study.file
                                ));
                            }
                            pending_restore |= !journals.is_empty();
                            boot_ids.push((host.clone(), boot_id));
                        }
                        Ok(other) => problems.push(format!("{what}: bad probe answer {other:?}")),
                        Err(e) => problems.push(format!("{what}: {e}")),
                    }
                    if pending_restore && restore_first && problems.is_empty() {
                        match agent.request(
                            &Request::EnvRestore,
                            Duration::from_secs(120),
                            interrupt,
                        ) {
                            Ok(Response::EnvReverted { changes }) => {
                                let failed = changes
                                    .iter()
                                    .filter(|c| {
                                        c.status == benchlab_env::ChangeStatus::RevertFailed
                                    })
                                    .count();
                                notes.push(format!(
                                    "{what}: restored {} setting(s) an earlier run left changed{}",
                                    changes.len() - failed,
                                    if failed > 0 {
                                        format!(", {failed} could not be restored")
                                    } else {
                                        String::new()
                                    }
                                ));
                            }
                            Ok(Response::Error { message, .. }) => {
                                problems.push(format!("{what}: restore failed: {message}"))
                            }
                            Ok(other) => {
                                problems.push(format!("{what}: bad restore answer {other:?}"))
                            }
                            Err(e) => problems.push(format!("{what}: {e}")),
                        }
                        pending_restore = false;
                    }
                }
            }
            if let Some(inv) = inventory {
                inventories.push((host.clone(), uses.role_text(host), inv));
            }
        }
        if problems.is_empty() {
            // A pair with a guest at either end is probed when the guest
            // boots.
            let now: Vec<(String, String)> = uses
                .all_pairs()
                .into_iter()
                .filter(|(c, s)| !pool.is_guest(c) && !pool.is_guest(s))
                .collect();
            for (client, server) in &now {
                if let Err(e) = pool.probe(client, server, interrupt) {
                    let ip = pool.address(server);
                    let dest = match pool.hosts[server].data_port {
                        0 => ip.to_string(),
                        port => SocketAddr::new(ip, port).to_string(),
                    };
                    problems.push(format!(
                        "host `{client}` ({}) cannot reach host `{server}`'s data address {dest}: {e:#}",
                        route(&pool.hosts[client]),
                    ));
                }
            }
        }
        pool.boot_ids = boot_ids;
        pool.uses = uses;
        if !problems.is_empty() {
            pool.kill_all();
            bail!(
                "preflight failed; nothing was run:\n  {}",
                problems.join("\n  ")
            );
        }
        Ok((pool, inventories, notes))
    }

    /// Proves that `client` reaches `server`'s data port: one `fake`
    /// point between them, through the same agents and addresses as the
    /// real points.
    fn probe(&mut self, client: &str, server: &str, interrupt: &AtomicBool) -> Result<()> {
        let params = Params::defaults(benchlab_core::Workload::params(&benchlab_core::fake::FAKE));
        let bind = self.bind_address(server);
        let addr = self.address(server);
        let port = match self.agent(server, Role::Server, 0)?.request(
            &Request::Serve {
                kind: "fake".into(),
                params: params.clone(),
                placement: Placement::default(),
                bind,
            },
            PROBE_TIMEOUT,
            interrupt,
        )? {
            Response::Listening { port } => port,
            Response::Error { message, .. } => {
                bail!("its server side cannot listen on {bind}: {message}")
            }
            other => bail!("unexpected answer {other:?}"),
        };
        let client_result = self.agent(client, Role::Client, 0)?.request(
            &Request::RunClient {
                kind: "fake".into(),
                params,
                placement: Placement::default(),
                server: Some(SocketAddr::new(addr, port)),
                repetition: 0,
                share: Default::default(),
                gated: false,
                service: None,
                hosts: BTreeMap::new(),
            },
            PROBE_TIMEOUT,
            interrupt,
        )?;
        let collect = self.agent(server, Role::Server, 0)?.request(
            &Request::Collect { timeout_ms: 2000 },
            PROBE_TIMEOUT,
            interrupt,
        )?;
        match (client_result, collect) {
            (Response::Done { .. }, Response::Done { .. }) => Ok(()),
            (Response::Error { message, .. }, _) => bail!("{message}"),
            (_, Response::Error { message, .. }) => bail!("{message}"),
            (a, b) => bail!("unexpected answers {a:?} / {b:?}"),
        }
    }
}

/// Pinned vCPUs that would compete with another role of the same
/// configuration: another guest's vCPUs, or what the configuration pins
/// to this machine's CPUs ([`cpus_held_here`]).
fn guest_cpu_conflicts<'a>(study: &Study, used: impl Iterator<Item = &'a String>) -> Vec<String> {
    let used: Vec<&String> = used.collect();
    let online = benchlab_guest::spec::online_cpus();
    let mut problems = Vec::new();
    for config in &study.configurations {
        let roles = cpus_held_here(study, config, &used);
        let mut held: BTreeMap<usize, &str> = BTreeMap::new();
        let mut guests: Vec<(&str, u64)> = Vec::new();
        for (h, g) in config_guests(study, config, &used) {
            guests.push((h, g.memory_mib));
            for &c in &g.cpus {
                if let Some(role) = roles.get(&c) {
                    let free: Vec<usize> = online
                        .iter()
                        .copied()
                        .filter(|c| !roles.contains_key(c))
                        .collect();
                    problems.push(format!(
                        "host `{h}`: guest.cpus: CPU {c} is held by {role} in configuration `{}`: a vCPU thread pinned there would compete with it; allowed: CPUs no other role of the configuration holds ({})",
                        config.name,
                        if free.is_empty() { "none here".into() } else { benchlab_guest::spec::list(&free) }
                    ));
                }
                if let Some(other) = held.insert(c, h) {
                    if other != h {
                        problems.push(format!(
                            "host `{h}`: guest.cpus: CPU {c} is already held by guest `{other}` in configuration `{}`: give each guest CPUs of its own",
                            config.name
                        ));
                    }
                }
            }
        }
        // Each guest alone fits (its own check); together they must too,
        // within the same half of the available memory.
        if guests.len() > 1 {
            let total: u64 = guests.iter().map(|(_, m)| m).sum();
            let avail = benchlab_guest::spec::meminfo_kib("MemAvailable").unwrap_or(0) / 1024;
            if total > avail / 2 {
                let names: Vec<String> = guests
                    .iter()
                    .map(|(h, m)| format!("`{h}` {m} MiB"))
                    .collect();
                problems.push(format!(
                    "configuration `{}`: guest.memory: its guests together need {total} MiB ({}); allowed at most {} MiB in all (half of this host's {avail} MiB available)",
                    config.name,
                    names.join(", "),
                    avail / 2
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

/// The guests a configuration runs, among the hosts the run uses: each
/// study name with its `guest` table.
fn config_guests<'s>(
    study: &'s Study,
    config: &'s benchlab_core::study::Configuration,
    used: &[&String],
) -> Vec<(&'s str, &'s benchlab_core::study::GuestSpec)> {
    let mut guests = Vec::new();
    for h in study.configuration_hosts(config) {
        if !used.iter().any(|u| u.as_str() == h) {
            continue;
        }
        if let Transport::Guest(g) = &study.host(h).transport {
            guests.push((h, g));
        }
    }
    guests
}

/// The configurations whose guests' huge pages the kernel cannot give
/// together. Tried, not guessed: the largest need is asked of the kernel
/// once (journaled, given back at once, see
/// [`benchlab_guest::hugepages::probe`]); a configuration that needs more
/// than it granted is refused.
fn unreservable_hugepages<'a>(
    study: &Study,
    used: impl Iterator<Item = &'a String>,
) -> Vec<String> {
    let used: Vec<&String> = used.collect();
    // (configuration, its guests on huge pages, the pages they need)
    let mut needs: Vec<(&str, String, u64)> = Vec::new();
    for config in &study.configurations {
        let (mut hosts, mut total) = (Vec::new(), 0);
        for (h, g) in config_guests(study, config, &used) {
            let spec = benchlab_guest::Spec {
                name: h.to_string(),
                guest: g.clone(),
            };
            if spec.hugepages_needed() > 0 {
                hosts.push(format!("`{h}`"));
                total += spec.hugepages_needed();
            }
        }
        if total > 0 {
            needs.push((&config.name, hosts.join(" and "), total));
        }
    }
    let Some((config, hosts, most)) = needs.iter().max_by_key(|(_, _, n)| *n) else {
        return Vec::new();
    };
    let granted = match benchlab_guest::hugepages::probe(
        *most,
        &benchlab_env::journal::journal_dir(),
    ) {
        Ok(g) => g,
        Err(e) => {
            return vec![format!(
                "configuration `{config}`: guest.hugepages = true of host {hosts}: cannot try reserving the {most} huge pages it needs: {e}"
            )]
        }
    };
    let page_mib = benchlab_guest::spec::HUGEPAGE_KIB / 1024;
    needs
        .iter()
        .filter(|(_, _, n)| *n > granted)
        .map(|(config, hosts, n)| {
            format!(
                "configuration `{config}`: guest.hugepages = true of host {hosts} needs {n} huge pages of {page_mib} MiB ({} MiB); the kernel could give only {granted} now (tried and given back; free memory too short or too fragmented): lower guest.memory, set hugepages = false, or free memory (page cache counts as used here: `sync; echo 3 > /proc/sys/vm/drop_caches; echo 1 > /proc/sys/vm/compact_memory` frees and defragments it)",
                n * page_mib
            )
        })
        .collect()
}

/// This machine's CPUs that a configuration gives to a role other than
/// its guests, each with the key that does: its `shield` (taken from every
/// other task, a guest's vCPU threads too) when the run has a host on this
/// machine, and the `cpus` of the sides and managed services it runs on
/// local and namespace hosts (from the configuration, else its profile):
/// a side pinned to a vCPU's CPU competes with it for that CPU. Sides in a
/// guest pin the guest's own CPUs, and sides over SSH or a TCP agent
/// another machine's: neither holds this machine's. A background `load`
/// is not counted: loading the CPUs a guest runs on is what it is for.
fn cpus_held_here(
    study: &Study,
    config: &benchlab_core::study::Configuration,
    used: &[&String],
) -> BTreeMap<usize, String> {
    let here = |name: &str| {
        used.iter().any(|u| u.as_str() == name)
            && study.hosts.iter().any(|h| {
                h.name == name && matches!(h.transport, Transport::Local | Transport::Netns(_))
            })
    };
    let mut held: BTreeMap<usize, String> = BTreeMap::new();
    if let Some(shield) = &config.env.shield {
        if used.iter().any(|u| here(u)) {
            for &c in shield {
                held.entry(c)
                    .or_insert_with(|| "the shield (`shield`)".into());
            }
        }
    }
    for w in &study.workloads {
        let profile = config.env.profile_of(&w.name);
        let loaded = profile.and_then(|p| crate::profile::load_profile(study, p).ok());
        let sides = [
            ("server", &config.server, &w.servers),
            ("client", &config.client, &w.client_hosts),
        ];
        for (side, placement, hosts) in sides {
            let mut placement = placement.clone();
            let mut key = format!("`{side}.cpus`");
            if placement.cpus.is_none() {
                if let Some(l) = &loaded {
                    let s = if side == "server" {
                        &l.profile.server
                    } else {
                        &l.profile.client
                    };
                    if s.fill(&mut placement).is_ok() {
                        key = format!("profile `{}`'s `[{side}] cpus`", l.name);
                    }
                }
            }
            let Some(cpus) = placement.cpus else { continue };
            for h in hosts.iter().map(|h| config.host(h)).filter(|h| here(h)) {
                for &c in &cpus {
                    held.entry(c).or_insert_with(|| {
                        format!(
                            "{key} (the {side} side of workload `{}` on host `{h}`)",
                            w.name
                        )
                    });
                }
            }
        }
    }
    for d in config
        .services
        .iter()
        .filter(|d| d.address.is_none() && here(&d.host))
    {
        let spec = serde_json::from_value::<benchlab_service::spec::ServiceSpec>(d.spec.clone());
        for c in spec.ok().and_then(|s| s.cpus).unwrap_or_default() {
            held.entry(c)
                .or_insert_with(|| format!("service `{}`'s `cpus` (on host `{}`)", d.name, d.host));
        }
    }
    held
}
