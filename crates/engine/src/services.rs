//! Managed services during a run: the real servers that service workloads
//! drive, started through the agent of their host (so local, namespace and
//! SSH hosts all work), journaled there before they start, restarted when
//! they died or before every point when asked, observed around every
//! point, and stopped when their configuration ends, at the end of the
//! run, and on Ctrl-C.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use benchlab_agent::{Request, Response};
use benchlab_core::engine_metric::{
    SERVICE_CPU_S, SERVICE_ELAPSED_S, SERVICE_NONVOLUNTARY_CTXT_SWITCHES, SERVICE_RSS_KIB,
    SERVICE_UTIL_PCT, SERVICE_VOLUNTARY_CTXT_SWITCHES,
};
use benchlab_core::study::{Configuration, ServiceDecl, Study};
use benchlab_core::ValidationError;
use benchlab_core::{Params, ServiceInfo, SideResult};
use benchlab_service::{ServicePlan, ServiceSpec, ServiceUsage};

use crate::context::RunCtx;
use crate::hosts::{Pool, Role};

/// Service requests are never abandoned half-way, not even on Ctrl-C: an
/// abandoned request's answer would arrive later and be taken for the
/// answer to the next one (the stop that must follow). Each is short or
/// bounded by its own timeout; a second Ctrl-C exits at once.
static NEVER: AtomicBool = AtomicBool::new(false);

/// Short requests: usage, liveness.
const QUICK: Duration = Duration::from_secs(30);
/// Slack beyond the service's own start or stop timeout.
const SLACK: Duration = Duration::from_secs(30);

/// Checks a `[[service]]` table when a study is read (set on the
/// registry): the key at fault and what is wrong and allowed.
pub fn check(spec: &serde_json::Value) -> Result<(), ValidationError> {
    let spec: ServiceSpec = serde_json::from_value(spec.clone()).map_err(|e| {
        let msg = e.to_string();
        // serde names the field it refused: point the error at it.
        let key = msg
            .split('`')
            .nth(1)
            .filter(|_| msg.starts_with("unknown field") || msg.starts_with("missing field"))
            .unwrap_or_default()
            .to_string();
        let key = if msg.starts_with("missing field") {
            String::new()
        } else {
            key
        };
        ValidationError::new(key, msg)
    })?;
    spec.validate().map_err(|e| match e {
        benchlab_service::ServiceError::Spec { key, message, .. } => {
            ValidationError::new(key, message)
        }
        other => ValidationError::new("", other.to_string()),
    })
}

/// The service plan of a declaration, as a configuration runs it: the
/// template read and every variable checked (on the controller, before
/// anything starts). A service without an explicit `bind` listens on its
/// host's data address, so that other hosts reach it. A `{{host.NAME}}`
/// is the data address of the study's host NAME where `config` puts it.
pub(crate) fn plan_of(
    decl: &ServiceDecl,
    study: &Study,
    config: &Configuration,
    pool: &mut Pool,
) -> anyhow::Result<ServicePlan> {
    let mut json = decl.spec.clone();
    if json.get("bind").is_none() {
        json["bind"] = serde_json::Value::String(pool.address(&decl.host).to_string());
    }
    let spec: ServiceSpec = serde_json::from_value(json)
        .map_err(|e| anyhow::anyhow!("service `{}`: {e}", decl.name))?;
    let base = Path::new(&study.file)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Ok(spec.plan_with(&base, &mut |h| {
        pool.address_of(config.host(h))
            .ok()
            .map(|ip| ip.to_string())
    })?)
}

/// The secret values a service's host is handed with its plan: a guest's
/// agent is started by the guest's init and inherits none of this
/// process's environment (the user's variables, the run's generated
/// passwords), so the controller resolves the secrets the service names
/// — those only — and sends them over the guest's control channel, where
/// the agent holds them in memory for the start. Every other host
/// resolves its secrets itself, as before (an empty map is not sent).
pub(crate) fn secrets_for(
    plan: &ServicePlan,
    host: &str,
    pool: &Pool,
) -> anyhow::Result<benchlab_service::SecretValues> {
    if !matches!(
        pool.host(host).transport,
        benchlab_core::study::Transport::Guest(_)
    ) {
        return Ok(Default::default());
    }
    Ok(benchlab_service::secrets::resolve(&plan.spec)?)
}

