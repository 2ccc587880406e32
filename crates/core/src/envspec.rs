//! What a configuration asks of its hosts' environment besides placement:
//! a tuning profile, CPU shielding and a background load. These are the
//! study-file forms; the `env` crate applies them (and journals every
//! change so that it can be undone).

use serde::{Deserialize, Serialize};

/// A configuration's environment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvSpec {
    /// A profile name (shipped in `profiles/`) or a path to a profile file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Profiles for some workloads only, by workload name (seed 000 tuned
    /// with throughput-performance for its stream tests and with
    /// latency-performance for its request/response tests); `profile`
    /// applies to the others.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub profile_for: std::collections::BTreeMap<String, String>,
    /// CPUs to shield: other tasks and IRQs are moved off them, and the
    /// workload sides run in an exclusive cpuset on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shield: Option<Vec<usize>>,
    /// A background load, restarted at the start of every point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadSpec>,
}

impl EnvSpec {
    /// Whether the configuration changes nothing in the environment.
    pub fn is_empty(&self) -> bool {
        self.profile.is_none()
            && self.profile_for.is_empty()
            && self.shield.is_none()
            && self.load.is_none()
    }

    /// The profile that applies to a workload's points.
    pub fn profile_of(&self, workload: &str) -> Option<&str> {
        self.profile_for
            .get(workload)
            .or(self.profile.as_ref())
            .map(String::as_str)
    }
}

/// A background load (seed 002 ran `make clean; make -j11` in a loop).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSpec {
    /// What the workers do.
    pub kind: LoadKind,
    /// How many workers run in parallel (like make's `-j`).
    pub workers: usize,
    /// CPUs the load may use; `None`: wherever the scheduler puts it
    /// (with a shield, that is off the shielded CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Vec<usize>>,
}

/// The kind of background load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadKind {
    /// The built-in load that behaves like a parallel build: CPU bursts,
    /// fork/exec of short processes, small-file writes and reads, memory
    /// churn.
    Build,
    /// A user command run with `sh -c` in a loop by every worker.
    Command(String),
}

impl LoadSpec {
    /// Human form.
    pub fn describe(&self) -> String {
        let what = match &self.kind {
            LoadKind::Build => "built-in build-like load".to_string(),
            LoadKind::Command(c) => format!("`{c}` in a loop"),
        };
        match &self.cpus {
            Some(c) => format!("{what}, {} workers on CPUs {c:?}", self.workers),
            None => format!("{what}, {} workers", self.workers),
        }
    }
}
