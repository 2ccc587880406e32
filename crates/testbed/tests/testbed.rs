//! Test beds for real: namespaces, veths, a bridge and tbf on this machine.
//!
//! These tests need root and iproute2; without them each fails under CI
//! and is reported as skipped elsewhere (benchlab-testkit). Bed names carry the test process's pid (and a letter per test),
//! so parallel runs never share a namespace; every bed is taken down at the
//! end, and a failing test leaves a state file that `down` can use.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use benchlab_testbed::bed::GSO_MAX_BYTES;
use benchlab_testbed::{
    down, in_netns, netem_available, parse_spec, status, up, HostInfo, Object, TbfParams,
    TestbedError, TestbedSpec,
};

/// Returns from the test when it cannot run here: these tests need root
/// (network namespaces need CAP_SYS_ADMIN) and iproute2. Under CI that is
/// a failure naming what is missing (see benchlab-testkit).
macro_rules! require_root_and_iproute2 {
    () => {
        benchlab_testkit::require!(root, "ip", "tc");
    };
}

/// Takes a bed down when a test ends, also when it fails half-way.
struct Guard<'a>(String, &'a Path);

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let _ = down(&self.0, self.1);
    }
}

/// Deletes a namespace made by hand when a test ends.
struct NsGuard(String);

impl Drop for NsGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// A bed name unique to this process and test: letter + pid in hex.
fn bed_name(letter: char) -> String {
    format!("{letter}{:06x}", std::process::id() % 0x100_0000)
}

fn spec(name: &str, topology: &str, hosts: &[(&str, Option<f64>)]) -> TestbedSpec {
    let mut text = format!(
        "title = 'ignored'\n[testbed]\nname = '{name}'\ntopology = '{topology}'\nsubnet = '10.203.7.0/24'\n"
    );
    for (h, rate) in hosts {
        text.push_str(&format!("[[testbed.host]]\nname = '{h}'\n"));
        if let Some(r) = rate {
            text.push_str(&format!("rate_mbit = {r}\n"));
        }
    }
    parse_spec("test.toml", &text).unwrap()
}

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn namespaces() -> Vec<String> {
    run(&["ip", "netns", "list"])
        .1
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

/// Nothing of bed `name` is left: no namespace, no interface in the root
/// namespace, no state file.
fn assert_nothing_left(name: &str, dir: &Path) {
    let prefix = format!("bl-{name}-");
    let left: Vec<_> = namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    let links = run(&["ip", "-o", "link", "show"]).1;
    assert!(
        !links.contains(&format!("{name}-")),
        "interfaces left in the root namespace:\n{links}"
    );
    assert!(!dir.join(format!("{name}.json")).exists());
}

fn qdiscs(netns: &str, dev: &str) -> String {
    run(&["tc", "-n", netns, "qdisc", "show", "dev", dev]).1
}

/// `ping -c1 -W1` from `from` to `to`, with the ping program when it is
/// installed, else with an ICMP echo of our own on a raw socket inside the
/// namespace (the same packet on the wire).
fn ping(from: &HostInfo, to: Ipv4Addr) -> Result<(), String> {
    let have_ping = Command::new("ping").arg("-V").output().is_ok();
    if have_ping {
        let out = from
            .command("ping")
            .args(["-c1", "-W1", &to.to_string()])
            .output()
            .map_err(|e| e.to_string())?;
        return if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stdout).into_owned())
        };
    }
    in_netns(&from.netns, move || icmp_echo(to, Duration::from_secs(1)))
        .map_err(|e| e.to_string())?
}

fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn icmp_echo(to: Ipv4Addr, timeout: Duration) -> Result<(), String> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(
        Domain::IPV4,
        Type::from(libc::SOCK_RAW),
        Some(Protocol::ICMPV4),
    )
    .map_err(|e| format!("raw socket: {e}"))?;
    let id = (std::process::id() & 0xffff) as u16;
    let mut pkt = vec![8u8, 0, 0, 0];
    pkt.extend(id.to_be_bytes());
    pkt.extend(1u16.to_be_bytes());
    pkt.extend(b"benchlab-testbed");
    let sum = checksum(&pkt);
    pkt[2..4].copy_from_slice(&sum.to_be_bytes());
    let dest: SocketAddr = (to, 0).into();
    sock.send_to(&pkt, &dest.into())
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + timeout;
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 1500];
    while Instant::now() < deadline {
        sock.set_read_timeout(Some(deadline - Instant::now()))
            .map_err(|e| e.to_string())?;
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            break;
        };
        // SAFETY: recv_from initialised the first n bytes.
        let b: Vec<u8> = buf[..n]
            .iter()
            .map(|x| unsafe { x.assume_init() })
            .collect();
        let ihl = usize::from(b[0] & 0x0f) * 4;
        let icmp = &b[ihl..];
        let from_ip = from.as_socket_ipv4().map(|a| *a.ip());
        if from_ip == Some(to) && icmp[0] == 0 && icmp[4..6] == id.to_be_bytes() {
            return Ok(());
        }
    }
    Err(format!("no ICMP echo reply from {to} within {timeout:?}"))
}

/// Bytes that have arrived on a TCP socket but are not read yet
/// (`FIONREAD`, the same as `SIOCINQ` for TCP).
fn queued_bytes(fd: std::os::fd::RawFd) -> u64 {
    let mut n: libc::c_int = 0;
    // SAFETY: a valid socket and a pointer to a live c_int.
    let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n as *mut libc::c_int) };
    assert_eq!(rc, 0, "FIONREAD: {}", std::io::Error::last_os_error());
    n as u64
}

/// Sends TCP bulk data from `client` to `server` and returns the goodput
/// the receiver saw in steady state, bit/s, in each of `windows`
/// consecutive windows of about `window` after a `warmup`, while the
/// sender is still sending, so that neither slow start nor the end of the
/// transfer (where a lost last segment costs TCP a 200 ms retransmission
/// timeout) is counted.
///
/// What has *arrived* is counted, not what has been read: at each window's
/// edge the receiver adds the bytes still queued in its socket to those it
/// has read, and notes the time it did so. A receiver starved of CPU then
/// cannot move bytes from one window into the next (counting by read time,
/// windows of 10.7 and 23.5 Mbit/s were seen through a 20 Mbit/s tbf).
fn tcp_goodputs(
    server: &HostInfo,
    client: &HostInfo,
    warmup: Duration,
    window: Duration,
    windows: usize,
) -> Vec<f64> {
    let addr = server.address;
    let listener = in_netns(&server.netns, move || TcpListener::bind((addr, 0)))
        .unwrap()
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let receiver = thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let fd = c.as_raw_fd();
        let mut buf = vec![0u8; 1 << 16];
        let mut read = c.read(&mut buf).unwrap() as u64;
        let mut edge = Instant::now() + warmup;
        let mut samples: Vec<(Instant, u64)> = Vec::with_capacity(windows + 1);
        loop {
            if samples.len() <= windows && Instant::now() >= edge {
                let arrived = read + queued_bytes(fd);
                samples.push((Instant::now(), arrived));
                edge += window;
            }
            let n = c.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            read += n as u64;
        }
        samples
    });
    let mut c = in_netns(&client.netns, move || TcpStream::connect((addr, port)))
        .unwrap()
        .unwrap();
    let buf = vec![0x5au8; 1 << 16];
    let end = Instant::now() + warmup + window * windows as u32 + Duration::from_millis(300);
    while Instant::now() < end {
        c.write_all(&buf).unwrap();
    }
    c.shutdown(Shutdown::Write).unwrap();
    let samples = receiver.join().unwrap();
    assert_eq!(samples.len(), windows + 1, "the sender stopped early");
    samples
        .windows(2)
        .map(|w| (w[1].1 - w[0].1) as f64 * 8.0 / (w[1].0 - w[0].0).as_secs_f64())
        .collect()
}

