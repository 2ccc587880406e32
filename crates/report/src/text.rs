//! The words every renderer shares: the legend of the tables and the
//! methodology appendix, written once and laid out by each renderer.

use benchlab_stats::{Drift, BOOTSTRAP_RESAMPLES};

use crate::format::selection_text;
use crate::model::RunReport;

/// The legend of the tables: what a figure is, what ± means, how an
/// advantage is computed and what its marks say.
pub fn legend(report: &RunReport) -> String {
    format!(
        "Figures: {}, ± half its confidence interval. Advantage over `{}`: (A−B)/B, or (B−A)/B when lower is better. Verdicts ({}): no mark = better or worse beyond ±{}; ≈ = equivalent within it; ~ = undecided; ? = too few repetitions.{}\n",
        selection_text(report.selection),
        report.configurations.first().map(|c| c.name.as_str()).unwrap_or("-"),
        if report.design.is_some() {
            "5% error rate, a look after every round"
        } else {
            "5% error rate, one look"
        },
        margins(report).trim_start_matches('±'),
        if drift_unknown(report) {
            format!(" ‡ = {}: the configurations ran one after the other, so a difference between them may be drift over the run; no verdict (run them in blocks, or with an A/A control).", Drift::Unknown.mark().unwrap_or_default())
        } else {
            String::new()
        }
    )
}

/// The margins the report's verdicts were judged against: `2%`, or
/// `2% to 5% (by metric)`; the default when there is no verdict.
pub fn margins(report: &RunReport) -> String {
    let mut m: Vec<f64> = report.decisions.iter().map(|d| d.margin_pct).collect();
    m.sort_by(f64::total_cmp);
    m.dedup();
    match m.as_slice() {
        [] => format!("{}%", benchlab_stats::DEFAULT_MARGIN_PCT),
        [x] => format!("{x}%"),
        [lo, .., hi] => format!("{lo}% to {hi}% (by metric)"),
    }
}

/// Whether any comparison of the report is marked [`Drift::Unknown`].
pub fn drift_unknown(report: &RunReport) -> bool {
    report
        .tables
        .iter()
        .flat_map(|t| t.rows.iter().chain(&t.average))
        .flat_map(|r| r.advantages.iter().flatten())
        .any(|a| {
            a.comparison
                .as_ref()
                .is_some_and(|c| c.drift == Drift::Unknown)
        })
}

/// A labelled line of text that every renderer lays out its own way (a
/// table row in HTML, a list item in Markdown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labelled {
    /// What the line is about ("Started", "fs.matrix · 4k").
    pub label: String,
    /// The text.
    pub text: String,
}

/// The A/A control's section, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlText {
    /// The summary: which configuration was repeated and how many
    /// comparisons it called different.
    pub summary: String,
    /// Per comparison, "table · row" and its advantage, in the order of
    /// [`RunReport::control`].
    pub rows: Vec<Labelled>,
}

/// The A/A control's section; `None` without a control.
pub fn control(report: &RunReport) -> Option<ControlText> {
    if report.control.is_empty() {
        return None;
    }
    let (called, compared) = report.control_false_positives();
    let base = report
        .configurations
        .first()
        .map(|c| c.name.as_str())
        .unwrap_or("-");
    let head = format!(
        "`{base}` repeated as a hidden configuration in the same order as the others; {called} of {compared} comparison(s) called better or worse — the run's empirical false positives (at most about 5 % expected)."
    );
    let rows = report
        .control
        .iter()
        .map(|c| Labelled {
            label: format!("{} · {}", c.table, c.row),
            text: crate::format::advantage_text(&c.advantage, 2),
        })
        .collect();
    Some(ControlText {
        summary: head,
        rows,
    })
}

