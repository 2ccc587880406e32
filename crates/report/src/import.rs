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

use std::collections::BTreeMap;

use benchlab_core::plan::RunOptions;
use benchlab_core::study::Selection;
use benchlab_core::Better;
use benchlab_stats as stats;
use benchlab_store::{ConfigRow, RunRow, RunStatus};

use crate::model::{advantages, average_row, Cell, Row, RunReport, Table};

/// The header line of layout v1.
pub const HEADER: &str =
    "table,better,aggregate,row_param,decimals,advantage_decimals,row,configuration,value";

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
    meta: [String; 6],
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
    let mut tables: Vec<(String, TableIn)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if !header_seen {
            if l != HEADER {
                return Err(err(line, format!("expected the header `{HEADER}`")));
            }
            header_seen = true;
            continue;
        }
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != 9 {
            return Err(err(line, format!("{} fields, expected 9", f.len())));
        }
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
        let meta: [String; 6] = std::array::from_fn(|k| f[k].to_string());
        let t = match tables.iter().position(|(n, _)| n == f[0]) {
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
        let sbetter = match better {
            Better::Higher => stats::Better::Higher,
            Better::Lower => stats::Better::Lower,
        };
        let rows: Vec<Row> = t
            .rows
            .iter()
            .enumerate()
            .map(|(r, label)| {
                let cells: Vec<Option<Cell>> = (0..t.configs.len())
                    .map(|c| {
                        t.values.get(&(r, c)).map(|v| {
                            let s = stats::summarize(v).expect("finite, non-empty");
                            Cell {
                                value: s.median,
                                ci: s.median_ci,
                                values: v.clone(),
                                failed: 0,
                            }
                        })
                    })
                    .collect();
                let advantages = advantages(&cells, sbetter);
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
        out.push(Table {
            workload: tname,
            kind: "imported".into(),
            metric: "value".into(),
            title: String::new(),
            fixed: String::new(),
            row_param: t.meta[3].clone(),
            better,
            decimals,
            advantage_decimals: t.meta[5].parse().expect("checked"),
            columns: t.configs.clone(),
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
            description: "imported published figures".into(),
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
                description: String::new(),
                spec: serde_json::Value::Null,
            })
            .collect(),
        selection: Selection::Median,
        tables: out,
        points: Vec::new(),
        failures: Vec::new(),
        hosts: Vec::new(),
        repetition_rule: "imported: the published figures, one value each".into(),
        settings: Vec::new(),
        events: Vec::new(),
        latency: Vec::new(),
        views: Vec::new(),
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
        assert_eq!(t.columns, ["B", "A"]);
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
}
