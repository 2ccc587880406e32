//! How the report model is built from stored rows: tables, their cells
//! and advantages, notes, services and latency views.

//! The report model and how it is built from stored rows.

use crate::figures::{
    advantages_with, average_row, judge, kept, quoted, stddev_companion, with_stddevs,
};
use crate::model::{
    Cell, ControlComparison, Failure, LatencyView, Note, PointResult, Row, RunReport,
    ServiceRecord, Table, WorkloadPlan, LATENCY_QUANTILES,
};
use crate::views;
use benchlab_core::resolved::ResolvedPlan;
use benchlab_core::study::{Selection, Study};
use benchlab_core::Value;
use benchlab_stats as stats;
use benchlab_store::{
    ConfigRow, HostRow, NoteRow, PointRow, RunRow, SampleRow, SampleStatus, ServiceRow,
};
use std::collections::BTreeMap;

/// Side results of some repetitions, by (point id, repetition).
pub type SideResults =
    std::collections::HashMap<(i64, u32), Vec<(String, benchlab_core::SideResult)>>;

/// The repetition whose latency a point's view shows: the median run of
/// its headline metric (the first table metric).
pub(crate) fn latency_rep(p: &PointRow, samples: &[SampleRow], plan: &ResolvedPlan) -> Option<u32> {
    let (shape, entry) = (
        plan.workloads.get(p.workload_idx)?,
        plan.study.workloads.get(p.workload_idx)?,
    );
    let mut fixed = p.params.clone();
    fixed.0.remove(&entry.rows);
    let spec = shape.table_metrics(&fixed).into_iter().next()?;
    let reps: Vec<&SampleRow> = samples
        .iter()
        .filter(|s| s.point_id == p.id && s.status == SampleStatus::Ok)
        .collect();
    let values: Vec<f64> = reps
        .iter()
        .map(|s| s.metrics.get(&spec.name).copied().unwrap_or(f64::NAN))
        .collect();
    let i = stats::median_run(&values)?;
    Some(reps[i].repetition)
}

/// The (point, repetition) pairs whose side results [`latency_views`]
/// reads, so that a reader fetches them with the run's other rows.
pub fn latency_reps(
    points: &[PointRow],
    samples: &[SampleRow],
    plan: &ResolvedPlan,
) -> Vec<(i64, u32)> {
    points
        .iter()
        .filter_map(|p| latency_rep(p, samples, plan).map(|rep| (p.id, rep)))
        .collect()
}

