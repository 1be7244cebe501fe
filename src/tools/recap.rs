//! `recap`: the away summary and `/recap` of a session, in under 40 words. Context comes from
//! the end of the transcript only (the backward reader), so a 1 GB transcript costs what a
//! 1 MB one does.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use clap::Parser;
use schemars::JsonSchema;
use serde::Serialize;

use crate::claude::paths::ProjectHints;
use crate::claude::records::{self, AwaySummary, ClientFields};
use crate::claude::transcript::{context_line, BackwardReader, Item, Record};
use crate::claude::{Env, Settings};
use crate::cli::duration::{count, parse_duration};
use crate::cli::failure::credentials_later;
use crate::cli::failure::io_reason;
use crate::cli::text::sanitize;
use crate::cli::time::{epoch_ms, parse_rfc3339, rfc3339};
use crate::cli::{
    signals, CommonArgs, Context, Delivery, ErrorBody, Exit, Failure, LocationArgs, Report, Tool,
};
use crate::files::append_undoable;
use crate::model::{self, Client, ErrorKind, ModelArgs, Request, Tier, Usage};

/// The recent conversation sent to the model: at most this many messages.
pub const CONTEXT_MESSAGES: usize = 30;
/// How far back from the end the reader may go, whatever the file's size.
pub const SCAN_BUDGET_BYTES: u64 = 8 * 1024 * 1024;
/// Each message in the context is cut to this many characters.
const MESSAGE_CHARS: usize = 1500;
/// The summary is capped at this many characters after cleaning.
pub const MAX_TEXT_CHARS: usize = 400;
/// Room for 40 words and a little slack; the request must stay small.
pub const MAX_TOKENS: u32 = 200;

/// Summarise where a session stands, in under 40 words.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "recap",
    version = crate::cli::VERSION,
    about = "Away summary / /recap of a session in under 40 words",
    long_about = "Summarise where a Claude Code session stands, in under 40 words: the task \
at a high level and the concrete next step. By default (/recap) it prints the summary and \
writes nothing. With --auto (the away summary) it first applies the away-summary gates, then \
appends an away_summary record to the transcript, as Claude Code does."
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Transcript to summarise [default: the hook payload's transcript_path]
    #[arg(long, value_name = "PATH")]
    pub transcript: Option<PathBuf>,
    #[command(flatten)]
    pub location: LocationArgs,
    /// Away-summary mode: apply the gates, then append the summary to the transcript
    #[arg(long)]
    pub auto: bool,
    /// Apply the gates (with --auto) and say what would be asked and written: no request,
    /// no credential needed, nothing written (status dry-run, exit 0)
    #[arg(long)]
    pub dry_run: bool,
    /// How long the user has been away [default: since the transcript's last record]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "away_ms")]
    pub away: Option<Duration>,
    /// --away in milliseconds
    #[arg(long, value_name = "MS")]
    pub away_ms: Option<u64>,
    /// Least time away before a summary (raised to at least 30s) [default: 3m]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "delay_ms")]
    pub delay: Option<Duration>,
    /// --delay in milliseconds [default: 180000]
    #[arg(long, value_name = "MS")]
    pub delay_ms: Option<u64>,
    /// Prompt-cache lifetime: the delay is at most 0.8 of it [default: 1h]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "cache_ttl_ms")]
    pub cache_ttl: Option<Duration>,
    /// --cache-ttl in milliseconds [default: 3600000]
    #[arg(long, value_name = "MS")]
    pub cache_ttl_ms: Option<u64>,
    /// Age of the prompt cache [default: since the last assistant record]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "cache_age_ms")]
    pub cache_age: Option<Duration>,
    /// --cache-age in milliseconds
    #[arg(long, value_name = "MS")]
    pub cache_age_ms: Option<u64>,
    /// Text the user has typed but not sent; a non-empty draft skips the summary
    #[arg(long, value_name = "TEXT")]
    pub draft: Option<String>,
    /// Work is still running (tools, background tasks): skip
    #[arg(long)]
    pub pending_work: bool,
    /// The account is rate-limited: skip
    #[arg(long)]
    pub rate_limited: bool,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// The default `--delay`: three minutes.
const DEFAULT_DELAY_MS: u64 = 180_000;
/// The default `--cache-ttl`: one hour.
const DEFAULT_CACHE_TTL_MS: u64 = 3_600_000;

/// Milliseconds, saturating.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Args {
    /// `--away` or `--away-ms` (they conflict), in milliseconds.
    pub fn away_ms(&self) -> Option<u64> {
        self.away.map(millis).or(self.away_ms)
    }

    /// `--delay` or `--delay-ms`, in milliseconds.
    pub fn delay_ms(&self) -> u64 {
        self.delay
            .map(millis)
            .or(self.delay_ms)
            .unwrap_or(DEFAULT_DELAY_MS)
    }

    /// `--cache-ttl` or `--cache-ttl-ms`, in milliseconds.
    pub fn cache_ttl_ms(&self) -> u64 {
        self.cache_ttl
            .map(millis)
            .or(self.cache_ttl_ms)
            .unwrap_or(DEFAULT_CACHE_TTL_MS)
    }

    /// `--cache-age` or `--cache-age-ms`, in milliseconds.
    pub fn cache_age_ms(&self) -> Option<u64> {
        self.cache_age.map(millis).or(self.cache_age_ms)
    }
}

