//! `[[configuration]]`: the columns of every table — placements, profile,
//! shielding, background load, and what later sections complete (`set`,
//! `service` and `hosts`).

use super::{Ctx, DeValue, ServiceDecl, StudyError, Tab, Val};
use crate::envspec::{EnvSpec, LoadKind, LoadSpec};
use crate::placement::{parse_cpu_list, Placement, SchedPolicy};

/// One `[[configuration]]`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Configuration {
    /// The study's services as this configuration runs them (its
    /// `service.NAME` overrides applied).
    #[serde(default)]
    pub services: Vec<ServiceDecl>,
    /// Unique name; a table column.
    pub name: String,
    /// Free text.
    pub description: String,
    /// Placement of server sides.
    pub server: Placement,
    /// Placement of client sides.
    pub client: Placement,
    /// Profile, shielding and background load.
    pub env: EnvSpec,
    /// `hosts = { b1 = "b1-direct" }`: within this configuration, every
    /// workload side and service placed on a key's host runs on the
    /// mapped host instead (seed 003's bridged vs passthrough networking
    /// as two test beds). Workloads and reports keep the study's names
    /// (`metric@b1`), so the configurations' columns line up; empty: the
    /// study's hosts as they are. Plans stored before this key read as
    /// empty.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub hosts: std::collections::BTreeMap<String, String>,
}

impl Configuration {
    /// The host that a side or service the study places on `name` runs
    /// on in this configuration (`name` itself unless `hosts` maps it).
    pub fn host<'a>(&'a self, name: &'a str) -> &'a str {
        self.hosts.get(name).map(String::as_str).unwrap_or(name)
    }
}

/// `[[configuration]]`s with what later sections complete: their `set`
/// tables (checked against the workloads' parameters) and `service`
/// overrides (checked against the services).
pub(super) struct Configs<'i> {
    pub(super) list: Vec<Configuration>,
    pub(super) sets: Vec<Vec<(String, Val<'i>)>>,
    pub(super) services: Vec<Option<Val<'i>>>,
    /// Each configuration's `hosts` table, read once the hosts and
    /// workloads are known.
    pub(super) hosts: Vec<Option<Val<'i>>>,
}

const CONFIG_KEYS: &[&str] = &[
    "name",
    "description",
    "server",
    "client",
    "set",
    "profile",
    "shield",
    "load",
    "service",
    "hosts",
];
const PLACEMENT_KEYS: &[&str] = &[
    "cpus",
    "nice",
    "sched",
    "priority",
    "numa_node",
    "mlockall",
    "launcher",
];
const LOAD_KEYS: &[&str] = &["kind", "workers", "command", "cpus"];
const SCHEDS: &[&str] = &["fifo", "rr", "other"];

