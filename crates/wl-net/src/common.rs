//! Plumbing shared by the three network workloads: the `protocol`
//! parameter, socket setup (listen / accept / connect with abort polling),
//! thin `send`/`recv` wrappers for the measured loops, the phase timer that
//! ends warm-up and the measured interval, the request/response exchange used
//! by `net.rr` and `net.pingpong` (both sides), and helpers that turn CPU
//! figures into metrics.
//!
//! Blocking without polling or timeouts: the data sockets of the
//! request/response loops (`net.rr`, `net.pingpong`, both sides) and of
//! `net.stream` over TCP block with no `SO_RCVTIMEO` / `SO_SNDTIMEO`. A
//! call that must stop is woken from outside by the phase timer's thread,
//! which is also the loop's watchdog ([`Watch`]): on abort, on a silent
//! peer after the measured interval's end, or on a UDP server's client
//! gone quiet, it sets the reason and then calls `shutdown(SHUT_RDWR)` on
//! the socket, which ends any blocked call (TCP, connected and unconnected
//! UDP: tested below); on a lost UDP reply it interrupts the client's
//! `recv()` with a signal instead, as that socket must go on. The loop
//! looks at the reason only when a call returns something unusual (0
//! bytes or an error), never per round trip. `net.stream` over UDP still
//! uses socket timeouts of [`ABORT_POLL`] (see [`set_timeouts`]).
//!
//! What the timeouts cost: with one CPU every `recv()` of a round trip
//! blocks, and with `SO_RCVTIMEO` the kernel arms and cancels a timer for
//! each blocking wait. The limit program (bench/limit/net_limit.c) with the
//! same timeouts (`NET_LIMIT_TIMEOUT_MS=200`) took 1.044× (TCP) and 1.058×
//! (UDP) its own RTT/2 on one CPU, where benchlab stood at 1.022 and 1.029
//! of the limit without timeouts; that is the overhead the watchdog removes.
//! It is kernel work, which callgrind does not see: in user space the
//! loops cost what they did, plus the UDP loops' progress store.
//! `bench/per-op` (callgrind, 32 B, user-space instructions per round
//! trip, all processes) before → after: TCP 219.4 → 214.0, UDP 207.1 →
//! 241.1 (limit 188.0 and 114.0); those totals move by 10–30 from run to
//! run with the controller and with the histogram built after the loop,
//! whose cost follows the spread of the samples. The loops alone
//! (exclusive instructions of the client's `run_client` and the server's
//! `serve_requests`): TCP client 96.4 → 97.4, server 33.0 → 34.0; UDP
//! client 90.4 → 92.4, server 32.0 → 34.0.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use benchlab_core::cpu::CpuSnapshot;
use benchlab_core::param::{ParamDefault, ParamError, ParamKind, ParamSpec, Params};
use benchlab_core::{
    Combine, CpuUsage, MetricSpec, ServerCtx, SideResult, WorkloadError, ABORT_POLL,
};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// The `protocol` parameter shared by all three workloads.
pub(crate) const PROTOCOL: ParamSpec = ParamSpec {
    name: "protocol",
    kind: ParamKind::Choice(&["tcp", "udp"]),
    default: ParamDefault::Str("tcp"),
    help: "transport: tcp or udp",
};

/// Largest UDP payload over IPv4: 65535 − 20 (IP) − 8 (UDP) bytes; netperf's
/// `UDP_LENGTH_MAX`.
pub(crate) const UDP_MAX_PAYLOAD: u64 = 65507;

/// How long a server waits for its one client (TCP accept, or the first UDP
/// datagram) before it gives up.
pub(crate) const ACCEPT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a TCP sender waits for the receiver's EOF after its own
/// `shutdown(SHUT_WR)`; with many MB queued on a slow path the drain takes a
/// while, but a receiver that never closes must not hang the point.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// After this long without a reply, a UDP request/response exchange counts
/// as lost (netperf would stall until its test timer fires instead).
pub(crate) const UDP_LOSS_TIMEOUT: Duration = Duration::from_millis(500);

/// How often the watchdog of a UDP client looks at its progress: a reply
/// counts as lost between [`UDP_LOSS_TIMEOUT`] and that plus this slice
/// after its request, as when this was the socket's `SO_RCVTIMEO`.
const UDP_REPLY_SLICE: Duration = Duration::from_millis(100);

/// How long after the measured interval's end a TCP client's peer must
/// have sent nothing, not even an ACK, before the watchdog ends the round
/// trip the client is blocked in. Generous, so that a large message still
/// on its way is never cut.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(1);

/// netperf's `PAD_TIME`: a UDP receiver that never sees the end markers
/// stops on its own this long after the sender's planned end.
pub(crate) const PAD_TIME: Duration = Duration::from_secs(4);

/// The transport of a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    /// Reads the `protocol` parameter.
    pub(crate) fn from_params(params: &Params) -> Result<Self, ParamError> {
        match params.str(PROTOCOL.name)? {
            "tcp" => Ok(Proto::Tcp),
            "udp" => Ok(Proto::Udp),
            other => Err(ParamError {
                name: PROTOCOL.name.into(),
                problem: format!("expected \"tcp\" or \"udp\", got {other:?}"),
            }),
        }
    }

    /// For `validate()` and `table_metrics()`, which cannot fail: anything
    /// but `udp` is TCP (stage-one validation already rejected bad words).
    pub(crate) fn or_tcp(params: &Params) -> Self {
        Self::from_params(params).unwrap_or(Proto::Tcp)
    }

    fn socket_type(self) -> (Type, Protocol) {
        match self {
            Proto::Tcp => (Type::STREAM, Protocol::TCP),
            Proto::Udp => (Type::DGRAM, Protocol::UDP),
        }
    }
}

/// A seconds parameter as a [`Duration`].
pub(crate) fn secs(params: &Params, name: &str) -> Result<Duration, WorkloadError> {
    let s = params.f64(name)?;
    Duration::try_from_secs_f64(s).map_err(|_| {
        WorkloadError::Param(ParamError {
            name: name.into(),
            problem: format!("expected a non-negative number of seconds, got {s}"),
        })
    })
}

/// A byte-size parameter as `usize`.
pub(crate) fn size(params: &Params, name: &str) -> Result<usize, WorkloadError> {
    Ok(params.u64(name)? as usize)
}

/// An optional byte-size parameter as `usize`.
pub(crate) fn opt_size(params: &Params, name: &str) -> Result<Option<usize>, WorkloadError> {
    Ok(params.opt_u64(name)?.map(|v| v as usize))
}

