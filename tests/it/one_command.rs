//! Issue 26 item 6: one command per seed study. `benchlab run` brings the
//! study's `[testbed]` up itself and takes it down after (a bed the user
//! brought up is left alone), and a second `benchlab run` (or a `benchlab
//! restore`) while a run is live says that a run is in progress, with its
//! process and study, instead of calling its journal an earlier run's.

use std::process::Stdio;
use std::time::{Duration, Instant};

use benchlab_testkit::Scratch;

const SLOW: &str = r#"
[study]
name = "slow"
[defaults]
repetitions = 1
quiesce_s = 0
[[configuration]]
name = "a"
[[workload]]
kind = "fake"
sleep_s = 4
"#;

#[test]
fn a_second_run_says_a_run_is_in_progress() {
    let s = Scratch::new();
    let study = s.study("slow.toml", SLOW);
    let mut first = s
        .benchlab()
        .args(["run", study.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The lock names its holder once the run has started.
    let lock = s.path("state").join("run.lock");
    let t0 = Instant::now();
    while !std::fs::read_to_string(&lock).is_ok_and(|t| t.contains("study")) {
        assert!(t0.elapsed() < Duration::from_secs(20), "no run.lock");
        std::thread::sleep(Duration::from_millis(50));
    }
    let other = s.study("other.toml", &SLOW.replace("\"slow\"", "\"other\""));
    let out = s.run(&["run", other.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "a run is in progress on this host: process {}, study {}",
            first.id(),
            study.display()
        )),
        "{err}"
    );
    assert!(!err.contains("earlier run"), "{err}");
    // restore would undo the live run's settings: refused the same way.
    let out = s.run(&["restore"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("a run is in progress"), "{err}");
    assert!(first.wait().unwrap().success());
    // The lock went with the run.
    s.run_ok(&["run", other.to_str().unwrap()]);
}

macro_rules! require_root_and_iproute2 {
    () => {
        benchlab_testkit::require!(root, "ip", "tc");
    };
}

fn netns_of(bed: &str) -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("bl-{bed}-")))
        .map(str::to_string)
        .collect()
}

/// A ping-pong between the bed's two hosts: real sides in the bed's
/// namespaces, so the run fails if the bed is not up.
fn bed_study(bed: &str, net: u8) -> String {
    format!(
        r#"
[testbed]
name = "{bed}"
topology = "direct"
subnet = "10.{net}.0.0/24"
[[testbed.host]]
name = "sut"
[[testbed.host]]
name = "gen"

[study]
name = "own-bed"
[defaults]
repetitions = 1
quiesce_s = 0
[[configuration]]
name = "a"
[[host]]
name = "sut"
netns = "bl-{bed}-sut"
address = "10.{net}.0.1"
[[host]]
name = "gen"
netns = "bl-{bed}-gen"
address = "10.{net}.0.2"
[[workload]]
kind = "net.rr"
server = "sut"
client = "gen"
duration_s = 0.3
"#
    )
}

#[test]
fn the_run_brings_its_test_bed_up_and_down() {
    require_root_and_iproute2!();
    let s = Scratch::new();
    let bed = "own1";
    let study = s.study("bed.toml", &bed_study(bed, 241));
    assert!(netns_of(bed).is_empty(), "{:?}", netns_of(bed));
    let out = s.run(&["run", study.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "test bed `{bed}` brought up for this run and taken down after it"
        )),
        "{err}"
    );
    // The run measured between the bed's hosts, then removed the bed.
    let json = s.json("1");
    assert!(
        json["tables"][0]["rows"][0]["cells"][0]["value"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(netns_of(bed).is_empty(), "left behind: {:?}", netns_of(bed));
    assert!(!s.path("state/testbed").join(format!("{bed}.run")).exists());
}

#[test]
fn a_test_bed_the_user_brought_up_is_left_up() {
    require_root_and_iproute2!();
    let s = Scratch::new();
    let bed = "own2";
    let study = s.study("bed.toml", &bed_study(bed, 242));
    s.run_ok(&["testbed", "up", study.to_str().unwrap()]);
    let out = s.run(&["run", study.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    let up = netns_of(bed);
    // Down first, whatever the run did.
    s.run_ok(&["testbed", "down", bed]);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("test bed `{bed}` was up already")),
        "{err}"
    );
    assert_eq!(up.len(), 2, "{up:?}");
    assert!(netns_of(bed).is_empty());
}
