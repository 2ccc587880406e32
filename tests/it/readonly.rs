//! Issue 38: reading never writes. Every command that only reads a store
//! (`list`, `show`, `report`, `compare`, `history`, `queue`, `copy`'s
//! source, `serve` answering pages) leaves its bytes and its directory as
//! they were: no `-wal`, `-shm` or `-journal` file beside it, no
//! migration, no upgrade. A store an older benchlab wrote (the v6 fixture
//! of `one_read_path`) is refused with the command that upgrades it,
//! read-only or not (chmod 0444, a read-only mount), and `benchlab store
//! upgrade` is what upgrades it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use benchlab_testkit::browser::{http, Kids};
use benchlab_testkit::{benchlab_bin, exclusive, repo, Resource, Scratch};

const STUDY: &str = "[study]\nname = \"ro\"\n[defaults]\nrepetitions = 2\nquiesce_s = 0\nduration_s = 0.05\nwarmup_s = 0\n\
     [[configuration]]\nname = \"base\"\n[[configuration]]\nname = \"better\"\nset = { value = 110 }\n\
     [[workload]]\nkind = \"fake\"\nsize = [64, 128]\nvalue = 100\n";

/// `benchlab --db DB ARGS…` with the scratch's state directory.
fn bl(s: &Scratch, db: &Path, args: &[&str]) -> Output {
    Command::new(benchlab_bin())
        .arg("--db")
        .arg(db)
        .args(args)
        .env("BENCHLAB_STATE_DIR", s.path("state"))
        .current_dir(s.path(""))
        .output()
        .expect("run benchlab")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(s: &Scratch, db: &Path, args: &[&str]) -> String {
    let out = bl(s, db, args);
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a reader must not change: the store's bytes and the names in
/// its directory.
#[derive(Debug, PartialEq)]
struct Footprint {
    bytes: Vec<u8>,
    names: Vec<String>,
}

fn footprint(db: &Path) -> Footprint {
    let mut names: Vec<String> = std::fs::read_dir(db.parent().expect("a directory"))
        .expect("list the store's directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Footprint {
        bytes: std::fs::read(db).expect("read the store"),
        names,
    }
}

fn assert_same(before: &Footprint, db: &Path, what: &str) {
    let after = footprint(db);
    assert_eq!(
        after.names, before.names,
        "{what} changed the store's directory"
    );
    assert!(
        after.bytes == before.bytes,
        "{what} changed the store's bytes"
    );
}

/// The reading commands over runs `run` (configurations base, better) of
/// study `study`; outputs go to `out`, outside the store's directory.
fn reads(run: &str, out: &Path) -> Vec<Vec<String>> {
    let o = |name: &str| out.join(name).display().to_string();
    let base = format!("{run}:base");
    let better = format!("{run}:better");
    [
        vec!["list".to_string()],
        vec!["show".into()],
        vec!["show".into(), run.into(), "--format".into(), "json".into()],
        vec!["show".into(), run.into(), "--format".into(), "csv".into()],
        vec![
            "report".into(),
            run.into(),
            "--html".into(),
            o("r.html"),
            "--md".into(),
            o("r.md"),
            "--json".into(),
            o("r.json"),
            "--csv".into(),
            o("r.csv"),
        ],
        vec!["compare".into(), base, better],
        vec!["history".into(), "ro".into()],
        vec!["queue".into()],
        vec!["copy".into(), "--to".into(), o("copy.db"), run.into()],
    ]
    .into_iter()
    .collect()
}

/// A store of its own directory with one measured run, upgraded (made
/// by this benchlab).
fn made_store(s: &Scratch) -> PathBuf {
    std::fs::create_dir_all(s.path("store")).unwrap();
    std::fs::create_dir_all(s.path("out")).unwrap();
    let db = s.path("store/benchlab.db");
    let study = s.study("ro.toml", STUDY);
    ok(s, &db, &["run", study.to_str().unwrap()]);
    db
}

/// A copy of the previous release's store (tests/fixtures/store-v6) in a
/// directory of its own.
fn v6_store(s: &Scratch, dir: &str) -> PathBuf {
    std::fs::create_dir_all(s.path(dir)).unwrap();
    std::fs::create_dir_all(s.path("out")).unwrap();
    let db = s.path(&format!("{dir}/benchlab.db"));
    std::fs::copy(repo().join("tests/fixtures/store-v6/store.db"), &db).expect("copy store");
    db
}

/// `benchlab serve` over `db`, killed when `kids` drops; `None` when it
/// exited (its output then).
fn serve(s: &Scratch, db: &Path, kids: &mut Kids) -> Result<std::net::SocketAddr, String> {
    use std::io::BufRead;
    let mut child = Command::new(benchlab_bin())
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("BENCHLAB_STATE_DIR", s.path("state"))
        .env_remove("BENCHLAB_SERVE_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start benchlab serve");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let Some(url) = line.split("http://").nth(1) else {
        let out = child.wait_with_output().unwrap();
        return Err(format!("{line}{}", String::from_utf8_lossy(&out.stderr)));
    };
    kids.0.push(child);
    Ok(url.split('/').next().unwrap().parse().unwrap())
}

/// `serve` answers `pages` with 200 and changes nothing, while it runs
/// and after it ends.
fn serve_reads(s: &Scratch, db: &Path, pages: &[String]) {
    let before = footprint(db);
    let mut kids = Kids(Vec::new());
    let addr = serve(s, db, &mut kids).unwrap_or_else(|e| panic!("serve: {e}"));
    for page in pages {
        let (code, _, body) = http(addr, "GET", page, &[], None).expect("GET");
        assert_eq!(code, 200, "{page}: {}", String::from_utf8_lossy(&body));
        assert_same(&before, db, &format!("serve answering {page}"));
    }
    drop(kids);
    assert_same(&before, db, "serve");
}

fn pages(run: &str) -> Vec<String> {
    vec![
        "/".into(),
        "/api/runs".into(),
        format!("/run/{run}/"),
        format!("/run/{run}/report.json"),
        format!("/compare/report.json?c={run}%3Abase&c={run}%3Abetter"),
        "/history?study=ro".into(),
    ]
}

#[test]
fn no_read_command_changes_the_store_or_its_directory() {
    let s = Scratch::new();
    let db = made_store(&s);
    for args in reads("1", &s.path("out")) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let before = footprint(&db);
        ok(&s, &db, &args);
        assert_same(&before, &db, &format!("{args:?}"));
    }
    // The copy read every row: the reader did read.
    assert!(ok(&s, &s.path("out/copy.db"), &["list"]).contains(" ro "));
    serve_reads(&s, &db, &pages("1"));
}

/// The same on a store made read-only (chmod 0444, its directory 0555):
/// reading works, as it would for a user without write access.
#[test]
fn a_read_only_file_is_read_as_it_is() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new();
    let db = made_store(&s);
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    mode(&db, 0o444).unwrap();
    mode(&s.path("store"), 0o555).unwrap();
    for args in reads("1", &s.path("out")) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let before = footprint(&db);
        ok(&s, &db, &args);
        assert_same(&before, &db, &format!("{args:?}"));
    }
    serve_reads(&s, &db, &pages("1"));
    mode(&s.path("store"), 0o755).unwrap();
}

