//! Agents reached over plain TCP (`benchlab agent --listen ADDR --key-file
//! F`), for hosts without SSH.
//!
//! The agent serves up to [`MAX_SESSIONS`] controller sessions at once (a
//! controller opens one per role a host plays, and one client session per
//! target it drives). Each connection must pass the Noise handshake of
//! [`crate::channel`] *and* send its first record under the fresh session
//! keys within [`HANDSHAKE_TIMEOUT`] of connecting: the responder of
//! `NNpsk0` cannot tell a replayed first handshake message from the
//! controller's, but only the key's holder can make that record. Only
//! then is the connection a session of the control protocol
//! ([`crate::server::serve`]), exactly as over a pipe, every frame
//! encrypted and authenticated. A peer that fails is refused — one line
//! naming its address, the connection closed — and nothing it sent is
//! ever read as a request. When every slot is taken, a new connection
//! takes the slot of the oldest one that has not authenticated yet.
//!
//! A session ends when the controller sends `shutdown` or closes the
//! connection; the agent then waits for the next controller (or returns,
//! with `once`). The controller side is [`connect`].

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use benchlab_core::Registry;

use crate::channel::{
    agent_handshake_ctx, controller_handshake_ctx, AuthError, Ctx, Key, Peer, SecureReader,
    SecureStream, SecureWriter, Session, HANDSHAKE_TIMEOUT,
};

/// Most sessions served at once; further connections are refused until one
/// ends, so a peer that keeps connecting cannot exhaust the host.
pub const MAX_SESSIONS: usize = 8;

/// Pause after an accept failure caused by resource exhaustion (no file
/// descriptors or memory), so the loop does not spin while it lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How long one wait for a connection lasts before the loop looks whether
/// `once`'s session has ended.
const ACCEPT_POLL_MS: libc::c_int = 200;

/// How a listening agent serves (see [`serve_listener_with`]).
#[derive(Clone)]
pub struct ListenOptions {
    /// Return after the first authenticated session, with its result.
    pub once: bool,
    /// How long a connection may take from `accept` to its first
    /// authenticated request (the handshake and one record).
    pub handshake_timeout: Duration,
    /// Where the agent's log lines go (standard error in `benchlab
    /// agent`; a test collects them).
    pub log: Arc<dyn Fn(&str) + Send + Sync>,
}

impl ListenOptions {
    /// Logging to standard error, the documented handshake bound.
    pub fn new(once: bool) -> ListenOptions {
        ListenOptions {
            once,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            log: Arc::new(|line| eprintln!("{line}")),
        }
    }
}

/// Binds `addr`, says `benchlab agent listening on ADDR` on standard error
/// (with the real port when `addr` asked for port 0), and serves
/// authenticated controllers; see [`serve_listener_with`].
pub fn listen(addr: SocketAddr, key: Key, registry: &Registry, once: bool) -> io::Result<()> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    eprintln!("benchlab agent listening on {}", listener.local_addr()?);
    serve_listener_with(&listener, &key, registry, &ListenOptions::new(once))
}

/// [`serve_listener_with`], logging to standard error.
pub fn serve_listener(
    listener: &TcpListener,
    key: &Key,
    registry: &Registry,
    once: bool,
    handshake_timeout: Duration,
) -> io::Result<()> {
    let opts = ListenOptions {
        handshake_timeout,
        ..ListenOptions::new(once)
    };
    serve_listener_with(listener, key, registry, &opts)
}