/// Common checks for `validate()`: the duration is positive and the warm-up
/// not negative, when they are set.
pub(crate) fn validate_times(params: &Params) -> Result<(), (String, String)> {
    if let Ok(d) = params.f64("duration_s") {
        if !(d > 0.0 && d.is_finite()) {
            return Err(("duration_s".into(), format!("must be > 0, got {d}")));
        }
    }
    if let Ok(w) = params.f64("warmup_s") {
        if !(w >= 0.0 && w.is_finite()) {
            return Err(("warmup_s".into(), format!("must be >= 0, got {w}")));
        }
    }
    Ok(())
}

/// Checks a socket-buffer size: `setsockopt` takes a C `int`.
pub(crate) fn validate_buffer(params: &Params, name: &str) -> Result<(), (String, String)> {
    match params.opt_u64(name) {
        Ok(Some(0)) => Err((name.into(), "must be at least 1 byte".into())),
        Ok(Some(v)) if v > i32::MAX as u64 => Err((
            name.into(),
            format!("must be at most {} bytes (a C int)", i32::MAX),
        )),
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------------------
// Socket setup

/// Socket buffer sizes to set before connect/listen; `None` leaves the
/// kernel's default and autotuning alone.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bufs {
    pub(crate) send: Option<usize>,
    pub(crate) recv: Option<usize>,
}

fn io_err(what: &str, step: &str) -> impl FnOnce(io::Error) -> WorkloadError {
    let context = format!("{what}: {step}");
    move |e| WorkloadError::io(context, e)
}

fn new_socket(proto: Proto, ip: IpAddr, bufs: Bufs, what: &str) -> Result<Socket, WorkloadError> {
    let (ty, protocol) = proto.socket_type();
    let domain = Domain::for_address(SocketAddr::new(ip, 0));
    let s = Socket::new(domain, ty, Some(protocol)).map_err(io_err(what, "socket"))?;
    // Set before connect()/listen(): the TCP window scale is fixed by the
    // SYN, so a later SO_RCVBUF would not take full effect (netperf does the
    // same with -s/-S).
    if let Some(n) = bufs.send {
        s.set_send_buffer_size(n)
            .map_err(io_err(what, "setsockopt(SO_SNDBUF)"))?;
    }
    if let Some(n) = bufs.recv {
        s.set_recv_buffer_size(n)
            .map_err(io_err(what, "setsockopt(SO_RCVBUF)"))?;
    }
    Ok(s)
}

/// Waits until `fd` reports `events`, waking every [`ABORT_POLL`] to check
/// `abort`; fails after `within` with `timeout_msg`.
fn wait_fd(
    fd: RawFd,
    events: libc::c_short,
    abort: &AtomicBool,
    within: Duration,
    what: &str,
    timeout_msg: &str,
) -> Result<(), WorkloadError> {
    let deadline = Instant::now() + within;
    loop {
        if abort.load(Ordering::Relaxed) {
            return Err(WorkloadError::Aborted);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(WorkloadError::Other(format!(
                "{what}: {timeout_msg} within {:.0} s",
                within.as_secs_f64()
            )));
        }
        // Round up so that a sub-millisecond remainder does not spin.
        let wait_ms = (deadline - now).min(ABORT_POLL).as_micros().div_ceil(1000) as libc::c_int;
        let mut pfd = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd, count 1.
        let r = unsafe { libc::poll(&mut pfd, 1, wait_ms) };
        if r > 0 {
            // Ready, or an error condition the next call will report.
            return Ok(());
        }
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(WorkloadError::io(format!("{what}: poll"), e));
            }
        }
    }
}

/// The server's socket: a listening TCP socket or a bound UDP socket on
/// `ip` port 0, and the port the kernel picked.
pub(crate) fn bind_server(
    proto: Proto,
    addr: SocketAddr,
    bufs: Bufs,
    what: &str,
) -> Result<(Socket, u16), WorkloadError> {
    let s = new_socket(proto, addr.ip(), bufs, what)?;
    if addr.port() != 0 {
        // A fixed data port (a host's `data_port`) is bound point after
        // point; the previous point's connection may still be in TIME_WAIT.
        s.set_reuse_address(true)
            .map_err(io_err(what, "setsockopt(SO_REUSEADDR)"))?;
    }
    s.bind(&addr.into())
        .map_err(io_err(what, &format!("bind {addr}")))?;
    if proto == Proto::Tcp {
        // One point = one data connection; a backlog of 1 is enough.
        s.listen(1).map_err(io_err(what, "listen"))?;
    }
    let port = s
        .local_addr()
        .map_err(io_err(what, "getsockname"))?
        .as_socket()
        .map(|a| a.port())
        .ok_or_else(|| WorkloadError::Other(format!("{what}: bound address is not IP")))?;
    Ok((s, port))
}

/// Waits for the one client: accepts the TCP connection, or, for UDP,
/// waits for the first datagram and connects the socket to its sender so
/// that only that client's datagrams arrive from then on. Either waits at
/// most `within` (normally [`ACCEPT_TIMEOUT`]).
pub(crate) fn await_client(
    proto: Proto,
    server: Socket,
    abort: &AtomicBool,
    within: Duration,
    what: &str,
) -> Result<Socket, WorkloadError> {
    let msg = match proto {
        Proto::Tcp => "no client connected",
        Proto::Udp => "no datagram from a client arrived",
    };
    wait_fd(server.as_raw_fd(), libc::POLLIN, abort, within, what, msg)?;
    match proto {
        Proto::Tcp => {
            let (s, _) = server.accept().map_err(io_err(what, "accept"))?;
            Ok(s)
        }
        Proto::Udp => {
            // Peeking leaves the datagram queued for the measured loop.
            let peer = server
                .peek_sender()
                .map_err(io_err(what, "recvfrom(MSG_PEEK)"))?;
            server
                .connect(&peer)
                .map_err(io_err(what, "connect to the client"))?;
            Ok(server)
        }
    }
}

