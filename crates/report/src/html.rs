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

use crate::document::{Block, Chart, Class, Grid, Heading, Media, Text};
pub use crate::format::esc;
use crate::model::RunReport;
use crate::svg;

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#f3f3f3}td.l,th.l{text-align:left}
td.better{background:#e3f4e3}td.worse{background:#fbe3e3}td.noise{color:#666}td.inconclusive{color:#666;font-style:italic}td.equivalent{color:#666}td.undecided{color:#666;font-style:italic}.warning{color:#a00;font-weight:bold}.emulated{color:#8a4b00}
tr.diff td{background:#fff6d5}
.legend{font-size:.85em;color:#444}.small{font-size:.8em;color:#555}
pre{background:#f7f7f7;padding:.8em;overflow-x:auto;font-size:.85em}
svg.chart{display:block;margin:.5em 0;max-width:100%;height:auto}
ul.keys{list-style:none;padding:0;margin:0 0 1em;font-size:.85em}ul.keys li{display:inline-block;margin-right:1.2em}
nav.toc ol{margin:.2em 0;padding-left:1.4em}nav.toc{font-size:.9em}
svg text{font-size:11px}svg text:not([fill]){fill:#333}
ul.findings li{margin:.2em 0}
#chart-check{display:none}
figure.flame{margin:.8em 0}figure.flame figcaption{font-size:.85em;font-weight:bold}
svg.flame{display:block;max-width:100%;height:auto}svg.flame text{font-family:monospace;font-size:12px}svg.flame .title{text-anchor:middle;font-size:17px}svg.flame .frames>g:hover>rect{stroke:#000;stroke-width:.5}
figure.heat{display:inline-block;vertical-align:top;margin:0 1.5em 1em 0}
figure.heat figcaption{font-weight:bold;font-size:.9em}
div.scroll{overflow-x:auto;max-width:100%;margin:.6em 0;background:linear-gradient(to left,#fff 30%,rgba(255,255,255,0)) right/3em 100% no-repeat local,radial-gradient(farthest-side at 100% 50%,rgba(0,0,0,.3),rgba(0,0,0,0)) right/1em 100% no-repeat scroll}
div.scroll>table{margin:0}
div.scroll th:first-child,div.scroll td:first-child{position:sticky;left:0;z-index:1;background:#fff;box-shadow:2px 0 3px -1px rgba(0,0,0,.25)}
div.scroll th:first-child,div.scroll tr.sub th{background:#f3f3f3}div.scroll tr.diff td:first-child{background:#fff6d5}
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
/// are one writer.
pub fn render_body(report: &RunReport) -> String {
    let doc = crate::document::build(report);
    let mut o = String::new();
    let mut n = 0;
    let mut toc_done = false;
    for s in doc.sections.iter().filter(|s| s.media != Media::Terminal) {
        if let Some(h) = &s.heading {
            if h.level == 2 && !toc_done {
                contents(&doc, &mut o);
                toc_done = true;
            }
            heading(h, &mut n, &mut o);
        }
        for b in &s.blocks {
            block(report, b, &mut o);
        }
    }
    let _ = writeln!(
        o,
        "<pre id=\"chart-check\"></pre>\n<script>{CHECK_SCRIPT}</script>"
    );
    o
}

/// The classes as an HTML attribute (` class="l emulated"`), or nothing.
fn class(c: &[Class]) -> String {
    let names: Vec<&str> = c
        .iter()
        .map(|c| c.css())
        .filter(|s| !s.is_empty())
        .collect();
    if names.is_empty() {
        String::new()
    } else {
        format!(" class=\"{}\"", names.join(" "))
    }
}

/// `<h2 id="s1">…</h2>`: the second and third levels numbered for the
/// table of contents.
fn heading(h: &Heading, n: &mut usize, o: &mut String) {
    let level = h.level.min(6);
    let id = if matches!(level, 2 | 3) {
        *n += 1;
        format!(" id=\"s{n}\"")
    } else {
        String::new()
    };
    let aside = if h.aside.is_empty() {
        String::new()
    } else {
        format!(" <span class=\"small\">{}</span>", esc(&h.aside))
    };
    let _ = writeln!(
        o,
        "<h{level}{id}{}>{}{aside}</h{level}>",
        class(&h.class),
        esc(&h.text)
    );
}

/// The table of contents: every second-level heading and, under it, its
/// third-level ones (a long report is otherwise read by scrolling).
fn contents(doc: &crate::Document, o: &mut String) {
    o.push_str(
        "<nav class=\"toc\" id=\"contents\"><details open><summary>Contents</summary>\n<ol>",
    );
    let (mut n, mut open_sub) = (0, false);
    for h in doc.sections.iter().filter_map(|s| s.heading.as_ref()) {
        if !matches!(h.level, 2 | 3) {
            continue;
        }
        n += 1;
        match (h.level, open_sub) {
            (2, true) => {
                o.push_str("</ol></li>");
                open_sub = false;
            }
            (3, false) => {
                if o.ends_with("</li>") {
                    o.truncate(o.len() - 5);
                }
                o.push_str("<ol>");
                open_sub = true;
            }
            _ => {}
        }
        let _ = write!(o, "<li><a href=\"#s{n}\">{}</a></li>", esc(&h.text));
    }
    if open_sub {
        o.push_str("</ol></li>");
    }
    o.push_str("</ol></details></nav>\n");
}

/// A paragraph's or an item's content: its label in bold, then its text.
fn text(t: &Text) -> String {
    if t.label.is_empty() {
        esc(&t.text)
    } else {
        format!("<b>{}</b>: {}", esc(&t.label), esc(&t.text))
    }
}

fn block(report: &RunReport, b: &Block, o: &mut String) {
    match b {
        Block::Paragraph(t) => {
            let _ = writeln!(o, "<p{}>{}</p>", class(&t.class), text(t));
        }
        Block::List { items, class: c } => {
            let _ = write!(o, "<ul{}>", class(c));
            for t in items {
                let _ = writeln!(o, "<li{}>{}</li>", class(&t.class), text(t));
            }
            o.push_str("</ul>\n");
        }
        Block::Table(g) if g.class.contains(&Class::Collapsed) => {
            let _ = write!(
                o,
                "<details><summary>The table ({} rows; click to open)</summary>",
                g.rows.len()
            );
            table(g, o);
            o.push_str("</details>\n");
        }
        Block::Table(g) => table(g, o),
        Block::Chart(c) => chart(report, c, o),
        Block::Code {
            caption,
            lang: "",
            text,
        } => {
            let _ = writeln!(
                o,
                "<details><summary>{}</summary><pre>{}</pre></details>",
                esc(caption),
                esc(text)
            );
        }
        Block::Code { caption, text, .. } => {
            let _ = writeln!(
                o,
                "<p class=\"small\">{}</p>\n<pre>{}</pre>",
                esc(caption),
                esc(text)
            );
        }
    }
}

fn chart(report: &RunReport, c: &Chart, o: &mut String) {
    match c {
        Chart::Table { index, labels } => svg::table(&report.tables[*index], *index, labels, o),
        Chart::Curve {
            index,
            labels,
            title,
        } => {
            if let crate::model::View::Curve(v) = &report.views[*index] {
                svg::curve(v, labels, &format!("curve-{index}"), title, o);
            }
        }
        Chart::Heat {
            index,
            matrix,
            caption,
        } => {
            if let crate::model::View::Matrix(v) = &report.views[*index] {
                let _ = writeln!(
                    o,
                    "<figure class=\"heat\"><figcaption>{}</figcaption>",
                    esc(caption)
                );
                let id = format!("heat-{index}-{matrix}");
                svg::heat_map(v, &v.matrices[*matrix], &id, caption, o);
                o.push_str("</figure>\n");
            }
        }
        Chart::Series {
            index,
            title,
            labels,
        } => svg::series_chart(
            &report.series[*index],
            &format!("series-{index}"),
            title,
            labels,
            o,
        ),
        Chart::Monitor {
            index,
            title,
            labels,
        } => {
            let _ = writeln!(o, "<h5>{}</h5>", esc(title));
            let id = format!("monitor-{index}");
            svg::series_chart(&report.monitors.charts[*index], &id, title, labels, o);
        }
        Chart::Latency {
            group,
            views,
            labels,
            dist_labels,
            title,
        } => svg::latency(report, *group, views, (labels, dist_labels), title, o),
        Chart::Flame { index, title } => crate::flame::profile(report, *index, title, o),
        Chart::FlameDiff { index, title } => crate::flame::comparison(report, *index, title, o),
    }
}

/// A table in a container that scrolls sideways (its first column stays
/// in place, and a shadow at an edge shows there is more), so that a wide
/// table is never clipped by the page. A cell's detail is a column of
/// its own.
fn table(g: &Grid, o: &mut String) {
    let _ = write!(
        o,
        "<div class=\"scroll\" role=\"region\" tabindex=\"0\" aria-label=\"{}\"><table{}><tr>",
        esc(&g.head.first().map(|c| c.text.clone()).unwrap_or_default()),
        class(&g.class)
    );
    for (i, c) in g.head.iter().enumerate() {
        let _ = write!(o, "<th{}>{}</th>", class(&c.class), esc(&c.text));
        if let Some(Some(d)) = g.detail_head.get(i) {
            let _ = write!(o, "<th>{}</th>", esc(d));
        }
    }
    o.push_str("</tr>\n");
    for r in &g.rows {
        if r.class.contains(&Class::SubHeading) {
            let _ = writeln!(
                o,
                "<tr><th class=\"l\" colspan=\"{}\">{}</th></tr>",
                g.head.len(),
                esc(&r.cells.first().map(|c| c.text.clone()).unwrap_or_default())
            );
            continue;
        }
        let _ = write!(o, "<tr{}>", class(&r.class));
        for (i, c) in r.cells.iter().enumerate() {
            let _ = write!(o, "<td{}>{}</td>", class(&c.class), esc(&c.text));
            if let (Some(Some(_)), Some(d)) = (g.detail_head.get(i), &c.detail) {
                let verdicts: Vec<Class> = c
                    .class
                    .iter()
                    .copied()
                    .filter(|c| matches!(c, Class::Verdict(_)))
                    .collect();
                let _ = write!(o, "<td{}>{}</td>", class(&verdicts), esc(d));
            }
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table></div>\n");
    for t in &g.notes {
        let _ = writeln!(o, "<p{}>{}</p>", class(&t.class), text(t));
    }
}

/// The system-configuration tables of `hosts` side by side (one column
/// per host, as Appendix A shows them), rows where the hosts differ
/// highlighted: `benchlab serve`'s hosts page.
pub fn inventory_html(hosts: &[benchlab_store::HostRow]) -> String {
    inventory_html_with(hosts, false)
}

/// [`inventory_html`], with only the rows where the hosts differ (and the
/// headings above them) when `differences_only`.
pub fn inventory_html_with(hosts: &[benchlab_store::HostRow], differences_only: bool) -> String {
    let mut o = String::new();
    // Hosts of several runs: no one run's marks apply.
    let Some(t) = crate::build::host_table(hosts, str::to_string) else {
        o.push_str("<p>No host inventory was recorded.</p>\n");
        return o;
    };
    if t.hosts.len() > 1 {
        o.push_str("<p class=\"small\">Rows where the hosts differ are highlighted.</p>\n");
    }
    let mut g = crate::document::build::host_grid(&t);
    if differences_only {
        // A heading stays only with a differing row under it.
        let rows = std::mem::take(&mut g.rows);
        let mut heading = None;
        for r in rows {
            if r.class.contains(&Class::SubHeading) {
                heading = Some(r);
            } else if r.class.contains(&Class::Differs) {
                g.rows.extend(heading.take());
                g.rows.push(r);
            }
        }
    }
    table(&g, &mut o);
    o
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
    /// HTML and Markdown appendices; with none, both say so.
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
        assert!(md.contains("### Settings changed by each configuration\n\nNone recorded"));
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
                "| tuned | sut | sysctl net.core.rmem_max | 212992 | 16777216 | applied |  |"
            ),
            "{md}"
        );
        // One chart per table, self-contained.
        assert_eq!(html.matches("<svg class=\"chart\"").count(), 1);
        assert!(!html.contains("http"));
    }

    #[test]
    fn nice_ticks() {
        let (lo, hi, t) = crate::svg::ticks(3.2, 97.0);
        assert_eq!((lo, hi), (0.0, 100.0));
        assert_eq!(t.len(), 6);
        let (lo, hi, _) = crate::svg::ticks(5.0, 5.0);
        assert!(lo < 5.0 && hi > 5.0);
    }
}
