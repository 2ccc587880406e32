//! Every label, mark and verdict class of a report, each decided by one
//! function here: the document builder calls them, no writer does.

use benchlab_core::decision::{Decided, DesignSummary};
use benchlab_core::study::EMULATED;
use benchlab_stats::Drift;

use super::{Cell, Class};
use crate::format::{advantage_text, group_thousands};
use crate::model::{Advantage, CurveView, Decision, RunReport, Table};

/// The mark after an emulated configuration's name in every heading.
pub const EMULATED_MARK: &str = "(emulated)";

/// A configuration (or a comparison's column) as every heading names it:
/// with [`EMULATED_MARK`] when it ran on emulated guests. The one place
/// that decides the emulated mark.
pub fn configuration(report: &RunReport, name: &str) -> String {
    if is_emulated(report, name) {
        format!("{name} {EMULATED_MARK}")
    } else {
        name.to_string()
    }
}

/// A message benchlab wrote (the order's reason, a run event, a note),
/// with each emulated configuration it names as "configuration `NAME`"
/// marked inside the quotes, as every heading marks it.
pub fn message(report: &RunReport, text: &str) -> String {
    let mut out = text.to_string();
    for e in &report.emulated {
        let bare = format!("configuration `{}`", e.configuration);
        if out.contains(&bare) {
            let marked = format!(
                "configuration `{}`",
                configuration(report, &e.configuration)
            );
            out = out.replace(&bare, &marked);
        }
    }
    out
}

