//! The HTTP/1.x load generator: many connections per thread, driven by
//! `epoll`, closed loop (WebBench, wrk) or open loop at a fixed total rate
//! with latency from each request's intended send time (wrk2, oha
//! `--latency-correction`).
//!
//! # Why this I/O model
//!
//! The generator must never be the bottleneck, and here it shares two cores
//! with the server, so every system call it saves is CPU the server gets.
//! One thread per core, each owning a fixed set of non-blocking sockets in
//! its own epoll instance (wrk's design), keeps the hot path free of locks,
//! task queues and wakers; an async runtime (tokio, hyper: oha's stack)
//! adds a scheduler, reference-counted buffers and per-request allocation
//! for nothing a static-file load needs. Within that model this code makes
//! fewer system calls per request than wrk:
//!
//! - every socket is registered **once, edge-triggered, for both
//!   directions**; wrk (level-triggered, via its `ae` loop) adds and removes
//!   the writable event around every request, two `epoll_ctl` calls per
//!   request;
//! - the next request is written **at once** when a response completes
//!   (the socket is writable: its previous request was acknowledged), with
//!   no round trip through `epoll_wait`; after a non-blocking `connect` the
//!   request is written at once too (on loopback the handshake has finished
//!   when `connect` returns), and only `EAGAIN` waits for the writable edge;
//! - reads stop when the response is complete or a read returned less than
//!   the buffer (the socket is drained and the next arrival raises a new
//!   edge), so no extra `read` that fails with `EAGAIN`;
//! - once the head is parsed, the rest of a `Content-Length` body is
//!   discarded in the kernel (`recv(MSG_TRUNC)`, up to 128 KiB a call),
//!   never copied to user space: the bytes are counted, not looked at, so
//!   copying them would only spend CPU the server could use (the SPECweb96
//!   mix moves ≈15 KB a request, its largest files 900 KiB).
//!
//! Keep-alive therefore costs one `send` and (for small files) one `read`
//! per request, plus a share of one `epoll_wait`; `Connection: close` adds
//! `socket`, `connect`, `epoll_ctl(ADD)` and `close`. The figures measured
//! with `strace -c -f` against wrk are in `docs/web.md`.
//!
//! # What the measured loop does
//!
//! No allocation, lock or log: buffers, connection slots, the idle stack
//! and the histograms are allocated before the start; request texts are
//! built once. The clock is read once per wake-up (completion times; the
//! time the response was seen) and once per request sent (its start).
//! Phases (ramp-up, measured interval, ramp-down) are compared against that
//! same clock; a response counts in the measured interval when it completes
//! inside it, as WebBench counts work.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use benchlab_core::cpu::CpuSnapshot;
use benchlab_core::CpuUsage;

use crate::http::{Progress, Response};
use benchlab_core::latency::Latency;

/// One URL the generator requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The request path (`/dir00000/class1_3`).
    pub path: String,
    /// The expected body size in bytes, when known (a generated file): a
    /// response with another size counts as a short-body error.
    pub size: Option<u64>,
    /// Relative request frequency (> 0).
    pub weight: f64,
}

/// Closed or open loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// Each connection sends its next request as soon as the previous
    /// response arrived, with no think time.
    Closed,
    /// A fixed total request rate over all connections.
    Open {
        /// Requests per second, over all threads.
        rate_per_s: f64,
    },
}

/// Which HTTP version the requests carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpVersion {
    /// `HTTP/1.0` (WebBench).
    V10,
    /// `HTTP/1.1`.
    V11,
}

/// Everything one run needs.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// The server.
    pub addr: SocketAddr,
    /// The `Host` header.
    pub host: String,
    /// The URLs and their mix.
    pub targets: Vec<Target>,
    /// Number of connections (clients).
    pub connections: u32,
    /// Generator threads (0: one per CPU, at most one per connection).
    pub threads: u32,
    /// Keep connections open between requests; false sends each request on
    /// a new connection (`Connection: close` in HTTP/1.1; plain HTTP/1.0).
    pub keep_alive: bool,
    /// The HTTP version.
    pub version: HttpVersion,
    /// Closed or open loop.
    pub pace: Pace,
    /// Load before the measured interval, not counted in it.
    pub ramp_up: Duration,
    /// The measured interval.
    pub measure: Duration,
    /// Load after the measured interval, not counted in it.
    pub ramp_down: Duration,
    /// A request not answered within this time fails (timeout class) and
    /// its connection is closed.
    pub timeout: Duration,
    /// Seed of the request mix (each connection draws from its own
    /// generator derived from it).
    pub seed: u64,
    /// Polls for more events (`epoll_wait` without a timeout) before each
    /// sleep; 0 sleeps at once. It spares a CPU-bound server some of the
    /// cost of waking the generator, where that cost is high (virtual
    /// machines whose idle CPUs halt; `docs/web.md`, "Spinning").
    pub spin_polls: u32,
    /// Adaptive polling when > 0: empty polls allowed per response, on
    /// average (the spin's CPU budget per request). The number of polls
    /// before a sleep then grows while polls find responses and shrinks
    /// when they do not, up to `spin_polls` (0: [`ADAPTIVE_MAX_POLLS`]);
    /// see `docs/web.md`, "Adaptive polling".
    pub poll_budget: f64,
}

/// The most polls before one sleep of an adaptive poll without a
/// `spin_polls` of its own.
pub const ADAPTIVE_MAX_POLLS: u32 = 64;
/// A sleep that ends with events sooner than this after it began would
/// have been caught by a few more polls: the adaptive poll grows.
const QUICK_WAKE_NS: u64 = 50_000;
/// Milli-polls: the unit of the adaptive poll's budget, in integers.
const MILLI: u64 = 1000;

