//! The secure channel between a controller and an agent reached over TCP
//! (`benchlab agent --listen`), where no transport (SSH, a local pipe)
//! vouches for the peer: the Noise protocol framework's
//! `Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s`, implemented by the `snow`
//! crate, with the shared key as the pre-shared key.
//!
//! Why this pattern: both ends hold one shared secret and nothing else (no
//! long-term key pairs to distribute or pin), which is what `NNpsk0` is
//! made for; the PSK is mixed in before the first message, so the agent
//! checks the controller's first message, and the controller the agent's
//! answer, before either reads anything else; the ephemeral
//! Diffie-Hellman gives every session fresh keys (forward secrecy), and
//! every frame after the handshake is encrypted and authenticated by
//! ChaCha20-Poly1305 under a counter nonce, so an altered, replayed,
//! reordered, dropped or injected record fails to decrypt. `Noise_XXpsk3`
//! would add static keys nobody would check; TLS 1.3 with PSK (rustls)
//! would bring a record layer, certificates code and ALPN for a channel
//! that needs none of them.
//!
//! ```text
//! agent → controller   "BENCHLB" v                      (8 bytes, plain)
//! controller → agent   "BENCHLB" v, record(-> psk, e)   (the PSK proves the controller)
//! agent → controller   record(<- e, ee)                 (the agent's proof), or an empty record: refused
//! then, both ways      record(ChaChaPoly(frame bytes))  (len: u16 BE, at most 65535 bytes)
//! ```
//!
//! `v` is [`WIRE_VERSION`]; both preambles are the Noise prologue, so a
//! peer on the path that changes them fails the handshake. A peer of
//! another version is told apart by its first bytes and named
//! ("incompatible agent version"); the agents of benchlab-auth-v2 (HMAC
//! records, [`WIRE_VERSION`] 2) open with a JSON challenge frame.
//!
//! The PSK is SHA-256 of a label and the key file's contents (a key file
//! holds at least [`MIN_KEY_LEN`] random bytes; Noise wants exactly 32).
//! Handshake records are capped at [`HANDSHAKE_MAX_RECORD`] bytes, and the
//! whole handshake has one deadline ([`HANDSHAKE_TIMEOUT`], applied by
//! [`crate::listen`]) so an unauthenticated peer can hold nothing.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use snow::StatelessTransportState;

/// The Noise protocol name (pattern, DH, cipher, hash).
pub const NOISE_PARAMS: &str = "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s";
/// The first bytes each side sends.
pub const MAGIC: [u8; 7] = *b"BENCHLB";
/// The version of this wire format: 1 had no per-frame protection, 2 was
/// benchlab-auth-v2 (HMAC-SHA256 records), 3 is Noise.
pub const WIRE_VERSION: u8 = 3;
/// How long an agent waits for a connecting peer to complete the handshake.
/// A legitimate controller answers in milliseconds; the limit only bounds
/// how long a silent or slow peer can hold an agent's session slot.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Shortest accepted key, in bytes: 16 random bytes (128 bits) is the
/// usual floor for a symmetric key (NIST SP 800-107 §5.3.4); a generated
/// key is longer.
pub const MIN_KEY_LEN: usize = 16;
/// Largest handshake record accepted: the real ones are 48 bytes.
pub const HANDSHAKE_MAX_RECORD: usize = 256;
/// Largest record (Noise's message limit).
pub const MAX_RECORD: usize = 65_535;
/// ChaCha20-Poly1305's tag, added to every record.
pub const TAG_LEN: usize = 16;
/// Most plaintext bytes in one record.
pub const MAX_PLAINTEXT: usize = MAX_RECORD - TAG_LEN;

const PSK_LABEL: &[u8] = b"benchlab agent channel psk v3";

/// Who the other end is, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// The agent's view: a connecting controller (the agent names its
    /// address itself when it logs the refusal).
    Controller,
    /// The controller's view: an agent, at this address when known.
    Agent(Option<SocketAddr>),
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Controller => f.write_str("peer"),
            Peer::Agent(None) => f.write_str("the agent"),
            Peer::Agent(Some(a)) => write!(f, "the agent at {a}"),
        }
    }
}

fn within(t: &Option<Duration>) -> String {
    match t {
        Some(t) => format!(" within {:.1}s", t.as_secs_f64()),
        None => " in time".to_string(),
    }
}

