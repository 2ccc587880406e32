//! System calls for the measured loops, made with the `syscall`
//! instruction itself on x86-64 (elsewhere through libc's `syscall()`).
//!
//! Why not libc's `syscall()`: it is a function that moves each of its
//! arguments one register along before the instruction, and the caller
//! moves them into its calling convention first (the seventh argument on
//! the stack), some 20 user-space instructions per call that the kernel
//! never needed. A measured loop makes one or two calls per operation, so
//! they were a third of a ping-pong round trip's and half of a file
//! record's own instructions (`bench/cost`, bench/README.md, "Cost per
//! operation"). glibc's `send()`/`read()` are no way out: in a process
//! with a second thread they are cancellation points bracketed by two
//! atomic read-modify-writes.
//!
//! The calls report errors as [`std::io::Error`] from the returned
//! `-errno`; they never touch `errno`.

use std::io;

/// What a system call returned: a count or an offset when not negative,
/// `-errno` when negative (none of the calls here succeeds with a
/// negative value).
///
/// The measured loops compare it with the count they asked for, and build
/// an [`io::Error`] only on the other, rare path, out of line: turning
/// every return into an `io::Result` first cost some ten instructions per
/// call (the error's packing, selected with conditional moves, then a
/// second comparison), as much as the call's own set-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Ret(isize);

impl Ret {
    /// Whether the call returned exactly `n` (a count; never an error,
    /// as `n` is at most `isize::MAX`).
    #[inline(always)]
    pub fn is(self, n: usize) -> bool {
        self.0 as usize == n
    }

    /// Whether the call failed.
    #[inline(always)]
    pub fn failed(self) -> bool {
        self.0 < 0
    }

    /// The count, or the error.
    #[inline(always)]
    pub fn result(self) -> io::Result<usize> {
        if self.0 >= 0 {
            Ok(self.0 as usize)
        } else {
            Err(self.error())
        }
    }

    /// The error of a call that [failed](Ret::failed).
    #[cold]
    #[inline(never)]
    pub fn error(self) -> io::Error {
        debug_assert!(self.failed(), "{self:?} is no error");
        io::Error::from_raw_os_error(self.0.unsigned_abs() as i32)
    }
}

/// A system call of up to six integer arguments.
///
/// # Safety
///
/// As for the call `nr` with these arguments: every pointer among them
/// must be valid for what that call does with it.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn syscall6(nr: libc::c_long, a: [usize; 6]) -> Ret {
    let ret: isize;
    // SAFETY: the caller vouches for the arguments; the kernel clobbers
    // only rcx and r11 and restores the flags from r11 on return.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack, preserves_flags)
        );
    }
    Ret(ret)
}

/// A system call of up to three integer arguments (the rest unset).
///
/// # Safety
///
/// As for [`syscall6`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn syscall3(nr: libc::c_long, a: [usize; 3]) -> Ret {
    let ret: isize;
    // SAFETY: as in `syscall6`.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack, preserves_flags)
        );
    }
    Ret(ret)
}

/// A system call of up to six integer arguments.
///
/// # Safety
///
/// As for the call `nr` with these arguments.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn syscall6(nr: libc::c_long, a: [usize; 6]) -> Ret {
    // SAFETY: the caller vouches for the arguments.
    let ret = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if ret < 0 {
        let errno = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        Ret(-(errno as isize))
    } else {
        Ret(ret as isize)
    }
}

/// A system call of up to three integer arguments.
///
/// # Safety
///
/// As for [`syscall6`].
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn syscall3(nr: libc::c_long, a: [usize; 3]) -> Ret {
    // SAFETY: as above.
    unsafe { syscall6(nr, [a[0], a[1], a[2], 0, 0, 0]) }
}

/// `read(fd, buf)`.
#[inline(always)]
pub fn read(fd: libc::c_int, buf: &mut [u8]) -> Ret {
    // SAFETY: `buf` is valid for writes of its length during the call.
    unsafe {
        syscall3(
            libc::SYS_read,
            [fd as usize, buf.as_mut_ptr() as usize, buf.len()],
        )
    }
}

