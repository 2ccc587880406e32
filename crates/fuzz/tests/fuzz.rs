//! Fuzzing of every parser that reads outside input (issue 14, item 3):
//! study files and their `[[service]]` tables, lab files and `--host`
//! options, tuning profiles, the agent's frames and its channel's records, the
//! figures CSV, service specs and their templates, the tool adapters'
//! files (`tools/*.toml`) and the outputs their parsers read.
//!
//! Each target tries arbitrary input and structured mutations of the
//! shipped files, [`benchlab_fuzz::CI_CASES`] cases each (set
//! `BENCHLAB_FUZZ_CASES` for a longer run). The properties: the parser
//! never panics, and every rejection says where (the file and a line, or
//! the key). Each target prints its execution count.
//!
//! Run on its own: `cargo test -p benchlab-fuzz --test fuzz -- --nocapture`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use benchlab_agent::channel::{session_pair, Key, SecureReader, SecureWriter, Session};
use benchlab_agent::frame::{read_frame, write_frame};
use benchlab_agent::protocol::{Request, Response};
use benchlab_core::study::{Study, StudyError};
use benchlab_env::profile::Profile;
use benchlab_env::EnvError;
use benchlab_fuzz::{
    apply_bytes, arbitrary_text, byte_mutation, cases, fuzz, input, mutated, shipped,
};
use benchlab_report::import::figures_csv;
use benchlab_service::{template, ServiceError, ServiceSpec};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;

fn texts(files: &[(String, String)]) -> Vec<String> {
    files.iter().map(|(_, t)| t.clone()).collect()
}

/// A study error must name the file, and a line in it or a key.
fn study_error_says_where(e: &StudyError, file: &str, text: &str) -> Result<(), TestCaseError> {
    let shown = e.to_string();
    prop_assert_eq!(&e.file, file, "{}", shown);
    prop_assert!(shown.starts_with(&format!("{file}:")), "{}", shown);
    prop_assert!(
        e.line >= 1 || !e.key.is_empty(),
        "no line, no key: {}",
        shown
    );
    // A line past the end would send the user to nothing.
    prop_assert!(
        e.line <= text.split('\n').count(),
        "line {} of a {}-line text: {}",
        e.line,
        text.split('\n').count(),
        shown
    );
    prop_assert!(!e.message.trim().is_empty(), "no message: {}", shown);
    Ok(())
}

fn parse_study(file: &str, text: &str) -> Result<bool, TestCaseError> {
    match Study::parse(file, text, &benchlab_cli::registry()) {
        Ok(_) => Ok(true),
        Err(e) => study_error_says_where(&e, file, text).map(|_| false),
    }
}

#[test]
fn study_files() {
    let studies = shipped("studies", ".toml");
    let names: Vec<String> = studies.iter().map(|(n, _)| n.clone()).collect();
    // Every shipped study is valid before it is mutated, or the mutations
    // would start from a file the parser stops at on line 1.
    for (n, t) in &studies {
        Study::parse(n, t, &benchlab_cli::registry()).unwrap_or_else(|e| panic!("{e}"));
    }
    let seeds = texts(&studies);
    let strategy = prop_oneof![
        4 => mutated(seeds),
        1 => arbitrary_text().prop_map(|t| (usize::MAX, t)),
    ];
    let t = fuzz("study files", cases(), strategy, |(k, text)| {
        let file = names.get(k).map_or("fuzz.toml", String::as_str);
        parse_study(file, &text)
    });
    assert!(
        t.accepted > 0,
        "no mutated study parsed: the mutations are too coarse"
    );
}

/// A study with two roles, for lab files and `--host`.
const TWO_HOSTS: &str = "[study]\nname = \"s\"\n\
[[host]]\nname = \"sut\"\nlocal = true\n\
[[host]]\nname = \"generator\"\nlocal = true\n\
[[workload]]\nkind = \"fake\"\nserver = \"sut\"\nclient = \"generator\"\n";

