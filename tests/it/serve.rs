//! Issue 15: `benchlab serve` in a real browser — Debian's chromium,
//! headless, driven through chromedriver (WebDriver over HTTP). The data
//! come from a real short run of a real study (net.rr on loopback, two
//! placements), watched live while it runs; the compare page's numbers
//! are checked against `benchlab compare --format json` of the same
//! columns; the JSON download is parsed; screenshots are kept. Also: a
//! non-loopback bind without a token is refused, and with one, a request
//! without it gets 401.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use benchlab_testkit::browser::{browser, http, serve, Kids};
use benchlab_testkit::Scratch;
use serde_json::{json, Value};

/// The shipped demo study (studies/demo.toml: every network workload, client
/// and server on one CPU vs on two, iperf3 beside the TCP stream), in its
/// fixed design (3 repetitions interleaved, 78 units, a known total),
/// run for real at its own short durations (0.25 s repetitions): long
/// enough to be watched while it runs.
const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/studies/demo.toml");
const DEMO_SCALE: &str = "1";

/// The figure at the start of a cell's text (`1,234.5 ±1.2%`).
fn number(text: &str) -> f64 {
    let t: String = text
        .trim()
        .trim_start_matches('+')
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | ',' | '-'))
        .filter(|c| *c != ',')
        .collect();
    t.parse()
        .unwrap_or_else(|_| panic!("no number in cell {text:?}"))
}

/// The page's class for a JSON advantage: its verdict under the
/// sequential rule.
fn verdict_class(v: &Value) -> &'static str {
    match v["decided"].as_str() {
        Some("better") => "better",
        Some("worse") => "worse",
        Some("equivalent") => "equivalent",
        Some("undecided") => "undecided",
        _ => "",
    }
}

/// The results tables of the comparison as the browser shows them: per
/// table (each follows its `h4` title, in its scroll container), the rows
/// of (class, text) cells;
/// the monitors' tables (under `h4.monitors`) are not result tables.
const READ_TABLES: &str = "
var out=[];document.querySelectorAll('#comparison h4').forEach(function(h){
if(h.classList.contains('monitors'))return;
var t=h.nextElementSibling;while(t&&t.tagName!=='TABLE'&&!(t.tagName==='DIV'&&t.querySelector('table'))){t=t.nextElementSibling;}
if(!t)return;if(t.tagName!=='TABLE')t=t.querySelector('table');var rows=[];t.querySelectorAll('tr').forEach(function(tr,i){if(i===0)return;
var cells=[];tr.querySelectorAll('td').forEach(function(td){cells.push([td.className,td.innerText]);});rows.push(cells);});
out.push({title:h.innerText,rows:rows});});return out;";