/// Connects a client data socket to `addr` (non-blocking connect polled
/// every [`ABORT_POLL`], at most [`ACCEPT_TIMEOUT`]); UDP sockets are
/// connected too, so that plain `send()`/`recv()` work and ICMP errors are
/// reported.
pub(crate) fn connect(
    proto: Proto,
    addr: SocketAddr,
    bufs: Bufs,
    abort: &AtomicBool,
    what: &str,
) -> Result<Socket, WorkloadError> {
    let s = new_socket(proto, addr.ip(), bufs, what)?;
    let sa = SockAddr::from(addr);
    let step = format!("connect to {addr}");
    if proto == Proto::Udp {
        s.connect(&sa).map_err(io_err(what, &step))?;
        return Ok(s);
    }
    s.set_nonblocking(true)
        .map_err(io_err(what, "set non-blocking"))?;
    match s.connect(&sa) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
            wait_fd(
                s.as_raw_fd(),
                libc::POLLOUT,
                abort,
                ACCEPT_TIMEOUT,
                what,
                &format!("could not connect to {addr}"),
            )?;
            if let Some(e) = s.take_error().map_err(io_err(what, "SO_ERROR"))? {
                return Err(WorkloadError::io(format!("{what}: {step}"), e));
            }
        }
        Err(e) => return Err(WorkloadError::io(format!("{what}: {step}"), e)),
    }
    s.set_nonblocking(false)
        .map_err(io_err(what, "set blocking"))?;
    Ok(s)
}

/// Sets `SO_RCVTIMEO` to `recv` and `SO_SNDTIMEO` to [`ABORT_POLL`], so
/// that a blocked call returns `EAGAIN` at that interval and its caller
/// looks at the abort flag: `net.stream`'s UDP sockets, and TCP sockets
/// after their measured loops, when nothing watches them any more (see the
/// module docs).
pub(crate) fn set_timeouts(s: &Socket, recv: Duration, what: &str) -> Result<(), WorkloadError> {
    s.set_read_timeout(Some(recv))
        .map_err(io_err(what, "setsockopt(SO_RCVTIMEO)"))?;
    s.set_write_timeout(Some(ABORT_POLL))
        .map_err(io_err(what, "setsockopt(SO_SNDTIMEO)"))
}

/// Stage two of validation again at run time (an agent may get parameters
/// no study file checked), as a workload error naming the kind.
pub(crate) fn checked(
    wl: &dyn benchlab_core::Workload,
    params: &Params,
) -> Result<(), WorkloadError> {
    wl.validate(params)
        .map_err(|(key, msg)| WorkloadError::Other(format!("{}: {key}: {msg}", wl.kind())))
}

/// Sets `TCP_NODELAY` as asked (both netperf and sfnt-pingpong leave Nagle
/// on unless told otherwise).
pub(crate) fn set_nodelay(s: &Socket, nodelay: bool, what: &str) -> Result<(), WorkloadError> {
    s.set_tcp_nodelay(nodelay)
        .map_err(io_err(what, "setsockopt(TCP_NODELAY)"))
}

/// Turns on `IP_RECVERR` (or `IPV6_RECVERR`) on a UDP sender, as netperf's
/// `enable_enobufs()` does: without it Linux hides a full device queue
/// from `send()` and the datagram is silently dropped instead of counted
/// as a failed send.
pub(crate) fn enable_recverr(s: &Socket, ip: IpAddr, what: &str) -> Result<(), WorkloadError> {
    let (level, opt) = match ip {
        IpAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_RECVERR),
        IpAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_RECVERR),
    };
    let one: libc::c_int = 1;
    // SAFETY: the option value is a c_int that lives across the call.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(WorkloadError::io(
            format!("{what}: setsockopt(IP_RECVERR)"),
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Raw I/O for the measured loops: no allocation, MSG_NOSIGNAL so that a
// vanished peer is an error and not SIGPIPE, and flags (MSG_WAITALL,
// MSG_TRUNC) that std does not expose.
//
// They enter the kernel through `syscall(SYS_sendto / SYS_recvfrom)`, not
// glibc's `send()`/`recv()`. Those two are pthread cancellation points: in
// a process with more than one thread (an agent always has the timer
// thread) glibc brackets every call with `__pthread_enable_asynccancel` /
// `__pthread_disable_asynccancel`, two atomic read-modify-writes that a
// single-threaded netperf or sfnt-pingpong never pays. benchlab never
// cancels threads, so it gives nothing up. Measured with `bench/per-op`
// (callgrind, user-space instructions per operation, both ends, together
// with the pingpong clock change): net.pingpong 32 B TCP 648 -> 383 and UDP
// 591 -> 347 per round trip; net.stream 65507 B 119 -> 54 and 1024 B
// 84 -> 38 per message.

/// `send(fd, buf, MSG_NOSIGNAL)`.
#[inline]
pub(crate) fn sys_send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes during the call;
    // sendto with a null address and length 0 is send().
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            buf.as_ptr(),
            buf.len(),
            libc::MSG_NOSIGNAL,
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::socklen_t,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `recv(fd, buf, flags)`. With `MSG_TRUNC` on a datagram socket the result
/// is the datagram's full length even when `buf` is shorter.
#[inline]
pub(crate) fn sys_recv(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes during the call;
    // recvfrom with null address pointers is recv() (see above for why not
    // glibc's recv()).
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            flags,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Whether an error only means "woke up without progress": a socket
/// timeout (`EAGAIN`) or a signal (`EINTR`).
#[inline]
pub(crate) fn is_wakeup(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// The slow path after a failed call: a wake-up checks `abort` and asks the
/// caller to retry; anything else is fatal.
#[cold]
#[inline(never)]
pub(crate) fn retry_or_fail(
    e: io::Error,
    abort: &AtomicBool,
    what: &'static str,
) -> Result<(), WorkloadError> {
    if !is_wakeup(&e) {
        return Err(WorkloadError::io(what, e));
    }
    check_abort(abort)
}

/// Whether a UDP send failed for a full device queue or lack of memory:
/// netperf's non-fatal "failed sends".
#[inline]
pub(crate) fn is_enobufs(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::ENOMEM))
}

/// `Err(Aborted)` once the abort flag is set.
#[inline]
pub(crate) fn check_abort(abort: &AtomicBool) -> Result<(), WorkloadError> {
    if abort.load(Ordering::Relaxed) {
        Err(WorkloadError::Aborted)
    } else {
        Ok(())
    }
}

/// Sends all of `buf` on a stream socket (a timed-out or short send is
/// continued).
///
/// The measured loops' messages nearly always go in one call, so that call
/// is made here, inline, and everything else (a short send, a timeout, an
/// error) continues out of line in [`send_rest`]: the caller's loop keeps
/// one system call and a comparison per message, with no loop set-up and no
/// error value built. What this bought, with [`recv_exact`] and the
/// loops that take the protocol out: see [`Exchanger`]; `net.stream`
/// 65507 B went from 54.5 to 48.1 instructions per message (limit 48–52)
/// and 1024 B from 37.9 to 30.9 (limit 36.5).
#[inline(always)]
pub(crate) fn send_all(
    fd: RawFd,
    buf: &[u8],
    abort: &AtomicBool,
    what: &'static str,
) -> Result<(), WorkloadError> {
    match sys_send(fd, buf) {
        Ok(n) if n == buf.len() => Ok(()),
        first => send_rest(fd, buf, first, abort, what),
    }
}

