//! `[[host]]`: where a side of a workload runs and how the controller
//! reaches its agent.

use super::guest::GuestSpec;
use super::values::type_name;
use super::{Ctx, DeValue, StudyError, Tab, Val};

/// How the controller reaches a host's agent.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// A child process on this machine.
    Local,
    /// A child process in a network namespace (`ip netns exec NAME`).
    Netns(String),
    /// A TCP connection to `benchlab agent --listen ADDRESS`, authenticated
    /// with a shared key (hosts without SSH).
    Tcp {
        /// The agent's `host:port`.
        agent: String,
        /// The file holding the shared key.
        key_file: String,
    },
    /// A QEMU guest benchlab boots on this machine for the
    /// configurations that use it; its agents are reached over the
    /// guest's control port (crates/guest).
    Guest(GuestSpec),
    /// `ssh DESTINATION benchlab agent --stdio`.
    Ssh {
        /// `user@host` or a host alias of the user's ssh config.
        destination: String,
        /// `-p PORT`.
        port: Option<u16>,
        /// `-i FILE`.
        identity: Option<String>,
        /// Extra arguments before the destination (`["-o", "Foo=bar"]`).
        options: Vec<String>,
    },
}

/// One `[[host]]`: where a side of a workload runs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Host {
    /// Name used by workloads' `server`, `client` and `targets`.
    pub name: String,
    /// The control route.
    pub transport: Transport,
    /// The data address the other side connects to (an IP address or a
    /// host name, resolved by the controller); `None`: 127.0.0.1 for local
    /// hosts, the SSH destination's host for SSH hosts.
    pub address: Option<String>,
    /// A fixed data port for server sides (0: any free port).
    pub data_port: u16,
    /// The benchlab binary on that host (default: this binary's path for
    /// local and namespace hosts, `benchlab` on the PATH over SSH).
    pub benchlab: Option<String>,
    /// Copy this binary there when it is missing or of another version.
    pub deploy: bool,
}

/// Names of the hosts workloads use when they name none.
pub const DEFAULT_SERVER_HOST: &str = "sut";
/// See [`DEFAULT_SERVER_HOST`].
pub const DEFAULT_CLIENT_HOST: &str = "generator";

const HOST_KEYS: &[&str] = &[
    "name",
    "local",
    "netns",
    "ssh",
    "port",
    "identity",
    "ssh_options",
    "agent",
    "key_file",
    "address",
    "data_port",
    "benchlab",
    "deploy",
    "guest",
];

