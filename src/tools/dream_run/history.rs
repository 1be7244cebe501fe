//! Looking back at runs: `tasks`, `pending`, and `undo`.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::json;

use super::journal::{Intent, Journal};
use super::snapshot::Snapshot;
use super::tasks::{self, TaskRecord, TaskStore};
use super::{PendingArgs, TasksArgs, UndoArgs};
use crate::claude::paths::ProjectHints;
use crate::claude::{Env, Project};
use crate::cli::time::rfc3339;
use crate::cli::{signals, Diag, Exit, Failure, Input, LocationArgs, Outcome};
use crate::lock::{Acquired, RunOutcome};

pub(super) fn project(location: &LocationArgs) -> Result<Project, Failure> {
    let (hints, _hook, _envelope) = ProjectHints::gather(location, Input::from_stdin()?)?;
    Ok(Project::resolve(&hints, &Env::from_process())?.0)
}

/// `dream-run tasks`: every record, newest first; a running record whose process is gone is
/// shown as what it is, a failed run (`error: "orphaned"`).
pub(super) fn tasks(args: &TasksArgs, diag: &Diag) -> Result<Outcome, Failure> {
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
    let interrupted = super::recover::report(&project, diag);
    Ok(Outcome::new(
        Exit::Yes,
        &super::recover::tidy(
            json!({"tasks": records, "unreadable": unreadable, "interrupted": interrupted}),
        ),
    ))
}

/// `dream-run pending [--clear]`.
pub(super) fn pending(args: &PendingArgs, diag: &Diag) -> Result<Outcome, Failure> {
    let project = project(&args.location)?;
    let state = &project.state_dir;
    let interrupted = super::recover::report(&project, diag);
    let updates = tasks::read_pending(state)
        .map_err(|e| Failure::io("read", &tasks::pending_path(state), &e))?;
    let clear = args.clear && !args.dry_run && !updates.is_empty();
    if clear {
        tasks::clear_pending(state, &updates)
            .map_err(|e| Failure::io("clear", &tasks::pending_path(state), &e))?;
    }
    let mut document = json!({"updates": updates, "cleared": clear, "interrupted": interrupted});
    if args.dry_run {
        document["dry_run"] = json!(true);
        document["would_clear"] = json!(args.clear && !updates.is_empty());
    }
    Ok(Outcome::new(Exit::Yes, &super::recover::tidy(document)))
}

/// Why a record cannot be undone, or `None` when it can: a completed run, or a run that
/// failed, was aborted or was killed (orphaned) and left its snapshot (nothing restored it).
fn not_undoable(record: &TaskRecord) -> Option<String> {
    if record.status == "undone" || record.undone_at.is_some() {
        return Some("already undone".into());
    }
    if record.mode == "propose" && record.status != "completed" {
        return Some("it proposed: it never changed the memory dir".into());
    }
    match record.status.as_str() {
        "completed" | "failed" | "aborted" => None,
        "running" if record.is_orphaned() => None,
        "running" => Some(format!("it is still running (PID {})", record.pid)),
        other => Some(format!("it is {other}")),
    }
}

