//! `benchlab bisect`'s request checked before anything runs: the study
//! file, the key, the versions, the metric, and the builds of the two
//! ends. Every refusal names the option or key and what is allowed.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use benchlab_core::{ParamKind, Registry};

use crate::runner::{default_builds, Request};
use crate::search::Settings;
use crate::versions::{plain, GitSource};

/// Where the versions come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Git revisions from `good` to `bad`, each built by `build`.
    Git {
        /// The repository.
        repo: PathBuf,
        /// The good revision.
        good: String,
        /// The bad revision.
        bad: String,
        /// The build command (`sh -c`, in the version's directory).
        build: String,
        /// Where builds go (default: under the state directory).
        builds: Option<PathBuf>,
    },
    /// The values of a study key, good first, bad last.
    Values(Vec<String>),
}

/// What `benchlab bisect` was asked.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The study file.
    pub study: PathBuf,
    /// `workload.NAME.PARAM` (git: default `workload.NAME.build` of the
    /// study's only workload).
    pub key: Option<String>,
    /// The metric (default: the workload's first table metric).
    pub metric: Option<String>,
    /// The versions.
    pub source: Source,
    /// The smallest slowdown worth finding, percent.
    pub margin_pct: f64,
    /// Rounds a step may run.
    pub rounds: u32,
    /// Repetitions of each configuration per round.
    pub repetitions: u32,
    /// ABBA blocks of each configuration per round.
    pub blocks: u32,
}

/// The workloads of a study file: (name, kind), as the study names them.
fn workloads(doc: &toml::Table) -> Vec<(String, String)> {
    let list = doc
        .get("workload")
        .and_then(|w| w.as_array())
        .cloned()
        .unwrap_or_default();
    let mut out: Vec<(String, String)> = Vec::new();
    for w in &list {
        let kind = w.get("kind").and_then(|k| k.as_str()).unwrap_or_default();
        let name = match w.get("name").and_then(|k| k.as_str()) {
            Some(n) => n.to_string(),
            None => {
                // The study's own default: the kind, numbered when repeated.
                let same = list
                    .iter()
                    .filter(|o| o.get("kind").and_then(|k| k.as_str()) == Some(kind))
                    .count();
                if same > 1 {
                    let nth = out.iter().filter(|(_, k)| k == kind).count() + 1;
                    format!("{kind}{nth}")
                } else {
                    kind.to_string()
                }
            }
        };
        out.push((name, kind.to_string()));
    }
    out
}

