//! One repetition of a point: the server side on every target host, the
//! client sides behind one barrier, each side's result collected and
//! combined into the point's sample.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use benchlab_agent::{AgentError, AgentHandle, Request, Response};
use benchlab_core::engine_metric::{CLIENT_PEAK_RSS_KIB, SERVER_PEAK_RSS_KIB};
use benchlab_core::plan::PlannedPoint;
use benchlab_core::study::{Configuration, WorkloadEntry};
use benchlab_core::{ClientShare, Params, Sample, ServerSide, SideResult, Workload, CLIENTS};

use crate::combine;
use crate::engine::Engine;
use crate::hosts::Role;
use crate::services::{self, Target};
use benchlab_service::ServiceUsage;

/// Slack added to a client's expected duration before it is declared hung.
const CLIENT_SLACK: Duration = Duration::from_secs(60);
/// The reason of a client side released from the barrier because another
/// failed to arrive.
const ABANDONED: &str = "abandoned at the barrier: another client side failed to connect";
/// How long a server may take to finish after its client did.
const SERVER_FINISH: Duration = Duration::from_secs(15);

/// Why a unit produced no sample.
pub(crate) enum UnitError {
    Skipped(String),
    Failed(String),
    /// Failed because a guest of the point's configuration ended (its
    /// QEMU killed or crashed); the reason names it, so
    /// [`crate::guests::lost`] has nothing to add.
    GuestEnded(String),
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
pub(crate) struct UnitSpec<'a> {
    pub(crate) point: &'a PlannedPoint,
    pub(crate) repetition: u32,
    pub(crate) sides: &'a [benchlab_core::placement::Placement; 2],
    pub(crate) targets: &'a [Target],
}

/// One client side of a repetition: an agent on a client host, driving
/// its share of one target's clients.
pub(crate) struct ClientJob {
    /// Index into the targets.
    pub(crate) target: usize,
    /// The client host.
    pub(crate) host: String,
    /// Agent slot on that host (one per target).
    pub(crate) slot: usize,
    /// Its share of the point's clients.
    pub(crate) share: ClientShare,
}

