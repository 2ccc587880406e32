//! Issue 14, item 2: the fault-injection suite (`cargo test --test it
//! faults::`).
//!
//! The kill matrix runs alone (`testkit::alone()`): its guest cells
//! reserve huge pages and its checks count the pool, the loop devices,
//! two machine-wide sysctls and fs.matrix's cgroups (the rest of what it
//! checks is found by its own markers: state and scratch directories);
//! and its servers and guests have start deadlines that the other
//! modules' servers and guests beside it made them miss (a RabbitMQ not
//! ready in 30 s, a TCG guest's kernel panicking at boot). Inside it, the
//! guest cell runs beside the other host kinds' cells: neither moves
//! what the other counts (see `snapshot`). The storage
//! tests hold the mounts (`exclusive(&[Mounts])`): they make and fill
//! file systems. The rest run beside everything.
//!
//! **Kills.** For each killable component — the controller (`benchlab
//! run`), a workload agent, an environment agent, a background-load worker
//! and a managed server (nginx's master, RabbitMQ's `beam.smp` or its
//! `epmd`, smbd's main process), and a guest's QEMU — and each host
//! kind — local, network namespace, SSH (a real sshd in a namespace of a
//! test bed), guest (the server side in a QEMU guest on a test bed's
//! bridge, with huge pages; only `fake` and `net.*`) — the suite
//! SIGKILLs the component at seeded random moments spread over a run's
//! three phases: *apply* (preflight and the configuration's profile and
//! load), *run* (the points) and *revert* (after the last point). Each
//! moment is an offset drawn inside that phase of a reference run of the
//! same study (timed from its progress lines); the phase a kill actually
//! landed in is read back from the killed run's own progress lines. The
//! studies cycle through the workload kinds: `fake`, `net.*`, `fs.matrix`
//! on a 16 MiB ext4 image, `web.load` against a managed nginx, `mq.*`
//! against a managed RabbitMQ, and `fileserver.load` against a managed
//! smbd whose share is on an ext4 image; each component's rotation goes
//! on from one host kind to the next, so that CI's few kills per cell
//! still give every component every workload kind.
//!
//! After every kill: every sample the run reported finished is in the
//! store, `PRAGMA integrity_check` is `ok`, an interrupted run resumes to
//! completion with the full set of samples, and after `benchlab restore`
//! nothing is left — no process of the run (servers and their helpers
//! included: beam.smp, epmd, smbd, nginx), mount, loop device (the
//! share's image too), file or scratch directory in the scratch and
//! temporary directories, journal, changed sysctl (on the machine and in
//! each namespace) or cgroup; of a guest: no QEMU, scratch directory, tap
//! or huge page reservation. Components inside a guest (its agents, a
//! server there) cannot be killed from the host: their cells are "n/a",
//! as a QEMU's are on the other kinds.
//!
//! **Storage faults.** The database's file system filled mid-run, the
//! scratch target's filled; a corrupted database, a read-only one, one of
//! a newer schema, two controllers writing one database at once.
//!
//! The kill matrix prints a table (component × host kind). Settings:
//! `BENCHLAB_FAULT_KILLS` (kills per cell; default [`DEFAULT_KILLS`] and
//! [`DEFAULT_GUEST_KILLS`], the
//! count CI runs), `BENCHLAB_FAULT_SEED` (default: from the clock; printed
//! either way), `BENCHLAB_FAULT_DOC=path` (also write the table as
//! Markdown there, as docs/reliability.md was written). When chasing a
//! fault, `BENCHLAB_FAULT_HOSTS=local,ssh`,
//! `BENCHLAB_FAULT_COMPONENTS=managed,agent` (prefixes of the table's
//! names) and `BENCHLAB_FAULT_WORKLOADS=mq,fs` narrow the matrix (the
//! count check is then left out).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use benchlab_testkit::{exclusive, Resource, Scratch};

/// Kills per (component, host kind) for local, namespace and SSH hosts
/// when `BENCHLAB_FAULT_KILLS` is unset: what fits CI's budget of about
/// four minutes (see docs/reliability.md for a full run). Seven per
/// component: one for each of the six workload kinds, one more for the
/// first; a RabbitMQ trial alone takes 10–20 s (the broker boots again
/// for the resume), which is what bounds these counts.
const DEFAULT_KILLS: [usize; 3] = [4, 2, 1];

/// Kills per (component, guest host kind) when `BENCHLAB_FAULT_KILLS` is
/// unset. A guest trial boots QEMU under TCG twice (the killed run and
/// its resume or next run: 15-30 s a trial on this loaded 2-core
/// machine), after a reference run per workload that boots it once more
/// (15-20 s): one kill per component is what fits the three to four
/// minutes CI can give the guest kind.
const DEFAULT_GUEST_KILLS: usize = 1;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");

// ---------------------------------------------------------------- random

/// splitmix64 (Steele, Lea, Flood 2014): a seeded generator small enough
/// to keep here, so that a seed printed by a failing run replays it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

// ---------------------------------------------------------------- model

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum HostKind {
    Local,
    Netns,
    Ssh,
    /// The server side in a QEMU guest on the test bed's bridge (booted
    /// by the run), the client side in the bed's generator namespace.
    Guest,
}