impl Ctx<'_> {
    /// `[[host]]`, plus the local `sut` and `generator` when not defined.
    pub(super) fn hosts(&self, doc: &Tab) -> Result<Vec<Host>, StudyError> {
        let mut hosts: Vec<Host> = Vec::new();
        if let Some(v) = doc.get("host") {
            let items = match v.get_ref() {
                DeValue::Array(a) => a,
                _ => {
                    return Err(self.err(
                        v.span(),
                        "host",
                        "expected [[host]] entries (a list of tables)",
                    ))
                }
            };
            for (i, item) in items.iter().enumerate() {
                let path = format!("host[{i}]");
                let host = self.host(item, &path)?;
                if hosts.iter().any(|h| h.name == host.name) {
                    let span = self
                        .table(item, &path)?
                        .get("name")
                        .map(|n| n.span())
                        .unwrap_or(item.span());
                    return Err(self.err(
                        span,
                        &format!("{path}.name"),
                        format!(
                            "host `{}` is defined twice: names must be unique",
                            host.name
                        ),
                    ));
                }
                hosts.push(host);
            }
        }
        for name in [DEFAULT_SERVER_HOST, DEFAULT_CLIENT_HOST] {
            if !hosts.iter().any(|h| h.name == name) {
                hosts.push(Host {
                    name: name.to_string(),
                    transport: Transport::Local,
                    address: None,
                    data_port: 0,
                    benchlab: None,
                    deploy: false,
                });
            }
        }
        Ok(hosts)
    }

    /// One `[[host]]` table.
    pub(super) fn host(&self, item: &Val, path: &str) -> Result<Host, StudyError> {
        let t = self.table(item, path)?;
        self.check_keys(t, path, HOST_KEYS)?;
        let name = self.host_name(t, item, path)?;
        let transport = self.transport(t, path)?;
        let key = |k: &str| format!("{path}.{k}");
        let address = t
            .get("address")
            .map(|v| self.string(v, &key("address")))
            .transpose()?;
        // A guest's data address is its NIC's unless given.
        let address = match (&address, &transport) {
            (None, Transport::Guest(g)) => g.net.ip().split('/').next().map(str::to_string),
            _ => address,
        };
        if address.is_none() {
            if let Transport::Netns(_) = transport {
                return Err(self.err(item.span(), &key("address"), "missing: a namespace host needs the data address other hosts reach it at (e.g. \"10.203.0.1\")"));
            }
        }
        let data_port = match t.get("data_port") {
            Some(p) => {
                let n = self.int(p, &key("data_port"))?;
                if !(0..=65535).contains(&n) {
                    return Err(self.err(
                        p.span(),
                        &key("data_port"),
                        format!("{n} is not a port (0 … 65535; 0 = any)"),
                    ));
                }
                n as u16
            }
            None => 0,
        };
        let benchlab = t
            .get("benchlab")
            .map(|v| self.string(v, &key("benchlab")))
            .transpose()?;
        let deploy = match t.get("deploy") {
            Some(v) => match v.get_ref() {
                DeValue::Boolean(b) => *b,
                other => {
                    return Err(self.err(
                        v.span(),
                        &key("deploy"),
                        format!("expected true or false, found {}", type_name(other)),
                    ))
                }
            },
            None => false,
        };
        Ok(Host {
            name,
            transport,
            address,
            data_port,
            benchlab,
            deploy,
        })
    }

    /// `name`: present and not empty.
    pub(super) fn host_name(&self, t: &Tab, item: &Val, path: &str) -> Result<String, StudyError> {
        let key = format!("{path}.name");
        let name = match t.get("name") {
            Some(n) => self.string(n, &key)?,
            None => return Err(self.err(item.span(), &key, "missing: every host needs a name")),
        };
        if name.trim().is_empty() {
            return Err(self.err(t.get("name").unwrap().span(), &key, "must not be empty"));
        }
        Ok(name)
    }

    /// The control route: at most one of `local`, `netns`, `ssh`, `agent`
    /// (none: local), with only the keys that route takes.
    pub(super) fn transport(&self, t: &Tab, path: &str) -> Result<Transport, StudyError> {
        let key = |k: &str| format!("{path}.{k}");
        let routes: Vec<&str> = ["local", "netns", "ssh", "agent", "guest"]
            .into_iter()
            .filter(|k| t.get(*k).is_some())
            .collect();
        if routes.len() > 1 {
            let span = t.get(routes[1]).unwrap().span();
            return Err(self.err(
                span,
                &key(routes[1]),
                format!(
                    "a host is reached one way: give only one of local, netns, ssh, agent, guest (found {})",
                    routes.join(", ")
                ),
            ));
        }
        if routes.first() != Some(&"agent") {
            if let Some(v) = t.get("key_file") {
                return Err(self.err(
                    v.span(),
                    &key("key_file"),
                    "only hosts with `agent = \"host:port\"` take this key",
                ));
            }
        }
        if routes.first() != Some(&"ssh") {
            for k in ["port", "identity", "ssh_options"] {
                if let Some(v) = t.get(k) {
                    return Err(self.err(
                        v.span(),
                        &key(k),
                        "only SSH hosts (`ssh = \"user@host\"`) take this key",
                    ));
                }
            }
        }
        match routes.first() {
            None => Ok(Transport::Local),
            Some(&"local") => {
                let v = t.get("local").unwrap();
                match v.get_ref() {
                    DeValue::Boolean(true) => Ok(Transport::Local),
                    _ => Err(self.err(
                        v.span(),
                        &key("local"),
                        "expected `local = true` (or leave it out)",
                    )),
                }
            }
            Some(&"agent") => self.agent_transport(t, path),
            Some(&"guest") => Ok(Transport::Guest(self.guest(t.get("guest").unwrap(), path)?)),
            Some(&"netns") => {
                let v = t.get("netns").unwrap();
                let ns = self.string(v, &key("netns"))?;
                if ns.is_empty() || ns.contains('/') {
                    return Err(self.err(
                        v.span(),
                        &key("netns"),
                        "expected a network namespace name (see `ip netns list`)",
                    ));
                }
                Ok(Transport::Netns(ns))
            }
            _ => self.ssh_transport(t, path),
        }
    }

    /// `agent = "host:port"` with its `key_file`.
    pub(super) fn agent_transport(&self, t: &Tab, path: &str) -> Result<Transport, StudyError> {
        let key = |k: &str| format!("{path}.{k}");
        let v = t.get("agent").unwrap();
        let agent = self.string(v, &key("agent"))?;
        if !agent.contains(':') {
            return Err(self.err(
                v.span(),
                &key("agent"),
                "expected the `host:port` a `benchlab agent --listen` serves on",
            ));
        }
        let key_file =
            match t.get("key_file") {
                Some(k) => self.string(k, &key("key_file"))?,
                None => return Err(self.err(
                    v.span(),
                    &key("key_file"),
                    "missing: an agent reached over TCP needs `key_file`, the shared key it checks",
                )),
            };
        Ok(Transport::Tcp { agent, key_file })
    }

    /// `ssh = "DESTINATION"` with its `port`, `identity` and `ssh_options`.
    pub(super) fn ssh_transport(&self, t: &Tab, path: &str) -> Result<Transport, StudyError> {
        let key = |k: &str| format!("{path}.{k}");
        let v = t.get("ssh").unwrap();
        let destination = self.string(v, &key("ssh"))?;
        if destination.is_empty() || destination.starts_with('-') {
            return Err(self.err(
                v.span(),
                &key("ssh"),
                "expected an SSH destination such as \"root@10.0.0.2\" or a host alias",
            ));
        }
        let port = match t.get("port") {
            Some(p) => {
                let n = self.int(p, &key("port"))?;
                if !(1..=65535).contains(&n) {
                    return Err(self.err(
                        p.span(),
                        &key("port"),
                        format!("{n} is not a port (1 … 65535)"),
                    ));
                }
                Some(n as u16)
            }
            None => None,
        };
        let identity = t
            .get("identity")
            .map(|v| self.string(v, &key("identity")))
            .transpose()?;
        let mut options = Vec::new();
        if let Some(v) = t.get("ssh_options") {
            match v.get_ref() {
                DeValue::Array(a) => {
                    for (j, o) in a.iter().enumerate() {
                        options.push(self.string(o, &format!("{}[{j}]", key("ssh_options")))?);
                    }
                }
                _ => {
                    return Err(self.err(
                        v.span(),
                        &key("ssh_options"),
                        "expected a list of ssh arguments, e.g. [\"-o\", \"ConnectTimeout=5\"]",
                    ))
                }
            }
        }
        Ok(Transport::Ssh {
            destination,
            port,
            identity,
            options,
        })
    }
}
