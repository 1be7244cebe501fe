//! What `dream-run`'s subcommands answer: one typed report each, printed as one JSON object;
//! the exit code of every answer is decided in [`Report::exit`], nowhere else.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::check::Health;
use super::recover::Interrupted;
use super::snapshot::Diff;
use super::tasks::{PendingUpdate, TaskRecord};
use crate::cli::{signals, Exit, Failure, Outcome};
use crate::store::recovery::Recovery;

/// The subcommand a yes/no answer is about: its key in the JSON (`{"undone": true, ...}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Undone,
    Applied,
    Discarded,
    Recovered,
}

impl Verb {
    fn key(self) -> &'static str {
        match self {
            Verb::Undone => "undone",
            Verb::Applied => "applied",
            Verb::Discarded => "discarded",
            Verb::Recovered => "recovered",
        }
    }
}

/// A subcommand's answer.
#[derive(Debug)]
pub enum Report {
    /// `tasks`.
    Tasks {
        tasks: Vec<TaskRecord>,
        unreadable: Vec<String>,
        /// `unreadable_task_records` when some are left out.
        warnings: Vec<&'static str>,
        interrupted: Option<Interrupted>,
    },
    /// `pending [--clear] [--dry-run]`.
    Pending {
        updates: Vec<PendingUpdate>,
        cleared: bool,
        /// `--dry-run`: whether `--clear` would have cleared.
        would_clear: Option<bool>,
        interrupted: Option<Interrupted>,
    },
    /// `show` of a task's recorded changes.
    Shown {
        task_id: String,
        status: String,
        diff: Diff,
        diff_text: String,
        interrupted: Option<Interrupted>,
    },
    /// `show --diff`: the unified diff itself (the one exception to one JSON object).
    DiffText,
    /// `undo`, `apply` or `discard` did it.
    Done {
        verb: Verb,
        task_id: String,
        files: Vec<String>,
        diff: Option<Diff>,
        pending_withdrawn: Option<bool>,
        recovered: Recovery,
        /// A signal that came after the work was done: it is reported in the exit code.
        late_signal: Option<i32>,
        /// Done, but telling the next session failed (the pending-updates line): exit 3.
        problem: Option<String>,
        /// `undo` of the newest consolidation: the last-consolidated time it put back
        /// (`Some(None)`: never consolidated).
        last_consolidated_at: Option<Option<String>>,
    },
    /// `--dry-run` of `undo`, `apply` or `discard`: what would be done.
    WouldDo {
        verb: Verb,
        task_id: String,
        files: Vec<String>,
        diff: Option<Diff>,
        staging: Option<String>,
        interrupted: Option<Interrupted>,
    },
    /// A clean no (exit 1): `reason` says why, `note` is the stderr line.
    Refused {
        verb: Option<Verb>,
        reason: &'static str,
        task_id: Option<String>,
        files: Option<Vec<String>>,
        status: Option<String>,
        holder_pid: Option<u32>,
        recovered: Recovery,
        note: String,
    },
    /// The work stopped midway and everything was put back (exit by [`Cause`]).
    Stopped {
        verb: Verb,
        task_id: String,
        cause: Cause,
        not_rolled_back: Option<Vec<String>>,
        recovered: Recovery,
    },
    /// `--hook`: the SessionStart hook's answer; `None` prints nothing at all.
    SessionStart(Option<String>),
    /// `check`: healthy (exit 0) or not (exit 1).
    Check(Box<Health>),
    /// `recover`.
    Recover {
        recovered: Recovery,
        dry_run: bool,
        interrupted: Option<Interrupted>,
        late_signal: Option<i32>,
    },
}

/// Why multi-file work stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// SIGINT or SIGTERM (exit 130 / 143).
    Signal(i32),
    /// The lock was taken by someone else (exit 1).
    LockLost(String),
    /// A file changed under the work (exit 1).
    ChangedSince(String),
    /// The machine let us down: I/O, a full disk (exit 3).
    Failed(String),
}

