//! The AMQP broker as a managed service (Debian's RabbitMQ, `kind =
//! "rabbitmq"`), and `mq.throughput` / `mq.latency` against it.

use std::path::Path;
use std::time::{Duration, Instant};

use benchlab_service::{Service, ServicePlan, ServiceSpec, StartOptions};

const PASSWORD_VAR: &str = "BENCHLAB_TEST_MQ_PASSWORD";
const PASSWORD: &str = "mq-test-Pw.1";

fn rabbitmq_missing() -> bool {
    if !Path::new("/usr/lib/rabbitmq/bin/rabbitmq-server").exists() {
        benchlab_testkit::missing(
            "RabbitMQ (Debian package rabbitmq-server; scripts/setup.sh installs it)",
        );
        return true;
    }
    false
}

fn broker_plan(name: &str) -> ServicePlan {
    let spec: ServiceSpec = serde_json::from_value(serde_json::json!({
        "name": name,
        "kind": "rabbitmq",
        "probe": "amqp",
        "ready_timeout_s": 120.0,
        "secrets": { "password": { "env": PASSWORD_VAR } },
    }))
    .unwrap();
    spec.plan(Path::new("/nonexistent")).unwrap()
}

#[test]
fn the_broker_runs_in_its_scratch_directory_bound_to_its_address_and_stops_with_its_epmd() {
    if rabbitmq_missing() {
        return;
    }
    let s = benchlab_testkit::Scratch::new();
    let base = s.path("tmp");
    std::fs::create_dir_all(&base).unwrap();
    std::env::set_var(PASSWORD_VAR, PASSWORD);
    std::env::set_var("BENCHLAB_STATE_DIR", s.path("state"));
    let opts = StartOptions::new(Some(base.clone()));
    let svc = Service::start(&broker_plan("mq"), &opts).unwrap();
    let d = svc.description().clone();
    eprintln!(
        "{} ready after {:.1} s at {}",
        d.version.clone().unwrap_or_default(),
        d.ready_after_s,
        d.listen
    );
    assert!(
        d.version.as_deref().unwrap().starts_with("RabbitMQ 3."),
        "{:?}",
        d.version
    );
    let conf = d.config.clone().unwrap();
    assert!(
        !conf.contains(PASSWORD) && conf.contains("default_pass = ***"),
        "{conf}"
    );
    assert!(!d.argv.join(" ").contains(PASSWORD));
    let procs = benchlab_testkit::left::naming(&base);
    assert!(procs.iter().any(|(_, c)| c.contains("beam")), "{procs:?}");
    assert!(procs.iter().any(|(_, c)| c.contains("epmd")), "{procs:?}");
    svc.stop().unwrap();
    benchlab_testkit::left::wait_gone(15, &base, || benchlab_testkit::left::naming(&base));
}

/// A rabbitmqctl command for the service started in `scratch_base`
/// (the wrapper benchlab writes next to the broker's files).
fn ctl(base: &Path) -> std::process::Command {
    let dir = std::fs::read_dir(base)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("rabbitmqctl").exists())
        .expect("the broker's scratch directory");
    std::process::Command::new(dir.join("rabbitmqctl"))
}

/// The broker's own global counters (`rabbit_global_counters`): messages
/// received from publishers, confirmed, delivered and acknowledged (over
/// every queue type).
fn broker_counters(base: &Path) -> [u64; 4] {
    let out = ctl(base)
        .args(["-q", "eval", "rabbit_global_counters:overview()."])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "rabbitmqctl: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sum = |key: &str| -> u64 {
        let mut total = 0;
        let mut rest = text.as_str();
        while let Some(i) = rest.find(&format!("{key} => ")) {
            rest = &rest[i + key.len() + 4..];
            let n: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            total += n.parse::<u64>().unwrap();
        }
        total
    };
    [
        sum("messages_received_total"),
        sum("messages_confirmed_total"),
        sum("messages_delivered_total"),
        sum("messages_acknowledged_total"),
    ]
}

fn delta(a: [u64; 4], b: [u64; 4]) -> [u64; 4] {
    [b[0] - a[0], b[1] - a[1], b[2] - a[2], b[3] - a[3]]
}

fn login(addr: std::net::SocketAddr, password: &str) -> benchlab_wl_mq::amqp::Login {
    benchlab_wl_mq::amqp::Login {
        addr,
        user: "benchlab".into(),
        password: password.into(),
        vhost: "/".into(),
        nodelay: true,
        timeout: Duration::from_secs(20),
    }
}

