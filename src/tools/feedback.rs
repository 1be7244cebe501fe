//! `feedback`: local feedback drafts a person reviews before anything leaves the machine.

pub mod send;
pub mod store;

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::Parser;
use schemars::{JsonSchema, SchemaGenerator};
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::claude::paths::{
    check_location, config_dir, config_source, home_dir, project_dir, state_home,
};
use crate::claude::settings::FeedbackDrafts;
use crate::claude::{Env, HookPayload, Settings};
use crate::cli::duration::parse_duration;
use crate::cli::text::{for_terminal, sanitize};
use crate::cli::{
    CommonArgs, Context, Delivery, Diag, ErrorBody, Exit, Failure, Input, Report, Tool,
};
use crate::files::{create_private_dir, write_atomic};
use crate::model::{self, ErrorKind, ModelError, RetryPolicy};
use send::{attach, github_issue, payload, Attachment, PAYLOAD_BUDGET};
use store::{
    for_display, Defaults, Draft, Listed, NewDraft, Store, TranscriptRef, MAX_QUEUES_PER_SESSION,
};

/// Queue, review and send feedback drafts.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "feedback",
    version = crate::cli::VERSION,
    // `feedback` alone is a usage error naming the subcommands, not the help text.
    arg_required_else_help = false,
    about = "Queue, list, show, send and discard feedback drafts",
    long_about = "Feedback drafts kept where Claude Code keeps them \
(<config>/feedback/drafts/<draft_id>.json, 0600). Nothing leaves the machine without a \
person's consent: `send` shows what will be sent and asks, or needs --yes."
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: Subcommand,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Subcommand {
    /// Queue a draft from JSON fields on stdin, or from flags (flags win)
    Queue(QueueArgs),
    /// List drafts, newest first, after deleting those older than 30 days
    List(ListArgs),
    /// Print one draft
    Show(ShowArgs),
    /// Send a draft to an endpoint or as a GitHub issue, after consent
    Send(SendArgs),
    /// Delete a draft
    Discard(DiscardArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {}

#[derive(Debug, Clone, clap::Args)]
pub struct ShowArgs {
    /// The draft's id
    pub id: String,
}

/// A type apart from `show`'s: each command is its own [`Tool`], with its own report.
#[derive(Debug, Clone, clap::Args)]
pub struct DiscardArgs {
    /// The draft's id
    pub id: String,
}

#[derive(Debug, Clone, clap::Args)]
pub struct QueueArgs {
    /// The draft's type
    #[arg(
        long = "type",
        value_name = "TYPE",
        value_parser = clap::builder::PossibleValuesParser::new(store::TYPES.to_vec())
    )]
    pub kind: Option<String>,
    /// One line, at most 200 characters
    #[arg(long)]
    pub title: Option<String>,
    /// Facts, the user's own words, a minimal reproduction (at most 10,240 characters)
    #[arg(long)]
    pub details: Option<String>,
    /// Part of the product (at most 64 characters)
    #[arg(long)]
    pub area: Option<String>,
    /// What prompted the draft
    #[arg(
        long,
        value_parser = clap::builder::PossibleValuesParser::new(store::TRIGGERS.to_vec())
    )]
    pub trigger: Option<String>,
    /// Source session id [default: the hook payload's session_id]
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Model in use (at most 64 characters)
    #[arg(long)]
    pub model: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct SendArgs {
    /// The draft's id
    pub id: String,
    /// Where to POST the feedback JSON
    #[arg(
        long,
        value_name = "URL",
        required_unless_present = "to",
        conflicts_with = "to"
    )]
    pub endpoint: Option<String>,
    /// Create a GitHub issue instead: github:OWNER/REPO (GITHUB_TOKEN; GITHUB_API_URL)
    #[arg(long, value_name = "TARGET")]
    pub to: Option<String>,
    /// Attach the draft's session transcript (its newest messages)
    #[arg(long)]
    pub with_transcript: bool,
    /// The transcript file [default: the draft's transcript_ref]
    #[arg(long, value_name = "PATH", requires = "with_transcript")]
    pub transcript: Option<PathBuf>,
    /// Consent given: send without asking (required when stdin is not a terminal)
    #[arg(long)]
    pub yes: bool,
    /// Timeout of one request
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Retries after 429, 5xx, resets and timeouts
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub retries: u32,
}

impl crate::cli::Binary for Args {
    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn dispatch(self, cx: &Context) -> Delivery {
        match self.command {
            Subcommand::Queue(args) => cx.finish(args),
            Subcommand::List(args) => cx.finish(args),
            Subcommand::Show(args) => cx.finish(args),
            Subcommand::Send(args) => cx.finish(args),
            Subcommand::Discard(args) => cx.finish(args),
        }
    }
}

/// Where the drafts are, as every command finds them.
struct Drafts {
    env: Env,
    home: Option<PathBuf>,
    config: PathBuf,
    store: Store,
}

impl Drafts {
    fn open(cx: &Context) -> Result<Drafts, Failure> {
        let env = cx.env().clone();
        let home = home_dir(&env);
        let config = config_dir(&env, home.as_deref())?;
        // Draft paths are printed and then used by people and scripts: refuse a config dir
        // the JSON could not name exactly, before anything is written.
        check_location(config_source(&env), &config)?;
        let store = Store::new(&config);
        Ok(Drafts {
            env,
            home,
            config,
            store,
        })
    }
}

impl Tool for QueueArgs {
    type Report = QueueReport;

    fn run(self, cx: &Context) -> Result<QueueReport, Failure> {
        let drafts = Drafts::open(cx)?;
        queue(&self, &drafts, cx)
    }
}

impl Tool for ListArgs {
    type Report = ListReport;

    fn run(self, cx: &Context) -> Result<ListReport, Failure> {
        list(&Drafts::open(cx)?.store)
    }
}

impl Tool for ShowArgs {
    type Report = ShowReport;

    fn run(self, cx: &Context) -> Result<ShowReport, Failure> {
        Ok(match Drafts::open(cx)?.store.read(&self.id)? {
            Some(draft) => ShowReport::Shown(Box::new(draft.for_display())),
            None => ShowReport::NotFound(NotFound::of(&self.id)),
        })
    }
}

