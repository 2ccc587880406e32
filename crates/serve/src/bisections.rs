//! `/bisect` and `/bisect/N`: the stored bisections (`benchlab bisect`,
//! docs/bisect.md) — the list, and a page per bisection with its ordered
//! versions, every step's evidence (candidate beside bound, the runs of
//! its rounds, the verdict with its interval, the repetitions it rests
//! on), the first bad version with its effect, and where it stands. The
//! steps are replayed from the stored runs by the bisect crate
//! ([`benchlab_bisect::stored`]), in the words `benchlab bisect` prints.

use std::fmt::Write;

use benchlab_bisect::{Outcome, Request, State, Stored};
use benchlab_report::html::esc;
use benchlab_store::{RunStatus, Store, StoreError};

use crate::http::{encode, Response};
use crate::layout::{page, scroll, Fail};

/// A failure of the replay: the store's as the store's, the rest (a
/// stored request this benchlab cannot read) as they are.
fn fail(e: anyhow::Error) -> Fail {
    match e.downcast::<StoreError>() {
        Ok(s) => s.into(),
        Err(e) => Fail(500, format!("{e:#}")),
    }
}

/// The bisected key as `benchlab bisect` takes it (`--key`).
fn key(r: &Request) -> String {
    match &r.host {
        Some(h) => format!("host.{h}.{}", r.param),
        None => format!("workload.{}.{}", r.workload, r.param),
    }
}

/// How it ended, in the words `benchlab bisect` ends with.
fn outcome_text(s: &Stored) -> String {
    let r = &s.request;
    let n = r.versions.len();
    match &s.outcome {
        None => String::new(),
        Some(Outcome::FirstBad { index, .. }) => {
            format!("first bad version: {}", r.version_name(*index))
        }
        Some(Outcome::NoDifference) => "no difference between good and bad".into(),
        Some(Outcome::WrongWayRound) => format!(
            "good is slower than bad: {} is faster than {}",
            r.version_name(n - 1),
            r.version_name(0)
        ),
        Some(Outcome::Undecided { step: 0, .. }) => {
            "undecided: good and bad could not be told apart, nor shown the same".into()
        }
        Some(Outcome::Undecided { step, good, bad }) => format!(
            "undecided at step {step}: the first bad version is after {} and at or before {}",
            r.version_name(*good),
            r.version_name(*bad)
        ),
    }
}

/// The state in words, with what to do about it.
fn state_text(s: &Stored) -> String {
    let id = s.row.id;
    match s.state {
        State::Finished => format!("finished: {}", outcome_text(s)),
        State::Running => "running: a round is being measured".into(),
        State::Interrupted => format!(
            "interrupted in the middle of a round: `benchlab bisect --resume {id}` goes on without repeating a finished round"
        ),
        State::Between => format!(
            "not finished, no round running: stopped between two rounds (`benchlab bisect --resume {id}` goes on), or building the next round's versions"
        ),
    }
}

/// `/bisect`: every bisection, newest first.
pub(crate) fn bisections_page(store: &Store) -> Result<Response, Fail> {
    let mut o = String::from("<h1>Bisections</h1>\n");
    let rows = store.bisections()?;
    let _ = writeln!(
        o,
        "<p id=\"bisections-summary\">{} bisection{}. <code>benchlab bisect</code> finds the first version of an ordered list that made a study's figure worse, each step a stored run of the candidate beside a bound in ABBA blocks (docs/bisect.md).</p>",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" }
    );
    if rows.is_empty() {
        return Ok(page("bisections", "bisect", &o));
    }
    o.push_str(&scroll("bisections"));
    o.push_str("<table id=\"bisections\"><tr><th>bisection</th><th class=\"l\">study</th><th class=\"l\">key</th><th>versions</th><th class=\"l\">state</th><th>steps</th><th class=\"l\">started</th><th class=\"l\">ended</th></tr>\n");
    for row in &rows {
        let id = row.id;
        let cells = match benchlab_bisect::stored(store, id) {
            Ok(Some(s)) => format!(
                "<td class=\"l\">{}</td><td>{}</td><td class=\"l st-{}\" id=\"bisection-state-{id}\">{}</td><td>{}</td>",
                esc(&key(&s.request)),
                s.request.versions.len(),
                s.state.as_str().replace(' ', "-"),
                esc(&state_text(&s)),
                s.steps.len()
            ),
            Ok(None) => continue,
            // One bisection this benchlab cannot read does not hide the
            // others; a store that fails fails the page.
            Err(e) => match e.downcast::<StoreError>() {
                Ok(s) => return Err(s.into()),
                Err(e) => format!(
                    "<td></td><td></td><td class=\"l\" id=\"bisection-state-{id}\">cannot be read: {}</td><td></td>",
                    esc(&format!("{e:#}"))
                ),
            },
        };
        let _ = writeln!(
            o,
            "<tr id=\"bisection-{id}\"><td><a href=\"/bisect/{id}\">{id}</a></td><td class=\"l\"><a href=\"/history?study={}\">{}</a></td>{cells}<td class=\"l when\">{}</td><td class=\"l when\">{}</td></tr>",
            encode(&row.study_name),
            esc(&row.study_name),
            esc(&row.started_at),
            esc(row.ended_at.as_deref().unwrap_or("–")),
        );
    }
    o.push_str("</table></div>\n");
    Ok(page("bisections", "bisect", &o))
}

