//! `net.pingpong`: per-message round-trip timing, after sfnt-pingpong
//! (cns-sfnettest).
//!
//! # How it measures
//!
//! The client sends `message_size` bytes, the server receives them whole and
//! echoes the same number of bytes, the client receives them whole (TCP:
//! `recv(MSG_WAITALL)` continued until complete, as sfnt's `do_ping`; UDP:
//! one `recv()`). Each measured iteration is timed on its own:
//! `t0 = clock(); send; recv; t1 = clock()` and
//! `(t1 − t0) / 2` in integer nanoseconds (half the round trip, sfnt's
//! default `# reporting: 1/2 RTT`) goes into a preallocated HDR
//! recorder that keeps exact count, min, max, mean and sample stddev (n − 1,
//! as sfnt) plus a thinned time series. Warm-up iterations run by time
//! (`warmup_s`), untimed and unrecorded. The measured part runs for
//! `duration_s`, or exactly `iterations` recorded round trips when that is
//! set. `TCP_NODELAY` is off unless `nodelay`, as sfnt without `--nodelay`.
//!
//! *Differs from sfnt-pingpong*:
//! - Timestamps come from `clock_gettime(CLOCK_MONOTONIC)` (through the
//!   vDSO, some 20 ns) instead of calibrated `rdtsc`, and the
//!   cost of reading the clock is not subtracted, which sfnt does with
//!   `tsc_cost`.
//! - Median and percentiles come from the HDR histogram (3 significant
//!   digits, clamped into the exact [min, max]) instead of indexing the
//!   sorted samples (`x[n/2]`, `x[n·p/100]`); mean and stddev are exact
//!   and not truncated to integers.
//! - Iteration control is a plain duration or count, not sfnt's batches
//!   of 1000 between `minms`/`maxms`; pinning is left to the study's
//!   placement.
//! - UDP loss: sfnt blocks forever on a lost datagram. Here a reply that has
//!   not come within 500 ms counts in `lost_iterations` and is not recorded,
//!   and the next ping is sent. A reply later than that would be taken for
//!   the next ping's (messages carry no sequence number), which shortens
//!   that sample; `lost_iterations > 0` flags such points.
//! - UDP ends with three marker datagrams of a length that data never has
//!   (zero bytes, or one byte when `message_size` is 0); a server that
//!   misses them stops 4 s after the client's planned end.
//!
//! **CPU.** As in `net.rr`: the client snapshots around its measured
//! part; the server's interval starts `warmup_s` after the first message.
//! Only utilization is reported (there is no throughput to divide by).

use std::collections::BTreeMap;
use std::time::Duration;

use benchlab_core::cost::LoopCost;
use benchlab_core::cpu::CpuSnapshot;
use benchlab_core::param::{ParamDefault, ParamKind, ParamSpec, Params, DURATION, WARMUP};
use benchlab_core::recorder::LatencyRecorder;
use benchlab_core::ValidationError;
use benchlab_core::{
    Better, ClientCtx, Combine, MetricSpec, Sample, ServerCtx, SideResult, Workload, WorkloadError,
};

use crate::common::exchange::{serve_requests, Exchanger, Outcome, ServeSpec};
use crate::common::params::{
    checked, secs, size, validate_times, Proto, PROTOCOL, UDP_MAX_PAYLOAD,
};
use crate::common::results::{
    abort_wins, mean_metrics, need_server, put, put_cpu, server_addr, side_result, sum_metrics,
    CPU_METRICS,
};
use crate::common::timer::Timer;

/// The `net.pingpong` workload (sfnt-pingpong).
pub struct NetPingpong;

/// The registered instance.
pub static PINGPONG: NetPingpong = NetPingpong;

const KIND: &str = "net.pingpong";

const MESSAGE_SIZE: ParamSpec = ParamSpec {
    name: "message_size",
    kind: ParamKind::Bytes,
    default: ParamDefault::Int(32),
    help: "bytes per ping and per pong (TCP: at least 1; UDP: 0..=65507)",
};

const NODELAY: ParamSpec = ParamSpec {
    name: "nodelay",
    kind: ParamKind::Bool,
    default: ParamDefault::Bool(false),
    help: "set TCP_NODELAY on both sides (sfnt-pingpong --nodelay; off by default)",
};

const ITERATIONS: ParamSpec = ParamSpec {
    name: "iterations",
    kind: ParamKind::Count,
    default: ParamDefault::Unset,
    help:
        "run exactly this many measured round trips instead of duration_s (warm-up still by time)",
};

