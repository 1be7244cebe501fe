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
/// The index names each session's transcript size and mtime: a few hundred bytes a session.
/// A larger file is ignored like a corrupt one (the digests are rebuilt), never read whole.
const MAX_INDEX_BYTES: u64 = 64 * 1024 * 1024;

/// What a digest was built from; equal values mean the digest is current.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Source {
    bytes: u64,
    mtime_ms: i64,
}

/// A listed session whose transcript could not be read (it gets no digest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Unreadable {
    pub session_id: String,
    pub problem: String,
}

/// One session's digest, as the prompt names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Digest {
    pub session_id: String,
    #[serde(serialize_with = "crate::cli::output::path_lossy")]
    #[schemars(with = "String")]
    pub transcript: PathBuf,
    #[serde(serialize_with = "crate::cli::output::path_lossy")]
    #[schemars(with = "String")]
    pub path: PathBuf,
    pub raw_bytes: u64,
    pub digest_bytes: u64,
    /// Reused from an earlier run (the transcript had not changed).
    pub reused: bool,
}

/// Builds (or reuses) the digest of every session, in the given order, on all cores (reading
/// and filtering JSON Lines is the cost, and transcripts are independent). A transcript that
/// cannot be read gets no digest and is named in the second list; the agent can still grep it.
///
/// With `write` false (a dry run) nothing is written: digests are built in memory only, to
/// report their sizes.
pub fn build_all(
    state_dir: &Path,
    sessions: &[(String, PathBuf)],
    write: bool,
) -> std::io::Result<(Vec<Digest>, Vec<Unreadable>)> {
    let dir = state_dir.join(DIGESTS_DIR);
    if write {
        create_private_dir(&dir)?;
    }
    let index_path = dir.join(INDEX_FILE);
    let index: BTreeMap<String, Source> =
        crate::files::read_regular_capped(&index_path, MAX_INDEX_BYTES)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
    let results: Vec<Result<(Digest, Option<Source>), Unreadable>> =
        crate::parallel::map(sessions, |(id, transcript)| {
            build_one(&dir, &index, id, transcript, write).map_err(|problem| Unreadable {
                session_id: id.clone(),
                problem,
            })
        });
    let mut index = index;
    let mut digests = Vec::new();
    let mut problems = Vec::new();
    let mut changed = false;
    for result in results {
        match result {
            Ok((digest, Some(source))) => {
                index.insert(digest.session_id.clone(), source);
                changed = true;
                digests.push(digest);
            }
            Ok((digest, None)) => digests.push(digest),
            Err(problem) => problems.push(problem),
        }
    }
    if changed && write {
        let bytes = serde_json::to_vec(&index).map_err(std::io::Error::other)?;
        write_atomic(&index_path, &bytes, 0o600)?;
    }
    Ok((digests, problems))
}

/// One session's digest: reused when the index says the transcript is unchanged, else
/// rebuilt (then the new index entry comes back with it).
fn build_one(
    dir: &Path,
    index: &BTreeMap<String, Source>,
    id: &str,
    transcript: &Path,
    write: bool,
) -> Result<(Digest, Option<Source>), String> {
    let problem = |e: &dyn std::fmt::Display| format!("{}: {e}", transcript.display());
    let meta = std::fs::metadata(transcript).map_err(|e| problem(&e))?;
    if !meta.is_file() {
        return Err(problem(&crate::files::file_kind(meta.file_type())));
    }
    let source = Source {
        bytes: meta.len(),
        mtime_ms: epoch_ms(meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)),
    };
    let path = dir.join(format!("{id}.md"));
    let digest = |digest_bytes, reused| Digest {
        session_id: id.to_string(),
        transcript: transcript.to_path_buf(),
        path: path.clone(),
        raw_bytes: source.bytes,
        digest_bytes,
        reused,
    };
    if index.get(id) == Some(&source) {
        if let Ok(meta) = std::fs::metadata(&path) {
            return Ok((digest(meta.len(), true), None));
        }
    }
    let text = digest_text(id, transcript).map_err(|e| problem(&e))?;
    if write {
        write_atomic(&path, text.as_bytes(), 0o600).map_err(|e| problem(&e))?;
    }
    Ok((digest(text.len() as u64, false), Some(source)))
}

