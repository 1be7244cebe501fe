//! `orphan_file`: a memory file no link path from an index reaches (`check`'s rule: every
//! `MEMORY.md`, a sub-folder's too, is an index, and links are followed through topic files;
//! files under `team/` count like any other) gets one line appended to `MEMORY.md`, in the
//! client's shape:
//!
//! ```text
//! - [Title](file.md) — hook
//! ```
//!
//! Title: the frontmatter's `name`, else the first heading, else the file name without `.md`.
//! Hook: the frontmatter's `description`, else the body's first sentence. Links in the hook
//! are reduced to their text; the line is at most [`INDEX_LINE_CHARS`] characters, the hook
//! cut with `…` (the topic keeps every word).

use std::collections::{BTreeSet, HashMap, VecDeque};

use super::doc::{Doc, Marks};
use super::links::{inline_extent, memory_links, target_from};
use super::text::{cut, units};
use super::State;
use crate::tools::dream_run::check::{
    front_matter, is_index, markdown, Kind, INDEX_FILE, INDEX_LINE_CHARS,
};

/// A title longer than this (UTF-16 units) is cut: the hook needs room too.
const TITLE_UNITS: usize = 60;

/// The memory files no index reaches.
pub(super) fn unreached(state: &State<'_>) -> Vec<String> {
    let dir = &state.input.health.memory_dir;
    let edges: HashMap<&str, Vec<String>> = state
        .docs
        .iter()
        .map(|(path, doc)| {
            let marks = doc.marks();
            let targets = doc
                .lines
                .iter()
                .zip(&marks)
                .filter(|(_, m)| !m.code)
                .flat_map(|(line, _)| memory_links(dir, path, &line.text))
                .map(|l| l.resolved)
                .collect();
            (path.as_str(), targets)
        })
        .collect();
    let mut reached: BTreeSet<&str> = BTreeSet::new();
    let mut queue: VecDeque<&str> = state
        .docs
        .keys()
        .map(String::as_str)
        .filter(|p| is_index(p))
        .collect();
    reached.extend(queue.iter().copied());
    while let Some(path) = queue.pop_front() {
        for target in edges.get(path).into_iter().flatten() {
            if let Some((known, _)) = edges.get_key_value(target.as_str()) {
                if reached.insert(known) {
                    queue.push_back(known);
                }
            }
        }
    }
    state
        .docs
        .keys()
        .filter(|p| !reached.contains(p.as_str()))
        .cloned()
        .collect()
}

/// The rule.
pub(super) fn index(state: &mut State<'_>) {
    // Only a deletion can leave a file unreached (the links of a deleted duplicate resolve
    // from its own folder, not its twin's); a dropped link's target was gone already. With no
    // orphan before the run and nothing deleted there is none to index, and the links of
    // every file need not be followed.
    let any_before = state
        .input
        .health
        .problems
        .iter()
        .any(|p| p.kind == Kind::OrphanFile);
    if !any_before && state.deleted.is_empty() {
        return;
    }
    let orphans = unreached(state);
    if orphans.is_empty() {
        return;
    }
    let index = state
        .docs
        .entry(INDEX_FILE.to_string())
        .or_insert_with(Doc::empty);
    // An index ending in an open code block would read the new lines as code.
    if !index.ends_outside_code() {
        return;
    }
    let mut added = Vec::new();
    for path in &orphans {
        if let Some(doc) = state.docs.get(path) {
            added.push((path.clone(), entry_line(path, doc)));
        }
    }
    if let Some(index) = state.docs.get_mut(INDEX_FILE) {
        index.append(added.iter().map(|(_, line)| line.clone()).collect());
    }
    for (path, _) in added {
        state.change(
            INDEX_FILE,
            None,
            Kind::OrphanFile,
            format!("indexed {path}, which no index linked"),
        );
    }
}

