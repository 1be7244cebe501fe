//! The rules engine (`dream-run --engine rules`): a consolidation with no model. It plans
//! the fixes that need no judgement from what `check` finds; the run applies the plan
//! through the same sandboxed tools, write guard, snapshot and record as a model's writes.
//!
//! (Contract stub: the planner lands with its rules.)

use std::collections::BTreeMap;
use std::time::SystemTime;

use super::check::Health;
pub use crate::store::{Action, Anchor, Change};

/// One memory file as the engine reads it.
#[derive(Debug, Clone)]
pub struct MemoryText {
    pub text: String,
    /// The file's mtime (a topic's age when its frontmatter has no `metadata.modified`).
    pub modified: SystemTime,
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
