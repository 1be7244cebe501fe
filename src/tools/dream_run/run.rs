//! One consolidation: the envelope in, digests, the agent loop over the sandboxed tools with
//! fencing and a snapshot, the task record kept current, the envelope with `run` out.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod by_client;
mod by_rules;

use super::anchors;
use super::check;
use super::digest::{self, Digest};
use super::mode::{Engine, Mode};
use super::prompt;
use super::sandbox::{Change, GuardRefusal, Limits, Sandbox, WriteGuard};
use super::{RunArgs, FILE_LOCK_MAX_DEADLINE};
use crate::claude::instructions;
use crate::claude::paths::ProjectHints;
use crate::claude::records::{self, ClientFields, MemorySaved};
use crate::claude::sessions::{is_session_id, sessions_touched_since};
use crate::claude::transcript::{cut_chars, BackwardReader};
use crate::claude::{Env, Project};
use crate::cli::envelope::{json_value, Section, Upstream};
use crate::cli::time::{from_epoch_ms, rfc3339};
use crate::cli::{
    signals, CommonArgs, Context, Diag, Envelope, Enveloped, ErrorBody, Exit, Failure, Report,
    RunStatus,
};
use crate::lock::{Backend, Claimed};
use crate::model::{Block, Client, Message, Request, Role, SystemBlock, Tier, Usage};
use crate::store::{self, Diff, PendingUpdate, Snapshot, TaskRecord, TaskStatus, TaskStore, Turn};

/// A turn's text in the task record and events is cut to this.
const TURN_TEXT_CHARS: usize = 500;
/// The final summary is cut to this.
const SUMMARY_CHARS: usize = 1000;

/// The envelope's `lock` section as dream-run reads it (`acquired` was checked by
/// [`Envelope::upstream`]: here it is absent or true).
#[derive(Debug, Default, Deserialize)]
struct LockSection {
    token: Option<Value>,
    prior_mtime: Option<Value>,
}

/// The lease this run writes under: its fencing token and the time a roll-back restores.
#[derive(Debug, Clone, Default)]
struct Claim {
    token: Option<String>,
    prior_mtime: i64,
}

impl Claim {
    /// From the envelope's `lock` (a string token) or, under `dream-lock exec`,
    /// `DREAMKIT_LOCK_TOKEN`. Wrong types are bad input.
    fn read(envelope: &Envelope, env: &Env) -> Result<Claim, Failure> {
        let section: LockSection = envelope.section("lock")?.unwrap_or_default();
        let token = match &section.token {
            None | Some(Value::Null) => None,
            Some(Value::String(token)) if !token.is_empty() => Some(token.clone()),
            Some(other) => {
                return Err(Failure::bad_input(format!(
                    "envelope field `lock.token` must be a non-empty string, not {other}"
                )))
            }
        };
        let prior_mtime = match &section.prior_mtime {
            None | Some(Value::Null) => 0,
            Some(value) => value.as_i64().filter(|ms| *ms >= 0).ok_or_else(|| {
                Failure::bad_input(format!(
                    "envelope field `lock.prior_mtime` must be epoch milliseconds, not {value}"
                ))
            })?,
        };
        let token = token.or_else(|| {
            env.get("DREAMKIT_LOCK_TOKEN")
                .and_then(|t| t.to_str())
                .filter(|t| !t.is_empty())
                .map(str::to_string)
        });
        Ok(Claim { token, prior_mtime })
    }
}

#[derive(Debug, Default, Deserialize)]
struct GateSection {
    sessions: Option<Vec<GateSession>>,
}

#[derive(Debug, Deserialize)]
struct GateSession {
    id: String,
}

/// The sessions to review: the gate's list, or (without one) every session changed since the
/// last consolidation, leaving out the hook's own session.
fn sessions(
    envelope: &Envelope,
    project: &Project,
    since: Option<SystemTime>,
    exclude: Option<&str>,
) -> Result<Vec<(String, PathBuf)>, Failure> {
    let gate: GateSection = envelope.section("gate")?.unwrap_or_default();
    let Some(listed) = gate.sessions else {
        let found = sessions_touched_since(&project.transcripts_dir, since, exclude)
            .map_err(|e| Failure::io("list", &project.transcripts_dir, &e))?;
        return Ok(found.into_iter().map(|s| (s.id, s.path)).collect());
    };
    let mut seen = std::collections::HashSet::new();
    listed
        .into_iter()
        // A session listed twice is reviewed (and counted) once.
        .filter(|s| seen.insert(s.id.clone()))
        .map(|s| {
            // The id names files under the state dir: only real session ids.
            if !is_session_id(&s.id) {
                return Err(Failure::bad_input(format!(
                    "envelope field `gate.sessions`: {:?} is not a session id",
                    s.id
                )));
            }
            // The transcript is always the project's own: an envelope cannot point the agent at
            // another file.
            let path = project.transcripts_dir.join(format!("{}.jsonl", s.id));
            Ok((s.id, path))
        })
        .collect()
}

/// `--dry-run`'s answer: what the agent would be told and given (the model engine) or the
/// changes the rules would make (the rules engine), and nothing written.
#[derive(Debug, Serialize, JsonSchema)]
struct DryRun {
    /// `model` or `rules`.
    engine: &'static str,
    /// The model engine: the system and task prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<String>,
    /// The model engine: the tools it would be given.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<ToolSpecSchema>>")]
    tools: Option<Vec<crate::model::ToolSpec>>,
    sessions: Vec<String>,
    /// The model engine: each session's digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    digests: Option<Vec<Digest>>,
    /// The rules engine: what it would change.
    #[serde(skip_serializing_if = "Option::is_none")]
    changes: Option<Vec<store::Change>>,
    unreadable_sessions: Vec<digest::Unreadable>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupted: Option<super::report::Interrupted>,
}

/// A tool as the model is given it (the schema of [`crate::model::ToolSpec`]).
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ToolSpecSchema {
    name: String,
    description: String,
    /// The tool's input, as a JSON Schema.
    input_schema: Value,
}

/// The `run` section of a dry run: a release downstream finds the lease and rolls it back.
#[derive(Debug, Serialize, JsonSchema)]
struct DryRunSection {
    /// Always `dry_run`.
    status: RunStatus,
    /// The rules engine: what it would change.
    #[serde(skip_serializing_if = "Option::is_none")]
    changes: Option<Vec<store::Change>>,
}

/// `--dry-run`'s document: its own keys at the top level (what README and docs read with jq),
/// beside the envelope's sections and `run: {status: "dry_run"}`, each replaced in place.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct DryRunDocument(Envelope);

impl DryRunDocument {
    fn new(mut envelope: Envelope, document: &DryRun) -> DryRunDocument {
        let section = DryRunSection {
            status: RunStatus::DryRun,
            changes: document.changes.clone(),
        };
        envelope.set(RunSection::KEY, json_value(&section));
        if let Value::Object(own) = json_value(document) {
            for (key, value) in own {
                envelope.set(&key, value);
            }
        }
        DryRunDocument(envelope)
    }
}

impl JsonSchema for DryRunDocument {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DryRunDocument".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = DryRun::json_schema(generator);
        let section = generator.subschema_for::<DryRunSection>();
        if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            properties.insert(RunSection::KEY.into(), section.to_value());
        }
        if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
            required.push(RunSection::KEY.into());
        }
        schema
    }
}

/// What a run prints: the envelope it received (passed through, with its `run` section, or
/// with the run's failure), and how it ends.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct RunReport {
    document: RunDocument,
    /// The run failed (the top-level `error` says it too): its exit code.
    #[serde(skip)]
    failure: Option<Failure>,
    /// A signal that came after the conversation ended changes nothing recorded; the exit
    /// code still says it came.
    #[serde(skip)]
    late_signal: Option<i32>,
    /// Why an earlier stage's answer was passed through.
    #[serde(skip)]
    declined: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
