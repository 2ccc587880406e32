//! The runner: checks every host, expands a study into units, drives the
//! agents through each, records every repetition the moment it finishes,
//! and stops cleanly on Ctrl-C.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use benchlab_core::plan::{Plan, PlannedPoint, RunOptions, Unit};
use benchlab_core::resolved::ResolvedPlan;
use benchlab_core::study::{Configuration, DesignKind, OnError, Study, WorkloadEntry};
use benchlab_core::units::now_rfc3339;
use benchlab_core::{Registry, Sample, ServerSide};
use benchlab_monitor::Series;
use benchlab_store::{
    ConfigRow, HostRow, NewRun, PointRow, Reading, RunStatus, SampleStatus, Store, UnitKey,
};

use crate::context::RunCtx;
use crate::engine::Engine;
use crate::envrun::EnvControl;
use crate::hosts::Pool;
use crate::monitors::{Monitors, Watch};
use crate::observer::{Headline, Observer, PlannedUnit, RunStart, UnitInfo, UnitResult};
use crate::services::{self, Services};
use crate::unit::{UnitError, UnitSpec};

/// How a run ended.
#[derive(Debug)]
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
    /// The sequential rule of the until-decided design.
    pub rule: &'a dyn crate::Decider,
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
            rule,
        } = self;
        let (mut pool, inventories, notes) = Pool::preflight(study, reg, interrupt, restore_first)?;
        services::check_all(study, &mut pool)?;
        crate::stacks::check_all(study, &mut pool)?;
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
            rule,
            reg,
            opts,
            observer,
            env: EnvControl::default(),
            svc: Services::default(),
            monitors: Monitors::default(),
            stacks: Default::default(),
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
        self.reopen(run_id, Continuation::Resume)
    }

    /// Adds rounds of the until-decided design to a stored run's
    /// undecided points (`benchlab run --resume RUN --until-decided`),
    /// under the same sequential rule, so that the looks already taken
    /// count: a run of the fixed design continues from its repetitions, an
    /// until-decided run from its last round. `cap` raises the run's cap
    /// on repetitions per side.
    pub fn until_decided(self, run_id: i64, cap: Option<u32>) -> Result<Outcome> {
        self.reopen(run_id, Continuation::UntilDecided(cap))
    }

    /// A stored run continued: refused while it may still be running or
    /// when there is nothing to add, else its hosts checked again and the
    /// engine run over its stored plan.
    fn reopen(self, run_id: i64, how: Continuation) -> Result<Outcome> {
        let Run {
            store,
            registry: reg,
            interrupt,
            observer,
            restore_first,
            rule,
        } = self;
        let until_decided = matches!(how, Continuation::UntilDecided(_));
        refuse_reopen(store, run_id, until_decided)?;
        let run = store.run(run_id)?;
        let target = store.target().to_string();
        let refused = |e: anyhow::Error| until_decided_refusal(&target, until_decided, e);
        let plan = stored_plan(store, reg, run_id)?;
        for w in &plan.workloads {
            if reg.get(&w.kind).is_none() {
                bail!(
                    "run {run_id} needs workload `{}`, which this benchlab does not have",
                    w.kind
                );
            }
        }
        let mut study = plan.study;
        let note = match how {
            Continuation::Resume => "",
            Continuation::UntilDecided(cap) => {
                if let Some(cap) = cap {
                    if cap < study.design.cap() {
                        bail!(
                            "--max-repetitions {cap} is less than run {run_id}'s cap of {}: allowed is that or more",
                            study.design.cap()
                        );
                    }
                    study.design.extended_to = Some(cap);
                }
                crate::decide::refuse_if_decided(store, reg, &study, run_id, rule, run.options)
                    .map_err(refused)?;
                "--until-decided: rounds for the undecided points"
            }
        };
        let (mut pool, inventories, notes) =
            Pool::preflight(&study, reg, interrupt, restore_first)?;
        services::check_all(&study, &mut pool)?;
        crate::stacks::check_all(&study, &mut pool)?;
        store_hosts(store, run_id, inventories)?;
        store.set_run_status(run_id, RunStatus::Running, &now_rfc3339())?;
        store.add_event(run_id, &now_rfc3339(), "resumed", note)?;
        let engine = Engine {
            rule,
            reg,
            opts: run.options,
            observer,
            env: EnvControl::default(),
            svc: Services::default(),
            monitors: Monitors::default(),
            stacks: Default::default(),
            ctx: RunCtx {
                study: &study,
                pool,
                store,
                run_id,
                interrupt,
                notes,
            },
        };
        match how {
            Continuation::Resume => engine.execute(),
            Continuation::UntilDecided(_) => engine.execute_until_decided(),
        }
    }
}

