//! Issue 14, on issue 25's Noise channel: every frame after the
//! `--listen` handshake is encrypted and authenticated. A real agent and a
//! real controller talk through a man in the middle on loopback that
//! passes the handshake untouched, then flips a bit, replays, reorders,
//! truncates or injects a record. Each is refused: the agent drops the
//! connection with a reason, and the request in question never runs (the
//! agent answers nothing for it, and a `shutdown` that it would have obeyed
//! does not end the session cleanly).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use benchlab_agent::channel::Key;
use benchlab_agent::frame::{read_frame, write_frame};
use benchlab_agent::listen::{connect, serve_listener, serve_listener_with, ListenOptions};
use benchlab_agent::protocol::{Request, Response, PROTOCOL_VERSION};
use benchlab_core::Registry;

fn key() -> Key {
    Key::from_bytes(b"a shared key of 32 bytes, really")
}
/// Generous: only reached when something is broken.
const PATIENCE: Duration = Duration::from_secs(10);

fn hello() -> Request {
    Request::Hello {
        protocol: PROTOCOL_VERSION,
        benchlab: benchlab_core::VERSION.to_string(),
    }
}

/// `n` plain bytes (a preamble).
fn raw_bytes(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b).unwrap();
    b
}

/// One record: a 2-byte length and that many bytes (a handshake message,
/// or a frame's ciphertext and tag).
fn raw_record(s: &mut TcpStream) -> Vec<u8> {
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut rest = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut rest).unwrap();
    [&len[..], &rest].concat()
}

/// Relays the handshake untouched: the agent's preamble, the controller's
/// preamble and first message, the agent's answer.
fn relay_handshake(c: &mut TcpStream, a: &mut TcpStream) {
    let p = raw_bytes(a, 8);
    c.write_all(&p).unwrap();
    let p = raw_bytes(c, 8);
    let m = raw_record(c);
    a.write_all(&[p, m].concat()).unwrap();
    let m = raw_record(a);
    c.write_all(&m).unwrap();
}

/// What the man in the middle does to the controller's records.
type Tamper = fn(Vec<Vec<u8>>) -> Vec<Vec<u8>>;

/// A controller's session with a real agent through a man in the middle.
struct Outcome {
    /// What the controller got back, in order, until the connection ended.
    responses: Vec<Response>,
    /// How the agent's session ended (`serve_listener` with `once`); a
    /// connection whose first record fails never became a session: the
    /// agent's log line saying it refused the peer.
    agent: io::Result<()>,
}

/// The agent's line about a refused peer, once it is logged.
fn refusal(log: &Arc<Mutex<Vec<String>>>) -> Option<String> {
    log.lock()
        .unwrap()
        .iter()
        .find(|l| l.starts_with("benchlab agent: refused "))
        .cloned()
}

/// The agent serves one session; the controller sends `requests` (each one
/// sealed record) and reads until the connection ends; the man in the
/// middle relays the handshake, collects the controller's records, and
/// forwards what `tamper` makes of them.
fn session_through(requests: &[Request], tamper: Tamper) -> Outcome {
    let agent_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let agent_addr = agent_listener.local_addr().unwrap();
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = log.clone();
    let opts = ListenOptions {
        handshake_timeout: PATIENCE,
        log: Arc::new(move |l| sink.lock().unwrap().push(l.to_string())),
        ..ListenOptions::new(true)
    };
    let agent: JoinHandle<io::Result<()>> = std::thread::spawn(move || {
        serve_listener_with(&agent_listener, &key(), &Registry::new(), &opts)
    });
    let mitm_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mitm_addr: SocketAddr = mitm_listener.local_addr().unwrap();
    let n = requests.len();
    let mitm = std::thread::spawn(move || {
        let (mut c, _) = mitm_listener.accept().unwrap();
        let mut a = TcpStream::connect(agent_addr).unwrap();
        for s in [&c, &a] {
            s.set_read_timeout(Some(PATIENCE)).unwrap();
        }
        relay_handshake(&mut c, &mut a);
        let records: Vec<Vec<u8>> = (0..n).map(|_| raw_record(&mut c)).collect();
        for r in tamper(records) {
            a.write_all(&r).unwrap();
        }
        // Whatever the agent answers goes back until it closes.
        let _ = io::copy(&mut a, &mut c);
        let _ = c.shutdown(Shutdown::Both);
    });
    let mut s = connect(mitm_addr, &key(), PATIENCE).unwrap();
    s.tcp().set_read_timeout(Some(PATIENCE)).unwrap();
    for r in requests {
        write_frame(&mut s, r).unwrap();
    }
    let mut responses = Vec::new();
    while let Ok(Some(r)) = read_frame::<_, Response>(&mut s) {
        responses.push(r);
    }
    mitm.join().unwrap();
    // A `once` agent goes on after a refused peer: the refusal is logged,
    // and a real session ends the agent.
    let since = Instant::now();
    while !agent.is_finished() && refusal(&log).is_none() && since.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(10));
    }
    let agent = match refusal(&log) {
        Some(line) => {
            let mut s = connect(agent_addr, &key(), PATIENCE).unwrap();
            for r in [hello(), Request::Shutdown] {
                write_frame(&mut s, &r).unwrap();
                read_frame::<_, Response>(&mut s).unwrap();
            }
            drop(s);
            agent.join().unwrap().unwrap();
            Err(io::Error::other(line))
        }
        None => agent.join().unwrap(),
    };
    Outcome { responses, agent }
}

fn refused_because(o: &Outcome, why: &str) {
    let e = o
        .agent
        .as_ref()
        .expect_err("the agent must drop the session");
    assert!(e.to_string().contains(why), "{e}");
    assert!(e.to_string().contains("connection dropped"), "{e}");
}