enum RunDocument {
    /// An earlier stage said no: the envelope untouched, and why (exit 1).
    PassedThrough(#[schemars(with = "serde_json::Map<String, Value>")] Envelope),
    DryRun(DryRunDocument),
    /// The envelope with the run's section (and, when the run failed, the top-level `error`).
    Ran(Box<Enveloped<RunSection>>),
    /// A failure after this run claimed the lock: its section names its task.
    FailedAfterClaim(#[schemars(with = "FailedAfterClaimSchema")] Envelope),
}

/// The schema of [`RunDocument::FailedAfterClaim`].
#[derive(JsonSchema)]
#[allow(dead_code)]
struct FailedAfterClaimSchema {
    run: FailedRun,
    error: ErrorBody,
}

impl RunReport {
    fn of(document: RunDocument) -> RunReport {
        RunReport {
            document,
            failure: None,
            late_signal: None,
            declined: None,
        }
    }

    fn passed_through(envelope: Envelope, why: String) -> RunReport {
        RunReport {
            declined: Some(why),
            ..RunReport::of(RunDocument::PassedThrough(envelope))
        }
    }

    /// A failure after this run claimed the lock: the envelope with `run` failed as every
    /// stage's failure prints it, naming this run's task.
    fn failed_after_claim(mut envelope: Envelope, task_id: &str, failure: Failure) -> RunReport {
        let section = FailedRun::of(&failure, Some(task_id.to_string()));
        envelope.set(RunSection::KEY, json_value(&section));
        envelope.set("error", json_value(&ErrorBody::of(&failure)));
        RunReport {
            failure: Some(failure),
            ..RunReport::of(RunDocument::FailedAfterClaim(envelope))
        }
    }

    /// The envelope with this section (and the failure, at the top level, as every tool's
    /// failure says it).
    fn ran(mut envelope: Envelope, section: RunSection, failure: Option<Failure>) -> RunReport {
        if let Some(failure) = &failure {
            envelope.set("error", json_value(&ErrorBody::of(failure)));
        }
        RunReport {
            failure,
            ..RunReport::of(RunDocument::Ran(Box::new(Enveloped { envelope, section })))
        }
    }
}

impl Report for RunReport {
    fn exit(&self) -> Exit {
        if let Some(failure) = &self.failure {
            return failure.exit();
        }
        if let Some(signal) = self.late_signal {
            return Exit::of_signal(signal);
        }
        match &self.document {
            RunDocument::PassedThrough(..) => Exit::No,
            RunDocument::DryRun(_) => Exit::Yes,
            RunDocument::Ran(ran) => match ran.section.status {
                RunStatus::Completed
                | RunStatus::Proposed
                | RunStatus::NoChanges
                | RunStatus::DryRun => Exit::Yes,
                // Skipped, or a clean "no" (a lost lock, a limit reached).
                RunStatus::Skipped | RunStatus::Failed | RunStatus::Aborted => Exit::No,
            },
            // Not built without its failure.
            RunDocument::FailedAfterClaim(_) => Exit::Environment,
        }
    }

    /// Why the run said no; a failure (exit 3, 4, a signal) was said when it happened.
    fn note(&self) -> Option<String> {
        match &self.document {
            RunDocument::PassedThrough(_) => self.declined.clone(),
            RunDocument::FailedAfterClaim(_) => self.failure.as_ref().map(Failure::to_string),
            RunDocument::Ran(ran) if self.exit() == Exit::No => {
                let run = &ran.section;
                let message = run.message.as_deref().unwrap_or("did not complete");
                Some(match run.reason {
                    Some("no_sessions" | "no_readable_sessions") => format!(
                        "run {}: {message}; nothing was asked of the model",
                        run.status.as_str()
                    ),
                    _ => format!("run {}: {message}", run.status.as_str()),
                })
            }
            RunDocument::Ran(_) | RunDocument::DryRun(_) => None,
        }
    }
}

/// What a failure of the run leaves in the `run` section (it replaces what was there).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct FailedRun {
    /// `aborted` on SIGINT or SIGTERM, else `failed`.
    pub status: RunStatus,
    /// The failure's kind.
    pub error: &'static str,
    pub message: String,
    /// The run's task, once it claimed the lock (the release downstream lets only the
    /// claim's own task release its hold).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

impl FailedRun {
    fn of(failure: &Failure, task_id: Option<String>) -> FailedRun {
        FailedRun {
            status: match failure {
                Failure::Interrupted { .. } => RunStatus::Aborted,
                _ => RunStatus::Failed,
            },
            error: failure.kind(),
            message: failure.to_string(),
            task_id,
        }
    }
}

impl Section for RunSection {
    const KEY: &'static str = "run";

    fn failed(_held: Option<&Value>, failure: &Failure) -> Value {
        json_value(&FailedRun::of(failure, None))
    }

    fn failed_schema(generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<FailedRun>()
    }
}

/// The `run` section.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RunSection {
    status: RunStatus,
    /// `None` when no task was started (nothing to review, or another runner's claim).
    task_id: Option<String>,
    mode: &'static str,
    /// `model` or `rules`.
    engine: &'static str,
    /// Each change, one by one: the rules engine's with its rule; the model engine's one per
    /// file it changed.
    changes: Vec<store::Change>,
    error: Option<&'static str>,
    /// Why a run was skipped (`no_sessions`, `no_readable_sessions`, `lock_claimed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    message: Option<String>,
    sessions_reviewed: usize,
    files_touched: Vec<String>,
    diff: Diff,
    warnings: Vec<String>,
    summary: Option<String>,
    /// Every assistant turn of the run (the record keeps the last 30).
    turns: u32,
    tool_calls: usize,
    #[schemars(with = "store::UsageRecord")]
    usage: Usage,
    landlock: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    snapshot: Option<String>,
    /// Proposing: the proposal as a unified diff.
    #[serde(skip_serializing_if = "Option::is_none")]
    diff_text: Option<String>,
    /// What killed commands left that this run put back before it started: `recovered`
    /// (an interrupted apply or undo), `journal_corrupt`, `orphans`, `swept`.
    #[serde(flatten)]
    recovered: store::Recovery,
    /// Sessions whose transcript could not be read (they got no digest and are not listed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unreadable_sessions: Vec<digest::Unreadable>,
    /// Another runner claimed this lock first (`lock_claimed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    claimed_by: Option<String>,
    /// The memory check's counts before and after the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    health: Option<check::RunHealth>,
    /// A model run's writes, edits and deletions, counted per tool call: how many named a
    /// source, and how many had one verified against its transcript.
    #[serde(skip_serializing_if = "Option::is_none")]
    provenance: Option<Provenance>,
}

/// `run.provenance`: per tool call that changed a memory file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Provenance {
    /// Write, edit and delete calls that changed a file.
    pub changes: usize,
    /// Of those, the calls that named at least one source.
    pub sourced: usize,
    /// Of those, the calls with at least one source verified.
    pub verified: usize,
}

impl RunSection {
    /// A section for a run that ends before any task starts.
    fn early(status: RunStatus, mode: Mode, engine: Engine) -> RunSection {
        RunSection {
            status,
            task_id: None,
            mode: mode.as_str(),
            engine: engine.as_str(),
            changes: Vec::new(),
            error: None,
            reason: None,
            message: None,
            sessions_reviewed: 0,
            files_touched: Vec::new(),
            diff: Diff::default(),
            warnings: Vec::new(),
            summary: None,
            turns: 0,
            tool_calls: 0,
            usage: Usage::default(),
            landlock: false,
            snapshot: None,
            diff_text: None,
            recovered: store::Recovery::default(),
            unreadable_sessions: Vec::new(),
            claimed_by: None,
            health: None,
            provenance: None,
        }
    }
}

/// `--notify-transcript PATH` checked before the run: a Claude Code transcript, named
/// `<session id>.jsonl`, whose records carry that session id.
fn check_notify_transcript(path: &Path) -> Result<PathBuf, Failure> {
    let file = crate::files::open_regular(path)
        .map_err(|e| Failure::io("open --notify-transcript", path, &e))?;
    drop(file);
    // A link is judged (and later appended to) as the file it leads to.
    let resolved = std::fs::canonicalize(path)
        .map_err(|e| Failure::io("resolve --notify-transcript", path, &e))?;
    let path = resolved.as_path();
    let stem = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".jsonl"))
        .filter(|id| is_session_id(id));
    let Some(session) = stem else {
        return Err(Failure::BadInput {
            reason: Some("not_a_transcript"),
            message: format!(
                "--notify-transcript {} is not a Claude Code transcript (<session id>.jsonl)",
                path.display()
            ),
        });
    };
    let reader = BackwardReader::open(path).map_err(|e| Failure::io("read", path, &e))?;
    for entry in reader.take(200) {
        let Ok(entry) = entry else { continue };
        // The chain's records (with a uuid) say whose transcript it is.
        if let Some(record) = entry.into_record().filter(|r| r.uuid.is_some()) {
            if let Some(id) = record.session_id {
                if id == session {
                    return Ok(path.to_path_buf());
                }
                return Err(Failure::BadInput {
                    reason: Some("not_a_transcript"),
                    message: format!(
                        "--notify-transcript {}: its records belong to session {id}, not to the session its name says",
                        path.display()
                    ),
                });
            }
        }
    }
    Err(Failure::BadInput {
        reason: Some("not_a_transcript"),
        message: format!(
            "--notify-transcript {} holds no Claude Code record with a sessionId",
            path.display()
        ),
    })
}

/// The project dir, when the agent may read it: not with `--no-read-project`, and by default
/// not when it is `/` or holds the home directory (that would open every key and token of the
/// user's to the model; said with -v, and the run goes on without it). Asked for with
/// `--read-project`, such a dir is refused by the sandbox instead (exit 2): the caller named it.
fn readable_project<'a>(args: &RunArgs, project: &'a Project, diag: &Diag) -> Option<&'a Path> {
    if args.no_read_project {
        return None;
    }
    if args.read_project {
        return Some(project.cwd.as_path());
    }
    let home = std::env::var_os("HOME").and_then(|h| std::fs::canonicalize(h).ok());
    let holds_home = home.is_some_and(|home| home.starts_with(&project.cwd));
    if project.cwd == Path::new("/") || holds_home {
        diag.info(&format!(
            "the project dir {} is / or holds the home directory: the agent does not read it",
            project.cwd.display()
        ));
        return None;
    }
    Some(project.cwd.as_path())
}

