//! Stamps a topic file's frontmatter as Claude Code 2.1.332 does when its agent writes one:
//! under `metadata:`, `node_type: memory` (first), `type` (a top-level `type` moves there),
//! `originSessionId` and `modified` (`2026-12-05T08:27:20.002Z` form).
//!
//! A rewrite that drops a kept key gets the previous version's value back. Only `metadata`
//! lines are added or changed: every other frontmatter line and the body stay byte for byte.
//! Frontmatter this minimal reader could not write back exactly (flow collections, anchors,
//! tags, block or multi-line scalars, tabs, a `metadata` that is not a flat block mapping...)
//! is left alone entirely, and so is content without frontmatter.

use std::path::Path;

/// What `node_type` holds in every file the client writes.
const NODE_TYPE: &str = "memory";

/// Indentation of a `metadata` block this module creates (the client's).
const DEFAULT_INDENT: &str = "  ";

/// The values a stamp sets.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stamp<'a> {
    /// `modified`, already in the client's form.
    pub now: &'a str,
    /// `originSessionId` for content that has none and whose previous version had none
    /// (`None`: left out).
    pub origin_session: Option<&'a str>,
}

/// Whether the file at `relative` (inside the memory dir) is a topic file, the only kind the
/// client stamps: every `.md` but an index (`MEMORY.md`, and the rules engine's overflow
/// index at the top of the memory dir).
pub(super) fn is_topic_file(relative: &Path) -> bool {
    let overflow = Path::new(crate::tools::dream_run::check::OVERFLOW_INDEX_FILE);
    relative != overflow && relative.file_name().is_some_and(|name| name != "MEMORY.md")
}

/// `written` stamped, knowing what the file held before (`previous`), or `None` when it is
/// to land as written (no frontmatter, or frontmatter this module does not rewrite).
pub(super) fn stamp(previous: Option<&str>, written: &str, stamp: &Stamp) -> Option<String> {
    let mut front = Frontmatter::parse(written)?;
    let previous = previous
        .and_then(Frontmatter::parse)
        .and_then(|p| p.metadata().map(Metadata::pairs))
        .unwrap_or_default();
    front.stamp(&previous, stamp);
    Some(front.render())
}

/// The `modified` value of `content`'s metadata, as written.
pub(super) fn modified_of(content: &str) -> Option<String> {
    let front = Frontmatter::parse(content)?;
    let metadata = front.metadata()?;
    metadata
        .pairs()
        .into_iter()
        .find(|(key, _)| key == "modified")
        .map(|(_, value)| value)
}

/// One top-level frontmatter line with what belongs to it.
#[derive(Debug, Clone)]
enum Item<'a> {
    /// A blank or comment line, kept as is.
    Verbatim(&'a str),
    /// `key: value` or `key:` and its indented block, kept as is unless it is `metadata`.
    Entry {
        key: &'a str,
        /// The value after `: ` (empty for a block or null).
        value: &'a str,
        /// The key's line and its block's lines, each with its `\n`.
        lines: Vec<&'a str>,
    },
    /// The `metadata` block mapping, rebuilt by [`Frontmatter::render`].
    Metadata(Metadata<'a>),
}

/// A flat block mapping under `metadata:`.
#[derive(Debug, Clone)]
struct Metadata<'a> {
    /// The `metadata:` line as written.
    head: &'a str,
    indent: String,
    /// (key, raw value, the line as written when unchanged)
    entries: Vec<(String, String, Option<&'a str>)>,
}

impl Metadata<'_> {
    fn pairs(&self) -> Vec<(String, String)> {
        self.entries
            .iter()
            .map(|(k, v, _)| (k.clone(), v.clone()))
            .collect()
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.entries.iter().position(|(k, _, _)| k == key)
    }

    /// Sets `key` (a changed line is written anew, in place).
    fn set(&mut self, key: &str, value: &str) {
        match self.position(key) {
            Some(at) => {
                if self.entries[at].1 != value {
                    self.entries[at] = (key.to_string(), value.to_string(), None);
                }
            }
            None => self
                .entries
                .push((key.to_string(), value.to_string(), None)),
        }
    }

    fn insert(&mut self, at: usize, key: &str, value: &str) {
        let at = at.min(self.entries.len());
        self.entries
            .insert(at, (key.to_string(), value.to_string(), None));
    }
}

/// A document's frontmatter, read line by line.
#[derive(Debug, Clone)]
struct Frontmatter<'a> {
    /// `---\n`.
    open: &'a str,
    items: Vec<Item<'a>>,
    /// The closing `---` line and the body after it.
    rest: &'a str,
}