const SERIES_POINTS: ParamSpec = ParamSpec {
    name: "series_points",
    kind: ParamKind::Count,
    default: ParamDefault::Int(4096),
    help: "most samples kept in the RTT/2 time series (evenly thinned)",
};

const PARAMS: &[ParamSpec] = &[
    PROTOCOL,
    MESSAGE_SIZE,
    NODELAY,
    DURATION,
    WARMUP,
    ITERATIONS,
    SERIES_POINTS,
];

const TCP_MEAN_LABEL: &str = "TCP ping-pong RTT/2 mean (µs)";
const UDP_MEAN_LABEL: &str = "UDP ping-pong RTT/2 mean (µs)";
const TCP_JITTER_LABEL: &str = "TCP ping-pong jitter, RTT/2 stddev (µs)";
const UDP_JITTER_LABEL: &str = "UDP ping-pong jitter, RTT/2 stddev (µs)";
/// Labels of a table whose rows span both protocols.
const ANY_MEAN_LABEL: &str = "Ping-pong RTT/2 mean (µs)";
const ANY_JITTER_LABEL: &str = "Ping-pong jitter, RTT/2 stddev (µs)";

/// Key of the histogram and series in the client's result.
const RTT_HALF: &str = "rtt_half";

const CLIENT: &str = "net.pingpong client";
const SERVER: &str = "net.pingpong server";

/// Rough cost of one loopback round trip, for the ETA of `iterations` runs
/// only (sockperf measured ~14–21 µs RTT on the reference host).
const ETA_PER_ITERATION: Duration = Duration::from_micros(30);

struct Config {
    proto: Proto,
    message_size: usize,
    nodelay: bool,
    duration: Duration,
    warmup: Duration,
    iterations: Option<u64>,
    series_points: usize,
}

impl Config {
    fn read(params: &Params) -> Result<Config, WorkloadError> {
        let iterations = params.opt_u64(ITERATIONS.name)?;
        let cfg = Config {
            proto: Proto::from_params(params)?,
            message_size: size(params, MESSAGE_SIZE.name)?,
            nodelay: params.bool(NODELAY.name)?,
            // Not used when `iterations` is set, so not required then.
            duration: match iterations {
                Some(_) => secs(params, DURATION.name).unwrap_or(Duration::ZERO),
                None => secs(params, DURATION.name)?,
            },
            warmup: secs(params, WARMUP.name)?,
            iterations,
            series_points: params.u64(SERIES_POINTS.name)? as usize,
        };
        checked(&PINGPONG, params)?;
        Ok(cfg)
    }
}

