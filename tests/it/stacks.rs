//! Issue 40: call-stack profiles behind every verdict. perf samples every
//! CPU while a point is measured (`perf record -a`), so these tests take
//! `Timing`: a test that times its own loop beside them would see the
//! sampler, and their profiles would hold the other tests' work (as
//! `other`, which the tables leave out, but it is CPU time taken).

use std::path::Path;
use std::process::Command;

use benchlab_testkit::{exclusive, Resource, Scratch};

/// A C program that spins for its first argument's seconds, calling
/// `work` and, when its second argument is 1, the planted `planted_hot`
/// for as many iterations; it prints its loops per second and the share
/// of its CPU time the planted function took by its own CPU clock (the
/// two loops run at different speeds, so that share is measured, not
/// built in).
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
__attribute__((noinline)) void work(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink += i * 2654435761u;
}
__attribute__((noinline)) void planted_hot(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink ^= i * 40503u + (sink >> 3);
}
static double clock_s(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }
int main(int argc, char **argv) {
    double secs = atof(argv[1]);
    int plant = argc > 2 && atoi(argv[2]);
    unsigned long loops = 0;
    double start = now(), end = start + secs, planted = 0, cpu0 = cpu();
    while (now() < end) {
        work(200000);
        if (plant) {
            double t = cpu();
            planted_hot(200000);
            planted += cpu() - t;
        }
        loops++;
    }
    printf("loops_per_s: %f\n", loops / (now() - start));
    printf("planted_pct: %f\n", 100 * planted / (cpu() - cpu0));
    return 0;
}
"#;

/// Builds [`PROGRAM`] into `dir/hot`.
fn build(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("hot.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let bin = dir.join("hot");
    benchlab_testkit::output_ok(
        Command::new("gcc")
            .args(["-O1", "-g", "-o"])
            .arg(&bin)
            .arg(&src),
    );
    bin
}

/// The share of its CPU time (%) that [`PROGRAM`] spends in
/// `planted_hot`, by its own CPU clock, in a 2 s run outside benchlab.
fn planted_pct(bin: &Path) -> f64 {
    let out = benchlab_testkit::output_ok(Command::new(bin).args(["2", "1"]));
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("planted_pct: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no planted_pct in {text:?}"))
}

/// The first row of the "grew most" table in a text report: the line
/// after the table's heading rule (terminal) or alignment row (Markdown).
fn first_row_after<'a>(text: &'a str, marker: &str) -> &'a str {
    let at = text
        .find("the functions whose CPU time grew most")
        .unwrap_or_else(|| panic!("no grew-most table:\n{text}"));
    let mut lines = text[at..].lines();
    lines
        .find(|l| l.trim_start().starts_with(marker))
        .unwrap_or_else(|| panic!("no table under it:\n{}", &text[at..]));
    lines.next().expect("a row")
}

/// Two configurations of the program: the second calls `planted_hot`.
fn planted_study(s: &Scratch, bin: &Path, repetitions: u32, duration_s: u32) -> std::path::PathBuf {
    s.study(
        "stacks.toml",
        &format!(
            r#"
[study]
name = "stacks-planted"
stacks = {{ hz = 99 }}
[defaults]
repetitions = {repetitions}
quiesce_s = 0
warmup_s = 0
duration_s = {duration_s}
[[configuration]]
name = "plain"
[[configuration]]
name = "planted"
set = {{ command = "{bin} {{duration_s}} 1" }}
[[workload]]
name = "hot"
kind = "command"
command = "{bin} {{duration_s}} 0"
parser = "lines"
metrics = "loops_per_s (1/s) higher: loops_per_s"
"#,
            bin = bin.display()
        ),
    )
}

