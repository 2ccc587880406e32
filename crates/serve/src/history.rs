//! `/history`: the studies with their series, and `/history?study=NAME`
//! (`&plan=FINGERPRINT` for another series than the newest run's): a
//! trend chart per series — a point's metric for one configuration over
//! the runs — with the change points `benchlab history` finds marked and
//! links to the runs on either side of each. Built by
//! [`benchlab_report::history`], as the CLI's is.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use benchlab_report::history::{history, ChangeKind, History, HistoryError, Series};
use benchlab_report::html::esc;
use benchlab_stats::ChangePointOptions;
use benchlab_store::{RunRow, RunStatus, Store};

use crate::http::{encode, Request, Response};
use crate::layout::{page, Fail};

/// How often the warmer looks for studies whose runs changed.
const WARM_EVERY: Duration = Duration::from_secs(2);

/// A study's runs as far as its history depends on them: (id, status).
type RunsKey = Vec<(i64, RunStatus)>;

/// One study's newest series, detected and drawn.
struct Drawn {
    /// The runs it was drawn from.
    key: RunsKey,
    /// The newest run in it.
    newest: i64,
    /// The page's body, or why there is none (status, message).
    body: Result<Arc<String>, (u16, String)>,
    /// The run at which each change starts: (series label, change in
    /// percent, worse/better/within the margin).
    changes: BTreeMap<i64, Vec<String>>,
}

/// The history pages of every study's newest series, drawn ahead of time.
///
/// A change-point search over a series of n runs costs O(n²) per
/// permutation, and each run's report is loaded: 38 runs took 361 ms a
/// page and 1,000 runs about 24 s of CPU. So a warmer thread draws each
/// study's page whenever its runs change (checked every
/// [`WARM_EVERY`]), and a request answers from what it drew. While a
/// study's newer runs are being added, its previous page is served with a
/// note saying so; a study never drawn yet (or another plan, `&plan=`) is
/// drawn on request, as before.
#[derive(Default)]
pub(crate) struct Cache {
    drawn: Mutex<HashMap<String, Arc<Drawn>>>,
}

/// Every study's runs, keyed for [`Cache`], from one read of the runs.
fn keys(runs: &[RunRow]) -> BTreeMap<&str, RunsKey> {
    let mut out: BTreeMap<&str, RunsKey> = BTreeMap::new();
    for r in runs {
        out.entry(r.study_name.as_str())
            .or_default()
            .push((r.id, r.status));
    }
    out
}

impl Cache {
    fn get(&self, study: &str) -> Option<Arc<Drawn>> {
        self.drawn.lock().unwrap().get(study).cloned()
    }

    /// Draws `study`'s newest series from `store` and keeps it.
    fn draw(&self, store: &Store, study: &str, key: RunsKey) -> Arc<Drawn> {
        let newest = key.iter().map(|k| k.0).max().unwrap_or(0);
        let drawn = Arc::new(
            match history(store, study, None, ChangePointOptions::default()) {
                Ok(h) => Drawn {
                    key,
                    newest,
                    changes: changes_by_run(&h),
                    body: Ok(Arc::new(render(&h))),
                },
                Err(e) => Drawn {
                    body: nothing_measured(study, &e, &key)
                        .map(Arc::new)
                        .ok_or_else(|| {
                            let Fail(status, msg) = e.into();
                            (status, msg)
                        }),
                    key,
                    newest,
                    changes: BTreeMap::new(),
                },
            },
        );
        self.drawn
            .lock()
            .unwrap()
            .insert(study.to_string(), drawn.clone());
        drawn
    }

    /// Draws every study whose runs changed since it was drawn, the
    /// studies with the newest runs first.
    fn warm(&self, store: &Store) -> Result<(), benchlab_store::StoreError> {
        let runs = store.runs()?;
        let mut studies: Vec<(&str, RunsKey)> = keys(&runs).into_iter().collect();
        studies.sort_by_key(|(_, k)| std::cmp::Reverse(k.iter().map(|r| r.0).max()));
        for (study, key) in studies {
            if self.get(study).is_none_or(|d| d.key != key) {
                self.draw(store, study, key);
            }
        }
        Ok(())
    }

    /// The changes the drawn pages found, by the run each starts at (the
    /// runs list flags them).
    pub(crate) fn changes(&self) -> BTreeMap<i64, (String, Vec<String>)> {
        let mut out = BTreeMap::new();
        for (study, d) in self.drawn.lock().unwrap().iter() {
            for (run, what) in &d.changes {
                out.insert(*run, (study.clone(), what.clone()));
            }
        }
        out
    }
}

