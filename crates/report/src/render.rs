//! Renderers: terminal, Markdown, CSV and JSON, all from a [`RunReport`].

use std::fmt::Write;

use crate::format::{advantage_text, cell_text, title_of, write_aligned, write_md_table};
use crate::model::{CurveView, MatrixView, View};
use crate::model::{Row, RunReport, Table};
use crate::views;

/// Output formats of `benchlab show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned text tables.
    Table,
    /// The whole report model as JSON.
    Json,
    /// One line per table cell.
    Csv,
    /// Markdown tables.
    Markdown,
}

/// Renders a report.
pub fn render(report: &RunReport, format: Format) -> String {
    match format {
        Format::Table => terminal(report),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(report).expect("report serializes");
            s.push('\n');
            s
        }
        Format::Csv => csv(report),
        Format::Markdown => markdown(report),
    }
}

/// A table's heading row: configurations that ran on emulated guests
/// carry the mark, on their figures and on their advantages.
fn header(report: &RunReport, t: &Table) -> Vec<String> {
    let mut h = vec![t.row_param.clone()];
    h.extend(t.columns.iter().map(|c| report.label(c)));
    for c in t.columns.iter().skip(1) {
        h.push(format!("{} advantage", report.label(c)));
    }
    h
}

fn row_cells(t: &Table, r: &Row, with_ci: bool) -> Vec<String> {
    let mut v = vec![r.label.clone()];
    v.extend(r.cells.iter().map(|c| cell_text(c, t.decimals, with_ci)));
    v.extend(
        r.advantages
            .iter()
            .map(|a| advantage_text(a, t.advantage_decimals)),
    );
    v
}

/// Markdown rows: as [`row_cells`], plus the n of figures with fewer
/// repetitions than the table's most, and each advantage's 95 % interval.
fn row_cells_md(t: &Table, r: &Row, max_n: usize) -> Vec<String> {
    let mut v = vec![r.label.clone()];
    v.extend(r.cells.iter().map(|c| {
        let mut s = cell_text(c, t.decimals, true);
        if let Some(c) = c {
            if c.values.len() < max_n && r.label != "Average" {
                let _ = write!(s, " n={}", c.values.len());
            }
        }
        s
    }));
    v.extend(r.advantages.iter().map(|a| {
        let mut s = advantage_text(a, t.advantage_decimals);
        if let Some(ci) = a
            .as_ref()
            .and_then(|a| a.comparison.as_ref())
            .and_then(|c| c.ci_pct.as_ref())
        {
            let _ = write!(s, " [{:+.2}, {:+.2}]", ci.lo, ci.hi);
        }
        s
    }));
    v
}

/// The number of repetitions behind a table's figures (min, max).
fn n_range(t: &Table) -> Option<(usize, usize)> {
    let ns: Vec<usize> = t
        .rows
        .iter()
        .flat_map(|r| r.cells.iter().flatten())
        .map(|c| c.values.len())
        .collect();
    Some((*ns.iter().min()?, *ns.iter().max()?))
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
    (level.is_finite() && level < 0.949).then(|| {
        format!(
            "(± here is only a {:.0}% interval: too few repetitions for 95%)",
            level * 100.0
        )
    })
}

use crate::text::legend;

