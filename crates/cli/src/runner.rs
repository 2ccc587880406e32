//! The runner: expands a study into units, drives the agents through
//! each, records every repetition the moment it finishes, and stops
//! cleanly on Ctrl-C.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use benchlab_agent::{AgentError, AgentHandle, Request, Response};
use benchlab_core::plan::{Plan, PlannedPoint, RunOptions, Unit};
use benchlab_core::study::{OnError, Study};
use benchlab_core::units::now_rfc3339;
use benchlab_core::{Registry, Sample};
use benchlab_store::{ConfigRow, HostRow, NewRun, PointRow, RunStatus, SampleStatus, Store};

use crate::progress::Progress;

/// Where local data connections go. Issue-level hosts come later; for
/// now both sides run on this host.
const LOCAL_DATA: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// Slack added to a client's expected duration before it is declared hung.
const CLIENT_SLACK: Duration = Duration::from_secs(60);
/// How long a server may take to finish after its client did.
const SERVER_FINISH: Duration = Duration::from_secs(15);

/// How a run ended.
pub(crate) struct Outcome {
    pub run_id: i64,
    pub interrupted: bool,
    pub stopped: bool,
    pub failed: usize,
}

impl Outcome {
    pub(crate) fn status_text(&self) -> String {
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

/// Starts a new run of a study.
pub(crate) fn start(
    store: &mut Store,
    reg: &Registry,
    study: &Study,
    opts: RunOptions,
) -> Result<Outcome> {
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
        store.add_configuration(
            run_id,
            &ConfigRow {
                idx: i,
                name: c.name.clone(),
                description: c.description.clone(),
                spec: serde_json::json!({ "server": c.server, "client": c.client }),
            },
        )?;
    }
    store.add_event(
        run_id,
        &started,
        "started",
        &format!("scale {}, quick {}", opts.scale, opts.quick),
    )?;
    execute(store, reg, study, run_id, opts)
}

/// Resumes an unfinished run with its first missing repetition.
pub(crate) fn resume(store: &mut Store, reg: &Registry, run_id: i64) -> Result<Outcome> {
    let run = store.run(run_id)?;
    if run.status == RunStatus::Completed {
        bail!("run {run_id} is already complete: nothing to resume");
    }
    if run.status == RunStatus::Running {
        if let Some(pid) = run.controller_pid {
            if pid as u32 != std::process::id() && process_is_benchlab(pid) {
                bail!("run {run_id} is still being run by process {pid}");
            }
        }
    }
    let study = Study::parse(&run.study_file, &run.study_text, reg)
        .context("the stored study file no longer validates with this benchlab")?;
    store.set_run_status(run_id, RunStatus::Running, &now_rfc3339())?;
    store.add_event(run_id, &now_rfc3339(), "resumed", "")?;
    execute(store, reg, &study, run_id, run.options)
}

fn process_is_benchlab(pid: i64) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("benchlab"))
        .unwrap_or(false)
}

/// The two agents of a local run: one for server sides (the system under
/// test), one for client sides (the load generator).
struct Agents {
    exe: std::path::PathBuf,
    server: AgentHandle,
    client: AgentHandle,
}

impl Agents {
    fn start() -> Result<Agents> {
        let exe = std::env::current_exe().context("cannot find the benchlab binary")?;
        let server = AgentHandle::spawn_local(&exe, "sut")?;
        let client = AgentHandle::spawn_local(&exe, "generator")?;
        Ok(Agents {
            exe,
            server,
            client,
        })
    }

    /// Replaces both agents with fresh ones (after a failed point, their
    /// state is unknown).
    fn restart(&mut self) -> Result<()> {
        self.server.kill_now();
        self.client.kill_now();
        self.server = AgentHandle::spawn_local(&self.exe, "sut")?;
        self.client = AgentHandle::spawn_local(&self.exe, "generator")?;
        Ok(())
    }

    fn shutdown(self) {
        self.server.shutdown();
        self.client.shutdown();
    }
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

fn execute(
    store: &mut Store,
    reg: &Registry,
    study: &Study,
    run_id: i64,
    opts: RunOptions,
) -> Result<Outcome> {
    let interrupt = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second Ctrl-C exits at once; the first stops cleanly.
        signal_hook::flag::register_conditional_shutdown(
            sig,
            crate::EXIT_INTERRUPTED,
            interrupt.clone(),
        )?;
        signal_hook::flag::register(sig, interrupt.clone())?;
    }

