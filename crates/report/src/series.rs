//! Time-series views ([`ViewSpec::Series`]): what a workload records per
//! interval of a repetition (mq.latency's per-second mean, min and max
//! latency, seed 003's Figures 6 and 7), read from the stored side results
//! of the repetition that gives each point's quoted figure. The HTML
//! draws one chart per configuration with a line per point and its
//! min–max band; the terminal and Markdown print each line's summary.

use benchlab_core::resolved::ResolvedPlan;
use benchlab_core::study::Selection;
use benchlab_core::{SideResult, ViewSpec};
use benchlab_stats as stats;
use benchlab_store::{ConfigRow, PointRow, SampleRow, SampleStatus};

use crate::model::{SeriesLine, SeriesSummary, SeriesView};

/// What [`build`] reads besides the plan: the run's rows and the stored
/// side results of one (point id, repetition).
pub struct Source<'a, F> {
    /// The run's points.
    pub points: &'a [PointRow],
    /// The run's samples.
    pub samples: &'a [SampleRow],
    /// Its configurations, in study order.
    pub configurations: &'a [ConfigRow],
    /// How the study quotes a figure.
    pub selection: Selection,
    /// The stored side results of (point id, repetition).
    pub side_results: F,
}

/// The (point id, repetition) pairs whose side results [`build`] reads:
/// each series point's quoted repetition, so that a reader fetches them
/// with the run's other rows.
pub fn reps(
    plan: &ResolvedPlan,
    points: &[PointRow],
    samples: &[SampleRow],
    selection: Selection,
) -> Vec<(i64, u32)> {
    let mut out = Vec::new();
    for (w, shape) in plan.workloads.iter().enumerate() {
        for spec in &shape.views {
            let ViewSpec::Series { metric, .. } = spec else {
                continue;
            };
            for p in points.iter().filter(|p| p.workload_idx == w) {
                if let Some(rep) = quoted_repetition(samples, p.id, metric, selection) {
                    out.push((p.id, rep));
                }
            }
        }
    }
    out
}

