//! The runner: checks every host, expands a study into units, drives the
//! agents through each, records every repetition the moment it finishes,
//! and stops cleanly on Ctrl-C.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use benchlab_agent::{AgentError, AgentHandle, Request, Response};
use benchlab_core::engine_metric::{CLIENT_PEAK_RSS_KIB, SERVER_PEAK_RSS_KIB};
use benchlab_core::plan::{Plan, PlannedPoint, RunOptions, Unit};
use benchlab_core::resolved::ResolvedPlan;
use benchlab_core::study::{Configuration, WorkloadEntry};
use benchlab_core::study::{OnError, Study};
use benchlab_core::units::now_rfc3339;
use benchlab_core::{
    ClientShare, Params, Registry, Sample, ServerSide, SideResult, Workload, CLIENTS,
};
use benchlab_store::{
    ConfigRow, HostRow, NewRun, PointRow, Reading, RunStatus, SampleStatus, Store, UnitKey,
};

use crate::combine;
use crate::context::RunCtx;
use crate::envrun::EnvControl;
use crate::hosts::{Pool, Role};
use crate::monitors::{Monitors, Watch};
use crate::observer::{Headline, Observer, PlannedUnit, RunStart, UnitInfo, UnitResult};
use crate::services::{self, Services, Target};

/// Slack added to a client's expected duration before it is declared hung.
const CLIENT_SLACK: Duration = Duration::from_secs(60);
/// The reason of a client side released from the barrier because another
/// failed to arrive.
const ABANDONED: &str = "abandoned at the barrier: another client side failed to connect";
/// How long a server may take to finish after its client did.
const SERVER_FINISH: Duration = Duration::from_secs(15);

/// How a run ended.
pub struct Outcome {
    /// The run's id in the store.
    pub run_id: i64,
    /// Stopped by a signal.
    pub interrupted: bool,
    /// Stopped at a failed point (`on_error = "stop"`).
    pub stopped: bool,
    /// Failed repetitions.
    pub failed: usize,
}

impl Outcome {
    /// How the run ended, in words (`completed`, `was interrupted`, …).
    pub fn status_text(&self) -> String {
        if self.interrupted {
            "was interrupted".into()
        } else if self.stopped {
            "stopped at a failed point (on_error = \"stop\")".into()
        } else if self.failed > 0 {
            format!("completed with {} failed repetition(s)", self.failed)
        } else {
            "completed".into()
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

fn store_hosts(
    store: &Store,
    run_id: i64,
    inventories: Vec<(String, String, serde_json::Value)>,
) -> Result<()> {
    for (name, roles, inventory) in inventories {
        store.add_host(
            run_id,
            &HostRow {
                name,
                roles,
                inventory,
            },
        )?;
    }
    Ok(())
}

/// What a run needs from its caller: the store, the workloads, the
/// interrupt flag (set by a signal) and who is told of its progress.
pub struct Run<'a> {
    /// The result store.
    pub store: &'a mut Store,
    /// The workloads this benchlab knows.
    pub registry: &'a Registry,
    /// Set to stop the run cleanly (Ctrl-C, SIGTERM).
    pub interrupt: &'a AtomicBool,
    /// Told of each repetition as it begins and ends.
    pub observer: &'a mut dyn Observer,
    /// First undo whatever an earlier, crashed run left changed on the
    /// hosts, instead of refusing to start.
    pub restore_first: bool,
}

impl Run<'_> {
    /// Starts a new run of a study: preflight first, so that a study whose
    /// hosts are not all ready leaves no run behind.
    pub fn start(self, study: &Study, opts: RunOptions) -> Result<Outcome> {
        let Run {
            store,
            registry: reg,
            interrupt,
            observer,
            restore_first,
        } = self;
        let (mut pool, inventories, notes) = Pool::preflight(study, interrupt, restore_first)?;
        services::check_all(study, &mut pool)?;
        let started = now_rfc3339();
        let run_id = store.create_run(&NewRun {
            study_name: &study.name,
            study_file: &study.file,
            study_text: &study.text,
            description: &study.description,
            options: opts,
            started_at: &started,
            controller_host: &hostname(),
        })?;
        for (i, c) in study.configurations.iter().enumerate() {
            let mut spec =
                serde_json::json!({ "server": c.server, "client": c.client, "env": c.env });
            // Only a configuration that moves hosts says so: the record of
            // every other stays as it was.
            if !c.hosts.is_empty() {
                spec["hosts"] = serde_json::json!(c.hosts);
            }
            store.add_configuration(
                run_id,
                &ConfigRow {
                    idx: i,
                    name: c.name.clone(),
                    description: c.description.clone(),
                    spec,
                },
            )?;
        }
        // The plan is resolved once, from the points this run will store,
        // and kept: reports and `--resume` read it, never the study text.
        let planned = Plan::new(study, reg, opts);
        let mut resolved = ResolvedPlan::resolve(
            study,
            reg,
            planned.points.iter().map(|p| (p.workload, &p.params)),
        )?;
        resolved.expanded = Some(planned);
        store.set_plan(run_id, resolved.version, &resolved.to_json())?;
        store.set_reading(run_id, &Reading::recorded())?;
        // Where each side ran, in the run's record (a lab file or --host may
        // have placed the study's hosts).
        let placed: Vec<String> = study
            .hosts
            .iter()
            .map(|h| {
                format!(
                    "{}: {}{}",
                    h.name,
                    crate::hosts::route(h),
                    h.address
                        .as_ref()
                        .map(|a| format!(" (data address {a})"))
                        .unwrap_or_default()
                )
            })
            .collect();
        store.add_event(run_id, &started, "hosts", &placed.join("; "))?;
        store_hosts(store, run_id, inventories)?;
        store.add_event(
            run_id,
            &started,
            "started",
            &format!("scale {}, quick {}", opts.scale, opts.quick),
        )?;
        Engine {
            reg,
            opts,
            observer,
            env: EnvControl::default(),
            svc: Services::default(),
            monitors: Monitors::default(),
            ctx: RunCtx {
                study,
                pool,
                store,
                run_id,
                interrupt,
                notes,
            },
        }
        .execute()
    }

    /// Resumes an unfinished run with its first missing repetition.
    pub fn resume(self, run_id: i64) -> Result<Outcome> {
        let Run {
            store,
            registry: reg,
            interrupt,
            observer,
            restore_first,
        } = self;
        let run = store.run(run_id)?;
        if run.status == RunStatus::Completed {
            bail!("run {run_id} is already complete: nothing to resume");
        }
        if run.status == RunStatus::Running && run.controller_host != hostname() {
            // A shared store (PostgreSQL) holds runs of other controllers:
            // their pid means nothing here, and resuming a run that its
            // controller is still running would measure every unit twice.
            bail!(
                "run {run_id} is running on the controller {} (or that controller died): resume it there",
                run.controller_host
            );
        }
        if run.status == RunStatus::Running {
            if let Some(pid) = run.controller_pid {
                if pid as u32 != std::process::id() && process_is_benchlab(pid) {
                    bail!("run {run_id} is still being run by process {pid}");
                }
            }
        }
        let plan = stored_plan(store, reg, run_id)?;
        for w in &plan.workloads {
            if reg.get(&w.kind).is_none() {
                bail!(
                    "run {run_id} needs workload `{}`, which this benchlab does not have",
                    w.kind
                );
            }
        }
        let study = plan.study;
        let (mut pool, inventories, notes) = Pool::preflight(&study, interrupt, restore_first)?;
        services::check_all(&study, &mut pool)?;
        store_hosts(store, run_id, inventories)?;
        store.set_run_status(run_id, RunStatus::Running, &now_rfc3339())?;
        store.add_event(run_id, &now_rfc3339(), "resumed", "")?;
        Engine {
            reg,
            opts: run.options,
            observer,
            env: EnvControl::default(),
            svc: Services::default(),
            monitors: Monitors::default(),
            ctx: RunCtx {
                study: &study,
                pool,
                store,
                run_id,
                interrupt,
                notes,
            },
        }
        .execute()
    }
}

fn process_is_benchlab(pid: i64) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("benchlab"))
        .unwrap_or(false)
}

