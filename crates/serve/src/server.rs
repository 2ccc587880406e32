//! The HTTP server: hyper's HTTP/1.1 on a tokio runtime, in front of the
//! page handlers ([`crate::pages::route`]).
//!
//! hyper parses everything a client sends (request line, headers,
//! framing, their sizes); this module decides who gets an answer:
//!
//! 1. the `Host` header must name this server ([`AllowedHosts`]): a page
//!    of another site that rebinds its DNS name to this address gets a
//!    421, not the UI;
//! 2. the token, when there is one, comes next: a request without it gets
//!    a 401 (with `WWW-Authenticate`) at once, without waiting for
//!    anything;
//! 3. only GET and HEAD (405, with `Allow`);
//! 4. a head over [`MAX_HEAD`] bytes gets a 431;
//! 5. then the page, rendered on the blocking pool (it reads the store)
//!    by at most [`PAGE_WORKERS`] threads at a time, and at most
//!    [`PAGES_PER_CLIENT`] of them for one client (one IP address), whose
//!    further requests wait their turn behind its own, never in front of
//!    other clients'; beyond [`QUEUE_PER_CLIENT`] requests at once a
//!    client gets 503 with `Retry-After`. So one client asking for forty
//!    slow pages at once cannot make everybody else's pages wait.
//!
//! A connection is a task, not a thread, so idle connections cost a
//! socket and a few KiB each. There are at most [`MAX_CONNECTIONS`]; when
//! a new one arrives at the limit, the oldest connection that has not
//! sent a request yet is closed to make room, so connections that never
//! send anything cannot lock others out. A client has [`HEAD_TIMEOUT`] to
//! send its request head, and a connection lives at most
//! [`CONNECTION_LIFETIME`].

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::{IpAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{Notify, Semaphore};

use crate::http::{request_from_parts, Request, Response};
use crate::{Shared, TOKEN_COOKIE};

/// Connections held open at once; at the limit a new one closes the
/// oldest idle one (see the module's documentation).
pub const MAX_CONNECTIONS: usize = 256;

/// Pages rendered at once (each reads the store on a thread of its own).
pub const PAGE_WORKERS: usize = 4;

/// Pages one client (IP address) may have rendered at once: fewer than
/// [`PAGE_WORKERS`], so another client always finds a worker.
pub const PAGES_PER_CLIENT: usize = 2;

/// Requests one client may have waiting or rendering at once; more get
/// 503. A browser opens at most six connections to a server.
pub const QUEUE_PER_CLIENT: usize = 16;

/// The largest request head answered (request line and headers, counted
/// as sent); a larger one gets 431.
pub const MAX_HEAD: usize = 16 * 1024;

/// How long a client may take to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may last, whatever it does (a client that reads
/// its answer one byte a minute included).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);

/// Pause after an accept failure for want of descriptors or memory.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The names a request's `Host` may give: any IP address (a DNS rebinding
/// needs a name), `localhost`, the name `--listen` was given as, and the
/// names given with `--allow-host`.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    names: Vec<String>,
}

impl AllowedHosts {
    /// `localhost` and `names` (case-insensitive, a trailing dot ignored).
    pub fn new<S: AsRef<str>>(names: &[S]) -> AllowedHosts {
        let mut all = vec!["localhost".to_string()];
        all.extend(names.iter().map(|n| normal(n.as_ref())));
        AllowedHosts { names: all }
    }

    /// True when a `Host` header value names this server.
    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim();
        // `[v6]:port`, `[v6]`, `v4:port`, `name:port`, `name`.
        let name = if let Some(rest) = host.strip_prefix('[') {
            match rest.split_once(']') {
                Some((v6, tail)) if tail.is_empty() || valid_port(tail) => {
                    return v6.parse::<std::net::Ipv6Addr>().is_ok()
                }
                _ => return false,
            }
        } else {
            match host.rsplit_once(':') {
                Some((name, port)) if valid_port(port) => name,
                Some(_) => return false,
                None => host,
            }
        };
        if name.parse::<std::net::Ipv4Addr>().is_ok() {
            return true;
        }
        let name = normal(name);
        !name.is_empty() && self.names.contains(&name)
    }

    /// The names, for a message.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

