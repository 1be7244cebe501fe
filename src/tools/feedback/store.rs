//! Feedback drafts where Claude Code keeps them: `<config>/feedback/drafts/<draft_id>.json`,
//! pretty JSON, mode 0600, written atomically.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cli::text::sanitize;
use crate::cli::time::{parse_rfc3339, rfc3339};
use crate::cli::Failure;
use crate::files::{
    create_private_dir, is_not_regular, is_unresolvable, not_regular, read_regular, write_atomic,
};

/// A draft file larger than this is refused and nothing is written.
pub const MAX_DRAFT_BYTES: usize = 32_768;
/// Drafts kept; the oldest are evicted past this.
pub const MAX_DRAFTS: usize = 10;
/// Queue operations allowed for one source session.
pub const MAX_QUEUES_PER_SESSION: u32 = 10;
/// `list` deletes drafts older than this.
pub const EXPIRY: Duration = Duration::from_secs(30 * 24 * 3600);

pub const TYPES: &[&str] = &["bug", "idea", "missing_capability"];
pub const TRIGGERS: &[&str] = &[
    "tool_error",
    "user_frustration",
    "missing_capability",
    "model_judgment",
    "exit_nudge",
];
pub const STATUSES: &[&str] = &["queued", "submitted", "discarded", "expired"];
/// What Claude Code 2.1.332 accepts for the optional classifications (others it drops).
pub const FAILURE_MODES: &[&str] = &[
    "instruction_following",
    "destructive_actions",
    "code_quality",
    "repetition_and_looping",
    "model_regression",
    "overconfidence_and_hallucination",
    "context_and_memory",
    "overeager",
    "over_correction",
    "stopping_short",
    "dispute_or_decline",
    "subagent_overspawn",
    "tone_or_preachiness",
    "excessive_questions",
    "unwanted_scope",
    "other",
];
pub const TASK_CATEGORIES: &[&str] = &[
    "code_edit",
    "debug",
    "explain",
    "plan",
    "shell",
    "search",
    "review",
    "other",
];
pub const THINKING_TYPES: &[&str] = &["adaptive", "enabled", "disabled"];
/// The client keeps the last few request ids.
pub const MAX_REQUEST_IDS: usize = 5;
/// The counts' upper bound in the client's schema.
pub const MAX_COUNT: u64 = 1_000_000;

/// A draft's transcript reference, as the client's schema has it: `session_file` required,
/// `message_range` a pair or null, `project_dir_key` optional (absent rather than null).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TranscriptRef {
    pub session_file: Option<String>,
    #[serde(default)]
    pub message_range: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_dir_key: Option<String>,
}

/// One draft, in Claude Code's field names. Unknown fields read from disk are kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Draft {
    pub draft_id: String,
    pub created_at: String,
    pub source_session_id: Option<String>,
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub cli_version: Option<String>,
    pub os: Option<String>,
    /// The API request ids of the session (the client keeps the last five).
    #[serde(default)]
    pub request_ids: Vec<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub details: String,
    /// Absent rather than null: the client refuses a null area.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub area: Option<String>,
    pub trigger: Option<String>,
    pub transcript_ref: Option<TranscriptRef>,
    pub status: String,
    /// The optional classifications (`failure_mode`, `task_category`, `effort`,
    /// `thinking_type`, `thinking_budget`, `message_count`, `assistant_turn_count`,
    /// `subagent_count`) and any field another writer added.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

impl Draft {
    /// The draft as a person sees it (`show`, `list`): every text, unknown fields included,
    /// without control characters (newline and tab stay), so a title holding an escape
    /// sequence cannot retitle the terminal or clear it. The file keeps the user's bytes.
    pub fn for_display(&self) -> Draft {
        let text = |s: &str| sanitize(s).into_owned();
        let opt = |s: &Option<String>| s.as_deref().map(text);
        Draft {
            draft_id: text(&self.draft_id),
            created_at: text(&self.created_at),
            source_session_id: opt(&self.source_session_id),
            cwd: opt(&self.cwd),
            model: opt(&self.model),
            cli_version: opt(&self.cli_version),
            os: opt(&self.os),
            request_ids: self.request_ids.iter().map(|r| text(r)).collect(),
            kind: text(&self.kind),
            title: text(&self.title),
            details: text(&self.details),
            area: opt(&self.area),
            trigger: opt(&self.trigger),
            transcript_ref: self.transcript_ref.as_ref().map(|r| TranscriptRef {
                session_file: opt(&r.session_file),
                message_range: r.message_range.as_ref().map(for_display),
                project_dir_key: opt(&r.project_dir_key),
            }),
            status: text(&self.status),
            other: self
                .other
                .iter()
                .map(|(k, v)| (text(k), for_display(v)))
                .collect(),
        }
    }
}

