//! `benchlab bisect`: the command line's side of a bisection: the
//! request checked, each step's evidence printed as it finishes, the
//! outcome in words. The narrowing and the runs are `benchlab_bisect`'s.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use benchlab_bisect::{
    Ask, Bisector, Finished, Interrupted, Outcome, Request, Source, StepEvidence,
};

use crate::open::{open_store, upgrade_store};
use crate::progress::Printer;
use crate::{registry, EXIT_INTERRUPTED};

/// What `benchlab bisect` was asked, as parsed.
pub(crate) struct BisectArgs {
    /// A new bisection's request, or `None` with `resume`.
    pub(crate) ask: Option<Ask>,
    /// Go on with this stored bisection.
    pub(crate) resume: Option<i64>,
}

/// Exit code of a bisection that could not decide within its rounds.
pub const EXIT_UNDECIDED: i32 = 2;

fn interval(j: &benchlab_bisect::Judgement) -> String {
    j.effect_text()
}

/// The smallest effect an undecided step's data could have shown.
fn detectable(j: &benchlab_bisect::Judgement) -> String {
    match j.mde_pct {
        Some(m) => format!(" (the smallest effect detectable with this spread: ±{m:.2} %)"),
        None => String::new(),
    }
}

/// One step's evidence in a line.
pub(crate) fn step_line(r: &Request, e: &StepEvidence) -> String {
    let s = &e.step;
    let decision = s.decision.words();
    format!(
        "step {}: {} beside {}: {} (n {}/{}, margin ±{:.2} %, {} round{}, run{} {}): {}{} → {decision}",
        s.index,
        r.version_name(s.candidate),
        r.version_name(s.bound),
        interval(&s.judgement),
        s.judgement.n.1,
        s.judgement.n.0,
        s.margin_pct,
        s.rounds,
        if s.rounds == 1 { "" } else { "s" },
        if e.runs.len() == 1 { "" } else { "s" },
        e.runs
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        s.judgement.verdict.words(),
        detectable(&s.judgement),
    )
}

fn header(r: &Request) -> String {
    let n = r.versions.len();
    format!(
        "study `{}`, workload `{}`, metric `{}` ({} is better), key `{}`: {n} versions from good {} to bad {}; at most {} steps of up to {} rounds, {} repetitions of each side per round in {} ABBA blocks",
        r.study_name,
        r.workload,
        r.metric,
        r.settings.better.as_str(),
        r.param,
        r.version_name(0),
        r.version_name(n - 1),
        benchlab_bisect::max_steps(n),
        r.settings.rounds,
        r.repetitions,
        r.blocks,
    )
}

/// The outcome in words and the exit code.
fn conclusion(f: &Finished) -> Result<(String, i32)> {
    let r = &f.request;
    let first = &f.steps[0].step.judgement;
    let runs: usize = f.steps.iter().map(|e| e.runs.len()).sum();
    let tally = format!(
        "{} step{}, {runs} run{} (bisection {})",
        f.steps.len(),
        if f.steps.len() == 1 { "" } else { "s" },
        if runs == 1 { "" } else { "s" },
        f.id
    );
    Ok(match &f.outcome {
        Outcome::FirstBad { index, evidence } => {
            let e = &f.steps[*evidence].step;
            let rev = r.versions[*index]
                .revision
                .as_deref()
                .map(|h| format!(" (revision {h})"))
                .unwrap_or_default();
            (
                format!(
                    "first bad version: {}{rev}\neffect: {} beside {} (step {}); good {} to bad {}: {}\n{tally}\n",
                    r.version_name(*index),
                    interval(&e.judgement),
                    r.version_name(e.bound),
                    e.index,
                    r.version_name(0),
                    r.version_name(r.versions.len() - 1),
                    interval(first),
                ),
                0,
            )
        }
        Outcome::NoDifference => (
            format!(
                "no difference between good and bad: {} within ±{:.2} %\n{tally}\n",
                interval(first),
                f.steps[0].step.margin_pct
            ),
            0,
        ),
        Outcome::Undecided { step: 0, .. } => (
            format!(
                "undecided: good and bad could not be told apart, nor shown the same, in {} rounds: {}{}; more --rounds or --repetitions, or a quieter machine, may decide\n{tally}\n",
                f.steps[0].step.rounds,
                interval(first),
                detectable(first),
            ),
            EXIT_UNDECIDED,
        ),
        Outcome::Undecided { step, good, bad } => {
            let s = &f.steps[*step].step;
            (
                format!(
                    "undecided at step {step}: {} beside {} could not be called as slow as bad or not in {} rounds: {} against a margin of ±{:.2} %{}; the first bad version is after {} and at or before {}; more --rounds or --repetitions, or a quieter machine, may decide\n{tally}\n",
                    r.version_name(s.candidate),
                    r.version_name(s.bound),
                    s.rounds,
                    interval(&s.judgement),
                    s.margin_pct,
                    detectable(&s.judgement),
                    r.version_name(*good),
                    r.version_name(*bad),
                ),
                EXIT_UNDECIDED,
            )
        }
        Outcome::WrongWayRound => bail!(
            "good is slower than bad: {} measured {} beside good {}; give --good and --bad the other way round (bisection {})",
            r.version_name(r.versions.len() - 1),
            interval(first),
            r.version_name(0),
            f.id
        ),
    })
}

