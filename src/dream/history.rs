//! Looking back at runs: `tasks`, `pending`, and `undo`.

use std::time::SystemTime;

use serde_json::json;

use super::snapshot::Snapshot;
use super::tasks::{self, TaskRecord, TaskStore};
use super::{PendingArgs, TasksArgs, UndoArgs};
use crate::claude::paths::ProjectHints;
use crate::claude::{Env, Project};
use crate::cli::time::rfc3339;
use crate::cli::{Diag, Exit, Failure, Input, LocationArgs, Outcome};
use crate::lock::{Acquired, RunOutcome};

pub(super) fn project(location: &LocationArgs) -> Result<Project, Failure> {
    let (hints, _hook, _envelope) = ProjectHints::gather(location, Input::from_stdin()?)?;
    Ok(Project::resolve(&hints, &Env::from_process())?.0)
}

/// `dream-run tasks`: every record, newest first; a running record whose process is gone is
/// shown as what it is, a failed run (`error: "orphaned"`).
pub(super) fn tasks(args: &TasksArgs) -> Result<Outcome, Failure> {
    let project = project(&args.location)?;
    let store = TaskStore::new(&project.state_dir);
    let (records, unreadable) = store
        .list()
        .map_err(|e| Failure::io("list the task records in", &project.state_dir, &e))?;
    let records: Vec<TaskRecord> = records
        .into_iter()
        .map(|mut r| {
            if r.is_orphaned() {
                r.status = "failed".into();
                r.error = Some("orphaned".into());
            }
            r
        })
        .collect();
    Ok(Outcome::new(
        Exit::Yes,
        &json!({"tasks": records, "unreadable": unreadable}),
    ))
}

/// `dream-run pending [--clear]`.
pub(super) fn pending(args: &PendingArgs) -> Result<Outcome, Failure> {
    let project = project(&args.location)?;
    let state = &project.state_dir;
    let updates = tasks::read_pending(state)
        .map_err(|e| Failure::io("read", &tasks::pending_path(state), &e))?;
    if args.clear && !updates.is_empty() {
        tasks::clear_pending(state, &updates)
            .map_err(|e| Failure::io("clear", &tasks::pending_path(state), &e))?;
    }
    Ok(Outcome::new(
        Exit::Yes,
        &json!({"updates": updates, "cleared": args.clear && !updates.is_empty()}),
    ))
}

