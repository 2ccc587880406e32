//! The phase timer that ends warm-up and the measured interval, and the
//! watchdog that wakes a measured loop's blocked call.
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
//! uses socket timeouts of [`ABORT_POLL`] (see [`super::sock::set_timeouts`]).
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

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use benchlab_core::{WorkloadError, ABORT_POLL};
use socket2::Socket;

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
    pub(super) progress: AtomicU64,
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
    pub(super) fn take_loss(&self, n: u64) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::params::Proto;
    use crate::common::sock::{bind_server, connect, Bufs};
    use crate::common::sysio::{sys_recv, sys_send};
    use socket2::{Domain, Protocol, Type};
    use std::io;
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

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

    #[test]
    fn zero_warmup_is_done_at_once() {
        let t = Timer::start(Duration::ZERO, Arc::new(AtomicBool::new(false)), None).unwrap();
        assert!(t.warm_done());
        assert!(!t.stopped());
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
}
