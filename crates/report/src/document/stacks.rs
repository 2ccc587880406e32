//! A workload's call-stack profiles in the document: where a
//! configuration's code grew against the first one's (the "grew most"
//! table, every writer), what shrank and what sampling cost (the
//! detail), and the flame graphs (drawn: each configuration's profile of
//! each side, and each comparison's differential one).

use super::build::grid;
use super::marks;
use super::{Block, Cell, Chart, Class, Grid, GridRow, Heading, Media, Part, Section, Text};
use crate::model::RunReport;
use crate::stacks::{place, ranked, StackComparison, UNCOMPARED};

/// What the "grew most" table's figures are, under it.
pub const TABLE_NOTE: &str = "Each function's inclusive CPU time (its own and what it calls), per operation counted while sampling (per second sampled when the workload counts none), from every CPU's samples; share: of its side's samples. A function is left out when one function it calls carries 90 % or more of its change. Idle time and other processes are not compared.";

/// The sections of `workload`'s profiles (none when it has none).
pub fn sections(report: &RunReport, workload: &str) -> Vec<Section> {
    let s = &report.stacks;
    if !s.recordings.iter().any(|r| r.workload == workload) {
        return Vec::new();
    }
    let mut summary = Vec::new();
    let mut detail = Vec::new();
    for group in groups(s.comparisons.iter().filter(|c| c.workload == workload)) {
        let first = group[0];
        let what = format!(
            "{} against {} at {}",
            marks::configuration(report, &first.configuration),
            marks::configuration(report, &first.baseline),
            place(&first.workload, &first.point),
        );
        let grew = ranked(&group, true);
        summary.push(Block::Paragraph(Text::plain(format!(
            "{what}: the functions whose CPU time grew most ({}):",
            first.unit
        ))));
        if grew.is_empty() {
            summary.push(Block::Paragraph(Text::with("None grew.", &[Class::Small])));
        } else {
            summary.push(Block::Table(change_grid(report, first, &grew)));
        }
        let shrank = ranked(&group, false);
        if !shrank.is_empty() {
            detail.push(Block::Paragraph(Text::plain(format!(
                "{what}: the functions whose CPU time shrank most ({}):",
                first.unit
            ))));
            detail.push(Block::Table(change_grid(report, first, &shrank)));
        }
    }
    if !summary.is_empty() {
        summary.push(Block::Paragraph(Text::with(TABLE_NOTE, &[Class::Small])));
    }
    detail.push(Block::Table(cost_grid(report, workload)));
    let missing: Vec<Text> = s
        .recordings
        .iter()
        .filter(|r| r.workload == workload)
        .flat_map(|r| {
            r.no_profile.iter().map(move |why| {
                let mut t = Text::plain(format!("no profile: {why}"));
                t.label = format!(
                    "{} · {} on {}",
                    marks::configuration(report, &r.configuration),
                    place(&r.workload, &r.point),
                    r.host
                );
                t
            })
        })
        .collect();
    if !missing.is_empty() {
        detail.push(Block::List {
            items: missing,
            class: vec![Class::Warning],
        });
    }
    let heading = Some(Heading {
        level: 4,
        text: format!("Call stacks: {workload}"),
        aside: String::new(),
        class: Vec::new(),
    });
    let mut out = Vec::new();
    // The heading goes with the summary when there is one to show (a
    // comparison), else with the detail.
    let detail_heading = if summary.is_empty() {
        heading
    } else {
        out.push(Section {
            heading,
            part: Part::Summary,
            blocks: summary,
            media: Media::All,
        });
        None
    };
    out.push(Section {
        heading: detail_heading,
        part: Part::Detail,
        blocks: detail,
        media: Media::All,
    });
    let mut drawn = Vec::new();
    for (i, c) in s.comparisons.iter().enumerate() {
        if c.workload == workload {
            drawn.push(Block::Chart(Chart::FlameDiff {
                index: i,
                title: format!(
                    "{} against {} · {} · {} on {}: grew red, shrank blue ({})",
                    marks::configuration(report, &c.configuration),
                    marks::configuration(report, &c.baseline),
                    place(&c.workload, &c.point),
                    c.side,
                    c.host,
                    c.unit
                ),
            }));
        }
    }
    for (i, p) in s.profiles.iter().enumerate() {
        if p.workload == workload && !UNCOMPARED.contains(&p.side.as_str()) {
            drawn.push(Block::Chart(Chart::Flame {
                index: i,
                title: format!(
                    "{} · {} · {} on {} ({} samples)",
                    marks::configuration(report, &p.configuration),
                    p.place(),
                    p.side,
                    p.host,
                    p.samples
                ),
            }));
        }
    }
    if !drawn.is_empty() {
        out.push(Section {
            heading: Some(Heading {
                level: 5,
                text: format!("Flame graphs: {workload}"),
                aside: String::new(),
                class: Vec::new(),
            }),
            part: Part::Detail,
            blocks: drawn,
            media: Media::Drawn,
        });
    }
    out
}

