//! Tuning profiles: TOML files of sysctls, CPU power settings, a wake-up
//! latency limit, transparent hugepages, IRQ affinity, services to stop, a
//! tuned profile, I/O schedulers, remount options and per-side process
//! defaults. A profile is read into [`Profile`], then *resolved* on a host
//! into the list of concrete changes it means there ([`Planned`]) — which
//! is where "this host has no cpufreq" becomes a skip, or an error before
//! anything changes when the profile marks the setting `required`.

use std::collections::BTreeMap;

use benchlab_core::placement::{parse_cpu_list, Placement, SchedPolicy};
use serde::{Deserialize, Serialize};

use crate::sys;
use crate::EnvError;

/// The profiles shipped with benchlab (also in `profiles/`), built into the
/// binary so that a copied binary has them on every host.
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "throughput-performance",
        include_str!("../../../profiles/throughput-performance.toml"),
    ),
    (
        "latency-performance",
        include_str!("../../../profiles/latency-performance.toml"),
    ),
    ("storage", include_str!("../../../profiles/storage.toml")),
    ("realtime", include_str!("../../../profiles/realtime.toml")),
];

/// A parsed profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// `[profile]`: description and required settings.
    #[serde(default)]
    pub profile: Header,
    /// `[sysctl]`: name → value.
    #[serde(default)]
    pub sysctl: BTreeMap<String, toml::Value>,
    /// `[cpu]`.
    #[serde(default)]
    pub cpu: Cpu,
    /// `[memory]`.
    #[serde(default)]
    pub memory: Memory,
    /// `[[irq]]`.
    #[serde(default)]
    pub irq: Vec<Irq>,
    /// `[services]`.
    #[serde(default)]
    pub services: Services,
    /// `[tuned]`.
    #[serde(default)]
    pub tuned: Tuned,
    /// `[[block]]`.
    #[serde(default)]
    pub block: Vec<Block>,
    /// `[[remount]]`.
    #[serde(default)]
    pub remount: Vec<Remount>,
    /// `[server]`: process defaults of server sides.
    #[serde(default)]
    pub server: Side,
    /// `[client]`: process defaults of client sides.
    #[serde(default)]
    pub client: Side,
}

/// `[profile]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// Setting ids (or their prefixes: `sysctl`, `cpu.governor`,
    /// `irq.virtio*`) whose absence on a host is an error, not a skip.
    #[serde(default)]
    pub required: Vec<String>,
}

/// `[cpu]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cpu {
    /// cpufreq scaling governor of every CPU.
    pub governor: Option<String>,
    /// cpufreq `energy_performance_preference` of every CPU.
    pub energy_performance_preference: Option<String>,
    /// A wake-up latency limit (µs) held through `/dev/cpu_dma_latency`
    /// while the configuration runs (tuned's `force_latency`): keeps CPUs
    /// out of idle states slower to leave than this.
    pub dma_latency_us: Option<i32>,
}

/// `[memory]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    /// `always`, `madvise` or `never`.
    pub transparent_hugepages: Option<String>,
    /// THP defrag policy.
    pub transparent_hugepages_defrag: Option<String>,
}

/// `[[irq]]`: IRQs whose name matches a pattern go to a CPU list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Irq {
    /// Glob (`*`, `?`) over the IRQ's action names in /proc/interrupts.
    #[serde(rename = "match")]
    pub pattern: String,
    /// CPU list (`"0-3"`).
    pub cpus: String,
}

/// `[services]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Services {
    /// systemd units to stop while the configuration runs.
    #[serde(default)]
    pub stop: Vec<String>,
}

/// `[tuned]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tuned {
    /// The tuned profile to switch to (`tuned-adm profile NAME`).
    pub profile: Option<String>,
}

/// `[[block]]`: queue settings of block devices matching a pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    /// Glob over /sys/block names (`"sd*"`, `"vda"`).
    pub devices: String,
    /// I/O scheduler (`none`, `mq-deadline`, `kyber`, `bfq`).
    pub scheduler: Option<String>,
    /// Read-ahead in KiB.
    pub read_ahead_kb: Option<u32>,
}

