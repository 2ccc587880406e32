//! IOzone-style matrices for `fs.matrix` points (seed 001's Appendix D and
//! Figure 1): per pattern and configuration a file size × record size
//! matrix of KiB/s; per configuration the matrix of the per-cell mean
//! over the patterns; and, as each configuration's headline, the geometric
//! mean over the cells of those per-cell means (seed 001's formula, see
//! [`headline`]).
//!
//! The matrices are a renderer of their own, hooked into the terminal and
//! Markdown output with one call each. The headlines are ordinary report
//! tables ([`summary_tables`], added when the report is built), so every
//! format (terminal, Markdown, HTML, JSON, CSV) shows them with their
//! advantage column.

use std::collections::BTreeMap;
use std::fmt::Write;

use benchlab_core::study::Selection;
use benchlab_core::units::format_size;
use benchlab_stats as stats;
use benchlab_wl_fs::Pattern;

use benchlab_core::Better;

use crate::model::{advantages, Cell, PointResult, Row, RunReport, Table};
use crate::render::{group_thousands, write_aligned, write_md_table};

/// The workload kind these matrices are for.
pub const KIND: &str = "fs.matrix";

fn quoted(values: &[f64], sel: Selection) -> Option<f64> {
    let ok: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let s = stats::summarize(&ok)?;
    Some(match sel {
        Selection::Median => s.median,
        Selection::Mean => s.mean,
        // IOzone cells have no per-run spread: the median run stands in
        // for the run with the median standard deviation.
        Selection::MedianRun | Selection::MedianStddevRun => ok[stats::median_run(&ok)?],
    })
}

fn size_of(p: &PointResult, key: &str) -> u64 {
    p.params
        .get(key)
        .and_then(|v| v.as_f64())
        .map(|f| f as u64)
        .unwrap_or(0)
}

/// The swept values other than the two matrix axes (`cache=direct`).
fn group_of(p: &PointResult) -> String {
    p.label
        .split(' ')
        .filter(|kv| !kv.starts_with("file_size=") && !kv.starts_with("record_size=") && *kv != "-")
        .collect::<Vec<_>>()
        .join(" ")
}

struct Grid<'a> {
    files: Vec<u64>,
    records: Vec<u64>,
    cell: BTreeMap<(String, u64, u64), &'a PointResult>,
}

