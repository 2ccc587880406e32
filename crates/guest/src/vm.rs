//! A running guest: QEMU started with QMP, its vCPU threads pinned, its
//! memory from huge pages, its NIC joined, its agents reachable through
//! the control port; and everything it made journaled before it was made.

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use benchlab_env::journal::{Change, Journal};

use crate::accel;
use crate::hugepages;
use crate::kernel::Kernel;
use crate::mux::Mux;
use crate::qmp::Qmp;
use crate::spec::{Accel, Net, Spec, HUGEPAGE_KIB};
use crate::{initramfs, GuestError};

/// The machine type QEMU is given.
pub const MACHINE: &str = "q35";
/// The NIC model.
pub const NIC_MODEL: &str = "virtio-net-pci";
/// How long a guest may take to boot (TCG on a loaded two-CPU machine
/// takes about ten seconds; a second guest booting at once, more).
const BOOT_TIMEOUT: Duration = Duration::from_secs(180);
/// The environment variable that marks QEMU as started from a guest's
/// scratch directory (so a restore of that directory finds it, even if
/// its process group entry was never written).
const RUN_VAR: &str = "BENCHLAB_GUEST_RUN";

static SERIAL: AtomicU32 = AtomicU32::new(0);

/// What the inventory appendix says about a guest (defined beside the
/// inventory it joins).
pub use benchlab_inventory::GuestFacts as Facts;

/// A booted guest. Stopped (QEMU ended, its scratch directory removed,
/// its huge pages given back, its journal closed) by [`Guest::stop`] or
/// on drop.
pub struct Guest {
    /// What it was asked to be.
    pub spec: Spec,
    /// What it is.
    pub facts: Facts,
    run_dir: PathBuf,
    child: Option<Child>,
    qmp: Option<Qmp>,
    _mux: Option<Mux>,
    journal: Option<Journal>,
    hugepages: u64,
}