impl Workload for NetPingpong {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn summary(&self) -> &'static str {
        "per-message round trips over TCP or UDP (sfnt-pingpong): RTT/2 mean, jitter and percentiles"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn row_param(&self) -> &'static str {
        MESSAGE_SIZE.name
    }

    fn validate(&self, params: &Params) -> Result<(), ValidationError> {
        let udp = Proto::or_tcp(params) == Proto::Udp;
        match params.opt_u64(MESSAGE_SIZE.name) {
            // sfnt's stream types start at 1 byte; a zero-byte TCP message
            // would not be an exchange.
            Ok(Some(0)) if !udp => {
                return Err(ValidationError::new(
                    MESSAGE_SIZE.name,
                    "must be at least 1 byte over TCP",
                ))
            }
            Ok(Some(n)) if udp && n > UDP_MAX_PAYLOAD => {
                return Err(ValidationError::new(
                    MESSAGE_SIZE.name,
                    format!("a UDP datagram holds at most {UDP_MAX_PAYLOAD} bytes, got {n}"),
                ))
            }
            _ => {}
        }
        if let Ok(Some(0)) = params.opt_u64(ITERATIONS.name) {
            return Err(ValidationError::new(ITERATIONS.name, "must be at least 1"));
        }
        if let Ok(Some(n)) = params.opt_u64(SERIES_POINTS.name) {
            if n < 2 {
                return Err(ValidationError::new(
                    SERIES_POINTS.name,
                    "must be at least 2",
                ));
            }
        }
        validate_times(params)
    }

    fn table_metrics(&self, params: &Params) -> Vec<MetricSpec> {
        let (mean, jitter) = match Proto::from_params(params) {
            Ok(Proto::Tcp) => (TCP_MEAN_LABEL, TCP_JITTER_LABEL),
            Ok(Proto::Udp) => (UDP_MEAN_LABEL, UDP_JITTER_LABEL),
            // The protocol varies within the table (it forms its rows).
            Err(_) => (ANY_MEAN_LABEL, ANY_JITTER_LABEL),
        };
        vec![
            MetricSpec {
                name: "rtt_half_mean_us",
                label: mean,
                better: Better::Lower,
                decimals: 3,
                combine: Combine::Mean,
            },
            MetricSpec {
                name: "rtt_half_stddev_us",
                label: jitter,
                better: Better::Lower,
                decimals: 3,
                combine: Combine::Mean,
            },
        ]
    }

    fn metrics(&self, params: &Params) -> Vec<MetricSpec> {
        // Over several targets the distribution is the merge of theirs:
        // mean, jitter and percentiles are derived again from the merged
        // histograms, the extremes are the extremes.
        let mut m: Vec<MetricSpec> = self
            .table_metrics(params)
            .into_iter()
            .map(|s| s.with(Combine::Merged))
            .collect();
        for (name, rule) in [
            ("rtt_half_min_us", Combine::Min),
            ("rtt_half_max_us", Combine::Max),
            ("rtt_half_median_us", Combine::Merged),
            ("rtt_half_p99_us", Combine::Merged),
            ("rtt_half_p999_us", Combine::Merged),
        ] {
            m.push(MetricSpec::lower(name, name, 3).with(rule));
        }
        m.extend(sum_metrics(&[
            "iterations",
            "warmup_iterations",
            "lost_iterations",
        ]));
        m.extend(mean_metrics(CPU_METRICS));
        m
    }

    fn expected_duration(&self, params: &Params) -> Duration {
        let warmup = params.f64(WARMUP.name).unwrap_or(0.0).max(0.0);
        let measured = match params.opt_u64(ITERATIONS.name) {
            Ok(Some(n)) => ETA_PER_ITERATION.as_secs_f64() * n as f64,
            _ => params.f64(DURATION.name).unwrap_or(0.0).max(0.0),
        };
        Duration::from_secs_f64(warmup + measured + 0.2)
    }

    fn serve(
        &self,
        params: &Params,
        ctx: &ServerCtx,
        ready: &mut dyn FnMut(u16),
    ) -> Result<SideResult, WorkloadError> {
        let cfg = Config::read(params)?;
        let spec = ServeSpec {
            proto: cfg.proto,
            req_size: cfg.message_size,
            rsp_size: cfg.message_size,
            nodelay: cfg.nodelay,
            warmup: cfg.warmup,
            total_name: "echoed",
            measured_name: "measured_echoed",
            what: SERVER,
        };
        abort_wins(serve_requests(&spec, ctx, ready), &ctx.abort)
    }

    fn run_client(&self, params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
        abort_wins(client(params, ctx), &ctx.abort)
    }

    fn combine(
        &self,
        _params: &Params,
        client: SideResult,
        server: Option<SideResult>,
    ) -> Result<Sample, WorkloadError> {
        let server = need_server(server, KIND)?;
        let h = client.histograms.get(RTT_HALF).ok_or_else(|| {
            WorkloadError::Other(format!(
                "{KIND}: the client's result has no {RTT_HALF} histogram"
            ))
        })?;
        if h.count == 0 {
            return Err(WorkloadError::Other(format!(
                "{KIND}: no round trip completed in the measured interval"
            )));
        }
        let hist = h
            .decode()
            .map_err(|e| WorkloadError::Other(format!("{KIND}: decoding the histogram: {e}")))?;
        // HDR quantiles return the top of their bucket, which may lie past
        // the exact maximum; clamping keeps min ≤ median ≤ … ≤ max.
        let q_us = |q: f64| hist.value_at_quantile(q).clamp(h.min, h.max) as f64 / 1e3;
        let mut m = BTreeMap::new();
        put(&mut m, "rtt_half_mean_us", h.mean / 1e3);
        put(&mut m, "rtt_half_stddev_us", h.stddev / 1e3);
        put(&mut m, "rtt_half_min_us", h.min as f64 / 1e3);
        put(&mut m, "rtt_half_median_us", q_us(0.5));
        put(&mut m, "rtt_half_p99_us", q_us(0.99));
        put(&mut m, "rtt_half_p999_us", q_us(0.999));
        put(&mut m, "rtt_half_max_us", h.max as f64 / 1e3);
        put(&mut m, "iterations", client.counter("iterations") as f64);
        put(
            &mut m,
            "warmup_iterations",
            client.counter("warmup_iterations") as f64,
        );
        put(
            &mut m,
            "lost_iterations",
            client.counter("lost_iterations") as f64,
        );
        put(&mut m, "elapsed_s", client.value("elapsed_s"));
        put_cpu(&mut m, "client", client.cpu.as_ref());
        put_cpu(&mut m, "server", server.cpu.as_ref());
        Ok(Sample {
            metrics: m,
            client,
            server: Some(server),
            ..Sample::default()
        })
    }
}

