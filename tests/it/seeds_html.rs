//! The seeds' charts and comparisons in a real browser (issue 26): a quick
//! run of seed 003's latencytest draws its per-interval latency chart (the
//! seed's Figure 6), and a quick run of seed 004's web study prints the
//! study's pairs at the peaks (the seed's Table 1), both in the HTML
//! report as headless Chromium renders it. Seed 003's documented commands
//! (import the seed's figures, compare them with the run) run end to end.
//!
//! The runs are the shipped studies cut to their smallest form that still
//! draws the chart or prints the table, to keep the test near a minute:
//! - seed 003: its `latencytest-1-broker` workload as the file declares it
//!   (rate, TCP_NODELAY, prefetch, ack, its broker's settings), under its
//!   `guest-direct` configuration, at the first and last of its sizes, with
//!   `--quick`; the broker runs on a local host instead of the study's bed
//!   (namespaces or guests: what the chart shows does not depend on it).
//! - seed 004: `seed-004-web.toml` as shipped with `--quick --scale 0.01`
//!   and two client counts instead of ten (each line still has a peak).

use std::path::Path;

use benchlab_testkit::browser::{browser, Kids};
use benchlab_testkit::{repo, Scratch};
use serde_json::Value;

fn programs_missing() -> bool {
    for (what, path) in [
        (
            "RabbitMQ (Debian package rabbitmq-server)",
            "/usr/lib/rabbitmq/bin/rabbitmq-server",
        ),
        ("nginx (Debian package nginx)", "/usr/sbin/nginx"),
        ("apache2 (Debian package apache2)", "/usr/sbin/apache2"),
    ] {
        if !Path::new(path).exists() {
            benchlab_testkit::missing(what);
            return true;
        }
    }
    false
}

/// Seed 003's study cut to one workload, one configuration and two sizes,
/// its hosts replaced by one local host that runs the workload's broker.
fn seed_003_quick() -> String {
    let text = std::fs::read_to_string(repo().join("studies/seed-003-broker.toml")).unwrap();
    let full: toml::Table = text.parse().unwrap();
    let tables = |key: &str| -> Vec<toml::Table> {
        full.get(key)
            .and_then(|v| v.as_array())
            .unwrap_or_else(|| panic!("seed 003 has no [[{key}]]"))
            .iter()
            .map(|t| t.as_table().unwrap().clone())
            .collect()
    };
    let named = |key: &str, name: &str| {
        tables(key)
            .into_iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some(name))
            .unwrap_or_else(|| panic!("seed 003 has no [[{key}]] `{name}`"))
    };
    let mut workload = named("workload", "latencytest-1-broker");
    let sizes = workload["size"].as_array().unwrap().clone();
    workload.insert(
        "size".into(),
        toml::Value::Array(vec![sizes[0].clone(), sizes[sizes.len() - 1].clone()]),
    );
    let service_name = workload["service"].as_str().unwrap().to_string();
    let mut service = named("service", &service_name);
    service.insert("host".into(), "broker".into());
    let mut config = named("configuration", "guest-direct");
    config.remove("hosts");
    let mut host = toml::Table::new();
    host.insert("name".into(), "broker".into());
    host.insert("local".into(), true.into());
    let mut study = full["study"].as_table().unwrap().clone();
    study.remove("step");
    let mut doc = toml::Table::new();
    doc.insert("study".into(), study.into());
    doc.insert("defaults".into(), full["defaults"].clone());
    let list = |t: toml::Table| toml::Value::Array(vec![t.into()]);
    doc.insert("configuration".into(), list(config));
    doc.insert("host".into(), list(host));
    doc.insert("service".into(), list(service));
    doc.insert("workload".into(), list(workload));
    toml::to_string(&doc).unwrap()
}

/// Seed 004's web study with two client counts.
fn seed_004_quick() -> String {
    let text = std::fs::read_to_string(repo().join("studies/seed-004-web.toml")).unwrap();
    let from = "clients = [2, 16, 32, 48, 64, 96, 128, 160, 192, 240]";
    assert!(text.contains(from), "seed-004-web.toml's clients changed");
    text.replacen(from, "clients = [2, 32]", 1)
}