/// Latency views of every point whose sides recorded histograms: for each
/// point, the median run of its headline metric (the first table metric),
/// whose side results `side_results` holds (keyed as [`latency_reps`]
/// lists them).
pub fn latency_views(
    points: &[PointRow],
    samples: &[SampleRow],
    plan: &ResolvedPlan,
    side_results: &SideResults,
    configurations: &[ConfigRow],
) -> Vec<LatencyView> {
    let mut out = Vec::new();
    for p in points {
        let Some(rep) = latency_rep(p, samples, plan) else {
            continue;
        };
        let sides = side_results
            .get(&(p.id, rep))
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (side, r) in sides {
            for (name, h) in &r.histograms {
                let Ok(hist) = h.decode() else { continue };
                if h.count == 0 {
                    continue;
                }
                let quantiles_us = LATENCY_QUANTILES
                    .iter()
                    .map(|(q, _)| match *q {
                        0.0 => h.min as f64 / 1e3,
                        1.0 => h.max as f64 / 1e3,
                        q => hist.value_at_quantile(q) as f64 / 1e3,
                    })
                    .collect();
                let (series_us, series_stride) = match r.series.get(name) {
                    Some(s) => {
                        let step = s
                            .values
                            .len()
                            .div_ceil(crate::model::MAX_SERIES_POINTS)
                            .max(1);
                        (
                            s.values
                                .iter()
                                .step_by(step)
                                .map(|v| *v as f64 / 1e3)
                                .collect(),
                            s.stride * step as u64,
                        )
                    }
                    None => (Vec::new(), 0),
                };
                out.push(LatencyView {
                    configuration: configurations
                        .get(p.config_idx)
                        .map(|c| c.name.clone())
                        .unwrap_or_default(),
                    workload: p.workload_name.clone(),
                    point: p.label.clone(),
                    repetition: rep,
                    name: format!("{name} ({side})"),
                    quantiles_us,
                    series_us,
                    series_stride,
                });
            }
        }
    }
    out
}
/// The services of a run, once per (configuration, name, configuration
/// text): a restart with the same set-up is not listed again.
pub fn services(configurations: &[ConfigRow], rows: Vec<ServiceRow>) -> Vec<ServiceRecord> {
    let mut out: Vec<ServiceRecord> = Vec::new();
    for row in rows {
        let c = row.config_idx;
        let r = ServiceRecord {
            configuration: configurations
                .get(c)
                .map(|x| x.name.clone())
                .unwrap_or_else(|| format!("#{c}")),
            name: row.name,
            description: row.description,
        };
        if !out.iter().any(|o| {
            o.configuration == r.configuration
                && o.name == r.name
                && o.version() == r.version()
                && o.placement_key() == r.placement_key()
        }) {
            out.push(r);
        }
    }
    out
}
/// Each workload's view plan from the run's stored plan: the views and
/// metrics its workload declared, and which of its parameters are byte
/// counts.
pub fn plans(plan: &ResolvedPlan) -> Vec<WorkloadPlan> {
    plan.study
        .workloads
        .iter()
        .zip(&plan.workloads)
        .map(|(entry, shape)| {
            let mut metrics = shape.metrics.clone();
            for t in &shape.tables {
                for m in &t.metrics {
                    if !metrics.iter().any(|x| x.name == m.name) {
                        metrics.push(m.clone());
                    }
                }
            }
            WorkloadPlan {
                workload: entry.name.clone(),
                kind: entry.kind.clone(),
                views: shape.views.clone(),
                metrics,
                byte_params: shape.byte_params.clone(),
                table_metrics: shape
                    .tables
                    .iter()
                    .flat_map(|t| t.metrics.iter().map(|m| m.name.clone()))
                    .collect(),
            }
        })
        .collect()
}
/// The notes a run stored on its repetitions ([`NoteRow`]), once per
/// distinct text of each workload, with the points they concern.
pub fn notes(points: &[PointRow], configurations: &[ConfigRow], stored: &[NoteRow]) -> Vec<Note> {
    let mut out: Vec<Note> = Vec::new();
    for p in points {
        let at = format!(
            "{} · {}",
            configurations
                .get(p.config_idx)
                .map(|c| c.name.as_str())
                .unwrap_or("?"),
            p.label
        );
        for n in stored.iter().filter(|n| n.point_id == p.id) {
            let i = match out
                .iter()
                .position(|o| o.workload == p.workload_name && o.text == n.text)
            {
                Some(i) => i,
                None => {
                    out.push(Note {
                        workload: p.workload_name.clone(),
                        text: n.text.clone(),
                        points: Vec::new(),
                    });
                    out.len() - 1
                }
            };
            if !out[i].points.contains(&at) {
                out[i].points.push(at.clone());
            }
        }
    }
    out
}

/// The repetition rule of a run, in words: the study's, or the one
/// repetition a `--quick` trial ran instead.
pub fn repetition_rule(study: &Study, options: &benchlab_core::plan::RunOptions) -> String {
    let asked = study_repetition_rule(study);
    if options.quick {
        return format!(
            "one repetition per point (a --quick trial run; the study asks for {asked})"
        );
    }
    if study.design.kind == benchlab_core::study::DesignKind::UntilDecided {
        // The fixed rule is only what the design is weighed against.
        return format!(
            "until decided: rounds until every comparison is better, worse or equivalent within its margin, at most {} per point and configuration (the fixed design: {asked})",
            study.design.cap()
        );
    }
    asked
}

