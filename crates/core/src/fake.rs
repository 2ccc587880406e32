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
use crate::shape::Combine;
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
    ParamSpec {
        name: "noise",
        kind: ParamKind::Float,
        default: ParamDefault::Float(0.0),
        help: "relative standard deviation of normal noise on both figures (0.05: 5 %)",
    },
    ParamSpec {
        name: "drift",
        kind: ParamKind::Float,
        default: ParamDefault::Float(0.0),
        help: "relative change of both figures per second since this process's first fake repetition (a machine drifting over a run)",
    },
    ParamSpec {
        name: "shift",
        kind: ParamKind::Float,
        default: ParamDefault::Float(0.0),
        help: "relative change of the score in repetitions measured from Unix time `shift_at` on (0.15: 15 % more): a system that changed at a known moment, for a periodic study's change point",
    },
    ParamSpec {
        name: "shift_at",
        kind: ParamKind::Float,
        default: ParamDefault::Float(0.0),
        help: "Unix time in seconds from which `shift` applies (0: never)",
    },
    ParamSpec {
        name: "seed",
        kind: ParamKind::Count,
        default: ParamDefault::Int(1),
        help: "seed of the noise: with the order of the run it fixes every draw; 0: fresh draws in every agent process (its pid and the clock mixed in), so that runs of the same study draw differently",
    },
];

const METRICS: &[MetricSpec] = &[
    MetricSpec {
        name: "score",
        label: "Fake score (points)",
        better: Better::Higher,
        decimals: 2,
        combine: Combine::Sum,
    },
    MetricSpec {
        name: "latency_us",
        label: "Fake latency (µs)",
        better: Better::Lower,
        decimals: 2,
        combine: Combine::Mean,
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

    fn simulated_params(&self) -> &'static [&'static str] {
        // The fake system under test: its figures, their noise and drift.
        &[
            "value",
            "latency_us",
            "step",
            "noise",
            "drift",
            "shift",
            "shift_at",
            "seed",
        ]
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
        r.values.insert("factor".into(), disturbance(params)?);
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
        // 1 unless the study asked for noise or drift.
        let factor = client.values.get("factor").copied().unwrap_or(1.0);
        let mut sample = Sample {
            client,
            server,
            ..Sample::default()
        };
        // The planted shift, by the wall clock at the end of the
        // repetition: every run after `shift_at` has it, none before.
        let (shift, shift_at) = (params.f64("shift")?, params.f64("shift_at")?);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let shifted = if shift_at > 0.0 && now >= shift_at {
            1.0 + shift
        } else {
            1.0
        };
        sample.metrics.insert(
            "score".into(),
            (params.f64("value")? + step * rep as f64) * factor * shifted,
        );
        sample.metrics.insert(
            "latency_us".into(),
            (params.f64("latency_us")? + step * rep as f64) * factor,
        );
        Ok(sample)
    }
}

/// The multiplicative disturbance of one repetition: `(1 + drift·t)·(1 +
/// noise·z)`, with t the seconds since this process's first fake
/// repetition and z a standard normal draw from `seed` and the number of
/// fake repetitions this process ran before (so two configurations at the
/// same repetition draw differently, and a run in the same order draws the
/// same).
fn disturbance(params: &Params) -> Result<f64, WorkloadError> {
    use std::sync::atomic::AtomicU64;
    use std::sync::OnceLock;
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let (noise, drift) = (params.f64("noise")?, params.f64("drift")?);
    if noise == 0.0 && drift == 0.0 {
        return Ok(1.0);
    }
    let t = ORIGIN.get_or_init(Instant::now).elapsed().as_secs_f64();
    let n = DRAWS.fetch_add(1, Ordering::Relaxed);
    let seed = match params.u64("seed")? {
        // A bisection's rounds are runs of the same study: with a fixed
        // seed each would replay the same noise, and pooling them would
        // count one draw several times.
        0 => {
            static FRESH: OnceLock<u64> = OnceLock::new();
            *FRESH.get_or_init(|| {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0);
                (u64::from(std::process::id()) << 32) ^ nanos
            })
        }
        s => s,
    };
    let unit = |k: u64| {
        // splitmix64 of (seed, draw, k), mapped to (0, 1).
        let mut z = seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(n.wrapping_mul(0xD1B5_4A32_D192_ED03))
            .wrapping_add(k);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    // Box–Muller.
    let z = (-2.0 * unit(1).ln()).sqrt() * (std::f64::consts::TAU * unit(2)).cos();
    Ok((1.0 + drift * t) * (1.0 + noise * z))
}

