//! The workload interface: a plug-in declares its parameters, metrics and
//! table layout, and implements its two sides. The registry is filled by
//! the binary (one line per workload), so workload crates know nothing of
//! the store, the report or the CLI.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use std::path::PathBuf;

use crate::combine::Combine;
use crate::param::{ParamError, ParamSpec, Params};
use crate::result::{Sample, SideResult};
use crate::shape::{ClientShare, ServerSide, ServiceInfo, ViewSpec};

/// Which direction is better for a metric: the statistics' own type, so
/// that a metric's direction reaches a comparison without a translation.
pub use benchlab_stats::Better;

/// A metric a workload reports and how tables show it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricSpec {
    /// Key in [`Sample::metrics`], unit in the name.
    pub name: &'static str,
    /// Table caption, with the unit (`TCP streaming throughput (10^6 b/s)`).
    pub label: &'static str,
    /// Better direction.
    pub better: Better,
    /// Decimals shown in tables.
    pub decimals: usize,
    /// How the metric combines over client hosts and targets.
    pub combine: Combine,
}

impl MetricSpec {
    /// A higher-is-better metric that adds up over parts (a throughput,
    /// a count).
    pub const fn higher(name: &'static str, label: &'static str, decimals: usize) -> Self {
        MetricSpec {
            name,
            label,
            better: Better::Higher,
            decimals,
            combine: Combine::Sum,
        }
    }

    /// A lower-is-better metric averaged over parts (a latency).
    pub const fn lower(name: &'static str, label: &'static str, decimals: usize) -> Self {
        MetricSpec {
            name,
            label,
            better: Better::Lower,
            decimals,
            combine: Combine::Mean,
        }
    }

    /// The same metric with another combine rule.
    pub const fn with(self, combine: Combine) -> Self {
        MetricSpec { combine, ..self }
    }
}

