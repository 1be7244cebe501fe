//! `turn-status`: the post-turn status (SPEC §7). Where the turn's text comes from (a Stop,
//! StopFailure or Notification payload, `--transcript`, `--permission-blocked`), the two
//! engines (`rules`: the heuristic table; `llm`: the small/fast model) and the three sinks
//! (`sink`), plus `--previous`, `--events` and `--state-file`.
//!
//! The heuristic path never starts an async runtime and never reads the model settings.

pub mod llm;
pub mod rules;
pub mod sink;
pub mod turn;

use std::path::{Path, PathBuf};

use clap::Parser;
use schemars::{JsonSchema, SchemaGenerator};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::claude::paths::check_path;
use crate::claude::HookPayload;
use crate::cli::args::EnvNamed;
use crate::cli::failure::credentials_later;
use crate::cli::json::type_name as json_type_name;
use crate::cli::output::write_stdout;
use crate::cli::text::sanitize;
use crate::cli::{
    signals, CommonArgs, Context, Delivery, Diag, ErrorBody, Exit, Failure, Input, Report, Tool,
};
use crate::files::{create_private_dir, file_kind, open_regular, write_atomic};
use crate::model::{Client, ModelArgs, Tier, Usage};

use rules::{Category, Verdict};
use sink::{Document, Sink, Status, Surface};
use turn::{read_small, Turn};

/// The clearing line printed (`--events`) or written (`--state-file`) before the result.
pub const CLEAR: &str = r#"{"post_turn_summary":null}"#;
/// `--previous` files larger than this are refused: a status is a few hundred bytes.
pub const MAX_PREVIOUS_BYTES: u64 = 1024 * 1024;

/// Which engine classifies the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// The rule table: no model, no network
    Heuristic,
    /// The small/fast model
    Llm,
}

/// What to do when the LLM engine fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fallback {
    /// Classify with the rule table instead (exit 0)
    Heuristic,
}

/// The post-turn status of a Claude Code session.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "turn-status",
    version = crate::cli::VERSION,
    about = "Post-turn status: status_category, status_detail, needs_action",
    long_about = "Classify how a Claude Code turn ended (working, blocked, done, failed) from its \
final assistant text, and print it as Claude Code's post_turn_summary record, as a {state, \
tempo, needs} state, or as a headline. The text comes from a Stop hook payload \
(last_assistant_message), a StopFailure payload (failed), a Notification payload \
(permission_prompt: blocked at once), --permission-blocked, or --transcript (read backwards \
from the end). The default engine is a rule table (no model, no network); --engine llm asks \
the small/fast model."
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Transcript whose last turn to classify [default: the payload's last_assistant_message]
    #[arg(long, value_name = "PATH")]
    pub transcript: Option<PathBuf>,
    /// Session id for the record [default: the payload's session_id, else the transcript's]
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Where the status is shown: cli, ccr, bridge, desktop -> summary; bg, watched -> state;
    /// repl -> headline
    #[arg(long, value_enum, default_value = "cli")]
    pub surface: Surface,
    /// Classifier: the rule table, or the small/fast model
    #[arg(
        long,
        value_enum,
        env = "DREAMKIT_TURN_STATUS_ENGINE",
        default_value = "heuristic",
        value_parser = EnvNamed(clap::builder::EnumValueParser::<Engine>::new())
    )]
    pub engine: Engine,
    /// When the LLM engine fails, classify with the rule table instead of exiting 4
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub fallback: Option<Fallback>,
    /// A permission prompt is pending: blocked at once, nothing classified
    #[arg(long)]
    pub permission_blocked: bool,
    /// The previous output, reused when the turn has no new assistant text
    #[arg(long, value_name = "FILE")]
    pub previous: Option<PathBuf>,
    /// JSON Lines: the clearing line {"post_turn_summary":null} first, then the result
    #[arg(long)]
    pub events: bool,
    /// Also write the clearing line, then the result, to FILE (each write atomic; mode 0600)
    #[arg(long, value_name = "FILE")]
    pub state_file: Option<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Where the status comes from, decided before anything is written.
#[derive(Debug)]
enum Source {
    /// A permission prompt is pending: blocked, with this detail.
    Permission(String),
    /// The turn ended on an API error (StopFailure): failed, with this detail.
    ApiFailure(String),
    /// The turn's final text, from a payload (`transcript`: where to find its uuid).
    Text(String, Option<PathBuf>),
    /// The last turn of a transcript; `named` when --transcript gave it.
    Transcript { path: PathBuf, named: bool },
}

