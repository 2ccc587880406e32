//! The report views a workload declares ([`ViewSpec`]: table, matrix,
//! curve), built once from the stored figures into plain data that every
//! renderer — terminal, Markdown, HTML, JSON — draws without knowing the
//! workload.
//!
//! The entry point, [`build`], takes each workload's views and metric
//! descriptions as plain data ([`WorkloadPlan`]): today they come from the
//! registry at report time, later from the plan stored with the run.
//! Tables stay in [`crate::model::Table`] (they carry verdicts, and
//! `compare` works on them); this module builds the matrix and curve
//! views.
//!
//! Which points share a matrix or a curve is read from the points' typed
//! parameters: the parameters that take more than one value within a
//! configuration are the swept ones, and every combination of the swept
//! parameters other than the view's axes is a view of its own (`cache =
//! direct`). Nothing is parsed out of point labels.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use benchlab_core::study::Selection;
use benchlab_core::units::format_size;
use benchlab_core::{Better, MatrixSummary, Value, ViewSpec};
use benchlab_stats as stats;

use crate::format::group_thousands;
use crate::model::{
    CurveLine, CurvePoint, CurveView, Decline, Matrix, MatrixView, Notes, Peak, PeakRatio,
    PointResult, View, WorkloadPlan,
};

/// `x` of parameter `param` in words: `1 client`, `48 clients`,
/// `file_size 4MiB`.
pub fn x_words(param: &str, x: &str) -> String {
    if param == benchlab_core::shape::CLIENTS {
        if x == "1" {
            "1 client".into()
        } else {
            format!("{x} clients")
        }
    } else {
        format!("{param} {x}")
    }
}

/// A metric key in words: `requests_per_s` → `requests per s`.
fn metric_words(name: &str) -> String {
    name.replace('_', " ")
}

/// The parameters that take more than one value within a configuration.
fn swept(points: &[&PointResult]) -> BTreeSet<String> {
    let mut values: BTreeMap<(&str, &str), BTreeSet<String>> = BTreeMap::new();
    for p in points {
        for (k, v) in &p.params {
            values
                .entry((p.configuration.as_str(), k.as_str()))
                .or_default()
                .insert(v.label());
        }
    }
    values
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|((_, k), _)| k.to_string())
        .collect()
}

