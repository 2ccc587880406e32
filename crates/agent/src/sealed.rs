//! Every frame authenticated after the `--listen` handshake.
//!
//! The handshake ([`crate::auth`]) proves that both ends hold the shared
//! key `K`, but on its own it leaves the connection open to anyone on the
//! path afterwards: they could alter a request, replay one, reorder two or
//! inject their own. So after it, every frame travels in a *record*:
//!
//! ```text
//! len: u32 BE | seq: u64 BE | body: len bytes | mac: 32 bytes
//! mac = HMAC-SHA256(Ks, direction label ‖ seq ‖ len ‖ body)
//! Ks  = HMAC-SHA256(K, "benchlab-session-v2" ‖ Na ‖ Nc)
//! ```
//!
//! `body` is one ordinary frame ([`crate::frame`]: length and JSON), so
//! the control protocol above is unchanged: [`SealedWriter`] collects what
//! the frame layer writes and seals it as one record when the frame layer
//! flushes (it flushes after every frame), and [`SealedReader`] hands the
//! frame layer the body of each record only once it has been verified.
//!
//! - The session key `Ks` covers both handshake nonces, so a record from
//!   another connection never verifies on this one.
//! - Each direction has its own label, so a record reflected back to its
//!   sender fails.
//! - `seq` counts records from 0 in each direction and the reader insists
//!   on the next one: a replayed, reordered or dropped record is refused.
//! - Any change to a byte of a record, and any record made without `Ks`,
//!   fails the MAC (compared in constant time).
//!
//! On the first record that fails, the reader returns an error and refuses
//! everything after it: the caller drops the connection, and the frame is
//! never parsed, so nothing it asked for runs. There is no encryption:
//! the traffic stays readable on the path (see `docs/security.md`).

use std::io::{self, Read, Write};
use std::net::TcpStream;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::frame::MAX_FRAME;

/// Length of the MAC ending each record, bytes.
pub const MAC_LEN: usize = 32;
/// Largest record body: one frame of [`MAX_FRAME`] bytes and its length.
pub const MAX_RECORD: u32 = MAX_FRAME + 4;

const SESSION_LABEL: &[u8] = b"benchlab-session-v2";
const TO_AGENT_LABEL: &[u8] = b"benchlab-frame-v2/to-agent";
const TO_CONTROLLER_LABEL: &[u8] = b"benchlab-frame-v2/to-controller";

type HmacSha256 = Hmac<Sha256>;

/// The key that authenticates one connection's records, derived from the
/// shared key and both handshake nonces.
#[derive(Clone)]
pub struct SessionKey([u8; 32]);

impl SessionKey {
    /// `HMAC-SHA256(K, "benchlab-session-v2" ‖ Na ‖ Nc)`: the agent's nonce
    /// first, as in the handshake's labels.
    pub(crate) fn derive(key: &[u8], agent_nonce: &[u8], controller_nonce: &[u8]) -> SessionKey {
        let mac = <HmacSha256 as KeyInit>::new_from_slice(key)
            .expect("HMAC accepts any key length")
            .chain_update(SESSION_LABEL)
            .chain_update(agent_nonce)
            .chain_update(controller_nonce)
            .finalize()
            .into_bytes();
        SessionKey(mac.into())
    }

    /// A key made from raw bytes, for tests of the record layer.
    #[doc(hidden)]
    pub fn from_bytes(bytes: [u8; 32]) -> SessionKey {
        SessionKey(bytes)
    }

    fn mac(&self, dir: Direction, seq: u64, body: &[u8]) -> HmacSha256 {
        <HmacSha256 as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC accepts any key length")
            .chain_update(dir.label())
            .chain_update(seq.to_be_bytes())
            .chain_update((body.len() as u32).to_be_bytes())
            .chain_update(body)
    }
}

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.write_str("SessionKey(…)")
    }
}

/// Which way a record travels; each way has its own MAC label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Controller → agent: requests.
    ToAgent,
    /// Agent → controller: responses.
    ToController,
}

impl Direction {
    fn label(self) -> &'static [u8] {
        match self {
            Direction::ToAgent => TO_AGENT_LABEL,
            Direction::ToController => TO_CONTROLLER_LABEL,
        }
    }
}

/// Seals what is written into one record per flush.
pub struct SealedWriter<W: Write> {
    inner: W,
    key: SessionKey,
    dir: Direction,
    seq: u64,
    pending: Vec<u8>,
}

impl<W: Write> SealedWriter<W> {
    /// Records to `inner`, travelling `dir`, numbered from 0.
    pub fn new(inner: W, key: SessionKey, dir: Direction) -> SealedWriter<W> {
        SealedWriter {
            inner,
            key,
            dir,
            seq: 0,
            pending: Vec::new(),
        }
    }
}

