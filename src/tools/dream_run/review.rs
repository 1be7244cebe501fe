//! Review mode's subcommands: `show`, `apply` and `discard` of what a proposing run staged
//! (see [`super::staging`]).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::Serialize;

use super::lease::take_lock;
use super::report::{self, verb, Cause, Change, Done, Interrupted, Refusal, WouldDo};
use super::{ApplyArgs, DiscardArgs, ShowArgs};
use crate::cli::time::rfc3339;
use crate::cli::{signals, Context, Exit, Failure, Report, RunStatus};
use crate::files::write_atomic;
use crate::store::{
    self, is_task_id, proposal_dir, staging_dir, Diff, Intent, Journal, PendingUpdate, Snapshot,
    TaskRecord, TaskStatus, TaskStore,
};

/// `show`'s answer: a task's recorded changes, the diff itself (`--diff`: text, not JSON), or
/// a clean no.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ShowReport {
    Shown(Shown),
    /// `--diff` or `--why`: a text view was written on stdout; no JSON document.
    DiffText,
    Refused(Refusal),
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Shown {
    pub task_id: String,
    #[schemars(with = "String")]
    pub status: TaskStatus,
    /// `model` or `rules`.
    pub engine: String,
    /// Each change the proposal makes (the rules engine's with its rule).
    pub changes: Vec<crate::store::Change>,
    pub diff: Diff,
    pub diff_text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interrupted>,
}

impl Report for ShowReport {
    fn exit(&self) -> Exit {
        match self {
            ShowReport::Shown(_) | ShowReport::DiffText => Exit::Yes,
            ShowReport::Refused(_) => Exit::No,
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            ShowReport::Refused(refusal) => Some(refusal.note.clone()),
            ShowReport::Shown(_) | ShowReport::DiffText => None,
        }
    }

    fn printed(&self) -> bool {
        !matches!(self, ShowReport::DiffText)
    }
}

impl ShowReport {
    /// What a new session should know: a proposal waits for review.
    pub fn session_context(&self) -> Option<String> {
        let ShowReport::Shown(shown) = self else {
            return None;
        };
        if shown.status != TaskStatus::Proposed {
            return None;
        }
        let diff = &shown.diff;
        let count = diff.created.len() + diff.modified.len() + diff.deleted.len();
        Some(format!(
            "A memory consolidation proposal from dreamkit (task {}) waits for review: it would create {}, modify {} and delete {} memory file{} ({count} in all). Tell the user; they can review it with `dream-run show --diff`, apply it with `dream-run apply` or drop it with `dream-run discard`.",
            shown.task_id,
            diff.created.len(),
            diff.modified.len(),
            diff.deleted.len(),
            if count == 1 { "" } else { "s" },
        ))
    }
}

/// `apply`'s answer.
pub type ApplyReport = Change<verb::Applied>;
/// `discard`'s answer.
pub type DiscardReport = Change<verb::Discarded>;

/// A new memory file's mode when a proposal creates it.
const NEW_FILE_MODE: u32 = 0o644;

/// The record a subcommand works on: the named one, or the newest with `status`.
fn pick(
    store: &TaskStore,
    state_dir: &Path,
    task_id: Option<&str>,
    status: TaskStatus,
) -> Result<Result<TaskRecord, Refusal>, Failure> {
    match task_id {
        Some(id) => {
            if !is_task_id(id) {
                return Err(Failure::bad_input(format!("{id:?} is not a task id")));
            }
            match store.load(id) {
                Ok(record) => Ok(Ok(record)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    Ok(Err(
                        Refusal::new("not_found", format!("no task {id}")).of_task(id)
                    ))
                }
                Err(e) => Err(Failure::io("read", &store.path_of(id), &e)),
            }
        }
        None => {
            let (records, _) = store
                .list()
                .map_err(|e| Failure::io("list the task records in", state_dir, &e))?;
            match records.into_iter().find(|r| r.status == status) {
                Some(record) => Ok(Ok(record)),
                None => Ok(Err(Refusal::new(
                    "no_proposal",
                    "no memory proposal: run dream-run --propose first",
                ))),
            }
        }
    }
}