impl HostKind {
    fn name(self) -> &'static str {
        match self {
            HostKind::Local => "local",
            HostKind::Netns => "netns",
            HostKind::Ssh => "ssh",
            HostKind::Guest => "guest",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Component {
    Controller,
    Agent,
    EnvAgent,
    LoadWorker,
    Server,
    /// A guest's QEMU (`qemu-system-*`, named `benchlab-<host>`).
    Qemu,
}

impl Component {
    const ALL: [Component; 6] = [
        Component::Controller,
        Component::Agent,
        Component::EnvAgent,
        Component::LoadWorker,
        Component::Server,
        Component::Qemu,
    ];

    fn name(self) -> &'static str {
        match self {
            Component::Controller => "controller",
            Component::Agent => "agent",
            Component::EnvAgent => "environment agent",
            Component::LoadWorker => "load worker",
            Component::Server => "managed server",
            Component::Qemu => "qemu",
        }
    }

    /// Whether the suite can kill this component on this host kind. A
    /// QEMU exists only for a guest. In a guest, what runs inside the VM
    /// (its agents, its environment agent and load worker, a managed
    /// server) is out of the host's reach: the cells of this kind kill
    /// the controller, QEMU, and what the run keeps on the host (the
    /// generator's workload and environment agents, the host machine's
    /// load worker). The managed servers would run in the guest: n/a.
    fn applies(self, kind: HostKind) -> bool {
        match self {
            Component::Qemu => kind == HostKind::Guest,
            Component::Server => kind != HostKind::Guest,
            _ => true,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Wl {
    Fake,
    Net,
    Fs,
    Web,
    Mq,
    Files,
}

impl Wl {
    const ALL: [Wl; 6] = [Wl::Fake, Wl::Net, Wl::Fs, Wl::Web, Wl::Mq, Wl::Files];

    fn name(self) -> &'static str {
        match self {
            Wl::Fake => "fake",
            Wl::Net => "net",
            Wl::Fs => "fs",
            Wl::Web => "web",
            Wl::Mq => "mq",
            Wl::Files => "fileserver",
        }
    }

    /// The managed server a study of this workload runs, if any.
    fn server(self) -> Option<&'static str> {
        match self {
            Wl::Web => Some("nginx"),
            Wl::Mq => Some("rabbitmq"),
            Wl::Files => Some("samba"),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Apply,
    Run,
    Revert,
}

const PHASES: [Phase; 3] = [Phase::Apply, Phase::Run, Phase::Revert];

/// What one cell of the table counts.
#[derive(Default, Clone)]
struct Tally {
    /// Not a component of this host kind (a QEMU off a guest; a managed
    /// server, which would run inside the guest): "n/a" in the table.
    na: bool,
    kills: usize,
    by_phase: BTreeMap<&'static str, usize>,
    by_workload: BTreeMap<String, usize>,
    lost: usize,
    leftovers: usize,
    left_for_restore: usize,
    failures: usize,
    failed_points: usize,
    problems: Vec<String>,
}

// ---------------------------------------------------------------- cells

/// A host kind's set-up, shared by its trials: one state directory (the
/// journals; the marker of every process of these runs), one temporary
/// directory (services' and mounts' scratch), a test bed and an sshd.
struct Cell {
    kind: HostKind,
    base: Scratch,
    bed: Option<String>,
    subnet: u8,
    sshd: Option<Child>,
    trial: usize,
}

impl Cell {
    fn new(kind: HostKind, subnet: u8) -> Cell {
        use std::os::unix::fs::PermissionsExt;
        let base = Scratch::new();
        for d in ["state", "tmp", "fs"] {
            std::fs::create_dir_all(base.path(d)).unwrap();
        }
        // smbd serves the share as www-data, which must walk from / to
        // the share's directory in the service's scratch (under tmp).
        for d in [base.dir.path().to_path_buf(), base.path("tmp")] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(base.path("mix.txt"), MIX).unwrap();
        let mut cell = Cell {
            kind,
            base,
            bed: None,
            subnet,
            sshd: None,
            trial: 0,
        };
        if kind != HostKind::Local {
            cell.bed_up();
        }
        if kind == HostKind::Ssh {
            cell.sshd_up();
        }
        cell
    }

    /// How long a run of this cell's studies may take before it is
    /// called hung: a guest boots under TCG (15-60 s here) before its
    /// first point.
    fn limit(&self) -> Duration {
        Duration::from_secs(if self.kind == HostKind::Guest {
            400
        } else {
            120
        })
    }

    fn state(&self) -> PathBuf {
        self.base.path("state")
    }

    fn tmp(&self) -> PathBuf {
        self.base.path("tmp")
    }

    fn ns(&self, host: &str) -> String {
        format!("bl-{}-{host}", self.bed.as_deref().unwrap_or(""))
    }

    fn addr(&self, host: u8) -> String {
        format!("10.{}.0.{host}", self.subnet)
    }

    fn bed_up(&mut self) {
        let name = format!("f{}{}", std::process::id() % 10_000, &self.kind.name()[..1]);
        let file = self.base.study(
            "bed.toml",
            &format!(
                "[testbed]\nname = \"{name}\"\ntopology = \"{}\"\nsubnet = \"10.{}.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\n[[testbed.host]]\nname = \"gen\"\n",
                // A guest's tap joins the bed's bridge.
                if self.kind == HostKind::Guest {
                    "bridge"
                } else {
                    "direct"
                },
                self.subnet
            ),
        );
        benchlab_testkit::output_ok(
            Command::new(BIN)
                .args(["testbed", "up"])
                .arg(&file)
                .env("BENCHLAB_STATE_DIR", self.base.path("bedstate")),
        );
        self.bed = Some(name);
    }

    /// A real sshd in the sut namespace; its sessions get this cell's
    /// state and temporary directories (`SetEnv`), as a user's
    /// `~/.ssh/environment` or login profile would set them.
    fn sshd_up(&mut self) {
        let sshd = benchlab_testkit::find_program("sshd").unwrap();
        let keygen = benchlab_testkit::find_program("ssh-keygen").unwrap();
        let dir = self.base.path("ssh");
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["host_key", "id"] {
            let st = Command::new(&keygen)
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(file))
                .status()
                .unwrap();
            assert!(st.success());
        }
        std::fs::copy(dir.join("id.pub"), dir.join("authorized_keys")).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "ListenAddress {addr}\nPort 22\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\nStrictModes no\nPidFile {d}/sshd.pid\nSetEnv BENCHLAB_STATE_DIR={state} TMPDIR={tmp} {PW_VAR}={PW}\n",
                addr = self.addr(1),
                d = dir.display(),
                state = self.state().display(),
                tmp = self.tmp().display(),
            ),
        )
        .unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns("sut")])
            .arg(sshd)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.sshd = Some(child);
        // Until it accepts: a trial must not blame a slow sshd on a kill.
        let until = Instant::now() + Duration::from_secs(10);
        while !self.ssh_ready() {
            assert!(Instant::now() < until, "sshd never answered");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn ssh_ready(&self) -> bool {
        self.in_gen(Command::new("ssh"))
            .args(self.ssh_args())
            .arg(format!("root@{}", self.addr(1)))
            .arg("true")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn ssh_args(&self) -> Vec<String> {
        vec![
            "-i".into(),
            self.base.path("ssh/id").display().to_string(),
            "-o".into(),
            "StrictHostKeyChecking=no".into(),
            "-o".into(),
            "UserKnownHostsFile=/dev/null".into(),
            "-o".into(),
            "LogLevel=ERROR".into(),
            "-o".into(),
            "BatchMode=yes".into(),
        ]
    }

    /// The command, run in the generator's namespace for the SSH kind
    /// (the controller reaches the SSH host from there).
    fn in_gen(&self, c: Command) -> Command {
        if self.kind != HostKind::Ssh {
            return c;
        }
        let mut w = Command::new("ip");
        w.args(["netns", "exec", &self.ns("gen")])
            .arg(c.get_program())
            .args(c.get_args());
        w
    }

    /// `benchlab --db DB ARGS…` with this cell's state and temporary
    /// directories.
    fn benchlab(&self, db: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("--db").arg(db).args(args);
        let mut c = self.in_gen(c);
        c.env("BENCHLAB_STATE_DIR", self.state())
            .env("TMPDIR", self.tmp())
            .env(PW_VAR, PW);
        c
    }

    /// The `[[host]]` tables and the address servers bind to.
    fn hosts(&self) -> (String, String) {
        match self.kind {
            HostKind::Local => (String::new(), "127.0.0.1".into()),
            HostKind::Netns => (
                format!(
                    "[[host]]\nname = \"sut\"\nnetns = \"{}\"\naddress = \"{}\"\n[[host]]\nname = \"generator\"\nnetns = \"{}\"\naddress = \"{}\"\n",
                    self.ns("sut"),
                    self.addr(1),
                    self.ns("gen"),
                    self.addr(2)
                ),
                self.addr(1),
            ),
            // The bed's sut namespace stays unused: the server side is
            // the guest, at .20 on the bed's bridge.
            HostKind::Guest => (
                format!(
                    "[[host]]\nname = \"sut\"\nguest = {{ vcpus = 1, memory = 256, hugepages = true, net = \"bridge\", bridge = \"{b}-br\", netns = \"bl-{b}-switch\", ip = \"{ip}/24\" }}\n\
                     [[host]]\nname = \"generator\"\nnetns = \"{}\"\naddress = \"{}\"\n",
                    self.ns("gen"),
                    self.addr(2),
                    b = self.bed.as_deref().unwrap_or(""),
                    ip = self.addr(20),
                ),
                self.addr(20),
            ),
            HostKind::Ssh => (
                format!(
                    "[[host]]\nname = \"sut\"\nssh = \"root@{0}\"\naddress = \"{0}\"\nidentity = \"{1}\"\n\
                     ssh_options = [\"-o\", \"StrictHostKeyChecking=no\", \"-o\", \"UserKnownHostsFile=/dev/null\", \"-o\", \"LogLevel=ERROR\"]\n\
                     benchlab = \"{BIN}\"\n",
                    self.addr(1),
                    self.base.path("ssh/id").display()
                ),
                self.addr(1),
            ),
        }
    }

    fn study(&self, wl: Wl, name: &str) -> PathBuf {
        let (hosts, bind) = self.hosts();
        let profile = self.base.path("profile.toml");
        std::fs::write(&profile, PROFILE).unwrap();
        let workload = match wl {
            Wl::Fake => "[[workload]]\nkind = \"fake\"\nsize = [1, 2, 3]\nsleep_s = 0.15\n".into(),
            Wl::Net => "[[workload]]\nkind = \"net.stream\"\nduration_s = 0.3\n[[workload]]\nkind = \"net.rr\"\nprotocol = [\"tcp\", \"udp\"]\nduration_s = 0.2\n".into(),
            Wl::Fs => format!(
                "[[workload]]\nkind = \"fs.matrix\"\nfile_size = \"1MiB\"\nrecord_size = \"256KiB\"\npatterns = \"write,read\"\nmkfs = \"ext4\"\ntarget = \"{}\"\nimage_size = \"16MiB\"\n",
                self.base.path("fs/image").display()
            ),
            Wl::Web => format!(
                "[[service]]\nname = \"web\"\nkind = \"nginx\"\nbind = \"{bind}\"\n\
                 [[workload]]\nkind = \"web.load\"\nservice = \"web\"\nclients = [1, 2]\nfile_set = \"single\"\ndirs = 1\nduration_s = 0.3\nramp_down_s = 0.05\n"
            ),
            // Two throughput points of a few thousand messages and one
            // short latency point: the broker's boot (a few seconds)
            // is most of the run, and every phase has its share. A boot
            // whose epmd was killed never becomes ready and is given up
            // after ready_timeout_s: 30 s, where boots take 5–12 s here
            // even while other builds load the machine.
            Wl::Mq => format!(
                "[[service]]\nname = \"mq\"\nkind = \"rabbitmq\"\nbind = \"{bind}\"\nprobe = \"amqp\"\nready_timeout_s = 30\n\
                 secrets = {{ password = {{ env = \"{PW_VAR}\" }} }}\n\
                 [[workload]]\nkind = \"mq.throughput\"\nservice = \"mq\"\nsize = [16, 256]\ncount = 2000\nqueues = 1\npassword_env = \"{PW_VAR}\"\n\
                 [[workload]]\nkind = \"mq.latency\"\nservice = \"mq\"\nsize = 16\nrate_per_s = 200\nduration_s = 0.3\npassword_env = \"{PW_VAR}\"\n"
            ),
            // The share on an ext4 image benchlab makes (a loop device
            // and a mount to leave behind), replayed by one and two
            // clients.
            Wl::Files => format!(
                "[[service]]\nname = \"files\"\nkind = \"samba\"\nbind = \"{bind}\"\n\
                 document_fs = {{ mkfs = \"ext4\", image_size = \"16MiB\" }}\n\
                 secrets = {{ password = {{ env = \"{PW_VAR}\" }} }}\n\
                 [[workload]]\nkind = \"fileserver.load\"\nservice = \"files\"\nclients = [1, 2]\nload_file = \"{}\"\npassword_env = \"{PW_VAR}\"\nduration_s = 0.3\n",
                self.base.path("mix.txt").display()
            ),
        };
        self.base.study(
            &format!("{name}.toml"),
            &format!(
                "[study]\nname = \"faults-{}\"\n[defaults]\nrepetitions = 2\nquiesce_s = 0\nwarmup_s = 0\n\
                 {hosts}\
                 [[configuration]]\nname = \"a\"\nprofile = \"{}\"\nload = {{ workers = 1 }}\n\
                 {workload}",
                wl.name(),
                profile.display()
            ),
        )
    }
}

impl Drop for Cell {
    fn drop(&mut self) {
        if let Some(mut s) = self.sshd.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        if let Some(bed) = &self.bed {
            let _ = Command::new(BIN)
                .args(["testbed", "down", bed])
                .env("BENCHLAB_STATE_DIR", self.base.path("bedstate"))
                .output();
        }
    }
}

/// A profile of per-namespace sysctls: applied on every host, it changes
/// the machine's values on a local host and each namespace's on the others.
const PROFILE: &str = "[profile]\ndescription = \"fault suite\"\n[sysctl]\n\"net.ipv4.tcp_fin_timeout\" = 37\n\"net.core.somaxconn\" = 3333\n";
const SYSCTLS: [&str; 2] = ["net/ipv4/tcp_fin_timeout", "net/core/somaxconn"];
const HUGEPAGES: &str = "vm/nr_hugepages";

/// The managed servers' password (RabbitMQ's user, Samba's tdbsam
/// entry), read from the environment by the services and the clients.
const PW_VAR: &str = "BENCHLAB_FAULT_PW";
const PW: &str = "faults-Pw-3141";

/// fileserver.load's mix: a directory, a file written, read, locked and
/// removed, an expected failure — every pass leaves the share as it was.
const MIX: &str = r#"Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x2 1 NT_STATUS_OK
Close 1 NT_STATUS_OK
NTCreateX "\clients\client1\f.bin" 0x40 0x5 2 NT_STATUS_OK
WriteX 2 0 32768 32768 NT_STATUS_OK
ReadX 2 0 32768 32768 NT_STATUS_OK
LockX 2 0 1 NT_STATUS_OK
UnlockX 2 0 1 NT_STATUS_OK
Close 2 NT_STATUS_OK
QUERY_PATH_INFORMATION "\clients\client1\none.bin" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
Unlink "\clients\client1\f.bin" 0x6 NT_STATUS_OK
"#;

// ---------------------------------------------------------------- processes

struct Proc {
    pid: i32,
    ppid: i32,
    cmd: String,
}

fn proc_info(pid: i32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    if after.starts_with('Z') {
        return None;
    }
    let ppid = after.split(' ').nth(1)?.parse().ok()?;
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(Proc {
        pid,
        ppid,
        cmd: String::from_utf8_lossy(&cmd).replace('\0', " "),
    })
}

fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

/// Live processes of this cell's runs: started with its state directory
/// in their environment (agents, load workers, janitors, servers inherit
/// it; SSH sessions get it from sshd), or naming its scratch in their
/// command line or any variable of their environment (a server's
/// detached helper, as RabbitMQ's `epmd -daemon`, keeps the broker's
/// variables, which name its scratch directory). A guest's QEMU is also
/// found by `BENCHLAB_GUEST_RUN`, its scratch directory under this cell's
/// temporary directory.
fn our_processes(cell: &Cell) -> Vec<Proc> {
    let marker = format!("BENCHLAB_STATE_DIR={}", cell.state().display());
    let guest_run = format!("BENCHLAB_GUEST_RUN={}/", cell.tmp().display());
    let base = cell.base.dir.path().display().to_string();
    let in_env = |env: &[u8]| {
        env.split(|b| *b == 0).any(|v| {
            v == marker.as_bytes()
                || v.starts_with(guest_run.as_bytes())
                || v.windows(base.len() + 1)
                    .any(|w| w[0] == b'=' && &w[1..] == base.as_bytes())
        })
    };
    let me = std::process::id() as i32;
    let sshd = cell.sshd.as_ref().map(|c| c.id() as i32);
    all_pids()
        .into_iter()
        .filter(|&p| p != me && Some(p) != sshd)
        .filter_map(proc_info)
        .filter(|p| {
            p.cmd.contains(&base) && !p.cmd.contains("sshd_config") && !p.cmd.starts_with("sshd:")
                || std::fs::read(format!("/proc/{}/environ", p.pid))
                    .map(|env| in_env(&env))
                    .unwrap_or(false)
        })
        .collect()
}

/// The program a process runs: its first argument's file name
/// (`beam.smp`, `epmd`, `smbd`, `nginx: master process …`).
fn program(p: &Proc) -> &str {
    let first = p.cmd.split([' ', ':']).next().unwrap_or("");
    first.rsplit('/').next().unwrap_or(first)
}

/// The processes of `these` whose parent is none of them: a server's
/// main process (nginx's master, smbd's parent of its forks).
fn roots<'a>(these: &[&'a Proc]) -> Vec<&'a Proc> {
    these
        .iter()
        .filter(|p| !these.iter().any(|q| q.pid == p.ppid))
        .copied()
        .collect()
}