/// The repetition rule the study file asks for, in words.
fn study_repetition_rule(study: &Study) -> String {
    let describe = |w: &benchlab_core::study::WorkloadEntry| match w.adaptive {
        Some(a) => stats::StopRule::new(a.min, a.max, a.target_ci_pct)
            .map(|r| r.describe())
            .unwrap_or_default(),
        None => format!("a fixed {} repetition(s) per point", w.repetitions),
    };
    if study.workloads.iter().any(|w| w.adaptive.is_some()) {
        let mut rules: Vec<String> = study.workloads.iter().map(describe).collect();
        rules.dedup();
        if rules.len() == 1 {
            return rules.remove(0);
        }
        return study
            .workloads
            .iter()
            .map(|w| format!("{}: {}", w.name, describe(w)))
            .collect::<Vec<_>>()
            .join("; ");
    }
    let mut counts: Vec<u32> = study.workloads.iter().map(|w| w.repetitions).collect();
    counts.sort_unstable();
    counts.dedup();
    match counts.as_slice() {
        [] => "no workloads".into(),
        [n] => format!("a fixed {n} repetition(s) per point"),
        _ => {
            let per: Vec<String> = study
                .workloads
                .iter()
                .map(|w| format!("{} {}", w.name, w.repetitions))
                .collect();
            format!("fixed repetitions per point: {}", per.join(", "))
        }
    }
}
fn sort_key(v: Option<&Value>) -> (f64, String) {
    match v {
        Some(v) => (v.as_f64().unwrap_or(f64::NAN), v.label()),
        None => (f64::NAN, String::new()),
    }
}
/// Builds the tables, views and appendices of a run from its stored
/// resolved plan (the typed study and what its workloads declared when it
/// was made), its rows and its workloads' `notes` ([`notes`]); the loader
/// ([`crate::load`]) adds what the store keeps beside (events, settings,
/// services, latency distributions).
// Debt: these rows want one struct (`load::RunRows` is most of it).
#[allow(clippy::too_many_arguments)]
pub(crate) fn build(
    run: &RunRow,
    plan: &ResolvedPlan,
    configurations: &[ConfigRow],
    points: &[PointRow],
    samples: &[SampleRow],
    hosts: &[HostRow],
    notes: &[Note],
    stored: &[benchlab_core::decision::ComparisonDecision],
) -> RunReport {
    let study = &plan.study;
    // Without stored verdicts (a fixed design, an older run), the rule's
    // one look at each comparison's repetitions.
    let mut derived: Vec<crate::model::Decision> = Vec::new();
    let plans = plans(plan);
    let selection = study.defaults.select;
    let mut by_point: BTreeMap<i64, Vec<&SampleRow>> = BTreeMap::new();
    for s in samples {
        by_point.entry(s.point_id).or_default().push(s);
    }
    let config_name = |i: usize| {
        configurations
            .get(i)
            .map(|c| c.name.clone())
            .unwrap_or_else(|| format!("#{i}"))
    };

    let mut failures = Vec::new();
    let mut results = Vec::new();
    for p in points {
        let reps = by_point.get(&p.id).cloned().unwrap_or_default();
        let mut metrics: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let names: std::collections::BTreeSet<String> = reps
            .iter()
            .flat_map(|s| s.metrics.keys().cloned())
            .collect();
        for s in &reps {
            if s.status != SampleStatus::Ok {
                failures.push(Failure {
                    configuration: config_name(p.config_idx),
                    workload: p.workload_name.clone(),
                    point: p.label.clone(),
                    repetition: s.repetition,
                    status: s.status,
                    reason: s.reason.clone().unwrap_or_default(),
                });
            }
            for n in &names {
                metrics
                    .entry(n.clone())
                    .or_default()
                    .push(s.metrics.get(n).copied().unwrap_or(f64::NAN));
            }
        }
        let summaries = metrics
            .iter()
            .filter_map(|(k, v)| {
                let ok: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
                stats::summarize(&ok).map(|s| (k.clone(), s))
            })
            .collect();
        results.push((p, reps, metrics, summaries));
    }

    // The A/A control is the last configuration: compared, then taken
    // out of the columns.
    let control = (study.control && configurations.len() > 1).then(|| configurations.len() - 1);
    let shown = &configurations[..control.unwrap_or(configurations.len())];
    let mut control_rows = Vec::new();
    let mut tables = Vec::new();
    for (w, entry) in study.workloads.iter().enumerate() {
        let Some(wl) = plan.workloads.get(w) else {
            continue;
        };
        let planned_reps = if run.options.quick {
            1
        } else {
            entry.repetitions
        };
        if !plans.get(w).is_none_or(WorkloadPlan::has_table) {
            continue;
        }
        let wpoints: Vec<_> = results.iter().filter(|r| r.0.workload_idx == w).collect();
        if wpoints.is_empty() {
            continue;
        }
        // Group points by the swept values other than the row parameter.
        let others: Vec<&str> = entry
            .axes
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| *n != entry.rows)
            .collect();
        let group_of = |p: &PointRow| {
            others
                .iter()
                .map(|n| {
                    format!(
                        "{n}={}",
                        p.params.get(n).map(|v| v.label()).unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut groups: Vec<String> = Vec::new();
        for r in &wpoints {
            let g = group_of(r.0);
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        for g in groups {
            let gpoints: Vec<_> = wpoints.iter().filter(|r| group_of(r.0) == g).collect();
            // Captions come from what is fixed within the table: the row
            // parameter varies, so the workload does not see it.
            let mut fixed = gpoints[0].0.params.clone();
            fixed.0.remove(&entry.rows);
            let specs = wl.table_metrics(&fixed);
            // Row values in numeric order.
            let mut row_values: Vec<(f64, String)> = Vec::new();
            for r in &gpoints {
                let k = sort_key(r.0.params.get(&entry.rows));
                if !row_values.iter().any(|x| x.1 == k.1) {
                    row_values.push(k);
                }
            }
            row_values.sort_by(|a, b| {
                a.0.partial_cmp(&b.0)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(a.1.cmp(&b.1))
            });
            for spec in specs {
                let better = spec.better;
                let sbetter = better;
                let mut rows = Vec::new();
                for (_, rv) in &row_values {
                    let mut cells = Vec::new();
                    for c in 0..configurations.len() {
                        let r = gpoints.iter().find(|r| {
                            r.0.config_idx == c
                                && r.0
                                    .params
                                    .get(&entry.rows)
                                    .map(|v| v.label())
                                    .unwrap_or_default()
                                    == *rv
                        });
                        cells.push(r.and_then(|r| {
                            let all = r.2.get(&spec.name)?;
                            let sd = stddev_companion(&spec.name).and_then(|n| r.2.get(&n));
                            let (values, stddevs) = match selection {
                                Selection::MedianStddevRun => with_stddevs(all, sd),
                                _ => (
                                    all.iter().copied().filter(|x| x.is_finite()).collect(),
                                    None,
                                ),
                            };
                            let failed =
                                r.1.iter().filter(|s| s.status != SampleStatus::Ok).count();
                            let (value, ci) = quoted(&values, stddevs.as_deref(), selection)?;
                            let blocks = if study.order.alternates() {
                                Vec::new()
                            } else {
                                let sd = (selection == Selection::MedianStddevRun)
                                    .then_some(sd)
                                    .flatten();
                                kept(all, sd)
                                    .map(|i| study.order.block(r.1[i].repetition, planned_reps))
                                    .collect()
                            };
                            Some(Cell {
                                value,
                                ci,
                                values,
                                failed,
                                blocks,
                            })
                        }));
                    }
                    let mut advantages = advantages_with(&cells, sbetter, control);
                    let margin_pct = study.margin_pct(w, &spec.name);
                    for c in 1..configurations.len() {
                        let Some(p) = gpoints
                            .iter()
                            .find(|r| {
                                r.0.config_idx == c
                                    && r.0.params.get(&entry.rows).map(|v| v.label()).as_ref()
                                        == Some(rv)
                            })
                            .map(|r| r.0)
                        else {
                            continue;
                        };
                        let decided = if stored.is_empty() {
                            match (&cells[c], &cells[0]) {
                                (Some(a), Some(b)) => judge(a, b, sbetter, margin_pct).map(|j| {
                                    derived.push(crate::model::Decision {
                                        configuration: config_name(c),
                                        control: control == Some(c),
                                        workload: entry.name.clone(),
                                        point: p.label.clone(),
                                        metric: spec.name.to_string(),
                                        verdict: j.verdict,
                                        repetitions: j.repetitions,
                                        margin_pct,
                                        advantage_pct: Some(j.advantage_pct),
                                        ci_lo_pct: j.ci_pct.map(|c| c.0),
                                        ci_hi_pct: j.ci_pct.map(|c| c.1),
                                        mde_pct: j.mde_pct,
                                    });
                                    j.verdict
                                }),
                                _ => None,
                            }
                        } else {
                            stored
                                .iter()
                                .find(|d| {
                                    (d.config, d.workload, d.point) == (c, w, p.point_idx)
                                        && d.metric == spec.name
                                })
                                .map(|d| d.verdict)
                        };
                        if let Some(Some(a)) = advantages.get_mut(c - 1) {
                            a.decided = decided;
                        }
                    }
                    if let Some(k) = control {
                        cells.remove(k);
                        let adv = advantages.remove(k - 1);
                        control_rows.push(ControlComparison {
                            table: [entry.name.as_str(), spec.label.as_str(), g.as_str()]
                                .iter()
                                .filter(|s| !s.is_empty())
                                .copied()
                                .collect::<Vec<_>>()
                                .join(" · "),
                            row: rv.clone(),
                            advantage: adv,
                        });
                    }
                    rows.push(Row {
                        label: rv.clone(),
                        cells,
                        advantages,
                    });
                }
                let average = wl
                    .average_row
                    .then(|| average_row(&rows, shown.len(), sbetter));
                tables.push(Table {
                    workload: entry.name.clone(),
                    kind: entry.kind.clone(),
                    metric: spec.name.to_string(),
                    title: spec.label.to_string(),
                    fixed: g.clone(),
                    row_param: entry.rows.clone(),
                    better,
                    decimals: spec.decimals,
                    advantage_decimals: 2,
                    columns: shown.iter().map(|c| c.name.clone()).collect(),
                    rows,
                    average,
                });
            }
        }
    }

    let points: Vec<PointResult> = results
        .into_iter()
        .map(|(p, _, metrics, summaries)| PointResult {
            configuration: config_name(p.config_idx),
            workload: p.workload_name.clone(),
            kind: p.kind.clone(),
            label: p.label.clone(),
            params: p.params.0.clone(),
            metrics,
            summaries,
        })
        .collect();
    let names: Vec<String> = shown.iter().map(|c| c.name.clone()).collect();
    // A view's notes: those made on any of its points.
    let view_notes = |vpoints: &[&PointResult]| -> Vec<String> {
        notes
            .iter()
            .filter(|n| {
                vpoints.iter().any(|p| {
                    p.workload == n.workload
                        && n.points
                            .iter()
                            .any(|at| *at == format!("{} · {}", p.configuration, p.label))
                })
            })
            .map(|n| n.text.clone())
            .collect()
    };
    let mut views = views::build(&plans, &points, &names, selection, &view_notes);
    for v in &mut views {
        if let crate::model::View::Curve(c) = v {
            crate::pairs::apply(c, &study.compare);
        }
    }
    let mut report = RunReport {
        run: run.clone(),
        configurations: shown.to_vec(),
        selection,
        tables,
        points,
        failures,
        hosts: hosts.to_vec(),
        repetition_rule: repetition_rule(study, &run.options),
        order: study.order_text(),
        left_out: study.left_out.lines(),
        control: control_rows,
        settings: Vec::new(),
        events: Vec::new(),
        latency: Vec::new(),
        views,
        notes: notes.to_vec(),
        steps: study.steps.clone(),
        services: Vec::new(),
        crosschecks: Vec::new(),
        series: Vec::new(),
        monitors: Default::default(),
        emulated: crate::emulated::build(plan, configurations, hosts),
        design: None,
        decisions: derived,
        stacks: Default::default(),
    };
    report.crosschecks =
        crate::crosscheck::rows(&study.crosschecks, &report.points, |c| {
            match study.workloads.iter().position(|w| w.name == c.native) {
                Some(i) => study.margin_pct(i, &c.native_metric),
                None => benchlab_core::study::DEFAULT_MARGIN_PCT,
            }
        });
    // Summaries derived from several points (seed 001's Figure 1) become
    // ordinary tables, so every renderer shows them.
    let summaries = views::summary_tables(&plans, &report.points, &names, selection);
    report.tables.extend(summaries);
    report
}

/// The stored verdicts of an until-decided run, named: configuration,
/// workload and point by their names, the A/A control (the study's last
/// configuration, with `control = true`) marked.
pub(crate) fn decisions(
    stored: &[benchlab_core::decision::ComparisonDecision],
    plan: &ResolvedPlan,
    configurations: &[ConfigRow],
    points: &[PointRow],
) -> Vec<crate::model::Decision> {
    let control =
        (plan.study.control && configurations.len() > 1).then(|| configurations.len() - 1);
    stored
        .iter()
        .map(|d| {
            let point = points
                .iter()
                .find(|p| p.workload_idx == d.workload && p.point_idx == d.point);
            crate::model::Decision {
                configuration: configurations
                    .get(d.config)
                    .map(|c| c.name.clone())
                    .unwrap_or_else(|| format!("#{}", d.config)),
                control: control == Some(d.config),
                workload: plan
                    .study
                    .workloads
                    .get(d.workload)
                    .map(|w| w.name.clone())
                    .unwrap_or_else(|| format!("#{}", d.workload)),
                point: point
                    .map(|p| p.label.clone())
                    .unwrap_or_else(|| format!("#{}", d.point)),
                metric: d.metric.clone(),
                verdict: d.verdict,
                repetitions: d.repetitions,
                margin_pct: d.margin_pct,
                advantage_pct: d.advantage_pct,
                ci_lo_pct: d.ci_lo_pct,
                ci_hi_pct: d.ci_hi_pct,
                mde_pct: d.mde_pct,
            }
        })
        .collect()
}

/// The hosts' system-configuration table (Appendix A, serve's hosts page),
/// one column per host labelled "name (roles)", from the inventories the
/// run stored, the roles as `roles` writes them (a report marks the
/// configurations they name); `None` when no host has a readable
/// inventory.
pub fn host_table(
    hosts: &[HostRow],
    roles: impl Fn(&str) -> String,
) -> Option<benchlab_inventory::HostTable> {
    let invs: Vec<(String, benchlab_inventory::Inventory)> = hosts
        .iter()
        .filter_map(|h| {
            serde_json::from_value(h.inventory.clone())
                .ok()
                .map(|i| (format!("{} ({})", h.name, roles(&h.roles)), i))
        })
        .collect();
    if invs.is_empty() {
        return None;
    }
    let refs: Vec<(&str, &benchlab_inventory::Inventory)> =
        invs.iter().map(|(n, i)| (n.as_str(), i)).collect();
    Some(benchlab_inventory::host_table(&refs))
}