/// Why a unit produced no sample.
enum UnitError {
    Skipped(String),
    Failed(String),
    Interrupted,
}

impl From<AgentError> for UnitError {
    fn from(e: AgentError) -> Self {
        match e {
            AgentError::Interrupted => UnitError::Interrupted,
            other => UnitError::Failed(other.to_string()),
        }
    }
}

/// After a failed point, how long a managed server may take to be seen
/// gone before the clients' own error stands as the point's reason.
const DEATH_GRACE: Duration = Duration::from_secs(1);

/// A run in progress: everything its repetitions share.
struct Engine<'a> {
    reg: &'a Registry,
    opts: RunOptions,
    observer: &'a mut dyn Observer,
    // Fields drop in order: the configuration's agents go before the
    // pool's, as they did when these were the runner's locals.
    /// The configuration applied on the hosts.
    env: EnvControl,
    /// The managed services of the configuration in force.
    svc: Services,
    /// The hosts' system monitors.
    monitors: Monitors,
    /// The study, the agents, the store.
    ctx: RunCtx<'a>,
}

impl Engine<'_> {
    /// Hands the notes gathered so far to the observer.
    fn tell(&mut self) {
        for n in self.ctx.notes.drain(..) {
            self.observer.note(&n);
        }
    }

    /// Runs every repetition not yet stored, then puts the hosts back.
    fn execute(mut self) -> Result<Outcome> {
        let (reg, opts) = (self.reg, self.opts);
        let (study, run_id, interrupt) = (self.ctx.study, self.ctx.run_id, self.ctx.interrupt);
        let plan = Plan::new(study, reg, opts);
        let done = self.ctx.store.done_units(run_id)?;
        let todo: Vec<Unit> = plan
            .units
            .iter()
            .filter(|u| !done.contains(&UnitKey::of(&plan, u)))
            .copied()
            .collect();

        self.observer.start(&RunStart {
            units: todo
                .iter()
                .map(|u| {
                    let p = &plan.points[u.point];
                    PlannedUnit {
                        workload: p.workload,
                        expected_s: p.expected_s,
                    }
                })
                .collect(),
            already: done.len(),
        });
        self.tell();
        let mut failed = 0;
        let mut stopped = false;
        let mut adaptive = AdaptiveState::load(self.ctx.store, run_id, reg)?;
        for (n, unit) in todo.iter().enumerate() {
            if interrupt.load(Ordering::Relaxed) {
                break;
            }
            let point = &plan.points[unit.point];
            let entry = &study.workloads[point.workload];
            let config = &study.configurations[point.config];
            let pkey = (point.config, point.workload, point.point);
            if let Some(why) = adaptive.stop(entry, pkey) {
                if adaptive.announce(pkey) {
                    self.ctx.store.add_event(
                        run_id,
                        &now_rfc3339(),
                        "adaptive",
                        &format!("{} · {} · {}: {why}", config.name, entry.name, point.label),
                    )?;
                }
                self.observer.skip(n);
                continue;
            }
            let info = UnitInfo {
                index: n,
                configuration: &config.name,
                workload: &entry.name,
                point: &point.label,
                repetition: unit.repetition,
                repetitions: point.repetitions,
            };
            self.observer.begin(&info);
            let point_id = self.ctx.store.ensure_point(
                run_id,
                &PointRow {
                    id: 0,
                    config_idx: point.config,
                    workload_idx: point.workload,
                    workload_name: entry.name.clone(),
                    kind: entry.kind.clone(),
                    point_idx: point.point,
                    label: point.label.clone(),
                    params: point.params.clone(),
                },
            )?;
            let switched = self.env.switch(point.config, &entry.name, &mut self.ctx);
            self.tell();
            switched?;
            if interrupt.load(Ordering::Relaxed) {
                // Ctrl-C while a configuration was being applied: not a
                // failure of the point, which is simply not run.
                break;
            }
            let started = now_rfc3339();
            // Each host's monitor samples of this repetition.
            let mut monitored = Vec::new();
            let outcome = match &self.env.failed {
                Some(why) => Err(UnitError::Failed(format!(
                    "configuration could not be applied: {why}"
                ))),
                None => match self.env.point_start(interrupt) {
                    Err(why) => Err(UnitError::Failed(why)),
                    Ok(()) => {
                        let sides = [self.env.server.clone(), self.env.client.clone()];
                        let wl_side = reg.get(&entry.kind).map(|w| w.server_side());
                        let targets = if wl_side == Some(ServerSide::Service) {
                            self.svc.ready(
                                &mut self.ctx,
                                point.config,
                                (point.workload, point.point),
                                &entry.services,
                                &entry.kind,
                                &point.params,
                            )
                        } else {
                            Ok(Vec::new())
                        };
                        let mut r = match targets {
                            Err(why) => Err(UnitError::Failed(why)),
                            Ok(targets) => {
                                let unit_spec = UnitSpec {
                                    point,
                                    repetition: unit.repetition,
                                    sides: &sides,
                                    targets: &targets,
                                };
                                let watch = Watch {
                                    config,
                                    entry,
                                    sides: &sides,
                                    expected: reg
                                        .get(&entry.kind)
                                        .map(|w| w.expected_duration(&point.params))
                                        .unwrap_or_default(),
                                };
                                let watching = self.monitors.start(&mut self.ctx, &watch);
                                let r = self.run_unit(&unit_spec);
                                monitored = self.monitors.stop(&mut self.ctx, &watching);
                                // A server that went down mid-point fails it
                                // with its own exit reason, whatever the
                                // clients saw.
                                let died = if r.is_err() {
                                    self.svc.died_within(&mut self.ctx, &targets, DEATH_GRACE)
                                } else {
                                    self.svc.died(&mut self.ctx, &targets)
                                };
                                match died {
                                    Some(why) if !matches!(r, Err(UnitError::Interrupted)) => {
                                        Err(UnitError::Failed(why))
                                    }
                                    _ => r,
                                }
                            }
                        };
                        if let Some(load) = self.env.point_end(interrupt) {
                            if let Ok(sample) = &mut r {
                                // The load's own CPU use (100 = one CPU), so
                                // that points can be compared for equal load.
                                sample
                                    .metrics
                                    .insert("background_load_cpu_pct".into(), load.util_pct);
                            }
                        }
                        r
                    }
                },
            };
            let ended = now_rfc3339();
            adaptive.record(
                pkey,
                outcome
                    .as_ref()
                    .ok()
                    .and_then(|s| headline(reg, &entry.kind, &point.params, s)),
                !matches!(outcome, Err(UnitError::Interrupted)),
            );
            let result = match &outcome {
                Ok(sample) => {
                    self.ctx.store.record_sample(
                        point_id,
                        unit.repetition,
                        SampleStatus::Ok,
                        None,
                        &started,
                        &ended,
                        Some(sample),
                    )?;
                    if let Some(wl) = reg.get(&entry.kind) {
                        let notes = wl.notes(&point.params, &sample.metrics);
                        self.ctx
                            .store
                            .add_notes(point_id, unit.repetition, &notes)?;
                    }
                    let spec = reg
                        .get(&entry.kind)
                        .and_then(|w| w.table_metrics(&point.params).into_iter().next());
                    UnitResult::Ok(
                        spec.and_then(|s| sample.metrics.get(s.name).map(|v| (s, *v)))
                            .map(|(s, value)| Headline {
                                metric: s.name,
                                value,
                                decimals: s.decimals,
                            }),
                    )
                }
                Err(UnitError::Skipped(reason)) => {
                    self.ctx.store.record_sample(
                        point_id,
                        unit.repetition,
                        SampleStatus::Skipped,
                        Some(reason),
                        &started,
                        &ended,
                        None,
                    )?;
                    UnitResult::Skipped(reason)
                }
                Err(UnitError::Failed(reason)) => {
                    failed += 1;
                    self.ctx.store.record_sample(
                        point_id,
                        unit.repetition,
                        SampleStatus::Failed,
                        Some(reason),
                        &started,
                        &ended,
                        None,
                    )?;
                    UnitResult::Failed(reason)
                }
                Err(UnitError::Interrupted) => break,
            };
            for (host, series) in &monitored {
                self.ctx
                    .store
                    .add_monitor(point_id, unit.repetition, host, series)?;
            }
            self.observer.end(&info, &result);
            self.tell();
            if outcome.is_err() {
                // The agents' state is unknown after a failed or skipped point
                // (another target's server may still be waiting): stop them all,
                // on every host; the next point starts fresh ones. Services go
                // first, stopped by the agents that hold them.
                self.svc.stop_all(&mut self.ctx);
                self.tell();
                self.ctx.pool.kill_all();
                if matches!(outcome, Err(UnitError::Failed(_)))
                    && study.defaults.on_error == OnError::Stop
                {
                    stopped = true;
                    break;
                }
            }
            if n + 1 < todo.len() && point.quiesce_s > 0.0 {
                sleep_interruptibly(Duration::from_secs_f64(point.quiesce_s), interrupt);
            }
        }
        self.observer.finish();
        // Stop the services, then put every host back (also after Ctrl-C).
        self.svc.stop_all(&mut self.ctx);
        let reverted = self.env.revert(&mut self.ctx);
        self.tell();
        reverted?;

        let interrupted = interrupt.load(Ordering::Relaxed);
        let at = now_rfc3339();
        if interrupted {
            // The abandoned point's sides may be mid-measurement: stop them now.
            self.ctx.pool.kill_all();
            self.ctx
                .store
                .set_run_status(run_id, RunStatus::Interrupted, &at)?;
            self.ctx.store.add_event(
                run_id,
                &at,
                "interrupted",
                "stopped by a signal; finished repetitions are kept",
            )?;
        } else {
            self.ctx.pool.shutdown();
            let status = if stopped {
                RunStatus::Failed
            } else {
                RunStatus::Completed
            };
            self.ctx.store.set_run_status(run_id, status, &at)?;
            // The controller is held to the same memory budget as the agents.
            let rss = format!(
                "controller peak RSS {} KiB",
                benchlab_core::cpu::peak_rss_kib()
            );
            let kind = if stopped { "stopped" } else { "completed" };
            self.ctx.store.add_event(run_id, &at, kind, &rss)?;
        }
        Ok(Outcome {
            run_id,
            interrupted,
            stopped,
            failed,
        })
    }
}

