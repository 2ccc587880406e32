//! Call-stack profiles in the report (issue 40, docs/stacks.md): each
//! configuration's profile of each side at each point (its quoted
//! repetition's, or every repetition's merged, as the study asked), what
//! the sampling cost on each host, and for each configuration against
//! the first, per point and side, the differential profile and the
//! functions whose CPU time per operation grew or shrank most. The
//! analysis is `benchlab_stacks::analysis`'s; this module only picks the
//! repetitions and pairs the profiles.

use std::collections::BTreeMap;

use benchlab_core::resolved::ResolvedPlan;
use benchlab_core::study::StackRepetitions;
use benchlab_stacks::analysis::{self, Change, Per, Profile};
use benchlab_stacks::{SIDE_IDLE, SIDE_OTHER};
use benchlab_store::{
    ConfigRow, PointRow, SampleRow, SampleStatus, StackProfileRow, StackRecordingRow,
};
use serde::{Deserialize, Serialize};

/// The sides that are neither compared nor drawn: the idle task (time
/// not spent) and every other process of the host (not the study's: on
/// a shared machine, whatever else ran). Their samples stay in the
/// profiles.
pub const UNCOMPARED: &[&str] = &[SIDE_IDLE, SIDE_OTHER];

/// The call-stack profiles of a run (empty when it sampled none).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StacksReport {
    /// Per configuration, point and recording host: what sampling cost.
    pub recordings: Vec<StackRecording>,
    /// Per configuration, point, host and side: its folded stacks.
    pub profiles: Vec<StackProfile>,
    /// Per configuration against the first, point and side: what grew.
    pub comparisons: Vec<StackComparison>,
}

impl StacksReport {
    /// Nothing sampled.
    pub fn is_empty(&self) -> bool {
        self.recordings.is_empty() && self.profiles.is_empty()
    }
}

/// One host's recordings of a point's repetitions, summed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackRecording {
    /// The configuration (a comparison's column label).
    pub configuration: String,
    /// The workload.
    pub workload: String,
    /// The point's label.
    pub point: String,
    /// The host that recorded.
    pub host: String,
    /// Repetitions recorded (with a profile or not).
    pub repetitions: u32,
    /// Samples per second and CPU.
    pub hz: u32,
    /// How user stacks were walked (`fp`, `dwarf`).
    pub unwind: String,
    /// Seconds sampled, summed over the repetitions.
    pub window_s: f64,
    /// Every sample (all CPUs, the idle task's included).
    pub samples: u64,
    /// The samples of a process other than the idle task.
    pub busy_samples: u64,
    /// CPU time `perf record` took inside the sampling windows, s.
    pub perf_window_cpu_s: f64,
    /// CPU time `perf record` took in all, its start-up included, s.
    pub perf_cpu_s: f64,
    /// CPU time `perf script` took after the points, s.
    pub script_cpu_s: f64,
    /// The sampler's cost: `perf_window_cpu_s` over the busy CPU time it
    /// sampled (`busy_samples / hz`), % (`None`: nothing busy sampled).
    pub overhead_pct: Option<f64>,
    /// The perf that recorded.
    pub perf_version: String,
    /// The repetitions without a profile and why (`repetition 2: …`);
    /// their measurements are kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_profile: Vec<String>,
}

/// One side's profile of a point under one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackProfile {
    /// The configuration (a comparison's column label).
    pub configuration: String,
    /// The workload.
    pub workload: String,
    /// The point's label.
    pub point: String,
    /// The host the side ran on.
    pub host: String,
    /// The side (`server`, `client`, `service:NAME`, `kernel`, `idle`,
    /// `other`).
    pub side: String,
    /// The repetitions merged (the quoted one, or all).
    pub repetitions: Vec<u32>,
    /// Samples per second and CPU.
    pub hz: u32,
    /// Seconds sampled, summed over the repetitions.
    pub window_s: f64,
    /// Operations counted while sampling (the workload's operation rate
    /// times the window), when the workload counts them.
    pub operations: Option<f64>,
    /// Its samples.
    pub samples: u64,
    /// Folded stacks (`frame;frame;… count` lines, root first).
    pub folded: String,
}

impl StackProfile {
    /// For the analysis.
    pub fn profile(&self) -> Profile {
        Profile::from_folded(&self.folded, self.hz, self.window_s, self.operations)
    }

    /// `workload · point · side on host`, the point left out when empty.
    pub fn place(&self) -> String {
        place(&self.workload, &self.point)
    }
}

