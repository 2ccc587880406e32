//! Profiles compared: one side's folded stacks under two configurations,
//! each normalized to CPU time per operation (or per second of sampling
//! when the workload counts no operations), give a differential profile
//! (B against A) and the functions whose inclusive time per operation
//! grew or shrank most.
//!
//! A function's *inclusive* time is that of every sample with it anywhere
//! on the stack (counted once per sample, however deep it recurses); its
//! *share* is that time over the side's whole time. Every caller of a
//! function that grew grows as much, so a function is left out of the
//! table when one function it calls directly accounts for
//! [`EXPLAINED`] or more of its change: the table names where the time
//! went, not each caller on the way there.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::split::parse_folded;

/// The share of a function's change that one of its direct callees must
/// carry for the function to be left out of the table as a mere caller.
pub const EXPLAINED: f64 = 0.9;
/// Rows of each half of the table.
pub const TABLE_ROWS: usize = 10;

/// Whether `frame` is the C runtime's entry code, under every sample of
/// a process or thread: `_start`, `__libc_start_main` (by any symbol
/// version), `__libc_start_call_main`, and a thread's `start_thread` and
/// `clone`/`clone3`. glibc keeps no frame pointers, so a frame-pointer
/// walk reaches these frames or stops short of them depending on what a
/// register happened to hold at the process's start: one run's stacks
/// have them and another's of the same program do not. Compared, they
/// would "grow" by the whole profile. They say nothing of where the time
/// went, so profiles are compared without them.
pub fn entry_frame(frame: &str) -> bool {
    let name = frame.split_once("@@").map_or(frame, |(n, _)| n);
    matches!(
        name,
        "_start"
            | "__libc_start_main"
            | "__libc_start_main_impl"
            | "__libc_start_call_main"
            | "start_thread"
            | "clone"
            | "clone3"
            | "__clone"
            | "__clone3"
    )
}

/// What a profile's time is divided by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Per {
    /// The operations counted while sampling: µs of CPU per operation.
    Operation,
    /// The seconds sampled: ms of CPU per second (when the workload
    /// counts no operations).
    Second,
}

impl Per {
    /// The unit of a normalized figure.
    pub fn unit(self) -> &'static str {
        match self {
            Per::Operation => "CPU µs/op",
            Per::Second => "CPU ms/s",
        }
    }

    /// Seconds of CPU to this unit.
    fn scale(self) -> f64 {
        match self {
            Per::Operation => 1e6,
            Per::Second => 1e3,
        }
    }
}

/// One configuration's profile of one side: folded stacks with what
/// normalizes them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Profile {
    /// Samples by stack (`root;…;leaf`).
    pub stacks: BTreeMap<String, u64>,
    /// Samples per second and CPU.
    pub hz: u32,
    /// Seconds sampled (summed over merged repetitions).
    pub window_s: f64,
    /// Operations counted while sampling (summed likewise), when the
    /// workload counts them.
    pub operations: Option<f64>,
}

impl Profile {
    /// A profile of folded text.
    pub fn from_folded(folded: &str, hz: u32, window_s: f64, operations: Option<f64>) -> Profile {
        let mut p = Profile {
            hz,
            window_s,
            operations,
            ..Profile::default()
        };
        p.add_folded(folded);
        p
    }

    /// Adds folded text's samples (another repetition of the same side),
    /// without the runtime's entry frames ([`entry_frame`]).
    pub fn add_folded(&mut self, folded: &str) {
        for (stack, n) in parse_folded(folded) {
            let mut frames = stack.split(';');
            let mut kept = frames.next().unwrap_or_default().to_string();
            for f in frames.filter(|f| !entry_frame(f)) {
                kept.push(';');
                kept.push_str(f);
            }
            *self.stacks.entry(kept).or_default() += n;
        }
    }

    /// Adds another repetition's profile.
    pub fn merge(&mut self, other: &Profile) {
        for (s, n) in &other.stacks {
            *self.stacks.entry(s.clone()).or_default() += n;
        }
        self.window_s += other.window_s;
        self.operations = match (self.operations, other.operations) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        if self.hz == 0 {
            self.hz = other.hz;
        }
    }

    /// Every sample.
    pub fn samples(&self) -> u64 {
        self.stacks.values().sum()
    }

    /// What one sample is worth in `per`'s unit (`None`: nothing to
    /// divide by).
    pub fn sample_value(&self, per: Per) -> Option<f64> {
        if self.hz == 0 {
            return None;
        }
        let denom = match per {
            Per::Operation => self.operations?,
            Per::Second => self.window_s,
        };
        (denom > 0.0).then(|| per.scale() / f64::from(self.hz) / denom)
    }

    /// Inclusive samples per function (once per sample).
    pub fn inclusive(&self) -> HashMap<&str, u64> {
        let mut out: HashMap<&str, u64> = HashMap::new();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for (stack, &n) in &self.stacks {
            seen.clear();
            for f in stack.split(';') {
                if seen.insert(f) {
                    *out.entry(f).or_default() += n;
                }
            }
        }
        out
    }

