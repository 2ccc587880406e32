//! `mq.latency`: qpid-latencytest's one-way latency at a fixed rate
//! through an AMQP 0-9-1 broker, and better.
//!
//! # What it does (latencytest's semantics)
//!
//! One sender and one receiver, each with its own connection, in one
//! process (one clock), through one queue of the broker. The sender is
//! paced at `rate_per_s`: message `n` is due at `start + n / rate`, and
//! the sender sleeps until then (not at all when late). Each body starts
//! with a 16-byte stamp: the actual send time (ns on the process's
//! monotonic clock) and the sequence number. The receiver takes
//! `now − send time` as the message's one-way latency (producer → broker →
//! consumer). It consumes with a window of `prefetch` messages and acks
//! every `ack` of them (`ack = 0`: `prefetch / 2`, latencytest's default;
//! `prefetch = 0`: no window, no acks). TCP_NODELAY on both ends by
//! default (seed 003's `--tcp-nodelay`).
//!
//! # Figures
//!
//! - per interval (`interval_s`, default 1 s, of the measured
//!   `duration_s` after `warmup_s`): count, min, max and mean latency,
//!   kept as time series (`interval_mean_ns` …: seed 003's Figure 6);
//! - `latency_mean_ms`: the mean of the interval means, and
//!   `latency_stddev_ms`: their standard deviation (seed 003's Figures 5
//!   and 8; `select = "median-stddev-run"` picks its quoted run by it);
//! - what latencytest lacks: percentiles from an HDR histogram of every
//!   message (`latency_p50_ms` …), the same from the *intended* send time
//!   (`intended_p50_ms` …: a sender that fell behind cannot hide its own
//!   lag — coordinated omission), the achieved rate and
//!   `rate_shortfall` = 1 when it is more than 1 % short of the target
//!   (latencytest's "WARNING: Desired send rate").
//!
//! Every message must arrive once and in order (sequence numbers); a
//! receiver that hears nothing for `timeout_s` fails the point.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use benchlab_core::cost::LoopCost;
use benchlab_core::cpu::CpuSnapshot;
use benchlab_core::engine_metric::{SERVICE_CPU_S, SERVICE_UTIL_PCT};
use benchlab_core::param::{ParamDefault, ParamKind, ParamSpec, Params, DURATION, WARMUP};
use benchlab_core::recorder::{LatencyRecorder, Series};
use benchlab_core::shape::{Combine, ServerSide, ViewSpec};
use benchlab_core::ValidationError;
use benchlab_core::{ClientCtx, MetricSpec, Sample, SideResult, Workload, WorkloadError};

use crate::amqp::{Connection, Login};
use crate::common::{self, PASSWORD_ENV, TIMEOUT, USER, VHOST};

/// The `mq.latency` workload.
pub struct MqLatency;

/// The registered instance.
pub static LATENCY: MqLatency = MqLatency;

const KIND: &str = "mq.latency";

/// The stamp at the head of every body: send time (8 B), sequence (8 B).
pub const STAMP: u64 = 16;

const SIZE: ParamSpec = ParamSpec {
    name: "size",
    kind: ParamKind::Bytes,
    default: ParamDefault::Int(256),
    help: "message body in bytes (latencytest --size); at least 16, the send-time stamp and sequence number",
};
const RATE: ParamSpec = ParamSpec {
    name: "rate_per_s",
    kind: ParamKind::Float,
    default: ParamDefault::Float(1000.0),
    help: "messages per second the sender is paced at (latencytest --rate)",
};
const INTERVAL: ParamSpec = ParamSpec {
    name: "interval_s",
    kind: ParamKind::Seconds,
    default: ParamDefault::Float(1.0),
    help: "length of the intervals whose min/mean/max form the time series (latencytest --report-frequency)",
};
const PREFETCH: ParamSpec = ParamSpec {
    name: "prefetch",
    kind: ParamKind::Count,
    default: ParamDefault::Int(100),
    help: "the receiver's message window (latencytest --prefetch); 0: no window and no acks",
};
const ACK: ParamSpec = ParamSpec {
    name: "ack",
    kind: ParamKind::Count,
    default: ParamDefault::Int(0),
    help: "ack every N messages (latencytest --ack); 0: prefetch / 2",
};
const NODELAY: ParamSpec = ParamSpec {
    name: "nodelay",
    kind: ParamKind::Bool,
    default: ParamDefault::Bool(true),
    help: "TCP_NODELAY on both clients' sockets (latencytest --tcp-nodelay)",
};
const DURABLE: ParamSpec = ParamSpec {
    name: "durable",
    kind: ParamKind::Bool,
    default: ParamDefault::Bool(false),
    help: "a durable queue and persistent messages (latencytest --durable)",
};