/// Every series view the stored plan's workloads declare, from the stored
/// side results of each point's quoted repetition.
pub fn build<F>(plan: &ResolvedPlan, mut src: Source<'_, F>) -> Vec<SeriesView>
where
    F: FnMut(i64, u32) -> Vec<(String, SideResult)>,
{
    let mut out = Vec::new();
    for (w, shape) in plan.workloads.iter().enumerate() {
        let Some(entry) = plan.study.workloads.get(w) else {
            continue;
        };
        for spec in &shape.views {
            let ViewSpec::Series {
                series,
                min,
                max,
                spread,
                count,
                title,
                unit,
                scale,
                interval_param,
                metric,
            } = spec
            else {
                continue;
            };
            for (c, config) in src.configurations.iter().enumerate() {
                let mut lines = Vec::new();
                let mut timed = interval_param.is_some();
                for p in src
                    .points
                    .iter()
                    .filter(|p| p.workload_idx == w && p.config_idx == c)
                {
                    let Some(rep) = quoted_repetition(src.samples, p.id, metric, src.selection)
                    else {
                        continue;
                    };
                    let step = interval_param
                        .as_ref()
                        .and_then(|k| p.params.get(k))
                        .and_then(|v| v.as_f64())
                        .filter(|s| *s > 0.0);
                    timed &= step.is_some();
                    for (side, r) in (src.side_results)(p.id, rep) {
                        let get =
                            |name: &Option<String>| name.as_ref().and_then(|n| r.series.get(n));
                        let Some(means) = r.series.get(series) else {
                            continue;
                        };
                        let counts = get(count);
                        let has = |i: usize| {
                            counts.is_none_or(|c| c.values.get(i).copied().unwrap_or(0) > 0)
                        };
                        let values =
                            |s: Option<&benchlab_core::recorder::Series>| -> Vec<Option<f64>> {
                                let Some(s) = s else { return Vec::new() };
                                s.values
                                    .iter()
                                    .enumerate()
                                    .map(|(i, v)| has(i).then(|| *v as f64 * scale))
                                    .collect()
                            };
                        let mean = values(Some(means));
                        let stride = means.stride.max(1) as f64;
                        let x = (1..=mean.len())
                            .map(|i| i as f64 * stride * step.unwrap_or(1.0))
                            .collect();
                        let (lo, hi) = (values(get(min)), values(get(max)));
                        let summary = summarise(&mean, &lo, &hi);
                        let (low, high) = match get(spread) {
                            Some(sd) => sd_band(&mean, &values(Some(sd)), &lo, &hi),
                            None => (Vec::new(), Vec::new()),
                        };
                        lines.push(SeriesLine {
                            point: p.label.clone(),
                            side,
                            repetition: rep,
                            x,
                            mean,
                            min: lo,
                            max: hi,
                            low,
                            high,
                            summary,
                        });
                    }
                }
                if lines.is_empty() {
                    continue;
                }
                out.push(SeriesView {
                    workload: entry.name.clone(),
                    kind: entry.kind.clone(),
                    configuration: config.name.clone(),
                    series: series.clone(),
                    title: title.clone(),
                    unit: unit.clone(),
                    x_unit: if timed { "s" } else { "interval" }.into(),
                    lines,
                    band: if spread.is_some() {
                        SD_BAND.into()
                    } else {
                        String::new()
                    },
                });
            }
        }
    }
    out
}

/// What a band from a spread series shows.
pub const SD_BAND: &str =
    "mean ± 1 standard deviation of the interval's values, within its min and max";

/// The band of each interval: its mean ± one standard deviation, cut to
/// the interval's min and max where those are recorded.
///
/// Why not min–max: the max of an interval is one message of hundreds (a
/// broker's garbage collection, a scheduling delay), so a min–max band is
/// the outliers' shape and squeezes the means into a flat line at the foot
/// of the chart; the extremes stay in the summary table. Why not the
/// inter-quartile range: it needs a histogram per interval in the
/// receiver's loop, while the standard deviation comes exact from two
/// integer sums. The cut keeps the band from showing latencies no message
/// had (a mean − sd below the fastest message of a skewed interval).
fn sd_band(
    mean: &[Option<f64>],
    sd: &[Option<f64>],
    min: &[Option<f64>],
    max: &[Option<f64>],
) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    let at = |s: &[Option<f64>], i: usize| s.get(i).copied().flatten();
    (0..mean.len())
        .map(|i| match (at(mean, i), at(sd, i)) {
            (Some(m), Some(s)) => (
                Some(at(min, i).map_or(m - s, |lo| (m - s).max(lo))),
                Some(at(max, i).map_or(m + s, |hi| (m + s).min(hi))),
            ),
            _ => (None, None),
        })
        .unzip()
}

/// The repetition of point `point` whose figure of `metric` the study
/// quotes: the median-stddev run or the median run (for a median or a
/// mean, which no one repetition gives, the median run).
fn quoted_repetition(
    samples: &[SampleRow],
    point: i64,
    metric: &str,
    selection: Selection,
) -> Option<u32> {
    let reps: Vec<(u32, f64, f64)> = samples
        .iter()
        .filter(|s| s.point_id == point && s.status == SampleStatus::Ok)
        .filter_map(|s| {
            let v = *s.metrics.get(metric)?;
            let sd = crate::figures::stddev_companion(metric)
                .and_then(|n| s.metrics.get(&n).copied())
                .unwrap_or(f64::NAN);
            v.is_finite().then_some((s.repetition, v, sd))
        })
        .collect();
    let values: Vec<f64> = reps.iter().map(|r| r.1).collect();
    let stddevs: Vec<f64> = reps.iter().map(|r| r.2).collect();
    let i = match selection {
        Selection::MedianStddevRun => {
            stats::median_stddev_run(&stddevs).or_else(|| stats::median_run(&values))
        }
        _ => stats::median_run(&values),
    }?;
    Some(reps[i].0)
}

