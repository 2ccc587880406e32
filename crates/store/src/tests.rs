//! The store's test suite, run against both backends: each test in
//! `both!` becomes `sqlite::NAME` (a temporary file) and `postgres::NAME`
//! (a database of its own on a real PostgreSQL 15 server that the tests
//! start on a Unix socket: `benchlab_testkit::pg`).

use super::*;
use benchlab_core::recorder::LatencyRecorder;
use benchlab_core::Value;
use benchlab_testkit::pg;

/// A fresh database of one backend, kept for the test's length.
enum Db {
    Sqlite(tempfile::TempDir),
    /// The server handle keeps the server up while the test runs.
    Postgres(#[allow(dead_code)] pg::Shared, String),
}

impl Db {
    fn sqlite() -> Db {
        Db::Sqlite(tempfile::tempdir().unwrap())
    }

    /// `None` when PostgreSQL is missing (then the test was recorded as
    /// skipped, or failed under CI).
    fn postgres(name: &str) -> Option<Db> {
        match pg::shared() {
            Ok(server) => {
                let url = server.create_database(name);
                Some(Db::Postgres(server, url))
            }
            Err(what) => {
                benchlab_testkit::missing(what);
                None
            }
        }
    }

    fn target(&self) -> Target {
        match self {
            Db::Sqlite(dir) => Target::Sqlite(dir.path().join("t.db")),
            Db::Postgres(_, url) => Target::Postgres(url.clone()),
        }
    }

