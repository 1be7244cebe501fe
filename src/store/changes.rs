//! What a run changed, one entry per change, as the task record, `run.changes` and `show`
//! print it. The rules engine records one per fix; the shape leaves room for a model run's
//! changes and their sources.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a change did to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Create,
    Edit,
    Delete,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Edit => "edit",
            Action::Delete => "delete",
        }
    }
}

/// Where a line was written: the transcript record of the Write/Edit call whose content
/// holds it (a replaced relative date is anchored there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    /// The session whose transcript holds the record.
    pub session: String,
    /// The record's `timestamp`, as written (RFC 3339, UTC).
    pub timestamp: String,
}

/// Where a model's change came from: a session of the run, and a quote from it, checked
/// against that session's transcript when the change was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Source {
    pub session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote: Option<String>,
    /// The session is one of the run's and the quote occurs in its transcript.
    pub verified: bool,
}

/// Where a rules-engine change came from: its rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RuleSource {
    pub rule: String,
}

/// One change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Change {
    /// Relative to the memory dir.
    pub file: String,
    pub action: Action,
    /// The line (1-based) of `file` the change is about, where it is about one line (the
    /// line as it was before the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The `check` kind the rule fixes (`duplicate_entry`, `orphan_file`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// What changed, for a person; never a secret's value.
    pub detail: String,
    /// The transcript record a replaced relative date was anchored at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<Anchor>,
    /// A model's change: the sources its tool calls named (empty: none named).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
    /// A rules-engine change: the rule that made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<RuleSource>,
}

impl Change {
    /// `edit MEMORY.md:12 (duplicate_entry): ...`, for `show` and stderr.
    pub fn one_line(&self) -> String {
        let place = match self.line {
            Some(line) => format!("{}:{line}", self.file),
            None => self.file.clone(),
        };
        let rule = self
            .rule
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        let anchor = self
            .anchor
            .as_ref()
            .map(|a| format!(" [written {} in session {}]", a.timestamp, a.session))
            .unwrap_or_default();
        format!(
            "{} {place}{rule}: {}{anchor}",
            self.action.as_str(),
            self.detail
        )
    }
}
