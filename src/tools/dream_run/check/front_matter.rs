//! The YAML frontmatter Claude Code 2.1.332 writes at the top of a memory file, read just far
//! enough for the check: the `---` block, top-level `key: value` lines (quoted or plain), and
//! the keys of a nested block (`metadata:`) by indentation. Anything else in the block (lists,
//! flow mappings, anchors, continuation lines) is passed over, never an error: the check reports
//! what it can read and never fails on what it cannot.

/// The memory types the client knows (`metadata.type`, or a top-level `type`).
pub(super) const TYPES: [&str; 4] = ["user", "feedback", "project", "reference"];

/// A value and the 1-based line of the file it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Value {
    pub text: String,
    pub line: usize,
}

/// What the check reads of a frontmatter block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FrontMatter {
    /// The block has its closing `---` (or `...`).
    pub closed: bool,
    pub name: Option<Value>,
    pub description: Option<Value>,
    /// A top-level `type`.
    pub top_type: Option<Value>,
    /// `metadata.type`.
    pub metadata_type: Option<Value>,
}

impl FrontMatter {
    /// The memory's type as the client reads it: `metadata.type`, else a top-level `type`.
    pub(super) fn memory_type(&self) -> Option<&Value> {
        self.metadata_type.as_ref().or(self.top_type.as_ref())
    }
}

/// The frontmatter at the top of `text`, or `None` when the text does not start with `---`.
pub(crate) fn parse(text: &str) -> Option<FrontMatter> {
    let mut lines = text
        .split('\n')
        .map(|raw| raw.strip_suffix('\r').unwrap_or(raw));
    if lines.next()? != "---" {
        return None;
    }
    let mut found = FrontMatter::default();
    // The top-level key whose block the indented lines belong to.
    let mut block: Option<&str> = None;
    let mut lines = lines.enumerate().map(|(i, line)| (i + 2, line)).peekable();
    while let Some((number, line)) = lines.next() {
        if line == "---" || line == "..." {
            found.closed = true;
            break;
        }
        let body = line.trim_start_matches([' ', '\t']);
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let indented = body.len() < line.len();
        let Some((key, raw)) = key_value(body) else {
            if !indented {
                block = None;
            }
            continue;
        };
        // A block scalar (`|`, `>-`): its text is the more indented lines that follow.
        let mut value = if is_block_scalar(raw) {
            let mut parts = Vec::new();
            while let Some(&(_, next)) = lines.peek() {
                let next_body = next.trim_start_matches([' ', '\t']);
                let deeper = next_body.len() < next.len() || next_body.is_empty();
                if !deeper || next == "---" || next == "..." {
                    break;
                }
                if !next_body.is_empty() {
                    parts.push(next_body.trim_end());
                }
                lines.next();
            }
            parts.join(" ")
        } else {
            scalar(raw)
        };
        value.truncate(value.trim_end().len());
        let value = Value {
            text: value,
            line: number,
        };
        if indented {
            if block == Some("metadata") && key == "type" {
                found.metadata_type.get_or_insert(value);
            }
            continue;
        }
        block = raw.trim().is_empty().then_some(key);
        let slot = match key {
            "name" => &mut found.name,
            "description" => &mut found.description,
            "type" => &mut found.top_type,
            _ => continue,
        };
        slot.get_or_insert(value);
    }
    Some(found)
}

/// `key: value` (the value possibly empty), the key a plain word.
fn key_value(line: &str) -> Option<(&str, &str)> {
    let (key, rest) = line.split_once(':')?;
    let key = key.trim_end();
    let plain_key = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    (plain_key && (rest.is_empty() || rest.starts_with([' ', '\t']))).then_some((key, rest))
}

fn is_block_scalar(raw: &str) -> bool {
    let raw = raw.trim();
    raw.starts_with(['|', '>'])
        && raw[1..]
            .bytes()
            .all(|b| matches!(b, b'-' | b'+') || b.is_ascii_digit())
}

