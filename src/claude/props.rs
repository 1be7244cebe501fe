//! Property tests of what dreamkit reads from Claude Code: transcripts (both readers, against
//! a plain split of the bytes) and hook payloads (typed against the field rule).

use std::io;

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::hook::HookPayload;
use super::transcript::{BackwardReader, Entry, ForwardReader, Item, ReadAt, Record};
use crate::cli::props::{config, json_object, json_value};

/// A transcript held in memory, read positionally like the file.
struct Bytes(Vec<u8>);

impl ReadAt for Bytes {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(io::Error::other)?;
        let source = self
            .0
            .get(start..start + buf.len())
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(source);
        Ok(())
    }
}

/// One line of a transcript, without its newline: records of the client's shapes, their
/// truncations, blank lines, CRLF, invalid UTF-8, and now and then one longer than a read
/// chunk (64 KiB).
fn line() -> impl Strategy<Value = Vec<u8>> {
    let record = (
        prop::sample::select(vec!["user", "assistant", "system", "summary", "x"]),
        ".{0,20}",
        json_value(),
    )
        .prop_map(|(kind, text, extra)| {
            json!({
                "type": kind,
                "uuid": "u",
                "message": {"role": kind, "content": [{"type": "text", "text": text}]},
                "toolUseResult": extra,
            })
            .to_string()
            .into_bytes()
        })
        .boxed();
    prop_oneof![
        6 => record.clone(),
        2 => (record, any::<prop::sample::Index>()).prop_map(|(r, at)| r[..at.index(r.len())].to_vec()),
        1 => "[ \t\r]{0,3}".prop_map(String::into_bytes),
        1 => json_object().prop_map(|m| Value::Object(m).to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>().prop_map(|b| if b == b'\n' { b'.' } else { b }), 0..40),
        1 => (any::<u8>(), 65_000..140_000usize).prop_map(|(b, n)| {
            let b = if b == b'\n' { b'x' } else { b };
            vec![b; n]
        }),
    ]
}

fn transcript() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec((line(), any::<bool>()), 0..12),
        any::<bool>(),
    )
        .prop_map(|(lines, newline_at_end)| {
            let mut bytes = Vec::new();
            for (i, (line, crlf)) in lines.iter().enumerate() {
                bytes.extend_from_slice(line);
                if *crlf {
                    bytes.push(b'\r');
                }
                if i + 1 < lines.len() || newline_at_end {
                    bytes.push(b'\n');
                }
            }
            bytes
        })
}

/// What a reader of `bytes` must yield, front to back: the plainest split on `\n`.
fn reference(bytes: &[u8], max_line: u64) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut offset = 0u64;
    let pieces: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    for (i, piece) in pieces.iter().enumerate() {
        let terminated = i + 1 < pieces.len();
        let len = piece.len() as u64;
        if len > max_line {
            entries.push(Entry {
                offset,
                len,
                item: Item::Oversized,
            });
        } else {
            let line = piece.strip_suffix(b"\r").unwrap_or(piece);
            if !line.iter().all(u8::is_ascii_whitespace) {
                let item = match Record::parse(line) {
                    Some(record) => Item::Record(Box::new(record)),
                    None if terminated => Item::Malformed,
                    None => Item::Partial,
                };
                entries.push(Entry {
                    offset,
                    len: line.len() as u64,
                    item,
                });
            }
        }
        offset += len + 1;
    }
    entries
}