/// Checks every managed service of every configuration before anything
/// runs: on the controller (the template and its variables) and on the
/// service's host through its agent (the program installed, the CPUs
/// online, the port free, the document root not someone else's), so that
/// bad input stops the run before its first point. A guest's services are
/// checked on the controller only: their host checks them when the guest
/// boots ([`check_on`]).
pub(crate) fn check_all(study: &Study, pool: &mut Pool) -> anyhow::Result<()> {
    let mut checked: Vec<&serde_json::Value> = Vec::new();
    for c in &study.configurations {
        for decl in c.services.iter().filter(|d| d.address.is_none()) {
            // Configurations that run a service alike check it once.
            if checked.contains(&&decl.spec) {
                continue;
            }
            checked.push(&decl.spec);
            let on_host = !pool.is_guest(&decl.host);
            check_one(study, c, decl, pool, on_host)
                .map_err(|e| match e {
                    // A lost agent here is a preflight failure like one lost
                    // while the inventory is read: nothing is stored yet, and
                    // the error says so (the fault suite killed one 73 ms into
                    // a run).
                    Checked::Lost(e) => anyhow::anyhow!(
                        "preflight failed; nothing was run: service `{}`: {e}",
                        decl.name
                    ),
                    Checked::Refused(e) => e,
                })
                // The study file first: the agent's error names the service
                // and its key, not where they were written.
                .with_context(|| format!("{}: configuration `{}`", study.file, c.name))?;
        }
    }
    Ok(())
}

/// Checks configuration `config`'s managed services on `host` through its
/// agent (a guest just booted for it): `Err` says why they cannot start.
pub(crate) fn check_on(
    study: &Study,
    config: usize,
    host: &str,
    pool: &mut Pool,
) -> Result<(), String> {
    let c = &study.configurations[config];
    for decl in c
        .services
        .iter()
        .filter(|d| d.address.is_none() && d.host == host)
    {
        check_one(study, c, decl, pool, true).map_err(|e| match e {
            Checked::Lost(e) => format!("service `{}`: {e}", decl.name),
            Checked::Refused(e) => format!("{e:#}"),
        })?;
    }
    Ok(())
}

/// Why a service check failed.
enum Checked {
    /// Its host's agent was lost.
    Lost(String),
    /// The service cannot start there, and why.
    Refused(anyhow::Error),
}

/// One service's check: its plan on the controller, then (`on_host`)
/// every check a start makes, through its host's agent.
fn check_one(
    study: &Study,
    c: &Configuration,
    decl: &ServiceDecl,
    pool: &mut Pool,
    on_host: bool,
) -> Result<(), Checked> {
    let plan = plan_of(decl, study, c, pool).map_err(Checked::Refused)?;
    let secrets = secrets_for(&plan, &decl.host, pool).map_err(Checked::Refused)?;
    if !on_host {
        return Ok(());
    }
    let agent = pool
        .agent(&decl.host, Role::Server, 0)
        .map_err(|e| Checked::Lost(e.to_string()))?;
    match agent.request(
        &Request::ServiceCheck {
            plan,
            scratch_base: None,
            secrets,
        },
        QUICK,
        &NEVER,
    ) {
        Ok(Response::ServiceChecked) => Ok(()),
        Ok(Response::Error { message, .. }) => Err(Checked::Refused(anyhow::anyhow!("{message}"))),
        Ok(other) => Err(Checked::Refused(anyhow::anyhow!(
            "service `{}`: unexpected answer {other:?}",
            decl.name
        ))),
        Err(e) => Err(Checked::Lost(e.to_string())),
    }
}

