//! The system monitors in the report: each point's monitor summary per
//! host (the mean of its repetitions' summaries), figures per operation
//! where the point has an operation rate, the differences between
//! configurations that stand out ([`differences`]), and per-second CPU
//! charts of one repetition, drawn by the time-series chart of
//! [`crate::series`]'s views.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use benchlab_monitor::{CpuShare, DiskSummary, NicSummary, Series, Summary};
use benchlab_store::{ConfigRow, MonitorRow, PointRow, SampleRow, SampleStatus};

pub use crate::model::{MonitorDifference, MonitorPoint, MonitorReport, PerOperation};
use crate::model::{SeriesLine, SeriesSummary, SeriesView};

/// A CPU mode's share must differ by at least this many percentage
/// points between two configurations to be named.
pub const CPU_THRESHOLD_PP: f64 = 10.0;
/// A rate (context switches, interrupts per second) must differ by at
/// least this factor, and by [`RATE_FLOOR`] per second, to be named.
pub const RATE_FACTOR: f64 = 1.5;
/// See [`RATE_FACTOR`].
pub const RATE_FLOOR: f64 = 1000.0;
/// Most differences named per (configuration, point, host): the largest.
pub const MAX_DIFFERENCES: usize = 3;

impl MonitorDifference {
    /// `split-cpus: CPU 1 in softirq 38 % vs 4 % (baseline)`.
    pub fn sentence(&self) -> String {
        sentence(self, &self.configuration, &self.baseline)
    }

    /// Where: `workload · point · host`.
    pub fn place(&self) -> String {
        format!("{} · {} · {}", self.workload, self.point, self.host)
    }
}

/// [`MonitorDifference::sentence`] with the configurations named as
/// given (the document marks them).
pub fn sentence(d: &MonitorDifference, configuration: &str, baseline: &str) -> String {
    {
        let f = |v: f64| {
            if d.unit == "%" {
                format!("{v:.0} %")
            } else {
                format!("{}{}", fmt_rate(v), d.unit)
            }
        };
        format!(
            "{configuration}: {} {} vs {} ({baseline})",
            d.what,
            f(d.value),
            f(d.baseline_value),
        )
    }
}

/// The rule [`differences`] follows, in words (printed under the list).
pub fn rule() -> String {
    format!(
        "Each configuration against the first at the same point and host (means over repetitions): per CPU the mode (user, system, irq, softirq, iowait, steal) whose share differs most, named when it differs by {CPU_THRESHOLD_PP:.0} percentage points or more (else busy time, by the same threshold); context switches and interrupts per second when one is {RATE_FACTOR}× the other and they differ by {RATE_FLOOR:.0}/s or more. At most {MAX_DIFFERENCES} per point and host, largest first."
    )
}

/// What [`build`] reads: the run's rows and its monitors.
pub struct Source<'a> {
    /// The run's points.
    pub points: &'a [PointRow],
    /// The run's samples.
    pub samples: &'a [SampleRow],
    /// Its configurations.
    pub configurations: &'a [ConfigRow],
    /// Every stored monitor summary of the run.
    pub monitors: &'a [MonitorRow],
    /// The samples drawn: (point id, repetition, host) → series.
    pub series: &'a BTreeMap<(i64, u32, String), Series>,
    /// Per workload of the study, the metric its operations are counted
    /// by, as its plan stored it.
    pub operation_rates: &'a [Option<String>],
}

/// The monitors of compared columns: each column's (label, its run's
/// monitors, its configuration there) under the column's label, the
/// differences against the first column.
pub fn columns(cols: &[(String, &MonitorReport, &str)]) -> MonitorReport {
    use crate::compare::relabelled;
    let mut r = MonitorReport::default();
    for (label, m, config) in cols {
        r.points.extend(relabelled(
            &m.points,
            config,
            label,
            |x: &mut MonitorPoint| &mut x.configuration,
        ));
        r.charts.extend(relabelled(
            &m.charts,
            config,
            label,
            |x: &mut SeriesView| &mut x.configuration,
        ));
    }
    if let Some((base, ..)) = cols.first() {
        r.differences = differences(&r.points, base);
    }
    r
}

