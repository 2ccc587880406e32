//! The agent end: reads requests, runs workload sides on placed threads,
//! answers. It runs only what its registry holds.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use benchlab_core::placement::Placement;
use benchlab_core::{ClientCtx, Gate, Registry, ServerCtx, SideResult, WorkloadError};

use crate::frame::{read_frame, write_frame};
use crate::protocol::{Request, Response, State, PROTOCOL_VERSION};

/// How long a server side may take to bind and report its port.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);
/// Grace after setting the abort flag of a server that overran.
const ABORT_GRACE: Duration = Duration::from_secs(3);

enum ServerEvent {
    Ready(u16),
    Done(Result<SideResult, WorkloadError>),
}

/// What a gated client side tells the agent's main thread.
enum ClientEvent {
    /// Every client of this side is connected; the side waits at the gate.
    Arrived,
    /// The side finished (or failed before arriving).
    Done(Result<SideResult, WorkloadError>),
}

/// The gate of a client side behind the controller's barrier: `arrive`
/// tells the main thread, which answers `arrived` and reads `go`.
struct ChannelGate {
    events: mpsc::Sender<ClientEvent>,
    release: std::sync::Mutex<mpsc::Receiver<bool>>,
}

impl Gate for ChannelGate {
    fn arrive(&self) -> Result<(), WorkloadError> {
        let _ = self.events.send(ClientEvent::Arrived);
        let release = self.release.lock().map_err(|_| WorkloadError::Aborted)?;
        match release.recv() {
            Ok(true) => Ok(()),
            // Abandoned by the controller, or the agent is going away.
            Ok(false) | Err(_) => Err(WorkloadError::Aborted),
        }
    }
}

struct RunningServer {
    events: mpsc::Receiver<ServerEvent>,
    abort: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// The environment session of each controller session (at most one
/// each), by the thread that serves it: an agent that listens serves
/// several controller sessions at once (the hosts of one study that
/// share this machine, or two runs), each applying and reverting its
/// own. Global so that the stdin watchdog can revert them when the
/// controller vanishes.
type EnvSlot = Arc<std::sync::Mutex<Option<benchlab_env::Session>>>;
static ENV_SESSIONS: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<std::thread::ThreadId, EnvSlot>>,
> = std::sync::LazyLock::new(Default::default);

/// This thread's environment slot.
fn env_slot() -> EnvSlot {
    let mut all = ENV_SESSIONS.lock().unwrap_or_else(|p| p.into_inner());
    all.entry(std::thread::current().id()).or_default().clone()
}

/// Reverts a held environment session (controller gone, or the session
/// ended without `EnvRevert`): this thread's, or with `all` every
/// thread's. `try_lock`: if that session is in the middle of applying,
/// the journal is what undoes it.
fn revert_env_sessions(all: bool) {
    let slots: Vec<EnvSlot> = {
        let mut map = ENV_SESSIONS.lock().unwrap_or_else(|p| p.into_inner());
        if all {
            map.drain().map(|(_, s)| s).collect()
        } else {
            map.remove(&std::thread::current().id())
                .into_iter()
                .collect()
        }
    };
    for slot in slots {
        if let Ok(mut g) = slot.try_lock() {
            if let Some(mut s) = g.take() {
                s.revert();
            }
        }
    }
}

/// Reverts this controller session's environment.
fn revert_env_session() {
    revert_env_sessions(false);
}

fn env_request(req: Request) -> Response {
    let dir = benchlab_env::journal::journal_dir();
    let err = |message: String| Response::Error {
        message,
        skipped: false,
    };
    let slot = env_slot();
    let mut guard = match slot.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    match req {
        Request::EnvProbe => {
            // A run that has just died may hold its journals a moment
            // longer: its journals are then an earlier run's, not a live
            // one's.
            let names = |files: Vec<std::path::PathBuf>| {
                files.iter().map(|p| p.display().to_string()).collect()
            };
            let live = benchlab_env::journal::settle(&dir, benchlab_env::journal::DYING_GRACE);
            Response::EnvProbed {
                boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default(),
                journals: names(benchlab_env::journal::pending(&dir)),
                live: names(live),
            }
        }
        Request::EnvApply { spec } => {
            if guard.is_some() {
                return err("an environment is already applied in this session".into());
            }
            match benchlab_env::Session::apply(&spec, &dir) {
                Ok((session, changes)) => {
                    let shield_tasks = session.shield_tasks().map(str::to_string);
                    *guard = Some(session);
                    Response::EnvApplied {
                        changes,
                        shield_tasks,
                    }
                }
                Err(e) => err(e.to_string()),
            }
        }
        Request::EnvPoint { start } => match guard.as_mut() {
            None => err("no environment is applied".into()),
            Some(s) if start => match s.point_start() {
                Ok(()) => Response::EnvPointDone { load: None },
                Err(e) => err(e.to_string()),
            },
            Some(s) => Response::EnvPointDone {
                load: s.point_end(),
            },
        },
        Request::EnvRevert => Response::EnvReverted {
            changes: guard.take().map(|mut s| s.revert()).unwrap_or_default(),
        },
        Request::EnvRestore => match benchlab_env::restore_all(&dir) {
            Ok(changes) => Response::EnvReverted { changes },
            Err(e) => err(e.to_string()),
        },
        _ => err("not an environment request".into()),
    }
}

fn error_response(e: &WorkloadError) -> Response {
    Response::Error {
        message: e.to_string(),
        skipped: matches!(e, WorkloadError::Unsupported(_)),
    }
}

/// Serves one controller session over standard input and output.
///
/// A watchdog ends the process as soon as standard input is hung up (the
/// controller, or the `ssh` between us, went away), even while a workload
/// side is running: an agent never outlives its controller.
pub fn serve_stdio(registry: &Registry) -> io::Result<()> {
    std::thread::spawn(|| loop {
        let mut fds = libc::pollfd {
            fd: 0,
            events: 0,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut fds, 1, 500) };
        if n > 0 && fds.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            crate::service::stop_every();
            revert_env_sessions(true);
            std::process::exit(0);
        }
    });
    let stdin = io::stdin();
    let stdout = io::stdout();
    serve(registry, stdin.lock(), stdout.lock())
}

