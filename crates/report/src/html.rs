//! The HTML report: one self-contained file — inline CSS, inline SVG
//! charts, no fonts, scripts or images fetched from anywhere — so that it
//! can be mailed, archived and opened offline.
//!
//! Sections follow the seeds: headline findings (written from the
//! verdicts, so a difference within the noise is never called a win), per
//! workload the tables with their charts, the full per-point statistics,
//! Appendix A (system configuration of every host side by side, differences
//! highlighted, and the settings each configuration changed), Appendix B
//! (methodology: rules, methods with their sources, times, the study file
//! verbatim).
//!
//! Charts are hand-written SVG (STYLE.md): one chart per table, the figure
//! of every configuration against the row parameter with its confidence
//! interval as an error bar; a table with a single row becomes a bar chart
//! with error bars. A tiny inline script writes each chart's rendered size
//! into a hidden element, which the browser test reads back; the report
//! does not need it to display.

use std::fmt::Write;

use benchlab_core::Better;
use benchlab_stats::{Verdict, DEFAULT_NOISE_PCT};

pub use crate::format::esc;
use crate::format::{cell_text, group_thousands, title_of};
use crate::model::{Advantage, RunReport, Table};
use crate::model::{CurveView, Matrix, MatrixView, View};
use crate::views;

/// Series colours (Okabe–Ito, distinguishable with the common forms of
/// colour blindness: M. Okabe and K. Ito, "Color Universal Design", 2008).
const COLOURS: [&str; 8] = [
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000",
];

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#f3f3f3}td.l,th.l{text-align:left}
td.better{background:#e3f4e3}td.worse{background:#fbe3e3}td.noise{color:#666}td.inconclusive{color:#666;font-style:italic}.emulated{color:#8a4b00}
tr.diff td{background:#fff6d5}
.legend{font-size:.85em;color:#444}.small{font-size:.8em;color:#555}
pre{background:#f7f7f7;padding:.8em;overflow-x:auto;font-size:.85em}
svg.chart{display:block;margin:.5em 0;max-width:100%;height:auto}
ul.keys{list-style:none;padding:0;margin:0 0 1em;font-size:.85em}ul.keys li{display:inline-block;margin-right:1.2em}
nav.toc ol{margin:.2em 0;padding-left:1.4em}nav.toc{font-size:.9em}
svg text{font-size:11px}svg text:not([fill]){fill:#333}
ul.findings li{margin:.2em 0}
#chart-check{display:none}
figure.heat{display:inline-block;vertical-align:top;margin:0 1.5em 1em 0}
figure.heat figcaption{font-weight:bold;font-size:.9em}
div.scroll{overflow-x:auto;max-width:100%}
";

/// Script run by the browser after layout: the bounding box of each
/// chart's data marks, for the automated rendering check.
const CHECK_SCRIPT: &str = "
(function(){var out=[];document.querySelectorAll('svg.chart').forEach(function(s){
var g=s.querySelector('g.data');var b=g?g.getBBox():{width:0,height:0};
out.push({id:s.id,width:b.width,height:b.height,marks:g?g.querySelectorAll('circle,rect,path').length:0});});
document.getElementById('chart-check').textContent=JSON.stringify(out);})();
";

/// The report's style sheet, for a page that embeds [`render_body`].
pub fn style() -> &'static str {
    STYLE
}

/// The script every report body ends with (the chart check): a server
/// that sends the report allows it by its hash, and nothing else.
pub fn check_script() -> &'static str {
    CHECK_SCRIPT
}

/// Renders the whole report as one HTML document.
pub fn render_html(report: &RunReport) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{STYLE}</style></head><body>\n{}</body></html>\n",
        esc(&report.run.study_name),
        render_body(report)
    )
}

/// The report's content, without the document around it: what
/// [`render_html`] writes inside `<body>`, and what `benchlab serve`
/// embeds in its pages (with [`style`]), so that the file and the web UI
/// are one renderer.
pub fn render_body(report: &RunReport) -> String {
    let mut o = String::new();
    let r = &report.run;
    let _ = writeln!(o, "<h1>{}</h1>", esc(&r.study_name));
    if !r.description.is_empty() {
        let _ = writeln!(o, "<p>{}</p>", esc(&r.description));
    }
    let _ = writeln!(
        o,
        "<p class=\"small\">Run {} · {} · {} → {} · benchlab {}</p>",
        r.id,
        esc(&format!("{:?}", r.status).to_lowercase()),
        esc(&r.started_at),
        esc(r.ended_at.as_deref().unwrap_or("…")),
        esc(&r.benchlab_version)
    );
    if !report.configurations.is_empty() {
        o.push_str(
            "<table><tr><th class=\"l\">Configuration</th><th class=\"l\">Description</th></tr>\n",
        );
        for c in &report.configurations {
            let _ = writeln!(
                o,
                "<tr><td class=\"l{}\">{}</td><td class=\"l\">{}</td></tr>",
                emulated_class(report, &c.name),
                esc(&report.label(&c.name)),
                esc(&c.description)
            );
        }
        o.push_str("</table>\n");
    }

    if !report.order.is_empty() {
        let _ = writeln!(o, "<p class=\"small\">Order: {}</p>", esc(&report.order));
    }
    findings(report, &mut o);
    control_html(report, &mut o);

    o.push_str("<h2>Results</h2>\n");
    let _ = writeln!(o, "<p class=\"legend\">{}</p>", esc(&legend(report)));
    if let Some(note) = crate::import::published_note(report) {
        let _ = writeln!(o, "<p class=\"legend\">{}</p>", esc(&note));
    }
    for line in crate::emulated::footnotes(report) {
        let _ = writeln!(o, "<p class=\"legend emulated\">{}</p>", esc(&line));
    }
    // Per workload (in order of appearance): its tables, then its views.
    let mut workloads: Vec<(&str, &str)> = Vec::new();
    for (w, k) in report
        .tables
        .iter()
        .map(|t| (t.workload.as_str(), t.kind.as_str()))
        .chain(report.views.iter().map(|v| match v {
            View::Matrix(m) => (m.workload.as_str(), m.kind.as_str()),
            View::Curve(c) => (c.workload.as_str(), c.kind.as_str()),
        }))
    {
        if !workloads.iter().any(|x| x.0 == w) {
            workloads.push((w, k));
        }
    }
    for (w, k) in workloads {
        let _ = writeln!(
            o,
            "<h3>{} <span class=\"small\">({})</span></h3>",
            esc(w),
            esc(k)
        );
        for (i, t) in report.tables.iter().enumerate() {
            if t.workload == w {
                table_section(report, t, i, &mut o);
            }
        }
        for (i, v) in report.views.iter().enumerate() {
            if v.workload() != w {
                continue;
            }
            match v {
                View::Matrix(m) => matrix_section(report, m, i, &mut o),
                View::Curve(c) => curve_section(report, c, i, &mut o),
            }
        }
        for (i, v) in report.series.iter().enumerate() {
            if v.workload == w {
                series_section(report, v, i, &mut o);
            }
        }
        crate::monitors::html(&report.monitors, w, &series_chart, &mut o);
    }

    crate::crosscheck::html(&report.crosschecks, &mut o);
    latency_section(report, &mut o);
    points_section(report, &mut o);
    failures_section(report, &mut o);
    notes_section(report, &mut o);
    appendix_a(report, &mut o);
    services_html(report, &mut o);
    appendix_b(report, &mut o);

    let _ = writeln!(
        o,
        "<pre id=\"chart-check\"></pre>\n<script>{CHECK_SCRIPT}</script>"
    );
    with_contents(&o)
}

/// The body with a table of contents before its first section: every
/// `<h2>` and, indented under it, its `<h3>`s, each given an id to link
/// to. A long report (dozens of tables, the appendices) is otherwise
/// read by scrolling.
fn with_contents(body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 2048);
    let mut toc = String::from(
        "<nav class=\"toc\" id=\"contents\"><details open><summary>Contents</summary>\n<ol>",
    );
    let mut rest = body;
    let mut first_h2 = None;
    let (mut n, mut in_sub) = (0, false);
    while let Some(at) = rest.find("<h") {
        let tail = &rest[at..];
        let level = if tail.starts_with("<h2>") {
            2
        } else if tail.starts_with("<h3>") {
            3
        } else {
            out.push_str(&rest[..at + 2]);
            rest = &rest[at + 2..];
            continue;
        };
        let close = format!("</h{level}>");
        let Some(end) = tail.find(&close) else {
            break;
        };
        let inner = &tail[4..end];
        n += 1;
        out.push_str(&rest[..at]);
        if level == 2 && first_h2.is_none() {
            first_h2 = Some(out.len());
        }
        let _ = write!(out, "<h{level} id=\"s{n}\">{inner}{close}");
        // The entry's text: the heading without its markup (already
        // escaped by the renderer).
        let mut text = String::new();
        let mut in_tag = false;
        for ch in inner.chars() {
            match ch {
                '<' => in_tag = true,
                '>' => in_tag = false,
                c if !in_tag => text.push(c),
                _ => {}
            }
        }
        match (level, in_sub) {
            (2, true) => {
                toc.push_str("</ol></li>");
                in_sub = false;
            }
            (3, false) if first_h2.is_some() => {
                // Open the sub-list inside the last section's entry.
                if toc.ends_with("</li>") {
                    toc.truncate(toc.len() - 5);
                }
                toc.push_str("<ol>");
                in_sub = true;
            }
            _ => {}
        }
        if level == 2 || first_h2.is_some() {
            let _ = write!(toc, "<li><a href=\"#s{n}\">{}</a></li>", text.trim());
        }
        rest = &tail[end + close.len()..];
    }
    out.push_str(rest);
    if in_sub {
        toc.push_str("</ol></li>");
    }
    toc.push_str("</ol></details></nav>\n");
    match first_h2 {
        Some(at) => out.insert_str(at, &toc),
        None => return body.to_string(),
    }
    out
}