/// What the end of a transcript says.
#[derive(Debug, Default)]
pub struct Recent {
    /// Oldest first: `User: ...`, `Assistant: ...`, `Assistant called Bash(ls)`.
    pub messages: Vec<String>,
    pub real_turns_since_summary: usize,
    pub saw_summary: bool,
    /// The last user, assistant or away_summary record is an away_summary.
    pub ends_with_summary: bool,
    pub last_uuid: Option<String>,
    pub session_id: Option<String>,
    pub cwd: Option<String>,
    /// What Claude Code writes on every record, from the newest ones (for the appended
    /// record, which must read as the client's own).
    pub client: ClientFields,
    pub last_record_at: Option<SystemTime>,
    pub last_assistant_at: Option<SystemTime>,
    /// The whole file was read (not stopped by the budget or by having enough).
    pub reached_start: bool,
    pub file_len: u64,
    /// The file ended with a newline when read (no record was half-written).
    pub complete: bool,
}

impl Recent {
    /// Reads backwards until it has the context and the gate facts, or hits the budget.
    pub fn read(path: &Path) -> std::io::Result<Recent> {
        let reader = BackwardReader::open(path)?;
        let file_len = reader.file_len();
        let mut recent = Recent {
            file_len,
            complete: reader.ends_with_newline()?,
            ..Recent::default()
        };
        let mut newest_first = Vec::new();
        let mut current_message_id: Option<String> = None;
        let mut seen_conversation = false;
        recent.reached_start = true;
        for entry in reader {
            let entry = entry?;
            if file_len - entry.offset > SCAN_BUDGET_BYTES {
                recent.reached_start = false;
                break;
            }
            let Item::Record(record) = entry.item else {
                continue;
            };
            recent.note_identity(&record);
            let is_summary =
                record.kind == "system" && record.subtype.as_deref() == Some("away_summary");
            if !seen_conversation
                && (is_summary || record.kind == "user" || record.kind == "assistant")
            {
                seen_conversation = true;
                recent.ends_with_summary = is_summary;
            }
            if is_summary {
                recent.saw_summary = true;
            }
            if record.kind == "system" && record.subtype.as_deref() == Some("compact_boundary") {
                // Everything older was compacted into the summary that follows it.
                break;
            }
            if let Some((id, line)) = context_line(&record, MESSAGE_CHARS) {
                // Records of one API response share message.id: one message, blocks in order.
                let same_response = id.is_some() && id == current_message_id;
                let room = newest_first.len() < CONTEXT_MESSAGES;
                match newest_first.last_mut() {
                    Some(newer) if same_response => *newer = format!("{line}\n{newer}"),
                    _ if room => newest_first.push(line),
                    _ => {}
                }
                current_message_id = id;
            }
            if record.is_real_user_turn() && !recent.saw_summary {
                recent.real_turns_since_summary += 1;
            }
            if record.kind == "assistant"
                && recent.last_assistant_at.is_none()
                && !record.is_api_error()
            {
                recent.last_assistant_at = record.timestamp.as_deref().and_then(parse_rfc3339);
            }
            let gate_facts_known = recent.saw_summary || recent.real_turns_since_summary >= 3;
            if newest_first.len() >= CONTEXT_MESSAGES && gate_facts_known {
                recent.reached_start = false;
                break;
            }
        }
        newest_first.reverse();
        recent.messages = newest_first;
        Ok(recent)
    }

    fn note_identity(&mut self, record: &Record) {
        self.client.note(record);
        if self.last_uuid.is_none() {
            self.last_uuid.clone_from(&record.uuid);
        }
        if self.session_id.is_none() {
            self.session_id.clone_from(&record.session_id);
        }
        if self.cwd.is_none() {
            self.cwd.clone_from(&record.cwd);
        }
        if self.last_record_at.is_none() {
            self.last_record_at = record.timestamp.as_deref().and_then(parse_rfc3339);
        }
    }

    pub fn has_real_turn(&self) -> bool {
        self.messages.iter().any(|m| m.starts_with("User: "))
    }

    /// What the reading found, for `-v`.
    pub fn describe(&self, path: &Path) -> String {
        let turns = count(
            self.real_turns_since_summary as u64,
            "real user turn",
            "real user turns",
        );
        format!(
            "read {}: {} of context, {turns} {}, {}",
            path.display(),
            count(self.messages.len() as u64, "message", "messages"),
            if self.saw_summary {
                "since the last away summary"
            } else {
                "and no away summary"
            },
            if self.reached_start {
                "read to the start"
            } else {
                "read back only as far as needed"
            }
        )
    }
}

