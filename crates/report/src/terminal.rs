//! The terminal writer: a [`Document`] as text that fits a width. The
//! summary (the run, the verdict counts and headline findings, the result
//! tables, the legend) by default; `verbose` adds the detail (monitors,
//! time series, pairs, notes). Text wraps at words; a table wider than
//! the width is split into column groups, each repeating its first
//! column; a cell wider than the width is cut with "…". Notes that the
//! tables after a table share are written once, under the first, saying
//! how many tables below they hold for: read top to bottom, the seventh
//! "n = 3 repetitions per figure" says nothing new and cost the demo's
//! summary 12 of its lines at 80 columns.

use std::fmt::Write;

use crate::document::{Block, Class, Document, Grid, Media, Part, Section};

/// How the terminal writer lays a document out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The widest line, in characters.
    pub width: usize,
    /// With the detail sections.
    pub verbose: bool,
}

/// The width on a pipe, and the narrowest and widest the terminal writer
/// lays out for (a terminal narrower or wider is treated as these).
pub const PIPE_WIDTH: usize = 100;
/// See [`PIPE_WIDTH`].
pub const MIN_WIDTH: usize = 80;
/// See [`PIPE_WIDTH`].
pub const MAX_WIDTH: usize = 120;

impl Default for Layout {
    fn default() -> Layout {
        Layout {
            width: PIPE_WIDTH,
            verbose: false,
        }
    }
}

/// Writes `doc` for a terminal.
pub fn write(doc: &Document, layout: Layout) -> String {
    let upto = if layout.verbose {
        Part::Detail
    } else {
        Part::Summary
    };
    let width = layout.width.max(20);
    let mut out = String::new();
    let shown: Vec<(usize, &Section)> = doc
        .upto(upto)
        .enumerate()
        .filter(|(_, s)| {
            // A workload's heading alone: the summary's table titles name
            // their workload already.
            let bare = s.blocks.is_empty() && s.heading.as_ref().is_some_and(|h| h.level == 3);
            s.media != Media::Drawn && (layout.verbose || !bare)
        })
        .collect();
    let mut notes = Notes {
        tables: shown
            .iter()
            .flat_map(|(_, s)| s.blocks.iter())
            .filter_map(|b| match b {
                Block::Table(g) if !g.class.contains(&Class::Collapsed) => {
                    Some(g.notes.iter().map(|t| t.line()).collect())
                }
                _ => None,
            })
            .collect(),
        next: 0,
    };
    for (n, s) in shown {
        section(s, n == 0, width, &mut notes, &mut out);
    }
    out
}

/// The notes of every table written, in order, and the next one's index.
struct Notes {
    tables: Vec<Vec<String>>,
    next: usize,
}

impl Notes {
    /// The next table's notes as written: none when the table before had
    /// the same; otherwise its own, the last saying for how many of the
    /// tables below they hold too.
    fn take(&mut self) -> Vec<String> {
        let i = self.next;
        self.next += 1;
        let these = &self.tables[i];
        if i > 0 && self.tables[i - 1] == *these {
            return Vec::new();
        }
        let same = self.tables[i + 1..]
            .iter()
            .take_while(|t| *t == these)
            .count();
        let mut out = these.clone();
        if let Some(last) = out.last_mut().filter(|_| same > 0) {
            last.push_str(&if same == 1 {
                " Likewise below.".to_string()
            } else {
                format!(" Likewise for the {same} tables below.")
            });
        }
        out
    }
}

/// Writes section `s`, its tables' notes taken from `notes`.
fn section(s: &Section, first: bool, width: usize, notes: &mut Notes, out: &mut String) {
    let level = s.heading.as_ref().map_or(0, |h| h.level);
    if let Some(h) = s.heading.as_ref().filter(|h| h.level > 1) {
        out.push('\n');
        let text = if h.aside.is_empty() {
            h.text.clone()
        } else {
            format!("{} {}", h.text, h.aside)
        };
        wrap(&text, "", "  ", width, out);
    }
    for (i, b) in s.blocks.iter().enumerate() {
        match b {
            // The run's line first, at the margin; the rest of the
            // header under it.
            Block::Paragraph(t) if first && level == 1 && i == 0 => {
                wrap(&t.line(), "", "  ", width, out)
            }
            Block::Paragraph(t) if t.class.contains(&Class::Legend) && level == 2 => {
                wrap(&t.line(), "", "  ", width, out)
            }
            Block::Paragraph(t) => wrap(&t.line(), "  ", "    ", width, out),
            Block::List { items, .. } => {
                for t in items {
                    wrap(&t.line(), "  - ", "    ", width, out);
                }
            }
            Block::Table(g) if g.class.contains(&Class::Collapsed) => {}
            Block::Table(g) => table(g, width, &notes.take(), out),
            Block::Chart(_) | Block::Code { .. } => {}
        }
    }
}

