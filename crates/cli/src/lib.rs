//! benchlab's command line. `main` parses the command, runs it, prints the
//! whole error chain once and returns the exit code.

mod bisect_cmd;
mod commands;
mod copy_cmd;
mod design;
mod envcmd;
mod history_cmd;
mod import_cmd;
mod lab_cmd;
mod open;
mod progress;
mod report_cmd;
mod runner;
mod serve_cmd;
mod testbed_cmd;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Exit code: a run finished but some repetitions failed.
pub const EXIT_POINTS_FAILED: i32 = 3;
/// Exit code: interrupted by Ctrl-C or SIGTERM (128 + SIGINT, as shells do).
pub const EXIT_INTERRUPTED: i32 = 130;

/// The workloads this binary knows: one line each.
pub fn registry() -> benchlab_core::Registry {
    let mut r = benchlab_core::Registry::new();
    r.add(&benchlab_wl_net::STREAM)
        .add(&benchlab_wl_net::RR)
        .add(&benchlab_wl_net::PINGPONG)
        .add(&benchlab_wl_fs::MATRIX)
        .add(&benchlab_wl_web::LOAD)
        .add(&benchlab_wl_fileserver::LOAD)
        .add(&benchlab_wl_fileserver::LOCAL)
        .add(&benchlab_wl_mq::THROUGHPUT)
        .add(&benchlab_wl_mq::LATENCY)
        .add(&benchlab_core::fake::FAKE)
        .add(&benchlab_core::fake::FAKE_CLIENTS)
        .set_service_check(benchlab_engine::check_service);
    benchlab_wl_command::workloads()
        .iter()
        .for_each(|w| _ = r.add(*w));
    r
}

#[derive(Parser)]
#[command(
    name = "benchlab",
    version,
    about = "A performance-comparison lab for operating systems, kernels, file systems and their configurations",
    long_about = "benchlab runs a study file (hosts, configurations, workloads and their sweeps, repetitions), stores every sample, and prints the comparison tables with % advantage, confidence intervals and verdicts."
)]
struct Cli {
    /// The result store: a SQLite file, or a PostgreSQL database as
    /// postgres://USER[:PASSWORD]@HOST[:PORT]/DB (postgresql:// too; a
    /// Unix socket: postgres:///DB?host=/run/postgresql). See docs/store.md.
    #[arg(
        long,
        global = true,
        default_value = "benchlab.db",
        env = "BENCHLAB_DB",
        // The URL may hold a password: `--help` must not print it.
        hide_env_values = true
    )]
    db: PathBuf,
    #[command(subcommand)]
    command: Command,
}

/// Output formats of `show`.
#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    Table,
    Json,
    Csv,
    Markdown,
}

impl From<FormatArg> for benchlab_report::Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Table => benchlab_report::Format::Table,
            FormatArg::Json => benchlab_report::Format::Json,
            FormatArg::Csv => benchlab_report::Format::Csv,
            FormatArg::Markdown => benchlab_report::Format::Markdown,
        }
    }
}

/// `--design NAME`: one of the designs a study file allows.
fn parse_design(s: &str) -> Result<benchlab_core::study::DesignKind, String> {
    benchlab_core::study::DesignKind::from_name(s).ok_or_else(|| {
        format!(
            "`{s}` is not a design (allowed: {})",
            benchlab_core::study::DESIGNS.join(", ")
        )
    })
}

/// Where a study's hosts are, from outside the study: the same study file
/// runs on this machine by default and on a lab's machines unchanged.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct HostArgs {
    /// A lab file of `[[host]]` tables (as in a study): each replaces the
    /// study's host of the same name.
    #[arg(long = "hosts", value_name = "FILE")]
    pub(crate) lab: Option<PathBuf>,
    /// Place one role: ROLE=local, ROLE=ssh:USER@HOST,
    /// ROLE=netns:NAME@ADDRESS or ROLE=agent:HOST:PORT,key=FILE
    /// (repeatable; applied after --hosts).
    #[arg(long = "host", value_name = "ROLE=SPEC")]
    pub(crate) host: Vec<String>,
}