#[test]
fn direct_bed_connects_shapes_and_comes_down_completely() {
    require_root_and_iproute2!();
    let dir = tempfile::tempdir().unwrap();
    let name = bed_name('d');
    let _guard = Guard(name.clone(), dir.path());
    let spec = spec(&name, "direct", &[("sut", Some(200.0)), ("gen", None)]);
    let bed = up(&spec, dir.path()).unwrap();
    let (sut, gen) = (bed.host("sut").unwrap(), bed.host("gen").unwrap());
    assert_eq!(sut.netns, format!("bl-{name}-sut"));
    assert_eq!(sut.address, Ipv4Addr::new(10, 203, 7, 1));
    assert_eq!(gen.address, Ipv4Addr::new(10, 203, 7, 2));
    assert_eq!(sut.interface, format!("{name}-sut"));

    ping(gen, sut.address).unwrap();
    ping(sut, gen.address).unwrap();
    // Both ends carry the tbf: the sut's egress and the peer's egress
    // towards it.
    let p = TbfParams::for_rate(200_000_000);
    for h in [sut, gen] {
        let q = qdiscs(&h.netns, &h.interface);
        assert!(q.contains("qdisc tbf 1: root"), "{q}");
        assert!(q.contains("rate 200Mbit"), "{q}");
        assert!(q.contains(&format!("burst {}b", p.burst_bytes)), "{q}");
    }
    // Offloads are off where ethtool exists, and the bed says so otherwise.
    if Command::new("ethtool").arg("--version").output().is_ok() {
        assert!(bed.notes.is_empty(), "{:?}", bed.notes);
        let k = run(&[
            "ip",
            "netns",
            "exec",
            &sut.netns,
            "ethtool",
            "-k",
            &sut.interface,
        ])
        .1;
        assert!(k.contains("generic-segmentation-offload: off"), "{k}");
    } else {
        assert!(
            bed.notes.iter().any(|n| n.contains("ethtool not found")),
            "{:?}",
            bed.notes
        );
    }
    let st = status(&name, dir.path()).unwrap();
    assert!(st.complete);
    assert!(st.objects.iter().all(|o| o.exists), "{st:?}");
    // 2 namespaces, 1 veth, 2 qdiscs.
    assert_eq!(st.objects.len(), 5);

    let report = down(&name, dir.path()).unwrap();
    assert!(report.found);
    assert_eq!(report.removed.len(), 5, "{report:?}");
    // Reverse order: qdiscs, the veth, then the namespaces.
    assert!(matches!(report.removed[0], Object::Qdisc { .. }));
    assert!(matches!(report.removed[4], Object::Netns { .. }));
    assert_nothing_left(&name, dir.path());
    let again = down(&name, dir.path()).unwrap();
    assert!(!again.found && again.removed.is_empty() && again.already_gone.is_empty());
}

#[test]
fn bridge_bed_joins_three_hosts() {
    require_root_and_iproute2!();
    let dir = tempfile::tempdir().unwrap();
    let name = bed_name('b');
    let _guard = Guard(name.clone(), dir.path());
    let spec = spec(
        &name,
        "bridge",
        &[("a", Some(100.0)), ("b", None), ("c", None)],
    );
    let bed = up(&spec, dir.path()).unwrap();
    assert_eq!(bed.hosts.len(), 3);
    let sw = bed.switch_netns.clone().unwrap();
    assert_eq!(sw, format!("bl-{name}-switch"));
    for (i, from) in bed.hosts.iter().enumerate() {
        for to in &bed.hosts[i + 1..] {
            ping(from, to.address).unwrap_or_else(|e| panic!("{} -> {}: {e}", from.name, to.name));
        }
    }
    let a = bed.host("a").unwrap();
    let q = qdiscs(&a.netns, &a.interface);
    assert!(
        q.contains("qdisc tbf 1: root") && q.contains("rate 100Mbit"),
        "{q}"
    );
    let q = qdiscs(&sw, &format!("{name}-a-s"));
    assert!(
        q.contains("qdisc tbf 1: root") && q.contains("rate 100Mbit"),
        "{q}"
    );
    // Hosts without a rate have no tbf.
    let b = bed.host("b").unwrap();
    assert!(!qdiscs(&b.netns, &b.interface).contains("tbf"));
    let ports = run(&[
        "ip",
        "-o",
        "-n",
        &sw,
        "link",
        "show",
        "master",
        &format!("{name}-br"),
    ])
    .1;
    assert_eq!(ports.lines().count(), 3, "{ports}");

    let report = down(&name, dir.path()).unwrap();
    // 4 namespaces, 1 bridge, 3 veths, 2 qdiscs.
    assert_eq!(report.removed.len(), 10, "{report:?}");
    assert_nothing_left(&name, dir.path());
    assert!(!down(&name, dir.path()).unwrap().found);
}

