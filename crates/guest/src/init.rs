//! `benchlab guest-init`: process 1 of a guest once the early init has
//! switched to the overlay root. It mounts the guest's own /proc, /sys,
//! /dev, /dev/shm and /run (the host's are visible under the
//! overlay's lower layer otherwise), finds the control port, tells the
//! host it is up, and runs each channel's command (see [`crate::mux`]),
//! reaping every orphan as a process 1 must.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::mux::{read_frame, write_frame, Kind};

/// The name of the control port (`virtserialport,name=…`).
pub const PORT_NAME: &str = "benchlab.ctl";

/// Where the guest's agents keep their journals: guest memory, not the
/// host's journal directory that the overlay's lower layer shows.
pub const GUEST_STATE_DIR: &str = "/run/benchlab";

fn mount(src: &str, target: &str, fstype: &str, data: &str) -> Result<(), String> {
    let _ = std::fs::create_dir_all(target);
    let c = |s: &str| CString::new(s).expect("no NUL in mount arguments");
    let (src_c, target_c, fs_c, data_c) = (c(src), c(target), c(fstype), c(data));
    // SAFETY: mount(2) with valid NUL-terminated strings.
    let rc = unsafe {
        libc::mount(
            src_c.as_ptr(),
            target_c.as_ptr(),
            fs_c.as_ptr(),
            0,
            data_c.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(format!(
            "mount {fstype} on {target}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Exit statuses reaped by process 1's reaper, by pid.
type Reaped = Arc<(Mutex<HashMap<i32, i32>>, Condvar)>;

fn reaper(reaped: Reaped) {
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) on any child.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid <= 0 {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let code = if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        };
        let (lock, cv) = &*reaped;
        let mut m = lock.lock().expect("reaped");
        m.insert(pid, code);
        // Orphans' statuses are never asked for: keep the map small.
        if m.len() > 4096 {
            m.clear();
        }
        cv.notify_all();
    }
}

fn find_port() -> Option<String> {
    for e in std::fs::read_dir("/sys/class/virtio-ports").ok()?.flatten() {
        let name = std::fs::read_to_string(e.path().join("name")).unwrap_or_default();
        if name.trim() == PORT_NAME {
            return Some(format!("/dev/{}", e.file_name().to_string_lossy()));
        }
    }
    None
}

fn facts() -> serde_json::Value {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let mem_kib = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    serde_json::json!({
        "kernel": read("/proc/sys/kernel/osrelease"),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "mem_kib": mem_kib,
        "uptime_s": read("/proc/uptime").split_whitespace().next().and_then(|v| v.parse::<f64>().ok()),
    })
}

struct Channel {
    pgid: i32,
    stdin: Option<ChildStdin>,
}

/// Runs process 1 of a guest. Never returns (on a fatal error it powers
/// the guest off, which ends QEMU: `-no-reboot`).
pub fn run() -> ! {
    if let Err(e) = run_inner() {
        let _ = writeln!(std::io::stderr(), "benchlab guest-init: {e}");
    }
    // SAFETY: sync(2) and reboot(2); we are process 1 of a guest.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    std::process::exit(1)
}

fn run_inner() -> Result<(), String> {
    mount("proc", "/proc", "proc", "")?;
    mount("sysfs", "/sys", "sysfs", "")?;
    mount("devtmpfs", "/dev", "devtmpfs", "")?;
    mount(
        "devpts",
        "/dev/pts",
        "devpts",
        "gid=5,mode=620,ptmxmode=666",
    )?;
    mount("tmpfs", "/dev/shm", "tmpfs", "mode=1777")?;
    // /tmp is left to the overlay (writes land in guest memory): a
    // benchlab built under the host's /tmp (a fresh clone in a temporary
    // directory) must stay reachable at the path the host gives.
    mount("tmpfs", "/run", "tmpfs", "mode=755")?;
    // cgroup v2 where the kernel has it: services and placement use it.
    let _ = mount("cgroup2", "/sys/fs/cgroup", "cgroup2", "");
    std::env::set_var("BENCHLAB_STATE_DIR", GUEST_STATE_DIR);
    std::env::set_var(
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    );
    std::env::set_var("HOME", "/root");
    let reaped: Reaped = Arc::new((Mutex::new(HashMap::new()), Condvar::new()));
    {
        let r = reaped.clone();
        std::thread::spawn(move || reaper(r));
    }
    let path = {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(p) = find_port() {
                break p;
            }
            if Instant::now() >= until {
                return Err(format!("no virtio port named {PORT_NAME}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let port = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("open {path}: {e}"))?;
    let writer = Arc::new(Mutex::new(port.try_clone().map_err(|e| e.to_string())?));
    let ready = serde_json::to_vec(&facts()).expect("facts serialize");
    write_frame(&mut *writer.lock().expect("port"), Kind::Ready, 0, &ready)
        .map_err(|e| format!("write {path}: {e}"))?;
    serve(port, writer, reaped)
}

fn serve(mut port: File, writer: Arc<Mutex<File>>, reaped: Reaped) -> Result<(), String> {
    let mut channels: HashMap<u32, Channel> = HashMap::new();
    loop {
        let frame = match read_frame(&mut port) {
            Ok(Some(f)) => f,
            // The host side is not connected (a read then ends at once):
            // whatever ran for the last controller goes.
            Ok(None) | Err(_) => {
                for (_, c) in channels.drain() {
                    // SAFETY: kill(2) on a process group we started.
                    unsafe { libc::kill(-c.pgid, libc::SIGKILL) };
                }
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let ch = frame.channel;
        match frame.kind {
            Kind::Open => {
                let argv: Vec<String> = serde_json::from_slice(&frame.payload).unwrap_or_default();
                match open(ch, &argv, &writer, &reaped) {
                    Ok(c) => {
                        channels.insert(ch, c);
                    }
                    Err(e) => {
                        let w = &mut *writer.lock().expect("port");
                        let _ = write_frame(
                            w,
                            Kind::Stderr,
                            ch,
                            format!("guest-init: {e}\n").as_bytes(),
                        );
                        let _ = write_frame(w, Kind::Exit, ch, b"127");
                    }
                }
            }
            Kind::Data => {
                if let Some(stdin) = channels.get_mut(&ch).and_then(|c| c.stdin.as_mut()) {
                    let _ = stdin.write_all(&frame.payload);
                }
            }
            Kind::Eof => {
                if let Some(c) = channels.get_mut(&ch) {
                    c.stdin = None;
                }
            }
            Kind::Close => {
                if let Some(c) = channels.remove(&ch) {
                    // SAFETY: kill(2) on a process group we started.
                    unsafe { libc::kill(-c.pgid, libc::SIGKILL) };
                }
            }
            _ => {}
        }
    }
}

fn open(
    ch: u32,
    argv: &[String],
    writer: &Arc<Mutex<File>>,
    reaped: &Reaped,
) -> Result<Channel, String> {
    let (first, rest) = argv.split_first().ok_or("empty command")?;
    let mut child = Command::new(first)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {first}: {e}"))?;
    let pid = child.id() as i32;
    let stdin = child.stdin.take();
    let pump = |mut from: Box<dyn Read + Send>, kind: Kind| {
        let w = writer.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if write_frame(&mut *w.lock().expect("port"), kind, ch, &buf[..n]).is_err()
                        {
                            break;
                        }
                    }
                }
            }
        })
    };
    let out = pump(Box::new(child.stdout.take().expect("piped")), Kind::Data);
    let err = pump(Box::new(child.stderr.take().expect("piped")), Kind::Stderr);
    // The child is reaped by the reaper thread, not by `Child::wait`.
    std::mem::forget(child);
    let (w, r) = (writer.clone(), reaped.clone());
    std::thread::spawn(move || {
        let _ = out.join();
        let _ = err.join();
        let (lock, cv) = &*r;
        let until = Instant::now() + Duration::from_secs(5);
        let mut m = lock.lock().expect("reaped");
        let code = loop {
            if let Some(c) = m.remove(&pid) {
                break c;
            }
            let now = Instant::now();
            if now >= until {
                break 1;
            }
            m = cv.wait_timeout(m, until - now).expect("reaped").0;
        };
        drop(m);
        let _ = write_frame(
            &mut *w.lock().expect("port"),
            Kind::Exit,
            ch,
            code.to_string().as_bytes(),
        );
    });
    Ok(Channel { pgid: pid, stdin })
}
