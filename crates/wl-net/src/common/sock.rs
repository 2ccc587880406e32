//! Socket setup: listen, accept and connect with abort polling, buffer
//! sizes, timeouts and the socket options the workloads ask for.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use benchlab_core::{WorkloadError, ABORT_POLL};
use socket2::{Domain, SockAddr, Socket};

use super::params::Proto;

/// How long a server waits for its one client (TCP accept, or the first UDP
/// datagram) before it gives up.
pub(crate) const ACCEPT_TIMEOUT: Duration = Duration::from_secs(30);

/// Socket buffer sizes to set before connect/listen; `None` leaves the
/// kernel's default and autotuning alone.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bufs {
    pub(crate) send: Option<usize>,
    pub(crate) recv: Option<usize>,
}

pub(super) fn io_err(what: &str, step: &str) -> impl FnOnce(io::Error) -> WorkloadError {
    let context = format!("{what}: {step}");
    move |e| WorkloadError::io(context, e)
}

fn new_socket(proto: Proto, ip: IpAddr, bufs: Bufs, what: &str) -> Result<Socket, WorkloadError> {
    let (ty, protocol) = proto.socket_type();
    let domain = Domain::for_address(SocketAddr::new(ip, 0));
    let s = Socket::new(domain, ty, Some(protocol)).map_err(io_err(what, "socket"))?;
    // Set before connect()/listen(): the TCP window scale is fixed by the
    // SYN, so a later SO_RCVBUF would not take full effect (netperf does the
    // same with -s/-S).
    if let Some(n) = bufs.send {
        s.set_send_buffer_size(n)
            .map_err(io_err(what, "setsockopt(SO_SNDBUF)"))?;
    }
    if let Some(n) = bufs.recv {
        s.set_recv_buffer_size(n)
            .map_err(io_err(what, "setsockopt(SO_RCVBUF)"))?;
    }
    Ok(s)
}

/// Waits until `fd` reports `events`, waking every [`ABORT_POLL`] to check
/// `abort`; fails after `within` with `timeout_msg`.
fn wait_fd(
    fd: RawFd,
    events: libc::c_short,
    abort: &AtomicBool,
    within: Duration,
    what: &str,
    timeout_msg: &str,
) -> Result<(), WorkloadError> {
    let deadline = Instant::now() + within;
    loop {
        if abort.load(Ordering::Relaxed) {
            return Err(WorkloadError::Aborted);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(WorkloadError::Other(format!(
                "{what}: {timeout_msg} within {:.0} s",
                within.as_secs_f64()
            )));
        }
        // Round up so that a sub-millisecond remainder does not spin.
        let wait_ms = (deadline - now).min(ABORT_POLL).as_micros().div_ceil(1000) as libc::c_int;
        let mut pfd = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd, count 1.
        let r = unsafe { libc::poll(&mut pfd, 1, wait_ms) };
        if r > 0 {
            // Ready, or an error condition the next call will report.
            return Ok(());
        }
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(WorkloadError::io(format!("{what}: poll"), e));
            }
        }
    }
}

/// The server's socket: a listening TCP socket or a bound UDP socket on
/// `ip` port 0, and the port the kernel picked.
pub(crate) fn bind_server(
    proto: Proto,
    addr: SocketAddr,
    bufs: Bufs,
    what: &str,
) -> Result<(Socket, u16), WorkloadError> {
    let s = new_socket(proto, addr.ip(), bufs, what)?;
    if addr.port() != 0 {
        // A fixed data port (a host's `data_port`) is bound point after
        // point; the previous point's connection may still be in TIME_WAIT.
        s.set_reuse_address(true)
            .map_err(io_err(what, "setsockopt(SO_REUSEADDR)"))?;
    }
    s.bind(&addr.into())
        .map_err(io_err(what, &format!("bind {addr}")))?;
    if proto == Proto::Tcp {
        // One point = one data connection; a backlog of 1 is enough.
        s.listen(1).map_err(io_err(what, "listen"))?;
    }
    let port = s
        .local_addr()
        .map_err(io_err(what, "getsockname"))?
        .as_socket()
        .map(|a| a.port())
        .ok_or_else(|| WorkloadError::Other(format!("{what}: bound address is not IP")))?;
    Ok((s, port))
}

/// Waits for the one client: accepts the TCP connection, or, for UDP,
/// waits for the first datagram and connects the socket to its sender so
/// that only that client's datagrams arrive from then on. Either waits at
/// most `within` (normally [`ACCEPT_TIMEOUT`]).
pub(crate) fn await_client(
    proto: Proto,
    server: Socket,
    abort: &AtomicBool,
    within: Duration,
    what: &str,
) -> Result<Socket, WorkloadError> {
    let msg = match proto {
        Proto::Tcp => "no client connected",
        Proto::Udp => "no datagram from a client arrived",
    };
    wait_fd(server.as_raw_fd(), libc::POLLIN, abort, within, what, msg)?;
    match proto {
        Proto::Tcp => {
            let (s, _) = server.accept().map_err(io_err(what, "accept"))?;
            Ok(s)
        }
        Proto::Udp => {
            // Peeking leaves the datagram queued for the measured loop.
            let peer = server
                .peek_sender()
                .map_err(io_err(what, "recvfrom(MSG_PEEK)"))?;
            server
                .connect(&peer)
                .map_err(io_err(what, "connect to the client"))?;
            Ok(server)
        }
    }
}

