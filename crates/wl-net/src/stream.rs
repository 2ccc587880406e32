//! `net.stream`: one-way bulk transfer, netperf's `TCP_STREAM` and
//! `UDP_STREAM`. The client sends, the server receives (netperf's
//! direction: `netperf` sends, `netserver` receives).
//!
//! # How it measures
//!
//! The sender calls `send()` back to back with one preallocated
//! `message_size` buffer (never dirtied, like netperf without
//! `--enable-dirty`); the receiver calls `recv()` with a `receive_size`
//! buffer, one call per iteration and no `MSG_WAITALL`, as netserver. A
//! timer thread ends warm-up and the measured interval by setting flags the
//! loops load once per call; the loops read no clock.
//!
//! **TCP.** After the measured interval the sender does `shutdown(SHUT_WR)`
//! and waits for the receiver's EOF (netperf's drain), so every byte sent
//! has been read before the clocks stop. The receiver starts its own
//! warm-up clock at the first byte; when it expires it notes its byte count
//! and time, and the measured interval runs from there to EOF:
//! `throughput_mbps = measured_bytes × 8 / 10^6 / elapsed_s`.
//! *Differs from netperf*, which has no warm-up and divides the receiver's
//! total bytes by the sender's elapsed time (first send to drain): with a
//! warm-up only the receiver knows which bytes arrived after it, so both
//! numerator and denominator are the receiver's. Without warm-up the two
//! agree to within the connection's first round trip.
//!
//! **UDP.** The sender marks each datagram's first byte with its phase (0
//! during warm-up, 1 after), so the receiver counts exactly the measured
//! datagrams and `loss_datagrams = datagrams_sent − datagrams_received` is
//! exact even when datagrams are lost. As netperf, both throughputs are
//! divided by the *sender's* measured elapsed time (`throughput_mbps` from
//! the receiver's bytes, `send_throughput_mbps` from the sender's), failed
//! sends (`ENOBUFS`/`ENOMEM`, reported because `IP_RECVERR` is on, as
//! netperf's `enable_enobufs()`) are counted and not fatal, and the end is
//! three zero-length datagrams. *Differs from netperf*: the sender's
//! interval ends at its last data `send()`, and the markers are spaced (0,
//! 5, 20 ms) because on loopback the receiver's buffer is full at the end
//! and back-to-back markers would be dropped with the data; if all are
//! lost the receiver still stops on its own timer, warm-up + duration +
//! 4 s after the first datagram (netperf's `PAD_TIME`). netperf's default
//! `SO_DONTROUTE` for `UDP_STREAM` is not set, so that the workload also
//! runs across routers.
//!
//! **Buffers.** `send_buffer` / `recv_buffer` are set with `setsockopt()`
//! before connect/listen (Linux doubles the value it reports); unset leaves
//! autotuning alone. The receive size defaults, as netperf `-M`, to the
//! receive socket buffer read back with `getsockopt()`, at least one
//! message. netperf's default send size is its SO_SNDBUF read back (16384
//! on the reference host), which is our fixed default.
//!
//! **CPU.** Each side snapshots its CPU use at the start and end of its
//! measured interval. Service demand follows netperf: system-wide
//! utilization × 10⁴ / (KB/s) × CPUs, with KB/s from the *sender's* measured
//! bytes and elapsed time for both sides. The process variant divides the
//! side's own CPU time by the KB (1024 B) that side moved in its interval.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use benchlab_core::cost::LoopCost;
use benchlab_core::cpu::{service_demand_process, service_demand_system, CpuSnapshot};
use benchlab_core::param::{ParamDefault, ParamKind, ParamSpec, Params, DURATION, WARMUP};
use benchlab_core::ValidationError;
use benchlab_core::{
    Better, ClientCtx, Combine, MetricSpec, Sample, ServerCtx, SideResult, Workload, WorkloadError,
    ABORT_POLL,
};

