//! A minimal, blocking AMQP 0-9-1 client over one `std` TCP socket: the
//! handful of methods the two workloads use, on one channel per
//! connection.
//!
//! Why not a crate: the measured Rust clients (amqprs, lapin; see
//! `shared/reference/server-tools.md` §5) are async over tokio, allocate
//! per message (a `Vec` per body, boxed futures, channel hops between a
//! reader task and the caller), and put a scheduler between the socket and
//! the clock. The workloads need the opposite: a loop that writes frames
//! into one reused buffer and reads deliveries in place, with no
//! allocation, no lock and no thread hop per message, so that what is
//! timed is the broker and the wire. The protocol subset is small (the
//! connection handshake, queue/exchange declare, bind, purge, delete,
//! qos, confirm.select, publish, consume, deliver, ack, close) and is
//! broker-neutral: any AMQP 0-9-1 broker speaks it.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// The largest frame this client asks for (the broker may lower it).
const FRAME_MAX: u32 = 131_072;
/// Frame types.
const METHOD: u8 = 1;
const HEADER: u8 = 2;
const BODY: u8 = 3;
const HEARTBEAT: u8 = 8;
const FRAME_END: u8 = 0xCE;
/// The one channel each connection uses.
const CH: u16 = 1;
/// The write buffer is flushed once it holds this much.
const FLUSH_AT: usize = 64 * 1024;

/// Errors of the client, each saying what was being done.
#[derive(Debug, thiserror::Error)]
pub enum AmqpError {
    /// A socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: io::Error,
    },
    /// The broker closed the connection or the channel, with its reason.
    #[error("the broker closed the {what}: {code} {text}")]
    Closed {
        /// `connection` or `channel`.
        what: &'static str,
        /// The AMQP reply code (403 ACCESS_REFUSED, 404 NOT_FOUND …).
        code: u16,
        /// The broker's reply text.
        text: String,
    },
    /// The broker sent something this client cannot read.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// Nothing arrived within the read timeout.
    #[error("nothing received from the broker for {0:.1} s")]
    Timeout(f64),
}

impl AmqpError {
    /// The error of a failed call with its context. The context becomes
    /// a `String` only when the call failed: a measured loop passes this
    /// on every send, and an allocation per send is what bench/cost
    /// counted before.
    fn io(context: impl Into<String>) -> impl FnOnce(io::Error) -> AmqpError {
        move |source| AmqpError::Io {
            context: context.into(),
            source,
        }
    }
}

type Result<T> = std::result::Result<T, AmqpError>;

/// How to reach and log in to a broker.
#[derive(Debug, Clone)]
pub struct Login {
    /// The broker's address.
    pub addr: SocketAddr,
    /// The user.
    pub user: String,
    /// The password (never printed).
    pub password: String,
    /// The virtual host.
    pub vhost: String,
    /// Set TCP_NODELAY on the socket.
    pub nodelay: bool,
    /// How long a connect or a wait for the broker may take.
    pub timeout: Duration,
}

/// What a received frame is, its payload being `rbuf[start..start+len]`.
#[derive(Debug, Clone, Copy)]
struct Frame {
    kind: u8,
    channel: u16,
    start: usize,
    len: usize,
}

/// One message delivered to a consumer, read in place: its delivery tag,
/// its body's length and the body's first bytes (the stamp).
#[derive(Debug, Clone, Copy, Default)]
pub struct Delivery {
    /// The broker's delivery tag (for acks).
    pub tag: u64,
    /// The body's length.
    pub len: u64,
    /// The body's first [`HEAD`] bytes (fewer if it is shorter).
    pub head: [u8; HEAD],
}

/// How many of a body's first bytes a [`Delivery`] keeps.
pub const HEAD: usize = 24;

/// One connection with one open channel.
pub struct Connection {
    sock: TcpStream,
    rbuf: Vec<u8>,
    rpos: usize,
    rlen: usize,
    wbuf: Vec<u8>,
    frame_max: u32,
    timeout: Duration,
    /// Publisher confirms: the highest tag below which all are confirmed.
    confirmed: u64,
    /// Confirms that arrived out of order (single acks above `confirmed`).
    loose: Vec<u64>,
    nacked: u64,
}