/// The A/A control's section: the machine against itself.
fn control_html(report: &RunReport, o: &mut String) {
    let Some(control) = crate::text::control(report) else {
        return;
    };
    let _ = writeln!(
        o,
        "<h2 id=\"control\">The machine against itself (A/A control)</h2>\n<p>{}</p>\n<table><tr><th class=\"l\">Table · row</th><th>Advantage</th></tr>",
        esc(&control.summary)
    );
    for (line, c) in control.rows.iter().zip(&report.control) {
        let _ = writeln!(
            o,
            "<tr><td class=\"l\">{}</td><td class=\"{}\">{}</td></tr>",
            esc(&line.label),
            verdict_class(&c.advantage),
            esc(&line.text)
        );
    }
    o.push_str("</table>\n");
}

/// The report's legend, and what only the HTML shows: colours and the
/// interval column.
fn legend(report: &RunReport) -> String {
    format!(
        "{} Green: better, red: worse (a verdict, not just a sign). The \"95% CI\" column: Fieller's interval of the ratio of means; n: the repetitions behind a figure.",
        crate::text::legend(report).trim_end()
    )
}

/// Headline findings from the verdicts: per table and configuration, how
/// many rows are better, worse, without a difference beyond the noise, or
/// inconclusive (never counted as "no difference").
fn findings(report: &RunReport, o: &mut String) {
    o.push_str("<h2>Headline findings</h2>\n<ul class=\"findings\">\n");
    let mut any = false;
    for t in &report.tables {
        for c in 1..t.columns.len() {
            let advs: Vec<&Advantage> = t
                .rows
                .iter()
                .filter_map(|r| r.advantages[c - 1].as_ref())
                .collect();
            if advs.is_empty() {
                continue;
            }
            any = true;
            let count = |v: Verdict| {
                advs.iter()
                    .filter(|a| a.comparison.as_ref().map(|c| c.verdict) == Some(v))
                    .collect::<Vec<_>>()
            };
            let better = count(Verdict::Better);
            let worse = count(Verdict::Worse);
            let noise = count(Verdict::WithinNoise);
            let undecided = count(Verdict::Inconclusive);
            let unknown = advs.len() - better.len() - worse.len() - noise.len() - undecided.len();
            let range = |xs: &[&&Advantage]| {
                let lo = xs.iter().map(|a| a.pct).fold(f64::INFINITY, f64::min);
                let hi = xs.iter().map(|a| a.pct).fold(f64::NEG_INFINITY, f64::max);
                if (hi - lo).abs() < 0.005 {
                    format!("{lo:+.2}%")
                } else {
                    format!("{lo:+.2}% to {hi:+.2}%")
                }
            };
            let mut parts = Vec::new();
            if !better.is_empty() {
                parts.push(format!("better in {} ({})", better.len(), range(&better)));
            }
            if !worse.is_empty() {
                parts.push(format!("worse in {} ({})", worse.len(), range(&worse)));
            }
            if !noise.is_empty() {
                parts.push(format!(
                    "no difference beyond ±{DEFAULT_NOISE_PCT}% in {}",
                    noise.len()
                ));
            }
            if !undecided.is_empty() {
                parts.push(inconclusive_finding(&undecided));
            }
            if unknown > 0 {
                parts.push(format!("too few repetitions to tell in {unknown}"));
            }
            let drift_unknown = advs
                .iter()
                .filter(|a| {
                    a.comparison
                        .as_ref()
                        .is_some_and(|c| c.drift == benchlab_stats::Drift::Unknown)
                })
                .count();
            if drift_unknown > 0 {
                parts.push(format!(
                    "‡ {drift_unknown} rest on one block each, drift unknown"
                ));
            }
            let small_n = advs
                .iter()
                .filter(|a| {
                    a.comparison.as_ref().is_some_and(|c| {
                        c.small_n() && matches!(c.verdict, Verdict::Better | Verdict::Worse)
                    })
                })
                .count();
            let _ = writeln!(
                o,
                "<li{}><b>{}</b> vs <b>{}</b> — {} ({}): {} of {} {} value(s){}.</li>",
                if report.emulated(&t.columns[c]).is_some()
                    || report.emulated(&t.columns[0]).is_some()
                {
                    " class=\"emulated\""
                } else {
                    ""
                },
                esc(&report.label(&t.columns[c])),
                esc(&report.label(&t.columns[0])),
                esc(&title_of(t)),
                if t.better == Better::Higher {
                    "higher is better"
                } else {
                    "lower is better"
                },
                esc(&parts.join(", ")),
                advs.len(),
                esc(&t.row_param),
                if small_n > 0 {
                    format!("; {small_n} verdict(s) rest on the confidence interval alone (†: too few repetitions for a rank test)")
                } else {
                    String::new()
                }
            );
        }
    }
    // The scaling curves' peaks and how the configurations compare there.
    for v in &report.views {
        let View::Curve(c) = v else { continue };
        for f in &c.findings {
            any = true;
            let _ = writeln!(
                o,
                "<li>{} — {}</li>",
                esc(&views::caption(&c.workload, &c.fixed)),
                esc(&crate::emulated::finding(report, c, f))
            );
        }
    }
    if !any {
        o.push_str("<li>One configuration only: nothing to compare.</li>\n");
    }
    o.push_str("</ul>\n");
}