fn terminal(report: &RunReport) -> String {
    let mut out = String::new();
    let r = &report.run;
    let _ = writeln!(
        out,
        "Run {} · study {} · {} · {} → {}{}",
        r.id,
        r.study_name,
        format!("{:?}", r.status).to_lowercase(),
        r.started_at,
        r.ended_at.as_deref().unwrap_or("…"),
        if r.options.quick || r.options.scale != 1.0 {
            format!(
                " · trial run (scale {}{})",
                r.options.scale,
                if r.options.quick { ", quick" } else { "" }
            )
        } else {
            String::new()
        }
    );
    for c in &report.configurations {
        let _ = writeln!(
            out,
            "  configuration {}: {}",
            report.label(&c.name),
            c.description
        );
    }
    if !report.order.is_empty() {
        let _ = writeln!(out, "  order: {}", report.order);
    }
    for h in &report.hosts {
        let inv = &h.inventory;
        let _ = writeln!(
            out,
            "  host {} ({}): {}, {} logical CPUs, kernel {}",
            h.name,
            h.roles,
            inv["cpu"]["model_name"].as_str().unwrap_or("unknown CPU"),
            inv["cpu"]["logical_cpus"].as_u64().unwrap_or(0),
            inv["os"]["kernel_release"].as_str().unwrap_or("?")
        );
    }
    for t in &report.tables {
        out.push('\n');
        let _ = writeln!(out, "{}", title_of(t));
        let mut rows = vec![header(report, t)];
        rows.extend(t.rows.iter().map(|r| row_cells(t, r, true)));
        if let Some(a) = &t.average {
            rows.push(row_cells(t, a, true));
        }
        write_aligned(&mut out, &rows, "  ", true);
        if let Some(note) = confidence_note(t) {
            let _ = writeln!(out, "  {note}");
        }
    }
    views_text(report, false, &mut out);
    crate::series::text(report, false, &mut out);
    crate::monitors::text(&report.monitors, false, &mut out);
    crate::crosscheck::text(&report.crosschecks, false, &mut out);
    if !report.tables.is_empty() {
        out.push('\n');
        out.push_str(&legend(report));
        published_line(report, &mut out);
    }
    emulated_lines(report, &mut out);
    control_text(report, false, &mut out);
    failures(report, &mut out);
    notes_text(report, &mut out, false);
    out
}

/// The A/A control's comparisons (Markdown with `md`): the machine against
/// itself, with the run's false-positive count.
fn control_text(report: &RunReport, md: bool, out: &mut String) {
    let Some(control) = crate::text::control(report) else {
        return;
    };
    let head = &control.summary;
    if md {
        let _ = writeln!(
            out,
            "\n## The machine against itself (A/A control)\n\n{head}\n"
        );
        for line in &control.rows {
            let _ = writeln!(out, "- {}: {}", line.label, line.text);
        }
    } else {
        let _ = writeln!(out, "\nThe machine against itself (A/A control): {head}");
        for line in &control.rows {
            let _ = writeln!(out, "  {}: {}", line.label, line.text);
        }
    }
}

/// The matrix and curve views as text tables (Markdown with `md`).
fn views_text(report: &RunReport, md: bool, out: &mut String) {
    for v in &report.views {
        match v {
            View::Matrix(m) => matrix_text(report, m, md, out),
            View::Curve(c) => curve_text(report, c, md, out),
        }
    }
}

fn view_notes_text(notes: &[String], md: bool, out: &mut String) {
    for n in notes {
        let _ = writeln!(out, "{}{n}", if md { "- " } else { "  " });
    }
    if md && !notes.is_empty() {
        out.push('\n');
    }
}

fn matrix_text(report: &RunReport, v: &MatrixView, md: bool, out: &mut String) {
    let caption = views::caption(&v.workload, &v.fixed);
    let what = format!(
        "{} × {} matrices (rows = {}, columns = {})",
        v.row_param, v.col_param, v.row_param, v.col_param
    );
    if md {
        let _ = writeln!(out, "## {caption}: {what}\n");
    } else {
        let _ = writeln!(out, "\n{caption} · {what}");
    }
    view_notes_text(&v.notes, md, out);
    for m in &v.matrices {
        let title = format!("{} · {}", report.label(&m.configuration), m.title);
        let rows = views::matrix_rows(v, m);
        if md {
            let _ = writeln!(out, "#### {title}\n");
            write_md_table(out, &rows);
            out.push('\n');
        } else {
            let _ = writeln!(out, "  {title}");
            write_aligned(out, &rows, "    ", false);
        }
    }
    let mut rows = views::summary_rows(v);
    crate::emulated::relabel(report, &mut rows[0][1..]);
    let what = format!("{} over the cells of each matrix", v.summary_text());
    if md {
        let _ = writeln!(out, "## {caption}: {what}\n");
        write_md_table(out, &rows);
        out.push('\n');
    } else {
        let _ = writeln!(
            out,
            "\n{caption} · {what} (- = a matrix with a cell without a figure)"
        );
        write_aligned(out, &rows, "  ", false);
    }
}

