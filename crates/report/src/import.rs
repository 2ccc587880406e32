//! Published figures as a report: the importer of the *figures CSV*
//! layout, so that a study's printed tables (the seeds') go through the
//! same tables, advantages, averages and renderers as benchlab's own runs.
//!
//! # Layout v1
//!
//! UTF-8 text; lines starting with `#` and blank lines are ignored; the
//! first other line is the header, exactly
//!
//! ```text
//! table,better,aggregate,row_param,decimals,advantage_decimals,row,configuration,value
//! ```
//!
//! and every further line is one figure:
//!
//! * `table` — the table's name (tables appear in order of first use);
//! * `better` — `higher` or `lower`;
//! * `aggregate` — empty, or `mean` to add an "Average" row (the mean over
//!   the rows, seed 000's latency tables), or `geomean` for a row of
//!   geometric means (seed 001's summaries over sub-tests);
//! * `row_param`, `decimals`, `advantage_decimals` — the row parameter's
//!   name and the decimals of values and of "% advantage" cells;
//! * `row` — the row label (rows in order of first use);
//! * `configuration` — the column; the first configuration named in a
//!   table is its baseline, the B of every advantage;
//! * `value` — the figure, a plain number (no thousands separators).
//!   Several lines with the same table, row and configuration are the
//!   repetitions of that figure.
//!
//! Fields hold no commas and no quotes. The first six fields must be the
//! same on every line of a table.
//!
//! ## Keyed tables
//!
//! The header may end with three more fields, `kind,metric,fixed`: the
//! workload kind, metric key and fixed parameters (`protocol=tcp`) of the
//! measured table the figures stand beside. With them, `table` is the
//! workload's name in the study, and `benchlab compare` matches each
//! published table with the measured table of the same workload, kind,
//! metric and fixed parameters, row by row (`row_param` should then be the
//! study's row parameter). A table is then one (table, kind, metric,
//! fixed); the first six fields and these three are the same on all its
//! lines. `studies/published/seed-000-netperf.csv` is such a file.
//!
//! ## Sources
//!
//! A keyed header may end with one more field, `source`: where the figure
//! was transcribed from, `FILE:LINE` (`000_a31bad1941b225ec.txt:34`, the
//! seed file and its 1-based line), never empty. Every file under
//! `studies/published/` carries it, so that each figure can be checked
//! against its publication line by line.
//!
//! # Published, not measured
//!
//! An imported report is labelled everywhere: every column carries
//! "(published, not measured)" ([`PUBLISHED`]), each configuration's spec
//! is `{"published": true}` ([`is_published`]), its figures have no
//! interval and its advantages no verdict (there are no repetitions to
//! compare: several lines of one figure are taken as printed repetitions
//! and quoted by their median, but never compared), and the legends say so
//! ([`published_note`]).

use std::collections::BTreeMap;

use benchlab_core::plan::RunOptions;
use benchlab_core::study::Selection;
use benchlab_core::Better;
use benchlab_stats as stats;
use benchlab_store::{ConfigRow, RunRow, RunStatus};

use crate::figures::{advantages, average_row};
use crate::model::{Advantage, Cell, Row, RunReport, Table};

/// The header line of layout v1.
pub const HEADER: &str =
    "table,better,aggregate,row_param,decimals,advantage_decimals,row,configuration,value";

/// The optional key fields after [`HEADER`] (see "Keyed tables").
pub const KEY_FIELDS: &str = "kind,metric,fixed";

/// The optional last field after [`KEY_FIELDS`] (see "Sources").
pub const SOURCE_FIELD: &str = "source";

/// The label of every imported column, in every format.
pub const PUBLISHED: &str = "published, not measured";

/// Whether a configuration holds published figures (imported), not
/// measurements.
pub fn is_published(c: &ConfigRow) -> bool {
    c.is_published()
}