    fn open(&self) -> Store {
        Store::open_target(&self.target()).unwrap()
    }
}

/// Each test runs once per backend: `fn name(db: &Db) { … }`.
macro_rules! both {
    ($(fn $name:ident($db:ident: &Db) $body:block)*) => {
        $(fn $name($db: &Db) $body)*
        mod sqlite {
            $(#[test] fn $name() { super::$name(&super::Db::sqlite()) })*
        }
        mod postgres {
            $(#[test] fn $name() {
                if let Some(db) = super::Db::postgres(stringify!($name)) {
                    super::$name(&db)
                }
            })*
        }
    };
}

fn new_run(store: &Store, name: &str) -> i64 {
    store
        .create_run(&NewRun {
            study_name: name,
            study_file: "s.toml",
            study_text: "[study]\nname='s'",
            description: "d",
            options: RunOptions {
                scale: 0.5,
                quick: true,
            },
            started_at: "2026-01-01T00:00:00.000Z",
            controller_host: "h",
        })
        .unwrap()
}

fn point(config_idx: usize, point_idx: usize) -> PointRow {
    let mut params = Params::default();
    params.set("message_size", Value::Int(1024));
    PointRow {
        id: 0,
        config_idx,
        workload_idx: 0,
        workload_name: "net.stream".into(),
        kind: "net.stream".into(),
        point_idx,
        label: "message_size=1024".into(),
        params,
    }
}

fn sample_with_histogram() -> Sample {
    let mut rec = LatencyRecorder::new(8);
    for v in [5, 6, 7, 1_000_000] {
        rec.record(v);
    }
    let mut sample = Sample::default();
    sample.metrics.insert("x".into(), 1.5);
    sample.metrics.insert("tiny".into(), 1e-300);
    sample
        .client
        .histograms
        .insert("rtt".into(), rec.histogram_data());
    sample.client.counters.insert("bytes".into(), 42);
    sample.server = Some(SideResult::default());
    sample
}

/// A run that uses every table: configurations, hosts, plan, events,
/// setting changes, services, points, samples with histograms and with
/// targets.
fn full_run(store: &mut Store) -> i64 {
    let run = new_run(store, "full");
    for i in 0..2 {
        store
            .add_configuration(
                run,
                &ConfigRow {
                    idx: i,
                    name: format!("c{i}"),
                    description: "é ü — unicode".into(),
                    spec: serde_json::json!({"profile": "p", "n": i}),
                },
            )
            .unwrap();
    }
    store
        .add_host(
            run,
            &HostRow {
                name: "local".into(),
                roles: "sut,generator".into(),
                inventory: serde_json::json!({"cpu": {"model": "x"}}),
            },
        )
        .unwrap();
    store.set_plan(run, 3, "{\"plan\":true}").unwrap();
    for k in ["started", "hosts", "completed"] {
        store
            .add_event(run, "2026-01-01T00:00:00.000Z", k, "same instant")
            .unwrap();
    }
    store
        .add_setting_changes(
            run,
            &[SettingChangeRow {
                config_idx: 1,
                host: "local".into(),
                phase: Phase::Apply,
                setting: "vm.swappiness".into(),
                before: Some("60".into()),
                after: None,
                status: ChangeStatus::Applied,
                note: "".into(),
            }],
        )
        .unwrap();
    store
        .add_service(run, 0, "web", &serde_json::json!({"version": "1.22"}))
        .unwrap();
    let p0 = store.ensure_point(run, &point(0, 0)).unwrap();
    let p1 = store.ensure_point(run, &point(1, 0)).unwrap();
    let s = sample_with_histogram();
    store
        .record_sample(p0, 0, SampleStatus::Ok, None, "a", "b", Some(&s))
        .unwrap();
    store
        .record_sample(
            p0,
            1,
            SampleStatus::Skipped,
            Some("no root"),
            "a",
            "b",
            None,
        )
        .unwrap();
    let mut t = Sample::default();
    t.metrics.insert("y".into(), 2.0);
    t.targets.insert(
        "guest1".into(),
        benchlab_core::TargetSides {
            client: s.client.clone(),
            server: None,
        },
    );
    store
        .record_sample(p1, 0, SampleStatus::Ok, None, "a", "b", Some(&t))
        .unwrap();
    store
        .add_notes(p1, 0, &["a remark".into(), "another".into()])
        .unwrap();
    store.set_published(run, "{\"tables\":[]}").unwrap();
    add_stacks(store, p0);
    store
        .set_reading(
            run,
            &Reading {
                version: READING_VERSION,
                origin: "recorded".into(),
            },
        )
        .unwrap();
    store
        .set_run_status(run, RunStatus::Completed, "2026-01-01T00:01:00.000Z")
        .unwrap();
    run
}

/// Everything the store's readers return for a run, point ids replaced by
/// their place (a copy gives points new ids).
fn everything(store: &Store, run: i64) -> serde_json::Value {
    let points = store.points(run).unwrap();
    let place = |id: i64| points.iter().position(|p| p.id == id).unwrap();
    let samples: Vec<_> = store
        .samples(run)
        .unwrap()
        .into_iter()
        .map(|mut s| {
            let sides = store.side_results(s.point_id, s.repetition).unwrap();
            let targets = store.target_results(s.point_id, s.repetition).unwrap();
            s.point_id = place(s.point_id) as i64;
            serde_json::json!({"sample": s, "sides": sides, "targets": targets})
        })
        .collect();
    let notes: Vec<_> = store
        .notes(run)
        .unwrap()
        .into_iter()
        .map(|n| (place(n.point_id), n.repetition, n.text))
        .collect();
    let recordings: Vec<_> = store
        .stack_recordings(run)
        .unwrap()
        .into_iter()
        .map(|mut r| {
            r.point_id = place(r.point_id) as i64;
            r
        })
        .collect();
    let profiles: Vec<_> = store
        .stack_profiles(run)
        .unwrap()
        .into_iter()
        .map(|mut r| {
            r.point_id = place(r.point_id) as i64;
            r
        })
        .collect();
    let points: Vec<_> = points
        .into_iter()
        .map(|mut p| {
            p.id = 0;
            p
        })
        .collect();
    let mut done: Vec<_> = store.done_units(run).unwrap().into_iter().collect();
    done.sort();
    serde_json::json!({
        "run": store.run(run).unwrap(),
        "configurations": store.configurations(run).unwrap(),
        "hosts": store.hosts(run).unwrap(),
        "plan": store.plan(run).unwrap(),
        "events": store.events(run).unwrap(),
        "settings": store.setting_changes(run).unwrap(),
        "services": store.services(run).unwrap(),
        "notes": notes,
        "published": store.published(run).unwrap(),
        "reading": store.reading(run).unwrap(),
        "points": points,
        "samples": samples,
        "done": done,
        "stack_recordings": recordings,
        "stack_profiles": profiles,
    })
}

/// A host's recording of repetition 0 of `point` with two sides.
fn add_stacks(store: &mut Store, point_id: i64) {
    let rec = StackRecordingRow {
        point_id,
        repetition: 0,
        host: "sut".into(),
        hz: 99,
        unwind: "dwarf".into(),
        window_s: 10.0,
        samples: 1980,
        busy_samples: 1500,
        perf_cpu_s: 0.12,
        perf_window_cpu_s: 0.02,
        script_cpu_s: 0.8,
        perf_version: "perf version 6.1".into(),
        reason: None,
    };
    let side = |host: &str, side: &str, folded: &str| StackProfileRow {
        point_id,
        repetition: 0,
        host: host.into(),
        side: side.into(),
        recorded_on: "sut".into(),
        samples: 3,
        folded: folded.into(),
    };
    store
        .add_stacks(
            &rec,
            &[
                side("sut", "server", "benchlab;serve;tcp_sendmsg 3\n"),
                side(
                    "generator",
                    "client",
                    "benchlab;client_loop 2\nbenchlab;écrit 1\n",
                ),
            ],
        )
        .unwrap();
}

both! {
    fn stacks_round_trip_compressed_and_replaced(db: &Db) {
        let mut store = db.open();
        let run = new_run(&store, "s");
        let pid = store.ensure_point(run, &point(0, 0)).unwrap();
        add_stacks(&mut store, pid);
        // Again for the same repetition: replaced, not doubled.
        add_stacks(&mut store, pid);
        let recs = store.stack_recordings(run).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!((recs[0].hz, recs[0].samples, recs[0].reason.clone()), (99, 1980, None));
        let profiles = store.stack_profiles(run).unwrap();
        assert_eq!(profiles.len(), 2);
        assert_eq!(profiles[0].side, "client");
        assert_eq!(profiles[0].folded, "benchlab;client_loop 2\nbenchlab;écrit 1\n");
        let stored: Vec<u8> = store
            .query("SELECT folded_z FROM stack_profile WHERE side = 'server'", &[])
            .unwrap()[0]
            .blob(0)
            .unwrap();
        assert_ne!(stored, b"benchlab;serve;tcp_sendmsg 3\n".to_vec());
    }

    fn round_trip_and_uniqueness(db: &Db) {
        let mut store = db.open();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let run = new_run(&store, "s");
        let pid = store.ensure_point(run, &point(1, 3)).unwrap();
        assert_eq!(store.ensure_point(run, &point(1, 3)).unwrap(), pid);
        let sample = sample_with_histogram();
        store
            .record_sample(pid, 0, SampleStatus::Ok, None, "a", "b", Some(&sample))
            .unwrap();
        store
            .record_sample(pid, 1, SampleStatus::Failed, Some("boom"), "a", "b", None)
            .unwrap();
        assert!(store
            .record_sample(pid, 1, SampleStatus::Ok, None, "a", "b", None)
            .is_err());
        let samples = store.samples(run).unwrap();
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].metrics["x"], 1.5);
        assert_eq!(samples[0].metrics["tiny"], 1e-300);
        assert_eq!(samples[1].reason.as_deref(), Some("boom"));
        let sides = store.side_results(pid, 0).unwrap();
        assert_eq!(sides[0], ("client".to_string(), sample.client.clone()));
        assert_eq!(sides[1].0, "server");
        let done = store.done_units(run).unwrap();
        let unit = |repetition| UnitKey {
            config: 1,
            workload: 0,
            point: 3,
            repetition,
        };
        assert!(done.contains(&unit(0)) && done.contains(&unit(1)));
        store
            .set_run_status(run, RunStatus::Interrupted, "c")
            .unwrap();
        let r = store.run(run).unwrap();
        assert_eq!(r.status, RunStatus::Interrupted);
        assert_eq!(r.ended_at.as_deref(), Some("c"));
        assert_eq!(r.controller_pid, None);
        assert_eq!(
            r.options,
            RunOptions {
                scale: 0.5,
                quick: true
            }
        );
        assert_eq!(store.integrity_check().unwrap(), "ok");
        drop(store);
        // Reopening does not migrate twice.
        let store = db.open();
        assert_eq!(store.runs().unwrap().len(), 1);
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    }

    fn every_reader_returns_what_was_written(db: &Db) {
        let mut store = db.open();
        assert_eq!(store.latest_run().unwrap(), None);
        assert!(matches!(store.run(7), Err(StoreError::NoRun(7))));
        let first = new_run(&store, "first");
        let run = full_run(&mut store);
        assert!(run > first);
        assert_eq!(store.latest_run().unwrap(), Some(run));
        let ids: Vec<i64> = store.runs().unwrap().iter().map(|r| r.id).collect();
        assert_eq!(ids, vec![run, first]);
        // Upserts replace.
        store
            .add_configuration(
                run,
                &ConfigRow {
                    idx: 1,
                    name: "c1-renamed".into(),
                    description: "".into(),
                    spec: serde_json::json!(null),
                },
            )
            .unwrap();
        let configs = store.configurations(run).unwrap();
        assert_eq!(configs.len(), 2);
        assert_eq!(configs[1].name, "c1-renamed");
        assert_eq!(configs[0].description, "é ü — unicode");
        store
            .add_host(
                run,
                &HostRow {
                    name: "local".into(),
                    roles: "sut".into(),
                    inventory: serde_json::json!({}),
                },
            )
            .unwrap();
        assert_eq!(store.hosts(run).unwrap()[0].roles, "sut");
        // The light listings agree with the full rows, run by run.
        let names = store.host_names().unwrap();
        assert_eq!(
            names[&run],
            vec![HostName {
                name: "local".into(),
                roles: "sut".into()
            }]
        );
        assert_eq!(
            names.get(&first).map_or(0, Vec::len),
            store.hosts(first).unwrap().len()
        );
        let cnames = store.configuration_names().unwrap();
        let full: Vec<String> = configs.iter().map(|c| c.name.clone()).collect();
        assert_eq!(cnames[&run], full);
        // A plan is kept, not replaced.
        store.set_plan(run, 9, "other").unwrap();
        assert_eq!(store.plan(run).unwrap().as_deref(), Some("{\"plan\":true}"));
        assert_eq!(store.plan(first).unwrap(), None);
        let kinds: Vec<String> = store.events(run).unwrap().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["started", "hosts", "completed"]);
        let changes = store.setting_changes(run).unwrap();
        assert_eq!(changes[0].before.as_deref(), Some("60"));
        assert_eq!(changes[0].after, None);
        assert_eq!(store.services(run).unwrap()[0].name, "web");
        let points = store.points(run).unwrap();
        assert_eq!(points.len(), 2);
        let targets = store.target_results(points[1].id, 0).unwrap();
        assert_eq!(targets.len(), 1);
        assert_eq!(targets[0].target, "guest1");
        assert!(store.side_results(points[0].id, 9).unwrap().is_empty());
    }

    fn a_newer_schema_is_refused(db: &Db) {
        let store = db.open();
        let newer = SCHEMA_VERSION + 1;
        match &db.target() {
            Target::Sqlite(_) => store
                .with(|c| c.exec(&format!("PRAGMA user_version = {newer}"), &[]))
                .map(|_| ())
                .unwrap(),
            Target::Postgres(_) => {
                store
                    .exec("UPDATE benchlab_schema SET version = ?1", vals![newer])
                    .unwrap();
            }
        }
        drop(store);
        match Store::open_target(&db.target()) {
            Err(StoreError::TooNew { found, known }) => {
                assert_eq!((found, known), (newer, SCHEMA_VERSION))
            }
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("a newer schema was opened"),
        }
    }

    fn migration_from_version_5_keeps_the_order_of_events(db: &Db) {
        let store = Store::open_at(&db.target(), 5).unwrap();
        assert_eq!(store.schema_version().unwrap(), 5);
        let run = new_run(&store, "old");
        for k in ["b", "a", "c"] {
            store
                .exec(
                    "INSERT INTO run_event (run_id, at, kind, message) VALUES (?1, 'same', ?2, '')",
                    vals![run, k],
                )
                .unwrap();
        }
        drop(store);
        let store = db.open();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let kinds: Vec<String> = store.events(run).unwrap().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["b", "a", "c"]);
        store.add_event(run, "later", "d", "").unwrap();
        assert_eq!(store.events(run).unwrap()[3].kind, "d");
    }

    fn concurrent_writers_lose_nothing(db: &Db) {
        drop(db.open());
        // Four controllers at once, each a connection of its own: every
        // run, point and sample arrives, with distinct ids.
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let target = db.target();
                std::thread::spawn(move || {
                    let mut store = Store::open_target(&target).unwrap();
                    let mut runs = Vec::new();
                    for r in 0..5 {
                        let run = new_run(&store, &format!("w{w}r{r}"));
                        let p = store.ensure_point(run, &point(0, 0)).unwrap();
                        for rep in 0..4 {
                            store
                                .record_sample(p, rep, SampleStatus::Ok, None, "a", "b", Some(&sample_with_histogram()))
                                .unwrap();
                        }
                        store.add_event(run, "t", "completed", "").unwrap();
                        runs.push(run);
                    }
                    runs
                })
            })
            .collect();
        let mut ids: Vec<i64> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 20);
        let store = db.open();
        assert_eq!(store.runs().unwrap().len(), 20);
        for id in ids {
            assert_eq!(store.samples(id).unwrap().len(), 4, "run {id}");
            assert_eq!(store.side_results(store.points(id).unwrap()[0].id, 3).unwrap().len(), 2);
        }
    }

    fn copy_is_exact_and_keeps_a_free_id(db: &Db) {
        let mut from = db.open();
        let run = full_run(&mut from);
        let want = everything(&from, run);
        // To each backend (and, for a store on one, within it).
        let other_sqlite = Db::sqlite();
        let mut dests = vec![other_sqlite];
        if let Some(pg) = Db::postgres(&format!("copy_dest_{}", backend_name(db))) {
            dests.push(pg);
        }
        for dest in &dests {
            let to = dest.open();
            assert_eq!(from.copy_run(run, &to).unwrap(), Copied::New(run));
            assert_eq!(everything(&to, run), want);
            // Again: already there.
            assert_eq!(from.copy_run(run, &to).unwrap(), Copied::Already(run));
            // Back, into the store it came from: also already there.
            assert_eq!(to.copy_run(run, &from).unwrap(), Copied::Already(run));
            // A store whose id is taken gives the run a new id, and the
            // next run still gets a fresh one.
            let third = Db::sqlite();
            let taken = third.open();
            for _ in 0..run {
                new_run(&taken, "other");
            }
            let Copied::New(moved) = to.copy_run(run, &taken).unwrap() else {
                panic!("not copied")
            };
            assert_eq!(moved, run + 1);
            let mut moved_all = everything(&taken, moved);
            moved_all["run"]["id"] = serde_json::json!(run);
            assert_eq!(moved_all, want);
            assert_eq!(to.integrity_check().unwrap(), "ok");
            // The id sequence moved past the copied id.
            assert!(new_run(&to, "after") > run);
        }
    }

    fn a_running_run_is_not_copied(db: &Db) {
        let from = db.open();
        let run = new_run(&from, "busy");
        let to = Db::sqlite();
        match from.copy_run(run, &to.open()) {
            Err(StoreError::Copy { run: r, why }) => {
                assert_eq!(r, run);
                assert!(why.contains("still running"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert!(to.open().runs().unwrap().is_empty());
    }

    fn a_bisection_keeps_its_rounds_and_result(db: &Db) {
        let store = db.open();
        let spec = serde_json::json!({ "versions": ["a", "b", "c"] });
        let id = store
            .create_bisection("s", &spec, "2026-01-01T00:00:00.000Z")
            .unwrap();
        let run = new_run(&store, "s");
        let round = |seq, run_id| BisectionRunRow {
            bisection_id: id,
            seq,
            step: seq,
            round: 0,
            bound: 0,
            candidate: 2 - seq,
            run_id,
        };
        store.link_bisection_run(&round(0, run)).unwrap();
        let other = new_run(&store, "s");
        store.link_bisection_run(&round(1, run)).unwrap();
        // An abandoned round's run is replaced, not added.
        store.link_bisection_run(&round(1, other)).unwrap();
        assert_eq!(
            store.bisection_runs(id).unwrap(),
            vec![round(0, run), round(1, other)]
        );
        let b = store.bisection(id).unwrap().unwrap();
        assert_eq!((b.status, b.spec, b.result), (BisectionStatus::Running, spec, None));
        let result = serde_json::json!({ "kind": "no_difference" });
        store.finish_bisection(id, "2026-01-01T00:01:00.000Z", &result).unwrap();
        let b = store.bisection(id).unwrap().unwrap();
        assert_eq!((b.status, b.result), (BisectionStatus::Finished, Some(result)));
        assert_eq!(store.bisections().unwrap().len(), 1);
        assert!(store.bisection(id + 1).unwrap().is_none());
        // The run replaced in round 1 belongs to round 0 only.
        assert_eq!(store.bisection_rounds_of_run(run).unwrap(), vec![round(0, run)]);
        assert_eq!(store.bisection_rounds_of_run(other).unwrap(), vec![round(1, other)]);
    }

    fn every_column_is_copied(db: &Db) {
        let store = db.open();
        let mut schema = columns(&store);
        schema.retain(|(t, _)| {
            t != crate::pg::VERSION_TABLE && !copy::NOT_A_RUNS.contains(&t.as_str())
        });
        let mut copied = copy::copied_columns();
        copied.sort();
        let schema: Vec<(String, Vec<String>)> = schema
            .into_iter()
            .map(|(t, cols)| {
                let mut names: Vec<String> = cols.into_iter().map(|c| c.name).collect();
                if t != "run" {
                    // Copied in the table's order after id and parent;
                    // compared as sets.
                    names.sort();
                }
                (t, names)
            })
            .collect();
        let copied: Vec<(String, Vec<String>)> = copied
            .into_iter()
            .map(|(t, mut cols)| {
                if t != "run" {
                    cols.sort();
                }
                (t, cols)
            })
            .collect();
        assert_eq!(copied, schema);
    }
}

fn backend_name(db: &Db) -> &'static str {
    match db {
        Db::Sqlite(_) => "sqlite",
        Db::Postgres(..) => "postgres",
    }
}

/// One column as the database describes it, in terms both share.
#[derive(Debug, Clone, PartialEq)]
struct Column {
    name: String,
    /// `integer`, `text`, `real` or `blob`.
    kind: String,
    not_null: bool,
    primary_key: bool,
    default: Option<String>,
}

/// Every table's columns, by table name, in column order.
fn columns(store: &Store) -> Vec<(String, Vec<Column>)> {
    let rows = match store.backend() {
        Backend::Sqlite => store
            .query(
                "SELECT m.name, p.name, p.type, p.\"notnull\", p.pk, p.dflt_value
                 FROM sqlite_master m JOIN pragma_table_info(m.name) p
                 WHERE m.type = 'table' ORDER BY m.name, p.cid",
                &[],
            )
            .unwrap(),
        Backend::Postgres => store
            .query(
                "SELECT c.table_name::text, c.column_name::text, c.data_type::text,
                        (c.is_nullable = 'NO')::int,
                        (EXISTS (SELECT 1 FROM information_schema.key_column_usage k
                                 JOIN information_schema.table_constraints tc
                                   ON tc.constraint_name = k.constraint_name AND tc.table_name = k.table_name
                                 WHERE tc.constraint_type = 'PRIMARY KEY'
                                   AND k.table_name = c.table_name AND k.column_name = c.column_name))::int,
                        c.column_default::text
                 FROM information_schema.columns c
                 WHERE c.table_schema = 'public' ORDER BY c.table_name, c.ordinal_position",
                &[],
            )
            .unwrap(),
    };
    let mut out: Vec<(String, Vec<Column>)> = Vec::new();
    for r in rows {
        let table = r.text(0).unwrap();
        let kind = match r.text(2).unwrap().to_lowercase().as_str() {
            "integer" | "bigint" => "integer",
            "text" => "text",
            "real" | "double precision" => "real",
            "blob" | "bytea" => "blob",
            other => panic!("{table}: a column of type {other}"),
        };
        let pk = r.int(4).unwrap() != 0;
        let col = Column {
            name: r.text(1).unwrap(),
            kind: kind.into(),
            // A primary key is never null, whether or not it says so
            // (SQLite's rowid alias does not).
            not_null: r.int(3).unwrap() != 0 || pk,
            primary_key: pk,
            default: r.opt_text(5).unwrap(),
        };
        match out.last_mut() {
            Some((t, cols)) if *t == table => cols.push(col),
            _ => out.push((table, vec![col])),
        }
    }
    out
}

/// The two backends' schemas match column for column: names, order,
/// kinds, nullability, primary keys, defaults.
#[test]
fn both_backends_have_the_same_schema() {
    let Some(pg_db) = Db::postgres("same_schema") else {
        return;
    };
    let sqlite = columns(&Db::sqlite().open());
    let mut postgres = columns(&pg_db.open());
    postgres.retain(|(t, _)| t != crate::pg::VERSION_TABLE);
    // PostgreSQL names its identity columns' default nowhere in
    // column_default (they are identity, not defaults): the same None.
    assert_eq!(
        sqlite.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>(),
        postgres.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>()
    );
    for ((table, s), (_, p)) in sqlite.iter().zip(&postgres) {
        assert_eq!(s.len(), p.len(), "{table}: {s:?}\n{p:?}");
        for (a, b) in s.iter().zip(p) {
            // The one default of the schema: '' (SQLite keeps its text,
            // PostgreSQL its cast).
            let norm = |d: &Option<String>| d.as_deref().map(|d| d.replace("::text", ""));
            assert_eq!(
                (
                    &a.name,
                    &a.kind,
                    a.not_null,
                    a.primary_key,
                    norm(&a.default)
                ),
                (
                    &b.name,
                    &b.kind,
                    b.not_null,
                    b.primary_key,
                    norm(&b.default)
                ),
                "{table}"
            );
        }
    }
}

/// A password in the URL reaches the server and nothing else: not the
/// store's rows, not an error message, not the store's `Display`.
#[test]
fn a_password_never_lands_in_the_store_or_a_message() {
    let server = match pg::shared() {
        Ok(server) => server,
        Err(what) => return benchlab_testkit::missing(what),
    };
    server.create_database("password_db");
    let secret = pg::password();
    let url = server.password_url("password_db");
    assert!(url.contains(&secret));
    let mut store = Store::open_db(&url).unwrap();
    full_run(&mut store);
    assert!(!store.target().to_string().contains(&secret));
    assert!(!format!("{:?}", store.target()).contains(&secret));
    drop(store);
    let dump = server.dump("password_db");
    assert!(dump.contains("vm.swappiness"), "the dump holds the run");
    assert!(!dump.contains(&secret));
    // A wrong password: refused, and the message shows neither password.
    let wrong = url.replace(&secret, "wrong-pass-xyz");
    let e = Store::open_db(&wrong)
        .err()
        .expect("a wrong password is refused")
        .to_string();
    assert!(e.contains("password authentication failed"), "{e}");
    assert!(e.contains("benchlab_pw:***@"), "{e}");
    assert!(!e.contains("wrong-pass-xyz") && !e.contains(&secret), "{e}");
}

/// No server at the socket: a clear error naming the database, at once.
#[test]
fn an_unreachable_server_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("postgres://lab:hidden@/bench?host={}", dir.path().display());
    let e = Store::open_db(&url).err().expect("no server").to_string();
    assert!(
        e.starts_with("cannot connect to postgres://lab:***@/bench?host="),
        "{e}"
    );
    assert!(!e.contains("hidden"), "{e}");
}

/// A server older than PostgreSQL 10 is refused before anything is
/// written (no such server here: the check's arithmetic).
#[test]
fn the_oldest_server_is_postgresql_10() {
    assert_eq!(MIN_SERVER_VERSION, 100_000);
    let e = StoreError::ServerVersion {
        db: "postgres://h/db".into(),
        found: "90624".into(),
        min: MIN_SERVER_VERSION,
    };
    assert_eq!(
        e.to_string(),
        "postgres://h/db runs PostgreSQL 90624 (server_version_num); the store needs 100000 or newer"
    );
}

/// `open_read_only` reads what a writer committed (even while the
/// writer keeps the database open), refuses to write, creates no
/// file, and refuses a database of another schema version.
#[test]
fn read_only_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ro.db");
    assert!(Store::open_read_only(&path).is_err(), "no file: error");
    assert!(!path.exists(), "a read-only open creates nothing");
    let writer = Store::open(&path).unwrap();
    let id = writer
        .create_run(&NewRun {
            study_name: "s",
            study_file: "s.toml",
            study_text: "",
            description: "",
            options: RunOptions::default(),
            started_at: "2026-01-01T00:00:00.000Z",
            controller_host: "h",
        })
        .unwrap();
    let ro = Store::open_read_only(&path).unwrap();
    assert_eq!(ro.runs().unwrap()[0].id, id);
    assert!(ro.add_event(id, "t", "k", "m").is_err(), "read-only");
    // The reader first: a writer that closes last checkpoints and
    // removes its WAL (one closing while a reader is still connected
    // leaves it to the next writer).
    drop(ro);
    drop(writer);
    // At rest (the writer gone, its WAL checkpointed and removed), a
    // reader leaves the file and its directory exactly as they were.
    let look = || {
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        (names, std::fs::read(&path).unwrap())
    };
    let before = look();
    assert_eq!(before.0, ["ro.db"]);
    let ro = Store::open_read_only(&path).unwrap();
    assert_eq!(ro.runs().unwrap()[0].id, id);
    assert!(ro.add_event(id, "t", "k", "m").is_err(), "read-only");
    drop(ro);
    assert!(
        look() == before,
        "a reader changed the store or its directory"
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION - 1)
        .unwrap();
    drop(conn);
    let err = Store::open_read_only(&path).err().unwrap().to_string();
    assert!(err.contains("older"), "{err}");
    assert!(err.contains("store upgrade`"), "{err}");
}
