//! The runs list (`/`): sorted, filtered, searched and paged on the
//! server, from the query string, so that it works without a script and a
//! store of thousands of runs still makes a page of one screenful of rows;
//! and `/api/runs`, which its script polls for the live status of the
//! runs shown.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use benchlab_report::html::esc;
use benchlab_report::{progress, Progress};
use benchlab_store::{RunRow, RunStatus, Store};

use crate::http::{encode, Request, Response};
use crate::layout::{page, Fail};

/// Rows per page unless `per` says otherwise.
pub const DEFAULT_PER_PAGE: usize = 50;
/// The most rows a page shows (`per`).
pub const MAX_PER_PAGE: usize = 500;

/// Polls `/api/runs` every two seconds for the runs shown that are not
/// complete yet (their status cell carries `data-live`) and for runs newer
/// than the newest the page knew; rewrites their status, end and progress
/// cells, and raises a "reload" notice for new runs. Inline (allowed by
/// its hash): the pages fetch nothing from elsewhere.
pub(crate) const LIVE_SCRIPT: &str = "
(function(){var news=document.getElementById('news');if(!news)return;
function tick(){var ids=[];document.querySelectorAll('td[data-live]').forEach(function(e){ids.push(e.getAttribute('data-live'));});
fetch('/api/runs?after='+news.getAttribute('data-newest')+'&ids='+ids.join(','),{credentials:'same-origin'}).then(function(r){return r.json();}).then(function(runs){
var fresh=0;runs.forEach(function(r){var s=document.getElementById('status-'+r.id);
if(!s){fresh++;return;}s.textContent=r.status;s.className='l st-'+r.status;if(r.status!=='running'){s.removeAttribute('data-live');}
document.getElementById('end-'+r.id).textContent=r.ended_at||'…';
document.getElementById('progress-'+r.id).textContent=r.progress_text;});
if(fresh>0){news.style.display='block';news.textContent=fresh+' new run(s): reload the page to see them';}
}).catch(function(){});}
setInterval(tick,2000);tick();})();
";

/// What kind of run: measured here, a trial (`--quick` or `--scale`), or
/// published figures imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunKind {
    Measured,
    Trial,
    Published,
}

impl RunKind {
    fn of(run: &RunRow, published: &BTreeSet<i64>) -> RunKind {
        if published.contains(&run.id) {
            RunKind::Published
        } else if run.options.quick || run.options.scale != 1.0 {
            RunKind::Trial
        } else {
            RunKind::Measured
        }
    }

    fn word(self) -> &'static str {
        match self {
            RunKind::Measured => "measured",
            RunKind::Trial => "trial",
            RunKind::Published => "published",
        }
    }
}

/// The status as the pages and `/api/runs` write it.
pub(crate) fn status_text(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Running => "running",
        RunStatus::Completed => "completed",
        RunStatus::Interrupted => "interrupted",
        RunStatus::Failed => "failed",
    }
}

/// `12 / 40 units (30%), about 2 min 5 s left`.
pub(crate) fn progress_text(p: Option<Progress>) -> String {
    let Some(p) = p else { return String::new() };
    let pct = if p.total > 0 {
        p.done as f64 * 100.0 / p.total as f64
    } else {
        100.0
    };
    let mut s = format!("{} / {} units ({pct:.0}%)", p.done, p.total);
    if let Some(left) = p.left_s {
        let left = left.max(0.0).round() as u64;
        let _ = write!(s, ", about {} min {} s left", left / 60, left % 60);
    }
    s
}

/// The progress of a run that is not complete (a complete run's is its
/// whole plan: not worth building its plan for).
fn progress_of(run: &RunRow, store: &Store) -> Option<Progress> {
    (run.status != RunStatus::Completed)
        .then(|| progress(store, run.id).ok().flatten())
        .flatten()
}

/// One line of the runs list, as `/api/runs` sends it.
#[derive(serde::Serialize)]
struct RunLine {
    id: i64,
    study: String,
    status: &'static str,
    kind: &'static str,
    started_at: String,
    ended_at: Option<String>,
    progress: Option<Progress>,
    progress_text: String,
}