/// The comparisons of one configuration at one point, every side.
fn groups<'a>(it: impl Iterator<Item = &'a StackComparison>) -> Vec<Vec<&'a StackComparison>> {
    let mut out: Vec<Vec<&StackComparison>> = Vec::new();
    for c in it {
        match out
            .iter_mut()
            .find(|g| g[0].configuration == c.configuration && g[0].point == c.point)
        {
            Some(g) => g.push(c),
            None => out.push(vec![c]),
        }
    }
    out
}

/// A figure in about three significant digits.
fn fig(v: f64) -> String {
    let a = v.abs();
    let d = if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        3
    };
    format!("{v:.d$}")
}

/// The table of [`ranked`]'s rows.
fn change_grid(
    report: &RunReport,
    first: &StackComparison,
    rows: &[(&StackComparison, &benchlab_stacks::analysis::Change)],
) -> Grid {
    let a = marks::configuration(report, &first.baseline);
    let b = marks::configuration(report, &first.configuration);
    let mut g = grid(
        vec![vec![
            "function".to_string(),
            "side".to_string(),
            a.clone(),
            b.clone(),
            "change".to_string(),
            format!("share {a}"),
            format!("share {b}"),
        ]],
        true,
        true,
    );
    g.head[1].class.push(Class::Left);
    for (c, ch) in rows {
        g.rows.push(GridRow {
            cells: vec![
                Cell::with(&ch.function, vec![Class::Left]),
                Cell::with(&c.side, vec![Class::Left]),
                Cell::text(fig(ch.a)),
                Cell::text(fig(ch.b)),
                Cell::text(format!(
                    "{}{}",
                    if ch.delta > 0.0 { "+" } else { "" },
                    fig(ch.delta)
                )),
                Cell::text(format!("{:.1} %", ch.share_a_pct)),
                Cell::text(format!("{:.1} %", ch.share_b_pct)),
            ],
            class: Vec::new(),
        });
    }
    g
}

/// What sampling cost, per configuration, point and recording host.
fn cost_grid(report: &RunReport, workload: &str) -> Grid {
    let mut g = grid(
        vec![[
            "sampled",
            "repetitions",
            "Hz",
            "unwind",
            "samples",
            "busy",
            "perf record CPU s",
            "overhead",
            "perf script CPU s",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()],
        true,
        true,
    );
    for r in report
        .stacks
        .recordings
        .iter()
        .filter(|r| r.workload == workload)
    {
        let rest: Vec<&str> = [r.point.as_str(), r.host.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        let mut cells = vec![marks::configuration_row(report, &r.configuration, &rest)];
        cells.extend(
            [
                r.repetitions.to_string(),
                r.hz.to_string(),
                r.unwind.clone(),
                r.samples.to_string(),
                r.busy_samples.to_string(),
                format!("{:.3}", r.perf_window_cpu_s),
                r.overhead_pct
                    .map(|p| format!("{p:.2} %"))
                    .unwrap_or_else(|| "-".into()),
                format!("{:.2}", r.script_cpu_s),
            ]
            .into_iter()
            .map(Cell::text),
        );
        g.rows.push(GridRow {
            cells,
            class: Vec::new(),
        });
    }
    g.notes.push(Text::with(
        "Sampling: perf record -a -e cpu-clock on every CPU of each host while the point was measured (docs/stacks.md). Overhead: the CPU time perf record took inside the sampling window over the busy CPU time it sampled. perf script symbolized after the point.",
        &[Class::Small],
    ));
    g
}
