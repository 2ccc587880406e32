//! Environment control end to end: profiles applied and reverted, a crash
//! at any moment undone by `benchlab restore`, CPU shielding, background
//! load, skipped and required settings. These change real kernel settings
//! (sysctls, IRQ affinities, cpusets), so they need root; they put
//! everything back.
//!
//! The tests that change settings run alone (`testkit::alone()`): a
//! shield moves every task of the machine off a CPU (another test's
//! pinning to it fails meanwhile), the background load keeps a CPU busy,
//! and each compares machine-wide settings (sysctls, transparent huge
//! pages, an IRQ's affinity, cpusets) before and after, which no other
//! test may move meanwhile. The two that only read a study (a launcher
//! prefix, broken profile references) run beside the others.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use benchlab_testkit::Scratch;

fn cpuset_root() -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 3 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpuset"))
            .then(|| f[1].to_string())
    })
}

/// What this machine lacks for these tests, if anything: properties no
/// set-up can provide.
fn unsupported_here() -> Option<String> {
    if std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        < 2
    {
        return Some("needs 2 CPUs (one to shield)".into());
    }
    if cpuset_root().is_none() {
        return Some("needs a cgroup v1 cpuset hierarchy".into());
    }
    None
}

/// Returns from the test when it cannot run here: root (it changes
/// sysctls, IRQ affinity, cpusets; under CI its absence is a failure), two
/// CPUs and a cpuset hierarchy (reported as skipped).
macro_rules! need_env {
    () => {
        benchlab_testkit::require!(root);
        if let Some(why) = unsupported_here() {
            return benchlab_testkit::unsupported(why);
        }
    };
}

/// `benchlab --db SCRATCH ARGS…` with its own state directory (journal).
fn bl(sc: &Scratch, state: &str, args: &[&str]) -> Command {
    let mut c = sc.benchlab();
    c.args(args).env("BENCHLAB_STATE_DIR", state);
    c
}

/// Starting a run in the background, its output discarded.
trait SpawnQuiet {
    fn spawn_quiet(&mut self) -> std::process::Child;
}

impl SpawnQuiet for Command {
    fn spawn_quiet(&mut self) -> std::process::Child {
        self.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start benchlab")
    }
}

