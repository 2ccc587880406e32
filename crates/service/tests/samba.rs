//! Debian's real smbd as a managed service: started as a plain process
//! with its state and test user in the scratch directory, reached by
//! Debian's own `smbclient` (an independent client), killed, and stopped
//! without leaving anything behind.

mod common;

use std::process::Command;

use benchlab_service::{Liveness, Service, ServiceKind};
use common::*;

const PW_VAR: &str = "BENCHLAB_TEST_SAMBA_SERVICE_PW";
const PW: &str = "s3cret-Samba-pw";

fn samba_plan() -> benchlab_service::ServicePlan {
    // SAFETY (of the test): only this file's tests read the variable.
    std::env::set_var(PW_VAR, PW);
    plan(&format!(
        "name = \"files\"\nkind = \"samba\"\nsecrets = {{ password = {{ env = \"{PW_VAR}\" }} }}"
    ))
}

/// `smbclient //addr/bench -c COMMANDS` as the test user.
fn smbclient(addr: std::net::SocketAddr, password: &str, commands: &str) -> (bool, String) {
    let out = Command::new("smbclient")
        .arg(format!("//{}/bench", addr.ip()))
        .args(["-p", &addr.port().to_string(), "-N"])
        .args(["-U", &format!("www-data%{password}")])
        .args(["-c", commands])
        // No /etc/samba/smb.conf needed: an empty client configuration.
        .args(["-s", "/dev/null"])
        .output()
        .expect("run smbclient");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn smbd_serves_its_share_to_the_test_user_and_stops_clean() {
    require_root();
    require("smbd", "samba");
    require("smbclient", "smbclient");
    let d = Dirs::new();
    let svc = Service::start(&samba_plan(), &d.opts()).unwrap();
    let desc = svc.description().clone();
    assert_eq!(desc.kind, ServiceKind::Samba);
    assert!(
        desc.version
            .as_deref()
            .is_some_and(|v| v.starts_with("Samba 4.")),
        "{:?}",
        desc.version
    );
    // The appendix holds testparm's effective configuration: the share,
    // the port, the state in the scratch directory, and no password.
    let config = desc.config.clone().unwrap();
    assert!(config.starts_with("# testparm -s"), "{config}");
    assert!(config.contains("[bench]"), "{config}");
    assert!(
        config.contains(&format!("smb ports = {}", desc.listen.port())),
        "{config}"
    );
    assert!(
        config.contains(&format!("{}/private", desc.scratch.display())),
        "{config}"
    );
    assert!(!config.contains(PW));
    assert!(desc.argv.contains(&"--no-process-group".to_string()));
    // Judged ready by its SMB negotiate answer, not by a connect.
    assert_eq!(desc.probe, benchlab_service::Probe::Smb);

    // Written through SMB, seen on disk in the share.
    let local = d.base.path().join("upload.bin");
    std::fs::write(&local, vec![7u8; 100_000]).unwrap();
    let (ok, out) = smbclient(
        svc.address(),
        PW,
        &format!("mkdir d1; put {} d1/u.bin", local.display()),
    );
    assert!(ok, "{out}");
    std::fs::remove_file(&local).unwrap();
    let on_disk = desc.document_root.join("d1/u.bin");
    assert_eq!(std::fs::metadata(&on_disk).unwrap().len(), 100_000);
    // A wrong password is refused.
    let (ok, out) = smbclient(svc.address(), "wrong", "ls");
    assert!(!ok && out.contains("NT_STATUS_LOGON_FAILURE"), "{out}");
    // smbd listens on the service's address only.
    let ss = Command::new("ss").args(["-ltnH"]).output().unwrap();
    let listening: Vec<String> = String::from_utf8_lossy(&ss.stdout)
        .lines()
        .filter(|l| l.contains(&format!(":{} ", desc.listen.port())))
        .map(str::to_string)
        .collect();
    assert_eq!(listening.len(), 1, "{listening:?}");
    assert!(listening[0].contains(&desc.listen.to_string()));

    let pgid = svc.pgid();
    let report = svc.stop().unwrap();
    assert!(!report.forced, "smbd needed SIGKILL");
    d.assert_nothing_left(Some(pgid));
}

#[test]
fn a_killed_smbd_is_reported_with_its_signal() {
    require_root();
    require("smbd", "samba");
    let d = Dirs::new();
    let mut svc = Service::start(&samba_plan(), &d.opts()).unwrap();
    // SAFETY: SIGKILL to the main smbd we started.
    unsafe { libc::kill(svc.pgid(), libc::SIGKILL) };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let reason = loop {
        if let Liveness::Died { reason, .. } = svc.check_alive() {
            break reason;
        }
        assert!(std::time::Instant::now() < until, "smbd did not die");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(reason, "samba killed by signal 9 (SIGKILL)");
    let pgid = svc.pgid();
    svc.stop().unwrap();
    d.assert_nothing_left(Some(pgid));
}

#[test]
fn an_unset_password_secret_is_refused_before_anything_starts() {
    let d = Dirs::new();
    // None named: the variable `benchlab run` fills with a generated one.
    let p = plan("name = \"files\"\nkind = \"samba\"");
    assert_eq!(
        p.spec.secrets["password"],
        benchlab_service::SecretSource::Env("BENCHLAB_SMB_PASSWORD".into())
    );
    let p = plan(
        "name = \"files\"\nkind = \"samba\"\nsecrets = { password = { env = \"BENCHLAB_NO_SUCH_VAR_XYZ\" } }",
    );
    let e = Service::start(&p, &d.opts()).unwrap_err().to_string();
    assert!(e.contains("BENCHLAB_NO_SUCH_VAR_XYZ is not set"), "{e}");
    assert!(d.scratch_entries().is_empty());
}

/// Whether `dir` is a mount point now, with its type and options.
fn mount_of(dir: &std::path::Path) -> Option<(String, String)> {
    let d = dir.display().to_string();
    std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.len() > 3 && w[1] == d)
        .map(|w| (w[2].to_string(), w[3].to_string()))
}

#[test]
fn the_share_can_live_on_a_file_system_benchlab_makes() {
    require_root();
    require("smbd", "samba");
    require("smbclient", "smbclient");
    require("mkfs.ext4", "e2fsprogs");
    std::env::set_var(PW_VAR, PW);
    let d = Dirs::new();
    let p = plan(&format!(
        "name = \"files\"\nkind = \"samba\"\nsecrets = {{ password = {{ env = \"{PW_VAR}\" }} }}\n\
         document_fs = {{ mkfs = \"ext4\", image_size = \"64MiB\", mount_options = \"noatime\" }}"
    ));
    let svc = Service::start(&p, &d.opts()).unwrap();
    let desc = svc.description().clone();
    assert_eq!(desc.document_fs.as_ref().unwrap().mkfs, "ext4");
    // The share is a link to a directory of the file system benchlab
    // mounted, with the options asked for.
    let target = std::fs::read_link(&desc.document_root).unwrap();
    let mnt = target.parent().unwrap().to_path_buf();
    let (fstype, options) = mount_of(&mnt).expect("mounted");
    assert_eq!(fstype, "ext4");
    assert!(options.split(',').any(|o| o == "noatime"), "{options}");
    let local = d.base.path().join("u.bin");
    std::fs::write(&local, vec![1u8; 50_000]).unwrap();
    let (ok, out) = smbclient(svc.address(), PW, &format!("put {} u.bin", local.display()));
    assert!(ok, "{out}");
    std::fs::remove_file(&local).unwrap();
    // Written through SMB, on the file system benchlab made.
    assert_eq!(
        std::fs::metadata(target.join("u.bin")).unwrap().len(),
        50_000
    );
    let pgid = svc.pgid();
    svc.stop().unwrap();
    assert!(mount_of(&mnt).is_none(), "unmounted");
    assert!(!mnt.exists(), "mount point removed");
    d.assert_nothing_left(Some(pgid));
}

#[test]
fn a_bad_document_fs_is_named() {
    let d = Dirs::new();
    let check = |extra: &str| {
        spec(&format!(
            "name = \"files\"\nkind = \"samba\"\nsecrets = {{ password = {{ env = \"X\" }} }}\n{extra}"
        ))
        .plan(d.base.path())
        .unwrap_err()
        .to_string()
    };
    let e = check("document_fs = { mkfs = \"btrfs\", image_size = \"1GiB\" }");
    assert!(
        e.contains("document_fs.mkfs: `btrfs` is not one of ext4, xfs"),
        "{e}"
    );
    let e = check("document_fs = { mkfs = \"xfs\", image_size = \"64MiB\" }");
    assert!(
        e.contains("document_fs.image_size") && e.contains("300 MiB"),
        "{e}"
    );
    let e = check(
        "document_root = \"/srv/x\"\ndocument_fs = { mkfs = \"ext4\", image_size = \"64MiB\" }",
    );
    assert!(e.contains("not both"), "{e}");
}

/// A listener that is not SMB — Python's socket server answering like an
/// HTTP server, or closing without a word — accepts connections, so a TCP
/// probe would call it ready; the SMB probe does not, and the start's
/// error says why.
#[test]
fn a_listener_that_is_not_smb_is_not_judged_ready() {
    require("python3", "python3");
    const LISTENER: &str = "import socket, sys\n\
        s = socket.socket()\n\
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
        s.bind((sys.argv[1], int(sys.argv[2])))\n\
        s.listen(16)\n\
        while True:\n\
        \x20   c, _ = s.accept()\n\
        \x20   c.recv(4096)\n\
        \x20   if sys.argv[3] == 'http':\n\
        \x20       c.sendall(b'HTTP/1.0 400 Bad Request\\r\\n\\r\\n')\n\
        \x20   c.close()\n";
    for (mode, says) in [
        ("http", "not an SMB server: its answer to an SMB negotiate request begins [48, 54, 54, 50] (\"HTTP\")"),
        ("close", "the server closed the connection without answering the SMB negotiate request"),
    ] {
        let d = Dirs::new();
        // 5 s: python3 (behind pyenv's shim here) took over 1 s to listen
        // on a loaded machine, and a refused connect is another error.
        let p = plan(&format!(
            "name = \"fake\"\nkind = \"command\"\nprobe = \"smb\"\nready_timeout_s = 5\n\
             argv = ['python3', '-c', '''{LISTENER}''', '{{{{bind}}}}', '{{{{port}}}}', '{mode}']"
        ));
        let e = match Service::start(&p, &d.opts()) {
            Ok(s) => panic!("{mode}: a non-SMB listener was judged ready: {}", s.name()),
            Err(e) => e.to_string(),
        };
        assert!(
            e.starts_with("service `fake`: ") && e.contains("did not become ready within 5 s"),
            "{e}"
        );
        assert!(e.contains(&format!("(last probe: {says}")), "{mode}: {e}");
        d.assert_nothing_left(None);
    }
}

/// The probe's other path: an smbd that speaks only SMB1 (`server max
/// protocol = NT1`) answers in SMB1, choosing NT LM 0.12, and is ready;
/// the share then serves an SMB1 client.
#[test]
fn an_smb1_only_smbd_is_judged_ready_too() {
    require_root();
    require("smbd", "samba");
    require("smbclient", "smbclient");
    std::env::set_var(PW_VAR, PW);
    let study = tempfile::tempdir().unwrap();
    let shipped = benchlab_service::spec::SHIPPED
        .iter()
        .find(|(n, _)| *n == "smb")
        .unwrap()
        .1;
    let text = shipped.replace(
        "    server min protocol = NT1\n",
        "    server min protocol = NT1\n    server max protocol = NT1\n",
    );
    assert_ne!(text, shipped);
    std::fs::write(study.path().join("smb1.conf"), text).unwrap();
    let d = Dirs::new();
    let p = plan_in(
        &format!(
            "name = \"files\"\nkind = \"samba\"\nconfig = \"smb1.conf\"\nsecrets = {{ password = {{ env = \"{PW_VAR}\" }} }}"
        ),
        study.path(),
    );
    let svc = Service::start(&p, &d.opts()).unwrap();
    assert!(svc
        .description()
        .config
        .as_deref()
        .unwrap()
        .contains("server max protocol = NT1"));
    let out = Command::new("smbclient")
        .arg(format!("//{}/bench", svc.address().ip()))
        .args(["-p", &svc.address().port().to_string()])
        .args(["-U", &format!("www-data%{PW}")])
        .args(["-m", "NT1", "--option=client min protocol=NT1"])
        .args(["-s", "/dev/null", "-c", "ls"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let pgid = svc.pgid();
    svc.stop().unwrap();
    d.assert_nothing_left(Some(pgid));
}
