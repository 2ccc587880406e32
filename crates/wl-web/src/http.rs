//! An incremental HTTP/1.x response parser for the load generator.
//!
//! It is fed whatever each `read()` returned and never allocates: the head
//! of a response is parsed straight from the read buffer when it arrives in
//! one piece (the usual case: nginx and apache2 send the head in the first
//! segment), and only a head split across reads is copied into a fixed
//! per-connection buffer. Bodies are counted, never stored. It understands
//! what a static-file server sends: the status line, `Content-Length`,
//! `Transfer-Encoding: chunked` (with extensions and trailers), bodies
//! delimited by the end of the connection, and `Connection` (keep-alive or
//! close, with HTTP/1.0's and HTTP/1.1's different defaults).

/// Largest response head accepted; a longer one is a protocol error.
pub const MAX_HEAD: usize = 8192;

/// What went wrong in a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// The head is longer than [`MAX_HEAD`].
    HeadTooLong,
    /// The status line is not `HTTP/1.x NNN …`.
    BadStatusLine,
    /// A `Content-Length` or chunk size is not a number.
    BadLength,
    /// Malformed chunked framing.
    BadChunk,
    /// Bytes after the end of a response that was not pipelined.
    TrailingData,
}

impl ParseError {
    /// A short description for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            ParseError::HeadTooLong => "response head longer than 8 KiB",
            ParseError::BadStatusLine => "malformed status line",
            ParseError::BadLength => "malformed Content-Length or chunk size",
            ParseError::BadChunk => "malformed chunked framing",
            ParseError::TrailingData => "data after the end of the response",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    /// `remaining` body bytes of a `Content-Length` body.
    Fixed {
        remaining: u64,
    },
    /// Reading a chunk-size line; `size` so far, `ext` once past `;`.
    ChunkSize {
        size: u64,
        digits: u32,
        ext: bool,
        cr: bool,
    },
    ChunkData {
        remaining: u64,
    },
    /// The CRLF after a chunk's data; `got` bytes of it seen.
    ChunkEnd {
        got: u8,
    },
    /// Trailer lines after the last chunk; `line_len` of the current line.
    Trailer {
        line_len: u32,
        cr: bool,
    },
    /// Body up to the end of the connection.
    UntilClose,
    Done,
}

/// The parse of one response, reset for each request.
pub struct Response {
    state: State,
    head: Box<[u8; MAX_HEAD]>,
    head_len: usize,
    /// The status code (valid once the head is parsed).
    pub status: u16,
    /// Whether the connection stays open after this response.
    pub keep_alive: bool,
    /// Bytes of the head (status line, headers, blank line).
    pub head_bytes: u64,
    /// Decoded body bytes (chunk framing excluded).
    pub body_bytes: u64,
    /// All bytes of the response as read from the socket.
    pub wire_bytes: u64,
    /// The declared `Content-Length`, if any.
    pub content_length: Option<u64>,
}

/// Result of feeding bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More bytes are needed.
    More,
    /// The response is complete.
    Done,
}

impl Default for Response {
    fn default() -> Self {
        Self::new()
    }
}

impl Response {
    /// A parser ready for a response.
    pub fn new() -> Self {
        Response {
            state: State::Head,
            head: Box::new([0; MAX_HEAD]),
            head_len: 0,
            status: 0,
            keep_alive: false,
            head_bytes: 0,
            body_bytes: 0,
            wire_bytes: 0,
            content_length: None,
        }
    }

