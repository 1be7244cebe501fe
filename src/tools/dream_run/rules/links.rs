//! `dangling_link`: a link to a memory file that does not exist. When exactly one `.md` file
//! of that file name is elsewhere in the memory dir, the link points at it; otherwise the
//! link goes and its text stays, marked ` (file missing)` right after it (a reference
//! definition `[label]: gone.md` becomes `label: (file missing)`). The dropped target may be
//! lost (`may_lose`).
//!
//! Also the link helpers the other rules share: where a link's syntax starts and ends, a
//! link target from one folder to a file, and a link's target rewritten.

use std::ops::Range;
use std::path::Path;

use super::State;
use crate::tools::dream_run::check::{markdown, resolve_link, Kind};

/// What marks a link whose file is gone.
pub(super) const FILE_MISSING: &str = " (file missing)";

/// Lines re-read for dangling links at most per line (each round drops or repoints one).
const MAX_ROUNDS: usize = 16;

/// The target a `dangling_link` problem's detail names (`links to X, which does not exist`).
pub(super) fn missing_target(detail: &str) -> Option<String> {
    detail
        .strip_prefix("links to ")?
        .strip_suffix(", which does not exist")
        .map(str::to_string)
}

/// A memory link found in a line: the target as written, where it is, and the file it
/// resolves to (relative to the memory dir).
#[derive(Debug, Clone)]
pub(super) struct MemoryLink {
    pub written: String,
    /// The target's bytes in the line.
    pub range: Range<usize>,
    pub resolved: String,
    /// A reference definition (`[label]: target`), not an inline link.
    pub definition: bool,
}

/// The folder of a memory file (`""` at the top).
pub(super) fn folder_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(folder, _)| folder)
}

/// The memory links of `line` of the file `file` (code spans are not links).
pub(super) fn memory_links(dir: &Path, file: &str, line: &str) -> Vec<MemoryLink> {
    if memchr::memchr(b']', line.as_bytes()).is_none() {
        return Vec::new();
    }
    let spans = markdown::code_spans(line);
    let prose = markdown::prose(line, &spans);
    let definition = is_definition(&prose);
    markdown::links(&prose)
        .into_iter()
        .filter_map(|link| {
            let resolved = resolve_link(dir, folder_of(file), &link.target)?;
            (!resolved.is_empty()).then_some(MemoryLink {
                written: link.target,
                range: link.range,
                resolved,
                definition,
            })
        })
        .collect()
}

/// `[label]: target` at the start of a line, as `check` reads one.
fn is_definition(prose: &str) -> bool {
    let indent = prose.len() - prose.trim_start_matches(' ').len();
    indent <= 3
        && prose[indent..].starts_with('[')
        && prose[indent..]
            .find("]:")
            .is_some_and(|at| at > 1 && !prose[indent + 1..indent + at].contains('['))
}

/// The link target from a file in `from` (a folder, `""` at the top) to the memory file
/// `to`, written so that `check` reads it back as `to`.
pub(super) fn target_from(from: &str, to: &str) -> String {
    let from: Vec<&str> = from.split('/').filter(|p| !p.is_empty()).collect();
    let to: Vec<&str> = to.split('/').collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); from.len() - common];
    parts.extend(to[common..].iter().map(|p| encoded(p)));
    parts.join("/")
}