/// Errors of a workload side. The message is recorded as the reason of a
/// failed point.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A parameter is missing or malformed.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// A socket or file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The host lacks something the workload needs: the point is skipped.
    #[error("skipped: {0}")]
    Unsupported(String),
    /// The run was stopped from outside.
    #[error("aborted")]
    Aborted,
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl WorkloadError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        WorkloadError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Why a point's parameters are refused (stage two of study
/// validation, [`Workload::validate`], or a service table's check): the
/// key at fault (empty: the table as a whole) and what is wrong and
/// allowed. The study reader places it at the key's line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ValidationError {
    /// The parameter (or service key) at fault.
    pub key: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl ValidationError {
    /// The error of `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ValidationError {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// How often blocked sides look at their abort flag.
pub const ABORT_POLL: Duration = Duration::from_millis(200);

/// What the server side is given.
#[derive(Debug, Clone)]
pub struct ServerCtx {
    /// Address to listen on (port 0: any free port, reported to `ready`).
    pub bind: SocketAddr,
    /// Set when the controller abandons the point.
    pub abort: Arc<AtomicBool>,
}

/// What the client side is given.
#[derive(Clone)]
pub struct ClientCtx {
    /// The server side's data address (benchlab's own server side, or the
    /// service's address), when the workload has a server.
    pub server: Option<SocketAddr>,
    /// Repetition number (0-based), for fake workloads and labels.
    pub repetition: u32,
    /// Set when the controller abandons the point.
    pub abort: Arc<AtomicBool>,
    /// This side's share of the point's clients (one client unless the
    /// workload has a clients axis).
    pub share: ClientShare,
    /// The barrier: a clients-axis workload calls [`Gate::arrive`] once,
    /// after connecting all its clients and before measuring.
    pub gate: Arc<dyn Gate>,
    /// The service, for a [`ServerSide::Service`] workload.
    pub service: Option<ServiceInfo>,
    /// The data address of each of the study's hosts, by the study's
    /// host name (a configuration's `hosts` map applied): what
    /// [`Workload::host_refs`] names (a command's `{host.NAME}`).
    pub hosts: BTreeMap<String, String>,
}

impl ClientCtx {
    /// One client, an open gate, no service.
    pub fn single(server: Option<SocketAddr>, repetition: u32, abort: Arc<AtomicBool>) -> Self {
        ClientCtx {
            server,
            repetition,
            abort,
            share: ClientShare::default(),
            gate: Arc::new(OpenGate),
            service: None,
            hosts: BTreeMap::new(),
        }
    }
}

impl std::fmt::Debug for ClientCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCtx")
            .field("server", &self.server)
            .field("repetition", &self.repetition)
            .field("share", &self.share)
            .field("service", &self.service)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

/// A workload: both sides, its parameters and how its results read.
pub trait Workload: Send + Sync + 'static {
    /// The `kind` in study files, e.g. `net.stream`.
    fn kind(&self) -> &'static str;
    /// One line for `benchlab workloads`.
    fn summary(&self) -> &'static str;
    /// Its parameters (the option table).
    fn params(&self) -> &'static [ParamSpec];
    /// The parameter whose values form table rows when swept.
    fn row_param(&self) -> &'static str;
    /// Cross-parameter checks (stage two of validation): the offending
    /// key and the message.
    fn validate(&self, _params: &Params) -> Result<(), ValidationError> {
        Ok(())
    }
    /// The study's hosts a point names (a command's `{host.NAME}`), each
    /// with the key that names it: the study refuses a name that is no
    /// host of its, and the client side gets their addresses in
    /// [`ClientCtx::hosts`].
    fn host_refs(&self, _params: &Params) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Whether a point of the sweep is planned at all (IOzone's `-a` does
    /// not run records larger than the file, nor small records of large
    /// files). Points left out are not run, stored or shown.
    fn include_point(&self, _params: &Params) -> bool {
        true
    }
    /// The metrics shown in tables for a point with these parameters.
    fn table_metrics(&self, params: &Params) -> Vec<MetricSpec>;
    /// Whether tables of this workload get an "Average" row (seed 000's
    /// latency tables do).
    fn average_row(&self) -> bool {
        false
    }
    /// Remarks a reader of one repetition's result must see, such as a
    /// kernel that clipped a requested socket buffer: the report lists each
    /// distinct remark with the points it concerns. `metrics` are the
    /// repetition's derived figures ([`Sample::metrics`]).
    fn notes(
        &self,
        _params: &Params,
        _metrics: &std::collections::BTreeMap<String, f64>,
    ) -> Vec<String> {
        Vec::new()
    }
    /// Expected wall-clock time of one repetition (for the ETA).
    fn expected_duration(&self, params: &Params) -> Duration;
    /// Where the measured interval of one repetition lies: its offset from
    /// the clients' common start (the ramp-up) and its length. A workload
    /// with a service server side that declares it gets the service
    /// observed over exactly that interval; without it, over the clients'
    /// whole run.
    fn measured_window(&self, _params: &Params) -> Option<(Duration, Duration)> {
        None
    }
    /// What serves the workload's clients: benchlab's own server side
    /// (the default, [`Workload::serve`]), a managed service, or nothing.
    fn server_side(&self) -> ServerSide {
        ServerSide::Own
    }
    /// Whether `clients` is a sweep axis of this workload: each point's
    /// clients are spread over the client hosts and started behind a
    /// barrier. Such a workload lists [`crate::shape::CLIENTS_PARAM`] in
    /// its parameters.
    fn clients_axis(&self) -> bool {
        false
    }
    /// The metric that counts the point's operations per second, if the
    /// workload has one (a transaction, a request, a message): the
    /// monitors divide a host's CPU time, context switches and
    /// interrupts by it for per-operation figures.
    fn operation_rate(&self) -> Option<&'static str> {
        None
    }
    /// Parameters that stand for the system being measured rather than
    /// for the measurement (the `fake` workload's figures, noise and
    /// seed): a run history's series continues when only these change,
    /// as it does when the kernel under the study changes.
    fn simulated_params(&self) -> &'static [&'static str] {
        &[]
    }
    /// Every metric the workload derives, with how it combines over client
    /// hosts and targets (the table's metrics and the others). A metric
    /// not listed is averaged.
    fn metrics(&self, params: &Params) -> Vec<MetricSpec> {
        self.table_metrics(params)
    }
    /// How a raw value ([`SideResult::values`]) of several client hosts
    /// merges (counters add and histograms merge regardless).
    fn merge_value(&self, _name: &str) -> Combine {
        Combine::Max
    }
    /// The report views of a table of these points.
    fn views(&self, _params: &Params) -> Vec<ViewSpec> {
        vec![ViewSpec::Table {
            row_param: self.row_param().to_string(),
        }]
    }
    /// For a [`ServerSide::Service`] workload: puts the workload's content
    /// in place for the service (a web workload's file set in the document
    /// root), on the service's host, before a point's first repetition.
    /// Returns the files and directories it created, for removal after the
    /// point; it never touches what it did not create.
    fn prepare_service(
        &self,
        _params: &Params,
        _service: &ServiceInfo,
    ) -> Result<Vec<PathBuf>, WorkloadError> {
        Ok(Vec::new())
    }
    /// Runs the server side of one point on the calling thread (the agent
    /// has already placed it): bind on `ctx.bind`, call `ready` once
    /// with the bound port, serve the client until it is done, and return
    /// the server's result. Blocking calls wake up at least every
    /// [`ABORT_POLL`] to check `ctx.abort`. Only a workload whose
    /// [`Workload::server_side`] is [`ServerSide::Own`] has one; the
    /// engine never asks the others, and this default refuses.
    fn serve(
        &self,
        _params: &Params,
        _ctx: &ServerCtx,
        _ready: &mut dyn FnMut(u16),
    ) -> Result<SideResult, WorkloadError> {
        Err(WorkloadError::Other(format!(
            "{} has no server side of benchlab's own",
            self.kind()
        )))
    }
    /// Runs the client side to completion.
    fn run_client(&self, params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError>;
    /// Derives the metrics from both sides' results.
    fn combine(
        &self,
        params: &Params,
        client: SideResult,
        server: Option<SideResult>,
    ) -> Result<Sample, WorkloadError>;
}

