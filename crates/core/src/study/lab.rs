//! Hosts from outside the study: a lab file (`--hosts FILE`, `[[host]]`
//! tables as in a study) and `--host ROLE=SPEC` overrides, so that one
//! study file runs on this machine by default and on a lab's machines
//! unchanged — as the seeds ran, with a separate system under test and
//! traffic generator.

use super::{Ctx, DeTable, Host, Study, StudyError};

/// The forms `--host ROLE=SPEC` takes, for error messages.
pub const HOST_SPEC_FORMS: &str =
    "local, ssh:USER@HOST, netns:NAME@ADDRESS, agent:HOST:PORT,key=FILE";

/// The `[[host]]` tables of a lab file or of one `--host` option.
fn parse_hosts(file: &str, text: &str) -> Result<Vec<Host>, StudyError> {
    let cx = Ctx { file, text };
    let doc = DeTable::parse(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let msg = e.message().trim().to_string();
        cx.err(span, "", format!("not valid TOML: {msg}"))
    })?;
    let doc = doc.get_ref();
    cx.check_keys(doc, "", &["host"])?;
    let given = match doc.get("host").map(|v| v.get_ref()) {
        Some(toml::de::DeValue::Array(a)) => a.len(),
        _ => 0,
    };
    let mut hosts = cx.hosts(doc)?;
    // The section adds the local defaults it did not find: not given here.
    hosts.truncate(given);
    Ok(hosts)
}

/// The hosts a lab file describes (`[[host]]` tables as in a study):
/// what a lab's worker may use (`benchlab worker --hosts`).
pub fn lab_hosts(file: &str, text: &str) -> Result<Vec<Host>, StudyError> {
    parse_hosts(file, text)
}

/// `ROLE=SPEC` as a `[[host]]` table.
fn host_option(option: &str) -> Result<String, String> {
    let (role, spec) = option
        .split_once('=')
        .ok_or_else(|| format!("expected ROLE=SPEC, SPEC one of {HOST_SPEC_FORMS}"))?;
    let q = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let mut t = format!("[[host]]\nname = {}\n", q(role.trim()));
    let spec = spec.trim();
    if spec == "local" {
        t.push_str("local = true\n");
    } else if let Some(dest) = spec.strip_prefix("ssh:") {
        t.push_str(&format!("ssh = {}\n", q(dest)));
    } else if let Some(rest) = spec.strip_prefix("netns:") {
        let (name, addr) = rest.split_once('@').ok_or_else(|| {
            "a namespace host needs its data address: netns:NAME@ADDRESS".to_string()
        })?;
        t.push_str(&format!("netns = {}\naddress = {}\n", q(name), q(addr)));
    } else if let Some(rest) = spec.strip_prefix("agent:") {
        let (addr, key) = rest.split_once(",key=").ok_or_else(|| {
            "an agent host needs its key file: agent:HOST:PORT,key=FILE".to_string()
        })?;
        t.push_str(&format!("agent = {}\nkey_file = {}\n", q(addr), q(key)));
    } else {
        return Err(format!(
            "unknown host form `{spec}` (allowed: {HOST_SPEC_FORMS})"
        ));
    }
    Ok(t)
}

impl Study {
    /// Places the study's hosts from a lab file (`lab`: its name and text)
    /// and `--host ROLE=SPEC` options, applied in that order: each replaces
    /// the study's host of the same name (a lab file may describe hosts
    /// this study does not use; an option must name one it does).
    pub fn place_hosts(
        &mut self,
        lab: Option<(&str, &str)>,
        options: &[String],
    ) -> Result<(), StudyError> {
        let mut placed: Vec<Host> = Vec::new();
        if let Some((file, text)) = lab {
            placed.extend(parse_hosts(file, text)?);
        }
        for o in options {
            let text = host_option(o).map_err(|message| StudyError {
                file: "--host".into(),
                line: 0,
                column: 0,
                key: o.clone(),
                message,
            })?;
            let hosts = parse_hosts(&format!("--host {o}"), &text)?;
            let h = hosts.into_iter().next().expect("one host");
            if !self.hosts.iter().any(|x| x.name == h.name) {
                let names: Vec<&str> = self.hosts.iter().map(|x| x.name.as_str()).collect();
                return Err(StudyError {
                    file: "--host".into(),
                    line: 0,
                    column: 0,
                    key: o.clone(),
                    message: format!(
                        "the study has no host `{}` (hosts: {})",
                        h.name,
                        crate::param::quoted_list(&names)
                    ),
                });
            }
            placed.retain(|p| p.name != h.name);
            placed.push(h);
        }
        for p in placed {
            if let Some(slot) = self.hosts.iter_mut().find(|h| h.name == p.name) {
                *slot = p;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::Transport;

    fn study() -> Study {
        let mut reg = crate::workload::Registry::new();
        reg.add(&crate::fake::FAKE);
        Study::parse(
            "s.toml",
            "[study]\nname = \"s\"\n[[workload]]\nkind = \"fake\"\n",
            &reg,
        )
        .unwrap()
    }

    #[test]
    fn a_lab_file_and_options_place_the_roles() {
        let mut s = study();
        let lab = "[[host]]\nname = \"sut\"\nssh = \"root@10.0.0.2\"\n[[host]]\nname = \"other\"\nlocal = true\n";
        s.place_hosts(
            Some(("lab.toml", lab)),
            &["generator=netns:bl-gen@10.9.0.2".to_string()],
        )
        .unwrap();
        let sut = s.host("sut");
        assert!(
            matches!(&sut.transport, Transport::Ssh { destination, .. } if destination == "root@10.0.0.2")
        );
        let gen = s.host("generator");
        assert_eq!(gen.transport, Transport::Netns("bl-gen".into()));
        assert_eq!(gen.address.as_deref(), Some("10.9.0.2"));
        // A lab host the study does not use is ignored.
        assert!(s.hosts.iter().all(|h| h.name != "other"));
    }

    #[test]
    fn bad_options_name_what_is_allowed() {
        let mut s = study();
        let e = s
            .place_hosts(None, &["sut=ftp:x".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ssh:USER@HOST"), "{e}");
        let e = s
            .place_hosts(None, &["db=local".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no host `db`") && e.contains("\"sut\""), "{e}");
        let e = s
            .place_hosts(None, &["sut=netns:x".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("netns:NAME@ADDRESS"), "{e}");
        let e = s
            .place_hosts(
                Some(("lab.toml", "[[host]]\nname = \"sut\"\nnetns = \"x\"\n")),
                &[],
            )
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("lab.toml:"), "{e}");
    }
}