/// Issue 11, item 4: a `[[testbed.link]]` joins two hosts of a bridge bed
/// straight, beside the bridge: each reaches the other at both addresses,
/// the link's through the link (its route), and `down` removes it too.
#[test]
fn a_link_adds_a_direct_path_beside_the_bridge() {
    require_root_and_iproute2!();
    let dir = tempfile::tempdir().unwrap();
    let name = bed_name('l');
    let _guard = Guard(name.clone(), dir.path());
    let text = format!(
        "[testbed]\nname = '{name}'\ntopology = 'bridge'\nsubnet = '10.203.8.0/24'\n\
         [[testbed.host]]\nname = 'gen'\n[[testbed.host]]\nname = 'b1'\n[[testbed.host]]\nname = 'b2'\n\
         [[testbed.link]]\nhosts = ['gen', 'b1']\nsubnet = '10.203.9.0/30'\n"
    );
    let spec = parse_spec("test.toml", &text).unwrap();
    let bed = up(&spec, dir.path()).unwrap();
    let (gen, b1) = (bed.host("gen").unwrap(), bed.host("b1").unwrap());
    let direct = Ipv4Addr::new(10, 203, 9, 2);
    ping(gen, b1.address).unwrap();
    ping(gen, direct).unwrap();
    ping(b1, Ipv4Addr::new(10, 203, 9, 1)).unwrap();
    let dev = format!("{name}_l0");
    let route = run(&["ip", "-n", &gen.netns, "route", "get", &direct.to_string()]).1;
    assert!(route.contains(&format!("dev {dev}")), "{route}");
    let route = run(&[
        "ip",
        "-n",
        &gen.netns,
        "route",
        "get",
        &b1.address.to_string(),
    ])
    .1;
    assert!(route.contains(&format!("dev {}", gen.interface)), "{route}");
    // b2 has no direct path.
    let b2 = bed.host("b2").unwrap();
    assert!(!run(&["ip", "-o", "-n", &b2.netns, "link", "show"])
        .1
        .contains(&dev));

    let report = down(&name, dir.path()).unwrap();
    // 4 namespaces, 1 bridge, 3 bridge veths and the link's.
    assert_eq!(report.removed.len(), 9, "{report:?}");
    assert_nothing_left(&name, dir.path());
}

#[test]
fn down_undoes_a_crashed_up_and_touches_nothing_unrecorded() {
    require_root_and_iproute2!();
    let dir = tempfile::tempdir().unwrap();
    let name = bed_name('c');
    let _guard = Guard(name.clone(), dir.path());
    let (ns_a, ns_b) = (format!("bl-{name}-a"), format!("bl-{name}-b"));
    let stranger = format!("bl-{name}-zz");
    // `up` died right after recording the veth: namespace a exists (and a
    // process runs in it), namespace b and the veth were recorded but never
    // made. A namespace of the same family that no state records exists too.
    let state = serde_json::json!({
        "format": 1,
        "name": name,
        "complete": false,
        "objects": [
            {"kind": "netns", "name": ns_a},
            {"kind": "netns", "name": ns_b},
            {"kind": "veth", "netns": ns_a, "name": format!("{name}-a"),
             "peer_netns": ns_b, "peer": format!("{name}-b")},
        ],
    });
    std::fs::write(dir.path().join(format!("{name}.json")), state.to_string()).unwrap();
    assert!(run(&["ip", "netns", "add", &ns_a]).0);
    assert!(run(&["ip", "netns", "add", &stranger]).0);
    let _stranger_guard = NsGuard(stranger.clone());
    let mut sleeper = Command::new("ip")
        .args(["netns", "exec", &ns_a, "sleep", "60"])
        .spawn()
        .unwrap();
    // Wait until the sleeper has entered the namespace.
    let deadline = Instant::now() + Duration::from_secs(5);
    while run(&["ip", "netns", "pids", &ns_a]).1.trim().is_empty() {
        assert!(Instant::now() < deadline, "sleeper never entered {ns_a}");
        thread::sleep(Duration::from_millis(10));
    }

    let st = status(&name, dir.path()).unwrap();
    assert!(!st.complete);
    let exists: Vec<bool> = st.objects.iter().map(|o| o.exists).collect();
    assert_eq!(exists, [true, false, false]);

    let report = down(&name, dir.path()).unwrap();
    assert_eq!(report.removed, [Object::Netns { name: ns_a.clone() }]);
    assert_eq!(report.already_gone.len(), 2);
    assert_eq!(report.killed.len(), 1, "{report:?}");
    assert_eq!(report.killed[0].pid, sleeper.id());
    assert!(!sleeper.wait().unwrap().success());
    assert!(
        namespaces().contains(&stranger),
        "down removed an unrecorded namespace"
    );
    assert!(run(&["ip", "netns", "del", &stranger]).0);
    assert_nothing_left(&name, dir.path());
}