const SYSTEM_PROMPT: &str = "You write the note a person reads when they come back to a coding \
session they stepped away from. Using only the conversation you are given, say in under 40 \
words, in one or two plain sentences, what they were working on at a high level and the \
concrete next step. Address them as \"you\". No markdown, no lists, no headings, no quotes, no \
preamble such as \"Summary:\". Do not invent details that are not in the conversation.";

fn request(recent: &Recent) -> Request {
    let conversation = recent.messages.join("\n\n");
    Request::one_shot(
        SYSTEM_PROMPT,
        format!("The recent conversation, oldest first:\n\n{conversation}\n\nWrite the note."),
        MAX_TOKENS,
    )
}

/// Plain text: control characters, markdown marks, list bullets, headings, wrapping quotes and
/// line breaks removed, capped at [`MAX_TEXT_CHARS`].
pub fn clean(text: &str) -> String {
    let mut lines = Vec::new();
    for line in sanitize(text).lines() {
        let mut line = line.trim();
        line = line.trim_start_matches('#').trim_start();
        for bullet in ["- ", "* ", "+ ", "> "] {
            if let Some(rest) = line.strip_prefix(bullet) {
                line = rest;
            }
        }
        if !line.is_empty() {
            lines.push(line.to_string());
        }
    }
    let joined = lines.join(" ");
    let unmarked: String = joined
        .replace("**", "")
        .replace("__", "")
        .chars()
        .filter(|c| *c != '`')
        .collect();
    let mut text = unmarked.split_whitespace().collect::<Vec<_>>().join(" ");
    for label in ["Summary:", "Recap:", "Note:"] {
        if let Some(rest) = text.strip_prefix(label) {
            text = rest.trim_start().to_string();
        }
    }
    let quoted = text.len() >= 2
        && ((text.starts_with('"') && text.ends_with('"'))
            || (text.starts_with('“') && text.ends_with('”')));
    if quoted {
        let mut chars = text.chars();
        chars.next();
        chars.next_back();
        text = chars.as_str().trim().to_string();
    }
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((at, _)) => text[..at].trim_end().to_string(),
        None => text,
    }
}

/// What recap did, as printed: one object tagged by `status`. The variant decides the exit
/// code and the one stderr line ([`Report`]).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "status")]
pub enum RecapReport {
    /// `ok` (exit 0); `record_uuid` names the appended `away_summary` record (`--auto`).
    #[serde(rename = "ok")]
    Summary {
        text: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        record_uuid: Option<String>,
        usage: Usage,
    },
    /// `dry-run` (exit 0): what would be asked and written; no request made.
    #[serde(rename = "dry-run")]
    DryRun { message: String, usage: Usage },
    /// `no-turn` (exit 1): no real user turn in the transcript; no request made.
    #[serde(rename = "no-turn")]
    NoTurn { message: String, usage: Usage },
    /// `skipped` (exit 1): an away-summary gate said no (`--auto`); no request made.
    #[serde(rename = "skipped")]
    Skipped {
        reason: &'static str,
        message: String,
        usage: Usage,
    },
    /// `aborted`: the summary was dropped, nothing written.
    #[serde(rename = "aborted")]
    Aborted(Aborted),
    /// `api-error` (exit 4): no summary from the model (`error.kind` is the model error kind).
    #[serde(rename = "api-error")]
    ApiError {
        message: String,
        error: ErrorBody,
        usage: Usage,
    },
    /// `failed` (exit 3): the transcript or the settings could not be read, or the summary
    /// not appended (`error.reason` `not_found`, `permission`, `not_a_file` when that is why).
    #[serde(rename = "failed")]
    Failed {
        message: String,
        error: ErrorBody,
        usage: Usage,
    },
    /// The caller is wrong (exit 2, usage or bad input): `{error}` alone, as for every tool.
    #[serde(untagged)]
    Refused { error: ErrorBody },
}

/// Why a summary was dropped, tagged by `reason`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "reason")]
pub enum Aborted {
    /// The transcript changed while the summary was generated (exit 1).
    #[serde(rename = "stale")]
    Stale {
        text: String,
        message: String,
        usage: Usage,
    },
    /// SIGINT or SIGTERM (exit 130 / 143).
    #[serde(rename = "interrupted")]
    Interrupted {
        #[serde(skip)]
        signal: i32,
        error: ErrorBody,
        usage: Usage,
    },
}

const NO_TURN: &str = "no real user turn in the transcript";
const STALE: &str = "the transcript changed while the summary was written";