impl Ctx<'_> {
    /// `[[configuration]]` (a default one when there is none).
    pub(super) fn configurations<'i>(&self, doc: &Tab<'i>) -> Result<Configs<'i>, StudyError> {
        let mut configurations = Vec::new();
        let mut config_sets: Vec<Vec<(String, Val)>> = Vec::new();
        let mut config_services: Vec<Option<Val>> = Vec::new();
        let mut config_hosts: Vec<Option<Val>> = Vec::new();
        if let Some(v) = doc.get("configuration") {
            let items = match v.get_ref() {
                DeValue::Array(a) => a,
                _ => {
                    return Err(self.err(
                        v.span(),
                        "configuration",
                        "expected [[configuration]] entries (a list of tables)",
                    ))
                }
            };
            for (i, item) in items.iter().enumerate() {
                let path = format!("configuration[{i}]");
                let t = self.table(item, &path)?;
                self.check_keys(t, &path, CONFIG_KEYS)?;
                let name = match t.get("name") {
                    Some(n) => self.string(n, &format!("{path}.name"))?,
                    None => {
                        return Err(self.err(
                            item.span(),
                            &format!("{path}.name"),
                            "missing: every configuration needs a name",
                        ))
                    }
                };
                if name.trim().is_empty() {
                    return Err(self.err(
                        t.get("name").unwrap().span(),
                        &format!("{path}.name"),
                        "must not be empty",
                    ));
                }
                if configurations
                    .iter()
                    .any(|c: &Configuration| c.name == name)
                {
                    return Err(self.err(
                        t.get("name").unwrap().span(),
                        &format!("{path}.name"),
                        format!("configuration `{name}` is defined twice: names must be unique"),
                    ));
                }
                let description = match t.get("description") {
                    Some(d) => self.string(d, &format!("{path}.description"))?,
                    None => String::new(),
                };
                let mut sides = [Placement::default(), Placement::default()];
                for (side, slot) in ["server", "client"].iter().zip(sides.iter_mut()) {
                    if let Some(p) = t.get(*side) {
                        *slot = self.placement(p, &format!("{path}.{side}"))?;
                    }
                }
                let mut set = Vec::new();
                if let Some(s) = t.get("set") {
                    let st = self.table(s, &format!("{path}.set"))?;
                    for (k, v) in st.iter() {
                        set.push((k.get_ref().to_string(), v.clone()));
                    }
                }
                config_sets.push(set);
                config_services.push(t.get("service").cloned());
                config_hosts.push(t.get("hosts").cloned());
                let env = self.env(t, &path)?;
                let [server, client] = sides;
                configurations.push(Configuration {
                    services: Vec::new(),
                    name,
                    description,
                    server,
                    client,
                    env,
                    hosts: Default::default(),
                });
            }
        }
        if configurations.is_empty() {
            config_services.push(None);
            config_hosts.push(None);
            configurations.push(Configuration {
                services: Vec::new(),
                name: "default".into(),
                description: "the system as it is".into(),
                server: Placement::default(),
                client: Placement::default(),
                env: EnvSpec::default(),
                hosts: Default::default(),
            });
            config_sets.push(Vec::new());
        }

        Ok(Configs {
            list: configurations,
            sets: config_sets,
            services: config_services,
            hosts: config_hosts,
        })
    }

    pub(super) fn placement(&self, v: &Val, path: &str) -> Result<Placement, StudyError> {
        let t = self.table(v, path)?;
        self.check_keys(t, path, PLACEMENT_KEYS)?;
        let mut p = Placement::default();
        if let Some(c) = t.get("cpus") {
            let key = format!("{path}.cpus");
            let text = match c.get_ref() {
                DeValue::Integer(_) => self.int(c, &key)?.to_string(),
                _ => self.string(c, &key)?,
            };
            p.cpus = Some(parse_cpu_list(&text).map_err(|m| self.err(c.span(), &key, m))?);
        }
        if let Some(n) = t.get("nice") {
            let key = format!("{path}.nice");
            let nice = self.int(n, &key)?;
            if !(-20..=19).contains(&nice) {
                return Err(self.err(
                    n.span(),
                    &key,
                    format!("{nice} is out of range (allowed: -20 … 19)"),
                ));
            }
            p.nice = Some(nice as i32);
        }
        let policy = match t.get("sched") {
            Some(v) => Some(self.choice(v, &format!("{path}.sched"), SCHEDS)?),
            None => None,
        };
        match (policy.as_deref(), t.get("priority")) {
            (Some("fifo" | "rr"), prio) => {
                let prio = match prio {
                    Some(v) => {
                        let key = format!("{path}.priority");
                        let n = self.int(v, &key)?;
                        if !(1..=99).contains(&n) {
                            return Err(self.err(
                                v.span(),
                                &key,
                                format!("{n} is out of range (allowed: 1 … 99)"),
                            ));
                        }
                        n as i32
                    }
                    // chrt's and seed 002's `run -s fifo -P 1`.
                    None => 1,
                };
                let pol = if policy.as_deref() == Some("fifo") {
                    SchedPolicy::Fifo
                } else {
                    SchedPolicy::Rr
                };
                p.sched = Some((pol, prio));
            }
            (_, Some(v)) => {
                return Err(self.err(
                    v.span(),
                    &format!("{path}.priority"),
                    "a priority needs a real-time policy (allowed: sched = \"fifo\" or \"rr\")",
                ))
            }
            _ => {}
        }
        if let Some(v) = t.get("numa_node") {
            let key = format!("{path}.numa_node");
            let n = self.int(v, &key)?;
            if !(0..1024).contains(&n) {
                return Err(self.err(v.span(), &key, "must be a node number (0 … 1023)"));
            }
            p.numa_node = Some(n as u32);
        }
        if let Some(v) = t.get("mlockall") {
            p.mlockall = self.boolean(v, &format!("{path}.mlockall"))?;
        }
        if let Some(v) = t.get("launcher") {
            p.launcher = self.words(v, &format!("{path}.launcher"))?;
        }
        Ok(p)
    }

    /// `profile`, `shield` and `load` of a configuration.
    pub(super) fn env(&self, t: &Tab, path: &str) -> Result<EnvSpec, StudyError> {
        let mut env = EnvSpec::default();
        if let Some(v) = t.get("profile") {
            let key = format!("{path}.profile");
            let named = |v: &Val, key: &str| -> Result<String, StudyError> {
                let name = self.string(v, key).map_err(|mut e| {
                    e.message = format!(
                        "{} (allowed: a profile name or file, or a table of them by workload name)",
                        e.message
                    );
                    e
                })?;
                if name.trim().is_empty() {
                    return Err(self.err(v.span(), key, "must name a profile or a profile file"));
                }
                Ok(name)
            };
            match v.get_ref() {
                DeValue::Table(pt) => {
                    for (k, pv) in pt.iter() {
                        let name = named(pv, &format!("{key}.{}", k.get_ref()))?;
                        if k.get_ref() == "default" {
                            env.profile = Some(name);
                        } else {
                            env.profile_for.insert(k.get_ref().to_string(), name);
                        }
                    }
                }
                _ => env.profile = Some(named(v, &key)?),
            }
        }
        if let Some(v) = t.get("shield") {
            let key = format!("{path}.shield");
            // Checked against the host's CPUs when applied: the hosts of a
            // study need not look like the machine that validates it.
            let cpus = self.cpu_list(v, &key)?;
            env.shield = Some(cpus);
        }
        if let Some(v) = t.get("load") {
            let key = format!("{path}.load");
            let lt = self.table(v, &key)?;
            self.check_keys(lt, &key, LOAD_KEYS)?;
            let kind = match lt.get("kind") {
                Some(k) => self.choice(k, &format!("{key}.kind"), &["build", "command"])?,
                None if lt.get("command").is_some() => "command".into(),
                None => "build".into(),
            };
            let kind = match (kind.as_str(), lt.get("command")) {
                ("command", Some(c)) => {
                    let c = self.string(c, &format!("{key}.command"))?;
                    if c.trim().is_empty() {
                        return Err(self.err(v.span(), &format!("{key}.command"), "must not be empty"));
                    }
                    LoadKind::Command(c)
                }
                ("command", None) => {
                    return Err(self.err(
                        v.span(),
                        &format!("{key}.command"),
                        "missing: kind = \"command\" needs the command to run in a loop",
                    ))
                }
                (_, Some(c)) => {
                    return Err(self.err(
                        c.span(),
                        &format!("{key}.command"),
                        "only kind = \"command\" runs a command (the built-in load is kind = \"build\")",
                    ))
                }
                _ => LoadKind::Build,
            };
            let workers = match lt.get("workers") {
                Some(w) => self.count(w, &format!("{key}.workers"), 1)? as usize,
                // Like `make -j(N+1)`: one more worker than CPUs keeps
                // every CPU busy while one worker waits on I/O.
                None => crate::placement::online_cpus() + 1,
            };
            let cpus = match lt.get("cpus") {
                Some(c) => Some(self.cpu_list(c, &format!("{key}.cpus"))?),
                None => None,
            };
            env.load = Some(LoadSpec {
                kind,
                workers,
                cpus,
            });
        }
        Ok(env)
    }
}