/// [`send_all`] after a first call that did not send everything.
#[cold]
#[inline(never)]
fn send_rest(
    fd: RawFd,
    buf: &[u8],
    first: io::Result<usize>,
    abort: &AtomicBool,
    what: &'static str,
) -> Result<(), WorkloadError> {
    let mut off = match first {
        Ok(n) => n,
        Err(e) => {
            retry_or_fail(e, abort, what)?;
            0
        }
    };
    while off < buf.len() {
        match sys_send(fd, &buf[off..]) {
            Ok(n) => off += n,
            Err(e) => retry_or_fail(e, abort, what)?,
        }
    }
    Ok(())
}

/// Receives exactly `buf.len()` bytes from a stream socket with
/// `MSG_WAITALL` (continued after a timeout or signal cut it short, as
/// sfnt-pingpong and netperf's `NETPERF_WAITALL` loop do). Returns `false`
/// on an orderly EOF before the first byte. Like [`send_all`], the one
/// call that nearly always suffices is made inline and the rest out of
/// line in [`recv_rest`].
#[inline(always)]
pub(crate) fn recv_exact(
    fd: RawFd,
    buf: &mut [u8],
    abort: &AtomicBool,
    what: &'static str,
) -> Result<bool, WorkloadError> {
    match sys_recv(fd, buf, libc::MSG_WAITALL) {
        Ok(n) if n == buf.len() && n > 0 => Ok(true),
        first => recv_rest(fd, buf, first, abort, what),
    }
}

/// [`recv_exact`] after a first call that did not fill the buffer.
#[cold]
#[inline(never)]
fn recv_rest(
    fd: RawFd,
    buf: &mut [u8],
    first: io::Result<usize>,
    abort: &AtomicBool,
    what: &'static str,
) -> Result<bool, WorkloadError> {
    let mut off = 0;
    let mut next = first;
    loop {
        match next {
            Ok(0) if off == 0 && !buf.is_empty() => return Ok(false),
            Ok(0) if off < buf.len() => return Err(truncated(what, off, buf.len())),
            Ok(n) => off += n,
            Err(e) => retry_or_fail(e, abort, what)?,
        }
        if off >= buf.len() {
            return Ok(true);
        }
        next = sys_recv(fd, &mut buf[off..], libc::MSG_WAITALL);
    }
}

#[cold]
fn truncated(what: &str, got: usize, want: usize) -> WorkloadError {
    WorkloadError::Other(format!(
        "{what}: the peer closed the connection after {got} of {want} bytes of a message"
    ))
}

/// TCP sender's end, as netperf: `shutdown(SHUT_WR)`, then wait until the
/// peer has read everything and closed (recv returns 0).
pub(crate) fn tcp_drain(
    s: &Socket,
    abort: &AtomicBool,
    what: &'static str,
) -> Result<(), WorkloadError> {
    let mut scratch = [0u8; 4096];
    s.shutdown(Shutdown::Write)
        .map_err(io_err(what, "shutdown(SHUT_WR)"))?;
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    loop {
        match sys_recv(s.as_raw_fd(), &mut scratch, 0) {
            Ok(0) => return Ok(()),
            // Nothing is expected back; whatever comes is discarded.
            Ok(_) => {}
            Err(e) => {
                retry_or_fail(e, abort, what)?;
                if Instant::now() >= deadline {
                    return Err(WorkloadError::Other(format!(
                        "{what}: the peer did not close the connection within {} s of the end",
                        DRAIN_TIMEOUT.as_secs()
                    )));
                }
            }
        }
    }
}

/// Sends netperf's three end-of-test datagrams, of `len` bytes (a length
/// the receiver never sees in data), sleeping `gaps[i]` before the i-th.
/// Errors are ignored: the receiver may already be gone, and it has its
/// own timer.
pub(crate) fn udp_end_markers(fd: RawFd, len: usize, gaps: &[Duration; 3]) {
    let marker = [0u8; 1];
    for gap in gaps {
        if !gap.is_zero() {
            std::thread::sleep(*gap);
        }
        let _ = sys_send(fd, &marker[..len.min(1)]);
    }
}

/// Length of the end marker for datagrams of `size` bytes: zero-length, as
/// netperf, unless the data itself is zero-length (sfnt-pingpong's UDP
/// sweep starts at 0 B), then one byte.
pub(crate) fn marker_len(size: usize) -> usize {
    if size == 0 {
        1
    } else {
        0
    }
}

// ---------------------------------------------------------------------------
// Phase timer and watchdog

/// Why a [`Watch`] shut its socket down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Wake {
    /// Not shut down.
    None = 0,
    /// The abort flag was set.
    Aborted = 1,
    /// The measured interval had ended and the peer had gone silent
    /// ([`STOP_GRACE`]); the round trip in progress is not counted.
    Stopped = 2,
    /// A UDP server heard nothing from its client for [`PAD_TIME`].
    Silent = 3,
}

/// What a watchdog does about a loop that makes no progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Idle {
    /// Nothing: a TCP peer that is silent ends by abort, by closing, or,
    /// for a client after its measured interval, by [`STOP_GRACE`].
    Ignore,
    /// A UDP client's reply is lost after this long: its `recv()` is
    /// interrupted so that the loop counts the loss and sends the next
    /// request.
    Loss(Duration),
    /// A UDP server's client has gone after this long: the server ends, as
    /// after its end markers.
    Silence(Duration),
}

/// One measured loop's socket as its watchdog (the [`Timer`] thread) sees
/// it: the means to wake the loop, the reason it was woken, and the
/// loop's progress.
///
/// Invariant: the socket outlives the [`Timer`] that watches it (the timer
/// is declared after it, so it is dropped, and its thread joined, first),
/// and that timer is dropped on the thread that created the `Watch`, so
/// `fd` and `thread` stay valid for as long as the watchdog may use them.
pub(crate) struct Watch {
    fd: RawFd,
    thread: libc::pthread_t,
    idle: Idle,
    /// Whether a blocked call may be ended after the measured interval
    /// (TCP clients; a UDP client's own loss rule already ends it).
    wake_at_stop: bool,
    /// Round trips (or requests) finished, published by UDP loops with a
    /// `Relaxed` store: a plain `mov` on x86, no fence. Only its changes
    /// matter.
    progress: AtomicU64,
    /// The `progress` at which the watchdog declared a reply lost;
    /// `u64::MAX` when none is pending.
    lost_at: AtomicU64,
    /// A [`Wake`], stored before the socket is shut down.
    woken: AtomicU8,
}

