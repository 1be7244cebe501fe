//! `long_entry`: an index line over [`LONG_ENTRY_UNITS`] (UTF-16 units, as the client
//! counts) keeps everything up to the end of its first link (`- [Title](file.md)`) and as much
//! of the rest as fits in [`INDEX_LINE_CHARS`], cut between words and marked `…`; the rest is
//! appended to the linked topic file, after a blank line, as
//!
//! ```text
//! (Moved from the index on YYYY-MM-DD:) the rest of the line
//! ```
//!
//! (the run's date, UTC), its memory links rewritten for the topic file's folder. A line whose
//! first link is no topic file (missing, an index, the web), or whose title and link alone are
//! over the limit, is left, and `check` keeps reporting it.

use std::ops::Range;

use super::links::{folder_of, inline_extent, memory_links, target_from};
use super::text::units;
use super::{State, OVERFLOW_INDEX_FILE};
use crate::tools::dream_run::check::{
    is_index, markdown, Kind, INDEX_FILE, INDEX_LINE_CHARS, LONG_ENTRY_UNITS,
};

/// What the marker says before text moved from the index, for the run's `date`.
pub(super) fn moved_marker(date: &str) -> String {
    format!("(Moved from the index on {date}:)")
}

/// The rule.
pub(super) fn shorten(state: &mut State<'_>) {
    let Some(index) = state.docs.get(INDEX_FILE) else {
        return;
    };
    let dir = state.input.health.memory_dir.clone();
    let marks = index.marks();
    let mut moves: Vec<(usize, String, String, String)> = Vec::new();
    for (at, line) in index.lines.iter().enumerate() {
        if marks[at].code || marks[at].front_matter || units(&line.text) <= LONG_ENTRY_UNITS {
            continue;
        }
        let Some(link) = memory_links(&dir, INDEX_FILE, &line.text)
            .into_iter()
            .next()
        else {
            continue;
        };
        let topic = link.resolved.clone();
        if link.definition
            || is_index(&topic)
            || topic == OVERFLOW_INDEX_FILE
            || !state.docs.contains_key(&topic)
        {
            continue;
        }
        let (_, syntax) = inline_extent(&line.text, &link.range);
        if let Some((kept, moved)) = split(&line.text, syntax.end) {
            moves.push((at, kept, moved, topic));
        }
    }
    let date = super::dates::today(state.input.now);
    for (at, kept, moved, topic) in moves {
        let origin = state.docs.get(INDEX_FILE).and_then(|d| d.lines[at].origin);
        if let Some(index) = state.docs.get_mut(INDEX_FILE) {
            index.lines[at].text = kept;
        }
        let moved = rebased(&dir, &moved, folder_of(&topic));
        if let Some(doc) = state.docs.get_mut(&topic) {
            let mut lines = Vec::new();
            if doc.lines.last().is_some_and(|l| !l.text.trim().is_empty()) {
                lines.push(String::new());
            }
            lines.push(format!("{} {moved}", moved_marker(&date)));
            doc.append(lines);
        }
        let line = origin.map_or_else(|| "an added line".to_string(), |n| format!("line {n}"));
        state.change(
            INDEX_FILE,
            origin,
            Kind::LongEntry,
            format!(
                "shortened to at most {INDEX_LINE_CHARS} characters: the rest moved to {topic}"
            ),
        );
        state.change(
            &topic,
            None,
            Kind::LongEntry,
            format!("appended the rest of {INDEX_FILE} {line}, marked as moved from the index"),
        );
    }
}

/// The line cut after its link (ending at byte `head_end`): the line kept and the text
/// moved; `None` when even the head is too long.
fn split(line: &str, head_end: usize) -> Option<(String, String)> {
    let head = &line[..head_end];
    if units(head) > LONG_ENTRY_UNITS {
        return None;
    }
    let rest = &line[head_end..];
    let protected = protected_ranges(line);
    let free = |at: usize| !protected.iter().any(|r| r.start < at && at < r.end);
    // Cut at white space outside code and links, the kept part holding a word.
    let mut best: Option<usize> = None;
    for (offset, c) in rest.char_indices() {
        if !c.is_whitespace() || !free(head_end + offset) {
            continue;
        }
        let kept = rest[..offset].trim_end();
        if !kept.chars().any(char::is_alphanumeric) {
            continue;
        }
        if units(head) + units(kept) + 1 > INDEX_LINE_CHARS {
            break;
        }
        best = Some(offset);
    }
    Some(match best {
        Some(cut) => (
            format!("{head}{}…", rest[..cut].trim_end()),
            rest[cut..].trim_start().to_string(),
        ),
        None => (
            head.to_string(),
            rest.trim_start_matches(|c: char| {
                c.is_whitespace() || matches!(c, '—' | '–' | '-' | ':' | ',' | ';')
            })
            .to_string(),
        ),
    })
}

/// The byte ranges of `line` a cut must not fall inside: code spans and whole links.
fn protected_ranges(line: &str) -> Vec<Range<usize>> {
    let spans = markdown::code_spans(line);
    let prose = markdown::prose(line, &spans);
    let mut out = spans;
    for link in markdown::links(&prose) {
        let (start, syntax) = inline_extent(line, &link.range);
        out.push(start.unwrap_or(link.range.start)..syntax.end);
    }
    out
}

/// `text` (from the index, at the top of the memory dir) with its memory links rewritten to
/// be read from `folder`.
fn rebased(dir: &std::path::Path, text: &str, folder: &str) -> String {
    if folder.is_empty() {
        return text.to_string();
    }
    let mut out = text.to_string();
    for link in memory_links(dir, INDEX_FILE, text).iter().rev() {
        let suffix = link
            .written
            .find(['#', '?'])
            .map_or("", |at| &link.written[at..]);
        out.replace_range(
            link.range.clone(),
            &format!("{}{suffix}", target_from(folder, &link.resolved)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_keeps_its_link_and_a_hook() {
        let hook = "word ".repeat(60);
        let line = format!("- [Style](style.md) — {}", hook.trim_end());
        let (kept, moved) = split(&line, "- [Style](style.md)".len()).unwrap();
        assert!(units(&kept) <= INDEX_LINE_CHARS, "{kept}");
        assert!(kept.starts_with("- [Style](style.md) — word") && kept.ends_with("word…"));
        let kept_words = kept.matches("word").count();
        assert_eq!(kept_words + moved.matches("word").count(), 60);
        assert!(moved.starts_with("word"));
    }

    #[test]
    fn no_cut_inside_a_link_or_code() {
        let line = format!(
            "- [S](s.md) — {} [a link with words](x.md) `code with spaces` tail",
            "w".repeat(120)
        );
        let (kept, moved) = split(&line, "- [S](s.md)".len()).unwrap();
        assert_eq!(kept, format!("- [S](s.md) — {}…", "w".repeat(120)));
        assert_eq!(moved, "[a link with words](x.md) `code with spaces` tail");
        let head = format!("- [{}](s.md)", "t".repeat(300));
        assert_eq!(split(&format!("{head} — x"), head.len()), None);
    }

    #[test]
    fn moved_links_are_read_from_the_topics_folder() {
        let dir = std::path::Path::new("/m");
        assert_eq!(
            rebased(dir, "see [a](a.md#x) and [w](https://e.org)", "team"),
            "see [a](../a.md#x) and [w](https://e.org)"
        );
    }
}
