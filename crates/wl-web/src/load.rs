//! `web.load`: WebBench-style HTTP load against a real web server (a
//! service benchlab starts or is pointed at), as the number of clients
//! grows.
//!
//! # How it measures
//!
//! Each point runs `clients` connections, spread by the engine over the
//! client hosts; this side runs its share with the [`crate::gen`]
//! generator, connects them all, waits at the point's gate, then loads the
//! server for `warmup_s` (ramp-up, WebBench's "ramp up"), `duration_s`
//! (measured) and `ramp_down_s` (not counted either). A response counts in
//! the measured interval when it completes inside it.
//!
//! - `requests_per_s`: successful responses (status < 400, body of the
//!   file's size) per second; `mbytes_per_s`: bytes read (heads and
//!   bodies, 10^6 B/s) per second, WebBench's throughput;
//! - `errors` and its classes (connect, timeout, status ≥ 400, short
//!   body, other); `failed_pct`;
//! - latency mean, p50 and p99 from the merged HDR histograms of all
//!   client hosts;
//! - open loop (`rate_per_s` set): the achieved rate and
//!   `open_loop_behind` = 1 when fewer than 99 % of the requests scheduled
//!   in the measured interval were sent inside it (the generator, not the server,
//!   fell behind: the point's figures then describe a lower load);
//! - the service's CPU use over the measured interval, as the engine
//!   observed it.
//!
//! A point where no request succeeded fails, with the error counts as its
//! reason: a server that answers everything with 404 has no throughput.
//!
//! *Differs from WebBench*: the file set is SPECweb96's (WebBench's
//! `zd_static_v20` was never published, see [`crate::fileset`]); a
//! "client" is one connection driven by an event loop, where WebBench ran
//! threads on client PCs (2 per PC in seed 004): `clients = 240` matches
//! seed 004's 120 systems × 2 threads.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use benchlab_core::engine_metric::{SERVICE_CPU_S, SERVICE_UTIL_PCT};
use benchlab_core::param::{
    ParamDefault, ParamError, ParamKind, ParamSpec, Params, DURATION, WARMUP,
};
use benchlab_core::shape::{Combine, ServerSide, ServiceInfo, ViewSpec, CLIENTS, CLIENTS_PARAM};
use benchlab_core::ValidationError;
use benchlab_core::{ClientCtx, MetricSpec, Sample, SideResult, Workload, WorkloadError};

use crate::fileset::{read_url_list, FileSet};
use crate::gen::{run, HttpVersion, LoadError, LoadResult, LoadSpec, Pace, Target};

/// The `web.load` workload.
pub struct WebLoad;

/// The registered instance.
pub static LOAD: WebLoad = WebLoad;

const KIND: &str = "web.load";

const FILE_SET: ParamSpec = ParamSpec {
    name: "file_set",
    kind: ParamKind::Choice(&["specweb96", "single", "urls"]),
    default: ParamDefault::Str("specweb96"),
    help: "what is requested: the SPECweb96 tree generated into the service's document root, one file of file_size bytes, or the URL list url_list",
};

const DIRS: ParamSpec = ParamSpec {
    name: "dirs",
    kind: ParamKind::Count,
    default: ParamDefault::Int(10),
    help: "SPECweb96 directories of 36 files (5.12 MB) each",
};

const FILE_SIZE: ParamSpec = ParamSpec {
    name: "file_size",
    kind: ParamKind::Bytes,
    default: ParamDefault::Int(1024),
    help: "size of the one file of file_set = \"single\"",
};

const URL_LIST: ParamSpec = ParamSpec {
    name: "url_list",
    kind: ParamKind::Text,
    default: ParamDefault::Unset,
    help: "file_set = \"urls\": a file of `path [size [weight]]` lines on each client host; a size is checked against every response",
};

const SEED: ParamSpec = ParamSpec {
    name: "seed",
    kind: ParamKind::Count,
    default: ParamDefault::Int(1),
    help: "seed of the file set's contents and of the request mix",
};

const KEEP_ALIVE: ParamSpec = ParamSpec {
    name: "keep_alive",
    kind: ParamKind::Bool,
    default: ParamDefault::Bool(true),
    help: "keep connections open between requests; false: a new connection per request (WebBench: HTTP/1.0 without keep-alive)",
};

