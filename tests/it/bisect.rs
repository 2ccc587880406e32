//! `benchlab bisect` (issue 39) with real runs: a C program's git history
//! built with gcc, a noisy fake workload's planted step, an A/A pair,
//! the refusals before anything runs, and a killed controller resumed.
//!
//! The C test measures CPU time, so it takes the `Timing` lock; the fake
//! tests measure nothing of the machine.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use benchlab_testkit::{exclusive, Resource, Scratch};

/// A C program whose every operation is `WORK` rounds of xorshift, timed
/// by its own CPU time (so that other processes on the machine change its
/// figure little): `ops_per_cpu_s`.
fn program(revision: usize, work: u32) -> String {
    format!(
        r#"/* revision {revision} */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define WORK {work}
int main(int argc, char **argv) {{
    long ops = argc > 1 ? atol(argv[1]) : 1000000;
    uint64_t x = 88172645463325252ull;
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    for (long i = 0; i < ops; i++)
        for (int k = 0; k < WORK; k++) {{ x ^= x << 13; x ^= x >> 7; x ^= x << 17; }}
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    printf("ops_per_cpu_s: %.1f\nchecksum: %llu\n", ops / s, (unsigned long long)x);
    return 0;
}}
"#
    )
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.org")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.org")
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A repository of `n` commits of the program; from commit `slow_at` on,
/// each operation does 27 rounds instead of 25 (8 % more work). Returns
/// the commits' revisions, oldest first.
fn c_repository(repo: &Path, n: usize, slow_at: usize) -> Vec<String> {
    std::fs::create_dir_all(repo).unwrap();
    git(repo, &["init", "-q"]);
    std::fs::write(
        repo.join("Makefile"),
        "loop: loop.c\n\tgcc -O2 -o loop loop.c\n",
    )
    .unwrap();
    (0..n)
        .map(|i| {
            let work = if i < slow_at { 25 } else { 27 };
            std::fs::write(repo.join("loop.c"), program(i, work)).unwrap();
            git(repo, &["add", "-A"]);
            git(repo, &["commit", "-q", "-m", &format!("revision {i}")]);
            git(repo, &["rev-parse", "HEAD"])
        })
        .collect()
}

const C_STUDY: &str = r#"
[study]
name = "bisect-c"

[defaults]
warmup_s = 0
quiesce_s = 0

[[workload]]
name = "loop"
kind = "command"
command = "{build}/loop 1000000"
parser = "lines"
metrics = "ops_per_cpu_s (op/s) higher: ops_per_cpu_s"
"#;

fn steps(stdout: &str) -> usize {
    stdout.lines().filter(|l| l.starts_with("step ")).count()
}

