//! The answers dream-run's subcommands share: the shapes of `undo`, `apply` and `discard`
//! (done, would do, refused, stopped), an interrupted command as read-only commands report
//! it, and the SessionStart hook's answer. Each subcommand has its own report type built from
//! these; its exit code is decided in its `Report::exit`, nowhere else.

use schemars::JsonSchema;
use serde::Serialize;

use crate::cli::{ErrorBody, Exit, Failure, Report};
use crate::store::{Diff, Recovery};

/// An interrupted command, as read-only commands report it (`interrupted` in their JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Interrupted {
    pub command: String,
    pub task_id: String,
    pub started_at: String,
    pub files: usize,
    pub journal: String,
}

/// The subcommand a yes/no answer is about: its key in the JSON (`{"undone": true, ...}`).
pub trait Verb: Serialize + JsonSchema {
    /// The key, and the word of the stderr line (`not undone: ...`).
    const WORD: &'static str;
    /// Whether the answer names the files it touched (`discard` has none).
    const NAMES_FILES: bool = true;

    fn said(done: bool) -> Self;
}

/// The verbs, each a one-field object flattened first into its answer.
pub mod verb {
    use super::*;

    macro_rules! verb {
        ($(#[$doc:meta])* $name:ident, $key:ident, $names_files:expr) => {
            $(#[$doc])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
            pub struct $name {
                $key: bool,
            }

            impl Verb for $name {
                const WORD: &'static str = stringify!($key);
                const NAMES_FILES: bool = $names_files;

                fn said(done: bool) -> Self {
                    $name { $key: done }
                }
            }
        };
    }

    verb!(
        /// `undo`.
        Undone,
        undone,
        true
    );
    verb!(
        /// `apply`.
        Applied,
        applied,
        true
    );
    verb!(
        /// `discard`.
        Discarded,
        discarded,
        false
    );
    verb!(
        /// `recover` (only its busy answer: `{"recovered": false, "reason": "busy", ...}`).
        Recovered,
        recovered,
        true
    );
}

/// A clean no (exit 1): `reason` says why, `note` is the stderr line.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Refusal {
    /// `not_found`, `no_proposal`, `nothing_to_undo`, `not_undoable`, `no_snapshot`,
    /// `changed_since`, `staging_changed`, `not_a_proposal`, `no_changes_recorded`, `busy`.
    pub reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<String>>,
    /// Said only when the lock is busy (null: the holder is not known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder_pid: Option<Option<u32>>,
    #[serde(flatten)]
    pub recovered: Recovery,
    #[serde(skip)]
    pub note: String,
}

impl Refusal {
    pub fn new(reason: &'static str, note: impl Into<String>) -> Refusal {
        Refusal {
            reason,
            task_id: None,
            status: None,
            files: None,
            holder_pid: None,
            recovered: Recovery::default(),
            note: note.into(),
        }
    }

    /// The refusal with its task.
    pub fn of_task(mut self, id: &str) -> Refusal {
        self.task_id = Some(id.to_string());
        self
    }

    /// The files it is about (answers that name files).
    pub fn naming(mut self, names: Vec<String>) -> Refusal {
        self.files = Some(names);
        self
    }

    pub fn with_status(mut self, value: &str) -> Refusal {
        self.status = Some(value.to_string());
        self
    }

    pub fn after_recovering(mut self, value: Recovery) -> Refusal {
        self.recovered = value;
        self
    }

    /// The lock is busy: its holder, when known.
    pub fn held_by(mut self, pid: Option<u32>) -> Refusal {
        self.holder_pid = Some(pid);
        self
    }

    /// As the answer of `V`: `{<verb>: false, reason, ...}`.
    pub fn of<V: Verb>(self) -> Refused<V> {
        Refused {
            verb: V::said(false),
            refusal: self,
        }
    }
}

/// A refusal of `V`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Refused<V> {
    #[serde(flatten)]
    pub verb: V,
    #[serde(flatten)]
    pub refusal: Refusal,
}

impl<V> Refused<V> {
    pub fn after_recovering(mut self, value: Recovery) -> Refused<V> {
        self.refusal.recovered = value;
        self
    }
}

/// `V` did it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Done<V> {
    #[serde(flatten)]
    pub verb: V,
    pub task_id: String,
    /// Absent for `discard`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_withdrawn: Option<bool>,
    #[serde(flatten)]
    pub recovered: Recovery,
    /// Done, but telling the next session failed (the pending-updates line): exit 3.
    #[serde(rename = "warning", skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// `undo` of the newest consolidation: the last-consolidated time it put back (null:
    /// never consolidated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_consolidated_at: Option<Option<String>>,
    /// A signal that came after the work was done: it is reported in the exit code.
    #[serde(skip)]
    pub late_signal: Option<i32>,
}

impl<V: Verb> Done<V> {
    pub fn new(task_id: String, files: Vec<String>, recovered: Recovery) -> Done<V> {
        Done {
            verb: V::said(true),
            task_id,
            files: V::NAMES_FILES.then_some(files),
            diff: None,
            pending_withdrawn: None,
            recovered,
            problem: None,
            last_consolidated_at: None,
            late_signal: None,
        }
    }
}