/// Hook payload fields turn-status reads beyond the shared ones: strings (or null) only.
const STRING_FIELDS: &[&str] = &[
    "notification_type",
    "message",
    "error",
    "error_type",
    "error_message",
    "error_details",
];

fn string_field(payload: &HookPayload, key: &str) -> Option<String> {
    payload
        .other
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The payload typed: the shared fields by [`HookPayload`], ours here (bad input otherwise).
fn payload_of(input: Input) -> Result<Option<HookPayload>, Failure> {
    match input {
        Input::Nothing => Ok(None),
        Input::Hook(map) => {
            check_string_fields(&map)?;
            HookPayload::from_map(map).map(Some)
        }
        // A statusLine command's stdin, or a hand-written object: its hook fields count.
        Input::Envelope(envelope) => HookPayload::fields_of(&envelope),
    }
}

fn check_string_fields(map: &Map<String, Value>) -> Result<(), Failure> {
    for key in STRING_FIELDS {
        match map.get(*key) {
            None | Some(Value::Null | Value::String(_)) => {}
            Some(other) => {
                return Err(Failure::bad_input(format!(
                    "hook payload: field `{key}`: expected a string, found {}",
                    json_type_name(other)
                )))
            }
        }
    }
    Ok(())
}

impl Args {
    fn source(&self, payload: Option<&HookPayload>) -> Result<Source, Failure> {
        if self.permission_blocked {
            return Ok(Source::Permission("waiting for permission".into()));
        }
        if let Some(path) = &self.transcript {
            return Ok(Source::Transcript {
                path: path.clone(),
                named: true,
            });
        }
        let Some(p) = payload else {
            return Err(Failure::Usage(
                "nothing to classify: pass a hook payload on stdin, --transcript PATH or \
                 --permission-blocked"
                    .into(),
            ));
        };
        let event = p.hook_event_name.as_str();
        if event == "Notification"
            && string_field(p, "notification_type").as_deref() == Some("permission_prompt")
        {
            let detail = string_field(p, "message").unwrap_or("waiting for permission".into());
            return Ok(Source::Permission(detail));
        }
        if event == "StopFailure" {
            let detail = p
                .last_assistant_message
                .as_deref()
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .or_else(|| string_field(p, "error"))
                .or_else(|| string_field(p, "error_message"))
                .or_else(|| string_field(p, "error_details"))
                .or_else(|| string_field(p, "error_type"))
                .unwrap_or_else(|| "the turn ended on an API error".into());
            return Ok(Source::ApiFailure(detail));
        }
        if let Some(text) = &p.last_assistant_message {
            return Ok(Source::Text(text.clone(), p.transcript_path.clone()));
        }
        if let Some(path) = &p.transcript_path {
            return Ok(Source::Transcript {
                path: path.clone(),
                named: false,
            });
        }
        Err(Failure::Usage(format!(
            "nothing to classify: the {} has no last_assistant_message and no transcript_path",
            if event.is_empty() {
                "input".to_string()
            } else {
                format!("{event} payload")
            }
        )))
    }
}

/// Reads the last turn of `path`. `Ok(None)`: an unnamed transcript that does not exist (yet).
/// A named one that is missing, unreadable or not a regular file (never waited on) is an
/// environment failure with its `reason`.
fn read_turn(path: &Path, named: bool) -> Result<Option<Turn>, Failure> {
    let file = match open_regular(path) {
        Ok(file) => file,
        Err(e) if !named && e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Failure::io("read", path, &e)),
    };
    Turn::read(file)
        .map(Some)
        .map_err(|e| Failure::io("read", path, &e))
}

/// The uuid of the payload text's record in the transcript, when the transcript is readable
/// and its last turn holds that text (else the record would name another message).
fn uuid_for(text: &str, transcript: &Path, diag: &Diag) -> (Option<String>, Option<String>) {
    let Some(turn) = open_regular(transcript)
        .ok()
        .and_then(|file| Turn::read(file).ok())
    else {
        diag.info(&format!(
            "no summarizes_uuid: cannot read {}",
            transcript.display()
        ));
        return (None, None);
    };
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let same = turn.text.as_deref().is_some_and(|t| {
        let (a, b) = (squash(t), squash(text));
        !a.is_empty() && (a == b || a.contains(&b) || b.contains(&a))
    });
    if !same {
        diag.info("no summarizes_uuid: the transcript's last turn holds another text");
    }
    (same.then_some(turn.uuid).flatten(), turn.session_id)
}

/// Every string in `value` (keys included) without control characters.
fn sanitized(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(sanitize(&s).into_owned()),
        Value::Array(items) => Value::Array(items.into_iter().map(sanitized).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (sanitize(&k).into_owned(), sanitized(v)))
                .collect(),
        ),
        other => other,
    }
}

