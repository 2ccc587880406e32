//! The parameters the three network workloads share (`protocol`) and the
//! helpers that read and check parameters for them.

use std::time::Duration;

use benchlab_core::param::{ParamDefault, ParamError, ParamKind, ParamSpec, Params};
use benchlab_core::{ValidationError, WorkloadError};
use socket2::{Protocol, Type};

/// The `protocol` parameter shared by all three workloads.
pub(crate) const PROTOCOL: ParamSpec = ParamSpec {
    name: "protocol",
    kind: ParamKind::Choice(&["tcp", "udp"]),
    default: ParamDefault::Str("tcp"),
    help: "transport: tcp or udp",
};

/// Largest UDP payload over IPv4: 65535 − 20 (IP) − 8 (UDP) bytes; netperf's
/// `UDP_LENGTH_MAX`.
pub(crate) const UDP_MAX_PAYLOAD: u64 = 65507;

/// The transport of a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    /// Reads the `protocol` parameter.
    pub(crate) fn from_params(params: &Params) -> Result<Self, ParamError> {
        match params.str(PROTOCOL.name)? {
            "tcp" => Ok(Proto::Tcp),
            "udp" => Ok(Proto::Udp),
            other => Err(ParamError {
                name: PROTOCOL.name.into(),
                problem: format!("expected \"tcp\" or \"udp\", got {other:?}"),
            }),
        }
    }

    /// For `validate()` and `table_metrics()`, which cannot fail: anything
    /// but `udp` is TCP (stage-one validation already rejected bad words).
    pub(crate) fn or_tcp(params: &Params) -> Self {
        Self::from_params(params).unwrap_or(Proto::Tcp)
    }

    pub(super) fn socket_type(self) -> (Type, Protocol) {
        match self {
            Proto::Tcp => (Type::STREAM, Protocol::TCP),
            Proto::Udp => (Type::DGRAM, Protocol::UDP),
        }
    }
}

/// A seconds parameter as a [`Duration`].
pub(crate) fn secs(params: &Params, name: &str) -> Result<Duration, WorkloadError> {
    let s = params.f64(name)?;
    Duration::try_from_secs_f64(s).map_err(|_| {
        WorkloadError::Param(ParamError {
            name: name.into(),
            problem: format!("expected a non-negative number of seconds, got {s}"),
        })
    })
}

/// A byte-size parameter as `usize`.
pub(crate) fn size(params: &Params, name: &str) -> Result<usize, WorkloadError> {
    Ok(params.u64(name)? as usize)
}

/// An optional byte-size parameter as `usize`.
pub(crate) fn opt_size(params: &Params, name: &str) -> Result<Option<usize>, WorkloadError> {
    Ok(params.opt_u64(name)?.map(|v| v as usize))
}

/// Common checks for `validate()`: the duration is positive and the warm-up
/// not negative, when they are set.
pub(crate) fn validate_times(params: &Params) -> Result<(), ValidationError> {
    if let Ok(d) = params.f64("duration_s") {
        if !(d > 0.0 && d.is_finite()) {
            return Err(ValidationError::new(
                "duration_s",
                format!("must be > 0, got {d}"),
            ));
        }
    }
    if let Ok(w) = params.f64("warmup_s") {
        if !(w >= 0.0 && w.is_finite()) {
            return Err(ValidationError::new(
                "warmup_s",
                format!("must be >= 0, got {w}"),
            ));
        }
    }
    Ok(())
}

/// Checks a socket-buffer size: `setsockopt` takes a C `int`.
pub(crate) fn validate_buffer(params: &Params, name: &str) -> Result<(), ValidationError> {
    match params.opt_u64(name) {
        Ok(Some(0)) => Err(ValidationError::new(name, "must be at least 1 byte")),
        Ok(Some(v)) if v > i32::MAX as u64 => Err(ValidationError::new(
            name,
            format!("must be at most {} bytes (a C int)", i32::MAX),
        )),
        _ => Ok(()),
    }
}

/// Stage two of validation again at run time (an agent may get parameters
/// no study file checked), as a workload error naming the kind.
pub(crate) fn checked(
    wl: &dyn benchlab_core::Workload,
    params: &Params,
) -> Result<(), WorkloadError> {
    wl.validate(params)
        .map_err(|e| WorkloadError::Other(format!("{}: {e}", wl.kind())))
}