/// The client side (see the module docs).
fn client(params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
    let cfg = Config::read(params)?;
    let addr = server_addr(ctx.server, KIND)?;
    let mut ex = Exchanger::connect(
        cfg.proto,
        addr,
        cfg.message_size,
        cfg.message_size,
        cfg.nodelay,
        ctx.abort.clone(),
        CLIENT,
    )?;
    // Allocated in full now: recording never allocates.
    let mut rec = LatencyRecorder::new(cfg.series_points);

    let timer = Timer::start(cfg.warmup, ctx.abort.clone(), Some(ex.watch()))?;
    let (mut warm, mut warm_lost) = (0u64, 0u64);
    while !timer.warm_done() {
        match ex.exchange()? {
            Outcome::Done => warm += 1,
            Outcome::Lost => warm_lost += 1,
        }
    }
    let c0 = CpuSnapshot::take();
    if cfg.iterations.is_none() {
        timer.measure_for(cfg.duration);
    }
    // Without `iterations` the timer alone ends the loop.
    let limit = cfg.iterations.unwrap_or(u64::MAX);
    let cost = LoopCost::start();
    let lost = match ex.proto() {
        Proto::Tcp => measure(&mut rec, &timer, limit, || {
            ex.exchange_tcp().map(|()| Outcome::Done)
        }),
        Proto::Udp => measure(&mut rec, &timer, limit, || ex.exchange_udp()),
    };
    cost.end(CLIENT, rec.count() + *lost.as_ref().unwrap_or(&0));
    // A round trip the watchdog ended after the interval is no error.
    let lost = match lost {
        Ok(n) => n,
        Err(e) => ex.stopped_or(e).map(|()| 0)?,
    };
    let c1 = CpuSnapshot::take();
    if timer.aborted() {
        return Err(WorkloadError::Aborted);
    }
    drop(timer);
    ex.finish()?;
    let cpu = c0.usage_until(&c1);
    let mut r = side_result(
        &[
            ("iterations", rec.count()),
            ("warmup_iterations", warm),
            ("lost_iterations", lost),
            ("warmup_lost_iterations", warm_lost),
        ],
        &[("elapsed_s", cpu.elapsed_s)],
        Some(cpu),
    );
    r.histograms.insert(RTT_HALF.into(), rec.histogram_data());
    r.series.insert(RTT_HALF.into(), rec.series());
    Ok(r)
}

/// The measured loop: timed round trips into `rec` until the timer stops
/// it or `limit` are recorded; returns the lost ones. Generic over the
/// exchange so that each protocol gets its own loop with the exchange
/// inline and no protocol test per round trip. Never inlined itself, so
/// that `bench/cost` can count its instructions apart from the histogram
/// built after it (one call per run).
#[inline(never)]
fn measure(
    rec: &mut LatencyRecorder,
    timer: &Timer,
    limit: u64,
    mut exchange: impl FnMut() -> Result<Outcome, WorkloadError>,
) -> Result<u64, WorkloadError> {
    let mut lost = 0u64;
    while !timer.stopped() && rec.count() < limit {
        let t0 = mono_ns();
        let outcome = exchange()?;
        let t1 = mono_ns();
        match outcome {
            // Integer halving, as sfnt's `results[i] /= 2`.
            Outcome::Done => rec.record(t1.wrapping_sub(t0) / 2),
            Outcome::Lost => lost += 1,
        }
    }
    Ok(lost)
}

/// `CLOCK_MONOTONIC` in nanoseconds, read straight from `clock_gettime`
/// (the vDSO): the same clock as `Instant::now()`, without std's
/// `Timespec` normalisation and checked `Duration` subtraction, which
/// callgrind put at some 70 user-space instructions per round trip
/// (`Timespec::now` + `sub_timespec`, bench/per-op). A monotonic clock
/// never goes back, so `t1 − t0` cannot underflow.
#[inline(always)]
fn mono_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}