/// The client sides of a repetition: for a clients-axis workload, the
/// point's `clients` spread evenly over the client hosts, for each target;
/// otherwise one client per target on the client host.
/// `config` says which hosts the client sides run on (its `hosts` map).
pub(crate) fn client_jobs(
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
    pub(crate) fn run_unit(&mut self, unit: &UnitSpec<'_>) -> Result<Sample, UnitError> {
        let study = self.ctx.study;
        let entry = &study.workloads[unit.point.workload];
        let wl = self
            .reg
            .get(&entry.kind)
            .ok_or_else(|| UnitError::Skipped(format!("unknown workload {}", entry.kind)))?;
        // The study's names label the targets (`metric@b1`, alike in every
        // configuration); the configuration's map says where each runs.
        let sides = Sides {
            wl,
            entry,
            config: &study.configurations[unit.point.config],
            unit,
        };
        let addrs = self.start_servers(&sides)?;
        let jobs = client_jobs(wl, entry, sides.config, &unit.point.params);
        let driven = self.drive_clients(&sides, &jobs, &addrs)?;
        let clients = client_results(&sides, &jobs, driven.results);
        if clients
            .iter()
            .any(|r| matches!(r, Err(UnitError::Interrupted)))
        {
            return Err(UnitError::Interrupted);
        }
        let servers = self.collect_servers(&sides, &clients, &driven.before, &driven.after)?;
        let mut per_target = samples(&sides, clients, servers)?;
        if !sides.many() {
            return Ok(per_target.pop().expect("one target").1);
        }
        Ok(combine::aggregate(wl, &unit.point.params, per_target))
    }

    /// Starts benchlab's own server side on every target host and returns
    /// each target's address (a service's, for a service workload; none
    /// for a workload without a server side).
    fn start_servers(&mut self, s: &Sides<'_>) -> Result<Vec<Option<SocketAddr>>, UnitError> {
        let ctx = &mut self.ctx;
        let own_server = s.wl.server_side() == ServerSide::Own;
        let mut addrs = Vec::new();
        for (i, target) in s.entry.servers.iter().enumerate() {
            if let Some(t) = s.unit.targets.get(i) {
                addrs.push(Some(t.address));
                continue;
            }
            if !own_server {
                addrs.push(None);
                continue;
            }
            let host = s.config.host(target);
            let req = Request::Serve {
                kind: s.entry.kind.clone(),
                params: s.unit.point.params.clone(),
                placement: s.unit.sides[0].clone(),
                bind: ctx.pool.bind_address(host),
            };
            let data_ip = ctx.pool.address(host);
            match ctx.pool.agent(host, Role::Server, 0)?.request(
                &req,
                Duration::from_secs(60),
                ctx.interrupt,
            )? {
                Response::Listening { port } => addrs.push(Some(SocketAddr::new(data_ip, port))),
                Response::Error { message, skipped } => {
                    return Err(agent_error(&s.who("server", host), message, skipped))
                }
                other => {
                    return Err(UnitError::Failed(format!(
                        "{}: unexpected answer {other:?}",
                        s.who("server", host)
                    )))
                }
            }
        }
        Ok(addrs)
    }

    /// Runs every client side at once (behind one barrier for a
    /// clients-axis workload), with the services observed over the
    /// measured interval and the guests among the point's hosts watched.
    fn drive_clients(
        &mut self,
        s: &Sides<'_>,
        jobs: &[ClientJob],
        addrs: &[Option<SocketAddr>],
    ) -> Result<Driven, UnitError> {
        let ctx = &mut self.ctx;
        let interrupt = ctx.interrupt;
        let (point, services) = (s.unit.point, s.unit.targets);
        let gated = s.wl.clients_axis();
        let expected = s.wl.expected_duration(&point.params);
        // The hosts the point names (`{host.NAME}`), where this
        // configuration puts them.
        let mut named = std::collections::BTreeMap::new();
        for (_, name) in s.wl.host_refs(&point.params) {
            match ctx.pool.address_of(s.config.host(&name)) {
                Ok(ip) => {
                    named.insert(name, ip.to_string());
                }
                Err(e) => {
                    return Err(UnitError::Failed(format!(
                        "`{{host.{name}}}`: {e:#}; give the host an `address`"
                    )));
                }
            }
        }
        let mut agents: Vec<AgentHandle> = Vec::new();
        for job in jobs {
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
                kind: s.entry.kind.clone(),
                params: point.params.clone(),
                placement: s.unit.sides[1].clone(),
                server: addrs[job.target],
                repetition: s.unit.repetition,
                share: job.share,
                gated,
                service: services.get(job.target).map(|t| t.info.clone()),
                hosts: named.clone(),
            })
            .collect();
        // The services are observed over the measured interval when the
        // workload says where it lies (from the barrier's common start),
        // else around the clients' whole run.
        let window = match (gated, services.is_empty()) {
            (true, false) => s.wl.measured_window(&point.params),
            _ => None,
        };
        // A guest that ends mid-point (its QEMU killed or crashed) takes
        // its sockets with it silently: no reset reaches the clients, which
        // would wait out the point's whole limit. Its control port closing
        // is watched instead, and stops the clients at once.
        let mut point_hosts: Vec<&str> = s.entry.servers.iter().map(|t| s.config.host(t)).collect();
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
            return Err(UnitError::GuestEnded(format!(
                "host `{host}`: the guest ended during the point (its QEMU was killed or crashed)"
            )));
        }
        Ok(Driven {
            results,
            before,
            after,
        })
    }

    /// Collects every target's server side, even after a client failure,
    /// so none is left waiting (with a short limit then: it has nothing
    /// more to wait for); a service's side is what its processes used.
    fn collect_servers(
        &mut self,
        s: &Sides<'_>,
        clients: &[ClientParts],
        before: &[Option<ServiceUsage>],
        after: &[Option<ServiceUsage>],
    ) -> Result<Vec<Option<SideResult>>, UnitError> {
        let ctx = &mut self.ctx;
        let services = s.unit.targets;
        let own_server = s.wl.server_side() == ServerSide::Own;
        let mut out = Vec::new();
        for (i, (target, client)) in s.entry.servers.iter().zip(clients).enumerate() {
            let host = s.config.host(target);
            if !services.is_empty() {
                out.push(match (before.get(i), after.get(i)) {
                    (Some(Some(b)), Some(Some(a))) => Some(services::observed(b, a)),
                    _ => None,
                });
                continue;
            }
            if !own_server {
                out.push(None);
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
                ctx.interrupt,
            )?;
            match resp {
                Response::Done { result } => out.push(Some(*result)),
                Response::Error { message, skipped } if client.is_ok() => {
                    return Err(agent_error(&s.who("server", host), message, skipped))
                }
                _ => out.push(None),
            }
        }
        Ok(out)
    }
}