/// Everything a run may touch, as (what, value).
fn snapshot() -> BTreeMap<String, String> {
    let mut s = BTreeMap::new();
    for k in [
        "vm/swappiness",
        "vm/dirty_ratio",
        "net/core/netdev_max_backlog",
        "net/ipv4/tcp_rmem",
        "kernel/sched_rt_runtime_us",
    ] {
        let v = std::fs::read_to_string(format!("/proc/sys/{k}")).unwrap_or_default();
        s.insert(k.into(), v.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    s.insert(
        "thp".into(),
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default(),
    );
    s.insert(
        "irq default".into(),
        std::fs::read_to_string("/proc/irq/default_smp_affinity").unwrap_or_default(),
    );
    for e in std::fs::read_dir("/proc/irq").unwrap().flatten() {
        let p = e.path().join("smp_affinity_list");
        if let Ok(v) = std::fs::read_to_string(&p) {
            s.insert(format!("irq {}", e.file_name().to_string_lossy()), v);
        }
    }
    let root = cpuset_root().unwrap();
    for e in std::fs::read_dir(&root).unwrap().flatten() {
        if e.path().is_dir() {
            s.insert(
                format!("cpuset dir {}", e.file_name().to_string_lossy()),
                "exists".into(),
            );
        }
    }
    s
}

/// Pids of live processes started with this state directory (agents,
/// load workers and their children inherit the environment).
fn our_processes(state_dir: &str) -> Vec<i32> {
    let marker = format!("BENCHLAB_STATE_DIR={state_dir}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != std::process::id() as i32)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()))
                .unwrap_or(false)
        })
        .filter(|pid| {
            // Zombies are already dead; only their parent's wait is missing.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| {
                    !s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .unwrap_or(false)
        })
        .collect()
}

fn wait_gone(state_dir: &str) -> Vec<i32> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let left = our_processes(state_dir);
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `ready` every 10 ms until it holds, failing with `what` after 30 s.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// An IRQ whose affinity can be changed here, to name in a profile.
fn movable_irq() -> Option<String> {
    let text = std::fs::read_to_string("/proc/interrupts").ok()?;
    let ncpu = text.lines().next()?.split_whitespace().count();
    for l in text.lines().skip(1) {
        let (num, rest) = l.trim_start().split_once(':')?;
        let Ok(n) = num.trim().parse::<u32>() else {
            continue;
        };
        let name = rest
            .split_whitespace()
            .nth(ncpu + 2)
            .unwrap_or("")
            .to_string();
        if name.is_empty() || name.contains('*') {
            continue;
        }
        let p = format!("/proc/irq/{n}/smp_affinity_list");
        let Ok(cur) = std::fs::read_to_string(&p) else {
            continue;
        };
        let want = if cur.trim() == "0" { "1" } else { "0" };
        if std::fs::write(&p, want).is_ok() {
            let _ = std::fs::write(&p, cur.trim());
            return Some(name);
        }
    }
    None
}

/// A profile that changes real settings: sysctls (global and per network
/// namespace), transparent hugepages, an IRQ's affinity.
fn test_profile(irq: &str) -> String {
    let swappiness: i64 = std::fs::read_to_string("/proc/sys/vm/swappiness")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap();
    let thp_want = if thp.contains("[never]") {
        "madvise"
    } else {
        "never"
    };
    format!(
        r#"
[profile]
description = "journal test"
[sysctl]
"vm.swappiness" = {}
"vm.dirty_ratio" = 7
"net.core.netdev_max_backlog" = 4321
"net.ipv4.tcp_rmem" = "4096 65536 1048576"
"kernel.sched_rt_runtime_us" = 940000
[memory]
transparent_hugepages = "{thp_want}"
[[irq]]
match = "{irq}"
cpus = "1"
"#,
        if swappiness == 13 { 14 } else { 13 }
    )
}

/// A scratch directory, its state directory and the test profile, or
/// `None` (said why) when no IRQ here can be moved.
fn tuned_scratch() -> Option<(Scratch, String, std::path::PathBuf)> {
    let Some(irq) = movable_irq() else {
        benchlab_testkit::unsupported("no IRQ here accepts a new affinity");
        return None;
    };
    let sc = Scratch::new();
    let state = sc.path("state").display().to_string();
    let profile = sc.path("p.toml");
    std::fs::write(&profile, test_profile(&irq)).unwrap();
    Some((sc, state, profile))
}

fn study(profile_file: &str, extra: &str, sleep_s: f64, reps: u32) -> String {
    format!(
        r#"
[study]
name = "env-test"
[defaults]
repetitions = {reps}
quiesce_s = 0
warmup_s = 0
[[configuration]]
name = "tuned"
profile = "{profile_file}"
{extra}
[[configuration]]
name = "plain"
[[workload]]
kind = "fake"
sleep_s = {sleep_s}
"#
    )
}

fn restore(sc: &Scratch, state: &str) -> String {
    let out = benchlab_testkit::output_ok(&mut bl(sc, state, &["restore"]));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Issue 4: SIGKILL at 20 moments during apply and run; after `benchlab
/// restore`, every touched value equals the snapshot taken before.
#[test]
fn sigkill_at_any_moment_then_restore_puts_everything_back() {
    need_env!();
    let _alone = benchlab_testkit::alone();
    let Some((sc, state, profile)) = tuned_scratch() else {
        return;
    };
    let extra = "shield = \"1\"\nload = { workers = 2 }";
    let path = sc.study(
        "s.toml",
        &study(&profile.display().to_string(), extra, 0.3, 2),
    );
    let before = snapshot();
    // Kill moments spread over the apply (each step paused 40 ms) and
    // the points that run under the configuration.
    for i in 0..20u64 {
        let at = Duration::from_millis(100 + i * 75);
        let mut child = bl(&sc, &state, &["run", path.to_str().unwrap()])
            .env("BENCHLAB_TEST_STEP_DELAY_MS", "40")
            .spawn_quiet();
        std::thread::sleep(at);
        let _ = child.kill();
        let _ = child.wait();
        let left = wait_gone(&state);
        assert!(left.is_empty(), "kill {i}: processes left behind: {left:?}");
        // How far the run got: the journal's entries (0: killed before
        // the first change, or between configurations).
        let entries: usize = std::fs::read_dir(format!("{state}/journal"))
            .map(|d| {
                d.flatten()
                    .map(|e| {
                        std::fs::read_to_string(e.path())
                            .unwrap_or_default()
                            .lines()
                            .count()
                    })
                    .sum()
            })
            .unwrap_or(0);
        let restored = restore(&sc, &state);
        eprintln!(
            "kill {i} at {at:?}: {entries} journal entries, {} restore lines",
            restored.lines().count().saturating_sub(1)
        );
        let after = snapshot();
        for (k, v) in &before {
            assert_eq!(
                after.get(k),
                Some(v),
                "kill {i} at {at:?}: {k} differs after restore"
            );
        }
        assert_eq!(after.len(), before.len(), "kill {i}: {after:?}");
        let journals = std::fs::read_dir(format!("{state}/journal"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(journals, 0, "kill {i}: journals left after restore");
        let scratch = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("benchlab-load-")
            })
            .count();
        assert_eq!(scratch, 0, "kill {i}: load scratch directories left");
    }
}

/// A complete run reverts by itself, and `run` refuses to start while a
/// crashed run's journal is there.
#[test]
fn run_reverts_and_refuses_unrestored_journal() {
    need_env!();
    let _alone = benchlab_testkit::alone();
    let Some((sc, state, profile)) = tuned_scratch() else {
        return;
    };
    let path = sc.study("s.toml", &study(&profile.display().to_string(), "", 0.0, 1));
    let before = snapshot();
    let out = bl(&sc, &state, &["run", path.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("could not revert"), "{err}");
    // The engine's note reaches the user through the command line's
    // observer, once per configuration and host (sut and generator).
    assert_eq!(
        err.matches("benchlab: configuration `tuned` on ").count(),
        2,
        "{err}"
    );
    assert!(err.contains("setting(s) applied"), "{err}");
    assert_eq!(snapshot(), before);
    // The store keeps what was changed, with before and after values.
    let db = rusqlite::Connection::open(sc.db()).unwrap();
    let applied: Vec<(String, Option<String>, Option<String>)> = db
        .prepare("SELECT setting, before, after FROM setting_change WHERE phase = 'apply' AND status = 'applied'")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let names: Vec<&str> = applied.iter().map(|a| a.0.as_str()).collect();
    assert!(names.contains(&"sysctl vm.dirty_ratio"), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("IRQ ")), "{names:?}");
    let dirty = applied
        .iter()
        .find(|a| a.0 == "sysctl vm.dirty_ratio")
        .unwrap();
    assert_eq!(dirty.2.as_deref(), Some("7"));
    assert_eq!(dirty.1.as_deref(), Some(before["vm/dirty_ratio"].as_str()));

    // A crash: kill during the tuned configuration's point.
    let slow = sc.study(
        "slow.toml",
        &study(&profile.display().to_string(), "", 3.0, 1),
    );
    let mut child = bl(&sc, &state, &["run", slow.to_str().unwrap()]).spawn_quiet();
    // Wait until the profile is in force.
    wait_for("profile never applied", || {
        std::fs::read_to_string("/proc/sys/vm/dirty_ratio")
            .unwrap()
            .trim()
            == "7"
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(wait_gone(&state).is_empty());
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/dirty_ratio")
            .unwrap()
            .trim(),
        "7"
    );
    let out = bl(&sc, &state, &["run", path.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("unrestored journal") && err.contains("benchlab restore"),
        "{err}"
    );
    // --restore-first puts it back, then runs.
    benchlab_testkit::output_ok(&mut bl(
        &sc,
        &state,
        &["run", "--restore-first", path.to_str().unwrap()],
    ));
    assert_eq!(snapshot(), before);
}

/// Issue 4: during a shielded point a busy process never runs on the
/// shielded CPU; afterwards it may again.
#[test]
fn shielded_cpu_is_kept_free_of_other_tasks() {
    need_env!();
    let _alone = benchlab_testkit::alone();
    let sc = Scratch::new();
    let state = sc.path("state").display().to_string();
    let path = sc.study(
        "s.toml",
        r#"
[study]
name = "shield-test"
[defaults]
repetitions = 1
[[configuration]]
name = "shielded"
shield = "1"
server = { cpus = "1" }
client = { cpus = "1" }
[[workload]]
kind = "fake"
sleep_s = 4
"#,
    );
    let shield_dir = format!("{}/benchlab-shield", cpuset_root().unwrap());
    let mut run = bl(&sc, &state, &["run", path.to_str().unwrap()]).spawn_quiet();
    wait_for("the shield never came up", || {
        std::path::Path::new(&format!("{shield_dir}/tasks")).exists()
    });
    std::thread::sleep(Duration::from_millis(200));
    // A busy process started now, by a test process that the shield moved.
    let mut busy = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let pid = busy.id();
    let mut seen = BTreeMap::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1500) {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let cpu: usize = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .nth(36)
            .unwrap()
            .parse()
            .unwrap();
        *seen.entry(cpu).or_insert(0) += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let allowed = |pid: u32| -> String {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .find_map(|l| {
                l.strip_prefix("Cpus_allowed_list:")
                    .map(|v| v.trim().to_string())
            })
            .unwrap()
    };
    let during = allowed(pid);
    let shield_tasks = std::fs::read_to_string(format!("{shield_dir}/tasks")).unwrap_or_default();
    let status = run.wait().unwrap();
    let after = allowed(pid);
    let _ = busy.kill();
    let _ = busy.wait();
    assert!(status.success());
    assert_eq!(
        seen.get(&1),
        None,
        "the busy process ran on the shielded CPU: {seen:?}"
    );
    assert_eq!(during, "0");
    assert!(
        !shield_tasks.trim().is_empty(),
        "no benchmark side ran in the shield"
    );
    assert!(!shield_tasks
        .split_whitespace()
        .any(|t| t == pid.to_string()));
    assert_eq!(
        after, "0-1",
        "the busy process is not free to use CPU 1 again"
    );
    assert!(!std::path::Path::new(&shield_dir).exists());
    assert!(wait_gone(&state).is_empty());
}

fn cpu_busy_fraction(cpu: usize, over: Duration) -> f64 {
    let read = || -> (u64, u64) {
        let stat = std::fs::read_to_string("/proc/stat").unwrap();
        let line = stat
            .lines()
            .find(|l| l.starts_with(&format!("cpu{cpu} ")))
            .unwrap();
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().unwrap())
            .collect();
        let idle = v[3] + v[4];
        (idle, v.iter().sum())
    };
    let (i0, t0) = read();
    std::thread::sleep(over);
    let (i1, t1) = read();
    1.0 - (i1 - i0) as f64 / (t1 - t0).max(1) as f64
}

/// Issue 4: the background load is there during the point (its CPU busy)
/// and gone after it, with nothing left behind; its use is recorded.
#[test]
fn background_load_runs_during_points_only() {
    need_env!();
    let _alone = benchlab_testkit::alone();
    let sc = Scratch::new();
    let state = sc.path("state").display().to_string();
    let path = sc.study(
        "s.toml",
        r#"
[study]
name = "load-test"
[defaults]
repetitions = 2
quiesce_s = 1.5
[[configuration]]
name = "loaded"
load = { workers = 2, cpus = "0" }
server = { cpus = "1" }
client = { cpus = "1" }
[[workload]]
kind = "fake"
sleep_s = 2
"#,
    );
    let mut run = bl(&sc, &state, &["run", path.to_str().unwrap()]).spawn_quiet();
    let workers = |state: &str| -> usize {
        our_processes(state)
            .iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).contains("__load-worker"))
                    .unwrap_or(false)
            })
            .count()
    };
    wait_for("the load never started", || workers(&state) >= 2);
    let busy = cpu_busy_fraction(0, Duration::from_millis(800));
    // Between the two points (quiesce 1.5 s) the load is stopped.
    wait_for("the load did not stop after the point", || {
        workers(&state) == 0
    });
    let status = run.wait().unwrap();
    assert!(status.success());
    assert!(
        busy > 0.8,
        "CPU 0 was only {:.0}% busy under 2 load workers",
        busy * 100.0
    );
    assert!(wait_gone(&state).is_empty(), "processes left after the run");
    let db = rusqlite::Connection::open(sc.db()).unwrap();
    let metrics: Vec<String> = db
        .prepare("SELECT metrics_json FROM sample")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(metrics.len(), 2);
    for m in metrics {
        let v: serde_json::Value = serde_json::from_str(&m).unwrap();
        let pct = v["background_load_cpu_pct"].as_f64().unwrap();
        // Two workers pinned to one CPU use at most that CPU (how much of
        // it depends on what else shares the machine, so only "some").
        assert!(pct > 1.0 && pct < 105.0, "load used {pct}% of a CPU");
    }
}

