//! Protocol messages. See `docs/protocol.md`.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use benchlab_core::placement::Placement;
use benchlab_core::{ClientShare, Params, ServiceInfo, SideResult};
use serde::{Deserialize, Serialize};

/// Version of the control protocol. Bump on any incompatible change.
pub const PROTOCOL_VERSION: u32 = 5;

/// Controller → agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    /// First message: the controller's versions.
    Hello {
        /// The controller's protocol version.
        protocol: u32,
        /// The controller's benchlab version.
        benchlab: String,
    },
    /// Collect this host's inventory.
    Inventory,
    /// Start the server side of a point; answered with `Listening`.
    Serve {
        /// Workload kind.
        kind: String,
        /// Effective parameters.
        params: Params,
        /// Placement of the server thread.
        placement: Placement,
        /// Address to listen on (port 0: any).
        bind: SocketAddr,
    },
    /// Wait for the server side started by `Serve` to finish.
    Collect {
        /// How long to wait before abandoning it (ms).
        timeout_ms: u64,
    },
    /// Run the client side of a point to completion.
    RunClient {
        /// Workload kind.
        kind: String,
        /// Effective parameters.
        params: Params,
        /// Placement of the client thread.
        placement: Placement,
        /// The server side's data address.
        server: Option<SocketAddr>,
        /// Repetition number, 0-based.
        repetition: u32,
        /// This side's share of the point's clients.
        #[serde(default)]
        share: ClientShare,
        /// Behind a barrier: the side answers `arrived` once its clients
        /// are connected, and starts measuring on `go`.
        #[serde(default)]
        gated: bool,
        /// The service a service workload drives.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        service: Option<ServiceInfo>,
        /// The data addresses of the hosts the point names
        /// (`{host.NAME}`), by the study's host name.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        hosts: BTreeMap<String, String>,
    },
    /// Releases a gated client side (`abort`: abandon the point instead).
    Go {
        /// Abandon instead of starting.
        abort: bool,
    },
    /// Which kernel this is and whether unrestored journals exist.
    EnvProbe,
    /// Apply a configuration's environment (profile, shield, load) on
    /// this host; held until `EnvRevert` or the end of the session.
    EnvApply {
        /// What to apply.
        spec: benchlab_env::SessionSpec,
    },
    /// A point starts (`start`: restart the background load) or ended
    /// (stop it and report its CPU use).
    EnvPoint {
        /// Start or end.
        start: bool,
    },
    /// Undo the applied environment.
    EnvRevert,
    /// Undo every journal left on this host by a crashed run.
    EnvRestore,
    /// Start a managed service (a real server) on this host and hold it
    /// until `ServiceStop` or the end of the session; answered with
    /// `ServiceStarted` once its probe answers.
    ServiceStart {
        /// The service, checked and with its template read by the
        /// controller.
        plan: benchlab_service::ServicePlan,
        /// Where its scratch directory goes (default: the temporary
        /// directory of the agent's host).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scratch_base: Option<String>,
        /// The values of the secrets the service names, for a host that
        /// cannot resolve their sources itself (a guest); empty for every
        /// other host. Held in memory for this start only; never shown
        /// (`Debug` masks them).
        #[serde(
            default,
            skip_serializing_if = "benchlab_service::SecretValues::is_empty"
        )]
        secrets: benchlab_service::SecretValues,
    },
    /// Every check a `ServiceStart` would make, on this host, without
    /// starting anything (a run's preflight).
    ServiceCheck {
        /// The service, as `ServiceStart` would get it.
        plan: benchlab_service::ServicePlan,
        /// As `ServiceStart`'s.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scratch_base: Option<String>,
        /// As `ServiceStart`'s.
        #[serde(
            default,
            skip_serializing_if = "benchlab_service::SecretValues::is_empty"
        )]
        secrets: benchlab_service::SecretValues,
    },
    /// A snapshot of what a running service's processes use.
    ServiceUsage {
        /// The service's name.
        name: String,
    },
    /// Whether a service still runs.
    ServiceAlive {
        /// The service's name.
        name: String,
    },
    /// Stop a service (SIGTERM, grace, SIGKILL) and remove its scratch.
    ServiceStop {
        /// The service's name.
        name: String,
    },
    /// Put a service workload's content in place for its service (on the
    /// service's host: a web workload's file set in the document root).
    Prepare {
        /// Workload kind.
        kind: String,
        /// The point's parameters.
        params: Params,
        /// The service.
        service: ServiceInfo,
    },
    /// Remove what a `prepare` created (exactly the paths it returned).
    Unprepare {
        /// Files and directories `prepared` listed.
        paths: Vec<std::path::PathBuf>,
    },
    /// Start sampling this host's system monitors (CPU by mode, softirqs,
    /// interfaces, block devices, memory) until `MonitorStop`; answered
    /// once the first sample is taken.
    MonitorStart {
        /// Time between samples (ms).
        interval_ms: u32,
        /// The CPUs the sides measured on this host are pinned to (and a
        /// shield's): the sampler runs on another one when there is one.
        #[serde(default)]
        measured_cpus: Vec<usize>,
        /// The repetition's expected length (s), to reserve its samples.
        expected_s: f64,
    },
    /// Stop the monitor; answered with its samples.
    MonitorStop,
    /// Whether this host can sample call stacks as asked (perf installed,
    /// allowed, the rate possible); answered with `StacksChecked`.
    StacksCheck {
        /// Samples per second and CPU.
        hz: u32,
        /// How user stacks are walked.
        unwind: benchlab_stacks::Unwind,
    },
    /// Start sampling every CPU's call stacks (`perf record`) until
    /// `StacksStop` or the plan's window ends; answered with
    /// `StacksStarted`.
    StacksStart {
        /// When, how and whose processes.
        plan: benchlab_stacks::Plan,
    },
    /// Stop sampling; answered with the host's folded stacks by side,
    /// symbolized here.
    StacksStop,
    /// End the session; the agent exits.
    Shutdown,
}

