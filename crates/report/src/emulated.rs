//! Which configurations ran on emulated guests: a guest host under TCG
//! measures QEMU's emulator, not virtualization, so every rendering
//! marks the columns of a configuration any of whose hosts was one
//! (the document's [`crate::document::marks`] decides how). Read from
//! the stored plan (which hosts each configuration's points and services ran on) and the stored
//! inventories (how each guest ran), never from when a guest booted.

use benchlab_core::resolved::ResolvedPlan;
use benchlab_core::study::{Accel, Transport};
use benchlab_store::{ConfigRow, HostRow};

use crate::model::{Emulated, EmulatedGuest, RunReport};

pub use crate::document::marks::EMULATED_MARK as MARK;

/// How host `name` ran, from its stored inventory: `Some(reason)` when
/// it was an emulated guest. A guest without a readable inventory (the
/// run stopped before it was taken) is emulated only when the study
/// asked for TCG.
fn emulation(plan: &ResolvedPlan, hosts: &[HostRow], name: &str) -> Option<String> {
    let stored = hosts
        .iter()
        .find(|h| h.name == name)
        .and_then(|h| h.inventory.get("guest"))
        .and_then(|g| serde_json::from_value::<benchlab_inventory::GuestFacts>(g.clone()).ok());
    if let Some(g) = stored {
        return (g.accel == "tcg").then(|| g.emulated.unwrap_or_else(|| "TCG".into()));
    }
    let host = plan.study.hosts.iter().find(|h| h.name == name)?;
    match &host.transport {
        Transport::Guest(g) if g.accel == Accel::Tcg => Some("accel = \"tcg\" asked".into()),
        _ => None,
    }
}

/// The configurations of a run that ran on emulated guests, in study
/// order (a configuration on KVM guests or on no guest is not listed).
pub fn build(
    plan: &ResolvedPlan,
    configurations: &[ConfigRow],
    hosts: &[HostRow],
) -> Vec<Emulated> {
    let mut out = Vec::new();
    for (c, row) in plan.study.configurations.iter().zip(configurations) {
        let guests: Vec<EmulatedGuest> = plan
            .study
            .configuration_hosts(c)
            .into_iter()
            .filter_map(|h| {
                emulation(plan, hosts, h).map(|reason| EmulatedGuest {
                    host: h.to_string(),
                    reason,
                })
            })
            .collect();
        if !guests.is_empty() {
            out.push(Emulated {
                configuration: row.name.clone(),
                guests,
            });
        }
    }
    out
}

