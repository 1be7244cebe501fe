//! Finding and rolling back the journal of an interrupted `apply` or `undo`
//! ([`super::journal`]): every command that changes state does it first, under the lock;
//! read-only commands report it and leave it; `dream-run recover` does only this.

use serde::Serialize;

use super::journal::{self, Intent, Journal};
use super::report::{Report, Verb};
use super::tasks::TaskStore;
use super::RecoverArgs;
use crate::claude::Project;
use crate::cli::{Diag, Failure};
use crate::lock::RunOutcome;

/// What a command found and rolled back before doing its own work (`recovered` in its JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recovered {
    /// The interrupted command: `apply` or `undo`.
    pub command: String,
    pub task_id: String,
    pub started_at: String,
    /// Memory files put back as they were before it (absolute).
    pub restored: Vec<String>,
    /// Files left alone because someone changed them since (absolute), with why.
    pub skipped: Vec<Skipped>,
    /// Whether the lock's last-consolidated time was given back too.
    pub lock_rolled_back: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub path: String,
    pub why: String,
}

/// An interrupted command, as read-only commands report it (`interrupted` in their JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interrupted {
    pub command: String,
    pub task_id: String,
    pub started_at: String,
    pub files: usize,
    pub journal: String,
}

/// Whether the intent's command recorded its end (the task record is its commit point): then
/// the journal is only left over and goes without a roll-back.
fn committed(store: &TaskStore, intent: &Intent) -> bool {
    let Ok(record) = store.load(&intent.task_id) else {
        return false;
    };
    match intent.command.as_str() {
        "apply" => record.status == "completed" && record.applied_at.is_some(),
        "undo" => record.status == "undone",
        _ => false,
    }
}

/// The journal of a command that was stopped midway, if any (not one that still runs, nor
/// one whose command had recorded its end).
fn interrupted_journal(project: &Project) -> Result<Option<Journal>, Failure> {
    let found = Journal::find(&project.state_dir)
        .map_err(|e| Failure::io("read the journal", &journal::path(&project.state_dir), &e))?;
    let Some(journal) = found else {
        return Ok(None);
    };
    if journal.intent.in_progress() {
        return Ok(None);
    }
    let store = TaskStore::new(&project.state_dir);
    if committed(&store, &journal.intent) {
        let _ = journal.commit();
        return Ok(None);
    }
    Ok(Some(journal))
}

/// For read-only commands: the interrupted command, reported on stderr; nothing is changed.
pub(super) fn report(project: &Project, diag: &Diag) -> Option<Interrupted> {
    let found = match Journal::find(&project.state_dir) {
        Ok(found) => found,
        Err(e) => {
            diag.warn(&format!(
                "cannot read the journal {}: {e}",
                journal::path(&project.state_dir).display()
            ));
            return None;
        }
    };
    let journal = found.filter(|j| !j.intent.in_progress())?;
    let intent = &journal.intent;
    diag.warn(&format!(
        "an interrupted {} of task {} (started {}) left {} files half-changed: `dream-run recover` (or the next apply, undo, discard or run) rolls it back",
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
        journal: journal::path(&project.state_dir)
            .to_string_lossy()
            .into_owned(),
    })
}

