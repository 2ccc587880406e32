//! Issue 27: the system monitors every host records during every
//! repetition, checked against what the test knows independently: a CPU
//! kept busy by a pinned background load (against `/proc/stat` read by the
//! test), a TCP transfer between two network namespaces (against the bytes
//! the sender counted), a direct write to a loop device the test makes
//! (against the bytes written). They need root (the load, the test bed, the
//! loop device); without it they fail under CI and are reported as skipped
//! elsewhere. The report reads them back: a planted load is named where
//! the configurations differ, and the JSON carries each point's summary.
//!
//! The two CPU tests run alone (`testkit::alone()`): they read
//! machine-wide CPU time and plant a load on CPU 1, so another test's
//! work beside them shows on both CPUs (a CI run with twelve test threads
//! saw both at 100 %). The others hold `Timing` (one measurement against
//! ground truth at a time), the disk test also the mounts (a loop
//! device).

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use benchlab_monitor::{Series, Summary};
use benchlab_testkit::{exclusive, Bed, Resource, Scratch};

/// Every host's monitors of the run in `db`: (host, summary, samples).
fn monitors(db: &std::path::Path) -> Vec<(String, Summary, Series)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut q = conn
        .prepare("SELECT host, summary_json, series_json FROM monitor ORDER BY point_id, repetition, host")
        .unwrap();
    q.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
        ))
    })
    .unwrap()
    .map(|r| {
        let (host, summary, series) = r.unwrap();
        (
            host,
            serde_json::from_str(&summary).unwrap(),
            serde_json::from_str(&series).unwrap(),
        )
    })
    .collect()
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Per CPU (busy ticks, all ticks) from `/proc/stat`, read by the test's
/// own few lines (busy: all but idle and iowait).
fn proc_stat() -> Vec<(u64, u64)> {
    std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .take(8)
                .map(|x| x.parse().unwrap())
                .collect();
            let all: u64 = v.iter().sum();
            (all - v[3] - v[4], all)
        })
        .collect()
}

/// Issue 27, done-when: a CPU-bound load pinned to CPU 1 shows as CPU 1
/// busy in the monitors, and every CPU's busy share agrees with
/// `/proc/stat` read by the test over the same window within 5
/// percentage points.
/// Whether this machine has the two CPUs a planted-load test needs (one
/// loaded, one quiet).
fn two_cpus() -> bool {
    std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2
}

#[test]
fn monitors_show_a_pinned_load_as_proc_stat_does() {
    benchlab_testkit::require!(root);
    if !two_cpus() {
        return benchlab_testkit::unsupported("needs 2 CPUs (one loaded, one not)");
    }
    let _alone = benchlab_testkit::alone();
    let s = Scratch::new();
    let study = s.study(
        "cpu.toml",
        r#"
[study]
name = "monitors-cpu"
[defaults]
repetitions = 1
quiesce_s = 0
[monitors]
interval = 0.25
[[configuration]]
name = "load-on-1"
load = { kind = "command", command = ":", workers = 1, cpus = "1" }
[[workload]]
kind = "fake"
sleep_s = 4
"#,
    );
    // The test's own record of /proc/stat, every 20 ms, with the time.
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let reader = std::thread::spawn(move || {
        let mut snaps = Vec::new();
        while !flag.load(Ordering::Relaxed) {
            snaps.push((unix_ms(), proc_stat()));
            std::thread::sleep(Duration::from_millis(20));
        }
        snaps
    });
    s.run_ok(&["run", study.to_str().unwrap()]);
    stop.store(true, Ordering::Relaxed);
    let snaps = reader.join().unwrap();

    let m = monitors(&s.db());
    // `sut` and `generator` are both this machine: one monitor for both.
    let hosts: Vec<&str> = m.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(
        hosts,
        ["sut"],
        "one monitor per machine view and repetition"
    );
    let (_, summary, series) = &m[0];
    assert!(summary.elapsed_s >= 4.0, "window {} s", summary.elapsed_s);
    // Samples every 0.25 s over at least 4 s.
    assert!(series.rows() >= 16, "{} samples", series.rows());
    assert_eq!(
        summary,
        &series.summary(),
        "the stored summary is the samples'"
    );

    let first = series.start_unix_ms + series.t_ms[0];
    let last = series.start_unix_ms + series.t_ms[series.rows() - 1];
    let nearest = |t: u64| {
        &snaps
            .iter()
            .min_by_key(|(at, _)| at.abs_diff(t))
            .expect("the test read /proc/stat")
            .1
    };
    let (a, b) = (nearest(first), nearest(last));
    for cpu in 0..2 {
        let busy = (b[cpu].0 - a[cpu].0) as f64;
        let all = (b[cpu].1 - a[cpu].1) as f64;
        let independent = 100.0 * busy / all;
        let monitored = summary.cpus[cpu].busy_pct;
        eprintln!("CPU {cpu}: monitors {monitored:.1} % busy, /proc/stat {independent:.1} %");
        assert!(
            (monitored - independent).abs() <= 5.0,
            "CPU {cpu}: the monitors say {monitored:.1} % busy, /proc/stat {independent:.1} %"
        );
    }
    let loaded = &summary.cpus[1];
    assert!(
        loaded.busy_pct >= 90.0,
        "CPU 1 under the pinned load was only {:.1} % busy",
        loaded.busy_pct
    );
    assert!(loaded.user_pct >= 80.0, "the load is user time: {loaded:?}");
}