/// `/bisect/N`.
pub(crate) fn bisection_page(rest: &str, store: &Store) -> Result<Response, Fail> {
    let id = rest
        .trim_end_matches('/')
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            Fail(
                400,
                format!("`{rest}` is not a bisection id (a positive number)"),
            )
        })?;
    let s = benchlab_bisect::stored(store, id)
        .map_err(fail)?
        .ok_or_else(|| Fail(404, format!("no bisection {id} in the store: see /bisect")))?;
    let r = &s.request;
    let n = r.versions.len();
    let mut o = format!(
        "<h1>Bisection {id}: <a href=\"/history?study={}\">{}</a></h1>\n",
        encode(&r.study_name),
        esc(&r.study_name)
    );
    let _ = writeln!(
        o,
        "<p id=\"state\" class=\"st-{}\">{}</p>",
        s.state.as_str().replace(' ', "-"),
        esc(&state_text(&s))
    );
    if let Some(Outcome::FirstBad { index, evidence }) = &s.outcome {
        if let Some(e) = s.steps.get(*evidence) {
            let rev = r.versions[*index]
                .revision
                .as_deref()
                .map(|h| format!(" (revision <code>{}</code>)", esc(h)))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "<p id=\"first-bad\">First bad version: <strong id=\"first-bad-version\">{}</strong>{rev}; its effect: <strong id=\"first-bad-effect\">{}</strong> beside {} (step {}).</p>",
                esc(&r.version_name(*index)),
                esc(&e.step.judgement.effect_text()),
                esc(&r.version_name(e.step.bound)),
                e.step.index
            );
        }
    }
    if let Some(first) = s.steps.first() {
        let _ = writeln!(
            o,
            "<p id=\"good-to-bad\">Good {} to bad {}: {}.</p>",
            esc(&r.version_name(0)),
            esc(&r.version_name(n - 1)),
            esc(&first.step.judgement.effect_text())
        );
    }
    let _ = writeln!(
        o,
        "<p id=\"asked\">Study file <code>{}</code>, workload <code>{}</code>, metric <code>{}</code> ({} is better), key <code>{}</code>: {n} versions; at most {} steps of up to {} rounds, {} repetitions of each side per round in {} ABBA blocks, margin ±{:.2} %. Started {}{}.</p>",
        esc(&r.study_file),
        esc(&r.workload),
        esc(&r.metric),
        r.settings.better.as_str(),
        esc(&key(r)),
        benchlab_bisect::max_steps(n),
        r.settings.rounds,
        r.repetitions,
        r.blocks,
        r.settings.margin_pct,
        esc(&s.row.started_at),
        s.row
            .ended_at
            .as_deref()
            .map(|e| format!(", ended {}", esc(e)))
            .unwrap_or_default()
    );
    versions_table(&mut o, &s);
    steps_table(&mut o, &s);
    open_round(&mut o, &s, store)?;
    Ok(page(
        &format!("bisection {id}: {}", r.study_name),
        "bisect",
        &o,
    ))
}

/// The ordered versions, each with what the steps found of it.
fn versions_table(o: &mut String, s: &Stored) {
    let r = &s.request;
    let n = r.versions.len();
    let first_bad = match &s.outcome {
        Some(Outcome::FirstBad { index, .. }) => Some(*index),
        _ => None,
    };
    // Git versions have revisions; values are their own names.
    let git = r.versions.iter().any(|v| v.revision.is_some());
    o.push_str("<h2>Versions</h2>\n");
    o.push_str(&scroll("versions"));
    let _ = writeln!(
        o,
        "<table id=\"versions\"><tr><th>#</th><th class=\"l\">version</th>{}<th class=\"l\">found</th></tr>",
        if git { "<th class=\"l\">revision</th>" } else { "" }
    );
    for (i, v) in r.versions.iter().enumerate() {
        let mut found: Vec<String> = Vec::new();
        if i == 0 {
            found.push("good (given)".into());
        }
        if i == n - 1 {
            found.push("bad (given)".into());
        }
        for e in &s.steps {
            if e.step.candidate == i && e.step.index > 0 {
                found.push(esc(&format!(
                    "step {}: {}",
                    e.step.index,
                    e.step.decision.words()
                )));
            }
        }
        if first_bad == Some(i) {
            found.push("<strong>the first bad version</strong>".into());
        }
        let revision = match (git, &v.revision) {
            (true, Some(h)) => format!("<td class=\"l\"><code>{}</code></td>", esc(h)),
            (true, None) => "<td></td>".into(),
            (false, _) => String::new(),
        };
        let _ = writeln!(
            o,
            "<tr id=\"version-{i}\"><td>{i}</td><td class=\"l\">{}</td>{revision}<td class=\"l\">{}</td></tr>",
            esc(&v.label),
            found.join("; ")
        );
    }
    o.push_str("</table></div>\n");
}

