//! One configuration applied on one host: the profile's changes, the
//! wake-up latency hold, the shield and the background load — every
//! change journaled first, all of it undone by [`Session::revert`], or by
//! [`restore_all`] after a crash.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use benchlab_core::envspec::LoadSpec;
use serde::{Deserialize, Serialize};

use crate::journal::{self, Change, Journal};
use crate::load::{self, Load};
use crate::profile::{Action, Profile};
use crate::{shield, sys, EnvError};

/// What to apply on a host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionSpec {
    /// The study's name of the host.
    pub host: String,
    /// The host's network namespace, when it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// The profile's name and text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<(String, String)>,
    /// CPUs to shield.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shield: Option<Vec<usize>>,
    /// A background load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadSpec>,
}

pub use benchlab_core::setting::ChangeStatus;

pub use crate::journal::ChangeReport;

/// CPU use of the background load over one point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadUsage {
    /// Workers that ran.
    pub workers: u32,
    /// CPU seconds used by the load (all its processes).
    pub cpu_s: f64,
    /// How long it ran.
    pub elapsed_s: f64,
    /// `cpu_s / elapsed_s` × 100: 100 = one CPU kept busy.
    pub util_pct: f64,
}

/// A configuration applied on a host.
pub struct Session {
    journal: Option<Journal>,
    dma: Option<File>,
    shield_tasks: Option<String>,
    load_spec: Option<LoadSpec>,
    load_dir: Option<String>,
    load: Option<Load>,
}

