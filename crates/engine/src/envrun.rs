//! Applying and reverting configurations' environments during a run: one
//! environment agent per host holds the configuration (its profile's
//! settings, the wake-up latency hold, the shield, the background load)
//! from the configuration's first point to its last, journaled on the
//! host so that a crash is undone by `benchlab restore`.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use benchlab_agent::{AgentHandle, Request, Response};
use benchlab_core::placement::Placement;
use benchlab_core::setting::Phase;
use benchlab_core::study::Transport;
use benchlab_env::{ChangeReport, ChangeStatus, LoadUsage, SessionSpec};
use benchlab_store::SettingChangeRow;

use crate::context::RunCtx;
use crate::profile::{load_profile, LoadedProfile};

/// How long applying or reverting may take on a host.
const ENV_TIMEOUT: Duration = Duration::from_secs(300);

/// The environment of the configuration now applied.
#[derive(Default)]
pub(crate) struct EnvControl {
    current: Option<usize>,
    /// Environment agents in the order they applied (reverted in reverse).
    sessions: Vec<(String, AgentHandle, bool)>,
    /// Why the current configuration could not be applied.
    pub(crate) failed: Option<String>,
    /// Effective placements of the current configuration.
    pub(crate) server: Placement,
    pub(crate) client: Placement,
    config_name: String,
    /// The profile in force.
    profile: Option<String>,
    /// (configuration, host) pairs whose apply was reported in full.
    told: std::collections::HashSet<String>,
}

fn rows(
    config: usize,
    host: &str,
    phase: Phase,
    changes: &[ChangeReport],
) -> Vec<SettingChangeRow> {
    changes
        .iter()
        .map(|c| SettingChangeRow {
            config_idx: config,
            host: host.into(),
            phase,
            setting: c.setting.clone(),
            before: c.before.clone(),
            after: c.after.clone(),
            status: c.status,
            note: c.note.clone(),
        })
        .collect()
}

/// Why a configuration could not be applied when its environment agent
/// was lost midway, said once on the terminal too: the settings it had
/// changed stay changed until `benchlab restore` (found by
/// tests/it/faults.rs, which kills environment agents while they apply).
fn lost_while_applying(ctx: &mut RunCtx<'_>, host: &str, why: &str) -> String {
    let reason = format!(
        "host {host}: the environment agent was lost while applying ({why}); run `benchlab restore` to put back what it had changed"
    );
    ctx.notes.push(reason.clone());
    reason
}

