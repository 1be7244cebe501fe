//! What every command that changes a project's memory does first: put back what a killed
//! command left half done, so that nothing is ever built on it.
//!
//! - Stray temporary files of dead writers, in the memory and state dirs, are removed
//!   ([`super::sweep`]), and so are the staged proposals of proposing runs that died.
//! - The intent journal of an interrupted `apply` or `undo` is rolled back
//!   ([`super::journal`]); a journal that cannot be read is moved aside and reported, never a
//!   reason to refuse forever.
//! - A run whose process died while its record says `running` is an incomplete transaction:
//!   its snapshot is restored, unless a file it touched changed since it last wrote it; then
//!   it is left alone, reported (`orphan_kept`) and `dream-run undo <task>` is the way back.
//!
//! The lock's time: a hold its holder never released moved no time (the file backend
//! carries the time from before it forward, see `lock::file`), and a rolled-back journal
//! gives the caller's release the time from before the command it rolls back.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::ser::SerializeMap;
use serde::Serialize;

use super::journal::{self, Intent, Journal};
use super::snapshot::{self, Snapshot};
use super::staging::PROPOSALS_DIR;
use super::sweep::{self, Swept};
use super::tasks::{TaskRecord, TaskStatus, TaskStore};
use crate::claude::Project;
use crate::cli::time::rfc3339;
use crate::cli::{Diag, Failure};

/// What a command found and rolled back before doing its own work (`recovered` in its JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Skipped {
    pub path: String,
    pub why: String,
}

/// A journal that could not be read or rolled back, moved aside (`journal_corrupt`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CorruptJournal {
    /// Where the journal is now (`<state_dir>/journal.corrupt-<time>`), backing copies kept.
    pub moved_to: String,
    /// Why it could not be used.
    pub error: String,
    /// Each backing copy it holds, and what the memory file holds now beside it.
    pub files: Vec<BackedUp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BackedUp {
    /// The memory file (absolute).
    pub path: String,
    /// Its copy in the moved journal (absolute).
    pub backup: String,
    /// `same_as_backup`, `differs` or `missing`.
    pub memory_now: &'static str,
}

/// A run that died while recorded as `running`, and what was done about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct OrphanRun {
    pub task_id: String,
    pub started_at: String,
    /// `rolled_back` (its snapshot restored), `orphan_kept` (a file it touched changed
    /// since: left alone, `undo` restores it) or `proposal_dropped` (a proposing run: its
    /// staging copy removed; the memory dir was never touched).
    pub outcome: &'static str,
    /// Rolled back: the files put back. Kept: the files changed since the run wrote them.
    pub files: Vec<String>,
    /// Kept: the snapshot `dream-run undo <task>` restores from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// Kept: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl OrphanRun {
    fn new(record: TaskRecord, outcome: &'static str, files: Vec<String>) -> OrphanRun {
        OrphanRun {
            task_id: record.task_id,
            started_at: record.started_at,
            outcome,
            files,
            snapshot: None,
            why: None,
        }
    }
}

/// Everything a command put back before its own work.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    pub journal: Option<Recovered>,
    pub journal_corrupt: Option<CorruptJournal>,
    pub orphans: Vec<OrphanRun>,
    pub swept: Swept,
}

impl Recovery {
    pub fn is_empty(&self) -> bool {
        self.journal.is_none()
            && self.journal_corrupt.is_none()
            && self.orphans.is_empty()
            && self.swept.is_empty()
    }

    /// Its fields in a command's JSON, each only when there is something to say:
    /// `recovered` (the journal rolled back), `journal_corrupt`, `orphans`, `swept`.
    pub fn write_fields<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        if let Some(journal) = &self.journal {
            map.serialize_entry("recovered", journal)?;
        }
        if let Some(corrupt) = &self.journal_corrupt {
            map.serialize_entry("journal_corrupt", corrupt)?;
        }
        if !self.orphans.is_empty() {
            map.serialize_entry("orphans", &self.orphans)?;
        }
        if !self.swept.is_empty() {
            map.serialize_entry("swept", &self.swept)?;
        }
        Ok(())
    }
}

/// As a map of the fields [`Recovery::write_fields`] writes (flattened into a document).
impl Serialize for Recovery {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        self.write_fields(&mut map)?;
        map.end()
    }
}

