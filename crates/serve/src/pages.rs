//! The pages: each a function of the store's rows and the report model,
//! drawn with the report crate's HTML renderer. Every text that comes
//! from the store or the request is escaped ([`esc`]).

use std::fmt::Write;

use benchlab_report::html::{
    esc, inventory_html, inventory_html_with, render_body, render_html, style,
};
use benchlab_report::{load, render, ColumnSpec, Format, LoadError, RunReport, RunSelection};
use benchlab_store::{HostRow, Store};

use crate::http::{encode, Request, Response};
use crate::layout::{page, Fail};
use crate::runs::LIVE_SCRIPT;

/// The inline scripts and styles the pages hold, exactly as they are
/// written into them: the content-security policy allows these and no
/// others (by their hashes).
pub(crate) fn inline_blocks() -> (Vec<String>, Vec<String>) {
    (
        vec![
            LIVE_SCRIPT.to_string(),
            benchlab_report::html::check_script().to_string(),
        ],
        // The hosts download's style (a file, but a browser may open it
        // from here).
        vec![style().to_string()],
    )
}

/// The answer to `req`.
pub(crate) fn route(req: &Request, store: &Store, histories: &crate::history::Cache) -> Response {
    let path = req.path.as_str();
    if let Some(file) = crate::assets::asset(path) {
        return file;
    }
    let result = match path {
        "/" => crate::runs::runs_page(req, store, histories),
        "/api/runs" => crate::runs::runs_json(req, store),
        "/history" | "/history/" => crate::history::history_page(req, store, histories),
        "/compare" | "/compare/" => compare_page(req, store),
        "/hosts" | "/hosts/" => hosts_page(req, store),
        "/queue" | "/queue/" => crate::queue::queue_page(store),
        "/bisect" | "/bisect/" => crate::bisections::bisections_page(store),
        _ => {
            if let Some(rest) = path.strip_prefix("/run/") {
                run_route(rest, store)
            } else if let Some(rest) = path.strip_prefix("/bisect/") {
                crate::bisections::bisection_page(rest, store)
            } else if let Some(file) = path.strip_prefix("/compare/") {
                compare_download(file, req, store)
            } else if let Some(file) = path.strip_prefix("/hosts/") {
                hosts_download(file, req, store)
            } else {
                Err(Fail(
                    404,
                    format!(
                        "no page {path}: see / (runs), /history, /compare, /hosts, /queue, /bisect"
                    ),
                ))
            }
        }
    };
    result.unwrap_or_else(|Fail(status, msg)| Response::error(status, &msg))
}

/// A run id from the URL.
fn run_id(s: &str) -> Result<i64, Fail> {
    s.parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| Fail(400, format!("`{s}` is not a run id (a positive number)")))
}

/// The download links of a page: `base` + `report.EXT` + `query`.
fn downloads(base: &str, query: &str, extra: &[(&str, &str)]) -> String {
    let mut o = String::from("<p class=\"downloads\">Download: ");
    for (ext, what) in [
        ("json", "JSON"),
        ("csv", "CSV"),
        ("md", "Markdown"),
        ("html", "HTML"),
    ]
    .iter()
    .chain(extra)
    {
        let file = if ext.contains('.') {
            ext.to_string()
        } else {
            format!("report.{ext}")
        };
        let _ = write!(
            o,
            "<a href=\"{base}{file}{}\" id=\"download-{}\" download>{what}</a>",
            esc(query),
            ext.replace('.', "-")
        );
    }
    o.push_str("</p>\n");
    o
}

/// A report in one of the download formats.
fn report_file(report: &RunReport, file: &str, stem: &str) -> Result<Response, Fail> {
    Ok(match file {
        "report.json" => Response::download(
            "application/json",
            &format!("{stem}.json"),
            render(report, Format::Json),
        ),
        "report.csv" => Response::download(
            "text/csv; charset=utf-8",
            &format!("{stem}.csv"),
            render(report, Format::Csv),
        ),
        "repetitions.csv" => Response::download(
            "text/csv; charset=utf-8",
            &format!("{stem}-repetitions.csv"),
            benchlab_report::render::repetitions_csv(report),
        ),
        "report.md" => Response::download(
            "text/markdown; charset=utf-8",
            &format!("{stem}.md"),
            render(report, Format::Markdown),
        ),
        "report.html" => Response::download(
            "text/html; charset=utf-8",
            &format!("{stem}.html"),
            render_html(report),
        ),
        other => {
            return Err(Fail(
                404,
                format!("no download `{other}`: report.json, report.csv, repetitions.csv, report.md or report.html"),
            ))
        }
    })
}

