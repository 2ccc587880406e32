//! Debian's real nginx and apache2 (and a command), started, probed,
//! observed and stopped as plain processes on loopback. Every test checks
//! that nothing is left behind: no process, no scratch directory, no
//! journal.

mod common;

use std::time::Duration;

use benchlab_service::{Liveness, Service, ServiceKind, MASK};
use common::*;

/// Starts, serves a known file N times, checks the server's own access
/// log count and the bytes against the file, observes, stops.
fn serve_and_count(kind: &str, version_prefix: &str) {
    require_root();
    require(kind, kind);
    let d = Dirs::new();
    let p = plan(&format!(
        "name = \"web\"\nkind = \"{kind}\"\nprobe = {{ http = \"/\" }}"
    ));
    let mut svc = Service::start(&p, &d.opts()).unwrap();
    let desc = svc.description().clone();
    assert_eq!(desc.kind.name(), kind);
    assert!(
        desc.version
            .as_deref()
            .is_some_and(|v| v.starts_with(version_prefix)),
        "{:?}",
        desc.version
    );
    let config = desc.config.clone().unwrap();
    assert!(config.contains(&desc.listen.to_string()), "{config}");
    assert!(!config.contains("{{"), "{config}");
    assert_eq!(desc.placement(), "any CPU");
    assert!(desc.scratch.starts_with(d.base.path()));
    let log = desc.scratch.join("access.log");
    let file = put_file(&desc.document_root, "f1k.html", 1024);
    let u0 = svc.usage();
    const N: usize = 200;
    for _ in 0..N {
        let (status, body) = get(svc.address(), "/f1k.html");
        assert_eq!(status, 200);
        assert_eq!(body.len() as u64, std::fs::metadata(&file).unwrap().len());
    }
    let (status, _) = get(svc.address(), "/missing.html");
    assert_eq!(status, 404);
    let u1 = svc.usage();
    // Both servers write each request's line when it completes: every
    // request above has completed. (The probe's GET of / is logged too,
    // maybe only after the probe has gone: it is not counted.)
    let text = std::fs::read_to_string(&log).unwrap();
    let count = |what: &str| text.lines().filter(|l| l.contains(what)).count();
    assert_eq!(
        count("GET /f1k.html HTTP/1.0\" 200 1024"),
        N,
        "{kind}: {text}"
    );
    assert_eq!(
        count("GET /missing.html HTTP/1.0\" 404 "),
        1,
        "{kind}: {text}"
    );
    let delta = u0.delta(&u1);
    assert!(u1.processes >= 2, "{u1:?}"); // a master and at least one worker
    assert!(u1.threads >= u1.processes);
    assert!(u1.rss_kib > 1000, "{u1:?}");
    assert!(delta.elapsed_s > 0.0 && delta.cpu_s >= 0.0);
    // Each request wakes a worker that waited for it.
    assert!(delta.voluntary_ctxt_switches > 0, "{delta:?}");
    assert_eq!(svc.check_alive(), Liveness::Alive);
    let pgid = svc.pgid();
    let report = svc.stop().unwrap();
    assert!(!report.died_before);
    assert!(!report.forced, "{kind} needed SIGKILL");
    assert_eq!(report.usage.processes, u1.processes);
    d.assert_nothing_left(Some(pgid));
}

#[test]
fn nginx_starts_serves_is_observed_and_stops() {
    serve_and_count("nginx", "nginx/");
}

#[test]
fn apache2_starts_serves_is_observed_and_stops() {
    serve_and_count("apache2", "Apache/2.4");
}

/// The placement reaches every process, workers included.
fn placed(kind: &str) {
    require_root();
    require(kind, kind);
    let d = Dirs::new();
    let p = plan(&format!("name = \"web\"\nkind = \"{kind}\"\ncpus = \"1\""));
    let svc = Service::start(&p, &d.opts()).unwrap();
    assert_eq!(svc.description().placement(), "CPU 1");
    assert_eq!(svc.description().workers, "1");
    // apache2's children come up after it answers: wait for them.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let mut members = benchlab_service::procfs::live_members(svc.pgid());
    while members.len() < 2 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
        members = benchlab_service::procfs::live_members(svc.pgid());
    }
    assert!(members.len() >= 2, "{members:?}");
    for pid in &members {
        assert_eq!(cpus_allowed(*pid), "1", "{kind} process {pid}");
    }
    let pgid = svc.pgid();
    svc.stop().unwrap();
    d.assert_nothing_left(Some(pgid));
}