/// A path component with the characters that would end or change a link target escaped.
fn encoded(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for c in part.chars() {
        match c {
            ' ' | '(' | ')' | '<' | '>' | '[' | ']' | '%' | '#' | '?' | '`' | '"' | '\\' => {
                out.push_str(&format!("%{:02X}", u32::from(c)));
            }
            c if c.is_control() => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// The part of a written target after the path (`#part`, `?x`), kept when it is repointed.
fn suffix_of(written: &str) -> &str {
    written.find(['#', '?']).map_or("", |at| &written[at..])
}

/// A link's target as `from` should write it to reach `to`, its `#part` kept.
pub(super) fn repointed(link: &MemoryLink, from_file: &str, to: &str) -> String {
    format!(
        "{}{}",
        target_from(folder_of(from_file), to),
        suffix_of(&link.written)
    )
}

/// Where an inline link's whole syntax is in `line` (`[text](target "title")`, an image's
/// `!` included), and its text's range, given its target's range; `None` when no `[` opens
/// it (the text then is whatever comes before the `]`).
pub(super) fn inline_extent(line: &str, target: &Range<usize>) -> (Option<usize>, Range<usize>) {
    let bytes = line.as_bytes();
    // The target follows `](`, or `](<` for an angle target.
    let close_bracket = target.start.saturating_sub(2);
    let mut depth = 0usize;
    let mut open = None;
    for at in (0..close_bracket).rev() {
        match bytes[at] {
            b']' => depth += 1,
            b'[' if depth == 0 => {
                open = Some(at);
                break;
            }
            b'[' => depth -= 1,
            _ => {}
        }
    }
    let start = match open {
        Some(at) if at > 0 && bytes[at - 1] == b'!' => Some(at - 1),
        other => other,
    };
    (start, target.start..syntax_end(line, target.end))
}

/// Where a link's syntax ends after its target: past an optional title and the `)`.
fn syntax_end(line: &str, after_target: usize) -> usize {
    let rest = &line[after_target..];
    if rest.starts_with(')') {
        return after_target + 1;
    }
    let trimmed = rest.trim_start_matches([' ', '\t']);
    let skipped = rest.len() - trimmed.len();
    let quote = match trimmed.chars().next() {
        Some(q @ ('"' | '\'')) => q,
        Some('(') => ')',
        _ => return after_target,
    };
    let Some(close) = trimmed[1..].find(quote) else {
        return after_target;
    };
    let after_title = &trimmed[1 + close + 1..];
    let tail = after_title.trim_start_matches([' ', '\t']);
    if tail.starts_with(')') {
        line.len() - tail.len() + 1
    } else {
        after_target + skipped
    }
}

/// `line` with the link whose target is at `target` made plain text, marked missing.
fn unlinked(line: &str, link: &MemoryLink) -> String {
    if link.definition {
        // `[label]: target "title"` -> `label: (file missing) "title"`.
        let indent = line.len() - line.trim_start_matches(' ').len();
        let label_end = line[indent..].find("]:").map_or(indent, |at| indent + at);
        let label = line.get(indent + 1..label_end).unwrap_or_default();
        return format!(
            "{}{label}:{FILE_MISSING}{}",
            &line[..indent],
            &line[link.range.end..]
        );
    }
    let (start, syntax) = inline_extent(line, &link.range);
    let close_bracket = link.range.start.saturating_sub(2);
    let text = match start {
        Some(open) => {
            let text_start = if line.as_bytes()[open] == b'!' {
                open + 2
            } else {
                open + 1
            };
            &line[text_start..close_bracket]
        }
        None => &line[..close_bracket],
    };
    let head = start.map_or("", |open| &line[..open]);
    format!("{head}{text}{FILE_MISSING}{}", &line[syntax.end..])
}

/// One dangling link fixed: repointed (`other` the file it now links) or dropped (`other`
/// the target as written).
struct Fixed {
    relinked: bool,
    target: String,
    other: String,
}

/// The rule.
pub(super) fn dangling(state: &mut State<'_>) {
    let dir = state.input.health.memory_dir.clone();
    let paths: Vec<String> = state.docs.keys().cloned().collect();
    for path in paths {
        let Some(doc) = state.docs.get(&path) else {
            continue;
        };
        // Most files link to nothing that is gone: their lines are only classified (code or
        // not) when one does.
        let has_dangling = doc.lines.iter().any(|line| {
            line.text.contains("](")
                && memory_links(&dir, &path, &line.text)
                    .iter()
                    .any(|l| is_dangling(state, &l.resolved))
        });
        if !has_dangling {
            continue;
        }
        let marks = doc.marks();
        let mut edits: Vec<(usize, String, Vec<Fixed>)> = Vec::new();
        let mut relinked_targets: Vec<String> = Vec::new();
        for (at, line) in doc.lines.iter().enumerate() {
            if marks[at].code {
                continue;
            }
            let mut text = line.text.clone();
            let mut done = Vec::new();
            for _ in 0..MAX_ROUNDS {
                let links = memory_links(&dir, &path, &text);
                let Some(link) = links.into_iter().find(|l| is_dangling(state, &l.resolved)) else {
                    break;
                };
                let name = link.resolved.rsplit('/').next().unwrap_or_default();
                let candidates: Vec<&String> = state
                    .docs
                    .keys()
                    .filter(|p| p.rsplit('/').next() == Some(name) && **p != link.resolved)
                    .collect();
                if let [only] = candidates[..] {
                    let only = only.clone();
                    let target = repointed(&link, &path, &only);
                    text.replace_range(link.range.clone(), &target);
                    // The old target's folders may be gone from the text.
                    relinked_targets.push(link.written.clone());
                    done.push(Fixed {
                        relinked: true,
                        target: link.resolved,
                        other: only,
                    });
                } else {
                    text = unlinked(&text, &link);
                    done.push(Fixed {
                        relinked: false,
                        target: link.resolved,
                        other: link.written,
                    });
                }
            }
            if text != line.text {
                edits.push((at, text, done));
            }
        }
        state.may_lose.extend(relinked_targets);
        for (at, text, done) in edits {
            let origin = state.docs.get(&path).and_then(|d| d.lines[at].origin);
            if let Some(doc) = state.docs.get_mut(&path) {
                doc.lines[at].text = text;
            }
            for Fixed {
                relinked,
                target,
                other,
            } in done
            {
                let detail = if relinked {
                    format!("links to {target}, which does not exist: now to {other}, the one file of that name")
                } else {
                    state.may_lose.push(other);
                    format!("links to {target}, which does not exist: the link dropped, its text kept and marked (file missing)")
                };
                state.change(&path, origin, Kind::DanglingLink, detail);
            }
        }
    }
}

/// A link target `check` found missing, or one the run deleted, that is no file now.
fn is_dangling(state: &State<'_>, target: &str) -> bool {
    !state.docs.contains_key(target)
        && (state.missing.contains(target) || state.deleted.contains(target))
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_marker_is_the_one_check_reads_as_an_entry() {
        assert_eq!(
            FILE_MISSING.trim_start(),
            crate::tools::dream_run::check::FILE_MISSING
        );
    }

    use super::*;

    fn link(line: &str) -> MemoryLink {
        memory_links(Path::new("/m"), "MEMORY.md", line)
            .into_iter()
            .next()
            .unwrap()
    }

    #[test]
    fn targets_from_a_folder() {
        assert_eq!(target_from("", "a.md"), "a.md");
        assert_eq!(target_from("", "notes/a b.md"), "notes/a%20b.md");
        assert_eq!(target_from("team", "notes/a.md"), "../notes/a.md");
        assert_eq!(target_from("team/x", "team/y/a.md"), "../y/a.md");
        assert_eq!(target_from("team", "team/a(1).md"), "a%281%29.md");
        for (from, to) in [("", "a b#c.md"), ("team/x", "n/o%p.md"), ("a", "a/b.md")] {
            let written = target_from(from, to);
            assert_eq!(
                resolve_link(Path::new("/m"), from, &written).as_deref(),
                Some(to)
            );
        }
    }

    #[test]
    fn links_become_text_marked_missing() {
        let cases = [
            ("- [Gone](gone.md) — old", "- Gone (file missing) — old"),
            (
                "see ![pic](gone.md \"t\") here",
                "see pic (file missing) here",
            ),
            ("a [b [c]](<go ne.md>) d", "a b [c] (file missing) d"),
            ("x](gone.md) y", "x (file missing) y"),
            ("[ref]: gone.md \"T\"", "ref: (file missing) \"T\""),
            ("[a](gone.md", "a (file missing)"),
        ];
        for (line, want) in cases {
            assert_eq!(unlinked(line, &link(line)), want, "{line}");
        }
    }

    #[test]
    fn missing_targets_are_read_from_the_detail() {
        assert_eq!(
            missing_target("links to a/b.md, which does not exist").as_deref(),
            Some("a/b.md")
        );
        assert_eq!(missing_target("other"), None);
    }
}