/// A host's roles as the run stored them (`server in a and b,client`),
/// each configuration they name marked.
pub fn roles(report: &RunReport, roles: &str) -> String {
    roles
        .split(',')
        .map(|part| match part.split_once(" in ") {
            Some((role, names)) => {
                let names: Vec<String> = names
                    .split(" and ")
                    .map(|n| configuration(report, n))
                    .collect();
                format!("{role} in {}", names.join(" and "))
            }
            None => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A published (imported) column's label: the one place that decides
/// the published mark.
pub fn published(name: &str) -> String {
    format!("{name} ({})", crate::import::PUBLISHED)
}

/// The A/A control's name where a verdict names it: the one place that
/// decides the control's mark. `base` is the configuration it repeats.
pub fn control(base: &str) -> String {
    format!("{base} (A/A control)")
}

/// Whether configuration `name` ran on emulated guests.
pub fn is_emulated(report: &RunReport, name: &str) -> bool {
    report.emulated.iter().any(|e| e.configuration == name)
}

/// The classes of a configuration's cells and headings.
pub fn configuration_class(report: &RunReport, name: &str) -> Vec<Class> {
    if is_emulated(report, name) {
        vec![Class::Emulated]
    } else {
        Vec::new()
    }
}

/// A heading cell naming a configuration: its label and its class.
pub fn configuration_cell(report: &RunReport, name: &str) -> Cell {
    Cell::with(
        configuration(report, name),
        configuration_class(report, name),
    )
}

/// `configuration · point · host` (a monitor's or a point's row), the
/// configuration marked.
pub fn configuration_row(report: &RunReport, name: &str, rest: &[&str]) -> Cell {
    let mut parts = vec![configuration(report, name)];
    parts.extend(rest.iter().map(|s| s.to_string()));
    let mut c = Cell::with(parts.join(" · "), configuration_class(report, name));
    c.class.push(Class::Left);
    c
}

/// One footnote per emulated configuration: `vm: guests g1, g2 emulated
/// (TCG), not a virtualization measurement: <reason>`.
pub fn emulated_footnotes(report: &RunReport) -> Vec<String> {
    report
        .emulated
        .iter()
        .map(|e| {
            let names: Vec<&str> = e.guests.iter().map(|g| g.host.as_str()).collect();
            let mut reasons: Vec<&str> = e.guests.iter().map(|g| g.reason.as_str()).collect();
            reasons.dedup();
            let what = EMULATED.replacen("emulated", "emulated (TCG)", 1);
            format!(
                "{} {EMULATED_MARK}: guest{} {} {what}: {}",
                e.configuration,
                if names.len() == 1 { "" } else { "s" },
                names.join(", "),
                reasons.join("; ")
            )
        })
        .collect()
}

/// A sentence under a curve (where a line peaks, how two peaks compare):
/// each emulated configuration it names marked where it names it, as
/// every heading marks it, and named again after the sentence with what
/// the mark means: a reader must not take a difference of an emulated
/// guest's figures for the cost of virtualization.
pub fn finding(report: &RunReport, v: &CurveView, f: &str) -> String {
    let mut out = f.to_string();
    let mut named: Vec<&str> = Vec::new();
    for n in v.lines.iter().map(|l| l.configuration.as_str()) {
        if n.is_empty() || !is_emulated(report, n) || named.contains(&n) {
            continue;
        }
        let marked = mark_word(&out, n);
        if marked != out {
            named.push(n);
            out = marked;
        }
    }
    if named.is_empty() {
        return out;
    }
    format!("{out} ({} {EMULATED_MARK}: {EMULATED})", named.join(", "))
}

/// `text` with `name (emulated)` wherever `name` stands as a word (between
/// spaces, punctuation or the ends) and is not marked yet.
fn mark_word(text: &str, name: &str) -> String {
    let apart = |c: Option<char>| c.is_none_or(|c| c.is_whitespace() || ",.;:()".contains(c));
    let mut out = String::with_capacity(text.len() + EMULATED_MARK.len() + 1);
    let mut last = 0;
    for (at, _) in text.match_indices(name) {
        let end = at + name.len();
        if at < last
            || !apart(text[..at].chars().next_back())
            || !apart(text[end..].chars().next())
            || text[end..].starts_with(&format!(" {EMULATED_MARK}"))
        {
            continue;
        }
        out.push_str(&text[last..end]);
        out.push(' ');
        out.push_str(EMULATED_MARK);
        last = end;
    }
    out.push_str(&text[last..]);
    out
}

/// A time-series line as a chart's key names it: its point, its side
/// unless the client's, and the repetition drawn.
pub fn series_line(l: &crate::model::SeriesLine) -> String {
    if l.side == "client" {
        repetition(&l.point, l.repetition)
    } else {
        repetition(&format!("{} {}", l.point, l.side), l.repetition)
    }
}

/// `label (rep N)`: a line drawn from one repetition (`repetition`
/// counted from 0).
pub fn repetition(label: &str, repetition: u32) -> String {
    format!("{label} (rep {})", repetition + 1)
}

/// The class of a verdict, by which every writer colours it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerdictClass {
    /// Better beyond the noise band.
    Better,
    /// Worse beyond the noise band.
    Worse,
    /// No difference beyond the noise band.
    Noise,
    /// Not decided.
    Inconclusive,
    /// Within ±margin, under the until-decided design's sequential rule.
    Equivalent,
    /// The until-decided design's budget ran out first.
    Undecided,
    /// Too few repetitions to tell, or no comparison.
    Unknown,
}

impl VerdictClass {
    /// The CSS class (empty for [`VerdictClass::Unknown`]).
    pub fn css(self) -> &'static str {
        match self {
            VerdictClass::Better => "better",
            VerdictClass::Worse => "worse",
            VerdictClass::Noise => "noise",
            VerdictClass::Inconclusive => "inconclusive",
            VerdictClass::Equivalent => "equivalent",
            VerdictClass::Undecided => "undecided",
            VerdictClass::Unknown => "",
        }
    }

    /// The word the verdict counts use ("better in 3").
    pub fn word(self) -> &'static str {
        match self {
            VerdictClass::Better => "better",
            VerdictClass::Worse => "worse",
            VerdictClass::Noise => "no difference",
            VerdictClass::Inconclusive => "inconclusive",
            VerdictClass::Equivalent => "equivalent",
            VerdictClass::Undecided => "undecided",
            VerdictClass::Unknown => "too few repetitions to tell",
        }
    }
}

/// An advantage's verdict: its class. The one place that maps a table
/// cell's verdict (the sequential rule's, [`Advantage::decided`]) to what
/// a reader sees.
pub fn verdict_class(a: Option<&Advantage>) -> VerdictClass {
    match a.and_then(|a| a.decided) {
        Some(d) => decided_class(d),
        None => VerdictClass::Unknown,
    }
}

/// The verdicts of configuration `c` of table `t` (not the A/A
/// control's): those of its workload, metric and configuration at a
/// point whose values include the table's fixed ones.
pub fn decisions_of<'a>(report: &'a RunReport, t: &Table, c: usize) -> Vec<&'a Decision> {
    report
        .decisions
        .iter()
        .filter(|d| {
            !d.control
                && d.configuration == t.columns[c]
                && d.workload == t.workload
                && d.metric == t.metric
                && t.fixed
                    .split(' ')
                    .filter(|x| !x.is_empty())
                    .all(|x| d.point.split(' ').any(|y| y == x))
        })
        .collect()
}

