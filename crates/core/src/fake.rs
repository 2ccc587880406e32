//! `fake`: a workload that does no real measurement and emits known
//! numbers (like fio's null engine), so that the whole path — study, plan,
//! agents, store, statistics, tables — can be tested exactly.
//!
//! Its client connects to its server and sends the repetition number; the
//! server reports what it received, which proves both sides really ran in
//! their own processes. Metrics: `score = value + step·repetition` (higher is
//! better) and `latency_us = latency_us + step·repetition` (lower is better).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::param::{ParamDefault, ParamKind, ParamSpec, Params};
use crate::result::{Sample, SideResult};
use crate::workload::{Better, ClientCtx, MetricSpec, ServerCtx, Workload, WorkloadError};

/// The fake workload.
pub struct Fake;

/// The registered instance.
pub static FAKE: Fake = Fake;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "size",
        kind: ParamKind::Bytes,
        default: ParamDefault::Int(0),
        help: "a size that only labels rows",
    },
    ParamSpec {
        name: "value",
        kind: ParamKind::Float,
        default: ParamDefault::Float(100.0),
        help: "score at repetition 0",
    },
    ParamSpec {
        name: "latency_us",
        kind: ParamKind::Float,
        default: ParamDefault::Float(10.0),
        help: "latency at repetition 0",
    },
    ParamSpec {
        name: "step",
        kind: ParamKind::Float,
        default: ParamDefault::Float(1.0),
        help: "added per repetition to both figures",
    },
    ParamSpec {
        name: "sleep_s",
        kind: ParamKind::Seconds,
        default: ParamDefault::Float(0.0),
        help: "time the client spends per repetition",
    },
    ParamSpec {
        name: "fail",
        kind: ParamKind::Bool,
        default: ParamDefault::Bool(false),
        help: "make every repetition of the point fail",
    },
];

const METRICS: &[MetricSpec] = &[
    MetricSpec {
        name: "score",
        label: "Fake score (points)",
        better: Better::Higher,
        decimals: 2,
    },
    MetricSpec {
        name: "latency_us",
        label: "Fake latency (µs)",
        better: Better::Lower,
        decimals: 2,
    },
];

impl Workload for Fake {
    fn kind(&self) -> &'static str {
        "fake"
    }

    fn summary(&self) -> &'static str {
        "emits known numbers; for testing benchlab itself"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn row_param(&self) -> &'static str {
        "size"
    }

    fn table_metrics(&self, _params: &Params) -> Vec<MetricSpec> {
        METRICS.to_vec()
    }

    fn expected_duration(&self, params: &Params) -> Duration {
        Duration::from_secs_f64(params.f64("sleep_s").unwrap_or(0.0))
    }

    fn serve(
        &self,
        _params: &Params,
        ctx: &ServerCtx,
        ready: &mut dyn FnMut(u16),
    ) -> Result<SideResult, WorkloadError> {
        let listener =
            TcpListener::bind(ctx.bind).map_err(|e| WorkloadError::io("fake server: bind", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| WorkloadError::io("fake server", e))?
            .port();
        ready(port);
        let (mut s, _) = listener
            .accept()
            .map_err(|e| WorkloadError::io("fake server: accept", e))?;
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf)
            .map_err(|e| WorkloadError::io("fake server: read", e))?;
        let mut r = SideResult::default();
        r.counters
            .insert("repetition_seen".into(), u32::from_le_bytes(buf) as u64);
        r.peak_rss_kib = crate::cpu::peak_rss_kib();
        Ok(r)
    }

    fn run_client(&self, params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
        let addr = ctx
            .server
            .ok_or_else(|| WorkloadError::Other("fake client needs a server".into()))?;
        let mut s =
            TcpStream::connect(addr).map_err(|e| WorkloadError::io("fake client: connect", e))?;
        s.write_all(&ctx.repetition.to_le_bytes())
            .map_err(|e| WorkloadError::io("fake client: write", e))?;
        let until = Instant::now() + Duration::from_secs_f64(params.f64("sleep_s")?);
        while Instant::now() < until {
            if ctx.abort.load(Ordering::Relaxed) {
                return Err(WorkloadError::Aborted);
            }
            std::thread::sleep(Duration::from_millis(5).min(until - Instant::now()));
        }
        if params.bool("fail")? {
            return Err(WorkloadError::Other("fake failure requested".into()));
        }
        let mut r = SideResult::default();
        r.counters
            .insert("repetition".into(), ctx.repetition as u64);
        r.peak_rss_kib = crate::cpu::peak_rss_kib();
        Ok(r)
    }

    fn combine(
        &self,
        params: &Params,
        client: SideResult,
        server: Option<SideResult>,
    ) -> Result<Sample, WorkloadError> {
        let rep = client.counter("repetition");
        let seen = server.as_ref().map(|s| s.counter("repetition_seen"));
        if seen != Some(rep) {
            return Err(WorkloadError::Other(format!(
                "fake server saw repetition {seen:?}, client sent {rep}"
            )));
        }
        let step = params.f64("step")?;
        let mut sample = Sample {
            client,
            server,
            ..Sample::default()
        };
        sample
            .metrics
            .insert("score".into(), params.f64("value")? + step * rep as f64);
        sample.metrics.insert(
            "latency_us".into(),
            params.f64("latency_us")? + step * rep as f64,
        );
        Ok(sample)
    }
}