/// `dream-run show [TASK_ID] [--diff]`.
pub(super) fn show(args: &ShowArgs, cx: &Context) -> Result<ShowReport, Failure> {
    let diag = cx.diag();
    let project = super::project(&args.location, cx)?;
    let interrupted = super::recover::report(&project, diag);
    let store = TaskStore::new(&project.state_dir);
    let record = match pick(
        &store,
        &project.state_dir,
        args.task_id.as_deref(),
        TaskStatus::Proposed,
    )? {
        Ok(record) => record,
        Err(refusal) => return Ok(ShowReport::Refused(refusal)),
    };
    // Shown as any memory text is (a record written before the diff was made safe may hold
    // a secret line or a terminal escape).
    let Some(diff_text) = record.diff_text.as_deref().map(super::check::for_a_person) else {
        return Ok(ShowReport::Refused(
            Refusal::new(
                "no_changes_recorded",
                format!("task {} has no recorded changes to show", record.task_id),
            )
            .of_task(&record.task_id)
            .with_status(record.status.as_str()),
        ));
    };
    if args.why {
        let text = super::check::for_a_person(&why_text(&record.changes));
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| Failure::environment(format!("cannot write the changes: {e}")))?;
        return Ok(ShowReport::DiffText);
    }
    if args.diff {
        // The one exception to one JSON object: the diff itself, for a person. The model
        // wrote its lines: no control character of theirs reaches the terminal.
        let color = std::io::stdout().is_terminal() && cx.env().get("NO_COLOR").is_none();
        let text = if color {
            colorize(&diff_text)
        } else {
            diff_text
        };
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| Failure::environment(format!("cannot write the diff: {e}")))?;
        return Ok(ShowReport::DiffText);
    }
    Ok(ShowReport::Shown(Shown {
        task_id: record.task_id,
        status: record.status,
        engine: record.engine,
        changes: record.changes,
        diff: record.diff.unwrap_or_default(),
        diff_text,
        interrupted,
    }))
}

/// `show --why`: each change on a line, then where it came from, indented: each source of
/// a model's change (`verified` or `not verified`), the rule of a rules-engine change, or
/// that the model named none.
fn why_text(changes: &[crate::store::Change]) -> String {
    let mut text = String::new();
    for change in changes {
        text.push_str(&change.one_line());
        text.push('\n');
        if let Some(source) = &change.source {
            text.push_str(&format!("    rule: {}\n", source.rule));
        } else if change.sources.is_empty() {
            text.push_str("    no source named\n");
        }
        for source in &change.sources {
            let quote = source
                .quote
                .as_deref()
                .map(|q| format!(" {q:?}"))
                .unwrap_or_default();
            let verified = if source.verified {
                "verified"
            } else {
                "not verified"
            };
            text.push_str(&format!(
                "    source: session {}{quote} ({verified})\n",
                source.session
            ));
        }
    }
    text
}

/// Red removals, green additions, cyan file and hunk headers.
fn colorize(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        let color = if body.starts_with("---") || body.starts_with("+++") || body.starts_with("@@")
        {
            Some("36")
        } else if body.starts_with('-') {
            Some("31")
        } else if body.starts_with('+') {
            Some("32")
        } else {
            None
        };
        match color {
            Some(c) => out.push_str(&format!("\x1b[{c}m{body}\x1b[0m{end}")),
            None => out.push_str(line),
        }
    }
    out
}

/// A proposal, or what is left of a proposing run that died before it proposed (still
/// `running` with its process gone, or already marked orphaned by a recovery): discarding
/// either drops whatever staging copy is left and ends the task as `discarded`.
fn discardable(record: &TaskRecord) -> bool {
    record.status == TaskStatus::Proposed
        || (record.mode == "propose"
            && (record.is_orphaned()
                || (record.status == TaskStatus::Failed
                    && record.error.as_deref() == Some("orphaned"))))
}