/// The fields [`Recovery::write_fields`] writes, each optional (a command's JSON names only
/// what there was to put back).
impl schemars::JsonSchema for Recovery {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Recovery".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "properties": {
                // Flattened beside `recover`'s own verb, whose busy answer says `false` here.
                "recovered": {"anyOf": [generator.subschema_for::<Recovered>(), {"const": false}]},
                "journal_corrupt": generator.subschema_for::<CorruptJournal>(),
                "orphans": generator.subschema_for::<Vec<OrphanRun>>(),
                "swept": generator.subschema_for::<Swept>(),
            }
        })
    }
}

/// Whether the journal's command recorded its end (the task record is its commit point):
/// then the journal is only left over and goes without a roll-back.
fn committed(store: &TaskStore, intent: &Intent) -> bool {
    let Ok(record) = store.load(&intent.task_id) else {
        return false;
    };
    match intent.command.as_str() {
        "apply" => record.status == TaskStatus::Completed && record.applied_at.is_some(),
        "undo" => record.status == TaskStatus::Undone,
        _ => false,
    }
}

/// What the journal folder holds.
pub enum Found {
    None,
    /// A command that was stopped midway (not one that still runs, nor one that recorded
    /// its end).
    Interrupted(Journal),
    /// A journal that cannot be read: why.
    Corrupt(String),
}

/// The journal under the project's state dir, judged.
pub fn find_journal(project: &Project) -> Result<Found, Failure> {
    let journal = match Journal::find(&project.state_dir) {
        Ok(Some(journal)) => journal,
        Ok(None) => return Ok(Found::None),
        Err(e) if journal::is_corrupt(&e) => return Ok(Found::Corrupt(e.to_string())),
        Err(e) => {
            return Err(Failure::io(
                "read the journal",
                &journal::path(&project.state_dir),
                &e,
            ))
        }
    };
    if journal.intent.in_progress() {
        return Ok(Found::None);
    }
    let store = TaskStore::new(&project.state_dir);
    if committed(&store, &journal.intent) {
        let _ = journal.commit();
        return Ok(Found::None);
    }
    Ok(Found::Interrupted(journal))
}

/// `<state_dir>/<name>` when it is a folder of its own. A link in its place (to anywhere) is
/// never entered: what recovery removes or rewrites there would be outside the state dir.
fn own_subdir(state_dir: &Path, name: &str) -> Option<PathBuf> {
    let dir = state_dir.join(name);
    std::fs::symlink_metadata(&dir)
        .is_ok_and(|meta| meta.is_dir())
        .then_some(dir)
}

/// Runs whose record says `running` and whose process is gone (oldest first).
pub fn orphaned_runs(state_dir: &Path) -> Vec<TaskRecord> {
    if own_subdir(state_dir, super::tasks::TASKS_DIR).is_none() {
        return Vec::new();
    }
    let store = TaskStore::new(state_dir);
    let Ok((records, _)) = store.list() else {
        return Vec::new();
    };
    // A record is acted on only as the file of its own id holds it: a copy saved under
    // another name (hand-made, restored from a backup) would roll back another task's run.
    let own = |r: &TaskRecord| store.load(&r.task_id).is_ok_and(|own| own == *r);
    let mut orphans: Vec<TaskRecord> = records
        .into_iter()
        .filter(|r| super::tasks::is_task_id(&r.task_id) && r.is_orphaned() && own(r))
        .collect();
    orphans.reverse();
    orphans
}

/// Whether anything waits that only a holder of the lock may put back: a journal to roll
/// back or to move aside, or an orphaned run that may have written memory files.
pub fn needs_lock(project: &Project) -> Result<bool, Failure> {
    if !matches!(find_journal(project)?, Found::None) {
        return Ok(true);
    }
    Ok(orphaned_runs(&project.state_dir)
        .iter()
        .any(|r| r.mode != "propose"))
}

