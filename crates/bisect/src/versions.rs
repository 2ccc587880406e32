//! The ordered versions of a bisection and what a version is run as:
//! git revisions built by a command into a directory each, or the plain
//! values of a study key.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// One version of the ordered list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    /// What the command prints: a short revision and its subject, or the
    /// value.
    pub label: String,
    /// The value the bisected key takes for it (a git version: its build
    /// directory).
    pub value: String,
    /// A git version's full revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// Where git versions come from and how each is built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitSource {
    /// The repository.
    pub repo: PathBuf,
    /// The build command, run with `sh -c` in a version's directory.
    pub build: String,
    /// Where the versions' directories are made.
    pub builds: PathBuf,
}

/// Lines of a failed build's output shown in its error.
const BUILD_TAIL_LINES: usize = 15;

fn git(repo: &Path, args: &[&str]) -> Result<std::process::Output> {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .with_context(|| format!("cannot run git in {}", repo.display()))
}

fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The full revision `rev` names; an error naming `key` when it names none.
pub fn resolve(repo: &Path, key: &str, rev: &str) -> Result<String> {
    let out = git(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )?;
    if !out.status.success() {
        bail!(
            "{key} {rev}: no such revision in the repository {} (`git -C {} log --oneline` lists them)",
            repo.display(),
            repo.display()
        );
    }
    Ok(stdout_of(&out))
}

impl GitSource {
    /// The versions from `good` to `bad` along the first-parent line:
    /// good first, bad last.
    pub fn versions(&self, good: &str, bad: &str) -> Result<Vec<Version>> {
        let repo = &self.repo;
        if !repo.join(".git").exists() && !git(repo, &["rev-parse", "--git-dir"])?.status.success()
        {
            bail!("--repo {}: not a git repository", repo.display());
        }
        let good = resolve(repo, "--good", good)?;
        let bad = resolve(repo, "--bad", bad)?;
        if good == bad {
            bail!("--good and --bad name the same revision {good}: nothing to bisect");
        }
        let ancestor = git(repo, &["merge-base", "--is-ancestor", &good, &bad])?;
        if !ancestor.status.success() {
            bail!("--good {good} is not an ancestor of --bad {bad}: a bisection needs good before bad on one line of history");
        }
        let list = git(
            repo,
            &[
                "rev-list",
                "--reverse",
                "--first-parent",
                "--ancestry-path",
                &format!("{good}..{bad}"),
            ],
        )?;
        let mut revs = vec![good];
        revs.extend(stdout_of(&list).lines().map(str::to_string));
        revs.iter()
            .map(|rev| {
                let subject = stdout_of(&git(repo, &["log", "-1", "--format=%h %s", rev])?);
                Ok(Version {
                    label: subject,
                    value: self.dir(rev).display().to_string(),
                    revision: Some(rev.clone()),
                })
            })
            .collect()
    }

    fn dir(&self, rev: &str) -> PathBuf {
        self.builds.join(rev)
    }

    /// Builds a version unless an earlier call did: its tree exported
    /// from git into its directory, the build command run there. A failed
    /// build names the version and shows its output's last lines.
    pub fn build(&self, v: &Version) -> Result<()> {
        let Some(rev) = &v.revision else {
            bail!("version `{}` has no revision", v.label);
        };
        let dir = self.dir(rev);
        let done = dir.join(".benchlab-built");
        if done.exists() {
            return Ok(());
        }
        if dir.exists() {
            // A build interrupted half-way: start it afresh.
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("cannot remove {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let export = Command::new("sh")
            .arg("-c")
            .arg("git -C \"$1\" archive --format=tar \"$2\" | tar -x -C \"$3\"")
            .arg("sh")
            .arg(&self.repo)
            .arg(rev)
            .arg(&dir)
            .output()
            .context("cannot run git archive")?;
        if !export.status.success() {
            bail!(
                "cannot export {} into {}: {}",
                v.label,
                dir.display(),
                String::from_utf8_lossy(&export.stderr).trim()
            );
        }
        let out = Command::new("sh")
            .arg("-c")
            .arg(&self.build)
            .current_dir(&dir)
            .stdin(std::process::Stdio::null())
            .output()
            .with_context(|| format!("cannot run the build command `{}`", self.build))?;
        if !out.status.success() {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(BUILD_TAIL_LINES)..].join("\n");
            bail!(
                "--build `{}` failed for {} ({}) in {}: {}; its last lines:\n{tail}",
                self.build,
                v.label,
                rev,
                dir.display(),
                out.status
            );
        }
        std::fs::write(&done, b"").with_context(|| format!("cannot write {}", done.display()))?;
        Ok(())
    }
}

/// The versions of `--values a,b,c`: good first, bad last.
pub fn plain(values: &[String]) -> Result<Vec<Version>> {
    if values.len() < 2 {
        bail!(
            "--values: {} value(s) given; a bisection needs at least two, the good first and the bad last",
            values.len()
        );
    }
    Ok(values
        .iter()
        .map(|v| Version {
            label: v.clone(),
            value: v.clone(),
            revision: None,
        })
        .collect())
}
