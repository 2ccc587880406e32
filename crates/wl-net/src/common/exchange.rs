//! The request/response exchange of `net.rr` and `net.pingpong`: the
//! client's [`Exchanger`] and the server's [`serve_requests`].

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use benchlab_core::cost::LoopCost;
use benchlab_core::cpu::CpuSnapshot;
use benchlab_core::sys;
use benchlab_core::{ServerCtx, SideResult, WorkloadError, ABORT_POLL};
use socket2::Socket;

use super::params::Proto;
use super::results::side_result;
use super::sock::{
    await_client, bind_server, connect, set_nodelay, set_timeouts, Bufs, ACCEPT_TIMEOUT,
};
use super::sysio::{
    check_abort, is_enobufs, marker_len, recv_exact, retry_or_fail, send_all, send_ret, sys_recv,
    sys_send, tcp_drain, udp_end_markers,
};
use super::timer::{Idle, Timer, Wake, Watch, PAD_TIME, UDP_LOSS_TIMEOUT};

/// What one exchange came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The whole response arrived.
    Done,
    /// UDP only: no response within [`UDP_LOSS_TIMEOUT`].
    Lost,
}

/// The client end of a request/response pair: one request in flight, its
/// buffers allocated up front.
///
/// Its TCP and UDP exchanges are separate inline functions so that a
/// measured loop can take the protocol out of the loop, and the server
/// side does the same ([`Responder::serve_until`]). With [`send_all`] and
/// [`recv_exact`] making their one call inline and everything else out of
/// line, and `net.pingpong`'s recorder of flat counts, `bench/per-op`
/// (callgrind, user-space instructions per round trip, all processes) went
/// from 389 to 203 and 210 (two runs) for TCP 32 B (limit 188) and from
/// 370 to 209 and 195 for UDP (limit 114); the controller's share moves
/// by some ±10 between runs. Per agent, TCP: client 249 → 152, server
/// 137 → 55 (the limit's: 99 and 89); UDP: 230 → 145 and 124 → 54 (60
/// and 54). On one CPU the server's loop runs inside the client's timed
/// round trip, so that part shows in RTT/2 directly.
///
/// Its socket has no timeouts: the watchdog of [`Exchanger::watch`] wakes a
/// blocked call (see [`super::timer`] for what that bought).
pub(crate) struct Exchanger {
    socket: Socket,
    fd: RawFd,
    proto: Proto,
    req: Vec<u8>,
    rsp: Vec<u8>,
    abort: Arc<AtomicBool>,
    watch: Arc<Watch>,
}

/// Error context of the exchange calls (static: built only on failure).
const EXCHANGE: &str = "client exchange";

impl Exchanger {
    /// Connects to `addr` and prepares `req_size`/`rsp_size` buffers.
    pub(crate) fn connect(
        proto: Proto,
        addr: SocketAddr,
        req_size: usize,
        rsp_size: usize,
        nodelay: bool,
        abort: Arc<AtomicBool>,
        what: &str,
    ) -> Result<Exchanger, WorkloadError> {
        let socket = connect(proto, addr, Bufs::default(), &abort, what)?;
        let watch = match proto {
            Proto::Tcp => {
                set_nodelay(&socket, nodelay, what)?;
                Watch::new(&socket, Idle::Ignore, true)
            }
            Proto::Udp => Watch::new(&socket, Idle::Loss(UDP_LOSS_TIMEOUT), false),
        };
        Ok(Exchanger {
            fd: socket.as_raw_fd(),
            socket,
            proto,
            req: vec![0; req_size],
            rsp: vec![0; rsp_size],
            abort,
            watch,
        })
    }

    /// The watch for the [`Timer`] of the loop that runs the exchanges:
    /// without it, nothing wakes a blocked call.
    pub(crate) fn watch(&self) -> Arc<Watch> {
        self.watch.clone()
    }

    /// The transport.
    pub(crate) fn proto(&self) -> Proto {
        self.proto
    }

    /// One request and its response.
    #[inline]
    pub(crate) fn exchange(&mut self) -> Result<Outcome, WorkloadError> {
        match self.proto {
            Proto::Tcp => self.exchange_tcp().map(|()| Outcome::Done),
            Proto::Udp => self.exchange_udp(),
        }
    }

    /// One TCP request and its whole response. For loops that have taken
    /// the protocol out of the loop (see `net.pingpong`). A round trip the
    /// watchdog ended after the measured interval is an error here too:
    /// the loop's caller tells it apart with [`Exchanger::stopped_or`].
    #[inline(always)]
    pub(crate) fn exchange_tcp(&mut self) -> Result<(), WorkloadError> {
        send_all(self.fd, &self.req, &self.abort, EXCHANGE)?;
        if !recv_exact(self.fd, &mut self.rsp, &self.abort, EXCHANGE)? {
            return Err(server_closed());
        }
        Ok(())
    }