/// What needs no lock: stray temporary files, and the staging copies of proposing runs
/// that died (their records are marked; the memory dir is never touched).
pub fn sweep(project: &Project, diag: &Diag) -> Recovery {
    let mut recovery = Recovery::default();
    let mut dirs: Vec<&Path> = vec![&project.state_dir];
    if project.memory_dir.is_dir() {
        dirs.push(&project.memory_dir);
    }
    sweep::sweep_temp_files(&dirs, &mut recovery.swept);
    for record in orphaned_runs(&project.state_dir) {
        if record.mode == "propose" {
            recovery.orphans.push(drop_proposal(project, record, diag));
        }
    }
    sweep_dead_proposals(project, &mut recovery.swept);
    for failed in &recovery.swept.failed {
        diag.warn(&format!("cannot remove a stray temporary file: {failed}"));
    }
    if !recovery.swept.removed.is_empty() {
        diag.info(&format!(
            "removed {} temporary file{} left by killed processes",
            recovery.swept.removed.len(),
            if recovery.swept.removed.len() == 1 {
                ""
            } else {
                "s"
            }
        ));
    }
    recovery
}

/// Everything, under the caller's lock: the sweep, the journal, the orphaned runs.
/// `prior_mtime` is the time the caller's release gives back; when the lock still shows
/// the time a rolled-back command's acquire wrote, it becomes the time from before it.
pub fn under_lock(
    project: &Project,
    prior_mtime: Option<&mut i64>,
    diag: &Diag,
) -> Result<Recovery, Failure> {
    let mut recovery = sweep(project, diag);
    match find_journal(project)? {
        Found::None => {}
        Found::Interrupted(journal) => {
            match roll_back_journal(project, journal, prior_mtime, diag)? {
                Ok(done) => recovery.journal = Some(done),
                Err(why) => recovery.journal_corrupt = Some(move_aside(project, &why, diag)?),
            }
        }
        Found::Corrupt(why) => recovery.journal_corrupt = Some(move_aside(project, &why, diag)?),
    }
    for record in orphaned_runs(&project.state_dir) {
        if record.mode != "propose" {
            recovery
                .orphans
                .push(restore_orphan(project, record, diag)?);
        }
    }
    Ok(recovery)
}

/// Rolls back an interrupted command's journal; `Err(why)` when the journal turns out to be
/// corrupt midway (a copy that does not match its hash): then it is moved aside.
fn roll_back_journal(
    project: &Project,
    journal: Journal,
    prior_mtime: Option<&mut i64>,
    diag: &Diag,
) -> Result<Result<Recovered, String>, Failure> {
    let intent = journal.intent.clone();
    let memory_dir = &project.memory_dir;
    let done = match journal.roll_back(memory_dir) {
        Ok(done) => done,
        Err(e) if journal::is_corrupt(&e) => return Ok(Err(e.to_string())),
        Err(e) => return Err(Failure::io("roll back the journal of", memory_dir, &e)),
    };
    let mut lock_rolled_back = false;
    if let Some(prior) = prior_mtime {
        if intent.lock_time != intent.prior_mtime {
            // The lock still shows the interrupted command's own time: given back now. (When
            // the command died holding the lock, the acquire already carried the time from
            // before it forward.)
            if *prior == intent.lock_time {
                *prior = intent.prior_mtime;
            }
            lock_rolled_back = *prior == intent.prior_mtime;
        }
    }
    let absolute = |rel: &String| snapshot::absolute(memory_dir, rel);
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
    Ok(Ok(recovered))
}

