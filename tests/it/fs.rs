//! `fs.matrix` through the whole binary: ext4 and XFS made on loop-backed
//! image files, a full file system, the cgroup form of out-of-cache, a
//! refused target, and an interrupted run — each checked for leftovers
//! (mounts, loop devices, cgroups, files). Loop devices, mounts and
//! cgroups need root: without it these tests say so and pass.
//!
//! Each holds the mounts (`exclusive(&[Mounts])`): they make loop devices
//! and fs.matrix's cgroups, which the fault suite's checks count; their
//! own checks look only for what names their scratch directory.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use benchlab_testkit::{exclusive, Resource, Scratch};

/// Returns from the test when it cannot run here: loop devices, mounts
/// and cgroups need root, and the images need the given tools. Under CI
/// that is a failure naming what is missing.
macro_rules! require_root_and {
    ($($tool:expr),*) => {
        benchlab_testkit::require!(root $(, $tool)*);
    };
}

/// Runs benchlab with TMPDIR inside the scratch directory, so the mount
/// points it makes are recognizably this test's.
fn benchlab(s: &Scratch, args: &[&str]) -> std::process::Output {
    let tmp = s.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    s.benchlab()
        .env("TMPDIR", &tmp)
        .args(args)
        .output()
        .expect("run benchlab")
}

/// Nothing of this test is left: no mount under its directory, no loop
/// device on its images, no image, no mount point.
fn assert_nothing_left(s: &Scratch) {
    let dir = s.dir.path().display().to_string();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    assert!(
        !mounts.contains(&dir),
        "a mount is left under {dir}:\n{mounts}"
    );
    let loops = Command::new("losetup").arg("-a").output().unwrap();
    let loops = String::from_utf8_lossy(&loops.stdout);
    assert!(!loops.contains(&dir), "a loop device is left: {loops}");
    let left: Vec<String> = std::fs::read_dir(s.path("tmp"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "mount points left: {left:?}");
    for e in std::fs::read_dir(s.dir.path()).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        assert!(!name.ends_with(".img"), "image {name} is left");
    }
}

fn metric(j: &serde_json::Value, workload: &str, label_part: &str, m: &str) -> Vec<f64> {
    j["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["workload"] == workload && p["label"].as_str().unwrap().contains(label_part))
        .flat_map(|p| {
            p["metrics"][m]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|v| v.as_f64())
        })
        .collect()
}

