//! The frame decoder never panics, whatever a peer sends, and every
//! protocol message survives the trip through a frame unchanged.

use std::net::{IpAddr, SocketAddr};

use benchlab_agent::frame::{read_frame, write_frame, MAX_FRAME};
use benchlab_agent::protocol::{Request, Response, State};
use benchlab_core::placement::Placement;
use benchlab_core::recorder::{HistogramData, Series};
use benchlab_core::result::CpuUsage;
use benchlab_core::{Params, SideResult, Value};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

/// Decodes `bytes` as a sequence of request frames until the end or the
/// first error, as the agent's loop does. Returns how many frames decoded.
fn decode_all(bytes: &[u8]) -> usize {
    let mut r = bytes;
    let mut n = 0;
    while let Ok(Some(_)) = read_frame::<_, Request>(&mut r) {
        n += 1;
    }
    n
}

fn framed(len: u32, body: &[u8]) -> Vec<u8> {
    let mut v = len.to_be_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

/// Bodies that look like requests, so that the decoder gets past the JSON
/// syntax into the message types: a known or unknown tag and random fields
/// of random JSON types.
fn requestish_body() -> impl Strategy<Value = Vec<u8>> {
    let tag = prop_oneof![
        Just("hello"),
        Just("inventory"),
        Just("serve"),
        Just("collect"),
        Just("run_client"),
        Just("shutdown"),
        Just("HELLO"),
        Just(""),
    ];
    let field = prop_oneof![
        Just("protocol"),
        Just("benchlab"),
        Just("kind"),
        Just("params"),
        Just("placement"),
        Just("bind"),
        Just("timeout_ms"),
        Just("server"),
        Just("repetition"),
        Just("cpus"),
        Just("nice"),
    ];
    let value = prop_oneof![
        Just("null".to_string()),
        Just("-1".to_string()),
        Just("18446744073709551616".to_string()),
        Just("1e400".to_string()),
        Just("\"127.0.0.1\"".to_string()),
        Just("\"[::1]:80\"".to_string()),
        Just("{\"cpus\":[0,1],\"nice\":-30}".to_string()),
        Just("{\"a\":{\"b\":[true]}}".to_string()),
        any::<i64>().prop_map(|i| i.to_string()),
        any::<f64>().prop_map(|f| f.to_string()),
        "[a-z0-9 \\\\\"]{0,12}".prop_map(|s| format!("\"{s}\"")),
    ];
    (tag, vec((field, value), 0..6)).prop_map(|(tag, fields)| {
        let mut s = format!("{{\"request\":\"{tag}\"");
        for (k, v) in fields {
            s.push_str(&format!(",\"{k}\":{v}"));
        }
        s.push('}');
        s.into_bytes()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..512)) {
        decode_all(&bytes);
    }

    #[test]
    fn valid_length_garbage_body_never_panics(body in vec(any::<u8>(), 0..512)) {
        let bytes = framed(body.len() as u32, &body);
        let r = read_frame::<_, Request>(&mut bytes.as_slice());
        // Random bytes are (almost) never a request; either way no panic.
        prop_assert!(r.is_ok() || r.is_err());
    }

    #[test]
    fn requestish_bodies_never_panic(body in requestish_body()) {
        let bytes = framed(body.len() as u32, &body);
        let _ = read_frame::<_, Request>(&mut bytes.as_slice());
        let _ = read_frame::<_, Response>(&mut bytes.as_slice());
    }

    #[test]
    fn truncated_frames_are_errors(body in requestish_body(), cut in any::<prop::sample::Index>()) {
        let bytes = framed(body.len() as u32, &body);
        // Cut inside the body: the length promised more than arrived.
        let at = 4 + cut.index(body.len().max(1));
        prop_assume!(at < bytes.len());
        let r = read_frame::<_, Request>(&mut &bytes[..at]);
        prop_assert!(r.is_err(), "truncated frame decoded: {r:?}");
    }

    #[test]
    fn oversized_lengths_are_refused(len in (MAX_FRAME + 1)..=u32::MAX, tail in vec(any::<u8>(), 0..64)) {
        let bytes = framed(len, &tail);
        let err = read_frame::<_, Request>(&mut bytes.as_slice()).unwrap_err();
        prop_assert!(err.to_string().contains("cap"), "{err}");
    }

    #[test]
    fn lengths_beyond_the_data_are_errors(len in 1..=MAX_FRAME, body in vec(any::<u8>(), 0..64)) {
        prop_assume!((len as usize) > body.len());
        let bytes = framed(len, &body);
        prop_assert!(read_frame::<_, Request>(&mut bytes.as_slice()).is_err());
    }

    #[test]
    fn requests_round_trip(req in request()) {
        let mut buf = Vec::new();
        write_frame(&mut buf, &req).unwrap();
        let mut r = buf.as_slice();
        let back: Request = read_frame(&mut r).unwrap().unwrap();
        prop_assert_eq!(back, req);
        prop_assert!(r.is_empty());
    }

    #[test]
    fn responses_round_trip(resp in response()) {
        let mut buf = Vec::new();
        write_frame(&mut buf, &resp).unwrap();
        let mut r = buf.as_slice();
        let back: Response = read_frame(&mut r).unwrap().unwrap();
        prop_assert_eq!(back, resp);
        prop_assert!(r.is_empty());
    }
}

/// serde_json without `float_roundtrip` parsed these 1 ULP off what it
/// wrote (found by the round-trip properties above): a float parameter or
/// result changed on its way through the protocol.
#[test]
fn regression_floats_cross_the_wire_exactly() {
    for x in [-439104.56656753045, 2.8464458345035095e108, 0.1, 1e-300] {
        let mut params = Params::default();
        params.set("x", Value::Float(x));
        let mut buf = Vec::new();
        write_frame(&mut buf, &params).unwrap();
        let back: Params = read_frame(&mut buf.as_slice()).unwrap().unwrap();
        assert_eq!(back.get("x"), Some(&Value::Float(x)));
        assert_eq!(back, params);
    }
}

/// A fuzz-like sweep without cargo-fuzz: 10 000 inputs from a seeded
/// generator (reproducible), mixing pure noise, valid lengths with noisy
/// bodies, mutated real frames and hostile lengths.
#[test]
fn ten_thousand_random_inputs() {
    // SplitMix64 (Steele, Lea, Flood 2014): tiny, seeded, good enough to
    // spread inputs; no need for a cryptographic generator here.
    let mut state: u64 = 0x5eed_0fbe_c41a_b000;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut seeds = Vec::new();
    for req in [
        Request::Hello {
            protocol: 1,
            benchlab: "0.1.0".into(),
        },
        Request::Inventory,
        Request::Collect { timeout_ms: 5000 },
        Request::Shutdown,
    ] {
        let mut b = Vec::new();
        write_frame(&mut b, &req).unwrap();
        seeds.push(b);
    }
    let mut decoded = 0usize;
    for i in 0..10_000u32 {
        let len = (next() % 300) as usize;
        let noise: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let input = match i % 4 {
            0 => noise,
            1 => framed(noise.len() as u32, &noise),
            2 => {
                let mut b = seeds[(next() % seeds.len() as u64) as usize].clone();
                for _ in 0..1 + next() % 4 {
                    let at = (next() % b.len() as u64) as usize;
                    b[at] = next() as u8;
                }
                b.truncate((next() % (b.len() as u64 + 1)) as usize);
                b
            }
            _ => framed(next() as u32, &noise),
        };
        decoded += decode_all(&input);
    }
    // The mutated real frames decode now and then; the rest are refused.
    assert!(decoded < 10_000);
}

// Strategies for every message. Floats are finite: JSON has no NaN or
// infinity (serde_json writes them as `null`).

fn finite() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        -1e6..1e6f64,
        Just(0.0),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z_.]{1,12}", ".{0,8}"]
}

