//! Issue 39: a guest's kernel is a setting. Guests boot the Debian
//! kernels their study names (`guest.kernel`, fetched into benchlab's
//! cache by scripts/guest-kernel.sh without installing them), each
//! verified by the release the guest's own kernel reports; `benchlab
//! bisect --key host.NAME.kernel` bisects over kernels.
//!
//! Here KVM cannot run a stock kernel: the guests run under TCG (marked
//! emulated), CPU-heavy on this shared two-core machine, so they are
//! small (one vCPU, 256 MiB) and their points short.
//!
//! The tests that boot or refuse guests take the kernel tests' guests
//! (`exclusive(&[PlainGuests])`): none uses huge pages, and none counts
//! anything but its own guests, so they run beside the guest tests'
//! chain (`Guests`). The kernel bisection runs alone: its verdicts rest
//! on timings taken inside a TCG guest, whose vCPU is one host thread;
//! beside the other tests no count in the guest ran undisturbed, and the
//! bisection could not tell a kernel three times slower apart in three
//! rounds.

use std::path::Path;
use std::time::Instant;

use benchlab_testkit::{exclusive, Resource, Scratch};

/// The kernels the tests boot: Debian bookworm's, oldest first.
const KERNELS: [&str; 3] = ["6.1.0-47-amd64", "6.1.0-50-amd64", "6.1.0-57-amd64"];

macro_rules! require_kernels {
    ($($k:expr),*) => {
        benchlab_testkit::require!(root, "ip", "qemu-system-x86_64", "apt-get");
        if !Path::new("/bin/busybox").exists() {
            return benchlab_testkit::missing("busybox-static (scripts/setup.sh installs it)");
        }
        for k in [$($k),*] {
            // Fetched now when not in the cache yet: what a study naming
            // it would do in its preflight.
            if let Err(e) = benchlab_guest::kernel::Kernel::ensure(Some(k)) {
                return benchlab_testkit::missing(format!("guest kernel {k}: {e}"));
            }
        }
    };
}

/// A guest host of its own (a tap with no bridge) booting `kernel`.
fn guest(name: &str, kernel: &str, net: u8) -> String {
    format!(
        "[[host]]\nname = \"{name}\"\nguest = {{ vcpus = 1, memory = 256, accel = \"tcg\", kernel = \"{kernel}\", net = \"direct\", ip = \"10.234.9.{}/30\", peer = \"10.234.9.{}/30\" }}\n",
        net * 4 + 2,
        net * 4 + 1
    )
}

/// A workload that runs in the guest and prints how fast a shell counts
/// there, with the release of the kernel it runs under as a figure of
/// its own (`6.1.0-50-amd64` → 50: Debian's ABI number) so that every
/// sample says which kernel measured it. `extra` more loops of the count
/// when the ABI number is at least `slow_from` (a regression planted in
/// the kernels from that one on).
///
/// The guest's vCPU is one host thread among every other engineer's
/// work: a count that loses the CPU halfway reads many times slower. So
/// each repetition counts seven times and reports the fastest, which
/// some of the seven run undisturbed. Each count is long (2000 steps)
/// beside the fork and exec of the `date` that time it, whose cost
/// differs from kernel to kernel.
fn workload(slow_from: u32, extra: u32) -> String {
    format!(
        r#"[[workload]]
name = "count"
kind = "command"
client = "vm"
shell = true
command = '''
abi=$(uname -r | cut -d- -f2)
n=2000
[ "$abi" -ge {slow_from} ] && n=$((n + {extra}))
best=0
for t in 1 2 3 4 5 6 7; do
  s=$(date +%s%N)
  i=0
  while [ $i -lt $n ]; do i=$((i + 1)); done
  e=$(date +%s%N)
  r=$((2000 * 1000000000 / (e - s)))
  [ $r -gt $best ] && best=$r
done
echo "per_s: $best"
echo "abi: $abi"
'''
parser = "lines"
metrics = "per_s (1/s) higher: per_s; abi (n) higher: abi"
"#
    )
}

fn header(name: &str, extra: &str) -> String {
    format!("[study]\nname = \"{name}\"\n[defaults]\nwarmup_s = 0\nquiesce_s = 0\n{extra}")
}

/// `benchlab run STUDY`, its guests' files under `tmp`.
fn run(s: &Scratch, tmp: &Path, study: &Path) -> std::process::Output {
    s.benchlab()
        .env("TMPDIR", tmp)
        .arg("run")
        .arg(study)
        .output()
        .unwrap()
}

