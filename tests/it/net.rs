//! The network workloads end to end through the binary: agents in their
//! own processes, results stored and read back, each figure checked against
//! a count taken independently on the other side.

use benchlab_testkit::Scratch;
use serde_json::Value;

const STUDY: &str = r#"
[study]
name = "net-e2e"
[defaults]
repetitions = 1
duration_s = 0.4
warmup_s = 0.1
quiesce_s = 0
[[configuration]]
name = "free"
[[configuration]]
name = "pinned"
server = { cpus = "0" }
client = { cpus = "0", nice = 5 }
[[workload]]
kind = "net.stream"
protocol = ["tcp", "udp"]
message_size = [1024, 65507]
[[workload]]
kind = "net.rr"
protocol = ["tcp", "udp"]
request_size = 32
[[workload]]
kind = "net.pingpong"
protocol = ["tcp", "udp"]
iterations = 500
"#;

fn metric(p: &Value, name: &str) -> f64 {
    p["metrics"][name][0]
        .as_f64()
        .unwrap_or_else(|| panic!("no {name} in {p}"))
}

#[test]
fn network_workloads_through_agents() {
    let s = Scratch::new();
    let study = s.study("net.toml", STUDY);
    s.run_ok(&["run", study.to_str().unwrap()]);
    let j = s.json("1");
    assert!(
        j["failures"].as_array().unwrap().is_empty(),
        "{}",
        j["failures"]
    );
    let points = j["points"].as_array().unwrap();
    assert_eq!(points.len(), 2 * (4 + 2 + 2));
    for p in points {
        let proto = p["params"]["protocol"].as_str().unwrap();
        // Both agents reported their peak RSS.
        assert!(metric(p, "client_peak_rss_kib") > 0.0 && metric(p, "server_peak_rss_kib") > 0.0);
        match p["kind"].as_str().unwrap() {
            "net.stream" if proto == "tcp" => {
                assert_eq!(metric(p, "bytes_sent"), metric(p, "bytes_received"), "{p}");
                assert!(metric(p, "throughput_mbps") > 0.0);
                let mbit = metric(p, "measured_bytes") * 8.0 / 1e6 / metric(p, "elapsed_s");
                assert!((mbit - metric(p, "throughput_mbps")).abs() < 1e-6 * mbit);
            }
            "net.stream" => {
                let lost = metric(p, "datagrams_sent") - metric(p, "datagrams_received");
                assert_eq!(metric(p, "loss_datagrams"), lost, "{p}");
                assert!(metric(p, "datagrams_received") > 0.0);
            }
            "net.rr" => {
                let rate = metric(p, "transactions_per_s");
                let n = metric(p, "transactions");
                assert!((rate * metric(p, "elapsed_s") - n).abs() <= 1.0, "{p}");
                assert!((metric(p, "rtt_us") - 1e6 / rate).abs() < 1e-6 * metric(p, "rtt_us"));
            }
            "net.pingpong" => {
                assert_eq!(metric(p, "iterations"), 500.0, "{p}");
                let order = [
                    "rtt_half_min_us",
                    "rtt_half_median_us",
                    "rtt_half_p99_us",
                    "rtt_half_max_us",
                ];
                for w in order.windows(2) {
                    assert!(
                        metric(p, w[0]) <= metric(p, w[1]),
                        "{} > {} in {p}",
                        w[0],
                        w[1]
                    );
                }
            }
            other => panic!("unexpected kind {other}"),
        }
    }
    // Tables: TCP and UDP stream by message size; rr, ping-pong mean and
    // jitter with the protocol as rows (their size is fixed, as in seed 002).
    let titles: Vec<&str> = j["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        [
            "TCP streaming throughput (10^6 b/s)",
            "UDP streaming throughput (10^6 b/s)",
            "Round-trip latency (µs)",
            "Ping-pong RTT/2 mean (µs)",
            "Ping-pong jitter, RTT/2 stddev (µs)"
        ]
    );
    let rr = &j["tables"][2];
    assert_eq!(rr["row_param"], "protocol");
    assert_eq!(rr["rows"][0]["label"], "tcp");
    assert_eq!(rr["average"]["label"], "Average");
}

#[test]
fn an_impossible_placement_fails_the_point_with_its_reason() {
    let s = Scratch::new();
    let study = s.study(
        "bad-cpu.toml",
        "[study]\nname = \"bad-cpu\"\n[defaults]\nrepetitions = 1\nduration_s = 0.2\nwarmup_s = 0\nquiesce_s = 0\n[[configuration]]\nname = \"nowhere\"\nclient = { cpus = \"1000\" }\n[[workload]]\nkind = \"net.rr\"\n",
    );
    let out = s.run(&["run", study.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    let j = s.json("1");
    let reason = j["failures"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("client side: cannot pin to CPUs [1000]"),
        "{reason}"
    );
}

/// Issue 13: a receive buffer the kernel clips (above net.core.rmem_max)
/// is recorded as in force and noted in every report format; one within
/// the ceiling gets no note.
#[test]
fn a_clipped_receive_buffer_is_noted_in_every_format() {
    let rmem_max: u64 = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let asked = (1u64 << 20).max(rmem_max * 2);
    let s = Scratch::new();
    let study = s.study(
        "rcvbuf.toml",
        &format!(
            r#"
[study]
name = "rcvbuf"
[defaults]
repetitions = 1
duration_s = 0.2
warmup_s = 0
quiesce_s = 0
[[workload]]
kind = "net.stream"
message_size = 4096
recv_buffer = [65536, {asked}]
rows = "recv_buffer"
"#
        ),
    );
    s.run_ok(&["run", study.to_str().unwrap()]);
    let j = s.json("1");
    let points = j["points"].as_array().unwrap();
    let in_force: Vec<f64> = points
        .iter()
        .map(|p| metric(p, "recv_buffer_bytes"))
        .collect();
    assert_eq!(in_force, [131072.0, (2 * rmem_max) as f64]);
    let notes = j["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let text = notes[0]["text"].as_str().unwrap();
    let want = format!("recv_buffer = {asked}: the kernel clipped it to {rmem_max} bytes");
    assert!(text.starts_with(&want), "{text}");
    assert_eq!(
        notes[0]["points"][0],
        format!("default · recv_buffer={asked}")
    );
    for format in ["table", "markdown"] {
        // Point notes are detail: the terminal shows them with --verbose.
        let out = s.run_ok(&["show", "1", "--verbose", "--format", format]);
        assert!(flat(&out).contains(&flat(&want)), "{format}:\n{out}");
    }
    let html = s.path("r.html");
    s.run_ok(&["report", "1", "--html", html.to_str().unwrap()]);
    assert!(std::fs::read_to_string(&html).unwrap().contains(&want));
}

/// The text with every run of white space made one space: the terminal
/// writer wraps long lines at its width.
fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