    /// Each function's direct callees (the frame after it, leafward).
    fn callees(&self) -> HashMap<&str, BTreeSet<&str>> {
        let mut out: HashMap<&str, BTreeSet<&str>> = HashMap::new();
        for stack in self.stacks.keys() {
            let frames: Vec<&str> = stack.split(';').collect();
            for w in frames.windows(2) {
                if w[0] != w[1] {
                    out.entry(w[0]).or_default().insert(w[1]);
                }
            }
        }
        out
    }
}

/// The unit two profiles are compared in: per operation when both
/// counted operations, else per second.
pub fn common_per(a: &Profile, b: &Profile) -> Per {
    if a.sample_value(Per::Operation).is_some() && b.sample_value(Per::Operation).is_some() {
        Per::Operation
    } else {
        Per::Second
    }
}

/// One function of the "grew most" table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The function (its frame as folded).
    pub function: String,
    /// Its inclusive time per unit under A and B.
    pub a: f64,
    /// Under B.
    pub b: f64,
    /// `b - a`.
    pub delta: f64,
    /// Its inclusive share of the side's time under A, %.
    pub share_a_pct: f64,
    /// Under B, %.
    pub share_b_pct: f64,
}

/// B against A for one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    /// The unit of every figure.
    pub per: Per,
    /// The side's whole time per unit under A.
    pub total_a: f64,
    /// Under B.
    pub total_b: f64,
    /// The functions that grew most, most first.
    pub grew: Vec<Change>,
    /// The functions that shrank most, most first.
    pub shrank: Vec<Change>,
}

/// Compares B with A (`None` when either has no samples or nothing to
/// normalize by).
pub fn diff(a: &Profile, b: &Profile) -> Option<Diff> {
    let per = common_per(a, b);
    let (va, vb) = (a.sample_value(per)?, b.sample_value(per)?);
    let (na, nb) = (a.samples(), b.samples());
    if na == 0 || nb == 0 {
        return None;
    }
    let (ia, ib) = (a.inclusive(), b.inclusive());
    let mut names: BTreeSet<&str> = ia.keys().copied().collect();
    names.extend(ib.keys().copied());
    let value = |m: &HashMap<&str, u64>, f: &str, v: f64| m.get(f).copied().unwrap_or(0) as f64 * v;
    let delta: HashMap<&str, f64> = names
        .iter()
        .map(|&f| (f, value(&ib, f, vb) - value(&ia, f, va)))
        .collect();
    // Callees under either configuration.
    let mut callees = a.callees();
    for (f, cs) in b.callees() {
        callees.entry(f).or_default().extend(cs);
    }
    let explained = |f: &str, d: f64| {
        callees.get(f).is_some_and(|cs| {
            cs.iter().any(|c| {
                let dc = delta.get(c).copied().unwrap_or(0.0);
                dc * d > 0.0 && dc.abs() >= EXPLAINED * d.abs()
            })
        })
    };
    let mut rows: Vec<Change> = names
        .iter()
        .filter(|&&f| delta[f] != 0.0 && !explained(f, delta[f]))
        .map(|&f| Change {
            function: f.to_string(),
            a: value(&ia, f, va),
            b: value(&ib, f, vb),
            delta: delta[f],
            share_a_pct: ia.get(f).copied().unwrap_or(0) as f64 * 100.0 / na as f64,
            share_b_pct: ib.get(f).copied().unwrap_or(0) as f64 * 100.0 / nb as f64,
        })
        .collect();
    rows.sort_by(|x, y| {
        y.delta
            .total_cmp(&x.delta)
            .then(x.function.cmp(&y.function))
    });
    let grew: Vec<Change> = rows
        .iter()
        .filter(|r| r.delta > 0.0)
        .take(TABLE_ROWS)
        .cloned()
        .collect();
    let shrank: Vec<Change> = rows
        .iter()
        .rev()
        .filter(|r| r.delta < 0.0)
        .take(TABLE_ROWS)
        .cloned()
        .collect();
    Some(Diff {
        per,
        total_a: na as f64 * va,
        total_b: nb as f64 * vb,
        grew,
        shrank,
    })
}