fn valid_port(p: &str) -> bool {
    p.strip_prefix(':').unwrap_or(p).parse::<u16>().is_ok()
}

fn normal(name: &str) -> String {
    name.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// One connection's state, shared with the table that may close it.
struct Conn {
    /// A request is being answered: not to be closed for room.
    busy: AtomicBool,
    close: Notify,
}

/// The open connections, oldest first.
#[derive(Default)]
struct Table {
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<Conn>>>,
}

impl Table {
    /// Registers a new connection, closing the oldest idle one when the
    /// table is full. `None`: full of busy connections, refuse this one.
    fn admit(&self) -> Option<(u64, Arc<Conn>)> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.len() >= MAX_CONNECTIONS {
            let idle = open
                .iter()
                .find(|(_, c)| !c.busy.load(Ordering::Acquire))
                .map(|(id, _)| *id)?;
            if let Some(c) = open.remove(&idle) {
                c.close.notify_one();
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            busy: AtomicBool::new(false),
            close: Notify::new(),
        });
        open.insert(id, conn.clone());
        Some((id, conn))
    }

    fn remove(&self, id: u64) {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }
}

/// The requests each client has in the server, and its share of the
/// page workers.
#[derive(Default)]
struct Clients {
    by_ip: Mutex<HashMap<IpAddr, (Arc<Semaphore>, usize)>>,
}

/// One request's place in its client's queue; leaving frees it.
struct Queued {
    clients: Arc<Clients>,
    ip: IpAddr,
    turn: Arc<Semaphore>,
}

impl Clients {
    /// A place for one more request of `ip`, or `None` when it already has
    /// [`QUEUE_PER_CLIENT`].
    fn enter(self: &Arc<Self>, ip: IpAddr) -> Option<Queued> {
        let mut by_ip = self.by_ip.lock().unwrap_or_else(|e| e.into_inner());
        let entry = by_ip
            .entry(ip)
            .or_insert_with(|| (Arc::new(Semaphore::new(PAGES_PER_CLIENT)), 0));
        if entry.1 >= QUEUE_PER_CLIENT {
            return None;
        }
        entry.1 += 1;
        Some(Queued {
            clients: self.clone(),
            ip,
            turn: entry.0.clone(),
        })
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        let mut by_ip = self.clients.by_ip.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = by_ip.get_mut(&self.ip) {
            entry.1 -= 1;
            if entry.1 == 0 {
                by_ip.remove(&self.ip);
            }
        }
    }
}

/// What the page stage shares: the workers and the clients' shares.
struct Renderers {
    workers: Semaphore,
    clients: Arc<Clients>,
}

/// Answers connections on `listener` until accepting fails for good.
pub(crate) fn run(listener: TcpListener, shared: Arc<Shared>) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(PAGE_WORKERS)
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let table = Arc::new(Table::default());
        let pages = Arc::new(Renderers {
            workers: Semaphore::new(PAGE_WORKERS),
            clients: Arc::default(),
        });
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => match e.raw_os_error() {
                    Some(libc_errno) if is_transient(libc_errno) => {
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                    _ if e.kind() == std::io::ErrorKind::ConnectionAborted => continue,
                    _ => return Err(e),
                },
            };
            let Some((id, conn)) = table.admit() else {
                // Every connection is being answered: this one waits for
                // nothing, it is closed at once.
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let (shared, table, pages) = (shared.clone(), table.clone(), pages.clone());
            tokio::spawn(async move {
                serve_connection(stream, peer.ip(), shared, conn, pages).await;
                table.remove(id);
            });
        }
    })
}