const HTTP_VERSION: ParamSpec = ParamSpec {
    name: "http_version",
    kind: ParamKind::Choice(&["1.0", "1.1"]),
    default: ParamDefault::Str("1.1"),
    help: "HTTP version of the requests (WebBench: \"1.0\")",
};

const RATE: ParamSpec = ParamSpec {
    name: "rate_per_s",
    kind: ParamKind::Float,
    default: ParamDefault::Unset,
    help: "open loop: requests/s over all clients, latency from each request's intended send time; unset: closed loop",
};

const RAMP_DOWN: ParamSpec = ParamSpec {
    name: "ramp_down_s",
    kind: ParamKind::Seconds,
    default: ParamDefault::Float(0.0),
    help: "load after the measured interval, not counted (WebBench's ramp down; the ramp up is warmup_s)",
};

const TIMEOUT: ParamSpec = ParamSpec {
    name: "timeout_s",
    // Not `Seconds`: `run --scale` shrinks durations for trial runs, and a
    // server does not answer faster for that.
    kind: ParamKind::Float,
    default: ParamDefault::Float(10.0),
    help: "a request unanswered this long fails (timeout class)",
};

const THREADS: ParamSpec = ParamSpec {
    name: "threads",
    kind: ParamKind::Count,
    default: ParamDefault::Int(0),
    help: "generator threads per client host (0: one per CPU)",
};

const SPIN: ParamSpec = ParamSpec {
    name: "spin_polls",
    kind: ParamKind::Count,
    default: ParamDefault::Int(0),
    help: "polls for more responses before each sleep (0: sleep at once); fewer wake-ups of the generator spare a CPU-bound server, on virtual machines mostly, at the price of generator CPU (docs/web.md)",
};

const POLL_BUDGET: ParamSpec = ParamSpec {
    name: "poll_budget",
    kind: ParamKind::Float,
    default: ParamDefault::Float(0.0),
    help: "adaptive polling (0: off): empty polls allowed per response on average; the polls before each sleep grow while they find responses and shrink when they do not, up to spin_polls (0: 64) (docs/web.md)",
};

/// An adaptive poll's budget above this many empty polls per response is
/// a busy loop, not a spin.
const MAX_POLL_BUDGET: f64 = 16.0;

/// More polls than this before a sleep is a busy loop, not a spin.
const MAX_SPIN: u64 = 10_000;

const PARAMS: &[ParamSpec] = &[
    CLIENTS_PARAM,
    FILE_SET,
    DIRS,
    FILE_SIZE,
    URL_LIST,
    SEED,
    KEEP_ALIVE,
    HTTP_VERSION,
    RATE,
    DURATION,
    WARMUP,
    RAMP_DOWN,
    TIMEOUT,
    THREADS,
    SPIN,
    POLL_BUDGET,
];

const METRICS: &[MetricSpec] = &[
    MetricSpec::higher("requests_per_s", "Requests/s", 0),
    MetricSpec::higher("mbytes_per_s", "Throughput (MB/s)", 1),
    MetricSpec::lower("latency_min_ms", "Fastest request (ms)", 3).with(Combine::Min),
    MetricSpec::lower("latency_mean_ms", "Mean latency (ms)", 3).with(Combine::Merged),
    MetricSpec::lower("latency_p50_ms", "Median latency (ms)", 3).with(Combine::Merged),
    MetricSpec::lower("latency_p99_ms", "99th percentile latency (ms)", 3).with(Combine::Merged),
    MetricSpec::lower("errors", "Failed requests", 0).with(Combine::Sum),
    MetricSpec::lower("failed_pct", "Failed requests (%)", 2).with(Combine::Merged),
    MetricSpec::lower("errors_connect", "Connect errors", 0).with(Combine::Sum),
    MetricSpec::lower("errors_timeout", "Timeouts", 0).with(Combine::Sum),
    MetricSpec::lower("errors_status", "Responses with status >= 400", 0).with(Combine::Sum),
    MetricSpec::lower("errors_short_body", "Short bodies", 0).with(Combine::Sum),
    MetricSpec::lower("errors_other", "Other errors", 0).with(Combine::Sum),
    MetricSpec::higher("achieved_rate_per_s", "Achieved rate (requests/s)", 0),
    MetricSpec::higher("target_rate_per_s", "Target rate (requests/s)", 0),
    MetricSpec::lower("open_loop_behind", "Generator behind schedule (1 = yes)", 0)
        .with(Combine::Max),
    MetricSpec::lower("max_send_lag_ms", "Largest send delay (ms)", 3).with(Combine::Max),
    MetricSpec::lower(
        "client_cpu_us_per_request",
        "Generator CPU per request (µs)",
        2,
    )
    .with(Combine::Merged),
    MetricSpec::lower(
        "service_cpu_us_per_request",
        "Server CPU per request (µs)",
        2,
    )
    .with(Combine::Merged),
    MetricSpec::lower("service_util_pct", "Server CPU (%)", 1).with(Combine::Sum),
];