pub(super) fn run(args: &RunArgs, cx: &Context) -> Result<RunReport, Failure> {
    let diag = cx.diag();
    let (_hints, hook, envelope) = ProjectHints::gather(&args.location, cx.input()?)?;
    if let Upstream::Declined(why) = envelope.upstream()? {
        return Ok(RunReport::passed_through(envelope, why));
    }
    let env = cx.env();
    let project = cx.project(&args.location)?.project.clone();
    let backend = args.backend.open(&project)?;
    let claim = Claim::read(&envelope, env)?;
    let mode = Mode::resolve(args.propose, env)?;
    if claim.token.is_none() && !args.unlocked && !args.dry_run {
        return Err(Failure::Usage(
            "no lock: run dream-run after `dream-lock acquire` (its envelope on stdin) or under \
`dream-lock exec`, or pass --unlocked"
                .into(),
        ));
    }
    let notify = match &args.notify_transcript {
        Some(path) => Some(check_notify_transcript(path)?),
        None => None,
    };
    let since = if claim.prior_mtime > 0 {
        Some(from_epoch_ms(claim.prior_mtime))
    } else if claim.token.is_some() {
        None
    } else {
        backend.last_consolidated()?
    };
    let exclude = hook.as_ref().and_then(|h| h.session_id.as_deref());
    let listed = sessions(&envelope, &project, since, exclude)?;
    let rules = args.engine == Engine::Rules;
    // The rules read no session's conversation: no digests.
    let (digests, unreadable) = if rules {
        (Vec::new(), Vec::new())
    } else {
        digest::build_all(&project.state_dir, &listed, !args.dry_run)
            .map_err(|e| Failure::io("write digests under", &project.state_dir, &e))?
    };
    for problem in &unreadable {
        diag.warn(&format!(
            "session not readable, left out: {}",
            problem.problem
        ));
    }
    // Only the sessions that can be read are reviewed (and named to the model).
    let readable: Vec<&String> = digests.iter().map(|d| &d.session_id).collect();
    let session_ids: Vec<String> = listed
        .iter()
        .map(|(id, _)| id)
        // The rules review no session (they read the transcripts only for anchors).
        .filter(|id| !rules && readable.contains(id))
        .cloned()
        .collect();
    let project_dir = readable_project(args, &project, diag);
    let claude_md = {
        let mut cwds = vec![project.cwd.clone()];
        let reviewed = listed.iter().filter(|(id, _)| session_ids.contains(id));
        cwds.extend(reviewed.filter_map(|(_, transcript)| instructions::session_cwd(transcript)));
        instructions::files(&cwds, &project.config_dir)
    };
    let task_id = new_task_id();
    // A proposing run works in its staging copy, but the model is told (and may use) the real
    // memory dir's path: the sandbox maps it onto the copy.
    let work_dir = match mode {
        Mode::Propose if !args.dry_run => store::staging_dir(&project.state_dir, &task_id),
        _ => project.memory_dir.clone(),
    };
    // The memory's health before the run: its problems are the prompt's concrete work.
    let health_scope =
        check::ProjectScope::new(&project, true, check::ProjectScope::min_hours_from(env));
    let task_for = |dir: &Path| -> (String, Option<check::Health>) {
        let health = match check::run_check(dir, &health_scope.scope()) {
            Ok(health) => Some(health),
            Err(e) => {
                diag.info(&format!("the memory check could not run: {e}"));
                None
            }
        };
        let problems = health.as_ref().and_then(check::Health::for_prompt);
        let task = prompt::task_prompt(&prompt::Task {
            memory_dir: &project.memory_dir,
            transcripts_dir: &project.transcripts_dir,
            digests: &digests,
            session_ids: &session_ids,
            project_dir,
            claude_md: &claude_md,
            problems: problems.as_deref(),
        });
        (task, health)
    };
    if args.dry_run {
        let document = if rules {
            // No memory dir yet (before the first consolidation): nothing to fix.
            let changes = if std::fs::symlink_metadata(&project.memory_dir).is_err() {
                Vec::new()
            } else {
                let health = check::run_check(&project.memory_dir, &health_scope.scope())
                    .map_err(|e| Failure::io("check", &project.memory_dir, &e))?;
                let found = anchors::scan(
                    &project.transcripts_dir,
                    &project.memory_dir,
                    &project.state_dir,
                    false,
                );
                let max_bytes = Limits::default().max_file_bytes as u64;
                by_rules::plan_for(&project.memory_dir, &health, &found, max_bytes)
                    .0
                    .changes
            };
            DryRun {
                engine: args.engine.as_str(),
                prompt: None,
                tools: None,
                sessions: session_ids,
                digests: None,
                changes: Some(changes),
                unreadable_sessions: unreadable,
                interrupted: super::recover::report(&project, diag),
            }
        } else {
            let (task, _) = task_for(&project.memory_dir);
            DryRun {
                engine: args.engine.as_str(),
                prompt: Some(format!("{}\n\n{task}", prompt::system_prompt())),
                tools: Some(Sandbox::tool_specs()),
                sessions: session_ids,
                digests: Some(digests),
                changes: None,
                unreadable_sessions: unreadable,
                interrupted: super::recover::report(&project, diag),
            }
        };
        // Nothing was consolidated: `dream-lock exec` (through the outcome file) and
        // `release` (through run.status) roll the lock back.
        crate::lock::outcome::report(env, diag, RunStatus::DryRun);
        return Ok(RunReport::of(RunDocument::DryRun(DryRunDocument::new(
            envelope, &document,
        ))));
    }
    // Nothing to review: no model request, and the downstream release rolls the time back.
    // The rules need no session: they fix the memory as it is.
    if session_ids.is_empty() && !rules {
        let (reason, message) = if listed.is_empty() {
            ("no_sessions", "no sessions to review".to_string())
        } else {
            (
                "no_readable_sessions",
                format!("none of the {} listed sessions could be read", listed.len()),
            )
        };
        crate::lock::outcome::report(env, diag, RunStatus::Skipped);
        let mut section = RunSection::early(RunStatus::Skipped, mode, args.engine);
        section.reason = Some(reason);
        section.message = Some(message);
        section.unreadable_sessions = unreadable;
        return Ok(RunReport::ran(envelope, section, None));
    }

    let mut deadline = args.model.deadline;
    if backend.name() == "file" && deadline > FILE_LOCK_MAX_DEADLINE {
        diag.warn(
            "--deadline is capped at 50m with the file lock (its claim lapses after an hour)",
        );
        deadline = FILE_LOCK_MAX_DEADLINE;
    }
    // Credentials and flags are checked before anything is recorded; the rules need none.
    let client = match args.engine {
        Engine::Model => Some(Client::new(args.model.config(env, Tier::Main)?)?),
        Engine::Rules => None,
    };
    // One runner per lock: a second run handed the same envelope stops here, while the
    // first runs and after it finished; only a run that crashed hands its claim on.
    if let Some(token) = &claim.token {
        let mut claimed = backend.claim(token, &task_id, None)?;
        if let Claimed::ByOther(other) = &claimed {
            let crashed = !other.alive()
                && TaskStore::new(&project.state_dir)
                    .load(&other.task_id)
                    .map_or(true, |r| r.status == TaskStatus::Running);
            if crashed {
                diag.info(&format!(
                    "task {} claimed this lock and died: its claim is taken over",
                    other.task_id
                ));
                claimed = backend.claim(token, &task_id, Some(&other.task_id))?;
            }
        }
        match claimed {
            Claimed::Ours => {}
            Claimed::ByOther(other) => {
                // The loser holds nothing: skipped, so that nobody reads its envelope as a
                // run to release (its release compares run.task_id with the claim's and
                // changes nothing), and no word to exec's outcome file, which is the
                // winner's.
                let mut section = RunSection::early(RunStatus::Skipped, mode, args.engine);
                section.reason = Some("lock_claimed");
                let message = if other.alive() {
                    format!(
                        "another dream-run (task {}, PID {}) already runs under this lock",
                        other.task_id, other.pid
                    )
                } else {
                    format!(
                        "task {} already ran under this lock: take the lock anew (dream-lock acquire) for another run",
                        other.task_id
                    )
                };
                section.message = Some(message);
                section.claimed_by = Some(other.task_id);
                return Ok(RunReport::ran(envelope, section, None));
            }
            Claimed::NotHeld => {
                let mut section = RunSection::early(RunStatus::Failed, mode, args.engine);
                section.error = Some("lock_lost");
                section.message = Some(
                    "the consolidation lock is no longer held by this envelope's token".into(),
                );
                return Ok(RunReport::ran(envelope, section, None));
            }
        }
    }
    // A lease-based lock (etcd) is renewed for the whole run: nobody else does in the
    // `acquire | dream-run | release` form. (The file lock has no lease: `None`.)
    // From here on a failure names this run's task, as every later outcome does: the release
    // downstream lets only the claim's own task release its hold.
    macro_rules! or_fail {
        ($result:expr) => {
            match $result {
                Ok(value) => value,
                Err(failure) => {
                    return Ok(RunReport::failed_after_claim(envelope, &task_id, failure))
                }
            }
        };
    }
    let keep_alive = match &claim.token {
        Some(token) => or_fail!(backend.keep_alive(token)),
        None => None,
    };
    // From here on, SIGINT/SIGTERM stop the run instead of the process, so it is recorded as
    // aborted and the memory dir restored (checked between turns and tool calls, and by the
    // shell tool while it waits).
    let hold = signals::hold();
    // An apply or undo killed midway is rolled back first, under this run's lock.
    let recovered = or_fail!(store::recover_under_lock(&project, None, diag));
    // Nothing is written in the memory dir when proposing, not even the dir itself.
    let base = match mode {
        Mode::Apply => {
            or_fail!(
                std::fs::create_dir_all(&project.memory_dir).map_err(|e| Failure::io(
                    "create",
                    &project.memory_dir,
                    &e
                ))
            );
            BTreeMap::new()
        }
        Mode::Propose => or_fail!(
            store::stage_copy(&project.memory_dir, &work_dir).map_err(|e| {
                let _ = std::fs::remove_dir_all(store::proposal_dir(&project.state_dir, &task_id));
                Failure::io("copy the memory dir to", &work_dir, &e)
            })
        ),
    };

    // Checked where the run works (a proposal's copy keeps the files' mtimes), after any
    // recovery, so before and after compare like with like.
    let (task, health_before) = task_for(&work_dir);
    let health = health_before.as_ref().map(check::RunHealth::new);
    // The rules plan from the check's findings; without them there is nothing to plan from.
    let rules_input = match (rules, health_before) {
        (false, _) => None,
        (true, Some(before)) => Some((
            before,
            anchors::scan(
                &project.transcripts_dir,
                &project.memory_dir,
                &project.state_dir,
                true,
            ),
        )),
        (true, None) => or_fail!(Err(Failure::environment(format!(
            "the memory check of {} could not run: the rules have nothing to plan from",
            work_dir.display()
        )))),
    };

    let mut roots = vec![
        work_dir.clone(),
        project.transcripts_dir.clone(),
        project.state_dir.join(digest::DIGESTS_DIR),
    ];
    roots.extend(project_dir.map(Path::to_path_buf));
    roots.retain(|r| r.exists());
    let limits = Limits {
        shell_timeout: args.shell_timeout,
        ..Limits::default()
    };
    let mut sandbox = or_fail!(Sandbox::new(&work_dir, &roots, limits).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidInput {
            // A root the agent must never read (`/`, a parent of home): the caller asked.
            Failure::bad_input(e.to_string())
        } else {
            Failure::io("set up the sandbox for", &work_dir, &e)
        }
    }))
    .with_readable_files(&claude_md);
    if mode == Mode::Propose {
        sandbox = sandbox.with_alias(&project.memory_dir);
    }
    // Oldest first: a file the model creates names the newest session as its origin (until
    // the model says where its content came from).
    sandbox = sandbox
        .with_origin_session(session_ids.last().cloned())
        .with_sessions(
            digests
                .iter()
                .map(|d| (d.session_id.clone(), d.transcript.clone()))
                .collect(),
        )
        .with_team_delete(args.allow_team_delete);
    diag.info(&format!(
        "sandbox: Landlock {}",
        if sandbox.landlock_active() {
            "active (spawned commands can only read the readable roots)"
        } else {
            "not available on this kernel (the tokenizer's checks still apply)"
        }
    ));

    let store = TaskStore::new(&project.state_dir);
    let mut record = TaskRecord::new(
        &task_id,
        session_ids.len(),
        claim.prior_mtime,
        claim.token.clone(),
    );
    record.mode = mode.as_str().into();
    record.engine = args.engine.as_str().into();
    or_fail!(store.save(&record).map_err(|e| Failure::io(
        "write the task record in",
        &project.state_dir,
        &e
    )));
    diag.info(&format!(
        "task {task_id}: {} sessions, {} digests, {}",
        session_ids.len(),
        digests.len(),
        client.as_ref().map_or_else(
            || "the rules engine".to_string(),
            |c| format!("model {}", c.model())
        )
    ));

    let mut agent = Agent {
        args,
        diag,
        project: &project,
        backend: backend.as_ref(),
        claim: &claim,
        sandbox,
        store: &store,
        record: &mut record,
        snapshot: None,
        touched: Vec::new(),
        touched_set: HashSet::new(),
        usage: Usage::default(),
        turns: 0,
        tool_calls: 0,
        progress: Progress::new(args, cx.common()),
        fence_failure: None,
        seen: HashMap::new(),
        mode,
        base,
        env,
        notify,
        health,
        health_scope: &health_scope,
        write_time: Duration::ZERO,
        sources: BTreeMap::new(),
        provenance: Provenance::default(),
    };
    let end = match (&client, &rules_input) {
        (Some(client), _) => match client.print_mode() {
            Some(print_mode) => agent.converse_via_client(print_mode, &task, deadline),
            None => agent.converse(client, &task, deadline),
        },
        (None, Some((health, found))) => agent.run_rules(health, found),
        // Not built so: a model run has its client, a rules run its input.
        (None, None) => End::Failed {
            error: "environment",
            message: "the run has neither a model nor the rules' input".into(),
            environment: true,
        },
    };
    if keep_alive
        .as_ref()
        .is_some_and(crate::lock::KeepAlive::lost)
    {
        diag.warn("the lock's lease was lost during the run (expired or revoked)");
    }
    drop(keep_alive);
    let Finished { mut run, failure } = agent.finish(end, &digests);
    run.recovered = recovered;
    if !unreadable.is_empty() {
        run.warnings.push("unreadable_sessions".into());
        run.unreadable_sessions = unreadable;
    }
    let mut report = RunReport::ran(envelope, run, failure);
    report.late_signal = hold.end();
    Ok(report)
}

