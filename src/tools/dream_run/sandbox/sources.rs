//! Provenance: the `sources` a write, edit or delete names (`[{session, quote?}]`), checked
//! against the run's own transcripts. A source is verified when its session is one of the
//! sessions this run reviews and its quote (at most [`MAX_QUOTE_CHARS`]) occurs in that
//! session's conversation as decoded text: user and assistant text, tool inputs and
//! `tool_result` bodies, whitespace folded. Each transcript is read once, streamed, and its
//! decoded text kept for the rest of the run. A call whose sources fail still runs: the
//! sources are recorded as unverified, and the result says which failed and why.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::claude::transcript::{Content, ForwardReader, Record};
use crate::store::Source;

/// The longest quote checked: a source points at what was said, it does not copy it.
pub(super) const MAX_QUOTE_CHARS: usize = 300;

/// Lines longer than this are skipped when decoding (a pasted file or an image's data).
const MAX_LINE_BYTES: u64 = 16 * 1024 * 1024;

// One source as the model names it (a plain comment: a doc comment would become the schema's
// description on the wire).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub(super) struct SourceInput {
    /// The session id (a transcript's file name without .jsonl)
    pub(super) session: String,
    /// A short exact quote from that session (at most 300 characters)
    pub(super) quote: Option<String>,
}

/// The run's sessions, and each one's decoded text once it was needed.
#[derive(Debug, Default)]
pub(super) struct Sessions {
    transcripts: BTreeMap<String, PathBuf>,
    decoded: Mutex<HashMap<String, Arc<String>>>,
}

impl Sessions {
    /// `transcripts`: session id -> its transcript.
    pub(super) fn new(transcripts: BTreeMap<String, PathBuf>) -> Sessions {
        Sessions {
            transcripts,
            decoded: Mutex::default(),
        }
    }

    /// Each source checked, in order; `why` says why one is not verified.
    pub(super) fn check(&self, sources: &[SourceInput]) -> Vec<(Source, Option<String>)> {
        sources
            .iter()
            .map(|source| {
                let why = self.refusal(source);
                let checked = Source {
                    session: source.session.clone(),
                    quote: source.quote.clone(),
                    verified: why.is_none(),
                };
                (checked, why)
            })
            .collect()
    }

    fn refusal(&self, source: &SourceInput) -> Option<String> {
        let Some(transcript) = self.transcripts.get(&source.session) else {
            return Some("not one of the sessions this run reviews".into());
        };
        let quote = source.quote.as_deref()?;
        if quote.chars().count() > MAX_QUOTE_CHARS {
            return Some(format!(
                "the quote is longer than {MAX_QUOTE_CHARS} characters: quote a short exact phrase"
            ));
        }
        let folded = fold(quote);
        if folded.is_empty() {
            return Some("the quote is empty".into());
        }
        let Some(text) = self.decoded(&source.session, transcript) else {
            return Some("that session's transcript cannot be read".into());
        };
        if text.contains(&folded) {
            None
        } else {
            Some("not found in that session's transcript (quote it exactly)".into())
        }
    }

    /// The session's decoded text (`None` when it cannot be read: then nothing in it can be
    /// verified).
    fn decoded(&self, session: &str, transcript: &std::path::Path) -> Option<Arc<String>> {
        let mut decoded = self
            .decoded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(text) = decoded.get(session) {
            return Some(Arc::clone(text));
        }
        let text = Arc::new(decode(transcript).ok()?);
        decoded.insert(session.to_string(), Arc::clone(&text));
        Some(text)
    }
}

/// The conversation of a transcript as one folded text: every user and assistant text, every
/// string in a tool's input, every `tool_result` body, one record part after another.
pub(super) fn decode(transcript: &std::path::Path) -> std::io::Result<String> {
    let mut parts = String::new();
    for entry in ForwardReader::open(transcript)?.max_line_bytes(MAX_LINE_BYTES) {
        let Some(record) = entry?.into_record() else {
            continue;
        };
        collect(&record, &mut parts);
    }
    Ok(parts)
}

fn collect(record: &Record, out: &mut String) {
    let mut push = |text: &str| {
        let folded = fold(text);
        if !folded.is_empty() {
            out.push_str(&folded);
            out.push('\n');
        }
    };
    match record.message.as_ref().and_then(|m| m.content.as_ref()) {
        Some(Content::Text(text)) => push(text),
        Some(Content::Blocks(blocks)) => {
            for block in blocks {
                match block.kind.as_str() {
                    "text" => push(block.text.as_deref().unwrap_or("")),
                    "tool_use" => {
                        if let Some(input) = &block.input {
                            strings_of(input, &mut push);
                        }
                    }
                    "tool_result" => {
                        if let Some(content) = &block.content {
                            strings_of(content, &mut push);
                        }
                    }
                    _ => {}
                }
            }
        }
        None => {}
    }
}