fn curve_text(report: &RunReport, v: &CurveView, md: bool, out: &mut String) {
    let caption = views::caption(&v.workload, &v.fixed);
    let mut rows = views::curve_rows(v);
    crate::emulated::relabel(report, &mut rows[0][1..]);
    let findings: Vec<String> = v
        .findings
        .iter()
        .map(|f| crate::emulated::finding(report, v, f))
        .collect();
    if md {
        let _ = writeln!(out, "## {caption}: {} against {}\n", v.title, v.x_param);
        write_md_table(out, &rows);
        out.push('\n');
        for f in &findings {
            let _ = writeln!(out, "- {f}");
        }
        out.push('\n');
        view_notes_text(&v.notes, md, out);
    } else {
        let _ = writeln!(out, "\n{caption} · {} against {}", v.title, v.x_param);
        write_aligned(out, &rows, "  ", true);
        for f in &findings {
            let _ = writeln!(out, "  {f}");
        }
        view_notes_text(&v.notes, md, out);
    }
    crate::pairs::text(report, v, md, out);
}

/// The workloads' notes: each remark once, with the points it concerns.
fn notes_text(report: &RunReport, out: &mut String, md: bool) {
    if report.notes.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "{}",
        if md {
            "\n### Notes on the measurements\n"
        } else {
            "\nNotes on the measurements:"
        }
    );
    for n in &report.notes {
        let _ = writeln!(
            out,
            "{}{}: {} ({})",
            if md { "- " } else { "  " },
            n.workload,
            n.text,
            n.points.join("; ")
        );
    }
}

/// The footnote of each configuration that ran on emulated guests.
fn emulated_lines(report: &RunReport, out: &mut String) {
    for line in crate::emulated::footnotes(report) {
        let _ = writeln!(out, "{line}");
    }
}

/// The legend's line on published columns, when there are any.
fn published_line(report: &RunReport, out: &mut String) {
    if let Some(note) = crate::import::published_note(report) {
        let _ = writeln!(out, "{note}");
    }
}

fn failures(report: &RunReport, out: &mut String) {
    if report.failures.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{} repetition(s) without a figure:",
        report.failures.len()
    );
    for f in &report.failures {
        let _ = writeln!(
            out,
            "  {} · {} · {} · repetition {}: {:?}: {}",
            f.configuration, f.workload, f.point, f.repetition, f.status, f.reason
        );
    }
}

fn markdown(report: &RunReport) -> String {
    let mut out = String::new();
    let r = &report.run;
    let _ = writeln!(out, "# {}\n", r.study_name);
    if !r.description.is_empty() {
        let _ = writeln!(out, "{}\n", r.description);
    }
    let _ = writeln!(
        out,
        "Run {} ({:?}), {} → {}.\n",
        r.id,
        r.status,
        r.started_at,
        r.ended_at.as_deref().unwrap_or("…")
    );
    if !report.repetition_rule.is_empty() {
        let _ = writeln!(out, "Repetitions: {}.\n", report.repetition_rule);
    }
    if !report.order.is_empty() {
        let _ = writeln!(out, "Order: {}.\n", report.order);
    }
    for t in &report.tables {
        let _ = writeln!(out, "## {}\n", title_of(t));
        let (min_n, max_n) = n_range(t).unwrap_or((0, 0));
        let mut rows = vec![header(report, t)];
        rows.extend(
            t.rows
                .iter()
                .chain(t.average.iter())
                .map(|row| row_cells_md(t, row, max_n)),
        );
        write_md_table(&mut out, &rows);
        if min_n == max_n {
            let _ = writeln!(out, "\nn = {max_n} repetition(s) per figure.");
        } else {
            let _ = writeln!(
                out,
                "\nn = {min_n} to {max_n} repetitions per figure; n is shown where below {max_n}."
            );
        }
        if let Some(note) = confidence_note(t) {
            let _ = writeln!(out, "{note}");
        }
        out.push('\n');
    }
    views_text(report, true, &mut out);
    crate::series::text(report, true, &mut out);
    crate::monitors::text(&report.monitors, true, &mut out);
    if !report.crosschecks.is_empty() {
        crate::crosscheck::text(&report.crosschecks, true, &mut out);
        out.push('\n');
    }
    out.push_str(&legend(report));
    published_line(report, &mut out);
    emulated_lines(report, &mut out);
    out.push_str("[a, b] after an advantage: its 95% confidence interval in percent.\n");
    control_text(report, true, &mut out);
    failures(report, &mut out);
    notes_text(report, &mut out, true);
    appendix(report, &mut out);
    services_md(report, &mut out);
    settings_md(report, &mut out);
    methodology_md(report, &mut out);
    out
}