/// `fake.clients`: a clients-axis workload without a server that emits
/// exact, checkable numbers, to test the engine's clients axis (every
/// client index runs exactly once over all client hosts, nobody starts
/// before everybody has arrived, sums add up).
pub struct FakeClients;

/// The registered instance.
pub static FAKE_CLIENTS: FakeClients = FakeClients;

const CLIENTS_PARAMS: &[ParamSpec] = &[
    crate::shape::CLIENTS_PARAM,
    ParamSpec {
        name: "units",
        kind: ParamKind::Count,
        default: ParamDefault::Int(10),
        help: "work units each client reports",
    },
    ParamSpec {
        name: "sleep_s",
        kind: ParamKind::Seconds,
        default: ParamDefault::Float(0.0),
        help: "time each client side spends after the gate",
    },
    ParamSpec {
        name: "fail_client",
        kind: ParamKind::Count,
        default: ParamDefault::Int(0),
        help: "1-based index of a client whose side fails before arriving (0: none)",
    },
    ParamSpec {
        name: "peak",
        kind: ParamKind::Count,
        default: ParamDefault::Int(0),
        help: "clients up to which the units grow (0: no peak); past it only the first 2·peak − clients clients report units, so the total falls back to 0 at twice the peak",
    },
];

/// The units client `index` (0-based) of a point with `total` clients
/// reports: every client reports `units` up to `peak` clients; past the
/// peak only the first `2·peak − total` do, so that a clients sweep gives
/// an exact curve that rises, peaks and falls (a scaling curve's shape).
pub fn client_units(units: u64, peak: u64, total: u64, index: u64) -> u64 {
    if peak == 0 || total <= peak || index < (2 * peak).saturating_sub(total) {
        units
    } else {
        0
    }
}

const CLIENTS_METRICS: &[MetricSpec] = &[
    MetricSpec::higher("units", "Fake work units (sum over clients)", 0),
    MetricSpec::higher("clients_run", "Clients that ran", 0),
];

/// Microseconds since the Unix epoch (every host of a test shares the
/// machine's clock).
fn now_us() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1e6)
        .unwrap_or(f64::NAN)
}