    /// Resets for the next response on the same or a new connection.
    #[inline]
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.head_len = 0;
        self.status = 0;
        self.keep_alive = false;
        self.head_bytes = 0;
        self.body_bytes = 0;
        self.wire_bytes = 0;
        self.content_length = None;
    }

    /// Whether nothing of the response has arrived yet.
    pub fn untouched(&self) -> bool {
        self.wire_bytes == 0
    }

    /// Whether the head has been parsed.
    pub fn head_done(&self) -> bool {
        !matches!(self.state, State::Head)
    }

    /// The end of the connection arrived: completes a body delimited by
    /// it; anything else is a short response.
    pub fn eof(&mut self) -> Progress {
        if self.state == State::UntilClose {
            self.state = State::Done;
            self.keep_alive = false;
            Progress::Done
        } else {
            Progress::More
        }
    }

    /// Body bytes still expected of a `Content-Length` body (0 in every
    /// other state): what may be discarded unread.
    #[inline]
    pub fn body_remaining(&self) -> u64 {
        match self.state {
            State::Fixed { remaining } => remaining,
            _ => 0,
        }
    }

    /// Counts `n` body bytes that were discarded unread (at most
    /// [`Response::body_remaining`]).
    #[inline]
    pub fn skip_body(&mut self, n: u64) -> Progress {
        let State::Fixed { remaining } = self.state else {
            return Progress::More;
        };
        let n = n.min(remaining);
        self.wire_bytes += n;
        self.body_bytes += n;
        if n == remaining {
            self.state = State::Done;
            Progress::Done
        } else {
            self.state = State::Fixed {
                remaining: remaining - n,
            };
            Progress::More
        }
    }

    /// Feeds the bytes of one read.
    pub fn feed(&mut self, mut data: &[u8]) -> Result<Progress, ParseError> {
        self.wire_bytes += data.len() as u64;
        if self.state == State::Head {
            let used = self.feed_head(data)?;
            match used {
                None => return Ok(Progress::More),
                Some(n) => data = &data[n..],
            }
        }
        self.feed_body(data)
    }

    /// Parses the head; returns how many bytes of `data` it used once it
    /// is complete.
    fn feed_head(&mut self, data: &[u8]) -> Result<Option<usize>, ParseError> {
        if self.head_len == 0 {
            // The usual case: the whole head in this read, parsed in place.
            if let Some((end, head)) = scan_head(data)? {
                self.set_head(end, head);
                return Ok(Some(end));
            }
            self.stash(data)?;
            return Ok(None);
        }
        // The head was split across reads: continue in the stash and scan
        // it again from its start (rare, and the head is short).
        let before = self.head_len;
        let take = data.len().min(MAX_HEAD - before);
        self.head[before..before + take].copy_from_slice(&data[..take]);
        self.head_len += take;
        match scan_head(&self.head[..self.head_len])? {
            Some((end, head)) => {
                self.set_head(end, head);
                Ok(Some(end - before))
            }
            None if self.head_len == MAX_HEAD => Err(ParseError::HeadTooLong),
            None => Ok(None),
        }
    }

    fn stash(&mut self, data: &[u8]) -> Result<(), ParseError> {
        if data.len() > MAX_HEAD {
            return Err(ParseError::HeadTooLong);
        }
        self.head[..data.len()].copy_from_slice(data);
        self.head_len = data.len();
        Ok(())
    }

    /// Takes a parsed head of `len` bytes and picks how the body ends.
    fn set_head(&mut self, len: usize, head: Head) {
        self.head_bytes = len as u64;
        self.status = head.status;
        self.content_length = head.content_length;
        self.keep_alive = head.keep_alive;
        // RFC 9112 §6.3: no body for 1xx, 204, 304 (the generator sends no
        // HEAD); chunked wins over a Content-Length; without either the
        // body ends with the connection.
        self.state =
            if self.status == 204 || self.status == 304 || (100..200).contains(&self.status) {
                State::Done
            } else if head.chunked {
                State::ChunkSize {
                    size: 0,
                    digits: 0,
                    ext: false,
                    cr: false,
                }
            } else if let Some(n) = self.content_length {
                if n == 0 {
                    State::Done
                } else {
                    State::Fixed { remaining: n }
                }
            } else {
                self.keep_alive = false;
                State::UntilClose
            };
    }

    fn feed_body(&mut self, mut data: &[u8]) -> Result<Progress, ParseError> {
        loop {
            match self.state {
                State::Done => {
                    return if data.is_empty() {
                        Ok(Progress::Done)
                    } else {
                        Err(ParseError::TrailingData)
                    };
                }
                _ if data.is_empty() => return Ok(Progress::More),
                State::Head => unreachable!("head parsed before the body"),
                State::UntilClose => {
                    self.body_bytes += data.len() as u64;
                    return Ok(Progress::More);
                }
                State::Fixed { remaining } => {
                    let n = remaining.min(data.len() as u64);
                    self.body_bytes += n;
                    data = &data[n as usize..];
                    self.state = if n == remaining {
                        State::Done
                    } else {
                        State::Fixed {
                            remaining: remaining - n,
                        }
                    };
                }
                State::ChunkData { remaining } => {
                    let n = remaining.min(data.len() as u64);
                    self.body_bytes += n;
                    data = &data[n as usize..];
                    self.state = if n == remaining {
                        State::ChunkEnd { got: 0 }
                    } else {
                        State::ChunkData {
                            remaining: remaining - n,
                        }
                    };
                }
                State::ChunkEnd { got } => {
                    let want = if got == 0 { b'\r' } else { b'\n' };
                    if data[0] != want {
                        return Err(ParseError::BadChunk);
                    }
                    data = &data[1..];
                    self.state = if got == 0 {
                        State::ChunkEnd { got: 1 }
                    } else {
                        State::ChunkSize {
                            size: 0,
                            digits: 0,
                            ext: false,
                            cr: false,
                        }
                    };
                }
                State::ChunkSize {
                    size,
                    digits,
                    ext,
                    cr,
                } => {
                    let b = data[0];
                    data = &data[1..];
                    self.state = chunk_size_step(size, digits, ext, cr, b)?;
                }
                State::Trailer { line_len, cr } => {
                    let b = data[0];
                    data = &data[1..];
                    self.state = match (b, cr) {
                        (b'\r', false) => State::Trailer { line_len, cr: true },
                        (b'\n', true) if line_len == 0 => State::Done,
                        (b'\n', true) => State::Trailer {
                            line_len: 0,
                            cr: false,
                        },
                        (_, true) => return Err(ParseError::BadChunk),
                        _ => State::Trailer {
                            line_len: line_len + 1,
                            cr: false,
                        },
                    };
                }
            }
        }
    }
}