/// A JSON value as a person sees it: every string (and key) without control characters.
pub fn for_display(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(sanitize(s).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(for_display).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (sanitize(k).into_owned(), for_display(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The keys of [`NewDraft`], as JSON spells them: what `queue` takes from beside a hook
/// payload's own fields.
pub const NEW_DRAFT_FIELDS: &[&str] = &[
    "source_session_id",
    "cwd",
    "model",
    "cli_version",
    "os",
    "request_ids",
    "type",
    "title",
    "details",
    "area",
    "trigger",
    "transcript_ref",
    "failure_mode",
    "task_category",
    "effort",
    "thinking_type",
    "thinking_budget",
    "message_count",
    "assistant_turn_count",
    "subagent_count",
];

/// What `queue` accepts: the draft's own fields, the tool fills the rest.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewDraft {
    pub source_session_id: Option<String>,
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub cli_version: Option<String>,
    pub os: Option<String>,
    pub request_ids: Option<Vec<String>>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub title: Option<String>,
    pub details: Option<String>,
    pub area: Option<String>,
    pub trigger: Option<String>,
    pub transcript_ref: Option<TranscriptRef>,
    pub failure_mode: Option<String>,
    pub task_category: Option<String>,
    pub effort: Option<String>,
    pub thinking_type: Option<String>,
    pub thinking_budget: Option<u64>,
    pub message_count: Option<u64>,
    pub assistant_turn_count: Option<u64>,
    pub subagent_count: Option<u64>,
}

/// What `queue` fills in when the caller did not say (from the project and its newest
/// transcript), so that Claude Code, which wants a string in each, lists the draft.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Defaults {
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub cli_version: Option<String>,
    pub source_session_id: Option<String>,
    pub transcript_ref: Option<TranscriptRef>,
}

fn invalid(message: String) -> Failure {
    Failure::BadInput {
        reason: Some("invalid_draft"),
        message,
    }
}

fn check_len(field: &str, value: Option<&str>, max: usize) -> Result<(), Failure> {
    match value {
        Some(v) if v.chars().count() > max => Err(invalid(format!(
            "{field} is {} characters; at most {max}",
            v.chars().count()
        ))),
        _ => Ok(()),
    }
}

fn check_enum(field: &str, value: Option<&str>, allowed: &[&str]) -> Result<(), Failure> {
    match value {
        Some(v) if !allowed.contains(&v) => Err(invalid(format!(
            "{field} {v:?} is not one of {}",
            allowed.join(", ")
        ))),
        _ => Ok(()),
    }
}

impl NewDraft {
    /// Validates every field and its limit; fills `draft_id`, `created_at`, `status`, and
    /// every string the client requires (from `defaults`, else empty), `trigger`
    /// (`model_judgment`) and `request_ids` (none).
    pub fn into_draft(self, now: SystemTime) -> Result<Draft, Failure> {
        self.into_draft_with(now, Defaults::default())
    }

    pub fn into_draft_with(self, now: SystemTime, defaults: Defaults) -> Result<Draft, Failure> {
        let required = |field: &str, v: Option<String>| {
            v.filter(|v| !v.trim().is_empty())
                .ok_or_else(|| invalid(format!("{field} is required")))
        };
        let kind = required("type", self.kind)?;
        let title = required("title", self.title)?;
        let details = required("details", self.details)?;
        check_enum("type", Some(&kind), TYPES)?;
        check_enum("trigger", self.trigger.as_deref(), TRIGGERS)?;
        check_len("title", Some(&title), 200)?;
        check_len("details", Some(&details), 10_240)?;
        check_len("cwd", self.cwd.as_deref(), 512)?;
        check_len("model", self.model.as_deref(), 64)?;
        check_len("cli_version", self.cli_version.as_deref(), 32)?;
        check_len("os", self.os.as_deref(), 64)?;
        check_len("area", self.area.as_deref(), 64)?;
        if let Some(id) = &self.source_session_id {
            if !is_safe_id(id) {
                return Err(invalid(format!("source_session_id {id:?} is not an id")));
            }
        }
        check_enum("failure_mode", self.failure_mode.as_deref(), FAILURE_MODES)?;
        check_enum(
            "task_category",
            self.task_category.as_deref(),
            TASK_CATEGORIES,
        )?;
        check_enum(
            "thinking_type",
            self.thinking_type.as_deref(),
            THINKING_TYPES,
        )?;
        check_len("effort", self.effort.as_deref(), 64)?;
        let mut other = serde_json::Map::new();
        for (field, value) in [
            ("failure_mode", self.failure_mode.map(Value::from)),
            ("task_category", self.task_category.map(Value::from)),
            ("effort", self.effort.map(Value::from)),
            ("thinking_type", self.thinking_type.map(Value::from)),
        ] {
            if let Some(value) = value {
                other.insert(field.into(), value);
            }
        }
        for (field, count) in [
            ("thinking_budget", self.thinking_budget),
            ("message_count", self.message_count),
            ("assistant_turn_count", self.assistant_turn_count),
            ("subagent_count", self.subagent_count),
        ] {
            if let Some(count) = count {
                if count > MAX_COUNT {
                    return Err(invalid(format!("{field} is {count}; at most {MAX_COUNT}")));
                }
                other.insert(field.into(), Value::from(count));
            }
        }
        let mut request_ids = self.request_ids.unwrap_or_default();
        if request_ids.len() > MAX_REQUEST_IDS {
            request_ids.drain(..request_ids.len() - MAX_REQUEST_IDS);
        }
        for id in &request_ids {
            check_len("a request id", Some(id), 128)?;
        }
        // A reference the client would refuse (no session file) is no reference.
        let transcript_ref = self
            .transcript_ref
            .or(defaults.transcript_ref)
            .filter(|r| r.session_file.as_deref().is_some_and(|f| !f.is_empty()))
            .map(|mut r| {
                let valid_key = |k: &String| {
                    (1..=255).contains(&k.len())
                        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                };
                r.project_dir_key = r.project_dir_key.filter(valid_key);
                if !r.message_range.as_ref().is_some_and(|m| {
                    m.as_array()
                        .is_some_and(|a| a.len() == 2 && a.iter().all(Value::is_i64))
                }) {
                    r.message_range = None;
                }
                r
            });
        Ok(Draft {
            draft_id: uuid::Uuid::new_v4().to_string(),
            created_at: rfc3339(now),
            source_session_id: self.source_session_id.or(defaults.source_session_id),
            // The client wants a string in each: what we know, else empty.
            cwd: Some(self.cwd.or(defaults.cwd).unwrap_or_default()),
            model: Some(cut(self.model.or(defaults.model).unwrap_or_default(), 64)),
            cli_version: Some(cut(
                self.cli_version
                    .or(defaults.cli_version)
                    .unwrap_or_default(),
                32,
            )),
            os: Some(self.os.unwrap_or_else(platform)),
            request_ids,
            kind,
            title,
            details,
            area: self.area,
            trigger: Some(self.trigger.unwrap_or_else(|| "model_judgment".into())),
            transcript_ref,
            status: "queued".into(),
            other,
        })
    }
}

/// At most `max` characters of a value we filled in (the client cuts them the same way).
fn cut(text: String, max: usize) -> String {
    if text.chars().count() <= max {
        text
    } else {
        text.chars().take(max).collect()
    }
}

/// `linux-x86_64` and the like.
pub fn platform() -> String {
    format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// Draft and session ids name files: letters, digits, `-` and `_` only, 1 to 64 of them.
pub fn is_safe_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// One entry of `list`: a draft, or a file that could not be read as one.
#[derive(Debug, Clone, PartialEq)]
pub enum Listed {
    Draft(Box<Draft>, PathBuf),
    Broken {
        draft_id: String,
        path: PathBuf,
        error: String,
    },
}

pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(config_dir: &Path) -> Store {
        Store {
            dir: config_dir.join("feedback/drafts"),
        }
    }

    pub fn path_of(&self, draft_id: &str) -> Result<PathBuf, Failure> {
        if !is_safe_id(draft_id) {
            return Err(Failure::BadInput {
                reason: Some("invalid_id"),
                message: format!("{draft_id:?} is not a draft id"),
            });
        }
        Ok(self.dir.join(format!("{draft_id}.json")))
    }

    /// The serialised draft, refused when over [`MAX_DRAFT_BYTES`].
    pub fn render(draft: &Draft) -> Result<Vec<u8>, Failure> {
        let mut bytes = serde_json::to_vec_pretty(draft)
            .map_err(|e| Failure::environment(format!("cannot serialise the draft: {e}")))?;
        bytes.push(b'\n');
        if bytes.len() > MAX_DRAFT_BYTES {
            return Err(Failure::BadInput {
                reason: Some("too_large"),
                message: format!(
                    "the draft is {} bytes; at most {MAX_DRAFT_BYTES}",
                    bytes.len()
                ),
            });
        }
        Ok(bytes)
    }

    /// Writes a draft rendered by [`Store::render`] (0600, atomically).
    pub fn write(&self, draft_id: &str, rendered: &[u8]) -> Result<PathBuf, Failure> {
        create_private_dir(&self.dir).map_err(|e| Failure::io("create", &self.dir, &e))?;
        let path = self.path_of(draft_id)?;
        write_atomic(&path, rendered, 0o600).map_err(|e| Failure::io("write", &path, &e))?;
        Ok(path)
    }

    pub fn read(&self, draft_id: &str) -> Result<Option<Draft>, Failure> {
        let path = self.path_of(draft_id)?;
        // A FIFO or a device in place of a draft is refused (exit 3), never waited on.
        match read_regular(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                Failure::environment(format!("{} is not a draft: {e}", path.display()))
                    .with_reason("corrupt")
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Failure::io("read", &path, &e)),
        }
    }

    /// Deletes a draft; `false` when there was none. A FIFO, device, socket or directory in
    /// a draft's place is refused (exit 3, `not_a_file`), as `show` refuses it.
    pub fn delete(&self, draft_id: &str) -> Result<bool, Failure> {
        let path = self.path_of(draft_id)?;
        match std::fs::metadata(&path) {
            Ok(meta) if !meta.is_file() => {
                return Err(Failure::io("delete", &path, &not_regular(meta.file_type())))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Failure::io("delete", &path, &e)),
        }
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Failure::io("delete", &path, &e)),
        }
    }

    /// Every `*.json` in the drafts dir, newest first; unreadable ones as [`Listed::Broken`].
    /// Names that are not regular files (FIFOs, devices, directories, dangling links, symlink
    /// loops) are skipped: they are not drafts, and reading one could block or never end.
    pub fn list(&self) -> Result<Vec<Listed>, Failure> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Failure::io("read", &self.dir, &e)),
        };
        let mut listed = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Failure::io("read", &self.dir, &e))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_suffix(".json") else {
                continue;
            };
            if name.starts_with('.') {
                continue; // a temporary file of an atomic write
            }
            let bytes = match read_regular(&path) {
                Err(e) if is_not_regular(&e) || is_unresolvable(&e) => continue,
                other => other,
            };
            let parsed = bytes
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<Draft>(&b).map_err(|e| e.to_string()));
            listed.push(match parsed {
                Ok(draft) => Listed::Draft(Box::new(draft), path),
                Err(error) => Listed::Broken {
                    draft_id: id.to_string(),
                    path,
                    error,
                },
            });
        }
        listed.sort_by_key(|l| std::cmp::Reverse(created(l)));
        Ok(listed)
    }

    /// Deletes the listed drafts whose `created_at` is over 30 days before `now`; returns the
    /// rest of the listing and the ids deleted.
    pub fn expire(
        &self,
        listed: Vec<Listed>,
        now: SystemTime,
    ) -> Result<(Vec<Listed>, Vec<String>), Failure> {
        let mut kept = Vec::with_capacity(listed.len());
        let mut expired = Vec::new();
        for item in listed {
            match item {
                Listed::Draft(draft, path)
                    if parse_rfc3339(&draft.created_at)
                        .is_some_and(|at| now.duration_since(at).is_ok_and(|age| age > EXPIRY)) =>
                {
                    std::fs::remove_file(&path).map_err(|e| Failure::io("delete", &path, &e))?;
                    expired.push(draft.draft_id);
                }
                other => kept.push(other),
            }
        }
        Ok((kept, expired))
    }

    /// Keeps the newest [`MAX_DRAFTS`] drafts; returns the ids of those deleted.
    pub fn evict(&self) -> Result<Vec<String>, Failure> {
        let drafts: Vec<(Box<Draft>, PathBuf)> = self
            .list()?
            .into_iter()
            .filter_map(|l| match l {
                Listed::Draft(d, p) => Some((d, p)),
                Listed::Broken { .. } => None,
            })
            .collect();
        let mut evicted = Vec::new();
        for (draft, path) in drafts.into_iter().skip(MAX_DRAFTS) {
            std::fs::remove_file(&path).map_err(|e| Failure::io("delete", &path, &e))?;
            evicted.push(draft.draft_id);
        }
        Ok(evicted)
    }
}

