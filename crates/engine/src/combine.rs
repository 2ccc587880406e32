//! Combining the parts of one repetition: the raw results of a point's
//! client hosts into one client result, and the samples of several targets
//! into one aggregate — each metric as its workload declares
//! ([`benchlab_core::MetricSpec::combine`]), never by its name.

use std::collections::BTreeMap;

use benchlab_core::shape::merge_sides;
use benchlab_core::{Combine, Params, Sample, SideResult, TargetSides, Workload};

/// The rule for a metric: the workload's declaration, the engine's own,
/// or the mean for anything undeclared.
pub(crate) fn rule(wl: &dyn Workload, params: &Params, name: &str) -> Combine {
    if let Some(spec) = wl.metrics(params).iter().find(|m| m.name == name) {
        return spec.combine;
    }
    benchlab_core::engine_metric::by_name(name).map_or(Combine::Mean, |m| m.combine())
}

/// One client result from the results of a point's client hosts.
pub(crate) fn merge_clients(
    wl: &dyn Workload,
    parts: Vec<SideResult>,
) -> Result<SideResult, String> {
    merge_sides(parts, &|name| wl.merge_value(name))
}

/// The aggregate of several targets' samples (seed 003's two-guest
/// figures): each metric combined as declared; a `Merged` metric derived
/// again from the merged raw results of all targets. Each target's own
/// figures are kept once, as `metric@host`; its raw results in
/// `targets`.
pub(crate) fn aggregate(
    wl: &dyn Workload,
    params: &Params,
    per_target: Vec<(String, Sample)>,
) -> Sample {
    let mut out = Sample::default();
    let Some((_, first)) = per_target.first() else {
        return out;
    };
    let mut names: Vec<String> = first.metrics.keys().cloned().collect();
    names.retain(|n| per_target.iter().all(|(_, s)| s.metrics.contains_key(n)));
    let mut recomputed: Option<Option<Sample>> = None;
    for n in names {
        let values: Vec<f64> = per_target.iter().map(|(_, s)| s.metrics[&n]).collect();
        let v = match rule(wl, params, &n) {
            Combine::Merged => {
                let merged = recomputed.get_or_insert_with(|| recompute(wl, params, &per_target));
                // Falls back to the mean when the raw results cannot be
                // merged (a side kept no raw result).
                merged
                    .as_ref()
                    .and_then(|s| s.metrics.get(&n).copied())
                    .or_else(|| Combine::Mean.apply(&values))
            }
            r => r.apply(&values),
        };
        if let Some(v) = v {
            out.metrics.insert(n, v);
        }
    }
    let mut targets = BTreeMap::new();
    for (host, s) in per_target {
        for (k, v) in s.metrics {
            out.metrics.insert(format!("{k}@{host}"), v);
        }
        let sides = TargetSides {
            client: s.client,
            server: s.server,
        };
        targets.insert(host, sides);
    }
    out.targets = targets;
    out
}

/// The workload's metrics derived from all targets' raw results merged.
fn recompute(
    wl: &dyn Workload,
    params: &Params,
    per_target: &[(String, Sample)],
) -> Option<Sample> {
    let clients: Vec<SideResult> = per_target.iter().map(|(_, s)| s.client.clone()).collect();
    let client = merge_clients(wl, clients).ok()?;
    let servers: Vec<SideResult> = per_target
        .iter()
        .filter_map(|(_, s)| s.server.clone())
        .collect();
    let server = if servers.is_empty() {
        None
    } else {
        Some(merge_clients(wl, servers).ok()?)
    };
    wl.combine(params, client, server).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchlab_core::fake::{FAKE, FAKE_CLIENTS};
    use benchlab_core::recorder::LatencyRecorder;
    use benchlab_core::{ClientCtx, Value};

    fn sample(score: f64, latency: f64) -> Sample {
        let mut s = Sample::default();
        s.metrics.insert("score".into(), score);
        s.metrics.insert("latency_us".into(), latency);
        s.metrics.insert("client_peak_rss_kib".into(), score * 10.0);
        s.metrics.insert("undeclared".into(), latency * 2.0);
        s
    }

    #[test]
    fn targets_combine_as_declared() {
        let p = Params::default();
        let s = aggregate(
            &FAKE,
            &p,
            vec![
                ("a".into(), sample(100.0, 10.0)),
                ("b".into(), sample(50.0, 30.0)),
            ],
        );
        // score is higher-is-better: summed; latency averaged; the
        // engine's RSS is the largest; an undeclared metric averaged.
        assert_eq!(s.metrics["score"], 150.0);
        assert_eq!(s.metrics["latency_us"], 20.0);
        assert_eq!(s.metrics["client_peak_rss_kib"], 1000.0);
        assert_eq!(s.metrics["undeclared"], 40.0);
        assert_eq!(s.metrics["score@b"], 50.0);
        assert_eq!(s.targets.len(), 2);
    }

    #[test]
    fn client_hosts_merge_into_one_exact_result() {
        let mut p = Params::default();
        p.set("clients", Value::Int(7));
        p.set("units", Value::Int(3));
        p.set("sleep_s", Value::Float(0.0));
        p.set("fail_client", Value::Int(0));
        let shares = benchlab_core::ClientShare::spread(7, 3);
        let parts: Vec<SideResult> = shares
            .iter()
            .map(|sh| {
                let mut ctx = ClientCtx::single(None, 0, Default::default());
                ctx.share = *sh;
                FAKE_CLIENTS.run_client(&p, &ctx).unwrap()
            })
            .collect();
        let merged = merge_clients(&FAKE_CLIENTS, parts.clone()).unwrap();
        let s = FAKE_CLIENTS.combine(&p, merged, None).unwrap();
        assert_eq!(s.metrics["units"], 21.0);
        assert_eq!(s.metrics["clients_run"], 7.0);
        assert_eq!(s.metrics["sides"], 3.0);
        // A host's share lost: the combine refuses it.
        let short = merge_clients(&FAKE_CLIENTS, parts[..2].to_vec()).unwrap();
        assert!(FAKE_CLIENTS.combine(&p, short, None).is_err());
    }

    #[test]
    fn merged_metrics_are_derived_from_merged_histograms() {
        use benchlab_wl_net::PINGPONG;
        let mut p = Params::default();
        p.set("protocol", Value::Str("tcp".into()));
        let part = |values: &[u64]| {
            let mut r = LatencyRecorder::new(0);
            for v in values {
                r.record(*v);
            }
            let mut c = SideResult::default();
            c.histograms.insert("rtt_half".into(), r.histogram_data());
            c.counters.insert("iterations".into(), values.len() as u64);
            c.values.insert("elapsed_s".into(), 1.0);
            c
        };
        let a = part(&[1000; 90]);
        let b = part(&[9000; 10]);
        let s = |c: SideResult| PINGPONG.combine(&p, c, Some(SideResult::default()));
        let (sa, sb) = (s(a).unwrap(), s(b).unwrap());
        let agg = aggregate(&PINGPONG, &p, vec![("a".into(), sa), ("b".into(), sb)]);
        // Pooled mean of 90 × 1 µs and 10 × 9 µs is 1.8 µs, not the
        // mean of the two means (5 µs).
        assert!((agg.metrics["rtt_half_mean_us"] - 1.8).abs() < 1e-9);
        assert_eq!(agg.metrics["rtt_half_max_us"], 9.0);
        assert_eq!(agg.metrics["rtt_half_min_us"], 1.0);
    }
}
