//! `feedback`: local feedback drafts a person reviews before anything leaves the machine.

pub mod send;
pub mod store;

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::Parser;
use serde_json::{json, Value};

use crate::claude::paths::{
    check_location, config_dir, config_source, home_dir, project_dir, state_home,
};
use crate::claude::settings::FeedbackDrafts;
use crate::claude::{Env, HookPayload, Settings};
use crate::cli::duration::parse_duration;
use crate::cli::{CommonArgs, Diag, Exit, Failure, Input, Outcome, Tool};
use crate::files::{create_private_dir, write_atomic};
use crate::model::{ErrorKind, ModelError};
use send::{attach, deliver, github_issue, payload, target, Attachment, Target, PAYLOAD_BUDGET};
use store::{Draft, Listed, NewDraft, Store, TranscriptRef, MAX_QUEUES_PER_SESSION};

/// Queue, review and send feedback drafts.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "feedback",
    version,
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
    List,
    /// Print one draft
    Show {
        /// The draft's id
        id: String,
    },
    /// Send a draft to an endpoint or as a GitHub issue, after consent
    Send(SendArgs),
    /// Delete a draft
    Discard {
        /// The draft's id
        id: String,
    },
}

#[derive(Debug, Clone, clap::Args)]
pub struct QueueArgs {
    /// bug, idea or missing_capability
    #[arg(long = "type", value_name = "TYPE")]
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
    /// tool_error, user_frustration, missing_capability, model_judgment or exit_nudge
    #[arg(long)]
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
    #[arg(long, value_name = "PATH")]
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

impl Tool for Args {
    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn run(self, diag: &Diag) -> Result<Outcome, Failure> {
        let env = Env::from_process();
        let home = home_dir(&env);
        let config = config_dir(&env, home.as_deref())?;
        // Draft paths are printed and then used by people and scripts: refuse a config dir
        // the JSON could not name exactly, before anything is written.
        check_location(config_source(&env), &config)?;
        let store = Store::new(&config);
        match &self.command {
            Subcommand::Queue(args) => queue(args, &store, &config, &env, home.as_deref(), diag),
            Subcommand::List => list(&store),
            Subcommand::Show { id } => match store.read(id)? {
                Some(draft) => Ok(Outcome::new(Exit::Yes, &draft)),
                None => Ok(not_found(id)),
            },
            Subcommand::Discard { id } => {
                if store.delete(id)? {
                    Ok(Outcome::new(
                        Exit::Yes,
                        &json!({"discarded": true, "draft_id": id}),
                    ))
                } else {
                    Ok(Outcome::new(
                        Exit::No,
                        &json!({"discarded": false, "draft_id": id, "reason": "not_found"}),
                    )
                    .with_note(format!("no draft {id} (`feedback list` shows the drafts)")))
                }
            }
            Subcommand::Send(args) => send_draft(args, &store, &config, &env, diag),
        }
    }
}

/// A path for the JSON output. `json!` on a `Path` panics on bytes that are not UTF-8; the
/// config dir and the hook's paths are checked at input, so only a foreign file dropped into
/// the drafts dir can have such a name, and `list` shows it with the bytes replaced rather
/// than fail the whole listing.
fn path_text(path: &std::path::Path) -> String {
    path.to_string_lossy().into_owned()
}

fn not_found(id: &str) -> Outcome {
    Outcome::new(
        Exit::No,
        &json!({"found": false, "draft_id": id, "reason": "not_found"}),
    )
    .with_note(format!("no draft {id} (`feedback list` shows the drafts)"))
}

fn queue(
    args: &QueueArgs,
    store: &Store,
    config: &std::path::Path,
    env: &Env,
    home: Option<&std::path::Path>,
    diag: &Diag,
) -> Result<Outcome, Failure> {
    let mut new = match Input::from_stdin()? {
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
            NewDraft {
                source_session_id: hook.session_id,
                cwd,
                transcript_ref: session_file.map(|file| TranscriptRef {
                    session_file: Some(file),
                    ..TranscriptRef::default()
                }),
                ..NewDraft::default()
            }
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
        return Ok(Outcome::new(
            Exit::No,
            &json!({"queued": false, "reason": "disabled"}),
        ));
    }
    // Validation and the size cap come before anything is written.
    let draft = new.into_draft(SystemTime::now())?;
    let bytes = Store::render(&draft)?;
    let counts = QueueCounts::at(env, home)?;
    let session = draft.source_session_id.clone();
    if let Some(session) = &session {
        if counts.get(session)? >= MAX_QUEUES_PER_SESSION {
            return Ok(Outcome::new(
                Exit::No,
                &json!({"queued": false, "reason": "session_limit", "source_session_id": session}),
            ));
        }
    }
    let path = store.write(&draft.draft_id, &bytes)?;
    let evicted = store.evict()?;
    if let Some(session) = &session {
        if let Err(e) = counts.increment(session) {
            diag.warn(&format!("cannot record the queue count: {e}"));
        }
    }
    if mode == FeedbackDrafts::Notify {
        diag.warn(&format!(
            "feedback draft queued: {} (review with `feedback show {}`)",
            draft.title, draft.draft_id
        ));
    }
    Ok(Outcome::new(
        Exit::Yes,
        &json!({"draft_id": draft.draft_id, "path": path_text(&path), "evicted": evicted}),
    ))
}

fn list(store: &Store) -> Result<Outcome, Failure> {
    let (remaining, expired) = store.expire(store.list()?, SystemTime::now())?;
    let drafts: Vec<Value> = remaining
        .into_iter()
        .map(|item| match item {
            Listed::Draft(draft, path) => {
                let mut value = serde_json::to_value(&*draft).unwrap_or(Value::Null);
                value["path"] = json!(path_text(&path));
                value
            }
            Listed::Broken {
                draft_id,
                path,
                error,
            } => json!({"draft_id": draft_id, "path": path_text(&path), "error": error}),
        })
        .collect();
    Ok(Outcome::new(
        Exit::Yes,
        &json!({"drafts": drafts, "expired": expired}),
    ))
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
        match crate::files::read_regular(&self.path) {
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
        counts.insert(session.to_string(), json!(n + 1));
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

fn send_draft(
    args: &SendArgs,
    store: &Store,
    config: &std::path::Path,
    env: &Env,
    diag: &Diag,
) -> Result<Outcome, Failure> {
    let Some(draft) = store.read(&args.id)? else {
        return Ok(not_found(&args.id));
    };
    let target = target(args, env)?;
    let mut body = match &target {
        Target::Endpoint(_) => payload(&draft),
        Target::GitHub { .. } => github_issue(&draft),
    };
    let attachment = match (&target, args.with_transcript) {
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
                .or_else(|| transcript_path(&draft, config));
            let base = serde_json::to_vec(&body).map_or(0, |b| b.len());
            let a = attach(&draft, path.as_deref(), base);
            if let Some(reason) = a.withheld {
                diag.warn(&format!("transcript withheld: {reason}"));
            }
            if let Some(text) = &a.text {
                body["transcript"] = json!(text);
            }
            a
        }
    };
    let bytes = serde_json::to_vec(&body).map_err(|e| Failure::environment(e.to_string()))?;
    if bytes.len() > PAYLOAD_BUDGET {
        return Err(Failure::BadInput {
            reason: Some("too_large"),
            message: format!(
                "the payload is {} bytes; at most {PAYLOAD_BUDGET}",
                bytes.len()
            ),
        });
    }

    let destination = match &target {
        Target::Endpoint(url) => url.clone(),
        Target::GitHub { repo, .. } => format!("a new issue in github.com/{repo}"),
    };
    if !args.yes {
        let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        if !terminal {
            return Err(Failure::BadInput {
                reason: Some("consent_required"),
                message: "nothing sent: without a terminal to ask on, pass --yes to consent (the draft is kept)".into(),
            });
        }
        if !ask_consent(&body, &attachment, &destination)? {
            return Ok(Outcome::new(
                Exit::No,
                &json!({"sent": false, "queued": true, "draft_id": draft.draft_id, "reason": "declined"}),
            ));
        }
    }

    let result = deliver(&target, &bytes, args.timeout, args.retries, env)?;
    match result {
        Ok((_, answer)) => {
            let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
            let feedback_id = match &target {
                Target::Endpoint(_) => answer
                    .get("feedback_id")
                    .or_else(|| answer.get("id"))
                    .cloned(),
                Target::GitHub { .. } => answer.get("number").cloned(),
            };
            store.delete(&draft.draft_id)?;
            let mut out = json!({
                "sent": true,
                "feedback_id": feedback_id.unwrap_or(Value::Null),
                "draft_id": draft.draft_id,
                "transcript": attachment,
            });
            if let Some(url) = answer.get("html_url") {
                out["url"] = url.clone();
            }
            Ok(Outcome::new(Exit::Yes, &out))
        }
        Err(error) => {
            diag.warn(&format!("not sent, the draft is kept: {}", error.message));
            Ok(Outcome::new(Exit::Remote, &send_error(&draft, &error)))
        }
    }
}

/// `{sent: false, queued: true, error: {kind, status, message, attempts}}`: 413 is
/// `too_large`, another refusal of the request `rejected`, the rest as the client typed it.
fn send_error(draft: &Draft, error: &ModelError) -> Value {
    let kind = match (error.kind, error.status) {
        (_, Some(413)) => "too_large",
        (ErrorKind::InvalidRequest, _) => "rejected",
        (kind, _) => kind.as_str(),
    };
    json!({
        "sent": false,
        "queued": true,
        "draft_id": draft.draft_id,
        "error": {"kind": kind, "status": error.status, "message": error.message, "attempts": error.attempts},
    })
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
/// lines) and asks. Only "y" or "yes" consents.
fn ask_consent(body: &Value, attachment: &Attachment, destination: &str) -> Result<bool, Failure> {
    let mut shown = body.clone();
    if let Some(text) = body.get("transcript").and_then(Value::as_str) {
        let preview: String = text.lines().take(3).collect::<Vec<_>>().join("\n");
        shown["transcript"] = json!(format!(
            "<{} bytes: {} of {} messages from {}; first lines:>\n{preview}",
            text.len(),
            attachment.kept,
            attachment.total,
            attachment.path.as_deref().unwrap_or("?")
        ));
    }
    let mut err = std::io::stderr().lock();
    let pretty = serde_json::to_string_pretty(&shown).unwrap_or_default();
    let _ = writeln!(err, "This will be sent to {destination}:\n{pretty}");
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
pub const MAN_SECTIONS: &[(&str, &str)] = &[
    (
        "DRAFTS",
        "Drafts live where Claude Code keeps them, <config>/feedback/drafts/<draft_id>.json \
(config: $CLAUDE_CONFIG_DIR, default ~/.claude), as pretty JSON, mode 0600, written \
atomically. Fields: draft_id, created_at, source_session_id, cwd (at most 512 characters), \
model (64), cli_version (32), os (64), type (bug, idea, missing_capability), title (200), \
details (10,240), area (64), trigger (tool_error, user_frustration, missing_capability, \
model_judgment, exit_nudge), transcript_ref {session_file, message_range, project_dir_key}, \
status (queued, submitted, discarded, expired). A draft holds facts, the user's own words, a \
minimal reproduction and traceable evidence; no invented feelings, secrets or unverified root \
causes.",
    ),
    (
        "QUEUE, LIST, SHOW, DISCARD",
        "queue: the draft fields as one JSON object on stdin (unknown fields are refused), or \
flags, which win; with a hook payload on stdin, its session_id, cwd and transcript_path fill \
source_session_id, cwd and transcript_ref. type, title and details are required; os defaults \
to this platform. The tool fills draft_id (a UUID), created_at and status. Every field and \
limit is checked (exit 2, reason invalid_draft); a draft over 32,768 bytes is refused (exit 2, \
reason too_large) and nothing is written. After writing, at most 10 drafts are kept: the \
oldest by created_at are evicted and reported. At most 10 drafts may be queued per source \
session (exit 1, reason session_limit; counted in $XDG_STATE_HOME/dreamkit/feedback-queues.json). \
feedbackDrafts: off in settings turns queue off (exit 1, reason disabled); notify (the default) \
prints one line on stderr, quiet does not. Prints {draft_id, path, evicted}.

list: first deletes drafts whose created_at is over 30 days old, then prints {drafts, \
expired}, newest first, each draft with its path; a file that is not a readable draft is \
listed as {draft_id, path, error}, never fatal.

show ID prints the draft; discard ID deletes it ({discarded: true}). An unknown ID exits 1 \
(reason not_found); an ID that is not letters, digits, - and _ is bad input.",
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
what will be sent (the transcript by size, message count and first lines) and asks; \
otherwise --yes is required, and without it send exits 2 (reason consent_required) with the \
draft kept. The POST body is {description, type, title, details, area, trigger, draft_id, \
version, platform, transcript?}. On 2xx the draft is deleted and send prints {sent: true, \
feedback_id, draft_id, transcript}, feedback_id from the answer's feedback_id (or id). On a \
network error, a timeout, 401/403, 413, another 4xx or 5xx (after --retries for 429, 5xx, \
resets and timeouts) the draft is kept and send prints {sent: false, queued: true, error: \
{kind, status, message, attempts}} and exits 4; kind is one of network, timeout, auth, \
too_large, rejected, rate_limited, overloaded, server.

--with-transcript attaches the draft's session transcript (--transcript, else \
transcript_ref.session_file, else <config>/projects/<project_dir_key>/<source_session_id>.jsonl). \
It is withheld (and the feedback sent without it, the reason in transcript.withheld) when the \
file is missing, when any record names another session than the draft's source_session_id \
(session_mismatch), or when it contains a third-party marker (msg_bdrk_ msg_vrtx_ bolt-inf- \
toolu_bdrk_ toolu_vrtx_ srvtoolu_bdrk_ srvtoolu_vrtx_ req_bdrk_ req_vrtx_ or \
\"type\":\"hybrid-organization\"; third_party). At most the last 4 MiB of the file are read, \
and its records are kept newest first within a payload of 8 MiB minus 64 KiB; when some are \
dropped the transcript starts with the line \"transcript_truncated: kept N of M messages\", M \
counting the records read.

--to github:OWNER/REPO creates a GitHub issue instead (POST $GITHUB_API_URL/repos/OWNER/REPO/issues, \
default https://api.github.com, with GITHUB_TOKEN); the transcript is never attached there, \
and feedback_id is the issue number.",
    ),
    (
        "send/EXIT STATUS",
        "0 sent: the server answered 2xx and the draft was deleted.

1 declined at the prompt (the draft is kept), or no draft has that ID (reason not_found).

2 usage error or bad input; also no consent: stdin is not a terminal and --yes was not given \
(reason consent_required, the draft kept).

3 local environment failure, such as a drafts directory that cannot be read or written.

4 the send failed after retries (network, timeout, auth, too_large, rejected, rate_limited, \
overloaded, server): sent false, queued true, the draft kept. Also --to github without \
GITHUB_TOKEN (error kind auth, reason no_credential), before any request.",
    ),
    (
        "EXAMPLES",
        "Queue a draft, review it, then discard it:

  id=$(echo '{\"type\":\"bug\",\"title\":\"gate crashes on a FIFO\",\"details\":\"Steps: ...\"}' | feedback queue | jq -r .draft_id); feedback show \"$id\" && feedback discard \"$id\"

List the drafts' ids and titles:

  feedback list | jq -c '.drafts[] | {draft_id, title}'",
    ),
];