/// One change per file the model created, edited or deleted, with the sources its tool
/// calls on that file named.
fn model_changes(
    diff: &Diff,
    sources: &BTreeMap<String, Vec<store::Source>>,
) -> Vec<store::Change> {
    let each = |files: &[String], action: store::Action, detail: &str| {
        files
            .iter()
            .map(|file| store::Change {
                file: file.clone(),
                action,
                line: None,
                rule: None,
                detail: detail.to_string(),
                anchor: None,
                sources: sources.get(file).cloned().unwrap_or_default(),
                source: None,
            })
            .collect::<Vec<_>>()
    };
    let mut changes = each(&diff.created, store::Action::Create, "created by the model");
    changes.extend(each(
        &diff.modified,
        store::Action::Edit,
        "edited by the model",
    ));
    changes.extend(each(
        &diff.deleted,
        store::Action::Delete,
        "deleted by the model",
    ));
    changes.sort_by(|a, b| a.file.cmp(&b.file));
    changes
}

/// `20261203T131500Z-1a2b3c4d`: sorts by time, unique, safe as a file name.
fn new_task_id() -> String {
    let stamp = rfc3339(SystemTime::now());
    let compact: String = stamp
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(15)
        .collect();
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{compact}Z-{}", &random[..8])
}

/// How the conversation ended.
#[derive(Debug)]
enum End {
    Completed {
        summary: String,
    },
    /// A limit was reached (exit 1), or with `environment` the machine failed (exit 3).
    Failed {
        error: &'static str,
        message: String,
        environment: bool,
    },
    /// The model failed after retries (exit 4); `kind` is the model error kind.
    Model {
        kind: &'static str,
        message: String,
    },
    LockLost {
        message: String,
        /// The lock could not be checked (etcd unreachable): exit 4, kind `remote`.
        unchecked: bool,
    },
    Aborted {
        signal: i32,
    },
}

impl End {
    /// The model failed after retries: its kind, and the message led by it.
    fn model(error: &crate::model::ModelError) -> End {
        End::Model {
            kind: error.kind.as_str(),
            message: format!("{}: {}", error.kind.as_str(), error.message),
        }
    }

    /// A completed run's summary, for a person (no terminal control), cut to its size.
    fn completed(text: &str) -> End {
        End::Completed {
            summary: check::for_a_person(&cut_chars(text.trim(), SUMMARY_CHARS)),
        }
    }

    /// The run ended at its `--max-turns`.
    fn max_turns(max_turns: u32) -> End {
        End::Failed {
            error: "max_turns",
            message: format!("the agent still wanted tools after --max-turns {max_turns}"),
            environment: false,
        }
    }
}

struct Finished {
    run: RunSection,
    /// What the top-level `error` says when the run failed (exit 3, 4 or a signal).
    failure: Option<Failure>,
}

/// A run in progress: everything the loop and the write guard share.
struct Agent<'a> {
    args: &'a RunArgs,
    diag: &'a Diag,
    project: &'a Project,
    backend: &'a dyn Backend,
    claim: &'a Claim,
    sandbox: Sandbox,
    store: &'a TaskStore,
    record: &'a mut TaskRecord,
    snapshot: Option<Snapshot>,
    /// Relative to the memory dir, in the order first touched.
    touched: Vec<String>,
    touched_set: HashSet<String>,
    usage: Usage,
    /// Every assistant turn so far.
    turns: u32,
    /// Every tool call the model made (run or refused).
    tool_calls: usize,
    progress: Progress,
    /// Why the guard refused to let a write land (a lost lock, a snapshot that failed).
    fence_failure: Option<(Stop, String)>,
    /// Memory file (relative) -> sha256 of what this run last read or wrote there: a write
    /// over anything else would lose another writer's change.
    seen: HashMap<String, String>,
    mode: Mode,
    /// Proposing: rel -> sha256 of each memory file copied into the staging dir.
    base: BTreeMap<String, String>,
    env: &'a Env,
    /// `--notify-transcript`, checked and resolved.
    notify: Option<PathBuf>,
    /// The memory's health before the run (`None` when it could not be checked).
    health: Option<check::RunHealth>,
    health_scope: &'a check::ProjectScope,
    /// Time spent in the tool calls that wrote memory files: about what restoring them
    /// would cost (see [`Agent::time_left`]).
    write_time: Duration,
    /// Memory file (relative) -> the sources the calls that changed it named, in order.
    sources: BTreeMap<String, Vec<store::Source>>,
    provenance: Provenance,
}

/// The write guard: the fencing check, the file limit, the changed-since-read check, and a
/// copy of each file (with what it is about to hold) before the run's first write to it.
struct Fence<'g> {
    backend: &'g dyn Backend,
    token: Option<&'g str>,
    memory_dir: &'g Path,
    snapshot_dir: PathBuf,
    task_id: &'g str,
    snapshot: &'g mut Option<Snapshot>,
    seen: &'g HashMap<String, String>,
    touched: &'g HashSet<String>,
    max_files: usize,
    /// The per-file size cap: a file over it was never tracked in `seen`.
    max_file_bytes: u64,
    /// Why, and the message, when the run must stop.
    stop: Option<(Stop, String)>,
}

/// Why the write guard stopped the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The lock went to another holder: nothing written, nothing restored (`lock_lost`).
    LockLost,
    /// The lock could not be checked (its store is unreachable): treated as lost for the
    /// files, but a `remote` failure (exit 4).
    LockUnchecked,
    /// The snapshot could not be kept: the run fails and is restored.
    Environment,
}

