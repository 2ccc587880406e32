//! The authenticated TCP agent over real loopback connections: the right
//! key gets a session, anything else is refused before a request is read,
//! and neither a silent nor a trickling peer can hold the agent.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use benchlab_agent::channel::{
    agent_handshake, controller_handshake, load_key, AuthError, Key, SecureStream, MAGIC,
    MIN_KEY_LEN, WIRE_VERSION,
};
use benchlab_agent::frame::{read_frame, write_frame};
use benchlab_agent::listen::{connect, listen, serve_listener};
use benchlab_agent::protocol::{Request, Response, PROTOCOL_VERSION};
use benchlab_core::Registry;

fn key() -> Key {
    Key::from_bytes(b"a shared key of 32 bytes, really")
}

fn other_key() -> Key {
    Key::from_bytes(b"another key, also long enough...")
}
/// Generous: only reached when something is broken.
const PATIENCE: Duration = Duration::from_secs(10);

fn hello() -> Request {
    Request::Hello {
        protocol: PROTOCOL_VERSION,
        benchlab: benchlab_core::VERSION.to_string(),
    }
}

/// An agent on an ephemeral loopback port that serves one authenticated
/// session and returns.
fn agent(handshake_timeout: Duration) -> (SocketAddr, JoinHandle<io::Result<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        serve_listener(&listener, &key(), &Registry::new(), true, handshake_timeout)
    });
    (addr, h)
}

/// A full session with the right key: hello, then shutdown. Ends an agent
/// started with `once`, and so also proves it survived earlier refusals.
fn session(addr: SocketAddr) {
    let mut s = connect(addr, &key(), PATIENCE).unwrap();
    s.tcp().set_read_timeout(Some(PATIENCE)).unwrap();
    write_frame(&mut s, &hello()).unwrap();
    match read_frame::<_, Response>(&mut s).unwrap() {
        Some(Response::Hello { protocol, pid, .. }) => {
            assert_eq!(protocol, PROTOCOL_VERSION);
            assert_eq!(pid, std::process::id());
        }
        other => panic!("expected hello, got {other:?}"),
    }
    write_frame(&mut s, &Request::Shutdown).unwrap();
    assert_eq!(
        read_frame::<_, Response>(&mut s).unwrap(),
        Some(Response::Bye)
    );
}

fn finish(addr: SocketAddr, h: JoinHandle<io::Result<()>>) {
    session(addr);
    h.join().unwrap().unwrap();
}

/// True when the peer closed the connection (end of stream or reset), as
/// opposed to merely not answering before the read timeout.
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 64];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            // Leftovers the agent sent before closing (its preamble).
            Ok(_) => continue,
            Err(e) => {
                return !matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                )
            }
        }
    }
}

fn raw(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

/// Reads the agent's preamble: the magic and this version.
fn read_preamble(s: &mut TcpStream) {
    let mut p = [0u8; 8];
    s.read_exact(&mut p).unwrap();
    assert_eq!(&p[..7], &MAGIC[..]);
    assert_eq!(p[7], WIRE_VERSION);
}

/// Our preamble.
fn preamble() -> Vec<u8> {
    [&MAGIC[..], &[WIRE_VERSION]].concat()
}

/// A loopback pair: (controller end, agent end).
fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (a, _) = l.accept().unwrap();
    for s in [&c, &a] {
        s.set_read_timeout(Some(PATIENCE)).unwrap();
    }
    (c, a)
}