/// What went wrong loading a key or opening the channel.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The key file could not be read.
    #[error("cannot read key file {}: {source}", path.display())]
    KeyFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The key file can be read by others.
    #[error(
        "key file {} is accessible by group or others (mode {mode:04o}); a shared key must be private: `chmod 600 {}`",
        path.display(),
        path.display()
    )]
    KeyExposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key is too short to be a key.
    #[error(
        "key file {} holds {len} bytes; a shared key needs at least {MIN_KEY_LEN} (make one with `head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE`)",
        path.display()
    )]
    KeyTooShort {
        /// The file.
        path: PathBuf,
        /// Its length after the trailing newline.
        len: usize,
    },
    /// The agent refused our proof: it holds another key.
    #[error("{peer} did not accept our key")]
    NotAccepted {
        /// The agent.
        peer: Peer,
    },
    /// The peer's proof failed: it does not hold our key.
    #[error("{peer} failed authentication: it does not hold our key")]
    PeerFailed {
        /// Who.
        peer: Peer,
    },
    /// The peer speaks another version of the channel.
    #[error("incompatible agent version: {peer} speaks {theirs}, this benchlab speaks {NOISE_PARAMS} (wire version {WIRE_VERSION}): run the same benchlab version at both ends")]
    Version {
        /// Who.
        peer: Peer,
        /// What they speak.
        theirs: String,
    },
    /// The handshake took too long.
    #[error("{peer} did not complete the handshake{}", within(.timeout))]
    Timeout {
        /// Who.
        peer: Peer,
        /// The bound, when one was set.
        timeout: Option<Duration>,
    },
    /// The peer is not a benchlab controller or agent.
    #[error("{peer} is not a benchlab peer: {detail}")]
    NotBenchlab {
        /// Who.
        peer: Peer,
        /// What it sent.
        detail: String,
    },
    /// The connection ended during the handshake.
    #[error("{peer} closed the connection during the handshake")]
    Closed {
        /// Who.
        peer: Peer,
    },
    /// The agent could not be reached.
    #[error("cannot connect to the agent at {addr}: {source}")]
    Connect {
        /// The agent's address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// Another I/O error during the handshake.
    #[error("handshake with {peer}: {source}")]
    Io {
        /// Who.
        peer: Peer,
        /// What failed.
        source: io::Error,
    },
}

/// A shared key as read from its file. `Debug` never shows it.
#[derive(Clone)]
pub struct Key(Vec<u8>);

impl Key {
    /// A key from bytes (at least [`MIN_KEY_LEN`] of them; tests).
    pub fn from_bytes(bytes: &[u8]) -> Key {
        Key(bytes.to_vec())
    }

    /// The key's bytes (what a redaction of messages must mask).
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// Noise's 32-byte pre-shared key.
    fn psk(&self) -> [u8; 32] {
        Sha256::new()
            .chain_update(PSK_LABEL)
            .chain_update(&self.0)
            .finalize()
            .into()
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(…)")
    }
}

