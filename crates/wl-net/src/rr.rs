//! `net.rr`: request/response, netperf's `TCP_RR` and `UDP_RR`.
//!
//! # How it measures
//!
//! One transaction is in flight, as netperf without `-b`: the client sends a
//! `request_size` request and receives the whole `response_size` response
//! (TCP: `recv(MSG_WAITALL)` continued until complete, netperf's
//! `NETPERF_WAITALL` loop; UDP: one `recv()`), the server receives the whole
//! request and sends the response. `TCP_NODELAY` is off unless `nodelay`,
//! as netperf. The measured loop reads no clock: a timer thread ends
//! warm-up and the measured interval by setting flags.
//!
//! `transactions_per_s = transactions / elapsed_s` over the measured
//! interval and `rtt_us = 10^6 / transactions_per_s`, netperf's
//! `RT_LATENCY` with no burst; `rtt_half_us = ½ × 10^6 /
//! transactions_per_s` is the RTT/2 that seed 002's table quotes for
//! netperf ("RTT/2 can be calculated from its printed results"), shown in
//! tables with `latency = "half-round-trip"`. Warm-up transactions are counted apart
//! (`warmup_transactions`); the server counts every transaction it served,
//! so `server transactions = warmup_transactions + transactions` over TCP
//! (checked by [`combine`](benchlab_core::Workload::combine)).
//!
//! *Differs from netperf*:
//! - The client's interval ends when the last transaction completes, before
//!   the end handshake (netperf stops its clock after it); a transaction
//!   in flight when the time is up is completed and counted, where netperf's
//!   SIGALRM interrupts and drops it. Both change the result by about one
//!   transaction.
//! - UDP loss: a lost datagram stalls netperf until its test timer fires.
//!   Here a reply that has not come within 500 ms counts in
//!   `lost_transactions` and the client sends the next request. A reply
//!   later than that would then be taken as the answer to the next request
//!   (requests carry no sequence number, since they may be 1 byte), which
//!   shortens that round trip; `lost_transactions > 0` flags such points.
//! - The UDP end is netperf's three zero-length datagrams; a server that
//!   misses them stops 4 s (netperf's `PAD_TIME`) after the client's
//!   planned end.
//!
//! **CPU.** The client snapshots its CPU use around its measured interval.
//! The server cannot see the client's phases, so its interval starts
//! `warmup_s` after the first request and ends at the client's end; its
//! `measured_transactions` count that interval. Service demand follows
//! netperf: system-wide utilization × 10⁴ / (transactions/s) × CPUs, with
//! the client's rate for both sides; the process variant divides each side's
//! own CPU time by the transactions of its own interval.

use std::collections::BTreeMap;
use std::time::Duration;

use benchlab_core::cost::LoopCost;
use benchlab_core::cpu::{service_demand_process, service_demand_system, CpuSnapshot};
use benchlab_core::param::{ParamDefault, ParamKind, ParamSpec, Params, DURATION, WARMUP};
use benchlab_core::ValidationError;
use benchlab_core::{
    Better, ClientCtx, Combine, MetricSpec, Sample, ServerCtx, SideResult, Workload, WorkloadError,
};

use crate::common::exchange::{serve_requests, Exchanger, Outcome, ServeSpec};
use crate::common::params::{
    checked, opt_size, secs, size, validate_times, Proto, PROTOCOL, UDP_MAX_PAYLOAD,
};
use crate::common::results::{
    abort_wins, mean_metrics, need_server, put, put_cpu, server_addr, side_result, sum_metrics,
    CPU_METRICS,
};
use crate::common::timer::Timer;

/// The `net.rr` workload (netperf `TCP_RR` / `UDP_RR`).
pub struct NetRr;

/// The registered instance.
pub static RR: NetRr = NetRr;

const KIND: &str = "net.rr";

const REQUEST_SIZE: ParamSpec = ParamSpec {
    name: "request_size",
    kind: ParamKind::Bytes,
    default: ParamDefault::Int(1),
    help: "request bytes (netperf -r; default 1); UDP: at most 65507",
};

