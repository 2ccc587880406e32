//! `benchlab run` with the file-server workloads: Debian's real smbd
//! started by benchlab as a `kind = "samba"` service and loaded by
//! `fileserver.load` (libsmbclient, one process per client), and the same
//! mix on a directory with `fileserver.local`. Checked against what is
//! known independently: a load file's totals computed here by the test's
//! own reading of it, the files left on disk, smbd's exit reason. Nothing
//! may be left behind: no smbd, no scratch directory, no journal.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use benchlab_testkit::{left, Bed, Scratch};

const PW_VAR: &str = "BENCHLAB_TEST_FILESERVER_PW";
const PW: &str = "fileserver-Test-pw-7";

/// A small mix in dbench's format: every operation type, two files, a
/// rename, an expected failure, one directory made and removed.
const MIX: &str = r#"Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x2 16385 NT_STATUS_OK
Close 16385 NT_STATUS_OK
NTCreateX "\clients\client1\data.bin" 0x40 0x5 100 NT_STATUS_OK
WriteX 100 0 65536 65536 NT_STATUS_OK
WriteX 100 65536 65536 65536 NT_STATUS_OK
WriteX 100 131072 7000 7000 NT_STATUS_OK
ReadX 100 0 65536 65536 NT_STATUS_OK
ReadX 100 4096 4096 4096 NT_STATUS_OK
LockX 100 0 1 NT_STATUS_OK
UnlockX 100 0 1 NT_STATUS_OK
Flush 100 NT_STATUS_OK
QUERY_FILE_INFORMATION 100 1004 NT_STATUS_OK
SET_FILE_INFORMATION 100 1004 NT_STATUS_OK
Close 100 NT_STATUS_OK
NTCreateX "\clients\client1\tmp.bin" 0x40 0x2 101 NT_STATUS_OK
WriteX 101 0 1000 1000 NT_STATUS_OK
Close 101 NT_STATUS_OK
Rename "\clients\client1\tmp.bin" "\clients\client1\kept.bin" NT_STATUS_OK
FIND_FIRST "\clients\client1\*.BIN" 260 1366 2 NT_STATUS_OK
FIND_FIRST "\clients\client1\none.*" 260 1366 0 NT_STATUS_NO_SUCH_FILE
QUERY_PATH_INFORMATION "\clients\client1\data.bin" 1004 NT_STATUS_OK
QUERY_PATH_INFORMATION "\clients\client1\missing.bin" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
QUERY_FS_INFORMATION 1 NT_STATUS_OK
NTCreateX "\clients\client1\missing.bin" 0x40 0x1 102 NT_STATUS_OBJECT_NAME_NOT_FOUND
Mkdir "\clients\client1\sub" NT_STATUS_OK
Rmdir "\clients\client1\sub" NT_STATUS_OK
NTCreateX "\clients\client1\gone.bin" 0x40 0x2 103 NT_STATUS_OK
Close 103 NT_STATUS_OK
Unlink "\clients\client1\gone.bin" 0x6 NT_STATUS_OK
"#;

/// The mix's totals, read by the test itself: lines per operation, and
/// the bytes of the ReadX and WriteX lines (their 4th field).
fn totals(mix: &str) -> (std::collections::BTreeMap<String, u64>, u64, u64) {
    let mut ops = std::collections::BTreeMap::new();
    let (mut read, mut written) = (0, 0);
    for line in mix.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        *ops.entry(words[0].to_string()).or_insert(0) += 1;
        match words[0] {
            "ReadX" => read += words[3].parse::<u64>().unwrap(),
            "WriteX" => written += words[3].parse::<u64>().unwrap(),
            _ => {}
        }
    }
    (ops, read, written)
}

fn smbd_missing() -> bool {
    if benchlab_testkit::find_program("smbd").is_none() {
        benchlab_testkit::missing("smbd (Debian package samba; scripts/setup.sh installs it)");
        return true;
    }
    false
}

