//! Managed services through the agent: the agent end that starts, holds,
//! observes and stops the services of its host, and the controller's
//! typed calls for them.
//!
//! An agent holds its services until `service_stop`; it stops every one
//! a session started when that session ends (`shutdown`, the pipe
//! closing) and before its `env_restore`, and every one it holds when its
//! input hangs up. A listening agent serves several controllers' sessions
//! at once, each on its own thread: a session sees, stops and ends only
//! its own services. A SIGKILLed agent leaves them
//! to the restore journal: `benchlab restore` kills their process groups
//! and removes their scratch directories.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::Duration;

use benchlab_service::{
    Liveness, Service, ServiceDescription, ServicePlan, ServiceUsage, StartOptions, StopReport,
};

use crate::client::{AgentError, AgentHandle};
use crate::protocol::{Request, Response};

/// The services this agent holds, each with the session (the thread that
/// serves it) that started it. Global so that the input watchdog can stop
/// them when the controller vanishes.
static SERVICES: Mutex<Vec<(ThreadId, Service)>> = Mutex::new(Vec::new());

/// Held for the whole of a service request and of a stop of them all
/// (always taken before `SERVICES`): the watchdog, which ends the process
/// once it has stopped the services, then never exits in the middle of a
/// start or a stop the main thread is making — which would leave a server
/// running, or half a scratch directory, to the journal.
static BUSY: Mutex<()> = Mutex::new(());

fn busy() -> std::sync::MutexGuard<'static, ()> {
    match BUSY.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn error(message: String) -> Response {
    Response::Error {
        message,
        skipped: false,
    }
}

fn services() -> std::sync::MutexGuard<'static, Vec<(ThreadId, Service)>> {
    match SERVICES.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Whether an entry is this session's.
fn mine(entry: &(ThreadId, Service)) -> bool {
    entry.0 == std::thread::current().id()
}

/// The position of this session's service `name`.
fn position(all: &[(ThreadId, Service)], name: &str) -> Option<usize> {
    all.iter().position(|e| mine(e) && e.1.name() == name)
}

/// Answers a service request.
pub(crate) fn handle(req: Request) -> Response {
    let _busy = busy();
    match req {
        Request::ServiceStart {
            plan,
            scratch_base,
            secrets,
        } => {
            let name = plan.spec.name.clone();
            // Agent-wide: two services of one name on a host would share
            // their scratch and log names.
            if services().iter().any(|(_, s)| s.name() == name) {
                return error(format!(
                    "service `{name}` already runs on this agent: stop it first"
                ));
            }
            let mut opts = StartOptions::new(scratch_base.map(PathBuf::from));
            opts.secrets = secrets;
            // Not under the lock: a start waits for its probe, and the
            // watchdog must be able to stop the others meanwhile.
            match Service::start(&plan, &opts) {
                Ok(s) => {
                    let description = Box::new(s.description().clone());
                    let address = s.address();
                    services().push((std::thread::current().id(), s));
                    Response::ServiceStarted {
                        description,
                        address,
                    }
                }
                Err(e) => error(e.to_string()),
            }
        }
        Request::ServiceCheck {
            plan,
            scratch_base,
            secrets,
        } => {
            let mut opts = StartOptions::new(scratch_base.map(PathBuf::from));
            opts.secrets = secrets;
            match Service::check(&plan, &opts) {
                Ok(()) => Response::ServiceChecked,
                Err(e) => error(e.to_string()),
            }
        }
        Request::ServiceUsage { name } => {
            let g = services();
            match position(&g, &name) {
                Some(i) => Response::ServiceUsage {
                    usage: g[i].1.usage(),
                },
                None => not_running(&name),
            }
        }
        Request::ServiceAlive { name } => {
            let mut g = services();
            match position(&g, &name).map(|i| &mut g[i].1) {
                Some(s) => match s.check_alive() {
                    Liveness::Alive => Response::ServiceAlive,
                    Liveness::Died { reason, log } => Response::ServiceDied { reason, log },
                },
                None => not_running(&name),
            }
        }
        Request::ServiceStop { name } => {
            let held = {
                let mut g = services();
                position(&g, &name).map(|i| g.remove(i).1)
            };
            match held {
                Some(s) => match s.stop() {
                    Ok(report) => Response::ServiceStopped { report },
                    Err(e) => error(e.to_string()),
                },
                None => not_running(&name),
            }
        }
        _ => error("not a service request".into()),
    }
}

fn not_running(name: &str) -> Response {
    error(format!("no service `{name}` runs on this agent"))
}

/// Stops every service this session started (it ends, or restores its
/// environment). Waits for a service request in progress to finish first
/// (bounded by the service's start or stop limits). Failures are left to
/// the journal, which keeps what could not be undone.
pub(crate) fn stop_all() {
    stop_where(mine);
}