impl Fence<'_> {
    fn relative(&self, path: &Path) -> std::io::Result<String> {
        path.strip_prefix(self.memory_dir)
            .map(|rel| rel.to_string_lossy().into_owned())
            .map_err(|_| {
                std::io::Error::other(format!("{} is outside the memory dir", path.display()))
            })
    }

    /// The snapshot (made on the first write), holding `path` as it is now and what it will
    /// hold.
    fn keep(&mut self, path: &Path, content: Option<&[u8]>) -> std::io::Result<()> {
        if self.snapshot.is_none() {
            *self.snapshot = Some(Snapshot::create(&self.snapshot_dir, self.task_id)?);
        }
        let rel = self.relative(path)?;
        match self.snapshot.as_mut() {
            Some(snapshot) => {
                snapshot.remember(self.memory_dir, &rel)?;
                snapshot.intend(&rel, content.map(store::sha256_hex))
            }
            None => Ok(()),
        }
    }

    /// The changed-since-read check: an existing target must still hold what this run last
    /// read or wrote there (another session may have written it meanwhile).
    fn unchanged_since_read(&self, path: &Path) -> Result<(), GuardRefusal> {
        let rel = path
            .strip_prefix(self.memory_dir)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned();
        let seen = self.seen.get(&rel);
        // Untracked (never read, or over the cap): only its absence lets the write through,
        // and that needs no read of it.
        let now = match seen {
            Some(_) => crate::files::sha256_regular(path, self.max_file_bytes),
            None => std::fs::symlink_metadata(path).map(|_| String::new()),
        };
        let now = match now {
            Ok(hash) => hash,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            // Grown past the cap since it was read: changed.
            Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => String::new(),
            Err(e) => {
                return Err(GuardRefusal {
                    message: format!("cannot read {rel} to check it: {e}"),
                    stop_run: false,
                })
            }
        };
        if seen == Some(&now) {
            return Ok(());
        }
        Err(GuardRefusal {
            message: format!(
                "{rel} changed since you read it (or you have not read it): read it again with \
read_file, then redo the change; nothing was written"
            ),
            stop_run: false,
        })
    }
}

impl WriteGuard for Fence<'_> {
    fn before_write(&mut self, path: &Path, content: Option<&[u8]>) -> Result<(), GuardRefusal> {
        let rel = path
            .strip_prefix(self.memory_dir)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned();
        if !self.touched.contains(&rel) && self.touched.len() >= self.max_files {
            return Err(GuardRefusal {
                message: format!(
                    "not written: this run has changed {} files, its limit (--max-files); \
finish with the files already changed",
                    self.max_files
                ),
                stop_run: false,
            });
        }
        if let Some(token) = self.token {
            let lost = match self.backend.holds(token) {
                Ok(true) => None,
                Ok(false) => Some((
                    Stop::LockLost,
                    "the consolidation lock was taken by another process".to_string(),
                )),
                Err(failure) => Some((
                    Stop::LockUnchecked,
                    format!("the consolidation lock cannot be checked: {failure}"),
                )),
            };
            if let Some((why, message)) = lost {
                self.stop = Some((why, message.clone()));
                return Err(GuardRefusal {
                    message: format!("{message}; nothing was written and the run stops"),
                    stop_run: true,
                });
            }
        }
        self.unchanged_since_read(path)?;
        if let Err(e) = self.keep(path, content) {
            // Without the copy a failure could not be undone: nothing is written.
            let message = format!(
                "cannot keep a copy of {} in {}: {e}",
                path.display(),
                self.snapshot_dir.display()
            );
            self.stop = Some((Stop::Environment, message.clone()));
            return Err(GuardRefusal {
                message,
                stop_run: true,
            });
        }
        Ok(())
    }
}

/// The text the model gets in place of a tool call that is not run.
fn not_run(why: &str) -> (String, bool) {
    (format!("not run: {why}"), true)
}

/// One assistant turn's share of the tools: at most `--max-calls-per-turn` calls, and at
/// most [`TURN_OUTPUT_CAP`] of output, refusals included.
struct TurnBudget {
    max_calls: usize,
    calls: usize,
    output_left: usize,
    refused_once: bool,
}

impl TurnBudget {
    fn new(max_calls: usize) -> TurnBudget {
        TurnBudget {
            max_calls,
            calls: 0,
            output_left: TURN_OUTPUT_CAP,
            refused_once: false,
        }
    }

    /// Keeps the refusals' share of the cap aside when the turn's calls are known, so that
    /// everything the turn returns, refusals included, stays within it.
    fn reserve_for(&mut self, calls: usize) {
        let reserve = (calls * 8 + 1024).min(TURN_OUTPUT_CAP / 2);
        self.output_left = TURN_OUTPUT_CAP - reserve;
    }

    /// `None`: the next call may run; else the refusal to return in its place (the whole
    /// reason once, then two words).
    fn admit(&mut self) -> Option<String> {
        self.calls += 1;
        let why = if self.calls > self.max_calls {
            format!(
                "at most {} tool calls run per turn (--max-calls-per-turn); make the rest in your next turn",
                self.max_calls
            )
        } else if self.output_left == 0 {
            format!(
                "this turn's tool output reached its cap of {} KiB; ask for less at a time (| head, offset/limit) in your next turn",
                TURN_OUTPUT_CAP / 1024
            )
        } else {
            return None;
        };
        if std::mem::replace(&mut self.refused_once, true) {
            Some("not run".to_string())
        } else {
            Some(not_run(&why).0)
        }
    }

    /// Takes a call's output from what is left, cutting it at the cap.
    fn charge(&mut self, content: &mut String) {
        if content.len() > self.output_left {
            let cut = floor_char_boundary(content, self.output_left);
            content.truncate(cut);
            content.push_str(&format!(
                "\n[cut: this turn's tool output reached its cap of {} KiB]\n",
                TURN_OUTPUT_CAP / 1024
            ));
            self.output_left = 0;
        } else {
            self.output_left -= content.len();
        }
    }
}