impl Cause {
    fn reason(&self) -> &'static str {
        match self {
            Cause::Signal(_) => "interrupted",
            Cause::LockLost(_) => "lock_lost",
            Cause::ChangedSince(_) => "changed_since",
            Cause::Failed(_) => "environment",
        }
    }

    fn message(&self) -> String {
        match self {
            Cause::Signal(signal) => Failure::interrupted(*signal).to_string(),
            Cause::LockLost(m) | Cause::ChangedSince(m) | Cause::Failed(m) => m.clone(),
        }
    }
}

impl Report {
    /// The exit code of every answer, in one place.
    pub fn exit(&self) -> Exit {
        match self {
            Report::Tasks { .. }
            | Report::Pending { .. }
            | Report::Shown { .. }
            | Report::DiffText
            | Report::SessionStart(_)
            | Report::WouldDo { .. } => Exit::Yes,
            Report::Done {
                late_signal: Some(signal),
                ..
            }
            | Report::Recover {
                late_signal: Some(signal),
                ..
            } => signals::exit_for(*signal),
            Report::Done {
                problem: Some(_), ..
            } => Exit::Environment,
            Report::Done { .. } | Report::Recover { .. } => Exit::Yes,
            Report::Refused { .. } => Exit::No,
            Report::Check(health) if health.is_healthy() => Exit::Yes,
            Report::Check(_) => Exit::No,
            Report::Stopped { cause, .. } => match cause {
                Cause::Signal(signal) => signals::exit_for(*signal),
                Cause::LockLost(_) | Cause::ChangedSince(_) => Exit::No,
                Cause::Failed(_) => Exit::Environment,
            },
        }
    }

    /// The one line a failure prints on stderr (exit 1 lines come from [`Report::note`]).
    pub fn problem(&self) -> Option<String> {
        match self {
            Report::Stopped {
                verb,
                cause: cause @ (Cause::Signal(_) | Cause::Failed(_)),
                ..
            } => Some(format!("not {}: {}", verb.key(), cause.message())),
            _ => None,
        }
    }

    /// The one line a clean no prints on stderr.
    fn note(&self) -> Option<String> {
        match self {
            Report::Refused { note, .. } => Some(note.clone()),
            Report::Check(health) if !health.is_healthy() => Some(format!(
                "{} problem{} in {}: {}",
                health.problems.len(),
                if health.problems.len() == 1 { "" } else { "s" },
                health.memory_dir.display(),
                health.counts.summary()
            )),
            Report::Stopped {
                verb,
                cause: cause @ (Cause::LockLost(_) | Cause::ChangedSince(_)),
                ..
            } => Some(format!("not {}: {}", verb.key(), cause.message())),
            _ => None,
        }
    }

    /// A clean no: `{<verb>: false, reason, task_id, ...}`.
    pub fn refused(verb: Option<Verb>, reason: &'static str, note: impl Into<String>) -> Report {
        Report::Refused {
            verb,
            reason,
            task_id: None,
            files: None,
            status: None,
            holder_pid: None,
            recovered: Recovery::default(),
            note: note.into(),
        }
    }

    /// The refusal with its task (and, for answers that name files, its files).
    pub fn of_task(mut self, id: &str) -> Report {
        if let Report::Refused { task_id, .. } = &mut self {
            *task_id = Some(id.to_string());
        }
        self
    }

    pub fn naming(mut self, names: Vec<String>) -> Report {
        if let Report::Refused { files, .. } = &mut self {
            *files = Some(names);
        }
        self
    }

    pub fn with_status(mut self, value: &str) -> Report {
        if let Report::Refused { status, .. } = &mut self {
            *status = Some(value.to_string());
        }
        self
    }

    pub fn after_recovering(mut self, value: Recovery) -> Report {
        if let Report::Refused { recovered, .. } = &mut self {
            *recovered = value;
        }
        self
    }

    pub fn held_by(mut self, pid: Option<u32>) -> Report {
        if let Report::Refused { holder_pid, .. } = &mut self {
            *holder_pid = pid;
        }
        self
    }
}

impl From<Report> for Outcome {
    fn from(report: Report) -> Outcome {
        let exit = report.exit();
        if let Report::DiffText | Report::SessionStart(None) = report {
            return Outcome::without_document(exit);
        }
        let note = report.note();
        let outcome = Outcome::new(exit, &report);
        match note {
            Some(note) if exit == Exit::No => outcome.with_note(note),
            _ => outcome,
        }
    }
}

