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