impl Agent<'_> {
    fn converse(&mut self, client: &Client, task: &str, deadline: Duration) -> End {
        let started = Instant::now();
        let mut request = Request {
            system: vec![SystemBlock {
                text: prompt::system_prompt(),
                cache: true,
            }],
            messages: vec![Message {
                role: Role::User,
                content: vec![Block::Text {
                    text: task.to_string(),
                    cache: false,
                }],
            }],
            tools: Sandbox::tool_specs(),
            cache_tools: true,
            max_tokens: self.args.max_answer_tokens,
            temperature: None,
            answer_schema: None,
        };
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(e) => {
                return End::Failed {
                    error: "environment",
                    message: format!("cannot start the async runtime: {e}"),
                    environment: true,
                }
            }
        };
        let mut asked_to_continue = false;
        for turn in 1..=self.args.max_turns {
            if let Some(signal) = signals::received() {
                return End::Aborted { signal };
            }
            let left = self.time_left(started, deadline);
            if left.is_zero() {
                return self.deadline_passed(deadline);
            }
            let answer = runtime.block_on(async {
                tokio::select! {
                    answer = tokio::time::timeout(left, client.send(&request)) => Ok(answer),
                    signal = crate::model::until_signal() => Err(signal),
                }
            });
            let response = match answer {
                Err(signal) => return End::Aborted { signal },
                Ok(Err(_elapsed)) => return self.deadline_passed(deadline),
                Ok(Ok(Err(error))) => return End::model(&error),
                Ok(Ok(Ok(response))) => response,
            };
            self.usage += response.usage;
            self.record.usage = self.usage.into();
            let calls: Vec<(String, String, Value)> = response
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, input } => {
                        Some((id.clone(), name.clone(), input.clone()))
                    }
                    _ => None,
                })
                .collect();
            self.tool_calls += calls.len();
            let text = response.text();
            self.note_turn(turn, &text, calls.len(), started);
            request.messages.push(Message {
                role: Role::Assistant,
                content: response.content.clone(),
            });
            if calls.is_empty() {
                let cut = response.stop_reason.as_deref() == Some("max_tokens");
                if !cut {
                    return End::completed(&text);
                }
                // A reply cut at the output limit is not an end: asked once to go on.
                if asked_to_continue {
                    return End::Failed {
                        error: "truncated",
                        message: format!(
                            "the model's reply was cut at --max-answer-tokens {} twice, with no tool call",
                            self.args.max_answer_tokens
                        ),
                        environment: false,
                    };
                }
                asked_to_continue = true;
                request.messages.push(Message {
                    role: Role::User,
                    content: vec![Block::text(
                        "Your reply was cut off at the output limit. Continue where it stopped; \
keep it short, and use the tools for changes.",
                    )],
                });
                continue;
            }
            let mut results = Vec::new();
            let mut budget = TurnBudget::new(self.args.max_calls_per_turn as usize);
            budget.reserve_for(calls.len());
            for (id, name, input) in calls {
                let left = self.time_left(started, deadline);
                if left.is_zero() {
                    // The run ends here; the calls not run need no result.
                    return self.deadline_passed(deadline);
                }
                let (content, is_error) = if let Some(text) = budget.admit() {
                    (text, true)
                } else {
                    // No command may outlast the run's deadline.
                    self.sandbox
                        .set_shell_timeout(self.args.shell_timeout.min(left));
                    let (mut content, is_error) = self.call_tool(&name, &input);
                    budget.charge(&mut content);
                    (content, is_error)
                };
                results.push(Block::ToolResult {
                    tool_use_id: id,
                    content,
                    is_error,
                });
                if let Some(end) = self.fence_end() {
                    return end;
                }
                if let Some(signal) = signals::received() {
                    return End::Aborted { signal };
                }
            }
            request.messages.push(Message {
                role: Role::User,
                content: results,
            });
            self.record.files_touched = self.absolute_touched();
            self.save_record();
            if let Some(end) = self.over_token_budget() {
                return end;
            }
        }
        End::max_turns(self.args.max_turns)
    }

    /// Records one assistant turn: the record's turns (for a person: no terminal control, no
    /// secret line), the progress line, the record saved.
    fn note_turn(&mut self, n: u32, text: &str, tool_uses: usize, started: Instant) {
        self.turns = n;
        self.record.push_turn(Turn {
            text: check::for_a_person(&crate::cli::redact::redact(&cut_chars(
                text.trim(),
                TURN_TEXT_CHARS,
            ))),
            tool_use_count: tool_uses,
        });
        self.progress
            .turn(n, text, tool_uses, self.usage, started.elapsed());
        self.save_record();
    }

    /// `--max-tokens` passed (input, output and cache writes so far): how the run ends.
    fn over_token_budget(&self) -> Option<End> {
        let spent = self.usage.input_tokens
            + self.usage.output_tokens
            + self.usage.cache_creation_input_tokens;
        (spent > self.args.max_tokens).then(|| End::Failed {
            error: "max_tokens",
            message: format!(
                "used {spent} tokens, over --max-tokens {}",
                self.args.max_tokens
            ),
            environment: false,
        })
    }

    /// How the run ends when the write guard stopped it.
    fn fence_end(&mut self) -> Option<End> {
        let (why, message) = self.fence_failure.take()?;
        Some(match why {
            Stop::LockLost | Stop::LockUnchecked => End::LockLost {
                message,
                unchecked: why == Stop::LockUnchecked,
            },
            Stop::Environment => End::Failed {
                error: "environment",
                message,
                environment: true,
            },
        })
    }

    /// What is left of the deadline for model work: the restore a failed run needs is kept
    /// out of it, so that the whole run, restore included, ends by the deadline (the restore
    /// itself is never cut short). The restore rewrites each file the run wrote, about what
    /// the writes cost, plus a margin for the record and the check after.
    fn time_left(&self, started: Instant, deadline: Duration) -> Duration {
        let reserve = RESTORE_MARGIN + self.write_time;
        deadline.saturating_sub(started.elapsed() + reserve)
    }

    fn deadline_passed(&self, deadline: Duration) -> End {
        End::Failed {
            error: "deadline",
            message: format!("the run passed its --deadline of {}s", deadline.as_secs()),
            environment: false,
        }
    }

    /// Runs one tool call through the sandbox; returns the tool result's text and error flag.
    fn call_tool(&mut self, name: &str, input: &Value) -> (String, bool) {
        let memory_dir = self.sandbox.memory_dir().to_path_buf();
        let mut fence = Fence {
            backend: self.backend,
            token: self.claim.token.as_deref(),
            memory_dir: &memory_dir,
            snapshot_dir: store::snapshot_dir(&self.project.state_dir, &self.record.task_id),
            task_id: &self.record.task_id,
            snapshot: &mut self.snapshot,
            seen: &self.seen,
            touched: &self.touched_set,
            max_files: self.args.max_files as usize,
            max_file_bytes: self.sandbox.limits().max_file_bytes as u64,
            stop: None,
        };
        self.progress.tool_started(name, input);
        let call_started = Instant::now();
        let result = self.sandbox.call(name, input, &mut fence);
        if result.touched.is_some() {
            self.write_time += call_started.elapsed();
        }
        self.fence_failure = fence.stop.take();
        if let Some(read) = &result.read_path {
            self.remember_read(&memory_dir, read);
        }
        if self.snapshot.is_some() && self.record.snapshot.is_none() {
            self.record.phase = "updating".into();
            self.record.snapshot = Some(
                store::snapshot_dir(&self.project.state_dir, &self.record.task_id)
                    .to_string_lossy()
                    .into_owned(),
            );
            // Once: from here on the record names the snapshot a crash would need.
            self.save_record();
        }
        self.progress.tool(name, input, result.is_error);
        if let Some((path, change)) = &result.touched {
            let rel = path
                .strip_prefix(&memory_dir)
                .unwrap_or(path)
                .to_string_lossy()
                .into_owned();
            if self.touched_set.insert(rel.clone()) {
                self.touched.push(rel.clone());
            }
            self.provenance.changes += 1;
            if !result.sources.is_empty() {
                self.provenance.sourced += 1;
            }
            if result.sources.iter().any(|s| s.verified) {
                self.provenance.verified += 1;
            }
            let named = self.sources.entry(rel.clone()).or_default();
            for source in &result.sources {
                if !named.contains(source) {
                    named.push(source.clone());
                }
            }
            self.track(path, &rel);
            // What the guard recorded is what landed, unless the write failed midway.
            if let Some(snapshot) = self.snapshot.as_mut() {
                if let Err(e) = snapshot.record_written(&memory_dir, &rel) {
                    self.diag
                        .warn(&format!("cannot record what the run wrote to {rel}: {e}"));
                }
            }
            let absolute = self.project.memory_dir.join(&rel);
            self.progress.file_touched(&absolute, *change);
        }
        if result.is_error {
            self.diag.info(&format!(
                "tool {name} refused: {}",
                first_line(&result.content)
            ));
        }
        (result.content, result.is_error)
    }

    /// Hashes a memory file right after a successful read (other readable roots are never
    /// written, so they are not tracked).
    fn remember_read(&mut self, memory_dir: &Path, read: &Path) {
        let Ok(rel) = read.strip_prefix(memory_dir) else {
            return;
        };
        let rel = rel.to_string_lossy().into_owned();
        self.track(read, &rel);
    }

    /// Records what a memory file holds now, hashed in blocks. A file over the per-file cap
    /// is not tracked (the tools cannot write one that size, so no write over it can be
    /// allowed): reading it costs neither its size in memory nor a hash of all of it.
    fn track(&mut self, path: &Path, rel: &str) {
        let cap = self.sandbox.limits().max_file_bytes as u64;
        match crate::files::sha256_regular(path, cap) {
            Ok(hash) => {
                self.seen.insert(rel.to_string(), hash);
            }
            Err(_) => {
                self.seen.remove(rel);
            }
        }
    }

    fn absolute_touched(&self) -> Vec<String> {
        let memory_dir = &self.project.memory_dir;
        self.touched
            .iter()
            .map(|rel| store::absolute_path(memory_dir, rel))
            .collect()
    }

    /// The record is best effort while running (a full disk must not stop a restore); the
    /// final save is reported.
    fn save_record(&self) {
        if let Err(e) = self.store.save(self.record) {
            self.diag
                .warn(&format!("cannot update the task record: {e}"));
        }
    }

    /// What the run changed, file by file against the snapshot (a file written back to what
    /// it was is no change).
    fn changes(&self, dir: &Path) -> Result<(Diff, String), String> {
        let Some(snapshot) = &self.snapshot else {
            return Ok((Diff::default(), String::new()));
        };
        snapshot
            .diff(dir)
            .and_then(|d| {
                let text = super::diff::diff_text(snapshot, dir, &d)?;
                Ok((d, text))
            })
            .map_err(|e| e.to_string())
    }

    /// [`Self::changes`], or `None` once the reason it cannot be had is on stderr.
    fn changes_or_warn(&self, dir: &Path) -> Option<(Diff, String)> {
        match self.changes(dir) {
            Ok(changes) => Some(changes),
            Err(e) => {
                self.diag
                    .warn(&format!("cannot record the run's changes: {e}"));
                None
            }
        }
    }

    /// Records the end, restores or keeps the files, and builds the `run` section.
    fn finish(mut self, end: End, digests: &[Digest]) -> Finished {
        let memory_dir = self.sandbox.memory_dir().to_path_buf();
        let mut warnings: Vec<String> = Vec::new();
        let mut diff = Diff::default();
        let unchecked = matches!(
            end,
            End::LockLost {
                unchecked: true,
                ..
            }
        );
        // What failed, for the exit code and the top-level `error`: the machine, the model,
        // the lock's store or a signal; a limit reached or a lost lock is a clean "no" (none).
        let (status, error, mut message, summary, mut failure, restore) = match end {
            End::Completed { summary } => {
                (RunStatus::Completed, None, None, Some(summary), None, false)
            }
            End::Model { kind, message } => {
                let failure = Failure::Remote {
                    kind,
                    reason: None,
                    message: message.clone(),
                };
                (
                    RunStatus::Failed,
                    Some("model"),
                    Some(message),
                    None,
                    Some(failure),
                    true,
                )
            }
            End::Failed {
                error,
                message,
                environment,
            } => {
                let failure = environment.then(|| Failure::environment(message.clone()));
                (
                    RunStatus::Failed,
                    Some(error),
                    Some(message),
                    None,
                    failure,
                    true,
                )
            }
            // Unfenced either way: nothing is restored. A lock that could not be checked is
            // the store's failure (exit 4, `remote`), one taken over a clean "no".
            End::LockLost { message, unchecked } => {
                let failure = unchecked.then(|| Failure::Remote {
                    kind: "remote",
                    reason: Some("lock_unchecked"),
                    message: message.clone(),
                });
                (
                    RunStatus::Failed,
                    Some(if unchecked { "remote" } else { "lock_lost" }),
                    Some(message),
                    None,
                    failure,
                    false,
                )
            }
            End::Aborted { signal } => (
                RunStatus::Aborted,
                Some("interrupted"),
                Some(format!("stopped by signal {signal}")),
                None,
                Some(Failure::interrupted(signal)),
                true,
            ),
        };
        let proposing = self.mode == Mode::Propose;
        let mut status = status;
        let mut diff_text = None;
        let by_rules = self.args.engine == Engine::Rules;
        if status == RunStatus::Completed && self.tool_calls == 0 && !by_rules {
            warnings.push("no_tool_calls".into());
            self.diag
                .info("the model called no tool: it looked at nothing and changed nothing");
        }
        if status == RunStatus::Completed && proposing {
            match self.changes(&memory_dir) {
                Ok((d, _)) if d.is_empty() => status = RunStatus::NoChanges,
                Ok((d, text)) => {
                    status = RunStatus::Proposed;
                    diff = d;
                    diff_text = Some(text);
                }
                Err(e) => {
                    let problem = format!("cannot record the proposal's changes: {e}");
                    self.diag.warn(&problem);
                    failure = Some(Failure::environment(problem.clone()));
                    message = Some(problem);
                    status = RunStatus::Proposed;
                }
            }
        }
        if status == RunStatus::Proposed {
            // The staging copy holds the result; the before-copies are not needed.
            if let Some(snapshot) = &self.snapshot {
                let _ = std::fs::remove_dir_all(&snapshot.dir);
            }
            self.record.snapshot = None;
            let text = diff_text.get_or_insert_with(String::new).clone();
            if let Err(e) = store::record_proposal(
                self.record,
                &diff,
                text,
                &self.base,
                (&self.project.memory_dir, &memory_dir),
            ) {
                let problem = format!("cannot record the proposal: {e}");
                self.diag.warn(&problem);
                failure = Some(Failure::environment(problem.clone()));
                message = Some(problem);
            }
            crate::lock::outcome::report(self.env, self.diag, RunStatus::Proposed);
        } else if proposing {
            // Nothing to review: the staging copy and its snapshot go.
            if let Some(snapshot) = &self.snapshot {
                let _ = std::fs::remove_dir_all(&snapshot.dir);
            }
            self.record.snapshot = None;
            let _ = std::fs::remove_dir_all(store::proposal_dir(
                &self.project.state_dir,
                &self.record.task_id,
            ));
            if status == RunStatus::NoChanges {
                crate::lock::outcome::report(self.env, self.diag, RunStatus::NoChanges);
            }
        } else if status == RunStatus::Completed {
            if let Some((d, text)) = self.changes_or_warn(&memory_dir) {
                diff = d;
                diff_text = Some(text);
            }
            if diff.is_empty() {
                // Nothing differs from before: nothing to undo, nothing to announce.
                if let Some(snapshot) = &self.snapshot {
                    let _ = std::fs::remove_dir_all(&snapshot.dir);
                }
                self.record.snapshot = None;
                diff_text = None;
                // Rules that found nothing to fix were no consolidation: the lock's time is
                // rolled back, so a model dream is not put off by them.
                if by_rules {
                    status = RunStatus::NoChanges;
                    crate::lock::outcome::report(self.env, self.diag, RunStatus::NoChanges);
                }
            } else {
                self.record.diff =
                    Some(store::absolute_diff(&self.project.memory_dir, diff.clone()));
                self.record.diff_text.clone_from(&diff_text);
            }
            match self.announce(&diff) {
                Ok(None) => {}
                Ok(Some(warning)) => warnings.push(warning),
                Err(problem) => {
                    self.diag.warn(&problem);
                    failure = Some(Failure::environment(problem.clone()));
                    message = Some(problem);
                }
            }
        } else if restore && !self.args.keep_partial {
            if let Some(snapshot) = &self.snapshot {
                match snapshot.restore(&memory_dir) {
                    Ok(skipped) if skipped.is_empty() => {
                        let _ = std::fs::remove_dir_all(&snapshot.dir);
                        self.record.snapshot = None;
                        self.diag.info("restored the memory dir from the snapshot");
                    }
                    Ok(skipped) => {
                        for (rel, why) in &skipped {
                            self.diag.warn(&format!("not restored: {rel}: {why}"));
                        }
                        self.diag.warn(&format!(
                            "the rest was restored; the snapshot stays in {}",
                            snapshot.dir.display()
                        ));
                    }
                    Err(e) => {
                        self.diag.warn(&format!(
                            "cannot restore the snapshot {}: {e}; restore it by hand",
                            snapshot.dir.display()
                        ));
                    }
                }
            }
        } else if status == RunStatus::Failed && restore && self.snapshot.is_some() {
            // --keep-partial: what the run changed stays, and the record says what it is,
            // so that `undo` and the report tell the truth.
            if let Some((d, text)) = self.changes_or_warn(&memory_dir) {
                self.record.diff = Some(store::absolute_diff(&self.project.memory_dir, d.clone()));
                self.record.diff_text = Some(text.clone());
                diff = d;
                diff_text = Some(text);
            }
            self.diag.warn(&format!(
                "--keep-partial: what the failed run changed stays; `dream-run undo {}` restores the snapshot {}",
                self.record.task_id,
                self.record.snapshot.as_deref().unwrap_or("")
            ));
        } else if status == RunStatus::Failed && self.snapshot.is_some() {
            self.diag.warn(&format!(
                "the lock was lost: nothing was restored; the snapshot is {}",
                self.record.snapshot.as_deref().unwrap_or("")
            ));
        }
        // The memory's health after the run (restored or not), against before.
        let mut health = self.health.take();
        if let Some(health) = &mut health {
            match check::run_check(&memory_dir, &self.health_scope.scope()) {
                Ok(after) => {
                    let over = after.counts.get(check::Kind::IndexOverLimit) > 0;
                    if over && matches!(status, RunStatus::Completed | RunStatus::Proposed) {
                        warnings.push("index_over_limit".into());
                        self.diag.warn(&format!(
                            "{} is over Claude Code's limits ({} lines, {} characters): the rest is never loaded",
                            prompt::INDEX_FILE,
                            prompt::INDEX_MAX_LINES,
                            prompt::INDEX_MAX_CHARS
                        ));
                    }
                    if !health.record_after(&after).is_empty() {
                        warnings.push("health_worse".into());
                        self.diag.warn(&format!(
                            "the run left more problems than it found: {} (dream-run check lists them)",
                            health.worse_summary()
                        ));
                    }
                }
                Err(e) => self.diag.info(&format!(
                    "the memory check after the run could not run: {e}"
                )),
            }
            self.record.health = serde_json::to_value(&*health).ok();
        }
        // An exit 1 gets its line from the shared main (the outcome's note).
        if let Some(m) = message
            .as_ref()
            .filter(|_| status != RunStatus::Completed && failure.is_some())
        {
            self.diag.warn(&format!("run {}: {m}", status.as_str()));
        }
        // What the run changed, not what it wrote: a rewrite with the same bytes is no touch.
        let files_touched = match status {
            RunStatus::Completed | RunStatus::Proposed => {
                let mut all: Vec<String> = diff
                    .created
                    .iter()
                    .chain(&diff.modified)
                    .chain(&diff.deleted)
                    .map(|rel| store::absolute_path(&self.project.memory_dir, rel))
                    .collect();
                all.sort();
                all
            }
            RunStatus::NoChanges => Vec::new(),
            _ => self.absolute_touched(),
        };
        // The model's changes, one per file it changed (the rules record theirs one by one).
        if !by_rules && matches!(status, RunStatus::Completed | RunStatus::Proposed) {
            self.record.changes = model_changes(&diff, &self.sources);
        }
        self.record.status = status.into();
        self.record.phase = "done".into();
        self.record.error = error.map(str::to_string);
        self.record.ended_at = Some(rfc3339(SystemTime::now()));
        self.record.files_touched = files_touched.clone();
        self.save_record();
        if status == RunStatus::Completed {
            store::prune_snapshots(self.store, self.diag);
        }
        self.progress.done(status.as_str(), &files_touched);
        Finished {
            failure,
            run: RunSection {
                status,
                task_id: Some(self.record.task_id.clone()),
                mode: self.mode.as_str(),
                engine: self.args.engine.as_str(),
                changes: self.record.changes.clone(),
                error,
                reason: unchecked.then_some("lock_unchecked"),
                message,
                sessions_reviewed: digests.len(),
                files_touched,
                diff: store::absolute_diff(&self.project.memory_dir, diff),
                warnings,
                summary,
                turns: self.turns,
                tool_calls: self.tool_calls,
                usage: self.usage,
                landlock: self.sandbox.landlock_active(),
                snapshot: self.record.snapshot.clone(),
                diff_text: diff_text.filter(|_| proposing),
                recovered: store::Recovery::default(),
                unreadable_sessions: Vec::new(),
                claimed_by: None,
                health,
                provenance: (!by_rules).then_some(self.provenance),
            },
        }
    }

    /// Tells the next session: the pending-updates line, and the transcript record. A
    /// transcript that cannot take the record now is a warning, not a failure.
    fn announce(&self, diff: &Diff) -> Result<Option<String>, String> {
        if diff.is_empty() {
            return Ok(None);
        }
        let at = rfc3339(SystemTime::now());
        let mut files: Vec<String> = diff
            .created
            .iter()
            .chain(&diff.modified)
            .chain(&diff.deleted)
            .map(|rel| store::absolute_path(&self.project.memory_dir, rel))
            .collect();
        files.sort();
        let update = PendingUpdate {
            source: "dream".into(),
            task_id: self.record.task_id.clone(),
            files_touched: files,
            at: at.clone(),
        };
        store::append_pending(&self.project.state_dir, &update).map_err(|e| {
            format!(
                "cannot append to {}: {e}",
                store::pending_path(&self.project.state_dir).display()
            )
        })?;
        let Some(transcript) = &self.notify else {
            return Ok(None);
        };
        let written: Vec<String> = diff
            .created
            .iter()
            .chain(&diff.modified)
            .map(|rel| store::absolute_path(&self.project.memory_dir, rel))
            .collect();
        match notify_transcript(transcript, &written, &at) {
            Ok(Notified::Appended) => Ok(None),
            Ok(Notified::Busy) => {
                self.diag.warn(&format!(
                    "not appended to {}: its last line stayed incomplete (a writer is mid-record); the memory_saved record was skipped",
                    transcript.display()
                ));
                Ok(Some("notify_transcript_skipped".into()))
            }
            Err(e) => Err(format!("cannot append to {}: {e}", transcript.display())),
        }
    }
}