const LABS: &[&str] = &[
    "[[host]]\nname = \"sut\"\nssh = \"root@10.0.0.2\"\nport = 2222\n\
     [[host]]\nname = \"generator\"\nnetns = \"bl-gen\"\naddress = \"10.9.0.2\"\n",
    "[[host]]\nname = \"sut\"\nagent = \"10.0.0.2:7000\"\nkey_file = \"/etc/benchlab/key\"\n\
     data_port = 5201\n[[host]]\nname = \"other\"\nlocal = true\n",
];

const OPTIONS: &[&str] = &[
    "generator=netns:bl-gen@10.9.0.2",
    "sut=ssh:root@10.0.0.2",
    "sut=local",
    "generator=agent:10.0.0.3:7000,key=/k",
];

fn option() -> impl Strategy<Value = String> {
    let seeds: Vec<String> = OPTIONS.iter().map(|s| s.to_string()).collect();
    prop_oneof![
        3 => mutated(seeds).prop_map(|(_, t)| t),
        1 => any::<String>(),
    ]
}

#[test]
fn lab_files_and_host_options() {
    let base = Study::parse("two.toml", TWO_HOSTS, &benchlab_cli::registry()).unwrap();
    for lab in LABS {
        let mut s = base.clone();
        s.place_hosts(Some(("lab.toml", lab)), &[]).unwrap();
    }
    let labs: Vec<String> = LABS.iter().map(|s| s.to_string()).collect();
    let strategy = (proptest::option::of(input(labs)), vec(option(), 0..3));
    fuzz(
        "lab files and --host",
        cases(),
        strategy,
        |(lab, options)| {
            let mut s = base.clone();
            match s.place_hosts(lab.as_deref().map(|t| ("lab.toml", t)), &options) {
                Ok(()) => Ok(true),
                Err(e) => {
                    let shown = e.to_string();
                    if e.file == "lab.toml" {
                        study_error_says_where(&e, "lab.toml", lab.as_deref().unwrap())?;
                    } else if e.file == "--host" {
                        // An option's error names the option, whole, as its
                        // key (empty only when the option is).
                        prop_assert!(options.contains(&e.key), "{}", shown);
                    } else {
                        // Or the table the option was read as, by its line.
                        let o = e.file.strip_prefix("--host ");
                        prop_assert!(
                            o.is_some_and(|o| options.iter().any(|x| x == o)),
                            "{}",
                            shown
                        );
                        prop_assert!(e.line >= 1 || !e.key.is_empty(), "{}", shown);
                    }
                    Ok(false)
                }
            }
        },
    );
}

#[test]
fn profiles() {
    let files = shipped("profiles", ".toml");
    for (n, t) in &files {
        Profile::parse(n, t).unwrap_or_else(|e| panic!("{e}"));
    }
    let names: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
    let strategy = prop_oneof![
        4 => mutated(texts(&files)),
        1 => arbitrary_text().prop_map(|t| (usize::MAX, t)),
    ];
    let t = fuzz("profiles", cases(), strategy, |(k, text)| {
        let file = names.get(k).map_or("fuzz.toml", String::as_str);
        match Profile::parse(file, &text) {
            Ok(_) => Ok(true),
            Err(EnvError::Profile { file: f, message }) => {
                prop_assert_eq!(f.as_str(), file);
                // Where: toml's own errors give the line, ours the key.
                prop_assert!(
                    message.contains("line ") || message.contains("key `"),
                    "{}: no line or key: {}",
                    file,
                    message
                );
                Ok(false)
            }
            Err(e) => Err(TestCaseError::fail(format!("not a profile error: {e}"))),
        }
    });
    assert!(t.accepted > 0, "no mutated profile parsed");
}

/// Real frames of both directions, as the seeds of the frame mutations.
fn frame_streams() -> Vec<Vec<u8>> {
    let requests = [
        Request::Hello {
            protocol: 1,
            benchlab: "0.1.0".into(),
        },
        Request::Inventory,
        Request::Collect { timeout_ms: 5000 },
        Request::EnvProbe,
        Request::Shutdown,
    ];
    let mut a = Vec::new();
    for r in &requests {
        write_frame(&mut a, r).unwrap();
    }
    let mut b = Vec::new();
    for r in [Response::Arrived, Response::Arrived] {
        write_frame(&mut b, &r).unwrap();
    }
    vec![a, b]
}

