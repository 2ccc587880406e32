//! The controller end: an agent in a child process, reached through its
//! standard input and output.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::frame::{read_frame, write_frame};
use crate::protocol::{Request, Response, PROTOCOL_VERSION};

/// How many lines of an agent's standard error are kept for error reports.
const STDERR_LINES: usize = 20;
/// How often a waiting controller looks at its interrupt flag.
const POLL: Duration = Duration::from_millis(50);

/// Errors talking to an agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The agent could not be started.
    #[error("cannot start agent `{name}`: {source}")]
    Spawn {
        /// Agent name.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// The agent refused the handshake or a request.
    #[error("agent `{name}` refused: {reason}")]
    Refused {
        /// Agent name.
        name: String,
        /// Its reason.
        reason: String,
    },
    /// The agent died or its pipe broke.
    #[error("agent `{name}` stopped unexpectedly{detail}")]
    Died {
        /// Agent name.
        name: String,
        /// Exit status and last lines of its standard error.
        detail: String,
    },
    /// No answer in time.
    #[error("agent `{name}` did not answer within {seconds:.1}s")]
    Timeout {
        /// Agent name.
        name: String,
        /// The limit.
        seconds: f64,
    },
    /// The controller was interrupted while waiting.
    #[error("interrupted")]
    Interrupted,
}

/// A running agent.
pub struct AgentHandle {
    name: String,
    child: Child,
    stdin: ChildStdin,
    responses: mpsc::Receiver<std::io::Result<Option<Response>>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// The agent's pid as it reported it.
    pub pid: u32,
}

impl AgentHandle {
    /// Starts `exe agent --stdio` as a child and shakes hands.
    ///
    /// The child gets its own process group, so a Ctrl-C at the terminal
    /// reaches only the controller, which then stops the agents in order;
    /// and `PR_SET_PDEATHSIG`, so that it dies with the controller even if
    /// the controller is killed outright.
    pub fn spawn_local(exe: &Path, name: &str) -> Result<AgentHandle, AgentError> {
        let mut cmd = Command::new(exe);
        cmd.args(["agent", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|source| AgentError::Spawn {
            name: name.to_string(),
            source,
        })?;
        let stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = child.stdout.take().expect("piped stdout");
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let (tx, responses) = mpsc::channel();
        std::thread::spawn(move || loop {
            let msg = read_frame::<_, Response>(&mut stdout);
            let end = !matches!(msg, Ok(Some(_)));
            if tx.send(msg).is_err() || end {
                break;
            }
        });
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let keep = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
                let mut q = keep.lock().expect("stderr buffer");
                if q.len() == STDERR_LINES {
                    q.pop_front();
                }
                q.push_back(line);
            }
        });
        let mut agent = AgentHandle {
            name: name.to_string(),
            child,
            stdin,
            responses,
            stderr,
            pid: 0,
        };
        let hello = Request::Hello {
            protocol: PROTOCOL_VERSION,
            benchlab: benchlab_core::VERSION.to_string(),
        };
        match agent.request(&hello, Duration::from_secs(30), &AtomicBool::new(false))? {
            Response::Hello { pid, .. } => {
                agent.pid = pid;
                Ok(agent)
            }
            Response::Refused { reason, .. } => Err(AgentError::Refused {
                name: name.to_string(),
                reason,
            }),
            other => Err(AgentError::Refused {
                name: name.to_string(),
                reason: format!("unexpected answer to hello: {other:?}"),
            }),
        }
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sends a request and waits for its answer, at most `timeout`, giving
    /// up early when `interrupt` is set.
    pub fn request(
        &mut self,
        req: &Request,
        timeout: Duration,
        interrupt: &AtomicBool,
    ) -> Result<Response, AgentError> {
        if write_frame(&mut self.stdin, req).is_err() {
            return Err(self.died());
        }
        let deadline = Instant::now() + timeout;
        loop {
            if interrupt.load(Ordering::Relaxed) {
                return Err(AgentError::Interrupted);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(AgentError::Timeout {
                    name: self.name.clone(),
                    seconds: timeout.as_secs_f64(),
                });
            }
            match self.responses.recv_timeout(left.min(POLL)) {
                Ok(Ok(Some(resp))) => return Ok(resp),
                Ok(_) | Err(RecvTimeoutError::Disconnected) => return Err(self.died()),
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    fn died(&mut self) -> AgentError {
        // Give the stderr reader a moment to collect the last words.
        std::thread::sleep(Duration::from_millis(50));
        let status = match self.child.try_wait() {
            Ok(Some(s)) => format!(" ({s})"),
            _ => String::new(),
        };
        let lines: Vec<String> = self
            .stderr
            .lock()
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default();
        let detail = if lines.is_empty() {
            status
        } else {
            format!("{status}: {}", lines.join(" | "))
        };
        AgentError::Died {
            name: self.name.clone(),
            detail,
        }
    }

    /// Asks the agent to exit and waits a moment; kills it if it does not.
    pub fn shutdown(mut self) {
        let _ = self.request(
            &Request::Shutdown,
            Duration::from_secs(5),
            &AtomicBool::new(false),
        );
        self.kill();
    }

    /// Kills the agent and reaps it.
    pub fn kill(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the agent at once (the point it runs is abandoned).
    pub fn kill_now(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for AgentHandle {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