/// `write(fd, buf)`.
#[inline(always)]
pub fn write(fd: libc::c_int, buf: &[u8]) -> Ret {
    // SAFETY: `buf` is valid for reads of its length during the call.
    unsafe {
        syscall3(
            libc::SYS_write,
            [fd as usize, buf.as_ptr() as usize, buf.len()],
        )
    }
}

/// `lseek(fd, off, whence)`: the new offset.
#[inline(always)]
pub fn lseek(fd: libc::c_int, off: i64, whence: libc::c_int) -> Ret {
    // SAFETY: no pointer.
    unsafe {
        syscall3(
            libc::SYS_lseek,
            [fd as usize, off as usize, whence as usize],
        )
    }
}

/// `send(fd, buf, flags)` (a `sendto` without an address).
#[inline(always)]
pub fn send(fd: libc::c_int, buf: &[u8], flags: libc::c_int) -> Ret {
    // SAFETY: `buf` is valid for reads of its length during the call; a
    // null address of length 0 makes sendto a send.
    unsafe {
        syscall6(
            libc::SYS_sendto,
            [
                fd as usize,
                buf.as_ptr() as usize,
                buf.len(),
                flags as usize,
                0,
                0,
            ],
        )
    }
}

/// `recv(fd, buf, flags)` (a `recvfrom` without an address).
#[inline(always)]
pub fn recv(fd: libc::c_int, buf: &mut [u8], flags: libc::c_int) -> Ret {
    // SAFETY: `buf` is valid for writes of its length during the call;
    // null address pointers make recvfrom a recv.
    unsafe {
        syscall6(
            libc::SYS_recvfrom,
            [
                fd as usize,
                buf.as_mut_ptr() as usize,
                buf.len(),
                flags as usize,
                0,
                0,
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn calls_return_counts_and_errors_as_libc_would() {
        let mut fds = [0; 2];
        // SAFETY: a valid array of two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        assert_eq!(write(fds[1], b"ping").result().unwrap(), 4);
        let mut buf = [0u8; 8];
        assert_eq!(read(fds[0], &mut buf).result().unwrap(), 4);
        assert_eq!(&buf[..4], b"ping");
        // A pipe cannot seek: the kernel's -ESPIPE comes back as the error.
        let e = lseek(fds[0], 0, libc::SEEK_SET).result().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESPIPE));
        // SAFETY: descriptors of this test.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        // Never a descriptor (a closed one may be another test's by now).
        let e = read(-1, &mut buf).result().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));

        let f = tempfile_in_tmp();
        assert_eq!(write(f.as_raw_fd(), &[7u8; 100]).result().unwrap(), 100);
        assert_eq!(
            lseek(f.as_raw_fd(), 10, libc::SEEK_SET).result().unwrap(),
            10
        );
        assert_eq!(read(f.as_raw_fd(), &mut buf).result().unwrap(), 8);
        assert_eq!(buf, [7u8; 8]);
    }

    #[test]
    fn send_and_recv_carry_flags() {
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        assert_eq!(
            send(a.as_raw_fd(), b"0123456789", libc::MSG_NOSIGNAL)
                .result()
                .unwrap(),
            10
        );
        let mut buf = [0u8; 4];
        // MSG_TRUNC: the datagram's whole length, the buffer's part of it.
        assert_eq!(
            recv(b.as_raw_fd(), &mut buf, libc::MSG_TRUNC)
                .result()
                .unwrap(),
            10
        );
        assert_eq!(&buf, b"0123");
        let e = recv(b.as_raw_fd(), &mut buf, libc::MSG_DONTWAIT)
            .result()
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn ret_tells_a_count_from_an_error() {
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let r = send(a.as_raw_fd(), b"abc", 0);
        assert!(r.is(3) && !r.is(2) && !r.failed());
        let mut buf = [0u8; 8];
        assert!(recv(b.as_raw_fd(), &mut buf, 0).is(3));
        let r = read(-1, &mut buf);
        assert!(r.failed());
        // -errno is no count, not even the largest a buffer can have.
        assert!(!r.is(isize::MAX as usize));
        assert_eq!(r.error().raw_os_error(), Some(libc::EBADF));
    }

    fn tempfile_in_tmp() -> std::fs::File {
        let p = std::env::temp_dir().join(format!("benchlab-sys-test.{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        std::fs::remove_file(&p).unwrap();
        f
    }
}