#[test]
fn same_key_both_sides_succeed() {
    let (mut c, mut a) = pair();
    let agent = std::thread::spawn(move || agent_handshake(&mut a, &key()).map(|k| (a, k)));
    let ck = controller_handshake(&mut c, &key()).unwrap();
    let (a, ak) = agent.join().unwrap().unwrap();
    // The stream now carries the control protocol, nothing left over, and
    // both ends derived the same session key: frames verify both ways.
    let mut c = SecureStream::new(c, ck).unwrap();
    let mut a = SecureStream::new(a, ak).unwrap();
    write_frame(&mut c, &hello()).unwrap();
    assert_eq!(read_frame::<_, Request>(&mut a).unwrap(), Some(hello()));
    write_frame(&mut a, &Response::Bye).unwrap();
    assert_eq!(
        read_frame::<_, Response>(&mut c).unwrap(),
        Some(Response::Bye)
    );
}

#[test]
fn right_key_session_through_listen() {
    // `listen` takes an address; find a free port for it first.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let h = std::thread::spawn(move || listen(addr, key(), &Registry::new(), true));
    let start = Instant::now();
    let mut s = loop {
        match connect(addr, &key(), PATIENCE) {
            Ok(s) => break s,
            Err(AuthError::Connect { .. }) if start.elapsed() < PATIENCE => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("{e}"),
        }
    };
    write_frame(&mut s, &hello()).unwrap();
    assert!(matches!(
        read_frame::<_, Response>(&mut s).unwrap(),
        Some(Response::Hello { .. })
    ));
    write_frame(&mut s, &Request::Inventory).unwrap();
    assert!(matches!(
        read_frame::<_, Response>(&mut s).unwrap(),
        Some(Response::Inventory { .. })
    ));
    write_frame(&mut s, &Request::Shutdown).unwrap();
    assert_eq!(
        read_frame::<_, Response>(&mut s).unwrap(),
        Some(Response::Bye)
    );
    h.join().unwrap().unwrap();
}

#[test]
fn wrong_key_both_sides_fail_clearly() {
    let (mut c, mut a) = pair();
    let agent = std::thread::spawn(move || agent_handshake(&mut a, &key()));
    let ce = controller_handshake(&mut c, &other_key()).unwrap_err();
    let ae = agent.join().unwrap().unwrap_err();
    assert!(matches!(ce, AuthError::NotAccepted { .. }), "{ce}");
    assert_eq!(ce.to_string(), "the agent did not accept our key");
    assert!(matches!(ae, AuthError::PeerFailed { .. }), "{ae}");
    assert_eq!(
        ae.to_string(),
        "peer failed authentication: it does not hold our key"
    );
}

#[test]
fn wrong_key_never_gets_a_request_read() {
    let (addr, h) = agent(PATIENCE);

    // Through `connect`: the error names the agent.
    let e = connect(addr, &other_key(), PATIENCE).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("the agent at {addr} did not accept our key")
    );

    // By hand, to go on talking after the refusal: the agent has closed the
    // connection and never answers the hello.
    let mut s = raw(addr);
    let e = controller_handshake(&mut s, &other_key()).unwrap_err();
    assert!(matches!(e, AuthError::NotAccepted { .. }), "{e}");
    let _ = write_frame(&mut s, &hello());
    assert!(closed(&mut s), "the agent kept the connection open");

    finish(addr, h);
}