    /// After a loop of exchanges failed with `e`: `Ok` when the watchdog
    /// ended the round trip in progress because the measured interval was
    /// over and the server had gone silent ([`Wake::Stopped`]; the reason
    /// is set before the shutdown, so it is known here), and the loop ends
    /// as if the timer had stopped it, without that round trip; otherwise
    /// `e` (the server's close, an error, or an abort, which the caller's
    /// [`super::results::abort_wins`] reports). Looked at only on this unusual path.
    #[cold]
    pub(crate) fn stopped_or(&self, e: WorkloadError) -> Result<(), WorkloadError> {
        if self.watch.woken() == Wake::Stopped {
            Ok(())
        } else {
            Err(e)
        }
    }

    /// Counts a finished UDP round trip (done or lost) for the watchdog:
    /// a plain load, add and store, as only this thread writes it.
    #[inline(always)]
    fn udp_round_done(&self) {
        let p = &self.watch.progress;
        p.store(p.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    /// One UDP request and its response, or [`Outcome::Lost`] when none
    /// came within [`UDP_LOSS_TIMEOUT`]. One `send()` and one `recv()`
    /// inline; a failed send or a reply that is late or of the wrong
    /// length is handled out of line.
    #[inline(always)]
    pub(crate) fn exchange_udp(&mut self) -> Result<Outcome, WorkloadError> {
        let sent = send_ret(self.fd, &self.req);
        if sent.failed() {
            self.resend(sent.error())?;
        }
        let got = sys::recv(self.fd, &mut self.rsp, libc::MSG_TRUNC);
        if got.is(self.rsp.len()) {
            self.udp_round_done();
            Ok(Outcome::Done)
        } else {
            self.await_reply(got.result())
        }
    }

    /// After a failed UDP send: a full device queue means the datagram
    /// did not leave, so it is sent again rather than waited for.
    #[cold]
    #[inline(never)]
    fn resend(&mut self, first: io::Error) -> Result<(), WorkloadError> {
        let mut e = first;
        loop {
            if is_enobufs(&e) {
                check_abort(&self.abort)?;
            } else {
                retry_or_fail(e, &self.abort, EXCHANGE)?;
            }
            match sys_send(self.fd, &self.req) {
                Ok(_) => return Ok(()),
                Err(next) => e = next,
            }
        }
    }

    /// The UDP reply after a first `recv()` that did not return it: a
    /// datagram of another length is an error; an interruption by the
    /// watchdog ([`Watch::interrupt_for_loss`], no reply within
    /// [`UDP_LOSS_TIMEOUT`]) is [`Outcome::Lost`], as when a receive
    /// timeout counted the same wait; after an abort the socket is shut
    /// and the caller's [`super::results::abort_wins`] reports it.
    #[cold]
    #[inline(never)]
    fn await_reply(&mut self, first: io::Result<usize>) -> Result<Outcome, WorkloadError> {
        let mut next = first;
        loop {
            match next {
                Ok(n) if n == self.rsp.len() => {
                    self.udp_round_done();
                    return Ok(Outcome::Done);
                }
                Ok(n) => {
                    check_abort(&self.abort)?;
                    return Err(unexpected_datagram(n, self.rsp.len()));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    let round = self.watch.progress.load(Ordering::Relaxed);
                    if self.watch.take_loss(round) {
                        self.udp_round_done();
                        return Ok(Outcome::Lost);
                    }
                }
                Err(e) => retry_or_fail(e, &self.abort, EXCHANGE)?,
            }
            next = sys_recv(self.fd, &mut self.rsp, libc::MSG_TRUNC);
        }
    }

    /// Ends the exchange the netperf way: TCP half-close and wait for the
    /// server's EOF; UDP three end-marker datagrams.
    ///
    /// After the loop nothing watches the socket any more, so the drain
    /// gets socket timeouts again (they cost nothing measured here): it
    /// sees an abort and keeps its bound. A socket the watchdog shut is
    /// not drained: the server has already seen its end.
    pub(crate) fn finish(self) -> Result<(), WorkloadError> {
        match self.proto {
            Proto::Tcp if self.watch.woken() != Wake::None => Ok(()),
            Proto::Tcp => {
                set_timeouts(&self.socket, ABORT_POLL, EXCHANGE)?;
                tcp_drain(&self.socket, &self.abort, EXCHANGE)
            }
            Proto::Udp => {
                udp_end_markers(self.fd, marker_len(self.req.len()), &[Duration::ZERO; 3]);
                Ok(())
            }
        }
    }
}

#[cold]
fn server_closed() -> WorkloadError {
    WorkloadError::Other(format!("{EXCHANGE}: the server closed the connection"))
}

#[cold]
fn unexpected_datagram(got: usize, want: usize) -> WorkloadError {
    WorkloadError::Other(format!(
        "{EXCHANGE}: a {got}-byte datagram arrived where a {want}-byte response was expected"
    ))
}

/// How the server side of a request/response workload runs and names its
/// counters.
pub(crate) struct ServeSpec {
    pub(crate) proto: Proto,
    pub(crate) req_size: usize,
    pub(crate) rsp_size: usize,
    pub(crate) nodelay: bool,
    pub(crate) warmup: Duration,
    /// Counter of all answered requests (`transactions`, `echoed`).
    pub(crate) total_name: &'static str,
    /// Counter of those answered after the server's own warm-up mark.
    pub(crate) measured_name: &'static str,
    pub(crate) what: &'static str,
}

/// Server side of `net.rr` and `net.pingpong`: answer every request of
/// `req_size` bytes with `rsp_size` bytes until the client's end (TCP EOF,
/// a UDP end marker, or, when the markers are lost, [`PAD_TIME`] without a
/// request: a live client sends at least every [`UDP_LOSS_TIMEOUT`], so
/// such a silence means it has gone; that needs no clock read per request,
/// and works also when the client runs a fixed number of iterations of
/// unknown length).
///
/// The server cannot see the client's warm-up, so it marks its own: its CPU
/// window starts `warmup` after the first request (the client started its
/// warm-up one round trip earlier) and ends at the client's end. The total
/// count is exact; the measured count is that approximate window's.
pub(crate) fn serve_requests(
    spec: &ServeSpec,
    ctx: &ServerCtx,
    ready: &mut dyn FnMut(u16),
) -> Result<SideResult, WorkloadError> {
    let what = spec.what;
    let abort = &*ctx.abort;
    let (sock, port) = bind_server(spec.proto, ctx.bind, Bufs::default(), what)?;
    ready(port);
    let sock = await_client(spec.proto, sock, abort, ACCEPT_TIMEOUT, what)?;
    if spec.proto == Proto::Tcp {
        set_nodelay(&sock, spec.nodelay, what)?;
    }
    // No socket timeouts: the timer's thread watches the socket from
    // before the first request (see `super::timer`). A UDP client that has gone
    // without its end markers is [`PAD_TIME`] of silence; a TCP one closes.
    let idle = match spec.proto {
        Proto::Tcp => Idle::Ignore,
        Proto::Udp => Idle::Silence(PAD_TIME),
    };
    let watch = Watch::new(&sock, idle, false);
    let mut rx = Responder {
        fd: sock.as_raw_fd(),
        proto: spec.proto,
        // UDP: room for the whole request; MSG_TRUNC reports longer ones.
        req: vec![0; spec.req_size],
        rsp: vec![0; spec.rsp_size],
        abort,
        watch: &watch,
        ended_by_timer: false,
    };
    let timer = Timer::watching(ctx.abort.clone(), Some(watch.clone()))?;

    let mut served = 0u64;
    // Without warm-up the interval starts now, before the first request.
    let early_c0 = spec.warmup.is_zero().then(CpuSnapshot::take);
    let early_c0_taken = early_c0.is_some();
    // The first request starts the server's warm-up clock.
    if !rx.next_request()? {
        return Err(WorkloadError::Other(format!(
            "{what}: the client ended before sending a request"
        )));
    }
    timer.begin_warmup(spec.warmup);
    rx.respond()?;
    served += 1;

    let (warm, ended) = rx.serve_until(|| timer.warm_done())?;
    served += warm;
    let c0 = early_c0.unwrap_or_else(CpuSnapshot::take);
    // Without warm-up the first request belongs to the measured interval.
    let at_mark = if early_c0_taken { 0 } else { served };
    if !ended {
        // `stopped()` is only set by an abort here (no measure_for).
        let cost = LoopCost::start();
        let n = rx.serve_until(|| timer.stopped())?.0;
        cost.end(what, n);
        served += n;
    }
    let c1 = CpuSnapshot::take();
    if timer.aborted() || abort.load(Ordering::Relaxed) {
        return Err(WorkloadError::Aborted);
    }
    drop(timer);
    // The shut socket's `recv()` returned 0, which the loop took for an
    // end marker: the silence is what ended it.
    rx.ended_by_timer |= watch.woken() == Wake::Silent;
    let cpu = c0.usage_until(&c1);
    let mut r = side_result(
        &[
            (spec.total_name, served),
            (spec.measured_name, served - at_mark),
            ("ended_by_timer", rx.ended_by_timer as u64),
        ],
        &[("elapsed_s", cpu.elapsed_s)],
        Some(cpu),
    );
    if spec.proto == Proto::Tcp {
        r.counters.remove("ended_by_timer");
    }
    Ok(r)
}

struct Responder<'a> {
    fd: RawFd,
    proto: Proto,
    req: Vec<u8>,
    rsp: Vec<u8>,
    abort: &'a AtomicBool,
    watch: &'a Watch,
    ended_by_timer: bool,
}

const RESPOND: &str = "server exchange";

impl Responder<'_> {
    /// Answers requests until `done()` or the client's end; returns how
    /// many were answered and whether the client ended.
    ///
    /// The protocol is matched once, outside the loop, and each loop makes
    /// its two calls inline, so that what the server adds to a round trip
    /// on a shared CPU is little more than the limit's loop
    /// (bench/limit/net_limit.c `pp_server`); the figures are at
    /// [`Exchanger`].
    // Never inlined: bench/cost counts the loop's instructions by function.
    #[inline(never)]
    fn serve_until(&mut self, done: impl Fn() -> bool) -> Result<(u64, bool), WorkloadError> {
        let mut n = 0u64;
        match self.proto {
            Proto::Tcp => {
                while !done() {
                    if !recv_exact(self.fd, &mut self.req, self.abort, RESPOND)? {
                        return Ok((n, true));
                    }
                    send_all(self.fd, &self.rsp, self.abort, RESPOND)?;
                    n += 1;
                }
            }
            Proto::Udp => {
                while !done() {
                    if !self.next_datagram()? {
                        return Ok((n, true));
                    }
                    let sent = send_ret(self.fd, &self.rsp);
                    if sent.failed() && !self.respond_failed(sent.error())? {
                        return Ok((n, true));
                    }
                    n += 1;
                    // For the silence rule. `n` starts again at 0 in the
                    // next call, which at worst makes one look of the
                    // watchdog's see no change; a silence is many looks.
                    self.watch.progress(n);
                }
            }
        }
        Ok((n, false))
    }

