//! A run plan: the study expanded into units (configuration × workload ×
//! point × repetition) in execution order, with the time each is expected
//! to take.

use serde::{Deserialize, Serialize};

use crate::param::{ParamKind, Params, Value};
use crate::study::{Order, Study, WorkloadEntry};
use crate::workload::{Registry, Workload};

/// Options that change a run without changing its study file. Recorded
/// with the run, so that a resumed run uses the same ones.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// Factor applied to every time parameter (duration, warm-up, quiesce).
    pub scale: f64,
    /// Trial run: one repetition per point (in addition to `scale`).
    pub quick: bool,
}

/// The `--quick` time factor: a 120 s point becomes 6 s, a 10 s point 0.5 s.
pub const QUICK_SCALE: f64 = 0.05;
/// No time parameter is scaled below this (s), so a scaled point still
/// measures something.
pub const MIN_SCALED_DURATION_S: f64 = 0.2;

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            scale: 1.0,
            quick: false,
        }
    }
}

/// One point of a workload under one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedPoint {
    /// Index into `Study::configurations`.
    pub config: usize,
    /// Index into `Study::workloads`.
    pub workload: usize,
    /// Index of the point within its workload.
    pub point: usize,
    /// Effective parameters (point values, configuration overrides, scale).
    pub params: Params,
    /// Swept values, for progress lines.
    pub label: String,
    /// Repetitions to run.
    pub repetitions: u32,
    /// Expected seconds of one repetition including quiesce.
    pub expected_s: f64,
    /// Quiesce after each repetition (s, scaled).
    pub quiesce_s: f64,
}

/// One step: a repetition of a planned point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unit {
    /// Index into `Plan::points`.
    pub point: usize,
    /// Repetition number, 0-based.
    pub repetition: u32,
}

/// The expanded study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Every (configuration, workload, point).
    pub points: Vec<PlannedPoint>,
    /// Execution order.
    pub units: Vec<Unit>,
}

/// Fixed per-unit overhead assumed by the estimate (process round trips,
/// connection set-up), s.
const UNIT_OVERHEAD_S: f64 = 0.1;