/// `k=v k=v` of the swept parameters other than `axes`.
fn group_key(p: &PointResult, swept: &BTreeSet<String>, axes: &[&str]) -> String {
    swept
        .iter()
        .filter(|k| !axes.contains(&k.as_str()))
        .map(|k| {
            format!(
                "{k}={}",
                p.params.get(k).map(Value::label).unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Points grouped by [`group_key`], groups in order of first appearance.
fn groups<'a>(
    points: &[&'a PointResult],
    swept: &BTreeSet<String>,
    axes: &[&str],
) -> Vec<(String, Vec<&'a PointResult>)> {
    let mut out: Vec<(String, Vec<&PointResult>)> = Vec::new();
    for p in points {
        let g = group_key(p, swept, axes);
        match out.iter_mut().find(|(k, _)| *k == g) {
            Some((_, v)) => v.push(p),
            None => out.push((g, vec![p])),
        }
    }
    out
}

/// An axis: its values' labels in numeric (then text) order, with their
/// numbers, and how each label is shown.
struct Axis {
    keys: Vec<String>,
    values: Vec<f64>,
    shown: Vec<String>,
}

fn axis(points: &[&PointResult], param: &str, bytes: bool) -> Axis {
    let mut vals: Vec<(f64, String)> = Vec::new();
    for p in points {
        let Some(v) = p.params.get(param) else {
            continue;
        };
        let k = v.label();
        if !vals.iter().any(|x| x.1 == k) {
            vals.push((v.as_f64().unwrap_or(f64::NAN), k));
        }
    }
    vals.sort_by(|a, b| {
        a.0.partial_cmp(&b.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.1.cmp(&b.1))
    });
    let shown = vals
        .iter()
        .map(|(f, k)| {
            if bytes && f.is_finite() && *f >= 0.0 {
                format_size(*f as u64)
            } else {
                k.clone()
            }
        })
        .collect();
    Axis {
        values: vals.iter().map(|v| v.0).collect(),
        keys: vals.into_iter().map(|v| v.1).collect(),
        shown,
    }
}

fn label_of(p: &PointResult, param: &str) -> String {
    p.params.get(param).map(Value::label).unwrap_or_default()
}

/// The quoted figure of a point's metric and its repetitions.
fn quoted(p: &PointResult, metric: &str, sel: Selection) -> Option<CurvePoint> {
    let all = p.metrics.get(metric)?;
    let ok: Vec<f64> = all.iter().copied().filter(|x| x.is_finite()).collect();
    let (value, ci) = crate::figures::quoted(&ok, None, sel)?;
    Some(CurvePoint {
        value,
        ci,
        n: ok.len(),
    })
}

/// Builds every matrix and curve view of a run: for each workload plan,
/// the views it declares, from the points of that workload.
/// `configurations` are the configuration names in study order.
pub fn build(
    plans: &[WorkloadPlan],
    points: &[PointResult],
    configurations: &[String],
    selection: Selection,
    notes: Notes,
) -> Vec<View> {
    let mut out = Vec::new();
    for plan in plans {
        let wpoints: Vec<&PointResult> = points
            .iter()
            .filter(|p| p.workload == plan.workload)
            .collect();
        if wpoints.is_empty() {
            continue;
        }
        let swept = swept(&wpoints);
        for spec in &plan.views {
            match spec {
                ViewSpec::Table { .. } | ViewSpec::Series { .. } => {}
                ViewSpec::Matrix {
                    row_param,
                    col_param,
                    metrics,
                    summary,
                } => {
                    let axes = [row_param.as_str(), col_param.as_str()];
                    for (fixed, gp) in groups(&wpoints, &swept, &axes) {
                        out.push(View::Matrix(matrix_view(
                            plan,
                            (row_param, col_param),
                            metrics,
                            *summary,
                            fixed,
                            &gp,
                            configurations,
                            selection,
                            notes,
                        )));
                    }
                }
                ViewSpec::Curve { x_param, metric } => {
                    for (fixed, gp) in groups(&wpoints, &swept, &[x_param.as_str()]) {
                        out.push(View::Curve(curve_view(
                            plan,
                            x_param,
                            metric,
                            fixed,
                            &gp,
                            configurations,
                            selection,
                            notes,
                        )));
                    }
                }
            }
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn matrix_view(
    plan: &WorkloadPlan,
    (row_param, col_param): (&str, &str),
    metrics: &[String],
    summary: MatrixSummary,
    fixed: String,
    points: &[&PointResult],
    configurations: &[String],
    selection: Selection,
    notes: Notes,
) -> MatrixView {
    let bytes = |p: &str| plan.byte_params.iter().any(|b| b == p);
    let rows = axis(points, row_param, bytes(row_param));
    let cols = axis(points, col_param, bytes(col_param));
    let mut matrices = Vec::new();
    for c in configurations {
        let cpoints: Vec<&PointResult> = points
            .iter()
            .copied()
            .filter(|p| &p.configuration == c)
            .collect();
        if cpoints.is_empty() {
            continue;
        }
        let at = |r: &str, k: &str| {
            cpoints
                .iter()
                .copied()
                .find(|p| label_of(p, row_param) == r && label_of(p, col_param) == k)
        };
        for m in metrics {
            // A metric no point of the view measured (a pattern left out)
            // gets no matrix at all.
            if !points.iter().any(|p| p.metrics.contains_key(m)) {
                continue;
            }
            let info = plan.metric(m);
            let mut planned = 0;
            let mut figures = Vec::new();
            let cells: Vec<Vec<Option<f64>>> = rows
                .keys
                .iter()
                .map(|r| {
                    cols.keys
                        .iter()
                        .map(|k| {
                            let p = at(r, k)?;
                            planned += 1;
                            let v = quoted(p, m, selection).map(|q| q.value);
                            figures.extend(v);
                            v
                        })
                        .collect()
                })
                .collect();
            let summary_value = (planned > 0 && figures.len() == planned)
                .then(|| summarise(summary, &figures))
                .flatten();
            matrices.push(Matrix {
                configuration: c.clone(),
                metric: m.clone(),
                title: info.label,
                decimals: info.decimals,
                better: info.better,
                cells,
                summary: summary_value,
            });
        }
    }
    MatrixView {
        workload: plan.workload.clone(),
        kind: plan.kind.clone(),
        fixed,
        row_param: row_param.to_string(),
        col_param: col_param.to_string(),
        rows: rows.shown,
        cols: cols.shown,
        summary,
        notes: notes(points),
        matrices,
    }
}

#[allow(clippy::too_many_arguments)]
fn curve_view(
    plan: &WorkloadPlan,
    x_param: &str,
    metric: &str,
    fixed: String,
    points: &[&PointResult],
    configurations: &[String],
    selection: Selection,
    notes: Notes,
) -> CurveView {
    let info = plan.metric(metric);
    let bytes = plan.byte_params.iter().any(|b| b == x_param);
    let xs = axis(points, x_param, bytes);
    let mut lines = Vec::new();
    for c in configurations {
        let cpoints: Vec<&PointResult> = points
            .iter()
            .copied()
            .filter(|p| &p.configuration == c)
            .collect();
        if cpoints.is_empty() {
            continue;
        }
        let pts: Vec<Option<CurvePoint>> = xs
            .keys
            .iter()
            .map(|x| {
                let p = cpoints.iter().find(|p| label_of(p, x_param) == *x)?;
                quoted(p, metric, selection)
            })
            .collect();
        let peak = peak_of(&pts, &xs.shown, info.better);
        lines.push(CurveLine {
            configuration: c.clone(),
            points: pts,
            peak,
        });
    }
    let ratios = ratios(&lines, info.better);
    let mut view = CurveView {
        workload: plan.workload.clone(),
        kind: plan.kind.clone(),
        fixed,
        x_param: x_param.to_string(),
        metric: metric.to_string(),
        title: info.label,
        decimals: info.decimals,
        better: info.better,
        x: xs.shown,
        x_values: xs.values,
        lines,
        ratios,
        notes: notes(points),
        findings: Vec::new(),
        pairs: Vec::new(),
    };
    view.findings = findings(&view);
    view
}

/// The best figure of a line (the first of equal ones) and the drop from
/// there to the line's last figure.
fn peak_of(points: &[Option<CurvePoint>], x: &[String], better: Better) -> Option<Peak> {
    let mut best: Option<(usize, f64)> = None;
    for (i, p) in points.iter().enumerate() {
        let Some(p) = p else { continue };
        let wins = match best {
            None => true,
            Some((_, b)) => match better {
                Better::Higher => p.value > b,
                Better::Lower => p.value < b,
            },
        };
        if wins {
            best = Some((i, p.value));
        }
    }
    let (index, value) = best?;
    let last = points
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, p)| p.as_ref().map(|p| (i, p.value)));
    let decline = last.filter(|(i, _)| *i > index).map(|(i, v)| Decline {
        x: x[i].clone(),
        value: v,
        pct: if value != 0.0 {
            match better {
                Better::Higher => (value - v) / value.abs() * 100.0,
                Better::Lower => (v - value) / value.abs() * 100.0,
            }
        } else {
            f64::NAN
        },
    });
    Some(Peak {
        index,
        x: x[index].clone(),
        value,
        decline,
    })
}

fn ratios(lines: &[CurveLine], better: Better) -> Vec<PeakRatio> {
    let mut with_peak = lines.iter().filter_map(|l| Some((l, l.peak.as_ref()?)));
    let Some((base, bp)) = with_peak.next() else {
        return Vec::new();
    };
    with_peak
        .filter_map(|(l, p)| {
            let ratio = match better {
                Better::Higher => p.value / bp.value,
                Better::Lower => bp.value / p.value,
            };
            ratio.is_finite().then(|| PeakRatio {
                configuration: l.configuration.clone(),
                baseline: base.configuration.clone(),
                ratio,
            })
        })
        .collect()
}

/// The sentences under a curve: seed 004's reading of its Figure 2 (where
/// each server peaks, how it degrades past the peak, "N times faster").
pub(crate) fn findings(v: &CurveView) -> Vec<String> {
    let mut out = Vec::new();
    let what = metric_words(&v.metric);
    for l in &v.lines {
        let Some(p) = &l.peak else {
            out.push(format!("{} has no figure.", l.configuration));
            continue;
        };
        let value = group_thousands(p.value, v.decimals);
        let (peaks, falls) = match v.better {
            Better::Higher => ("peaks", "falls"),
            Better::Lower => ("is best", "rises"),
        };
        let mut s = format!(
            "{} {peaks} at {} with {value} {what}",
            l.configuration,
            x_words(&v.x_param, &p.x)
        );
        match &p.decline {
            Some(d) => {
                let _ = write!(
                    s,
                    ", then {falls} {:.1} % by {}.",
                    d.pct,
                    x_words(&v.x_param, &d.x)
                );
            }
            None if v.x.len() > 1 && p.index + 1 == v.x.len() => {
                s.push_str(" (its last point: no decline measured).");
            }
            None => s.push('.'),
        }
        out.push(s);
    }
    let peak_of = |name: &str| {
        v.lines
            .iter()
            .find(|l| l.configuration == name)
            .and_then(|l| l.peak.as_ref())
    };
    for r in &v.ratios {
        let (Some(a), Some(b)) = (peak_of(&r.configuration), peak_of(&r.baseline)) else {
            continue;
        };
        let fmt = |x: f64| group_thousands(x, v.decimals);
        out.push(if r.ratio >= 1.0 {
            format!(
                "At their peaks {} is {:.2}× faster than {} ({} against {} {what}).",
                r.configuration,
                r.ratio,
                r.baseline,
                fmt(a.value),
                fmt(b.value)
            )
        } else {
            format!(
                "At their peaks {} is {:.2}× faster than {} ({} against {} {what}).",
                r.baseline,
                1.0 / r.ratio,
                r.configuration,
                fmt(b.value),
                fmt(a.value)
            )
        });
    }
    out
}

/// The metric key of a matrix summary table: `mean_kib_s` →
/// `mean_kib_s_over_cells`.
pub fn summary_metric(metric: &str) -> String {
    format!("{metric}_over_cells")
}

/// The caption of a matrix summary table, which states the formula:
/// "Geometric mean over the cells of each cell's mean over the patterns
/// (KiB/s)".
pub fn summary_title(summary: MatrixSummary, label: &str) -> String {
    let what = match summary {
        MatrixSummary::GeoMean => "Geometric mean",
        MatrixSummary::Mean => "Mean",
    };
    let mut chars = label.chars();
    let label = match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    };
    format!("{what} over the cells of each cell's {label}")
}

/// A matrix's summary over cells (`None` unless every cell has a positive,
/// finite figure for a geometric mean, a finite one for a mean: a summary
/// over fewer cells would compare different matrices).
pub fn summarise(summary: MatrixSummary, cells: &[f64]) -> Option<f64> {
    if cells.is_empty() || cells.iter().any(|x| !x.is_finite()) {
        return None;
    }
    match summary {
        MatrixSummary::GeoMean => stats::geometric_mean(cells),
        MatrixSummary::Mean => stats::mean(cells),
    }
}

/// The summaries of the matrices of the workloads' table metrics as
/// ordinary tables (seed 001's Figure 1: the geometric mean over the cells
/// of each cell's mean over the patterns), so that every renderer shows
/// them with advantages and verdicts: rows are the other swept parameters'
/// values (the cache mode), columns the configurations. Each figure's
/// repetitions are the summaries of each repetition over the cells that
/// all have it. Advantages have one decimal, as seed 001 prints them.
pub fn summary_tables(
    plans: &[WorkloadPlan],
    points: &[PointResult],
    configurations: &[String],
    selection: Selection,
) -> Vec<crate::model::Table> {
    use crate::figures::advantages;
    use crate::model::{Cell, Row, Table};
    let mut out = Vec::new();
    for plan in plans {
        let wpoints: Vec<&PointResult> = points
            .iter()
            .filter(|p| p.workload == plan.workload)
            .collect();
        if wpoints.is_empty() {
            continue;
        }
        let swept = swept(&wpoints);
        for spec in &plan.views {
            let ViewSpec::Matrix {
                row_param,
                col_param,
                metrics,
                summary,
            } = spec
            else {
                continue;
            };
            let axes = [row_param.as_str(), col_param.as_str()];
            let groups = groups(&wpoints, &swept, &axes);
            // One other swept parameter (`cache`): it names the rows.
            let others: Vec<&String> = swept
                .iter()
                .filter(|k| !axes.contains(&k.as_str()))
                .collect();
            let (row_param, single) = match others.as_slice() {
                [one] => ((*one).clone(), true),
                _ => ("swept".to_string(), false),
            };
            for m in metrics.iter().filter(|m| plan.table_metrics.contains(m)) {
                let info = plan.metric(m);
                let rows: Vec<Row> = groups
                    .iter()
                    .map(|(g, gp)| {
                        let cells: Vec<Option<Cell>> = configurations
                            .iter()
                            .map(|c| {
                                let cp: Vec<&PointResult> = gp
                                    .iter()
                                    .copied()
                                    .filter(|p| &p.configuration == c)
                                    .collect();
                                summary_cell(&cp, m, *summary, selection)
                            })
                            .collect();
                        let label = if single {
                            g.split_once('=').map(|x| x.1).unwrap_or(g).to_string()
                        } else if g.is_empty() {
                            "-".to_string()
                        } else {
                            g.clone()
                        };
                        let better = info.better;
                        Row {
                            label,
                            advantages: advantages(&cells, better),
                            cells,
                        }
                    })
                    .collect();
                out.push(Table {
                    workload: plan.workload.clone(),
                    kind: plan.kind.clone(),
                    metric: summary_metric(m),
                    title: summary_title(*summary, &info.label),
                    fixed: String::new(),
                    row_param: row_param.clone(),
                    better: info.better,
                    decimals: info.decimals,
                    advantage_decimals: 1,
                    columns: configurations.to_vec(),
                    rows,
                    average: None,
                });
            }
        }
    }
    out
}

/// One summary figure: the summary of the cells' quoted figures, and the
/// summary of each repetition that every cell has.
fn summary_cell(
    points: &[&PointResult],
    metric: &str,
    summary: MatrixSummary,
    selection: Selection,
) -> Option<crate::model::Cell> {
    let all: Vec<&Vec<f64>> = points
        .iter()
        .map(|p| p.metrics.get(metric))
        .collect::<Option<_>>()?;
    if all.is_empty() {
        return None;
    }
    let quoted: Vec<f64> = all
        .iter()
        .map(|m| {
            let ok: Vec<f64> = m.iter().copied().filter(|x| x.is_finite()).collect();
            crate::figures::quoted(&ok, None, selection).map(|q| q.0)
        })
        .collect::<Option<_>>()?;
    let value = summarise(summary, &quoted)?;
    let reps = all.iter().map(|m| m.len()).max().unwrap_or(0);
    let values: Vec<f64> = (0..reps)
        .filter_map(|r| {
            let at: Vec<f64> = all
                .iter()
                .map(|m| m.get(r).copied().unwrap_or(f64::NAN))
                .collect();
            summarise(summary, &at)
        })
        .collect();
    let failed = reps - values.len();
    Some(crate::model::Cell {
        value,
        ci: None,
        values,
        failed,
        blocks: Vec::new(),
    })
}

/// One column of a comparison of views: its label (`3:optimized`), the
/// matching view of its run's report (if that run has one) and the
/// configuration whose line or matrices it takes.
pub struct Column<'a, V> {
    /// Column label.
    pub label: String,
    /// The matching view of the column's run.
    pub view: Option<&'a V>,
    /// The configuration of that run.
    pub configuration: String,
}

/// Whether two curves show the same thing (possibly of different runs).
pub fn same_curve(a: &CurveView, b: &CurveView) -> bool {
    (&a.workload, &a.fixed, &a.x_param, &a.metric) == (&b.workload, &b.fixed, &b.x_param, &b.metric)
}

/// Whether two matrix views show the same thing.
pub fn same_matrices(a: &MatrixView, b: &MatrixView) -> bool {
    (&a.workload, &a.fixed, &a.row_param, &a.col_param)
        == (&b.workload, &b.fixed, &b.row_param, &b.col_param)
}

/// `base` with one line per column (`compare`): each column's line on
/// `base`'s x values (matched by label), peaks, ratios and findings
/// computed again over the new lines.
pub fn compare_curve(base: &CurveView, columns: &[Column<CurveView>]) -> CurveView {
    let mut lines = Vec::new();
    for c in columns {
        let Some(v) = c.view else { continue };
        let Some(line) = v.lines.iter().find(|l| l.configuration == c.configuration) else {
            continue;
        };
        let points: Vec<Option<CurvePoint>> = base
            .x
            .iter()
            .map(|x| {
                let i = v.x.iter().position(|y| y == x)?;
                line.points.get(i).cloned().flatten()
            })
            .collect();
        let peak = peak_of(&points, &base.x, base.better);
        lines.push(CurveLine {
            configuration: c.label.clone(),
            points,
            peak,
        });
    }
    let mut out = CurveView {
        lines,
        ratios: Vec::new(),
        findings: Vec::new(),
        // The study's pairs name one run's configurations: the caller
        // carries those whose both sides are columns (`pairs::carried`).
        pairs: Vec::new(),
        ..base.clone()
    };
    out.ratios = ratios(&out.lines, out.better);
    out.findings = findings(&out);
    out
}

/// `base` with each column's matrices (`compare`), cells placed on
/// `base`'s rows and columns by label.
pub fn compare_matrices(base: &MatrixView, columns: &[Column<MatrixView>]) -> MatrixView {
    let mut matrices = Vec::new();
    for c in columns {
        let Some(v) = c.view else { continue };
        for m in v
            .matrices
            .iter()
            .filter(|m| m.configuration == c.configuration)
        {
            let cells = base
                .rows
                .iter()
                .map(|r| {
                    base.cols
                        .iter()
                        .map(|k| {
                            let i = v.rows.iter().position(|x| x == r)?;
                            let j = v.cols.iter().position(|x| x == k)?;
                            m.cells.get(i)?.get(j).copied().flatten()
                        })
                        .collect()
                })
                .collect();
            matrices.push(Matrix {
                configuration: c.label.clone(),
                cells,
                ..m.clone()
            });
        }
    }
    MatrixView {
        matrices,
        ..base.clone()
    }
}

/// The caption of a view: workload, then the fixed parameters.
pub fn caption(workload: &str, fixed: &str) -> String {
    if fixed.is_empty() {
        workload.to_string()
    } else {
        format!("{workload} · {fixed}")
    }
}

/// A curve's figures as rows of text: the header (x parameter, then the
/// configurations), then one row per x value.
pub fn curve_rows(v: &CurveView) -> Vec<Vec<String>> {
    let mut head = vec![v.x_param.clone()];
    head.extend(v.lines.iter().map(|l| l.configuration.clone()));
    let mut rows = vec![head];
    for (i, x) in v.x.iter().enumerate() {
        let mut r = vec![x.clone()];
        for l in &v.lines {
            r.push(match &l.points[i] {
                Some(p) => {
                    let mut s = group_thousands(p.value, v.decimals);
                    if l.peak.as_ref().is_some_and(|k| k.index == i) {
                        s.push_str(" (peak)");
                    }
                    s
                }
                None => "-".into(),
            });
        }
        rows.push(r);
    }
    rows
}

/// A matrix's figures as rows of text, the header first.
pub fn matrix_rows(v: &MatrixView, m: &Matrix) -> Vec<Vec<String>> {
    let mut head = vec![format!("{} \\ {}", v.row_param, v.col_param)];
    head.extend(v.cols.iter().cloned());
    let mut rows = vec![head];
    for (r, cells) in v.rows.iter().zip(&m.cells) {
        let mut row = vec![r.clone()];
        row.extend(cells.iter().map(|c| match c {
            Some(x) => group_thousands(*x, m.decimals),
            None => "-".into(),
        }));
        rows.push(row);
    }
    rows
}

/// The summary table of a matrix view: one row per metric, one column per
/// configuration.
pub fn summary_rows(v: &MatrixView) -> Vec<Vec<String>> {
    let mut configs: Vec<&str> = Vec::new();
    let mut metrics: Vec<(&str, &str, usize)> = Vec::new();
    for m in &v.matrices {
        if !configs.contains(&m.configuration.as_str()) {
            configs.push(&m.configuration);
        }
        if !metrics.iter().any(|x| x.0 == m.metric) {
            metrics.push((&m.metric, &m.title, m.decimals));
        }
    }
    let mut head = vec![String::new()];
    head.extend(configs.iter().map(|c| c.to_string()));
    let mut rows = vec![head];
    for (metric, title, decimals) in metrics {
        let mut r = vec![title.to_string()];
        for c in &configs {
            r.push(
                v.matrices
                    .iter()
                    .find(|m| m.metric == metric && m.configuration == *c)
                    .and_then(|m| m.summary)
                    .map(|s| group_thousands(s, decimals))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        rows.push(r);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MetricInfo;

    fn point(config: &str, params: &[(&str, i64)], metrics: &[(&str, &[f64])]) -> PointResult {
        PointResult {
            configuration: config.into(),
            workload: "w".into(),
            kind: "k".into(),
            label: String::new(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), Value::Int(*v)))
                .collect(),
            metrics: metrics
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_vec()))
                .collect(),
            summaries: BTreeMap::new(),
        }
    }

    fn plan(views: Vec<ViewSpec>) -> WorkloadPlan {
        WorkloadPlan {
            workload: "w".into(),
            kind: "k".into(),
            views,
            metrics: vec![MetricInfo {
                name: "rate".into(),
                label: "Rate (ops/s)".into(),
                better: Better::Higher,
                decimals: 0,
                combine: benchlab_core::Combine::Sum,
            }],
            byte_params: vec!["file".into(), "rec".into()],
            table_metrics: Vec::new(),
        }
    }

    fn no_notes(_: &[&PointResult]) -> Vec<String> {
        Vec::new()
    }

    /// Rows and columns come from the typed parameters, a third swept
    /// parameter splits the views, an unplanned cell stays empty and does
    /// not spoil the summary, which is the geometric mean of the cells.
    #[test]
    fn matrix_from_typed_params() {
        let mut pts = Vec::new();
        for mode in [1, 2] {
            for (f, r, v) in [(1024, 1024, 2.0), (2048, 1024, 8.0), (2048, 2048, 4.0)] {
                pts.push(point(
                    "a",
                    &[("file", f), ("rec", r), ("mode", mode), ("k", 7)],
                    &[("rate", &[v * mode as f64])],
                ));
            }
        }
        let p = plan(vec![ViewSpec::Matrix {
            row_param: "file".into(),
            col_param: "rec".into(),
            metrics: vec!["rate".into(), "absent".into()],
            summary: MatrixSummary::GeoMean,
        }]);
        let views = build(&[p], &pts, &["a".into()], Selection::Median, &no_notes);
        assert_eq!(views.len(), 2);
        let View::Matrix(m) = &views[1] else { panic!() };
        assert_eq!(m.fixed, "mode=2");
        assert_eq!(m.rows, ["1KiB", "2KiB"]);
        assert_eq!(m.cols, ["1KiB", "2KiB"]);
        assert_eq!(m.matrices.len(), 1, "no matrix of a metric never measured");
        let x = &m.matrices[0];
        assert_eq!(
            x.cells,
            vec![vec![Some(4.0), None], vec![Some(16.0), Some(8.0)]]
        );
        // (4 · 16 · 8)^(1/3) = 8.
        assert!((x.summary.unwrap() - 8.0).abs() < 1e-12);
        assert_eq!(x.title, "Rate (ops/s)");
        assert_eq!(
            matrix_rows(m, x),
            vec![
                vec!["file \\ rec", "1KiB", "2KiB"],
                vec!["1KiB", "4", "-"],
                vec!["2KiB", "16", "8"]
            ]
        );
    }

    /// A planned cell without a figure leaves the summary out.
    #[test]
    fn matrix_summary_needs_every_planned_cell() {
        let pts = vec![
            point("a", &[("file", 1), ("rec", 1)], &[("rate", &[2.0])]),
            point("a", &[("file", 2), ("rec", 1)], &[("rate", &[f64::NAN])]),
        ];
        let p = plan(vec![ViewSpec::Matrix {
            row_param: "file".into(),
            col_param: "rec".into(),
            metrics: vec!["rate".into()],
            summary: MatrixSummary::Mean,
        }]);
        let views = build(&[p], &pts, &["a".into()], Selection::Median, &no_notes);
        let View::Matrix(m) = &views[0] else { panic!() };
        assert_eq!(m.matrices[0].summary, None);
    }

    fn curve(values: &[(&str, &[f64])], better: Better) -> CurveView {
        let mut pts = Vec::new();
        for (c, vs) in values {
            for (i, v) in vs.iter().enumerate() {
                pts.push(point(c, &[("clients", 1 << i)], &[("rate", &[*v, *v])]));
            }
        }
        let mut p = plan(vec![ViewSpec::Curve {
            x_param: "clients".into(),
            metric: "rate".into(),
        }]);
        p.metrics[0].better = better;
        let configs: Vec<String> = values.iter().map(|v| v.0.to_string()).collect();
        let views = build(&[p], &pts, &configs, Selection::Median, &no_notes);
        let View::Curve(c) = views.into_iter().next().unwrap() else {
            panic!()
        };
        c
    }

    #[test]
    fn curve_peak_decline_and_ratio() {
        let c = curve(
            &[
                ("one", &[100.0, 200.0, 400.0, 300.0]),
                ("two", &[150.0, 600.0, 500.0, 400.0]),
            ],
            Better::Higher,
        );
        assert_eq!(c.x, ["1", "2", "4", "8"]);
        let p = c.lines[0].peak.as_ref().unwrap();
        assert_eq!((p.index, p.value), (2, 400.0));
        assert_eq!(p.decline.as_ref().unwrap().pct, 25.0);
        assert_eq!(c.ratios[0].ratio, 1.5);
        assert_eq!(
            c.findings,
            [
                "one peaks at 4 clients with 400 rate, then falls 25.0 % by 8 clients.",
                "two peaks at 2 clients with 600 rate, then falls 33.3 % by 8 clients.",
                "At their peaks two is 1.50× faster than one (600 against 400 rate)."
            ]
        );
        let rows = curve_rows(&c);
        assert_eq!(rows[3], ["4", "400 (peak)", "500"]);
    }

    #[test]
    fn curve_grammar_and_lower_is_better() {
        let c = curve(
            &[("one", &[5.0, 4.0]), ("two", &[8.0, 10.0])],
            Better::Lower,
        );
        assert_eq!(
            c.findings,
            [
                "one is best at 2 clients with 4 rate (its last point: no decline measured).",
                "two is best at 1 client with 8 rate, then rises 25.0 % by 2 clients.",
                "At their peaks one is 2.00× faster than two (4 against 8 rate)."
            ]
        );
        assert_eq!(x_words("clients", "1"), "1 client");
        assert_eq!(x_words("clients", "2"), "2 clients");
        assert_eq!(x_words("size", "2"), "size 2");
    }

    /// A comparison takes each column's line on the base's x values: an x
    /// the other run lacks is a gap, an x only it has is left out.
    #[test]
    fn compare_curve_matches_x_by_label() {
        let a = curve(&[("one", &[100.0, 200.0, 400.0])], Better::Higher);
        let b = curve(&[("two", &[300.0, 500.0])], Better::Higher);
        let cols = [
            Column {
                label: "1:one".into(),
                view: Some(&a),
                configuration: "one".into(),
            },
            Column {
                label: "2:two".into(),
                view: Some(&b),
                configuration: "two".into(),
            },
            Column {
                label: "3:none".into(),
                view: None,
                configuration: "x".into(),
            },
        ];
        let c = compare_curve(&a, &cols);
        assert_eq!(c.lines.len(), 2);
        let vals: Vec<Option<f64>> = c.lines[1]
            .points
            .iter()
            .map(|p| p.as_ref().map(|p| p.value))
            .collect();
        assert_eq!(vals, [Some(300.0), Some(500.0), None]);
        assert_eq!(c.ratios[0].ratio, 1.25);
        assert_eq!(
            c.findings[2],
            "At their peaks 2:two is 1.25× faster than 1:one (500 against 400 rate)."
        );
    }
}
