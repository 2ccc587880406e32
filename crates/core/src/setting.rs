//! What became of a setting a configuration changed on a host: the
//! environment layer reports it, the store keeps it and the report's
//! "settings changed" appendix shows it, all with these types.

use serde::{Deserialize, Serialize};

/// Whether a configuration was being applied or undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The configuration was applied.
    Apply,
    /// It was undone.
    Revert,
}

impl Phase {
    /// Lower-case name, as stored.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Apply => "apply",
            Phase::Revert => "revert",
        }
    }

    /// The phase of a stored name.
    pub fn parse(s: &str) -> Option<Phase> {
        [Phase::Apply, Phase::Revert]
            .into_iter()
            .find(|p| p.name() == s)
    }
}

/// What became of one setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeStatus {
    /// Changed.
    Applied,
    /// Already had the wanted value: nothing to do.
    Unchanged,
    /// This host lacks it (not required): left alone.
    Skipped,
    /// Trying to change it failed.
    Failed,
    /// Put back.
    Reverted,
    /// Putting it back failed.
    RevertFailed,
}

impl ChangeStatus {
    /// Every status.
    pub const ALL: [ChangeStatus; 6] = [
        ChangeStatus::Applied,
        ChangeStatus::Unchanged,
        ChangeStatus::Skipped,
        ChangeStatus::Failed,
        ChangeStatus::Reverted,
        ChangeStatus::RevertFailed,
    ];

    /// Lower-case name, as stored and shown.
    pub fn name(self) -> &'static str {
        match self {
            ChangeStatus::Applied => "applied",
            ChangeStatus::Unchanged => "unchanged",
            ChangeStatus::Skipped => "skipped",
            ChangeStatus::Failed => "failed",
            ChangeStatus::Reverted => "reverted",
            ChangeStatus::RevertFailed => "revert failed",
        }
    }

    /// The status of a stored name.
    pub fn parse(s: &str) -> Option<ChangeStatus> {
        ChangeStatus::ALL.into_iter().find(|c| c.name() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        for s in ChangeStatus::ALL {
            assert_eq!(ChangeStatus::parse(s.name()), Some(s));
        }
        for p in [Phase::Apply, Phase::Revert] {
            assert_eq!(Phase::parse(p.name()), Some(p));
        }
        assert_eq!(ChangeStatus::parse("done"), None);
    }
}
