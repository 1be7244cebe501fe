//! Reading stdin: nothing, a Claude Code hook payload, or an envelope.

use serde_json::{Map, Value};

use super::{Envelope, Failure};

/// The most stdin we accept; envelopes and hook payloads are far smaller.
pub const MAX_STDIN_BYTES: u64 = 16 * 1024 * 1024;

/// What stdin held.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// stdin is a terminal, closed, or empty (whitespace only).
    Nothing,
    /// A Claude Code hook payload (it has `hook_event_name`); typed by `claude::hook`.
    Hook(Map<String, Value>),
    /// The envelope printed by an earlier dreamkit tool (any other object).
    Envelope(Envelope),
}

/// More stdin than [`MAX_STDIN_BYTES`].
pub(super) fn too_large() -> Failure {
    Failure::BadInput {
        reason: Some("too_large"),
        message: format!("stdin holds more than {MAX_STDIN_BYTES} bytes"),
    }
}

impl Input {
    /// Classifies one stdin document.
    pub fn parse(bytes: &[u8]) -> Result<Input, Failure> {
        if bytes.len() as u64 > MAX_STDIN_BYTES {
            return Err(too_large());
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Input::Nothing);
        }
        let value: Value = super::json::from_slice(bytes)
            .map_err(|e| Failure::bad_input(format!("stdin is not one JSON object: {e}")))?;
        match value {
            Value::Object(map) if map.contains_key("hook_event_name") => Ok(Input::Hook(map)),
            Value::Object(map) => Ok(Input::Envelope(Envelope::from_map(map))),
            other => Err(Failure::bad_input(format!(
                "stdin must hold one JSON object, not {}",
                super::json::type_name(&other)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_whitespace_are_nothing() {
        assert_eq!(Input::parse(b"").unwrap(), Input::Nothing);
        assert_eq!(Input::parse(b" \n\t\r\n").unwrap(), Input::Nothing);
    }

    #[test]
    fn hook_payload_is_recognised_by_hook_event_name() {
        let raw = include_bytes!("../../tests/fixtures/claude-code-2.1.332/hook-input/Stop.json");
        match Input::parse(raw).unwrap() {
            Input::Hook(map) => assert_eq!(map["hook_event_name"], "Stop"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn other_objects_are_envelopes() {
        match Input::parse(br#"{"gate":{"due":true}}"#).unwrap() {
            Input::Envelope(env) => assert_eq!(env.get("gate").unwrap()["due"], true),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_documents_are_bad_input() {
        for bad in [
            &b"{"[..],
            b"[1,2]",
            b"\"text\"",
            b"null",
            b"{} {}",
            b"\xff\xfe",
            b"{\"a\":1}\n{\"b\":2}",
        ] {
            let err = Input::parse(bad).unwrap_err();
            assert_eq!(
                err.kind(),
                "bad_input",
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
