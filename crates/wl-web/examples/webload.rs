//! A small harness around the `web.load` generator for `bench/web-vs-classic`
//! (it compares the generator with wrk and oha on the same server).
//!
//! ```text
//! webload gen <docroot> <seed> specweb96 <dirs> | single <bytes>   # prints a URL list
//! webload run <host:port> <url-list> [-c N] [-t N] [-d S] [--ramp S]
//!             [--spin N] [--poll-budget B] [--close] [--http10] [--rate R]
//! ```
//!
//! `run` prints one line of `key=value` figures; CPU figures are this
//! process's user + system time over the measured interval; `total_ok`
//! counts the successful responses of the whole run (ramps included).

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use benchlab_wl_web::fileset::{read_url_list, FileSet};
use benchlab_wl_web::gen::{run, HttpVersion, LoadSpec, Pace};

fn usage() -> ExitCode {
    eprintln!(
        "usage: webload gen <docroot> <seed> (specweb96 <dirs> | single <bytes>)\n       \
         webload run <host:port> <url-list> [-c N] [-t N] [-d S] [--ramp S] [--spin N] [--poll-budget B] [--close] [--http10] [--rate R]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("gen") if args.len() == 5 => gen(&args[1..]),
        Some("run") if args.len() >= 3 => load(&args[1..]),
        _ => usage(),
    }
}

fn gen(a: &[String]) -> ExitCode {
    let (Ok(seed), Ok(n)) = (a[1].parse::<u64>(), a[3].parse::<u64>()) else {
        return usage();
    };
    let set = match a[2].as_str() {
        "specweb96" => FileSet::Specweb96 { dirs: n as u32 },
        "single" => FileSet::Single { size: n },
        _ => return usage(),
    };
    match set.generate(Path::new(&a[0]), seed) {
        Ok(m) => {
            print!("{}", m.url_list());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("webload: {e}");
            ExitCode::FAILURE
        }
    }
}

fn load(a: &[String]) -> ExitCode {
    let Ok(addr) = a[0].parse::<SocketAddr>() else {
        eprintln!("webload: {:?} is not host:port", a[0]);
        return ExitCode::from(2);
    };
    let targets = match read_url_list(Path::new(&a[1])) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("webload: {e}");
            return ExitCode::from(2);
        }
    };
    let mut spec = LoadSpec {
        addr,
        host: addr.ip().to_string(),
        targets,
        connections: 16,
        threads: 0,
        keep_alive: true,
        version: HttpVersion::V11,
        pace: Pace::Closed,
        ramp_up: Duration::from_secs(1),
        measure: Duration::from_secs(5),
        ramp_down: Duration::ZERO,
        timeout: Duration::from_secs(10),
        seed: 1,
        spin_polls: 0,
        poll_budget: 0.0,
    };
    let mut it = a[2..].iter();
    while let Some(flag) = it.next() {
        let mut num = || it.next().and_then(|v| v.parse::<f64>().ok());
        match flag.as_str() {
            "-c" => spec.connections = num().unwrap_or(0.0) as u32,
            "-t" => spec.threads = num().unwrap_or(0.0) as u32,
            "-d" => spec.measure = Duration::from_secs_f64(num().unwrap_or(0.0)),
            "--ramp" => spec.ramp_up = Duration::from_secs_f64(num().unwrap_or(0.0)),
            "--rate" => {
                spec.pace = Pace::Open {
                    rate_per_s: num().unwrap_or(0.0),
                }
            }
            "--spin" => spec.spin_polls = num().unwrap_or(0.0) as u32,
            "--poll-budget" => spec.poll_budget = num().unwrap_or(0.0),
            "--close" => spec.keep_alive = false,
            "--http10" => spec.version = HttpVersion::V10,
            _ => return usage(),
        }
    }
    let r = match run(&spec, &AtomicBool::new(false), &|| Ok(())) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("webload: {e}");
            return ExitCode::FAILURE;
        }
    };
    let m = &r.measured;
    let rps = m.ok as f64 / r.measure_s;
    let cpu_s = r.cpu.process_cpu_s;
    let mut line = format!(
        "requests_per_s={rps:.1} mbytes_per_s={:.2} errors={} p50_ms={:.3} p99_ms={:.3} \
         cpu_s={cpu_s:.3} cpu_us_per_req={:.3} threads={} total_ok={} in_flight_at_end={}",
        m.bytes as f64 / r.measure_s / 1e6,
        m.errors(),
        r.latency.quantile(0.5) as f64 / 1e6,
        r.latency.quantile(0.99) as f64 / 1e6,
        cpu_s * 1e6 / m.ok.max(1) as f64,
        r.threads,
        r.total.ok,
        r.in_flight_at_end,
    );
    if let Some(o) = r.open {
        line.push_str(&format!(
            " target_rate={} achieved_rate={:.1} scheduled={} sent={} behind={} max_lag_ms={:.3}",
            o.rate_per_s,
            m.responses as f64 / r.measure_s,
            o.scheduled,
            o.sent,
            o.behind(),
            o.max_lag_ns as f64 / 1e6
        ));
    }
    println!("{line}");
    ExitCode::SUCCESS
}