#[test]
fn the_grew_most_table_names_the_planted_function_first() {
    benchlab_testkit::require!(root, "perf", "gcc");
    let _g = exclusive(&[Resource::Timing]);
    let s = Scratch::new();
    let bin = build(&s.path(""));
    let study = planted_study(&s, &bin, 2, 2);
    s.run_ok(&["run", study.to_str().unwrap()]);

    // JSON: the comparison of the client side (the program runs under
    // the client agent), planted_hot first among what grew.
    let j = s.json("1");
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(benchlab_testkit::repo().join("docs/report.schema.json")).unwrap(),
    )
    .unwrap();
    let errors = benchlab_testkit::schema::validate(&schema, &j);
    assert!(
        errors.is_empty(),
        "schema violations:\n{}",
        errors.join("\n")
    );
    let st = &j["stacks"];
    let comparisons = st["comparisons"].as_array().expect("comparisons");
    let client = comparisons
        .iter()
        .find(|c| c["side"] == "client")
        .unwrap_or_else(|| panic!("no client comparison: {comparisons:#?}"));
    assert_eq!(client["configuration"], "planted");
    assert_eq!(client["baseline"], "plain");
    let top = &client["grew"][0];
    assert_eq!(top["function"], "planted_hot", "{client:#}");
    let share = top["share_b_pct"].as_f64().unwrap();
    // Against the program's own CPU clock: the share of its CPU time
    // that planted_hot took in a run without the sampler. Sampled at 99
    // Hz for 2 × 2 s (about 400 samples) the profile's share is within a
    // few points of it; 15 allows for the side's other processes and
    // for the load beside.
    let own = planted_pct(&bin);
    eprintln!(
        "planted_hot: {share:.1} % of the client's samples under `planted`, \
         {own:.1} % of the program's CPU time by its clock"
    );
    assert!(
        (share - own).abs() <= 15.0,
        "share {share} against {own} by the program's clock: {top:#}"
    );
    assert_eq!(top["share_a_pct"].as_f64().unwrap(), 0.0);
    // `work` is in both profiles, and shrank per second (it has less of the time).
    let shrank = client["shrank"].as_array().unwrap();
    assert!(shrank.iter().any(|c| c["function"] == "work"), "{client:#}");
    // Every recording has samples and a cost.
    for r in st["recordings"].as_array().unwrap() {
        assert!(r["samples"].as_u64().unwrap() > 0, "{r:#}");
        assert!(r["no_profile"].is_null(), "{r:#}");
        assert!(r["overhead_pct"].as_f64().is_some(), "{r:#}");
    }
    let shown = format!("{share:.1} %");

    // Terminal (the summary), Markdown and HTML: the same first row.
    let term = s.run_ok(&["show", "1"]);
    let row = first_row_after(&term, "---");
    assert!(
        row.trim_start().starts_with("planted_hot") && row.contains(&shown),
        "{row}\n{term}"
    );
    assert!(term.lines().all(|l| l.chars().count() <= 100), "{term}");
    let (md, html) = s.report_md_html("1");
    let row = first_row_after(&md, "|---");
    assert!(
        row.starts_with("| planted_hot | client |") && row.contains(&shown),
        "{row}"
    );
    let at = html
        .find("the functions whose CPU time grew most")
        .expect("the HTML's table");
    let first = &html[at..][html[at..].find("<tr><td").expect("a row")..];
    let first = &first[..first.find("</tr>").unwrap()];
    assert!(
        first.starts_with("<tr><td class=\"l\">planted_hot</td><td class=\"l\">client</td>")
            && first.contains(&shown),
        "{first}"
    );
    // Both kinds of flame graph, inline, naming the function.
    assert!(
        html.contains("<svg class=\"flame\" id=\"flame-diff-"),
        "a differential graph"
    );
    assert!(
        html.contains("<svg class=\"flame\" id=\"flame-"),
        "a profile's graph"
    );
    assert!(
        html.contains("<title>planted_hot ("),
        "a frame of planted_hot"
    );
    assert!(!html.contains("<style type"), "no style block of inferno's");
}