/// Names of the counters in the client side's result.
mod c {
    pub const OK: &str = "requests";
    pub const RESPONSES: &str = "responses";
    pub const SENT: &str = "sent";
    pub const BYTES: &str = "bytes";
    pub const BODY: &str = "body_bytes";
    pub const E_CONNECT: &str = "errors_connect";
    pub const E_TIMEOUT: &str = "errors_timeout";
    pub const E_STATUS: &str = "errors_status";
    pub const E_SHORT: &str = "errors_short_body";
    pub const E_OTHER: &str = "errors_other";
    pub const TOTAL_RESPONSES: &str = "total_responses";
    pub const TOTAL_BYTES: &str = "total_bytes";
    pub const TOTAL_ERRORS: &str = "total_errors";
    pub const IN_FLIGHT: &str = "in_flight_at_end";
    pub const SCHEDULED: &str = "open_scheduled";
    pub const SCHED_SENT: &str = "open_sent";
    pub const LATE: &str = "open_late";
    pub const LATENCY: &str = "latency";
}

/// A point's settings, read once.
struct Config {
    file_set: String,
    dirs: u32,
    file_size: u64,
    url_list: Option<PathBuf>,
    seed: u64,
    keep_alive: bool,
    version: HttpVersion,
    rate: Option<f64>,
    ramp_up: Duration,
    measure: Duration,
    ramp_down: Duration,
    timeout: Duration,
    threads: u32,
    spin_polls: u32,
    poll_budget: f64,
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

impl Config {
    fn read(params: &Params) -> Result<Config, WorkloadError> {
        if let Err(e) = LOAD.validate(params) {
            return Err(WorkloadError::Other(format!("{KIND}: {e}")));
        }
        Ok(Config {
            file_set: params.str(FILE_SET.name)?.to_string(),
            dirs: params.u64(DIRS.name)? as u32,
            file_size: params.u64(FILE_SIZE.name)?,
            url_list: params.str(URL_LIST.name).ok().map(PathBuf::from),
            seed: params.u64(SEED.name)?,
            keep_alive: params.bool(KEEP_ALIVE.name)?,
            version: if params.str(HTTP_VERSION.name)? == "1.0" {
                HttpVersion::V10
            } else {
                HttpVersion::V11
            },
            rate: params.get(RATE.name).and_then(|v| v.as_f64()),
            ramp_up: secs(params, WARMUP.name)?,
            measure: secs(params, DURATION.name)?,
            ramp_down: secs(params, RAMP_DOWN.name)?,
            timeout: secs(params, TIMEOUT.name)?,
            threads: params.u64(THREADS.name)? as u32,
            spin_polls: params.u64(SPIN.name)? as u32,
            poll_budget: params.f64(POLL_BUDGET.name)?,
        })
    }

    /// The generated set, if the point uses one.
    fn file_set(&self) -> Option<FileSet> {
        match self.file_set.as_str() {
            "specweb96" => Some(FileSet::Specweb96 { dirs: self.dirs }),
            "single" => Some(FileSet::Single {
                size: self.file_size,
            }),
            _ => None,
        }
    }

