//! The resolved plan a run stores: the typed study and, for each workload,
//! what its code declared when the run was made — metric specs of every
//! table, views, how metrics combine. `show`, `report`, `compare` and
//! `--resume` read it and never parse the study text again, so a run made
//! by an older benchlab stays readable when a parameter is renamed or a
//! label changes.
//!
//! Versioned: a newer benchlab reads every older version; an older one
//! refuses a newer plan with a clear message instead of misreading it.

use serde::{Deserialize, Serialize};

use crate::param::{ParamKind, Params};
use crate::plan::Plan;
use crate::shape::{Combine, ServerSide, ViewSpec};
use crate::study::Study;
use crate::workload::{Better, MetricSpec, Registry, Workload};

/// The version of the stored plan this benchlab writes. Version 2 added
/// each workload's byte-count parameters and the expanded plan; a
/// version-1 plan gets them once, when its store is upgraded.
pub const PLAN_VERSION: u32 = 2;

/// A metric spec as stored (owned text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricInfo {
    /// Key in the samples' metrics.
    pub name: String,
    /// Caption with its unit.
    pub label: String,
    /// Better direction.
    pub better: Better,
    /// Decimals shown.
    pub decimals: usize,
    /// How it combines over client hosts and targets.
    pub combine: Combine,
}

impl From<&MetricSpec> for MetricInfo {
    fn from(m: &MetricSpec) -> Self {
        MetricInfo {
            name: m.name.to_string(),
            label: m.label.to_string(),
            better: m.better,
            decimals: m.decimals,
            combine: m.combine,
        }
    }
}

/// The metrics of the tables of one group of points: those whose
/// parameters, less the row parameter, are `fixed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableShape {
    /// The group's parameters without the row parameter.
    pub fixed: Params,
    /// One table per metric, in this order.
    pub metrics: Vec<MetricInfo>,
}

/// What a workload of the study declared when the run was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadShape {
    /// The workload kind.
    pub kind: String,
    /// What served its clients.
    pub server_side: ServerSide,
    /// Whether `clients` was a sweep axis.
    pub clients_axis: bool,
    /// Whether its tables end with an Average row.
    pub average_row: bool,
    /// Table metrics per group of points.
    pub tables: Vec<TableShape>,
    /// Every metric it derives, with its combine rule.
    pub metrics: Vec<MetricInfo>,
    /// Its report views.
    pub views: Vec<ViewSpec>,
    /// The parameters whose values are byte counts (axis labels such as
    /// `64KiB`); empty in a version-1 plan until it is upgraded.
    #[serde(default)]
    pub byte_params: Vec<String>,
    /// The parameters that stand for the system measured, not the
    /// measurement ([`Workload::simulated_params`]): left out of the
    /// plan's fingerprint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub simulated_params: Vec<String>,
    /// The metric that counts its operations per second
    /// ([`Workload::operation_rate`]); none in a plan stored before it
    /// was declared, whose monitors then have no per-operation figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_rate: Option<String>,
}

impl WorkloadShape {
    /// The table metrics of the group whose fixed parameters are `fixed`
    /// (the first group's when no group matches exactly).
    pub fn table_metrics(&self, fixed: &Params) -> Vec<MetricInfo> {
        self.tables
            .iter()
            .find(|t| &t.fixed == fixed)
            .or_else(|| self.tables.first())
            .map(|t| t.metrics.clone())
            .unwrap_or_default()
    }
}

/// The plan a run stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedPlan {
    /// [`PLAN_VERSION`] of the writer.
    pub version: u32,
    /// The validated study.
    pub study: Study,
    /// One per `study.workloads`, in the same order.
    pub workloads: Vec<WorkloadShape>,
    /// The study expanded with the run's options: every point with its
    /// effective parameters and the units in execution order (what
    /// `--resume` and the progress of a running run count against). None
    /// in a plan stored before version 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expanded: Option<Plan>,
}

/// Why a stored plan cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Written by a newer benchlab.
    #[error("the run's plan is version {found}, newer than this benchlab reads ({PLAN_VERSION}): use a newer benchlab")]
    Newer {
        /// The stored version.
        found: u32,
    },
    /// Not a plan at all.
    #[error("the run's stored plan is unreadable: {0}")]
    Corrupt(String),
    /// A workload kind this binary lacks (only matters for running).
    #[error("workload `{0}` is not known to this benchlab")]
    UnknownKind(String),
}