/// "inconclusive in 2 (+3.10% to +89.53%; about 9 repetitions per side
/// would likely decide)": what was measured and what it would take,
/// never "no difference".
fn inconclusive_finding(undecided: &[&&Advantage]) -> String {
    let lo = undecided
        .iter()
        .map(|a| a.pct)
        .fold(f64::INFINITY, f64::min);
    let hi = undecided
        .iter()
        .map(|a| a.pct)
        .fold(f64::NEG_INFINITY, f64::max);
    let range = if (hi - lo).abs() < 0.005 {
        format!("{lo:+.2}%")
    } else {
        format!("{lo:+.2}% to {hi:+.2}%")
    };
    let needed: Vec<usize> = undecided
        .iter()
        .filter_map(|a| a.comparison.as_ref()?.repetitions_to_decide)
        .collect();
    let need = match (needed.iter().min(), needed.iter().max()) {
        (Some(a), Some(b)) if a == b => {
            format!("; about {a} repetitions per side would likely decide")
        }
        (Some(a), Some(b)) => {
            format!("; about {a} to {b} repetitions per side would likely decide")
        }
        _ => String::new(),
    };
    format!(
        "inconclusive in {} ({range}: the interval was too wide to decide{need})",
        undecided.len()
    )
}

fn verdict_class(a: &Option<Advantage>) -> &'static str {
    match a
        .as_ref()
        .and_then(|a| a.comparison.as_ref())
        .map(|c| c.verdict)
    {
        Some(Verdict::Better) => "better",
        Some(Verdict::Worse) => "worse",
        Some(Verdict::WithinNoise) => "noise",
        Some(Verdict::Inconclusive) => "inconclusive",
        _ => "",
    }
}

/// ` emulated` (a class, after another) for a configuration that ran
/// on emulated guests.
fn emulated_class(report: &RunReport, name: &str) -> &'static str {
    if report.emulated(name).is_some() {
        " emulated"
    } else {
        ""
    }
}

/// `<th>` with the emulated class where the configuration ran on
/// emulated guests.
fn th(report: &RunReport, name: &str) -> &'static str {
    if report.emulated(name).is_some() {
        "<th class=\"emulated\">"
    } else {
        "<th>"
    }
}

