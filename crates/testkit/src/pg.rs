//! A real PostgreSQL server for tests: Debian's PostgreSQL 15, made with
//! `initdb` in a temporary directory, listening on a Unix socket only (no
//! TCP port), and stopped when the last test that uses it is done — also
//! when a test panics, since the handle's `Drop` runs on unwinding.
//!
//! `initdb` refuses to run as root, so as root the cluster and the server
//! run as the `postgres` system user (the temporary directory is made
//! theirs); as any other user they run as that user.
//!
//! ```no_run
//! #[test]
//! fn needs_postgres() {
//!     let pg = match benchlab_testkit::pg::shared() {
//!         Ok(pg) => pg,
//!         Err(what) => return benchlab_testkit::missing(what),
//!     };
//!     let url = pg.create_database("needs_postgres");
//!     // … open `url` …
//! #   let _ = url;
//! }
//! ```

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Where Debian's PostgreSQL 15 server programs are (package
/// postgresql-15); `BENCHLAB_PG_BIN` names another directory.
pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// The superuser the test cluster is made with.
pub const SUPERUSER: &str = "benchlab";

/// A role with a password (`scram-sha-256` over the socket), for tests of
/// what a password may and may not reach.
pub const PASSWORD_USER: &str = "benchlab_pw";

/// A running test server.
pub struct PgServer {
    bin: PathBuf,
    dir: PathBuf,
    owner: Option<(u32, u32)>,
}

static SERIAL: AtomicUsize = AtomicUsize::new(0);

/// What is missing for a PostgreSQL test, to hand to [`crate::missing`].
pub type Missing = String;

