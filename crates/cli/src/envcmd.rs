//! `benchlab restore` and `benchlab profile …`, and the study check that
//! every profile a configuration names exists and parses.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Result};
use benchlab_agent::{Request, Response};
use benchlab_core::study::Study;
use benchlab_env::journal::journal_dir;
use benchlab_env::profile::{Action, Profile, SHIPPED};
use benchlab_env::{ChangeReport, ChangeStatus, Session, SessionSpec};

use crate::ProfileAction;

/// Stage two of study validation for configurations: each `profile` names
/// a shipped profile or a readable, valid profile file.
pub(crate) fn check_profiles(study: &Study) -> Result<()> {
    let names: Vec<&str> = study.workloads.iter().map(|w| w.name.as_str()).collect();
    for (i, c) in study.configurations.iter().enumerate() {
        let mut all: Vec<(String, &String)> = Vec::new();
        if let Some(name) = &c.env.profile {
            all.push((format!("configuration[{i}].profile"), name));
        }
        for (w, name) in &c.env.profile_for {
            let key = format!("configuration[{i}].profile.{w}");
            if !names.contains(&w.as_str()) {
                bail!(
                    "{}: key `{key}`: this study has no workload `{w}` (allowed: {}, or \"default\")",
                    study.file,
                    names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ")
                );
            }
            all.push((key, name));
        }
        for (key, name) in all {
            if let Err(e) = benchlab_engine::load_profile(study, name) {
                bail!("{}: key `{key}`: {e:#}", study.file);
            }
        }
    }
    Ok(())
}

fn print_changes(changes: &[ChangeReport]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    for c in changes {
        let values = match (&c.before, &c.after) {
            (Some(b), Some(a)) => format!(": {b} → {a}"),
            (None, Some(a)) => format!(": {a}"),
            _ => String::new(),
        };
        let note = if c.note.is_empty() {
            String::new()
        } else {
            format!(" ({})", c.note)
        };
        writeln!(out, "  {:<13} {}{values}{note}", c.status.name(), c.setting)?;
    }
    Ok(())
}

fn failed(changes: &[ChangeReport]) -> bool {
    changes
        .iter()
        .any(|c| matches!(c.status, ChangeStatus::RevertFailed | ChangeStatus::Failed))
}

/// `benchlab restore [STUDY]`.
pub(crate) fn restore(study: Option<&Path>, hosts: &crate::HostArgs) -> Result<i32> {
    // A live run's journal is its own: restoring it would undo settings
    // under its measurements.
    if let Some(msg) = benchlab_engine::RunLock::held() {
        anyhow::bail!("{msg}; restore after it");
    }
    for name in benchlab_testbed::restore_left(&benchlab_testbed::default_state_dir())? {
        println!("took down test bed `{name}`, which a run brought up and did not take down");
    }
    let Some(path) = study else {
        let dir = journal_dir();
        // Another run on this host (another user's, a lab agent's) keeps
        // its journals: they are its own to put back.
        let live = benchlab_env::journal::settle(&dir, benchlab_env::journal::DYING_GRACE);
        for j in &live {
            println!(
                "left alone: {} (a run in progress on this host holds it)",
                j.display()
            );
        }
        let n = benchlab_env::journal::pending(&dir).len();
        if n == 0 {
            println!("nothing to restore: no journal in {}", dir.display());
            return Ok(0);
        }
        let changes = benchlab_env::restore_all(&dir)?;
        println!("restored from {n} journal(s) in {}:", dir.display());
        print_changes(&changes)?;
        return Ok(if failed(&changes) { 1 } else { 0 });
    };
    let reg = crate::registry();
    let s = crate::open::load_study(path, &reg, hosts)?;
    let never = AtomicBool::new(false);
    let mut code = 0;
    // Every configuration's hosts: a profile applies on each of them.
    for name in s.used_hosts() {
        let host = s.host(name);
        let mut agent = match benchlab_engine::spawn_for_restore(host) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("benchlab: host {name}: {e}");
                code = 1;
                continue;
            }
        };
        match agent.request(&Request::EnvRestore, Duration::from_secs(300), &never) {
            Ok(Response::EnvReverted { changes }) => {
                println!("host {name}: {} setting(s) restored", changes.len());
                print_changes(&changes)?;
                if failed(&changes) {
                    code = 1;
                }
            }
            other => {
                eprintln!("benchlab: host {name}: restore failed: {other:?}");
                code = 1;
            }
        }
        agent.shutdown();
    }
    Ok(code)
}