impl ResolvedPlan {
    /// The plan's fingerprint: 16 hex digits naming what the run measured
    /// and how, so that the runs of one study name whose plans differ
    /// (a point added, a duration or a configuration changed, another
    /// repetition count, `--quick` or `--scale`) form separate series in
    /// a history.
    ///
    /// It covers the study name, its order (not an alternate order's
    /// seed, drawn for each run) and control, every
    /// configuration (placement, environment, host map, services) and
    /// every workload (kind, name, repetitions, axes, parameters and
    /// overrides, hosts of its sides) as resolved, and the run's options.
    /// It leaves out what does not change what a figure means: the file's
    /// name and text (comments, layout), descriptions, why an order was
    /// chosen, the `[[host]]` definitions (addresses and credentials
    /// move), the steps, comparisons and cross-checks the report draws,
    /// and the parameters a workload declares as the simulated system
    /// ([`WorkloadShape::simulated_params`]).
    ///
    /// FNV-1a (64 bits) over the canonical JSON of those parts: a name for
    /// a series, not a security hash.
    pub fn fingerprint(&self, options: &crate::plan::RunOptions) -> String {
        let s = &self.study;
        let configurations: Vec<serde_json::Value> = s
            .configurations
            .iter()
            .map(|c| {
                let mut v = serde_json::to_value(c).unwrap_or_default();
                if let Some(m) = v.as_object_mut() {
                    m.remove("description");
                }
                v
            })
            .collect();
        let workloads: Vec<serde_json::Value> = s
            .workloads
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let mut w = w.clone();
                if let Some(shape) = self.workloads.get(i) {
                    for p in &shape.simulated_params {
                        w.base.0.remove(p);
                        for o in &mut w.overrides {
                            o.0.remove(p);
                        }
                    }
                }
                serde_json::to_value(&w).unwrap_or_default()
            })
            .collect();
        // The order's kind and blocks, not the seed an alternate order
        // draws afresh for every run.
        let order = match s.order {
            crate::study::Order::Alternate { .. } => serde_json::json!("alternate"),
            other => serde_json::to_value(other).unwrap_or_default(),
        };
        let canonical = serde_json::json!({
            "study": s.name,
            "order": order,
            "control": s.control,
            "configurations": configurations,
            "workloads": workloads,
            "quick": options.quick,
            "scale": options.scale,
        });
        // serde_json's maps are sorted (no `preserve_order`): one text per
        // plan.
        let text = canonical.to_string();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }

    /// Resolves a study against the registry: `points` are the (workload
    /// index, parameters) of the points to be run or stored, from which
    /// each table group's metrics are taken.
    pub fn resolve<'a>(
        study: &Study,
        registry: &Registry,
        points: impl IntoIterator<Item = (usize, &'a Params)>,
    ) -> Result<ResolvedPlan, PlanError> {
        let mut workloads = Vec::with_capacity(study.workloads.len());
        for entry in &study.workloads {
            let wl = registry
                .get(&entry.kind)
                .ok_or_else(|| PlanError::UnknownKind(entry.kind.clone()))?;
            let base = entry.points().into_iter().next().unwrap_or_default();
            workloads.push(WorkloadShape {
                kind: entry.kind.clone(),
                server_side: wl.server_side(),
                clients_axis: wl.clients_axis(),
                average_row: wl.average_row(),
                tables: Vec::new(),
                metrics: wl.metrics(&base).iter().map(MetricInfo::from).collect(),
                views: wl.views(&base),
                byte_params: byte_params(wl),
                simulated_params: wl
                    .simulated_params()
                    .iter()
                    .map(|p| p.to_string())
                    .collect(),
                operation_rate: wl.operation_rate().map(str::to_string),
            });
        }
        for (w, params) in points {
            let (Some(entry), Some(shape)) = (study.workloads.get(w), workloads.get_mut(w)) else {
                continue;
            };
            let mut fixed = params.clone();
            fixed.0.remove(&entry.rows);
            if shape.tables.iter().any(|t| t.fixed == fixed) {
                continue;
            }
            let wl = registry
                .get(&entry.kind)
                .ok_or_else(|| PlanError::UnknownKind(entry.kind.clone()))?;
            let metrics = wl
                .table_metrics(&fixed)
                .iter()
                .map(MetricInfo::from)
                .collect();
            shape.tables.push(TableShape { fixed, metrics });
        }
        Ok(ResolvedPlan {
            version: PLAN_VERSION,
            study: study.clone(),
            workloads,
            expanded: None,
        })
    }

    /// The plan as stored (JSON).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a plan serializes")
    }

    /// Reads a stored plan, refusing one from a newer benchlab.
    pub fn from_json(text: &str) -> Result<ResolvedPlan, PlanError> {
        #[derive(Deserialize)]
        struct Header {
            version: u32,
        }
        let h: Header =
            serde_json::from_str(text).map_err(|e| PlanError::Corrupt(e.to_string()))?;
        if h.version > PLAN_VERSION {
            return Err(PlanError::Newer { found: h.version });
        }
        serde_json::from_str(text).map_err(|e| PlanError::Corrupt(e.to_string()))
    }
}