/// Reads a key file: its bytes, one trailing newline (`\n` or `\r\n`)
/// removed. The file must not be readable by group or others, and the key
/// must be at least [`MIN_KEY_LEN`] bytes.
pub fn load_key(path: &Path) -> Result<Key, AuthError> {
    let key_err = |source| AuthError::KeyFile {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(key_err)?;
    let mode = f.metadata().map_err(key_err)?.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(AuthError::KeyExposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    let mut key = Vec::new();
    f.read_to_end(&mut key).map_err(key_err)?;
    if key.last() == Some(&b'\n') {
        key.pop();
        if key.last() == Some(&b'\r') {
            key.pop();
        }
    }
    if key.len() < MIN_KEY_LEN {
        return Err(AuthError::KeyTooShort {
            path: path.to_path_buf(),
            len: key.len(),
        });
    }
    Ok(Key(key))
}

/// The 8 bytes each side opens with.
fn preamble() -> [u8; 8] {
    let mut p = [0u8; 8];
    p[..7].copy_from_slice(&MAGIC);
    p[7] = WIRE_VERSION;
    p
}

/// The handshake's view of its peer, for errors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx {
    pub(crate) peer: Peer,
    pub(crate) timeout: Option<Duration>,
}

impl Ctx {
    fn io(&self, e: io::Error) -> AuthError {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => AuthError::Timeout {
                peer: self.peer,
                timeout: self.timeout,
            },
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => AuthError::Closed { peer: self.peer },
            _ => AuthError::Io {
                peer: self.peer,
                source: e,
            },
        }
    }

    fn not_benchlab(&self, detail: impl Into<String>) -> AuthError {
        AuthError::NotBenchlab {
            peer: self.peer,
            detail: detail.into(),
        }
    }

    /// Reads the peer's preamble and checks its version. What an older
    /// benchlab sends first (a length-prefixed JSON frame) is named.
    fn read_preamble(&self, s: &mut impl Read) -> Result<(), AuthError> {
        let mut p = [0u8; 8];
        s.read_exact(&mut p).map_err(|e| self.io(e))?;
        if p[..7] == MAGIC {
            return match p[7] {
                WIRE_VERSION => Ok(()),
                v => Err(AuthError::Version {
                    peer: self.peer,
                    theirs: format!("wire version {v}"),
                }),
            };
        }
        // A JSON frame: 4 bytes of length, then `{"`.
        let len = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) as usize;
        if &p[4..6] == b"{\"" && len <= 4096 {
            let mut body = p[4..].to_vec();
            body.resize(len.max(4), 0);
            s.read_exact(&mut body[4..]).map_err(|e| self.io(e))?;
            let v: serde_json::Value = serde_json::from_slice(&body[..len.max(4)])
                .map_err(|_| self.not_benchlab("it sent a JSON frame that does not parse"))?;
            if let Some(scheme) = v.get("scheme").and_then(|x| x.as_str()) {
                return Err(AuthError::Version {
                    peer: self.peer,
                    theirs: format!("`{scheme}` (an older benchlab)"),
                });
            }
            if v.get("request").is_some() {
                return Err(self.not_benchlab("it sent a request without a handshake"));
            }
            return Err(self.not_benchlab(
                "it sent a JSON message where the handshake was due (an older benchlab?)",
            ));
        }
        Err(self.not_benchlab(format!(
            "its first bytes are {:02x?}, not the benchlab preamble",
            p
        )))
    }

    /// Reads one handshake record (length-prefixed, capped).
    fn read_record(&self, s: &mut impl Read) -> Result<Vec<u8>, AuthError> {
        let mut len = [0u8; 2];
        s.read_exact(&mut len).map_err(|e| self.io(e))?;
        let len = u16::from_be_bytes(len) as usize;
        if len > HANDSHAKE_MAX_RECORD {
            return Err(self.not_benchlab(format!(
                "it announced a {len}-byte handshake message; they are at most {HANDSHAKE_MAX_RECORD} bytes"
            )));
        }
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).map_err(|e| self.io(e))?;
        Ok(body)
    }

    fn write_all(&self, s: &mut impl Write, bytes: &[u8]) -> Result<(), AuthError> {
        s.write_all(bytes)
            .and_then(|()| s.flush())
            .map_err(|e| self.io(e))
    }
}

fn record(body: &[u8]) -> Vec<u8> {
    let mut r = Vec::with_capacity(2 + body.len());
    r.extend_from_slice(&(body.len() as u16).to_be_bytes());
    r.extend_from_slice(body);
    r
}

/// A Noise builder with the PSK and the prologue (both preambles).
fn builder<'a>(psk: &'a [u8; 32], prologue: &'a [u8]) -> snow::Builder<'a> {
    let params: snow::params::NoiseParams = NOISE_PARAMS.parse().expect("a valid Noise name");
    snow::Builder::new(params)
        .psk(0, psk)
        .expect("psk slot 0 exists in NNpsk0")
        .prologue(prologue)
        .expect("a prologue is allowed")
}

fn noise_failed(peer: Peer, e: snow::Error) -> AuthError {
    AuthError::Io {
        peer,
        source: io::Error::other(format!("the Noise library failed: {e}")),
    }
}

/// The keys of an open channel, shared by its two halves.
#[derive(Clone)]
pub struct Session(Arc<StatelessTransportState>);

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material.
        f.write_str("Session(…)")
    }
}

