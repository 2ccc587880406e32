//! Issue 15: `benchlab serve` in a real browser — Debian's chromium,
//! headless, driven through chromedriver (WebDriver over HTTP). The data
//! come from a real short run of a real study (net.rr on loopback, two
//! placements), watched live while it runs; the compare page's numbers
//! are checked against `benchlab compare --format json` of the same
//! columns; the JSON download is parsed; screenshots are kept. Also: a
//! non-loopback bind without a token is refused, and with one, a request
//! without it gets 401.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use common::Scratch;
use serde_json::{json, Value};

/// The shipped demo study (studies/demo.toml: every network workload, client
/// and server on one CPU vs on two, iperf3 beside the TCP stream, 3
/// repetitions interleaved, 84 units),
/// run for real at a quarter of its durations: long enough to be watched
/// while it runs.
const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/studies/demo.toml");
const DEMO_SCALE: &str = "0.25";

/// Child processes killed (and reaped) when the test ends, however it
/// ends.
struct Kids(Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A free port on loopback (bound, read, released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.1 exchange (`Connection: close`): (status, headers, body).
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> std::io::Result<(u16, String, Vec<u8>)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        payload.len()
    );
    if body.is_some() {
        req.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&payload);
    s.write_all(req.as_bytes())?;
    let mut r = BufReader::new(s);
    let mut status = String::new();
    r.read_line(&mut status)?;
    let code: u16 = status
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut head = String::new();
    let mut len = None;
    loop {
        let mut l = String::new();
        if r.read_line(&mut l)? == 0 || l == "\r\n" {
            break;
        }
        if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse::<usize>().ok();
        }
        head.push_str(&l);
    }
    let mut body = Vec::new();
    match len {
        Some(n) => {
            body.resize(n, 0);
            r.read_exact(&mut body)?;
        }
        None => {
            r.read_to_end(&mut body)?;
        }
    }
    Ok((code, head, body))
}

/// A WebDriver session on chromedriver.
struct Driver {
    addr: SocketAddr,
    session: String,
}

impl Driver {
    /// Sends a command; panics with WebDriver's error when it fails.
    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let full = format!("/session/{}{path}", self.session);
        let (code, _, b) = http(self.addr, method, &full, &[], body.as_ref())
            .unwrap_or_else(|e| panic!("chromedriver {method} {full}: {e}"));
        let v: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
        assert_eq!(code, 200, "chromedriver {method} {full}: {v}");
        v["value"].clone()
    }

    fn open(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url })));
    }

    /// The element that `css` selects (waiting up to 10 s for it).
    fn find(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let full = format!("/session/{}/element", self.session);
            let q = json!({"using": "css selector", "value": css});
            let (code, _, b) = http(self.addr, "POST", &full, &[], Some(&q)).unwrap();
            let v: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
            if code == 200 {
                return v["value"]["element-6066-11e4-a52e-4f735466cecf"]
                    .as_str()
                    .expect("element id")
                    .to_string();
            }
            assert!(Instant::now() < deadline, "no element `{css}`: {v}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn click(&self, css: &str) {
        let e = self.find(css);
        self.cmd("POST", &format!("/element/{e}/click"), Some(json!({})));
    }

    fn text(&self, css: &str) -> String {
        let e = self.find(css);
        self.cmd("GET", &format!("/element/{e}/text"), None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn script(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Saves a screenshot of the viewport as `dir/name.png`.
    fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        let b64 = self.cmd("GET", "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("base64"))
            .expect("screenshot decodes");
        assert!(png.starts_with(b"\x89PNG") && png.len() > 5_000);
        let p = dir.join(format!("{name}.png"));
        std::fs::write(&p, png).unwrap();
        p
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Ends chromium; chromedriver itself is killed by its guard.
        let path = format!("/session/{}", self.session);
        let _ = http(self.addr, "DELETE", &path, &[], None);
    }
}

/// Starts chromedriver and a headless chromium session downloading into
/// `downloads`. None when chromium or chromedriver is missing.
fn browser(kids: &mut Kids, profile: &Path, downloads: &Path) -> Option<Driver> {
    let driver = benchlab_testkit::find_program("chromedriver")?;
    let chromium = benchlab_testkit::find_program("chromium")?;
    let port = free_port();
    kids.0.push(
        Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver"),
    );
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + Duration::from_secs(20);
    while http(addr, "GET", "/status", &[], None).map(|r| r.0).ok() != Some(200) {
        assert!(Instant::now() < deadline, "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The network here is closed: everything chromium would fetch on its
    // own (updates, sync, QUIC probes) is turned off, else it stalls.
    let caps = json!({"capabilities": {"alwaysMatch": {
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--window-size=1200,1400",
                     format!("--user-data-dir={}", profile.display())],
            "prefs": {"download.default_directory": downloads,
                      "download.prompt_for_download": false}
        }
    }}});
    let (code, _, b) = http(addr, "POST", "/session", &[], Some(&caps)).expect("new session");
    let v: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
    assert_eq!(code, 200, "new session: {v}");
    let d = Driver {
        addr,
        session: v["value"]["sessionId"].as_str().unwrap().to_string(),
    };
    // Chromium's own command to allow downloads in headless mode.
    let _ = http(
        addr,
        "POST",
        &format!("/session/{}/chromium/send_command", d.session),
        &[],
        Some(&json!({"cmd": "Page.setDownloadBehavior",
                     "params": {"behavior": "allow", "downloadPath": downloads}})),
    );
    Some(d)
}

/// Starts `benchlab serve` on a free loopback port; returns its address.
fn serve(s: &Scratch, kids: &mut Kids, extra: &[&str]) -> SocketAddr {
    let mut child = s
        .benchlab()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env_remove("BENCHLAB_SERVE_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start benchlab serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    kids.0.push(child);
    let url = line
        .split("http://")
        .nth(1)
        .unwrap_or_else(|| panic!("serve printed {line:?}"));
    url.split('/').next().unwrap().parse().unwrap()
}

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

/// The page's class for a JSON verdict.
fn verdict_class(v: &Value) -> &'static str {
    match v["comparison"]["verdict"].as_str() {
        Some("better") => "better",
        Some("worse") => "worse",
        Some("within_noise") => "noise",
        Some("inconclusive") => "inconclusive",
        _ => "",
    }
}

/// The results tables of the comparison as the browser shows them: per
/// table (each follows its `h4` title), the rows of (class, text) cells.
const READ_TABLES: &str = "
var out=[];document.querySelectorAll('#comparison h4').forEach(function(h){
var t=h.nextElementSibling;while(t&&t.tagName!=='TABLE'){t=t.nextElementSibling;}
if(!t)return;var rows=[];t.querySelectorAll('tr').forEach(function(tr,i){if(i===0)return;
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
    s.run_ok(&["list"]);
    let addr = serve(&s, &mut kids, &[]);
    let base = format!("http://{addr}");
    let mut run = s
        .benchlab()
        .args(["run", "--scale", DEMO_SCALE, DEMO])
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
        progress.contains("/ 84 units") && progress.contains("left"),
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
    s.run_ok(&["list"]);
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
    s.run_ok(&["list"]);
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
