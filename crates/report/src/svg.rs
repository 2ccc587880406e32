//! The charts of the HTML report, hand-written SVG (STYLE.md): one per
//! result table (each configuration's figure against the row parameter,
//! its confidence interval as an error bar; bars for a single row), the
//! curves with their peaks, the matrices' heat maps, the time series and
//! the latency distributions. Labels come from the document, marks
//! applied; figures from the model.

use std::fmt::Write;

use crate::format::{esc, group_thousands, title_of};
use crate::model::{CurveView, Matrix, MatrixView, RunReport, Table};
use crate::views;
use benchlab_core::Better;

/// Series colours (Okabe–Ito, distinguishable with the common forms of
/// colour blindness: M. Okabe and K. Ito, "Color Universal Design", 2008).
pub(crate) const COLOURS: [&str; 8] = [
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000",
];

/// Nice axis bounds and ticks for [lo, hi] (Heckbert's "nice numbers",
/// Graphics Gems, 1990).
pub(crate) fn ticks(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let (lo, hi) = if hi - lo < 1e-12 * hi.abs().max(1.0) {
        (lo - lo.abs().max(1.0) * 0.1, hi + hi.abs().max(1.0) * 0.1)
    } else {
        (lo, hi)
    };
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let step = mag
        * if f < 1.5 {
            1.0
        } else if f < 3.0 {
            2.0
        } else if f < 7.0 {
            5.0
        } else {
            10.0
        };
    let start = (lo / step).floor() * step;
    let end = (hi / step).ceil() * step;
    let mut v = Vec::new();
    let mut x = start;
    while x <= end + step * 0.5 {
        v.push(x);
        x += step;
    }
    (start, end, v)
}