/// Every reading command names `benchlab store upgrade` for a store of an
/// older schema and leaves it alone; `store upgrade` then upgrades it
/// once, and the reads work.
#[test]
fn an_old_store_names_the_upgrade_and_is_left_alone() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new();
    let db = v6_store(&s, "old");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    let command = format!("`benchlab --db {} store upgrade`", db.display());
    let before = footprint(&db);
    for args in reads("1", &s.path("out")) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = bl(&s, &db, &args);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {t}");
        assert!(
            t.contains(&command),
            "{args:?} does not name {command}: {t}"
        );
        assert!(!t.contains("panicked"), "{args:?}: {t}");
        assert_same(&before, &db, &format!("{args:?}"));
    }
    let mut kids = Kids(Vec::new());
    let refused = serve(&s, &db, &mut kids).expect_err("serve of an old store");
    assert!(refused.contains(&command), "serve: {refused}");
    assert_same(&before, &db, "serve");

    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let said = ok(&s, &db, &["store", "upgrade"]);
    assert!(said.contains("upgraded run(s) 1, 2, 3"), "{said}");
    let said = ok(&s, &db, &["store", "upgrade"]);
    assert!(said.contains("every run readable"), "{said}");
    let upgraded = footprint(&db);
    assert!(upgraded.bytes != before.bytes);
    let shown = ok(&s, &db, &["show", "1"]);
    assert!(shown.contains("64KiB"), "{shown}");
    assert_same(&upgraded, &db, "show after the upgrade");
}

