//! `suggest`: the next-prompt suggestion. Enablement and suppression are decided before any
//! model call (`suppress`), one request with no tools asks for what the user would type next
//! (`generate`), and the answer is cleaned and filtered (`filter`). `suggest check` runs the
//! cleanup and filters alone: no network, no async runtime.

pub mod filter;
pub mod generate;
pub mod suppress;

use std::path::{Path, PathBuf};

use clap::Parser;
use schemars::{JsonSchema, SchemaGenerator};
use serde::Serialize;

use crate::claude::paths::ProjectHints;
use crate::claude::transcript::BackwardReader;
use crate::cli::duration::count;
use crate::cli::failure::credentials_later;
use crate::cli::text::sanitize;
use crate::cli::{
    signals, CommonArgs, Context, Delivery, ErrorBody, Exit, Failure, LocationArgs, Report, Tool,
};
use crate::files::open_regular;
use crate::model::{self, Client, ModelArgs, Tier, Usage};
use suppress::{Conversation, LiveState};

/// Suggest what the user would type next.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "suggest",
    version = crate::cli::VERSION,
    about = "Next-prompt suggestion with strict filters; `check` runs the filters alone",
    long_about = "Suggest what the user would naturally type next in a Claude Code session, \
as Claude Code's prompt suggestion does: first the enablement switch and the suppression \
reasons (no model call when one applies), then one request with no tools over the recent \
conversation, then cleanup and strict filters on the answer. `suggest check TEXT` runs the \
cleanup and the filters alone, with no network."
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: Option<Subcommand>,
    #[command(flatten)]
    pub generate: GenerateArgs,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Subcommand {
    /// Clean and filter TEXT (else plain text on stdin) as a suggestion; no network
    Check(CheckArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// The candidate suggestion [default: plain text on stdin]
    #[arg(value_name = "TEXT")]
    pub text: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct GenerateArgs {
    /// Transcript of the session [default: the hook payload's transcript_path]
    #[arg(long, value_name = "PATH")]
    pub transcript: Option<PathBuf>,
    #[command(flatten)]
    pub location: LocationArgs,
    /// Session id for --events [default: the hook payload's session_id, else the transcript's]
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// A permission prompt is waiting: suppress (pending_permission; also from a Notification payload)
    #[arg(long)]
    pub pending_permission: bool,
    /// An MCP elicitation (a question to the user) is waiting: suppress (elicitation_active; also from a Notification payload)
    #[arg(long)]
    pub elicitation: bool,
    /// The session is in plan mode: suppress (plan_mode; also from the payload's permission_mode)
    #[arg(long)]
    pub plan_mode: bool,
    /// The account is rate-limited: suppress (rate_limit)
    #[arg(long)]
    pub rate_limited: bool,
    /// Print the suggestion as Claude Code's event {type:"prompt_suggestion", suggestion, uuid, session_id}
    #[arg(long)]
    pub events: bool,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// A candidate after the cleanup and the filters: what `suggest check` prints, and what
/// `suggest` prints for a model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Verdict {
    /// `{suggestion, usage?}` (exit 0); `usage` when the candidate came from a model.
    Suggested {
        suggestion: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// `{rejected, candidate, usage?}` (exit 1): the cleaned candidate failed a filter.
    Rejected {
        /// The filter that failed.
        rejected: &'static str,
        #[serde(skip)]
        detail: String,
        candidate: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
}

impl Report for Verdict {
    fn exit(&self) -> Exit {
        match self {
            Verdict::Suggested { .. } => Exit::Yes,
            Verdict::Rejected { .. } => Exit::No,
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            Verdict::Suggested { .. } => None,
            Verdict::Rejected {
                rejected, detail, ..
            } => Some(sanitize(&format!("rejected: {rejected}: {detail}")).into_owned()),
        }
    }
}

/// What suggest did. The variant decides the exit code and the one stderr line ([`Report`]).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum SuggestReport {
    /// The model's answer, cleaned and filtered.
    Verdict(Verdict),
    /// `--events`: a suggestion as Claude Code's event (exit 0).
    Event(PromptSuggestion),
    /// No answer to filter.
    Unanswered(Unanswered),
}

/// Why there is no candidate: suppressed, or the model could not be asked.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Unanswered {
    /// `{suppressed, usage}` (exit 1): no model call was made.
    Suppressed {
        /// The suppression reason.
        suppressed: &'static str,
        #[serde(skip)]
        detail: String,
        usage: Usage,
    },
    /// `{aborted: "interrupted", error, usage}` (exit 130 / 143).
    Interrupted {
        aborted: Aborted,
        #[serde(skip)]
        signal: i32,
        error: ErrorBody,
        usage: Usage,
    },
    /// `{error, usage}` (exit 4): the model could not be asked or did not answer;
    /// `error.kind` is the model error kind (`auth` for a missing credential).
    ModelFailed { error: ErrorBody, usage: Usage },
    /// `{error}`: usage or bad input (exit 2), or the environment (exit 3: a transcript that
    /// is missing, unreadable or not a regular file, with its `reason`).
    Failed {
        error: ErrorBody,
        #[serde(skip)]
        exit: Exit,
    },
}

/// Claude Code's `{type: "prompt_suggestion", suggestion, uuid, session_id}` event.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PromptSuggestion {
    #[serde(rename = "type")]
    pub kind: PromptSuggestionType,
    pub suggestion: String,
    pub uuid: String,
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub enum PromptSuggestionType {
    #[serde(rename = "prompt_suggestion")]
    PromptSuggestion,
}

/// Why no answer came: a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub enum Aborted {
    #[serde(rename = "interrupted")]
    Interrupted,
}

impl SuggestReport {
    /// Where a failure belongs: a model's (a missing credential included) is `{error, usage}`,
    /// a signal's `aborted`, the others `{error}`.
    pub fn from_failure(failure: Failure) -> Self {
        SuggestReport::Unanswered(match failure {
            Failure::Remote { .. } => Unanswered::ModelFailed {
                error: ErrorBody::of_failure(&failure),
                usage: Usage::default(),
            },
            Failure::Interrupted { signal } => return SuggestReport::interrupted(signal),
            other => Unanswered::Failed {
                error: ErrorBody::of_failure(&other),
                exit: other.exit(),
            },
        })
    }

    pub fn interrupted(signal: i32) -> Self {
        SuggestReport::Unanswered(Unanswered::Interrupted {
            aborted: Aborted::Interrupted,
            signal,
            error: ErrorBody::of_failure(&Failure::interrupted(signal)),
            usage: Usage::default(),
        })
    }

    fn suppressed(reason: &'static str, detail: String) -> Self {
        SuggestReport::Unanswered(Unanswered::Suppressed {
            suppressed: reason,
            detail,
            usage: Usage::default(),
        })
    }
}

impl Report for SuggestReport {
    fn exit(&self) -> Exit {
        match self {
            SuggestReport::Verdict(verdict) => verdict.exit(),
            SuggestReport::Event(_) => Exit::Yes,
            SuggestReport::Unanswered(unanswered) => unanswered.exit(),
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            SuggestReport::Verdict(verdict) => verdict.note(),
            SuggestReport::Event(_) => None,
            SuggestReport::Unanswered(unanswered) => unanswered.note(),
        }
    }
}

impl Report for Unanswered {
    fn exit(&self) -> Exit {
        match self {
            Unanswered::Suppressed { .. } => Exit::No,
            Unanswered::ModelFailed { .. } => Exit::Remote,
            Unanswered::Interrupted { signal, .. } => Exit::of_signal(*signal),
            Unanswered::Failed { exit, .. } => *exit,
        }
    }

    /// The one stderr line that says why, cleaned of control characters.
    fn note(&self) -> Option<String> {
        let line = match self {
            Unanswered::Suppressed {
                suppressed, detail, ..
            } => format!("suppressed: {suppressed}: {detail}"),
            Unanswered::ModelFailed { error, .. } => error.line(),
            Unanswered::Interrupted { error, .. } | Unanswered::Failed { error, .. } => {
                error.message.clone()
            }
        };
        Some(sanitize(&line).into_owned())
    }
}

impl crate::cli::Binary for Args {
    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn dispatch(self, cx: &Context) -> Delivery {
        match self.command {
            Some(Subcommand::Check(check)) => cx.finish(check),
            None => cx.finish(self.generate),
        }
    }
}

impl Tool for CheckArgs {
    type Report = Verdict;

    /// `suggest check`: never reads a transcript, never starts a runtime, never connects.
    fn run(self, cx: &Context) -> Result<Verdict, Failure> {
        let text = match self.text {
            Some(text) => text,
            None => cx.stdin_text()?.ok_or_else(|| {
                Failure::Usage("no text to check: pass TEXT, or plain text on stdin".into())
            })?,
        };
        Ok(verdict(&text, None))
    }
}

impl Tool for GenerateArgs {
    type Report = SuggestReport;

    fn run(self, cx: &Context) -> Result<SuggestReport, Failure> {
        // A signal outside the model exchange ends the process at once; it prints the same
        // `aborted` result as one inside it.
        signals::set_documents(|signal| {
            serde_json::to_string(&SuggestReport::interrupted(signal)).unwrap_or_default()
        });
        Ok(self
            .generate(cx)
            .unwrap_or_else(SuggestReport::from_failure))
    }

    /// With `--events` a suggestion is Claude Code's event; every other result is as without.
    fn schema(&self, generator: &mut SchemaGenerator) -> Result<schemars::Schema, &'static str> {
        let mut results = vec![generator.subschema_for::<Verdict>().to_value()];
        if self.events {
            results.push(generator.subschema_for::<PromptSuggestion>().to_value());
        }
        results.push(generator.subschema_for::<Unanswered>().to_value());
        Ok(schemars::json_schema!({ "anyOf": results }))
    }
}