/// Event counts of one phase set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests sent.
    pub sent: u64,
    /// Complete responses with status < 400 and the expected body size.
    pub ok: u64,
    /// Complete responses of any status (`ok` + status and size errors).
    pub responses: u64,
    /// Bytes read (heads and bodies, as on the wire).
    pub bytes: u64,
    /// Body bytes (chunk framing excluded).
    pub body_bytes: u64,
    /// Connections that failed to open.
    pub err_connect: u64,
    /// Requests not answered within the timeout.
    pub err_timeout: u64,
    /// Responses with status ≥ 400.
    pub err_status: u64,
    /// Bodies shorter than announced (connection closed early), or of
    /// another size than the target's file.
    pub err_short: u64,
    /// Malformed responses, resets and other socket errors.
    pub err_other: u64,
}

impl Counts {
    /// All errors.
    pub fn errors(&self) -> u64 {
        self.err_connect + self.err_timeout + self.err_status + self.err_short + self.err_other
    }

    fn add(&mut self, o: &Counts) {
        self.sent += o.sent;
        self.ok += o.ok;
        self.responses += o.responses;
        self.bytes += o.bytes;
        self.body_bytes += o.body_bytes;
        self.err_connect += o.err_connect;
        self.err_timeout += o.err_timeout;
        self.err_status += o.err_status;
        self.err_short += o.err_short;
        self.err_other += o.err_other;
    }
}

/// Open-loop pacing figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OpenLoop {
    /// The target rate.
    pub rate_per_s: f64,
    /// Requests scheduled with an intended time inside the measured
    /// interval.
    pub scheduled: u64,
    /// Requests actually sent inside the measured interval.
    pub sent: u64,
    /// Largest delay between a request's intended and actual send time.
    pub max_lag_ns: u64,
    /// Requests sent more than 1 ms after their intended time.
    pub late: u64,
}

impl OpenLoop {
    /// Whether the generator fell behind its schedule: it sent fewer than
    /// 99 % of the interval's scheduled requests inside the interval (the
    /// issue's ±1 % accuracy target).
    pub fn behind(&self) -> bool {
        (self.sent as f64) < 0.99 * self.scheduled as f64
    }
}

/// The result of one run.
pub struct LoadResult {
    /// Counts of responses completed (and errors seen) in the measured
    /// interval.
    pub measured: Counts,
    /// Counts over the whole run (ramps and drain included): what the
    /// server saw.
    pub total: Counts,
    /// Latency of the measured interval's complete responses (all
    /// statuses), in ns: from the request's start (closed loop: its send,
    /// or its `connect` for a new connection; open loop: its intended send
    /// time).
    pub latency: Latency,
    /// Length of the measured interval in s.
    pub measure_s: f64,
    /// Requests still unanswered when the drain after the run gave up.
    pub in_flight_at_end: u64,
    /// Open-loop pacing, for an open-loop run.
    pub open: Option<OpenLoop>,
    /// The generator's CPU use over the measured interval.
    pub cpu: CpuUsage,
    /// Threads used.
    pub threads: u32,
}

/// Why a run could not be done at all (errors of single requests are
/// counted, not returned).
#[derive(Debug)]
pub enum LoadError {
    /// The spec is unusable.
    Spec(String),
    /// A connection could not be opened before the start.
    Connect(SocketAddr, io::Error),
    /// A system call of the set-up failed.
    Io(&'static str, io::Error),
    /// The start gate failed.
    Gate(String),
    /// Stopped from outside.
    Aborted,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Spec(m) => write!(f, "{m}"),
            LoadError::Connect(a, e) => write!(f, "cannot connect to {a}: {e}"),
            LoadError::Io(what, e) => write!(f, "{what}: {e}"),
            LoadError::Gate(m) => write!(f, "start barrier: {m}"),
            LoadError::Aborted => write!(f, "aborted"),
        }
    }
}

impl std::error::Error for LoadError {}

/// Monotonic clock in ns (vDSO, no system call).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The request texts, built once, and the mix as a cumulative table.
struct Requests {
    text: Vec<u8>,
    /// (start, len) of each target's request in `text`.
    spans: Vec<(usize, usize)>,
    /// Expected body size per target, `u64::MAX` when unknown.
    sizes: Vec<u64>,
    /// Cumulative weights scaled to 2^32; target i is picked when a 32-bit
    /// draw is below `cdf[i]` and not below `cdf[i-1]`.
    cdf: Vec<u64>,
}

impl Requests {
    fn build(spec: &LoadSpec) -> Result<Requests, LoadError> {
        if spec.targets.is_empty() {
            return Err(LoadError::Spec("no URL to request".into()));
        }
        let total: f64 = spec.targets.iter().map(|t| t.weight).sum();
        if total.is_nan()
            || total <= 0.0
            || spec
                .targets
                .iter()
                .any(|t| t.weight.is_nan() || t.weight < 0.0)
        {
            return Err(LoadError::Spec(
                "the URL weights must be non-negative and not all zero".into(),
            ));
        }
        let (version, conn) = match (spec.version, spec.keep_alive) {
            (HttpVersion::V10, false) => ("HTTP/1.0", ""),
            (HttpVersion::V10, true) => ("HTTP/1.0", "Connection: keep-alive\r\n"),
            (HttpVersion::V11, true) => ("HTTP/1.1", ""),
            (HttpVersion::V11, false) => ("HTTP/1.1", "Connection: close\r\n"),
        };
        let mut r = Requests {
            text: Vec::new(),
            spans: Vec::new(),
            sizes: Vec::new(),
            cdf: Vec::new(),
        };
        let mut acc = 0.0;
        for t in &spec.targets {
            if !t.path.starts_with('/') || t.path.bytes().any(|b| b <= b' ' || b == 0x7f) {
                return Err(LoadError::Spec(format!(
                    "URL path {:?} must start with '/' and contain no spaces or control characters",
                    t.path
                )));
            }
            let req = format!(
                "GET {} {version}\r\nHost: {}\r\nUser-Agent: benchlab\r\n{conn}\r\n",
                t.path, spec.host
            );
            r.spans.push((r.text.len(), req.len()));
            r.text.extend_from_slice(req.as_bytes());
            r.sizes.push(t.size.unwrap_or(u64::MAX));
            acc += t.weight;
            r.cdf.push(((acc / total) * 4_294_967_296.0) as u64);
        }
        // Rounding must not leave the top of the range unpicked.
        *r.cdf.last_mut().expect("non-empty") = u64::MAX;
        Ok(r)
    }