/// The legend line of a report with published columns (None without).
pub fn published_note(report: &RunReport) -> Option<String> {
    report
        .configurations
        .iter()
        .any(is_published)
        .then(|| {
            format!(
                "Columns marked ({PUBLISHED}) hold figures imported from a publication (`benchlab import`): not measured here, no repetitions, no interval and no verdict (their advantages show ?); the advantage is computed as the seeds do, (A−B)/B or (B−A)/B of the quoted figures."
            )
        })
}

/// An import error: the line (1-based) and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ImportError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

struct TableIn {
    meta: [String; 9],
    rows: Vec<String>,
    configs: Vec<String>,
    values: BTreeMap<(usize, usize), Vec<f64>>,
}

/// Reads a figures CSV (layout v1) into a report named `name`. The report's
/// quoted figures are the medians of each figure's values (the value itself
/// when there is one).
pub fn figures_csv(name: &str, text: &str) -> Result<RunReport, ImportError> {
    let err = |line: usize, message: String| ImportError { line, message };
    let mut header_seen = false;
    let mut fields = 9;
    let mut tables: Vec<(String, TableIn)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if !header_seen {
            if l == HEADER {
                fields = 9;
            } else if l == format!("{HEADER},{KEY_FIELDS}") {
                fields = 12;
            } else if l == format!("{HEADER},{KEY_FIELDS},{SOURCE_FIELD}") {
                fields = 13;
            } else if l == "parameter,value,unit,source" {
                return Err(err(
                    line,
                    "a seed's parameter table (studies/published/seed-NNN-parameters.csv: the values its studies credit to it, checked by tests/it/seeds.rs), not a figures file: nothing to import".into(),
                ));
            } else {
                return Err(err(
                    line,
                    format!(
                        "expected the header `{HEADER}` (optionally followed by `,{KEY_FIELDS}` or `,{KEY_FIELDS},{SOURCE_FIELD}`)"
                    ),
                ));
            }
            header_seen = true;
            continue;
        }
        let mut f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != fields {
            return Err(err(line, format!("{} fields, expected {fields}", f.len())));
        }
        if fields == 13 {
            check_source(f[12]).map_err(|m| err(line, m))?;
        }
        // Unkeyed lines get empty key fields.
        f.resize(12, "");
        let value: f64 = f[8]
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| err(line, format!("value `{}` is not a finite number", f[8])))?;
        if !["higher", "lower"].contains(&f[1]) {
            return Err(err(
                line,
                format!("better `{}` (allowed: higher, lower)", f[1]),
            ));
        }
        if !["", "mean", "geomean"].contains(&f[2]) {
            return Err(err(
                line,
                format!("aggregate `{}` (allowed: empty, mean, geomean)", f[2]),
            ));
        }
        for k in [4, 5] {
            if f[k].parse::<usize>().is_err() {
                return Err(err(line, format!("decimals `{}` is not a count", f[k])));
            }
        }
        let meta: [String; 9] = std::array::from_fn(|k| match k {
            0..=5 => f[k].to_string(),
            _ => f[k + 3].to_string(),
        });
        let key = |m: &[String; 9]| (m[0].clone(), m[6].clone(), m[7].clone(), m[8].clone());
        let t = match tables.iter().position(|(_, t)| key(&t.meta) == key(&meta)) {
            Some(p) => &mut tables[p].1,
            None => {
                tables.push((
                    f[0].to_string(),
                    TableIn {
                        meta: meta.clone(),
                        rows: Vec::new(),
                        configs: Vec::new(),
                        values: BTreeMap::new(),
                    },
                ));
                &mut tables.last_mut().expect("just pushed").1
            }
        };
        if t.meta != meta {
            return Err(err(
                line,
                format!(
                    "table `{}`: better, aggregate, row_param and decimals differ from its first line",
                    f[0]
                ),
            ));
        }
        if fields >= 12 && (f[9].is_empty() || f[10].is_empty()) {
            return Err(err(
                line,
                format!("table `{}`: kind and metric must not be empty", f[0]),
            ));
        }
        let r = index_of(&mut t.rows, f[6]);
        let c = index_of(&mut t.configs, f[7]);
        t.values.entry((r, c)).or_default().push(value);
    }
    if !header_seen {
        return Err(err(
            1,
            format!("empty file: expected the header `{HEADER}`"),
        ));
    }

    let mut all_configs: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (tname, t) in tables {
        let better = if t.meta[1] == "higher" {
            Better::Higher
        } else {
            Better::Lower
        };
        let sbetter = better;
        let rows: Vec<Row> = t
            .rows
            .iter()
            .enumerate()
            .map(|(r, label)| {
                let cells: Vec<Option<Cell>> = (0..t.configs.len())
                    .map(|c| {
                        t.values.get(&(r, c)).map(|v| {
                            let s = stats::summarize(v).expect("finite, non-empty");
                            // Published: no interval.
                            Cell {
                                value: s.median,
                                ci: None,
                                values: v.clone(),
                                failed: 0,
                                blocks: Vec::new(),
                            }
                        })
                    })
                    .collect();
                let advantages = unjudged(advantages(&cells, sbetter));
                Row {
                    label: label.clone(),
                    cells,
                    advantages,
                }
            })
            .collect();
        let decimals: usize = t.meta[4].parse().expect("checked");
        let average = match t.meta[2].as_str() {
            "mean" => Some(average_row(&rows, t.configs.len(), sbetter)),
            "geomean" => Some(geomean_row(&rows, t.configs.len(), sbetter)),
            _ => None,
        }
        .map(|row| advantage_of_printed(row, decimals, sbetter));
        for c in &t.configs {
            if !all_configs.contains(c) {
                all_configs.push(c.clone());
            }
        }
        let keyed = !t.meta[6].is_empty();
        out.push(Table {
            workload: tname,
            kind: if keyed {
                t.meta[6].clone()
            } else {
                "imported".into()
            },
            metric: if keyed {
                t.meta[7].clone()
            } else {
                "value".into()
            },
            title: String::new(),
            fixed: t.meta[8].clone(),
            row_param: t.meta[3].clone(),
            better,
            decimals,
            advantage_decimals: t.meta[5].parse().expect("checked"),
            columns: t
                .configs
                .iter()
                .map(|c| crate::document::marks::published(c))
                .collect(),
            rows,
            average,
        });
    }
    Ok(RunReport {
        run: RunRow {
            id: 0,
            study_name: name.to_string(),
            study_file: String::new(),
            study_text: String::new(),
            description: format!("published figures ({PUBLISHED})"),
            options: RunOptions {
                scale: 1.0,
                quick: false,
            },
            status: RunStatus::Completed,
            started_at: String::new(),
            ended_at: None,
            benchlab_version: env!("CARGO_PKG_VERSION").into(),
            controller_host: String::new(),
            controller_pid: None,
        },
        configurations: all_configs
            .iter()
            .enumerate()
            .map(|(idx, n)| ConfigRow {
                idx,
                name: n.clone(),
                description: PUBLISHED.into(),
                spec: serde_json::json!({ "published": true }),
            })
            .collect(),
        selection: Selection::Median,
        tables: out,
        points: Vec::new(),
        crosschecks: Vec::new(),
        series: Vec::new(),
        monitors: Default::default(),
        emulated: Vec::new(),
        design: None,
        decisions: Vec::new(),
        stacks: Default::default(),
        failures: Vec::new(),
        hosts: Vec::new(),
        repetition_rule: format!("{PUBLISHED}: the figures as printed"),
        order: String::new(),
        left_out: Vec::new(),
        control: Vec::new(),
        settings: Vec::new(),
        events: Vec::new(),
        latency: Vec::new(),
        services: Vec::new(),
        views: Vec::new(),
        notes: Vec::new(),
        steps: Vec::new(),
    })
}