const RESPONSE_SIZE: ParamSpec = ParamSpec {
    name: "response_size",
    kind: ParamKind::Bytes,
    default: ParamDefault::Unset,
    help: "response bytes; unset: request_size, as netperf -r N",
};

const NODELAY: ParamSpec = ParamSpec {
    name: "nodelay",
    kind: ParamKind::Bool,
    default: ParamDefault::Bool(false),
    help: "set TCP_NODELAY on both sides (netperf -D; off by default, as netperf)",
};

/// netperf's test-specific `-m` as a study passed it to an RR test, which
/// ignores it: TCP_RR and UDP_RR size their transactions with `-r` only
/// (default 1 byte each way). Seed 000's scripts ran `netperf -t TCP_RR …
/// -- -m $big` for `big` from 1 to 1024, so every one of its RR rows is a
/// 1-byte transaction, which is why its latencies stay flat across the
/// sizes. The parameter changes nothing in the measurement; swept as the
/// row parameter, it lets a study run what the seed really ran under the
/// seed's row labels.
const NETPERF_M: ParamSpec = ParamSpec {
    name: "netperf_m",
    kind: ParamKind::Bytes,
    default: ParamDefault::Unset,
    help: "netperf's -m as given to an RR test, which ignores it: recorded and usable as row labels (seed 000's RR rows), never sent; request_size and response_size set the transaction",
};

/// The choices of [`LATENCY`].
const LATENCY_CHOICES: &[&str] = &[ROUND_TRIP, HALF_ROUND_TRIP];
const ROUND_TRIP: &str = "round-trip";
const HALF_ROUND_TRIP: &str = "half-round-trip";

/// Which latency the tables quote. Both are recorded at every point; the
/// choice only picks the table figure, so that a seed's table reads as the
/// seed printed it (seed 000: round trip; seed 002: RTT/2).
const LATENCY: ParamSpec = ParamSpec {
    name: "latency",
    kind: ParamKind::Choice(LATENCY_CHOICES),
    default: ParamDefault::Str(ROUND_TRIP),
    help: "the table's latency: round-trip (10^6 / transactions per second, netperf's RT_LATENCY) or half-round-trip (RTT/2, half of it, as seed 002 quotes netperf); both are recorded",
};

const PARAMS: &[ParamSpec] = &[
    PROTOCOL,
    REQUEST_SIZE,
    RESPONSE_SIZE,
    NODELAY,
    LATENCY,
    NETPERF_M,
    DURATION,
    WARMUP,
];

const TCP_LABEL: &str = "TCP round-trip latency (µs)";
const UDP_LABEL: &str = "UDP round-trip latency (µs)";
/// Label of a table whose rows span both protocols.
const ANY_LABEL: &str = "Round-trip latency (µs)";
const TCP_HALF_LABEL: &str = "TCP RTT/2, half the round trip (µs)";
const UDP_HALF_LABEL: &str = "UDP RTT/2, half the round trip (µs)";
const ANY_HALF_LABEL: &str = "RTT/2, half the round trip (µs)";

const CLIENT: &str = "net.rr client";
const SERVER: &str = "net.rr server";

struct Config {
    proto: Proto,
    request_size: usize,
    response_size: usize,
    nodelay: bool,
    duration: Duration,
    warmup: Duration,
}

impl Config {
    fn read(params: &Params) -> Result<Config, WorkloadError> {
        let request_size = size(params, REQUEST_SIZE.name)?;
        let cfg = Config {
            proto: Proto::from_params(params)?,
            request_size,
            response_size: opt_size(params, RESPONSE_SIZE.name)?.unwrap_or(request_size),
            nodelay: params.bool(NODELAY.name)?,
            duration: secs(params, DURATION.name)?,
            warmup: secs(params, WARMUP.name)?,
        };
        checked(&RR, params)?;
        Ok(cfg)
    }
}

