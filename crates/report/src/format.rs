//! Formatting of the model's figures, shared by the views and every
//! renderer: numbers, cells, advantages, selections, aligned and
//! Markdown tables.

//! Renderers: terminal, Markdown, CSV and JSON, all from a [`RunReport`].

use crate::model::{Advantage, Cell, Table};
use benchlab_core::decision::Decided;
use benchlab_core::study::Selection;
use benchlab_stats::Drift;
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
/// An advantage with its verdict's mark: none for better or worse (the
/// colour says which), ≈ equivalent within the margin, ~ undecided, ~‡
/// one block each (drift unknown: no unit pairs the two sides), ? too
/// few repetitions for any verdict.
pub(crate) fn advantage_text(a: &Option<Advantage>, decimals: usize) -> String {
    match a {
        None => "-".into(),
        Some(a) => {
            let mark = match a.decided {
                Some(Decided::Better | Decided::Worse) => "",
                Some(Decided::Equivalent) => " ≈",
                Some(Decided::Undecided) => " ~",
                None if a
                    .comparison
                    .as_ref()
                    .is_some_and(|c| c.drift == Drift::Unknown) =>
                {
                    " ~‡"
                }
                None => " ?",
            };
            format!("{}%{mark}", group_thousands(a.pct, decimals))
        }
    }
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
