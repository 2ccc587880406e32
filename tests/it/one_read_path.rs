//! Issue 24: one read path. `show --format json`, `report --json` and
//! `serve`'s `report.json` are one document, for a measured, an imported
//! and a resumed run and for a comparison across runs; a store written by
//! the previous release (tests/fixtures/store-v6, made by main 66090c8)
//! migrates (`benchlab store upgrade`) and reports the same tables it did
//! then.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::time::Duration;

use benchlab_testkit::{repo, Scratch};

/// Whether every member `want` has is in `got` with the same value
/// (arrays element by element): the figures of a table as the previous
/// release printed them, to which a newer benchlab may only add members
/// (the blocks of a cell). An advantage's `comparison` (its interval and
/// verdict) is recomputed from those figures by today's statistics, whose
/// rules changed since (issue 30's drift), so it is not held to the old
/// text; the figures it is computed from are.
fn same_figures(got: &serde_json::Value, want: &serde_json::Value, at: &str) {
    use serde_json::Value as J;
    match (got, want) {
        (J::Object(g), J::Object(w)) => {
            for (k, wv) in w.iter().filter(|(k, _)| *k != "comparison") {
                let gv = g.get(k).unwrap_or_else(|| panic!("{at}.{k}: missing"));
                same_figures(gv, wv, &format!("{at}.{k}"));
            }
        }
        (J::Array(g), J::Array(w)) => {
            assert_eq!(g.len(), w.len(), "{at}: length");
            for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                same_figures(gv, wv, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(got, want, "{at}"),
    }
}

/// A copy of the fixture store in a scratch directory.
fn fixture() -> Scratch {
    let s = Scratch::new();
    std::fs::copy(repo().join("tests/fixtures/store-v6/store.db"), s.db()).expect("copy store");
    s
}

/// `benchlab serve`, killed when dropped.
struct Served(Child, SocketAddr);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(s: &Scratch) -> Served {
    let mut child = s
        .benchlab()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("BENCHLAB_SERVE_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start benchlab serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("address line");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|u| u.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("serve printed {line:?}"));
    Served(child, addr)
}

/// The body of `GET path` (status 200 required).
fn get(addr: SocketAddr, path: &str) -> String {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).expect("response");
    let text = String::from_utf8(raw).expect("utf-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
    assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}\n{body}");
    body.to_string()
}

/// `report ARGS… --json FILE`'s file.
fn report_json(s: &Scratch, args: &[&str]) -> String {
    let out = s.path("r.json");
    let mut all: Vec<&str> = vec!["report"];
    all.extend(args);
    all.extend(["--json", out.to_str().unwrap()]);
    s.run_ok(&all);
    std::fs::read_to_string(out).expect("report json")
}

/// A fake-workload run, interrupted after its first repetitions (the
/// rows of the others removed, its status set as a Ctrl-C leaves it) and
/// resumed: its id.
fn resumed_run(s: &Scratch) -> String {
    let study = s.study(
        "fake.toml",
        "[study]\nname = \"resumed\"\n[defaults]\nrepetitions = 3\nquiesce_s = 0\nduration_s = 0.05\nwarmup_s = 0\n\
         [[configuration]]\nname = \"base\"\n[[configuration]]\nname = \"better\"\nset = { value = 110 }\n\
         [[workload]]\nkind = \"fake\"\nsize = [64, 128]\nvalue = 100\n",
    );
    s.run_ok(&["run", study.to_str().unwrap()]);
    let id: i64 = {
        let db = rusqlite::Connection::open(s.db()).expect("open");
        let id: i64 = db
            .query_row("SELECT max(id) FROM run", [], |r| r.get(0))
            .expect("run id");
        let later = "SELECT s.id FROM sample s JOIN point p ON p.id = s.point_id WHERE p.run_id = ?1 AND s.repetition > 0";
        for child in ["side_result", "target_result", "histogram", "sample_note"] {
            db.execute(
                &format!("DELETE FROM {child} WHERE sample_id IN ({later})"),
                [id],
            )
            .expect("delete a repetition's rows");
        }
        let gone = db
            .execute(&format!("DELETE FROM sample WHERE id IN ({later})"), [id])
            .expect("delete");
        assert_eq!(gone, 8, "two repetitions of four points left to run");
        db.execute(
            "UPDATE run SET status = 'interrupted', ended_at = '2026-01-01T00:00:00.000Z' WHERE id = ?1",
            [id],
        )
        .expect("interrupt");
        id
    };
    s.run_ok(&["run", "--resume", &id.to_string()]);
    let events: Vec<String> = s.json(&id.to_string())["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(events.contains(&"resumed".to_string()), "{events:?}");
    id.to_string()
}

#[test]
fn show_report_and_serve_give_one_document() {
    let s = fixture();
    let resumed = resumed_run(&s);
    // Runs 1 (fs.matrix, measured), 2 (web.load, measured), 3 (imported)
    // come from the previous release; `resumed` was made here.
    let mut docs: Vec<(String, String, String)> = Vec::new();
    for run in ["1", "2", "3", resumed.as_str()] {
        let show = s.run_ok(&["show", run, "--format", "json"]);
        let report = report_json(&s, &[run]);
        docs.push((run.to_string(), show, report));
    }
    let compare = s.run_ok(&[
        "compare",
        "1",
        "2:first",
        "3:RHEL optimized",
        "--format",
        "json",
    ]);
    let compare_report = report_json(&s, &["1", "2:first", "3:RHEL optimized"]);
    let served = serve(&s);
    for (run, show, report) in &docs {
        assert_eq!(show, report, "run {run}: show and report differ");
        let page = get(served.1, &format!("/run/{run}/report.json"));
        assert_eq!(show, &page, "run {run}: show and serve differ");
        // The whole document: events and latency figures too.
        let j: serde_json::Value = serde_json::from_str(show).expect("json");
        assert!(
            !j["events"].as_array().expect("events").is_empty(),
            "run {run}"
        );
    }
    assert_eq!(compare, compare_report, "compare and report differ");
    let page = get(
        served.1,
        "/compare/report.json?c=1&c=2%3Afirst&c=3%3ARHEL%20optimized",
    );
    assert_eq!(compare, page, "compare and serve differ");
    // Every document is what docs/report.schema.json describes.
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/report.schema.json")).expect("schema"),
    )
    .expect("schema parses");
    for doc in docs.iter().map(|d| d.1.as_str()).chain([compare.as_str()]) {
        let v: serde_json::Value = serde_json::from_str(doc).expect("json");
        let errors = benchlab_testkit::schema::validate(&schema, &v);
        assert!(
            errors.is_empty(),
            "schema violations:\n{}",
            errors.join("\n")
        );
    }
}

#[test]
fn the_previous_release_store_reports_the_same_tables() {
    let s = fixture();
    s.run_ok(&["store", "upgrade"]);
    let want = |name: &str| -> serde_json::Value {
        let p = repo().join(format!("tests/fixtures/store-v6/tables-{name}.json"));
        serde_json::from_str(&std::fs::read_to_string(p).expect("snapshot")).expect("json")
    };
    for run in ["1", "2", "3"] {
        let got = s.json(run)["tables"].clone();
        same_figures(&got, &want(&format!("run-{run}")), &format!("run {run}"));
    }
    let compare: serde_json::Value = serde_json::from_str(&s.run_ok(&[
        "compare",
        "1",
        "2",
        "3:RHEL optimized",
        "--format",
        "json",
    ]))
    .expect("json");
    same_figures(&compare["tables"], &want("compare"), "the comparison");
    // Upgraded once, and marked so.
    let events = s.json("1")["events"].clone();
    let upgraded: Vec<_> = events
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "upgraded")
        .collect();
    assert_eq!(upgraded.len(), 1, "{events}");
    // The fs run's notes were resolved at the upgrade, and its byte-count
    // axes read as sizes.
    let j = s.json("1");
    let notes = j["notes"].to_string();
    assert!(notes.contains("stdio never uses O_DIRECT"), "{notes}");
    let text = s.run_ok(&["show", "1"]);
    assert!(text.contains("64KiB"), "{text}");
}

/// The loader reads a run from what it stored: brought up by a benchlab
/// whose registry has none of the store's workloads, the store still
/// reports every table as the previous release did.
#[test]
fn a_registry_without_the_workloads_still_reports_them() {
    use benchlab_report::{load, RunSelection};
    let s = fixture();
    let store = benchlab_store::Store::open(&s.db()).expect("open");
    let empty = benchlab_core::Registry::new();
    let published = |run: &benchlab_store::RunRow| {
        benchlab_report::import::figures_csv(&run.study_name, &run.study_text)
            .map(|r| serde_json::to_string(&r).expect("json"))
            .map_err(|e| e.to_string())
    };
    let upgrade = || {
        store.upgrade_runs(&benchlab_store::Resolvers {
            registry: &empty,
            published: &published,
        })
    };
    assert_eq!(upgrade().expect("upgrade"), [1, 2, 3]);
    for run in [1, 2, 3] {
        let r = load(&store, &RunSelection::Run(run)).expect("load");
        let got = serde_json::to_value(&r.tables).expect("tables");
        let want: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(
                repo().join(format!("tests/fixtures/store-v6/tables-run-{run}.json")),
            )
            .expect("snapshot"),
        )
        .expect("json");
        same_figures(&got, &want, &format!("run {run}"));
        if run < 3 {
            let upgraded = r
                .events
                .iter()
                .find(|e| e.kind == "upgraded")
                .expect("marked");
            assert!(upgraded.message.contains("lacks"), "{}", upgraded.message);
        }
    }
    // Upgraded once: the next look finds nothing to do.
    assert!(upgrade().expect("again").is_empty());
}