impl RecapReport {
    /// Where a failure belongs: the caller's mistakes are refused, the machine's are
    /// `failed`, the model's (a missing credential included) `api-error`, a signal `aborted`.
    pub fn from_failure(failure: Failure, usage: Usage) -> Self {
        let error = ErrorBody::of_failure(&failure);
        match failure {
            Failure::Usage(_) | Failure::BadInput { .. } => RecapReport::Refused { error },
            Failure::Environment { .. } => RecapReport::Failed {
                message: error.message.clone(),
                error,
                usage,
            },
            Failure::Remote { .. } => RecapReport::api_error(error, usage),
            Failure::Interrupted { signal } => RecapReport::interrupted(signal, usage),
        }
    }

    fn dry_run(message: &str) -> Self {
        RecapReport::DryRun {
            message: sanitize(message).into_owned(),
            usage: Usage::default(),
        }
    }

    fn no_turn() -> Self {
        RecapReport::NoTurn {
            message: NO_TURN.into(),
            usage: Usage::default(),
        }
    }

    fn skipped(reason: &'static str, message: &str) -> Self {
        RecapReport::Skipped {
            reason,
            message: sanitize(message).into_owned(),
            usage: Usage::default(),
        }
    }

    fn stale(text: String, usage: Usage) -> Self {
        RecapReport::Aborted(Aborted::Stale {
            text,
            message: STALE.into(),
            usage,
        })
    }

    pub fn interrupted(signal: i32, usage: Usage) -> Self {
        RecapReport::Aborted(Aborted::Interrupted {
            signal,
            error: ErrorBody::of_failure(&Failure::interrupted(signal)),
            usage,
        })
    }

    fn api_error(error: ErrorBody, usage: Usage) -> Self {
        RecapReport::ApiError {
            message: error.message.clone(),
            error,
            usage,
        }
    }
}

impl Report for RecapReport {
    fn exit(&self) -> Exit {
        match self {
            RecapReport::Summary { .. } | RecapReport::DryRun { .. } => Exit::Yes,
            RecapReport::NoTurn { .. }
            | RecapReport::Skipped { .. }
            | RecapReport::Aborted(Aborted::Stale { .. }) => Exit::No,
            RecapReport::Aborted(Aborted::Interrupted { signal, .. }) => Exit::of_signal(*signal),
            RecapReport::ApiError { .. } => Exit::Remote,
            RecapReport::Failed { .. } => Exit::Environment,
            RecapReport::Refused { .. } => Exit::Usage,
        }
    }

    /// The one stderr line that says why (none for a summary), cleaned of control characters.
    fn note(&self) -> Option<String> {
        let line = match self {
            RecapReport::Summary { .. } => return None,
            RecapReport::DryRun { message, .. } => format!("dry run: {message}"),
            RecapReport::NoTurn { message, .. } => format!("no-turn: {message}"),
            RecapReport::Skipped {
                reason, message, ..
            } => format!("skipped: {reason}: {message}"),
            RecapReport::Aborted(Aborted::Stale { message, .. }) => {
                format!("aborted: stale: {message}")
            }
            RecapReport::Aborted(Aborted::Interrupted { error, .. })
            | RecapReport::Failed { error, .. }
            | RecapReport::Refused { error } => error.message.clone(),
            RecapReport::ApiError { error, .. } => error.line(),
        };
        Some(sanitize(&line).into_owned())
    }
}