/// How [`Run::reopen`] continues a stored run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Continuation {
    /// With its first missing repetition, in its own design.
    Resume,
    /// With rounds of the until-decided design, up to a raised cap.
    UntilDecided(Option<u32>),
}

/// Refuses to continue run `run_id` (`--resume`, or `--until-decided`
/// when `until_decided`) when it is complete or its controller may still
/// be running it: what [`Run::resume`] and [`Run::until_decided`] check
/// first, for a caller that must know before it takes the run's hosts.
pub fn refuse_reopen(store: &Store, run_id: i64, until_decided: bool) -> Result<()> {
    let run = store.run(run_id)?;
    if !until_decided && run.status == RunStatus::Completed {
        bail!("run {run_id} is already complete: nothing to resume");
    }
    refuse_if_running(&run)
        .map_err(|e| until_decided_refusal(&store.target().to_string(), until_decided, e))
}

/// A refusal of `--until-decided` names the flag and the store the run
/// is in: the run's number alone does not say which store.
fn until_decided_refusal(target: &str, until_decided: bool, e: anyhow::Error) -> anyhow::Error {
    if until_decided {
        anyhow::anyhow!("{target}: --until-decided: {e}")
    } else {
        e
    }
}

/// Refuses a run that its controller may still be running: measuring its
/// units from here too would store every one twice.
fn refuse_if_running(run: &benchlab_store::RunRow) -> Result<()> {
    let run_id = run.id;
    if run.status == RunStatus::Running && run.controller_host != hostname() {
        // A shared store (PostgreSQL) holds runs of other controllers:
        // their pid means nothing here.
        bail!(
            "run {run_id} is running on the controller {} (or that controller died): resume it there",
            run.controller_host
        );
    }
    if run.status == RunStatus::Running {
        if let Some(pid) = run.controller_pid {
            if is_live_benchlab(pid) {
                bail!("run {run_id} is still being run by process {pid}: let it finish, or interrupt it, first");
            }
        }
    }
    Ok(())
}

/// Whether a run marked running still has its controller: `Some(true)`
/// or `Some(false)` when the controller is this machine (its process is
/// a live benchlab or not), `None` when it is another machine, whose
/// processes cannot be seen from here (a shared store).
pub fn controller_alive(run: &benchlab_store::RunRow) -> Option<bool> {
    if run.controller_host != hostname() {
        return None;
    }
    Some(run.controller_pid.is_some_and(is_live_benchlab))
}

/// Whether process `pid` of this machine is a benchlab other than this
/// one (a pid the kernel gave again to another program is not).
pub fn is_live_benchlab(pid: i64) -> bool {
    pid as u32 != std::process::id() && process_is_benchlab(pid)
}

fn process_is_benchlab(pid: i64) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("benchlab"))
        .unwrap_or(false)
}

/// After a failed point, how long a managed server may take to be seen
/// gone before the clients' own error stands as the point's reason.
const DEATH_GRACE: Duration = Duration::from_secs(1);