fn fmt_tick(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 {
        format!("{:.1}M", x / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", x / 1e3)
    } else if a >= 100.0 || x == x.trunc() {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// One chart per table: each configuration's figure against the row
/// parameter (rows evenly spaced, in table order), the confidence interval
/// as an error bar; a bar chart when there is one row.
pub fn table(t: &Table, index: usize, names: &[String], o: &mut String) {
    let (w, h) = (720.0, 300.0);
    let (left, right, top, bottom) = (70.0, 20.0, 20.0, 45.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for row in &t.rows {
        for c in row.cells.iter().flatten() {
            lo = lo.min(c.value);
            hi = hi.max(c.value);
            if let Some(ci) = &c.ci {
                lo = lo.min(ci.lo);
                hi = hi.max(ci.hi);
            }
        }
    }
    if !lo.is_finite() || t.rows.is_empty() {
        return;
    }
    let bars = t.rows.len() == 1;
    if bars {
        lo = lo.min(0.0);
    }
    let (y0, y1, yt) = ticks(lo, hi);
    let y = |v: f64| top + ph - (v - y0) / (y1 - y0) * ph;
    let nrows = t.rows.len();
    let x = |i: usize| left + pw * (i as f64 + 0.5) / nrows as f64;
    let _ = writeln!(
        o,
        "<svg class=\"chart\" id=\"chart-{index}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(&title_of(t))
    );
    // Axes and grid.
    let labels: Vec<&str> = t.rows.iter().map(|r| r.label.as_str()).collect();
    axes(o, (left, top, pw, ph), &yt, &y, &labels, &x);
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        left + pw / 2.0,
        h - 6.0,
        esc(&t.row_param)
    );
    let _ = writeln!(
        o,
        "<text x=\"12\" y=\"{:.1}\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        top + ph / 2.0,
        top + ph / 2.0,
        esc(if t.title.is_empty() { &t.metric } else { &t.title })
    );
    o.push_str("<g class=\"data\">\n");
    let ncols = t.columns.len();
    for c in 0..ncols {
        let colour = COLOURS[c % COLOURS.len()];
        if bars {
            let slot = pw / nrows as f64 * 0.8 / ncols as f64;
            let Some(cell) = &t.rows[0].cells[c] else {
                continue;
            };
            let bx = x(0) - pw / nrows as f64 * 0.4 + slot * c as f64;
            let _ = writeln!(
                o,
                "<rect x=\"{bx:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{}: {}</title></rect>",
                y(cell.value),
                slot * 0.9,
                (y(y0.max(0.0)) - y(cell.value)).max(0.5),
                esc(&names[c]),
                esc(&group_thousands(cell.value, t.decimals))
            );
            if let Some(ci) = &cell.ci {
                let cx = bx + slot * 0.45;
                let _ = writeln!(
                    o,
                    "<path d=\"M{cx:.1} {:.1}V{:.1}M{:.1} {:.1}H{:.1}M{:.1} {:.1}H{:.1}\" stroke=\"#222\" fill=\"none\"/>",
                    y(ci.lo), y(ci.hi), cx - 4.0, y(ci.lo), cx + 4.0, cx - 4.0, y(ci.hi), cx + 4.0
                );
            }
        } else {
            // Each series offset slightly so that error bars do not
            // overlap; its line goes through its markers.
            let mx = |i: usize| x(i) + (c as f64 - (ncols as f64 - 1.0) / 2.0) * 4.0;
            let pts: Vec<(f64, f64)> = t
                .rows
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.cells[c].as_ref().map(|cell| (mx(i), y(cell.value))))
                .collect();
            if pts.len() > 1 {
                let d: Vec<String> = pts
                    .iter()
                    .enumerate()
                    .map(|(k, (px, py))| {
                        format!("{}{px:.1} {py:.1}", if k == 0 { "M" } else { "L" })
                    })
                    .collect();
                let _ = writeln!(
                    o,
                    "<path d=\"{}\" stroke=\"{colour}\" stroke-width=\"2\" fill=\"none\"/>",
                    d.join("")
                );
            }
            for (i, r) in t.rows.iter().enumerate() {
                let Some(cell) = &r.cells[c] else { continue };
                let px = mx(i);
                if let Some(ci) = &cell.ci {
                    let _ = writeln!(
                        o,
                        "<path d=\"M{px:.1} {:.1}V{:.1}\" stroke=\"{colour}\" fill=\"none\"/>",
                        y(ci.lo),
                        y(ci.hi)
                    );
                }
                let _ = writeln!(
                    o,
                    "<circle cx=\"{px:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{colour}\"><title>{} {}: {} (n = {})</title></circle>",
                    y(cell.value),
                    esc(&names[c]),
                    esc(&r.label),
                    esc(&group_thousands(cell.value, t.decimals)),
                    cell.values.len()
                );
            }
        }
    }
    o.push_str("</g>\n</svg>\n");
    keys(names.iter().map(String::as_str), o);
}

/// Stops of the heat maps' colour scale: viridis (S. van der Walt and
/// N. Smith, matplotlib, 2015), perceptually uniform, readable in grey and
/// with the common forms of colour blindness.
const VIRIDIS: [(u8, u8, u8); 5] = [
    (0x44, 0x01, 0x54),
    (0x3b, 0x52, 0x8b),
    (0x21, 0x91, 0x8c),
    (0x5e, 0xc9, 0x62),
    (0xfd, 0xe7, 0x25),
];

/// The colour at `t` ∈ [0, 1] of the scale, linearly between its stops.
fn viridis(t: f64) -> String {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let pos = t * (VIRIDIS.len() - 1) as f64;
    let i = (pos.floor() as usize).min(VIRIDIS.len() - 2);
    let f = pos - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * f).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// One matrix as an SVG heat map: a cell per (row, column) coloured on
/// the matrix's own scale, its figure written in it.
pub fn heat_map(v: &MatrixView, m: &Matrix, id: &str, caption: &str, o: &mut String) {
    let figures: Vec<f64> = m.cells.iter().flatten().flatten().copied().collect();
    let lo = figures.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = figures.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return;
    }
    let log = lo > 0.0 && hi / lo >= 10.0;
    let tf = |x: f64| if log { x.ln() } else { x };
    let t = |x: f64| {
        let t = if hi > lo {
            (tf(x) - tf(lo)) / (tf(hi) - tf(lo))
        } else {
            1.0
        };
        match m.better {
            Better::Higher => t,
            Better::Lower => 1.0 - t,
        }
    };
    let text = |x: f64| group_thousands(x, m.decimals);
    let widest = figures
        .iter()
        .map(|x| text(*x).len())
        .chain(v.cols.iter().map(|c| c.len()))
        .max()
        .unwrap_or(4);
    let cw = (widest as f64 * 7.5 + 14.0).max(48.0);
    let ch = 22.0;
    let left = v.rows.iter().map(|r| r.len()).max().unwrap_or(4) as f64 * 7.5 + 16.0;
    let top = 24.0;
    let legend_h = 40.0;
    let w = left + cw * v.cols.len() as f64 + 10.0;
    let h = top + ch * v.rows.len() as f64 + legend_h;
    let _ = writeln!(
        o,
        "<svg class=\"chart heat\" id=\"{}\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" role=\"img\" aria-label=\"{}\">",
        esc(id),
        esc(caption)
    );
    for (j, c) in v.cols.iter().enumerate() {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            left + cw * (j as f64 + 0.5),
            top - 8.0,
            esc(c)
        );
    }
    for (i, r) in v.rows.iter().enumerate() {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 6.0,
            top + ch * (i as f64 + 0.5) + 4.0,
            esc(r)
        );
    }
    o.push_str("<g class=\"data\">\n");
    for (i, (r, cells)) in v.rows.iter().zip(&m.cells).enumerate() {
        for (j, (c, cell)) in v.cols.iter().zip(cells).enumerate() {
            let Some(x) = cell else { continue };
            let tt = t(*x);
            let (cx, cy) = (left + cw * j as f64, top + ch * i as f64);
            let _ = writeln!(
                o,
                "<rect x=\"{cx:.1}\" y=\"{cy:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} {r}, {} {c}: {}</title></rect><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
                cw - 1.0,
                ch - 1.0,
                viridis(tt),
                esc(&v.row_param),
                esc(&v.col_param),
                esc(&text(*x)),
                cx + cw / 2.0,
                cy + ch / 2.0 + 4.0,
                if tt < 0.6 { "#fff" } else { "#000" },
                esc(&text(*x))
            );
        }
    }
    o.push_str("</g>\n");
    // The scale: a gradient from the worst figure to the best.
    let ly = top + ch * v.rows.len() as f64 + 10.0;
    let lw = (cw * v.cols.len() as f64).min(240.0);
    let (worst, best) = match m.better {
        Better::Higher => (lo, hi),
        Better::Lower => (hi, lo),
    };
    // Drawn as steps rather than a gradient: a gradient is referenced
    // through `url(#…)`, which the self-containment check rejects.
    const STEPS: usize = 24;
    for k in 0..STEPS {
        let _ = write!(
            o,
            "<rect x=\"{:.1}\" y=\"{ly:.1}\" width=\"{:.1}\" height=\"8\" fill=\"{}\"/>",
            left + lw * k as f64 / STEPS as f64,
            lw / STEPS as f64 + 0.5,
            viridis(k as f64 / (STEPS - 1) as f64)
        );
    }
    let _ = writeln!(
        o,
        "<text x=\"{left:.1}\" y=\"{:.1}\">{}</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}{}</text>",
        ly + 22.0,
        esc(&text(worst)),
        left + lw,
        ly + 22.0,
        esc(&text(best)),
        if log { " (log scale)" } else { "" }
    );
    o.push_str("</svg>\n");
}

