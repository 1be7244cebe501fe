//! Looking back at runs: `tasks`, `pending`, and `undo`.

use std::collections::BTreeMap;
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::Serialize;

use super::lease::take_lock;
use super::report::{verb, Cause, Change, Done, Interrupted, Refusal, Stopped, WouldDo};
use super::{PendingArgs, TasksArgs, UndoArgs};
use crate::cli::time::rfc3339;
use crate::cli::{signals, Context, Exit, Failure, Report, RunStatus};
use crate::store::{
    self, is_task_id, Intent, Journal, PendingUpdate, Snapshot, TaskRecord, TaskStatus, TaskStore,
};

/// `tasks`' answer.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct TasksReport {
    /// The records, as any text quoting the model or the memory is shown to a person.
    #[schemars(with = "Vec<TaskRecord>")]
    pub tasks: serde_json::Value,
    /// Task ids whose records cannot be read (left out of `tasks`).
    pub unreadable: Vec<String>,
    /// `unreadable_task_records` when some are left out.
    pub warnings: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interrupted>,
}

impl Report for TasksReport {
    fn exit(&self) -> Exit {
        Exit::Yes
    }
}

/// `pending [--clear] [--dry-run]`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PendingReport {
    pub updates: Vec<PendingUpdate>,
    pub cleared: bool,
    /// `--dry-run`: always true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// `--dry-run`: whether `--clear` would have cleared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_clear: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interrupted>,
}

impl Report for PendingReport {
    fn exit(&self) -> Exit {
        Exit::Yes
    }
}

