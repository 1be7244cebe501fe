//! Putting back what a killed command left half done
//! ([`crate::store::recover_under_lock`]): every command that changes state does it first,
//! under the lock; read-only commands report an interrupted command and leave it;
//! `dream-run recover` does only this.

use schemars::JsonSchema;
use serde::Serialize;

use super::lease::take_lock;
use super::report::{verb, Interrupted, Refused};
use super::RecoverArgs;
use crate::claude::Project;
use crate::cli::{Context, Diag, Exit, Failure, Report};
use crate::lock::{Backend, Lease, RunStatus};
use crate::store::{self, CorruptJournal, Found, OrphanRun, Recovered, Recovery, Swept};

/// `recover`'s answer: what was put back (`recovered` is always said: the journal rolled
/// back, or null), or the lock was busy.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum RecoverReport {
    Recovered(RecoverDone),
    Busy(Refused<verb::Recovered>),
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RecoverDone {
    pub recovered: Option<Recovered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal_corrupt: Option<CorruptJournal>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub orphans: Vec<OrphanRun>,
    #[serde(skip_serializing_if = "Swept::is_empty")]
    pub swept: Swept,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interrupted>,
    /// A signal during the roll-back waited for it: what was done is still reported, and
    /// the exit code says the signal came.
    #[serde(skip)]
    pub late_signal: Option<i32>,
}

impl RecoverDone {
    fn of(recovery: Recovery, dry_run: bool, interrupted: Option<Interrupted>) -> RecoverDone {
        let Recovery {
            journal,
            journal_corrupt,
            orphans,
            swept,
        } = recovery;
        RecoverDone {
            recovered: journal,
            journal_corrupt,
            orphans,
            swept,
            dry_run,
            interrupted,
            late_signal: None,
        }
    }
}

impl Report for RecoverReport {
    fn exit(&self) -> Exit {
        match self {
            RecoverReport::Recovered(RecoverDone {
                late_signal: Some(signal),
                ..
            }) => Exit::of_signal(*signal),
            RecoverReport::Recovered(_) => Exit::Yes,
            RecoverReport::Busy(_) => Exit::No,
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            RecoverReport::Busy(busy) => Some(busy.refusal.note.clone()),
            RecoverReport::Recovered(_) => None,
        }
    }
}

/// For read-only commands: the interrupted command, reported on stderr; nothing is changed.
pub(super) fn report(project: &Project, diag: &Diag) -> Option<Interrupted> {
    let journal_path = store::journal_path(&project.state_dir);
    let journal = match store::find_journal(project) {
        Ok(Found::Interrupted(journal)) => journal,
        Ok(Found::None) => return None,
        Ok(Found::Corrupt(why)) => {
            diag.warn(&format!(
                "the journal {} cannot be used ({why}): `dream-run recover` (or the next apply, undo, discard or run) moves it aside",
                journal_path.display()
            ));
            return None;
        }
        Err(e) => {
            diag.warn(&format!("cannot read the journal: {e}"));
            return None;
        }
    };
    let intent = &journal.intent;
    diag.warn(&format!(
        "an interrupted {} of task {} (started {}) stopped partway through its {} files: `dream-run recover` (or the next apply, undo, discard or run) rolls it back",
        intent.command,
        intent.task_id,
        intent.started_at,
        intent.files.len()
    ));
    Some(Interrupted {
        command: intent.command.clone(),
        task_id: intent.task_id.clone(),
        started_at: intent.started_at.clone(),
        files: intent.files.len(),
        journal: journal_path.to_string_lossy().into_owned(),
    })
}

/// For read-only commands: a run killed while it wrote (a `running` record whose process is
/// gone) is said on stderr with the way back: its writes stay in the memory dir until a
/// command that changes state rolls them back. Its record names its snapshot from its first
/// write on; a proposal writes only its staging copy.
pub(super) fn say_orphaned(record: &store::TaskRecord, diag: &Diag) {
    if record.mode != "propose" && record.snapshot.is_some() {
        diag.warn(&format!(
            "task {} died without an end (killed) while it changed the memory dir: \
             `dream-run recover` rolls it back (so does the next run, apply, undo or discard)",
            record.task_id
        ));
    }
}