    /// Picks a target with a 32-bit uniform draw.
    #[inline]
    fn pick(&self, draw: u64) -> usize {
        if self.cdf.len() == 1 {
            return 0;
        }
        self.cdf.partition_point(|&c| c <= draw)
    }
}

/// xorshift64*: a small, fast generator for the mix (not cryptographic).
#[inline]
fn next_rand(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32
}

/// The phase boundaries of a run, on the monotonic clock.
#[derive(Debug, Clone, Copy)]
struct Phases {
    start: u64,
    m0: u64,
    m1: u64,
    stop: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CState {
    /// No socket (close mode between requests, or after an error).
    Closed,
    /// Keep-alive socket with no request in flight.
    Idle,
    Connecting,
    Writing,
    Reading,
}

struct Conn {
    fd: i32,
    /// Bumped whenever the slot's socket changes, so events of a socket
    /// closed earlier in the same `epoll_wait` batch are ignored.
    gen: u32,
    state: CState,
    /// Start of the request for its latency.
    origin: u64,
    /// When the request was actually started (for its timeout).
    started: u64,
    target: u32,
    written: usize,
    /// The socket has not completed a response yet (a failure on it is
    /// not the server closing an idle keep-alive connection).
    fresh: bool,
    rng: u64,
    resp: Response,
}

/// Error classes.
#[derive(Debug, Clone, Copy)]
enum Fail {
    Connect,
    Timeout,
    Short,
    Other,
}

/// Per-thread state: its connections, epoll instance and recorders.
struct Worker<'a> {
    ep: i32,
    conns: Vec<Conn>,
    /// Open loop: connections free for the next scheduled request.
    idle: Vec<u32>,
    reqs: &'a Requests,
    spec: &'a LoadSpec,
    buf: Vec<u8>,
    events: Vec<libc::epoll_event>,
    measured: Counts,
    total: Counts,
    latency: Latency,
    phases: Phases,
    open: OpenLoop,
    /// Open loop: this thread's next request number and period.
    next_k: u64,
    period_ns: f64,
    poll: AdaptivePoll,
}

/// The state of an adaptive poll (`LoadSpec::poll_budget`).
#[derive(Debug, Default)]
struct AdaptivePoll {
    /// Empty polls allowed per response, in milli-polls; 0: off.
    budget: u64,
    /// The most polls before a sleep.
    cap: u32,
    /// Polls to make before the next sleep.
    spin: u32,
    /// Empty polls that may still be made, in milli-polls: grows by
    /// `budget` per response, so that empty polls never exceed the
    /// budget per request over a run (plus one spin's worth).
    credit: u64,
    /// Responses seen when `credit` was last topped up.
    seen: u64,
}

const READ_BUF: usize = 128 * 1024;
/// Set once epoll_pwait2 answered ENOSYS: every later wait uses epoll_wait.
static NO_PWAIT2: AtomicBool = AtomicBool::new(false);
const MAX_EVENTS: usize = 256;
/// How often timeouts are looked for.
const SCAN_NS: u64 = 100_000_000;
/// Longest wait for in-flight requests after the run.
const MAX_DRAIN: Duration = Duration::from_secs(5);
/// A send later than this after its intended time counts as late.
const LATE_NS: u64 = 1_000_000;

impl<'a> Worker<'a> {
    fn new(spec: &'a LoadSpec, reqs: &'a Requests, n: usize, seed: u64) -> io::Result<Self> {
        // SAFETY: plain system call.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        let conns = (0..n)
            .map(|i| Conn {
                fd: -1,
                gen: 0,
                state: CState::Closed,
                origin: 0,
                started: 0,
                target: 0,
                written: 0,
                fresh: true,
                // Distinct non-zero states per connection.
                rng: (seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1,
                resp: Response::new(),
            })
            .collect();
        Ok(Worker {
            ep,
            conns,
            idle: Vec::with_capacity(n),
            reqs,
            spec,
            buf: vec![0; READ_BUF],
            events: vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS],
            measured: Counts::default(),
            total: Counts::default(),
            latency: Latency::new(),
            phases: Phases {
                start: 0,
                m0: 0,
                m1: 0,
                stop: 0,
            },
            open: OpenLoop::default(),
            next_k: 0,
            period_ns: 0.0,
            poll: AdaptivePoll {
                budget: (spec.poll_budget.max(0.0) * MILLI as f64) as u64,
                cap: if spec.spin_polls > 0 {
                    spec.spin_polls
                } else {
                    ADAPTIVE_MAX_POLLS
                },
                ..AdaptivePoll::default()
            },
        })
    }

    /// Opens the keep-alive connections before the start (blocking, with
    /// the request timeout), so the start barrier means "all connected".
    fn connect_all(&mut self) -> Result<(), LoadError> {
        if !self.spec.keep_alive {
            return Ok(());
        }
        for i in 0..self.conns.len() {
            let s = TcpStream::connect_timeout(&self.spec.addr, self.spec.timeout)
                .map_err(|e| LoadError::Connect(self.spec.addr, e))?;
            // The next request follows the previous response, which
            // acknowledged it, so Nagle would not delay it; NODELAY is set
            // anyway (as wrk) so a partial write never waits.
            s.set_nodelay(true)
                .and_then(|_| s.set_nonblocking(true))
                .map_err(|e| LoadError::Io("socket options", e))?;
            let fd = s.into_raw_fd();
            self.conns[i].fd = fd;
            self.conns[i].state = CState::Idle;
            self.register(i)
                .map_err(|e| LoadError::Io("epoll_ctl", e))?;
        }
        Ok(())
    }