impl EnvControl {
    /// Makes configuration `idx` the applied one (reverting the previous).
    pub(crate) fn switch(
        &mut self,
        idx: usize,
        workload: &str,
        ctx: &mut RunCtx<'_>,
    ) -> anyhow::Result<()> {
        let study = ctx.study;
        let config = &study.configurations[idx];
        let profile_name = config.env.profile_of(workload).map(str::to_string);
        if self.current == Some(idx) && self.profile == profile_name {
            return Ok(());
        }
        self.revert(ctx)?;
        self.current = Some(idx);
        self.profile = profile_name.clone();
        self.failed = None;
        self.config_name = config.name.clone();
        self.server = config.server.clone();
        self.client = config.client.clone();
        // The guests of the configuration left go (their environments
        // were just reverted, their services stopped by the runner), this
        // one's boot: before its environment applies, in them too.
        crate::guests::stop_leaving(ctx, idx);
        if let Err(why) = crate::guests::enter(ctx, idx) {
            self.failed = Some(why);
            return Ok(());
        }
        let profile = match &profile_name {
            Some(name) => match load_profile(study, name) {
                Ok(p) => Some(p),
                Err(e) => {
                    self.failed = Some(format!("configuration `{}`: {e:#}", config.name));
                    return Ok(());
                }
            },
            None => None,
        };
        if let Some(LoadedProfile { profile: p, .. }) = &profile {
            // The study's own placement keys win over the profile's.
            if let Err(e) = p
                .server
                .fill(&mut self.server)
                .and_then(|()| p.client.fill(&mut self.client))
            {
                self.failed = Some(format!("profile placement: {e}"));
                return Ok(());
            }
        }
        ctx.pool
            .set_launchers(&self.server.launcher, &self.client.launcher);
        if config.env.is_empty() {
            return Ok(());
        }
        // A shield and a load are per machine: applied once per kernel
        // (hosts that are namespaces of one machine share them). Profiles
        // apply per host (net.* sysctls are per network namespace).
        let mut machines_done: Vec<String> = Vec::new();
        let mut shield_tasks = None;
        for (host, boot_id) in ctx.pool.boot_ids.clone() {
            let first_on_machine = !machines_done.contains(&boot_id);
            machines_done.push(boot_id);
            let netns = match &ctx.pool.host(&host).transport {
                Transport::Netns(n) => Some(n.clone()),
                _ => None,
            };
            let machine_wide =
                first_on_machine && (config.env.shield.is_some() || config.env.load.is_some());
            // (spec, applied by an agent of the machine itself)
            let mut specs = vec![(
                SessionSpec {
                    host: host.clone(),
                    netns: netns.clone(),
                    profile: profile.as_ref().map(|p| (p.name.clone(), p.text.clone())),
                    shield: config.env.shield.clone().filter(|_| first_on_machine),
                    load: config.env.load.clone().filter(|_| first_on_machine),
                },
                false,
            )];
            if machine_wide && netns.is_some() {
                // The shield and the load go to an agent of the machine
                // itself (see `Pool::spawn_env_machine`).
                let (shield, load) = (specs[0].0.shield.take(), specs[0].0.load.take());
                specs.push((
                    SessionSpec {
                        host: format!("{host} (machine)"),
                        netns: None,
                        profile: None,
                        shield,
                        load,
                    },
                    true,
                ));
            }
            for (spec, machine) in specs {
                if spec.profile.is_none() && spec.shield.is_none() && spec.load.is_none() {
                    continue;
                }
                let spawned = if machine {
                    ctx.pool.spawn_env_machine(&host)
                } else {
                    ctx.pool.spawn_env(&host)
                };
                if let Err(e) = spawned
                    .map_err(|e| format!("host {}: {e}", spec.host))
                    .and_then(|agent| self.apply_one(agent, spec, idx, ctx, &mut shield_tasks))
                {
                    self.failed = Some(e);
                    break;
                }
            }
            if self.failed.is_some() {
                break;
            }
        }
        if self.failed.is_some() {
            // Nothing half-applied stays: what did apply is reverted now.
            self.revert_sessions(ctx)?;
            return Ok(());
        }
        if let Some(t) = shield_tasks {
            self.server.cgroup_tasks = Some(t.clone());
            self.client.cgroup_tasks = Some(t);
        }
        Ok(())
    }

    /// Applies one host's part; `Err(reason)` when it could not be.
    fn apply_one(
        &mut self,
        mut agent: AgentHandle,
        spec: SessionSpec,
        idx: usize,
        ctx: &mut RunCtx<'_>,
        shield_tasks: &mut Option<String>,
    ) -> Result<(), String> {
        let (run_id, interrupt) = (ctx.run_id, ctx.interrupt);
        let host = spec.host.clone();
        let name = self.config_name.clone();
        let has_load = spec.load.is_some();
        match agent.request(&Request::EnvApply { spec }, ENV_TIMEOUT, interrupt) {
            Ok(Response::EnvApplied {
                changes,
                shield_tasks: tasks,
            }) => {
                ctx.store
                    .add_setting_changes(run_id, &rows(idx, &host, Phase::Apply, &changes))
                    .map_err(|e| format!("store: {e}"))?;
                let count = |s: ChangeStatus| changes.iter().filter(|c| c.status == s).count();
                // In full the first time (interleaved studies apply a
                // configuration at every repetition), then as a count.
                let first = self.told.insert(format!("{name}\u{0}{host}"));
                let unusual: Vec<&ChangeReport> = changes
                    .iter()
                    .filter(|c| matches!(c.status, ChangeStatus::Skipped | ChangeStatus::Failed))
                    .collect();
                if first {
                    let mut note = format!(
                        "configuration `{name}` on {host}: {} setting(s) applied, {} unchanged, {} skipped, {} failed",
                        count(ChangeStatus::Applied),
                        count(ChangeStatus::Unchanged),
                        count(ChangeStatus::Skipped),
                        count(ChangeStatus::Failed)
                    );
                    for c in unusual {
                        note.push_str(&format!(
                            "\n  {} {}: {}",
                            c.status.name(),
                            c.setting,
                            c.note
                        ));
                    }
                    ctx.notes.push(note);
                }
                if tasks.is_some() {
                    *shield_tasks = tasks;
                }
                self.sessions.push((host, agent, has_load));
                Ok(())
            }
            Ok(Response::Error { message, .. }) => {
                agent.shutdown();
                Err(format!("host {host}: {message}"))
            }
            // The agent is lost midway: what it had changed stays, in
            // its journal on the host, until `benchlab restore`.
            Ok(other) => {
                agent.kill_now();
                Err(lost_while_applying(
                    ctx,
                    &host,
                    &format!("unexpected answer {other:?}"),
                ))
            }
            Err(e) => {
                agent.kill_now();
                Err(lost_while_applying(ctx, &host, &e.to_string()))
            }
        }
    }

