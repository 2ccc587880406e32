//! Issue 3: workloads across hosts. Hosts are network namespaces of a test
//! bed the tests build and remove themselves (`benchlab testbed`); figures
//! are checked against imposed ground truth: a tbf rate, a relay's delay.
//! These tests need root and iproute2; without them they fail under CI and
//! are reported as skipped elsewhere (benchlab-testkit).
//!
//! Each test takes `exclusive(&[Timing])`: they measure timing against
//! ground truth, and one such test at a time keeps them from loading each
//! other's CPUs (they ran one at a time in their own binary before). Their
//! test beds have names and subnets of their own, so the other modules'
//! tests go on beside them.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use benchlab_testkit::{exclusive, Bed, Resource, Scratch};
use serde_json::Value;

/// Returns from the test when it cannot run here: these tests need root
/// and iproute2. Under CI that is a failure naming what is missing.
macro_rules! require_root_and_iproute2 {
    () => {
        benchlab_testkit::require!(root, "ip", "tc");
    };
}

/// `benchlab --db DB run STUDY` as a controller on one of the bed's hosts.
fn run_on(bed: &Bed, host: &str, db: &Path, study: &Path) -> std::process::Output {
    bed.exec(host, env!("CARGO_BIN_EXE_benchlab"))
        .arg("--db")
        .arg(db)
        .arg("run")
        .arg(study)
        .output()
        .unwrap()
}

/// Kills a background server and returns what it said on standard error.
fn kill_with_log(mut child: Child) -> String {
    let _ = child.kill();
    child
        .wait_with_output()
        .map(|o| String::from_utf8_lossy(&o.stderr).to_string())
        .unwrap_or_default()
}

/// Writes a shared-key file readable by its owner only, as `load_key` demands.
fn write_key(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A short name unique to this test process and test.
fn bed_name(tag: char) -> String {
    format!("t{}{tag}", std::process::id() % 100_000)
}

fn metric(p: &Value, name: &str) -> f64 {
    p["metrics"][name][0]
        .as_f64()
        .unwrap_or_else(|| panic!("no {name} in {p}"))
}

/// The median over a point's repetitions.
fn median_metric(p: &Value, name: &str) -> f64 {
    median(&metric_reps(p, name))
}

fn point<'a>(j: &'a Value, workload: &str, label: &str) -> &'a Value {
    j["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["workload"] == workload && p["label"] == label)
        .unwrap_or_else(|| panic!("no point {workload} {label} in {}", j["points"]))
}

/// TCP goodput through a tbf-limited veth: tbf counts whole frames as the
/// device sees them (Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12 = 66
/// bytes of headers around an MSS of 1500 − 52 = 1448), so the payload
/// share is 1448 / 1514.
const MSS: f64 = 1448.0;
const FRAME: f64 = 1514.0;

