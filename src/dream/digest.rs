//! Session digests: the part of a transcript a consolidation needs (what the person asked,
//! what the assistant said, which tools it called on what), as small text files the agent can
//! read instead of the raw JSON Lines. Rebuilt only when a transcript's size or mtime changed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::claude::transcript::{cut_chars, describe_tool_call, ForwardReader, Record, Records};
use crate::cli::time::{epoch_ms, parse_rfc3339, rfc3339};
use crate::files::{create_private_dir, write_atomic};

/// Each message is cut to this many characters: a digest is for finding facts, and the raw
/// transcript is still there for a narrow grep.
pub const MESSAGE_CHARS: usize = 1200;
/// The directory under the project's state dir.
pub const DIGESTS_DIR: &str = "digests";
const INDEX_FILE: &str = "index.json";

/// What a digest was built from; equal values mean the digest is current.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Source {
    bytes: u64,
    mtime_ms: i64,
}

/// One session's digest, as the prompt names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Digest {
    pub session_id: String,
    #[serde(serialize_with = "crate::cli::output::path_lossy")]
    pub transcript: PathBuf,
    #[serde(serialize_with = "crate::cli::output::path_lossy")]
    pub path: PathBuf,
    pub raw_bytes: u64,
    pub digest_bytes: u64,
    /// Reused from an earlier run (the transcript had not changed).
    pub reused: bool,
}

/// Builds (or reuses) the digest of every session, in the given order. A transcript that
/// cannot be read gets no digest; the agent can still grep it.
pub fn build_all(
    state_dir: &Path,
    sessions: &[(String, PathBuf)],
) -> std::io::Result<(Vec<Digest>, Vec<String>)> {
    let dir = state_dir.join(DIGESTS_DIR);
    create_private_dir(&dir)?;
    let index_path = dir.join(INDEX_FILE);
    let mut index: BTreeMap<String, Source> = std::fs::read(&index_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    let mut digests = Vec::new();
    let mut problems = Vec::new();
    let mut changed = false;
    for (id, transcript) in sessions {
        let path = dir.join(format!("{id}.md"));
        let meta = match std::fs::metadata(transcript) {
            Ok(meta) if meta.is_file() => meta,
            Ok(_) => {
                problems.push(format!("{}: not a regular file", transcript.display()));
                continue;
            }
            Err(e) => {
                problems.push(format!("{}: {e}", transcript.display()));
                continue;
            }
        };
        let source = Source {
            bytes: meta.len(),
            mtime_ms: epoch_ms(meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)),
        };
        let current = index.get(id) == Some(&source);
        let reused_bytes = current
            .then(|| std::fs::metadata(&path).ok().map(|m| m.len()))
            .flatten();
        let (digest_bytes, reused) = match reused_bytes {
            Some(bytes) => (bytes, true),
            None => match digest_text(id, transcript) {
                Ok(text) => {
                    write_atomic(&path, text.as_bytes(), 0o600)?;
                    index.insert(id.clone(), source);
                    changed = true;
                    (text.len() as u64, false)
                }
                Err(e) => {
                    problems.push(format!("{}: {e}", transcript.display()));
                    continue;
                }
            },
        };
        digests.push(Digest {
            session_id: id.clone(),
            transcript: transcript.clone(),
            path,
            raw_bytes: source.bytes,
            digest_bytes,
            reused,
        });
    }
    if changed {
        let bytes = serde_json::to_vec(&index).map_err(std::io::Error::other)?;
        write_atomic(&index_path, &bytes, 0o600)?;
    }
    Ok((digests, problems))
}

/// The digest of one transcript: a header, then one line per real user turn, assistant text
/// and tool call, with the time; a date line whenever the day changes.
pub fn digest_text(session_id: &str, transcript: &Path) -> std::io::Result<String> {
    let mut out = Vec::new();
    writeln!(out, "# Session {session_id}")?;
    writeln!(out, "transcript: {}", transcript.display())?;
    let mut day = String::new();
    for record in ForwardReader::open(transcript)?.records() {
        let record = record?;
        let lines = record_lines(&record);
        if lines.is_empty() {
            continue;
        }
        let at = record
            .timestamp
            .as_deref()
            .and_then(parse_rfc3339)
            .map(rfc3339);
        let (date, time) = match &at {
            Some(at) => (at.get(..10).unwrap_or(""), at.get(11..16).unwrap_or("")),
            None => ("", ""),
        };
        if !date.is_empty() && date != day {
            day = date.to_string();
            writeln!(out, "\n## {day}")?;
        }
        for line in lines {
            writeln!(out, "[{time}] {line}")?;
        }
    }
    String::from_utf8(out).map_err(std::io::Error::other)
}