impl Watch {
    /// Watches `socket`, whose loop runs on the calling thread.
    pub(crate) fn new(socket: &Socket, idle: Idle, wake_at_stop: bool) -> Arc<Watch> {
        if matches!(idle, Idle::Loss(_)) {
            install_wake_signal();
        }
        Arc::new(Watch {
            fd: socket.as_raw_fd(),
            // SAFETY: pthread_self has no preconditions.
            thread: unsafe { libc::pthread_self() },
            idle,
            wake_at_stop,
            progress: AtomicU64::new(0),
            lost_at: AtomicU64::new(u64::MAX),
            woken: AtomicU8::new(Wake::None as u8),
        })
    }

    /// Publishes the loop's progress (one `mov`; see the field).
    #[inline(always)]
    pub(crate) fn progress(&self, n: u64) {
        self.progress.store(n, Ordering::Relaxed);
    }

    /// Why the socket was shut down, if it was. For the unusual return
    /// paths only.
    #[cold]
    pub(crate) fn woken(&self) -> Wake {
        match self.woken.load(Ordering::Acquire) {
            1 => Wake::Aborted,
            2 => Wake::Stopped,
            3 => Wake::Silent,
            _ => Wake::None,
        }
    }

    /// After an interrupted `recv()`: whether the watchdog declared the
    /// reply of round trip `n` lost (and takes that declaration). An
    /// interruption for an older round trip, whose reply came after all, is
    /// stale and answered `false`.
    #[cold]
    fn take_loss(&self, n: u64) -> bool {
        self.lost_at
            .compare_exchange(n, u64::MAX, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Wakes every blocked call for good: the reason first, so that the
    /// loop finds it when its call returns. `shutdown()` of an unconnected
    /// UDP socket fails with `ENOTCONN` but wakes its readers all the same
    /// (Linux's `inet_shutdown`; see the test), so its result is ignored.
    fn shut(&self, why: Wake) {
        self.woken.store(why as u8, Ordering::Release);
        // SAFETY: `fd` is open (see the type's invariant).
        unsafe { libc::shutdown(self.fd, libc::SHUT_RDWR) };
    }

    /// Interrupts the loop's `recv()` for a lost reply without harming the
    /// socket, which `shutdown()` would: a UDP socket shut for reading
    /// returns 0 at once from then on, and nothing undoes that; nor can a
    /// datagram from another socket wake it, as a connected socket drops
    /// datagrams from any address but its peer's. A signal whose handler
    /// has no `SA_RESTART` makes the blocked `recv()` fail with `EINTR`.
    /// Sent while the loop is not in `recv()`, it is missed or stale; a
    /// missed one is sent again after another [`UDP_LOSS_TIMEOUT`].
    fn interrupt_for_loss(&self, n: u64) {
        self.lost_at.store(n, Ordering::Release);
        // SAFETY: `thread` is alive (see the type's invariant); the
        // signal's handler was installed by `new`.
        unsafe { libc::pthread_kill(self.thread, wake_signal()) };
    }

    /// Whether the TCP peer has sent nothing, data or ACK, for `d`.
    fn peer_silent_for(&self, d: Duration) -> bool {
        // SAFETY: tcp_info is plain data; all zero is a valid value.
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        // SAFETY: `info` is writable for `len` bytes; `fd` is open.
        let r = unsafe {
            libc::getsockopt(
                self.fd,
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&mut info as *mut libc::tcp_info).cast(),
                &mut len,
            )
        };
        if r < 0 {
            // No connection to ask about: nothing can be cut short.
            return true;
        }
        let ms = d.as_millis() as u32;
        info.tcpi_last_data_recv >= ms && info.tcpi_last_ack_recv >= ms
    }
}

/// The signal that interrupts a UDP client's `recv()` for a lost reply: a
/// real-time signal that nothing else in benchlab uses, delivered to one
/// thread only.
fn wake_signal() -> libc::c_int {
    libc::SIGRTMIN() + 4
}

extern "C" fn on_wake_signal(_: libc::c_int) {}

/// Installs [`wake_signal`]'s handler once per process: an empty handler
/// without `SA_RESTART`, so that the blocked call fails with `EINTR`
/// instead of being restarted.
fn install_wake_signal() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: a zeroed sigaction with an empty mask, no flags and a
        // handler that does nothing (async-signal-safe).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_wake_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(wake_signal(), &sa, std::ptr::null_mut());
        }
    });
}

struct TimerShared {
    warm_done: AtomicBool,
    stop: AtomicBool,
    aborted: AtomicBool,
    cancel: AtomicBool,
    /// When warm-up ends, in ns after the timer's origin; `u64::MAX` until
    /// it has begun.
    warm_at_ns: AtomicU64,
    /// When `stop` is due, in ns after the timer's origin; `u64::MAX` until
    /// [`Timer::measure_for`] arms it.
    stop_at_ns: AtomicU64,
}

/// A helper thread that flips flags at the end of warm-up and at the end of
/// the measured interval, so that measured loops only do a `Relaxed` load
/// per iteration instead of reading the clock. It also watches the abort
/// flag: on abort it sets every flag, which ends any loop, and
/// [`Timer::aborted`] says why. Given a [`Watch`], it is that loop's
/// watchdog too: it wakes a blocked call on abort, on a silent peer
/// [`STOP_GRACE`] after the measured interval, and by the watch's
/// [`Idle`] rule.
pub(crate) struct Timer {
    shared: Arc<TimerShared>,
    origin: Instant,
    handle: Option<JoinHandle<()>>,
}

impl Timer {
    /// Starts the clock now: warm-up ends after `warmup` (at once when zero);
    /// `stop` stays clear until [`Timer::measure_for`].
    pub(crate) fn start(
        warmup: Duration,
        abort: Arc<AtomicBool>,
        watch: Option<Arc<Watch>>,
    ) -> Result<Timer, WorkloadError> {
        let t = Timer::watching(abort, watch)?;
        t.begin_warmup(warmup);
        Ok(t)
    }