fn params() -> impl Strategy<Value = Params> {
    let value = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        finite().prop_map(Value::Float),
        ".{0,10}".prop_map(Value::Str),
    ];
    btree_map(name(), value, 0..5).prop_map(Params)
}

fn placement() -> impl Strategy<Value = Placement> {
    (
        proptest::option::of(vec(0usize..4096, 0..8)),
        proptest::option::of(any::<i32>()),
    )
        .prop_map(|(cpus, nice)| Placement {
            cpus,
            nice,
            ..Default::default()
        })
}

fn socket_addr() -> impl Strategy<Value = SocketAddr> {
    // Built from address and port: the text form carries neither IPv6 flow
    // info nor scope, so those would not survive (and are never sent).
    (any::<IpAddr>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(ip, port))
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (any::<u32>(), ".{0,12}")
            .prop_map(|(protocol, benchlab)| Request::Hello { protocol, benchlab }),
        Just(Request::Inventory),
        (name(), params(), placement(), socket_addr()).prop_map(
            |(kind, params, placement, bind)| Request::Serve {
                kind,
                params,
                placement,
                bind
            }
        ),
        any::<u64>().prop_map(|timeout_ms| Request::Collect { timeout_ms }),
        (
            name(),
            params(),
            placement(),
            proptest::option::of(socket_addr()),
            any::<u32>(),
            proptest::collection::btree_map("[a-z][a-z0-9-]{0,8}", "[0-9a-f.:]{1,20}", 0..3)
        )
            .prop_map(|(kind, params, placement, server, repetition, hosts)| {
                Request::RunClient {
                    kind,
                    params,
                    placement,
                    server,
                    repetition,
                    share: Default::default(),
                    gated: false,
                    service: None,
                    hosts,
                }
            }),
        any::<bool>().prop_map(|abort| Request::Go { abort }),
        Just(Request::Shutdown),
    ]
}

