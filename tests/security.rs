//! Security findings of issue 25, each a test that failed before the fix:
//! the store's password in `serve`'s messages, unbounded waits on a store
//! that does not answer, an empty database's raw PostgreSQL error, and a
//! read command that created the store it was pointed at.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use benchlab_testkit::pg;
use common::Scratch;

/// `benchlab --db DB ARGS…` in the scratch directory (a relative `--db`
/// lands there), without a `BENCHLAB_DB` from outside.
fn benchlab(s: &Scratch, db: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_benchlab"));
    c.arg("--db").arg(db).args(args);
    c.current_dir(s.dir.path());
    c.env("BENCHLAB_STATE_DIR", s.path("state"));
    c.env_remove("BENCHLAB_DB");
    c
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd` and kills it if it has not ended after `limit`: a hang is a
/// failure with a message, not a test that never ends.
fn run_within(mut cmd: Command, limit: Duration) -> (Output, Duration) {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start benchlab");
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "still waiting after {limit:?}: the wait is not bounded\n{}",
                text(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = start.elapsed();
    (child.wait_with_output().expect("output"), elapsed)
}

/// A PostgreSQL "server" that accepts connections and never says a word:
/// the connections it accepted are kept open until the test ends.
struct Silent {
    port: u16,
    _keep: std::thread::JoinHandle<()>,
}

fn silent_listener() -> Silent {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().unwrap().port();
    let keep = std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming().flatten() {
            // Read what the client sends (so that it is not refused by a
            // full buffer) and answer nothing.
            let mut c2 = c.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut buf = [0u8; 512];
                while matches!(c2.read(&mut buf), Ok(n) if n > 0) {}
            });
            held.push(c);
        }
    });
    Silent { port, _keep: keep }
}

/// Issue 25: a store that accepts the connection and never answers was
/// waited on for ever; now every command that opens it fails within the
/// URL's `connect_timeout`, saying so.
#[test]
fn a_silent_store_is_a_clear_error_within_the_bound() {
    let s = Scratch::new();
    let silent = silent_listener();
    let url = format!(
        "postgres://lab:hidden-pw@127.0.0.1:{}/bench?connect_timeout=2",
        silent.port
    );
    for args in [
        &["list"][..],
        &["show", "1"],
        &["serve", "--listen", "127.0.0.1:0"],
    ] {
        let (out, took) = run_within(benchlab(&s, &url, args), Duration::from_secs(20));
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {t}");
        assert!(
            took < Duration::from_secs(8),
            "{args:?} took {took:?} for a 2 s bound"
        );
        assert!(t.contains("no answer within 2 s"), "{args:?}: {t}");
        assert!(t.contains("postgres://lab:***@127.0.0.1"), "{args:?}: {t}");
        assert!(!t.contains("hidden-pw"), "{args:?}: {t}");
    }
}

/// The default bound is 10 s (docs/store.md), not the client's "for
/// ever" for a connection that is open but silent.
#[test]
fn the_default_connect_bound_is_ten_seconds() {
    let s = Scratch::new();
    let silent = silent_listener();
    let url = format!("postgres://lab@127.0.0.1:{}/bench", silent.port);
    let (out, took) = run_within(benchlab(&s, &url, &["list"]), Duration::from_secs(40));
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("no answer within 10 s"), "{t}");
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(20),
        "{took:?}"
    );
}

/// Issue 25: `benchlab show 1 --db typo.db` created `typo.db`. A read
/// command now says the file is not there and creates nothing; `list`
/// is the command that creates a store.
#[test]
fn a_read_command_never_creates_a_store() {
    let s = Scratch::new();
    for args in [
        &["show", "1"][..],
        &["show"],
        &["report", "1", "--json", "r.json"],
        &["compare", "1", "2"],
        &["serve", "--listen", "127.0.0.1:0"],
    ] {
        let out = benchlab(&s, "typo.db", args).output().unwrap();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {t}");
        assert!(
            t.contains("typo.db: no benchlab store here (the file does not exist)"),
            "{args:?}: {t}"
        );
        assert!(t.contains("`benchlab list` creates it"), "{args:?}: {t}");
        assert!(!s.path("typo.db").exists(), "{args:?} created the store");
        assert!(!s.path("r.json").exists());
    }
    // An empty file (made by `touch`) is no store either, and stays empty.
    std::fs::write(s.path("empty.db"), b"").unwrap();
    let out = benchlab(&s, "empty.db", &["show", "1"]).output().unwrap();
    assert!(
        text(&out).contains("empty.db: no benchlab store here (the file holds no benchlab tables)"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::metadata(s.path("empty.db")).unwrap().len(), 0);
    // `list` makes the store, and then the read commands find it.
    let out = benchlab(&s, "typo.db", &["list"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(s.path("typo.db").exists());
    let out = benchlab(&s, "typo.db", &["show", "1"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no run 1"),
        "{}",
        text(&out)
    );
}

fn server() -> Option<pg::Shared> {
    match pg::shared() {
        Ok(s) => Some(s),
        Err(what) => {
            benchlab_testkit::missing(what);
            None
        }
    }
}

/// Issue 25: `benchlab serve` printed the PostgreSQL password (a wrong
/// password, an empty database, `password=` in the URL), and an empty
/// database answered with PostgreSQL's raw `relation "benchlab_schema"
/// does not exist`.
#[test]
fn serve_and_the_read_commands_never_print_the_store_password() {
    let Some(pg) = server() else { return };
    let s = Scratch::new();
    pg.create_database("sec_empty");
    let secret = pg::password();
    let url = pg.password_url("sec_empty");
    let socket = pg.socket_dir();
    let param_url = format!(
        "postgres:///sec_empty?host={}&user={}&password={secret}",
        socket.display(),
        pg::PASSWORD_USER
    );
    let wrong = url.replace(&secret, "not-the-password");
    let wrong_param = param_url.replace(&secret, "not-the-password");
    let missing_db = url.replace("/sec_empty?", "/sec_no_such_db?");
    let mut outs = Vec::new();
    for db in [&url, &param_url, &wrong, &wrong_param, &missing_db] {
        for args in [
            &["serve", "--listen", "127.0.0.1:0"][..],
            &["show", "1"],
            &["report", "1", "--json", "r.json"],
        ] {
            let (out, _) = run_within(benchlab(&s, db, args), Duration::from_secs(30));
            assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
            outs.push((db.clone(), args, out));
        }
    }
    for (db, args, out) in &outs {
        let t = text(out);
        assert!(!t.contains(&secret), "{args:?}: {t}");
        assert!(!t.contains("not-the-password"), "{args:?}: {t}");
        assert!(!t.contains("benchlab_schema"), "{args:?}: {t}");
        if db == &url || db == &param_url {
            assert!(
                t.contains("no benchlab store here (the database has no benchlab tables): `benchlab list` creates it"),
                "{args:?}: {t}"
            );
        } else {
            assert!(t.contains("cannot connect to"), "{args:?}: {t}");
        }
    }
    // The read commands created nothing: the database is still empty.
    let tables = pg.psql(
        "sec_empty",
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
    );
    assert_eq!(tables.trim(), "0");
    // `list` creates the store there.
    let out = benchlab(&s, &url, &["list"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains(&secret));
}

/// A key file (mode 600) holding `key`.
fn key_file(s: &Scratch, name: &str, key: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = s.path(name);
    std::fs::write(&p, format!("{key}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// One HTTP/1.1 request on a fresh connection: the whole answer, head and
/// body, as text.
fn http(addr: &str, head: &str) -> String {
    use std::io::Write;
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(head.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).to_string()
}

/// Every byte of every file under `dir`, as text.
fn files_under(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else if let Ok(b) = std::fs::read(&p) {
            out.push((
                p.display().to_string(),
                String::from_utf8_lossy(&b).to_string(),
            ));
        }
    }
}

/// Issue 25 item 3: known secrets — the store's password, a service's
/// password, the agents' key and serve's token — fed through every error
/// path a user can reach here, and looked for in everything benchlab
/// writes: standard output and error, the store, the reports, the pages
/// and the files it leaves.
#[test]
fn no_secret_reaches_any_output() {
    let Some(pg) = server() else { return };
    let s = Scratch::new();
    pg.create_database("sec_secrets");
    let store_pw = pg::password();
    let db = pg.password_url("sec_secrets");
    const SERVICE_PW: &str = "svc-pw-8d1e5b0c";
    const AGENT_KEY: &str = "agent-key-4f0a9c2e7b1d93";
    const TOKEN: &str = "serve-token-7c3e9a51b2d4";
    let secrets = [store_pw.as_str(), SERVICE_PW, AGENT_KEY, TOKEN];
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut keep = |what: &str, out: &Output| {
        seen.push((what.to_string(), text(out)));
    };

    // A run that is stored (one workload fails), and its reports.
    let ok = s.study(
        "ok.toml",
        "[study]\nname = \"sec-ok\"\n[defaults]\nrepetitions = 1\nquiesce_s = 0\n\
         [[workload]]\nname = \"fine\"\nkind = \"fake\"\n\
         [[workload]]\nname = \"broken\"\nkind = \"fake\"\nfail = true\n",
    );
    keep(
        "run",
        &benchlab(&s, &db, &["run", ok.to_str().unwrap()])
            .output()
            .unwrap(),
    );
    for args in [
        &["list"][..],
        &["show", "1"],
        &["show", "1", "--format", "json"],
        &["show", "7"],
        &[
            "report", "1", "--html", "r.html", "--md", "r.md", "--json", "r.json", "--csv", "csv",
        ],
        &["compare", "1:base", "9:nope"],
    ] {
        keep(
            &format!("{args:?}"),
            &benchlab(&s, &db, args).output().unwrap(),
        );
    }

    // A service that fails, printing its password.
    let svc = s.study(
        "svc.toml",
        "[study]\nname = \"sec-svc\"\n[defaults]\nrepetitions = 1\nduration_s = 0.3\nwarmup_s = 0\nquiesce_s = 0\n\
         [[service]]\nname = \"web\"\nkind = \"command\"\n\
         argv = [\"python3\", \"-c\", \"import sys; print('password {{pw}}'); sys.stderr.write('pw={{pw}}\\\\n'); sys.exit(3)\", \"--pw={{pw}}\"]\n\
         secrets = { pw = { env = \"SEC_SERVICE_PW\" } }\n\
         [[workload]]\nkind = \"web.load\"\nservice = \"web\"\nclients = 1\nfile_set = \"single\"\n",
    );
    let out = benchlab(&s, &db, &["run", svc.to_str().unwrap()])
        .env("SEC_SERVICE_PW", SERVICE_PW)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("exited with code 3"), "{}", text(&out));
    keep("service run", &out);

    // An agent over TCP that holds another key: the controller's key is
    // refused, and neither end prints it.
    let theirs = key_file(&s, "agent.key", "the agent's own key, 32 bytes..");
    let mine = key_file(&s, "mine.key", AGENT_KEY);
    let mut agent = Command::new(env!("CARGO_BIN_EXE_benchlab"))
        .args(["agent", "--listen", "127.0.0.1:0", "--key-file"])
        .arg(&theirs)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut agent_err = agent.stderr.take().unwrap();
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while agent_err.read(&mut b).unwrap_or(0) == 1 && b[0] != b'\n' {
        line.push(b[0]);
    }
    let line = String::from_utf8(line).unwrap();
    let addr = line.rsplit(' ').next().unwrap().to_string();
    let lab = s.study(
        "tcp.toml",
        &format!(
            "[study]\nname = \"sec-tcp\"\n[defaults]\nrepetitions = 1\nquiesce_s = 0\n\
             [[host]]\nname = \"sut\"\nagent = \"{addr}\"\nkey_file = \"{}\"\n\
             [[workload]]\nkind = \"fake\"\n",
            mine.display()
        ),
    );
    let out = benchlab(&s, &db, &["run", lab.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("did not accept our key"),
        "{}",
        text(&out)
    );
    keep("tcp run", &out);
    let _ = agent.kill();
    let _ = agent.wait();
    let mut agent_log = String::new();
    let _ = agent_err.read_to_string(&mut agent_log);
    seen.push(("agent".into(), agent_log));

    // serve with a token: every kind of refusal, and the pages.
    let token = key_file(&s, "token", TOKEN);
    let mut serve = Command::new(env!("CARGO_BIN_EXE_benchlab"))
        .arg("--db")
        .arg(&db)
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&token)
        .env_remove("BENCHLAB_DB")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut serve_out = serve.stdout.take().unwrap();
    let mut first = Vec::new();
    while serve_out.read(&mut b).unwrap_or(0) == 1 && b[0] != b'\n' {
        first.push(b[0]);
    }
    let first = String::from_utf8(first).unwrap();
    seen.push(("serve stdout".into(), first.clone()));
    let base = first
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .expect("the address")
        .to_string();
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    for (path, extra) in [
        ("/", String::new()),
        (
            "/",
            "Authorization: Bearer wrong-token-000000\r\n".to_string(),
        ),
        ("/?token=wrong-token-000000", String::new()),
        ("/", auth.clone()),
        ("/run/1", auth.clone()),
        ("/run/1/report.html", auth.clone()),
        ("/run/1/report.md", auth.clone()),
        ("/run/1/report.json", auth.clone()),
        ("/run/999", auth.clone()),
        ("/api/runs", auth.clone()),
        ("/hosts?a=1", auth.clone()),
        ("/compare?c=1:base&c=9:x", auth.clone()),
        ("/%ff", auth.clone()),
    ] {
        let answer = http(
            &base,
            &format!("GET {path} HTTP/1.1\r\nHost: {base}\r\n{extra}Connection: close\r\n\r\n"),
        );
        seen.push((format!("GET {path}"), answer));
    }
    for head in [
        format!("POST / HTTP/1.1\r\nHost: {base}\r\n{auth}Content-Length: 0\r\n\r\n"),
        format!("GET / HTTP/1.1\r\nHost: evil.example\r\n{auth}\r\n"),
    ] {
        seen.push((head.clone(), http(&base, &head)));
    }
    // The page that sets the cookie shows the token only in Set-Cookie.
    let cookie = http(
        &base,
        &format!("GET /?token={TOKEN} HTTP/1.1\r\nHost: {base}\r\n\r\n"),
    );
    let without_cookie: String = cookie
        .lines()
        .filter(|l| !l.to_ascii_lowercase().starts_with("set-cookie:"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(cookie.starts_with("HTTP/1.1 200"), "{cookie}");
    seen.push(("?token=".into(), without_cookie));
    let _ = serve.kill();
    let _ = serve.wait();
    let mut rest = String::new();
    let _ = serve_out.read_to_string(&mut rest);
    let _ = serve.stderr.take().unwrap().read_to_string(&mut rest);
    seen.push(("serve output".into(), rest));

    // The store and every file left behind.
    seen.push(("the store".into(), pg.dump("sec_secrets")));
    files_under(s.dir.path(), &mut seen);
    let mut checked = 0;
    for (what, t) in &seen {
        // The key and token files hold their secret, by design.
        if what.ends_with("/mine.key") || what.ends_with("/token") {
            continue;
        }
        for secret in secrets {
            assert!(!t.contains(secret), "{what} holds a secret:\n{t}");
        }
        checked += 1;
    }
    assert!(checked > 30, "only {checked} outputs checked");
    // The paths were taken: the failures say what failed.
    let all: String = seen.iter().map(|(_, t)| t.as_str()).collect();
    for says in [
        "did not accept our key",
        "401 Unauthorized",
        "421 Misdirected Request",
        "405 Method Not Allowed",
        "no run 7",
        "web",
    ] {
        assert!(all.contains(says), "no `{says}` anywhere");
    }
}

/// `benchlab serve` on a store with one run; returns the child and its
/// address (`IP:PORT`).
fn serve_on(s: &Scratch, extra: &[&str], token: Option<&str>) -> (std::process::Child, String) {
    if !s.db().exists() {
        let study = s.study(
            "one.toml",
            "[study]\nname = \"one\"\n[defaults]\nrepetitions = 1\nquiesce_s = 0\n[[workload]]\nkind = \"fake\"\n",
        );
        s.run_ok(&["run", study.to_str().unwrap()]);
    }
    let mut c = s.benchlab();
    c.arg("serve").args(extra);
    if let Some(t) = token {
        c.arg("--token-file").arg(key_file(s, "serve.token", t));
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while out.read(&mut b).unwrap_or(0) == 1 && b[0] != b'\n' {
        line.push(b[0]);
    }
    let line = String::from_utf8(line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (child, addr)
}

struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn status(answer: &str) -> &str {
    answer.lines().next().unwrap_or("")
}

/// Issue 25: serve did not check `Host` (DNS rebinding reached the
/// loopback UI), refused `bearer` in lower case, sent a 401 without
/// `WWW-Authenticate` and a 405 without `Allow`, and allowed inline
/// script in its content-security policy.
#[test]
fn serve_checks_host_token_and_method_by_the_rules() {
    let s = Scratch::new();
    let (child, addr) = serve_on(
        &s,
        &["--listen", "127.0.0.1:0", "--allow-host", "bench.lab"],
        None,
    );
    let _kill = Kill(child);
    let port = addr.rsplit(':').next().unwrap();
    let get = |host: &str| {
        http(
            &addr,
            &format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
    };
    // DNS rebinding: a page of evil.example whose name now points here.
    for host in [
        "evil.example",
        &format!("evil.example:{port}"),
        "localhost.evil.example",
    ] {
        let a = get(host);
        assert!(status(&a).starts_with("HTTP/1.1 421"), "{host}: {a}");
        assert!(!a.contains("nav-runs"), "{host} got the page");
    }
    for host in [
        addr.as_str(),
        &format!("localhost:{port}"),
        "bench.lab",
        &format!("BENCH.LAB:{port}"),
    ] {
        let a = get(host);
        assert!(status(&a).starts_with("HTTP/1.1 200"), "{host}: {a}");
        // The policy allows no inline code but benchlab's own, by hash.
        let csp = a
            .lines()
            .find(|l| {
                l.to_ascii_lowercase()
                    .starts_with("content-security-policy:")
            })
            .expect("a policy");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert!(csp.contains("script-src 'sha256-"), "{csp}");
    }
    // 405 says what is allowed.
    let a = http(
        &addr,
        &format!("DELETE / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    );
    assert!(status(&a).starts_with("HTTP/1.1 405"), "{a}");
    assert!(a.to_ascii_lowercase().contains("\nallow: get, head"), "{a}");
    drop(_kill);

    // With a token: 401 with its challenge, and the scheme in any case.
    let token = "a-token-of-more-than-16-chars";
    let (child, addr) = serve_on(&s, &["--listen", "127.0.0.1:0"], Some(token));
    let _kill = Kill(child);
    let a = http(
        &addr,
        &format!("GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    );
    assert!(status(&a).starts_with("HTTP/1.1 401"), "{a}");
    assert!(
        a.to_ascii_lowercase()
            .contains("\nwww-authenticate: bearer realm="),
        "{a}"
    );
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let a = http(
            &addr,
            &format!("GET / HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {scheme} {token}\r\nConnection: close\r\n\r\n"),
        );
        assert!(status(&a).starts_with("HTTP/1.1 200"), "{scheme}: {a}");
    }
    // The token before anything else: a wrong one learns nothing of the
    // method or the page.
    let a = http(
        &addr,
        &format!("DELETE /run/1 HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    );
    assert!(status(&a).starts_with("HTTP/1.1 401"), "{a}");
}

/// Issue 25: `--listen localhost:8088` was refused.
#[test]
fn serve_listens_on_a_host_name() {
    let s = Scratch::new();
    let (child, addr) = serve_on(&s, &["--listen", "localhost:0"], None);
    let _kill = Kill(child);
    let a = http(
        &addr,
        "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(status(&a).starts_with("HTTP/1.1 200"), "{a}");
}

/// Issue 25: 64 idle connections made every other request wait or get a
/// 503. Now 200 connections that never send a byte do not delay a
/// request: its time with them open stays within 100 ms of its time
/// without them.
#[test]
fn idle_connections_do_not_delay_a_request() {
    let s = Scratch::new();
    let token = "another-token-of-16-chars-or-more";
    let (child, addr) = serve_on(&s, &["--listen", "127.0.0.1:0"], Some(token));
    let _kill = Kill(child);
    let request = format!(
        "GET /api/runs HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    let timed = || {
        let start = Instant::now();
        let a = http(&addr, &request);
        assert!(status(&a).starts_with("HTTP/1.1 200"), "{a}");
        start.elapsed()
    };
    let alone = (0..5).map(|_| timed()).min().unwrap();
    let idle: Vec<std::net::TcpStream> = (0..200)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    // Some of them half-way through a request head, too.
    use std::io::Write;
    for c in idle.iter().step_by(4) {
        let _ = (&*c).write_all(b"GET / HTTP/1.1\r\nHost: x\r\n");
    }
    std::thread::sleep(Duration::from_millis(200));
    let crowded = (0..5).map(|_| timed()).min().unwrap();
    assert!(
        crowded <= alone + Duration::from_millis(100),
        "{crowded:?} with 200 idle connections, {alone:?} without"
    );
    drop(idle);
}
