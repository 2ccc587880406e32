//! A delaying relay: stands in for netem's `delay` on kernels without netem.
//!
//! The relay listens on [`RelayConfig::listen`] and forwards to
//! [`RelayConfig::upstream`]. Every TCP chunk it reads from one side, and
//! every UDP datagram, is held until `arrival + delay` and then written to the
//! other side, in order, per direction. A round trip through the relay so
//! gains `2 × delay`. Put the relay where the delay belongs: clients connect
//! to the relay's address instead of the server's (with a test bed, start it
//! inside a host's namespace with [`crate::in_netns`]).
//!
//! - **TCP**: one upstream connection per accepted connection, both with
//!   `TCP_NODELAY` (the relay must not add Nagle's delay). When one side's
//!   read returns end-of-file, the relay shuts down writing towards the other
//!   side once the queued chunks (and the end-of-file itself, held like a
//!   chunk) are delivered: half-close is propagated. A read error or a failed
//!   write closes the connection both ways. If upstream cannot be reached,
//!   the client's connection is closed. The listener sets `SO_REUSEADDR`, so a
//!   relay restarted on a fixed port does not wait for `TIME_WAIT`.
//! - **UDP**: per client source address, a socket connected to upstream;
//!   what upstream sends back on it is relayed to that client from the
//!   listening socket. Sessions last until [`RelayHandle::stop`]; at most
//!   [`MAX_UDP_SESSIONS`] at once (datagrams from further clients are dropped
//!   and counted in `flow_errors`). The UDP socket does not set
//!   `SO_REUSEADDR`: on Linux that would let a second relay bind the same
//!   port and silently take some of its datagrams.
//!
//! ## What it does not emulate
//!
//! netem delays packets inside one TCP connection; the relay splits it into
//! two. The connection handshake is not delayed (the client's `connect`
//! completes at once), and each leg's congestion control sees a loopback-
//! or veth-short RTT, so bulk throughput is not limited by `rate × RTT` the
//! way a long link limits it. Request/response latency, the thing the relay
//! is for, gains exactly the delay. Queued data per direction is bounded
//! ([`QUEUE_CHUNKS`] chunks of up to [`TCP_CHUNK_BYTES`] for TCP), after
//! which the relay stops reading and TCP's flow control pushes back.
//!
//! ## Accuracy and cost
//!
//! A writer thread sleeps until [`SPIN`] before the deadline, then spins on
//! the clock: sleeping all the way would be late by the wake-up latency
//! (tens of µs, more under load), and a pure spin would burn a core for the
//! whole delay. Writer threads set their timer slack to 1 ns
//! (`PR_SET_TIMERSLACK`; the default 50 µs would make every sleep up to
//! 50 µs late). The cost is up to `SPIN` of one core's time per chunk or
//! datagram: at 2 500 round trips/s through a relay, two chunks each, that is
//! up to 1 s of CPU per second, i.e. one core; bulk transfers are cheap,
//! since one 64 KiB chunk costs the same spin as one byte.
//!
//! [`RelayStats`] records, per protocol and direction, the hold actually
//! applied to each chunk: the instant the write starts minus the instant the
//! read returned. It is the ground truth for tests. It does not include the
//! kernel's time before the read returned (the reader thread's wake-up) nor
//! after the write, so the delay seen end to end is slightly larger (here:
//! median hold 2.0009 ms for a 2 ms delay, round trip 4.09 ms). Under
//! backpressure (a receiver slower than the sender) a chunk also waits for
//! the write of the chunk before it, and that wait counts as hold too: in
//! bulk transfers holds exceed the delay, as queueing would on a real link.
//!
//! Threads: one accepting TCP connections, four per TCP connection (a
//! reader and a writer per direction), and for UDP one reading clients, one
//! per client session reading upstream, and one writer per direction.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, Socket, Type};

/// How long before a deadline a writer stops sleeping and spins: longer
/// than a thread's wake-up latency on a busy two-core VM (measured 40–80 µs
/// here; with 50 µs the holds came out 15 µs long on average).
pub const SPIN: Duration = Duration::from_micros(200);
/// How often idle threads look at the stop flag; bounds how long
/// [`RelayHandle::stop`] takes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Largest TCP chunk read at once.
pub const TCP_CHUNK_BYTES: usize = 64 * 1024;
/// Chunks (or datagrams) queued per direction before the reader waits.
pub const QUEUE_CHUNKS: usize = 1024;
/// Most UDP client sessions at once.
pub const MAX_UDP_SESSIONS: usize = 1024;
/// How long the relay waits for an upstream TCP connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Which protocols the relay carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RelayProtocol {
    /// TCP only.
    Tcp,
    /// UDP only.
    Udp,
    /// TCP and UDP on the same port.
    Both,
}