/// Part of a study: `--only configuration=A,B --only workload=W`.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct OnlyArgs {
    /// Run only these configurations or workloads of the study, by name:
    /// configuration=NAME[,NAME…] or workload=NAME[,NAME…] (repeatable).
    /// The plan keeps the study's order for what remains; the report says
    /// what was left out.
    #[arg(long = "only", value_name = "KEY=NAME,…")]
    pub(crate) only: Vec<String>,
}

/// How the terminal summary is laid out (`run`, `show`, `compare`).
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct TermArgs {
    /// Also print the detail: monitors, time series, pairs, matrices,
    /// notes (the reports hold it all).
    #[arg(long)]
    pub(crate) verbose: bool,
    /// Lay the text out for this many columns (default: the terminal's,
    /// kept within 80–120; 100 on a pipe).
    #[arg(long, value_name = "COLUMNS", value_parser = clap::value_parser!(u16).range(20..))]
    pub(crate) width: Option<u16>,
}

impl TermArgs {
    /// The terminal writer's layout for standard output.
    pub(crate) fn layout(self) -> benchlab_report::Layout {
        use benchlab_report::terminal::{MAX_WIDTH, MIN_WIDTH, PIPE_WIDTH};
        let width = match self.width {
            Some(w) => usize::from(w),
            None => terminal_columns()
                .map(|c| c.clamp(MIN_WIDTH, MAX_WIDTH))
                .unwrap_or(PIPE_WIDTH),
        };
        benchlab_report::Layout {
            width,
            verbose: self.verbose,
        }
    }
}

/// The columns of the terminal on standard output; `None` on a pipe.
fn terminal_columns() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into `ws`, which outlives the call.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