#[test]
fn up_twice_is_refused_and_foreign_namespaces_are_not_adopted() {
    require_root_and_iproute2!();
    let dir = tempfile::tempdir().unwrap();
    let name = bed_name('t');
    let _guard = Guard(name.clone(), dir.path());
    let spec = spec(&name, "direct", &[("x", None), ("y", None)]);
    up(&spec, dir.path()).unwrap();
    let e = up(&spec, dir.path()).unwrap_err();
    assert!(matches!(e, TestbedError::AlreadyUp { .. }), "{e}");
    assert!(e.to_string().contains("down"), "{e}");
    // The refused `up` changed nothing.
    assert!(status(&name, dir.path())
        .unwrap()
        .objects
        .iter()
        .all(|o| o.exists));
    down(&name, dir.path()).unwrap();
    assert_nothing_left(&name, dir.path());

    // A namespace the bed would create exists already, made by someone else:
    // `up` refuses before creating anything, and leaves it alone.
    let foreign = format!("bl-{name}-y");
    assert!(run(&["ip", "netns", "add", &foreign]).0);
    let _foreign_guard = NsGuard(foreign.clone());
    let e = up(&spec, dir.path()).unwrap_err();
    assert!(matches!(e, TestbedError::Conflict { .. }), "{e}");
    assert!(!dir.path().join(format!("{name}.json")).exists());
    assert!(namespaces().contains(&foreign));
    assert!(!namespaces().contains(&format!("bl-{name}-x")));
    assert!(run(&["ip", "netns", "del", &foreign]).0);
}

#[test]
fn delay_needs_netem_and_says_what_to_use_instead() {
    require_root_and_iproute2!();
    let dir = tempfile::tempdir().unwrap();
    let name = bed_name('n');
    let _guard = Guard(name.clone(), dir.path());
    let mut spec = spec(&name, "direct", &[("x", None), ("y", None)]);
    spec.hosts[0].delay_ms = Some(1.0);
    if netem_available() {
        let bed = up(&spec, dir.path()).unwrap();
        let x = bed.host("x").unwrap();
        assert!(qdiscs(&x.netns, &x.interface).contains("netem"));
        down(&name, dir.path()).unwrap();
    } else {
        let e = up(&spec, dir.path()).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, TestbedError::NoNetem { .. }), "{msg}");
        assert!(msg.contains("no netem") && msg.contains("relay"), "{msg}");
        assert!(!dir.path().join(format!("{name}.json")).exists());
    }
    assert_nothing_left(&name, dir.path());
}

/// Turns TSO, GSO and GRO back on on both ends of a direct bed's veth,
/// where `up` turned them off (it does so when ethtool is installed), so
/// that tbf sees GSO packets whatever the machine has.
fn offloads_on(hosts: &[&HostInfo]) {
    if Command::new("ethtool").arg("--version").output().is_err() {
        return;
    }
    for h in hosts {
        let (ok, out) = run(&[
            "ip",
            "netns",
            "exec",
            &h.netns,
            "ethtool",
            "-K",
            &h.interface,
            "tso",
            "on",
            "gso",
            "on",
            "gro",
            "on",
        ]);
        assert!(ok, "ethtool -K {} on: {out}", h.interface);
    }
}