/// Stops every service this agent holds, whichever session started it
/// (the agent's input hung up: it is about to exit).
pub(crate) fn stop_every() {
    stop_where(|_| true);
}

fn stop_where(pick: impl Fn(&(ThreadId, Service)) -> bool) {
    let _busy = busy();
    let held: Vec<Service> = {
        let mut g = services();
        let (picked, kept) = std::mem::take(&mut *g).into_iter().partition(|e| pick(e));
        *g = kept;
        picked.into_iter().map(|(_, s)| s).collect::<Vec<_>>()
    };
    for s in held {
        let _ = s.stop();
    }
}

/// Errors of the controller's service calls.
#[derive(Debug, thiserror::Error)]
pub enum ServiceCallError {
    /// Talking to the agent failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The agent could not do it (the message names the service and why:
    /// a bad input, a server that did not start, …).
    #[error("agent `{agent}`: {message}")]
    Failed {
        /// The agent's name.
        agent: String,
        /// Why.
        message: String,
    },
}

/// A service the agent started.
#[derive(Debug, Clone, PartialEq)]
pub struct StartedService {
    /// What the appendix records of it.
    pub description: ServiceDescription,
    /// Where clients reach it.
    pub address: SocketAddr,
}

/// How long a quick service request (usage, liveness) may take.
const QUICK: Duration = Duration::from_secs(30);
/// Beyond a service's own start and stop limits, what the agent may need
/// for its checks, `nginx -v` and the journal.
const MARGIN: Duration = Duration::from_secs(30);

impl AgentHandle {
    fn service_call(
        &mut self,
        req: &Request,
        timeout: Duration,
        interrupt: &AtomicBool,
    ) -> Result<Response, ServiceCallError> {
        match self.request(req, timeout, interrupt)? {
            Response::Error { message, .. } => Err(ServiceCallError::Failed {
                agent: self.name().to_string(),
                message,
            }),
            Response::Refused { reason, .. } => Err(ServiceCallError::Failed {
                agent: self.name().to_string(),
                message: reason,
            }),
            r => Ok(r),
        }
    }

    fn unexpected(&self, what: &str, r: Response) -> ServiceCallError {
        ServiceCallError::Failed {
            agent: self.name().to_string(),
            message: format!("unexpected answer to {what}: {r:?}"),
        }
    }

    /// Starts a service on this agent's host; returns once it answers its
    /// probe.
    pub fn service_start(
        &mut self,
        plan: &ServicePlan,
        scratch_base: Option<&str>,
        interrupt: &AtomicBool,
    ) -> Result<StartedService, ServiceCallError> {
        let limit =
            Duration::from_secs_f64(plan.spec.ready_timeout_s + plan.spec.stop_timeout_s) + MARGIN;
        let req = Request::ServiceStart {
            plan: plan.clone(),
            scratch_base: scratch_base.map(str::to_string),
            secrets: Default::default(),
        };
        match self.service_call(&req, limit, interrupt)? {
            Response::ServiceStarted {
                description,
                address,
            } => Ok(StartedService {
                description: *description,
                address,
            }),
            r => Err(self.unexpected("service_start", r)),
        }
    }

    /// A snapshot of what a service's processes use now.
    pub fn service_usage(
        &mut self,
        name: &str,
        interrupt: &AtomicBool,
    ) -> Result<ServiceUsage, ServiceCallError> {
        let req = Request::ServiceUsage { name: name.into() };
        match self.service_call(&req, QUICK, interrupt)? {
            Response::ServiceUsage { usage } => Ok(usage),
            r => Err(self.unexpected("service_usage", r)),
        }
    }

    /// Whether a service still runs, or how it died.
    pub fn service_alive(
        &mut self,
        name: &str,
        interrupt: &AtomicBool,
    ) -> Result<Liveness, ServiceCallError> {
        let req = Request::ServiceAlive { name: name.into() };
        match self.service_call(&req, QUICK, interrupt)? {
            Response::ServiceAlive => Ok(Liveness::Alive),
            Response::ServiceDied { reason, log } => Ok(Liveness::Died { reason, log }),
            r => Err(self.unexpected("service_alive", r)),
        }
    }

    /// Stops a service and removes its scratch directory. `stop_timeout`:
    /// the service's `stop_timeout_s`.
    pub fn service_stop(
        &mut self,
        name: &str,
        stop_timeout: Duration,
        interrupt: &AtomicBool,
    ) -> Result<StopReport, ServiceCallError> {
        let req = Request::ServiceStop { name: name.into() };
        match self.service_call(
            &req,
            stop_timeout + benchlab_service::run::OWN_COUNTERS_TIMEOUT + MARGIN,
            interrupt,
        )? {
            Response::ServiceStopped { report } => Ok(report),
            r => Err(self.unexpected("service_stop", r)),
        }
    }
}
