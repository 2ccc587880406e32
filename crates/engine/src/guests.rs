//! Guests during a run: each boots when a configuration that uses it
//! starts and stops when one that does not starts (or the run ends), so
//! that no idle guest perturbs another configuration's points or holds
//! its memory and huge pages. Every boot is recorded: an event with its
//! time and configuration, and the guest's inventory.

use std::time::{Duration, Instant};

use benchlab_store::HostRow;

use crate::context::RunCtx;
use crate::unit::UnitError;

/// A failed point's reason, led by the guest that ended if one of
/// configuration `idx`'s guests did: killed or crashed while the
/// configuration was proved or a server side started, its agents fail
/// first ("the guest closed the channel") and the reason would not say
/// why.
pub(crate) fn lost(ctx: &RunCtx<'_>, idx: usize, reason: String) -> UnitError {
    let hosts = ctx.pool.guests_of(ctx.study, idx);
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let watches = ctx.pool.guest_watches(&hosts);
    if watches.is_empty() {
        return UnitError::Failed(reason);
    }
    // The control port closes as QEMU ends; an agent's channel may report
    // it a moment before the port's reader does.
    let until = Instant::now() + Duration::from_millis(500);
    loop {
        if let Some((host, _)) = watches.iter().find(|(_, w)| w.gone()) {
            return UnitError::GuestEnded(format!(
                "host `{host}`: the guest ended (its QEMU was killed or crashed): {reason}"
            ));
        }
        if Instant::now() > until {
            return UnitError::Failed(reason);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Makes configuration `idx`'s guests run: those already running stay,
/// missing ones (or ones whose QEMU ended) boot, and each boot is proved
/// (its agent, its data paths, its services' checks) and recorded. The
/// guests it does not use must already be stopped
/// ([`stop_leaving`]). `Err` says why the configuration cannot run.
pub(crate) fn enter(ctx: &mut RunCtx<'_>, idx: usize) -> Result<(), String> {
    let study = ctx.study;
    let config = &study.configurations[idx].name;
    let mut booted = Vec::new();
    for host in ctx.pool.guests_of(study, idx) {
        match ctx.pool.guest_state(&host) {
            Some(true) => continue,
            Some(false) => stop(ctx, &host, "its QEMU had ended"),
            None => {}
        }
        let what = format!(
            "host `{host}` ({})",
            crate::hosts::route(ctx.pool.host(&host))
        );
        let boot = match ctx.pool.boot_guest(&host, ctx.interrupt) {
            Ok(b) => b,
            Err(e) => {
                let why = format!("{what}: the guest could not boot: {e:#}");
                ctx.event(
                    "guest",
                    &format!("{host} could not boot for configuration `{config}`: {e:#}"),
                );
                return Err(why);
            }
        };
        let f = &boot.facts;
        ctx.event(
            "guest",
            &format!(
                "{host} booted for configuration `{config}` in {:.1} s ({}{})",
                f.boot_s,
                f.accel,
                if f.emulated.is_some() {
                    ", emulated"
                } else {
                    ""
                }
            ),
        );
        if let Some(why) = &f.emulated {
            if ctx.pool.first_emulated_note(&host) {
                ctx.notes.push(format!(
                    "{what}: {} ({why})",
                    benchlab_guest::accel::EMULATED
                ));
            }
        }
        let (name, roles, inventory) = boot.inventory;
        if let Err(e) = ctx.store.add_host(
            ctx.run_id,
            &HostRow {
                name,
                roles,
                inventory,
            },
        ) {
            // The inventory is the record of what ran: without it the
            // configuration's figures would be unattributed.
            stop(ctx, &host, "its inventory could not be stored");
            return Err(format!("{what}: store: {e}"));
        }
        booted.push(host);
    }
    if booted.is_empty() {
        return Ok(());
    }
    if let Err(e) = ctx.pool.probe_guests(idx, &booted, ctx.interrupt) {
        return Err(format!("{e:#}"));
    }
    for host in &booted {
        crate::services::check_on(study, idx, host, &mut ctx.pool)
            .map_err(|e| format!("host `{host}`: {e}"))?;
    }
    Ok(())
}

/// Stops one guest (its agents, then QEMU and all it made) and records
/// why.
pub(crate) fn stop(ctx: &mut RunCtx<'_>, host: &str, why: &str) {
    let Some(failed) = ctx.pool.stop_guest(host) else {
        return;
    };
    if failed.is_empty() {
        ctx.event("guest", &format!("{host} stopped ({why})"));
    } else {
        let msg = format!(
            "{host} stopped ({why}), but could not undo: {}; run `benchlab restore`",
            failed.join("; ")
        );
        ctx.event("guest", &msg);
        ctx.notes.push(format!("host `{host}`: {msg}"));
    }
}

/// The running guests configuration `idx` does not use.
pub(crate) fn leaving(ctx: &RunCtx<'_>, idx: usize) -> Vec<String> {
    ctx.pool.guests_leaving(ctx.study, idx)
}

/// Stops the guests configuration `idx` does not use; their services and
/// environments must already be stopped and reverted.
pub(crate) fn stop_leaving(ctx: &mut RunCtx<'_>, idx: usize) {
    let config = &ctx.study.configurations[idx].name;
    for host in leaving(ctx, idx) {
        stop(
            ctx,
            &host,
            &format!("configuration `{config}` does not use it"),
        );
    }
}

/// Stops every guest still running (the run ends, `why`).
pub(crate) fn stop_all(ctx: &mut RunCtx<'_>, why: &str) {
    for host in ctx.pool.running_guests() {
        stop(ctx, &host, why);
    }
}
