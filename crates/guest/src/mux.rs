//! The control channel to a guest: one virtio-serial port, multiplexed.
//!
//! A run starts several agents on a host (server, clients, environment),
//! and restarts them after a failed point. A virtio-serial port cannot
//! tell one connection from the next (its guest end only sees "host
//! connected" flip), so an agent per port would race a restarted agent
//! against its predecessor; one port carrying numbered channels does not.
//!
//! Host side: [`Mux`] holds QEMU's end of the port (a unix socket) and
//! listens on `agents.sock`; every connection there is one channel, opened
//! by `benchlab guest-attach SOCKET -- ARGV` ([`attach`]), which the
//! controller starts like any agent command, so the agent handle, its
//! process group and its kill work as for a local agent. The guest's
//! `benchlab guest-init` ([`crate::init`]) runs each channel's ARGV with
//! its standard streams on the channel and kills the process group when
//! the channel closes.
//!
//! A frame is `kind: u8, channel: u32 LE, length: u32 LE, payload`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::GuestError;

/// Largest payload of one frame.
pub const MAX_FRAME: usize = 1 << 20;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Host → guest: start the JSON argv in the payload on this channel.
    Open = 1,
    /// Either way: bytes of the channel's standard input (to the guest)
    /// or standard output (from it).
    Data = 2,
    /// Guest → host: bytes of the channel's standard error.
    Stderr = 3,
    /// Host → guest: the channel's standard input ended.
    Eof = 4,
    /// Host → guest: the channel is gone; kill its process group.
    Close = 5,
    /// Guest → host: the channel's process ended; payload its exit code
    /// as text.
    Exit = 6,
    /// Guest → host: guest-init is up (payload: JSON facts of the guest).
    Ready = 7,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Open,
            2 => Kind::Data,
            3 => Kind::Stderr,
            4 => Kind::Eof,
            5 => Kind::Close,
            6 => Kind::Exit,
            7 => Kind::Ready,
            _ => return None,
        })
    }
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// What it carries.
    pub kind: Kind,
    /// The channel (0 for Ready).
    pub channel: u32,
    /// The bytes.
    pub payload: Vec<u8>,
}

/// Writes a frame (one `write_all` of header and payload, so that frames
/// from several threads sharing a locked writer never interleave).
pub fn write_frame(
    w: &mut impl Write,
    kind: Kind,
    channel: u32,
    payload: &[u8],
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(9 + payload.len());
    buf.push(kind as u8);
    buf.extend_from_slice(&channel.to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(payload);
    w.write_all(&buf)?;
    w.flush()
}

/// Reads a frame; `None` at a clean end of stream.
pub fn read_frame(r: &mut impl Read) -> std::io::Result<Option<Frame>> {
    let mut head = [0u8; 9];
    let mut got = 0;
    while got < head.len() {
        match r.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let kind = Kind::from_u8(head[0]).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("unknown frame kind {}", head[0]),
        )
    })?;
    let channel = u32::from_le_bytes(head[1..5].try_into().expect("4 bytes"));
    let len = u32::from_le_bytes(head[5..9].try_into().expect("4 bytes")) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {len} bytes (at most {MAX_FRAME})"),
        ));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)?;
    Ok(Some(Frame {
        kind,
        channel,
        payload,
    }))
}

#[derive(Default)]
struct State {
    /// The guest's Ready payload, once it came.
    ready: Option<Vec<u8>>,
    /// The port closed (QEMU gone).
    closed: bool,
    /// Open channels: the relay's connection.
    channels: HashMap<u32, UnixStream>,
    next: u32,
}

/// The host end of a guest's control port.
pub struct Mux {
    port: Arc<Mutex<UnixStream>>,
    state: Arc<(Mutex<State>, Condvar)>,
}

impl Mux {
    /// Connects to QEMU's end of the port at `port_socket` (retrying
    /// until `deadline`: QEMU creates it as it starts) and serves relays
    /// on `listener`.
    pub fn start(
        port_socket: &Path,
        listener: UnixListener,
        deadline: Instant,
    ) -> Result<Mux, GuestError> {
        let port = loop {
            match UnixStream::connect(port_socket) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= deadline => {
                    return Err(GuestError::Boot(format!(
                        "cannot connect to the guest's control port {}: {e}",
                        port_socket.display()
                    )))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let reader = port
            .try_clone()
            .map_err(|e| GuestError::Io(format!("control port: {e}")))?;
        let mux = Mux {
            port: Arc::new(Mutex::new(port)),
            state: Arc::new((Mutex::new(State::default()), Condvar::new())),
        };
        let state = mux.state.clone();
        std::thread::spawn(move || from_guest(reader, state));
        let (state, port) = (mux.state.clone(), mux.port.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { break };
                let (state, port) = (state.clone(), port.clone());
                std::thread::spawn(move || relay_to_guest(conn, state, port));
            }
        });
        Ok(mux)
    }

