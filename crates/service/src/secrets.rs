//! Secret values handed to a service's host by the controller, for hosts
//! that cannot resolve a secret's source themselves: a QEMU guest's agent
//! is started by the guest's init, not by the controller, so it inherits
//! none of the controller's environment (where `{ env = "VAR" }` secrets
//! and the run's generated passwords live).
//!
//! The controller resolves exactly the secrets the service names
//! ([`resolve`], the same resolution a namespace or SSH host makes for
//! itself) and sends the values with the start request over the host's
//! control channel; the agent holds them in memory for that start only.
//! The type never shows a value: its `Debug` masks them, so a request
//! printed in an error or a log line carries none.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::spec::{SecretSource, ServiceSpec};
use crate::ServiceError;

/// Resolved secret values by secret name (`password` → its value).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretValues(BTreeMap<String, String>);

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, crate::MASK)))
            .finish()
    }
}

impl SecretValues {
    /// No secrets: the host resolves each from its source itself.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value handed over for a secret, if one was.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// The names handed over.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// Resolves every secret `spec` names from its source, here (an
/// environment variable of this process, a file of this machine), with
/// the errors a start on this host would give. `host` names where the
/// service runs, for those errors.
pub fn resolve(spec: &ServiceSpec) -> Result<SecretValues, ServiceError> {
    resolve_with(spec, &SecretValues::default()).map(SecretValues)
}

/// Resolves `spec`'s secrets, taking a handed-over value where there is
/// one and the secret's source otherwise.
pub(crate) fn resolve_with(
    spec: &ServiceSpec,
    given: &SecretValues,
) -> Result<BTreeMap<String, String>, ServiceError> {
    let mut out = BTreeMap::new();
    for (name, src) in &spec.secrets {
        let err = |message: String| ServiceError::Spec {
            service: spec.name.clone(),
            key: format!("secrets.{name}"),
            message,
        };
        let value = match (given.get(name), src) {
            (Some(v), _) => v.to_string(),
            (None, SecretSource::Env(var)) => std::env::var(var).map_err(|_| {
                err(format!(
                    "environment variable {var} is not set on host `{}`",
                    spec.host
                ))
            })?,
            (None, SecretSource::File(p)) => {
                let t = std::fs::read_to_string(p)
                    .map_err(|e| err(format!("cannot read {}: {e}", p.display())))?;
                t.strip_suffix('\n')
                    .map(|s| s.strip_suffix('\r').unwrap_or(s))
                    .unwrap_or(&t)
                    .to_string()
            }
        };
        if value.is_empty() {
            return Err(err("is empty".into()));
        }
        out.insert(name.clone(), value);
    }
    // A value for a secret the service does not name is not used: the
    // controller sends only the named ones, and an agent takes no more.
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> ServiceSpec {
        let v: toml::Value = toml::from_str(text).unwrap();
        serde_json::from_value(serde_json::to_value(v).unwrap()).unwrap()
    }

    #[test]
    fn a_handed_over_value_wins_and_is_never_shown() {
        let s = spec(
            "name='mq'\nkind='rabbitmq'\nsecrets={password={env='BENCHLAB_TEST_UNSET_PW_VAR'}}",
        );
        std::env::remove_var("BENCHLAB_TEST_UNSET_PW_VAR");
        let e = resolve(&s).unwrap_err().to_string();
        assert!(
            e.contains("secrets.password") && e.contains("BENCHLAB_TEST_UNSET_PW_VAR"),
            "{e}"
        );
        let given = SecretValues(BTreeMap::from([
            ("password".to_string(), "s3cret-value".to_string()),
            ("other".to_string(), "not-named".to_string()),
        ]));
        let got = resolve_with(&s, &given).unwrap();
        assert_eq!(got.len(), 1, "only the named secret is taken");
        assert_eq!(got["password"], "s3cret-value");
        let shown = format!("{given:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("password"),
            "{shown}"
        );
    }
}