/// Checks a request or response size: at least one byte (a zero-length
/// request could not be told from the UDP end marker, and a zero-length
/// TCP message is no exchange at all); a UDP datagram's limit.
fn check_size(params: &Params, name: &str) -> Result<(), ValidationError> {
    match params.opt_u64(name) {
        Ok(Some(0)) => Err(ValidationError::new(name, "must be at least 1 byte")),
        Ok(Some(n)) if Proto::or_tcp(params) == Proto::Udp && n > UDP_MAX_PAYLOAD => {
            Err(ValidationError::new(
                name,
                format!("a UDP datagram holds at most {UDP_MAX_PAYLOAD} bytes, got {n}"),
            ))
        }
        _ => Ok(()),
    }
}

impl Workload for NetRr {
    /// One operation is a request-response transaction.
    fn operation_rate(&self) -> Option<&'static str> {
        Some("transactions_per_s")
    }

    fn kind(&self) -> &'static str {
        KIND
    }

    fn summary(&self) -> &'static str {
        "one request/response in flight over TCP or UDP (netperf TCP_RR / UDP_RR): transactions/s and round-trip latency"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn row_param(&self) -> &'static str {
        REQUEST_SIZE.name
    }

    fn validate(&self, params: &Params) -> Result<(), ValidationError> {
        check_size(params, REQUEST_SIZE.name)?;
        check_size(params, RESPONSE_SIZE.name)?;
        validate_times(params)
    }

    fn table_metrics(&self, params: &Params) -> Vec<MetricSpec> {
        let half = params.str(LATENCY.name).ok() == Some(HALF_ROUND_TRIP);
        let (tcp, udp, any) = if half {
            (TCP_HALF_LABEL, UDP_HALF_LABEL, ANY_HALF_LABEL)
        } else {
            (TCP_LABEL, UDP_LABEL, ANY_LABEL)
        };
        let label = match Proto::from_params(params) {
            Ok(Proto::Tcp) => tcp,
            Ok(Proto::Udp) => udp,
            // The protocol varies within the table (it forms its rows).
            Err(_) => any,
        };
        vec![if half {
            // One decimal, as seed 002's table.
            MetricSpec {
                name: "rtt_half_us",
                label,
                better: Better::Lower,
                decimals: 1,
                combine: Combine::Mean,
            }
        } else {
            MetricSpec {
                name: "rtt_us",
                label,
                better: Better::Lower,
                decimals: 2,
                combine: Combine::Mean,
            }
        }]
    }

    fn metrics(&self, params: &Params) -> Vec<MetricSpec> {
        let mut m = self.table_metrics(params);
        m.extend(sum_metrics(&[
            "transactions_per_s",
            "transactions",
            "warmup_transactions",
            "lost_transactions",
        ]));
        let mut means = CPU_METRICS.to_vec();
        means.extend([
            "client_sd_us_per_tran",
            "client_proc_sd_us_per_tran",
            "server_sd_us_per_tran",
            "server_proc_sd_us_per_tran",
        ]);
        m.extend(mean_metrics(&means));
        m
    }

    fn average_row(&self) -> bool {
        // Seed 000's latency tables (Appendix C) end with an Average row.
        true
    }

    fn expected_duration(&self, params: &Params) -> Duration {
        let s = params.f64(WARMUP.name).unwrap_or(0.0) + params.f64(DURATION.name).unwrap_or(0.0);
        Duration::from_secs_f64(s.max(0.0) + 0.2)
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
            req_size: cfg.request_size,
            rsp_size: cfg.response_size,
            nodelay: cfg.nodelay,
            warmup: cfg.warmup,
            total_name: "transactions",
            measured_name: "measured_transactions",
            what: SERVER,
        };
        abort_wins(serve_requests(&spec, ctx, ready), &ctx.abort)
    }

    fn run_client(&self, params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
        abort_wins(client(params, ctx), &ctx.abort)
    }

    fn combine(
        &self,
        params: &Params,
        client: SideResult,
        server: Option<SideResult>,
    ) -> Result<Sample, WorkloadError> {
        let proto = Proto::from_params(params)?;
        let server = need_server(server, KIND)?;
        let done = client.counter("transactions");
        let warm = client.counter("warmup_transactions");
        let served = server.counter("transactions");
        // Over TCP nothing is lost, so the two independent counts must
        // agree; a difference is a bug.
        if proto == Proto::Tcp && served != warm + done {
            return Err(WorkloadError::Other(format!(
                "{KIND}: the server served {served} transactions but the client completed {} ({warm} warm-up + {done})",
                warm + done
            )));
        }
        let elapsed = client.value("elapsed_s");
        if done == 0 || elapsed.is_nan() || elapsed <= 0.0 {
            return Err(WorkloadError::Other(format!(
                "{KIND}: no transaction completed in the measured interval"
            )));
        }
        let tps = done as f64 / elapsed;
        let mut m = BTreeMap::new();
        put(&mut m, "transactions_per_s", tps);
        put(&mut m, "rtt_us", 1e6 / tps);
        put(&mut m, "rtt_half_us", rtt_half_us(tps));
        put(&mut m, "transactions", done as f64);
        put(&mut m, "warmup_transactions", warm as f64);
        put(&mut m, "elapsed_s", elapsed);
        put(
            &mut m,
            "lost_transactions",
            client.counter("lost_transactions") as f64,
        );

        put_cpu(&mut m, "client", client.cpu.as_ref());
        put_cpu(&mut m, "server", server.cpu.as_ref());
        if let Some(c) = &client.cpu {
            put(
                &mut m,
                "client_sd_us_per_tran",
                service_demand_system(c, tps),
            );
            put(
                &mut m,
                "client_proc_sd_us_per_tran",
                service_demand_process(c, done as f64),
            );
        }
        if let Some(c) = &server.cpu {
            // netperf: the remote service demand uses the local rate.
            put(
                &mut m,
                "server_sd_us_per_tran",
                service_demand_system(c, tps),
            );
            put(
                &mut m,
                "server_proc_sd_us_per_tran",
                service_demand_process(c, server.counter("measured_transactions") as f64),
            );
        }
        Ok(Sample {
            metrics: m,
            client,
            server: Some(server),
            ..Sample::default()
        })
    }
}

