//! What both workloads read: the broker's address, the login (the
//! password from an environment variable of the client host, never a
//! parameter, so never stored), the timeout, and small helpers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use benchlab_core::param::{ParamDefault, ParamKind, ParamSpec, Params};
use benchlab_core::{ClientCtx, WorkloadError};

use crate::amqp::Login;

/// The broker's user.
pub const USER: ParamSpec = ParamSpec {
    name: "user",
    kind: ParamKind::Text,
    default: ParamDefault::Str("benchlab"),
    help: "the broker's user (a managed RabbitMQ's vars.amqp_user, default benchlab)",
};

/// Where the password comes from.
pub const PASSWORD_ENV: ParamSpec = ParamSpec {
    name: "password_env",
    kind: ParamKind::Text,
    default: ParamDefault::Str("BENCHLAB_MQ_PASSWORD"),
    help: "the environment variable of the client host holding the password (the same secret the service reads; never stored)",
};

/// The virtual host.
pub const VHOST: ParamSpec = ParamSpec {
    name: "vhost",
    kind: ParamKind::Text,
    default: ParamDefault::Str("/"),
    help: "the broker's virtual host",
};

/// How long a client waits for the broker before the point fails.
pub const TIMEOUT: ParamSpec = ParamSpec {
    name: "timeout_s",
    // Not `Seconds`: `run --scale` shrinks durations for trial runs, and a
    // broker does not answer faster for that.
    kind: ParamKind::Float,
    default: ParamDefault::Float(30.0),
    help: "a connect, or a wait with nothing from the broker, longer than this fails the point",
};

/// The login of a point.
pub fn login(
    kind: &str,
    params: &Params,
    ctx: &ClientCtx,
    nodelay: bool,
) -> Result<Login, WorkloadError> {
    let addr = ctx.server.ok_or_else(|| {
        WorkloadError::Other(format!(
            "{kind}: no broker address (a [[service]] of kind \"rabbitmq\", or address = \"host:port\")"
        ))
    })?;
    let var = params.str(PASSWORD_ENV.name)?;
    let password = std::env::var(var).map_err(|_| {
        WorkloadError::Other(format!(
            "{kind}: password_env: the environment variable {var} is not set on the client host (it holds the broker user's password, the service's `secrets.password`)"
        ))
    })?;
    Ok(Login {
        addr,
        user: params.str(USER.name)?.to_string(),
        password,
        vhost: params.str(VHOST.name)?.to_string(),
        nodelay,
        timeout: seconds(params, TIMEOUT.name)?,
    })
}

/// A non-negative, finite duration parameter.
pub fn seconds(params: &Params, name: &str) -> Result<Duration, WorkloadError> {
    let s = params.f64(name)?;
    Duration::try_from_secs_f64(s)
        .map_err(|_| WorkloadError::Other(format!("{name}: expected a number of seconds, got {s}")))
}

/// Names unique to this process and moment, so that two runs on one
/// broker never share a queue.
pub fn unique_prefix(kind: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!(
        "benchlab-{kind}-{}-{:x}-{}",
        std::process::id(),
        t & 0xffff_ffff,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Mean and sample standard deviation (n − 1; 0 for one value), as
/// qpid-perftest's `Stats`.
pub fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_as_perftest() {
        assert_eq!(mean_sd(&[5.0]), (5.0, 0.0));
        let (m, s) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(m, 5.0);
        assert!((s - 2.138_089_935).abs() < 1e-6);
    }

    #[test]
    fn prefixes_differ() {
        assert_ne!(unique_prefix("x"), unique_prefix("x"));
    }
}