fn table(
    out: &mut String,
    md: bool,
    title: &str,
    grid: &Grid,
    value: &dyn Fn(&PointResult) -> Option<f64>,
    config: &str,
) {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut head = vec!["file \\ record".to_string()];
    head.extend(grid.records.iter().map(|r| format_size(*r)));
    rows.push(head);
    for f in &grid.files {
        let mut row = vec![format_size(*f)];
        for r in &grid.records {
            row.push(
                grid.cell
                    .get(&(config.to_string(), *f, *r))
                    .and_then(|p| value(p))
                    .map(|v| group_thousands(v, 0))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        rows.push(row);
    }
    if md {
        let _ = writeln!(out, "#### {title}\n");
        write_md_table(out, &rows);
        out.push('\n');
    } else {
        let _ = writeln!(out, "  {title}");
        write_aligned(out, &rows, "    ", false);
    }
}

/// Notes on how the figures were obtained (cache form, buffered stdio).
fn notes(points: &[&PointResult]) -> Vec<String> {
    let mut notes = Vec::new();
    let first = |k: &str| {
        points
            .iter()
            .find_map(|p| p.metrics.get(k).and_then(|v| v.first().copied()))
    };
    if let Some(v) = first("cgroup_version") {
        let limit = first("cgroup_limit_bytes").unwrap_or(f64::NAN);
        let peak = points
            .iter()
            .filter_map(|p| p.metrics.get("cgroup_peak_bytes"))
            .flatten()
            .fold(0.0f64, |a, &b| a.max(b));
        notes.push(format!(
            "out-of-cache form: cgroup-v{v} memory limit {} (highest use seen {}), page cache included",
            format_size(limit as u64),
            format_size(peak as u64)
        ));
    }
    if points.iter().any(|p| {
        p.params.get("out_of_cache").map(|v| v.label()) == Some("big-file".into())
            && p.params.get("cache").map(|v| v.label()) == Some("out-of-cache".into())
    }) {
        notes.push("out-of-cache form: big-file (the file is larger than RAM)".into());
    }
    let scaled: Vec<(u64, u64)> = points
        .iter()
        .filter_map(|p| {
            let real = p.metrics.get("file_bytes")?.first().copied()? as u64;
            let nominal = size_of(p, "file_size");
            (real != nominal).then_some((nominal, real))
        })
        .collect();
    if let (Some(lo), Some(hi)) = (scaled.iter().min(), scaled.iter().max()) {
        notes.push(format!(
            "trial run at a size scale: rows keep the nominal file sizes; the files were {} ({} row) … {} ({} row)",
            format_size(lo.1),
            format_size(lo.0),
            format_size(hi.1),
            format_size(hi.0)
        ));
    }
    if first("stdio_buffered").is_some() {
        notes.push("fwrite, frewrite, fread and freread are buffered: stdio never uses O_DIRECT (as IOzone -I)".into());
    }
    if first("loop_direct_io") == Some(0.0) {
        notes.push(
            "the image's loop device has no direct I/O: the host's page cache sits under it".into(),
        );
    }
    notes
}

/// Renders every `fs.matrix` workload of a report (empty when none).
pub fn render(report: &RunReport, md: bool) -> String {
    let mut out = String::new();
    let mut workloads: Vec<&str> = Vec::new();
    for p in report.points.iter().filter(|p| p.kind == KIND) {
        if !workloads.contains(&p.workload.as_str()) {
            workloads.push(&p.workload);
        }
    }
    let configs: Vec<String> = report
        .configurations
        .iter()
        .map(|c| c.name.clone())
        .collect();
    let sel = report.selection;
    for w in workloads {
        let wpoints: Vec<&PointResult> = report.points.iter().filter(|p| p.workload == w).collect();
        let mut groups: Vec<String> = Vec::new();
        for p in &wpoints {
            let g = group_of(p);
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        for g in groups {
            let gpoints: Vec<&PointResult> = wpoints
                .iter()
                .copied()
                .filter(|p| group_of(p) == g)
                .collect();
            let mut grid = Grid {
                files: Vec::new(),
                records: Vec::new(),
                cell: BTreeMap::new(),
            };
            for p in &gpoints {
                let (f, r) = (size_of(p, "file_size"), size_of(p, "record_size"));
                if !grid.files.contains(&f) {
                    grid.files.push(f);
                }
                if !grid.records.contains(&r) {
                    grid.records.push(r);
                }
                grid.cell.insert((p.configuration.clone(), f, r), p);
            }
            grid.files.sort_unstable();
            grid.records.sort_unstable();
            let caption = if g.is_empty() {
                w.to_string()
            } else {
                format!("{w} · {g}")
            };
            if md {
                let _ = writeln!(out, "## {caption}: IOzone matrices (KiB/s; rows = file size, columns = record size)\n");
            } else {
                let _ = writeln!(out, "\n{caption} · IOzone matrices (KiB/s; rows = file size, columns = record size)");
            }
            for n in notes(&gpoints) {
                let _ = writeln!(out, "{}{n}", if md { "- " } else { "  " });
            }
            if md {
                out.push('\n');
            }
            for c in &configs {
                if !gpoints.iter().any(|p| &p.configuration == c) {
                    continue;
                }
                for pat in Pattern::ALL {
                    if !gpoints.iter().any(|p| p.metrics.contains_key(pat.metric())) {
                        continue;
                    }
                    let v =
                        |p: &PointResult| p.metrics.get(pat.metric()).and_then(|x| quoted(x, sel));
                    table(
                        &mut out,
                        md,
                        &format!("{c} · {}", pat.title()),
                        &grid,
                        &v,
                        c,
                    );
                }
                let v = |p: &PointResult| p.metrics.get("mean_kib_s").and_then(|x| quoted(x, sel));
                table(
                    &mut out,
                    md,
                    &format!("{c} · Average file system I/O performance (mean over the patterns)"),
                    &grid,
                    &v,
                    c,
                );
            }
        }
    }
    out
}

/// Caption of the summary tables, which states the formula.
pub const SUMMARY_TITLE: &str =
    "Geometric mean over the cells of each cell's mean over the patterns (KiB/s)";

/// The metric key of the summary tables (not a stored metric: derived
/// from every cell's `mean_kib_s`).
pub const SUMMARY_METRIC: &str = "matrix_headline_kib_s";

/// Seed 001's headline of one configuration: the geometric mean over the
/// matrix cells of each cell's plain mean over the patterns
/// (`mean_kib_s`, Appendix D's figure). All 24 values of the seed's
/// Figure 1 rebuild from its Appendix D this way to within 1 KB/s
/// (`crates/report/tests/seed_fixtures.rs`); the geometric mean of each
/// cell's geometric mean over the patterns, which benchlab used to print,
/// is never higher (AM ≥ GM per cell) and is lowest where the patterns
/// differ most (direct I/O, whose stdio patterns stay buffered).
///
/// `None` unless every cell has a positive, finite figure: a headline over
/// fewer cells would compare different matrices.
pub fn headline(cell_means: &[f64]) -> Option<f64> {
    if cell_means.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
        return None;
    }
    stats::geometric_mean(cell_means)
}

/// The summary tables of every `fs.matrix` workload (seed 001's Figure 1):
/// rows are the swept values other than the two matrix axes (the cache
/// mode), columns the configurations, each figure [`headline`] of the
/// quoted per-cell means, with the advantage over the first
/// configuration. Each figure's repetitions are the headlines of each
/// repetition (over the cells that all have it), so that advantages get
/// an interval and a verdict like any other table's. Advantages have one
/// decimal, as the seed prints them.
pub fn summary_tables(report: &RunReport) -> Vec<Table> {
    let mut workloads: Vec<&str> = Vec::new();
    for p in report.points.iter().filter(|p| p.kind == KIND) {
        if !workloads.contains(&p.workload.as_str()) {
            workloads.push(&p.workload);
        }
    }
    let configs: Vec<String> = report
        .configurations
        .iter()
        .map(|c| c.name.clone())
        .collect();
    let mut out = Vec::new();
    for w in workloads {
        let wpoints: Vec<&PointResult> = report
            .points
            .iter()
            .filter(|p| p.workload == w && p.kind == KIND)
            .collect();
        let mut groups: Vec<String> = Vec::new();
        for p in &wpoints {
            let g = group_of(p);
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        // One swept key (`cache=direct`): it names the rows. Otherwise the
        // rows are the whole group labels.
        let keys: Vec<&str> = groups
            .iter()
            .flat_map(|g| {
                g.split(' ')
                    .filter_map(|kv| kv.split_once('=').map(|x| x.0))
            })
            .collect();
        let single = !keys.is_empty()
            && keys.iter().all(|k| *k == keys[0])
            && groups.iter().all(|g| !g.contains(' '));
        let row_param = if single {
            keys[0].to_string()
        } else {
            "swept".to_string()
        };
        let rows: Vec<Row> = groups
            .iter()
            .map(|g| {
                let cells: Vec<Option<Cell>> = configs
                    .iter()
                    .map(|c| {
                        let cellp: Vec<&&PointResult> = wpoints
                            .iter()
                            .filter(|p| group_of(p) == *g && &p.configuration == c)
                            .collect();
                        summary_cell(&cellp, report.selection)
                    })
                    .collect();
                let label = if single {
                    g.split_once('=').map(|x| x.1).unwrap_or(g).to_string()
                } else if g.is_empty() {
                    "-".to_string()
                } else {
                    g.clone()
                };
                Row {
                    label,
                    advantages: advantages(&cells, stats::Better::Higher),
                    cells,
                }
            })
            .collect();
        out.push(Table {
            workload: w.to_string(),
            kind: KIND.into(),
            metric: SUMMARY_METRIC.into(),
            title: SUMMARY_TITLE.into(),
            fixed: String::new(),
            row_param,
            better: Better::Higher,
            decimals: 0,
            advantage_decimals: 1,
            columns: configs.clone(),
            rows,
            average: None,
        });
    }
    out
}

/// One summary figure: [`headline`] of the cells' quoted means, and the
/// headline of each repetition that every cell has.
fn summary_cell(points: &[&&PointResult], sel: Selection) -> Option<Cell> {
    let means: Vec<&Vec<f64>> = points
        .iter()
        .map(|p| p.metrics.get("mean_kib_s"))
        .collect::<Option<_>>()?;
    if means.is_empty() {
        return None;
    }
    let quoted_means: Vec<f64> = means
        .iter()
        .map(|m| quoted(m, sel))
        .collect::<Option<_>>()?;
    let value = headline(&quoted_means)?;
    let reps = means.iter().map(|m| m.len()).max().unwrap_or(0);
    let values: Vec<f64> = (0..reps)
        .filter_map(|r| {
            let at: Vec<f64> = means
                .iter()
                .map(|m| m.get(r).copied().unwrap_or(f64::NAN))
                .collect();
            headline(&at)
        })
        .collect();
    let failed = reps - values.len();
    Some(Cell {
        value,
        ci: None,
        values,
        failed,
    })
}
