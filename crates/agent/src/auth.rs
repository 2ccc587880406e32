//! Mutual shared-secret authentication for agents reached over TCP
//! (`benchlab agent --listen`), where no transport (SSH, a local pipe)
//! vouches for the peer.
//!
//! Both ends hold the same key `K` (a file, see [`load_key`]). Before the
//! agent reads a single request, the two ends prove to each other that they
//! hold `K`, with HMAC-SHA256 over fresh 32-byte nonces from the operating
//! system's random source. The messages are ordinary frames (a 4-byte
//! big-endian length and JSON, as in [`crate::frame`]), so the wire stays one
//! format; byte strings are lower-case hex.
//!
//! ```text
//! agent → controller  {"auth":"challenge","scheme":"benchlab-auth-v2","protocol":1,"nonce":hex(Na)}
//! controller → agent  {"auth":"response","nonce":hex(Nc),"mac":hex(HMAC(K, "benchlab-auth-v2/controller" ‖ Na ‖ Nc))}
//! agent → controller  {"auth":"accepted","mac":hex(HMAC(K, "benchlab-auth-v2/agent" ‖ Nc ‖ Na))}
//!                  or {"auth":"rejected","reason":"…"} and the agent closes the connection
//! ```
//!
//! Each side checks the other's MAC in constant time
//! ([`hmac::Mac::verify_slice`]). The labels differ by role, so one side's
//! proof can never be replayed as the other's (no reflection), and a proof
//! covers both nonces, so an old one fails against a fresh nonce (no
//! replay). The labels and nonces have fixed lengths, so the concatenation
//! is unambiguous.
//!
//! Only after the agent has verified the controller does it start the
//! control protocol ([`crate::server::serve`]); a controller whose MAC fails
//! gets `rejected` and a closed connection (a malformed answer just the
//! closed connection), and nothing it sent is ever parsed as a request. The controller in turn refuses an agent whose
//! proof fails, so it cannot be fooled into running a study against an
//! impostor.
//!
//! Handshake messages are read with their own small size cap
//! ([`HANDSHAKE_MAX_FRAME`]) so that an unauthenticated peer cannot make the
//! agent allocate or wait for a large frame; the deadline
//! ([`HANDSHAKE_TIMEOUT`]) is applied by the transport (see
//! [`crate::listen`]).
//!
//! Both ends then derive a session key from `K` and both nonces, and every
//! frame after the handshake travels sealed with it, numbered, in both
//! directions ([`crate::sealed`]); `v2` of the scheme is that, `v1` had no
//! per-frame MACs, and the two refuse each other by the scheme name. What
//! this does not protect (confidentiality) is in `docs/security.md`.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::frame::write_frame;
use crate::protocol::PROTOCOL_VERSION;
use crate::sealed::SessionKey;

/// Name and version of the handshake, sent in the challenge and used as the
/// prefix of both MAC labels.
pub const AUTH_SCHEME: &str = "benchlab-auth-v2";
/// How long an agent waits for a connecting peer to complete the handshake.
/// A legitimate controller answers in milliseconds; the limit only bounds
/// how long a silent or slow peer can hold a one-session-at-a-time agent.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Shortest accepted key, in bytes. 16 bytes of random data (128 bits) is
/// the usual floor for a MAC key (NIST SP 800-107 §5.3.4 asks for at least
/// the security strength wanted); a generated key is longer.
pub const MIN_KEY_LEN: usize = 16;
/// Largest handshake frame accepted. The real messages are under 300 bytes;
/// the general [`crate::frame::MAX_FRAME`] (16 MiB) is meant for results
/// from authenticated peers.
pub const HANDSHAKE_MAX_FRAME: u32 = 1024;
/// Length of each nonce, in bytes.
pub const NONCE_LEN: usize = 32;

const CONTROLLER_LABEL: &[u8] = b"benchlab-auth-v2/controller";
const AGENT_LABEL: &[u8] = b"benchlab-auth-v2/agent";

type HmacSha256 = Hmac<Sha256>;

/// Who the other end of a handshake is, for error messages.
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