impl PgServer {
    /// Makes a cluster and starts its server. `Err` names what is missing
    /// (the server programs, the `postgres` user); a server that is there
    /// but does not start panics with its log.
    pub fn start() -> Result<PgServer, Missing> {
        let bin = std::env::var_os("BENCHLAB_PG_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(PG_BIN));
        for p in ["initdb", "pg_ctl", "postgres", "psql"] {
            if !bin.join(p).is_file() {
                return Err(format!(
                    "the PostgreSQL 15 server ({}; package postgresql-15)",
                    bin.join(p).display()
                ));
            }
        }
        let owner = if crate::is_root() {
            Some(user_ids("postgres").ok_or("the `postgres` system user (package postgresql)")?)
        } else {
            None
        };
        let dir = std::env::temp_dir().join(format!(
            "benchlab-pg-{}-{}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        ));
        let server = PgServer { bin, dir, owner };
        std::fs::create_dir_all(server.dir.join("sock")).expect("make the test server's directory");
        // The socket trusts every role but one: only the owner may reach it.
        std::fs::set_permissions(
            &server.dir,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .expect("chmod the test server's directory");
        if let Some((uid, gid)) = owner {
            for d in [server.dir.clone(), server.dir.join("sock")] {
                chown(&d, uid, gid);
            }
        }
        server.make_cluster();
        server.pg_ctl(&["start", "-w", "-t", "60", "-l"], true);
        server.psql(
            "postgres",
            &format!(
                "CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{}'",
                password()
            ),
        );
        Ok(server)
    }

    fn make_cluster(&self) {
        let out = self
            .as_owner(self.bin.join("initdb"))
            .arg("-D")
            .arg(self.data())
            .args([
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--no-sync",
                "--no-instructions",
            ])
            .args(["--locale=C", "--encoding=UTF8"])
            .output()
            .expect("run initdb");
        check(&out, "initdb");
        // The password role must give its password over the socket; every
        // other role is trusted (the socket is reachable by this machine's
        // users only, and the directory by its owner only).
        std::fs::write(
            self.data().join("pg_hba.conf"),
            format!("local all {PASSWORD_USER} scram-sha-256\nlocal all all trust\n"),
        )
        .expect("write pg_hba.conf");
        // No TCP at all: the socket in our directory is the only way in.
        // Durability buys a test nothing: fsync off. No huge pages: with
        // PostgreSQL's default (`try`) a server started while a guest test
        // holds the machine's huge page pool took pages from it, and the
        // guest's QEMU could not map its memory (a CI run).
        let conf = format!(
            "\nlisten_addresses = ''\nunix_socket_directories = '{}'\nfsync = off\nfull_page_writes = off\nsynchronous_commit = off\nmax_connections = 50\nhuge_pages = off\n",
            self.socket_dir().display()
        );
        let mut text = std::fs::read_to_string(self.data().join("postgresql.conf"))
            .expect("read postgresql.conf");
        text.push_str(&conf);
        std::fs::write(self.data().join("postgresql.conf"), text).expect("write postgresql.conf");
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The directory of the server's socket.
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.join("sock")
    }

    /// The server's log file.
    pub fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// A server program, run as the cluster's owner, from its directory.
    fn as_owner(&self, program: PathBuf) -> Command {
        let mut c = Command::new(program);
        c.current_dir(&self.dir);
        if let Some((uid, gid)) = self.owner {
            c.uid(uid).gid(gid);
        }
        c
    }

    fn pg_ctl(&self, args: &[&str], log: bool) -> Output {
        let mut c = self.as_owner(self.bin.join("pg_ctl"));
        c.arg("-D").arg(self.data()).args(args);
        if log {
            c.arg(self.log());
        }
        let out = c.output().expect("run pg_ctl");
        if !out.status.success() {
            panic!(
                "pg_ctl {args:?} failed: {}\n{}\nserver log:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(self.log()).unwrap_or_default()
            );
        }
        out
    }

    /// A URL for `database` as the trusted superuser, over the socket.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres:///{database}?host={}&user={SUPERUSER}",
            self.socket_dir().display()
        )
    }

    /// A URL for `database` as [`PASSWORD_USER`], its password in the URL.
    pub fn password_url(&self, database: &str) -> String {
        format!(
            "postgresql://{PASSWORD_USER}:{}@/{database}?host={}",
            password(),
            self.socket_dir().display()
        )
    }

    /// Creates a database (owned by [`PASSWORD_USER`], so both URLs can
    /// write it) and returns its [`PgServer::url`].
    pub fn create_database(&self, name: &str) -> String {
        self.psql(
            "postgres",
            &format!("CREATE DATABASE {name} OWNER {PASSWORD_USER}"),
        );
        self.url(name)
    }

    /// Runs SQL with `psql` as the superuser and returns its unaligned,
    /// tuples-only output.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .arg("-h")
            .arg(self.socket_dir())
            .args([
                "-U",
                SUPERUSER,
                "-d",
                database,
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ])
            .output()
            .expect("run psql");
        check(&out, &format!("psql {sql:?}"));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A plain-text dump of a database (`pg_dump`), to search it.
    pub fn dump(&self, database: &str) -> String {
        let out = Command::new(self.bin.join("pg_dump"))
            .arg("-h")
            .arg(self.socket_dir())
            .args(["-U", SUPERUSER, "-d", database])
            .output()
            .expect("run pg_dump");
        check(&out, "pg_dump");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        // Stop before removing: a server whose directory vanished would
        // linger. `fast` ends the open sessions at once.
        let _ = self
            .as_owner(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.data())
            .args(["stop", "-m", "fast", "-w", "-t", "30"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The password of [`PASSWORD_USER`]: made per process, so that a test
/// searching output and databases for it cannot find it by accident.
pub fn password() -> String {
    format!("pw-{}-secret", std::process::id())
}

/// A handle on the server shared by the tests of one test binary: the
/// first handle starts it, the last one dropped stops it.
pub struct Shared(Arc<PgServer>);

impl std::ops::Deref for Shared {
    type Target = PgServer;
    fn deref(&self) -> &PgServer {
        &self.0
    }
}

static SHARED: Mutex<(usize, Option<Arc<PgServer>>)> = Mutex::new((0, None));

/// The shared server (started on first use). Tests in one binary run in
/// parallel threads; a server per test would cost an `initdb` (about two
/// seconds here) each.
pub fn shared() -> Result<Shared, Missing> {
    let mut s = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if s.1.is_none() {
        s.1 = Some(Arc::new(PgServer::start()?));
    }
    s.0 += 1;
    Ok(Shared(s.1.clone().expect("just started")))
}

impl Drop for Shared {
    fn drop(&mut self) {
        let mut s = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        s.0 -= 1;
        if s.0 == 0 {
            // The last user: stop the server (its Drop) once the other
            // clones of the Arc are gone, which is now.
            s.1 = None;
        }
    }
}

fn check(out: &Output, what: &str) {
    if !out.status.success() {
        panic!(
            "{what} failed with {}:\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn user_ids(name: &str) -> Option<(u32, u32)> {
    let name = CString::new(name).ok()?;
    // SAFETY: getpwnam returns a pointer into static storage or null; the
    // fields are read at once, before any other call could overwrite it.
    unsafe {
        let pw = libc::getpwnam(name.as_ptr());
        if pw.is_null() {
            None
        } else {
            Some(((*pw).pw_uid, (*pw).pw_gid))
        }
    }
}

fn chown(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
}