/// What a repetition's sides share: its workload, entry, configuration
/// and unit.
struct Sides<'a> {
    wl: &'a dyn Workload,
    entry: &'a WorkloadEntry,
    config: &'a Configuration,
    unit: &'a UnitSpec<'a>,
}

impl Sides<'_> {
    /// Several targets (seed 003's two guests).
    fn many(&self) -> bool {
        self.entry.servers.len() > 1
    }

    /// A side named for a message: with its host when there are several
    /// targets.
    fn who(&self, side: &str, host: &str) -> String {
        if self.many() {
            format!("{side} side on {host}")
        } else {
            format!("{side} side")
        }
    }
}

/// The client sides' answers, and each service's usage before and after.
struct Driven {
    results: Vec<Result<Response, AgentError>>,
    before: Vec<Option<ServiceUsage>>,
    after: Vec<Option<ServiceUsage>>,
}

/// One target's client results, or the failure that stands for it.
type ClientParts = Result<Vec<SideResult>, UnitError>;

/// Per target, its client hosts' results, to be merged as the workload
/// declares (the first failure of a target stands for it).
fn client_results(
    s: &Sides<'_>,
    jobs: &[ClientJob],
    results: Vec<Result<Response, AgentError>>,
) -> Vec<ClientParts> {
    let targets = &s.entry.servers;
    let mut out: Vec<ClientParts> = targets.iter().map(|_| Ok(Vec::new())).collect();
    for (job, r) in jobs.iter().zip(results) {
        let host_who = if jobs.len() > targets.len() {
            format!("client side on {}", job.host)
        } else {
            s.who("client", &targets[job.target])
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
        let slot = &mut out[job.target];
        match (slot.as_mut(), part) {
            (Ok(parts), Ok(p)) => parts.push(p),
            (Ok(_), Err(e)) => *slot = Err(e),
            // A side abandoned at the barrier gives way to the failure
            // that made the others abandon.
            (Err(UnitError::Failed(m)), Err(e)) if m.contains(ABANDONED) => *slot = Err(e),
            (Err(_), _) => {}
        }
    }
    out
}

/// Each target's sample: its client hosts' results merged, combined with
/// its server side by the workload, with the engine's own figures (peak
/// RSS, a service's CPU) added.
fn samples(
    s: &Sides<'_>,
    clients: Vec<ClientParts>,
    servers: Vec<Option<SideResult>>,
) -> Result<Vec<(String, Sample)>, UnitError> {
    let (wl, services) = (s.wl, s.unit.targets);
    let mut per_target = Vec::new();
    for ((parts, server), host) in clients.into_iter().zip(servers).zip(&s.entry.servers) {
        let client = combine::merge_clients(wl, parts?)
            .map_err(|e| UnitError::Failed(format!("merging the client hosts' results: {e}")))?;
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
        let mut sample = wl
            .combine(&s.unit.point.params, client, server)
            .map_err(|e| {
                let of = if s.many() {
                    format!(" of {host}")
                } else {
                    String::new()
                };
                UnitError::Failed(format!("results{of}: {e}"))
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
    Ok(per_target)
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