/// tbf holds the rate with the veths' offloads on (GSO packets larger than
/// the bucket are segmented by tbf, not dropped): 20 Mbit/s has a 40 kB
/// bucket, smaller than a 64 KiB GSO packet; 200 Mbit/s checks a higher
/// rate with offloads on (400 Mbit/s was too much for this two-core machine
/// under other builds: 3 of 5 windows 7-12 % low at load 12). TCP goodput should be 1448/1514 = 95.6 % of the rate
/// (measured on an idle machine: 95.2-95.9 % in 12 runs); a queue too short
/// for TCP's slow-start overshoot shows here as 200 ms retransmission
/// stalls (58-80 % at 20 Mbit/s with a 68 kB queue).
///
/// Five 0.5 s windows are checked as tests/hosts.rs checks repetitions:
/// tbf is a ceiling, so the median window may exceed the expected goodput
/// by at most 3 %; and the link reaches its rate when the machine lets it,
/// so the best window must come within 3 % from below (a sender starved
/// of CPU under other builds falls short in most windows: seen 89.3 % of
/// the rate in a single 0.8 s window at a load of 10).
#[test]
fn tbf_holds_the_rate_with_offloads_on() {
    require_root_and_iproute2!();
    let dir = tempfile::tempdir().unwrap();
    assert!(TbfParams::for_rate(20_000_000).burst_bytes < GSO_MAX_BYTES);
    for (letter, rate_mbit) in [('r', 20.0), ('s', 200.0)] {
        let name = bed_name(letter);
        let _guard = Guard(name.clone(), dir.path());
        let spec = spec(&name, "direct", &[("rx", Some(rate_mbit)), ("tx", None)]);
        let bed = up(&spec, dir.path()).unwrap();
        let (rx, tx) = (bed.host("rx").unwrap(), bed.host("tx").unwrap());
        offloads_on(&[rx, tx]);
        let mut goodputs = tcp_goodputs(
            rx,
            tx,
            Duration::from_millis(300),
            Duration::from_millis(500),
            5,
        );
        down(&name, dir.path()).unwrap();
        let want = rate_mbit * 1e6 * 1448.0 / 1514.0;
        goodputs.sort_by(f64::total_cmp);
        let (median, best) = (goodputs[2], goodputs[4]);
        let pct = |x: f64| (x - want) / want * 100.0;
        eprintln!(
            "{rate_mbit} Mbit/s: windows {:.1?} Mbit/s, median {:+.1} %, best {:+.1} % of the expected {:.1}",
            goodputs.iter().map(|g| g / 1e6).collect::<Vec<_>>(),
            pct(median),
            pct(best),
            want / 1e6
        );
        assert!(
            pct(median) <= 3.0,
            "{rate_mbit} Mbit/s: median window {:.1} Mbit/s is {:+.1} % over the expected {:.1}",
            median / 1e6,
            pct(median),
            want / 1e6
        );
        assert!(
            pct(best) >= -3.0,
            "{rate_mbit} Mbit/s: even the best window, {:.1} Mbit/s, is {:+.1} % under the expected {:.1}",
            best / 1e6,
            pct(best),
            want / 1e6
        );
        assert_nothing_left(&name, dir.path());
    }
}

/// `UDP_SEGMENT` from linux/udp.h (not in the libc crate for glibc).
const UDP_SEGMENT: libc::c_int = 103;