    fn register(&mut self, i: usize) -> io::Result<()> {
        let c = &self.conns[i];
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET | libc::EPOLLRDHUP) as u32,
            u64: (i as u64) | (u64::from(c.gen) << 32),
        };
        // SAFETY: valid epoll fd and socket; `ev` outlives the call.
        if unsafe { libc::epoll_ctl(self.ep, libc::EPOLL_CTL_ADD, c.fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn close(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.fd >= 0 {
            // SAFETY: we own the fd; closing removes it from the epoll set.
            unsafe { libc::close(c.fd) };
            c.fd = -1;
        }
        c.gen = c.gen.wrapping_add(1);
        c.state = CState::Closed;
    }

    #[inline]
    fn in_window(&self, t: u64) -> bool {
        t >= self.phases.m0 && t < self.phases.m1
    }

    /// Starts a request on connection `i`; its latency counts from
    /// `intended` (open loop) or from now (closed loop).
    fn issue(&mut self, i: usize, intended: Option<u64>) {
        let now = now_ns();
        let draw = next_rand(&mut self.conns[i].rng);
        let target = self.reqs.pick(draw);
        {
            let c = &mut self.conns[i];
            c.origin = intended.unwrap_or(now);
            c.started = now;
            c.target = target as u32;
            c.written = 0;
            c.resp.reset();
        }
        self.total.sent += 1;
        if self.in_window(now) {
            self.measured.sent += 1;
        }
        if self.conns[i].fd < 0 {
            if self.open_socket(i).is_err() {
                self.fail(i, Fail::Connect, now);
                return;
            }
        } else {
            self.conns[i].state = CState::Writing;
        }
        self.write(i, now);
    }

    /// A non-blocking connect, registered for both directions.
    fn open_socket(&mut self, i: usize) -> Result<(), ()> {
        let fam = if self.spec.addr.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        // SAFETY: plain system calls on values we own.
        let fd = unsafe {
            libc::socket(
                fam,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if fd < 0 {
            return Err(());
        }
        let (sa, len) = sockaddr(&self.spec.addr);
        // SAFETY: `sa` is a valid sockaddr of `len` bytes.
        let rc = unsafe { libc::connect(fd, &sa as *const _ as *const libc::sockaddr, len) };
        if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINPROGRESS) {
            // SAFETY: our fd.
            unsafe { libc::close(fd) };
            return Err(());
        }
        self.conns[i].fd = fd;
        self.conns[i].gen = self.conns[i].gen.wrapping_add(1);
        if self.register(i).is_err() {
            self.close(i);
            return Err(());
        }
        self.conns[i].state = CState::Connecting;
        self.conns[i].fresh = true;
        Ok(())
    }

    /// Writes (the rest of) the request; waits for the writable edge on
    /// `EAGAIN` (also while a connect is still in progress).
    fn write(&mut self, i: usize, now: u64) {
        let (start, len) = self.reqs.spans[self.conns[i].target as usize];
        let c = &mut self.conns[i];
        let rest = &self.reqs.text[start + c.written..start + len];
        // SAFETY: `rest` is valid for its length; MSG_NOSIGNAL: a closed
        // peer yields EPIPE, not SIGPIPE.
        let n = unsafe {
            libc::send(
                c.fd,
                rest.as_ptr() as *const libc::c_void,
                rest.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            c.written += n as usize;
            if c.written == len {
                c.state = CState::Reading;
            } else {
                c.state = CState::Writing;
            }
            return;
        }
        let err = io::Error::last_os_error().raw_os_error();
        match err {
            Some(libc::EAGAIN) | Some(libc::EINTR) => {}
            _ if self.conns[i].state == CState::Connecting => self.fail(i, Fail::Connect, now),
            // A reused keep-alive connection the server closed while it
            // was idle: send again on a new one (not an error of this
            // request; the server never saw it).
            Some(libc::EPIPE) | Some(libc::ECONNRESET) if !self.conns[i].fresh => {
                self.reopen_and_write(i, now)
            }
            _ => self.fail(i, Fail::Other, now),
        }
    }

    fn reopen_and_write(&mut self, i: usize, now: u64) {
        self.close(i);
        if self.open_socket(i).is_err() {
            self.fail(i, Fail::Connect, now);
            return;
        }
        self.conns[i].written = 0;
        self.conns[i].resp.reset();
        self.write(i, now);
    }

    /// Handles one readiness event.
    fn event(&mut self, i: usize, ev: u32, now: u64) {
        let err = ev & (libc::EPOLLERR as u32 | libc::EPOLLHUP as u32) != 0;
        match self.conns[i].state {
            CState::Connecting | CState::Writing => {
                if err && self.conns[i].state == CState::Connecting {
                    self.fail(i, Fail::Connect, now);
                } else if ev & (libc::EPOLLOUT as u32 | libc::EPOLLERR as u32) != 0 {
                    self.write(i, now);
                }
                // A response can start arriving only after the request.
                if self.conns[i].state == CState::Reading && ev & (libc::EPOLLIN as u32) != 0 {
                    self.read(i, now);
                }
            }
            CState::Reading => self.read(i, now),
            CState::Idle => {
                // The server closed an idle keep-alive connection (its
                // keep-alive timeout or request limit): reopen lazily.
                if ev & (libc::EPOLLIN as u32 | libc::EPOLLRDHUP as u32 | libc::EPOLLHUP as u32)
                    != 0
                {
                    self.close_idle(i);
                }
            }
            CState::Closed => {}
        }
    }

    /// Closes an idle connection the server ended; the slot stays idle
    /// (open loop: in the idle stack) and reconnects on its next request.
    fn close_idle(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.fd >= 0 {
            // SAFETY: our fd.
            unsafe { libc::close(c.fd) };
            c.fd = -1;
        }
        c.gen = c.gen.wrapping_add(1);
        c.state = CState::Idle;
    }

    fn read(&mut self, i: usize, now: u64) {
        loop {
            let fd = self.conns[i].fd;
            let want = self.conns[i].resp.body_remaining().min(READ_BUF as u64) as usize;
            if want > 0 {
                // The rest of a Content-Length body: discard it in the
                // kernel. TCP's MSG_TRUNC drops the bytes from the receive
                // queue without copying them (tcp(7)), and `want` never
                // reaches past this response. The buffer is passed only
                // for the length check; nothing is written into it.
                // SAFETY: the buffer is ours and valid for `want` bytes.
                let n = unsafe {
                    libc::recv(
                        fd,
                        self.buf.as_mut_ptr() as *mut libc::c_void,
                        want,
                        libc::MSG_TRUNC,
                    )
                };
                if n > 0 {
                    let n = n as usize;
                    if self.conns[i].resp.skip_body(n as u64) == Progress::Done {
                        return self.complete(i, now);
                    }
                    if n < want {
                        return; // drained
                    }
                    continue;
                }
                if n == 0 {
                    return self.fail(i, Fail::Short, now);
                }
                let e = io::Error::last_os_error().raw_os_error();
                if e == Some(libc::EAGAIN) || e == Some(libc::EINTR) {
                    return;
                }
                return self.fail(i, Fail::Other, now);
            }
            // SAFETY: the buffer is ours and valid for its length.
            let n = unsafe { libc::read(fd, self.buf.as_mut_ptr() as *mut libc::c_void, READ_BUF) };
            if n > 0 {
                let n = n as usize;
                match self.conns[i].resp.feed(&self.buf[..n]) {
                    Ok(Progress::Done) => return self.complete(i, now),
                    Ok(Progress::More) => {
                        if n < READ_BUF {
                            // Drained: the next arrival raises a new edge.
                            return;
                        }
                    }
                    Err(_) => return self.fail(i, Fail::Other, now),
                }
            } else if n == 0 {
                return match self.conns[i].resp.eof() {
                    Progress::Done => self.complete(i, now),
                    Progress::More if self.conns[i].resp.untouched() && !self.conns[i].fresh => {
                        // The server closed a reused keep-alive connection
                        // before reading our request (a race with its idle
                        // timeout): resend on a new connection, as browsers
                        // and wrk do.
                        self.reopen_and_write(i, now)
                    }
                    Progress::More if self.conns[i].resp.untouched() => {
                        self.fail(i, Fail::Other, now)
                    }
                    Progress::More => self.fail(i, Fail::Short, now),
                };
            } else {
                let e = io::Error::last_os_error().raw_os_error();
                if e == Some(libc::EAGAIN) || e == Some(libc::EINTR) {
                    return;
                }
                return self.fail(i, Fail::Other, now);
            }
        }
    }

    /// A complete response.
    fn complete(&mut self, i: usize, now: u64) {
        let c = &self.conns[i];
        let r = &c.resp;
        let expected = self.reqs.sizes[c.target as usize];
        let mut d = Counts {
            responses: 1,
            bytes: r.wire_bytes,
            body_bytes: r.body_bytes,
            ..Counts::default()
        };
        if r.status >= 400 {
            d.err_status = 1;
        } else if expected != u64::MAX && r.body_bytes != expected {
            d.err_short = 1;
        } else {
            d.ok = 1;
        }
        let keep = r.keep_alive && self.spec.keep_alive;
        let lat = now.saturating_sub(c.origin);
        self.total.add(&d);
        if self.in_window(now) {
            self.measured.add(&d);
            self.latency.record(lat);
        }
        if keep {
            self.conns[i].state = CState::Idle;
            self.conns[i].fresh = false;
        } else {
            self.close(i);
        }
        self.next(i, now, true);
    }

    /// A failed request: counted, its connection closed.
    fn fail(&mut self, i: usize, why: Fail, now: u64) {
        // A partial response still moved bytes the server counted.
        let (bytes, body) = (self.conns[i].resp.wire_bytes, self.conns[i].resp.body_bytes);
        let mut d = Counts {
            bytes,
            body_bytes: body,
            ..Counts::default()
        };
        match why {
            Fail::Connect => d.err_connect = 1,
            Fail::Timeout => d.err_timeout = 1,
            Fail::Short => d.err_short = 1,
            Fail::Other => d.err_other = 1,
        }
        self.total.add(&d);
        if self.in_window(now) {
            self.measured.add(&d);
        }
        self.close(i);
        self.conns[i].resp.reset();
        self.next(i, now, false);
    }

    /// After a request ended: closed loop sends the next at once after a
    /// response (`again`), open loop returns the connection to the idle
    /// stack. After a failure the closed loop also parks the connection
    /// there and the main loop retries it: retrying inside `fail` would
    /// recurse without bound against a server that refuses connections.
    fn next(&mut self, i: usize, now: u64, again: bool) {
        if self.conns[i].state == CState::Closed && self.spec.keep_alive {
            // Reconnects on its next request.
            self.conns[i].state = CState::Idle;
        }
        if self.period_ns > 0.0 || !again {
            self.idle.push(i as u32);
        } else if now < self.phases.stop {
            self.issue(i, None);
        }
    }

    /// Intended time of this thread's request `k`.
    #[inline]
    fn intended(&self, k: u64) -> u64 {
        self.phases.start + (k as f64 * self.period_ns) as u64
    }

    /// Open loop: sends every request whose time has come, while a
    /// connection is free; the rest wait (their latency still counts from
    /// their intended time, so waiting for a connection is measured).
    fn dispatch(&mut self, now: u64) {
        loop {
            let t = self.intended(self.next_k);
            if t > now || t >= self.phases.stop {
                return;
            }
            let Some(i) = self.idle.pop() else { return };
            let lag = now - t;
            self.open.max_lag_ns = self.open.max_lag_ns.max(lag);
            if lag > LATE_NS {
                self.open.late += 1;
            }
            // Counted by the actual send time: a generator that stalls
            // and then catches up late sends fewer requests inside the
            // interval than were scheduled there.
            if self.in_window(now) {
                self.open.sent += 1;
            }
            self.next_k += 1;
            self.issue(i as usize, Some(t));
        }
    }

    fn busy(&self) -> bool {
        self.conns.iter().any(|c| {
            matches!(
                c.state,
                CState::Connecting | CState::Writing | CState::Reading
            )
        })
    }

    /// Fails requests older than the timeout.
    fn scan_timeouts(&mut self, now: u64) {
        let limit = self.spec.timeout.as_nanos() as u64;
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if matches!(
                c.state,
                CState::Connecting | CState::Writing | CState::Reading
            ) && now.saturating_sub(c.started) > limit
            {
                let why = if c.state == CState::Connecting {
                    Fail::Connect
                } else {
                    Fail::Timeout
                };
                self.fail(i, why, now);
            }
        }
    }

    fn wait(&mut self, timeout_ns: u64) -> usize {
        if NO_PWAIT2.load(Ordering::Relaxed) {
            return self.wait_ms(timeout_ns);
        }
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        // epoll_pwait2 takes a ns timeout: at 20 000 req/s a thread sends
        // every 100 µs, finer than epoll_wait's milliseconds.
        // SAFETY: the events buffer is ours; `ts` outlives the call.
        let n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                self.ep,
                self.events.as_mut_ptr(),
                MAX_EVENTS as libc::c_int,
                &ts as *const libc::timespec,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        };
        if n >= 0 {
            return n as usize;
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
            return 0;
        }
        NO_PWAIT2.store(true, Ordering::Relaxed);
        self.wait_ms(timeout_ns)
    }

    /// Polls `spin_polls` times before sleeping for up to `timeout_ns`.
    ///
    /// Why spin at all: a server that answers a sleeping generator must
    /// wake it, and where an idle CPU halts (a virtual machine whose guest
    /// does not poll before halting: `haltpoll.guest_halt_poll_ns=0`, as on
    /// the machine the figures in `docs/web.md` come from) that wake-up is
    /// an interprocessor interrupt, a VM exit paid on the *server's* CPU.
    /// A generator that is cheap per request sleeps more often than one
    /// that is not, and so slows a CPU-bound server more. A few polls
    /// catch most responses that arrive just after a batch, at the price
    /// of generator CPU; off by default, because where generator and
    /// server share cores a spinning generator takes CPU from the server.
    fn wait_spinning(&mut self, timeout_ns: u64) -> usize {
        if self.poll.budget > 0 {
            return self.wait_adaptive(timeout_ns);
        }
        if timeout_ns > 0 {
            for _ in 0..self.spec.spin_polls {
                let n = self.wait(0);
                if n > 0 {
                    return n;
                }
            }
        }
        self.wait(timeout_ns)
    }

    /// Polls up to the adaptive poll's current count (within its budget)
    /// before sleeping for up to `timeout_ns`, and adapts the count: a
    /// poll that finds responses doubles it, a spin that finds none halves
    /// it, and a sleep that a response ended within [`QUICK_WAKE_NS`]
    /// (which more polls would have caught) doubles it (from 0 to 1).
    /// Every poll that finds something replaces the sleep's call, so only
    /// empty polls add system calls, and the budget bounds those per
    /// response.
    fn wait_adaptive(&mut self, timeout_ns: u64) -> usize {
        if timeout_ns == 0 {
            return self.wait(0);
        }
        let p = &mut self.poll;
        let responses = self.total.responses;
        p.credit = (p.credit + (responses - p.seen) * p.budget).min(u64::from(p.cap) * MILLI);
        p.seen = responses;
        let mut polls = 0;
        while polls < self.poll.spin && self.poll.credit >= MILLI {
            let n = self.wait(0);
            if n > 0 {
                self.poll.spin = (self.poll.spin * 2).min(self.poll.cap);
                return n;
            }
            self.poll.credit -= MILLI;
            polls += 1;
        }
        self.poll.spin /= 2;
        let t0 = now_ns();
        let n = self.wait(timeout_ns);
        if n > 0 && now_ns() - t0 < QUICK_WAKE_NS {
            self.poll.spin = (self.poll.spin * 2).clamp(1, self.poll.cap);
        }
        n
    }

    /// Kernels before 5.11 (and valgrind, with which the generator's
    /// instructions per request are counted) lack epoll_pwait2: wait in
    /// whole milliseconds, rounded up so that a short timeout does not
    /// become a busy loop.
    fn wait_ms(&mut self, timeout_ns: u64) -> usize {
        let ms = timeout_ns.div_ceil(1_000_000).min(i32::MAX as u64) as libc::c_int;
        // SAFETY: as above.
        let n = unsafe {
            libc::epoll_wait(
                self.ep,
                self.events.as_mut_ptr(),
                MAX_EVENTS as libc::c_int,
                ms,
            )
        };
        n.max(0) as usize
    }

    /// The measured loop.
    fn run(&mut self, abort: &AtomicBool) -> u64 {
        let open = self.period_ns > 0.0;
        if open {
            self.idle.extend((0..self.conns.len() as u32).rev());
        } else {
            for i in 0..self.conns.len() {
                self.issue(i, None);
            }
        }
        let drain_end = self.phases.stop + self.spec.timeout.min(MAX_DRAIN).as_nanos() as u64;
        let mut next_scan = now_ns() + SCAN_NS;
        let mut now = now_ns();
        let cost = benchlab_core::cost::LoopCost::start();
        loop {
            if open {
                self.dispatch(now);
            } else if now < self.phases.stop {
                // Closed loop: retry connections parked after a failure
                // (once per wake-up: a retry that fails parks again).
                for _ in 0..self.idle.len() {
                    let i = self.idle.remove(0);
                    self.issue(i as usize, None);
                }
            }
            if now >= self.phases.stop && (!self.busy() || now >= drain_end) {
                break;
            }
            if abort.load(Ordering::Relaxed) {
                break;
            }
            if now >= next_scan {
                self.scan_timeouts(now);
                next_scan = now + SCAN_NS;
            }
            let mut until = next_scan.min(if now < self.phases.stop {
                self.phases.stop
            } else {
                drain_end
            });
            if !self.idle.is_empty() && now < self.phases.stop {
                until = until.min(if open {
                    self.intended(self.next_k)
                } else {
                    now
                });
            }
            let n = self.wait_spinning(until.saturating_sub(now));
            now = now_ns();
            for e in 0..n {
                let ev = self.events[e];
                let (data, bits) = (ev.u64, ev.events);
                let i = (data & 0xffff_ffff) as usize;
                if self.conns[i].gen != (data >> 32) as u32 {
                    continue; // a socket closed earlier in this batch
                }
                self.event(i, bits, now);
            }
        }
        cost.end("web.load worker", self.total.responses);
        let in_flight = self
            .conns
            .iter()
            .filter(|c| {
                matches!(
                    c.state,
                    CState::Connecting | CState::Writing | CState::Reading
                )
            })
            .count() as u64;
        for i in 0..self.conns.len() {
            self.close(i);
        }
        in_flight
    }
}

impl Drop for Worker<'_> {
    fn drop(&mut self) {
        for i in 0..self.conns.len() {
            self.close(i);
        }
        // SAFETY: our epoll fd.
        unsafe { libc::close(self.ep) };
    }
}