fn is_agent(p: &Proc) -> bool {
    p.cmd.starts_with(BIN) && p.cmd.contains(" agent --stdio")
}

/// What an agent's open journals say it is.
#[derive(PartialEq)]
enum Holds {
    /// No journal open: a workload agent.
    Nothing,
    /// Only journals of services: the server's agent, holding its server.
    Service,
    /// A journal of settings, or one still empty (an environment agent
    /// opens its journal before its first change; a service's opens one
    /// too, but only for the instant before it journals its directory).
    Environment,
}

fn holds(cell: &Cell, pid: i32) -> Holds {
    let dir = cell.state().join("journal");
    let mut seen = Holds::Nothing;
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return seen;
    };
    for fd in fds.flatten() {
        let Ok(target) = std::fs::read_link(fd.path()) else {
            continue;
        };
        if !target.starts_with(&dir) {
            continue;
        }
        let text = std::fs::read_to_string(&target).unwrap_or_default();
        let settings: Vec<String> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| v["setting"].as_str().unwrap_or("").to_string())
            .collect();
        if settings.is_empty() || settings.iter().any(|s| !s.starts_with("service ")) {
            return Holds::Environment;
        }
        seen = Holds::Service;
    }
    seen
}

/// Which of a managed server's processes a kill aims at: for RabbitMQ
/// either the broker (`beam.smp`) or its name server (`epmd`), a process
/// of its own that the broker's boot detaches.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ServerPart {
    Main,
    Epmd,
}

/// The process to kill for `c`, if one runs now.
fn victim(
    cell: &Cell,
    c: Component,
    wl: Wl,
    part: ServerPart,
    controller: i32,
    rng: &mut Rng,
) -> Option<i32> {
    let procs = our_processes(cell);
    let pick = |v: Vec<i32>, rng: &mut Rng| (!v.is_empty()).then(|| v[rng.below(v.len())]);
    match c {
        Component::Controller => Some(controller),
        Component::Agent => pick(
            procs
                .iter()
                .filter(|p| is_agent(p) && holds(cell, p.pid) != Holds::Environment)
                .map(|p| p.pid)
                .collect(),
            rng,
        ),
        Component::EnvAgent => pick(
            procs
                .iter()
                .filter(|p| is_agent(p) && holds(cell, p.pid) == Holds::Environment)
                .map(|p| p.pid)
                .collect(),
            rng,
        ),
        Component::LoadWorker => pick(
            procs
                .iter()
                .filter(|p| p.cmd.contains("__load-worker"))
                .map(|p| p.pid)
                .collect(),
            rng,
        ),
        Component::Server => {
            // The server itself, not a short-lived run of its program
            // (`nginx -v`, `smbd -V` for the version, `epmd -names`
            // while the broker boots, rabbitmqctl's own beam.smp).
            let (name, mark) = match (wl, part) {
                (Wl::Web, _) => ("nginx", "nginx: master process"),
                (Wl::Mq, ServerPart::Main) => ("beam.smp", " -s rabbit boot"),
                (Wl::Mq, ServerPart::Epmd) => ("epmd", " -address "),
                (Wl::Files, _) => ("smbd", " --foreground "),
                _ => return None,
            };
            let these: Vec<&Proc> = procs
                .iter()
                .filter(|p| program(p) == name && p.cmd.contains(mark))
                .collect();
            // The main process: nginx's master, smbd's first (its
            // forks serve the connections).
            pick(roots(&these).iter().map(|p| p.pid).collect(), rng)
        }
        // The guest's QEMU, by its program and the name benchlab gives it.
        Component::Qemu => pick(
            procs.iter().filter(|p| is_qemu(p)).map(|p| p.pid).collect(),
            rng,
        ),
    }
}

/// A QEMU of this cell's guest (`-name benchlab-sut,…`).
fn is_qemu(p: &Proc) -> bool {
    program(p).starts_with("qemu-system") && p.cmd.contains("benchlab-sut")
}

// ---------------------------------------------------------------- a run