const PARAMS: &[ParamSpec] = &[
    SIZE,
    RATE,
    DURATION,
    WARMUP,
    INTERVAL,
    PREFETCH,
    ACK,
    NODELAY,
    DURABLE,
    USER,
    PASSWORD_ENV,
    VHOST,
    TIMEOUT,
];

const METRICS: &[MetricSpec] = &[
    MetricSpec::lower("latency_mean_ms", "Mean one-way latency (ms)", 5),
    MetricSpec::lower(
        "latency_stddev_ms",
        "Std. dev. of the interval means (ms)",
        5,
    ),
    MetricSpec::lower("latency_min_ms", "Fastest message (ms)", 4).with(Combine::Min),
    MetricSpec::lower("latency_max_ms", "Slowest message (ms)", 3).with(Combine::Max),
    MetricSpec::lower("latency_p50_ms", "Median latency (ms)", 4),
    MetricSpec::lower("latency_p99_ms", "99th percentile latency (ms)", 3),
    MetricSpec::lower("latency_p999_ms", "99.9th percentile latency (ms)", 3),
    MetricSpec::lower(
        "intended_p50_ms",
        "Median latency from intended send (ms)",
        4,
    ),
    MetricSpec::lower(
        "intended_p99_ms",
        "99th percentile from intended send (ms)",
        3,
    ),
    MetricSpec::higher("achieved_rate_per_s", "Achieved rate (msg/s)", 1).with(Combine::Mean),
    MetricSpec::higher("target_rate_per_s", "Target rate (msg/s)", 0).with(Combine::Mean),
    MetricSpec::lower("rate_shortfall", "Rate more than 1 % short (1 = yes)", 0).with(Combine::Max),
    MetricSpec::lower("max_send_lag_ms", "Largest sender lag (ms)", 3).with(Combine::Max),
    MetricSpec::lower(
        "client_cpu_us_per_message",
        "Client CPU per message (µs)",
        2,
    ),
    MetricSpec::lower(
        "service_cpu_us_per_message",
        "Broker CPU per message (µs)",
        2,
    ),
    MetricSpec::lower("service_util_pct", "Broker CPU (%)", 1).with(Combine::Sum),
];

/// A point's settings.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Body size.
    pub size: u64,
    /// Messages/s.
    pub rate: f64,
    /// Not measured, first.
    pub warmup: Duration,
    /// Measured.
    pub duration: Duration,
    /// Interval of the series.
    pub interval: Duration,
    /// Receiver window (0: none, no acks).
    pub prefetch: u16,
    /// Ack batch.
    pub ack: u64,
    /// TCP_NODELAY.
    pub nodelay: bool,
    /// Durable queue, persistent messages.
    pub durable: bool,
}

impl Plan {
    /// Reads a point's parameters.
    pub fn read(params: &Params) -> Result<Plan, WorkloadError> {
        if let Err(e) = LATENCY.validate(params) {
            return Err(WorkloadError::Other(format!("{KIND}: {e}")));
        }
        let prefetch = params.u64(PREFETCH.name)? as u16;
        let ack = match params.u64(ACK.name)? {
            0 => u64::from(prefetch / 2).max(1),
            n => n,
        };
        Ok(Plan {
            size: params.u64(SIZE.name)?,
            rate: params.f64(RATE.name)?,
            warmup: common::seconds(params, WARMUP.name)?,
            duration: common::seconds(params, DURATION.name)?,
            interval: common::seconds(params, INTERVAL.name)?,
            prefetch,
            ack,
            nodelay: params.bool(NODELAY.name)?,
            durable: params.bool(DURABLE.name)?,
        })
    }
}

/// One interval: count, min, max, sum (ns).
pub type Interval = (u64, u64, u64, u64, u128);