    /// Starts the thread (abort and the watch are looked after from now
    /// on), but not warm-up: see [`Timer::begin_warmup`].
    pub(crate) fn watching(
        abort: Arc<AtomicBool>,
        watch: Option<Arc<Watch>>,
    ) -> Result<Timer, WorkloadError> {
        let shared = Arc::new(TimerShared {
            warm_done: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            aborted: AtomicBool::new(false),
            cancel: AtomicBool::new(false),
            warm_at_ns: AtomicU64::new(u64::MAX),
            stop_at_ns: AtomicU64::new(u64::MAX),
        });
        let origin = Instant::now();
        let sh = shared.clone();
        let handle = std::thread::Builder::new()
            .name("wl-net-timer".into())
            .spawn(move || {
                // A table of its own with only the watched socket in it,
                // so that the loop's thread is again the only owner of
                // its table (see `own_fd_table`). The copy holds the
                // socket open until this thread ends, which is before the
                // loop's thread closes it: the timer is dropped, and
                // joined, first.
                benchlab_core::placement::own_fd_table(watch.as_deref().map(|w| w.fd));
                timer_thread(&sh, origin, &abort, watch.as_deref())
            })
            .map_err(|e| WorkloadError::io("starting the phase timer thread", e))?;
        Ok(Timer {
            shared,
            origin,
            handle: Some(handle),
        })
    }

    /// Warm-up ends `warmup` from now (now when zero).
    pub(crate) fn begin_warmup(&self, warmup: Duration) {
        if warmup.is_zero() {
            self.shared.warm_done.store(true, Ordering::Relaxed);
            return;
        }
        self.shared
            .warm_at_ns
            .store(self.ns_from_now(warmup), Ordering::Relaxed);
        self.wake();
    }

    /// Arms the end of the measured interval at now + `d`. Called right
    /// after the start snapshot, so the measured interval is never shorter
    /// than `d` however late the loop noticed the end of warm-up.
    pub(crate) fn measure_for(&self, d: Duration) {
        self.shared
            .stop_at_ns
            .store(self.ns_from_now(d), Ordering::Relaxed);
        self.wake();
    }

    fn ns_from_now(&self, d: Duration) -> u64 {
        let at = self.origin.elapsed().saturating_add(d);
        at.as_nanos().min(u64::MAX as u128 - 1) as u64
    }

    fn wake(&self) {
        if let Some(h) = &self.handle {
            h.thread().unpark();
        }
    }

    /// Warm-up is over (or the run was aborted).
    #[inline]
    pub(crate) fn warm_done(&self) -> bool {
        self.shared.warm_done.load(Ordering::Relaxed)
    }

    /// The measured interval is over (or the run was aborted).
    #[inline]
    pub(crate) fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }

    /// The flags were set because of the abort flag.
    pub(crate) fn aborted(&self) -> bool {
        self.shared.aborted.load(Ordering::Relaxed)
    }
}

/// A due time in ns after the origin, or `None` when not armed.
fn due(at_ns: &AtomicU64) -> Option<Duration> {
    match at_ns.load(Ordering::Relaxed) {
        u64::MAX => None,
        ns => Some(Duration::from_nanos(ns)),
    }
}