/// The headline figure of a sample: its workload's first table metric
/// (what the progress line shows and what adaptive repetitions watch).
fn headline(reg: &Registry, kind: &str, params: &benchlab_core::Params, s: &Sample) -> Option<f64> {
    let spec = reg.get(kind)?.table_metrics(params).into_iter().next()?;
    s.metrics.get(spec.name).copied().filter(|v| v.is_finite())
}

/// Adaptive repetitions: per point (configuration, workload, point), the
/// headline figures of its successful repetitions and how many were run,
/// loaded from the store so that `--resume` continues the same rule.
struct AdaptiveState {
    points: BTreeMap<(usize, usize, usize), (Vec<f64>, u32)>,
    announced: std::collections::BTreeSet<(usize, usize, usize)>,
}

impl AdaptiveState {
    fn load(store: &Store, run_id: i64, reg: &Registry) -> Result<AdaptiveState> {
        let mut points = BTreeMap::new();
        let rows = store.points(run_id)?;
        for s in store.samples(run_id)? {
            let Some(p) = rows.iter().find(|p| p.id == s.point_id) else {
                continue;
            };
            let e: &mut (Vec<f64>, u32) = points
                .entry((p.config_idx, p.workload_idx, p.point_idx))
                .or_default();
            e.1 += 1;
            if s.status == SampleStatus::Ok {
                let spec = reg
                    .get(&p.kind)
                    .and_then(|w| w.table_metrics(&p.params).into_iter().next());
                if let Some(v) = spec.and_then(|m| s.metrics.get(m.name)) {
                    e.0.push(*v);
                }
            }
        }
        Ok(AdaptiveState {
            points,
            announced: Default::default(),
        })
    }