/// A `benchlab run` under way, its progress lines collected as they come.
struct Running {
    child: Child,
    started: Instant,
    lines: Arc<Mutex<Vec<(Duration, String)>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn start(mut cmd: Command) -> Running {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start benchlab");
        let started = Instant::now();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let err = child.stderr.take().unwrap();
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push((started.elapsed(), line));
            }
        });
        Running {
            child,
            started,
            lines,
            reader: Some(reader),
        }
    }

    fn lines(&self) -> Vec<(Duration, String)> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits for the end (killing it after `limit`): the exit code (None:
    /// a signal) and all of standard error.
    fn finish(mut self, limit: Duration) -> (Option<i32>, bool, String) {
        let until = Instant::now() + limit;
        let mut hung = false;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > until {
                hung = true;
                let _ = self.child.kill();
                break self.child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let text: Vec<String> = self.lines().into_iter().map(|(_, l)| l).collect();
        (status.code(), hung, text.join("\n"))
    }
}

/// A sample the progress reported finished: (workload, label, repetition).
type Key = (String, String, i64);

/// `[3/6] a · fake · size=1 · rep 1/2: score = …` → the sample's key.
/// Failed and skipped repetitions (`FAILED: why`) are not counted.
fn reported(line: &str) -> Option<Key> {
    let rest = line.strip_prefix('[')?;
    let (_, rest) = rest.split_once("] ")?;
    let (head, tail) = rest.split_once(": ")?;
    let status = tail.to_ascii_lowercase();
    if status.starts_with("failed") || status.starts_with("skipped") {
        return None;
    }
    let parts: Vec<&str> = head.split(" · ").collect();
    if parts.len() != 4 {
        return None;
    }
    let rep = parts[3]
        .strip_prefix("rep ")?
        .split_once('/')?
        .0
        .parse::<i64>()
        .ok()?;
    Some((parts[1].to_string(), parts[2].to_string(), rep - 1))
}

fn is_sample_line(line: &str) -> bool {
    line.starts_with('[') && line.contains(" · rep ")
}

/// The phase a run was in after these lines: apply until the first point
/// starts, run until the last one ended, revert after.
fn phase_of(lines: &[(Duration, String)], total: usize) -> Phase {
    let samples = lines.iter().filter(|(_, l)| is_sample_line(l)).count();
    let applied = lines
        .iter()
        .any(|(_, l)| l.contains("setting(s) applied") || is_sample_line(l));
    if !applied {
        Phase::Apply
    } else if samples < total {
        Phase::Run
    } else {
        Phase::Revert
    }
}

/// Phase boundaries of an uninterrupted run, from its progress lines.
#[derive(Clone, Copy)]
struct Timing {
    apply_end: Duration,
    run_end: Duration,
    end: Duration,
    samples: usize,
}

fn ok_samples(db: &Path, run: i64) -> BTreeSet<Key> {
    let Ok(conn) = rusqlite::Connection::open(db) else {
        return BTreeSet::new();
    };
    let Ok(mut st) = conn.prepare(
        "SELECT p.workload_name, p.label, s.repetition FROM sample s JOIN point p ON p.id = s.point_id
         WHERE p.run_id = ?1 AND s.status = 'ok'",
    ) else {
        return BTreeSet::new();
    };
    let rows = st
        .query_map([run], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    rows.filter_map(Result::ok).collect()
}

fn failed_samples(db: &Path) -> usize {
    rusqlite::Connection::open(db)
        .and_then(|c| {
            c.query_row(
                "SELECT count(*) FROM sample WHERE status = 'failed'",
                [],
                |r| r.get::<_, i64>(0),
            )
        })
        .unwrap_or(0) as usize
}

fn run_status(db: &Path, run: i64) -> Option<String> {
    let conn = rusqlite::Connection::open(db).ok()?;
    conn.query_row("SELECT status FROM run WHERE id = ?1", [run], |r| r.get(0))
        .ok()
}

fn integrity(db: &Path) -> Result<(), String> {
    if !db.exists() {
        return Ok(());
    }
    let conn = rusqlite::Connection::open(db).map_err(|e| e.to_string())?;
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if check == "ok" {
        Ok(())
    } else {
        Err(check)
    }
}

// ---------------------------------------------------------------- leftovers

/// What a run may change outside its store, as (what, value).
fn snapshot(cell: &Cell) -> BTreeMap<String, String> {
    let mut s = BTreeMap::new();
    // The guest cell runs beside the others (see the kill matrix): its
    // runs change neither the machine's sysctls nor its cgroups (their
    // hosts are the guest and a namespace; `fake` and `net.*` make no
    // cgroup), while the local and SSH cells' runs change both. Only
    // the guest cell reserves huge pages.
    let guest = cell.kind == HostKind::Guest;
    if !guest {
        for k in SYSCTLS {
            let v = std::fs::read_to_string(format!("/proc/sys/{k}")).unwrap_or_default();
            s.insert(format!("machine {k}"), v.trim().to_string());
        }
    }
    // A guest's huge pages: reserved for the run (`hugepages = true`),
    // given back after it or by `restore`.
    if guest {
        let v = std::fs::read_to_string(format!("/proc/sys/{HUGEPAGES}")).unwrap_or_default();
        s.insert(format!("machine {HUGEPAGES}"), v.trim().to_string());
    }
    if cell.bed.is_some() {
        for host in ["sut", "gen"] {
            for k in SYSCTLS {
                let out = Command::new("ip")
                    .args(["netns", "exec", &cell.ns(host), "cat"])
                    .arg(format!("/proc/sys/{k}"))
                    .output()
                    .unwrap();
                s.insert(
                    format!("{host} {k}"),
                    String::from_utf8_lossy(&out.stdout).trim().to_string(),
                );
            }
        }
    }
    if !guest {
        for (what, dir) in cgroup_dirs() {
            s.insert(format!("cgroup {what}"), dir);
        }
    }
    s
}

/// The cgroups these runs may make (v1 hierarchies and v2), two levels
/// deep.
fn cgroup_dirs() -> Vec<(String, String)> {
    fn go(d: &Path, depth: usize, out: &mut Vec<(String, String)>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if !p.is_dir() {
                continue;
            }
            // benchlab-fs.*: fs.matrix's memory cgroups. The shield's
            // cpusets (benchlab-shield, benchlab-rest) are left out: these
            // studies do not shield (moving every task of the machine
            // onto one CPU would starve whatever else runs here), and
            // tests/env.rs, which kills shielded runs, makes them.
            if e.file_name().to_string_lossy().starts_with("benchlab-fs.") {
                out.push((p.display().to_string(), "exists".into()));
            }
            if depth > 0 {
                go(&p, depth - 1, out);
            }
        }
    }
    let mut out = Vec::new();
    go(Path::new("/sys/fs/cgroup"), 2, &mut out);
    out
}

fn mounts_under(dir: &Path) -> Vec<String> {
    let d = dir.display().to_string();
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|m| m.starts_with(&d))
        })
        .map(str::to_string)
        .collect()
}

/// Loop devices whose backing file is under `dir`.
fn loops_under(dir: &Path) -> Vec<String> {
    let d = dir.display().to_string();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/sys/block").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.starts_with("loop") {
            continue;
        }
        if let Ok(b) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
            if b.trim().starts_with(&d) {
                out.push(format!("/dev/{name} ({})", b.trim()));
            }
        }
    }
    out
}

