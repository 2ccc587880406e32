//! [`build`]: the report model laid out as a [`Document`], every label,
//! mark and verdict decided (by [`super::marks`]).

use super::marks::{self, VerdictClass};
use super::{
    Block, Cell, Chart, Class, Document, Grid, GridRow, Heading, Media, Part, Section, Text,
};
use crate::format::{cell_text, title_of};
use crate::model::{CurveView, MatrixView, RunReport, Table, View};
use crate::views;

/// The report of `report` (a run, or a comparison of runs: its columns
/// are the compared runs) as a document.
pub fn build(report: &RunReport) -> Document {
    let mut d = Doc {
        report,
        sections: Vec::new(),
    };
    d.header();
    d.findings();
    d.decisions();
    d.control();
    d.results();
    d.crosschecks();
    d.latency();
    d.points();
    d.failures();
    d.notes();
    d.appendix_a();
    d.services();
    d.appendix_b();
    Document {
        title: report.run.study_name.clone(),
        sections: d.sections,
    }
}

struct Doc<'a> {
    report: &'a RunReport,
    sections: Vec<Section>,
}

fn heading(level: u8, text: impl Into<String>) -> Option<Heading> {
    Some(Heading {
        level,
        text: text.into(),
        aside: String::new(),
        class: Vec::new(),
    })
}

fn left(s: impl Into<String>) -> Cell {
    Cell::with(s, vec![Class::Left])
}

/// A grid from rows of text, the first its heading row; the first column
/// left-aligned where `label_left`.
pub(crate) fn grid(rows: Vec<Vec<String>>, rule: bool, label_left: bool) -> Grid {
    let mut it = rows.into_iter();
    let cell = |(i, s): (usize, String)| {
        if i == 0 && label_left {
            left(s)
        } else {
            Cell::text(s)
        }
    };
    let head: Vec<Cell> = it
        .next()
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(cell)
        .collect();
    Grid {
        detail_head: vec![None; head.len()],
        head,
        rows: it
            .map(|r| GridRow {
                cells: r.into_iter().enumerate().map(cell).collect(),
                class: Vec::new(),
            })
            .collect(),
        notes: Vec::new(),
        rule,
        class: Vec::new(),
        label_left,
    }
}

/// A grid whose every column is left-aligned text (the appendices).
fn text_grid(head: &[&str], rows: Vec<Vec<String>>) -> Grid {
    let mut g = grid(
        std::iter::once(head.iter().map(|s| s.to_string()).collect())
            .chain(rows)
            .collect(),
        true,
        true,
    );
    for c in g
        .head
        .iter_mut()
        .chain(g.rows.iter_mut().flat_map(|r| r.cells.iter_mut()))
    {
        if !c.class.contains(&Class::Left) {
            c.class.push(Class::Left);
        }
    }
    g
}