/// Kept out of the deadline for what follows the model's work on a failure besides the
/// file writes: the record, the check after, the release.
const RESTORE_MARGIN: Duration = Duration::from_millis(250);

/// Most bytes of tool output returned to the model in one turn, all calls together.
const TURN_OUTPUT_CAP: usize = 256 * 1024;

/// The largest index at or below `at` that is a char boundary of `text`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    (0..=at.min(text.len()))
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0)
}

/// What became of the `memory_saved` record.
enum Notified {
    Appended,
    /// The transcript's last line stayed incomplete: a writer is mid-record.
    Busy,
}

/// Appends Claude Code's `memory_saved` record to a session transcript, right after its last
/// record (chained to it). A live session appends meanwhile: the record is built again from
/// the new last record; a last line without its newline is waited on briefly, never appended
/// after.
fn notify_transcript(path: &Path, written: &[String], at: &str) -> std::io::Result<Notified> {
    const TRIES: u32 = 40;
    const PAUSE: Duration = Duration::from_millis(50);
    for _ in 0..TRIES {
        match append_memory_saved(path, written, at)? {
            Try::Appended => return Ok(Notified::Appended),
            Try::Grew => {}
            Try::Incomplete => std::thread::sleep(PAUSE),
        }
        if signals::received().is_some() {
            break;
        }
    }
    Ok(Notified::Busy)
}