/// What went wrong loading a key or authenticating a peer.
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
    /// The key file grants some access to group or others.
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
    /// The key is too short to be a secret.
    #[error(
        "key file {} holds {len} bytes; a shared key needs at least {MIN_KEY_LEN} (make one with `head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE`)",
        path.display()
    )]
    KeyTooShort {
        /// The file.
        path: PathBuf,
        /// The key's length after trimming a trailing newline.
        len: usize,
    },
    /// The agent checked our proof and refused it: the key files differ.
    #[error("{peer} did not accept our key")]
    NotAccepted {
        /// The agent.
        peer: Peer,
    },
    /// The peer's proof did not verify: it does not hold our key.
    #[error("{peer} failed authentication: it does not hold our key")]
    PeerFailed {
        /// The peer.
        peer: Peer,
    },
    /// The peer did not complete the handshake before the deadline.
    #[error("{peer} did not complete the authentication handshake{}", within(.timeout))]
    Timeout {
        /// The peer.
        peer: Peer,
        /// The deadline, when known.
        timeout: Option<Duration>,
    },
    /// The peer sent something that is not a benchlab handshake message.
    #[error("{peer} is not a benchlab peer: {detail}")]
    NotBenchlab {
        /// The peer.
        peer: Peer,
        /// What it sent.
        detail: String,
    },
    /// The agent speaks another version of the handshake.
    #[error(
        "{peer} speaks authentication scheme `{theirs}`, this benchlab speaks `{AUTH_SCHEME}`"
    )]
    Scheme {
        /// The agent.
        peer: Peer,
        /// Its scheme.
        theirs: String,
    },
    /// The peer closed the connection before the handshake completed.
    #[error("{peer} closed the connection during the authentication handshake")]
    Closed {
        /// The peer.
        peer: Peer,
    },
    /// The controller could not reach the agent.
    #[error("cannot connect to the agent at {addr}: {source}")]
    Connect {
        /// The agent's address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// Any other I/O failure during the handshake (or no random numbers).
    #[error("authentication handshake with {peer}: {source}")]
    Io {
        /// The peer.
        peer: Peer,
        /// Why.
        source: io::Error,
    },
}

/// Loads a shared key: the file's bytes, less one trailing newline (`\n`
/// or `\r\n`), used as the HMAC key as they are (any text or binary works;
/// what matters is its entropy).
///
/// Refuses a file that grants any permission to group or others — like
/// OpenSSH with private keys: a key others can read is no secret, and one
/// others can write lets them put in their own — and a key shorter than
/// [`MIN_KEY_LEN`] bytes.
pub fn load_key(path: &Path) -> Result<Vec<u8>, AuthError> {
    let key_err = |source| AuthError::KeyFile {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(key_err)?;
    // The mode of the file actually opened, not of whatever the path names
    // a moment later.
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
    Ok(key)
}

/// One handshake message. Byte strings are lower-case hex.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "auth", rename_all = "snake_case")]
enum AuthMsg {
    /// Agent → controller, first: the agent's nonce `Na`.
    Challenge {
        scheme: String,
        protocol: u32,
        nonce: String,
    },
    /// Controller → agent: `Nc` and `HMAC(K, controller label ‖ Na ‖ Nc)`.
    Response { nonce: String, mac: String },
    /// Agent → controller: `HMAC(K, agent label ‖ Nc ‖ Na)`.
    Accepted { mac: String },
    /// Agent → controller: the controller's proof failed.
    Rejected { reason: String },
}

/// The context of one handshake, for error messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx {
    pub(crate) peer: Peer,
    pub(crate) timeout: Option<Duration>,
}

