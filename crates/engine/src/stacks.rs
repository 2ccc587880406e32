//! Call-stack sampling of a repetition (`stacks` in the study): checked
//! on every host before the run starts, started on every host of the
//! point beside its monitors (in the same agent: never under a launcher,
//! the same protocol for local and remote hosts), stopped with the
//! measurement, and stored with the repetition. A recording that fails
//! leaves its point's measurement alone and says why there is no
//! profile.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Result};
use benchlab_agent::{Request, Response};
use benchlab_core::plan::PlannedPoint;
use benchlab_core::study::{Configuration, Study, WorkloadEntry};
use benchlab_core::Workload;
use benchlab_stacks::{Plan, Recording, Root, SERVICE_PREFIX, SIDE_CLIENT, SIDE_SERVER};
use benchlab_store::{StackProfileRow, StackRecordingRow};

use crate::context::RunCtx;
use crate::hosts::{Pool, Role};

/// How long a check (a one-off `perf record`) or a start may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stop may take: `perf script` symbolizes every sample on
/// the host, seconds on a busy one.
const STOP_TIMEOUT: Duration = Duration::from_secs(600);

/// One host's recording of the repetition in progress.
struct Pending {
    /// The host that records (the first of the point's hosts reached
    /// the same way).
    host: String,
    /// Where each side runs, for the stored rows.
    side_hosts: BTreeMap<String, String>,
    /// Its settings (for a recording that failed).
    plan: Plan,
    /// The recording, or why there is none.
    result: std::result::Result<Recording, String>,
}

/// The call-stack recordings of a run.
#[derive(Default)]
pub(crate) struct Stacks {
    pending: Vec<Pending>,
}

/// What a repetition's recording needs to know.
pub(crate) struct Sampled<'a> {
    pub(crate) wl: &'a dyn Workload,
    pub(crate) entry: &'a WorkloadEntry,
    pub(crate) config: &'a Configuration,
    pub(crate) point: &'a PlannedPoint,
    /// The managed services running: name, host, process group leader.
    pub(crate) services: Vec<(String, String, i32)>,
}

/// The measured interval from the start of a repetition: the workload's
/// declared window, else its `warmup_s` and `duration_s`.
fn window(wl: &dyn Workload, point: &PlannedPoint) -> (u64, Option<u64>) {
    if let Some((skip, len)) = wl.measured_window(&point.params) {
        return (skip.as_millis() as u64, Some(len.as_millis() as u64));
    }
    let ms = |name: &str| {
        point
            .params
            .f64(name)
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| (s * 1000.0).round() as u64)
    };
    (ms("warmup_s").unwrap_or(0), ms("duration_s"))
}

/// Checks every host a sampled workload runs on, before anything
/// starts: perf installed, allowed, the rate possible.
pub(crate) fn check_all(study: &Study, pool: &mut Pool) -> Result<()> {
    let mut checked: Vec<(String, u32, benchlab_stacks::Unwind)> = Vec::new();
    for w in &study.workloads {
        let Some(s) = w.stacks else { continue };
        for c in &study.configurations {
            let hosts = w
                .servers
                .iter()
                .chain(&w.client_hosts)
                .map(|h| c.host(h).to_string());
            for host in hosts {
                // A guest is checked when it has booted (its recording
                // fails then, with the reason, keeping the measurement).
                if pool.is_guest(&host) {
                    continue;
                }
                let key = (host.clone(), s.hz, s.unwind);
                if checked.contains(&key) {
                    continue;
                }
                checked.push(key);
                let req = Request::StacksCheck {
                    hz: s.hz,
                    unwind: s.unwind,
                };
                let never = std::sync::atomic::AtomicBool::new(false);
                let answer = pool
                    .agent(&host, Role::Monitor, 0)
                    .map_err(|e| e.to_string())
                    .and_then(|a| {
                        a.request(&req, START_TIMEOUT, &never)
                            .map_err(|e| e.to_string())
                    });
                match answer {
                    Ok(Response::StacksChecked { .. }) => {}
                    Ok(Response::Error { message, .. }) => bail!(
                        "{}: workload `{}`: `stacks` cannot sample on host `{host}`: {message}",
                        study.file,
                        w.name
                    ),
                    Ok(other) => bail!("host `{host}`: unexpected answer {other:?}"),
                    Err(e) => bail!("preflight failed; nothing was run: host `{host}`: {e}"),
                }
            }
        }
    }
    Ok(())
}