/// A study of one short fake point with stacks at `hz`.
fn fake_study(s: &Scratch, hz: u32) -> std::path::PathBuf {
    s.study(
        "fake.toml",
        &format!(
            r#"
[study]
name = "stacks-refused"
stacks = {{ hz = {hz} }}
[defaults]
repetitions = 1
quiesce_s = 0
[[workload]]
kind = "fake"
sleep_s = 0.2
"#
        ),
    )
}

/// The refusal: benchlab fails before any point ran, saying `fix`.
fn assert_refused(s: &Scratch, out: &std::process::Output, fix: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "ran:\n{err}");
    assert!(err.contains(fix), "the fix `{fix}` is not named:\n{err}");
    assert!(
        err.contains("fake.toml") && err.contains("`stacks` cannot sample"),
        "{err}"
    );
    // Nothing started: no point was stored.
    let list = s.run(&["list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        !text.contains("stacks-refused") || text.contains("failed"),
        "{text}"
    );
    if let Ok(db) = rusqlite_points(&s.db()) {
        assert_eq!(db, 0, "points were stored");
    }
}

/// The points stored, counted with the sqlite3 shell when it is here.
fn rusqlite_points(db: &Path) -> Result<u64, ()> {
    let out = Command::new("sqlite3")
        .arg(db)
        .arg("SELECT COUNT(*) FROM sample")
        .output()
        .map_err(|_| ())?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|_| ())
}

#[test]
fn a_host_without_perf_is_refused_naming_the_debian_package() {
    let s = Scratch::new();
    let study = fake_study(&s, 99);
    // A PATH without perf (and nothing else the fake workload needs).
    let empty = s.path("bin");
    std::fs::create_dir(&empty).unwrap();
    let out = s
        .benchlab()
        .env("PATH", &empty)
        .arg("run")
        .arg(&study)
        .output()
        .unwrap();
    assert_refused(&s, &out, "install the Debian package `linux-perf`");
}