/// `dream-run discard [TASK_ID]`: drops a proposal's staging copy, under the lock (an apply
/// of the same proposal may be reading it); the task is `discarded`.
pub(super) fn discard(args: &DiscardArgs, cx: &Context) -> Result<DiscardReport, Failure> {
    let diag = cx.diag();
    let project = super::project(&args.location, cx)?;
    // An apply killed midway may be of this very proposal: rolled back first, under the lock.
    let recovered = if args.dry_run {
        store::Recovery::default()
    } else {
        super::recover::when_needed(&project, &args.backend, diag)?
    };
    let store = TaskStore::new(&project.state_dir);
    let record = match pick(
        &store,
        &project.state_dir,
        args.task_id.as_deref(),
        TaskStatus::Proposed,
    )? {
        Ok(record) => record,
        Err(refusal) => return Ok(refusal.after_recovering(recovered).into()),
    };
    let not_a_proposal = |record: &TaskRecord, status: &str| -> DiscardReport {
        Refusal::new(
            "not_a_proposal",
            format!("task {} is {status}, not a proposal", record.task_id),
        )
        .of_task(&record.task_id)
        .with_status(status)
        .after_recovering(recovered.clone())
        .into()
    };
    if !discardable(&record) {
        return Ok(not_a_proposal(&record, record.status.as_str()));
    }
    let dir = proposal_dir(&project.state_dir, &record.task_id);
    if args.dry_run {
        let mut would = WouldDo::new(
            record.task_id,
            Vec::new(),
            super::recover::report(&project, diag),
        );
        would.staging = Some(dir.to_string_lossy().into_owned());
        return Ok(Change::WouldDo(would));
    }
    // Under the lock: an apply of this proposal running meanwhile reads the staged copy.
    let backend = args.backend.open(&project)?;
    let hold = signals::hold();
    let lease = match take_lock(backend.as_ref(), &record.task_id)? {
        Ok(lease) => lease,
        Err(busy) => return Ok(busy.after_recovering(recovered).into()),
    };
    // The record again, under the lock: an apply may have completed it meanwhile.
    let discarded = (|| {
        let mut now = store
            .load(&record.task_id)
            .map_err(|e| Failure::io("read", &store.path_of(&record.task_id), &e))?;
        if !discardable(&now) {
            return Ok(Some(now.status));
        }
        // The record is the commit point, the staging copy goes after it: a discard killed
        // midway leaves a whole proposal or a discarded one whose leftover copy the next
        // command's sweep removes, never a proposal with half its staged files.
        now.status = TaskStatus::Discarded;
        store
            .save(&now)
            .map_err(|e| Failure::io("write", &store.path_of(&now.task_id), &e))?;
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => diag.warn(&format!(
                "discarded, but its staging copy {} could not be removed ({e}): the next command that changes state removes it",
                dir.display()
            )),
            _ => {}
        }
        Ok(None)
    })();
    if let Err(failure) = backend.release(&lease.token, lease.prior_mtime_ms, RunStatus::Failed) {
        diag.warn(&format!("cannot release the lock: {failure}"));
    }
    let late_signal = hold.end();
    if let Some(status) = discarded? {
        return Ok(not_a_proposal(&record, &format!("{status} now")));
    }
    let mut done = Done::new(record.task_id, Vec::new(), recovered);
    done.late_signal = late_signal;
    Ok(Change::Done(done))
}