impl<'a> Frontmatter<'a> {
    /// `None`: no frontmatter, or one this module does not rewrite.
    fn parse(content: &'a str) -> Option<Frontmatter<'a>> {
        let open = "---\n";
        let inner_start = open.len();
        if !content.starts_with(open) {
            return None;
        }
        let mut at = inner_start;
        let mut lines = Vec::new();
        let close = loop {
            let rest = &content[at..];
            if rest.is_empty() {
                return None;
            }
            let end = rest.find('\n').map_or(rest.len(), |i| i + 1);
            let line = &rest[..end];
            if line.trim_end_matches('\n') == "---" {
                break at;
            }
            lines.push(line);
            at += end;
        };
        let mut items: Vec<Item<'a>> = Vec::new();
        let mut keys = std::collections::HashSet::new();
        for line in lines {
            let text = line.strip_suffix('\n')?;
            if text.contains(['\t', '\r']) {
                return None;
            }
            if text.trim().is_empty() || text.starts_with('#') {
                items.push(Item::Verbatim(line));
                continue;
            }
            if text.starts_with(' ') {
                // A block line: only under a `key:` whose value is empty.
                match items.last_mut() {
                    Some(Item::Entry {
                        value: "", lines, ..
                    }) => {
                        lines.push(line);
                        continue;
                    }
                    _ => return None,
                }
            }
            let (key, value) = key_value(text)?;
            if !plain_key(key) || !keys.insert(key) || !safe_value(value) {
                return None;
            }
            items.push(Item::Entry {
                key,
                value,
                lines: vec![line],
            });
        }
        for item in &mut items {
            if let Item::Entry { key, value, lines } = item {
                if *key == "metadata" {
                    if !value.is_empty() {
                        return None;
                    }
                    *item = Item::Metadata(Metadata::parse(lines)?);
                }
            }
        }
        Some(Frontmatter {
            open,
            items,
            rest: &content[close..],
        })
    }

    fn metadata(&self) -> Option<&Metadata<'a>> {
        self.items.iter().find_map(|item| match item {
            Item::Metadata(m) => Some(m),
            _ => None,
        })
    }

    fn stamp(&mut self, previous: &[(String, String)], stamp: &Stamp) {
        let top_level_type = self.items.iter().position(
            |item| matches!(item, Item::Entry { key, value, lines } if *key == "type" && !value.is_empty() && lines.len() == 1),
        );
        let has_metadata = self.metadata().is_some();
        let metadata_type = self
            .metadata()
            .is_some_and(|m| m.position("type").is_some());
        // A top-level `type` moves under `metadata`, where the client keeps it, unless
        // `metadata` has one of its own; the new block takes its place.
        let moved_type = match top_level_type {
            Some(at) if !metadata_type => {
                let Item::Entry { value, .. } = self.items.remove(at) else {
                    unreachable!("found as an entry")
                };
                if !has_metadata {
                    self.items.insert(at, Item::Metadata(Metadata::empty()));
                }
                Some(value.to_string())
            }
            _ => None,
        };
        if self.metadata().is_none() {
            self.items.push(Item::Metadata(Metadata::empty()));
        }
        let Some(metadata) = self.items.iter_mut().find_map(|item| match item {
            Item::Metadata(m) => Some(m),
            _ => None,
        }) else {
            unreachable!("added above")
        };
        let before = |key: &str| previous.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        if metadata.position("node_type").is_none() {
            let value = before("node_type").map_or(NODE_TYPE, String::as_str);
            metadata.insert(0, "node_type", value);
        }
        if metadata.position("type").is_none() {
            if let Some(value) = moved_type.as_ref().or(before("type")) {
                let after_node_type = metadata.position("node_type").map_or(0, |at| at + 1);
                metadata.insert(after_node_type, "type", value);
            }
        }
        if metadata.position("originSessionId").is_none() {
            if let Some(value) = before("originSessionId")
                .map(String::as_str)
                .or(stamp.origin_session)
            {
                let before_modified = metadata
                    .position("modified")
                    .unwrap_or(metadata.entries.len());
                metadata.insert(before_modified, "originSessionId", value);
            }
        }
        metadata.set("modified", stamp.now);
    }

    fn render(&self) -> String {
        let mut out = String::from(self.open);
        for item in &self.items {
            match item {
                Item::Verbatim(line) => out.push_str(line),
                Item::Entry { lines, .. } => lines.iter().for_each(|line| out.push_str(line)),
                Item::Metadata(m) => {
                    out.push_str(m.head);
                    for (key, value, written) in &m.entries {
                        match written {
                            Some(line) => out.push_str(line),
                            None => {
                                out.push_str(&format!("{}{key}: {value}\n", m.indent));
                            }
                        }
                    }
                }
            }
        }
        out.push_str(self.rest);
        out
    }
}