/// A service this run started and holds.
struct Running {
    host: String,
    address: SocketAddr,
    info: ServiceInfo,
    /// The point it was (re)started for, for `restart = "point"`.
    point: Option<(usize, usize)>,
    restart_per_point: bool,
    /// What the workload put in place for it, and for which point.
    prepared: Option<((usize, usize), Vec<PathBuf>)>,
    /// Its grace between SIGTERM and SIGKILL (s).
    stop_timeout_s: f64,
    /// Its process group (its leader's pid), on its host.
    pgid: i32,
}

/// Where a point's clients find a service, and what it used.
pub(crate) struct Target {
    /// The address clients connect to.
    pub(crate) address: SocketAddr,
    /// What the client side is told of it.
    pub(crate) info: ServiceInfo,
    /// Its host (for usage snapshots), when benchlab manages it.
    pub(crate) managed_on: Option<String>,
}

/// The services of the configuration in force.
#[derive(Default)]
pub(crate) struct Services {
    config: Option<usize>,
    running: BTreeMap<String, Running>,
}

impl Services {
    /// Each running managed service: its name, host and process group
    /// leader (the root of its side in a call-stack profile).
    pub(crate) fn leaders(&self) -> Vec<(String, String, i32)> {
        self.running
            .iter()
            .map(|(name, r)| (name.clone(), r.host.clone(), r.pgid))
            .collect()
    }

    /// Makes the services of a point ready: those of another configuration
    /// stopped, missing or dead ones started, `restart = "point"` ones
    /// restarted for a new point, and the workload's content put in place.
    /// Returns the targets in the workload's service order, or why the
    /// point cannot run.
    pub(crate) fn ready(
        &mut self,
        ctx: &mut RunCtx<'_>,
        config: usize,
        point: (usize, usize),
        names: &[String],
        kind: &str,
        params: &Params,
    ) -> Result<Vec<Target>, String> {
        if self.config != Some(config) {
            self.stop_all(ctx);
            self.config = Some(config);
        }
        let decls = &ctx.study.configurations[config].services;
        // The workload's services in its order: an external one is its
        // target already; a managed one is checked, and (re)started below
        // with the others that must start.
        let mut slots: Vec<Result<Target, &ServiceDecl>> = Vec::new();
        let mut to_start: Vec<(&ServiceDecl, Option<String>)> = Vec::new();
        for name in names {
            let decl = decls
                .iter()
                .find(|d| &d.name == name)
                .ok_or_else(|| format!("no service `{name}`"))?;
            if let Some(addr) = &decl.address {
                let address: SocketAddr = addr
                    .parse()
                    .map_err(|e| format!("service `{name}`: address {addr}: {e}"))?;
                slots.push(Ok(Target {
                    address,
                    info: ServiceInfo {
                        name: name.clone(),
                        kind: "external".into(),
                        document_root: None,
                        port: address.port(),
                    },
                    managed_on: None,
                }));
                continue;
            }
            slots.push(Err(decl));
            let mut restart_why = None;
            if let Some(r) = self.running.get(name) {
                match alive(ctx, &r.host, name) {
                    Ok(None) => {
                        if r.restart_per_point && r.point != Some(point) {
                            restart_why = Some("restart before every point".to_string());
                        }
                    }
                    Ok(Some(reason)) => restart_why = Some(format!("it had died: {reason}")),
                    Err(e) => return Err(e),
                }
                if let Some(why) = &restart_why {
                    self.stop_one(ctx, name, why);
                }
            }
            if !self.running.contains_key(name) {
                to_start.push((decl, restart_why));
            }
        }
        self.start_all(ctx, &to_start, point)?;
        let mut targets = Vec::new();
        for slot in slots {
            let decl = match slot {
                Ok(external) => {
                    targets.push(external);
                    continue;
                }
                Err(decl) => decl,
            };
            let r = self.running.get_mut(&decl.name).expect("started");
            if r.prepared.as_ref().map(|(p, _)| *p) != Some(point) {
                if let Some((_, paths)) = r.prepared.take() {
                    unprepare(ctx, &r.host, paths)?;
                }
                let paths = prepare(ctx, &r.host, kind, params, &r.info)?;
                r.prepared = Some((point, paths));
            }
            targets.push(Target {
                address: r.address,
                info: r.info.clone(),
                managed_on: Some(r.host.clone()),
            });
        }
        Ok(targets)
    }

