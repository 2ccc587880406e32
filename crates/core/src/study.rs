//! Study files: TOML read in two stages. Stage one turns the text into
//! typed values, checking every key and value against what is allowed;
//! stage two checks what spans keys (names, sweeps, each workload's own
//! cross-parameter rules) on every expanded point. Nothing runs until both
//! stages pass, and every error names the file, line, key and what is
//! allowed.

use std::fmt;

mod compare;
mod configurations;
mod crosscheck;
mod defaults;
mod design;
mod guest;
mod header;
mod hostmap;
mod hosts;
mod lab;
mod monitors;
mod only;
mod order;
mod services;
mod stacks;
mod steps;
mod values;
mod workloads;

pub use compare::Comparison;
pub use configurations::Configuration;
pub use crosscheck::Crosscheck;
pub use defaults::{
    Adaptive, Defaults, OnError, Selection, DEFAULT_DURATION_S, DEFAULT_QUIESCE_S,
    DEFAULT_REPETITIONS, DEFAULT_WARMUP_S, MAX_REPETITIONS,
};
pub use design::{
    parse_duration, Design, DesignKind, Margins, DEFAULT_MARGIN_PCT, DEFAULT_MAX_REPETITIONS,
    DESIGNS, MIN_REPETITIONS_TO_DECIDE,
};
pub use guest::{is_kernel_release, Accel, GuestNet, GuestSpec, EMULATED};
pub use header::{Order, DEFAULT_BLOCKS};
pub use hosts::{Host, Transport, DEFAULT_CLIENT_HOST, DEFAULT_SERVER_HOST};
pub use lab::{lab_hosts, HOST_SPEC_FORMS};
pub use monitors::{Monitors, DEFAULT_MONITOR_INTERVAL_S};
pub use only::{LeftOut, Only, ONLY_KEYS};
pub use order::CONTROL_NAME;
pub use services::ServiceDecl;
pub use stacks::{StackRepetitions, Stacks, Unwind, DEFAULT_STACKS_HZ, MAX_STACKS_HZ};
pub use steps::{Step, StepStatus};
pub use workloads::{WorkloadEntry, MAX_POINTS};

use configurations::Configs;
use header::Header;
use toml::de::{DeTable, DeValue};
use values::{Ctx, Tab, Val};
use workloads::Known;

use crate::workload::Registry;

/// A study-file error, with where it is and what would be allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct StudyError {
    /// The file name as given.
    pub file: String,
    /// 1-based line (0 when unknown).
    pub line: usize,
    /// 1-based column (0 when unknown).
    pub column: usize,
    /// The key path, e.g. `workload[2].message_size`.
    pub key: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl fmt::Display for StudyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Line 0: the error is not in a file's text (a command-line
        // option, an unreadable file), so no position is shown.
        if self.line == 0 {
            write!(f, "{}: ", self.file)?;
        } else {
            write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        }
        if !self.key.is_empty() {
            write!(f, "key `{}`: ", self.key)?;
        }
        write!(f, "{}", self.message)
    }
}

/// A validated study.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Study {
    /// The file name as given.
    pub file: String,
    /// The file's text, stored with every run.
    pub text: String,
    /// `[study] name`.
    pub name: String,
    /// `[study] description`.
    pub description: String,
    /// Execution order.
    pub order: Order,
    /// Why the run uses that order: the study asked for it, or which
    /// difference between configurations made benchlab choose it.
    /// Empty for runs stored before benchlab chose orders.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub order_why: String,
    /// `[study] control = true`: the last configuration is an A/A control,
    /// the first one again under another name, run in the same order as
    /// the others; reports show its comparisons with the first as the
    /// machine against itself, not as a configuration.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub control: bool,
    /// `[defaults]`.
    pub defaults: Defaults,
    /// Configurations (at least one).
    pub configurations: Vec<Configuration>,
    /// Workloads (at least one).
    pub workloads: Vec<WorkloadEntry>,
    /// Hosts: those of `[[host]]`, plus `sut` and `generator` on this
    /// machine when the file does not define them.
    pub hosts: Vec<Host>,
    /// `[[service]]`: the real servers workloads drive.
    #[serde(default)]
    pub services: Vec<ServiceDecl>,
    /// `[[study.step]]`: the preparation steps of the study being
    /// reproduced and what became of each here, in file order.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// `[[study.compare]]`: the like-for-like comparisons the study
    /// declares, in file order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compare: Vec<Comparison>,
    /// `[[study.crosscheck]]`: native workloads paired with classic tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crosschecks: Vec<Crosscheck>,
    /// `[monitors]`: what every host records during every repetition
    /// (runs stored before monitors existed read as the default).
    #[serde(default)]
    pub monitors: Monitors,
    /// What `--only` left out of the file: this is a part of it.
    #[serde(default, skip_serializing_if = "LeftOut::is_empty")]
    pub left_out: LeftOut,
    /// `[study] stacks`: call-stack sampling for the workloads that do
    /// not say otherwise (each workload's own is in its entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<Stacks>,
    /// `[study] design` and its budget and margins (runs stored before
    /// designs existed read as the fixed design).
    #[serde(default)]
    pub design: Design,
}