/// Issue 4: an unsupported setting is skipped with its reason; marked
/// required, it fails the configuration before anything changes.
#[test]
fn unsupported_is_skipped_required_fails_before_any_change() {
    need_env!();
    let _alone = benchlab_testkit::alone();
    if std::path::Path::new("/sys/devices/system/cpu/cpu0/cpufreq").exists() {
        return benchlab_testkit::unsupported(
            "this host has cpufreq, so a governor is not unsupported here",
        );
    }
    let sc = Scratch::new();
    let state = sc.path("state").display().to_string();
    let body = "[sysctl]\n\"vm.dirty_ratio\" = 7\n[cpu]\ngovernor = \"performance\"\n";
    let soft = sc.path("soft.toml");
    std::fs::write(&soft, format!("[profile]\ndescription = \"x\"\n{body}")).unwrap();
    let hard = sc.path("hard.toml");
    std::fs::write(
        &hard,
        format!("[profile]\nrequired = [\"cpu.governor\"]\n{body}"),
    )
    .unwrap();
    let before = snapshot();

    let p = sc.study(
        "soft-study.toml",
        &study(&soft.display().to_string(), "", 0.0, 1),
    );
    benchlab_testkit::output_ok(&mut bl(&sc, &state, &["run", p.to_str().unwrap()]));
    let db = rusqlite::Connection::open(sc.db()).unwrap();
    let (status, note): (String, String) = db
        .query_row(
            "SELECT status, note FROM setting_change WHERE setting = 'cpu governor'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(status, "skipped");
    assert!(note.contains("cpufreq"), "{note}");
    drop(db);
    std::fs::remove_file(sc.db()).unwrap();

    let p = sc.study(
        "hard-study.toml",
        &study(&hard.display().to_string(), "", 0.0, 1),
    );
    let out = bl(&sc, &state, &["run", p.to_str().unwrap()])
        .output()
        .unwrap();
    // The point of the tuned configuration failed; the other ran.
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = rusqlite::Connection::open(sc.db()).unwrap();
    let reason: String = db
        .query_row(
            "SELECT reason FROM sample WHERE status = 'failed'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        reason.contains("required")
            && reason.contains("cpu governor")
            && reason.contains("nothing was changed"),
        "{reason}"
    );
    let applied: i64 = db
        .query_row(
            "SELECT count(*) FROM setting_change WHERE status = 'applied'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(applied, 0);
    assert_eq!(snapshot(), before);
}

/// Issue 4: a launcher prefix wraps each side's agent (seed 002's
/// `onload --profile=latency`), here a script that logs what it starts.
#[test]
fn launcher_prefix_wraps_the_sides_agents() {
    let sc = Scratch::new();
    let log = sc.path("launched.log");
    let script = sc.path("launch.sh");
    std::fs::write(
        &script,
        format!(
            // Like onload: its own --options, then the command it wraps.
            "#!/bin/sh\necho \"$0 $*\" >> '{}'\nwhile [ \"${{1#--}}\" != \"$1\" ]; do shift; done\nexec \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = sc.study(
        "s.toml",
        &format!(
            r#"
[study]
name = "launcher-test"
[defaults]
repetitions = 1
[[configuration]]
name = "plain"
[[configuration]]
name = "launched"
client = {{ launcher = ["{}", "--profile=latency"] }}
[[workload]]
kind = "fake"
"#,
            script.display()
        ),
    );
    sc.run_ok(&["run", path.to_str().unwrap()]);
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let lines: Vec<&str> = logged.lines().collect();
    // Exactly the client agent of the `launched` configuration.
    assert_eq!(lines.len(), 1, "{logged}");
    assert!(
        lines[0].contains("--profile=latency") && lines[0].ends_with("agent --stdio"),
        "{logged}"
    );
    assert!(
        lines[0].contains(env!("CARGO_BIN_EXE_benchlab")),
        "{logged}"
    );
}

/// A profile's remount (seed 001's `mount -o remount,barrier=0 /test`) is
/// in force during the configuration and undone afterwards.
#[test]
fn remount_options_are_applied_and_undone() {
    need_env!();
    let _alone = benchlab_testkit::alone();
    benchlab_testkit::require!("mkfs.ext4");
    let sc = Scratch::new();
    let state = sc.path("state").display().to_string();
    let img = sc.path("fs.img");
    let mnt = sc.path("mnt");
    std::fs::create_dir(&mnt).unwrap();
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
    ok(Command::new("mkfs.ext4").arg("-q").arg(&img));
    ok(Command::new("mount")
        .arg("-o")
        .arg("loop")
        .arg(&img)
        .arg(&mnt));
    let opts = || -> String {
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .find(|l| l.split_whitespace().nth(4) == Some(mnt.to_str().unwrap()))
            .unwrap_or("")
            .to_string()
    };
    let before = opts();
    let profile = sc.path("p.toml");
    std::fs::write(
        &profile,
        format!(
            "[[remount]]\ntarget = \"{}\"\noptions = \"barrier=0\"\n",
            mnt.display()
        ),
    )
    .unwrap();
    let path = sc.study("s.toml", &study(&profile.display().to_string(), "", 2.0, 1));
    let mut run = bl(&sc, &state, &["run", path.to_str().unwrap()]).spawn_quiet();
    let until = Instant::now() + Duration::from_secs(30);
    while !opts().contains("nobarrier") {
        assert!(
            Instant::now() < until,
            "the remount never happened: {}",
            opts()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = run.wait().unwrap();
    let after = opts();
    ok(Command::new("umount").arg("-d").arg(&mnt));
    assert!(status.success());
    assert_eq!(after, before);
}

/// A broken profile reference names the study file, the key and what is
/// allowed, before anything runs (no root needed).
#[test]
fn broken_profile_references_are_refused_with_file_and_key() {
    let sc = Scratch::new();
    let cases = [
        (
            "profile = \"no-such-profile\"",
            "key `configuration[0].profile`",
            "shipped: \"throughput-performance\"",
        ),
        (
            "profile = { nosuch = \"latency-performance\" }",
            "key `configuration[0].profile.nosuch`",
            "allowed: \"fake\", or \"default\"",
        ),
        (
            "profile = 3",
            "key `configuration[0].profile`",
            "allowed: a profile name or file",
        ),
        (
            "shield = \"1-x\"",
            "key `configuration[0].shield`",
            "is not a CPU list",
        ),
        (
            "server = { priority = 5 }",
            "key `configuration[0].server.priority`",
            "sched = \"fifo\" or \"rr\"",
        ),
    ];
    for (line, key, allowed) in cases {
        let path = sc.study(
            "bad.toml",
            &format!("[study]\nname = \"bad\"\n[[configuration]]\nname = \"x\"\n{line}\n[[workload]]\nkind = \"fake\"\n"),
        );
        let out = sc.run(&["check", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{line}");
        assert!(
            err.contains("bad.toml") && err.contains(key) && err.contains(allowed),
            "{line}: {err}"
        );
    }
    // A broken profile file names the profile file and its key.
    let prof = sc.path("p.toml");
    std::fs::write(&prof, "[cpu]\ngovernour = \"performance\"\n").unwrap();
    let path = sc.study(
        "bad.toml",
        &format!("[study]\nname = \"bad\"\n[[configuration]]\nname = \"x\"\nprofile = \"{}\"\n[[workload]]\nkind = \"fake\"\n", prof.display()),
    );
    let out = sc.run(&["check", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("p.toml") && err.contains("governour") && err.contains("governor"),
        "{err}"
    );
}

/// `benchlab profile apply` changes the host until `profile revert`.
#[test]
fn profile_apply_then_revert() {
    need_env!();
    let _alone = benchlab_testkit::alone();
    let sc = Scratch::new();
    let state = sc.path("state").display().to_string();
    let prof = sc.path("p.toml");
    std::fs::write(
        &prof,
        "[sysctl]\n\"vm.dirty_ratio\" = 9\n[cpu]\ngovernor = \"performance\"\n",
    )
    .unwrap();
    let before = snapshot();
    let run = |args: &[&str]| {
        let out = benchlab_testkit::output_ok(&mut bl(&sc, &state, args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let diff = run(&["profile", "diff", prof.to_str().unwrap()]);
    assert!(diff.contains("differs   sysctl vm.dirty_ratio"), "{diff}");
    let applied = run(&["profile", "apply", prof.to_str().unwrap()]);
    assert!(
        applied.contains("applied       sysctl vm.dirty_ratio"),
        "{applied}"
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/dirty_ratio")
            .unwrap()
            .trim(),
        "9"
    );
    let diff = run(&["profile", "diff", prof.to_str().unwrap()]);
    assert!(
        diff.contains("same      sysctl vm.dirty_ratio: 9"),
        "{diff}"
    );
    let reverted = run(&["profile", "revert"]);
    assert!(reverted.contains("reverted"), "{reverted}");
    assert_eq!(snapshot(), before);
    let again = run(&["profile", "revert"]);
    assert!(again.contains("nothing to restore"), "{again}");
}

/// Issue 41 item 4: two runs on one host at once — a local run, and a
/// run whose host is `benchlab agent --listen` on this host — share the
/// host's journal directory (both use the host's state directory, as on
/// a lab machine). The second run's preflight used to refuse over the
/// first's journal ("an earlier run left settings changed"). Now a
/// journal whose run holds its lock is named and left alone: both runs
/// complete, each applies and puts back its own settings, and every
/// setting is back after both.
#[test]
fn a_local_run_and_an_agents_run_share_the_host() {
    need_env!();
    let _alone = benchlab_testkit::alone();
    let sc = Scratch::new();
    let host_state = sc.path("host-state").display().to_string();
    let before = snapshot();
    let dirty = std::fs::read_to_string("/proc/sys/vm/dirty_ratio").unwrap();
    let swappiness = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let swap_want = if swappiness.trim() == "13" { 14 } else { 13 };
    let local_profile = sc.path("local-profile.toml");
    std::fs::write(
        &local_profile,
        "[profile]\ndescription = \"the local run's\"\n[sysctl]\n\"vm.dirty_ratio\" = 7\n",
    )
    .unwrap();
    let agent_profile = sc.path("agent-profile.toml");
    std::fs::write(
        &agent_profile,
        format!("[profile]\ndescription = \"the agent run's\"\n[sysctl]\n\"vm.swappiness\" = {swap_want}\n"),
    )
    .unwrap();
    // The local run: its tuned configuration lasts long enough for the
    // agent's run to start, apply, measure and put back inside it.
    let local = sc.study(
        "local.toml",
        &study(&local_profile.display().to_string(), "", 12.0, 1),
    );
    let mut first = bl(&sc, &host_state, &["run", local.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string("/proc/sys/vm/dirty_ratio")
        .unwrap()
        .trim()
        != "7"
    {
        if first.try_wait().unwrap().is_some() || Instant::now() > until {
            let _ = first.kill();
            let out = first.wait_with_output().unwrap();
            panic!(
                "the local run's profile never applied: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }

    // The agent, in the host's state directory too.
    let key = sc.path("lab.key");
    std::fs::write(&key, "a lab key of more than sixteen bytes\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let benchlab_testkit::ListeningAgent {
        child: mut agent,
        addr,
        stderr: _agent_err,
    } = benchlab_testkit::listening_agent(&key, Some(std::path::Path::new(&host_state)));
    let remote = sc.study(
        "remote.toml",
        &format!(
            "[study]\nname = \"through-agent\"\n[defaults]\nrepetitions = 1\nquiesce_s = 0\nwarmup_s = 0\n\
             [[host]]\nname = \"sut\"\nagent = \"{addr}\"\nkey_file = \"{k}\"\n\
             [[host]]\nname = \"generator\"\nagent = \"{addr}\"\nkey_file = \"{k}\"\n\
             [[configuration]]\nname = \"tuned\"\nprofile = \"{}\"\n\
             [[configuration]]\nname = \"plain\"\n\
             [[workload]]\nkind = \"fake\"\nsleep_s = 0.5\n",
            agent_profile.display(),
            k = key.display(),
        ),
    );
    // The controller of that run: elsewhere (its own state directory and
    // store).
    let second = Command::new(env!("CARGO_BIN_EXE_benchlab"))
        .arg("--db")
        .arg(sc.path("other.db"))
        .arg("run")
        .arg(&remote)
        .env("BENCHLAB_STATE_DIR", sc.path("controller-state"))
        .output()
        .unwrap();
    let second_err = String::from_utf8_lossy(&second.stderr).to_string();
    assert!(
        first.try_wait().unwrap().is_none(),
        "the local run ended before the agent's run did: the runs did not overlap"
    );
    assert!(second.status.success(), "the agent's run: {second_err}");
    assert!(
        second_err.contains("another run is in progress on this host")
            && second_err.contains(&format!("{host_state}/journal/")),
        "{second_err}"
    );
    let out = first.wait_with_output().unwrap();
    let first_err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the local run: {first_err}");
    let _ = agent.kill();
    let _ = agent.wait();
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/dirty_ratio").unwrap(),
        dirty
    );
    assert_eq!(snapshot(), before);
    assert!(
        benchlab_env::journal::pending(std::path::Path::new(&format!("{host_state}/journal")))
            .is_empty()
    );
}