fn table_section(report: &RunReport, t: &Table, index: usize, o: &mut String) {
    let _ = writeln!(o, "<h4>{}</h4>", esc(&title_of(t)));
    chart(report, t, index, o);
    o.push_str("<table><tr>");
    let _ = write!(o, "<th class=\"l\">{}</th>", esc(&t.row_param));
    for c in &t.columns {
        let _ = write!(
            o,
            "{}{}</th><th>n</th>",
            th(report, c),
            esc(&report.label(c))
        );
    }
    for c in t.columns.iter().skip(1) {
        let _ = write!(
            o,
            "{}{} advantage</th><th>95% CI (ratio of means)</th>",
            th(report, c),
            esc(&report.label(c))
        );
    }
    o.push_str("</tr>\n");
    for (k, row) in t.rows.iter().chain(t.average.iter()).enumerate() {
        // An aggregate row's figures come from the rows above, not from
        // repetitions of their own: no n.
        let aggregate = k >= t.rows.len();
        let _ = write!(o, "<tr><td class=\"l\">{}</td>", esc(&row.label));
        for cell in &row.cells {
            let n = match cell {
                Some(c) if !aggregate => c.values.len().to_string(),
                _ => String::new(),
            };
            let _ = write!(
                o,
                "<td>{}</td><td>{n}</td>",
                esc(&cell_text(cell, t.decimals, true))
            );
        }
        for a in &row.advantages {
            let ci = a
                .as_ref()
                .and_then(|a| a.comparison.as_ref())
                .and_then(|c| c.ci_pct.as_ref())
                .map(|i| format!("[{:+.2}%, {:+.2}%]", i.lo, i.hi))
                .unwrap_or_default();
            let _ = write!(
                o,
                "<td class=\"{}\">{}</td><td class=\"{}\">{}</td>",
                verdict_class(a),
                esc(&crate::format::advantage_text(a, t.advantage_decimals)),
                verdict_class(a),
                esc(&ci)
            );
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
}

/// Nice axis bounds and ticks for [lo, hi] (Heckbert's "nice numbers",
/// Graphics Gems, 1990).
fn ticks(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let (lo, hi) = if hi - lo < 1e-12 * hi.abs().max(1.0) {
        (lo - lo.abs().max(1.0) * 0.1, hi + hi.abs().max(1.0) * 0.1)
    } else {
        (lo, hi)
    };
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let step = mag
        * if f < 1.5 {
            1.0
        } else if f < 3.0 {
            2.0
        } else if f < 7.0 {
            5.0
        } else {
            10.0
        };
    let start = (lo / step).floor() * step;
    let end = (hi / step).ceil() * step;
    let mut v = Vec::new();
    let mut x = start;
    while x <= end + step * 0.5 {
        v.push(x);
        x += step;
    }
    (start, end, v)
}

fn fmt_tick(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 {
        format!("{:.1}M", x / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", x / 1e3)
    } else if a >= 100.0 || x == x.trunc() {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// One chart per table: each configuration's figure against the row
/// parameter (rows evenly spaced, in table order), the confidence interval
/// as an error bar; a bar chart when there is one row.
fn chart(report: &RunReport, t: &Table, index: usize, o: &mut String) {
    let (w, h) = (720.0, 300.0);
    let (left, right, top, bottom) = (70.0, 20.0, 20.0, 45.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for row in &t.rows {
        for c in row.cells.iter().flatten() {
            lo = lo.min(c.value);
            hi = hi.max(c.value);
            if let Some(ci) = &c.ci {
                lo = lo.min(ci.lo);
                hi = hi.max(ci.hi);
            }
        }
    }
    if !lo.is_finite() || t.rows.is_empty() {
        return;
    }
    let bars = t.rows.len() == 1;
    if bars {
        lo = lo.min(0.0);
    }
    let (y0, y1, yt) = ticks(lo, hi);
    let y = |v: f64| top + ph - (v - y0) / (y1 - y0) * ph;
    let nrows = t.rows.len();
    let x = |i: usize| left + pw * (i as f64 + 0.5) / nrows as f64;
    let _ = writeln!(
        o,
        "<svg class=\"chart\" id=\"chart-{index}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(&title_of(t))
    );
    // Axes and grid.
    let labels: Vec<&str> = t.rows.iter().map(|r| r.label.as_str()).collect();
    axes(o, (left, top, pw, ph), &yt, &y, &labels, &x);
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        left + pw / 2.0,
        h - 6.0,
        esc(&t.row_param)
    );
    let _ = writeln!(
        o,
        "<text x=\"12\" y=\"{:.1}\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        top + ph / 2.0,
        top + ph / 2.0,
        esc(if t.title.is_empty() { &t.metric } else { &t.title })
    );
    o.push_str("<g class=\"data\">\n");
    let ncols = t.columns.len();
    for c in 0..ncols {
        let colour = COLOURS[c % COLOURS.len()];
        if bars {
            let slot = pw / nrows as f64 * 0.8 / ncols as f64;
            let Some(cell) = &t.rows[0].cells[c] else {
                continue;
            };
            let bx = x(0) - pw / nrows as f64 * 0.4 + slot * c as f64;
            let _ = writeln!(
                o,
                "<rect x=\"{bx:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{}: {}</title></rect>",
                y(cell.value),
                slot * 0.9,
                (y(y0.max(0.0)) - y(cell.value)).max(0.5),
                esc(&t.columns[c]),
                esc(&group_thousands(cell.value, t.decimals))
            );
            if let Some(ci) = &cell.ci {
                let cx = bx + slot * 0.45;
                let _ = writeln!(
                    o,
                    "<path d=\"M{cx:.1} {:.1}V{:.1}M{:.1} {:.1}H{:.1}M{:.1} {:.1}H{:.1}\" stroke=\"#222\" fill=\"none\"/>",
                    y(ci.lo), y(ci.hi), cx - 4.0, y(ci.lo), cx + 4.0, cx - 4.0, y(ci.hi), cx + 4.0
                );
            }
        } else {
            // Each series offset slightly so that error bars do not
            // overlap; its line goes through its markers.
            let mx = |i: usize| x(i) + (c as f64 - (ncols as f64 - 1.0) / 2.0) * 4.0;
            let pts: Vec<(f64, f64)> = t
                .rows
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.cells[c].as_ref().map(|cell| (mx(i), y(cell.value))))
                .collect();
            if pts.len() > 1 {
                let d: Vec<String> = pts
                    .iter()
                    .enumerate()
                    .map(|(k, (px, py))| {
                        format!("{}{px:.1} {py:.1}", if k == 0 { "M" } else { "L" })
                    })
                    .collect();
                let _ = writeln!(
                    o,
                    "<path d=\"{}\" stroke=\"{colour}\" stroke-width=\"2\" fill=\"none\"/>",
                    d.join("")
                );
            }
            for (i, r) in t.rows.iter().enumerate() {
                let Some(cell) = &r.cells[c] else { continue };
                let px = mx(i);
                if let Some(ci) = &cell.ci {
                    let _ = writeln!(
                        o,
                        "<path d=\"M{px:.1} {:.1}V{:.1}\" stroke=\"{colour}\" fill=\"none\"/>",
                        y(ci.lo),
                        y(ci.hi)
                    );
                }
                let _ = writeln!(
                    o,
                    "<circle cx=\"{px:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{colour}\"><title>{} {}: {} (n = {})</title></circle>",
                    y(cell.value),
                    esc(&t.columns[c]),
                    esc(&r.label),
                    esc(&group_thousands(cell.value, t.decimals)),
                    cell.values.len()
                );
            }
        }
    }
    o.push_str("</g>\n</svg>\n");
    let names: Vec<String> = t.columns.iter().map(|c| report.label(c)).collect();
    keys(names.iter().map(String::as_str), o);
}

/// Stops of the heat maps' colour scale: viridis (S. van der Walt and
/// N. Smith, matplotlib, 2015), perceptually uniform, readable in grey and
/// with the common forms of colour blindness.
const VIRIDIS: [(u8, u8, u8); 5] = [
    (0x44, 0x01, 0x54),
    (0x3b, 0x52, 0x8b),
    (0x21, 0x91, 0x8c),
    (0x5e, 0xc9, 0x62),
    (0xfd, 0xe7, 0x25),
];

/// The colour at `t` ∈ [0, 1] of the scale, linearly between its stops.
fn viridis(t: f64) -> String {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let pos = t * (VIRIDIS.len() - 1) as f64;
    let i = (pos.floor() as usize).min(VIRIDIS.len() - 2);
    let f = pos - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * f).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// A matrix view: notes, one heat map per configuration and metric, the
/// summary table.
fn matrix_section(report: &RunReport, v: &MatrixView, index: usize, o: &mut String) {
    let caption = views::caption(&v.workload, &v.fixed);
    let _ = writeln!(
        o,
        "<h4>{}: {} × {} matrices</h4>",
        esc(&caption),
        esc(&v.row_param),
        esc(&v.col_param)
    );
    let _ = writeln!(
        o,
        "<p class=\"legend\">Rows = {}, columns = {}; each heat map has its own colour scale, from its worst cell (dark) to its best (yellow), logarithmic when its figures span a factor of ten or more.</p>",
        esc(&v.row_param),
        esc(&v.col_param)
    );
    if !v.notes.is_empty() {
        o.push_str("<ul class=\"small\">");
        for n in &v.notes {
            let _ = write!(o, "<li>{}</li>", esc(n));
        }
        o.push_str("</ul>\n");
    }
    for (k, m) in v.matrices.iter().enumerate() {
        let _ = writeln!(
            o,
            "<figure class=\"heat\"><figcaption>{} · {}</figcaption>",
            esc(&report.label(&m.configuration)),
            esc(&m.title)
        );
        heat_map(v, m, &format!("heat-{index}-{k}"), o);
        o.push_str("</figure>\n");
    }
    let mut rows = views::summary_rows(v);
    crate::emulated::relabel(report, &mut rows[0][1..]);
    let _ = writeln!(
        o,
        "<h5>{}: {} over the cells of each matrix</h5>",
        esc(&caption),
        v.summary_text()
    );
    text_table(&rows, o);
}

/// Rows of text (the first is the header) as an HTML table.
fn text_table(rows: &[Vec<String>], o: &mut String) {
    o.push_str("<table>");
    for (i, r) in rows.iter().enumerate() {
        let tag = if i == 0 { "th" } else { "td" };
        o.push_str("<tr>");
        for (j, c) in r.iter().enumerate() {
            let class = if j == 0 { " class=\"l\"" } else { "" };
            let _ = write!(o, "<{tag}{class}>{}</{tag}>", esc(c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
}

/// One matrix as an SVG heat map: a cell per (row, column) coloured on
/// the matrix's own scale, its figure written in it.
fn heat_map(v: &MatrixView, m: &Matrix, id: &str, o: &mut String) {
    let figures: Vec<f64> = m.cells.iter().flatten().flatten().copied().collect();
    let lo = figures.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = figures.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return;
    }
    let log = lo > 0.0 && hi / lo >= 10.0;
    let tf = |x: f64| if log { x.ln() } else { x };
    let t = |x: f64| {
        let t = if hi > lo {
            (tf(x) - tf(lo)) / (tf(hi) - tf(lo))
        } else {
            1.0
        };
        match m.better {
            Better::Higher => t,
            Better::Lower => 1.0 - t,
        }
    };
    let text = |x: f64| group_thousands(x, m.decimals);
    let widest = figures
        .iter()
        .map(|x| text(*x).len())
        .chain(v.cols.iter().map(|c| c.len()))
        .max()
        .unwrap_or(4);
    let cw = (widest as f64 * 7.5 + 14.0).max(48.0);
    let ch = 22.0;
    let left = v.rows.iter().map(|r| r.len()).max().unwrap_or(4) as f64 * 7.5 + 16.0;
    let top = 24.0;
    let legend_h = 40.0;
    let w = left + cw * v.cols.len() as f64 + 10.0;
    let h = top + ch * v.rows.len() as f64 + legend_h;
    let _ = writeln!(
        o,
        "<svg class=\"chart heat\" id=\"{}\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" role=\"img\" aria-label=\"{} · {}\">",
        esc(id),
        esc(&m.configuration),
        esc(&m.title)
    );
    for (j, c) in v.cols.iter().enumerate() {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            left + cw * (j as f64 + 0.5),
            top - 8.0,
            esc(c)
        );
    }
    for (i, r) in v.rows.iter().enumerate() {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 6.0,
            top + ch * (i as f64 + 0.5) + 4.0,
            esc(r)
        );
    }
    o.push_str("<g class=\"data\">\n");
    for (i, (r, cells)) in v.rows.iter().zip(&m.cells).enumerate() {
        for (j, (c, cell)) in v.cols.iter().zip(cells).enumerate() {
            let Some(x) = cell else { continue };
            let tt = t(*x);
            let (cx, cy) = (left + cw * j as f64, top + ch * i as f64);
            let _ = writeln!(
                o,
                "<rect x=\"{cx:.1}\" y=\"{cy:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} {r}, {} {c}: {}</title></rect><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
                cw - 1.0,
                ch - 1.0,
                viridis(tt),
                esc(&v.row_param),
                esc(&v.col_param),
                esc(&text(*x)),
                cx + cw / 2.0,
                cy + ch / 2.0 + 4.0,
                if tt < 0.6 { "#fff" } else { "#000" },
                esc(&text(*x))
            );
        }
    }
    o.push_str("</g>\n");
    // The scale: a gradient from the worst figure to the best.
    let ly = top + ch * v.rows.len() as f64 + 10.0;
    let lw = (cw * v.cols.len() as f64).min(240.0);
    let (worst, best) = match m.better {
        Better::Higher => (lo, hi),
        Better::Lower => (hi, lo),
    };
    // Drawn as steps rather than a gradient: a gradient is referenced
    // through `url(#…)`, which the self-containment check rejects.
    const STEPS: usize = 24;
    for k in 0..STEPS {
        let _ = write!(
            o,
            "<rect x=\"{:.1}\" y=\"{ly:.1}\" width=\"{:.1}\" height=\"8\" fill=\"{}\"/>",
            left + lw * k as f64 / STEPS as f64,
            lw / STEPS as f64 + 0.5,
            viridis(k as f64 / (STEPS - 1) as f64)
        );
    }
    let _ = writeln!(
        o,
        "<text x=\"{left:.1}\" y=\"{:.1}\">{}</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}{}</text>",
        ly + 22.0,
        esc(&text(worst)),
        left + lw,
        ly + 22.0,
        esc(&text(best)),
        if log { " (log scale)" } else { "" }
    );
    o.push_str("</svg>\n");
}

/// A curve: the line chart with each peak marked, the sentences about
/// the peaks, and the figures as a table.
fn curve_section(report: &RunReport, v: &CurveView, index: usize, o: &mut String) {
    let caption = views::caption(&v.workload, &v.fixed);
    let title = format!("{caption}: {} against {}", v.title, v.x_param);
    let _ = writeln!(o, "<h4>{}</h4>", esc(&title));
    curve_chart(report, v, &format!("curve-{index}"), &title, o);
    if !v.findings.is_empty() {
        o.push_str("<ul class=\"findings\">");
        for f in &v.findings {
            let _ = write!(
                o,
                "<li>{}</li>",
                esc(&crate::emulated::finding(report, v, f))
            );
        }
        o.push_str("</ul>\n");
    }
    let mut rows = views::curve_rows(v);
    crate::emulated::relabel(report, &mut rows[0][1..]);
    text_table(&rows, o);
    if !v.pairs.is_empty() {
        let _ = writeln!(
            o,
            "<h4 class=\"pairs\">{}</h4>",
            esc(&crate::pairs::caption(v))
        );
        o.push_str("<div class=\"pairs\">");
        text_table(&crate::pairs::marked_rows(report, v), o);
        o.push_str("</div>\n");
    }
    for n in &v.notes {
        let _ = writeln!(o, "<p class=\"small\">{}</p>", esc(n));
    }
}

/// The SVG of a curve: x values evenly spaced (a clients sweep doubles),
/// y from zero, one line per configuration with its confidence intervals,
/// and a ring with the figure at each line's peak.
fn curve_chart(report: &RunReport, v: &CurveView, id: &str, label: &str, o: &mut String) {
    let (w, h) = (720.0, 300.0);
    let (left, right, top, bottom) = (70.0, 20.0, 24.0, 45.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for p in v.lines.iter().flat_map(|l| l.points.iter().flatten()) {
        lo = lo.min(p.value);
        hi = hi.max(p.value);
        if let Some(ci) = &p.ci {
            lo = lo.min(ci.lo);
            hi = hi.max(ci.hi);
        }
    }
    if !lo.is_finite() || v.x.is_empty() {
        return;
    }
    let (y0, y1, yt) = ticks(lo.min(0.0), hi);
    let y = |val: f64| top + ph - (val - y0) / (y1 - y0) * ph;
    let n = v.x.len();
    let x = |i: usize| left + pw * (i as f64 + 0.5) / n as f64;
    let _ = writeln!(
        o,
        "<svg class=\"chart curve\" id=\"{}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(id),
        esc(label)
    );
    let labels: Vec<&str> = v.x.iter().map(String::as_str).collect();
    axes(o, (left, top, pw, ph), &yt, &y, &labels, &x);
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"12\" y=\"{:.1}\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        left + pw / 2.0,
        h - 6.0,
        esc(&v.x_param),
        top + ph / 2.0,
        top + ph / 2.0,
        esc(&v.title)
    );
    o.push_str("<g class=\"data\">\n");
    for (c, line) in v.lines.iter().enumerate() {
        let colour = COLOURS[c % COLOURS.len()];
        let pts: Vec<(usize, &crate::model::CurvePoint)> = line
            .points
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.as_ref().map(|p| (i, p)))
            .collect();
        if pts.len() > 1 {
            let d: String = pts
                .iter()
                .enumerate()
                .map(|(k, (i, p))| {
                    format!(
                        "{}{:.1} {:.1}",
                        if k == 0 { "M" } else { "L" },
                        x(*i),
                        y(p.value)
                    )
                })
                .collect();
            let _ = writeln!(
                o,
                "<path d=\"{d}\" stroke=\"{colour}\" stroke-width=\"2\" fill=\"none\"/>"
            );
        }
        for (i, p) in &pts {
            if let Some(ci) = &p.ci {
                let _ = writeln!(
                    o,
                    "<path d=\"M{:.1} {:.1}V{:.1}\" stroke=\"{colour}\" fill=\"none\"/>",
                    x(*i),
                    y(ci.lo),
                    y(ci.hi)
                );
            }
            let _ = writeln!(
                o,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{colour}\"><title>{} at {}: {} (n = {})</title></circle>",
                x(*i),
                y(p.value),
                esc(&line.configuration),
                esc(&views::x_words(&v.x_param, &v.x[*i])),
                esc(&group_thousands(p.value, v.decimals)),
                p.n
            );
        }
        if let Some(peak) = &line.peak {
            let (px, py) = (x(peak.index), y(peak.value));
            let _ = writeln!(
                o,
                "<circle class=\"peak\" cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"8\" stroke=\"{colour}\" stroke-width=\"2\" fill=\"none\"><title>{} peaks at {}: {}</title></circle><text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{colour}\">{}</text>",
                esc(&line.configuration),
                esc(&views::x_words(&v.x_param, &peak.x)),
                esc(&group_thousands(peak.value, v.decimals)),
                (py - 12.0).max(10.0),
                esc(&group_thousands(peak.value, v.decimals))
            );
        }
    }
    o.push_str("</g>\n</svg>\n");
    let names: Vec<String> = v
        .lines
        .iter()
        .map(|l| report.label(&l.configuration))
        .collect();
    keys(names.iter().map(String::as_str), o);
}

/// One series of a line chart: name and (x, y) points.
type Line = (String, Vec<(f64, f64)>);

/// A line chart: one polyline per series, x numeric (or categorical with
/// `x_labels` at x = 0, 1, …), y linear or log10.
fn line_chart(
    id: &str,
    label: &str,
    lines: &[Line],
    x_labels: Option<&[&str]>,
    log_y: bool,
    (x_title, y_title): (&str, &str),
    o: &mut String,
) {
    let (w, h) = (720.0, 280.0);
    let (left, right, top, bottom) = (70.0, 20.0, 20.0, 45.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let tf = |v: f64| if log_y { v.max(1e-9).log10() } else { v };
    let pts = lines.iter().flat_map(|l| l.1.iter());
    let (mut x0, mut x1, mut ylo, mut yhi) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for (x, y) in pts {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        ylo = ylo.min(tf(*y));
        yhi = yhi.max(tf(*y));
    }
    if !x0.is_finite() || !ylo.is_finite() {
        return;
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let (y0, y1, yt) = if log_y {
        let (a, b) = (ylo.floor(), yhi.ceil().max(ylo.floor() + 1.0));
        (a, b, (a as i32..=b as i32).map(f64::from).collect())
    } else {
        ticks(ylo, yhi)
    };
    let x = |v: f64| left + (v - x0) / (x1 - x0) * pw;
    let y = |v: f64| top + ph - (tf(v) - y0) / (y1 - y0) * ph;
    let _ = writeln!(
        o,
        "<svg class=\"chart\" id=\"{}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(id),
        esc(label)
    );
    for t in &yt {
        let yy = top + ph - (t - y0) / (y1 - y0) * ph;
        let text = if log_y {
            fmt_tick(10f64.powf(*t))
        } else {
            fmt_tick(*t)
        };
        let _ = writeln!(
            o,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#e5e5e5\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + pw,
            left - 6.0,
            yy + 4.0,
            esc(&text)
        );
    }
    let _ = writeln!(
        o,
        "<line x1=\"{left}\" x2=\"{left}\" y1=\"{top}\" y2=\"{}\" stroke=\"#333\"/><line x1=\"{left}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"/>",
        top + ph, left + pw, top + ph, top + ph
    );
    match x_labels {
        Some(labels) => {
            for (i, l) in labels.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    x(i as f64),
                    top + ph + 16.0,
                    esc(l)
                );
            }
        }
        None => {
            for v in [x0, (x0 + x1) / 2.0, x1] {
                let _ = writeln!(
                    o,
                    "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    x(v),
                    top + ph + 16.0,
                    esc(&fmt_tick(v.round()))
                );
            }
        }
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        left + pw / 2.0,
        h - 6.0,
        esc(x_title)
    );
    let _ = writeln!(
        o,
        "<text x=\"12\" y=\"{:.1}\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        top + ph / 2.0, top + ph / 2.0, esc(y_title)
    );
    o.push_str("<g class=\"data\">\n");
    for (c, (name, pts)) in lines.iter().enumerate() {
        let colour = COLOURS[c % COLOURS.len()];
        let d: Vec<String> = pts
            .iter()
            .enumerate()
            .map(|(k, (px, py))| {
                format!(
                    "{}{:.1} {:.1}",
                    if k == 0 { "M" } else { "L" },
                    x(*px),
                    y(*py)
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "<path d=\"{}\" stroke=\"{colour}\" stroke-width=\"1.5\" fill=\"none\"/>",
            d.join("")
        );
        if x_labels.is_some() {
            for (px, py) in pts {
                let _ = writeln!(
                    o,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"><title>{}: {}</title></circle>",
                    x(*px),
                    y(*py),
                    esc(name),
                    esc(&fmt_tick(*py))
                );
            }
        }
    }
    o.push_str("</g>\n</svg>\n");
    keys(lines.iter().map(|l| l.0.as_str()), o);
}

/// A chart's legend, under it in HTML: it wraps at any width and never
/// cuts a long configuration name as a legend drawn inside the SVG did.
/// The swatches are SVG (a `style` attribute would need the content
/// policy to allow inline styles).
fn keys<'a>(names: impl Iterator<Item = &'a str>, o: &mut String) {
    o.push_str("<ul class=\"keys\">");
    for (c, name) in names.enumerate() {
        let _ = write!(
            o,
            "<li><svg width=\"12\" height=\"12\" aria-hidden=\"true\"><rect width=\"12\" height=\"12\" fill=\"{}\"/></svg> {}</li>",
            COLOURS[c % COLOURS.len()],
            esc(name)
        );
    }
    o.push_str("</ul>\n");
}

/// Latency distributions (quantiles on a log scale) and jitter time series
/// of every point that recorded a histogram, the configurations overlaid.
fn latency_section(report: &RunReport, o: &mut String) {
    if report.latency.is_empty() {
        return;
    }
    o.push_str("<h2>Latency distributions and jitter</h2>\n<p class=\"legend\">Per point, the median run of its headline figure: quantiles from the HDR histogram (three significant digits; min and max exact) on a log scale, and the time series of individual round trips (evenly thinned).</p>\n");
    let mut groups: Vec<(String, String, String)> = Vec::new();
    for v in &report.latency {
        let k = (v.workload.clone(), v.point.clone(), v.name.clone());
        if !groups.contains(&k) {
            groups.push(k);
        }
    }
    let labels: Vec<&str> = crate::model::LATENCY_QUANTILES
        .iter()
        .map(|q| q.1)
        .collect();
    for (g, (wl, point, name)) in groups.iter().enumerate() {
        let views: Vec<_> = report
            .latency
            .iter()
            .filter(|v| &v.workload == wl && &v.point == point && &v.name == name)
            .collect();
        let title = format!("{wl} · {point} · {name}");
        let _ = writeln!(o, "<h4>{}</h4>", esc(&title));
        let dist: Vec<Line> = views
            .iter()
            .map(|v| {
                (
                    format!(
                        "{} (rep {})",
                        report.label(&v.configuration),
                        v.repetition + 1
                    ),
                    v.quantiles_us
                        .iter()
                        .enumerate()
                        .map(|(i, q)| (i as f64, *q))
                        .collect(),
                )
            })
            .collect();
        line_chart(
            &format!("latency-dist-{g}"),
            &format!("{title}: distribution"),
            &dist,
            Some(&labels),
            true,
            ("quantile", "µs (log scale)"),
            o,
        );
        let series: Vec<Line> = views
            .iter()
            .filter(|v| !v.series_us.is_empty())
            .map(|v| {
                (
                    report.label(&v.configuration),
                    v.series_us
                        .iter()
                        .enumerate()
                        .map(|(i, y)| ((i as u64 * v.series_stride) as f64, *y))
                        .collect(),
                )
            })
            .collect();
        if !series.is_empty() {
            line_chart(
                &format!("latency-series-{g}"),
                &format!("{title}: time series"),
                &series,
                None,
                false,
                ("round trip", "µs"),
                o,
            );
        }
    }
}

/// Every point's statistics for every metric: the full data behind the
/// tables.
fn points_section(report: &RunReport, o: &mut String) {
    if report.points.is_empty() {
        return;
    }
    o.push_str("<h2>All figures</h2>\n<details><summary>Every point and metric: n, mean, standard deviation, CV, min, median, max and the 95% intervals (click to open)</summary>\n");
    o.push_str("<table><tr><th class=\"l\">configuration</th><th class=\"l\">workload</th><th class=\"l\">point</th><th class=\"l\">metric</th><th>n</th><th>mean</th><th>sd</th><th>CV</th><th>min</th><th>median</th><th>max</th><th>mean 95% CI</th><th>median CI (level)</th></tr>\n");
    for p in &report.points {
        for (m, s) in &p.summaries {
            let f = |x: f64| group_thousands(x, 3);
            let _ = writeln!(
                o,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&report.label(&p.configuration)),
                esc(&p.workload),
                esc(&p.label),
                esc(m),
                s.n,
                f(s.mean),
                f(s.stddev),
                s.cv.map(|c| format!("{:.2}%", c * 100.0)).unwrap_or_default(),
                f(s.min),
                f(s.median),
                f(s.max),
                s.mean_ci.as_ref().map(|c| format!("[{}, {}]", f(c.lo), f(c.hi))).unwrap_or_default(),
                s.median_ci
                    .as_ref()
                    .map(|c| format!("[{}, {}] ({:.1}%)", f(c.lo), f(c.hi), c.level * 100.0))
                    .unwrap_or_default(),
            );
        }
    }
    o.push_str("</table></details>\n");
}

fn failures_section(report: &RunReport, o: &mut String) {
    if report.failures.is_empty() {
        return;
    }
    let _ = writeln!(o, "<h2>Repetitions without a figure ({})</h2><table><tr><th class=\"l\">configuration</th><th class=\"l\">workload</th><th class=\"l\">point</th><th>repetition</th><th class=\"l\">status</th><th class=\"l\">reason</th></tr>", report.failures.len());
    for f in &report.failures {
        let _ = writeln!(
            o,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            esc(&f.configuration),
            esc(&f.workload),
            esc(&f.point),
            f.repetition,
            esc(&format!("{:?}", f.status).to_lowercase()),
            esc(&f.reason)
        );
    }
    o.push_str("</table>\n");
}

/// Appendix A: the inventory table (one column per host), rows whose
/// values differ between hosts highlighted; then the settings changed.
fn appendix_a(report: &RunReport, o: &mut String) {
    o.push_str("<h2>Appendix A — system configuration</h2>\n");
    o.push_str(&inventory_html(&report.hosts));
    o.push_str("<h3>Settings changed by each configuration</h3>\n");
    if report.settings.is_empty() {
        o.push_str("<p>None recorded: the configurations changed no system setting (placement only), or this store does not record them.</p>\n");
    } else {
        o.push_str("<table><tr><th class=\"l\">configuration</th><th class=\"l\">host</th><th class=\"l\">setting</th><th class=\"l\">before</th><th class=\"l\">after</th><th class=\"l\">status</th><th class=\"l\">note</th></tr>\n");
        for s in &report.settings {
            let _ = writeln!(
                o,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
                esc(&s.configuration),
                esc(&s.host),
                esc(&s.setting),
                esc(s.before.as_deref().unwrap_or("(absent)")),
                esc(s.after.as_deref().unwrap_or("(absent)")),
                esc(s.status.name()),
                esc(s.note.as_deref().unwrap_or(""))
            );
        }
        o.push_str("</table>\n");
    }
}

/// The system-configuration tables of `hosts` side by side (one column
/// per host, as Appendix A shows them), rows where the hosts differ
/// highlighted: Appendix A's first part, and `benchlab serve`'s hosts
/// page.
pub fn inventory_html(hosts: &[benchlab_store::HostRow]) -> String {
    inventory_html_with(hosts, false)
}

/// [`inventory_html`], with only the rows where the hosts differ (and the
/// headings above them) when `differences_only`.
pub fn inventory_html_with(hosts: &[benchlab_store::HostRow], differences_only: bool) -> String {
    use benchlab_inventory::HostTableRow;
    let mut o = String::new();
    let Some(table) = crate::build::host_table(hosts) else {
        o.push_str("<p>No host inventory was recorded.</p>\n");
        return o;
    };
    if table.hosts.len() > 1 {
        o.push_str("<p class=\"small\">Rows where the hosts differ are highlighted.</p>\n");
    }
    o.push_str("<table><tr><th class=\"l\">System</th>");
    for h in &table.hosts {
        let _ = write!(o, "<th class=\"l\">{}</th>", esc(h));
    }
    o.push_str("</tr>\n");
    // A heading waiting for a differing row under it, when only
    // differences are shown.
    let mut heading: Option<String> = None;
    for row in &table.rows {
        match row {
            HostTableRow::Heading(title) => {
                let h = format!(
                    "<tr><th class=\"l\" colspan=\"{}\">{}</th></tr>\n",
                    table.hosts.len() + 1,
                    esc(title)
                );
                if differences_only {
                    heading = Some(h);
                } else {
                    o.push_str(&h);
                }
            }
            HostTableRow::Values(label, values) => {
                let differs = table.hosts.len() > 1 && row.differs();
                if differences_only {
                    if !differs {
                        continue;
                    }
                    if let Some(h) = heading.take() {
                        o.push_str(&h);
                    }
                }
                let class = if differs { " class=\"diff\"" } else { "" };
                let _ = write!(o, "<tr{class}><td class=\"l\">{}</td>", esc(label));
                for v in values {
                    let _ = write!(o, "<td class=\"l\">{}</td>", esc(v));
                }
                o.push_str("</tr>\n");
            }
        }
    }
    o.push_str("</table>\n");
    o
}

/// The workloads' notes on their measurements (a clipped buffer …).
fn notes_section(report: &RunReport, o: &mut String) {
    if report.notes.is_empty() {
        return;
    }
    o.push_str("<h2>Notes on the measurements</h2>\n<ul>\n");
    for n in &report.notes {
        let _ = writeln!(
            o,
            "<li><b>{}</b>: {} <span class=\"small\">({})</span></li>",
            esc(&n.workload),
            esc(&n.text),
            esc(&n.points.join("; "))
        );
    }
    o.push_str("</ul>\n");
}

/// The servers the run started, with their effective configuration files
/// (collapsed: a server's configuration is long).
fn services_html(report: &RunReport, o: &mut String) {
    if report.services.is_empty() {
        return;
    }
    o.push_str("<h3>Servers</h3>\n<table>\n<tr><th>configuration</th><th>service</th><th>server</th><th>placement</th><th>configuration file</th></tr>\n");
    for s in &report.services {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&s.configuration),
            esc(&s.name),
            esc(&s.version()),
            esc(&s.placement()),
            esc(&s.config_origin())
        );
    }
    o.push_str("</table>\n");
    for s in &report.services {
        let config = s.config();
        if config.is_empty() {
            continue;
        }
        let _ = writeln!(
            o,
            "<details><summary>{} in {} ({}): the configuration as it ran</summary><pre>{}</pre></details>",
            esc(&s.name),
            esc(&s.configuration),
            esc(&s.version()),
            esc(config.trim_end())
        );
    }
}

/// Appendix B: how the figures were produced.
fn appendix_b(report: &RunReport, o: &mut String) {
    let r = &report.run;
    o.push_str("<h2>Appendix B — methodology</h2>\n<table>\n");
    for line in crate::text::methodology(report) {
        let _ = writeln!(
            o,
            "<tr><th class=\"l\">{}</th><td class=\"l\">{}</td></tr>",
            esc(&line.label),
            esc(&line.text)
        );
    }
    o.push_str("</table>\n");
    if !report.events.is_empty() {
        o.push_str("<h3>Run events</h3><table><tr><th class=\"l\">time</th><th class=\"l\">event</th><th class=\"l\">detail</th></tr>\n");
        for e in &report.events {
            let _ = writeln!(
                o,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
                esc(&e.at),
                esc(&e.kind),
                esc(&e.message)
            );
        }
        o.push_str("</table>\n");
    }
    steps_html(report, o);
    if !r.study_text.is_empty() {
        let _ = writeln!(
            o,
            "<h3>The study file, verbatim</h3>\n<pre>{}</pre>",
            esc(&r.study_text)
        );
    }
}

/// The reproduced study's steps and their status here (`[[study.step]]`).
fn steps_html(report: &RunReport, o: &mut String) {
    if report.steps.is_empty() {
        return;
    }
    o.push_str("<h3>Steps of the reproduced study, and what became of them here</h3>\n<table><tr><th class=\"l\">step</th><th class=\"l\">status here</th></tr>\n");
    for s in &report.steps {
        let _ = writeln!(
            o,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            esc(&s.step),
            esc(&s.status.text())
        );
    }
    o.push_str("</table>\n");
}

/// The grid lines with their tick labels, the two axes, and the x labels
/// of a chart whose plot area is `(left, top, width, height)`: shared by
/// the bar charts and the curves.
fn axes(
    o: &mut String,
    (left, top, pw, ph): (f64, f64, f64, f64),
    ticks: &[f64],
    y: &dyn Fn(f64) -> f64,
    labels: &[&str],
    x: &dyn Fn(usize) -> f64,
) {
    for v in ticks {
        let yy = y(*v);
        let _ = writeln!(
            o,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#e5e5e5\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + pw,
            left - 6.0,
            yy + 4.0,
            esc(&fmt_tick(*v))
        );
    }
    let _ = writeln!(
        o,
        "<line x1=\"{left}\" x2=\"{left}\" y1=\"{top}\" y2=\"{}\" stroke=\"#333\"/><line x1=\"{left}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"/>",
        top + ph,
        left + pw,
        top + ph,
        top + ph
    );
    for (i, l) in labels.iter().enumerate() {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(i),
            top + ph + 16.0,
            esc(l)
        );
    }
}

/// A time-series view (seed 003's Figures 6 and 7): the line of each
/// point's interval figures, its band shaded behind it, the y
/// axis around the data (not from zero, as the seed draws it), and the
/// lines' summaries as a table.
fn series_section(report: &RunReport, v: &crate::model::SeriesView, index: usize, o: &mut String) {
    let title = crate::series::caption(report, v);
    let _ = writeln!(o, "<h4>{}</h4>", esc(&title));
    series_chart(v, &format!("series-{index}"), &title, o);
    text_table(&crate::series::summary_rows(v), o);
    let _ = writeln!(
        o,
        "<p class=\"small\">Each point's repetition that gives its quoted figure (rep shown in the legend); the shaded band: {}; the y axis does not start at zero; a gap is an interval without observations.</p>",
        esc(if v.band.is_empty() { "each interval's min–max" } else { &v.band })
    );
}

/// The band drawn around a line: its spread band where the workload
/// records one, else its min–max.
fn band_of(l: &crate::model::SeriesLine) -> (&[Option<f64>], &[Option<f64>]) {
    if l.low.is_empty() {
        (&l.min, &l.max)
    } else {
        (&l.low, &l.high)
    }
}

fn series_chart(v: &crate::model::SeriesView, id: &str, label: &str, o: &mut String) {
    let (w, h) = (720.0, 300.0);
    let (left, right, top, bottom) = (70.0, 150.0, 20.0, 45.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let (mut x0, mut x1, mut lo, mut hi) =
        (0.0f64, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
    for l in &v.lines {
        for x in &l.x {
            x1 = x1.max(*x);
        }
        // The axis spans the lines and the band drawn; with a spread band
        // the extremes (in the table) do not set it.
        let (blo, bhi) = band_of(l);
        for y in l.mean.iter().chain(blo).chain(bhi).flatten() {
            lo = lo.min(*y);
            hi = hi.max(*y);
        }
    }
    if !x1.is_finite() || !lo.is_finite() {
        return;
    }
    if x1 <= x0 {
        x0 = x1 - 1.0;
    }
    let (y0, y1, yt) = ticks(lo, hi);
    let step = yt.get(1).map(|b| b - yt[0]).unwrap_or(1.0);
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let x = |v: f64| left + (v - x0) / (x1 - x0) * pw;
    let y = |v: f64| top + ph - (v - y0) / (y1 - y0) * ph;
    let _ = writeln!(
        o,
        "<svg class=\"chart series\" id=\"{}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(id),
        esc(label)
    );
    for t in &yt {
        let _ = writeln!(
            o,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#e5e5e5\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{t:.decimals$}</text>",
            left + pw,
            y(*t),
            y(*t),
            left - 6.0,
            y(*t) + 4.0
        );
    }
    let _ = writeln!(
        o,
        "<line x1=\"{left}\" x2=\"{left}\" y1=\"{top}\" y2=\"{}\" stroke=\"#333\"/><line x1=\"{left}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"/>",
        top + ph,
        left + pw,
        top + ph,
        top + ph
    );
    for t in [x0, (x0 + x1) / 2.0, x1] {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(t),
            top + ph + 16.0,
            esc(&fmt_tick(t))
        );
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"12\" y=\"{:.1}\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        left + pw / 2.0,
        h - 6.0,
        esc(if v.x_unit == "s" { "time (s)" } else { "interval" }),
        top + ph / 2.0,
        top + ph / 2.0,
        esc(&v.unit)
    );
    o.push_str("<g class=\"data\">\n");
    // Runs of consecutive intervals with a figure: a gap breaks the line
    // and the band.
    let runs = |vals: &[Option<f64>]| -> Vec<Vec<usize>> {
        let mut out: Vec<Vec<usize>> = Vec::new();
        let mut cur = Vec::new();
        for (i, v) in vals.iter().enumerate() {
            if v.is_some() {
                cur.push(i);
            } else if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        out
    };
    for (c, l) in v.lines.iter().enumerate() {
        let colour = COLOURS[c % COLOURS.len()];
        let (blo, bhi) = band_of(l);
        if blo.len() == l.mean.len() && bhi.len() == l.mean.len() {
            let both: Vec<Option<f64>> = blo.iter().zip(bhi).map(|(a, b)| a.and(*b)).collect();
            for run in runs(&both) {
                let mut d = String::new();
                for (k, i) in run.iter().enumerate() {
                    let _ = write!(
                        d,
                        "{}{:.1} {:.1}",
                        if k == 0 { "M" } else { "L" },
                        x(l.x[*i]),
                        y(bhi[*i].unwrap_or_default())
                    );
                }
                for i in run.iter().rev() {
                    let _ = write!(
                        d,
                        "L{:.1} {:.1}",
                        x(l.x[*i]),
                        y(blo[*i].unwrap_or_default())
                    );
                }
                let _ = writeln!(
                    o,
                    "<path class=\"band\" d=\"{d}Z\" fill=\"{colour}\" fill-opacity=\"0.15\" stroke=\"none\"/>"
                );
            }
        }
        for run in runs(&l.mean) {
            let mut d = String::new();
            for (k, i) in run.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{:.1} {:.1}",
                    if k == 0 { "M" } else { "L" },
                    x(l.x[*i]),
                    y(l.mean[*i].unwrap_or_default())
                );
            }
            if run.len() == 1 {
                let i = run[0];
                let _ = writeln!(
                    o,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{colour}\"/>",
                    x(l.x[i]),
                    y(l.mean[i].unwrap_or_default())
                );
            } else {
                let _ = writeln!(
                    o,
                    "<path class=\"mean\" d=\"{d}\" stroke=\"{colour}\" stroke-width=\"1.5\" fill=\"none\"><title>{}: mean {:.4} {}, stddev {:.4}</title></path>",
                    esc(&l.point),
                    l.summary.mean,
                    esc(&v.unit),
                    l.summary.stddev
                );
            }
        }
    }
    o.push_str("</g>\n");
    for (c, l) in v.lines.iter().enumerate() {
        let ly = top + 10.0 + 18.0 * c as f64;
        let name = if l.side == "client" {
            format!("{} (rep {})", l.point, l.repetition + 1)
        } else {
            format!("{} {} (rep {})", l.point, l.side, l.repetition + 1)
        };
        let _ = writeln!(
            o,
            "<rect x=\"{}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{:.1}\">{}</text>",
            left + pw + 12.0,
            ly - 10.0,
            COLOURS[c % COLOURS.len()],
            left + pw + 30.0,
            ly,
            esc(&name)
        );
    }
    o.push_str("</svg>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    /// Settings changed by a configuration appear, before → after, in the
    /// HTML and Markdown appendices; with none, HTML says so and Markdown
    /// has no section.
    #[test]
    fn settings_appendix() {
        let text = format!(
            "{}\nt,higher,,size,1,2,1,base,10\nt,higher,,size,1,2,1,tuned,11\n",
            crate::import::HEADER
        );
        let mut r = crate::import::figures_csv("s", &text).unwrap();
        let html = render_html(&r);
        assert!(html.contains("None recorded"));
        let md = crate::render(&r, crate::Format::Markdown);
        assert!(!md.contains("Settings changed"));
        r.settings.push(crate::model::SettingChange {
            configuration: "tuned".into(),
            host: "sut".into(),
            setting: "sysctl net.core.rmem_max".into(),
            before: Some("212992".into()),
            after: Some("16777216".into()),
            status: benchlab_core::setting::ChangeStatus::Applied,
            note: None,
        });
        let html = render_html(&r);
        assert!(html.contains("<td class=\"l\">sysctl net.core.rmem_max</td><td class=\"l\">212992</td><td class=\"l\">16777216</td>"), "{html}");
        let md = crate::render(&r, crate::Format::Markdown);
        assert!(
            md.contains(
                "| tuned | sut | sysctl net.core.rmem_max | 212992 → 16777216 | applied |  |"
            ),
            "{md}"
        );
        // One chart per table, self-contained.
        assert_eq!(html.matches("<svg class=\"chart\"").count(), 1);
        assert!(!html.contains("http"));
    }

    #[test]
    fn nice_ticks() {
        let (lo, hi, t) = ticks(3.2, 97.0);
        assert_eq!((lo, hi), (0.0, 100.0));
        assert_eq!(t.len(), 6);
        let (lo, hi, _) = ticks(5.0, 5.0);
        assert!(lo < 5.0 && hi > 5.0);
    }
}