/// The (point id, repetition, host) whose samples the charts draw: per
/// point and host, the repetition the latency views show (the median run
/// of the headline metric) when it has monitors, else its first with
/// monitors.
pub fn chart_reps(monitors: &[MonitorRow], preferred: &[(i64, u32)]) -> Vec<(i64, u32, String)> {
    let mut out: Vec<(i64, u32, String)> = Vec::new();
    for m in monitors {
        if out.iter().any(|o| o.0 == m.point_id && o.2 == m.host) {
            continue;
        }
        let want = preferred
            .iter()
            .find(|p| p.0 == m.point_id)
            .map(|p| p.1)
            .filter(|rep| {
                monitors
                    .iter()
                    .any(|x| x.point_id == m.point_id && x.host == m.host && x.repetition == *rep)
            })
            .unwrap_or(m.repetition);
        out.push((m.point_id, want, m.host.clone()));
    }
    out
}

/// The monitors of a run's points.
pub fn build(src: &Source<'_>) -> MonitorReport {
    let mut r = MonitorReport::default();
    let config = |i: usize| {
        src.configurations
            .get(i)
            .map(|c| c.name.clone())
            .unwrap_or_else(|| format!("#{i}"))
    };
    for p in src.points {
        let mut hosts: Vec<&str> = Vec::new();
        for m in src.monitors.iter().filter(|m| m.point_id == p.id) {
            if !hosts.contains(&m.host.as_str()) {
                hosts.push(&m.host);
            }
        }
        for host in hosts {
            let reps: Vec<&Summary> = src
                .monitors
                .iter()
                .filter(|m| m.point_id == p.id && m.host == host)
                .map(|m| &m.summary)
                .collect();
            let summary = mean_summary(&reps);
            let rate = src
                .operation_rates
                .get(p.workload_idx)
                .and_then(|m| m.as_deref());
            let per_operation = rate.and_then(|m| per_operation(&summary, p, src.samples, m));
            let moved_mb = (summary.nics.values().map(|n| n.rx_bytes + n.tx_bytes))
                .chain(summary.disks.values().map(|d| d.read_bytes + d.write_bytes))
                .sum::<u64>() as f64
                / 1e6;
            let interrupts_per_mb =
                (moved_mb >= 1.0).then(|| summary.interrupts_per_s * summary.elapsed_s / moved_mb);
            r.points.push(MonitorPoint {
                configuration: config(p.config_idx),
                workload: p.workload_name.clone(),
                point: p.label.clone(),
                host: host.to_string(),
                repetitions: reps.len(),
                summary,
                per_operation,
                interrupts_per_mb,
            });
        }
    }
    r.differences = differences(&r.points, &config(0));
    for ((point_id, rep, host), series) in src.series {
        let Some(p) = src.points.iter().find(|p| p.id == *point_id) else {
            continue;
        };
        if let Some(v) = cpu_chart(series, *rep) {
            r.charts.push(SeriesView {
                workload: p.workload_name.clone(),
                kind: String::new(),
                configuration: config(p.config_idx),
                series: format!("{} · {host}", p.label),
                title: format!("{} on {host}: CPU busy per CPU", p.label),
                unit: "% busy".into(),
                x_unit: "s".into(),
                lines: v,
                band: String::new(),
            });
        }
    }
    // The plan's order: by configuration, then point, as the points are.
    let order = |v: &SeriesView| {
        src.points
            .iter()
            .position(|p| {
                p.workload_name == v.workload
                    && config(p.config_idx) == v.configuration
                    && v.series.starts_with(&format!("{} · ", p.label))
            })
            .unwrap_or(usize::MAX)
    };
    r.charts.sort_by_key(|v| (order(v), v.series.clone()));
    r
}