/// Serves controllers that connect to `listener`, each connection on a
/// thread of its own, at most [`MAX_SESSIONS`] at once (one with `once`).
///
/// A connection is *authenticated* once the first record after the
/// handshake decrypts: a responder of `NNpsk0` cannot tell a replayed
/// first handshake message from the controller's, but only the holder of
/// the key can make that record under the fresh session keys. Until then
/// the connection lives under `handshake_timeout` from its `accept`, and
/// when every slot is taken a new connection takes the slot of the oldest
/// unauthenticated one, so replays and silent peers delay a controller by
/// at most the bound, and usually not at all. Every refused, dropped or
/// timed-out connection is logged with the peer's address. With `once` it
/// returns after the first authenticated session, with that session's
/// result; otherwise it returns only if accepting fails for good.
pub fn serve_listener_with(
    listener: &TcpListener,
    key: &Key,
    registry: &Registry,
    opts: &ListenOptions,
) -> io::Result<()> {
    let max = if opts.once { 1 } else { MAX_SESSIONS };
    let slots = Mutex::new(Slots {
        max,
        next: 0,
        conns: Vec::new(),
    });
    // The result of `once`'s authenticated session, when it has ended.
    let finished: Mutex<Option<io::Result<()>>> = Mutex::new(None);
    listener.set_nonblocking(true)?;
    let result = std::thread::scope(|scope| loop {
        if let Some(r) = lock(&finished).take() {
            lock(&slots).close_all();
            return r;
        }
        let Some((stream, peer)) = accept(listener, &*opts.log)? else {
            continue;
        };
        // Accepted sockets do not inherit O_NONBLOCK on Linux; make sure.
        stream.set_nonblocking(false)?;
        let Some(id) = lock(&slots).admit(&stream, peer, &*opts.log) else {
            let _ = stream.shutdown(Shutdown::Both);
            continue;
        };
        let (slots, finished) = (&slots, &finished);
        scope.spawn(move || {
            let conn = Connection {
                stream,
                peer,
                id,
                slots,
                opts,
            };
            if let Some(r) = conn.run(key, registry) {
                if opts.once {
                    *lock(finished) = Some(r);
                }
            }
        });
    });
    let _ = listener.set_nonblocking(false);
    result
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The connections an agent holds.
struct Slots {
    max: usize,
    next: u64,
    conns: Vec<Slot>,
}

struct Slot {
    id: u64,
    peer: SocketAddr,
    /// A handle on the connection, to drop it for a newer one.
    stream: TcpStream,
    since: Instant,
    authenticated: bool,
}

impl Slots {
    /// A slot for a new connection: a free one, else the oldest
    /// unauthenticated connection's (dropped and logged), else none (the
    /// refusal logged).
    fn admit(&mut self, stream: &TcpStream, peer: SocketAddr, log: &dyn Fn(&str)) -> Option<u64> {
        if self.conns.len() >= self.max {
            let oldest = self
                .conns
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.authenticated)
                .min_by_key(|(_, c)| c.since)
                .map(|(i, _)| i);
            let Some(i) = oldest else {
                let n = self.max;
                let s = if n == 1 { "" } else { "s" };
                log(&format!(
                    "benchlab agent: refused {peer}: already serving {n} authenticated session{s}"
                ));
                return None;
            };
            let old = self.conns.swap_remove(i);
            let _ = old.stream.shutdown(Shutdown::Both);
            log(&format!(
                "benchlab agent: dropped {}: no authenticated request after {:.1}s, and {peer} needed its slot",
                old.peer,
                old.since.elapsed().as_secs_f64()
            ));
        }
        let handle = stream.try_clone().ok()?;
        self.next += 1;
        self.conns.push(Slot {
            id: self.next,
            peer,
            stream: handle,
            since: Instant::now(),
            authenticated: false,
        });
        Some(self.next)
    }

    /// Marks a connection authenticated; false if it was dropped meanwhile.
    fn authenticate(&mut self, id: u64) -> bool {
        match self.conns.iter_mut().find(|c| c.id == id) {
            Some(c) => {
                c.authenticated = true;
                true
            }
            None => false,
        }
    }

    /// Frees a connection's slot; false if it was dropped for another (and
    /// so already logged).
    fn release(&mut self, id: u64) -> bool {
        match self.conns.iter().position(|c| c.id == id) {
            Some(i) => {
                self.conns.swap_remove(i);
                true
            }
            None => false,
        }
    }

    fn close_all(&mut self) {
        for c in self.conns.drain(..) {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
    }
}

/// One accepted connection and the slot it holds.
struct Connection<'a> {
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    slots: &'a Mutex<Slots>,
    opts: &'a ListenOptions,
}

