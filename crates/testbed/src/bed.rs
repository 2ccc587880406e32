//! Bringing a test bed up and down, crash-proof.
//!
//! ## What `up` makes
//!
//! Every host is a network namespace with `lo` up. In a `direct` bed one
//! veth pair joins the two hosts; in a `bridge` bed each host's veth pair
//! ends in a switch namespace on a Linux bridge (STP off, forward delay 0, so
//! ports forward at once). Both ends of a veth are created directly inside
//! their namespaces (`ip link add … netns A type veth peer … netns B`): the
//! root namespace never holds an interface of a bed, not even for a moment,
//! and a bed's subnet cannot clash with the machine's own networks. Veths
//! keep the default MTU of 1500, set explicitly.
//!
//! `[[testbed.link]]` adds a veth pair straight between two hosts, named
//! `<testbed>_l<i>` in both namespaces, on the link's own subnet: a second,
//! direct path beside the topology's (unshaped).
//!
//! `rate_mbit` puts a tc tbf on the host's veth end (host → network) and on
//! the end facing the host (network → host), so both directions are limited.
//! In a `direct` bed the one link carries both hosts' limits: each end gets
//! the smaller rate and the sum of the delays. See [`TbfParams`] for the
//! parameters and why they are what they are. `delay_ms` needs sch_netem;
//! on a kernel without it (see [`netem_available`]) `up` refuses before it
//! creates anything and points to the delaying relay ([`crate::relay`]).
//!
//! Offloads: when `ethtool` is installed, `up` turns TSO, GSO and GRO off on
//! every veth end so that tbf sees wire-sized packets. Without it they stay
//! on (the veth default) and [`Testbed::notes`] says so; tbf then segments
//! GSO packets larger than its bucket itself (`tbf_segment` in
//! net/sched/sch_tbf.c, since Linux 3.13), so shaping stays correct, at some
//! CPU cost. Tests check both: the goodput with offloads on, and that a
//! 57 kB UDP GSO packet passes a 4 kB bucket (2 Mbit/s) without a drop.
//!
//! ## The state file
//!
//! `<state_dir>/<name>.json` records every object before it is created
//! (write to `<name>.json.tmp`, fsync, rename, fsync the directory), so that
//! [`down`] removes exactly what [`up`] made, in reverse order, even after
//! `up` died half-way. An object whose creation failed is struck from the
//! record again, so `down` never touches a namespace of the same name that
//! somebody else made; and before creating anything `up` refuses if one of
//! its namespaces exists already. `up` claims the name by hard-linking a
//! complete first state file into place (`link(2)` never replaces): a second
//! `up` of the same name is refused, even a concurrent one. When `up` fails
//! with an error (rather than dying), it undoes what it made before
//! returning.
//!
//! Known gap: if `up` dies after recording a namespace but before creating
//! it, and somebody else then creates a namespace of that very name before
//! `down` runs, `down` removes it. Names start with `bl-<testbed>-`, so this
//! needs a deliberate clash.
//!
//! The file is JSON: `{"format": 1, "name": …, "complete": bool, "spec": …,
//! "hosts": [HostInfo…], "objects": [Object…]}`; objects are tagged by
//! `kind`: `{"kind": "netns", "name": …}`, `{"kind": "veth", "netns", "name",
//! "peer_netns", "peer"}`, `{"kind": "bridge", "netns", "name"}`,
//! `{"kind": "qdisc", "netns", "dev", "qdisc", "handle", "parent"}`.
//!
//! ## Using a bed
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use benchlab_testbed::{default_state_dir, down, parse_spec, up};
//! let text = std::fs::read_to_string("study.toml")?;
//! let spec = parse_spec("study.toml", &text)?;
//! let bed = up(&spec, &default_state_dir())?;
//! let sut = &bed.hosts[0];
//! // `ip netns exec bl-demo-sut benchlab agent --stdio`, or in-process:
//! let mut agent = sut.command("benchlab");
//! agent.args(["agent", "--stdio"]);
//! # let _ = agent;
//! let report = down(&bed.name, &default_state_dir())?;
//! println!("removed {} objects", report.removed.len());
//! # Ok(()) }
//! ```
//!
//! [`in_netns`] runs a closure on a thread that has entered a host's
//! namespace: sockets it creates live there, which is how tests (and a
//! [`crate::relay`] placed inside a bed) talk across hosts from one process.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::spec::{self, SpecError, TestbedSpec, Topology};

/// Where iproute2 keeps the bind mounts of named namespaces.
pub const NETNS_DIR: &str = "/run/netns";
/// Default base of benchlab's run-time state; `BENCHLAB_STATE_DIR` overrides
/// it. Test bed state files live in its `testbed` subdirectory.
pub const DEFAULT_STATE_BASE: &str = "/run/benchlab";
/// Version of the state file format.
pub const STATE_FORMAT: u32 = 1;
/// The MTU of every veth (the Ethernet default, set explicitly).
pub const MTU: u32 = 1500;
/// A full-size frame as tbf counts it: MTU plus the 14-byte Ethernet
/// header (tbf sees `skb->len`, which has the header but no FCS).
pub const MAX_FRAME_BYTES: u64 = MTU as u64 + 14;
/// The largest GSO packet the stack builds on a veth (`GSO_MAX_SIZE`).
pub const GSO_MAX_BYTES: u64 = 65_536;
/// tbf's bucket, in milliseconds of the rate (see [`TbfParams`]).
pub const BUCKET_MS: u64 = 16;
/// The shortest tbf queue, in full-size frames (see [`TbfParams`]).
pub const MIN_QUEUE_FRAMES: u64 = 128;
/// How long `down` lets processes react to SIGTERM before SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(1);

