//! Seed fixtures: the published figures of seed 000 (netperf, Figures 2, 4,
//! 9 and 10) and seed 001 (IOzone, Figure 1) go through benchlab's tables
//! and Markdown renderer, and every printed "% advantage" cell and
//! "Average" row must come out as the seeds print it, to their printed
//! precision. Fixtures: `tests/fixtures/seed-00N-{figures,published}.csv`.

use std::collections::HashMap;

use benchlab_core::MatrixSummary;
use benchlab_report::{import, render, views, Format, RunReport};

/// The summary table's caption (seed 001's formula).
fn summary_title() -> String {
    views::summary_title(MatrixSummary::GeoMean, "Mean over the patterns (KiB/s)")
}

/// A cell's headline: the geometric mean over the cells.
fn headline(cells: &[f64]) -> Option<f64> {
    views::summarise(MatrixSummary::GeoMean, cells)
}

fn fixture(name: &str) -> String {
    let path = format!("{}/../../tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Markdown tables by section title: header cells and rows of cells.
fn markdown_tables(md: &str) -> HashMap<String, (Vec<String>, Vec<Vec<String>>)> {
    let mut out = HashMap::new();
    let mut title: Option<String> = None;
    let split = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    for line in md.lines() {
        // A table's title is a heading of any level.
        if let Some(t) = line
            .trim_start_matches('#')
            .strip_prefix(' ')
            .filter(|_| line.starts_with('#'))
        {
            title = Some(t.to_string());
        } else if line.starts_with('|') {
            let Some(t) = &title else { continue };
            let entry = out
                .entry(t.clone())
                .or_insert_with(|| (split(line), Vec::new()));
            if line.contains("---") || split(line) == entry.0 {
                continue;
            }
            entry.1.push(split(line));
        }
    }
    out
}

/// Checks every published cell; returns how many were checked.
///
/// `double_rounded` lists the (table, row) cells whose printed advantage
/// the seed rounded twice: first to 0.01 %, then to 0.1 %, half up (a
/// spreadsheet artifact). benchlab prints the correctly rounded figure;
/// for those cells the test checks both that and that the seed's figure is
/// exactly the double rounding of benchlab's.
fn check(seed: &str, double_rounded: &[(&str, &str)]) -> usize {
    let report = import::figures_csv(seed, &fixture(&format!("{seed}-figures.csv"))).unwrap();
    let md = render(&report, Format::Markdown);
    let tables = markdown_tables(&md);
    let mut checked = 0;
    for line in fixture(&format!("{seed}-published.csv")).lines() {
        if line.starts_with('#') || line.starts_with("table,") || line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        let (table, row, column, printed) = (f[0], f[1], f[2], f[3]);
        let (header, rows) = tables
            .get(table)
            .unwrap_or_else(|| panic!("no table {table} in\n{md}"));
        let col = header
            .iter()
            .position(|h| {
                if column == "advantage" {
                    h.ends_with(" advantage")
                } else {
                    // Imported columns are labelled as published.
                    *h == benchlab_report::document::marks::published(column)
                }
            })
            .unwrap_or_else(|| panic!("{table}: no column {column} in {header:?}"));
        let cells = rows
            .iter()
            .find(|r| r[0] == row)
            .unwrap_or_else(|| panic!("{table}: no row {row}\n{md}"));
        // The cell's figure is its first word (marks and intervals follow);
        // thousands separators are a matter of style (the seeds print
        // "1749.82%" but "8,607.41").
        let got = cells[col]
            .split_whitespace()
            .next()
            .unwrap()
            .replace(',', "");
        if double_rounded.contains(&(table, row)) {
            let t = report.tables.iter().find(|t| t.workload == table).unwrap();
            let r = t.rows.iter().find(|r| r.label == row).unwrap();
            let pct = r.advantages[0].as_ref().unwrap().pct;
            let hundredths = format!("{pct:.2}").parse::<f64>().unwrap();
            // Half up at the second decimal: add a quarter of a hundredth
            // so that binary representation cannot round x.x5 down.
            let twice = format!("{:.1}%", hundredths + 0.0025);
            assert_eq!(
                twice, printed,
                "{seed} {table} {row}: double rounding of {pct}"
            );
            assert_eq!(got, format!("{pct:.1}%"), "{seed} {table} {row}");
            assert_ne!(got, printed);
            checked += 1;
            continue;
        }
        assert_eq!(
            got,
            printed.replace(',', ""),
            "{seed} {table} row {row} column {column}: rendered `{}`",
            cells[col]
        );
        checked += 1;
    }
    checked
}

#[test]
fn seed_000_every_advantage_and_average_row() {
    // 4 figures × 2 configurations × 11 or 12 rows of advantages, and the
    // Average rows of the two latency figures (two values and the advantage,
    // for both configurations).
    assert_eq!(check("seed-000", &[]), 2 * (11 + 12 + 11 + 12) + 2 * 2 * 3);
}

#[test]
fn seed_001_figure_1_performance_deltas() {
    // 65.146 % prints 65.1 % but the seed says 65.2 % (65.15 → 65.2), and
    // 15.248 % prints 15.2 % where the seed says 15.3 % (15.25 → 15.3);
    // the other ten cells agree with single rounding.
    let twice = [
        ("ext4-vs-ntfs/out-of-box", "In cache"),
        ("xfs-vs-refs/optimized", "Direct I/O"),
    ];
    assert_eq!(check("seed-001", &twice), 12);
}

/// Seed 001's Appendix D as `fs.matrix` points: one report per file-system
/// pair and configuration (the seed's Figure 1 layout), configurations
/// `[Windows file system, Linux file system]`, one workload whose cache
/// mode is swept, every cell's `mean_kib_s` the seed's printed average
/// over the 13 tests. Fixture: `tests/fixtures/seed-001-appendix-d.csv`.
fn appendix_d_report(linux: &str, windows: &str, configuration: &str) -> RunReport {
    use benchlab_core::plan::RunOptions;
    use benchlab_core::study::Selection;
    use benchlab_core::Value;
    use benchlab_report::model::PointResult;
    use benchlab_store::{ConfigRow, RunRow, RunStatus};

    let text = fixture("seed-001-appendix-d.csv");
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        header[..4],
        ["io_method", "file_system", "configuration", "file_kb"]
    );
    let records: Vec<u64> = header[4..].iter().map(|r| r.parse().unwrap()).collect();
    let mut points = Vec::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f[2] != configuration || (f[1] != linux && f[1] != windows) {
            continue;
        }
        let file_kb: u64 = f[3].parse().unwrap();
        for (r, v) in records.iter().zip(&f[4..]) {
            if v.is_empty() {
                continue;
            }
            let (file, record) = (file_kb << 10, r << 10);
            points.push(PointResult {
                configuration: f[1].to_string(),
                workload: "iozone".into(),
                kind: "fs.matrix".into(),
                label: format!("cache={} file_size={file} record_size={record}", f[0]),
                params: [
                    ("cache".to_string(), Value::Str(f[0].into())),
                    ("file_size".to_string(), Value::Int(file as i64)),
                    ("record_size".to_string(), Value::Int(record as i64)),
                ]
                .into(),
                metrics: [("mean_kib_s".to_string(), vec![v.parse::<f64>().unwrap()])].into(),
                summaries: Default::default(),
            });
        }
    }
    let configurations = [windows, linux]
        .iter()
        .enumerate()
        .map(|(idx, n)| ConfigRow {
            idx,
            name: n.to_string(),
            description: String::new(),
            spec: serde_json::Value::Null,
        })
        .collect();
    let mut report = RunReport {
        run: RunRow {
            id: 1,
            study_name: "seed 001 appendix D".into(),
            study_file: String::new(),
            study_text: String::new(),
            description: String::new(),
            options: RunOptions {
                scale: 1.0,
                quick: false,
            },
            status: RunStatus::Completed,
            started_at: String::new(),
            ended_at: None,
            benchlab_version: String::new(),
            controller_host: String::new(),
            controller_pid: None,
        },
        configurations,
        // One figure per cell: any rule quotes it.
        selection: Selection::MedianRun,
        tables: Vec::new(),
        points,
        failures: Vec::new(),
        hosts: Vec::new(),
        repetition_rule: String::new(),
        order: String::new(),
        left_out: Vec::new(),
        control: Vec::new(),
        settings: Vec::new(),
        events: Vec::new(),
        latency: Vec::new(),
        services: Vec::new(),
        crosschecks: Vec::new(),
        series: Vec::new(),
        monitors: Default::default(),
        emulated: Vec::new(),
        design: None,
        decisions: Vec::new(),
        stacks: Default::default(),
        views: Vec::new(),
        notes: Vec::new(),
        steps: Vec::new(),
    };
    // fs.matrix's declaration: the matrix view of the per-cell means,
    // which are also its table metric.
    let plan = benchlab_report::model::WorkloadPlan {
        workload: "iozone".into(),
        kind: "fs.matrix".into(),
        views: vec![benchlab_core::ViewSpec::Matrix {
            row_param: "file_size".into(),
            col_param: "record_size".into(),
            metrics: vec!["mean_kib_s".into()],
            summary: MatrixSummary::GeoMean,
        }],
        metrics: vec![benchlab_core::resolved::MetricInfo {
            name: "mean_kib_s".into(),
            label: "Mean over the patterns (KiB/s)".into(),
            better: benchlab_core::Better::Higher,
            decimals: 0,
            combine: benchlab_core::Combine::Sum,
        }],
        byte_params: vec!["file_size".into(), "record_size".into()],
        table_metrics: vec!["mean_kib_s".into()],
    };
    let names: Vec<String> = report
        .configurations
        .iter()
        .map(|c| c.name.clone())
        .collect();
    report.tables = views::summary_tables(&[plan], &report.points, &names, report.selection);
    report
}