/// Connects a client data socket to `addr` (non-blocking connect polled
/// every [`ABORT_POLL`], at most [`ACCEPT_TIMEOUT`]); UDP sockets are
/// connected too, so that plain `send()`/`recv()` work and ICMP errors are
/// reported.
pub(crate) fn connect(
    proto: Proto,
    addr: SocketAddr,
    bufs: Bufs,
    abort: &AtomicBool,
    what: &str,
) -> Result<Socket, WorkloadError> {
    let s = new_socket(proto, addr.ip(), bufs, what)?;
    let sa = SockAddr::from(addr);
    let step = format!("connect to {addr}");
    if proto == Proto::Udp {
        s.connect(&sa).map_err(io_err(what, &step))?;
        return Ok(s);
    }
    s.set_nonblocking(true)
        .map_err(io_err(what, "set non-blocking"))?;
    match s.connect(&sa) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
            wait_fd(
                s.as_raw_fd(),
                libc::POLLOUT,
                abort,
                ACCEPT_TIMEOUT,
                what,
                &format!("could not connect to {addr}"),
            )?;
            if let Some(e) = s.take_error().map_err(io_err(what, "SO_ERROR"))? {
                return Err(WorkloadError::io(format!("{what}: {step}"), e));
            }
        }
        Err(e) => return Err(WorkloadError::io(format!("{what}: {step}"), e)),
    }
    s.set_nonblocking(false)
        .map_err(io_err(what, "set blocking"))?;
    Ok(s)
}

/// Sets `SO_RCVTIMEO` to `recv` and `SO_SNDTIMEO` to [`ABORT_POLL`], so
/// that a blocked call returns `EAGAIN` at that interval and its caller
/// looks at the abort flag: `net.stream`'s UDP sockets, and TCP sockets
/// after their measured loops, when nothing watches them any more (see
/// [`super::timer`]).
pub(crate) fn set_timeouts(s: &Socket, recv: Duration, what: &str) -> Result<(), WorkloadError> {
    s.set_read_timeout(Some(recv))
        .map_err(io_err(what, "setsockopt(SO_RCVTIMEO)"))?;
    s.set_write_timeout(Some(ABORT_POLL))
        .map_err(io_err(what, "setsockopt(SO_SNDTIMEO)"))
}

/// Sets `TCP_NODELAY` as asked (both netperf and sfnt-pingpong leave Nagle
/// on unless told otherwise).
pub(crate) fn set_nodelay(s: &Socket, nodelay: bool, what: &str) -> Result<(), WorkloadError> {
    s.set_tcp_nodelay(nodelay)
        .map_err(io_err(what, "setsockopt(TCP_NODELAY)"))
}

/// Turns on `IP_RECVERR` (or `IPV6_RECVERR`) on a UDP sender, as netperf's
/// `enable_enobufs()` does: without it Linux hides a full device queue
/// from `send()` and the datagram is silently dropped instead of counted
/// as a failed send.
pub(crate) fn enable_recverr(s: &Socket, ip: IpAddr, what: &str) -> Result<(), WorkloadError> {
    let (level, opt) = match ip {
        IpAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_RECVERR),
        IpAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_RECVERR),
    };
    let one: libc::c_int = 1;
    // SAFETY: the option value is a c_int that lives across the call.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(WorkloadError::io(
            format!("{what}: setsockopt(IP_RECVERR)"),
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    #[test]
    fn accept_gives_up_with_a_clear_error() {
        let (s, _) = bind_server(
            Proto::Tcp,
            SocketAddr::new(LO, 0),
            Bufs::default(),
            "test server",
        )
        .unwrap();
        let abort = AtomicBool::new(false);
        let t = Instant::now();
        let e = await_client(
            Proto::Tcp,
            s,
            &abort,
            Duration::from_millis(300),
            "test server",
        )
        .err()
        .unwrap();
        assert!(t.elapsed() >= Duration::from_millis(300));
        let msg = e.to_string();
        assert!(msg.contains("no client connected"), "{msg}");
    }

    #[test]
    fn accept_sees_abort() {
        let (s, _) = bind_server(
            Proto::Udp,
            SocketAddr::new(LO, 0),
            Bufs::default(),
            "test server",
        )
        .unwrap();
        let abort = AtomicBool::new(true);
        let e = await_client(Proto::Udp, s, &abort, ACCEPT_TIMEOUT, "test server")
            .err()
            .unwrap();
        assert!(matches!(e, WorkloadError::Aborted), "{e}");
    }
}