/// Moves a journal that cannot be used to `journal.corrupt-<time>` (its backing copies
/// kept) and says what each memory file holds now beside its copy.
fn move_aside(project: &Project, why: &str, diag: &Diag) -> Result<CorruptJournal, Failure> {
    let from = journal::path(&project.state_dir);
    let stamp: String = rfc3339(SystemTime::now())
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let mut to = project
        .state_dir
        .join(format!("{}.corrupt-{stamp}", journal::JOURNAL_DIR));
    let mut n = 1;
    while std::fs::symlink_metadata(&to).is_ok() {
        n += 1;
        to = project
            .state_dir
            .join(format!("{}.corrupt-{stamp}-{n}", journal::JOURNAL_DIR));
    }
    std::fs::rename(&from, &to).map_err(|e| Failure::io("move aside the journal", &from, &e))?;
    let files = journal::backing_copies(&to)
        .into_iter()
        .map(|(rel, backup)| {
            let memory_now = match snapshot::current_hash(&project.memory_dir, &rel) {
                Ok(Some(now)) => match crate::files::sha256_regular(&backup, u64::MAX) {
                    Ok(copy) if copy == now => "same_as_backup",
                    _ => "differs",
                },
                _ => "missing",
            };
            BackedUp {
                path: snapshot::absolute(&project.memory_dir, &rel),
                backup: backup.to_string_lossy().into_owned(),
                memory_now,
            }
        })
        .collect::<Vec<BackedUp>>();
    // A memory file that is not as its copy may be half of what the interrupted command did:
    // the user is told how many, and where the copies to put back by hand are.
    let changed = files
        .iter()
        .filter(|f| f.memory_now != "same_as_backup")
        .count();
    let advice = match changed {
        0 => String::new(),
        n => format!(
            ": {n} memory file{} no longer as {} copy (journal_corrupt.files names them); \
             copy back by hand from {} what should be undone",
            if n == 1 { " is" } else { "s are" },
            if n == 1 { "its" } else { "their" },
            to.join("files").display()
        ),
    };
    diag.warn(&format!(
        "the journal {} could not be used ({why}): moved aside to {}, its copies kept; the memory dir is as it is now{advice}",
        from.display(),
        to.display()
    ));
    Ok(CorruptJournal {
        moved_to: to.to_string_lossy().into_owned(),
        error: why.to_string(),
        files,
    })
}

/// Marks an orphaned run's record as what it is now: failed, orphaned, put back or kept.
fn mark_orphan(project: &Project, record: &mut TaskRecord, snapshot_kept: bool) {
    record.status = TaskStatus::Failed;
    record.phase = "done".into();
    record.error = Some("orphaned".into());
    let now = rfc3339(SystemTime::now());
    record.ended_at.get_or_insert_with(|| now.clone());
    if snapshot_kept {
        record.snapshot = Some(
            snapshot::dir_of(&project.state_dir, &record.task_id)
                .to_string_lossy()
                .into_owned(),
        );
    } else {
        record.snapshot = None;
        record.rolled_back_at = Some(now);
    }
    let _ = TaskStore::new(&project.state_dir).save(record);
}

/// A proposing run that died: its staging copy goes, its record says so.
fn drop_proposal(project: &Project, mut record: TaskRecord, diag: &Diag) -> OrphanRun {
    let state_dir = &project.state_dir;
    if let Some(proposals) = own_subdir(state_dir, PROPOSALS_DIR) {
        let _ = std::fs::remove_dir_all(proposals.join(&record.task_id));
    }
    if let Some(snapshots) = own_subdir(state_dir, snapshot::SNAPSHOTS_DIR) {
        let _ = std::fs::remove_dir_all(snapshots.join(&record.task_id));
    }
    mark_orphan(project, &mut record, false);
    diag.warn(&format!(
        "task {} (proposing) died without an end: its staging copy was removed",
        record.task_id
    ));
    OrphanRun::new(record, "proposal_dropped", Vec::new())
}

/// Whether a restore failed for the machine's sake (a full disk, a read-only or unwritable
/// memory dir): then the run is left `running` for the next command to finish, as a kill
/// midway would leave it, rather than given up to `undo`.
fn machine_failure(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        e.kind(),
        K::StorageFull
            | K::FileTooLarge
            | K::QuotaExceeded
            | K::ReadOnlyFilesystem
            | K::PermissionDenied
    ) || e.raw_os_error() == Some(libc::EIO)
}