fn files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path().display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A guest's taps (`blg…`) on the bed's bridge, in its switch namespace.
fn taps(cell: &Cell) -> Vec<String> {
    if cell.kind != HostKind::Guest {
        return Vec::new();
    }
    let out = Command::new("ip")
        .args(["-n", &cell.ns("switch"), "-o", "link", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .filter(|n| n.starts_with("blg"))
        .collect()
}

/// Everything left behind, waiting a little for processes on their way out.
fn leftovers(cell: &Cell, before: &BTreeMap<String, String>) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(10);
    let mut left = Vec::new();
    loop {
        left.clear();
        for p in our_processes(cell) {
            left.push(format!("process {} `{}`", p.pid, p.cmd.trim()));
        }
        if cell.bed.is_some() {
            let sshd = cell.sshd.as_ref().map(|c| c.id() as i32);
            for host in ["sut", "gen"] {
                let out = Command::new("ip")
                    .args(["netns", "pids", &cell.ns(host)])
                    .output()
                    .unwrap();
                for pid in String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok())
                {
                    if Some(pid) == sshd {
                        continue;
                    }
                    if let Some(p) = proc_info(pid) {
                        if !left
                            .iter()
                            .any(|l| l.starts_with(&format!("process {pid} ")))
                        {
                            left.push(format!("process {pid} in {host}: `{}`", p.cmd.trim()));
                        }
                    }
                }
            }
        }
        if left.is_empty() || Instant::now() > until {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for m in mounts_under(cell.base.dir.path()) {
        left.push(format!("mount {m}"));
    }
    for l in loops_under(cell.base.dir.path()) {
        left.push(format!("loop device {l}"));
    }
    for f in files_in(&cell.tmp()) {
        left.push(format!("file {f}"));
    }
    for f in files_in(&cell.base.path("fs")) {
        left.push(format!("file {f}"));
    }
    for f in files_in(&cell.state().join("journal")) {
        left.push(format!("journal {f}"));
    }
    for t in taps(cell) {
        left.push(format!("tap {t}"));
    }
    // A killed QEMU's huge pages return to the kernel a moment after it
    // is gone, as its memory file is released.
    let pages = format!("machine {HUGEPAGES}");
    let until = Instant::now() + Duration::from_secs(10);
    while cell.kind == HostKind::Guest
        && snapshot(cell).get(&pages) != before.get(&pages)
        && Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = snapshot(cell);
    for (k, v) in before {
        if after.get(k) != Some(v) {
            left.push(format!("{k}: {v} before, {:?} after", after.get(k)));
        }
    }
    for (k, v) in &after {
        if !before.contains_key(k) {
            left.push(format!("{k}: new ({v})"));
        }
    }
    left
}

/// Puts the machine back by force after a trial that left something, so
/// that the next trial is judged on its own.
fn force_clean(cell: &Cell, before: &BTreeMap<String, String>) {
    for p in our_processes(cell) {
        // SAFETY: kill(2) of a process of this test's runs.
        unsafe { libc::kill(p.pid, libc::SIGKILL) };
    }
    for m in mounts_under(cell.base.dir.path()) {
        if let Some(t) = m.split_whitespace().nth(1) {
            let _ = Command::new("umount").args(["-l", t]).status();
        }
    }
    for l in loops_under(cell.base.dir.path()) {
        if let Some(dev) = l.split_whitespace().next() {
            let _ = Command::new("losetup").args(["-d", dev]).status();
        }
    }
    for t in taps(cell) {
        let _ = Command::new("ip")
            .args(["-n", &cell.ns("switch"), "link", "del", &t])
            .status();
    }
    for d in [
        cell.tmp(),
        cell.base.path("fs"),
        cell.state().join("journal"),
    ] {
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
    }
    for (k, v) in before {
        if let Some(name) = k.strip_prefix("machine ") {
            let _ = std::fs::write(format!("/proc/sys/{name}"), v);
        } else if let Some((host, name)) = k.split_once(' ') {
            if host == "sut" || host == "gen" {
                let _ = Command::new("ip")
                    .args(["netns", "exec", &cell.ns(host), "sh", "-c"])
                    .arg(format!("echo {v} > /proc/sys/{name}"))
                    .status();
            }
        }
    }
}

// ---------------------------------------------------------------- trials

/// Runs a study uninterrupted and times its phases.
fn reference(cell: &mut Cell, wl: Wl) -> Result<Timing, String> {
    cell.trial += 1;
    let db = cell.base.path(&format!("ref-{}.db", cell.trial));
    let study = cell.study(wl, &format!("ref-{}", cell.trial));
    let run = Running::start(cell.benchlab(&db, &["run", study.to_str().unwrap()]));
    let lines_at = run.lines.clone();
    let (code, hung, err) = run.finish(cell.limit());
    if code != Some(0) || hung {
        return Err(format!("reference {} run: exit {code:?}: {err}", wl.name()));
    }
    let lines = lines_at.lock().unwrap().clone();
    let samples: Vec<Duration> = lines
        .iter()
        .filter(|(_, l)| is_sample_line(l))
        .map(|(t, _)| *t)
        .collect();
    let apply_end = lines
        .iter()
        .find(|(_, l)| l.contains("setting(s) applied") || is_sample_line(l))
        .map(|(t, _)| *t)
        .unwrap_or_default();
    let end = lines.last().map(|(t, _)| *t).unwrap_or_default();
    let _ = std::fs::remove_file(&db);
    let t = Timing {
        apply_end,
        run_end: *samples.last().unwrap_or(&end),
        end,
        samples: samples.len(),
    };
    eprintln!(
        "reference {} on {}: {} samples; apply until {:?}, points until {:?}, end at {:?}",
        wl.name(),
        cell.kind.name(),
        t.samples,
        t.apply_end,
        t.run_end,
        t.end
    );
    Ok(t)
}

struct TrialResult {
    phase: Phase,
    /// Left by the run's own cleanup, for `benchlab restore` to undo.
    left_for_restore: Vec<String>,
    lost: usize,
    leftovers: Vec<String>,
    failures: Vec<String>,
    failed_points: usize,
    /// The run's first FAILED progress line: why the kill failed a point.
    first_failure: Option<String>,
}

/// One kill: start the study, wait for the moment, kill the component,
/// then check what the brief promises.
fn trial(
    cell: &mut Cell,
    wl: Wl,
    c: Component,
    part: ServerPart,
    at: Duration,
    timing: Timing,
    rng: &mut Rng,
) -> Result<TrialResult, Vec<String>> {
    cell.trial += 1;
    let db = cell.base.path(&format!("t{}.db", cell.trial));
    let study = cell.study(wl, &format!("t{}", cell.trial));
    let before = snapshot(cell);
    let run = Running::start(cell.benchlab(&db, &["run", study.to_str().unwrap()]));
    let controller = run.child.id() as i32;
    // Until the moment, then until the component is there to kill.
    while run.started.elapsed() < at {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut killed = None;
    let mut phase = Phase::Apply;
    let mut run = run;
    while killed.is_none() {
        if run.child.try_wait().unwrap().is_some() {
            break;
        }
        if let Some(pid) = victim(cell, c, wl, part, controller, rng) {
            phase = phase_of(&run.lines(), timing.samples);
            // SAFETY: kill(2) of a process of this test's run.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = Some(pid);
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let seen: BTreeSet<Key> = run
        .lines()
        .iter()
        .filter_map(|(_, l)| reported(l))
        .collect();
    let (code, hung, err) = run.finish(cell.limit());
    let first_failure = err
        .lines()
        .find(|l| is_sample_line(l) && l.contains("FAILED"))
        .map(|l| l.chars().take(300).collect());
    let mut failures = Vec::new();
    let mut problem = |s: String| failures.push(s);
    if hung {
        problem(format!("the run hung after the kill: {err}"));
    }
    // Nothing to kill came up (the component no longer ran after that
    // moment): the run was an ordinary one, and no kill is counted; but
    // it must have been a sound one, and must have cleaned up after
    // itself.
    if killed.is_none() {
        let left = leftovers(cell, &before);
        if !left.is_empty() {
            force_clean(cell, &before);
            failures.push(format!("an unkilled run left {left:?}"));
        }
        if code != Some(0) {
            failures.push(format!("an unkilled run ended with {code:?}: {err}"));
        }
        let _ = std::fs::remove_file(&db);
        return Err(failures);
    }
    match (c, code) {
        (Component::Controller, _) => {}
        (_, Some(0 | 3)) => {}
        // A side agent killed while preflight collects its inventory:
        // the run refuses to start, saying so; nothing was stored.
        (_, Some(1)) if err.contains("preflight failed; nothing was run") => {}
        (_, other) => problem(format!(
            "the run ended with {other:?} after the kill: {err}"
        )),
    }
    if err.contains("panicked") {
        problem(format!("a panic: {err}"));
    }
    // Every sample reported finished is stored.
    let stored = ok_samples(&db, 1);
    let mut lost = seen.difference(&stored).count();
    if let Err(e) = integrity(&db) {
        problem(format!("integrity_check: {e}"));
    }
    // With the controller alive, the run's own cleanup comes first: what
    // it leaves must at least be named, with `benchlab restore` to undo it.
    let mut left_for_restore = Vec::new();
    if c != Component::Controller {
        left_for_restore = leftovers(cell, &before);
        if !left_for_restore.is_empty() && !err.contains("benchlab restore") {
            problem(format!(
                "the run left {left_for_restore:?} and did not say to run `benchlab restore`: {err}"
            ));
        }
    }
    // The journal's undo and the leftovers.
    let restore = cell
        .benchlab(&db, &["restore", study.to_str().unwrap()])
        .output()
        .unwrap();
    if !restore.status.success() {
        problem(format!(
            "restore failed: {}",
            String::from_utf8_lossy(&restore.stderr)
        ));
    }
    let left = leftovers(cell, &before);
    if !left.is_empty() {
        force_clean(cell, &before);
    }
    // An interrupted run resumes to the whole set; a run never stored
    // runs again from the start.
    let failed_points = failed_samples(&db);
    match run_status(&db, 1).as_deref() {
        Some("completed") => {}
        Some(_) => {
            let out = cell
                .benchlab(&db, &["run", "--resume", "1"])
                .output()
                .unwrap();
            if !matches!(out.status.code(), Some(0 | 3)) {
                problem(format!(
                    "resume failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        None => {
            let out = cell
                .benchlab(&db, &["run", study.to_str().unwrap()])
                .output()
                .unwrap();
            if out.status.code() != Some(0) {
                problem(format!(
                    "the next run failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    let fin = ok_samples(&db, 1);
    lost += seen
        .difference(&fin)
        .filter(|k| stored.contains(*k))
        .count();
    if c == Component::Controller && fin.len() != timing.samples {
        problem(format!(
            "after the resume {} of {} samples are stored",
            fin.len(),
            timing.samples
        ));
    }
    if let Err(e) = integrity(&db) {
        problem(format!("integrity_check after the resume: {e}"));
    }
    let left2 = leftovers(cell, &before);
    if !left2.is_empty() {
        force_clean(cell, &before);
    }
    let mut all_left = left;
    all_left.extend(left2.into_iter().map(|l| format!("after the resume: {l}")));
    let _ = std::fs::remove_file(&db);
    Ok(TrialResult {
        phase,
        left_for_restore,
        lost,
        leftovers: all_left,
        failures,
        failed_points,
        first_failure,
    })
}

/// A moment in `phase` of a run timed as `t`, drawn uniformly inside it.
fn moment(t: Timing, phase: Phase, rng: &mut Rng) -> Duration {
    let (a, b) = match phase {
        Phase::Apply => (Duration::ZERO, t.apply_end),
        Phase::Run => (t.apply_end, t.run_end),
        Phase::Revert => (t.run_end, t.end),
    };
    a + (b.saturating_sub(a)).mul_f64(rng.unit())
}

/// Kills per cell of a host kind: `BENCHLAB_FAULT_KILLS` for every kind,
/// else [`DEFAULT_KILLS`] (more of the cheap local kills, fewer of the
/// SSH ones, each of which starts SSH sessions for every agent;
/// [`DEFAULT_GUEST_KILLS`] for guests, each of which boots QEMU).
fn kills_per_cell(kind: HostKind) -> usize {
    std::env::var("BENCHLAB_FAULT_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(match kind {
            HostKind::Local => DEFAULT_KILLS[0],
            HostKind::Netns => DEFAULT_KILLS[1],
            HostKind::Ssh => DEFAULT_KILLS[2],
            HostKind::Guest => DEFAULT_GUEST_KILLS,
        })
}

fn seed() -> u64 {
    std::env::var("BENCHLAB_FAULT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_000_007
        })
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Apply => "apply",
        Phase::Run => "run",
        Phase::Revert => "revert",
    }
}

/// The workloads a component's kills cycle through: a managed server
/// exists only under the server workloads; a guest runs `fake` and
/// `net.*` (their server sides in the guest), what one boot under TCG
/// affords. `BENCHLAB_FAULT_WORKLOADS=mq,fs` narrows them (when chasing a
/// fault).
fn workloads(c: Component, kind: HostKind) -> Vec<Wl> {
    let only = std::env::var("BENCHLAB_FAULT_WORKLOADS").unwrap_or_default();
    Wl::ALL
        .into_iter()
        .filter(|w| c != Component::Server || w.server().is_some())
        .filter(|w| kind != HostKind::Guest || matches!(w, Wl::Fake | Wl::Net))
        .filter(|w| only.is_empty() || only.split(',').any(|o| o == w.name()))
        .collect()
}

/// Added to the seed for the guest cell's own generator (any odd
/// constant; this one is splitmix64's increment).
const GUEST_STREAM: u64 = 0x9e37_79b9_7f4a_7c15;

/// One thread's share of the kill matrix: its generator, each
/// component's place in its workload rotation, and its cells' tallies.
struct Matrix {
    rng: Rng,
    rotation: BTreeMap<Component, usize>,
    mq_server_kills: usize,
    only_components: String,
    table: BTreeMap<(Component, HostKind), Tally>,
}

impl Matrix {
    /// Every component's kills on one host kind.
    fn cell(&mut self, kind: HostKind, subnet: u8) {
        let mut cell = Cell::new(kind, subnet);
        let mut timings: HashMap<Wl, Timing> = HashMap::new();
        for c in Component::ALL {
            if !self.only_components.is_empty()
                && !self
                    .only_components
                    .split(',')
                    .any(|o| c.name().starts_with(o))
            {
                continue;
            }
            let kills = kills_per_cell(kind);
            let tally = self.table.entry((c, kind)).or_default();
            if !c.applies(kind) {
                tally.na = true;
                continue;
            }
            let mut attempts = 0;
            let mut retry = 0;
            let first_phase = if kind == HostKind::Guest {
                self.rng.below(3)
            } else {
                0
            };
            let wls = workloads(c, kind);
            // Three draws per kill, and three more: on a loaded machine
            // a run may end before a moment drawn from the reference's
            // timing, and the next draws (later phases) can miss too.
            while tally.kills < kills && attempts < kills * 3 + 3 && !wls.is_empty() {
                attempts += 1;
                let k = tally.kills;
                let rot = self.rotation.entry(c).or_insert(0);
                let wl = wls[(*rot + k) % wls.len()];
                // Every second RabbitMQ server kill of the whole matrix
                // aims at its epmd (so that CI's counts try both).
                let epmd = c == Component::Server && wl == Wl::Mq && self.mq_server_kills % 2 == 1;
                let part = if epmd {
                    ServerPart::Epmd
                } else {
                    ServerPart::Main
                };
                let timing = match timings.get(&wl) {
                    Some(t) => *t,
                    None => match reference(&mut cell, wl).or_else(|e| {
                        // A guest's reference, on a machine this loaded,
                        // may miss a preflight deadline (an agent's answer
                        // within 20 s) while QEMU emulates on a whole CPU:
                        // once more before it counts as a failure.
                        if kind != HostKind::Guest {
                            return Err(e);
                        }
                        eprintln!("reference {} on guest failed, once more: {e}", wl.name());
                        reference(&mut cell, wl)
                    }) {
                        Ok(t) => {
                            timings.insert(wl, t);
                            t
                        }
                        Err(e) => {
                            tally.failures += 1;
                            tally.problems.push(e);
                            break;
                        }
                    },
                };
                // The phase turns with each kill, and once more each time
                // the workloads come round, so that every workload meets
                // every phase; a retry moves on to the next phase: a
                // component that no longer runs in one (an agent after
                // the last point) is tried in the others.
                // A guest cell's single kill starts in a seeded phase, not
                // always in apply.
                let phase = PHASES[(k + k / wls.len() + retry + first_phase) % 3];
                let at = moment(timing, phase, &mut self.rng);
                let t0 = Instant::now();
                let r = match trial(&mut cell, wl, c, part, at, timing, &mut self.rng) {
                    Ok(r) => r,
                    Err(failures) => {
                        // The component never ran after that moment (a
                        // server in a run past its last point): draw
                        // again, in the next phase.
                        eprintln!(
                            "no kill: {} on {} ({}, {at:?} into the run, {}): nothing to kill came up{}",
                            c.name(),
                            kind.name(),
                            wl.name(),
                            phase_name(phase),
                            if failures.is_empty() { "" } else { ", FAILED" }
                        );
                        for f in failures {
                            tally.problems.push(format!(
                                "{} on {} ({}, no kill): {f}",
                                c.name(),
                                kind.name(),
                                wl.name()
                            ));
                        }
                        retry += 1;
                        continue;
                    }
                };
                retry = 0;
                tally.kills += 1;
                *tally.by_phase.entry(phase_name(r.phase)).or_default() += 1;
                let what = match (c, wl, part) {
                    (Component::Server, Wl::Mq, ServerPart::Main) => "mq (beam.smp)".to_string(),
                    (Component::Server, Wl::Mq, ServerPart::Epmd) => "mq (epmd)".to_string(),
                    (Component::Server, _, _) => {
                        format!("{} ({})", wl.name(), wl.server().unwrap_or(""))
                    }
                    _ => wl.name().to_string(),
                };
                *tally.by_workload.entry(what.clone()).or_default() += 1;
                if c == Component::Server && wl == Wl::Mq {
                    self.mq_server_kills += 1;
                }
                tally.lost += r.lost;
                tally.failed_points += r.failed_points;
                if !r.leftovers.is_empty() {
                    tally.leftovers += 1;
                }
                if !r.left_for_restore.is_empty() {
                    tally.left_for_restore += 1;
                }
                if !r.failures.is_empty() {
                    tally.failures += 1;
                }
                let label = format!(
                    "{} on {} ({}, {:?} into the run, {})",
                    c.name(),
                    kind.name(),
                    what,
                    at,
                    phase_name(r.phase)
                );
                eprintln!(
                    "kill: {label}: lost {}, leftovers {}, left for restore {:?}, failed points {}, trial {:.1} s{}",
                    r.lost,
                    r.leftovers.len(),
                    r.left_for_restore,
                    r.failed_points,
                    t0.elapsed().as_secs_f64(),
                    if r.failures.is_empty() {
                        ""
                    } else {
                        ", FAILED"
                    }
                );
                if let Some(f) = &r.first_failure {
                    eprintln!("  first failed point: {f}");
                }
                for l in &r.leftovers {
                    tally.problems.push(format!("{label}: left {l}"));
                }
                for f in r.failures {
                    tally.problems.push(format!("{label}: {f}"));
                }
                if r.lost > 0 {
                    tally
                        .problems
                        .push(format!("{label}: {} samples lost", r.lost));
                }
            }
            *self.rotation.entry(c).or_insert(0) += self.table[&(c, kind)].kills;
        }
    }
}

#[test]
fn sigkill_every_component_on_every_host_kind() {
    benchlab_testkit::require!(root, "ip", "tc", "losetup", "mkfs.ext4", "ssh");
    for (program, what) in [
        ("sshd", "sshd (openssh-server)"),
        ("ssh-keygen", "ssh-keygen (openssh-client)"),
        ("nginx", "nginx (Debian package nginx)"),
        ("smbd", "smbd (Debian package samba)"),
        (
            "rabbitmq-server",
            "RabbitMQ (Debian package rabbitmq-server)",
        ),
    ] {
        if benchlab_testkit::find_program(program).is_none() {
            return benchlab_testkit::missing(what);
        }
    }
    // The guest kind's QEMU, the busybox of benchlab's initramfs and the
    // guest kernel (scripts/setup.sh brings all three).
    if benchlab_testkit::find_program("qemu-system-x86_64").is_none() {
        return benchlab_testkit::missing("QEMU (Debian package qemu-system-x86)");
    }
    if !Path::new("/bin/busybox").exists() {
        return benchlab_testkit::missing("busybox-static (scripts/setup.sh installs it)");
    }
    if benchlab_guest::kernel::Kernel::find().is_err() {
        return benchlab_testkit::missing(
            "the guest kernel (bash scripts/guest-kernel.sh, run by scripts/setup.sh)",
        );
    }
    // Alone: its guests reserve huge pages and its checks count the pool,
    // loop devices, machine-wide sysctls and fs.matrix's cgroups; and its
    // servers and guests must start within their deadlines (RabbitMQ's 30
    // s, a TCG guest's boot), which the other modules' servers and guests
    // beside it made them miss on this two-core machine.
    let alone = benchlab_testkit::alone();
    let seed = seed();
    let counts: Vec<String> = [
        HostKind::Local,
        HostKind::Netns,
        HostKind::Ssh,
        HostKind::Guest,
    ]
    .iter()
    .map(|k| format!("{} {}", k.name(), kills_per_cell(*k)))
    .collect();
    let counts = counts.join(", ");
    eprintln!("fault suite: seed {seed} (BENCHLAB_FAULT_SEED), kills per cell: {counts} (BENCHLAB_FAULT_KILLS)");
    let started = Instant::now();
    // BENCHLAB_FAULT_HOSTS=local,ssh narrows the matrix (when chasing a
    // fault); the table then says which host kinds were tried.
    let only = std::env::var("BENCHLAB_FAULT_HOSTS").unwrap_or_default();
    let wanted = |k: HostKind| only.is_empty() || only.split(',').any(|h| h == k.name());
    // BENCHLAB_FAULT_COMPONENTS=managed,load (name prefixes) and
    // BENCHLAB_FAULT_WORKLOADS=mq,fileserver narrow it likewise.
    let only_components = std::env::var("BENCHLAB_FAULT_COMPONENTS").unwrap_or_default();
    let narrowed = !only.is_empty()
        || !only_components.is_empty()
        || std::env::var("BENCHLAB_FAULT_WORKLOADS").is_ok_and(|w| !w.is_empty());
    // Each component's workloads rotate across the host kinds, not from
    // the first in every cell: with CI's counts (4 + 2 + 1 kills) every
    // component meets all six workload kinds somewhere in the matrix.
    // The components start at different places, so that the local
    // kills, the most numerous, try different workloads for each.
    let rotation: BTreeMap<Component, usize> = Component::ALL
        .iter()
        .enumerate()
        .map(|(i, c)| (*c, 2 * i + i / 3))
        .collect();
    const HOSTS: [(HostKind, u8); 3] = [
        (HostKind::Local, 0),
        (HostKind::Netns, 241),
        (HostKind::Ssh, 242),
    ];
    // The guest cell runs beside the other three, in a thread of its
    // own: its trials wait on a TCG guest that keeps one CPU busy, theirs
    // mostly on servers starting, so the two together take little more
    // than the longer one. Nothing either counts can be moved by the
    // other (see `snapshot`). Its rotation goes on from where the other
    // kinds' planned kills leave each component, and its draws come from
    // a generator of their own, seeded from the same seed.
    let mut guest_rotation = rotation.clone();
    for (c, place) in guest_rotation.iter_mut() {
        for (kind, _) in HOSTS {
            if wanted(kind) && c.applies(kind) {
                *place += kills_per_cell(kind);
            }
        }
    }
    let matrix = |rng: Rng, rotation: BTreeMap<Component, usize>| Matrix {
        rng,
        rotation,
        mq_server_kills: 0,
        only_components: only_components.clone(),
        table: BTreeMap::new(),
    };
    let mut guest = matrix(Rng(seed ^ GUEST_STREAM), guest_rotation);
    let mut m = matrix(Rng(seed), rotation);
    alone.beside(
        || {
            if wanted(HostKind::Guest) {
                guest.cell(HostKind::Guest, 243);
            }
        },
        || {
            for (kind, subnet) in HOSTS {
                if wanted(kind) {
                    m.cell(kind, subnet);
                }
            }
        },
    );
    let mut table = m.table;
    table.extend(guest.table);
    let elapsed = started.elapsed();
    let text = markdown_table(&table, seed, &counts, elapsed);
    eprintln!("\n{text}");
    if let Ok(path) = std::env::var("BENCHLAB_FAULT_DOC") {
        std::fs::write(&path, doc(&path, &text)).unwrap();
        eprintln!("written to {path}");
    }
    let problems: Vec<&String> = table.values().flat_map(|t| &t.problems).collect();
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    for ((c, k), t) in &table {
        if narrowed {
            break;
        }
        if t.na {
            continue;
        }
        assert!(
            t.kills >= kills_per_cell(*k),
            "{} on {}: only {} kills landed",
            c.name(),
            k.name(),
            t.kills
        );
    }
}

fn markdown_table(
    table: &BTreeMap<(Component, HostKind), Tally>,
    seed: u64,
    counts: &str,
    elapsed: Duration,
) -> String {
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let kills_var = std::env::var("BENCHLAB_FAULT_KILLS")
        .map(|k| format!("BENCHLAB_FAULT_KILLS={k} "))
        .unwrap_or_default();
    let mut s = format!(
        "Run {date}: `{kills_var}BENCHLAB_FAULT_SEED={seed} cargo test --test it faults::sigkill -- --nocapture` \
         (seed {seed}; kills per cell: {counts}; {:.0} s on this 2-core machine).\n\n| component | host | kills (apply/run/revert) | workloads | samples lost | kills leaving something | run left it to `restore` | failed checks | points failed by the kill |\n|---|---|---|---|---|---|---|---|---|\n",
        elapsed.as_secs_f64()
    );
    for ((c, k), t) in table {
        if t.na {
            s += &format!("| {} | {} | n/a | | | | | | |\n", c.name(), k.name());
            continue;
        }
        let ph = |p: &str| t.by_phase.get(p).copied().unwrap_or(0);
        let wl: Vec<String> = t
            .by_workload
            .iter()
            .map(|(w, n)| format!("{w} {n}"))
            .collect();
        s += &format!(
            "| {} | {} | {} ({}/{}/{}) | {} | {} | {} | {} | {} | {} |\n",
            c.name(),
            k.name(),
            t.kills,
            ph("apply"),
            ph("run"),
            ph("revert"),
            wl.join(", "),
            t.lost,
            t.leftovers,
            if c == &Component::Controller {
                "—".to_string()
            } else {
                t.left_for_restore.to_string()
            },
            t.failures,
            t.failed_points
        );
    }
    s
}

/// The document with the text between its markers replaced by `table`
/// (the rest of the document is prose kept by hand).
fn doc(path: &str, table: &str) -> String {
    const BEGIN: &str = "<!-- fault table: begin -->";
    const END: &str = "<!-- fault table: end -->";
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let (head, tail) = match (old.find(BEGIN), old.find(END)) {
        (Some(b), Some(e)) if b < e => (old[..b].to_string(), old[e + END.len()..].to_string()),
        _ => (old, "\n".to_string()),
    };
    format!("{head}{BEGIN}\n{table}{END}{tail}")
}

// ---------------------------------------------------------------- storage

/// A small tmpfs mounted for one test (its size is the fault), unmounted
/// when the test ends, however it ends.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(dir: PathBuf, size: &str) -> Tmpfs {
        std::fs::create_dir_all(&dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(st.success(), "mount a tmpfs on {}", dir.display());
        Tmpfs { dir }
    }

    fn remount(&self, opts: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(&self.dir)
            .status()
            .unwrap();
        assert!(st.success(), "remount {} {opts}", self.dir.display());
    }

    /// Fills the file system with one file until it refuses more.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let p = self.dir.join("filler");
        let mut f = std::fs::File::create(&p).unwrap();
        let chunk = vec![0xa5u8; 64 * 1024];
        while f.write_all(&chunk).is_ok() {}
        // The last partial chunk: byte by byte is too slow; 4 KiB pages.
        while f.write_all(&chunk[..4096]).is_ok() {}
        let _ = f.sync_all();
        p
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// A fake study of `points` points, two repetitions each.
fn fake_study(points: usize, sleep_s: f64) -> String {
    let sizes: Vec<String> = (1..=points).map(|i| i.to_string()).collect();
    format!(
        "[study]\nname = \"store-faults\"\n[defaults]\nrepetitions = 2\nquiesce_s = 0\nwarmup_s = 0\n\
         [[configuration]]\nname = \"a\"\n[[workload]]\nkind = \"fake\"\nsize = [{}]\nsleep_s = {sleep_s}\n",
        sizes.join(", ")
    )
}

/// A file's bytes, to compare before and after whole.
fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Processes started with this state directory, still alive.
fn alive_with_state(state: &Path) -> Vec<String> {
    let marker = format!("BENCHLAB_STATE_DIR={}", state.display());
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<String> = all_pids()
            .into_iter()
            .filter(|&p| p != std::process::id() as i32)
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/environ"))
                    .map(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()))
                    .unwrap_or(false)
            })
            .filter_map(proc_info)
            .map(|p| format!("{} `{}`", p.pid, p.cmd))
            .collect();
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn bl(s: &Scratch, db: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--db")
        .arg(db)
        .args(args)
        .env("BENCHLAB_STATE_DIR", s.path("state"))
        .env("TMPDIR", s.path("tmp"));
    c
}

fn out_text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The database's file system fills up mid-run: the run stops with the
/// reason, everything stored before is still there and sound, nothing of
/// the run is left, and once there is room again the run resumes.
#[test]
fn the_store_file_system_filling_up_mid_run() {
    benchlab_testkit::require!(root);
    let _mounts = exclusive(&[Resource::Mounts]);
    let s = Scratch::new();
    std::fs::create_dir_all(s.path("tmp")).unwrap();
    let fs = Tmpfs::mount(s.path("dbfs"), "2m");
    let db = fs.dir.join("benchlab.db");
    let study = s.study("s.toml", &fake_study(20, 0.05));
    let run = Running::start(bl(&s, &db, &["run", study.to_str().unwrap()]));
    let until = Instant::now() + Duration::from_secs(60);
    while run
        .lines()
        .iter()
        .filter(|(_, l)| reported(l).is_some())
        .count()
        < 4
    {
        assert!(Instant::now() < until, "no progress: {:?}", run.lines());
        std::thread::sleep(Duration::from_millis(10));
    }
    let filler = fs.fill();
    let seen: BTreeSet<Key> = run
        .lines()
        .iter()
        .filter_map(|(_, l)| reported(l))
        .collect();
    let (code, hung, err) = run.finish(Duration::from_secs(120));
    eprintln!("full store: exit {code:?}:\n{err}");
    assert!(!hung, "the run hung on a full store: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(
        code,
        Some(0),
        "a run that could not store its samples passed: {err}"
    );
    assert!(
        err.contains("is full") && err.contains(&db.display().to_string()),
        "the reason and the file are not given: {err}"
    );
    assert!(err.contains("--resume"), "what to do is not said: {err}");
    let stored = ok_samples(&db, 1);
    let lost: Vec<_> = seen.difference(&stored).collect();
    assert!(lost.is_empty(), "reported but not stored: {lost:?}");
    integrity(&db).unwrap();
    let left = alive_with_state(&s.path("state"));
    assert!(left.is_empty(), "left running: {left:?}");
    // Room again: the run resumes to the whole set.
    std::fs::remove_file(filler).unwrap();
    let out = bl(&s, &db, &["restore"]).output().unwrap();
    assert!(out.status.success(), "{}", out_text(&out));
    let out = bl(&s, &db, &["run", "--resume", "1"]).output().unwrap();
    assert!(out.status.success(), "resume: {}", out_text(&out));
    assert_eq!(ok_samples(&db, 1).len(), 40);
    integrity(&db).unwrap();
    assert!(files_in(&s.path("tmp")).is_empty());
}

/// The scratch target's file system fills up: the point fails with the
/// reason, the others run, and benchlab's files, mount and loop device
/// are gone.
#[test]
fn the_scratch_target_filling_up_fails_the_point() {
    benchlab_testkit::require!(root, "losetup", "mkfs.ext4");
    let _mounts = exclusive(&[Resource::Mounts]);
    let s = Scratch::new();
    std::fs::create_dir_all(s.path("tmp")).unwrap();
    let fs = Tmpfs::mount(s.path("target"), "6m");
    let db = s.db();
    // A directory target too small for the 8 MiB file; an image whose
    // backing file cannot grow past the tmpfs (sparse: made at once, its
    // blocks refused when written); and a cell that fits.
    let study = s.study(
        "s.toml",
        &format!(
            "[study]\nname = \"full-target\"\n[defaults]\nrepetitions = 1\nquiesce_s = 0\nwarmup_s = 0\n\
             [[configuration]]\nname = \"a\"\n\
             [[workload]]\nname = \"dir\"\nkind = \"fs.matrix\"\nfile_size = [\"8MiB\", \"1MiB\"]\nrecord_size = \"1MiB\"\npatterns = \"write,read\"\ntarget = \"{0}\"\n\
             [[workload]]\nname = \"image\"\nkind = \"fs.matrix\"\nfile_size = \"24MiB\"\nrecord_size = \"1MiB\"\npatterns = \"write,read\"\nmkfs = \"ext4\"\ntarget = \"{0}/image\"\nimage_size = \"64MiB\"\ncache = \"direct\"\n",
            fs.dir.display()
        ),
    );
    let out = bl(&s, &db, &["run", study.to_str().unwrap()])
        .output()
        .unwrap();
    let text = out_text(&out);
    eprintln!("full target: {}:\n{text}", out.status);
    assert_eq!(out.status.code(), Some(3), "some points failed: {text}");
    assert!(!text.contains("panicked"), "{text}");
    let j: serde_json::Value = serde_json::from_slice(
        &bl(&s, &db, &["show", "1", "--format", "json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let failures = j["failures"].as_array().unwrap();
    let reasons: Vec<String> = failures
        .iter()
        .map(|f| format!("{} {}: {}", f["workload"], f["label"], f["reason"]))
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("\"dir\"") && r.contains("No space left")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("\"image\"")),
        "{reasons:?}"
    );
    assert_eq!(
        ok_samples(&db, 1).len(),
        1,
        "the 1 MiB cell ran: {reasons:?}"
    );
    integrity(&db).unwrap();
    let left = alive_with_state(&s.path("state"));
    assert!(left.is_empty(), "left running: {left:?}");
    assert!(files_in(&fs.dir).is_empty(), "{:?}", files_in(&fs.dir));
    assert!(mounts_under(s.dir.path())
        .iter()
        .all(|m| m.contains(&fs.dir.display().to_string()) && m.starts_with("tmpfs")));
    assert!(
        loops_under(s.dir.path()).is_empty(),
        "{:?}",
        loops_under(s.dir.path())
    );
    assert!(
        files_in(&s.path("tmp")).is_empty(),
        "{:?}",
        files_in(&s.path("tmp"))
    );
}

/// A database from a finished fake run.
fn stored_db(s: &Scratch, name: &str) -> PathBuf {
    let db = s.path(name);
    let study = s.study("small.toml", &fake_study(2, 0.0));
    let out = bl(s, &db, &["run", study.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", out_text(&out));
    // One file: benchlab checkpoints and removes the WAL as it closes.
    assert!(!s.path(&format!("{name}-wal")).exists());
    db
}

/// Every command a user might point at a bad database: each must fail
/// with a clear message (exit 1, no panic) and leave the file as it was.
fn refused_everywhere(s: &Scratch, db: &Path, want: &[&str]) {
    let before = bytes(db);
    let study = s.study("next.toml", &fake_study(1, 0.0));
    for args in [
        vec!["list"],
        vec!["show", "1"],
        vec!["run", study.to_str().unwrap()],
        vec!["run", "--resume", "1"],
    ] {
        let out = bl(s, db, &args).output().unwrap();
        let text = out_text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {text}");
        assert!(!text.contains("panicked"), "{args:?}: {text}");
        assert!(
            want.iter().any(|w| text.contains(w)),
            "{args:?} does not say what is wrong ({want:?}): {text}"
        );
        assert!(
            text.contains(&db.display().to_string()),
            "{args:?} does not name the file: {text}"
        );
        assert!(bytes(db) == before, "{args:?} changed the database");
    }
}

#[test]
fn a_corrupted_database_is_refused_and_left_alone() {
    let s = Scratch::new();
    // The header overwritten: not a database at all.
    let db = stored_db(&s, "header.db");
    let mut bytes = std::fs::read(&db).unwrap();
    bytes[..16].copy_from_slice(b"garbage garbage!");
    std::fs::write(&db, &bytes).unwrap();
    refused_everywhere(&s, &db, &["not a database"]);
    // A page in the middle overwritten: a malformed database.
    let db = stored_db(&s, "page.db");
    let mut bytes = std::fs::read(&db).unwrap();
    let page = 4096;
    assert!(bytes.len() >= 3 * page, "{} bytes", bytes.len());
    for b in &mut bytes[page..2 * page] {
        *b = 0x5a;
    }
    std::fs::write(&db, &bytes).unwrap();
    refused_everywhere(&s, &db, &["malformed", "not a database", "corrupt"]);
}

#[test]
fn a_read_only_database_is_read_and_never_written() {
    benchlab_testkit::require!(root);
    let _mounts = exclusive(&[Resource::Mounts]);
    let s = Scratch::new();
    let fs = Tmpfs::mount(s.path("ro"), "8m");
    let made = stored_db(&s, "made.db");
    let db = fs.dir.join("benchlab.db");
    std::fs::copy(&made, &db).unwrap();
    fs.remount("ro");
    let before = bytes(&db);
    // Reading works.
    let out = bl(&s, &db, &["list"]).output().unwrap();
    let text = out_text(&out);
    assert!(!text.contains("panicked"), "{text}");
    assert!(out.status.success(), "list of a read-only database: {text}");
    // Writing is refused with the reason, before anything runs.
    let study = s.study("next.toml", &fake_study(1, 0.0));
    let out = bl(&s, &db, &["run", study.to_str().unwrap()])
        .output()
        .unwrap();
    let text = out_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("read-only") || text.contains("readonly"),
        "{text}"
    );
    assert!(!text.contains("panicked"), "{text}");
    assert!(bytes(&db) == before, "the read-only database changed");
    assert!(alive_with_state(&s.path("state")).is_empty());
}

#[test]
fn a_database_of_a_newer_schema_is_refused_and_left_alone() {
    let s = Scratch::new();
    let db = stored_db(&s, "newer.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", 999).unwrap();
    drop(conn);
    refused_everywhere(&s, &db, &["schema version 999, newer than this benchlab"]);
}

#[test]
fn two_controllers_writing_one_database() {
    benchlab_testkit::require!(root, "unshare", "hostname");
    let s = Scratch::new();
    let db = s.db();
    let study = s.study("s.toml", &fake_study(6, 0.05));
    // Each controller is a machine of its own: its own state directory
    // (the journal rule is not what is tried here) and its own host name
    // in a UTS namespace, since a host is in one run at a time across a
    // store's lab; both write one database at once.
    let start = |i: usize| {
        let mut c = Command::new("unshare");
        c.args(["--uts", "sh", "-c", r#"hostname "$0" && exec "$@""#])
            .arg(format!("controller-{i}"))
            .arg(BIN)
            .arg("--db")
            .arg(&db)
            .args(["run", study.to_str().unwrap()])
            .env("BENCHLAB_STATE_DIR", s.path(&format!("state{i}")))
            .env("TMPDIR", s.path("tmp"));
        Running::start(c)
    };
    let a = start(1);
    let b = start(2);
    let (ca, _, ea) = a.finish(Duration::from_secs(120));
    let (cb, _, eb) = b.finish(Duration::from_secs(120));
    assert_eq!(ca, Some(0), "{ea}");
    assert_eq!(cb, Some(0), "{eb}");
    assert_eq!(ok_samples(&db, 1).len(), 12);
    assert_eq!(ok_samples(&db, 2).len(), 12);
    integrity(&db).unwrap();
    for run in [1, 2] {
        assert_eq!(run_status(&db, run).as_deref(), Some("completed"));
    }
}

/// The suite's own reading of progress lines, which every "no sample
/// lost" check rests on.
#[test]
fn progress_lines_name_their_samples() {
    let key = |w: &str, l: &str, r: i64| Some((w.to_string(), l.to_string(), r));
    assert_eq!(
        reported("[3/6] a · fake · size=1 · rep 2/2: score = 101.00 (ETA 1s)"),
        key("fake", "size=1", 1)
    );
    assert_eq!(
        reported("[1/4] a · web.load · clients=1 · rep 1/2: requests_per_s = 14310 (ETA 3s)"),
        key("web.load", "clients=1", 0)
    );
    assert_eq!(
        reported("[1/6] a · net.stream · - · rep 1/2: FAILED: host generator: gone (ETA 0s)"),
        None
    );
    assert_eq!(
        reported("[2/6] a · fs.matrix · - · rep 1/1: skipped: no root"),
        None
    );
    assert_eq!(
        reported("benchlab: configuration `a` on sut: 2 setting(s) applied, 0 unchanged"),
        None
    );
    let at = |l: &str| (Duration::ZERO, l.to_string());
    assert_eq!(
        phase_of(&[at("benchlab: 4 repetition(s) to run")], 4),
        Phase::Apply
    );
    assert_eq!(
        phase_of(
            &[at(
                "benchlab: configuration `a` on sut: 2 setting(s) applied"
            )],
            4
        ),
        Phase::Run
    );
    let done: Vec<_> = (1..=2)
        .map(|i| at(&format!("[{i}/2] a · fake · - · rep {i}/2: ok")))
        .collect();
    assert_eq!(phase_of(&done, 2), Phase::Revert);
}
