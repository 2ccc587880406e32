//! The agent's request loop driven over in-memory pipes: the version
//! handshake, the greeting state, and broken input.

use std::io::Cursor;

use benchlab_agent::frame::{read_frame, write_frame};
use benchlab_agent::protocol::{Request, Response, State, PROTOCOL_VERSION};
use benchlab_agent::server::serve;
use benchlab_core::Registry;

fn frames(reqs: &[Request]) -> Vec<u8> {
    let mut buf = Vec::new();
    for r in reqs {
        write_frame(&mut buf, r).unwrap();
    }
    buf
}

fn responses(out: &[u8]) -> Vec<Response> {
    let mut r = out;
    let mut v = Vec::new();
    while let Some(resp) = read_frame(&mut r).unwrap() {
        v.push(resp);
    }
    v
}

fn hello(protocol: u32) -> Request {
    Request::Hello {
        protocol,
        benchlab: "9.9.9".to_string(),
    }
}

#[test]
fn another_protocol_version_is_refused_naming_both() {
    let other = PROTOCOL_VERSION + 41;
    // The inventory after the refused hello must never be answered: the
    // session ends with the refusal.
    let input = frames(&[hello(other), Request::Inventory]);
    let mut out = Vec::new();
    serve(&Registry::new(), Cursor::new(input), &mut out).unwrap();
    let got = responses(&out);
    assert_eq!(got.len(), 1, "{got:?}");
    match &got[0] {
        Response::Refused { reason, state } => {
            assert_eq!(*state, State::Greeting);
            assert!(reason.contains(&other.to_string()), "{reason}");
            assert!(reason.contains(&PROTOCOL_VERSION.to_string()), "{reason}");
            assert!(reason.contains("9.9.9"), "{reason}");
        }
        other => panic!("expected refused, got {other:?}"),
    }
}

#[test]
fn a_request_before_hello_is_refused() {
    let input = frames(&[Request::Inventory, Request::Collect { timeout_ms: 1 }]);
    let mut out = Vec::new();
    serve(&Registry::new(), Cursor::new(input), &mut out).unwrap();
    let got = responses(&out);
    assert_eq!(got.len(), 2, "{got:?}");
    for resp in got {
        match resp {
            Response::Refused { reason, state } => {
                assert_eq!(state, State::Greeting);
                assert!(reason.contains("before hello"), "{reason}");
            }
            other => panic!("expected refused, got {other:?}"),
        }
    }
}

#[test]
fn hello_then_shutdown() {
    let input = frames(&[
        hello(PROTOCOL_VERSION),
        Request::Shutdown,
        Request::Inventory,
    ]);
    let mut out = Vec::new();
    serve(&Registry::new(), Cursor::new(input), &mut out).unwrap();
    let got = responses(&out);
    assert!(
        matches!(got.as_slice(), [Response::Hello { protocol, .. }, Response::Bye] if *protocol == PROTOCOL_VERSION),
        "{got:?}"
    );
}

#[test]
fn a_truncated_frame_is_an_error_not_a_panic() {
    let mut input = frames(&[hello(PROTOCOL_VERSION)]);
    let whole = frames(&[Request::Inventory]);
    // The length promises the whole inventory request; half of it arrives.
    input.extend_from_slice(&whole[..whole.len() / 2]);
    let mut out = Vec::new();
    let err = serve(&Registry::new(), Cursor::new(input), &mut out).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof, "{err}");
    // The hello before it was answered.
    assert!(matches!(
        responses(&out).as_slice(),
        [Response::Hello { .. }]
    ));
}

#[test]
fn garbage_after_hello_is_an_error_not_a_panic() {
    let mut input = frames(&[hello(PROTOCOL_VERSION)]);
    input.extend_from_slice(&5u32.to_be_bytes());
    input.extend_from_slice(b"{\"re");
    input.extend_from_slice(&7u32.to_be_bytes());
    input.extend_from_slice(b"[1,2,3]");
    let mut out = Vec::new();
    let err = serve(&Registry::new(), Cursor::new(input.clone()), &mut out).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
    // An unknown workload is an error response, and the session goes on.
    let input = frames(&[
        hello(PROTOCOL_VERSION),
        Request::RunClient {
            kind: "no.such".into(),
            params: Default::default(),
            placement: Default::default(),
            server: None,
            repetition: 0,
            share: Default::default(),
            gated: false,
            service: None,
            hosts: Default::default(),
        },
        Request::Shutdown,
    ]);
    let mut out = Vec::new();
    serve(&Registry::new(), Cursor::new(input), &mut out).unwrap();
    let got = responses(&out);
    assert!(
        matches!(&got[1], Response::Error { message, skipped: true } if message.contains("no.such")),
        "{got:?}"
    );
    assert_eq!(got[2], Response::Bye);
}