/// Claude Code's SessionStart hook answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HookOutput<'a> {
    hook_event_name: &'static str,
    additional_context: &'a str,
}

impl Report {
    /// The answer a SessionStart hook gives for this report: what a new session should know
    /// (memory updated since it last looked, a proposal waiting for review), or nothing.
    pub fn for_session_start(self) -> Report {
        let context = match self {
            Report::Pending { updates, .. } if !updates.is_empty() => {
                let mut files: Vec<&str> = updates
                    .iter()
                    .flat_map(|u| u.files_touched.iter().map(String::as_str))
                    .collect();
                files.sort_unstable();
                files.dedup();
                let shown: Vec<&str> = files.iter().take(20).copied().collect();
                let more = files.len().saturating_sub(shown.len());
                Some(format!(
                    "dreamkit consolidated this project's memory since the last session ({} run{}): {} file{} changed: {}{}. Read MEMORY.md again before relying on what you remember of it.",
                    updates.len(),
                    if updates.len() == 1 { "" } else { "s" },
                    files.len(),
                    if files.len() == 1 { "" } else { "s" },
                    shown.join(", "),
                    if more > 0 { format!(" and {more} more") } else { String::new() },
                ))
            }
            Report::Shown {
                task_id,
                diff,
                status,
                ..
            } if status == "proposed" => {
                let count = diff.created.len() + diff.modified.len() + diff.deleted.len();
                Some(format!(
                    "A memory consolidation proposal from dreamkit (task {task_id}) waits for review: it would create {}, modify {} and delete {} memory file{} ({count} in all). Tell the user; they can review it with `dream-run show --diff`, apply it with `dream-run apply` or drop it with `dream-run discard`.",
                    diff.created.len(),
                    diff.modified.len(),
                    diff.deleted.len(),
                    if count == 1 { "" } else { "s" },
                ))
            }
            Report::Check(health) if !health.is_healthy() => {
                let shown: Vec<String> = health
                    .problems
                    .iter()
                    .take(10)
                    .map(super::check::Problem::one_line)
                    .collect();
                let more = health.problems.len().saturating_sub(shown.len());
                Some(format!(
                    "dreamkit's memory check found {} problem{} in this project's memory ({}):\n{}{}\nThe next consolidation works on them; `dream-run check` lists them all.",
                    health.problems.len(),
                    if health.problems.len() == 1 { "" } else { "s" },
                    health.counts.summary(),
                    shown.join("\n"),
                    if more > 0 { format!("\n... and {more} more") } else { String::new() },
                ))
            }
            _ => None,
        };
        Report::SessionStart(context.map(|c| crate::cli::text::sanitize(&c).into_owned()))
    }
}

/// The top-level `error` of a stopped command.
#[derive(Serialize)]
struct ErrorBody {
    kind: &'static str,
    message: String,
}

/// Writes `key: value` when there is a value.
fn some<M: SerializeMap, T: Serialize>(
    map: &mut M,
    key: &str,
    value: &Option<T>,
) -> Result<(), M::Error> {
    match value {
        Some(value) => map.serialize_entry(key, value),
        None => Ok(()),
    }
}

