//! `index_over_limit`: when, after the other rules, Claude Code would still cut `MEMORY.md`
//! at load (200 lines, 25,000 UTF-16 units: `check`'s `index::load`), the entries whose files
//! were modified longest ago move to `OVERFLOW_INDEX_FILE` at the top of the memory dir
//! (created with a short heading, or appended to by later runs), in their index order, until
//! the index is within [`KEEP_LINES`] lines and [`KEEP_UNITS`] units: room for a few entries
//! before it is cut again. One index line then says what that file holds:
//!
//! ```text
//! - [Older memories](index-more.md) — 57 more entries: Build, Deploy, …
//! ```
//!
//! An entry is any index line but a heading, a blank line, code, frontmatter and that line.
//! Its age: its first link's topic file's frontmatter `metadata.modified` (RFC 3339), else that
//! file's mtime; an entry that links no topic file has the index's own mtime; ties go by
//! index order, the earlier line first (indexes grow at the bottom).

use std::time::SystemTime;

use super::doc::Doc;
use super::links::memory_links;
use super::text::{cut, units};
use super::words::modified_stamp;
use super::{State, OVERFLOW_INDEX_FILE};
use crate::tools::dream_run::check::index::load;
use crate::tools::dream_run::check::{
    is_heading, Kind, INDEX_FILE, INDEX_LINE_CHARS, INDEX_MAX_CHARS, INDEX_MAX_LINES,
};

/// The overflow index's heading and the line under it, when the run creates it.
const HEADING: &str = "# Older memories";
const EXPLANATION: &str =
    "Index entries moved out of MEMORY.md, so that Claude Code loads the whole index.";
/// The title of the index line that links the overflow index.
const TITLE: &str = "Older memories";
/// What the index keeps at most after a move.
pub(super) const KEEP_LINES: usize = INDEX_MAX_LINES - 20;
pub(super) const KEEP_UNITS: usize = INDEX_MAX_CHARS - 2_500;

/// The rule.
pub(super) fn move_oldest(state: &mut State<'_>) {
    let Some(index) = state.docs.get(INDEX_FILE) else {
        return;
    };
    if load(&index.render()).cut.is_none() {
        return;
    }
    let dir = state.input.health.memory_dir.clone();
    let marks = index.marks();
    let index_age = state
        .input
        .files
        .get(INDEX_FILE)
        .map_or(state.input.now, |f| f.modified);
    // (age, position) of each entry; and the line that links the overflow index.
    let mut entries: Vec<(SystemTime, usize)> = Vec::new();
    let mut summary_at = None;
    for (at, line) in index.lines.iter().enumerate() {
        let text = line.text.trim();
        if marks[at].code || marks[at].front_matter || text.is_empty() || is_heading(text) {
            continue;
        }
        let first = memory_links(&dir, INDEX_FILE, &line.text)
            .into_iter()
            .next();
        if first
            .as_ref()
            .is_some_and(|l| l.resolved == OVERFLOW_INDEX_FILE)
        {
            summary_at.get_or_insert(at);
            continue;
        }
        let age = first
            .and_then(|l| age_of(state, &l.resolved))
            .unwrap_or(index_age);
        entries.push((age, at));
    }
    entries.sort();
    // Units and lines as the client counts them, each line with its newline.
    let mut lines = index.lines.len();
    let mut total: usize = index.lines.iter().map(|l| units(&l.text) + 1).sum();
    if summary_at.is_none() {
        lines += 1;
        total += INDEX_LINE_CHARS + 1;
    }
    let mut moving: Vec<usize> = Vec::new();
    for &(_, at) in &entries {
        if lines <= KEEP_LINES && total <= KEEP_UNITS {
            break;
        }
        lines -= 1;
        total -= units(&index.lines[at].text) + 1;
        moving.push(at);
    }
    if moving.is_empty() {
        return;
    }
    moving.sort_unstable();
    let moved_lines: Vec<String> = moving
        .iter()
        .map(|&at| index.lines[at].text.clone())
        .collect();
    let first_cut = load(&index.render())
        .cut
        .map(|c| c.first_line)
        .unwrap_or_default();

    let existed = state.docs.contains_key(OVERFLOW_INDEX_FILE);
    let overflow = state
        .docs
        .entry(OVERFLOW_INDEX_FILE.to_string())
        .or_insert_with(Doc::empty);
    let mut appended = Vec::new();
    if !existed {
        appended.extend([
            HEADING.to_string(),
            String::new(),
            EXPLANATION.to_string(),
            String::new(),
        ]);
    }
    appended.extend(moved_lines.iter().cloned());
    overflow.append(appended);
    let summary = summary_line(overflow);

    if let Some(index) = state.docs.get_mut(INDEX_FILE) {
        for &at in moving.iter().rev() {
            index.lines.remove(at);
        }
        let summary_at = summary_at.map(|s| s - moving.iter().filter(|&&m| m < s).count());
        match summary_at {
            Some(at) => {
                let old = std::mem::replace(&mut index.lines[at].text, summary);
                state.may_lose.push(old);
            }
            None => index.append(vec![summary]),
        }
    }
    let count = moving.len();
    state.change(
        INDEX_FILE,
        Some(first_cut),
        Kind::IndexOverLimit,
        format!(
            "Claude Code did not load it whole: {count} entr{} whose files changed longest ago moved to {OVERFLOW_INDEX_FILE}, linked from one line",
            if count == 1 { "y" } else { "ies" }
        ),
    );
    state.change(
        OVERFLOW_INDEX_FILE,
        None,
        Kind::IndexOverLimit,
        format!(
            "{count} entr{} moved here from {INDEX_FILE}",
            if count == 1 { "y" } else { "ies" }
        ),
    );
}

