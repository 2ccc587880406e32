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
        Probe::Smb => smb_negotiate(&mut s),
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

/// The SMB1 dialect strings the probe offers, in order: NT1 (what
/// `server min protocol = NT1` keeps and nbench speaks), then the two
/// strings by which a client asks an SMB2-capable server to answer in
/// SMB2 instead (MS-SMB2 3.3.5.3.1): `SMB 2.002` and the wildcard
/// `SMB 2.???`.
const SMB1_DIALECTS: [&str; 3] = ["NT LM 0.12", "SMB 2.002", "SMB 2.???"];

/// An SMB1 `SMB_COM_NEGOTIATE` request in its NetBIOS session framing
/// (MS-CIFS 2.2.4.52.1, RFC 1002 4.3.1): one request that every smbd
/// answers whatever its `server min/max protocol` — in SMB1 when it keeps
/// only NT1, in SMB2 otherwise. An SMB2 NEGOTIATE alone would go
/// unanswered by an SMB1-only server. No session, no credentials: the
/// probe ends at the server's dialect choice.
fn smb1_negotiate_request() -> Vec<u8> {
    let mut bytes = Vec::new();
    for d in SMB1_DIALECTS {
        bytes.push(0x02); // BufferFormat: a dialect string follows
        bytes.extend_from_slice(d.as_bytes());
        bytes.push(0); // its NUL terminator
    }
    let mut m = Vec::with_capacity(4 + 35 + bytes.len());
    // NetBIOS session service header: type 0x00 (session message), then
    // the message's length in 24 bits, big-endian.
    let len = 32 + 1 + 2 + bytes.len();
    m.extend_from_slice(&[0x00, 0, (len >> 8) as u8, len as u8]);
    // SMB1 header (32 bytes; fields little-endian).
    m.extend_from_slice(b"\xffSMB"); // Protocol
    m.push(0x72); // Command: SMB_COM_NEGOTIATE
    m.extend_from_slice(&[0; 4]); // Status
    m.push(0x18); // Flags: CASE_INSENSITIVE | CANONICALIZED_PATHS
                  // Flags2: UNICODE | NT_STATUS | EXTENDED_SECURITY | LONG_NAMES.
    m.extend_from_slice(&0xc801u16.to_le_bytes());
    m.extend_from_slice(&[0; 2]); // PIDHigh
    m.extend_from_slice(&[0; 8]); // SecurityFeatures
    m.extend_from_slice(&[0; 2]); // Reserved
    m.extend_from_slice(&[0; 2]); // TID
    m.extend_from_slice(&0xbe1fu16.to_le_bytes()); // PIDLow (any)
    m.extend_from_slice(&[0; 2]); // UID
    m.extend_from_slice(&[0; 2]); // MID
                                  // Parameters: WordCount 0; Data: ByteCount, then the dialects.
    m.push(0);
    m.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    m.extend_from_slice(&bytes);
    m
}

/// SMB2 dialect revisions a NEGOTIATE response may carry (MS-SMB2
/// 2.2.4): 2.0.2, 2.1, 3.0, 3.0.2, 3.1.1, and 0x02FF, the answer to the
/// `SMB 2.???` wildcard that tells the client to negotiate again in SMB2.
const SMB2_DIALECTS: [u16; 6] = [0x0202, 0x0210, 0x0300, 0x0302, 0x0311, 0x02ff];