/// `[[remount]]`: remount a mounted file system with extra options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Remount {
    /// The mount point.
    pub target: String,
    /// Options added (`"barrier=0"`).
    pub options: String,
}

/// `[server]` / `[client]`: process defaults for a side (a study's own
/// placement keys win over these).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Side {
    /// CPU list.
    pub cpus: Option<String>,
    /// Nice value.
    pub nice: Option<i32>,
    /// `fifo`, `rr` or `other`.
    pub sched: Option<String>,
    /// Real-time priority (1 … 99).
    pub priority: Option<i32>,
    /// Lock memory.
    pub mlockall: Option<bool>,
    /// NUMA node.
    pub numa_node: Option<u32>,
}

impl Side {
    /// Fills what `p` leaves unset from these defaults.
    pub fn fill(&self, p: &mut Placement) -> Result<(), String> {
        if p.cpus.is_none() {
            if let Some(c) = &self.cpus {
                p.cpus = Some(parse_cpu_list(c)?);
            }
        }
        if p.nice.is_none() {
            p.nice = self.nice;
        }
        if p.sched.is_none() {
            let prio = self.priority.unwrap_or(1);
            p.sched = match self.sched.as_deref() {
                Some("fifo") => Some((SchedPolicy::Fifo, prio)),
                Some("rr") => Some((SchedPolicy::Rr, prio)),
                _ => None,
            };
        }
        if !p.mlockall {
            p.mlockall = self.mlockall.unwrap_or(false);
        }
        if p.numa_node.is_none() {
            p.numa_node = self.numa_node;
        }
        Ok(())
    }
}

