//! `[[study.step]]`: the preparation steps of the study being reproduced
//! and what became of each here.

use super::values::join;
use super::{Ctx, DeValue, StudyError, Val};

/// One step of the study being reproduced (`[[study.step]]`) and its
/// status here: deviations on the record.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Step {
    /// The step as the reproduced study describes it.
    pub step: String,
    /// What became of it here.
    pub status: StepStatus,
}

/// The status of a [`Step`]: `applied` (optionally `applied: note`),
/// `approximated: how` or `not possible here: why`.
///
/// Serialized as the study file writes it (`"approximated: how"`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum StepStatus {
    /// Done as the study did it, with an optional note (where, by what).
    Applied(Option<String>),
    /// Done differently; how.
    Approximated(String),
    /// Not done; why.
    NotPossible(String),
}

impl StepStatus {
    /// The status as a study file writes it.
    pub fn text(&self) -> String {
        match self {
            StepStatus::Applied(None) => "applied".into(),
            StepStatus::Applied(Some(note)) => format!("applied: {note}"),
            StepStatus::Approximated(how) => format!("approximated: {how}"),
            StepStatus::NotPossible(why) => format!("not possible here: {why}"),
        }
    }

    /// Reads `applied`, `applied: note`, `approximated: how` or `not
    /// possible here: why` (the reason must not be empty).
    pub fn parse(s: &str) -> Result<StepStatus, String> {
        let s = s.trim();
        let reason = |rest: &str, what: &str| {
            let r = rest.trim();
            if r.is_empty() {
                Err(format!("`{s}`: say {what} after the colon"))
            } else {
                Ok(r.to_string())
            }
        };
        if s == "applied" {
            Ok(StepStatus::Applied(None))
        } else if let Some(rest) = s.strip_prefix("applied:") {
            reason(rest, "a note, or write just \"applied\"").map(|n| StepStatus::Applied(Some(n)))
        } else if let Some(rest) = s.strip_prefix("approximated:") {
            reason(rest, "how").map(StepStatus::Approximated)
        } else if let Some(rest) = s.strip_prefix("not possible here:") {
            reason(rest, "why").map(StepStatus::NotPossible)
        } else {
            Err(format!(
                "`{s}` (allowed: \"applied\" or \"applied: note\", \"approximated: how\", \"not possible here: why\")"
            ))
        }
    }
}

impl From<StepStatus> for String {
    fn from(s: StepStatus) -> String {
        s.text()
    }
}

impl TryFrom<String> for StepStatus {
    type Error = String;
    fn try_from(s: String) -> Result<StepStatus, String> {
        StepStatus::parse(&s)
    }
}

const STEP_KEYS: &[&str] = &["step", "status"];

impl Ctx<'_> {
    /// `[[study.step]]`: tables of `step` and `status`.
    pub(super) fn steps(&self, v: &Val) -> Result<Vec<Step>, StudyError> {
        let DeValue::Array(items) = v.get_ref() else {
            return Err(self.err(
                v.span(),
                "study.step",
                "expected [[study.step]] entries (a list of tables with step and status)",
            ));
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("study.step[{i}]");
            let t = self.table(item, &path)?;
            self.check_keys(t, &path, STEP_KEYS)?;
            let field = |k: &str, what: &str| match t.get(k) {
                Some(x) => self.string(x, &join(&path, k)).map(|s| (s, x.span())),
                None => Err(self.err(
                    item.span(),
                    &join(&path, k),
                    format!("missing: every step needs {what}"),
                )),
            };
            let (step, span) = field("step", "the step as the reproduced study describes it")?;
            if step.trim().is_empty() {
                return Err(self.err(span, &join(&path, "step"), "must not be empty"));
            }
            let (status, span) = field("status", "a status")?;
            let status = StepStatus::parse(&status)
                .map_err(|m| self.err(span, &join(&path, "status"), m))?;
            out.push(Step { step, status });
        }
        Ok(out)
    }
}