    fn targets(&self) -> Result<Vec<Target>, WorkloadError> {
        match (self.file_set(), &self.url_list) {
            (Some(set), _) => Ok(set.targets(self.seed)),
            (None, Some(list)) => read_url_list(list)
                .map_err(|e| WorkloadError::Other(format!("{KIND}: url_list: {e}"))),
            (None, None) => Err(WorkloadError::Other(format!(
                "{KIND}: file_set = \"urls\" needs url_list"
            ))),
        }
    }
}

impl Workload for WebLoad {
    /// One operation is an HTTP request.
    fn operation_rate(&self) -> Option<&'static str> {
        Some("requests_per_s")
    }

    fn kind(&self) -> &'static str {
        KIND
    }

    fn summary(&self) -> &'static str {
        "HTTP/1.x load on a real web server, WebBench-style (SPECweb96 file mix, closed or open loop): requests/s, MB/s, errors, latency vs clients"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn row_param(&self) -> &'static str {
        CLIENTS
    }

    fn validate(&self, params: &Params) -> Result<(), ValidationError> {
        let bad = |k: &str, m: String| Err(ValidationError::new(k, m));
        if let Ok(0) = params.u64(CLIENTS) {
            return bad(CLIENTS, "must be at least 1".into());
        }
        if let Ok(d) = params.f64(DURATION.name) {
            if d.is_nan() || d <= 0.0 || d.is_infinite() {
                return bad(DURATION.name, format!("must be > 0, got {d}"));
            }
        }
        for name in [WARMUP.name, RAMP_DOWN.name] {
            if let Ok(v) = params.f64(name) {
                if v.is_nan() || v < 0.0 || v.is_infinite() {
                    return bad(name, format!("must be >= 0, got {v}"));
                }
            }
        }
        if let Ok(t) = params.f64(TIMEOUT.name) {
            if t.is_nan() || t <= 0.0 || t.is_infinite() {
                return bad(TIMEOUT.name, format!("must be > 0, got {t}"));
            }
        }
        if let Ok(n) = params.u64(SPIN.name) {
            if n > MAX_SPIN {
                return bad(SPIN.name, format!("must be at most {MAX_SPIN}, got {n}"));
            }
        }
        if let Ok(b) = params.f64(POLL_BUDGET.name) {
            if !(0.0..=MAX_POLL_BUDGET).contains(&b) {
                return bad(
                    POLL_BUDGET.name,
                    format!("must be from 0 (off) to {MAX_POLL_BUDGET}, got {b}"),
                );
            }
        }
        if let Some(v) = params.get(RATE.name) {
            match v.as_f64() {
                Some(r) if r > 0.0 && r.is_finite() => {}
                _ => {
                    return bad(
                        RATE.name,
                        format!("must be a positive number of requests/s, got {}", v.label()),
                    )
                }
            }
        }
        match params.str(FILE_SET.name) {
            Ok("urls") if params.get(URL_LIST.name).is_none() => {
                return bad(
                    URL_LIST.name,
                    "file_set = \"urls\" needs url_list, a file of `path [size [weight]]` lines"
                        .into(),
                )
            }
            Ok("specweb96") if matches!(params.u64(DIRS.name), Ok(0)) => {
                return bad(DIRS.name, "must be at least 1".into())
            }
            _ => {}
        }
        Ok(())
    }

    fn table_metrics(&self, _params: &Params) -> Vec<MetricSpec> {
        METRICS
            .iter()
            .filter(|m| {
                matches!(
                    m.name,
                    "requests_per_s"
                        | "mbytes_per_s"
                        | "latency_p99_ms"
                        | "errors"
                        | "service_util_pct"
                )
            })
            .copied()
            .collect()
    }

    fn metrics(&self, _params: &Params) -> Vec<MetricSpec> {
        METRICS.to_vec()
    }

    fn merge_value(&self, name: &str) -> Combine {
        match name {
            // Each host's share of the target rate.
            "rate_per_s" => Combine::Sum,
            _ => Combine::Max,
        }
    }

    fn views(&self, _params: &Params) -> Vec<ViewSpec> {
        vec![
            ViewSpec::Curve {
                x_param: CLIENTS.into(),
                metric: "requests_per_s".into(),
            },
            ViewSpec::Table {
                row_param: CLIENTS.into(),
            },
        ]
    }

    fn expected_duration(&self, params: &Params) -> Duration {
        let s = [WARMUP.name, DURATION.name, RAMP_DOWN.name]
            .iter()
            .map(|n| params.f64(n).unwrap_or(0.0).max(0.0))
            .sum::<f64>();
        Duration::from_secs_f64(s + 0.5)
    }

    fn measured_window(&self, params: &Params) -> Option<(Duration, Duration)> {
        let s = |n: &str| Duration::from_secs_f64(params.f64(n).unwrap_or(0.0).max(0.0));
        Some((s(WARMUP.name), s(DURATION.name)))
    }

    fn server_side(&self) -> ServerSide {
        ServerSide::Service
    }

    fn clients_axis(&self) -> bool {
        true
    }

    fn prepare_service(
        &self,
        params: &Params,
        service: &ServiceInfo,
    ) -> Result<Vec<PathBuf>, WorkloadError> {
        let cfg = Config::read(params)?;
        let Some(set) = cfg.file_set() else {
            return Ok(Vec::new());
        };
        let Some(root) = &service.document_root else {
            return Err(WorkloadError::Other(format!(
                "{KIND}: service {:?} has no document root benchlab may write the file set into; give it one, or use file_set = \"urls\"",
                service.name
            )));
        };
        let m = set
            .generate(root, cfg.seed)
            .map_err(|e| WorkloadError::io(format!("{KIND}: generating the file set"), e))?;
        Ok(m.removal_list())
    }

    fn run_client(&self, params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
        let cfg = Config::read(params)?;
        let addr = ctx.server.ok_or_else(|| {
            WorkloadError::Other(format!(
                "{KIND}: no server address (a [[service]] or address = \"host:port\")"
            ))
        })?;
        let share = ctx.share;
        if share.count == 0 {
            return Ok(SideResult::default());
        }
        let pace = match cfg.rate {
            None => Pace::Closed,
            Some(r) => Pace::Open {
                rate_per_s: r * f64::from(share.count) / f64::from(share.total.max(1)),
            },
        };
        let spec = LoadSpec {
            addr,
            host: addr.to_string(),
            targets: cfg.targets()?,
            connections: share.count,
            threads: cfg.threads,
            keep_alive: cfg.keep_alive,
            version: cfg.version,
            pace,
            ramp_up: cfg.ramp_up,
            measure: cfg.measure,
            ramp_down: cfg.ramp_down,
            timeout: cfg.timeout,
            // Distinct request streams per host and repetition.
            seed: cfg.seed ^ (u64::from(share.first) << 32) ^ u64::from(ctx.repetition),
            spin_polls: cfg.spin_polls,
            poll_budget: cfg.poll_budget,
        };
        let gate = ctx.gate.clone();
        let arrive = move || gate.arrive().map_err(|e| e.to_string());
        let abort: &AtomicBool = &ctx.abort;
        match run(&spec, abort, &arrive) {
            Ok(r) => Ok(side_result(&r)),
            Err(LoadError::Aborted) => Err(WorkloadError::Aborted),
            Err(e) => Err(WorkloadError::Other(format!("{KIND}: {e}"))),
        }
    }

    fn combine(
        &self,
        _params: &Params,
        client: SideResult,
        server: Option<SideResult>,
    ) -> Result<Sample, WorkloadError> {
        let metrics = derive(&client, server.as_ref())?;
        Ok(Sample {
            metrics,
            client,
            server,
            ..Sample::default()
        })
    }
}