/// Runs [`Cache::warm`] every [`WARM_EVERY`] on its own thread, with its
/// own read-only connection, for as long as the server runs.
pub(crate) fn start_warmer(cache: Arc<Cache>, db: &Path) {
    let db = db.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("history-warmer".into())
        .spawn(move || loop {
            // A store that cannot be read now is tried again: the pages
            // report its error themselves.
            if let Ok(store) = Store::open_read_only(&db) {
                let _ = cache.warm(&store);
            }
            std::thread::sleep(WARM_EVERY);
        });
    if let Err(e) = spawned {
        eprintln!("benchlab serve: history pages will be drawn on request only: {e}");
    }
}

/// Each change's first run, with the series and how it was judged.
fn changes_by_run(h: &History) -> BTreeMap<i64, Vec<String>> {
    let mut out: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for s in &h.series {
        for c in s.segmentation.iter().flat_map(|g| &g.changes) {
            let Some(&(run, _)) = s.values.get(c.index) else {
                continue;
            };
            let kind = s.change_kind(c.before_mean, c.after_mean, c.change_pct);
            out.entry(run).or_default().push(format!(
                "{}: {}{}",
                s.label(),
                c.change_pct
                    .map(|p| format!("{p:+.1} %, "))
                    .unwrap_or_default(),
                kind.text(s.margin_pct)
            ));
            if kind == ChangeKind::Worse {
                // Worse first: what a reader of the list looks for.
                out.get_mut(&run).unwrap().rotate_right(1);
            }
        }
    }
    out
}

impl From<HistoryError> for Fail {
    fn from(e: HistoryError) -> Fail {
        match e {
            HistoryError::Store(s) => s.into(),
            HistoryError::Load(l) => l.into(),
            other => Fail(404, other.to_string()),
        }
    }
}

/// The error page of `/history?study=…`.
fn history_error(status: u16, msg: &str) -> Response {
    let mut r = page(
        "history",
        "history",
        &format!(
            "<h1>History</h1>\n<p class=\"err\" id=\"history-error\">{}</p>\n<p><a href=\"/history\">Every study</a></p>\n",
            esc(msg)
        ),
    );
    r.status = status;
    r
}