fn mutated_bytes(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let n = seeds.len();
    prop_oneof![
        4 => (0..n, vec(byte_mutation(), 1..6)).prop_map(move |(k, ms)| {
            ms.iter().fold(seeds[k].clone(), |b, m| apply_bytes(&b, m))
        }),
        1 => vec(any::<u8>(), 0..256),
    ]
}

/// Decodes frames as `T` until the end or the first error, as the agent
/// and the controller do; returns how many decoded.
fn decode<T: serde::de::DeserializeOwned>(mut r: impl Read) -> usize {
    let mut n = 0;
    while let Ok(Some(_)) = read_frame::<_, T>(&mut r) {
        n += 1;
    }
    n
}

/// Arbitrary bytes as requests are in crates/agent/tests/decoder.rs; here:
/// mutations of real frame streams, decoded as requests and as responses.
#[test]
fn agent_frames() {
    let t = fuzz(
        "agent frames",
        cases(),
        mutated_bytes(frame_streams()),
        |bytes| {
            let requests = decode::<Request>(&bytes[..]);
            let responses = decode::<Response>(&bytes[..]);
            Ok(requests + responses > 0)
        },
    );
    assert!(t.accepted > 0, "no mutated stream decoded a frame");
}

/// One channel for every case (a handshake per case would spend the run
/// on Diffie-Hellman): the controller's half and the agent's.
fn sessions() -> &'static (Session, Session) {
    static PAIR: std::sync::OnceLock<(Session, Session)> = std::sync::OnceLock::new();
    PAIR.get_or_init(|| session_pair(&Key::from_bytes(&[0x5a; 32])))
}

/// The records the controller sends for `bodies` (one frame each, each
/// under the record size), and the record offsets.
fn sealed(bodies: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    let mut ends = Vec::new();
    {
        let mut w = SecureWriter::new(&mut out, sessions().0.clone());
        for b in bodies {
            w.write_all(b).unwrap();
            w.flush().unwrap();
        }
    }
    // Record ends, from the lengths: 2 (length) + body + tag.
    let tag = (out.len() - bodies.iter().map(|b| 2 + b.len()).sum::<usize>()) / bodies.len();
    let mut at = 0;
    for b in bodies {
        at += 2 + b.len() + tag;
        ends.push(at);
    }
    (out, ends)
}

/// What the agent's reader of `stream` yields: the bytes before the first
/// error and whether the stream ended cleanly.
fn unseal(stream: &[u8]) -> (Vec<u8>, bool) {
    let mut r = SecureReader::new(stream, sessions().1.clone());
    let mut got = Vec::new();
    let mut buf = [0u8; 97];
    loop {
        match r.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => {
                // Refused once, refused for good.
                assert!(r.read(&mut buf).is_err(), "a failed reader read again");
                return (got, false);
            }
        }
    }
}

#[derive(Debug, Clone)]
enum RecordEdit {
    Bytes(Vec<benchlab_fuzz::ByteMutation>),
    Drop(Index),
    Replay(Index),
    Swap(Index, Index),
    Inject(Index, Vec<u8>),
}