/// The client side's raw result.
fn side_result(r: &LoadResult) -> SideResult {
    let m = &r.measured;
    let mut s = SideResult::default();
    let mut put = |k: &str, v: u64| {
        s.counters.insert(k.into(), v);
    };
    put(c::OK, m.ok);
    put(c::RESPONSES, m.responses);
    put(c::SENT, m.sent);
    put(c::BYTES, m.bytes);
    put(c::BODY, m.body_bytes);
    put(c::E_CONNECT, m.err_connect);
    put(c::E_TIMEOUT, m.err_timeout);
    put(c::E_STATUS, m.err_status);
    put(c::E_SHORT, m.err_short);
    put(c::E_OTHER, m.err_other);
    put(c::TOTAL_RESPONSES, r.total.responses);
    put(c::TOTAL_BYTES, r.total.bytes);
    put(c::TOTAL_ERRORS, r.total.errors());
    put(c::IN_FLIGHT, r.in_flight_at_end);
    if let Some(o) = &r.open {
        put(c::SCHEDULED, o.scheduled);
        put(c::SCHED_SENT, o.sent);
        put(c::LATE, o.late);
        s.values.insert("rate_per_s".into(), o.rate_per_s);
        s.values
            .insert("max_send_lag_ns".into(), o.max_lag_ns as f64);
    }
    s.values.insert("measure_s".into(), r.measure_s);
    s.histograms.insert(c::LATENCY.into(), r.latency.data());
    s.cpu = Some(r.cpu.clone());
    s.peak_rss_kib = benchlab_core::cpu::peak_rss_kib();
    s
}

