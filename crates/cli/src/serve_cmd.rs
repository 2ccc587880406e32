//! `benchlab serve`: the web UI over a store, which it opens read-only
//! for each request (a store an older benchlab wrote is refused with the
//! command that upgrades it, `benchlab store upgrade`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use benchlab_serve::{Options, Server};

/// The environment variable that may hold the token.
pub(crate) const TOKEN_ENV: &str = "BENCHLAB_SERVE_TOKEN";

/// The token: from `--token-file` (its first line; the file private to
/// its owner) or the environment.
fn token(file: Option<&Path>) -> Result<Option<String>> {
    if let Some(p) = file {
        return Ok(Some(benchlab_serve::load_token(p)?));
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
    let server = Server::bind(Options {
        db: db.to_path_buf(),
        listen,
        token,
        allow_hosts,
    })?;
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
}
