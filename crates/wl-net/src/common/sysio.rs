//! Raw I/O for the measured loops: no allocation, MSG_NOSIGNAL so that a
//! vanished peer is an error and not SIGPIPE, and flags (MSG_WAITALL,
//! MSG_TRUNC) that std does not expose.
//!
//! They enter the kernel with the `syscall` instruction itself
//! (`benchlab_core::sys`), not through glibc's `send()`/`recv()`. Those
//! two are pthread cancellation points: in a process with more than one
//! thread (an agent always has the timer thread) glibc brackets every call
//! with `__pthread_enable_asynccancel` / `__pthread_disable_asynccancel`,
//! two atomic read-modify-writes that a single-threaded netperf or
//! sfnt-pingpong never pays. benchlab never cancels threads, so it gives
//! nothing up. Measured with `bench/per-op` (callgrind, user-space
//! instructions per operation, both ends, together with the pingpong clock
//! change): net.pingpong 32 B TCP 648 -> 383 and UDP 591 -> 347 per round
//! trip; net.stream 65507 B 119 -> 54 and 1024 B 84 -> 38 per message.

use std::io;
use std::net::Shutdown;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use benchlab_core::sys;
use benchlab_core::WorkloadError;
use socket2::Socket;

use super::sock::io_err;

/// How long a TCP sender waits for the receiver's EOF after its own
/// `shutdown(SHUT_WR)`; with many MB queued on a slow path the drain takes a
/// while, but a receiver that never closes must not hang the point.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// `send(fd, buf, MSG_NOSIGNAL)`, made inline (`benchlab_core::sys`).
#[inline(always)]
pub(crate) fn sys_send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    send_ret(fd, buf).result()
}

/// [`sys_send`] as the kernel returned it, for the measured loops: they
/// compare it with what they sent and build an error only when it differs
/// (see [`sys::Ret`]).
#[inline(always)]
pub(crate) fn send_ret(fd: RawFd, buf: &[u8]) -> sys::Ret {
    sys::send(fd, buf, libc::MSG_NOSIGNAL)
}

/// `recv(fd, buf, flags)`, made inline. With `MSG_TRUNC` on a datagram
/// socket the result is the datagram's full length even when `buf` is
/// shorter.
#[inline(always)]
pub(crate) fn sys_recv(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    sys::recv(fd, buf, flags).result()
}

/// Whether an error only means "woke up without progress": a socket
/// timeout (`EAGAIN`) or a signal (`EINTR`).
#[inline]
pub(crate) fn is_wakeup(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// The slow path after a failed call: a wake-up checks `abort` and asks the
/// caller to retry; anything else is fatal.
#[cold]
#[inline(never)]
pub(crate) fn retry_or_fail(
    e: io::Error,
    abort: &AtomicBool,
    what: &'static str,
) -> Result<(), WorkloadError> {
    if !is_wakeup(&e) {
        return Err(WorkloadError::io(what, e));
    }
    check_abort(abort)
}

/// Whether a UDP send failed for a full device queue or lack of memory:
/// netperf's non-fatal "failed sends".
#[inline]
pub(crate) fn is_enobufs(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::ENOMEM))
}

/// `Err(Aborted)` once the abort flag is set.
#[inline]
pub(crate) fn check_abort(abort: &AtomicBool) -> Result<(), WorkloadError> {
    if abort.load(Ordering::Relaxed) {
        Err(WorkloadError::Aborted)
    } else {
        Ok(())
    }
}

/// Sends all of `buf` on a stream socket (a timed-out or short send is
/// continued).
///
/// The measured loops' messages nearly always go in one call, so that call
/// is made here, inline, and everything else (a short send, a timeout, an
/// error) continues out of line in [`send_rest`]: the caller's loop keeps
/// one system call and a comparison per message, with no loop set-up and no
/// error value built. What this bought, with [`recv_exact`] and the
/// loops that take the protocol out: see [`super::exchange::Exchanger`]; `net.stream`
/// 65507 B went from 54.5 to 48.1 instructions per message (limit 48–52)
/// and 1024 B from 37.9 to 30.9 (limit 36.5).
#[inline(always)]
pub(crate) fn send_all(
    fd: RawFd,
    buf: &[u8],
    abort: &AtomicBool,
    what: &'static str,
) -> Result<(), WorkloadError> {
    let r = send_ret(fd, buf);
    if r.is(buf.len()) {
        Ok(())
    } else {
        send_rest(fd, buf, r, abort, what)
    }
}