impl Tool for DiscardArgs {
    type Report = DiscardReport;

    fn run(self, cx: &Context) -> Result<DiscardReport, Failure> {
        Ok(match Drafts::open(cx)?.store.delete(&self.id)? {
            true => DiscardReport::Discarded {
                discarded: Is,
                draft_id: self.id,
            },
            false => DiscardReport::NotDiscarded {
                discarded: Is,
                draft_id: self.id,
                reason: Reason::NotFound,
            },
        })
    }
}

impl Tool for SendArgs {
    type Report = SendReport;

    fn run(self, cx: &Context) -> Result<SendReport, Failure> {
        send_draft(&self, &Drafts::open(cx)?, cx.diag())
    }
}

/// A field whose value the variant fixes: `sent: True` always prints `"sent": true`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Is<const B: bool>;
type True = Is<true>;
type False = Is<false>;

impl<const B: bool> Serialize for Is<B> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(B)
    }
}

impl<const B: bool> JsonSchema for Is<B> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        if B { "True" } else { "False" }.into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "boolean", "const": B })
    }
}

/// Why the answer is a clean "no" (exit 1), as the JSON's `reason` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// No draft has that id.
    NotFound,
    /// `feedbackDrafts: off`.
    Disabled,
    /// The source session queued its [`MAX_QUEUES_PER_SESSION`] drafts already.
    SessionLimit,
    /// The person answered no at the prompt.
    Declined,
}

/// What `queue` did. A failure before there is anything to report (a bad field, a drafts
/// dir that cannot be written) is a [`Failure`] instead, printed as `{"error": {...}}`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum QueueReport {
    /// A draft was written (exit 0).
    Queued {
        draft_id: String,
        path: String,
        evicted: Vec<String>,
    },
    /// Nothing was written (exit 1): drafts are off, or the session's queue is full.
    Refused {
        queued: False,
        reason: Reason,
        #[serde(skip_serializing_if = "Option::is_none")]
        source_session_id: Option<String>,
    },
}

impl Report for QueueReport {
    fn exit(&self) -> Exit {
        match self {
            QueueReport::Queued { .. } => Exit::Yes,
            QueueReport::Refused { .. } => Exit::No,
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            QueueReport::Refused {
                reason: Reason::SessionLimit,
                source_session_id,
                ..
            } => Some(format!(
                "not queued: session {} has queued {MAX_QUEUES_PER_SESSION} drafts already",
                source_session_id.as_deref().unwrap_or("?")
            )),
            _ => None,
        }
    }
}

/// `list`, newest first, after the expired drafts were deleted (exit 0).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListReport {
    drafts: Vec<ListEntry>,
    expired: Vec<String>,
}

impl Report for ListReport {
    fn exit(&self) -> Exit {
        Exit::Yes
    }
}

/// `{found: false, draft_id, reason: "not_found"}` (exit 1): no draft has the id.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NotFound {
    found: False,
    draft_id: String,
    reason: Reason,
}

impl NotFound {
    fn of(id: &str) -> Self {
        NotFound {
            found: Is,
            draft_id: id.to_string(),
            reason: Reason::NotFound,
        }
    }
}

/// The line for an id that names no draft.
fn no_draft(draft_id: &str) -> String {
    format!("no draft {draft_id} (`feedback list` shows the drafts)")
}

/// What `show` printed.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ShowReport {
    /// The draft as a person may see it ([`Draft::for_display`]), exit 0.
    Shown(Box<Draft>),
    NotFound(NotFound),
}

impl Report for ShowReport {
    fn exit(&self) -> Exit {
        match self {
            ShowReport::Shown(_) => Exit::Yes,
            ShowReport::NotFound(_) => Exit::No,
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            ShowReport::Shown(_) => None,
            ShowReport::NotFound(not_found) => Some(no_draft(&not_found.draft_id)),
        }
    }
}

/// What `discard` did.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum DiscardReport {
    /// Exit 0.
    Discarded { discarded: True, draft_id: String },
    /// Exit 1: no draft has the id.
    NotDiscarded {
        discarded: False,
        draft_id: String,
        reason: Reason,
    },
}

impl Report for DiscardReport {
    fn exit(&self) -> Exit {
        match self {
            DiscardReport::Discarded { .. } => Exit::Yes,
            DiscardReport::NotDiscarded { .. } => Exit::No,
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            DiscardReport::Discarded { .. } => None,
            DiscardReport::NotDiscarded { draft_id, .. } => Some(no_draft(draft_id)),
        }
    }
}

/// What `send` did. A failure before the draft is read (a bad target) is a [`Failure`].
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum SendReport {
    NotFound(NotFound),
    /// The server took the draft (2xx). `error` only when the draft could not be deleted
    /// afterwards (exit 3: sending it again would send it twice).
    Sent {
        sent: True,
        #[schemars(with = "Option<Value>")]
        feedback_id: Value,
        draft_id: String,
        transcript: Box<Attachment>,
        #[serde(skip_serializing_if = "Option::is_none")]
        url: Option<Value>,
        #[serde(
            skip_serializing_if = "Option::is_none",
            serialize_with = "optional_failure"
        )]
        #[schemars(with = "Option<ErrorBody>")]
        error: Option<Failure>,
    },
    /// The person said no at the prompt; the draft is kept (exit 1).
    Declined {
        sent: False,
        queued: True,
        draft_id: String,
        reason: Reason,
    },
    /// The draft exists but was not sent, and is kept: `error` says why.
    NotSent {
        sent: False,
        queued: True,
        draft_id: String,
        error: Unsent,
    },
}

impl Report for SendReport {
    fn exit(&self) -> Exit {
        match self {
            SendReport::Sent { error: None, .. } => Exit::Yes,
            SendReport::NotFound(_) | SendReport::Declined { .. } => Exit::No,
            SendReport::Sent {
                error: Some(failure),
                ..
            } => failure.exit(),
            SendReport::NotSent { error, .. } => error.exit(),
        }
    }