impl RunReport {
    /// The emulated guests of configuration (or comparison column)
    /// `name`, when it ran on any.
    pub fn emulated(&self, name: &str) -> Option<&Emulated> {
        self.emulated.iter().find(|e| e.configuration == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{render, Format};
    use benchlab_core::fake::FAKE;
    use benchlab_core::study::Study;
    use benchlab_core::Registry;

    /// `box` is a plain host; each configuration but `metal` moves the
    /// server to a guest: `vm1` ran under TCG (its inventory says so),
    /// `vm2` under KVM, `vm3` asked for TCG and left no inventory.
    fn plan() -> ResolvedPlan {
        let guest = |n: u8, extra: &str| {
            format!("[[host]]\nname = \"vm{n}\"\nguest = {{ vcpus = 1, memory = 512, net = \"bridge\", bridge = \"br0\", netns = \"ns\", ip = \"10.0.0.{n}/24\"{extra} }}\n")
        };
        let text = format!(
            "[study]\nname = \"s\"\n[[host]]\nname = \"box\"\nlocal = true\n{}{}{}\
             [[workload]]\nkind = \"fake\"\nserver = \"box\"\n\
             [[configuration]]\nname = \"metal\"\n\
             [[configuration]]\nname = \"tcg\"\nhosts = {{ box = \"vm1\" }}\n\
             [[configuration]]\nname = \"kvm\"\nhosts = {{ box = \"vm2\" }}\n\
             [[configuration]]\nname = \"asked\"\nhosts = {{ box = \"vm3\" }}\n",
            guest(1, ""),
            guest(2, ""),
            guest(3, ", accel = \"tcg\"")
        );
        let mut reg = Registry::new();
        reg.add(&FAKE);
        let study = Study::parse("s.toml", &text, &reg).unwrap();
        let points = study.workloads[0].points();
        ResolvedPlan::resolve(&study, &reg, points.iter().map(|p| (0, p))).unwrap()
    }

    fn host(name: &str, guest: serde_json::Value) -> HostRow {
        HostRow {
            name: name.into(),
            roles: "server".into(),
            inventory: serde_json::json!({ "guest": guest }),
        }
    }

    #[test]
    fn only_configurations_on_tcg_guests_are_marked() {
        let plan = plan();
        let configurations: Vec<ConfigRow> = plan
            .study
            .configurations
            .iter()
            .enumerate()
            .map(|(idx, c)| ConfigRow {
                idx,
                name: c.name.clone(),
                description: String::new(),
                spec: serde_json::Value::Null,
            })
            .collect();
        let hosts = [
            HostRow {
                name: "box".into(),
                roles: "server".into(),
                inventory: serde_json::json!({}),
            },
            host(
                "vm1",
                serde_json::json!({ "accel": "tcg", "emulated": "KVM cannot run a guest here (KVM internal error)" }),
            ),
            host(
                "vm2",
                serde_json::json!({ "accel": "kvm", "emulated": null }),
            ),
        ];
        let got = build(&plan, &configurations, &hosts);
        assert_eq!(
            got,
            [
                Emulated {
                    configuration: "tcg".into(),
                    guests: vec![EmulatedGuest {
                        host: "vm1".into(),
                        reason: "KVM cannot run a guest here (KVM internal error)".into(),
                    }],
                },
                Emulated {
                    configuration: "asked".into(),
                    guests: vec![EmulatedGuest {
                        host: "vm3".into(),
                        reason: "accel = \"tcg\" asked".into(),
                    }],
                },
            ]
        );
    }

    /// Every rendering marks the emulated column, its advantage and the
    /// comparison, with one footnote; a report without emulated guests
    /// has no mark at all.
    #[test]
    fn every_rendering_marks_the_emulated_column() {
        let text = format!(
            "{}\nt,higher,,size,1,2,1,metal,10\nt,higher,,size,1,2,1,tcg,5\n",
            crate::import::HEADER
        );
        let mut r = crate::import::figures_csv("s", &text).unwrap();
        r.tables[0].columns = vec!["metal".into(), "tcg".into()];
        let plain = [Format::Table, Format::Markdown, Format::Json]
            .map(|f| render(&r, f))
            .join("\n")
            + &crate::html::render_html(&r);
        assert!(!plain.contains(MARK), "{plain}");
        assert!(!plain.contains(benchlab_core::study::EMULATED), "{plain}");
        r.emulated = vec![Emulated {
            configuration: "tcg".into(),
            guests: vec![
                EmulatedGuest {
                    host: "g1".into(),
                    reason: "no /dev/kvm".into(),
                },
                EmulatedGuest {
                    host: "g2".into(),
                    reason: "no /dev/kvm".into(),
                },
            ],
        }];
        let footnote = "tcg (emulated): guests g1, g2 emulated (TCG), not a virtualization measurement: no /dev/kvm";
        let wide = crate::Layout {
            width: 300,
            verbose: true,
        };
        for out in [
            crate::render_with(&r, Format::Table, wide),
            render(&r, Format::Markdown),
        ] {
            assert!(out.contains(footnote), "{out}");
            assert!(out.contains("tcg (emulated) advantage"), "{out}");
            assert!(!out.contains("metal (emulated)"), "{out}");
        }
        let md = render(&r, Format::Markdown);
        assert!(
            md.contains("| size | metal | tcg (emulated) | tcg (emulated) advantage |"),
            "{md}"
        );
        let json: serde_json::Value = serde_json::from_str(&render(&r, Format::Json)).unwrap();
        assert_eq!(json["emulated"][0]["configuration"], "tcg");
        assert_eq!(json["emulated"][0]["guests"][1]["host"], "g2");
        let html = crate::html::render_html(&r);
        assert!(
            html.contains("<th class=\"emulated\">tcg (emulated)</th>"),
            "{html}"
        );
        assert!(
            html.contains("<th class=\"emulated\">tcg (emulated) advantage</th>"),
            "{html}"
        );
        assert!(
            html.contains(&format!("<p class=\"legend emulated\">{footnote}</p>")),
            "{html}"
        );
        assert!(
            html.contains("class=\"emulated\">Headline findings: tcg (emulated) vs metal</h2>"),
            "{html}"
        );
    }

    /// A comparison across runs keeps the mark on the column that came
    /// from an emulated configuration, under the column's label.
    #[test]
    fn a_comparison_marks_the_emulated_column() {
        let text = format!(
            "{}\nt,higher,,size,1,2,1,metal,10\nt,higher,,size,1,2,1,tcg,5\n",
            crate::import::HEADER
        );
        let mut r = crate::import::figures_csv("s", &text).unwrap();
        r.tables[0].columns = vec!["metal".into(), "tcg".into()];
        for c in &mut r.configurations {
            c.spec = serde_json::Value::Null;
        }
        r.emulated = vec![Emulated {
            configuration: "tcg".into(),
            guests: vec![EmulatedGuest {
                host: "g1".into(),
                reason: "no /dev/kvm".into(),
            }],
        }];
        let side = |c: usize, label: &str| crate::compare::Side {
            label: label.into(),
            report: &r,
            config: c,
        };
        let both = crate::compare::combine(&[side(1, "7:tcg"), side(0, "7:metal")], 1);
        assert_eq!(both.emulated.len(), 1);
        assert_eq!(both.emulated[0].configuration, "7:tcg");
        let out = render(&both, Format::Table);
        assert!(out.contains("7:tcg (emulated) advantage"), "{out}");
        assert!(
            out.contains("7:tcg (emulated): guest g1 emulated (TCG)"),
            "{out}"
        );
        assert!(!out.contains("7:metal (emulated)"), "{out}");
    }

    /// A sentence under a curve that names an emulated configuration as
    /// a word gets the mark; one that names only others, or contains the
    /// name inside another word, does not.
    #[test]
    fn curve_sentences_naming_an_emulated_line_are_marked() {
        let line = |name: &str| crate::model::CurveLine {
            configuration: name.into(),
            points: Vec::new(),
            peak: None,
        };
        let v = crate::model::CurveView {
            workload: "w".into(),
            kind: "k".into(),
            fixed: String::new(),
            x_param: "clients".into(),
            metric: "m".into(),
            title: "m".into(),
            decimals: 0,
            better: benchlab_core::Better::Higher,
            x: Vec::new(),
            x_values: Vec::new(),
            lines: vec![line("vm"), line("metal")],
            ratios: Vec::new(),
            notes: Vec::new(),
            findings: Vec::new(),
            pairs: Vec::new(),
        };
        let text = format!("{}\nt,higher,,size,1,2,1,a,1\n", crate::import::HEADER);
        let mut r = crate::import::figures_csv("s", &text).unwrap();
        r.emulated = vec![Emulated {
            configuration: "vm".into(),
            guests: Vec::new(),
        }];
        assert_eq!(
            crate::document::marks::finding(&r, &v, "At their peaks metal is 2.00× faster than vm (4 against 2 m)."),
            "At their peaks metal is 2.00× faster than vm (emulated) (4 against 2 m). (vm (emulated): emulated, not a virtualization measurement)"
        );
        assert_eq!(
            crate::document::marks::finding(&r, &v, "metal peaks at 4 clients with 4 m."),
            "metal peaks at 4 clients with 4 m."
        );
        assert_eq!(
            crate::document::marks::finding(&r, &v, "vms are fast."),
            "vms are fast."
        );
        // Where the sentence names it twice, or begins with it.
        assert_eq!(
            crate::document::marks::finding(&r, &v, "vm peaks at 2; vm, then metal."),
            "vm (emulated) peaks at 2; vm (emulated), then metal. (vm (emulated): emulated, not a virtualization measurement)"
        );
    }
}
