//! When each memory line was written, as the project's transcripts record it: the rules
//! engine turns a relative date ("yesterday") into the absolute one only where it knows the
//! moment its line was written (the Write/Edit/MultiEdit tool call on that memory file whose
//! content holds the line, and that record's timestamp).
//!
//! Each transcript is scanned once: what it holds is cached beside its digest
//! (`digests/<session>.anchors.json`, keyed by the transcript's size and mtime), so a later
//! run reads only the transcripts that changed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::digest::DIGESTS_DIR;
use crate::claude::sessions::is_session_id;
use crate::claude::transcript::{ForwardReader, Records};
use crate::cli::time::{epoch_ms, parse_rfc3339};
use crate::files::write_atomic;
use crate::store::Anchor;

/// A cache file larger than this is ignored (rebuilt), never read whole.
const MAX_CACHE_BYTES: u64 = 16 * 1024 * 1024;

/// The client's file tools whose input carries a memory file's new text.
const WRITING_TOOLS: [&str; 3] = ["Write", "Edit", "MultiEdit"];

/// What the cache was built from; equal values mean it is current.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Source {
    bytes: u64,
    mtime_ms: i64,
}

/// One write of a memory file in a transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Written {
    /// Relative to the memory dir.
    file: String,
    /// The record's timestamp, as written.
    timestamp: String,
    /// [`line_key`] of each line of the new text.
    lines: Vec<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Cache {
    source: Source,
    writes: Vec<Written>,
}

/// Every memory line the transcripts saw written, with the earliest write.
#[derive(Debug, Default)]
pub(super) struct Anchors {
    /// (file, line key) -> the earliest record that wrote it, with its time.
    first: HashMap<(String, u64), (SystemTime, Anchor)>,
}

impl Anchors {
    /// Where `line` of `file` (relative to the memory dir) was first written, if a transcript
    /// records it.
    pub(super) fn of(&self, file: &str, line: &str) -> Option<Anchor> {
        self.first
            .get(&(file.to_string(), line_key(line)?))
            .map(|(_, anchor)| anchor.clone())
    }

    fn add(&mut self, session: &str, written: &Written) {
        let Some(at) = parse_rfc3339(&written.timestamp) else {
            return;
        };
        for &key in &written.lines {
            let slot = self.first.entry((written.file.clone(), key));
            let anchor = Anchor {
                session: session.to_string(),
                timestamp: written.timestamp.clone(),
            };
            slot.and_modify(|(when, old)| {
                if at < *when {
                    *when = at;
                    *old = anchor.clone();
                }
            })
            .or_insert((at, anchor));
        }
    }
}

/// Scans every transcript of `transcripts_dir` (its top-level `<session>.jsonl` files) for
/// writes of `memory_dir`'s files. With `write` false (a dry run) no cache is written.
/// A transcript that cannot be read adds nothing: its lines stay unanchored.
pub(super) fn scan(
    transcripts_dir: &Path,
    memory_dir: &Path,
    state_dir: &Path,
    write: bool,
) -> Anchors {
    let mut anchors = Anchors::default();
    let Ok(entries) = std::fs::read_dir(transcripts_dir) else {
        return anchors;
    };
    let mut sessions: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let path = entry.path();
            let id = path.file_name()?.to_str()?.strip_suffix(".jsonl")?;
            is_session_id(id).then(|| (id.to_string(), path.clone()))
        })
        .collect();
    sessions.sort();
    let cache_dir = state_dir.join(DIGESTS_DIR);
    // Without the folder the scan still runs; its findings are only not kept.
    let write = write && crate::files::create_private_dir(&cache_dir).is_ok();
    // Also the memory dir's canonical path: a session may have named it through a link.
    let mut roots = vec![memory_dir.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(memory_dir) {
        if real != memory_dir {
            roots.push(real);
        }
    }
    let found = crate::parallel::map(&sessions, |(id, transcript)| {
        writes_of(&cache_dir, id, transcript, &roots, write)
    });
    for ((id, _), writes) in sessions.iter().zip(found) {
        for written in &writes {
            anchors.add(id, written);
        }
    }
    anchors
}