/// Published tables compute the advantage of an aggregate row from the
/// aggregate *as printed*: seed 000's optimized TCP latency averages are
/// 37.9645… and 58.99, printed 37.96 and 58.99, and the printed advantage
/// is 35.65 % — that of the printed figures — where the unrounded ones give
/// 35.64 % (likewise 34.56 % against 34.57 % for UDP). Imported figures
/// are printed figures, so an imported table follows the same rule; the
/// aggregate itself is kept unrounded.
fn advantage_of_printed(mut row: Row, decimals: usize, better: stats::Better) -> Row {
    let printed = |c: &Option<Cell>| {
        c.as_ref()
            .and_then(|c| format!("{:.*}", decimals, c.value).parse::<f64>().ok())
    };
    let base = printed(&row.cells[0]);
    for (i, adv) in row.advantages.iter_mut().enumerate() {
        if let (Some(a), Some(b), Some(adv)) = (printed(&row.cells[i + 1]), base, adv.as_mut()) {
            if let Some(pct) = stats::advantage_pct(a, b, better) {
                adv.pct = pct;
            }
        }
    }
    row
}

/// Published figures are compared by their quoted values only: no
/// verdict, whatever repetitions a file lists.
fn unjudged(mut advs: Vec<Option<Advantage>>) -> Vec<Option<Advantage>> {
    for a in advs.iter_mut().flatten() {
        a.comparison = None;
    }
    advs
}

