//! Each seed's published figures beside a quick run of its study, through
//! the commands the study's header and docs/study-files.md show (issue 26):
//! `benchlab run` of the study cut to its smallest form that still holds
//! one published table's configurations and parameter values, `benchlab
//! import` of the seed's CSV, then the documented `benchlab compare`. Every
//! published row of the tables the quick run covers must find its measured
//! figure in the same row of the comparison: a renamed parameter, table or
//! configuration leaves the seed's figure alone in its row and fails here.
//!
//! Seed 003 and seed 004's web study have the same check in
//! tests/seeds_html.rs (their runs also feed the Chromium test).
//!
//! The cuts (the shipped studies are read as TOML and overridden here):
//! - seed 000: `out-of-box` (the documented compare's measured column),
//!   `stream` at 32 and 65507 bytes and `rr` at -m 1 and 1024, TCP and UDP,
//!   with `--quick --scale 0.01` and no quiesce pause;
//! - seed 001: `ext4 out-of-box`, `iozone` at file sizes 1–2 MiB and
//!   records 8–16 KiB, in cache and direct (Appendix D's first rows and
//!   Figure 1's two rows), its image in the test's scratch directory;
//! - seed 002: `seed-002-realtime.toml` as shipped (test bed, realtime
//!   profile, build load, CPU 1 shielded) under `load-shielded` only, with
//!   `--quick --scale 0.01` (every row of its four NIC tables);
//! - seed 004 file server: `smb1-1cpu` and `smb1-2cpu` (the seed's
//!   "Linux on 4 CPUs over 1 CPU"), 1 and 2 clients, `--quick --scale
//!   0.005`.
//!
//! Seed 002's runs alone (`testkit::alone()`): it applies a realtime
//! profile (machine-wide settings) and shields CPU 1, which makes another
//! test's pinning to CPU 1 fail meanwhile. The others apply no profile
//! (seed 000's and 001's out-of-box configurations, seed 004's file
//! server pinned to CPUs no test shields but an alone one) and run beside
//! the rest; seed 001's makes and mounts file systems, so it holds the
//! mounts (`exclusive(&[Mounts])`).

use std::path::Path;

use benchlab_testkit::{repo, Scratch};
use serde_json::Value;

/// One line of a published CSV.
#[derive(Clone, Debug)]
struct Published {
    table: String,
    metric: String,
    fixed: String,
    row: String,
    configuration: String,
    value: f64,
}

fn published(name: &str) -> Vec<Published> {
    let path = repo().join("studies/published").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty());
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |k: &str| {
        header
            .iter()
            .position(|h| *h == k)
            .unwrap_or_else(|| panic!("{name}: no column {k}"))
    };
    let (table, metric, fixed, row, config, value) = (
        col("table"),
        col("metric"),
        col("fixed"),
        col("row"),
        col("configuration"),
        col("value"),
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), header.len(), "{name}: {l}");
            Published {
                table: f[table].into(),
                metric: f[metric].into(),
                fixed: f[fixed].into(),
                row: f[row].into(),
                configuration: f[config].into(),
                value: f[value].parse().unwrap(),
            }
        })
        .collect()
}

/// The published rows of `column` (`RUN:CONFIGURATION` of the imported
/// run) that `covered` keeps, each looked up in `compare` (the JSON of a
/// `benchlab compare` whose last column is the measured one): its table
/// (workload, metric, fixed parameters) and row must be there, with the
/// seed's figure in its column and a measured figure in the last.
/// Returns how many matched and what did not.
fn unmatched(
    rows: &[Published],
    column: &str,
    compare: &Value,
    covered: &dyn Fn(&Published) -> bool,
) -> (usize, Vec<String>) {
    let (_, config) = column.split_once(':').unwrap();
    let mut matched = 0;
    let mut missing = Vec::new();
    for p in rows
        .iter()
        .filter(|p| p.configuration == config && covered(p))
    {
        let what = format!("{} {} [{}] row {}", p.table, p.metric, p.fixed, p.row);
        let Some(t) = compare["tables"].as_array().unwrap().iter().find(|t| {
            t["workload"] == p.table.as_str()
                && t["metric"] == p.metric.as_str()
                && t["fixed"].as_str().unwrap_or("") == p.fixed
        }) else {
            missing.push(format!("{what}: no such table"));
            continue;
        };
        let columns = t["columns"].as_array().unwrap();
        let Some(i) = columns.iter().position(|c| {
            c.as_str()
                .is_some_and(|c| c.starts_with(&format!("{column} (published")))
        }) else {
            missing.push(format!("{what}: no column {column} in {columns:?}"));
            continue;
        };
        let Some(r) = t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["label"] == p.row.as_str())
        else {
            missing.push(format!("{what}: no such row"));
            continue;
        };
        let cells = r["cells"].as_array().unwrap();
        if cells[i]["value"].as_f64() != Some(p.value) {
            missing.push(format!("{what}: the seed's {} is not in {r}", p.value));
        } else if !cells[cells.len() - 1]["value"]
            .as_f64()
            .is_some_and(f64::is_finite)
        {
            missing.push(format!("{what}: no measured figure beside the seed's: {r}"));
        } else {
            matched += 1;
        }
    }
    (matched, missing)
}