/// The differential profile in inferno's format (`stack a b`): each
/// stack's time per unit under A and B, in integer units of
/// `1 / scale` of the unit. Returns the lines and the scale.
pub fn differential(a: &Profile, b: &Profile) -> Option<(String, f64)> {
    let per = common_per(a, b);
    let (va, vb) = (a.sample_value(per)?, b.sample_value(per)?);
    let biggest = (a.samples() as f64 * va).max(b.samples() as f64 * vb);
    if biggest <= 0.0 {
        return None;
    }
    // About a million units for the larger side: enough resolution for
    // a stack of one sample, small enough for inferno's integers.
    let scale = 10f64.powi((1e6 / biggest).log10().ceil() as i32);
    let mut stacks: BTreeSet<&str> = a.stacks.keys().map(String::as_str).collect();
    stacks.extend(b.stacks.keys().map(String::as_str));
    let mut out = String::new();
    for s in stacks {
        let x = a.stacks.get(s).copied().unwrap_or(0) as f64 * va * scale;
        let y = b.stacks.get(s).copied().unwrap_or(0) as f64 * vb * scale;
        out.push_str(&format!("{s} {} {}\n", x.round() as u64, y.round() as u64));
    }
    Some((out, scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prof(folded: &str, ops: f64) -> Profile {
        Profile::from_folded(folded, 100, 10.0, Some(ops))
    }

    #[test]
    fn the_planted_function_comes_first_and_its_callers_are_left_out() {
        let a = prof("hot;_start;main;work 100\nhot;_start;main 10\n", 1000.0);
        let b = prof(
            "hot;_start;main;work 100\nhot;_start;main 10\nhot;_start;main;planted;spin 60\nhot;_start;main;planted 40\n",
            1000.0,
        );
        let d = diff(&a, &b).unwrap();
        assert_eq!(d.per, Per::Operation);
        // 100 samples at 100 Hz over 1000 operations: 1000 µs per op.
        assert_eq!(d.grew[0].function, "planted");
        assert!((d.grew[0].delta - 1000.0).abs() < 1e-9);
        assert!((d.grew[0].share_b_pct - 100.0 * 100.0 / 210.0).abs() < 1e-9);
        assert_eq!(d.grew[0].share_a_pct, 0.0);
        assert!(d
            .grew
            .iter()
            .all(|r| r.function != "main" && r.function != "hot"));
        assert!(d.shrank.is_empty());
        assert!((d.total_a - 1100.0).abs() < 1e-9 && (d.total_b - 2100.0).abs() < 1e-9);
    }

    /// A walk that stopped short of the runtime's entry frames in one
    /// recording and reached them in the other (seen on this machine's
    /// perf): the entry frames are not what grew.
    #[test]
    fn entry_frames_reached_by_one_walk_only_do_not_grow() {
        let a = prof("hot;__libc_start_call_main;main;work 145\n", 1000.0);
        let b = prof(
            "hot;_start;__libc_start_main@@GLIBC_2.34;__libc_start_call_main;main;work 55\n\
             hot;_start;__libc_start_main@@GLIBC_2.34;__libc_start_call_main;main;planted_hot 89\n",
            1000.0,
        );
        let d = diff(&a, &b).unwrap();
        assert_eq!(d.grew[0].function, "planted_hot", "{:?}", d.grew);
        assert!(
            d.grew.iter().all(|r| !entry_frame(&r.function)),
            "{:?}",
            d.grew
        );
        assert_eq!(d.shrank[0].function, "work");
        assert_eq!(d.shrank[0].share_a_pct, 100.0);
        assert!(
            b.stacks.contains_key("hot;main;planted_hot"),
            "{:?}",
            b.stacks
        );
    }

    #[test]
    fn time_is_per_operation_so_more_operations_is_not_growth() {
        // B did twice the operations with twice the samples: no change.
        let a = prof("x;f 50\n", 1000.0);
        let b = prof("x;f 100\n", 2000.0);
        let d = diff(&a, &b).unwrap();
        assert!(d.grew.is_empty() && d.shrank.is_empty());
        // Without operations, per second: B doubled.
        let a = Profile::from_folded("x;f 50\n", 100, 10.0, None);
        let b = Profile::from_folded("x;f 100\n", 100, 10.0, None);
        let d = diff(&a, &b).unwrap();
        assert_eq!(d.per, Per::Second);
        assert_eq!(d.grew[0].function, "f");
        assert!((d.grew[0].delta - 50.0).abs() < 1e-9);
    }

    #[test]
    fn a_shrinking_function_is_listed_as_shrank() {
        let a = prof("x;main;slow 80\nx;main;fast 20\n", 100.0);
        let b = prof("x;main;slow 10\nx;main;fast 20\n", 100.0);
        let d = diff(&a, &b).unwrap();
        assert_eq!(d.shrank[0].function, "slow");
        assert!(d.shrank[0].delta < 0.0);
    }

    #[test]
    fn recursion_counts_once_and_the_differential_keeps_both_counts() {
        let p = prof("x;f;f;f 5\n", 10.0);
        assert_eq!(p.inclusive()["f"], 5);
        let (text, scale) = differential(&prof("x;f 5\n", 10.0), &prof("x;g 5\n", 10.0)).unwrap();
        assert!(scale > 0.0);
        assert!(text.contains("x;f ") && text.contains("x;g "));
        assert!(text.lines().all(|l| l.split(' ').count() == 3));
    }

    #[test]
    fn nothing_to_compare_gives_none() {
        assert!(diff(&prof("", 1.0), &prof("x 1\n", 1.0)).is_none());
        assert!(diff(&prof("x 1\n", 0.0), &prof("x 1\n", 1.0)).is_some());
    }
}