/// RTT/2 in µs from a transaction rate: ½ × 10^6 / transactions per
/// second, one transaction being one round trip (seed 002: "RTT/2 can be
/// calculated from [netperf's] printed results").
pub fn rtt_half_us(transactions_per_s: f64) -> f64 {
    0.5e6 / transactions_per_s
}

/// The client side (see the module docs).
fn client(params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
    let cfg = Config::read(params)?;
    let addr = server_addr(ctx.server, KIND)?;
    let mut ex = Exchanger::connect(
        cfg.proto,
        addr,
        cfg.request_size,
        cfg.response_size,
        cfg.nodelay,
        ctx.abort.clone(),
        CLIENT,
    )?;

    let timer = Timer::start(cfg.warmup, ctx.abort.clone(), Some(ex.watch()))?;
    let (mut warm, mut warm_lost) = (0u64, 0u64);
    while !timer.warm_done() {
        match ex.exchange()? {
            Outcome::Done => warm += 1,
            Outcome::Lost => warm_lost += 1,
        }
    }
    let c0 = CpuSnapshot::take();
    timer.measure_for(cfg.duration);
    let cost = LoopCost::start();
    let (done, lost) = measure(&mut ex, &timer)?;
    cost.end(CLIENT, done + lost);
    let c1 = CpuSnapshot::take();
    if timer.aborted() {
        return Err(WorkloadError::Aborted);
    }
    drop(timer);
    ex.finish()?;
    let cpu = c0.usage_until(&c1);
    Ok(side_result(
        &[
            ("transactions", done),
            ("warmup_transactions", warm),
            ("lost_transactions", lost),
            ("warmup_lost_transactions", warm_lost),
        ],
        &[("elapsed_s", cpu.elapsed_s)],
        Some(cpu),
    ))
}

