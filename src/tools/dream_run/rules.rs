//! The rules engine (`dream-run --engine rules`): a consolidation with no model. It plans
//! the fixes that need no judgement from what `check` finds; the run applies the plan
//! through the same sandboxed tools, write guard, snapshot and record as a model's writes.
//!
//! The planner is pure: it reads the memory's texts (and `check`'s health of the same dir)
//! and returns whole-file new texts. The rules run in this order, each over what the ones
//! before it left, and the whole pass again until nothing changes (a redaction can make two
//! files byte-identical, say), so that a second run over the output plans nothing:
//!
//! 1. `duplicate_entry`, files: byte-identical topic files (`duplicates`);
//! 2. `secret` (`secrets`);
//! 3. `relative_date` (`dates`);
//! 4. `duplicate_entry`, index lines (`duplicates`);
//! 5. `dangling_link` (`links`);
//! 6. `long_entry` (`long_entry`);
//! 7. `orphan_file` (`orphans`);
//! 8. `index_over_limit` (`overflow`).
//!
//! What stays reported after a run (it needs judgement, or facts the memory lacks):
//! `duplicate_entry` for the same line in two topic files (or twice in one) and for two index
//! lines linking the same file with different text; `relative_date` on a line no transcript
//! anchors (and a phrase running across a code span or a quote); `long_entry` whose line links
//! no topic file; `missing_path` and `stale_index`, never changed.

mod dates;
mod doc;
mod duplicates;
mod links;
mod long_entry;
mod orphans;
mod overflow;
#[cfg(test)]
mod props;
mod secrets;
#[cfg(test)]
mod tests;
mod text;
mod words;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::SystemTime;

use self::doc::Doc;
use super::check::{Health, Kind, INDEX_FILE};
pub use crate::store::{Action, Anchor, Change, RuleSource};

/// The overflow index: the index entries that do not fit in `MEMORY.md` (`index_over_limit`).
pub use super::check::OVERFLOW_INDEX_FILE;

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
    /// The run's time: the date of the marker over text moved from the index into a topic
    /// file, and the age of index lines that link no file.
    pub now: SystemTime,
}

/// The planned writes and why.
#[derive(Debug, Default, Clone)]
pub struct Plan {
    /// Relative path -> the file's whole new text (`None`: delete it), in write order:
    /// created files first, then edited topic files, then the index, then deletions (a
    /// file is there before a link to it, and a link moves before its old target goes).
    pub writes: Vec<(String, Option<String>)>,
    pub changes: Vec<Change>,
    /// Text whose words may be gone after the plan (removed duplicates, redacted values,
    /// replaced date phrases, dropped link targets): the rest of the memory's words must stay.
    pub may_lose: Vec<String>,
}

/// Passes of all the rules at most: each pass after the first only fixes what an earlier
/// one made (identical files after a redaction); more would mean two rules undo each other.
const MAX_PASSES: usize = 4;

/// The memory as the rules change it: every file's lines (each knowing its line before the
/// run), what was deleted and created, and what was done.
struct State<'a> {
    input: &'a Input<'a>,
    docs: BTreeMap<String, Doc>,
    deleted: BTreeSet<String>,
    changes: Vec<Change>,
    may_lose: Vec<String>,
    /// Link targets `check` found missing (relative to the memory dir).
    missing: HashSet<String>,
}