/// [`send_all`] after a first call that did not send everything.
#[cold]
#[inline(never)]
fn send_rest(
    fd: RawFd,
    buf: &[u8],
    first: sys::Ret,
    abort: &AtomicBool,
    what: &'static str,
) -> Result<(), WorkloadError> {
    let mut off = match first.result() {
        Ok(n) => n,
        Err(e) => {
            retry_or_fail(e, abort, what)?;
            0
        }
    };
    while off < buf.len() {
        match sys_send(fd, &buf[off..]) {
            Ok(n) => off += n,
            Err(e) => retry_or_fail(e, abort, what)?,
        }
    }
    Ok(())
}

/// Receives exactly `buf.len()` bytes from a stream socket with
/// `MSG_WAITALL` (continued after a timeout or signal cut it short, as
/// sfnt-pingpong and netperf's `NETPERF_WAITALL` loop do). Returns `false`
/// on an orderly EOF before the first byte. Like [`send_all`], the one
/// call that nearly always suffices is made inline and the rest out of
/// line in [`recv_rest`].
#[inline(always)]
pub(crate) fn recv_exact(
    fd: RawFd,
    buf: &mut [u8],
    abort: &AtomicBool,
    what: &'static str,
) -> Result<bool, WorkloadError> {
    let r = sys::recv(fd, buf, libc::MSG_WAITALL);
    if r.is(buf.len()) && !buf.is_empty() {
        Ok(true)
    } else {
        recv_rest(fd, buf, r, abort, what)
    }
}

/// [`recv_exact`] after a first call that did not fill the buffer.
#[cold]
#[inline(never)]
fn recv_rest(
    fd: RawFd,
    buf: &mut [u8],
    first: sys::Ret,
    abort: &AtomicBool,
    what: &'static str,
) -> Result<bool, WorkloadError> {
    let mut off = 0;
    let mut next = first.result();
    loop {
        match next {
            Ok(0) if off == 0 && !buf.is_empty() => return Ok(false),
            Ok(0) if off < buf.len() => return Err(truncated(what, off, buf.len())),
            Ok(n) => off += n,
            Err(e) => retry_or_fail(e, abort, what)?,
        }
        if off >= buf.len() {
            return Ok(true);
        }
        next = sys_recv(fd, &mut buf[off..], libc::MSG_WAITALL);
    }
}

#[cold]
fn truncated(what: &str, got: usize, want: usize) -> WorkloadError {
    WorkloadError::Other(format!(
        "{what}: the peer closed the connection after {got} of {want} bytes of a message"
    ))
}

/// TCP sender's end, as netperf: `shutdown(SHUT_WR)`, then wait until the
/// peer has read everything and closed (recv returns 0).
pub(crate) fn tcp_drain(
    s: &Socket,
    abort: &AtomicBool,
    what: &'static str,
) -> Result<(), WorkloadError> {
    let mut scratch = [0u8; 4096];
    s.shutdown(Shutdown::Write)
        .map_err(io_err(what, "shutdown(SHUT_WR)"))?;
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    loop {
        match sys_recv(s.as_raw_fd(), &mut scratch, 0) {
            Ok(0) => return Ok(()),
            // Nothing is expected back; whatever comes is discarded.
            Ok(_) => {}
            Err(e) => {
                retry_or_fail(e, abort, what)?;
                if Instant::now() >= deadline {
                    return Err(WorkloadError::Other(format!(
                        "{what}: the peer did not close the connection within {} s of the end",
                        DRAIN_TIMEOUT.as_secs()
                    )));
                }
            }
        }
    }
}

