//! `[[workload]]`: each workload's parameters and sweeps, its hosts and
//! services, checked against its option table and, on every expanded
//! point, against its own rules.

use super::{
    Adaptive, Configs, Ctx, DeValue, Defaults, Margins, ServiceDecl, StudyError, Tab, Val,
};
use super::{DEFAULT_CLIENT_HOST, DEFAULT_SERVER_HOST};
use crate::param::{quoted_list, ParamDefault, Params, Value};
use crate::shape::ServerSide;
use crate::workload::{Registry, Workload};

/// One `[[workload]]`, validated.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkloadEntry {
    /// Unique name (default: the kind, numbered when repeated).
    pub name: String,
    /// The workload kind.
    pub kind: String,
    /// Repetitions of each point (with `adaptive`: the most).
    pub repetitions: u32,
    /// Adaptive repetitions, when `repetitions` is a table.
    pub adaptive: Option<Adaptive>,
    /// Pause after each unit, s.
    pub quiesce_s: f64,
    /// The parameter that forms table rows.
    pub rows: String,
    /// Swept parameters with their values, in the workload's parameter order.
    pub axes: Vec<(String, Vec<Value>)>,
    /// Parameters with a single value (given or default).
    pub base: Params,
    /// Per configuration, the parameters its `set` table overrides.
    pub overrides: Vec<Params>,
    /// Hosts of the server side: one, or several `targets` driven at once.
    pub servers: Vec<String>,
    /// Host of the client side(s): the first of `client_hosts`.
    pub client: String,
    /// Every client (load generator) host; several only for a workload
    /// with a clients axis, whose clients are spread over them.
    #[serde(default)]
    pub client_hosts: Vec<String>,
    /// The services it drives (a service workload): one target each.
    #[serde(default)]
    pub services: Vec<String>,
    /// Call-stack sampling of its points (`stacks`, else the study's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<super::Stacks>,
    /// `margin`: this workload's smallest differences that matter (see
    /// [`super::Study::margin_pct`]).
    #[serde(default, skip_serializing_if = "Margins::is_empty")]
    pub margin: Margins,
}

/// Swept parameters with their values ([`WorkloadEntry::axes`]).
type Axes = Vec<(String, Vec<Value>)>;

/// Keys of `[[workload]]` that are not workload parameters.
const WORKLOAD_RESERVED: &[&str] = &[
    "kind",
    "name",
    "repetitions",
    "quiesce_s",
    "rows",
    "server",
    "client",
    "targets",
    "service",
    "stacks",
    "margin",
];

/// The most points one workload may sweep: far beyond any study that could
/// finish (each point is measured at least twice per configuration), and
/// small enough that expanding the points is harmless.
pub const MAX_POINTS: usize = 10_000;

impl WorkloadEntry {
    /// The points of this workload: the cartesian product of its axes, the
    /// first axis outermost, each merged over the fixed parameters.
    pub fn points(&self) -> Vec<Params> {
        let mut points = vec![self.base.clone()];
        for (name, values) in &self.axes {
            let mut next = Vec::with_capacity(points.len() * values.len());
            for p in &points {
                for v in values {
                    let mut q = p.clone();
                    q.set(name, v.clone());
                    next.push(q);
                }
            }
            points = next;
        }
        points
    }

    /// A short label of a point: its swept values (`protocol=tcp message_size=1024`).
    pub fn label(&self, params: &Params) -> String {
        let parts: Vec<String> = self
            .axes
            .iter()
            .map(|(n, _)| {
                format!(
                    "{n}={}",
                    params.get(n).map(|v| v.label()).unwrap_or_default()
                )
            })
            .collect();
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(" ")
        }
    }
}

/// What every `[[workload]]` is read against: the sections read before
/// it.
pub(super) struct Known<'k, 'i> {
    pub(super) defaults: &'k Defaults,
    pub(super) configs: &'k Configs<'i>,
    pub(super) host_names: &'k [&'k str],
    pub(super) services: &'k [ServiceDecl],
    pub(super) registry: &'k Registry,
    /// `[study] stacks`, for the workloads that do not say.
    pub(super) stacks: Option<super::Stacks>,
}

