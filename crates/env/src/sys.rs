//! Reading and writing the kernel's settings files, and undoing journal
//! entries. Every undo is idempotent: it puts a value back, whatever is
//! there now.

use std::fs;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

use crate::journal::{own_netns_id, Change, Entry};

/// Reads a settings file. Files that show a choice as `a [b] c` (I/O
/// scheduler, transparent hugepages) give the bracketed word; other files
/// give their trimmed content with runs of whitespace as one space
/// (tcp_rmem reads back with tabs).
pub fn read_value(path: &str) -> Result<String, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    Ok(normalize(&text))
}

/// The comparable form of a settings value.
pub fn normalize(text: &str) -> String {
    if let (Some(a), Some(b)) = (text.find('['), text.find(']')) {
        if a < b {
            return text[a + 1..b].trim().to_string();
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Writes a settings file.
pub fn write_value(path: &str, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("cannot write `{value}` to {path}: {e}"))
}

/// `/proc/sys` path of a sysctl name (`net.core.rmem_max`).
pub fn sysctl_path(name: &str) -> String {
    format!("/proc/sys/{}", name.replace('.', "/"))
}

/// A file that opens the network namespace `id` (`net:[…]`): a named one
/// (`/run/netns/NAME`) when given, else that of any process in it (PID 1's
/// may be closed to us, as on this project's VMs).
fn netns_file(name: Option<&str>, id: Option<&str>) -> Result<fs::File, String> {
    if let Some(n) = name {
        let p = format!("/run/netns/{n}");
        return fs::File::open(&p).map_err(|e| format!("network namespace {p} is gone ({e})"));
    }
    let id = id.ok_or("the journal does not say which network namespace")?;
    for pid in all_pids() {
        let p = format!("/proc/{pid}/ns/net");
        if fs::read_link(&p).is_ok_and(|l| l.display().to_string() == id) {
            if let Ok(f) = fs::File::open(&p) {
                return Ok(f);
            }
        }
    }
    Err(format!(
        "no process is left in network namespace {id}: it is gone"
    ))
}

/// Runs `f` in the network namespace a journal entry was written in
/// (`/proc/sys/net` shows the namespace of the thread that opens it): on
/// this thread when it is ours, else on a thread that enters it.
pub fn in_netns<T: Send + 'static>(
    name: Option<&str>,
    id: Option<&str>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    if name.is_none() && (id.is_none() || id.map(str::to_string) == own_netns_id()) {
        return Ok(f());
    }
    let ns = netns_file(name, id)?;
    std::thread::spawn(move || {
        // SAFETY: setns on this (short-lived) thread only, with a valid fd.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(format!(
                "cannot enter the network namespace: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(f())
    })
    .join()
    .map_err(|_| "network-namespace thread panicked".to_string())?
}

/// Runs a command, returning its trimmed standard output, or why it failed.
pub fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {cmd}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "`{cmd} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether a command is on the PATH.
pub fn have_command(cmd: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            let f = d.join(cmd);
            f.is_file()
        })
    })
}

