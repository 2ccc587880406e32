//! Issue 41: a captured first handshake message, replayed, must not hold
//! the agent. A Noise `NNpsk0` responder cannot tell a replay from the
//! controller (it answers both), so the agent keeps a connection's
//! deadline until the first record after the handshake decrypts, which
//! only the key's holder can make; a new connection takes the slot of the
//! oldest that has not got that far. Real agent, real controller, real
//! loopback sockets, the documented 10 s bound.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use benchlab_agent::channel::{Key, HANDSHAKE_TIMEOUT};
use benchlab_agent::frame::{read_frame, write_frame};
use benchlab_agent::listen::{connect, serve_listener_with, ListenOptions, MAX_SESSIONS};
use benchlab_agent::protocol::{Request, Response, PROTOCOL_VERSION};
use benchlab_core::Registry;

fn key() -> Key {
    Key::from_bytes(b"a shared key of 32 bytes, really")
}

/// What the issue allows: the controller in within 12 s of the replays.
const BOUND: Duration = Duration::from_secs(12);

/// The 58 bytes a real controller sends first (preamble, length, Noise
/// message 1), captured by a listener that plays an agent's opening.
fn captured_first_message() -> Vec<u8> {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let spy = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.write_all(b"BENCHLB\x03").unwrap();
        let mut first = vec![0u8; 58];
        s.read_exact(&mut first).unwrap();
        first
    });
    // The spy never answers: the controller gives up, as it would when
    // the capture was made on the path.
    let _ = connect(addr, &key(), Duration::from_millis(500));
    spy.join().unwrap()
}

type Log = Arc<Mutex<Vec<String>>>;

fn agent(once: bool) -> (SocketAddr, Log, JoinHandle<std::io::Result<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let log: Log = Arc::default();
    let sink = log.clone();
    let opts = ListenOptions {
        once,
        handshake_timeout: HANDSHAKE_TIMEOUT,
        log: Arc::new(move |line| sink.lock().unwrap().push(line.to_string())),
    };
    let h =
        std::thread::spawn(move || serve_listener_with(&listener, &key(), &Registry::new(), &opts));
    (addr, log, h)
}

/// Replays the captured message and reads the agent's answer: the agent
/// accepts it as a handshake (message 2, 2 + 48 bytes).
fn replay(addr: SocketAddr, first: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut preamble = [0u8; 8];
    s.read_exact(&mut preamble).unwrap();
    s.write_all(first).unwrap();
    let mut answer = [0u8; 50];
    s.read_exact(&mut answer).unwrap();
    assert_eq!(
        u16::from_be_bytes([answer[0], answer[1]]),
        48,
        "the agent answers a replay (it cannot tell it apart)"
    );
    s
}

/// A real controller's session: handshake, hello, shutdown.
fn controller_session(addr: SocketAddr) {
    let mut s = connect(addr, &key(), Duration::from_secs(10)).unwrap();
    s.tcp().set_read_timeout(Some(BOUND)).unwrap();
    write_frame(
        &mut s,
        &Request::Hello {
            protocol: PROTOCOL_VERSION,
            benchlab: benchlab_core::VERSION.to_string(),
        },
    )
    .unwrap();
    assert!(matches!(
        read_frame::<_, Response>(&mut s).unwrap(),
        Some(Response::Hello { .. })
    ));
    write_frame(&mut s, &Request::Shutdown).unwrap();
    assert_eq!(
        read_frame::<_, Response>(&mut s).unwrap(),
        Some(Response::Bye)
    );
}

/// Waits for the agent to close a replayed connection; how long it held it.
fn held_until_closed(mut s: TcpStream, since: Instant) -> Duration {
    let mut b = [0u8; 64];
    loop {
        match s.read(&mut b) {
            Ok(0) => return since.elapsed(),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                panic!("held for {:?}", since.elapsed())
            }
            Err(_) => return since.elapsed(),
        }
    }
}

/// Each replay's address is named once, as refused or dropped.
fn assert_each_logged(log: &Log, peers: &[SocketAddr]) {
    let lines = log.lock().unwrap().clone();
    for p in peers {
        let named: Vec<&String> = lines
            .iter()
            .filter(|l| l.contains(&format!(" {p}:")))
            .collect();
        assert_eq!(named.len(), 1, "{p} in {lines:#?}");
        assert!(
            named[0].starts_with(&format!("benchlab agent: refused {p}: "))
                || named[0].starts_with(&format!("benchlab agent: dropped {p}: ")),
            "{}",
            named[0]
        );
    }
}

#[test]
fn eight_replays_of_a_first_message_do_not_lock_the_controller_out() {
    let first = captured_first_message();
    assert_eq!(&first[..8], b"BENCHLB\x03");
    let (addr, log, _agent) = agent(false);
    let start = Instant::now();
    let replays: Vec<TcpStream> = (0..MAX_SESSIONS).map(|_| replay(addr, &first)).collect();
    let peers: Vec<SocketAddr> = replays.iter().map(|s| s.local_addr().unwrap()).collect();
    controller_session(addr);
    let in_after = start.elapsed();
    assert!(in_after < BOUND, "the controller got in after {in_after:?}");
    // Every replay is let go by the bound, whoever else comes.
    for s in replays {
        let held = held_until_closed(s, start);
        assert!(held < BOUND, "a replay held its slot for {held:?}");
    }
    // The agent logs after closing; give its threads a moment.
    let logged = Instant::now();
    while log.lock().unwrap().len() < MAX_SESSIONS && logged.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_each_logged(&log, &peers);
    // The replays that no one displaced waited out the deadline.
    let lines = log.lock().unwrap().clone();
    let timed_out = lines
        .iter()
        .filter(|l| l.contains("no authenticated request within 10.0s of connecting"))
        .count();
    assert!(timed_out >= 1, "{lines:#?}");
    eprintln!("controller in after {in_after:?}; log: {lines:#?}");
    // And the agent still serves.
    controller_session(addr);
}

#[test]
fn one_replay_against_once_does_not_end_or_hold_the_agent() {
    let first = captured_first_message();
    let (addr, log, agent) = agent(true);
    let start = Instant::now();
    let r = replay(addr, &first);
    let peer = r.local_addr().unwrap();
    controller_session(addr);
    let in_after = start.elapsed();
    assert!(in_after < BOUND, "the controller got in after {in_after:?}");
    // `once` returns with the controller's session, not the replay's.
    agent.join().unwrap().unwrap();
    assert!(held_until_closed(r, start) < BOUND);
    assert_each_logged(&log, &[peer]);
    eprintln!(
        "controller in after {in_after:?}; log: {:#?}",
        log.lock().unwrap()
    );
}

#[test]
fn a_lone_replay_is_cut_at_the_deadline_and_logged() {
    let first = captured_first_message();
    let (addr, log, agent) = agent(true);
    let start = Instant::now();
    let r = replay(addr, &first);
    let peer = r.local_addr().unwrap();
    let held = held_until_closed(r, start);
    assert!(
        held >= HANDSHAKE_TIMEOUT - Duration::from_millis(100),
        "{held:?}"
    );
    assert!(held < BOUND, "{held:?}");
    let logged = Instant::now();
    while log.lock().unwrap().is_empty() && logged.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_each_logged(&log, &[peer]);
    let line = log.lock().unwrap()[0].clone();
    assert_eq!(
        line,
        format!("benchlab agent: refused {peer}: no authenticated request within 10.0s of connecting (a replayed or stalled handshake)")
    );
    controller_session(addr);
    agent.join().unwrap().unwrap();
}