/// Cleanup and filters over a candidate: `{suggestion}` (exit 0) or `{rejected, candidate}`
/// (exit 1). `usage` is added when the candidate came from a model.
pub fn verdict(raw: &str, usage: Option<Usage>) -> Verdict {
    let cleaned = filter::clean(raw);
    match filter::check(&cleaned) {
        None => Verdict::Suggested {
            suggestion: cleaned,
            usage,
        },
        Some(rejection) => Verdict::Rejected {
            rejected: rejection.reason,
            detail: rejection.detail,
            candidate: cleaned,
            usage,
        },
    }
}

/// Reads the end of the transcript, a regular file only: a FIFO, device, socket or directory
/// is refused at once (exit 3, `not_a_file`), never waited on, as a missing or unreadable one
/// is (`not_found`, `permission`).
fn read_transcript(path: &Path) -> Result<Conversation, Failure> {
    let file = open_regular(path).map_err(|e| Failure::io("read the transcript", path, &e))?;
    let len = file
        .metadata()
        .map_err(|e| Failure::io("read the transcript", path, &e))?
        .len();
    Conversation::from_reader(BackwardReader::new(file, len))
        .map_err(|e| Failure::io("read the transcript", path, &e))
}

impl GenerateArgs {
    fn generate(self, cx: &Context) -> Result<SuggestReport, Failure> {
        let diag = cx.diag();
        let (_hints, hook, _envelope) = ProjectHints::gather(&self.location, cx.input()?)?;
        let transcript =
            crate::claude::hook::transcript_of(self.transcript.as_ref(), hook.as_ref())?;
        let env = cx.env();
        let config = credentials_later(self.model.config(env, Tier::Main))?;
        let settings = &cx.project(&self.location)?.settings;
        diag.info(&format!(
            "enabled: {}",
            suppress::enablement_source(env, settings)
        ));
        if !suppress::enabled(env, settings) {
            return Ok(SuggestReport::suppressed(
                "disabled",
                "prompt suggestions are turned off \
                 (CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION, else promptSuggestionEnabled)"
                    .into(),
            ));
        }
        let conversation = read_transcript(&transcript)?;
        let in_plan_mode = hook
            .as_ref()
            .and_then(|h| h.permission_mode.as_deref())
            .is_some_and(|mode| mode == "plan");
        // A Notification hook says what is waiting on the user.
        let notification = hook
            .as_ref()
            .and_then(|h| h.other.get("notification_type"))
            .and_then(|v| v.as_str());
        let live = LiveState {
            pending_permission: self.pending_permission
                || notification == Some("permission_prompt"),
            elicitation: self.elicitation || notification == Some("elicitation_dialog"),
            plan_mode: self.plan_mode || in_plan_mode,
            rate_limited: self.rate_limited,
        };
        diag.info(&format!(
            "{} read: {} (2 needed), the last {}, {} in it (limit {}), plan mode {}",
            transcript.display(),
            count(
                conversation.assistant_turns as u64,
                "assistant turn",
                "assistant turns"
            ),
            if conversation.last_is_error {
                "an API error"
            } else {
                "not an error"
            },
            count(
                conversation.last_uncached_tokens(),
                "uncached token",
                "uncached tokens"
            ),
            suppress::MAX_UNCACHED_TOKENS,
            match (self.plan_mode, in_plan_mode) {
                (true, _) => "on (--plan-mode)",
                (false, true) => "on (the payload's permission_mode)",
                (false, false) => "off",
            }
        ));
        if let Some((reason, detail)) = suppress::suppression(&conversation, live) {
            return Ok(SuggestReport::suppressed(reason, detail));
        }
        let session_id = self
            .session
            .clone()
            .or_else(|| hook.as_ref().and_then(|h| h.session_id.clone()))
            .or_else(|| conversation.session_id.clone());

        // After the suppression checks: a hook that finds suggestions off or suppressed says
        // so (exit 1) even where no credential is set.
        let client = Client::new(config?)?;
        let request = generate::request(&conversation.messages);
        diag.info(&format!(
            "asking {} about the last {} messages",
            client.model(),
            conversation.messages.len()
        ));
        // While the model is asked, a signal ends the exchange (not the process), so the
        // answer says it was interrupted.
        let hold = signals::hold();
        let answer = model::block_on(async {
            tokio::select! {
                answer = client.send(&request) => Ok(answer),
                signal = crate::model::until_signal() => Err(signal),
            }
        })?;
        let answer = match hold.end() {
            Some(signal) => Err(signal),
            None => answer,
        };
        let response = match answer {
            Err(signal) => return Ok(SuggestReport::interrupted(signal)),
            Ok(Err(error)) => {
                return Ok(SuggestReport::Unanswered(Unanswered::ModelFailed {
                    error: error.body(),
                    usage: Usage::default(),
                }))
            }
            Ok(Ok(response)) => response,
        };
        Ok(match verdict(&response.text(), Some(response.usage)) {
            Verdict::Suggested { suggestion, .. } if self.events => {
                SuggestReport::Event(PromptSuggestion {
                    kind: PromptSuggestionType::PromptSuggestion,
                    suggestion,
                    uuid: uuid::Uuid::new_v4().to_string(),
                    session_id,
                })
            }
            verdict => SuggestReport::Verdict(verdict),
        })
    }
}