/// Checks a `[[service]]` table (as JSON) when a study is read: the key
/// at fault (empty: the table) and what is wrong. The binary sets it from
/// the service crate, which `core` does not depend on.
pub type ServiceCheck = fn(&serde_json::Value) -> Result<(), ValidationError>;

/// The workloads this binary knows.
#[derive(Default)]
pub struct Registry {
    workloads: Vec<&'static dyn Workload>,
    service_check: Option<ServiceCheck>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a workload.
    pub fn add(&mut self, w: &'static dyn Workload) -> &mut Self {
        self.workloads.push(w);
        self
    }

    /// Sets the check of `[[service]]` tables.
    pub fn set_service_check(&mut self, check: ServiceCheck) -> &mut Self {
        self.service_check = Some(check);
        self
    }

    /// The check of `[[service]]` tables, when the binary set one.
    pub fn service_check(&self) -> Option<ServiceCheck> {
        self.service_check
    }

    /// Looks a workload up by kind.
    pub fn get(&self, kind: &str) -> Option<&'static dyn Workload> {
        self.workloads.iter().copied().find(|w| w.kind() == kind)
    }

    /// All kinds, in registration order.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.workloads.iter().map(|w| w.kind()).collect()
    }

    /// All workloads.
    pub fn all(&self) -> &[&'static dyn Workload] {
        &self.workloads
    }
}

/// The barrier of a point with several clients: every client connects,
/// then calls [`Gate::arrive`], which returns at the one common start
/// instant, once every client on every client host has arrived.
pub trait Gate: Send + Sync {
    /// Blocks until all clients of the point have arrived. An error means
    /// the point was abandoned (another host failed, or an abort): the
    /// caller closes its connections and returns the error.
    fn arrive(&self) -> Result<(), WorkloadError>;
}

/// A gate that opens at once: one host, nobody to wait for.
#[derive(Debug, Default, Clone, Copy)]
pub struct OpenGate;

impl Gate for OpenGate {
    fn arrive(&self) -> Result<(), WorkloadError> {
        Ok(())
    }
}