#[test]
fn a_rate_above_the_hosts_limit_is_refused() {
    benchlab_testkit::require!(root, "perf");
    // It lowers a machine-wide limit for a moment: nothing else samples
    // meanwhile.
    let _alone = benchlab_testkit::alone();
    let s = Scratch::new();
    // Above benchlab's own limit: the study file's error.
    let out = s.run(&["run", fake_study(&s, 6000).to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("stacks.hz") && err.contains("allowed: 1 to 5000"),
        "{err}"
    );
    // Above this host's: the preflight's, naming the sysctl. Most hosts
    // allow more than benchlab does (this one 100,000), so the test
    // lowers the host's limit below benchlab's for the run and puts it
    // back however the test ends.
    let limit = SampleRateLimit::lower_to(1000);
    let out = s.run(&["run", fake_study(&s, 1001).to_str().unwrap()]);
    drop(limit);
    assert_refused(&s, &out, "kernel.perf_event_max_sample_rate");
}

/// kernel.perf_event_max_sample_rate lowered, and put back when dropped.
struct SampleRateLimit(String);

const MAX_SAMPLE_RATE: &str = "/proc/sys/kernel/perf_event_max_sample_rate";

impl SampleRateLimit {
    fn lower_to(hz: u32) -> Self {
        let was = std::fs::read_to_string(MAX_SAMPLE_RATE).unwrap();
        std::fs::write(MAX_SAMPLE_RATE, hz.to_string()).unwrap();
        SampleRateLimit(was.trim().to_string())
    }
}

impl Drop for SampleRateLimit {
    fn drop(&mut self) {
        let _ = std::fs::write(MAX_SAMPLE_RATE, &self.0);
    }
}

#[test]
fn a_non_root_agent_under_a_strict_paranoid_setting_is_refused() {
    benchlab_testkit::require!(root, "perf", "setpriv");
    let paranoid: i64 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    if paranoid <= 0 {
        // Raising it would change the machine for every test: this
        // test reads the setting, it does not make it.
        return benchlab_testkit::unsupported(format!(
            "kernel.perf_event_paranoid is {paranoid}: a non-root agent may sample here"
        ));
    }
    let s = Scratch::new();
    let study = fake_study(&s, 99);
    // benchlab as `nobody`, in a directory it may write.
    let dir = s.path("nobody");
    std::fs::create_dir(&dir).unwrap();
    let chown = |p: &Path| {
        assert!(Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(p)
            .status()
            .unwrap()
            .success())
    };
    std::fs::copy(&study, dir.join("fake.toml")).unwrap();
    chown(&dir);
    // The scratch itself must be passable for nobody.
    let _ = Command::new("chmod").args(["o+x"]).arg(s.path("")).status();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(benchlab_testkit::benchlab_bin())
        .arg("--db")
        .arg(dir.join("b.db"))
        .arg("run")
        .arg(dir.join("fake.toml"))
        .env("BENCHLAB_STATE_DIR", dir.join("state"))
        .env("TMPDIR", &dir)
        .env("HOME", &dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "ran:\n{err}");
    assert!(
        err.contains(&format!("kernel.perf_event_paranoid is {paranoid}"))
            && err.contains("sysctl -w kernel.perf_event_paranoid=0"),
        "{err}"
    );
}

/// The pid's parent, from /proc.
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`: the comm may hold spaces.
    stat[stat.rfind(')')? + 2..].split(' ').nth(1)?.parse().ok()
}

/// A `perf record` of a point descended from `root`.
fn perf_under(root: u32) -> Option<u32> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        // The point's recording, not the preflight's probes (`perf
        // --version`, killed once in a CI run, and the trial `perf record
        // … -- true`).
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let record = cmdline.split(|b| *b == 0).nth(1) == Some(b"record".as_slice());
        if comm.trim() != "perf" || !record || cmdline.ends_with(b"--\0true\0") {
            continue;
        }
        let mut p = pid;
        while let Some(up) = parent(p) {
            if up == root {
                return Some(pid);
            }
            if up <= 1 {
                break;
            }
            p = up;
        }
    }
    None
}

#[test]
fn a_recording_killed_mid_run_marks_its_point_and_keeps_the_measurement() {
    benchlab_testkit::require!(root, "perf");
    let _g = exclusive(&[Resource::Timing]);
    let s = Scratch::new();
    let study = s.study(
        "killed.toml",
        r#"
[study]
name = "stacks-killed"
stacks = true
[defaults]
repetitions = 1
quiesce_s = 0
[[workload]]
kind = "fake"
sleep_s = 4
"#,
    );
    let child = s
        .benchlab()
        .arg("run")
        .arg(&study)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut killed = None;
    benchlab_testkit::browser::wait(60, "perf record under benchlab", || {
        killed = perf_under(child.id());
        killed.is_some()
    });
    let perf = killed.unwrap();
    // perf's own process, by its id: the recording fails mid-point.
    unsafe { libc::kill(perf as i32, libc::SIGKILL) };
    let out = child.wait_with_output().unwrap();
    benchlab_testkit::assert_success(&out);
    let j = s.json("1");
    // The measurement is kept.
    assert_eq!(
        j["failures"].as_array().map_or(0, Vec::len),
        0,
        "{:#}",
        j["failures"]
    );
    assert!(!j["points"].as_array().unwrap().is_empty());
    let recs = j["stacks"]["recordings"].as_array().expect("recordings");
    let why = recs[0]["no_profile"][0]
        .as_str()
        .unwrap_or_else(|| panic!("{recs:#?}"));
    eprintln!("{why}");
    assert!(why.starts_with("repetition 1: "), "{why}");
    let md = s.run_ok(&["show", "1", "--format", "markdown"]);
    assert!(md.contains("no profile: repetition 1: "), "{md}");
}