/// The agent's side of the handshake on `s`: it sends its preamble, checks
/// the controller's, and verifies the controller's first message (made
/// with the PSK) before it answers. A peer that fails gets an empty record
/// (refused) and an error.
pub fn agent_handshake<S: Read + Write>(s: &mut S, key: &Key) -> Result<Session, AuthError> {
    agent_handshake_ctx(
        s,
        key,
        Ctx {
            peer: Peer::Controller,
            timeout: None,
        },
    )
}

pub(crate) fn agent_handshake_ctx<S: Read + Write>(
    s: &mut S,
    key: &Key,
    cx: Ctx,
) -> Result<Session, AuthError> {
    cx.write_all(s, &preamble())?;
    cx.read_preamble(s)?;
    let prologue = [preamble(), preamble()].concat();
    let psk = key.psk();
    let mut hs = builder(&psk, &prologue)
        .build_responder()
        .map_err(|e| noise_failed(cx.peer, e))?;
    let first = cx.read_record(s)?;
    let mut payload = [0u8; HANDSHAKE_MAX_RECORD];
    if hs.read_message(&first, &mut payload).is_err() {
        let _ = cx.write_all(s, &record(&[]));
        return Err(AuthError::PeerFailed { peer: cx.peer });
    }
    let mut out = [0u8; HANDSHAKE_MAX_RECORD];
    let n = hs
        .write_message(&[], &mut out)
        .map_err(|e| noise_failed(cx.peer, e))?;
    cx.write_all(s, &record(&out[..n]))?;
    let t = hs
        .into_stateless_transport_mode()
        .map_err(|e| noise_failed(cx.peer, e))?;
    Ok(Session(Arc::new(t)))
}

/// The controller's side: it checks the agent's preamble (naming an agent
/// of another version), sends its own and the first message, and verifies
/// the agent's answer.
pub fn controller_handshake<S: Read + Write>(s: &mut S, key: &Key) -> Result<Session, AuthError> {
    controller_handshake_ctx(
        s,
        key,
        Ctx {
            peer: Peer::Agent(None),
            timeout: None,
        },
    )
}

pub(crate) fn controller_handshake_ctx<S: Read + Write>(
    s: &mut S,
    key: &Key,
    cx: Ctx,
) -> Result<Session, AuthError> {
    cx.read_preamble(s)?;
    let prologue = [preamble(), preamble()].concat();
    let psk = key.psk();
    let mut hs = builder(&psk, &prologue)
        .build_initiator()
        .map_err(|e| noise_failed(cx.peer, e))?;
    let mut out = [0u8; HANDSHAKE_MAX_RECORD];
    let n = hs
        .write_message(&[], &mut out)
        .map_err(|e| noise_failed(cx.peer, e))?;
    cx.write_all(s, &[&preamble()[..], &record(&out[..n])].concat())?;
    let answer = cx.read_record(s)?;
    if answer.is_empty() {
        return Err(AuthError::NotAccepted { peer: cx.peer });
    }
    let mut payload = [0u8; HANDSHAKE_MAX_RECORD];
    if hs.read_message(&answer, &mut payload).is_err() {
        return Err(AuthError::PeerFailed { peer: cx.peer });
    }
    let t = hs
        .into_stateless_transport_mode()
        .map_err(|e| noise_failed(cx.peer, e))?;
    Ok(Session(Arc::new(t)))
}

/// Which end of the channel a half belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `benchlab run`.
    Controller,
    /// `benchlab agent --listen`.
    Agent,
}

/// The sending half: collects what the frame layer writes and sends it as
/// records when the frame layer flushes (it flushes after every frame).
pub struct SecureWriter<W: Write> {
    inner: W,
    session: Session,
    nonce: u64,
    pending: Vec<u8>,
}

impl<W: Write> SecureWriter<W> {
    /// A writer on a channel opened by a handshake.
    pub fn new(inner: W, session: Session) -> SecureWriter<W> {
        SecureWriter {
            inner,
            session,
            nonce: 0,
            pending: Vec::new(),
        }
    }

    /// Records sent so far.
    pub fn sent(&self) -> u64 {
        self.nonce
    }
}