impl<'a> State<'a> {
    fn new(input: &'a Input<'a>) -> State<'a> {
        let docs = input
            .files
            .iter()
            .map(|(path, file)| (path.clone(), Doc::parse(&file.text)))
            .collect();
        let missing = input
            .health
            .problems
            .iter()
            .filter(|p| p.kind == Kind::DanglingLink)
            .filter_map(|p| links::missing_target(&p.detail))
            .collect();
        State {
            input,
            docs,
            deleted: BTreeSet::new(),
            changes: Vec::new(),
            may_lose: Vec::new(),
            missing,
        }
    }

    /// Whether `path` is a file of the memory before the run.
    fn existed(&self, path: &str) -> bool {
        self.input.files.contains_key(path)
    }

    /// The action a change to `path` is: a file that was not there is created.
    fn action_for(&self, path: &str) -> Action {
        if self.existed(path) {
            Action::Edit
        } else {
            Action::Create
        }
    }

    fn change(&mut self, file: &str, line: Option<usize>, rule: Kind, detail: String) {
        let action = self.action_for(file);
        self.changes.push(Change {
            file: file.to_string(),
            action,
            line,
            rule: Some(rule.as_str().to_string()),
            detail,
            anchor: None,
            sources: Vec::new(),
            source: Some(RuleSource {
                rule: rule.as_str().to_string(),
            }),
        });
    }

    fn delete(&mut self, file: &str, rule: Kind, detail: String) {
        self.changes.push(Change {
            file: file.to_string(),
            action: Action::Delete,
            line: None,
            rule: Some(rule.as_str().to_string()),
            detail,
            anchor: None,
            sources: Vec::new(),
            source: Some(RuleSource {
                rule: rule.as_str().to_string(),
            }),
        });
    }

    /// The line `origin` (1-based) of `file` as it was before the run.
    fn original_line(&self, file: &str, origin: usize) -> Option<&'a str> {
        let text = &self.input.files.get(file)?.text;
        let line = text.split('\n').nth(origin.checked_sub(1)?)?;
        Some(line.strip_suffix('\r').unwrap_or(line))
    }

    /// A hash of the memory as the rules left it (every file's lines, and what was deleted):
    /// whether a pass changed anything, without rendering every file each time.
    fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for (path, doc) in &self.docs {
            path.hash(&mut hasher);
            doc.final_newline.hash(&mut hasher);
            for line in &doc.lines {
                line.text.hash(&mut hasher);
                line.cr.hash(&mut hasher);
            }
        }
        self.deleted.hash(&mut hasher);
        hasher.finish()
    }
}

/// The plan for `input` (empty when nothing needs fixing).
pub fn plan(input: &Input<'_>) -> Plan {
    let mut state = State::new(input);
    let mut before = state.fingerprint();
    for _ in 0..MAX_PASSES {
        duplicates::identical_files(&mut state);
        secrets::redact(&mut state);
        dates::absolute_dates(&mut state);
        duplicates::index_lines(&mut state);
        links::dangling(&mut state);
        long_entry::shorten(&mut state);
        orphans::index(&mut state);
        overflow::move_oldest(&mut state);
        let after = state.fingerprint();
        if after == before {
            break;
        }
        before = after;
    }
    finish(state)
}

/// The writes of `state` against the memory before, in write order, and no write a run must
/// not make (outside the memory dir, not Markdown, a deletion under `team/`).
fn finish(state: State<'_>) -> Plan {
    let input = state.input;
    let (mut created, mut topics, mut index, mut deleted) = (vec![], vec![], vec![], vec![]);
    for (path, doc) in &state.docs {
        let text = doc.render();
        match input.files.get(path) {
            Some(before) if before.text == text => {}
            Some(_) if path == INDEX_FILE => index.push((path.clone(), Some(text))),
            Some(_) => topics.push((path.clone(), Some(text))),
            None => created.push((path.clone(), Some(text))),
        }
    }
    for path in &state.deleted {
        if input.files.contains_key(path) && !is_team(path) {
            deleted.push((path.clone(), None));
        }
    }
    let writes: Vec<(String, Option<String>)> = created
        .into_iter()
        .chain(topics)
        .chain(index)
        .chain(deleted)
        .filter(|(path, _)| is_writable(path))
        .collect();
    let written: HashSet<&str> = writes.iter().map(|(p, _)| p.as_str()).collect();
    let changes = state
        .changes
        .into_iter()
        .filter(|c| written.contains(c.file.as_str()))
        .collect();
    Plan {
        writes,
        changes,
        may_lose: state.may_lose,
    }
}

/// A path the engine may write: relative, inside the memory dir, a `.md` file, no dot file.
fn is_writable(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && path.ends_with(".md")
        && path
            .split('/')
            .all(|part| !part.is_empty() && !part.starts_with('.') && !part.contains('\\'))
}

/// Shared memory: never deleted by the engine.
fn is_team(path: &str) -> bool {
    path.starts_with("team/")
}

/// The words (runs of letters or digits) of `before` that are nowhere in `after`, but for
/// those of `may_lose`, sorted and deduplicated.
///
/// The words of a frontmatter's `metadata.modified` value in `before` are never counted: the
/// run restamps that value on every topic file it changes (the caller passes nothing for it).
pub fn lost_words(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
    may_lose: &[String],
) -> Vec<String> {
    words::lost(before, after, may_lose)
}
