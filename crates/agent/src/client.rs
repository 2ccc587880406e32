//! The controller end: an agent in a child process, reached through its
//! standard input and output.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::channel::SecureStream;
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
    child: Option<Child>,
    /// For agents over TCP: a handle to shut the connection down, which
    /// ends the agent's session (dropping our writer alone would not, as
    /// the reader thread holds the socket open too).
    tcp: Option<TcpStream>,
    stdin: Box<dyn Write + Send>,
    responses: mpsc::Receiver<std::io::Result<Option<Response>>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// The agent's pid as it reported it.
    pub pid: u32,
    /// The agent's benchlab version as it reported it.
    pub version: String,
}

impl AgentHandle {
    /// Starts a command that ends in `benchlab agent --stdio` (directly, under
    /// `ip netns exec`, or through `ssh`) and shakes hands with it.
    ///
    /// The child gets its own process group, so a Ctrl-C at the terminal
    /// reaches only the controller, which then stops the agents in order;
    /// and `PR_SET_PDEATHSIG`, so that it dies with the controller even if
    /// the controller is killed outright (an `ssh` child's death closes the
    /// remote agent's standard input, which ends it too).
    pub fn spawn(mut cmd: Command, name: &str) -> Result<AgentHandle, AgentError> {
        cmd.stdin(Stdio::piped())
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
        let agent = AgentHandle {
            name: name.to_string(),
            child: Some(child),
            tcp: None,
            stdin: Box::new(stdin),
            responses,
            stderr,
            pid: 0,
            version: String::new(),
        };
        agent.handshake()
    }

    /// An agent reached over an authenticated TCP connection to
    /// `benchlab agent --listen` (see [`crate::listen::connect`]).
    pub fn over_tcp(stream: SecureStream, name: &str) -> Result<AgentHandle, AgentError> {
        let io = |source| AgentError::Spawn {
            name: name.to_string(),
            source,
        };
        let closer = stream.tcp().try_clone().map_err(io)?;
        // Responses are verified before they are parsed, requests
        // encrypted when `write_frame` flushes them (crate::channel).
        let (mut reader, stream) = stream.into_halves();
        let (tx, responses) = mpsc::channel();
        std::thread::spawn(move || loop {
            let msg = read_frame::<_, Response>(&mut reader);
            let end = !matches!(msg, Ok(Some(_)));
            if tx.send(msg).is_err() || end {
                break;
            }
        });
        let agent = AgentHandle {
            name: name.to_string(),
            child: None,
            tcp: Some(closer),
            stdin: Box::new(stream),
            responses,
            stderr: Arc::new(Mutex::new(VecDeque::new())),
            pid: 0,
            version: String::new(),
        };
        agent.handshake()
    }

    fn handshake(mut self) -> Result<AgentHandle, AgentError> {
        let name = self.name.clone();
        let hello = Request::Hello {
            protocol: PROTOCOL_VERSION,
            benchlab: benchlab_core::VERSION.to_string(),
        };
        match self.request(&hello, Duration::from_secs(30), &AtomicBool::new(false))? {
            Response::Hello { pid, benchlab, .. } => {
                self.pid = pid;
                self.version = benchlab;
                Ok(self)
            }
            Response::Refused { reason, .. } => Err(AgentError::Refused { name, reason }),
            other => Err(AgentError::Refused {
                name,
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
                Ok(Err(e)) => {
                    let mut err = self.died();
                    if let AgentError::Died { detail, .. } = &mut err {
                        detail.push_str(&format!(" (reading its answer: {e})"));
                    }
                    return Err(err);
                }
                Ok(Ok(None)) | Err(RecvTimeoutError::Disconnected) => return Err(self.died()),
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    fn died(&mut self) -> AgentError {
        // Give the stderr reader a moment to collect the last words.
        std::thread::sleep(Duration::from_millis(50));
        let status = match self.child.as_mut().map(|c| c.try_wait()) {
            Some(Ok(Some(s))) => format!(" ({s})"),
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

    /// Waits a moment for the agent to exit, then kills and reaps it.
    pub fn kill(&mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Kills the agent at once (the point it runs is abandoned). An agent
    /// reached over TCP is disconnected instead: it then ends its session.
    pub fn kill_now(&mut self) {
        match self.child.as_mut() {
            Some(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            None => {
                if let Some(s) = &self.tcp {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
            }
        }
    }
}

impl Drop for AgentHandle {
    fn drop(&mut self) {
        if let Some(s) = &self.tcp {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        if let Some(child) = self.child.as_mut() {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