#[derive(Subcommand)]
enum Command {
    /// Run a study file (or resume an interrupted run) and print its tables.
    Run {
        /// The study file (TOML). Not needed with --resume.
        #[arg(required_unless_present = "resume")]
        study: Option<PathBuf>,
        /// Continue run RUN_ID with its first missing repetition.
        #[arg(long, value_name = "RUN_ID", conflicts_with_all = ["study", "quick", "scale", "only"])]
        resume: Option<i64>,
        /// With --resume: add rounds to the run's undecided points under
        /// the same sequential rule (a run of either design), until every
        /// comparison is decided or its budget is spent.
        #[arg(long, requires = "resume")]
        until_decided: bool,
        /// With --until-decided: raise the cap on repetitions per point and
        /// configuration past the study's max_repetitions.
        #[arg(long, value_name = "N", requires = "until_decided",
              value_parser = clap::value_parser!(u32).range(2..=i64::from(benchlab_core::study::MAX_REPETITIONS)))]
        max_repetitions: Option<u32>,
        /// Run the study with this design whatever its file says: `fixed`
        /// (its repetitions, as published) or `until-decided` (rounds until
        /// every comparison is decided or the budget is spent).
        #[arg(long, value_name = "DESIGN", value_parser = parse_design, conflicts_with = "resume")]
        design: Option<benchlab_core::study::DesignKind>,
        /// Trial run: one repetition per point (the fixed design), times ×
        /// 0.05.
        #[arg(long)]
        quick: bool,
        /// Multiply every duration, warm-up and quiesce by this factor.
        #[arg(long, value_name = "FACTOR")]
        scale: Option<f64>,
        /// Add an A/A control: the first configuration again, as a hidden
        /// column in the same order as the others (as `[study] control =
        /// true`); the report shows the machine against itself.
        #[arg(long, conflicts_with = "resume")]
        aa: bool,
        /// First undo whatever an earlier, crashed run left changed on the
        /// hosts (its journal), instead of refusing to start.
        #[arg(long)]
        restore_first: bool,
        #[command(flatten)]
        only: OnlyArgs,
        #[command(flatten)]
        hosts: HostArgs,
        #[command(flatten)]
        term: TermArgs,
    },
    /// Undo every setting a crashed run left changed, from its on-disk
    /// journal: on this host, or on every host of a study.
    Restore {
        /// A study file: restore on each of its hosts.
        study: Option<PathBuf>,
        #[command(flatten)]
        hosts: HostArgs,
    },
    /// Inspect or apply a tuning profile on this host.
    Profile {
        #[command(subcommand)]
        action: ProfileAction,
    },
    /// One worker of the built-in background load (started by benchlab).
    #[command(name = "__load-worker", hide = true)]
    LoadWorker {
        /// Worker number (its phase sequence).
        index: u64,
        /// Scratch directory for its files.
        dir: String,
    },
    /// Process 1 of a benchlab guest (started by its early init).
    #[command(name = "guest-init", hide = true)]
    GuestInit,
    /// Runs a command in a benchlab guest over its control port, relaying
    /// standard streams (started by the controller for a guest's agents).
    #[command(name = "guest-attach", hide = true)]
    GuestAttach {
        /// The guest's agents socket.
        socket: PathBuf,
        /// The command to run in the guest.
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
    /// Check a study file and print its plan and expected duration.
    Check {
        /// The study file.
        study: PathBuf,
        /// As `run --quick`.
        #[arg(long)]
        quick: bool,
        /// As `run --scale`.
        #[arg(long, value_name = "FACTOR")]
        scale: Option<f64>,
        /// As `run --design`.
        #[arg(long, value_name = "DESIGN", value_parser = parse_design)]
        design: Option<benchlab_core::study::DesignKind>,
        #[command(flatten)]
        only: OnlyArgs,
        #[command(flatten)]
        hosts: HostArgs,
    },
    /// List the runs in the store.
    List,
    /// Make or upgrade the store: the one command besides writing ones
    /// (`run`, `import` …) that changes a store's schema or resolves what
    /// an older benchlab stored; reading commands never do.
    Store {
        #[command(subcommand)]
        action: StoreAction,
    },
    /// Show a run's tables (the newest run by default).
    Show {
        /// Run id.
        run: Option<i64>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: FormatArg,
        #[command(flatten)]
        term: TermArgs,
    },
    /// Compare configurations of stored runs side by side: points matched
    /// by workload and parameters, % advantage over the baseline with its
    /// confidence interval and verdict.
    Compare {
        /// RUN (every configuration of the run) or RUN:CONFIG, two or more
        /// columns in all.
        #[arg(required = true, value_name = "RUN[:CONFIG]")]
        specs: Vec<String>,
        /// The column the others are compared with (default: the first).
        #[arg(long, value_name = "RUN[:CONFIG]")]
        baseline: Option<String>,
        /// Exit with status 1 when a column is worse than the baseline
        /// (verdict "worse") by more than this, e.g. 5%.
        #[arg(long, value_name = "PCT", value_parser = report_cmd::parse_pct)]
        fail_on_regression: Option<f64>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: FormatArg,
        #[command(flatten)]
        term: TermArgs,
    },
    /// The stored runs of one study as series (one per table row, metric
    /// and configuration), with the change points found in each
    /// (E-Divisive means with a permutation test; see docs/history.md).
    History {
        /// A study name as stored, or a study file whose name is read.
        study: String,
        /// Exit with status 1 when a change point is found (with --since:
        /// at that run or later), for CI.
        #[arg(long)]
        fail_on_change: bool,
        /// Only changes at this run or later count for --fail-on-change
        /// (e.g. the first run of the build under test).
        #[arg(long, value_name = "RUN")]
        since: Option<i64>,
        /// A change is accepted when its permutation p-value is at most
        /// this.
        #[arg(long, value_name = "P", default_value_t = benchlab_stats::ChangePointOptions::default().significance)]
        significance: f64,
        /// Fewest runs on either side of a change (at least 2).
        #[arg(long, value_name = "RUNS", default_value_t = benchlab_stats::ChangePointOptions::default().min_segment)]
        min_segment: usize,
    },
    /// Find the first version that made a study's figure worse: git
    /// revisions built by a command (`--repo --good --bad --build`, the
    /// study's workload running `{build}`), or the values of a study key
    /// (`--key workload.NAME.PARAM --values GOOD,…,BAD`). Each step runs
    /// the candidate beside the good bound in ABBA blocks, stored as runs
    /// (see docs/bisect.md).
    Bisect {
        /// The study file: one or more workloads, no [[configuration]].
        #[arg(required_unless_present = "resume")]
        study: Option<PathBuf>,
        /// A git repository whose revisions are bisected.
        #[arg(long, value_name = "DIR", conflicts_with = "values")]
        repo: Option<PathBuf>,
        /// The good revision (before the change).
        #[arg(long, value_name = "REV", requires = "repo")]
        good: Option<String>,
        /// The bad revision (after it).
        #[arg(long, value_name = "REV", requires = "repo")]
        bad: Option<String>,
        /// The build command, run with `sh -c` in each version's own
        /// directory; the workload's `{build}` is that directory.
        #[arg(long, value_name = "COMMAND", requires = "repo")]
        build: Option<String>,
        /// Where the versions' directories go (default: under the state
        /// directory, reused by later bisections of the repository).
        #[arg(long, value_name = "DIR", requires = "repo")]
        builds: Option<PathBuf>,
        /// The key each version sets: workload.NAME.PARAM (with --repo:
        /// default workload.NAME.build of the study's only workload).
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// The key's values in order, good first, bad last.
        #[arg(long, value_name = "V,V,…", value_delimiter = ',', requires = "key")]
        values: Vec<String>,
        /// The metric compared (default: the workload's first table
        /// metric).
        #[arg(long, value_name = "NAME")]
        metric: Option<String>,
        /// The smallest slowdown worth finding: good and bad closer than
        /// this are "no difference".
        #[arg(long, value_name = "PCT", default_value = "2%", value_parser = report_cmd::parse_pct)]
        margin: f64,
        /// Rounds of repetitions a step may run before it must decide.
        #[arg(long, value_name = "N", default_value_t = 4)]
        rounds: u32,
        /// Repetitions of each side per round (a multiple of --blocks).
        #[arg(long, value_name = "N", default_value_t = 8)]
        repetitions: u32,
        /// ABBA blocks of each side per round: each block of the
        /// candidate and the bound's block beside it are one unit of the
        /// sequential verdict.
        #[arg(long, value_name = "N", default_value_t = 4)]
        blocks: u32,
        /// Go on with an interrupted bisection.
        #[arg(long, value_name = "ID", conflicts_with_all = ["study", "repo", "values", "key"])]
        resume: Option<i64>,
    },
    /// Write a run's report (several runs or RUN:CONFIG columns: their
    /// comparison) as HTML, Markdown, JSON and CSV files.
    Report {
        /// Runs (the newest by default), or RUN:CONFIG columns.
        #[arg(value_name = "RUN[:CONFIG]")]
        runs: Vec<String>,
        /// One self-contained HTML file (inline CSS and SVG charts).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Markdown.
        #[arg(long, value_name = "FILE")]
        md: Option<PathBuf>,
        /// JSON (the schema is docs/report.schema.json).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// A directory for tables.csv and repetitions.csv (every raw
        /// repetition).
        #[arg(long, value_name = "DIR")]
        csv: Option<PathBuf>,
    },
    /// Store published figures (a figures CSV: see docs/study-files.md) as
    /// a run marked "published, not measured", to show and compare beside
    /// measured runs.
    Import {
        /// The figures CSV.
        file: PathBuf,
        /// The run's study name (default: the file's name without
        /// extension).
        #[arg(long)]
        name: Option<String>,
    },
    /// Serve a read-only web UI over the store: runs (with a running
    /// study's progress), reports, comparisons, hosts side by side, and
    /// downloads (see docs/serve.md).
    Serve {
        /// The address to listen on, `HOST:PORT` (an IP address or a name,
        /// `localhost:8088`). Anything but loopback needs a token.
        #[arg(long, value_name = "ADDR", default_value = benchlab_serve::DEFAULT_LISTEN)]
        listen: String,
        /// A host name the server may be reached by (repeatable): requests
        /// whose `Host` is another name are refused (421), so that a web
        /// page cannot reach the UI by rebinding its own name to this
        /// address. IP addresses, `localhost` and the `--listen` name are
        /// always accepted.
        #[arg(long = "allow-host", value_name = "NAME")]
        allow_host: Vec<String>,
        /// A file whose first line is the token every request must carry
        /// (default: the BENCHLAB_SERVE_TOKEN environment variable).
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
    },
    /// Copy runs between stores, exactly (SQLite to PostgreSQL, back, or
    /// file to file): every row of each run, in one transaction per run. A
    /// run keeps its id when the destination has none of that number.
    Copy {
        /// The store to read (default: --db).
        #[arg(long, value_name = "DB")]
        from: Option<PathBuf>,
        /// The store to write: a SQLite file (created when missing) or a
        /// PostgreSQL URL.
        #[arg(long, value_name = "DB")]
        to: PathBuf,
        /// The runs to copy (default: every run that is not running).
        #[arg(value_name = "RUN")]
        runs: Vec<i64>,
    },
    /// Queue a study for the lab's workers (see docs/lab.md): it must
    /// pass `benchlab check`; its text and lab file are stored, so later
    /// edits of the files do not change what runs.
    Submit {
        /// The study file.
        study: PathBuf,
        /// Run it again this long after each start: N followed by s, m, h
        /// or d (e.g. 1d), forming the series `benchlab history` reads.
        #[arg(long, value_name = "DUR")]
        every: Option<String>,
        /// Higher runs first (default 0).
        #[arg(
            long,
            value_name = "N",
            default_value_t = 0,
            allow_negative_numbers = true
        )]
        priority: i64,
        #[command(flatten)]
        hosts: HostArgs,
    },
    /// List the lab's queue: queued, running (with the worker and its
    /// heartbeat), finished, failed, parked and cancelled entries.
    Queue,
    /// Cancel a queued or running entry (a running one stops at its
    /// worker's next heartbeat; its run stays resumable).
    Cancel {
        /// The entry's id (see `benchlab queue`).
        id: i64,
    },
    /// Take studies from the queue of --db and run them, one at a time,
    /// as `benchlab run` would, until stopped (see docs/lab.md).
    Worker {
        /// This worker's name in the queue (default HOST:PID).
        #[arg(long, value_name = "N")]
        name: Option<String>,
        /// Take one entry (if any is due), then exit.
        #[arg(long, conflicts_with = "max_entries")]
        once: bool,
        /// Exit after this many entries.
        #[arg(long, value_name = "N")]
        max_entries: Option<usize>,
        /// Exit when nothing is queued or running any more, instead of
        /// waiting for new entries.
        #[arg(long)]
        until_empty: bool,
        /// Seconds a claim holds without a heartbeat: after it another
        /// worker resumes the run (the heartbeat renews it every third).
        #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
        lease: f64,
        /// Seconds between looks at a queue with nothing due.
        #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
        poll: f64,
        /// A lab file of the hosts this worker may use (`[[host]]` tables):
        /// it takes only entries whose every host is among them (default:
        /// any host).
        #[arg(long, value_name = "LAB")]
        hosts: Option<PathBuf>,
    },
    /// Print this host's inventory (the system-configuration appendix).
    Inventory {
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the workloads and their parameters.
    Workloads,
    /// Serve the control protocol: on standard input/output (started by the
    /// controller, locally, with `ip netns exec` or over SSH), or on a TCP
    /// address for hosts without SSH, where every controller must prove it
    /// holds the shared key.
    Agent {
        /// Speak the protocol on standard input and output.
        #[arg(long, conflicts_with = "listen", required_unless_present = "listen")]
        stdio: bool,
        /// Listen for controllers on this address (e.g. 0.0.0.0:7300).
        #[arg(long, value_name = "ADDR", requires = "key_file")]
        listen: Option<std::net::SocketAddr>,
        /// The shared secret (at least 16 bytes; readable by its owner only).
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
        /// Serve one authenticated controller, then exit.
        #[arg(long, requires = "listen")]
        once: bool,
    },
    /// Build, inspect or remove a test bed of network-namespace hosts.
    Testbed {
        #[command(subcommand)]
        action: TestbedAction,
    },
    /// Relay TCP and UDP between two addresses, holding every chunk and
    /// datagram for a fixed delay (a stand-in for netem's delay on kernels
    /// without it). Runs until SIGINT or SIGTERM, then prints its
    /// statistics (the hold times it actually applied) as JSON.
    Relay {
        /// Address to listen on.
        #[arg(long, value_name = "ADDR")]
        listen: std::net::SocketAddr,
        /// Address to relay to.
        #[arg(long, value_name = "ADDR")]
        to: std::net::SocketAddr,
        /// One-way delay in milliseconds, applied in each direction.
        #[arg(long, value_name = "MS", default_value = "0")]
        delay_ms: f64,
        /// tcp, udp or both.
        #[arg(long, default_value = "both")]
        protocol: String,
    },
}