/// `- [Title](path) — hook` for the memory file `path`.
pub(super) fn entry_line(path: &str, doc: &Doc) -> String {
    let text = doc.render();
    let front = front_matter::parse(&text);
    let marks = doc.marks();
    let name = front
        .as_ref()
        .and_then(|f| f.name.as_ref())
        .map(|v| v.text.trim().to_string())
        .filter(|t| !t.is_empty());
    let title = name
        .or_else(|| first_heading(doc, &marks))
        .map(|t| plain_title(&t))
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| {
            let file = path.rsplit('/').next().unwrap_or(path);
            plain_title(file.strip_suffix(".md").unwrap_or(file))
        });
    let title = cut(&title, TITLE_UNITS);
    let description = front
        .as_ref()
        .and_then(|f| f.description.as_ref())
        .map(|v| v.text.clone())
        .filter(|t| !t.trim().is_empty());
    let hook = description
        .or_else(|| first_sentence(doc, &marks))
        .map(|h| plain_hook(&h))
        .unwrap_or_default();
    let head = format!("- [{title}]({})", target_from("", path));
    if hook.is_empty() {
        return head;
    }
    let head = format!("{head} — ");
    let room = INDEX_LINE_CHARS.saturating_sub(units(&head));
    format!("{head}{}", cut(&hook, room))
}

fn first_heading(doc: &Doc, marks: &[Marks]) -> Option<String> {
    doc.lines.iter().zip(marks).find_map(|(line, m)| {
        if m.code || m.front_matter {
            return None;
        }
        let text = line.text.trim();
        let hashes = text.bytes().take_while(|&b| b == b'#').count();
        let rest = &text[hashes..];
        ((1..=6).contains(&hashes) && rest.starts_with([' ', '\t']))
            .then(|| rest.trim().trim_end_matches('#').trim().to_string())
            .filter(|t| !t.is_empty())
    })
}

/// The body's first sentence: of its first line of text (no heading, no code), up to the
/// first `.`, `!` or `?` that ends a word.
fn first_sentence(doc: &Doc, marks: &[Marks]) -> Option<String> {
    let line = doc.lines.iter().zip(marks).find_map(|(line, m)| {
        let text = line.text.trim();
        (!m.code && !m.front_matter && !text.is_empty() && !text.starts_with('#')).then_some(text)
    })?;
    let line = line
        .strip_prefix(['-', '*', '+', '>'])
        .map_or(line, str::trim_start);
    let mut end = line.len();
    let mut chars = line.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|(_, n)| n.is_whitespace()) {
            end = at + c.len_utf8();
            break;
        }
    }
    Some(line[..end].to_string()).filter(|s| !s.trim().is_empty())
}

/// A title that cannot break the link around it: no brackets, no backticks, one line.
fn plain_title(text: &str) -> String {
    let text: String = text
        .chars()
        .filter(|c| *c != '`')
        .map(|c| match c {
            '[' => '(',
            ']' => ')',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A hook that adds no link to the index line: each link reduced to its text, one line.
fn plain_hook(text: &str) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    for _ in 0..16 {
        let spans = markdown::code_spans(&out);
        let prose = markdown::prose(&out, &spans);
        let Some(link) = markdown::links(&prose).into_iter().next() else {
            break;
        };
        let (start, syntax) = inline_extent(&out, &link.range);
        let close = link.range.start.saturating_sub(2);
        let (from, text_start) = match start {
            Some(open) if out.as_bytes()[open] == b'!' => (open, open + 2),
            Some(open) => (open, open + 1),
            None => (close, close),
        };
        let label = out[text_start..close].to_string();
        out.replace_range(from..syntax.end.max(from), &label);
    }
    // What is left of link syntax (`](` with no link) is spaced apart.
    let out = out.replace("](", "] (").replace("]:", "] :");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_line_from_frontmatter_heading_or_name() {
        let doc = Doc::parse(
            "---\nname: testing\ndescription: Run the [suite](x.md) first\n---\n# T\nbody\n",
        );
        assert_eq!(
            entry_line("a.md", &doc),
            "- [testing](a.md) — Run the suite first"
        );
        let doc = Doc::parse("# Deploy [prod]\n\nShip it on Fridays. Never on Mondays.\n");
        assert_eq!(
            entry_line("notes/de ploy.md", &doc),
            "- [Deploy (prod)](notes/de%20ploy.md) — Ship it on Fridays."
        );
        let doc = Doc::parse("- Plain text, no end\n");
        assert_eq!(entry_line("c.md", &doc), "- [c](c.md) — Plain text, no end");
        assert_eq!(entry_line("e.md", &Doc::parse("")), "- [e](e.md)");
        let long = Doc::parse(&format!("{}\n", "lorem ipsum ".repeat(40)));
        let line = entry_line("l.md", &long);
        assert!(
            units(&line) <= INDEX_LINE_CHARS && line.ends_with("ipsum…"),
            "{line}"
        );
    }
}