impl Ctx {
    fn io(&self, e: io::Error) -> AuthError {
        match e.kind() {
            // A read timeout shows as WouldBlock on Unix sockets.
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

    /// Reads one handshake frame: the ordinary frame format with a small
    /// cap, read here rather than with [`crate::frame::read_frame`] so that
    /// an unauthenticated peer cannot announce a 16 MiB frame.
    fn read(&self, s: &mut impl Read) -> Result<AuthMsg, AuthError> {
        let mut len = [0u8; 4];
        s.read_exact(&mut len).map_err(|e| self.io(e))?;
        let len = u32::from_be_bytes(len);
        if len > HANDSHAKE_MAX_FRAME {
            return Err(self.not_benchlab(format!(
                "it announced a {len}-byte message; handshake messages are at most {HANDSHAKE_MAX_FRAME} bytes"
            )));
        }
        let mut body = vec![0u8; len as usize];
        s.read_exact(&mut body).map_err(|e| self.io(e))?;
        serde_json::from_slice(&body).map_err(|e| {
            let request = serde_json::from_slice::<serde_json::Value>(&body)
                .is_ok_and(|v| v.get("request").is_some());
            if request {
                // A controller speaking the control protocol straight away
                // (one set up for a pipe, not for `--listen`).
                self.not_benchlab("it sent a request without authenticating first")
            } else {
                self.not_benchlab(format!("bad handshake message: {e}"))
            }
        })
    }

    fn write(&self, s: &mut impl Write, msg: &AuthMsg) -> Result<(), AuthError> {
        write_frame(s, msg).map_err(|e| self.io(e))
    }

    fn nonce(&self, field: &str, text: &str) -> Result<[u8; NONCE_LEN], AuthError> {
        hex_decode(text)
            .and_then(|b| <[u8; NONCE_LEN]>::try_from(b).ok())
            .ok_or_else(|| self.not_benchlab(format!("`{field}` is not {NONCE_LEN} bytes of hex")))
    }
}

/// Runs the agent's side of the handshake: sends the challenge, checks the
/// controller's proof, and proves itself. On `Ok` the stream carries the
/// control protocol next, sealed with the returned key
/// ([`crate::sealed`]); on `Err` nothing further must be read from it.
///
/// Set a read timeout on the stream first (see [`crate::listen`]): this
/// function waits for the peer as long as the stream lets it.
pub fn agent_handshake<S: Read + Write>(s: &mut S, key: &[u8]) -> Result<SessionKey, AuthError> {
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
    key: &[u8],
    cx: Ctx,
) -> Result<SessionKey, AuthError> {
    let na = fresh_nonce(&cx)?;
    cx.write(
        s,
        &AuthMsg::Challenge {
            scheme: AUTH_SCHEME.to_string(),
            protocol: PROTOCOL_VERSION,
            nonce: hex_encode(&na),
        },
    )?;
    let (nc, mac) = match cx.read(s)? {
        AuthMsg::Response { nonce, mac } => (cx.nonce("nonce", &nonce)?, mac),
        other => {
            return Err(cx.not_benchlab(format!(
                "expected an authentication response, got `{}`",
                msg_name(&other)
            )))
        }
    };
    // A peer echoing our own nonce gains nothing (the labels differ by
    // role), but it is no controller either.
    if nc == na {
        return Err(cx.not_benchlab("it echoed our nonce"));
    }
    if !verify(key, CONTROLLER_LABEL, &na, &nc, &mac) {
        // Best effort: the controller then reports a wrong key rather than
        // a closed connection.
        let _ = cx.write(
            s,
            &AuthMsg::Rejected {
                reason: "peer failed authentication".to_string(),
            },
        );
        return Err(AuthError::PeerFailed { peer: cx.peer });
    }
    cx.write(
        s,
        &AuthMsg::Accepted {
            mac: hex_encode(&tag(key, AGENT_LABEL, &nc, &na)),
        },
    )?;
    Ok(SessionKey::derive(key, &na, &nc))
}

/// Runs the controller's side of the handshake: answers the agent's
/// challenge and checks the agent's proof, so that a study never runs
/// against an impostor. On `Ok` the stream carries the control protocol
/// next (starting with `hello`), sealed with the returned key
/// ([`crate::sealed`]).
///
/// Set a read timeout on the stream first (see [`crate::listen::connect`]).
pub fn controller_handshake<S: Read + Write>(
    s: &mut S,
    key: &[u8],
) -> Result<SessionKey, AuthError> {
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
    key: &[u8],
    cx: Ctx,
) -> Result<SessionKey, AuthError> {
    let na = match cx.read(s)? {
        AuthMsg::Challenge { scheme, nonce, .. } => {
            if scheme != AUTH_SCHEME {
                return Err(AuthError::Scheme {
                    peer: cx.peer,
                    theirs: scheme,
                });
            }
            cx.nonce("nonce", &nonce)?
        }
        other => {
            return Err(cx.not_benchlab(format!(
                "expected an authentication challenge, got `{}`",
                msg_name(&other)
            )))
        }
    };
    let nc = fresh_nonce(&cx)?;
    cx.write(
        s,
        &AuthMsg::Response {
            nonce: hex_encode(&nc),
            mac: hex_encode(&tag(key, CONTROLLER_LABEL, &na, &nc)),
        },
    )?;
    match cx.read(s)? {
        AuthMsg::Accepted { mac } => {
            if verify(key, AGENT_LABEL, &nc, &na, &mac) {
                Ok(SessionKey::derive(key, &na, &nc))
            } else {
                Err(AuthError::PeerFailed { peer: cx.peer })
            }
        }
        AuthMsg::Rejected { .. } => Err(AuthError::NotAccepted { peer: cx.peer }),
        other => Err(cx.not_benchlab(format!(
            "expected the agent's proof, got `{}`",
            msg_name(&other)
        ))),
    }
}

fn msg_name(m: &AuthMsg) -> &'static str {
    match m {
        AuthMsg::Challenge { .. } => "challenge",
        AuthMsg::Response { .. } => "response",
        AuthMsg::Accepted { .. } => "accepted",
        AuthMsg::Rejected { .. } => "rejected",
    }
}

fn fresh_nonce(cx: &Ctx) -> Result<[u8; NONCE_LEN], AuthError> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).map_err(|e| AuthError::Io {
        peer: cx.peer,
        source: io::Error::other(format!("no random numbers for a nonce: {e}")),
    })?;
    Ok(n)
}

