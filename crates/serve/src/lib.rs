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
mod bisections;
mod history;
mod http;
mod layout;
mod pages;
mod queue;
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
    /// The token file cannot be read.
    #[error("--token-file {}: cannot read it: {source}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The token file grants a permission to group or others.
    #[error(
        "--token-file {}: the file is accessible by group or others (mode {mode:04o}); a token must be private: `chmod 600 {}`",
        path.display(),
        path.display()
    )]
    TokenExposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The token file's first line is empty.
    #[error("--token-file {}: the file is empty", path.display())]
    TokenEmpty {
        /// The file.
        path: PathBuf,
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

/// Reads a token file: its first line, trimmed. Like the agents' key
/// file, it must grant nothing to group or others (a token others can
/// read lets them in; one they can write lets them choose it).
pub fn load_token(path: &std::path::Path) -> Result<String, ServeError> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let io = |source| ServeError::TokenFile {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mode = f.metadata().map_err(io)?.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(ServeError::TokenExposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    let mut text = String::new();
    f.read_to_string(&mut text).map_err(io)?;
    let t = text.lines().next().unwrap_or("").trim().to_string();
    if t.is_empty() {
        return Err(ServeError::TokenEmpty {
            path: path.to_path_buf(),
        });
    }
    Ok(t)
}

/// What every connection shares.
pub(crate) struct Shared {
    pub(crate) opts: Options,
    pub(crate) hosts: AllowedHosts,
    /// The content-security policy of every answer.
    pub(crate) csp: String,
    /// The history pages, drawn ahead by a warmer thread.
    pub(crate) histories: Arc<history::Cache>,
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
                histories: Arc::default(),
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
        history::start_warmer(self.shared.histories.clone(), &self.shared.opts.db);
        server::run(self.listener, self.shared)
    }
}

/// A page: the store opened for this request, then the page's function.
pub(crate) fn page(req: &Request, shared: &Shared) -> Response {
    let store = match Store::open_read_only(&shared.opts.db) {
        Ok(s) => s,
        Err(e) => {
            let what = format!(
                "cannot open the store {} for {} {}",
                benchlab_store::Target::from_path(&shared.opts.db),
                req.method,
                req.path
            );
            let layout::Fail(status, msg) = layout::store_failed(&what, &e);
            return Response::error(status, &msg);
        }
    };
    pages::route(req, &store, &shared.histories)
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
    fn a_token_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, "0123456789abcdef0123\n").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o602] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = load_token(&p).unwrap_err().to_string();
            assert_eq!(
                e,
                format!(
                    "--token-file {0}: the file is accessible by group or others (mode {mode:04o}); a token must be private: `chmod 600 {0}`",
                    p.display()
                )
            );
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(load_token(&p).unwrap(), "0123456789abcdef0123");
        std::fs::write(&p, "\n").unwrap();
        assert!(load_token(&p)
            .unwrap_err()
            .to_string()
            .ends_with("the file is empty"));
    }

    #[test]
    fn token_comparison() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
    }
}