fn run_line(run: &RunRow, kind: RunKind, store: &Store) -> RunLine {
    let progress = progress_of(run, store);
    RunLine {
        id: run.id,
        study: run.study_name.clone(),
        status: status_text(run.status),
        kind: kind.word(),
        started_at: run.started_at.clone(),
        ended_at: run.ended_at.clone(),
        progress,
        progress_text: if run.status == RunStatus::Completed {
            "complete".into()
        } else {
            progress_text(progress)
        },
    }
}

/// `/api/runs`: every run, newest first; with `ids=1,2` and `after=N`
/// only those runs and the runs newer than N (what the list's script
/// asks for).
pub(crate) fn runs_json(req: &Request, store: &Store) -> Result<Response, Fail> {
    let ids: Option<BTreeSet<i64>> = req.param("ids").map(|s| {
        s.split(',')
            .filter_map(|x| x.trim().parse::<i64>().ok())
            .collect()
    });
    let after: Option<i64> = match req.param("after") {
        None | Some("") => None,
        Some(a) => Some(
            a.parse()
                .map_err(|_| Fail(400, format!("after=`{a}`: a run id (a number) is expected")))?,
        ),
    };
    let published = store.published_runs()?;
    let lines: Vec<RunLine> = store
        .runs()?
        .iter()
        .filter(|r| {
            (ids.is_none() && after.is_none())
                || ids.as_ref().is_some_and(|i| i.contains(&r.id))
                || after.is_some_and(|a| r.id > a)
        })
        .map(|r| run_line(r, RunKind::of(r, &published), store))
        .collect();
    Ok(Response::json(
        serde_json::to_string(&lines).map_err(|e| Fail(500, e.to_string()))?,
    ))
}

/// The sort keys of the list, as `sort=` names them.
const SORTS: &[(&str, &str)] = &[
    ("id", "run"),
    ("study", "study"),
    ("status", "status"),
    ("started", "started"),
    ("ended", "ended"),
];

/// What the query string asks of the list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ListQuery {
    q: String,
    study: String,
    status: Option<RunStatus>,
    kind: Option<RunKind>,
    sort: &'static str,
    desc: bool,
    page: usize,
    per: usize,
}

impl ListQuery {
    /// Reads the query; a value out of its set is a 400 naming the key
    /// and what is allowed.
    pub(crate) fn parse(req: &Request) -> Result<ListQuery, Fail> {
        let get = |k: &str| req.param(k).map(str::trim).unwrap_or("");
        let bad = |k: &str, v: &str, allowed: &str| {
            Fail(400, format!("{k}=`{v}`: allowed are {allowed}"))
        };
        let status = match get("status") {
            "" => None,
            "running" => Some(RunStatus::Running),
            "completed" => Some(RunStatus::Completed),
            "interrupted" => Some(RunStatus::Interrupted),
            "failed" => Some(RunStatus::Failed),
            v => return Err(bad("status", v, "running, completed, interrupted, failed")),
        };
        let kind = match get("kind") {
            "" => None,
            "measured" => Some(RunKind::Measured),
            "trial" => Some(RunKind::Trial),
            "published" => Some(RunKind::Published),
            v => return Err(bad("kind", v, "measured, trial, published")),
        };
        let sort = match get("sort") {
            "" => "id",
            v => SORTS
                .iter()
                .find(|(k, _)| *k == v)
                .map(|(k, _)| *k)
                .ok_or_else(|| bad("sort", v, "id, study, status, started, ended"))?,
        };
        let desc = match get("dir") {
            "" => sort != "study" && sort != "status",
            "desc" => true,
            "asc" => false,
            v => return Err(bad("dir", v, "asc, desc")),
        };
        let number = |k: &str, default: usize, lo: usize, hi: usize| match get(k) {
            "" => Ok(default),
            v => v
                .parse::<usize>()
                .ok()
                .filter(|n| (lo..=hi).contains(n))
                .ok_or_else(|| bad(k, v, &format!("a number from {lo} to {hi}"))),
        };
        Ok(ListQuery {
            q: get("q").to_string(),
            study: get("study").to_string(),
            status,
            kind,
            sort,
            desc,
            page: number("page", 1, 1, usize::MAX)?,
            per: number("per", DEFAULT_PER_PAGE, 1, MAX_PER_PAGE)?,
        })
    }

