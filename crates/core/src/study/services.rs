//! `[[service]]`: the real servers a study's workloads drive, and their
//! per-configuration overrides (`service.NAME = { … }` in a
//! `[[configuration]]`). The service's own keys are checked by the
//! registry's service check (the service crate's spec), at the span of the
//! table that holds them, so errors name the file, line, key and what is
//! allowed like every other study error.

use serde::{Deserialize, Serialize};

use super::configurations::Configs;
use super::{Ctx, DeValue, StudyError, Tab, Val, DEFAULT_SERVER_HOST};
use crate::param::quoted_list;
use crate::workload::{Registry, ValidationError};

/// One `[[service]]` of a study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceDecl {
    /// Its name (`web`), as workloads name it.
    pub name: String,
    /// The study's host it runs on.
    pub host: String,
    /// An unmanaged, already running server (`host:port`): benchlab only
    /// connects to it, and starts or observes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The whole table, as the service crate's spec reads it (managed
    /// services only).
    pub spec: serde_json::Value,
}

/// Keys an unmanaged service may have.
const UNMANAGED_KEYS: &[&str] = &["name", "host", "address"];

/// A TOML value as JSON (the service spec is deserialized from JSON).
pub(super) fn to_json(v: &DeValue) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        DeValue::String(s) => J::String(s.to_string()),
        DeValue::Integer(i) => {
            let digits = i.as_str().replace('_', "");
            i64::from_str_radix(
                digits
                    .trim_start_matches("0x")
                    .trim_start_matches("0o")
                    .trim_start_matches("0b"),
                i.radix(),
            )
            .map(J::from)
            .unwrap_or(J::Null)
        }
        DeValue::Float(f) => f
            .as_str()
            .replace('_', "")
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(J::Number)
            .unwrap_or(J::Null),
        DeValue::Boolean(b) => J::Bool(*b),
        DeValue::Datetime(d) => J::String(d.to_string()),
        DeValue::Array(a) => J::Array(a.iter().map(|x| to_json(x.get_ref())).collect()),
        DeValue::Table(t) => J::Object(
            t.iter()
                .map(|(k, x)| (k.get_ref().to_string(), to_json(x.get_ref())))
                .collect(),
        ),
    }
}

