//! `[study]`: the study's name, description and order (its steps are
//! read by [`super::steps`]).

use super::{Ctx, Step, StudyError, Tab};

/// Order in which units run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// configuration → workload → point → repetition.
    Sequential,
    /// workload → point → repetition → configuration: configurations
    /// alternate at every repetition, which spreads slow drifts of a noisy
    /// machine evenly over them.
    Interleaved,
}

const STUDY_KEYS: &[&str] = &["name", "description", "order", "step"];
const ORDERS: &[&str] = &["sequential", "interleaved"];

/// `[study]`'s values.
pub(super) struct Header {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) order: Order,
    pub(super) steps: Vec<Step>,
}

impl Ctx<'_> {
    /// `[study]`.
    pub(super) fn header(&self, doc: &Tab) -> Result<Header, StudyError> {
        let name;
        let mut description = String::new();
        let mut order = Order::Sequential;
        let mut steps = Vec::new();
        match doc.get("study") {
            Some(v) => {
                let t = self.table(v, "study")?;
                self.check_keys(t, "study", STUDY_KEYS)?;
                match t.get("name") {
                    Some(n) => name = self.string(n, "study.name")?,
                    None => {
                        return Err(self.err(
                            v.span(),
                            "study.name",
                            "missing: every study needs a name",
                        ))
                    }
                }
                if name.trim().is_empty() {
                    return Err(self.err(
                        t.get("name").unwrap().span(),
                        "study.name",
                        "must not be empty",
                    ));
                }
                if let Some(d) = t.get("description") {
                    description = self.string(d, "study.description")?;
                }
                if let Some(o) = t.get("order") {
                    order = match self.choice(o, "study.order", ORDERS)?.as_str() {
                        "interleaved" => Order::Interleaved,
                        _ => Order::Sequential,
                    };
                }
                if let Some(v) = t.get("step") {
                    steps = self.steps(v)?;
                }
            }
            None => {
                return Err(self.err(
                    0..0,
                    "study",
                    "missing: a study file needs a [study] table with a name",
                ))
            }
        }

        Ok(Header {
            name,
            description,
            order,
            steps,
        })
    }
}
