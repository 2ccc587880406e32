//! The adapters against the real programs (Debian's packages), each parsed
//! metric checked against a figure the tool did not print: the file fio
//! wrote, the bytes a relay between iperf3's client and server forwarded,
//! redis-server's own command counter, PostgreSQL's commit counter and the
//! rows pgbench appended, the messages a relay forwarded for sockperf, the
//! bytes the kernel counted sysbench fileio reading and writing, the
//! kernel's CPU accounting of the child. And the failures: a bad path, a
//! missing program, a non-zero exit, garbage, a hang past the time limit —
//! each a clear error on the point with nothing left running.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use benchlab_core::param::Params;
use benchlab_core::{ClientCtx, Sample, Value, Workload, WorkloadError};
use benchlab_wl_command::{command_workload, CommandWorkload, COMMAND};

fn tool(kind: &str) -> &'static CommandWorkload {
    command_workload(kind).unwrap_or_else(|| panic!("{kind} is shipped"))
}

/// The point's parameters: the workload's defaults, `duration_s`, and
/// the given values.
fn params(w: &dyn Workload, pairs: &[(&str, Value)]) -> Params {
    let mut p = Params::defaults(w.params());
    p.set("duration_s", Value::Float(1.0));
    for (k, v) in pairs {
        p.set(k, v.clone());
    }
    w.validate(&p).unwrap_or_else(|e| panic!("{e}"));
    p
}

fn run(w: &dyn Workload, p: &Params, server: Option<SocketAddr>) -> Result<Sample, WorkloadError> {
    let ctx = ClientCtx::single(server, 0, Arc::new(AtomicBool::new(false)));
    let side = w.run_client(p, &ctx)?;
    w.combine(p, side, None)
}