impl Stacks {
    /// Starts sampling on every host of the repetition, when its workload
    /// asks for stacks.
    pub(crate) fn start(&mut self, ctx: &mut RunCtx<'_>, s: &Sampled<'_>) {
        self.pending.clear();
        let Some(settings) = s.entry.stacks else {
            return;
        };
        let (delay_ms, length_ms) = window(s.wl, s.point);
        // Each side's host and the pid of its root process there.
        let mut roots: Vec<(String, Root)> = Vec::new();
        let agent_pid = |ctx: &mut RunCtx<'_>, host: &str, role: Role, slot: usize| {
            ctx.pool.agent(host, role, slot).map(|a| a.pid).ok()
        };
        let own_server = s.wl.server_side() == benchlab_core::ServerSide::Own;
        if own_server {
            for target in &s.entry.servers {
                let host = s.config.host(target).to_string();
                if let Some(pid) = agent_pid(ctx, &host, Role::Server, 0) {
                    roots.push((
                        host,
                        Root {
                            pid,
                            side: SIDE_SERVER.into(),
                        },
                    ));
                }
            }
        }
        for job in crate::unit::client_jobs(s.wl, s.entry, s.config, &s.point.params) {
            if let Some(pid) = agent_pid(ctx, &job.host, Role::Client, job.slot) {
                roots.push((
                    job.host.clone(),
                    Root {
                        pid,
                        side: SIDE_CLIENT.into(),
                    },
                ));
            }
        }
        for (name, host, pgid) in &s.services {
            if s.entry.services.contains(name) && *pgid > 0 {
                roots.push((
                    host.clone(),
                    Root {
                        pid: *pgid as u32,
                        side: format!("{SERVICE_PREFIX}{name}"),
                    },
                ));
            }
        }
        // One recording per machine: hosts reached the same way (`sut`
        // and `generator` on this machine) share their CPUs and /proc.
        let mut hosts: Vec<String> = Vec::new();
        for (h, _) in &roots {
            let same = |x: &String| ctx.pool.host(x).transport == ctx.pool.host(h).transport;
            if !hosts.iter().any(same) {
                hosts.push(h.clone());
            }
        }
        for host in hosts {
            let mut side_hosts = BTreeMap::new();
            let mut mine = Vec::new();
            for (h, r) in &roots {
                if ctx.pool.host(h).transport == ctx.pool.host(&host).transport {
                    side_hosts
                        .entry(r.side.clone())
                        .or_insert_with(|| h.clone());
                    mine.push(r.clone());
                }
            }
            let plan = Plan {
                hz: settings.hz,
                unwind: settings.unwind,
                delay_ms,
                length_ms,
                roots: mine,
            };
            let req = Request::StacksStart { plan: plan.clone() };
            let answer = ctx
                .pool
                .agent(&host, Role::Monitor, 0)
                .map_err(|e| e.to_string())
                .and_then(|a| {
                    a.request(&req, START_TIMEOUT, ctx.interrupt)
                        .map_err(|e| e.to_string())
                });
            let result = match answer {
                // Stopped below; a placeholder until then.
                Ok(Response::StacksStarted) => Err(String::new()),
                Ok(Response::Error { message, .. }) => Err(message),
                Ok(other) => Err(format!("unexpected answer {other:?}")),
                Err(e) => Err(e),
            };
            self.pending.push(Pending {
                host,
                side_hosts,
                plan,
                result,
            });
        }
    }

    /// Stops the recordings [`Stacks::start`] started and keeps their
    /// stacks for [`Stacks::record`].
    pub(crate) fn stop(&mut self, ctx: &mut RunCtx<'_>) {
        for p in &mut self.pending {
            // Only those that started (an empty placeholder reason).
            if !matches!(&p.result, Err(why) if why.is_empty()) {
                continue;
            }
            let answer = ctx
                .pool
                .agent(&p.host, Role::Monitor, 0)
                .map_err(|e| e.to_string())
                .and_then(|a| {
                    a.request(&Request::StacksStop, STOP_TIMEOUT, ctx.interrupt)
                        .map_err(|e| e.to_string())
                });
            p.result = match answer {
                Ok(Response::Stacks { recording }) => Ok(*recording),
                Ok(Response::Error { message, .. }) => Err(message),
                Ok(other) => Err(format!("unexpected answer {other:?}")),
                Err(e) => Err(e),
            };
        }
    }

    /// Stores the stopped recordings with the repetition (a failed one
    /// as "no profile" with its reason).
    pub(crate) fn record(
        &mut self,
        ctx: &mut RunCtx<'_>,
        point_id: i64,
        repetition: u32,
    ) -> Result<()> {
        for p in self.pending.drain(..) {
            let (rec, profiles) = rows(p, point_id, repetition);
            if let Some(why) = &rec.reason {
                let msg = format!("host {}: no profile: {why}", rec.host);
                ctx.event("stacks", &msg);
                ctx.notes.push(msg);
            }
            ctx.store.add_stacks(&rec, &profiles)?;
        }
        Ok(())
    }
}

/// A pending recording as the store's rows.
fn rows(p: Pending, point_id: i64, repetition: u32) -> (StackRecordingRow, Vec<StackProfileRow>) {
    let mut rec = StackRecordingRow {
        point_id,
        repetition,
        host: p.host.clone(),
        hz: p.plan.hz,
        unwind: p.plan.unwind.name().to_string(),
        window_s: 0.0,
        samples: 0,
        busy_samples: 0,
        perf_cpu_s: 0.0,
        perf_window_cpu_s: 0.0,
        script_cpu_s: 0.0,
        perf_version: String::new(),
        reason: None,
    };
    match p.result {
        Err(why) => {
            rec.reason = Some(if why.is_empty() {
                "the recording was not stopped".into()
            } else {
                why
            });
            (rec, Vec::new())
        }
        Ok(r) => {
            rec.window_s = r.window_s;
            rec.samples = r.samples;
            rec.busy_samples = r.busy_samples;
            rec.perf_cpu_s = r.perf_cpu_s;
            rec.perf_window_cpu_s = r.perf_window_cpu_s;
            rec.script_cpu_s = r.script_cpu_s;
            rec.perf_version = r.perf_version;
            let profiles = r
                .sides
                .into_iter()
                .map(|s| StackProfileRow {
                    point_id,
                    repetition,
                    host: p.side_hosts.get(&s.side).unwrap_or(&p.host).clone(),
                    side: s.side,
                    recorded_on: p.host.clone(),
                    samples: s.samples,
                    folded: s.folded,
                })
                .collect();
            (rec, profiles)
        }
    }
}