/// `--dry-run` of `V`: what would be done.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct WouldDo<V> {
    #[serde(flatten)]
    pub verb: V,
    /// Always true.
    pub dry_run: bool,
    pub task_id: String,
    /// Absent for `discard`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staging: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interrupted>,
}

impl<V: Verb> WouldDo<V> {
    pub fn new(task_id: String, files: Vec<String>, interrupted: Option<Interrupted>) -> Self {
        WouldDo {
            verb: V::said(false),
            dry_run: true,
            task_id,
            files: V::NAMES_FILES.then_some(files),
            diff: None,
            staging: None,
            interrupted,
        }
    }
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

    fn exit(&self) -> Exit {
        match self {
            Cause::Signal(signal) => Exit::of_signal(*signal),
            Cause::LockLost(_) | Cause::ChangedSince(_) => Exit::No,
            Cause::Failed(_) => Exit::Environment,
        }
    }
}

/// The work of `V` stopped midway and everything was put back.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Stopped<V> {
    #[serde(flatten)]
    pub verb: V,
    pub reason: &'static str,
    pub task_id: String,
    /// Always empty: nothing stayed written.
    pub files: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_rolled_back: Option<Vec<String>>,
    #[serde(flatten)]
    pub recovered: Recovery,
    pub error: ErrorBody,
    #[serde(skip)]
    cause: Cause,
}

impl<V: Verb> Stopped<V> {
    pub fn new(
        task_id: String,
        cause: Cause,
        not_rolled_back: Option<Vec<String>>,
        recovered: Recovery,
    ) -> Self {
        Stopped {
            verb: V::said(false),
            reason: cause.reason(),
            task_id,
            files: Vec::new(),
            not_rolled_back,
            recovered,
            error: ErrorBody {
                kind: cause.reason(),
                reason: None,
                message: format!("not {}: {}", V::WORD, cause.message()),
                status: None,
                attempts: None,
            },
            cause,
        }
    }
}

/// The answer of `undo`, `apply` or `discard` (`V`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Change<V> {
    Done(Done<V>),
    WouldDo(WouldDo<V>),
    Refused(Refused<V>),
    Stopped(Stopped<V>),
}

impl<V: Verb> From<Refusal> for Change<V> {
    fn from(refusal: Refusal) -> Self {
        Change::Refused(refusal.of())
    }
}

impl<V: Verb> Report for Change<V> {
    fn exit(&self) -> Exit {
        match self {
            Change::Done(Done {
                late_signal: Some(signal),
                ..
            }) => Exit::of_signal(*signal),
            Change::Done(Done {
                problem: Some(_), ..
            }) => Exit::Environment,
            Change::Done(_) | Change::WouldDo(_) => Exit::Yes,
            Change::Refused(_) => Exit::No,
            Change::Stopped(stopped) => stopped.cause.exit(),
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            Change::Refused(refused) => Some(refused.refusal.note.clone()),
            Change::Stopped(stopped) => Some(stopped.error.message.clone()),
            Change::Done(_) | Change::WouldDo(_) => None,
        }
    }
}

/// Claude Code's SessionStart hook answer: what a new session should know (memory updated
/// since it last looked, a proposal waiting for review, problems in the memory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionStart {
    pub hook_specific_output: HookOutput,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookOutput {
    /// Always `SessionStart`.
    pub hook_event_name: &'static str,
    pub additional_context: String,
}

impl SessionStart {
    /// The answer for this context (made safe for a terminal), or none at all.
    pub fn of(context: Option<String>) -> Option<SessionStart> {
        context.map(|context| SessionStart {
            hook_specific_output: HookOutput {
                hook_event_name: "SessionStart",
                additional_context: crate::cli::text::sanitize(&context).into_owned(),
            },
        })
    }
}

/// A command's report, or (`--hook`) its SessionStart answer: printed only when there is
/// something to say, and always exit 0 (a failure would show as a hook error at every
/// session start).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum OrHook<R> {
    Report(R),
    Hook(Option<SessionStart>),
}

impl<R> OrHook<R> {
    /// A hook's answer to what the command returned: `context` says what a session should
    /// know of its report; a failure is said on stderr, and answered with nothing.
    pub fn hook(
        result: Result<R, Failure>,
        diag: &crate::cli::Diag,
        context: impl FnOnce(&R) -> Option<String>,
    ) -> OrHook<R> {
        match result {
            Ok(report) => OrHook::Hook(SessionStart::of(context(&report))),
            Err(failure) => {
                diag.warn(&failure.to_string());
                OrHook::Hook(None)
            }
        }
    }

    /// The report, or with `--hook` the SessionStart answer made from it (`context`).
    pub fn of(
        hook: bool,
        result: Result<R, Failure>,
        diag: &crate::cli::Diag,
        context: impl FnOnce(&R) -> Option<String>,
    ) -> Result<OrHook<R>, Failure> {
        match hook {
            true => Ok(OrHook::hook(result, diag, context)),
            false => result.map(OrHook::Report),
        }
    }

