//! The generator against Debian's real nginx and apache2, each started by
//! the test from its own configuration. Every figure is checked against
//! something independent: the server's access log (one line per request it
//! answered, with the bytes it sent), and the sizes of the files benchlab
//! generated.

mod support;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use benchlab_wl_web::fileset::FileSet;
use benchlab_wl_web::gen::{run, HttpVersion, LoadResult, LoadSpec, Pace, Target};
use support::{missing, Kind, LogLine, Server};

fn spec(server: &Server, targets: Vec<Target>) -> LoadSpec {
    LoadSpec {
        addr: server.addr,
        host: "localhost".into(),
        targets,
        connections: 8,
        threads: 2,
        keep_alive: true,
        version: HttpVersion::V11,
        pace: Pace::Closed,
        ramp_up: Duration::from_millis(300),
        measure: Duration::from_millis(1500),
        ramp_down: Duration::from_millis(200),
        timeout: Duration::from_secs(5),
        seed: 42,
        spin_polls: 0,
        poll_budget: 0.0,
    }
}

/// The server's own counts equal the generator's over the whole run, and
/// nothing failed.
fn check_against_log(r: &LoadResult, log: &[LogLine]) {
    let t = &r.total;
    assert_eq!(r.in_flight_at_end, 0, "the drain completed every request");
    assert_eq!(t.errors(), 0, "{t:?}");
    assert_eq!(t.ok, t.responses);
    assert_eq!(t.sent, t.responses);
    assert_eq!(
        log.len() as u64,
        t.responses,
        "access-log lines vs responses"
    );
    let served: u64 = log.iter().map(|l| l.bytes_sent).sum();
    assert_eq!(served, t.bytes, "server bytes_sent vs bytes read");
    assert!(log.iter().all(|l| l.status == 200));
    assert!(r.measured.ok > 0 && r.measured.ok < t.ok);
    assert_eq!(r.latency.count(), r.measured.responses);
}

/// How the generator waits: sleep at once, spin a fixed number of polls,
/// or poll adaptively within a budget of empty polls per response.
#[derive(Clone, Copy)]
enum Poll {
    Sleep,
    Spin(u32),
    Adaptive(f64),
}

fn closed_loop_mix(kind: Kind, keep_alive: bool, version: HttpVersion, poll: Poll) {
    if missing(kind) {
        return;
    }
    let _serial = support::serial();
    let mut server = Server::start(kind);
    let manifest = FileSet::Specweb96 { dirs: 2 }
        .generate(&server.docroot, 96)
        .unwrap();
    let mut s = spec(&server, manifest.targets());
    s.keep_alive = keep_alive;
    s.version = version;
    match poll {
        Poll::Sleep => {}
        Poll::Spin(n) => s.spin_polls = n,
        Poll::Adaptive(b) => s.poll_budget = b,
    }
    let r = run(&s, &AtomicBool::new(false), &|| Ok(())).unwrap();
    server.stop();
    let log = server.access_log();
    check_against_log(&r, &log);
    // Every body had its file's size (a mismatch counts as a short body,
    // and check_against_log demands none); the log agrees per URL.
    for l in &log {
        let e = manifest.entries.iter().find(|e| e.url == l.path).unwrap();
        assert!(
            l.bytes_sent > e.size.unwrap(),
            "{l:?} carries the whole file and a head"
        );
    }
    // The body bytes are exactly the files' sizes summed over responses.
    let body: u64 = log
        .iter()
        .map(|l| {
            manifest
                .entries
                .iter()
                .find(|e| e.url == l.path)
                .unwrap()
                .size
                .unwrap()
        })
        .sum();
    assert_eq!(body, r.total.body_bytes);
    // The mix reached every class: the 1 % class too, over a few thousand
    // requests.
    for class in 0..4 {
        let tag = format!("/class{class}_");
        assert!(
            log.iter().any(|l| l.path.contains(&tag)),
            "class {class} never requested"
        );
    }
    manifest.remove().unwrap();
}

#[test]
fn nginx_keep_alive_mix_matches_access_log() {
    closed_loop_mix(Kind::Nginx, true, HttpVersion::V11, Poll::Sleep);
}

/// Polling before each sleep changes when responses are seen, not which:
/// the counts still equal the server's.
#[test]
fn nginx_spinning_keep_alive_mix_matches_access_log() {
    closed_loop_mix(Kind::Nginx, true, HttpVersion::V11, Poll::Spin(64));
}

