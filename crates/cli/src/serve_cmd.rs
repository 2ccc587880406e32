//! `benchlab serve`: the web UI, fed the report models the commands
//! build (this crate holds the registry of workloads the models need).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use benchlab_core::plan::{Plan, Unit};
use benchlab_core::Registry;
use benchlab_report::RunReport;
use benchlab_serve::{Options, Progress, Server, Source};
use benchlab_store::{RunStatus, Store};

use crate::{registry, runner};

/// The environment variable that may hold the token.
pub(crate) const TOKEN_ENV: &str = "BENCHLAB_SERVE_TOKEN";

/// The report models of the command line.
struct Models {
    reg: Registry,
}

impl Source for Models {
    fn report(&self, store: &Store, run: i64) -> Result<RunReport> {
        runner::report(store, &self.reg, run)
    }

    fn full_report(&self, store: &Store, run: i64) -> Result<RunReport> {
        crate::report_cmd::full_report(store, &self.reg, run)
    }

    fn progress(&self, store: &Store, run: i64) -> Result<Progress> {
        progress(store, &self.reg, run)
    }
}

/// Units done and planned, and the time left: the plan's guess for the
/// units still to run, times the ratio of the wall time the run has taken
/// since its first repetition to the plan's guess for the units done (as
/// `benchlab run`'s bar corrects its guesses, in one ratio for the whole
/// run). Points that adaptive repetitions stopped early count as still to
/// run until the run ends; the gap of a resumed run counts as time taken.
fn progress(store: &Store, reg: &Registry, run_id: i64) -> Result<Progress> {
    let run = store.run(run_id)?;
    let stored = runner::stored_plan(store, reg, run_id)?;
    for w in &stored.workloads {
        if reg.get(&w.kind).is_none() {
            bail!(
                "run {run_id} needs workload `{}`, which this benchlab does not have",
                w.kind
            );
        }
    }
    let plan = Plan::new(&stored.study, reg, run.options);
    let done = store.done_units(run_id)?;
    let key = |u: &Unit| {
        let p = &plan.points[u.point];
        (p.config, p.workload, p.point, u.repetition)
    };
    let (finished, todo): (Vec<&Unit>, Vec<&Unit>) =
        plan.units.iter().partition(|u| done.contains(&key(u)));
    let left_s = if run.status == RunStatus::Running && !finished.is_empty() {
        let first = store
            .samples(run_id)?
            .iter()
            .filter_map(|s| epoch_s(&s.started_at))
            .fold(f64::INFINITY, f64::min);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let guessed_done = plan.expected_s(finished.iter().copied());
        let ratio = if first.is_finite() && guessed_done > 0.0 {
            ((now - first) / guessed_done).max(0.0)
        } else {
            1.0
        };
        Some(plan.expected_s(todo.iter().copied()) * ratio)
    } else {
        None
    };
    Ok(Progress {
        done: finished.len(),
        total: plan.units.len(),
        left_s,
    })
}

/// Seconds since the epoch of an RFC 3339 UTC time as benchlab writes it
/// (`2026-11-21T08:23:05.123Z`); the inverse of
/// [`benchlab_core::units::rfc3339`], with Howard Hinnant's
/// `days_from_civil`.
fn epoch_s(s: &str) -> Option<f64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':');
    let (h, min) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let sec: f64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + min * 60) as f64 + sec)
}

/// The token: from `--token-file` (its first line) or the environment.
fn token(file: Option<&Path>) -> Result<Option<String>> {
    if let Some(p) = file {
        let text = std::fs::read_to_string(p)
            .with_context(|| format!("--token-file {}: cannot read it", p.display()))?;
        let t = text.lines().next().unwrap_or("").trim().to_string();
        if t.is_empty() {
            bail!("--token-file {}: the file is empty", p.display());
        }
        return Ok(Some(t));
    }
    Ok(std::env::var(TOKEN_ENV)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty()))
}

/// `--listen`: `IP:PORT`, `[IPv6]:PORT` or `NAME:PORT`, the address
/// resolved (the first the resolver gives) and, for a name, the name.
fn listen_address(listen: &str) -> Result<(SocketAddr, Option<String>)> {
    if let Ok(addr) = listen.parse::<SocketAddr>() {
        return Ok((addr, None));
    }
    let Some((name, port)) = listen.rsplit_once(':') else {
        bail!("--listen {listen}: expected HOST:PORT (127.0.0.1:8088, localhost:8088, [::1]:8088)");
    };
    if name.is_empty() || port.parse::<u16>().is_err() {
        bail!("--listen {listen}: expected HOST:PORT with a port from 0 to 65535");
    }
    use std::net::ToSocketAddrs;
    let addr = listen
        .to_socket_addrs()
        .with_context(|| format!("--listen {listen}: cannot resolve {name}"))?
        .next()
        .with_context(|| format!("--listen {listen}: {name} has no address"))?;
    Ok((addr, Some(name.to_string())))
}

/// `benchlab serve [--listen ADDR] [--allow-host NAME]… [--token-file FILE]`.
pub(crate) fn serve(
    db: &Path,
    listen: &str,
    allow_host: &[String],
    token_file: Option<&PathBuf>,
) -> Result<i32> {
    let token = token(token_file.map(|p| p.as_path()))?;
    let (listen, name) = listen_address(listen)?;
    let mut allow_hosts = allow_host.to_vec();
    allow_hosts.extend(name);
    let server = Server::bind(
        Options {
            db: db.to_path_buf(),
            listen,
            token,
            allow_hosts,
        },
        Box::new(Models { reg: registry() }),
    )?;
    let addr = server.local_addr()?;
    // The address on standard output, for scripts (and the tests) that
    // asked for port 0.
    println!(
        "benchlab serve: http://{addr}/ (store {}, read-only)",
        benchlab_store::Target::from_path(db)
    );
    use std::io::Write;
    std::io::stdout().flush()?;
    server.run()?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_takes_addresses_and_names() {
        assert_eq!(
            listen_address("127.0.0.1:8088").unwrap(),
            ("127.0.0.1:8088".parse().unwrap(), None)
        );
        assert_eq!(
            listen_address("[::1]:0").unwrap().0,
            "[::1]:0".parse().unwrap()
        );
        let (addr, name) = listen_address("localhost:8088").unwrap();
        assert!(addr.ip().is_loopback() && addr.port() == 8088, "{addr}");
        assert_eq!(name.as_deref(), Some("localhost"));
        for bad in ["localhost", "localhost:", ":8088", "localhost:99999"] {
            assert!(listen_address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn epoch_inverts_rfc3339() {
        for secs in [0u64, 86_399, 951_782_400, 1_795_000_123] {
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(secs * 1000 + 250);
            let s = benchlab_core::units::rfc3339(t);
            assert_eq!(epoch_s(&s), Some(secs as f64 + 0.25), "{s}");
        }
        for bad in [
            "",
            "2026-13-01T00:00:00Z",
            "2026-01-01 00:00:00Z",
            "x-y-zTa:b:cZ",
        ] {
            assert_eq!(epoch_s(bad), None, "{bad}");
        }
    }
}