    /// Starts services, those on different hosts at once (two guests'
    /// brokers boot side by side, as the seed's two VMs did; a broker in
    /// an emulated guest takes minutes), each host's in turn. Every
    /// service that started is kept (and stopped later) even when another
    /// failed; the first failure is the point's reason.
    fn start_all(
        &mut self,
        ctx: &mut RunCtx<'_>,
        services: &[(&ServiceDecl, Option<String>)],
        point: (usize, usize),
    ) -> Result<(), String> {
        let study = ctx.study;
        let config = &study.configurations[self.config.expect("set by ready")];
        let mut requests = Vec::new();
        let mut plans = Vec::new();
        for (decl, _) in services {
            let plan = plan_of(decl, study, config, &mut ctx.pool).map_err(|e| format!("{e:#}"))?;
            let limit = Duration::from_secs_f64(plan.spec.ready_timeout_s.max(0.0)) + SLACK;
            let secrets =
                secrets_for(&plan, &decl.host, &ctx.pool).map_err(|e| format!("{e:#}"))?;
            let req = Request::ServiceStart {
                plan: plan.clone(),
                scratch_base: None,
                secrets,
            };
            requests.push((decl.host.clone(), req, limit));
            plans.push(plan);
        }
        let answers = on_server_agents(&mut ctx.pool, &requests);
        let mut first_error = None;
        for (((decl, restart_why), plan), answer) in services.iter().zip(&plans).zip(answers) {
            let started = match answer {
                Ok(answer) => self.started(ctx, decl, plan, point, answer),
                Err(e) => Err(e),
            };
            match started {
                Ok(r) => {
                    self.running.insert(decl.name.clone(), r);
                    if let Some(why) = restart_why {
                        ctx.event("service", &format!("{} restarted ({why})", decl.name));
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// A service's start as its agent answered it.
    fn started(
        &mut self,
        ctx: &mut RunCtx<'_>,
        decl: &ServiceDecl,
        plan: &ServicePlan,
        point: (usize, usize),
        answer: Result<Response, benchlab_agent::AgentError>,
    ) -> Result<Running, String> {
        let restart_per_point = plan.spec.restart == benchlab_service::Restart::Point;
        match answer {
            Ok(Response::ServiceStarted {
                description,
                address,
            }) => {
                let desc_json = serde_json::to_value(&*description).unwrap_or_default();
                if let Some(cfg) = self.config {
                    let _ = ctx
                        .store
                        .add_service(ctx.run_id, cfg, &decl.name, &desc_json);
                }
                ctx.event(
                    "service",
                    &format!(
                        "{} started on {}: {} at {address} ({})",
                        decl.name,
                        decl.host,
                        description
                            .version
                            .as_deref()
                            .unwrap_or(&description.program),
                        description.placement()
                    ),
                );
                Ok(Running {
                    host: decl.host.clone(),
                    address,
                    info: ServiceInfo {
                        name: decl.name.clone(),
                        kind: description.kind.to_string(),
                        document_root: Some(description.document_root.clone()),
                        port: address.port(),
                    },
                    point: Some(point),
                    restart_per_point,
                    prepared: None,
                    stop_timeout_s: plan.spec.stop_timeout_s,
                    pgid: description.pgid,
                })
            }
            Ok(Response::Error { message, .. }) => Err(message),
            Ok(other) => Err(format!(
                "service `{}`: unexpected answer {other:?}",
                decl.name
            )),
            Err(e) => {
                let msg = format!("service `{}`: {e}", decl.name);
                // The agent was lost (or gave no answer and will be
                // killed) in the middle of the start: the server it had
                // forked and journaled runs on, outside this run's
                // books, until `benchlab restore` (found by
                // tests/it/faults.rs: an agent killed while RabbitMQ booted
                // left the broker running and the run said nothing). A
                // Ctrl-C is different: the agent lives, finishes the
                // start and stops its services when told to shut down.
                if !matches!(e, benchlab_agent::AgentError::Interrupted) {
                    ctx.notes.push(format!(
                        "{msg}; the server may still run on {}: run `benchlab restore` to stop it and remove its files",
                        decl.host
                    ));
                    ctx.event("service", &msg);
                }
                Err(msg)
            }
        }
    }

    fn stop_one(&mut self, ctx: &mut RunCtx<'_>, name: &str, why: &str) {
        self.stop_these(ctx, &[name.to_string()], why);
    }

    /// Stops services, those on different hosts at once (a broker's stop
    /// reads its own counters first: seconds on a host, most of a minute
    /// in an emulated guest), each host's in turn.
    fn stop_these(&mut self, ctx: &mut RunCtx<'_>, names: &[String], why: &str) {
        let mut stopping = Vec::new();
        let mut requests = Vec::new();
        for name in names {
            let Some(r) = self.running.remove(name) else {
                continue;
            };
            if let Some((_, paths)) = &r.prepared {
                if let Err(e) = unprepare(ctx, &r.host, paths.clone()) {
                    ctx.event("service", &format!("{name}: {e}"));
                }
            }
            requests.push((
                r.host.clone(),
                Request::ServiceStop { name: name.clone() },
                Duration::from_secs_f64(r.stop_timeout_s.max(0.0))
                    + benchlab_service::run::OWN_COUNTERS_TIMEOUT
                    + SLACK,
            ));
            stopping.push((name, r.host));
        }
        let answers = on_server_agents(&mut ctx.pool, &requests);
        for ((name, host), answer) in stopping.into_iter().zip(answers) {
            let msg = match answer {
                Ok(Ok(Response::ServiceStopped { report })) => format!(
                    "{name} stopped ({why}): {}{}{}",
                    report.exit,
                    if report.forced { ", after SIGKILL" } else { "" },
                    // The server's own count of what the run's load did to
                    // it: a check a reader can make against the points'
                    // figures.
                    if report.own_counters.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; its own counters before the stop: {}",
                            report
                                .own_counters
                                .iter()
                                .map(|(k, v)| format!("{k} {v}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    }
                ),
                // A server whose agent was lost (killed, its host gone) is
                // left to its journal on the host: the user must hear of
                // it, not only the stored events (found by
                // tests/it/faults.rs).
                other => {
                    let msg = match other {
                        Ok(Ok(answer)) => format!("{name}: stop answered {answer:?}"),
                        Ok(Err(e)) => format!("{name}: stop failed: {e}"),
                        Err(e) => format!("{name}: stop failed: {e}"),
                    };
                    ctx.notes.push(format!(
                        "{msg}; the server may still run on {host}: run `benchlab restore` to stop it and remove its files"
                    ));
                    msg
                }
            };
            ctx.event("service", &msg);
        }
    }

    /// Stops the services this run holds on `hosts` (guests about to be
    /// stopped), through the agents that hold them.
    pub(crate) fn stop_on(&mut self, ctx: &mut RunCtx<'_>, hosts: &[String], why: &str) {
        let names: Vec<String> = self
            .running
            .iter()
            .filter(|(_, r)| hosts.contains(&r.host))
            .map(|(n, _)| n.clone())
            .collect();
        self.stop_these(ctx, &names, why);
    }

    /// Stops every service this run holds.
    pub(crate) fn stop_all(&mut self, ctx: &mut RunCtx<'_>) {
        let names: Vec<String> = self.running.keys().cloned().collect();
        self.stop_these(ctx, &names, "its configuration ended");
    }

    /// Why a service of the point died during it, if one did.
    pub(crate) fn died(&self, ctx: &mut RunCtx<'_>, targets: &[Target]) -> Option<String> {
        for t in targets {
            let Some(host) = &t.managed_on else { continue };
            if let Ok(Some(reason)) = alive(ctx, host, &t.info.name) {
                return Some(format!("service `{}` went down: {reason}", t.info.name));
            }
        }
        None
    }
}

impl Services {
    /// As [`Services::died`], after a failed point: a server killed
    /// mid-point fails its clients at once, but its process (a wrapper
    /// script waiting on it, as RabbitMQ's is) may need a moment to end,
    /// so it is asked again for up to `grace` before it counts as up.
    pub(crate) fn died_within(
        &self,
        ctx: &mut RunCtx<'_>,
        targets: &[Target],
        grace: Duration,
    ) -> Option<String> {
        let end = Instant::now() + grace;
        loop {
            if let Some(why) = self.died(ctx, targets) {
                return Some(why);
            }
            if Instant::now() >= end || targets.iter().all(|t| t.managed_on.is_none()) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Sends each `(host, request, limit)` to that host's server agent: the
/// hosts at once, each host's requests in order (an agent answers one
/// request at a time). The answers come in the requests' order; `Err` is
/// an agent that could not be had. Never cut short: what these requests
/// start or stop must not be left half done.
fn on_server_agents(
    pool: &mut Pool,
    requests: &[(String, Request, Duration)],
) -> Vec<Result<Result<Response, benchlab_agent::AgentError>, String>> {
    let mut hosts: Vec<&str> = Vec::new();
    for (h, _, _) in requests {
        if !hosts.contains(&h.as_str()) {
            hosts.push(h);
        }
    }
    let mut answers: Vec<Option<_>> = requests.iter().map(|_| None).collect();
    let mut agents = Vec::new();
    for h in &hosts {
        match pool.take(h, Role::Server, 0) {
            Ok(a) => agents.push((*h, a)),
            Err(e) => {
                for (i, (rh, _, _)) in requests.iter().enumerate() {
                    if rh == h {
                        answers[i] = Some(Err(e.to_string()));
                    }
                }
            }
        }
    }
    let done: Vec<(usize, Result<Response, benchlab_agent::AgentError>)> =
        std::thread::scope(|s| {
            let threads: Vec<_> = agents
                .iter_mut()
                .map(|(h, agent)| {
                    let h: &str = h;
                    s.spawn(move || {
                        requests
                            .iter()
                            .enumerate()
                            .filter(|(_, (rh, _, _))| rh == h)
                            .map(|(i, (_, req, limit))| (i, agent.request(req, *limit, &NEVER)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().expect("service request thread"))
                .collect()
        });
    for (i, answer) in done {
        answers[i] = Some(Ok(answer));
    }
    for (h, agent) in agents {
        pool.put(h, Role::Server, 0, agent);
    }
    answers
        .into_iter()
        .map(|a| a.expect("every request answered"))
        .collect()
}

/// `Ok(None)`: it runs; `Ok(Some(reason))`: it died.
fn alive(ctx: &mut RunCtx<'_>, host: &str, name: &str) -> Result<Option<String>, String> {
    let agent = ctx
        .pool
        .agent(host, Role::Server, 0)
        .map_err(|e| e.to_string())?;
    match agent.request(&Request::ServiceAlive { name: name.into() }, QUICK, &NEVER) {
        Ok(Response::ServiceAlive) => Ok(None),
        Ok(Response::ServiceDied { reason, log }) => Ok(Some(if log.trim().is_empty() {
            reason
        } else {
            format!("{reason}; its log ends: {}", log.trim())
        })),
        Ok(other) => Err(format!("service `{name}`: unexpected answer {other:?}")),
        Err(e) => Err(format!("service `{name}`: {e}")),
    }
}

fn prepare(
    ctx: &mut RunCtx<'_>,
    host: &str,
    kind: &str,
    params: &Params,
    info: &ServiceInfo,
) -> Result<Vec<PathBuf>, String> {
    let agent = ctx
        .pool
        .agent(host, Role::Server, 0)
        .map_err(|e| e.to_string())?;
    match agent.request(
        &Request::Prepare {
            kind: kind.to_string(),
            params: params.clone(),
            service: info.clone(),
        },
        Duration::from_secs(600),
        &NEVER,
    ) {
        Ok(Response::Prepared { paths }) => Ok(paths),
        Ok(Response::Error { message, .. }) => {
            Err(format!("putting {kind}'s content in place: {message}"))
        }
        Ok(other) => Err(format!("prepare: unexpected answer {other:?}")),
        Err(e) => Err(format!("prepare: {e}")),
    }
}

fn unprepare(ctx: &mut RunCtx<'_>, host: &str, paths: Vec<PathBuf>) -> Result<(), String> {
    if paths.is_empty() {
        return Ok(());
    }
    let agent = ctx
        .pool
        .agent(host, Role::Server, 0)
        .map_err(|e| e.to_string())?;
    match agent.request(&Request::Unprepare { paths }, QUICK, &NEVER) {
        Ok(Response::Unprepared) => Ok(()),
        Ok(Response::Error { message, .. }) => Err(message),
        Ok(other) => Err(format!("unexpected answer {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// A snapshot of every managed target's use (`None` for unmanaged ones).
pub(crate) fn usage(ctx: &mut RunCtx<'_>, targets: &[Target]) -> Vec<Option<ServiceUsage>> {
    usage_in(&mut ctx.pool, targets)
}

/// Snapshots of every managed target's use over the workload's measured
/// interval: `go` brings the clients' common start instant; the first
/// snapshot is taken `skip` (the ramp-up) after it and the second `len`
/// later, so that ramps are not observed. The run may end early (a failed
/// point: the caller drops its sender): before the interval, nothing is
/// observed; inside it, the second snapshot is taken then.
pub(crate) fn observe_window(
    pool: &mut Pool,
    targets: &[Target],
    go: &mpsc::Receiver<Instant>,
    skip: Duration,
    len: Duration,
) -> (Vec<Option<ServiceUsage>>, Vec<Option<ServiceUsage>>) {
    let nothing = || targets.iter().map(|_| None).collect::<Vec<_>>();
    let Ok(start) = go.recv() else {
        return (nothing(), nothing());
    };
    let wait_until = |t: Instant| match go.recv_timeout(t.saturating_duration_since(Instant::now()))
    {
        Err(mpsc::RecvTimeoutError::Timeout) => true,
        // The run ended (or, never, a second start): stop waiting.
        _ => false,
    };
    if !wait_until(start + skip) {
        return (nothing(), nothing());
    }
    let before = usage_in(pool, targets);
    wait_until(start + skip + len);
    let after = usage_in(pool, targets);
    (before, after)
}

fn usage_in(pool: &mut Pool, targets: &[Target]) -> Vec<Option<ServiceUsage>> {
    targets
        .iter()
        .map(|t| {
            let host = t.managed_on.as_ref()?;
            let agent = pool.agent(host, Role::Server, 0).ok()?;
            match agent.request(
                &Request::ServiceUsage {
                    name: t.info.name.clone(),
                },
                QUICK,
                &NEVER,
            ) {
                Ok(Response::ServiceUsage { usage }) => Some(usage),
                _ => None,
            }
        })
        .collect()
}

/// The server side's result of a service target: what the service's
/// processes used between two snapshots.
pub(crate) fn observed(before: &ServiceUsage, after: &ServiceUsage) -> SideResult {
    let d = before.delta(after);
    let mut r = SideResult::default();
    r.set_engine(SERVICE_CPU_S, d.cpu_s);
    r.set_engine(SERVICE_UTIL_PCT, d.util_pct);
    r.set_engine(SERVICE_RSS_KIB, d.rss_kib as f64);
    r.set_engine(SERVICE_ELAPSED_S, d.elapsed_s);
    r.counters.insert(
        SERVICE_VOLUNTARY_CTXT_SWITCHES.name().into(),
        d.voluntary_ctxt_switches,
    );
    r.counters.insert(
        SERVICE_NONVOLUNTARY_CTXT_SWITCHES.name().into(),
        d.nonvoluntary_ctxt_switches,
    );
    r.peak_rss_kib = after.rss_kib;
    r
}