impl Connection<'_> {
    /// The handshake and the session. `Some(result)` when the session was
    /// authenticated (its first record decrypted), `None` when the peer was
    /// refused or timed out (logged here).
    fn run(self, key: &Key, registry: &Registry) -> Option<io::Result<()>> {
        let deadline = Instant::now() + self.opts.handshake_timeout;
        let outcome = self.handshake_and_session(key, registry, deadline);
        let _ = self.stream.shutdown(Shutdown::Both);
        let held = lock(self.slots).release(self.id);
        let log = &*self.opts.log;
        let peer = self.peer;
        match outcome {
            Outcome::Refused(why) => {
                if held {
                    log(&format!("benchlab agent: refused {peer}: {why}"));
                }
                None
            }
            Outcome::Session(r) => {
                if let Err(e) = &r {
                    log(&format!("benchlab agent: session with {peer} ended: {e}"));
                }
                Some(r)
            }
        }
    }

    fn handshake_and_session(&self, key: &Key, registry: &Registry, deadline: Instant) -> Outcome {
        let timeout = self.opts.handshake_timeout;
        let session_key = match authenticate(&self.stream, key, deadline, timeout) {
            Ok(k) => k,
            Err(e) => return Outcome::Refused(e.to_string()),
        };
        let authenticated = Arc::new(AtomicBool::new(false));
        let result = session(
            &self.stream,
            session_key,
            registry,
            Pending {
                deadline,
                timeout,
                authenticated: authenticated.clone(),
            },
            &mut || lock(self.slots).authenticate(self.id),
        );
        if authenticated.load(Ordering::Acquire) {
            Outcome::Session(result)
        } else {
            Outcome::Refused(match result {
                Err(e) => e.to_string(),
                Ok(()) => "it closed the connection before its first request".to_string(),
            })
        }
    }
}

enum Outcome {
    /// Never authenticated: why.
    Refused(String),
    /// An authenticated session and how it ended.
    Session(io::Result<()>),
}

/// One `accept()`. `Ok(None)`: nothing to serve this time, try again
/// (nothing arrived within a poll, the peer gave up first, or descriptors
/// or memory ran out for a moment); `Err`: accepting failed for good.
fn accept(
    listener: &TcpListener,
    log: &dyn Fn(&str),
) -> io::Result<Option<(TcpStream, SocketAddr)>> {
    let mut fds = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // The listener is non-blocking so that `once` can stop between
    // connections; this wait is what the accept loop blocks on.
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut fds, 1, ACCEPT_POLL_MS) };
    match listener.accept() {
        Ok(c) => Ok(Some(c)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => match e.raw_os_error() {
            Some(libc::ECONNABORTED | libc::EINTR | libc::EPROTO) => Ok(None),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
                log(&format!("benchlab agent: cannot accept a connection: {e}"));
                std::thread::sleep(ACCEPT_BACKOFF);
                Ok(None)
            }
            _ => Err(e),
        },
    }
}

/// The agent's side of the handshake on a fresh connection, by
/// `deadline`. The read deadline stays on the socket afterwards until the
/// first record decrypts (see [`Pending`]).
fn authenticate(
    stream: &TcpStream,
    key: &Key,
    deadline: Instant,
    timeout: Duration,
) -> Result<Session, AuthError> {
    let cx = Ctx {
        peer: Peer::Controller,
        timeout: Some(timeout),
    };
    let io_err = |source| AuthError::Io {
        peer: Peer::Controller,
        source,
    };
    let _ = stream.set_nodelay(true);
    let session_key = agent_handshake_ctx(&mut Deadline { stream, deadline }, key, cx)?;
    // The agent writes nothing more until a request has decrypted.
    stream.set_write_timeout(None).map_err(io_err)?;
    Ok(session_key)
}

/// The read side of a connection whose peer has not yet proved itself by
/// a record: every read gets only what is left of the deadline. Once the
/// first record decrypts (`authenticated`), reads block without limit (a
/// controller may be silent for as long as a point runs elsewhere).
struct Pending {
    deadline: Instant,
    timeout: Duration,
    authenticated: Arc<AtomicBool>,
}

struct PendingReader {
    stream: TcpStream,
    pending: Pending,
    limited: bool,
}