/// The measured loop: transactions until the timer stops it; returns
/// those done and those lost. Never inlined, so that `bench/cost` can
/// count its instructions by function (one call per run).
#[inline(never)]
fn measure(ex: &mut Exchanger, timer: &Timer) -> Result<(u64, u64), WorkloadError> {
    let (mut done, mut lost) = (0u64, 0u64);
    while !timer.stopped() {
        match ex.exchange() {
            Ok(Outcome::Done) => done += 1,
            Ok(Outcome::Lost) => lost += 1,
            // A round trip the watchdog ended after the interval.
            Err(e) => {
                ex.stopped_or(e)?;
                break;
            }
        }
    }
    Ok((done, lost))
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchlab_core::Value;

    fn params(kv: &[(&str, Value)]) -> Params {
        let mut p = Params::default();
        for (k, v) in kv {
            p.0.insert(k.to_string(), v.clone());
        }
        p
    }

    /// Known values: seed 002's netperf rows are RTT/2 of the printed
    /// rate; 17.0 µs (RHEL, Solarflare, TCP, no load) is 29,412 TCP_RR
    /// transactions per second.
    #[test]
    fn rtt_half_is_half_the_round_trip() {
        assert_eq!(rtt_half_us(2000.0), 250.0);
        assert_eq!(rtt_half_us(1e6), 0.5);
        assert_eq!(format!("{:.1}", rtt_half_us(29_412.0)), "17.0");

        // combine: 1000 transactions in 0.5 s → 2000/s, 500 µs, 250 µs.
        let client = crate::common::results::side_result(
            &[("transactions", 1000), ("warmup_transactions", 10)],
            &[("elapsed_s", 0.5)],
            None,
        );
        let server = crate::common::results::side_result(&[("transactions", 1010)], &[], None);
        let p = params(&[("protocol", Value::Str("tcp".into()))]);
        let s = RR.combine(&p, client, Some(server)).unwrap();
        assert_eq!(s.metrics["transactions_per_s"], 2000.0);
        assert_eq!(s.metrics["rtt_us"], 500.0);
        assert_eq!(s.metrics["rtt_half_us"], 250.0);
    }

    #[test]
    fn latency_picks_the_table_metric() {
        let tcp = ("protocol", Value::Str("tcp".into()));
        let m = RR.table_metrics(&params(std::slice::from_ref(&tcp)));
        assert_eq!((m[0].name, m[0].decimals), ("rtt_us", 2));
        let half = ("latency", Value::Str(HALF_ROUND_TRIP.into()));
        let m = RR.table_metrics(&params(&[tcp, half.clone()]));
        assert_eq!((m[0].name, m[0].label), ("rtt_half_us", TCP_HALF_LABEL));
        assert_eq!(m[0].decimals, 1);
        let m = RR.table_metrics(&params(&[half]));
        assert_eq!(m[0].label, ANY_HALF_LABEL);
    }

    /// Seed 000 passed `-m $big` to TCP_RR, which netperf ignores: with
    /// `netperf_m` set, the transaction is still `request_size` both ways.
    #[test]
    fn netperf_m_is_recorded_not_sent() {
        let p = params(&[
            ("protocol", Value::Str("udp".into())),
            ("request_size", Value::Int(1)),
            ("netperf_m", Value::Int(1024)),
            ("nodelay", Value::Bool(false)),
            ("duration_s", Value::Float(1.0)),
            ("warmup_s", Value::Float(0.0)),
        ]);
        let c = Config::read(&p).unwrap();
        assert_eq!((c.request_size, c.response_size), (1, 1));
        assert!(PARAMS.iter().any(|s| s.name == NETPERF_M.name));
    }
}