impl<'a> Metadata<'a> {
    fn empty() -> Metadata<'a> {
        Metadata {
            head: "metadata:\n",
            indent: DEFAULT_INDENT.to_string(),
            entries: Vec::new(),
        }
    }

    /// `lines`: the `metadata:` line and its block; every block line `key: value` at one
    /// indentation.
    fn parse(lines: &[&'a str]) -> Option<Metadata<'a>> {
        let (head, block) = lines.split_first()?;
        let mut metadata = Metadata {
            head,
            indent: DEFAULT_INDENT.to_string(),
            entries: Vec::new(),
        };
        for (index, line) in block.iter().enumerate() {
            let text = line.strip_suffix('\n')?;
            let body = text.trim_start_matches(' ');
            let indent = &text[..text.len() - body.len()];
            if index == 0 {
                metadata.indent = indent.to_string();
            } else if indent != metadata.indent {
                return None;
            }
            if body.starts_with('#') {
                return None;
            }
            let (key, value) = key_value(body)?;
            if !plain_key(key) || !safe_value(value) || metadata.position(key).is_some() {
                return None;
            }
            metadata
                .entries
                .push((key.to_string(), value.to_string(), Some(line)));
        }
        Some(metadata)
    }
}

/// `key: value` or `key:` split at the first colon, the value without surrounding blanks.
fn key_value(text: &str) -> Option<(&str, &str)> {
    let (key, rest) = text.split_once(':')?;
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    Some((key, rest.trim()))
}

/// A key written plainly (no quotes, no `? `, no merge key).
fn plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// A one-line scalar (or nothing) this module can keep as is: no flow collection, anchor,
/// alias, tag, block scalar or directive, no comment, quotes closed on the line.
fn safe_value(value: &str) -> bool {
    let Some(first) = value.chars().next() else {
        return true;
    };
    if matches!(
        first,
        '&' | '*' | '!' | '{' | '[' | '|' | '>' | '%' | '@' | '`'
    ) {
        return false;
    }
    match first {
        '"' => closes_double_quoted(value),
        '\'' => {
            value.len() >= 2
                && value.ends_with('\'')
                && !value[1..value.len() - 1].replace("''", "").contains('\'')
        }
        _ => !value.contains(" #"),
    }
}

/// Whether a double-quoted scalar ends exactly at the end of `value`.
fn closes_double_quoted(value: &str) -> bool {
    let mut escaped = false;
    for (at, c) in value.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return at + 1 == value.len(),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-12-05T09:00:00.123Z";
    const S1: &str = "0b6e0c44-3f1c-4c7e-9a51-2f0d8c1e7a10";
    const S2: &str = "5d2f7a90-8c3e-4b1a-b6d4-9e0f1a2b3c4d";

    fn new_file(content: &str) -> Option<String> {
        stamp(
            None,
            content,
            &Stamp {
                now: NOW,
                origin_session: Some(S1),
            },
        )
    }

    #[test]
    fn a_new_file_gets_node_type_first_its_origin_and_modified() {
        let written = "---\nname: a\ndescription: A, b\nmetadata:\n  type: feedback\n---\n\nBody\n";
        assert_eq!(
            new_file(written).unwrap(),
            format!(
                "---\nname: a\ndescription: A, b\nmetadata:\n  node_type: memory\n  type: feedback\n  originSessionId: {S1}\n  modified: {NOW}\n---\n\nBody\n"
            )
        );
    }

    #[test]
    fn a_top_level_type_moves_under_metadata_in_its_place() {
        let written = "---\nname: a\ntype: user\ndescription: d\n---\nBody\n";
        assert_eq!(
            new_file(written).unwrap(),
            format!(
                "---\nname: a\nmetadata:\n  node_type: memory\n  type: user\n  originSessionId: {S1}\n  modified: {NOW}\ndescription: d\n---\nBody\n"
            )
        );
        // With a `metadata.type` of its own, the top-level one stays where it is.
        let both = "---\ntype: user\nmetadata:\n  type: project\n---\n";
        let stamped = new_file(both).unwrap();
        assert!(
            stamped
                .starts_with("---\ntype: user\nmetadata:\n  node_type: memory\n  type: project\n"),
            "{stamped}"
        );
    }

    #[test]
    fn a_rewrite_gets_the_dropped_keys_back_and_a_fresh_modified() {
        let previous = format!(
            "---\nname: a\nmetadata:\n  node_type: memory\n  type: project\n  originSessionId: {S1}\n  modified: 2026-12-01T00:00:00.000Z\n---\nOld\n"
        );
        let rewrite = "---\nname: a\ndescription: new\n---\nNew\n";
        let stamped = stamp(
            Some(&previous),
            rewrite,
            &Stamp {
                now: NOW,
                origin_session: Some(S2),
            },
        )
        .unwrap();
        assert_eq!(
            stamped,
            format!(
                "---\nname: a\ndescription: new\nmetadata:\n  node_type: memory\n  type: project\n  originSessionId: {S1}\n  modified: {NOW}\n---\nNew\n"
            )
        );
        // What the model kept or changed wins over the previous version.
        let changed =
            "---\nmetadata:\n    type: user\n    originSessionId: mine\n    modified: x\n---\n";
        assert_eq!(
            stamp(
                Some(&previous),
                changed,
                &Stamp {
                    now: NOW,
                    origin_session: None
                }
            )
            .unwrap(),
            format!("---\nmetadata:\n    node_type: memory\n    type: user\n    originSessionId: mine\n    modified: {NOW}\n---\n")
        );
    }

    #[test]
    fn other_lines_and_the_body_stay_byte_for_byte() {
        let written = "---\nname:   spaced  \n# a comment\n\ntags:\n  - a\n  - b\ndescription: 'it''s: fine'\nmetadata:   \n  z: \"q: \\\" x\"\n---\n  body  \n---\nmore\n";
        let stamped = new_file(written).unwrap();
        assert_eq!(
            stamped,
            format!(
                "---\nname:   spaced  \n# a comment\n\ntags:\n  - a\n  - b\ndescription: 'it''s: fine'\nmetadata:   \n  node_type: memory\n  z: \"q: \\\" x\"\n  originSessionId: {S1}\n  modified: {NOW}\n---\n  body  \n---\nmore\n"
            )
        );
        // Stamping a stamped file again only moves `modified`.
        let again = stamp(
            Some(&stamped),
            &stamped,
            &Stamp {
                now: "2027-01-01T00:00:00.000Z",
                origin_session: Some(S2),
            },
        )
        .unwrap();
        assert_eq!(again, stamped.replace(NOW, "2027-01-01T00:00:00.000Z"));
        assert_eq!(
            modified_of(&again).as_deref(),
            Some("2027-01-01T00:00:00.000Z")
        );
    }

    #[test]
    fn frontmatter_that_would_not_round_trip_is_left_alone() {
        for written in [
            "no frontmatter\n",
            "---\nname: never closed\n",
            "---\r\nname: crlf\r\n---\r\n",
            "---\nname: a\r\n---\n",
            "---\nmetadata: {type: user}\n---\n",
            "---\nmetadata: [a]\n---\n",
            "---\nmetadata: scalar\n---\n",
            "---\nmetadata:\n  type: user\n    nested: x\n---\n",
            "---\nmetadata:\n  type: user\n   odd: x\n---\n",
            "---\nmetadata:\n  inner:\n    deep: x\n---\n",
            "---\nmetadata:\n  # comment\n  type: user\n---\n",
            "---\nmetadata:\n\ttype: user\n---\n",
            "---\nmetadata:\n  type: &a user\n---\n",
            "---\nmetadata:\n  type: *a\n---\n",
            "---\nmetadata:\n  type: !!str user\n---\n",
            "---\nmetadata:\n  type: user # trailing\n---\n",
            "---\nmetadata:\n  type: user\n  type: project\n---\n",
            "---\nbase: &b\n  type: user\nmetadata:\n  <<: *b\n---\n",
            "---\ndescription: |\n  block\n---\n",
            "---\ndescription: >-\n  folded\n---\n",
            "---\ndescription: first\n  continued\n---\n",
            "---\ndescription: \"open\n  close\"\n---\n",
            "---\ndescription: 'open\n---\n",
            "---\n  indented: first\n---\n",
            "---\n\"quoted key\": x\n---\n",
            "---\n? complex\n---\n",
            "---\n- a\n---\n",
            "---\nname: a\nname: b\n---\n",
            "---\nmetadata:\n  type: user\nmetadata:\n  type: user\n---\n",
            "---\nname:x\n---\n",
        ] {
            assert_eq!(new_file(written), None, "{written:?}");
        }
    }

    #[test]
    fn a_previous_version_that_does_not_parse_gives_nothing_back() {
        let stamped = stamp(
            Some("---\nmetadata: {originSessionId: x}\n---\n"),
            "---\nname: a\n---\n",
            &Stamp {
                now: NOW,
                origin_session: None,
            },
        )
        .unwrap();
        assert_eq!(
            stamped,
            format!("---\nname: a\nmetadata:\n  node_type: memory\n  modified: {NOW}\n---\n")
        );
    }

    #[test]
    fn only_topic_files_are_stamped() {
        assert!(is_topic_file(Path::new("feedback.md")));
        assert!(is_topic_file(Path::new("team/notes.md")));
        assert!(!is_topic_file(Path::new("MEMORY.md")));
        assert!(!is_topic_file(Path::new("team/MEMORY.md")));
        assert!(!is_topic_file(Path::new("index-more.md")));
        assert!(is_topic_file(Path::new("team/index-more.md")));
    }
}