/// One byte of a chunk-size line (`1a2b;ext=1\r\n`).
fn chunk_size_step(
    size: u64,
    digits: u32,
    ext: bool,
    cr: bool,
    b: u8,
) -> Result<State, ParseError> {
    if cr {
        if b != b'\n' || digits == 0 {
            return Err(ParseError::BadChunk);
        }
        return Ok(if size == 0 {
            State::Trailer {
                line_len: 0,
                cr: false,
            }
        } else {
            State::ChunkData { remaining: size }
        });
    }
    if b == b'\r' {
        return Ok(State::ChunkSize {
            size,
            digits,
            ext,
            cr: true,
        });
    }
    if ext {
        return Ok(State::ChunkSize {
            size,
            digits,
            ext,
            cr,
        });
    }
    if b == b';' || b == b' ' || b == b'\t' {
        return Ok(State::ChunkSize {
            size,
            digits,
            ext: true,
            cr,
        });
    }
    let d = (b as char).to_digit(16).ok_or(ParseError::BadLength)?;
    if digits >= 15 {
        return Err(ParseError::BadLength);
    }
    Ok(State::ChunkSize {
        size: size * 16 + u64::from(d),
        digits: digits + 1,
        ext,
        cr,
    })
}

/// What the generator needs of a response head.
struct Head {
    status: u16,
    keep_alive: bool,
    chunked: bool,
    content_length: Option<u64>,
}

/// Parses a response head at the start of `buf` in one pass over its
/// lines: the head's length (through the blank line that ends it, `\r\n`
/// or a bare `\n`) and its fields, or `None` while the blank line has not
/// arrived. The line ends are found with `memchr` (word-at-a-time), and a
/// header's name is compared only when its length is one of the three
/// names that matter: this runs once per response, at the generator's
/// full rate.
fn scan_head(buf: &[u8]) -> Result<Option<(usize, Head)>, ParseError> {
    let mut ends = memchr::memchr_iter(b'\n', buf);
    let Some(first) = ends.next() else {
        return Ok(None);
    };
    // "HTTP/1.x NNN"
    let status = &buf[..first];
    if status.len() < 12 || &status[..7] != b"HTTP/1." || status[8] != b' ' {
        return Err(ParseError::BadStatusLine);
    }
    let code = &status[9..12];
    if !code.iter().all(u8::is_ascii_digit) {
        return Err(ParseError::BadStatusLine);
    }
    let mut head = Head {
        status: code.iter().fold(0u16, |a, &d| a * 10 + u16::from(d - b'0')),
        // HTTP/1.1 keeps the connection by default, HTTP/1.0 closes it.
        keep_alive: status[7] == b'1',
        chunked: false,
        content_length: None,
    };
    let mut start = first + 1;
    for end in ends {
        let line = &buf[start..end];
        start = end + 1;
        if line.is_empty() || line == b"\r" {
            return Ok(Some((start, head)));
        }
        let line = trim(line);
        let Some(colon) = memchr::memchr(b':', line) else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        match colon {
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                head.content_length = Some(parse_dec(trim(value))?);
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                head.chunked = ends_with_ignore_case(trim(value), b"chunked");
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                if contains_ignore_case(value, b"close") {
                    head.keep_alive = false;
                } else if contains_ignore_case(value, b"keep-alive") {
                    head.keep_alive = true;
                }
            }
            _ => {}
        }
    }
    Ok(None)
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if first.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if last.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    s
}