fn side_result() -> impl Strategy<Value = SideResult> {
    let hist = (
        "[a-z]{0,3}",
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        finite(),
        finite(),
        "[A-Za-z0-9+/=]{0,24}",
    )
        .prop_map(
            |(unit, count, min, max, mean, stddev, hdr_v2_base64)| HistogramData {
                unit,
                count,
                min,
                max,
                mean,
                stddev,
                hdr_v2_base64,
            },
        );
    let series =
        ("[a-z]{0,3}", any::<u64>(), vec(any::<u64>(), 0..8)).prop_map(|(unit, stride, values)| {
            Series {
                unit,
                stride,
                values,
            }
        });
    let cpu = (finite(), finite(), finite(), finite(), any::<u32>()).prop_map(
        |(elapsed_s, process_cpu_s, process_util_pct, system_util_pct, ncpus)| CpuUsage {
            elapsed_s,
            process_cpu_s,
            process_util_pct,
            system_util_pct,
            ncpus,
        },
    );
    (
        btree_map(name(), any::<u64>(), 0..4),
        btree_map(name(), finite(), 0..4),
        btree_map(name(), hist, 0..2),
        btree_map(name(), series, 0..2),
        proptest::option::of(cpu),
        any::<u64>(),
    )
        .prop_map(
            |(counters, values, histograms, series, cpu, peak_rss_kib)| SideResult {
                counters,
                values,
                histograms,
                series,
                cpu,
                peak_rss_kib,
            },
        )
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        finite().prop_map(serde_json::Value::from),
        ".{0,8}".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn state() -> impl Strategy<Value = State> {
    prop_oneof![
        Just(State::Greeting),
        Just(State::Idle),
        Just(State::Serving)
    ]
}

fn response() -> impl Strategy<Value = Response> {
    prop_oneof![
        (any::<u32>(), ".{0,12}", any::<u32>()).prop_map(|(protocol, benchlab, pid)| {
            Response::Hello {
                protocol,
                benchlab,
                pid,
            }
        }),
        json_value().prop_map(|inventory| Response::Inventory { inventory }),
        any::<u16>().prop_map(|port| Response::Listening { port }),
        side_result().prop_map(|r| Response::Done {
            result: Box::new(r)
        }),
        (".{0,20}", any::<bool>())
            .prop_map(|(message, skipped)| Response::Error { message, skipped }),
        (".{0,20}", state()).prop_map(|(reason, state)| Response::Refused { reason, state }),
        Just(Response::Bye),
    ]
}