    /// Receives one request; `false` when the client has ended.
    #[inline]
    fn next_request(&mut self) -> Result<bool, WorkloadError> {
        match self.proto {
            Proto::Tcp => recv_exact(self.fd, &mut self.req, self.abort, RESPOND),
            Proto::Udp => self.next_datagram(),
        }
    }

    /// Receives one UDP request; `false` on an end marker (a datagram of
    /// another length) or after [`PAD_TIME`] of silence.
    #[inline(always)]
    fn next_datagram(&mut self) -> Result<bool, WorkloadError> {
        let got = sys::recv(self.fd, &mut self.req, libc::MSG_TRUNC);
        if got.failed() {
            self.await_datagram(got.error())
        } else {
            Ok(got.is(self.req.len()))
        }
    }

    /// [`Responder::next_datagram`] after a `recv()` that failed: a signal
    /// is retried; after the watchdog's shutdown the reason decides.
    #[cold]
    #[inline(never)]
    fn await_datagram(&mut self, first: io::Error) -> Result<bool, WorkloadError> {
        let mut e = first;
        loop {
            if self.woken_end()? {
                return Ok(false);
            }
            retry_or_fail(e, self.abort, RESPOND)?;
            match sys_recv(self.fd, &mut self.req, libc::MSG_TRUNC) {
                Ok(n) => return Ok(n == self.req.len()),
                Err(next) => e = next,
            }
        }
    }

