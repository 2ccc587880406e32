//! `fileserver.load` (NetBench over SMB against a real file server) and
//! `fileserver.local` (the same mix on a local or mounted directory:
//! dbench's case), as the number of clients grows.
//!
//! # How it measures
//!
//! Each point runs `clients` clients, spread by the engine over the client
//! hosts; each is a thread with its own back end — over SMB its own
//! libsmbclient context, hence its own TCP connection and session — and
//! its own directory (`clients/client<N>` of a run directory that this
//! host makes in the share). Every client replays the load file
//! (`load_file`, dbench's format; Debian's `/usr/share/dbench/client.txt`
//! by default, read where the `dbench` package installs it) in a loop.
//! The clients connect, then wait at the point's gate; after it opens they
//! replay for `warmup_s` (NetBench's ramp-up, not counted) and
//! `duration_s` (measured). `passes = n` instead replays the file exactly
//! n times per client, all counted (a fixed amount of work, whose totals
//! are the file's times n).
//!
//! - `mbytes_per_s`: Σ `size` of the `ReadX` and `WriteX` lines completed
//!   in the measured interval, in 10^6 B, per second of it — dbench's and
//!   smbtorture nbench's throughput (both count the lines' sizes, dbench
//!   `size`, nbench `ret_size`, equal in Debian's file); `mbits_per_s`:
//!   the same in 10^6 bit/s, as NetBench reported;
//! - `ops_per_s` and, per operation type, `<op>_per_s`, latency mean, p50
//!   and p99 (HDR histograms merged over every client of every host),
//!   `<op>_errors` (outcomes that differ from the status the trace
//!   expects) and `<op>_unsupported`;
//! - the generator's CPU per operation, and the server's (`fileserver.load`:
//!   smbd's processes, observed by the engine).
//!
//! A point where no operation completed fails, with the first error.
//!
//! *Differs from dbench*: dbench's MB/s is cumulative since the warm-up's
//! end and printed each second; benchlab's is the same quotient over the
//! whole measured interval. dbench exits at the first unexpected status;
//! benchlab counts them per type and goes on.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use benchlab_core::engine_metric::{SERVICE_CPU_S, SERVICE_UTIL_PCT};
use benchlab_core::param::{
    ParamDefault, ParamError, ParamKind, ParamSpec, Params, DURATION, WARMUP,
};
use benchlab_core::shape::{Combine, ServerSide, ViewSpec, CLIENTS, CLIENTS_PARAM};
use benchlab_core::ValidationError;
use benchlab_core::{ClientCtx, MetricSpec, Sample, SideResult, Workload, WorkloadError};

use crate::loadfile::{LoadFile, ALL_OPS, N_OPS};
use crate::replay::{self, Replay, ReplayError, Target};
use crate::smb::{Dialect, SmbClient};

/// The workload over SMB (`fileserver.load`) or on a directory
/// (`fileserver.local`).
pub struct FileserverLoad {
    smb: bool,
}

/// `fileserver.load`: the mix over SMB against a service.
pub static LOAD: FileserverLoad = FileserverLoad { smb: true };
/// `fileserver.local`: the mix on a local or mounted directory.
pub static LOCAL: FileserverLoad = FileserverLoad { smb: false };

/// Where Debian's dbench package installs its load file.
pub const DEBIAN_LOAD_FILE: &str = "/usr/share/dbench/client.txt";

const LOAD_FILE: ParamSpec = ParamSpec {
    name: "load_file",
    kind: ParamKind::Text,
    default: ParamDefault::Str(DEBIAN_LOAD_FILE),
    help: "the operation mix, a load file in dbench's format on each client host (default: Debian's dbench package's NetBench trace)",
};

const PASSES: ParamSpec = ParamSpec {
    name: "passes",
    kind: ParamKind::Count,
    default: ParamDefault::Int(0),
    help: "replay the load file exactly this many times per client, all counted, instead of warmup_s + duration_s (0: timed)",
};

const CLEANUP: ParamSpec = ParamSpec {
    name: "cleanup",
    kind: ParamKind::Bool,
    default: ParamDefault::Bool(true),
    help: "remove the run's directory (every client's files) after the point",
};