impl PendingReport {
    /// What a new session should know: the memory changed since the last session.
    pub fn session_context(&self) -> Option<String> {
        let updates = &self.updates;
        if updates.is_empty() {
            return None;
        }
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
}

/// `undo`'s answer.
pub type UndoReport = Change<verb::Undone>;

/// `dream-run tasks`: every record, newest first; a running record whose process is gone is
/// shown as what it is, a failed run (`error: "orphaned"`).
pub(super) fn tasks(args: &TasksArgs, cx: &Context) -> Result<TasksReport, Failure> {
    let diag = cx.diag();
    let project = super::project(&args.location, cx)?;
    let store = TaskStore::new(&project.state_dir);
    let (records, unreadable) = store
        .list()
        .map_err(|e| Failure::io("list the task records in", &project.state_dir, &e))?;
    let tasks: Vec<TaskRecord> = records
        .into_iter()
        .map(|mut r| {
            if r.is_orphaned() {
                super::recover::say_orphaned(&r, diag);
                r.status = TaskStatus::Failed;
                r.error = Some("orphaned".into());
            }
            r
        })
        .collect();
    // A record left out is said, not only listed: it may be the run the user looks for.
    let mut warnings = Vec::new();
    if !unreadable.is_empty() {
        warnings.push("unreadable_task_records");
        let more = match unreadable.len() {
            1 => String::new(),
            n => format!(" and {} more (unreadable lists them)", n - 1),
        };
        diag.warn(&format!(
            "a task record that cannot be read is left out: {}{more}",
            store.path_of(&unreadable[0]).display()
        ));
    }
    // The records quote the model (turns, summary, errors) and the memory (the diff): shown
    // as any such text is shown to a person.
    let tasks = serde_json::to_value(&tasks)
        .map_err(|e| Failure::environment(format!("cannot serialise the task records: {e}")))?;
    Ok(TasksReport {
        tasks: crate::cli::text::map_strings(tasks, &super::check::for_a_person),
        unreadable,
        warnings,
        interrupted: super::recover::report(&project, diag),
    })
}

/// `dream-run pending [--clear]`.
pub(super) fn pending(args: &PendingArgs, cx: &Context) -> Result<PendingReport, Failure> {
    let diag = cx.diag();
    let project = super::project(&args.location, cx)?;
    let state = &project.state_dir;
    let interrupted = super::recover::report(&project, diag);
    let updates = store::read_pending(state)
        .map_err(|e| Failure::io("read", &store::pending_path(state), &e))?;
    // A hook announces the updates once.
    let clear = (args.clear || args.hook) && !args.dry_run && !updates.is_empty();
    if clear {
        store::clear_pending(state, &updates)
            .map_err(|e| Failure::io("clear", &store::pending_path(state), &e))?;
    }
    let would_clear = args.dry_run.then_some(args.clear && !updates.is_empty());
    Ok(PendingReport {
        updates,
        cleared: clear,
        dry_run: would_clear.map(|_| true),
        would_clear,
        interrupted,
    })
}

/// Why a record cannot be undone, or `None` when it can: a completed run, or a run that
/// failed, was aborted or was killed (orphaned) and left its snapshot (nothing restored it).
fn not_undoable(record: &TaskRecord) -> Option<String> {
    if record.status == TaskStatus::Undone || record.undone_at.is_some() {
        return Some("already undone".into());
    }
    if record.mode == "propose" && record.status != TaskStatus::Completed {
        return Some("it proposed: it never changed the memory dir".into());
    }
    match record.status {
        TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Aborted => None,
        TaskStatus::Running if record.is_orphaned() => None,
        TaskStatus::Running => Some(format!("it is still running (PID {})", record.pid)),
        other => Some(format!("it is {other}")),
    }
}

/// `dream-run undo [TASK_ID]`: under the lock, put the files a run touched back as they were
/// before it, unless one of them changed since; all or nothing (journaled like `apply`).
pub(super) fn undo(args: &UndoArgs, cx: &Context) -> Result<UndoReport, Failure> {
    let diag = cx.diag();
    let project = super::project(&args.location, cx)?;
    // An apply or undo killed midway is rolled back first (under the lock).
    let recovered = if args.dry_run {
        store::Recovery::default()
    } else {
        super::recover::when_needed(&project, &args.backend, diag)?
    };
    let refuse =
        |reason, note: String| Refusal::new(reason, note).after_recovering(recovered.clone());
    let store = TaskStore::new(&project.state_dir);
    let record = match &args.task_id {
        Some(id) => {
            if !is_task_id(id) {
                return Err(Failure::bad_input(format!("{id:?} is not a task id")));
            }
            match store.load(id) {
                Ok(record) => record,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(refuse("not_found", format!("no task {id}"))
                        .of_task(id)
                        .into())
                }
                Err(e) => return Err(Failure::io("read", &store.path_of(id), &e)),
            }
        }
        None => {
            let (records, _) = store
                .list()
                .map_err(|e| Failure::io("list the task records in", &project.state_dir, &e))?;
            // The change that landed last (an applied proposal counts from its apply).
            let newest = records
                .into_iter()
                .filter(|r| r.snapshot.is_some() && not_undoable(r).is_none())
                .max_by(|a, b| a.landed_at().cmp(b.landed_at()));
            match newest {
                Some(record) => record,
                None => return Ok(refuse(
                    "nothing_to_undo",
                    "nothing to undo: no completed run, and no failed, aborted or killed run whose changes were kept".into(),
                ).into()),
            }
        }
    };
    let id = record.task_id.clone();
    if let Some(why) = not_undoable(&record) {
        return Ok(
            refuse("not_undoable", format!("task {id} cannot be undone: {why}"))
                .of_task(&id)
                .naming(vec![])
                .into(),
        );
    }
    if record.snapshot.is_none() {
        return Ok(refuse(
            "no_snapshot",
            format!("task {id} changed nothing, was restored already, or its snapshot was pruned"),
        )
        .of_task(&id)
        .naming(vec![])
        .into());
    }
    // Always the task's own folder under the state dir: the record only says one exists.
    let snapshot_dir = store::snapshot_dir(&project.state_dir, &id);
    let snapshot = Snapshot::load(&snapshot_dir)
        .map_err(|e| Failure::io("read the snapshot", &snapshot_dir, &e))?;
    let memory_dir = &project.memory_dir;
    let absolute = |rels: &[String]| -> Vec<String> {
        rels.iter()
            .map(|rel| store::absolute_path(memory_dir, rel))
            .collect()
    };
    let touched: Vec<String> = snapshot.manifest.before.keys().cloned().collect();
    if args.dry_run {
        return Ok(Change::WouldDo(WouldDo::new(
            id,
            absolute(&touched),
            super::recover::report(&project, diag),
        )));
    }

