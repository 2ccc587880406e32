//! `benchlab copy --from DB --to DB [RUN…]`: moves runs between stores
//! (SQLite and PostgreSQL, either way), exactly.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use benchlab_store::{Copied, RunStatus, Target};

/// Copies `runs` (every run that is not running when empty) from `from`
/// to `to`, one transaction per run, and prints where each went.
pub(crate) fn copy(from: &Path, to: &Path, runs: &[i64]) -> Result<i32> {
    let from_t = Target::from_path(from);
    let to_t = Target::from_path(to);
    if from_t == to_t {
        bail!("--from and --to are the same store ({from_t}): nothing to copy");
    }
    // Opening a SQLite path creates it: a mistyped --from would otherwise
    // leave an empty database behind and copy nothing.
    if let Target::Sqlite(p) = &from_t {
        if !p.is_file() {
            bail!(
                "--from {}: no such store (a SQLite file, or a postgres:// URL)",
                p.display()
            );
        }
    }
    let src = crate::open::open_read(from)?;
    let dst = crate::open::open_store(to)?;
    let ids: Vec<i64> = if runs.is_empty() {
        let mut all = src.runs()?;
        all.reverse();
        all.into_iter()
            .filter(|r| {
                let running = r.status == RunStatus::Running;
                if running {
                    eprintln!(
                        "benchlab: run {} is still running (or its controller died): not copied",
                        r.id
                    );
                }
                !running
            })
            .map(|r| r.id)
            .collect()
    } else {
        runs.to_vec()
    };
    let mut out = std::io::stdout().lock();
    for id in ids {
        let copied = src
            .copy_run(id, &dst)
            .with_context(|| format!("cannot copy run {id} from {from_t} to {to_t}"))?;
        match copied {
            Copied::New(n) if n == id => writeln!(out, "run {id}: copied to {to_t}")?,
            Copied::New(n) => writeln!(
                out,
                "run {id}: copied to {to_t} as run {n} (run {id} there is another run)"
            )?,
            Copied::Already(n) => writeln!(out, "run {id}: already in {to_t} as run {n}")?,
        }
    }
    Ok(0)
}
