//! Bringing a store written by an older benchlab up to what a reader
//! reads: `benchlab store upgrade`, or the first writing command (`run`)
//! against that store. Reading commands never do it: they open the store
//! read-only and name this command instead.
//!
//! Two steps. The schema is migrated when the store is opened to write
//! ([`crate::MIGRATIONS`]). Then every run lacking its reading pieces is
//! resolved once with the registry of this binary: the plan of a run made
//! before plans were stored (from its study text and stored points), a
//! version-1 plan's byte-count parameters and expanded points, the
//! workloads' notes on each repetition, and an imported run's figures
//! (parsed by the importer, which sits above the store: [`Resolvers`]).
//!
//! Each run is resolved in one transaction that also writes its journal:
//! a run event `upgraded` and its `run_reading` mark, saying which
//! benchlab resolved it and what it could not (a workload this binary
//! lacks reads with plain parameter labels and without notes). An
//! interrupted upgrade leaves every run either as it was or done.

use benchlab_core::plan::Plan;
use benchlab_core::resolved::{byte_params, ResolvedPlan, PLAN_VERSION};
use benchlab_core::study::Study;
use benchlab_core::units::now_rfc3339;
use benchlab_core::Registry;

use crate::sql::{vals, Exec};
use crate::{
    insert_event, insert_plan, set_reading_in, Reading, RunRow, SampleStatus, Store, StoreError,
    READING_VERSION,
};

/// What the store cannot resolve by itself, supplied by the command
/// that upgrades it.
pub struct Resolvers<'a> {
    /// The workloads this binary knows (their notes, byte-count
    /// parameters and point expansion).
    pub registry: &'a Registry,
    /// An imported run's figures, parsed from its stored CSV into the
    /// report JSON the published table holds; `Err` says why not.
    pub published: &'a dyn Fn(&RunRow) -> Result<String, String>,
}

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

/// What one run's upgrade writes, resolved before anything is written.
#[derive(Default)]
struct Resolved {
    /// A plan for a run that had none (version, JSON).
    new_plan: Option<(u32, String)>,
    /// An older plan brought to the current version.
    replaced_plan: Option<(u32, String)>,
    /// (point, repetition, notes) of every measured repetition.
    notes: Vec<(i64, u32, Vec<String>)>,
    /// An imported run's parsed figures.
    published: Option<String>,
    /// Workload kinds this binary lacks.
    unknown: Vec<String>,
}

/// The command that upgrades `store` (what a reader's refusal names).
pub fn upgrade_command(store: &crate::Target) -> String {
    format!("`benchlab --db {store} store upgrade`")
}

impl Store {
    /// Upgrades every run of the store that lacks its reading pieces;
    /// returns the runs upgraded. A run that cannot be (its study text no
    /// longer validates and it has no stored plan) is left as it is and
    /// named in the error, after the others are done.
    pub fn upgrade_runs(&self, how: &Resolvers) -> Result<Vec<i64>, UpgradeError> {
        let mut done = Vec::new();
        let mut failed = None;
        for run_id in self.runs_to_upgrade(READING_VERSION)? {
            match self.resolve_run(how, run_id) {
                Ok(r) => {
                    self.write_upgrade(run_id, r)?;
                    done.push(run_id);
                }
                Err(e @ UpgradeError::Run { .. }) => failed = failed.or(Some(e)),
                Err(e) => return Err(e),
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(done),
        }
    }

    /// Reads run `run_id` and resolves what it lacks; writes nothing.
    fn resolve_run(&self, how: &Resolvers, run_id: i64) -> Result<Resolved, UpgradeError> {
        let registry = how.registry;
        let run = self.run(run_id)?;
        let fail = |why: String| UpgradeError::Run { run: run_id, why };
        let mut out = Resolved::default();
        if self
            .configurations(run_id)?
            .iter()
            .any(|c| c.is_published())
        {
            if self.published(run_id)?.is_none() {
                out.published = Some((how.published)(&run).map_err(fail)?);
            }
            return Ok(out);
        }
        let points = self.points(run_id)?;
        let mut plan = match self.plan(run_id)? {
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
                out.new_plan = Some((plan.version, plan.to_json()));
                plan
            }
        };
        for shape in &mut plan.workloads {
            match registry.get(&shape.kind) {
                Some(wl) if shape.byte_params.is_empty() => shape.byte_params = byte_params(wl),
                Some(_) => {}
                None if out.unknown.contains(&shape.kind) => {}
                None => out.unknown.push(shape.kind.clone()),
            }
        }
        if plan.expanded.is_none() && out.unknown.is_empty() {
            plan.expanded = Some(Plan::new(&plan.study, registry, run.options));
        }
        if plan.version < PLAN_VERSION {
            plan.version = PLAN_VERSION;
            out.replaced_plan = Some((plan.version, plan.to_json()));
        }
        let samples = self.samples(run_id)?;
        for p in &points {
            let Some(wl) = registry.get(&p.kind) else {
                continue;
            };
            for s in samples
                .iter()
                .filter(|s| s.point_id == p.id && s.status == SampleStatus::Ok)
            {
                out.notes
                    .push((p.id, s.repetition, wl.notes(&p.params, &s.metrics)));
            }
        }
        Ok(out)
    }

    /// Writes one run's resolved pieces and its journal, all or nothing.
    fn write_upgrade(&self, run_id: i64, r: Resolved) -> Result<(), StoreError> {
        let mut origin = format!("resolved at upgrade by benchlab {}", benchlab_core::VERSION);
        if !r.unknown.is_empty() {
            origin.push_str(&format!(
                "; workloads this benchlab lacks read without notes and with plain parameter labels: {}",
                r.unknown.join(", ")
            ));
        }
        self.transaction(|c| {
            if let Some(json) = &r.published {
                insert_published(c, run_id, json)?;
            }
            if let Some((version, json)) = &r.new_plan {
                insert_plan(c, run_id, *version, json)?;
            }
            if let Some((version, json)) = &r.replaced_plan {
                c.exec(
                    "UPDATE run_plan SET version = ?2, plan = ?3 WHERE run_id = ?1",
                    vals![run_id, *version, json.as_str()],
                )?;
            }
            for (point, repetition, texts) in &r.notes {
                insert_notes(c, *point, *repetition, texts)?;
            }
            insert_event(c, run_id, &now_rfc3339(), "upgraded", &origin)?;
            set_reading_in(
                c,
                run_id,
                &Reading {
                    version: READING_VERSION,
                    origin: origin.clone(),
                },
            )
        })
    }
}

/// Stores an imported run's parsed figures (kept once written).
pub(crate) fn insert_published(
    c: &mut dyn Exec,
    run_id: i64,
    report: &str,
) -> Result<(), StoreError> {
    c.exec(
        "INSERT INTO published (run_id, report) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
        vals![run_id, report],
    )?;
    Ok(())
}

/// Records a workload's remarks on one repetition (each distinct text
/// once).
pub(crate) fn insert_notes(
    c: &mut dyn Exec,
    point_id: i64,
    repetition: u32,
    texts: &[String],
) -> Result<(), StoreError> {
    for t in texts {
        c.exec(
            "INSERT INTO sample_note (sample_id, text)
             SELECT id, ?3 FROM sample WHERE point_id = ?1 AND repetition = ?2
             ON CONFLICT DO NOTHING",
            vals![point_id, repetition, t.as_str()],
        )?;
    }
    Ok(())
}