/// A one-line scalar's text: `"..."` with its escapes read, `'...'` with `''` as a quote, or
/// a plain value without a trailing ` # comment`.
fn scalar(raw: &str) -> String {
    let raw = raw.trim();
    if let Some(inner) = raw.strip_prefix('"') {
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return out,
                '\\' => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(other) => out.push(other),
                    None => {}
                },
                c => out.push(c),
            }
        }
        // Never closed: the text as written.
        return raw.to_string();
    }
    if let Some(inner) = raw.strip_prefix('\'') {
        if let Some(end) = closing_single_quote(inner) {
            return inner[..end].replace("''", "'");
        }
        return raw.to_string();
    }
    match raw.find(" #") {
        Some(at) => raw[..at].trim_end().to_string(),
        None => raw.to_string(),
    }
}

/// The byte offset of the `'` that closes a single-quoted scalar (`''` is a quote inside).
fn closing_single_quote(inner: &str) -> Option<usize> {
    let bytes = inner.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i);
        }
        i += 1;
    }
    None
}

/// A kebab-case slug: lowercase ASCII letters and digits, in runs joined by single `-`.
pub(super) fn is_slug(name: &str) -> bool {
    !name.is_empty()
        && name.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(v: &Option<Value>) -> Option<(&str, usize)> {
        v.as_ref().map(|v| (v.text.as_str(), v.line))
    }

    #[test]
    fn the_clients_frontmatter_is_read() {
        let text = "---\nname: feedback-testing\ndescription: \"Run it, never \\\"mocks\\\"\"\nmetadata:\n  node_type: memory\n  type: feedback\n  originSessionId: 0b6e\n---\n\nBody\ntype: not read\n";
        let fm = parse(text).unwrap();
        assert!(fm.closed);
        assert_eq!(text_of(&fm.name), Some(("feedback-testing", 2)));
        assert_eq!(
            text_of(&fm.description),
            Some(("Run it, never \"mocks\"", 3))
        );
        assert_eq!(text_of(&fm.metadata_type), Some(("feedback", 6)));
        assert_eq!(fm.top_type, None);
        assert_eq!(fm.memory_type().map(|v| v.text.as_str()), Some("feedback"));
    }

    #[test]
    fn a_top_level_type_counts_when_metadata_has_none() {
        let fm = parse(
            "---\r\nname: 'it''s'\r\ntype: user # older files\r\nother:\r\n  type: x\r\n---\r\n",
        )
        .unwrap();
        assert_eq!(text_of(&fm.name), Some(("it's", 2)));
        assert_eq!(text_of(&fm.top_type), Some(("user", 3)));
        assert_eq!(
            fm.metadata_type, None,
            "only metadata's type is the memory's"
        );
        assert_eq!(fm.memory_type().unwrap().text, "user");
    }

    #[test]
    fn block_scalars_unclosed_blocks_and_no_block() {
        let fm = parse("---\ndescription: >-\n  one\n  two\nname: x\n").unwrap();
        assert!(!fm.closed);
        assert_eq!(text_of(&fm.description), Some(("one two", 2)));
        assert_eq!(text_of(&fm.name), Some(("x", 5)));
        assert_eq!(parse("# Title\n---\n"), None);
        assert_eq!(parse(""), None);
        // Odd YAML is passed over.
        let fm =
            parse("---\n- a\n{x: 1}\n&a b: *a\nname:\n  - list\n: empty\n\"q\": 1\n---\n").unwrap();
        assert!(fm.closed);
        assert_eq!(text_of(&fm.name), Some(("", 5)));
    }

    #[test]
    fn slugs() {
        for good in ["a", "user-role", "x2-y3", "2026-freeze"] {
            assert!(is_slug(good), "{good}");
        }
        for bad in [
            "",
            "User-Role",
            "user_role",
            "user--role",
            "-a",
            "a-",
            "a b",
            "é",
        ] {
            assert!(!is_slug(bad), "{bad}");
        }
    }
}