    /// Why the point needs no more repetitions, if it does not.
    fn stop(
        &self,
        entry: &benchlab_core::study::WorkloadEntry,
        key: (usize, usize, usize),
    ) -> Option<String> {
        let a = entry.adaptive?;
        let rule = benchlab_stats::StopRule::new(a.min, a.max, a.target_ci_pct)?;
        let (values, attempts) = self.points.get(&key).cloned().unwrap_or_default();
        let half = benchlab_stats::half_width_pct(&values)
            .map(|h| format!("±{h:.2}%"))
            .unwrap_or_else(|| "no interval".into());
        match benchlab_stats::should_stop(&values, attempts, &rule) {
            benchlab_stats::StopDecision::Continue => None,
            benchlab_stats::StopDecision::TargetReached => Some(format!(
                "stopped after {} repetition(s): 95% interval {half} ≤ ±{}%",
                values.len(),
                a.target_ci_pct
            )),
            benchlab_stats::StopDecision::CapReached => Some(format!(
                "stopped at the cap of {} repetition(s): 95% interval {half}",
                a.max
            )),
        }
    }

    /// Whether this is the first time the point stops (for one event).
    fn announce(&mut self, key: (usize, usize, usize)) -> bool {
        self.announced.insert(key)
    }

    fn record(&mut self, key: (usize, usize, usize), value: Option<f64>, ran: bool) {
        if !ran {
            return;
        }
        let e = self.points.entry(key).or_default();
        e.1 += 1;
        if let Some(v) = value {
            e.0.push(v);
        }
    }
}

fn sleep_interruptibly(d: Duration, interrupt: &AtomicBool) {
    let until = Instant::now() + d;
    while !interrupt.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

fn agent_error(who: &str, message: String, skipped: bool) -> UnitError {
    if skipped {
        UnitError::Skipped(format!("{who}: {message}"))
    } else {
        UnitError::Failed(format!("{who}: {message}"))
    }
}

/// What one repetition runs: the point, its repetition, the sides'
/// placements and, for a service workload, its services.
#[derive(Clone, Copy)]
struct UnitSpec<'a> {
    point: &'a PlannedPoint,
    repetition: u32,
    sides: &'a [benchlab_core::placement::Placement; 2],
    targets: &'a [Target],
}

/// One client side of a repetition: an agent on a client host, driving
/// its share of one target's clients.
struct ClientJob {
    /// Index into the targets.
    target: usize,
    /// The client host.
    host: String,
    /// Agent slot on that host (one per target).
    slot: usize,
    /// Its share of the point's clients.
    share: ClientShare,
}

/// The client sides of a repetition: for a clients-axis workload, the
/// point's `clients` spread evenly over the client hosts, for each target;
/// otherwise one client per target on the client host.
/// `config` says which hosts the client sides run on (its `hosts` map).
fn client_jobs(
    wl: &dyn Workload,
    entry: &WorkloadEntry,
    config: &Configuration,
    params: &Params,
) -> Vec<ClientJob> {
    let mut jobs = Vec::new();
    for target in 0..entry.servers.len() {
        if wl.clients_axis() {
            let total = params.u64(CLIENTS).unwrap_or(1) as u32;
            let shares = ClientShare::spread(total, entry.client_hosts.len());
            for (host, share) in entry.client_hosts.iter().zip(shares) {
                jobs.push(ClientJob {
                    target,
                    host: config.host(host).to_string(),
                    slot: target,
                    share,
                });
            }
        } else {
            jobs.push(ClientJob {
                target,
                host: config.host(&entry.client).to_string(),
                slot: target,
                share: ClientShare::default(),
            });
        }
    }
    jobs
}