/// Whether recovering needs the lock: a journal, a killed run that wrote memory, or a hold
/// its holder never released (its time is no consolidation, and Claude Code reads the
/// lock's mtime).
fn needs_lock(project: &Project, backend: &dyn Backend) -> Result<bool, Failure> {
    Ok(store::needs_recovery(project)? || backend.unreleased_hold()?)
}

/// Puts back under `lease`, then releases it as it was: recovering is no consolidation.
fn under_own_lock(
    project: &Project,
    backend: &dyn Backend,
    mut lease: Lease,
    diag: &Diag,
) -> Result<Recovery, Failure> {
    let recovered = store::recover_under_lock(project, Some(&mut lease.prior_mtime_ms), diag);
    if let Err(failure) = backend.release(&lease.token, lease.prior_mtime_ms, RunStatus::Failed) {
        diag.warn(&format!("cannot release the lock: {failure}"));
    }
    recovered
}

/// For a command that changes state before it takes the lock (`apply`, `undo`, `discard`):
/// sweeps what needs no lock; when a journal or a killed run waits, takes the lock, puts it
/// back and releases.
pub(super) fn when_needed(
    project: &Project,
    backend: &crate::lock::BackendArgs,
    diag: &Diag,
) -> Result<Recovery, Failure> {
    let backend = backend.open(project)?;
    if !needs_lock(project, backend.as_ref())? {
        return Ok(store::sweep(project, diag));
    }
    let hold = crate::cli::signals::hold();
    let lease = match backend.acquire(std::process::id(), std::time::SystemTime::now())? {
        crate::lock::Acquired::Yes(lease) => lease,
        crate::lock::Acquired::Held { holder_pid, .. } => {
            return Err(Failure::environment(format!(
                "an interrupted command must be rolled back first, but the lock is held by {}: try again later",
                holder_pid.map_or("another process".into(), |p| format!("PID {p}"))
            )))
        }
    };
    let recovered = under_own_lock(project, backend.as_ref(), lease, diag);
    drop(hold);
    recovered
}

/// `dream-run recover`: takes the lock only when there is something to put back under it.
pub(super) fn recover(args: &RecoverArgs, cx: &Context) -> Result<RecoverReport, Failure> {
    let diag = cx.diag();
    let project = super::project(&args.location, cx)?;
    let backend = args.backend.open(&project)?;
    let needs_lock = needs_lock(&project, backend.as_ref())?;
    if args.dry_run {
        for record in store::orphaned_runs(&project.state_dir) {
            say_orphaned(&record, diag);
        }
        return Ok(RecoverReport::Recovered(RecoverDone::of(
            Recovery::default(),
            true,
            report(&project, diag),
        )));
    }
    if !needs_lock {
        let swept = store::sweep(&project, diag);
        if swept.is_empty() {
            diag.info("nothing to recover: no interrupted apply, undo or run");
        }
        return Ok(RecoverReport::Recovered(RecoverDone::of(
            swept, false, None,
        )));
    }
    let hold = crate::cli::signals::hold();
    let task_id = store::orphaned_runs(&project.state_dir)
        .first()
        .map(|r| r.task_id.clone())
        .unwrap_or_default();
    let lease = match take_lock(backend.as_ref(), &task_id)? {
        Ok(lease) => lease,
        Err(busy) => return Ok(RecoverReport::Busy(busy.of())),
    };
    let recovered = under_own_lock(&project, backend.as_ref(), lease, diag);
    // A signal during the roll-back waited for it: what was done is still reported.
    let late_signal = hold.end();
    let mut done = RecoverDone::of(recovered?, false, None);
    done.late_signal = late_signal;
    Ok(RecoverReport::Recovered(done))
}