/// For a command that holds the lock: rolls back an interrupted command first. `prior_mtime`
/// is the time the caller's release will give back; when the lock still shows the time the
/// interrupted command's acquire wrote, it becomes the time from before that command.
pub(super) fn under_lock(
    project: &Project,
    prior_mtime: Option<&mut i64>,
    diag: &Diag,
) -> Result<Option<Recovered>, Failure> {
    let Some(journal) = interrupted_journal(project)? else {
        return Ok(None);
    };
    let intent = journal.intent.clone();
    let memory_dir = &project.memory_dir;
    let done = journal
        .roll_back(memory_dir)
        .map_err(|e| Failure::io("roll back the journal of", memory_dir, &e))?;
    let mut lock_rolled_back = false;
    if let Some(prior) = prior_mtime {
        if *prior == intent.lock_time && intent.lock_time != intent.prior_mtime {
            *prior = intent.prior_mtime;
            lock_rolled_back = true;
        }
    }
    let absolute = |rel: &String| super::snapshot::absolute(memory_dir, rel);
    let recovered = Recovered {
        command: intent.command.clone(),
        task_id: intent.task_id.clone(),
        started_at: intent.started_at.clone(),
        restored: done.restored.iter().map(absolute).collect(),
        skipped: done
            .skipped
            .iter()
            .map(|(rel, why)| Skipped {
                path: absolute(rel),
                why: why.clone(),
            })
            .collect(),
        lock_rolled_back,
    };
    diag.warn(&format!(
        "rolled back the interrupted {} of task {}: {} files put back{}",
        intent.command,
        intent.task_id,
        recovered.restored.len(),
        if recovered.skipped.is_empty() {
            String::new()
        } else {
            format!(
                ", {} left alone (changed since): {}",
                recovered.skipped.len(),
                recovered
                    .skipped
                    .iter()
                    .map(|s| s.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    ));
    Ok(Some(recovered))
}

/// For a command that changes state without the lock (`discard`): when an interrupted
/// command left a journal, takes the lock, rolls it back and releases; else nothing.
pub(super) fn when_needed(
    project: &Project,
    backend: &crate::lock::BackendArgs,
    diag: &Diag,
) -> Result<Option<Recovered>, Failure> {
    if interrupted_journal(project)?.is_none() {
        return Ok(None);
    }
    let backend = backend.open(project)?;
    let hold = crate::cli::signals::hold();
    let mut lease = match backend.acquire(std::process::id(), std::time::SystemTime::now())? {
        crate::lock::Acquired::Yes(lease) => lease,
        crate::lock::Acquired::Held { holder_pid, .. } => {
            return Err(Failure::environment(format!(
                "an interrupted command must be rolled back first, but the lock is held by {}: try again later",
                holder_pid.map_or("another process".into(), |p| format!("PID {p}"))
            )))
        }
    };
    let recovered = under_lock(project, Some(&mut lease.prior_mtime_ms), diag);
    if let Err(failure) = backend.release(&lease.token, lease.prior_mtime_ms, RunOutcome::Failed) {
        diag.warn(&format!("cannot release the lock: {failure}"));
    }
    drop(hold);
    recovered
}

/// `dream-run recover`: takes the lock only when there is something to roll back.
pub(super) fn recover(args: &RecoverArgs, diag: &Diag) -> Result<Report, Failure> {
    let project = super::history::project(&args.location)?;
    let Some(task_id) = interrupted_journal(&project)?.map(|j| j.intent.task_id) else {
        diag.info("nothing to recover: no interrupted apply or undo");
        return Ok(Report::Recover {
            recovered: None,
            dry_run: args.dry_run,
            interrupted: None,
            late_signal: None,
        });
    };
    if args.dry_run {
        return Ok(Report::Recover {
            recovered: None,
            dry_run: true,
            interrupted: report(&project, diag),
            late_signal: None,
        });
    }
    let backend = args.backend.open(&project)?;
    let hold = crate::cli::signals::hold();
    let mut lease = match super::history::take_lock(backend.as_ref(), Verb::Recovered, &task_id)? {
        Ok(lease) => lease,
        Err(busy) => return Ok(busy),
    };
    let recovered = under_lock(&project, Some(&mut lease.prior_mtime_ms), diag);
    // Recovering is not a consolidation: the lock goes back as it was.
    if let Err(failure) = backend.release(&lease.token, lease.prior_mtime_ms, RunOutcome::Failed) {
        diag.warn(&format!("cannot release the lock: {failure}"));
    }
    // A signal during the roll-back waited for it: what was done is still reported.
    let late_signal = hold.end();
    Ok(Report::Recover {
        recovered: recovered?,
        dry_run: false,
        interrupted: None,
        late_signal,
    })
}
