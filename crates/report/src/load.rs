//! The one way a report is made: [`load`] reads what the runs stored and
//! builds the [`RunReport`] every output renders — `show`, `report`,
//! `compare` and `serve`, in every format. It consults no registry of
//! workloads: a run reads from its stored plan (the typed study, what its
//! workloads declared, the expanded points and which parameters are byte
//! counts), its stored notes and, for an imported run, its parsed
//! figures. A store written before those were stored is read as far as
//! it can be and otherwise refused with the command that upgrades it
//! (`benchlab store upgrade`, [`benchlab_store::Store::upgrade_runs`]):
//! reading never writes.

use std::fmt;
use std::str::FromStr;

use benchlab_core::resolved::ResolvedPlan;
use benchlab_core::setting::{ChangeStatus, Phase};
use benchlab_store::{Store, StoreError, READING_VERSION};

use crate::compare::{self, Side};
use crate::import::is_published;
use crate::model::{RunReport, SettingChange};

/// Which runs a report shows.
#[derive(Debug, Clone, PartialEq)]
pub enum RunSelection {
    /// One run, its configurations as columns, with everything it stored
    /// (events, latency distributions, settings, services).
    Run(i64),
    /// Columns of one or more runs side by side (`RUN` gives every
    /// configuration of the run, `RUN:CONFIG` one), advantages over the
    /// baseline (default: the first column).
    Columns {
        /// The columns, in order.
        columns: Vec<ColumnSpec>,
        /// The baseline, when not the first column (`RUN`: that run's
        /// first configuration).
        baseline: Option<ColumnSpec>,
    },
}

impl RunSelection {
    /// A selection from command-line or query words: one bare run id is
    /// that run's report; anything else (a `RUN:CONFIG`, several runs) is
    /// a comparison of those columns.
    pub fn from_specs(specs: &[String], baseline: Option<&str>) -> Result<RunSelection, LoadError> {
        let columns = specs
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<ColumnSpec>, _>>()?;
        let baseline = baseline.map(str::parse).transpose()?;
        Ok(match columns.as_slice() {
            [ColumnSpec { run, config: None }] if baseline.is_none() => RunSelection::Run(*run),
            _ => RunSelection::Columns { columns, baseline },
        })
    }
}

/// `RUN` or `RUN:CONFIG`: a column (or all columns) of a stored run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    /// The run's id.
    pub run: i64,
    /// One configuration's name (None: every configuration).
    pub config: Option<String>,
}

impl FromStr for ColumnSpec {
    type Err = LoadError;
    fn from_str(s: &str) -> Result<ColumnSpec, LoadError> {
        let (run, config) = match s.split_once(':') {
            Some((r, c)) => (r, Some(c.to_string())),
            None => (s, None),
        };
        let run = run
            .trim()
            .parse()
            .map_err(|_| LoadError::BadColumn(s.to_string()))?;
        Ok(ColumnSpec { run, config })
    }
}

impl fmt::Display for ColumnSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.config {
            Some(c) => write!(f, "{}:{c}", self.run),
            None => write!(f, "{}", self.run),
        }
    }
}

/// Why a report cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The store refused.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Not `RUN` or `RUN:CONFIG`.
    #[error("`{0}`: expected RUN or RUN:CONFIG with a numeric run id")]
    BadColumn(String),
    /// A `RUN:CONFIG` names no configuration of that run.
    #[error("run {run} has no configuration `{name}` (it has: {known})")]
    NoConfiguration {
        /// The run.
        run: i64,
        /// The name asked for.
        name: String,
        /// The names it has.
        known: String,
    },
    /// A selection of no columns.
    #[error("no columns: give RUN or RUN:CONFIG")]
    NoColumns,
    /// The baseline is not among the columns.
    #[error("--baseline {0} is not one of the compared columns")]
    Baseline(String),
    /// The run's stored plan or figures cannot be read.
    #[error("run {run}: {why}")]
    Unreadable {
        /// The run.
        run: i64,
        /// Why.
        why: String,
    },
    /// The run was stored by an older benchlab and its store not
    /// upgraded yet.
    #[error("run {run} was stored by an older benchlab and lacks what a report reads (its plan, notes or parsed figures): reading never changes a store; upgrade it once with {command}")]
    NotUpgraded {
        /// The run.
        run: i64,
        /// The command that upgrades its store.
        command: String,
    },
}

/// The report of `selection`, from what the store holds.
pub fn load(store: &Store, selection: &RunSelection) -> Result<RunReport, LoadError> {
    match selection {
        RunSelection::Run(id) => run_report(store, *id),
        RunSelection::Columns { columns, baseline } => {
            comparison(store, columns, baseline.as_ref())
        }
    }
}

/// Everything a run's report reads, fetched from the store in one pass
/// ([`read_run`]) before anything is built ([`build_run`]).
struct StoredRun {
    run: benchlab_store::RunRow,
    configurations: Vec<benchlab_store::ConfigRow>,
    events: Vec<benchlab_store::Event>,
    rows: Option<RunRows>,
    /// An imported run's stored figures (the report it was parsed into).
    published: Option<String>,
}