/// Little builders of method arguments.
fn put_short_str(b: &mut Vec<u8>, s: &str) {
    let n = s.len().min(255);
    b.push(n as u8);
    b.extend_from_slice(&s.as_bytes()[..n]);
}
fn put_long_str(b: &mut Vec<u8>, s: &[u8]) {
    b.extend_from_slice(&(s.len() as u32).to_be_bytes());
    b.extend_from_slice(s);
}

/// A reader over a method's arguments.
struct Args<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> Args<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.p + n > self.b.len() {
            return Err(AmqpError::Protocol(
                "a method frame is shorter than its arguments".into(),
            ));
        }
        let s = &self.b[self.p..self.p + n];
        self.p += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let s = self.take(2)?;
        Ok(u16::from_be_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_be_bytes(a))
    }
    fn short_str(&mut self) -> Result<&'a [u8]> {
        let n = self.u8()? as usize;
        self.take(n)
    }
}

impl Connection {
    /// Connects, logs in (PLAIN) and opens channel 1.
    pub fn open(login: &Login) -> Result<Connection> {
        let sock = TcpStream::connect_timeout(&login.addr, login.timeout).map_err(
            AmqpError::io(format!("connect to the broker at {}", login.addr)),
        )?;
        sock.set_nodelay(login.nodelay)
            .map_err(AmqpError::io("set TCP_NODELAY"))?;
        let mut c = Connection {
            sock,
            rbuf: vec![0; 4 * FRAME_MAX as usize],
            rpos: 0,
            rlen: 0,
            wbuf: Vec::with_capacity(2 * FLUSH_AT + FRAME_MAX as usize),
            frame_max: FRAME_MAX,
            timeout: login.timeout,
            confirmed: 0,
            loose: Vec::new(),
            nacked: 0,
        };
        c.set_timeout(Some(login.timeout))?;
        c.handshake(login)?;
        Ok(c)
    }

    /// A second handle on the socket, so that another thread can wake a
    /// read blocked on it (`shutdown(Read)`).
    pub fn waker(&self) -> Result<TcpStream> {
        self.sock
            .try_clone()
            .map_err(AmqpError::io("duplicate the socket"))
    }

    /// The read timeout of every blocking wait (`None`: wait forever).
    pub fn set_timeout(&mut self, t: Option<Duration>) -> Result<()> {
        if let Some(t) = t {
            self.timeout = t;
        }
        self.sock
            .set_read_timeout(t)
            .map_err(AmqpError::io("set the socket's read timeout"))
    }