    /// Sends the response to the request just received.
    #[inline]
    fn respond(&mut self) -> Result<(), WorkloadError> {
        match self.proto {
            Proto::Tcp => send_all(self.fd, &self.rsp, self.abort, RESPOND),
            Proto::Udp => match sys_send(self.fd, &self.rsp) {
                Ok(_) => Ok(()),
                Err(e) => self.respond_failed(e).map(|_| ()),
            },
        }
    }

    /// A UDP response whose `send()` failed: a full queue drops it (the
    /// client counts the loss), a signal retries; `false` when the
    /// watchdog has ended the loop (the shut socket cannot send).
    #[cold]
    #[inline(never)]
    fn respond_failed(&mut self, first: io::Error) -> Result<bool, WorkloadError> {
        let mut e = first;
        loop {
            if is_enobufs(&e) {
                return Ok(true);
            }
            if self.woken_end()? {
                return Ok(false);
            }
            retry_or_fail(e, self.abort, RESPOND)?;
            match sys_send(self.fd, &self.rsp) {
                Ok(_) => return Ok(true),
                Err(next) => e = next,
            }
        }
    }

    /// Whether the watchdog has shut the socket for the client's silence
    /// (`true`: the loop ends as after an end marker); `Err(Aborted)` when
    /// it did so for an abort.
    #[cold]
    fn woken_end(&mut self) -> Result<bool, WorkloadError> {
        match self.watch.woken() {
            Wake::None | Wake::Stopped => Ok(false),
            Wake::Silent => {
                self.ended_by_timer = true;
                Ok(true)
            }
            Wake::Aborted => Err(WorkloadError::Aborted),
        }
    }
}