impl Plan {
    /// Expands a study. The study was validated against the same registry.
    pub fn new(study: &Study, registry: &Registry, opts: RunOptions) -> Plan {
        let mut points = Vec::new();
        for (w, entry) in study.workloads.iter().enumerate() {
            let wl = registry
                .get(&entry.kind)
                .expect("study validated against this registry");
            let reps = if opts.quick { 1 } else { entry.repetitions };
            let quiesce_s = scale_s(entry.quiesce_s, opts.scale, 0.0);
            for c in 0..study.configurations.len() {
                for (p, base) in planned_points(entry, wl).into_iter().enumerate() {
                    let mut params = base;
                    params.0.extend(entry.overrides[c].0.clone());
                    for spec in wl.params() {
                        if spec.kind != ParamKind::Seconds && spec.kind != ParamKind::Factor {
                            continue;
                        }
                        if let Some(Value::Float(s)) = params.get(spec.name).cloned() {
                            let floor = if spec.name == "duration_s" {
                                MIN_SCALED_DURATION_S
                            } else {
                                0.0
                            };
                            params.set(spec.name, Value::Float(scale_s(s, opts.scale, floor)));
                        }
                    }
                    let expected_s =
                        wl.expected_duration(&params).as_secs_f64() + quiesce_s + UNIT_OVERHEAD_S;
                    points.push(PlannedPoint {
                        config: c,
                        workload: w,
                        point: p,
                        label: entry.label(&params),
                        params,
                        repetitions: reps,
                        expected_s,
                        quiesce_s,
                    });
                }
            }
        }

        // Index points by (workload, point, config) for ordering.
        let n_cfg = study.configurations.len();
        let counts: Vec<usize> = study
            .workloads
            .iter()
            .map(|e| planned_points(e, registry.get(&e.kind).expect("validated")).len())
            .collect();
        let find = |c: usize, w: usize, p: usize| {
            points
                .iter()
                .position(|x| x.config == c && x.workload == w && x.point == p)
                .expect("planned point")
        };
        let mut units = Vec::new();
        let mut push = |i: usize, r: u32| {
            units.push(Unit {
                point: i,
                repetition: r,
            })
        };
        match study.order {
            Order::Sequential => {
                for c in 0..n_cfg {
                    for (w, &count) in counts.iter().enumerate() {
                        for p in 0..count {
                            let i = find(c, w, p);
                            for r in 0..points[i].repetitions {
                                push(i, r);
                            }
                        }
                    }
                }
            }
            Order::Interleaved | Order::Alternate { .. } => {
                let seed = match study.order {
                    Order::Alternate { seed } => Some(seed),
                    _ => None,
                };
                let mut configs: Vec<usize> = (0..n_cfg).collect();
                for (w, &count) in counts.iter().enumerate() {
                    for p in 0..count {
                        let reps = points[find(0, w, p)].repetitions;
                        for r in 0..reps {
                            if let Some(seed) = seed {
                                shuffle(&mut configs, mix(&[seed, w as u64, p as u64, r.into()]));
                            }
                            for &c in &configs {
                                push(find(c, w, p), r);
                            }
                        }
                    }
                }
            }
            Order::Blocks { blocks } => {
                // A B B A A B …: every other round runs the configurations
                // in reverse, so that a linear drift falls on each alike.
                for k in 0..blocks {
                    let round: Vec<usize> = if k % 2 == 0 {
                        (0..n_cfg).collect()
                    } else {
                        (0..n_cfg).rev().collect()
                    };
                    for c in round {
                        for (w, &count) in counts.iter().enumerate() {
                            for p in 0..count {
                                let i = find(c, w, p);
                                let reps = points[i].repetitions;
                                for r in (0..reps).filter(|&r| study.order.block(r, reps) == k) {
                                    push(i, r);
                                }
                            }
                        }
                    }
                }
            }
        }
        Plan { points, units }
    }

    /// Round `round` of the until-decided design over `rows` (workload,
    /// point), each point's repetition numbered by `next`: the study's
    /// order, a round at a time. Where configurations alternate, each row
    /// runs every configuration once, in the order's draw for that round;
    /// in blocks, the round is one block per configuration, every other
    /// round reversed (A B, B A, …: ABBA pairs), each block running one
    /// repetition of every row.
    pub fn round_units(
        &self,
        study: &Study,
        round: u32,
        rows: &[(usize, usize)],
        next: impl Fn(usize) -> u32,
    ) -> Vec<Unit> {
        let n_cfg = study.configurations.len();
        let find = |c: usize, w: usize, p: usize| {
            self.points
                .iter()
                .position(|x| x.config == c && x.workload == w && x.point == p)
        };
        let mut units = Vec::new();
        let mut push = |c: usize, w: usize, p: usize| {
            if let Some(i) = find(c, w, p) {
                units.push(Unit {
                    point: i,
                    repetition: next(i),
                });
            }
        };
        match study.order {
            Order::Blocks { .. } => {
                let configs: Vec<usize> = if round.is_multiple_of(2) {
                    (0..n_cfg).collect()
                } else {
                    (0..n_cfg).rev().collect()
                };
                for c in configs {
                    for &(w, p) in rows {
                        push(c, w, p);
                    }
                }
            }
            Order::Alternate { seed } => {
                let mut configs: Vec<usize> = (0..n_cfg).collect();
                for &(w, p) in rows {
                    shuffle(&mut configs, mix(&[seed, w as u64, p as u64, round.into()]));
                    for &c in &configs {
                        push(c, w, p);
                    }
                }
            }
            Order::Interleaved | Order::Sequential => {
                for &(w, p) in rows {
                    for c in 0..n_cfg {
                        push(c, w, p);
                    }
                }
            }
        }
        units
    }