const DIALECT: ParamSpec = ParamSpec {
    name: "dialect",
    kind: ParamKind::Choice(Dialect::NAMES),
    default: ParamDefault::Str("smb3"),
    help: "SMB dialect: smb1 (NT1, seed 004's Windows 95/NT clients), smb2 (2.002–2.1), smb3 (3.0–3.1.1), any (negotiated)",
};

const SMB_CLIENT: ParamSpec = ParamSpec {
    name: "smb_client",
    kind: ParamKind::Choice(SmbClient::NAMES),
    default: ParamDefault::Str("libsmbclient"),
    help: "the SMB client: libsmbclient (Samba's library, every dialect; no byte-range locks or flush, counted unsupported) or native (benchlab's own SMB1 client: dialect = \"smb1\" only, every operation of the mix)",
};

const SHARE: ParamSpec = ParamSpec {
    name: "share",
    kind: ParamKind::Text,
    default: ParamDefault::Str("bench"),
    help: "the share's name (benchlab's Samba template exports `bench`)",
};

const USER: ParamSpec = ParamSpec {
    name: "user",
    kind: ParamKind::Text,
    default: ParamDefault::Str("www-data"),
    help: "the SMB user (benchlab's Samba service: its `user` variable, www-data by default)",
};

const PASSWORD_ENV: ParamSpec = ParamSpec {
    name: "password_env",
    kind: ParamKind::Text,
    default: ParamDefault::Str("BENCHLAB_SMB_PASSWORD"),
    help: "the environment variable holding the user's password on each client host (only its name is stored)",
};

const DIR: ParamSpec = ParamSpec {
    name: "dir",
    kind: ParamKind::Text,
    default: ParamDefault::Unset,
    help: "fileserver.local: the existing directory (local or mounted) in which the run's directory is made",
};

const SMB_PARAMS: &[ParamSpec] = &[
    CLIENTS_PARAM,
    LOAD_FILE,
    DIALECT,
    SMB_CLIENT,
    SHARE,
    USER,
    PASSWORD_ENV,
    DURATION,
    WARMUP,
    PASSES,
    CLEANUP,
];

const LOCAL_PARAMS: &[ParamSpec] = &[
    CLIENTS_PARAM,
    LOAD_FILE,
    DIR,
    DURATION,
    WARMUP,
    PASSES,
    CLEANUP,
];

/// Names of the client side's raw counters and values.
mod c {
    pub const READ_BYTES: &str = "read_bytes";
    pub const WRITE_BYTES: &str = "write_bytes";
    pub const READ_MOVED: &str = "read_moved_bytes";
    pub const WRITE_MOVED: &str = "write_moved_bytes";
    pub const PASSES: &str = "passes";
    pub const MEASURE_S: &str = "measure_s";
    pub const FIRST_ERROR_LINE: &str = "first_error_line";
    pub const FIRST_ERROR_OP: &str = "first_error_op";
    pub const FIRST_ERROR_ERRNO: &str = "first_error_errno";
    pub const FIRST_ERROR_CLIENT: &str = "first_error_client";
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Every metric: the headline ones, then six per operation type.
fn all_metrics() -> &'static [MetricSpec] {
    static M: OnceLock<Vec<MetricSpec>> = OnceLock::new();
    M.get_or_init(|| {
        let mut v = vec![
            MetricSpec::higher("mbytes_per_s", "Throughput (MB/s, dbench)", 1),
            MetricSpec::higher("mbits_per_s", "Throughput (Mbit/s, NetBench)", 1),
            MetricSpec::higher("ops_per_s", "Operations/s", 0),
            MetricSpec::higher("read_mbytes_per_s", "Read (MB/s)", 1),
            MetricSpec::higher("write_mbytes_per_s", "Written (MB/s)", 1),
            MetricSpec::lower("errors", "Unexpected statuses", 0).with(Combine::Sum),
            MetricSpec::lower("unsupported", "Unsupported operations", 0).with(Combine::Sum),
            MetricSpec::lower("client_cpu_us_per_op", "Client CPU per operation (µs)", 2)
                .with(Combine::Merged),
            MetricSpec::lower("service_cpu_us_per_op", "Server CPU per operation (µs)", 2)
                .with(Combine::Merged),
            MetricSpec::lower("service_util_pct", "Server CPU (%)", 1).with(Combine::Sum),
        ];
        for k in ALL_OPS {
            let (key, name) = (k.key(), k.file_name());
            v.push(MetricSpec::higher(
                leak(format!("{key}_per_s")),
                leak(format!("{name}/s")),
                0,
            ));
            for (stat, label) in [
                ("mean", "mean"),
                ("p50", "median"),
                ("p99", "99th percentile"),
            ] {
                v.push(
                    MetricSpec::lower(
                        leak(format!("{key}_{stat}_ms")),
                        leak(format!("{name} {label} latency (ms)")),
                        3,
                    )
                    .with(Combine::Merged),
                );
            }
            v.push(
                MetricSpec::lower(
                    leak(format!("{key}_errors")),
                    leak(format!("{name} unexpected statuses")),
                    0,
                )
                .with(Combine::Sum),
            );
            v.push(
                MetricSpec::lower(
                    leak(format!("{key}_unsupported")),
                    leak(format!("{name} unsupported")),
                    0,
                )
                .with(Combine::Sum),
            );
        }
        v
    })
}