/// Seed 001's Figure 1 (repeated verbatim as Figure 6; Figures 2–4 chart
/// its rows) rebuilt from Appendix D with benchlab's summary: all 24
/// figures to within 1 KB/s, and all 12 "performance delta" cells.
///
/// Why 1 KB/s and not 0.5: Appendix D prints each cell rounded to 1 KB/s,
/// so the geometric mean of the printed cells is off the seed's unrounded
/// one by up to 0.5 KB/s, and Figure 1 rounds that again (3 of the 24 land
/// on the other side: out-of-cache NTFS 521,544.45 against the printed
/// 521,545, for one).
///
/// Two captions contradict the seed's own table, and the table is what
/// Appendix D rebuilds: the text under Figure 2 says the optimized ext4
/// beat NTFS by 38.4 % (table and rebuild: 33.4 %), and the text under
/// Figure 4 says XFS beat ReFS by 7.8 % with direct I/O out of the box
/// (table 6.8 %, rebuild 6.79 %).
#[test]
fn seed_001_appendix_d_rebuilds_figure_1() {
    let published = fixture("seed-001-figures.csv");
    let deltas = fixture("seed-001-published.csv");
    let method = |row: &str| match row {
        "in-cache" => "In cache",
        "out-of-cache" => "Out of cache",
        "direct" => "Direct I/O",
        other => panic!("unexpected row {other}"),
    };
    let mut values = 0;
    let mut advantages = 0;
    for (pair, linux, windows) in [
        ("ext4-vs-ntfs", "ext4", "NTFS"),
        ("xfs-vs-refs", "XFS", "ReFS"),
    ] {
        for configuration in ["out-of-box", "optimized"] {
            let report = appendix_d_report(linux, windows, configuration);
            let table_name = format!("{pair}/{configuration}");
            let [t] = report.tables.as_slice() else {
                panic!("one summary table, got {}", report.tables.len());
            };
            assert_eq!(t.title, summary_title());
            assert_eq!(t.row_param, "cache");
            assert_eq!(t.columns, [windows, linux]);
            assert_eq!(t.rows.len(), 3);
            for row in &t.rows {
                let seed_row = method(&row.label);
                for (c, name) in t.columns.iter().enumerate() {
                    let line = published
                        .lines()
                        .find(|l| {
                            l.starts_with(&format!("{table_name},"))
                                && l.contains(&format!(",{seed_row},{name},"))
                        })
                        .unwrap_or_else(|| panic!("no published {table_name} {seed_row} {name}"));
                    let printed: f64 = line.rsplit(',').next().unwrap().parse().unwrap();
                    let got = row.cells[c].as_ref().unwrap().value;
                    assert!(
                        (got - printed).abs() <= 1.0,
                        "{table_name} {seed_row} {name}: rebuilt {got}, printed {printed}"
                    );
                    values += 1;
                }
                let printed = deltas
                    .lines()
                    .find(|l| l.starts_with(&format!("{table_name},{seed_row},advantage,")))
                    .unwrap()
                    .rsplit(',')
                    .next()
                    .unwrap();
                let pct = row.advantages[0].as_ref().unwrap().pct;
                // The same two cells as from Figure 1's own inputs carry
                // the seed's double rounding (65.146 → 65.15 → 65.2,
                // 15.248 → 15.25 → 15.3).
                let ours = format!("{pct:.1}%");
                if ours != printed {
                    let hundredths = format!("{pct:.2}").parse::<f64>().unwrap();
                    assert_eq!(
                        format!("{:.1}%", hundredths + 0.0025),
                        printed,
                        "{table_name} {seed_row}: advantage {pct}"
                    );
                    assert!(
                        [
                            ("ext4-vs-ntfs/out-of-box", "In cache"),
                            ("xfs-vs-refs/optimized", "Direct I/O")
                        ]
                        .contains(&(table_name.as_str(), seed_row)),
                        "{table_name} {seed_row}: {ours} against {printed}"
                    );
                }
                advantages += 1;
            }
            // Every renderer carries the summary with its advantage column.
            let md = render(&report, Format::Markdown);
            assert!(md.contains(&summary_title()), "{md}");
            assert!(md.contains(&format!("{linux} advantage")), "{md}");
            let json: serde_json::Value =
                serde_json::from_str(&render(&report, Format::Json)).unwrap();
            assert_eq!(
                json["tables"][0]["metric"],
                views::summary_metric("mean_kib_s")
            );
            let html = benchlab_report::html::render_html(&report);
            assert!(html.contains(&benchlab_report::html::esc(&summary_title())));
        }
    }
    assert_eq!((values, advantages), (24, 12));
}