impl Doc<'_> {
    fn push(&mut self, part: Part, heading: Option<Heading>, blocks: Vec<Block>) {
        self.sections.push(Section {
            heading,
            part,
            blocks,
            media: Media::All,
        });
    }

    /// A section only some writers show ([`Section::media`]).
    fn push_for(&mut self, media: Media, part: Part, heading: Option<Heading>, blocks: Vec<Block>) {
        self.push(part, heading, blocks);
        if let Some(s) = self.sections.last_mut() {
            s.media = media;
        }
    }

    /// Configuration names in heading cells `range` of `g`, marked.
    fn mark_head(&self, g: &mut Grid, from: usize) {
        for c in g.head.iter_mut().skip(from) {
            let mut m = marks::configuration_cell(self.report, &c.text);
            m.class.extend(c.class.iter().copied());
            *c = m;
        }
    }

    fn header(&mut self) {
        let report = self.report;
        let r = &report.run;
        let mut blocks = Vec::new();
        let trial = if r.options.quick || r.options.scale != 1.0 {
            format!(
                " · trial run (scale {}{})",
                r.options.scale,
                if r.options.quick { ", quick" } else { "" }
            )
        } else {
            String::new()
        };
        blocks.push(Block::Paragraph(Text::with(
            format!(
                "Run {} · study {} · {} · {}{trial}",
                r.id,
                r.study_name,
                format!("{:?}", r.status).to_lowercase(),
                span(&r.started_at, r.ended_at.as_deref()),
            ),
            &[Class::Small],
        )));
        if !r.description.is_empty() {
            blocks.push(Block::Paragraph(Text::plain(&r.description)));
        }
        if !report.configurations.is_empty() {
            let mut g = text_grid(&["configuration", "description"], Vec::new());
            // Its two or three rows read as a list: the rule would cost
            // the summary a line.
            g.rule = false;
            for c in &report.configurations {
                let mut name = marks::configuration_cell(report, &c.name);
                name.class.push(Class::Left);
                g.rows.push(GridRow {
                    cells: vec![name, left(&c.description)],
                    class: Vec::new(),
                });
            }
            blocks.push(Block::Table(g));
        }
        for line in &report.left_out {
            blocks.push(Block::Paragraph(Text::plain(format!(
                "Part of the study: {line}."
            ))));
        }
        // How the repetitions were run: the design's line in the summary
        // (or the fixed count); its rule in words in the detail.
        let mut how = Vec::new();
        if !report.repetition_rule.is_empty() {
            let p = Block::Paragraph(Text::with(
                format!("Repetitions: {}.", report.repetition_rule),
                &[Class::Small],
            ));
            if report.design.is_some() {
                how.push(p);
            } else {
                blocks.push(p);
            }
        }
        if let Some(s) = &report.design {
            blocks.push(Block::Paragraph(Text::plain(marks::design_line(s))));
        }
        if let Some(w) = marks::control_warning(&report.decisions) {
            blocks.push(Block::Paragraph(Text::with(w, &[Class::Warning])));
        }
        // The order in the summary only where it leaves comparisons
        // without a verdict (one block each); the detail always has it.
        if !report.order.is_empty() {
            let p = Block::Paragraph(Text::with(
                format!("Order: {}.", marks::message(report, &report.order)),
                &[Class::Small],
            ));
            if crate::text::drift_unknown(report) {
                blocks.push(p);
            } else {
                how.push(p);
            }
        }
        self.push(Part::Summary, heading(1, &r.study_name), blocks);
        if !how.is_empty() {
            self.push(Part::Detail, None, how);
        }
        let mut hosts = Vec::new();
        for h in &report.hosts {
            let inv = &h.inventory;
            hosts.push(Block::Paragraph(Text::with(
                format!(
                    "host {} ({}): {}, {} logical CPUs, kernel {}",
                    h.name,
                    marks::roles(report, &h.roles),
                    inv["cpu"]["model_name"].as_str().unwrap_or("unknown CPU"),
                    inv["cpu"]["logical_cpus"].as_u64().unwrap_or(0),
                    inv["os"]["kernel_release"].as_str().unwrap_or("?")
                ),
                &[Class::Small],
            )));
        }
        if !hosts.is_empty() {
            self.push_for(Media::Terminal, Part::Detail, None, hosts);
        }
    }

    /// Headline findings from the verdicts: per table and configuration,
    /// how many rows are better, worse, equivalent within the margin or
    /// undecided (never counted as "no difference"), and what the verdicts
    /// rest on; then verdicts no table shows, per workload and metric.
    fn findings(&mut self) {
        let report = self.report;
        let mut found = Vec::new();
        let mut shown: Vec<&crate::model::Decision> = Vec::new();
        for t in &report.tables {
            for c in 1..t.columns.len() {
                let ds = marks::decisions_of(report, t, c);
                shown.extend(ds.iter().copied());
                found.extend(table_finding(report, t, c, &ds));
            }
        }
        // The A/A control's verdicts beside the real ones, and any
        // verdict no table shows.
        let rest: Vec<&crate::model::Decision> = report
            .decisions
            .iter()
            .filter(|d| d.control || !shown.iter().any(|s| std::ptr::eq(*s, *d)))
            .collect();
        let mut groups: Vec<(&str, &str, &str)> = Vec::new();
        for d in &rest {
            let k = (
                d.configuration.as_str(),
                d.workload.as_str(),
                d.metric.as_str(),
            );
            if !groups.contains(&k) {
                groups.push(k);
            }
        }
        for (cfg, w, m) in groups {
            let ds: Vec<&crate::model::Decision> = rest
                .iter()
                .copied()
                .filter(|d| {
                    (
                        d.configuration.as_str(),
                        d.workload.as_str(),
                        d.metric.as_str(),
                    ) == (cfg, w, m)
                })
                .collect();
            let cmps: Vec<(Option<benchlab_core::decision::Decided>, f64, bool)> = ds
                .iter()
                .map(|d| (Some(d.verdict), d.advantage_pct.unwrap_or(f64::NAN), false))
                .collect();
            let control = ds.iter().any(|d| d.control);
            let who = if control {
                marks::control(self.base())
            } else {
                marks::configuration(report, cfg)
            };
            found.push(Finding {
                pair: format!("{who} vs {}", marks::configuration(report, self.base())),
                text: format!(
                    "{w} · {m}: {} of {}{}.",
                    marks::verdict_counts(&cmps, &ds),
                    ds.len(),
                    marks::repetitions(&ds)
                ),
                emulated: (!control && marks::is_emulated(report, cfg))
                    || marks::is_emulated(report, self.base()),
            });
        }
        // One pair compared throughout (two configurations, no control):
        // it is said once, in the heading, not before every finding.
        let pair = found
            .first()
            .map(|f| f.pair.clone())
            .filter(|p| found.iter().all(|f| f.pair == *p));
        let mut items: Vec<Text> = found
            .iter()
            .map(|f| Text {
                text: match pair {
                    Some(_) => f.text.clone(),
                    None => format!("{} — {}", f.pair, f.text),
                },
                label: String::new(),
                class: if f.emulated {
                    vec![Class::Emulated]
                } else {
                    Vec::new()
                },
            })
            .collect();
        for v in &report.views {
            let View::Curve(c) = v else { continue };
            for f in &c.findings {
                items.push(Text::plain(format!(
                    "{} — {}",
                    views::caption(&c.workload, &c.fixed),
                    marks::finding(report, c, f)
                )));
            }
        }
        if items.is_empty() {
            items.push(Text::plain("One configuration only: nothing to compare."));
        }
        let mut head = heading(2, "Headline findings");
        if let (Some(h), Some(p)) = (head.as_mut(), pair) {
            h.text = format!("Headline findings: {p}");
            if found.iter().any(|f| f.emulated) {
                h.class.push(Class::Emulated);
            }
        }
        self.push(
            Part::Summary,
            head,
            vec![Block::List {
                items,
                class: vec![Class::Findings],
            }],
        );
    }

    /// The first configuration's name (the B of every comparison).
    fn base(&self) -> &str {
        self.report
            .configurations
            .first()
            .map(|c| c.name.as_str())
            .unwrap_or("-")
    }

    /// The until-decided design's verdicts, one row per comparison, the
    /// A/A control's beside the real ones.
    fn decisions(&mut self) {
        let report = self.report;
        if report.decisions.is_empty() {
            return;
        }
        let mut g = text_grid(
            &[
                "comparison",
                "point · metric",
                "verdict",
                "advantage [interval]",
                "margin",
                "reps",
                "MDE",
            ],
            Vec::new(),
        );
        let base = report
            .configurations
            .first()
            .map(|c| c.name.as_str())
            .unwrap_or("-");
        for d in &report.decisions {
            let who = if d.control {
                marks::control(base)
            } else {
                format!(
                    "{} vs {base}",
                    marks::configuration(report, &d.configuration)
                )
            };
            let mut verdict = marks::decision_cell(d);
            verdict.detail = None;
            verdict.inline.clear();
            let advantage = match (d.advantage_pct, d.ci_lo_pct.zip(d.ci_hi_pct)) {
                (Some(a), Some((lo, hi))) => format!("{a:+.2}% [{lo:+.2}%, {hi:+.2}%]"),
                (Some(a), None) => format!("{a:+.2}%"),
                _ => "-".into(),
            };
            g.rows.push(GridRow {
                cells: vec![
                    left(who),
                    left(format!("{} · {} · {}", d.workload, d.point, d.metric)),
                    verdict,
                    Cell::text(advantage),
                    Cell::text(format!("±{}%", d.margin_pct)),
                    Cell::text(d.repetitions.to_string()),
                    Cell::text(marks::detectable(d)),
                ],
                class: Vec::new(),
            });
        }
        g.notes.push(Text::with(
            format!(
                "reps: successful repetitions per side the verdict rests on; the interval is the sequential rule's ({}); MDE: for an undecided comparison, the smallest difference its data so far would detect at 80 % power.",
                if report.design.is_some() {
                    "valid under its look after every round"
                } else {
                    "a fixed design's: one look at the repetitions run"
                }
            ),
            &[Class::Legend],
        ));
        let mut blocks = Vec::new();
        if let Some(w) = marks::control_warning(&report.decisions) {
            blocks.push(Block::Paragraph(Text::with(w, &[Class::Warning])));
        }
        blocks.push(Block::Table(g));
        // Every comparison, one row each: the findings count them for
        // the terminal's summary; `--verbose` and the files list them.
        self.push(Part::Detail, heading(2, "Every verdict"), blocks);
    }

    /// The A/A control: the machine against itself.
    fn control(&mut self) {
        let Some(control) = crate::text::control(self.report) else {
            return;
        };
        let mut g = text_grid(&["table · row", "advantage"], Vec::new());
        g.head[1].class.clear();
        for (line, c) in control.rows.iter().zip(&self.report.control) {
            g.rows.push(GridRow {
                cells: vec![left(&line.label), marks::advantage_cell(&c.advantage, 2)],
                class: Vec::new(),
            });
        }
        self.push(
            Part::Summary,
            heading(2, "The machine against itself (A/A control)"),
            vec![
                Block::Paragraph(Text::plain(&control.summary)),
                Block::Table(g),
            ],
        );
    }

    /// The legend, then per workload (in order of appearance) its tables,
    /// views, time series and monitors.
    fn results(&mut self) {
        let report = self.report;
        if report.tables.is_empty() && report.views.is_empty() {
            return;
        }
        let mut legend = vec![Block::Paragraph(Text::with(
            crate::text::legend(report).trim_end(),
            &[Class::Legend],
        ))];
        if let Some(note) = crate::import::published_note(report) {
            legend.push(Block::Paragraph(Text::with(note, &[Class::Legend])));
        }
        for line in marks::emulated_footnotes(report) {
            legend.push(Block::Paragraph(Text::with(
                line,
                &[Class::Legend, Class::Emulated],
            )));
        }
        self.push(Part::Summary, heading(2, "Results"), legend);
        // What the files show beside a figure (the terminal shows
        // neither n nor intervals in its cells).
        self.push(
            Part::Detail,
            None,
            vec![Block::Paragraph(Text::with(
                "n: the repetitions behind a figure; [a, b] after an advantage (the HTML's \"95% CI\" column): Fieller's 95% interval of the ratio of means, in percent, which describes the spread; the verdict is the sequential rule's (its interval under \"Every verdict\"). In the HTML, green: better, red: worse (a verdict, not just a sign).",
                &[Class::Legend],
            ))],
        );
        let mut workloads: Vec<(&str, &str)> = Vec::new();
        for (w, k) in report
            .tables
            .iter()
            .map(|t| (t.workload.as_str(), t.kind.as_str()))
            .chain(report.views.iter().map(|v| match v {
                View::Matrix(m) => (m.workload.as_str(), m.kind.as_str()),
                View::Curve(c) => (c.workload.as_str(), c.kind.as_str()),
            }))
            .chain(
                report
                    .series
                    .iter()
                    .map(|s| (s.workload.as_str(), s.kind.as_str())),
            )
        {
            if !workloads.iter().any(|x| x.0 == w) {
                workloads.push((w, k));
            }
        }
        for (w, k) in workloads {
            self.push(
                Part::Summary,
                Some(Heading {
                    level: 3,
                    text: w.to_string(),
                    aside: format!("({k})"),
                    class: Vec::new(),
                }),
                Vec::new(),
            );
            for (i, t) in report.tables.iter().enumerate() {
                if t.workload == w {
                    self.table(t, i);
                }
            }
            for (i, v) in report.views.iter().enumerate() {
                match v {
                    View::Matrix(m) if m.workload == w => self.matrix(m, i),
                    View::Curve(c) if c.workload == w => self.curve(c, i),
                    _ => {}
                }
            }
            for (i, v) in report.series.iter().enumerate() {
                if v.workload == w {
                    self.series(v, i);
                }
            }
            self.monitors(w);
            let stacks = super::stacks::sections(report, w);
            self.sections.extend(stacks);
        }
        if !report.monitors.is_empty() {
            self.push(
                Part::Detail,
                None,
                vec![Block::Paragraph(Text::with(
                    crate::monitors::LEGEND,
                    &[Class::Legend],
                ))],
            );
        }
    }

    /// A result table: figures with their interval, n and advantages.
    fn table(&mut self, t: &Table, index: usize) {
        let report = self.report;
        let mut head = vec![left(&t.row_param)];
        let mut detail_head = vec![None];
        for c in &t.columns {
            head.push(marks::configuration_cell(report, c));
            detail_head.push(Some("n".to_string()));
        }
        for c in t.columns.iter().skip(1) {
            let mut h = marks::configuration_cell(report, c);
            h.text.push_str(" advantage");
            head.push(h);
            detail_head.push(Some("95% CI (ratio of means)".to_string()));
        }
        let max_n = t
            .rows
            .iter()
            .flat_map(|r| r.cells.iter().flatten())
            .map(|c| c.values.len())
            .max()
            .unwrap_or(0);
        let min_n = t
            .rows
            .iter()
            .flat_map(|r| r.cells.iter().flatten())
            .map(|c| c.values.len())
            .min()
            .unwrap_or(0);
        let mut rows = Vec::new();
        for (k, row) in t.rows.iter().chain(t.average.iter()).enumerate() {
            // An aggregate row's figures come from the rows above, not
            // from repetitions of their own: no n.
            let aggregate = k >= t.rows.len();
            let mut cells = vec![left(&row.label)];
            for cell in &row.cells {
                let n = cell.as_ref().map(|c| c.values.len());
                cells.push(Cell {
                    text: cell_text(cell, t.decimals, true),
                    detail: Some(match n {
                        Some(n) if !aggregate => n.to_string(),
                        _ => String::new(),
                    }),
                    inline: match n {
                        Some(n) if n < max_n && row.label != "Average" => format!(" n={n}"),
                        _ => String::new(),
                    },
                    class: Vec::new(),
                });
            }
            cells.extend(row.advantages.iter().map(|a| {
                let mut c = marks::advantage_cell(a, t.advantage_decimals);
                // An aggregate's advantage has no repetitions of its own:
                // no verdict, and no mark saying one is missing.
                if aggregate {
                    c.text = crate::format::advantage_text(a, t.advantage_decimals)
                        .trim_end_matches(" ?")
                        .to_string();
                }
                c
            }));
            rows.push(GridRow {
                cells,
                class: Vec::new(),
            });
        }
        // One line: how many repetitions, and how sure the ± is.
        let n = if min_n == max_n {
            format!(
                "n = {max_n} repetition{} per figure",
                if max_n == 1 { "" } else { "s" }
            )
        } else {
            format!("n = {min_n} to {max_n} repetitions per figure")
        };
        let notes = vec![Text::with(
            match confidence_note(t) {
                Some(c) => format!("{n}; {c}."),
                None => format!("{n}."),
            },
            &[Class::Small],
        )];
        let labels = t
            .columns
            .iter()
            .map(|c| marks::configuration(report, c))
            .collect();
        self.push(
            Part::Summary,
            heading(4, title_of(t)),
            vec![
                Block::Chart(Chart::Table { index, labels }),
                Block::Table(Grid {
                    head,
                    detail_head,
                    rows,
                    notes,
                    // Seven tables of the demo fit a screen without.
                    rule: false,
                    class: Vec::new(),
                    label_left: false,
                }),
            ],
        );
    }

    /// A matrix view: per configuration and metric its matrix (a heat map
    /// in HTML; the results themselves, so in the summary too), then the
    /// summary over the cells of each.
    fn matrix(&mut self, v: &MatrixView, index: usize) {
        let report = self.report;
        let caption = views::caption(&v.workload, &v.fixed);
        let mut blocks = vec![Block::Paragraph(Text::with(
            format!(
                "Rows = {}, columns = {}; in HTML each heat map has its own colour scale, from its worst cell (dark) to its best (yellow), logarithmic when its figures span a factor of ten or more.",
                v.row_param, v.col_param
            ),
            &[Class::Legend],
        ))];
        if !v.notes.is_empty() {
            blocks.push(Block::List {
                items: v
                    .notes
                    .iter()
                    .map(|n| Text::with(n, &[Class::Small]))
                    .collect(),
                class: vec![Class::Small],
            });
        }
        for (k, m) in v.matrices.iter().enumerate() {
            let caption = format!(
                "{} · {}",
                marks::configuration(report, &m.configuration),
                m.title
            );
            blocks.push(Block::Chart(Chart::Heat {
                index,
                matrix: k,
                caption: caption.clone(),
            }));
            let mut g = grid(views::matrix_rows(v, m), false, false);
            g.notes = Vec::new();
            blocks.push(Block::Paragraph(Text::with(
                caption,
                &marks::configuration_class(report, &m.configuration),
            )));
            blocks.push(Block::Table(g));
        }
        self.push(
            Part::Summary,
            heading(
                4,
                format!(
                    "{caption}: {} × {} matrices (rows = {}, columns = {})",
                    v.row_param, v.col_param, v.row_param, v.col_param
                ),
            ),
            blocks,
        );
        let mut g = grid(views::summary_rows(v), false, false);
        self.mark_head(&mut g, 1);
        g.notes.push(Text::with(
            "- = a matrix with a cell without a figure",
            &[Class::Small],
        ));
        self.push(
            Part::Summary,
            heading(
                5,
                format!(
                    "{caption}: {} over the cells of each matrix",
                    v.summary_text()
                ),
            ),
            vec![Block::Table(g)],
        );
    }

    /// A curve: its chart, the sentences about its peaks, its figures, its
    /// notes; then the study's pairs at the peaks.
    fn curve(&mut self, v: &CurveView, index: usize) {
        let report = self.report;
        let caption = views::caption(&v.workload, &v.fixed);
        let title = format!("{caption}: {} against {}", v.title, v.x_param);
        let mut g = grid(views::curve_rows(v), true, false);
        self.mark_head(&mut g, 1);
        g.notes = v
            .notes
            .iter()
            .map(|n| Text::with(n, &[Class::Small]))
            .collect();
        let mut blocks = vec![Block::Chart(Chart::Curve {
            index,
            labels: v
                .lines
                .iter()
                .map(|l| marks::configuration(report, &l.configuration))
                .collect(),
            title: title.clone(),
        })];
        if !v.findings.is_empty() {
            blocks.push(Block::List {
                items: v
                    .findings
                    .iter()
                    .map(|f| Text::plain(marks::finding(report, v, f)))
                    .collect(),
                class: vec![Class::Findings],
            });
        }
        blocks.push(Block::Table(g));
        self.push(Part::Summary, heading(4, title), blocks);
        if v.pairs.is_empty() {
            return;
        }
        let mut g = grid(crate::pairs::rows(v), true, false);
        for r in &mut g.rows {
            for c in &mut r.cells[1..3] {
                *c = marks::configuration_cell(report, &c.text);
            }
        }
        g.class.push(Class::Pairs);
        let mut h = heading(4, crate::pairs::caption(v));
        if let Some(h) = h.as_mut() {
            h.class.push(Class::Pairs);
        }
        self.push(Part::Detail, h, vec![Block::Table(g)]);
    }

    /// A time-series view: its chart and its lines' summaries.
    fn series(&mut self, v: &crate::model::SeriesView, index: usize) {
        let title = format!(
            "{} · {}: {}",
            v.workload,
            marks::configuration(self.report, &v.configuration),
            v.title
        );
        let mut g = grid(crate::series::summary_rows(v), true, true);
        g.notes.push(Text::with(
            format!(
                "Per {}. Each point's repetition that gives its quoted figure; in the chart, the shaded band: {}; the y axis does not start at zero; a gap is an interval without observations.",
                if v.x_unit == "s" { "interval" } else { "entry" },
                if v.band.is_empty() { "each interval's min–max" } else { &v.band }
            ),
            &[Class::Small],
        ));
        let mut h = heading(4, title.clone());
        if let Some(h) = h.as_mut() {
            h.class = marks::configuration_class(self.report, &v.configuration);
        }
        self.push(
            Part::Detail,
            h,
            vec![
                Block::Chart(Chart::Series {
                    index,
                    title,
                    labels: v.lines.iter().map(marks::series_line).collect(),
                }),
                Block::Table(g),
            ],
        );
    }

    /// One workload's monitors: the table (each row's configuration
    /// marked), where the configurations differ, the CPU charts.
    fn monitors(&mut self, workload: &str) {
        let report = self.report;
        let r = &report.monitors;
        let mine: Vec<&crate::model::MonitorPoint> =
            r.points.iter().filter(|m| m.workload == workload).collect();
        if mine.is_empty() {
            return;
        }
        let mut g = grid(crate::monitors::table_rows(r, workload), true, true);
        for (row, m) in g.rows.iter_mut().zip(&mine) {
            row.cells[0] = marks::configuration_row(report, &m.configuration, &[&m.point, &m.host]);
        }
        g.class.push(Class::Monitors);
        let mut blocks = vec![Block::Table(g)];
        let diffs: Vec<Text> = r
            .differences
            .iter()
            .filter(|d| d.workload == workload)
            .map(|d| {
                let mut t = Text::plain(crate::monitors::sentence(
                    d,
                    &marks::configuration(report, &d.configuration),
                    &marks::configuration(report, &d.baseline),
                ));
                t.label = d.place();
                t.class = marks::configuration_class(report, &d.configuration);
                t
            })
            .collect();
        if !diffs.is_empty() {
            blocks.push(Block::Paragraph(Text::plain(
                "Where configurations differ:",
            )));
            blocks.push(Block::List {
                items: diffs,
                class: Vec::new(),
            });
            blocks.push(Block::Paragraph(Text::with(
                format!("({})", crate::monitors::rule()),
                &[Class::Small],
            )));
        }
        for (i, v) in r.charts.iter().enumerate() {
            if v.workload == workload {
                blocks.push(Block::Chart(Chart::Monitor {
                    index: i,
                    labels: v.lines.iter().map(marks::series_line).collect(),
                    title: format!(
                        "{} · {}",
                        marks::configuration(report, &v.configuration),
                        v.title
                    ),
                }));
            }
        }
        let mut h = heading(4, format!("System monitors: {workload}"));
        if let Some(h) = h.as_mut() {
            h.class.push(Class::Monitors);
        }
        self.push(Part::Detail, h, blocks);
    }

    fn crosschecks(&mut self) {
        let report = self.report;
        if report.crosschecks.is_empty() {
            return;
        }
        self.push(
            Part::Detail,
            heading(2, "Cross-checks: native workloads against classic tools"),
            Vec::new(),
        );
        for (title, these) in crate::crosscheck::grouped(&report.crosschecks) {
            let mut g = grid(
                std::iter::once(crate::crosscheck::HEAD.map(String::from).to_vec())
                    .chain(these.iter().map(|r| crate::crosscheck::cells(r)))
                    .collect(),
                false,
                true,
            );
            for (row, r) in g.rows.iter_mut().zip(&these) {
                row.cells[0] = marks::configuration_row(report, &r.configuration, &[]);
                row.cells[1].class.push(Class::Left);
                row.cells[5].class.push(Class::Left);
                row.cells[7].class = vec![
                    Class::Left,
                    Class::Verdict(match r.verdict.as_str() {
                        "DISAGREE" => VerdictClass::Worse,
                        "agree" => VerdictClass::Noise,
                        _ => VerdictClass::Inconclusive,
                    }),
                ];
            }
            self.push(Part::Detail, heading(3, title), vec![Block::Table(g)]);
        }
        self.push(
            Part::Detail,
            None,
            vec![Block::Paragraph(Text::with(
                crate::crosscheck::legend(),
                &[Class::Legend],
            ))],
        );
    }

    /// Latency distributions and jitter: charts only (the HTML's).
    fn latency(&mut self) {
        let report = self.report;
        if report.latency.is_empty() {
            return;
        }
        let mut blocks = vec![Block::Paragraph(Text::with(
            "Per point, the median run of its headline figure: quantiles from the HDR histogram (three significant digits; min and max exact) on a log scale, and the time series of individual round trips (evenly thinned).",
            &[Class::Legend],
        ))];
        let mut groups: Vec<(&str, &str, &str)> = Vec::new();
        for v in &report.latency {
            let k = (v.workload.as_str(), v.point.as_str(), v.name.as_str());
            if !groups.contains(&k) {
                groups.push(k);
            }
        }
        for (g, (wl, point, name)) in groups.into_iter().enumerate() {
            let views: Vec<usize> = (0..report.latency.len())
                .filter(|&i| {
                    let v = &report.latency[i];
                    v.workload == wl && v.point == point && v.name == name
                })
                .collect();
            let labels: Vec<String> = views
                .iter()
                .map(|&i| marks::configuration(report, &report.latency[i].configuration))
                .collect();
            let dist_labels = views
                .iter()
                .zip(&labels)
                .map(|(&i, l)| marks::repetition(l, report.latency[i].repetition))
                .collect();
            blocks.push(Block::Chart(Chart::Latency {
                group: g,
                views,
                labels,
                dist_labels,
                title: format!("{wl} · {point} · {name}"),
            }));
        }
        self.push_for(
            Media::Drawn,
            Part::Detail,
            heading(2, "Latency distributions and jitter"),
            blocks,
        );
    }

    /// Every point's statistics for every metric (collapsed in HTML).
    fn points(&mut self) {
        let report = self.report;
        if report.points.is_empty() {
            return;
        }
        let mut g = text_grid(
            &[
                "configuration",
                "workload",
                "point",
                "metric",
                "n",
                "mean",
                "sd",
                "CV",
                "min",
                "median",
                "max",
                "mean 95% CI",
                "median CI (level)",
            ],
            Vec::new(),
        );
        for c in &mut g.head[4..] {
            c.class.clear();
        }
        let f = marks::figure;
        for p in &report.points {
            for (m, s) in &p.summaries {
                let mut cells = vec![
                    marks::configuration_row(report, &p.configuration, &[]),
                    left(&p.workload),
                    left(&p.label),
                    left(m),
                ];
                cells.extend(
                    [
                        s.n.to_string(),
                        f(s.mean),
                        f(s.stddev),
                        s.cv.map(|c| format!("{:.2}%", c * 100.0))
                            .unwrap_or_default(),
                        f(s.min),
                        f(s.median),
                        f(s.max),
                        s.mean_ci
                            .as_ref()
                            .map(|c| format!("[{}, {}]", f(c.lo), f(c.hi)))
                            .unwrap_or_default(),
                        s.median_ci
                            .as_ref()
                            .map(|c| {
                                format!("[{}, {}] ({:.1}%)", f(c.lo), f(c.hi), c.level * 100.0)
                            })
                            .unwrap_or_default(),
                    ]
                    .map(Cell::text),
                );
                g.rows.push(GridRow {
                    cells,
                    class: Vec::new(),
                });
            }
        }
        g.class.push(Class::Collapsed);
        self.push_for(
            Media::Drawn,
            Part::Detail,
            heading(2, "All figures"),
            vec![
                Block::Paragraph(Text::with(
                    "Every point and metric: n, mean, standard deviation, CV, min, median, max and the 95% intervals",
                    &[Class::Small],
                )),
                Block::Table(g),
            ],
        );
    }

    fn failures(&mut self) {
        let report = self.report;
        if report.failures.is_empty() {
            return;
        }
        let rows = report
            .failures
            .iter()
            .map(|f| {
                vec![
                    f.configuration.clone(),
                    f.workload.clone(),
                    f.point.clone(),
                    f.repetition.to_string(),
                    format!("{:?}", f.status).to_lowercase(),
                    f.reason.clone(),
                ]
            })
            .collect();
        let mut g = text_grid(
            &[
                "configuration",
                "workload",
                "point",
                "repetition",
                "status",
                "reason",
            ],
            rows,
        );
        for (row, f) in g.rows.iter_mut().zip(&report.failures) {
            row.cells[0] = marks::configuration_row(report, &f.configuration, &[]);
        }
        self.push(
            Part::Summary,
            heading(
                2,
                format!("{} repetition(s) without a figure", report.failures.len()),
            ),
            vec![Block::Table(g)],
        );
    }

    fn notes(&mut self) {
        let report = self.report;
        if report.notes.is_empty() {
            return;
        }
        let items = report
            .notes
            .iter()
            .map(|n| Text {
                text: format!("{} ({})", n.text, n.points.join("; ")),
                label: n.workload.clone(),
                class: Vec::new(),
            })
            .collect();
        self.push(
            Part::Detail,
            heading(2, "Notes on the measurements"),
            vec![Block::List {
                items,
                class: Vec::new(),
            }],
        );
    }

    /// Appendix A: every host's system configuration side by side, rows
    /// where they differ marked; then the settings each configuration
    /// changed.
    fn appendix_a(&mut self) {
        let report = self.report;
        let mut blocks = Vec::new();
        match crate::build::host_table(&report.hosts, |r| marks::roles(report, r)) {
            None => blocks.push(Block::Paragraph(Text::plain(
                "No host inventory was recorded.",
            ))),
            Some(table) => {
                if table.hosts.len() > 1 {
                    blocks.push(Block::Paragraph(Text::with(
                        "Rows where the hosts differ are highlighted (in bold in Markdown).",
                        &[Class::Small],
                    )));
                }
                blocks.push(Block::Table(host_grid(&table)));
            }
        }
        self.push(
            Part::Appendix,
            heading(2, "Appendix A — system configuration"),
            blocks,
        );
        let blocks = if report.settings.is_empty() {
            vec![Block::Paragraph(Text::plain("None recorded: the configurations changed no system setting (placement only), or this store does not record them."))]
        } else {
            let rows = report
                .settings
                .iter()
                .map(|s| {
                    vec![
                        s.configuration.clone(),
                        s.host.clone(),
                        s.setting.clone(),
                        s.before.clone().unwrap_or_else(|| "(absent)".into()),
                        s.after.clone().unwrap_or_else(|| "(absent)".into()),
                        s.status.name().to_string(),
                        s.note.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            let mut g = text_grid(
                &[
                    "configuration",
                    "host",
                    "setting",
                    "before",
                    "after",
                    "status",
                    "note",
                ],
                rows,
            );
            for (row, s) in g.rows.iter_mut().zip(&report.settings) {
                row.cells[0] = marks::configuration_row(report, &s.configuration, &[]);
            }
            vec![Block::Table(g)]
        };
        self.push(
            Part::Appendix,
            heading(3, "Settings changed by each configuration"),
            blocks,
        );
    }

    /// The servers the run started, with their configuration files.
    fn services(&mut self) {
        let report = self.report;
        if report.services.is_empty() {
            return;
        }
        let rows = report
            .services
            .iter()
            .map(|s| {
                vec![
                    s.configuration.clone(),
                    s.name.clone(),
                    s.version(),
                    s.placement(),
                    s.config_origin(),
                ]
            })
            .collect();
        let mut g = text_grid(
            &[
                "configuration",
                "service",
                "server",
                "placement",
                "configuration file",
            ],
            rows,
        );
        for (row, s) in g.rows.iter_mut().zip(&report.services) {
            row.cells[0] = marks::configuration_row(report, &s.configuration, &[]);
        }
        let mut blocks = vec![Block::Table(g)];
        for s in &report.services {
            let config = s.config();
            if !config.is_empty() {
                blocks.push(Block::Code {
                    caption: format!(
                        "{} in {} ({}), as it ran",
                        s.name,
                        marks::configuration(report, &s.configuration),
                        s.version()
                    ),
                    lang: "",
                    text: config.trim_end().to_string(),
                });
            }
        }
        self.push(Part::Appendix, heading(3, "Servers"), blocks);
    }

    /// Appendix B: how the figures were produced, the run's events, the
    /// reproduced study's steps and the study file.
    fn appendix_b(&mut self) {
        let report = self.report;
        let rows = crate::text::methodology(report)
            .into_iter()
            .map(|l| vec![l.label, marks::message(report, &l.text)])
            .collect();
        self.push(
            Part::Appendix,
            heading(2, "Appendix B — methodology"),
            vec![Block::Table(text_grid(&["topic", "how"], rows))],
        );
        if !report.events.is_empty() {
            let rows = report
                .events
                .iter()
                .map(|e| {
                    vec![
                        e.at.clone(),
                        e.kind.clone(),
                        marks::message(report, &e.message),
                    ]
                })
                .collect();
            self.push(
                Part::Appendix,
                heading(3, "Run events"),
                vec![Block::Table(text_grid(&["time", "event", "detail"], rows))],
            );
        }
        if !report.steps.is_empty() {
            let rows = report
                .steps
                .iter()
                .map(|s| vec![s.step.clone(), s.status.text()])
                .collect();
            self.push(
                Part::Appendix,
                heading(
                    3,
                    "Steps of the reproduced study, and what became of them here",
                ),
                vec![Block::Table(text_grid(&["step", "status here"], rows))],
            );
        }
        let r = &report.run;
        if !r.study_text.is_empty() {
            self.push(
                Part::Appendix,
                heading(3, "The study file, verbatim"),
                vec![Block::Code {
                    caption: r.study_file.clone(),
                    lang: "toml",
                    text: r.study_text.trim_end().to_string(),
                }],
            );
        }
    }
}

/// The inventory table of Appendix A (and of `serve`'s hosts page): one
/// column per host, its headings as rows across, rows where the hosts
/// differ marked.
pub fn host_grid(table: &benchlab_inventory::HostTable) -> Grid {
    use benchlab_inventory::HostTableRow;
    let mut head = vec!["System"];
    head.extend(table.hosts.iter().map(String::as_str));
    let mut g = text_grid(&head, Vec::new());
    for row in &table.rows {
        match row {
            HostTableRow::Heading(title) => g.rows.push(GridRow {
                cells: vec![left(title)],
                class: vec![Class::SubHeading],
            }),
            HostTableRow::Values(label, values) => {
                let differs = table.hosts.len() > 1 && row.differs();
                let mut cells = vec![left(label)];
                cells.extend(values.iter().map(left));
                g.rows.push(GridRow {
                    cells,
                    class: if differs {
                        vec![Class::Differs]
                    } else {
                        Vec::new()
                    },
                });
            }
        }
    }
    g
}

/// When a run ran: `2026-12-07 03:59:38 → 04:01:42 UTC`, the end's date
/// only when it differs (to the second: the store keeps milliseconds);
/// stored times of another form as they are.
fn span(started: &str, ended: Option<&str>) -> String {
    // `YYYY-MM-DDTHH:MM:SS[.fff]Z` as (date, time).
    fn parts(t: &str) -> Option<(&str, &str)> {
        let (date, rest) = t.split_once('T')?;
        let time = rest.strip_suffix('Z')?;
        let time = time.split_once('.').map_or(time, |(whole, _)| whole);
        (date.len() == 10 && time.len() == 8).then_some((date, time))
    }
    let Some((d0, t0)) = parts(started) else {
        return format!("{started} → {}", ended.unwrap_or("…"));
    };
    match ended.map(|e| (e, parts(e))) {
        None => format!("{d0} {t0} UTC → …"),
        Some((_, Some((d1, t1)))) if d1 == d0 => format!("{d0} {t0} → {t1} UTC"),
        Some((_, Some((d1, t1)))) => format!("{d0} {t0} → {d1} {t1} UTC"),
        Some((e, None)) => format!("{started} → {e}"),
    }
}

/// A headline finding: the pair of configurations compared, and what
/// was found.
struct Finding {
    /// `A vs B`, marks applied.
    pair: String,
    /// The rest: the table or metric, and its verdicts.
    text: String,
    /// Either configuration is emulated.
    emulated: bool,
}

/// One headline finding: configuration `c` of table `t` against the
/// first, its verdicts counted (`ds`: their decisions).
fn table_finding(
    report: &RunReport,
    t: &Table,
    c: usize,
    ds: &[&crate::model::Decision],
) -> Option<Finding> {
    let cmps: Vec<(Option<benchlab_core::decision::Decided>, f64, bool)> = t
        .rows
        .iter()
        .filter_map(|r| r.advantages[c - 1].as_ref())
        .map(|a| (a.decided, a.pct, marks::drift_unknown(a)))
        .collect();
    if cmps.is_empty() {
        return None;
    }
    let emulated =
        marks::is_emulated(report, &t.columns[c]) || marks::is_emulated(report, &t.columns[0]);
    Some(Finding {
        pair: format!(
            "{} vs {}",
            marks::configuration(report, &t.columns[c]),
            marks::configuration(report, &t.columns[0]),
        ),
        text: format!(
            "{}: {} of {}{}.",
            title_of(t),
            marks::verdict_counts(&cmps, ds),
            cmps.len(),
            marks::repetitions(ds),
        ),
        emulated,
    })
}

/// When some intervals are below 95 % confidence (a median from fewer
/// than 6 repetitions can only be bracketed by [min, max]), say so.
fn confidence_note(t: &Table) -> Option<String> {
    let level = t
        .rows
        .iter()
        .flat_map(|r| r.cells.iter().flatten())
        .filter_map(|c| c.ci.as_ref().map(|i| i.level))
        .fold(f64::INFINITY, f64::min);
    (level.is_finite() && level < 0.949)
        .then(|| format!("± at {:.0}% confidence (too few for 95%)", level * 100.0))
}