/// An applying run that died: its snapshot restored, or (a file changed since it wrote
/// it) left alone for `undo`. A restore the machine stops is an error, the run untouched.
fn restore_orphan(
    project: &Project,
    mut record: TaskRecord,
    diag: &Diag,
) -> Result<OrphanRun, Failure> {
    let memory_dir = &project.memory_dir;
    let dir = snapshot::dir_of(&project.state_dir, &record.task_id);
    let absolute = |rels: &[String]| -> Vec<String> {
        rels.iter()
            .map(|rel| snapshot::absolute(memory_dir, rel))
            .collect()
    };
    // Left alone for `undo`: its record marked, its snapshot kept.
    let kept = |mut record: TaskRecord, files: Vec<String>, why: String| {
        mark_orphan(project, &mut record, true);
        diag.warn(&format!(
            "task {} died without an end and was left alone ({why}): `dream-run undo {}` restores its snapshot",
            record.task_id, record.task_id
        ));
        OrphanRun {
            snapshot: Some(dir.to_string_lossy().into_owned()),
            why: Some(why),
            ..OrphanRun::new(record, "orphan_kept", files)
        }
    };
    let linked = |path: &Path| std::fs::symlink_metadata(path).is_ok_and(|meta| !meta.is_dir());
    if linked(&project.state_dir.join(snapshot::SNAPSHOTS_DIR)) || linked(&dir) {
        // Not the snapshot this run wrote: never read, restored from or removed.
        let why = format!("{} is not a snapshot folder: not followed", dir.display());
        return Ok(kept(record, Vec::new(), why));
    }
    if std::fs::symlink_metadata(&dir).is_err() {
        // It died before its first write: nothing to put back.
        mark_orphan(project, &mut record, false);
        diag.info(&format!(
            "task {} died without an end before it wrote anything",
            record.task_id
        ));
        return Ok(OrphanRun::new(record, "rolled_back", Vec::new()));
    }
    let snapshot = match Snapshot::load(&dir) {
        Ok(snapshot) => snapshot,
        Err(e) => {
            let why = format!("its snapshot cannot be read: {e}");
            return Ok(kept(record, Vec::new(), why));
        }
    };
    match snapshot.changed_since(memory_dir) {
        Ok(changed) if !changed.is_empty() => {
            let why = "changed since the run wrote them".to_string();
            return Ok(kept(record, absolute(&changed), why));
        }
        Ok(_) => {}
        Err(e) => {
            return Ok(kept(record, Vec::new(), format!("cannot compare: {e}")));
        }
    }
    let put_back = snapshot.diff(memory_dir).unwrap_or_default();
    let mut files: Vec<String> = put_back
        .created
        .iter()
        .chain(&put_back.modified)
        .chain(&put_back.deleted)
        .cloned()
        .collect();
    files.sort();
    match snapshot.restore(memory_dir) {
        Ok(skipped) if skipped.is_empty() => {}
        Ok(skipped) => {
            let names: Vec<String> = skipped.iter().map(|(rel, _)| rel.clone()).collect();
            let why = skipped
                .first()
                .map_or_else(String::new, |(_, why)| why.clone());
            return Ok(kept(record, absolute(&names), why));
        }
        Err(e) if machine_failure(&e) => {
            return Err(Failure::io("restore the snapshot of", &dir, &e));
        }
        Err(e) => {
            return Ok(kept(record, Vec::new(), format!("the restore failed: {e}")));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    mark_orphan(project, &mut record, false);
    diag.warn(&format!(
        "task {} died without an end: rolled back, {} file{} put back",
        record.task_id,
        files.len(),
        if files.len() == 1 { "" } else { "s" }
    ));
    Ok(OrphanRun::new(record, "rolled_back", absolute(&files)))
}

/// Staging copies no live proposal owns: of a run that ended without proposing (failed,
/// aborted, no changes, discarded, applied), or with no record at all past the stale age.
fn sweep_dead_proposals(project: &Project, swept: &mut Swept) {
    let Some(root) = own_subdir(&project.state_dir, PROPOSALS_DIR) else {
        return;
    };
    // One level by design: each staging copy is a folder named by its task, removed whole.
    let Ok(entries) = std::fs::read_dir(&root) else {
        return;
    };
    let store = TaskStore::new(&project.state_dir);
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) || !super::tasks::is_task_id(&name) {
            continue;
        }
        let dead = match store.load(&name) {
            Ok(record) => {
                record.status != TaskStatus::Proposed && record.status != TaskStatus::Running
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => entry
                .metadata()
                .is_ok_and(|meta| sweep::is_stale(&meta, now)),
            Err(_) => false,
        };
        if dead {
            let path = entry.path();
            match std::fs::remove_dir_all(&path) {
                Ok(()) => swept.proposals.push(path.to_string_lossy().into_owned()),
                Err(e) => swept.failed.push(format!("{}: {e}", path.display())),
            }
        }
    }
}