impl Engine<'_> {
    /// Runs every repetition not yet stored, then puts the hosts back.
    fn execute(mut self) -> Result<Outcome> {
        if self.ctx.study.design.kind == DesignKind::UntilDecided {
            return self.execute_until_decided();
        }
        let plan = Plan::new(self.ctx.study, self.reg, self.opts);
        let todo = self.pending(&plan)?;
        let mut adaptive = AdaptiveState::load(self.ctx.store, self.ctx.run_id, self.reg)?;
        let (mut failed, mut stopped) = (0, false);
        for (n, unit) in todo.iter().enumerate() {
            if self.ctx.interrupt.load(Ordering::Relaxed) {
                break;
            }
            match self.repetition(&plan, n, unit, &mut adaptive)? {
                // Nothing ran, so there is nothing to quiesce after.
                Step::Skipped => continue,
                Step::Next => {}
                Step::Failed => failed += 1,
                Step::Stop => {
                    failed += 1;
                    stopped = true;
                    break;
                }
                Step::Interrupted => break,
            }
            let point = &plan.points[unit.point];
            if n + 1 < todo.len() && point.quiesce_s > 0.0 {
                sleep_interruptibly(Duration::from_secs_f64(point.quiesce_s), self.ctx.interrupt);
            }
        }
        self.finish(failed, stopped)
    }

    /// Rounds until every comparison is decided (see [`crate::decide`]),
    /// then puts the hosts back.
    fn execute_until_decided(mut self) -> Result<Outcome> {
        let rule = self.rule;
        let ended = self.until_decided(rule)?;
        self.finish(ended.failed, ended.stopped)
    }

    /// The repetitions a stored run still lacks (all of them for a new
    /// run), announced to the observer.
    fn pending(&mut self, plan: &Plan) -> Result<Vec<Unit>> {
        let done = self.ctx.store.done_units(self.ctx.run_id)?;
        let todo: Vec<Unit> = plan
            .units
            .iter()
            .filter(|u| !done.contains(&UnitKey::of(plan, u)))
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
        Ok(todo)
    }

    /// One repetition from start to store: the adaptive rule's say, the
    /// configuration switched to, the measurement, its sample or reason
    /// recorded with the hosts' monitor series, and the agents reset after
    /// a failure.
    pub(crate) fn repetition(
        &mut self,
        plan: &Plan,
        n: usize,
        unit: &Unit,
        adaptive: &mut AdaptiveState,
    ) -> Result<Step> {
        let (study, run_id, interrupt) = (self.ctx.study, self.ctx.run_id, self.ctx.interrupt);
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
            return Ok(Step::Skipped);
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
        // The services on guests this configuration does not use stop
        // first, through the agents that hold them: the switch stops
        // those guests.
        let leaving = crate::guests::leaving(&self.ctx, point.config);
        if !leaving.is_empty() {
            self.svc
                .stop_on(&mut self.ctx, &leaving, "its configuration ended");
        }
        let switched = self.env.switch(point.config, &entry.name, &mut self.ctx);
        self.tell();
        switched?;
        if interrupt.load(Ordering::Relaxed) {
            // Ctrl-C while a configuration was being applied: not a
            // failure of the point, which is simply not run.
            return Ok(Step::Interrupted);
        }
        let started = now_rfc3339();
        let (outcome, monitored) = self.measure(point, unit.repetition, config, entry);
        let outcome = outcome.map_err(|e| match e {
            UnitError::Failed(why) => crate::guests::lost(&self.ctx, point.config, why),
            other => other,
        });
        let ended = now_rfc3339();
        adaptive.record(
            pkey,
            outcome
                .as_ref()
                .ok()
                .and_then(|s| headline(self.reg, &entry.kind, &point.params, s)),
            !matches!(outcome, Err(UnitError::Interrupted)),
        );
        let stamp = Stamp {
            point_id,
            repetition: unit.repetition,
            started: &started,
            ended: &ended,
        };
        let Some(result) = self.record(point, &stamp, &outcome)? else {
            return Ok(Step::Interrupted);
        };
        for (host, series) in &monitored {
            self.ctx
                .store
                .add_monitor(point_id, unit.repetition, host, series)?;
        }
        self.stacks
            .record(&mut self.ctx, point_id, unit.repetition)?;
        self.observer.end(&info, &result);
        self.tell();
        let Err(e) = &outcome else {
            return Ok(Step::Next);
        };
        // The agents' state is unknown after a failed or skipped point
        // (another target's server may still be waiting): stop them all,
        // on every host; the next point starts fresh ones. Services go
        // first, stopped by the agents that hold them.
        self.svc.stop_all(&mut self.ctx);
        self.tell();
        self.ctx.pool.kill_all();
        Ok(match e {
            UnitError::Failed(_) | UnitError::GuestEnded(_)
                if study.defaults.on_error == OnError::Stop =>
            {
                Step::Stop
            }
            UnitError::Failed(_) | UnitError::GuestEnded(_) => Step::Failed,
            UnitError::Skipped(_) | UnitError::Interrupted => Step::Next,
        })
    }

    /// Measures one repetition in the configuration in force: its
    /// services ready, the hosts' monitors around it, a managed server's
    /// death made the point's reason, the background load's own CPU use
    /// added. Returns the outcome and each host's monitor series.
    fn measure(
        &mut self,
        point: &PlannedPoint,
        repetition: u32,
        config: &Configuration,
        entry: &WorkloadEntry,
    ) -> (
        std::result::Result<Sample, UnitError>,
        Vec<(String, Series)>,
    ) {
        let (reg, interrupt) = (self.reg, self.ctx.interrupt);
        if let Some(why) = &self.env.failed {
            let why = format!("configuration could not be applied: {why}");
            return (Err(UnitError::Failed(why)), Vec::new());
        }
        if let Err(why) = self.env.point_start(interrupt) {
            return (Err(UnitError::Failed(why)), Vec::new());
        }
        let mut monitored = Vec::new();
        let sides = [self.env.server.clone(), self.env.client.clone()];
        let wl = reg.get(&entry.kind);
        let targets = if wl.map(|w| w.server_side()) == Some(ServerSide::Service) {
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
                    repetition,
                    sides: &sides,
                    targets: &targets,
                };
                let watch = Watch {
                    config,
                    entry,
                    sides: &sides,
                    expected: wl
                        .map(|w| w.expected_duration(&point.params))
                        .unwrap_or_default(),
                };
                let watching = self.monitors.start(&mut self.ctx, &watch);
                if let Some(wl) = wl {
                    let sampled = crate::stacks::Sampled {
                        wl,
                        entry,
                        config,
                        point,
                        services: self.svc.leaders(),
                    };
                    self.stacks.start(&mut self.ctx, &sampled);
                }
                let r = self.run_unit(&unit_spec);
                self.stacks.stop(&mut self.ctx);
                monitored = self.monitors.stop(&mut self.ctx, &watching);
                // A server that went down mid-point fails it with its own
                // exit reason, whatever the clients saw.
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
                // The load's own CPU use (100 = one CPU), so that points
                // can be compared for equal load.
                sample
                    .metrics
                    .insert("background_load_cpu_pct".into(), load.util_pct);
            }
        }
        (r, monitored)
    }

    /// Stores a repetition's sample (with its workload's notes) or its
    /// reason; `None` for an interrupted one, which is not stored so that
    /// a resumed run measures it again.
    fn record<'o>(
        &mut self,
        point: &PlannedPoint,
        at: &Stamp<'_>,
        outcome: &'o std::result::Result<Sample, UnitError>,
    ) -> Result<Option<UnitResult<'o>>> {
        let entry = &self.ctx.study.workloads[point.workload];
        let wl = self.reg.get(&entry.kind);
        let (status, reason, sample) = match outcome {
            Ok(sample) => (SampleStatus::Ok, None, Some(sample)),
            Err(UnitError::Skipped(why)) => (SampleStatus::Skipped, Some(why.as_str()), None),
            Err(UnitError::Failed(why) | UnitError::GuestEnded(why)) => {
                (SampleStatus::Failed, Some(why.as_str()), None)
            }
            Err(UnitError::Interrupted) => return Ok(None),
        };
        self.ctx.store.record_sample(
            at.point_id,
            at.repetition,
            status,
            reason,
            at.started,
            at.ended,
            sample,
        )?;
        Ok(Some(match outcome {
            Ok(sample) => {
                let Some(wl) = wl else {
                    return Ok(Some(UnitResult::Ok(None)));
                };
                let notes = wl.notes(&point.params, &sample.metrics);
                self.ctx
                    .store
                    .add_notes(at.point_id, at.repetition, &notes)?;
                let spec = wl.table_metrics(&point.params).into_iter().next();
                UnitResult::Ok(spec.and_then(|s| {
                    sample.metrics.get(s.name).map(|&value| Headline {
                        metric: s.name,
                        value,
                        decimals: s.decimals,
                    })
                }))
            }
            Err(UnitError::Skipped(why)) => UnitResult::Skipped(why),
            Err(UnitError::Failed(why) | UnitError::GuestEnded(why)) => UnitResult::Failed(why),
            Err(UnitError::Interrupted) => unreachable!("returned above"),
        }))
    }

    /// After the last repetition (or Ctrl-C, or a stop at a failed
    /// point): the services stopped, every host put back, the run's
    /// status and closing event stored.
    fn finish(mut self, failed: usize, stopped: bool) -> Result<Outcome> {
        let run_id = self.ctx.run_id;
        self.observer.finish();
        self.svc.stop_all(&mut self.ctx);
        let reverted = self.env.revert(&mut self.ctx);
        self.tell();
        reverted?;

        let interrupted = self.ctx.interrupt.load(Ordering::Relaxed);
        if interrupted {
            // The abandoned point's sides may be mid-measurement: stop them now.
            self.ctx.pool.kill_all();
        }
        // The guests' stops come before the run's closing event.
        crate::guests::stop_all(
            &mut self.ctx,
            if interrupted {
                "the run was interrupted"
            } else {
                "the run ended"
            },
        );
        let at = now_rfc3339();
        if interrupted {
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

/// What a repetition's end means for the run.
pub(crate) enum Step {
    /// The adaptive rule had enough of this point: not run.
    Skipped,
    /// Go on with the next one.
    Next,
    /// It failed; go on.
    Failed,
    /// It failed and the study says stop (`on_error = "stop"`).
    Stop,
    /// Ctrl-C: stop without storing it.
    Interrupted,
}

/// Where and when a repetition ran, for its row in the store.
struct Stamp<'a> {
    point_id: i64,
    repetition: u32,
    started: &'a str,
    ended: &'a str,
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
#[derive(Default)]
pub(crate) struct AdaptiveState {
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

pub(crate) fn sleep_interruptibly(d: Duration, interrupt: &AtomicBool) {
    let until = Instant::now() + d;
    while !interrupt.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
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
    use crate::unit::client_jobs;
    use benchlab_core::decision::{Decided, StopReason};
    use benchlab_core::fake::{FAKE, FAKE_CLIENTS};
    use benchlab_core::ClientShare;

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
            rule: &AfterN(usize::MAX),
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

    /// A run of the tests' store through the real agents, under `rule`.
    fn run_of<'a>(
        store: &'a mut Store,
        reg: &'a Registry,
        interrupt: &'a AtomicBool,
        observer: &'a mut Recorder,
        rule: &'a dyn crate::Decider,
    ) -> Run<'a> {
        Run {
            store,
            registry: reg,
            interrupt,
            observer,
            restore_first: false,
            rule,
        }
    }

    /// `body` with the two hosts of the run tests, whose benchlab is
    /// [`agent_script`]'s.
    fn with_agents(agent: &std::path::Path, body: &str) -> String {
        format!(
            "{body}\n[[host]]\nname = \"sut\"\nlocal = true\nbenchlab = \"{a}\"\n\n[[host]]\nname = \"generator\"\nlocal = true\nbenchlab = \"{a}\"\n",
            a = agent.display()
        )
    }

    /// A rule for the orchestration tests: a comparison whose sides both
    /// hold `n` values is decided (better when A's mean is higher,
    /// equivalent when equal, worse otherwise), any other undecided.
    struct AfterN(usize);

    impl crate::Decider for AfterN {
        fn decide(&self, q: &crate::Question<'_>) -> crate::Answer {
            let (a, b) = (q.sides.a, q.sides.b);
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
            let adv = (mean(a) - mean(b)) / mean(b) * 100.0;
            let verdict = if a.len() < self.0 || b.len() < self.0 {
                Decided::Undecided
            } else if adv.abs() <= q.margin_pct {
                Decided::Equivalent
            } else if adv > 0.0 {
                Decided::Better
            } else {
                Decided::Worse
            };
            crate::Answer {
                verdict,
                advantage_pct: Some(adv),
                ci_pct: Some((adv - 1.0, adv + 1.0)),
                mde_pct: Some(10.0 / a.len().max(1) as f64),
            }
        }
    }

    fn decide_study(agent: &std::path::Path, extra: &str) -> String {
        let body = format!(
            r#"
[study]
name = "decide"
description = "rounds until decided, through real agent processes"
design = "until-decided"
order = "interleaved"
max_repetitions = 5
{extra}

[defaults]
repetitions = 2
quiesce_s = 0

[[configuration]]
name = "a"

[[configuration]]
name = "b"
set = {{ value = 110 }}

[[workload]]
name = "w"
kind = "fake"
size = [1, 2]
step = 0
"#
        );
        with_agents(agent, &body)
    }

    fn reps_per_point(store: &Store, run_id: i64) -> BTreeMap<(usize, usize), usize> {
        let points = store.points(run_id).expect("points");
        let mut n = BTreeMap::new();
        for s in store.samples(run_id).expect("samples") {
            let p = points.iter().find(|p| p.id == s.point_id).expect("point");
            *n.entry((p.config_idx, p.point_idx)).or_default() += 1;
        }
        n
    }

    #[test]
    fn rounds_run_until_every_comparison_is_decided_then_stop() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let agent = agent_script(dir.path());
        let reg = registry();
        let s = study(&reg, &decide_study(&agent, ""));
        let mut store = Store::open(&dir.path().join("d.db")).expect("store");
        let interrupt = AtomicBool::new(false);
        let mut seen = Recorder::default();
        let outcome = run_of(&mut store, &reg, &interrupt, &mut seen, &AfterN(3))
            .start(&s, RunOptions::default())
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(outcome.failed, 0);
        // Three rounds decide every comparison: no point runs a fourth,
        // though max_repetitions allows five and the fixed design two.
        let reps = reps_per_point(&store, outcome.run_id);
        assert!(reps.values().all(|&n| n == 3), "{reps:?}");
        let d = store.decisions(outcome.run_id).expect("decisions");
        // 2 points × 2 metrics, b against a.
        assert_eq!(d.len(), 4, "{d:?}");
        for x in &d {
            assert_eq!(
                (x.config, x.repetitions, x.margin_pct),
                (1, 3, 2.0),
                "{x:?}"
            );
            // b's score is 10 % higher; its latency the same.
            let want = if x.metric == "score" {
                Decided::Better
            } else {
                Decided::Equivalent
            };
            assert_eq!(x.verdict, want, "{x:?}");
            assert_eq!(x.mde_pct, None, "a decided comparison has no MDE");
        }
        let sum = store
            .design_summary(outcome.run_id)
            .expect("summary")
            .expect("stored");
        assert_eq!(
            (sum.comparisons, sum.decided, sum.rounds, sum.repetitions),
            (4, 4, 3, 12)
        );
        assert_eq!(sum.stop, StopReason::AllDecided);
        assert_eq!(sum.fixed_repetitions, 8);
        // Nothing is left to decide: --until-decided refuses, naming why.
        let e = run_of(
            &mut store,
            &reg,
            &interrupt,
            &mut Recorder::default(),
            &AfterN(3),
        )
        .until_decided(outcome.run_id, None)
        .expect_err("nothing to decide");
        assert!(
            e.to_string()
                .contains("has no undecided point: all 4 comparison(s) are decided"),
            "{e}"
        );
    }

    #[test]
    fn a_budget_spent_leaves_comparisons_undecided_and_until_decided_continues() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let agent = agent_script(dir.path());
        let reg = registry();
        let s = study(&reg, &decide_study(&agent, ""));
        let mut store = Store::open(&dir.path().join("d.db")).expect("store");
        let interrupt = AtomicBool::new(false);
        // A rule that never decides: every point runs max_repetitions.
        let outcome = run_of(
            &mut store,
            &reg,
            &interrupt,
            &mut Recorder::default(),
            &AfterN(usize::MAX),
        )
        .start(&s, RunOptions::default())
        .unwrap_or_else(|e| panic!("{e:#}"));
        let reps = reps_per_point(&store, outcome.run_id);
        assert!(reps.values().all(|&n| n == 5), "{reps:?}");
        let d = store.decisions(outcome.run_id).expect("decisions");
        assert!(
            d.iter()
                .all(|x| x.verdict == Decided::Undecided && x.mde_pct == Some(2.0)),
            "{d:?}"
        );
        let sum = store.design_summary(outcome.run_id).unwrap().unwrap();
        assert_eq!((sum.decided, sum.stop), (0, StopReason::MaxRepetitions));
        // At the cap, more rounds would leave the rule's error control.
        let e = run_of(
            &mut store,
            &reg,
            &interrupt,
            &mut Recorder::default(),
            &AfterN(usize::MAX),
        )
        .until_decided(outcome.run_id, None)
        .expect_err("at the cap");
        assert!(
            e.to_string().contains("reached their cap of 5 repetitions"),
            "{e}"
        );

        // A fixed-design run of the same study: --until-decided adds
        // rounds to it, from its two repetitions, until decided.
        let fixed = study(
            &reg,
            &decide_study(&agent, "").replace("design = \"until-decided\"", "design = \"fixed\""),
        );
        let first = run_of(
            &mut store,
            &reg,
            &interrupt,
            &mut Recorder::default(),
            &AfterN(4),
        )
        .start(&fixed, RunOptions::default())
        .unwrap_or_else(|e| panic!("{e:#}"));
        assert!(reps_per_point(&store, first.run_id)
            .values()
            .all(|&n| n == 2));
        assert!(store.decisions(first.run_id).unwrap().is_empty());
        let more = run_of(
            &mut store,
            &reg,
            &interrupt,
            &mut Recorder::default(),
            &AfterN(4),
        )
        .until_decided(first.run_id, None)
        .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(more.run_id, first.run_id);
        assert!(reps_per_point(&store, first.run_id)
            .values()
            .all(|&n| n == 4));
        let d = store.decisions(first.run_id).unwrap();
        assert!(
            d.iter()
                .all(|x| x.verdict.is_decided() && x.repetitions == 4),
            "{d:?}"
        );
        assert_eq!(
            store.run(first.run_id).unwrap().status,
            RunStatus::Completed
        );
    }

    /// Issue 36: a planted difference — the fake system with 3 % noise,
    /// 5 % faster in one configuration — is called better by benchlab's
    /// own sequential rule in each of three runs (three noise seeds),
    /// with the interval containing +5 %; the A/A control goes through
    /// the same rule.
    #[test]
    fn a_planted_five_percent_is_called_better_in_three_runs_of_three() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let agent = agent_script(dir.path());
        let reg = registry();
        let mut store = Store::open(&dir.path().join("planted.db")).expect("store");
        let interrupt = AtomicBool::new(false);
        for seed in 1..=3 {
            let text = format!(
                r#"
[study]
name = "planted"
design = "until-decided"
control = true
max_repetitions = 60

[defaults]
quiesce_s = 0

[[configuration]]
name = "base"

[[configuration]]
name = "plus5"
set = {{ value = 105 }}

[[workload]]
kind = "fake"
noise = 0.03
step = 0
seed = {seed}
"#
            );
            let s = study(&reg, &with_agents(&agent, &text));
            let outcome = run_of(
                &mut store,
                &reg,
                &interrupt,
                &mut Recorder::default(),
                &crate::Sequential::default(),
            )
            .start(&s, RunOptions::default())
            .unwrap_or_else(|e| panic!("{e:#}"));
            let d = store.decisions(outcome.run_id).expect("decisions");
            let score = d
                .iter()
                .find(|x| x.config == 1 && x.metric == "score")
                .expect("plus5's score");
            assert_eq!(score.verdict, Decided::Better, "seed {seed}: {score:?}");
            let (lo, hi) = (score.ci_lo_pct.unwrap(), score.ci_hi_pct.unwrap());
            assert!(lo > 2.0 && lo <= 5.0 && hi >= 5.0, "seed {seed}: {score:?}");
            assert!(
                score.repetitions >= 2 && score.repetitions < 60,
                "{score:?}"
            );
            // The control's comparisons were put to the same rule.
            assert_eq!(
                d.iter().filter(|x| x.config == 2).count(),
                2,
                "seed {seed}: {d:?}"
            );
        }
    }
}