#[test]
fn an_impostor_agent_is_detected() {
    // It opens properly but, lacking the key, cannot make the answer: the
    // best it can send is a message of the right shape.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let impostor = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        s.write_all(&preamble()).unwrap();
        let mut first = [0u8; 8 + 2 + 48];
        s.read_exact(&mut first).unwrap();
        assert_eq!(&first[..8], &preamble()[..]);
        s.write_all(&48u16.to_be_bytes()).unwrap();
        s.write_all(&[0x11; 48]).unwrap();
        // The controller must not go on to send it anything.
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        rest
    });
    let e = connect(addr, &key(), PATIENCE).unwrap_err();
    assert!(matches!(e, AuthError::PeerFailed { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        format!("the agent at {addr} failed authentication: it does not hold our key")
    );
    assert_eq!(impostor.join().unwrap(), Vec::<u8>::new());
}

/// Issue 25: an agent of the HMAC scheme (benchlab-auth-v2) opens with a
/// JSON challenge; the controller names the mismatch.
#[test]
fn an_agent_of_the_old_protocol_is_an_incompatible_version() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let old = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let challenge = serde_json::json!({
            "auth": "challenge", "scheme": "benchlab-auth-v2", "protocol": PROTOCOL_VERSION,
            "nonce": "11".repeat(32),
        });
        write_frame(&mut s, &challenge).unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
        sink
    });
    let e = connect(addr, &key(), PATIENCE).unwrap_err();
    assert!(matches!(e, AuthError::Version { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&format!(
            "incompatible agent version: the agent at {addr} speaks `benchlab-auth-v2` (an older benchlab)"
        )),
        "{e}"
    );
    assert!(
        old.join().unwrap().is_empty(),
        "the controller sent nothing"
    );
    // A later wire version is named by its number.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let newer = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.write_all(&[&MAGIC[..], &[WIRE_VERSION + 1]].concat())
            .unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    });
    let e = connect(addr, &key(), PATIENCE).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "incompatible agent version: the agent at {addr} speaks wire version {}",
            WIRE_VERSION + 1
        )),
        "{e}"
    );
    newer.join().unwrap();
}

#[test]
fn garbage_instead_of_the_handshake_is_refused() {
    let (addr, h) = agent(PATIENCE);

    // An HTTP client.
    let mut s = raw(addr);
    read_preamble(&mut s);
    s.write_all(b"GET / HTTP/1.1\r\nHost: agent\r\n\r\n")
        .unwrap();
    assert!(closed(&mut s));

    // A controller that skips the handshake (a stdio-style hello).
    let mut s = raw(addr);
    read_preamble(&mut s);
    write_frame(&mut s, &hello()).unwrap();
    assert!(
        closed(&mut s),
        "a request was answered without authentication"
    );

    // The preamble, then first messages that are not the right one: junk
    // of the right size, too short, empty, and an absurd length.
    for first in [
        [&48u16.to_be_bytes()[..], &[0u8; 48]].concat(),
        [&8u16.to_be_bytes()[..], &[1u8; 8]].concat(),
        0u16.to_be_bytes().to_vec(),
        60_000u16.to_be_bytes().to_vec(),
    ] {
        let mut s = raw(addr);
        read_preamble(&mut s);
        s.write_all(&[preamble(), first.clone()].concat()).unwrap();
        assert!(closed(&mut s), "{first:?}");
    }

    // A controller of another wire version.
    let mut s = raw(addr);
    read_preamble(&mut s);
    s.write_all(&[&MAGIC[..], &[WIRE_VERSION - 1]].concat())
        .unwrap();
    assert!(closed(&mut s));

    finish(addr, h);
}

#[test]
fn the_controller_refuses_a_non_benchlab_server() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.write_all(b"SSH-2.0-OpenSSH_9.6\r\n").unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    });
    let e = connect(addr, &key(), PATIENCE).unwrap_err();
    assert!(matches!(e, AuthError::NotBenchlab { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("the agent at {addr} is not a benchlab peer")),
        "{e}"
    );
    server.join().unwrap();
}

#[test]
fn a_silent_peer_times_out() {
    let timeout = Duration::from_millis(200);
    let (addr, h) = agent(timeout);
    let start = Instant::now();
    let mut s = raw(addr);
    read_preamble(&mut s);
    assert!(closed(&mut s));
    let waited = start.elapsed();
    assert!(waited >= timeout, "closed after {waited:?}");
    assert!(waited < Duration::from_secs(3), "held for {waited:?}");
    finish(addr, h);
}