    let plan = Plan::new(study, reg, opts);
    let done = store.done_units(run_id)?;
    let key = |u: &Unit| {
        let p = &plan.points[u.point];
        (p.config, p.workload, p.point, u.repetition)
    };
    let todo: Vec<Unit> = plan
        .units
        .iter()
        .filter(|u| !done.contains(&key(u)))
        .copied()
        .collect();

    let mut agents = Agents::start()?;
    let inventory =
        match agents
            .server
            .request(&Request::Inventory, Duration::from_secs(60), &interrupt)
        {
            Ok(Response::Inventory { inventory }) => inventory,
            Ok(other) => bail!("agent `sut` answered the inventory request with {other:?}"),
            Err(e) => return Err(e.into()),
        };
    store.add_host(
        run_id,
        &HostRow {
            name: "local".into(),
            roles: "sut,generator".into(),
            inventory,
        },
    )?;

    let mut progress = Progress::new(todo.len(), plan.expected_s(&todo), done.len());
    let mut failed = 0;
    let mut stopped = false;
    for (n, unit) in todo.iter().enumerate() {
        if interrupt.load(Ordering::Relaxed) {
            break;
        }
        let point = &plan.points[unit.point];
        let entry = &study.workloads[point.workload];
        let config = &study.configurations[point.config];
        let what = format!(
            "{} · {} · {} · rep {}/{}",
            config.name,
            entry.name,
            point.label,
            unit.repetition + 1,
            point.repetitions
        );
        progress.begin(n, &what);
        let point_id = store.ensure_point(
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
        let started = now_rfc3339();
        let outcome = run_unit(reg, study, point, unit.repetition, &mut agents, &interrupt);
        let ended = now_rfc3339();
        let summary = match &outcome {
            Ok(sample) => {
                store.record_sample(
                    point_id,
                    unit.repetition,
                    SampleStatus::Ok,
                    None,
                    &started,
                    &ended,
                    Some(sample),
                )?;
                let spec = reg
                    .get(&entry.kind)
                    .and_then(|w| w.table_metrics(&point.params).into_iter().next());
                match spec.and_then(|s| sample.metrics.get(s.name).map(|v| (s, *v))) {
                    Some((s, v)) => format!("{} = {v:.*}", s.name, s.decimals),
                    None => "ok".into(),
                }
            }
            Err(UnitError::Skipped(reason)) => {
                store.record_sample(
                    point_id,
                    unit.repetition,
                    SampleStatus::Skipped,
                    Some(reason),
                    &started,
                    &ended,
                    None,
                )?;
                format!("skipped: {reason}")
            }
            Err(UnitError::Failed(reason)) => {
                failed += 1;
                store.record_sample(
                    point_id,
                    unit.repetition,
                    SampleStatus::Failed,
                    Some(reason),
                    &started,
                    &ended,
                    None,
                )?;
                format!("FAILED: {reason}")
            }
            Err(UnitError::Interrupted) => break,
        };
        progress.end(n, &what, &summary, point.expected_s);
        if matches!(outcome, Err(UnitError::Failed(_))) {
            if study.defaults.on_error == OnError::Stop {
                stopped = true;
                break;
            }
            // The agents' state is unknown after a failure: start afresh.
            if let Err(e) = agents.restart() {
                progress.finish();
                store.set_run_status(run_id, RunStatus::Failed, &now_rfc3339())?;
                return Err(e.context("cannot restart the agents after a failed point"));
            }
        }
        if n + 1 < todo.len() && point.quiesce_s > 0.0 {
            sleep_interruptibly(Duration::from_secs_f64(point.quiesce_s), &interrupt);
        }
    }
    progress.finish();

    let interrupted = interrupt.load(Ordering::Relaxed);
    let at = now_rfc3339();
    if interrupted {
        // The abandoned point's sides may be mid-measurement: stop them now.
        agents.server.kill_now();
        agents.client.kill_now();
        store.set_run_status(run_id, RunStatus::Interrupted, &at)?;
        store.add_event(
            run_id,
            &at,
            "interrupted",
            "stopped by a signal; finished repetitions are kept",
        )?;
    } else {
        agents.shutdown();
        let status = if stopped {
            RunStatus::Failed
        } else {
            RunStatus::Completed
        };
        store.set_run_status(run_id, status, &at)?;
        // The controller is held to the same memory budget as the agents.
        let rss = format!(
            "controller peak RSS {} KiB",
            benchlab_core::cpu::peak_rss_kib()
        );
        let kind = if stopped { "stopped" } else { "completed" };
        store.add_event(run_id, &at, kind, &rss)?;
    }
    Ok(Outcome {
        run_id,
        interrupted,
        stopped,
        failed,
    })
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

/// Runs one repetition: server side, client side, both results, combine.
fn run_unit(
    reg: &Registry,
    study: &Study,
    point: &PlannedPoint,
    repetition: u32,
    agents: &mut Agents,
    interrupt: &AtomicBool,
) -> std::result::Result<Sample, UnitError> {
    let entry = &study.workloads[point.workload];
    let config = &study.configurations[point.config];
    let wl = reg
        .get(&entry.kind)
        .ok_or_else(|| UnitError::Skipped(format!("unknown workload {}", entry.kind)))?;
    let agent_error = |who: &str, message: String, skipped: bool| {
        if skipped {
            UnitError::Skipped(format!("{who}: {message}"))
        } else {
            UnitError::Failed(format!("{who}: {message}"))
        }
    };

    let mut server_addr = None;
    if wl.has_server() {
        let req = Request::Serve {
            kind: entry.kind.clone(),
            params: point.params.clone(),
            placement: config.server.clone(),
            bind: LOCAL_DATA,
        };
        match agents
            .server
            .request(&req, Duration::from_secs(60), interrupt)?
        {
            Response::Listening { port } => server_addr = Some(SocketAddr::new(LOCAL_DATA, port)),
            Response::Error { message, skipped } => {
                return Err(agent_error("server side", message, skipped))
            }
            other => {
                return Err(UnitError::Failed(format!(
                    "server side: unexpected answer {other:?}"
                )))
            }
        }
    }

    let expected = wl.expected_duration(&point.params);
    let req = Request::RunClient {
        kind: entry.kind.clone(),
        params: point.params.clone(),
        placement: config.client.clone(),
        server: server_addr,
        repetition,
    };
    let client = match agents
        .client
        .request(&req, expected + CLIENT_SLACK, interrupt)?
    {
        Response::Done { result } => Ok(*result),
        Response::Error { message, skipped } => Err(agent_error("client side", message, skipped)),
        other => Err(UnitError::Failed(format!(
            "client side: unexpected answer {other:?}"
        ))),
    };

    let mut server = None;
    if wl.has_server() {
        // Collect even after a client failure, so the server is not left
        // waiting (a short limit then: it has nothing more to wait for).
        let limit = if client.is_ok() {
            SERVER_FINISH
        } else {
            Duration::from_secs(1)
        };
        let req = Request::Collect {
            timeout_ms: limit.as_millis() as u64,
        };
        let resp = agents
            .server
            .request(&req, limit + Duration::from_secs(10), interrupt)?;
        let client = client.as_ref().map_err(|_| ());
        match resp {
            Response::Done { result } => server = Some(*result),
            Response::Error { message, skipped } if client.is_ok() => {
                return Err(agent_error("server side", message, skipped))
            }
            _ => {}
        }
    }
    let client = client?;
    let rss = [
        ("client_peak_rss_kib", Some(client.peak_rss_kib)),
        (
            "server_peak_rss_kib",
            server.as_ref().map(|s| s.peak_rss_kib),
        ),
    ];
    let mut sample = wl
        .combine(&point.params, client, server)
        .map_err(|e| UnitError::Failed(format!("results: {e}")))?;
    // Every workload's processes are held to the same memory budget, so
    // their peak RSS is recorded for all of them.
    for (name, kib) in rss {
        if let Some(kib) = kib {
            sample.metrics.insert(name.into(), kib as f64);
        }
    }
    Ok(sample)
}

/// Builds the report of a stored run.
pub(crate) fn report(
    store: &Store,
    reg: &Registry,
    run_id: i64,
) -> Result<benchlab_report::RunReport> {
    let run = store.run(run_id)?;
    let study = Study::parse(&run.study_file, &run.study_text, reg)
        .context("the stored study file no longer validates with this benchlab")?;
    Ok(benchlab_report::build(
        &run,
        &study,
        reg,
        &store.configurations(run_id)?,
        &store.points(run_id)?,
        &store.samples(run_id)?,
    ))
}