    let backend = args.backend.open(&project)?;
    // From the lock on, SIGINT/SIGTERM wait for a file boundary, then everything is put back.
    let hold = signals::hold();
    let mut lease = match take_lock(backend.as_ref(), &id)? {
        Ok(lease) => lease,
        Err(busy) => return Ok(busy.after_recovering(recovered).into()),
    };
    let lock_time = backend
        .last_consolidated()
        .ok()
        .flatten()
        .map_or(0, crate::cli::time::epoch_ms);
    let release = |lease: &crate::lock::Lease| {
        // Undo is not a consolidation: the release rolls the time back.
        if let Err(failure) = backend.release(&lease.token, lease.prior_mtime_ms, RunStatus::Failed)
        {
            diag.warn(&format!("cannot release the lock: {failure}"));
        }
    };
    // A run killed while it held the lock left the lock's time moved: undoing it gives back
    // the time from before that run too, while the lock still shows the run's time.
    if record.status != TaskStatus::Completed
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
        return Ok(refuse(
            "changed_since",
            format!("not undone: changed since the run: {}", files.join(", ")),
        )
        .of_task(&id)
        .naming(files)
        .into());
    }
    let after: BTreeMap<String, Option<String>> = snapshot
        .manifest
        .before
        .iter()
        .map(|(rel, kept)| (rel.clone(), kept.as_ref().map(|k| k.sha256.clone())))
        .collect();
    let intent = Intent::new("undo", &id, memory_dir, lease.prior_mtime_ms, lock_time);
    let journal = match Journal::begin(&project.state_dir, memory_dir, intent, &after) {
        Ok(journal) => journal,
        Err(e) => {
            release(&lease);
            return Err(Failure::io(
                "write the journal",
                &store::journal_path(&project.state_dir),
                &e,
            ));
        }
    };
    let mut stop = None;
    for rel in &touched {
        if let Some(signal) = signals::received() {
            stop = Some(Cause::Signal(signal));
            break;
        }
        match snapshot.restore_file(memory_dir, rel) {
            Ok(None) => {}
            Ok(Some(why)) => {
                // Checked above, so only a race (a file changed, a symlink swapped in).
                let path = store::absolute_path(memory_dir, rel);
                stop = Some(Cause::ChangedSince(format!("{path}: {why}")));
                break;
            }
            Err(e) => {
                stop = Some(Cause::Failed(format!("cannot restore {rel}: {e}")));
                break;
            }
        }
    }
    let mut record = record;
    if stop.is_none() {
        snapshot.remove_created_dirs(memory_dir);
        record.status = TaskStatus::Undone;
        record.undone_at = Some(rfc3339(SystemTime::now()));
        record.snapshot = None;
        if let Err(e) = store.save(&record) {
            stop = Some(Cause::Failed(format!(
                "cannot record the undo in {}: {e}",
                store.path_of(&id).display()
            )));
        }
    }
    if let Some(cause) = stop {
        let rolled = journal.roll_back(memory_dir);
        release(&lease);
        let cause = match hold.end() {
            Some(signal) => Cause::Signal(signal),
            None => cause,
        };
        let not_rolled_back = rolled.err().map(|e| {
            vec![format!(
                "the roll-back failed ({e}); run `dream-run recover` once the problem is fixed"
            )]
        });
        return Ok(Change::Stopped(Stopped::new(
            id,
            cause,
            not_rolled_back,
            recovered,
        )));
    }
    if let Err(e) = journal.commit() {
        diag.warn(&format!("cannot remove the finished journal: {e}"));
    }
    let _ = std::fs::remove_dir_all(&snapshot_dir);
    // Undoing the newest consolidation makes its sessions due again: the lock's time goes
    // back to what it was before that run. An older undo leaves the time alone (a later
    // consolidation still stands).
    let time_back = newest_consolidation(&store, &id, lease.prior_mtime_ms, record.prior_mtime);
    if let Some(prior) = time_back {
        lease.prior_mtime_ms = prior;
    }
    release(&lease);
    let late_signal = hold.end();
    // No session hears of changes that are gone again.
    let withdrawn = match store::withdraw_pending(&project.state_dir, &id) {
        Ok(withdrawn) => withdrawn,
        Err(e) => {
            diag.warn(&format!(
                "cannot withdraw the task's line from {}: {e}",
                store::pending_path(&project.state_dir).display()
            ));
            false
        }
    };
    let files = absolute(&touched);
    diag.info(&format!("undid task {id}: {} files restored", files.len()));
    let last_consolidated_at = time_back.map(|prior| {
        let at = (prior > 0).then(|| rfc3339(crate::cli::time::from_epoch_ms(prior)));
        diag.info(&format!(
            "it was the newest consolidation: the last-consolidated time is back to {} (its sessions are due again)",
            at.as_deref().unwrap_or("never")
        ));
        at
    });
    let mut done = Done::new(id, files, recovered);
    done.pending_withdrawn = Some(withdrawn);
    done.late_signal = late_signal;
    done.last_consolidated_at = last_consolidated_at;
    Ok(Change::Done(done))
}

/// When `task_id` is this project's newest consolidation still standing and the lock's
/// time (`lock_ms`) was set after it started (by its release), the time from before it
/// (`prior`); otherwise `None`.
fn newest_consolidation(store: &TaskStore, task_id: &str, lock_ms: i64, prior: i64) -> Option<i64> {
    let (records, _) = store.list().ok()?;
    let newest = records
        .iter()
        .filter(|r| {
            r.status == TaskStatus::Completed && r.undone_at.is_none() && r.task_id != task_id
        })
        .map(TaskRecord::landed_at)
        .max();
    let this = records.iter().find(|r| r.task_id == task_id)?;
    let started = crate::cli::time::parse_rfc3339(&this.started_at)?;
    let newest_is_this = newest.is_none_or(|other| other <= this.landed_at());
    let lock_after_start = lock_ms >= crate::cli::time::epoch_ms(started);
    (newest_is_this && lock_after_start).then_some(prior)
}
