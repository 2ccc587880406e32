//! The system monitors of a repetition: started on every host the
//! repetition uses before its first side, stopped after its last, each
//! in an agent of its own on the host (local hosts too: the same
//! protocol everywhere, and a network namespace's interfaces are seen
//! only from inside it).

use std::collections::BTreeSet;
use std::time::Duration;

use benchlab_agent::{Request, Response};
use benchlab_core::placement::Placement;
use benchlab_core::study::{Configuration, WorkloadEntry};
use benchlab_monitor::Series;

use crate::context::RunCtx;
use crate::hosts::Role;

/// How long a monitor may take to start (its first sample) or to stop
/// and send its samples.
const MONITOR_TIMEOUT: Duration = Duration::from_secs(30);

/// The monitors of a run: which hosts' failures were already told (a
/// host whose monitor cannot run is said once, not at every repetition).
#[derive(Default)]
pub(crate) struct Monitors {
    told: BTreeSet<String>,
}

/// What one repetition's monitors need to know.
pub(crate) struct Watch<'a> {
    /// The configuration in force.
    pub(crate) config: &'a Configuration,
    /// The workload.
    pub(crate) entry: &'a WorkloadEntry,
    /// The sides' effective placements (server, client).
    pub(crate) sides: &'a [Placement; 2],
    /// The repetition's expected length.
    pub(crate) expected: Duration,
}

impl Monitors {
    /// Starts the monitors of every host of the repetition; returns the
    /// hosts whose monitor runs.
    pub(crate) fn start(&mut self, ctx: &mut RunCtx<'_>, w: &Watch<'_>) -> Vec<String> {
        let m = ctx.study.monitors;
        if !m.enabled {
            return Vec::new();
        }
        let servers: Vec<&str> = w.entry.servers.iter().map(|s| w.config.host(s)).collect();
        let clients: Vec<&str> = w
            .entry
            .client_hosts
            .iter()
            .map(|c| w.config.host(c))
            .collect();
        let mut hosts: Vec<&str> = Vec::new();
        let services = w
            .config
            .services
            .iter()
            .filter(|d| d.address.is_none())
            .map(|d| d.host.as_str());
        for h in servers.iter().chain(&clients).copied().chain(services) {
            if !hosts.contains(&h) {
                hosts.push(h);
            }
        }
        let mut started: Vec<String> = Vec::new();
        for host in hosts {
            // Two hosts reached the same way (`sut` and `generator` both
            // on this machine) see the same /proc: one monitor serves both.
            let same = |h: &String| ctx.pool.host(h).transport == ctx.pool.host(host).transport;
            if started.iter().any(same) {
                continue;
            }
            // The CPUs measured on this host: its sides' pinned CPUs and
            // the shield's, which the sampler keeps off.
            let mut measured: Vec<usize> = w.config.env.shield.clone().unwrap_or_default();
            for (on, side) in [(&servers, &w.sides[0]), (&clients, &w.sides[1])] {
                if on.contains(&host) {
                    measured.extend(side.cpus.iter().flatten().copied());
                }
            }
            measured.sort_unstable();
            measured.dedup();
            let req = Request::MonitorStart {
                interval_ms: (m.interval_s * 1000.0).round() as u32,
                measured_cpus: measured,
                expected_s: w.expected.as_secs_f64(),
            };
            let answer = ctx
                .pool
                .agent(host, Role::Monitor, 0)
                .map_err(|e| e.to_string())
                .and_then(|a| {
                    a.request(&req, MONITOR_TIMEOUT, ctx.interrupt)
                        .map_err(|e| e.to_string())
                });
            match answer {
                Ok(Response::MonitorStarted { .. }) => started.push(host.to_string()),
                Ok(Response::Error { message, .. }) => self.tell(ctx, host, &message),
                Ok(other) => self.tell(ctx, host, &format!("unexpected answer {other:?}")),
                Err(e) => self.tell(ctx, host, &e),
            }
        }
        started
    }

    /// Stops the monitors started by [`Monitors::start`] and returns each
    /// host's samples.
    pub(crate) fn stop(&mut self, ctx: &mut RunCtx<'_>, hosts: &[String]) -> Vec<(String, Series)> {
        let mut out = Vec::new();
        for host in hosts {
            let answer = ctx
                .pool
                .agent(host, Role::Monitor, 0)
                .map_err(|e| e.to_string())
                .and_then(|a| {
                    a.request(&Request::MonitorStop, MONITOR_TIMEOUT, ctx.interrupt)
                        .map_err(|e| e.to_string())
                });
            match answer {
                Ok(Response::Monitored { series }) => out.push((host.clone(), *series)),
                Ok(Response::Error { message, .. }) => self.tell(ctx, host, &message),
                Ok(other) => self.tell(ctx, host, &format!("unexpected answer {other:?}")),
                Err(e) => self.tell(ctx, host, &e),
            }
        }
        out
    }

    /// A monitor that could not run does not fail the repetition: the
    /// user is told once per host, and the run's events keep it. Its agent
    /// is replaced at the next repetition (it may have been lost).
    fn tell(&mut self, ctx: &mut RunCtx<'_>, host: &str, why: &str) {
        ctx.pool.discard(host, Role::Monitor, 0);
        if self.told.insert(host.to_string()) {
            let msg = format!("host {host}: system monitors not recorded: {why}");
            ctx.event("monitors", &msg);
            ctx.notes.push(msg);
        }
    }
}