/// Serves one controller session over any byte pipe. Returns when the
/// controller says `Shutdown`, closes the pipe, or fails the handshake.
pub fn serve<R: Read, W: Write>(registry: &Registry, mut r: R, mut w: W) -> io::Result<()> {
    let mut state = State::Greeting;
    let mut server: Option<RunningServer> = None;
    // The system monitor this session runs, if any (stopped with it).
    let mut monitor: Option<benchlab_monitor::Monitor> = None;
    // The call-stack recorder this session runs, if any.
    let mut stacks: Option<benchlab_stacks::record::Recorder> = None;
    while let Some(req) = read_frame::<_, Request>(&mut r)? {
        let refuse = |state: State, what: &str| Response::Refused {
            reason: format!("`{what}` is not allowed in state {state:?}"),
            state,
        };
        let resp = match (state, req) {
            (State::Greeting, Request::Hello { protocol, benchlab }) => {
                if protocol != PROTOCOL_VERSION {
                    let resp = Response::Refused {
                        reason: format!(
                            "protocol version mismatch: controller speaks {protocol} (benchlab {benchlab}), this agent speaks {PROTOCOL_VERSION} (benchlab {})",
                            benchlab_core::VERSION
                        ),
                        state,
                    };
                    write_frame(&mut w, &resp)?;
                    return Ok(());
                }
                state = State::Idle;
                Response::Hello {
                    protocol: PROTOCOL_VERSION,
                    benchlab: benchlab_core::VERSION.to_string(),
                    pid: std::process::id(),
                }
            }
            (State::Greeting, _) => refuse(state, "anything before hello"),
            (_, Request::Hello { .. }) => refuse(state, "hello"),
            (_, Request::Shutdown) => {
                if let Some(s) = server.take() {
                    s.abort.store(true, Ordering::Relaxed);
                    let _ = s.thread.join();
                }
                crate::service::stop_all();
                revert_env_session();
                write_frame(&mut w, &Response::Bye)?;
                return Ok(());
            }
            // The services this agent holds are stopped first: their
            // journals are then finished, not left to the restore.
            (State::Idle, Request::EnvRestore) => {
                crate::service::stop_all();
                env_request(Request::EnvRestore)
            }
            (
                State::Idle,
                req @ (Request::ServiceStart { .. }
                | Request::ServiceStop { .. }
                | Request::ServiceCheck { .. }),
            ) => crate::service::handle(req),
            // Observing a service is allowed while this agent also serves.
            (_, req @ (Request::ServiceUsage { .. } | Request::ServiceAlive { .. })) => {
                crate::service::handle(req)
            }
            // Monitors run beside whatever else the session does.
            (
                _,
                Request::MonitorStart {
                    interval_ms,
                    measured_cpus,
                    expected_s,
                },
            ) => {
                if let Some(m) = monitor.take() {
                    let _ = m.stop();
                }
                let cpu = benchlab_monitor::housekeeping_cpu(
                    &measured_cpus,
                    benchlab_core::placement::online_cpus(),
                );
                let settings = benchlab_monitor::Settings {
                    interval_ms,
                    cpu,
                    expected_s,
                };
                match benchlab_monitor::Monitor::start(&settings) {
                    Ok(m) => {
                        monitor = Some(m);
                        Response::MonitorStarted { cpu }
                    }
                    Err(e) => Response::Error {
                        message: format!("monitor: {e}"),
                        skipped: false,
                    },
                }
            }
            (_, Request::MonitorStop) => match monitor.take().map(|m| m.stop()) {
                Some(Ok(series)) => Response::Monitored {
                    series: Box::new(series),
                },
                Some(Err(e)) => Response::Error {
                    message: format!("monitor: {e}"),
                    skipped: false,
                },
                None => Response::Error {
                    message: "no monitor runs in this session".into(),
                    skipped: false,
                },
            },
            // So do call-stack recorders.
            (
                _,
                req @ (Request::StacksCheck { .. }
                | Request::StacksStart { .. }
                | Request::StacksStop),
            ) => crate::stacks::handle(&mut stacks, req),
            (state, Request::ServiceStart { .. }) => refuse(state, "service_start"),
            (state, Request::ServiceCheck { .. }) => refuse(state, "service_check"),
            (state, Request::ServiceStop { .. }) => refuse(state, "service_stop"),
            (
                State::Idle,
                req @ (Request::EnvProbe
                | Request::EnvApply { .. }
                | Request::EnvPoint { .. }
                | Request::EnvRevert),
            ) => env_request(req),
            (state, Request::EnvProbe) => refuse(state, "env_probe"),
            (state, Request::EnvApply { .. }) => refuse(state, "env_apply"),
            (state, Request::EnvPoint { .. }) => refuse(state, "env_point"),
            (state, Request::EnvRevert) => refuse(state, "env_revert"),
            (state, Request::EnvRestore) => refuse(state, "env_restore"),
            (_, Request::Inventory) => Response::Inventory {
                inventory: serde_json::to_value(benchlab_inventory::collect())
                    .unwrap_or(serde_json::Value::Null),
            },
            (
                State::Idle,
                Request::Serve {
                    kind,
                    params,
                    placement,
                    bind,
                },
            ) => match registry.get(&kind) {
                None => Response::Error {
                    message: format!("this agent has no workload `{kind}`"),
                    skipped: true,
                },
                Some(wl) => {
                    let (tx, rx) = mpsc::channel();
                    let abort = Arc::new(AtomicBool::new(false));
                    let ctx = ServerCtx {
                        bind,
                        abort: abort.clone(),
                    };
                    let thread = std::thread::spawn(move || {
                        let result = placed(&placement).and_then(|()| {
                            let ready_tx = tx.clone();
                            wl.serve(&params, &ctx, &mut |port| {
                                let _ = ready_tx.send(ServerEvent::Ready(port));
                            })
                        });
                        let _ = tx.send(ServerEvent::Done(result));
                    });
                    match rx.recv_timeout(LISTEN_TIMEOUT) {
                        Ok(ServerEvent::Ready(port)) => {
                            server = Some(RunningServer {
                                events: rx,
                                abort,
                                thread,
                            });
                            state = State::Serving;
                            Response::Listening { port }
                        }
                        Ok(ServerEvent::Done(Err(e))) => {
                            let _ = thread.join();
                            error_response(&e)
                        }
                        Ok(ServerEvent::Done(Ok(_))) => {
                            let _ = thread.join();
                            Response::Error {
                                message: format!("{kind} server finished without listening"),
                                skipped: false,
                            }
                        }
                        Err(_) => {
                            abort.store(true, Ordering::Relaxed);
                            Response::Error {
                                message: format!(
                                    "{kind} server did not start listening within {}s",
                                    LISTEN_TIMEOUT.as_secs()
                                ),
                                skipped: false,
                            }
                        }
                    }
                }
            },
            (State::Serving, Request::Collect { timeout_ms }) => {
                let s = server.take().expect("serving state has a server");
                state = State::Idle;
                let got = match s.events.recv_timeout(Duration::from_millis(timeout_ms)) {
                    Ok(ev) => Some(ev),
                    Err(_) => {
                        s.abort.store(true, Ordering::Relaxed);
                        s.events.recv_timeout(ABORT_GRACE).ok();
                        None
                    }
                };
                match got {
                    Some(ServerEvent::Done(Ok(result))) => {
                        let _ = s.thread.join();
                        Response::Done {
                            result: Box::new(result),
                        }
                    }
                    Some(ServerEvent::Done(Err(e))) => {
                        let _ = s.thread.join();
                        error_response(&e)
                    }
                    _ => Response::Error {
                        message: format!(
                            "server side did not finish within {:.1}s of the client",
                            timeout_ms as f64 / 1000.0
                        ),
                        skipped: false,
                    },
                }
            }
            (
                State::Idle,
                Request::RunClient {
                    kind,
                    params,
                    placement,
                    server: addr,
                    repetition,
                    share,
                    gated,
                    service,
                    hosts,
                },
            ) => match registry.get(&kind) {
                None => Response::Error {
                    message: format!("this agent has no workload `{kind}`"),
                    skipped: true,
                },
                Some(wl) => {
                    let mut ctx =
                        ClientCtx::single(addr, repetition, Arc::new(AtomicBool::new(false)));
                    ctx.share = share;
                    ctx.service = service;
                    ctx.hosts = hosts;
                    let (events_tx, events) = mpsc::channel();
                    let (release_tx, release) = mpsc::channel();
                    if gated {
                        ctx.gate = Arc::new(ChannelGate {
                            events: events_tx.clone(),
                            release: std::sync::Mutex::new(release),
                        });
                    }
                    let panicked = format!("{kind} client panicked");
                    // A fresh thread, so that the placement applies to this
                    // side alone and the agent's own thread stays as it was.
                    let thread = std::thread::spawn(move || {
                        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            placed(&placement).and_then(|()| wl.run_client(&params, &ctx))
                        }))
                        .unwrap_or(Err(WorkloadError::Other(panicked)));
                        let _ = events_tx.send(ClientEvent::Done(result));
                    });
                    let result = match events.recv() {
                        Ok(ClientEvent::Arrived) => {
                            write_frame(&mut w, &Response::Arrived)?;
                            // The barrier: the next request is `go`.
                            match read_frame::<_, Request>(&mut r)? {
                                Some(Request::Go { abort }) => {
                                    let _ = release_tx.send(!abort);
                                }
                                other => {
                                    let _ = release_tx.send(false);
                                    let _ = thread.join();
                                    if matches!(other, Some(Request::Shutdown) | None) {
                                        if matches!(other, Some(Request::Shutdown)) {
                                            write_frame(&mut w, &Response::Bye)?;
                                        }
                                        revert_env_session();
                                        return Ok(());
                                    }
                                    write_frame(
                                        &mut w,
                                        &refuse(State::Idle, "anything but go at the barrier"),
                                    )?;
                                    continue;
                                }
                            }
                            match events.recv() {
                                Ok(ClientEvent::Done(r)) => r,
                                _ => Err(WorkloadError::Other(
                                    "client side arrived twice at the gate".into(),
                                )),
                            }
                        }
                        Ok(ClientEvent::Done(r)) => r,
                        Err(_) => Err(WorkloadError::Other("client side vanished".into())),
                    };
                    let _ = thread.join();
                    match result {
                        Ok(r) => Response::Done {
                            result: Box::new(r),
                        },
                        Err(e) => error_response(&e),
                    }
                }
            },
            (state, Request::Go { .. }) => refuse(state, "go"),
            (
                State::Idle,
                Request::Prepare {
                    kind,
                    params,
                    service,
                },
            ) => match registry.get(&kind) {
                None => Response::Error {
                    message: format!("this agent has no workload `{kind}`"),
                    skipped: true,
                },
                Some(wl) => match wl.prepare_service(&params, &service) {
                    Ok(paths) => Response::Prepared { paths },
                    Err(e) => error_response(&e),
                },
            },
            (State::Idle, Request::Unprepare { paths }) => {
                // Exactly what `prepare` reported creating; the workload
                // created each path whole, so each goes whole.
                let mut failed = Vec::new();
                for p in &paths {
                    let r = if p.is_dir() {
                        std::fs::remove_dir_all(p)
                    } else {
                        std::fs::remove_file(p)
                    };
                    match r {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => failed.push(format!("{}: {e}", p.display())),
                    }
                }
                if failed.is_empty() {
                    Response::Unprepared
                } else {
                    Response::Error {
                        message: format!("could not remove {}", failed.join("; ")),
                        skipped: false,
                    }
                }
            }
            (state, Request::Prepare { .. }) => refuse(state, "prepare"),
            (state, Request::Unprepare { .. }) => refuse(state, "unprepare"),
            (state, Request::Serve { .. }) => refuse(state, "serve"),
            (state, Request::Collect { .. }) => refuse(state, "collect"),
            (state, Request::RunClient { .. }) => refuse(state, "run_client"),
        };
        write_frame(&mut w, &resp)?;
    }
    if let Some(s) = server.take() {
        s.abort.store(true, Ordering::Relaxed);
        let _ = s.thread.join();
    }
    crate::service::stop_all();
    revert_env_session();
    Ok(())
}

