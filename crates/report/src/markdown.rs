//! The Markdown writer: a [`Document`] as Markdown (GitHub's tables).
//! Every section but the drawn ones; charts are the HTML's.

use std::fmt::Write;

use crate::document::{Block, Class, Document, Grid, Media};

/// Writes `doc` as Markdown.
pub fn write(doc: &Document) -> String {
    let mut out = String::new();
    for s in doc.sections.iter().filter(|s| s.media == Media::All) {
        if let Some(h) = &s.heading {
            let _ = write!(out, "{} {}", "#".repeat(h.level.into()), h.text);
            if !h.aside.is_empty() {
                let _ = write!(out, " {}", h.aside);
            }
            out.push_str("\n\n");
        }
        for b in &s.blocks {
            match b {
                Block::Paragraph(t) => {
                    let _ = writeln!(out, "{}\n", t.line());
                }
                Block::List { items, .. } => {
                    for t in items {
                        let _ = writeln!(out, "- {}", t.line());
                    }
                    out.push('\n');
                }
                Block::Table(g) if g.class.contains(&Class::Collapsed) => {}
                Block::Table(g) => table(g, &mut out),
                Block::Chart(_) => {}
                Block::Code {
                    caption,
                    lang,
                    text,
                } => {
                    let _ = writeln!(out, "{caption}:\n\n```{lang}\n{text}\n```\n");
                }
            }
        }
    }
    out
}

/// A cell's text for a table: its inline detail after it, `|` escaped.
fn cell(c: &crate::document::Cell) -> String {
    format!("{}{}", c.text, c.inline).replace('|', "\\|")
}

fn table(g: &Grid, out: &mut String) {
    let _ = writeln!(
        out,
        "| {} |",
        g.head.iter().map(cell).collect::<Vec<_>>().join(" | ")
    );
    out.push('|');
    for c in &g.head {
        out.push_str(if c.class.contains(&Class::Left) {
            "---|"
        } else {
            "---:|"
        });
    }
    out.push('\n');
    for r in &g.rows {
        let mut cells: Vec<String> = r.cells.iter().map(cell).collect();
        // Sub-headings, and the rows where the hosts differ, in bold.
        if r.class.contains(&Class::SubHeading) || r.class.contains(&Class::Differs) {
            cells[0] = format!("**{}**", cells[0]);
        }
        cells.resize(g.head.len(), String::new());
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push('\n');
    for t in &g.notes {
        let _ = writeln!(out, "{}\n", t.line());
    }
}
