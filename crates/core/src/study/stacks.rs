//! `stacks`: call-stack sampling of every host of a point while it is
//! measured (`[study] stacks = { hz = 99 }`, or per workload, where
//! `stacks = false` turns the study's off). See docs/stacks.md.

use super::values::type_name;
use super::{Ctx, DeValue, StudyError, Val};

/// The default sampling rate, Hz: 99 rather than 100 so that sampling
/// does not run in lockstep with timer-driven work (Brendan Gregg's
/// habit, and perf's `-F 99` in its own examples).
pub const DEFAULT_STACKS_HZ: u32 = 99;
/// The highest rate a study may ask for: above it the sampler's cost
/// (an interrupt and a stack walk per sample and CPU) stops being small
/// next to what it measures. A host may allow less
/// (`kernel.perf_event_max_sample_rate`), checked before a run starts.
pub const MAX_STACKS_HZ: u32 = 5000;

const STACKS_KEYS: &[&str] = &["hz", "unwind", "repetitions"];
const UNWINDS: &[&str] = &["fp", "dwarf"];
const REPETITIONS: &[&str] = &["quoted", "all"];

/// How user-space stacks are walked (kernel stacks are always walked
/// by the kernel's own unwinder).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unwind {
    /// Frame pointers: cheap, but a program built without them (Rust
    /// release builds, most of Debian's libraries) shows its leaf only.
    Fp,
    /// A copy of the user stack per sample, unwound from the DWARF
    /// call-frame information when symbolized: whole stacks of programs
    /// without frame pointers, for more bytes per sample.
    Dwarf,
}

impl Unwind {
    /// The name as a study file spells it.
    pub fn name(self) -> &'static str {
        match self {
            Unwind::Fp => "fp",
            Unwind::Dwarf => "dwarf",
        }
    }
}

/// Which repetitions' profiles a report shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StackRepetitions {
    /// The quoted repetition (the median run of the headline metric).
    /// Every repetition is sampled all the same: which one is quoted is
    /// known only once all have run, and sampling them all keeps the
    /// repetitions alike.
    Quoted,
    /// Every repetition's samples merged.
    All,
}

/// A workload's call-stack sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stacks {
    /// Samples per second and CPU.
    pub hz: u32,
    /// How user stacks are walked.
    pub unwind: Unwind,
    /// What the report shows.
    pub repetitions: StackRepetitions,
}

impl Default for Stacks {
    fn default() -> Self {
        Stacks {
            hz: DEFAULT_STACKS_HZ,
            unwind: Unwind::Dwarf,
            repetitions: StackRepetitions::Quoted,
        }
    }
}

impl Ctx<'_> {
    /// `stacks = true | false | { hz, unwind, repetitions }` at `path`;
    /// `base` is what `true` and a table's missing keys mean.
    pub(super) fn stacks(
        &self,
        v: &Val,
        path: &str,
        base: Option<Stacks>,
    ) -> Result<Option<Stacks>, StudyError> {
        let mut s = base.unwrap_or_default();
        match v.get_ref() {
            DeValue::Boolean(false) => return Ok(None),
            DeValue::Boolean(true) => {}
            DeValue::Table(_) => {
                let t = self.table(v, path)?;
                self.check_keys(t, path, STACKS_KEYS)?;
                if let Some(h) = t.get("hz") {
                    let key = format!("{path}.hz");
                    let hz = self.int(h, &key)?;
                    if !(1..=i64::from(MAX_STACKS_HZ)).contains(&hz) {
                        return Err(self.err(
                            h.span(),
                            &key,
                            format!(
                                "{hz} Hz is not a sampling rate benchlab allows (allowed: 1 to {MAX_STACKS_HZ} samples per second and CPU; 99 is the usual)"
                            ),
                        ));
                    }
                    s.hz = hz as u32;
                }
                if let Some(u) = t.get("unwind") {
                    s.unwind = match self.choice(u, &format!("{path}.unwind"), UNWINDS)?.as_str() {
                        "fp" => Unwind::Fp,
                        _ => Unwind::Dwarf,
                    };
                }
                if let Some(r) = t.get("repetitions") {
                    s.repetitions = match self
                        .choice(r, &format!("{path}.repetitions"), REPETITIONS)?
                        .as_str()
                    {
                        "all" => StackRepetitions::All,
                        _ => StackRepetitions::Quoted,
                    };
                }
            }
            other => {
                return Err(self.err(
                    v.span(),
                    path,
                    format!(
                        "expected true, false or a table (keys: {}), found {}",
                        STACKS_KEYS.join(", "),
                        type_name(other)
                    ),
                ))
            }
        }
        Ok(Some(s))
    }
}
