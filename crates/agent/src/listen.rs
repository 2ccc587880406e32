//! Agents reached over plain TCP (`benchlab agent --listen ADDR --key-file
//! F`), for hosts without SSH.
//!
//! The agent serves up to [`MAX_SESSIONS`] controller sessions at once (a
//! controller opens one per role a host plays, and one client session per
//! target it drives). Each connection must first
//! pass the Noise handshake of [`crate::channel`] within
//! [`HANDSHAKE_TIMEOUT`]; only then does the agent run the control protocol
//! on it ([`crate::server::serve`]), exactly as over a pipe, every frame
//! encrypted and authenticated. A peer that
//! fails is refused — one line on standard error naming its address, the
//! connection closed — and nothing it sent is ever read as a request.
//!
//! A session ends when the controller sends `shutdown` or closes the
//! connection; the agent then waits for the next controller (or returns,
//! with `once`). The controller side is [`connect`].

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
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

/// Binds `addr`, says `benchlab agent listening on ADDR` on standard error
/// (with the real port when `addr` asked for port 0), and serves
/// authenticated controllers one at a time; see [`serve_listener`].
pub fn listen(addr: SocketAddr, key: Key, registry: &Registry, once: bool) -> io::Result<()> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    eprintln!("benchlab agent listening on {}", listener.local_addr()?);
    serve_listener(&listener, &key, registry, once, HANDSHAKE_TIMEOUT)
}

/// Serves controllers that connect to `listener`: each must
/// complete the handshake within `handshake_timeout`, then gets one
/// control-protocol session. A refused peer or a session that ends in an
/// error is reported on standard error and the agent goes on. With `once`
/// it returns after the first authenticated session, with that session's
/// result; otherwise it returns only if accepting fails for good.
pub fn serve_listener(
    listener: &TcpListener,
    key: &Key,
    registry: &Registry,
    once: bool,
    handshake_timeout: Duration,
) -> io::Result<()> {
    if !once {
        return serve_concurrently(listener, key, registry, handshake_timeout);
    }
    loop {
        let Some((stream, peer)) = accept(listener)? else {
            continue;
        };
        let session_key = match authenticate(&stream, key, handshake_timeout) {
            Ok(k) => k,
            Err(e) => {
                eprintln!("benchlab agent: refused {peer}: {e}");
                let _ = stream.shutdown(Shutdown::Both);
                continue;
            }
        };
        let result = session(&stream, session_key, registry);
        if let Err(e) = &result {
            eprintln!("benchlab agent: session with {peer} ended: {e}");
        }
        let _ = stream.shutdown(Shutdown::Both);
        return result;
    }
}

/// One `accept()`. `Ok(None)`: nothing to serve this time, try again (the
/// peer gave up first, or descriptors or memory ran out for a moment);
/// `Err`: accepting failed for good.
fn accept(listener: &TcpListener) -> io::Result<Option<(TcpStream, SocketAddr)>> {
    match listener.accept() {
        Ok(c) => Ok(Some(c)),
        Err(e) => match e.raw_os_error() {
            Some(libc::ECONNABORTED | libc::EINTR | libc::EPROTO) => Ok(None),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
                eprintln!("benchlab agent: cannot accept a connection: {e}");
                std::thread::sleep(ACCEPT_BACKOFF);
                Ok(None)
            }
            _ => Err(e),
        },
    }
}

/// Accepts controllers for ever, each handshake and session on a thread of
/// its own, at most [`MAX_SESSIONS`] at a time.
fn serve_concurrently(
    listener: &TcpListener,
    key: &Key,
    registry: &Registry,
    handshake_timeout: Duration,
) -> io::Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let active = AtomicUsize::new(0);
    std::thread::scope(|scope| loop {
        let Some((stream, peer)) = accept(listener)? else {
            continue;
        };
        if active.load(Ordering::Relaxed) >= MAX_SESSIONS {
            eprintln!("benchlab agent: refused {peer}: already serving {MAX_SESSIONS} sessions");
            let _ = stream.shutdown(Shutdown::Both);
            continue;
        }
        active.fetch_add(1, Ordering::Relaxed);
        let active = &active;
        scope.spawn(move || {
            match authenticate(&stream, key, handshake_timeout) {
                Err(e) => eprintln!("benchlab agent: refused {peer}: {e}"),
                Ok(session_key) => {
                    if let Err(e) = session(&stream, session_key, registry) {
                        eprintln!("benchlab agent: session with {peer} ended: {e}");
                    }
                }
            }
            let _ = stream.shutdown(Shutdown::Both);
            active.fetch_sub(1, Ordering::Relaxed);
        });
    })
}

/// The agent's side of the handshake on a fresh connection, within one
/// overall deadline; afterwards the socket blocks without limit again (a
/// controller may be silent for as long as a point runs elsewhere).
fn authenticate(stream: &TcpStream, key: &Key, timeout: Duration) -> Result<Session, AuthError> {
    let cx = Ctx {
        peer: Peer::Controller,
        timeout: Some(timeout),
    };
    let io_err = |source| AuthError::Io {
        peer: Peer::Controller,
        source,
    };
    let _ = stream.set_nodelay(true);
    let session_key = agent_handshake_ctx(&mut Deadline::new(stream, timeout), key, cx)?;
    stream.set_read_timeout(None).map_err(io_err)?;
    stream.set_write_timeout(None).map_err(io_err)?;
    Ok(session_key)
}

fn session(stream: &TcpStream, session_key: Session, registry: &Registry) -> io::Result<()> {
    // A controller whose host vanishes (power, network) never closes the
    // connection; keepalive probes let the kernel notice, so the agent is
    // not held for ever.
    set_keepalive(stream)?;
    // Every frame from here on is encrypted and authenticated: requests
    // are verified before the frame layer sees them (a failing one ends
    // the session unparsed), and each response is sealed when
    // `write_frame` flushes.
    let reader = SecureReader::new(BufReader::new(stream.try_clone()?), session_key.clone());
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
    let session_key = controller_handshake_ctx(&mut Deadline::new(&stream, timeout), key, cx)?;
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

impl<'a> Deadline<'a> {
    fn new(stream: &'a TcpStream, timeout: Duration) -> Self {
        Deadline {
            stream,
            deadline: Instant::now() + timeout,
        }
    }

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