/// The host's work per operation, with the point's rate of `metric`
/// (the mean over its successful repetitions).
fn per_operation(
    s: &Summary,
    p: &PointRow,
    samples: &[SampleRow],
    metric: &str,
) -> Option<PerOperation> {
    let v: Vec<f64> = samples
        .iter()
        .filter(|x| x.point_id == p.id && x.status == SampleStatus::Ok)
        .filter_map(|x| x.metrics.get(metric).copied())
        .filter(|v| v.is_finite())
        .collect();
    if v.is_empty() {
        return None;
    }
    let rate = v.iter().sum::<f64>() / v.len() as f64;
    if rate <= 0.0 || s.elapsed_s <= 0.0 {
        return None;
    }
    Some(PerOperation {
        metric: metric.to_string(),
        rate_per_s: rate,
        cpu_us: s.cpu_busy_s / s.elapsed_s / rate * 1e6,
        context_switches: s.context_switches_per_s / rate,
        interrupts: s.interrupts_per_s / rate,
    })
}

/// The mean of several repetitions' summaries: shares, rates and gauges
/// averaged; counters averaged per repetition (rounded).
pub fn mean_summary(reps: &[&Summary]) -> Summary {
    let n = reps.len().max(1) as f64;
    let avg = |f: &dyn Fn(&Summary) -> f64| reps.iter().map(|s| f(s)).sum::<f64>() / n;
    let avg_u = |f: &dyn Fn(&Summary) -> u64| {
        (reps.iter().map(|s| f(s)).sum::<u64>() as f64 / n).round() as u64
    };
    let cpus = reps.iter().map(|s| s.cpus.len()).max().unwrap_or(0);
    let cpu =
        |i: usize, f: fn(&CpuShare) -> f64| avg(&|s: &Summary| s.cpus.get(i).map(f).unwrap_or(0.0));
    let keys = |f: &dyn Fn(&Summary) -> Vec<String>| {
        let mut k: Vec<String> = reps.iter().flat_map(|s| f(s)).collect();
        k.sort();
        k.dedup();
        k
    };
    let mut out = Summary {
        elapsed_s: avg(&|s| s.elapsed_s),
        samples: avg_u(&|s| s.samples as u64) as usize,
        pinned_cpu: reps.first().and_then(|s| s.pinned_cpu),
        cpus: (0..cpus)
            .map(|i| CpuShare {
                user_pct: cpu(i, |c| c.user_pct),
                system_pct: cpu(i, |c| c.system_pct),
                irq_pct: cpu(i, |c| c.irq_pct),
                softirq_pct: cpu(i, |c| c.softirq_pct),
                iowait_pct: cpu(i, |c| c.iowait_pct),
                steal_pct: cpu(i, |c| c.steal_pct),
                idle_pct: cpu(i, |c| c.idle_pct),
                busy_pct: cpu(i, |c| c.busy_pct),
            })
            .collect(),
        cpu_busy_s: avg(&|s| s.cpu_busy_s),
        context_switches_per_s: avg(&|s| s.context_switches_per_s),
        interrupts_per_s: avg(&|s| s.interrupts_per_s),
        run_queue_mean: avg(&|s| s.run_queue_mean),
        ..Summary::default()
    };
    for k in keys(&|s| s.softirqs_per_s.keys().cloned().collect()) {
        let v = avg(&|s| s.softirqs_per_s.get(&k).copied().unwrap_or(0.0));
        out.softirqs_per_s.insert(k, v);
    }
    for k in keys(&|s| s.nics.keys().cloned().collect()) {
        let get = |s: &Summary| s.nics.get(&k).cloned().unwrap_or_default();
        out.nics.insert(
            k.clone(),
            NicSummary {
                rx_bytes: avg_u(&|s| get(s).rx_bytes),
                tx_bytes: avg_u(&|s| get(s).tx_bytes),
                rx_packets: avg_u(&|s| get(s).rx_packets),
                tx_packets: avg_u(&|s| get(s).tx_packets),
                drops: avg_u(&|s| get(s).drops),
                errors: avg_u(&|s| get(s).errors),
                rx_bytes_per_s: avg(&|s| get(s).rx_bytes_per_s),
                tx_bytes_per_s: avg(&|s| get(s).tx_bytes_per_s),
            },
        );
    }
    for k in keys(&|s| s.disks.keys().cloned().collect()) {
        let get = |s: &Summary| s.disks.get(&k).cloned().unwrap_or_default();
        out.disks.insert(
            k.clone(),
            DiskSummary {
                reads: avg_u(&|s| get(s).reads),
                writes: avg_u(&|s| get(s).writes),
                read_bytes: avg_u(&|s| get(s).read_bytes),
                write_bytes: avg_u(&|s| get(s).write_bytes),
                ops_per_s: avg(&|s| get(s).ops_per_s),
                in_flight_mean: avg(&|s| get(s).in_flight_mean),
                await_ms: avg(&|s| get(s).await_ms),
            },
        );
    }
    out.memory = benchlab_monitor::MemorySummary {
        free_kib: avg(&|s| s.memory.free_kib),
        available_kib: avg(&|s| s.memory.available_kib),
        cache_kib: avg(&|s| s.memory.cache_kib),
        dirty_kib: avg(&|s| s.memory.dirty_kib),
        writeback_kib: avg(&|s| s.memory.writeback_kib),
    };
    out
}