fn parse_dec(s: &[u8]) -> Result<u64, ParseError> {
    if s.is_empty() || s.len() > 18 || !s.iter().all(u8::is_ascii_digit) {
        return Err(ParseError::BadLength);
    }
    Ok(s.iter().fold(0u64, |a, &d| a * 10 + u64::from(d - b'0')))
}

fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

fn ends_with_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len() && hay[hay.len() - needle.len()..].eq_ignore_ascii_case(needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` in pieces of `step` bytes.
    fn feed_in(r: &mut Response, wire: &[u8], step: usize) -> Result<Progress, ParseError> {
        let mut last = Progress::More;
        for piece in wire.chunks(step) {
            last = r.feed(piece)?;
        }
        Ok(last)
    }

    #[test]
    fn content_length_any_split() {
        let wire = b"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 10\r\n\r\n0123456789";
        for step in 1..=wire.len() {
            let mut r = Response::new();
            assert_eq!(
                feed_in(&mut r, wire, step),
                Ok(Progress::Done),
                "step {step}"
            );
            assert_eq!(r.status, 200);
            assert_eq!(r.body_bytes, 10);
            assert_eq!(r.wire_bytes, wire.len() as u64);
            assert_eq!(r.head_bytes + r.body_bytes, r.wire_bytes);
            assert!(r.keep_alive);
        }
    }

    #[test]
    fn chunked_with_extension_and_trailer_any_split() {
        let wire =
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nT: 1\r\n\r\n";
        for step in 1..=wire.len() {
            let mut r = Response::new();
            assert_eq!(
                feed_in(&mut r, wire, step),
                Ok(Progress::Done),
                "step {step}"
            );
            assert_eq!(r.status, 404);
            assert_eq!(r.body_bytes, 15);
            assert_eq!(r.wire_bytes, wire.len() as u64);
        }
    }

    #[test]
    fn http10_closes_unless_keep_alive() {
        let mut r = Response::new();
        r.feed(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        assert!(!r.keep_alive);
        r.reset();
        r.feed(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        assert!(r.keep_alive);
        r.reset();
        r.feed(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        assert!(!r.keep_alive);
    }

    #[test]
    fn skipped_body_bytes_count() {
        let mut r = Response::new();
        assert_eq!(
            r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01"),
            Ok(Progress::More)
        );
        assert_eq!(r.body_remaining(), 8);
        assert_eq!(r.skip_body(5), Progress::More);
        assert_eq!(r.skip_body(3), Progress::Done);
        assert_eq!((r.body_bytes, r.body_remaining()), (10, 0));
        assert_eq!(r.wire_bytes, r.head_bytes + 10);
    }

    #[test]
    fn body_until_close() {
        let mut r = Response::new();
        assert_eq!(r.feed(b"HTTP/1.0 200 OK\r\n\r\nabc"), Ok(Progress::More));
        assert_eq!(r.feed(b"de"), Ok(Progress::More));
        assert_eq!(r.eof(), Progress::Done);
        assert_eq!(r.body_bytes, 5);
    }

    #[test]
    fn short_body_is_not_done_at_eof() {
        let mut r = Response::new();
        assert_eq!(
            r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc"),
            Ok(Progress::More)
        );
        assert_eq!(r.eof(), Progress::More);
    }

    #[test]
    fn errors() {
        let mut r = Response::new();
        assert_eq!(
            r.feed(b"HTTX/1.1 200 OK\r\n\r\n"),
            Err(ParseError::BadStatusLine)
        );
        r.reset();
        assert_eq!(
            r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n"),
            Err(ParseError::BadLength)
        );
        r.reset();
        assert_eq!(
            r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab"),
            Err(ParseError::TrailingData)
        );
        r.reset();
        assert_eq!(r.feed(&[b'a'; MAX_HEAD + 1]), Err(ParseError::HeadTooLong));
        r.reset();
        assert_eq!(
            r.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            Err(ParseError::BadLength)
        );
    }

    #[test]
    fn no_body_statuses() {
        let mut r = Response::new();
        assert_eq!(
            r.feed(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n"),
            Ok(Progress::Done)
        );
        assert_eq!(r.body_bytes, 0);
    }
}