/// One broker, started once (≈10–15 s), for every check that does not
/// need a broker of its own.
#[test]
fn against_one_broker_exactly_once_counters_rates_delays_and_bad_logins() {
    use benchlab_wl_mq::{latency, throughput};
    if rabbitmq_missing() {
        return;
    }
    let s = benchlab_testkit::Scratch::new();
    let base = s.path("tmp");
    std::fs::create_dir_all(&base).unwrap();
    std::env::set_var(PASSWORD_VAR, PASSWORD);
    std::env::set_var("BENCHLAB_STATE_DIR", s.path("state"));
    let svc = Service::start(&broker_plan("mq1"), &StartOptions::new(Some(base.clone()))).unwrap();
    let addr = svc.address();
    let ok = login(addr, PASSWORD);
    let abort = std::sync::atomic::AtomicBool::new(false);

    // Throughput, shared: 2 queues × (1 publisher, 2 subscribers), acks
    // every 100, confirms; then fanout: 2 publishers, 3 subscribers.
    // Last, 4 queues without confirms or acks (the figures nothing on
    // the broker vouches for until the subscribers have them all).
    for (fanout, queues, pubs, subs, count, sub_ack, confirm) in [
        (false, 2u32, 1u32, 2u32, 20_000u64, 100u64, true),
        (true, 1, 2, 3, 5_000, 0, true),
        (false, 4, 1, 1, 50_000, 0, false),
    ] {
        let plan = throughput::Plan {
            fanout,
            queues,
            publishers: pubs,
            subscribers: subs,
            count,
            size: 64,
            pub_confirm: confirm,
            sub_ack,
            durable: false,
            nodelay: false,
        };
        let before = broker_counters(&base);
        let out = throughput::run(&plan, &ok, &abort).unwrap();
        let d = delta(before, broker_counters(&base));
        let published = u64::from(queues * pubs) * count;
        let quota = if fanout {
            u64::from(pubs) * count
        } else {
            u64::from(pubs) * count / u64::from(subs)
        };
        let delivered = u64::from(queues * subs) * quota;
        assert_eq!(
            (out.lost, out.duplicates, out.out_of_order, out.nacked),
            (0, 0, 0, 0)
        );
        assert_eq!((out.published, out.delivered), (published, delivered));
        // The broker's own count: every publish received and confirmed,
        // every delivery made (and acked when acks were asked for).
        assert_eq!(d[0], published, "broker received (fanout {fanout})");
        assert_eq!(
            d[1],
            if confirm { published } else { 0 },
            "broker confirmed"
        );
        assert_eq!(d[2], delivered, "broker delivered");
        assert_eq!(d[3], if sub_ack > 0 { delivered } else { 0 }, "broker acks");
        // transfers and MiB/s from the raw counts.
        assert_eq!(plan.transfers(), published + delivered);
        let rate = (published + delivered) as f64 / out.elapsed_s;
        let mut side = benchlab_core::SideResult::default();
        side.counters.insert("transfers".into(), plan.transfers());
        side.counters.insert("published".into(), out.published);
        side.values.insert("elapsed_s".into(), out.elapsed_s);
        side.values.insert("size".into(), 64.0);
        let m = throughput::derive(&side, None).unwrap();
        assert!((m["transfers_per_s"] - rate).abs() < 1e-6 * rate);
        assert!((m["mib_per_s"] - rate * 64.0 / 1_048_576.0).abs() < 1e-9 * rate);
        eprintln!(
            "throughput fanout={fanout}: {published} published, {delivered} delivered in {:.3} s: {rate:.0} transfers/s",
            out.elapsed_s
        );
        assert_eq!(out.pub_rates.len(), (queues * pubs) as usize);
        assert_eq!(out.sub_rates.len(), (queues * subs) as usize);
    }

    // Aborted mid-run: the publishers stop and wake the subscribers that
    // wait for messages that will not come (not after `timeout_s`).
    let plan = throughput::Plan {
        fanout: false,
        queues: 2,
        publishers: 1,
        subscribers: 1,
        count: 50_000_000,
        size: 16,
        pub_confirm: true,
        sub_ack: 0,
        durable: false,
        nodelay: false,
    };
    let mut patient = login(addr, PASSWORD);
    patient.timeout = Duration::from_secs(600);
    let begun = Instant::now();
    let e = std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(1500));
            abort.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        throughput::run(&plan, &patient, &abort).unwrap_err()
    });
    abort.store(false, std::sync::atomic::Ordering::Relaxed);
    // Subscribers stop on the flag themselves while messages flow, or are
    // woken by the publishers' stop when none do.
    assert!(
        e.contains("publisher 0: aborted") && e.contains("subscriber 1: "),
        "{e}"
    );
    assert!(
        begun.elapsed() < Duration::from_secs(300),
        "the abort was not prompt"
    );

    // Latency at 1000 msg/s: the achieved rate, and the broker's count.
    let plan = latency::Plan {
        size: 64,
        rate: 1000.0,
        warmup: Duration::from_millis(500),
        duration: Duration::from_secs(3),
        interval: Duration::from_secs(1),
        prefetch: 100,
        ack: 50,
        nodelay: true,
        durable: false,
    };
    let before = broker_counters(&base);
    let direct = latency::run(&plan, &ok, &abort).unwrap();
    let d = delta(before, broker_counters(&base));
    assert_eq!(direct.sent_total, 3500);
    assert_eq!((direct.received, direct.out_of_order), (3500, 0));
    assert_eq!(d[0], 3500, "broker received");
    assert_eq!(d[2], 3500, "broker delivered");
    let achieved = direct.sent_measured as f64 / 3.0;
    eprintln!(
        "latency at 1000/s: achieved {achieved:.1}/s, p50 {:.3} ms, interval counts {:?}",
        direct.sent.quantile(0.5) as f64 / 1e6,
        direct.intervals.iter().map(|i| i.0).collect::<Vec<_>>()
    );
    assert!((achieved - 1000.0).abs() <= 10.0, "achieved {achieved}/s");
    assert_eq!(
        direct.intervals.iter().map(|i| i.0).sum::<u64>(),
        direct.sent.count()
    );

    // A relay delay D on the broker's link: publish and delivery both
    // cross it, so the one-way latency rises by 2·D.
    let dly = Duration::from_millis(5);
    let relay = benchlab_testbed::relay::start(benchlab_testbed::RelayConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        upstream: addr,
        delay: dly,
        protocol: benchlab_testbed::RelayProtocol::Tcp,
    })
    .unwrap();
    let mut plan_r = plan.clone();
    plan_r.duration = Duration::from_secs(2);
    let relayed = latency::run(&plan_r, &login(relay.local_addr(), PASSWORD), &abort).unwrap();
    let stats = relay.stop();
    eprintln!("relay: {stats:?}");
    let ms = |r: &benchlab_core::recorder::LatencyRecorder, q: f64| r.quantile(q) as f64 / 1e6;
    let (min_rise, p50_rise) = (
        relayed.sent.histogram_data().min as f64 / 1e6
            - direct.sent.histogram_data().min as f64 / 1e6,
        ms(&relayed.sent, 0.5) - ms(&direct.sent, 0.5),
    );
    eprintln!("relay 5 ms: fastest message rose {min_rise:.3} ms, median {p50_rise:.3} ms (imposed 2·D = 10 ms)");
    assert!(min_rise >= 9.5, "fastest rose {min_rise} ms, below 2·D");
    assert!((9.5..30.0).contains(&p50_rise), "median rose {p50_rise} ms");

    // Bad logins and an unreachable broker: clear errors.
    let e = benchlab_wl_mq::amqp::Connection::open(&login(addr, "wrong"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("403") && e.contains("ACCESS_REFUSED"), "{e}");
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let e = benchlab_wl_mq::amqp::Connection::open(&login(closed, PASSWORD))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with(&format!("connect to the broker at {closed}")),
        "{e}"
    );

    svc.stop().unwrap();
    benchlab_testkit::left::wait_gone(15, &base, || benchlab_testkit::left::naming(&base));
}