    /// The query string of this list with `changes` applied (an empty
    /// value drops the key); defaults are left out.
    fn link(&self, changes: &[(&str, String)]) -> String {
        let mut pairs: Vec<(&str, String)> = vec![
            ("q", self.q.clone()),
            ("study", self.study.clone()),
            ("status", self.status.map(status_text).unwrap_or("").into()),
            ("kind", self.kind.map(RunKind::word).unwrap_or("").into()),
            (
                "sort",
                if self.sort == "id" { "" } else { self.sort }.into(),
            ),
            ("dir", if self.desc { "desc" } else { "asc" }.into()),
            (
                "per",
                if self.per == DEFAULT_PER_PAGE {
                    String::new()
                } else {
                    self.per.to_string()
                },
            ),
            (
                "page",
                if self.page == 1 {
                    String::new()
                } else {
                    self.page.to_string()
                },
            ),
        ];
        for (k, v) in changes {
            if let Some(p) = pairs.iter_mut().find(|p| p.0 == *k) {
                p.1 = v.clone();
            }
        }
        let q: Vec<String> = pairs
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        if q.is_empty() {
            "/".into()
        } else {
            format!("/?{}", q.join("&"))
        }
    }
}

/// A run with what the list shows and searches.
struct Entry<'a> {
    run: &'a RunRow,
    kind: RunKind,
    configurations: Vec<String>,
    hosts: Vec<String>,
}

impl Entry<'_> {
    /// Whether every word of `q` occurs (case-insensitive) in the run's
    /// id, study, description, status, kind, configurations or hosts.
    fn matches(&self, words: &[String]) -> bool {
        if words.is_empty() {
            return true;
        }
        let hay = format!(
            "#{} {} {} {} {} {} {}",
            self.run.id,
            self.run.study_name,
            self.run.description,
            status_text(self.run.status),
            self.kind.word(),
            self.configurations.join(" "),
            self.hosts.join(" ")
        )
        .to_lowercase();
        words
            .iter()
            .all(|w| hay.contains(w.as_str()) || w.parse::<i64>().is_ok_and(|n| n == self.run.id))
    }
}

fn status_rank(s: RunStatus) -> u8 {
    match s {
        RunStatus::Running => 0,
        RunStatus::Failed => 1,
        RunStatus::Interrupted => 2,
        RunStatus::Completed => 3,
    }
}

