//! The replay engine alone, for `bench/fileserver-vs-classic`: the same
//! clients and counting as `fileserver.load`/`fileserver.local`, without
//! the study, store and agent around them.
//!
//! ```text
//! nbreplay smb HOST:PORT SHARE USER DIALECT LOADFILE CLIENTS RAMP_S MEASURE_S   (password: $SMB_PASSWORD; client: $SMB_CLIENT, libsmbclient or native)
//! nbreplay local DIR LOADFILE CLIENTS RAMP_S MEASURE_S
//! ```
//!
//! `NBREPLAY_PASSES=N` replays the load file exactly N times per client
//! instead (ramp-up and measured time are then ignored), for `bench/cost`.
//!
//! Prints `mbytes_per_s=… ops=… errors=… unsupported=… cpu_s=…` (cpu_s:
//! the clients' own CPU time over the measured interval).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use benchlab_wl_fileserver::loadfile::LoadFile;
use benchlab_wl_fileserver::replay::{run, Replay, Target};
use benchlab_wl_fileserver::smb::{Dialect, SmbClient};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: nbreplay smb HOST:PORT SHARE USER DIALECT LOADFILE CLIENTS RAMP_S MEASURE_S | nbreplay local DIR LOADFILE CLIENTS RAMP_S MEASURE_S";
    let (target, rest) = match a.first().map(String::as_str) {
        Some("smb") if a.len() == 9 => (
            Target::Smb {
                server: a[1].clone(),
                share: a[2].clone(),
                user: a[3].clone(),
                dialect: Dialect::parse(&a[4]).expect("dialect: smb1, smb2, smb3 or any"),
                client: SmbClient::parse(
                    &std::env::var("SMB_CLIENT").unwrap_or_else(|_| "libsmbclient".into()),
                )
                .expect("SMB_CLIENT: libsmbclient or native"),
                password: std::env::var("SMB_PASSWORD").expect("SMB_PASSWORD"),
            },
            &a[5..],
        ),
        Some("local") if a.len() == 6 => (
            Target::Local {
                dir: a[1].clone().into(),
            },
            &a[2..],
        ),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let file = Arc::new(LoadFile::read(rest[0].as_ref()).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    }));
    let secs = |s: &str| Duration::from_secs_f64(s.parse().expect("seconds"));
    let spec = Replay {
        target,
        first: 0,
        count: rest[1].parse().expect("clients"),
        ramp_up: secs(&rest[2]),
        measure: secs(&rest[3]),
        passes: std::env::var("NBREPLAY_PASSES")
            .ok()
            .map(|p| p.parse().expect("NBREPLAY_PASSES: a whole number")),
        cleanup: true,
    };
    match run(&spec, &file, &AtomicBool::new(false), &|| Ok(())) {
        Ok(o) => {
            let t = &o.tally;
            let ops: u64 = t.ops.iter().sum();
            println!(
                "mbytes_per_s={:.3} ops={ops} errors={} unsupported={} cpu_s={:.3}",
                (t.read_bytes + t.write_bytes) as f64 / o.measure_s / 1e6,
                t.errors.iter().sum::<u64>(),
                t.unsupported.iter().sum::<u64>(),
                o.cpu.process_cpu_s,
            );
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