/// `dream-run apply [TASK_ID]`: under the lock, and only when every file the proposal
/// changes still has the content it had when the proposal was made, writes the staged files
/// into the memory dir, all or nothing: a snapshot of every file first (so `undo` works), an
/// intent journal (so a kill -9 midway is rolled back by the next command), the writes with
/// SIGINT/SIGTERM and the lock checked between files (a signal or a lost lock rolls back at
/// once), then the task record (the commit point), then the release as completed.
pub(super) fn apply(args: &ApplyArgs, cx: &Context) -> Result<ApplyReport, Failure> {
    let diag = cx.diag();
    let project = super::project(&args.location, cx)?;
    // An apply or undo killed midway is rolled back first (under the lock).
    let recovered = if args.dry_run {
        store::Recovery::default()
    } else {
        super::recover::when_needed(&project, &args.backend, diag)?
    };
    let store = TaskStore::new(&project.state_dir);
    let mut record = match pick(
        &store,
        &project.state_dir,
        args.task_id.as_deref(),
        TaskStatus::Proposed,
    )? {
        Ok(record) => record,
        Err(refusal) => return Ok(refusal.after_recovering(recovered).into()),
    };
    let refuse =
        |reason, note: String, task_id: &str, files: Vec<String>| -> Result<ApplyReport, Failure> {
            Ok(Refusal::new(reason, note)
                .of_task(task_id)
                .naming(files)
                .after_recovering(recovered.clone())
                .into())
        };
    if record.proposal.is_none() || record.status != TaskStatus::Proposed {
        return refuse(
            "not_a_proposal",
            format!(
                "task {} is {}, not a proposal",
                record.task_id, record.status
            ),
            &record.task_id,
            vec![],
        );
    }
    if args.dry_run {
        let files: Vec<String> = record
            .proposal
            .iter()
            .flat_map(|p| p.keys())
            .map(|rel| store::absolute_path(&project.memory_dir, rel))
            .collect();
        let mut would = WouldDo::new(
            record.task_id,
            files,
            super::recover::report(&project, diag),
        );
        would.diff = Some(record.diff.unwrap_or_default());
        return Ok(Change::WouldDo(would));
    }
    let backend = args.backend.open(&project)?;
    // From the lock on, SIGINT/SIGTERM wait for a file boundary: the lock and the memory dir
    // are then put back as they were before the process ends.
    let hold = signals::hold();
    let lease = match take_lock(backend.as_ref(), &record.task_id)? {
        Ok(lease) => lease,
        Err(busy) => return Ok(busy.after_recovering(recovered).into()),
    };
    // The time this apply's own acquire wrote: a roll-back after a kill gives it back only
    // while the lock still shows it.
    let lock_time = backend
        .last_consolidated()
        .ok()
        .flatten()
        .map_or(0, crate::cli::time::epoch_ms);
    let release = |lease: &crate::lock::Lease, outcome: RunStatus| {
        if let Err(failure) = backend.release(&lease.token, lease.prior_mtime_ms, outcome) {
            diag.warn(&format!("cannot release the lock: {failure}"));
        }
    };
    let files = record.proposal.clone().unwrap_or_default();
    let memory_dir = project.memory_dir.clone();
    let staging = staging_dir(&project.state_dir, &record.task_id);
    // Every touched file must still be what the proposal was made against.
    let mut changed = Vec::new();
    for (rel, base) in &files {
        match store::current_hash(&memory_dir, rel) {
            Ok(now) if now == *base => {}
            Ok(_) | Err(_) => changed.push(store::absolute_path(&memory_dir, rel)),
        }
    }
    // And the staged copy must still be what the proposal showed.
    let proposed = record.proposed.clone().unwrap_or_default();
    let mut tampered = Vec::new();
    for rel in files.keys() {
        match (store::current_hash(&staging, rel), proposed.get(rel)) {
            (Ok(now), Some(shown)) if now == *shown => {}
            _ => tampered.push(staging.join(rel).to_string_lossy().into_owned()),
        }
    }
    if !tampered.is_empty() {
        release(&lease, RunStatus::Failed);
        return refuse(
            "staging_changed",
            format!(
                "not applied: the staged copy is not what the proposal showed: {}",
                tampered.join(", ")
            ),
            &record.task_id,
            tampered,
        );
    }
    if !changed.is_empty() {
        release(&lease, RunStatus::Failed);
        return refuse(
            "changed_since",
            format!(
                "not applied: changed since the proposal was made: {}",
                changed.join(", ")
            ),
            &record.task_id,
            changed,
        );
    }
    let after: BTreeMap<String, Option<String>> = files
        .keys()
        .map(|rel| (rel.clone(), proposed.get(rel).cloned().flatten()))
        .collect();
    let snapshot_dir = store::snapshot_dir(&project.state_dir, &record.task_id);
    let prepared = prepare(
        &memory_dir,
        &project.state_dir,
        (&snapshot_dir, &record.task_id),
        &after,
        (lease.prior_mtime_ms, lock_time),
    );
    let (snapshot, journal) = match prepared {
        Ok(prepared) => prepared,
        Err(message) => {
            let _ = std::fs::remove_dir_all(&snapshot_dir);
            release(&lease, RunStatus::Failed);
            return Err(Failure::environment(format!("not applied: {message}")));
        }
    };
    let stopped = write_all(
        &files,
        &memory_dir,
        &staging,
        &proposed,
        (backend.as_ref(), &lease.token),
    );
    let stopped = match stopped {
        Stopped::No => {
            record.status = TaskStatus::Completed;
            record.phase = "done".into();
            record.files_touched = files
                .keys()
                .map(|rel| store::absolute_path(&memory_dir, rel))
                .collect();
            record.snapshot = Some(snapshot.dir.to_string_lossy().into_owned());
            record.applied_at = Some(rfc3339(SystemTime::now()));
            match store.save(&record) {
                Ok(()) => None,
                Err(e) => Some(Stopped::Failed(format!(
                    "cannot record the task in {}: {e}",
                    store.path_of(&record.task_id).display()
                ))),
            }
        }
        other => Some(other),
    };
    if let Some(stopped) = stopped {
        // All or nothing: put back what landed, give the lock back, keep the proposal.
        let rolled = journal.roll_back(&memory_dir);
        let _ = std::fs::remove_dir_all(&snapshot_dir);
        release(&lease, RunStatus::Failed);
        let late = hold.end();
        let not_rolled_back: Vec<String> = match rolled {
            Ok(done) => done
                .skipped
                .into_iter()
                .map(|(rel, why)| format!("{}: {why}", store::absolute_path(&memory_dir, &rel)))
                .collect(),
            Err(e) => vec![format!(
                "the roll-back failed ({e}); run `dream-run recover` once the problem is fixed"
            )],
        };
        for line in &not_rolled_back {
            diag.warn(&format!("not rolled back: {line}"));
        }
        let cause = match (stopped, late) {
            (Stopped::Signal(signal), _) | (_, Some(signal)) => Cause::Signal(signal),
            (Stopped::LockLost(m), None) => Cause::LockLost(m),
            (Stopped::Failed(m), None) => Cause::Failed(m),
            (Stopped::No, None) => Cause::Failed("stopped".into()),
        };
        return Ok(Change::Stopped(report::Stopped::new(
            record.task_id,
            cause,
            Some(not_rolled_back),
            recovered,
        )));
    }
    if let Err(e) = journal.commit() {
        diag.warn(&format!("cannot remove the finished journal: {e}"));
    }
    release(&lease, RunStatus::Completed);
    let late = hold.end();
    let touched = record.files_touched.clone();
    let _ = std::fs::remove_dir_all(proposal_dir(&project.state_dir, &record.task_id));
    store::prune_snapshots(&store, diag);
    let mut problem = None;
    if !touched.is_empty() {
        let update = PendingUpdate {
            source: "dream".into(),
            task_id: record.task_id.clone(),
            files_touched: touched.clone(),
            at: rfc3339(SystemTime::now()),
        };
        if let Err(e) = store::append_pending(&project.state_dir, &update) {
            let message = format!(
                "cannot append to {}: {e}",
                store::pending_path(&project.state_dir).display()
            );
            diag.warn(&message);
            problem = Some(message);
        }
    }
    diag.info(&format!(
        "applied task {}: {} files",
        record.task_id,
        touched.len()
    ));
    let mut done = Done::new(record.task_id, touched, recovered);
    done.diff = Some(record.diff.unwrap_or_default());
    done.late_signal = late;
    done.problem = problem;
    Ok(Change::Done(done))
}