use crate::common::params::{
    checked, opt_size, secs, size, validate_buffer, validate_times, Proto, PROTOCOL,
    UDP_MAX_PAYLOAD,
};
use crate::common::results::{
    abort_wins, mean_metrics, need_server, put, put_cpu, server_addr, side_result, sum_metrics,
    CPU_METRICS,
};
use crate::common::sock::{
    await_client, bind_server, connect, enable_recverr, set_timeouts, Bufs, ACCEPT_TIMEOUT,
};
use crate::common::sysio::{
    is_enobufs, retry_or_fail, send_all, sys_recv, sys_send, tcp_drain, udp_end_markers,
};
use crate::common::timer::{Idle, Timer, Watch, PAD_TIME};

/// The `net.stream` workload (netperf `TCP_STREAM` / `UDP_STREAM`).
pub struct NetStream;

/// The registered instance.
pub static STREAM: NetStream = NetStream;

const KIND: &str = "net.stream";

const MESSAGE_SIZE: ParamSpec = ParamSpec {
    name: "message_size",
    kind: ParamKind::Bytes,
    default: ParamDefault::Int(16384),
    help: "bytes per send() (netperf -m; default 16384, netperf's default here); UDP: 1..=65507",
};

const SEND_BUFFER: ParamSpec = ParamSpec {
    name: "send_buffer",
    kind: ParamKind::Bytes,
    default: ParamDefault::Unset,
    help: "sender SO_SNDBUF, set before connect (netperf -s); unset: kernel autotuning",
};

const RECV_BUFFER: ParamSpec = ParamSpec {
    name: "recv_buffer",
    kind: ParamKind::Bytes,
    default: ParamDefault::Unset,
    help: "receiver SO_RCVBUF, set before listen (netperf -S); unset: kernel autotuning",
};

const RECEIVE_SIZE: ParamSpec = ParamSpec {
    name: "receive_size",
    kind: ParamKind::Bytes,
    default: ParamDefault::Unset,
    help: "bytes per recv() (netperf -M); unset: the receive socket buffer as read back, at least message_size",
};

const PARAMS: &[ParamSpec] = &[
    PROTOCOL,
    MESSAGE_SIZE,
    SEND_BUFFER,
    RECV_BUFFER,
    RECEIVE_SIZE,
    DURATION,
    WARMUP,
];

const TCP_LABEL: &str = "TCP streaming throughput (10^6 b/s)";
const UDP_LABEL: &str = "UDP streaming throughput (10^6 b/s)";
/// Label of a table whose rows span both protocols.
const ANY_LABEL: &str = "Streaming throughput (10^6 b/s)";

/// Gaps before the three UDP end markers (see the module docs).
const MARKER_GAPS: [Duration; 3] = [
    Duration::ZERO,
    Duration::from_millis(5),
    Duration::from_millis(20),
];

/// Phase byte of UDP datagrams sent during warm-up and after it.
const PHASE_WARMUP: u8 = 0;
const PHASE_MEASURED: u8 = 1;

/// Error contexts of the measured loops (static: nothing is built unless
/// a call fails).
const SEND: &str = "net.stream sender: send";
const RECV: &str = "net.stream receiver: recv";
const CLIENT: &str = "net.stream sender";
const SERVER: &str = "net.stream receiver";

struct Config {
    proto: Proto,
    message_size: usize,
    send_buffer: Option<usize>,
    recv_buffer: Option<usize>,
    receive_size: Option<usize>,
    duration: Duration,
    warmup: Duration,
}

impl Config {
    fn read(params: &Params) -> Result<Config, WorkloadError> {
        let cfg = Config {
            proto: Proto::from_params(params)?,
            message_size: size(params, MESSAGE_SIZE.name)?,
            send_buffer: opt_size(params, SEND_BUFFER.name)?,
            recv_buffer: opt_size(params, RECV_BUFFER.name)?,
            receive_size: opt_size(params, RECEIVE_SIZE.name)?,
            duration: secs(params, DURATION.name)?,
            warmup: secs(params, WARMUP.name)?,
        };
        checked(&STREAM, params)?;
        Ok(cfg)
    }
}

