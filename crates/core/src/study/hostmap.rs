//! A configuration's `hosts = { b1 = "b1-direct" }`: the hosts its
//! workload sides and services run on instead of the study's. Read after
//! the hosts, services and workloads, since a key must name a host that
//! something runs on and the map must leave every workload runnable.

use std::collections::BTreeMap;

use super::{Configs, Ctx, DeValue, ServiceDecl, StudyError, WorkloadEntry};
use crate::param::quoted_list;

impl Ctx<'_> {
    /// Reads every configuration's `hosts` table into its
    /// [`super::Configuration::hosts`] and moves its managed services to
    /// their mapped hosts.
    pub(super) fn host_maps(
        &self,
        configs: &mut Configs,
        host_names: &[&str],
        workloads: &[WorkloadEntry],
        services: &[ServiceDecl],
    ) -> Result<(), StudyError> {
        // What a key may name: a host some workload side or managed
        // service is placed on (an unmanaged service's host is only a
        // label: benchlab connects to its address wherever it is).
        let mut used: Vec<&str> = Vec::new();
        let sides = workloads
            .iter()
            .flat_map(|w| w.servers.iter().chain(&w.client_hosts));
        let managed = services
            .iter()
            .filter(|s| s.address.is_none())
            .map(|s| &s.host);
        for h in sides.chain(managed) {
            if !used.contains(&h.as_str()) {
                used.push(h);
            }
        }
        for (i, (c, v)) in configs.list.iter_mut().zip(&configs.hosts).enumerate() {
            let Some(v) = v else { continue };
            let path = format!("configuration[{i}].hosts");
            let t = self.table(v, &path)?;
            let mut map = BTreeMap::new();
            for (k, to) in t.iter() {
                let from = k.get_ref().to_string();
                let key = format!("{path}.{from}");
                if !host_names.contains(&from.as_str()) {
                    return Err(self.err(
                        k.span(),
                        &key,
                        format!(
                            "no host is named `{from}` (hosts: {}); a key names the study's host to be replaced",
                            quoted_list(host_names)
                        ),
                    ));
                }
                if !used.contains(&from.as_str()) {
                    return Err(self.err(
                        k.span(),
                        &key,
                        format!(
                            "no workload side or managed service runs on `{from}`, so mapping it would change nothing (mappable: {})",
                            quoted_list(&used)
                        ),
                    ));
                }
                let target = match to.get_ref() {
                    DeValue::String(s) => s.to_string(),
                    _ => {
                        return Err(self.err(
                            to.span(),
                            &key,
                            format!("expected a host name (hosts: {})", quoted_list(host_names)),
                        ))
                    }
                };
                if !host_names.contains(&target.as_str()) {
                    return Err(self.err(
                        to.span(),
                        &key,
                        format!(
                            "`{target}` is not a defined host (hosts: {}): define it with [[host]]",
                            quoted_list(host_names)
                        ),
                    ));
                }
                if target == from {
                    return Err(self.err(
                        to.span(),
                        &key,
                        format!("maps `{from}` to itself: leave it out"),
                    ));
                }
                map.insert(from, target);
            }
            c.hosts = map;
            // A workload's targets, and its client hosts, are distinct
            // hosts (one agent and one `metric@host` each): a map that
            // merges two of them is refused, naming the workload.
            for w in workloads {
                for (what, list) in [("targets", &w.servers), ("client hosts", &w.client_hosts)] {
                    for (j, a) in list.iter().enumerate() {
                        if let Some(b) = list[..j].iter().find(|b| c.host(b) == c.host(a)) {
                            let span = t
                                .get(a.as_str())
                                .or_else(|| t.get(b.as_str()))
                                .map(|x| x.span())
                                .unwrap_or(v.span());
                            return Err(self.err(
                                span,
                                &path,
                                format!(
                                    "workload `{}`: its {what} `{b}` and `{a}` would both run on `{}` (each must be a host of its own)",
                                    w.name,
                                    c.host(a)
                                ),
                            ));
                        }
                    }
                }
            }
            for s in c.services.iter_mut().filter(|s| s.address.is_none()) {
                if let Some(to) = c.hosts.get(&s.host) {
                    s.host = to.clone();
                    s.spec["host"] = serde_json::Value::String(to.clone());
                }
            }
        }
        Ok(())
    }
}
