//! A lab's queue (issue 43, docs/lab.md): studies submitted to a
//! throw-away PostgreSQL server (and SQLite), claimed by real `benchlab
//! worker` processes, and resumed by another worker after one is killed.
//! The fake workload needs no root, namespace or server.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use benchlab_store::{EntryStatus, HostHold, NewEntry, Store, WorkerId};
use benchlab_testkit::{Bed, Scratch};

use crate::store_pg::{benchlab, ok, server};

/// A fake study; `sleep_s` per repetition makes a run last long enough
/// to be killed in.
fn study(name: &str, sleep_s: f64) -> String {
    format!(
        r#"
[study]
name = "{name}"

[defaults]
repetitions = 3
quiesce_s = 0

[[configuration]]
name = "base"

[[configuration]]
name = "better"
set = {{ value = 110 }}

[[workload]]
name = "fake"
kind = "fake"
size = [64, "1KiB"]
value = 100
latency_us = 10
sleep_s = {sleep_s}
"#
    )
}

fn worker(s: &Scratch, db: &str, name: &str, lease: &str) -> Child {
    benchlab(s, db, &format!("state-{name}"))
        .args([
            "worker",
            "--name",
            name,
            "--until-empty",
            "--poll",
            "0.2",
            "--lease",
            lease,
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(s.path(&format!("{name}.log"))).unwrap())
        .spawn()
        .expect("start a worker")
}

fn wait_ok(mut c: Child, s: &Scratch, name: &str, bound: Duration) {
    let start = Instant::now();
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            let log = std::fs::read_to_string(s.path(&format!("{name}.log"))).unwrap_or_default();
            assert!(st.success(), "worker {name} ended {st}:\n{log}");
            return;
        }
        if start.elapsed() > bound {
            let _ = c.kill();
            let log = std::fs::read_to_string(s.path(&format!("{name}.log"))).unwrap_or_default();
            panic!("worker {name} still running after {bound:?}:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The repetitions a run stored: (configuration, workload, point,
/// repetition) of each sample.
fn units(store: &Store, run: i64) -> BTreeSet<(usize, usize, usize, u32)> {
    let points: BTreeMap<i64, (usize, usize, usize)> = store
        .points(run)
        .unwrap()
        .into_iter()
        .map(|p| (p.id, (p.config_idx, p.workload_idx, p.point_idx)))
        .collect();
    let samples = store.samples(run).unwrap();
    let set: BTreeSet<_> = samples
        .iter()
        .map(|x| {
            let (c, w, p) = points[&x.point_id];
            (c, w, p, x.repetition)
        })
        .collect();
    assert_eq!(
        set.len(),
        samples.len(),
        "run {run}: a repetition stored twice"
    );
    set
}

/// Two workers claim at the same instant, again and again: each entry
/// goes to exactly one of them, on both backends.
fn race(target: &benchlab_store::Target) {
    let setup = Store::open_target(target).unwrap();
    const ROUNDS: usize = 40;
    for round in 0..ROUNDS {
        let id = setup
            .submit(&NewEntry {
                study_name: "race",
                study_file: "race.toml",
                study_text: "",
                lab: None,
                every_s: None,
                priority: 0,
                submitted_at: "2026-01-01T00:00:00Z",
            })
            .unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let claims: Vec<Option<i64>> = (0..2)
            .map(|w| {
                let (target, barrier) = (target.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let store = Store::open_target(&target).unwrap();
                    let name = format!("w{w}");
                    barrier.wait();
                    store
                        .claim_entry(
                            &WorkerId {
                                name: &name,
                                host: "racer",
                                pid: w,
                            },
                            60.0,
                        )
                        .unwrap()
                        .map(|c| c.entry.id)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let got: Vec<i64> = claims.iter().flatten().copied().collect();
        assert_eq!(
            got,
            vec![id],
            "round {round}: claims {claims:?} of entry {id}"
        );
        let e = setup.queue_entry(id).unwrap().unwrap();
        assert_eq!(
            (e.status, e.attempts),
            (EntryStatus::Running, 1),
            "round {round}"
        );
    }
    let holdings = setup.holdings().unwrap();
    assert_eq!(
        holdings.len(),
        ROUNDS,
        "one holding per entry: {holdings:?}"
    );
}

#[test]
fn two_workers_racing_for_one_entry_one_gets_it() {
    let s = Scratch::new();
    race(&benchlab_store::Target::Sqlite(s.path("race.db")));
    if let Some(server) = server() {
        race(&benchlab_store::Target::Postgres(
            server.create_database("lab_race"),
        ));
    }
}

#[test]
fn three_workers_run_twelve_studies_each_once() {
    let Some(server) = server() else { return };
    let s = Scratch::new();
    let db = server.create_database("lab_twelve");
    for i in 0..12 {
        let f = s.study(&format!("s{i}.toml"), &study(&format!("lab-{i:02}"), 0.02));
        ok(
            benchlab(&s, &db, "state-submit")
                .arg("submit")
                .arg(&f)
                .args(["--priority", &(i % 3).to_string()])
                .output()
                .unwrap(),
            "submit",
        );
    }
    // A lease long enough that a worker starved of CPU by the rest of
    // the suite still renews it: a takeover is right when a heartbeat
    // is late by a whole lease, but this test is about sharing, and the
    // takeovers have tests of their own below. The runs take turns on
    // the one local host, so the bound covers twelve of them in a row.
    let workers: Vec<(Child, String)> = (0..3)
        .map(|w| {
            let name = format!("worker{w}");
            (worker(&s, &db, &name, "60"), name)
        })
        .collect();
    let names: Vec<String> = workers.iter().map(|(_, n)| n.clone()).collect();
    for (c, name) in workers {
        wait_ok(c, &s, &name, Duration::from_secs(600));
    }
    // Every worker's log, for any assertion below that fails.
    let logs: String = names
        .iter()
        .map(|n| {
            let log = std::fs::read_to_string(s.path(&format!("{n}.log"))).unwrap_or_default();
            format!("--- {n}:\n{log}")
        })
        .collect();
    let store = Store::open_db(&db).unwrap();
    let entries = store.queue_entries().unwrap();
    assert_eq!(entries.len(), 12, "{logs}");
    let mut runs = BTreeSet::new();
    let mut by_worker: BTreeMap<String, usize> = BTreeMap::new();
    for e in &entries {
        assert_eq!(e.status, EntryStatus::Finished, "{e:?}\n{logs}");
        assert_eq!(e.attempts, 1, "{e:?}\n{logs}");
        let run = e.run_id.expect("a finished entry names its run");
        assert!(runs.insert(run), "run {run} of two entries");
        let r = store.run(run).unwrap();
        assert_eq!(r.study_name, e.study_name);
        assert_eq!(r.status, benchlab_store::RunStatus::Completed);
        // 2 configurations × 2 points × 3 repetitions.
        assert_eq!(units(&store, run).len(), 12, "run {run}\n{logs}");
        *by_worker.entry(e.worker.clone().unwrap()).or_default() += 1;
    }
    // No study ran twice: one run per study in the store, one holding
    // per entry, and one worker's holdings never overlap in time.
    assert_eq!(store.runs().unwrap().len(), 12);
    let holdings = store.holdings().unwrap();
    assert_eq!(holdings.len(), 12, "{holdings:?}\n{logs}");
    for w in by_worker.keys() {
        let mut mine: Vec<_> = holdings.iter().filter(|h| &h.worker == w).collect();
        mine.sort_by(|a, b| a.from_s.total_cmp(&b.from_s));
        for pair in mine.windows(2) {
            assert!(
                pair[0].to_s <= pair[1].from_s,
                "{w} held two at once: {pair:?}\n{logs}"
            );
        }
    }
    // The studies' hosts are this machine's (local): one host, leased
    // to one run at a time, whichever worker ran it.
    assert_no_host_in_two_runs(&store);
    assert!(!by_worker.is_empty());
    let listing = ok(
        benchlab(&s, &db, "state-submit")
            .arg("queue")
            .output()
            .unwrap(),
        "queue",
    );
    assert_eq!(listing.matches(" finished ").count(), 12, "{listing}");
}

#[test]
fn a_killed_workers_run_is_resumed_after_its_lease() {
    let Some(server) = server() else { return };
    let s = Scratch::new();
    let text = study("lab-kill", 0.4);
    let f = s.study("kill.toml", &text);
    // The run without a kill, for its repetitions.
    let reference = s.path("reference.db");
    ok(
        benchlab(&s, &reference.display().to_string(), "state-ref")
            .arg("run")
            .arg(&f)
            .output()
            .unwrap(),
        "reference run",
    );
    let ref_store = Store::open(&reference).unwrap();
    let expected = units(&ref_store, ref_store.latest_run().unwrap().unwrap());
    assert_eq!(expected.len(), 12);

    let db = server.create_database("lab_kill");
    ok(
        benchlab(&s, &db, "state-submit")
            .arg("submit")
            .arg(&f)
            .output()
            .unwrap(),
        "submit",
    );
    let store = Store::open_db(&db).unwrap();
    let mut first = worker(&s, &db, "doomed", "3");
    // Kill it once some, not all, repetitions are stored.
    let start = Instant::now();
    let run = loop {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the first worker stored nothing"
        );
        assert!(
            first.try_wait().unwrap().is_none(),
            "the first worker ended early"
        );
        if let Some(run) = store.latest_run().unwrap() {
            if store.samples(run).unwrap().len() >= 3 {
                break run;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // SIGKILL: no handler runs, the lease is simply not renewed.
    first.kill().unwrap();
    first.wait().unwrap();
    let stored_at_kill = store.samples(run).unwrap().len();
    assert!(stored_at_kill < 12, "the run ended before the kill");
    let killed_at = Instant::now();
    let second = worker(&s, &db, "rescuer", "3");
    wait_ok(second, &s, "rescuer", Duration::from_secs(120));
    let log = std::fs::read_to_string(s.path("rescuer.log")).unwrap();
    assert!(
        log.contains(&format!(
            "worker doomed's lease expired, resuming run {run}"
        )),
        "{log}"
    );
    let e = &store.queue_entries().unwrap()[0];
    assert_eq!(e.status, EntryStatus::Finished, "{e:?}");
    assert_eq!(e.attempts, 2, "{e:?}");
    assert_eq!(e.run_id, Some(run));
    assert!(
        e.reasons.contains("lease of worker doomed expired"),
        "{e:?}"
    );
    // One run, its repetitions exactly those of the run without a kill.
    assert_eq!(store.runs().unwrap().len(), 1);
    assert_eq!(units(&store, run), expected);
    assert_eq!(
        store.run(run).unwrap().status,
        benchlab_store::RunStatus::Completed
    );
    let events: Vec<String> = store
        .events(run)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert!(events.contains(&"resumed".to_string()), "{events:?}");
    // The two holdings: the dead one's ended before the rescuer's began,
    // which waited for the lease (3 s) to run out.
    let h = store.holdings().unwrap();
    assert_eq!(h.len(), 2, "{h:?}");
    assert_eq!(h[0].outcome.as_deref(), Some("lease expired"));
    assert!(h[0].to_s <= h[1].from_s, "{h:?}");
    assert!(
        h[1].from_s - h[0].to_s >= 2.0,
        "taken over before the lease ran out: {h:?}"
    );
    assert!(killed_at.elapsed() >= Duration::from_secs(1));
}

#[test]
fn submit_refuses_what_check_refuses_and_cancel_ends_an_entry() {
    let s = Scratch::new();
    let db = s.db().display().to_string();
    let bad = s.study(
        "bad.toml",
        &study("lab-bad", 0.0).replace("kind = \"fake\"", "kind = \"nosuch\""),
    );
    let check = benchlab(&s, &db, "state")
        .arg("check")
        .arg(&bad)
        .output()
        .unwrap();
    let submit = benchlab(&s, &db, "state")
        .arg("submit")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!check.status.success() && !submit.status.success());
    let said = |o: &Output| String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(said(&check), said(&submit), "submit says what check says");
    let good = s.study("good.toml", &study("lab-good", 0.0));
    let out = ok(
        benchlab(&s, &db, "state")
            .arg("submit")
            .arg(&good)
            .args(["--every", "1d"])
            .output()
            .unwrap(),
        "submit",
    );
    assert!(
        out.starts_with("queued entry 1: study `lab-good`, every 86400 s"),
        "{out}"
    );
    let bad_every = benchlab(&s, &db, "state")
        .arg("submit")
        .arg(&good)
        .args(["--every", "1w"])
        .output()
        .unwrap();
    assert!(
        said(&bad_every).contains("--every 1w: the unit must be s, m, h or d"),
        "{}",
        said(&bad_every)
    );
    ok(
        benchlab(&s, &db, "state")
            .args(["cancel", "1"])
            .output()
            .unwrap(),
        "cancel",
    );
    let again = benchlab(&s, &db, "state")
        .args(["cancel", "1"])
        .output()
        .unwrap();
    assert!(
        said(&again).contains("entry 1 is cancelled already"),
        "{}",
        said(&again)
    );
    let listing = ok(
        benchlab(&s, &db, "state").arg("queue").output().unwrap(),
        "queue",
    );
    assert!(
        listing.contains(" cancelled ") && listing.contains("cancelled by"),
        "{listing}"
    );
    // Nothing is due: a worker told to stop when the queue is empty
    // stops at once, having run nothing.
    ok(
        benchlab(&s, &db, "state")
            .args(["worker", "--until-empty"])
            .output()
            .unwrap(),
        "worker",
    );
    assert!(Store::open(&s.db()).unwrap().runs().unwrap().is_empty());
}

#[test]
fn a_worker_names_the_upgrade_of_a_store_without_the_queue() {
    let s = Scratch::new();
    // A store at the schema before the queue: made by this benchlab, then
    // taken back to that version as an older benchlab would have left it.
    let db = s.db();
    drop(Store::open(&db).unwrap());
    let conn = rusqlite::Connection::open(&db).unwrap();
    let before = benchlab_store::queue_schema_version() - 1;
    conn.execute_batch(&format!(
        "DROP TABLE queue_wait; DROP TABLE host_hold; DROP TABLE host_lease;
         DROP TABLE queue_claim; DROP TABLE queue_entry; PRAGMA user_version = {before};"
    ))
    .unwrap();
    drop(conn);
    for cmd in [&["worker", "--once"][..], &["queue"], &["cancel", "1"]] {
        let out = benchlab(&s, &db.display().to_string(), "state")
            .args(cmd)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd:?}: {err}");
        assert!(
            err.contains(&format!("without the queue (version {})", before + 1))
                && err.contains(&format!("`benchlab --db {} store upgrade`", db.display())),
            "{cmd:?}: {err}"
        );
    }
    // Nothing was upgraded behind the user's back, not even by a reading
    // command; `store upgrade` upgrades.
    let version = |db: &std::path::Path| -> i64 {
        rusqlite::Connection::open(db)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(version(&db), before);
    let list = benchlab(&s, &db.display().to_string(), "state")
        .arg("list")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&list.stderr);
    assert!(!list.status.success(), "list: {err}");
    assert!(err.contains("store upgrade`"), "list: {err}");
    assert_eq!(version(&db), before);
    ok(
        benchlab(&s, &db.display().to_string(), "state")
            .args(["store", "upgrade"])
            .output()
            .unwrap(),
        "store upgrade",
    );
    ok(
        benchlab(&s, &db.display().to_string(), "state")
            .arg("queue")
            .output()
            .unwrap(),
        "queue",
    );
}

/// Checks, from the stored holdings, that no host was ever in two runs
/// at once: per host, each holding ends before the next begins. Returns
/// the holdings by host.
fn assert_no_host_in_two_runs(store: &Store) -> BTreeMap<String, Vec<HostHold>> {
    let mut by_host: BTreeMap<String, Vec<HostHold>> = BTreeMap::new();
    for h in store.host_holds().unwrap() {
        by_host.entry(h.host.clone()).or_default().push(h);
    }
    assert!(!by_host.is_empty(), "no host was leased");
    for (host, holds) in &mut by_host {
        holds.sort_by(|a, b| a.from_s.total_cmp(&b.from_s));
        for pair in holds.windows(2) {
            assert!(
                pair[0].to_s <= pair[1].from_s,
                "host {host} in two runs at once: {pair:?}"
            );
        }
    }
    by_host
}

/// A profile of a per-namespace sysctl: each namespace host's own value
/// changes, and must be put back however the run ends.
const SOMAXCONN_PROFILE: &str =
    "[profile]\ndescription = \"lab\"\n[sysctl]\n\"net.core.somaxconn\" = 3333\n";

fn somaxconn(bed: &Bed, host: &str) -> String {
    let out = bed
        .exec(host, "cat")
        .arg("/proc/sys/net/core/somaxconn")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A `[[host]]` table for test bed host `h{i}` under `name`.
fn netns_host(bed: &Bed, name: &str, i: usize) -> String {
    format!(
        "[[host]]\nname = \"{name}\"\nnetns = \"{}\"\naddress = \"10.240.0.{}\"\n",
        bed.ns(&format!("h{i}")),
        i + 1
    )
}

#[test]
fn three_workers_lease_namespace_hosts_and_resume_a_killed_run() {
    benchlab_testkit::require!(root, "ip");
    let Some(server) = server() else { return };
    let s = Scratch::new();
    let bed = Bed::up(
        &s,
        &format!("l{}", std::process::id() % 100_000),
        "topology = \"bridge\"\nsubnet = \"10.240.0.0/24\"\n[[testbed.host]]\nname = \"h0\"\n[[testbed.host]]\nname = \"h1\"\n[[testbed.host]]\nname = \"h2\"\n[[testbed.host]]\nname = \"h3\"\n",
    );
    let before: Vec<String> = (0..4).map(|i| somaxconn(&bed, &format!("h{i}"))).collect();
    assert!(before.iter().all(|v| v != "3333"), "{before:?}");
    let db = server.create_database("lab_hosts");
    let profile = s.study("lab-profile.toml", SOMAXCONN_PROFILE);
    // Twelve studies, each on two of the four hosts (sut h[i], generator
    // h[i+1]): neighbours share a host, so at most two run at once.
    for i in 0..12 {
        let text = study(&format!("ns-{i:02}"), 0.1).replace(
            "name = \"better\"\n",
            &format!("name = \"better\"\nprofile = \"{}\"\n", profile.display()),
        );
        let f = s.study(&format!("ns{i}.toml"), &text);
        let lab = s.study(
            &format!("ns{i}-lab.toml"),
            &format!(
                "{}{}",
                netns_host(&bed, "sut", i % 4),
                netns_host(&bed, "generator", (i + 1) % 4)
            ),
        );
        ok(
            benchlab(&s, &db, "state-submit")
                .arg("submit")
                .arg(&f)
                .arg("--hosts")
                .arg(&lab)
                .output()
                .unwrap(),
            "submit",
        );
    }
    // Two workers may use every host, the third only h0 and h1.
    let all = s.study(
        "all-hosts.toml",
        &(0..4)
            .map(|i| netns_host(&bed, &format!("h{i}"), i))
            .collect::<String>(),
    );
    let two = s.study(
        "two-hosts.toml",
        &format!("{}{}", netns_host(&bed, "a", 0), netns_host(&bed, "b", 1)),
    );
    let spawn = |name: &str, lab: &std::path::Path| -> Child {
        benchlab(&s, &db, &format!("state-{name}"))
            .args(["worker", "--name", name, "--until-empty", "--poll", "0.2"])
            .args(["--lease", "3", "--hosts"])
            .arg(lab)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(s.path(&format!("{name}.log"))).unwrap())
            .spawn()
            .expect("start a worker")
    };
    let mut doomed = spawn("doomed", &all);
    let w0 = spawn("w0", &all);
    let w2 = spawn("w2", &two);
    let store = Store::open_db(&db).unwrap();
    // Kill `doomed` once a run of its own has stored some repetitions.
    let pid = doomed.id() as i64;
    let start = Instant::now();
    let run = loop {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the doomed worker stored nothing"
        );
        assert!(doomed.try_wait().unwrap().is_none(), "doomed ended early");
        let mine = store
            .runs()
            .unwrap()
            .into_iter()
            .find(|r| r.controller_pid == Some(pid));
        if let Some(r) = mine {
            let n = store.samples(r.id).unwrap().len();
            if (3..12).contains(&n) {
                break r.id;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    let stored_at_kill = store.samples(run).unwrap().len();
    wait_ok(w0, &s, "w0", Duration::from_secs(400));
    wait_ok(w2, &s, "w2", Duration::from_secs(400));

    let entries = store.queue_entries().unwrap();
    assert_eq!(entries.len(), 12);
    let full = |r: i64| units(&store, r);
    let reference = full(
        entries
            .iter()
            .find(|e| e.attempts == 1)
            .unwrap()
            .run_id
            .unwrap(),
    );
    assert_eq!(reference.len(), 12);
    for e in &entries {
        assert_eq!(e.status, EntryStatus::Finished, "{e:?}");
        let r = e.run_id.unwrap();
        assert_eq!(full(r), reference, "run {r} of entry {}", e.id);
    }
    // The killed run: taken over after its lease, resumed, its
    // repetitions exactly those of a run without a kill.
    let killed = entries.iter().find(|e| e.run_id == Some(run)).unwrap();
    assert_eq!(killed.attempts, 2, "{killed:?}");
    assert!(
        killed.reasons.contains("lease of worker doomed expired"),
        "{killed:?}"
    );
    assert!(stored_at_kill < 12);
    assert_eq!(store.runs().unwrap().len(), 12, "one run per entry");
    // No host in two runs at once, from the stored holdings; each entry's
    // attempt held its two hosts.
    let by_host = assert_no_host_in_two_runs(&store);
    assert_eq!(by_host.len(), 4, "{:?}", by_host.keys());
    let holds: Vec<HostHold> = by_host.into_values().flatten().collect();
    assert_eq!(holds.len(), 2 * 13, "12 entries, one taken over: {holds:?}");
    // The worker limited to h0 and h1 used no other host.
    let (h0, h1) = (bed.ns("h0"), bed.ns("h1"));
    for h in holds.iter().filter(|h| h.worker == "w2") {
        assert!(
            h.host.contains(&format!("{h0}@")) || h.host.contains(&format!("{h1}@")),
            "w2 used {h:?}"
        );
    }
    // Every host's setting is back, and nothing is left to restore.
    let after: Vec<String> = (0..4).map(|i| somaxconn(&bed, &format!("h{i}"))).collect();
    assert_eq!(after, before, "the hosts' somaxconn");
    for w in ["doomed", "w0", "w2"] {
        let journals = s.path(&format!("state-{w}/journal"));
        let left: Vec<_> = std::fs::read_dir(&journals)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{w} left journals {left:?}");
    }
}

#[test]
fn an_entry_needing_a_host_no_worker_reaches_stays_queued_with_why() {
    let s = Scratch::new();
    let db = s.db().display().to_string();
    let f = s.study("far.toml", &study("lab-far", 0.0));
    let lab = s.study(
        "far-lab.toml",
        "[[host]]\nname = \"sut\"\nssh = \"bench@far-away.invalid\"\n",
    );
    ok(
        benchlab(&s, &db, "state")
            .arg("submit")
            .arg(&f)
            .arg("--hosts")
            .arg(&lab)
            .output()
            .unwrap(),
        "submit",
    );
    let mine = s.study("here.toml", "[[host]]\nname = \"here\"\nlocal = true\n");
    let out = benchlab(&s, &db, "state")
        .args(["worker", "--name", "near", "--until-empty", "--hosts"])
        .arg(&mine)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("nothing left it can run (entry 1 waits for hosts it cannot reach"),
        "{said}"
    );
    let listing = ok(
        benchlab(&s, &db, "state").arg("queue").output().unwrap(),
        "queue",
    );
    assert!(listing.contains(" queued "), "{listing}");
    assert!(
        listing.contains(&format!(
            "waiting: worker near cannot reach host `sut` (ssh:far-away.invalid): not among its --hosts {}",
            mine.display()
        )),
        "{listing}"
    );
    assert!(Store::open(&s.db()).unwrap().runs().unwrap().is_empty());
}
#[test]
fn a_periodic_study_with_a_planted_shift_is_flagged_in_history_queue_and_serve() {
    let s = Scratch::new();
    let db = s.db().display().to_string();
    // Runs every 2 s; the score is 15 % higher from 15 s after submission
    // on (2 % noise, fresh draws in every run).
    let shift_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        + 15.0;
    let text = format!(
        r#"
[study]
name = "lab-periodic"

[defaults]
repetitions = 1
quiesce_s = 0

[[configuration]]
name = "base"

[[workload]]
name = "fake"
kind = "fake"
value = 100
step = 0
noise = 0.02
seed = 0
shift = 0.15
shift_at = {shift_at}
"#
    );
    let f = s.study("periodic.toml", &text);
    ok(
        benchlab(&s, &db, "state")
            .arg("submit")
            .arg(&f)
            .args(["--every", "2s"])
            .output()
            .unwrap(),
        "submit",
    );
    let worker = benchlab(&s, &db, "state")
        .args(["worker", "--name", "nightly", "--max-entries", "12"])
        .args(["--poll", "0.2"])
        .output()
        .unwrap();
    assert!(
        worker.status.success(),
        "{}",
        String::from_utf8_lossy(&worker.stderr)
    );
    let store = Store::open(&s.db()).unwrap();
    let mut runs = store.runs().unwrap();
    runs.sort_by_key(|r| r.id);
    assert_eq!(runs.len(), 12);
    // The first run measured after the planted moment: its score is
    // 115 ± 2 %, every earlier one's 100 ± 2 %.
    let shifted: Vec<bool> = runs
        .iter()
        .map(|r| {
            let samples = store.samples(r.id).unwrap();
            assert_eq!(samples.len(), 1, "run {}", r.id);
            samples[0].metrics["score"] > 107.5
        })
        .collect();
    let n_before = shifted.iter().take_while(|x| !**x).count();
    assert!(
        shifted[n_before..].iter().all(|x| *x),
        "the score is not shifted from one run on: {shifted:?}"
    );
    assert!(
        (3..=9).contains(&n_before),
        "{n_before} runs before the shift: too few on one side to find it ({shifted:?})"
    );
    let first_after = runs[n_before].id;
    let history = s.run_ok(&["history", "lab-periodic"]);
    assert!(
        history.contains(&format!("← change at run {first_after}: mean ")),
        "{history}"
    );
    let listing = ok(
        benchlab(&s, &db, "state").arg("queue").output().unwrap(),
        "queue",
    );
    assert!(
        listing.contains(&format!(
            "CHANGE POINT in its series: change at run {first_after} in Fake score (points)"
        )),
        "{listing}"
    );
    assert_eq!(listing.matches("CHANGE POINT").count(), 1, "{listing}");
    // serve's queue page flags it on the periodic study's newest entry.
    let mut kids = benchlab_testkit::browser::Kids(Vec::new());
    let addr = benchlab_testkit::browser::serve(&s, &mut kids, &[]);
    let (code, _, body) =
        benchlab_testkit::browser::http(addr, "GET", "/queue", &[], None).unwrap();
    let page = String::from_utf8_lossy(&body);
    assert_eq!(code, 200, "{page}");
    let newest = store
        .queue_entries()
        .unwrap()
        .iter()
        .map(|e| e.id)
        .max()
        .unwrap();
    assert!(
        page.contains(&format!(
            "<strong class=\"change\" id=\"change-{newest}\">change point: change at run {first_after} in Fake score (points)"
        )),
        "{page}"
    );
    assert!(
        page.contains(&format!("id=\"state-{newest}\">queued<")),
        "{page}"
    );
    assert_eq!(page.matches("class=\"change\"").count(), 1, "{page}");
}

/// Starts a plain `benchlab run` of `study` (standard error to `log`)
/// and waits until it holds a host; returns it with its holder name.
fn holding_run(
    s: &Scratch,
    db: &str,
    store: &Store,
    state: &str,
    study: &std::path::Path,
    log: &str,
) -> (Child, String) {
    let run = benchlab(s, db, state)
        .arg("run")
        .arg(study)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(s.path(log)).unwrap())
        .spawn()
        .unwrap();
    let by_hand = format!("run:{}:{}", hostname(), run.id());
    wait_for(
        &format!("the run of {} holds no host", study.display()),
        Duration::from_secs(60),
        || {
            store
                .host_holds()
                .unwrap()
                .iter()
                .any(|h| h.worker == by_hand)
        },
    );
    (run, by_hand)
}

/// Waits until `ready` holds, or fails saying `what` after `bound`.
fn wait_for(what: &str, bound: Duration, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < bound, "{what} after {bound:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A plain `benchlab run` and the workers lease hosts from one table: a
/// plain run waits for a host a worker's run holds, naming that run,
/// and a worker waits for a host a plain run holds, saying which.
fn a_plain_run_and_a_worker_share_no_host(s: &Scratch, db: &str) {
    let store = Store::open_db(db).unwrap();
    let held = s.study("held.toml", &study("lab-held", 0.3));
    ok(
        benchlab(s, db, "state-submit")
            .arg("submit")
            .arg(&held)
            .output()
            .unwrap(),
        "submit",
    );
    let holder = worker(s, db, "holder", "3");
    wait_for("the worker holds no host", Duration::from_secs(60), || {
        !store.host_holds().unwrap().is_empty()
    });
    // The plain run wants the same host (this machine): it waits, saying
    // once for which entry, study and worker, and runs after it.
    let other = s.study("other.toml", &study("lab-other", 0.0));
    let mut waiting = benchlab(s, db, "state-plain")
        .arg("run")
        .arg(&other)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(s.path("other.log")).unwrap())
        .spawn()
        .unwrap();
    let other_by_hand = format!("run:{}:{}", hostname(), waiting.id());
    wait_for(
        "the plain run never waited",
        Duration::from_secs(60),
        || !waits(s, "other.log").is_empty(),
    );
    assert!(
        store
            .runs()
            .unwrap()
            .iter()
            .all(|r| r.study_name == "lab-held"),
        "the waiting run ran"
    );
    wait_ok(holder, s, "holder", Duration::from_secs(120));
    let st = waiting.wait().unwrap();
    let log = std::fs::read_to_string(s.path("other.log")).unwrap();
    assert!(st.success(), "{log}");
    let said = waits(s, "other.log");
    assert_eq!(said.len(), 1, "{log}");
    assert!(
        said[0].contains("waiting for host `sut` (local@")
            && said[0].contains(
                "it is in another run, entry 1 of the queue (study `lab-held`), run by worker holder"
            ),
        "{log}"
    );
    // Now a plain run holds the host, and a worker waits for it.
    let (mut plain, by_hand) = holding_run(s, db, &store, "state-plain", &held, "plain.log");
    let later = s.study("later.toml", &study("lab-later", 0.0));
    ok(
        benchlab(s, db, "state-submit")
            .arg("submit")
            .arg(&later)
            .output()
            .unwrap(),
        "submit",
    );
    let waiter = worker(s, db, "waiter", "3");
    let mut listing = String::new();
    wait_for("no wait is shown", Duration::from_secs(60), || {
        listing = ok(
            benchlab(s, db, "state-submit")
                .arg("queue")
                .output()
                .unwrap(),
            "queue",
        );
        listing.contains("waiting: waiting for host local@")
    });
    let plain_entry = store
        .queue_entries()
        .unwrap()
        .into_iter()
        .find(|e| e.by_hand)
        .expect("the plain run's entry");
    assert!(
        listing.contains(&format!(
            ": entry {}'s run holds it (worker {by_hand})",
            plain_entry.id
        )),
        "{listing}"
    );
    assert!(plain.wait().unwrap().success(), "the plain run failed");
    wait_ok(waiter, s, "waiter", Duration::from_secs(120));
    let entries = store.queue_entries().unwrap();
    assert_eq!(entries.len(), 4, "{entries:?}");
    for e in &entries {
        assert_eq!(e.status, EntryStatus::Finished, "{e:?}");
    }
    assert!(
        entries
            .iter()
            .any(|e| e.by_hand && e.worker.as_deref() == Some(by_hand.as_str())),
        "{entries:?}"
    );
    assert_eq!(store.runs().unwrap().len(), 4);
    // One host, in one run at a time: the worker's, the plain run that
    // waited for it, the next plain run's, the waiting worker's, in that
    // order.
    let by_host = assert_no_host_in_two_runs(&store);
    assert_eq!(by_host.len(), 1, "{by_host:?}");
    let order: Vec<&str> = by_host
        .values()
        .next()
        .unwrap()
        .iter()
        .map(|h| h.worker.as_str())
        .collect();
    assert_eq!(
        order,
        ["holder", other_by_hand.as_str(), by_hand.as_str(), "waiter"]
    );
    // A plain run killed on this machine holds nothing: its `--resume`
    // takes the host at once, not when the dead run's lease runs out.
    let mut doomed = benchlab(s, db, "state-plain")
        .arg("run")
        .arg(&held)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let gone = format!("run:{}:{}", hostname(), doomed.id());
    let pid = doomed.id() as i64;
    let mut run = 0;
    wait_for(
        "the plain run stored nothing",
        Duration::from_secs(60),
        || {
            let mine = store.runs().unwrap().into_iter();
            run = mine
                .filter(|r| r.controller_pid == Some(pid))
                .map(|r| r.id)
                .next()
                .unwrap_or(0);
            run > 0 && !store.samples(run).unwrap().is_empty()
        },
    );
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    let resumed = Instant::now();
    ok(
        benchlab(s, db, "state-plain")
            .args(["run", "--resume", &run.to_string()])
            .output()
            .unwrap(),
        "resume",
    );
    assert!(
        resumed.elapsed() < Duration::from_secs(25),
        "waited for the lease"
    );
    let entries = store.queue_entries().unwrap();
    let dead = entries
        .iter()
        .find(|e| e.worker.as_deref() == Some(gone.as_str()))
        .unwrap();
    assert_eq!(dead.status, EntryStatus::Failed, "{dead:?}");
    assert!(
        dead.reasons.contains("stopped renewing the lease"),
        "{dead:?}"
    );
    assert_eq!(units(&store, run).len(), 12);
    assert_no_host_in_two_runs(&store);
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn a_plain_run_and_a_worker_never_share_a_host() {
    {
        let s = Scratch::new();
        a_plain_run_and_a_worker_share_no_host(&s, &s.db().display().to_string());
    }
    if let Some(server) = server() {
        let s = Scratch::new();
        a_plain_run_and_a_worker_share_no_host(&s, &server.create_database("lab_plain"));
    }
}

/// Starts `benchlab agent --listen 127.0.0.1:0` with a key file, in
/// state directory `state`: the agent and its address.
fn loopback_agent(s: &Scratch, state: &str) -> (Child, String, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let key = s.path("lab.key");
    std::fs::write(&key, "a lab key of more than sixteen bytes\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut agent = benchlab_testkit::listening_agent(&key, Some(&s.path(state)));
    // The agent's later lines go nowhere (it logs sessions).
    std::thread::spawn(move || std::io::copy(&mut agent.stderr, &mut std::io::sink()));
    (agent.child, agent.addr, key)
}

/// The lines of `file` that say a run waits for a host.
fn waits(s: &Scratch, file: &str) -> Vec<String> {
    std::fs::read_to_string(s.path(file))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("waiting for host"))
        .map(str::to_string)
        .collect()
}

/// Issue 41 item 4: two runs on one host at once — a local run, and a
/// run whose hosts are a `benchlab agent` listening on this machine's
/// loopback address (the same machine: lab-wide name `local@MACHINE`) —
/// both complete, one after the other: the second waits for the host's
/// lease, says once for which run, and starts when it is free; the
/// stored holdings show the host in one run at a time. A third run,
/// stopped by Ctrl-C while it waits, runs nothing and leaves no entry.
#[test]
fn a_local_run_and_a_run_through_an_agent_take_turns_on_the_host() {
    let s = Scratch::new();
    let db = s.db().display().to_string();
    let store = Store::open_db(&db).unwrap();
    let (mut agent, addr, key) = loopback_agent(&s, "state-agent");
    // The local run: 12 repetitions of 0.8 s, long enough for the others
    // to come and wait.
    let local = s.study("local.toml", &study("lab-local", 0.8));
    let (mut first, by_hand) = holding_run(&s, &db, &store, "state-local", &local, "first.log");
    // Ctrl-C while waiting: nothing runs, no entry is left.
    let mut stopped = benchlab(&s, &db, "state-stopped")
        .arg("run")
        .arg(&local)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(s.path("stopped.log")).unwrap())
        .spawn()
        .unwrap();
    wait_for(
        "the stopped run never waited",
        Duration::from_secs(60),
        || !waits(&s, "stopped.log").is_empty(),
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(stopped.id() as i32, libc::SIGINT) };
    let st = stopped.wait().unwrap();
    let log = std::fs::read_to_string(s.path("stopped.log")).unwrap();
    assert!(!st.success(), "{log}");
    assert!(
        log.contains("interrupted while waiting for host `sut` (local@")
            && log.contains("nothing ran"),
        "{log}"
    );
    // The run through the agent: both its hosts are the agent.
    let remote = s.study(
        "remote.toml",
        &format!(
            "[study]\nname = \"lab-remote\"\n[defaults]\nrepetitions = 2\nquiesce_s = 0\n\
             [[host]]\nname = \"sut\"\nagent = \"{addr}\"\nkey_file = \"{k}\"\n\
             [[host]]\nname = \"generator\"\nagent = \"{addr}\"\nkey_file = \"{k}\"\n\
             [[configuration]]\nname = \"base\"\n\
             [[workload]]\nkind = \"fake\"\nsleep_s = 0.2\n",
            k = key.display(),
        ),
    );
    let second = benchlab(&s, &db, "state-remote")
        .arg("run")
        .arg(&remote)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(s.path("second.log")).unwrap())
        .spawn()
        .unwrap();
    wait_for(
        "the agent's run never waited",
        Duration::from_secs(60),
        || !waits(&s, "second.log").is_empty(),
    );
    assert!(
        first.try_wait().unwrap().is_none(),
        "the local run ended before the agent's run came: they never met"
    );
    let out = first.wait().unwrap();
    let first_log = std::fs::read_to_string(s.path("first.log")).unwrap();
    assert!(out.success(), "the local run: {first_log}");
    let out = second.wait_with_output().unwrap();
    let second_log = std::fs::read_to_string(s.path("second.log")).unwrap();
    assert!(out.status.success(), "the agent's run: {second_log}");
    let _ = agent.kill();
    let _ = agent.wait();
    // Said once, naming the host and the run that held it.
    let said = waits(&s, "second.log");
    assert_eq!(said.len(), 1, "{second_log}");
    assert!(
        said[0].contains(&format!(
            "waiting for host `sut` (local@{}): it is in another run, a plain `benchlab run` of study `lab-local` ({by_hand}, entry ",
            hostname()
        )),
        "{}",
        said[0]
    );
    // Both complete, the agent's after the local one: from the stored
    // holdings and the runs' own times.
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 2, "the stopped run ran: {runs:?}");
    assert!(runs
        .iter()
        .all(|r| r.status == benchlab_store::RunStatus::Completed));
    let by_host = assert_no_host_in_two_runs(&store);
    assert_eq!(by_host.len(), 1, "{by_host:?}");
    let holds = by_host.values().next().unwrap();
    assert_eq!(holds.len(), 2, "{holds:?}");
    assert_eq!(holds[0].worker, by_hand, "{holds:?}");
    let local_run = runs.iter().find(|r| r.study_name == "lab-local").unwrap();
    let remote_run = runs.iter().find(|r| r.study_name == "lab-remote").unwrap();
    let ended = local_run.ended_at.as_deref().unwrap();
    assert!(
        remote_run.started_at.as_str() >= ended,
        "run {} started at {} before run {} ended at {ended}",
        remote_run.id,
        remote_run.started_at,
        local_run.id
    );
    let entries = store.queue_entries().unwrap();
    assert_eq!(
        entries.len(),
        2,
        "the stopped run left an entry: {entries:?}"
    );
}

/// The whole content of the cell whose id is `id`.
fn element<'a>(page: &'a str, id: &str) -> &'a str {
    benchlab_testkit::browser::inner(page, id, "</td>")
}

/// The row index of worker `name` in serve's workers table.
fn worker_row(page: &str, name: &str) -> usize {
    (0..)
        .take_while(|i| page.contains(&format!("id=\"worker-{i}\"")))
        .find(|i| element(page, &format!("worker-name-{i}")) == name)
        .unwrap_or_else(|| panic!("no worker {name} in {page}"))
}

/// Issue 43 item 5: serve's queue page shows the workers with when the
/// store last heard of them and the entry and run each holds, and the
/// live progress of every running entry, checked against the store
/// while two real workers run two studies.
#[test]
fn serve_shows_the_workers_and_the_progress_of_running_entries() {
    let s = Scratch::new();
    let db = s.db().display().to_string();
    for name in ["lab-serve-a", "lab-serve-b"] {
        let f = s.study(&format!("{name}.toml"), &study(name, 0.4));
        ok(
            benchlab(&s, &db, "state")
                .arg("submit")
                .arg(&f)
                .output()
                .unwrap(),
            "submit",
        );
    }
    // 2 configurations × 2 sizes × 3 repetitions.
    let planned = 12;
    // A lease of 9 s: a heartbeat every 3 s, which records the run.
    let workers = [worker(&s, &db, "w1", "9"), worker(&s, &db, "w2", "9")];
    let mut kids = benchlab_testkit::browser::Kids(Vec::new());
    let addr = benchlab_testkit::browser::serve(&s, &mut kids, &[]);
    let get = || {
        let (code, _, body) =
            benchlab_testkit::browser::http(addr, "GET", "/queue", &[], None).unwrap();
        let page = String::from_utf8_lossy(&body).into_owned();
        assert_eq!(code, 200, "{page}");
        page
    };
    let store = Store::open(&s.db()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut checked = 0;
    while checked < 3 {
        assert!(
            Instant::now() < deadline,
            "no running entry with a run and a stored repetition seen 3 times: {}",
            get()
        );
        std::thread::sleep(Duration::from_millis(300));
        let running: Vec<_> = store
            .queue_entries()
            .unwrap()
            .into_iter()
            .filter(|e| e.status == EntryStatus::Running && e.run_id.is_some())
            .collect();
        let Some(e) = running.first() else { continue };
        let run = e.run_id.unwrap();
        let before = store.samples(run).unwrap().len();
        if before == 0 {
            continue;
        }
        let page = get();
        let after = store.samples(run).unwrap().len();
        let Some(worker) = store.queue_entry(e.id).unwrap().and_then(|e| e.worker) else {
            continue;
        };
        let i = worker_row(&page, &worker);
        let entry = element(&page, &format!("worker-entry-{i}"));
        if entry == "idle" {
            // It ended the entry between the store's answer and the page's.
            continue;
        }
        assert_eq!(
            entry,
            format!("<a href=\"#entry-{0}\">{0}</a>", e.id),
            "{page}"
        );
        assert!(
            page.contains(&format!(
                "<a href=\"/run/{run}\" id=\"worker-run-{i}\">{run}</a>"
            )),
            "{page}"
        );
        // Its progress: the repetitions stored when the page was drawn, of
        // the plan's.
        for id in [format!("worker-progress-{i}"), format!("progress-{}", e.id)] {
            let text = element(&page, &id);
            let done: usize = text.split(" / ").next().unwrap().parse().unwrap();
            assert!(
                text.contains(&format!(" / {planned} units (")),
                "{id}: {text}"
            );
            assert!(
                (before..=after).contains(&done),
                "{id}: {text}, the store held {before} then {after}"
            );
        }
        // Heard of within its heartbeat (3 s), with room for a loaded machine.
        let heard: f64 = element(&page, &format!("worker-heard-{i}"))
            .trim_end_matches(" s ago")
            .parse()
            .unwrap();
        assert!(heard <= 30.0, "{page}");
        checked += 1;
    }
    for (w, name) in workers.into_iter().zip(["w1", "w2"]) {
        wait_ok(w, &s, name, Duration::from_secs(180));
    }
    // Every worker that claimed is idle now, with its claims as the store
    // counts them; nothing is in progress. (Both entries may go to one
    // worker: the other, waiting for the machine's host, is forgotten once
    // the entry it waited for is claimed.)
    let page = get();
    let conn = rusqlite::Connection::open(s.db()).unwrap();
    let mut q = conn
        .prepare("SELECT worker, count(*) FROM queue_claim GROUP BY worker ORDER BY worker")
        .unwrap();
    let claims: Vec<(String, i64)> = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(claims.iter().map(|c| c.1).sum::<i64>(), 2);
    for (name, n) in &claims {
        let i = worker_row(&page, name);
        assert_eq!(
            element(&page, &format!("worker-entry-{i}")),
            "idle",
            "{page}"
        );
        assert_eq!(
            element(&page, &format!("worker-progress-{i}")),
            "",
            "{page}"
        );
        assert_eq!(element(&page, &format!("worker-claims-{i}")), n.to_string());
    }
    assert!(
        !page.contains(&format!("id=\"worker-{}\"", claims.len())),
        "only the workers that claimed: {page}"
    );
    for e in store.queue_entries().unwrap() {
        assert_eq!(e.status, EntryStatus::Finished, "{page}");
        assert_eq!(element(&page, &format!("progress-{}", e.id)), "", "{page}");
    }
}
