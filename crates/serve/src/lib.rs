//! `benchlab serve`: a web UI over a result store — the runs (sorted,
//! filtered, searched and paged on the server, with the live progress of
//! a running study), a run's report, a study's history with its change
//! points, comparisons picked in the page, the system configuration of
//! two hosts side by side, and downloads of each page as JSON, CSV,
//! Markdown and HTML.
//!
//! One model, many renderers: every page is a function of the report
//! model [`benchlab_report::load`] builds from the store, as `benchlab
//! show`, `report` and `compare` do, drawn by the report crate's HTML
//! renderer; the downloads are the renderers of those commands.
//!
//! The store is opened read-only, per request (SQLite in WAL mode: a run
//! being written stays readable). Pages fetch nothing from anywhere but
//! this server: the stylesheet and the icon are its own files
//! (`/style.css`, `/favicon.svg`), the scripts are inline, and the
//! content-security policy allows those scripts by their hashes and no
//! inline style. The server listens on
//! loopback by default; on any other address it refuses to start without
//! a token, and then answers 401 to every request that does not carry it.
//!
//! The HTTP layer is hyper on a tokio runtime ([`server`]: the `Host`
//! check, the token, the limits); the pages are plain functions of a
//! [`Request`] (see docs/serve.md and docs/security.md).

mod assets;
mod history;
mod http;
mod layout;
mod pages;
mod runs;
pub mod server;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;

use benchlab_store::Store;

pub use http::{decode, encode, parse_query, request_from_parts, BadRequest, Request, Response};
pub use server::{screen, AllowedHosts, Screened, MAX_CONNECTIONS};

/// The default address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8088";

/// The cookie that carries the token once a browser has given it in the
/// URL (`?token=`).
pub const TOKEN_COOKIE: &str = "benchlab_token";

/// Where and how to serve.
#[derive(Debug, Clone)]
pub struct Options {
    /// The store (opened read-only).
    pub db: PathBuf,
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The token every request must carry; required unless `listen` is a
    /// loopback address.
    pub token: Option<String>,
    /// Host names a request's `Host` header may give besides the server's
    /// IP addresses and `localhost` (`--allow-host`, and the name given to
    /// `--listen`).
    pub allow_hosts: Vec<String>,
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without a token.
    #[error("--listen {0} is not a loopback address: give a token (--token-file FILE or the BENCHLAB_SERVE_TOKEN environment variable) that every request must carry, or listen on 127.0.0.1")]
    TokenRequired(SocketAddr),
    /// The token is empty or has characters a header or cookie cannot hold.
    #[error("the token must be 16 to 256 printable ASCII characters without spaces, `;` or `,` (it is sent in a cookie and a header)")]
    BadToken,
    /// The store cannot be opened read-only.
    #[error("cannot open the store {db} read-only: {source}")]
    Store {
        /// The store, its password masked.
        db: String,
        /// Why.
        source: benchlab_store::StoreError,
    },
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Checks the listen address against the token (before anything else).
pub fn check_access(listen: &SocketAddr, token: Option<&str>) -> Result<(), ServeError> {
    match token {
        None if !listen.ip().is_loopback() => Err(ServeError::TokenRequired(*listen)),
        Some(t)
            if t.len() < 16
                || t.len() > 256
                || !t
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b';' && b != b',') =>
        {
            Err(ServeError::BadToken)
        }
        _ => Ok(()),
    }
}

/// What every connection shares.
pub(crate) struct Shared {
    pub(crate) opts: Options,
    pub(crate) hosts: AllowedHosts,
    /// The content-security policy of every answer.
    pub(crate) csp: String,
}

/// A bound server, not yet answering.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl Server {
    /// Checks the options (token, store) and binds the address.
    pub fn bind(opts: Options) -> Result<Server, ServeError> {
        check_access(&opts.listen, opts.token.as_deref())?;
        Store::open_read_only(&opts.db).map_err(|source| ServeError::Store {
            db: benchlab_store::Target::from_path(&opts.db).redacted(),
            source,
        })?;
        let listener = TcpListener::bind(opts.listen).map_err(|source| ServeError::Bind {
            addr: opts.listen,
            source,
        })?;
        let (scripts, styles) = pages::inline_blocks();
        Ok(Server {
            listener,
            shared: Arc::new(Shared {
                hosts: AllowedHosts::new(&opts.allow_hosts),
                csp: server::csp(&scripts, &styles),
                opts,
            }),
        })
    }

    /// The address bound (the port chosen when 0 was asked for).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Answers connections until the process ends.
    pub fn run(self) -> std::io::Result<()> {
        server::run(self.listener, self.shared)
    }
}

/// A page: the store opened for this request, then the page's function.
pub(crate) fn page(req: &Request, shared: &Shared) -> Response {
    let store = match Store::open_read_only(&shared.opts.db) {
        Ok(s) => s,
        Err(e) => {
            return Response::error(
                500,
                &benchlab_core::redact::redact(&format!(
                    "cannot open the store {}: {e}",
                    benchlab_store::Target::from_path(&shared.opts.db)
                )),
            )
        }
    };
    pages::route(req, &store)
}

/// Compares two tokens in time independent of where they differ.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_needs_no_token_elsewhere_one_is_required() {
        let lo: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let lo6: SocketAddr = "[::1]:0".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:0".parse().unwrap();
        assert!(check_access(&lo, None).is_ok());
        assert!(check_access(&lo6, None).is_ok());
        let err = check_access(&any, None).unwrap_err().to_string();
        assert!(err.contains("token"), "{err}");
        assert!(check_access(&any, Some("0123456789abcdef")).is_ok());
        for bad in ["short", "0123456789 abcdef", "0123456789abcdef;x"] {
            assert!(check_access(&any, Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn token_comparison() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
    }
}