fn timer_thread(sh: &TimerShared, origin: Instant, abort: &AtomicBool, watch: Option<&Watch>) {
    // The watch's progress as last seen, and since when.
    let mut seen = (u64::MAX, Duration::ZERO);
    let mut stopped_at: Option<Duration> = None;
    let tick = match watch.map(|w| w.idle) {
        Some(Idle::Loss(_)) => UDP_REPLY_SLICE,
        _ => ABORT_POLL,
    };
    loop {
        if sh.cancel.load(Ordering::Relaxed) {
            return;
        }
        if abort.load(Ordering::Relaxed) {
            sh.aborted.store(true, Ordering::Relaxed);
            sh.warm_done.store(true, Ordering::Relaxed);
            sh.stop.store(true, Ordering::Relaxed);
            if let Some(w) = watch {
                w.shut(Wake::Aborted);
            }
            return;
        }
        let now = origin.elapsed();
        let mut next = now + tick;
        if !sh.warm_done.load(Ordering::Relaxed) {
            if let Some(at) = due(&sh.warm_at_ns) {
                if now >= at {
                    sh.warm_done.store(true, Ordering::Relaxed);
                } else {
                    next = next.min(at);
                }
            }
        }
        if stopped_at.is_none() {
            if let Some(at) = due(&sh.stop_at_ns) {
                if now >= at {
                    sh.stop.store(true, Ordering::Relaxed);
                    stopped_at = Some(now);
                    if watch.is_none() {
                        return;
                    }
                } else {
                    next = next.min(at);
                }
            }
        }
        if let Some(w) = watch {
            if let (Some(at), true) = (stopped_at, w.wake_at_stop) {
                // The loop has not ended (it would have dropped the timer)
                // and its peer has sent nothing for a while: it is blocked
                // for good.
                if now >= at + STOP_GRACE && w.peer_silent_for(STOP_GRACE) {
                    w.shut(Wake::Stopped);
                    return;
                }
            }
            if let Idle::Loss(limit) | Idle::Silence(limit) = w.idle {
                let p = w.progress.load(Ordering::Relaxed);
                if p != seen.0 {
                    // The loop's present wait began before `now`, so a
                    // wait measured from here is never overestimated.
                    seen = (p, now);
                } else if now - seen.1 >= limit {
                    if w.idle == Idle::Silence(limit) {
                        w.shut(Wake::Silent);
                        return;
                    }
                    w.interrupt_for_loss(p);
                    // Again after another `limit` if this one was missed.
                    seen.1 = now;
                }
                next = next.min(seen.1 + limit);
            }
        }
        // park_timeout so that measure_for() and Drop can wake us early.
        std::thread::park_timeout(next.saturating_sub(now));
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.shared.cancel.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

// ---------------------------------------------------------------------------
// Request/response exchange (net.rr and net.pingpong)

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
/// blocked call (see the module docs for what that bought).
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
    /// [`abort_wins`] reports). Looked at only on this unusual path.
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
        if let Err(e) = sys_send(self.fd, &self.req) {
            self.resend(e)?;
        }
        match sys_recv(self.fd, &mut self.rsp, libc::MSG_TRUNC) {
            Ok(n) if n == self.rsp.len() => {
                self.udp_round_done();
                Ok(Outcome::Done)
            }
            first => self.await_reply(first),
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
    /// and the caller's [`abort_wins`] reports it.
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
    // before the first request (module docs). A UDP client that has gone
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
        served += rx.serve_until(|| timer.stopped())?.0;
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
                    if let Err(e) = sys_send(self.fd, &self.rsp) {
                        if !self.respond_failed(e)? {
                            return Ok((n, true));
                        }
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
        match sys_recv(self.fd, &mut self.req, libc::MSG_TRUNC) {
            Ok(n) => Ok(n == self.req.len()),
            Err(e) => self.await_datagram(e),
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

// ---------------------------------------------------------------------------
// Results and metrics

/// Reports a side's outcome as [`WorkloadError::Aborted`] whenever the abort
/// flag is set when it returns. The two sides see the abort at different
/// moments (the timer thread polls every [`ABORT_POLL`]); the side that
/// notices second usually first sees the connection the other has just
/// closed, as an error or as an ordinary end, and either is a consequence
/// of the abort: the controller has abandoned the point anyway.
pub(crate) fn abort_wins<T>(
    r: Result<T, WorkloadError>,
    abort: &AtomicBool,
) -> Result<T, WorkloadError> {
    if abort.load(Ordering::Relaxed) {
        return Err(WorkloadError::Aborted);
    }
    r
}

/// Builds a side's result; `peak_rss_kib` is read now, at the end of the
/// side's work.
pub(crate) fn side_result(
    counters: &[(&str, u64)],
    values: &[(&str, f64)],
    cpu: Option<CpuUsage>,
) -> SideResult {
    SideResult {
        counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        values: values.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        cpu,
        peak_rss_kib: benchlab_core::cpu::peak_rss_kib(),
        ..SideResult::default()
    }
}

/// Inserts a metric unless it is not a finite number (for example CPU
/// figures when `/proc/stat` was unreadable): a missing metric is honest,
/// a NaN would poison statistics and JSON.
pub(crate) fn put(metrics: &mut BTreeMap<String, f64>, name: &str, v: f64) {
    if v.is_finite() {
        metrics.insert(name.to_string(), v);
    }
}

/// `{side}_cpu_pct` (this process, getrusage) and `{side}_system_cpu_pct`
/// (whole host, /proc/stat, as netperf).
pub(crate) fn put_cpu(metrics: &mut BTreeMap<String, f64>, side: &str, cpu: Option<&CpuUsage>) {
    if let Some(c) = cpu {
        put(metrics, &format!("{side}_cpu_pct"), c.process_util_pct);
        put(
            metrics,
            &format!("{side}_system_cpu_pct"),
            c.system_util_pct,
        );
    }
}

/// Metrics that are averaged over targets: CPU percentages of both sides
/// and the measured interval.
pub(crate) fn mean_metrics(names: &[&'static str]) -> Vec<MetricSpec> {
    names
        .iter()
        .map(|n| MetricSpec::lower(n, n, 2).with(Combine::Mean))
        .collect()
}

/// Counts and throughputs that add up over targets.
pub(crate) fn sum_metrics(names: &[&'static str]) -> Vec<MetricSpec> {
    names.iter().map(|n| MetricSpec::higher(n, n, 0)).collect()
}

/// The CPU figures every net workload reports for both sides.
pub(crate) const CPU_METRICS: &[&str] = &[
    "client_cpu_pct",
    "client_system_cpu_pct",
    "server_cpu_pct",
    "server_system_cpu_pct",
    "elapsed_s",
];

/// The server's result, which every net workload needs.
pub(crate) fn need_server(
    server: Option<SideResult>,
    kind: &str,
) -> Result<SideResult, WorkloadError> {
    server
        .ok_or_else(|| WorkloadError::Other(format!("{kind}: the server side's result is missing")))
}

/// The client context's server address.
pub(crate) fn server_addr(
    server: Option<SocketAddr>,
    kind: &str,
) -> Result<SocketAddr, WorkloadError> {
    server.ok_or_else(|| WorkloadError::Other(format!("{kind}: no server address given")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    #[test]
    fn accept_gives_up_with_a_clear_error() {
        let (s, _) = bind_server(
            Proto::Tcp,
            SocketAddr::new(LO, 0),
            Bufs::default(),
            "test server",
        )
        .unwrap();
        let abort = AtomicBool::new(false);
        let t = Instant::now();
        let e = await_client(
            Proto::Tcp,
            s,
            &abort,
            Duration::from_millis(300),
            "test server",
        )
        .err()
        .unwrap();
        assert!(t.elapsed() >= Duration::from_millis(300));
        let msg = e.to_string();
        assert!(msg.contains("no client connected"), "{msg}");
    }

    #[test]
    fn accept_sees_abort() {
        let (s, _) = bind_server(
            Proto::Udp,
            SocketAddr::new(LO, 0),
            Bufs::default(),
            "test server",
        )
        .unwrap();
        let abort = AtomicBool::new(true);
        let e = await_client(Proto::Udp, s, &abort, ACCEPT_TIMEOUT, "test server")
            .err()
            .unwrap();
        assert!(matches!(e, WorkloadError::Aborted), "{e}");
    }

    #[test]
    fn timer_phases_and_measured_interval() {
        let abort = Arc::new(AtomicBool::new(false));
        let t = Timer::start(Duration::from_millis(50), abort, None).unwrap();
        assert!(!t.warm_done());
        while !t.warm_done() {
            std::hint::spin_loop();
        }
        let start = Instant::now();
        t.measure_for(Duration::from_millis(100));
        while !t.stopped() {
            std::hint::spin_loop();
        }
        assert!(start.elapsed() >= Duration::from_millis(100));
        assert!(!t.aborted());
    }

    #[test]
    fn timer_sets_every_flag_on_abort() {
        let abort = Arc::new(AtomicBool::new(false));
        let t = Timer::start(Duration::from_secs(60), abort.clone(), None).unwrap();
        abort.store(true, Ordering::Relaxed);
        let start = Instant::now();
        while !t.stopped() {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(start.elapsed() < ABORT_POLL * 2);
        assert!(t.warm_done() && t.aborted());
    }

    /// A connected pair of stream sockets with `SO_RCVTIMEO` /
    /// `SO_SNDTIMEO` of `timeout`, as the measured loops' sockets have.
    fn stream_pair(
        timeout: Duration,
    ) -> (
        std::os::unix::net::UnixStream,
        std::os::unix::net::UnixStream,
    ) {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        for s in [&a, &b] {
            s.set_read_timeout(Some(timeout)).unwrap();
            s.set_write_timeout(Some(timeout)).unwrap();
        }
        (a, b)
    }

    #[test]
    fn recv_exact_continues_after_a_timeout_cut_the_message_short() {
        use std::io::Write;
        let (a, mut b) = stream_pair(Duration::from_millis(30));
        let abort = AtomicBool::new(false);
        let writer = std::thread::spawn(move || {
            b.write_all(b"hello ").unwrap();
            // Past the receiver's timeout: its first call returns short.
            std::thread::sleep(Duration::from_millis(120));
            b.write_all(b"world").unwrap();
            b
        });
        let mut buf = [0u8; 11];
        assert!(recv_exact(a.as_raw_fd(), &mut buf, &abort, "test").unwrap());
        assert_eq!(&buf, b"hello world");
        // An orderly end before the next message is `false`, not an error.
        drop(writer.join().unwrap());
        assert!(!recv_exact(a.as_raw_fd(), &mut buf, &abort, "test").unwrap());
    }

    #[test]
    fn recv_exact_reports_a_message_cut_by_the_peers_close() {
        use std::io::Write;
        let (a, mut b) = stream_pair(Duration::from_millis(30));
        b.write_all(b"half").unwrap();
        drop(b);
        let mut buf = [0u8; 8];
        let e = recv_exact(a.as_raw_fd(), &mut buf, &AtomicBool::new(false), "test")
            .err()
            .unwrap();
        assert!(e.to_string().contains("after 4 of 8 bytes"), "{e}");
    }

    #[test]
    fn recv_exact_sees_abort_while_waiting() {
        let (a, _b) = stream_pair(Duration::from_millis(20));
        let abort = AtomicBool::new(true);
        let mut buf = [0u8; 4];
        let e = recv_exact(a.as_raw_fd(), &mut buf, &abort, "test")
            .err()
            .unwrap();
        assert!(matches!(e, WorkloadError::Aborted), "{e}");
    }

    #[test]
    fn send_all_continues_short_and_timed_out_sends() {
        use std::io::Read;
        // Several socket buffers' worth, read in slices with pauses longer
        // than the send timeout: calls return short and time out, over and
        // over, and every byte must still arrive once and in order.
        let msg: Vec<u8> = (0..2 << 20).map(|i: u32| (i * 7 % 251) as u8).collect();
        let (a, mut b) = stream_pair(Duration::from_millis(10));
        b.set_read_timeout(None).unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut slice = vec![0u8; 256 << 10];
            loop {
                std::thread::sleep(Duration::from_millis(25));
                let n = b.read(&mut slice).unwrap();
                if n == 0 {
                    return got;
                }
                got.extend_from_slice(&slice[..n]);
            }
        });
        send_all(a.as_raw_fd(), &msg, &AtomicBool::new(false), "test").unwrap();
        drop(a);
        let got = reader.join().unwrap();
        assert_eq!(got.len(), msg.len());
        assert!(got == msg);
    }

    /// Blocks in `recv()` on `socket` (no timeouts) while another thread
    /// shuts it down through a [`Watch`]; the call must return, with 0
    /// bytes, within seconds (it would otherwise block for ever).
    fn assert_shutdown_wakes(socket: Socket, what: &str) {
        let watch = Watch::new(&socket, Idle::Ignore, false);
        let (tx, rx) = std::sync::mpsc::channel();
        let fd = socket.as_raw_fd();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            tx.send(sys_recv(fd, &mut buf, libc::MSG_TRUNC).map_err(|e| e.kind()))
                .unwrap();
        });
        // Let the reader block first (if it has not, the call returns at
        // once anyway: a shut socket never blocks).
        std::thread::sleep(Duration::from_millis(200));
        watch.shut(Wake::Aborted);
        let got = rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{what}: shutdown did not wake the blocked recv()"));
        assert_eq!(got, Ok(0), "{what}");
        assert_eq!(watch.woken(), Wake::Aborted);
        reader.join().unwrap();
        drop(socket);
    }

    fn udp_socket() -> Socket {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        s.bind(&SocketAddr::new(LO, 0).into()).unwrap();
        s
    }

    #[test]
    fn shutdown_wakes_a_blocked_recv_on_tcp_and_udp() {
        let (listener, port) =
            bind_server(Proto::Tcp, SocketAddr::new(LO, 0), Bufs::default(), "t").unwrap();
        let abort = AtomicBool::new(false);
        let client = connect(
            Proto::Tcp,
            SocketAddr::new(LO, port),
            Bufs::default(),
            &abort,
            "t",
        )
        .unwrap();
        let (_server_end, _) = listener.accept().unwrap();
        assert_shutdown_wakes(client, "TCP");

        let peer = udp_socket();
        let connected = udp_socket();
        connected.connect(&peer.local_addr().unwrap()).unwrap();
        assert_shutdown_wakes(connected, "connected UDP");

        // shutdown() answers ENOTCONN here, and still wakes the reader.
        assert_shutdown_wakes(udp_socket(), "unconnected UDP");
    }

    #[test]
    fn a_loss_interrupts_recv_and_the_socket_goes_on() {
        let peer = udp_socket();
        let s = udp_socket();
        s.connect(&peer.local_addr().unwrap()).unwrap();
        peer.connect(&s.local_addr().unwrap()).unwrap();
        // Made on this thread: the signal goes to this thread's recv().
        let watch = Watch::new(&s, Idle::Loss(UDP_LOSS_TIMEOUT), false);
        let w = watch.clone();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            w.interrupt_for_loss(7);
        });
        let mut buf = [0u8; 8];
        let e = sys_recv(s.as_raw_fd(), &mut buf, libc::MSG_TRUNC).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted);
        waker.join().unwrap();
        // A stale declaration is refused, the right one taken once.
        assert!(!watch.take_loss(6));
        assert!(watch.take_loss(7));
        assert!(!watch.take_loss(7));
        assert_eq!(watch.woken(), Wake::None);
        // The socket still sends and receives.
        sys_send(peer.as_raw_fd(), b"pong").unwrap();
        assert_eq!(
            sys_recv(s.as_raw_fd(), &mut buf, libc::MSG_TRUNC).unwrap(),
            4
        );
        assert_eq!(&buf[..4], b"pong");
    }

    #[test]
    fn zero_warmup_is_done_at_once() {
        let t = Timer::start(Duration::ZERO, Arc::new(AtomicBool::new(false)), None).unwrap();
        assert!(t.warm_done());
        assert!(!t.stopped());
    }
}
