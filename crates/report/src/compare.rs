//! Comparisons across runs: `benchlab compare RUN[:CONFIG] …` puts chosen
//! configurations of several stored runs side by side as one report whose
//! columns are those (run, configuration) pairs, matching points by
//! workload, metric and parameters, with advantages over a baseline.

use crate::document::marks;
use crate::figures::{advantages, average_row, judge};
use crate::import::is_published;
use crate::model::View;
use crate::model::{Advantage, Decision, Row, RunReport, Table};
use crate::views;
use benchlab_stats as stats;
use benchlab_store::{ConfigRow, HostRow};

/// One column of a comparison: a configuration of a run's report.
pub(crate) struct Side<'a> {
    /// Column label, e.g. `3:optimized`.
    pub(crate) label: String,
    /// The run's report.
    pub(crate) report: &'a RunReport,
    /// Index of the configuration within that report's columns.
    pub(crate) config: usize,
}

/// A regression found by [`regressions`].
#[derive(Debug, Clone, PartialEq)]
pub struct Regression {
    /// The column that regressed.
    pub column: String,
    /// Table title and row.
    pub what: String,
    /// Its advantage over the baseline, in % (negative).
    pub pct: f64,
}

/// The side-by-side report of `sides`, with `sides[baseline]` moved to the
/// first column (the B of every advantage). A table or row appears when
/// the baseline has it; the other columns show "-" where they lack it.
/// The comparison report's run is the baseline's, renamed.
pub(crate) fn combine(sides: &[Side], baseline: usize) -> RunReport {
    let mut order: Vec<&Side> = Vec::with_capacity(sides.len());
    order.push(&sides[baseline]);
    order.extend(
        sides
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != baseline)
            .map(|(_, s)| s),
    );
    let base = order[0].report;
    let key = |t: &Table| {
        (
            t.workload.clone(),
            t.kind.clone(),
            t.metric.clone(),
            t.fixed.clone(),
        )
    };
    // Published columns (imported figures) are labelled as such and never
    // get a verdict: they have no repetitions of their own.
    let published: Vec<bool> = order
        .iter()
        .map(|s| {
            s.report
                .configurations
                .get(s.config)
                .is_some_and(is_published)
        })
        .collect();
    let label = |i: usize| {
        if published[i] {
            marks::published(&order[i].label)
        } else {
            order[i].label.clone()
        }
    };
    // Blocks mean something only within one run: columns from different
    // runs compare as independent samples, and the order says so.
    let one_run = order
        .iter()
        .all(|s| s.report.run.id == order[0].report.run.id);
    let mut tables = Vec::new();
    // Each column's verdicts against the baseline: the sequential rule's
    // one look at the repetitions the columns hold (docs/methods.md).
    let mut decisions: Vec<Decision> = Vec::new();
    for bt in &base.tables {
        let sbetter = bt.better;
        let rows: Vec<Row> = bt
            .rows
            .iter()
            .map(|br| {
                let cells: Vec<_> = order
                    .iter()
                    .map(|s| {
                        s.report
                            .tables
                            .iter()
                            .find(|t| key(t) == key(bt))
                            .and_then(|t| t.rows.iter().find(|r| r.label == br.label))
                            .and_then(|r| r.cells.get(s.config).cloned().flatten())
                            // A published pair's ratio: the run's pair.
                            .or_else(|| crate::pairs::cell(s.report, bt, &br.label))
                            .map(|mut c| {
                                if !one_run {
                                    c.blocks.clear();
                                }
                                c
                            })
                    })
                    .collect();
                let mut advantages = unjudged_published(advantages(&cells, sbetter), &published);
                let margin_pct = base
                    .decisions
                    .iter()
                    .find(|d| d.workload == bt.workload && d.metric == bt.metric)
                    .map_or(stats::DEFAULT_MARGIN_PCT, |d| d.margin_pct);
                for (i, a) in advantages.iter_mut().enumerate() {
                    let (Some(adv), Some(x), Some(b)) = (a, &cells[i + 1], &cells[0]) else {
                        continue;
                    };
                    if published[0] || published[i + 1] {
                        continue;
                    }
                    let Some(j) = judge(x, b, sbetter, margin_pct) else {
                        continue;
                    };
                    adv.decided = Some(j.verdict);
                    decisions.push(Decision {
                        configuration: label(i + 1),
                        control: false,
                        workload: bt.workload.clone(),
                        point: if bt.fixed.is_empty() {
                            format!("{}={}", bt.row_param, br.label)
                        } else {
                            format!("{} {}={}", bt.fixed, bt.row_param, br.label)
                        },
                        metric: bt.metric.clone(),
                        verdict: j.verdict,
                        repetitions: j.repetitions,
                        margin_pct,
                        advantage_pct: Some(j.advantage_pct),
                        ci_lo_pct: j.ci_pct.map(|c| c.0),
                        ci_hi_pct: j.ci_pct.map(|c| c.1),
                        mde_pct: j.mde_pct,
                    });
                }
                Row {
                    label: br.label.clone(),
                    cells,
                    advantages,
                }
            })
            .collect();
        let average = bt
            .average
            .as_ref()
            .map(|_| average_row(&rows, order.len(), sbetter));
        // A published baseline has no caption of its own: take the first
        // matching measured table's.
        let title = if bt.title.is_empty() {
            order
                .iter()
                .flat_map(|s| &s.report.tables)
                .find(|t| key(t) == key(bt) && !t.title.is_empty())
                .map(|t| t.title.clone())
                .unwrap_or_default()
        } else {
            bt.title.clone()
        };
        tables.push(Table {
            title,
            columns: (0..order.len()).map(label).collect(),
            rows,
            average,
            ..bt.clone()
        });
    }
    let views = base
        .views
        .iter()
        .map(|bv| match bv {
            View::Curve(b) => {
                let columns: Vec<_> = order
                    .iter()
                    .map(|s| views::Column {
                        label: s.label.clone(),
                        view: s.report.views.iter().find_map(|v| match v {
                            View::Curve(c) if views::same_curve(c, b) => Some(c),
                            _ => None,
                        }),
                        configuration: config_of(s),
                    })
                    .collect();
                let mut curve = views::compare_curve(b, &columns);
                // The study's pairs, where both of a pair's configurations
                // are columns from its run.
                let names: Vec<String> = order.iter().map(|s| config_of(s)).collect();
                let pair_columns: Vec<_> = order
                    .iter()
                    .zip(&columns)
                    .zip(&names)
                    .map(|((s, c), name)| crate::pairs::PairColumn {
                        run: s.report.run.id,
                        configuration: name,
                        label: &s.label,
                        view: c.view,
                    })
                    .collect();
                crate::pairs::apply(&mut curve, &crate::pairs::carried(&pair_columns));
                View::Curve(curve)
            }
            View::Matrix(b) => {
                let columns: Vec<_> = order
                    .iter()
                    .map(|s| views::Column {
                        label: s.label.clone(),
                        view: s.report.views.iter().find_map(|v| match v {
                            View::Matrix(m) if views::same_matrices(m, b) => Some(m),
                            _ => None,
                        }),
                        configuration: config_of(s),
                    })
                    .collect();
                View::Matrix(views::compare_matrices(b, &columns))
            }
        })
        .collect();
    let mut run = base.run.clone();
    run.study_name = format!(
        "comparison: {}",
        order
            .iter()
            .map(|s| s.label.as_str())
            .collect::<Vec<_>>()
            .join(" vs ")
    );
    let mut hosts: Vec<HostRow> = Vec::new();
    let mut seen_runs: Vec<i64> = Vec::new();
    for s in &order {
        if seen_runs.contains(&s.report.run.id) {
            continue;
        }
        seen_runs.push(s.report.run.id);
        for h in &s.report.hosts {
            hosts.push(HostRow {
                name: format!("run {}: {}", s.report.run.id, h.name),
                ..h.clone()
            });
        }
    }
    RunReport {
        run,
        configurations: order
            .iter()
            .enumerate()
            .map(|(idx, s)| {
                let c = s.report.configurations.get(s.config);
                ConfigRow {
                    idx,
                    name: label(idx),
                    description: format!(
                        "run {} ({}), configuration {}",
                        s.report.run.id,
                        s.report.run.study_name,
                        c.map(|c| c.name.as_str()).unwrap_or("?")
                    ),
                    spec: c.map(|c| c.spec.clone()).unwrap_or_default(),
                }
            })
            .collect(),
        selection: base.selection,
        tables,
        points: Vec::new(),
        crosschecks: Vec::new(),
        // Each column's own series, under the column's label.
        series: order
            .iter()
            .enumerate()
            .flat_map(|(i, s)| {
                let name = s
                    .report
                    .configurations
                    .get(s.config)
                    .map(|c| c.name.clone())
                    .unwrap_or_default();
                let column = label(i);
                s.report
                    .series
                    .iter()
                    .filter(move |v| v.configuration == name)
                    .map(move |v| crate::model::SeriesView {
                        configuration: column.clone(),
                        ..v.clone()
                    })
            })
            .collect(),
        monitors: crate::monitors::columns(
            &order
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let name = s
                        .report
                        .configurations
                        .get(s.config)
                        .map(|c| c.name.as_str());
                    (label(i), &s.report.monitors, name.unwrap_or_default())
                })
                .collect::<Vec<_>>(),
        ),
        // A column keeps its configuration's emulated guests, under the
        // column's label.
        emulated: order
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let e = s.report.emulated(&config_of(s))?;
                Some(crate::model::Emulated {
                    configuration: label(i),
                    guests: e.guests.clone(),
                })
            })
            .collect(),
        // A comparison of runs has its own columns, and its own verdicts.
        design: None,
        decisions,
        stacks: crate::stacks::columns(
            &order
                .iter()
                .enumerate()
                .map(|(i, s)| (label(i), &s.report.stacks, config_of(s)))
                .collect::<Vec<_>>(),
        ),
        failures: order
            .iter()
            .flat_map(|s| {
                let name = s
                    .report
                    .configurations
                    .get(s.config)
                    .map(|c| c.name.clone());
                s.report
                    .failures
                    .iter()
                    .filter(move |f| Some(&f.configuration) == name.as_ref())
                    .cloned()
            })
            .collect(),
        hosts,
        repetition_rule: order
            .iter()
            .map(|s| format!("{}: {}", s.label, s.report.repetition_rule))
            .collect::<Vec<_>>()
            .join("; "),
        order: if one_run {
            order[0].report.order.clone()
        } else {
            "columns from different runs: their repetitions compare as independent samples, and a difference may include whatever changed between the runs".into()
        },
        left_out: {
            let mut lines: Vec<String> = Vec::new();
            for s in &order {
                for l in &s.report.left_out {
                    let l = format!("run {}: {l}", s.report.run.id);
                    if !lines.contains(&l) {
                        lines.push(l);
                    }
                }
            }
            lines
        },
        control: Vec::new(),
        settings: order
            .iter()
            .flat_map(|s| s.report.settings.iter().cloned())
            .collect(),
        events: Vec::new(),
        latency: Vec::new(),
        services: Vec::new(),
        views,
        notes: order
            .iter()
            .flat_map(|s| s.report.notes.iter().cloned())
            .collect(),
        steps: {
            let mut steps: Vec<benchlab_core::study::Step> = Vec::new();
            for st in order.iter().flat_map(|s| &s.report.steps) {
                if !steps.contains(st) {
                    steps.push(st.clone());
                }
            }
            steps
        },
    }
}