/// tbf's parameters for one rate, as [`up`] sets them:
/// `tc qdisc add … tbf rate R bit burst B limit L mpu 64`.
///
/// - **burst** = max(rate × [`BUCKET_MS`] (16 ms), 2 full-size frames).
///   The bucket must cover the time tbf's watchdog can be late: tbf sleeps
///   on an hrtimer until enough tokens have arrived, and tokens that arrive
///   while the bucket is full are lost, so a bucket smaller than rate ×
///   wake-up latency caps throughput below the rate. On an idle machine
///   1 ms is enough, but on this project's two-core machines (kernel 6.18)
///   under the load of parallel builds a wake-up is often several ms late.
///   Measured TCP goodput over a veth pair (a Python socket sender and
///   receiver in two namespaces), 2 s windows, offloads off,
///   expected 1448/1514 of the rate (191.3 Mbit/s at 200, 95.6 at 100),
///   with 4 memory-bound busy processes or parallel cargo builds on the
///   two cores: at 200 Mbit/s, 1 ms gave 179-186, 4 ms 184-191, 16 ms
///   191.0-191.9, 64 ms 190.8-191.7; two streams from one generator through
///   a bridge to two 100 Mbit/s hosts, 1 ms gave 90.5-95.3 per host, 4 ms
///   93.6-95.7, 16 ms 94.3-95.7, 32 ms 95.4-95.7; idle, every size gave
///   99.3-100 %. A larger bucket lets a sender that paused burst up to
///   `burst` at veth speed, so a window of T seconds can see up to
///   burst / T more than the rate (32 ms gave 193.6 of 191.3 at
///   200 Mbit/s): 16 ms keeps that under 0.8 % of a 2 s window while
///   holding the rate within 1.5 % under load. Two frames is the floor
///   because a non-GSO packet larger than the bucket can never be sent and
///   is dropped. A larger floor (64 kB, so that GSO packets pass whole)
///   would let a slow link burst 64 kB at veth speed: 52 ms worth at
///   10 Mbit/s. GSO packets larger than the bucket are segmented by tbf
///   itself (Linux ≥ 3.13), not dropped; from ~33 Mbit/s up the bucket
///   holds a whole 64 KiB GSO packet anyway.
/// - **limit** (bytes queued behind the bucket) = burst + max(rate × 10 ms,
///   [`MIN_QUEUE_FRAMES`] (128) full-size frames ≈ 194 kB). At high rates a
///   10 ms queue, like a switch port buffer, keeps the link busy through
///   TCP's sawtooth (at 2 Gbit/s a 2.4 ms queue lost 3 % of goodput to
///   drops, 10 ms none) without hundreds of ms of bufferbloat. At low rates
///   the floor rules: in a bed the RTT is ~0.1 ms, so at the end of slow
///   start TCP's window is almost all queue and its overshoot drops whole
///   windows; with a short queue the retransmissions are dropped too and TCP
///   stalls for its 200 ms minimum RTO. Measured at 20 Mbit/s, 0.8 s
///   windows: a 68 kB queue (burst + 64 KiB) gave 140-230 ms stalls in about
///   half the transfers (goodput down to 58 %), 128 kB still some, 194 kB
///   none in 12 (95.6 % every time). The price is up to ~78 ms of queueing
///   at 20 Mbit/s under bulk load (155 Mbit/s and up: 10 ms). The floor also
///   holds every segment of a 64 KiB GSO packet.
/// - **mpu** 64: a frame shorter than Ethernet's minimum is counted as 64
///   bytes, as on a wire. No `mtu`/`peakrate`: tbf's `mtu` sizes only the
///   peak-rate bucket, which we do not use; the largest packet tbf passes
///   whole is set by `burst` alone.
///
/// The rate counts Ethernet header and payload but no preamble, FCS or
/// inter-frame gap, so TCP goodput with 1500-byte MTU and timestamps is
/// 1448 / 1514 ≈ 95.6 % of the rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TbfParams {
    /// Token rate, bit/s.
    pub rate_bit_s: u64,
    /// Bucket size, bytes.
    pub burst_bytes: u64,
    /// Queue limit, bytes (including the bucket, as tbf counts it).
    pub limit_bytes: u64,
    /// Minimum packet unit, bytes.
    pub mpu_bytes: u64,
}

impl TbfParams {
    /// The parameters [`up`] uses for `rate_bit_s`.
    pub fn for_rate(rate_bit_s: u64) -> TbfParams {
        let bytes_per_ms = rate_bit_s / 8 / 1000;
        let burst_bytes = (BUCKET_MS * bytes_per_ms).max(2 * MAX_FRAME_BYTES);
        let limit_bytes = burst_bytes + (10 * bytes_per_ms).max(MIN_QUEUE_FRAMES * MAX_FRAME_BYTES);
        TbfParams {
            rate_bit_s,
            burst_bytes,
            limit_bytes,
            mpu_bytes: 64,
        }
    }

    fn tc_args(&self) -> Vec<String> {
        vec![
            "tbf".into(),
            "rate".into(),
            format!("{}bit", self.rate_bit_s),
            "burst".into(),
            self.burst_bytes.to_string(),
            "limit".into(),
            self.limit_bytes.to_string(),
            "mpu".into(),
            self.mpu_bytes.to_string(),
        ]
    }
}

/// netem's queue, in packets: twice the packets in flight over the delay at
/// the rate (10 Gbit/s when unlimited), and never below netem's default.
fn netem_limit_packets(rate_bit_s: Option<u64>, delay_us: u64) -> u64 {
    let rate = rate_bit_s.unwrap_or(10_000_000_000);
    let in_flight = rate / 8 * delay_us / 1_000_000 / MAX_FRAME_BYTES;
    (2 * in_flight).max(1000)
}