impl Ctx<'_> {
    /// The `[[service]]` tables.
    pub(super) fn services(
        &self,
        v: Option<&Val>,
        host_names: &[&str],
        default_host: &str,
        registry: &Registry,
    ) -> Result<Vec<ServiceDecl>, StudyError> {
        let Some(v) = v else {
            return Ok(Vec::new());
        };
        let items = match v.get_ref() {
            DeValue::Array(a) => a,
            _ => {
                return Err(self.err(
                    v.span(),
                    "service",
                    "expected [[service]] entries (a list of tables)",
                ))
            }
        };
        let mut out: Vec<ServiceDecl> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("service[{i}]");
            let t = self.table(item, &path)?;
            let name = match t.get("name") {
                Some(n) => self.string(n, &format!("{path}.name"))?,
                None => return Err(self.err(
                    item.span(),
                    &format!("{path}.name"),
                    "missing: every service needs a name (workloads use it: service = \"NAME\")",
                )),
            };
            if out.iter().any(|s| s.name == name) {
                return Err(self.err(
                    t.get("name").expect("read above").span(),
                    &format!("{path}.name"),
                    format!("`{name}` is defined twice"),
                ));
            }
            let host = match t.get("host") {
                Some(h) => self.choice(h, &format!("{path}.host"), host_names)?,
                None => default_host.to_string(),
            };
            let mut spec = to_json(item.get_ref());
            spec["host"] = serde_json::Value::String(host.clone());
            let address = match t.get("address") {
                Some(a) => {
                    self.check_keys(t, &path, UNMANAGED_KEYS).map_err(|mut e| {
                        e.message = format!(
                            "{} — a service with `address` is not started by benchlab",
                            e.message
                        );
                        e
                    })?;
                    let text = self.string(a, &format!("{path}.address"))?;
                    if text.parse::<std::net::SocketAddr>().is_err() {
                        return Err(self.err(
                            a.span(),
                            &format!("{path}.address"),
                            format!("`{text}` is not an address: expected IP:PORT, e.g. \"10.0.0.2:80\""),
                        ));
                    }
                    Some(text)
                }
                None => {
                    self.check_service(registry, &spec, item, t, &path)?;
                    self.check_argv_hosts(&spec, item, t, &path, host_names)?;
                    None
                }
            };
            out.push(ServiceDecl {
                name,
                host,
                address,
                spec,
            });
        }
        Ok(out)
    }

    /// Every `{{host.NAME}}` of a command's `argv` names a host of the
    /// study (the engine gives the service its address).
    fn check_argv_hosts(
        &self,
        spec: &serde_json::Value,
        item: &Val,
        t: &Tab,
        path: &str,
        host_names: &[&str],
    ) -> Result<(), StudyError> {
        let Some(argv) = spec.get("argv").and_then(|a| a.as_array()) else {
            return Ok(());
        };
        for (i, a) in argv.iter().enumerate() {
            let mut rest = a.as_str().unwrap_or_default();
            while let Some(start) = rest.find("{{") {
                let after = &rest[start + 2..];
                let Some(end) = after.find("}}") else { break };
                if let Some(host) = after[..end].trim().strip_prefix("host.") {
                    if !host_names.contains(&host) {
                        let span = t.get("argv").map(|v| v.span()).unwrap_or(item.span());
                        return Err(self.err(
                            span,
                            &format!("{path}.argv[{i}]"),
                            format!(
                                "`{{{{host.{host}}}}}`: no host is named `{host}` (hosts: {}); define it with [[host]]",
                                quoted_list(host_names)
                            ),
                        ));
                    }
                }
                rest = &after[end + 2..];
            }
        }
        Ok(())
    }

    /// Runs the registry's service check on a spec; its error names a key
    /// of `t` where it can.
    pub(super) fn check_service(
        &self,
        registry: &Registry,
        spec: &serde_json::Value,
        item: &Val,
        t: &Tab,
        path: &str,
    ) -> Result<(), StudyError> {
        let Some(check) = registry.service_check() else {
            return Ok(());
        };
        check(spec).map_err(|e| {
            let ValidationError { key, message } = e;
            let span = t.get(key.as_str()).map(|v| v.span()).unwrap_or(item.span());
            let key = if key.is_empty() {
                path.to_string()
            } else {
                format!("{path}.{key}")
            };
            self.err(span, &key, message)
        })
    }

    /// A configuration's `service = { NAME = { key = value … } }`: each
    /// override merged over its service's table and checked whole.
    pub(super) fn service_overrides(
        &self,
        v: &Val,
        path: &str,
        services: &[ServiceDecl],
        registry: &Registry,
    ) -> Result<Vec<ServiceDecl>, StudyError> {
        let t = self.table(v, path)?;
        let mut out = Vec::new();
        for (k, item) in t.iter() {
            let name = k.get_ref().to_string();
            let key = format!("{path}.{name}");
            let Some(base) = services.iter().find(|s| s.name == name) else {
                let names: Vec<&str> = services.iter().map(|s| s.name.as_str()).collect();
                return Err(self.err(
                    k.span(),
                    &key,
                    format!(
                        "no [[service]] is named `{name}` (services: {})",
                        quoted_list(&names)
                    ),
                ));
            };
            if base.address.is_some() {
                return Err(self.err(
                    k.span(),
                    &key,
                    "an unmanaged service (`address`) has nothing to override",
                ));
            }
            let over = self.table(item, &key)?;
            for fixed in ["name", "host"] {
                if let Some(n) = over.get(fixed) {
                    return Err(self.err(
                        n.span(),
                        &format!("{key}.{fixed}"),
                        format!(
                            "a service's {fixed} cannot be overridden (define another [[service]])"
                        ),
                    ));
                }
            }
            let mut spec = base.spec.clone();
            if let (Some(obj), serde_json::Value::Object(o)) =
                (spec.as_object_mut(), to_json(item.get_ref()))
            {
                for (k, v) in o {
                    obj.insert(k, v);
                }
            }
            self.check_service(registry, &spec, item, over, &key)?;
            let host = spec["host"].as_str().unwrap_or(&base.host).to_string();
            out.push(ServiceDecl {
                name,
                host,
                address: None,
                spec,
            });
        }
        Ok(out)
    }
}

impl Ctx<'_> {
    /// `[[service]]`, and each configuration's view of the services (its
    /// `service.NAME` overrides applied).
    pub(super) fn configured_services(
        &self,
        doc: &Tab,
        host_names: &[&str],
        configs: &mut Configs,
        registry: &Registry,
    ) -> Result<Vec<ServiceDecl>, StudyError> {
        let configurations = &mut configs.list;
        let config_services = &configs.services;
        let services = self.services(
            doc.get("service"),
            host_names,
            DEFAULT_SERVER_HOST,
            registry,
        )?;
        for (i, (c, over)) in configurations.iter_mut().zip(config_services).enumerate() {
            c.services = services.clone();
            if let Some(v) = over {
                let path = format!("configuration[{i}].service");
                for o in self.service_overrides(v, &path, &services, registry)? {
                    if let Some(slot) = c.services.iter_mut().find(|s| s.name == o.name) {
                        *slot = o;
                    }
                }
            }
        }

        Ok(services)
    }
}