/// The page of a study that has runs but no completed measured one (only
/// published figures, say): every page links a study to its history, so
/// this is a page that says so, not a 404. None for other errors.
fn nothing_measured(study: &str, e: &HistoryError, key: &RunsKey) -> Option<String> {
    let HistoryError::NoMeasuredRun { left_out, .. } = e else {
        return None;
    };
    Some(format!(
        "<h1>History of {}</h1>\n<p id=\"history-none\">No series to draw: this study has no completed measured run ({}). Its runs: {}.</p>\n<p><a href=\"/history\">Every study</a></p>\n",
        esc(study),
        esc(left_out),
        key.iter()
            .map(|(r, _)| format!("<a href=\"/run/{r}\">{r}</a>"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// `/history` and `/history?study=NAME[&plan=FINGERPRINT]`.
pub(crate) fn history_page(req: &Request, store: &Store, cache: &Cache) -> Result<Response, Fail> {
    let Some(study) = req.param("study").filter(|s| !s.is_empty()) else {
        return studies_page(store, cache);
    };
    let title = format!("history of {study}");
    if let Some(plan) = req.param("plan").filter(|s| !s.is_empty()) {
        // Another series than the newest: not drawn ahead.
        return Ok(
            match history(store, study, Some(plan), ChangePointOptions::default()) {
                Ok(h) => page(&title, "history", &render(&h)),
                Err(e) => {
                    let Fail(status, msg) = e.into();
                    history_error(status, &msg)
                }
            },
        );
    }
    let runs = store.runs()?;
    let key = keys(&runs).remove(study).unwrap_or_default();
    let drawn = match cache.get(study) {
        Some(d) if d.key == key || !key.is_empty() => d,
        _ => cache.draw(store, study, key.clone()),
    };
    let body = match &drawn.body {
        Ok(b) => b,
        Err((status, msg)) => return Ok(history_error(*status, msg)),
    };
    if drawn.key == key {
        return Ok(page(&title, "history", body));
    }
    // The warmer is adding the newer runs: this page until it has.
    let changed = key.iter().filter(|k| !drawn.key.contains(k)).count();
    let note = format!(
        "<p class=\"note\" id=\"history-stale\">Drawn from the runs up to run {}; {changed} run{} of this study {} new or changed since, and the page is being drawn again: reload in a moment.</p>\n",
        drawn.newest,
        if changed == 1 { "" } else { "s" },
        if changed == 1 { "is" } else { "are" },
    );
    Ok(page(&title, "history", &format!("{note}{body}")))
}

/// `/history`: every study with its number of runs, its change points
/// (once its page is drawn) and a link.
fn studies_page(store: &Store, cache: &Cache) -> Result<Response, Fail> {
    let runs = store.runs()?;
    let mut keys = keys(&runs);
    let mut studies: BTreeMap<String, (usize, usize, i64)> = BTreeMap::new();
    for r in &runs {
        let e = studies.entry(r.study_name.clone()).or_default();
        e.0 += 1;
        if r.status == RunStatus::Completed {
            e.1 += 1;
        }
        e.2 = e.2.max(r.id);
    }
    let mut o = String::from("<h1>History</h1>\n<p>A study's runs as series over time: per point, its figure run after run, with the change points found (E-Divisive means with a permutation test, as <code>benchlab history</code>). A series is the completed measured runs of one study name and one plan: a run whose plan or options (<code>--quick</code>, <code>--scale</code>) differ starts another.</p>\n");
    if studies.is_empty() {
        o.push_str("<p>This store has no runs yet.</p>\n");
    } else {
        o.push_str(&crate::layout::scroll("the studies"));
        o.push_str("<table id=\"studies\"><thead><tr><th class=\"l\">study</th><th>runs</th><th>completed</th><th>newest run</th><th class=\"l\">change points</th></tr></thead><tbody>\n");
        for (i, (name, (runs, done, newest))) in studies.iter().enumerate() {
            let key = keys.remove(name.as_str()).unwrap_or_default();
            let changes = match cache.get(name) {
                Some(d) if d.key == key => {
                    let n: usize = d.changes.values().map(Vec::len).sum();
                    match (&d.body, n) {
                        (Err(_), _) => "<td class=\"l\" data-drawn=\"yes\">none</td>".to_string(),
                        (Ok(_), 0) => "<td class=\"l\" data-drawn=\"yes\">none</td>".to_string(),
                        (Ok(_), n) => format!(
                            "<td class=\"l\" data-drawn=\"yes\"><a class=\"badge change\" href=\"/history?study={}#changes\">{n} change point{}</a></td>",
                            encode(name),
                            if n == 1 { "" } else { "s" }
                        ),
                    }
                }
                _ => "<td class=\"l\" data-drawn=\"no\">being drawn…</td>".to_string(),
            };
            let _ = writeln!(
                o,
                "<tr id=\"study-{i}\"><td class=\"l\"><a href=\"/history?study={}\">{}</a></td><td>{runs}</td><td>{done}</td><td><a href=\"/run/{newest}\">{newest}</a></td>{changes}</tr>",
                encode(name),
                esc(name)
            );
        }
        o.push_str("</tbody></table></div>\n");
    }
    Ok(page("history", "history", &o))
}

/// The history page's body.
fn render(h: &History) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "<h1>History of {}</h1>", esc(&h.study));
    let runs = &h.group.runs;
    let _ =
        writeln!(
        o,
        "<p id=\"history-runs\">{} completed measured run{} of plan <code>{}</code>{}: {}.{}</p>",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        esc(&h.group.fingerprint),
        if h.group.trial { " (trial runs: --quick or --scale)" } else { "" },
        runs.iter()
            .map(|r| format!("<a href=\"/run/{r}\">{r}</a>"))
            .collect::<Vec<_>>()
            .join(", "),
        if h.left_out.is_empty() {
            String::new()
        } else {
            format!(" Left out: {}.", esc(&h.left_out.join(", ")))
        }
    );
    if !h.other_groups.is_empty() {
        o.push_str(
            "<p id=\"other-series\">Other series of this study (another plan or other options): ",
        );
        let links: Vec<String> = h
            .other_groups
            .iter()
            .map(|g| {
                format!(
                    "<a href=\"/history?study={}&amp;plan={}\">plan {}</a> ({} run{}{})",
                    encode(&h.study),
                    encode(&g.fingerprint),
                    esc(&g.fingerprint),
                    g.runs.len(),
                    if g.runs.len() == 1 { "" } else { "s" },
                    if g.trial { ", trial" } else { "" }
                )
            })
            .collect();
        o.push_str(&links.join(" · "));
        o.push_str("</p>\n");
    }
    let opts = &h.options;
    let _ = writeln!(
        o,
        "<p class=\"legend\">Change points: E-Divisive means (Matteson &amp; James 2014), accepted when a permutation test gives p ≤ {} ({} permutations), with {} runs or more on either side. Each chart is one point's figure for one configuration; a dashed line marks a change, the grey steps are the means of the segments between changes. Hover a dot for its figure; click it for its run.</p>",
        opts.significance, opts.permutations, opts.min_segment
    );
    // The changes first: what a reader came for.
    let mut changes = String::new();
    for (i, s) in h.series.iter().enumerate() {
        let Some(seg) = &s.segmentation else { continue };
        for (k, c) in seg.changes.iter().enumerate() {
            let (Some(before), Some(after)) = (
                s.values.get(c.index.wrapping_sub(1)).map(|v| v.0),
                s.values.get(c.index).map(|v| v.0),
            ) else {
                continue;
            };
            let judged = s
                .change_kind(c.before_mean, c.after_mean, c.change_pct)
                .text(s.margin_pct);
            let _ = writeln!(
                changes,
                "<li id=\"change-{i}-{k}\" data-run=\"{after}\"><a href=\"#trend-{i}\">{}</a>: change at run {after}, mean {} → {}{} ({judged}), p = {:.3}; <a href=\"/run/{before}\" id=\"change-{i}-{k}-before\">run {before}</a> before, <a href=\"/run/{after}\" id=\"change-{i}-{k}-after\">run {after}</a> after, <a href=\"/compare?c={b}&amp;c={a}&amp;base={b}#comparison\" id=\"change-{i}-{k}-compare\">compare them</a></li>",
                esc(&s.label()),
                fmt(c.before_mean, s.decimals),
                fmt(c.after_mean, s.decimals),
                c.change_pct
                    .map(|p| format!(", {p:+.1} %"))
                    .unwrap_or_default(),
                c.p_value,
                // This series' configuration in both runs, the run before
                // the change as the baseline: the change reads as this
                // page reads it (worse, better).
                b = encode(&format!("{before}:{}", s.configuration)),
                a = encode(&format!("{after}:{}", s.configuration)),
            );
        }
    }
    let found = h.change_count();
    let _ = writeln!(
        o,
        "<h2>Changes</h2>\n<p id=\"change-count\">{found} change point{} in {} series.</p>",
        if found == 1 { "" } else { "s" },
        h.series.len()
    );
    if !changes.is_empty() {
        let _ = writeln!(o, "<ul class=\"changes\" id=\"changes\">\n{changes}</ul>");
    }
    o.push_str("<h2>Series</h2>\n");
    let mut workload = "";
    for (i, s) in h.series.iter().enumerate() {
        if s.workload != workload {
            workload = &s.workload;
            let _ = writeln!(o, "<h3>{}</h3>", esc(workload));
        }
        let _ = writeln!(
            o,
            "<h4>{} · {} · {}</h4>",
            esc(&s.title),
            esc(&s.where_),
            esc(&s.configuration)
        );
        trend_chart(s, i, &mut o);
        let _ = writeln!(o, "<p class=\"small\">{}</p>", esc(&verdict(s, h)));
    }
    o
}

/// The line under a chart: what the detector concluded.
fn verdict(s: &Series, h: &History) -> String {
    let better = format!("{} is better", s.better.as_str());
    let what = match &s.segmentation {
        None => "not tested: a figure is not finite".to_string(),
        Some(g) if !g.changes.is_empty() => format!(
            "{} change point{}",
            g.changes.len(),
            if g.changes.len() == 1 { "" } else { "s" }
        ),
        Some(g) => match g.rejected_p_value {
            Some(p) => format!("no change (the strongest split: p = {p:.3})"),
            None => format!(
                "too short to test: {} run{}, a change needs {} on either side",
                s.values.len(),
                if s.values.len() == 1 { "" } else { "s" },
                h.options.min_segment.max(2)
            ),
        },
    };
    let base = h
        .series
        .first()
        .map(|s| s.configuration.as_str())
        .unwrap_or_default();
    match s.newest_text(base) {
        Some(v) => format!("{better}; margin ±{}%; {what}; {v}", s.margin_pct),
        None => format!("{better}; margin ±{}%; {what}", s.margin_pct),
    }
}

/// A figure with its decimals and thousands grouped.
fn fmt(v: f64, decimals: usize) -> String {
    benchlab_report::format::group_thousands(v, decimals)
}

/// One series' trend: its figure per run (a dot linking to the run, its
/// value on hover), the segment means, and a dashed line at each change.
/// Drawn in a view box and scaled by the stylesheet to the page's width.
fn trend_chart(s: &Series, index: usize, o: &mut String) {
    let (w, h) = (720.0, 220.0);
    let (left, right, top, bottom) = (70.0, 16.0, 16.0, 36.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let n = s.values.len();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (_, v) in &s.values {
        lo = lo.min(*v);
        hi = hi.max(*v);
    }
    if n == 0 || !lo.is_finite() || !hi.is_finite() {
        return;
    }
    // Room around the figures: a flat series still shows as a line in
    // the middle.
    let pad = ((hi - lo) * 0.1).max(hi.abs().max(1e-9) * 0.01);
    let (y0, y1) = (lo - pad, hi + pad);
    let x = |i: usize| left + pw * (i as f64 + 0.5) / n as f64;
    let y = |v: f64| top + ph - (v - y0) / (y1 - y0) * ph;
    let _ = writeln!(
        o,
        "<svg class=\"chart trend\" id=\"trend-{index}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(&s.label())
    );
    for k in 0..=4 {
        let v = y0 + (y1 - y0) * k as f64 / 4.0;
        let yy = y(v);
        let _ = writeln!(
            o,
            "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#e5e5e5\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + pw,
            left - 6.0,
            yy + 4.0,
            esc(&fmt(v, s.decimals.min(2)))
        );
    }
    let _ = writeln!(
        o,
        "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>",
        left + pw,
        top + ph,
        top + ph
    );
    // Run labels: every one when they fit, else every k-th.
    let every = n.div_ceil(16).max(1);
    for (i, (run, _)) in s.values.iter().enumerate() {
        if i % every == 0 || i + 1 == n {
            let _ = writeln!(
                o,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{run}</text>",
                x(i),
                top + ph + 16.0
            );
        }
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">run</text>",
        left + pw / 2.0,
        h - 4.0
    );
    let changes = s.segmentation.as_ref().map_or(&[][..], |g| &g.changes[..]);
    // Segment means: from each change (and the start) to the next.
    let mut starts: Vec<usize> = vec![0];
    starts.extend(changes.iter().map(|c| c.index));
    starts.sort_unstable();
    for (k, &a) in starts.iter().enumerate() {
        let b = starts.get(k + 1).copied().unwrap_or(n);
        if b <= a {
            continue;
        }
        let mean = s.values[a..b].iter().map(|v| v.1).sum::<f64>() / (b - a) as f64;
        let _ = writeln!(
            o,
            "<path class=\"segment\" d=\"M{:.1} {:.1}H{:.1}\" stroke=\"#999\" stroke-width=\"3\" fill=\"none\"><title>runs {} to {}: mean {}</title></path>",
            x(a) - pw / n as f64 * 0.4,
            y(mean),
            x(b - 1) + pw / n as f64 * 0.4,
            s.values[a].0,
            s.values[b - 1].0,
            esc(&fmt(mean, s.decimals))
        );
    }
    for c in changes {
        if c.index == 0 || c.index >= n {
            continue;
        }
        let cx = (x(c.index - 1) + x(c.index)) / 2.0;
        let _ = writeln!(
            o,
            "<g class=\"change\" data-run=\"{}\"><line x1=\"{cx:.1}\" x2=\"{cx:.1}\" y1=\"{top}\" y2=\"{:.1}\" stroke=\"#d55e00\" stroke-width=\"2\" stroke-dasharray=\"5 4\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#d55e00\">{}</text><title>change at run {}: mean {} → {}, p = {:.3}</title></g>",
            s.values[c.index].0,
            top + ph,
            cx + 4.0,
            top + 11.0,
            esc(&c.change_pct.map(|p| format!("{p:+.1} %")).unwrap_or_else(|| "change".into())),
            s.values[c.index].0,
            esc(&fmt(c.before_mean, s.decimals)),
            esc(&fmt(c.after_mean, s.decimals)),
            c.p_value
        );
    }
    o.push_str("<g class=\"data\">\n");
    if n > 1 {
        let d: Vec<String> = s
            .values
            .iter()
            .enumerate()
            .map(|(i, (_, v))| {
                format!("{}{:.1} {:.1}", if i == 0 { "M" } else { "L" }, x(i), y(*v))
            })
            .collect();
        let _ = writeln!(
            o,
            "<path d=\"{}\" stroke=\"#0072b2\" stroke-width=\"1.5\" fill=\"none\"/>",
            d.join("")
        );
    }
    for (i, (run, v)) in s.values.iter().enumerate() {
        let _ = writeln!(
            o,
            "<a href=\"/run/{run}\"><circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"#0072b2\"><title>run {run}: {}</title></circle></a>",
            x(i),
            y(*v),
            esc(&fmt(*v, s.decimals))
        );
    }
    o.push_str("</g>\n</svg>\n");
}