#[test]
fn a_trickling_peer_is_cut_at_the_deadline() {
    // One byte every 50 ms would keep a per-read timeout happy for ever;
    // the handshake has one deadline for the whole exchange.
    let timeout = Duration::from_millis(300);
    let (addr, h) = agent(timeout);
    let start = Instant::now();
    let mut s = raw(addr);
    read_preamble(&mut s);
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buf = [0u8; 16];
    // The preamble and a plausible 48-byte first message, one byte at a
    // time.
    let mut bytes = preamble()
        .into_iter()
        .chain(48u16.to_be_bytes())
        .chain(std::iter::repeat(7u8));
    let cut = loop {
        assert!(start.elapsed() < Duration::from_secs(5), "never cut off");
        let _ = s.write_all(&[bytes.next().unwrap()]);
        match s.read(&mut buf) {
            Ok(0) => break start.elapsed(),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break start.elapsed(),
        }
    };
    assert!(cut >= timeout, "cut after {cut:?}");
    assert!(cut < Duration::from_secs(3), "held for {cut:?}");
    finish(addr, h);
}

#[test]
fn the_controller_times_out_on_a_silent_agent() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    });
    let start = Instant::now();
    let e = connect(addr, &key(), Duration::from_millis(300)).unwrap_err();
    assert!(matches!(e, AuthError::Timeout { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        format!("the agent at {addr} did not complete the handshake within 0.3s")
    );
    assert!(start.elapsed() < Duration::from_secs(3));
    server.join().unwrap();
}

#[test]
fn connecting_to_nothing_says_so() {
    // A port that was free a moment ago.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let e = connect(addr, &key(), PATIENCE).unwrap_err();
    assert!(matches!(e, AuthError::Connect { .. }), "{e}");
    assert!(e
        .to_string()
        .starts_with(&format!("cannot connect to the agent at {addr}")));
}

fn key_file(dir: &tempfile::TempDir, contents: &[u8], mode: u32) -> std::path::PathBuf {
    let p = dir.path().join("key");
    std::fs::write(&p, contents).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

#[test]
fn load_key_trims_one_newline() {
    let dir = tempfile::tempdir().unwrap();
    let p = key_file(&dir, b"0123456789abcdef0123\n", 0o600);
    assert_eq!(load_key(&p).unwrap().bytes(), b"0123456789abcdef0123");
    let p = key_file(&dir, b"0123456789abcdef0123\r\n", 0o400);
    assert_eq!(load_key(&p).unwrap().bytes(), b"0123456789abcdef0123");
    // Only one: a second newline is part of the key.
    let p = key_file(&dir, b"0123456789abcdef0123\n\n", 0o600);
    assert_eq!(load_key(&p).unwrap().bytes(), b"0123456789abcdef0123\n");
}

#[test]
fn load_key_refuses_an_exposed_file() {
    let dir = tempfile::tempdir().unwrap();
    for mode in [0o644, 0o640, 0o604, 0o620, 0o602] {
        let p = key_file(&dir, b"0123456789abcdef0123", mode);
        let e = load_key(&p).unwrap_err();
        assert!(matches!(e, AuthError::KeyExposed { .. }), "{mode:o}: {e}");
        let msg = e.to_string();
        assert!(msg.contains("chmod 600"), "{msg}");
        assert!(msg.contains(&format!("{mode:04o}")), "{msg}");
    }
}

#[test]
fn load_key_refuses_a_short_key() {
    let dir = tempfile::tempdir().unwrap();
    let short = vec![b'k'; MIN_KEY_LEN - 1];
    let p = key_file(&dir, &[short.as_slice(), b"\n"].concat(), 0o600);
    let e = load_key(&p).unwrap_err();
    assert!(matches!(e, AuthError::KeyTooShort { len: 15, .. }), "{e}");
    assert!(e.to_string().contains("at least 16"), "{e}");
    let p = key_file(&dir, b"", 0o600);
    assert!(matches!(
        load_key(&p).unwrap_err(),
        AuthError::KeyTooShort { len: 0, .. }
    ));
    let e = load_key(&dir.path().join("missing")).unwrap_err();
    assert!(matches!(e, AuthError::KeyFile { .. }), "{e}");
}
