//! Putting back what a killed command left half done ([`crate::store::recovery`]): every
//! command that changes state does it first, under the lock; read-only commands report an
//! interrupted command and leave it; `dream-run recover` does only this.

use serde::Serialize;

use super::report::{Report, Verb};
use super::RecoverArgs;
use crate::claude::Project;
use crate::cli::{Diag, Failure};
use crate::lock::{Backend, Lease, RunStatus};
use crate::store::journal;
use crate::store::recovery::{self, Found, Recovery};

/// An interrupted command, as read-only commands report it (`interrupted` in their JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interrupted {
    pub command: String,
    pub task_id: String,
    pub started_at: String,
    pub files: usize,
    pub journal: String,
}

/// For read-only commands: the interrupted command, reported on stderr; nothing is changed.
pub(super) fn report(project: &Project, diag: &Diag) -> Option<Interrupted> {
    let journal_path = journal::path(&project.state_dir);
    let journal = match recovery::find_journal(project) {
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
pub(super) fn say_orphaned(record: &crate::store::tasks::TaskRecord, diag: &Diag) {
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
    Ok(recovery::needs_lock(project)? || backend.unreleased_hold()?)
}

/// Puts back under `lease`, then releases it as it was: recovering is no consolidation.
fn under_own_lock(
    project: &Project,
    backend: &dyn Backend,
    mut lease: Lease,
    diag: &Diag,
) -> Result<Recovery, Failure> {
    let recovered = recovery::under_lock(project, Some(&mut lease.prior_mtime_ms), diag);
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
        return Ok(recovery::sweep(project, diag));
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
pub(super) fn recover(args: &RecoverArgs, diag: &Diag) -> Result<Report, Failure> {
    let project = super::history::project(&args.location)?;
    let backend = args.backend.open(&project)?;
    let needs_lock = needs_lock(&project, backend.as_ref())?;
    if args.dry_run {
        for record in recovery::orphaned_runs(&project.state_dir) {
            say_orphaned(&record, diag);
        }
        return Ok(Report::Recover {
            recovered: Recovery::default(),
            dry_run: true,
            interrupted: report(&project, diag),
            late_signal: None,
        });
    }
    if !needs_lock {
        let swept = recovery::sweep(&project, diag);
        if swept.is_empty() {
            diag.info("nothing to recover: no interrupted apply, undo or run");
        }
        return Ok(Report::Recover {
            recovered: swept,
            dry_run: false,
            interrupted: None,
            late_signal: None,
        });
    }
    let hold = crate::cli::signals::hold();
    let task_id = recovery::orphaned_runs(&project.state_dir)
        .first()
        .map(|r| r.task_id.clone())
        .unwrap_or_default();
    let lease = match super::history::take_lock(backend.as_ref(), Verb::Recovered, &task_id)? {
        Ok(lease) => lease,
        Err(busy) => return Ok(busy),
    };
    let recovered = under_own_lock(&project, backend.as_ref(), lease, diag);
    // A signal during the roll-back waited for it: what was done is still reported.
    let late_signal = hold.end();
    Ok(Report::Recover {
        recovered: recovered?,
        dry_run: false,
        interrupted: None,
        late_signal,
    })
}