impl<W: Write> Write for SealedWriter<W> {
    /// Collects bytes; nothing is sent before [`Write::flush`].
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.pending.len() + buf.len() > MAX_RECORD as usize {
            return Err(io::Error::other(format!(
                "a record would exceed {MAX_RECORD} bytes: flush after each frame"
            )));
        }
        self.pending.extend_from_slice(buf);
        Ok(buf.len())
    }

    /// Sends what was written since the last flush as one record.
    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let mac = self
                .key
                .mac(self.dir, self.seq, &self.pending)
                .finalize()
                .into_bytes();
            let mut record = Vec::with_capacity(12 + self.pending.len() + MAC_LEN);
            record.extend_from_slice(&(self.pending.len() as u32).to_be_bytes());
            record.extend_from_slice(&self.seq.to_be_bytes());
            record.extend_from_slice(&self.pending);
            record.extend_from_slice(&mac);
            self.inner.write_all(&record)?;
            self.pending.clear();
            self.seq += 1;
        }
        self.inner.flush()
    }
}

/// Verifies records and yields their bodies; refuses everything after the
/// first record that fails.
pub struct SealedReader<R: Read> {
    inner: R,
    key: SessionKey,
    dir: Direction,
    seq: u64,
    body: Vec<u8>,
    pos: usize,
    failed: Option<String>,
}

impl<R: Read> SealedReader<R> {
    /// Reads records from `inner`, travelling `dir`, expecting 0 first.
    pub fn new(inner: R, key: SessionKey, dir: Direction) -> SealedReader<R> {
        SealedReader {
            inner,
            key,
            dir,
            seq: 0,
            body: Vec::new(),
            pos: 0,
            failed: None,
        }
    }

    /// Reads and verifies the next record into `self.body`. `Ok(false)` at
    /// a clean end of stream between records.
    fn next_record(&mut self) -> io::Result<bool> {
        let mut len = [0u8; 4];
        if !read_start(&mut self.inner, &mut len)? {
            return Ok(false);
        }
        let len = u32::from_be_bytes(len);
        if len > MAX_RECORD {
            return Err(self.fail(format!(
                "record {} announces {len} bytes, more than the {MAX_RECORD}-byte cap",
                self.seq
            )));
        }
        let mut seq = [0u8; 8];
        let mut body = vec![0u8; len as usize];
        let mut mac = [0u8; MAC_LEN];
        let truncated = |e: io::Error| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the connection ended inside a record",
                )
            } else {
                e
            }
        };
        self.inner.read_exact(&mut seq).map_err(truncated)?;
        self.inner.read_exact(&mut body).map_err(truncated)?;
        self.inner.read_exact(&mut mac).map_err(truncated)?;
        let seq = u64::from_be_bytes(seq);
        if self
            .key
            .mac(self.dir, seq, &body)
            .verify_slice(&mac)
            .is_err()
        {
            return Err(self.fail(format!(
                "record {} failed authentication (altered on the way, or not sent by our peer)",
                self.seq
            )));
        }
        if seq != self.seq {
            return Err(self.fail(format!(
                "record {seq} arrived where record {} was due (replayed or reordered)",
                self.seq
            )));
        }
        self.seq += 1;
        self.body = body;
        self.pos = 0;
        Ok(true)
    }

    fn fail(&mut self, why: String) -> io::Error {
        let why = format!("{why}; connection dropped");
        self.failed = Some(why.clone());
        io::Error::new(io::ErrorKind::InvalidData, why)
    }
}

/// Reads the first bytes of a record: `Ok(false)` when the stream ends
/// cleanly before any, an error when it ends part-way.
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

impl<R: Read> Read for SealedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(why) = &self.failed {
            return Err(io::Error::new(io::ErrorKind::InvalidData, why.clone()));
        }
        if self.pos == self.body.len() {
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

/// Which end of a connection this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `benchlab run`: writes to the agent, reads from it.
    Controller,
    /// `benchlab agent --listen`.
    Agent,
}

/// An authenticated TCP connection: frames written to it are sealed,
/// frames read from it verified ([`crate::listen::connect`] returns one).
pub struct AuthedStream {
    reader: SealedReader<TcpStream>,
    writer: SealedWriter<TcpStream>,
}

impl AuthedStream {
    /// Wraps a stream whose handshake produced `key`, for one `role`.
    pub fn new(stream: TcpStream, key: SessionKey, role: Role) -> io::Result<AuthedStream> {
        let (read_dir, write_dir) = match role {
            Role::Controller => (Direction::ToController, Direction::ToAgent),
            Role::Agent => (Direction::ToAgent, Direction::ToController),
        };
        Ok(AuthedStream {
            reader: SealedReader::new(stream.try_clone()?, key.clone(), read_dir),
            writer: SealedWriter::new(stream, key, write_dir),
        })
    }

    /// The underlying socket (for timeouts, shutdown, or a clone to close
    /// it from another thread). Bytes written to it directly bypass the
    /// seal and make the peer drop the connection.
    pub fn tcp(&self) -> &TcpStream {
        &self.writer.inner
    }

    /// The reading and the writing half, for a reader thread.
    pub fn into_halves(self) -> (SealedReader<TcpStream>, SealedWriter<TcpStream>) {
        (self.reader, self.writer)
    }
}