fn mac_over(key: &[u8], label: &[u8], a: &[u8], b: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length (RFC 2104 §2), so this cannot fail.
    <HmacSha256 as KeyInit>::new_from_slice(key)
        .expect("HMAC accepts any key length")
        .chain_update(label)
        .chain_update(a)
        .chain_update(b)
}

fn tag(key: &[u8], label: &[u8], a: &[u8], b: &[u8]) -> Vec<u8> {
    mac_over(key, label, a, b).finalize().into_bytes().to_vec()
}

/// Constant-time comparison of the expected MAC with the received one
/// (`verify_slice` compares with `subtle`-style constant-time equality).
fn verify(key: &[u8], label: &[u8], a: &[u8], b: &[u8], received_hex: &str) -> bool {
    match hex_decode(received_hex) {
        Some(received) => mac_over(key, label, a, b).verify_slice(&received).is_ok(),
        None => false,
    }
}

fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.chunks_exact(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn hex_round_trip() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(hex_decode(&hex_encode(&bytes)).unwrap(), bytes);
        assert_eq!(hex_decode("0g"), None);
        assert_eq!(hex_decode("abc"), None);
        assert_eq!(hex_decode("ABff").unwrap(), vec![0xab, 0xff]);
    }

    /// RFC 4231 test case 2: our MAC construction is plain HMAC-SHA256.
    #[test]
    fn hmac_matches_rfc_4231() {
        let t = tag(b"Jefe", b"what do ya want ", b"for nothing", b"?");
        assert_eq!(
            hex_encode(&t),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn labels_separate_the_roles() {
        let (a, b) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let k = b"0123456789abcdef";
        assert_ne!(
            tag(k, CONTROLLER_LABEL, &a, &b),
            tag(k, AGENT_LABEL, &a, &b)
        );
        assert_ne!(tag(k, AGENT_LABEL, &b, &a), tag(k, AGENT_LABEL, &a, &b));
    }

    #[test]
    fn oversized_handshake_frame_is_refused_before_reading_it() {
        let cx = Ctx {
            peer: Peer::Controller,
            timeout: None,
        };
        let mut input = Cursor::new((HANDSHAKE_MAX_FRAME + 1).to_be_bytes().to_vec());
        let e = cx.read(&mut input).unwrap_err();
        assert!(matches!(e, AuthError::NotBenchlab { .. }), "{e}");
    }

    #[test]
    fn error_messages_name_the_agent() {
        let addr: SocketAddr = "192.0.2.7:7000".parse().unwrap();
        let e = AuthError::NotAccepted {
            peer: Peer::Agent(Some(addr)),
        };
        assert_eq!(
            e.to_string(),
            "the agent at 192.0.2.7:7000 did not accept our key"
        );
        let e = AuthError::PeerFailed {
            peer: Peer::Controller,
        };
        assert_eq!(
            e.to_string(),
            "peer failed authentication: it does not hold our key"
        );
        let e = AuthError::Timeout {
            peer: Peer::Controller,
            timeout: Some(Duration::from_secs(10)),
        };
        assert_eq!(
            e.to_string(),
            "peer did not complete the authentication handshake within 10.0s"
        );
    }
}
