//! A real browser for the web UI's tests: Debian's chromium, headless,
//! driven through chromedriver (WebDriver over HTTP), and `benchlab
//! serve` on a free loopback port. One chromium per test binary: a test
//! opens every page it checks in one session.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use crate::Scratch;

/// Child processes killed (and reaped) when the test ends, however it
/// ends.
pub struct Kids(pub Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A free port on loopback (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path`: (status, headers, body as text); panics naming the path
/// when the exchange fails.
pub fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let (code, head, body) =
        http(addr, "GET", path, &[], None).unwrap_or_else(|e| panic!("GET {path}: {e}"));
    (code, head, String::from_utf8_lossy(&body).into_owned())
}

/// What a page wrote inside the element whose id is `id`: from its
/// opening tag's end up to `end` (`"<"`: its text before any child tag;
/// `"</td>"`: a cell's whole content), escaped as the page wrote it.
pub fn inner<'a>(page: &'a str, id: &str, end: &str) -> &'a str {
    let at = page
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {page}"));
    let rest = &page[at..];
    let start = rest.find('>').unwrap() + 1;
    let stop = rest[start..]
        .find(end)
        .unwrap_or_else(|| panic!("#{id} has no {end:?} after it in {page}"));
    &rest[start..start + stop]
}

/// One HTTP/1.1 exchange (`Connection: close`): (status, headers, body).
pub fn http(
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
pub struct Driver {
    /// chromedriver's address.
    pub addr: SocketAddr,
    /// The session's id.
    pub session: String,
}

impl Driver {
    /// Sends a command; panics with WebDriver's error when it fails.
    pub fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let full = format!("/session/{}{path}", self.session);
        let (code, _, b) = http(self.addr, method, &full, &[], body.as_ref())
            .unwrap_or_else(|e| panic!("chromedriver {method} {full}: {e}"));
        let v: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
        assert_eq!(code, 200, "chromedriver {method} {full}: {v}");
        v["value"].clone()
    }

    /// Opens `url` in the session's window.
    pub fn open(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url })));
    }

    /// The element that `css` selects (waiting up to 10 s for it).
    pub fn find(&self, css: &str) -> String {
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

    /// Clicks the element that `css` selects.
    pub fn click(&self, css: &str) {
        let e = self.find(css);
        self.cmd("POST", &format!("/element/{e}/click"), Some(json!({})));
    }

    /// The text of the element that `css` selects.
    pub fn text(&self, css: &str) -> String {
        let e = self.find(css);
        self.cmd("GET", &format!("/element/{e}/text"), None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Runs `script` in the page; what it returns.
    pub fn script(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Saves a screenshot of the viewport as `dir/name.png`.
    pub fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
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
pub fn browser(kids: &mut Kids, profile: &Path, downloads: &Path) -> Option<Driver> {
    let driver = crate::find_program("chromedriver")?;
    let chromium = crate::find_program("chromium")?;
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
pub fn serve(s: &Scratch, kids: &mut Kids, extra: &[&str]) -> SocketAddr {
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

/// Waits up to `secs` for `f` to hold, polling every 200 ms.
pub fn wait(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