/// `/run/N` and `/run/N/FILE`.
fn run_route(rest: &str, store: &Store) -> Result<Response, Fail> {
    // `/run/2/` is the run's page, as `/run/2` is.
    let (id, file) = match rest.split_once('/') {
        Some((id, "")) => (id, None),
        Some((id, file)) => (id, Some(file)),
        None => (rest, None),
    };
    let id = run_id(id)?;
    let run = store.run(id)?;
    let report = load(store, &RunSelection::Run(id))?;
    match file {
        None => {
            let mut o = downloads(
                &format!("/run/{id}/"),
                "",
                &[("repetitions.csv", "CSV (repetitions)")],
            );
            let _ = writeln!(
                o,
                "<p><a href=\"/compare?c={id}\">Compare this run's configurations</a> · <a href=\"/hosts?a={id}\">Its hosts</a> · <a href=\"/history?study={}\">This study's history</a></p>",
                encode(&run.study_name)
            );
            o.push_str(&crate::bisections::run_note(store, id)?);
            o.push_str(&render_body(&report));
            Ok(page(&format!("run {id}: {}", run.study_name), "runs", &o))
        }
        Some(f) => report_file(&report, f, &format!("benchlab-run-{id}")),
    }
}

/// The comparison of the picked columns (`c=RUN` or `c=RUN:CONFIG`, as
/// `benchlab compare` takes them) against `base` (a column, or the first
/// column); None when fewer than two columns are picked.
fn comparison(req: &Request, store: &Store) -> Result<Option<RunReport>, Fail> {
    let mut specs = req.params("c");
    let base = req.param("base").filter(|b| !b.is_empty());
    // A baseline picked but not ticked is still meant to be compared.
    if let Some(b) = base {
        if !specs.contains(&b) {
            specs.insert(0, b);
        }
    }
    let column = |spec: &str| {
        spec.parse::<ColumnSpec>()
            .map_err(|e| Fail(400, format!("column `{spec}` (RUN or RUN:CONFIG): {e}")))
    };
    let columns = specs
        .iter()
        .map(|c| column(c))
        .collect::<Result<Vec<_>, _>>()?;
    let selection = RunSelection::Columns {
        columns,
        baseline: base.map(column).transpose()?,
    };
    match load(store, &selection) {
        Ok(r) if r.configurations.len() >= 2 => Ok(Some(r)),
        Ok(_) | Err(LoadError::NoColumns) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The query string that reproduces the comparison's picks.
fn compare_query(req: &Request) -> String {
    let mut parts: Vec<String> = req
        .params("c")
        .iter()
        .map(|c| format!("c={}", encode(c)))
        .collect();
    if let Some(b) = req.param("base").filter(|b| !b.is_empty()) {
        parts.push(format!("base={}", encode(b)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

fn compare_page(req: &Request, store: &Store) -> Result<Response, Fail> {
    let chosen = req.params("c");
    let base = req.param("base").unwrap_or("");
    let runs = store.runs()?;
    // One query for every run's configurations (not one per run: a lab's
    // store has a thousand runs).
    let mut names = store.configuration_names()?;
    // With columns picked, the picker offers the runs of their studies
    // (a history's "compare them" picks two runs of one study); `/compare`
    // alone offers every run.
    let picked_runs: Vec<i64> = chosen
        .iter()
        .chain(std::iter::once(&base))
        .filter_map(|c| c.split(':').next()?.parse().ok())
        .collect();
    let studies: std::collections::BTreeSet<&str> = runs
        .iter()
        .filter(|r| picked_runs.contains(&r.id))
        .map(|r| r.study_name.as_str())
        .collect();
    let mut picker = String::new();
    let _ = write!(
        picker,
        "<form class=\"pick\" method=\"get\" action=\"/compare\">\n<p>Tick the configurations to compare and choose the baseline (the B of every advantage; the first ticked when none is chosen).{}</p>\n{}<table id=\"picker\"><tr><th class=\"l\">run</th><th class=\"l\">study</th><th class=\"l\">configuration</th><th class=\"l\">compare</th><th class=\"l\">baseline</th></tr>\n",
        if studies.is_empty() {
            String::new()
        } else {
            format!(
                " The runs of {} are offered; <a href=\"/compare\" id=\"compare-all\">every run</a>.",
                studies
                    .iter()
                    .map(|s| format!("<code>{}</code>", esc(s)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        crate::layout::scroll("the columns to compare"),
    );
    for run in runs
        .iter()
        .filter(|r| studies.is_empty() || studies.contains(r.study_name.as_str()))
    {
        for (idx, name) in names.remove(&run.id).unwrap_or_default().iter().enumerate() {
            let value = format!("{}:{}", run.id, name);
            let ticked = chosen
                .iter()
                .any(|x| *x == value || *x == run.id.to_string());
            let _ = writeln!(
                picker,
                "<tr><td class=\"l\">{run_id}</td><td class=\"l\">{}</td><td class=\"l\"><label for=\"c-{run_id}-{idx}\">{}</label></td><td class=\"l\"><input type=\"checkbox\" name=\"c\" id=\"c-{run_id}-{idx}\" value=\"{v}\"{}></td><td class=\"l\"><input type=\"radio\" name=\"base\" id=\"base-{run_id}-{idx}\" value=\"{v}\"{}></td></tr>",
                esc(&run.study_name),
                esc(name),
                if ticked { " checked" } else { "" },
                if base == value { " checked" } else { "" },
                run_id = run.id,
                v = esc(&value),
            );
        }
    }
    picker.push_str(
        "</table></div>\n<p><button type=\"submit\" id=\"compare-go\">Compare</button></p>\n</form>\n",
    );
    let mut o = String::from("<h1>Compare</h1>\n");
    match comparison(req, store) {
        Ok(Some(report)) => {
            // The comparison first, in the first screenful; the picker
            // folded under it.
            o.push_str(&downloads("/compare/", &compare_query(req), &[]));
            o.push_str("<div id=\"comparison\">\n");
            o.push_str(&render_body(&report));
            o.push_str(
                "</div>\n<details id=\"pick-again\"><summary>Pick other columns</summary>\n",
            );
            o.push_str(&picker);
            o.push_str("</details>\n");
        }
        Ok(None) if chosen.is_empty() => o.push_str(&picker),
        Ok(None) => {
            o.push_str("<p class=\"err\" id=\"compare-error\">Pick at least two columns: two configurations, or two runs.</p>\n");
            o.push_str(&picker);
        }
        Err(Fail(status, msg)) => {
            let mut r = page(
                "compare",
                "compare",
                &format!(
                    "{o}<p class=\"err\" id=\"compare-error\">{}</p>\n{picker}",
                    esc(&msg)
                ),
            );
            r.status = status;
            return Ok(r);
        }
    }
    Ok(page("compare", "compare", &o))
}

fn compare_download(file: &str, req: &Request, store: &Store) -> Result<Response, Fail> {
    let report = comparison(req, store)?.ok_or_else(|| {
        Fail(
            400,
            "pick at least two columns: ?c=RUN:CONFIG&c=RUN:CONFIG[&base=RUN:CONFIG]".into(),
        )
    })?;
    report_file(&report, file, "benchlab-comparison")
}

/// The hosts of `spec`: `RUN` (all of them) or `RUN:HOST`, named
/// `run N: HOST`.
fn hosts_of(spec: &str, store: &Store) -> Result<Vec<HostRow>, Fail> {
    let (run, host) = match spec.split_once(':') {
        Some((r, h)) => (r, Some(h)),
        None => (spec, None),
    };
    let run = run_id(run)
        .map_err(|Fail(s, m)| Fail(s, format!("hosts `{spec}` (RUN or RUN:HOST): {m}")))?;
    store.run(run)?;
    let all = store.hosts(run)?;
    let picked: Vec<HostRow> = match host {
        None => all,
        Some(h) => {
            let names: Vec<String> = all.iter().map(|x| x.name.clone()).collect();
            let found: Vec<HostRow> = all.into_iter().filter(|x| x.name == h).collect();
            if found.is_empty() {
                return Err(Fail(
                    404,
                    format!("run {run} has no host `{h}` (it has: {})", names.join(", ")),
                ));
            }
            found
        }
    };
    Ok(picked
        .into_iter()
        .map(|h| HostRow {
            name: format!("run {run}: {}", h.name),
            ..h
        })
        .collect())
}

/// The hosts picked by `a` and `b`.
fn picked_hosts(req: &Request, store: &Store) -> Result<Vec<HostRow>, Fail> {
    let mut hosts = Vec::new();
    for key in ["a", "b"] {
        if let Some(spec) = req.param(key).filter(|s| !s.is_empty()) {
            hosts.extend(hosts_of(spec, store)?);
        }
    }
    Ok(hosts)
}

fn hosts_page(req: &Request, store: &Store) -> Result<Response, Fail> {
    let mut options = Vec::new();
    let mut host_names = store.host_names()?;
    for run in store.runs()? {
        options.push((
            run.id.to_string(),
            format!("run {}: every host ({})", run.id, run.study_name),
        ));
        for h in host_names.remove(&run.id).unwrap_or_default() {
            options.push((
                format!("{}:{}", run.id, h.name),
                format!("run {}: {} ({})", run.id, h.name, h.roles),
            ));
        }
    }
    let mut o = String::from("<h1>Hosts</h1>\n<form class=\"pick\" method=\"get\" action=\"/hosts\">\n<p>The system configuration of two hosts, or of every host of two runs, side by side; rows that differ are highlighted.</p>\n");
    for (key, label) in [("a", "First"), ("b", "Second")] {
        let current = req.param(key).unwrap_or("");
        let _ = write!(o, "<p><label for=\"hosts-{key}\">{label}:</label> <select name=\"{key}\" id=\"hosts-{key}\"><option value=\"\">—</option>");
        for (v, text) in &options {
            let _ = write!(
                o,
                "<option value=\"{}\"{}>{}</option>",
                esc(v),
                if v == current { " selected" } else { "" },
                esc(text)
            );
        }
        o.push_str("</select></p>\n");
    }
    let only_diff = req.param("d").is_some_and(|d| !d.is_empty() && d != "0");
    let _ = writeln!(
        o,
        "<p><label><input type=\"checkbox\" name=\"d\" value=\"1\" id=\"hosts-diff\"{}> differences only</label></p>",
        if only_diff { " checked" } else { "" }
    );
    o.push_str("<p><button type=\"submit\" id=\"hosts-go\">Show</button></p>\n</form>\n");
    let hosts = match picked_hosts(req, store) {
        Ok(h) => h,
        Err(Fail(status, msg)) => {
            let mut r = page(
                "hosts",
                "hosts",
                &format!("{o}<p class=\"err\" id=\"hosts-error\">{}</p>\n", esc(&msg)),
            );
            r.status = status;
            return Ok(r);
        }
    };
    let picked: Vec<&str> = ["a", "b"]
        .iter()
        .filter_map(|k| req.param(k).filter(|s| !s.is_empty()))
        .collect();
    if hosts.is_empty() && !picked.is_empty() {
        // A run that recorded no hosts (published figures, imported)
        // says so instead of showing nothing.
        let _ = writeln!(
            o,
            "<p class=\"err\" id=\"hosts-error\">{} recorded no hosts{}.</p>",
            esc(&picked
                .iter()
                .map(|p| format!("run {p}"))
                .collect::<Vec<_>>()
                .join(" and ")),
            if picked.iter().any(|p| {
                p.parse::<i64>()
                    .ok()
                    .and_then(|id| store.published_runs().ok().map(|s| s.contains(&id)))
                    .unwrap_or(false)
            }) {
                " (published figures, imported: nothing was measured here)"
            } else {
                ""
            }
        );
    }
    if !hosts.is_empty() {
        let mut q = Vec::new();
        for key in ["a", "b"] {
            if let Some(v) = req.param(key).filter(|s| !s.is_empty()) {
                q.push(format!("{key}={}", encode(v)));
            }
        }
        o.push_str(&downloads("/hosts/", &format!("?{}", q.join("&")), &[]));
        if hosts.len() == 1 && only_diff {
            o.push_str(
                "<p class=\"small\">One host: nothing to differ from; every row is shown.</p>\n",
            );
        }
        o.push_str("<div id=\"hosts\">\n");
        o.push_str(&inventory_html_with(&hosts, only_diff && hosts.len() > 1));
        o.push_str("</div>\n");
    }
    Ok(page("hosts", "hosts", &o))
}

fn hosts_download(file: &str, req: &Request, store: &Store) -> Result<Response, Fail> {
    let hosts = picked_hosts(req, store)?;
    if hosts.is_empty() {
        return Err(Fail(400, "pick hosts: ?a=RUN[:HOST]&b=RUN[:HOST]".into()));
    }
    let table = benchlab_report::build::host_table(&hosts, str::to_string);
    let md = table.as_ref().map(|t| t.markdown()).unwrap_or_default();
    Ok(match file {
        "report.json" => Response::download(
            "application/json",
            "benchlab-hosts.json",
            serde_json::to_string_pretty(&hosts).map_err(|e| Fail(500, e.to_string()))?,
        ),
        "report.md" => Response::download("text/markdown; charset=utf-8", "benchlab-hosts.md", md),
        "report.csv" => Response::download("text/csv; charset=utf-8", "benchlab-hosts.csv", table.as_ref().map(|t| t.csv()).unwrap_or_default()),
        "report.html" => Response::download(
            "text/html; charset=utf-8",
            "benchlab-hosts.html",
            format!(
                "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>benchlab hosts</title><style>{}</style></head><body>\n<h1>System configuration</h1>\n{}</body></html>\n",
                style(),
                inventory_html(&hosts)
            ),
        ),
        other => {
            return Err(Fail(
                404,
                format!("no download `{other}`: report.json, report.csv, report.md or report.html"),
            ))
        }
    })
}