#[test]
fn a_bisection_names_the_commit_that_made_a_c_program_slower() {
    let _t = exclusive(&[Resource::Timing]);
    let s = Scratch::new();
    let repo = s.path("repo");
    let (n, slow_at) = (32, 19);
    let revs = c_repository(&repo, n, slow_at);
    let study = s.study("c.toml", C_STUDY);
    let started = std::time::Instant::now();
    let out = bisect_repo(&s, &study, &repo, &revs[0], "make -s");
    eprintln!("{out}(in {:.0} s)", started.elapsed().as_secs_f64());
    assert!(
        out.contains(&format!(
            "first bad version: #{slow_at} `{} revision {slow_at}` (revision {})",
            &revs[slow_at][..7],
            revs[slow_at]
        )),
        "{out}"
    );
    // ⌈log₂ 32⌉ + 2 = 7.
    let bound = (n as f64).log2().ceil() as usize + 2;
    assert!(steps(&out) <= bound, "{} steps: {out}", steps(&out));
    // The effect is the planted one: 25/27 − 1 = −7.4 %.
    let effect = out
        .lines()
        .find_map(|l| l.strip_prefix("effect: "))
        .and_then(|l| l.split(" %").next())
        .and_then(|v| v.parse::<f64>().ok())
        .expect("an effect line");
    assert!((-10.0..=-5.0).contains(&effect), "{effect}: {out}");
    // Every step is stored runs linked to the bisection, and only those.
    let conn = rusqlite::Connection::open(s.db()).unwrap();
    let linked: i64 = conn
        .query_row(
            "SELECT count(*) FROM bisection_run WHERE bisection_id = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let runs: i64 = conn
        .query_row(
            "SELECT count(*) FROM run WHERE status = 'completed'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(linked, runs);
    assert!(linked as usize >= steps(&out));
    // Only the versions a step ran were built.
    let built = std::fs::read_dir(s.path("builds")).unwrap().count();
    assert!(built <= steps(&out) + 2, "{built} builds");
}

const SIM_STUDY: &str = r#"
[study]
name = "bisect-sim"

[defaults]
duration_s = 0.01
warmup_s = 0
quiesce_s = 0

[[workload]]
kind = "fake"
step = 0
noise = 0.03
drift = 0.02
seed = 0
"#;

fn values(n: usize, slow_at: usize, good: &str, bad: &str) -> String {
    (0..n)
        .map(|i| if i < slow_at { good } else { bad })
        .collect::<Vec<_>>()
        .join(",")
}

/// A bisection of the fake workload's `vals`. Its noise is drawn fresh
/// in every round (`seed = 0`): a fixed seed would replay one round's
/// draws in the next, and the seeded trials are the search's own
/// simulation (crates/bisect/src/search.rs).
fn simulate(s: &Scratch, vals: &str) -> std::process::Output {
    let study = s.study("sim.toml", SIM_STUDY);
    s.benchlab()
        .args([
            "bisect",
            study.to_str().unwrap(),
            "--key",
            "workload.fake.value",
            "--values",
            vals,
            "--margin",
            "2.5%",
            "--rounds",
            "12",
        ])
        .output()
        .unwrap()
}

#[test]
fn a_planted_5_percent_step_is_found_in_19_of_20_noisy_trials() {
    let s = Scratch::new();
    let n = 16;
    let mut right = 0;
    let mut missed = Vec::new();
    for trial in 0..20 {
        // Positions 1 to 15, each at least once.
        let at = 1 + (trial * 7) % (n - 1);
        let out = simulate(&s, &values(n, at, "100", "95"));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if stdout.contains(&format!("first bad version: #{at} `95`")) {
            right += 1;
            assert!(steps(&stdout) <= 5, "{stdout}");
        } else {
            missed.push(format!("trial {trial}, step at {at}:\n{stdout}"));
        }
    }
    eprintln!("{right} of 20 trials right");
    assert!(
        right >= 19,
        "{right} of 20 right; missed:\n{}",
        missed.join("\n")
    );
}

#[test]
fn an_a_a_bisection_stops_at_once_with_no_difference() {
    let s = Scratch::new();
    let out = simulate(&s, &values(16, 16, "100", "100"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("no difference between good and bad"),
        "{stdout}"
    );
    assert_eq!(steps(&stdout), 1, "{stdout}");
    // serve says so, with the one step the store holds.
    let mut kids = benchlab_testkit::browser::Kids(Vec::new());
    let addr = benchlab_testkit::browser::serve(&s, &mut kids, &[]);
    let (code, _, page) = benchlab_testkit::browser::get(addr, "/bisect/1");
    assert_eq!(code, 200, "{page}");
    assert_eq!(
        cell(&page, "state"),
        "finished: no difference between good and bad"
    );
    assert_eq!(check_steps(&page, &s.db(), "score"), 1, "{page}");
    assert_eq!(
        cell(&page, "step-0-decision"),
        "no difference between good and bad"
    );
    assert!(!page.contains("id=\"first-bad\""), "{page}");
}

#[test]
fn the_wrong_way_round_a_bad_revision_and_a_failing_build_are_refused() {
    let s = Scratch::new();
    // Measured at step 0: bad is faster than good.
    let out = simulate(&s, &values(6, 3, "95", "100"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("good is slower than bad"), "{stderr}");

    // Refused before anything runs: no run is stored.
    let repo = s.path("repo");
    let revs = c_repository(&repo, 3, 3);
    let c = s.study("c.toml", C_STUDY);
    let refuse = |args: &[&str], want: &[&str]| {
        let mut all = vec![
            "bisect",
            c.to_str().unwrap(),
            "--repo",
            repo.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        let out = s.run(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        for w in want {
            assert!(err.contains(w), "`{w}` not in: {err}");
        }
    };
    let runs_before = runs(&s.db());
    refuse(
        &[
            "--good",
            "no-such-rev",
            "--bad",
            "HEAD",
            "--build",
            "make -s",
        ],
        &["--good no-such-rev: no such revision"],
    );
    refuse(
        &[
            "--good",
            &revs[0],
            "--bad",
            "HEAD",
            "--build",
            "echo compiling; echo 'loop.c:3: error: boom' >&2; exit 2",
        ],
        &[
            "refused before anything ran",
            "--build",
            "failed",
            "loop.c:3: error: boom",
        ],
    );
    refuse(
        &["--good", "HEAD", "--bad", &revs[0], "--build", "make -s"],
        &["is not an ancestor of --bad"],
    );
    refuse(
        &[
            "--key",
            "workload.loop.nope",
            "--good",
            &revs[0],
            "--bad",
            "HEAD",
            "--build",
            "make -s",
        ],
        &["--key workload.loop.nope", "no parameter `nope`"],
    );
    assert_eq!(runs(&s.db()), runs_before);
}

/// Samples stored so far by runs still running.
fn samples_of_running_runs(db: &Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    conn.query_row(
        "SELECT count(*) FROM sample JOIN point ON point.id = sample.point_id \
         JOIN run ON run.id = point.run_id WHERE run.status = 'running'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

fn runs(db: &Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT count(*) FROM run", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_killed_bisection_resumes_without_repeating_a_finished_round() {
    let s = Scratch::new();
    // Slow enough to be killed in the middle of a round.
    let study = s.study(
        "slow.toml",
        &SIM_STUDY.replace("seed = 0", "seed = 0\nsleep_s = 0.05"),
    );
    let vals = values(8, 5, "100", "90");
    let args = [
        "bisect",
        study.to_str().unwrap(),
        "--key",
        "workload.fake.value",
        "--values",
        &vals,
        "--margin",
        "2.5%",
        // As `simulate`: with 8, a step of no difference once ended
        // undecided here (the search's simulation: 386 of 400 right
        // with 8 rounds, 399 with 12).
        "--rounds",
        "12",
    ];
    let mut child = s
        .benchlab()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(Result::unwrap)
        .find(|l| {
            if l.starts_with("step 0:") {
                first = l.clone();
            }
            l.starts_with("step 1:")
        })
        .expect("step 1 finishes");
    // Into step 2's first round, then killed without a word: once its
    // run has a sample stored. A fixed pause after step 1's line was not
    // enough on a loaded machine, where the next round had not started.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while samples_of_running_runs(&s.db()) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "step 2's first round stored no sample in 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = runs(&s.db());
    // serve shows it interrupted: its finished steps with the store's
    // runs and repetitions, and the round cut short with its run.
    let mut kids = benchlab_testkit::browser::Kids(Vec::new());
    let addr = benchlab_testkit::browser::serve(&s, &mut kids, &[]);
    let (code, _, page) = benchlab_testkit::browser::get(addr, "/bisect/1");
    assert_eq!(code, 200, "{page}");
    assert!(
        page.contains("<p id=\"state\" class=\"st-interrupted\">interrupted in the middle of a round: `benchlab bisect --resume 1` goes on"),
        "{page}"
    );
    assert_eq!(check_steps(&page, &s.db(), "score"), 2, "{page}");
    let cut: i64 = rusqlite::Connection::open(s.db())
        .unwrap()
        .query_row("SELECT id FROM run WHERE status = 'running'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(
        page.contains(&format!(
            "<a href=\"/run/{cut}\" id=\"open-round-run\">run {cut}</a> (its controller is gone, "
        )),
        "{page}"
    );
    let (_, _, list) = benchlab_testkit::browser::get(addr, "/bisect");
    assert!(
        list.contains("id=\"bisection-state-1\">interrupted"),
        "{list}"
    );
    let out = s.run_ok(&["bisect", "--resume", "1"]);
    assert!(
        out.contains(&first),
        "step 0 replayed as it was:\n{first}\n{out}"
    );
    assert!(out.contains("first bad version: #5 `90`"), "{out}");
    // The round cut short was resumed, not run again from the start: every
    // stored run is one round of the bisection.
    let conn = rusqlite::Connection::open(s.db()).unwrap();
    let linked: i64 = conn
        .query_row(
            "SELECT count(DISTINCT run_id) FROM bisection_run",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(linked, runs(&s.db()), "{out}");
    assert!(runs(&s.db()) >= before);
    let again = s.run(&["bisect", "--resume", "1"]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("is finished"));
    let (_, _, page) = benchlab_testkit::browser::get(addr, "/bisect/1");
    assert_eq!(
        cell(&page, "state"),
        "finished: first bad version: #5 `90`",
        "{page}"
    );
    assert_eq!(
        check_steps(&page, &s.db(), "score"),
        steps(&out),
        "{out}\n{page}"
    );
}

/// `benchlab bisect STUDY --repo REPO` from `good` to HEAD, each version
/// built by `build` into the scratch's `builds`: its output.
///
/// Up to 8 rounds a step, not the default 4: beside the suite's other
/// tests the C program's spread doubles, and a step between two equal
/// versions then stayed undecided after 4 rounds (CI of 2026-12-06,
/// reproduced 1 of 3 beside three busy loops). Undecided is the right
/// answer when the budget is spent; this test is about the search.
fn bisect_repo(s: &Scratch, study: &Path, repo: &Path, good: &str, build: &str) -> String {
    s.run_ok(&[
        "bisect",
        study.to_str().unwrap(),
        "--repo",
        repo.to_str().unwrap(),
        "--good",
        good,
        "--bad",
        "HEAD",
        "--build",
        build,
        "--builds",
        s.path("builds").to_str().unwrap(),
        "--rounds",
        "8",
    ])
}

/// The text of the element whose id is `id`, up to its first child tag.
fn cell<'a>(page: &'a str, id: &str) -> &'a str {
    benchlab_testkit::browser::inner(page, id, "<")
}

/// The rounds of bisection 1 from the store: (step, run) in order.
fn stored_rounds(db: &Path) -> Vec<(i64, i64)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn
        .prepare("SELECT step, run_id FROM bisection_run WHERE bisection_id = 1 ORDER BY seq")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Per side (`bound`, `candidate`) of `runs`, from the store: the
/// repetitions that measured `metric` and their mean.
fn sides(db: &Path, runs: &[i64], metric: &str) -> [(i64, f64); 2] {
    let conn = rusqlite::Connection::open(db).unwrap();
    let list = runs
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let side = |name: &str| -> (i64, f64) {
        conn.query_row(
            &format!(
                "SELECT count(*), avg(json_extract(s.metrics_json, '$.{metric}'))
                 FROM sample s JOIN point p ON p.id = s.point_id
                 JOIN configuration c ON c.run_id = p.run_id AND c.idx = p.config_idx
                 WHERE p.run_id IN ({list}) AND c.name = ?1 AND s.status = 'ok'
                   AND json_extract(s.metrics_json, '$.{metric}') IS NOT NULL"
            ),
            [name],
            |r| Ok((r.get(0)?, r.get::<_, Option<f64>>(1)?.unwrap_or(f64::NAN))),
        )
        .unwrap()
    };
    [side("bound"), side("candidate")]
}

/// Checks the steps table of a bisection page against the store: each
/// step's runs are the rounds stored for it, linked to their pages, and
/// its repetitions are the repetitions those runs stored of each side.
/// Returns the number of steps shown.
fn check_steps(page: &str, db: &Path, metric: &str) -> usize {
    let rounds = stored_rounds(db);
    let mut shown = 0;
    while page.contains(&format!("id=\"step-{shown}\"")) {
        let k = shown as i64;
        let runs: Vec<i64> = rounds
            .iter()
            .filter(|(s, _)| *s == k)
            .map(|(_, r)| *r)
            .collect();
        assert!(!runs.is_empty(), "step {k} shown but not stored: {page}");
        for r in &runs {
            assert!(
                page.contains(&format!(
                    "<a href=\"/run/{r}\" id=\"step-{k}-run-{r}\">{r}</a>"
                )),
                "step {k}: run {r} not linked: {page}"
            );
        }
        let [(nb, _), (nc, _)] = sides(db, &runs, metric);
        assert_eq!(
            cell(page, &format!("step-{k}-n")),
            format!("{nb} / {nc}"),
            "step {k}"
        );
        shown += 1;
    }
    shown
}

/// A shell script printing a score near `base` × 1000 (±1 %, drawn from
/// /dev/urandom in every repetition).
fn score_script(base: u32) -> String {
    format!(
        "n=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')\necho \"score: $(({base} * 1000 - 1000 + n % 2000))\"\n"
    )
}

const SCORE_STUDY: &str = r#"
[study]
name = "bisect-serve"

[defaults]
warmup_s = 0
quiesce_s = 0

[[workload]]
name = "score"
kind = "command"
command = "sh {build}/score.sh"
parser = "lines"
metrics = "score (pt) higher: score"
"#;

/// Issue 39: `serve` shows a bisection made by the real `benchlab
/// bisect` of a git repository whose third commit is 10 % slower and has
/// a hostile subject: the list, the page with its versions (the git
/// log's), every step's runs and repetitions (the store's), the first bad
/// version and its effect (beside the means the store holds), the run
/// pages linking back, and the subject escaped everywhere.
#[test]
fn serve_shows_a_bisection_with_its_steps_runs_and_first_bad_version() {
    let s = Scratch::new();
    let repo = s.path("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let hostile = "<script>alert(1)</script> & \"q\" 'x' </td>";
    let subjects = ["first", "second", hostile, "fourth"];
    let revs: Vec<String> = subjects
        .iter()
        .enumerate()
        .map(|(i, subject)| {
            let base = if i < 2 { 100 } else { 90 };
            let script = format!("# revision {i}\n{}", score_script(base));
            std::fs::write(repo.join("score.sh"), script).unwrap();
            git(&repo, &["add", "-A"]);
            git(&repo, &["commit", "-q", "-m", subject]);
            git(&repo, &["rev-parse", "HEAD"])
        })
        .collect();
    let labels: Vec<String> = revs
        .iter()
        .map(|r| git(&repo, &["log", "-1", "--format=%h %s", r]))
        .collect();
    let study = s.study("score.toml", SCORE_STUDY);
    let out = bisect_repo(&s, &study, &repo, &revs[0], "true");
    assert!(
        out.contains(&format!("first bad version: #2 `{}`", labels[2])),
        "{out}"
    );
    let mut kids = benchlab_testkit::browser::Kids(Vec::new());
    let addr = benchlab_testkit::browser::serve(&s, &mut kids, &[]);
    let esc = benchlab_report::html::esc;

    // Linked from every page's navigation, the index's included.
    let (code, _, index) = benchlab_testkit::browser::get(addr, "/");
    assert_eq!(code, 200, "{index}");
    assert!(
        index.contains("<a href=\"/bisect\" id=\"nav-bisect\">"),
        "{index}"
    );

    let (code, _, list) = benchlab_testkit::browser::get(addr, "/bisect");
    assert_eq!(code, 200, "{list}");
    assert!(list.contains("<a href=\"/bisect/1\">1</a>"), "{list}");
    let want_state = format!("finished: first bad version: #2 `{}`", labels[2]);
    assert_eq!(cell(&list, "bisection-state-1"), esc(&want_state), "{list}");

    let (code, head, page) = benchlab_testkit::browser::get(addr, "/bisect/1");
    assert_eq!(code, 200, "{page}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'"),
        "{head}"
    );
    for p in [&list, &page] {
        assert!(!p.contains("<script>alert"), "{p}");
        assert!(!p.contains(hostile), "{p}");
    }
    assert!(
        !page.contains("<script"),
        "the page needs no script: {page}"
    );
    let status: String = rusqlite::Connection::open(s.db())
        .unwrap()
        .query_row("SELECT status FROM bisection WHERE id = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(status, "finished");
    assert_eq!(cell(&page, "state"), esc(&want_state), "{page}");
    // The versions in order, as the git log has them.
    for (i, (label, rev)) in labels.iter().zip(&revs).enumerate() {
        let row = format!(
            "<tr id=\"version-{i}\"><td>{i}</td><td class=\"l\">{}</td><td class=\"l\"><code>{rev}</code></td>",
            esc(label)
        );
        assert!(page.contains(&row), "{row} not in {page}");
    }
    assert!(!page.contains("id=\"version-4\""), "{page}");
    // Every step's runs and repetitions are the store's.
    let steps = check_steps(&page, &s.db(), "score");
    assert_eq!(
        steps,
        out.lines().filter(|l| l.starts_with("step ")).count(),
        "{out}"
    );
    // The first bad version and its effect: the interval printed by
    // `benchlab bisect`, around the ratio of the means the store holds.
    assert_eq!(
        cell(&page, "first-bad-version"),
        esc(&format!("#2 `{}`", labels[2]))
    );
    let effect = cell(&page, "first-bad-effect").to_string();
    let printed = out
        .lines()
        .find_map(|l| l.strip_prefix("effect: "))
        .expect("an effect line");
    assert!(
        printed.starts_with(&effect),
        "page {effect}, printed {printed}"
    );
    let evidence = page[page.find("(step ").unwrap() + 6..]
        .split(')')
        .next()
        .unwrap()
        .parse::<i64>()
        .unwrap();
    let runs: Vec<i64> = stored_rounds(&s.db())
        .iter()
        .filter(|(st, _)| *st == evidence)
        .map(|(_, r)| *r)
        .collect();
    let [(_, bound), (_, candidate)] = sides(&s.db(), &runs, "score");
    let ratio_pct = (candidate / bound - 1.0) * 100.0;
    let num = |t: &str| t.trim().trim_start_matches('+').parse::<f64>().unwrap();
    let pct = num(effect.split(" %").next().unwrap());
    let (lo, hi) = effect
        .split('[')
        .nth(1)
        .and_then(|t| t.trim_end_matches(']').split_once(','))
        .map(|(a, b)| (num(a), num(b)))
        .unwrap();
    assert!(
        (pct - ratio_pct).abs() < 0.5,
        "page {pct}, store {ratio_pct:.2}"
    );
    assert!(lo <= pct && pct <= hi && hi < 0.0, "{effect}");
    assert!((-12.0..=-8.0).contains(&pct), "planted −10 %: {effect}");
    // Each run of the bisection links back to it.
    for (_, r) in stored_rounds(&s.db()) {
        let (code, _, run) = benchlab_testkit::browser::get(addr, &format!("/run/{r}"));
        assert_eq!(code, 200, "{run}");
        assert!(
            run.contains("<a href=\"/bisect/1\">bisection 1</a>"),
            "{run}"
        );
    }
    let (code, _, missing) = benchlab_testkit::browser::get(addr, "/bisect/2");
    assert_eq!(code, 404, "{missing}");
    let (code, head, bad) = benchlab_testkit::browser::get(addr, "/bisect/x%3Cb%3E");
    assert_eq!(code, 400, "{bad}");
    // Plain text, never sniffed as HTML.
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-type: text/plain"), "{head}");
    assert!(head.contains("x-content-type-options: nosniff"), "{head}");
}