/// `benchlab profile …`.
pub(crate) fn profile(action: ProfileAction) -> Result<i32> {
    let load = |name: &str| -> Result<(String, Profile)> {
        let (n, text) = Profile::locate(name, None)?;
        let p = Profile::parse(&n, &text)?;
        Ok((text, p))
    };
    let mut out = std::io::stdout().lock();
    match action {
        ProfileAction::Show { name: None } => {
            for (n, text) in SHIPPED {
                let p = Profile::parse(n, text)?;
                writeln!(out, "{n:<24} {}", p.profile.description)?;
            }
            Ok(0)
        }
        ProfileAction::Show { name: Some(name) } => {
            let (text, _) = load(&name)?;
            out.write_all(text.as_bytes())?;
            Ok(0)
        }
        ProfileAction::Diff { name } => {
            let (_, p) = load(&name)?;
            let mut differs = 0;
            for item in p.resolve() {
                let line = match &item.action {
                    Action::File { path, value } => {
                        let cur = benchlab_env::sys::read_value(path).unwrap_or_else(|e| e);
                        if cur == benchlab_env::sys::normalize(value) {
                            format!("  same      {}: {cur}", item.setting)
                        } else {
                            differs += 1;
                            format!("  differs   {}: {cur} → {value}", item.setting)
                        }
                    }
                    Action::DmaLatency(us) => {
                        differs += 1;
                        format!(
                            "  differs   {}: (held only while a run holds it) → {us} µs",
                            item.setting
                        )
                    }
                    Action::StopService(s) => {
                        let active =
                            benchlab_env::sys::run("systemctl", &["is-active", "--quiet", s])
                                .is_ok();
                        if active {
                            differs += 1;
                        }
                        format!(
                            "  {}   service {s}: {}",
                            if active { "differs" } else { "same   " },
                            if active {
                                "active → stopped"
                            } else {
                                "not running"
                            }
                        )
                    }
                    Action::Tuned(t) => {
                        differs += 1;
                        format!("  differs   tuned profile → {t}")
                    }
                    Action::Remount { target, options } => {
                        differs += 1;
                        format!(
                            "  differs   mount {target}: {} → +{options}",
                            benchlab_env::profile::mount_options(target).unwrap_or_default()
                        )
                    }
                    Action::Unsupported(why) => format!(
                        "  {} {}: {why}",
                        if item.required {
                            "MISSING "
                        } else {
                            "skipped "
                        },
                        item.setting
                    ),
                };
                writeln!(out, "{line}")?;
            }
            writeln!(out, "{differs} setting(s) differ")?;
            Ok(0)
        }
        ProfileAction::Apply { name } => {
            let (text, _) = load(&name)?;
            let spec = SessionSpec {
                host: "localhost".into(),
                profile: Some((name.clone(), text)),
                ..Default::default()
            };
            let (session, mut changes) = Session::apply(&spec, &journal_dir())?;
            for c in &mut changes {
                if c.setting.starts_with("cpu_dma_latency") && c.status == ChangeStatus::Applied {
                    c.note = "released when this command exits: only a run holds it".into();
                }
            }
            writeln!(
                out,
                "applied profile {name} (journal in {}):",
                journal_dir().display()
            )?;
            print_changes(&changes)?;
            writeln!(
                out,
                "undo with `benchlab profile revert`; a wake-up latency limit ends with this command (a study's configuration holds it for its whole duration)"
            )?;
            // The journal stays: it is what `profile revert` undoes.
            std::mem::forget(session);
            Ok(0)
        }
        ProfileAction::Revert => restore(None, &crate::HostArgs::default()),
    }
}