/// `--previous`: its last line when it holds a status of this sink's shape (cleaned of
/// control characters: it is printed again).
fn previous_status(path: &Path, sink: Sink) -> Result<Option<Value>, Failure> {
    let Some(bytes) = read_small("--previous", path, MAX_PREVIOUS_BYTES)? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes);
    let Some(last) = text.lines().rev().find(|l| !l.trim().is_empty()) else {
        return Ok(None);
    };
    let value: Value = crate::cli::json::from_slice(last.as_bytes()).map_err(|e| {
        Failure::bad_input(format!(
            "--previous {}: the last line is not JSON: {e}",
            path.display()
        ))
    })?;
    if !value.is_object() {
        return Err(Failure::bad_input(format!(
            "--previous {}: the last line is {}, not a JSON object",
            path.display(),
            json_type_name(&value)
        )));
    }
    Ok(sink.holds(&value).then(|| sanitized(value)))
}

/// Writes one line to the state file, atomically; a missing directory is created (0700).
fn write_state(path: &Path, line: &str) -> Result<(), Failure> {
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !dir.exists() {
            create_private_dir(dir).map_err(|e| Failure::io("create the directory", dir, &e))?;
        }
    }
    write_atomic(path, format!("{line}\n").as_bytes(), 0o600)
        .map_err(|e| Failure::io("write", path, &e))
}

/// A state file must be a regular file (or a link to one), or not exist yet; anything else
/// (a directory, a FIFO, a socket, a link to a device) is an environment failure
/// (`not_a_file`), found before anything is written.
fn check_state_file(path: &Path) -> Result<(), Failure> {
    check_path("--state-file", path)?;
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(meta) => Err(Failure::Environment {
            reason: Some("not_a_file"),
            message: format!(
                "--state-file {} is not a regular file ({})",
                path.display(),
                file_kind(meta.file_type())
            ),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Failure::io("inspect", path, &e)),
    }
}

/// What turn-status did, as printed (one JSON line; `--state-file` holds the same). The
/// variant decides the exit code and the one stderr line ([`Report`]).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum StatusReport {
    /// A status in the sink's shape (exit 0).
    Status(Document),
    /// The previous status printed again as it is (exit 0): `--previous`'s last line, a
    /// status of the sink's shape.
    Reused(#[schemars(with = "Document")] Value),
    /// `{reason: "no_text", message}` (exit 1): nothing to report, nothing written.
    NoText { reason: NoText, message: String },
    /// `{post_turn_summary: null, error, usage}` (exit 4): the LLM engine failed (its
    /// credential missing included); `error.kind` is the model error kind.
    LlmFailed {
        post_turn_summary: (),
        error: ErrorBody,
        usage: Usage,
    },
    /// `{post_turn_summary: null, aborted: "interrupted", error}` (exit 130 / 143).
    Interrupted {
        post_turn_summary: (),
        aborted: Aborted,
        #[serde(skip)]
        signal: i32,
        error: ErrorBody,
    },
    /// `{post_turn_summary: null, error}` (exit 3): a file could not be read or written
    /// (`error.reason` `not_found`, `permission`, `not_a_file` when that is why).
    Failed {
        post_turn_summary: (),
        error: ErrorBody,
    },
    /// `{error}` (exit 2): the caller is wrong (usage or bad input); nothing written.
    Refused { error: ErrorBody },
}

/// `no_text`: the turn has no new assistant text and no previous status to reuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub enum NoText {
    #[serde(rename = "no_text")]
    NoText,
}

/// Why no answer came: a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub enum Aborted {
    #[serde(rename = "interrupted")]
    Interrupted,
}

/// The clearing line ([`CLEAR`]): the first line `--events` prints and `--state-file` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Cleared {
    pub post_turn_summary: (),
}

/// One line of `--events`: the clearing line, then the result.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum EventLine {
    Cleared(Cleared),
    Result(StatusReport),
}

impl StatusReport {
    /// Where a failure belongs: the caller's mistakes are refused, a missing credential is the
    /// LLM engine failing, a signal interrupts, the rest is the environment's.
    pub fn from_failure(failure: Failure) -> Self {
        let error = ErrorBody::of_failure(&failure);
        match failure {
            Failure::Usage(_) | Failure::BadInput { .. } => StatusReport::Refused { error },
            Failure::Environment { .. } => StatusReport::Failed {
                post_turn_summary: (),
                error,
            },
            Failure::Remote { .. } => StatusReport::llm_failed(error, Usage::default()),
            Failure::Interrupted { signal } => StatusReport::interrupted(signal),
        }
    }