impl Read for PendingReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let timed_out = || {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no authenticated request within {:.1}s of connecting (a replayed or stalled handshake)",
                    self.pending.timeout.as_secs_f64()
                ),
            )
        };
        if self.pending.authenticated.load(Ordering::Acquire) {
            if self.limited {
                self.stream.set_read_timeout(None)?;
                self.limited = false;
            }
        } else {
            let left = self
                .pending
                .deadline
                .saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timed_out());
            }
            self.stream.set_read_timeout(Some(left))?;
            self.limited = true;
        }
        match self.stream.read(buf) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if self.limited {
                    Err(timed_out())
                } else {
                    Err(e)
                }
            }
            r => r,
        }
    }
}

/// Marks the connection authenticated when its first record decrypts.
struct FirstRecord<'a, R: Read> {
    inner: SecureReader<R>,
    authenticated: Arc<AtomicBool>,
    on_first: &'a mut dyn FnMut() -> bool,
}

impl<R: Read> Read for FirstRecord<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.inner.received() > 0 && !self.authenticated.load(Ordering::Acquire) {
            if !(self.on_first)() {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "dropped for a newer connection before its first request",
                ));
            }
            self.authenticated.store(true, Ordering::Release);
        }
        Ok(n)
    }
}

fn session(
    stream: &TcpStream,
    session_key: Session,
    registry: &Registry,
    pending: Pending,
    on_first: &mut dyn FnMut() -> bool,
) -> io::Result<()> {
    // A controller whose host vanishes (power, network) never closes the
    // connection; keepalive probes let the kernel notice, so the agent is
    // not held for ever.
    set_keepalive(stream)?;
    let authenticated = pending.authenticated.clone();
    // Every frame from here on is encrypted and authenticated: requests
    // are verified before the frame layer sees them (a failing one ends
    // the session unparsed), and each response is sealed when
    // `write_frame` flushes.
    let raw = PendingReader {
        stream: stream.try_clone()?,
        pending,
        limited: false,
    };
    let reader = FirstRecord {
        inner: SecureReader::new(BufReader::new(raw), session_key.clone()),
        authenticated,
        on_first,
    };
    // The buffer turns a frame's records into as few segments as it can.
    let writer = SecureWriter::new(BufWriter::new(stream.try_clone()?), session_key);
    crate::server::serve(registry, reader, writer)
}

/// Connects to an agent started with `--listen` and runs the controller's
/// side of the handshake, both within `timeout`. The returned stream is
/// authenticated, encrypts every frame written to it and verifies every
/// frame read from it ([`crate::channel`]), blocks without a time limit,
/// and carries the control protocol next (starting with `hello`).
pub fn connect(addr: SocketAddr, key: &Key, timeout: Duration) -> Result<SecureStream, AuthError> {
    let stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|source| AuthError::Connect { addr, source })?;
    let peer = Peer::Agent(Some(addr));
    let io_err = |source| AuthError::Io { peer, source };
    let _ = stream.set_nodelay(true);
    let cx = Ctx {
        peer,
        timeout: Some(timeout),
    };
    let deadline = Instant::now() + timeout;
    let session_key = controller_handshake_ctx(
        &mut Deadline {
            stream: &stream,
            deadline,
        },
        key,
        cx,
    )?;
    stream.set_read_timeout(None).map_err(io_err)?;
    stream.set_write_timeout(None).map_err(io_err)?;
    set_keepalive(&stream).map_err(io_err)?;
    SecureStream::new(stream, session_key).map_err(io_err)
}

/// A socket with one deadline for a whole exchange: every read and write
/// gets only the time that is left, so a peer that trickles bytes cannot
/// stretch a per-call timeout into a long hold.
struct Deadline<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl Deadline<'_> {
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "handshake deadline passed",
            ))
        } else {
            Ok(left)
        }
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.left()?))?;
        (&mut &*self.stream).read(buf)
    }
}

impl Write for Deadline<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(Some(self.left()?))?;
        (&mut &*self.stream).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Keepalive after 60 s idle, then 6 probes 10 s apart: a dead peer is
/// noticed within about 2 minutes instead of the kernel default of over 2
/// hours (`tcp_keepalive_time` = 7200 s).
fn set_keepalive(stream: &TcpStream) -> io::Result<()> {
    let fd = stream.as_raw_fd();
    for (level, name, value) in [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 60),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 10),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 6),
    ] {
        let value: libc::c_int = value;
        // SAFETY: `fd` is an open socket owned by `stream` for the duration
        // of the call, and the option value is a live `c_int` whose size is
        // passed alongside it.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