/// Writes `text` wrapped at `width`: the first line after `first`, the
/// others after `rest`. A word longer than a line is cut. A mark stays on
/// the line of the name it marks (`tcg (emulated)` is never split), a
/// unit the line of its number (`124 s`), and `n = 4` stays whole.
pub fn wrap(text: &str, first: &str, rest: &str, width: usize, out: &mut String) {
    fill(text, first, rest, width, true, out)
}

/// [`wrap`], except that a word longer than a line stands whole on a line
/// of its own: for text whose words must survive, such as a store's path
/// in a message.
pub fn wrap_whole(text: &str, first: &str, rest: &str, width: usize, out: &mut String) {
    fill(text, first, rest, width, false, out)
}

fn fill(text: &str, first: &str, rest: &str, width: usize, cut_long: bool, out: &mut String) {
    let mut words: Vec<String> = Vec::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        match words.last_mut() {
            Some(before) if binds(before, word) => {
                before.push(' ');
                before.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
    }
    let mut line = String::from(first);
    let mut len = first.chars().count();
    let mut empty = true;
    for word in &words {
        let wl = word.chars().count();
        if !empty && len + 1 + wl > width {
            let _ = writeln!(out, "{}", line.trim_end());
            line = rest.to_string();
            len = rest.chars().count();
            empty = true;
        }
        if !empty {
            line.push(' ');
            len += 1;
        }
        let room = width.saturating_sub(len).max(1);
        if cut_long && wl > room {
            line.push_str(&cut(word, room));
            len += room;
        } else {
            line.push_str(word);
            len += wl;
        }
        empty = false;
    }
    let _ = writeln!(out, "{}", line.trim_end());
}

/// Whether `word` stays on the line of the words `before` it: a mark on
/// its name (`tcg (emulated)`), a unit of time or size on its number
/// (`124 s;`), and the words either side of a lone `=` (`n = 4`).
fn binds(before: &str, word: &str) -> bool {
    let unit = word.trim_end_matches(|c: char| c.is_ascii_punctuation());
    word.starts_with(crate::document::marks::EMULATED_MARK)
        || word == "="
        || before.ends_with(" =")
        || (before.ends_with(|c: char| c.is_ascii_digit())
            && matches!(
                unit,
                "s" | "ms" | "µs" | "ns" | "min" | "h" | "B" | "KiB" | "MiB" | "GiB"
            ))
}

/// `s` in at most `n` characters, "…" for what is cut.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut c: String = s.chars().take(n.saturating_sub(1)).collect();
    c.push('…');
    c
}