/// Every repetition of a metric, in order.
fn metric_reps(p: &Value, name: &str) -> Vec<f64> {
    p["metrics"][name]
        .as_array()
        .unwrap_or_else(|| panic!("no {name} in {p}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// How far a tbf-shaped stream may stray from the expected goodput.
const RATE_TOLERANCE: f64 = 0.02;
/// Repetitions of each shaped stream (see [`check_goodput`]).
const RATE_REPETITIONS: usize = 5;

/// Checks a stream's goodput repetitions against a tbf's rate, each bound
/// on the statistic that this shared two-core machine cannot fake:
///
/// - **tbf is a ceiling**: the *median* must not exceed the expected
///   goodput by more than [`RATE_TOLERANCE`]. Not the maximum: a receiver
///   descheduled as its warm-up ends counts what queued in its socket
///   meanwhile as measured, which lifts a repetition now and then (seen:
///   99.3 through a 100 Mbit/s tbf, +3.9 %; 51.5 through 50, +7.7 %).
///   The 16 ms bucket adds at most 0.8 % to a 2 s repetition.
/// - **The link reaches its rate** when the machine lets it: the *best*
///   repetition must come within the tolerance from below. Not the
///   median: starved of CPU, sender and receiver fall short in most
///   repetitions (at a load of 12-16: medians 2.5-12 % low, single
///   repetitions down to 99 of 191 Mbit/s, whatever the bucket: 64 ms did
///   no better), while the best stayed within 0.8 % in every run seen.
///
/// A tbf off by more than the tolerance either way still fails.
fn check_goodput(what: &str, reps: &[f64], want: f64) {
    check_goodput_within(what, reps, want, RATE_TOLERANCE)
}

/// As [`check_goodput`], the best repetition within `reach` of the rate.
fn check_goodput_within(what: &str, reps: &[f64], want: f64, reach: f64) {
    assert_eq!(reps.len(), RATE_REPETITIONS, "{what}: {reps:?}");
    let median = median(reps);
    let best = reps.iter().copied().fold(f64::MIN, f64::max);
    let pct = |x: f64| (x - want) / want * 100.0;
    eprintln!(
        "{what}: expected goodput {want:.2} Mbit/s, repetitions {reps:.2?}, median {:+.2} %, best {:+.2} %",
        pct(median),
        pct(best)
    );
    assert!(
        median <= want * (1.0 + RATE_TOLERANCE),
        "{what}: median {median} Mbit/s of {reps:?} is more than 2 % above the shaped {want}"
    );
    assert!(
        best >= want * (1.0 - reach),
        "{what}: even the best of {reps:?} Mbit/s is more than {} % below the shaped {want}",
        reach * 100.0
    );
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn tbf_rate_is_measured_back_within_2_percent() {
    let _timing = exclusive(&[Resource::Timing]);
    require_root_and_iproute2!();
    for (tag, rate) in [('a', 200.0), ('b', 50.0)] {
        let s = Scratch::new();
        let bed = Bed::up(
            &s,
            &bed_name(tag),
            &format!("topology = \"direct\"\nsubnet = \"10.231.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\nrate_mbit = {rate}\n[[testbed.host]]\nname = \"gen\"\n"),
        );
        let study = s.study(
            "rate.toml",
            &format!(
                "[study]\nname = \"rate\"\n[defaults]\nrepetitions = {RATE_REPETITIONS}\nduration_s = 2\nwarmup_s = 0.5\nquiesce_s = 0\n\
                 [[host]]\nname = \"sut\"\nnetns = \"{}\"\naddress = \"10.231.0.1\"\n\
                 [[host]]\nname = \"generator\"\nnetns = \"{}\"\naddress = \"10.231.0.2\"\n\
                 [[workload]]\nkind = \"net.stream\"\nprotocol = \"tcp\"\n",
                bed.ns("sut"),
                bed.ns("gen")
            ),
        );
        s.run_ok(&["run", study.to_str().unwrap()]);
        let j = s.json("1");
        let reps = metric_reps(&j["points"][0], "throughput_mbps");
        check_goodput(&format!("tbf {rate} Mbit/s"), &reps, rate * MSS / FRAME);
        // Every host's inventory is stored.
        let conn = rusqlite::Connection::open(s.db()).unwrap();
        let hosts: i64 = conn
            .query_row("SELECT count(*) FROM host", [], |r| r.get(0))
            .unwrap();
        assert_eq!(hosts, 2);
    }
}

/// Starts `benchlab relay` in a namespace; its statistics come out when it
/// is stopped.
fn relay(bed: &Bed, host: &str, listen: &str, to: &str, delay_ms: f64) -> Child {
    let child = bed
        .exec(host, env!("CARGO_BIN_EXE_benchlab"))
        .args([
            "relay",
            "--listen",
            listen,
            "--to",
            to,
            "--delay-ms",
            &delay_ms.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    child
}

fn stop_relay(child: Child) -> Value {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("relay stats: {e}: {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn a_relayed_delay_shows_up_in_round_trips() {
    let _timing = exclusive(&[Resource::Timing]);
    require_root_and_iproute2!();
    let s = Scratch::new();
    let bed = Bed::up(
        &s,
        &bed_name('d'),
        "topology = \"bridge\"\nsubnet = \"10.232.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\n[[testbed.host]]\nname = \"gen\"\n[[testbed.host]]\nname = \"mid\"\n",
    );
    // The client reaches the server through the relay in `mid`: the sut's
    // data address is the relay's, on a fixed port the relay forwards.
    let study = |name: &str| {
        s.study(
            &format!("{name}.toml"),
            &format!(
                "[study]\nname = \"{name}\"\n[defaults]\nrepetitions = 1\nduration_s = 1\nwarmup_s = 0.2\nquiesce_s = 0\n\
                 [[host]]\nname = \"sut\"\nnetns = \"{}\"\naddress = \"10.232.0.3\"\ndata_port = 5999\n\
                 [[host]]\nname = \"generator\"\nnetns = \"{}\"\naddress = \"10.232.0.2\"\n\
                 [[workload]]\nkind = \"net.pingpong\"\nprotocol = [\"tcp\", \"udp\"]\niterations = 300\nnodelay = true\n\
                 [[workload]]\nkind = \"net.rr\"\nprotocol = [\"tcp\", \"udp\"]\nrequest_size = 32\nnodelay = true\nrepetitions = 3\n",
                bed.ns("sut"),
                bed.ns("gen")
            ),
        )
    };
    let mut runs = Vec::new();
    for (i, delay_ms) in [0.0, 5.0, 10.0].into_iter().enumerate() {
        let r = relay(&bed, "mid", "0.0.0.0:5999", "10.232.0.1:5999", delay_ms);
        let file = study(&format!("delay{i}"));
        s.run_ok(&["run", file.to_str().unwrap()]);
        let stats = stop_relay(r);
        runs.push((delay_ms, s.json(&(i + 1).to_string()), stats));
    }
    let base = &runs[0].1;
    for (delay_ms, j, stats) in &runs[1..] {
        let d_us = delay_ms * 1000.0;
        let tolerance = (0.02 * 2.0 * d_us).max(50.0);
        // The relay's own record of what it held: the ground truth.
        for proto in ["tcp", "udp"] {
            for dir in ["to_upstream", "to_client"] {
                let d = &stats[proto][dir];
                assert!(d["chunks"].as_u64().unwrap() > 0, "{stats}");
                let p50 = d["hold_p50_ns"].as_f64().unwrap() / 1000.0;
                eprintln!(
                    "relay {proto} {dir}: median hold {p50:.1} µs, mean {:.1} µs (delay {d_us} µs)",
                    d["hold_mean_ns"].as_f64().unwrap() / 1000.0
                );
                assert!(
                    p50 >= d_us && p50 <= d_us + 200.0,
                    "{proto} {dir} median hold {p50} µs for {d_us} µs"
                );
            }
        }
        // The fastest round trip of a ping-pong is what the path imposes
        // with the least of this shared VM's scheduling noise added (a
        // median or mean moves by hundreds of µs when other work wakes
        // the host late after a 5–10 ms sleep), so it is held to the
        // tight tolerance. An rr repetition only has its mean: it must
        // rise by at least the imposed delay (less the tolerance), and
        // nothing else: a mean takes every late wake-up of a loaded machine.
        for proto in ["tcp", "udp"] {
            let label = format!("protocol={proto}");
            // Ping-pong reports RTT/2: its rise is one delay.
            let rise_rtt = 2.0
                * (metric(point(j, "net.pingpong", &label), "rtt_half_min_us")
                    - metric(point(base, "net.pingpong", &label), "rtt_half_min_us"));
            eprintln!("delay {delay_ms} ms, {proto} ping-pong: fastest round trip rose {rise_rtt:.1} µs (imposed {:.0} µs)", 2.0 * d_us);
            assert!(
                (rise_rtt - 2.0 * d_us).abs() <= tolerance,
                "{proto} ping-pong rose {rise_rtt} µs for 2×{d_us} µs"
            );
            let rise_rr = median_metric(point(j, "net.rr", &label), "rtt_us")
                - median_metric(point(base, "net.rr", &label), "rtt_us");
            eprintln!("delay {delay_ms} ms, {proto} rr: round trip rose {rise_rr:.1} µs");
            assert!(
                rise_rr >= 2.0 * d_us - tolerance,
                "{proto} rr rose {rise_rr} µs for 2×{d_us} µs"
            );
        }
    }
}

#[test]
fn two_targets_behind_their_own_links() {
    let _timing = exclusive(&[Resource::Timing]);
    require_root_and_iproute2!();
    let s = Scratch::new();
    let rate = 100.0;
    let bed = Bed::up(
        &s,
        &bed_name('g'),
        &format!("topology = \"bridge\"\nsubnet = \"10.233.0.0/24\"\n[[testbed.host]]\nname = \"g1\"\nrate_mbit = {rate}\n[[testbed.host]]\nname = \"g2\"\nrate_mbit = {rate}\n[[testbed.host]]\nname = \"gen\"\n"),
    );
    let study = s.study(
        "targets.toml",
        &format!(
            "[study]\nname = \"targets\"\n[defaults]\nrepetitions = {RATE_REPETITIONS}\nduration_s = 2\nwarmup_s = 0.5\nquiesce_s = 0\n\
             [[host]]\nname = \"g1\"\nnetns = \"{}\"\naddress = \"10.233.0.1\"\n\
             [[host]]\nname = \"g2\"\nnetns = \"{}\"\naddress = \"10.233.0.2\"\n\
             [[host]]\nname = \"generator\"\nnetns = \"{}\"\naddress = \"10.233.0.3\"\n\
             [[workload]]\nkind = \"net.stream\"\ntargets = [\"g1\", \"g2\"]\n",
            bed.ns("g1"),
            bed.ns("g2"),
            bed.ns("gen")
        ),
    );
    s.run_ok(&["run", study.to_str().unwrap()]);
    let j = s.json("1");
    let p = &j["points"][0];
    let want = rate * MSS / FRAME;
    let per_target: Vec<Vec<f64>> = ["g1", "g2"]
        .iter()
        .map(|t| metric_reps(p, &format!("throughput_mbps@{t}")))
        .collect();
    for (t, reps) in ["g1", "g2"].iter().zip(&per_target) {
        check_goodput(&format!("target {t}"), reps, want);
    }
    // The aggregate is the sum of the targets, repetition by repetition,
    // and held to the same bounds against the sum of the rates.
    let total = metric_reps(p, "throughput_mbps");
    for (i, sum) in total.iter().enumerate() {
        assert!(
            (sum - per_target[0][i] - per_target[1][i]).abs() < 1e-6,
            "repetition {i}: aggregate {sum} is not the sum of the targets"
        );
    }
    check_goodput("aggregate", &total, 2.0 * want);
    // Each target's raw sides are stored next to the aggregate.
    let conn = rusqlite::Connection::open(s.db()).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM target_result", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        n,
        4 * RATE_REPETITIONS as i64,
        "client and server of two targets, each repetition"
    );
}

#[test]
fn a_killed_agent_fails_its_point_and_leaves_nothing_behind() {
    let _timing = exclusive(&[Resource::Timing]);
    require_root_and_iproute2!();
    let s = Scratch::new();
    let bed = Bed::up(&s, &bed_name('k'), "topology = \"direct\"\nsubnet = \"10.234.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\n[[testbed.host]]\nname = \"gen\"\n");
    let study = s.study(
        "kill.toml",
        &format!(
            "[study]\nname = \"kill\"\n[defaults]\nrepetitions = 1\nwarmup_s = 0\nquiesce_s = 0\n\
             [[host]]\nname = \"sut\"\nnetns = \"{}\"\naddress = \"10.234.0.1\"\n\
             [[host]]\nname = \"generator\"\nnetns = \"{}\"\naddress = \"10.234.0.2\"\n\
             [[workload]]\nname = \"victim\"\nkind = \"net.stream\"\nduration_s = 6\n\
             [[workload]]\nname = \"after\"\nkind = \"net.rr\"\nduration_s = 0.5\n",
            bed.ns("sut"),
            bed.ns("gen")
        ),
    );
    let mut run = s
        .benchlab()
        .args(["run", study.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the stream point is under way, then kill the server's agent.
    let deadline = Instant::now() + Duration::from_secs(30);
    let victim = loop {
        if let Some(status) = run.try_wait().unwrap() {
            panic!(
                "the run ended ({status}) before its agent could be killed: {}",
                kill_with_log(run)
            );
        }
        if Instant::now() > deadline {
            panic!(
                "the server agent never appeared; the run said: {}",
                kill_with_log(run)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
        let conn = rusqlite::Connection::open(s.db());
        let started = conn
            .ok()
            .and_then(|c| {
                c.query_row("SELECT count(*) FROM point", [], |r| r.get::<_, i64>(0))
                    .ok()
            })
            .unwrap_or(0);
        if started == 0 {
            continue;
        }
        std::thread::sleep(Duration::from_millis(1500));
        break *bed
            .pids("sut")
            .first()
            .expect("an agent in the sut namespace");
    };
    // SAFETY: killing the agent process we found.
    unsafe { libc::kill(victim as i32, libc::SIGKILL) };
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(3), "one repetition failed");
    let j = s.json("1");
    let failures = j["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["workload"], "victim");
    let reason = failures[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("sut/server") && reason.contains("stopped unexpectedly"),
        "{reason}"
    );
    // The next point ran on fresh agents.
    assert!(metric(point(&j, "after", "-"), "transactions_per_s") > 0.0);
    // Nothing of benchlab is left in any namespace.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        bed.pids("sut").is_empty() && bed.pids("gen").is_empty(),
        "left: {:?} {:?}",
        bed.pids("sut"),
        bed.pids("gen")
    );
}

#[test]
fn an_unreachable_host_is_named_before_anything_runs() {
    let _timing = exclusive(&[Resource::Timing]);
    require_root_and_iproute2!();
    let s = Scratch::new();
    let study = s.study(
        "gone.toml",
        "[study]\nname = \"gone\"\n[[host]]\nname = \"sut\"\nnetns = \"bl-no-such-namespace\"\naddress = \"10.235.0.1\"\n[[workload]]\nkind = \"net.rr\"\n",
    );
    let out = s.run(&["run", study.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("preflight failed; nothing was run"), "{err}");
    assert!(
        err.contains("host `sut` (netns bl-no-such-namespace)"),
        "{err}"
    );
    assert!(s.run_ok(&["list"]).contains("no runs"));
}

#[test]
fn a_server_reached_over_ssh() {
    let _timing = exclusive(&[Resource::Timing]);
    require_root_and_iproute2!();
    let Some(sshd) = benchlab_testkit::find_program("sshd") else {
        return benchlab_testkit::missing("sshd (openssh-server)");
    };
    let Some(keygen) = benchlab_testkit::find_program("ssh-keygen") else {
        return benchlab_testkit::missing("ssh-keygen (openssh-client)");
    };
    let s = Scratch::new();
    let bed = Bed::up(&s, &bed_name('s'), "topology = \"direct\"\nsubnet = \"10.236.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\n[[testbed.host]]\nname = \"gen\"\n");
    let dir = s.path("ssh");
    std::fs::create_dir_all(&dir).unwrap();
    for (file, kind) in [("host_key", "ed25519"), ("id", "ed25519")] {
        let st = Command::new(&keygen)
            .args(["-q", "-t", kind, "-N", "", "-f"])
            .arg(dir.join(file))
            .status()
            .unwrap();
        assert!(st.success());
    }
    std::fs::copy(dir.join("id.pub"), dir.join("authorized_keys")).unwrap();
    std::fs::create_dir_all("/run/sshd").unwrap();
    let config = dir.join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "ListenAddress 10.236.0.1\nPort 22\nHostKey {0}/host_key\nAuthorizedKeysFile {0}/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\nStrictModes no\nPidFile {0}/sshd.pid\n",
            dir.display()
        ),
    )
    .unwrap();
    let sshd = bed
        .exec("sut", sshd.to_str().unwrap())
        .args(["-D", "-e", "-f"])
        .arg(&config)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // The controller runs on the generator host; the server side is reached
    // over SSH, with the key and options a user would give, and benchlab is
    // deployed there (to a path where it is missing) before the run.
    let deployed = s.path("remote/bin/benchlab");
    let study = s.study(
        "ssh.toml",
        &format!(
            "[study]\nname = \"ssh\"\n[defaults]\nrepetitions = 1\nduration_s = 1\nwarmup_s = 0.2\nquiesce_s = 0\n\
             [[host]]\nname = \"sut\"\nssh = \"root@10.236.0.1\"\nidentity = \"{}\"\n\
             ssh_options = [\"-o\", \"StrictHostKeyChecking=no\", \"-o\", \"UserKnownHostsFile=/dev/null\", \"-o\", \"LogLevel=ERROR\"]\n\
             benchlab = \"{}\"\ndeploy = true\n\
             [[workload]]\nkind = \"net.stream\"\n[[workload]]\nkind = \"net.pingpong\"\nprotocol = [\"tcp\", \"udp\"]\n",
            dir.join("id").display(),
            deployed.display()
        ),
    );
    let out = run_on(&bed, "gen", &s.db(), &study);
    let sshd_log = kill_with_log(sshd);
    assert!(
        out.status.success(),
        "run over ssh failed:\n{}\nsshd:\n{sshd_log}",
        String::from_utf8_lossy(&out.stderr)
    );
    let copied = std::fs::read(&deployed).expect("benchlab was deployed over SSH");
    assert_eq!(
        copied,
        std::fs::read(env!("CARGO_BIN_EXE_benchlab")).unwrap()
    );
    let j = s.json("1");
    assert!(j["failures"].as_array().unwrap().is_empty());
    let stream = point(&j, "net.stream", "-");
    assert_eq!(
        metric(stream, "bytes_sent"),
        metric(stream, "bytes_received")
    );
    assert!(metric(point(&j, "net.pingpong", "protocol=udp"), "iterations") > 0.0);
    // The sut's inventory came over SSH.
    let conn = rusqlite::Connection::open(s.db()).unwrap();
    let roles: String = conn
        .query_row("SELECT roles FROM host WHERE name = 'sut'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(roles, "server");
    // No agent is left on the SSH host once the run is over.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        bed.pids("sut").is_empty(),
        "left in sut: {:?}",
        bed.pids("sut")
    );
}

#[test]
fn an_agent_over_tcp_with_a_shared_key() {
    let _timing = exclusive(&[Resource::Timing]);
    require_root_and_iproute2!();
    let s = Scratch::new();
    let bed = Bed::up(&s, &bed_name('l'), "topology = \"direct\"\nsubnet = \"10.237.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\n[[testbed.host]]\nname = \"gen\"\n");
    let key = s.path("key");
    write_key(&key, "a shared secret of some length\n");
    let agent = bed
        .exec("sut", env!("CARGO_BIN_EXE_benchlab"))
        .args(["agent", "--listen", "10.237.0.1:7300", "--key-file"])
        .arg(&key)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let study = s.study(
        "tcp.toml",
        &format!(
            "[study]\nname = \"tcp-agent\"\n[defaults]\nrepetitions = 1\nduration_s = 0.5\nwarmup_s = 0.1\nquiesce_s = 0\n\
             [[host]]\nname = \"sut\"\nagent = \"10.237.0.1:7300\"\nkey_file = \"{}\"\n\
             [[workload]]\nkind = \"net.rr\"\n",
            key.display()
        ),
    );
    let out = run_on(&bed, "gen", &s.db(), &study);
    // A controller without the key is refused before any request.
    let wrong = s.path("wrong");
    write_key(&wrong, "not the secret we share at all");
    let bad = s.study(
        "bad.toml",
        &std::fs::read_to_string(&study)
            .unwrap()
            .replace(&key.display().to_string(), &wrong.display().to_string()),
    );
    let refused = run_on(&bed, "gen", &s.path("bad.db"), &bad);
    let log = kill_with_log(agent);
    assert!(
        out.status.success(),
        "run via a TCP agent failed: {}\nagent: {log}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(metric(&s.json("1")["points"][0], "transactions_per_s") > 0.0);
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("preflight failed") && err.contains("host `sut` (agent 10.237.0.1:7300)"),
        "{err}"
    );
    assert!(log.contains("refused"), "agent log: {log}");
}

/// `delay_ms` on a test-bed host: where the kernel has netem, the delay
/// shows up in round trips; where it has none (this project's CI kernels:
/// no modules can be loaded, so no set-up step can add it), the bed is
/// refused before anything is made, naming netem and the relay to use
/// instead. Either way something is checked; nothing is skipped.
#[test]
fn a_netem_delay_shows_up_in_round_trips_or_is_refused_clearly() {
    let _timing = exclusive(&[Resource::Timing]);
    require_root_and_iproute2!();
    if !benchlab_netem_available() {
        let s = Scratch::new();
        let name = bed_name('q');
        let file = s.study(
            "netem-bed.toml",
            &format!("[testbed]\nname = \"{name}\"\ntopology = \"direct\"\nsubnet = \"10.238.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\ndelay_ms = 2.0\n[[testbed.host]]\nname = \"gen\"\n"),
        );
        let out = Command::new(env!("CARGO_BIN_EXE_benchlab"))
            .args(["testbed", "up"])
            .arg(&file)
            .env("BENCHLAB_STATE_DIR", s.path("state"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "delay_ms accepted without netem");
        assert!(
            err.contains("delay_ms") && err.contains("netem") && err.contains("relay"),
            "{err}"
        );
        let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
        assert!(
            !String::from_utf8_lossy(&ns.stdout).contains(&format!("bl-{name}-")),
            "a refused bed left namespaces"
        );
        return;
    }
    let mut means = Vec::new();
    for (tag, delay_ms) in [('n', 0.0), ('m', 2.0)] {
        let s = Scratch::new();
        let delay = if delay_ms > 0.0 {
            format!("delay_ms = {delay_ms}\n")
        } else {
            String::new()
        };
        let bed = Bed::up(&s, &bed_name(tag), &format!("topology = \"direct\"\nsubnet = \"10.238.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\n{delay}[[testbed.host]]\nname = \"gen\"\n"));
        let study = s.study(
            "netem.toml",
            &format!(
                "[study]\nname = \"netem\"\n[defaults]\nrepetitions = 1\nwarmup_s = 0.2\nquiesce_s = 0\n\
                 [[host]]\nname = \"sut\"\nnetns = \"{}\"\naddress = \"10.238.0.1\"\n\
                 [[host]]\nname = \"generator\"\nnetns = \"{}\"\naddress = \"10.238.0.2\"\n\
                 [[workload]]\nkind = \"net.pingpong\"\nprotocol = \"udp\"\niterations = 150\n",
                bed.ns("sut"),
                bed.ns("gen")
            ),
        );
        s.run_ok(&["run", study.to_str().unwrap()]);
        means.push(metric(&s.json("1")["points"][0], "rtt_half_mean_us"));
    }
    // netem delays one direction of the sut's link by D, so a round trip
    // rises by D (half of that in RTT/2).
    let rise_rtt = 2.0 * (means[1] - means[0]);
    eprintln!("netem 2 ms: round trip rose {rise_rtt:.1} µs");
    assert!(
        (rise_rtt - 2000.0).abs() <= 50.0_f64.max(0.02 * 2000.0),
        "rose {rise_rtt} µs"
    );
}

fn benchlab_netem_available() -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_benchlab"))
        .args(["testbed", "netem"])
        .output();
    matches!(out, Ok(o) if o.status.success())
}

/// Seed 000's two machines without editing the study: a lab file places
/// `sut` and `generator` on two test-bed hosts, with a rate limit on the
/// system under test's link that the stream must respect, and `--host`
/// overrides one role from the command line.
#[test]
fn a_lab_file_places_the_study_hosts_on_the_lab() {
    let _timing = exclusive(&[Resource::Timing]);
    require_root_and_iproute2!();
    let s = Scratch::new();
    let rate = 20.0;
    let bed = Bed::up(
        &s,
        &bed_name('l'),
        &format!("topology = \"direct\"\nsubnet = \"10.233.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\nrate_mbit = {rate}\n[[testbed.host]]\nname = \"gen\"\n"),
    );
    // The study names no host: on its own it runs on this machine.
    let study = s.study(
        "two.toml",
        "[study]\nname = \"two\"\n[defaults]\nrepetitions = 1\nduration_s = 1.5\nwarmup_s = 0.3\nquiesce_s = 0\n\
         [[workload]]\nkind = \"net.stream\"\nprotocol = \"tcp\"\n",
    );
    let lab = s.study(
        "lab.toml",
        &format!(
            "[[host]]\nname = \"sut\"\nnetns = \"{}\"\naddress = \"10.233.0.1\"\n",
            bed.ns("sut")
        ),
    );
    let gen = format!("generator=netns:{}@10.233.0.2", bed.ns("gen"));
    s.run_ok(&[
        "run",
        study.to_str().unwrap(),
        "--hosts",
        lab.to_str().unwrap(),
        "--host",
        &gen,
    ]);
    let j = s.json("1");
    let mbps = metric_reps(&j["points"][0], "throughput_mbps")[0];
    // Through the bed's link, not loopback: at most its rate.
    assert!(
        mbps <= rate * 1.02 && mbps > 0.0,
        "{mbps} Mbit/s over a {rate} Mbit/s link"
    );
    // The run records where each side ran.
    let conn = rusqlite::Connection::open(s.db()).unwrap();
    let placed: String = conn
        .query_row(
            "SELECT message FROM run_event WHERE kind = 'hosts'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        placed.contains(&format!("sut: netns {}", bed.ns("sut")))
            && placed.contains(&format!("generator: netns {}", bed.ns("gen"))),
        "{placed}"
    );
}

/// web.load against a managed nginx on a test-bed host whose link a tbf
/// shapes: the MB/s benchlab measures (response heads and bodies) stays at
/// or below the link's rate, and the best repetition reaches it. Responses
/// count when complete, so a repetition is off by up to one response per
/// connection: 64 KiB responses over 3 s keep that near 2 %.
#[test]
fn web_load_is_held_to_a_tbf_rate_and_reaches_it() {
    let _timing = exclusive(&[Resource::Timing]);
    require_root_and_iproute2!();
    if benchlab_testkit::find_program("nginx").is_none() {
        return benchlab_testkit::missing("nginx (scripts/setup.sh installs it)");
    }
    let s = Scratch::new();
    let rate = 40.0;
    let bed = Bed::up(
        &s,
        &bed_name('w'),
        &format!("topology = \"direct\"\nsubnet = \"10.234.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\nrate_mbit = {rate}\n[[testbed.host]]\nname = \"gen\"\n"),
    );
    let study = s.study(
        "web-tbf.toml",
        &format!(
            "[study]\nname = \"web-tbf\"\n[defaults]\nrepetitions = {RATE_REPETITIONS}\nduration_s = 3\nwarmup_s = 0.5\nquiesce_s = 0\n\
             [[host]]\nname = \"sut\"\nnetns = \"{}\"\naddress = \"10.234.0.1\"\n\
             [[host]]\nname = \"generator\"\nnetns = \"{}\"\naddress = \"10.234.0.2\"\n\
             [[service]]\nname = \"web\"\nkind = \"nginx\"\n\
             [[workload]]\nkind = \"web.load\"\nservice = \"web\"\nclients = 4\nfile_set = \"single\"\nfile_size = \"64KiB\"\nkeep_alive = true\n",
            bed.ns("sut"),
            bed.ns("gen")
        ),
    );
    s.run_ok(&["run", study.to_str().unwrap()]);
    let j = s.json("1");
    // MB/s → Mbit/s of TCP payload; the link carries MSS of every FRAME.
    let reps: Vec<f64> = metric_reps(&j["points"][0], "mbytes_per_s")
        .iter()
        .map(|m| m * 8.0)
        .collect();
    // Issue 10's criterion for web.load: at or below the rate, and at
    // least 95 % of it. Responses count when complete, so the edges of
    // the 3 s interval lose part of a 64 KiB response each (seen: a best
    // of 37.0 against 38.26 on a machine at load 16).
    check_goodput_within(
        &format!("web.load over tbf {rate} Mbit/s"),
        &reps,
        rate * MSS / FRAME,
        0.05,
    );
    assert!(bed.pids("sut").is_empty(), "nginx left in the namespace");
}

/// A relay delay D between the generator and a web server adds 2·D to the
/// fastest request web.load measures; the server is an unmanaged one
/// (`address = …`, started by this test, not by benchlab), reached
/// through the relay.
#[test]
fn a_relayed_delay_shows_up_in_the_fastest_web_request() {
    let _timing = exclusive(&[Resource::Timing]);
    require_root_and_iproute2!();
    let Some(nginx) = benchlab_testkit::find_program("nginx") else {
        return benchlab_testkit::missing("nginx (scripts/setup.sh installs it)");
    };
    let s = Scratch::new();
    let bed = Bed::up(
        &s,
        &bed_name('h'),
        "topology = \"bridge\"\nsubnet = \"10.235.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\n[[testbed.host]]\nname = \"gen\"\n[[testbed.host]]\nname = \"mid\"\n",
    );
    // nginx in the sut's namespace, from a configuration of this test's.
    let www = s.path("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("1k.html"), vec![b'x'; 1024]).unwrap();
    let d = s.path("nginx");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("nginx.conf"),
        format!(
            "daemon off;\nmaster_process on;\nworker_processes 1;\nuser root;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 256; }}\nhttp {{\n access_log off;\n client_body_temp_path {d}/body;\n proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\n uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n keepalive_requests 1000000;\n\
             server {{ listen 10.235.0.1:8099; root {www}; }}\n}}\n",
            d = d.display(),
            www = www.display()
        ),
    )
    .unwrap();
    let mut server = bed
        .exec("sut", nginx.to_str().unwrap())
        .arg("-c")
        .arg(d.join("nginx.conf"))
        .arg("-p")
        .arg(format!("{}/", d.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let urls = s.path("urls.txt");
    std::fs::write(&urls, "/1k.html 1024\n").unwrap();
    let study = |name: &str| {
        s.study(
            &format!("{name}.toml"),
            &format!(
                "[study]\nname = \"{name}\"\n[defaults]\nrepetitions = 1\nduration_s = 1\nwarmup_s = 0.2\nquiesce_s = 0\n\
                 [[host]]\nname = \"sut\"\nnetns = \"{}\"\naddress = \"10.235.0.1\"\n\
                 [[host]]\nname = \"generator\"\nnetns = \"{}\"\naddress = \"10.235.0.2\"\n\
                 [[service]]\nname = \"web\"\naddress = \"10.235.0.3:8099\"\n\
                 [[workload]]\nkind = \"web.load\"\nservice = \"web\"\nclients = 1\nfile_set = \"urls\"\nurl_list = \"{}\"\nkeep_alive = true\n",
                bed.ns("sut"),
                bed.ns("gen"),
                urls.display()
            ),
        )
    };
    let mut fastest = Vec::new();
    let mut holds = Vec::new();
    for (i, delay_ms) in [0.0, 5.0].into_iter().enumerate() {
        let r = relay(&bed, "mid", "0.0.0.0:8099", "10.235.0.1:8099", delay_ms);
        let file = study(&format!("web-delay{i}"));
        let out = s.run(&["run", file.to_str().unwrap()]);
        holds.push(stop_relay(r));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j = s.json(&(i + 1).to_string());
        fastest.push(metric(&j["points"][0], "latency_min_ms") * 1000.0);
    }
    // SAFETY: signalling our own child (ip netns exec execs nginx).
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let _ = server.wait();
    let d_us: f64 = 5000.0;
    // The relay's user-space forwarding of one request and one response
    // beyond its holds, generously: far below the 10 ms a doubled delay
    // would add.
    const FORWARDING_US: f64 = 1000.0;
    let rise = fastest[1] - fastest[0];
    // The relay's own record of what it held each way is the ground
    // truth: on a loaded machine its 5 ms sleeps overshoot (a fresh CI run
    // saw the fastest request rise 10,200.3 µs, 0.3 µs past a fixed 2 %
    // band), and that overshoot is the path's, not a measuring error. The
    // fastest request held at least both minimum holds, and no more than
    // both median holds plus the relay's forwarding of one request and
    // response (its reads, writes and thread wake-ups beside the holds: a
    // later CI run saw 10,220 µs over median holds of 10,002.4 µs, past a
    // 200 µs allowance). Counting the delay twice would add 10 ms more.
    let hold = |dir: &str, q: &str| holds[1]["tcp"][dir][q].as_f64().unwrap() / 1000.0;
    let floor = hold("to_upstream", "hold_min_ns") + hold("to_client", "hold_min_ns");
    let typical = hold("to_upstream", "hold_p50_ns") + hold("to_client", "hold_p50_ns");
    let longest = hold("to_upstream", "hold_max_ns") + hold("to_client", "hold_max_ns");
    eprintln!(
        "web.load fastest request {:.1} µs, through a {d_us} µs relay {:.1} µs: rose {rise:.1} µs (imposed {:.0} µs; the relay held {floor:.1} µs at least, {typical:.1} µs typically, {longest:.1} µs at most)",
        fastest[0],
        fastest[1],
        2.0 * d_us
    );
    assert!(
        floor >= 2.0 * d_us,
        "the relay held less than asked: {floor} µs"
    );
    assert!(
        rise >= floor - 50.0 && rise <= typical + FORWARDING_US,
        "the fastest request rose {rise} µs; the relay held {floor} µs at least, {typical} µs typically, {longest} µs at most"
    );
}

/// Bytes a test-bed host's interfaces have received and sent (loopback
/// left out), read from inside its namespace.
fn link_bytes(bed: &Bed, host: &str) -> (u64, u64) {
    let out = bed
        .exec(host, "sh")
        .args([
            "-c",
            "for d in /sys/class/net/*; do [ \"${d##*/}\" = lo ] || echo $(cat $d/statistics/rx_bytes) $(cat $d/statistics/tx_bytes); done",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let mut w = l.split_whitespace().map(|x| x.parse::<u64>().unwrap());
            (w.next().unwrap(), w.next().unwrap())
        })
        .fold((0, 0), |(r, t), (a, b)| (r + a, t + b))
}

/// Issue 11, item 4: a configuration's `hosts` map moves its points and
/// its services to other hosts. Each host is a namespace of its own, so
/// its link counters say what ran there whatever benchlab records: a
/// stream's server and a web server each move megabytes, the preflight's
/// probe a few kilobytes. Were the map ignored, the mapped hosts would see
/// only the probe; were it applied to both configurations, the study's
/// own hosts would.
#[test]
fn a_configuration_host_map_moves_points_and_services() {
    let _timing = exclusive(&[Resource::Timing]);
    require_root_and_iproute2!();
    if benchlab_testkit::find_program("nginx").is_none() {
        return benchlab_testkit::missing("nginx (scripts/setup.sh installs it)");
    }
    let s = Scratch::new();
    let bed = Bed::up(
        &s,
        &bed_name('m'),
        "topology = \"bridge\"\nsubnet = \"10.239.0.0/24\"\n\
         [[testbed.host]]\nname = \"s1\"\n[[testbed.host]]\nname = \"s2\"\n\
         [[testbed.host]]\nname = \"w1\"\n[[testbed.host]]\nname = \"w2\"\n\
         [[testbed.host]]\nname = \"gen\"\n",
    );
    let study = s.study(
        "moved.toml",
        &format!(
            "[study]\nname = \"moved\"\n[defaults]\nrepetitions = 1\nduration_s = 0.5\nwarmup_s = 0\nquiesce_s = 0\n\
             [[configuration]]\nname = \"bridged\"\n\
             [[configuration]]\nname = \"direct\"\nhosts = {{ srv = \"srv-direct\", www = \"www-direct\" }}\n\
             [[host]]\nname = \"srv\"\nnetns = \"{}\"\naddress = \"10.239.0.1\"\n\
             [[host]]\nname = \"srv-direct\"\nnetns = \"{}\"\naddress = \"10.239.0.2\"\n\
             [[host]]\nname = \"www\"\nnetns = \"{}\"\naddress = \"10.239.0.3\"\n\
             [[host]]\nname = \"www-direct\"\nnetns = \"{}\"\naddress = \"10.239.0.4\"\n\
             [[host]]\nname = \"generator\"\nnetns = \"{}\"\naddress = \"10.239.0.5\"\n\
             [[service]]\nname = \"web\"\nkind = \"nginx\"\nhost = \"www\"\n\
             [[workload]]\nkind = \"net.stream\"\nserver = \"srv\"\n\
             [[workload]]\nkind = \"web.load\"\nservice = \"web\"\nclients = 1\nfile_set = \"single\"\nfile_size = \"64KiB\"\nkeep_alive = true\n",
            bed.ns("s1"),
            bed.ns("s2"),
            bed.ns("w1"),
            bed.ns("w2"),
            bed.ns("gen")
        ),
    );
    let check = s.run_ok(&["check", study.to_str().unwrap()]);
    assert!(
        check.contains(
            "configuration direct: runs on other hosts: srv → srv-direct, www → www-direct"
        ),
        "{check}"
    );
    let before: Vec<(u64, u64)> = ["s1", "s2", "w1", "w2"]
        .iter()
        .map(|h| link_bytes(&bed, h))
        .collect();
    s.run_ok(&["run", study.to_str().unwrap()]);
    const MB: u64 = 1 << 20;
    for (i, (host, what)) in [
        ("s1", "the stream of `bridged`"),
        ("s2", "the stream of `direct`"),
        ("w1", "the web server of `bridged`"),
        ("w2", "the web server of `direct`"),
    ]
    .iter()
    .enumerate()
    {
        let (rx, tx) = link_bytes(&bed, host);
        let (rx, tx) = (rx - before[i].0, tx - before[i].1);
        // A stream's server receives, a web server sends.
        let moved = if host.starts_with('s') { rx } else { tx };
        assert!(
            moved > MB,
            "{host} moved {moved} bytes (received {rx}, sent {tx}): {what} did not run there"
        );
    }
    let j = s.json("1");
    let points = j["points"].as_array().unwrap();
    assert_eq!(points.len(), 4, "two workloads × two configurations");
    for p in points {
        assert!(
            p["metrics"].as_object().is_some_and(|m| !m.is_empty()),
            "{p}"
        );
    }
    // Where each configuration ran is on the record: its map, the
    // services' hosts and the appendix's roles.
    let configs = j["configurations"].as_array().unwrap();
    assert!(
        configs[0]["spec"]
            .get("hosts")
            .is_none_or(|h| h.as_object().unwrap().is_empty()),
        "{}",
        configs[0]
    );
    assert_eq!(configs[1]["spec"]["hosts"]["www"], "www-direct");
    let db = rusqlite::Connection::open(s.db()).unwrap();
    let services: Vec<(i64, String)> = db
        .prepare("SELECT config_idx, json_extract(description, '$.host') FROM service ORDER BY config_idx")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        services,
        [(0, "www".to_string()), (1, "www-direct".to_string())]
    );
    let roles: std::collections::BTreeMap<String, String> = db
        .prepare("SELECT name, roles FROM host")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(roles["srv"], "server in bridged", "{roles:?}");
    assert_eq!(roles["srv-direct"], "server in direct", "{roles:?}");
    assert_eq!(
        roles["www-direct"], "server in direct,service in direct",
        "{roles:?}"
    );
    assert_eq!(roles["generator"], "client", "{roles:?}");
    for h in ["s1", "s2", "w1", "w2"] {
        assert!(bed.pids(h).is_empty(), "a process left in {h}");
    }
}