/// A study of one or two managed brokers on local hosts `b1`, `b2`.
fn study(s: &benchlab_testkit::Scratch, workloads: &str, repetitions: u32) -> std::path::PathBuf {
    // (Only brokers some workload drives are declared: the engine gives
    // hosts no workload uses no agent.)
    let text = study_text(workloads, repetitions);
    let text = if workloads.contains("mq2") {
        text
    } else {
        let i = text.find("[[service]]\nname = \"mq2\"").expect("mq2");
        let j = text[i..].find("\n\n").map_or(text.len(), |j| i + j);
        format!("{}{}", &text[..i], &text[j..])
    };
    s.study("mq.toml", &text)
}

fn study_text(workloads: &str, repetitions: u32) -> String {
    format!(
        r#"
[study]
name = "mq"
description = "RabbitMQ under mq.throughput and mq.latency"

[defaults]
repetitions = {repetitions}
quiesce_s = 0
warmup_s = 0.2
duration_s = 1

[[configuration]]
name = "rabbitmq"

[[host]]
name = "b1"
local = true

[[host]]
name = "b2"
local = true

[[service]]
name = "mq1"
kind = "rabbitmq"
host = "b1"
probe = "amqp"
ready_timeout_s = 120
secrets = {{ password = {{ env = "{PASSWORD_VAR}" }} }}

[[service]]
name = "mq2"
kind = "rabbitmq"
host = "b2"
probe = "amqp"
ready_timeout_s = 120
secrets = {{ password = {{ env = "{PASSWORD_VAR}" }} }}

{workloads}
"#
    )
}