/// One transcript's memory writes, from its cache when the transcript is unchanged.
fn writes_of(
    cache_dir: &Path,
    id: &str,
    transcript: &Path,
    roots: &[PathBuf],
    write: bool,
) -> Vec<Written> {
    let Ok(meta) = std::fs::metadata(transcript) else {
        return Vec::new();
    };
    if !meta.is_file() {
        return Vec::new();
    }
    let source = Source {
        bytes: meta.len(),
        mtime_ms: epoch_ms(meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)),
    };
    let cache_path = cache_dir.join(format!("{id}.anchors.json"));
    let cached: Option<Cache> = crate::files::read_regular_capped(&cache_path, MAX_CACHE_BYTES)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    if let Some(cache) = cached.filter(|c| c.source == source) {
        return cache.writes;
    }
    let Ok(writes) = read_writes(transcript, roots) else {
        return Vec::new();
    };
    if write {
        let cache = Cache {
            source,
            writes: writes.clone(),
        };
        if let Ok(bytes) = serde_json::to_vec(&cache) {
            // Best effort: without the cache the next run scans again.
            let _ = write_atomic(&cache_path, &bytes, 0o600);
        }
    }
    writes
}

/// A byte-level test: only a record naming a file path can hold a file tool's call.
fn may_write_a_file(line: &[u8]) -> bool {
    use memchr::memmem::Finder;
    use std::sync::LazyLock;
    static FILE_PATH: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"file_path\""));
    static TOOL_USE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"tool_use\""));
    FILE_PATH.find(line).is_some() && TOOL_USE.find(line).is_some()
}

/// Every Write/Edit/MultiEdit call on a file under one of `roots`, in transcript order.
fn read_writes(transcript: &Path, roots: &[PathBuf]) -> std::io::Result<Vec<Written>> {
    let mut writes = Vec::new();
    for record in ForwardReader::open(transcript)?
        .only_lines(may_write_a_file)
        .records()
    {
        let Ok(record) = record else { continue };
        if record.kind != "assistant" || record.is_sidechain == Some(true) {
            continue;
        }
        let Some(timestamp) = record.timestamp.clone() else {
            continue;
        };
        for block in record.blocks() {
            let Some(name) = block.name.as_deref() else {
                continue;
            };
            if block.kind != "tool_use" || !WRITING_TOOLS.contains(&name) {
                continue;
            }
            let Some(input) = block.input.as_ref() else {
                continue;
            };
            let Some(file) = input
                .get("file_path")
                .and_then(Value::as_str)
                .and_then(|p| relative_to(Path::new(p), roots))
            else {
                continue;
            };
            let lines: Vec<u64> = new_texts(input)
                .into_iter()
                .flat_map(str::lines)
                .filter_map(line_key)
                .collect();
            if !lines.is_empty() {
                writes.push(Written {
                    file,
                    timestamp: timestamp.clone(),
                    lines,
                });
            }
        }
    }
    Ok(writes)
}

/// The text a file tool's input puts into the file.
fn new_texts(input: &Value) -> Vec<&str> {
    let mut texts: Vec<&str> = ["content", "new_string"]
        .into_iter()
        .filter_map(|key| input.get(key).and_then(Value::as_str))
        .collect();
    if let Some(edits) = input.get("edits").and_then(Value::as_array) {
        texts.extend(
            edits
                .iter()
                .filter_map(|e| e.get("new_string").and_then(Value::as_str)),
        );
    }
    texts
}

/// `path` relative to the first root holding it (a plain `.md` path, no `..`).
fn relative_to(path: &Path, roots: &[PathBuf]) -> Option<String> {
    let rel = roots.iter().find_map(|root| path.strip_prefix(root).ok())?;
    let plain = rel
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    let rel = rel.to_str()?;
    (plain && rel.ends_with(".md")).then(|| rel.to_string())
}