impl Workload for NetStream {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn summary(&self) -> &'static str {
        "one-way bulk transfer over TCP or UDP (netperf TCP_STREAM / UDP_STREAM), throughput in 10^6 bit/s"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn row_param(&self) -> &'static str {
        MESSAGE_SIZE.name
    }

    fn validate(&self, params: &Params) -> Result<(), ValidationError> {
        let key = MESSAGE_SIZE.name.to_string();
        match params.opt_u64(MESSAGE_SIZE.name) {
            Ok(Some(0)) => return Err(ValidationError::new(key, "must be at least 1 byte")),
            Ok(Some(n)) if Proto::or_tcp(params) == Proto::Udp && n > UDP_MAX_PAYLOAD => {
                return Err(ValidationError::new(
                    key,
                    format!("a UDP datagram holds 1..={UDP_MAX_PAYLOAD} bytes, got {n}"),
                ))
            }
            _ => {}
        }
        if let Ok(Some(0)) = params.opt_u64(RECEIVE_SIZE.name) {
            return Err(ValidationError::new(
                RECEIVE_SIZE.name,
                "must be at least 1 byte",
            ));
        }
        validate_buffer(params, SEND_BUFFER.name)?;
        validate_buffer(params, RECV_BUFFER.name)?;
        validate_times(params)
    }

    fn table_metrics(&self, params: &Params) -> Vec<MetricSpec> {
        let label = match Proto::from_params(params) {
            Ok(Proto::Tcp) => TCP_LABEL,
            Ok(Proto::Udp) => UDP_LABEL,
            // The protocol varies within the table (it forms its rows).
            Err(_) => ANY_LABEL,
        };
        vec![MetricSpec {
            name: "throughput_mbps",
            label,
            better: Better::Higher,
            decimals: 2,
            combine: Combine::Sum,
        }]
    }

    fn metrics(&self, params: &Params) -> Vec<MetricSpec> {
        let mut m = self.table_metrics(params);
        m.extend(sum_metrics(&[
            "bytes_sent",
            "bytes_received",
            "measured_bytes",
            "send_throughput_mbps",
            "datagrams_sent",
            "datagrams_received",
            "loss_datagrams",
            "failed_sends",
        ]));
        let mut means = CPU_METRICS.to_vec();
        means.extend([
            "loss_pct",
            "client_sd_us_per_kb",
            "client_proc_sd_us_per_kb",
            "server_sd_us_per_kb",
            "server_proc_sd_us_per_kb",
        ]);
        m.extend(mean_metrics(&means));
        m
    }

    fn notes(&self, params: &Params, metrics: &BTreeMap<String, f64>) -> Vec<String> {
        let requested = |k: &str| params.opt_u64(k).ok().flatten();
        [
            clip_note(
                RECV_BUFFER.name,
                requested(RECV_BUFFER.name),
                metrics.get("recv_buffer_bytes").copied(),
                metrics.get("rmem_max_bytes").copied(),
                "rmem_max",
            ),
            clip_note(
                SEND_BUFFER.name,
                requested(SEND_BUFFER.name),
                metrics.get("send_buffer_bytes").copied(),
                metrics.get("wmem_max_bytes").copied(),
                "wmem_max",
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    fn expected_duration(&self, params: &Params) -> Duration {
        let s = params.f64(WARMUP.name).unwrap_or(0.0) + params.f64(DURATION.name).unwrap_or(0.0);
        // Plus connection set-up and the drain.
        Duration::from_secs_f64(s.max(0.0) + 0.2)
    }

    fn serve(
        &self,
        params: &Params,
        ctx: &ServerCtx,
        ready: &mut dyn FnMut(u16),
    ) -> Result<SideResult, WorkloadError> {
        let cfg = Config::read(params)?;
        let r = match cfg.proto {
            Proto::Tcp => tcp_receiver(&cfg, ctx, ready),
            Proto::Udp => udp_receiver(&cfg, ctx, ready),
        };
        abort_wins(r, &ctx.abort)
    }

    fn run_client(&self, params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
        let cfg = Config::read(params)?;
        let addr = server_addr(ctx.server, KIND)?;
        let r = match cfg.proto {
            Proto::Tcp => tcp_sender(&cfg, addr, &ctx.abort),
            Proto::Udp => udp_sender(&cfg, addr, &ctx.abort),
        };
        abort_wins(r, &ctx.abort)
    }

    fn combine(
        &self,
        params: &Params,
        client: SideResult,
        server: Option<SideResult>,
    ) -> Result<Sample, WorkloadError> {
        let proto = Proto::from_params(params)?;
        let server = need_server(server, KIND)?;
        let mut m = BTreeMap::new();
        let bytes_sent = client.counter("bytes_sent");
        let bytes_received = server.counter("bytes_received");
        let measured = server.counter("measured_bytes_received");
        put(&mut m, "bytes_sent", bytes_sent as f64);
        put(&mut m, "bytes_received", bytes_received as f64);
        put(&mut m, "measured_bytes", measured as f64);
        let elapsed = match proto {
            Proto::Tcp => {
                // TCP is reliable and the sender waited for the receiver's
                // EOF: any difference is a bug, not a measurement.
                if bytes_sent != bytes_received {
                    return Err(WorkloadError::Other(format!(
                        "{KIND}: the receiver counted {bytes_received} bytes but the sender sent {bytes_sent}"
                    )));
                }
                server.value("elapsed_s")
            }
            Proto::Udp => client.value("elapsed_s"),
        };
        if measured == 0 || elapsed.is_nan() || elapsed <= 0.0 {
            return Err(WorkloadError::Other(format!(
                "{KIND}: no data arrived in the measured interval"
            )));
        }
        put(&mut m, "elapsed_s", elapsed);
        put(&mut m, "throughput_mbps", mbps(measured, elapsed));
        if proto == Proto::Udp {
            let sent = client.counter("measured_datagrams_sent");
            let got = server.counter("measured_datagrams_received");
            // Signed: more received than sent would show up, not wrap.
            let loss = sent as f64 - got as f64;
            put(
                &mut m,
                "send_throughput_mbps",
                mbps(client.counter("measured_bytes_sent"), elapsed),
            );
            put(&mut m, "datagrams_sent", sent as f64);
            put(&mut m, "datagrams_received", got as f64);
            put(&mut m, "loss_datagrams", loss);
            put(&mut m, "loss_pct", 100.0 * loss / sent as f64);
            put(
                &mut m,
                "failed_sends",
                client.counter("failed_sends") as f64,
            );
        }

        // The buffers in force (and the kernel's ceilings), as each side
        // read them back: the figures of a recv_buffer sweep mean nothing
        // without them (seed 000's Figure 5 asks for up to 1 MiB).
        for (side, key) in [
            (&server, "recv_buffer_bytes"),
            (&server, "rmem_max_bytes"),
            (&client, "send_buffer_bytes"),
            (&client, "wmem_max_bytes"),
        ] {
            if let Some(&v) = side.counters.get(key) {
                put(&mut m, key, v as f64);
            }
        }

        put_cpu(&mut m, "client", client.cpu.as_ref());
        put_cpu(&mut m, "server", server.cpu.as_ref());
        // netperf: both service demands use the sender's (local) bytes and
        // elapsed time.
        let sender_kb = client.counter("measured_bytes_sent") as f64 / 1024.0;
        let kb_per_s = sender_kb / client.value("elapsed_s");
        if let Some(c) = &client.cpu {
            put(
                &mut m,
                "client_sd_us_per_kb",
                service_demand_system(c, kb_per_s),
            );
            put(
                &mut m,
                "client_proc_sd_us_per_kb",
                service_demand_process(c, sender_kb),
            );
        }
        if let Some(c) = &server.cpu {
            put(
                &mut m,
                "server_sd_us_per_kb",
                service_demand_system(c, kb_per_s),
            );
            put(
                &mut m,
                "server_proc_sd_us_per_kb",
                service_demand_process(c, measured as f64 / 1024.0),
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

/// A data buffer that starts on a page boundary and whose pages are
/// private and resident before the measured loop.
///
/// Why: `vec![0; n]` of 128 KiB or more is a fresh `mmap` (glibc's
/// threshold) whose pages map the shared zero page until written, and whose
/// data starts 16 bytes past a page boundary; a later allocation of the same
/// size comes from the heap at another offset. The kernel's copy routines are
/// sensitive to both, and the first point in a new agent came out 20–25 %
/// below the next ones. A page-aligned, pre-written buffer gives every
/// repetition the same memory.
struct PageBuf {
    storage: Vec<u8>,
    offset: usize,
    len: usize,
}

const PAGE: usize = 4096;

impl PageBuf {
    fn new(len: usize) -> PageBuf {
        let mut storage = vec![0u8; len + PAGE];
        let offset = storage.as_ptr().align_offset(PAGE);
        // Write every page so none is left mapping the zero page.
        storage.iter_mut().for_each(|b| *b = 0xA5);
        PageBuf {
            storage,
            offset,
            len,
        }
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.storage[self.offset..self.offset + self.len]
    }
}

impl std::ops::DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.offset..self.offset + self.len]
    }
}

/// 10^6 bits per second, as netperf's `-f m`.
fn mbps(bytes: u64, elapsed_s: f64) -> f64 {
    bytes as f64 * 8.0 / 1e6 / elapsed_s
}

/// The receive size: as asked, else netperf `-M`'s default, the receive
/// buffer read back (Linux reports twice the value set), at least one
/// message.
/// The receiving side's socket, bound with its buffer, announced, and
/// connected to its sender, with its receive size.
fn accept_receiver(
    proto: Proto,
    cfg: &Config,
    ctx: &ServerCtx,
    ready: &mut dyn FnMut(u16),
) -> Result<(socket2::Socket, usize, BufferCounters), WorkloadError> {
    let bufs = Bufs {
        send: None,
        recv: cfg.recv_buffer,
    };
    let (sock, port) = bind_server(proto, ctx.bind, bufs, SERVER)?;
    ready(port);
    let s = await_client(proto, sock, &ctx.abort, ACCEPT_TIMEOUT, SERVER)?;
    // A TCP receiver blocks without timeouts, woken by its timer's thread
    // (see `crate::common::timer`); the UDP receiver still counts its silence in
    // socket timeouts.
    if proto == Proto::Udp {
        set_timeouts(&s, ABORT_POLL, SERVER)?;
    }
    let rsize = receive_size(cfg, &s)?;
    let in_effect = buffer_in_effect(&s, Direction::Recv, SERVER)?;
    Ok((s, rsize, in_effect))
}

/// A side's counters of its socket buffer in force (see
/// [`buffer_in_effect`]).
type BufferCounters = Vec<(&'static str, u64)>;

/// Which socket buffer.
#[derive(Clone, Copy)]
enum Direction {
    Send,
    Recv,
}

/// The socket buffer in force, read back after setting it (and after
/// accept, whose socket inherits the listener's), with the kernel's
/// ceiling for requests: `{recv,send}_buffer_bytes` as `getsockopt()`
/// reports it (Linux reports twice the usable size it set, as netperf
/// prints it) and `{r,w}mem_max_bytes` from `/proc/sys/net/core` as this
/// side's network namespace sees it (absent when unreadable). Read once,
/// before any timed loop.
fn buffer_in_effect(
    s: &socket2::Socket,
    dir: Direction,
    what: &str,
) -> Result<BufferCounters, WorkloadError> {
    let (size, name, sysctl, max_name) = match dir {
        Direction::Recv => (
            s.recv_buffer_size(),
            "recv_buffer_bytes",
            "rmem_max",
            "rmem_max_bytes",
        ),
        Direction::Send => (
            s.send_buffer_size(),
            "send_buffer_bytes",
            "wmem_max",
            "wmem_max_bytes",
        ),
    };
    let size = size.map_err(|e| WorkloadError::io(format!("{what}: getsockopt({name})"), e))?;
    let mut out = vec![(name, size as u64)];
    if let Some(max) = std::fs::read_to_string(format!("/proc/sys/net/core/{sysctl}"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
    {
        out.push((max_name, max));
    }
    Ok(out)
}

/// The remark when the kernel clipped a requested buffer. Linux sets
/// `2 × min(request, {r,w}mem_max)` (at least a small floor) and
/// `getsockopt()` reports that doubled size, so a request was clipped when
/// half of what is reported is below it. `SO_RCVBUF` clips for root too
/// (only `SO_RCVBUFFORCE` would not; netperf uses `SO_RCVBUF`).
fn clip_note(
    key: &str,
    requested: Option<u64>,
    reported: Option<f64>,
    max: Option<f64>,
    sysctl: &str,
) -> Option<String> {
    let (requested, reported) = (requested?, reported?);
    let usable = reported / 2.0;
    (usable < requested as f64).then(|| {
        format!(
            "{key} = {requested}: the kernel clipped it to {usable:.0} bytes (getsockopt reports {reported:.0}){}; raise net.core.{sysctl} to at least {requested} (e.g. with a profile) to measure the size asked for",
            max.map(|m| format!(", net.core.{sysctl} = {m:.0}"))
                .unwrap_or_default()
        )
    })
}

fn receive_size(cfg: &Config, s: &socket2::Socket) -> Result<usize, WorkloadError> {
    match cfg.receive_size {
        Some(n) => Ok(n),
        None => {
            let rb = s
                .recv_buffer_size()
                .map_err(|e| WorkloadError::io(format!("{SERVER}: getsockopt(SO_RCVBUF)"), e))?;
            Ok(rb.max(cfg.message_size))
        }
    }
}

fn tcp_sender(
    cfg: &Config,
    addr: std::net::SocketAddr,
    abort: &Arc<AtomicBool>,
) -> Result<SideResult, WorkloadError> {
    let bufs = Bufs {
        send: cfg.send_buffer,
        recv: None,
    };
    let s = connect(Proto::Tcp, addr, bufs, abort, CLIENT)?;
    let in_effect = buffer_in_effect(&s, Direction::Send, CLIENT)?;
    let fd = s.as_raw_fd();
    let buf = PageBuf::new(cfg.message_size);
    let len = buf.len() as u64;

    // No socket timeouts: a send blocked on a full buffer costs no timer,
    // and an abort wakes it through the watch (see `crate::common::timer`).
    let watch = Watch::new(&s, Idle::Ignore, false);
    let timer = Timer::start(cfg.warmup, abort.clone(), Some(watch))?;
    let mut bytes = 0u64;
    while !timer.warm_done() {
        send_all(fd, &buf, abort, SEND)?;
        bytes += len;
    }
    let c0 = CpuSnapshot::take();
    timer.measure_for(cfg.duration);
    let at_mark = bytes;
    let cost = LoopCost::start();
    while !timer.stopped() {
        send_all(fd, &buf, abort, SEND)?;
        bytes += len;
    }
    cost.end(CLIENT, (bytes - at_mark) / len.max(1));
    if timer.aborted() {
        return Err(WorkloadError::Aborted);
    }
    drop(timer);
    // Nothing watches the socket now: the drain gets timeouts back, to see
    // an abort and keep its bound.
    set_timeouts(&s, ABORT_POLL, CLIENT)?;
    tcp_drain(&s, abort, CLIENT)?;
    let c1 = CpuSnapshot::take();
    let cpu = c0.usage_until(&c1);
    let mut counters = vec![
        ("bytes_sent", bytes),
        ("measured_bytes_sent", bytes - at_mark),
        ("message_size", len),
    ];
    counters.extend(in_effect);
    Ok(side_result(
        &counters,
        &[("elapsed_s", cpu.elapsed_s)],
        Some(cpu),
    ))
}

/// One `recv()`, retried after a signal or timeout (abort checked); 0
/// means EOF, or that the watchdog shut the socket (the caller's abort
/// check tells).
#[inline]
fn recv_some(fd: RawFd, buf: &mut [u8], abort: &AtomicBool) -> Result<usize, WorkloadError> {
    loop {
        match sys_recv(fd, buf, 0) {
            Ok(n) => return Ok(n),
            Err(e) => retry_or_fail(e, abort, RECV)?,
        }
    }
}

fn tcp_receiver(
    cfg: &Config,
    ctx: &ServerCtx,
    ready: &mut dyn FnMut(u16),
) -> Result<SideResult, WorkloadError> {
    let abort = &*ctx.abort;
    let (s, rsize, in_effect) = accept_receiver(Proto::Tcp, cfg, ctx, ready)?;
    let fd = s.as_raw_fd();
    let mut buf = PageBuf::new(rsize);

    // No socket timeouts: from before the first byte, an abort shuts the
    // socket down, which the loops see as an EOF and the check after them
    // as the abort (see `crate::common::timer`).
    let timer = Timer::watching(ctx.abort.clone(), Some(Watch::new(&s, Idle::Ignore, false)))?;
    // Without warm-up the interval starts now, before the first byte.
    let early_c0 = cfg.warmup.is_zero().then(CpuSnapshot::take);
    let early_c0_taken = early_c0.is_some();
    let mut bytes = recv_some(fd, &mut buf, abort)? as u64;
    if bytes == 0 {
        return Err(WorkloadError::Other(format!(
            "{SERVER}: the sender closed the connection before sending data"
        )));
    }
    // The receiver's warm-up runs from the first byte.
    timer.begin_warmup(cfg.warmup);
    let mut calls = 1u64;
    let mut eof = false;
    while !timer.warm_done() {
        let n = recv_some(fd, &mut buf, abort)?;
        calls += 1;
        if n == 0 {
            eof = true;
            break;
        }
        bytes += n as u64;
    }
    let c0 = early_c0.unwrap_or_else(CpuSnapshot::take);
    let at_mark = if early_c0_taken { 0 } else { bytes };
    if !eof {
        // `stopped()` is set only by an abort here: the sender's EOF ends
        // the interval.
        let (cost, at_call) = (LoopCost::start(), calls);
        while !timer.stopped() {
            let n = recv_some(fd, &mut buf, abort)?;
            calls += 1;
            if n == 0 {
                break;
            }
            bytes += n as u64;
        }
        cost.end(SERVER, calls - at_call);
    }
    let c1 = CpuSnapshot::take();
    if timer.aborted() {
        return Err(WorkloadError::Aborted);
    }
    drop(timer);
    // Closing `s` on return tells the sender its drain is complete.
    let cpu = c0.usage_until(&c1);
    let mut counters = vec![
        ("bytes_received", bytes),
        ("measured_bytes_received", bytes - at_mark),
        ("recv_calls", calls),
        ("receive_size", rsize as u64),
    ];
    counters.extend(in_effect);
    Ok(side_result(
        &counters,
        &[("elapsed_s", cpu.elapsed_s)],
        Some(cpu),
    ))
}

/// Datagram counts of one phase on the sending side.
#[derive(Default)]
struct SendCounts {
    datagrams: u64,
    bytes: u64,
    failed: u64,
}

/// One datagram; a full queue counts as a failed send, as in netperf.
#[inline]
fn send_datagram(
    fd: RawFd,
    buf: &[u8],
    abort: &AtomicBool,
    c: &mut SendCounts,
) -> Result<(), WorkloadError> {
    match sys_send(fd, buf) {
        Ok(n) => {
            c.datagrams += 1;
            c.bytes += n as u64;
            Ok(())
        }
        Err(e) if is_enobufs(&e) => {
            c.failed += 1;
            Ok(())
        }
        // A send timeout (socket buffer full) is retried by the loop.
        Err(e) => retry_or_fail(e, abort, SEND),
    }
}

fn udp_sender(
    cfg: &Config,
    addr: std::net::SocketAddr,
    abort: &Arc<AtomicBool>,
) -> Result<SideResult, WorkloadError> {
    let bufs = Bufs {
        send: cfg.send_buffer,
        recv: None,
    };
    let s = connect(Proto::Udp, addr, bufs, abort, CLIENT)?;
    enable_recverr(&s, addr.ip(), CLIENT)?;
    set_timeouts(&s, ABORT_POLL, CLIENT)?;
    let in_effect = buffer_in_effect(&s, Direction::Send, CLIENT)?;
    let fd = s.as_raw_fd();
    let mut buf = PageBuf::new(cfg.message_size);
    buf[0] = PHASE_WARMUP;

    let timer = Timer::start(cfg.warmup, abort.clone(), None)?;
    let mut warm = SendCounts::default();
    while !timer.warm_done() {
        send_datagram(fd, &buf, abort, &mut warm)?;
    }
    buf[0] = PHASE_MEASURED;
    let c0 = CpuSnapshot::take();
    timer.measure_for(cfg.duration);
    let mut meas = SendCounts::default();
    while !timer.stopped() {
        send_datagram(fd, &buf, abort, &mut meas)?;
    }
    let c1 = CpuSnapshot::take();
    if timer.aborted() {
        return Err(WorkloadError::Aborted);
    }
    drop(timer);
    udp_end_markers(fd, 0, &MARKER_GAPS);
    let cpu = c0.usage_until(&c1);
    let mut counters = vec![
        ("datagrams_sent", warm.datagrams + meas.datagrams),
        ("measured_datagrams_sent", meas.datagrams),
        ("bytes_sent", warm.bytes + meas.bytes),
        ("measured_bytes_sent", meas.bytes),
        ("failed_sends", meas.failed),
        ("warmup_failed_sends", warm.failed),
        ("message_size", cfg.message_size as u64),
    ];
    counters.extend(in_effect);
    Ok(side_result(
        &counters,
        &[("elapsed_s", cpu.elapsed_s)],
        Some(cpu),
    ))
}

/// One datagram's full length (`MSG_TRUNC`), or `None` once the pad
/// deadline has passed without traffic.
#[inline]
fn recv_datagram(
    fd: RawFd,
    buf: &mut [u8],
    abort: &AtomicBool,
    pad_deadline: Instant,
) -> Result<Option<usize>, WorkloadError> {
    loop {
        match sys_recv(fd, buf, libc::MSG_TRUNC) {
            Ok(n) => return Ok(Some(n)),
            Err(e) => {
                retry_or_fail(e, abort, RECV)?;
                if Instant::now() >= pad_deadline {
                    return Ok(None);
                }
            }
        }
    }
}

fn udp_receiver(
    cfg: &Config,
    ctx: &ServerCtx,
    ready: &mut dyn FnMut(u16),
) -> Result<SideResult, WorkloadError> {
    let abort = &*ctx.abort;
    let (s, rsize, in_effect) = accept_receiver(Proto::Udp, cfg, ctx, ready)?;
    let fd = s.as_raw_fd();
    // At least one byte, to read the phase.
    let mut buf = PageBuf::new(rsize.max(1));
    let pad_deadline = Instant::now() + cfg.warmup + cfg.duration + PAD_TIME;

    let (mut datagrams, mut bytes) = (0u64, 0u64);
    let (mut m_datagrams, mut m_bytes) = (0u64, 0u64);
    let mut ended_by_timer = false;
    let mut end = false;
    // Warm-up: until the first measured datagram. Abort is checked per
    // datagram in both loops: under a flood recv() never times out, so the
    // timeout path alone would not see it.
    while !abort.load(Ordering::Relaxed) {
        match recv_datagram(fd, &mut buf, abort, pad_deadline)? {
            None => {
                ended_by_timer = true;
                end = true;
                break;
            }
            Some(0) => {
                end = true;
                break;
            }
            Some(n) => {
                datagrams += 1;
                bytes += n as u64;
                if buf[0] == PHASE_MEASURED {
                    m_datagrams += 1;
                    m_bytes += n as u64;
                    break;
                }
            }
        }
    }
    let c0 = CpuSnapshot::take();
    if !end {
        while !abort.load(Ordering::Relaxed) {
            match recv_datagram(fd, &mut buf, abort, pad_deadline)? {
                None => {
                    ended_by_timer = true;
                    break;
                }
                Some(0) => break,
                Some(n) => {
                    datagrams += 1;
                    bytes += n as u64;
                    // Reordering may deliver a late warm-up datagram.
                    if buf[0] == PHASE_MEASURED {
                        m_datagrams += 1;
                        m_bytes += n as u64;
                    }
                }
            }
        }
    }
    let c1 = CpuSnapshot::take();
    if abort.load(Ordering::Relaxed) {
        return Err(WorkloadError::Aborted);
    }
    let cpu = c0.usage_until(&c1);
    let mut counters = vec![
        ("datagrams_received", datagrams),
        ("measured_datagrams_received", m_datagrams),
        ("bytes_received", bytes),
        ("measured_bytes_received", m_bytes),
        ("ended_by_timer", ended_by_timer as u64),
        ("receive_size", rsize as u64),
    ];
    counters.extend(in_effect);
    Ok(side_result(
        &counters,
        &[("elapsed_s", cpu.elapsed_s)],
        Some(cpu),
    ))
}