impl Engine<'_> {
    /// Runs one repetition: the server side on every target host, the
    /// client sides (behind one barrier for a clients-axis workload), both
    /// sides' results combined per target and aggregated over targets.
    fn run_unit(&mut self, unit: &UnitSpec<'_>) -> std::result::Result<Sample, UnitError> {
        let reg = self.reg;
        let ctx = &mut self.ctx;
        let (study, interrupt) = (ctx.study, ctx.interrupt);
        let UnitSpec {
            point,
            repetition,
            sides,
            targets: services,
        } = *unit;
        let entry = &study.workloads[point.workload];
        let wl = reg
            .get(&entry.kind)
            .ok_or_else(|| UnitError::Skipped(format!("unknown workload {}", entry.kind)))?;
        // The study's names label the targets (`metric@b1`, alike in every
        // configuration); the configuration's map says where each runs.
        let config = &study.configurations[point.config];
        let targets = &entry.servers;
        let many = targets.len() > 1;
        let who = |side: &str, host: &str| {
            if many {
                format!("{side} side on {host}")
            } else {
                format!("{side} side")
            }
        };
        let own_server = wl.server_side() == ServerSide::Own;

        // Server sides: benchlab's own, or the services' addresses.
        let mut addrs: Vec<Option<SocketAddr>> = Vec::new();
        for (i, target) in targets.iter().enumerate() {
            if let Some(t) = services.get(i) {
                addrs.push(Some(t.address));
                continue;
            }
            if !own_server {
                addrs.push(None);
                continue;
            }
            let host = config.host(target);
            let req = Request::Serve {
                kind: entry.kind.clone(),
                params: point.params.clone(),
                placement: sides[0].clone(),
                bind: ctx.pool.bind_address(host),
            };
            let data_ip = ctx.pool.address(host);
            match ctx.pool.agent(host, Role::Server, 0)?.request(
                &req,
                Duration::from_secs(60),
                interrupt,
            )? {
                Response::Listening { port } => addrs.push(Some(SocketAddr::new(data_ip, port))),
                Response::Error { message, skipped } => {
                    return Err(agent_error(&who("server", host), message, skipped))
                }
                other => {
                    return Err(UnitError::Failed(format!(
                        "{}: unexpected answer {other:?}",
                        who("server", host)
                    )))
                }
            }
        }

        // Client sides, all at once.
        let jobs = client_jobs(wl, entry, config, &point.params);
        let gated = wl.clients_axis();
        let expected = wl.expected_duration(&point.params);
        let mut agents: Vec<AgentHandle> = Vec::new();
        for job in &jobs {
            match ctx.pool.take(&job.host, Role::Client, job.slot) {
                Ok(a) => agents.push(a),
                Err(e) => {
                    for (job, agent) in jobs.iter().zip(agents) {
                        ctx.pool.put(&job.host, Role::Client, job.slot, agent);
                    }
                    return Err(e.into());
                }
            }
        }
        let requests: Vec<Request> = jobs
            .iter()
            .map(|job| Request::RunClient {
                kind: entry.kind.clone(),
                params: point.params.clone(),
                placement: sides[1].clone(),
                server: addrs[job.target],
                repetition,
                share: job.share,
                gated,
                service: services.get(job.target).map(|t| t.info.clone()),
            })
            .collect();
        // The services are observed over the measured interval when the
        // workload says where it lies (from the barrier's common start),
        // else around the clients' whole run.
        let window = match (gated, services.is_empty()) {
            (true, false) => wl.measured_window(&point.params),
            _ => None,
        };
        // A guest that ends mid-point (its QEMU killed or crashed) takes
        // its sockets with it silently: no reset reaches the clients, which
        // would wait out the point's whole limit. Its control port closing
        // is watched instead, and stops the clients at once.
        let mut point_hosts: Vec<&str> = targets.iter().map(|t| config.host(t)).collect();
        point_hosts.extend(jobs.iter().map(|j| j.host.as_str()));
        let watches = ctx.pool.guest_watches(&point_hosts);
        let stop = AtomicBool::new(false);
        let finished = AtomicBool::new(false);
        let lost_guest: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
        let flag: &AtomicBool = if watches.is_empty() { interrupt } else { &stop };
        let (results, before, after) = std::thread::scope(|scope| {
            if !watches.is_empty() {
                scope.spawn(|| watch_guests(&watches, interrupt, &stop, &finished, &lost_guest));
            }
            let out = match window {
                Some((skip, len)) => {
                    let pool = &mut ctx.pool;
                    let (go_tx, go_rx) = mpsc::channel();
                    std::thread::scope(|s| {
                        let observer = s.spawn(move || {
                            services::observe_window(pool, services, &go_rx, skip, len)
                        });
                        let results =
                            barrier_run(&mut agents, &requests, expected, flag, Some(&go_tx));
                        drop(go_tx);
                        let (before, after) = observer.join().expect("service observer thread");
                        (results, before, after)
                    })
                }
                None => {
                    let before = services::usage(ctx, services);
                    let results = if gated {
                        barrier_run(&mut agents, &requests, expected, flag, None)
                    } else {
                        fan_out(&mut agents, &requests, expected + CLIENT_SLACK, flag)
                    };
                    (results, before, services::usage(ctx, services))
                }
            };
            finished.store(true, Ordering::Relaxed);
            out
        });
        for (job, agent) in jobs.iter().zip(agents) {
            ctx.pool.put(&job.host, Role::Client, job.slot, agent);
        }
        if let Some(host) = lost_guest.into_inner().unwrap_or(None) {
            return Err(UnitError::Failed(format!(
                "host `{host}`: the guest ended during the point (its QEMU was killed or crashed)"
            )));
        }
        // Per target: its client hosts' results, to be merged as the workload
        // declares (the first failure of a target stands for it).
        let mut client_results: Vec<std::result::Result<Vec<SideResult>, UnitError>> =
            targets.iter().map(|_| Ok(Vec::new())).collect();
        for (job, r) in jobs.iter().zip(results) {
            let host_who = if jobs.len() > targets.len() {
                format!("client side on {}", job.host)
            } else {
                who("client", &targets[job.target])
            };
            let part = match r {
                Err(e) => Err(UnitError::from(e)),
                Ok(Response::Done { result }) => Ok(*result),
                Ok(Response::Error { message, skipped }) => {
                    Err(agent_error(&host_who, message, skipped))
                }
                Ok(other) => Err(UnitError::Failed(format!(
                    "{host_who}: unexpected answer {other:?}"
                ))),
            };
            let slot = &mut client_results[job.target];
            match (slot.as_mut(), part) {
                (Ok(parts), Ok(p)) => parts.push(p),
                (Ok(_), Err(e)) => *slot = Err(e),
                // A side abandoned at the barrier gives way to the failure
                // that made the others abandon.
                (Err(UnitError::Failed(m)), Err(e)) if m.contains(ABANDONED) => *slot = Err(e),
                (Err(_), _) => {}
            }
        }
        if client_results
            .iter()
            .any(|r| matches!(r, Err(UnitError::Interrupted)))
        {
            return Err(UnitError::Interrupted);
        }

        // Collect every server, even after a client failure, so none is left
        // waiting (with a short limit then: it has nothing more to wait for).
        let mut server_results: Vec<Option<SideResult>> = Vec::new();
        for (i, (target, client)) in targets.iter().zip(&client_results).enumerate() {
            let host = config.host(target);
            if !services.is_empty() {
                server_results.push(match (before.get(i), after.get(i)) {
                    (Some(Some(b)), Some(Some(a))) => Some(services::observed(b, a)),
                    _ => None,
                });
                continue;
            }
            if !own_server {
                server_results.push(None);
                continue;
            }
            let limit = if client.is_ok() {
                SERVER_FINISH
            } else {
                Duration::from_secs(1)
            };
            let req = Request::Collect {
                timeout_ms: limit.as_millis() as u64,
            };
            let resp = ctx.pool.agent(host, Role::Server, 0)?.request(
                &req,
                limit + Duration::from_secs(10),
                interrupt,
            )?;
            match resp {
                Response::Done { result } => server_results.push(Some(*result)),
                Response::Error { message, skipped } if client.is_ok() => {
                    return Err(agent_error(&who("server", host), message, skipped))
                }
                _ => server_results.push(None),
            }
        }

        let mut per_target = Vec::new();
        for ((parts, server), host) in client_results.into_iter().zip(server_results).zip(targets) {
            let client = combine::merge_clients(wl, parts?).map_err(|e| {
                UnitError::Failed(format!("merging the client hosts' results: {e}"))
            })?;
            let rss = [
                (CLIENT_PEAK_RSS_KIB.name(), Some(client.peak_rss_kib)),
                (
                    SERVER_PEAK_RSS_KIB.name(),
                    server
                        .as_ref()
                        .filter(|_| services.is_empty())
                        .map(|s| s.peak_rss_kib),
                ),
            ];
            // What the service's processes used over the point, whatever the
            // workload derives from it.
            let observed: Vec<(String, f64)> = server
                .as_ref()
                .filter(|_| !services.is_empty())
                .map(|s| {
                    s.values
                        .iter()
                        .map(|(k, v)| (k.clone(), *v))
                        .chain(s.counters.iter().map(|(k, v)| (k.clone(), *v as f64)))
                        .collect()
                })
                .unwrap_or_default();
            let mut sample = wl.combine(&point.params, client, server).map_err(|e| {
                UnitError::Failed(format!(
                    "results{}: {e}",
                    if many {
                        format!(" of {host}")
                    } else {
                        String::new()
                    }
                ))
            })?;
            // Every workload's processes are held to the same memory budget,
            // so their peak RSS is recorded for all of them.
            for (name, kib) in rss {
                if let Some(kib) = kib {
                    sample.metrics.insert(name.into(), kib as f64);
                }
            }
            for (name, v) in observed {
                if v.is_finite() {
                    sample.metrics.entry(name).or_insert(v);
                }
            }
            per_target.push((host.clone(), sample));
        }
        if !many {
            return Ok(per_target.pop().expect("one target").1);
        }
        Ok(combine::aggregate(wl, &point.params, per_target))
    }
}