/// `benchlab run` in `s`, with its services' scratch files in `s`.
fn run(s: &Scratch, study: &Path, extra: &[&str]) {
    s.run_study(study, extra);
}

/// Seed 003's documented commands (docs/study-files.md): the seed's
/// figures imported as run 2 and compared with the quick run's `guest-direct`;
/// every published latencytest row of the sizes the run measured finds its
/// measured figure in the same row.
fn seed_003_documented_compare(s: &Scratch) {
    s.run_ok(&[
        "import",
        repo()
            .join("studies/published/seed-003-broker.csv")
            .to_str()
            .unwrap(),
    ]);
    let docs = std::fs::read_to_string(repo().join("docs/study-files.md")).unwrap();
    let cmd = "benchlab compare 2:\"KVM PCI passthrough\" 1:guest-direct";
    assert!(
        docs.contains(cmd),
        "docs/study-files.md no longer shows `{cmd}`"
    );
    let text = s.run_ok(&["compare", "2:KVM PCI passthrough", "1:guest-direct"]);
    println!("{text}");
    let j: Value = serde_json::from_str(&s.run_ok(&[
        "compare",
        "2:KVM PCI passthrough",
        "1:guest-direct",
        "--format",
        "json",
    ]))
    .unwrap();
    let mut matched = 0;
    for t in j["tables"].as_array().unwrap() {
        if t["workload"] != "latencytest-1-broker" {
            continue;
        }
        for r in t["rows"].as_array().unwrap() {
            let cells = r["cells"].as_array().unwrap();
            let label = r["label"].as_str().unwrap();
            if ["16", "1024"].contains(&label) && !cells[0].is_null() {
                assert!(
                    !cells[1].is_null(),
                    "{} {}: the seed's figure has no measured one beside it: {r}",
                    t["metric"],
                    label
                );
                matched += 1;
            }
        }
    }
    assert!(matched >= 2, "{matched} published rows matched: {j}");
}