/// `benchlab bisect …`
pub(crate) fn bisect(db: &Path, args: BisectArgs) -> Result<i32> {
    let reg = registry();
    let mut store = open_store(db)?;
    upgrade_store(&store);
    let request = match &args.ask {
        Some(ask) => Some(benchlab_bisect::prepare(ask, &reg)?),
        None => None,
    };
    let study_file = match (&request, args.resume) {
        (Some(r), _) => r.study_file.clone(),
        (None, Some(id)) => match store.bisection(id)? {
            Some(b) => b.study_name,
            None => bail!("--resume {id}: no bisection {id} in the store"),
        },
        (None, None) => bail!("give a study file, or --resume ID"),
    };
    let _lock = benchlab_engine::RunLock::acquire(&study_file)?;
    let interrupt = crate::runner::interrupt_flag()?;
    let mut printer = Printer::default();
    let mut out = std::io::stdout();
    let mut on_step = |r: &Request, e: &StepEvidence| {
        if e.step.index == 0 {
            _ = writeln!(out, "{}", header(r));
        }
        _ = writeln!(out, "{}", step_line(r, e));
        _ = out.flush();
    };
    let bisector = Bisector {
        store: &mut store,
        registry: &reg,
        interrupt: &interrupt,
        observer: &mut printer,
        on_step: &mut on_step,
    };
    let result = match (request, args.resume) {
        (Some(r), _) => bisector.start(r),
        (None, Some(id)) => bisector.resume(id),
        (None, None) => unreachable!("checked above"),
    };
    let finished = match result {
        Ok(f) => f,
        Err(e) => {
            if let Some(i) = e.downcast_ref::<Interrupted>() {
                eprintln!("benchlab: {i}");
                return Ok(EXIT_INTERRUPTED);
            }
            return Err(e);
        }
    };
    let (text, code) = conclusion(&finished)?;
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(code)
}

/// The versions' source from the command line's options.
pub(crate) struct SourceArgs {
    pub(crate) repo: Option<PathBuf>,
    pub(crate) good: Option<String>,
    pub(crate) bad: Option<String>,
    pub(crate) build: Option<String>,
    pub(crate) builds: Option<PathBuf>,
    pub(crate) values: Vec<String>,
}

impl SourceArgs {
    pub(crate) fn source(self) -> Result<Source> {
        match self.repo {
            Some(repo) => match (self.good, self.bad, self.build) {
                (Some(good), Some(bad), Some(build)) => Ok(Source::Git {
                    repo,
                    good,
                    bad,
                    build,
                    builds: self.builds,
                }),
                _ => bail!("--repo needs --good REV, --bad REV and --build COMMAND"),
            },
            None if !self.values.is_empty() => Ok(Source::Values(self.values)),
            None => bail!(
                "say what to bisect: --repo DIR --good REV --bad REV --build COMMAND, or --key workload.NAME.PARAM --values GOOD,…,BAD"
            ),
        }
    }
}