/// The adaptive poll (issue 29) grows and shrinks its polls as responses
/// come; what it counts still equals the server's access log, in requests
/// and bytes, on a keep-alive mix and with connections that close.
#[test]
fn nginx_adaptive_poll_mix_matches_access_log() {
    closed_loop_mix(Kind::Nginx, true, HttpVersion::V11, Poll::Adaptive(0.5));
    closed_loop_mix(Kind::Nginx, false, HttpVersion::V11, Poll::Adaptive(0.5));
}

#[test]
fn nginx_http10_close_mix_matches_access_log() {
    closed_loop_mix(Kind::Nginx, false, HttpVersion::V10, Poll::Sleep);
}

#[test]
fn apache2_keep_alive_mix_matches_access_log() {
    closed_loop_mix(Kind::Apache2, true, HttpVersion::V11, Poll::Sleep);
}

#[test]
fn apache2_http11_close_mix_matches_access_log() {
    closed_loop_mix(Kind::Apache2, false, HttpVersion::V11, Poll::Sleep);
}

/// Open loop at 2000 requests/s achieves the rate within ±1 %, counted
/// from responses completed in the measured interval.
fn open_loop_rate(kind: Kind) {
    if missing(kind) {
        return;
    }
    let _serial = support::serial();
    let mut server = Server::start(kind);
    let manifest = FileSet::Single { size: 1024 }
        .generate(&server.docroot, 1)
        .unwrap();
    let mut s = spec(&server, manifest.targets());
    s.pace = Pace::Open { rate_per_s: 2000.0 };
    s.measure = Duration::from_secs(3);
    let r = run(&s, &AtomicBool::new(false), &|| Ok(())).unwrap();
    server.stop();
    check_against_log(&r, &server.access_log());
    let open = r.open.unwrap();
    // 6000 requests scheduled in the 3 s window (± one per thread at the
    // edges).
    assert!((5998..=6002).contains(&open.scheduled), "{open:?}");
    assert!(!open.behind(), "{open:?}");
    let achieved = r.measured.responses as f64 / r.measure_s;
    assert!(
        (achieved - 2000.0).abs() <= 20.0,
        "achieved {achieved} req/s for 2000 ({open:?})"
    );
    manifest.remove().unwrap();
}

#[test]
fn nginx_open_loop_achieves_rate() {
    open_loop_rate(Kind::Nginx);
}

#[test]
fn apache2_open_loop_achieves_rate() {
    open_loop_rate(Kind::Apache2);
}

/// A missing file is a status error, counted as the server logged it.
#[test]
fn nginx_missing_file_is_status_error() {
    if missing(Kind::Nginx) {
        return;
    }
    let _serial = support::serial();
    let mut server = Server::start(Kind::Nginx);
    let mut s = spec(
        &server,
        vec![Target {
            path: "/no-such-file".into(),
            size: None,
            weight: 1.0,
        }],
    );
    s.connections = 2;
    s.measure = Duration::from_millis(300);
    let r = run(&s, &AtomicBool::new(false), &|| Ok(())).unwrap();
    server.stop();
    let log = server.access_log();
    assert_eq!(r.total.ok, 0);
    assert!(r.total.err_status > 0);
    assert_eq!(r.total.err_status, r.total.errors());
    assert_eq!(log.len() as u64, r.total.err_status);
    assert!(log.iter().all(|l| l.status == 404));
    let served: u64 = log.iter().map(|l| l.bytes_sent).sum();
    assert_eq!(served, r.total.bytes);
}

/// A response whose body is not the manifest's size is a short-body error:
/// the generator is told the wrong size for a real file.
#[test]
fn nginx_wrong_size_is_short_body() {
    if missing(Kind::Nginx) {
        return;
    }
    let _serial = support::serial();
    let server = Server::start(Kind::Nginx);
    let manifest = FileSet::Single { size: 1000 }
        .generate(&server.docroot, 2)
        .unwrap();
    let mut t = manifest.targets();
    t[0].size = Some(999);
    let mut s = spec(&server, t);
    s.connections = 2;
    s.measure = Duration::from_millis(300);
    let r = run(&s, &AtomicBool::new(false), &|| Ok(())).unwrap();
    assert_eq!(r.total.ok, 0);
    assert!(r.total.err_short > 0);
    assert_eq!(r.total.err_short, r.total.responses);
    manifest.remove().unwrap();
}

/// A gate for two client sides run side by side, as two client hosts.
struct BarrierGate(std::sync::Barrier);

impl benchlab_core::Gate for BarrierGate {
    fn arrive(&self) -> Result<(), benchlab_core::WorkloadError> {
        self.0.wait();
        Ok(())
    }
}