/// A CPU mode's share of a CPU's time.
type Share = fn(&CpuShare) -> f64;

/// The CPU modes [`differences`] compares, with their names.
const MODES: [(&str, Share); 6] = [
    ("user", |c| c.user_pct),
    ("system", |c| c.system_pct),
    ("irq", |c| c.irq_pct),
    ("softirq", |c| c.softirq_pct),
    ("iowait", |c| c.iowait_pct),
    ("steal", |c| c.steal_pct),
];

/// Where each configuration's monitors differ from the baseline's at the
/// same workload, point and host, by [`rule`].
pub fn differences(points: &[MonitorPoint], baseline: &str) -> Vec<MonitorDifference> {
    let mut out = Vec::new();
    for p in points.iter().filter(|p| p.configuration != baseline) {
        let Some(b) = points.iter().find(|b| {
            b.configuration == baseline
                && b.workload == p.workload
                && b.point == p.point
                && b.host == p.host
        }) else {
            continue;
        };
        // (size of the difference for ordering, what, value, baseline, unit)
        let mut found: Vec<(f64, String, f64, f64, &str)> = Vec::new();
        for (i, (c, bc)) in p.summary.cpus.iter().zip(&b.summary.cpus).enumerate() {
            let best = MODES
                .iter()
                .map(|(name, f)| (*name, f(c), f(bc)))
                .max_by(|x, y| (x.1 - x.2).abs().total_cmp(&(y.1 - y.2).abs()));
            match best {
                Some((name, v, bv)) if (v - bv).abs() >= CPU_THRESHOLD_PP => {
                    found.push(((v - bv).abs(), format!("CPU {i} in {name}"), v, bv, "%"));
                }
                _ if (c.busy_pct - bc.busy_pct).abs() >= CPU_THRESHOLD_PP => found.push((
                    (c.busy_pct - bc.busy_pct).abs(),
                    format!("CPU {i} busy"),
                    c.busy_pct,
                    bc.busy_pct,
                    "%",
                )),
                _ => {}
            }
        }
        for (what, v, bv) in [
            (
                "context switches",
                p.summary.context_switches_per_s,
                b.summary.context_switches_per_s,
            ),
            (
                "interrupts",
                p.summary.interrupts_per_s,
                b.summary.interrupts_per_s,
            ),
        ] {
            let (lo, hi) = (v.min(bv), v.max(bv));
            if hi - lo >= RATE_FLOOR && hi >= lo * RATE_FACTOR {
                // Ranked with the CPU shares: a doubling counts as 50 pp.
                let size = 50.0 * (hi / lo.max(1.0)).log2().min(2.0);
                found.push((size, what.to_string(), v, bv, "/s"));
            }
        }
        found.sort_by(|x, y| y.0.total_cmp(&x.0));
        for (_, what, value, baseline_value, unit) in found.into_iter().take(MAX_DIFFERENCES) {
            out.push(MonitorDifference {
                workload: p.workload.clone(),
                point: p.point.clone(),
                host: p.host.clone(),
                configuration: p.configuration.clone(),
                baseline: baseline.to_string(),
                what,
                value,
                baseline_value,
                unit: unit.to_string(),
            });
        }
    }
    out
}