/// `workload · point` (the workload alone for a point without a label).
pub fn place(workload: &str, point: &str) -> String {
    if point.is_empty() {
        workload.to_string()
    } else {
        format!("{workload} · {point}")
    }
}

/// One side of one point: a configuration against the first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackComparison {
    /// The compared configuration (B).
    pub configuration: String,
    /// The first configuration (A).
    pub baseline: String,
    /// The workload.
    pub workload: String,
    /// The point's label.
    pub point: String,
    /// The host of B's side.
    pub host: String,
    /// The side.
    pub side: String,
    /// What the figures are divided by.
    pub per: Per,
    /// Their unit (`CPU µs/op`, `CPU ms/s`).
    pub unit: String,
    /// The side's whole CPU time per unit under A.
    pub total_a: f64,
    /// Under B.
    pub total_b: f64,
    /// The functions whose inclusive time grew most, most first.
    pub grew: Vec<Change>,
    /// The functions whose inclusive time shrank most, most first.
    pub shrank: Vec<Change>,
    /// The differential profile: `stack a b` lines, each stack's time
    /// under A and B in units of `1 / scale` of `unit`.
    pub differential: String,
    /// See `differential`.
    pub scale: f64,
}

/// What [`build`] reads.
pub struct Source<'a> {
    /// The run's plan.
    pub plan: &'a ResolvedPlan,
    /// Its points.
    pub points: &'a [PointRow],
    /// Its samples.
    pub samples: &'a [SampleRow],
    /// Its configurations.
    pub configurations: &'a [ConfigRow],
    /// Its stack recordings.
    pub recordings: &'a [StackRecordingRow],
    /// Its sides' stacks.
    pub profiles: &'a [StackProfileRow],
}

/// The profiles of a run's points, and each configuration's comparison
/// with the first.
pub fn build(src: &Source<'_>) -> StacksReport {
    let mut r = StacksReport::default();
    let config = |i: usize| {
        src.configurations
            .get(i)
            .map(|c| c.name.clone())
            .unwrap_or_else(|| format!("#{i}"))
    };
    for p in src.points {
        let recs: Vec<&StackRecordingRow> = src
            .recordings
            .iter()
            .filter(|x| x.point_id == p.id)
            .collect();
        if recs.is_empty() {
            continue;
        }
        r.recordings
            .extend(recordings(p, &recs, &config(p.config_idx)));
        let reps = shown_reps(src, p, &recs);
        let operations = operations_of(src, p);
        let mut merged: BTreeMap<(String, String), StackProfile> = BTreeMap::new();
        for row in src
            .profiles
            .iter()
            .filter(|s| s.point_id == p.id && reps.contains(&s.repetition))
        {
            let Some(rec) = recs
                .iter()
                .find(|x| x.repetition == row.repetition && x.host == row.recorded_on)
            else {
                continue;
            };
            let ops = operations
                .get(&row.repetition)
                .map(|rate| rate * rec.window_s);
            let e = merged
                .entry((row.host.clone(), row.side.clone()))
                .or_insert_with(|| StackProfile {
                    configuration: config(p.config_idx),
                    workload: p.workload_name.clone(),
                    point: p.label.clone(),
                    host: row.host.clone(),
                    side: row.side.clone(),
                    repetitions: Vec::new(),
                    hz: rec.hz,
                    window_s: 0.0,
                    operations: Some(0.0),
                    samples: 0,
                    folded: String::new(),
                });
            let mut prof = e.profile();
            prof.merge(&Profile::from_folded(
                &row.folded,
                rec.hz,
                rec.window_s,
                ops,
            ));
            e.repetitions.push(row.repetition);
            e.window_s = prof.window_s;
            e.operations = prof.operations;
            e.samples = prof.samples();
            e.folded = folded(&prof);
        }
        r.profiles.extend(merged.into_values());
    }
    r.comparisons = comparisons(&r.profiles, &config(0));
    r
}

/// A profile's stacks as folded text, in the order of the stacks.
fn folded(p: &Profile) -> String {
    p.stacks.iter().map(|(s, n)| format!("{s} {n}\n")).collect()
}