/// QEMU processes started from `tmp`.
fn qemus_under(tmp: &Path) -> Vec<i32> {
    let needle = format!("BENCHLAB_GUEST_RUN={}/", tmp.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            String::from_utf8_lossy(&env).contains(&needle)
        })
        .collect()
}

/// A host's inventory in `benchlab show --json`.
fn inventory<'a>(j: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    &j["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == name)
        .unwrap_or_else(|| panic!("no inventory of {name}: {j}"))["inventory"]
}

/// Two configurations whose guests differ only in their kernel, in one
/// study: each guest boots the Debian kernel asked, its own kernel says
/// so (the inventory's release is what the agent inside read, and every
/// sample's `abi` was read by `uname -r` inside), and both are marked
/// emulated.
#[test]
fn two_guests_with_different_debian_kernels_run_one_study() {
    let _guests = exclusive(&[Resource::PlainGuests]);
    let (old, new) = (KERNELS[0], KERNELS[2]);
    require_kernels!(old, new);
    let s = Scratch::new();
    let tmp = s.tmp();
    let study = s.study(
        "kernels.toml",
        &format!(
            "{}{}{}\
             [[configuration]]\nname = \"old\"\n\
             [[configuration]]\nname = \"new\"\nhosts = {{ vm = \"vm-new\" }}\n{}",
            header("kernels", "repetitions = 2\n"),
            guest("vm", old, 0),
            guest("vm-new", new, 1),
            workload(1000, 0),
        ),
    );
    let started = Instant::now();
    let out = run(&s, &tmp, &study);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "run failed: {stderr}");
    eprintln!(
        "two kernels, one study: {:.0} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        stderr.contains("emulated, not a virtualization measurement"),
        "{stderr}"
    );
    let j = s.json("1");
    for (host, kernel) in [("vm", old), ("vm-new", new)] {
        let inv = inventory(&j, host);
        assert_eq!(
            inv["os"]["kernel_release"].as_str(),
            Some(kernel),
            "{host}: {inv}"
        );
        assert_eq!(inv["guest"]["kernel"].as_str(), Some(kernel), "{host}");
        assert_eq!(inv["guest"]["accel"], "tcg", "{host}");
        // Emulated, and why: TCG was asked.
        assert!(
            inv["guest"]["emulated"]
                .as_str()
                .is_some_and(|why| why.contains("tcg")),
            "{host}: {inv}"
        );
        eprintln!(
            "{host} ({kernel}) booted in {:.1} s",
            inv["guest"]["boot_s"]
        );
    }
    // Every sample of each configuration ran under its kernel.
    let abi = |k: &str| k.split('-').nth(1).unwrap().parse::<f64>().unwrap();
    let mut seen = Vec::new();
    for point in j["points"].as_array().unwrap() {
        let config = point["configuration"].as_str().unwrap().to_string();
        let want = if config == "old" { abi(old) } else { abi(new) };
        let figures = point["metrics"]["abi"].as_array().unwrap();
        assert_eq!(figures.len(), 2, "{config}: {point}");
        for f in figures {
            assert_eq!(f.as_f64(), Some(want), "{config}: {point}");
        }
        seen.push(config);
    }
    let text = s.run_ok(&["show", "1"]);
    assert!(
        text.contains("old (emulated)") && text.contains("new (emulated)"),
        "{text}"
    );
    s.assert_nothing_left(0, || qemus_under(&tmp));
}