/// Every string inside a JSON value (a tool's input, a `tool_result` body's text parts).
fn strings_of(value: &Value, push: &mut impl FnMut(&str)) {
    match value {
        Value::String(text) => push(text),
        Value::Array(items) => items.iter().for_each(|item| strings_of(item, push)),
        Value::Object(fields) => fields.values().for_each(|field| strings_of(field, push)),
        _ => {}
    }
}

/// Whitespace runs folded to one space, the ends trimmed.
pub(super) fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The tool result's line about the sources: how many were verified, and each that was not,
/// with why.
pub(super) fn said(checked: &[(Source, Option<String>)]) -> Option<String> {
    if checked.is_empty() {
        return None;
    }
    let verified = checked.iter().filter(|(s, _)| s.verified).count();
    let mut line = format!("sources: {verified} of {} verified", checked.len());
    for (source, why) in checked {
        if let Some(why) = why {
            let quote = source
                .quote
                .as_deref()
                .map(|q| format!(" quote {:?}", crate::claude::transcript::cut_chars(q, 80)))
                .unwrap_or_default();
            line.push_str(&format!(
                "; not verified: session {}{quote}: {why}",
                source.session
            ));
        }
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S1: &str = "11111111-1111-4111-8111-111111111111";

    fn sessions(transcript: &str) -> (tempfile::TempDir, Sessions) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{S1}.jsonl"));
        std::fs::write(&path, transcript).unwrap();
        let map = BTreeMap::from([(S1.to_string(), path)]);
        (dir, Sessions::new(map))
    }

    fn source(session: &str, quote: Option<&str>) -> SourceInput {
        SourceInput {
            session: session.into(),
            quote: quote.map(str::to_string),
        }
    }

    const TRANSCRIPT: &str = concat!(
        r#"{"type":"user","message":{"role":"user","content":"From now on   run\n make test before pushing."}}"#,
        "\n",
        r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Noted."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test --workspace"}}]}}"#,
        "\n",
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"test result: ok. 42 passed"}]}]}}"#,
        "\n",
        "not json\n",
    );

    #[test]
    fn quotes_are_found_in_text_tool_inputs_and_tool_results_whitespace_folded() {
        let (_dir, sessions) = sessions(TRANSCRIPT);
        for quote in [
            "run make test before pushing",
            "run\tmake   test",
            "cargo test --workspace",
            "42 passed",
            "Noted.",
        ] {
            let checked = sessions.check(&[source(S1, Some(quote))]);
            assert!(checked[0].0.verified, "{quote}: {:?}", checked[0].1);
        }
    }

    #[test]
    fn refusals_say_why() {
        let (_dir, sessions) = sessions(TRANSCRIPT);
        let long = "x".repeat(MAX_QUOTE_CHARS + 1);
        let cases = [
            (source(S1, Some("deploy on Fridays")), "not found"),
            (
                source("22222222-2222-4222-8222-222222222222", None),
                "not one of the sessions",
            ),
            (source(S1, Some(&long)), "longer than 300"),
            (source(S1, Some("  \n ")), "empty"),
        ];
        for (input, why) in cases {
            let checked = sessions.check(std::slice::from_ref(&input));
            assert!(!checked[0].0.verified, "{input:?}");
            assert!(
                checked[0].1.as_deref().unwrap().contains(why),
                "{:?}",
                checked[0].1
            );
        }
        // A session of the run with no quote: the session is the source.
        assert!(sessions.check(&[source(S1, None)])[0].0.verified);
        let line = said(&sessions.check(&[
            source(S1, Some("42 passed")),
            source(S1, Some("nowhere said")),
        ]))
        .unwrap();
        assert!(
            line.starts_with("sources: 1 of 2 verified; not verified: session"),
            "{line}"
        );
        assert!(line.contains("\"nowhere said\""), "{line}");
        assert_eq!(said(&[]), None);
    }

    #[test]
    fn a_transcript_is_decoded_once() {
        let (dir, sessions) = sessions(TRANSCRIPT);
        assert!(
            sessions.check(&[source(S1, Some("42 passed"))])[0]
                .0
                .verified
        );
        // Gone now: the decoded text kept from the first check still answers.
        std::fs::remove_file(dir.path().join(format!("{S1}.jsonl"))).unwrap();
        assert!(sessions.check(&[source(S1, Some("Noted."))])[0].0.verified);
    }
}