/// Before the first write: the snapshot `undo` will use (every file kept, what each will
/// hold recorded), then the journal a kill -9 midway is rolled back from.
fn prepare(
    memory_dir: &Path,
    state_dir: &Path,
    (snapshot_dir, task_id): (&Path, &str),
    after: &BTreeMap<String, Option<String>>,
    (prior_mtime, lock_time): (i64, i64),
) -> Result<(Snapshot, Journal), String> {
    let _ = std::fs::remove_dir_all(snapshot_dir);
    let mut snapshot = Snapshot::create(snapshot_dir, task_id)
        .map_err(|e| format!("cannot make the snapshot {}: {e}", snapshot_dir.display()))?;
    for (rel, sha) in after {
        snapshot
            .remember(memory_dir, rel)
            .and_then(|()| snapshot.intend(rel, sha.clone()))
            .map_err(|e| format!("cannot keep {rel} in the snapshot: {e}"))?;
    }
    let intent = Intent::new("apply", task_id, memory_dir, prior_mtime, lock_time);
    let journal = Journal::begin(state_dir, memory_dir, intent, after).map_err(|e| {
        format!(
            "cannot write the journal {}: {e}",
            store::journal_path(state_dir).display()
        )
    })?;
    Ok((snapshot, journal))
}

/// Why the writes stopped before the last file.
#[derive(Debug)]
enum Stopped {
    No,
    Signal(i32),
    LockLost(String),
    Failed(String),
}