/// Sends netperf's three end-of-test datagrams, of `len` bytes (a length
/// the receiver never sees in data), sleeping `gaps[i]` before the i-th.
/// Errors are ignored: the receiver may already be gone, and it has its
/// own timer.
pub(crate) fn udp_end_markers(fd: RawFd, len: usize, gaps: &[Duration; 3]) {
    let marker = [0u8; 1];
    for gap in gaps {
        if !gap.is_zero() {
            std::thread::sleep(*gap);
        }
        let _ = sys_send(fd, &marker[..len.min(1)]);
    }
}

/// Length of the end marker for datagrams of `size` bytes: zero-length, as
/// netperf, unless the data itself is zero-length (sfnt-pingpong's UDP
/// sweep starts at 0 B), then one byte.
pub(crate) fn marker_len(size: usize) -> usize {
    if size == 0 {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected pair of stream sockets with `SO_RCVTIMEO` /
    /// `SO_SNDTIMEO` of `timeout`, as the measured loops' sockets have.
    fn stream_pair(
        timeout: Duration,
    ) -> (
        std::os::unix::net::UnixStream,
        std::os::unix::net::UnixStream,
    ) {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        for s in [&a, &b] {
            s.set_read_timeout(Some(timeout)).unwrap();
            s.set_write_timeout(Some(timeout)).unwrap();
        }
        (a, b)
    }

    #[test]
    fn recv_exact_continues_after_a_timeout_cut_the_message_short() {
        use std::io::Write;
        let (a, mut b) = stream_pair(Duration::from_millis(30));
        let abort = AtomicBool::new(false);
        let writer = std::thread::spawn(move || {
            b.write_all(b"hello ").unwrap();
            // Past the receiver's timeout: its first call returns short.
            std::thread::sleep(Duration::from_millis(120));
            b.write_all(b"world").unwrap();
            b
        });
        let mut buf = [0u8; 11];
        assert!(recv_exact(a.as_raw_fd(), &mut buf, &abort, "test").unwrap());
        assert_eq!(&buf, b"hello world");
        // An orderly end before the next message is `false`, not an error.
        drop(writer.join().unwrap());
        assert!(!recv_exact(a.as_raw_fd(), &mut buf, &abort, "test").unwrap());
    }

    #[test]
    fn recv_exact_reports_a_message_cut_by_the_peers_close() {
        use std::io::Write;
        let (a, mut b) = stream_pair(Duration::from_millis(30));
        b.write_all(b"half").unwrap();
        drop(b);
        let mut buf = [0u8; 8];
        let e = recv_exact(a.as_raw_fd(), &mut buf, &AtomicBool::new(false), "test")
            .err()
            .unwrap();
        assert!(e.to_string().contains("after 4 of 8 bytes"), "{e}");
    }

    #[test]
    fn recv_exact_sees_abort_while_waiting() {
        let (a, _b) = stream_pair(Duration::from_millis(20));
        let abort = AtomicBool::new(true);
        let mut buf = [0u8; 4];
        let e = recv_exact(a.as_raw_fd(), &mut buf, &abort, "test")
            .err()
            .unwrap();
        assert!(matches!(e, WorkloadError::Aborted), "{e}");
    }

    #[test]
    fn send_all_continues_short_and_timed_out_sends() {
        use std::io::Read;
        // Several socket buffers' worth, read in slices with pauses longer
        // than the send timeout: calls return short and time out, over and
        // over, and every byte must still arrive once and in order.
        let msg: Vec<u8> = (0..2 << 20).map(|i: u32| (i * 7 % 251) as u8).collect();
        let (a, mut b) = stream_pair(Duration::from_millis(10));
        b.set_read_timeout(None).unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut slice = vec![0u8; 256 << 10];
            loop {
                std::thread::sleep(Duration::from_millis(25));
                let n = b.read(&mut slice).unwrap();
                if n == 0 {
                    return got;
                }
                got.extend_from_slice(&slice[..n]);
            }
        });
        send_all(a.as_raw_fd(), &msg, &AtomicBool::new(false), "test").unwrap();
        drop(a);
        let got = reader.join().unwrap();
        assert_eq!(got.len(), msg.len());
        assert!(got == msg);
    }
}
