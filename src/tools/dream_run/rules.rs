//! The rules engine (`dream-run --engine rules`): a consolidation with no model. It plans
//! the fixes that need no judgement from what `check` finds; the run applies the plan
//! through the same sandboxed tools, write guard, snapshot and record as a model's writes.
//!
//! (Contract stub: the planner lands with its rules.)

use std::collections::BTreeMap;
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::check::Health;

/// One memory file as the engine reads it.
#[derive(Debug, Clone)]
pub struct MemoryText {
    pub text: String,
    /// The file's mtime (a topic's age when its frontmatter has no `metadata.modified`).
    pub modified: SystemTime,
}

/// Where a relative date's line was written: the transcript record of the Write/Edit call
/// whose content holds the line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Anchor {
    /// The session whose transcript holds the record.
    pub session: String,
    /// The record's `timestamp`, as written (RFC 3339, UTC).
    pub timestamp: String,
}

/// What the planner reads.
pub struct Input<'a> {
    /// Every `.md` file of the memory dir by path relative to it.
    pub files: &'a BTreeMap<String, MemoryText>,
    /// `check`'s health of the same dir.
    pub health: &'a Health,
    /// The anchor of `line` (its text, without the newline) in `file` (relative), if the
    /// transcripts record one.
    pub anchor: &'a dyn Fn(&str, &str) -> Option<Anchor>,
}

/// What a change did to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Create,
    Edit,
    Delete,
}

/// One change, as the task record, `run.changes` and `show` print it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Change {
    /// Relative to the memory dir.
    pub file: String,
    pub action: Action,
    /// The line (1-based) of `file` the change is about, where it is one line.
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
}

/// The planned writes and why.
#[derive(Debug, Default, Clone)]
pub struct Plan {
    /// Relative path -> the file's whole new text (`None`: delete it), in write order.
    pub writes: Vec<(String, Option<String>)>,
    pub changes: Vec<Change>,
    /// Text whose words may be gone after the plan (removed duplicates, redacted values,
    /// replaced date phrases, dropped link targets): the rest of the memory's words must stay.
    pub may_lose: Vec<String>,
}

/// The plan for `input` (empty when nothing needs fixing).
pub fn plan(input: &Input<'_>) -> Plan {
    let _ = input;
    Plan::default()
}

/// The words (runs of letters or digits) of `before` that are nowhere in `after`, but for
/// those of `may_lose`, sorted and deduplicated.
pub fn lost_words(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
    may_lose: &[String],
) -> Vec<String> {
    let _ = (before, after, may_lose);
    Vec::new()
}