/// A point's recordings summed per host.
fn recordings(p: &PointRow, recs: &[&StackRecordingRow], config: &str) -> Vec<StackRecording> {
    let mut out: Vec<StackRecording> = Vec::new();
    for x in recs {
        let i = match out.iter().position(|o| o.host == x.host) {
            Some(i) => i,
            None => {
                out.push(StackRecording {
                    configuration: config.to_string(),
                    workload: p.workload_name.clone(),
                    point: p.label.clone(),
                    host: x.host.clone(),
                    repetitions: 0,
                    hz: x.hz,
                    unwind: x.unwind.clone(),
                    window_s: 0.0,
                    samples: 0,
                    busy_samples: 0,
                    perf_window_cpu_s: 0.0,
                    perf_cpu_s: 0.0,
                    script_cpu_s: 0.0,
                    overhead_pct: None,
                    perf_version: x.perf_version.clone(),
                    no_profile: Vec::new(),
                });
                out.len() - 1
            }
        };
        let o = &mut out[i];
        o.repetitions += 1;
        if let Some(why) = &x.reason {
            o.no_profile
                .push(format!("repetition {}: {why}", x.repetition + 1));
            continue;
        }
        o.window_s += x.window_s;
        o.samples += x.samples;
        o.busy_samples += x.busy_samples;
        o.perf_window_cpu_s += x.perf_window_cpu_s;
        o.perf_cpu_s += x.perf_cpu_s;
        o.script_cpu_s += x.script_cpu_s;
        if o.perf_version.is_empty() {
            o.perf_version = x.perf_version.clone();
        }
    }
    for o in &mut out {
        let busy_s = o.busy_samples as f64 / f64::from(o.hz.max(1));
        o.overhead_pct = (busy_s > 0.0).then(|| o.perf_window_cpu_s / busy_s * 100.0);
    }
    out
}

/// The repetitions a point's profiles merge: the quoted one (the median
/// run of the headline metric, else the first with a profile), or every
/// one with a profile, as the workload asked.
fn shown_reps(src: &Source<'_>, p: &PointRow, recs: &[&StackRecordingRow]) -> Vec<u32> {
    let mut with: Vec<u32> = recs
        .iter()
        .filter(|x| x.reason.is_none())
        .map(|x| x.repetition)
        .collect();
    with.sort_unstable();
    with.dedup();
    let all = src
        .plan
        .study
        .workloads
        .get(p.workload_idx)
        .and_then(|w| w.stacks)
        .is_some_and(|s| s.repetitions == StackRepetitions::All);
    if all {
        return with;
    }
    let quoted = crate::build::latency_rep(p, src.samples, src.plan).filter(|r| with.contains(r));
    quoted.or(with.first().copied()).into_iter().collect()
}

/// Each repetition's operation rate (per second), when the workload
/// declares the metric that counts its operations.
fn operations_of(src: &Source<'_>, p: &PointRow) -> BTreeMap<u32, f64> {
    let Some(metric) = src
        .plan
        .workloads
        .get(p.workload_idx)
        .and_then(|w| w.operation_rate.as_deref())
    else {
        return BTreeMap::new();
    };
    src.samples
        .iter()
        .filter(|s| s.point_id == p.id && s.status == SampleStatus::Ok)
        .filter_map(|s| Some((s.repetition, *s.metrics.get(metric)?)))
        .filter(|(_, v)| v.is_finite() && *v > 0.0)
        .collect()
}

/// Each configuration's profiles against the first's at the same point,
/// side by side (the same host, else the one profile of that side).
pub fn comparisons(profiles: &[StackProfile], baseline: &str) -> Vec<StackComparison> {
    let mut out = Vec::new();
    let compared = |p: &&StackProfile| !UNCOMPARED.contains(&p.side.as_str());
    for b in profiles
        .iter()
        .filter(compared)
        .filter(|p| p.configuration != baseline)
    {
        let same: Vec<&StackProfile> = profiles
            .iter()
            .filter(|a| {
                a.configuration == baseline
                    && a.workload == b.workload
                    && a.point == b.point
                    && a.side == b.side
            })
            .collect();
        let a = match same.iter().find(|a| a.host == b.host) {
            Some(a) => *a,
            None if same.len() == 1 => same[0],
            None => continue,
        };
        let (pa, pb) = (a.profile(), b.profile());
        let (Some(d), Some((differential, scale))) =
            (analysis::diff(&pa, &pb), analysis::differential(&pa, &pb))
        else {
            continue;
        };
        out.push(StackComparison {
            configuration: b.configuration.clone(),
            baseline: baseline.to_string(),
            workload: b.workload.clone(),
            point: b.point.clone(),
            host: b.host.clone(),
            side: b.side.clone(),
            per: d.per,
            unit: d.per.unit().to_string(),
            total_a: d.total_a,
            total_b: d.total_b,
            grew: d.grew,
            shrank: d.shrank,
            differential,
            scale,
        });
    }
    out
}