/// `dream-run undo [TASK_ID]`: under the lock, put the files a completed run touched back as
/// they were before it, unless one of them changed since.
pub(super) fn undo(args: &UndoArgs, diag: &Diag) -> Result<Outcome, Failure> {
    let project = project(&args.location)?;
    let store = TaskStore::new(&project.state_dir);
    let mut record = match &args.task_id {
        Some(id) => {
            if !is_task_id(id) {
                return Err(Failure::bad_input(format!("{id:?} is not a task id")));
            }
            match store.load(id) {
                Ok(record) => record,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(Outcome::new(
                        Exit::No,
                        &json!({"undone": false, "reason": "not_found", "task_id": id}),
                    )
                    .with_note(format!("no task {id}")))
                }
                Err(e) => return Err(Failure::io("read", &store.path_of(id), &e)),
            }
        }
        None => {
            let (records, _) = store
                .list()
                .map_err(|e| Failure::io("list the task records in", &project.state_dir, &e))?;
            match records
                .into_iter()
                .find(|r| r.status == "completed" && r.undone_at.is_none() && r.snapshot.is_some())
            {
                Some(record) => record,
                None => {
                    return Ok(Outcome::new(
                        Exit::No,
                        &json!({"undone": false, "reason": "nothing_to_undo"}),
                    )
                    .with_note("no completed run with a snapshot to undo"))
                }
            }
        }
    };
    let refuse = |reason: &str, note: String, files: Vec<String>| {
        Ok(Outcome::new(
            Exit::No,
            &json!({"undone": false, "reason": reason, "task_id": record.task_id, "files": files}),
        )
        .with_note(note))
    };
    if record.status != "completed" || record.undone_at.is_some() {
        let why = if record.undone_at.is_some() {
            "already undone".to_string()
        } else {
            format!("it is {}", record.status)
        };
        return refuse(
            "not_undoable",
            format!("task {} cannot be undone: {why}", record.task_id),
            vec![],
        );
    }
    if record.snapshot.is_none() {
        return refuse(
            "no_snapshot",
            format!(
                "task {} changed nothing or its snapshot was pruned",
                record.task_id
            ),
            vec![],
        );
    }
    // Always the task's own folder under the state dir: the record only says one exists.
    let snapshot_dir = super::snapshot::dir_of(&project.state_dir, &record.task_id);
    let snapshot = Snapshot::load(&snapshot_dir)
        .map_err(|e| Failure::io("read the snapshot", &snapshot_dir, &e))?;

    let backend = args.backend.open(&project)?;
    let lease = match take_lock(backend.as_ref(), "undone", &record.task_id)? {
        Ok(lease) => lease,
        Err(busy) => return Ok(busy),
    };
    // Undo is not a consolidation: the release rolls the last-consolidated time back.
    let release =
        |diag: &Diag| match backend.release(&lease.token, lease.prior_mtime_ms, RunOutcome::Failed)
        {
            Ok(_) => {}
            Err(failure) => diag.warn(&format!("cannot release the lock: {failure}")),
        };
    let memory_dir = &project.memory_dir;
    let changed = match snapshot.changed_since(memory_dir) {
        Ok(changed) => changed,
        Err(e) => {
            release(diag);
            return Err(Failure::io("read", memory_dir, &e));
        }
    };
    if !changed.is_empty() {
        release(diag);
        let files: Vec<String> = changed
            .iter()
            .map(|rel| super::snapshot::absolute(memory_dir, rel))
            .collect();
        return refuse(
            "changed_since",
            format!("not undone: changed since the run: {}", files.join(", ")),
            files,
        );
    }
    let touched: Vec<String> = snapshot.manifest.before.keys().cloned().collect();
    let restored = snapshot.restore(memory_dir);
    release(diag);
    let skipped = restored.map_err(|e| Failure::io("restore the memory dir", memory_dir, &e))?;
    if !skipped.is_empty() {
        // Checked above, so only a race (a file changed, a symlink swapped in) gets here.
        let files: Vec<String> = skipped.iter().map(|(rel, _)| rel.clone()).collect();
        let why: Vec<String> = skipped
            .iter()
            .map(|(rel, why)| format!("{rel}: {why}"))
            .collect();
        return refuse(
            "changed_since",
            format!("partly undone; left alone: {}", why.join("; ")),
            files,
        );
    }
    record.undone_at = Some(rfc3339(SystemTime::now()));
    store
        .save(&record)
        .map_err(|e| Failure::io("write", &store.path_of(&record.task_id), &e))?;
    let files: Vec<String> = touched
        .iter()
        .map(|rel| super::snapshot::absolute(memory_dir, rel))
        .collect();
    diag.info(&format!(
        "undid task {}: {} files restored",
        record.task_id,
        files.len()
    ));
    Ok(Outcome::new(
        Exit::Yes,
        &json!({"undone": true, "task_id": record.task_id, "files": files}),
    ))
}

/// The lock for `undo` and `apply`, which change memory like a run: the lease, or (busy) the
/// exit-1 answer `{<done>: false, reason: "busy", task_id, holder_pid}`.
pub(super) fn take_lock(
    backend: &dyn crate::lock::Backend,
    done: &str,
    task_id: &str,
) -> Result<Result<crate::lock::Lease, Outcome>, Failure> {
    match backend.acquire(std::process::id(), SystemTime::now())? {
        Acquired::Yes(lease) => Ok(Ok(lease)),
        Acquired::Held { holder_pid, .. } => Ok(Err(Outcome::new(
            Exit::No,
            &json!({done: false, "reason": "busy", "task_id": task_id, "holder_pid": holder_pid}),
        )
        .with_note(format!(
            "the consolidation lock is held by {}: try again later",
            holder_pid.map_or("another process".into(), |p| format!("PID {p}"))
        )))),
    }
}

/// Task ids name files: letters, digits and `-` only.
pub(super) fn is_task_id(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}