/// A `source` field: `FILE:LINE`, FILE without spaces, LINE from 1.
fn check_source(s: &str) -> Result<(), String> {
    let ok = s.rsplit_once(':').is_some_and(|(file, line)| {
        !file.is_empty()
            && !file.chars().any(char::is_whitespace)
            && line.parse::<u64>().is_ok_and(|n| n >= 1)
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "source `{s}` (expected FILE:LINE, the publication's file and its line from 1)"
        ))
    }
}

fn index_of(list: &mut Vec<String>, s: &str) -> usize {
    match list.iter().position(|x| x == s) {
        Some(p) => p,
        None => {
            list.push(s.to_string());
            list.len() - 1
        }
    }
}

/// A row of geometric means over the rows (seed 001: "the geometric
/// average of 13 IOzone tests"), with the advantage of those means.
fn geomean_row(rows: &[Row], columns: usize, better: stats::Better) -> Row {
    let mut row = average_row(rows, columns, better);
    row.label = "Geometric mean".into();
    for (c, cell) in row.cells.iter_mut().enumerate() {
        if let Some(cell) = cell {
            let vals: Vec<f64> = rows
                .iter()
                .filter_map(|r| r.cells[c].as_ref().map(|x| x.value))
                .collect();
            cell.value = stats::geometric_mean(&vals).unwrap_or(f64::NAN);
        }
    }
    row.advantages = row
        .cells
        .iter()
        .skip(1)
        .map(|c| match (c, &row.cells[0]) {
            (Some(a), Some(b)) => {
                stats::advantage_pct(a.value, b.value, better).map(|pct| crate::model::Advantage {
                    pct,
                    comparison: None,
                    decided: None,
                })
            }
            _ => None,
        })
        .collect();
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_line() {
        let e = figures_csv("x", "# c\nnope\n").unwrap_err();
        assert_eq!(e.line, 2);
        let text = format!("{HEADER}\nt,up,,size,2,2,1,A,1\n");
        let e = figures_csv("x", &text).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("allowed: higher, lower"), "{e}");
        let text = format!("{HEADER}\nt,higher,,size,2,2,1,A,abc\n");
        assert!(figures_csv("x", &text)
            .unwrap_err()
            .to_string()
            .contains("abc"));
    }

    #[test]
    fn repetitions_and_geometric_mean() {
        let text = format!(
            "{HEADER}\n\
             t,higher,geomean,test,0,1,read,B,100\n\
             t,higher,geomean,test,0,1,read,A,200\n\
             t,higher,geomean,test,0,1,write,B,400\n\
             t,higher,geomean,test,0,1,write,A,200\n\
             t,higher,geomean,test,0,1,write,A,300\n\
             t,higher,geomean,test,0,1,write,A,250\n"
        );
        let r = figures_csv("x", &text).unwrap();
        let t = &r.tables[0];
        assert_eq!(
            t.columns,
            ["B (published, not measured)", "A (published, not measured)"]
        );
        // Repetitions of a published figure: quoted by their median, no
        // interval, no verdict.
        let write = &t.rows[1];
        assert_eq!(write.cells[1].as_ref().unwrap().ci, None);
        assert_eq!(write.advantages[0].as_ref().unwrap().comparison, None);
        assert_eq!(t.rows[1].cells[1].as_ref().unwrap().value, 250.0);
        let g = t.average.as_ref().unwrap();
        // √(100·400) = 200 and √(200·250) = 223.6…, printed with 0
        // decimals as 224: the advantage of the printed figures is +12 %
        // (the unrounded ones would give +11.8 %).
        assert!((g.cells[0].as_ref().unwrap().value - 200.0).abs() < 1e-9);
        assert!((g.cells[1].as_ref().unwrap().value - 50_000_f64.sqrt()).abs() < 1e-9);
        let adv = g.advantages[0].as_ref().unwrap().pct;
        assert!((adv - 12.0).abs() < 1e-9, "{adv}");
    }

    #[test]
    fn keyed_tables_carry_the_measured_key() {
        let text = format!(
            "{HEADER},{KEY_FIELDS}\n\
             rr,lower,mean,netperf_m,2,2,1,W,73.46,net.rr,rtt_us,protocol=tcp\n\
             rr,lower,mean,netperf_m,2,2,1,W,99.0,net.rr,rtt_us,protocol=udp\n"
        );
        let r = figures_csv("x", &text).unwrap();
        assert_eq!(r.tables.len(), 2);
        let t = &r.tables[1];
        assert_eq!(
            (
                t.workload.as_str(),
                t.kind.as_str(),
                t.metric.as_str(),
                t.fixed.as_str()
            ),
            ("rr", "net.rr", "rtt_us", "protocol=udp")
        );
        assert_eq!(t.row_param, "netperf_m");
        assert!(is_published(&r.configurations[0]));
        assert!(published_note(&r).unwrap().contains(PUBLISHED));
        // A keyed file needs every key field's kind and metric.
        let bad = format!("{HEADER},{KEY_FIELDS}\nrr,lower,,m,2,2,1,W,1,,rtt_us,\n");
        let e = figures_csv("x", &bad).unwrap_err();
        assert!(e.to_string().contains("kind and metric"), "{e}");
        // A header with other fields is refused, naming both layouts.
        let e = figures_csv("x", "table,value\n").unwrap_err();
        assert!(e.to_string().contains(KEY_FIELDS), "{e}");
    }

    #[test]
    fn sources_are_checked_per_line() {
        let head = format!("{HEADER},{KEY_FIELDS},{SOURCE_FIELD}");
        let good = format!("{head}\nrr,lower,,m,2,2,1,W,73.46,net.rr,rtt_us,,000_a.txt:617\n");
        assert_eq!(figures_csv("x", &good).unwrap().tables.len(), 1);
        for bad in [
            "",
            "000_a.txt",
            "000_a.txt:0",
            "000_a.txt:x",
            ":3",
            "a b.txt:3",
        ] {
            let text = format!("{head}\n# c\nrr,lower,,m,2,2,1,W,1,net.rr,rtt_us,,{bad}\n");
            let e = figures_csv("x", &text).unwrap_err();
            assert_eq!(e.line, 3, "{bad}");
            assert!(e.to_string().contains("FILE:LINE"), "{bad}: {e}");
        }
        // Without the key fields there is no source column.
        let e = figures_csv("x", &format!("{HEADER},{SOURCE_FIELD}\n")).unwrap_err();
        assert!(e.to_string().contains(SOURCE_FIELD), "{e}");
    }
}
