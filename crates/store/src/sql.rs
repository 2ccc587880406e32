//! The one SQL layer under the store: values, rows and statements that
//! mean the same on SQLite and on PostgreSQL.
//!
//! Every query of the store is written once, in the subset both dialects
//! share (`INSERT … ON CONFLICT`, `RETURNING`), with SQLite's numbered
//! parameters `?1`, `?2`…; the PostgreSQL backend renumbers them `$1`,
//! `$2`…. Values cross the boundary as [`Val`], which both clients know how
//! to bind and read, so a query's code does not depend on the backend.

use crate::{Result, StoreError};

/// A value bound to a statement or read from a row: SQLite's five storage
/// classes, which the PostgreSQL column types of the schema map onto
/// (`BIGINT`, `DOUBLE PRECISION`, `TEXT`, `BYTEA`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<i64> for Val {
    fn from(v: i64) -> Val {
        Val::Int(v)
    }
}

impl From<usize> for Val {
    fn from(v: usize) -> Val {
        Val::Int(v as i64)
    }
}

impl From<u32> for Val {
    fn from(v: u32) -> Val {
        Val::Int(v as i64)
    }
}

impl From<u64> for Val {
    fn from(v: u64) -> Val {
        // Stored as SQLite does: the bits of an i64 (counts never reach
        // 2^63).
        Val::Int(v as i64)
    }
}

impl From<f64> for Val {
    fn from(v: f64) -> Val {
        Val::Real(v)
    }
}

impl From<&str> for Val {
    fn from(v: &str) -> Val {
        Val::Text(v.to_string())
    }
}

impl From<String> for Val {
    fn from(v: String) -> Val {
        Val::Text(v)
    }
}

impl From<&String> for Val {
    fn from(v: &String) -> Val {
        Val::Text(v.clone())
    }
}

impl From<Vec<u8>> for Val {
    fn from(v: Vec<u8>) -> Val {
        Val::Blob(v)
    }
}

impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(v: Option<T>) -> Val {
        v.map_or(Val::Null, Into::into)
    }
}

/// Binds a list of values: `vals![a, b, c]`.
macro_rules! vals {
    ($($v:expr),* $(,)?) => {
        &[$($crate::sql::Val::from($v)),*][..]
    };
}
pub(crate) use vals;

/// One result row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row(pub(crate) Vec<Val>);

impl Row {
    fn get(&self, i: usize) -> Result<&Val> {
        self.0
            .get(i)
            .ok_or_else(|| StoreError::Type(format!("no column {i} in a row of {}", self.0.len())))
    }

    fn wrong(&self, i: usize, want: &str) -> StoreError {
        StoreError::Type(format!(
            "column {i}: expected {want}, found {:?}",
            self.0[i]
        ))
    }

    pub(crate) fn int(&self, i: usize) -> Result<i64> {
        match self.get(i)? {
            Val::Int(v) => Ok(*v),
            _ => Err(self.wrong(i, "an integer")),
        }
    }

    pub(crate) fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        match self.get(i)? {
            Val::Null => Ok(None),
            _ => self.int(i).map(Some),
        }
    }

    pub(crate) fn opt_real(&self, i: usize) -> Result<Option<f64>> {
        match self.get(i)? {
            Val::Null => Ok(None),
            _ => self.real(i).map(Some),
        }
    }

    pub(crate) fn real(&self, i: usize) -> Result<f64> {
        match self.get(i)? {
            Val::Real(v) => Ok(*v),
            // SQLite keeps a REAL that holds a whole number as REAL, but a
            // value written by hand may be an INTEGER: read it as SQLite
            // would.
            Val::Int(v) => Ok(*v as f64),
            _ => Err(self.wrong(i, "a number")),
        }
    }

    pub(crate) fn text(&self, i: usize) -> Result<String> {
        match self.get(i)? {
            Val::Text(v) => Ok(v.clone()),
            _ => Err(self.wrong(i, "text")),
        }
    }

    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<String>> {
        match self.get(i)? {
            Val::Null => Ok(None),
            _ => self.text(i).map(Some),
        }
    }

    pub(crate) fn blob(&self, i: usize) -> Result<Vec<u8>> {
        match self.get(i)? {
            Val::Blob(v) => Ok(v.clone()),
            _ => Err(self.wrong(i, "bytes")),
        }
    }
}

/// What runs a statement: a connection or an open transaction, of either
/// backend.
pub(crate) trait Exec {
    /// Runs a statement that returns no rows; the number of rows changed.
    fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64>;
    /// Runs a query (or an `INSERT … RETURNING`) and collects its rows.
    fn query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Row>>;
    /// The backend's dialect, for the few statements that differ.
    fn dialect(&self) -> Dialect;