/// The workload as the engine drives it: the file set put in place by
/// `prepare_service`, two client sides sharing one point's clients behind
/// one gate, their results merged by the declared rules, then combined.
/// The merged counts equal the server's access log; removal leaves the
/// document root as it was.
#[test]
fn web_load_two_client_sides_on_nginx() {
    use benchlab_core::shape::{merge_sides, ClientShare, ServiceInfo};
    use benchlab_core::{ClientCtx, Params, Value, Workload};
    use benchlab_wl_web::LOAD;
    use std::sync::Arc;

    if missing(Kind::Nginx) {
        return;
    }
    let _serial = support::serial();
    let mut server = Server::start(Kind::Nginx);
    let mut p = Params::defaults(LOAD.params());
    p.set("clients", Value::Int(6));
    p.set("dirs", Value::Int(1));
    p.set("duration_s", Value::Float(1.0));
    p.set("warmup_s", Value::Float(0.2));
    p.set("http_version", Value::Str("1.0".into()));
    p.set("keep_alive", Value::Bool(false));
    assert!(LOAD.validate(&p).is_ok());
    let svc = ServiceInfo {
        name: "web".into(),
        kind: "nginx".into(),
        document_root: Some(server.docroot.clone()),
        port: server.addr.port(),
    };
    let made = LOAD.prepare_service(&p, &svc).unwrap();
    let gate = Arc::new(BarrierGate(std::sync::Barrier::new(2)));
    let sides: Vec<_> = ClientShare::spread(6, 2)
        .into_iter()
        .map(|share| {
            let mut ctx = ClientCtx::single(
                Some(server.addr),
                0,
                Arc::new(std::sync::atomic::AtomicBool::new(false)),
            );
            ctx.share = share;
            ctx.gate = gate.clone();
            ctx.service = Some(svc.clone());
            let p = p.clone();
            std::thread::spawn(move || LOAD.run_client(&p, &ctx).unwrap())
        })
        .collect();
    let parts: Vec<_> = sides.into_iter().map(|h| h.join().unwrap()).collect();
    let merged = merge_sides(parts, &|n| LOAD.merge_value(n)).unwrap();
    let sample = LOAD.combine(&p, merged, None).unwrap();
    server.stop();
    let log = server.access_log();
    let c = &sample.client;
    assert_eq!(log.len() as u64, c.counter("total_responses"));
    assert_eq!(
        log.iter().map(|l| l.bytes_sent).sum::<u64>(),
        c.counter("total_bytes")
    );
    assert_eq!(c.counter("total_errors"), 0);
    assert_eq!(c.counter("in_flight_at_end"), 0);
    let m = &sample.metrics;
    assert_eq!(m["errors"], 0.0);
    assert_eq!(m["requests_per_s"], c.counter("requests") as f64 / 1.0);
    assert!(m["latency_p50_ms"] > 0.0 && m["latency_p99_ms"] >= m["latency_p50_ms"]);
    assert_eq!(
        c.histograms["latency"].count,
        c.counter("responses"),
        "one latency per measured response, over both sides"
    );
    benchlab_wl_web::fileset::remove_paths(&made).unwrap();
    assert_eq!(std::fs::read_dir(&server.docroot).unwrap().count(), 0);
}

/// A point where the server answers every request with an error fails.
#[test]
fn web_load_all_failed_point_fails_on_nginx() {
    use benchlab_core::{ClientCtx, Params, Value, Workload};
    use benchlab_wl_web::LOAD;
    use std::sync::Arc;

    if missing(Kind::Nginx) {
        return;
    }
    let _serial = support::serial();
    let server = Server::start(Kind::Nginx);
    let list = server.docroot.join("urls.txt");
    std::fs::write(&list, "/nothing-here\n").unwrap();
    let mut p = Params::defaults(LOAD.params());
    p.set("clients", Value::Int(2));
    p.set("file_set", Value::Str("urls".into()));
    p.set("url_list", Value::Str(list.display().to_string()));
    p.set("duration_s", Value::Float(0.3));
    p.set("warmup_s", Value::Float(0.0));
    let mut ctx = ClientCtx::single(
        Some(server.addr),
        0,
        Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    ctx.share.count = 2;
    ctx.share.total = 2;
    let side = LOAD.run_client(&p, &ctx).unwrap();
    assert!(side.counter("errors_status") > 0);
    let err = LOAD.combine(&p, side, None).unwrap_err().to_string();
    assert!(err.contains("no request succeeded"), "{err}");
}