    /// The one line a person reads on stderr, when there is one. Text from a server is made
    /// safe for the terminal first.
    fn note(&self) -> Option<String> {
        match self {
            SendReport::NotFound(not_found) => Some(no_draft(&not_found.draft_id)),
            SendReport::Declined { .. } => Some("not sent (declined); the draft is kept".into()),
            SendReport::Sent {
                error: Some(failure),
                ..
            } => Some(format!(
                "sent, but the draft is still there (do not send it again): {}",
                sanitize(&failure.to_string())
            )),
            SendReport::NotSent { error, .. } => Some(format!(
                "not sent, the draft is kept: {}",
                sanitize(&error.message())
            )),
            SendReport::Sent { error: None, .. } => None,
        }
    }
}

/// One entry of `list`: a draft with its path (as [`Draft::for_display`]), or a file that is
/// not a readable draft, with its error.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
enum ListEntry {
    Draft {
        #[serde(flatten)]
        draft: Box<Draft>,
        path: String,
    },
    Broken {
        draft_id: String,
        path: String,
        error: String,
    },
}

/// Why a draft that exists was not sent.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Unsent {
    /// The request failed (after retries), or could not be authorised (no `GITHUB_TOKEN`):
    /// exit 4, `{kind, reason?, status, message, attempts}`.
    Remote(RemoteBody),
    /// A local gate (the transcript file, the payload's size, consent, the machine): its
    /// own exit code, `{kind, reason?, message}`.
    Local(
        #[serde(serialize_with = "sanitized_failure")]
        #[schemars(with = "ErrorBody")]
        Failure,
    ),
}

impl From<Failure> for Unsent {
    fn from(failure: Failure) -> Self {
        Unsent::Local(failure)
    }
}

impl From<ModelError> for Unsent {
    fn from(error: ModelError) -> Self {
        Unsent::Remote(RemoteBody::of(&error))
    }
}

impl Unsent {
    fn exit(&self) -> Exit {
        match self {
            Unsent::Remote(_) => Exit::Remote,
            Unsent::Local(failure) => failure.exit(),
        }
    }

    fn message(&self) -> String {
        match self {
            Unsent::Remote(body) => body.message.clone(),
            Unsent::Local(failure) => failure.to_string(),
        }
    }
}

/// `{kind, reason?, message}`, the message made safe to print.
fn sanitized_failure<S: Serializer>(failure: &Failure, s: S) -> Result<S::Ok, S::Error> {
    ErrorBody::of_failure(failure).serialize(s)
}

fn optional_failure<S: Serializer>(failure: &Option<Failure>, s: S) -> Result<S::Ok, S::Error> {
    failure.as_ref().map(ErrorBody::of_failure).serialize(s)
}

/// `{kind, reason?, status, message, attempts}` of a failed request.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RemoteBody {
    /// `too_large` (413), `rejected` (another refusal), or the model error kinds.
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    status: Option<u16>,
    message: String,
    attempts: u32,
}

impl RemoteBody {
    fn of(error: &ModelError) -> Self {
        RemoteBody {
            kind: send_kind(error),
            // An auth failure before any attempt: no credential was there to send.
            reason: (error.kind == ErrorKind::Auth && error.attempts == 0)
                .then_some("no_credential"),
            status: error.status,
            message: sanitize(&error.message).into_owned(),
            attempts: error.attempts,
        }
    }
}

/// The `kind` of a failed send: 413 is `too_large`, another refusal of the request
/// `rejected`, the rest as the client typed it.
fn send_kind(error: &ModelError) -> &'static str {
    match (error.kind, error.status) {
        (_, Some(413)) => "too_large",
        (ErrorKind::InvalidRequest, _) => "rejected",
        (kind, _) => kind.as_str(),
    }
}

/// A path for the JSON output, bytes that are not UTF-8 replaced. The config dir and the
/// hook's paths are checked at input, so only a foreign file dropped into the drafts dir can
/// have such a name, and `list` shows it with the bytes replaced rather than fail the whole
/// listing.
fn path_text(path: &std::path::Path) -> String {
    path.to_string_lossy().into_owned()
}