    /// Expected seconds of the given units.
    pub fn expected_s<'a>(&self, units: impl IntoIterator<Item = &'a Unit>) -> f64 {
        units
            .into_iter()
            .map(|u| self.points[u.point].expected_s)
            .sum()
    }
}

/// The points of a workload entry that its workload plans (see
/// [`Workload::include_point`]), in sweep order.
pub fn planned_points(entry: &WorkloadEntry, wl: &dyn Workload) -> Vec<Params> {
    entry
        .points()
        .into_iter()
        .filter(|p| wl.include_point(p))
        .collect()
}

/// Fisher–Yates shuffle driven by splitmix64 from `state`: the alternate
/// order's draw, reproducible from its recorded seed.
fn shuffle(items: &mut [usize], mut state: u64) {
    for i in (1..items.len()).rev() {
        state = mix(&[state]);
        let j = (state % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

/// splitmix64's finaliser folded over `words`.
fn mix(words: &[u64]) -> u64 {
    words.iter().fold(0x9E37_79B9_7F4A_7C15u64, |h, &w| {
        let mut z = (h ^ w).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

fn scale_s(s: f64, scale: f64, floor: f64) -> f64 {
    if scale == 1.0 || s == 0.0 {
        s
    } else {
        (s * scale).max(floor)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fake::FAKE;

    /// The fake workload alone: the core's tests' registry.
    pub(crate) fn registry() -> Registry {
        let mut r = Registry::new();
        r.add(&FAKE);
        r
    }

    const STUDY: &str = r#"
[study]
name = "t"
[defaults]
repetitions = 2
[[configuration]]
name = "a"
[[configuration]]
name = "b"
set = { value = 50 }
[[workload]]
kind = "fake"
size = [1, 2, 4]
sleep_s = 2
"#;

    /// (configuration, point, repetition) of every unit, in order.
    fn units_of(text: &str) -> (Study, Vec<(usize, usize, u32)>) {
        let reg = registry();
        let s = Study::parse("t.toml", text, &reg).unwrap();
        let plan = Plan::new(&s, &reg, RunOptions::default());
        let seq = plan
            .units
            .iter()
            .map(|u| {
                let p = &plan.points[u.point];
                (p.config, p.point, u.repetition)
            })
            .collect();
        (s, seq)
    }

    #[test]
    fn cheap_configurations_alternate_in_a_seeded_random_order() {
        let (s, seq) = units_of(STUDY);
        let Order::Alternate { seed } = s.order else {
            panic!("{:?}", s.order)
        };
        assert!(s.order_why.contains("cheap to switch"), "{}", s.order_why);
        assert!(s.order_text().contains(&format!("(seed {seed})")));
        assert_eq!(seq.len(), 12);
        // Every round holds each configuration once.
        for round in seq.chunks(2) {
            assert_eq!(round[0].1, round[1].1);
            assert_eq!(round[0].2, round[1].2);
            assert_ne!(round[0].0, round[1].0);
        }
        // Not always the same configuration first.
        let firsts: Vec<usize> = seq.chunks(2).map(|r| r[0].0).collect();
        assert!(firsts.contains(&0) && firsts.contains(&1), "{firsts:?}");
        // The same file runs in the same order; another seed in another.
        assert_eq!(units_of(STUDY).1, seq);
        let other = STUDY.replace(
            "name = \"t\"",
            "name = \"t\"\norder = \"alternate\"\nseed = 7",
        );
        let (s7, seq7) = units_of(&other);
        assert_eq!(s7.order, Order::Alternate { seed: 7 });
        assert_ne!(seq7, seq);
    }

    #[test]
    fn costly_configurations_run_in_abba_blocks() {
        let text = STUDY.replace("set = { value = 50 }", "profile = \"latency-performance\"");
        let (s, seq) = units_of(&text);
        assert_eq!(s.order, Order::Blocks { blocks: 2 });
        assert!(s.order_why.contains("profile"), "{}", s.order_why);
        let cfgs: Vec<usize> = seq.iter().map(|u| u.0).collect();
        // Block 0 holds repetition 0 of each point, block 1 repetition 1:
        // A A A B B B | B B B A A A.
        assert_eq!(cfgs, [0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0]);
        assert!(seq[..6].iter().all(|u| u.2 == 0));
        assert!(seq[6..].iter().all(|u| u.2 == 1));
        // Three blocks of five repetitions (2 + 2 + 1) in ABBAAB.
        let text3 = text.replace("repetitions = 2", "repetitions = 5").replace(
            "name = \"t\"",
            "name = \"t\"\norder = \"blocks\"\nblocks = 3",
        );
        let (s3, seq3) = units_of(&text3);
        let blocks: Vec<(usize, u32)> = seq3
            .iter()
            .filter(|u| u.1 == 0)
            .map(|u| (u.0, s3.order.block(u.2, 5)))
            .collect();
        assert_eq!(
            blocks,
            [
                (0, 0),
                (0, 0),
                (1, 0),
                (1, 0),
                (1, 1),
                (1, 1),
                (0, 1),
                (0, 1),
                (0, 2),
                (1, 2)
            ]
        );
    }

    #[test]
    fn control_repeats_the_first_configuration() {
        let text = STUDY.replace("name = \"t\"", "name = \"t\"\ncontrol = true");
        let (s, seq) = units_of(&text);
        assert!(s.control);
        assert_eq!(s.configurations.len(), 3);
        assert_eq!(s.configurations[2].name, crate::study::CONTROL_NAME);
        assert_eq!(s.workloads[0].overrides[2], s.workloads[0].overrides[0]);
        // Alternating: every round holds all three.
        assert_eq!(seq.len(), 18);
        for round in seq.chunks(3) {
            let mut c: Vec<usize> = round.iter().map(|u| u.0).collect();
            c.sort();
            assert_eq!(c, [0, 1, 2]);
        }
    }

    #[test]
    fn sequential_and_interleaved() {
        let reg = registry();
        let text = STUDY.replace("name = \"t\"", "name = \"t\"\norder = \"sequential\"");
        let s = Study::parse("t.toml", &text, &reg).unwrap();
        let plan = Plan::new(&s, &reg, RunOptions::default());
        assert_eq!(plan.points.len(), 6);
        assert_eq!(plan.units.len(), 12);
        let cfgs: Vec<usize> = plan
            .units
            .iter()
            .map(|u| plan.points[u.point].config)
            .collect();
        assert_eq!(cfgs, [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]);
        // Configuration b overrides the value.
        let b = plan.points.iter().find(|p| p.config == 1).unwrap();
        assert_eq!(b.params.f64("value").unwrap(), 50.0);

        let text = STUDY.replace("name = \"t\"", "name = \"t\"\norder = \"interleaved\"");
        let s = Study::parse("t.toml", &text, &reg).unwrap();
        let plan = Plan::new(&s, &reg, RunOptions::default());
        let seq: Vec<(usize, usize, u32)> = plan
            .units
            .iter()
            .map(|u| {
                (
                    plan.points[u.point].point,
                    plan.points[u.point].config,
                    u.repetition,
                )
            })
            .collect();
        assert_eq!(&seq[..4], &[(0, 0, 0), (0, 1, 0), (0, 0, 1), (0, 1, 1)]);
        assert_eq!(seq.len(), 12);
    }

    #[test]
    fn quick_and_scale() {
        let reg = registry();
        let s = Study::parse("t.toml", STUDY, &reg).unwrap();
        let plan = Plan::new(
            &s,
            &reg,
            RunOptions {
                scale: 0.5,
                quick: true,
            },
        );
        assert_eq!(plan.units.len(), 6);
        assert_eq!(plan.points[0].params.f64("sleep_s").unwrap(), 1.0);
    }
}