/// Checks every figure, advantage and verdict the page shows against the
/// JSON of `benchlab compare`: the same tables in the same order, each
/// shown figure within rounding of the JSON's.
fn check_against(page: &Value, want: &Value) {
    let tables = want["tables"].as_array().unwrap();
    let shown = page.as_array().unwrap();
    assert_eq!(shown.len(), tables.len(), "tables shown: {page}");
    let mut checked = 0;
    for (t, p) in tables.iter().zip(shown) {
        let ncol = t["columns"].as_array().unwrap().len();
        let half = |d: &Value| 0.5 * 10f64.powi(-(d.as_i64().unwrap() as i32)) + 1e-9;
        let rows: Vec<&Value> = t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .chain(t["average"].as_object().map(|_| &t["average"]))
            .collect();
        let prows = p["rows"].as_array().unwrap();
        assert_eq!(prows.len(), rows.len(), "{}: rows", t["title"]);
        for (r, pr) in rows.iter().zip(prows) {
            let cell = |i: usize| (pr[i][0].as_str().unwrap(), pr[i][1].as_str().unwrap());
            assert_eq!(cell(0).1, r["label"].as_str().unwrap());
            for k in 0..ncol {
                let v = r["cells"][k]["value"].as_f64().unwrap();
                let shown = number(cell(1 + 2 * k).1);
                assert!(
                    (shown - v).abs() <= half(&t["decimals"]),
                    "{} row {}: column {k} shows {shown}, compare says {v}",
                    t["title"],
                    r["label"]
                );
                checked += 1;
            }
            for k in 1..ncol {
                let a = &r["advantages"][k - 1];
                let (class, text) = cell(1 + 2 * ncol + 2 * (k - 1));
                if a.is_null() {
                    assert_eq!(text.trim(), "-");
                    continue;
                }
                let pct = a["pct"].as_f64().unwrap();
                let shown = number(text);
                assert!(
                    (shown - pct).abs() <= half(&t["advantage_decimals"]),
                    "{} row {}: advantage shows {shown}, compare says {pct}",
                    t["title"],
                    r["label"]
                );
                assert_eq!(class, verdict_class(a), "verdict of {text}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 6, "{checked} figures checked");
}

/// Waits until `f` holds (or panics after `secs`).
fn wait_for(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The whole tour: a run watched live in the runs list, its report, a
/// comparison picked in the page and checked against `benchlab compare`,
/// the JSON download, the hosts side by side, and a missing run's 404.
#[test]
fn serve_in_a_real_browser() {
    let s = Scratch::new();
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let downloads = s.path("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let mut kids = Kids(Vec::new());
    let Some(web) = browser(&mut kids, &s.path("chromium-profile"), &downloads) else {
        return benchlab_testkit::missing(
            "chromium and chromedriver (Debian's chromium, chromium-driver)",
        );
    };
    // An empty store first (serve opens an existing store only), then the
    // server, then the run: the runs list sees it running.
    s.run_ok(&["store", "upgrade"]);
    let addr = serve(&s, &mut kids, &[]);
    let base = format!("http://{addr}");
    let mut run = s
        .benchlab()
        .args(["run", "--design", "fixed", "--scale", DEMO_SCALE, DEMO])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(30, "run 1 running with a unit done", || {
        let (_, _, b) = http(addr, "GET", "/api/runs", &[], None).unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        v[0]["status"] == "running" && v[0]["progress"]["done"].as_u64() > Some(0)
    });
    web.open(&format!("{base}/"));
    assert_eq!(web.text("#status-1"), "running");
    let progress = web.text("#progress-1");
    assert!(
        progress.contains("/ 78 units") && progress.contains("left"),
        "{progress}"
    );
    web.screenshot(&shots, "runs-running");
    let mut stderr = String::new();
    run.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = run.wait().unwrap();
    // Every repetition succeeds: iperf3's refusals while its server is
    // still closing the previous test are waited out by the adapter.
    assert!(status.success(), "benchlab run: {status}\n{stderr}");
    // No reload: the page's poll updates the row.
    wait_for(15, "the runs list to show run 1 completed", || {
        web.text("#status-1") == "completed"
    });
    assert_eq!(web.text("#progress-1"), "complete");
    let runs_shot = web.screenshot(&shots, "runs");

    // A run: the report the HTML renderer writes.
    web.click("#run-1");
    assert_eq!(web.text("h1"), "demo");
    let report = web.script("return document.body.innerText;");
    let report = report.as_str().unwrap();
    for part in [
        "Headline findings",
        "Cross-check · stream (throughput_mbps) / iperf3 (throughput_Mbps)",
        "Appendix A — system configuration",
        "Appendix B — methodology",
        "same-cpu",
        "split-cpus",
    ] {
        assert!(report.contains(part), "the run page lacks {part}");
    }
    let charts = web.script("return document.querySelectorAll('svg.chart g.data').length;");
    assert!(charts.as_u64() >= Some(1), "charts drawn: {charts}");
    web.screenshot(&shots, "run");

    // Compare: two configurations ticked, split-cpus the baseline.
    web.click("#nav-compare");
    web.click("#c-1-0");
    web.click("#c-1-1");
    web.click("#base-1-1");
    web.click("#compare-go");
    web.find("#comparison");
    let want: Value = serde_json::from_str(&s.run_ok(&[
        "compare",
        "1:same-cpu",
        "1:split-cpus",
        "--baseline",
        "1:split-cpus",
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(want["tables"][0]["columns"][0], "1:split-cpus");
    let shown = web.script(READ_TABLES);
    check_against(&shown, &want);
    web.screenshot(&shots, "compare");

    // The JSON download: saved by the browser, parsed, the same model.
    web.click("#download-json");
    let file = downloads.join("benchlab-comparison.json");
    wait_for(15, "the JSON download", || {
        std::fs::read_to_string(&file)
            .ok()
            .is_some_and(|t| serde_json::from_str::<Value>(&t).is_ok())
    });
    let got: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(got["tables"], want["tables"]);
    assert_eq!(got["configurations"], want["configurations"]);

    // Hosts: the two hosts of the run side by side.
    web.open(&format!("{base}/hosts?a=1:sut&b=1:generator"));
    let head = web.text("#hosts table tr");
    assert!(
        head.contains("run 1: sut") && head.contains("run 1: generator"),
        "{head}"
    );
    let rows = web.script("return document.querySelectorAll('#hosts table tr').length;");
    assert!(rows.as_u64() > Some(10), "{rows} inventory rows");
    web.screenshot(&shots, "hosts");

    // A run that does not exist: 404 with a clear message.
    web.open(&format!("{base}/run/99"));
    let text = web.text("body");
    assert!(text.contains("404") && text.contains("no run 99"), "{text}");
    let (code, _, _) = http(addr, "GET", "/run/99", &[], None).unwrap();
    assert_eq!(code, 404);
    eprintln!(
        "serve screenshots: {} (runs list: {})",
        shots.display(),
        runs_shot.display()
    );
}

/// A non-loopback address without a token is refused at start; with a
/// token, a request without it gets 401, one with it is served, and a
/// browser's `?token=` sets the cookie that carries it afterwards.
#[test]
fn serve_elsewhere_than_loopback_needs_a_token() {
    let s = Scratch::new();
    s.run_ok(&["store", "upgrade"]);
    let out = s
        .benchlab()
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env_remove("BENCHLAB_SERVE_TOKEN")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started without a token: {err}");
    assert!(
        err.contains("not a loopback address") && err.contains("token"),
        "{err}"
    );

    let token = "s3cret-token-0123456789";
    let file = s.path("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    // A token file others may read is refused, as an agent's key file is
    // (issue 41 item 3); private to its owner, it is taken.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = s
        .benchlab()
        .args(["serve", "--listen", "0.0.0.0:0", "--token-file"])
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "started with a readable token: {err}"
    );
    assert!(
        err.contains("accessible by group or others (mode 0644)") && err.contains("chmod 600"),
        "{err}"
    );
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut kids = Kids(Vec::new());
    let mut child = s
        .benchlab()
        .args(["serve", "--listen", "0.0.0.0:0", "--token-file"])
        .arg(&file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    kids.0.push(child);
    let port: u16 = line
        .rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("serve printed {line:?}"));
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let (code, _, body) = http(addr, "GET", "/", &[], None).unwrap();
    assert_eq!(code, 401, "{}", String::from_utf8_lossy(&body));
    let (code, _, _) = http(
        addr,
        "GET",
        "/api/runs",
        &[("Authorization", "Bearer wrong-token-000000")],
        None,
    )
    .unwrap();
    assert_eq!(code, 401);
    let bearer = format!("Bearer {token}");
    let (code, _, body) = http(
        addr,
        "GET",
        "/api/runs",
        &[("Authorization", &bearer)],
        None,
    )
    .unwrap();
    assert_eq!(code, 200);
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), json!([]));
    let (code, head, _) = http(addr, "GET", &format!("/?token={token}"), &[], None).unwrap();
    assert_eq!(code, 200);
    assert!(head.contains("benchlab_token="), "{head}");
    let cookie = format!("benchlab_token={token}");
    let (code, _, _) = http(addr, "GET", "/compare", &[("Cookie", &cookie)], None).unwrap();
    assert_eq!(code, 200);

    // The same token from the environment; an empty token file is an error.
    std::fs::write(&file, "\n").unwrap();
    let out = s
        .benchlab()
        .args(["serve", "--listen", "0.0.0.0:0", "--token-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty"));
}

/// Bad requests get a clear 4xx, never a dropped connection.
#[test]
fn serve_answers_bad_requests_with_4xx() {
    let s = Scratch::new();
    s.run_ok(&["store", "upgrade"]);
    let mut kids = Kids(Vec::new());
    let addr = serve(&s, &mut kids, &[]);
    for (path, code, words) in [
        ("/nope", 404, "no page /nope"),
        ("/run/abc", 400, "not a run id"),
        ("/run/-1", 400, "not a run id"),
        ("/run/7", 404, "no run 7"),
        ("/run/7/report.json", 404, "no run 7"),
        ("/compare?c=x:y", 400, "column `x:y`"),
        ("/compare/report.json", 400, "pick at least two"),
        ("/hosts?a=3", 404, "no run 3"),
        ("/hosts/report.exe?a=1", 404, "no run 1"),
        ("/%zz", 400, "percent-encoding"),
    ] {
        let (got, _, body) = http(addr, "GET", path, &[], None).unwrap();
        let body = String::from_utf8_lossy(&body);
        assert_eq!(got, code, "{path}: {body}");
        assert!(body.contains(words), "{path}: {body}");
    }
    let (got, _, _) = http(addr, "POST", "/", &[], None).unwrap();
    assert_eq!(got, 405);
    // Not HTTP at all.
    let mut raw = TcpStream::connect(addr).unwrap();
    raw.write_all(b"hello\r\n\r\n").unwrap();
    let mut answer = String::new();
    raw.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
}