/// A store whose schema is current but whose runs an older benchlab
/// stored (migrated by a writer, never resolved) is read as it is: the
/// list reads, and a run that lacks its reading pieces names the upgrade.
#[test]
fn runs_not_yet_upgraded_are_named_and_the_rest_reads() {
    let s = Scratch::new();
    let db = v6_store(&s, "half");
    // A writer's open migrates the schema and resolves nothing.
    drop(benchlab_store::Store::open(&db).expect("migrate"));
    let before = footprint(&db);
    let list = ok(&s, &db, &["list"]);
    assert_eq!(list.lines().count(), 3, "{list}");
    let out = bl(&s, &db, &["show", "1"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("run 1 was stored by an older benchlab"), "{t}");
    assert!(
        t.contains(&format!("`benchlab --db {} store upgrade`", db.display())),
        "{t}"
    );
    assert_same(&before, &db, "list and show");
}

/// A read-only loop mount of an ext4 image, unmounted when dropped.
struct Loop {
    dir: PathBuf,
}

impl Loop {
    fn mount_ro(image: &Path, dir: &Path) -> Loop {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-o", "loop,ro"])
            .arg(image)
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mount {} on {}: {}",
            image.display(),
            dir.display(),
            benchlab_testkit::said(&out)
        );
        Loop {
            dir: dir.to_path_buf(),
        }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

/// On a read-only mount: the current store reads (every command, serve
/// too), the old one is refused naming the upgrade, and `store upgrade`
/// says it cannot write there.
#[test]
fn a_read_only_mount_is_read_or_names_the_upgrade() {
    benchlab_testkit::require!(root, "mkfs.ext4");
    let _mounts = exclusive(&[Resource::Mounts]);
    let s = Scratch::new();
    let made = made_store(&s);
    let old = v6_store(&s, "old");
    // The image is filled when it is made (mke2fs -d), not through a
    // read-write mount first: a mount namespace another test's process
    // copied meanwhile (`ip netns exec` makes one) keeps that mount's
    // file system alive after its umount, and the read-only mount of the
    // same loop device was then refused ("would change RO state").
    let content = s.path("content");
    for (from, dir) in [(&made, "made"), (&old, "old")] {
        std::fs::create_dir_all(content.join(dir)).unwrap();
        std::fs::copy(from, content.join(dir).join("benchlab.db")).unwrap();
    }
    let image = s.path("fs.img");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let out = Command::new("mkfs.ext4")
        .args(["-q", "-F", "-d"])
        .arg(&content)
        .arg(&image)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mkfs.ext4: {}",
        benchlab_testkit::said(&out)
    );
    let ro = Loop::mount_ro(&image, &s.path("mnt"));
    let made = ro.dir.join("made/benchlab.db");
    for args in reads("1", &s.path("out")) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let before = footprint(&made);
        ok(&s, &made, &args);
        assert_same(&before, &made, &format!("{args:?}"));
    }
    serve_reads(&s, &made, &pages("1"));

    let old = ro.dir.join("old/benchlab.db");
    let command = format!("`benchlab --db {} store upgrade`", old.display());
    for args in [&["list"][..], &["show", "1"], &["compare", "1", "2"]] {
        let out = bl(&s, &old, args);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {t}");
        assert!(t.contains(&command), "{args:?}: {t}");
    }
    let out = bl(&s, &old, &["store", "upgrade"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("cannot be written here"), "{t}");
    drop(ro);
}
