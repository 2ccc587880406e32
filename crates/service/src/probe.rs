//! Readiness probes: is the server answering yet?

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;

use crate::spec::Probe;

/// How long one probe attempt may take.
const ATTEMPT: Duration = Duration::from_millis(500);

/// The address a probe connects to: the listen address, with an
/// unspecified one (`0.0.0.0`, `::`) replaced by loopback of its family.
pub fn target(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

/// One attempt: `Ok` when the server is ready, else why not (yet).
pub fn attempt(probe: &Probe, addr: SocketAddr) -> Result<(), String> {
    let mut s = TcpStream::connect_timeout(&addr, ATTEMPT)
        .map_err(|e| format!("connect to {addr}: {e}"))?;
    match probe {
        Probe::Tcp => Ok(()),
        Probe::Amqp => amqp_start(&mut s),
        Probe::Http(path) => {
            let _ = s.set_read_timeout(Some(ATTEMPT));
            let _ = s.set_write_timeout(Some(ATTEMPT));
            let req = format!(
                "GET {path} HTTP/1.0\r\nHost: {addr}\r\nUser-Agent: benchlab-probe\r\n\r\n"
            );
            s.write_all(req.as_bytes())
                .map_err(|e| format!("send GET {path}: {e}"))?;
            // The status line is all we need; it fits in the first read
            // of any real server's answer.
            let mut buf = [0u8; 256];
            let mut n = 0;
            while n < buf.len() {
                match s.read(&mut buf[n..]) {
                    Ok(0) => break,
                    Ok(k) => {
                        n += k;
                        if buf[..n].contains(&b'\n') {
                            break;
                        }
                    }
                    Err(e) => return Err(format!("read the answer to GET {path}: {e}")),
                }
            }
            let head = String::from_utf8_lossy(&buf[..n]);
            let line = head.lines().next().unwrap_or("");
            let status = status_of(line)
                .ok_or_else(|| format!("GET {path}: not an HTTP answer: `{line}`"))?;
            if status < 500 {
                Ok(())
            } else {
                Err(format!("GET {path}: {line}"))
            }
        }
    }
}

/// Sends the AMQP 0-9-1 protocol header and reads the first frame: a
/// method frame on channel 0 carrying `connection.start` (class 10,
/// method 10) means the broker's listener is up and its boot is done.
/// The connection is then dropped; the broker logs it as closed.
fn amqp_start(s: &mut TcpStream) -> Result<(), String> {
    let _ = s.set_read_timeout(Some(ATTEMPT));
    let _ = s.set_write_timeout(Some(ATTEMPT));
    s.write_all(b"AMQP\x00\x00\x09\x01")
        .map_err(|e| format!("send the AMQP protocol header: {e}"))?;
    let mut head = [0u8; 11];
    s.read_exact(&mut head)
        .map_err(|e| format!("read the broker's first AMQP frame: {e}"))?;
    if head.starts_with(b"AMQP") {
        return Err(format!(
            "the server wants another AMQP version ({:?})",
            &head[4..8]
        ));
    }
    if head[0] != 1 || head[1..3] != [0, 0] || head[7..11] != [0, 10, 0, 10] {
        return Err(format!(
            "not an AMQP 0-9-1 connection.start: {:02x?}",
            &head[..]
        ));
    }
    Ok(())
}

/// The status code of an HTTP status line (`HTTP/1.1 200 OK`).
fn status_of(line: &str) -> Option<u16> {
    let mut w = line.split_whitespace();
    let version = w.next()?;
    if !version.starts_with("HTTP/") {
        return None;
    }
    w.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn status_lines() {
        assert_eq!(status_of("HTTP/1.1 200 OK"), Some(200));
        assert_eq!(status_of("HTTP/1.0 503 Service Unavailable"), Some(503));
        assert_eq!(status_of("SSH-2.0-OpenSSH"), None);
        assert_eq!(status_of(""), None);
    }

    #[test]
    fn unspecified_addresses_become_loopback() {
        assert_eq!(
            target("0.0.0.0:80".parse().unwrap()),
            "127.0.0.1:80".parse().unwrap()
        );
        assert_eq!(
            target("[::]:80".parse().unwrap()),
            "[::1]:80".parse().unwrap()
        );
        assert_eq!(
            target("10.0.0.1:80".parse().unwrap()),
            "10.0.0.1:80".parse().unwrap()
        );
    }

    #[test]
    fn amqp_probe_wants_connection_start() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for answer in [
                &b"AMQP\x00\x00\x09\x01\x00\x00\x00"[..],
                &[1, 0, 0, 0, 0, 0, 4, 0, 10, 0, 10, 0xce][..],
            ] {
                let (mut c, _) = l.accept().unwrap();
                let mut hdr = [0u8; 8];
                c.read_exact(&mut hdr).unwrap();
                assert_eq!(&hdr, b"AMQP\x00\x00\x09\x01");
                c.write_all(answer).unwrap();
            }
        });
        let e = attempt(&Probe::Amqp, addr).unwrap_err();
        assert!(e.contains("another AMQP version"), "{e}");
        attempt(&Probe::Amqp, addr).unwrap();
        server.join().unwrap();
    }

    #[test]
    fn http_probe_reads_the_status() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for answer in [
                "HTTP/1.1 503 Busy\r\n\r\n",
                "HTTP/1.1 404 Not Found\r\n\r\n",
            ] {
                let (mut c, _) = l.accept().unwrap();
                let mut req = [0u8; 512];
                let n = c.read(&mut req).unwrap();
                assert!(String::from_utf8_lossy(&req[..n]).starts_with("GET /x HTTP/1.0\r\n"));
                c.write_all(answer.as_bytes()).unwrap();
            }
        });
        let p = Probe::Http("/x".into());
        assert_eq!(attempt(&p, addr).unwrap_err(), "GET /x: HTTP/1.1 503 Busy");
        attempt(&p, addr).unwrap();
        server.join().unwrap();
    }
}