#[test]
fn channel_records() {
    let strategy = (
        vec(vec(any::<u8>(), 1..40), 1..6),
        prop_oneof![
            3 => vec(byte_mutation(), 1..4).prop_map(RecordEdit::Bytes),
            1 => any::<Index>().prop_map(RecordEdit::Drop),
            1 => any::<Index>().prop_map(RecordEdit::Replay),
            1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| RecordEdit::Swap(a, b)),
            1 => (any::<Index>(), vec(any::<u8>(), 0..80)).prop_map(|(i, b)| RecordEdit::Inject(i, b)),
        ],
    );
    fuzz("channel records", cases(), strategy, |(bodies, edit)| {
        let (stream, ends) = sealed(&bodies);
        let sent: Vec<u8> = bodies.concat();
        let (got, clean) = unseal(&stream);
        prop_assert!(clean && got == sent, "the untouched stream must read back");
        let records: Vec<&[u8]> = std::iter::once(0)
            .chain(ends.iter().copied())
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| &stream[w[0]..w[1]])
            .collect();
        let n = records.len();
        let edited: Vec<u8> = match &edit {
            RecordEdit::Bytes(ms) => ms.iter().fold(stream.clone(), |b, m| apply_bytes(&b, m)),
            RecordEdit::Drop(i) => {
                let k = i.index(n);
                let mut r = records.clone();
                r.remove(k);
                r.concat()
            }
            RecordEdit::Replay(i) => {
                let k = i.index(n);
                let mut r = records.clone();
                r.insert(k + 1, records[k]);
                r.concat()
            }
            RecordEdit::Swap(a, b) => {
                let mut r = records.clone();
                r.swap(a.index(n), b.index(n));
                r.concat()
            }
            RecordEdit::Inject(i, junk) => {
                let k = i.index(n + 1);
                let mut r: Vec<Vec<u8>> = records.iter().map(|x| x.to_vec()).collect();
                r.insert(k, junk.clone());
                r.concat()
            }
        };
        let (got, clean) = unseal(&edited);
        // Nothing but what was sent, in order: whatever the reader yields
        // is a prefix of the original bodies.
        prop_assert!(
            sent.starts_with(&got),
            "the reader yielded bytes never sent"
        );
        if clean {
            // A clean end only where the stream is the original cut at a
            // record boundary (a dropped tail): never a gap or a replay.
            prop_assert!(
                stream.starts_with(&edited) && (edited.is_empty() || ends.contains(&edited.len())),
                "an altered stream read to a clean end"
            );
        }
        Ok(clean && got == sent)
    });
}

#[test]
fn figures_csv_import() {
    let mut files = shipped("studies/published", ".csv");
    // The seeds' parameter tables there are another layout (issue 26).
    files.retain(|(n, _)| !n.ends_with("-parameters.csv"));
    // The other CSVs there are the tests' own formats, not figures files.
    files.extend(shipped("tests/fixtures", "-figures.csv"));
    for (n, t) in &files {
        figures_csv(n, t).unwrap_or_else(|e| panic!("{n}: {e}"));
    }
    let t = fuzz(
        "figures CSV",
        cases(),
        input(texts(&files)),
        |text| match figures_csv("fuzz", &text) {
            Ok(_) => Ok(true),
            Err(e) => {
                let lines = text.lines().count();
                prop_assert!(
                    e.line >= 1 && e.line <= lines + 1,
                    "line {} of {}: {}",
                    e.line,
                    lines,
                    e
                );
                prop_assert!(!e.message.trim().is_empty());
                Ok(false)
            }
        },
    );
    assert!(t.accepted > 0, "no mutated figures file imported");
}

const SPECS: &[&str] = &[
    r#"{"name": "web", "kind": "nginx", "port": 8080, "vars": {"workers": "2"}, "cpus": "0-1"}"#,
    r#"{"name": "httpd", "kind": "apache2", "host": "sut", "bind": "127.0.0.1", "port": 8081,
        "ready_timeout_s": 5.0, "probe": {"http": "/"}, "document_root": "/srv/www"}"#,
    r#"{"name": "echo", "kind": "command", "argv": ["/bin/sh", "-c", "sleep {{secs}} {{port}}"],
        "vars": {"secs": "5"}, "secrets": {"token": {"env": "TOKEN"}}, "restart": "never"}"#,
];

fn service_error_says_where(e: &ServiceError) -> Result<(), TestCaseError> {
    match e {
        ServiceError::Spec { key, .. } => prop_assert!(!key.is_empty(), "{}", e),
        ServiceError::Template {
            template, message, ..
        } => {
            prop_assert!(!template.is_empty(), "{}", e);
            prop_assert!(
                message.contains("line ") || message.contains("daemon off"),
                "{}",
                e
            );
        }
        other => return Err(TestCaseError::fail(format!("unexpected error: {other}"))),
    }
    Ok(())
}