/// `benchlab profile …`
#[derive(Subcommand)]
pub(crate) enum ProfileAction {
    /// List the shipped profiles, or print one (name or file) with what
    /// it means on this host.
    Show {
        /// Profile name or file.
        name: Option<String>,
    },
    /// Compare this host's current values with what a profile wants.
    Diff {
        /// Profile name or file.
        name: String,
    },
    /// Apply a profile on this host until `benchlab profile revert`
    /// (journaled; a wake-up latency limit is held only while a run holds
    /// it, so it is not applied here).
    Apply {
        /// Profile name or file.
        name: String,
    },
    /// Undo `profile apply` (and anything a crashed run left): same as
    /// `benchlab restore`.
    Revert,
}

/// `benchlab store …`
#[derive(Subcommand)]
enum StoreAction {
    /// Create the store, or bring one written by an older benchlab up to
    /// this one: its schema migrated, and each older run's plan, notes
    /// and parsed figures resolved once, in one transaction per run,
    /// marked in the run's events (`upgraded`).
    Upgrade,
}

/// `benchlab testbed …`
#[derive(Subcommand)]
enum TestbedAction {
    /// Create the test bed a file's `[testbed]` table describes.
    Up {
        /// A study file or a file of its own with a `[testbed]` table.
        file: PathBuf,
    },
    /// Remove everything a test bed created (also after a crash).
    Down {
        /// The test bed's name, or the file that describes it.
        name: String,
    },
    /// Show what a test bed created and whether it still exists.
    Status {
        /// The test bed's name, or the file that describes it.
        name: String,
    },
    /// Say whether this kernel has netem (exit status 0 if it has).
    Netem,
}