/// A table aligned in columns two spaces apart, indented two; split into
/// groups of columns (each repeating the first) where it is wider than
/// `width`; `notes` under it.
fn table(g: &Grid, width: usize, notes: &[String], out: &mut String) {
    const INDENT: usize = 2;
    let rows: Vec<Vec<String>> = std::iter::once(&g.head)
        .chain(g.rows.iter().map(|r| &r.cells))
        .map(|r| r.iter().map(|c| c.text.clone()).collect())
        .collect();
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    if cols == 0 {
        return;
    }
    let room = width - INDENT;
    let mut widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    // The first column, repeated in every group, takes at most a third.
    widths[0] = widths[0].min(room / 3);
    let most = room - widths[0] - 2;
    for w in widths.iter_mut().skip(1) {
        *w = (*w).min(most);
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut used = widths[0];
    for (i, w) in widths.iter().enumerate().skip(1) {
        if !current.is_empty() && used + 2 + w > room {
            groups.push(std::mem::take(&mut current));
            used = widths[0];
        }
        current.push(i);
        used += 2 + w;
    }
    groups.push(current);
    for (k, group) in groups.iter().enumerate() {
        if k > 0 {
            out.push('\n');
        }
        let cols: Vec<usize> = std::iter::once(0).chain(group.iter().copied()).collect();
        for (n, row) in rows.iter().enumerate() {
            let line: Vec<String> = cols
                .iter()
                .map(|&i| {
                    let w = widths[i];
                    let c = cut(row.get(i).map_or("", String::as_str), w);
                    let left = g
                        .head
                        .get(i)
                        .is_some_and(|h| h.class.contains(&Class::Left));
                    if left || (i == 0 && g.label_left) {
                        format!("{c:<w$}")
                    } else {
                        format!("{c:>w$}")
                    }
                })
                .collect();
            let _ = writeln!(out, "{}{}", " ".repeat(INDENT), line.join("  ").trim_end());
            if g.rule && n == 0 {
                let total: usize =
                    cols.iter().map(|&i| widths[i]).sum::<usize>() + 2 * (cols.len() - 1);
                let _ = writeln!(out, "{}{}", " ".repeat(INDENT), "-".repeat(total));
            }
        }
    }
    for t in notes {
        wrap(t, "  ", "    ", width, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_wrap_and_long_words_are_cut() {
        let mut out = String::new();
        wrap("aaa bbb ccc ddd", "  ", "    ", 10, &mut out);
        assert_eq!(out, "  aaa bbb\n    ccc\n    ddd\n");
        let mut out = String::new();
        wrap("abcdefghijklmnop", "", "", 8, &mut out);
        assert_eq!(out, "abcdefg…\n");
    }

    #[test]
    fn a_number_keeps_its_unit_and_n_its_count() {
        // Width 12 splits after "took 124" and after "of 2; n" when words
        // wrap one by one.
        let mut out = String::new();
        super::wrap("it took 124 s; of 2; n = 4 per side.", "", "", 12, &mut out);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.iter().any(|l| l.contains("124 s;")), "{out}");
        assert!(lines.iter().any(|l| l.contains("n = 4")), "{out}");
        assert!(lines.iter().all(|l| l.chars().count() <= 12), "{out}");
    }

    #[test]
    fn wrap_whole_keeps_a_long_word_and_wrap_cuts_it() {
        let path = format!("/tmp/{}/store.db", "d".repeat(40));
        let text = format!("run 1 completed (stored in {path}; `benchlab show 1` prints it again)");
        let mut whole = String::new();
        super::wrap_whole(&text, "benchlab: ", "  ", 30, &mut whole);
        let lines: Vec<&str> = whole.lines().collect();
        assert!(lines.contains(&format!("  {path};").as_str()), "{whole}");
        assert!(
            lines
                .iter()
                .all(|l| l.chars().count() <= 30 || l.contains(&path)),
            "{whole}"
        );
        assert_eq!(
            whole.split_whitespace().collect::<Vec<_>>(),
            format!("benchlab: {text}")
                .split_whitespace()
                .collect::<Vec<_>>()
        );
        let mut cut = String::new();
        super::wrap(&text, "benchlab: ", "  ", 30, &mut cut);
        assert!(cut.lines().all(|l| l.chars().count() <= 30), "{cut}");
        assert!(!cut.contains(&path) && cut.contains('…'), "{cut}");
    }

    #[test]
    fn notes_the_tables_below_share_are_written_once() {
        let n = |s: &str| vec![s.to_string()];
        let mut notes = Notes {
            tables: vec![n("a"), n("a"), n("a"), n("b"), Vec::new(), n("b")],
            next: 0,
        };
        let written: Vec<Vec<String>> = (0..6).map(|_| notes.take()).collect();
        assert_eq!(
            written,
            vec![
                n("a Likewise for the 2 tables below."),
                Vec::new(),
                Vec::new(),
                n("b"),
                Vec::new(),
                n("b"),
            ]
        );
    }

    #[test]
    fn a_wide_table_splits_into_groups_that_repeat_the_first_column() {
        let g = crate::document::build::grid(
            vec![
                vec!["p".into(), "a".repeat(30), "b".repeat(30), "c".repeat(30)],
                vec!["1".into(), "x".into(), "y".into(), "z".into()],
            ],
            true,
            true,
        );
        let mut out = String::new();
        table(&g, 80, &[], &mut out);
        assert!(out.lines().all(|l| l.chars().count() <= 80), "{out}");
        assert_eq!(
            out.lines().filter(|l| l.starts_with("  1")).count(),
            2,
            "{out}"
        );
    }
}
