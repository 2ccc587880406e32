//! Managed services through the agent, over real frames: start, observe,
//! liveness, stop; a service left running is stopped by `shutdown` and by
//! `env_restore`; errors come back as typed errors naming the service;
//! two sessions on one listening agent each end only their own.
//!
//! One test, run in order: the agent's services are per process, and the
//! journal directory comes from the process's environment.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use benchlab_agent::{AgentHandle, ServiceCallError};
use benchlab_core::Registry;
use benchlab_service::{procfs, Liveness, ServicePlan, ServiceSpec};

/// An agent session over loopback TCP, authenticated as every TCP agent
/// session is.
fn agent() -> (AgentHandle, JoinHandle<()>) {
    let key = benchlab_agent::channel::Key::from_bytes(b"service-test-key-0123456789abcdef");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let agent_key = key.clone();
    let h = std::thread::spawn(move || {
        benchlab_agent::listen::serve_listener(
            &l,
            &agent_key,
            &Registry::new(),
            true,
            Duration::from_secs(10),
        )
        .unwrap();
    });
    let c = benchlab_agent::listen::connect(addr, &key, Duration::from_secs(10)).unwrap();
    (AgentHandle::over_tcp(c, "svc-host").unwrap(), h)
}

fn plan(name: &str) -> ServicePlan {
    let spec: ServiceSpec =
        serde_json::from_str(&format!(r#"{{"name":"{name}","kind":"nginx","cpus":"0"}}"#)).unwrap();
    spec.plan(Path::new("/")).unwrap()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn gone(pgid: i32) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while !procfs::live_members(pgid).is_empty() {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

#[test]
fn services_through_the_agent() {
    assert!(
        Path::new("/usr/sbin/nginx").exists(),
        "nginx is missing: install the Debian package `nginx`"
    );
    let state = tempfile::tempdir().unwrap();
    std::env::set_var("BENCHLAB_STATE_DIR", state.path());
    let journal = state.path().join("journal");
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let b = base.path().to_str().unwrap();
    let never = AtomicBool::new(false);

    // Start, observe, check, stop.
    let (mut a, h) = agent();
    let started = a.service_start(&plan("web"), Some(b), &never).unwrap();
    assert_eq!(started.address, started.description.listen);
    assert!(started
        .description
        .version
        .as_deref()
        .unwrap()
        .starts_with("nginx/"));
    assert_eq!(started.description.placement(), "CPU 0");
    let u0 = a.service_usage("web", &never).unwrap();
    assert!(u0.processes >= 2 && u0.rss_kib > 0, "{u0:?}");
    let u1 = a.service_usage("web", &never).unwrap();
    assert!(u0.delta(&u1).elapsed_s > 0.0);
    assert_eq!(a.service_alive("web", &never).unwrap(), Liveness::Alive);
    assert_eq!(entries(&journal).len(), 1, "the service's journal");

    // A second start of the same name, and unknown names, are errors.
    match a.service_start(&plan("web"), Some(b), &never) {
        Err(ServiceCallError::Failed { agent, message }) => {
            assert_eq!(agent, "svc-host");
            assert_eq!(
                message,
                "service `web` already runs on this agent: stop it first"
            );
        }
        other => panic!("{other:?}"),
    }
    let e = a.service_usage("db", &never).unwrap_err().to_string();
    assert_eq!(e, "agent `svc-host`: no service `db` runs on this agent");
    // A bad input comes back with the service's own message.
    let mut bad = plan("bad");
    bad.spec.cpus = Some(vec![63]);
    let e = a
        .service_start(&bad, Some(b), &never)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("agent `svc-host`: service `bad`: cpus: CPU 63 not online"),
        "{e}"
    );

    // The server killed under the agent: reported with its signal.
    let pgid = started.description.pgid;
    // SAFETY: kill(2) of the server's main process, which this test started.
    unsafe { libc::kill(pgid, libc::SIGKILL) };
    let until = Instant::now() + Duration::from_secs(10);
    let reason = loop {
        match a.service_alive("web", &never).unwrap() {
            Liveness::Died { reason, .. } => break reason,
            Liveness::Alive if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Liveness::Alive => panic!("still alive after SIGKILL"),
        }
    };
    assert_eq!(reason, "nginx killed by signal 9 (SIGKILL)");
    let report = a
        .service_stop("web", Duration::from_secs(10), &never)
        .unwrap();
    assert!(report.died_before);
    assert!(gone(pgid));
    assert_eq!(entries(base.path()), Vec::<String>::new());
    assert_eq!(entries(&journal), Vec::<String>::new());

    // Started again, then the session ends: the agent stops it.
    let again = a.service_start(&plan("web"), Some(b), &never).unwrap();
    a.shutdown();
    h.join().unwrap();
    assert!(gone(again.description.pgid));
    assert_eq!(entries(base.path()), Vec::<String>::new());
    assert_eq!(entries(&journal), Vec::<String>::new());

    // Started, then `env_restore`: the agent stops it first.
    let (mut a, h) = agent();
    let third = a.service_start(&plan("web"), Some(b), &never).unwrap();
    let r = a
        .request(
            &benchlab_agent::Request::EnvRestore,
            Duration::from_secs(60),
            &never,
        )
        .unwrap();
    assert!(
        matches!(r, benchlab_agent::Response::EnvReverted { ref changes } if changes.is_empty()),
        "{r:?}"
    );
    assert!(gone(third.description.pgid));
    assert_eq!(entries(base.path()), Vec::<String>::new());
    assert_eq!(entries(&journal), Vec::<String>::new());
    a.shutdown();
    h.join().unwrap();

    // Two controllers' sessions on one listening agent (two runs sharing
    // a host): each sees and ends only its own services. Before, one
    // session's shutdown stopped the other's server in the middle of its
    // run.
    let key = benchlab_agent::channel::Key::from_bytes(b"service-test-key-0123456789abcdef");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let agent_key = key.clone();
    // Serves until the test process ends.
    std::thread::spawn(move || {
        let _ = benchlab_agent::listen::serve_listener(
            &l,
            &agent_key,
            &Registry::new(),
            false,
            Duration::from_secs(10),
        );
    });
    let session = |name: &str| {
        let c = benchlab_agent::listen::connect(addr, &key, Duration::from_secs(10)).unwrap();
        AgentHandle::over_tcp(c, name).unwrap()
    };
    let (mut one, mut two) = (session("one"), session("two"));
    let first = one.service_start(&plan("web1"), Some(b), &never).unwrap();
    let second = two.service_start(&plan("web2"), Some(b), &never).unwrap();
    let e = one.service_alive("web2", &never).unwrap_err().to_string();
    assert_eq!(e, "agent `one`: no service `web2` runs on this agent");
    // One name is still one service per agent, whichever session asks.
    assert!(two.service_start(&plan("web1"), Some(b), &never).is_err());
    one.shutdown();
    assert!(gone(first.description.pgid));
    assert_eq!(two.service_alive("web2", &never).unwrap(), Liveness::Alive);
    assert!(procfs::live_members(second.description.pgid).len() >= 2);
    two.service_stop("web2", Duration::from_secs(10), &never)
        .unwrap();
    assert!(gone(second.description.pgid));
    two.shutdown();
    assert_eq!(entries(base.path()), Vec::<String>::new());
    assert_eq!(entries(&journal), Vec::<String>::new());
}