/// A point's settings, read once.
struct Config {
    load_file: PathBuf,
    ramp_up: Duration,
    measure: Duration,
    passes: Option<u64>,
    cleanup: bool,
}

fn secs(params: &Params, name: &str) -> Result<Duration, WorkloadError> {
    let s = params.f64(name)?;
    Duration::try_from_secs_f64(s).map_err(|_| {
        WorkloadError::Param(ParamError {
            name: name.into(),
            problem: format!("expected a non-negative number of seconds, got {s}"),
        })
    })
}

impl FileserverLoad {
    fn kind_name(&self) -> &'static str {
        if self.smb {
            "fileserver.load"
        } else {
            "fileserver.local"
        }
    }

    fn other(&self, m: impl std::fmt::Display) -> WorkloadError {
        WorkloadError::Other(format!("{}: {m}", self.kind_name()))
    }

    fn config(&self, params: &Params) -> Result<Config, WorkloadError> {
        if let Err(e) = self.validate(params) {
            return Err(self.other(e.to_string()));
        }
        let passes = params.u64(PASSES.name)?;
        Ok(Config {
            load_file: PathBuf::from(params.str(LOAD_FILE.name)?),
            ramp_up: if passes > 0 {
                Duration::ZERO
            } else {
                secs(params, WARMUP.name)?
            },
            measure: if passes > 0 {
                Duration::ZERO
            } else {
                secs(params, DURATION.name)?
            },
            passes: (passes > 0).then_some(passes),
            cleanup: params.bool(CLEANUP.name)?,
        })
    }

    fn target(&self, params: &Params, ctx: &ClientCtx) -> Result<Target, WorkloadError> {
        if !self.smb {
            return Ok(Target::Local {
                dir: PathBuf::from(params.str(DIR.name)?),
            });
        }
        let addr = ctx.server.ok_or_else(|| {
            self.other(
                "no server address (a [[service]] of kind \"samba\", or address = \"host:port\")",
            )
        })?;
        let var = params.str(PASSWORD_ENV.name)?;
        let password = std::env::var(var).map_err(|_| {
            self.other(format!(
                "password_env: environment variable {var} is not set on this client host (it holds the SMB user's password)"
            ))
        })?;
        Ok(Target::Smb {
            server: addr.to_string(),
            share: params.str(SHARE.name)?.to_string(),
            dialect: Dialect::parse(params.str(DIALECT.name)?).expect("a checked choice"),
            client: SmbClient::parse(params.str(SMB_CLIENT.name)?).expect("a checked choice"),
            user: params.str(USER.name)?.to_string(),
            password,
        })
    }
}