/// The hook fields and the JSON types they take.
fn typed_right(key: &str, value: &Value) -> Option<bool> {
    match key {
        "hook_event_name" => Some(value.is_string()),
        "stop_hook_active" => Some(matches!(value, Value::Null | Value::Bool(_))),
        "session_id" | "transcript_path" | "cwd" | "permission_mode" | "last_assistant_message" => {
            Some(matches!(value, Value::Null | Value::String(_)))
        }
        _ => None,
    }
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn both_readers_yield_the_lines_of_a_plain_split_in_their_order(
        bytes in transcript(),
        max_line in prop_oneof![Just(crate::claude::transcript::DEFAULT_MAX_LINE_BYTES), 1..200u64],
    ) {
        let expected = reference(&bytes, max_line);
        let forward: Vec<Entry> = ForwardReader::new(io::Cursor::new(&bytes))
            .max_line_bytes(max_line)
            .collect::<io::Result<_>>()
            .unwrap();
        prop_assert_eq!(&forward, &expected);
        let len = bytes.len() as u64;
        let backward = BackwardReader::new(Bytes(bytes.clone()), len).max_line_bytes(max_line);
        prop_assert_eq!(backward.ends_with_newline().unwrap(), bytes.last().is_none_or(|b| *b == b'\n'));
        let mut backward: Vec<Entry> = backward.collect::<io::Result<_>>().unwrap();
        backward.reverse();
        prop_assert_eq!(&backward, &expected);
        // Taking only the newest records reads as much as it needs, and yields the same.
        let newest: Vec<Entry> = BackwardReader::new(Bytes(bytes), len)
            .max_line_bytes(max_line)
            .take(2)
            .collect::<io::Result<_>>()
            .unwrap();
        prop_assert!(expected.iter().rev().take(2).eq(newest.iter()));
    }

    #[test]
    fn a_hook_payload_is_typed_when_every_used_field_has_its_type(map in json_object()) {
        let wrong = ["hook_event_name", "session_id", "transcript_path", "cwd", "permission_mode",
            "last_assistant_message", "stop_hook_active"]
            .into_iter()
            .find(|k| map.get(*k).is_some_and(|v| typed_right(k, v) == Some(false)));
        let ok = map.contains_key("hook_event_name") && wrong.is_none();
        match HookPayload::from_map(map.clone()) {
            Ok(payload) => {
                prop_assert!(ok, "accepted although {:?} is mistyped", wrong);
                prop_assert_eq!(Some(&Value::from(payload.hook_event_name.clone())), map.get("hook_event_name"));
                prop_assert_eq!(payload.session_id.as_deref(), map.get("session_id").and_then(Value::as_str));
                prop_assert_eq!(payload.stop_hook_active, map.get("stop_hook_active").and_then(Value::as_bool));
                prop_assert_eq!(
                    payload.cwd.as_deref().and_then(std::path::Path::to_str),
                    map.get("cwd").and_then(Value::as_str)
                );
                // Every field dreamkit does not use is kept, untouched.
                let others: Map<String, Value> = map
                    .iter()
                    .filter(|(k, _)| typed_right(k, &Value::Null).is_none())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                prop_assert_eq!(payload.other, others);
            }
            Err(failure) => {
                prop_assert!(!ok);
                prop_assert_eq!(failure.kind(), "bad_input");
                let message = failure.to_string();
                prop_assert!(!message.contains('\n'));
                if let Some(field) = wrong {
                    prop_assert!(message.contains(&format!("`{field}`")), "{}", message);
                }
            }
        }
    }

    #[test]
    fn any_envelope_fields_type_like_a_payload_s(map in json_object()) {
        let envelope = crate::cli::Envelope::from_map(map.clone());
        let used = ["session_id", "transcript_path", "cwd", "permission_mode",
            "last_assistant_message", "stop_hook_active"];
        let wrong = used.iter().any(|k| map.get(*k).is_some_and(|v| typed_right(k, v) == Some(false)));
        match HookPayload::fields_of(&envelope) {
            Ok(None) => prop_assert!(used.iter().all(|k| !map.contains_key(*k))),
            Ok(Some(payload)) => {
                prop_assert!(!wrong);
                prop_assert!(payload.other.is_empty());
            }
            Err(failure) => {
                prop_assert!(wrong);
                prop_assert_eq!(failure.kind(), "bad_input");
            }
        }
    }
}