/// The parameters of a workload whose values are byte counts.
pub fn byte_params(wl: &dyn Workload) -> Vec<String> {
    wl.params()
        .iter()
        .filter(|p| p.kind == ParamKind::Bytes)
        .map(|p| p.name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FAKE;

    const STUDY: &str = r#"
[study]
name = "t"
[[configuration]]
name = "a"
[[workload]]
kind = "fake"
size = [1, 2]
value = [1.5, 3]
"#;

    #[test]
    fn the_fingerprint_follows_the_plan_not_its_words() {
        let mut reg = Registry::new();
        reg.add(&FAKE);
        let print = |text: &str, quick: bool| {
            let study = Study::parse("t.toml", text, &reg).unwrap();
            let points = study.workloads[0].points();
            ResolvedPlan::resolve(&study, &reg, points.iter().map(|p| (0, p)))
                .unwrap()
                .fingerprint(&crate::plan::RunOptions { scale: 1.0, quick })
        };
        let base = "[study]\nname = \"t\"\n[[configuration]]\nname = \"a\"\n[[workload]]\nkind = \"fake\"\nsize = [1, 2]\n";
        let fp = print(base, false);
        assert_eq!(fp.len(), 16);
        assert_eq!(
            print(base, false),
            fp,
            "the same plan, another alternate seed"
        );
        // Words and the simulated system: the same series.
        let described = base.replace("name = \"a\"", "name = \"a\"\ndescription = \"x\"");
        assert_eq!(print(&format!("# a comment\n{described}"), false), fp);
        assert_eq!(print(&format!("{base}value = 115\nseed = 7\n"), false), fp);
        // What the figures mean: another series.
        assert_ne!(print(&format!("{base}sleep_s = 0.5\n"), false), fp);
        assert_ne!(print(&base.replace("[1, 2]", "[1, 2, 4]"), false), fp);
        assert_ne!(
            print(&base.replace("name = \"a\"", "name = \"b\""), false),
            fp
        );
        assert_ne!(print(base, true), fp, "--quick");
    }

    #[test]
    fn a_plan_round_trips_and_newer_ones_are_refused() {
        let mut reg = Registry::new();
        reg.add(&FAKE);
        let study = Study::parse("t.toml", STUDY, &reg).unwrap();
        let points = study.workloads[0].points();
        let plan = ResolvedPlan::resolve(&study, &reg, points.iter().map(|p| (0, p))).unwrap();
        // `value` is swept besides the rows: two table groups.
        assert_eq!(plan.workloads[0].tables.len(), 2);
        let back = ResolvedPlan::from_json(&plan.to_json()).unwrap();
        assert_eq!(back, plan);
        let newer =
            plan.to_json()
                .replacen(&format!("\"version\":{PLAN_VERSION}"), "\"version\":99", 1);
        let err = ResolvedPlan::from_json(&newer).unwrap_err().to_string();
        assert!(err.contains("version 99"), "{err}");
        assert!(ResolvedPlan::from_json("{}").is_err());
    }
}