    pub fn interrupted(signal: i32) -> Self {
        StatusReport::Interrupted {
            post_turn_summary: (),
            aborted: Aborted::Interrupted,
            signal,
            error: ErrorBody::of_failure(&Failure::interrupted(signal)),
        }
    }

    fn llm_failed(error: ErrorBody, usage: Usage) -> Self {
        StatusReport::LlmFailed {
            post_turn_summary: (),
            error,
            usage,
        }
    }

    fn no_text(message: &str) -> Self {
        StatusReport::NoText {
            reason: NoText::NoText,
            message: sanitize(message).into_owned(),
        }
    }

    /// Whether `--state-file` ends holding this document (a status, or the LLM engine's
    /// error); nothing else is written there.
    fn is_written(&self) -> bool {
        matches!(
            self,
            StatusReport::Status(_) | StatusReport::Reused(_) | StatusReport::LlmFailed { .. }
        )
    }

    /// The compact JSON line (also what `--state-file` holds).
    fn to_line(&self) -> Result<String, Failure> {
        serde_json::to_string(self)
            .map_err(|e| Failure::environment(format!("cannot serialise the status: {e}")))
    }
}

impl Report for StatusReport {
    fn exit(&self) -> Exit {
        match self {
            StatusReport::Status(_) | StatusReport::Reused(_) => Exit::Yes,
            StatusReport::NoText { .. } => Exit::No,
            StatusReport::LlmFailed { .. } => Exit::Remote,
            StatusReport::Interrupted { signal, .. } => Exit::of_signal(*signal),
            StatusReport::Failed { .. } => Exit::Environment,
            StatusReport::Refused { .. } => Exit::Usage,
        }
    }

    /// The one stderr line that says why (none for a status), cleaned of control characters.
    fn note(&self) -> Option<String> {
        let line = match self {
            StatusReport::Status(_) | StatusReport::Reused(_) => return None,
            StatusReport::NoText { message, .. } => format!("no status: {message}"),
            StatusReport::LlmFailed { error, .. } => {
                format!("llm engine failed: {}: {}", error.kind, error.message)
            }
            StatusReport::Interrupted { error, .. }
            | StatusReport::Failed { error, .. }
            | StatusReport::Refused { error } => error.message.clone(),
        };
        Some(sanitize(&line).into_owned())
    }
}

impl crate::cli::Binary for Args {
    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn dispatch(self, cx: &Context) -> Delivery {
        cx.finish(self)
    }
}

impl Tool for Args {
    type Report = StatusReport;

    fn run(self, cx: &Context) -> Result<StatusReport, Failure> {
        // A signal outside the model exchange ends the process at once; it prints the same
        // result as one inside it.
        signals::set_documents(|signal| {
            serde_json::to_string(&StatusReport::interrupted(signal)).unwrap_or_default()
        });
        Ok(self.report(cx).unwrap_or_else(StatusReport::from_failure))
    }

    /// `--events` prints JSON Lines: the schema is that of one line.
    fn schema(&self, generator: &mut SchemaGenerator) -> Result<schemars::Schema, &'static str> {
        Ok(match self.events {
            true => generator.subschema_for::<EventLine>(),
            false => generator.subschema_for::<StatusReport>(),
        })
    }
}

