//! The SMB back end against Debian's real smbd, started as a benchlab
//! service: a known mix replayed a known number of times, its files seen
//! on the server's disk, its dialect seen by smbd itself.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use benchlab_service::{Service, ServiceSpec, StartOptions};
use benchlab_wl_fileserver::loadfile::{LoadFile, OpKind, ALL_OPS};
use benchlab_wl_fileserver::replay::{run, Replay, Target};
use benchlab_wl_fileserver::smb::{Dialect, SmbClient};

const PW_VAR: &str = "BENCHLAB_TEST_WLFS_PW";
const PW: &str = "wl-fs-Pw-1";

const MIX: &str = r#"Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x2 1 NT_STATUS_OK
Close 1 NT_STATUS_OK
NTCreateX "\clients\client1\a.dat" 0x40 0x5 2 NT_STATUS_OK
WriteX 2 0 65536 65536 NT_STATUS_OK
WriteX 2 65536 1000 1000 NT_STATUS_OK
ReadX 2 0 4096 4096 NT_STATUS_OK
LockX 2 0 10 NT_STATUS_OK
UnlockX 2 0 10 NT_STATUS_OK
Flush 2 NT_STATUS_OK
QUERY_FILE_INFORMATION 2 258 NT_STATUS_OK
SET_FILE_INFORMATION 2 1004 NT_STATUS_OK
Close 2 NT_STATUS_OK
FIND_FIRST "\clients\client1\A.*" 260 1366 1 NT_STATUS_OK
FIND_FIRST "\clients\client1\B.*" 260 1366 0 NT_STATUS_NO_SUCH_FILE
QUERY_PATH_INFORMATION "\clients\client1\missing" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
QUERY_FS_INFORMATION 1 NT_STATUS_OK
Rename "\clients\client1\a.dat" "\clients\client1\b.dat" NT_STATUS_OK
NTCreateX "\clients\client1\gone" 0x40 0x1 3 NT_STATUS_OBJECT_NAME_NOT_FOUND
Mkdir "\clients\client1\sub" NT_STATUS_OK
Rmdir "\clients\client1\sub" NT_STATUS_OK
"#;

fn smbd(dir: &Path) -> Service {
    std::env::set_var(PW_VAR, PW);
    let spec: ServiceSpec = toml::from_str(&format!(
        "name = \"files\"\nkind = \"samba\"\nsecrets = {{ password = {{ env = \"{PW_VAR}\" }} }}"
    ))
    .unwrap();
    let plan = spec.plan(dir).unwrap();
    let opts = StartOptions {
        scratch_base: dir.to_path_buf(),
        journal_dir: dir.join("journal"),
        secrets: Default::default(),
    };
    std::fs::create_dir_all(&opts.journal_dir).unwrap();
    Service::start(&plan, &opts).unwrap()
}

fn replay(svc: &Service, dialect: Dialect, password: &str, clients: u32, passes: u64) -> Replay {
    replay_with(
        svc,
        SmbClient::Libsmbclient,
        dialect,
        password,
        clients,
        passes,
    )
}

fn replay_with(
    svc: &Service,
    client: SmbClient,
    dialect: Dialect,
    password: &str,
    clients: u32,
    passes: u64,
) -> Replay {
    Replay {
        target: Target::Smb {
            server: svc.address().to_string(),
            share: "bench".into(),
            dialect,
            client,
            user: "www-data".into(),
            password: password.into(),
        },
        first: 0,
        count: clients,
        ramp_up: Duration::ZERO,
        measure: Duration::ZERO,
        passes: Some(passes),
        cleanup: false,
    }
}