impl RelayProtocol {
    fn tcp(self) -> bool {
        matches!(self, RelayProtocol::Tcp | RelayProtocol::Both)
    }
    fn udp(self) -> bool {
        matches!(self, RelayProtocol::Udp | RelayProtocol::Both)
    }
}

/// What to relay, where, and how late.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayConfig {
    /// Address to listen on; port 0 picks one ([`RelayHandle::local_addr`]).
    pub listen: SocketAddr,
    /// Where to forward to.
    pub upstream: SocketAddr,
    /// Hold applied to every chunk or datagram, per direction.
    pub delay: Duration,
    /// TCP, UDP or both.
    pub protocol: RelayProtocol,
}

/// Counters and hold times of one direction of one protocol.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// Chunks (TCP) or datagrams (UDP) written.
    pub chunks: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Shortest hold applied, ns (0 when nothing was relayed).
    pub hold_min_ns: u64,
    /// Mean hold, ns (exact).
    pub hold_mean_ns: f64,
    /// Median hold, ns (HDR histogram, 3 significant digits).
    pub hold_p50_ns: u64,
    /// 99th percentile of the hold, ns (same histogram).
    pub hold_p99_ns: u64,
    /// Longest hold applied, ns.
    pub hold_max_ns: u64,
    /// Writes that failed (the chunk was not delivered).
    pub write_errors: u64,
}

/// One protocol's share of [`RelayStats`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProtocolStats {
    /// TCP connections accepted, or UDP client sessions opened.
    pub flows: u64,
    /// TCP connections whose upstream could not be reached, or UDP
    /// datagrams dropped because no session could be opened.
    pub flow_errors: u64,
    /// Client → upstream.
    pub to_upstream: DirectionStats,
    /// Upstream → client.
    pub to_client: DirectionStats,
}

/// What a relay has done so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelayStats {
    /// The configured delay, ns.
    pub delay_ns: u64,
    /// TCP.
    pub tcp: ProtocolStats,
    /// UDP.
    pub udp: ProtocolStats,
}

// Indexes into `Shared::acc`.
const TCP_UP: usize = 0;
const TCP_DOWN: usize = 1;
const UDP_UP: usize = 2;
const UDP_DOWN: usize = 3;

struct DirAcc {
    chunks: u64,
    bytes: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
    hist: Histogram<u64>,
    write_errors: u64,
}

impl DirAcc {
    fn new() -> DirAcc {
        DirAcc {
            chunks: 0,
            bytes: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            hist: Histogram::new(3).expect("3 significant digits is valid"),
            write_errors: 0,
        }
    }

    fn record(&mut self, hold: Duration, bytes: usize) {
        let ns = u64::try_from(hold.as_nanos()).unwrap_or(u64::MAX);
        self.chunks += 1;
        self.bytes += bytes as u64;
        self.sum_ns += u128::from(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        // `Histogram::new` resizes itself as values grow; saturating is the
        // fallback should a resize fail.
        if self.hist.record(ns).is_err() {
            self.hist.saturating_record(ns);
        }
    }

    fn snapshot(&self) -> DirectionStats {
        if self.chunks == 0 {
            return DirectionStats {
                write_errors: self.write_errors,
                ..DirectionStats::default()
            };
        }
        DirectionStats {
            chunks: self.chunks,
            bytes: self.bytes,
            hold_min_ns: self.min_ns,
            hold_mean_ns: self.sum_ns as f64 / self.chunks as f64,
            hold_p50_ns: self.hist.value_at_quantile(0.5),
            hold_p99_ns: self.hist.value_at_quantile(0.99),
            hold_max_ns: self.max_ns,
            write_errors: self.write_errors,
        }
    }
}

struct Shared {
    id: u64,
    delay: Duration,
    stop: AtomicBool,
    acc: [Mutex<DirAcc>; 4],
    tcp_flows: AtomicU64,
    tcp_flow_errors: AtomicU64,
    udp_flows: AtomicU64,
    udp_flow_errors: AtomicU64,
    live_threads: AtomicUsize,
}

impl Shared {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn record(&self, dir: usize, hold: Duration, bytes: usize) {
        self.acc[dir]
            .lock()
            .expect("stats lock")
            .record(hold, bytes);
    }

    fn write_error(&self, dir: usize) {
        self.acc[dir].lock().expect("stats lock").write_errors += 1;
    }