/// Sends [`smb1_negotiate_request`] and accepts only a successful SMB
/// negotiate response: an SMB2 NEGOTIATE response with a known dialect,
/// or an SMB1 NEGOTIATE response choosing NT LM 0.12. Anything else — a
/// listener that is not SMB, an error status, a closed connection, no
/// answer within [`ATTEMPT`] — is "not ready", saying which.
fn smb_negotiate(s: &mut TcpStream) -> Result<(), String> {
    let _ = s.set_read_timeout(Some(ATTEMPT));
    let _ = s.set_write_timeout(Some(ATTEMPT));
    s.write_all(&smb1_negotiate_request())
        .map_err(|e| format!("send an SMB negotiate request: {e}"))?;
    let mut nbss = [0u8; 4];
    read_answer(s, &mut nbss)?;
    let len = u32::from_be_bytes([0, nbss[1], nbss[2], nbss[3]]) as usize;
    // The fields checked end at byte 70 (SMB2) or 35 (SMB1).
    let mut head = [0u8; 70];
    let want = len.min(head.len());
    if nbss[0] != 0x00 || want < 35 {
        return Err(not_smb(&nbss));
    }
    read_answer(s, &mut head[..want])?;
    check_negotiate_response(&head[..want])
}

/// Reads exactly `buf.len()` bytes of the server's answer.
fn read_answer(s: &mut TcpStream, buf: &mut [u8]) -> Result<(), String> {
    s.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            "the server closed the connection without answering the SMB negotiate request (not an SMB server, or one refusing it)".to_string()
        }
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
            "no answer to the SMB negotiate request within {} ms",
            ATTEMPT.as_millis()
        ),
        _ => format!("read the answer to the SMB negotiate request: {e}"),
    })
}

fn not_smb(first: &[u8]) -> String {
    format!(
        "not an SMB server: its answer to an SMB negotiate request begins {:02x?} ({:?}), not an SMB negotiate response",
        first,
        String::from_utf8_lossy(first)
    )
}