    /// The first row, if any.
    fn query_opt(&mut self, sql: &str, params: &[Val]) -> Result<Option<Row>> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Exactly one row.
    fn query_one(&mut self, sql: &str, params: &[Val]) -> Result<Row> {
        self.query_opt(sql, params)?
            .ok_or_else(|| StoreError::Type(format!("no row from: {sql}")))
    }
}

/// The SQL dialect of a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Postgres,
}

/// Renders a migration's source for a dialect. The sources use SQLite's
/// type names through five tokens, so that a SQLite database made today
/// gets exactly the schema text it always got:
///
/// | token    | SQLite                | PostgreSQL                                        |
/// |----------|-----------------------|---------------------------------------------------|
/// | `{id}`   | `INTEGER PRIMARY KEY` | `BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY` |
/// | `{int}`  | `INTEGER`             | `BIGINT` (SQLite's integers are 64-bit)           |
/// | `{real}` | `REAL`                | `DOUBLE PRECISION` (an f64, as SQLite's REAL)     |
/// | `{blob}` | `BLOB`                | `BYTEA`                                           |
/// | `{rowid}`| `rowid`               | `ctid` (the physical row order)                   |
///
/// `{id}` is SQLite's row id alias: ids come from the database (a sequence
/// on PostgreSQL), never from the client, so several controllers writing
/// at once never pick the same one. `{rowid}` only orders the rows of a
/// table without an id that is rebuilt with one; on PostgreSQL that table
/// was born with this schema and is empty when it is rebuilt.
pub(crate) fn render(source: &str, dialect: Dialect) -> String {
    let table: [(&str, &str, &str); 5] = [
        (
            "{id}",
            "INTEGER PRIMARY KEY",
            "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        ),
        ("{int}", "INTEGER", "BIGINT"),
        ("{real}", "REAL", "DOUBLE PRECISION"),
        ("{blob}", "BLOB", "BYTEA"),
        ("{rowid}", "rowid", "ctid"),
    ];
    let mut out = source.to_string();
    for (token, sqlite, pg) in table {
        out = out.replace(
            token,
            match dialect {
                Dialect::Sqlite => sqlite,
                Dialect::Postgres => pg,
            },
        );
    }
    out
}

/// SQLite's numbered parameters `?N` as PostgreSQL's `$N`. The store's
/// statements hold no `?` inside string literals, which the test of every
/// statement on both backends would show.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn dollar_params(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(|n| n.is_ascii_digit()) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

// --- SQLite ---------------------------------------------------------------

impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Val::Null => ValueRef::Null,
            Val::Int(v) => ValueRef::Integer(*v),
            Val::Real(v) => ValueRef::Real(*v),
            Val::Text(v) => ValueRef::Text(v.as_bytes()),
            Val::Blob(v) => ValueRef::Blob(v),
        }))
    }
}

fn sqlite_row(r: &rusqlite::Row, n: usize) -> rusqlite::Result<Row> {
    use rusqlite::types::ValueRef;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        out.push(match r.get_ref(i)? {
            ValueRef::Null => Val::Null,
            ValueRef::Integer(v) => Val::Int(v),
            ValueRef::Real(v) => Val::Real(v),
            ValueRef::Text(v) => Val::Text(String::from_utf8_lossy(v).into_owned()),
            ValueRef::Blob(v) => Val::Blob(v.to_vec()),
        });
    }
    Ok(Row(out))
}

impl Exec for rusqlite::Connection {
    fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64> {
        let mut st = self.prepare_cached(sql)?;
        Ok(st.execute(rusqlite::params_from_iter(params))? as u64)
    }

    fn query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Row>> {
        let mut st = self.prepare_cached(sql)?;
        let n = st.column_count();
        let rows = st.query_map(rusqlite::params_from_iter(params), |r| sqlite_row(r, n))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }
}

impl Exec for rusqlite::Transaction<'_> {
    fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64> {
        let mut st = self.prepare_cached(sql)?;
        Ok(st.execute(rusqlite::params_from_iter(params))? as u64)
    }

    fn query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Row>> {
        let mut st = self.prepare_cached(sql)?;
        let n = st.column_count();
        let rows = st.query_map(rusqlite::params_from_iter(params), |r| sqlite_row(r, n))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_renumbered_for_postgres() {
        assert_eq!(
            dollar_params("SELECT a FROM t WHERE b = ?1 AND c = ?12 OR d IS ?"),
            "SELECT a FROM t WHERE b = $1 AND c = $12 OR d IS ?"
        );
    }

    #[test]
    fn sqlite_rendering_is_the_historical_text() {
        let src = "CREATE TABLE t (id {id}, n {int} NOT NULL, x {real}, b {blob});";
        assert_eq!(
            render(src, Dialect::Sqlite),
            "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, x REAL, b BLOB);"
        );
        assert_eq!(
            render(src, Dialect::Postgres),
            "CREATE TABLE t (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, n BIGINT NOT NULL, x DOUBLE PRECISION, b BYTEA);"
        );
    }
}