/// Out of descriptors, buffers or memory for a moment (EMFILE, ENFILE,
/// ENOBUFS, ENOMEM).
fn is_transient(errno: i32) -> bool {
    matches!(errno, 24 | 23 | 105 | 12)
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    ip: IpAddr,
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    pages: Arc<Renderers>,
) {
    let state = conn.clone();
    let svc = service_fn(move |req: hyper::Request<Incoming>| {
        let (shared, state, pages) = (shared.clone(), state.clone(), pages.clone());
        async move {
            state.busy.store(true, Ordering::Release);
            let resp = answer(req, ip, &shared, &pages).await;
            state.busy.store(false, Ordering::Release);
            Ok::<_, Infallible>(resp)
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        // One request per connection, as before: a browser opens another
        // at once, and an idle kept-alive connection would only hold a
        // slot.
        .keep_alive(false)
        // Room for a head of MAX_HEAD and more, so that a larger one is
        // measured and answered 431 by `answer` rather than cut off.
        .max_buf_size(4 * MAX_HEAD);
    let serving = http.serve_connection(TokioIo::new(stream), svc);
    tokio::select! {
        _ = serving => {}
        _ = conn.close.notified() => {}
        _ = tokio::time::sleep(CONNECTION_LIFETIME) => {}
    }
}

/// A hyper response from a page's.
fn to_hyper(resp: Response, csp: &str) -> hyper::Response<Full<Bytes>> {
    let mut out = hyper::Response::new(Full::new(Bytes::from(resp.body)));
    *out.status_mut() = hyper::StatusCode::from_u16(resp.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let h = out.headers_mut();
    let fixed: [(&str, &str); 6] = [
        ("content-type", resp.content_type),
        ("cache-control", "no-store"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("x-frame-options", "DENY"),
        ("content-security-policy", csp),
    ];
    for (k, v) in fixed {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(HeaderName::from_static(k), v);
        }
    }
    for (k, v) in resp.headers {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            h.append(k, v);
        }
    }
    out
}

/// The token a request carries: `Authorization: Bearer T` (the scheme in
/// any case, RFC 9110 §11.1), the cookie, or `?token=T` (then `true`).
fn given_token(req: &Request) -> Option<(String, bool)> {
    let auth = req
        .headers
        .iter()
        .filter(|(k, _)| k == "authorization")
        .find_map(|(_, v)| {
            let (scheme, rest) = v.trim().split_once([' ', '\t'])?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| rest.trim().to_string())
        });
    if let Some(t) = auth {
        return Some((t, false));
    }
    if let Some(t) = req.cookie(TOKEN_COOKIE) {
        return Some((t.to_string(), false));
    }
    req.param("token").map(|t| (t.to_string(), true))
}

/// A request that may go on to its page, and the cookie to set with the
/// answer (when the token came in the URL).
#[derive(Debug)]
pub struct Screened {
    /// The request, decoded.
    pub request: Request,
    /// A `Set-Cookie` value.
    pub set_cookie: Option<String>,
}

/// Everything the server decides before a page, in order: the URL and
/// headers decoded (400), the `Host` (421), the token (401 with
/// `WWW-Authenticate`), the method (405 with `Allow`). `Err` is the
/// answer. The fuzzer feeds this arbitrary requests (`crates/fuzz`).
pub fn screen<'a>(
    method: &str,
    target: &str,
    headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    hosts: &AllowedHosts,
    token: Option<&str>,
) -> Result<Screened, Response> {
    let req = request_from_parts(method, target, headers)
        .map_err(|bad| Response::error(bad.status(), &bad.to_string()))?;
    match req.header("host") {
        Some(h) if hosts.allows(h) => {}
        Some(_) => {
            return Err(Response::error(
                421,
                &format!(
                    "this server does not answer to that host name: it answers to its IP addresses and {} (start it with --allow-host NAME to add a name)",
                    hosts.names().join(", ")
                ),
            ))
        }
        None => {
            return Err(Response::error(
                400,
                "the request names no host (Host header)",
            ))
        }
    }
    let mut set_cookie = None;
    if let Some(token) = token {
        match given_token(&req) {
            Some((g, from_query)) if crate::same(g.trim(), token) => {
                if from_query {
                    set_cookie = Some(format!(
                        "{TOKEN_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
                    ));
                }
            }
            given => {
                let mut r = Response::error(
                    401,
                    if given.is_some() {
                        "wrong token"
                    } else {
                        "this server needs its token: open it once with ?token=TOKEN (kept in a cookie), or send `Authorization: Bearer TOKEN`"
                    },
                );
                r.headers.push((
                    "WWW-Authenticate".into(),
                    "Bearer realm=\"benchlab serve\"".into(),
                ));
                return Err(r);
            }
        }
    }
    if req.method != "GET" && req.method != "HEAD" {
        let mut r = Response::error(405, "this server is read-only: only GET and HEAD");
        r.headers.push(("Allow".into(), "GET, HEAD".into()));
        return Err(r);
    }
    Ok(Screened {
        request: req,
        set_cookie,
    })
}

/// The size of a request's head as sent: the request line, each header
/// line with its `: ` and CRLF, and the blank line.
fn head_size(req: &hyper::Request<Incoming>) -> usize {
    let line = req.method().as_str().len()
        + req.uri().path_and_query().map_or(1, |p| p.as_str().len())
        + " HTTP/1.1\r\n".len()
        + 1;
    let headers: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + 2 + v.len() + 2)
        .sum();
    line + headers + 2
}