fn summarise(mean: &[Option<f64>], min: &[Option<f64>], max: &[Option<f64>]) -> SeriesSummary {
    let v: Vec<f64> = mean.iter().flatten().copied().collect();
    let n = v.len();
    let avg = if n > 0 {
        v.iter().sum::<f64>() / n as f64
    } else {
        f64::NAN
    };
    let stddev = if n > 1 {
        (v.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        f64::NAN
    };
    let fold = |s: &[Option<f64>], f: fn(f64, f64) -> f64| s.iter().flatten().copied().reduce(f);
    SeriesSummary {
        intervals: n,
        empty: mean.len() - n,
        mean: avg,
        stddev,
        lowest: fold(mean, f64::min).unwrap_or(f64::NAN),
        highest: fold(mean, f64::max).unwrap_or(f64::NAN),
        min: fold(min, f64::min),
        max: fold(max, f64::max),
    }
}

/// The summary table of a view for the terminal and Markdown: a header
/// and one row per line.
pub fn summary_rows(v: &SeriesView) -> Vec<Vec<String>> {
    let u = &v.unit;
    let f = |x: f64| {
        if x.is_finite() {
            format!("{x:.4}")
        } else {
            "-".into()
        }
    };
    let mut rows = vec![vec![
        "point".to_string(),
        "intervals".into(),
        format!("mean ({u})"),
        format!("stddev ({u})"),
        format!("lowest–highest interval ({u})"),
        format!("min–max ({u})"),
    ]];
    for l in &v.lines {
        let s = &l.summary;
        let point = if l.side == "client" {
            l.point.clone()
        } else {
            format!("{} ({})", l.point, l.side)
        };
        rows.push(vec![
            point,
            if s.empty > 0 {
                format!("{} ({} empty)", s.intervals, s.empty)
            } else {
                s.intervals.to_string()
            },
            f(s.mean),
            f(s.stddev),
            format!("{}–{}", f(s.lowest), f(s.highest)),
            match (s.min, s.max) {
                (Some(a), Some(b)) => format!("{}–{}", f(a), f(b)),
                _ => "-".into(),
            },
        ]);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_not_zeros_and_the_summary_spans_the_band() {
        let s = summarise(
            &[Some(1.0), None, Some(3.0)],
            &[Some(0.5), None, Some(2.0)],
            &[Some(1.5), None, Some(9.0)],
        );
        assert_eq!((s.intervals, s.empty), (2, 1));
        assert_eq!(s.mean, 2.0);
        assert!((s.stddev - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!((s.lowest, s.highest), (1.0, 3.0));
        assert_eq!((s.min, s.max), (Some(0.5), Some(9.0)));
    }

    /// One slow message does not make the band: 0.2 ms means with 30 ms
    /// maxima draw a band of about ±3 ms, cut at the fastest message, and
    /// an empty interval has none.
    #[test]
    fn the_band_is_the_spread_within_the_extremes() {
        let (low, high) = sd_band(
            &[Some(0.5), None, Some(0.2)],
            &[Some(0.1), None, Some(2.98)],
            &[Some(0.3), None, Some(0.15)],
            &[Some(0.9), None, Some(30.0)],
        );
        assert_eq!(low, [Some(0.4), None, Some(0.15)]);
        assert_eq!(high[1], None);
        assert!((high[0].unwrap() - 0.6).abs() < 1e-12);
        assert!((high[2].unwrap() - 3.18).abs() < 1e-12);
        // Cut to the max where mean + sd exceeds it.
        let (_, high) = sd_band(&[Some(1.0)], &[Some(5.0)], &[], &[Some(2.0)]);
        assert_eq!(high, [Some(2.0)]);
    }
}