/// `benchlab` with the password in its environment (as the service's
/// secret and the clients' `password_env`), its scratch directories in the
/// test's own `tmp`.
fn command(s: &benchlab_testkit::Scratch) -> std::process::Command {
    let tmp = s.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut c = s.benchlab();
    c.env("TMPDIR", &tmp)
        .env(PASSWORD_VAR, PASSWORD)
        .env_remove("BENCHLAB_MQ_PASSWORD");
    c
}

fn metric_reps(p: &serde_json::Value, name: &str) -> Vec<f64> {
    p["metrics"][name]
        .as_array()
        .unwrap_or_else(|| panic!("no {name} in {p}"))
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[test]
fn benchlab_run_drives_two_brokers_sums_them_and_describes_the_broker() {
    if rabbitmq_missing() {
        return;
    }
    let s = benchlab_testkit::Scratch::new();
    let f = study(
        &s,
        &format!(
            r#"
[[workload]]
kind = "mq.throughput"
service = ["mq1", "mq2"]
size = [16, 1024]
queues = 2
count = 3000
password_env = "{PASSWORD_VAR}"

[[workload]]
kind = "mq.latency"
service = "mq1"
size = 16
rate_per_s = 500
password_env = "{PASSWORD_VAR}"
"#
        ),
        1,
    );
    let out = command(&s)
        .args(["run", f.to_str().unwrap()])
        .output()
        .unwrap();
    benchlab_testkit::assert_success(&out);
    let j = s.json("1");
    let points = j["points"].as_array().unwrap();
    let tp: Vec<&serde_json::Value> = points
        .iter()
        .filter(|p| p["metrics"].get("transfers_per_s").is_some())
        .collect();
    assert_eq!(tp.len(), 2, "two sizes");
    for p in tp {
        let total = metric_reps(p, "transfers_per_s")[0];
        let (a, b) = (
            metric_reps(p, "transfers_per_s@b1")[0],
            metric_reps(p, "transfers_per_s@b2")[0],
        );
        assert!((total - a - b).abs() < 1e-6 * total, "{total} vs {a} + {b}");
        // Each broker moved 2 queues × 3000 × 2 transfers.
        assert_eq!(metric_reps(p, "transfers@b1")[0], 12_000.0);
        eprintln!("two brokers: {total:.0} transfers/s ({a:.0} + {b:.0})");
    }
    let lat = points
        .iter()
        .find(|p| p["metrics"].get("latency_mean_ms").is_some())
        .expect("the latency point");
    let achieved = metric_reps(lat, "achieved_rate_per_s")[0];
    assert!((achieved - 500.0).abs() <= 5.0, "achieved {achieved}/s");
    // The broker's description: version, the configuration with the
    // password masked.
    let db = rusqlite::Connection::open(s.db()).unwrap();
    let mut st = db.prepare("SELECT description FROM service").unwrap();
    let descs: Vec<String> = st
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(descs.len(), 2);
    for d in &descs {
        assert!(!d.contains(PASSWORD), "a password was stored: {d}");
        let d: serde_json::Value = serde_json::from_str(d).unwrap();
        assert!(
            d["version"]
                .as_str()
                .unwrap_or_default()
                .starts_with("RabbitMQ 3."),
            "{d}"
        );
        assert!(d["config"]
            .as_str()
            .unwrap_or_default()
            .contains("default_pass = ***"));
    }
    let md = s.path("r.md");
    s.run_ok(&["report", "1", "--md", md.to_str().unwrap()]);
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("RabbitMQ 3."), "{md}");
    assert!(!md.contains(PASSWORD));
    benchlab_testkit::left::wait_gone(15, &s.path("tmp"), || {
        benchlab_testkit::left::naming(&s.path("tmp"))
    });
}