/// Screens a request, then renders its page.
async fn answer(
    req: hyper::Request<Incoming>,
    ip: IpAddr,
    shared: &Arc<Shared>,
    pages: &Arc<Renderers>,
) -> hyper::Response<Full<Bytes>> {
    let csp = shared.csp.as_str();
    if head_size(&req) > MAX_HEAD {
        return to_hyper(
            Response::error(
                431,
                &format!(
                    "the request head is over {} KiB (its URL and headers)",
                    MAX_HEAD / 1024
                ),
            ),
            csp,
        );
    }
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let screened = screen(
        req.method().as_str(),
        &target,
        req.headers()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_bytes())),
        &shared.hosts,
        shared.opts.token.as_deref(),
    );
    let Screened {
        request,
        set_cookie,
    } = match screened {
        Ok(s) => s,
        Err(resp) => return to_hyper(resp, csp),
    };
    // The client's turn first, then a worker: a client's requests queue
    // behind each other, not in front of other clients'.
    let Some(queued) = pages.clients.enter(ip) else {
        let mut r = Response::error(
            503,
            &format!(
                "{QUEUE_PER_CLIENT} requests of yours are being answered: try again in a moment"
            ),
        );
        r.headers.push(("Retry-After".into(), "1".into()));
        return to_hyper(r, csp);
    };
    let Ok(_turn) = queued.turn.clone().acquire_owned().await else {
        return to_hyper(Response::error(503, "the server is stopping"), csp);
    };
    let Ok(_worker) = pages.workers.acquire().await else {
        return to_hyper(Response::error(503, "the server is stopping"), csp);
    };
    let shared2 = shared.clone();
    let started = std::time::Instant::now();
    let rendered = tokio::task::spawn_blocking(move || {
        let waited = runqueue_wait();
        let resp = crate::page(&request, &shared2);
        let waited = waited
            .zip(runqueue_wait())
            .map(|(a, b)| b.saturating_sub(a));
        (resp, waited)
    })
    .await;
    let (mut resp, waited) =
        rendered.unwrap_or_else(|_| (Response::error(500, "the page failed"), None));
    // The time the page took here, from the store to the last byte
    // written (the queue for a worker not counted): a browser shows it
    // beside the network's times, and the tests read it to hold every
    // page to its budget. `cpu-wait` is the part of it the page's thread
    // was ready to run but other processes held the CPUs: on a loaded
    // machine that, not the page, can make a page slow.
    let mut timing = format!("page;dur={:.1}", started.elapsed().as_secs_f64() * 1e3);
    if let Some(w) = waited {
        let _ = write!(timing, ", cpu-wait;dur={:.1}", w.as_secs_f64() * 1e3);
    }
    resp.headers.push(("Server-Timing".into(), timing));
    if let Some(c) = set_cookie {
        resp.headers.push(("Set-Cookie".into(), c));
    }
    to_hyper(resp, csp)
}