/// Every covered row matched (at least `least` of them); and the check
/// can fail: a table whose fixed parameter was renamed, or a row without
/// its measured figure, is reported.
fn assert_matched(
    rows: &[Published],
    column: &str,
    compare: &Value,
    covered: &dyn Fn(&Published) -> bool,
    least: usize,
) {
    let (matched, missing) = unmatched(rows, column, compare, covered);
    assert!(missing.is_empty(), "{column}: {missing:#?}");
    assert!(matched >= least, "{column}: only {matched} rows matched");

    let first = rows
        .iter()
        .find(|p| p.configuration == column.split_once(':').unwrap().1 && covered(p))
        .unwrap();
    let mut renamed = compare.clone();
    for t in renamed["tables"].as_array_mut().unwrap() {
        if t["workload"] == first.table.as_str() && t["metric"] == first.metric.as_str() {
            t["fixed"] = format!("renamed {}", first.fixed).into();
        }
    }
    let (_, missing) = unmatched(rows, column, &renamed, covered);
    assert!(
        missing.iter().any(|m| m.contains("no such table")),
        "a renamed parameter went unnoticed"
    );
    let mut orphan = compare.clone();
    for t in orphan["tables"].as_array_mut().unwrap() {
        if t["workload"] == first.table.as_str()
            && t["metric"] == first.metric.as_str()
            && t["fixed"].as_str().unwrap_or("") == first.fixed
        {
            for r in t["rows"].as_array_mut().unwrap() {
                if r["label"] == first.row.as_str() {
                    let cells = r["cells"].as_array_mut().unwrap();
                    *cells.last_mut().unwrap() = Value::Null;
                }
            }
        }
    }
    let (_, missing) = unmatched(rows, column, &orphan, covered);
    assert!(
        missing.iter().any(|m| m.contains("no measured figure")),
        "a published row without its measured figure went unnoticed"
    );
}

/// A shipped study as TOML.
fn study(name: &str) -> toml::Table {
    std::fs::read_to_string(repo().join("studies").join(name))
        .unwrap()
        .parse()
        .unwrap()
}

/// `[[key]]` entries of `doc` named in `keep`, in that order.
fn keep(doc: &mut toml::Table, key: &str, keep: &[&str]) {
    let all = doc[key].as_array().unwrap().clone();
    let kept: Vec<toml::Value> = keep
        .iter()
        .map(|k| {
            all.iter()
                .find(|t| t["name"].as_str() == Some(k))
                .unwrap_or_else(|| panic!("no [[{key}]] `{k}`"))
                .clone()
        })
        .collect();
    doc.insert(key.into(), kept.into());
}

fn workload<'a>(doc: &'a mut toml::Table, name: &str) -> &'a mut toml::Table {
    doc["workload"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|w| w["name"].as_str() == Some(name))
        .unwrap()
        .as_table_mut()
        .unwrap()
}

fn set(t: &mut toml::Table, key: &str, v: toml::Value) {
    assert!(t.contains_key(key), "the study no longer sets `{key}`");
    t.insert(key.into(), v);
}

fn list<T: Into<toml::Value>>(v: Vec<T>) -> toml::Value {
    toml::Value::Array(v.into_iter().map(Into::into).collect())
}

/// `benchlab run` in `s`, with its services' scratch files in `s`.
fn run(s: &Scratch, doc: &toml::Table, extra: &[&str]) {
    let f = s.study("quick.toml", &toml::to_string(doc).unwrap());
    s.run_study(&f, extra);
}