/// The pid of a beam.smp whose environment names `dir`, once it runs.
fn find_beam(dir: &Path, child: &mut std::process::Child) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some((pid, _)) = benchlab_testkit::left::naming(dir)
            .into_iter()
            .find(|(_, c)| c.contains("beam.smp"))
        {
            return pid;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("benchlab ended ({st}) before a broker started");
        }
        assert!(Instant::now() < deadline, "no broker started");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the broker of `dir` accepts AMQP (its log says so).
fn wait_broker_ready(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ready = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                std::fs::read_to_string(e.path().join("output.log"))
                    .is_ok_and(|t| t.contains("Starting broker... completed"))
            });
        if ready {
            return;
        }
        assert!(Instant::now() < deadline, "the broker never became ready");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_broker_killed_mid_point_fails_that_point_and_a_killed_benchlab_leaves_nothing_after_restore() {
    if rabbitmq_missing() {
        return;
    }
    let latency = format!(
        "\n[[workload]]\nkind = \"mq.latency\"\nservice = \"mq1\"\nsize = 64\nduration_s = 4\ntimeout_s = 5\npassword_env = \"{PASSWORD_VAR}\"\n"
    );
    // A broker killed in the measured interval: that point fails with why.
    let s = benchlab_testkit::Scratch::new();
    let f = study(&s, &latency, 1);
    let mut child = command(&s)
        .args(["run", f.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let beam = find_beam(&s.path("tmp"), &mut child);
    wait_broker_ready(&s.path("tmp"));
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: a plain kill(2) of a process this test found.
    unsafe { libc::kill(beam, libc::SIGKILL) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "some repetitions failed:\n{err}"
    );
    let j = s.json("1");
    let reason = j["failures"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    eprintln!("the failed point's reason: {reason}");
    // The broker's own end, not only what the clients saw: the service's
    // process is the Erlang VM itself (its wrapper script `exec`s it), so
    // the reason names the signal that killed it.
    assert!(
        reason.contains("service `mq1` went down") && reason.contains("signal 9"),
        "{reason}"
    );
    benchlab_testkit::left::wait_gone(15, &s.path("tmp"), || {
        benchlab_testkit::left::naming(&s.path("tmp"))
    });

    // benchlab itself SIGKILLed while a broker runs: `benchlab restore`
    // ends the broker and its epmd and removes its directory.
    let s = benchlab_testkit::Scratch::new();
    let f = study(&s, &latency, 1);
    let mut child = command(&s)
        .args(["run", f.to_str().unwrap()])
        .spawn()
        .unwrap();
    find_beam(&s.path("tmp"), &mut child);
    std::thread::sleep(Duration::from_millis(1500));
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        benchlab_testkit::left::naming(&s.path("tmp"))
            .iter()
            .any(|(_, c)| c.contains("epmd")),
        "epmd runs before the restore"
    );
    benchlab_testkit::output_ok(command(&s).args(["restore", f.to_str().unwrap()]));
    benchlab_testkit::left::wait_gone(15, &s.path("tmp"), || {
        benchlab_testkit::left::naming(&s.path("tmp"))
    });
}

#[test]
fn a_size_below_the_stamp_and_a_bad_mode_are_refused_before_anything_runs() {
    let s = benchlab_testkit::Scratch::new();
    for (workload, says) in [
        ("kind = \"mq.latency\"\nsize = 8", "16 B stamp"),
        ("kind = \"mq.throughput\"\nsize = [16, 4]", "below the 8 B"),
        ("kind = \"mq.throughput\"\nmode = \"topic\"", "fanout"),
    ] {
        let f = s.study(
            "bad.toml",
            &format!(
                "[study]\nname = \"bad\"\n[[service]]\nname = \"mq\"\nkind = \"rabbitmq\"\nsecrets = {{ password = {{ env = \"X\" }} }}\n[[workload]]\nservice = \"mq\"\n{workload}\n"
            ),
        );
        let out = s.run(&["check", f.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "accepted: {workload}");
        assert!(
            err.contains(says) && err.contains("bad.toml"),
            "{workload}: {err}"
        );
    }
}