enum Try {
    Appended,
    /// The transcript grew between the read and the append: nothing was written.
    Grew,
    Incomplete,
}

/// One try at the append.
fn append_memory_saved(path: &Path, written: &[String], at: &str) -> std::io::Result<Try> {
    let reader = BackwardReader::open(path)?;
    let len = reader.file_len();
    if !reader.ends_with_newline()? {
        return Ok(Try::Incomplete);
    }
    // Chained to the newest record, with the fields the client writes on every record.
    let mut client = ClientFields::default();
    for entry in reader.take(200) {
        if let Some(record) = entry?.into_record() {
            if client.note(&record) {
                break;
            }
        }
    }
    let uuid = uuid::Uuid::new_v4().to_string();
    let line = records::line(&MemorySaved::new(&client, written, at, &uuid))?;
    match crate::files::append_undoable(path, &line, Some(len)) {
        Ok(true) => Ok(Try::Appended),
        Ok(false) => Ok(Try::Grew),
        Err(e) => Err(std::io::Error::other(e)),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// One `--events` line.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event<'a> {
    Turn {
        turn: u32,
        text: String,
        tool_use_count: usize,
        elapsed_ms: u64,
        tokens: u64,
    },
    Tool {
        name: &'a str,
        call: String,
        is_error: bool,
    },
    FileTouched {
        path: String,
        change: &'static str,
    },
    Done {
        status: &'a str,
        files_touched: &'a [String],
    },
}

/// What a person watching sees: one status line on a terminal (elapsed time, turn, tokens
/// so far, the tool running), JSON Lines with `--events`, else nothing.
struct Progress {
    events: bool,
    line: Option<indicatif::ProgressBar>,
    turn: std::cell::Cell<u32>,
    tokens: std::cell::Cell<u64>,
}

impl Progress {
    fn new(args: &RunArgs, common: &CommonArgs) -> Progress {
        let line = (!args.events && !common.quiet && std::io::stderr().is_terminal()).then(|| {
            let line = indicatif::ProgressBar::new_spinner();
            line.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {elapsed:>4} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            line.enable_steady_tick(Duration::from_millis(200));
            line.set_message("waiting for the model");
            line
        });
        Progress {
            events: args.events,
            line,
            turn: std::cell::Cell::new(0),
            tokens: std::cell::Cell::new(0),
        }
    }

    fn event(&self, event: &Event) {
        if self.events {
            // Events quote the model, its tool calls and the memory: every text in them is
            // made fit for a person (a reader's `jq -r` prints it raw), no line holding a
            // secret kept, and no known secret either.
            let Ok(text) = serde_json::to_value(event)
                .map(for_a_person)
                .and_then(|value| serde_json::to_string(&value))
            else {
                return;
            };
            let line = format!("{}\n", crate::cli::redact::redact(&text));
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }

    fn status(&self, doing: &str) {
        if let Some(line) = &self.line {
            let tokens = self.tokens.get();
            let tokens = if tokens >= 10_000 {
                format!("{:.1}k", tokens as f64 / 1000.0)
            } else {
                tokens.to_string()
            };
            line.set_message(format!(
                "turn {} · {tokens} tokens · {}",
                self.turn.get(),
                crate::cli::text::for_terminal(&super::check::redact_lines(doing), 60)
            ));
        }
    }

    fn turn(&self, n: u32, text: &str, tool_uses: usize, usage: Usage, elapsed: Duration) {
        self.turn.set(n);
        self.tokens
            .set(usage.input_tokens + usage.output_tokens + usage.cache_creation_input_tokens);
        self.status(if tool_uses == 0 {
            "answered"
        } else {
            "running tools"
        });
        self.event(&Event::Turn {
            turn: n,
            text: cut_chars(text.trim(), TURN_TEXT_CHARS),
            tool_use_count: tool_uses,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            tokens: self.tokens.get(),
        });
    }

    fn tool_started(&self, name: &str, input: &Value) {
        let what = crate::claude::transcript::describe_tool_call(name, Some(input));
        self.status(&what);
    }

    fn tool(&self, name: &str, input: &Value, is_error: bool) {
        let what = crate::claude::transcript::describe_tool_call(name, Some(input));
        self.event(&Event::Tool {
            name,
            call: what,
            is_error,
        });
    }

    fn file_touched(&self, path: &Path, change: Change) {
        self.event(&Event::FileTouched {
            path: path.to_string_lossy().into_owned(),
            change: change.as_str(),
        });
    }

    fn done(&self, status: &str, files: &[String]) {
        if let Some(line) = &self.line {
            line.finish_and_clear();
        }
        self.event(&Event::Done {
            status,
            files_touched: files,
        });
    }
}

/// Every string of an event's JSON (keys too) as a person may read it: memory lines holding
/// a secret replaced whole, control and bidi characters gone.
fn for_a_person(value: Value) -> Value {
    crate::cli::text::map_strings(value, &super::check::for_a_person)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::envelope::{Stage, StageOf};
    use serde_json::json;

    fn envelope(value: Value) -> Envelope {
        let Value::Object(map) = value else {
            unreachable!()
        };
        Envelope::from_map(map)
    }

    #[test]
    fn a_failed_run_replaces_the_held_section_and_keeps_the_other_keys() {
        let received = envelope(json!({
            "project": {"cwd": "/p"},
            "run": {"status": "completed", "task_id": "old"},
            "lock": {"acquired": true, "token": "t"}
        }));
        let failed =
            StageOf::<RunSection>::STAGE.failed(received, &Failure::environment("disk full"));
        assert_eq!(
            failed.to_string(),
            r#"{"project":{"cwd":"/p"},"run":{"status":"failed","error":"environment","message":"disk full"},"lock":{"acquired":true,"token":"t"},"error":{"kind":"environment","message":"disk full"}}"#
        );
    }

    #[test]
    fn a_signal_aborts_the_run() {
        let failed = StageOf::<RunSection>::STAGE.failed(
            envelope(json!({"lock": {"token": "t"}})),
            &Failure::interrupted(libc::SIGTERM),
        );
        assert_eq!(failed["run"]["status"], "aborted");
        assert_eq!(failed["run"]["error"], "interrupted");
        assert_eq!(failed["lock"]["token"], "t");
    }

    #[test]
    fn the_report_decides_the_exit_and_the_line() {
        let received = envelope(json!({"lock": {"token": "t"}}));
        let mut skipped = RunSection::early(RunStatus::Skipped, Mode::Apply, Engine::Model);
        skipped.reason = Some("no_sessions");
        skipped.message = Some("no sessions to review".into());
        let report = RunReport::ran(received.clone(), skipped, None);
        assert_eq!(report.exit(), Exit::No);
        assert_eq!(
            report.note().as_deref(),
            Some("run skipped: no sessions to review; nothing was asked of the model")
        );
        let mut late = RunReport::ran(
            received.clone(),
            RunSection::early(RunStatus::Completed, Mode::Apply, Engine::Model),
            None,
        );
        assert_eq!(late.exit(), Exit::Yes);
        late.late_signal = Some(libc::SIGINT);
        assert_eq!(late.exit(), Exit::Interrupted);
        assert_eq!(late.note(), None);
        let failed = RunReport::ran(
            received.clone(),
            RunSection::early(RunStatus::Failed, Mode::Apply, Engine::Model),
            Some(Failure::environment("cannot append")),
        );
        assert_eq!(failed.exit(), Exit::Environment);
        let text = serde_json::to_string(&failed).unwrap();
        assert!(
            text.starts_with(r#"{"lock":{"token":"t"},"error":{"kind":"environment","message":"cannot append"},"run":{"status":"failed""#),
            "{text}"
        );
        let claimed = RunReport::failed_after_claim(
            received.clone(),
            "T1",
            Failure::interrupted(libc::SIGINT),
        );
        assert_eq!(claimed.exit(), Exit::Interrupted);
        assert_eq!(
            serde_json::to_string(&claimed).unwrap(),
            r#"{"lock":{"token":"t"},"run":{"status":"aborted","error":"interrupted","message":"interrupted by SIGINT","task_id":"T1"},"error":{"kind":"interrupted","message":"interrupted by SIGINT"}}"#
        );
        let passed = RunReport::passed_through(received, "passed through: no".into());
        assert_eq!(passed.exit(), Exit::No);
        assert_eq!(
            serde_json::to_string(&passed).unwrap(),
            r#"{"lock":{"token":"t"}}"#
        );
    }
}