/// Prose for the man page.
#[cfg(feature = "docs")]
pub const MAN_SECTIONS: &[(&str, &str)] = &[
    (
        "RESULT",
        "One object. {suggestion, usage}: exit 0. {suppressed, usage}: exit 1, no model call \
was made (usage is all zeros). {rejected, candidate, usage}: exit 1, the model's answer failed a \
filter; candidate is the cleaned answer. {error: {kind, status, message, attempts}, usage}: \
exit 4, the model exchange failed after retries, error.kind naming the model error kind \
(auth, rate_limited, overloaded, invalid_request, timeout, network, malformed_response, \
server); with no credential for the provider, {error: {kind: \"auth\", reason: \
\"no_credential\", message}, usage}, exit 4, no request made, and only after every \
suppression (a hook that finds suggestions off or suppressed exits 1 without a key). \
{aborted: \"interrupted\", error: {kind: \"interrupted\", message}, usage}: exit 130 or 143 on \
SIGINT or SIGTERM. {error: {kind: \"environment\", reason, message}}: exit 3, the transcript \
(--transcript, or the hook payload's transcript_path) is missing (reason not_found), \
unreadable (permission) or not a regular file (not_a_file: a FIFO, device, socket or \
directory is refused at once, never waited on). {error: {kind, reason?, message}}: exit 2, a \
usage error or bad input (a bad model setting, such as a base URL that is not an absolute \
http(s) URL, is one at once, whatever the suppressions say). With --events, a suggestion is printed as Claude Code's event \
{type: \"prompt_suggestion\", suggestion, uuid, session_id} instead (uuid is new for each \
event; session_id is --session, else the hook payload's, else the transcript's); the other \
results print as above, so select the events with jq 'select(.type == \"prompt_suggestion\")'. \
Exit 1 prints one line on stderr naming the reason (suppressed: cache_cold: ..., rejected: \
too_many_words: ...), and a failure one line saying why, unless -q. No control character \
reaches the suggestion, the candidate or stderr (the cleanup removes them).",
    ),
    (
        "ENABLEMENT AND SUPPRESSION",
        "Enablement, first that answers: CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION (true or false) \
overrides everything; then promptSuggestionEnabled in the settings (user, project, local; \
later wins); on by default.

Then, in this order, each a suppression reason checked before any model call: disabled; \
early_conversation (fewer than 2 assistant turns since the start or the last compact boundary, \
a turn counted once per message.id); last_response_error (the last assistant record is an API \
error); pending_permission (--pending-permission, or a Notification hook payload whose \
notification_type is permission_prompt); elicitation_active (--elicitation, or \
notification_type elicitation_dialog); \
plan_mode (--plan-mode, or the hook payload's permission_mode is plan); rate_limit \
(--rate-limited); cache_cold (the last assistant turn's input_tokens + \
cache_creation_input_tokens + output_tokens exceed 10,000: the prompt cache is cold and a \
suggestion would cost a full-price request).",
    ),
    (
        "GENERATION",
        "The transcript (--transcript, else the hook payload's transcript_path) is read \
backwards from its end, never whole: the last 20 messages (real user turns, assistant text \
once per API response, tool calls named with their key argument), stopping at a compact \
boundary and after at most 8 MiB from the end. One request, no tools, max_tokens 64, asks \
for what the user would naturally type next, 2 to 12 words, in the user's style, or nothing. \
The model is the main one (--model, else ANTHROPIC_MODEL, else the built-in main model), as \
Claude Code forks the main conversation for its suggestion; --provider openai uses --model or \
OPENAI_MODEL. Model flags, retries and error kinds are those of recap(1).",
    ),
    (
        "FILTERS",
        "Cleanup first: control characters (C0 and C1 but newline and tab: an ESC could \
retitle or clear the terminal that shows the suggestion), surrounding blanks, a wrapper tag (<suggestion>...</suggestion>, any \
tag name), one pair of wrapping quotes and a leading label (Suggestion:, Suggested prompt:, \
Next prompt:, Prompt:, User:, also in bold) are removed, repeatedly. Then the filters, in \
order; the first that fails is the reason: empty; done (just done, any case); meta_text \
(starts with nothing to suggest, nothing found, no suggestion, no next prompt or no prompt; \
holds stay silent, stays silent, staying silent, remain silent, remaining silent or silence \
is; or is just silence, none, nothing, null, n/a or empty); meta_wrapped (all in (), [], {}, \
（） or 【】); \
error_message (starts with api error:, prompt is too long, request timed out, invalid api \
key, image was too large); prefixed_label (^\\w+:\\s, ASCII word); too_few_words (fewer than \
2 words, except yes, yeah, yep, yea, yup, sure, ok, okay, push, commit, deploy, stop, \
continue, check, exit, quit, no, any case, a trailing . ! or ? allowed, or a /command); \
too_many_words (more than 12); too_long (100 characters or more); multiple_sentences (. ! or ? \
then blanks and a capital, or 。！？ followed by more text); has_formatting (a line break, *, \
a backtick, __, ~~, a markdown link, or a heading, list item or quote at the start); \
evaluative (thanks, thank you, looks good, sounds good, that works, that worked, that's all, \
nice, great, perfect, makes sense, awesome, excellent, as whole words); claude_voice (starts \
with let me, i'll, i've, i'm, i can, i would, i think, i notice, here's, here is, here are, \
that's, this is, this will, you can, you should, you could, sure, (with its comma), of \
course, certainly).

Words are whitespace-separated, except in scripts written without spaces: 2 Han characters, \
or 4 kana or Thai characters, make one word (rounded up within each whitespace-separated \
piece, and each run of other letters or digits in it is one more word).",
    ),
    (
        "check/INPUT",
        "TEXT, else plain text on stdin (read only when stdin is not a terminal and -n is not \
given; at most 16 MiB of UTF-8). No text at all (no TEXT, and stdin a terminal, empty or -n) \
is a usage error (exit 2); an empty TEXT is rejected as empty. Prints {suggestion} (exit 0) or \
{rejected, candidate} (exit 1), candidate being the cleaned text. No transcript, settings or \
network is touched and no async runtime is started. Put -- before a TEXT that starts with -.",
    ),
    (
        "check/EXAMPLES",
        "  suggest check -n 'run the tests'

  suggest check -n -- '<suggestion>Thanks, looks good!</suggestion>' | jq -r .rejected",
    ),
    (
        "EXAMPLES",
        "A suggestion for the most recently active session:

  suggest --transcript \"$(ls -t ~/.claude/projects/*/*.jsonl | head -n 1)\" | jq -r .suggestion

As a Stop hook, with the payload on stdin, appending Claude Code's events to a file (end hook \
commands with exit 0): suggest -q --events >> ~/suggestions.jsonl; exit 0",
    ),
    ("*/ENVIRONMENT", crate::model::MAN_ENVIRONMENT),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelError;

    #[test]
    fn verdict_documents() {
        let verdict_of = |raw| {
            let verdict = verdict(raw, None);
            let json = crate::cli::json::to_string(&verdict).unwrap();
            (verdict.exit(), json, verdict.note())
        };
        let (exit, json, note) = verdict_of("<suggestion>run the tests</suggestion>");
        assert_eq!(exit, Exit::Yes);
        assert_eq!(json, r#"{"suggestion":"run the tests"}"#);
        assert_eq!(note, None);
        let (exit, json, note) = verdict_of(" Thanks! ");
        assert_eq!(exit, Exit::No);
        assert_eq!(
            json,
            r#"{"rejected":"too_few_words","candidate":"Thanks!"}"#
        );
        assert!(note.is_some_and(|n| n.starts_with("rejected: too_few_words: ")));
    }

    #[test]
    fn an_event_is_claude_codes_line() {
        let event = SuggestReport::Event(PromptSuggestion {
            kind: PromptSuggestionType::PromptSuggestion,
            suggestion: "run it".into(),
            uuid: "u".into(),
            session_id: None,
        });
        assert_eq!(
            crate::cli::json::to_string(&event).unwrap(),
            r#"{"type":"prompt_suggestion","suggestion":"run it","uuid":"u","session_id":null}"#
        );
        assert_eq!((event.exit(), event.note()), (Exit::Yes, None));
        let suppressed = SuggestReport::suppressed("cache_cold", "too many".into());
        assert_eq!(
            crate::cli::json::to_string(&suppressed).unwrap(),
            r#"{"suppressed":"cache_cold","usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}"#
        );
        assert_eq!(
            (suppressed.exit(), suppressed.note().as_deref()),
            (Exit::No, Some("suppressed: cache_cold: too many"))
        );
    }

    #[test]
    fn failures_print_the_error_object_and_decide_the_exit() {
        let missing = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let report =
            SuggestReport::from_failure(Failure::io("read", Path::new("/t.jsonl"), &missing));
        assert_eq!(report.exit(), Exit::Environment);
        let doc = serde_json::to_value(&report).unwrap();
        assert_eq!(doc["error"]["kind"], "environment");
        assert_eq!(doc["error"]["reason"], "permission");
        let report = SuggestReport::Unanswered(Unanswered::ModelFailed {
            error: ModelError::new(crate::model::ErrorKind::Overloaded, "busy").body(),
            usage: Usage::default(),
        });
        assert_eq!(report.exit(), Exit::Remote);
        assert_eq!(
            report.note().as_deref(),
            Some("model request failed: overloaded: busy")
        );
        let doc = serde_json::to_value(&report).unwrap();
        assert_eq!(doc["error"]["kind"], "overloaded");
        assert!(doc["usage"].is_object());
        let report = SuggestReport::interrupted(libc::SIGINT);
        assert_eq!(report.exit().code(), 130);
        let doc = serde_json::to_value(&report).unwrap();
        assert_eq!(
            (doc["aborted"].as_str(), doc["error"]["kind"].as_str()),
            (Some("interrupted"), Some("interrupted"))
        );
    }
}