    fn stats(&self) -> RelayStats {
        let dir = |i: usize| self.acc[i].lock().expect("stats lock").snapshot();
        RelayStats {
            delay_ns: u64::try_from(self.delay.as_nanos()).unwrap_or(u64::MAX),
            tcp: ProtocolStats {
                flows: self.tcp_flows.load(Ordering::Relaxed),
                flow_errors: self.tcp_flow_errors.load(Ordering::Relaxed),
                to_upstream: dir(TCP_UP),
                to_client: dir(TCP_DOWN),
            },
            udp: ProtocolStats {
                flows: self.udp_flows.load(Ordering::Relaxed),
                flow_errors: self.udp_flow_errors.load(Ordering::Relaxed),
                to_upstream: dir(UDP_UP),
                to_client: dir(UDP_DOWN),
            },
        }
    }

    /// Spawns a named thread that is counted in `live_threads` while it
    /// runs. Names are `rly<id>-<what>` (the kernel keeps 15 characters).
    fn spawn(
        self: &Arc<Self>,
        what: &str,
        f: impl FnOnce() + Send + 'static,
    ) -> io::Result<JoinHandle<()>> {
        struct Live(Arc<Shared>);
        impl Drop for Live {
            fn drop(&mut self) {
                self.0.live_threads.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.live_threads.fetch_add(1, Ordering::SeqCst);
        let live = Live(Arc::clone(self));
        let spawned = thread::Builder::new()
            .name(format!("rly{}-{what}", self.id))
            .spawn(move || {
                let _live = live;
                f()
            });
        spawned
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Makes this thread's sleeps end within ~1 ns of the requested time instead
/// of the default 50 µs slack.
fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Waits until `deadline`: sleeps until [`SPIN`] before it, then spins.
/// Returns false if the relay was stopped meanwhile.
fn hold_until(deadline: Instant, shared: &Shared) -> bool {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        if shared.stopped() {
            return false;
        }
        let left = deadline - now;
        if left > SPIN {
            thread::sleep((left - SPIN).min(POLL_INTERVAL));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Waits until `fd` is readable or `timeout` passes.
fn wait_readable(fd: libc::c_int, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, count 1.
    unsafe { libc::poll(&mut p, 1, timeout.as_millis() as libc::c_int) > 0 }
}

struct Conn {
    sockets: Vec<TcpStream>,
    threads: Vec<JoinHandle<()>>,
}

/// A running relay. Dropping it stops it too.
pub struct RelayHandle {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    threads: Vec<JoinHandle<()>>,
    conns: Arc<Mutex<Vec<Conn>>>,
    udp_sessions: Arc<Mutex<Vec<JoinHandle<()>>>>,
    stopped: bool,
}

impl RelayHandle {
    /// The address the relay listens on (the same port for TCP and UDP).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// What the relay has done so far.
    pub fn stats(&self) -> RelayStats {
        self.shared.stats()
    }

    /// Stops the relay: closes the listening sockets and every connection
    /// and session, joins every thread, and returns the final stats. Chunks
    /// still held are dropped.
    pub fn stop(mut self) -> RelayStats {
        self.shutdown();
        self.shared.stats()
    }

    fn shutdown(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.shared.stop.store(true, Ordering::SeqCst);
        // Listener and UDP threads first, so no new connection or session
        // appears while the others are closed.
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let conns = std::mem::take(&mut *self.conns.lock().expect("conns lock"));
        for c in &conns {
            for s in &c.sockets {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        for c in conns {
            for t in c.threads {
                let _ = t.join();
            }
        }
        let sessions = std::mem::take(&mut *self.udp_sessions.lock().expect("sessions lock"));
        for t in sessions {
            let _ = t.join();
        }
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for RelayHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayHandle")
            .field("local_addr", &self.local_addr)
            .field("delay", &self.shared.delay)
            .finish_non_exhaustive()
    }
}

fn tcp_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    sock.bind(&addr.into())?;
    sock.listen(1024)?;
    let listener: TcpListener = sock.into();
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Binds the listening sockets: with [`RelayProtocol::Both`] and port 0, a
/// port free for both TCP and UDP (a few tries).
fn bind(cfg: &RelayConfig) -> io::Result<(Option<TcpListener>, Option<UdpSocket>, SocketAddr)> {
    let mut tries = 0;
    loop {
        tries += 1;
        let tcp = if cfg.protocol.tcp() {
            Some(tcp_listener(cfg.listen)?)
        } else {
            None
        };
        let udp_addr = match &tcp {
            Some(l) => l.local_addr()?,
            None => cfg.listen,
        };
        let udp = if cfg.protocol.udp() {
            match UdpSocket::bind(udp_addr) {
                Ok(s) => Some(s),
                Err(e)
                    if e.kind() == io::ErrorKind::AddrInUse
                        && cfg.listen.port() == 0
                        && tries < 20 =>
                {
                    continue
                }
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        let local = match (&tcp, &udp) {
            (Some(l), _) => l.local_addr()?,
            (None, Some(u)) => u.local_addr()?,
            (None, None) => unreachable!("a protocol is always chosen"),
        };
        return Ok((tcp, udp, local));
    }
}

/// Starts a relay in background threads.
pub fn start(cfg: RelayConfig) -> io::Result<RelayHandle> {
    let (tcp, udp, local_addr) = bind(&cfg)?;
    let shared = Arc::new(Shared {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        delay: cfg.delay,
        stop: AtomicBool::new(false),
        acc: std::array::from_fn(|_| Mutex::new(DirAcc::new())),
        tcp_flows: AtomicU64::new(0),
        tcp_flow_errors: AtomicU64::new(0),
        udp_flows: AtomicU64::new(0),
        udp_flow_errors: AtomicU64::new(0),
        live_threads: AtomicUsize::new(0),
    });
    let mut handle = RelayHandle {
        shared: Arc::clone(&shared),
        local_addr,
        threads: Vec::new(),
        conns: Arc::new(Mutex::new(Vec::new())),
        udp_sessions: Arc::new(Mutex::new(Vec::new())),
        stopped: false,
    };
    // On an error below, dropping `handle` stops what was started.
    if let Some(listener) = tcp {
        let conns = Arc::clone(&handle.conns);
        let s = Arc::clone(&shared);
        let upstream = cfg.upstream;
        handle.threads.push(shared.spawn("accept", move || {
            tcp_accept_loop(&s, listener, upstream, &conns)
        })?);
    }
    if let Some(sock) = udp {
        start_udp(&shared, &mut handle, sock, cfg.upstream)?;
    }
    Ok(handle)
}

// ----- TCP ------------------------------------------------------------------

enum Msg {
    Data(Instant, Vec<u8>),
    Eof(Instant),
    Abort,
}

fn tcp_accept_loop(
    shared: &Arc<Shared>,
    listener: TcpListener,
    upstream: SocketAddr,
    conns: &Mutex<Vec<Conn>>,
) {
    while !shared.stopped() {
        if !wait_readable(listener.as_raw_fd(), POLL_INTERVAL) {
            continue;
        }
        let client = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            // Out of file descriptors and the like: the listener stays
            // readable, so pause rather than spin.
            Err(_) => {
                thread::sleep(POLL_INTERVAL);
                continue;
            }
        };
        shared.tcp_flows.fetch_add(1, Ordering::Relaxed);
        match tcp_connection(shared, client, upstream) {
            Ok(conn) => {
                let mut list = conns.lock().expect("conns lock");
                list.retain(|c| !c.threads.iter().all(JoinHandle::is_finished));
                list.push(conn);
            }
            Err(_) => {
                shared.tcp_flow_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn tcp_connection(
    shared: &Arc<Shared>,
    client: TcpStream,
    upstream: SocketAddr,
) -> io::Result<Conn> {
    client.set_nonblocking(false)?;
    let server = TcpStream::connect_timeout(&upstream, CONNECT_TIMEOUT)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let mut conn = Conn {
        sockets: vec![client.try_clone()?, server.try_clone()?],
        threads: Vec::new(),
    };
    let result = (|| -> io::Result<()> {
        for (src, dst, dir, tag) in [
            (&client, &server, TCP_UP, "up"),
            (&server, &client, TCP_DOWN, "dn"),
        ] {
            if shared.delay.is_zero() {
                // No hold: forward on the reading thread itself. Handing
                // each chunk to a writer thread would add a thread wake-up
                // (tens of µs) that a held chunk hides inside its delay, so
                // the relay's own overhead would differ between delay 0
                // and delay D, and a measured rise would fall short of D.
                let (c_src, c_dst) = (src.try_clone()?, dst.try_clone()?);
                let s = Arc::clone(shared);
                conn.threads.push(
                    shared.spawn(&format!("c{tag}"), move || tcp_copy(&s, c_src, c_dst, dir))?,
                );
                continue;
            }
            let (tx, rx) = mpsc::sync_channel(QUEUE_CHUNKS);
            let reader_src = src.try_clone()?;
            conn.threads
                .push(shared.spawn(&format!("r{tag}"), move || tcp_reader(reader_src, tx))?);
            let (w_src, w_dst) = (src.try_clone()?, dst.try_clone()?);
            let s = Arc::clone(shared);
            conn.threads.push(shared.spawn(&format!("w{tag}"), move || {
                tcp_writer(&s, rx, w_src, w_dst, dir)
            })?);
        }
        Ok(())
    })();
    if let Err(e) = result {
        for s in &conn.sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
        for t in conn.threads {
            let _ = t.join();
        }
        return Err(e);
    }
    Ok(conn)
}

/// Delay 0: read and write on one thread (see [`tcp_connection`]).
fn tcp_copy(shared: &Shared, mut src: TcpStream, mut dst: TcpStream, dir: usize) {
    let mut buf = vec![0u8; TCP_CHUNK_BYTES];
    loop {
        match src.read(&mut buf) {
            Ok(0) => {
                let _ = dst.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => {
                let arrival = Instant::now();
                if dst.write_all(&buf[..n]).is_err() {
                    shared.write_error(dir);
                    let _ = dst.shutdown(Shutdown::Both);
                    let _ = src.shutdown(Shutdown::Both);
                    return;
                }
                shared.record(dir, Instant::now() - arrival, n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                let _ = dst.shutdown(Shutdown::Both);
                let _ = src.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

fn tcp_reader(mut src: TcpStream, tx: SyncSender<Msg>) {
    let mut buf = vec![0u8; TCP_CHUNK_BYTES];
    loop {
        let msg = match src.read(&mut buf) {
            Ok(0) => Msg::Eof(Instant::now()),
            Ok(n) => Msg::Data(Instant::now(), buf[..n].to_vec()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => Msg::Abort,
        };
        let last = !matches!(msg, Msg::Data(..));
        if tx.send(msg).is_err() || last {
            return;
        }
    }
}

fn tcp_writer(shared: &Shared, rx: Receiver<Msg>, src: TcpStream, mut dst: TcpStream, dir: usize) {
    precise_timers();
    let delay = shared.delay;
    // Ends the whole connection: the other direction's reader sees EOF or an
    // error and winds its writer down in turn.
    let close_both = |dst: &TcpStream| {
        let _ = dst.shutdown(Shutdown::Both);
        let _ = src.shutdown(Shutdown::Both);
    };
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Data(arrival, data) => {
                if !hold_until(arrival + delay, shared) {
                    return;
                }
                let start = Instant::now();
                if dst.write_all(&data).is_err() {
                    shared.write_error(dir);
                    close_both(&dst);
                    return;
                }
                shared.record(dir, start - arrival, data.len());
            }
            Msg::Eof(arrival) => {
                if hold_until(arrival + delay, shared) {
                    let _ = dst.shutdown(Shutdown::Write);
                }
                return;
            }
            Msg::Abort => {
                close_both(&dst);
                return;
            }
        }
    }
}

// ----- UDP ------------------------------------------------------------------

type Datagram<T> = (Instant, T, Vec<u8>);

fn start_udp(
    shared: &Arc<Shared>,
    handle: &mut RelayHandle,
    sock: UdpSocket,
    upstream: SocketAddr,
) -> io::Result<()> {
    sock.set_read_timeout(Some(POLL_INTERVAL))?;
    let (up_tx, up_rx) = mpsc::sync_channel::<Datagram<Arc<UdpSocket>>>(QUEUE_CHUNKS);
    let (down_tx, down_rx) = mpsc::sync_channel::<Datagram<SocketAddr>>(QUEUE_CHUNKS);

    let s = Arc::clone(shared);
    handle.threads.push(shared.spawn("uwup", move || {
        udp_writer(&s, up_rx, UDP_UP, |sock: &Arc<UdpSocket>, data| {
            sock.send(data).map(drop)
        })
    })?);
    let s = Arc::clone(shared);
    let out = sock.try_clone()?;
    handle.threads.push(shared.spawn("uwdn", move || {
        udp_writer(&s, down_rx, UDP_DOWN, |client: &SocketAddr, data| {
            out.send_to(data, client).map(drop)
        })
    })?);
    let s = Arc::clone(shared);
    let sessions = Arc::clone(&handle.udp_sessions);
    handle.threads.push(shared.spawn("uin", move || {
        udp_ingress(&s, sock, upstream, up_tx, down_tx, &sessions)
    })?);
    Ok(())
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn udp_ingress(
    shared: &Arc<Shared>,
    sock: UdpSocket,
    upstream: SocketAddr,
    up_tx: SyncSender<Datagram<Arc<UdpSocket>>>,
    down_tx: SyncSender<Datagram<SocketAddr>>,
    threads: &Mutex<Vec<JoinHandle<()>>>,
) {
    let mut sessions: std::collections::HashMap<SocketAddr, Arc<UdpSocket>> =
        std::collections::HashMap::new();
    // Delay 0: forward on the receiving threads (see `tcp_connection` for
    // why), replies straight out of the listening socket.
    let inline = shared.delay.is_zero();
    let reply = match (inline, sock.try_clone()) {
        (true, Ok(s)) => Some(Arc::new(s)),
        _ => None,
    };
    let mut buf = vec![0u8; 65_536];
    while !shared.stopped() {
        let (n, client) = match sock.recv_from(&mut buf) {
            Ok(r) => r,
            Err(_) => continue,
        };
        let arrival = Instant::now();
        let session = match sessions.get(&client) {
            Some(s) => Arc::clone(s),
            None => {
                if sessions.len() >= MAX_UDP_SESSIONS {
                    shared.udp_flow_errors.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                match udp_session(
                    shared,
                    client,
                    upstream,
                    down_tx.clone(),
                    reply.clone(),
                    threads,
                ) {
                    Ok(s) => {
                        shared.udp_flows.fetch_add(1, Ordering::Relaxed);
                        sessions.insert(client, Arc::clone(&s));
                        s
                    }
                    Err(_) => {
                        shared.udp_flow_errors.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                }
            }
        };
        if reply.is_some() {
            match session.send(&buf[..n]) {
                Ok(_) => shared.record(UDP_UP, Instant::now() - arrival, n),
                Err(_) => shared.write_error(UDP_UP),
            }
            continue;
        }
        if up_tx.send((arrival, session, buf[..n].to_vec())).is_err() {
            return;
        }
    }
}

/// Opens the upstream socket of one client and the thread that relays its
/// replies.
fn udp_session(
    shared: &Arc<Shared>,
    client: SocketAddr,
    upstream: SocketAddr,
    down_tx: SyncSender<Datagram<SocketAddr>>,
    reply: Option<Arc<UdpSocket>>,
    threads: &Mutex<Vec<JoinHandle<()>>>,
) -> io::Result<Arc<UdpSocket>> {
    let any: SocketAddr = if upstream.is_ipv4() {
        "0.0.0.0:0".parse().expect("valid")
    } else {
        "[::]:0".parse().expect("valid")
    };
    let up = UdpSocket::bind(any)?;
    up.connect(upstream)?;
    up.set_read_timeout(Some(POLL_INTERVAL))?;
    let up = Arc::new(up);
    let reader = Arc::clone(&up);
    let s = Arc::clone(shared);
    let t = shared.spawn("usess", move || {
        let mut buf = vec![0u8; 65_536];
        while !s.stopped() {
            match reader.recv(&mut buf) {
                Ok(n) => {
                    let arrival = Instant::now();
                    if let Some(out) = &reply {
                        match out.send_to(&buf[..n], client) {
                            Ok(_) => s.record(UDP_DOWN, Instant::now() - arrival, n),
                            Err(_) => s.write_error(UDP_DOWN),
                        }
                        continue;
                    }
                    if down_tx.send((arrival, client, buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
                // Timeouts, and ECONNREFUSED from an ICMP port unreachable
                // while upstream is not (yet) listening: keep going.
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(_) => return,
            }
        }
    })?;
    threads.lock().expect("sessions lock").push(t);
    Ok(up)
}

fn udp_writer<T>(
    shared: &Shared,
    rx: Receiver<Datagram<T>>,
    dir: usize,
    send: impl Fn(&T, &[u8]) -> io::Result<()>,
) {
    precise_timers();
    loop {
        let (arrival, to, data) = match rx.recv_timeout(POLL_INTERVAL) {
            Ok(d) => d,
            Err(RecvTimeoutError::Timeout) if !shared.stopped() => continue,
            Err(_) => return,
        };
        if !hold_until(arrival + shared.delay, shared) {
            return;
        }
        let start = Instant::now();
        match send(&to, &data) {
            Ok(()) => shared.record(dir, start - arrival, data.len()),
            Err(_) => shared.write_error(dir),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELAY: Duration = Duration::from_millis(2);
    /// The tolerance the brief allows on the relay's median hold.
    const HOLD_SLACK: Duration = Duration::from_micros(200);

    fn localhost() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    /// A TCP echo server: echoes each connection until EOF, then closes.
    fn tcp_echo() -> (SocketAddr, JoinHandle<()>) {
        let l = TcpListener::bind(localhost()).unwrap();
        let addr = l.local_addr().unwrap();
        let t = thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { return };
                c.set_nodelay(true).unwrap();
                thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    loop {
                        match c.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if c.write_all(&buf[..n]).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        (addr, t)
    }

    /// A UDP echo server that stops after `timeout` of silence.
    fn udp_echo() -> SocketAddr {
        let s = UdpSocket::bind(localhost()).unwrap();
        let addr = s.local_addr().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok((n, from)) = s.recv_from(&mut buf) {
                let _ = s.send_to(&buf[..n], from);
            }
        });
        addr
    }

    fn relay(upstream: SocketAddr, delay: Duration, protocol: RelayProtocol) -> RelayHandle {
        start(RelayConfig {
            listen: localhost(),
            upstream,
            delay,
            protocol,
        })
        .unwrap()
    }

    fn median(mut v: Vec<Duration>) -> Duration {
        v.sort();
        v[v.len() / 2]
    }

    fn assert_holds(d: &DirectionStats, delay: Duration) {
        let p50 = Duration::from_nanos(d.hold_p50_ns);
        assert!(
            p50 >= delay && p50 <= delay + HOLD_SLACK,
            "median hold {p50:?} not within [{delay:?}, {:?}]: {d:?}",
            delay + HOLD_SLACK
        );
        assert!(Duration::from_nanos(d.hold_min_ns) >= delay, "{d:?}");
    }

    #[test]
    fn tcp_round_trips_gain_twice_the_delay() {
        let (echo, _t) = tcp_echo();
        let r = relay(echo, DELAY, RelayProtocol::Tcp);
        let mut c = TcpStream::connect(r.local_addr()).unwrap();
        c.set_nodelay(true).unwrap();
        let mut rtts = Vec::new();
        let mut sent = 0;
        for i in 0..20u8 {
            let msg = [i; 100];
            let t0 = Instant::now();
            c.write_all(&msg).unwrap();
            let mut back = [0u8; 100];
            c.read_exact(&mut back).unwrap();
            rtts.push(t0.elapsed());
            assert_eq!(back, msg);
            sent += msg.len() as u64;
        }
        let min = *rtts.iter().min().unwrap();
        let med = median(rtts);
        assert!(
            min >= 2 * DELAY,
            "a round trip took {min:?} < {:?}",
            2 * DELAY
        );
        // The fastest round trip bounds the delay from above: a median
        // takes every late wake-up of a loaded machine (seen > 2D + 2 ms at
        // a load of 14 on two cores), the fastest the least of them.
        assert!(
            min < 2 * DELAY + Duration::from_millis(1),
            "fastest round trip {min:?} (median {med:?})"
        );
        drop(c);
        let s = r.stop();
        assert_eq!(s.tcp.flows, 1);
        assert_eq!(s.tcp.to_upstream.bytes, sent);
        assert_eq!(s.tcp.to_client.bytes, sent);
        assert_holds(&s.tcp.to_upstream, DELAY);
        assert_holds(&s.tcp.to_client, DELAY);
        assert_eq!(s.udp, ProtocolStats::default());
        eprintln!("round trips: min {min:?}, median {med:?}; {:?}", s.tcp);
    }

    #[test]
    fn udp_round_trips_gain_twice_the_delay() {
        let echo = udp_echo();
        let r = relay(echo, DELAY, RelayProtocol::Udp);
        let c = UdpSocket::bind(localhost()).unwrap();
        c.connect(r.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut rtts = Vec::new();
        for i in 0..20u8 {
            let msg = [i; 64];
            let t0 = Instant::now();
            c.send(&msg).unwrap();
            let mut back = [0u8; 100];
            let n = c.recv(&mut back).unwrap();
            rtts.push(t0.elapsed());
            assert_eq!(&back[..n], &msg);
        }
        let min = *rtts.iter().min().unwrap();
        let med = median(rtts);
        assert!(min >= 2 * DELAY, "{min:?}");
        // As for TCP: the fastest round trip, not the median.
        assert!(
            min < 2 * DELAY + Duration::from_millis(1),
            "fastest round trip {min:?} (median {med:?})"
        );
        let s = r.stop();
        assert_eq!(s.udp.flows, 1);
        assert_eq!(s.udp.to_upstream.chunks, 20);
        assert_eq!(s.udp.to_upstream.bytes, 20 * 64);
        assert_eq!(s.udp.to_client.bytes, 20 * 64);
        assert_holds(&s.udp.to_upstream, DELAY);
        assert_holds(&s.udp.to_client, DELAY);
        eprintln!("round trips: min {min:?}, median {med:?}; {:?}", s.udp);
    }

    #[test]
    fn zero_delay_passes_bulk_data_unchanged_and_half_close_propagates() {
        let (echo, _t) = tcp_echo();
        let r = relay(echo, Duration::ZERO, RelayProtocol::Both);
        let c = TcpStream::connect(r.local_addr()).unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut w = c.try_clone().unwrap();
        let to_send = data.clone();
        let writer = thread::spawn(move || {
            w.write_all(&to_send).unwrap();
            // Half-close: the echo server sees EOF only through the relay.
            w.shutdown(Shutdown::Write).unwrap();
        });
        let mut back = Vec::new();
        (&c).read_to_end(&mut back).unwrap();
        writer.join().unwrap();
        assert!(back == data, "echoed data differ");
        // `Both` serves UDP on the TCP port too (this one's TCP side has no
        // server behind it and stays unused).
        let udp_echo_addr = udp_echo();
        let r2 = relay(udp_echo_addr, Duration::ZERO, RelayProtocol::Both);
        let u = UdpSocket::bind(localhost()).unwrap();
        u.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        u.send_to(b"ping", r2.local_addr()).unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = u.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"ping"[..], r2.local_addr()));
        let s = r.stop();
        assert_eq!(s.tcp.to_upstream.bytes, data.len() as u64);
        assert_eq!(s.tcp.to_client.bytes, data.len() as u64);
        // No hold bound here: in bulk, a chunk also waits for the write of
        // the one before it (flow control), and that counts as hold.
        let s2 = r2.stop();
        assert_eq!(s2.udp.to_client.bytes, 4);

        // One message at a time, the zero-delay hold is only the hand-over
        // between the relay's reader and writer threads.
        let r3 = relay(echo, Duration::ZERO, RelayProtocol::Tcp);
        let mut c = TcpStream::connect(r3.local_addr()).unwrap();
        c.set_nodelay(true).unwrap();
        for i in 0..20u8 {
            c.write_all(&[i; 10]).unwrap();
            let mut back = [0u8; 10];
            c.read_exact(&mut back).unwrap();
            assert_eq!(back, [i; 10]);
        }
        let s3 = r3.stop();
        assert_eq!(s3.tcp.to_upstream.bytes, 200);
        assert!(s3.tcp.to_upstream.hold_p50_ns < 1_000_000, "{s3:?}");
    }

    fn relay_threads_alive(id: u64) -> usize {
        let prefix = format!("rly{id}-");
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.starts_with(&prefix))
            .count()
    }

    #[test]
    fn stop_closes_everything_and_joins_every_thread() {
        let (echo, _t) = tcp_echo();
        let uecho = udp_echo();
        let r = relay(echo, DELAY, RelayProtocol::Tcp);
        let ru = relay(uecho, DELAY, RelayProtocol::Udp);
        let shared = Arc::clone(&r.shared);
        let shared_u = Arc::clone(&ru.shared);
        let addr = r.local_addr();
        // An open connection with data in flight, and a UDP session.
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"hello").unwrap();
        let mut back = [0u8; 5];
        c.read_exact(&mut back).unwrap();
        c.write_all(b"in flight").unwrap();
        let u = UdpSocket::bind(localhost()).unwrap();
        u.send_to(b"x", ru.local_addr()).unwrap();
        u.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        u.recv_from(&mut back).unwrap();
        assert!(shared.live_threads.load(Ordering::SeqCst) >= 5);
        assert!(relay_threads_alive(shared.id) >= 5);

        let t0 = Instant::now();
        r.stop();
        ru.stop();
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        assert_eq!(shared.live_threads.load(Ordering::SeqCst), 0);
        assert_eq!(shared_u.live_threads.load(Ordering::SeqCst), 0);
        // Joined threads are gone from /proc at once; allow a moment.
        let deadline = Instant::now() + Duration::from_millis(500);
        while relay_threads_alive(shared.id) + relay_threads_alive(shared_u.id) > 0 {
            assert!(Instant::now() < deadline, "relay threads still listed");
            thread::sleep(Duration::from_millis(10));
        }
        // The connection is closed, the listener too.
        c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let mut rest = Vec::new();
        let r = c.read_to_end(&mut rest);
        assert!(r.is_ok() || r.unwrap_err().kind() == io::ErrorKind::ConnectionReset);
        assert!(TcpStream::connect(addr).is_err(), "listener still open");
    }

    #[test]
    fn unreachable_upstream_closes_the_client() {
        // A port that was just free: nothing listens there.
        let free = TcpListener::bind(localhost())
            .unwrap()
            .local_addr()
            .unwrap();
        let r = relay(free, DELAY, RelayProtocol::Tcp);
        let mut c = TcpStream::connect(r.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 1];
        let n = c.read(&mut buf);
        assert!(matches!(n, Ok(0)) || n.is_err(), "{n:?}");
        let s = r.stop();
        assert_eq!((s.tcp.flows, s.tcp.flow_errors), (1, 1));
    }
}