/// The socket address in C form.
fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in6.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// What one worker hands back.
struct WorkerOut {
    measured: Counts,
    total: Counts,
    latency: Latency,
    open: OpenLoop,
    in_flight: u64,
}

/// Runs the load. `gate` is called once every connection is open (every
/// keep-alive connection connected), and must return at the common start
/// instant (the clients-axis barrier across generator hosts). `abort`
/// stops the run early (the result is then `Aborted`).
pub fn run(
    spec: &LoadSpec,
    abort: &AtomicBool,
    gate: &dyn Fn() -> Result<(), String>,
) -> Result<LoadResult, LoadError> {
    if spec.connections == 0 {
        return Err(LoadError::Spec("at least one connection is needed".into()));
    }
    if spec.measure.is_zero() {
        return Err(LoadError::Spec("the measured interval is empty".into()));
    }
    if let Pace::Open { rate_per_s } = spec.pace {
        if rate_per_s.is_nan() || rate_per_s <= 0.0 || rate_per_s.is_infinite() {
            return Err(LoadError::Spec(format!(
                "the open-loop rate must be a positive number of requests/s, got {rate_per_s}"
            )));
        }
    }
    let reqs = Requests::build(spec)?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let threads = if spec.threads == 0 {
        cpus
    } else {
        spec.threads
    }
    .clamp(1, spec.connections);
    let base = spec.connections / threads;
    let extra = spec.connections % threads;

    // Two barriers: all workers connected → gate → start instant published
    // → all go.
    let connected = Barrier::new(threads as usize + 1);
    let go = Barrier::new(threads as usize + 1);
    let start_at = AtomicU64::new(0);
    let setup_failed = AtomicBool::new(false);
    let stop_all = Arc::new(AtomicBool::new(false));

    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for t in 0..threads {
            let n = (base + u32::from(t < extra)) as usize;
            let (reqs, connected, go, start_at, setup_failed) =
                (&reqs, &connected, &go, &start_at, &setup_failed);
            let stop_all = stop_all.clone();
            handles.push(s.spawn(move || -> Result<WorkerOut, LoadError> {
                // Timer slack (default 50 µs) would bunch open-loop sends.
                // SAFETY: prctl on the calling thread.
                unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
                let seed = spec.seed ^ (u64::from(t) << 48);
                let mut w = match Worker::new(spec, reqs, n, seed) {
                    Ok(w) => w,
                    Err(e) => {
                        setup_failed.store(true, Ordering::SeqCst);
                        connected.wait();
                        go.wait();
                        return Err(LoadError::Io("epoll_create1", e));
                    }
                };
                let setup = w.connect_all();
                if setup.is_err() {
                    setup_failed.store(true, Ordering::SeqCst);
                }
                connected.wait();
                go.wait();
                setup?;
                let start = start_at.load(Ordering::SeqCst);
                if start == 0 {
                    return Err(LoadError::Aborted);
                }
                let ns = |d: Duration| d.as_nanos() as u64;
                w.phases = Phases {
                    start,
                    m0: start + ns(spec.ramp_up),
                    m1: start + ns(spec.ramp_up) + ns(spec.measure),
                    stop: start + ns(spec.ramp_up) + ns(spec.measure) + ns(spec.ramp_down),
                };
                if let Pace::Open { rate_per_s } = spec.pace {
                    let share = rate_per_s * n as f64 / f64::from(spec.connections);
                    w.period_ns = 1e9 / share;
                    // Stagger threads by a fraction of a period so their
                    // sends interleave instead of coinciding.
                    w.phases.start += (w.period_ns * f64::from(t) / f64::from(threads)) as u64;
                }
                let in_flight = w.run(&stop_all);
                if let Pace::Open { .. } = spec.pace {
                    let scheduled = scheduled_between(&w, w.phases.m0, w.phases.m1);
                    w.open.scheduled = scheduled;
                }
                Ok(WorkerOut {
                    measured: w.measured,
                    total: w.total,
                    latency: std::mem::take(&mut w.latency),
                    open: w.open,
                    in_flight,
                })
            }));
        }

        connected.wait();
        let gate_res = if setup_failed.load(Ordering::SeqCst) {
            Ok(())
        } else {
            gate().map_err(LoadError::Gate)
        };
        let start = now_ns();
        if gate_res.is_ok() && !setup_failed.load(Ordering::SeqCst) {
            start_at.store(start, Ordering::SeqCst);
        }
        go.wait();

        // The controlling thread watches the phases and the abort flag,
        // and snapshots the process CPU around the measured interval.
        let m0 = start + spec.ramp_up.as_nanos() as u64;
        let m1 = m0 + spec.measure.as_nanos() as u64;
        let mut cpu0 = None;
        let mut cpu = None;
        if start_at.load(Ordering::SeqCst) != 0 {
            loop {
                let now = now_ns();
                if abort.load(Ordering::Relaxed) {
                    stop_all.store(true, Ordering::Relaxed);
                    break;
                }
                if cpu0.is_none() && now >= m0 {
                    cpu0 = Some(CpuSnapshot::take());
                }
                if now >= m1 {
                    let c1 = CpuSnapshot::take();
                    cpu = cpu0.as_ref().map(|c0| c0.usage_until(&c1));
                    break;
                }
                let next = if cpu0.is_none() { m0 } else { m1 };
                let nap = (next - now).min(50_000_000);
                std::thread::sleep(Duration::from_nanos(nap));
            }
        }
        // Wait for the workers, still watching the abort flag.
        while !handles.iter().all(|h| h.is_finished()) {
            if abort.load(Ordering::Relaxed) {
                stop_all.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut outs = Vec::new();
        let mut first_err = None;
        for h in handles {
            match h.join().expect("generator thread panicked") {
                Ok(o) => outs.push(o),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        gate_res?;
        if let Some(e) = first_err {
            return Err(e);
        }
        if abort.load(Ordering::Relaxed) {
            return Err(LoadError::Aborted);
        }
        let mut r = LoadResult {
            measured: Counts::default(),
            total: Counts::default(),
            latency: Latency::new(),
            measure_s: spec.measure.as_secs_f64(),
            in_flight_at_end: 0,
            open: match spec.pace {
                Pace::Open { rate_per_s } => Some(OpenLoop {
                    rate_per_s,
                    ..OpenLoop::default()
                }),
                Pace::Closed => None,
            },
            cpu: cpu.unwrap_or_default(),
            threads,
        };
        for o in &outs {
            r.measured.add(&o.measured);
            r.total.add(&o.total);
            r.latency.merge(&o.latency);
            r.in_flight_at_end += o.in_flight;
            if let Some(ol) = r.open.as_mut() {
                ol.scheduled += o.open.scheduled;
                ol.sent += o.open.sent;
                ol.max_lag_ns = ol.max_lag_ns.max(o.open.max_lag_ns);
                ol.late += o.open.late;
            }
        }
        Ok(r)
    })
}

/// How many of the worker's scheduled requests fall in `[a, b)` (and
/// before its stop).
fn scheduled_between(w: &Worker, a: u64, b: u64) -> u64 {
    let b = b.min(w.phases.stop);
    // First k with intended(k) >= x.
    let first = |x: u64| -> u64 {
        if x <= w.phases.start {
            return 0;
        }
        let mut k = ((x - w.phases.start) as f64 / w.period_ns).floor() as u64;
        while w.intended(k) < x {
            k += 1;
        }
        while k > 0 && w.intended(k - 1) >= x {
            k -= 1;
        }
        k
    };
    first(b).saturating_sub(first(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(targets: Vec<Target>) -> LoadSpec {
        LoadSpec {
            addr: "127.0.0.1:1".parse().unwrap(),
            host: "h".into(),
            targets,
            connections: 1,
            threads: 1,
            keep_alive: true,
            version: HttpVersion::V11,
            pace: Pace::Closed,
            ramp_up: Duration::ZERO,
            measure: Duration::from_secs(1),
            ramp_down: Duration::ZERO,
            timeout: Duration::from_secs(1),
            seed: 1,
            spin_polls: 0,
            poll_budget: 0.0,
        }
    }

    #[test]
    fn mix_follows_weights() {
        let t = |p: &str, w| Target {
            path: p.into(),
            size: None,
            weight: w,
        };
        let r = Requests::build(&spec(vec![
            t("/a", 35.0),
            t("/b", 50.0),
            t("/c", 14.0),
            t("/d", 1.0),
        ]))
        .unwrap();
        let mut rng = 7u64;
        let mut n = [0u32; 4];
        for _ in 0..100_000 {
            n[r.pick(next_rand(&mut rng))] += 1;
        }
        // Binomial sd at 100 000 draws is < 160; 1 000 is > 6 sd.
        for (got, want) in n.iter().zip([35_000, 50_000, 14_000, 1_000]) {
            assert!((*got as i64 - want).abs() < 1000, "{n:?}");
        }
    }

    #[test]
    fn request_text_by_version() {
        let t = vec![Target {
            path: "/x".into(),
            size: None,
            weight: 1.0,
        }];
        let mut s = spec(t);
        s.keep_alive = false;
        s.version = HttpVersion::V10;
        let r = Requests::build(&s).unwrap();
        assert_eq!(
            std::str::from_utf8(&r.text).unwrap(),
            "GET /x HTTP/1.0\r\nHost: h\r\nUser-Agent: benchlab\r\n\r\n"
        );
        s.version = HttpVersion::V11;
        let r = Requests::build(&s).unwrap();
        assert!(std::str::from_utf8(&r.text)
            .unwrap()
            .contains("HTTP/1.1\r\nHost: h\r\nUser-Agent: benchlab\r\nConnection: close\r\n\r\n"));
    }

    #[test]
    fn bad_specs_are_refused() {
        let mut s = spec(vec![Target {
            path: "no-slash".into(),
            size: None,
            weight: 1.0,
        }]);
        assert!(matches!(Requests::build(&s), Err(LoadError::Spec(_))));
        s.targets.clear();
        assert!(matches!(Requests::build(&s), Err(LoadError::Spec(_))));
    }

    #[test]
    fn refused_connection_fails_before_start() {
        // Port 1 on loopback has no listener here.
        let s = spec(vec![Target {
            path: "/".into(),
            size: None,
            weight: 1.0,
        }]);
        let err = run(&s, &AtomicBool::new(false), &|| Ok(())).err().unwrap();
        assert!(matches!(err, LoadError::Connect(..)), "{err}");
    }

    #[test]
    fn refused_requests_count_as_connect_errors() {
        let mut s = spec(vec![Target {
            path: "/".into(),
            size: None,
            weight: 1.0,
        }]);
        s.keep_alive = false;
        s.measure = Duration::from_millis(200);
        let r = run(&s, &AtomicBool::new(false), &|| Ok(())).unwrap();
        assert_eq!(r.measured.ok, 0);
        assert!(r.measured.err_connect > 0);
        assert_eq!(r.measured.errors(), r.measured.err_connect);
    }
}