impl<W: Write> Write for SecureWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.pending.len() + buf.len() > crate::frame::MAX_FRAME as usize + 4 {
            return Err(io::Error::other(
                "more than one frame written without a flush",
            ));
        }
        self.pending.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut wire = Vec::with_capacity(self.pending.len() + 64);
        let mut sealed = vec![0u8; MAX_RECORD];
        for chunk in self.pending.chunks(MAX_PLAINTEXT) {
            let n = self
                .session
                .0
                .write_message(self.nonce, chunk, &mut sealed)
                .map_err(|e| io::Error::other(format!("cannot encrypt a record: {e}")))?;
            self.nonce += 1;
            wire.extend_from_slice(&(n as u16).to_be_bytes());
            wire.extend_from_slice(&sealed[..n]);
        }
        self.pending.clear();
        self.inner.write_all(&wire)?;
        self.inner.flush()
    }
}

/// The receiving half: decrypts and verifies each record before the frame
/// layer sees a byte of it. The first record that fails (altered,
/// replayed, reordered, dropped before it, cut short, or not from our
/// peer) is an error, and so is everything after it: the caller drops the
/// connection, and nothing in it is parsed.
pub struct SecureReader<R: Read> {
    inner: R,
    session: Session,
    nonce: u64,
    body: Vec<u8>,
    pos: usize,
    failed: Option<String>,
}

impl<R: Read> SecureReader<R> {
    /// A reader on a channel opened by a handshake.
    pub fn new(inner: R, session: Session) -> SecureReader<R> {
        SecureReader {
            inner,
            session,
            nonce: 0,
            body: Vec::new(),
            pos: 0,
            failed: None,
        }
    }

    /// Records received so far.
    pub fn received(&self) -> u64 {
        self.nonce
    }

    /// The next record's plaintext; `Ok(false)` at a clean end of stream
    /// (between records).
    fn next_record(&mut self) -> io::Result<bool> {
        let mut len = [0u8; 2];
        if !read_start(&mut self.inner, &mut len)? {
            return Ok(false);
        }
        let len = u16::from_be_bytes(len) as usize;
        if len < TAG_LEN {
            return Err(self.fail(format!(
                "record {} is {len} bytes, shorter than its tag",
                self.nonce
            )));
        }
        let mut sealed = vec![0u8; len];
        self.inner.read_exact(&mut sealed).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the connection ended inside a record",
                )
            } else {
                e
            }
        })?;
        let mut plain = vec![0u8; len];
        match self.session.0.read_message(self.nonce, &sealed, &mut plain) {
            Ok(n) => plain.truncate(n),
            Err(_) => {
                return Err(self.fail(format!(
                    "record {} failed authentication (altered on the way, replayed, reordered, or not sent by our peer)",
                    self.nonce
                )))
            }
        }
        self.nonce += 1;
        self.body = plain;
        self.pos = 0;
        Ok(true)
    }

    fn fail(&mut self, why: String) -> io::Error {
        let why = format!("{why}; connection dropped");
        self.failed = Some(why.clone());
        io::Error::new(io::ErrorKind::InvalidData, why)
    }
}

/// Fills `buf` from the start of a record: `Ok(false)` when the stream
/// ends before its first byte (a clean close), an error when it ends
/// inside.
fn read_start(r: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the connection ended inside a record",
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

impl<R: Read> Read for SecureReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(why) = &self.failed {
            return Err(io::Error::new(io::ErrorKind::InvalidData, why.clone()));
        }
        while self.pos == self.body.len() {
            match self.next_record() {
                Ok(true) => {}
                Ok(false) => return Ok(0),
                Err(e) => {
                    // Out of step with the records after any error (a
                    // truncated one, a timeout part-way): refuse the rest.
                    if self.failed.is_none() {
                        self.failed = Some(e.to_string());
                    }
                    return Err(e);
                }
            }
        }
        let n = buf.len().min(self.body.len() - self.pos);
        buf[..n].copy_from_slice(&self.body[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// A TCP connection with an open channel: frames written are encrypted,
/// frames read are verified and decrypted.
pub struct SecureStream {
    reader: SecureReader<TcpStream>,
    writer: SecureWriter<TcpStream>,
}

impl SecureStream {
    /// Wraps a connection whose handshake gave `session`.
    pub fn new(stream: TcpStream, session: Session) -> io::Result<SecureStream> {
        Ok(SecureStream {
            reader: SecureReader::new(stream.try_clone()?, session.clone()),
            writer: SecureWriter::new(stream, session),
        })
    }

    /// The connection (for timeouts and shutting it down).
    pub fn tcp(&self) -> &TcpStream {
        &self.writer.inner
    }

    /// The two halves, for a reader thread and a writer.
    pub fn into_halves(self) -> (SecureReader<TcpStream>, SecureWriter<TcpStream>) {
        (self.reader, self.writer)
    }
}

impl fmt::Debug for SecureStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecureStream")
            .field("peer", &self.tcp().peer_addr().ok())
            .field("sent", &self.writer.nonce)
            .field("received", &self.reader.nonce)
            .finish()
    }
}

impl Read for SecureStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buf)
    }
}

