//! One consolidation: the envelope in, digests, the agent loop over the sandboxed tools with
//! fencing and a snapshot, the task record kept current, the envelope with `run` out.

use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::digest::{self, Digest};
use super::prompt;
use super::review::{self, Mode};
use super::sandbox::{Change, GuardRefusal, Limits, Sandbox, WriteGuard};
use super::snapshot::{self, Diff, Snapshot};
use super::tasks::{self, PendingUpdate, TaskRecord, TaskStore, Turn};
use super::{RunArgs, FILE_LOCK_MAX_DEADLINE};
use crate::claude::paths::ProjectHints;
use crate::claude::sessions::{is_session_id, sessions_touched_since};
use crate::claude::transcript::{cut_chars, BackwardReader};
use crate::claude::{Env, Project};
use crate::cli::envelope::Upstream;
use crate::cli::time::{from_epoch_ms, rfc3339};
use crate::cli::{signals, CommonArgs, Diag, Envelope, Exit, Failure, Input, Outcome};
use crate::lock::Backend;
use crate::model::{Block, Client, Message, Request, Role, SystemBlock, Tier, Usage};

/// Most output tokens per model answer: room for a whole topic file in one `write_file`.
const MAX_ANSWER_TOKENS: u32 = 8192;
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
    listed
        .into_iter()
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

/// The `run` section.
#[derive(Debug, Clone, Serialize)]
struct RunSection {
    status: &'static str,
    task_id: String,
    mode: &'static str,
    error: Option<&'static str>,
    message: Option<String>,
    sessions_reviewed: usize,
    files_touched: Vec<String>,
    diff: Diff,
    warnings: Vec<&'static str>,
    summary: Option<String>,
    turns: usize,
    usage: Usage,
    landlock: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    snapshot: Option<String>,
    /// Proposing: the proposal as a unified diff.
    #[serde(skip_serializing_if = "Option::is_none")]
    diff_text: Option<String>,
}