/// `--key host.NAME.kernel` (or `host.NAME.guest.kernel`): the guest host
/// NAME of the study, and every version a kernel a guest can boot,
/// fetched into the cache now: a kernel that cannot be fetched, or lacks
/// the modules a guest needs, is refused before anything runs.
fn kernel_key(file: &str, doc: &toml::Table, key: &str, source: &Source) -> Result<String> {
    let parts: Vec<&str> = key.split('.').collect();
    let host = match parts.as_slice() {
        ["host", h, "kernel"] | ["host", h, "guest", "kernel"] if !h.is_empty() => h.to_string(),
        _ => bail!("--key `{key}`: allowed for a host: host.NAME.kernel (the kernel of the guest host NAME)"),
    };
    let guests: Vec<String> = doc
        .get("host")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter(|h| h.get("guest").is_some())
        .filter_map(|h| Some(h.get("name")?.as_str()?.to_string()))
        .collect();
    if !guests.contains(&host) {
        bail!(
            "--key {key}: the study {file} has no guest host `{host}` (its guest hosts: {})",
            if guests.is_empty() {
                "none".to_string()
            } else {
                guests
                    .iter()
                    .map(|g| format!("`{g}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    }
    let Source::Values(values) = source else {
        bail!("--key {key} takes --values KERNEL,…,KERNEL, not --repo");
    };
    for v in values {
        if !(benchlab_core::study::is_kernel_release(v) || std::path::Path::new(v).is_absolute()) {
            bail!("--key {key}: version `{v}`: allowed a Debian kernel release as in linux-image-RELEASE (e.g. 6.1.0-50-amd64) or the absolute path of an unpacked kernel");
        }
        benchlab_guest::kernel::Kernel::ensure(Some(v)).map_err(|e| {
            anyhow::anyhow!("--key {key}: version `{v}`: {e}; refused before anything ran")
        })?;
    }
    Ok(host)
}

/// Checks what was asked and builds the two ends; nothing has run yet.
pub fn prepare(ask: &Ask, reg: &Registry) -> Result<Request> {
    let file = ask.study.display().to_string();
    let text = std::fs::read_to_string(&ask.study)
        .with_context(|| format!("{file}: cannot read the study file"))?;
    let doc: toml::Table =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{file}: not valid TOML: {e}"))?;
    if doc.contains_key("configuration") {
        bail!("{file}: key `configuration`: a bisected study has none; benchlab bisect makes its two (the bound and the candidate), each with the bisected key set to its version");
    }
    if ask.rounds == 0 || ask.repetitions < 2 || ask.blocks < 2 {
        bail!("--rounds must be at least 1, --repetitions and --blocks at least 2");
    }
    if !ask.repetitions.is_multiple_of(ask.blocks) {
        bail!(
            "--repetitions {} is not a multiple of --blocks {}: each ABBA block runs the same share",
            ask.repetitions,
            ask.blocks
        );
    }
    let wls = workloads(&doc);
    let host = match &ask.key {
        Some(k) if k.starts_with("host.") => Some(kernel_key(&file, &doc, k, &ask.source)?),
        _ => None,
    };
    let (workload, param) = match (&ask.key, &ask.source) {
        (Some(_), _) if host.is_some() => match wls.as_slice() {
            [(w, _)] => (w.clone(), "kernel".to_string()),
            _ => bail!(
                "{file}: {} workloads: a kernel bisection compares the metric of one workload; give a study with one",
                wls.len()
            ),
        },
        (Some(k), _) => {
            let parts: Vec<&str> = k.splitn(3, '.').collect();
            match parts.as_slice() {
                ["workload", w, p] if !w.is_empty() && !p.is_empty() => {
                    (w.to_string(), p.to_string())
                }
                _ => bail!("--key `{k}`: allowed: workload.NAME.PARAM (a parameter of one of the study's workloads) or host.NAME.kernel (the kernel of a guest host)"),
            }
        }
        (None, Source::Git { .. }) if wls.len() == 1 => (wls[0].0.clone(), "build".to_string()),
        (None, Source::Git { .. }) => bail!(
            "{file}: {} workloads: give --key workload.NAME.build to say which runs the build",
            wls.len()
        ),
        (None, Source::Values(_)) => {
            bail!("--values needs --key workload.NAME.PARAM or host.NAME.kernel: the key whose values are bisected")
        }
    };
    let Some((_, kind)) = wls.iter().find(|(n, _)| *n == workload) else {
        bail!(
            "--key: the study {file} has no workload `{workload}` (its workloads: {})",
            wls.iter()
                .map(|(n, _)| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let wl = reg
        .get(kind)
        .with_context(|| format!("{file}: workload `{workload}`: unknown kind `{kind}`"))?;
    let quote_values = match &host {
        Some(_) => true,
        None => {
            let Some(spec) = wl.params().iter().find(|p| p.name == param) else {
                bail!(
                    "--key workload.{workload}.{param}: `{kind}` has no parameter `{param}` (its parameters: {})",
                    wl.params()
                        .iter()
                        .map(|p| p.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            };
            matches!(spec.kind, ParamKind::Text | ParamKind::Choice(_))
        }
    };
    let (versions, git) = match &ask.source {
        Source::Values(v) => (plain(v)?, None),
        Source::Git {
            repo,
            good,
            bad,
            build,
            builds,
        } => {
            let repo = repo
                .canonicalize()
                .with_context(|| format!("--repo {}", repo.display()))?;
            let git = GitSource {
                builds: builds
                    .clone()
                    .unwrap_or_else(|| default_builds(&repo, build)),
                repo,
                build: build.clone(),
            };
            (git.versions(good, bad)?, Some(git))
        }
    };
    let mut request = Request {
        study_file: file.clone(),
        study_text: text,
        study_name: String::new(),
        workload: workload.clone(),
        param,
        metric: String::new(),
        versions,
        settings: Settings {
            better: benchlab_stats::Better::Higher,
            margin_pct: ask.margin_pct,
            rounds: ask.rounds,
        },
        repetitions: ask.repetitions,
        blocks: ask.blocks,
        git,
        quote_values,
        host: host.clone(),
    };
    let last = request.versions.len() - 1;
    let study = request.step_study(reg, 0, last)?;
    request.study_name = study.name.clone();
    let entry = study
        .workloads
        .iter()
        .find(|w| w.name == workload)
        .with_context(|| format!("{file}: no workload `{workload}`"))?;
    let metrics = wl.table_metrics(&entry.base);
    let metric = match &ask.metric {
        Some(m) => metrics.iter().find(|s| s.name == m.as_str()).with_context(|| {
            format!(
                "--metric `{m}`: workload `{workload}` has no table metric of that name (its metrics: {})",
                metrics.iter().map(|s| s.name.to_string()).collect::<Vec<_>>().join(", ")
            )
        })?,
        None => metrics
            .first()
            .with_context(|| format!("workload `{workload}` has no table metric to compare"))?,
    };
    request.metric = metric.name.to_string();
    request.settings.better = metric.better;
    if let Some(git) = &request.git {
        // Both ends first: a build that fails is refused before anything
        // runs.
        git.build(&request.versions[0])
            .context("refused before anything ran: the good version does not build")?;
        git.build(&request.versions[last])
            .context("refused before anything ran: the bad version does not build")?;
    }
    Ok(request)
}