/// Fewest intervals a CPU chart is drawn with.
const MIN_CHART_INTERVALS: usize = 3;

/// Busy % of each CPU per interval of `series`, one line per CPU.
fn cpu_chart(series: &Series, rep: u32) -> Option<Vec<SeriesLine>> {
    let lay = &series.layout;
    let n = series.rows();
    if n < 2 || lay.cpus == 0 {
        return None;
    }
    let step = (n - 1).div_ceil(crate::model::MAX_SERIES_POINTS).max(1);
    let at: Vec<usize> = (0..n).step_by(step).chain(std::iter::once(n - 1)).collect();
    let mut at = at;
    at.dedup();
    // A line needs a few intervals: a repetition shorter than three
    // samples' spacing has its summary and no chart.
    if at.len() < MIN_CHART_INTERVALS + 1 {
        return None;
    }
    let x: Vec<f64> = at[1..]
        .iter()
        .map(|&i| series.t_ms[i] as f64 / 1000.0)
        .collect();
    let modes = benchlab_monitor::CPU_MODES.len();
    let mut lines = Vec::new();
    for cpu in 0..lay.cpus {
        let mean: Vec<Option<f64>> = at
            .windows(2)
            .map(|w| {
                let (a, b) = (series.row(w[0]), series.row(w[1]));
                let d = |k: usize| b[lay.cpu(cpu, k)].saturating_sub(a[lay.cpu(cpu, k)]);
                let total: u64 = (0..modes).map(d).sum();
                // idle and iowait are modes 3 and 4 ([`CPU_MODES`]).
                (total > 0).then(|| 100.0 * (total - d(3) - d(4)) as f64 / total as f64)
            })
            .collect();
        let v: Vec<f64> = mean.iter().flatten().copied().collect();
        let avg = v.iter().sum::<f64>() / v.len().max(1) as f64;
        let sd = if v.len() > 1 {
            (v.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
        } else {
            f64::NAN
        };
        let fold = |f: fn(f64, f64) -> f64| v.iter().copied().reduce(f).unwrap_or(f64::NAN);
        lines.push(SeriesLine {
            point: format!("CPU {cpu}"),
            side: "client".into(),
            repetition: rep,
            x: x.clone(),
            summary: SeriesSummary {
                intervals: v.len(),
                empty: mean.len() - v.len(),
                mean: avg,
                stddev: sd,
                lowest: fold(f64::min),
                highest: fold(f64::max),
                min: None,
                max: None,
            },
            mean,
            min: Vec::new(),
            max: Vec::new(),
            low: Vec::new(),
            high: Vec::new(),
        });
    }
    Some(lines)
}

/// `12.3k`, `950`.
fn fmt_rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// The compact table of one workload's monitors: a header and a row per
/// (configuration, point, host).
pub fn table_rows(r: &MonitorReport, workload: &str) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "configuration · point · host",
        "busy % per CPU",
        "user/sys/irq+softirq/iowait %",
        "ctx sw/s",
        "intr/s",
        "run queue",
        "NIC rx/tx MB/s",
        "NIC drops",
        "disk ops/s",
        "disk MB",
        "await ms",
        "dirty MiB",
        "CPU µs/op",
        "ctx sw/op",
        "intr/MB",
    ]
    .map(String::from)
    .to_vec()];
    for m in r.points.iter().filter(|m| m.workload == workload) {
        let s = &m.summary;
        let n = s.cpus.len().max(1) as f64;
        let all = |f: fn(&CpuShare) -> f64| s.cpus.iter().map(f).sum::<f64>() / n;
        let mb = |v: f64| format!("{:.2}", v / 1e6);
        let (rx, tx) = s.nics.values().fold((0.0, 0.0), |a, x| {
            (a.0 + x.rx_bytes_per_s, a.1 + x.tx_bytes_per_s)
        });
        let drops: u64 = s.nics.values().map(|x| x.drops).sum();
        let ops: f64 = s.disks.values().map(|d| d.ops_per_s).sum();
        let bytes: u64 = s.disks.values().map(|d| d.read_bytes + d.write_bytes).sum();
        let busy_ops: u64 = s.disks.values().map(|d| d.reads + d.writes).sum();
        let await_ms = if busy_ops > 0 {
            s.disks
                .values()
                .map(|d| d.await_ms * (d.reads + d.writes) as f64)
                .sum::<f64>()
                / busy_ops as f64
        } else {
            0.0
        };
        let opt = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or("-".into());
        rows.push(vec![
            format!("{} · {} · {}", m.configuration, m.point, m.host),
            s.cpus
                .iter()
                .map(|c| format!("{:.0}", c.busy_pct))
                .collect::<Vec<_>>()
                .join(" "),
            format!(
                "{:.0}/{:.0}/{:.0}/{:.0}",
                all(|c| c.user_pct),
                all(|c| c.system_pct),
                all(|c| c.irq_pct + c.softirq_pct),
                all(|c| c.iowait_pct)
            ),
            fmt_rate(s.context_switches_per_s),
            fmt_rate(s.interrupts_per_s),
            format!("{:.1}", s.run_queue_mean),
            format!("{}/{}", mb(rx), mb(tx)),
            drops.to_string(),
            format!("{ops:.0}"),
            format!("{:.1}", bytes as f64 / 1e6),
            if busy_ops > 0 {
                format!("{await_ms:.2}")
            } else {
                "-".into()
            },
            format!("{:.1}", s.memory.dirty_kib / 1024.0),
            opt(m.per_operation.as_ref().map(|p| p.cpu_us), 1),
            opt(m.per_operation.as_ref().map(|p| p.context_switches), 2),
            opt(m.interrupts_per_mb, 0),
        ]);
    }
    rows
}

