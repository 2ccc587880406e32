//! Formatting of the model's figures, shared by the views and every
//! renderer: numbers, cells, advantages, selections, aligned and
//! Markdown tables.

//! Renderers: terminal, Markdown, CSV and JSON, all from a [`RunReport`].

use crate::model::{Advantage, Cell, Table, NOISE_PCT};
use benchlab_core::study::Selection;
use benchlab_stats::{Drift, Verdict};
use std::fmt::Write;

/// `1234567.891` with 2 decimals → `1,234,567.89` (the seeds' style).
pub fn group_thousands(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let s = format!("{:.*}", decimals, x.abs());
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i.to_string(), Some(f.to_string())),
        None => (s.clone(), None),
    };
    let mut out = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(&f);
    }
    if x < 0.0 && out.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.insert(0, '-');
    }
    out
}
pub(crate) fn selection_text(sel: Selection) -> &'static str {
    match sel {
        Selection::Median => "median of the repetitions",
        Selection::MedianRun => "the median run",
        Selection::MedianStddevRun => "the run with the median standard deviation",
        Selection::Mean => "mean of the repetitions",
    }
}
pub(crate) fn cell_text(c: &Option<Cell>, decimals: usize, with_ci: bool) -> String {
    match c {
        None => "-".into(),
        Some(c) => {
            let mut s = group_thousands(c.value, decimals);
            if with_ci {
                if let Some(ci) = &c.ci {
                    if c.value != 0.0 {
                        let h = (ci.hi - c.value).abs().max((c.value - ci.lo).abs())
                            / c.value.abs()
                            * 100.0;
                        let _ = write!(s, " ±{h:.1}%");
                    }
                }
            }
            if c.failed > 0 {
                let _ = write!(s, " ({} failed)", c.failed);
            }
            s
        }
    }
}
pub(crate) fn advantage_text(a: &Option<Advantage>, decimals: usize) -> String {
    match a {
        None => "-".into(),
        Some(a) => {
            let mark = match a.comparison.as_ref() {
                Some(c) if c.verdict == Verdict::WithinNoise => " ≈",
                Some(c) if c.drift == Drift::Unknown => " ~‡",
                Some(c) if c.verdict == Verdict::Inconclusive => " ~",
                Some(c) if c.small_n() => " †",
                Some(_) => "",
                None => " ?",
            };
            let mut s = format!("{}%{mark}", group_thousands(a.pct, decimals));
            if let Some(n) = decide_text(a) {
                let _ = write!(s, " {n}");
            }
            s
        }
    }
}
/// For an inconclusive advantage, how many repetitions per side would
/// likely decide it: `n≈12`, or `n>1000` beyond the estimate's range
/// (`n?` when the rank test vetoed the interval, which no count models).
pub(crate) fn decide_text(a: &Advantage) -> Option<String> {
    let c = a.comparison.as_ref()?;
    // With one block each, more repetitions cannot decide: more blocks can.
    if c.verdict != Verdict::Inconclusive || c.drift == Drift::Unknown {
        return None;
    }
    Some(match c.repetitions_to_decide {
        Some(n) => format!("n≈{n}"),
        None if c
            .ci_pct
            .as_ref()
            .is_some_and(|ci| ci.lo > NOISE_PCT || ci.hi < -NOISE_PCT) =>
        {
            "n?".into()
        }
        None => format!("n>{}", benchlab_stats::MAX_REPETITIONS_ESTIMATE),
    })
}
pub(crate) fn title_of(t: &Table) -> String {
    let mut s = t.workload.clone();
    if !t.title.is_empty() {
        let _ = write!(s, " · {}", t.title);
    }
    if !t.fixed.is_empty() {
        let _ = write!(s, " · {}", t.fixed);
    }
    s
}
/// Writes rows (the first is the header) as a Markdown table, every
/// column right-aligned.
pub(crate) fn write_md_table(out: &mut String, rows: &[Vec<String>]) {
    for (i, r) in rows.iter().enumerate() {
        let _ = writeln!(out, "| {} |", r.join(" | "));
        if i == 0 {
            let _ = writeln!(out, "|{}", "---:|".repeat(r.len()));
        }
    }
}
/// Writes rows as right-aligned text columns two spaces apart, each line
/// indented by `indent`; with `rule`, a line of dashes under the first row.
pub(crate) fn write_aligned(out: &mut String, rows: &[Vec<String>], indent: &str, rule: bool) {
    let Some(first) = rows.first() else { return };
    let widths: Vec<usize> = (0..first.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for (n, row) in rows.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}", w = *w))
            .collect();
        let _ = writeln!(out, "{indent}{}", line.join("  ").trim_end());
        if rule && n == 0 {
            let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            let _ = writeln!(out, "{indent}{}", "-".repeat(total));
        }
    }
}

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands() {
        assert_eq!(group_thousands(8607.414, 2), "8,607.41");
        assert_eq!(group_thousands(1749.8234, 2), "1,749.82");
        assert_eq!(group_thousands(32.0, 0), "32");
        assert_eq!(group_thousands(-1234.5, 1), "-1,234.5");
        assert_eq!(group_thousands(-0.001, 2), "0.00");
        assert_eq!(group_thousands(1_000_000.0, 0), "1,000,000");
    }
}