fn queue(args: &QueueArgs, drafts: &Drafts, cx: &Context) -> Result<QueueReport, Failure> {
    let (store, config, env, diag) = (&drafts.store, &drafts.config, &drafts.env, cx.diag());
    let home = drafts.home.as_deref();
    let mut new = match cx.input()? {
        Input::Nothing => NewDraft::default(),
        Input::Envelope(fields) => serde_json::from_value(fields.into_value())
            .map_err(|e| Failure::bad_input(format!("draft fields on stdin: {e}")))?,
        Input::Hook(map) => {
            let hook = HookPayload::from_map(map)?;
            let cwd = match &hook.cwd {
                Some(dir) => Some(path_text(&project_dir("the hook payload's cwd", dir)?)),
                None => None,
            };
            let session_file = match &hook.transcript_path {
                Some(path) => {
                    check_location("the hook payload's transcript_path", path)?;
                    Some(path_text(path))
                }
                None => None,
            };
            // Draft fields beside the payload's own (a hook that adds type, title, details)
            // are the draft's; the payload's session, cwd and transcript fill what they leave.
            let fields: serde_json::Map<String, Value> = hook
                .other
                .iter()
                .filter(|(key, _)| store::NEW_DRAFT_FIELDS.contains(&key.as_str()))
                // Some payloads (a statusLine's) describe the model as an object: not a draft's.
                .filter(|(key, value)| *key != "model" || value.is_string())
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            let mut new: NewDraft = serde_json::from_value(Value::Object(fields))
                .map_err(|e| Failure::bad_input(format!("draft fields on stdin: {e}")))?;
            if new.source_session_id.is_none() {
                new.source_session_id = hook.session_id;
            }
            new.cwd = new.cwd.or(cwd);
            if new.transcript_ref.is_none() {
                new.transcript_ref = session_file.map(|file| TranscriptRef {
                    session_file: Some(file),
                    ..TranscriptRef::default()
                });
            }
            new
        }
    };
    let flag = |f: &Option<String>, v: &mut Option<String>| {
        if f.is_some() {
            v.clone_from(f);
        }
    };
    flag(&args.kind, &mut new.kind);
    flag(&args.title, &mut new.title);
    flag(&args.details, &mut new.details);
    flag(&args.area, &mut new.area);
    flag(&args.trigger, &mut new.trigger);
    flag(&args.session, &mut new.source_session_id);
    flag(&args.model, &mut new.model);

    // The project's settings: the hook payload's cwd when there was one. A draft's own cwd is
    // a record of where the user was (it may be another machine's), so it need not exist.
    let cwd = match new.cwd.as_ref().map(PathBuf::from) {
        Some(dir) => {
            check_location("the draft's cwd", &dir)?;
            dir
        }
        None => std::env::current_dir().unwrap_or_default(),
    };
    let settings = Settings::load(config, &cwd)?;
    let mode = settings.feedback_drafts.unwrap_or(FeedbackDrafts::Notify);
    if mode == FeedbackDrafts::Off {
        return Ok(QueueReport::Refused {
            queued: Is,
            reason: Reason::Disabled,
            source_session_id: None,
        });
    }
    // Validation and the size cap come before anything is written.
    let defaults = draft_defaults(config, &cwd, new.source_session_id.as_deref());
    let draft = new.into_draft_with(SystemTime::now(), defaults)?;
    let bytes = Store::render(&draft)?;
    let counts = QueueCounts::at(env, home)?;
    let session = draft.source_session_id.clone();
    if let Some(session) = &session {
        if counts.get(session)? >= MAX_QUEUES_PER_SESSION {
            return Ok(QueueReport::Refused {
                queued: Is,
                reason: Reason::SessionLimit,
                source_session_id: Some(session.clone()),
            });
        }
    }
    let path = store.write(&draft.draft_id, &bytes)?;
    let evicted = store.evict()?;
    if let Some(session) = &session {
        if let Err(e) = counts.increment(session) {
            diag.warn(&format!("cannot record the queue count: {e}"));
        }
    }
    // Claude Code lists only drafts that name their session.
    let unlisted = if draft.source_session_id.is_none() {
        "; it names no session (no --session, hook payload or transcript of this project), so Claude Code will not list it"
    } else {
        ""
    };
    if mode == FeedbackDrafts::Notify || !unlisted.is_empty() {
        // The title is the user's text: one line, without control characters.
        diag.warn(&format!(
            "draft queued: {} (review with `feedback show {}`{unlisted})",
            for_terminal(&draft.title, 200),
            draft.draft_id
        ));
    }
    Ok(QueueReport::Queued {
        draft_id: draft.draft_id,
        path: path_text(&path),
        evicted,
    })
}

/// What a draft should say where the caller did not: the project's directory, and the
/// model, Claude Code version and session of its transcript (the named session's, else the
/// newest), so the draft reads as one the client wrote. Best effort: what cannot be read is
/// left to the client's empty strings.
fn draft_defaults(
    config: &std::path::Path,
    cwd: &std::path::Path,
    session: Option<&str>,
) -> Defaults {
    use crate::claude::sessions::{is_session_id, sessions_touched_since};
    let slug = crate::claude::paths::slug(cwd);
    let dir = config.join("projects").join(&slug);
    let transcript = match session {
        Some(id) => Some((id.to_string(), dir.join(format!("{id}.jsonl")))),
        None => sessions_touched_since(&dir, None, None)
            .ok()
            .and_then(|all| all.into_iter().max_by_key(|s| s.modified))
            .map(|s| (s.id, s.path)),
    };
    let mut defaults = Defaults {
        cwd: cwd.to_str().map(str::to_string),
        ..Defaults::default()
    };
    let Some((id, path)) = transcript.filter(|(_, p)| crate::files::open_regular(p).is_ok()) else {
        return defaults;
    };
    if is_session_id(&id) {
        defaults.source_session_id = Some(id);
    }
    if let Ok(reader) = crate::claude::transcript::BackwardReader::open(&path) {
        for entry in reader.take(500).flatten() {
            let Some(record) = entry.into_record() else {
                continue;
            };
            if defaults.cli_version.is_none() {
                defaults.cli_version.clone_from(&record.version);
            }
            if defaults.model.is_none() && record.kind == "assistant" && !record.is_api_error() {
                defaults.model = record.message.and_then(|m| m.model);
            }
            if defaults.cli_version.is_some() && defaults.model.is_some() {
                break;
            }
        }
    }
    defaults.transcript_ref = path.to_str().map(|file| TranscriptRef {
        session_file: Some(file.to_string()),
        message_range: None,
        project_dir_key: Some(slug),
    });
    defaults
}

fn list(store: &Store) -> Result<ListReport, Failure> {
    let (remaining, expired) = store.expire(store.list()?, SystemTime::now())?;
    let safe = |text: &str| sanitize(text).into_owned();
    let drafts = remaining
        .into_iter()
        .map(|item| match item {
            Listed::Draft(draft, path) => ListEntry::Draft {
                draft: Box::new(draft.for_display()),
                path: safe(&path_text(&path)),
            },
            Listed::Broken {
                draft_id,
                path,
                error,
            } => ListEntry::Broken {
                draft_id: safe(&draft_id),
                path: safe(&path_text(&path)),
                error: safe(&error),
            },
        })
        .collect();
    Ok(ListReport {
        drafts,
        expired: expired.iter().map(|id| safe(id)).collect(),
    })
}

/// How many drafts each source session has queued (`<state>/dreamkit/feedback-queues.json`).
struct QueueCounts {
    path: PathBuf,
}

impl QueueCounts {
    fn at(env: &Env, home: Option<&std::path::Path>) -> Result<QueueCounts, Failure> {
        Ok(QueueCounts {
            path: state_home(env, home)?.join("dreamkit/feedback-queues.json"),
        })
    }

