//! CPU shielding (seed 002's `shield -a 0,1` / `cpuguard`): an exclusive
//! cpuset for the benchmark CPUs, every other movable task and IRQ moved
//! off them, all of it journaled so that it is put back afterwards — or by
//! `benchlab restore` after a crash.
//!
//! cgroup v1 (this is what hosts with a separate `cpuset` hierarchy run):
//! `benchlab-shield` (the shielded CPUs, `cpu_exclusive`) and
//! `benchlab-rest` (all other CPUs) are made under the cpuset root, every
//! task of the root is moved to `benchlab-rest`, other cpusets that
//! overlap the shield are shrunk. Per-CPU kernel threads cannot move and
//! are reported.
//!
//! cgroup v2: `benchlab-shield` becomes a partition root
//! (`cpuset.cpus.partition = root`), which takes its CPUs away from every
//! other cgroup's effective set — no task needs to move.

use std::fs;
use std::path::Path;

use benchlab_core::placement::parse_cpu_list;

use crate::journal::{Change, ChangeReport, Journal};
use crate::sys;
use crate::EnvError;
use benchlab_core::setting::ChangeStatus;

/// Name of the shield cpuset.
pub const SHIELD_DIR: &str = "benchlab-shield";
/// Name of the cpuset the other tasks go to (v1).
pub const REST_DIR: &str = "benchlab-rest";

/// Which cpuset interface a host has.
#[derive(Debug, Clone, PartialEq)]
pub enum Cpusets {
    /// A v1 cpuset hierarchy mounted here.
    V1(String),
    /// The unified v2 hierarchy, with the cpuset controller, here.
    V2(String),
}

/// Finds the host's cpuset interface: in this process's mounts, else in
/// those of PID 1 through `/proc/1/root` — an agent started with `ip
/// netns exec` has a mount namespace of its own whose fresh /sys shows no
/// cgroup file systems, yet the machine's cpusets are the ones to shield.
pub fn detect() -> Result<Cpusets, String> {
    for (mounts, prefix) in [
        ("/proc/self/mounts", ""),
        ("/proc/1/mounts", "/proc/1/root"),
    ] {
        if let Some(found) = detect_in(mounts, prefix) {
            return Ok(found);
        }
    }
    Err("this host has no cpuset controller (neither a cgroup v1 cpuset hierarchy nor cpuset in cgroup v2)".into())
}

fn detect_in(mounts_file: &str, prefix: &str) -> Option<Cpusets> {
    let mounts = fs::read_to_string(mounts_file).ok()?;
    for l in mounts.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() > 3 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpuset") {
            let dir = format!("{prefix}{}", f[1]);
            if Path::new(&format!("{dir}/tasks")).exists() {
                return Some(Cpusets::V1(dir));
            }
        }
    }
    for l in mounts.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() > 2 && f[2] == "cgroup2" {
            let dir = format!("{prefix}{}", f[1]);
            let ctl = fs::read_to_string(format!("{dir}/cgroup.controllers")).unwrap_or_default();
            if ctl.split_whitespace().any(|c| c == "cpuset") {
                return Some(Cpusets::V2(dir));
            }
        }
    }
    None
}