/// The metrics, from the (merged) client result and the service
/// observation.
fn derive(
    client: &SideResult,
    server: Option<&SideResult>,
) -> Result<std::collections::BTreeMap<String, f64>, WorkloadError> {
    let ok = client.counter(c::OK);
    let errors: u64 = [
        c::E_CONNECT,
        c::E_TIMEOUT,
        c::E_STATUS,
        c::E_SHORT,
        c::E_OTHER,
    ]
    .iter()
    .map(|k| client.counter(k))
    .sum();
    if ok == 0 {
        return Err(WorkloadError::Other(format!(
            "{KIND}: no request succeeded in the measured interval ({errors} failed: connect {}, timeout {}, status >= 400 {}, short body {}, other {})",
            client.counter(c::E_CONNECT),
            client.counter(c::E_TIMEOUT),
            client.counter(c::E_STATUS),
            client.counter(c::E_SHORT),
            client.counter(c::E_OTHER),
        )));
    }
    let secs = client.value("measure_s");
    if secs.is_nan() || secs <= 0.0 {
        return Err(WorkloadError::Other(format!(
            "{KIND}: the client result has no measured interval"
        )));
    }
    let mut m = std::collections::BTreeMap::new();
    let mut put = |k: &str, v: f64| {
        m.insert(k.to_string(), v);
    };
    put("requests_per_s", ok as f64 / secs);
    put("mbytes_per_s", client.counter(c::BYTES) as f64 / secs / 1e6);
    put("errors", errors as f64);
    put("failed_pct", 100.0 * errors as f64 / (ok + errors) as f64);
    for k in [
        c::E_CONNECT,
        c::E_TIMEOUT,
        c::E_STATUS,
        c::E_SHORT,
        c::E_OTHER,
    ] {
        put(k, client.counter(k) as f64);
    }
    if let Some(h) = client.histograms.get(c::LATENCY) {
        let hist = h
            .decode()
            .map_err(|e| WorkloadError::Other(format!("{KIND}: latency histogram: {e}")))?;
        // The fastest request: what the path imposes with the least
        // scheduling noise (a relay's delay shows here exactly).
        put("latency_min_ms", h.min as f64 / 1e6);
        put("latency_mean_ms", h.mean / 1e6);
        put("latency_p50_ms", hist.value_at_quantile(0.5) as f64 / 1e6);
        put("latency_p99_ms", hist.value_at_quantile(0.99) as f64 / 1e6);
    }
    if client.values.contains_key("rate_per_s") {
        let scheduled = client.counter(c::SCHEDULED);
        let sent = client.counter(c::SCHED_SENT);
        put(
            "achieved_rate_per_s",
            client.counter(c::RESPONSES) as f64 / secs,
        );
        put("target_rate_per_s", client.value("rate_per_s"));
        put(
            "open_loop_behind",
            f64::from(u8::from((sent as f64) < 0.99 * scheduled as f64)),
        );
        put("max_send_lag_ms", client.value("max_send_lag_ns") / 1e6);
    }
    if let Some(cpu) = &client.cpu {
        put(
            "client_cpu_us_per_request",
            cpu.process_cpu_s * 1e6 / ok as f64,
        );
    }
    if let Some(s) = server {
        let cpu_s = s.engine(SERVICE_CPU_S);
        if !cpu_s.is_nan() {
            put("service_cpu_us_per_request", cpu_s * 1e6 / ok as f64);
        }
        let util = s.engine(SERVICE_UTIL_PCT);
        if !util.is_nan() {
            put("service_util_pct", util);
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchlab_core::Value;

    fn params(pairs: &[(&str, Value)]) -> Params {
        let mut p = Params::defaults(PARAMS);
        p.set(DURATION.name, Value::Float(1.0));
        p.set(WARMUP.name, Value::Float(0.0));
        for (k, v) in pairs {
            p.set(k, v.clone());
        }
        p
    }

    #[test]
    fn bad_input_names_the_key() {
        let p = params(&[(FILE_SET.name, Value::Str("urls".into()))]);
        assert_eq!(LOAD.validate(&p).unwrap_err().key, URL_LIST.name);
        let p = params(&[(RATE.name, Value::Float(-1.0))]);
        assert_eq!(LOAD.validate(&p).unwrap_err().key, RATE.name);
        let p = params(&[(CLIENTS, Value::Int(0))]);
        assert_eq!(LOAD.validate(&p).unwrap_err().key, CLIENTS);
        let p = params(&[(SPIN.name, Value::Int(MAX_SPIN as i64 + 1))]);
        assert_eq!(LOAD.validate(&p).unwrap_err().key, SPIN.name);
        let p = params(&[(SPIN.name, Value::Int(MAX_SPIN as i64))]);
        assert!(LOAD.validate(&p).is_ok());
        assert!(LOAD.validate(&params(&[])).is_ok());
    }

    #[test]
    fn poll_budget_is_bounded() {
        for bad in [-0.5, MAX_POLL_BUDGET + 1.0, f64::NAN] {
            let p = params(&[(POLL_BUDGET.name, Value::Float(bad))]);
            let e = LOAD.validate(&p).unwrap_err();
            assert_eq!(e.key, POLL_BUDGET.name);
            assert!(e.message.contains("from 0 (off)"), "{}", e.message);
        }
        let p = params(&[(POLL_BUDGET.name, Value::Float(0.5))]);
        assert!(LOAD.validate(&p).is_ok());
        assert_eq!(Config::read(&p).unwrap().poll_budget, 0.5);
    }

    #[test]
    fn every_request_failed_is_a_failed_point() {
        let mut s = SideResult::default();
        s.counters.insert(c::E_STATUS.into(), 1200);
        s.values.insert("measure_s".into(), 1.0);
        let err = LOAD.combine(&params(&[]), s, None).unwrap_err();
        assert!(err.to_string().contains("status >= 400 1200"), "{err}");
    }

    #[test]
    fn service_without_document_root_is_refused() {
        let svc = ServiceInfo {
            name: "web".into(),
            kind: "nginx".into(),
            document_root: None,
            port: 80,
        };
        let err = LOAD.prepare_service(&params(&[]), &svc).unwrap_err();
        assert!(err.to_string().contains("document root"), "{err}");
    }

    #[test]
    fn prepare_service_lists_what_it_made() {
        let d = tempfile::tempdir().unwrap();
        let svc = ServiceInfo {
            name: "web".into(),
            kind: "nginx".into(),
            document_root: Some(d.path().to_path_buf()),
            port: 80,
        };
        let p = params(&[(DIRS.name, Value::Int(1))]);
        let made = LOAD.prepare_service(&p, &svc).unwrap();
        assert_eq!(made.len(), 36 + 2);
        crate::fileset::remove_paths(&made).unwrap();
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn every_metric_is_declared() {
        let mut s = SideResult::default();
        s.counters.insert(c::OK.into(), 100);
        s.counters.insert(c::BYTES.into(), 2_000_000);
        s.values.insert("measure_s".into(), 2.0);
        s.values.insert("rate_per_s".into(), 50.0);
        s.counters.insert(c::SCHEDULED.into(), 100);
        s.counters.insert(c::SCHED_SENT.into(), 100);
        s.counters.insert(c::RESPONSES.into(), 100);
        let mut lat = benchlab_core::latency::Latency::new();
        lat.record(1_000_000);
        s.histograms.insert(c::LATENCY.into(), lat.data());
        let m = derive(&s, None).unwrap();
        assert_eq!(m["requests_per_s"], 50.0);
        assert_eq!(m["mbytes_per_s"], 1.0);
        assert_eq!(m["open_loop_behind"], 0.0);
        let declared: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
        for k in m.keys() {
            assert!(declared.contains(&k.as_str()), "{k} undeclared");
        }
    }
}