/// Every finished step: candidate beside bound, its runs, the verdict
/// with its interval, the repetitions it rests on.
fn steps_table(o: &mut String, s: &Stored) {
    let r = &s.request;
    o.push_str("<h2>Steps</h2>\n");
    if s.steps.is_empty() {
        o.push_str("<p id=\"steps-none\">No step has finished yet.</p>\n");
        return;
    }
    o.push_str(&scroll("steps"));
    o.push_str("<table id=\"steps\"><tr><th>step</th><th class=\"l\">candidate</th><th class=\"l\">bound</th><th class=\"l\">effect [95 % interval]</th><th>margin</th><th>repetitions (bound / candidate)</th><th>rounds</th><th class=\"l\">runs</th><th class=\"l\">verdict</th><th class=\"l\">decision</th></tr>\n");
    for e in &s.steps {
        let st = &e.step;
        let k = st.index;
        let runs = e
            .runs
            .iter()
            .map(|run| format!("<a href=\"/run/{run}\" id=\"step-{k}-run-{run}\">{run}</a>"))
            .collect::<Vec<_>>()
            .join(", ");
        let mde = st
            .judgement
            .mde_pct
            .map(|m| format!(" (smallest detectable ±{m:.2} %)"))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "<tr id=\"step-{k}\"><td>{k}</td><td class=\"l\" id=\"step-{k}-candidate\">{}</td><td class=\"l\" id=\"step-{k}-bound\">{}</td><td class=\"l\" id=\"step-{k}-effect\">{}</td><td id=\"step-{k}-margin\">±{:.2} %</td><td id=\"step-{k}-n\">{} / {}</td><td id=\"step-{k}-rounds\">{}</td><td class=\"l\">{runs}</td><td class=\"l {}\" id=\"step-{k}-verdict\">{}{}</td><td class=\"l\" id=\"step-{k}-decision\">{}</td></tr>",
            esc(&r.version_name(st.candidate)),
            esc(&r.version_name(st.bound)),
            esc(&st.judgement.effect_text()),
            st.margin_pct,
            st.judgement.n.0,
            st.judgement.n.1,
            st.rounds,
            match st.judgement.verdict {
                benchlab_bisect::StepVerdict::Better => "better",
                benchlab_bisect::StepVerdict::Worse => "worse",
                benchlab_bisect::StepVerdict::NoDifference => "equivalent",
                benchlab_bisect::StepVerdict::Undecided => "undecided",
            },
            st.judgement.verdict.words(),
            esc(&mde),
            esc(st.decision.words()),
        );
    }
    o.push_str("</table></div>\n");
}

/// The round being measured or cut short, with its run's progress.
fn open_round(o: &mut String, s: &Stored, store: &Store) -> Result<(), Fail> {
    let Some(open) = &s.open else {
        return Ok(());
    };
    let r = &s.request;
    let run = open.round.run_id;
    let progress = benchlab_report::progress(store, run)?
        .map(|p| format!(", {} of {} repetitions stored", p.done, p.total))
        .unwrap_or_default();
    let status = match open.run_status {
        RunStatus::Running if s.state == State::Interrupted => "its controller is gone",
        RunStatus::Running => "running",
        RunStatus::Interrupted => "interrupted",
        RunStatus::Failed => "failed",
        RunStatus::Completed => "completed",
    };
    let _ = writeln!(
        o,
        "<p id=\"open-round\">Step {} round {}: {} beside {}, <a href=\"/run/{run}\" id=\"open-round-run\">run {run}</a> ({status}{progress}).</p>",
        open.round.step,
        open.round.round,
        esc(&r.version_name(open.round.candidate as usize)),
        esc(&r.version_name(open.round.bound as usize)),
    );
    Ok(())
}

/// The line a run's page shows when the run is a round of bisections.
pub(crate) fn run_note(store: &Store, run_id: i64) -> Result<String, Fail> {
    let mut o = String::new();
    for round in store.bisection_rounds_of_run(run_id)? {
        let b = round.bisection_id;
        let _ = writeln!(
            o,
            "<p class=\"bisection-of-run\" id=\"bisection-of-run-{b}\">This run is round {} of step {} of <a href=\"/bisect/{b}\">bisection {b}</a>: version #{} beside the bound #{}.</p>",
            round.round, round.step, round.candidate, round.bound
        );
    }
    Ok(o)
}
