//! How long a managed service takes to start (release to ready), to stop,
//! and what one usage snapshot costs: `cargo run -p benchlab-service
//! --example service_timings [ROUNDS]` (as root; nginx and apache2
//! installed). Prints the median and the extremes per server.

use std::time::Instant;

use benchlab_service::{Service, ServiceSpec, StartOptions};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let base = std::env::temp_dir();
    let journal = tempfile_dir();
    let opts = StartOptions {
        scratch_base: base,
        journal_dir: journal.clone(),
        secrets: Default::default(),
    };
    for kind in ["nginx", "apache2"] {
        let spec: ServiceSpec =
            serde_json::from_str(&format!(r#"{{"name":"timing","kind":"{kind}"}}"#)).unwrap();
        let plan = spec.plan(std::path::Path::new("/")).unwrap();
        let (mut start, mut ready, mut snap, mut stop) = (vec![], vec![], vec![], vec![]);
        for _ in 0..rounds {
            let t = Instant::now();
            let svc = Service::start(&plan, &opts).unwrap();
            start.push(t.elapsed().as_secs_f64() * 1e3);
            ready.push(svc.description().ready_after_s * 1e3);
            for _ in 0..20 {
                let t = Instant::now();
                std::hint::black_box(svc.usage());
                snap.push(t.elapsed().as_secs_f64() * 1e3);
            }
            let t = Instant::now();
            svc.stop().unwrap();
            stop.push(t.elapsed().as_secs_f64() * 1e3);
        }
        for (what, v) in [
            ("start (checks to ready)", &mut start),
            ("release to ready", &mut ready),
            ("usage snapshot", &mut snap),
            ("stop", &mut stop),
        ] {
            let (lo, hi) = (
                v.iter().cloned().fold(f64::INFINITY, f64::min),
                v.iter().cloned().fold(0.0, f64::max),
            );
            println!(
                "{kind:8} {what:24} median {:8.2} ms  min {lo:8.2}  max {hi:8.2}  (n = {})",
                median(v),
                v.len()
            );
        }
    }
    let _ = std::fs::remove_dir(&journal);
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("benchlab-timings-journal-{}", std::process::id()));
    std::fs::create_dir(&d).unwrap();
    d
}