/// A sequential verdict's class: the one place that maps the
/// until-decided design's verdict to what a reader sees.
pub fn decided_class(d: Decided) -> VerdictClass {
    match d {
        Decided::Better => VerdictClass::Better,
        Decided::Worse => VerdictClass::Worse,
        Decided::Equivalent => VerdictClass::Equivalent,
        Decided::Undecided => VerdictClass::Undecided,
    }
}

/// A sequential verdict as a cell: its word and class, its interval as
/// detail (HTML) and suffix (Markdown).
pub fn decision_cell(d: &Decision) -> Cell {
    let class = decided_class(d.verdict);
    let ci = d.ci_lo_pct.zip(d.ci_hi_pct);
    Cell {
        text: class.word().to_string(),
        detail: Some(
            ci.map(|(lo, hi)| format!("[{lo:+.2}%, {hi:+.2}%]"))
                .unwrap_or_default(),
        ),
        inline: ci
            .map(|(lo, hi)| format!(" [{lo:+.2}, {hi:+.2}]"))
            .unwrap_or_default(),
        class: vec![Class::Verdict(class)],
    }
}

/// The smallest difference an undecided comparison's data would detect
/// at 80 % power (`±3.10%`); `-` for a decided one.
pub fn detectable(d: &Decision) -> String {
    match d.mde_pct {
        Some(m) if !d.verdict.is_decided() => format!("±{m:.2}%"),
        _ => "-".into(),
    }
}

/// The header's line on the until-decided design: how many comparisons
/// were decided, in how many rounds and how long, why it stopped, and
/// what the study's fixed design would have cost.
pub fn design_line(s: &DesignSummary) -> String {
    format!(
        "Until decided: {} of {} decided in {} ({}, {}; {}); fixed design: {}, about {}.",
        s.decided,
        counted(s.comparisons, "comparison"),
        counted(s.rounds, "round"),
        counted(s.repetitions, "repetition"),
        seconds(s.elapsed_s),
        s.stop.text(),
        counted(s.fixed_repetitions, "repetition"),
        seconds(s.fixed_s)
    )
}

/// A run's time: `4.2 s`, `124 s` (a tenth of a second says nothing of a
/// run that took minutes, and costs the header a line at 80 columns).
fn seconds(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.0} s")
    }
}

/// `1 round`, `20 rounds`.
fn counted(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The warning every format prints when the A/A control was called
/// better or worse under the sequential rule (the machine against
/// itself: a false positive of this run); `None` when it was not.
pub fn control_warning(decisions: &[Decision]) -> Option<String> {
    let control: Vec<&Decision> = decisions.iter().filter(|d| d.control).collect();
    let called: Vec<String> = control
        .iter()
        .filter(|d| matches!(d.verdict, Decided::Better | Decided::Worse))
        .map(|d| {
            format!(
                "{} · {} · {}: {}",
                d.workload,
                d.point,
                d.metric,
                decided_class(d.verdict).word()
            )
        })
        .collect();
    if called.is_empty() {
        return None;
    }
    Some(format!(
        "Warning: the A/A control (the first configuration against itself) was called better or worse in {} of {} comparison(s) — a false positive of this machine; treat this run's verdicts with suspicion ({}).",
        called.len(),
        control.len(),
        called.join("; ")
    ))
}

/// An advantage as a cell: its figure with its verdict's mark (≈, ~, †,
/// ‡, ?), its class, and its 95 % interval as detail.
pub fn advantage_cell(a: &Option<Advantage>, decimals: usize) -> Cell {
    let class = verdict_class(a.as_ref());
    let ci = a
        .as_ref()
        .and_then(|a| a.comparison.as_ref())
        .and_then(|c| c.ci_pct.as_ref());
    Cell {
        text: advantage_text(a, decimals),
        detail: Some(
            ci.map(|i| format!("[{:+.2}%, {:+.2}%]", i.lo, i.hi))
                .unwrap_or_default(),
        ),
        inline: ci
            .map(|i| format!(" [{:+.2}, {:+.2}]", i.lo, i.hi))
            .unwrap_or_default(),
        class: match class {
            VerdictClass::Unknown => Vec::new(),
            c => vec![Class::Verdict(c)],
        },
    }
}

/// Whether an advantage rests on one block each (drift unknown: ‡).
pub fn drift_unknown(a: &Advantage) -> bool {
    a.comparison
        .as_ref()
        .is_some_and(|c| c.drift == Drift::Unknown)
}

/// The verdict of configuration `c` of table `t` at row `row` (see
/// [`decisions_of`]).
pub fn decision_at<'a>(
    report: &'a RunReport,
    t: &Table,
    row: &str,
    c: usize,
) -> Option<&'a Decision> {
    let at = format!("{}={row}", t.row_param);
    let ds = decisions_of(report, t, c);
    // A table of one row may come from a workload without a sweep (its
    // point is `-`).
    if t.rows.len() == 1 && ds.len() == 1 {
        return ds.into_iter().next();
    }
    ds.into_iter().find(|d| d.point.split(' ').any(|y| y == at))
}