/// The formula the seed did not use, for the record: with a cell whose
/// patterns differ, the geometric mean of per-cell geometric means is
/// lower than [`headline`] of the per-cell means.
#[test]
fn seed_001_headline_is_the_geometric_mean_of_plain_means() {
    // Two cells of two patterns each: means 150 and 400, geometric means
    // √(100·200) and √(400·400).
    let means = [150.0, 400.0];
    let h = headline(&means).unwrap();
    assert!((h - (150.0f64 * 400.0).sqrt()).abs() < 1e-9);
    let geo_of_geo = ((100.0f64 * 200.0).sqrt() * 400.0).sqrt();
    // 237.8 against 244.9: 2.9 % lower.
    assert!((h - geo_of_geo) / h > 0.029, "{geo_of_geo} {h}");
    // A cell without a figure leaves no headline.
    assert_eq!(headline(&[150.0, f64::NAN]), None);
    assert_eq!(headline(&[150.0, 0.0]), None);
}

/// The shipped `studies/published/seed-000-netperf.csv` holds the same
/// figures as the seed-000 fixture, keyed to the tables of
/// `studies/seed-000-network.toml` (workload, kind, metric, protocol).
#[test]
fn shipped_seed_000_published_figures_match_the_fixture() {
    let path = format!(
        "{}/../../studies/published/seed-000-netperf.csv",
        env!("CARGO_MANIFEST_DIR")
    );
    let shipped = import::figures_csv("s", &std::fs::read_to_string(&path).unwrap()).unwrap();
    let fixture = import::figures_csv("f", &fixture("seed-000-figures.csv")).unwrap();
    let keys: Vec<(String, String, String, String)> = shipped
        .tables
        .iter()
        .map(|t| {
            (
                t.workload.clone(),
                t.kind.clone(),
                t.metric.clone(),
                t.fixed.clone(),
            )
        })
        .collect();
    let key = |w: &str, k: &str, m: &str, f: &str| (w.into(), k.into(), m.into(), f.into());
    assert_eq!(
        keys,
        [
            key("stream", "net.stream", "throughput_mbps", "protocol=tcp"),
            key("stream", "net.stream", "throughput_mbps", "protocol=udp"),
            key("rr", "net.rr", "rtt_us", "protocol=tcp"),
            key("rr", "net.rr", "rtt_us", "protocol=udp"),
        ]
    );
    let mut checked = 0;
    for ft in &fixture.tables {
        // `tcp-rr/optimized` → the shipped table of TCP RR, columns
        // `Windows optimized` and `RHEL optimized`.
        let (name, config) = ft.workload.split_once('/').unwrap();
        let (proto, kind) = name.split_once('-').unwrap();
        let st = shipped
            .tables
            .iter()
            .find(|t| t.fixed == format!("protocol={proto}") && t.workload == kind)
            .unwrap();
        for (c, col) in ft.columns.iter().enumerate() {
            let os = col.split(' ').next().unwrap();
            let sc = st
                .columns
                .iter()
                .position(|x| {
                    *x == benchlab_report::document::marks::published(&format!("{os} {config}"))
                })
                .unwrap();
            for (fr, sr) in ft.rows.iter().zip(&st.rows) {
                assert_eq!(fr.label, sr.label);
                assert_eq!(
                    fr.cells[c], sr.cells[sc],
                    "{} {col} {}",
                    ft.workload, fr.label
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 184);
}