/// `testbed` belongs to `benchlab testbed`, which reads the same file.
const TOP_KEYS: &[&str] = &[
    "study",
    "defaults",
    "configuration",
    "host",
    "service",
    "workload",
    "testbed",
    "monitors",
];

impl Study {
    /// Reads and validates a study file.
    pub fn load(path: &std::path::Path, registry: &Registry) -> Result<Study, StudyError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| StudyError {
            file: file.clone(),
            line: 0,
            column: 0,
            key: String::new(),
            message: format!("cannot read the study file: {e}"),
        })?;
        Study::parse(&file, &text, registry)
    }

    /// Validates a study given as text (`file` names it in errors).
    pub fn parse(file: &str, text: &str, registry: &Registry) -> Result<Study, StudyError> {
        let cx = Ctx { file, text };
        let doc = DeTable::parse(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let msg = e.message().trim().to_string();
            cx.err(span, "", format!("not valid TOML: {msg}"))
        })?;
        let doc = doc.get_ref();
        cx.check_keys(doc, "", TOP_KEYS)?;

        // One function per section, in dependency order: hosts before the
        // services that run on them, both before the workloads that use
        // them.
        let header = cx.header(doc)?;
        let study_table = doc.get("study").and_then(|v| match v.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => None,
        });
        let design = cx.design(study_table)?;
        let defaults = cx.defaults(doc)?;
        let monitors = cx.monitors(doc)?;
        let mut configs = cx.configurations(doc)?;
        let hosts = cx.hosts(doc)?;
        let host_names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        let services = cx.configured_services(doc, &host_names, &mut configs, registry)?;
        // After the services: `by = "cpus"` reads the CPUs each
        // configuration gives its server.
        let compare = cx.comparisons(doc, &configs.list)?;
        let known = Known {
            defaults: &defaults,
            configs: &configs,
            host_names: &host_names,
            services: &services,
            registry,
            stacks: header.stacks,
        };
        let workloads = cx.workloads(doc, &known)?;
        cx.host_maps(&mut configs, &host_names, &workloads, &services)?;
        let crosschecks = cx.crosschecks(doc, &workloads, registry)?;
        let Header {
            name,
            description,
            order,
            seed,
            blocks,
            control,
            steps,
            stacks,
        } = header;
        let configurations = configs.list;
        let (order, order_why) = match order {
            Some(o) => (o, "as the study asks".to_string()),
            None => order::choose(text, seed, blocks, &configurations),
        };
        let mut study = Study {
            file: file.to_string(),
            text: text.to_string(),
            name,
            description,
            order,
            order_why,
            control: false,
            defaults,
            configurations,
            workloads,
            hosts,
            services,
            steps,
            compare,
            crosschecks,
            monitors,
            left_out: LeftOut::default(),
            stacks,
            design,
        };
        cx.check_design(study_table, &study, registry)?;
        if control {
            study.add_control()?;
        }
        Ok(study)
    }

    /// Every host a workload side or a managed service runs on in any
    /// configuration (the study's names after each configuration's
    /// `hosts` map), each once, in order of first use.
    pub fn used_hosts(&self) -> Vec<&str> {
        let mut used: Vec<&str> = Vec::new();
        for c in &self.configurations {
            for h in self.configuration_hosts(c) {
                if !used.contains(&h) {
                    used.push(h);
                }
            }
        }
        used
    }

    /// The hosts configuration `c`'s points and services run on: every
    /// workload's server (or targets) and client hosts after `c`'s
    /// `hosts` map, and `c`'s managed services' hosts (a service at an
    /// address runs on no host of the study), each once, in order of
    /// first use.
    pub fn configuration_hosts<'a>(&'a self, c: &'a Configuration) -> Vec<&'a str> {
        let sides = self
            .workloads
            .iter()
            .flat_map(|w| w.servers.iter().chain(&w.client_hosts))
            .map(|h| c.host(h));
        // Configuration services carry their mapped hosts already.
        let services = c
            .services
            .iter()
            .filter(|d| d.address.is_none())
            .map(|d| d.host.as_str());
        let mut used: Vec<&str> = Vec::new();
        for h in sides.chain(services) {
            if !used.contains(&h) {
                used.push(h);
            }
        }
        used
    }

    /// A host by name (every name a workload uses exists).
    pub fn host(&self, name: &str) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .expect("workload hosts are validated")
    }
}
