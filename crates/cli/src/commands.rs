//! The commands other than the runner itself.

use std::io::Write;

use anyhow::{bail, Context, Result};
use benchlab_core::param::{ParamDefault, ParamKind};
use benchlab_core::plan::{Plan, RunOptions, QUICK_SCALE};
use benchlab_core::units::{format_duration, format_size};
use benchlab_report::{load, RunSelection};

use crate::open::{load_part, open_read, open_store, upgrade_store};
use crate::StoreAction;

use crate::{registry, runner, Cli, Command, EXIT_INTERRUPTED, EXIT_POINTS_FAILED};

pub(crate) fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Agent {
            listen,
            key_file,
            once,
            ..
        } => {
            if let Some(addr) = listen {
                let path = key_file.expect("clap requires --key-file with --listen");
                let key = benchlab_agent::channel::load_key(&path)?;
                benchlab_agent::listen::listen(addr, key, &registry(), once)
                    .with_context(|| format!("agent listening on {addr}"))?;
                return Ok(0);
            }
            // Ctrl-C at a terminal must not kill an agent mid-point: the
            // controller stops agents itself (they are in their own process
            // group too).
            // SAFETY: setting a signal disposition to SIG_IGN is always sound.
            unsafe {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
            }
            benchlab_agent::server::serve_stdio(&registry()).context("agent session")?;
            Ok(0)
        }
        Command::Testbed { action } => crate::testbed_cmd::testbed(action),
        Command::Serve {
            listen,
            allow_host,
            token_file,
        } => crate::serve_cmd::serve(&cli.db, &listen, &allow_host, token_file.as_ref()),
        Command::Relay {
            listen,
            to,
            delay_ms,
            protocol,
        } => crate::testbed_cmd::relay(listen, to, delay_ms, &protocol),
        Command::Inventory { json } => {
            let inv = benchlab_inventory::collect();
            let text = if json {
                serde_json::to_string_pretty(&inv)? + "\n"
            } else {
                benchlab_inventory::render_text(&inv)
            };
            std::io::stdout().write_all(text.as_bytes())?;
            Ok(0)
        }
        Command::Restore { study, hosts } => crate::envcmd::restore(study.as_deref(), &hosts),
        Command::Profile { action } => crate::envcmd::profile(action),
        Command::LoadWorker { index, dir } => benchlab_env::load::worker_main(index, &dir),
        Command::GuestInit => benchlab_guest::init::run(),
        Command::GuestAttach { socket, argv } => benchlab_guest::mux::attach(&socket, &argv),
        Command::Workloads => {
            let mut out = String::new();
            for w in registry().all() {
                out.push_str(&format!("{} — {}\n", w.kind(), w.summary()));
                for p in w.params() {
                    let default = match p.default {
                        ParamDefault::Unset => "unset".to_string(),
                        ParamDefault::Study => "from [defaults]".to_string(),
                        ParamDefault::Int(i) if p.kind == ParamKind::Bytes => format_size(i as u64),
                        ParamDefault::Int(i) => i.to_string(),
                        ParamDefault::Float(f) => f.to_string(),
                        ParamDefault::Bool(b) => b.to_string(),
                        ParamDefault::Str(s) => s.to_string(),
                    };
                    out.push_str(&format!(
                        "    {:<16} {} (default {default})\n        {}\n",
                        p.name,
                        p.kind.describe(),
                        p.help
                    ));
                }
            }
            std::io::stdout().write_all(out.as_bytes())?;
            Ok(0)
        }
        Command::Check {
            study,
            quick,
            scale,
            only,
            design,
            hosts,
        } => {
            let reg = registry();
            let mut s = load_part(&study, &reg, &hosts, &only)?;
            if let Some(d) = design {
                s.set_design(d)?;
            }
            crate::envcmd::check_profiles(&s)?;
            let opts = options(quick, scale)?;
            s.check_budget(&reg, opts)?;
            let plan = Plan::new(&s, &reg, opts);
            writeln!(
                std::io::stdout(),
                "{}: study `{}` is valid: {} configuration(s), {} workload(s), {} points, {} repetitions to run, about {}",
                study.display(),
                s.name,
                s.configurations.len(),
                s.workloads.len(),
                plan.points.len(),
                plan.units.len(),
                format_duration(plan.expected_s(&plan.units))
            )?;
            for line in s.left_out.lines() {
                writeln!(std::io::stdout(), "  {line}")?;
            }
            for w in &s.workloads {
                let n: usize = benchlab_core::plan::planned_points(
                    w,
                    reg.get(&w.kind).expect("study validated"),
                )
                .len();
                writeln!(
                    std::io::stdout(),
                    "  workload {} ({}): {} point(s) × {} repetition(s); rows: {}",
                    w.name,
                    w.kind,
                    n,
                    w.repetitions,
                    w.rows
                )?;
                if let Some(cw) = benchlab_wl_command::command_workload(&w.kind) {
                    let mut missing: Vec<String> = w
                        .points()
                        .iter()
                        .filter_map(|p| cw.missing_here(p))
                        .collect();
                    missing.dedup();
                    for m in missing {
                        writeln!(
                            std::io::stdout(),
                            "    on this machine {m}; its points are skipped on a host without it"
                        )?;
                    }
                }
            }
            writeln!(std::io::stdout(), "  order: {}", s.order_text())?;
            for line in crate::design::check_lines(&s, &reg, opts) {
                writeln!(std::io::stdout(), "{line}")?;
            }
            for c in s.configurations.iter().filter(|c| !c.hosts.is_empty()) {
                let moved: Vec<String> =
                    c.hosts.iter().map(|(a, b)| format!("{a} → {b}")).collect();
                writeln!(
                    std::io::stdout(),
                    "  configuration {}: runs on other hosts: {}",
                    c.name,
                    moved.join(", ")
                )?;
            }
            if !s.steps.is_empty() {
                use benchlab_core::study::StepStatus;
                let count =
                    |f: fn(&StepStatus) -> bool| s.steps.iter().filter(|x| f(&x.status)).count();
                writeln!(
                    std::io::stdout(),
                    "  steps of the reproduced study on record: {} ({} applied, {} approximated, {} not possible here)",
                    s.steps.len(),
                    count(|x| matches!(x, StepStatus::Applied(_))),
                    count(|x| matches!(x, StepStatus::Approximated(_))),
                    count(|x| matches!(x, StepStatus::NotPossible(_))),
                )?;
            }
            Ok(0)
        }
        Command::Run {
            study,
            resume,
            until_decided,
            max_repetitions,
            design,
            quick,
            scale,
            aa,
            restore_first,
            only,
            hosts,
            term,
        } => {
            let reg = registry();
            // A run may make the store; as the first writing command on
            // an older store it upgrades it (an older run it resumes
            // needs its plan).
            let mut store = open_store(&cli.db)?;
            upgrade_store(&store);
            let study = match resume {
                Some(id) => benchlab_engine::stored_plan(&store, &reg, id)?.study,
                None => {
                    let path = study.expect("clap requires a study without --resume");
                    let mut s = load_part(&path, &reg, &hosts, &only)?;
                    if aa {
                        s.add_control()?;
                    }
                    if let Some(d) = design {
                        s.set_design(d)?;
                    }
                    crate::envcmd::check_profiles(&s)?;
                    s
                }
            };
            let action = match resume {
                Some(id) if until_decided => runner::Action::UntilDecided(id, max_repetitions),
                Some(id) => runner::Action::Resume(id),
                None => runner::Action::Start(&study, options(quick, scale)?),
            };
            let outcome = execute(&mut store, &reg, &study, action, restore_first, true)?;
            let report = load(&store, &RunSelection::Run(outcome.run_id))?;
            let text = benchlab_report::render_with(
                &report,
                benchlab_report::Format::Table,
                term.layout(),
            );
            std::io::stdout().write_all(text.as_bytes())?;
            // Within the summary's width, as the lines above it; the
            // store's path is never cut.
            let mut done = String::new();
            benchlab_report::terminal::wrap_whole(
                &format!(
                    "run {} {} (stored in {}; `benchlab show {}` prints it again{})",
                    outcome.run_id,
                    outcome.status_text(),
                    benchlab_store::Target::from_path(&cli.db),
                    outcome.run_id,
                    if outcome.interrupted {
                        format!(", `benchlab run --resume {}` continues it", outcome.run_id)
                    } else {
                        String::new()
                    }
                ),
                "benchlab: ",
                "  ",
                term.layout().width,
                &mut done,
            );
            eprint!("{done}");
            Ok(if outcome.interrupted {
                EXIT_INTERRUPTED
            } else if outcome.failed > 0 || outcome.stopped {
                EXIT_POINTS_FAILED
            } else {
                0
            })
        }
        Command::Bisect {
            study,
            repo,
            good,
            bad,
            build,
            builds,
            key,
            values,
            metric,
            margin,
            rounds,
            repetitions,
            blocks,
            resume,
        } => {
            let ask = match study {
                Some(study) => Some(benchlab_bisect::Ask {
                    study,
                    key,
                    metric,
                    source: crate::bisect_cmd::SourceArgs {
                        repo,
                        good,
                        bad,
                        build,
                        builds,
                        values,
                    }
                    .source()?,
                    margin_pct: margin,
                    rounds,
                    repetitions,
                    blocks,
                }),
                None => None,
            };
            crate::bisect_cmd::bisect(&cli.db, crate::bisect_cmd::BisectArgs { ask, resume })
        }
        Command::Store {
            action: StoreAction::Upgrade,
        } => {
            let store = open_store(&cli.db)?;
            let runs = crate::open::upgrade_runs(&store)?;
            writeln!(
                std::io::stdout(),
                "{}: schema version {}, {}",
                store.target(),
                store.schema_version()?,
                if runs.is_empty() {
                    "every run readable by this benchlab".to_string()
                } else {
                    format!(
                        "upgraded run(s) {}",
                        runs.iter()
                            .map(|r| r.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            )?;
            Ok(0)
        }
        Command::List => {
            let store = open_read(&cli.db)?;
            let runs = store.runs()?;
            if runs.is_empty() {
                writeln!(
                    std::io::stdout(),
                    "no runs in {}",
                    benchlab_store::Target::from_path(&cli.db)
                )?;
            }
            for r in runs {
                let samples = store.samples(r.id)?;
                let ok = samples
                    .iter()
                    .filter(|s| s.status == benchlab_store::SampleStatus::Ok)
                    .count();
                writeln!(
                    std::io::stdout(),
                    "{:>4}  {:<12} {:<24} {}  {} ok / {} recorded{}",
                    r.id,
                    format!("{:?}", r.status).to_lowercase(),
                    r.study_name,
                    r.started_at,
                    ok,
                    samples.len(),
                    if store
                        .configurations(r.id)?
                        .iter()
                        .any(benchlab_report::import::is_published)
                    {
                        "  (published, not measured)"
                    } else if r.options.quick || r.options.scale != 1.0 {
                        "  (trial)"
                    } else {
                        ""
                    }
                )?;
            }
            Ok(0)
        }
        Command::Compare {
            specs,
            baseline,
            fail_on_regression,
            format,
            term,
        } => crate::report_cmd::compare(
            &cli.db,
            &specs,
            baseline.as_deref(),
            fail_on_regression,
            (format.into(), term.layout()),
        ),
        Command::Report {
            runs,
            html,
            md,
            json,
            csv,
        } => crate::report_cmd::report(
            &cli.db,
            &runs,
            &crate::report_cmd::Outputs {
                html,
                md,
                json,
                csv,
            },
        ),
        Command::Copy { from, to, runs } => {
            crate::copy_cmd::copy(from.as_deref().unwrap_or(&cli.db), &to, &runs)
        }
        Command::Import { file, name } => {
            crate::import_cmd::import(&cli.db, &file, name.as_deref())
        }
        Command::History {
            study,
            fail_on_change,
            since,
            significance,
            min_segment,
        } => {
            if !(significance > 0.0 && significance <= 1.0) {
                bail!("--significance {significance}: expected a p-value in (0, 1]");
            }
            if min_segment < 2 {
                bail!("--min-segment {min_segment}: a segment needs at least 2 runs");
            }
            let options = benchlab_stats::ChangePointOptions {
                significance,
                min_segment,
                ..Default::default()
            };
            crate::history_cmd::history(
                &cli.db,
                &crate::history_cmd::HistoryArgs {
                    study: &study,
                    fail_on_change,
                    since,
                    options,
                },
            )
        }
        Command::Submit {
            study,
            every,
            priority,
            hosts,
        } => crate::lab_cmd::submit(&cli.db, &study, every.as_deref(), priority, &hosts),
        Command::Queue => crate::lab_cmd::queue(&cli.db),
        Command::Cancel { id } => crate::lab_cmd::cancel(&cli.db, id),
        Command::Worker {
            name,
            once,
            max_entries,
            until_empty,
            lease,
            poll,
            hosts,
        } => crate::lab_cmd::worker(
            &cli.db,
            &crate::lab_cmd::WorkerArgs {
                name,
                max_entries: if once { Some(1) } else { max_entries },
                until_empty,
                lease,
                poll,
                hosts,
            },
        ),
        Command::Show { run, format, term } => {
            let store = open_read(&cli.db)?;
            let id = match run {
                Some(id) => id,
                None => store.latest_run()?.context("the store has no runs yet")?,
            };
            let report = load(&store, &RunSelection::Run(id))?;
            let text = benchlab_report::render_with(&report, format.into(), term.layout());
            std::io::stdout().write_all(text.as_bytes())?;
            Ok(0)
        }
    }
}

/// A new run with these options, or the resumption of a stored one.
/// Runs a study as `benchlab run` does, for `run` and for a lab's worker
/// alike: the controller's run lock, generated service passwords, the
/// study's own test bed brought up and taken down, and the engine's run
/// (journal, restore, every repetition committed as it finishes).
pub(crate) fn execute(
    store: &mut benchlab_store::Store,
    reg: &benchlab_core::Registry,
    study: &benchlab_core::study::Study,
    what: runner::Action<'_>,
    restore_first: bool,
    by_hand: bool,
) -> Result<benchlab_engine::Outcome> {
    // A new run's budget against its round at its scale, before
    // anything is locked or leased (for `run` and a lab worker alike).
    if let runner::Action::Start(s, opts) = &what {
        s.check_budget(reg, *opts)?;
    }
    // One run at a time on this controller; then the study's own
    // test bed, unless the user brought it up.
    let _lock = benchlab_engine::RunLock::acquire(&study.file)?;
    // A plain run leases its hosts in the store as a worker's claim
    // does (a worker's are leased already): a host is in one run at a
    // time across the lab, whoever started it.
    let hold = if by_hand {
        // A run that cannot be continued says so before its hosts are
        // leased (a live run holds them: its own refusal is clearer).
        match &what {
            runner::Action::Resume(id) => benchlab_engine::refuse_reopen(store, *id, false)?,
            runner::Action::UntilDecided(id, _) => {
                benchlab_engine::refuse_reopen(store, *id, true)?
            }
            runner::Action::Start(..) => {}
        }
        Some(benchlab_lab::hold_by_hand(
            store,
            study,
            &runner::interrupt_flag()?,
        )?)
    } else {
        None
    };
    let result = run_in_bed(store, reg, study, what, restore_first);
    if let Some(h) = hold {
        h.end(store, &result)?;
    }
    result
}

/// [`execute`] once the run lock and the hosts are held.
fn run_in_bed(
    store: &mut benchlab_store::Store,
    reg: &benchlab_core::Registry,
    study: &benchlab_core::study::Study,
    what: runner::Action<'_>,
    restore_first: bool,
) -> Result<benchlab_engine::Outcome> {
    // A service whose user benchlab creates and whose study names
    // no password gets one for this run (never stored or printed).
    benchlab_engine::generate_passwords(study)?;
    let mut bed = match benchlab_testbed::study_testbed(&study.file, &study.text)? {
        Some(spec) => {
            let b =
                benchlab_testbed::RunBed::bring_up(&spec, &benchlab_testbed::default_state_dir())?;
            eprintln!("benchlab: {}", b.note);
            Some(b)
        }
        None => None,
    };
    let outcome = runner::run(store, reg, what, restore_first)?;
    if let Some(b) = bed.as_mut().filter(|b| b.owned()) {
        if let Err(e) = b.take_down() {
            eprintln!("benchlab: taking the test bed down: {e} (`benchlab restore` tries again)");
        }
    }
    Ok(outcome)
}

pub(crate) fn options(quick: bool, scale: Option<f64>) -> Result<RunOptions> {
    let scale = match (quick, scale) {
        (_, Some(s)) if !(s.is_finite() && s > 0.0) => {
            bail!("--scale must be a positive number, not {s}")
        }
        (_, Some(s)) => s,
        (true, None) => QUICK_SCALE,
        (false, None) => 1.0,
    };
    Ok(RunOptions { scale, quick })
}