    /// A point starts: restart the background loads.
    pub(crate) fn point_start(&mut self, interrupt: &AtomicBool) -> Result<(), String> {
        for (host, agent, has_load) in &mut self.sessions {
            if !*has_load {
                continue;
            }
            match agent.request(&Request::EnvPoint { start: true }, ENV_TIMEOUT, interrupt) {
                Ok(Response::EnvPointDone { .. }) => {}
                Ok(Response::Error { message, .. }) => {
                    return Err(format!("background load on {host}: {message}"))
                }
                Ok(other) => return Err(format!("background load on {host}: {other:?}")),
                Err(e) => return Err(format!("background load on {host}: {e}")),
            }
        }
        Ok(())
    }

    /// A point ended: stop the loads; their CPU use, summed over hosts.
    pub(crate) fn point_end(&mut self, interrupt: &AtomicBool) -> Option<LoadUsage> {
        let mut total: Option<LoadUsage> = None;
        for (_, agent, has_load) in &mut self.sessions {
            if !*has_load {
                continue;
            }
            if let Ok(Response::EnvPointDone { load: Some(u) }) =
                agent.request(&Request::EnvPoint { start: false }, ENV_TIMEOUT, interrupt)
            {
                total = Some(match total {
                    None => u,
                    Some(t) => LoadUsage {
                        workers: t.workers + u.workers,
                        cpu_s: t.cpu_s + u.cpu_s,
                        elapsed_s: t.elapsed_s.max(u.elapsed_s),
                        util_pct: t.util_pct + u.util_pct,
                    },
                });
            }
        }
        total
    }

    /// Reverts the applied configuration, if any.
    pub(crate) fn revert(&mut self, ctx: &mut RunCtx<'_>) -> anyhow::Result<()> {
        self.revert_sessions(ctx)?;
        self.current = None;
        self.profile = None;
        ctx.pool.set_launchers(&[], &[]);
        Ok(())
    }

    fn revert_sessions(&mut self, ctx: &mut RunCtx<'_>) -> anyhow::Result<()> {
        let idx = self.current.unwrap_or(0);
        // A revert must happen even after Ctrl-C: a flag that never fires
        // (not the run's interrupt).
        let never = AtomicBool::new(false);
        while let Some((host, mut agent, _)) = self.sessions.pop() {
            match agent.request(&Request::EnvRevert, ENV_TIMEOUT, &never) {
                Ok(Response::EnvReverted { changes }) => {
                    let failed: Vec<&ChangeReport> = changes
                        .iter()
                        .filter(|c| c.status == ChangeStatus::RevertFailed)
                        .collect();
                    for f in &failed {
                        ctx.notes.push(format!(
                            "{host}: could not revert {}: {}",
                            f.setting, f.note
                        ));
                    }
                    ctx.store
                        .add_setting_changes(ctx.run_id, &rows(idx, &host, Phase::Revert, &changes))?;
                }
                other => ctx.notes.push(format!(
                    "{host}: revert did not answer ({other:?}); run `benchlab restore` to put its settings back"
                )),
            }
            agent.shutdown();
        }
        Ok(())
    }
}

impl Drop for EnvControl {
    /// Whatever way the run ends (an error included), the environment
    /// agents are told to shut down, which reverts what they hold.
    fn drop(&mut self) {
        while let Some((_, agent, _)) = self.sessions.pop() {
            agent.shutdown();
        }
    }
}