/// The claim that tbf drops GSO packets larger than its bucket held before
/// Linux 3.13; since then it segments them. One UDP GSO send of 40 × 1400
/// bytes is one 57 kB skb at the qdisc (the stack segments it only after the
/// qdisc, in validate_xmit_skb), 14 times the 4000-byte bucket of a
/// 2 Mbit/s tbf (16 ms of the rate): all 40 datagrams must arrive, and tbf
/// must drop nothing. At 20 Mbit/s the bucket (40 kB) would be too close to
/// the packet's size to show much.
#[test]
fn tbf_segments_gso_packets_larger_than_its_bucket() {
    require_root_and_iproute2!();
    let dir = tempfile::tempdir().unwrap();
    let name = bed_name('g');
    let _guard = Guard(name.clone(), dir.path());
    let spec = spec(&name, "direct", &[("rx", Some(2.0)), ("tx", None)]);
    let bed = up(&spec, dir.path()).unwrap();
    let (rx, tx) = (
        bed.host("rx").unwrap().clone(),
        bed.host("tx").unwrap().clone(),
    );
    offloads_on(&[&rx, &tx]);
    assert!(10 * TbfParams::for_rate(2_000_000).burst_bytes < 40 * 1400);
    let rx_addr = rx.address;
    let receiver = in_netns(&rx.netns, move || UdpSocket::bind((rx_addr, 0)))
        .unwrap()
        .unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let dest = receiver.local_addr().unwrap();
    let tx_addr = tx.address;
    let sender = in_netns(&tx.netns, move || UdpSocket::bind((tx_addr, 0)))
        .unwrap()
        .unwrap();
    let seg: libc::c_int = 1400;
    // SAFETY: a valid socket, option value and length.
    let rc = unsafe {
        libc::setsockopt(
            sender.as_raw_fd(),
            libc::SOL_UDP,
            UDP_SEGMENT,
            (&seg as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return benchlab_testkit::unsupported(format!(
            "this kernel refuses UDP_SEGMENT: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut buf = [0u8; 2048];
    for round in 0..3 {
        sender.send_to(&vec![round as u8; 40 * 1400], dest).unwrap();
        let mut got = 0;
        while got < 40 {
            let n = receiver
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("round {round}: {got} of 40 segments arrived: {e}"));
            assert_eq!(n, 1400);
            got += 1;
        }
    }
    // The sender's end shapes tx -> rx (a direct bed limits both ends).
    let stats = run(&[
        "tc",
        "-s",
        "-n",
        &tx.netns,
        "qdisc",
        "show",
        "dev",
        &tx.interface,
    ])
    .1;
    assert!(
        stats.contains("qdisc tbf") && stats.contains("dropped 0,"),
        "{stats}"
    );
    eprintln!("{stats}");
    down(&name, dir.path()).unwrap();
    assert_nothing_left(&name, dir.path());
}

/// The relay inside a bed: started on a thread that entered the sut's
/// namespace, its threads (and the upstream connections they open) stay
/// there, so it can forward to the sut's own loopback.
#[test]
fn relay_runs_inside_a_host() {
    use benchlab_testbed::relay::{self, RelayConfig, RelayProtocol};
    require_root_and_iproute2!();
    let dir = tempfile::tempdir().unwrap();
    let name = bed_name('y');
    let _guard = Guard(name.clone(), dir.path());
    let spec = spec(&name, "direct", &[("sut", None), ("gen", None)]);
    let bed = up(&spec, dir.path()).unwrap();
    let (sut, gen) = (bed.host("sut").unwrap(), bed.host("gen").unwrap());
    let sut_addr = sut.address;
    let delay = Duration::from_millis(2);
    let (relay, echo_thread) = in_netns(&sut.netns, move || {
        // An echo server on the sut's loopback: reachable only from inside.
        let echo = TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream = echo.local_addr().unwrap();
        let t = thread::spawn(move || {
            let (mut c, _) = echo.accept().unwrap();
            let mut buf = [0u8; 64];
            while let Ok(n) = c.read(&mut buf) {
                if n == 0 || c.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
        let cfg = RelayConfig {
            listen: (sut_addr, 0).into(),
            upstream,
            delay,
            protocol: RelayProtocol::Tcp,
        };
        (relay::start(cfg).unwrap(), t)
    })
    .unwrap();
    let relay_addr = relay.local_addr();
    let mut c = in_netns(&gen.netns, move || TcpStream::connect(relay_addr))
        .unwrap()
        .unwrap();
    c.set_nodelay(true).unwrap();
    let t0 = Instant::now();
    c.write_all(b"hello").unwrap();
    let mut back = [0u8; 5];
    c.read_exact(&mut back).unwrap();
    assert!(t0.elapsed() >= 2 * delay, "{:?}", t0.elapsed());
    assert_eq!(&back, b"hello");
    drop(c);
    let stats = relay.stop();
    echo_thread.join().unwrap();
    assert_eq!((stats.tcp.flows, stats.tcp.flow_errors), (1, 0));
    down(&name, dir.path()).unwrap();
    assert_nothing_left(&name, dir.path());
}