/// The profiles of compared columns: each column's (label, its run's
/// profiles, its configuration there) under the column's label, compared
/// with the first column.
pub fn columns(cols: &[(String, &StacksReport, String)]) -> StacksReport {
    use crate::compare::relabelled;
    let mut r = StacksReport::default();
    for (label, s, config) in cols {
        r.recordings.extend(relabelled(
            &s.recordings,
            config,
            label,
            |x: &mut StackRecording| &mut x.configuration,
        ));
        r.profiles.extend(relabelled(
            &s.profiles,
            config,
            label,
            |x: &mut StackProfile| &mut x.configuration,
        ));
    }
    if let Some((base, ..)) = cols.first() {
        r.comparisons = comparisons(&r.profiles, base);
    }
    r
}

/// Where a comparison's rows stand in one table: every compared side of
/// a point, the functions that grew (or shrank) most across them,
/// most first, at most `analysis::TABLE_ROWS`.
pub fn ranked<'a>(
    comparisons: &[&'a StackComparison],
    grew: bool,
) -> Vec<(&'a StackComparison, &'a Change)> {
    let mut rows: Vec<(&StackComparison, &Change)> = comparisons
        .iter()
        .flat_map(|c| {
            let list = if grew { &c.grew } else { &c.shrank };
            list.iter().map(move |ch| (*c, ch))
        })
        .collect();
    rows.sort_by(|x, y| {
        let (dx, dy) = (x.1.delta, y.1.delta);
        let by = if grew {
            dy.total_cmp(&dx)
        } else {
            dx.total_cmp(&dy)
        };
        by.then(x.1.function.cmp(&y.1.function))
    });
    rows.truncate(analysis::TABLE_ROWS);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(config: &str, side: &str, folded: &str, ops: f64) -> StackProfile {
        StackProfile {
            configuration: config.into(),
            workload: "w".into(),
            point: "p".into(),
            host: "sut".into(),
            side: side.into(),
            repetitions: vec![0],
            hz: 100,
            window_s: 10.0,
            operations: Some(ops),
            samples: 0,
            folded: folded.into(),
        }
    }

    /// B's planted function is first among every side's growth, the
    /// idle task and other processes are not compared, and a column
    /// comparison relabels and compares again.
    #[test]
    fn the_planted_function_leads_the_table_across_sides() {
        let profiles = vec![
            profile("a", "client", "prog;main;work 100\n", 1000.0),
            profile("a", "kernel", "kworker;poll 10\n", 1000.0),
            profile("a", "idle", "swapper;idle 500\n", 1000.0),
            profile(
                "b",
                "client",
                "prog;main;work 100\nprog;main;planted 80\n",
                1000.0,
            ),
            profile("b", "kernel", "kworker;poll 20\n", 1000.0),
            profile("b", "idle", "swapper;idle 100\n", 1000.0),
        ];
        let c = comparisons(&profiles, "a");
        assert_eq!(c.len(), 2, "{c:#?}");
        assert!(c.iter().all(|c| c.side != "idle"));
        let refs: Vec<&StackComparison> = c.iter().collect();
        let rows = ranked(&refs, true);
        assert_eq!(rows[0].1.function, "planted");
        assert_eq!(rows[0].0.side, "client");
        // 80 samples at 100 Hz over 1000 operations: 800 µs per op.
        assert!((rows[0].1.delta - 800.0).abs() < 1e-9);
        assert!((rows[0].1.share_b_pct - 80.0 * 100.0 / 180.0).abs() < 1e-9);
        assert_eq!(rows[1].1.function, "poll");
        let a = StacksReport {
            profiles: profiles[..3].to_vec(),
            ..Default::default()
        };
        let b = StacksReport {
            profiles: profiles[3..].to_vec(),
            ..Default::default()
        };
        let r = columns(&[
            ("1:a".into(), &a, "a".into()),
            ("2:b".into(), &b, "b".into()),
        ]);
        assert_eq!(r.comparisons.len(), 2);
        assert_eq!(r.comparisons[0].baseline, "1:a");
        assert_eq!(r.comparisons[0].configuration, "2:b");
    }
}