#[test]
fn nginx_runs_on_its_cpus() {
    placed("nginx");
}

#[test]
fn apache2_runs_on_its_cpus() {
    placed("apache2");
}

/// A server killed under benchlab is reported with its signal; stopping
/// it then removes what is left (nginx's orphaned workers).
#[test]
fn a_killed_server_is_reported_with_its_signal() {
    require_root();
    require("nginx", "nginx");
    let d = Dirs::new();
    let mut svc = Service::start(&plan("name = \"web\"\nkind = \"nginx\""), &d.opts()).unwrap();
    assert_eq!(svc.check_alive(), Liveness::Alive);
    // SAFETY: kill(2) of the server's main process, which this test owns.
    unsafe { libc::kill(svc.pgid(), libc::SIGKILL) };
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let reason = loop {
        match svc.check_alive() {
            Liveness::Died { reason, .. } => break reason,
            Liveness::Alive => {
                assert!(std::time::Instant::now() < until, "still alive");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    };
    assert_eq!(reason, "nginx killed by signal 9 (SIGKILL)");
    let pgid = svc.pgid();
    let report = svc.stop().unwrap();
    assert!(report.died_before);
    assert_eq!(report.exit, "killed by signal 9 (SIGKILL)");
    d.assert_nothing_left(Some(pgid));
}

/// A command service with a secret: the server gets the value, the
/// description and every serialized form only the mask. Its CPU time as
/// benchlab sees it agrees with the server's own count.
#[test]
fn a_command_service_with_a_secret() {
    require_root();
    require("python3", "python3");
    let d = Dirs::new();
    let out = tempfile::tempdir().unwrap();
    let secret_file = out.path().join("token");
    std::fs::write(&secret_file, "s3cr3t-value\n").unwrap();
    let cpu_file = out.path().join("cpu.txt");
    let seen_file = out.path().join("seen.txt");
    let study = out.path();
    std::fs::write(study.join("app.conf"), "token={{token}}\nport={{port}}\n").unwrap();
    // A server that listens, answers nothing, burns one CPU, and on
    // SIGTERM writes its own CPU time and that of the children it waited
    // for (python3 runs some at start-up), then exits.
    let script = format!(
        "import os,signal,socket,sys\n\
         def bye(*a):\n    t=os.times(); open('{cpu}','w').write(repr(t.user+t.system+t.children_user+t.children_system)); sys.exit(0)\n\
         signal.signal(signal.SIGTERM, bye)\n\
         s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n\
         open('{seen}','w').write(open(sys.argv[2]).read() + sys.argv[3])\n\
         while True: pass\n",
        cpu = cpu_file.display(),
        seen = seen_file.display()
    );
    let toml_text = format!(
        "name = \"app\"\nkind = \"command\"\nconfig = \"app.conf\"\n\
         argv = [\"python3\", \"-c\", {script:?}, \"{{{{port}}}}\", \"{{{{config}}}}\", \"--token={{{{token}}}}\"]\n\
         secrets = {{ token = {{ file = \"token\" }} }}\n"
    );
    let p = plan_in(&toml_text, study);
    let plan_json = serde_json::to_string(&p).unwrap();
    assert!(!plan_json.contains("s3cr3t"), "{plan_json}");
    let svc = Service::start(&p, &d.opts()).unwrap();
    let desc = svc.description().clone();
    assert_eq!(desc.kind, ServiceKind::Command);
    assert!(desc.program.ends_with("/python3"), "{}", desc.program);
    assert_eq!(
        desc.config.as_deref().unwrap(),
        format!("token={MASK}\nport={}\n", desc.listen.port())
    );
    assert_eq!(desc.argv.last().unwrap(), &format!("--token={MASK}"));
    let desc_json = serde_json::to_string(&desc).unwrap();
    assert!(!desc_json.contains("s3cr3t"), "{desc_json}");
    std::thread::sleep(Duration::from_millis(500));
    // The server got the real value, in its config and its arguments.
    assert_eq!(
        std::fs::read_to_string(&seen_file).unwrap(),
        format!(
            "token=s3cr3t-value\nport={}\n--token=s3cr3t-value",
            desc.listen.port()
        )
    );
    let pgid = svc.pgid();
    let report = svc.stop().unwrap();
    assert_eq!(report.exit, "exited with code 0");
    let own: f64 = std::fs::read_to_string(&cpu_file).unwrap().parse().unwrap();
    // benchlab's snapshot came just before the SIGTERM, the server's own
    // count just after: within the clock tick (10 ms) and the moments
    // between the two.
    let seen = report.usage.cpu_s;
    assert!(seen > 0.0, "{report:?}");
    assert!(
        seen <= own + 0.011 && own - seen < 0.5,
        "benchlab saw {seen} s, the server counted {own} s"
    );
    d.assert_nothing_left(Some(pgid));
}

/// On an IPv6 address, `listen` is `[addr]:port` in both templates.
#[test]
fn nginx_and_apache2_listen_on_ipv6_loopback() {
    require_root();
    for kind in ["nginx", "apache2"] {
        require(kind, kind);
        let d = Dirs::new();
        let p = plan(&format!(
            "name = \"web6\"\nkind = \"{kind}\"\nbind = \"::1\"\nprobe = {{ http = \"/\" }}"
        ));
        let svc = Service::start(&p, &d.opts()).unwrap();
        assert!(svc.address().is_ipv6());
        let listen = format!("[::1]:{}", svc.address().port());
        assert!(svc
            .description()
            .config
            .as_deref()
            .unwrap()
            .contains(&listen));
        put_file(&svc.description().document_root, "six.html", 600);
        let (status, body) = get(svc.address(), "/six.html");
        assert_eq!((status, body.len()), (200, 600), "{kind}");
        let pgid = svc.pgid();
        svc.stop().unwrap();
        d.assert_nothing_left(Some(pgid));
    }
}

/// A command that exits by itself after it was ready: its exit code is
/// the reason, and the stop still cleans up.
#[test]
fn a_command_that_exits_is_reported_with_its_code() {
    require("python3", "python3");
    let d = Dirs::new();
    let script = "import socket,sys,time\n\
                  s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n\
                  time.sleep(0.3); sys.exit(3)\n";
    let p = plan(&format!(
        "name = \"app\"\nkind = \"command\"\nargv = [\"python3\", \"-c\", {script:?}, \"{{{{port}}}}\"]"
    ));
    let mut svc = Service::start(&p, &d.opts()).unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let reason = loop {
        match svc.check_alive() {
            Liveness::Died { reason, .. } => break reason,
            Liveness::Alive => {
                assert!(std::time::Instant::now() < until, "still alive");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    };
    assert_eq!(reason, "python3 exited with code 3");
    let pgid = svc.pgid();
    let report = svc.stop().unwrap();
    assert!(report.died_before && !report.forced);
    assert_eq!(report.exit, "exited with code 3");
    d.assert_nothing_left(Some(pgid));
}

/// A server that ignores SIGTERM is killed after its grace period.
#[test]
fn a_server_that_ignores_sigterm_is_killed_after_its_grace() {
    require("python3", "python3");
    let d = Dirs::new();
    let script = "import signal,socket,sys,time\n\
                  signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
                  s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n\
                  time.sleep(3600)\n";
    let p = plan(&format!(
        "name = \"stubborn\"\nkind = \"command\"\nstop_timeout_s = 0.3\n\
         argv = [\"python3\", \"-c\", {script:?}, \"{{{{port}}}}\"]"
    ));
    let svc = Service::start(&p, &d.opts()).unwrap();
    let pgid = svc.pgid();
    let report = svc.stop().unwrap();
    assert!(report.forced && !report.died_before, "{report:?}");
    assert_eq!(report.exit, "killed by signal 9 (SIGKILL)");
    d.assert_nothing_left(Some(pgid));
}

/// A starter pinned elsewhere (an agent under `taskset`) still places the
/// server on the CPUs the study names.
#[test]
fn a_pinned_starter_still_places_the_server_on_its_cpus() {
    require_root();
    require("nginx", "nginx");
    let d = Dirs::new();
    let opts = d.opts();
    let (pgid, members) = std::thread::spawn(move || {
        // SAFETY: pins this thread only, with a valid set.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0
            );
        }
        let svc = Service::start(
            &plan("name = \"web\"\nkind = \"nginx\"\ncpus = \"1\""),
            &opts,
        )
        .unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(10);
        let mut members = benchlab_service::procfs::live_members(svc.pgid());
        while members.len() < 2 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
            members = benchlab_service::procfs::live_members(svc.pgid());
        }
        let allowed: Vec<String> = members.iter().map(|p| cpus_allowed(*p)).collect();
        let pgid = svc.pgid();
        svc.stop().unwrap();
        (pgid, allowed)
    })
    .join()
    .unwrap();
    assert!(members.len() >= 2, "{members:?}");
    assert!(members.iter().all(|c| c == "1"), "{members:?}");
    d.assert_nothing_left(Some(pgid));
}