fn cpu_text(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The hex mask form (/proc/irq/default_smp_affinity) of a CPU list.
fn cpu_mask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map(|m| m / 32 + 1).unwrap_or(1);
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[c / 32] |= 1 << (c % 32);
    }
    w.iter()
        .rev()
        .map(|x| format!("{x:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn report(
    reports: &mut Vec<ChangeReport>,
    setting: &str,
    before: Option<String>,
    after: Option<String>,
    status: ChangeStatus,
    note: String,
) {
    reports.push(ChangeReport {
        setting: setting.into(),
        before,
        after,
        status,
        note,
    });
}

/// Changes a settings file through the journal; returns whether it took.
fn journaled_write(
    journal: &mut Journal,
    reports: &mut Vec<ChangeReport>,
    setting: &str,
    path: &str,
    value: &str,
) -> Result<bool, EnvError> {
    let before = match sys::read_value(path) {
        Ok(b) => b,
        Err(e) => {
            report(
                reports,
                setting,
                None,
                Some(value.into()),
                ChangeStatus::Failed,
                e,
            );
            return Ok(false);
        }
    };
    journal.record(
        setting,
        Change::File {
            path: path.into(),
            before: before.clone(),
        },
    )?;
    match sys::write_value(path, value) {
        Ok(()) => {
            report(
                reports,
                setting,
                Some(before),
                Some(value.into()),
                ChangeStatus::Applied,
                String::new(),
            );
            Ok(true)
        }
        Err(e) => {
            report(
                reports,
                setting,
                Some(before),
                Some(value.into()),
                ChangeStatus::Failed,
                e,
            );
            Ok(false)
        }
    }
}

/// Sets the shield up. Returns the file a side writes its thread id (v1)
/// or process id (v2) to, to run inside the shield.
pub fn setup(
    cpus: &[usize],
    journal: &mut Journal,
    reports: &mut Vec<ChangeReport>,
) -> Result<String, EnvError> {
    let sets = detect().map_err(EnvError::Other)?;
    let root = match &sets {
        Cpusets::V1(r) | Cpusets::V2(r) => r.clone(),
    };
    let all_file = match sets {
        Cpusets::V1(_) => format!("{root}/cpuset.cpus"),
        Cpusets::V2(_) => format!("{root}/cpuset.cpus.effective"),
    };
    let all = parse_cpu_list(
        sys::read_value(&all_file)
            .map_err(EnvError::Other)?
            .as_str(),
    )
    .map_err(EnvError::Other)?;
    if let Some(c) = cpus.iter().find(|c| !all.contains(c)) {
        return Err(EnvError::Other(format!(
            "cannot shield CPU {c}: this host's CPUs are {}",
            cpu_text(&all)
        )));
    }
    let rest: Vec<usize> = all.iter().copied().filter(|c| !cpus.contains(c)).collect();
    if rest.is_empty() {
        return Err(EnvError::Other(
            "shielding every CPU would leave none for the rest of the system".into(),
        ));
    }
    let shield = format!("{root}/{SHIELD_DIR}");
    if Path::new(&shield).exists() {
        return Err(EnvError::Other(format!(
            "{shield} already exists: another benchlab shield is active (or was left by a crash without a journal); remove it with rmdir once its tasks are gone"
        )));
    }
    let mems = match sets {
        Cpusets::V1(_) => {
            sys::read_value(&format!("{root}/cpuset.mems")).map_err(EnvError::Other)?
        }
        Cpusets::V2(_) => String::new(),
    };
    let make_dir =
        |journal: &mut Journal, dir: &str, parent_tasks: String| -> Result<(), EnvError> {
            journal.record(
                &format!("cgroup {dir}"),
                Change::CgroupDir {
                    path: dir.into(),
                    parent_tasks,
                },
            )?;
            fs::create_dir(dir).map_err(|e| EnvError::io(format!("create cgroup {dir}"), e))
        };
    let write = |path: String, v: &str| -> Result<(), EnvError> {
        sys::write_value(&path, v).map_err(EnvError::Other)
    };
    match sets {
        Cpusets::V1(_) => {
            // Other cpusets that overlap the shield would keep their tasks
            // on it (and forbid cpu_exclusive): shrink them, deepest first.
            let mut others = Vec::new();
            collect_cpusets(Path::new(&root), &mut others);
            others.sort_by_key(|p| std::cmp::Reverse(p.matches('/').count()));
            for dir in others {
                let f = format!("{dir}/cpuset.cpus");
                let Ok(cur) = sys::read_value(&f) else {
                    continue;
                };
                let Ok(cur) = parse_cpu_list(&cur) else {
                    continue;
                };
                if !cur.iter().any(|c| cpus.contains(c)) {
                    continue;
                }
                let left: Vec<usize> = cur.iter().copied().filter(|c| !cpus.contains(c)).collect();
                if left.is_empty() {
                    report(
                        reports,
                        &format!("cpuset {dir}"),
                        None,
                        None,
                        ChangeStatus::Failed,
                        "it has only shielded CPUs; its tasks stay on them".into(),
                    );
                    continue;
                }
                journaled_write(
                    journal,
                    reports,
                    &format!("cpuset {dir} cpus"),
                    &f,
                    &cpu_text(&left),
                )?;
            }
            let rest_dir = format!("{root}/{REST_DIR}");
            let root_tasks = format!("{root}/tasks");
            make_dir(journal, &rest_dir, root_tasks.clone())?;
            write(format!("{rest_dir}/cpuset.mems"), &mems)?;
            write(format!("{rest_dir}/cpuset.cpus"), &cpu_text(&rest))?;
            make_dir(journal, &shield, root_tasks.clone())?;
            write(format!("{shield}/cpuset.mems"), &mems)?;
            write(format!("{shield}/cpuset.cpus"), &cpu_text(cpus))?;
            write(format!("{shield}/cpuset.cpu_exclusive"), "1")?;
            report(
                reports,
                "cpuset shield",
                None,
                Some(format!(
                    "{SHIELD_DIR}: CPUs {}, exclusive; {REST_DIR}: CPUs {}",
                    cpu_text(cpus),
                    cpu_text(&rest)
                )),
                ChangeStatus::Applied,
                String::new(),
            );
            // Journal the list before moving, so that a crash mid-way
            // still moves every one of them back.
            let tids: Vec<i32> = fs::read_to_string(&root_tasks)
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|t| t.parse().ok())
                .collect();
            journal.record(
                "tasks moved off the shielded CPUs",
                Change::TasksMoved {
                    back_to: root_tasks.clone(),
                    tids,
                },
            )?;
            let (moved, stuck) = sys::move_tasks(&root_tasks, &format!("{rest_dir}/tasks"));
            // Per-CPU kernel threads, counted by kind (`kworker/1:3-events`
            // is a kworker): the full list of ids is not worth a report line.
            let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
            for (t, _) in &stuck {
                let comm = fs::read_to_string(format!("/proc/{t}/comm"))
                    .map(|c| c.trim().to_string())
                    .unwrap_or_else(|_| "(exited)".into());
                let kind = comm.split('/').next().unwrap_or(&comm).to_string();
                *kinds.entry(kind).or_default() += 1;
            }
            let note = if stuck.is_empty() {
                String::new()
            } else {
                format!(
                    "{} task(s) could not move (per-CPU kernel threads): {}",
                    stuck.len(),
                    kinds
                        .iter()
                        .map(|(k, n)| format!("{k} ×{n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            report(
                reports,
                "tasks moved off the shielded CPUs",
                None,
                Some(format!("{} moved", moved.len())),
                ChangeStatus::Applied,
                note,
            );
        }
        Cpusets::V2(_) => {
            let ctl = format!("{root}/cgroup.subtree_control");
            let enabled = fs::read_to_string(&ctl).unwrap_or_default();
            if !enabled.split_whitespace().any(|c| c == "cpuset") {
                // Undo of "+cpuset" is writing "-cpuset".
                journal.record(
                    "cgroup v2 cpuset controller",
                    Change::File {
                        path: ctl.clone(),
                        before: "-cpuset".into(),
                    },
                )?;
                write(ctl, "+cpuset")?;
            }
            make_dir(journal, &shield, format!("{root}/cgroup.procs"))?;
            write(format!("{shield}/cpuset.cpus"), &cpu_text(cpus))?;
            write(format!("{shield}/cpuset.cpus.partition"), "root")?;
            let state =
                sys::read_value(&format!("{shield}/cpuset.cpus.partition")).unwrap_or_default();
            let status = if state.starts_with("root") {
                ChangeStatus::Applied
            } else {
                ChangeStatus::Failed
            };
            report(
                reports,
                "cpuset shield",
                None,
                Some(format!(
                    "{SHIELD_DIR}: CPUs {}, partition {state}",
                    cpu_text(cpus)
                )),
                status,
                String::new(),
            );
        }
    }
    // IRQs: every IRQ allowed on a shielded CPU goes to the rest, and so do
    // IRQs registered from now on.
    let mut stuck_irqs = Vec::new();
    let mut moved_irqs = 0;
    let mut irqs: Vec<u32> = fs::read_dir("/proc/irq")
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    irqs.sort();
    for n in irqs {
        let path = format!("/proc/irq/{n}/smp_affinity_list");
        let Ok(before) = sys::read_value(&path) else {
            continue;
        };
        let Ok(cur) = parse_cpu_list(&before) else {
            continue;
        };
        if !cur.iter().any(|c| cpus.contains(c)) {
            continue;
        }
        journal.record(
            &format!("IRQ {n} affinity"),
            Change::File {
                path: path.clone(),
                before,
            },
        )?;
        match sys::write_value(&path, &cpu_text(&rest)) {
            Ok(()) => moved_irqs += 1,
            Err(_) => stuck_irqs.push(n.to_string()),
        }
    }
    let note = if stuck_irqs.is_empty() {
        String::new()
    } else {
        format!(
            "IRQs that refused to move (managed by their driver): {}",
            stuck_irqs.join(", ")
        )
    };
    report(
        reports,
        "IRQs moved off the shielded CPUs",
        None,
        Some(format!("{moved_irqs} moved to CPUs {}", cpu_text(&rest))),
        ChangeStatus::Applied,
        note,
    );
    let dflt = "/proc/irq/default_smp_affinity";
    if Path::new(dflt).exists() {
        journaled_write(
            journal,
            reports,
            "IRQ default affinity",
            dflt,
            &cpu_mask(&rest),
        )?;
    }
    Ok(match sets {
        Cpusets::V1(_) => format!("{shield}/tasks"),
        Cpusets::V2(_) => format!("{shield}/cgroup.procs"),
    })
}

/// Every cpuset directory under `dir` except the root and ours.
fn collect_cpusets(dir: &Path, out: &mut Vec<String>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        let name = e.file_name();
        if name == SHIELD_DIR || name == REST_DIR {
            continue;
        }
        out.push(p.display().to_string());
        collect_cpusets(&p, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert_eq!(cpu_mask(&[0]), "00000001");
        assert_eq!(cpu_mask(&[0, 2, 3]), "0000000d");
        assert_eq!(cpu_mask(&[33]), "00000002,00000000");
    }
}