impl Write for SecureStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

/// A session made from a key without a peer, for the fuzzer and the
/// record-layer tests: two handshakes run against each other in memory,
/// the halves facing each other returned (controller's, agent's).
#[doc(hidden)]
pub fn session_pair(key: &Key) -> (Session, Session) {
    let prologue = [preamble(), preamble()].concat();
    let psk = key.psk();
    let mut i = builder(&psk, &prologue)
        .build_initiator()
        .expect("initiator");
    let mut r = builder(&psk, &prologue)
        .build_responder()
        .expect("responder");
    let (mut a, mut b) = ([0u8; 256], [0u8; 256]);
    let n = i.write_message(&[], &mut a).expect("msg 1");
    r.read_message(&a[..n], &mut b).expect("msg 1 read");
    let n = r.write_message(&[], &mut a).expect("msg 2");
    i.read_message(&a[..n], &mut b).expect("msg 2 read");
    (
        Session(Arc::new(i.into_stateless_transport_mode().expect("i"))),
        Session(Arc::new(r.into_stateless_transport_mode().expect("r"))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"a shared key of 32 bytes, really";

    fn seal(session: &Session, frames: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = SecureWriter::new(&mut out, session.clone());
        for f in frames {
            w.write_all(f).unwrap();
            w.flush().unwrap();
        }
        out
    }

    fn open(session: &Session, wire: &[u8]) -> io::Result<Vec<u8>> {
        let mut r = SecureReader::new(wire, session.clone());
        let mut out = Vec::new();
        r.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn records_round_trip_both_ways_and_large_frames_are_split() {
        let (c, a) = session_pair(&Key::from_bytes(KEY));
        let big = vec![7u8; 200_000];
        let wire = seal(&c, &[b"hello", &big]);
        assert_eq!(open(&a, &wire).unwrap(), [&b"hello"[..], &big].concat());
        // The other direction has its own keys: a record sent by the
        // controller does not open as one from the agent.
        let back = seal(&a, &[b"answer"]);
        assert_eq!(open(&c, &back).unwrap(), b"answer");
        assert!(open(&c, &wire).is_err(), "reflected records are refused");
        // Ciphertext, not the frame in clear.
        assert!(!wire.windows(5).any(|w| w == b"hello"));
    }

    #[test]
    fn tampering_is_refused() {
        let (c, a) = session_pair(&Key::from_bytes(KEY));
        let wire = seal(&c, &[b"first", b"second"]);
        let first_len = 2 + u16::from_be_bytes([wire[0], wire[1]]) as usize;
        // A flipped bit anywhere in a record.
        for i in 2..first_len {
            let mut w = wire.clone();
            w[i] ^= 0x10;
            assert!(open(&a, &w).is_err(), "bit flipped at {i}");
        }
        // Reordered, replayed, dropped.
        let (r1, r2) = wire.split_at(first_len);
        assert!(open(&a, &[r2, r1].concat()).is_err(), "reordered");
        assert!(open(&a, &[r1, r1].concat()).is_err(), "replayed");
        assert!(open(&a, r2).is_err(), "the first dropped");
        // Cut inside a record.
        let e = open(&a, &wire[..wire.len() - 3]).unwrap_err();
        assert!(e.to_string().contains("ended inside a record"), "{e}");
        // Another session's records.
        let (c2, _) = session_pair(&Key::from_bytes(KEY));
        assert!(open(&a, &seal(&c2, &[b"first"])).is_err(), "other session");
    }

    #[test]
    fn the_key_never_prints() {
        let k = Key::from_bytes(KEY);
        assert!(!format!("{k:?}").contains("shared"));
        let (c, _) = session_pair(&k);
        assert_eq!(format!("{c:?}"), "Session(…)");
    }
}