impl Workload for FakeClients {
    fn kind(&self) -> &'static str {
        "fake.clients"
    }

    fn summary(&self) -> &'static str {
        "clients-axis workload emitting known numbers; for testing benchlab itself"
    }

    fn params(&self) -> &'static [ParamSpec] {
        CLIENTS_PARAMS
    }

    fn row_param(&self) -> &'static str {
        crate::shape::CLIENTS
    }

    fn table_metrics(&self, _params: &Params) -> Vec<MetricSpec> {
        CLIENTS_METRICS.to_vec()
    }

    fn server_side(&self) -> crate::ServerSide {
        crate::ServerSide::None
    }

    fn clients_axis(&self) -> bool {
        true
    }

    fn merge_value(&self, name: &str) -> Combine {
        match name {
            "released_first_us" => Combine::Min,
            _ => Combine::Max,
        }
    }

    fn views(&self, _params: &Params) -> Vec<crate::shape::ViewSpec> {
        vec![
            crate::shape::ViewSpec::Table {
                row_param: crate::shape::CLIENTS.into(),
            },
            crate::shape::ViewSpec::Curve {
                x_param: crate::shape::CLIENTS.into(),
                metric: "units".into(),
            },
        ]
    }

    fn expected_duration(&self, params: &Params) -> Duration {
        Duration::from_secs_f64(params.f64("sleep_s").unwrap_or(0.0))
    }

    fn run_client(&self, params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
        let share = ctx.share;
        let fail = params.u64("fail_client")?;
        let indices = share.first..share.first + share.count;
        if fail > 0 && indices.contains(&((fail - 1) as u32)) {
            return Err(WorkloadError::Other(format!(
                "fake client {fail} failed as requested"
            )));
        }
        let arrived = now_us();
        ctx.gate.arrive()?;
        let released = now_us();
        let until = Instant::now() + Duration::from_secs_f64(params.f64("sleep_s")?);
        while Instant::now() < until {
            if ctx.abort.load(Ordering::Relaxed) {
                return Err(WorkloadError::Aborted);
            }
            std::thread::sleep(Duration::from_millis(5).min(until - Instant::now()));
        }
        let mut r = SideResult::default();
        let (mut sum, mut squares) = (0u64, 0u64);
        for i in indices {
            sum += u64::from(i);
            squares += u64::from(i) * u64::from(i);
        }
        r.counters.insert("clients_run".into(), share.count.into());
        r.counters.insert("index_sum".into(), sum);
        r.counters.insert("index_squares".into(), squares);
        r.counters.insert("sides".into(), 1);
        // Parameters built by hand before `peak` existed (engine tests)
        // lack it: no peak, as its default says.
        let (units, peak) = (params.u64("units")?, params.u64("peak").unwrap_or(0));
        let mine: u64 = (share.first..share.first + share.count)
            .map(|i| client_units(units, peak, share.total.into(), i.into()))
            .sum();
        r.counters.insert("units".into(), mine);
        r.values.insert("arrived_last_us".into(), arrived);
        r.values.insert("released_first_us".into(), released);
        r.peak_rss_kib = crate::cpu::peak_rss_kib();
        Ok(r)
    }

    fn combine(
        &self,
        params: &Params,
        client: SideResult,
        _server: Option<SideResult>,
    ) -> Result<Sample, WorkloadError> {
        let total = params.u64(crate::shape::CLIENTS)?;
        let run = client.counter("clients_run");
        // Every index 0..total exactly once: count, sum and sum of squares
        // all match only then (a duplicate plus a gap would need both
        // sums to balance, which no single swap does).
        let want_sum: u64 = (0..total).sum();
        let want_sq: u64 = (0..total).map(|i| i * i).sum();
        if run != total
            || client.counter("index_sum") != want_sum
            || client.counter("index_squares") != want_sq
        {
            return Err(WorkloadError::Other(format!(
                "fake.clients: {run} of {total} clients ran (index sums {} / {})",
                client.counter("index_sum"),
                client.counter("index_squares")
            )));
        }
        let mut sample = Sample::default();
        sample
            .metrics
            .insert("units".into(), client.counter("units") as f64);
        sample.metrics.insert("clients_run".into(), run as f64);
        sample
            .metrics
            .insert("sides".into(), client.counter("sides") as f64);
        // Positive when the first release came after the last arrival.
        sample.metrics.insert(
            "gate_margin_us".into(),
            client.value("released_first_us") - client.value("arrived_last_us"),
        );
        sample.client = client;
        Ok(sample)
    }
}

#[cfg(test)]
mod tests {
    use super::client_units;

    /// The totals of a sweep with a peak at 4: they rise, peak and fall
    /// back to 0 at twice the peak; no peak means every client counts.
    #[test]
    fn units_rise_peak_and_fall() {
        let total = |c: u64, peak: u64| (0..c).map(|i| client_units(100, peak, c, i)).sum::<u64>();
        let sweep: Vec<u64> = (1..=8).map(|c| total(c, 4)).collect();
        assert_eq!(sweep, [100, 200, 300, 400, 300, 200, 100, 0]);
        assert_eq!(total(9, 4), 0);
        assert_eq!(total(64, 0), 6400);
    }
}