/// When the file `path` was last modified: its frontmatter's `metadata.modified`, else its
/// mtime before the run.
fn age_of(state: &State<'_>, path: &str) -> Option<SystemTime> {
    let doc = state.docs.get(path)?;
    modified_stamp(&doc.render())
        .and_then(|stamp| crate::cli::time::parse_rfc3339(&stamp))
        .or_else(|| state.input.files.get(path).map(|f| f.modified))
}

/// The index line that links the overflow index: how many entries it holds and the first
/// titles that fit.
fn summary_line(overflow: &Doc) -> String {
    let marks = overflow.marks();
    let entries: Vec<&str> = overflow
        .lines
        .iter()
        .zip(&marks)
        .map(|(line, m)| (line.text.trim(), m))
        .filter(|(text, m)| {
            !m.code
                && !m.front_matter
                && !text.is_empty()
                && !is_heading(text)
                && *text != EXPLANATION
        })
        .map(|(text, _)| text)
        .collect();
    let count = entries.len();
    let head = format!(
        "- [{TITLE}]({OVERFLOW_INDEX_FILE}) — {count} more entr{}",
        if count == 1 { "y" } else { "ies" }
    );
    let titles: Vec<String> = entries.iter().filter_map(|e| title_of(e)).collect();
    if titles.is_empty() {
        return head;
    }
    let room = INDEX_LINE_CHARS.saturating_sub(units(&head) + 2);
    let mut listed = String::new();
    for (n, title) in titles.iter().enumerate() {
        let next = if listed.is_empty() {
            title.clone()
        } else {
            format!("{listed}, {title}")
        };
        let more = n + 1 < titles.len();
        // Room for ", …" after it when more follow.
        if units(&next) + if more { 3 } else { 0 } > room {
            listed = if listed.is_empty() {
                cut(title, room)
            } else {
                format!("{listed}, …")
            };
            break;
        }
        listed = next;
    }
    format!("{head}: {listed}")
}

/// The link text of an entry `- [Title](file.md) ...`, plain.
fn title_of(entry: &str) -> Option<String> {
    let rest = entry
        .trim_start_matches(['-', '*', '+', ' ', '\t'])
        .strip_prefix('[')?;
    let end = rest.find("](")?;
    let title: String = rest[..end]
        .chars()
        .filter(|c| !matches!(c, '[' | ']' | '`'))
        .collect();
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    (!title.is_empty()).then_some(title)
}