impl Profile {
    /// Parses profile text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Profile, EnvError> {
        let p: Profile = toml::from_str(text).map_err(|e| EnvError::Profile {
            file: file.into(),
            message: e.to_string().trim().to_string(),
        })?;
        let bad = |key: String, message: String| EnvError::Profile {
            file: file.into(),
            message: format!("key `{key}`: {message}"),
        };
        for (k, v) in &p.sysctl {
            if value_text(v).is_none() {
                return Err(bad(
                    format!("sysctl.{k}"),
                    "expected a string or a number".into(),
                ));
            }
        }
        for (i, irq) in p.irq.iter().enumerate() {
            parse_cpu_list(&irq.cpus).map_err(|m| bad(format!("irq[{i}].cpus"), m))?;
        }
        for (side, s) in [("server", &p.server), ("client", &p.client)] {
            if let Some(c) = &s.cpus {
                parse_cpu_list(c).map_err(|m| bad(format!("{side}.cpus"), m))?;
            }
            if let Some(sched) = &s.sched {
                if !["fifo", "rr", "other"].contains(&sched.as_str()) {
                    return Err(bad(
                        format!("{side}.sched"),
                        format!("`{sched}` is not allowed (allowed: \"fifo\", \"rr\", \"other\")"),
                    ));
                }
            }
            if let Some(pr) = s.priority {
                if !(1..=99).contains(&pr) {
                    return Err(bad(
                        format!("{side}.priority"),
                        format!("{pr} is out of range (allowed: 1 … 99)"),
                    ));
                }
            }
        }
        if let Some(t) = &p.memory.transparent_hugepages {
            if !["always", "madvise", "never"].contains(&t.as_str()) {
                return Err(bad(
                    "memory.transparent_hugepages".into(),
                    format!("`{t}` is not allowed (allowed: \"always\", \"madvise\", \"never\")"),
                ));
            }
        }
        if let Some(l) = p.cpu.dma_latency_us {
            if l < 0 {
                return Err(bad("cpu.dma_latency_us".into(), "must be ≥ 0 (µs)".into()));
            }
        }
        Ok(p)
    }

    /// Finds a profile by name among the shipped ones, else reads it as a
    /// path (relative paths from `base`, the study file's directory).
    /// Returns its name and text.
    pub fn locate(
        name: &str,
        base: Option<&std::path::Path>,
    ) -> Result<(String, String), EnvError> {
        if let Some((n, t)) = SHIPPED.iter().find(|(n, _)| *n == name) {
            return Ok((n.to_string(), t.to_string()));
        }
        let mut path = std::path::PathBuf::from(name);
        if path.is_relative() {
            if let Some(b) = base {
                path = b.join(path);
            }
        }
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok((name.to_string(), t)),
            Err(e) => Err(EnvError::Profile {
                file: name.into(),
                message: format!(
                    "no such profile ({}: {e}; shipped: {})",
                    path.display(),
                    SHIPPED
                        .iter()
                        .map(|(n, _)| format!("\"{n}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }

    /// Whether `id` is marked required.
    pub fn is_required(&self, id: &str) -> bool {
        self.profile
            .required
            .iter()
            .any(|r| id == r || id.starts_with(&format!("{r}.")) || glob(r, id))
    }

    /// What the profile means on this host.
    pub fn resolve(&self) -> Vec<Planned> {
        let mut out = Vec::new();
        let mut push = |id: String, setting: String, action: Action| {
            let required = self.is_required(&id);
            out.push(Planned {
                id,
                setting,
                action,
                required,
            });
        };
        for (name, value) in &self.sysctl {
            let path = sys::sysctl_path(name);
            let action = if std::path::Path::new(&path).exists() {
                Action::File {
                    path,
                    value: value_text(value).unwrap_or_default(),
                }
            } else {
                Action::Unsupported(format!("this kernel has no sysctl {name}"))
            };
            push(format!("sysctl.{name}"), format!("sysctl {name}"), action);
        }
        let cpufreq = cpufreq_files();
        for (key, want) in [
            ("governor", &self.cpu.governor),
            (
                "energy_performance_preference",
                &self.cpu.energy_performance_preference,
            ),
        ] {
            let Some(want) = want else { continue };
            let file = if key == "governor" {
                "scaling_governor"
            } else {
                "energy_performance_preference"
            };
            let files: Vec<(usize, String)> = cpufreq
                .iter()
                .map(|(cpu, dir)| (*cpu, format!("{dir}/{file}")))
                .filter(|(_, f)| std::path::Path::new(f).exists())
                .collect();
            if files.is_empty() {
                push(
                    format!("cpu.{key}"),
                    format!("cpu {key}"),
                    Action::Unsupported(format!(
                        "this host has no cpufreq {file} (no CPU frequency driver: common in VMs)"
                    )),
                );
            }
            for (cpu, f) in files {
                push(
                    format!("cpu.{key}"),
                    format!("cpu{cpu} {key}"),
                    Action::File {
                        path: f,
                        value: want.clone(),
                    },
                );
            }
        }
        if let Some(us) = self.cpu.dma_latency_us {
            let action = if std::path::Path::new("/dev/cpu_dma_latency").exists() {
                Action::DmaLatency(us)
            } else {
                Action::Unsupported("this host has no /dev/cpu_dma_latency".into())
            };
            push(
                "cpu.dma_latency_us".into(),
                "cpu_dma_latency (µs, held)".into(),
                action,
            );
        }
        for (key, file, want) in [
            (
                "transparent_hugepages",
                "enabled",
                &self.memory.transparent_hugepages,
            ),
            (
                "transparent_hugepages_defrag",
                "defrag",
                &self.memory.transparent_hugepages_defrag,
            ),
        ] {
            let Some(want) = want else { continue };
            let path = format!("/sys/kernel/mm/transparent_hugepage/{file}");
            let action = if std::path::Path::new(&path).exists() {
                Action::File {
                    path,
                    value: want.clone(),
                }
            } else {
                Action::Unsupported("this kernel has no transparent hugepages".into())
            };
            push(format!("memory.{key}"), format!("THP {file}"), action);
        }
        let irqs = interrupts();
        for irq in &self.irq {
            let matched: Vec<&(u32, String)> = irqs
                .iter()
                .filter(|(_, names)| {
                    names
                        .split([',', ' '])
                        .any(|n| glob(&irq.pattern, n.trim()))
                })
                .collect();
            if matched.is_empty() {
                push(
                    format!("irq.{}", irq.pattern),
                    format!("IRQs `{}`", irq.pattern),
                    Action::Unsupported(format!("no IRQ here matches `{}`", irq.pattern)),
                );
            }
            for (n, names) in matched {
                push(
                    format!("irq.{}", irq.pattern),
                    format!("IRQ {n} ({names}) affinity"),
                    Action::File {
                        path: format!("/proc/irq/{n}/smp_affinity_list"),
                        value: irq.cpus.clone(),
                    },
                );
            }
        }
        for svc in &self.services.stop {
            let action = if !sys::systemd_running() {
                Action::Unsupported("systemd does not run this host".into())
            } else {
                Action::StopService(svc.clone())
            };
            push(format!("services.{svc}"), format!("service {svc}"), action);
        }
        if let Some(t) = &self.tuned.profile {
            let action = if sys::have_command("tuned-adm") {
                Action::Tuned(t.clone())
            } else {
                Action::Unsupported("tuned is not installed (no tuned-adm)".into())
            };
            push("tuned".into(), "tuned profile".into(), action);
        }
        let devices: Vec<String> = std::fs::read_dir("/sys/block")
            .map(|rd| {
                rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        for b in &self.block {
            let mut matched: Vec<&String> =
                devices.iter().filter(|d| glob(&b.devices, d)).collect();
            matched.sort();
            for (key, file, want) in [
                ("scheduler", "scheduler", b.scheduler.clone()),
                (
                    "read_ahead_kb",
                    "read_ahead_kb",
                    b.read_ahead_kb.map(|k| k.to_string()),
                ),
            ] {
                let Some(want) = want else { continue };
                let id = format!("block.{}.{key}", b.devices);
                if matched.is_empty() {
                    push(
                        id.clone(),
                        format!("block `{}` {key}", b.devices),
                        Action::Unsupported(format!("no block device matches `{}`", b.devices)),
                    );
                }
                for d in &matched {
                    let path = format!("/sys/block/{d}/queue/{file}");
                    let action = match std::fs::read_to_string(&path) {
                        Ok(cur)
                            if key == "scheduler"
                                && !cur
                                    .split_whitespace()
                                    .any(|w| w.trim_matches(['[', ']']) == want) =>
                        {
                            Action::Unsupported(format!(
                                "{d} offers no scheduler `{want}` (offered: {})",
                                cur.trim()
                            ))
                        }
                        Ok(_) => Action::File {
                            path,
                            value: want.clone(),
                        },
                        Err(_) => Action::Unsupported(format!("{path} does not exist")),
                    };
                    push(id.clone(), format!("{d} {key}"), action);
                }
            }
        }
        for r in &self.remount {
            let action = if mount_options(&r.target).is_some() {
                Action::Remount {
                    target: r.target.clone(),
                    options: r.options.clone(),
                }
            } else {
                Action::Unsupported(format!("nothing is mounted at {}", r.target))
            };
            push(
                format!("remount.{}", r.target),
                format!("mount {}", r.target),
                action,
            );
        }
        out
    }
}

/// One concrete change a profile means on a host.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Dotted id (`sysctl.net.core.rmem_max`), matched by `required`.
    pub id: String,
    /// Human name.
    pub setting: String,
    /// What to do.
    pub action: Action,
    /// Whether the profile requires it.
    pub required: bool,
}

/// What a planned change does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Write a value to a /proc or /sys file.
    File {
        /// The file.
        path: String,
        /// The value.
        value: String,
    },
    /// Hold `/dev/cpu_dma_latency` at this many µs.
    DmaLatency(i32),
    /// `systemctl stop`.
    StopService(String),
    /// `tuned-adm profile`.
    Tuned(String),
    /// `mount -o remount,OPTIONS TARGET`.
    Remount {
        /// Mount point.
        target: String,
        /// Added options.
        options: String,
    },
    /// The host lacks this: why.
    Unsupported(String),
}

fn value_text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(if *b { "1" } else { "0" }.into()),
        _ => None,
    }
}

/// `(cpu, /sys/devices/system/cpu/cpuN/cpufreq)` for every CPU that has one.
fn cpufreq_files() -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = std::fs::read_dir("/sys/devices/system/cpu")
        .map(|rd| {
            rd.filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                let n: usize = name.strip_prefix("cpu")?.parse().ok()?;
                let dir = format!("/sys/devices/system/cpu/{name}/cpufreq");
                std::path::Path::new(&dir).is_dir().then_some((n, dir))
            })
            .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Numbered IRQs from /proc/interrupts with their action names (the text
/// after the chip and trigger columns).
pub fn interrupts() -> Vec<(u32, String)> {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| h.split_whitespace().count())
        .unwrap_or(0);
    lines
        .filter_map(|l| {
            let (num, rest) = l.trim_start().split_once(':')?;
            let n: u32 = num.trim().parse().ok()?;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // counts per CPU, chip, hwirq+trigger, then the names.
            let names = fields.get(ncpu + 2..)?.join(" ");
            Some((n, names))
        })
        .collect()
}

/// Options of the file system mounted at `target` (mount + super options,
/// from /proc/self/mountinfo), `None` when nothing is mounted there.
pub fn mount_options(target: &str) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let target = target.trim_end_matches('/');
    let target = if target.is_empty() { "/" } else { target };
    // The last mount on a mount point is the visible one.
    info.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let sep = f.iter().position(|x| *x == "-")?;
        let sup = f.get(sep + 3)?;
        (f.get(4)? == &target).then(|| format!("{},{}", f[5], sup))
    })
}

