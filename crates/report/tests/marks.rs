//! Issue 38: one function decides the emulated mark, and every format
//! carries it in every table heading that names the configuration —
//! the result tables, the monitors, the points, the differences.

use benchlab_report::document::{Block, Part};
use benchlab_report::model::{Emulated, EmulatedGuest, MonitorDifference, MonitorPoint};
use benchlab_report::{import, render, render_with, Format, Layout};

fn report() -> benchlab_report::RunReport {
    let text = format!(
        "{}\nt,higher,,size,1,2,1,metal,10\nt,higher,,size,1,2,1,tcg,5\n",
        import::HEADER
    );
    let mut r = import::figures_csv("s", &text).unwrap();
    r.tables[0].columns = vec!["metal".into(), "tcg".into()];
    r.emulated = vec![Emulated {
        configuration: "tcg".into(),
        guests: vec![EmulatedGuest {
            host: "g1".into(),
            reason: "no /dev/kvm".into(),
        }],
    }];
    let point = |c: &str| MonitorPoint {
        configuration: c.into(),
        workload: "t".into(),
        point: "size=1".into(),
        host: "sut".into(),
        repetitions: 1,
        summary: Default::default(),
        per_operation: None,
        interrupts_per_mb: None,
    };
    r.monitors.points = vec![point("metal"), point("tcg")];
    r.monitors.differences = vec![MonitorDifference {
        workload: "t".into(),
        point: "size=1".into(),
        host: "sut".into(),
        configuration: "tcg".into(),
        baseline: "metal".into(),
        what: "CPU 0 busy".into(),
        value: 90.0,
        baseline_value: 10.0,
        unit: "%".into(),
    }];
    r
}

/// Every grid of the document names `tcg` only with its mark: in its
/// heading row and in the rows' first cells (monitors, points).
#[test]
fn the_document_marks_every_heading_by_construction() {
    let doc = benchlab_report::document::build(&report());
    let mut grids = 0;
    let mut monitors = 0;
    for s in &doc.sections {
        for b in &s.blocks {
            let Block::Table(g) = b else { continue };
            grids += 1;
            let mut names: Vec<&str> = g.head.iter().map(|c| c.text.as_str()).collect();
            names.extend(
                g.rows
                    .iter()
                    .filter_map(|r| r.cells.first())
                    .map(|c| c.text.as_str()),
            );
            for n in names {
                let bare = n.split(" · ").next().unwrap_or(n);
                let bare = bare.strip_suffix(" advantage").unwrap_or(bare);
                assert_ne!(bare, "tcg", "an unmarked heading {n:?} in {:?}", s.heading);
            }
            if g.rows
                .iter()
                .any(|r| r.cells[0].text == "tcg (emulated) · size=1 · sut")
            {
                monitors += 1;
                assert_eq!(s.part, Part::Detail);
            }
        }
    }
    assert!(grids >= 3, "{grids} grids");
    assert_eq!(monitors, 1, "the monitor table, its row marked");
}

#[test]
fn every_format_carries_the_mark_in_every_table_heading() {
    let r = report();
    let verbose = Layout {
        width: 120,
        verbose: true,
    };
    let term = render_with(&r, Format::Table, verbose);
    assert!(
        term.lines().any(|l| l.contains("metal  tcg (emulated)")),
        "{term}"
    );
    assert!(term.contains("tcg (emulated) advantage"), "{term}");
    assert!(term.contains("  tcg (emulated) · size=1 · sut"), "{term}");
    assert!(
        term.contains("tcg (emulated): CPU 0 busy 90 % vs 10 % (metal)"),
        "{term}"
    );
    // The summary leaves the monitors to --verbose.
    let short = render(&r, Format::Table);
    assert!(!short.contains("System monitors"), "{short}");
    assert!(short.contains("tcg (emulated) advantage"), "{short}");

    let md = render(&r, Format::Markdown);
    assert!(
        md.contains("| size | metal | tcg (emulated) | tcg (emulated) advantage |"),
        "{md}"
    );
    assert!(md.contains("| tcg (emulated) · size=1 · sut |"), "{md}");

    let html = benchlab_report::html::render_html(&r);
    assert!(
        html.contains("<th class=\"emulated\">tcg (emulated)</th>"),
        "{html}"
    );
    assert!(
        html.contains("<th class=\"emulated\">tcg (emulated) advantage</th>"),
        "{html}"
    );
    assert!(
        html.contains("<td class=\"emulated l\">tcg (emulated) · size=1 · sut</td>"),
        "{html}"
    );
    assert!(
        html.contains("<td class=\"l\">metal · size=1 · sut</td>"),
        "{html}"
    );

    let csv = render(&r, Format::Csv);
    assert!(csv.contains(",tcg (emulated),5,"), "{csv}");
    assert!(csv.contains(",metal,10,"), "{csv}");

    let json: serde_json::Value = serde_json::from_str(&render(&r, Format::Json)).unwrap();
    assert_eq!(json["emulated"][0]["configuration"], "tcg");
}

/// Messages benchlab wrote (the order's reason, events, methodology) and
/// a host's stored roles name an emulated configuration with its mark;
/// the others, and names that only contain it, stay as they are (found
/// on a real TCG run: "the hosts (configuration `on-guest`) is costly to
/// switch", "host vm (server in on-guest)").
#[test]
fn messages_and_roles_mark_the_configurations_they_name() {
    use benchlab_report::document::marks;
    let r = report();
    assert_eq!(
        marks::message(&r, "the hosts (configuration `tcg`) is costly to switch"),
        "the hosts (configuration `tcg (emulated)`) is costly to switch"
    );
    assert_eq!(
        marks::message(
            &r,
            "vm booted for configuration `tcg2`; configuration `metal`"
        ),
        "vm booted for configuration `tcg2`; configuration `metal`"
    );
    assert_eq!(
        marks::roles(&r, "server in tcg and metal,client"),
        "server in tcg (emulated) and metal,client"
    );
    assert_eq!(marks::roles(&r, "server,client"), "server,client");
}
