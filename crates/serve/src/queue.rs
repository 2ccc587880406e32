//! `/queue`: the lab's queue (docs/lab.md), as `benchlab queue` lists
//! it — every entry with its state, worker, heartbeat and lease, the
//! progress of its run while it runs, why earlier attempts ended and why
//! workers pass it over, and on the newest entry of a periodic study the
//! newest change point of its series — and the workers the store has
//! heard of, each with when it was last heard and the entry and run it
//! holds.

use std::collections::BTreeMap;
use std::fmt::Write;

use benchlab_report::html::esc;
use benchlab_store::{EntryStatus, Store};

use crate::http::{encode, Response};
use crate::layout::{page, Fail};
use crate::runs::progress_text;

/// `/queue`.
pub(crate) fn queue_page(store: &Store) -> Result<Response, Fail> {
    let mut o = String::from("<h1>Queue</h1>\n");
    let entries = store.queue_entries()?;
    let waits = store.queue_waits()?;
    let newest = benchlab_store::newest_periodic(&entries);
    let mut changes: BTreeMap<&str, String> = BTreeMap::new();
    for study in newest.keys() {
        let found = benchlab_report::history::newest_change(store, study)
            .map_err(|e| Fail(500, e.to_string()))?;
        if let Some(c) = found {
            changes.insert(study, c);
        }
    }
    let running = entries
        .iter()
        .filter(|e| e.status == EntryStatus::Running)
        .count();
    let queued = entries
        .iter()
        .filter(|e| e.status == EntryStatus::Queued)
        .count();
    let _ = writeln!(
        o,
        "<p id=\"queue-summary\">{} entr{}: {running} running, {queued} queued. Workers take the queued entries by priority, oldest first, each with its hosts leased across the lab (<code>benchlab queue</code> lists the same).</p>",
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" }
    );
    if entries.is_empty() {
        o.push_str("<p id=\"queue-empty\">The queue is empty (<code>benchlab submit STUDY</code> adds to it).</p>\n");
        return Ok(page("queue", "queue", &o));
    }
    // The running entries' progress, read once for both tables.
    let mut progress: BTreeMap<i64, String> = BTreeMap::new();
    for e in entries.iter().filter(|e| e.status == EntryStatus::Running) {
        if let Some(r) = e.run_id {
            progress.insert(e.id, progress_text(benchlab_report::progress(store, r)?));
        }
    }
    workers_table(&mut o, store, &entries, &progress)?;
    o.push_str("<h2>Entries</h2>\n<table id=\"queue\"><tr><th>entry</th><th>state</th><th>priority</th><th>study</th><th>run</th><th>progress</th><th>worker</th><th>heartbeat / lease</th><th>every</th><th>notes</th></tr>\n");
    for e in &entries {
        let id = e.id;
        let st = e.status.as_str();
        let run = match e.run_id {
            Some(r) => format!("<a href=\"/run/{r}\">{r}</a>"),
            None => "–".into(),
        };
        let lease = esc(&e.lease_text());
        let mut notes: Vec<String> = e.reasons.lines().map(esc).collect();
        notes.extend(
            waits
                .iter()
                .filter(|w| w.entry_id == id)
                .map(|w| format!("waiting: {} ({:.0} s ago)", esc(&w.reason), w.age_s)),
        );
        if newest.get(e.study_name.as_str()) == Some(&id) {
            if let Some(c) = changes.get(e.study_name.as_str()) {
                notes.push(format!(
                    "<strong class=\"change\" id=\"change-{id}\">change point: {}</strong> (<a href=\"/history?study={}\">its history</a>)",
                    esc(c),
                    encode(&e.study_name)
                ));
            }
        }
        let _ = writeln!(
            o,
            "<tr id=\"entry-{id}\"><td>{id}</td><td class=\"l st-{st}\" id=\"state-{id}\">{st}</td><td>{}</td><td class=\"l\"><a href=\"/history?study={}\">{}</a></td><td>{run}</td><td class=\"l\" id=\"progress-{id}\">{}</td><td class=\"l\">{}</td><td class=\"l\">{lease}</td><td>{}</td><td class=\"l\" id=\"notes-{id}\">{}</td></tr>",
            e.priority,
            encode(&e.study_name),
            esc(&e.study_name),
            esc(progress.get(&id).map(String::as_str).unwrap_or("")),
            esc(e.worker.as_deref().unwrap_or("–")),
            e.every_s.map(|s| format!("{s} s")).unwrap_or_default(),
            notes.join("<br>")
        );
    }
    o.push_str("</table>\n");
    Ok(page("queue", "queue", &o))
}

/// The workers the store has heard of: when last, and the entry, run and
/// progress each holds now.
fn workers_table(
    o: &mut String,
    store: &Store,
    entries: &[benchlab_store::QueueEntry],
    progress: &BTreeMap<i64, String>,
) -> Result<(), Fail> {
    let workers = store.queue_workers()?;
    o.push_str("<h2>Workers</h2>\n");
    if workers.is_empty() {
        o.push_str("<p id=\"workers-none\">No worker has claimed an entry or looked at one yet (<code>benchlab worker</code> starts one).</p>\n");
        return Ok(());
    }
    o.push_str("<p id=\"workers-about\">Every worker that has claimed an entry or passed one over. A worker writes to the store when it claims, at each heartbeat (a third of its lease) and when it ends an entry or passes one over: an idle worker is last heard at its last claim or look. A plain <code>benchlab run</code> is the worker <code>run:MACHINE:PID</code> of its own entry.</p>\n");
    o.push_str("<table id=\"workers\"><tr><th class=\"l\">worker</th><th>last heard</th><th>claims</th><th>entry</th><th class=\"l\">study</th><th>run</th><th class=\"l\">progress</th><th class=\"l\">heartbeat / lease</th></tr>\n");
    for (i, w) in workers.iter().enumerate() {
        let held = entries.iter().find(|e| {
            e.status == EntryStatus::Running && e.worker.as_deref() == Some(w.worker.as_str())
        });
        let (entry, study, run, prog, lease) = match held {
            Some(e) => (
                format!("<a href=\"#entry-{0}\">{0}</a>", e.id),
                format!(
                    "<a href=\"/history?study={}\">{}</a>",
                    encode(&e.study_name),
                    esc(&e.study_name)
                ),
                match e.run_id {
                    Some(r) => format!("<a href=\"/run/{r}\" id=\"worker-run-{i}\">{r}</a>"),
                    // Recorded at the first heartbeat after the run began.
                    None => "not yet known".into(),
                },
                esc(progress.get(&e.id).map(String::as_str).unwrap_or("")),
                esc(&e.lease_text()),
            ),
            None => (
                "idle".into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ),
        };
        let _ = writeln!(
            o,
            "<tr id=\"worker-{i}\"><td class=\"l\" id=\"worker-name-{i}\">{}</td><td id=\"worker-heard-{i}\">{:.0} s ago</td><td id=\"worker-claims-{i}\">{}</td><td id=\"worker-entry-{i}\">{entry}</td><td class=\"l\">{study}</td><td>{run}</td><td class=\"l\" id=\"worker-progress-{i}\">{prog}</td><td class=\"l\">{lease}</td></tr>",
            esc(&w.worker),
            w.last_heard_s.max(0.0),
            w.claims,
        );
    }
    o.push_str("</table>\n");
    Ok(())
}