impl Serialize for Report {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            Report::Tasks {
                tasks,
                unreadable,
                warnings,
                interrupted,
            } => {
                // The records quote the model (turns, summary, errors) and the memory (the
                // diff): shown as any such text is shown to a person.
                let tasks = serde_json::to_value(tasks).map_err(serde::ser::Error::custom)?;
                map.serialize_entry(
                    "tasks",
                    &crate::cli::text::map_strings(tasks, &super::check::for_a_person),
                )?;
                map.serialize_entry("unreadable", unreadable)?;
                map.serialize_entry("warnings", warnings)?;
                some(&mut map, "interrupted", interrupted)?;
            }
            Report::Pending {
                updates,
                cleared,
                would_clear,
                interrupted,
            } => {
                map.serialize_entry("updates", updates)?;
                map.serialize_entry("cleared", cleared)?;
                if would_clear.is_some() {
                    map.serialize_entry("dry_run", &true)?;
                }
                some(&mut map, "would_clear", would_clear)?;
                some(&mut map, "interrupted", interrupted)?;
            }
            Report::Shown {
                task_id,
                status,
                diff,
                diff_text,
                interrupted,
            } => {
                map.serialize_entry("task_id", task_id)?;
                map.serialize_entry("status", status)?;
                map.serialize_entry("diff", diff)?;
                map.serialize_entry("diff_text", diff_text)?;
                some(&mut map, "interrupted", interrupted)?;
            }
            Report::DiffText => {}
            Report::SessionStart(context) => {
                map.serialize_entry(
                    "hookSpecificOutput",
                    &HookOutput {
                        hook_event_name: "SessionStart",
                        additional_context: context.as_deref().unwrap_or(""),
                    },
                )?;
            }
            Report::Done {
                verb,
                task_id,
                files,
                diff,
                pending_withdrawn,
                recovered,
                late_signal: _,
                problem,
                last_consolidated_at,
            } => {
                map.serialize_entry(verb.key(), &true)?;
                map.serialize_entry("task_id", task_id)?;
                if *verb != Verb::Discarded {
                    map.serialize_entry("files", files)?;
                }
                some(&mut map, "diff", diff)?;
                some(&mut map, "pending_withdrawn", pending_withdrawn)?;
                recovered.write_fields(&mut map)?;
                some(&mut map, "warning", problem)?;
                some(&mut map, "last_consolidated_at", last_consolidated_at)?;
            }
            Report::WouldDo {
                verb,
                task_id,
                files,
                diff,
                staging,
                interrupted,
            } => {
                map.serialize_entry(verb.key(), &false)?;
                map.serialize_entry("dry_run", &true)?;
                map.serialize_entry("task_id", task_id)?;
                if *verb != Verb::Discarded {
                    map.serialize_entry("files", files)?;
                }
                some(&mut map, "diff", diff)?;
                some(&mut map, "staging", staging)?;
                some(&mut map, "interrupted", interrupted)?;
            }
            Report::Refused {
                verb,
                reason,
                task_id,
                files,
                status,
                holder_pid,
                recovered,
                note: _,
            } => {
                if let Some(verb) = verb {
                    map.serialize_entry(verb.key(), &false)?;
                }
                map.serialize_entry("reason", reason)?;
                some(&mut map, "task_id", task_id)?;
                some(&mut map, "status", status)?;
                some(&mut map, "files", files)?;
                if *reason == "busy" {
                    map.serialize_entry("holder_pid", holder_pid)?;
                }
                recovered.write_fields(&mut map)?;
            }
            Report::Stopped {
                verb,
                task_id,
                cause,
                not_rolled_back,
                recovered,
            } => {
                map.serialize_entry(verb.key(), &false)?;
                map.serialize_entry("reason", cause.reason())?;
                map.serialize_entry("task_id", task_id)?;
                map.serialize_entry("files", &[] as &[String])?;
                some(&mut map, "not_rolled_back", not_rolled_back)?;
                recovered.write_fields(&mut map)?;
                let message = format!("not {}: {}", verb.key(), cause.message());
                map.serialize_entry(
                    "error",
                    &ErrorBody {
                        kind: cause.reason(),
                        message,
                    },
                )?;
            }
            Report::Check(health) => {
                map.serialize_entry("memory_dir", &health.memory_dir.to_string_lossy())?;
                map.serialize_entry(
                    "project_root",
                    &health.project_root.as_ref().map(|p| p.to_string_lossy()),
                )?;
                map.serialize_entry("files", &health.files)?;
                map.serialize_entry("index", &health.index)?;
                map.serialize_entry("problems", &health.problems)?;
                map.serialize_entry("counts", &health.counts)?;
                map.serialize_entry("notes", &health.notes)?;
            }
            Report::Recover {
                recovered,
                dry_run,
                interrupted,
                late_signal: _,
            } => {
                // `recovered` is always said here: the journal rolled back, or null.
                if recovered.journal.is_none() {
                    map.serialize_entry("recovered", &None::<()>)?;
                }
                recovered.write_fields(&mut map)?;
                if *dry_run {
                    map.serialize_entry("dry_run", &true)?;
                }
                some(&mut map, "interrupted", interrupted)?;
            }
        }
        map.end()
    }
}
