//! `[[study.compare]]`: the like-for-like comparisons a study declares, as
//! the reproduced study drew them (seed 004's Table 1: one server against
//! another at the same CPU count and client type, not every configuration
//! against the first). The report prints each pair's figures at their
//! peaks, "× faster" and % advantage.

use super::values::join;
use super::{Ctx, DeValue, StudyError, Tab};

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

const COMPARE_KEYS: &[&str] = &["a", "b", "label"];

impl Ctx<'_> {
    /// `[[study.compare]]` of `doc`, its `a` and `b` among `configs`.
    pub(super) fn comparisons(
        &self,
        doc: &Tab,
        configs: &[&str],
    ) -> Result<Vec<Comparison>, StudyError> {
        let Some(v) = doc.get("study").and_then(|s| match s.get_ref() {
            DeValue::Table(t) => t.get("compare"),
            _ => None,
        }) else {
            return Ok(Vec::new());
        };
        let DeValue::Array(items) = v.get_ref() else {
            return Err(self.err(
                v.span(),
                "study.compare",
                "expected [[study.compare]] entries (a list of tables with a, b and an optional label)",
            ));
        };
        let mut out: Vec<Comparison> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("study.compare[{i}]");
            let t = self.table(item, &path)?;
            self.check_keys(t, &path, COMPARE_KEYS)?;
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
            e.contains("study.compare[0].by") && e.contains("allowed here: a, b, label"),
            "{e}"
        );
        let e = parse(
            "[[study.compare]]\na = \"a1\"\nb = \"b1\"\n[[study.compare]]\na = \"a1\"\nb = \"b1\"",
        )
        .unwrap_err();
        assert!(e.contains("declared twice"), "{e}");
    }
}