#[test]
fn a_known_mix_over_each_dialect_leaves_exactly_its_files() {
    // SAFETY (of the test): geteuid has no side effects.
    assert_eq!(unsafe { libc::geteuid() }, 0, "smbd runs as root here");
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        base.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let svc = smbd(base.path());
    let share = svc.description().document_root.clone();
    let file = Arc::new(LoadFile::parse("mix", MIX).unwrap());
    let conf = svc.description().scratch.join("smb.conf");
    for (dialect, clients, protocol) in [
        (Dialect::Smb1, 2, "NT1"),
        (Dialect::Smb3, 3, "SMB3_11"),
        (Dialect::Smb2, 1, "SMB2_10"),
    ] {
        // At the gate every client is connected: smbd's own list of
        // sessions says which dialect each negotiated.
        let seen = std::sync::Mutex::new(String::new());
        let gate = || {
            let out = std::process::Command::new("smbstatus")
                .args(["-b", "-s"])
                .arg(&conf)
                .output()
                .map_err(|e| e.to_string())?;
            *seen.lock().unwrap() = String::from_utf8_lossy(&out.stdout).into_owned();
            Ok(())
        };
        let out = run(
            &replay(&svc, dialect, PW, clients, 3),
            &file,
            &AtomicBool::new(false),
            &gate,
        )
        .unwrap();
        let seen = seen.into_inner().unwrap();
        let sessions: Vec<&str> = seen.lines().filter(|l| l.contains("www-data")).collect();
        // The set-up connection and one per client.
        assert_eq!(sessions.len(), clients as usize + 1, "{seen}");
        assert!(
            sessions
                .iter()
                .all(|l| l.split_whitespace().any(|w| w == protocol)),
            "{dialect:?} should negotiate {protocol}: {seen}"
        );
        let t = &out.tally;
        assert_eq!(t.errors, [0; 17], "{dialect:?}: {:?}", t.first_error);
        let n = u64::from(clients) * 3;
        for k in ALL_OPS {
            let done = t.ops[k as usize] + t.unsupported[k as usize];
            assert_eq!(done, n * file.totals.ops[k as usize], "{dialect:?} {k:?}");
        }
        // libsmbclient has neither locks nor flush.
        assert_eq!(t.unsupported[OpKind::LockX as usize], n);
        assert_eq!(t.unsupported[OpKind::Flush as usize], n);
        assert_eq!(t.write_bytes, n * 66_536);
        assert_eq!(t.write_moved, n * 66_536);
        assert_eq!(t.read_moved, n * 4096);
        // On the server's disk: each client's own directory, its file.
        let run_dir = share.join(&out.run_dir).join("clients");
        let names = names_in(&run_dir);
        let want: Vec<String> = (1..=clients).map(|c| format!("client{c}")).collect();
        assert_eq!(names, want);
        for c in 1..=clients {
            let f = run_dir.join(format!("client{c}/b.dat"));
            assert_eq!(std::fs::metadata(&f).unwrap().len(), 66_536, "{f:?}");
        }
    }
    let wrong = run(
        &replay(&svc, Dialect::Smb3, "not-the-password", 1, 1),
        &file,
        &AtomicBool::new(false),
        &|| Ok(()),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        wrong.contains("logon refused for user `www-data`"),
        "{wrong}"
    );
    svc.stop().unwrap();
}

