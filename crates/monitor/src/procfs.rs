//! Our own readers of the /proc files the monitor samples. The input is
//! the local kernel's (trusted), and the cost is measured: each file is
//! kept open and read again from offset 0 into a buffer sized at warm-up,
//! and parsed in place, so that a sample allocates nothing.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// A /proc file kept open and re-read from its start at every sample.
pub(crate) struct ProcFile {
    file: File,
    buf: Vec<u8>,
    len: usize,
}

impl ProcFile {
    /// Opens `path` and reads it once, sizing the buffer at twice what it
    /// held then (room for interfaces or devices that appear later).
    pub(crate) fn open(path: &str) -> io::Result<ProcFile> {
        let mut f = ProcFile {
            file: File::open(path)?,
            buf: vec![0; 16 * 1024],
            len: 0,
        };
        f.read()?;
        let want = (f.len * 2).max(4096);
        if f.buf.len() < want {
            f.buf.resize(want, 0);
        }
        Ok(f)
    }

    /// The file's current content. Grows the buffer (allocates) only when
    /// the content outgrew the room left at warm-up.
    pub(crate) fn read(&mut self) -> io::Result<&[u8]> {
        let mut off = 0;
        loop {
            if off == self.buf.len() {
                let n = self.buf.len() * 2;
                self.buf.resize(n, 0);
            }
            let rest = &mut self.buf[off..];
            // SAFETY: `rest` is valid for writes of its length; pread
            // writes at most that many bytes.
            let n = unsafe {
                libc::pread(
                    self.file.as_raw_fd(),
                    rest.as_mut_ptr().cast(),
                    rest.len(),
                    off as libc::off_t,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                break;
            }
            off += n as usize;
        }
        self.len = off;
        Ok(&self.buf[..off])
    }
}

/// The lines of a file's content.
pub(crate) fn lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|&b| b == b'\n').filter(|l| !l.is_empty())
}

/// The whitespace-separated words of a line.
pub(crate) fn words(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
}

/// A decimal number (0 for anything else: the kernel writes digits).
pub(crate) fn num(word: &[u8]) -> u64 {
    word.iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0u64, |n, &b| {
            n.wrapping_mul(10).wrapping_add(u64::from(b - b'0'))
        })
}

/// `cpuN` → N; `None` for the `cpu` total line and other lines.
pub(crate) fn cpu_index(word: &[u8]) -> Option<usize> {
    let rest = word.strip_prefix(b"cpu")?;
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(num(rest) as usize)
}

/// The interface name of a `/proc/net/dev` line and the rest of it.
pub(crate) fn netdev_line(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = line.iter().position(|&b| b == b':')?;
    let name = line[..colon].trim_ascii();
    // The two header lines have `|` where a name would be.
    if name.is_empty() || name.contains(&b'|') {
        return None;
    }
    Some((name, &line[colon + 1..]))
}

/// The device name of a `/proc/diskstats` line and its counters (after
/// the major and minor numbers and the name).
pub(crate) fn diskstats_line(line: &[u8]) -> Option<(&[u8], impl Iterator<Item = &[u8]>)> {
    let mut w = words(line);
    w.next()?;
    w.next()?;
    let name = w.next()?;
    Some((name, w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_cpu_lines() {
        assert_eq!(num(b"12345"), 12345);
        assert_eq!(num(b"7:"), 7);
        assert_eq!(cpu_index(b"cpu12"), Some(12));
        assert_eq!(cpu_index(b"cpu"), None);
        assert_eq!(cpu_index(b"cpux"), None);
        let l: Vec<&[u8]> = words(b"  a  bb\tc ").collect();
        assert_eq!(l, vec![&b"a"[..], b"bb", b"c"]);
    }

    #[test]
    fn netdev_and_diskstats_lines() {
        assert!(netdev_line(b" face |bytes    packets errs").is_none());
        let (n, rest) = netdev_line(b"  eth0: 10 2 0 0 0 0 0 0 30 4 0 0 0 0 0 0").unwrap();
        assert_eq!(n, b"eth0");
        assert_eq!(words(rest).count(), 16);
        let (n, mut rest) = diskstats_line(b"   7       0 loop0 10696 90 558572").unwrap();
        assert_eq!(n, b"loop0");
        assert_eq!(rest.next(), Some(&b"10696"[..]));
    }

    #[test]
    fn a_proc_file_reads_again_from_its_start() {
        let mut f = ProcFile::open("/proc/self/stat").unwrap();
        let a = f.read().unwrap().to_vec();
        let b = f.read().unwrap().to_vec();
        assert!(!a.is_empty());
        // Same process, same first field (its pid) both times.
        assert_eq!(
            a.split(|&c| c == b' ').next(),
            b.split(|&c| c == b' ').next()
        );
    }
}