impl std::fmt::Debug for AuthedStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthedStream")
            .field("peer", &self.tcp().peer_addr().ok())
            .field("sent", &self.writer.seq)
            .field("received", &self.reader.seq)
            .finish()
    }
}

impl Read for AuthedStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buf)
    }
}

impl Write for AuthedStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{read_frame, write_frame};
    use serde_json::{json, Value};

    fn key() -> SessionKey {
        SessionKey::derive(b"a shared key of 32 bytes, really", &[1; 32], &[2; 32])
    }

    /// Two frames sealed controller → agent, as one byte string.
    fn two_records() -> Vec<u8> {
        let mut w = SealedWriter::new(Vec::new(), key(), Direction::ToAgent);
        write_frame(&mut w, &json!({"request": "hello"})).unwrap();
        write_frame(&mut w, &json!({"request": "shutdown"})).unwrap();
        w.inner
    }

    fn read_all(bytes: &[u8], dir: Direction) -> (Vec<Value>, Option<String>) {
        let mut r = SealedReader::new(bytes, key(), dir);
        let mut got = Vec::new();
        loop {
            match read_frame::<_, Value>(&mut r) {
                Ok(Some(v)) => got.push(v),
                Ok(None) => return (got, None),
                Err(e) => {
                    // Nothing after a failure, however the stream goes on.
                    assert!(read_frame::<_, Value>(&mut r).is_err());
                    return (got, Some(e.to_string()));
                }
            }
        }
    }

    fn record_len(bytes: &[u8]) -> usize {
        12 + u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize + MAC_LEN
    }

    #[test]
    fn frames_round_trip_in_order() {
        let (got, err) = read_all(&two_records(), Direction::ToAgent);
        assert_eq!(err, None);
        assert_eq!(
            got,
            [json!({"request": "hello"}), json!({"request": "shutdown"})]
        );
    }

    #[test]
    fn any_flipped_bit_is_refused() {
        let bytes = two_records();
        let first = record_len(&bytes);
        for i in 0..first {
            for bit in [0x01, 0x80] {
                let mut b = bytes.clone();
                b[i] ^= bit;
                let (got, err) = read_all(&b, Direction::ToAgent);
                assert!(got.is_empty(), "byte {i}: {got:?}");
                assert!(err.is_some(), "byte {i} bit {bit:#x} went through");
            }
        }
    }

    #[test]
    fn replayed_reordered_reflected_and_injected_records_are_refused() {
        let bytes = two_records();
        let first = record_len(&bytes);
        let (r0, r1) = bytes.split_at(first);
        // Replay: record 0 twice.
        let (got, err) = read_all(&[r0, r0].concat(), Direction::ToAgent);
        assert_eq!(got.len(), 1);
        assert!(err
            .unwrap()
            .contains("record 0 arrived where record 1 was due"));
        // Reorder.
        let (got, err) = read_all(&[r1, r0].concat(), Direction::ToAgent);
        assert!(got.is_empty());
        assert!(err.unwrap().contains("replayed or reordered"));
        // Reflection: the agent's reader sees its own direction's label.
        let (got, err) = read_all(&bytes, Direction::ToController);
        assert!(got.is_empty());
        assert!(err.unwrap().contains("failed authentication"));
        // Injection: a record sealed with another session's key.
        let other = SessionKey::derive(b"a shared key of 32 bytes, really", &[3; 32], &[2; 32]);
        let mut w = SealedWriter::new(Vec::new(), other, Direction::ToAgent);
        write_frame(&mut w, &json!({"request": "shutdown"})).unwrap();
        let (got, err) = read_all(&[r0, &w.inner].concat(), Direction::ToAgent);
        assert_eq!(got.len(), 1);
        assert!(err.unwrap().contains("record 1 failed authentication"));
    }

    #[test]
    fn a_truncated_record_is_an_error_not_a_clean_end() {
        let bytes = two_records();
        for cut in [2, 10, 20, record_len(&bytes) - 1] {
            let (got, err) = read_all(&bytes[..cut], Direction::ToAgent);
            assert!(got.is_empty());
            assert!(err.unwrap().contains("ended inside a record"), "cut {cut}");
        }
    }

    #[test]
    fn an_oversized_record_is_refused_before_it_is_read() {
        let mut b = (MAX_RECORD + 1).to_be_bytes().to_vec();
        b.extend_from_slice(&[0; 8]);
        let (_, err) = read_all(&b, Direction::ToAgent);
        assert!(err.unwrap().contains("cap"));
    }

    #[test]
    fn session_keys_differ_per_connection_and_never_print() {
        let a = SessionKey::derive(b"k", &[1; 32], &[2; 32]);
        let b = SessionKey::derive(b"k", &[2; 32], &[1; 32]);
        assert_ne!(a.0, b.0);
        assert_eq!(format!("{a:?}"), "SessionKey(…)");
    }
}
