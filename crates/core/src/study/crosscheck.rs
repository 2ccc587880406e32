//! `[[study.crosscheck]]`: a native workload paired with a classic tool
//! run on the same hosts and configurations ("does your native netperf
//! agree with netperf?"); the report prints their ratio per point.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::values::join;
use super::{Ctx, DeValue, StudyError, Tab, WorkloadEntry};
use crate::param::quoted_list;
use crate::workload::Registry;

/// One pairing of a native workload with a classic tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Crosscheck {
    /// The native workload's name (`stream`).
    pub native: String,
    /// The classic tool's workload name (`iperf3`).
    pub classic: String,
    /// The native figure compared (default: its first table metric).
    pub native_metric: String,
    /// The classic figure compared (default: its first table metric).
    pub classic_metric: String,
    /// Native parameter → classic parameter whose values must be equal
    /// for two points to pair (`message_size = "message_size"`).
    pub map: BTreeMap<String, String>,
    /// Native parameters fixed to a value (`protocol = "tcp"`): only those
    /// points pair.
    #[serde(default)]
    pub when: BTreeMap<String, String>,
}

const KEYS: &[&str] = &[
    "native",
    "classic",
    "native_metric",
    "classic_metric",
    "map",
    "where",
];

impl Ctx<'_> {
    /// `[[study.crosscheck]]`, read once the workloads are known.
    pub(super) fn crosschecks(
        &self,
        doc: &Tab,
        workloads: &[WorkloadEntry],
        registry: &Registry,
    ) -> Result<Vec<Crosscheck>, StudyError> {
        let entries = self.study_entries(doc, "crosscheck", KEYS, "a list of tables")?;
        let names: Vec<&str> = workloads.iter().map(|w| w.name.as_str()).collect();
        let mut out = Vec::new();
        for (path, item, t) in entries {
            // A workload by name, or by kind when one workload has it
            // (`classic = "tool.iperf3"`).
            let workload = |key: &str| -> Result<&WorkloadEntry, StudyError> {
                let k = join(&path, key);
                let v = t
                    .get(key)
                    .ok_or_else(|| self.err(item.span(), &k, "missing: a workload's name"))?;
                let s = self.string(v, &k)?;
                let by_kind: Vec<&WorkloadEntry> =
                    workloads.iter().filter(|w| w.kind == s).collect();
                workloads
                    .iter()
                    .find(|w| w.name == s)
                    .or(if by_kind.len() == 1 {
                        Some(by_kind[0])
                    } else {
                        None
                    })
                    .ok_or_else(|| {
                        self.err(
                            v.span(),
                            &k,
                            format!(
                                "`{s}` is not a workload of this study (workloads: {})",
                                quoted_list(&names)
                            ),
                        )
                    })
            };
            let native = workload("native")?;
            let classic = workload("classic")?;
            if native.name == classic.name {
                return Err(self.err(
                    item.span(),
                    &path,
                    "native and classic name the same workload",
                ));
            }
            let metric = |key: &str, w: &WorkloadEntry| -> Result<String, StudyError> {
                let wl = registry.get(&w.kind).expect("validated workload");
                let point = w.points().into_iter().next().unwrap_or_default();
                let known: Vec<&str> = wl.metrics(&point).iter().map(|m| m.name).collect();
                match t.get(key) {
                    None => Ok(wl
                        .table_metrics(&point)
                        .first()
                        .map(|m| m.name.to_string())
                        .unwrap_or_default()),
                    Some(v) => self.choice(v, &join(&path, key), &known),
                }
            };
            let native_metric = metric("native_metric", native)?;
            let classic_metric = metric("classic_metric", classic)?;
            let params_of = |w: &WorkloadEntry| -> Vec<&'static str> {
                registry
                    .get(&w.kind)
                    .expect("validated workload")
                    .params()
                    .iter()
                    .map(|p| p.name)
                    .collect()
            };
            let (np, cp) = (params_of(native), params_of(classic));
            let mut map = BTreeMap::new();
            if let Some(m) = t.get("map") {
                let mt = self.table(m, &join(&path, "map"))?;
                for (k, v) in mt.iter() {
                    let key = join(&join(&path, "map"), k.get_ref());
                    if !np.contains(&k.get_ref().as_ref()) {
                        return Err(self.err(
                            k.span(),
                            &key,
                            format!(
                                "`{}` is not a parameter of `{}` (its parameters: {})",
                                k.get_ref(),
                                native.kind,
                                quoted_list(&np)
                            ),
                        ));
                    }
                    let c = self.choice(v, &key, &cp)?;
                    map.insert(k.get_ref().to_string(), c);
                }
            }
            let mut when = BTreeMap::new();
            if let Some(m) = t.get("where") {
                let mt = self.table(m, &join(&path, "where"))?;
                for (k, v) in mt.iter() {
                    let key = join(&join(&path, "where"), k.get_ref());
                    if !np.contains(&k.get_ref().as_ref()) {
                        return Err(self.err(
                            k.span(),
                            &key,
                            format!("`{}` is not a parameter of `{}`", k.get_ref(), native.kind),
                        ));
                    }
                    let value = match v.get_ref() {
                        DeValue::String(s) => s.to_string(),
                        DeValue::Integer(i) => i.as_str().replace('_', ""),
                        DeValue::Boolean(b) => b.to_string(),
                        _ => {
                            return Err(self.err(
                                v.span(),
                                &key,
                                "expected a string, an integer or a boolean",
                            ))
                        }
                    };
                    when.insert(k.get_ref().to_string(), value);
                }
            }
            out.push(Crosscheck {
                native: native.name.clone(),
                classic: classic.name.clone(),
                native_metric,
                classic_metric,
                map,
                when,
            });
        }
        Ok(out)
    }
}