    fn load(&self) -> Result<serde_json::Map<String, Value>, Failure> {
        // One count per session: a larger file is not ours (an error naming the cap).
        const MAX_QUEUE_COUNTS_BYTES: u64 = 4 * 1024 * 1024;
        match crate::files::read_regular_capped(&self.path, MAX_QUEUE_COUNTS_BYTES) {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes).unwrap_or_default()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
            Err(e) => Err(Failure::io("read", &self.path, &e)),
        }
    }

    fn get(&self, session: &str) -> Result<u32, Failure> {
        Ok(self
            .load()?
            .get(session)
            .and_then(Value::as_u64)
            .map_or(0, |n| n.min(u64::from(u32::MAX)) as u32))
    }

    fn increment(&self, session: &str) -> std::io::Result<()> {
        let mut counts = self.load().unwrap_or_default();
        let n = counts.get(session).and_then(Value::as_u64).unwrap_or(0);
        counts.insert(session.to_string(), Value::from(n + 1));
        // Bounded: the oldest sessions are forgotten first.
        while counts.len() > 1000 {
            let first = counts.keys().next().cloned().unwrap_or_default();
            counts.remove(&first);
        }
        if let Some(dir) = self.path.parent() {
            create_private_dir(dir)?;
        }
        write_atomic(&self.path, &serde_json::to_vec(&counts)?, 0o600)
    }
}

/// Where the feedback goes.
enum Target {
    Endpoint(String),
    GitHub {
        api: String,
        repo: String,
        /// Checked only after the local gates, like a model key (`auth`, exit 4).
        token: Option<crate::net::Secret>,
    },
}

/// A GitHub owner or repository name: letters, digits, `-`, `_` and `.`, but not `.` or
/// `..` (it becomes part of the API path).
fn is_github_name(name: &str) -> bool {
    (1..=100).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The target named by the flags; a wrong one is a usage error, before any draft is read.
fn target(args: &SendArgs, env: &Env) -> Result<Target, Failure> {
    if let Some(to) = &args.to {
        let repo = to
            .strip_prefix("github:")
            .filter(|r| {
                let mut parts = r.split('/');
                let ok = |p: Option<&str>| p.is_some_and(is_github_name);
                ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
            })
            .ok_or_else(|| Failure::Usage(format!("--to {to:?}: expected github:OWNER/REPO")))?;
        // A token is registered for redaction at once; a missing one fails only after the
        // local gates.
        let token = env
            .get("GITHUB_TOKEN")
            .map(|t| t.to_string_lossy().trim().to_string())
            .filter(|t| !t.is_empty())
            .map(|t| crate::net::Secret::checked("GITHUB_TOKEN", t))
            .transpose()?;
        let api = env.get("GITHUB_API_URL").map(|u| u.to_string_lossy());
        let api = crate::net::base_url(
            "GITHUB_API_URL",
            api.as_deref(),
            send::DEFAULT_GITHUB_API_URL,
        )?;
        return Ok(Target::GitHub {
            api,
            repo: repo.to_string(),
            token,
        });
    }
    let url = args.endpoint.clone().unwrap_or_default();
    // A URL that does not parse is a usage error before any request (never retried).
    crate::net::checked_url(&url, "--endpoint")?;
    Ok(Target::Endpoint(url))
}

fn send_draft(args: &SendArgs, drafts: &Drafts, diag: &Diag) -> Result<SendReport, Failure> {
    let (store, config, env) = (&drafts.store, &drafts.config, &drafts.env);
    // The caller's mistakes first, then the draft, then everything else about sending it.
    let target = target(args, env)?;
    let Some(draft) = store.read(&args.id)? else {
        return Ok(SendReport::NotFound(NotFound::of(&args.id)));
    };
    Ok(
        send_found(args, &draft, &target, store, config, env, diag).unwrap_or_else(|error| {
            SendReport::NotSent {
                sent: Is,
                queued: Is,
                draft_id: draft.draft_id.clone(),
                error,
            }
        }),
    )
}

/// Sends a draft that exists. Gates in order: the transcript file (exit 3), the payload's
/// size (exit 2), consent without a terminal (exit 2), the credential (exit 4), the person's
/// answer (exit 1), then the request.
fn send_found(
    args: &SendArgs,
    draft: &Draft,
    target: &Target,
    store: &Store,
    config: &std::path::Path,
    env: &Env,
    diag: &Diag,
) -> Result<SendReport, Unsent> {
    let mut body = match target {
        Target::Endpoint(_) => payload(draft),
        Target::GitHub { .. } => github_issue(draft),
    };
    let attachment = match (target, args.with_transcript) {
        (_, false) => Attachment::default(),
        (Target::GitHub { .. }, true) => {
            diag.warn("the transcript is never attached to a GitHub issue");
            Attachment {
                withheld: Some("github"),
                ..Attachment::default()
            }
        }
        (Target::Endpoint(_), true) => {
            let path = args
                .transcript
                .clone()
                .or_else(|| transcript_path(draft, config));
            // A transcript that is named, by the flag or the draft, must be there to read:
            // missing, unreadable or not a regular file is exit 3 and nothing is sent.
            if let Some(path) = &path {
                crate::files::open_regular(path)
                    .map_err(|e| Failure::io("read the transcript", path, &e))?;
            }
            let base = serde_json::to_vec(&body).map_or(0, |b| b.len());
            let a = attach(draft, path.as_deref(), base);
            if let Some(reason) = a.withheld {
                diag.warn(&format!("transcript withheld: {reason}"));
            }
            if let Some(text) = &a.text {
                body["transcript"] = Value::from(text.as_str());
            }
            a
        }
    };
    let bytes = serde_json::to_vec(&body)
        .map_err(|e| Failure::environment(format!("cannot serialise the payload: {e}")))?;
    if bytes.len() > PAYLOAD_BUDGET {
        return Err(Failure::BadInput {
            reason: Some("too_large"),
            message: format!(
                "the payload is {} bytes; at most {PAYLOAD_BUDGET}",
                bytes.len()
            ),
        }
        .into());
    }
    let ask = !args.yes;
    if ask && !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(Failure::BadInput {
            reason: Some("consent_required"),
            message: "without a terminal to ask on, pass --yes to consent".into(),
        }
        .into());
    }
    let request = Request::to(target)?;
    if ask && !ask_consent(&body, &attachment, &request.destination)? {
        return Ok(SendReport::Declined {
            sent: Is,
            queued: Is,
            draft_id: draft.draft_id.clone(),
            reason: Reason::Declined,
        });
    }
    let answer = deliver(&request, &bytes, args, env)??;
    let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
    let feedback_id = match target {
        Target::Endpoint(_) => answer.get("feedback_id").or_else(|| answer.get("id")),
        Target::GitHub { .. } => answer.get("number"),
    };
    Ok(SendReport::Sent {
        sent: Is,
        feedback_id: feedback_id.map_or(Value::Null, for_display),
        draft_id: draft.draft_id.clone(),
        transcript: Box::new(attachment),
        url: answer.get("html_url").map(for_display),
        error: store.delete(&draft.draft_id).err(),
    })
}