/// Writes each staged file (or deletes it) in the memory dir, atomically; between files the
/// signals and the lock are checked.
fn write_all(
    files: &BTreeMap<String, Option<String>>,
    memory_dir: &Path,
    staging: &Path,
    proposed: &BTreeMap<String, Option<String>>,
    (backend, token): (&dyn crate::lock::Backend, &str),
) -> Stopped {
    for rel in files.keys() {
        if let Some(signal) = signals::received() {
            return Stopped::Signal(signal);
        }
        match backend.holds(token) {
            Ok(true) => {}
            Ok(false) => return Stopped::LockLost("the lock was taken by another process".into()),
            Err(e) => return Stopped::LockLost(format!("the lock cannot be checked: {e}")),
        }
        let staged = match store::current_content(staging, rel) {
            Ok(staged) => staged,
            Err(e) => return Stopped::Failed(format!("cannot read the staged {rel}: {e}")),
        };
        // Exactly what the proposal showed, read at the moment it is written: a staged copy
        // changed or removed meanwhile is never taken for "delete this file".
        if staged.as_deref().map(store::sha256_hex) != proposed.get(rel).cloned().flatten() {
            return Stopped::Failed(format!(
                "the staged {rel} is not what the proposal showed any more"
            ));
        }
        let written = (|| -> std::io::Result<()> {
            let path = store::memory_target(memory_dir, rel)?;
            match staged {
                Some(bytes) => {
                    let mode = match std::fs::metadata(&path) {
                        Ok(meta) => meta.permissions().mode() & 0o777,
                        Err(_) => NEW_FILE_MODE,
                    };
                    if let Some(parent) = path.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    // The folders were checked for symlinks before they were made.
                    store::memory_target(memory_dir, rel)?;
                    write_atomic(&path, &bytes, mode)
                }
                None => match std::fs::remove_file(&path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                },
            }
        })();
        if let Err(e) = written {
            return Stopped::Failed(format!("cannot write {rel}: {e}"));
        }
    }
    Stopped::No
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::dream_run::diff::unified_diff;

    #[test]
    fn a_unified_diff_names_both_sides_and_colours_only_its_marks() {
        let text = unified_diff("a/b.md", Some(b"one\ntwo\n"), Some(b"one\nthree\n"));
        assert_eq!(
            text,
            "--- a/a/b.md\n+++ b/a/b.md\n@@ -1,2 +1,2 @@\n one\n-two\n+three\n"
        );
        assert_eq!(unified_diff("x.md", Some(b"same\n"), Some(b"same\n")), "");
        // As git writes them: the side that does not exist is /dev/null.
        assert_eq!(
            unified_diff("n.md", None, Some(b"new\n")),
            "--- /dev/null\n+++ b/n.md\n@@ -0,0 +1 @@\n+new\n"
        );
        assert_eq!(
            unified_diff("g.md", Some(b"old\nx"), None),
            "--- a/g.md\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-old\n-x\n\\ No newline at end of file\n"
        );
        // A secret line, and a key block (its body judged by where it stands, on either
        // side), never in the diff; control and bidi characters neither.
        let before = b"keep\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMx\n-----END RSA PRIVATE KEY-----\n";
        let after = b"keep\naws AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nti\x1b]0;x\x07tle \xe2\x80\xaeevil\n";
        let s = crate::tools::dream_run::check::SECRET_LINE;
        assert_eq!(
            unified_diff("k.md", Some(before), Some(after)),
            format!("--- a/k.md\n+++ b/k.md\n@@ -1,4 +1,3 @@\n keep\n-{s}\n-{s}\n-{s}\n+{s}\n+title evil\n")
        );
        assert_eq!(
            colorize(&text),
            "\x1b[36m--- a/a/b.md\x1b[0m\n\x1b[36m+++ b/a/b.md\x1b[0m\n\x1b[36m@@ -1,2 +1,2 @@\x1b[0m\n one\n\x1b[31m-two\x1b[0m\n\x1b[32m+three\x1b[0m\n"
        );
    }
}