/// Prepares a side's fresh thread: a descriptor table of its own
/// (`benchlab_core::placement::own_fd_table`: a shared table costs every
/// system call on a file or socket a reference count, 1.6 % of a UDP
/// ping-pong round trip), then the side's placement. The side talks to the
/// agent only through channels, so it needs none of the agent's
/// descriptors; threads it starts share its table (wl-net's timer thread
/// takes a copy of its own).
fn placed(p: &Placement) -> Result<(), WorkloadError> {
    benchlab_core::placement::own_fd_table(None);
    p.apply_to_current_thread().map_err(WorkloadError::Other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Whether `fd` is open in the calling thread's descriptor table.
    fn is_open(fd: i32) -> bool {
        // SAFETY: F_GETFD only reads the table.
        (unsafe { libc::fcntl(fd, libc::F_GETFD) }) >= 0
    }

    #[test]
    fn a_side_thread_gets_a_table_of_its_own() {
        let d = tempfile::tempdir().unwrap();
        let agents = std::fs::File::create(d.path().join("agent's")).unwrap();
        let fd = agents.as_raw_fd();
        let side = std::thread::spawn(move || {
            assert!(is_open(fd));
            placed(&Placement::default()).unwrap();
            // The agent's descriptor is gone from the side's table.
            is_open(fd)
        });
        assert!(
            !side.join().unwrap(),
            "the side's thread still sees the agent's descriptor {fd}"
        );
        assert!(is_open(fd), "the agent lost its own descriptor {fd}");
        drop(agents);
    }
}