/// Every session smbd lists for the test user (`smbstatus -b`).
fn sessions(conf: &Path) -> String {
    let out = std::process::Command::new("smbstatus")
        .args(["-b", "-s"])
        .arg(conf)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_native_smb1_client_performs_the_whole_mix_locks_and_flushes_included() {
    // SAFETY (of the test): geteuid has no side effects.
    assert_eq!(unsafe { libc::geteuid() }, 0, "smbd runs as root here");
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        base.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let svc = smbd(base.path());
    let share = svc.description().document_root.clone();
    let conf = svc.description().scratch.join("smb.conf");
    let file = Arc::new(LoadFile::parse("mix", MIX).unwrap());
    let (clients, passes) = (3, 4);
    let seen = std::sync::Mutex::new(String::new());
    let gate = || {
        *seen.lock().unwrap() = sessions(&conf);
        Ok(())
    };
    let out = run(
        &replay_with(&svc, SmbClient::Native, Dialect::Smb1, PW, clients, passes),
        &file,
        &AtomicBool::new(false),
        &gate,
    )
    .unwrap();
    let seen = seen.into_inner().unwrap();
    let sessions: Vec<&str> = seen.lines().filter(|l| l.contains("www-data")).collect();
    assert_eq!(sessions.len(), clients as usize + 1, "{seen}");
    assert!(
        sessions
            .iter()
            .all(|l| l.split_whitespace().any(|w| w == "NT1")),
        "the native client negotiates NT1: {seen}"
    );
    let t = &out.tally;
    assert_eq!(t.errors, [0; 17], "{:?}", t.first_error);
    assert_eq!(t.unsupported, [0; 17], "nothing is left undone");
    let n = u64::from(clients) * passes;
    for k in ALL_OPS {
        assert_eq!(t.ops[k as usize], n * file.totals.ops[k as usize], "{k:?}");
    }
    assert_eq!(t.ops[OpKind::LockX as usize], n);
    assert_eq!(t.ops[OpKind::UnlockX as usize], n);
    assert_eq!(t.ops[OpKind::Flush as usize], n);
    assert_eq!(t.write_bytes, n * 66_536);
    assert_eq!(t.write_moved, n * 66_536);
    assert_eq!(t.read_bytes, n * 4096);
    assert_eq!(t.read_moved, n * 4096);
    // On the server's disk: each client's directory and file, its bytes
    // those benchlab wrote (the replay's 0xa5 pattern).
    let run_dir = share.join(&out.run_dir).join("clients");
    let names = names_in(&run_dir);
    let want: Vec<String> = (1..=clients).map(|c| format!("client{c}")).collect();
    assert_eq!(names, want);
    for c in 1..=clients {
        let dir = run_dir.join(format!("client{c}"));
        assert_eq!(names_in(&dir), ["b.dat"], "{dir:?}");
        let bytes = std::fs::read(dir.join("b.dat")).unwrap();
        assert_eq!(bytes.len(), 66_536);
        assert!(bytes.iter().all(|&b| b == 0xa5));
    }
    // Cleanup through the native client removes the whole run.
    let mut clean = replay_with(&svc, SmbClient::Native, Dialect::Smb1, PW, 2, 1);
    clean.cleanup = true;
    let out = run(&clean, &file, &AtomicBool::new(false), &|| Ok(())).unwrap();
    assert_eq!(out.tally.errors, [0; 17], "{:?}", out.tally.first_error);
    assert!(!share.join(&out.run_dir).exists());
    // A wrong password is a clear error.
    let wrong = run(
        &replay_with(
            &svc,
            SmbClient::Native,
            Dialect::Smb1,
            "not-the-password",
            1,
            1,
        ),
        &file,
        &AtomicBool::new(false),
        &|| Ok(()),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        wrong.contains("logon refused for user `www-data`"),
        "{wrong}"
    );
    // SMB2/3 is not the native client's.
    let smb3 = run(
        &replay_with(&svc, SmbClient::Native, Dialect::Smb3, PW, 1, 1),
        &file,
        &AtomicBool::new(false),
        &|| Ok(()),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(smb3.contains("only SMB1"), "{smb3}");
    svc.stop().unwrap();
}

/// The native client's searches that take more than one response
/// (FIND_FIRST2, then FIND_NEXT2), its byte-range locks against another
/// connection's, and its deltree, against the real smbd.
#[test]
fn native_searches_continue_locks_conflict_and_deltree_walks() {
    use benchlab_wl_fileserver::backend::{Backend, Outcome};
    use benchlab_wl_fileserver::smb1::Smb1;
    use std::ffi::CString;
    // SAFETY (of the test): geteuid has no side effects.
    assert_eq!(unsafe { libc::geteuid() }, 0, "smbd runs as root here");
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        base.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let svc = smbd(base.path());
    let share = svc.description().document_root.clone();
    let server = svc.address().to_string();
    let mut a = Smb1::connect(&server, "bench", "www-data", PW).unwrap();
    let c = |s: &str| CString::new(s).unwrap();
    assert_eq!(a.mkdir(&c("many")), Outcome::Ok);
    assert_eq!(a.mkdir(&c("many/sub")), Outcome::Ok);
    // More names than one 61 440-byte response holds (≈ 100 bytes each).
    let n = 1500;
    for i in 0..n {
        let f = a
            .open(
                &c(&format!("many/file-{i:04}.dat")),
                libc::O_RDWR | libc::O_CREAT,
                false,
            )
            .unwrap();
        assert_eq!(a.close(f), Outcome::Ok);
    }
    assert_eq!(a.find(&c("many"), b"*").unwrap(), n + 1);
    assert_eq!(a.find(&c("many"), b"FILE-00*.DAT").unwrap(), 100);
    assert_eq!(a.find(&c("many"), b"nothing.*").unwrap(), 0);
    // A lock held by one connection is refused to another until
    // unlocked.
    let mut b = Smb1::connect(&server, "bench", "www-data", PW).unwrap();
    let mut fa = a
        .open(&c("many/file-0000.dat"), libc::O_RDWR, false)
        .unwrap();
    let mut fb = b
        .open(&c("many/file-0000.dat"), libc::O_RDWR, false)
        .unwrap();
    let big = 1 << 40;
    assert_eq!(a.lock(&mut fa, big, 10, true), Outcome::Ok);
    assert!(matches!(b.lock(&mut fb, big + 5, 1, true), Outcome::Err(_)));
    assert_eq!(a.lock(&mut fa, big, 10, false), Outcome::Ok);
    assert_eq!(b.lock(&mut fb, big + 5, 1, true), Outcome::Ok);
    assert_eq!(a.flush(&mut fa), Outcome::Ok);
    assert_eq!(a.close(fa), Outcome::Ok);
    assert_eq!(b.close(fb), Outcome::Ok);
    // Errors are the errnos libsmbclient gives.
    assert_eq!(a.mkdir(&c("many")), Outcome::Err(libc::EEXIST));
    assert_eq!(a.rmdir(&c("many")), Outcome::Err(libc::ENOTEMPTY));
    assert_eq!(a.stat(&c("many/none")), Outcome::Err(libc::ENOENT));
    assert_eq!(a.deltree(&c("many")), Outcome::Ok);
    assert!(!share.join("many").exists());
    assert_eq!(a.deltree(&c("many")), Outcome::Ok, "nothing to do");
    svc.stop().unwrap();
}

/// The names in a directory, sorted.
fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