/// The `[[workload]]` table being read, once its kind is known.
#[derive(Clone, Copy)]
struct Item<'w, 'i> {
    /// The table.
    t: &'w Tab<'i>,
    /// The whole entry, for errors about a missing key.
    item: &'w Val<'i>,
    /// `workload[i]`.
    path: &'w str,
    /// Its `kind`.
    kind: &'w str,
    /// That kind's workload.
    wl: &'w dyn Workload,
}

impl Ctx<'_> {
    /// `[[workload]]`: each validated against its workload's option table
    /// and rules, with every configuration's `set` applied; a `set` key no
    /// workload has is an error.
    pub(super) fn workloads(
        &self,
        doc: &Tab,
        known: &Known,
    ) -> Result<Vec<WorkloadEntry>, StudyError> {
        let items = self.workload_items(doc, known.registry)?;
        let mut workloads: Vec<WorkloadEntry> = Vec::new();
        let mut used_set_keys: Vec<Vec<bool>> = known
            .configs
            .sets
            .iter()
            .map(|set| vec![false; set.len()])
            .collect();
        for (i, item) in items.iter().enumerate() {
            let path = format!("workload[{i}]");
            let entry = self.workload(item, &path, &workloads, known, &mut used_set_keys)?;
            workloads.push(entry);
        }
        self.unused_set_keys(known.configs, &used_set_keys)?;
        Ok(workloads)
    }

    /// The `[[workload]]` list: present and not empty.
    fn workload_items<'t, 'i>(
        &self,
        doc: &'t Tab<'i>,
        registry: &Registry,
    ) -> Result<&'t [Val<'i>], StudyError> {
        match doc.get("workload") {
            Some(v) => match v.get_ref() {
                DeValue::Array(a) if !a.is_empty() => Ok(a),
                _ => Err(self.err(
                    v.span(),
                    "workload",
                    "expected [[workload]] entries (a list of tables)",
                )),
            },
            None => Err(self.err(
                0..0,
                "workload",
                format!(
                    "missing: a study needs at least one [[workload]] (kinds: {})",
                    registry.kinds().join(", ")
                ),
            )),
        }
    }

    /// One `[[workload]]`; `before` are the entries read so far, and
    /// `used_set_keys` marks the configurations' `set` keys it takes.
    fn workload(
        &self,
        item: &Val,
        path: &str,
        before: &[WorkloadEntry],
        known: &Known,
        used_set_keys: &mut [Vec<bool>],
    ) -> Result<WorkloadEntry, StudyError> {
        let t = self.table(item, path)?;
        let (kind, wl) = self.workload_kind(t, item, path, known.registry)?;
        let mut allowed: Vec<&str> = WORKLOAD_RESERVED.to_vec();
        allowed.extend(wl.params().iter().map(|p| p.name));
        self.check_keys(t, path, &allowed)?;
        let w = Item {
            t,
            item,
            path,
            kind: &kind,
            wl,
        };

        let name = self.workload_name(&w, before)?;
        let (repetitions, adaptive) = match t.get("repetitions") {
            Some(r) => self.repetitions(r, &format!("{path}.repetitions"))?,
            None => (known.defaults.repetitions, known.defaults.adaptive),
        };
        let quiesce_s = match t.get("quiesce_s") {
            Some(q) => self.seconds(q, &format!("{path}.quiesce_s"))?,
            None => known.defaults.quiesce_s,
        };
        let margin = match t.get("margin") {
            Some(m) => self.margins(m, &format!("{path}.margin"))?,
            None => Margins::default(),
        };
        let (axes, base) = self.workload_params(&w, known.defaults)?;
        let rows = self.workload_rows(&w, &axes)?;
        let overrides = self.set_overrides(wl, known.configs, used_set_keys)?;
        let client_hosts = self.client_hosts(&w, known.host_names)?;
        let client = client_hosts[0].clone();
        let servers = self.server_hosts(&w, known.host_names)?;
        let service_names = self.workload_services(&w, known.services)?;
        let servers = self
            .service_targets(&w, &service_names, known.services)?
            .unwrap_or(servers);
        let stacks = match t.get("stacks") {
            Some(v) => self.stacks(v, &format!("{path}.stacks"), known.stacks)?,
            None => known.stacks,
        };
        let entry = WorkloadEntry {
            stacks,
            services: service_names,
            name,
            kind: kind.clone(),
            repetitions,
            adaptive,
            quiesce_s,
            rows,
            axes,
            base,
            overrides,
            servers,
            client,
            client_hosts,
            margin,
        };
        self.check_points(&w, &entry, known.host_names)?;
        if let Some(m) = t.get("margin") {
            self.check_margin_metrics(
                m,
                &format!("{path}.margin"),
                &entry.margin,
                &[(&entry, wl)],
            )?;
        }
        Ok(entry)
    }

    /// `kind`: a workload the registry knows.
    fn workload_kind<'r>(
        &self,
        t: &Tab,
        item: &Val,
        path: &str,
        registry: &'r Registry,
    ) -> Result<(String, &'r dyn Workload), StudyError> {
        let kind = match t.get("kind") {
            Some(k) => self.string(k, &format!("{path}.kind"))?,
            None => {
                return Err(self.err(
                    item.span(),
                    &format!("{path}.kind"),
                    format!(
                        "missing: every workload needs a kind (one of {})",
                        registry.kinds().join(", ")
                    ),
                ))
            }
        };
        match registry.get(&kind) {
            Some(w) => Ok((kind, w)),
            None => Err(self.err(
                t.get("kind").unwrap().span(),
                &format!("{path}.kind"),
                format!(
                    "unknown workload `{kind}` (known: {})",
                    registry.kinds().join(", ")
                ),
            )),
        }
    }

    /// `name`, unique among the workloads (default: the kind, numbered
    /// when repeated).
    fn workload_name(&self, w: &Item, before: &[WorkloadEntry]) -> Result<String, StudyError> {
        let Item {
            t,
            item,
            path,
            kind,
            ..
        } = *w;
        let name = match t.get("name") {
            Some(n) => self.string(n, &format!("{path}.name"))?,
            None => {
                let same = before.iter().filter(|w| w.kind == kind).count();
                if same == 0 {
                    kind.to_string()
                } else {
                    format!("{kind}#{}", same + 1)
                }
            }
        };
        if before.iter().any(|w| w.name == name) {
            return Err(self.err(
                t.get("name").map(|n| n.span()).unwrap_or(item.span()),
                &format!("{path}.name"),
                format!("workload name `{name}` is used twice: give each workload a unique name"),
            ));
        }
        Ok(name)
    }

    /// The workload's parameters: the swept ones (axes) and those with
    /// one value, given or default (base).
    fn workload_params(&self, w: &Item, defaults: &Defaults) -> Result<(Axes, Params), StudyError> {
        let Item {
            t, item, path, wl, ..
        } = *w;
        let mut axes = Vec::new();
        let mut base = Params::default();
        for spec in wl.params() {
            let key = format!("{path}.{}", spec.name);
            match t.get(spec.name) {
                Some(v) => {
                    let values = self.param_values(v, &key, spec.kind)?;
                    if values.len() == 1 {
                        base.set(spec.name, values.into_iter().next().unwrap());
                    } else {
                        // Bounded here, before anything multiplies the
                        // axes out (the fuzzer's find: five 64-value
                        // ranges asked for 10^9 points and ran out of
                        // memory).
                        let points: usize = axes
                            .iter()
                            .map(|(_, v): &(String, Vec<Value>)| v.len())
                            .chain([values.len()])
                            .try_fold(1usize, |n, k| n.checked_mul(k))
                            .unwrap_or(usize::MAX);
                        if points > MAX_POINTS {
                            let swept: Vec<String> = axes
                                .iter()
                                .map(|(n, v)| format!("{n} ({})", v.len()))
                                .chain([format!("{} ({})", spec.name, values.len())])
                                .collect();
                            return Err(self.err(
                                v.span(),
                                &key,
                                format!(
                                    "the sweep has more than {MAX_POINTS} points (values per \
                                     axis: {}); split the workload or sweep fewer values",
                                    swept.join(" × ")
                                ),
                            ));
                        }
                        axes.push((spec.name.to_string(), values));
                    }
                }
                None => {
                    let value = match spec.default {
                        ParamDefault::Study => match spec.name {
                            "duration_s" => Some(Value::Float(defaults.duration_s)),
                            "warmup_s" => Some(Value::Float(defaults.warmup_s)),
                            other => unreachable!("no study default for `{other}`"),
                        },
                        d => Value::from_default(d),
                    };
                    if let Some(value) = value {
                        base.set(spec.name, value);
                    }
                }
            }
        }
        if let Some(Value::Float(d)) = base.get("duration_s") {
            if *d <= 0.0 {
                return Err(self.err(
                    t.get("duration_s").map(|v| v.span()).unwrap_or(item.span()),
                    &format!("{path}.duration_s"),
                    "must be more than 0 seconds",
                ));
            }
        }
        Ok((axes, base))
    }

    /// `rows`: the parameter that forms table rows (default: the
    /// workload's row parameter when it is swept or nothing is, else the
    /// last axis).
    fn workload_rows(&self, w: &Item, axes: &[(String, Vec<Value>)]) -> Result<String, StudyError> {
        let Item { t, path, wl, .. } = *w;
        match t.get("rows") {
            Some(r) => {
                let names: Vec<&str> = wl.params().iter().map(|p| p.name).collect();
                self.choice(r, &format!("{path}.rows"), &names)
            }
            None => {
                let default = wl.row_param();
                if axes.iter().any(|(n, _)| n == default) || axes.is_empty() {
                    Ok(default.to_string())
                } else {
                    Ok(axes.last().unwrap().0.clone())
                }
            }
        }
    }

    /// Per configuration, the parameters of this workload its `set`
    /// table overrides (marked used in `used_set_keys`).
    fn set_overrides(
        &self,
        wl: &dyn Workload,
        configs: &Configs,
        used_set_keys: &mut [Vec<bool>],
    ) -> Result<Vec<Params>, StudyError> {
        let mut overrides = Vec::with_capacity(configs.list.len());
        for (c, set) in configs.sets.iter().enumerate() {
            let mut o = Params::default();
            for (j, (k, v)) in set.iter().enumerate() {
                if let Some(spec) = wl.params().iter().find(|p| p.name == k) {
                    let key = format!("configuration[{c}].set.{k}");
                    o.set(k, self.scalar(v, &key, spec.kind)?);
                    used_set_keys[c][j] = true;
                }
            }
            overrides.push(o);
        }
        Ok(overrides)
    }

    /// `client`: one host, or several for a workload with a clients axis
    /// (default: `generator`).
    fn client_hosts(&self, w: &Item, host_names: &[&str]) -> Result<Vec<String>, StudyError> {
        let Item {
            t, path, kind, wl, ..
        } = *w;
        let Some(v) = t.get("client") else {
            return Ok(vec![DEFAULT_CLIENT_HOST.to_string()]);
        };
        let key = format!("{path}.client");
        let list = self.name_list(
            v,
            &key,
            host_names,
            true,
            &format!(
                "expected a host name or a non-empty list of them (hosts: {})",
                quoted_list(host_names)
            ),
        )?;
        if list.len() > 1 && !wl.clients_axis() {
            return Err(self.err(
                v.span(),
                &key,
                format!(
                    "`{kind}` runs one client per target: several client hosts need a workload with a clients axis"
                ),
            ));
        }
        Ok(list)
    }

    /// `server` (one host) or `targets` (several), not both (default:
    /// `sut`).
    fn server_hosts(&self, w: &Item, host_names: &[&str]) -> Result<Vec<String>, StudyError> {
        let Item { t, path, .. } = *w;
        let server = match t.get("server") {
            None => None,
            Some(v) => Some(self.choice(v, &format!("{path}.server"), host_names)?),
        };
        match (t.get("targets"), server) {
            (Some(v), None) => self.name_list(
                v,
                &format!("{path}.targets"),
                host_names,
                false,
                &format!(
                    "expected a non-empty list of host names (hosts: {})",
                    quoted_list(host_names)
                ),
            ),
            (Some(v), Some(_)) => Err(self.err(
                v.span(),
                &format!("{path}.targets"),
                "give either `server` (one host) or `targets` (several), not both",
            )),
            (None, server) => Ok(vec![
                server.unwrap_or_else(|| DEFAULT_SERVER_HOST.to_string())
            ]),
        }
    }

    /// `service`: the services a workload that drives a real server
    /// loads, each on its own host.
    fn workload_services(
        &self,
        w: &Item,
        services: &[ServiceDecl],
    ) -> Result<Vec<String>, StudyError> {
        let Item {
            t, path, kind, wl, ..
        } = *w;
        let Some(v) = t.get("service") else {
            return Ok(Vec::new());
        };
        let key = format!("{path}.service");
        let names: Vec<&str> = services.iter().map(|s| s.name.as_str()).collect();
        if wl.server_side() != ServerSide::Service {
            return Err(self.err(
                v.span(),
                &key,
                format!("`{kind}` runs its own server side: `service` is for workloads that drive a real server"),
            ));
        }
        let out = self.name_list(
            v,
            &key,
            &names,
            true,
            "expected a service name or a non-empty list of them",
        )?;
        let host_of = |n: &String| {
            services
                .iter()
                .find(|s| &s.name == n)
                .map(|s| s.host.as_str())
        };
        for (j, n) in out.iter().enumerate() {
            if out[..j].iter().any(|o| host_of(o) == host_of(n)) {
                return Err(self.err(
                    v.span(),
                    &key,
                    format!("`{n}` shares its host with another listed service (each target is one host)"),
                ));
            }
        }
        Ok(out)
    }

    /// A workload that drives a real server: its services are its
    /// targets, and their hosts the server hosts (`None` for a workload
    /// that runs its own server side).
    fn service_targets(
        &self,
        w: &Item,
        service_names: &[String],
        services: &[ServiceDecl],
    ) -> Result<Option<Vec<String>>, StudyError> {
        let Item {
            t,
            item,
            path,
            kind,
            wl,
        } = *w;
        if wl.server_side() != ServerSide::Service {
            return Ok(None);
        }
        if service_names.is_empty() {
            return Err(self.err(
                item.span(),
                &format!("{path}.service"),
                format!("missing: `{kind}` drives a real server: name its [[service]] (service = \"NAME\")"),
            ));
        }
        for key in ["server", "targets"] {
            if let Some(v) = t.get(key) {
                return Err(self.err(
                    v.span(),
                    &format!("{path}.{key}"),
                    "a service workload's targets are its services' hosts: give `service` instead",
                ));
            }
        }
        Ok(Some(
            service_names
                .iter()
                .map(|n| {
                    services
                        .iter()
                        .find(|s| &s.name == n)
                        .expect("chosen")
                        .host
                        .clone()
                })
                .collect(),
        ))
    }

    /// Stage two: every expanded point, under every configuration's
    /// overrides, must satisfy the workload's own rules.
    /// Also: every host a point names (`{host.NAME}`) is one of the
    /// study's.
    fn check_points(
        &self,
        w: &Item,
        entry: &WorkloadEntry,
        host_names: &[&str],
    ) -> Result<(), StudyError> {
        let Item {
            t, item, path, wl, ..
        } = *w;
        let span = |key: &str| t.get(key).map(|v| v.span()).unwrap_or(item.span());
        for point in entry.points() {
            for o in &entry.overrides {
                let mut p = point.clone();
                p.0.extend(o.0.clone());
                if let Err(e) = wl.validate(&p) {
                    return Err(self.err(span(&e.key), &format!("{path}.{}", e.key), e.message));
                }
                for (key, host) in wl.host_refs(&p) {
                    if !host_names.contains(&host.as_str()) {
                        return Err(self.err(
                            span(&key),
                            &format!("{path}.{key}"),
                            format!(
                                "`{{host.{host}}}`: no host is named `{host}` (hosts: {}); define it with [[host]]",
                                quoted_list(host_names)
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// A configuration's `set` key that no workload of the study has.
    fn unused_set_keys(&self, configs: &Configs, used: &[Vec<bool>]) -> Result<(), StudyError> {
        for (c, set) in configs.sets.iter().enumerate() {
            for (j, (k, v)) in set.iter().enumerate() {
                if !used[c][j] {
                    return Err(self.err(v.span(), &format!("configuration[{c}].set.{k}"), "no workload of this study has this parameter, so setting it would change nothing"));
                }
            }
        }
        Ok(())
    }
}