/// The settings each configuration changed, before → after.
fn settings_md(report: &RunReport, out: &mut String) {
    if report.settings.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n### Settings changed by each configuration\n");
    let _ = writeln!(
        out,
        "| configuration | host | setting | before → after | status | note |\n|---|---|---|---|---|---|"
    );
    for s in &report.settings {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} → {} | {} | {} |",
            s.configuration,
            s.host,
            s.setting,
            s.before.as_deref().unwrap_or("(absent)"),
            s.after.as_deref().unwrap_or("(absent)"),
            s.status.name(),
            s.note.as_deref().unwrap_or("")
        );
    }
}

/// Appendix B: the rules and methods behind every figure, and the study
/// file verbatim.
fn methodology_md(report: &RunReport, out: &mut String) {
    let r = &report.run;
    let _ = writeln!(out, "\n## Appendix B — methodology\n");
    for line in crate::text::methodology(report) {
        let _ = writeln!(out, "- **{}**: {}", line.label, line.text);
    }
    steps_md(report, out);
    if !r.study_text.is_empty() {
        let _ = writeln!(
            out,
            "\nThe study file ({}):\n\n```toml\n{}\n```",
            r.study_file,
            r.study_text.trim_end()
        );
    }
}

/// The reproduced study's steps and their status here (`[[study.step]]`):
/// deviations on the record.
fn steps_md(report: &RunReport, out: &mut String) {
    if report.steps.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n### Steps of the reproduced study, and what became of them here\n\n| step | status here |\n|---|---|"
    );
    for s in &report.steps {
        let _ = writeln!(
            out,
            "| {} | {} |",
            s.step.replace('|', "\\|"),
            s.status.text().replace('|', "\\|")
        );
    }
}

/// The servers the run started: name, version, placement and the effective
/// configuration file verbatim (part of Appendix A: what was measured).
fn services_md(report: &RunReport, out: &mut String) {
    if report.services.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n### Servers\n");
    let _ = writeln!(
        out,
        "| configuration | service | server | placement | configuration file |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for s in &report.services {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            s.configuration.replace('|', "\\|"),
            s.name.replace('|', "\\|"),
            s.version().replace('|', "\\|"),
            s.placement().replace('|', "\\|"),
            s.config_origin().replace('|', "\\|")
        );
    }
    for s in &report.services {
        let config = s.config();
        if config.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "\n`{}` in `{}` ({}), as it ran:\n\n```\n{}\n```",
            s.name,
            s.configuration,
            s.version(),
            config.trim_end()
        );
    }
}