/// Until `finished`: raises `stop` when the run is interrupted or one of
/// the guests ends, naming that guest in `lost`.
fn watch_guests(
    watches: &[(String, benchlab_guest::mux::Watch)],
    interrupt: &AtomicBool,
    stop: &AtomicBool,
    finished: &AtomicBool,
    lost: &std::sync::Mutex<Option<String>>,
) {
    while !finished.load(Ordering::Relaxed) {
        if interrupt.load(Ordering::Relaxed) {
            stop.store(true, Ordering::Relaxed);
            return;
        }
        if let Some((host, _)) = watches.iter().find(|(_, w)| w.gone()) {
            if let Ok(mut l) = lost.lock() {
                *l = Some(host.clone());
            }
            stop.store(true, Ordering::Relaxed);
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends each agent its request at once and waits for every answer.
fn fan_out(
    agents: &mut [AgentHandle],
    requests: &[Request],
    limit: Duration,
    interrupt: &AtomicBool,
) -> Vec<Result<Response, AgentError>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = agents
            .iter_mut()
            .zip(requests)
            .map(|(agent, req)| s.spawn(move || agent.request(req, limit, interrupt)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    })
}

/// The clients-axis barrier: every client side connects its clients and
/// answers `arrived`; only when all have is each sent `go`, at once (the
/// common start instant). If any side fails to arrive, those waiting are
/// released with `abort`, so that none is left at the gate, and the first
/// real failure is what the point reports.
/// `started`, when given, is told the start instant once every side has
/// arrived (just before `go` is sent).
fn barrier_run(
    agents: &mut [AgentHandle],
    requests: &[Request],
    expected: Duration,
    interrupt: &AtomicBool,
    started: Option<&mpsc::Sender<Instant>>,
) -> Vec<Result<Response, AgentError>> {
    let arrivals = fan_out(agents, requests, CLIENT_SLACK, interrupt);
    let all_arrived = arrivals.iter().all(|r| matches!(r, Ok(Response::Arrived)));
    if let (true, Some(tx)) = (all_arrived, started) {
        let _ = tx.send(Instant::now());
    }
    let waiting: Vec<bool> = arrivals
        .iter()
        .map(|r| matches!(r, Ok(Response::Arrived)))
        .collect();
    let gos: Vec<Request> = arrivals
        .iter()
        .map(|_| Request::Go {
            abort: !all_arrived,
        })
        .collect();
    let released: Vec<(usize, Result<Response, AgentError>)> = std::thread::scope(|s| {
        let handles: Vec<_> = agents
            .iter_mut()
            .zip(&gos)
            .enumerate()
            .filter(|(i, _)| waiting[*i])
            .map(|(i, (agent, go))| {
                s.spawn(move || (i, agent.request(go, expected + CLIENT_SLACK, interrupt)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    let mut finals: Vec<Result<Response, AgentError>> = arrivals;
    for (i, r) in released {
        finals[i] = if all_arrived {
            r
        } else {
            // Abandoned at the gate: a consequence of another side's
            // failure, not a failure of its own.
            Ok(Response::Error {
                message: ABANDONED.into(),
                skipped: false,
            })
        };
    }
    finals
}

/// A run's resolved plan. A run made before plans were stored has only
/// its study text: that is parsed once, with the points it stored, and the
/// plan kept from then on (when the database is writable), so that later
/// changes to parameters or labels cannot change how it reads.
pub fn stored_plan(store: &Store, reg: &Registry, run_id: i64) -> Result<ResolvedPlan> {
    if let Some(text) = store.plan(run_id)? {
        return ResolvedPlan::from_json(&text).with_context(|| format!("run {run_id}"));
    }
    let run = store.run(run_id)?;
    let study = Study::parse(&run.study_file, &run.study_text, reg).with_context(|| {
        format!("run {run_id} has no stored plan, and its study text no longer validates with this benchlab")
    })?;
    let points = store.points(run_id)?;
    let plan = ResolvedPlan::resolve(
        &study,
        reg,
        points.iter().map(|p| (p.workload_idx, &p.params)),
    )?;
    // Best effort: a read-only database still reports, resolving again
    // next time.
    let _ = store.set_plan(run_id, plan.version, &plan.to_json());
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchlab_core::fake::{FAKE, FAKE_CLIENTS};

    fn registry() -> Registry {
        let mut r = Registry::new();
        r.add(&FAKE).add(&FAKE_CLIENTS);
        r
    }

    fn study(reg: &Registry, text: &str) -> Study {
        Study::parse("t.toml", text, reg).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    /// A client job as (target, host, slot, first client, clients, of
    /// total).
    type Job = (usize, String, usize, u32, u32, u32);

    /// Each client job of every point of the study's first workload.
    fn jobs_per_point(text: &str) -> Vec<Vec<Job>> {
        let reg = registry();
        let s = study(&reg, text);
        let entry = &s.workloads[0];
        let wl = reg.get(&entry.kind).expect("fake workload");
        Plan::new(&s, &reg, RunOptions::default())
            .points
            .iter()
            .map(|p| {
                client_jobs(wl, entry, &s.configurations[p.config], &p.params)
                    .into_iter()
                    .map(|j| {
                        (
                            j.target,
                            j.host,
                            j.slot,
                            j.share.first,
                            j.share.count,
                            j.share.total,
                        )
                    })
                    .collect()
            })
            .collect()
    }

    const HOSTS: &str = r#"
[study]
name = "jobs"
description = "how clients are spread"

[[configuration]]
name = "base"
description = "the only one"

[[host]]
name = "gen1"
local = true

[[host]]
name = "gen2"
local = true

[[host]]
name = "gen3"
local = true

[[host]]
name = "s1"
local = true

[[host]]
name = "s2"
local = true
"#;

    #[test]
    fn clients_are_spread_evenly_over_the_client_hosts_first_ones_taking_the_rest() {
        let text = format!(
            "{HOSTS}\n[[workload]]\nkind = \"fake.clients\"\nclient = [\"gen1\", \"gen2\", \"gen3\"]\nclients = [1, 2, 7]\n"
        );
        let g = |h: &str| h.to_string();
        assert_eq!(
            jobs_per_point(&text),
            [
                // One client: one host; the others have no share, no job.
                vec![(0, g("gen1"), 0, 0, 1, 1)],
                vec![(0, g("gen1"), 0, 0, 1, 2), (0, g("gen2"), 0, 1, 1, 2)],
                // 7 over 3: 3, 2, 2, covering 0..7 once.
                vec![
                    (0, g("gen1"), 0, 0, 3, 7),
                    (0, g("gen2"), 0, 3, 2, 7),
                    (0, g("gen3"), 0, 5, 2, 7),
                ],
            ]
        );
    }

    #[test]
    fn without_a_clients_axis_each_target_gets_one_client_in_its_own_slot() {
        let text = format!(
            "{HOSTS}\n[[workload]]\nkind = \"fake\"\ntargets = [\"s1\", \"s2\"]\nclient = \"gen2\"\n"
        );
        let none = ClientShare::default();
        assert_eq!(
            jobs_per_point(&text),
            [vec![
                (0, "gen2".to_string(), 0, none.first, none.count, none.total),
                (1, "gen2".to_string(), 1, none.first, none.count, none.total),
            ]]
        );
    }

    #[test]
    fn several_targets_each_get_the_whole_spread_in_their_own_slot() {
        let text = format!(
            "{HOSTS}\n[[workload]]\nkind = \"fake.clients\"\ntargets = [\"s1\", \"s2\"]\nclient = [\"gen1\", \"gen2\"]\nclients = 3\n"
        );
        let g = |h: &str| h.to_string();
        assert_eq!(
            jobs_per_point(&text),
            [vec![
                (0, g("gen1"), 0, 0, 2, 3),
                (0, g("gen2"), 0, 2, 1, 3),
                (1, g("gen1"), 1, 0, 2, 3),
                (1, g("gen2"), 1, 2, 1, 3),
            ]]
        );
    }

    #[test]
    fn a_configuration_host_map_moves_its_client_jobs_only() {
        let text = format!(
            "{HOSTS}\n[[configuration]]\nname = \"moved\"\nhosts = {{ gen1 = \"gen3\" }}\n[[workload]]\nkind = \"fake.clients\"\nclient = [\"gen1\", \"gen2\"]\nclients = 2\n"
        );
        let g = |h: &str| h.to_string();
        assert_eq!(
            jobs_per_point(&text),
            [
                vec![(0, g("gen1"), 0, 0, 1, 2), (0, g("gen2"), 0, 1, 1, 2)],
                vec![(0, g("gen3"), 0, 0, 1, 2), (0, g("gen2"), 0, 1, 1, 2)],
            ]
        );
    }

    /// Set in the environment of [`agent_process`] by the run tests.
    const AGENT_ENV: &str = "BENCHLAB_ENGINE_TEST_AGENT";

    /// The agent of the run tests: this test binary, started by the engine
    /// as the host's `benchlab` (see [`agent_script`]), serving the real
    /// protocol with the fake workloads on descriptors 3 and 4 (libtest
    /// writes to standard output).
    #[test]
    #[ignore = "not a test: the agent process the run tests start"]
    fn agent_process() {
        if std::env::var_os(AGENT_ENV).is_none() {
            return;
        }
        use std::os::fd::FromRawFd;
        // SAFETY: the wrapper script opened 3 and 4 for this process alone,
        // and nothing else in it owns them.
        let (input, output) =
            unsafe { (std::fs::File::from_raw_fd(3), std::fs::File::from_raw_fd(4)) };
        benchlab_agent::server::serve(&registry(), input, output).expect("serve the controller");
    }

    /// A script that the engine starts as `SCRIPT agent --stdio`: it runs
    /// [`agent_process`] with the protocol on descriptors 3 and 4 and its
    /// journals in `dir`.
    fn agent_script(dir: &std::path::Path) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let exe = std::env::current_exe().expect("test binary");
        let path = dir.join("agent.sh");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nexec 3<&0 4>&1 </dev/null >/dev/null\n{AGENT_ENV}=1 BENCHLAB_STATE_DIR='{}' exec '{}' --exact runner::tests::agent_process --ignored --nocapture --test-threads=1\n",
                dir.join("state").display(),
                exe.display()
            ),
        )
        .expect("write the agent script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("make it executable");
        path
    }

    /// What an observer was told, in order.
    #[derive(Default)]
    struct Recorder {
        started: Option<RunStart>,
        lines: Vec<String>,
        skipped: Vec<usize>,
        finished: bool,
    }

    impl Observer for Recorder {
        fn start(&mut self, run: &RunStart) {
            self.started = Some(run.clone());
        }
        fn begin(&mut self, unit: &UnitInfo<'_>) {
            self.lines.push(format!("begin {} {unit}", unit.index));
        }
        fn end(&mut self, unit: &UnitInfo<'_>, result: &UnitResult<'_>) {
            self.lines
                .push(format!("end {} {unit}: {result}", unit.index));
        }
        fn skip(&mut self, index: usize) {
            self.skipped.push(index);
        }
        fn finish(&mut self) {
            self.finished = true;
        }
    }

    #[test]
    fn a_fake_study_runs_through_the_engine_into_the_store() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let agent = agent_script(dir.path());
        let text = format!(
            r#"
[study]
name = "engine"
description = "two points, one failing, through real agent processes"

[defaults]
repetitions = 2
quiesce_s = 0

[[configuration]]
name = "base"
description = "the only one"

[[host]]
name = "sut"
local = true
benchlab = "{a}"

[[host]]
name = "generator"
local = true
benchlab = "{a}"

[[workload]]
name = "ok"
kind = "fake"
size = 64
value = 100
step = 0.5

[[workload]]
name = "bad"
kind = "fake"
fail = true
"#,
            a = agent.display()
        );
        let reg = registry();
        let s = study(&reg, &text);
        let mut store = Store::open(&dir.path().join("engine.db")).expect("store");
        let interrupt = AtomicBool::new(false);
        let mut seen = Recorder::default();
        let outcome = Run {
            store: &mut store,
            registry: &reg,
            interrupt: &interrupt,
            observer: &mut seen,
            restore_first: false,
        }
        .start(&s, RunOptions::default())
        .unwrap_or_else(|e| panic!("{e:#}"));

        assert!(!outcome.interrupted && !outcome.stopped);
        assert_eq!(outcome.failed, 2, "both repetitions of `bad` fail");
        assert_eq!(
            store.run(outcome.run_id).expect("run").status,
            RunStatus::Completed
        );
        let start = seen.started.as_ref().expect("told of the start");
        assert_eq!((start.units.len(), start.already), (4, 0));
        assert!(seen.finished && seen.skipped.is_empty());
        // The fake's score is value + step × repetition, exactly.
        let ends: Vec<&String> = seen.lines.iter().filter(|l| l.starts_with("end")).collect();
        assert_eq!(ends.len(), 4, "{:?}", seen.lines);
        assert!(ends[0].ends_with("rep 1/2: score = 100.00"), "{}", ends[0]);
        assert!(ends[1].ends_with("rep 2/2: score = 100.50"), "{}", ends[1]);
        for e in &ends[2..] {
            assert!(
                e.contains("base · bad · ") && e.contains(": FAILED: "),
                "{e}"
            );
        }
        let samples = store.samples(outcome.run_id).expect("samples");
        let ok: Vec<f64> = samples
            .iter()
            .filter(|r| r.status == SampleStatus::Ok)
            .map(|r| r.metrics["score"])
            .collect();
        assert_eq!(ok, [100.0, 100.5]);
        assert_eq!(
            samples
                .iter()
                .filter(|r| r.status == SampleStatus::Failed && r.reason.is_some())
                .count(),
            2
        );
    }
}