/// The away-summary gates, in order; the first that fails is the skip reason. `explain` is
/// told why each gate that passed let the summary go on.
pub fn away_gate(
    args: &Args,
    recent: &Recent,
    settings: &Settings,
    env: &Env,
    now: SystemTime,
    explain: &dyn Fn(&str),
) -> Option<(&'static str, String)> {
    const SWITCH: &str = "CLAUDE_CODE_ENABLE_AWAY_SUMMARY";
    let (enabled, source) = if env.is_truthy(SWITCH) {
        (true, SWITCH)
    } else if env.is_defined_falsy(SWITCH) {
        (false, SWITCH)
    } else {
        match settings.away_summary_enabled {
            Some(on) => (on, "awaySummaryEnabled"),
            None => (true, "the default"),
        }
    };
    if !enabled {
        return Some(("disabled", "away summaries are turned off".into()));
    }
    explain(&format!(
        "checked disabled: away summaries are on ({source})"
    ));
    // Before the turn counts: a transcript ending in a summary has no turns since it, and this
    // is the more telling reason.
    if recent.ends_with_summary {
        return Some((
            "already_summarized",
            "the last conversational record is an away summary".into(),
        ));
    }
    explain("checked already_summarized: the last conversational record is no away summary");
    let turns = count(
        recent.real_turns_since_summary as u64,
        "real user turn",
        "real user turns",
    );
    if !recent.saw_summary && recent.real_turns_since_summary < 3 && recent.reached_start {
        return Some((
            "too_few_turns",
            format!("{turns}; the first summary needs 3"),
        ));
    }
    if recent.saw_summary && recent.real_turns_since_summary < 2 {
        return Some((
            "too_few_turns",
            format!("{turns} since the last summary; needs 2"),
        ));
    }
    explain(&if recent.saw_summary {
        format!("checked too_few_turns: {turns} since the last summary (2 needed)")
    } else if recent.real_turns_since_summary >= 3 {
        format!("checked too_few_turns: {turns} (3 needed for the first summary)")
    } else {
        format!(
            "checked too_few_turns: {turns} before the {} MiB reading budget ended, so the \
             conversation counts as long enough",
            SCAN_BUDGET_BYTES / (1024 * 1024)
        )
    });
    let since = |at: Option<SystemTime>| {
        at.map(|t| epoch_ms(now).saturating_sub(epoch_ms(t)).max(0) as u64)
    };
    let ttl = args.cache_ttl_ms() as f64;
    let delay = (args.delay_ms().max(30_000) as f64).min(0.8 * ttl);
    let (away, away_source) = match args.away_ms() {
        Some(away) => (Some(away), "--away"),
        None => (since(recent.last_record_at), "since the last record"),
    };
    match away {
        Some(away) if (away as f64) < delay => {
            return Some((
                "not_away_long_enough",
                format!("away {away} ms; the delay is {delay:.0} ms"),
            ));
        }
        Some(away) => explain(&format!(
            "checked not_away_long_enough: away {away} ms ({away_source}); the delay is \
             {delay:.0} ms"
        )),
        None => explain(
            "checked not_away_long_enough: no time away known (no --away, no record with a \
             timestamp)",
        ),
    }
    let (age, age_source) = match args.cache_age_ms() {
        Some(age) => (Some(age), "--cache-age"),
        None => (
            since(recent.last_assistant_at),
            "since the last assistant record",
        ),
    };
    let limit = 0.9 * ttl;
    match age {
        Some(age) if age as f64 > limit => {
            return Some((
                "cache_cold",
                format!("cache is {age} ms old; the limit is {limit:.0} ms"),
            ));
        }
        Some(age) => explain(&format!(
            "checked cache_cold: the cache is {age} ms old ({age_source}); the limit is \
             {limit:.0} ms"
        )),
        None => explain(
            "checked cache_cold: no cache age known (no --cache-age, no assistant record with \
             a timestamp)",
        ),
    }
    if args.draft.as_deref().is_some_and(|d| !d.trim().is_empty()) {
        return Some(("draft_pending", "the user has an unsent draft".into()));
    }
    explain("checked draft_pending: no unsent draft");
    if args.pending_work {
        return Some(("pending_work", "work is still running".into()));
    }
    explain("checked pending_work: no work running");
    if args.rate_limited {
        return Some(("rate_limited", "the account is rate-limited".into()));
    }
    explain("checked rate_limited: not rate-limited; every gate passed");
    None
}