pub(super) fn run(args: &RunArgs, common: &CommonArgs, diag: &Diag) -> Result<Outcome, Failure> {
    let (hints, hook, envelope) = ProjectHints::gather(&args.location, Input::from_stdin()?)?;
    if let Upstream::Declined(why) = envelope.upstream()? {
        return Ok(Outcome::new(Exit::No, &envelope).with_note(why));
    }
    let env = Env::from_process();
    let (project, _settings) = Project::resolve(&hints, &env)?;
    let backend = args.backend.open(&project)?;
    let claim = Claim::read(&envelope, &env)?;
    let mode = Mode::resolve(args.propose, &env)?;
    if claim.token.is_none() && !args.unlocked && !args.dry_run {
        return Err(Failure::Usage(
            "no lock: run dream-run after `dream-lock acquire` (its envelope on stdin) or under \
`dream-lock exec`, or pass --unlocked"
                .into(),
        ));
    }
    let since = if claim.prior_mtime > 0 {
        Some(from_epoch_ms(claim.prior_mtime))
    } else if claim.token.is_some() {
        None
    } else {
        backend.last_consolidated()?
    };
    let exclude = hook.as_ref().and_then(|h| h.session_id.as_deref());
    let sessions = sessions(&envelope, &project, since, exclude)?;
    let (digests, problems) = digest::build_all(&project.state_dir, &sessions)
        .map_err(|e| Failure::io("write digests under", &project.state_dir, &e))?;
    for problem in &problems {
        diag.warn(&format!("no digest: {problem}"));
    }
    let session_ids: Vec<String> = sessions.iter().map(|(id, _)| id.clone()).collect();
    let project_dir = args.read_project.then_some(project.cwd.as_path());
    let task_id = new_task_id();
    // A proposing run works in its staging copy: that is the memory folder the model sees.
    let work_dir = match mode {
        Mode::Propose if !args.dry_run => review::staging_dir(&project.state_dir, &task_id),
        _ => project.memory_dir.clone(),
    };
    let task = prompt::task_prompt(
        &work_dir,
        &project.transcripts_dir,
        &digests,
        &session_ids,
        project_dir,
    );
    if args.dry_run {
        let document = json!({
            "prompt": format!("{}\n\n{task}", prompt::system_prompt()),
            "tools": Sandbox::tool_specs().iter().map(|t| json!({
                "name": t.name, "description": t.description, "input_schema": t.input_schema,
            })).collect::<Vec<_>>(),
            "sessions": session_ids,
            "digests": digests,
        });
        return Ok(Outcome::new(Exit::Yes, &document));
    }

    let mut deadline = args.model.deadline;
    if backend.name() == "file" && deadline > FILE_LOCK_MAX_DEADLINE {
        diag.warn(
            "--deadline is capped at 50m with the file lock (its claim lapses after an hour)",
        );
        deadline = FILE_LOCK_MAX_DEADLINE;
    }
    // Credentials and flags are checked before anything is recorded.
    let client = Client::new(args.model.config(&env, Tier::Main)?)?;
    // A lease-based lock (etcd) is renewed for the whole run: nobody else does in the
    // `acquire | dream-run | release` form. (The file lock has no lease: `None`.)
    let keep_alive = match &claim.token {
        Some(token) => backend.keep_alive(token)?,
        None => None,
    };
    // Nothing is written in the memory dir when proposing, not even the dir itself.
    let base = match mode {
        Mode::Apply => {
            std::fs::create_dir_all(&project.memory_dir)
                .map_err(|e| Failure::io("create", &project.memory_dir, &e))?;
            BTreeMap::new()
        }
        Mode::Propose => review::stage_copy(&project.memory_dir, &work_dir).map_err(|e| {
            let _ = std::fs::remove_dir_all(review::proposal_dir(&project.state_dir, &task_id));
            Failure::io("copy the memory dir to", &work_dir, &e)
        })?,
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
    let sandbox = Sandbox::new(&work_dir, &roots, limits)
        .map_err(|e| Failure::io("set up the sandbox for", &work_dir, &e))?;
    diag.info(&format!(
        "sandbox: Landlock {}",
        if sandbox.landlock_active() {
            "active (spawned commands can only read the readable roots)"
        } else {
            "not available on this kernel (the tokenizer's checks still apply)"
        }
    ));

    // From the task record on, SIGINT/SIGTERM stop the run instead of the process, so it is
    // recorded as aborted and the memory dir restored (checked between turns and tool calls,
    // and by the shell tool while it waits).
    let hold = signals::hold();
    let store = TaskStore::new(&project.state_dir);
    let mut record = TaskRecord::new(
        &task_id,
        sessions.len(),
        claim.prior_mtime,
        claim.token.clone(),
    );
    store
        .save(&record)
        .map_err(|e| Failure::io("write the task record in", &project.state_dir, &e))?;
    diag.info(&format!(
        "task {task_id}: {} sessions, {} digests, model {}",
        sessions.len(),
        digests.len(),
        client.model()
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
        usage: Usage::default(),
        progress: Progress::new(args, common),
        fence_failure: None,
        seen: HashMap::new(),
        mode,
        base,
        env: &env,
    };
    let end = agent.converse(&client, &task, deadline);
    if keep_alive.as_ref().is_some_and(|k| k.lost()) {
        diag.warn("the lock's lease was lost during the run (expired or revoked)");
    }
    drop(keep_alive);
    let section = agent.finish(end, &digests);
    // A signal that came after the conversation ended changes nothing recorded; the exit
    // code still says it came.
    let late = hold.end();
    let exit = match (section.exit, late) {
        (Exit::Yes | Exit::No, Some(signal)) => signals::exit_for(signal),
        (exit, _) => exit,
    };
    let mut outcome = Outcome::new(exit, &envelope.with("run", &section.run));
    if exit == Exit::No {
        outcome = outcome.with_note(format!(
            "run {}: {}",
            section.run.status,
            section.run.message.as_deref().unwrap_or("did not complete")
        ));
    }
    Ok(outcome)
}

/// `20261203T131500Z-1a2b3c4d`: sorts by time, unique, safe as a file name.
fn new_task_id() -> String {
    let stamp = rfc3339(SystemTime::now());
    let compact: String = stamp
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
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
    Failed {
        error: &'static str,
        message: String,
        exit: Exit,
    },
    LockLost {
        message: String,
    },
    Aborted {
        signal: i32,
    },
}

struct Finished {
    exit: Exit,
    run: RunSection,
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
    usage: Usage,
    progress: Progress,
    /// Why the guard refused to let a write land (a lost lock, a snapshot that failed).
    fence_failure: Option<(bool, String)>,
    /// Memory file (relative) -> sha256 of what this run last read or wrote there: a write
    /// over anything else would lose another writer's change.
    seen: HashMap<String, String>,
    mode: Mode,
    /// Proposing: rel -> sha256 of each memory file copied into the staging dir.
    base: BTreeMap<String, String>,
    env: &'a Env,
}

/// The write guard: the fencing check, and a copy of each file before the run's first
/// write to it.
struct Fence<'g> {
    backend: &'g dyn Backend,
    token: Option<&'g str>,
    memory_dir: &'g Path,
    snapshot_dir: PathBuf,
    task_id: &'g str,
    snapshot: &'g mut Option<Snapshot>,
    seen: &'g HashMap<String, String>,
    /// (lock lost, message) when the run must stop.
    stop: Option<(bool, String)>,
}

impl Fence<'_> {
    /// The snapshot (made on the first write), holding `path` as it is now.
    fn keep(&mut self, path: &Path) -> std::io::Result<()> {
        if self.snapshot.is_none() {
            *self.snapshot = Some(Snapshot::create(&self.snapshot_dir, self.task_id)?);
        }
        let rel = path.strip_prefix(self.memory_dir).map_err(|_| {
            std::io::Error::other(format!("{} is outside the memory dir", path.display()))
        })?;
        match self.snapshot.as_mut() {
            Some(snapshot) => snapshot.remember(self.memory_dir, &rel.to_string_lossy()),
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
        let now = match crate::files::read_regular(path) {
            Ok(bytes) => snapshot::sha256_hex(&bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(GuardRefusal {
                    message: format!("cannot read {rel} to check it: {e}"),
                    stop_run: false,
                })
            }
        };
        if self.seen.get(&rel) == Some(&now) {
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
    fn before_write(&mut self, path: &Path) -> Result<(), GuardRefusal> {
        if let Some(token) = self.token {
            let lost = match self.backend.holds(token) {
                Ok(true) => None,
                Ok(false) => {
                    Some("the consolidation lock was taken by another process".to_string())
                }
                Err(failure) => Some(format!(
                    "the consolidation lock cannot be checked: {failure}"
                )),
            };
            if let Some(message) = lost {
                self.stop = Some((true, message.clone()));
                return Err(GuardRefusal {
                    message: format!("{message}; nothing was written and the run stops"),
                    stop_run: true,
                });
            }
        }
        self.unchanged_since_read(path)?;
        if let Err(e) = self.keep(path) {
            // Without the copy a failure could not be undone: nothing is written.
            let message = format!(
                "cannot keep a copy of {} in {}: {e}",
                path.display(),
                self.snapshot_dir.display()
            );
            self.stop = Some((false, message.clone()));
            return Err(GuardRefusal {
                message,
                stop_run: true,
            });
        }
        Ok(())
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
            max_tokens: MAX_ANSWER_TOKENS,
            temperature: None,
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
                    exit: Exit::Environment,
                }
            }
        };
        for turn in 1..=self.args.max_turns {
            if let Some(signal) = signals::received() {
                return End::Aborted { signal };
            }
            let remaining = deadline.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                return self.deadline_passed(deadline);
            }
            let answer = runtime.block_on(async {
                tokio::select! {
                    answer = tokio::time::timeout(remaining, client.send(&request)) => Ok(answer),
                    signal = crate::model::until_signal() => Err(signal),
                }
            });
            let response = match answer {
                Err(signal) => return End::Aborted { signal },
                Ok(Err(_elapsed)) => return self.deadline_passed(deadline),
                Ok(Ok(Err(error))) => {
                    return End::Failed {
                        error: "model",
                        message: format!("{}: {}", error.kind.as_str(), error.message),
                        exit: Exit::Remote,
                    }
                }
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
            let text = response.text();
            self.record.push_turn(Turn {
                text: crate::cli::redact::redact(&cut_chars(text.trim(), TURN_TEXT_CHARS))
                    .into_owned(),
                tool_use_count: calls.len(),
            });
            self.progress.turn(turn, &text, calls.len());
            self.save_record();
            request.messages.push(Message {
                role: Role::Assistant,
                content: response.content.clone(),
            });
            if calls.is_empty() {
                return End::Completed {
                    summary: cut_chars(text.trim(), SUMMARY_CHARS),
                };
            }
            let mut results = Vec::new();
            for (id, name, input) in calls {
                let result = self.call_tool(&name, &input);
                results.push(Block::ToolResult {
                    tool_use_id: id,
                    content: result.0,
                    is_error: result.1,
                });
                if let Some((lock_lost, message)) = self.fence_failure.take() {
                    return if lock_lost {
                        End::LockLost { message }
                    } else {
                        End::Failed {
                            error: "environment",
                            message,
                            exit: Exit::Environment,
                        }
                    };
                }
                if let Some(signal) = signals::received() {
                    return End::Aborted { signal };
                }
            }
            request.messages.push(Message {
                role: Role::User,
                content: results,
            });
            let spent = self.usage.input_tokens
                + self.usage.output_tokens
                + self.usage.cache_creation_input_tokens;
            if spent > self.args.max_tokens {
                return End::Failed {
                    error: "max_tokens",
                    message: format!(
                        "used {spent} tokens, over --max-tokens {}",
                        self.args.max_tokens
                    ),
                    exit: Exit::No,
                };
            }
        }
        End::Failed {
            error: "max_turns",
            message: format!(
                "the agent still wanted tools after --max-turns {}",
                self.args.max_turns
            ),
            exit: Exit::No,
        }
    }

    fn deadline_passed(&self, deadline: Duration) -> End {
        End::Failed {
            error: "deadline",
            message: format!("the run passed its --deadline of {}s", deadline.as_secs()),
            exit: Exit::No,
        }
    }

    /// Runs one tool call through the sandbox; returns the tool result's text and error flag.
    fn call_tool(&mut self, name: &str, input: &Value) -> (String, bool) {
        let memory_dir = self.sandbox.memory_dir().to_path_buf();
        let mut fence = Fence {
            backend: self.backend,
            token: self.claim.token.as_deref(),
            memory_dir: &memory_dir,
            snapshot_dir: snapshot::dir_of(&self.project.state_dir, &self.record.task_id),
            task_id: &self.record.task_id,
            snapshot: &mut self.snapshot,
            seen: &self.seen,
            stop: None,
        };
        let result = self.sandbox.call(name, input, &mut fence);
        self.fence_failure = fence.stop.take();
        if let Some(read) = &result.read_path {
            self.remember_read(&memory_dir, read);
        }
        if self.snapshot.is_some() && self.record.snapshot.is_none() {
            self.record.phase = "updating".into();
            self.record.snapshot = Some(
                snapshot::dir_of(&self.project.state_dir, &self.record.task_id)
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        self.progress.tool(name, input, result.is_error);
        if let Some((path, change)) = &result.touched {
            let rel = path
                .strip_prefix(&memory_dir)
                .unwrap_or(path)
                .to_string_lossy()
                .into_owned();
            if !self.touched.contains(&rel) {
                self.touched.push(rel.clone());
            }
            match crate::files::read_regular(path) {
                Ok(bytes) => {
                    self.seen.insert(rel.clone(), snapshot::sha256_hex(&bytes));
                }
                Err(_) => {
                    self.seen.remove(&rel);
                }
            }
            if let Some(snapshot) = self.snapshot.as_mut() {
                if let Err(e) = snapshot.record_written(&memory_dir, &rel) {
                    self.diag
                        .warn(&format!("cannot record what the run wrote to {rel}: {e}"));
                }
            }
            let absolute = self.project.memory_dir.join(&rel);
            self.record.files_touched = self.absolute_touched();
            self.progress.file_touched(&absolute, *change);
            self.save_record();
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
        match crate::files::read_regular(read) {
            Ok(bytes) => {
                self.seen.insert(rel, snapshot::sha256_hex(&bytes));
            }
            Err(_) => {
                self.seen.remove(&rel);
            }
        }
    }

    fn absolute_touched(&self) -> Vec<String> {
        let memory_dir = &self.project.memory_dir;
        self.touched
            .iter()
            .map(|rel| snapshot::absolute(memory_dir, rel))
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

    /// Records the end, restores or keeps the files, and builds the `run` section.
    fn finish(self, end: End, digests: &[Digest]) -> Finished {
        let memory_dir = self.sandbox.memory_dir().to_path_buf();
        let mut warnings = Vec::new();
        let mut diff = Diff::default();
        let (status, error, mut message, summary, exit, restore) = match end {
            End::Completed { summary } => {
                ("completed", None, None, Some(summary), Exit::Yes, false)
            }
            End::Failed {
                error,
                message,
                exit,
            } => ("failed", Some(error), Some(message), None, exit, true),
            End::LockLost { message } => (
                "failed",
                Some("lock_lost"),
                Some(message),
                None,
                Exit::No,
                false,
            ),
            End::Aborted { signal } => (
                "aborted",
                Some("interrupted"),
                Some(format!("stopped by signal {signal}")),
                None,
                signals::exit_for(signal),
                true,
            ),
        };
        let mut exit = exit;
        let proposing = self.mode == Mode::Propose;
        let status = if status == "completed" && proposing {
            "proposed"
        } else {
            status
        };
        let mut diff_text = None;
        if status == "proposed" {
            if let Some(snapshot) = &self.snapshot {
                let made = snapshot.diff(&memory_dir).and_then(|d| {
                    let text = review::diff_text(snapshot, &memory_dir, &d)?;
                    Ok((d, text))
                });
                match made {
                    Ok((d, text)) => {
                        diff = d;
                        diff_text = Some(text);
                    }
                    Err(e) => {
                        let problem = format!("cannot record the proposal's changes: {e}");
                        self.diag.warn(&problem);
                        message = Some(problem);
                        exit = Exit::Environment;
                    }
                }
                // The staging copy holds the result; the before-copies are not needed.
                let _ = std::fs::remove_dir_all(&snapshot.dir);
                self.record.snapshot = None;
            }
            let text = diff_text.get_or_insert_with(String::new).clone();
            if let Err(e) = review::record_proposal(
                self.record,
                &diff,
                text,
                &self.base,
                (&self.project.memory_dir, &memory_dir),
            ) {
                let problem = format!("cannot record the proposal: {e}");
                self.diag.warn(&problem);
                message = Some(problem);
                exit = Exit::Environment;
            }
            if prompt::index_over_limit(&memory_dir) {
                warnings.push("index_over_limit");
            }
            review::report_proposed(self.env, self.diag);
        } else if proposing {
            // Nothing to review: the staging copy and its snapshot go.
            if let Some(snapshot) = &self.snapshot {
                let _ = std::fs::remove_dir_all(&snapshot.dir);
            }
            self.record.snapshot = None;
            let _ = std::fs::remove_dir_all(review::proposal_dir(
                &self.project.state_dir,
                &self.record.task_id,
            ));
        } else if status == "completed" {
            if let Some(snapshot) = &self.snapshot {
                match snapshot.diff(&memory_dir) {
                    Ok(d) => {
                        diff_text = review::diff_text(snapshot, &memory_dir, &d).ok();
                        diff = d;
                    }
                    Err(e) => self
                        .diag
                        .warn(&format!("cannot record the run's changes: {e}")),
                }
                self.record.diff = Some(absolute_diff(&self.project.memory_dir, diff.clone()));
                self.record.diff_text.clone_from(&diff_text);
            }
            if prompt::index_over_limit(&memory_dir) {
                warnings.push("index_over_limit");
                self.diag.warn(&format!(
                    "{} is over Claude Code's limits ({} lines, {} characters): the rest is never loaded",
                    prompt::INDEX_FILE,
                    prompt::INDEX_MAX_LINES,
                    prompt::INDEX_MAX_CHARS
                ));
            }
            if let Err(problem) = self.announce(&diff) {
                self.diag.warn(&problem);
                message = Some(problem);
                exit = Exit::Environment;
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
        } else if status == "failed" && self.snapshot.is_some() {
            self.diag.warn(&format!(
                "the lock was lost: nothing was restored; the snapshot is {}",
                self.record.snapshot.as_deref().unwrap_or("")
            ));
        }
        // An exit 1 gets its line from the shared main (the outcome's note).
        if let Some(m) = message
            .as_ref()
            .filter(|_| status != "completed" && exit != Exit::No)
        {
            self.diag.warn(&format!("run {status}: {m}"));
        }
        self.record.status = status.into();
        self.record.phase = "done".into();
        self.record.error = error.map(str::to_string);
        self.record.ended_at = Some(rfc3339(SystemTime::now()));
        self.record.files_touched = self.absolute_touched();
        self.save_record();
        if status == "completed" {
            prune_snapshots(self.store, self.diag);
        }
        self.progress.done(status, &self.record.files_touched);
        Finished {
            exit,
            run: RunSection {
                status,
                task_id: self.record.task_id.clone(),
                mode: self.mode.as_str(),
                error,
                message,
                sessions_reviewed: digests.len().max(self.record.sessions_reviewing),
                files_touched: self.record.files_touched.clone(),
                diff: absolute_diff(&self.project.memory_dir, diff),
                warnings,
                summary,
                turns: self.record.turns.len(),
                usage: self.usage,
                landlock: self.sandbox.landlock_active(),
                snapshot: self.record.snapshot.clone(),
                diff_text: diff_text.filter(|_| proposing),
            },
        }
    }

    /// Tells the next session: the pending-updates line, and the transcript record.
    fn announce(&self, diff: &Diff) -> Result<(), String> {
        if self.touched.is_empty() {
            return Ok(());
        }
        let at = rfc3339(SystemTime::now());
        let update = PendingUpdate {
            source: "dream".into(),
            task_id: self.record.task_id.clone(),
            files_touched: self.absolute_touched(),
            at: at.clone(),
        };
        tasks::append_pending(&self.project.state_dir, &update).map_err(|e| {
            format!(
                "cannot append to {}: {e}",
                tasks::pending_path(&self.project.state_dir).display()
            )
        })?;
        if let Some(transcript) = &self.args.notify_transcript {
            let written: Vec<String> = diff
                .created
                .iter()
                .chain(&diff.modified)
                .map(|rel| snapshot::absolute(&self.project.memory_dir, rel))
                .collect();
            notify_transcript(transcript, &written, &at)
                .map_err(|e| format!("cannot append to {}: {e}", transcript.display()))?;
        }
        Ok(())
    }
}

/// The diff with absolute paths, as files_touched has them.
pub(super) fn absolute_diff(memory_dir: &Path, diff: Diff) -> Diff {
    let abs = |list: Vec<String>| {
        list.iter()
            .map(|rel| snapshot::absolute(memory_dir, rel))
            .collect()
    };
    Diff {
        created: abs(diff.created),
        modified: abs(diff.modified),
        deleted: abs(diff.deleted),
    }
}

/// Appends Claude Code's `memory_saved` record to a session transcript, after its last record.
fn notify_transcript(path: &Path, written: &[String], at: &str) -> std::io::Result<()> {
    // Read and appended in a few tries: Claude Code may append between the two, and the
    // record must follow the real last record.
    for _ in 0..3 {
        if append_memory_saved(path, written, at)? {
            return Ok(());
        }
    }
    Err(std::io::Error::other(
        "the transcript kept growing while the record was being appended",
    ))
}

/// One try: `Ok(false)` when the transcript grew after it was read (nothing written).
fn append_memory_saved(path: &Path, written: &[String], at: &str) -> std::io::Result<bool> {
    let mut parent_uuid = None;
    let mut session_id = None;
    let mut cwd = None;
    let reader = BackwardReader::open(path)?;
    let len = reader.file_len();
    for entry in reader.take(200) {
        if let Some(record) = entry?.into_record() {
            if record.uuid.is_some() {
                parent_uuid = record.uuid;
                session_id = record.session_id;
                cwd = record.cwd;
                break;
            }
        }
    }
    let record = json!({
        "parentUuid": parent_uuid,
        "isSidechain": false,
        "type": "system",
        "subtype": "memory_saved",
        "writtenPaths": written,
        "verb": "Improved",
        "isMeta": false,
        "timestamp": at,
        "uuid": uuid::Uuid::new_v4().to_string(),
        "cwd": cwd,
        "sessionId": session_id,
    });
    let mut line = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
    line.push(b'\n');
    crate::files::append_undoable(path, &line, Some(len)).map_err(std::io::Error::other)
}

/// Keeps the snapshots of the newest completed runs, drops the rest.
pub(super) fn prune_snapshots(store: &TaskStore, diag: &Diag) {
    let Ok((records, _)) = store.list() else {
        return;
    };
    let with_snapshot = records
        .into_iter()
        .filter(|r| r.status == "completed" && r.snapshot.is_some());
    for mut old in with_snapshot.skip(snapshot::KEEP_COMPLETED) {
        if let Some(dir) = old.snapshot.take() {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    diag.warn(&format!("cannot remove the old snapshot {dir}: {e}"));
                    continue;
                }
            }
            let _ = store.save(&old);
        }
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// What a person watching sees: a bar on a terminal, JSON Lines with `--events`, else nothing.
struct Progress {
    events: bool,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(args: &RunArgs, common: &CommonArgs) -> Progress {
        let bar = (!args.events && !common.quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(u64::from(args.max_turns));
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "dream-run {bar:30} turn {pos}/{len} {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        Progress {
            events: args.events,
            bar,
        }
    }

    fn event(&self, value: Value) {
        if self.events {
            // Events quote the model and the tools: no known secret goes out with them.
            let line = format!("{}\n", crate::cli::redact::redact(&value.to_string()));
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }

    fn turn(&self, n: u32, text: &str, tool_uses: usize) {
        if let Some(bar) = &self.bar {
            bar.set_position(u64::from(n));
        }
        self.event(json!({"type": "turn", "turn": n, "text": cut_chars(text.trim(), TURN_TEXT_CHARS), "tool_use_count": tool_uses}));
    }

    fn tool(&self, name: &str, input: &Value, is_error: bool) {
        let what = crate::claude::transcript::describe_tool_call(name, Some(input));
        if let Some(bar) = &self.bar {
            // The model wrote this: no control character reaches the terminal.
            let shown: String = what.chars().filter(|c| !c.is_control()).collect();
            bar.set_message(cut_chars(&shown, 40));
        }
        self.event(json!({"type": "tool", "name": name, "call": what, "is_error": is_error}));
    }

    fn file_touched(&self, path: &Path, change: Change) {
        let change = match change {
            Change::Created => "created",
            Change::Modified => "modified",
            Change::Deleted => "deleted",
        };
        self.event(
            json!({"type": "file_touched", "path": path.to_string_lossy(), "change": change}),
        );
    }

    fn done(&self, status: &str, files: &[String]) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        self.event(json!({"type": "done", "status": status, "files_touched": files}));
    }
}