    /// What [`OrHook::of`] prints, as `--schema` describes it.
    pub fn schema(hook: bool, generator: &mut schemars::SchemaGenerator) -> schemars::Schema
    where
        R: JsonSchema,
    {
        match hook {
            true => hook_schema(generator),
            false => generator.subschema_for::<R>(),
        }
    }
}

impl<R: Report> Report for OrHook<R> {
    fn exit(&self) -> Exit {
        match self {
            OrHook::Report(report) => report.exit(),
            OrHook::Hook(_) => Exit::Yes,
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            OrHook::Report(report) => report.note(),
            OrHook::Hook(_) => None,
        }
    }

    fn printed(&self) -> bool {
        match self {
            OrHook::Report(report) => report.printed(),
            OrHook::Hook(answer) => answer.is_some(),
        }
    }
}

/// The schema `--schema --hook` prints: one SessionStart answer.
pub fn hook_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    generator.subschema_for::<SessionStart>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(report: &impl Serialize) -> String {
        serde_json::to_string(report).unwrap()
    }

    #[test]
    fn a_refusal_names_the_verb_first_and_the_holder_only_when_busy() {
        let refused: Change<verb::Applied> = Refusal::new("changed_since", "not applied: x")
            .of_task("t1")
            .naming(vec!["/m/a.md".into()])
            .into();
        assert_eq!(
            json(&refused),
            r#"{"applied":false,"reason":"changed_since","task_id":"t1","files":["/m/a.md"]}"#
        );
        assert_eq!(refused.exit(), Exit::No);
        assert_eq!(refused.note().as_deref(), Some("not applied: x"));
        let busy: Change<verb::Undone> = Refusal::new("busy", "held")
            .of_task("t")
            .held_by(None)
            .into();
        assert_eq!(
            json(&busy),
            r#"{"undone":false,"reason":"busy","task_id":"t","holder_pid":null}"#
        );
    }

    #[test]
    fn done_and_dry_runs_name_files_except_for_discard() {
        let done: Change<verb::Discarded> =
            Change::Done(Done::new("t".into(), vec!["x".into()], Recovery::default()));
        assert_eq!(json(&done), r#"{"discarded":true,"task_id":"t"}"#);
        let mut undone =
            Done::<verb::Undone>::new("t".into(), vec!["x".into()], Recovery::default());
        undone.pending_withdrawn = Some(false);
        undone.last_consolidated_at = Some(None);
        assert_eq!(
            json(&undone),
            r#"{"undone":true,"task_id":"t","files":["x"],"pending_withdrawn":false,"last_consolidated_at":null}"#
        );
        let would = WouldDo::<verb::Applied>::new("t".into(), vec![], None);
        assert_eq!(
            json(&would),
            r#"{"applied":false,"dry_run":true,"task_id":"t","files":[]}"#
        );
    }

    #[test]
    fn a_late_signal_or_a_problem_decides_the_exit_of_done_work() {
        let mut done = Done::<verb::Applied>::new("t".into(), vec![], Recovery::default());
        done.problem = Some("cannot append".into());
        assert_eq!(Change::Done(done.clone()).exit(), Exit::Environment);
        assert_eq!(
            json(&done),
            r#"{"applied":true,"task_id":"t","files":[],"warning":"cannot append"}"#
        );
        done.late_signal = Some(libc::SIGTERM);
        assert_eq!(Change::Done(done).exit(), Exit::Terminated);
    }

    #[test]
    fn stopped_work_says_why_in_its_error_and_on_stderr() {
        let stopped = Change::Stopped(Stopped::<verb::Undone>::new(
            "t".into(),
            Cause::Signal(libc::SIGINT),
            None,
            Recovery::default(),
        ));
        assert_eq!(
            json(&stopped),
            r#"{"undone":false,"reason":"interrupted","task_id":"t","files":[],"error":{"kind":"interrupted","message":"not undone: interrupted by SIGINT"}}"#
        );
        assert_eq!(stopped.exit(), Exit::Interrupted);
        assert_eq!(
            stopped.note().as_deref(),
            Some("not undone: interrupted by SIGINT")
        );
    }

    #[test]
    fn a_hook_answers_with_its_context_or_prints_nothing() {
        let diag = crate::cli::Diag::new("dream-run", true, false);
        let nothing: OrHook<Change<verb::Undone>> =
            OrHook::hook(Err(Failure::environment("x")), &diag, |_| None);
        assert_eq!(nothing.exit(), Exit::Yes);
        assert!(!nothing.printed());
        assert_eq!(nothing.note(), None);
        let answer: OrHook<u8> = OrHook::Hook(SessionStart::of(Some("a\u{1b}[2Jb".into())));
        let text = json(&answer);
        assert!(
            text.starts_with(
                r#"{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"a"#
            ),
            "{text}"
        );
        assert!(!text.contains("\\u001b"), "{text}");
    }
}