/// An error that SQLite raised on a damaged file or a full file system,
/// wherever it surfaced (opening, or a write long after), names the file
/// and says what to do.
fn name_damaged_store(e: anyhow::Error, db: &std::path::Path) -> anyhow::Error {
    // A report's LoadError forwards the store's error transparently, which
    // hides it from the chain: look inside it too.
    let store_error = |f: fn(&benchlab_store::StoreError) -> bool| {
        e.chain().any(|c| {
            c.downcast_ref::<benchlab_store::StoreError>()
                .is_some_and(f)
                || c.downcast_ref::<benchlab_report::LoadError>()
                    .is_some_and(|l| matches!(l, benchlab_report::LoadError::Store(s) if f(s)))
        })
    };
    if store_error(benchlab_store::StoreError::is_disk_full) {
        return e.context(format!(
            "the file system of the store {} is full: what was stored is kept; make room, then `benchlab run --resume` the run (`benchlab list` shows it)",
            db.display()
        ));
    }
    if !store_error(benchlab_store::StoreError::is_damaged_database) {
        return e;
    }
    e.context(format!(
        "the store {} is damaged: restore it from a copy, or give another --db (benchlab leaves this file as it is)",
        benchlab_store::Target::from_path(db)
    ))
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let db = cli.db.clone();
    match commands::dispatch(cli).map_err(|e| name_damaged_store(e, &db)) {
        Ok(code) => code,
        Err(e) => {
            // A closed pipe (`benchlab show | head`) is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return 0;
            }
            // Every message goes through the one redaction: a cause deep
            // in the chain (a client library's error) may quote a URL.
            use benchlab_core::redact::redact;
            eprintln!("benchlab: error: {}", redact(&e.to_string()));
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {}", redact(&cause.to_string()));
            }
            1
        }
    }
}

#[cfg(test)]
mod tests {
    /// A workload's declared operation rate must be one of its metrics,
    /// or the monitors' per-operation figures silently vanish.
    #[test]
    fn every_operation_rate_is_a_metric_of_its_workload() {
        let reg = super::registry();
        let mut declared = 0;
        for wl in reg.all() {
            let Some(rate) = wl.operation_rate() else {
                continue;
            };
            declared += 1;
            let params = benchlab_core::Params::default();
            assert!(
                wl.metrics(&params).iter().any(|m| m.name == rate),
                "{}: operation rate `{rate}` is none of its metrics",
                wl.kind()
            );
        }
        assert!(declared >= 4, "only {declared} workloads declare a rate");
    }
}