#[test]
fn an_untouched_session_works() {
    let o = session_through(&[hello(), Request::Shutdown], |r| r);
    assert!(
        matches!(o.responses[0], Response::Hello { .. }),
        "{:?}",
        o.responses
    );
    assert_eq!(o.responses[1], Response::Bye);
    o.agent.unwrap();
}

#[test]
fn a_flipped_bit_is_refused_and_nothing_runs() {
    let o = session_through(&[hello(), Request::Shutdown], |mut r| {
        // A bit in the middle of the first request's ciphertext.
        let i = r[0].len() / 2;
        r[0][i] ^= 0x04;
        r
    });
    assert!(o.responses.is_empty(), "{:?}", o.responses);
    refused_because(&o, "record 0 failed authentication");
}

#[test]
fn a_replayed_frame_is_refused() {
    // The first request twice; the second record is held back.
    let o = session_through(&[hello(), Request::Shutdown], |r| {
        vec![r[0].clone(), r[0].clone()]
    });
    assert_eq!(o.responses.len(), 1, "only the original: {:?}", o.responses);
    refused_because(&o, "record 1 failed authentication");
}

#[test]
fn reordered_frames_are_refused_and_nothing_runs() {
    let o = session_through(&[hello(), Request::Shutdown], |r| {
        vec![r[1].clone(), r[0].clone()]
    });
    // The shutdown came first and was not obeyed: the session failed.
    assert!(o.responses.is_empty(), "{:?}", o.responses);
    refused_because(&o, "record 0 failed authentication");
}

#[test]
fn an_injected_frame_is_refused_and_does_not_run() {
    let o = session_through(&[hello(), hello()], |r| {
        // The man in the middle has no key: it replaces the second request
        // with its own `shutdown` in clear, with a made-up tag.
        let body = serde_json::to_vec(&Request::Shutdown).unwrap();
        let frame = [&(body.len() as u32).to_be_bytes()[..], &body, &[0x5a; 16]].concat();
        let forged = [&(frame.len() as u16).to_be_bytes()[..], &frame].concat();
        vec![r[0].clone(), forged]
    });
    assert_eq!(o.responses.len(), 1, "{:?}", o.responses);
    assert!(matches!(o.responses[0], Response::Hello { .. }));
    refused_because(&o, "record 1 failed authentication");
}

/// The other direction: a response altered on its way to the controller is
/// refused by the controller.
#[test]
fn an_altered_response_is_refused_by_the_controller() {
    let agent_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let agent_addr = agent_listener.local_addr().unwrap();
    let agent = std::thread::spawn(move || {
        serve_listener(&agent_listener, &key(), &Registry::new(), true, PATIENCE)
    });
    let mitm_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mitm_addr = mitm_listener.local_addr().unwrap();
    let mitm = std::thread::spawn(move || {
        let (mut c, _) = mitm_listener.accept().unwrap();
        let mut a = TcpStream::connect(agent_addr).unwrap();
        for s in [&c, &a] {
            s.set_read_timeout(Some(PATIENCE)).unwrap();
        }
        relay_handshake(&mut c, &mut a);
        let r = raw_record(&mut c);
        a.write_all(&r).unwrap();
        let mut answer = raw_record(&mut a);
        answer[20] ^= 0x01;
        c.write_all(&answer).unwrap();
        let _ = a.shutdown(Shutdown::Both);
        let _ = c.shutdown(Shutdown::Both);
    });
    let mut s = connect(mitm_addr, &key(), PATIENCE).unwrap();
    s.tcp().set_read_timeout(Some(PATIENCE)).unwrap();
    write_frame(&mut s, &hello()).unwrap();
    let e = read_frame::<_, Response>(&mut s).unwrap_err();
    assert!(
        e.to_string().contains("record 0 failed authentication"),
        "{e}"
    );
    mitm.join().unwrap();
    // The agent saw its peer vanish before a shutdown.
    let _ = agent.join().unwrap();
}

/// A session cut short by the man in the middle: the agent's answer loses
/// its last bytes and the connection ends. The controller says so; it
/// never takes a partial frame for a whole one.
#[test]
fn a_truncated_response_is_refused_by_the_controller() {
    let agent_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let agent_addr = agent_listener.local_addr().unwrap();
    let agent = std::thread::spawn(move || {
        serve_listener(&agent_listener, &key(), &Registry::new(), true, PATIENCE)
    });
    let mitm_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mitm_addr = mitm_listener.local_addr().unwrap();
    let mitm = std::thread::spawn(move || {
        let (mut c, _) = mitm_listener.accept().unwrap();
        let mut a = TcpStream::connect(agent_addr).unwrap();
        for s in [&c, &a] {
            s.set_read_timeout(Some(PATIENCE)).unwrap();
        }
        relay_handshake(&mut c, &mut a);
        let r = raw_record(&mut c);
        a.write_all(&r).unwrap();
        let answer = raw_record(&mut a);
        c.write_all(&answer[..answer.len() - 5]).unwrap();
        let _ = a.shutdown(Shutdown::Both);
        let _ = c.shutdown(Shutdown::Both);
    });
    let mut s = connect(mitm_addr, &key(), PATIENCE).unwrap();
    s.tcp().set_read_timeout(Some(PATIENCE)).unwrap();
    write_frame(&mut s, &hello()).unwrap();
    let e = read_frame::<_, Response>(&mut s).unwrap_err();
    assert!(e.to_string().contains("ended inside a record"), "{e}");
    mitm.join().unwrap();
    let _ = agent.join().unwrap();
}