fn io(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> GuestError {
    move |e| GuestError::Io(format!("{what}: {e}"))
}

/// `ip [-n NS] ARGS…`.
fn ip(netns: Option<&str>, args: &[&str]) -> Result<(), GuestError> {
    let mut c = Command::new("ip");
    if let Some(ns) = netns {
        c.args(["-n", ns]);
    }
    let out = c.args(args).output().map_err(io("cannot run ip"))?;
    if !out.status.success() {
        return Err(GuestError::Io(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The last lines of a file, for error messages.
fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}

impl Guest {
    /// Checks everything that can be checked before anything starts: the
    /// spec against this host, QEMU, the kernel, busybox and the
    /// acceleration. Returns the problems (each naming its key).
    pub fn preflight(spec: &Spec) -> Vec<String> {
        let mut problems = spec.check_host();
        if let Err(e) = crate::qemu_path() {
            problems.push(format!("host `{}`: {e}", spec.name));
        }
        match (Kernel::ensure(spec.kernel.as_deref()), &spec.kernel) {
            (Ok(_), _) => {}
            (Err(e), None) => problems.push(format!("host `{}`: {e}", spec.name)),
            (Err(e), Some(k)) => {
                problems.push(format!("host `{}`: guest.kernel = \"{k}\": {e}", spec.name))
            }
        }
        if !Path::new(initramfs::BUSYBOX).is_file() {
            problems.push(format!(
                "host `{}`: no static busybox at {}: run `apt-get install busybox-static` (or bash scripts/setup.sh)",
                spec.name,
                initramfs::BUSYBOX
            ));
        }
        if problems.is_empty() {
            if let Err(e) = accel::resolve(spec.accel, &spec.name) {
                problems.push(e.to_string());
            }
        }
        problems
    }

    /// Boots a guest; its journal goes to `journal_dir`.
    pub fn boot(spec: &Spec, journal_dir: &Path) -> Result<Guest, GuestError> {
        let problems = spec.check_host();
        if !problems.is_empty() {
            return Err(GuestError::Refused(problems.join("; ")));
        }
        let qemu = crate::qemu_path()?;
        let kernel = Kernel::ensure(spec.kernel.as_deref())?;
        let initrd = initramfs::cached(&kernel)?;
        let (accel, emulated) = accel::resolve(spec.accel, &spec.name)?;
        let exe = std::env::current_exe().map_err(io("cannot find the benchlab binary"))?;
        let exe_s = exe
            .to_str()
            .ok_or_else(|| GuestError::Io("benchlab's path is not UTF-8".into()))?;
        if exe_s.contains(char::is_whitespace) {
            return Err(GuestError::Refused(format!(
                "benchlab's path `{exe_s}` has white space: the guest's kernel command line cannot carry it"
            )));
        }
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let journal = Journal::create(journal_dir, &format!("guest-{}", spec.name), None)?;
        let mut g = Guest {
            spec: spec.clone(),
            facts: Facts {
                host: spec.name.clone(),
                qemu: String::new(),
                machine: MACHINE.into(),
                accel: match accel {
                    Accel::Kvm => "kvm".into(),
                    _ => "tcg".into(),
                },
                emulated,
                vcpus: spec.vcpus,
                vcpu_cpus: Vec::new(),
                vcpu_threads: Vec::new(),
                memory_mib: spec.memory_mib,
                memory_backing: if spec.hugepages {
                    format!(
                        "{} MiB huge pages (hugetlb memfd, preallocated)",
                        HUGEPAGE_KIB / 1024
                    )
                } else {
                    "anonymous (4 KiB pages)".into()
                },
                nic: String::new(),
                kernel: kernel.release.clone(),
                boot_s: 0.0,
            },
            run_dir: std::env::temp_dir().join(format!(
                "benchlab-guest-{}-{}-{serial}",
                std::process::id(),
                spec.name
            )),
            child: None,
            qmp: None,
            _mux: None,
            journal: Some(journal),
            hugepages: 0,
        };
        // On any error below, dropping `g` undoes what was done.
        g.record(
            &format!("guest {} scratch directory", spec.name),
            Change::ScratchDir {
                path: g.run_dir.display().to_string(),
            },
        )?;
        fs::create_dir_all(&g.run_dir).map_err(io(g.run_dir.display()))?;
        if spec.hugepages {
            g.reserve_hugepages(spec.hugepages_needed())?;
        }
        let tap = format!("blg{}-{serial}", std::process::id() % 1_000_000);
        let mut cmd = Command::new(&qemu);
        // debug-threads: vCPU threads are named `CPU n/TCG` (or `/KVM`),
        // so that anyone can see which thread is which vCPU.
        cmd.arg("-name")
            .arg(format!("benchlab-{},debug-threads=on", spec.name));
        match accel {
            Accel::Kvm => cmd.args(["-accel", "kvm", "-cpu", "host"]),
            _ => cmd.args(["-accel", "tcg,thread=multi", "-cpu", "max"]),
        };
        cmd.args(["-machine", MACHINE])
            .args(["-smp", &spec.vcpus.to_string()])
            .args(["-m", &format!("{}M", spec.memory_mib)])
            .args([
                "-nodefaults",
                "-no-user-config",
                "-display",
                "none",
                "-no-reboot",
            ]);
        if spec.hugepages {
            cmd.args([
                "-object",
                &format!(
                    "memory-backend-memfd,id=mem0,size={}M,hugetlb=on,hugetlbsize=2M,prealloc=on",
                    spec.memory_mib
                ),
                "-machine",
                "memory-backend=mem0",
            ]);
        }
        let mut append = format!(
            "console=ttyS0 quiet loglevel=3 panic=-1 benchlab_exe={exe_s} benchlab_hostname={}",
            hostname()
        );
        {
            let net = &spec.net;
            append.push_str(&format!(" benchlab_ip={}", net.ip()));
            cmd.args([
                "-netdev",
                &format!("tap,id=net0,ifname={tap},script=no,downscript=no"),
                "-device",
                &format!("{NIC_MODEL},netdev=net0,mac={}", mac(&spec.name, net.ip())),
            ]);
        }
        let sock = |n: &str| g.run_dir.join(n).display().to_string();
        cmd.arg("-kernel")
            .arg(&kernel.image)
            .arg("-initrd")
            .arg(&initrd)
            .arg("-append")
            .arg(&append)
            .args([
                "-chardev",
                &format!("file,id=con0,path={}", sock("console.log")),
            ])
            .args(["-serial", "chardev:con0"])
            .args([
                "-qmp",
                &format!("unix:{},server=on,wait=off", sock("qmp.sock")),
            ])
            .args([
                "-fsdev",
                "local,id=root0,path=/,security_model=none,readonly=on,multidevs=remap",
                "-device",
                &format!(
                    "virtio-9p-pci,fsdev=root0,mount_tag={}",
                    initramfs::ROOT_TAG
                ),
            ])
            .args(["-device", "virtio-serial-pci,id=vser0"])
            .args([
                "-chardev",
                &format!(
                    "socket,id=ctl0,path={},server=on,wait=off",
                    sock("ctl.sock")
                ),
            ])
            .args([
                "-device",
                &format!(
                    "virtserialport,bus=vser0.0,chardev=ctl0,name={}",
                    crate::init::PORT_NAME
                ),
            ]);
        let log = fs::File::create(g.run_dir.join("qemu.log")).map_err(io("qemu.log"))?;
        cmd.env(RUN_VAR, g.run_dir.join("qemu"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(io("qemu.log"))?)
            .stderr(log)
            .process_group(0);
        // The tap is made where its bridge or its peer lives: QEMU enters
        // that network namespace (only it, not a mount namespace) before
        // it starts.
        let netns = spec.net.netns().map(str::to_string);
        let ns_file = match &netns {
            Some(ns) => Some(
                fs::File::open(format!("/run/netns/{ns}"))
                    .map_err(io(format!("network namespace {ns}")))?,
            ),
            None => None,
        };
        if let Some(f) = &ns_file {
            let fd = f.as_raw_fd();
            // SAFETY: setns(2) is async-signal-safe; fd stays open until spawn returns.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let started = Instant::now();
        let child = cmd
            .spawn()
            .map_err(io(format!("cannot start {}", qemu.display())))?;
        drop(ns_file);
        let pid = child.id() as i32;
        g.child = Some(child);
        let start_ticks = benchlab_env::sys::start_ticks(pid).unwrap_or(0);
        g.record(
            &format!("guest {} QEMU", spec.name),
            Change::ProcessGroup {
                pgid: pid,
                start_ticks,
            },
        )?;
        let deadline = started + BOOT_TIMEOUT;
        let mut qmp = Qmp::connect(
            &g.run_dir.join("qmp.sock"),
            started + Duration::from_secs(30),
        )
        .map_err(|e| g.boot_error(e))?;
        g.facts.qemu = qmp.version()?;
        g.facts.vcpu_threads = qmp.vcpu_threads()?;
        g.qmp = Some(qmp);
        g.pin()?;
        g.facts.nic = g.join_net(&spec.net, &tap, netns.as_deref())?;
        let listener =
            UnixListener::bind(g.run_dir.join("agents.sock")).map_err(io("agents.sock"))?;
        let mux = Mux::start(&g.run_dir.join("ctl.sock"), listener, deadline)
            .map_err(|e| g.boot_error(e))?;
        let ready = mux.wait_ready(deadline).map_err(|e| g.boot_error(e))?;
        g.facts.boot_s = started.elapsed().as_secs_f64();
        // The release the guest's own kernel reports (`uname -r` inside):
        // a guest running anything but what was asked is refused, so a
        // comparison of kernels never compares the wrong ones.
        let running = serde_json::from_slice::<serde_json::Value>(&ready)
            .ok()
            .and_then(|v| v["kernel"].as_str().map(str::to_string));
        if running.as_deref() != Some(kernel.release.as_str()) {
            return Err(GuestError::Refused(format!(
                "host `{}`: guest.kernel: the guest runs kernel {}, not the {} it was given ({})",
                spec.name,
                running.as_deref().unwrap_or("(it did not say)"),
                kernel.release,
                kernel.image.display()
            )));
        }
        g.facts.kernel = kernel.release.clone();
        g._mux = Some(mux);
        Ok(g)
    }

    fn record(&mut self, setting: &str, change: Change) -> Result<(), GuestError> {
        self.journal
            .as_mut()
            .expect("journal open while booting")
            .record(setting, change)?;
        Ok(())
    }

    /// A boot error with the end of QEMU's log and the guest's console.
    fn boot_error(&self, e: GuestError) -> GuestError {
        GuestError::Boot(format!(
            "{e}; qemu: {}; console: {}",
            tail(&self.run_dir.join("qemu.log"), 3),
            tail(&self.run_dir.join("console.log"), 5)
        ))
    }

    fn reserve_hugepages(&mut self, n: u64) -> Result<(), GuestError> {
        let setting = format!("guest {} huge pages (vm.nr_hugepages)", self.spec.name);
        let journal = self.journal.as_mut().expect("journal open while booting");
        let granted = hugepages::reserve(n, journal, &setting)?;
        // What this guest holds, given back at teardown (a shortfall too).
        self.hugepages = granted;
        if granted < n {
            return Err(GuestError::Refused(format!(
                "host `{}`: guest.hugepages = true needs {n} huge pages of {} MiB ({} MiB); the kernel reserved only {} (free memory too short or fragmented): lower guest.memory or set hugepages = false",
                self.spec.name,
                HUGEPAGE_KIB / 1024,
                self.spec.memory_mib,
                granted
            )));
        }
        Ok(())
    }

    /// Pins each vCPU thread to its host CPU and reads the mask back.
    fn pin(&mut self) -> Result<(), GuestError> {
        let threads = self.facts.vcpu_threads.clone();
        if self.spec.cpus.is_empty() {
            self.facts.vcpu_cpus = vec![None; threads.len()];
            return Ok(());
        }
        if threads.len() != self.spec.cpus.len() {
            return Err(GuestError::Qmp(format!(
                "QEMU reports {} vCPU threads for {} vCPUs (a single-threaded accelerator cannot be pinned per vCPU)",
                threads.len(),
                self.spec.cpus.len()
            )));
        }
        for (&tid, &cpu) in threads.iter().zip(&self.spec.cpus) {
            // SAFETY: a zeroed cpu_set_t with one bit set, passed by pointer.
            let rc = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
            };
            if rc != 0 {
                return Err(GuestError::Io(format!(
                    "cannot pin vCPU thread {tid} to CPU {cpu}: {}",
                    std::io::Error::last_os_error()
                )));
            }
        }
        self.facts.vcpu_cpus = self.spec.cpus.iter().map(|&c| Some(c)).collect();
        Ok(())
    }

    fn join_net(&self, net: &Net, tap: &str, netns: Option<&str>) -> Result<String, GuestError> {
        let where_ = netns
            .map(|n| format!(" in namespace {n}"))
            .unwrap_or_default();
        match net {
            Net::Bridge { bridge, .. } => {
                ip(netns, &["link", "set", tap, "master", bridge])?;
                ip(netns, &["link", "set", tap, "up"])?;
                Ok(format!("{NIC_MODEL} on tap {tap}, bridge {bridge}{where_}"))
            }
            Net::Direct { peer, .. } => {
                ip(netns, &["addr", "add", peer, "dev", tap])?;
                ip(netns, &["link", "set", tap, "up"])?;
                Ok(format!(
                    "{NIC_MODEL} on tap {tap} of its own (host end {peer}{where_}, no bridge)"
                ))
            }
        }
    }

    /// The command that runs `argv` in the guest with its standard
    /// streams relayed (hand it to the agent client like a local agent's
    /// command).
    pub fn command(&self, argv: &[String]) -> Command {
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("benchlab"));
        let mut c = Command::new(exe);
        c.arg("guest-attach")
            .arg(self.run_dir.join("agents.sock"))
            .arg("--")
            .args(argv);
        c
    }

    /// A handle that tells whether this guest still runs (its QEMU has
    /// not ended), for a thread that watches it while a point runs.
    pub fn watch(&self) -> Option<crate::mux::Watch> {
        self._mux.as_ref().map(Mux::watch)
    }

    /// QEMU's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// The scratch directory (sockets, console and QEMU logs).
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// The guest's console output so far.
    pub fn console(&self) -> String {
        fs::read_to_string(self.run_dir.join("console.log")).unwrap_or_default()
    }

    /// Stops the guest and undoes everything it made. Returns what could
    /// not be undone.
    pub fn stop(mut self) -> Vec<String> {
        self.teardown()
    }

    fn teardown(&mut self) -> Vec<String> {
        let mut failed = Vec::new();
        if let Some(mut q) = self.qmp.take() {
            q.quit();
        }
        if let Some(mut child) = self.child.take() {
            let until = Instant::now() + Duration::from_secs(10);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) => break,
                    _ if Instant::now() >= until => {
                        // SAFETY: kill(2) on QEMU's own process group.
                        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                        let _ = child.wait();
                        break;
                    }
                    _ => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
        self._mux = None;
        let Some(mut journal) = self.journal.take() else {
            return failed;
        };
        // Huge pages go back by this guest's share only (under the pool
        // lock): another guest may hold pages reserved since.
        if self.hugepages > 0 {
            let setting = format!("guest {} huge pages (vm.nr_hugepages)", self.spec.name);
            match hugepages::give_back(self.hugepages, &mut journal, &setting) {
                Ok(()) => self.hugepages = 0,
                Err(e) => failed.push(format!("{setting}: {e}")),
            }
        }
        for entry in journal.entries().iter().rev() {
            if matches!(entry.change, Change::PoolPages { .. }) {
                continue;
            }
            if let Err(e) = benchlab_env::sys::undo(entry) {
                failed.push(format!("{}: {e}", entry.setting));
            }
        }
        if failed.is_empty() {
            if let Err(e) = journal.finish() {
                failed.push(e.to_string());
            }
        }
        failed
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// This host's name, which the guest takes too (a broker's node name
/// resolves through the host's /etc/hosts, which the guest shares).
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname(2) into a buffer of the given size.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let n = buf.iter().position(|&b| b == 0).unwrap_or(0);
    let name = String::from_utf8_lossy(&buf[..n]).to_string();
    if rc != 0 || name.is_empty() || name.contains(char::is_whitespace) {
        "benchlab-guest".into()
    } else {
        name
    }
}

/// A locally administered MAC derived from the host name and its
/// address: the same guest booted again (the next configuration, a
/// resumed run) keeps its MAC, so that its neighbours' ARP entries stay
/// right. A new MAC at the same address left the generator sending to the
/// old one until its stale entry failed, and the first connection after a
/// reboot took 15 s or more (found by tests/it/faults.rs: the run after a
/// killed QEMU failed its preflight probe).
fn mac(name: &str, ip: &str) -> String {
    let mut h: u32 = 2166136261;
    for b in name.bytes().chain([0]).chain(ip.bytes()) {
        h = (h ^ b as u32).wrapping_mul(16777619);
    }
    let b = h.to_le_bytes();
    format!("52:54:00:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2])
}