impl Args {
    fn report(&self, cx: &Context) -> Result<StatusReport, Failure> {
        let diag = cx.diag();
        let payload = payload_of(cx.input()?)?;
        for (what, path) in [
            ("--transcript", self.transcript.as_deref()),
            ("--previous", self.previous.as_deref()),
            (
                "the payload's transcript_path",
                payload.as_ref().and_then(|p| p.transcript_path.as_deref()),
            ),
        ] {
            if let Some(path) = path {
                check_path(what, path)?;
            }
        }
        let source = self.source(payload.as_ref())?;
        // The model settings are checked before anything is written, so a bad one is a usage
        // error; the credential only once the model is to be asked.
        let (config, formats) = match self.engine {
            Engine::Llm => {
                let env = cx.env();
                let home = crate::claude::paths::home_dir(env);
                let formats = crate::claude::paths::state_home(env, home.as_deref())
                    .ok()
                    .map(|dir| dir.join("dreamkit").join(crate::model::formats::FILE_NAME));
                let config = credentials_later(self.model.config(env, Tier::SmallFast))?;
                (Some(config), formats)
            }
            Engine::Heuristic => (None, None),
        };
        let sink = self.surface.sink();
        let mut session = self
            .session
            .clone()
            .or_else(|| payload.as_ref().and_then(|p| p.session_id.clone()));

        // The text to classify, or the verdict when nothing needs classifying.
        let mut summarizes_uuid = None;
        let (text, immediate) = match source {
            Source::Permission(detail) => {
                diag.info("a permission prompt is pending: blocked, nothing classified");
                (
                    None,
                    Some(Verdict::new(
                        Category::Blocked,
                        &detail,
                        "answer the permission prompt",
                    )),
                )
            }
            Source::ApiFailure(detail) => {
                diag.info("the turn ended on an API error: failed");
                (None, Some(Verdict::new(Category::Failed, &detail, "")))
            }
            Source::Text(text, transcript) => {
                if let (Some(path), false) = (&transcript, text.trim().is_empty()) {
                    let (uuid, from_transcript) = uuid_for(&text, path, diag);
                    summarizes_uuid = uuid;
                    session = session.or(from_transcript);
                }
                (Some(text), None)
            }
            Source::Transcript { path, named } => match read_turn(&path, named)? {
                Some(turn) => {
                    summarizes_uuid.clone_from(&turn.uuid);
                    session = session.or(turn.session_id);
                    match (turn.text, turn.api_error) {
                        (Some(text), true) => {
                            diag.info("the transcript's last turn is an API error: failed");
                            (None, Some(Verdict::new(Category::Failed, &text, "")))
                        }
                        (text, false) => (text, None),
                        (None, true) => (None, None),
                    }
                }
                None => {
                    diag.info(&format!("{} does not exist yet", path.display()));
                    (None, None)
                }
            },
        };
        let has_text = text.as_deref().is_some_and(|t| !t.trim().is_empty());

        if let Some(path) = &self.state_file {
            check_state_file(path)?;
        }
        if immediate.is_none() && !has_text {
            return self.reuse_previous(sink, diag);
        }

        // The old status is cleared first, then the new one computed and written.
        self.clear()?;
        let status = |verdict: Verdict, tempo: Option<&'static str>| {
            let tempo = tempo.unwrap_or(verdict.category.tempo());
            Status::new(verdict, tempo, summarizes_uuid.clone(), session.clone())
        };
        let text = text.unwrap_or_default();
        let report = match (immediate, config) {
            (Some(verdict), _) => StatusReport::Status(sink.document(&status(verdict, None))),
            (None, None) => self.heuristic(&text, sink, diag, &status),
            (None, Some(config)) => {
                let failed = |error: ErrorBody, usage: Usage| match self.fallback {
                    Some(Fallback::Heuristic) => {
                        diag.warn(&sanitize(&format!(
                            "llm engine failed ({}: {}); classified with the rule table",
                            error.kind, error.message
                        )));
                        self.heuristic(&text, sink, diag, &status)
                    }
                    None => StatusReport::llm_failed(error, usage),
                };
                match config {
                    Err(failure) => failed(ErrorBody::of_failure(&failure), Usage::default()),
                    Ok(config) => {
                        let mut client = Client::new(config)?;
                        if let Some(path) = formats.clone() {
                            client = client.remembering_formats(path);
                        }
                        diag.info(&format!("asking {}", client.model()));
                        match llm::classify(&client, &text)? {
                            llm::Outcome::Classified(answer, usage) => {
                                diag.info(&format!(
                                    "llm: {} ({} input, {} output tokens)",
                                    answer.verdict.category.as_str(),
                                    usage.input_tokens,
                                    usage.output_tokens
                                ));
                                StatusReport::Status(
                                    sink.document(&status(answer.verdict, Some(answer.tempo))),
                                )
                            }
                            llm::Outcome::Failed(error, usage) => failed(error.body(), usage),
                            llm::Outcome::Interrupted(signal) => StatusReport::interrupted(signal),
                        }
                    }
                }
            }
        };
        if let Some(path) = &self.state_file {
            if report.is_written() {
                write_state(path, &report.to_line()?)?;
            }
        }
        Ok(report)
    }

    fn heuristic(
        &self,
        text: &str,
        sink: Sink,
        diag: &Diag,
        status: &dyn Fn(Verdict, Option<&'static str>) -> Status,
    ) -> StatusReport {
        let (verdict, why) = rules::classify_explained(text);
        diag.info(&format!("heuristic: {} ({why})", verdict.category.as_str()));
        StatusReport::Status(sink.document(&status(verdict, None)))
    }

    /// `--events` prints, and `--state-file` writes, the clearing line.
    fn clear(&self) -> Result<(), Failure> {
        if self.events {
            write_stdout(CLEAR, false)
                .map_err(|e| Failure::environment(format!("cannot write stdout: {e}")))?;
        }
        if let Some(path) = &self.state_file {
            write_state(path, CLEAR)?;
        }
        Ok(())
    }

    /// A turn with no new assistant text: the previous status again, else nothing to report.
    fn reuse_previous(&self, sink: Sink, diag: &Diag) -> Result<StatusReport, Failure> {
        let previous = match &self.previous {
            Some(path) => previous_status(path, sink)?,
            None => None,
        };
        let Some(previous) = previous else {
            let message = match &self.previous {
                Some(path) => format!(
                    "the turn has no new assistant text and --previous {} holds no {} status",
                    path.display(),
                    sink.as_str()
                ),
                None => "the turn has no new assistant text".to_string(),
            };
            return Ok(StatusReport::no_text(&message));
        };
        diag.info("no new assistant text: the previous status is reused");
        let report = StatusReport::Reused(previous);
        self.clear()?;
        if let Some(path) = &self.state_file {
            write_state(path, &report.to_line()?)?;
        }
        Ok(report)
    }
}