/// What a run measured.
pub struct Outcome {
    /// Latency from the actual send time.
    pub sent: LatencyRecorder,
    /// Latency from the intended send time.
    pub intended: LatencyRecorder,
    /// Per interval: count, min, max, sum (ns).
    pub intervals: Vec<Interval>,
    /// Messages sent whose due time lies in the measured interval.
    pub sent_measured: u64,
    /// Messages sent in all.
    pub sent_total: u64,
    /// Messages received in all.
    pub received: u64,
    /// Out of order, duplicated or missing (sequence gaps).
    pub out_of_order: u64,
    /// The sender's largest lag behind its schedule (ns).
    pub max_lag_ns: u64,
    /// The measured interval (s).
    pub measure_s: f64,
}

/// Runs the test once against the broker of `login`.
pub fn run(plan: &Plan, login: &Login, abort: &AtomicBool) -> Result<Outcome, String> {
    let queue = common::unique_prefix("lat");
    let mut rx = Connection::open(login).map_err(|e| format!("connect the receiver: {e}"))?;
    rx.queue_declare(&queue, false, plan.durable, false, true)
        .map_err(|e| format!("declare queue {queue}: {e}"))?;
    rx.queue_purge(&queue)
        .map_err(|e| format!("purge queue {queue}: {e}"))?;
    if plan.prefetch > 0 {
        rx.qos(plan.prefetch)
            .map_err(|e| format!("basic.qos: {e}"))?;
    }
    rx.consume(&queue, plan.prefetch == 0)
        .map_err(|e| format!("consume from {queue}: {e}"))?;
    let mut tx = Connection::open(login).map_err(|e| format!("connect the sender: {e}"))?;
    let total = ((plan.warmup + plan.duration).as_secs_f64() * plan.rate).floor() as u64;
    let interval_ns = plan.interval.as_nanos().max(1) as u64;
    let warm_ns = plan.warmup.as_nanos() as u64;
    let measure_ns = plan.duration.as_nanos() as u64;
    let n_intervals = measure_ns.div_ceil(interval_ns) as usize;
    // The one clock: ns since `base`, on both threads.
    let base = Instant::now();
    let ns = move || base.elapsed().as_nanos() as u64;
    // Due time of message n, from the start, in ns (exact in integers
    // for integral rates; f64 otherwise).
    let period = 1e9 / plan.rate;
    let due = move |n: u64| (n as f64 * period) as u64;
    let start_ns = ns() + 10_000_000; // 10 ms to let the receiver settle
    let sent_count = Arc::new(AtomicU64::new(u64::MAX));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let sender = {
            let (sent_count, stop, queue) = (sent_count.clone(), &stop, queue.as_str());
            s.spawn(move || -> Result<(u64, u64, u64), String> {
                let mut body = vec![b'x'; plan.size as usize];
                let mut max_lag = 0u64;
                let mut measured = 0u64;
                let mut n = 0u64;
                let cost = LoopCost::start();
                let result = (|| {
                    while n < total {
                        let due_at = start_ns + due(n);
                        let now = ns();
                        if now < due_at {
                            std::thread::sleep(Duration::from_nanos(due_at - now));
                        }
                        let t = ns();
                        max_lag = max_lag.max(t.saturating_sub(due_at));
                        body[..8].copy_from_slice(&t.to_le_bytes());
                        body[8..16].copy_from_slice(&n.to_le_bytes());
                        tx.publish("", queue, &body, plan.durable)
                            .and_then(|_| tx.flush())
                            .map_err(|e| format!("send message {n}: {e}"))?;
                        // The achieved rate counts actual sends in the
                        // measured interval: a lagging sender shows.
                        let rel = t - start_ns;
                        if rel >= warm_ns && rel < warm_ns + measure_ns {
                            measured += 1;
                        }
                        n += 1;
                        if (abort.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed))
                            && n & 0x3f == 0
                        {
                            return Err("aborted".to_string());
                        }
                    }
                    Ok(())
                })();
                cost.end("mq.latency sender", n);
                sent_count.store(n, Ordering::Release);
                tx.close();
                result.map(|_| (n, measured, max_lag))
            })
        };
        let mut sent = LatencyRecorder::new(2);
        let mut intended = LatencyRecorder::new(2);
        let mut intervals = vec![(0u64, u64::MAX, 0u64, 0u64, 0u128); n_intervals];
        let mut received = 0u64;
        let mut out_of_order = 0u64;
        let mut rx_err = None;
        let cost = LoopCost::start();
        loop {
            let target = sent_count.load(Ordering::Acquire);
            if received >= target || received >= total {
                break;
            }
            let d = match rx.next_delivery() {
                Ok(d) => d,
                Err(e) => {
                    rx_err = Some(format!(
                        "received {received} of {total} messages, then: {e}"
                    ));
                    stop.store(true, Ordering::Relaxed);
                    break;
                }
            };
            let now = ns();
            let t = u64::from_le_bytes(d.head[..8].try_into().expect("8 bytes"));
            let seq = u64::from_le_bytes(d.head[8..16].try_into().expect("8 bytes"));
            if seq != received {
                out_of_order += 1;
            }
            received += 1;
            if plan.prefetch > 0 && (received.is_multiple_of(plan.ack) || received == total) {
                if let Err(e) = rx.ack(d.tag, true).and_then(|_| rx.flush()) {
                    rx_err = Some(format!("ack: {e}"));
                    stop.store(true, Ordering::Relaxed);
                    break;
                }
            }
            let dseq = due(seq);
            if dseq < warm_ns || dseq >= warm_ns + measure_ns {
                continue;
            }
            let lat = now.saturating_sub(t);
            sent.record(lat);
            intended.record(now.saturating_sub(start_ns + dseq));
            let i = (((dseq - warm_ns) / interval_ns) as usize).min(n_intervals - 1);
            let iv = &mut intervals[i];
            iv.0 += 1;
            iv.1 = iv.1.min(lat);
            iv.2 = iv.2.max(lat);
            iv.3 += lat;
            iv.4 += u128::from(lat) * u128::from(lat);
        }
        cost.end("mq.latency receiver", received);
        let sender = sender.join().expect("sender thread");
        rx.queue_delete(&queue).ok();
        rx.close();
        if let Some(e) = rx_err {
            return Err(e);
        }
        let (sent_total, sent_measured, max_lag_ns) = sender?;
        Ok(Outcome {
            sent,
            intended,
            intervals,
            sent_measured,
            sent_total,
            received,
            out_of_order,
            max_lag_ns,
            measure_s: plan.duration.as_secs_f64(),
        })
    })
}