/// The calling thread's time so far waiting on a run queue: runnable,
/// but another task on the CPU (the second field of the kernel's
/// schedstat). None where the kernel does not keep it.
fn runqueue_wait() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns = text.split_whitespace().nth(1)?.parse::<u64>().ok()?;
    Some(Duration::from_nanos(ns))
}

/// `'sha256-…'` of an inline block, for a content-security policy.
pub fn csp_hash(block: &str) -> String {
    use base64::Engine;
    use sha2::{Digest, Sha256};
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(block.as_bytes()))
    )
}

/// The policy: nothing from anywhere but this server (its stylesheet and
/// icon), and only the inline scripts and styles benchlab itself wrote (by their hashes, so a script
/// that an escaping bug let into a page does not run).
pub fn csp(scripts: &[String], styles: &[String]) -> String {
    let list = |blocks: &[String]| {
        let mut h: Vec<String> = blocks.iter().map(|b| csp_hash(b)).collect();
        h.sort();
        h.dedup();
        if h.is_empty() {
            "'none'".to_string()
        } else {
            h.join(" ")
        }
    };
    // Styles: this server's stylesheet ('self') and the hashed blocks;
    // never 'unsafe-inline'.
    let styles = match list(styles).as_str() {
        "'none'" => "'self'".to_string(),
        l => format!("'self' {l}"),
    };
    format!(
        "default-src 'none'; script-src {}; style-src {styles}; connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        list(scripts),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_ip_addresses_localhost_and_the_names_given() {
        let h = AllowedHosts::new(&["lab.example", "Bench.Lab."]);
        for ok in [
            "127.0.0.1:8088",
            "127.0.0.1",
            "10.1.2.3:80",
            "[::1]:8088",
            "[::1]",
            "localhost:8088",
            "LOCALHOST",
            "lab.example:8088",
            "bench.lab",
            "bench.lab.:1",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8088",
            "localhost.evil.example",
            "",
            ":8088",
            "[::1",
            "[nope]:1",
            "lab.example:99999",
            "127.0.0.1:x",
        ] {
            assert!(!h.allows(bad), "{bad}");
        }
    }

    #[test]
    fn the_policy_allows_only_the_hashed_blocks() {
        let p = csp(&["alert(1)".into()], &[]);
        assert!(!p.contains("unsafe-inline"), "{p}");
        // The hash of `alert(1)` as a browser computes it (SHA-256, base64).
        assert!(
            p.contains("script-src 'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='"),
            "{p}"
        );
        assert!(p.contains("style-src 'self';"), "{p}");
    }

    #[test]
    fn a_full_table_closes_the_oldest_idle_connection() {
        let t = Table::default();
        let conns: Vec<_> = (0..MAX_CONNECTIONS).map(|_| t.admit().unwrap()).collect();
        conns[0].1.busy.store(true, Ordering::Release);
        let (_, newest) = t.admit().expect("room is made");
        assert!(!newest.busy.load(Ordering::Acquire));
        let open = t.open.lock().unwrap();
        assert!(open.contains_key(&conns[0].0), "the busy one stays");
        assert!(!open.contains_key(&conns[1].0), "the oldest idle one goes");
        drop(open);
        for (_, c) in &conns {
            c.busy.store(true, Ordering::Release);
        }
        let t2 = Table::default();
        for _ in 0..MAX_CONNECTIONS {
            t2.admit().unwrap().1.busy.store(true, Ordering::Release);
        }
        assert!(t2.admit().is_none(), "all busy: refused");
    }
}