/// The POST for a target.
struct Request {
    url: String,
    headers: Vec<(&'static str, String)>,
    /// How the prompt names where it goes.
    destination: String,
}

impl Request {
    /// A GitHub target without `GITHUB_TOKEN` fails here, after the local gates (`auth`,
    /// exit 4, as a missing model key).
    fn to(target: &Target) -> Result<Request, Unsent> {
        let json = ("content-type", "application/json".to_string());
        match target {
            Target::Endpoint(url) => Ok(Request {
                url: url.clone(),
                headers: vec![json],
                destination: url.clone(),
            }),
            Target::GitHub { api, repo, token } => {
                let token = token.as_ref().ok_or_else(|| {
                    Unsent::from(ModelError {
                        attempts: 0,
                        ..ModelError::new(
                            ErrorKind::Auth,
                            "--to github needs a credential: set GITHUB_TOKEN (a token that may \
create issues in the repository); nothing was sent",
                        )
                    })
                })?;
                Ok(Request {
                    url: format!("{api}/repos/{repo}/issues"),
                    headers: vec![
                        json,
                        ("accept", "application/vnd.github+json".to_string()),
                        ("x-github-api-version", "2022-11-28".to_string()),
                        ("authorization", format!("Bearer {}", token.expose())),
                    ],
                    destination: format!("a new issue in github.com/{repo}"),
                })
            }
        }
    }
}

/// POSTs the payload, with retries; the answer's body on a 2xx.
fn deliver(
    request: &Request,
    bytes: &[u8],
    args: &SendArgs,
    env: &Env,
) -> Result<Result<Vec<u8>, ModelError>, Failure> {
    // Room for every attempt and its backoff; saturating, whatever the flags say.
    let deadline = args
        .timeout
        .saturating_mul(args.retries.saturating_add(1))
        .saturating_mul(2);
    let policy = RetryPolicy::from_env(args.retries, args.timeout, deadline, env);
    let http = crate::net::Client::new(crate::net::Options::new(args.timeout))?;
    let result = crate::net::block_on(
        policy.run(|t| model::post(&http, &request.url, &request.headers, bytes, t)),
    )?;
    Ok(result.map(|(_, answer)| answer))
}

/// The draft's transcript: `transcript_ref.session_file`, else
/// `<config>/projects/<project_dir_key>/<source_session_id>.jsonl`.
fn transcript_path(draft: &Draft, config: &std::path::Path) -> Option<PathBuf> {
    let r = draft.transcript_ref.as_ref()?;
    if let Some(file) = &r.session_file {
        return Some(PathBuf::from(file));
    }
    let key = r
        .project_dir_key
        .as_deref()
        .filter(|k| store::is_safe_id(k))?;
    let session = draft
        .source_session_id
        .as_deref()
        .filter(|s| store::is_safe_id(s))?;
    Some(
        config
            .join("projects")
            .join(key)
            .join(format!("{session}.jsonl")),
    )
}

/// Shows on the terminal exactly what will be sent (the transcript by its size and first
/// lines), its texts without control characters, and asks. Only "y" or "yes" consents.
fn ask_consent(body: &Value, attachment: &Attachment, destination: &str) -> Result<bool, Failure> {
    let mut shown = body.clone();
    if let Some(text) = body.get("transcript").and_then(Value::as_str) {
        let preview: String = text.lines().take(3).collect::<Vec<_>>().join("\n");
        shown["transcript"] = Value::from(format!(
            "<{} bytes: {} of {} messages from {}; first lines:>\n{preview}",
            text.len(),
            attachment.kept,
            attachment.total,
            attachment.path.as_deref().unwrap_or("?")
        ));
    }
    let safe = for_display(&shown);
    let mut err = std::io::stderr().lock();
    let pretty = serde_json::to_string_pretty(&safe).unwrap_or_default();
    let _ = writeln!(
        err,
        "This will be sent to {}:\n{pretty}",
        sanitize(destination)
    );
    if safe != shown {
        let _ = writeln!(
            err,
            "(control characters are not shown here; they are sent as written)"
        );
    }
    if let Some(reason) = attachment.withheld {
        let _ = writeln!(err, "(the transcript is withheld: {reason})");
    }
    let _ = write!(err, "Send it? [y/N] ");
    let _ = err.flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::environment(format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// Prose for the man page.
#[cfg(feature = "docs")]
pub const MAN_SECTIONS: &[(&str, &str)] = &[
    (
        "DRAFTS",
        "Drafts live where Claude Code keeps them, <config>/feedback/drafts/<draft_id>.json \
(config: $CLAUDE_CONFIG_DIR, default ~/.claude), as pretty JSON, mode 0600, written \
atomically. Fields: draft_id, created_at, source_session_id, cwd (at most 512 characters), \
model (64), cli_version (32), os (64), type (bug, idea, missing_capability), title (200), \
details (10,240), area (64), trigger (tool_error, user_frustration, missing_capability, \
model_judgment, exit_nudge), transcript_ref {session_file, message_range, project_dir_key}, \
status (queued, submitted, discarded, expired), request_ids (strings; the last 5 are kept), and \
the optional failure_mode, task_category, effort, thinking_type, thinking_budget, \
message_count, assistant_turn_count, subagent_count. A draft holds facts, the user's own words, \
a minimal reproduction and traceable evidence; no invented feelings, secrets or unverified root \
causes.

Claude Code 2.1.332 checks each draft against its own schema and silently skips one that fails, \
so every draft queue writes is one it lists: cwd, model, cli_version and os are always strings \
(never null), request_ids always an array, trigger always set, area absent rather than null, \
transcript_ref an object with session_file (message_range a pair or null) or null. What the \
caller does not give is filled in: cwd from the project, os from this platform, model, \
cli_version and source_session_id from the project's newest transcript (the named session's \
when there is one; model from its last assistant record, cli_version from its records' \
version), transcript_ref from that transcript (project_dir_key the project's slug), trigger \
model_judgment; empty strings otherwise. A draft that still names no session is written with a \
warning: the client lists only drafts that do. feedback list reads drafts the client wrote.",
    ),
    (
        "QUEUE, LIST, SHOW, DISCARD",
        "queue: the draft fields as one JSON object on stdin (unknown fields are refused), or \
flags, which win; with a hook payload on stdin, the draft fields beside its own are taken \
(others are ignored), and its session_id, cwd and transcript_path fill source_session_id, cwd \
and transcript_ref where those are not given. type, title and details are required; os defaults \
to this platform. The tool fills draft_id (a UUID), created_at and status. Every field and \
limit is checked (exit 2, reason invalid_draft); a draft over 32,768 bytes is refused (exit 2, \
reason too_large) and nothing is written. After writing, at most 10 drafts are kept: the \
oldest by created_at are evicted and reported. At most 10 drafts may be queued per source \
session (exit 1, reason session_limit; counted in $XDG_STATE_HOME/dreamkit/feedback-queues.json). \
feedbackDrafts: off in settings turns queue off (exit 1, reason disabled); notify (the default) \
prints one line on stderr (feedback: draft queued: TITLE (review with `feedback show ID`)), quiet \
does not. Prints {draft_id, path, evicted}.

list: first deletes drafts whose created_at is over 30 days old, then prints {drafts, \
expired}, newest first, each draft with its path; a file that is not a readable draft is \
listed as {draft_id, path, error}, never fatal.

show ID prints the draft; discard ID deletes it ({discarded: true}). An unknown ID exits 1 \
(reason not_found); an ID that is not letters, digits, - and _ is bad input. A draft file that \
cannot be read or is not a regular file (a FIFO, device, socket or directory) is exit 3, \
{\"error\": {\"kind\": \"environment\", \"reason\", \"message\"}} with reason permission or \
not_a_file, never waited on; one that does not hold a draft is exit 3 with reason corrupt.

show and list print every text of a draft (title, details, unknown fields too) with its control \
characters (ESC, BEL, the other C0 and C1 controls, but newline and tab) removed, so a draft \
cannot retitle, clear or fake the terminal; the file keeps the user's bytes, and send sends them.",
    ),
    (
        "SENDING",
        "send shows what will be sent and asks (or needs --yes), posts the draft to an endpoint \
or opens a GitHub issue, and deletes the draft only when the server took it; feedback-send(1) \
has the details and its exit codes.",
    ),
    (
        "send/SENDING",
        "send ID --endpoint URL never sends without a person's consent: on a terminal it shows \
what will be sent (the transcript by size, message count and first lines; texts without their \
control characters, with a line saying so when some were removed from view) and asks; \
otherwise --yes is required, and without it send exits 2 (reason consent_required) with the \
draft kept. The POST body is {description, type, title, details, area, trigger, draft_id, \
version, platform, transcript?}. On 2xx the draft is deleted and send prints {sent: true, \
feedback_id, draft_id, transcript}, feedback_id from the answer's feedback_id (or id); when \
the draft cannot be deleted afterwards, the same document also holds error {kind, reason?, \
message} and send exits 3 (do not send it again).

Once the draft is found, every failure keeps it and prints {sent: false, queued: true, \
draft_id, error}. On a network error, a timeout, 401/403, 413, another 4xx or 5xx (after \
--retries for 429, 5xx, resets and timeouts) error is {kind, status, message, attempts} and \
send exits 4; kind is one of network, timeout, auth, too_large, rejected, rate_limited, \
overloaded, server, malformed_response. A local refusal gives error {kind, reason?, message} \
and its own exit code: the transcript file (3), the payload over 8 MiB minus 64 KiB (2, \
too_large), no consent (2, consent_required). A usage error (a bad --endpoint, --to or \
GITHUB_API_URL) comes before the draft is read and prints {error} alone.

--with-transcript attaches the draft's session transcript (--transcript, which needs \
--with-transcript, else transcript_ref.session_file, else \
<config>/projects/<project_dir_key>/<source_session_id>.jsonl). A transcript so named that is \
missing, unreadable or not a regular file (a FIFO, device, socket or directory) is exit 3, \
error kind environment, reason not_found, permission or not_a_file, and nothing is sent. The \
transcript is withheld (and the feedback sent without it, the reason in transcript.withheld) \
when the draft names none (missing), when any record names another session than the draft's \
source_session_id (session_mismatch), or when it contains a third-party marker (msg_bdrk_ msg_vrtx_ bolt-inf- \
toolu_bdrk_ toolu_vrtx_ srvtoolu_bdrk_ srvtoolu_vrtx_ req_bdrk_ req_vrtx_ or \
\"type\":\"hybrid-organization\"; third_party). At most the last 4 MiB of the file are read, \
and its records are kept newest first within a payload of 8 MiB minus 64 KiB; when some are \
dropped the transcript starts with the line \"transcript_truncated: kept N of M messages\", M \
counting the records read.

--to github:OWNER/REPO creates a GitHub issue instead (POST $GITHUB_API_URL/repos/OWNER/REPO/issues, \
default https://api.github.com, with GITHUB_TOKEN); the transcript is never attached there, \
and feedback_id is the issue number. Without GITHUB_TOKEN nothing is sent and send exits 4 \
with error kind auth (status null, attempts 0), after the local checks and before asking.",
    ),
    (
        "send/EXIT STATUS",
        "0 sent: the server answered 2xx and the draft was deleted.

1 declined at the prompt (the draft is kept), or no draft has that ID (reason not_found).

2 usage error or bad input; also no consent: stdin is not a terminal and --yes was not given \
(reason consent_required, the draft kept), or a payload over the budget (reason too_large).

3 local environment failure: a drafts directory that cannot be read or written; a transcript \
that is missing, or a draft or transcript file that is unreadable or not a regular file \
(reason not_found, permission or not_a_file); a sent draft that could not be deleted.

4 the send failed after retries (network, timeout, auth, too_large, rejected, rate_limited, \
overloaded, server, malformed_response), or GITHUB_TOKEN is missing (auth): sent false, \
queued true, the draft kept.",
    ),
    (
        "EXAMPLES",
        "Queue a draft, review it, then discard it:

  id=$(echo '{\"type\":\"bug\",\"title\":\"gate crashes on a FIFO\",\"details\":\"Steps: ...\"}' | feedback queue | jq -r .draft_id); feedback show \"$id\" && feedback discard \"$id\"

List the drafts' ids and titles:

  feedback list | jq -c '.drafts[] | {draft_id, title}'",
    ),
    (
        "*/ENVIRONMENT",
        "CLAUDE_CONFIG_DIR, HOME: the drafts are under $CLAUDE_CONFIG_DIR/feedback/drafts \
(default ~/.claude/feedback/drafts), as Claude Code keeps them. XDG_STATE_HOME: the per-session queue counts \
($XDG_STATE_HOME/dreamkit/feedback-queues.json). send: GITHUB_TOKEN (for --to github:...; \
never printed) and GITHUB_API_URL (default https://api.github.com).",
    ),
    (
        "queue/EXAMPLES",
        "Queue a draft from flags, and print its id:

  feedback queue --type idea --title 'recap should name the branch' --details 'Seen on main.' | jq -r .draft_id",
    ),
    (
        "list/EXAMPLES",
        "The drafts waiting, newest first:

  feedback list | jq -r '.drafts[] | \"\\(.draft_id) \\(.title)\"'",
    ),
    (
        "show/EXAMPLES",
        "One draft, whole:

  id=$(feedback list | jq -r '.drafts[0].draft_id // \"none\"'); feedback show \"$id\"",
    ),
    (
        "discard/EXAMPLES",
        "Discard every draft older than the newest:

  feedback list | jq -r '.drafts[1:][].draft_id' | while read -r id; do feedback -n discard \"$id\"; done",
    ),
    (
        "send/EXAMPLES",
        "Send a draft to your own endpoint (asks first on a terminal; --yes in scripts):

  id=$(feedback list | jq -r '.drafts[0].draft_id // empty'); [ -z \"$id\" ] || feedback send \"$id\" --endpoint http://127.0.0.1:9/feedback --yes --retries 0 --timeout 2s; exit 0",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The document, the exit code and the line of a report.
    fn printed<R: Report>(report: &R) -> (String, u8, Option<String>) {
        (
            serde_json::to_string(report).unwrap(),
            report.exit().code(),
            report.note(),
        )
    }

    #[test]
    fn every_report_prints_its_contract_and_decides_its_exit() {
        let queue = [
            (
                QueueReport::Queued {
                    draft_id: "d1".into(),
                    path: "/c/d1.json".into(),
                    evicted: vec![],
                },
                r#"{"draft_id":"d1","path":"/c/d1.json","evicted":[]}"#,
                0,
            ),
            (
                QueueReport::Refused {
                    queued: Is,
                    reason: Reason::Disabled,
                    source_session_id: None,
                },
                r#"{"queued":false,"reason":"disabled"}"#,
                1,
            ),
            (
                QueueReport::Refused {
                    queued: Is,
                    reason: Reason::SessionLimit,
                    source_session_id: Some("s1".into()),
                },
                r#"{"queued":false,"reason":"session_limit","source_session_id":"s1"}"#,
                1,
            ),
        ];
        for (report, json, code) in queue {
            assert_eq!(printed(&report).0, json);
            assert_eq!(printed(&report).1, code, "{json}");
        }
        let (json, code, note) = printed(&ShowReport::NotFound(NotFound::of("d1")));
        assert_eq!(
            (json.as_str(), code),
            (r#"{"found":false,"draft_id":"d1","reason":"not_found"}"#, 1)
        );
        assert_eq!(note.as_deref(), Some(no_draft("d1").as_str()));
        let (json, code, note) = printed(&DiscardReport::Discarded {
            discarded: Is,
            draft_id: "d1".into(),
        });
        assert_eq!(
            (json.as_str(), code, note),
            (r#"{"discarded":true,"draft_id":"d1"}"#, 0, None)
        );
        let send = [
            (
                SendReport::Declined {
                    sent: Is,
                    queued: Is,
                    draft_id: "d1".into(),
                    reason: Reason::Declined,
                },
                r#"{"sent":false,"queued":true,"draft_id":"d1","reason":"declined"}"#,
                1,
            ),
            (
                SendReport::NotSent {
                    sent: Is,
                    queued: Is,
                    draft_id: "d1".into(),
                    error: Unsent::from(ModelError {
                        status: Some(413),
                        ..ModelError::new(ErrorKind::InvalidRequest, "big\u{1b}[2J")
                    }),
                },
                r#"{"sent":false,"queued":true,"draft_id":"d1","error":{"kind":"too_large","status":413,"message":"big","attempts":1}}"#,
                4,
            ),
            (
                SendReport::NotSent {
                    sent: Is,
                    queued: Is,
                    draft_id: "d1".into(),
                    error: Unsent::Local(Failure::environment("gone").with_reason("not_found")),
                },
                r#"{"sent":false,"queued":true,"draft_id":"d1","error":{"kind":"environment","reason":"not_found","message":"gone"}}"#,
                3,
            ),
            (
                SendReport::Sent {
                    sent: Is,
                    feedback_id: Value::from("fb1"),
                    draft_id: "d1".into(),
                    transcript: Box::default(),
                    url: None,
                    error: Some(Failure::environment("cannot delete")),
                },
                r#"{"sent":true,"feedback_id":"fb1","draft_id":"d1","transcript":{"attached":false,"kept":0,"total":0,"truncated":false},"error":{"kind":"environment","message":"cannot delete"}}"#,
                3,
            ),
        ];
        for (report, json, code) in send {
            let (printed_json, printed_code, note) = printed(&report);
            assert_eq!(printed_json, json);
            assert_eq!(printed_code, code, "{json}");
            assert!(note.is_some(), "{json}");
        }
    }

    #[test]
    fn github_names() {
        for good in ["octo", "my.repo", "a-b_c", "dreamkit.rs"] {
            assert!(is_github_name(good), "{good}");
        }
        for bad in ["", ".", "..", "a b", "a%2f", "x?y", &"n".repeat(101)] {
            assert!(!is_github_name(bad), "{bad:?}");
        }
    }
}
