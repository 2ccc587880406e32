//! What `kind = "samba"` adds to a managed service: Debian's `smbd` as a
//! plain foreground process, its state in the scratch directory, and a
//! test user whose password comes from a secret.
//!
//! - **Process**: `smbd --foreground --no-process-group -s CONF`. Without
//!   `--no-process-group` smbd would make a process group of its own and
//!   leave the one benchlab journals and signals; nmbd and winbindd are
//!   never started (the template disables NetBIOS, and a standalone
//!   server with tdbsam needs neither).
//! - **State**: every directory smbd writes (private, lock, state, cache,
//!   pid, ncalrpc, binddns, the log) is set by the template to a
//!   subdirectory of the scratch directory, made here before smbd starts.
//! - **Test user**: the SMB account is the Unix account `user` (default
//!   `www-data`, present on every Debian system: a new Unix account would
//!   change /etc/passwd, which benchlab does not touch). Its tdbsam entry
//!   is written with `smbpasswd -c CONF -s -a USER`, the password given on
//!   standard input from `secrets.password`, so it never appears in an
//!   argument list, a file of benchlab's or the store.
//! - **Share**: the document root, owned by that user so that the
//!   clients' files are created as it.
//! - **Readiness**: an SMB negotiate request answered with a valid SMB1
//!   or SMB2 negotiate response ([`Probe::Smb`]) unless `probe = "tcp"`
//!   asks for a plain connection.
//! - **Appendix**: the configuration recorded is `testparm -s`'s, the
//!   effective smb.conf with every default smbd resolved.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::spec::{Probe, ServiceKind, ServiceSpec};

/// The secret that holds the test user's password.
pub const PASSWORD_SECRET: &str = "password";

/// The share the shipped template exports.
pub const SHARE: &str = "bench";

/// The directories smbd writes, made in the scratch directory before it
/// starts (the shipped template points every one of them there).
pub const STATE_DIRS: &[&str] = &[
    "private", "lock", "state", "cache", "pid", "ncalrpc", "binddns",
];

/// Checks what a Samba service needs of its spec: the key at fault and
/// what is allowed.
pub(crate) fn validate(spec: &ServiceSpec) -> Result<(), (String, String)> {
    if !matches!(spec.probe, None | Some(Probe::Tcp | Probe::Smb)) {
        return Err((
            "probe".into(),
            "kind = \"samba\" is probed with an SMB negotiate request (probe = \"smb\", its default) or, when asked, a plain connection (probe = \"tcp\"); it speaks neither HTTP nor AMQP".into(),
        ));
    }
    Ok(())
}

/// smbd's arguments.
pub(crate) fn argv(program: &str, config: &Path) -> Vec<String> {
    vec![
        program.into(),
        "--foreground".into(),
        "--no-process-group".into(),
        "-s".into(),
        config.display().to_string(),
    ]
}

/// smbd's version (`smbd -V` prints `Version 4.17.12-Debian`).
pub(crate) fn version(program: &Path) -> Option<String> {
    let out = Command::new(program).arg("-V").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Version "))
        .map(|v| format!("Samba {}", v.trim()))
}

/// smbd needs root: it switches to the test user for every connection.
pub(crate) fn check_root(spec: &ServiceSpec) -> Result<(), (String, String)> {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Err((
            "kind".into(),
            format!(
                "smbd must be started as root on host `{}` (it becomes the test user for each connection)",
                spec.host
            ),
        ));
    }
    Ok(())
}

/// What the start does in the scratch directory once the configuration is
/// written and before smbd starts: the state directories, the share's
/// owner, the test user's tdbsam entry. Returns `testparm -s`'s effective
/// configuration. Errors say which step failed and smbpasswd's words.
pub(crate) fn lay_out(
    scratch: &Path,
    config: &Path,
    share: &Path,
    user: &str,
    password: &str,
) -> Result<String, String> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    for d in STATE_DIRS {
        let dir = scratch.join(d);
        std::fs::create_dir(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        // The password database lives in `private`: root only.
        let mode = if *d == "private" { 0o700 } else { 0o755 };
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("set the mode of {}: {e}", dir.display()))?;
    }
    let (uid, gid) =
        crate::prepare::user_ids(user).ok_or_else(|| format!("user `{user}` does not exist"))?;
    std::os::unix::fs::chown(share, Some(uid), Some(gid))
        .map_err(|e| format!("give the share {} to `{user}`: {e}", share.display()))?;
    let mut child = Command::new("smbpasswd")
        .arg("-c")
        .arg(config)
        .args(["-s", "-a", user])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("run smbpasswd (package samba-common-bin): {e}"))?;
    // `-s`: the new password twice on standard input.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(format!("{password}\n{password}\n").as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("smbpasswd: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "smbpasswd -a {user} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let out = Command::new("testparm")
        .arg("-s")
        .arg(config)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("run testparm: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "testparm -s rejected the configuration: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(format!(
        "# testparm -s (the effective smb.conf)\n{}",
        String::from_utf8_lossy(&out.stdout)
    ))
}

/// Whether a kind is Samba (a helper for the generic code's few branches).
pub(crate) fn is(kind: ServiceKind) -> bool {
    kind == ServiceKind::Samba
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> ServiceSpec {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_samba_service_has_its_password_secret() {
        // None named: the one `benchlab run` generates.
        let s = spec("name='files'\nkind='samba'");
        let plan = s.plan(Path::new("/")).unwrap();
        assert_eq!(
            plan.spec.secrets[PASSWORD_SECRET],
            crate::spec::SecretSource::Env("BENCHLAB_SMB_PASSWORD".into())
        );
        let s = spec("name='files'\nkind='samba'\nsecrets={password={env='PW'}}");
        let plan = s.plan(Path::new("/")).unwrap();
        assert_eq!(plan.template.unwrap().origin, "services/smb.conf");
        // No probe given: the SMB negotiate.
        assert_eq!(plan.spec.probe, Some(Probe::Smb));
        // An explicit plain connection is honoured, not replaced.
        let s = spec("name='f'\nkind='samba'\nsecrets={password={env='PW'}}\nprobe='tcp'");
        assert_eq!(s.plan(Path::new("/")).unwrap().spec.probe, Some(Probe::Tcp));
        let s = spec("name='f'\nkind='samba'\nsecrets={password={env='PW'}}\nprobe={http='/'}");
        assert!(s.validate().unwrap_err().to_string().contains("probe"));
    }

    #[test]
    fn smbd_stays_in_our_process_group() {
        let a = argv("/usr/sbin/smbd", Path::new("/s/smb.conf"));
        assert!(a.contains(&"--foreground".to_string()));
        assert!(a.contains(&"--no-process-group".to_string()));
        assert_eq!(a[a.len() - 2..], ["-s", "/s/smb.conf"]);
    }
}