#[test]
fn service_specs() {
    // A directory with no templates: a named template that is not shipped
    // is an error, never a file read from somewhere else.
    let base = Path::new("/nonexistent/benchlab-fuzz");
    for s in SPECS {
        let spec: ServiceSpec = serde_json::from_str(s).unwrap();
        spec.plan(base).unwrap_or_else(|e| panic!("{e}"));
    }
    let seeds: Vec<String> = SPECS.iter().map(|s| s.to_string()).collect();
    let t = fuzz("service specs", cases(), input(seeds), |text| {
        let spec: ServiceSpec = match serde_json::from_str(&text) {
            Ok(s) => s,
            Err(e) => {
                // serde_json says where: "… at line L column C".
                prop_assert!(e.line() >= 1 || text.trim().is_empty(), "{}", e);
                return Ok(false);
            }
        };
        match spec.plan(base) {
            Ok(_) => Ok(true),
            Err(e) => service_error_says_where(&e).map(|_| false),
        }
    });
    assert!(t.accepted > 0, "no mutated spec planned");
}

#[test]
fn service_templates() {
    let files = shipped("services", ".conf");
    let t = fuzz(
        "service templates",
        cases(),
        input(texts(&files)),
        |text| match template::uses(&text) {
            Err(e) => {
                prop_assert!(e.starts_with("line "), "{}", e);
                Ok(false)
            }
            Ok(uses) => {
                // Every variable set: rendering succeeds and leaves no
                // `{{` behind (the values hold no braces).
                let vars: BTreeMap<String, String> =
                    uses.iter().map(|u| (u.name.clone(), "v".into())).collect();
                let out = template::render(&text, &vars)
                    .map_err(|e| TestCaseError::fail(format!("render refused: {e}")))?;
                prop_assert!(!out.contains("{{"), "{}", out);
                // One variable unset: refused, naming it and its line.
                if let Some(first) = uses.first() {
                    let mut fewer = vars.clone();
                    fewer.remove(&first.name);
                    let e = template::render(&text, &fewer).unwrap_err();
                    let needle = format!("`{}` (line {})", first.name, first.line);
                    prop_assert!(e.contains(&needle), "{}", e);
                }
                Ok(true)
            }
        },
    );
    assert!(t.accepted > 0, "no mutated template parsed");
}