impl Workload for MqLatency {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn summary(&self) -> &'static str {
        "AMQP one-way latency at a fixed rate through a broker, qpid-latencytest's semantics plus percentiles and intended-time latency"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn row_param(&self) -> &'static str {
        SIZE.name
    }

    fn validate(&self, params: &Params) -> Result<(), ValidationError> {
        let bad = |k: &str, m: String| Err(ValidationError::new(k, m));
        if let Ok(s) = params.u64(SIZE.name) {
            if s < STAMP {
                return bad(
                    SIZE.name,
                    format!("{s} B is below the {STAMP} B stamp (send time and sequence number) every message carries"),
                );
            }
            if s > 128 * 1024 * 1024 {
                return bad(
                    SIZE.name,
                    format!("{s} B is above 128 MiB, RabbitMQ's largest message"),
                );
            }
        }
        if let Ok(r) = params.f64(RATE.name) {
            if !(r.is_finite() && r > 0.0 && r <= 10_000_000.0) {
                return bad(
                    RATE.name,
                    format!("must be a rate from 0 to 10^7 messages/s, got {r}"),
                );
            }
        }
        if let Ok(d) = params.f64(DURATION.name) {
            if !(d.is_finite() && d > 0.0) {
                return bad(DURATION.name, format!("must be > 0, got {d}"));
            }
        }
        if let Ok(w) = params.f64(WARMUP.name) {
            if !(w.is_finite() && w >= 0.0) {
                return bad(WARMUP.name, format!("must be >= 0, got {w}"));
            }
        }
        if let Ok(i) = params.f64(INTERVAL.name) {
            if !(i.is_finite() && i >= 0.001) {
                return bad(INTERVAL.name, format!("must be at least 0.001 s, got {i}"));
            }
        }
        if let Ok(p) = params.u64(PREFETCH.name) {
            if p > 65_535 {
                return bad(PREFETCH.name, format!("at most 65535, got {p}"));
            }
        }
        if let Ok(t) = params.f64(TIMEOUT.name) {
            if !(t.is_finite() && t > 0.0) {
                return bad(TIMEOUT.name, format!("must be > 0, got {t}"));
            }
        }
        Ok(())
    }

    fn table_metrics(&self, _params: &Params) -> Vec<MetricSpec> {
        METRICS
            .iter()
            .filter(|m| {
                matches!(
                    m.name,
                    "latency_mean_ms"
                        | "latency_stddev_ms"
                        | "latency_p99_ms"
                        | "intended_p99_ms"
                        | "achieved_rate_per_s"
                )
            })
            .copied()
            .collect()
    }

    fn metrics(&self, _params: &Params) -> Vec<MetricSpec> {
        METRICS.to_vec()
    }

    fn notes(
        &self,
        _params: &Params,
        metrics: &std::collections::BTreeMap<String, f64>,
    ) -> Vec<String> {
        match metrics.get("rate_shortfall") {
            Some(&v) if v > 0.0 => vec![format!(
                "the sender fell more than 1 % short of its target rate ({:.1} of {:.1} msg/s): the latencies describe a lighter load",
                metrics.get("achieved_rate_per_s").copied().unwrap_or(f64::NAN),
                metrics.get("target_rate_per_s").copied().unwrap_or(f64::NAN)
            )],
            _ => Vec::new(),
        }
    }

    fn views(&self, _params: &Params) -> Vec<ViewSpec> {
        vec![
            ViewSpec::Curve {
                x_param: SIZE.name.into(),
                metric: "latency_mean_ms".into(),
            },
            ViewSpec::Table {
                row_param: SIZE.name.into(),
            },
            // latencytest's per-interval report, drawn as seed 003's
            // Figures 6 and 7 are.
            ViewSpec::Series {
                series: "interval_mean_ns".into(),
                min: Some("interval_min_ns".into()),
                max: Some("interval_max_ns".into()),
                spread: Some("interval_stddev_ns".into()),
                count: Some("interval_count".into()),
                title: "One-way latency per interval: mean ± 1 standard deviation of its messages"
                    .into(),
                unit: "ms".into(),
                scale: 1e-6,
                interval_param: Some(INTERVAL.name.into()),
                metric: "latency_mean_ms".into(),
            },
        ]
    }

    fn expected_duration(&self, params: &Params) -> Duration {
        let s = [WARMUP.name, DURATION.name]
            .iter()
            .map(|n| params.f64(n).unwrap_or(0.0).max(0.0))
            .sum::<f64>();
        Duration::from_secs_f64(s + 0.5)
    }

    fn server_side(&self) -> ServerSide {
        ServerSide::Service
    }

    fn run_client(&self, params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
        let plan = Plan::read(params)?;
        let login = common::login(KIND, params, ctx, plan.nodelay)?;
        let cpu0 = CpuSnapshot::take();
        let out = match run(&plan, &login, &ctx.abort) {
            Ok(o) => o,
            Err(_) if ctx.abort.load(Ordering::Relaxed) => return Err(WorkloadError::Aborted),
            Err(e) => return Err(WorkloadError::Other(format!("{KIND}: {e}"))),
        };
        let cpu = cpu0.usage_until(&CpuSnapshot::take());
        Ok(side_result(&plan, &out, cpu))
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

fn side_result(plan: &Plan, out: &Outcome, cpu: benchlab_core::CpuUsage) -> SideResult {
    let mut s = SideResult::default();
    for (k, v) in [
        ("sent", out.sent_total),
        ("sent_measured", out.sent_measured),
        ("received", out.received),
        ("measured", out.sent.count()),
        ("out_of_order", out.out_of_order),
    ] {
        s.counters.insert(k.into(), v);
    }
    let series = |f: &dyn Fn(&Interval) -> u64| Series {
        unit: "ns".into(),
        stride: 1,
        values: out.intervals.iter().map(f).collect(),
    };
    s.series.insert("interval_count".into(), {
        let mut c = series(&|i| i.0);
        c.unit = "messages".into();
        c
    });
    s.series.insert(
        "interval_min_ns".into(),
        series(&|i| if i.0 == 0 { 0 } else { i.1 }),
    );
    s.series.insert("interval_max_ns".into(), series(&|i| i.2));
    s.series.insert(
        "interval_stddev_ns".into(),
        series(&|i| interval_stddev_ns(i).round() as u64),
    );
    s.series.insert(
        "interval_mean_ns".into(),
        series(&|i| i.3.checked_div(i.0).unwrap_or(0)),
    );
    s.histograms
        .insert("latency".into(), out.sent.histogram_data());
    s.histograms
        .insert("intended".into(), out.intended.histogram_data());
    s.values.insert("measure_s".into(), out.measure_s);
    s.values.insert("rate_per_s".into(), plan.rate);
    s.values
        .insert("max_send_lag_ns".into(), out.max_lag_ns as f64);
    s.cpu = Some(cpu);
    s.peak_rss_kib = benchlab_core::cpu::peak_rss_kib();
    s
}

/// The sample standard deviation (n − 1) of an interval's latencies, in
/// ns, exact from its integer sums (0 with fewer than two).
fn interval_stddev_ns(i: &Interval) -> f64 {
    let (n, sum, sum_sq) = (u128::from(i.0), u128::from(i.3), i.4);
    if n < 2 {
        return 0.0;
    }
    ((n * sum_sq - sum * sum) as f64 / (n * (n - 1)) as f64).sqrt()
}

/// The figures, from the client side's raw result.
pub fn derive(
    client: &SideResult,
    server: Option<&SideResult>,
) -> Result<std::collections::BTreeMap<String, f64>, WorkloadError> {
    let (sent, received, ooo) = (
        client.counter("sent"),
        client.counter("received"),
        client.counter("out_of_order"),
    );
    if received != sent || ooo > 0 {
        return Err(WorkloadError::Other(format!(
            "{KIND}: not every message arrived once and in order: {sent} sent, {received} received, {ooo} out of sequence"
        )));
    }
    let measured = client.counter("measured");
    if measured == 0 {
        return Err(WorkloadError::Other(format!(
            "{KIND}: no message in the measured interval"
        )));
    }
    let series = |k: &str| {
        client
            .series
            .get(k)
            .map(|s| s.values.clone())
            .unwrap_or_default()
    };
    let (counts, means) = (series("interval_count"), series("interval_mean_ns"));
    // latencytest's figure: the mean over intervals of each interval's
    // mean (empty intervals, "Stalled", have none).
    let ms: Vec<f64> = counts
        .iter()
        .zip(&means)
        .filter(|(c, _)| **c > 0)
        .map(|(_, m)| *m as f64 / 1e6)
        .collect();
    let (mean, sd) = common::mean_sd(&ms);
    let mut m = std::collections::BTreeMap::new();
    m.insert("latency_mean_ms".into(), mean);
    m.insert("latency_stddev_ms".into(), sd);
    for (hist, prefix, quantiles) in [
        (
            "latency",
            "latency",
            &[("p50", 0.5), ("p99", 0.99), ("p999", 0.999)][..],
        ),
        ("intended", "intended", &[("p50", 0.5), ("p99", 0.99)][..]),
    ] {
        let Some(h) = client.histograms.get(hist) else {
            continue;
        };
        let d = h
            .decode()
            .map_err(|e| WorkloadError::Other(format!("{KIND}: {hist} histogram: {e}")))?;
        for (name, q) in quantiles {
            m.insert(
                format!("{prefix}_{name}_ms"),
                d.value_at_quantile(*q) as f64 / 1e6,
            );
        }
        if hist == "latency" {
            m.insert("latency_min_ms".into(), h.min as f64 / 1e6);
            m.insert("latency_max_ms".into(), h.max as f64 / 1e6);
        }
    }
    let secs = client.value("measure_s");
    let target = client.value("rate_per_s");
    let achieved = client.counter("sent_measured") as f64 / secs;
    m.insert("achieved_rate_per_s".into(), achieved);
    m.insert("target_rate_per_s".into(), target);
    m.insert(
        "rate_shortfall".into(),
        f64::from(u8::from(achieved < 0.99 * target)),
    );
    m.insert(
        "max_send_lag_ms".into(),
        client.value("max_send_lag_ns") / 1e6,
    );
    if let Some(cpu) = &client.cpu {
        m.insert(
            "client_cpu_us_per_message".into(),
            cpu.process_cpu_s * 1e6 / sent.max(1) as f64,
        );
    }
    if let Some(s) = server {
        let cpu_s = s.engine(SERVICE_CPU_S);
        if cpu_s.is_finite() {
            m.insert(
                "service_cpu_us_per_message".into(),
                cpu_s * 1e6 / sent.max(1) as f64,
            );
        }
        let util = s.engine(SERVICE_UTIL_PCT);
        if util.is_finite() {
            m.insert("service_util_pct".into(), util);
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
    fn a_size_below_the_stamp_is_refused() {
        let e = LATENCY
            .validate(&params(&[(SIZE.name, Value::Int(8))]))
            .unwrap_err();
        assert_eq!(e.key, "size");
        assert!(e.message.contains("below the 16 B stamp"), "{}", e.message);
        assert!(LATENCY
            .validate(&params(&[(SIZE.name, Value::Int(16))]))
            .is_ok());
        let e = LATENCY
            .validate(&params(&[(RATE.name, Value::Float(0.0))]))
            .unwrap_err();
        assert_eq!(e.key, "rate_per_s");
    }

    #[test]
    fn ack_defaults_to_half_the_window() {
        let p = Plan::read(&params(&[])).unwrap();
        assert_eq!((p.prefetch, p.ack), (100, 50));
    }

    /// An interval's standard deviation is exact from its sums, and one
    /// slow message among many moves it far less than the interval's max.
    #[test]
    fn interval_stddev_from_sums() {
        let mut iv: Interval = (0, u64::MAX, 0, 0, 0);
        let mut add = |lat: u64| {
            iv.0 += 1;
            iv.2 = iv.2.max(lat);
            iv.3 += lat;
            iv.4 += u128::from(lat) * u128::from(lat);
        };
        for lat in [100_000u64, 200_000, 300_000] {
            add(lat);
        }
        assert!((interval_stddev_ns(&iv) - 100_000.0).abs() < 1e-6);
        // 99 messages at 0.2 ms and one at 30 ms: the max is 30 ms, the
        // standard deviation ≈ 2.98 ms.
        let mut iv: Interval = (0, u64::MAX, 0, 0, 0);
        for i in 0..100u64 {
            let lat = if i == 50 { 30_000_000 } else { 200_000 };
            iv.0 += 1;
            iv.2 = iv.2.max(lat);
            iv.3 += lat;
            iv.4 += u128::from(lat) * u128::from(lat);
        }
        let sd = interval_stddev_ns(&iv);
        assert!((sd - 2_980_000.0).abs() < 10_000.0, "{sd}");
        assert_eq!(interval_stddev_ns(&(1, 5, 5, 5, 25)), 0.0);
    }

    #[test]
    fn figures_from_interval_series() {
        let mut lat = LatencyRecorder::new(2);
        for v in [100_000u64, 200_000, 300_000] {
            lat.record(v);
        }
        let mut s = SideResult::default();
        for (k, v) in [
            ("sent", 3u64),
            ("received", 3),
            ("measured", 3),
            ("sent_measured", 3),
        ] {
            s.counters.insert(k.into(), v);
        }
        s.series.insert(
            "interval_count".into(),
            Series {
                unit: "messages".into(),
                stride: 1,
                values: vec![2, 0, 1],
            },
        );
        s.series.insert(
            "interval_mean_ns".into(),
            Series {
                unit: "ns".into(),
                stride: 1,
                values: vec![150_000, 0, 300_000],
            },
        );
        s.histograms.insert("latency".into(), lat.histogram_data());
        s.values.insert("measure_s".into(), 3.0);
        s.values.insert("rate_per_s".into(), 1.0);
        s.values.insert("max_send_lag_ns".into(), 0.0);
        let m = derive(&s, None).unwrap();
        // Mean of the non-empty interval means: (0.15 + 0.3) / 2.
        assert!((m["latency_mean_ms"] - 0.225).abs() < 1e-12);
        assert!((m["latency_stddev_ms"] - 0.106_066_017).abs() < 1e-8);
        assert_eq!(m["achieved_rate_per_s"], 1.0);
        assert_eq!(m["rate_shortfall"], 0.0);
        let declared: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
        for k in m.keys() {
            assert!(declared.contains(&k.as_str()), "{k} undeclared");
        }
        s.counters.insert("received".into(), 2);
        assert!(derive(&s, None)
            .unwrap_err()
            .to_string()
            .contains("3 sent, 2 received"));
    }
}
