//! Reading stdin: nothing, a Claude Code hook payload, or an envelope.

use std::io::{IsTerminal, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

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

/// Set once by the shared `main` for `-n`/`--null-input`: stdin is never read.
static NULL_INPUT: AtomicBool = AtomicBool::new(false);

/// `-n`: from now on [`Input::from_stdin`] reads nothing.
pub fn set_null_input(null: bool) {
    NULL_INPUT.store(null, Ordering::Relaxed);
}

/// Whether `-n` was given (tools that read plain text from stdin honour it too).
pub fn null_input() -> bool {
    NULL_INPUT.load(Ordering::Relaxed)
}

/// stdin's bytes under the stdin rule: `None` when it is a terminal, closed (`<&-`) or `-n`
/// was given; at most [`MAX_STDIN_BYTES`] + 1 bytes are read (the caller refuses more).
pub fn stdin_bytes() -> Result<Option<Vec<u8>>, Failure> {
    let stdin = std::io::stdin();
    if null_input() || stdin.is_terminal() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    match stdin
        .lock()
        .take(MAX_STDIN_BYTES + 1)
        .read_to_end(&mut bytes)
    {
        Ok(_) => Ok(Some(bytes)),
        Err(e) if e.raw_os_error() == Some(libc::EBADF) => Ok(None),
        Err(e) => Err(Failure::environment(format!("cannot read stdin: {e}"))),
    }
}

/// The envelope section of the running tool (`gate`, `lock`, `run`; set by the shared `main`),
/// and the envelope stdin held once read: every failure from then on prints that envelope with
/// the section filled in, so the pipeline's release can still roll back.
static SECTION: OnceLock<&'static str> = OnceLock::new();
static RECEIVED: Mutex<Option<Envelope>> = Mutex::new(None);

pub fn set_envelope_section(section: &'static str) {
    let _ = SECTION.set(section);
}

/// The envelope stdin held, if a tool read one.
pub fn received_envelope() -> Option<Envelope> {
    RECEIVED.lock().ok().and_then(|e| e.clone())
}

fn remember(envelope: &Envelope) {
    if let Ok(mut slot) = RECEIVED.lock() {
        *slot = Some(envelope.clone());
    }
    if let Some(section) = SECTION.get() {
        super::signals::set_documents(|signal| {
            let failure = Failure::interrupted(signal);
            super::envelope::failed(envelope.clone(), section, &failure).to_string()
        });
    }
}

impl Input {
    /// Reads the process's stdin, unless it is a terminal or `-n` was given.
    pub fn from_stdin() -> Result<Input, Failure> {
        let input = match stdin_bytes()? {
            Some(bytes) => Input::parse(&bytes)?,
            None => Input::Nothing,
        };
        if let Input::Envelope(envelope) = &input {
            remember(envelope);
        }
        Ok(input)
    }

    /// Classifies one stdin document.
    pub fn parse(bytes: &[u8]) -> Result<Input, Failure> {
        if bytes.len() as u64 > MAX_STDIN_BYTES {
            return Err(Failure::BadInput {
                reason: Some("too_large"),
                message: format!("stdin holds more than {MAX_STDIN_BYTES} bytes"),
            });
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
                json_type_name(&other)
            ))),
        }
    }
}

pub(crate) fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
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