/// A tiny glob: `*` any run, `?` any one character.
pub fn glob(pattern: &str, text: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], t) || (!t.is_empty() && go(p, &t[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &t[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &t[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    go(&p, &t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_profiles_parse() {
        for (name, text) in SHIPPED {
            Profile::parse(name, text).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let e = Profile::parse("p.toml", "[cpu]\ngovernour = \"performance\"\n").unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("p.toml") && m.contains("governour") && m.contains("governor"),
            "{m}"
        );
        let e = Profile::parse("p.toml", "[[irq]]\nmatch = \"x\"\ncpus = \"3-1\"\n").unwrap_err();
        assert!(e.to_string().contains("irq[0].cpus"), "{e}");
    }

    #[test]
    fn globs_and_required() {
        assert!(glob("virtio*-input*", "virtio2-input.0"));
        assert!(!glob("virtio*-input", "virtio2-input.0"));
        assert!(glob("vd?", "vda"));
        let p = Profile::parse(
            "p",
            "[profile]\nrequired = [\"sysctl\", \"cpu.governor\"]\n",
        )
        .unwrap();
        assert!(p.is_required("sysctl.net.core.rmem_max"));
        assert!(p.is_required("cpu.governor"));
        assert!(!p.is_required("cpu.dma_latency_us"));
        assert!(!p.is_required("sysctlx"));
    }

    #[test]
    fn side_defaults_fill_only_what_the_study_left_out() {
        let p = Profile::parse(
            "p",
            "[server]\nsched = \"fifo\"\npriority = 3\ncpus = \"1\"\nmlockall = true\nnice = 5\n",
        )
        .unwrap();
        let mut placement = Placement {
            cpus: Some(vec![0]),
            ..Default::default()
        };
        p.server.fill(&mut placement).unwrap();
        assert_eq!(placement.cpus, Some(vec![0]));
        assert_eq!(placement.sched, Some((SchedPolicy::Fifo, 3)));
        assert_eq!(placement.nice, Some(5));
        assert!(placement.mlockall);
        let mut client = Placement::default();
        p.client.fill(&mut client).unwrap();
        assert_eq!(client, Placement::default());
    }

    #[test]
    fn unsupported_settings_resolve_to_skips() {
        let p = Profile::parse(
            "p",
            "[sysctl]\n\"net.core.no_such_thing\" = 1\n[[irq]]\nmatch = \"no-such-irq*\"\ncpus = \"0\"\n",
        )
        .unwrap();
        let r = p.resolve();
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|x| matches!(x.action, Action::Unsupported(_))));
    }
}