/// `+1.00%`, or `+1.00% to +3.00%`: the range of some advantages.
pub fn range(xs: &[f64]) -> String {
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if (hi - lo).abs() < 0.005 {
        format!("{lo:+.2}%")
    } else {
        format!("{lo:+.2}% to {hi:+.2}%")
    }
}

/// `±2%`, or `±2% to ±5%`: the margins some verdicts were judged
/// against (the default margin when there are none).
pub fn margin(ds: &[&Decision]) -> String {
    let mut m: Vec<f64> = ds.iter().map(|d| d.margin_pct).collect();
    m.sort_by(f64::total_cmp);
    m.dedup();
    match m.as_slice() {
        [] => format!("±{}%", benchlab_stats::DEFAULT_MARGIN_PCT),
        [x] => format!("±{x}%"),
        [lo, .., hi] => format!("±{lo}% to ±{hi}%"),
    }
}

/// The verdict counts of some comparisons, in reading order: `better in
/// 2 (+3.10% to +5.20%), equivalent within ±2% in 3, undecided in 1
/// (could detect ±4.10%)`: the difference its data would detect at
/// 80 % power. Each comparison is its verdict
/// (`None`: no verdict possible), its advantage and whether it rests on
/// one block each; `ds` are their decisions, for margins and detectable
/// effects.
pub fn verdict_counts(cmps: &[(Option<Decided>, f64, bool)], ds: &[&Decision]) -> String {
    let mut parts = Vec::new();
    for v in [
        Decided::Better,
        Decided::Worse,
        Decided::Equivalent,
        Decided::Undecided,
    ] {
        let pcts: Vec<f64> = cmps
            .iter()
            .filter(|c| c.0 == Some(v))
            .map(|c| c.1)
            .collect();
        if pcts.is_empty() {
            continue;
        }
        let n = pcts.len();
        parts.push(match v {
            Decided::Better | Decided::Worse => format!("{} in {n} ({})", v.as_str(), range(&pcts)),
            Decided::Equivalent => {
                let these: Vec<&Decision> = ds.iter().copied().filter(|d| d.verdict == v).collect();
                format!("equivalent within {} in {n}", margin(&these))
            }
            Decided::Undecided => {
                let mde: Vec<f64> = ds
                    .iter()
                    .filter(|d| d.verdict == v)
                    .filter_map(|d| d.mde_pct)
                    .collect();
                if mde.is_empty() {
                    format!("undecided in {n} ({})", range(&pcts))
                } else {
                    format!(
                        "undecided in {n} ({}; could detect {})",
                        range(&pcts),
                        range(&mde).replace('+', "±")
                    )
                }
            }
        });
    }
    let drift = cmps.iter().filter(|c| c.0.is_none() && c.2).count();
    if drift > 0 {
        parts.push(format!(
            "‡ {drift} rest on one block each, drift unknown: no verdict"
        ));
    }
    let none = cmps.iter().filter(|c| c.0.is_none() && !c.2).count();
    if none > 0 {
        parts.push(format!("too few repetitions to tell in {none}"));
    }
    parts.join(", ")
}

/// `; n = 3 to 12 per side`: the repetitions some verdicts rest on.
pub fn repetitions(ds: &[&Decision]) -> String {
    let lo = ds.iter().map(|d| d.repetitions).min();
    let hi = ds.iter().map(|d| d.repetitions).max();
    match (lo, hi) {
        (Some(a), Some(b)) if a == b => format!("; n = {a} per side"),
        (Some(a), Some(b)) => format!("; n = {a} to {b} per side"),
        _ => String::new(),
    }
}

/// A figure with thousands grouped (the points table).
pub fn figure(x: f64) -> String {
    group_thousands(x, 3)
}