/// Issue 27, done-when: the receiving host's interface counted the bytes
/// the sending side sent over a TCP stream between two network
/// namespaces, and its headers (at most 6 % more on 1500-byte frames).
#[test]
fn nic_counters_match_a_known_transfer() {
    benchlab_testkit::require!(root, "ip");
    let _g = exclusive(&[Resource::Timing]);
    let s = Scratch::new();
    let bed = Bed::up(
        &s,
        &format!("m{}", std::process::id() % 100_000),
        "topology = \"direct\"\nsubnet = \"10.244.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\n[[testbed.host]]\nname = \"gen\"\n",
    );
    let bed = &bed.name;
    let study = s.study(
        "nic.toml",
        &format!(
            "[study]\nname = \"monitors-nic\"\n[defaults]\nrepetitions = 1\nduration_s = 1\nwarmup_s = 0\nquiesce_s = 0\n\
             [[host]]\nname = \"sut\"\nnetns = \"bl-{bed}-sut\"\naddress = \"10.244.0.1\"\n\
             [[host]]\nname = \"generator\"\nnetns = \"bl-{bed}-gen\"\naddress = \"10.244.0.2\"\n\
             [[workload]]\nkind = \"net.stream\"\nprotocol = \"tcp\"\n"
        ),
    );
    s.run_ok(&["run", study.to_str().unwrap()]);
    let conn = rusqlite::Connection::open(s.db()).unwrap();
    let metrics: String = conn
        .query_row("SELECT metrics_json FROM sample", [], |r| r.get(0))
        .unwrap();
    let metrics: serde_json::Value = serde_json::from_str(&metrics).unwrap();
    let sent = metrics["bytes_sent"].as_f64().unwrap() as u64;
    assert!(
        sent > 1_000_000,
        "a transfer of {sent} bytes is too small to check"
    );

    let m = monitors(&s.db());
    let hosts: Vec<&str> = m.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(hosts, ["generator", "sut"]);
    let nic = |host: usize| {
        m[host]
            .1
            .nics
            .iter()
            .filter(|(name, _)| name.as_str() != "lo")
            .max_by_key(|(_, n)| n.rx_bytes + n.tx_bytes)
            .map(|(name, n)| (name.clone(), n.clone()))
            .expect("the data interface moved packets")
    };
    let (gen_if, gen) = nic(0);
    let (sut_if, sut) = nic(1);
    eprintln!(
        "sent {sent} B; {sut_if} on sut received {} B in {} packets; {gen_if} on the generator sent {} B",
        sut.rx_bytes, sut.rx_packets, gen.tx_bytes
    );
    for (what, bytes) in [
        ("sut received", sut.rx_bytes),
        ("generator sent", gen.tx_bytes),
    ] {
        assert!(
            bytes >= sent && (bytes as f64) <= sent as f64 * 1.06 + 65536.0,
            "{what} {bytes} bytes on its interface for {sent} bytes of payload"
        );
    }
    // The sender's interface sent what the receiver's received.
    assert_eq!(gen.tx_bytes, sut.rx_bytes);
}

/// Issue 27, done-when: a direct write of a known size to a loop device
/// the test makes shows as that many bytes written to it, in requests
/// the monitor counts.
#[test]
fn disk_counters_match_a_known_write() {
    benchlab_testkit::require!(root, "losetup", "dd");
    let _g = exclusive(&[Resource::Mounts, Resource::Timing]);
    let s = Scratch::new();
    let image = s.path("disk.img");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let out = benchlab_testkit::output_ok(
        Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&image),
    );
    let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
    struct Detach(String);
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = Command::new("losetup").args(["-d", &self.0]).status();
        }
    }
    let _detach = Detach(dev.clone());
    let name = dev.trim_start_matches("/dev/").to_string();
    let mib = 24;
    let study = s.study(
        "disk.toml",
        &format!(
            r#"
[study]
name = "monitors-disk"
[defaults]
repetitions = 1
quiesce_s = 0
[[workload]]
kind = "command"
command = "sh -c 'dd if=/dev/zero of={dev} bs=1M count={mib} oflag=direct status=none && echo written: {mib}'"
parser = "lines"
metrics = "written (MiB) higher: written"
"#
        ),
    );
    s.run_ok(&["run", study.to_str().unwrap()]);
    let m = monitors(&s.db());
    assert_eq!(m.len(), 1);
    let disks = &m[0].1.disks;
    let d = disks
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} among the monitored devices: {disks:?}"));
    eprintln!("{name}: {d:?}");
    assert_eq!(d.write_bytes, mib << 20, "{name}: {d:?}");
    assert!(d.writes >= mib, "{} write requests for {mib} MiB", d.writes);
    assert!(d.await_ms >= 0.0);
}