    fn handshake(&mut self, login: &Login) -> Result<()> {
        self.sock
            .write_all(b"AMQP\x00\x00\x09\x01")
            .map_err(AmqpError::io("send the AMQP protocol header"))?;
        // connection.start: the broker's first frame.
        let f = self.read_frame().map_err(|e| match e {
            AmqpError::Io { source, .. } if source.kind() == io::ErrorKind::UnexpectedEof => {
                AmqpError::Protocol(format!(
                    "{} closed the connection at the AMQP protocol header: not an AMQP 0-9-1 broker?",
                    login.addr
                ))
            }
            e => e,
        })?;
        self.expect_method(f, 10, 10, "connection.start")?;
        // connection.start-ok: PLAIN, and the capability that makes a
        // broker say why a login failed instead of just closing.
        let mut a = Vec::new();
        let mut caps = Vec::new();
        put_short_str(&mut caps, "authentication_failure_close");
        caps.push(b't');
        caps.push(1);
        let mut props = Vec::new();
        put_short_str(&mut props, "product");
        props.push(b'S');
        put_long_str(&mut props, b"benchlab");
        put_short_str(&mut props, "capabilities");
        props.push(b'F');
        put_long_str(&mut props, &caps);
        put_long_str(&mut a, &props);
        put_short_str(&mut a, "PLAIN");
        let mut resp = Vec::with_capacity(2 + login.user.len() + login.password.len());
        resp.push(0);
        resp.extend_from_slice(login.user.as_bytes());
        resp.push(0);
        resp.extend_from_slice(login.password.as_bytes());
        put_long_str(&mut a, &resp);
        put_short_str(&mut a, "en_US");
        self.send_method(0, 10, 11, &a)?;
        self.flush()?;
        let f = self.read_frame().map_err(|e| match e {
            AmqpError::Io { source, .. }
                if matches!(
                    source.kind(),
                    io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
                ) =>
            {
                AmqpError::Closed {
                    what: "connection",
                    code: 403,
                    text: format!(
                        "during login as `{}` (ACCESS_REFUSED: wrong user or password?)",
                        login.user
                    ),
                }
            }
            e => e,
        })?;
        let (class, method) = self.method_id(f)?;
        if (class, method) == (10, 50) {
            return Err(self.closed_by_broker(f, "connection"));
        }
        self.expect_method(f, 10, 30, "connection.tune")?;
        let mut r = self.args(f);
        let channel_max = r.u16()?;
        let frame_max = r.u32()?;
        if frame_max != 0 {
            self.frame_max = frame_max.min(FRAME_MAX);
        }
        let mut a = Vec::new();
        a.extend_from_slice(&channel_max.to_be_bytes());
        a.extend_from_slice(&self.frame_max.to_be_bytes());
        // No heartbeats: a measured loop must not be interrupted by them,
        // and a broker killed mid-point shows as a closed socket.
        a.extend_from_slice(&0u16.to_be_bytes());
        self.send_method(0, 10, 31, &a)?;
        let mut a = Vec::new();
        put_short_str(&mut a, &login.vhost);
        put_short_str(&mut a, "");
        a.push(0);
        self.send_method(0, 10, 40, &a)?;
        self.flush()?;
        self.wait_method(0, 10, 41, "connection.open-ok")?;
        let mut a = Vec::new();
        put_short_str(&mut a, "");
        self.send_method(CH, 20, 10, &a)?;
        self.flush()?;
        self.wait_method(CH, 20, 11, "channel.open-ok")?;
        Ok(())
    }

    // ---- frames out ----

    fn frame_start(&mut self, kind: u8, channel: u16) -> usize {
        self.wbuf.push(kind);
        self.wbuf.extend_from_slice(&channel.to_be_bytes());
        let at = self.wbuf.len();
        self.wbuf.extend_from_slice(&[0; 4]);
        at
    }

    fn frame_end(&mut self, size_at: usize) {
        let size = (self.wbuf.len() - size_at - 4) as u32;
        self.wbuf[size_at..size_at + 4].copy_from_slice(&size.to_be_bytes());
        self.wbuf.push(FRAME_END);
    }

    fn send_method(&mut self, channel: u16, class: u16, method: u16, args: &[u8]) -> Result<()> {
        let at = self.frame_start(METHOD, channel);
        self.wbuf.extend_from_slice(&class.to_be_bytes());
        self.wbuf.extend_from_slice(&method.to_be_bytes());
        self.wbuf.extend_from_slice(args);
        self.frame_end(at);
        Ok(())
    }

    /// Writes out the buffered frames.
    pub fn flush(&mut self) -> Result<()> {
        if !self.wbuf.is_empty() {
            self.sock
                .write_all(&self.wbuf)
                .map_err(AmqpError::io("send to the broker"))?;
            self.wbuf.clear();
        }
        Ok(())
    }

