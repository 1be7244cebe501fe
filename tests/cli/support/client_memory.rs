//! The memory dir the real Claude Code 2.1.332 wrote (tests/fixtures/claude-code-memory): the
//! writes its model made, taken back out of the files, and a key-by-key comparison of another
//! memory dir with it.

use std::path::{Path, PathBuf};

/// The session that wrote the four topic files and the index.
pub(crate) const WRITING_SESSION: &str = "0b6e0c44-3f1c-4c7e-9a51-2f0d8c1e7a10";

/// The session that read `feedback_testing.md` and edited one line of its body.
pub(crate) const EDITING_SESSION: &str = "5d2f7a90-8c3e-4b1a-b6d4-9e0f1a2b3c4d";

/// The edit the second session made to `feedback_testing.md`'s body (old, new).
pub(crate) const EDIT: (&str, &str) = (
    "start the database fixture.",
    "start the database fixture (make db-up).",
);
pub(crate) const EDITED_FILE: &str = "feedback_testing.md";

/// The folder the client wrote.
pub(crate) fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-code-memory/memory")
}

/// A stamped file read back: top-level keys (values unquoted), `metadata` keys, the body.
#[derive(Debug)]
struct Stamped {
    top: Vec<(String, String)>,
    metadata: Vec<(String, String)>,
    body: String,
}

/// A one-line YAML scalar's value (the client double-quotes some descriptions).
fn unquote(value: &str) -> String {
    if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        return inner.replace("\\\"", "\"").replace("\\\\", "\\");
    }
    if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        return inner.replace("''", "'");
    }
    value.to_string()
}

fn parse(name: &str, text: &str) -> Stamped {
    let inner = text
        .strip_prefix("---\n")
        .unwrap_or_else(|| panic!("{name}: no frontmatter:\n{text}"));
    let (front, body) = inner
        .split_once("\n---\n")
        .unwrap_or_else(|| panic!("{name}: frontmatter not closed:\n{text}"));
    let mut stamped = Stamped {
        top: Vec::new(),
        metadata: Vec::new(),
        body: body.to_string(),
    };
    for line in front.lines() {
        let (key, value) = line
            .trim_start()
            .split_once(':')
            .unwrap_or_else(|| panic!("{name}: {line:?} is no `key: value`"));
        let pair = (key.to_string(), unquote(value.trim()));
        if line.starts_with("  ") {
            stamped.metadata.push(pair);
        } else {
            stamped.top.push(pair);
        }
    }
    stamped
}

/// `2026-12-05T08:27:20.002Z`: UTC, milliseconds, `Z`.
pub(crate) fn is_client_time(text: &str) -> bool {
    let shape = "0000-00-00T00:00:00.000Z";
    text.len() == shape.len()
        && text
            .chars()
            .zip(shape.chars())
            .all(|(c, s)| if s == '0' { c.is_ascii_digit() } else { c == s })
}

/// The `.md` files of a memory dir, by name (sorted).
fn md_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .collect();
    names.sort();
    names
}

/// What the first session's model wrote, file by file (name, content): the client's files
/// with its stamps taken out, `user_role.md`'s `type` back at the top level where the model
/// put it, descriptions as the model wrote them (unquoted), and the second session's edit
/// undone.
pub(crate) fn first_session_writes() -> Vec<(String, String)> {
    let dir = fixture_dir();
    md_files(&dir)
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(dir.join(&name)).unwrap();
            if name == "MEMORY.md" {
                return (name, text);
            }
            let stamped = parse(&name, &text);
            let mut written = String::from("---\n");
            for (key, value) in &stamped.top {
                if key == "metadata" {
                    let kind = &stamped
                        .metadata
                        .iter()
                        .find(|(k, _)| k == "type")
                        .expect("metadata.type")
                        .1;
                    if name == "user_role.md" {
                        written.push_str(&format!("type: {kind}\n"));
                    } else {
                        written.push_str(&format!("metadata:\n  type: {kind}\n"));
                    }
                } else {
                    written.push_str(&format!("{key}: {value}\n"));
                }
            }
            written.push_str("---\n");
            let mut body = stamped.body;
            if name == EDITED_FILE {
                assert_eq!(body.matches(EDIT.1).count(), 1, "{body}");
                body = body.replace(EDIT.1, EDIT.0);
            }
            written.push_str(&body);
            (name, written)
        })
        .collect()
}

/// Checks the memory dir `dir` against the client's, key by key: the same files; MEMORY.md
/// byte for byte; in each topic file the same top-level keys and values in the same order,
/// `metadata` keys in the client's order (`node_type: memory` first, the same `type`,
/// `originSessionId` = `origin`, `modified` in the client's form) and the same body.
/// Returns each topic file's `modified`.
pub(crate) fn assert_stamped_like_the_client(dir: &Path, origin: &str) -> Vec<(String, String)> {
    let fixture = fixture_dir();
    let names = md_files(&fixture);
    assert_eq!(md_files(dir), names, "{}", dir.display());
    let mut modified = Vec::new();
    for name in names {
        let ours = std::fs::read_to_string(dir.join(&name)).unwrap();
        let theirs = std::fs::read_to_string(fixture.join(&name)).unwrap();
        if name == "MEMORY.md" {
            assert_eq!(ours, theirs, "{name}");
            continue;
        }
        let (ours_parsed, theirs_parsed) = (parse(&name, &ours), parse(&name, &theirs));
        assert_eq!(ours_parsed.top, theirs_parsed.top, "{name}:\n{ours}");
        assert_eq!(ours_parsed.body, theirs_parsed.body, "{name}");
        let keys = |m: &[(String, String)]| m.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(
            keys(&ours_parsed.metadata),
            keys(&theirs_parsed.metadata),
            "{name}:\n{ours}"
        );
        assert_eq!(
            keys(&theirs_parsed.metadata),
            ["node_type", "type", "originSessionId", "modified"],
            "{name}: the fixture's order"
        );
        for (key, value) in &ours_parsed.metadata {
            let fixture_value = &theirs_parsed
                .metadata
                .iter()
                .find(|(k, _)| k == key)
                .unwrap()
                .1;
            match key.as_str() {
                "originSessionId" => assert_eq!(value, origin, "{name}"),
                "modified" => {
                    assert!(is_client_time(value), "{name}: modified {value:?}");
                    assert!(is_client_time(fixture_value), "{name}: the fixture's");
                    modified.push((name.clone(), value.clone()));
                }
                _ => assert_eq!(value, fixture_value, "{name}: metadata.{key}"),
            }
        }
    }
    modified
}
