//! `[[study.compare]]`: the like-for-like comparisons a study declares, as
//! the reproduced study drew them (seed 004's Table 1: one server against
//! another at the same CPU count and client type, not every configuration
//! against the first). The report prints each pair's figures at their
//! peaks, "× faster" and % advantage.
//!
//! `by = "cpus"` stands for the pairs of configurations that give their
//! server the same number of CPUs (seed 004: Linux against NT at one and
//! at four processors): within each such group, the first configuration
//! in study order against each other one.

use super::configurations::Configuration;
use super::values::join;
use super::{Ctx, StudyError, Tab};

/// One comparison: configuration `a` against configuration `b` (the B of
/// the advantage).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Comparison {
    /// The configuration compared.
    pub a: String,
    /// The configuration it is compared against.
    pub b: String,
    /// What the comparison stands for (the reproduced study's words for
    /// it); `a vs b` when the study gives none.
    pub label: String,
}

const COMPARE_KEYS: &[&str] = &["a", "b", "label", "by"];

/// What `by` may group configurations by.
const BY: &[&str] = &["cpus"];

/// The CPUs a configuration gives its server: its services' `cpus` and
/// its server placement's, together; None when it pins none.
fn server_cpus(c: &Configuration) -> Option<usize> {
    let mut cpus: Vec<usize> = c.server.cpus.clone().unwrap_or_default();
    for s in &c.services {
        if let Some(text) = s.spec.get("cpus").and_then(|v| v.as_str()) {
            cpus.extend(crate::placement::parse_cpu_list(text).unwrap_or_default());
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    (!cpus.is_empty()).then_some(cpus.len())
}

impl Ctx<'_> {
    /// `[[study.compare]]` of `doc`, its `a` and `b` among `configs`.
    pub(super) fn comparisons(
        &self,
        doc: &Tab,
        list: &[Configuration],
    ) -> Result<Vec<Comparison>, StudyError> {
        let configs: Vec<&str> = list.iter().map(|c| c.name.as_str()).collect();
        let configs = configs.as_slice();
        let entries = self.study_entries(
            doc,
            "compare",
            COMPARE_KEYS,
            "a list of tables with a, b and an optional label",
        )?;
        let mut out: Vec<Comparison> = Vec::new();
        for (path, item, t) in entries {
            if let Some(by) = t.get("by") {
                for k in ["a", "b"] {
                    if let Some(x) = t.get(k) {
                        return Err(self.err(
                            x.span(),
                            &join(&path, k),
                            "a comparison gives either `by` or the two configurations a and b, not both",
                        ));
                    }
                }
                self.choice(by, &join(&path, "by"), BY)?;
                let prefix = match t.get("label") {
                    Some(x) => Some(self.string(x, &join(&path, "label"))?),
                    None => None,
                };
                for pair in self.by_cpus(list, by.span(), &join(&path, "by"), prefix.as_deref())? {
                    if !out.iter().any(|c| c.label == pair.label) {
                        out.push(pair);
                    }
                }
                continue;
            }
            let side = |k: &str| match t.get(k) {
                Some(x) => self.choice(x, &join(&path, k), configs),
                None => Err(self.err(
                    item.span(),
                    &join(&path, k),
                    format!(
                        "missing: a comparison names both configurations, a and b (one of: {})",
                        configs.join(", ")
                    ),
                )),
            };
            let (a, b) = (side("a")?, side("b")?);
            if a == b {
                return Err(self.err(
                    t.get("b").map(|x| x.span()).unwrap_or(item.span()),
                    &join(&path, "b"),
                    format!("`{b}` is a too: a comparison needs two configurations"),
                ));
            }
            let label = match t.get("label") {
                Some(x) => {
                    let l = self.string(x, &join(&path, "label"))?;
                    if l.trim().is_empty() {
                        return Err(self.err(x.span(), &join(&path, "label"), "must not be empty"));
                    }
                    l
                }
                None => format!("{a} vs {b}"),
            };
            if out.iter().any(|c| c.label == label) {
                return Err(self.err(
                    item.span(),
                    &join(&path, "label"),
                    format!(
                        "`{label}` is declared twice: each comparison needs a label of its own"
                    ),
                ));
            }
            out.push(Comparison { a, b, label });
        }
        Ok(out)
    }

    /// The pairs of `by = "cpus"`: per server CPU count (in order of first
    /// appearance), the group's first configuration against each other.
    fn by_cpus(
        &self,
        list: &[Configuration],
        span: std::ops::Range<usize>,
        path: &str,
        prefix: Option<&str>,
    ) -> Result<Vec<Comparison>, StudyError> {
        let mut groups: Vec<(usize, Vec<&str>)> = Vec::new();
        for c in list {
            let Some(n) = server_cpus(c) else {
                return Err(self.err(
                    span,
                    path,
                    format!(
                        "configuration `{}` does not pin its server to CPUs (a service's `cpus` or `server.cpus`), so it has no CPU count to group by",
                        c.name
                    ),
                ));
            };
            match groups.iter_mut().find(|g| g.0 == n) {
                Some(g) => g.1.push(&c.name),
                None => groups.push((n, vec![&c.name])),
            }
        }
        let mut out = Vec::new();
        for (n, names) in &groups {
            for b in &names[1..] {
                let on = format!("on {n} CPU{}", if *n == 1 { "" } else { "s" });
                out.push(Comparison {
                    a: names[0].to_string(),
                    b: b.to_string(),
                    label: match prefix {
                        Some(p) => format!("{p} {on}: {} vs {b}", names[0]),
                        None => format!("{} vs {b} {on}", names[0]),
                    },
                });
            }
        }
        if out.is_empty() {
            return Err(self.err(
                span,
                path,
                "no two configurations give their server the same number of CPUs: nothing to compare",
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::fake::FAKE;
    use crate::study::Study;
    use crate::workload::Registry;

    fn parse(compare: &str) -> Result<Study, String> {
        let mut reg = Registry::new();
        reg.add(&FAKE);
        let text = format!(
            "[study]\nname = \"t\"\n{compare}\n[[configuration]]\nname = \"a1\"\n[[configuration]]\nname = \"b1\"\n[[workload]]\nkind = \"fake\"\n"
        );
        Study::parse("t.toml", &text, &reg).map_err(|e| e.to_string())
    }

    #[test]
    fn pairs_name_two_configurations() {
        let s = parse("[[study.compare]]\na = \"a1\"\nb = \"b1\"\nlabel = \"A over B\"\n[[study.compare]]\na = \"b1\"\nb = \"a1\"").unwrap();
        assert_eq!(s.compare.len(), 2);
        assert_eq!(
            (s.compare[0].a.as_str(), s.compare[0].b.as_str()),
            ("a1", "b1")
        );
        assert_eq!(s.compare[0].label, "A over B");
        assert_eq!(s.compare[1].label, "b1 vs a1");
        assert!(parse("").unwrap().compare.is_empty());
    }

    #[test]
    fn by_cpus_pairs_configurations_with_equal_server_cpus() {
        let mut reg = Registry::new();
        reg.add(&FAKE);
        let config = |name: &str, cpus: &str| {
            format!("[[configuration]]\nname = \"{name}\"\nserver = {{ cpus = \"{cpus}\" }}\n")
        };
        let text = format!(
            "[study]\nname = \"t\"\n[[study.compare]]\nby = \"cpus\"\n{}{}{}{}{}[[workload]]\nkind = \"fake\"\n",
            config("x-1", "0"),
            config("x-2", "0-1"),
            config("y-1", "1"),
            config("y-2", "0,1"),
            config("z-1", "0"),
        );
        let s = Study::parse("t.toml", &text, &reg).unwrap();
        let pairs: Vec<(&str, &str, &str)> = s
            .compare
            .iter()
            .map(|c| (c.a.as_str(), c.b.as_str(), c.label.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("x-1", "y-1", "x-1 vs y-1 on 1 CPU"),
                ("x-1", "z-1", "x-1 vs z-1 on 1 CPU"),
                ("x-2", "y-2", "x-2 vs y-2 on 2 CPUs"),
            ]
        );
    }

    #[test]
    fn a_bad_pair_says_where_and_what_is_allowed() {
        let e = parse("[[study.compare]]\na = \"a1\"\nb = \"nope\"").unwrap_err();
        assert!(e.starts_with("t.toml:5:5: key `study.compare[0].b`"), "{e}");
        assert!(e.contains("(allowed: \"a1\", \"b1\")"), "{e}");
        let e = parse("[[study.compare]]\na = \"a1\"").unwrap_err();
        assert!(
            e.contains("study.compare[0].b") && e.contains("missing"),
            "{e}"
        );
        let e = parse("[[study.compare]]\na = \"a1\"\nb = \"a1\"").unwrap_err();
        assert!(e.contains("two configurations"), "{e}");
        let e = parse("[[study.compare]]\na = \"a1\"\nb = \"b1\"\nby = \"cpus\"").unwrap_err();
        assert!(
            e.contains("study.compare[0].a") && e.contains("not both"),
            "{e}"
        );
        let e = parse("[[study.compare]]\nby = \"cpus\"").unwrap_err();
        assert!(
            e.contains("study.compare[0].by") && e.contains("`a1` does not pin its server"),
            "{e}"
        );
        let e = parse("[[study.compare]]\nby = \"disk\"").unwrap_err();
        assert!(e.contains("(allowed: \"cpus\")"), "{e}");
        let e = parse(
            "[[study.compare]]\na = \"a1\"\nb = \"b1\"\n[[study.compare]]\na = \"a1\"\nb = \"b1\"",
        )
        .unwrap_err();
        assert!(e.contains("declared twice"), "{e}");
    }
}