/// The documented compare: shown in the study's header and in
/// docs/study-files.md, run as text (printed) and as JSON.
fn documented_compare(s: &Scratch, study_file: &str, columns: &[&str]) -> Value {
    let shown = columns
        .iter()
        .map(|c| match c.split_once(':') {
            Some((run, name)) if name.contains(' ') => format!("{run}:\"{name}\""),
            _ => c.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ");
    let cmd = format!("benchlab compare {shown}");
    for doc in [
        format!("studies/{study_file}"),
        "docs/study-files.md".into(),
    ] {
        let text = std::fs::read_to_string(repo().join(&doc)).unwrap();
        assert!(text.contains(&cmd), "{doc} no longer shows `{cmd}`");
    }
    let mut args = vec!["compare"];
    args.extend(columns);
    println!("{}", s.run_ok(&args));
    args.extend(["--format", "json"]);
    serde_json::from_str(&s.run_ok(&args)).unwrap()
}

fn import(s: &Scratch, csv: &str) {
    let p = repo().join("studies/published").join(csv);
    s.run_ok(&["import", p.to_str().unwrap()]);
}

#[test]
fn seed_000_published_rows_beside_a_quick_run() {
    let mut doc = study("seed-000-network.toml");
    keep(&mut doc, "configuration", &["out-of-box"]);
    keep(&mut doc, "workload", &["stream", "rr"]);
    set(
        doc["defaults"].as_table_mut().unwrap(),
        "quiesce_s",
        0.into(),
    );
    set(
        workload(&mut doc, "stream"),
        "message_size",
        list(vec![32, 65507]),
    );
    set(workload(&mut doc, "rr"), "netperf_m", list(vec![1, 1024]));
    let s = Scratch::new();
    run(&s, &doc, &["--quick", "--scale", "0.01"]);
    import(&s, "seed-000-netperf.csv");
    let j = documented_compare(
        &s,
        "seed-000-network.toml",
        &["2:Windows out-of-box", "1:out-of-box"],
    );
    let rows = published("seed-000-netperf.csv");
    let covered = |p: &Published| match p.table.as_str() {
        "stream" => ["32", "65507"].contains(&p.row.as_str()),
        "rr" => ["1", "1024"].contains(&p.row.as_str()),
        _ => false,
    };
    // Two sizes × TCP and UDP × stream and rr.
    assert_matched(&rows, "2:Windows out-of-box", &j, &covered, 8);
}

#[test]
fn seed_001_published_rows_beside_a_quick_run() {
    let _mounts = benchlab_testkit::exclusive(&[benchlab_testkit::Resource::Mounts]);
    if !Path::new("/sbin/mkfs.ext4").exists() {
        return benchlab_testkit::missing("mkfs.ext4 (Debian package e2fsprogs)");
    }
    let s = Scratch::new();
    let mut doc = study("seed-001-iozone.toml");
    keep(&mut doc, "configuration", &["ext4 out-of-box"]);
    keep(&mut doc, "workload", &["iozone"]);
    let config = doc["configuration"].as_array_mut().unwrap()[0]
        .as_table_mut()
        .unwrap();
    let target = s.path("ext4.img");
    set(
        config["set"].as_table_mut().unwrap(),
        "target",
        target.to_str().unwrap().into(),
    );
    let w = workload(&mut doc, "iozone");
    set(w, "file_size", "1MiB..2MiB".into());
    set(w, "record_size", "8KiB..16KiB".into());
    run(&s, &doc, &["--quick"]);
    assert!(!target.exists(), "the image was left behind");
    let columns = [
        "2:NTFS out-of-box",
        "2:ext4 out-of-box",
        "1:ext4 out-of-box",
    ];

    // Figure 1 (run 2): its in-cache and direct rows.
    import(&s, "seed-001-iozone.csv");
    let j = documented_compare(&s, "seed-001-iozone.toml", &columns);
    let rows = published("seed-001-iozone.csv");
    let in_matrix = |p: &Published| p.table == "iozone";
    for c in &columns[..2] {
        assert_matched(&rows, c, &j, &in_matrix, 2);
    }

    // Appendix D (run 3), the same command on its run: the cells of the
    // file and record sizes measured.
    import(&s, "seed-001-appendix-d.csv");
    let columns = [
        "3:NTFS out-of-box",
        "3:ext4 out-of-box",
        "1:ext4 out-of-box",
    ];
    let mut args = vec!["compare"];
    args.extend(columns);
    args.extend(["--format", "json"]);
    let j: Value = serde_json::from_str(&s.run_ok(&args)).unwrap();
    let rows = published("seed-001-appendix-d.csv");
    let cells = |p: &Published| {
        p.table == "iozone"
            && ["1048576", "2097152"].contains(&p.row.as_str())
            && ["record_size=8192 ", "record_size=16384 "]
                .iter()
                .any(|r| p.fixed.starts_with(r))
    };
    for c in &columns[..2] {
        // 2 file sizes × 2 records × in cache and direct.
        assert_matched(&rows, c, &j, &cells, 8);
    }
}

#[test]
fn seed_004_file_server_published_rows_beside_a_quick_run() {
    for (what, path) in [
        ("Samba (Debian package samba)", "/usr/sbin/smbd"),
        (
            "dbench's load file (Debian package dbench)",
            "/usr/share/dbench/client.txt",
        ),
    ] {
        if !Path::new(path).exists() {
            return benchlab_testkit::missing(what);
        }
    }
    let mut doc = study("seed-004-fileserver.toml");
    let kept = ["smb1-1cpu", "smb1-2cpu"];
    keep(&mut doc, "configuration", &kept);
    let compares = doc["study"]["compare"].as_array().unwrap().clone();
    let pairs: Vec<toml::Value> = compares
        .into_iter()
        .filter(|c| {
            [&c["a"], &c["b"]]
                .iter()
                .all(|n| kept.contains(&n.as_str().unwrap()))
        })
        .collect();
    assert_eq!(pairs.len(), 1, "{pairs:?}");
    doc["study"]
        .as_table_mut()
        .unwrap()
        .insert("compare".into(), pairs.into());
    set(workload(&mut doc, "netbench"), "clients", list(vec![1, 2]));
    let s = Scratch::new();
    run(&s, &doc, &["--quick", "--scale", "0.005"]);
    import(&s, "seed-004-peaks.csv");
    let j = documented_compare(
        &s,
        "seed-004-fileserver.toml",
        &["2:Phase 3", "1:smb1-1cpu"],
    );
    let rows = published("seed-004-peaks.csv");
    // The study's pair carries the seed's label; the seed's other rows
    // (NT, Windows 95 against NT clients) have no pair here.
    let covered = |p: &Published| p.table == "netbench" && p.row == "Linux on 4 CPUs over 1 CPU";
    assert_matched(&rows, "2:Phase 3", &j, &covered, 1);
    let (_, missing) = unmatched(&rows, "2:Phase 3", &j, &|p: &Published| {
        p.table == "netbench" && p.row == "NT on 4 CPUs over 1 CPU"
    });
    assert_eq!(missing.len(), 1, "NT has a measured pair? {missing:?}");
}

#[test]
fn seed_002_published_rows_beside_a_quick_run() {
    let _alone = benchlab_testkit::alone();
    // The study as shipped (its test bed, profile, load and shielding)
    // under the documented compare's one measured configuration.
    let mut doc = study("seed-002-realtime.toml");
    keep(&mut doc, "configuration", &["load-shielded"]);
    let s = Scratch::new();
    run(&s, &doc, &["--quick", "--scale", "0.01"]);
    import(&s, "seed-002-solarflare.csv");
    let columns = [
        "2:RHEL load-shielded",
        "2:RedHawk load-shielded",
        "1:load-shielded",
    ];
    let j = documented_compare(&s, "seed-002-realtime.toml", &columns);
    let rows = published("seed-002-solarflare.csv");
    // TCP and UDP: netperf's RTT/2, sfnt-pingpong's RTT/2 and jitter.
    for c in &columns[..2] {
        assert_matched(&rows, c, &j, &|_| true, 6);
    }
    // The seed's other NIC pairs, the same command on their runs.
    for (n, nic) in ["intel-x520", "realtek", "solarflare-onload"]
        .iter()
        .enumerate()
    {
        let csv = format!("seed-002-{nic}.csv");
        import(&s, &csv);
        let columns = [
            format!("{}:RHEL load-shielded", n + 3),
            format!("{}:RedHawk load-shielded", n + 3),
            "1:load-shielded".to_string(),
        ];
        let mut args = vec!["compare"];
        args.extend(columns.iter().map(String::as_str));
        args.extend(["--format", "json"]);
        let j: Value = serde_json::from_str(&s.run_ok(&args)).unwrap();
        let rows = published(&csv);
        for c in &columns[..2] {
            assert_matched(&rows, c, &j, &|_| true, 6);
        }
    }
}