/// The SVG of a curve: x values evenly spaced (a clients sweep doubles),
/// y from zero, one line per configuration with its confidence intervals,
/// and a ring with the figure at each line's peak.
pub fn curve(v: &CurveView, names: &[String], id: &str, label: &str, o: &mut String) {
    let (w, h) = (720.0, 300.0);
    let (left, right, top, bottom) = (70.0, 20.0, 24.0, 45.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for p in v.lines.iter().flat_map(|l| l.points.iter().flatten()) {
        lo = lo.min(p.value);
        hi = hi.max(p.value);
        if let Some(ci) = &p.ci {
            lo = lo.min(ci.lo);
            hi = hi.max(ci.hi);
        }
    }
    if !lo.is_finite() || v.x.is_empty() {
        return;
    }
    let (y0, y1, yt) = ticks(lo.min(0.0), hi);
    let y = |val: f64| top + ph - (val - y0) / (y1 - y0) * ph;
    let n = v.x.len();
    let x = |i: usize| left + pw * (i as f64 + 0.5) / n as f64;
    let _ = writeln!(
        o,
        "<svg class=\"chart curve\" id=\"{}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(id),
        esc(label)
    );
    let labels: Vec<&str> = v.x.iter().map(String::as_str).collect();
    axes(o, (left, top, pw, ph), &yt, &y, &labels, &x);
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"12\" y=\"{:.1}\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        left + pw / 2.0,
        h - 6.0,
        esc(&v.x_param),
        top + ph / 2.0,
        top + ph / 2.0,
        esc(&v.title)
    );
    o.push_str("<g class=\"data\">\n");
    for (c, line) in v.lines.iter().enumerate() {
        let colour = COLOURS[c % COLOURS.len()];
        let pts: Vec<(usize, &crate::model::CurvePoint)> = line
            .points
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.as_ref().map(|p| (i, p)))
            .collect();
        if pts.len() > 1 {
            let d: String = pts
                .iter()
                .enumerate()
                .map(|(k, (i, p))| {
                    format!(
                        "{}{:.1} {:.1}",
                        if k == 0 { "M" } else { "L" },
                        x(*i),
                        y(p.value)
                    )
                })
                .collect();
            let _ = writeln!(
                o,
                "<path d=\"{d}\" stroke=\"{colour}\" stroke-width=\"2\" fill=\"none\"/>"
            );
        }
        for (i, p) in &pts {
            if let Some(ci) = &p.ci {
                let _ = writeln!(
                    o,
                    "<path d=\"M{:.1} {:.1}V{:.1}\" stroke=\"{colour}\" fill=\"none\"/>",
                    x(*i),
                    y(ci.lo),
                    y(ci.hi)
                );
            }
            let _ = writeln!(
                o,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{colour}\"><title>{} at {}: {} (n = {})</title></circle>",
                x(*i),
                y(p.value),
                esc(&names[c]),
                esc(&views::x_words(&v.x_param, &v.x[*i])),
                esc(&group_thousands(p.value, v.decimals)),
                p.n
            );
        }
        if let Some(peak) = &line.peak {
            let (px, py) = (x(peak.index), y(peak.value));
            let _ = writeln!(
                o,
                "<circle class=\"peak\" cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"8\" stroke=\"{colour}\" stroke-width=\"2\" fill=\"none\"><title>{} peaks at {}: {}</title></circle><text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{colour}\">{}</text>",
                esc(&names[c]),
                esc(&views::x_words(&v.x_param, &peak.x)),
                esc(&group_thousands(peak.value, v.decimals)),
                (py - 12.0).max(10.0),
                esc(&group_thousands(peak.value, v.decimals))
            );
        }
    }
    o.push_str("</g>\n</svg>\n");
    keys(names.iter().map(String::as_str), o);
}

