//! What `check` says of a study's design: its repetitions, its budget and
//! the worst-case time of each design.

use benchlab_core::plan::RunOptions;
use benchlab_core::study::{DesignKind, Study};
use benchlab_core::units::format_duration;
use benchlab_core::Registry;

/// The seconds the until-decided design can take at most: every point
/// to its cap, or the time budget (no round starts that would pass it,
/// except a session's first).
pub(crate) fn worst_case_s(study: &Study, reg: &Registry, opts: RunOptions) -> f64 {
    let round = study.round_s(reg, opts);
    let by_reps = round * f64::from(study.design.cap());
    match study.design.max_duration_s {
        Some(d) => by_reps.min(d.max(round)),
        None => by_reps,
    }
}

/// The margins of a study in words: the study's, then any workload's
/// or metric's own.
fn margins(study: &Study) -> String {
    let pct = |p: f64| format!("±{p}%");
    let mut parts = vec![pct(study
        .design
        .margin
        .pct
        .unwrap_or(benchlab_core::study::DEFAULT_MARGIN_PCT))];
    for (m, p) in &study.design.margin.metrics {
        parts.push(format!("{m} {}", pct(*p)));
    }
    for w in &study.workloads {
        if let Some(p) = w.margin.pct {
            parts.push(format!("workload {} {}", w.name, pct(p)));
        }
        for (m, p) in &w.margin.metrics {
            parts.push(format!("workload {} {m} {}", w.name, pct(*p)));
        }
    }
    parts.join(", ")
}

/// `check`'s lines about the design.
pub(crate) fn check_lines(study: &Study, reg: &Registry, opts: RunOptions) -> Vec<String> {
    let d = &study.design;
    let round = study.round_s(reg, opts);
    let budget = format!(
        "max_repetitions {} per point and configuration, max_duration {}; one round about {}, worst case about {}",
        d.max_repetitions,
        d.max_duration_s
            .map(format_duration)
            .unwrap_or_else(|| "none".into()),
        format_duration(round),
        format_duration(worst_case_s(study, reg, opts)),
    );
    match d.kind {
        DesignKind::UntilDecided => vec![
            format!(
                "  design: until-decided: rounds in the study's order until every comparison is better, worse or equivalent within its margin ({}), at a 5 % error rate under repeated looks",
                margins(study)
            ),
            format!("    {budget}"),
            "    `--design fixed` runs the repetitions above instead".into(),
        ],
        DesignKind::Fixed => vec![
            "  design: fixed: the repetitions above, as the file gives them".into(),
            format!(
                "    `--design until-decided` decides then stops instead (margin {}): {budget}",
                margins(study)
            ),
        ],
    }
}
