//! `benchlab history STUDY`: the stored runs of one study as series, one
//! per table row, metric and configuration, with the change points
//! `benchlab_stats::change_points` finds in each; the series are built by
//! `benchlab_report::history`, as `benchlab serve`'s history page does.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::Result;
use benchlab_report::history::ChangeKind;
use benchlab_stats::{ChangePointOptions, Segmentation};

use crate::registry;

/// Exit code of `history --fail-on-change` when a change is found.
pub const EXIT_CHANGE: i32 = 1;

/// What `benchlab history` was asked.
pub(crate) struct HistoryArgs<'a> {
    /// A study name as stored, or a study file whose name is read.
    pub(crate) study: &'a str,
    /// Exit with [`EXIT_CHANGE`] when a change point is found.
    pub(crate) fail_on_change: bool,
    /// Only changes at this run or later count for `fail_on_change`.
    pub(crate) since: Option<i64>,
    /// The detector's settings.
    pub(crate) options: ChangePointOptions,
}

/// `benchlab history STUDY [--fail-on-change] [--since RUN]`.
pub(crate) fn history(db: &Path, args: &HistoryArgs) -> Result<i32> {
    let reg = registry();
    let name = if Path::new(args.study).is_file() {
        benchlab_core::study::Study::load(Path::new(args.study), &reg)?.name
    } else {
        args.study.to_string()
    };
    let store = crate::open::open_read(db)?;
    let h = benchlab_report::history::history(&store, &name, None, args.options)?;
    let runs = &h.group.runs;
    // The first configuration of the series (the B of every verdict).
    let base = h
        .series
        .first()
        .map(|s| s.configuration.clone())
        .unwrap_or_default();
    let o = &args.options;
    let mut out = String::new();
    writeln!(
        out,
        "study `{name}`: {} completed run{} ({}){}",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        runs.iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        if h.left_out.is_empty() {
            String::new()
        } else {
            format!("; left out: {}", h.left_out.join(", "))
        }
    )?;
    writeln!(
        out,
        "series: runs of the same study name and plan fingerprint {}{}",
        h.group.fingerprint,
        if h.other_groups.is_empty() {
            String::new()
        } else {
            format!(
                " (other plans or options, not in this series: {})",
                h.other_groups
                    .iter()
                    .map(|g| format!(
                        "{} with run{} {}",
                        g.fingerprint,
                        if g.runs.len() == 1 { "" } else { "s" },
                        g.runs
                            .iter()
                            .map(i64::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
    )?;
    writeln!(
        out,
        "change points: E-Divisive means (Matteson & James 2014), permutation test p ≤ {} ({} permutations), segments of {} runs or more",
        o.significance, o.permutations, o.min_segment
    )?;
    // (series title, run id of the change) of every change that counts
    // for --fail-on-change.
    let mut counted: Vec<(String, i64)> = Vec::new();
    let mut found = 0;
    for s in &h.series {
        let label = s.label();
        writeln!(out, "\n{label} ({} is better)", s.better.as_str())?;
        let seg = s.segmentation.as_ref();
        let changes = seg.map_or(&[][..], |g| &g.changes[..]);
        for (i, &(run, v)) in s.values.iter().enumerate() {
            write!(out, "  run {run:>5}  {v:>14.*}", s.decimals)?;
            if let Some(c) = changes.iter().find(|c| c.index == i) {
                found += 1;
                let pct = c
                    .change_pct
                    .map(|p| format!("{p:+.2} %, "))
                    .unwrap_or_default();
                let kind = s.change_kind(c.before_mean, c.after_mean, c.change_pct);
                write!(
                    out,
                    "  ← change at run {run}: mean {:.*} → {:.*} ({pct}{}), p = {:.3}",
                    s.decimals,
                    c.before_mean,
                    s.decimals,
                    c.after_mean,
                    kind.text(s.margin_pct),
                    c.p_value
                )?;
                // A change within the margin is found and shown, but is
                // not one that matters: it does not fail the gate.
                if kind != ChangeKind::WithinMargin && args.since.is_none_or(|since| run >= since) {
                    counted.push((label.clone(), run));
                }
                if let Some(&(before, _)) = i.checked_sub(1).and_then(|p| s.values.get(p)) {
                    let changed = versions_changed(
                        &run_versions(&store, before)?,
                        &run_versions(&store, run)?,
                    );
                    if !changed.is_empty() {
                        write!(
                            out,
                            "\n      what changed from run {before}: {}",
                            changed.join("; ")
                        )?;
                    }
                    for command in bisect_commands(&store, before, run)? {
                        write!(out, "\n      to find which version: {command}")?;
                    }
                }
            }
            writeln!(out)?;
        }
        writeln!(out, "  {}", verdict(seg, s.values.len(), o))?;
        if let Some(v) = s.newest_text(&base) {
            writeln!(out, "  {v}")?;
        }
    }
    let newest = runs.last().copied().unwrap_or_default();
    writeln!(
        out,
        "\n{found} change point{} in {} series; the newest run ({newest}) is {}",
        if found == 1 { "" } else { "s" },
        h.series.len(),
        if found == 0 {
            "in an unchanged series".to_string()
        } else {
            "after the change points marked above".to_string()
        }
    )?;
    std::io::stdout().write_all(out.as_bytes())?;
    if args.fail_on_change && !counted.is_empty() {
        eprintln!(
            "benchlab: --fail-on-change: {} change point{}{}: {}",
            counted.len(),
            if counted.len() == 1 { "" } else { "s" },
            args.since
                .map(|s| format!(" at or after run {s}"))
                .unwrap_or_default(),
            counted
                .iter()
                .map(|(l, r)| format!("{l} at run {r}"))
                .collect::<Vec<_>>()
                .join("; ")
        );
        return Ok(EXIT_CHANGE);
    }
    Ok(0)
}

/// The versions a run recorded: each host's kernel release (its
/// inventory) and each managed service's version, by a name that says
/// which.
fn run_versions(
    store: &benchlab_store::Store,
    run: i64,
) -> Result<std::collections::BTreeMap<String, String>> {
    let mut v = std::collections::BTreeMap::new();
    for h in store.hosts(run)? {
        if let Some(k) = h.inventory["os"]["kernel_release"].as_str() {
            v.insert(format!("host {} kernel", h.name), k.to_string());
        }
    }
    for svc in store.services(run)? {
        if let Some(ver) = svc.description["version"].as_str() {
            v.insert(format!("service {} version", svc.name), ver.to_string());
        }
    }
    Ok(v)
}

/// The `benchlab bisect` commands that would find which version made the
/// change between runs `before` and `run`: for each guest host whose
/// kernel changed, a bisection over the kernels from the one to the
/// other (those fetched into the cache between them, and the two ends).
/// Offered only where the bisection would be accepted: a study without
/// configurations, with one workload, whose file is still there.
fn bisect_commands(store: &benchlab_store::Store, before: i64, run: i64) -> Result<Vec<String>> {
    let r = store.run(run)?;
    let Ok(doc) = r.study_text.parse::<toml::Table>() else {
        return Ok(Vec::new());
    };
    let workloads = doc
        .get("workload")
        .and_then(toml::Value::as_array)
        .map_or(0, Vec::len);
    if doc.contains_key("configuration") || workloads != 1 || !Path::new(&r.study_file).is_file() {
        return Ok(Vec::new());
    }
    let guests: Vec<&str> = doc
        .get("host")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter(|h| h.get("guest").is_some())
        .filter_map(|h| h.get("name")?.as_str())
        .collect();
    let kernels = |id: i64| -> Result<std::collections::BTreeMap<String, String>> {
        Ok(store
            .hosts(id)?
            .into_iter()
            .filter_map(|h| {
                let k = h.inventory["guest"]["kernel"].as_str()?.to_string();
                Some((h.name, k))
            })
            .collect())
    };
    let (old, new) = (kernels(before)?, kernels(run)?);
    let mut out = Vec::new();
    for host in guests {
        if let (Some(a), Some(b)) = (old.get(host), new.get(host)) {
            if a != b {
                out.push(format!(
                    "benchlab bisect {} --key host.{host}.kernel --values {}",
                    shell_word(&r.study_file),
                    benchlab_guest::kernel::cached_between(a, b).join(",")
                ));
            }
        }
    }
    Ok(out)
}

/// `s` as one shell word.
fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// What differs between two runs' versions, in words: `host sut kernel
/// 6.1.0-47-amd64 → 6.1.0-50-amd64`.
fn versions_changed(
    before: &std::collections::BTreeMap<String, String>,
    after: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, b) in before {
        match after.get(name) {
            Some(a) if a != b => out.push(format!("{name} {b} → {a}")),
            None => out.push(format!("{name} {b} → (not recorded)")),
            _ => {}
        }
    }
    for (name, a) in after {
        if !before.contains_key(name) {
            out.push(format!("{name} (not recorded) → {a}"));
        }
    }
    out
}

/// The line under a series: what the detector concluded.
fn verdict(seg: Option<&Segmentation>, n: usize, o: &ChangePointOptions) -> String {
    match seg {
        None => "not tested: a figure is not finite".into(),
        Some(g) if !g.changes.is_empty() => match g.rejected_p_value {
            Some(p) => format!(
                "{} change point{} (the next strongest split: p = {p:.3})",
                g.changes.len(),
                if g.changes.len() == 1 { "" } else { "s" }
            ),
            None => format!(
                "{} change point{} (no segment left long enough to split again)",
                g.changes.len(),
                if g.changes.len() == 1 { "" } else { "s" }
            ),
        },
        Some(g) => match g.rejected_p_value {
            Some(p) => format!("no change (the strongest split: p = {p:.3})"),
            None => format!(
                "too short to test: {n} run{}, a change needs {} on either side",
                if n == 1 { "" } else { "s" },
                o.min_segment.max(2)
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    fn versions(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_change_point_names_the_versions_that_differ() {
        let before = versions(&[
            ("host sut kernel", "6.1.0-47-amd64"),
            ("service web version", "nginx 1.22.1"),
            ("service db version", "15.8"),
        ]);
        let after = versions(&[
            ("host sut kernel", "6.1.0-50-amd64"),
            ("service web version", "nginx 1.22.1"),
            ("host gen kernel", "6.12.1"),
        ]);
        assert_eq!(
            super::versions_changed(&before, &after),
            [
                "host sut kernel 6.1.0-47-amd64 → 6.1.0-50-amd64",
                "service db version 15.8 → (not recorded)",
                "host gen kernel (not recorded) → 6.12.1",
            ]
        );
        assert!(super::versions_changed(&before, &before).is_empty());
    }
}
