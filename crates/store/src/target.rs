//! Which store a `--db` names: a PostgreSQL URL, a libpq `key=value`
//! connection string, or a SQLite file, and how to print it without its
//! secrets.

use std::fmt;
use std::path::{Path, PathBuf};

/// A store's location as the user gave it: `postgres://…` or
/// `postgresql://…` is a PostgreSQL database, and so is a libpq
/// connection string (`host=h user=u dbname=d`: it begins with a word and
/// `=`, see [`is_postgres_conninfo`]); anything else a SQLite file.
#[derive(Clone, PartialEq, Eq)]
pub enum Target {
    /// A SQLite database file (created when missing).
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL or string, secrets included: print it through
    /// [`Target::redacted`] or `Display`, never `{:?}` of the inner text.
    Postgres(String),
}

/// The URL schemes that name a PostgreSQL database (libpq's two).
pub const POSTGRES_SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];

impl Target {
    /// Reads a `--db` value.
    pub fn parse(db: &str) -> Target {
        if is_postgres_url(db) || is_postgres_conninfo(db) {
            Target::Postgres(db.to_string())
        } else {
            Target::Sqlite(PathBuf::from(db))
        }
    }

    /// Reads a `--db` value given as a path (clap's `PathBuf`): a path that
    /// is not UTF-8 cannot be a URL.
    pub fn from_path(db: &Path) -> Target {
        match db.to_str() {
            Some(s) => Target::parse(s),
            None => Target::Sqlite(db.to_path_buf()),
        }
    }

    /// The location with any password replaced by `***`: what messages,
    /// logs and the store itself may hold.
    pub fn redacted(&self) -> String {
        match self {
            Target::Sqlite(p) => p.display().to_string(),
            Target::Postgres(url) => benchlab_core::redact::redact(url),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Debug output ends up in panics and logs: redacted too.
        match self {
            Target::Sqlite(p) => write!(f, "Sqlite({p:?})"),
            Target::Postgres(_) => write!(f, "Postgres({:?})", self.redacted()),
        }
    }
}

/// True when `db` is a PostgreSQL URL (the scheme, case-insensitive).
pub fn is_postgres_url(db: &str) -> bool {
    POSTGRES_SCHEMES.iter().any(|s| {
        db.get(..s.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(s))
    })
}

/// True when `db` is a libpq `key=value` connection string: it begins
/// with a keyword (letters and `_`) and `=`, spaces allowed around it, as
/// libpq tells one from a URL. Such a string is never taken for a file
/// name, even with a keyword the client will refuse: it may hold a
/// password. (A SQLite file whose name begins so is given as `./name`.)
pub fn is_postgres_conninfo(db: &str) -> bool {
    let s = db.trim_start();
    let word = s
        .bytes()
        .take_while(|b| b.is_ascii_alphabetic() || *b == b'_')
        .count();
    word > 0 && s[word..].trim_start().starts_with('=')
}

/// A `--db` value fit to print: a PostgreSQL URL without its password (in
/// the user part and in a `password=` parameter), a path as it is.
pub fn redact(db: &str) -> String {
    Target::parse(db).redacted()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_postgres_and_everything_else_a_file() {
        assert!(matches!(
            Target::parse("postgres://h/db"),
            Target::Postgres(_)
        ));
        assert!(matches!(
            Target::parse("PostgreSQL:///db?host=/tmp"),
            Target::Postgres(_)
        ));
        assert_eq!(
            Target::parse("benchlab.db"),
            Target::Sqlite("benchlab.db".into())
        );
        assert_eq!(
            Target::parse("postgres.db"),
            Target::Sqlite("postgres.db".into())
        );
        assert!(matches!(Target::parse("mysql://h/db"), Target::Sqlite(_)));
    }

    #[test]
    fn conninfo_strings_are_postgres_never_files() {
        for db in [
            "host=127.0.0.1 user=lab password=Canary3 dbname=lab",
            "  dbname = lab",
            "usr=typo password=x",
        ] {
            assert!(matches!(Target::parse(db), Target::Postgres(_)), "{db}");
        }
        for db in ["lab.db", "./host=x.db", "=x", "a b=c", "/tmp/password=x"] {
            assert!(matches!(Target::parse(db), Target::Sqlite(_)), "{db}");
        }
        for (db, shown) in [
            (
                "host=127.0.0.1 user=lab password=Canary3 dbname=lab",
                "host=127.0.0.1 user=lab password=*** dbname=lab",
            ),
            (
                "host=h password = 'Can ary\\' 3' dbname=lab",
                "host=h password = *** dbname=lab",
            ),
            ("password=Canary3", "password=***"),
            ("sslpassword=Canary3 host=h", "sslpassword=*** host=h"),
        ] {
            let t = Target::parse(db);
            assert_eq!(t.redacted(), shown, "{db}");
            assert!(!format!("{t:?}").contains("Can"));
        }
    }

    #[test]
    fn passwords_never_print() {
        for (url, shown) in [
            (
                "postgres://lab:s3cret@db.lab:5432/bench",
                "postgres://lab:***@db.lab:5432/bench",
            ),
            (
                "postgresql://lab:p%40ss@h/b?sslmode=disable",
                "postgresql://lab:***@h/b?sslmode=disable",
            ),
            (
                "postgres://lab@h/b?password=s3cret&application_name=x",
                "postgres://lab@h/b?password=***&application_name=x",
            ),
            (
                "postgres:///b?host=/run/pg&user=lab",
                "postgres:///b?host=/run/pg&user=lab",
            ),
            ("postgres://h", "postgres://h"),
        ] {
            let t = Target::parse(url);
            assert_eq!(t.redacted(), shown);
            assert_eq!(t.to_string(), shown);
            assert!(!format!("{t:?}").contains("s3cret"));
        }
    }
}