/// Checks an SMB negotiate response (without its 4-byte NetBIOS header).
fn check_negotiate_response(m: &[u8]) -> Result<(), String> {
    let u16_at = |i: usize| u16::from_le_bytes([m[i], m[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([m[i], m[i + 1], m[i + 2], m[i + 3]]);
    if m.starts_with(b"\xfeSMB") && m.len() >= 70 {
        // SMB2 header: StructureSize 64 at 4, Status at 8, Command at 12
        // (0: NEGOTIATE), Flags at 16 (bit 0: SERVER_TO_REDIR, a response).
        if u16_at(4) != 64 || u16_at(12) != 0 || u32_at(16) & 1 == 0 {
            return Err(not_smb(&m[..16]));
        }
        if u32_at(8) != 0 {
            return Err(format!(
                "the SMB server refused the negotiate request with status 0x{:08x}",
                u32_at(8)
            ));
        }
        // The NEGOTIATE response body: StructureSize 65 at 64,
        // DialectRevision at 68.
        let dialect = u16_at(68);
        if u16_at(64) != 65 || !SMB2_DIALECTS.contains(&dialect) {
            return Err(format!(
                "a malformed SMB2 negotiate response (structure size {}, dialect 0x{dialect:04x})",
                u16_at(64)
            ));
        }
        return Ok(());
    }
    if m.starts_with(b"\xffSMB") {
        // SMB1 header: Command at 4 (0x72: NEGOTIATE), Status at 5, Flags
        // at 9 (0x80: a reply); then WordCount at 32 and DialectIndex.
        if m[4] != 0x72 || m[9] & 0x80 == 0 {
            return Err(not_smb(&m[..16]));
        }
        if u32_at(5) != 0 {
            return Err(format!(
                "the SMB server refused the negotiate request with status 0x{:08x}",
                u32_at(5)
            ));
        }
        return match (m[32], u16_at(33)) {
            // 17 words: the NT LM 0.12 response, index 0 in our list.
            (17, 0) => Ok(()),
            (_, 0xffff) => Err(format!(
                "the SMB server accepts none of the dialects offered ({})",
                SMB1_DIALECTS.join(", ")
            )),
            (wc, i) => Err(format!(
                "a malformed SMB1 negotiate response (word count {wc}, dialect index {i})"
            )),
        };
    }
    Err(not_smb(&m[..m.len().min(16)]))
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

    /// A server that reads one request and answers each connection with
    /// the next of `answers` (`None`: closes at once without a word).
    fn answering(answers: Vec<Option<Vec<u8>>>) -> (SocketAddr, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for answer in answers {
                let (mut c, _) = l.accept().unwrap();
                let mut req = [0u8; 512];
                let n = c.read(&mut req).unwrap();
                // The request as the probe sends it: framed, SMB1
                // NEGOTIATE, its dialects.
                assert_eq!(&req[..4], &[0, 0, 0, (n - 4) as u8]);
                assert_eq!(&req[4..9], b"\xffSMB\x72");
                assert!(req[..n].ends_with(b"\x02SMB 2.002\0\x02SMB 2.???\0"));
                match answer {
                    Some(a) => c.write_all(&a).unwrap(),
                    None => drop(c),
                }
            }
        });
        (addr, server)
    }

    /// An SMB2 NEGOTIATE response of `dialect` with `status`, framed.
    fn smb2_response(status: u32, dialect: u16) -> Vec<u8> {
        let mut m = vec![0u8; 4 + 64 + 65];
        let len = m.len() - 4;
        m[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        let h = &mut m[4..];
        h[..4].copy_from_slice(b"\xfeSMB");
        h[4..6].copy_from_slice(&64u16.to_le_bytes());
        h[8..12].copy_from_slice(&status.to_le_bytes());
        h[16..20].copy_from_slice(&1u32.to_le_bytes());
        h[64..66].copy_from_slice(&65u16.to_le_bytes());
        h[68..70].copy_from_slice(&dialect.to_le_bytes());
        m
    }

    /// An SMB1 NEGOTIATE response choosing dialect `index`, framed.
    fn smb1_response(index: u16) -> Vec<u8> {
        let mut m = vec![0u8; 4 + 32 + 1 + 34 + 2];
        let len = m.len() - 4;
        m[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        let h = &mut m[4..];
        h[..5].copy_from_slice(b"\xffSMB\x72");
        h[9] = 0x98;
        h[32] = if index == 0xffff { 1 } else { 17 };
        h[33..35].copy_from_slice(&index.to_le_bytes());
        m
    }

    #[test]
    fn smb_probe_accepts_only_a_negotiate_response() {
        let (addr, server) = answering(vec![
            Some(smb2_response(0, 0x02ff)),
            Some(smb1_response(0)),
            Some(b"HTTP/1.0 400 Bad Request\r\n\r\n".to_vec()),
            None,
            Some(smb2_response(0xc000_0022, 0x02ff)),
            Some(smb1_response(0xffff)),
            Some(smb2_response(0, 0x0999)),
        ]);
        attempt(&Probe::Smb, addr).unwrap();
        attempt(&Probe::Smb, addr).unwrap();
        let e = attempt(&Probe::Smb, addr).unwrap_err();
        assert!(e.starts_with("not an SMB server: its answer to an SMB negotiate request begins [48, 54, 54, 50] (\"HTTP\")"), "{e}");
        let e = attempt(&Probe::Smb, addr).unwrap_err();
        assert!(
            e.starts_with("the server closed the connection without answering"),
            "{e}"
        );
        let e = attempt(&Probe::Smb, addr).unwrap_err();
        assert_eq!(
            e,
            "the SMB server refused the negotiate request with status 0xc0000022"
        );
        let e = attempt(&Probe::Smb, addr).unwrap_err();
        assert!(
            e.contains("accepts none of the dialects offered (NT LM 0.12, SMB 2.002, SMB 2.???)"),
            "{e}"
        );
        let e = attempt(&Probe::Smb, addr).unwrap_err();
        assert!(e.contains("dialect 0x0999"), "{e}");
        server.join().unwrap();
    }

    #[test]
    fn a_silent_listener_is_not_smb_ready() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        // Accepted by the kernel's backlog, never answered.
        let e = attempt(&Probe::Smb, addr).unwrap_err();
        assert_eq!(e, "no answer to the SMB negotiate request within 500 ms");
        drop(l);
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