/// A kernel that cannot be fetched, or that lacks the modules a guest
/// needs, is refused before anything starts, naming the host's key; in
/// a run and in a kernel bisection alike.
#[test]
fn a_kernel_that_cannot_be_fetched_or_lacks_modules_is_refused() {
    let _guests = exclusive(&[Resource::PlainGuests]);
    require_kernels!(KERNELS[2]);
    let s = Scratch::new();
    let tmp = s.tmp();
    // A tree with a kernel image and none of the modules.
    let tree = s.path("bare");
    std::fs::create_dir_all(tree.join("boot")).unwrap();
    std::fs::create_dir_all(tree.join("lib/modules/6.1.0-99-amd64/kernel")).unwrap();
    std::fs::write(tree.join("boot/vmlinuz-6.1.0-99-amd64"), "").unwrap();
    for (kernel, why) in [
        (
            "6.1.0-999-amd64".to_string(),
            "cannot fetch kernel 6.1.0-999-amd64: guest-kernel: apt knows no package linux-image-6.1.0-999-amd64".to_string(),
        ),
        (
            tree.display().to_string(),
            "6.1.0-99-amd64 cannot boot a guest: it has no module virtio_pci, virtio_console, 9pnet_virtio, 9p, overlay, virtio_net".to_string(),
        ),
    ] {
        let study = s.study(
            "bad.toml",
            &format!("{}{}{}", header("bad", ""), guest("vm", &kernel, 2), workload(1000, 0)),
        );
        let out = run(&s, &tmp, &study);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.contains(&format!("host `vm`: guest.kernel = \"{kernel}\": ")) && err.contains(&why),
            "{err}"
        );
        assert!(err.contains("nothing was run"), "{err}");
        let bisect = s.path("kb.toml");
        std::fs::write(
            &bisect,
            format!("{}{}{}", header("kb", ""), guest("vm", KERNELS[2], 2), workload(1000, 0)),
        )
        .unwrap();
        let out = s.run(&[
            "bisect",
            bisect.to_str().unwrap(),
            "--key",
            "host.vm.kernel",
            "--values",
            &format!("{},{kernel}", KERNELS[2]),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.contains(&format!("--key host.vm.kernel: version `{kernel}`: "))
                && err.contains(&why)
                && err.contains("refused before anything ran"),
            "{err}"
        );
    }
    // Nothing ran: no run stored, no QEMU started.
    let list = s.run_ok(&["list"]);
    assert!(!list.contains("bad") && !list.contains("kb"), "{list}");
    assert!(qemus_under(&tmp).is_empty());
}

/// `benchlab bisect --key host.vm.kernel` over three Debian kernels,
/// with a slowdown planted in the kernels from the second on (the
/// workload counts further when `uname -r` in the guest says so): each
/// step boots the bound's and the candidate's kernels in guests of their
/// own, and the bisection names the second kernel.
#[test]
fn a_kernel_bisection_over_three_debian_kernels_names_the_slow_one() {
    let _alone = benchlab_testkit::alone();
    require_kernels!(KERNELS[0], KERNELS[1], KERNELS[2]);
    let s = Scratch::new();
    let tmp = s.tmp();
    let study = s.study(
        "kb.toml",
        &format!(
            "{}{}{}",
            header("kb", ""),
            guest("vm", KERNELS[2], 3),
            // Three times the count from the second kernel on: the
            // fork and exec of `date` around each count differ between
            // these kernels under TCG, so a slowdown only a little
            // larger than that difference could be hidden by it.
            workload(50, 4000)
        ),
    );
    let started = Instant::now();
    let out = s
        .benchlab()
        .env("TMPDIR", &tmp)
        .args([
            "bisect",
            study.to_str().unwrap(),
            "--key",
            "host.vm.kernel",
            "--values",
            &KERNELS.join(","),
            "--margin",
            "10%",
            "--repetitions",
            "4",
            "--blocks",
            "4",
            "--rounds",
            "3",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "kernel bisection over {} kernels: {:.0} s\n{stdout}",
        KERNELS.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("first bad version: #1 `{}`", KERNELS[1])),
        "{stdout}"
    );
    // Every round's run booted the two kernels its step compared, each
    // verified from inside.
    // The tally: "N steps, M runs (bisection 1)"; the store is this
    // test's own, its runs numbered from 1.
    let runs: usize = stdout
        .lines()
        .find_map(|l| {
            l.split(" runs (bisection")
                .next()?
                .rsplit(", ")
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no tally: {stdout}"));
    assert!(runs >= 2, "{stdout}");
    let ids: Vec<String> = (1..=runs).map(|i| i.to_string()).collect();
    for id in &ids {
        let j = s.json(id);
        let kernels: Vec<&str> = ["vm-bound", "vm-candidate"]
            .iter()
            .map(|h| inventory(&j, h)["os"]["kernel_release"].as_str().unwrap())
            .collect();
        assert!(
            kernels.iter().all(|k| KERNELS.contains(k)),
            "run {id}: {kernels:?}"
        );
        assert_ne!(kernels[0], kernels[1], "run {id}");
    }
    s.assert_nothing_left(0, || qemus_under(&tmp));
}
