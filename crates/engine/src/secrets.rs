//! Generated secrets: a service whose user benchlab creates (RabbitMQ's
//! broker user, Samba's test user) and whose study names no password gets
//! one made for the run, in the environment variable its kind reads by
//! default ([`benchlab_service::ServiceKind::password_env`]), which the
//! run's agents inherit. It lives in the environment of the run's
//! processes only: never stored, printed or logged. A variable the user
//! set is used as it is.

use benchlab_core::study::Study;
use benchlab_service::ServiceSpec;

/// Sets a fresh password in every unset variable the study's services
/// default to; returns the names set.
pub fn generate_passwords(study: &Study) -> std::io::Result<Vec<&'static str>> {
    let mut set = Vec::new();
    for decl in &study.services {
        let Ok(spec) = serde_json::from_value::<ServiceSpec>(decl.spec.clone()) else {
            // Unmanaged (an address only) or refused when the study was
            // checked: nothing of ours to log into.
            continue;
        };
        let Some(var) = spec.kind.password_env() else {
            continue;
        };
        if spec.secrets.contains_key("password")
            || std::env::var_os(var).is_some()
            || set.contains(&var)
        {
            continue;
        }
        std::env::set_var(var, fresh()?);
        set.push(var);
    }
    Ok(set)
}

/// 24 random bytes from the kernel, hex: a password every server kind
/// takes as it is (no quoting in a config file or on standard input).
fn fresh() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 24];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A samba service without a secret gets one; a rabbitmq service that
    /// names its own is left to it. (This crate's only test that touches
    /// these variables.)
    #[test]
    fn a_service_without_a_password_gets_one_made() {
        let mut reg = benchlab_core::Registry::new();
        reg.add(&benchlab_core::fake::FAKE)
            .set_service_check(crate::check_service);
        let text = r#"
[study]
name = "s"
[[configuration]]
name = "a"
[[service]]
name = "files"
kind = "samba"
[[service]]
name = "mq"
kind = "rabbitmq"
secrets = { password = { env = "BENCHLAB_TEST_OWN_MQ_PASSWORD" } }
[[workload]]
kind = "fake"
"#;
        let study = Study::parse("s.toml", text, &reg).unwrap();
        std::env::remove_var("BENCHLAB_SMB_PASSWORD");
        std::env::remove_var("BENCHLAB_MQ_PASSWORD");
        assert_eq!(
            generate_passwords(&study).unwrap(),
            ["BENCHLAB_SMB_PASSWORD"]
        );
        let pw = std::env::var("BENCHLAB_SMB_PASSWORD").unwrap();
        assert_eq!(pw.len(), 48);
        assert!(std::env::var_os("BENCHLAB_MQ_PASSWORD").is_none());
        assert!(std::env::var_os("BENCHLAB_TEST_OWN_MQ_PASSWORD").is_none());
        // Set now: a second call keeps it (a resumed run, the user's own).
        assert!(generate_passwords(&study).unwrap().is_empty());
        assert_eq!(std::env::var("BENCHLAB_SMB_PASSWORD").unwrap(), pw);
        // The stored study holds where it comes from only.
        assert!(!serde_json::to_string(&study).unwrap().contains(&pw));
    }

    #[test]
    fn fresh_passwords_differ_and_are_plain() {
        let (a, b) = (fresh().unwrap(), fresh().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 48);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