/// One series of a line chart: name and (x, y) points.
type Line = (String, Vec<(f64, f64)>);

/// A line chart: one polyline per series, x numeric (or categorical with
/// `x_labels` at x = 0, 1, …), y linear or log10.
fn line_chart(
    id: &str,
    label: &str,
    lines: &[Line],
    x_labels: Option<&[&str]>,
    log_y: bool,
    (x_title, y_title): (&str, &str),
    o: &mut String,
) {
    let (w, h) = (720.0, 280.0);
    let (left, right, top, bottom) = (70.0, 20.0, 20.0, 45.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let tf = |v: f64| if log_y { v.max(1e-9).log10() } else { v };
    let pts = lines.iter().flat_map(|l| l.1.iter());
    let (mut x0, mut x1, mut ylo, mut yhi) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for (x, y) in pts {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        ylo = ylo.min(tf(*y));
        yhi = yhi.max(tf(*y));
    }
    if !x0.is_finite() || !ylo.is_finite() {
        return;
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let (y0, y1, yt) = if log_y {
        let (a, b) = (ylo.floor(), yhi.ceil().max(ylo.floor() + 1.0));
        (a, b, (a as i32..=b as i32).map(f64::from).collect())
    } else {
        ticks(ylo, yhi)
    };
    let x = |v: f64| left + (v - x0) / (x1 - x0) * pw;
    let y = |v: f64| top + ph - (tf(v) - y0) / (y1 - y0) * ph;
    let _ = writeln!(
        o,
        "<svg class=\"chart\" id=\"{}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(id),
        esc(label)
    );
    for t in &yt {
        let yy = top + ph - (t - y0) / (y1 - y0) * ph;
        let text = if log_y {
            fmt_tick(10f64.powf(*t))
        } else {
            fmt_tick(*t)
        };
        let _ = writeln!(
            o,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#e5e5e5\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + pw,
            left - 6.0,
            yy + 4.0,
            esc(&text)
        );
    }
    let _ = writeln!(
        o,
        "<line x1=\"{left}\" x2=\"{left}\" y1=\"{top}\" y2=\"{}\" stroke=\"#333\"/><line x1=\"{left}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"/>",
        top + ph, left + pw, top + ph, top + ph
    );
    match x_labels {
        Some(labels) => {
            for (i, l) in labels.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    x(i as f64),
                    top + ph + 16.0,
                    esc(l)
                );
            }
        }
        None => {
            for v in [x0, (x0 + x1) / 2.0, x1] {
                let _ = writeln!(
                    o,
                    "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    x(v),
                    top + ph + 16.0,
                    esc(&fmt_tick(v.round()))
                );
            }
        }
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        left + pw / 2.0,
        h - 6.0,
        esc(x_title)
    );
    let _ = writeln!(
        o,
        "<text x=\"12\" y=\"{:.1}\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        top + ph / 2.0, top + ph / 2.0, esc(y_title)
    );
    o.push_str("<g class=\"data\">\n");
    for (c, (name, pts)) in lines.iter().enumerate() {
        let colour = COLOURS[c % COLOURS.len()];
        let d: Vec<String> = pts
            .iter()
            .enumerate()
            .map(|(k, (px, py))| {
                format!(
                    "{}{:.1} {:.1}",
                    if k == 0 { "M" } else { "L" },
                    x(*px),
                    y(*py)
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "<path d=\"{}\" stroke=\"{colour}\" stroke-width=\"1.5\" fill=\"none\"/>",
            d.join("")
        );
        if x_labels.is_some() {
            for (px, py) in pts {
                let _ = writeln!(
                    o,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"><title>{}: {}</title></circle>",
                    x(*px),
                    y(*py),
                    esc(name),
                    esc(&fmt_tick(*py))
                );
            }
        }
    }
    o.push_str("</g>\n</svg>\n");
    keys(lines.iter().map(|l| l.0.as_str()), o);
}

/// A chart's legend, under it in HTML: it wraps at any width and never
/// cuts a long configuration name as a legend drawn inside the SVG did.
/// The swatches are SVG (a `style` attribute would need the content
/// policy to allow inline styles).
fn keys<'a>(names: impl Iterator<Item = &'a str>, o: &mut String) {
    o.push_str("<ul class=\"keys\">");
    for (c, name) in names.enumerate() {
        let _ = write!(
            o,
            "<li><svg width=\"12\" height=\"12\" aria-hidden=\"true\"><rect width=\"12\" height=\"12\" fill=\"{}\"/></svg> {}</li>",
            COLOURS[c % COLOURS.len()],
            esc(name)
        );
    }
    o.push_str("</ul>\n");
}

/// The latency distribution (quantiles on a log scale) and the jitter
/// time series of one group of `report.latency` (`views`), the
/// configurations overlaid, each line labelled as the document says:
/// `(labels, dist_labels)`, the time series' and the distribution's.
pub fn latency(
    report: &RunReport,
    group: usize,
    views: &[usize],
    (labels, dist_labels): (&[String], &[String]),
    title: &str,
    o: &mut String,
) {
    let quantiles: Vec<&str> = crate::model::LATENCY_QUANTILES
        .iter()
        .map(|q| q.1)
        .collect();
    let _ = writeln!(o, "<h4>{}</h4>", esc(title));
    let these: Vec<(&crate::model::LatencyView, &String)> = views
        .iter()
        .map(|&i| &report.latency[i])
        .zip(labels)
        .collect();
    let dist: Vec<Line> = these
        .iter()
        .zip(dist_labels)
        .map(|((v, _), label)| {
            (
                label.clone(),
                v.quantiles_us
                    .iter()
                    .enumerate()
                    .map(|(i, q)| (i as f64, *q))
                    .collect(),
            )
        })
        .collect();
    line_chart(
        &format!("latency-dist-{group}"),
        &format!("{title}: distribution"),
        &dist,
        Some(&quantiles),
        true,
        ("quantile", "µs (log scale)"),
        o,
    );
    let series: Vec<Line> = these
        .iter()
        .filter(|(v, _)| !v.series_us.is_empty())
        .map(|(v, label)| {
            (
                label.to_string(),
                v.series_us
                    .iter()
                    .enumerate()
                    .map(|(i, y)| ((i as u64 * v.series_stride) as f64, *y))
                    .collect(),
            )
        })
        .collect();
    if !series.is_empty() {
        line_chart(
            &format!("latency-series-{group}"),
            &format!("{title}: time series"),
            &series,
            None,
            false,
            ("round trip", "µs"),
            o,
        );
    }
}

/// The grid lines with their tick labels, the two axes, and the x labels
/// of a chart whose plot area is `(left, top, width, height)`: shared by
/// the bar charts and the curves.
fn axes(
    o: &mut String,
    (left, top, pw, ph): (f64, f64, f64, f64),
    ticks: &[f64],
    y: &dyn Fn(f64) -> f64,
    labels: &[&str],
    x: &dyn Fn(usize) -> f64,
) {
    for v in ticks {
        let yy = y(*v);
        let _ = writeln!(
            o,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#e5e5e5\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + pw,
            left - 6.0,
            yy + 4.0,
            esc(&fmt_tick(*v))
        );
    }
    let _ = writeln!(
        o,
        "<line x1=\"{left}\" x2=\"{left}\" y1=\"{top}\" y2=\"{}\" stroke=\"#333\"/><line x1=\"{left}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"/>",
        top + ph,
        left + pw,
        top + ph,
        top + ph
    );
    for (i, l) in labels.iter().enumerate() {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(i),
            top + ph + 16.0,
            esc(l)
        );
    }
}