/// `/`: the runs list.
pub(crate) fn runs_page(
    req: &Request,
    store: &Store,
    histories: &crate::history::Cache,
) -> Result<Response, Fail> {
    let lq = match ListQuery::parse(req) {
        Ok(q) => q,
        Err(Fail(status, msg)) => {
            let mut r = page(
                "runs",
                "runs",
                &format!(
                    "<h1>Runs</h1>\n<p class=\"err\" id=\"list-error\">{}</p>\n<p><a href=\"/\">All runs</a></p>\n",
                    esc(&msg)
                ),
            );
            r.status = status;
            return Ok(r);
        }
    };
    let runs = store.runs()?;
    // A query each for the whole list, not one per run.
    let mut config_names = store.configuration_names()?;
    let mut host_names = store.host_names()?;
    let published = store.published_runs()?;
    let repetitions = store.repetition_counts()?;
    // The changes the history pages found, by the run each starts at.
    let changes = histories.changes();
    let newest = runs.iter().map(|r| r.id).max().unwrap_or(0);
    let mut studies: BTreeMap<&str, usize> = BTreeMap::new();
    let entries: Vec<Entry> = runs
        .iter()
        .map(|run| {
            *studies.entry(run.study_name.as_str()).or_default() += 1;
            Entry {
                run,
                kind: RunKind::of(run, &published),
                configurations: config_names.remove(&run.id).unwrap_or_default(),
                hosts: host_names
                    .remove(&run.id)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|h| format!("{} ({})", h.name, h.roles))
                    .collect(),
            }
        })
        .collect();
    let words: Vec<String> =
        lq.q.split_whitespace()
            .map(|w| w.trim_start_matches('#').to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
    let mut shown: Vec<&Entry> = entries
        .iter()
        .filter(|e| lq.study.is_empty() || e.run.study_name == lq.study)
        .filter(|e| lq.status.is_none_or(|s| e.run.status == s))
        .filter(|e| lq.kind.is_none_or(|k| e.kind == k))
        .filter(|e| e.matches(&words))
        .collect();
    shown.sort_by(|a, b| {
        let (x, y) = (a.run, b.run);
        let o = match lq.sort {
            "study" => x
                .study_name
                .to_lowercase()
                .cmp(&y.study_name.to_lowercase()),
            "status" => status_rank(x.status).cmp(&status_rank(y.status)),
            "started" => x.started_at.cmp(&y.started_at),
            "ended" => x.ended_at.cmp(&y.ended_at),
            _ => x.id.cmp(&y.id),
        }
        .then(x.id.cmp(&y.id));
        if lq.desc {
            o.reverse()
        } else {
            o
        }
    });
    let total = shown.len();
    let pages = total.div_ceil(lq.per).max(1);
    let page_no = lq.page.min(pages);
    let first = (page_no - 1) * lq.per;
    let rows = &shown[first.min(total)..(first + lq.per).min(total)];

    let mut o = String::from("<h1>Runs</h1>\n");
    let _ = writeln!(o, "<p id=\"news\" data-newest=\"{newest}\"></p>");
    if runs.is_empty() {
        o.push_str(
            "<p>This store has no runs yet: <code>benchlab run STUDY</code> adds one.</p>\n",
        );
    }
    filters_form(&lq, &studies, &mut o);
    let _ = writeln!(
        o,
        "<p class=\"small\" id=\"list-count\">{}</p>",
        if total == runs.len() {
            format!("{total} run{}", if total == 1 { "" } else { "s" })
        } else {
            format!("{total} of {} runs match", runs.len())
        }
    );
    o.push_str(&crate::layout::scroll("the runs"));
    o.push_str("<table id=\"runs\"><thead><tr>");
    for (key, label) in SORTS.iter().take(2) {
        sort_header(&lq, key, label, &mut o);
    }
    o.push_str("<th class=\"l\">kind</th>");
    sort_header(&lq, "status", "status", &mut o);
    o.push_str("<th class=\"l\">configurations</th><th class=\"l\">hosts</th>");
    sort_header(&lq, "started", "started", &mut o);
    sort_header(&lq, "ended", "ended", &mut o);
    o.push_str("<th class=\"l\">progress</th></tr></thead>\n<tbody>\n");
    for e in rows {
        let run = e.run;
        let line = run_line(run, e.kind, store);
        let kind = match e.kind {
            RunKind::Measured => e.kind.word().to_string(),
            k => format!("<span class=\"badge {0}\">{0}</span>", k.word()),
        };
        // A change point the history found starting at this run.
        let change = match changes.get(&run.id) {
            Some((study, what)) => format!(
                " <a class=\"badge change\" id=\"change-{id}\" href=\"/history?study={}#changes\" title=\"{}\">{}</a>",
                encode(study),
                esc(&what.join("; ")),
                if what.iter().any(|w| w.ends_with("worse")) {
                    "change: worse"
                } else {
                    "change"
                },
                id = run.id,
            ),
            None => String::new(),
        };
        // Failed repetitions of a run that still completed.
        let failed = match repetitions.get(&run.id) {
            Some(&(bad, all)) if bad > 0 => format!(
                " <span class=\"badge failures\" id=\"failures-{id}\">{bad} of {all} repetitions failed</span>",
                id = run.id
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "<tr><td><a href=\"/run/{id}\" id=\"run-{id}\">{id}</a></td><td class=\"l\"><a href=\"/history?study={}\" title=\"this study's history\">{}</a>{change}</td><td class=\"l\">{kind}</td><td class=\"l st-{st}\" id=\"status-{id}\"{live}>{st}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l when\">{}</td><td class=\"l when\" id=\"end-{id}\">{}</td><td class=\"l\" id=\"progress-{id}\">{}{failed}</td></tr>",
            encode(&run.study_name),
            esc(&run.study_name),
            esc(&e.configurations.join(", ")),
            esc(&e.hosts.join(", ")),
            esc(&run.started_at),
            esc(run.ended_at.as_deref().unwrap_or("…")),
            esc(&line.progress_text),
            id = run.id,
            st = line.status,
            live = if run.status == RunStatus::Running {
                format!(" data-live=\"{}\"", run.id)
            } else {
                String::new()
            },
        );
    }
    o.push_str("</tbody></table></div>\n");
    pager(&lq, page_no, pages, &mut o);
    let _ = writeln!(o, "<script>{LIVE_SCRIPT}</script>");
    Ok(page("runs", "runs", &o))
}

/// A column header that sorts by `key` (toggling the direction when it
/// already does).
fn sort_header(lq: &ListQuery, key: &str, label: &str, o: &mut String) {
    let current = lq.sort == key;
    let dir = if current {
        if lq.desc {
            "asc"
        } else {
            "desc"
        }
    } else if key == "study" || key == "status" {
        "asc"
    } else {
        "desc"
    };
    let arrow = match (current, lq.desc) {
        (true, true) => " ▼",
        (true, false) => " ▲",
        _ => "",
    };
    let _ = write!(
        o,
        "<th class=\"{}\"><a href=\"{}\" id=\"sort-{key}\"{}>{label}{arrow}</a></th>",
        if key == "id" { "" } else { "l" },
        esc(&lq.link(&[
            (
                "sort",
                if key == "id" {
                    String::new()
                } else {
                    key.into()
                }
            ),
            ("dir", dir.into()),
            ("page", String::new()),
        ])),
        if current { " class=\"sorted\"" } else { "" },
    );
}

/// The filter form: a GET form, so the list filters without a script.
fn filters_form(lq: &ListQuery, studies: &BTreeMap<&str, usize>, o: &mut String) {
    o.push_str("<form class=\"filters\" method=\"get\" action=\"/\" id=\"filters\">");
    let _ = write!(
        o,
        "<label for=\"f-q\">search<input type=\"search\" name=\"q\" id=\"f-q\" value=\"{}\" placeholder=\"study, configuration, host, #id\"></label>",
        esc(&lq.q)
    );
    let _ = write!(o, "<label for=\"f-study\">study<select name=\"study\" id=\"f-study\"><option value=\"\">every study</option>");
    for (name, n) in studies {
        let _ = write!(
            o,
            "<option value=\"{0}\"{1}>{0} ({n})</option>",
            esc(name),
            if *name == lq.study { " selected" } else { "" }
        );
    }
    o.push_str("</select></label>");
    let select = |o: &mut String,
                  key: &str,
                  label: &str,
                  any: &str,
                  values: &[&str],
                  current: &str| {
        let _ = write!(o, "<label for=\"f-{key}\">{label}<select name=\"{key}\" id=\"f-{key}\"><option value=\"\">{any}</option>");
        for v in values {
            let _ = write!(
                o,
                "<option value=\"{v}\"{}>{v}</option>",
                if *v == current { " selected" } else { "" }
            );
        }
        o.push_str("</select></label>");
    };
    select(
        o,
        "status",
        "status",
        "any status",
        &["running", "completed", "interrupted", "failed"],
        lq.status.map(status_text).unwrap_or(""),
    );
    select(
        o,
        "kind",
        "kind",
        "any kind",
        &["measured", "trial", "published"],
        lq.kind.map(RunKind::word).unwrap_or(""),
    );
    // The sort survives a new filter.
    if lq.sort != "id" {
        let _ = write!(
            o,
            "<input type=\"hidden\" name=\"sort\" value=\"{}\">",
            lq.sort
        );
    }
    let _ = write!(
        o,
        "<input type=\"hidden\" name=\"dir\" value=\"{}\">",
        if lq.desc { "desc" } else { "asc" }
    );
    if lq.per != DEFAULT_PER_PAGE {
        let _ = write!(
            o,
            "<input type=\"hidden\" name=\"per\" value=\"{}\">",
            lq.per
        );
    }
    o.push_str("<button type=\"submit\" id=\"filter-go\">Show</button> <a href=\"/\" id=\"filter-reset\">reset</a></form>\n");
}

/// Page links: first, previous, where, next, last.
fn pager(lq: &ListQuery, page_no: usize, pages: usize, o: &mut String) {
    if pages <= 1 {
        return;
    }
    o.push_str("<nav class=\"pager\" id=\"pager\">");
    let link = |o: &mut String, n: usize, text: &str, id: &str| {
        let _ = write!(
            o,
            "<a href=\"{}\" id=\"{id}\">{text}</a>",
            esc(&lq.link(&[("page", if n == 1 { String::new() } else { n.to_string() })]))
        );
    };
    if page_no > 1 {
        link(o, 1, "« first", "page-first");
        link(o, page_no - 1, "‹ previous", "page-prev");
    }
    let _ = write!(o, "<span id=\"page-at\">page {page_no} of {pages}</span>");
    if page_no < pages {
        link(o, page_no + 1, "next ›", "page-next");
        link(o, pages, "last »", "page-last");
    }
    o.push_str("</nav>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request_from_parts;

    fn req(target: &str) -> Request {
        request_from_parts("GET", target, [("host", &b"x"[..])]).unwrap()
    }

    #[test]
    fn progress_words() {
        assert_eq!(progress_text(None), "");
        let p = Progress {
            done: 3,
            total: 12,
            left_s: Some(125.4),
        };
        assert_eq!(
            progress_text(Some(p)),
            "3 / 12 units (25%), about 2 min 5 s left"
        );
    }

    #[test]
    fn the_query_is_read_and_written_back() {
        let q = ListQuery::parse(&req(
            "/?q=net+rr&status=completed&kind=trial&sort=study&page=3&per=20",
        ))
        .unwrap();
        assert_eq!(q.q, "net rr");
        assert_eq!(q.status, Some(RunStatus::Completed));
        assert_eq!(q.kind, Some(RunKind::Trial));
        assert_eq!((q.sort, q.desc, q.page, q.per), ("study", false, 3, 20));
        assert_eq!(
            q.link(&[("page", "4".into())]),
            "/?q=net%20rr&status=completed&kind=trial&sort=study&dir=asc&per=20&page=4"
        );
        let d = ListQuery::parse(&req("/")).unwrap();
        assert_eq!(
            (d.sort, d.desc, d.page, d.per),
            ("id", true, 1, DEFAULT_PER_PAGE)
        );
        assert_eq!(d.link(&[]), "/?dir=desc");
    }

    #[test]
    fn values_out_of_their_set_are_named() {
        for (target, key) in [
            ("/?status=done", "status=`done`: allowed are running"),
            ("/?kind=x", "kind=`x`: allowed are measured"),
            ("/?sort=size", "sort=`size`"),
            ("/?dir=up", "dir=`up`"),
            ("/?page=0", "page=`0`: allowed are a number from 1"),
            (
                "/?per=100000",
                "per=`100000`: allowed are a number from 1 to 500",
            ),
        ] {
            let Err(Fail(status, msg)) = ListQuery::parse(&req(target)) else {
                panic!("{target} accepted");
            };
            assert_eq!(status, 400);
            assert!(msg.contains(key), "{target}: {msg}");
        }
    }
}