/// Appendix B: how the figures were produced, one line per topic.
pub fn methodology(report: &RunReport) -> Vec<Labelled> {
    let r = &report.run;
    let mut rows: Vec<Labelled> = Vec::new();
    let mut row = |k: &str, v: String| {
        rows.push(Labelled {
            label: k.to_string(),
            text: v,
        })
    };
    row("benchlab version", r.benchlab_version.clone());
    row("Study file", r.study_file.clone());
    row("Controller host", r.controller_host.clone());
    row("Started", r.started_at.clone());
    row(
        "Ended",
        r.ended_at
            .clone()
            .unwrap_or_else(|| "(not finished)".into()),
    );
    if let Some(d) = duration_s(&r.started_at, r.ended_at.as_deref()) {
        row("Duration", format!("{d:.0} s"));
    }
    row(
        "Run options",
        format!(
            "time scale {}{}",
            r.options.scale,
            if r.options.quick {
                ", quick trial (one repetition)"
            } else {
                ""
            }
        ),
    );
    row("Repetitions", report.repetition_rule.clone());
    if !report.order.is_empty() {
        row("Order", report.order.clone());
    }
    row("Quoted figure", selection_text(report.selection).into());
    row(
        "Intervals of figures",
        "median: distribution-free order-statistic interval (Le Boudec 2010, Thm 2.1), its exact coverage stated when below 95%; mean: Student t".into(),
    );
    row(
        "Advantage",
        "(A−B)/B for higher-is-better metrics, (B−A)/B for lower-is-better, as the seeds compute it; aggregate rows from the aggregates".into(),
    );
    row(
        "Interval of an advantage",
        format!(
            "Fieller's 95% interval for the ratio of means with Welch degrees of freedom (Fieller 1954; Tamhane & Logan 2004), limited to positive ratios when every figure is positive (Mandelkern 2002); for medians, a percentile bootstrap with {BOOTSTRAP_RESAMPLES} resamples seeded from the data (Efron & Tibshirani 1993, ch. 13), in the JSON output"
        ),
    );
    row(
        "Verdict",
        format!(
            "the sequential rule (benchlab_stats::SequentialRule): better or worse when the whole {}% interval of the advantage (when every figure is positive, the paired t interval of the units' log ratios, the mean log of A's repetitions minus B's; otherwise Fieller's over the units' means) lies beyond ±margin ({}), equivalent when the whole {}% interval lies within it (two one-sided tests, Schuirmann 1987), undecided otherwise; {}; units are rounds (the configurations alternating) or block pairs (ABBA blocks), so drift shared by a unit cancels; Lan & DeMets alpha spending (1983) keeps the error rate under repeated looks (docs/methods.md)",
            100.0 * (1.0 - benchlab_stats::DEFAULT_ALPHA),
            margins(report),
            100.0 * (1.0 - 2.0 * benchlab_stats::DEFAULT_ALPHA),
            if report.design.is_some() {
                "looked at after every round until decided or the budget was spent"
            } else {
                "a fixed design: one look at the repetitions run"
            }
        ),
    );
    row(
        "Curves",
        "a line's peak is its best figure; its decline, how much worse its last figure is, in % of the peak; peaks compare as the ratio of the figures at each line's own peak".into(),
    );
    rows
}

/// Seconds between two RFC 3339 times of the form the runner writes
/// (`YYYY-MM-DDTHH:MM:SS[.frac]Z`), when both parse.
pub(crate) fn duration_s(start: &str, end: Option<&str>) -> Option<f64> {
    let secs = crate::progress::epoch_s;
    let d = secs(end?)? - secs(start)?;
    (d >= 0.0).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            duration_s("2026-11-21T10:00:00Z", Some("2026-11-21T10:02:30.5Z")),
            Some(150.5)
        );
        // Across a month end and a leap day.
        assert_eq!(
            duration_s("2024-02-28T23:00:00Z", Some("2024-03-01T01:00:00Z")),
            Some(26.0 * 3600.0)
        );
        assert_eq!(duration_s("garbage", Some("2024-03-01T01:00:00Z")), None);
    }
}