/// Issue 27: the report of a run whose second configuration keeps CPU 1
/// busy names that CPU where the configurations differ, with the figures
/// of the point's summaries; the JSON carries every host's summary and
/// follows docs/report.schema.json; Markdown and HTML print the sentence,
/// and HTML draws the per-second chart.
#[test]
fn the_report_names_the_cpu_a_planted_load_kept_busy() {
    benchlab_testkit::require!(root, "dd");
    if !two_cpus() {
        return benchlab_testkit::unsupported("needs 2 CPUs (one loaded, one not)");
    }
    let _alone = benchlab_testkit::alone();
    let s = Scratch::new();
    // The load copies /dev/zero to /dev/null: kernel time, which a
    // build running beside the test (user time, mostly) does not hide.
    let study = s.study(
        "planted.toml",
        r#"
[study]
name = "monitors-planted"
[defaults]
repetitions = 2
quiesce_s = 0
[monitors]
interval = 0.25
[[configuration]]
name = "quiet"
[[configuration]]
name = "load-on-1"
load = { command = "dd if=/dev/zero of=/dev/null bs=64k count=2000000 status=none", workers = 1, cpus = "1" }
[[workload]]
kind = "fake"
sleep_s = 2
"#,
    );
    s.run_ok(&["run", study.to_str().unwrap()]);
    let j = s.json("1");
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(benchlab_testkit::repo().join("docs/report.schema.json")).unwrap(),
    )
    .unwrap();
    let errors = benchlab_testkit::schema::validate(&schema, &j);
    assert!(
        errors.is_empty(),
        "schema violations:\n{}",
        errors.join("\n")
    );

    let m = &j["monitors"];
    let points = m["points"].as_array().expect("monitor points");
    // One host (this machine) per configuration at the one point.
    assert_eq!(points.len(), 2, "{points:#?}");
    let summary = |config: &str| {
        let p = points
            .iter()
            .find(|p| p["configuration"] == config)
            .unwrap_or_else(|| panic!("no monitors of {config}"));
        assert_eq!(p["host"], "sut");
        assert_eq!(p["repetitions"], 2);
        p["summary"].clone()
    };
    let (quiet, loaded) = (summary("quiet"), summary("load-on-1"));
    let busy = |s: &serde_json::Value, cpu: usize| s["cpus"][cpu]["busy_pct"].as_f64().unwrap();
    eprintln!(
        "CPU 1 busy: quiet {:.1} %, load-on-1 {:.1} %",
        busy(&quiet, 1),
        busy(&loaded, 1)
    );
    assert!(busy(&loaded, 1) >= 90.0, "{loaded:#}");
    for k in [
        "context_switches_per_s",
        "interrupts_per_s",
        "run_queue_mean",
        "elapsed_s",
    ] {
        assert!(loaded[k].as_f64().unwrap() > 0.0, "{k}: {loaded:#}");
    }

    let differences = m["differences"].as_array().unwrap();
    let named = differences
        .iter()
        .find(|d| {
            d["configuration"] == "load-on-1" && d["what"].as_str().unwrap().starts_with("CPU 1 ")
        })
        .unwrap_or_else(|| panic!("CPU 1 is not named: {differences:#?}"));
    assert_eq!(named["baseline"], "quiet");
    // The figures named are the summaries' own.
    let what = named["what"].as_str().unwrap();
    let mode = what.trim_start_matches("CPU 1 ").trim_start_matches("in ");
    let key = format!("{}_pct", if mode == "busy" { "busy" } else { mode });
    let f = |v: &serde_json::Value| v.as_f64().unwrap();
    assert!((f(&named["value"]) - f(&loaded["cpus"][1][&key])).abs() < 1e-9);
    assert!((f(&named["baseline_value"]) - f(&quiet["cpus"][1][&key])).abs() < 1e-9);
    assert!((f(&named["value"]) - f(&named["baseline_value"])).abs() >= 10.0);

    let sentence = format!(
        "load-on-1: {what} {:.0} % vs {:.0} % (quiet)",
        f(&named["value"]),
        f(&named["baseline_value"])
    );
    eprintln!("{sentence}");
    let (md, html) = s.report_md_html("1");
    assert!(md.contains("## System monitors: fake"), "{md}");
    assert!(md.contains(&sentence), "{md}");
    assert!(html.contains(&sentence), "the HTML names it");
    // The per-second chart of each configuration, a line per CPU.
    let charts = m["charts"].as_array().unwrap();
    assert_eq!(charts.len(), 2);
    let lines = charts[0]["lines"].as_array().unwrap();
    assert!(lines.len() >= 2 && lines[0]["x"].as_array().unwrap().len() >= 4);
    assert_eq!(
        html.matches("<svg class=\"chart series\" id=\"monitor-")
            .count(),
        2
    );
}
