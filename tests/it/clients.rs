//! The clients axis: a point's clients spread over several client hosts
//! (agents in their own processes), started behind one barrier, their
//! results merged as the workload declares — driven by `fake.clients`,
//! whose figures are exact.

use benchlab_testkit::Scratch;

fn study(extra: &str) -> String {
    format!(
        r#"
[study]
name = "clients"
description = "the clients axis over two generator hosts"

[defaults]
repetitions = 2
quiesce_s = 0

[[configuration]]
name = "base"
description = "the only one"

[[host]]
name = "gen1"
local = true

[[host]]
name = "gen2"
local = true

[[workload]]
kind = "fake.clients"
client = ["gen1", "gen2"]
units = 5
sleep_s = 0.02
{extra}
"#
    )
}

/// Each point's clients and its metrics, one list of values per metric
/// (one value per repetition).
fn points(s: &Scratch) -> Vec<(u64, serde_json::Value)> {
    let j = s.json("1");
    j["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| {
            let clients = p["params"]["clients"].as_u64().expect("clients param");
            (clients, p["metrics"].clone())
        })
        .collect()
}

#[test]
fn clients_spread_over_hosts_run_once_each_behind_the_barrier() {
    let s = Scratch::new();
    let f = s.study("c.toml", &study("clients = \"1..8\"\n"));
    s.run_ok(&["run", f.to_str().unwrap()]);
    let all = points(&s);
    let seen: Vec<u64> = all.iter().map(|(c, _)| *c).collect();
    assert_eq!(seen, [1, 2, 4, 8]);
    let values = |m: &serde_json::Value, k: &str| -> Vec<f64> {
        m[k].as_array()
            .unwrap_or_else(|| panic!("{k} in {m}"))
            .iter()
            .map(|v| v.as_f64().expect("number"))
            .collect()
    };
    for (clients, m) in all {
        let c = clients as f64;
        // combine() itself refuses a result in which any index is missing
        // or doubled; these are the sums it let through.
        assert_eq!(values(&m, "clients_run"), [c, c]);
        assert_eq!(values(&m, "units"), [5.0 * c, 5.0 * c]);
        // One client: one host; more: both hosts took a share.
        let sides = if clients == 1 { 1.0 } else { 2.0 };
        assert_eq!(values(&m, "sides"), [sides, sides], "{clients} clients");
        // No side was released before the last one arrived.
        for margin in values(&m, "gate_margin_us") {
            assert!(
                margin >= 0.0,
                "released {margin} µs before the last arrival"
            );
        }
    }
}

#[test]
fn a_client_that_fails_to_arrive_fails_the_point_with_its_own_reason() {
    let s = Scratch::new();
    // Clients 1 and 2 run on gen1, 3 and 4 on gen2: gen2's side waits at
    // the gate and must be released when gen1's fails.
    let f = s.study("c.toml", &study("clients = 4\nfail_client = 2\n"));
    let out = s.run(&["run", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "some repetitions failed");
    let j = s.json("1");
    let failures = j["failures"].as_array().expect("failures");
    // Both repetitions fail for the same reason: after the first, both
    // hosts' agents came back from the gate and took the second request.
    assert_eq!(failures.len(), 2);
    for f in failures {
        assert_eq!(f["status"], "failed", "{f}");
        let reason = f["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("gen1") && reason.contains("fake client 2 failed"),
            "the failing client's reason, not the abandoned one's: {reason}"
        );
    }
}

#[test]
fn several_client_hosts_need_a_clients_axis() {
    let s = Scratch::new();
    let f = s.study(
        "bad.toml",
        r#"
[study]
name = "bad"
[[configuration]]
name = "base"
[[host]]
name = "gen1"
local = true
[[host]]
name = "gen2"
local = true
[[workload]]
kind = "fake"
client = ["gen1", "gen2"]
"#,
    );
    let out = s.run(&["check", f.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml"), "{err}");
    assert!(err.contains("workload[0].client"), "{err}");
    assert!(err.contains("clients axis"), "{err}");
}
