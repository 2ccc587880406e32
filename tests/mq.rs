//! The AMQP broker as a managed service (Debian's RabbitMQ, `kind =
//! "rabbitmq"`), and `mq.throughput` / `mq.latency` against it.

mod common;

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

/// Pids of processes (beam, epmd, shells) whose command line or
/// environment names `dir`.
fn processes_of(dir: &Path) -> Vec<(i32, String)> {
    let needle = dir.display().to_string();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(&needle) || String::from_utf8_lossy(&env).contains(&needle) {
            out.push((pid, cmd));
        }
    }
    out
}

fn wait_nothing_left(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let procs = processes_of(dir);
        let files: Vec<_> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        if procs.is_empty() && files.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "left behind: processes {procs:?}, files {files:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
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
    let s = common::Scratch::new();
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
        !conf.contains(PASSWORD) && conf.contains("default_pass = ********"),
        "{conf}"
    );
    assert!(!d.argv.join(" ").contains(PASSWORD));
    let procs = processes_of(&base);
    assert!(procs.iter().any(|(_, c)| c.contains("beam")), "{procs:?}");
    assert!(procs.iter().any(|(_, c)| c.contains("epmd")), "{procs:?}");
    svc.stop().unwrap();
    wait_nothing_left(&base);
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
    let s = common::Scratch::new();
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
    for (fanout, queues, pubs, subs, count, sub_ack) in [
        (false, 2u32, 1u32, 2u32, 20_000u64, 100u64),
        (true, 1, 2, 3, 5_000, 0),
    ] {
        let plan = throughput::Plan {
            fanout,
            queues,
            publishers: pubs,
            subscribers: subs,
            count,
            size: 64,
            pub_confirm: true,
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
        assert_eq!(d[1], published, "broker confirmed");
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
    assert!(
        (9.5..30.0).contains(&p50_rise),
        "median rose {p50_rise} ms"
    );

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
    wait_nothing_left(&base);
}