/// A pause between steps, for the crash tests (which SIGKILL benchlab at
/// many moments of an apply that would otherwise take a millisecond).
fn test_step_pause() {
    if let Some(ms) = std::env::var("BENCHLAB_TEST_STEP_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

fn push(
    reports: &mut Vec<ChangeReport>,
    setting: &str,
    before: Option<String>,
    after: Option<String>,
    status: ChangeStatus,
    note: impl Into<String>,
) {
    reports.push(ChangeReport {
        setting: setting.into(),
        before,
        after,
        status,
        note: note.into(),
    });
}

/// Options that undo each option a remount may add (for the options a
/// file system shows only when they differ from its default).
fn remount_inverse(option: &str) -> Option<&'static str> {
    Some(match option {
        "barrier=0" | "nobarrier" => "barrier=1",
        "barrier=1" | "barrier" => "barrier=0",
        "noatime" => "relatime",
        "nodiratime" => "diratime",
        "discard" => "nodiscard",
        "nodiscard" => "discard",
        "ro" => "rw",
        "rw" => "ro",
        _ => return None,
    })
}

/// What one planned setting needs.
enum Step {
    /// Nothing to change (skipped, unchanged, refused): just this line.
    Report(ChangeReport),
    /// The wake-up latency request, held by keeping the file open.
    Hold(File, ChangeReport),
    /// A change: journal `undo`, then `run`, then `verify`.
    Change {
        before: String,
        after: String,
        undo: Change,
        run: Box<dyn FnOnce() -> Result<(), String>>,
        verify: Box<dyn FnOnce() -> Result<(), String>>,
    },
}

fn no_check() -> Box<dyn FnOnce() -> Result<(), String>> {
    Box::new(|| Ok(()))
}

impl Session {
    /// Works out what a planned setting needs on this host, touching
    /// nothing but reads (and opening the latency device).
    fn step(p: &crate::profile::Planned) -> Result<Step, EnvError> {
        let line = |before: Option<String>, after: Option<String>, status, note: &str| {
            Step::Report(ChangeReport {
                setting: p.setting.clone(),
                before,
                after,
                status,
                note: note.into(),
            })
        };
        Ok(match &p.action {
            Action::Unsupported(why) => line(None, None, ChangeStatus::Skipped, why),
            Action::File { path, value } => {
                let before = match sys::read_value(path) {
                    Ok(b) => b,
                    Err(e) if p.required => {
                        return Err(EnvError::Required {
                            setting: p.setting.clone(),
                            reason: e,
                        })
                    }
                    Err(e) => return Ok(line(None, Some(value.clone()), ChangeStatus::Failed, &e)),
                };
                if before == sys::normalize(value) {
                    return Ok(line(
                        Some(before),
                        Some(value.clone()),
                        ChangeStatus::Unchanged,
                        "",
                    ));
                }
                let (p1, v1, p2, v2) = (path.clone(), value.clone(), path.clone(), value.clone());
                Step::Change {
                    undo: Change::File {
                        path: path.clone(),
                        before: before.clone(),
                    },
                    before,
                    after: value.clone(),
                    run: Box::new(move || sys::write_value(&p1, &v1)),
                    verify: Box::new(move || {
                        let now = sys::read_value(&p2)?;
                        if now == sys::normalize(&v2) {
                            Ok(())
                        } else {
                            Err(format!("the kernel kept `{now}`"))
                        }
                    }),
                }
            }
            Action::DmaLatency(us) => {
                let mut f = File::options()
                    .read(true)
                    .write(true)
                    .open("/dev/cpu_dma_latency")
                    .map_err(|e| EnvError::io("open /dev/cpu_dma_latency", e))?;
                // Reading gives the limit in force now (2000 s = none).
                let mut cur = [0u8; 4];
                let before = match f.read_exact(&mut cur) {
                    Ok(()) => match i32::from_ne_bytes(cur) {
                        2_000_000_000 => "no limit".to_string(),
                        v => format!("{v} µs"),
                    },
                    Err(_) => "unknown".into(),
                };
                f.write_all(&us.to_ne_bytes())
                    .map_err(|e| EnvError::io("write /dev/cpu_dma_latency", e))?;
                // Held while the file stays open: the kernel drops the
                // request when the descriptor closes, so a crash needs no
                // journal entry for it.
                Step::Hold(
                    f,
                    ChangeReport {
                        setting: p.setting.clone(),
                        before: Some(before),
                        after: Some(format!("{us} µs")),
                        status: ChangeStatus::Applied,
                        note: "held while the configuration runs".into(),
                    },
                )
            }
            Action::StopService(name) => {
                if sys::run("systemctl", &["is-active", "--quiet", name]).is_err() {
                    return Ok(line(
                        Some("inactive".into()),
                        Some("inactive".into()),
                        ChangeStatus::Unchanged,
                        "not running (or no such unit)",
                    ));
                }
                let n = name.clone();
                Step::Change {
                    before: "active".into(),
                    after: "stopped".into(),
                    undo: Change::Service { name: name.clone() },
                    run: Box::new(move || sys::run("systemctl", &["stop", &n]).map(drop)),
                    verify: no_check(),
                }
            }
            Action::Tuned(want) => {
                let active = sys::run("tuned-adm", &["active"]).unwrap_or_default();
                let before = active
                    .lines()
                    .find_map(|l| l.strip_prefix("Current active profile:"))
                    .map(|s| s.trim().to_string());
                if before.as_deref() == Some(want.as_str()) {
                    return Ok(line(
                        before,
                        Some(want.clone()),
                        ChangeStatus::Unchanged,
                        "",
                    ));
                }
                let w = want.clone();
                Step::Change {
                    undo: Change::Tuned {
                        before: before.clone(),
                    },
                    before: before.unwrap_or_else(|| "off".into()),
                    after: want.clone(),
                    run: Box::new(move || sys::run("tuned-adm", &["profile", &w]).map(drop)),
                    verify: no_check(),
                }
            }
            Action::Remount { target, options } => {
                let before = crate::profile::mount_options(target).unwrap_or_default();
                let have: Vec<&str> = before.split(',').collect();
                let mut restore: Vec<String> = Vec::new();
                let mut unknown = Vec::new();
                for o in options.split(',').filter(|o| !o.is_empty()) {
                    if have.contains(&o) {
                        continue;
                    }
                    match remount_inverse(o) {
                        Some(inv) => restore.push(inv.into()),
                        None => unknown.push(o.to_string()),
                    }
                }
                if !unknown.is_empty() {
                    // Never change what benchlab could not put back.
                    let why = format!(
                        "not applied: benchlab knows no option that undoes {}",
                        unknown.join(", ")
                    );
                    return Ok(line(
                        Some(before),
                        Some(options.clone()),
                        ChangeStatus::Failed,
                        &why,
                    ));
                }
                if restore.is_empty() {
                    return Ok(line(
                        Some(before),
                        Some(options.clone()),
                        ChangeStatus::Unchanged,
                        "",
                    ));
                }
                let (t, o) = (target.clone(), options.clone());
                Step::Change {
                    before,
                    after: options.clone(),
                    undo: Change::Remount {
                        target: target.clone(),
                        restore_options: restore.join(","),
                    },
                    run: Box::new(move || {
                        sys::run("mount", &["-o", &format!("remount,{o}"), &t])
                            .map(drop)
                            .map_err(|e| format!("{e} (this kernel may no longer support it)"))
                    }),
                    verify: no_check(),
                }
            }
        })
    }

    /// Resolves the profile, checks that every required setting exists
    /// (before anything changes), then applies everything, journaled.
    /// On an error half-way, what was applied is reverted before the
    /// error is returned.
    pub fn apply(spec: &SessionSpec, dir: &Path) -> Result<(Session, Vec<ChangeReport>), EnvError> {
        let profile = match &spec.profile {
            Some((name, text)) => Some(Profile::parse(name, text)?),
            None => None,
        };
        let planned = profile.as_ref().map(|p| p.resolve()).unwrap_or_default();
        if let Some(p) = planned
            .iter()
            .find(|p| p.required && matches!(p.action, Action::Unsupported(_)))
        {
            let Action::Unsupported(reason) = &p.action else {
                unreachable!()
            };
            return Err(EnvError::Required {
                setting: p.setting.clone(),
                reason: reason.clone(),
            });
        }
        let mut session = Session {
            journal: Some(Journal::create(dir, &spec.host, spec.netns.clone())?),
            dma: None,
            shield_tasks: None,
            load_spec: spec.load.clone(),
            load_dir: None,
            load: None,
        };
        let mut reports = Vec::new();
        match session.apply_all(spec, &planned, &mut reports) {
            Ok(()) => Ok((session, reports)),
            Err(e) => {
                let undone = session.revert();
                let failed: Vec<&ChangeReport> = undone
                    .iter()
                    .filter(|r| r.status == ChangeStatus::RevertFailed)
                    .collect();
                if failed.is_empty() {
                    Err(e)
                } else {
                    Err(EnvError::Other(format!(
                        "{e}; reverting what was applied failed for: {}",
                        failed
                            .iter()
                            .map(|r| format!("{} ({})", r.setting, r.note))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )))
                }
            }
        }
    }

    fn apply_all(
        &mut self,
        spec: &SessionSpec,
        planned: &[crate::profile::Planned],
        reports: &mut Vec<ChangeReport>,
    ) -> Result<(), EnvError> {
        let journal = self.journal.as_mut().expect("open until revert");
        for p in planned {
            test_step_pause();
            let report = |before: Option<String>, after: Option<String>, status, note: String| {
                ChangeReport {
                    setting: p.setting.clone(),
                    before,
                    after,
                    status,
                    note,
                }
            };
            match Self::step(p)? {
                Step::Report(r) => reports.push(r),
                Step::Hold(file, r) => {
                    self.dma = Some(file);
                    reports.push(r);
                }
                Step::Change {
                    before,
                    after,
                    undo,
                    run,
                    verify,
                } => {
                    // Write-ahead: the way back is on disk before the change.
                    journal.record(&p.setting, undo)?;
                    let result = run().and_then(|()| verify());
                    match result {
                        Ok(()) => reports.push(report(
                            Some(before),
                            Some(after),
                            ChangeStatus::Applied,
                            String::new(),
                        )),
                        Err(e) if p.required => {
                            return Err(EnvError::Required {
                                setting: p.setting.clone(),
                                reason: e,
                            })
                        }
                        Err(e) => {
                            reports.push(report(Some(before), Some(after), ChangeStatus::Failed, e))
                        }
                    }
                }
            }
        }
        if let Some(cpus) = &spec.shield {
            test_step_pause();
            let tasks = shield::setup(cpus, journal, reports)?;
            // Through this process's /proc root, which holds the shield for
            // the configuration's duration: sides in other mount namespaces
            // (`ip netns exec` agents) reach the same cgroup file that way.
            self.shield_tasks = Some(format!("/proc/{}/root{tasks}", std::process::id()));
        }
        if spec.load.is_some() {
            test_step_pause();
            let dir = std::env::temp_dir().join(format!(
                "benchlab-load-{}-{}",
                std::process::id(),
                journal
                    .path()
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("x")
            ));
            let dir = dir.display().to_string();
            journal.record(
                "background-load scratch directory",
                Change::ScratchDir { path: dir.clone() },
            )?;
            std::fs::create_dir(&dir).map_err(|e| EnvError::io(format!("create {dir}"), e))?;
            push(
                reports,
                "background load",
                None,
                spec.load.as_ref().map(|l| l.describe()),
                ChangeStatus::Applied,
                "restarted at the start of every point",
            );
            self.load_dir = Some(dir);
        }
        Ok(())
    }

    /// The file a side writes its id to, to run inside the shield (valid in
    /// any mount namespace while this session is held).
    pub fn shield_tasks(&self) -> Option<&str> {
        self.shield_tasks.as_deref()
    }

    /// A point starts: (re)starts the background load.
    pub fn point_start(&mut self) -> Result<(), EnvError> {
        if let Some(mut l) = self.load.take() {
            l.stop();
        }
        if let (Some(spec), Some(dir)) = (&self.load_spec, &self.load_dir) {
            let journal = self.journal.as_mut().expect("open until revert");
            self.load = Some(load::start(spec, dir, journal)?);
        }
        Ok(())
    }

    /// A point ended: stops the load and says what it used.
    pub fn point_end(&mut self) -> Option<LoadUsage> {
        self.load.take().map(|mut l| l.stop())
    }

    /// Undoes everything, newest first; says what became of each change.
    pub fn revert(&mut self) -> Vec<ChangeReport> {
        if let Some(mut l) = self.load.take() {
            l.stop();
        }
        let mut reports = Vec::new();
        if let Some(f) = self.dma.take() {
            drop(f);
            push(
                &mut reports,
                "cpu_dma_latency (µs, held)",
                None,
                Some("released".into()),
                ChangeStatus::Reverted,
                "",
            );
        }
        if let Some(journal) = self.journal.take() {
            for e in journal.entries().iter().rev() {
                reports.push(undo_report(e.setting.clone(), e));
            }
            if reports
                .iter()
                .any(|r| r.status == ChangeStatus::RevertFailed)
            {
                // The journal stays: `benchlab run` refuses to start until
                // `benchlab restore` has tried again (and said what it could
                // not put back).
                push(
                    &mut reports,
                    "journal",
                    None,
                    None,
                    ChangeStatus::RevertFailed,
                    format!(
                        "kept at {}: run `benchlab restore`",
                        journal.path().display()
                    ),
                );
            } else if let Err(e) = journal.finish() {
                push(
                    &mut reports,
                    "journal",
                    None,
                    None,
                    ChangeStatus::RevertFailed,
                    e.to_string(),
                );
            }
        }
        reports
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.journal.is_some() {
            self.revert();
        }
    }
}

/// Undoes one journal entry and says how that went.
fn undo_report(setting: String, e: &journal::Entry) -> ChangeReport {
    let (status, note) = match sys::undo(e) {
        Ok(note) => (ChangeStatus::Reverted, note),
        Err(why) => (ChangeStatus::RevertFailed, why),
    };
    ChangeReport {
        setting,
        before: None,
        after: None,
        status,
        note,
    }
}

/// Undoes every journal left in `dir` by a run that is over (newest
/// entry first, across all journals), removes the journals, and says what
/// was done. Journals of runs in progress (their lock held, after
/// [`journal::DYING_GRACE`] for a run that has just died) are theirs to
/// undo and left alone: [`journal::live`] names them.
pub fn restore_all(dir: &Path) -> Result<Vec<ChangeReport>, EnvError> {
    journal::settle(dir, journal::DYING_GRACE);
    // Each journal claimed (locked) until it is removed: a run starting
    // meanwhile, or a second restore, does not see it unlocked.
    let claimed: Vec<(PathBuf, journal::Claim)> = journal::pending(dir)
        .into_iter()
        .filter_map(|p| journal::claim_pending(&p, journal::DYING_GRACE).map(|f| (p, f)))
        .collect();
    journal::sweep_unnamed(dir);
    let files: Vec<PathBuf> = claimed.iter().map(|(p, _)| p.clone()).collect();
    let mut entries = Vec::new();
    for f in &files {
        entries.extend(journal::read(f)?);
    }
    entries.sort_by(|a, b| b.at_ns.cmp(&a.at_ns).then(b.seq.cmp(&a.seq)));
    let mut reports = Vec::new();
    for e in &entries {
        let setting = format!("{} on {}", e.setting, e.host);
        reports.push(undo_report(setting, e));
    }
    for f in &files {
        std::fs::remove_file(f).map_err(|e| EnvError::io(format!("remove {}", f.display()), e))?;
    }
    drop(claimed);
    Ok(reports)
}