/// What one record contributes: nothing for everything but conversation.
fn record_lines(record: &Record) -> Vec<String> {
    let one_line = |text: &str| {
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        cut_chars(&flat, MESSAGE_CHARS)
    };
    if record.is_real_user_turn() {
        let text = record.text();
        return if text.trim().is_empty() {
            Vec::new()
        } else {
            vec![format!("User: {}", one_line(&text))]
        };
    }
    if record.kind != "assistant" || record.is_api_error() || record.is_sidechain == Some(true) {
        return Vec::new();
    }
    // One API answer is written as several records (one per block): each adds its own lines.
    record
        .blocks()
        .iter()
        .filter_map(|block| match block.kind.as_str() {
            "text" => block
                .text
                .as_deref()
                .filter(|t| !t.trim().is_empty())
                .map(|t| format!("Assistant: {}", one_line(t))),
            "tool_use" => Some(format!(
                "Tool: {}",
                describe_tool_call(block.name.as_deref().unwrap_or("tool"), block.input.as_ref())
            )),
            _ => None,
        })
        .chain(
            // Plain-string assistant content (older transcripts).
            match record.message.as_ref().and_then(|m| m.content.as_ref()) {
                Some(crate::claude::transcript::Content::Text(t)) if !t.trim().is_empty() => {
                    Some(format!("Assistant: {}", one_line(t)))
                }
                _ => None,
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/claude-code-2.1.332"
    );

    #[test]
    fn digest_keeps_conversation_and_tool_calls_only() {
        let path = Path::new(FIXTURES).join("session-tool-use.jsonl");
        let text = digest_text("s1", &path).unwrap();
        assert!(text.starts_with("# Session s1\n"), "{text}");
        assert!(text.contains("User: "), "{text}");
        assert!(text.contains("Tool: "), "{text}");
        assert!(!text.contains("\"type\""), "raw JSON leaked: {text}");
        let raw = std::fs::metadata(&path).unwrap().len();
        assert!((text.len() as u64) < raw, "{} vs {raw}", text.len());
    }

    #[test]
    fn digests_are_reused_while_the_transcript_is_unchanged() {
        let tmp = tempfile::tempdir().unwrap();
        let transcript = tmp.path().join("t.jsonl");
        std::fs::copy(Path::new(FIXTURES).join("session-hello.jsonl"), &transcript).unwrap();
        let sessions = vec![("s1".to_string(), transcript.clone())];
        let (first, problems) = build_all(tmp.path(), &sessions).unwrap();
        assert!(problems.is_empty());
        assert!(!first[0].reused);
        let (second, _) = build_all(tmp.path(), &sessions).unwrap();
        assert!(second[0].reused);
        assert_eq!(second[0].digest_bytes, first[0].digest_bytes);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&transcript)
            .unwrap();
        writeln!(f, r#"{{"type":"user","message":{{"role":"user","content":"one more"}}}}"#)
            .unwrap();
        let (third, _) = build_all(tmp.path(), &sessions).unwrap();
        assert!(!third[0].reused);
        let text = std::fs::read_to_string(&third[0].path).unwrap();
        assert!(text.contains("User: one more"), "{text}");
    }

    #[test]
    fn an_unreadable_transcript_is_reported_not_fatal() {
        let tmp = tempfile::tempdir().unwrap();
        let sessions = vec![("s1".to_string(), tmp.path().join("missing.jsonl"))];
        let (digests, problems) = build_all(tmp.path(), &sessions).unwrap();
        assert!(digests.is_empty());
        assert_eq!(problems.len(), 1);
    }
}