/// Sort key: `created_at` as a time (unparseable sorts oldest).
fn created(listed: &Listed) -> Option<SystemTime> {
    match listed {
        Listed::Draft(d, _) => parse_rfc3339(&d.created_at),
        Listed::Broken { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_draft_field_is_a_new_draft_key() {
        for field in NEW_DRAFT_FIELDS {
            let one = serde_json::json!({ *field: null });
            assert!(
                serde_json::from_value::<NewDraft>(one).is_ok(),
                "{field} is not a NewDraft key"
            );
        }
        assert!(serde_json::from_value::<NewDraft>(serde_json::json!({"nope": null})).is_err());
    }

    fn new(title: &str) -> NewDraft {
        NewDraft {
            kind: Some("bug".into()),
            title: Some(title.into()),
            details: Some("steps".into()),
            ..NewDraft::default()
        }
    }

    #[test]
    fn validation_names_the_field() {
        let now = SystemTime::now();
        let d = new("t").into_draft(now).unwrap();
        assert_eq!((d.status.as_str(), d.kind.as_str()), ("queued", "bug"));
        assert_eq!(d.draft_id.len(), 36);
        assert_eq!(d.os.as_deref(), Some(platform().as_str()));
        let cases: Vec<(NewDraft, &str)> = vec![
            (
                NewDraft {
                    kind: None,
                    ..new("t")
                },
                "type is required",
            ),
            (
                NewDraft {
                    kind: Some("rant".into()),
                    ..new("t")
                },
                "type \"rant\"",
            ),
            (new(&"x".repeat(201)), "title is 201"),
            (
                NewDraft {
                    details: Some("é".repeat(10_241)),
                    ..new("t")
                },
                "details is 10241",
            ),
            (
                NewDraft {
                    cwd: Some("c".repeat(513)),
                    ..new("t")
                },
                "cwd",
            ),
            (
                NewDraft {
                    model: Some("m".repeat(65)),
                    ..new("t")
                },
                "model",
            ),
            (
                NewDraft {
                    cli_version: Some("v".repeat(33)),
                    ..new("t")
                },
                "cli_version",
            ),
            (
                NewDraft {
                    os: Some("o".repeat(65)),
                    ..new("t")
                },
                "os",
            ),
            (
                NewDraft {
                    area: Some("a".repeat(65)),
                    ..new("t")
                },
                "area",
            ),
            (
                NewDraft {
                    trigger: Some("boredom".into()),
                    ..new("t")
                },
                "trigger",
            ),
            (
                NewDraft {
                    source_session_id: Some("../x".into()),
                    ..new("t")
                },
                "source_session_id",
            ),
        ];
        for (draft, needle) in cases {
            let err = draft.into_draft(now).unwrap_err();
            assert_eq!(err.kind(), "bad_input");
            assert!(err.to_string().contains(needle), "{err} lacks {needle}");
        }
        // Exactly at the limits is fine.
        let edge = NewDraft {
            details: Some("d".repeat(10_240)),
            cwd: Some("c".repeat(512)),
            ..new(&"t".repeat(200))
        };
        assert!(edge.into_draft(now).is_ok());
    }

    #[test]
    fn the_displayed_draft_has_no_control_characters_the_draft_keeps_them() {
        let mut d = new("\u{1b}]0;PWNED\u{7}title\u{9b}2J")
            .into_draft(SystemTime::now())
            .unwrap();
        d.details = "line\n\tindented\u{1b}[31m".into();
        d.other.insert(
            "note\u{7}".into(),
            serde_json::json!({"deep": ["x\u{1b}y", 3]}),
        );
        let shown = d.for_display();
        assert_eq!(shown.title, "title2J");
        assert_eq!(shown.details, "line\n\tindented");
        assert_eq!(shown.other["note"], serde_json::json!({"deep": ["x", 3]}));
        assert_eq!(shown.draft_id, d.draft_id);
        assert!(d.title.contains('\u{1b}'), "the draft itself is untouched");
    }

    #[test]
    fn ids_are_file_safe() {
        assert!(is_safe_id("0b9c-AZ_z"));
        for bad in ["", "../etc", "a/b", "a.json", "x y", &"a".repeat(65)] {
            assert!(!is_safe_id(bad), "{bad:?}");
        }
    }
}