/// A scratch directory smbd's test user can walk through.
fn scratch() -> Scratch {
    let s = Scratch::new();
    std::fs::set_permissions(s.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(s.path("tmp")).unwrap();
    std::fs::set_permissions(s.path("tmp"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(s.path("mix.txt"), MIX).unwrap();
    s
}

/// `benchlab` with the service's scratch in the test's directory and the
/// password in the environment (service and clients read the same one).
fn command(s: &Scratch) -> std::process::Command {
    let mut c = s.benchlab();
    c.env("TMPDIR", s.path("tmp")).env(PW_VAR, PW);
    c
}

/// `benchlab run STUDY` in `s`, its servers' scratch under `s`'s tmp.
fn run(s: &Scratch, study: &Path) -> std::process::Command {
    let mut c = command(s);
    c.arg("run").arg(study);
    c
}

fn study(s: &Scratch, defaults: &str, workload: &str) -> PathBuf {
    study_with(s, defaults, "", workload)
}

/// [`study`] with extra keys for the service.
fn study_with(s: &Scratch, defaults: &str, service: &str, workload: &str) -> PathBuf {
    s.study(
        "fs.toml",
        &format!(
            r#"
[study]
name = "fileserver"
description = "fileserver.load against benchlab's smbd"

[defaults]
repetitions = 1
quiesce_s = 0
warmup_s = 0.2
{defaults}

[[configuration]]
name = "samba"

[[service]]
name = "files"
kind = "samba"
secrets = {{ password = {{ env = "{PW_VAR}" }} }}
{service}

[[workload]]
kind = "fileserver.load"
service = "files"
{workload}
"#
        ),
    )
}

/// The workload keys most tests use: the test's mix, the password's
/// variable.
fn mix_keys(s: &Scratch) -> String {
    format!(
        "load_file = \"{}\"\npassword_env = \"{PW_VAR}\"\n",
        s.path("mix.txt").display()
    )
}

fn assert_success(out: &std::process::Output) {
    benchlab_testkit::assert_success(out);
}

/// Exactly `passes` passes of a known mix per client over SMB1 and SMB3:
/// the operations and bytes benchlab counts equal the mix's own totals
/// (the test's reading of the file) times passes times clients, smbd was
/// observed, and its version and effective smb.conf are in the report.
#[test]
fn known_passes_over_smb_match_the_mix_totals() {
    if smbd_missing() {
        return;
    }
    let s = scratch();
    let f = study(
        &s,
        "duration_s = 1",
        &format!(
            "{}clients = [1, 3]\npasses = 2\ndialect = [\"smb1\", \"smb3\"]",
            mix_keys(&s)
        ),
    );
    let out = command(&s)
        .args(["run", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);
    let (ops, read, written) = totals(MIX);
    // Points: clients 1 and 3, each over two dialects: 2 × (1 + 3) = 8
    // clients × 2 passes.
    let passes = 2 * (1 + 3) * 2;
    assert_eq!(s.client_counter("passes"), passes);
    assert_eq!(s.client_counter("write_bytes"), passes * written);
    assert_eq!(s.client_counter("write_moved_bytes"), passes * written);
    assert_eq!(s.client_counter("read_bytes"), passes * read);
    assert_eq!(s.client_counter("read_moved_bytes"), passes * read);
    let key = |name: &str| match name {
        "QUERY_PATH_INFORMATION" => "qpathinfo",
        "QUERY_FILE_INFORMATION" => "qfileinfo",
        "SET_FILE_INFORMATION" => "sfileinfo",
        "QUERY_FS_INFORMATION" => "qfsinfo",
        "FIND_FIRST" => "find",
        other => Box::leak(other.to_lowercase().into_boxed_str()),
    };
    for (name, n) in &ops {
        let k = key(name);
        let done =
            s.client_counter(&format!("ops_{k}")) + s.client_counter(&format!("unsupported_{k}"));
        assert_eq!(done, passes * n, "{name}");
        assert_eq!(s.client_counter(&format!("errors_{k}")), 0, "{name}");
    }
    // libsmbclient sends no locks and no flush: counted as such, not done.
    assert_eq!(s.client_counter("unsupported_flush"), passes);
    assert_eq!(s.client_counter("ops_flush"), 0);
    // smbd was observed over every point.
    let j = s.json("1");
    for p in j["points"].as_array().unwrap() {
        let cpu = p["metrics"]["service_cpu_s"]
            .as_array()
            .expect("service CPU");
        assert!(cpu.iter().all(|v| v.as_f64().unwrap() > 0.0), "{p}");
    }
    let md = s.path("r.md");
    s.run_ok(&["report", "1", "--md", md.to_str().unwrap()]);
    let md = std::fs::read_to_string(md).unwrap();
    assert!(
        md.contains("### Servers") && md.contains("Samba 4."),
        "{md}"
    );
    assert!(md.contains("testparm -s") && md.contains("[bench]"), "{md}");
    assert!(!md.contains(PW), "the password never reaches the report");
    assert!(md.contains("peaks at"), "the curve's peak: {md}");
    s.assert_nothing_left(10, || left::program_under("smbd", &s.path("tmp")));
}

/// Issue 12: with `smb_client = "native"` (benchlab's own SMB1 client)
/// every operation of the mix is performed — locks and flushes too, which
/// libsmbclient cannot send — and the counts equal the mix's totals; the
/// native client with another dialect is refused before anything starts.
#[test]
fn the_native_smb1_client_performs_every_operation_of_the_mix() {
    if smbd_missing() {
        return;
    }
    let s = scratch();
    let f = study(
        &s,
        "duration_s = 1",
        &format!(
            "{}clients = [1, 3]\npasses = 2\ndialect = \"smb1\"\nsmb_client = \"native\"",
            mix_keys(&s)
        ),
    );
    let out = command(&s)
        .args(["run", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);
    let (ops, read, written) = totals(MIX);
    let passes = (1 + 3) * 2;
    assert_eq!(s.client_counter("passes"), passes);
    assert_eq!(s.client_counter("write_bytes"), passes * written);
    assert_eq!(s.client_counter("write_moved_bytes"), passes * written);
    assert_eq!(s.client_counter("read_bytes"), passes * read);
    assert_eq!(s.client_counter("read_moved_bytes"), passes * read);
    let key = |name: &str| match name {
        "QUERY_PATH_INFORMATION" => "qpathinfo",
        "QUERY_FILE_INFORMATION" => "qfileinfo",
        "SET_FILE_INFORMATION" => "sfileinfo",
        "QUERY_FS_INFORMATION" => "qfsinfo",
        "FIND_FIRST" => "find",
        other => Box::leak(other.to_lowercase().into_boxed_str()),
    };
    for (name, n) in &ops {
        let k = key(name);
        assert_eq!(s.client_counter(&format!("ops_{k}")), passes * n, "{name}");
        assert_eq!(s.client_counter(&format!("unsupported_{k}")), 0, "{name}");
        assert_eq!(s.client_counter(&format!("errors_{k}")), 0, "{name}");
    }
    assert_eq!(s.client_counter("ops_flush"), passes * ops["Flush"]);
    assert_eq!(s.client_counter("ops_lockx"), passes * ops["LockX"]);
    s.assert_nothing_left(10, || left::program_under("smbd", &s.path("tmp")));

    let f = study(
        &s,
        "duration_s = 0.3",
        &format!(
            "{}clients = 1\ndialect = \"smb3\"\nsmb_client = \"native\"",
            mix_keys(&s)
        ),
    );
    let out = command(&s)
        .args(["run", f.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("smb_client") && err.contains("only SMB1"),
        "{err}"
    );
}

/// The same mix on a directory (`fileserver.local`, dbench's case): the
/// totals, and each client's files left on disk with the sizes the mix
/// gives them.
#[test]
fn the_local_back_end_leaves_each_client_its_files() {
    let s = scratch();
    let dir = s.path("target-dir");
    std::fs::create_dir(&dir).unwrap();
    let f = s.study(
        "local.toml",
        &format!(
            "[study]\nname = \"local\"\n[defaults]\nrepetitions = 1\nquiesce_s = 0\nwarmup_s = 0\nduration_s = 1\n\
             [[workload]]\nkind = \"fileserver.local\"\ndir = \"{}\"\nload_file = \"{}\"\nclients = 4\npasses = 3\ncleanup = false\n",
            dir.display(),
            s.path("mix.txt").display()
        ),
    );
    let out = command(&s)
        .args(["run", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);
    let (ops, read, written) = totals(MIX);
    assert_eq!(s.client_counter("passes"), 12);
    assert_eq!(s.client_counter("write_bytes"), 12 * written);
    assert_eq!(s.client_counter("read_moved_bytes"), 12 * read);
    assert_eq!(s.client_counter("ops_flush"), 12 * ops["Flush"]);
    assert_eq!(s.client_counter("ops_lockx"), 12 * ops["LockX"]);
    // One run directory, in it one directory per client.
    let runs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let clients = runs[0].join("clients");
    let mut names: Vec<String> = std::fs::read_dir(&clients)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["client1", "client2", "client3", "client4"]);
    for c in &names {
        let size = |f: &str| std::fs::metadata(clients.join(c).join(f)).unwrap().len();
        assert_eq!(size("data.bin"), 131_072 + 7000);
        assert_eq!(size("kept.bin"), 1000);
        assert!(!clients.join(c).join("gone.bin").exists());
        assert!(!clients.join(c).join("sub").exists());
    }
}

#[test]
fn an_smbd_killed_mid_point_fails_that_point_and_the_next_starts_it_again() {
    smbd_killed_mid_point("");
}

/// The same over the native SMB1 client: its clients' connections die
/// with the server without hanging the point.
#[test]
fn an_smbd_killed_under_the_native_client_fails_that_point_and_the_next_starts_it_again() {
    smbd_killed_mid_point("dialect = \"smb1\"\nsmb_client = \"native\"\n");
}

fn smbd_killed_mid_point(keys: &str) {
    if smbd_missing() {
        return;
    }
    let s = scratch();
    let f = study(
        &s,
        "duration_s = 2.5",
        &format!("{}{keys}clients = [2, 3]", mix_keys(&s)),
    );
    let (child, main) = left::start_and_find(run(&s, &f), "smbd", &s.path("tmp"));
    // Into the first point's measured interval.
    left::kill_mid_run(child, main, Duration::from_millis(1500));
    let j = s.json("1");
    let failures = j["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    let reason = failures[0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("samba") && reason.contains("signal 9"),
        "smbd's exit reason: {reason}"
    );
    // The second point ran on an smbd started again.
    let ok: usize = j["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p["metrics"]["mbytes_per_s"]
                .as_array()
                .map_or(0, |a| a.len())
        })
        .sum();
    assert_eq!(ok, 1, "the point after the kill ran");
    s.assert_nothing_left(10, || left::program_under("smbd", &s.path("tmp")));
}

/// With the share on an ext4 image benchlab made: after the kill and
/// `restore`, no smbd, no mount, no image, no scratch directory.
#[test]
fn benchlab_killed_mid_point_leaves_nothing_after_restore() {
    if smbd_missing() {
        return;
    }
    let s = scratch();
    let f = study_with(
        &s,
        "duration_s = 3",
        "document_fs = { mkfs = \"ext4\", image_size = \"64MiB\" }",
        &format!("{}clients = 2", mix_keys(&s)),
    );
    let (mut child, _) = left::start_and_find(run(&s, &f), "smbd", &s.path("tmp"));
    std::thread::sleep(Duration::from_millis(1200));
    let _ = child.kill();
    let _ = child.wait();
    let out = command(&s)
        .args(["restore", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);
    // fs.matrix's mount points go into TMPDIR too: none may be left.
    s.assert_nothing_left(10, || left::program_under("smbd", &s.path("tmp")));
    let tmp = s.path("tmp").display().to_string();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    assert!(!mounts.contains(&tmp), "{mounts}");
}

/// Bad input gets a clear error naming what is wrong: before the run for
/// what a study can check, as the point's failure for what only the
/// server can say.
#[test]
fn bad_input_is_named() {
    if smbd_missing() {
        return;
    }
    let s = scratch();
    // Refused when the study is read: nothing starts.
    let f = study(
        &s,
        "duration_s = 0.3",
        &format!("{}clients = 1\ndialect = \"smb9\"", mix_keys(&s)),
    );
    let out = command(&s)
        .args(["run", f.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("dialect") && err.contains("smb3"), "{err}");

    // Failed points, each with its reason.
    std::fs::write(
        s.path("bad-mix.txt"),
        "Close 1 NT_STATUS_OK\nFrob 1 NT_STATUS_OK\n",
    )
    .unwrap();
    let mix = s.path("mix.txt").display().to_string();
    let cases = [
        (
            format!(
                "load_file = \"{}\"\npassword_env = \"{PW_VAR}\"",
                s.path("nonexistent.txt").display()
            ),
            "nonexistent.txt".to_string(),
        ),
        (
            format!(
                "load_file = \"{}\"\npassword_env = \"{PW_VAR}\"",
                s.path("bad-mix.txt").display()
            ),
            "line 2: unknown operation `Frob`".to_string(),
        ),
        (
            format!("load_file = \"{mix}\"\npassword_env = \"BENCHLAB_TEST_FILESERVER_WRONG_PW\""),
            "logon refused for user `www-data`".into(),
        ),
    ];
    for (i, (keys, says)) in cases.iter().enumerate() {
        let f = study(&s, "duration_s = 0.3", &format!("{keys}\nclients = 1"));
        let out = command(&s)
            .env("BENCHLAB_TEST_FILESERVER_WRONG_PW", "not-the-password")
            .args(["run", f.to_str().unwrap()])
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "case {i} succeeded: {all}");
        assert!(
            all.contains(says.as_str()),
            "case {i}: want `{says}` in:\n{all}"
        );
    }

    // An unreachable server: an address nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let f = s.study(
        "unreachable.toml",
        &format!(
            "[study]\nname = \"u\"\n[defaults]\nrepetitions = 1\nduration_s = 0.3\nwarmup_s = 0\nquiesce_s = 0\n\
             [[service]]\nname = \"files\"\naddress = \"127.0.0.1:{port}\"\n\
             [[workload]]\nkind = \"fileserver.load\"\nservice = \"files\"\nclients = 1\npassword_env = \"{PW_VAR}\"\nload_file = \"{}\"\n",
            s.path("mix.txt").display()
        ),
    );
    let out = command(&s)
        .args(["run", f.to_str().unwrap()])
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success());
    assert!(
        all.contains(&format!("smb://127.0.0.1:{port}/bench"))
            && all.contains("connection refused"),
        "{all}"
    );
    s.assert_nothing_left(10, || left::program_under("smbd", &s.path("tmp")));
}

/// What a path is, to the byte: its kind, owner, mode and modification
/// time, and for a directory every entry with its content.
fn snapshot(p: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).unwrap();
    let mut out = format!(
        "{:?} {}:{} {:o} {}.{}",
        m.file_type(),
        m.uid(),
        m.gid(),
        m.mode(),
        m.mtime(),
        m.mtime_nsec()
    );
    if m.is_dir() {
        let mut names: Vec<PathBuf> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for n in names {
            out.push_str(&format!(
                "\n{} {:?} {}",
                n.display(),
                std::fs::read(&n).ok(),
                snapshot(&n)
            ));
        }
    } else if m.is_file() {
        out.push_str(&format!(" {:?}", std::fs::read(p).unwrap()));
    }
    out
}

/// Issue 12: a share path (the samba service's `document_root`) that
/// exists and is not benchlab's — a directory of someone's files, a plain
/// file, a symbolic link even to a directory benchlab marked — stops the
/// run before anything starts, naming the study file, the key and what is
/// allowed. Nothing is started, stored, written, re-owned or deleted.
#[test]
fn a_share_path_that_is_not_benchlabs_is_refused_before_anything_starts() {
    if smbd_missing() {
        return;
    }
    let s = scratch();
    let theirs = s.path("their-share");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("keep.txt"), "someone's file\n").unwrap();
    // A mode smbd's start would change (it gives the share to www-data).
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
    let file = s.path("a-file");
    std::fs::write(&file, "not a directory\n").unwrap();
    let marked = s.path("marked");
    std::fs::create_dir(&marked).unwrap();
    std::fs::write(marked.join(benchlab_service::MARKER), "").unwrap();
    let link = s.path("link-to-marked");
    std::os::unix::fs::symlink(&marked, &link).unwrap();
    for path in [&theirs, &file, &link] {
        let before = (snapshot(path), snapshot(&marked));
        let f = study_with(
            &s,
            "duration_s = 0.3",
            &format!("document_root = \"{}\"", path.display()),
            &format!("{}clients = 1", mix_keys(&s)),
        );
        let out = command(&s)
            .args(["run", f.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        for want in [
            format!("{}: configuration `samba`", f.display()),
            format!(
                "service `files`: document_root {} exists and was not created by benchlab",
                path.display()
            ),
            "name a path that does not exist yet".into(),
            "or leave document_root out".into(),
        ] {
            assert!(err.contains(&want), "want `{want}` in:\n{err}");
        }
        assert_eq!((snapshot(path), snapshot(&marked)), before);
        // Nothing started or stored: no run, no smbd, no scratch, no
        // journal.
        let runs: i64 = rusqlite::Connection::open(s.db())
            .unwrap()
            .query_row("SELECT COUNT(*) FROM run", [], |r| r.get(0))
            .unwrap_or(0);
        assert_eq!(runs, 0);
        s.assert_nothing_left(10, || left::program_under("smbd", &s.path("tmp")));
    }
}

/// smbd on a test-bed host whose link a tbf shapes to R in each
/// direction: the payload benchlab counts in each direction (ReadX bytes
/// come from the server, WriteX bytes go to it) stays under R's TCP
/// goodput, and the write direction — the trace's start writes its
/// clients' files — comes near it.
#[test]
fn a_tbf_rate_on_the_server_link_caps_the_throughput() {
    if smbd_missing() {
        return;
    }
    benchlab_testkit::require!(root, "ip", "tc");
    let s = scratch();
    let rate = 16.0;
    let bed = Bed::up(
        &s,
        &format!("f{}", std::process::id() % 100_000),
        &format!("topology = \"direct\"\nsubnet = \"10.236.0.0/24\"\n[[testbed.host]]\nname = \"sut\"\nrate_mbit = {rate}\n[[testbed.host]]\nname = \"gen\"\n"),
    );
    let f = s.study(
        "tbf.toml",
        &format!(
            "[study]\nname = \"fs-tbf\"\n[defaults]\nrepetitions = 3\nduration_s = 3\nwarmup_s = 0.5\nquiesce_s = 0\n\
             [[host]]\nname = \"sut\"\nnetns = \"{}\"\naddress = \"10.236.0.1\"\n\
             [[host]]\nname = \"generator\"\nnetns = \"{}\"\naddress = \"10.236.0.2\"\n\
             [[service]]\nname = \"files\"\nkind = \"samba\"\nsecrets = {{ password = {{ env = \"{PW_VAR}\" }} }}\n\
             [[workload]]\nkind = \"fileserver.load\"\nservice = \"files\"\nclients = 8\n{}",
            bed.ns("sut"),
            bed.ns("gen"),
            mix_keys(&s)
        ),
    );
    let out = command(&s)
        .args(["run", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);
    let j = s.json("1");
    let p = &j["points"][0];
    let reps = |name: &str| -> Vec<f64> {
        p["metrics"][name]
            .as_array()
            .unwrap_or_else(|| panic!("no {name} in {p}"))
            .iter()
            .map(|x| x.as_f64().unwrap() * 8.0)
            .collect()
    };
    // TCP payload through a tbf counting whole frames (1448 of 1514).
    let goodput = rate * 1448.0 / 1514.0;
    let (reads, writes) = (reps("read_mbytes_per_s"), reps("write_mbytes_per_s"));
    eprintln!("tbf {rate} Mbit/s: reads {reads:.2?}, writes {writes:.2?} Mbit/s of payload");
    for v in reads.iter().chain(&writes) {
        // A repetition counts operations completing in its interval: one
        // 64 KiB write per client may straddle its start (≈0.5 Mbit/s
        // over 3 s at 8 clients), so 5 % above is still under the cap.
        assert!(*v <= goodput * 1.05, "{v} Mbit/s over a {rate} Mbit/s link");
    }
    let best = writes.iter().copied().fold(0.0, f64::max);
    assert!(
        best >= goodput * 0.6,
        "writes {writes:?} far below the link's {goodput}"
    );
}
