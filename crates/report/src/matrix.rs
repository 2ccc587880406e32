//! IOzone-style matrices for `fs.matrix` points (seed 001's Appendix D and
//! Figure 1): per pattern and configuration a file size × record size
//! matrix of KiB/s; per configuration the matrix of the per-cell mean
//! over the patterns; and the geometric mean over every pattern and cell
//! as each configuration's headline.
//!
//! A renderer of its own, hooked into the terminal and Markdown output
//! with one call each, so the generic tables stay as they are.

use std::collections::BTreeMap;
use std::fmt::Write;

use benchlab_core::study::Selection;
use benchlab_core::units::format_size;
use benchlab_stats as stats;
use benchlab_wl_fs::Pattern;

use crate::model::{PointResult, RunReport};
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
        let mut summary: Vec<(String, Vec<Option<f64>>)> = Vec::new();
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
            // Headline: the geometric mean over every pattern and cell, as
            // the geometric mean of the cells' geometric means (the same
            // number when every cell ran the same patterns).
            let heads = configs
                .iter()
                .map(|c| {
                    let cells: Vec<f64> = gpoints
                        .iter()
                        .filter(|p| &p.configuration == c)
                        .filter_map(|p| p.metrics.get("geomean_kib_s").and_then(|x| quoted(x, sel)))
                        .collect();
                    let all = gpoints.iter().filter(|p| &p.configuration == c).count();
                    (!cells.is_empty() && cells.len() == all).then(|| geomean(&cells))
                })
                .collect();
            summary.push((if g.is_empty() { "-".into() } else { g }, heads));
        }
        let mut rows = vec![{
            let mut h = vec!["".to_string()];
            h.extend(configs.iter().cloned());
            h
        }];
        for (g, heads) in &summary {
            let mut r = vec![g.clone()];
            r.extend(heads.iter().map(|h| {
                h.map(|v| group_thousands(v, 0))
                    .unwrap_or_else(|| "-".into())
            }));
            rows.push(r);
        }
        if md {
            let _ = writeln!(
                out,
                "## {w}: geometric mean over the patterns and cells (KiB/s)\n"
            );
            write_md_table(&mut out, &rows);
            out.push('\n');
        } else {
            let _ = writeln!(out, "\n{w} · geometric mean over the patterns and cells (KiB/s; - = a cell without a figure)");
            write_aligned(&mut out, &rows, "  ", false);
        }
    }
    out
}

fn geomean(xs: &[f64]) -> f64 {
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}