/// One host of a running bed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfo {
    /// The host's name in the spec.
    pub name: String,
    /// Its namespace, `bl-<testbed>-<host>`.
    pub netns: String,
    /// Its address on the bed's subnet.
    pub address: Ipv4Addr,
    /// The subnet's prefix length.
    pub prefix_len: u8,
    /// Its veth end, inside `netns`.
    pub interface: String,
}

impl HostInfo {
    /// `ip netns exec <netns> <program>`: a command that runs inside the
    /// host. Add arguments with [`Command::args`].
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.netns, program]);
        c
    }
}

/// A bed that is up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Testbed {
    /// The bed's name.
    pub name: String,
    /// How its hosts are joined.
    pub topology: Topology,
    /// Its hosts, in spec order.
    pub hosts: Vec<HostInfo>,
    /// The switch namespace of a bridge bed.
    pub switch_netns: Option<String>,
    /// The state file that records what was made.
    pub state_file: PathBuf,
    /// Things worth knowing about the bed (offloads left on, …).
    pub notes: Vec<String>,
}

impl Testbed {
    /// The host called `name`.
    pub fn host(&self, name: &str) -> Option<&HostInfo> {
        self.hosts.iter().find(|h| h.name == name)
    }
}

/// One object a bed made, as recorded in its state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Object {
    /// A named network namespace.
    Netns {
        /// Its name.
        name: String,
    },
    /// A veth pair; deleting either end deletes both.
    Veth {
        /// Namespace of the first end.
        netns: String,
        /// The first end.
        name: String,
        /// Namespace of the peer end.
        peer_netns: String,
        /// The peer end.
        peer: String,
    },
    /// A Linux bridge.
    Bridge {
        /// Its namespace.
        netns: String,
        /// Its name.
        name: String,
    },
    /// A qdisc on a device.
    Qdisc {
        /// Namespace of the device.
        netns: String,
        /// The device.
        dev: String,
        /// `tbf` or `netem`.
        qdisc: String,
        /// Its handle, e.g. `1:`.
        handle: String,
        /// `root` or the parent class, e.g. `1:1`.
        parent: String,
    },
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Object::Netns { name } => write!(f, "namespace {name}"),
            Object::Veth {
                netns,
                name,
                peer_netns,
                peer,
            } => write!(f, "veth {netns}/{name} <-> {peer_netns}/{peer}"),
            Object::Bridge { netns, name } => write!(f, "bridge {netns}/{name}"),
            Object::Qdisc {
                netns,
                dev,
                qdisc,
                handle,
                parent,
            } => write!(f, "qdisc {qdisc} {handle} ({parent}) on {netns}/{dev}"),
        }
    }
}

/// What [`status`] finds for one recorded object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectStatus {
    /// The recorded object.
    pub object: Object,
    /// Whether it exists now.
    pub exists: bool,
}

/// A recorded bed and the state of each of its objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The bed's name.
    pub name: String,
    /// Its state file.
    pub state_file: PathBuf,
    /// Whether `up` finished (false: it is still running, or it died).
    pub complete: bool,
    /// Its hosts.
    pub hosts: Vec<HostInfo>,
    /// Every recorded object, in creation order.
    pub objects: Vec<ObjectStatus>,
}

/// A process `down` stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KilledProcess {
    /// The namespace it ran in.
    pub netns: String,
    /// Its pid.
    pub pid: u32,
    /// Whether SIGTERM was not enough.
    pub sigkill: bool,
}

/// What [`down`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DownReport {
    /// The bed's name.
    pub name: String,
    /// Whether a state file was found (false: nothing to do).
    pub found: bool,
    /// Processes stopped in the bed's namespaces.
    pub killed: Vec<KilledProcess>,
    /// Objects removed, in removal order.
    pub removed: Vec<Object>,
    /// Recorded objects that did not exist (already removed, or never made
    /// because `up` died between recording and creating them).
    pub already_gone: Vec<Object>,
}

/// Why a bed could not be brought up, down or inspected.
#[derive(Debug, Error)]
pub enum TestbedError {
    /// The spec is invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A test bed name that `down`/`status` cannot use.
    #[error("invalid test bed name: {0}")]
    BadName(String),
    /// Not running as root.
    #[error("test beds need root (network namespaces, veth pairs, tc); run as root")]
    NotRoot,
    /// `ip` or `tc` is not installed.
    #[error("`{tool}` not found; install iproute2, which provides `ip` and `tc`")]
    MissingTool {
        /// The missing program.
        tool: String,
    },
    /// A command could not be started.
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        source: io::Error,
    },
    /// A command exited with an error.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard error, trimmed.
        stderr: String,
    },
    /// `up` of a name whose state file exists.
    #[error("test bed `{name}` is already up or was not taken down (state file {}); run `down {name}` first", path.display())]
    AlreadyUp {
        /// The bed's name.
        name: String,
        /// Its state file.
        path: PathBuf,
    },
    /// A namespace the bed would create exists and is not recorded.
    #[error("namespace `{netns}` already exists and no state file records it, so it was not made by this test bed (or its state directory was lost); choose another test bed name, or remove it yourself with `ip netns del {netns}` if it is yours")]
    Conflict {
        /// The namespace.
        netns: String,
    },
    /// A host sets `delay_ms` on a kernel without netem.
    #[error("host `{host}` sets delay_ms = {delay_ms}, but this kernel has no netem (sch_netem), so tc cannot delay packets (probe: {reason}); remove delay_ms and put a delaying relay in the path instead (benchlab_testbed::relay: a TCP/UDP relay that holds every chunk for a fixed time)")]
    NoNetem {
        /// The host.
        host: String,
        /// Its delay.
        delay_ms: f64,
        /// What the probe said.
        reason: String,
    },
    /// The state file could not be read or written.
    #[error("state file {}: {source}", path.display())]
    StateIo {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The state file is not a test bed state.
    #[error("state file {} is not a test bed state: {message}", path.display())]
    StateCorrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A run that is still going owns the bed (brought it up for itself).
    #[error("test bed `{name}` belongs to a run in progress (process {pid}), which takes it down when it ends")]
    Busy {
        /// The bed's name.
        name: String,
        /// The owning run's process.
        pid: u32,
    },
    /// The bed is recorded but not whole, and no run owns it.
    #[error("test bed `{name}` is recorded but not whole (an `up` that did not finish, or objects removed by hand): run `benchlab testbed down {name}`, then run again")]
    HalfMade {
        /// The bed's name.
        name: String,
    },
    /// `status` of a bed no state file records.
    #[error("no test bed `{name}` is recorded in {}", dir.display())]
    NotRecorded {
        /// The bed's name.
        name: String,
        /// The state directory.
        dir: PathBuf,
    },
    /// `down` could not remove everything; the state file keeps what is left.
    #[error("test bed `{name}`: could not remove {}; the state file keeps them, run `down {name}` again", failures.join("; "))]
    Incomplete {
        /// The bed's name.
        name: String,
        /// One line per object that could not be removed.
        failures: Vec<String>,
    },
    /// `up` failed and undoing its work failed too.
    #[error("{error}; undoing what was made failed too ({rollback}); run `down {name}`")]
    RollbackFailed {
        /// The bed's name.
        name: String,
        /// Why `up` failed.
        error: Box<TestbedError>,
        /// Why the undo failed.
        rollback: Box<TestbedError>,
    },
}