/// Issue 14, the fuzzer's first find: a count range reaching the end of
/// u64 in a shipped study overflowed inside the parser (a panic in debug
/// builds; past i64::MAX a negative clients count in release). Now an
/// error naming the file, the line and the key.
#[test]
fn issue_14_count_range_at_the_integer_limit() {
    let (_, text) = shipped("studies", ".toml")
        .into_iter()
        .find(|(n, _)| n == "seed-004-web.toml")
        .expect("seed-004-web.toml");
    let line = text
        .lines()
        .position(|l| l.starts_with("clients = "))
        .expect("a clients line")
        + 1;
    for range in [
        "1..18446744073709551615",
        "2..18446744073709551615 step 18446744073709551614",
        "1..9223372036854775808 step 9223372036854775807",
    ] {
        let mutated: String = text
            .lines()
            .map(|l| {
                if l.starts_with("clients = ") {
                    format!("clients = \"{range}\"\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let e = Study::parse("web.toml", &mutated, &benchlab_cli::registry()).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("web.toml", line), "{e}");
        assert!(e.key.ends_with("clients"), "{e}");
        assert!(e.message.contains("bad count range"), "{e}");
    }
}

/// Issue 14, the fuzzer's second find: a CPU range such as "0-4294967295"
/// (a service's `cpus`, a profile's, a study's `shield`) was expanded
/// into billions of entries and the allocation aborted the process. Now
/// an error saying where and what is allowed.
#[test]
fn issue_14_huge_cpu_range() {
    let spec = r#"{"name": "web", "kind": "nginx",
"cpus": "0-4294967295"}"#;
    let e = serde_json::from_str::<ServiceSpec>(spec).unwrap_err();
    assert_eq!(e.line(), 2, "{e}");
    assert!(e.to_string().contains("beyond the largest CPU"), "{e}");

    let profile = "[server]\ncpus = \"0-18446744073709551615\"\n";
    let e = Profile::parse("p.toml", profile).unwrap_err().to_string();
    assert!(e.starts_with("p.toml: key `server.cpus`"), "{e}");
    assert!(e.contains("beyond the largest CPU"), "{e}");
}

/// Pieces serve's requests are made of: the real paths and parameters,
/// escapes (good and broken), separators and the token's places.
fn url_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/".to_string()),
        Just("/run/1".to_string()),
        Just("/run/1/report.html".to_string()),
        Just("/compare".to_string()),
        Just("/hosts".to_string()),
        Just("/api/runs".to_string()),
        Just("?".to_string()),
        Just("&".to_string()),
        Just("=".to_string()),
        Just("+".to_string()),
        Just("c=1:base".to_string()),
        Just("base=".to_string()),
        Just("token=".to_string()),
        Just(FUZZ_TOKEN.to_string()),
        Just("%".to_string()),
        Just("%2F".to_string()),
        Just("%e2%82".to_string()),
        Just("%ff".to_string()),
        Just("%zz".to_string()),
        Just("..".to_string()),
        "[ -~]{0,8}".prop_map(|s| s),
        any::<char>().prop_map(|c| c.to_string()),
    ]
}

const FUZZ_TOKEN: &str = "fuzz-token-0123456789";

fn header() -> impl Strategy<Value = (String, Vec<u8>)> {
    let name = prop_oneof![
        Just("host".to_string()),
        Just("Host".to_string()),
        Just("authorization".to_string()),
        Just("cookie".to_string()),
        Just("x-other".to_string()),
        "[a-zA-Z-]{1,12}".prop_map(|s| s),
    ];
    let value = prop_oneof![
        Just(b"127.0.0.1:8088".to_vec()),
        Just(b"localhost".to_vec()),
        Just(b"[::1]:80".to_vec()),
        Just(b"lab.example".to_vec()),
        Just(b"evil.example".to_vec()),
        Just(format!("Bearer {FUZZ_TOKEN}").into_bytes()),
        Just(format!("bEaReR \t{FUZZ_TOKEN} ").into_bytes()),
        Just(b"Bearer".to_vec()),
        Just(b"Basic abc".to_vec()),
        Just(format!("a=1; benchlab_token={FUZZ_TOKEN}").into_bytes()),
        Just(b"benchlab_token=; ;=;a".to_vec()),
        vec(any::<u8>(), 0..24),
        "[ -~]{0,24}".prop_map(|s| s.into_bytes()),
    ];
    (name, value)
}

/// serve's request handling (issue 25 item 6): the method, the URL (path
/// and query), the headers and cookies, through everything the server
/// decides before a page. It never panics; a request it lets through is
/// GET or HEAD, names an allowed host and carries the token; every
/// refusal is a 4xx with the headers its status needs.
#[test]
fn serve_requests() {
    let hosts = benchlab_serve::AllowedHosts::new(&["lab.example"]);
    let strategy = (
        prop_oneof![
            4 => Just("GET".to_string()),
            1 => Just("HEAD".to_string()),
            1 => Just("POST".to_string()),
            1 => "[A-Z]{1,7}".prop_map(|s| s),
        ],
        vec(url_piece(), 0..8),
        vec(header(), 0..5),
        any::<bool>(),
    );
    let t = fuzz(
        "serve requests",
        cases(),
        strategy,
        |(method, pieces, headers, with_token)| {
            let target = pieces.concat();
            let token = with_token.then_some(FUZZ_TOKEN);
            let hs = headers.iter().map(|(k, v)| (k.as_str(), v.as_slice()));
            match benchlab_serve::screen(&method, &target, hs, &hosts, token) {
                Ok(s) => {
                    let r = &s.request;
                    prop_assert!(r.method == "GET" || r.method == "HEAD", "{}", r.method);
                    prop_assert!(hosts.allows(r.header("host").unwrap_or("")));
                    prop_assert!(target.starts_with('/'));
                    if token.is_some() {
                        // The token came in one of its three places.
                        let carried = r
                            .headers
                            .iter()
                            .any(|(k, v)| k == "authorization" && v.contains(FUZZ_TOKEN))
                            || r.cookie("benchlab_token") == Some(FUZZ_TOKEN)
                            || r.param("token").is_some_and(|t| t.trim() == FUZZ_TOKEN);
                        prop_assert!(carried, "let through without the token: {:?}", r);
                    }
                    // The decoded parts read back without panicking.
                    let _ = (r.params("c"), r.param("base"), r.cookie("x"));
                    Ok(true)
                }
                Err(resp) => {
                    prop_assert!(
                        [400, 401, 405, 421].contains(&resp.status),
                        "status {}",
                        resp.status
                    );
                    let has = |h: &str| resp.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(h));
                    if resp.status == 401 {
                        prop_assert!(has("WWW-Authenticate"));
                    }
                    if resp.status == 405 {
                        prop_assert!(has("Allow"));
                    }
                    Ok(false)
                }
            }
        },
    );
    assert!(t.accepted > 0, "no request was let through");
    assert!(t.executions > t.accepted, "nothing was refused");
}