/// Prose for the man page.
#[cfg(feature = "docs")]
pub const MAN_SECTIONS: &[(&str, &str)] = &[
    (
        "INPUT",
        "Flags win, then stdin. --permission-blocked: blocked at once, nothing read or \
classified. --transcript PATH: the last turn of that transcript, read backwards from the end \
(at most 8 MiB back, whatever the file's size): the text of the last assistant response after \
the last real user turn (all its text blocks), and the uuid of its last record; no assistant \
text since the last user turn means no new text; an API error record (isApiErrorMessage) \
means failed with its text as detail.

On stdin, a hook payload: Stop (or SubagentStop): last_assistant_message is classified, and \
the payload's transcript_path, when readable and its last turn holds the same text, gives \
summarizes_uuid; a payload without last_assistant_message is read from its transcript_path \
instead. StopFailure: failed, detail = last_assistant_message, else error, else \
error_message, error_details or error_type. Notification with notification_type \
permission_prompt: blocked at once, detail = its message. Any other event (and an object \
without hook_event_name, such as a statusLine command's stdin with session_id and \
transcript_path): the last turn of transcript_path; a transcript_path that does not exist yet \
is a turn with no text. A field of the wrong JSON type (last_assistant_message, \
transcript_path, session_id, notification_type, message, error, error_type, error_message, \
error_details) is bad input. session_id: --session, else the payload's, else the \
transcript's.",
    ),
    (
        "HEURISTIC ENGINE",
        "The default (--engine heuristic, or DREAMKIT_TURN_STATUS_ENGINE): no model, no network, \
no async runtime. Only the last 800 characters of the text are read; fenced code blocks are \
left out (unless the text is only code), and markdown marks, bullets and list numbers are \
removed from each line. The rules are tried in this order and the first that matches decides; \
phrases are case-insensitive and match whole words.

failed: a line starting with failed: or failure: (失败： or 失败:); giving up, give up, gave up, unable \
to complete, could not complete, couldn't complete (放弃); api error, unless the line is an \
authentication error.

blocked: a line starting with blocked:, needs input:, need input:, action required: (阻塞：, \
需要输入：); a last line ending with a question mark (? or ？); awaiting your approval, awaiting \
your input, awaiting your confirmation, awaiting approval, waiting for your approval, waiting \
for your input, waiting for your confirmation, waiting for you to, need your approval, needs \
your approval, need your input, please run, please provide, please approve, please confirm, \
please log in (请运行, 请提供, 请确认, 等待你的, 等待您的); authentication errors: \
authentication_error, authentication failed, authentication error, invalid api key, invalid \
x-api-key, unauthorized, not logged in, /login, gh auth login, permission denied (publickey), \
token has expired, token expired.

done: a line starting with result: or done: (结果：, 完成：); pushed, committed, opened pr, \
opened a pr, opened a pull request, opened pull request, created a pr, created a pull \
request, merged, all tests pass, all tests passed, is complete, is now complete, deployed \
(已推送, 已提交, 已完成, 已合并), each unless a word before it in its clause (since the last \
. , ; : ! ? or dash) is not, never, without, before, once, until, if, when, no, yet or be, or \
ends in n't (\"haven't pushed\", \"once CI is green and all tests pass\").

working: waiting on ci, waiting for ci, waiting on the ci, waiting for the ci, waiting on the \
build, waiting for the build, waiting on build, waiting for build, let me (but not let me \
know), running, in progress (正在, 让我). No rule: working, with the last line as detail.

The detail is the matching line (for a label, what follows it; for the question, its \
last sentence), the last line when no rule matched, cut to 64 characters (… marks a cut). \
needs_action is the same line when blocked, else \"\". -v names the rule that decided.",
    ),
    (
        "LLM ENGINE",
        "--engine llm asks the small/fast model (--model, else ANTHROPIC_SMALL_FAST_MODEL, else \
ANTHROPIC_DEFAULT_HAIKU_MODEL, else a built-in Haiku id; --provider openai with OPENAI_MODEL), \
thinking off, no tools, max_tokens 300, to classify the last 2,000 characters of the text as \
one JSON object {state: working|blocked|done|failed, detail (at most 64 characters), tempo: \
active|idle|blocked, needs, result (at most 180 characters)}. A code fence or words around \
the object are tolerated; a missing state or detail, an unknown state or tempo, or a field of \
the wrong type is a failed parse. After a failed parse, one second request repeats the \
conversation with the reply and a format correction. If both fail, or the model cannot be \
reached after the retries (--retries, --timeout, --deadline, as for recap), stdout holds \
{\"post_turn_summary\": null, \"error\": {kind, status, message, attempts}, \"usage\"} and \
turn-status exits 4; with --fallback heuristic the rule table classifies instead (exit 0, \
one line on stderr). error.kind names the model error kind (auth, rate_limited, overloaded, \
invalid_request, timeout, network, malformed_response, server). The result field steers the \
model and is not printed. With no credential for the provider, the engine fails the same way \
before any network I/O (exit 4, kind auth, reason no_credential; --fallback heuristic falls \
back), and only when the model is to be asked: a permission prompt, an API failure or a turn \
with no new text needs no credential. Every other model setting (a base URL that is not an \
absolute http(s) URL, --provider openai without a model) is a usage error (exit 2) at once.",
    ),
    (
        "OUTPUT",
        "--surface picks the sink. cli (default), ccr, bridge, desktop -> summary: Claude Code's \
record {type: \"system\", subtype: \"post_turn_summary\", summarizes_uuid, status_category, \
status_detail, needs_action, uuid, session_id}, status_category blocked, completed (done), \
review_ready (working) or failed; summarizes_uuid is the uuid of the turn's last assistant \
record when a transcript is named or readable, else null; uuid is new. bg, watched -> state: \
{state, tempo, needs}, state working|blocked|done|failed, tempo active|idle|blocked (the rule \
table gives blocked when blocked, active when working, idle otherwise). repl -> headline: \
{headline}, \"Blocked: <detail>\" and so on, at most 64 characters.

--events prints JSON Lines: the clearing line {\"post_turn_summary\":null} first (at once, \
before the model is asked), then the result. --state-file FILE writes the same two steps to \
FILE, each an atomic replacement (mode 0600; its directory is created, 0700, if missing), so \
the file ends holding the result line, or the error document when the LLM engine failed. \
Nothing is cleared or written for a usage error, bad input or a turn with nothing to report.

A turn with no new assistant text (an empty last_assistant_message, a transcript whose last \
real user turn is newer than any assistant text) reuses --previous FILE: its last line, \
printed again as it is, when it is a status of the current sink's shape (it may be the \
--state-file itself). Otherwise there is nothing to report: {\"reason\": \"no_text\", \
\"message\"} and exit 1, nothing written.

No control character (C0 and C1 but newline and tab) reaches status_detail, needs_action, \
needs, headline or stderr, whether the text came from the turn, a payload, the model or \
--previous (which is printed again without them).",
    ),
    (
        "EXIT STATUS",
        "0 a status was printed (classified, blocked by a permission prompt, failed by an API \
error, or the previous status reused).

1 nothing to report: the turn has no new assistant text and --previous holds no status; \
stdout says why ({\"reason\": \"no_text\", \"message\"}), one line on stderr unless -q.

2 usage error or bad input: nothing to classify, a field of the wrong JSON type, a bad model \
setting with --engine llm, a --previous whose last line is not a JSON object or that holds \
more than 1 MiB; stdout holds {\"error\": {kind, reason?, message}}.

3 a file cannot be read or written: --transcript, the payload's transcript_path, --previous \
(the last two once they exist) or --state-file is unreadable (reason permission), missing \
(not_found) or not a regular file (not_a_file: a FIFO, device, socket or directory is refused \
at once, never waited on), or the state file's directory cannot be created or written; stdout \
holds {\"post_turn_summary\": null, \"error\": {kind: \"environment\", reason, message}}.

4 the LLM engine failed (the model's reply did not parse twice, the model could not be \
reached, or no credential is set), without --fallback heuristic: {\"post_turn_summary\": \
null, \"error\", \"usage\"}.

130 interrupted by SIGINT while the model was asked.

143 terminated by SIGTERM while the model was asked. Both print {\"post_turn_summary\": \
null, \"aborted\": \"interrupted\", \"error\": {kind: \"interrupted\", message}}.",
    ),
    (
        "EXAMPLES",
        "The status of a turn, as a Stop hook would pass it:

  echo '{\"hook_event_name\":\"Stop\",\"last_assistant_message\":\"Pushed the fix to main.\"}' | turn-status | jq -r .status_category

A headline for a compact display, from the most recently active session:

  turn-status --surface repl --transcript \"$(ls -t ~/.claude/projects/*/*.jsonl | head -n 1)\" | jq -r .headline

As a Stop hook that keeps a status file (end hook commands with exit 0):

  turn-status -q --previous ~/.cache/dreamkit/turn-status.json --state-file ~/.cache/dreamkit/turn-status.json >/dev/null; exit 0",
    ),
    (
        "ENVIRONMENT",
        "DREAMKIT_TURN_STATUS_ENGINE: the --engine default (heuristic or llm). With --engine \
llm, the model's variables below; the heuristic engine reads none of them.",
    ),
    ("ENVIRONMENT", crate::model::MAN_ENVIRONMENT),
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_man_page_names_every_rule() {
        let prose: String = MAN_SECTIONS
            .iter()
            .find(|(title, _)| *title == "HEURISTIC ENGINE")
            .map(|(_, text)| text.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        for rule in rules::RULES {
            let needle = match rule.test {
                rules::Test::Label(l) | rules::Test::Phrase(l) | rules::Test::Affirmed(l) => l,
                rules::Test::TrailingQuestion => "question mark",
            };
            assert!(prose.contains(needle), "the man page misses {needle:?}");
        }
    }

    #[test]
    fn stop_failure_detail_order() {
        let args = Args::parse_from(["turn-status"]);
        let payload = |v: Value| {
            let Value::Object(map) = v else {
                unreachable!()
            };
            HookPayload::from_map(map).unwrap()
        };
        let p = payload(
            json!({"hook_event_name": "StopFailure", "error": "rate_limit",
            "last_assistant_message": "API Error: Rate limit reached"}),
        );
        assert!(matches!(args.source(Some(&p)).unwrap(),
            Source::ApiFailure(d) if d == "API Error: Rate limit reached"));
        let p = payload(json!({"hook_event_name": "StopFailure", "error": "rate_limit"}));
        assert!(matches!(args.source(Some(&p)).unwrap(),
            Source::ApiFailure(d) if d == "rate_limit"));
    }

    #[test]
    fn the_clearing_line_is_its_type() {
        let cleared = Cleared {
            post_turn_summary: (),
        };
        assert_eq!(crate::cli::json::to_string(&cleared).unwrap(), CLEAR);
    }

    #[test]
    fn every_failure_says_no_status_but_a_refusal() {
        let json = |report: &StatusReport| crate::cli::json::to_string(report).unwrap();
        let signal = StatusReport::interrupted(libc::SIGTERM);
        assert_eq!(
            json(&signal),
            r#"{"post_turn_summary":null,"aborted":"interrupted","error":{"kind":"interrupted","message":"interrupted by SIGTERM"}}"#
        );
        assert_eq!(
            (signal.exit().code(), signal.note().as_deref()),
            (143, Some("interrupted by SIGTERM"))
        );
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        let failed = StatusReport::from_failure(Failure::io("read", Path::new("/t"), &missing));
        assert_eq!(failed.exit(), Exit::Environment);
        assert!(json(&failed).starts_with(
            r#"{"post_turn_summary":null,"error":{"kind":"environment","reason":"not_found""#
        ));
        let refused = StatusReport::from_failure(Failure::bad_input("no \u{7}text"));
        assert_eq!(refused.exit(), Exit::Usage);
        assert_eq!(
            json(&refused),
            r#"{"error":{"kind":"bad_input","message":"no text"}}"#
        );
        let no_text = StatusReport::no_text("nothing new");
        assert_eq!(
            json(&no_text),
            r#"{"reason":"no_text","message":"nothing new"}"#
        );
        assert_eq!(
            (no_text.exit(), no_text.note().as_deref()),
            (Exit::No, Some("no status: nothing new"))
        );
        let llm = StatusReport::llm_failed(
            crate::model::ModelError::new(crate::model::ErrorKind::Timeout, "slow").body(),
            Usage::default(),
        );
        assert_eq!(
            (llm.exit(), llm.note().as_deref()),
            (Exit::Remote, Some("llm engine failed: timeout: slow"))
        );
        assert!(llm.is_written() && !refused.is_written());
    }
}