/// `$BENCHLAB_STATE_DIR/testbed`, or `/run/benchlab/testbed` (`/run` is a
/// tmpfs: state files vanish at reboot, as the namespaces do).
pub fn default_state_dir() -> PathBuf {
    let base = std::env::var_os("BENCHLAB_STATE_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_BASE));
    base.join("testbed")
}

fn state_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

// ----- commands -------------------------------------------------------------

fn run<S: AsRef<str>>(program: &str, args: &[S]) -> Result<String, TestbedError> {
    let args: Vec<&str> = args.iter().map(|a| a.as_ref()).collect();
    let command = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new(program)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                TestbedError::MissingTool {
                    tool: program.to_string(),
                }
            } else {
                TestbedError::Spawn {
                    command: command.clone(),
                    source,
                }
            }
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(TestbedError::Command {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

fn ip<S: AsRef<str>>(args: &[S]) -> Result<String, TestbedError> {
    run("ip", args)
}

fn tc<S: AsRef<str>>(args: &[S]) -> Result<String, TestbedError> {
    run("tc", args)
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

// ----- existence checks -----------------------------------------------------

fn netns_exists(name: &str) -> bool {
    Path::new(NETNS_DIR).join(name).exists()
}

fn link_exists(netns: &str, dev: &str) -> bool {
    netns_exists(netns) && ip(&["-n", netns, "link", "show", "dev", dev]).is_ok()
}

fn qdisc_exists(netns: &str, dev: &str, qdisc: &str, handle: &str, parent: &str) -> bool {
    if !link_exists(netns, dev) {
        return false;
    }
    let Ok(out) = tc(&["-n", netns, "qdisc", "show", "dev", dev]) else {
        return false;
    };
    // Lines look like `qdisc tbf 1: root refcnt 2 rate …` or
    // `qdisc tbf 10: parent 1:1 rate …`.
    out.lines().any(|line| {
        let t: Vec<&str> = line.split_whitespace().collect();
        t.len() >= 4
            && t[0] == "qdisc"
            && t[1] == qdisc
            && t[2] == handle
            && if parent == "root" {
                t[3] == "root"
            } else {
                t.get(4) == Some(&parent)
            }
    })
}

fn object_exists(o: &Object) -> bool {
    match o {
        Object::Netns { name } => netns_exists(name),
        Object::Veth { netns, name, .. } => link_exists(netns, name),
        Object::Bridge { netns, name } => link_exists(netns, name),
        Object::Qdisc {
            netns,
            dev,
            qdisc,
            handle,
            parent,
        } => qdisc_exists(netns, dev, qdisc, handle, parent),
    }
}

fn remove_object(o: &Object) -> Result<(), TestbedError> {
    match o {
        Object::Netns { name } => ip(&["netns", "del", name]).map(drop),
        Object::Veth { netns, name, .. } | Object::Bridge { netns, name } => {
            ip(&["-n", netns, "link", "del", "dev", name]).map(drop)
        }
        Object::Qdisc {
            netns,
            dev,
            handle,
            parent,
            ..
        } => {
            let mut args = vec!["-n", netns, "qdisc", "del", "dev", dev];
            if parent == "root" {
                args.push("root");
            } else {
                args.extend(["parent", parent, "handle", handle]);
            }
            tc(&args).map(drop)
        }
    }
}

// ----- netem probe ----------------------------------------------------------

static NETEM_PROBE: OnceLock<Result<(), String>> = OnceLock::new();

/// Whether this kernel has netem. Probed once per process: a scratch
/// namespace gets `tc qdisc add dev lo root netem delay 1ms`, which is then
/// removed with the namespace. False when not root (nothing can be probed).
pub fn netem_available() -> bool {
    netem_probe().is_ok()
}

fn netem_probe() -> Result<(), String> {
    NETEM_PROBE
        .get_or_init(|| {
            if !is_root() {
                return Err("not root, cannot probe".into());
            }
            let ns = format!("bl-netem-probe-{}", std::process::id());
            ip(&["netns", "add", &ns]).map_err(|e| e.to_string())?;
            let result = ip(&["-n", &ns, "link", "set", "lo", "up"])
                .and_then(|_| {
                    tc(&[
                        "-n", &ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
                    ])
                })
                .and_then(|_| tc(&["-n", &ns, "qdisc", "del", "dev", "lo", "root"]))
                .map(drop)
                .map_err(|e| match e {
                    TestbedError::Command { stderr, .. } => stderr,
                    other => other.to_string(),
                });
            let _ = ip(&["netns", "del", &ns]);
            result
        })
        .clone()
}

// ----- the state file -------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    format: u32,
    name: String,
    #[serde(default)]
    complete: bool,
    #[serde(default)]
    spec: Option<TestbedSpec>,
    #[serde(default)]
    hosts: Vec<HostInfo>,
    #[serde(default)]
    switch_netns: Option<String>,
    objects: Vec<Object>,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> TestbedError + '_ {
    move |source| TestbedError::StateIo {
        path: path.to_path_buf(),
        source,
    }
}

impl State {
    fn to_json(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("state serializes");
        v.push(b'\n');
        v
    }

    /// Replaces the state file atomically and durably: temp file, fsync,
    /// rename, fsync of the directory. A crash leaves the old or the new
    /// file, never a torn one.
    fn save(&self, path: &Path) -> Result<(), TestbedError> {
        let tmp = path.with_extension("json.tmp");
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(&self.to_json()).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
        drop(f);
        fs::rename(&tmp, path).map_err(io_err(path))?;
        sync_dir(path)
    }

    /// Creates the state file, failing if it exists: this claims the name.
    /// The content is written to a file of this process's own first and
    /// hard-linked into place (`link(2)` never replaces), so the claim is
    /// atomic and a crash never leaves a torn state file.
    fn claim(&self, path: &Path) -> Result<(), TestbedError> {
        let tmp = path.with_extension(format!("json.claim.{}", std::process::id()));
        let written = File::create(&tmp).and_then(|mut f| {
            f.write_all(&self.to_json())?;
            f.sync_all()
        });
        let linked = written.and_then(|()| fs::hard_link(&tmp, path));
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => sync_dir(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(TestbedError::AlreadyUp {
                name: self.name.clone(),
                path: path.to_path_buf(),
            }),
            Err(e) => Err(io_err(path)(e)),
        }
    }

    fn load(path: &Path) -> Result<Option<State>, TestbedError> {
        let text = match fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(path)(e)),
        };
        let state: State =
            serde_json::from_slice(&text).map_err(|e| TestbedError::StateCorrupt {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        if state.format != STATE_FORMAT {
            return Err(TestbedError::StateCorrupt {
                path: path.to_path_buf(),
                message: format!(
                    "format {} (this benchlab reads format {STATE_FORMAT})",
                    state.format
                ),
            });
        }
        Ok(Some(state))
    }
}

fn sync_dir(path: &Path) -> Result<(), TestbedError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Records each object before creating it; strikes it out again when the
/// creation fails (then it is not ours).
struct Recorder {
    path: PathBuf,
    state: State,
}

impl Recorder {
    fn create(
        &mut self,
        object: Object,
        make: impl FnOnce() -> Result<(), TestbedError>,
    ) -> Result<(), TestbedError> {
        self.state.objects.push(object);
        self.state.save(&self.path)?;
        if let Err(e) = make() {
            self.state.objects.pop();
            self.state.save(&self.path)?;
            return Err(e);
        }
        Ok(())
    }
}

// ----- up -------------------------------------------------------------------

/// Egress shaping of one veth end.
#[derive(Debug, Clone, Copy, Default)]
struct Shaping {
    rate_bit_s: Option<u64>,
    delay_us: Option<u64>,
}

/// Brings the bed described by `spec` up, recording every object in
/// `<state_dir>/<name>.json` before creating it. On an error it undoes what it
/// made; if the process dies instead, [`down`] does.
pub fn up(spec: &TestbedSpec, state_dir: &Path) -> Result<Testbed, TestbedError> {
    spec.validate("<testbed spec>")?;
    if !is_root() {
        return Err(TestbedError::NotRoot);
    }
    ip(&["-V"])?;
    tc(&["-V"])?;
    if let Some(host) = spec.hosts.iter().find(|h| h.delay_us().is_some()) {
        if let Err(reason) = netem_probe() {
            return Err(TestbedError::NoNetem {
                host: host.name.clone(),
                delay_ms: host.delay_ms.unwrap_or_default(),
                reason,
            });
        }
    }
    fs::create_dir_all(state_dir).map_err(io_err(state_dir))?;

    let hosts: Vec<HostInfo> = spec
        .hosts
        .iter()
        .enumerate()
        .map(|(i, h)| HostInfo {
            name: h.name.clone(),
            netns: spec.netns(h),
            address: spec.address(i),
            prefix_len: spec.subnet.prefix_len,
            interface: spec::host_interface(&spec.name, &h.name),
        })
        .collect();
    let switch_netns = (spec.topology == Topology::Bridge).then(|| spec::switch_netns(&spec.name));
    let path = state_path(state_dir, &spec.name);
    let state = State {
        format: STATE_FORMAT,
        name: spec.name.clone(),
        complete: false,
        spec: Some(spec.clone()),
        hosts: hosts.clone(),
        switch_netns: switch_netns.clone(),
        objects: Vec::new(),
    };
    state.claim(&path)?;
    let mut rec = Recorder { path, state };

    let all_netns = hosts
        .iter()
        .map(|h| h.netns.clone())
        .chain(switch_netns.clone());
    for ns in all_netns {
        if netns_exists(&ns) {
            let _ = fs::remove_file(&rec.path);
            return Err(TestbedError::Conflict { netns: ns });
        }
    }

    let mut notes = Vec::new();
    match build(spec, &hosts, switch_netns.as_deref(), &mut rec, &mut notes) {
        Ok(()) => {}
        Err(error) => {
            return match teardown(&spec.name, &rec.path, rec.state.clone()) {
                Ok(_) => Err(error),
                Err(rollback) => Err(TestbedError::RollbackFailed {
                    name: spec.name.clone(),
                    error: Box::new(error),
                    rollback: Box::new(rollback),
                }),
            };
        }
    }
    rec.state.complete = true;
    rec.state.save(&rec.path)?;
    Ok(Testbed {
        name: spec.name.clone(),
        topology: spec.topology,
        hosts,
        switch_netns,
        state_file: rec.path,
        notes,
    })
}

fn build(
    spec: &TestbedSpec,
    hosts: &[HostInfo],
    switch_netns: Option<&str>,
    rec: &mut Recorder,
    notes: &mut Vec<String>,
) -> Result<(), TestbedError> {
    let mut namespaces: Vec<&str> = hosts.iter().map(|h| h.netns.as_str()).collect();
    namespaces.extend(switch_netns);
    for ns in &namespaces {
        rec.create(
            Object::Netns {
                name: ns.to_string(),
            },
            || ip(&["netns", "add", ns]).map(drop),
        )?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
    }

    // (namespace, device) of every veth end, for the offload settings.
    let mut ends: Vec<(String, String)> = Vec::new();
    match spec.topology {
        Topology::Direct => {
            let (a, b) = (&hosts[0], &hosts[1]);
            rec.create(
                Object::Veth {
                    netns: a.netns.clone(),
                    name: a.interface.clone(),
                    peer_netns: b.netns.clone(),
                    peer: b.interface.clone(),
                },
                || add_veth(&a.netns, &a.interface, &b.netns, &b.interface),
            )?;
            // One link carries both hosts' limits: the smaller rate and the
            // sum of the one-way delays, in each direction.
            let rate = spec.hosts.iter().filter_map(|h| h.rate_bit_s()).min();
            let delay: u64 = spec.hosts.iter().filter_map(|h| h.delay_us()).sum();
            let shaping = Shaping {
                rate_bit_s: rate,
                delay_us: (delay > 0).then_some(delay),
            };
            for h in [a, b] {
                host_address(h)?;
                shape(rec, &h.netns, &h.interface, shaping)?;
                ends.push((h.netns.clone(), h.interface.clone()));
            }
        }
        Topology::Bridge => {
            let sw = switch_netns.expect("bridge beds have a switch namespace");
            let br = spec::bridge_name(&spec.name);
            rec.create(
                Object::Bridge {
                    netns: sw.to_string(),
                    name: br.clone(),
                },
                || {
                    ip(&[
                        "-n",
                        sw,
                        "link",
                        "add",
                        "name",
                        &br,
                        "type",
                        "bridge",
                        "stp_state",
                        "0",
                        "forward_delay",
                        "0",
                    ])
                    .map(drop)
                },
            )?;
            link_up(sw, &br, &[])?;
            for (h, hs) in hosts.iter().zip(&spec.hosts) {
                let port = spec::switch_interface(&spec.name, &h.name);
                rec.create(
                    Object::Veth {
                        netns: h.netns.clone(),
                        name: h.interface.clone(),
                        peer_netns: sw.to_string(),
                        peer: port.clone(),
                    },
                    || add_veth(&h.netns, &h.interface, sw, &port),
                )?;
                link_up(sw, &port, &["mtu", &MTU.to_string(), "master", &br])?;
                host_address(h)?;
                let shaping = Shaping {
                    rate_bit_s: hs.rate_bit_s(),
                    delay_us: hs.delay_us(),
                };
                shape(rec, &h.netns, &h.interface, shaping)?;
                shape(rec, sw, &port, shaping)?;
                ends.push((h.netns.clone(), h.interface.clone()));
                ends.push((sw.to_string(), port));
            }
        }
    }

    // Extra direct links, beside the topology's: each end an address on
    // the link's own subnet, which the kernel routes through that link.
    for (i, link) in spec.links.iter().enumerate() {
        let dev = spec::link_interface(&spec.name, i);
        let ns: Vec<String> = link
            .hosts
            .iter()
            .map(|h| spec::host_netns(&spec.name, h))
            .collect();
        rec.create(
            Object::Veth {
                netns: ns[0].clone(),
                name: dev.clone(),
                peer_netns: ns[1].clone(),
                peer: dev.clone(),
            },
            || add_veth(&ns[0], &dev, &ns[1], &dev),
        )?;
        for (end, netns) in ns.iter().enumerate() {
            host_address(&HostInfo {
                name: link.hosts[end].clone(),
                netns: netns.clone(),
                address: link.address(end),
                prefix_len: link.subnet.prefix_len,
                interface: dev.clone(),
            })?;
            ends.push((netns.clone(), dev.clone()));
        }
    }

    match find_program("ethtool") {
        Some(ethtool) => {
            let ethtool = ethtool.to_string_lossy().into_owned();
            for (ns, dev) in &ends {
                let r = ip(&[
                    "netns", "exec", ns, &ethtool, "-K", dev, "tso", "off", "gso", "off", "gro",
                    "off",
                ]);
                if let Err(e) = r {
                    notes.push(format!(
                        "could not turn offloads off on {ns}/{dev}, they stay on: {e}"
                    ));
                }
            }
        }
        None => notes.push(
            "ethtool not found: TSO/GSO/GRO stay on on the veths (tbf segments GSO packets larger than its bucket)"
                .into(),
        ),
    }
    Ok(())
}

fn add_veth(ns_a: &str, a: &str, ns_b: &str, b: &str) -> Result<(), TestbedError> {
    ip(&[
        "link", "add", "name", a, "netns", ns_a, "type", "veth", "peer", "name", b, "netns", ns_b,
    ])
    .map(drop)
}

fn host_address(h: &HostInfo) -> Result<(), TestbedError> {
    let cidr = format!("{}/{}", h.address, h.prefix_len);
    let mtu = MTU.to_string();
    ip(&["-n", &h.netns, "addr", "add", &cidr, "dev", &h.interface])?;
    link_up(&h.netns, &h.interface, &["mtu", &mtu])
}

/// `ip -n NS link set dev DEV addrgenmode none`, then `… SETTINGS… up`.
/// No IPv6 link-local address: without one the kernel sends no MLD
/// reports or router solicitations, so the bed's links carry only the
/// traffic benchlab makes and the interface counters add up. Two
/// commands: in one, the kernel brings the link up before it reads the
/// mode, and a bridge (up with carrier at once) got its address.
fn link_up(ns: &str, dev: &str, settings: &[&str]) -> Result<(), TestbedError> {
    ip(&["-n", ns, "link", "set", "dev", dev, "addrgenmode", "none"])?;
    let mut args = vec!["-n", ns, "link", "set", "dev", dev];
    args.extend_from_slice(settings);
    args.push("up");
    ip(&args).map(drop)
}

/// netem as the root (handle 1:) with tbf as its child (10:), as in the
/// tc-netem man page's rate example; tbf alone as the root (1:) otherwise.
fn shape(rec: &mut Recorder, netns: &str, dev: &str, s: Shaping) -> Result<(), TestbedError> {
    let mut tbf_at = ("root".to_string(), "1:".to_string());
    if let Some(delay_us) = s.delay_us {
        let limit = netem_limit_packets(s.rate_bit_s, delay_us).to_string();
        let delay = format!("{delay_us}us");
        rec.create(
            Object::Qdisc {
                netns: netns.into(),
                dev: dev.into(),
                qdisc: "netem".into(),
                handle: "1:".into(),
                parent: "root".into(),
            },
            || {
                tc(&[
                    "-n", netns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem",
                    "delay", &delay, "limit", &limit,
                ])
                .map(drop)
            },
        )?;
        tbf_at = ("1:1".into(), "10:".into());
    }
    if let Some(rate) = s.rate_bit_s {
        let (parent, handle) = tbf_at;
        let mut args: Vec<String> = ["-n", netns, "qdisc", "add", "dev", dev]
            .map(String::from)
            .to_vec();
        if parent == "root" {
            args.push("root".into());
        } else {
            args.extend(["parent".into(), parent.clone()]);
        }
        args.extend(["handle".into(), handle.clone()]);
        args.extend(TbfParams::for_rate(rate).tc_args());
        rec.create(
            Object::Qdisc {
                netns: netns.into(),
                dev: dev.into(),
                qdisc: "tbf".into(),
                handle,
                parent,
            },
            || tc(&args).map(drop),
        )?;
    }
    Ok(())
}

// ----- down and status ------------------------------------------------------

/// Takes bed `name` down: stops the processes still running in its
/// namespaces (SIGTERM, then SIGKILL after [`KILL_GRACE`]), removes every
/// recorded object in reverse order of creation and then the state file.
/// Objects already gone are fine; objects not recorded are never touched.
/// Without a state file there is nothing to do: `found` is false.
pub fn down(name: &str, state_dir: &Path) -> Result<DownReport, TestbedError> {
    spec::check_testbed_name(name).map_err(TestbedError::BadName)?;
    let path = state_path(state_dir, name);
    let _ = fs::remove_file(path.with_extension("json.tmp"));
    match State::load(&path)? {
        None => Ok(DownReport {
            name: name.to_string(),
            found: false,
            killed: Vec::new(),
            removed: Vec::new(),
            already_gone: Vec::new(),
        }),
        Some(state) => {
            if !is_root() {
                return Err(TestbedError::NotRoot);
            }
            teardown(name, &path, state)
        }
    }
}

fn teardown(name: &str, path: &Path, mut state: State) -> Result<DownReport, TestbedError> {
    let mut report = DownReport {
        name: name.to_string(),
        found: true,
        killed: Vec::new(),
        removed: Vec::new(),
        already_gone: Vec::new(),
    };
    let mut failures = Vec::new();
    for o in &state.objects {
        if let Object::Netns { name: ns } = o {
            if netns_exists(ns) {
                match kill_processes(ns) {
                    Ok(k) => report.killed.extend(k),
                    Err(e) => failures.push(format!("processes in {ns}: {e}")),
                }
            }
        }
    }
    let mut left = Vec::new();
    while let Some(o) = state.objects.pop() {
        if !object_exists(&o) {
            report.already_gone.push(o);
            continue;
        }
        match remove_object(&o) {
            Ok(()) => report.removed.push(o),
            // Removed meanwhile (e.g. a veth whose peer went first).
            Err(_) if !object_exists(&o) => report.already_gone.push(o),
            Err(e) => {
                failures.push(format!("{o}: {e}"));
                left.push(o);
            }
        }
    }
    if failures.is_empty() {
        fs::remove_file(path).map_err(io_err(path))?;
        sync_dir(path)?;
        Ok(report)
    } else {
        left.reverse();
        state.objects = left;
        state.complete = false;
        state.save(path)?;
        Err(TestbedError::Incomplete {
            name: name.to_string(),
            failures,
        })
    }
}

fn netns_pids(ns: &str) -> Result<Vec<i32>, TestbedError> {
    let me = std::process::id() as i32;
    Ok(ip(&["netns", "pids", ns])?
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|p| *p > 1 && *p != me)
        .collect())
}

fn wait_gone(ns: &str, deadline: Instant) -> Result<Vec<i32>, TestbedError> {
    loop {
        let pids = netns_pids(ns)?;
        if pids.is_empty() || Instant::now() >= deadline {
            return Ok(pids);
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn kill_processes(ns: &str) -> Result<Vec<KilledProcess>, TestbedError> {
    let pids = netns_pids(ns)?;
    if pids.is_empty() {
        return Ok(Vec::new());
    }
    for &p in &pids {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(p, libc::SIGTERM) };
    }
    let stubborn = wait_gone(ns, Instant::now() + KILL_GRACE)?;
    for &p in &stubborn {
        // SAFETY: as above.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    let still = wait_gone(ns, Instant::now() + KILL_GRACE)?;
    if !still.is_empty() {
        return Err(TestbedError::Command {
            command: format!("kill -KILL {still:?}"),
            status: "processes survived SIGKILL".into(),
            stderr: String::new(),
        });
    }
    Ok(pids
        .into_iter()
        .map(|p| KilledProcess {
            netns: ns.to_string(),
            pid: p as u32,
            sigkill: stubborn.contains(&p),
        })
        .collect())
}

/// Lists each object recorded for bed `name` and whether it still exists.
pub fn status(name: &str, state_dir: &Path) -> Result<Status, TestbedError> {
    spec::check_testbed_name(name).map_err(TestbedError::BadName)?;
    let path = state_path(state_dir, name);
    let state = State::load(&path)?.ok_or_else(|| TestbedError::NotRecorded {
        name: name.to_string(),
        dir: state_dir.to_path_buf(),
    })?;
    // Looking into a namespace (`ip -n`) needs root: without it every
    // interface and qdisc would read as gone.
    if !is_root() {
        return Err(TestbedError::NotRoot);
    }
    let objects = state
        .objects
        .iter()
        .map(|o| ObjectStatus {
            object: o.clone(),
            exists: object_exists(o),
        })
        .collect();
    Ok(Status {
        name: state.name,
        state_file: path,
        complete: state.complete,
        hosts: state.hosts,
        objects,
    })
}

/// Runs `f` on a new thread that has entered network namespace `netns`
/// (`setns(2)` changes only the calling thread's namespace), and returns its
/// result. Sockets created inside `f` belong to that namespace and keep
/// working from any thread afterwards. A panic in `f` is resumed here.
pub fn in_netns<T, F>(netns: &str, f: F) -> io::Result<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let file = File::open(Path::new(NETNS_DIR).join(netns))?;
    let handle = thread::Builder::new()
        .name(format!("netns-{netns}"))
        .spawn(move || {
            // SAFETY: `file` is an open namespace file for the duration of
            // the call; setns only changes this thread's network namespace.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            drop(file);
            Ok(f())
        })?;
    match handle.join() {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tbf_parameters_follow_the_documented_rules() {
        // 1 Mbit/s: 16 ms is 2000 B, below two frames; the queue floor.
        let slow = TbfParams::for_rate(1_000_000);
        assert_eq!(slow.burst_bytes, 2 * MAX_FRAME_BYTES);
        assert_eq!(slow.limit_bytes, slow.burst_bytes + 128 * MAX_FRAME_BYTES);
        assert!(slow.limit_bytes - slow.burst_bytes >= GSO_MAX_BYTES);
        // 200 Mbit/s: 16 ms = 400 kB bucket, 10 ms = 250 kB queue.
        let mid = TbfParams::for_rate(200_000_000);
        assert_eq!(mid.burst_bytes, 400_000);
        assert_eq!(mid.limit_bytes, 400_000 + 250_000);
        // 40 Mbit/s: the bucket holds a whole GSO packet.
        let fast = TbfParams::for_rate(40_000_000);
        assert!(fast.burst_bytes >= GSO_MAX_BYTES);
        assert_eq!(fast.mpu_bytes, 64);
        assert_eq!(
            mid.tc_args().join(" "),
            "tbf rate 200000000bit burst 400000 limit 650000 mpu 64"
        );
    }

    #[test]
    fn netem_queue_covers_the_packets_in_flight() {
        assert_eq!(netem_limit_packets(Some(10_000_000), 1000), 1000);
        // 10 Gbit/s × 10 ms = 12.5 MB ≈ 8256 frames, twice that.
        assert_eq!(netem_limit_packets(None, 10_000), 2 * 8256);
    }

    #[test]
    fn default_state_dir_is_under_run() {
        if std::env::var_os("BENCHLAB_STATE_DIR").is_none() {
            assert_eq!(default_state_dir(), Path::new("/run/benchlab/testbed"));
        }
    }

    #[test]
    fn state_round_trips_and_objects_use_the_documented_tags() {
        let o = Object::Qdisc {
            netns: "bl-x-a".into(),
            dev: "x-a".into(),
            qdisc: "tbf".into(),
            handle: "1:".into(),
            parent: "root".into(),
        };
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["kind"], "qdisc");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        let s = State {
            format: STATE_FORMAT,
            name: "x".into(),
            complete: false,
            spec: None,
            hosts: Vec::new(),
            switch_netns: None,
            objects: vec![
                Object::Netns {
                    name: "bl-x-a".into(),
                },
                o.clone(),
            ],
        };
        s.claim(&path).unwrap();
        assert!(matches!(
            s.claim(&path),
            Err(TestbedError::AlreadyUp { .. })
        ));
        s.save(&path).unwrap();
        let back = State::load(&path).unwrap().unwrap();
        assert_eq!(back.objects, s.objects);
        assert!(!path.with_extension("json.tmp").exists());
        fs::write(&path, "{").unwrap();
        assert!(matches!(
            State::load(&path),
            Err(TestbedError::StateCorrupt { .. })
        ));
    }

    #[test]
    fn down_and_status_refuse_names_that_could_escape_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            down("../etc", dir.path()),
            Err(TestbedError::BadName(_))
        ));
        assert!(matches!(
            status("a/b", dir.path()),
            Err(TestbedError::BadName(_))
        ));
        let r = down("nothing", dir.path()).unwrap();
        assert!(!r.found && r.removed.is_empty());
        assert!(matches!(
            status("nothing", dir.path()),
            Err(TestbedError::NotRecorded { .. })
        ));
    }
}