/// A measured run's rows.
struct RunRows {
    plan: ResolvedPlan,
    points: Vec<benchlab_store::PointRow>,
    samples: Vec<benchlab_store::SampleRow>,
    notes: Vec<benchlab_store::NoteRow>,
    hosts: Vec<benchlab_store::HostRow>,
    setting_changes: Vec<benchlab_store::SettingChangeRow>,
    services: Vec<benchlab_store::ServiceRow>,
    sides: crate::build::SideResults,
    monitors: Vec<benchlab_store::MonitorRow>,
    monitor_series: MonitorSeries,
    /// The until-decided design's verdicts and cost (none for a run of
    /// the fixed design).
    decisions: Vec<benchlab_core::decision::ComparisonDecision>,
    design: Option<benchlab_core::decision::DesignSummary>,
    stack_recordings: Vec<benchlab_store::StackRecordingRow>,
    stack_profiles: Vec<benchlab_store::StackProfileRow>,
}

/// The monitor samples a report draws, by (point id, repetition, host).
type MonitorSeries = std::collections::BTreeMap<(i64, u32, String), benchlab_monitor::Series>;

/// Reads what run `run_id`'s report needs: the store is not touched
/// after this.
fn read_run(store: &Store, run_id: i64) -> Result<StoredRun, LoadError> {
    let run = store.run(run_id)?;
    let reading = store.reading(run_id)?;
    if reading.as_ref().is_none_or(|r| r.version < READING_VERSION) {
        return Err(LoadError::NotUpgraded {
            run: run_id,
            command: benchlab_store::upgrade_command(store.target()),
        });
    }
    let configurations = store.configurations(run_id)?;
    let events = store.events(run_id)?;
    let unreadable = |why: String| LoadError::Unreadable { run: run_id, why };
    if configurations.iter().any(is_published) {
        let published = store
            .published(run_id)?
            .ok_or_else(|| unreadable("its imported figures are not stored".into()))?;
        return Ok(StoredRun {
            run,
            configurations,
            events,
            rows: None,
            published: Some(published),
        });
    }
    let text = store
        .plan(run_id)?
        .ok_or_else(|| unreadable("it has no stored plan".into()))?;
    let plan = ResolvedPlan::from_json(&text).map_err(|e| unreadable(e.to_string()))?;
    let points = store.points(run_id)?;
    let samples = store.samples(run_id)?;
    let mut sides = crate::build::SideResults::new();
    let selection = plan.study.defaults.select;
    for (point, rep) in crate::build::latency_reps(&points, &samples, &plan)
        .into_iter()
        .chain(crate::series::reps(&plan, &points, &samples, selection))
    {
        if let std::collections::hash_map::Entry::Vacant(e) = sides.entry((point, rep)) {
            e.insert(store.side_results(point, rep)?);
        }
    }
    let monitors = store.monitors(run_id)?;
    let mut monitor_series = MonitorSeries::new();
    let preferred = crate::build::latency_reps(&points, &samples, &plan);
    for (point, rep, host) in crate::monitors::chart_reps(&monitors, &preferred) {
        if let Some(s) = store.monitor_series(point, rep, &host)? {
            monitor_series.insert((point, rep, host), s);
        }
    }
    Ok(StoredRun {
        run,
        configurations,
        events,
        published: None,
        rows: Some(RunRows {
            notes: store.notes(run_id)?,
            hosts: store.hosts(run_id)?,
            setting_changes: store.setting_changes(run_id)?,
            services: store.services(run_id)?,
            plan,
            points,
            samples,
            sides,
            monitors,
            monitor_series,
            decisions: store.decisions(run_id)?,
            design: store.design_summary(run_id)?,
            stack_recordings: store.stack_recordings(run_id)?,
            stack_profiles: store.stack_profiles(run_id)?,
        }),
    })
}

/// One run's whole report.
fn run_report(store: &Store, run_id: i64) -> Result<RunReport, LoadError> {
    build_run(read_run(store, run_id)?)
}

