//! The order a study runs in when its file does not say, chosen by what it
//! costs to switch between its configurations, and the A/A control column.

use super::{Configuration, Order, Study, StudyError, WorkloadEntry, DEFAULT_BLOCKS};

/// The name of the A/A control configuration (`[study] control = true`).
pub const CONTROL_NAME: &str = "A/A control";

/// The order for a study whose file gives none, and why.
///
/// Configurations that differ only in placement, priority or workload
/// parameters are cheap to switch: they alternate at every repetition in
/// a random order seeded by `seed` (default: from the study's text, so
/// that the same file runs in the same order), which spreads drift over
/// all of them. Configurations that differ in something costly to switch
/// (a profile, CPU shielding, a managed service's set-up, the hosts) run
/// in `blocks` blocks each (default [`DEFAULT_BLOCKS`]) in
/// ABBA order, so that the spread between a configuration's blocks
/// measures the drift that a single block would hide. (A file system is
/// not among them: `fs.matrix` makes its file system afresh for every
/// repetition, so alternating costs nothing more.)
pub(super) fn choose(
    text: &str,
    seed: Option<u64>,
    blocks: Option<u32>,
    configurations: &[Configuration],
) -> (Order, String) {
    match costly_difference(configurations) {
        Some(what) => {
            let blocks = blocks.unwrap_or(DEFAULT_BLOCKS);
            (
                Order::Blocks { blocks },
                format!(
                    "the default here: {what} is costly to switch, so each configuration \
                     runs in blocks, and the spread between its blocks measures drift"
                ),
            )
        }
        None => {
            let seed = seed.unwrap_or_else(|| fnv1a(text.as_bytes()));
            (
                Order::Alternate { seed },
                "the default here: the configurations differ only in what is cheap to \
                 switch, so they alternate, and drift reaches all of them alike"
                    .to_string(),
            )
        }
    }
}

/// The first difference between a configuration and the first one that
/// is costly to switch, in words; `None` when there is none.
fn costly_difference(configurations: &[Configuration]) -> Option<String> {
    let first = configurations.first()?;
    for cfg in configurations.iter().skip(1) {
        let name = &cfg.name;
        if cfg.env.profile != first.env.profile || cfg.env.profile_for != first.env.profile_for {
            return Some(format!("the profile (configuration `{name}`)"));
        }
        if cfg.env.shield != first.env.shield {
            return Some(format!("CPU shielding (configuration `{name}`)"));
        }
        if cfg.services != first.services {
            return Some(format!(
                "a managed service's set-up (configuration `{name}`)"
            ));
        }
        if cfg.hosts != first.hosts {
            return Some(format!("the hosts (configuration `{name}`)"));
        }
    }
    None
}

/// Appends the A/A control: the first configuration again, under
/// [`CONTROL_NAME`], with the first configuration's workload overrides.
pub(super) fn add_control(
    configurations: &mut Vec<Configuration>,
    workloads: &mut [WorkloadEntry],
) {
    let mut control = configurations[0].clone();
    control.name = CONTROL_NAME.to_string();
    control.description = format!(
        "the machine against itself: `{}` again, in the same order as the others",
        configurations[0].name
    );
    configurations.push(control);
    for w in workloads {
        let base = w.overrides[0].clone();
        w.overrides.push(base);
    }
}

/// FNV-1a, 64 bits: a stable seed from the study's text.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Study {
    /// The order of a run of this study in words: its name, its blocks or
    /// seed, and why (runs stored before benchlab chose orders say only
    /// the order).
    pub fn order_text(&self) -> String {
        let what = match self.order {
            Order::Sequential => {
                "sequential: every repetition of one configuration, then the next (one block each)"
                    .to_string()
            }
            Order::Interleaved => {
                "interleaved: the configurations in file order at every repetition".to_string()
            }
            Order::Alternate { seed } => format!(
                "alternate: the configurations in a random order at every repetition (seed {seed})"
            ),
            Order::Blocks { blocks } => {
                format!("blocks: {blocks} blocks per configuration in ABBA order")
            }
        };
        if self.order_why.is_empty() {
            what
        } else {
            format!("{what}; {}", self.order_why)
        }
    }

    /// Adds the A/A control (`benchlab run --aa`), as `[study] control =
    /// true` does; nothing when the study has it already.
    pub fn add_control(&mut self) -> Result<(), StudyError> {
        if self.control {
            return Ok(());
        }
        if self.configurations.iter().any(|c| c.name == CONTROL_NAME) {
            return Err(StudyError {
                file: self.file.clone(),
                line: 0,
                column: 0,
                key: "study.control".into(),
                message: format!(
                    "a configuration is already named `{CONTROL_NAME}`, the name of the control: rename it"
                ),
            });
        }
        add_control(&mut self.configurations, &mut self.workloads);
        self.control = true;
        Ok(())
    }
}