    /// Waits for the guest's Ready frame; returns its payload.
    pub fn wait_ready(&self, deadline: Instant) -> Result<Vec<u8>, GuestError> {
        let (lock, cv) = &*self.state;
        let mut s = lock.lock().expect("mux state");
        loop {
            if let Some(r) = &s.ready {
                return Ok(r.clone());
            }
            if s.closed {
                return Err(GuestError::Boot(
                    "the guest's control port closed before guest-init was up".into(),
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(GuestError::Boot(
                    "guest-init did not report ready in time".into(),
                ));
            }
            s = cv.wait_timeout(s, deadline - now).expect("mux state").0;
        }
    }

    /// A handle that tells, from any thread, whether the guest's end of
    /// the port closed (QEMU ended).
    pub fn watch(&self) -> Watch {
        Watch(self.state.clone())
    }

    /// How many channels are open.
    pub fn open_channels(&self) -> usize {
        self.state.0.lock().expect("mux state").channels.len()
    }
}

/// Whether a guest still runs, without holding the guest.
#[derive(Clone)]
pub struct Watch(Arc<(Mutex<State>, Condvar)>);

impl Watch {
    /// True once the guest's control port closed: QEMU ended (killed,
    /// crashed, or the guest powered off).
    pub fn gone(&self) -> bool {
        self.0 .0.lock().map(|s| s.closed).unwrap_or(true)
    }
}

/// Frames from the guest, to the relay connection of their channel.
fn from_guest(mut port: UnixStream, state: Arc<(Mutex<State>, Condvar)>) {
    let (lock, cv) = &*state;
    while let Ok(Some(frame)) = read_frame(&mut port) {
        let mut s = lock.lock().expect("mux state");
        match frame.kind {
            Kind::Ready => {
                s.ready = Some(frame.payload);
                cv.notify_all();
            }
            Kind::Data | Kind::Stderr | Kind::Exit => {
                let end = frame.kind == Kind::Exit;
                if let Some(conn) = s.channels.get_mut(&frame.channel) {
                    if write_frame(conn, frame.kind, frame.channel, &frame.payload).is_err() || end
                    {
                        let _ = conn.shutdown(std::net::Shutdown::Both);
                        s.channels.remove(&frame.channel);
                    }
                }
            }
            _ => {}
        }
    }
    let mut s = lock.lock().expect("mux state");
    s.closed = true;
    for (_, c) in s.channels.drain() {
        let _ = c.shutdown(std::net::Shutdown::Both);
    }
    cv.notify_all();
}

/// One relay connection: its Open, then its standard input, to the guest.
fn relay_to_guest(
    mut conn: UnixStream,
    state: Arc<(Mutex<State>, Condvar)>,
    port: Arc<Mutex<UnixStream>>,
) {
    let open = match read_frame(&mut conn) {
        Ok(Some(f)) if f.kind == Kind::Open => f,
        _ => return,
    };
    let channel = {
        let mut s = state.0.lock().expect("mux state");
        if s.closed {
            return;
        }
        s.next += 1;
        let ch = s.next;
        let Ok(writer) = conn.try_clone() else { return };
        s.channels.insert(ch, writer);
        ch
    };
    let send = |kind: Kind, payload: &[u8]| {
        let mut p = port.lock().expect("control port");
        write_frame(&mut *p, kind, channel, payload)
    };
    if send(Kind::Open, &open.payload).is_err() {
        return;
    }
    loop {
        match read_frame(&mut conn) {
            Ok(Some(f)) if f.kind == Kind::Data => {
                if send(Kind::Data, &f.payload).is_err() {
                    break;
                }
            }
            Ok(Some(f)) if f.kind == Kind::Eof => {
                let _ = send(Kind::Eof, &[]);
            }
            Ok(Some(_)) => {}
            // The relay is gone (ended or killed): so is the channel.
            Ok(None) | Err(_) => break,
        }
    }
    let _ = send(Kind::Close, &[]);
    state.0.lock().expect("mux state").channels.remove(&channel);
}

/// `benchlab guest-attach SOCKET -- ARGV…`: runs ARGV in the guest whose
/// mux listens on SOCKET, relaying this process's standard streams, and
/// exits with its exit code. Never returns.
pub fn attach(socket: &Path, argv: &[String]) -> ! {
    let code = match attach_inner(socket, argv) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("benchlab guest-attach: {e}");
            1
        }
    };
    std::process::exit(code)
}

fn attach_inner(socket: &Path, argv: &[String]) -> std::io::Result<i32> {
    let mut conn = UnixStream::connect(socket).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot reach the guest at {}: {e}", socket.display()),
        )
    })?;
    let open = serde_json::to_vec(argv).expect("argv serializes");
    write_frame(&mut conn, Kind::Open, 0, &open)?;
    let mut to_guest = conn.try_clone()?;
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = write_frame(&mut to_guest, Kind::Eof, 0, &[]);
                    break;
                }
                Ok(n) => {
                    if write_frame(&mut to_guest, Kind::Data, 0, &buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr();
    loop {
        match read_frame(&mut conn)? {
            Some(f) if f.kind == Kind::Data => {
                stdout.write_all(&f.payload)?;
                stdout.flush()?;
            }
            Some(f) if f.kind == Kind::Stderr => {
                let _ = stderr.write_all(&f.payload);
            }
            Some(f) if f.kind == Kind::Exit => {
                return Ok(String::from_utf8_lossy(&f.payload)
                    .trim()
                    .parse()
                    .unwrap_or(1));
            }
            Some(_) => {}
            None => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    "the guest closed the channel (guest stopped?)",
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        write_frame(&mut buf, Kind::Data, 7, b"hello").unwrap();
        write_frame(&mut buf, Kind::Exit, 7, b"0").unwrap();
        let mut r = &buf[..];
        let f = read_frame(&mut r).unwrap().unwrap();
        assert_eq!(
            (f.kind, f.channel, &f.payload[..]),
            (Kind::Data, 7, &b"hello"[..])
        );
        let f = read_frame(&mut r).unwrap().unwrap();
        assert_eq!(f.kind, Kind::Exit);
        assert!(read_frame(&mut r).unwrap().is_none());
    }

    #[test]
    fn oversized_and_unknown_frames_are_refused() {
        let mut buf = vec![2u8, 0, 0, 0, 0];
        buf.extend_from_slice(&((MAX_FRAME as u32) + 1).to_le_bytes());
        assert!(read_frame(&mut &buf[..]).is_err());
        let buf = [99u8, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(read_frame(&mut &buf[..]).is_err());
    }
}
