//! The engine's promise that it loses no text: every word of the memory before is somewhere
//! in the memory after, but for the words of what the plan says it may drop.

use std::collections::{BTreeMap, BTreeSet, HashSet};

/// The words of `text`: maximal runs of letters or digits (Unicode), as written.
pub(super) fn each_word(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

pub(super) fn lost(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
    may_lose: &[String],
) -> Vec<String> {
    let kept: HashSet<&str> = after.values().flat_map(|t| each_word(t)).collect();
    let excused: HashSet<&str> = may_lose.iter().flat_map(|t| each_word(t)).collect();
    let mut lost = BTreeSet::new();
    for text in before.values() {
        let stamp = modified_stamp_line(text);
        for (at, line) in text.split('\n').enumerate() {
            if Some(at) == stamp {
                continue;
            }
            for word in each_word(line) {
                if !kept.contains(word) && !excused.contains(word) {
                    lost.insert(word.to_string());
                }
            }
        }
    }
    lost.into_iter().collect()
}

/// The line (from 0) of the frontmatter's `metadata.modified` in `text`, if it has one: a
/// `modified:` key indented under a top-level `metadata:` key of the leading `---` block.
pub(super) fn modified_stamp_line(text: &str) -> Option<usize> {
    front_matter_metadata(text)
        .find(|(_, key, _)| *key == "modified")
        .map(|(at, _, _)| at)
}

/// The `metadata.modified` value of `text`'s frontmatter, unquoted.
pub(super) fn modified_stamp(text: &str) -> Option<String> {
    front_matter_metadata(text)
        .find(|(_, key, _)| *key == "modified")
        .map(|(_, _, value)| {
            let value = value.trim();
            let unquoted = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(value);
            unquoted.to_string()
        })
}

/// The `key: value` lines of the `metadata:` block of `text`'s frontmatter: (line from 0,
/// key, raw value).
fn front_matter_metadata(text: &str) -> impl Iterator<Item = (usize, &str, &str)> {
    let mut lines = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .enumerate();
    let opened = lines.next().is_some_and(|(_, l)| l == "---");
    let mut in_metadata = false;
    lines
        .take_while(move |(_, l)| opened && *l != "---" && *l != "...")
        .filter_map(move |(at, line)| {
            let body = line.trim_start_matches([' ', '\t']);
            if body.len() == line.len() {
                in_metadata = body.trim_end() == "metadata:";
                return None;
            }
            if !in_metadata {
                return None;
            }
            let (key, value) = body.split_once(':')?;
            Some((at, key.trim_end(), value))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn words_missing_after_are_named_but_those_that_may_go() {
        let before = map(&[
            ("a.md", "Deploy with make, key sk-1. Grüße!"),
            ("b.md", "gone"),
        ]);
        let after = map(&[("a.md", "Deploy with make, key [redacted]. Grüße!")]);
        assert_eq!(lost(&before, &after, &[]), ["1", "gone", "sk"]);
        assert_eq!(
            lost(&before, &after, &["sk-1".into(), "gone".into()]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_old_modified_stamp_may_go() {
        let text = "---\nname: a\nmetadata:\n  type: user\n  modified: \"2026-11-20T10:00:00.000Z\"\n---\nbody\nmodified: 2020\n";
        assert_eq!(modified_stamp_line(text), Some(4));
        assert_eq!(
            modified_stamp(text).as_deref(),
            Some("2026-11-20T10:00:00.000Z")
        );
        let after = map(&[(
            "a.md",
            "---\nname: a\nmetadata:\n  type: user\n  modified: 2027-01-01T00:00:00.000Z\n---\nbody\nmodified: 2020\n",
        )]);
        assert!(lost(&map(&[("a.md", text)]), &after, &[]).is_empty());
        assert_eq!(modified_stamp("body\n  modified: x\n"), None);
        assert_eq!(modified_stamp("---\nmodified: x\n---\n"), None);
    }
}