/// The digest of one transcript: a header, then one line per real user turn, assistant text
/// and tool call, with the time; a date line whenever the day changes.
pub fn digest_text(session_id: &str, transcript: &Path) -> std::io::Result<String> {
    let mut out = Vec::new();
    writeln!(out, "# Session {session_id}")?;
    writeln!(out, "transcript: {}", transcript.display())?;
    let mut day = String::new();
    for record in ForwardReader::open(transcript)?
        .only_lines(may_hold_conversation)
        .records()
    {
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

/// A byte-level test that keeps every user and assistant record and drops most of the rest
/// unparsed. A tool result's record carries the `"toolUseResult":` key (inside a JSON string
/// those quotes would be escaped, so the bytes only match the key); a conversation record
/// holds `"user"` or `"assistant"` as its type or role.
fn may_hold_conversation(line: &[u8]) -> bool {
    use memchr::memmem::Finder;
    use std::sync::LazyLock;
    static TOOL_RESULT: LazyLock<Finder<'static>> =
        LazyLock::new(|| Finder::new(b"\"toolUseResult\":"));
    static USER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"user\""));
    static ASSISTANT: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"assistant\""));
    TOOL_RESULT.find(line).is_none()
        && (USER.find(line).is_some() || ASSISTANT.find(line).is_some())
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
                describe_tool_call(
                    block.name.as_deref().unwrap_or("tool"),
                    block.input.as_ref()
                )
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
    fn the_prefilter_keeps_conversation_and_drops_tool_output() {
        assert!(may_hold_conversation(
            br#"{"type":"user","message":{"role":"user","content":"hi"}}"#
        ));
        assert!(may_hold_conversation(
            br#"{"type": "assistant", "message": {}}"#
        ));
        assert!(may_hold_conversation(
            br#"{"type":"user","message":{"content":"I typed \"toolUseResult\": here"}}"#
        ));
        assert!(!may_hold_conversation(
            br#"{"type":"user","toolUseResult":{"stdout":"x"},"message":{"role":"user"}}"#
        ));
        assert!(!may_hold_conversation(
            br#"{"type":"cost-state","totalCostUSD":1}"#
        ));
    }

    #[test]
    fn digests_are_reused_while_the_transcript_is_unchanged() {
        let tmp = tempfile::tempdir().unwrap();
        let transcript = tmp.path().join("t.jsonl");
        std::fs::copy(Path::new(FIXTURES).join("session-hello.jsonl"), &transcript).unwrap();
        let sessions = vec![("s1".to_string(), transcript.clone())];
        let (first, problems) = build_all(tmp.path(), &sessions, true).unwrap();
        assert!(problems.is_empty());
        assert!(!first[0].reused);
        let (second, _) = build_all(tmp.path(), &sessions, true).unwrap();
        assert!(second[0].reused);
        assert_eq!(second[0].digest_bytes, first[0].digest_bytes);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&transcript)
            .unwrap();
        writeln!(
            f,
            r#"{{"type":"user","message":{{"role":"user","content":"one more"}}}}"#
        )
        .unwrap();
        let (third, _) = build_all(tmp.path(), &sessions, true).unwrap();
        assert!(!third[0].reused);
        let text = std::fs::read_to_string(&third[0].path).unwrap();
        assert!(text.contains("User: one more"), "{text}");
    }

    #[test]
    fn an_unreadable_transcript_is_reported_not_fatal() {
        let tmp = tempfile::tempdir().unwrap();
        let sessions = vec![("s1".to_string(), tmp.path().join("missing.jsonl"))];
        let (digests, problems) = build_all(tmp.path(), &sessions, true).unwrap();
        assert!(digests.is_empty());
        assert_eq!(problems.len(), 1);
    }
}
