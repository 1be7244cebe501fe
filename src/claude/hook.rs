//! Claude Code hook stdin payloads (the fields dreamkit uses; the rest is kept).

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::cli::{Envelope, Failure};

/// The fields dreamkit reads from a hook payload, typed below.
const USED_FIELDS: &[&str] = &[
    "session_id",
    "transcript_path",
    "cwd",
    "permission_mode",
    "last_assistant_message",
    "stop_hook_active",
];

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct HookPayload {
    pub hook_event_name: String,
    pub session_id: Option<String>,
    pub transcript_path: Option<PathBuf>,
    pub cwd: Option<PathBuf>,
    pub permission_mode: Option<String>,
    pub last_assistant_message: Option<String>,
    pub stop_hook_active: Option<bool>,
    /// Every other field (`notification_type`, `error`, `prompt`, ...), untouched.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl HookPayload {
    /// Types the payload; a used field of the wrong type is bad input.
    pub fn from_map(map: Map<String, Value>) -> Result<Self, Failure> {
        let value = Value::Object(map);
        HookPayload::deserialize(&value).map_err(|e| {
            // serde cannot name the field of a flattened struct: find it.
            let field = ["hook_event_name"]
                .iter()
                .chain(USED_FIELDS)
                .find(|key| value.get(**key).is_some_and(|v| !field_type_ok(key, v)));
            match field {
                Some(key) => Failure::bad_input(format!("hook payload: field `{key}`: {e}")),
                None => Failure::bad_input(format!("hook payload: {e}")),
            }
        })
    }

    /// The hook fields at the top level of an object that names no hook event (an envelope, or
    /// a payload written by hand): typed and used like a payload's, so `{"cwd": 5}` is bad
    /// input and `{"cwd": "/p"}` names the project, with or without `hook_event_name`.
    /// `None` when the object has none of them.
    pub fn fields_of(envelope: &Envelope) -> Result<Option<Self>, Failure> {
        let mut fields = Map::new();
        for key in USED_FIELDS {
            if let Some(value) = envelope.get(key) {
                fields.insert((*key).to_string(), value.clone());
            }
        }
        if fields.is_empty() {
            return Ok(None);
        }
        fields.insert("hook_event_name".into(), Value::String(String::new()));
        Self::from_map(fields).map(Some)
    }
}

/// Whether a used field holds the JSON type its [`HookPayload`] field takes.
fn field_type_ok(key: &str, value: &Value) -> bool {
    match key {
        "hook_event_name" => value.is_string(),
        "stop_hook_active" => value.is_null() || value.is_boolean(),
        _ => value.is_null() || value.is_string(),
    }
}

/// The transcript a tool works on: `--transcript`, else the hook payload's
/// `transcript_path`; a usage error when neither names one.
pub fn transcript_of(
    flag: Option<&PathBuf>,
    hook: Option<&HookPayload>,
) -> Result<PathBuf, Failure> {
    let transcript = flag
        .cloned()
        .or_else(|| hook.and_then(|h| h.transcript_path.clone()))
        .ok_or_else(|| {
            Failure::Usage(
                "no transcript: pass --transcript PATH or a hook payload with transcript_path"
                    .into(),
            )
        })?;
    crate::claude::paths::check_path("the transcript", &transcript)?;
    Ok(transcript)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn reads_every_real_payload() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/claude-code-2.1.332/hook-input"
        );
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read(entry.unwrap().path()).unwrap();
            let value: Value = serde_json::from_slice(&text).unwrap();
            let payload = HookPayload::from_map(map(value)).unwrap();
            assert_eq!(
                payload.session_id.as_deref(),
                Some("854ac185-82c5-458b-8010-937270238761")
            );
            assert_eq!(
                payload.cwd,
                Some(PathBuf::from("/home/dev/ccresearch/proj"))
            );
            seen += 1;
        }
        assert_eq!(seen, 6);
    }

    #[test]
    fn stop_payload_fields() {
        let raw = include_str!("../../tests/fixtures/claude-code-2.1.332/hook-input/Stop.json");
        let p = HookPayload::from_map(map(serde_json::from_str(raw).unwrap())).unwrap();
        assert_eq!(
            p.last_assistant_message.as_deref(),
            Some("Hello from the stub.")
        );
        assert_eq!(p.stop_hook_active, Some(false));
        assert!(p.other.contains_key("background_tasks"));
    }

    #[test]
    fn hook_fields_of_any_object_are_typed() {
        let envelope = |v: Value| Envelope::from_map(map(v));
        assert_eq!(
            HookPayload::fields_of(&envelope(json!({"gate": {"due": true}}))).unwrap(),
            None
        );
        let p = HookPayload::fields_of(&envelope(json!({"cwd": "/p", "session_id": "s", "x": 1})))
            .unwrap()
            .unwrap();
        assert_eq!(p.cwd, Some(PathBuf::from("/p")));
        assert_eq!(p.session_id.as_deref(), Some("s"));
        assert!(p.other.is_empty(), "only the hook fields are taken");
        for bad in [
            json!({"cwd": 5}),
            json!({"session_id": ["a"]}),
            json!({"transcript_path": {}}),
            json!({"stop_hook_active": "yes"}),
        ] {
            let err = HookPayload::fields_of(&envelope(bad.clone())).unwrap_err();
            assert_eq!(err.kind(), "bad_input", "{bad}");
        }
    }

    #[test]
    fn wrong_type_is_bad_input() {
        let err = HookPayload::from_map(map(json!({"hook_event_name":"Stop","session_id":42})))
            .unwrap_err();
        assert_eq!(err.kind(), "bad_input");
        assert!(err.to_string().contains("field `session_id`"), "{err}");
    }
}