#[test]
fn seed_003_latency_chart_and_seed_004_pairs_in_chromium() {
    if programs_missing() {
        return;
    }
    let mut kids = Kids(Vec::new());
    let shots = Scratch::new();
    let Some(web) = browser(&mut kids, &shots.path("profile"), &shots.path("dl")) else {
        return benchlab_testkit::missing(
            "chromium and chromedriver (Debian's chromium, chromium-driver)",
        );
    };

    // Seed 003: the chart of each point's per-interval means.
    let s3 = Scratch::new();
    let f = s3.study("seed-003-quick.toml", &seed_003_quick());
    run(&s3, &f, &["--quick"]);
    let html3 = s3.path("seed-003.html");
    s3.run_ok(&["report", "1", "--html", html3.to_str().unwrap()]);
    let points = s3.json("1")["points"].as_array().unwrap().clone();
    assert_eq!(points.len(), 2, "two sizes");
    web.open(&format!("file://{}", html3.display()));
    web.find("svg.chart.series");
    let charts = web.script(
        "return Array.from(document.querySelectorAll('svg.chart.series')).map(function(s){
           return {label: s.getAttribute('aria-label'),
             lines: Array.from(s.querySelectorAll('g.data path.mean')).map(function(p){
               var b = p.getBBox();
               return {title: p.querySelector('title').textContent,
                       vertices: (p.getAttribute('d').match(/[ML]/g) || []).length,
                       width: b.width, height: b.height};
             }),
             bands: s.querySelectorAll('g.data path.band').length};
         });",
    );
    // The monitors draw each host's CPUs too; the latency series is the
    // one under test.
    let charts: Vec<&serde_json::Value> = charts
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            !c["label"]
                .as_str()
                .unwrap_or("")
                .contains("CPU busy per CPU")
        })
        .collect();
    assert_eq!(charts.len(), 1, "one chart per configuration: {charts:?}");
    let chart = charts[0];
    assert!(
        chart["label"]
            .as_str()
            .unwrap()
            .starts_with("latencytest-1-broker · guest-direct"),
        "{chart}"
    );
    let lines = chart["lines"].as_array().unwrap();
    assert_eq!(lines.len(), points.len(), "a line per point: {chart}");
    assert!(chart["bands"].as_u64().unwrap() >= 1, "{chart}");
    for p in &points {
        let label = p["label"].as_str().unwrap();
        let line = lines
            .iter()
            .find(|l| {
                l["title"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{label}:"))
            })
            .unwrap_or_else(|| panic!("no line for {label}: {chart}"));
        // As many vertices as the point had intervals (none empty at
        // 1000 msg/s), and the line's mean is latencytest's figure.
        let intervals = (p["params"]["duration_s"].as_f64().unwrap()
            / p["params"]["interval_s"].as_f64().unwrap())
        .round() as u64;
        assert_eq!(line["vertices"].as_u64().unwrap(), intervals, "{line}");
        assert!(line["width"].as_f64().unwrap() > 100.0, "{line}");
        let mean = p["metrics"]["latency_mean_ms"][0].as_f64().unwrap();
        assert!(
            line["title"]
                .as_str()
                .unwrap()
                .contains(&format!("mean {mean:.4} ms")),
            "{line} vs latency_mean_ms {mean}"
        );
    }
    // The band is each interval's spread, said so under the chart (its
    // min–max stays in the table).
    let html = std::fs::read_to_string(&html3).unwrap();
    assert!(
        html.contains("the shaded band: mean ± 1 standard deviation"),
        "the band is not described"
    );
    web.script(
        "document.querySelector('svg.chart.series').previousElementSibling.scrollIntoView();",
    );
    let shot3 = web.screenshot(shots.dir.path(), "seed-003-latency");
    seed_003_documented_compare(&s3);

    // Seed 004: the pair table, its ratios those of the lines' peaks.
    let s4 = Scratch::new();
    let f = s4.study("seed-004-web.toml", &seed_004_quick());
    run(&s4, &f, &["--quick", "--scale", "0.01"]);
    let html4 = s4.path("seed-004.html");
    s4.run_ok(&["report", "1", "--html", html4.to_str().unwrap()]);
    let points = s4.json("1")["points"].as_array().unwrap().clone();
    let peak = |config: &str| {
        points
            .iter()
            .filter(|p| p["configuration"] == config)
            .map(|p| p["summaries"]["requests_per_s"]["median"].as_f64().unwrap())
            .fold(f64::NEG_INFINITY, f64::max)
    };
    web.open(&format!("file://{}", html4.display()));
    web.find("table.pairs");
    let rows = web.script(
        "return Array.from(document.querySelectorAll('table.pairs tr')).map(function(r){
           return Array.from(r.children).map(function(c){ return c.textContent; });
         });",
    );
    let rows: Vec<Vec<String>> = serde_json::from_value(rows).unwrap();
    println!("seed 004's pair table as Chromium shows it:");
    for r in &rows {
        println!("  {}", r.join(" | "));
    }
    let declared = [
        ("Linux on 4 CPUs over 1 CPU", "apache2-2cpu", "apache2-1cpu"),
        ("NT on 4 CPUs over 1 CPU", "nginx-2cpu", "nginx-1cpu"),
        ("NT over Linux on 4 CPUs", "nginx-2cpu", "apache2-2cpu"),
        ("NT over Linux on 1 CPU", "nginx-1cpu", "apache2-1cpu"),
    ];
    assert_eq!(rows.len(), 1 + declared.len(), "{rows:?}");
    assert_eq!(rows[0][5], "A is faster than B by");
    for (label, a, b) in declared {
        let r = rows
            .iter()
            .find(|r| r[0] == label)
            .unwrap_or_else(|| panic!("no row `{label}`: {rows:?}"));
        assert_eq!((r[1].as_str(), r[2].as_str()), (a, b), "{r:?}");
        let (pa, pb) = (peak(a), peak(b));
        assert_eq!(r[5], format!("{:.2} times", pa / pb), "{label}");
        assert_eq!(r[6], format!("{:+.1} %", (pa - pb) / pb * 100.0), "{label}");
    }
    web.script("document.querySelector('h4.pairs').scrollIntoView();");
    let shot4 = web.screenshot(shots.dir.path(), "seed-004-pairs");

    // `benchlab compare` of the run's four configurations carries the
    // study's pairs under the columns' labels.
    let j: Value = serde_json::from_str(&s4.run_ok(&[
        "compare",
        "1:nginx-1cpu",
        "1:nginx-2cpu",
        "1:apache2-1cpu",
        "1:apache2-2cpu",
        "--format",
        "json",
    ]))
    .unwrap();
    let pairs = j["views"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|v| v["pairs"].as_array())
        .unwrap_or_else(|| panic!("no pairs in the comparison: {}", j["views"]));
    assert_eq!(pairs.len(), declared.len(), "{pairs:?}");
    for (label, a, b) in declared {
        let p = pairs
            .iter()
            .find(|p| p["label"] == label)
            .unwrap_or_else(|| panic!("`{label}` not carried: {pairs:?}"));
        assert_eq!(
            (&p["a"], &p["b"]),
            (
                &Value::from(format!("1:{a}")),
                &Value::from(format!("1:{b}"))
            )
        );
        let times = p["times"].as_f64().unwrap();
        assert!((times - peak(a) / peak(b)).abs() < 1e-9, "{p}");
    }

    // Seed 004's documented commands: the seed's ratios imported as run 2
    // stand beside the run's pairs of the same label; the rows without a
    // pair here (no NT server, no Phase 2 software) have no measured
    // figure.
    s4.run_ok(&[
        "import",
        repo()
            .join("studies/published/seed-004-peaks.csv")
            .to_str()
            .unwrap(),
    ]);
    let docs = std::fs::read_to_string(repo().join("docs/study-files.md")).unwrap();
    let cmd = "benchlab compare 2:\"Phase 3\" 1:nginx-1cpu";
    assert!(
        docs.contains(cmd),
        "docs/study-files.md no longer shows `{cmd}`"
    );
    println!("{}", s4.run_ok(&["compare", "2:Phase 3", "1:nginx-1cpu"]));
    let j: Value = serde_json::from_str(&s4.run_ok(&[
        "compare",
        "2:Phase 3",
        "1:nginx-1cpu",
        "--format",
        "json",
    ]))
    .unwrap();
    let mut beside = 0;
    for t in j["tables"].as_array().unwrap() {
        let metric = t["metric"].as_str().unwrap();
        if t["workload"] != "webbench" || !metric.starts_with("peak_") {
            continue;
        }
        for r in t["rows"].as_array().unwrap() {
            let label = r["label"].as_str().unwrap();
            let measured = &r["cells"][1];
            match pairs.iter().find(|p| p["label"] == label) {
                Some(p) => {
                    let want = if metric == "peak_ratio" {
                        p["times"].as_f64()
                    } else {
                        p["advantage_pct"].as_f64()
                    };
                    assert_eq!(measured["value"].as_f64(), want, "{metric} {label}: {r}");
                    beside += 1;
                }
                None => assert!(measured.is_null(), "{metric} {label}: {r}"),
            }
        }
    }
    assert_eq!(
        beside, 4,
        "each of the web study's pairs beside the seed's figure"
    );

    // Kept for a human look after the test.
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR"));
    for (shot, html) in [(&shot3, &html3), (&shot4, &html4)] {
        let name = shot.file_name().unwrap();
        std::fs::copy(shot, keep.join(name)).ok();
        std::fs::copy(html, keep.join(name).with_extension("html")).ok();
        eprintln!("screenshot: {}", keep.join(name).display());
    }
}