    /// Buffers one `basic.publish` of `body` (flushing when the buffer is
    /// full). No allocation: the frames go into the reused write buffer.
    pub fn publish(
        &mut self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        persistent: bool,
    ) -> Result<()> {
        let at = self.frame_start(METHOD, CH);
        self.wbuf.extend_from_slice(&60u16.to_be_bytes());
        self.wbuf.extend_from_slice(&40u16.to_be_bytes());
        self.wbuf.extend_from_slice(&0u16.to_be_bytes());
        put_short_str(&mut self.wbuf, exchange);
        put_short_str(&mut self.wbuf, routing_key);
        self.wbuf.push(0);
        self.frame_end(at);
        // Content header: class 60, weight 0, body size, properties.
        let at = self.frame_start(HEADER, CH);
        self.wbuf.extend_from_slice(&60u16.to_be_bytes());
        self.wbuf.extend_from_slice(&0u16.to_be_bytes());
        self.wbuf
            .extend_from_slice(&(body.len() as u64).to_be_bytes());
        if persistent {
            // Property flags: delivery-mode present; mode 2 = persistent.
            self.wbuf.extend_from_slice(&0x1000u16.to_be_bytes());
            self.wbuf.push(2);
        } else {
            self.wbuf.extend_from_slice(&0u16.to_be_bytes());
        }
        self.frame_end(at);
        let chunk = (self.frame_max as usize).saturating_sub(8).max(1);
        for part in body.chunks(chunk) {
            let at = self.frame_start(BODY, CH);
            self.wbuf.extend_from_slice(part);
            self.frame_end(at);
        }
        if self.wbuf.len() >= FLUSH_AT {
            self.flush()?;
            // Take in what the broker sent meanwhile (confirms), without
            // waiting, so that its writer never blocks on us.
            self.drain_nonblocking()?;
        }
        Ok(())
    }

    /// Buffers a `basic.ack` (`multiple`: every tag up to `tag`).
    pub fn ack(&mut self, tag: u64, multiple: bool) -> Result<()> {
        let at = self.frame_start(METHOD, CH);
        self.wbuf.extend_from_slice(&60u16.to_be_bytes());
        self.wbuf.extend_from_slice(&80u16.to_be_bytes());
        self.wbuf.extend_from_slice(&tag.to_be_bytes());
        self.wbuf.push(u8::from(multiple));
        self.frame_end(at);
        Ok(())
    }

    // ---- frames in ----