/// The folded stacks of `side` at the run's first point, every host's.
fn folded(j: &serde_json::Value, side: &str) -> String {
    j["stacks"]["profiles"]
        .as_array()
        .expect("profiles")
        .iter()
        .filter(|p| p["side"] == side)
        .map(|p| p["folded"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn net_rr_shows_the_kernels_tcp_in_the_server_and_benchlabs_loop_in_the_client() {
    benchlab_testkit::require!(root, "perf");
    let _g = exclusive(&[Resource::Timing]);
    let s = Scratch::new();
    let study = s.study(
        "rr.toml",
        r#"
[study]
name = "stacks-rr"
stacks = { hz = 99 }
[defaults]
repetitions = 1
quiesce_s = 0
warmup_s = 0.2
duration_s = 2
[[workload]]
kind = "net.rr"
protocol = "tcp"
"#,
    );
    s.run_ok(&["run", study.to_str().unwrap()]);
    let j = s.json("1");
    let server = folded(&j, "server");
    let client = folded(&j, "client");
    assert!(
        !server.is_empty() && !client.is_empty(),
        "{:#}",
        j["stacks"]
    );
    // The server's own sends go down the kernel's TCP under its stacks.
    assert!(
        server.contains(";tcp_sendmsg"),
        "no tcp_sendmsg in the server's stacks:\n{server}"
    );
    // The client's stacks hold benchlab's request/response loop.
    assert!(
        client.contains(";benchlab_wl_net::rr::"),
        "no benchlab_wl_net::rr frame in the client's stacks:\n{client}"
    );
    let (_, html) = s.report_md_html("1");
    assert!(
        html.contains("tcp_sendmsg"),
        "the server's flame graph names it"
    );
}

#[test]
fn web_load_profiles_nginxs_worker_processes() {
    benchlab_testkit::require!(root, "perf", "nginx");
    let _g = exclusive(&[Resource::Timing]);
    let s = Scratch::new();
    let study = s.study(
        "web.toml",
        r#"
[study]
name = "stacks-web"
stacks = { hz = 99 }
[defaults]
repetitions = 1
quiesce_s = 0
warmup_s = 0.2
duration_s = 2
[[service]]
name = "web"
kind = "nginx"
[[workload]]
kind = "web.load"
service = "web"
clients = 2
keep_alive = false
"#,
    );
    let out = s
        .benchlab_tmp()
        .args(["run", study.to_str().unwrap()])
        .output()
        .unwrap();
    benchlab_testkit::assert_success(&out);
    let j = s.json("1");
    let nginx = folded(&j, "service:web");
    assert!(!nginx.is_empty(), "no profile of nginx: {:#}", j["stacks"]);
    // Every stack of the side is an nginx process's.
    assert!(nginx.lines().all(|l| l.starts_with("nginx;")), "{nginx}");
    // The workers' work: accepting and answering connections (the
    // master only waits for signals).
    let answered = nginx
        .lines()
        .filter(|l| l.contains("accept") || l.contains("tcp_sendmsg") || l.contains("writev"))
        .count();
    assert!(answered > 0, "no worker's accept or send:\n{nginx}");
}

/// Collects the page's content-security-policy violations from before
/// it loads (a DevTools script, which the page's policy does not cover).
const CSP_WATCH: &str = "window.__csp=[];document.addEventListener('securitypolicyviolation',function(e){window.__csp.push(e.violatedDirective+' '+e.blockedURI+' '+e.sourceFile+':'+e.lineNumber);});";

/// Each flame graph's box, the page's width and what it scrolled.
const FLAMES: &str = "var w=document.documentElement.clientWidth;
return {width:w,scroll:document.documentElement.scrollWidth,csp:window.__csp||null,
flames:Array.from(document.querySelectorAll('svg.flame')).map(function(s){var r=s.getBoundingClientRect();
return {id:s.id,left:r.left,right:r.right,width:r.width,height:r.height,frames:s.querySelectorAll('g>rect').length};})};";

#[test]
fn both_kinds_of_flame_graph_render_in_a_browser_without_csp_violations() {
    use benchlab_testkit::browser::{browser, http, serve, Kids};
    use serde_json::{json, Value};
    benchlab_testkit::require!(root, "perf", "gcc");
    // The run samples every CPU; the lock comes before the scratch.
    let _g = exclusive(&[Resource::Timing]);
    let s = Scratch::new();
    let downloads = s.path("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let mut kids = Kids(Vec::new());
    let Some(web) = browser(&mut kids, &s.path("chromium-profile"), &downloads) else {
        return benchlab_testkit::missing(
            "chromium and chromedriver (Debian's chromium, chromium-driver)",
        );
    };
    let bin = build(&s.path(""));
    // Two seconds, as in the planted-function test: a one-second point
    // on a loaded machine (a CI run) left the planted configuration
    // without a profile, so no differential graph was drawn.
    s.run_ok(&["run", planted_study(&s, &bin, 1, 2).to_str().unwrap()]);
    let addr = serve(&s, &mut kids, &[]);
    // The report file under serve's own policy, as a meta element (the
    // file has none of its own: a browser opening it from disk runs it
    // as it is; the policy shows it would need nothing more).
    let (code, head, _) = http(addr, "GET", "/run/1/", &[], None).unwrap();
    assert_eq!(code, 200);
    let policy = head
        .lines()
        .find_map(|l| l.strip_prefix("content-security-policy: "))
        .unwrap_or_else(|| panic!("no policy: {head}"))
        .trim()
        .replace("; frame-ancestors 'none'", "");
    let (_, html) = s.report_md_html("1");
    let html = html.replacen(
        "<head>",
        &format!("<head><meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">"),
        1,
    );
    let file = s.path("report-csp.html");
    std::fs::write(&file, html).unwrap();
    web.cmd(
        "POST",
        "/chromium/send_command",
        Some(json!({"cmd": "Page.addScriptToEvaluateOnNewDocument", "params": {"source": CSP_WATCH}})),
    );
    for width in [1280u64, 420] {
        web.cmd(
            "POST",
            "/window/rect",
            Some(json!({"width": width, "height": 900})),
        );
        for url in [
            format!("http://{addr}/run/1/"),
            format!("file://{}", file.display()),
        ] {
            web.open(&url);
            let o: Value = web.script(FLAMES);
            eprintln!("{url} at {width} px: {o}");
            let w = o["width"].as_f64().unwrap();
            assert!(w <= width as f64, "{o}");
            assert_eq!(o["csp"], json!([]), "{url}: policy violations: {o}");
            let flames = o["flames"].as_array().unwrap();
            let diff = flames
                .iter()
                .filter(|f| f["id"].as_str().unwrap().starts_with("flame-diff-"))
                .count();
            assert!(diff >= 1 && flames.len() > diff, "{url}: both kinds: {o}");
            for f in flames {
                // Drawn, not collapsed: an SVG keeps its aspect, so a
                // shallow graph (few sampled levels) 50 px tall at 1,100 px
                // is about 18 px tall at 420 px.
                let fw = f["width"].as_f64().unwrap();
                assert!(
                    fw > 100.0 && f["height"].as_f64().unwrap() > 50.0 * fw.min(1100.0) / 1100.0,
                    "{url}: drawn: {f}"
                );
                assert!(
                    f["left"].as_f64().unwrap() >= -1.0 && f["right"].as_f64().unwrap() <= w + 1.0,
                    "{url} at {width} px: within the page: {f}"
                );
                assert!(f["frames"].as_u64().unwrap() > 2, "{f}");
            }
            assert!(
                o["scroll"].as_f64().unwrap() <= w + 1.0,
                "{url}: nothing scrolls sideways: {o}"
            );
        }
    }
}
