//! A store written by an older benchlab, brought up to what [`crate::load`]
//! reads — once per run, and marked so. What the older benchlab did not
//! store is resolved here with the registry of this binary: the plan of a
//! run made before plans were stored (from its study text and stored
//! points), a version-1 plan's byte-count parameters and expanded points,
//! the workloads' notes on each repetition, and an imported run's figures
//! parsed from its CSV. The mark (`run_reading`, and a run event
//! `upgraded`) says which benchlab resolved them and what it could not
//! (a workload this binary lacks reads with plain parameter labels and
//! without notes). From then on the run reads from the store alone.

use benchlab_core::plan::Plan;
use benchlab_core::resolved::{byte_params, ResolvedPlan, PLAN_VERSION};
use benchlab_core::study::Study;
use benchlab_core::units::now_rfc3339;
use benchlab_core::Registry;
use benchlab_store::{Reading, SampleStatus, Store, StoreError, READING_VERSION};

use crate::import::{figures_csv, is_published};

/// Why a run could not be upgraded.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The store refused.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run's own stored text cannot be read by this benchlab.
    #[error("run {run}: {why}")]
    Run {
        /// The run.
        run: i64,
        /// Why.
        why: String,
    },
}

/// Upgrades every run of the store that lacks its reading pieces;
/// returns the runs upgraded. A run that cannot be (its study text no
/// longer validates and it has no stored plan) is left as it is and
/// named in the error, after the others are done.
pub fn upgrade(store: &Store, registry: &Registry) -> Result<Vec<i64>, UpgradeError> {
    let mut done = Vec::new();
    let mut failed = None;
    for run_id in store.runs_to_upgrade(READING_VERSION)? {
        match upgrade_run(store, registry, run_id) {
            Ok(()) => done.push(run_id),
            Err(e @ UpgradeError::Run { .. }) => failed = failed.or(Some(e)),
            Err(e) => return Err(e),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(done),
    }
}

fn upgrade_run(store: &Store, registry: &Registry, run_id: i64) -> Result<(), UpgradeError> {
    let run = store.run(run_id)?;
    let fail = |why: String| UpgradeError::Run { run: run_id, why };
    let mut unknown: Vec<String> = Vec::new();
    if store.configurations(run_id)?.iter().any(is_published) {
        if store.published(run_id)?.is_none() {
            let report = figures_csv(&run.study_name, &run.study_text)
                .map_err(|e| fail(format!("its imported figures ({}): {e}", run.study_file)))?;
            let json = serde_json::to_string(&report).expect("a report serializes");
            store.set_published(run_id, &json)?;
        }
    } else {
        let points = store.points(run_id)?;
        let mut plan = match store.plan(run_id)? {
            Some(text) => ResolvedPlan::from_json(&text).map_err(|e| fail(e.to_string()))?,
            None => {
                let study = Study::parse(&run.study_file, &run.study_text, registry)
                    .map_err(|e| fail(format!("it has no stored plan, and its study text no longer validates with this benchlab: {e}")))?;
                let plan = ResolvedPlan::resolve(
                    &study,
                    registry,
                    points.iter().map(|p| (p.workload_idx, &p.params)),
                )
                .map_err(|e| fail(e.to_string()))?;
                store.set_plan(run_id, plan.version, &plan.to_json())?;
                plan
            }
        };
        for shape in &mut plan.workloads {
            match registry.get(&shape.kind) {
                Some(wl) if shape.byte_params.is_empty() => shape.byte_params = byte_params(wl),
                Some(_) => {}
                None => {
                    if !unknown.contains(&shape.kind) {
                        unknown.push(shape.kind.clone());
                    }
                }
            }
        }
        if plan.expanded.is_none() && unknown.is_empty() {
            plan.expanded = Some(Plan::new(&plan.study, registry, run.options));
        }
        if plan.version < PLAN_VERSION {
            plan.version = PLAN_VERSION;
            store.replace_plan(run_id, plan.version, &plan.to_json())?;
        }
        let samples = store.samples(run_id)?;
        for p in &points {
            let Some(wl) = registry.get(&p.kind) else {
                continue;
            };
            for s in samples
                .iter()
                .filter(|s| s.point_id == p.id && s.status == SampleStatus::Ok)
            {
                store.add_notes(p.id, s.repetition, &wl.notes(&p.params, &s.metrics))?;
            }
        }
    }
    let mut origin = format!("resolved at upgrade by benchlab {}", benchlab_core::VERSION);
    if !unknown.is_empty() {
        origin.push_str(&format!(
            "; workloads this benchlab lacks read without notes and with plain parameter labels: {}",
            unknown.join(", ")
        ));
    }
    store.add_event(run_id, &now_rfc3339(), "upgraded", &origin)?;
    store.set_reading(
        run_id,
        &Reading {
            version: READING_VERSION,
            origin,
        },
    )?;
    Ok(())
}