/// Appendix A of the seeds: every host's system configuration, one column
/// per host, from the inventories collected at the start of the run.
fn appendix(report: &RunReport, out: &mut String) {
    let Some(table) = crate::build::host_table(&report.hosts) else {
        return;
    };
    let _ = writeln!(out, "\n## Appendix A — system configuration\n");
    out.push_str(&table.markdown());
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv(report: &RunReport) -> String {
    let mut out = String::from(
        "run,workload,kind,metric,fixed,row_param,row,configuration,value,ci_lo,ci_hi,ci_level,n,failed,advantage_pct,verdict\n",
    );
    for t in &report.tables {
        for row in t.rows.iter().chain(t.average.iter()) {
            for (c, cell) in row.cells.iter().enumerate() {
                let Some(cell) = cell else { continue };
                let adv = if c == 0 {
                    None
                } else {
                    row.advantages[c - 1].as_ref()
                };
                let ci = cell.ci.as_ref();
                let fields = [
                    report.run.id.to_string(),
                    t.workload.clone(),
                    t.kind.clone(),
                    t.metric.clone(),
                    t.fixed.clone(),
                    t.row_param.clone(),
                    row.label.clone(),
                    t.columns[c].clone(),
                    cell.value.to_string(),
                    ci.map(|i| i.lo.to_string()).unwrap_or_default(),
                    ci.map(|i| i.hi.to_string()).unwrap_or_default(),
                    ci.map(|i| i.level.to_string()).unwrap_or_default(),
                    cell.values.len().to_string(),
                    cell.failed.to_string(),
                    adv.map(|a| a.pct.to_string()).unwrap_or_default(),
                    adv.and_then(|a| a.comparison.as_ref())
                        .and_then(|c| serde_json::to_value(c.verdict).ok())
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                ];
                let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
                let _ = writeln!(out, "{}", line.join(","));
            }
        }
    }
    out
}

/// Every raw repetition of every point and metric, one line each (failed
/// repetitions with an empty value): the data behind every figure.
pub fn repetitions_csv(report: &RunReport) -> String {
    let mut out = String::from("run,configuration,workload,kind,point,metric,repetition,value\n");
    for p in &report.points {
        for (metric, values) in &p.metrics {
            for (rep, v) in values.iter().enumerate() {
                let fields = [
                    report.run.id.to_string(),
                    p.configuration.clone(),
                    p.workload.clone(),
                    p.kind.clone(),
                    p.label.clone(),
                    metric.clone(),
                    rep.to_string(),
                    if v.is_finite() {
                        v.to_string()
                    } else {
                        String::new()
                    },
                ];
                let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
                let _ = writeln!(out, "{}", line.join(","));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchlab_core::study::Selection;

    /// A matrix view in the terminal and in Markdown, exactly: sizes as
    /// labels, an unplanned cell as "-", notes under the heading, and the
    /// summary table (the geometric mean of 4, 16 and 8 is 8).
    #[test]
    fn matrix_view_text() {
        use benchlab_core::{MatrixSummary, Value, ViewSpec};
        let point = |f: i64, r: i64, v: f64| crate::model::PointResult {
            configuration: "a".into(),
            workload: "io".into(),
            kind: "k".into(),
            label: String::new(),
            params: [("file", f), ("rec", r)]
                .iter()
                .map(|(k, x)| (k.to_string(), Value::Int(*x)))
                .collect(),
            metrics: [("rate".to_string(), vec![v])].into_iter().collect(),
            summaries: Default::default(),
        };
        let points = vec![
            point(1024, 1024, 4.0),
            point(2048, 1024, 16.0),
            point(2048, 2048, 8.0),
        ];
        let plan = crate::model::WorkloadPlan {
            workload: "io".into(),
            kind: "k".into(),
            views: vec![ViewSpec::Matrix {
                row_param: "file".into(),
                col_param: "rec".into(),
                metrics: vec!["rate".into()],
                summary: MatrixSummary::GeoMean,
            }],
            metrics: Vec::new(),
            byte_params: vec!["file".into(), "rec".into()],
            table_metrics: Vec::new(),
        };
        let notes = |_: &[&crate::model::PointResult]| vec!["a note".to_string()];
        let text = format!("{}\nt,higher,,size,1,2,1,a,10\n", crate::import::HEADER);
        let mut r = crate::import::figures_csv("s", &text).unwrap();
        r.views = crate::views::build(&[plan], &points, &["a".into()], Selection::Median, &notes);
        let mut term = String::new();
        views_text(&r, false, &mut term);
        assert_eq!(
            term,
            "\nio · file × rec matrices (rows = file, columns = rec)\n  a note\n  a · rate\n    file \\ rec  1KiB  2KiB\n          1KiB     4     -\n          2KiB    16     8\n\nio · geometric mean over the cells of each matrix (- = a matrix with a cell without a figure)\n        a\n  rate  8\n"
        );
        let mut md = String::new();
        views_text(&r, true, &mut md);
        assert_eq!(
            md,
            "## io: file × rec matrices (rows = file, columns = rec)\n\n- a note\n\n#### a · rate\n\n| file \\ rec | 1KiB | 2KiB |\n|---:|---:|---:|\n| 1KiB | 4 | - |\n| 2KiB | 16 | 8 |\n\n## io: geometric mean over the cells of each matrix\n\n|  | a |\n|---:|---:|\n| rate | 8 |\n\n"
        );
    }
}