/// A run's report from its rows, without the store.
fn build_run(stored: StoredRun) -> Result<RunReport, LoadError> {
    let StoredRun {
        run,
        configurations,
        events,
        rows,
        published,
    } = stored;
    let Some(rows) = rows else {
        let text = published.unwrap_or_default();
        let mut r: RunReport = serde_json::from_str(&text).map_err(|e| LoadError::Unreadable {
            run: run.id,
            why: format!("its stored figures: {e}"),
        })?;
        r.run = run;
        r.events = events;
        return Ok(r);
    };
    let notes = crate::build::notes(&rows.points, &configurations, &rows.notes);
    let mut r = crate::build::build(
        &run,
        &rows.plan,
        &configurations,
        &rows.points,
        &rows.samples,
        &rows.hosts,
        &notes,
        &rows.decisions,
    );
    r.settings = settings_changed(&rows.plan, rows.setting_changes);
    r.services = crate::build::services(&r.configurations, rows.services);
    r.events = events;
    r.series = crate::series::build(
        &rows.plan,
        crate::series::Source {
            points: &rows.points,
            samples: &rows.samples,
            configurations: &r.configurations,
            selection: r.selection,
            side_results: |point, rep| rows.sides.get(&(point, rep)).cloned().unwrap_or_default(),
        },
    );
    let operation_rates: Vec<Option<String>> = rows
        .plan
        .workloads
        .iter()
        .map(|w| w.operation_rate.clone())
        .collect();
    r.monitors = crate::monitors::build(&crate::monitors::Source {
        points: &rows.points,
        samples: &rows.samples,
        configurations: &configurations,
        monitors: &rows.monitors,
        series: &rows.monitor_series,
        operation_rates: &operation_rates,
    });
    r.design = rows.design;
    r.stacks = crate::stacks::build(&crate::stacks::Source {
        plan: &rows.plan,
        points: &rows.points,
        samples: &rows.samples,
        configurations: &configurations,
        recordings: &rows.stack_recordings,
        profiles: &rows.stack_profiles,
    });
    if !rows.decisions.is_empty() {
        r.decisions =
            crate::build::decisions(&rows.decisions, &rows.plan, &configurations, &rows.points);
    }
    r.latency = crate::build::latency_views(
        &rows.points,
        &rows.samples,
        &rows.plan,
        &rows.sides,
        &configurations,
    );
    Ok(r)
}

/// What each configuration changed on each host, once per setting (an
/// interleaved study applies a configuration at every repetition), with
/// any revert that failed.
fn settings_changed(
    plan: &ResolvedPlan,
    rows: Vec<benchlab_store::SettingChangeRow>,
) -> Vec<SettingChange> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for row in rows {
        let keep = row.phase == Phase::Apply || row.status == ChangeStatus::RevertFailed;
        if !keep
            || !seen.insert((
                row.config_idx,
                row.host.clone(),
                row.setting.clone(),
                row.phase,
            ))
        {
            continue;
        }
        out.push(SettingChange {
            configuration: plan
                .study
                .configurations
                .get(row.config_idx)
                .map(|c| c.name.clone())
                .unwrap_or_else(|| format!("#{}", row.config_idx)),
            host: row.host,
            setting: row.setting,
            before: row.before,
            after: row.after,
            status: row.status,
            note: (!row.note.is_empty()).then_some(row.note),
        });
    }
    out
}

/// The columns of several runs side by side: each run read once, the
/// baseline moved first.
fn comparison(
    store: &Store,
    specs: &[ColumnSpec],
    baseline: Option<&ColumnSpec>,
) -> Result<RunReport, LoadError> {
    let mut reports: Vec<RunReport> = Vec::new();
    // (report index, configuration index, label `RUN:CONFIG`).
    let mut columns: Vec<(usize, usize, String)> = Vec::new();
    for spec in specs {
        let r = match reports.iter().position(|r| r.run.id == spec.run) {
            Some(i) => i,
            None => {
                reports.push(run_report(store, spec.run)?);
                reports.len() - 1
            }
        };
        let configs = &reports[r].configurations;
        match &spec.config {
            Some(name) => {
                let c = configs
                    .iter()
                    .position(|c| &c.name == name)
                    .ok_or_else(|| LoadError::NoConfiguration {
                        run: spec.run,
                        name: name.clone(),
                        known: configs
                            .iter()
                            .map(|c| c.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })?;
                columns.push((r, c, format!("{}:{name}", spec.run)));
            }
            None => {
                for (c, conf) in configs.iter().enumerate() {
                    columns.push((r, c, format!("{}:{}", spec.run, conf.name)));
                }
            }
        }
    }
    // A column picked twice (`3` and `3:a`) is shown once.
    let mut seen = std::collections::HashSet::new();
    columns.retain(|c| seen.insert(c.2.clone()));
    if columns.is_empty() {
        return Err(LoadError::NoColumns);
    }
    let base = match baseline {
        None => 0,
        Some(b) => {
            let wanted = match &b.config {
                Some(c) => format!("{}:{c}", b.run),
                // A bare run id: its first column.
                None => columns
                    .iter()
                    .find(|s| s.2.starts_with(&format!("{}:", b.run)))
                    .map(|s| s.2.clone())
                    .unwrap_or_default(),
            };
            columns
                .iter()
                .position(|s| s.2 == wanted)
                .ok_or_else(|| LoadError::Baseline(b.to_string()))?
        }
    };
    let sides: Vec<Side> = columns
        .iter()
        .map(|(r, c, label)| Side {
            label: label.clone(),
            report: &reports[*r],
            config: *c,
        })
        .collect();
    Ok(compare::combine(&sides, base))
}