/// Appends the `away_summary` record in one `O_APPEND` write, unless the transcript changed
/// since it was read (then the summary is stale and dropped). A short or failed write is
/// undone, so the transcript never keeps half a record for Claude Code to append to.
fn append_summary(
    path: &Path,
    recent: &Recent,
    text: &str,
    session_id: Option<&str>,
) -> Result<Option<String>, Failure> {
    if !recent.complete {
        return Ok(None);
    }
    let uuid = uuid::Uuid::new_v4().to_string();
    let mut client = recent.client.clone();
    if client.session_id.is_none() {
        client.session_id = session_id.map(str::to_string);
    }
    let timestamp = rfc3339(SystemTime::now());
    let record = AwaySummary::new(&client, text, &timestamp, &uuid);
    let line = records::line(&record).map_err(|e| Failure::environment(e.to_string()))?;
    match append_undoable(path, &line, Some(recent.file_len)) {
        Ok(true) => Ok(Some(uuid)),
        Ok(false) => Ok(None),
        Err(e) => Err(Failure::Environment {
            reason: e.cause.as_ref().and_then(io_reason),
            message: format!("cannot append to {}: {e}", path.display()),
        }),
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
    type Report = RecapReport;

    fn run(self, cx: &Context) -> Result<RecapReport, Failure> {
        // A signal outside the model exchange ends the process at once; it prints the same
        // `aborted` result as one inside it.
        signals::set_documents(|signal| {
            let report = RecapReport::interrupted(signal, Usage::default());
            serde_json::to_string(&report).unwrap_or_default()
        });
        Ok(self
            .recap(cx)
            .unwrap_or_else(|failure| RecapReport::from_failure(failure, Usage::default())))
    }
}

impl Args {
    fn recap(&self, cx: &Context) -> Result<RecapReport, Failure> {
        let diag = cx.diag();
        let (_hints, hook, _envelope) = ProjectHints::gather(&self.location, cx.input()?)?;
        let transcript =
            crate::claude::hook::transcript_of(self.transcript.as_ref(), hook.as_ref())?;
        let session_id = hook.as_ref().and_then(|h| h.session_id.clone());
        let env = cx.env();
        let config = credentials_later(self.model.config(env, Tier::SmallFast))?;
        let recent = Recent::read(&transcript).map_err(|e| Failure::io("read", &transcript, &e))?;
        diag.info(&recent.describe(&transcript));
        if !recent.has_real_turn() {
            return Ok(RecapReport::no_turn());
        }
        if self.auto {
            let settings = &cx.project(&self.location)?.settings;
            let gate = away_gate(self, &recent, settings, env, SystemTime::now(), &|line| {
                diag.info(line);
            });
            if let Some((reason, message)) = gate {
                return Ok(RecapReport::skipped(reason, &message));
            }
        } else {
            diag.info("default mode (/recap): no gates, nothing is written");
        }
        if self.dry_run {
            let model = config
                .as_ref()
                .map_or_else(|_| "the small/fast model".to_string(), |c| c.model.clone());
            let asked = count(recent.messages.len() as u64, "message", "messages");
            let message = if self.auto {
                format!(
                    "every away-summary gate let it go on: would ask {model} about {asked} and append an away_summary record to {}",
                    transcript.display()
                )
            } else {
                format!("would ask {model} about {asked} and print the summary")
            };
            return Ok(RecapReport::dry_run(&message));
        }
        let client = Client::new(config?)?;
        let request = request(&recent);
        diag.info(&format!(
            "asking {} about {}",
            client.model(),
            count(recent.messages.len() as u64, "message", "messages")
        ));
        // Held, so that a signal during the exchange is answered with an `aborted` result.
        let hold = signals::hold();
        let answer = model::block_on(async {
            tokio::select! {
                answer = client.send(&request) => Some(answer),
                _ = crate::model::until_signal() => None,
            }
        });
        if let Some(signal) = hold.end() {
            return Ok(RecapReport::interrupted(signal, Usage::default()));
        }
        let response = match answer? {
            // Only a signal ends the exchange early, and that was answered above.
            None => {
                return Err(Failure::environment(
                    "the model exchange ended without an answer",
                ))
            }
            Some(Err(error)) => return Ok(RecapReport::api_error(error.body(), Usage::default())),
            Some(Ok(response)) => response,
        };
        let usage = response.usage;
        // What the summary says is printed and may be written to the transcript: no known
        // secret and no control character goes with it.
        let text = crate::cli::redact::redact(&clean(&response.text())).into_owned();
        if text.is_empty() {
            return Ok(RecapReport::api_error(
                ErrorBody {
                    kind: ErrorKind::MalformedResponse.as_str(),
                    reason: None,
                    message: "the model returned no text".into(),
                    status: None,
                    attempts: None,
                },
                usage,
            ));
        }
        if !self.auto {
            diag.info("summary printed; the default mode writes nothing");
            return Ok(RecapReport::Summary {
                text,
                record_uuid: None,
                usage,
            });
        }
        // The record is appended (or undone) whole; the result reports what happened.
        let hold = signals::hold();
        let appended = append_summary(&transcript, &recent, &text, session_id.as_deref());
        let _late = hold.end();
        Ok(match appended {
            Ok(Some(uuid)) => {
                diag.info(&format!("appended the away_summary record {uuid}"));
                RecapReport::Summary {
                    text,
                    record_uuid: Some(uuid),
                    usage,
                }
            }
            Ok(None) => RecapReport::stale(text, usage),
            Err(failure) => RecapReport::from_failure(failure, usage),
        })
    }
}

/// Prose for the man page.
#[cfg(feature = "docs")]
pub const MAN_SECTIONS: &[(&str, &str)] = &[
    (
        "RESULT",
        "One object: {status, reason?, text?, message?, error?, record_uuid?, usage}. status is \
ok (exit 0); dry-run with --dry-run once the gates let it go on (exit 0, message says what \
would be asked and written; no request, nothing written); no-turn when the transcript holds no real user turn (exit 1, no request made); \
skipped with a reason in --auto (exit 1); aborted with reason stale when the transcript changed \
while the summary was generated (exit 1, nothing written) or interrupted on SIGINT/SIGTERM \
(exit 130/143, error kind interrupted); api-error when the model gave no summary (exit 4), \
error.kind naming the model error kind (auth, rate_limited, overloaded, invalid_request, \
timeout, network, malformed_response, server), with status (HTTP, or null) and attempts once \
a request was made; failed when the transcript cannot be read or appended to (exit 3), \
error.kind environment with reason not_found, permission or not_a_file when the transcript \
(--transcript, or the hook payload's transcript_path) is missing, unreadable or not a regular \
file (a FIFO, device, socket or directory is refused at once, never waited on). Every failure \
has error = {kind, reason?, message} beside its status; a usage error or bad input (exit 2) \
prints {error} alone, as every tool does. usage always has input_tokens, output_tokens, \
cache_creation_input_tokens and cache_read_input_tokens.

Control characters (C0 and C1, but newline and tab) are removed from the text (and so from the \
appended record) and from every line on stderr. Exit 1 prints one line on stderr naming the \
result (skipped: cache_cold: ...), unless -q; -v also says what the transcript held and, for \
--auto, each gate checked and why it let the summary go on (checked cache_cold: ...).",
    ),
    (
        "CONTEXT",
        "The transcript is read backwards from its end, never whole: the last 30 messages (real \
user turns, assistant text once per API response, tool calls named with their key argument \
such as Bash(git status)), stopping at a compact boundary and after at most 8 MiB from the end. \
One request, no tools, max_tokens 200, to the small/fast model (--model, else \
ANTHROPIC_SMALL_FAST_MODEL, else ANTHROPIC_DEFAULT_HAIKU_MODEL, else a built-in Haiku id). The \
answer is cleaned of markdown (bold, code marks, headings, bullets, wrapping quotes, a leading \
\"Summary:\" label, line breaks) and capped at 400 characters.",
    ),
    (
        "AWAY SUMMARY (--auto)",
        "Gates, in order, each a skip reason: disabled (CLAUDE_CODE_ENABLE_AWAY_SUMMARY false, or \
awaySummaryEnabled false in settings; the variable wins); already_summarized (the last user, \
assistant or away_summary record is an away_summary; checked before the turn counts, which \
would otherwise always hide it); too_few_turns (fewer than 3 real user turns before the first \
summary, or fewer than 2 since the last away_summary; when the 8 MiB budget ends the reading \
before 3 turns are found, the conversation counts as long enough); \
not_away_long_enough (--away-ms below the delay, delay = min(max(--delay-ms, 30000), 0.8 x \
--cache-ttl-ms); --away-ms defaults to the time since the transcript's last record); cache_cold \
(--cache-age-ms above 0.9 x --cache-ttl-ms; it defaults to the time since the last assistant \
record); draft_pending (--draft not empty); pending_work; rate_limited. Each -ms flag has a \
duration twin taking units (--delay, --away, --cache-ttl, --cache-age; a plain number is \
seconds); give one of a pair.

Then the summary is generated. If the transcript grew while it was generated, or its last line \
was incomplete when read, the summary is dropped (aborted, stale). Otherwise one record \
{parentUuid, isSidechain: false, type: \"system\", subtype: \"away_summary\", content, isMeta: \
false, timestamp, uuid, cwd, sessionId} is appended with a single O_APPEND write; parentUuid is \
the uuid of the last record that has one. The default mode never writes.",
    ),
    (
        "MODELS",
        "--provider anthropic (default; DREAMKIT_PROVIDER): POST $ANTHROPIC_BASE_URL/v1/messages \
with x-api-key: $ANTHROPIC_API_KEY, else Authorization: Bearer $ANTHROPIC_AUTH_TOKEN, and \
anthropic-version: 2023-06-01. --provider openai: POST $OPENAI_BASE_URL/chat/completions \
(default https://api.openai.com/v1) with Authorization: Bearer $OPENAI_API_KEY, for \
llama.cpp, vLLM, Ollama and other compatible servers; the model is --model or OPENAI_MODEL. \
With no credential for the provider, recap fails before any network I/O (exit 4, error kind \
auth, reason no_credential, the message naming the variables), but only once a request is due: \
no-turn and every --auto gate come first, so a hook with nothing to summarise exits 1 without \
a key. Every other model setting (a base URL that is not an absolute http(s) URL, --provider \
openai without a model) is a usage error (exit 2) at once. A server that needs no credential \
is declared by setting the variable to the empty string (OPENAI_API_KEY= or ANTHROPIC_API_KEY=): set but empty means no \
credential, unset is the auth error. \
429, 529, 5xx, connection failures and timeouts are retried (--retries, default 3) with \
exponential backoff and jitter, honouring retry-after and retry-after-ms, within --deadline; \
each request is limited by --timeout (0: no per-request limit, the deadline still holds). \
400, 401, 403 and malformed answers are not retried. \
Error kinds: auth, rate_limited, overloaded, invalid_request, timeout, network, \
malformed_response, server. Keys are never printed, not even with -v. \
DREAMKIT_RETRY_BASE_MS sets the first backoff step (default 500).",
    ),
    (
        "EXAMPLES",
        "Where the most recently active session stands:

  recap --transcript \"$(ls -t ~/.claude/projects/*/*.jsonl | head -n 1)\" | jq -r .text

As a Notification or Stop hook, with the payload on stdin (it returns at once when a gate \
says no; end hook commands with exit 0):

  recap --auto -q >/dev/null; exit 0",
    ),
    ("*/ENVIRONMENT", crate::model::MAN_ENVIRONMENT),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelError;

    fn document(report: &RecapReport) -> serde_json::Value {
        serde_json::to_value(report).unwrap()
    }

    #[test]
    fn every_result_but_ok_has_its_one_line_and_its_exit() {
        let usage = Usage::default();
        let stale = RecapReport::stale("t".into(), usage);
        assert_eq!(
            stale.note().as_deref(),
            Some("aborted: stale: the transcript changed while the summary was written")
        );
        assert_eq!(stale.exit(), Exit::No);
        let skipped = RecapReport::skipped("too_soon", "away 2 minutes of 5");
        assert_eq!(
            skipped.note().as_deref(),
            Some("skipped: too_soon: away 2 minutes of 5")
        );
        let ok = RecapReport::Summary {
            text: "t".into(),
            record_uuid: None,
            usage,
        };
        assert_eq!((ok.note(), ok.exit()), (None, Exit::Yes));
        let signal = RecapReport::interrupted(libc::SIGTERM, usage);
        assert_eq!(signal.exit().code(), 143);
        assert_eq!(signal.note().as_deref(), Some("interrupted by SIGTERM"));
    }

    #[test]
    fn every_failure_has_the_error_object_beside_its_status() {
        let usage = Usage::default();
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        let failed =
            RecapReport::from_failure(Failure::io("read", Path::new("/t.jsonl"), &missing), usage);
        assert_eq!(failed.exit(), Exit::Environment);
        let doc = document(&failed);
        assert_eq!(doc["status"], "failed");
        assert_eq!(doc["error"]["kind"], "environment");
        assert_eq!(doc["error"]["reason"], "not_found");
        assert_eq!(doc["message"], doc["error"]["message"]);

        let mut error = ModelError::new(ErrorKind::RateLimited, "slow \u{1b}[2Jdown");
        error.status = Some(429);
        let api = RecapReport::api_error(error.body(), usage);
        assert_eq!(api.exit(), Exit::Remote);
        let doc = document(&api);
        assert_eq!(
            (doc["status"].as_str(), doc["error"]["kind"].as_str()),
            (Some("api-error"), Some("rate_limited"))
        );
        assert_eq!(doc["error"]["message"], "slow down");
        assert_eq!(
            (
                doc["error"]["status"].as_u64(),
                doc["error"]["attempts"].as_u64()
            ),
            (Some(429), Some(1))
        );

        let doc = document(&RecapReport::interrupted(libc::SIGINT, usage));
        assert_eq!(doc["status"], "aborted");
        assert_eq!(doc["reason"], "interrupted");
        assert_eq!(doc["error"]["kind"], "interrupted");

        let refused = RecapReport::from_failure(Failure::Usage("no transcript".into()), usage);
        assert_eq!(refused.exit(), Exit::Usage);
        assert_eq!(
            document(&refused),
            serde_json::json!({"error": {"kind": "usage", "message": "no transcript"}})
        );
    }

    #[test]
    fn cleaning_removes_markdown_and_labels() {
        assert_eq!(
            clean("## Recap\n**You were** fixing `gate.rs`.\n\n- Next: run `make test`."),
            "Recap You were fixing gate.rs. Next: run make test."
        );
        assert_eq!(clean("Summary: \"You were close.\""), "You were close.");
        assert_eq!(clean("  \n  "), "");
        assert_eq!(clean("> quoted\n* bullet"), "quoted bullet");
        let long = "é".repeat(500);
        assert_eq!(clean(&long).chars().count(), MAX_TEXT_CHARS);
        assert_eq!(
            clean("\u{1b}]0;PWNED\u{7}You were \u{9b}testing."),
            "You were testing."
        );
    }

    #[test]
    fn reads_gate_facts_from_the_end() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        let user = |t: &str| {
            format!(
                r#"{{"type":"user","uuid":"u-{t}","message":{{"role":"user","content":"{t}"}}}}"#
            )
        };
        let lines = [
            user("one"),
            r#"{"type":"system","subtype":"away_summary","content":"s","uuid":"s1"}"#.to_string(),
            user("two"),
            r#"{"type":"assistant","uuid":"a1","message":{"id":"m1","content":[{"type":"text","text":"hi"}]}}"#.to_string(),
            r#"{"type":"cost-state"}"#.to_string(),
        ];
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let r = Recent::read(&path).unwrap();
        assert!(r.saw_summary && !r.ends_with_summary);
        assert_eq!(r.real_turns_since_summary, 1);
        assert_eq!(r.last_uuid.as_deref(), Some("a1"));
        assert_eq!(r.messages, ["User: one", "User: two", "Assistant: hi"]);
        assert!(r.complete);
        std::fs::write(&path, lines.join("\n")).unwrap();
        assert!(
            !Recent::read(&path).unwrap().complete,
            "no final newline: a record is being written"
        );
    }
}
