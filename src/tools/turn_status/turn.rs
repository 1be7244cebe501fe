//! The turn to classify, read from the end of a transcript: its final assistant text and the
//! uuid of the record holding it. Read backwards, so a 1 GB transcript costs what a 1 MB one
//! does.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::claude::transcript::{BackwardReader, Item};
use crate::cli::Failure;
use crate::files::open_regular;

/// How far back from the end the reader may go looking for the turn's text.
pub const SCAN_BUDGET_BYTES: u64 = 8 * 1024 * 1024;

/// What the end of a transcript says about the last turn.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Turn {
    /// The final assistant text of the turn (all text blocks of its last API response), or
    /// `None` when the turn has none yet (the last real user turn is newer than any text).
    pub text: Option<String>,
    /// The uuid of the last record holding that text.
    pub uuid: Option<String>,
    /// The text is Claude Code's record of an API error (`isApiErrorMessage`).
    pub api_error: bool,
    pub session_id: Option<String>,
}

/// Reads at most `max` bytes of a regular file; `Ok(None)` when it does not exist. Anything
/// but a regular file (a FIFO, a device, a socket, a directory) is refused at once, never
/// waited on, and like an unreadable one is an environment failure with its `reason`.
pub fn read_small(what: &str, path: &Path, max: u64) -> Result<Option<Vec<u8>>, Failure> {
    let file = match open_regular(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Failure::io("read", path, &e)),
    };
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::io("read", path, &e))?;
    if bytes.len() as u64 > max {
        return Err(Failure::BadInput {
            reason: Some("too_large"),
            message: format!("{what} {} holds more than {max} bytes", path.display()),
        });
    }
    Ok(Some(bytes))
}

impl Turn {
    /// Reads the last turn of the transcript at `path` (a regular file).
    pub fn read(file: File) -> std::io::Result<Turn> {
        let len = file.metadata()?.len();
        let reader = BackwardReader::new(file, len);
        let mut turn = Turn::default();
        // The message.id of the response whose text was found; older records of the same
        // response hold its earlier text blocks.
        let mut response: Option<Option<String>> = None;
        let mut parts: Vec<String> = Vec::new();
        for entry in reader {
            let entry = entry?;
            if len - entry.offset > SCAN_BUDGET_BYTES {
                break;
            }
            let Item::Record(record) = entry.item else {
                continue;
            };
            if turn.session_id.is_none() {
                turn.session_id.clone_from(&record.session_id);
            }
            if let Some(id) = &response {
                let same = record.kind == "assistant"
                    && id.is_some()
                    && record.message.as_ref().and_then(|m| m.id.as_ref()) == id.as_ref();
                if same {
                    let text = record.text();
                    if !text.trim().is_empty() {
                        parts.push(text);
                    }
                    continue;
                }
                if record.kind == "user" || record.kind == "assistant" {
                    break;
                }
                continue;
            }
            if record.is_real_user_turn() {
                // The turn has no assistant text yet.
                break;
            }
            if record.kind != "assistant" || record.is_sidechain == Some(true) {
                continue;
            }
            let text = record.text();
            if text.trim().is_empty() {
                continue;
            }
            turn.uuid.clone_from(&record.uuid);
            turn.api_error = record.is_api_error();
            parts.push(text);
            if turn.api_error {
                break;
            }
            response = Some(record.message.as_ref().and_then(|m| m.id.clone()));
        }
        if !parts.is_empty() {
            parts.reverse();
            turn.text = Some(parts.join("\n"));
        }
        Ok(turn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn_of(lines: &[&str]) -> Turn {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        Turn::read(File::open(&path).unwrap()).unwrap()
    }

    const USER: &str =
        r#"{"type":"user","uuid":"u1","sessionId":"s","message":{"role":"user","content":"go"}}"#;

    #[test]
    fn final_text_joins_the_blocks_of_the_last_response() {
        let t = turn_of(&[
            USER,
            r#"{"type":"assistant","uuid":"a1","message":{"id":"m1","content":[{"type":"text","text":"old"}]}}"#,
            r#"{"type":"assistant","uuid":"a2","message":{"id":"m2","content":[{"type":"text","text":"first"}]}}"#,
            r#"{"type":"assistant","uuid":"a3","message":{"id":"m2","content":[{"type":"tool_use","name":"Bash","input":{}}]}}"#,
            r#"{"type":"assistant","uuid":"a4","sessionId":"s","message":{"id":"m2","content":[{"type":"text","text":"second"}]}}"#,
            r#"{"type":"system","subtype":"stop_hook_summary","uuid":"x"}"#,
            r#"{"type":"cost-state"}"#,
        ]);
        assert_eq!(t.text.as_deref(), Some("first\nsecond"));
        assert_eq!(t.uuid.as_deref(), Some("a4"));
        assert_eq!(t.session_id.as_deref(), Some("s"));
        assert!(!t.api_error);
    }

    #[test]
    fn a_newer_user_turn_means_no_text() {
        let t = turn_of(&[
            r#"{"type":"assistant","uuid":"a1","message":{"id":"m1","content":[{"type":"text","text":"old"}]}}"#,
            USER,
        ]);
        assert_eq!((t.text, t.uuid), (None, None));
    }

    #[test]
    fn api_errors_are_flagged() {
        let t = turn_of(&[
            USER,
            r#"{"type":"assistant","uuid":"e1","isApiErrorMessage":true,"error":"x","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 529 overloaded"}]}}"#,
        ]);
        assert!(t.api_error);
        assert_eq!(t.uuid.as_deref(), Some("e1"));
    }
}