/// The band drawn around a line: its spread band where the workload
/// records one, else its min–max.
fn band_of(l: &crate::model::SeriesLine) -> (&[Option<f64>], &[Option<f64>]) {
    if l.low.is_empty() {
        (&l.min, &l.max)
    } else {
        (&l.low, &l.high)
    }
}

/// A time-series view's chart: each line's mean per interval, its band
/// shaded, each line keyed by `names` (the document's labels).
pub fn series_chart(
    v: &crate::model::SeriesView,
    id: &str,
    label: &str,
    names: &[String],
    o: &mut String,
) {
    let (w, h) = (720.0, 300.0);
    let (left, right, top, bottom) = (70.0, 150.0, 20.0, 45.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let (mut x0, mut x1, mut lo, mut hi) =
        (0.0f64, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
    for l in &v.lines {
        for x in &l.x {
            x1 = x1.max(*x);
        }
        // The axis spans the lines and the band drawn; with a spread band
        // the extremes (in the table) do not set it.
        let (blo, bhi) = band_of(l);
        for y in l.mean.iter().chain(blo).chain(bhi).flatten() {
            lo = lo.min(*y);
            hi = hi.max(*y);
        }
    }
    if !x1.is_finite() || !lo.is_finite() {
        return;
    }
    if x1 <= x0 {
        x0 = x1 - 1.0;
    }
    let (y0, y1, yt) = ticks(lo, hi);
    let step = yt.get(1).map(|b| b - yt[0]).unwrap_or(1.0);
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let x = |v: f64| left + (v - x0) / (x1 - x0) * pw;
    let y = |v: f64| top + ph - (v - y0) / (y1 - y0) * ph;
    let _ = writeln!(
        o,
        "<svg class=\"chart series\" id=\"{}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(id),
        esc(label)
    );
    for t in &yt {
        let _ = writeln!(
            o,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#e5e5e5\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{t:.decimals$}</text>",
            left + pw,
            y(*t),
            y(*t),
            left - 6.0,
            y(*t) + 4.0
        );
    }
    let _ = writeln!(
        o,
        "<line x1=\"{left}\" x2=\"{left}\" y1=\"{top}\" y2=\"{}\" stroke=\"#333\"/><line x1=\"{left}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"/>",
        top + ph,
        left + pw,
        top + ph,
        top + ph
    );
    for t in [x0, (x0 + x1) / 2.0, x1] {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(t),
            top + ph + 16.0,
            esc(&fmt_tick(t))
        );
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"12\" y=\"{:.1}\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        left + pw / 2.0,
        h - 6.0,
        esc(if v.x_unit == "s" { "time (s)" } else { "interval" }),
        top + ph / 2.0,
        top + ph / 2.0,
        esc(&v.unit)
    );
    o.push_str("<g class=\"data\">\n");
    // Runs of consecutive intervals with a figure: a gap breaks the line
    // and the band.
    let runs = |vals: &[Option<f64>]| -> Vec<Vec<usize>> {
        let mut out: Vec<Vec<usize>> = Vec::new();
        let mut cur = Vec::new();
        for (i, v) in vals.iter().enumerate() {
            if v.is_some() {
                cur.push(i);
            } else if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        out
    };
    for (c, l) in v.lines.iter().enumerate() {
        let colour = COLOURS[c % COLOURS.len()];
        let (blo, bhi) = band_of(l);
        if blo.len() == l.mean.len() && bhi.len() == l.mean.len() {
            let both: Vec<Option<f64>> = blo.iter().zip(bhi).map(|(a, b)| a.and(*b)).collect();
            for run in runs(&both) {
                let mut d = String::new();
                for (k, i) in run.iter().enumerate() {
                    let _ = write!(
                        d,
                        "{}{:.1} {:.1}",
                        if k == 0 { "M" } else { "L" },
                        x(l.x[*i]),
                        y(bhi[*i].unwrap_or_default())
                    );
                }
                for i in run.iter().rev() {
                    let _ = write!(
                        d,
                        "L{:.1} {:.1}",
                        x(l.x[*i]),
                        y(blo[*i].unwrap_or_default())
                    );
                }
                let _ = writeln!(
                    o,
                    "<path class=\"band\" d=\"{d}Z\" fill=\"{colour}\" fill-opacity=\"0.15\" stroke=\"none\"/>"
                );
            }
        }
        for run in runs(&l.mean) {
            let mut d = String::new();
            for (k, i) in run.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{:.1} {:.1}",
                    if k == 0 { "M" } else { "L" },
                    x(l.x[*i]),
                    y(l.mean[*i].unwrap_or_default())
                );
            }
            if run.len() == 1 {
                let i = run[0];
                let _ = writeln!(
                    o,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{colour}\"/>",
                    x(l.x[i]),
                    y(l.mean[i].unwrap_or_default())
                );
            } else {
                let _ = writeln!(
                    o,
                    "<path class=\"mean\" d=\"{d}\" stroke=\"{colour}\" stroke-width=\"1.5\" fill=\"none\"><title>{}: mean {:.4} {}, stddev {:.4}</title></path>",
                    esc(&l.point),
                    l.summary.mean,
                    esc(&v.unit),
                    l.summary.stddev
                );
            }
        }
    }
    o.push_str("</g>\n");
    for (c, name) in names.iter().enumerate().take(v.lines.len()) {
        let ly = top + 10.0 + 18.0 * c as f64;
        let _ = writeln!(
            o,
            "<rect x=\"{}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{:.1}\">{}</text>",
            left + pw + 12.0,
            ly - 10.0,
            COLOURS[c % COLOURS.len()],
            left + pw + 30.0,
            ly,
            esc(name)
        );
    }
    o.push_str("</svg>\n");
}