/// Named states of an agent session; requests valid only in some states
/// are refused with the state named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Before a successful `Hello`.
    Greeting,
    /// Ready for work.
    Idle,
    /// A server side is running (after `Serve`, until `Collect`).
    Serving,
}

/// Agent → controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "response", rename_all = "snake_case")]
pub enum Response {
    /// Handshake accepted: the agent's versions.
    Hello {
        /// The agent's protocol version.
        protocol: u32,
        /// The agent's benchlab version.
        benchlab: String,
        /// The agent's process id (for leak checks and diagnostics).
        pid: u32,
    },
    /// The host's inventory (JSON of `benchlab_inventory::Inventory`).
    Inventory {
        /// The inventory.
        inventory: serde_json::Value,
    },
    /// The server side is listening.
    Listening {
        /// Its data port.
        port: u16,
    },
    /// A gated client side has connected its clients and waits for `go`.
    Arrived,
    /// A side finished.
    Done {
        /// Its result.
        result: Box<SideResult>,
    },
    /// A request failed; the session goes on.
    Error {
        /// Why.
        message: String,
        /// True when the host lacks something the workload needs.
        skipped: bool,
    },
    /// The request is not allowed now, or the versions differ; for a
    /// refused `Hello` the agent exits after sending this.
    Refused {
        /// Why.
        reason: String,
        /// The agent's state.
        state: State,
    },
    /// Answer to `EnvProbe`.
    EnvProbed {
        /// `/proc/sys/kernel/random/boot_id`: hosts that share it share a
        /// kernel (network namespaces of one machine).
        boot_id: String,
        /// Unrestored journal files (of runs that are over).
        journals: Vec<String>,
        /// Journals of runs in progress on this host (another user's, or
        /// another controller's, their locks held): theirs to undo, named
        /// and left alone.
        #[serde(default)]
        live: Vec<String>,
    },
    /// Answer to `EnvApply`.
    EnvApplied {
        /// What became of every setting.
        changes: Vec<benchlab_env::ChangeReport>,
        /// The file a side joins to run in the shield.
        shield_tasks: Option<String>,
    },
    /// Answer to `EnvPoint`.
    EnvPointDone {
        /// The load's CPU use over the point (at its end).
        load: Option<benchlab_env::LoadUsage>,
    },
    /// Answer to `EnvRevert` and `EnvRestore`.
    EnvReverted {
        /// What was undone.
        changes: Vec<benchlab_env::ChangeReport>,
    },
    /// Answer to `ServiceStart`: the service runs and answers its probe.
    ServiceStarted {
        /// What the appendix records of it.
        description: Box<benchlab_service::ServiceDescription>,
        /// Where clients reach it (its listen address).
        address: SocketAddr,
    },
    /// Answer to `ServiceCheck`: it would start.
    ServiceChecked,
    /// Answer to `ServiceUsage`.
    ServiceUsage {
        /// The snapshot.
        usage: benchlab_service::ServiceUsage,
    },
    /// Answer to `ServiceAlive`: it runs.
    ServiceAlive,
    /// Answer to `ServiceAlive`: it died by itself (it stays held until
    /// `ServiceStop` removes what it left).
    ServiceDied {
        /// How: `nginx exited with code 1`, `nginx killed by signal 9 (SIGKILL)`.
        reason: String,
        /// The last lines of its logs.
        log: String,
    },
    /// Answer to `ServiceStop`.
    ServiceStopped {
        /// How it went.
        report: benchlab_service::StopReport,
    },
    /// Answer to `Prepare`: what it created.
    Prepared {
        /// Files and directories, removed by `Unprepare`.
        paths: Vec<std::path::PathBuf>,
    },
    /// Answer to `Unprepare`.
    Unprepared,
    /// Answer to `MonitorStart`: the first sample is taken.
    MonitorStarted {
        /// The CPU the sampler runs on, when pinned.
        cpu: Option<usize>,
    },
    /// Answer to `MonitorStop`.
    Monitored {
        /// The samples.
        series: Box<benchlab_monitor::Series>,
    },
    /// Answer to `StacksCheck`: it can.
    StacksChecked {
        /// The perf version that will record.
        perf: String,
    },
    /// Answer to `StacksStart`.
    StacksStarted,
    /// Answer to `StacksStop`.
    Stacks {
        /// The host's recording.
        recording: Box<benchlab_stacks::Recording>,
    },
    /// Answer to `Shutdown`.
    Bye,
}