/// Whether systemd runs this host (its own test: sd_booted()).
pub fn systemd_running() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// Start time of a process in clock ticks since boot (field 22 of
/// /proc/PID/stat), `None` when it is gone.
pub fn start_ticks(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields
    // after it start behind the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Process group of a process, `None` when it is gone.
pub fn pgrp(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// Every process id now in /proc.
pub fn all_pids() -> Vec<i32> {
    fs::read_dir("/proc")
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The live processes of a group: members that are not zombies (a zombie
/// has exited and only waits for its parent to reap it).
pub fn live_members(pgid: i32) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter(|&pid| {
            let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let Some(close) = stat.rfind(')') else {
                return false;
            };
            let mut f = stat[close + 2..].split_whitespace();
            let state = f.next().unwrap_or("Z");
            let group = f.nth(1).and_then(|g| g.parse::<i32>().ok());
            group == Some(pgid) && state != "Z" && state != "X"
        })
        .collect()
}

/// How long the processes of a killed group may take to be gone.
const KILLED_GONE: std::time::Duration = std::time::Duration::from_secs(5);

/// Kills a process group benchlab started, if it is still that group, and
/// waits until its processes are gone — so that what is undone next (a
/// server's scratch directory) is no longer in use by them.
pub fn kill_group(pgid: i32, start: u64) -> Result<(), String> {
    let members: Vec<i32> = all_pids()
        .into_iter()
        .filter(|&p| pgrp(p) == Some(pgid))
        .collect();
    if members.is_empty() {
        return Ok(());
    }
    // While any member has the group id, the leader's pid cannot be
    // reused; if the leader is alive it must be the one we started.
    if let Some(t) = start_ticks(pgid) {
        if t != start && pgrp(pgid) == Some(pgid) {
            return Ok(());
        }
    }
    // SAFETY: plain kill(2) on a process group.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let until = std::time::Instant::now() + KILLED_GONE;
    loop {
        let live = live_members(pgid);
        if live.is_empty() {
            return Ok(());
        }
        if std::time::Instant::now() >= until {
            return Err(format!(
                "process group {pgid} still has live processes {live:?} {}s after SIGKILL",
                KILLED_GONE.as_secs()
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Moves tasks (thread ids) listed in `from` (a cgroup `tasks` file) to
/// `to`, one write each (the kernel takes one id per write). Returns the
/// ids that could not be moved, with why.
pub fn move_tasks(from: &str, to: &str) -> (Vec<i32>, Vec<(i32, String)>) {
    let list = fs::read_to_string(from).unwrap_or_default();
    let mut moved = Vec::new();
    let mut stuck = Vec::new();
    for tid in list
        .split_whitespace()
        .filter_map(|t| t.parse::<i32>().ok())
    {
        match fs::write(to, tid.to_string()) {
            Ok(()) => moved.push(tid),
            // A task that exited meanwhile is not stuck.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => stuck.push((tid, e.to_string())),
        }
    }
    (moved, stuck)
}

/// Undoes one journal entry. `Ok(note)` when done (note says what was
/// done), `Err` when it could not be.
pub fn undo(entry: &Entry) -> Result<String, String> {
    match &entry.change {
        Change::File { path, before } => {
            let (file, before) = (path.clone(), before.clone());
            let path = file.clone();
            // Already as it was (a change that never happened, or a file
            // that refuses writes of any value, like a managed IRQ's
            // affinity): nothing to write.
            let put_back = move || -> Result<String, String> {
                if read_value(&file).is_ok_and(|v| v == normalize(&before)) {
                    return Ok("already as it was".into());
                }
                write_value(&file, &before)?;
                Ok("restored".into())
            };
            if path.starts_with("/proc/sys/net/") {
                in_netns(entry.netns.as_deref(), entry.netns_id.as_deref(), put_back)?
            } else {
                if !Path::new(&path).exists() {
                    return Ok(format!("{path} no longer exists"));
                }
                put_back()
            }
        }
        Change::PoolPages { path, pages } => crate::pool::undo(path, *pages),
        Change::Service { name } => {
            run("systemctl", &["start", name])?;
            Ok(format!("started {name} again"))
        }
        Change::Tuned { before } => {
            match before {
                Some(p) => run("tuned-adm", &["profile", p])?,
                None => run("tuned-adm", &["off"])?,
            };
            Ok("tuned profile restored".into())
        }
        Change::Remount {
            target,
            restore_options,
        } => {
            run(
                "mount",
                &["-o", &format!("remount,{restore_options}"), target],
            )?;
            Ok(format!("remounted {target} with {restore_options}"))
        }
        Change::CgroupDir { path, parent_tasks } => {
            if !Path::new(path).exists() {
                return Ok("already removed".into());
            }
            // cgroup v1 lists a cgroup's threads in `tasks`; v2 (a guest's
            // unified hierarchy) has no such file and lists its processes
            // in `cgroup.procs`. Reading a missing `tasks` found nothing
            // to move, and the shield's processes kept v2's rmdir busy.
            let v1 = format!("{path}/tasks");
            let tasks = if Path::new(&v1).exists() {
                v1
            } else {
                format!("{path}/cgroup.procs")
            };
            // A few rounds: a task may fork while we move its siblings.
            for _ in 0..5 {
                let (_, stuck) = move_tasks(&tasks, parent_tasks);
                let left = fs::read_to_string(&tasks).unwrap_or_default();
                if left.trim().is_empty() {
                    break;
                }
                if !stuck.is_empty() {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
            // Killed processes stay members until they are reaped (by
            // their new parent): give that a moment.
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                match fs::remove_dir(path) {
                    Ok(()) => return Ok("removed".into()),
                    Err(e)
                        if e.raw_os_error() == Some(libc::EBUSY)
                            && std::time::Instant::now() < until =>
                    {
                        move_tasks(&tasks, parent_tasks);
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                    Err(e) => {
                        let left = fs::read_to_string(&tasks).unwrap_or_default();
                        return Err(format!(
                            "cannot remove cgroup {path}: {e} (tasks still in it: {})",
                            left.split_whitespace().collect::<Vec<_>>().join(" ")
                        ));
                    }
                }
            }
        }
        Change::TasksMoved { back_to, tids } => {
            let mut failed = 0;
            for tid in tids {
                // Only tasks still in one of benchlab's cpusets go back
                // (per-CPU kernel threads never left, and refuse a move).
                let now = fs::read_to_string(format!("/proc/{tid}/cpuset")).unwrap_or_default();
                if !now.trim().starts_with("/benchlab-") {
                    continue;
                }
                match fs::write(back_to, tid.to_string()) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(_) => failed += 1,
                }
            }
            if failed > 0 {
                Err(format!(
                    "{failed} task(s) could not be moved back to {back_to}"
                ))
            } else {
                Ok(format!("{} task(s) moved back", tids.len()))
            }
        }
        Change::ScratchDir { path } => {
            // A process that escaped its group from this directory's
            // environment (RabbitMQ's `epmd -daemon`) goes with it.
            kill_escaped(Path::new(path));
            match fs::remove_dir_all(path) {
                Ok(()) => Ok("removed".into()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok("already removed".into()),
                Err(e) => Err(format!("cannot remove {path}: {e}")),
            }
        }
        Change::ProcessGroup { pgid, start_ticks } => {
            kill_group(*pgid, *start_ticks)?;
            Ok(format!("process group {pgid} stopped"))
        }
    }
}

/// Kills processes that left a service's process group but carry its
/// scratch directory in their environment (used at a service's stop and
/// when its scratch directory is restored): RabbitMQ's boot and its epmd
/// monitor run a fresh `erl` that starts `epmd -daemon`, which detaches
/// into a session of its own, when the service's own epmd is gone (seen
/// when the group is stopped mid-boot). Only a process started from the
/// service's environment has a variable pointing into its scratch
/// directory, so nothing else is touched.
pub fn kill_escaped(scratch: &Path) {
    let needle = format!("={}/", scratch.display());
    let Ok(entries) = fs::read_dir("/proc") else {
        return;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(env) = fs::read(e.path().join("environ")) else {
            continue;
        };
        let ours = env
            .split(|&b| b == 0)
            .any(|v| v.windows(needle.len()).any(|w| w == needle.as_bytes()));
        if ours && pid != std::process::id() as i32 {
            // SAFETY: a plain kill(2) of a process started from the
            // service's environment.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}