/// The tool adapters' files (`tools/*.toml`), mutated: read or refused
/// with a message, never a panic; a file that reads makes a workload.
#[test]
fn tool_files() {
    let files = texts(&shipped("tools", ".toml"));
    let t = fuzz("tool files", cases(), input(files), |text| {
        match benchlab_wl_command::def::ToolDef::parse(&text) {
            Ok(def) => match benchlab_wl_command::CommandWorkload::from_tool(def) {
                Ok(_) => Ok(true),
                Err(e) => {
                    prop_assert!(!e.trim().is_empty());
                    Ok(false)
                }
            },
            Err(e) => {
                prop_assert!(!e.trim().is_empty());
                Ok(false)
            }
        }
    });
    assert!(t.accepted > 0, "no mutated tool file read");
}

/// The outputs the adapters' parsers read: the real outputs in
/// `crates/fuzz/seeds/tools` (each parses with its own adapter), mutated,
/// and arbitrary text, through every adapter. A parse gives every
/// declared metric as a finite number; a refusal names what it missed.
#[test]
fn tool_outputs() {
    use benchlab_core::Workload;
    let tools = benchlab_wl_command::tools();
    let params: Vec<benchlab_core::param::Params> = tools
        .iter()
        .map(|t| benchlab_core::param::Params::defaults(t.params()))
        .collect();
    let seeds = shipped("crates/fuzz/seeds/tools", "");
    for (name, text) in &seeds {
        let stem = name.split('.').next().unwrap();
        let Some(i) = tools
            .iter()
            .position(|t| t.kind() == format!("tool.{stem}"))
        else {
            continue;
        };
        tools[i]
            .read_output(&params[i], text)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let busy = seeds.iter().find(|(n, _)| n == "iperf3-busy.json").unwrap();
    let i = tools
        .iter()
        .position(|t| t.kind() == "tool.iperf3")
        .unwrap();
    let e = tools[i].read_output(&params[i], &busy.1).unwrap_err();
    assert!(e.contains("the server is busy"), "{e}");

    let strategy = (0..tools.len(), input(texts(&seeds)));
    let t = fuzz("tool outputs", cases(), strategy, |(i, text)| {
        let w = tools[i];
        match w.read_output(&params[i], &text) {
            Ok(values) => {
                for m in w.metrics(&params[i]) {
                    if ["command_wall_s", "command_cpu_s"].contains(&m.name) {
                        continue;
                    }
                    let v = values.get(m.name);
                    prop_assert!(
                        v.is_some_and(|v| v.is_finite()),
                        "{}: metric {} is {:?}",
                        w.kind(),
                        m.name,
                        v
                    );
                }
                Ok(true)
            }
            Err(e) => {
                prop_assert!(!e.trim().is_empty(), "{}: an empty message", w.kind());
                Ok(false)
            }
        }
    });
    assert!(t.accepted > 0, "no mutated output parsed");
}