#[test]
fn ext4_and_xfs_images_are_made_measured_and_removed() {
    require_root_and!("mkfs.ext4", "mkfs.xfs", "losetup");
    let _mounts = exclusive(&[Resource::Mounts]);
    let s = Scratch::new();
    let img = s.path("scratch.img");
    let study = s.study(
        "fs.toml",
        &format!(
            r#"
[study]
name = "fs-images"
[defaults]
repetitions = 1
quiesce_s = 0
[[configuration]]
name = "ext4"
set = {{ mkfs = "ext4" }}
[[configuration]]
name = "xfs"
set = {{ mkfs = "xfs" }}
[[workload]]
kind = "fs.matrix"
file_size = "1MiB..2MiB"
record_size = ["64KiB", "1MiB"]
cache = ["in-cache", "direct"]
target = "{}"
image_size = "320MiB"
"#,
            img.display()
        ),
    );
    let out = benchlab(&s, &["run", study.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = s.json("1");
    // 2 files × 2 records × 2 cache modes × 2 file systems, all measured.
    let g = metric(&j, "fs.matrix", "", "geomean_kib_s");
    assert_eq!(g.len(), 16, "{text}");
    assert!(g.iter().all(|&x| x > 0.0));
    // Every cell read its data back and checked it.
    let v = metric(&j, "fs.matrix", "", "verified_records");
    assert_eq!(v.len(), 16);
    assert!(v.iter().all(|&n| n >= 1.0));
    // The direct cells say the stdio patterns stayed buffered.
    assert_eq!(
        metric(&j, "fs.matrix", "cache=direct", "stdio_buffered").len(),
        8
    );
    // `show` prints the matrices and the summary.
    let show = s.run_ok(&["show", "1"]);
    for want in [
        "Writer report",
        "Re-Fread report",
        "Mean over the patterns (KiB/s)",
        "geometric mean over the cells of each matrix",
        "Geometric mean over the patterns (KiB/s)",
        "Geometric mean over the cells of each cell's mean over the patterns",
        "stdio never uses O_DIRECT",
    ] {
        assert!(show.contains(want), "`{want}` missing from:\n{show}");
    }
    assert_nothing_left(&s);
}

#[test]
fn a_full_file_system_fails_the_cell_clearly_and_is_removed() {
    require_root_and!("mkfs.ext4", "losetup");
    let _mounts = exclusive(&[Resource::Mounts]);
    let s = Scratch::new();
    let img = s.path("small.img");
    let study = s.study(
        "full.toml",
        &format!(
            r#"
[study]
name = "fs-full"
[defaults]
repetitions = 1
quiesce_s = 0
[[workload]]
kind = "fs.matrix"
file_size = ["1MiB", "64MiB"]
record_size = "1MiB"
patterns = "write,read"
mkfs = "ext4"
target = "{}"
image_size = "16MiB"
"#,
            img.display()
        ),
    );
    let out = benchlab(&s, &["run", study.to_str().unwrap()]);
    // The study goes on and reports the failed point (exit status 3).
    assert_eq!(out.status.code(), Some(3), "{:?}", out);
    let j = s.json("1");
    let failures = j["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    let reason = failures[0]["reason"].as_str().unwrap();
    assert_eq!(failures[0]["status"], "failed");
    assert!(
        reason.contains("file system is full") && reason.contains("No space left"),
        "{reason}"
    );
    // The 1 MiB cell fitted and was measured.
    assert_eq!(metric(&j, "fs.matrix", "", "write_kib_s").len(), 1);
    assert_nothing_left(&s);
}

#[test]
fn cgroup_out_of_cache_keeps_the_page_cache_under_the_limit() {
    require_root_and!();
    let _mounts = exclusive(&[Resource::Mounts]);
    if !Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists()
        && !Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
    {
        return benchlab_testkit::unsupported("no memory cgroup controller");
    }
    let s = Scratch::new();
    let dir = s.path("data");
    std::fs::create_dir(&dir).unwrap();
    let limit: u64 = 32 << 20;
    let study = s.study(
        "ooc.toml",
        &format!(
            r#"
[study]
name = "fs-ooc"
[defaults]
repetitions = 1
quiesce_s = 0
[[workload]]
kind = "fs.matrix"
file_size = "256MiB"
record_size = "1MiB"
patterns = "write,read,reread"
cache = "out-of-cache"
cgroup_limit = {limit}
target = "{}"
"#,
            dir.display()
        ),
    );
    let out = benchlab(&s, &["run", study.to_str().unwrap()]);
    assert!(out.status.success(), "{:?}", out);
    let j = s.json("1");
    let version = metric(&j, "fs.matrix", "", "cgroup_version");
    if version.is_empty() {
        panic!("no cgroup form recorded: {}", s.run_ok(&["show", "1"]));
    }
    let peak = metric(&j, "fs.matrix", "", "cgroup_peak_bytes")[0] as u64;
    let file = 256u64 << 20;
    assert!(file >= 8 * limit);
    // The file's pages went through the cgroup (it filled up to its
    // limit) but never beyond it, with a file 8 times larger.
    assert!(peak <= limit, "peak {peak} > limit {limit}");
    assert!(peak >= limit / 2, "page cache was not charged: peak {peak}");
    assert!(s.run_ok(&["show", "1"]).contains("cgroup-v"));
    // No benchlab cgroup is left.
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    if let Some(path) = own
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|x| x.1.to_string()))
    {
        let home = Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/'));
        let agent_groups: Vec<_> = std::fs::read_dir(&home)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("benchlab-fs."))
            .collect();
        // Other tests may run at the same time; only dead agents' groups
        // would be leftovers, and those carry pids that no longer exist.
        for g in agent_groups {
            let pid = g.split('.').nth(1).unwrap();
            assert!(
                Path::new("/proc").join(pid).exists(),
                "cgroup {g} left behind"
            );
        }
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn a_target_holding_benchlabs_name_is_refused_and_unchanged() {
    let s = Scratch::new();
    let dir = s.path("data");
    std::fs::create_dir(&dir).unwrap();
    let theirs = dir.join("benchlab-fs.work");
    std::fs::write(&theirs, b"someone else's file").unwrap();
    let study = s.study(
        "taken.toml",
        &format!(
            r#"
[study]
name = "fs-taken"
[defaults]
repetitions = 1
quiesce_s = 0
[[workload]]
kind = "fs.matrix"
file_size = "1MiB"
record_size = "64KiB"
target = "{}"
"#,
            dir.display()
        ),
    );
    let out = benchlab(&s, &["run", study.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{:?}", out);
    let j = s.json("1");
    let reason = j["failures"][0]["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("refuses"), "{reason}");
    assert_eq!(std::fs::read(&theirs).unwrap(), b"someone else's file");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
}

#[test]
fn an_interrupted_run_leaves_no_mount_or_loop_device() {
    require_root_and!("mkfs.ext4", "losetup");
    let _mounts = exclusive(&[Resource::Mounts]);
    let s = Scratch::new();
    let img = s.path("int.img");
    // Direct I/O with small records: slow enough to be caught mid-cell.
    let study = s.study(
        "int.toml",
        &format!(
            r#"
[study]
name = "fs-interrupt"
[defaults]
repetitions = 5
quiesce_s = 0
[[workload]]
kind = "fs.matrix"
file_size = "256MiB"
record_size = "4KiB"
cache = "direct"
patterns = "write,random-read,random-write"
mkfs = "ext4"
target = "{}"
image_size = "512MiB"
"#,
            img.display()
        ),
    );
    let tmp = s.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut child = s
        .benchlab()
        .env("TMPDIR", &tmp)
        .args(["run", study.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let dir = s.dir.path().display().to_string();
    let mounted = || {
        std::fs::read_to_string("/proc/mounts")
            .unwrap()
            .contains(&dir)
    };
    let t0 = Instant::now();
    while !mounted() && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(mounted(), "the scratch file system was never mounted");
    // Ctrl-C: the controller kills the agent outright (SIGKILL), so the
    // agent's own cleanup cannot run; its janitor must.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let t0 = Instant::now();
    loop {
        let loops = Command::new("losetup").arg("-a").output().unwrap();
        let busy = mounted() || String::from_utf8_lossy(&loops.stdout).contains(&dir);
        if !busy && !img.exists() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "still mounted or attached 30 s after the interrupt"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_nothing_left(&s);
}
