//! Flame graphs as self-contained SVG documents without scripts: a
//! profile's, and a differential one (B's stacks, coloured by how much
//! each grew, red, or shrank, blue, against A). Drawn by inferno with
//! its JavaScript off; the script element and event handler it still
//! writes are removed, so the document needs nothing a strict content
//! security policy forbids when shown as an image.

use inferno::flamegraph::{self, color::Palette, Options};

use crate::StacksError;

/// The drawing's width in pixels (its height follows the deepest stack).
pub const WIDTH: usize = 1200;

fn options<'a>(title: &str, count_name: &str, factor: f64) -> Options<'a> {
    let mut o = Options::default();
    o.title = title.to_string();
    o.count_name = count_name.to_string();
    o.factor = factor;
    o.no_javascript = true;
    o.image_width = Some(WIDTH);
    // Colours from each function's name: the same function has the same
    // colour in every graph of a report.
    o.hash = true;
    o.deterministic = true;
    o.colors = Palette::Basic(flamegraph::color::BasicPalette::Hot);
    o
}

fn draw(mut o: Options<'_>, folded: &str) -> Result<String, StacksError> {
    let mut out = Vec::new();
    flamegraph::from_lines(&mut o, folded.lines(), &mut out)
        .map_err(|e| StacksError(format!("drawing the flame graph: {e}")))?;
    let svg = String::from_utf8(out)
        .map_err(|e| StacksError(format!("the flame graph is not UTF-8: {e}")))?;
    Ok(without_script(&svg))
}

/// Drops the `<script>` element and the `onload` handler.
fn without_script(svg: &str) -> String {
    let mut s = svg.replace(" onload=\"init(evt)\"", "");
    while let Some(start) = s.find("<script") {
        let end = s[start..]
            .find("</script>")
            .map(|e| start + e + "</script>".len())
            .or_else(|| s[start..].find("/>").map(|e| start + e + 2))
            .unwrap_or(s.len());
        s.replace_range(start..end, "");
    }
    s
}

/// A profile's flame graph: `folded` stacks, counted in samples.
pub fn flame_graph(folded: &str, title: &str) -> Result<String, StacksError> {
    draw(options(title, "samples", 1.0), folded)
}

/// A differential flame graph of [`crate::analysis::differential`]'s
/// lines (`stack a b` in units of `1 / scale` of `unit`).
pub fn differential_graph(
    lines: &str,
    scale: f64,
    unit: &str,
    title: &str,
) -> Result<String, StacksError> {
    draw(options(title, unit, 1.0 / scale), lines)
}

/// A drawing of [`flame_graph`] or [`differential_graph`] made fit to
/// sit inside an HTML page under a strict content security policy: the
/// XML prologue, comments and inferno's `<style>` go (the page's style
/// sheet styles `svg.flame` instead: an inline style block would need
/// its own hash), so do the search and zoom texts its script would have
/// driven; its ids are prefixed with `id` (a page holds many graphs),
/// and the root element gets `class="flame"`, `id` and `label` as its
/// accessible name. Each frame keeps its `<title>`: the browser shows
/// the function and its samples on hover, without a script.
pub fn inline(svg: &str, id: &str, label: &str) -> String {
    let mut s = svg[svg.find("<svg").unwrap_or(0)..].to_string();
    for (open, close) in [
        ("<!--", "-->"),
        ("<style", "</style>"),
        ("<script", "</script>"),
    ] {
        while let Some(a) = s.find(open) {
            let b = s[a..].find(close).map_or(s.len(), |e| a + e + close.len());
            s.replace_range(a..b, "");
        }
    }
    for gone in ["details", "unzoom", "search", "matched"] {
        if let Some(at) = s.find(&format!("id=\"{gone}\"")) {
            if let Some(a) = s[..at].rfind("<text") {
                let b = s[a..].find("</text>").map_or(s.len(), |e| a + e + 7);
                s.replace_range(a..b, "");
            }
        }
    }
    for attr in ["xmlns", "xmlns:xlink", "xmlns:fg"] {
        let key = format!(" {attr}=\"");
        if let Some(a) = s.find(&key) {
            let b = s[a + key.len()..]
                .find('"')
                .map_or(s.len(), |e| a + key.len() + e + 1);
            s.replace_range(a..b, "");
        }
    }
    let s = s
        .replace(" onload=\"init(evt)\"", "")
        .replace("id=\"background\"", &format!("id=\"{id}-bg\""))
        .replace("url(#background)", &format!("url(#{id}-bg)"))
        .replace("id=\"title\"", "class=\"title\"")
        .replace("id=\"subtitle\"", "class=\"subtitle\"")
        .replace("id=\"frames\"", "class=\"frames\"");
    format!(
        "<svg class=\"flame\" id=\"{id}\" role=\"img\" aria-label=\"{}\"{}",
        escape(label),
        &s["<svg".len().min(s.len())..]
    )
}

/// Text for an XML attribute.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphs_have_frames_and_no_script() {
        let svg = flame_graph("a;b;planted 3\na;c 1\n", "client").unwrap();
        assert!(svg.contains("planted"));
        assert!(svg.contains("<svg"));
        assert!(!svg.contains("<script"));
        assert!(!svg.contains("onload"));
        assert!(!svg.contains("onclick") && !svg.contains("onmouseover"));
        let d = differential_graph("a;b 100 300\na;c 100 0\n", 1.0, "CPU µs/op", "B − A").unwrap();
        assert!(d.contains("a;b") || d.contains(">b<") || d.contains("b ("));
        assert!(!d.contains("<script"));
    }

    #[test]
    fn an_inline_graph_has_no_style_script_prologue_or_fixed_ids() {
        let svg = flame_graph("a;b;planted 3\na;c 1\n", "client").unwrap();
        let s = inline(&svg, "flame-1", "client \"x\"");
        assert!(s.starts_with("<svg class=\"flame\" id=\"flame-1\" role=\"img\" aria-label=\"client &quot;x&quot;\" "), "{s}");
        for bad in [
            "<?xml",
            "<!",
            "<style",
            "<script",
            "onload",
            "http",
            "id=\"background\"",
            "id=\"title\"",
            "id=\"frames\"",
            "Search",
            "Reset Zoom",
        ] {
            assert!(!s.contains(bad), "{bad} in {s}");
        }
        assert!(
            s.contains("url(#flame-1-bg)") && s.contains("id=\"flame-1-bg\""),
            "{s}"
        );
        assert!(
            s.contains("<title>planted (3 samples, 75.00%)</title>"),
            "{s}"
        );
        assert!(s.trim_end().ends_with("</svg>"), "{s}");
    }
}