/// `dream-run undo [TASK_ID]`: under the lock, put the files a run touched back as they were
/// before it, unless one of them changed since; all or nothing (journaled like `apply`).
pub(super) fn undo(args: &UndoArgs, diag: &Diag) -> Result<Outcome, Failure> {
    let project = project(&args.location)?;
    // An apply or undo killed midway is rolled back first (under the lock).
    let recovered = if args.dry_run {
        None
    } else {
        super::recover::when_needed(&project, &args.backend, diag)?
    };
    let store = TaskStore::new(&project.state_dir);
    let record = match &args.task_id {
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
            // The change that landed last (an applied proposal counts from its apply).
            match records
                .into_iter()
                .filter(|r| r.snapshot.is_some() && not_undoable(r).is_none())
                .max_by(|a, b| a.landed_at().cmp(b.landed_at()))
            {
                Some(record) => record,
                None => {
                    return Ok(Outcome::new(
                        Exit::No,
                        &super::recover::tidy(json!({"undone": false, "reason": "nothing_to_undo",
                                                     "recovered": recovered})),
                    )
                    .with_note("no run left changes to undo (none completed, or failed without a restore, with a snapshot)"))
                }
            }
        }
    };
    let refuse = |reason: &str, note: String, task_id: &str, files: Vec<String>| {
        Ok(Outcome::new(
            Exit::No,
            &super::recover::tidy(
                json!({"undone": false, "reason": reason, "task_id": task_id,
                                         "files": files, "recovered": recovered}),
            ),
        )
        .with_note(note))
    };
    if let Some(why) = not_undoable(&record) {
        return refuse(
            "not_undoable",
            format!("task {} cannot be undone: {why}", record.task_id),
            &record.task_id,
            vec![],
        );
    }
    if record.snapshot.is_none() {
        return refuse(
            "no_snapshot",
            format!(
                "task {} changed nothing, was restored already, or its snapshot was pruned",
                record.task_id
            ),
            &record.task_id,
            vec![],
        );
    }
    // Always the task's own folder under the state dir: the record only says one exists.
    let snapshot_dir = super::snapshot::dir_of(&project.state_dir, &record.task_id);
    let snapshot = Snapshot::load(&snapshot_dir)
        .map_err(|e| Failure::io("read the snapshot", &snapshot_dir, &e))?;
    let memory_dir = &project.memory_dir;
    let absolute = |rels: &[String]| -> Vec<String> {
        rels.iter()
            .map(|rel| super::snapshot::absolute(memory_dir, rel))
            .collect()
    };
    let touched: Vec<String> = snapshot.manifest.before.keys().cloned().collect();
    if args.dry_run {
        let interrupted = super::recover::report(&project, diag);
        return Ok(Outcome::new(
            Exit::Yes,
            &super::recover::tidy(
                json!({"undone": false, "dry_run": true, "task_id": record.task_id,
                    "files": absolute(&touched), "interrupted": interrupted}),
            ),
        ));
    }

    let backend = args.backend.open(&project)?;
    // From the lock on, SIGINT/SIGTERM wait for a file boundary, then everything is put back.
    let hold = signals::hold();
    let mut lease = match take_lock(backend.as_ref(), "undone", &record.task_id)? {
        Ok(lease) => lease,
        Err(busy) => return Ok(busy),
    };
    let lock_time = backend
        .last_consolidated()
        .ok()
        .flatten()
        .map_or(0, crate::cli::time::epoch_ms);
    let release = |lease: &crate::lock::Lease| {
        // Undo is not a consolidation: the release rolls the time back.
        if let Err(failure) =
            backend.release(&lease.token, lease.prior_mtime_ms, RunOutcome::Failed)
        {
            diag.warn(&format!("cannot release the lock: {failure}"));
        }
    };
    // A run killed while it held the lock left the lock's time moved: undoing it gives back
    // the time from before that run too, while the lock still shows the run's time.
    if record.status != "completed"
        && record.prior_mtime > 0
        && record
            .lock_token
            .as_deref()
            .and_then(crate::lock::file::token_time_ms)
            == Some(lease.prior_mtime_ms)
    {
        lease.prior_mtime_ms = record.prior_mtime;
    }
    let changed = match snapshot.changed_since(memory_dir) {
        Ok(changed) => changed,
        Err(e) => {
            release(&lease);
            return Err(Failure::io("read", memory_dir, &e));
        }
    };
    if !changed.is_empty() {
        release(&lease);
        let files = absolute(&changed);
        return Ok(Outcome::new(
            Exit::No,
            &super::recover::tidy(
                json!({"undone": false, "reason": "changed_since", "task_id": record.task_id,
                    "files": files, "recovered": recovered}),
            ),
        )
        .with_note(format!(
            "not undone: changed since the run: {}",
            files.join(", ")
        )));
    }
    let after: BTreeMap<String, Option<String>> = snapshot
        .manifest
        .before
        .iter()
        .map(|(rel, kept)| (rel.clone(), kept.as_ref().map(|k| k.sha256.clone())))
        .collect();
    let intent = Intent::new(
        "undo",
        &record.task_id,
        memory_dir,
        lease.prior_mtime_ms,
        lock_time,
    );
    let journal = match Journal::begin(&project.state_dir, memory_dir, intent, &after) {
        Ok(journal) => journal,
        Err(e) => {
            release(&lease);
            return Err(Failure::io(
                "write the journal",
                &super::journal::path(&project.state_dir),
                &e,
            ));
        }
    };
    let mut stop = None;
    for rel in &touched {
        if let Some(signal) = signals::received() {
            stop = Some((
                signals::exit_for(signal),
                "interrupted",
                format!("interrupted by signal {signal}"),
            ));
            break;
        }
        match snapshot.restore_file(memory_dir, rel) {
            Ok(None) => {}
            Ok(Some(why)) => {
                // Checked above, so only a race (a file changed, a symlink swapped in).
                stop = Some((
                    Exit::No,
                    "changed_since",
                    format!("{}: {why}", super::snapshot::absolute(memory_dir, rel)),
                ));
                break;
            }
            Err(e) => {
                stop = Some((
                    Exit::Environment,
                    "environment",
                    format!("cannot restore {rel}: {e}"),
                ));
                break;
            }
        }
    }
    let mut record = record;
    if stop.is_none() {
        snapshot.remove_created_dirs(memory_dir);
        record.status = "undone".into();
        record.undone_at = Some(rfc3339(SystemTime::now()));
        record.snapshot = None;
        if let Err(e) = store.save(&record) {
            stop = Some((
                Exit::Environment,
                "environment",
                format!(
                    "cannot record the undo in {}: {e}",
                    store.path_of(&record.task_id).display()
                ),
            ));
        }
    }
    if let Some((exit, reason, message)) = stop {
        let rolled = journal.roll_back(memory_dir);
        release(&lease);
        let late = hold.end();
        if let Err(e) = rolled {
            diag.warn(&format!(
                "the roll-back failed ({e}); run `dream-run recover` once the problem is fixed"
            ));
        }
        let exit = late.map_or(exit, signals::exit_for);
        let message = format!("not undone: {message}; nothing was changed");
        if exit != Exit::No {
            diag.warn(&message);
        }
        let mut document = super::recover::tidy(json!({"undone": false, "reason": reason,
            "task_id": record.task_id, "files": [], "recovered": recovered}));
        if exit == Exit::No {
            return Ok(Outcome::new(exit, &document).with_note(message));
        }
        document["error"] = json!({"kind": reason, "message": message});
        return Ok(Outcome::new(exit, &document));
    }
    if let Err(e) = journal.commit() {
        diag.warn(&format!("cannot remove the finished journal: {e}"));
    }
    let _ = std::fs::remove_dir_all(&snapshot_dir);
    release(&lease);
    let late = hold.end();
    // No session hears of changes that are gone again.
    let withdrawn = match tasks::withdraw_pending(&project.state_dir, &record.task_id) {
        Ok(withdrawn) => withdrawn,
        Err(e) => {
            diag.warn(&format!(
                "cannot withdraw the task's line from {}: {e}",
                tasks::pending_path(&project.state_dir).display()
            ));
            false
        }
    };
    let files = absolute(&touched);
    diag.info(&format!(
        "undid task {}: {} files restored",
        record.task_id,
        files.len()
    ));
    Ok(Outcome::new(
        late.map_or(Exit::Yes, signals::exit_for),
        &super::recover::tidy(
            json!({"undone": true, "task_id": record.task_id, "files": files,
                "pending_withdrawn": withdrawn, "recovered": recovered}),
        ),
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

pub(super) use super::tasks::is_task_id;