    /// Reads more bytes into the buffer (blocking, or not).
    fn fill(&mut self, block: bool) -> Result<usize> {
        if self.rpos > 0 && (self.rpos == self.rlen || self.rbuf.len() - self.rlen < 4096) {
            self.rbuf.copy_within(self.rpos..self.rlen, 0);
            self.rlen -= self.rpos;
            self.rpos = 0;
        }
        if self.rlen == self.rbuf.len() {
            let n = self.rbuf.len() * 2;
            self.rbuf.resize(n, 0);
        }
        let n = if block {
            match self.sock.read(&mut self.rbuf[self.rlen..]) {
                Ok(0) => {
                    return Err(AmqpError::Io {
                        context: "read from the broker".into(),
                        source: io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the broker closed the connection",
                        ),
                    })
                }
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(AmqpError::Timeout(self.timeout.as_secs_f64()))
                }
                Err(e) => return Err(AmqpError::io("read from the broker")(e)),
            }
        } else {
            let free = &mut self.rbuf[self.rlen..];
            // SAFETY: recv into our own buffer's free tail.
            let r = unsafe {
                libc::recv(
                    self.sock.as_raw_fd(),
                    free.as_mut_ptr().cast(),
                    free.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::WouldBlock {
                    return Ok(0);
                }
                return Err(AmqpError::io("read from the broker")(e));
            }
            if r == 0 {
                return Err(AmqpError::Io {
                    context: "read from the broker".into(),
                    source: io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the broker closed the connection",
                    ),
                });
            }
            r as usize
        };
        self.rlen += n;
        Ok(n)
    }

    /// The next whole frame in the buffer, if there is one.
    fn parse_frame(&mut self) -> Result<Option<Frame>> {
        let avail = self.rlen - self.rpos;
        if avail < 7 {
            return Ok(None);
        }
        let h = &self.rbuf[self.rpos..];
        if &h[..4] == b"AMQP" {
            return Err(AmqpError::Protocol(format!(
                "the broker wants AMQP {}-{}-{}",
                h[5],
                h[6],
                h.get(7).copied().unwrap_or(0)
            )));
        }
        let kind = h[0];
        let channel = u16::from_be_bytes([h[1], h[2]]);
        let len = u32::from_be_bytes([h[3], h[4], h[5], h[6]]) as usize;
        if avail < 7 + len + 1 {
            if 7 + len + 1 > self.rbuf.len() {
                // A frame larger than the buffer: grow once (frame_max
                // bounds it).
                let n = (8 + len).next_power_of_two();
                self.rbuf.resize(n, 0);
            }
            return Ok(None);
        }
        if self.rbuf[self.rpos + 7 + len] != FRAME_END {
            return Err(AmqpError::Protocol("a frame does not end with 0xCE".into()));
        }
        let f = Frame {
            kind,
            channel,
            start: self.rpos + 7,
            len,
        };
        self.rpos += 8 + len;
        Ok(Some(f))
    }

    /// The next frame, waiting for it; heartbeats are skipped.
    fn read_frame(&mut self) -> Result<Frame> {
        loop {
            if let Some(f) = self.parse_frame()? {
                if f.kind == HEARTBEAT {
                    continue;
                }
                return Ok(f);
            }
            self.fill(true)?;
        }
    }

    fn payload(&self, f: Frame) -> &[u8] {
        &self.rbuf[f.start..f.start + f.len]
    }

    fn args(&self, f: Frame) -> Args<'_> {
        Args {
            b: &self.rbuf[f.start..f.start + f.len],
            p: 4,
        }
    }

    fn method_id(&self, f: Frame) -> Result<(u16, u16)> {
        if f.kind != METHOD || f.len < 4 {
            return Err(AmqpError::Protocol(format!(
                "expected a method frame, got a frame of type {}",
                f.kind
            )));
        }
        let p = self.payload(f);
        Ok((
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        ))
    }

    /// A connection.close or channel.close from the broker, answered and
    /// turned into an error.
    fn closed_by_broker(&mut self, f: Frame, what: &'static str) -> AmqpError {
        let (code, text) = {
            let mut r = self.args(f);
            let code = r.u16().unwrap_or(0);
            let text = r
                .short_str()
                .map(|t| String::from_utf8_lossy(t).into_owned())
                .unwrap_or_default();
            (code, text)
        };
        // close-ok, best effort: the broker is closing anyway.
        let (ch, class) = if what == "connection" {
            (0, 10)
        } else {
            (CH, 20)
        };
        let _ = self.send_method(ch, class, if class == 10 { 51 } else { 41 }, &[]);
        let _ = self.flush();
        AmqpError::Closed { what, code, text }
    }

    fn expect_method(&mut self, f: Frame, class: u16, method: u16, name: &str) -> Result<()> {
        let got = self.method_id(f)?;
        if got == (class, method) {
            return Ok(());
        }
        match got {
            (10, 50) => Err(self.closed_by_broker(f, "connection")),
            (20, 40) => Err(self.closed_by_broker(f, "channel")),
            (c, m) => Err(AmqpError::Protocol(format!(
                "expected {name}, got method {c}.{m}"
            ))),
        }
    }

    /// Waits for a synchronous reply, taking in confirms that arrive
    /// before it.
    fn wait_method(&mut self, channel: u16, class: u16, method: u16, name: &str) -> Result<Frame> {
        loop {
            let f = self.read_frame()?;
            if f.kind == METHOD && f.channel == channel {
                let id = self.method_id(f)?;
                if matches!(id, (60, 80) | (60, 120)) {
                    self.take_confirm(f)?;
                    continue;
                }
            }
            if f.kind != METHOD {
                continue;
            }
            self.expect_method(f, class, method, name)?;
            return Ok(f);
        }
    }

    fn take_confirm(&mut self, f: Frame) -> Result<()> {
        let (_, m) = self.method_id(f)?;
        let mut r = self.args(f);
        let tag = r.u64()?;
        let multiple = r.u8()? & 1 == 1;
        if m == 120 {
            self.nacked += 1;
        }
        if multiple {
            self.confirmed = self.confirmed.max(tag);
        } else if tag == self.confirmed + 1 {
            self.confirmed = tag;
        } else if tag > self.confirmed {
            self.loose.push(tag);
        }
        if !self.loose.is_empty() {
            self.loose.sort_unstable();
            let mut keep = 0;
            for i in 0..self.loose.len() {
                let t = self.loose[i];
                if t == self.confirmed + 1 {
                    self.confirmed = t;
                } else if t > self.confirmed {
                    self.loose[keep] = t;
                    keep += 1;
                }
            }
            self.loose.truncate(keep);
        }
        Ok(())
    }

    /// Processes whatever has arrived, without waiting (publishers:
    /// confirms; an error if the broker closed the channel).
    pub fn drain_nonblocking(&mut self) -> Result<()> {
        while self.fill(false)? > 0 {}
        while let Some(f) = self.parse_frame()? {
            if f.kind != METHOD {
                continue;
            }
            match self.method_id(f)? {
                (60, 80) | (60, 120) => self.take_confirm(f)?,
                (10, 50) => return Err(self.closed_by_broker(f, "connection")),
                (20, 40) => return Err(self.closed_by_broker(f, "channel")),
                _ => {}
            }
        }
        Ok(())
    }

    /// Waits until the broker has confirmed the first `n` publishes; the
    /// number it refused (basic.nack).
    pub fn wait_confirms(&mut self, n: u64) -> Result<u64> {
        self.flush()?;
        while self.confirmed < n {
            let f = self.read_frame()?;
            if f.kind != METHOD {
                continue;
            }
            match self.method_id(f)? {
                (60, 80) | (60, 120) => self.take_confirm(f)?,
                (10, 50) => return Err(self.closed_by_broker(f, "connection")),
                (20, 40) => return Err(self.closed_by_broker(f, "channel")),
                _ => {}
            }
        }
        Ok(self.nacked)
    }

    /// The next delivery to this connection's consumer, read in place.
    pub fn next_delivery(&mut self) -> Result<Delivery> {
        let f = loop {
            let f = self.read_frame()?;
            if f.kind != METHOD {
                return Err(AmqpError::Protocol(format!(
                    "expected basic.deliver, got a frame of type {}",
                    f.kind
                )));
            }
            match self.method_id(f)? {
                (60, 60) => break f,
                (10, 50) => return Err(self.closed_by_broker(f, "connection")),
                (20, 40) => return Err(self.closed_by_broker(f, "channel")),
                (60, 80) | (60, 120) => self.take_confirm(f)?,
                (c, m) => {
                    return Err(AmqpError::Protocol(format!(
                        "expected basic.deliver, got method {c}.{m}"
                    )))
                }
            }
        };
        let mut d = Delivery::default();
        {
            let mut r = self.args(f);
            r.short_str()?; // consumer tag
            d.tag = r.u64()?;
        }
        let h = self.read_frame()?;
        if h.kind != HEADER || h.len < 12 {
            return Err(AmqpError::Protocol("expected a content header".into()));
        }
        let p = self.payload(h);
        let mut sz = [0u8; 8];
        sz.copy_from_slice(&p[4..12]);
        d.len = u64::from_be_bytes(sz);
        let mut got = 0u64;
        while got < d.len {
            let b = self.read_frame()?;
            if b.kind != BODY {
                return Err(AmqpError::Protocol("expected a body frame".into()));
            }
            let p = self.payload(b);
            if (got as usize) < HEAD {
                let from = got as usize;
                let n = (HEAD - from).min(p.len());
                d.head[from..from + n].copy_from_slice(&p[..n]);
            }
            got += b.len as u64;
        }
        Ok(d)
    }

    // ---- synchronous methods ----

    /// `queue.declare`; the broker's message and consumer counts.
    pub fn queue_declare(
        &mut self,
        name: &str,
        passive: bool,
        durable: bool,
        exclusive: bool,
        auto_delete: bool,
    ) -> Result<(u32, u32)> {
        let mut a = Vec::new();
        a.extend_from_slice(&0u16.to_be_bytes());
        put_short_str(&mut a, name);
        a.push(
            u8::from(passive)
                | u8::from(durable) << 1
                | u8::from(exclusive) << 2
                | u8::from(auto_delete) << 3,
        );
        put_long_str(&mut a, &[]);
        self.send_method(CH, 50, 10, &a)?;
        self.flush()?;
        let f = self.wait_method(CH, 50, 11, "queue.declare-ok")?;
        let mut r = self.args(f);
        r.short_str()?;
        Ok((r.u32()?, r.u32()?))
    }

    /// `queue.purge`; how many messages it removed.
    pub fn queue_purge(&mut self, name: &str) -> Result<u32> {
        let mut a = Vec::new();
        a.extend_from_slice(&0u16.to_be_bytes());
        put_short_str(&mut a, name);
        a.push(0);
        self.send_method(CH, 50, 30, &a)?;
        self.flush()?;
        let f = self.wait_method(CH, 50, 31, "queue.purge-ok")?;
        self.args(f).u32()
    }

    /// `queue.delete`.
    pub fn queue_delete(&mut self, name: &str) -> Result<()> {
        let mut a = Vec::new();
        a.extend_from_slice(&0u16.to_be_bytes());
        put_short_str(&mut a, name);
        a.push(0);
        self.send_method(CH, 50, 40, &a)?;
        self.flush()?;
        self.wait_method(CH, 50, 41, "queue.delete-ok").map(drop)
    }

    /// `queue.bind`.
    pub fn queue_bind(&mut self, queue: &str, exchange: &str, key: &str) -> Result<()> {
        let mut a = Vec::new();
        a.extend_from_slice(&0u16.to_be_bytes());
        put_short_str(&mut a, queue);
        put_short_str(&mut a, exchange);
        put_short_str(&mut a, key);
        a.push(0);
        put_long_str(&mut a, &[]);
        self.send_method(CH, 50, 20, &a)?;
        self.flush()?;
        self.wait_method(CH, 50, 21, "queue.bind-ok").map(drop)
    }

    /// `exchange.declare` of type `kind`.
    pub fn exchange_declare(&mut self, name: &str, kind: &str, durable: bool) -> Result<()> {
        let mut a = Vec::new();
        a.extend_from_slice(&0u16.to_be_bytes());
        put_short_str(&mut a, name);
        put_short_str(&mut a, kind);
        a.push(u8::from(durable) << 1);
        put_long_str(&mut a, &[]);
        self.send_method(CH, 40, 10, &a)?;
        self.flush()?;
        self.wait_method(CH, 40, 11, "exchange.declare-ok")
            .map(drop)
    }

    /// `exchange.delete`.
    pub fn exchange_delete(&mut self, name: &str) -> Result<()> {
        let mut a = Vec::new();
        a.extend_from_slice(&0u16.to_be_bytes());
        put_short_str(&mut a, name);
        a.push(0);
        self.send_method(CH, 40, 20, &a)?;
        self.flush()?;
        self.wait_method(CH, 40, 21, "exchange.delete-ok").map(drop)
    }

    /// `basic.qos` with a message window (0: none).
    pub fn qos(&mut self, prefetch: u16) -> Result<()> {
        let mut a = Vec::new();
        a.extend_from_slice(&0u32.to_be_bytes());
        a.extend_from_slice(&prefetch.to_be_bytes());
        a.push(0);
        self.send_method(CH, 60, 10, &a)?;
        self.flush()?;
        self.wait_method(CH, 60, 11, "basic.qos-ok").map(drop)
    }

    /// `confirm.select`: the broker confirms every publish from now on.
    pub fn confirm_select(&mut self) -> Result<()> {
        self.send_method(CH, 85, 10, &[0])?;
        self.flush()?;
        self.wait_method(CH, 85, 11, "confirm.select-ok").map(drop)
    }

    /// `basic.consume` from `queue` (`no_ack`: the broker forgets a
    /// message once sent).
    pub fn consume(&mut self, queue: &str, no_ack: bool) -> Result<()> {
        let mut a = Vec::new();
        a.extend_from_slice(&0u16.to_be_bytes());
        put_short_str(&mut a, queue);
        put_short_str(&mut a, "");
        a.push(u8::from(no_ack) << 1);
        put_long_str(&mut a, &[]);
        self.send_method(CH, 60, 20, &a)?;
        self.flush()?;
        self.wait_method(CH, 60, 21, "basic.consume-ok").map(drop)
    }

    /// Closes the connection politely (best effort).
    pub fn close(mut self) {
        let mut a = Vec::new();
        a.extend_from_slice(&200u16.to_be_bytes());
        put_short_str(&mut a, "bye");
        a.extend_from_slice(&0u16.to_be_bytes());
        a.extend_from_slice(&0u16.to_be_bytes());
        if self.send_method(0, 10, 50, &a).is_ok() && self.flush().is_ok() {
            let _ = self.set_timeout(Some(Duration::from_secs(2)));
            for _ in 0..1000 {
                match self.read_frame() {
                    Ok(f) if f.kind == METHOD && self.method_id(f).ok() == Some((10, 51)) => break,
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A connection to a fake broker that writes `bytes` in `chunk`-byte
    /// pieces (frames split anywhere, as TCP may deliver them).
    fn fake(bytes: Vec<u8>, chunk: usize) -> (Connection, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_nodelay(true).unwrap();
            for part in bytes.chunks(chunk) {
                s.write_all(part).unwrap();
                std::thread::sleep(Duration::from_micros(50));
            }
        });
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let c = Connection {
            sock,
            // Small, so that frames cross the buffer's end and it grows.
            rbuf: vec![0; 64],
            rpos: 0,
            rlen: 0,
            wbuf: Vec::new(),
            frame_max: FRAME_MAX,
            timeout: Duration::from_secs(5),
            confirmed: 0,
            loose: Vec::new(),
            nacked: 0,
        };
        (c, t)
    }

    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![kind, 0, 1];
        f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        f.extend_from_slice(payload);
        f.push(FRAME_END);
        f
    }

    fn deliver(tag: u64, body: &[u8], split: usize) -> Vec<u8> {
        let mut m = vec![0, 60, 0, 60];
        put_short_str(&mut m, "ctag");
        m.extend_from_slice(&tag.to_be_bytes());
        m.push(0);
        put_short_str(&mut m, "");
        put_short_str(&mut m, "q");
        let mut h = vec![0, 60, 0, 0];
        h.extend_from_slice(&(body.len() as u64).to_be_bytes());
        h.extend_from_slice(&[0, 0]);
        let mut out = frame(METHOD, &m);
        out.extend(frame(HEADER, &h));
        for part in body.chunks(split) {
            out.extend(frame(BODY, part));
        }
        out
    }

    #[test]
    fn deliveries_split_anywhere_are_read_whole() {
        let body: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        let mut bytes = Vec::new();
        bytes.extend(frame(HEARTBEAT, &[]));
        bytes.extend(deliver(7, &body, 100));
        bytes.extend(deliver(8, &body[..5], 100));
        let (mut c, t) = fake(bytes, 3);
        let d = c.next_delivery().unwrap();
        assert_eq!((d.tag, d.len), (7, 300));
        assert_eq!(&d.head[..], &body[..HEAD]);
        let d = c.next_delivery().unwrap();
        assert_eq!((d.tag, d.len), (8, 5));
        assert_eq!(&d.head[..5], &body[..5]);
        t.join().unwrap();
        let e = c.next_delivery().unwrap_err().to_string();
        assert!(e.contains("closed the connection"), "{e}");
    }

    #[test]
    fn confirms_count_multiple_single_and_out_of_order_acks() {
        let ack = |tag: u64, multiple: bool, nack: bool| {
            let mut m = vec![0, 60, 0, if nack { 120 } else { 80 }];
            m.extend_from_slice(&tag.to_be_bytes());
            m.push(u8::from(multiple));
            frame(METHOD, &m)
        };
        let mut bytes = Vec::new();
        bytes.extend(ack(3, true, false));
        bytes.extend(ack(5, false, false));
        bytes.extend(ack(4, false, false));
        bytes.extend(ack(6, false, true));
        let (mut c, t) = fake(bytes, 5);
        assert_eq!(c.wait_confirms(6).unwrap(), 1, "one nack");
        assert_eq!(c.confirmed, 6);
        assert!(c.loose.is_empty());
        t.join().unwrap();
    }

    #[test]
    fn a_channel_close_is_an_error_with_the_brokers_reason() {
        let mut m = vec![0, 20, 0, 40];
        m.extend_from_slice(&404u16.to_be_bytes());
        put_short_str(&mut m, "NOT_FOUND - no queue 'x'");
        m.extend_from_slice(&[0, 60, 0, 20]);
        let (mut c, t) = fake(frame(METHOD, &m), 4);
        let e = c.next_delivery().unwrap_err().to_string();
        assert_eq!(
            e,
            "the broker closed the channel: 404 NOT_FOUND - no queue 'x'"
        );
        t.join().unwrap();
    }
}