fn have(program: &str, package: &str) -> bool {
    if benchlab_testkit::find_program(program).is_some() {
        return true;
    }
    benchlab_testkit::missing(format!("{program} (Debian package {package})"));
    false
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server the test starts and always stops.
struct Server(Child);

impl Server {
    fn start(argv: &[&str], port: u16) -> Server {
        let child = Command::new(argv[0])
            .args(&argv[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the server");
        let s = Server(child);
        let until = Instant::now() + Duration::from_secs(10);
        while !listening(port) {
            assert!(Instant::now() < until, "{argv:?} did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }
}

/// Whether a socket listens on `port`, read from the kernel's table rather
/// than by connecting: iperf3 treats any connection as a test, and after a
/// probe that sends nothing it closes and reopens its listener, so a client
/// arriving in that window was refused (through a relay: "control socket
/// has closed unexpectedly").
fn listening(port: u16) -> bool {
    let local = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        std::fs::read_to_string(table).is_ok_and(|t| {
            t.lines().skip(1).any(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                // 0A is TCP_LISTEN.
                f.len() > 3 && f[1].ends_with(&local) && f[3] == "0A"
            })
        })
    })
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Held by each iperf3 test: one at a time, so that one test's clients
/// and probes never meet another's server (a port just freed by
/// `free_port` may be handed out again).
fn iperf3_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn s(x: &str) -> Value {
    Value::Str(x.into())
}

#[test]
fn fio_bytes_match_the_file_it_wrote() {
    if !have("fio", "fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let w = tool("tool.fio");
    let size = 8 << 20;
    let p = params(
        w,
        &[
            ("directory", s(dir.path().to_str().unwrap())),
            ("unlink", Value::Int(0)),
            ("file_size", Value::Int(size)),
            ("block_size", Value::Int(64 << 10)),
        ],
    );
    let sample = run(w, &p, None).unwrap();
    let file = dir.path().join("bench.0.0");
    let on_disk = std::fs::metadata(&file).unwrap().len();
    assert_eq!(on_disk, size as u64);
    assert_eq!(sample.metrics["write_bytes"], on_disk as f64);
    assert_eq!(sample.metrics["read_bytes"], 0.0);
    // MiB/s, IOPS and the block size agree with the bytes moved: IOPS ×
    // 64 KiB is the bandwidth, and MiB/s × the time is at most the wall
    // time of the whole command.
    let mibps = sample.metrics["write_MiBps"];
    let iops = sample.metrics["write_iops"];
    assert!(
        (iops * 64.0 / 1024.0 - mibps).abs() <= mibps * 0.01,
        "{iops} IOPS vs {mibps} MiB/s"
    );
    assert!(
        8.0 / mibps <= sample.metrics["command_wall_s"],
        "{sample:?}"
    );
    assert!(sample.metrics["write_clat_us"] > 0.0);
}

#[test]
fn iperf3_bytes_match_what_a_relay_forwarded() {
    if !have("iperf3", "iperf3") {
        return;
    }
    let _turn = iperf3_turn();
    let port = free_port();
    let port_s = port.to_string();
    let _server = Server::start(&["iperf3", "-s", "-B", "127.0.0.1", "-p", &port_s], port);
    let relay = benchlab_testbed::relay::start(benchlab_testbed::relay::RelayConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        upstream: format!("127.0.0.1:{port}").parse().unwrap(),
        delay: Duration::ZERO,
        protocol: benchlab_testbed::relay::RelayProtocol::Tcp,
    })
    .unwrap();
    let w = tool("tool.iperf3");
    let p = params(w, &[("message_size", Value::Int(16384))]);
    let sample = run(w, &p, Some(relay.local_addr())).unwrap();
    let stats = relay.stop();
    let relayed = stats.tcp.to_upstream.bytes as f64;
    let sent = sample.metrics["bytes_sent"];
    let received = sample.metrics["bytes_received"];
    // The relay forwarded the data the server counted and the control
    // connection's JSON; never more than the client wrote and a little
    // control (the client's last writes may be cut when the test ends:
    // the receiver's count is the one the relay must cover).
    assert!(sent > 0.0 && received > 0.0, "{sample:?}");
    assert!(received <= sent, "{received} received of {sent} sent");
    assert!(
        relayed >= received && relayed <= sent + 65536.0,
        "relay forwarded {relayed} B; iperf3 sent {sent} B, received {received} B"
    );
    // 10^6 bit/s × the test's second is the bytes received, within the
    // test's length as iperf3 measured it (about 1 s).
    let mbps = sample.metrics["throughput_Mbps"];
    let implied_s = received * 8.0 / (mbps * 1e6);
    assert!(
        (0.8..1.5).contains(&implied_s),
        "{received} B at {mbps} Mbit/s is {implied_s} s"
    );
}

/// iperf3's server runs one test at a time: a client arriving while
/// another's test runs is refused before any data moves. The adapter waits
/// and tries again, and the sample counts the refusals.
#[test]
fn iperf3_waits_for_a_busy_server() {
    if !have("iperf3", "iperf3") {
        return;
    }
    let _turn = iperf3_turn();
    let port = free_port();
    let port_s = port.to_string();
    let _server = Server::start(&["iperf3", "-s", "-B", "127.0.0.1", "-p", &port_s], port);
    // Another client holds the server for 2 s; its test has begun once it
    // printed its first interval. (It may itself be refused at first: the
    // server is still closing the connection that saw it listening.)
    let mut held = None;
    for _ in 0..50 {
        let mut other = Command::new("iperf3")
            .args([
                "-c",
                "127.0.0.1",
                "-p",
                &port_s,
                "-t",
                "2",
                "-i",
                "0.2",
                "--forceflush",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(other.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("/sec") {
            line.clear();
            if std::io::BufRead::read_line(&mut out, &mut line).unwrap() == 0 {
                break;
            }
        }
        if line.contains("/sec") {
            held = Some((other, out));
            break;
        }
        other.wait().unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    let (mut other, mut out) = held.expect("another client's test started");
    let w = tool("tool.iperf3");
    let p = params(w, &[("message_size", Value::Int(16384))]);
    let sample = run(w, &p, Some(format!("127.0.0.1:{port}").parse().unwrap())).unwrap();
    std::io::copy(&mut out, &mut std::io::sink()).unwrap();
    let held = other.wait().unwrap();
    assert!(held.success(), "the other client: {held}");
    let refused = sample.client.counter("retries.server_busy");
    assert!(refused >= 1, "no refusal counted while busy: {sample:?}");
    assert!(sample.metrics["bytes_received"] > 0.0, "{sample:?}");
    // Its own test ran only after the other's 2 s ended: its command
    // (refusals, pauses and its 1 s test) took more than 1 s.
    assert!(sample.metrics["command_wall_s"] >= 1.0, "{sample:?}");
}

/// Between two tests iperf3's server closes its listening socket and opens
/// it again: a client in that gap is refused a connection, and tries again.
#[test]
fn iperf3_waits_for_its_server_to_listen_again() {
    if !have("iperf3", "iperf3") {
        return;
    }
    let _turn = iperf3_turn();
    let port = free_port();
    let port_s = port.to_string();
    // Nothing listens for the first 0.4 s.
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        Server::start(&["iperf3", "-s", "-B", "127.0.0.1", "-p", &port_s], port)
    });
    let w = tool("tool.iperf3");
    let p = params(w, &[("message_size", Value::Int(16384))]);
    let result = run(w, &p, Some(format!("127.0.0.1:{port}").parse().unwrap()));
    let _server = late.join().unwrap();
    let sample = result.unwrap();
    assert!(
        sample.client.counter("retries.server_busy") >= 1,
        "{sample:?}"
    );
    assert!(sample.metrics["bytes_received"] > 0.0, "{sample:?}");
}

/// A tool file whose command appends to `log` each attempt and is refused
/// while the log has fewer than `ok_from` lines.
fn refusing_tool(log: &std::path::Path, ok_from: usize) -> CommandWorkload {
    let def = benchlab_wl_command::def::ToolDef::parse(&format!(
        r#"
kind = "tool.refusing"
summary = "refused until an attempt"
program = "sh"
command = "sh -c 'echo . >> {log}; if [ $(wc -l < {log}) -lt {ok_from} ]; then echo go away: busy; else echo n: 1; fi'"
parser = "lines"
row = "size"
timeout_s = 10
[[param]]
name = "size"
kind = "count"
default = 1
help = "unused"
[[metric]]
name = "n"
unit = "count"
better = "higher"
select = "n"
[retry]
name = "busy"
when = "go away: [a-z]+"
attempts = 2
wait_s = 0.01
"#,
        log = log.display()
    ))
    .unwrap();
    CommandWorkload::from_tool(def).unwrap()
}

#[test]
fn a_refusal_is_retried_a_bounded_number_of_times() {
    let dir = tempfile::tempdir().unwrap();
    // Refused twice, then served: two retries counted.
    let log = dir.path().join("a");
    let w = refusing_tool(&log, 3);
    let sample = run(&w, &params(&w, &[]), None).unwrap();
    assert_eq!(sample.client.counter("retries.busy"), 2);
    assert_eq!(sample.metrics["n"], 1.0);
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 3);
    // Never served: three attempts, then the point fails with the reason.
    let log = dir.path().join("b");
    let w = refusing_tool(&log, 100);
    let e = err(&w, &params(&w, &[])).to_string();
    assert!(
        e.contains("was refused (busy) on every one of 3 attempts")
            && e.contains("stdout: go away: busy"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 3);
    // Served at once: no retry, the counter says 0.
    let log = dir.path().join("c");
    let w = refusing_tool(&log, 1);
    let sample = run(&w, &params(&w, &[]), None).unwrap();
    assert_eq!(sample.client.counter("retries.busy"), 0);
    assert!(sample.client.counters.contains_key("retries.busy"));
}

/// A TCP front on loopback for a Unix socket, while it lives: the test
/// PostgreSQL listens on its socket only, and the pgbench adapter reaches
/// its service by address and port, as a study's would.
struct UnixFront {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl UnixFront {
    fn start(socket: std::path::PathBuf) -> UnixFront {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            for tcp in listener.incoming() {
                if stopping.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(tcp) = tcp else { continue };
                let unix = std::os::unix::net::UnixStream::connect(&socket).unwrap();
                let (mut t2, mut u2) = (tcp.try_clone().unwrap(), unix.try_clone().unwrap());
                let (mut t1, mut u1) = (tcp, unix);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut t1, &mut u1);
                    let _ = u1.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut u2, &mut t2);
                    let _ = t2.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        UnixFront {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for UnixFront {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `pg_stat_database`'s committed and rolled-back transactions of `db`,
/// once they stop changing: each backend reports its counts when it exits,
/// a moment after its client has gone.
fn pg_xacts(pg: &benchlab_testkit::pg::PgServer, db: &str) -> (u64, u64) {
    let read = || {
        // From another database: this query's own commit is not counted.
        let row = pg.psql(
            "postgres",
            &format!(
                "SELECT pg_stat_clear_snapshot(); SELECT xact_commit || ' ' || xact_rollback FROM pg_stat_database WHERE datname = '{db}'"
            ),
        );
        let mut it = row.split_whitespace().map(|x| x.parse::<u64>().unwrap());
        (it.next().unwrap(), it.next().unwrap())
    };
    let mut last = read();
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = read();
        if now == last {
            return now;
        }
        last = now;
    }
}

#[test]
fn pgbench_transactions_match_postgresqls_commits() {
    if !have("pgbench", "postgresql-client") {
        return;
    }
    let pg = match benchlab_testkit::pg::shared() {
        Ok(pg) => pg,
        Err(what) => return benchlab_testkit::missing(what),
    };
    let db = "pgbench_adapter";
    pg.create_database(db);
    let front = UnixFront::start(pg.socket_dir().join(".s.PGSQL.5432"));
    let w = tool("tool.pgbench");
    let p = params(
        w,
        &[
            ("clients", Value::Int(2)),
            ("user", s(benchlab_testkit::pg::SUPERUSER)),
            ("database", s(db)),
        ],
    );
    let (c0, r0) = pg_xacts(&pg, db);
    let sample = run(w, &p, Some(front.addr)).unwrap();
    let (c1, r1) = pg_xacts(&pg, db);
    drop(front);
    let n = sample.metrics["transactions"];
    assert!(n > 0.0, "{sample:?}");
    // Every TPC-B-like transaction appends one row to pgbench_history,
    // which `pgbench -i` made empty: the database's own count.
    let rows: f64 = pg
        .psql(db, "SELECT count(*) FROM pgbench_history")
        .trim()
        .parse()
        .unwrap();
    assert_eq!(rows, n, "pgbench_history rows vs transactions");
    // PostgreSQL's commit counter: the transactions, and besides them the
    // initialization's and each session's few statements.
    let commits = (c1 - c0) as f64;
    assert_eq!(r1 - r0, 0, "rolled back");
    assert!(
        commits >= n && commits <= n + 100.0,
        "{commits} commits for {n} transactions"
    );
    // tps × the test's second less the clients' connecting is the
    // transactions: pgbench's tps leaves its initial connection time out,
    // which a loaded machine stretches to a fifth of the second.
    let connect_s = sample.metrics["connect_ms"] / 1000.0;
    assert!((0.0..0.9).contains(&connect_s), "{sample:?}");
    let implied = sample.metrics["tps"] * (1.0 - connect_s);
    assert!(
        (implied - n).abs() <= n * 0.1 + 2.0,
        "tps {} × (1 s − {connect_s} s connecting) = {implied} vs {n} transactions",
        sample.metrics["tps"]
    );
    // Latency × tps is the clients kept busy (2), within what the time
    // spent connecting and in pgbench's own threads leaves.
    let busy = sample.metrics["latency_ms"] / 1000.0 * sample.metrics["tps"];
    assert!((1.5..=2.05).contains(&busy), "latency × tps = {busy}");
}

#[test]
fn sockperf_messages_match_what_a_relay_forwarded() {
    if !have("sockperf", "sockperf") {
        return;
    }
    let port = free_port();
    let port_s = port.to_string();
    let _server = Server::start(
        &["sockperf", "sr", "--tcp", "-i", "127.0.0.1", "-p", &port_s],
        port,
    );
    let relay = benchlab_testbed::relay::start(benchlab_testbed::relay::RelayConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        upstream: format!("127.0.0.1:{port}").parse().unwrap(),
        delay: Duration::ZERO,
        protocol: benchlab_testbed::relay::RelayProtocol::Tcp,
    })
    .unwrap();
    let w = tool("tool.sockperf");
    let size = 64;
    let p = params(w, &[("message_size", Value::Int(size))]);
    let sample = run(w, &p, Some(relay.local_addr())).unwrap();
    let stats = relay.stop();
    let m = |k: &str| sample.metrics[k];
    let (sent, received) = (m("messages_sent"), m("messages_received"));
    let up = stats.tcp.to_upstream.bytes as f64 / size as f64;
    let down = stats.tcp.to_client.bytes as f64 / size as f64;
    assert!(
        sent > 0.0 && received > 0.0 && received <= sent,
        "{sample:?}"
    );
    // Every message sockperf counts sent (its warm-up's too) crossed the
    // relay whole, and every reply it counts came back through it (one
    // more may arrive after its timer ended the count).
    assert_eq!(up, sent, "relay: {up} messages to the server");
    assert!(
        down >= received && down <= sent,
        "relay: {down} replies; sockperf received {received} of {sent}"
    );
    // One message in flight at a time: the run's second over the round
    // trips the relay saw is a round trip, and half of it sockperf's mean
    // (over its measured part of the second, after its warm-up). The
    // second also holds the time sockperf spends between a reply and its
    // next message, which no latency of its own includes: when other tests
    // load the CPUs that time grows, so the relay's figure may exceed the
    // mean by more than it may fall short of it. Short of it by half would
    // be a full round trip reported as half of one.
    let half_rtt_us = 1e6 / up / 2.0;
    let mean = m("latency_us");
    let ratio = half_rtt_us / mean;
    assert!(
        (0.65..=2.5).contains(&ratio),
        "relay: {half_rtt_us:.2} µs per half round trip; sockperf's mean {mean} µs"
    );
    assert!(m("p50_us") <= m("p99_us"), "{sample:?}");
}

/// `/proc/self/io`'s fields: this process's I/O and that of the children
/// it has waited for.
fn proc_io() -> BTreeMap<String, u64> {
    std::fs::read_to_string("/proc/self/io")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// sysbench fileio's reads and writes against the bytes the kernel counted
/// its process reading and writing (`/proc/PID/io`'s rchar and wchar,
/// which a parent inherits from the children it waits for). Run in a
/// process of its own (this test binary again, this test only), so that
/// no other test's children are counted.
#[test]
fn sysbench_fileio_operations_match_the_kernels_io_count() {
    const CHILD: &str = "BENCHLAB_TEST_SYSBENCH_FILEIO_CHILD";
    if !have("sysbench", "sysbench") {
        return;
    }
    let (file_size, block) = (16u64 << 20, 16u64 << 10);
    if std::env::var_os(CHILD).is_some() {
        let dir = tempfile::tempdir().unwrap();
        let w = tool("tool.sysbench-fileio");
        let p = params(
            w,
            &[
                ("file_size", Value::Int(file_size as i64)),
                ("files", Value::Int(4)),
                ("block_size", Value::Int(block as i64)),
                ("scratch_parent", s(dir.path().to_str().unwrap())),
            ],
        );
        let before = proc_io();
        let sample = run(w, &p, None).unwrap();
        let after = proc_io();
        let d = |k: &str| after[k] - before[k];
        // The scratch directory and its files are gone with the run.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        println!(
            "RESULT {} {} {}",
            d("rchar"),
            d("wchar"),
            serde_json::to_string(&sample.metrics).unwrap()
        );
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sysbench_fileio_operations_match_the_kernels_io_count",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find_map(|l| Some(&l[l.find("RESULT ")? + 7..]))
        .unwrap_or_else(|| panic!("no result in {text}"));
    let mut parts = line.splitn(3, ' ');
    let rchar: f64 = parts.next().unwrap().parse().unwrap();
    let wchar: f64 = parts.next().unwrap().parse().unwrap();
    let metrics: BTreeMap<String, f64> = serde_json::from_str(parts.next().unwrap()).unwrap();
    let m = |k: &str| metrics[k];
    let t = m("total_time_s");
    let (reads, writes, fsyncs) = (
        m("reads_per_s") * t,
        m("writes_per_s") * t,
        m("fsyncs_per_s") * t,
    );
    let block = block as f64;
    // Reads: whole blocks, and a little besides (sysbench's scripts, the
    // output pipes this process read): within 1% and 256 KiB.
    let read_blocks = rchar / block;
    assert!(
        reads > 0.0 && (read_blocks - reads).abs() <= reads * 0.01 + 16.0,
        "kernel: {rchar} B read = {read_blocks:.1} blocks; sysbench: {reads:.1} reads"
    );
    // Writes: the prepared files (16 MiB), then the run's blocks.
    let written_blocks = (wchar - file_size as f64) / block;
    assert!(
        writes > 0.0 && (written_blocks - writes).abs() <= writes * 0.01 + 16.0,
        "kernel: {wchar} B written = {written_blocks:.1} blocks after the {file_size} B prepared; sysbench: {writes:.1} writes"
    );
    // Its events are the reads, writes and fsyncs.
    let events = m("events");
    assert!(
        ((reads + writes + fsyncs) - events).abs() <= events * 0.01 + 4.0,
        "{events} events; {reads:.1} + {writes:.1} + {fsyncs:.1}"
    );
    // MiB/s is the reads' bytes over its time.
    let mibps = m("read_MiBps");
    assert!(
        (mibps - m("reads_per_s") * block / 1048576.0).abs() <= mibps * 0.01 + 0.02,
        "{mibps} MiB/s at {} reads/s",
        m("reads_per_s")
    );
}

fn redis_info(port: u16, field: &str) -> u64 {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "INFO", "stats"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn redis_benchmark_requests_match_the_servers_counter() {
    if !have("redis-server", "redis-server") || !have("redis-benchmark", "redis-tools") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let port_s = port.to_string();
    let _server = Server::start(
        &[
            "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            &port_s,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            dir.path().to_str().unwrap(),
        ],
        port,
    );
    let before = redis_info(port, "total_commands_processed");
    let w = tool("tool.redis-benchmark");
    let n = 20000;
    let p = params(
        w,
        &[("requests", Value::Int(n)), ("clients", Value::Int(4))],
    );
    let server: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let sample = run(w, &p, Some(server)).unwrap();
    // The INFO call itself counts one command.
    let done = redis_info(port, "total_commands_processed") - before - 1;
    // SET and GET, n each, and redis-benchmark's own CONFIG GETs at
    // connect (a handful).
    assert!(
        done >= 2 * n as u64 && done <= 2 * n as u64 + 16,
        "server processed {done} commands for 2 × {n} requests"
    );
    // The two rates' times add up to no more than the command's wall
    // time, and to most of it.
    let (set, get) = (sample.metrics["set_rps"], sample.metrics["get_rps"]);
    let busy = n as f64 / set + n as f64 / get;
    let wall = sample.metrics["command_wall_s"];
    assert!(
        busy <= wall && busy >= wall * 0.3,
        "{busy} s of requests in {wall} s"
    );
}

#[test]
fn sysbench_cpu_events_and_the_kernels_cpu_time() {
    if !have("sysbench", "sysbench") {
        return;
    }
    let w = tool("tool.sysbench-cpu");
    let p = params(w, &[("threads", Value::Int(1))]);
    let sample = run(w, &p, None).unwrap();
    let m = &sample.metrics;
    // One busy thread for 1 s: the kernel's account of the child's CPU
    // time is at most that (and the start-up), and a good part of it on a
    // machine shared with other tests.
    assert!(
        m["command_cpu_s"] > 0.1 && m["command_cpu_s"] < 1.5,
        "{m:?}"
    );
    // events / (events per second) is sysbench's 1 s, within its wall.
    let t = m["events"] / m["events_per_s"];
    assert!((0.95..1.1).contains(&t), "{m:?}");
    // A mean event latency × events is the busy time (1 thread).
    let busy = m["latency_ms"] * m["events"] / 1000.0;
    assert!((0.8..1.1).contains(&busy), "{m:?}");
}

#[test]
fn hyperfine_times_a_sleep() {
    if !have("hyperfine", "hyperfine") {
        return;
    }
    let w = tool("tool.hyperfine");
    let p = params(
        w,
        &[
            ("target", s("sleep 0.05")),
            ("runs", Value::Int(3)),
            ("warmup", Value::Int(0)),
        ],
    );
    let sample = run(w, &p, None).unwrap();
    let m = &sample.metrics;
    for k in ["mean_s", "median_s", "min_s"] {
        assert!(m[k] >= 0.05 && m[k] < 0.2, "{k}: {m:?}");
    }
    // Three runs of ≥ 0.05 s fit in the command's wall time.
    assert!(m["mean_s"] * 3.0 <= m["command_wall_s"], "{m:?}");
}

#[test]
fn stress_ng_bogo_ops_over_its_time() {
    if !have("stress-ng", "stress-ng") {
        return;
    }
    let w = tool("tool.stress-ng");
    let p = params(w, &[]);
    let sample = run(w, &p, None).unwrap();
    let m = &sample.metrics;
    // bogo ops / (bogo ops per second) is the stressor's run: its 1 s at
    // least (a loaded machine stretches it), within the wall time this
    // process measured around the whole command.
    let t = m["bogo_ops"] / m["bogo_ops_per_s"];
    assert!(
        t >= 0.9 && t <= m["command_wall_s"],
        "stressor's time {t} s; {m:?}"
    );
    // Per CPU second at least the real-time rate (one worker, ≤ 1 CPU).
    assert!(
        m["bogo_ops_per_cpu_s"] >= m["bogo_ops_per_s"] * 0.9,
        "{m:?}"
    );
}

#[test]
fn sysbench_memory_rate_is_its_operations_times_the_block() {
    if !have("sysbench", "sysbench") {
        return;
    }
    let w = tool("tool.sysbench-memory");
    let p = params(
        w,
        &[
            ("block_size", Value::Int(4096)),
            ("total_size", Value::Int(1 << 30)),
        ],
    );
    let sample = run(w, &p, None).unwrap();
    let m = &sample.metrics;
    let implied = m["ops_per_s"] * 4096.0 / 1048576.0;
    assert!((implied - m["MiBps"]).abs() <= m["MiBps"] * 0.01, "{m:?}");
}

/// Processes whose command line holds `marker`.
fn running_with(marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                out.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
            }
        }
    }
    out
}

fn inline(pairs: &[(&str, Value)]) -> Params {
    params(&COMMAND, pairs)
}

fn err(w: &dyn Workload, p: &Params) -> WorkloadError {
    match run(w, p, None) {
        Ok(s) => panic!("expected an error, got {s:?}"),
        Err(e) => e,
    }
}

#[test]
fn a_hang_past_the_timeout_is_killed_with_its_children() {
    let marker = format!("benchlab-hang-{}", std::process::id());
    let p = inline(&[
        (
            "command",
            s(&format!("sleep 1000 & sleep 1000; : {marker}")),
        ),
        ("shell", Value::Bool(true)),
        ("metrics", s("a (s) lower: a")),
        ("timeout_s", Value::Float(0.5)),
    ]);
    let started = Instant::now();
    let e = err(&COMMAND, &p).to_string();
    assert!(
        e.contains("ran past its time limit of 0.5 s (timeout_s) and was killed"),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // The shell, both sleeps: nothing of the group is left.
    std::thread::sleep(Duration::from_millis(100));
    let left = running_with(&marker);
    assert!(left.is_empty(), "left running: {left:?}");
    // The background sleep had no marker of its own: look for sleeps whose
    // parent was the shell, via the process group being gone.
    let sleeps: Vec<String> = running_with("sleep 1000");
    assert!(sleeps.is_empty(), "left running: {sleeps:?}");
}

#[test]
fn a_failing_tool_keeps_its_status_and_stderr() {
    let p = inline(&[
        (
            "command",
            s("sh -c 'echo partial; echo \"disk on fire\" >&2; exit 7'"),
        ),
        ("metrics", s("a (s) lower: a")),
    ]);
    let e = err(&COMMAND, &p).to_string();
    assert!(
        e.contains("exited with status 7") && e.contains("stderr: disk on fire"),
        "{e}"
    );
}

#[test]
fn garbage_and_a_bad_path_name_the_metric() {
    let p = inline(&[
        ("command", s("echo 'Segmentation fault (core dumped)'")),
        ("parser", s("json")),
        ("metrics", s("bw (B/s) higher: jobs[0].read.bw_bytes")),
    ]);
    let e = err(&COMMAND, &p).to_string();
    assert!(
        e.contains("not JSON") && e.contains("Segmentation fault"),
        "{e}"
    );

    let p = inline(&[
        // Braces of the command itself are doubled (`{name}` is a placeholder).
        (
            "command",
            s(r#"echo '{{"jobs":[{{"read":{{"bw_bytes":5}}}}]}}'"#),
        ),
        ("parser", s("json")),
        ("metrics", s("bw (B/s) higher: jobs[0].read.bw")),
    ]);
    let e = err(&COMMAND, &p).to_string();
    assert!(
        e.contains("metric `bw`: no key `bw` in `jobs[0].read` (its keys: bw_bytes)"),
        "{e}"
    );

    let p = inline(&[
        ("command", s("echo 'rate: fast'")),
        ("metrics", s("rate (1/s) higher: rate")),
    ]);
    let e = err(&COMMAND, &p).to_string();
    assert!(e.contains("`rate` is \"fast\", not a number"), "{e}");

    // A path that cannot be a path is refused before anything runs.
    let mut p = Params::defaults(COMMAND.params());
    p.set("duration_s", Value::Float(1.0));
    p.set("command", s("true"));
    p.set("parser", s("json"));
    p.set("metrics", s("bw (B/s) higher: jobs[0.read"));
    let benchlab_core::ValidationError { key, message: msg } = COMMAND.validate(&p).unwrap_err();
    assert_eq!(key, "metrics");
    assert!(
        msg.contains("selector `jobs[0.read`: `[` at 4 is not closed"),
        "{msg}"
    );
}

#[test]
fn a_missing_program_skips_the_point_and_says_where_to_get_it() {
    let p = inline(&[
        ("command", s("benchlab-no-such-tool --run")),
        ("metrics", s("a (s) lower: a")),
    ]);
    match err(&COMMAND, &p) {
        WorkloadError::Unsupported(m) => {
            assert!(
                m.contains("`benchlab-no-such-tool` is not installed"),
                "{m}"
            )
        }
        other => panic!("{other}"),
    }
    // A shipped tool names its package or where to get it.
    let w = tool("tool.sfnt-pingpong");
    let p = params(w, &[]);
    if benchlab_testkit::find_program("sfnt-pingpong").is_none() {
        let m = w.missing_here(&p).expect("not installed here");
        assert!(m.contains("github.com/Xilinx-CNS/cns-sfnettest"), "{m}");
        assert!(matches!(err(w, &p), WorkloadError::Unsupported(_)));
    }
    let fio = tool("tool.fio");
    let (program, how) = fio.program(&Params::default()).unwrap();
    assert_eq!(program, "fio");
    assert!(
        how.contains("Debian package `fio` (apt-get install fio)"),
        "{how}"
    );
}

#[test]
fn a_users_script_with_a_lines_parser() {
    let p = inline(&[
        (
            "command",
            s("sh -c 'echo \"requests: $((3 * {message_size}))\"; echo \"latency = 2.5 ms\"'"),
        ),
        ("message_size", Value::Int(100)),
        (
            "metrics",
            s("req (count) higher: requests\nlat (ms) lower: latency"),
        ),
    ]);
    let sample = run(&COMMAND, &p, None).unwrap();
    assert_eq!(sample.metrics["req"], 300.0);
    assert_eq!(sample.metrics["lat"], 2.5);
    assert!(sample.metrics["command_wall_s"] > 0.0);
}

/// `{host.NAME}` is the address the controller sent for the study's host
/// NAME (a word of its own, and BENCHLAB_HOST_NAME for a shell); the
/// hosts a point names are what the study checks and the engine resolves.
#[test]
fn a_host_placeholder_is_the_address_of_that_host() {
    let p = inline(&[
        (
            "command",
            s("sh -c 'echo \"octet: ${{1##*.}}\"; echo \"env: ${{BENCHLAB_HOST_LOAD_GEN##*.}}\"' sh {host.sut}"),
        ),
        ("metrics", s("octet (n) higher: octet\nenv (n) higher: env")),
    ]);
    assert_eq!(
        COMMAND.host_refs(&p),
        vec![("command".to_string(), "sut".to_string())]
    );
    let mut ctx = ClientCtx::single(None, 0, Arc::new(AtomicBool::new(false)));
    ctx.hosts.insert("sut".into(), "10.9.8.7".into());
    ctx.hosts.insert("load-gen".into(), "10.9.8.6".into());
    let side = COMMAND.run_client(&p, &ctx).unwrap();
    assert_eq!(side.values["octet"], 7.0);
    assert_eq!(side.values["env"], 6.0);
    // A host the controller did not send fails the point, naming it.
    let ctx = ClientCtx::single(None, 0, Arc::new(AtomicBool::new(false)));
    let e = COMMAND.run_client(&p, &ctx).unwrap_err().to_string();
    assert!(e.contains("{host.sut}"), "{e}");
    // `{host.}` names no host.
    let mut bad = Params::defaults(COMMAND.params());
    bad.set("command", s("ping {host.}"));
    bad.set("metrics", s("x (s) lower: x"));
    let e = COMMAND.validate(&bad).unwrap_err();
    assert_eq!(e.key, "command");
    assert!(e.message.contains("names no host"), "{}", e.message);
}

#[test]
fn whole_seconds_round_up_for_tools_that_take_integers() {
    let mut p = inline(&[
        ("command", s("echo 'whole: {duration_s:ceil}'")),
        ("metrics", s("whole (s) higher: whole")),
    ]);
    // `run --quick` leaves 0.05 s: iperf3 -t 0 would run for ever.
    p.set("duration_s", Value::Float(0.05));
    assert_eq!(run(&COMMAND, &p, None).unwrap().metrics["whole"], 1.0);
    p.set("duration_s", Value::Float(2.5));
    assert_eq!(run(&COMMAND, &p, None).unwrap().metrics["whole"], 3.0);
}