/// Drops the verdict of every advantage that involves a published column
/// (`published[0]` is the baseline's).
fn unjudged_published(
    mut advs: Vec<Option<Advantage>>,
    published: &[bool],
) -> Vec<Option<Advantage>> {
    for (i, a) in advs.iter_mut().enumerate() {
        if published[0] || published[i + 1] {
            if let Some(a) = a {
                a.comparison = None;
            }
        }
    }
    advs
}

/// The name of a side's configuration in its own run.
fn config_of(s: &Side) -> String {
    s.report
        .configurations
        .get(s.config)
        .map(|c| c.name.clone())
        .unwrap_or_default()
}

/// Every cell whose verdict is "worse" (the sequential rule's: worse by
/// more than the margin) with an advantage below `−threshold_pct`: what
/// `compare --fail-on-regression` fails on. A worse figure within the
/// threshold, an equivalent or undecided one, or one without a verdict,
/// is not a regression.
pub fn regressions(report: &RunReport, threshold_pct: f64) -> Vec<Regression> {
    let mut out = Vec::new();
    for t in &report.tables {
        for r in &t.rows {
            for (i, a) in r.advantages.iter().enumerate() {
                let Some(a) = a else { continue };
                let worse = a.decided == Some(benchlab_core::decision::Decided::Worse);
                if worse && a.pct < -threshold_pct {
                    out.push(Regression {
                        column: t.columns[i + 1].clone(),
                        what: format!(
                            "{} · {} {}",
                            crate::format::title_of(t),
                            t.row_param,
                            r.label
                        ),
                        pct: a.pct,
                    });
                }
            }
        }
    }
    out
}

/// `items` of one configuration (`config`, as `configuration` reads it off
/// an item) relabelled as a compared column (`label`): the monitors' and
/// the stacks' views of a comparison across runs share this.
pub(crate) fn relabelled<'a, T: Clone + 'a>(
    items: &'a [T],
    config: &'a str,
    label: &'a str,
    configuration: fn(&mut T) -> &mut String,
) -> impl Iterator<Item = T> + 'a {
    items.iter().filter_map(move |x| {
        let mut x = x.clone();
        let c = configuration(&mut x);
        if c != config {
            return None;
        }
        *c = label.to_string();
        Some(x)
    })
}
