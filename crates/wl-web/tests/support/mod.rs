//! Real web servers for the tests: Debian's nginx and apache2, each started
//! by the test as a plain process from a configuration written into a
//! temporary directory (every path the server writes lies inside it),
//! listening on 127.0.0.1 and a free port, and killed when the guard drops.
//! Their access logs carry `status bytes_sent path` per request, the
//! independent count the tests check the generator against.

#![allow(dead_code)]

use std::fs;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Nginx,
    Apache2,
}

impl Kind {
    fn binary(self) -> &'static str {
        match self {
            Kind::Nginx => "/usr/sbin/nginx",
            Kind::Apache2 => "/usr/sbin/apache2",
        }
    }
}

/// A running server and its scratch directory.
pub struct Server {
    pub kind: Kind,
    pub addr: SocketAddr,
    pub docroot: PathBuf,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

/// One access-log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub status: u16,
    pub bytes_sent: u64,
    pub path: String,
}

/// Serializes the tests that load a server: run side by side on a small
/// machine they would starve each other's generators, and the open-loop
/// rate check measures the generator keeping its schedule.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A failed test poisons the lock; the next one still runs alone.
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the server is missing: under CI that fails the test naming the
/// package (the set-up, `scripts/install-servers.sh`, provides it);
/// elsewhere the test is recorded as skipped, never as a pass.
pub fn missing(kind: Kind) -> bool {
    if Path::new(kind.binary()).exists() {
        return false;
    }
    benchlab_testkit::missing(format!(
        "{} (apt-get install nginx apache2, or scripts/install-servers.sh)",
        kind.binary()
    ));
    true
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Server {
    /// Writes the configuration and starts the server; returns once it
    /// accepts connections.
    pub fn start(kind: Kind) -> Server {
        let dir = tempfile::tempdir().unwrap();
        // apache2's workers run as www-data and must reach the files.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let d = dir.path();
        let docroot = d.join("www");
        fs::create_dir(&docroot).unwrap();
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut cmd = match kind {
            Kind::Nginx => {
                for t in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
                    fs::create_dir(d.join(t)).unwrap();
                }
                let conf = format!(
                    "daemon off;\nmaster_process on;\nuser root;\nworker_processes 2;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
                     events {{ worker_connections 4096; }}\n\
                     http {{\n  log_format bl '$status $bytes_sent $request_uri';\n  access_log {d}/access.log bl;\n\
                       client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n\
                       uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
                       sendfile on;\n  tcp_nopush on;\n  keepalive_requests 1000000;\n  default_type application/octet-stream;\n\
                       server {{ listen 127.0.0.1:{port}; root {www}; }}\n}}\n",
                    d = d.display(),
                    www = docroot.display(),
                );
                fs::write(d.join("nginx.conf"), conf).unwrap();
                let mut c = Command::new(kind.binary());
                c.arg("-c")
                    .arg(d.join("nginx.conf"))
                    .arg("-p")
                    .arg(format!("{}/", d.display()))
                    .arg("-e")
                    .arg(d.join("error.log"));
                c
            }
            Kind::Apache2 => {
                let m = "/usr/lib/apache2/modules";
                let conf = format!(
                    "ServerRoot \"{d}\"\nServerName localhost\nListen 127.0.0.1:{port}\n\
                     LoadModule mpm_event_module {m}/mod_mpm_event.so\n\
                     LoadModule authz_core_module {m}/mod_authz_core.so\n\
                     LoadModule mime_module {m}/mod_mime.so\n\
                     User www-data\nGroup www-data\n\
                     PidFile {d}/apache2.pid\nMutex file:{d} default\nDefaultRuntimeDir {d}\nErrorLog {d}/error.log\n\
                     TypesConfig /etc/mime.types\n\
                     KeepAlive On\nMaxKeepAliveRequests 0\nEnableSendfile On\n\
                     ServerLimit 16\nThreadsPerChild 64\nMaxRequestWorkers 1024\n\
                     LogFormat \"%>s %O %U\" bl\nCustomLog {d}/access.log bl\n\
                     DocumentRoot \"{www}\"\n<Directory \"{www}\">\n  Require all granted\n</Directory>\n",
                    d = d.display(),
                    www = docroot.display(),
                );
                fs::write(d.join("apache2.conf"), conf).unwrap();
                let mut c = Command::new(kind.binary());
                c.arg("-f").arg(d.join("apache2.conf")).arg("-DFOREGROUND");
                c
            }
        };
        // Its own process group, so the stop reaches every worker.
        use std::os::unix::process::CommandExt;
        cmd.process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let child = cmd.spawn().expect("start the server");
        let mut s = Server {
            kind,
            addr,
            docroot,
            dir,
            child: Some(child),
        };
        s.wait_ready();
        s
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                let log = fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default();
                panic!("{:?} exited at start ({st}): {log}", self.kind);
            }
            assert!(
                Instant::now() < deadline,
                "{:?} did not listen on {}",
                self.kind,
                self.addr
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server (SIGTERM to its process group, then SIGKILL) and
    /// waits for it, so its logs are complete.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pgid = child.id() as i32;
            // SAFETY: signalling the process group we created.
            unsafe { libc::kill(-pgid, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().unwrap().is_none() {
                if Instant::now() > deadline {
                    // SAFETY: as above.
                    unsafe { libc::kill(-pgid, libc::SIGKILL) };
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // Workers outlive a SIGTERMed apache2 parent for a moment.
            // SAFETY: as above; ESRCH when all are gone.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }

    /// The access log, parsed (after [`Server::stop`]).
    pub fn access_log(&self) -> Vec<LogLine> {
        let text = fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        text.lines()
            .map(|l| {
                let mut w = l.split(' ');
                let status = w.next().unwrap().parse().unwrap();
                let bytes_sent = w.next().unwrap().parse().unwrap();
                let path = w.next().unwrap_or("").to_string();
                LogLine {
                    status,
                    bytes_sent,
                    path,
                }
            })
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