/// What the table's columns mean, in one paragraph.
pub const LEGEND: &str = "Means over each point's repetitions, from the first sample to the last of each (set-up and collection included). busy: all CPU time but idle and iowait, per CPU in CPU order; the modes as shares of all CPUs' time. NIC: every interface of the host's network namespace; disk: every block device that completed a request. Per operation: all CPUs' busy time, context switches and interrupts of the host divided by the point's operation rate (transactions, requests, operations per second); intr/MB: interrupts per MB moved by the interfaces and disks.";

/// One workload's monitors in HTML: its table, the differences and the
/// per-second CPU charts (drawn by `chart`, the report's time-series
/// chart).
pub fn html(
    r: &MonitorReport,
    workload: &str,
    chart: &dyn Fn(&SeriesView, &str, &str, &mut String),
    o: &mut String,
) {
    if !r.points.iter().any(|m| m.workload == workload) {
        return;
    }
    let esc = crate::format::esc;
    let _ = writeln!(
        o,
        "<h4 class=\"monitors\">System monitors: {}</h4>",
        esc(workload)
    );
    o.push_str("<div class=\"scroll\">");
    let rows = table_rows(r, workload);
    o.push_str("<table>");
    for (i, row) in rows.iter().enumerate() {
        let tag = if i == 0 { "th" } else { "td" };
        o.push_str("<tr>");
        for (j, c) in row.iter().enumerate() {
            let class = if j == 0 { " class=\"l\"" } else { "" };
            let _ = write!(o, "<{tag}{class}>{}</{tag}>", esc(c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table></div>\n");
    let _ = writeln!(o, "<p class=\"legend\">{}</p>", esc(LEGEND));
    let mine: Vec<&MonitorDifference> = r
        .differences
        .iter()
        .filter(|d| d.workload == workload)
        .collect();
    if !mine.is_empty() {
        o.push_str("<p>Where configurations differ:</p>\n<ul class=\"monitor-differences\">\n");
        for d in mine {
            let _ = writeln!(
                o,
                "<li><span class=\"small\">{}</span> — {}</li>",
                esc(&d.place()),
                esc(&d.sentence())
            );
        }
        o.push_str("</ul>\n");
        let _ = writeln!(o, "<p class=\"small\">{}</p>", esc(&rule()));
    }
    for (i, v) in r.charts.iter().enumerate() {
        if v.workload != workload {
            continue;
        }
        let title = format!("{} · {}", v.configuration, v.title);
        let _ = writeln!(o, "<h5>{}</h5>", esc(&title));
        chart(v, &format!("monitor-{i}"), &title, o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(config: &str, cpus: &[(f64, f64)], cs: f64) -> MonitorPoint {
        MonitorPoint {
            configuration: config.into(),
            workload: "w".into(),
            point: "size=1".into(),
            host: "sut".into(),
            repetitions: 1,
            summary: Summary {
                cpus: cpus
                    .iter()
                    .map(|(user, softirq)| CpuShare {
                        user_pct: *user,
                        softirq_pct: *softirq,
                        busy_pct: user + softirq,
                        idle_pct: 100.0 - user - softirq,
                        ..CpuShare::default()
                    })
                    .collect(),
                context_switches_per_s: cs,
                ..Summary::default()
            },
            per_operation: None,
            interrupts_per_mb: None,
        }
    }

    #[test]
    fn the_largest_differences_beyond_the_threshold_are_named() {
        let points = [
            point("base", &[(20.0, 1.0), (5.0, 4.0)], 2000.0),
            point("split-cpus", &[(25.0, 2.0), (5.0, 38.0)], 2500.0),
            point("more-switches", &[(20.0, 1.0), (5.0, 4.0)], 9000.0),
        ];
        let d = differences(&points, "base");
        let s: Vec<String> = d.iter().map(MonitorDifference::sentence).collect();
        assert_eq!(
            s,
            [
                "split-cpus: CPU 1 in softirq 38 % vs 4 % (base)",
                "more-switches: context switches 9000/s vs 2000/s (base)"
            ]
        );
        assert_eq!(d[0].place(), "w · size=1 · sut");
    }

    #[test]
    fn repetitions_average_and_operations_divide() {
        let a = point("c", &[(10.0, 0.0)], 100.0).summary;
        let mut b = point("c", &[(30.0, 0.0)], 300.0).summary;
        b.nics.insert(
            "eth0".into(),
            NicSummary {
                rx_bytes: 2_000_000,
                ..NicSummary::default()
            },
        );
        let m = mean_summary(&[&a, &b]);
        assert_eq!(m.cpus[0].user_pct, 20.0);
        assert_eq!(m.context_switches_per_s, 200.0);
        assert_eq!(m.nics["eth0"].rx_bytes, 1_000_000);

        let s = Summary {
            elapsed_s: 2.0,
            cpu_busy_s: 1.0,
            context_switches_per_s: 5000.0,
            interrupts_per_s: 1000.0,
            ..Summary::default()
        };
        let p = PointRow {
            id: 1,
            config_idx: 0,
            point_idx: 0,
            workload_idx: 0,
            workload_name: "w".into(),
            kind: "k".into(),
            label: "l".into(),
            params: Default::default(),
        };
        let sample = |v: f64| SampleRow {
            point_id: 1,
            repetition: 0,
            status: SampleStatus::Ok,
            reason: None,
            started_at: String::new(),
            ended_at: String::new(),
            metrics: [("requests_per_s".to_string(), v)].into_iter().collect(),
        };
        let per =
            per_operation(&s, &p, &[sample(900.0), sample(1100.0)], "requests_per_s").unwrap();
        assert_eq!(per.metric, "requests_per_s");
        // Only the declared metric counts operations.
        assert!(per_operation(&s, &p, &[sample(900.0)], "transactions_per_s").is_none());
        // 0.5 CPU-seconds per second over 1000 requests per second.
        assert!((per.cpu_us - 500.0).abs() < 1e-9);
        assert_eq!(per.context_switches, 5.0);
        assert_eq!(per.interrupts, 1.0);
    }
}
