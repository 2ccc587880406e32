//! `render`: a [`RunReport`] in one of `show`'s formats: the terminal
//! and Markdown writers over its [`crate::Document`], CSV and JSON from
//! the model.

use std::fmt::Write;

use crate::model::RunReport;

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

/// Renders a report (the terminal's summary at [`crate::terminal::PIPE_WIDTH`]
/// columns for [`Format::Table`]).
pub fn render(report: &RunReport, format: Format) -> String {
    render_with(report, format, crate::Layout::default())
}

/// Renders a report, the terminal's text laid out as `layout` says.
pub fn render_with(report: &RunReport, format: Format, layout: crate::Layout) -> String {
    match format {
        Format::Table => crate::terminal::write(&crate::document::build(report), layout),
        Format::Markdown => crate::markdown::write(&crate::document::build(report)),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(report).expect("report serializes");
            s.push('\n');
            s
        }
        Format::Csv => csv(report),
    }
}

/// A CSV field: a cell a spreadsheet would run as a formula (one that
/// begins with `=`, `+`, `-`, `@`, a tab or a carriage return) gets a `'`
/// before it, unless it is a number (`-3.2` stays a number); then quoted
/// where it holds a comma, a quote or a line break (RFC 4180). See
/// docs/csv.md.
pub fn csv_field(s: &str) -> String {
    let formula = s.starts_with(['=', '+', '-', '@', '\t', '\r'])
        && !s.parse::<f64>().is_ok_and(f64::is_finite);
    let s = if formula {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn csv(report: &RunReport) -> String {
    let mut out = String::from(
        "run,workload,kind,metric,fixed,row_param,row,configuration,value,ci_lo,ci_hi,ci_level,n,failed,advantage_pct,verdict,margin_pct,verdict_repetitions,verdict_ci_lo,verdict_ci_hi,mde_pct\n",
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
                let d = (c > 0 && row.label != "Average")
                    .then(|| crate::document::marks::decision_at(report, t, &row.label, c))
                    .flatten()
                    .filter(|_| adv.is_some_and(|a| a.decided.is_some()));
                let num = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
                let fields = [
                    report.run.id.to_string(),
                    t.workload.clone(),
                    t.kind.clone(),
                    t.metric.clone(),
                    t.fixed.clone(),
                    t.row_param.clone(),
                    row.label.clone(),
                    crate::document::marks::configuration(report, &t.columns[c]),
                    cell.value.to_string(),
                    ci.map(|i| i.lo.to_string()).unwrap_or_default(),
                    ci.map(|i| i.hi.to_string()).unwrap_or_default(),
                    ci.map(|i| i.level.to_string()).unwrap_or_default(),
                    cell.values.len().to_string(),
                    cell.failed.to_string(),
                    adv.map(|a| a.pct.to_string()).unwrap_or_default(),
                    adv.and_then(|a| a.decided)
                        .map(|v| v.as_str().to_string())
                        .unwrap_or_default(),
                    num(d.map(|d| d.margin_pct)),
                    d.map(|d| d.repetitions.to_string()).unwrap_or_default(),
                    num(d.and_then(|d| d.ci_lo_pct)),
                    num(d.and_then(|d| d.ci_hi_pct)),
                    num(d.and_then(|d| d.mde_pct)),
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
                    crate::document::marks::configuration(report, &p.configuration),
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

    /// Cells a spreadsheet would run as formulas are neutralized; numbers,
    /// negative ones too, stay numbers; quoting still applies.
    #[test]
    fn csv_cells_never_run_as_formulas() {
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("+1+1"), "'+1+1");
        assert_eq!(csv_field("-2+3"), "'-2+3");
        assert_eq!(csv_field("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_field("\tx"), "'\tx");
        assert_eq!(csv_field("\rx"), "\"'\rx\"");
        assert_eq!(csv_field("-3.2"), "-3.2");
        assert_eq!(csv_field("+4"), "+4");
        assert_eq!(csv_field("-1e-5"), "-1e-5");
        assert_eq!(csv_field("-inf"), "'-inf");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("plain"), "plain");
        // Through the writer: a configuration named as a formula.
        let text = format!(
            "{}\nt,higher,,size,1,2,1,base,10\nt,higher,,size,1,2,1,=cmd,-5\n",
            crate::import::HEADER
        );
        let r = crate::import::figures_csv("s", &text).unwrap();
        let out = render(&r, Format::Csv);
        assert!(
            out.contains(",\"'=cmd (published, not measured)\","),
            "{out}"
        );
        assert!(!out.contains(",=cmd"), "{out}");
        assert!(out.contains(",-5,"), "{out}");
    }

    /// A matrix view in the terminal (with the detail) and in Markdown:
    /// sizes as labels, an unplanned cell as "-", notes under the
    /// heading, and the summary table (the geometric mean of 4, 16 and 8
    /// is 8).
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
        r.tables.clear();
        r.views = crate::views::build(&[plan], &points, &["a".into()], Selection::Median, &notes);
        let verbose = crate::Layout {
            width: 100,
            verbose: true,
        };
        let term = render_with(&r, Format::Table, verbose);
        let matrix = "\nio: file × rec matrices (rows = file, columns = rec)\n  Rows = file, columns = rec; in HTML each heat map has its own colour scale, from its worst cell\n    (dark) to its best (yellow), logarithmic when its figures span a factor of ten or more.\n  - a note\n  a · rate\n  file \\ rec  1KiB  2KiB\n        1KiB     4     -\n        2KiB    16     8\n";
        assert!(term.contains(matrix), "{term}");
        let summary = "\nio: geometric mean over the cells of each matrix\n        a\n  rate  8\n  - = a matrix with a cell without a figure\n";
        assert!(term.contains(summary), "{term}");
        // The summary has the matrices too: they are the results.
        let summary = render(&r, Format::Table);
        assert!(summary.contains(matrix), "{summary}");
        assert!(
            summary.contains("\nio: geometric mean over the cells"),
            "{summary}"
        );
        let md = render(&r, Format::Markdown);
        assert!(
            md.contains("#### io: file × rec matrices (rows = file, columns = rec)\n\nRows = file"),
            "{md}"
        );
        assert!(
            md.contains("- a note\n\na · rate\n\n| file \\ rec | 1KiB | 2KiB |\n|---:|---:|---:|\n| 1KiB | 4 | - |\n| 2KiB | 16 | 8 |\n"),
            "{md}"
        );
        assert!(
            md.contains("##### io: geometric mean over the cells of each matrix\n\n|  | a |\n|---:|---:|\n| rate | 8 |\n"),
            "{md}"
        );
    }
}