/// A line's key: FNV-1a over its trimmed text (stable across builds, so caches stay valid);
/// `None` for a blank line, which anchors nothing.
fn line_key(line: &str) -> Option<u64> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in line.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    Some(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION_A: &str = "11111111-1111-4111-8111-111111111111";
    const SESSION_B: &str = "22222222-2222-4222-8222-222222222222";

    fn tool_use(memory: &Path, at: &str, name: &str, input: Value) -> String {
        let mut input = input;
        if let Some(rel) = input.get("file_path").and_then(Value::as_str) {
            input["file_path"] = Value::String(memory.join(rel).to_string_lossy().into_owned());
        }
        serde_json::json!({
            "type": "assistant", "timestamp": at, "uuid": "u", "sessionId": "s",
            "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t", "name": name, "input": input}
            ]}
        })
        .to_string()
    }

    #[test]
    fn a_line_is_anchored_at_its_earliest_write_and_the_cache_is_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let memory = tmp.path().join("memory");
        let transcripts = tmp.path().join("project");
        let state = tmp.path().join("state");
        std::fs::create_dir_all(&transcripts).unwrap();
        let a = [
            tool_use(
                &memory,
                "2026-11-20T10:00:00.000Z",
                "Write",
                serde_json::json!({"file_path": "log.md", "content": "# Log\nDeployed yesterday.\n"}),
            ),
            tool_use(
                &memory,
                "2026-11-21T09:00:00.000Z",
                "Edit",
                serde_json::json!({"file_path": "log.md", "old_string": "x", "new_string": "Fixed it last week."}),
            ),
            // Not a memory file: never an anchor.
            tool_use(
                &tmp.path().join("elsewhere"),
                "2026-11-19T09:00:00.000Z",
                "Write",
                serde_json::json!({"file_path": "log.md", "content": "Deployed yesterday."}),
            ),
        ]
        .join("\n");
        std::fs::write(transcripts.join(format!("{SESSION_A}.jsonl")), a).unwrap();
        let b = tool_use(
            &memory,
            "2026-11-25T10:00:00.000Z",
            "MultiEdit",
            serde_json::json!({"file_path": "log.md", "edits": [{"old_string": "a", "new_string": "  Deployed yesterday.  "}]}),
        );
        std::fs::write(transcripts.join(format!("{SESSION_B}.jsonl")), b).unwrap();

        let anchors = scan(&transcripts, &memory, &state, true);
        let first = anchors.of("log.md", "Deployed yesterday.").unwrap();
        assert_eq!(first.session, SESSION_A);
        assert_eq!(first.timestamp, "2026-11-20T10:00:00.000Z");
        let edit = anchors.of("log.md", "Fixed it last week.").unwrap();
        assert_eq!(edit.timestamp, "2026-11-21T09:00:00.000Z");
        assert_eq!(anchors.of("other.md", "Deployed yesterday."), None);
        assert_eq!(anchors.of("log.md", "never written"), None);

        let cache = state
            .join(DIGESTS_DIR)
            .join(format!("{SESSION_A}.anchors.json"));
        assert!(cache.is_file());
        // A cache that matches the transcript is believed: what it says is what is found.
        let mut kept: Cache = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
        kept.writes[0].timestamp = "2026-11-01T00:00:00.000Z".into();
        std::fs::write(&cache, serde_json::to_vec(&kept).unwrap()).unwrap();
        let again = scan(&transcripts, &memory, &state, true);
        let first = again.of("log.md", "Deployed yesterday.").unwrap();
        assert_eq!(first.timestamp, "2026-11-01T00:00:00.000Z");
    }

    #[test]
    fn a_dry_scan_writes_nothing_and_bad_records_are_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let memory = tmp.path().join("memory");
        let transcripts = tmp.path().join("project");
        let state = tmp.path().join("state");
        std::fs::create_dir_all(&transcripts).unwrap();
        let lines = [
            "not json \"file_path\" \"tool_use\"".to_string(),
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Write","input":{"file_path":7}}]},"timestamp":"x"}"#.to_string(),
            tool_use(
                &memory,
                "not a time",
                "Write",
                serde_json::json!({"file_path": "a.md", "content": "Yesterday."}),
            ),
            tool_use(
                &memory,
                "2026-11-20T10:00:00Z",
                "Write",
                serde_json::json!({"file_path": "../escape.md", "content": "Yesterday."}),
            ),
        ]
        .join("\n");
        std::fs::write(transcripts.join(format!("{SESSION_A}.jsonl")), lines).unwrap();
        // Not a session's transcript: never read.
        std::fs::write(transcripts.join("notes.jsonl"), "").unwrap();
        let anchors = scan(&transcripts, &memory, &state, false);
        assert!(anchors.first.is_empty());
        assert!(!state.exists());
    }
}