impl Workload for FileserverLoad {
    /// One operation is a file operation.
    fn operation_rate(&self) -> Option<&'static str> {
        Some("ops_per_s")
    }

    fn kind(&self) -> &'static str {
        self.kind_name()
    }

    fn summary(&self) -> &'static str {
        if self.smb {
            "NetBench-style file-server load over SMB (libsmbclient, SMB1/2/3, or benchlab's native SMB1 client) against a real Samba server, replaying dbench's load file: MB/s, Mbit/s, ops/s and latency by operation vs clients"
        } else {
            "dbench-style load on a local or mounted directory, replaying the same load file as fileserver.load: MB/s, ops/s and latency by operation vs clients"
        }
    }

    fn params(&self) -> &'static [ParamSpec] {
        if self.smb {
            SMB_PARAMS
        } else {
            LOCAL_PARAMS
        }
    }

    fn row_param(&self) -> &'static str {
        CLIENTS
    }

    fn validate(&self, params: &Params) -> Result<(), ValidationError> {
        let bad = |k: &str, m: String| Err(ValidationError::new(k, m));
        if let Ok(0) = params.u64(CLIENTS) {
            return bad(CLIENTS, "must be at least 1".into());
        }
        let timed = matches!(params.u64(PASSES.name), Ok(0));
        if timed {
            if let Ok(d) = params.f64(DURATION.name) {
                if d.is_nan() || d <= 0.0 || d.is_infinite() {
                    return bad(DURATION.name, format!("must be > 0, got {d}"));
                }
            }
            if let Ok(w) = params.f64(WARMUP.name) {
                if w.is_nan() || w < 0.0 || w.is_infinite() {
                    return bad(WARMUP.name, format!("must be >= 0, got {w}"));
                }
            }
        }
        if params.str(LOAD_FILE.name).is_ok_and(str::is_empty) {
            return bad(LOAD_FILE.name, "must name a load file".into());
        }
        if self.smb {
            match params.str(DIALECT.name) {
                Ok(d) if Dialect::parse(d).is_none() => {
                    return bad(
                        DIALECT.name,
                        format!(
                            "unknown dialect `{d}`; one of {}",
                            Dialect::NAMES.join(", ")
                        ),
                    )
                }
                _ => {}
            }
            match (params.str(SMB_CLIENT.name), params.str(DIALECT.name)) {
                (Ok(c), _) if SmbClient::parse(c).is_none() => {
                    return bad(
                        SMB_CLIENT.name,
                        format!(
                            "unknown SMB client `{c}`; one of {}",
                            SmbClient::NAMES.join(", ")
                        ),
                    )
                }
                (Ok("native"), Ok(d)) if d != "smb1" => {
                    return bad(
                        SMB_CLIENT.name,
                        format!(
                        "the native client speaks only SMB1: set dialect = \"smb1\" (got `{d}`)"
                    ),
                    )
                }
                _ => {}
            }
            for k in [SHARE.name, USER.name, PASSWORD_ENV.name] {
                if params.str(k).is_ok_and(|s| s.is_empty() || s.contains('/')) {
                    return bad(k, "must be a non-empty name without `/`".into());
                }
            }
        } else {
            match params.str(DIR.name) {
                Err(_) => {
                    return bad(
                        DIR.name,
                        "missing: fileserver.local needs dir = \"/existing/directory\"".into(),
                    )
                }
                Ok(d) if !d.starts_with('/') => {
                    return bad(DIR.name, format!("{d} is not an absolute path"))
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn table_metrics(&self, _params: &Params) -> Vec<MetricSpec> {
        all_metrics()
            .iter()
            .filter(|m| {
                matches!(
                    m.name,
                    "mbytes_per_s" | "mbits_per_s" | "ops_per_s" | "errors" | "service_util_pct"
                )
            })
            .copied()
            .collect()
    }

    fn metrics(&self, _params: &Params) -> Vec<MetricSpec> {
        all_metrics().to_vec()
    }

    fn views(&self, _params: &Params) -> Vec<ViewSpec> {
        vec![
            ViewSpec::Curve {
                x_param: CLIENTS.into(),
                metric: "mbits_per_s".into(),
            },
            ViewSpec::Table {
                row_param: CLIENTS.into(),
            },
        ]
    }

    fn expected_duration(&self, params: &Params) -> Duration {
        let s = [WARMUP.name, DURATION.name]
            .iter()
            .map(|n| params.f64(n).unwrap_or(0.0).max(0.0))
            .sum::<f64>();
        Duration::from_secs_f64(s + 1.0)
    }

    fn measured_window(&self, params: &Params) -> Option<(Duration, Duration)> {
        // With `passes`, all of each client's run is measured: the
        // service is observed over the clients' whole run.
        if !matches!(params.u64(PASSES.name), Ok(0)) {
            return None;
        }
        let s = |n: &str| Duration::from_secs_f64(params.f64(n).unwrap_or(0.0).max(0.0));
        Some((s(WARMUP.name), s(DURATION.name)))
    }

    fn server_side(&self) -> ServerSide {
        if self.smb {
            ServerSide::Service
        } else {
            ServerSide::None
        }
    }

    fn clients_axis(&self) -> bool {
        true
    }

    fn run_client(&self, params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
        let cfg = self.config(params)?;
        let share = ctx.share;
        if share.count == 0 {
            return Ok(SideResult::default());
        }
        // Every input is checked before the gate: a bad load file fails
        // the point on every host before any client connects.
        let file = Arc::new(LoadFile::read(&cfg.load_file).map_err(|e| self.other(e))?);
        let spec = Replay {
            target: self.target(params, ctx)?,
            first: share.first,
            count: share.count,
            ramp_up: cfg.ramp_up,
            measure: cfg.measure,
            passes: cfg.passes,
            cleanup: cfg.cleanup,
        };
        let gate = ctx.gate.clone();
        let arrive = move || gate.arrive().map_err(|e| e.to_string());
        match replay::run(&spec, &file, &ctx.abort, &arrive) {
            Ok(out) => Ok(side_result(&out)),
            Err(ReplayError::Aborted) => Err(WorkloadError::Aborted),
            Err(e) => Err(self.other(e)),
        }
    }

    fn combine(
        &self,
        _params: &Params,
        client: SideResult,
        server: Option<SideResult>,
    ) -> Result<Sample, WorkloadError> {
        let metrics = derive(&client, server.as_ref()).map_err(|m| self.other(m))?;
        Ok(Sample {
            metrics,
            client,
            server,
            ..Sample::default()
        })
    }

    fn merge_value(&self, _name: &str) -> Combine {
        // The measured interval is the same on every host (the longest
        // stands); of the first errors, any one is an example.
        Combine::Max
    }

    fn notes(&self, _params: &Params, metrics: &BTreeMap<String, f64>) -> Vec<String> {
        let mut out = Vec::new();
        if metrics.get("errors").is_some_and(|e| *e > 0.0) {
            out.push(
                "some operations' outcomes differed from the statuses the load file expects (see the <op>_errors figures)".into(),
            );
        }
        if metrics.get("unsupported").is_some_and(|e| *e > 0.0) {
            out.push(
                "libsmbclient has no byte-range lock and no flush: LockX, UnlockX and Flush lines were not sent over SMB".into(),
            );
        }
        out
    }
}

/// The client side's raw result: counters per type (`ops_<op>`,
/// `errors_<op>`, `unsupported_<op>`), bytes, and a histogram per type.
fn side_result(out: &replay::Outcomes) -> SideResult {
    let t = &out.tally;
    let mut s = SideResult::default();
    for k in ALL_OPS {
        let i = k as usize;
        s.counters.insert(format!("ops_{}", k.key()), t.ops[i]);
        s.counters
            .insert(format!("errors_{}", k.key()), t.errors[i]);
        s.counters
            .insert(format!("unsupported_{}", k.key()), t.unsupported[i]);
        if t.latency[i].count() > 0 {
            s.histograms
                .insert(format!("latency_{}", k.key()), t.latency[i].data());
        }
    }
    s.counters.insert(c::READ_BYTES.into(), t.read_bytes);
    s.counters.insert(c::WRITE_BYTES.into(), t.write_bytes);
    s.counters.insert(c::READ_MOVED.into(), t.read_moved);
    s.counters.insert(c::WRITE_MOVED.into(), t.write_moved);
    s.counters.insert(c::PASSES.into(), t.passes);
    s.values.insert(c::MEASURE_S.into(), out.measure_s);
    if let Some(e) = t.first_error {
        s.values
            .insert(c::FIRST_ERROR_LINE.into(), f64::from(e.line));
        s.values
            .insert(c::FIRST_ERROR_OP.into(), e.kind as usize as f64);
        s.values
            .insert(c::FIRST_ERROR_ERRNO.into(), f64::from(e.errno));
        s.values
            .insert(c::FIRST_ERROR_CLIENT.into(), f64::from(e.client));
    }
    s.cpu = Some(out.cpu.clone());
    s.peak_rss_kib = benchlab_core::cpu::peak_rss_kib();
    s
}

/// The first unexpected status, in words, from the raw values.
fn first_error(client: &SideResult) -> Option<String> {
    let line = client.values.get(c::FIRST_ERROR_LINE)?;
    let op = ALL_OPS
        .get(client.value(c::FIRST_ERROR_OP) as usize)
        .map_or("?", |k| k.file_name());
    let errno = client.value(c::FIRST_ERROR_ERRNO) as i32;
    let what = if errno == 0 {
        "an outcome the trace does not expect".to_string()
    } else {
        format!("failed: {}", std::io::Error::from_raw_os_error(errno))
    };
    Some(format!(
        "client {}, load-file line {line}: {op} {what}",
        client.value(c::FIRST_ERROR_CLIENT)
    ))
}

/// The metrics, from the (merged) client result and the service
/// observation.
fn derive(
    client: &SideResult,
    server: Option<&SideResult>,
) -> Result<BTreeMap<String, f64>, String> {
    let total_ops: u64 = ALL_OPS
        .iter()
        .map(|k| client.counter(&format!("ops_{}", k.key())))
        .sum();
    let errors: u64 = ALL_OPS
        .iter()
        .map(|k| client.counter(&format!("errors_{}", k.key())))
        .sum();
    if total_ops == 0 {
        return Err(format!(
            "no operation completed in the measured interval{}",
            first_error(client)
                .map(|e| format!(" (first error: {e})"))
                .unwrap_or_default()
        ));
    }
    let secs = client.value(c::MEASURE_S);
    if secs.is_nan() || secs <= 0.0 {
        return Err("the client result has no measured interval".into());
    }
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: f64| {
        m.insert(k.to_string(), v);
    };
    let (r, w) = (
        client.counter(c::READ_BYTES),
        client.counter(c::WRITE_BYTES),
    );
    put("mbytes_per_s", (r + w) as f64 / secs / 1e6);
    put("mbits_per_s", (r + w) as f64 * 8.0 / secs / 1e6);
    put("read_mbytes_per_s", r as f64 / secs / 1e6);
    put("write_mbytes_per_s", w as f64 / secs / 1e6);
    put("ops_per_s", total_ops as f64 / secs);
    put("errors", errors as f64);
    let unsupported: u64 = ALL_OPS
        .iter()
        .map(|k| client.counter(&format!("unsupported_{}", k.key())))
        .sum();
    put("unsupported", unsupported as f64);
    for k in ALL_OPS {
        let key = k.key();
        put(
            &format!("{key}_per_s"),
            client.counter(&format!("ops_{key}")) as f64 / secs,
        );
        put(
            &format!("{key}_errors"),
            client.counter(&format!("errors_{key}")) as f64,
        );
        put(
            &format!("{key}_unsupported"),
            client.counter(&format!("unsupported_{key}")) as f64,
        );
        if let Some(h) = client.histograms.get(&format!("latency_{key}")) {
            let hist = h.decode().map_err(|e| format!("latency_{key}: {e}"))?;
            put(&format!("{key}_mean_ms"), h.mean / 1e6);
            put(
                &format!("{key}_p50_ms"),
                hist.value_at_quantile(0.5) as f64 / 1e6,
            );
            put(
                &format!("{key}_p99_ms"),
                hist.value_at_quantile(0.99) as f64 / 1e6,
            );
        }
    }
    if let Some(cpu) = &client.cpu {
        put(
            "client_cpu_us_per_op",
            cpu.process_cpu_s * 1e6 / total_ops as f64,
        );
    }
    if let Some(s) = server {
        let cpu_s = s.engine(SERVICE_CPU_S);
        if !cpu_s.is_nan() {
            put("service_cpu_us_per_op", cpu_s * 1e6 / total_ops as f64);
        }
        let util = s.engine(SERVICE_UTIL_PCT);
        if !util.is_nan() {
            put("service_util_pct", util);
        }
    }
    Ok(m)
}

/// How many metrics each operation type has (for tests and docs).
pub const METRICS_PER_OP: usize = 6;

const _: () = assert!(N_OPS == 17);

#[cfg(test)]
mod tests {
    use super::*;
    use benchlab_core::Value;

    fn params(w: &FileserverLoad, pairs: &[(&str, Value)]) -> Params {
        let mut p = Params::defaults(w.params());
        p.set(DURATION.name, Value::Float(1.0));
        p.set(WARMUP.name, Value::Float(0.0));
        for (k, v) in pairs {
            p.set(k, v.clone());
        }
        p
    }

    #[test]
    fn bad_input_names_the_key() {
        let p = params(&LOAD, &[(DIALECT.name, Value::Str("smb9".into()))]);
        let ValidationError { key: k, message: m } = LOAD.validate(&p).unwrap_err();
        assert_eq!(k, "dialect");
        assert!(m.contains("smb1, smb2, smb3, any"), "{m}");
        let p = params(&LOAD, &[(CLIENTS, Value::Int(0))]);
        assert_eq!(LOAD.validate(&p).unwrap_err().key, CLIENTS);
        // The native client speaks only SMB1; the default dialect is smb3.
        let native = (SMB_CLIENT.name, Value::Str("native".into()));
        let ValidationError { key: k, message: m } = LOAD
            .validate(&params(&LOAD, std::slice::from_ref(&native)))
            .unwrap_err();
        assert_eq!(k, "smb_client");
        assert!(m.contains("only SMB1"), "{m}");
        let smb1 = (DIALECT.name, Value::Str("smb1".into()));
        assert!(LOAD.validate(&params(&LOAD, &[native, smb1])).is_ok());
        let p = params(&LOAD, &[(SMB_CLIENT.name, Value::Str("pavao".into()))]);
        let ValidationError { key: k, message: m } = LOAD.validate(&p).unwrap_err();
        assert_eq!(k, "smb_client");
        assert!(m.contains("libsmbclient, native"), "{m}");
        assert!(LOAD.validate(&params(&LOAD, &[])).is_ok());
        let ValidationError { key: k, message: m } =
            LOCAL.validate(&params(&LOCAL, &[])).unwrap_err();
        assert_eq!(k, "dir");
        assert!(m.contains("missing"), "{m}");
        let p = params(&LOCAL, &[(DIR.name, Value::Str("rel".into()))]);
        assert_eq!(LOCAL.validate(&p).unwrap_err().key, "dir");
    }

    #[test]
    fn shapes() {
        let timed = params(&LOAD, &[]);
        assert_eq!(
            LOAD.measured_window(&timed),
            Some((Duration::ZERO, Duration::from_secs(1)))
        );
        let passes = params(&LOAD, &[(PASSES.name, Value::Int(2))]);
        assert_eq!(LOAD.measured_window(&passes), None);
        assert_eq!(LOAD.server_side(), ServerSide::Service);
        assert_eq!(LOCAL.server_side(), ServerSide::None);
        assert_eq!(
            all_metrics().len(),
            10 + N_OPS * METRICS_PER_OP,
            "every metric declared once"
        );
    }

    #[test]
    fn nothing_done_is_a_failed_point() {
        let mut s = SideResult::default();
        s.values.insert(c::MEASURE_S.into(), 1.0);
        let e = LOAD
            .combine(&params(&LOAD, &[]), s, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no operation completed"), "{e}");
    }

    #[test]
    fn throughput_is_dbench_s_quotient_and_every_metric_is_declared() {
        let mut s = SideResult::default();
        s.counters.insert("ops_readx".into(), 10);
        s.counters.insert(c::READ_BYTES.into(), 3_000_000);
        s.counters.insert(c::WRITE_BYTES.into(), 1_000_000);
        s.values.insert(c::MEASURE_S.into(), 2.0);
        let mut lat = crate::latency::Latency::with_digits(crate::latency::DIGITS);
        lat.record(2_000_000);
        s.histograms.insert("latency_readx".into(), lat.data());
        let m = derive(&s, None).unwrap();
        assert_eq!(m["mbytes_per_s"], 2.0);
        assert_eq!(m["mbits_per_s"], 16.0);
        assert_eq!(m["readx_per_s"], 5.0);
        assert!((m["readx_p50_ms"] - 2.0).abs() < 0.02);
        let declared: Vec<&str> = all_metrics().iter().map(|m| m.name).collect();
        for k in m.keys() {
            assert!(declared.contains(&k.as_str()), "{k} undeclared");
        }
    }
}
