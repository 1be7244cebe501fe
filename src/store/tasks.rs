//! Task records (`<state_dir>/tasks/<task_id>.json`, rewritten atomically as a run goes) and
//! the pending-updates file the next session's hook reads.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::cli::time::{parse_rfc3339, rfc3339};
use crate::cli::{Diag, RunStatus};
use crate::files::{create_private_dir, write_atomic};
use crate::lock::process;
use crate::model::Usage;

pub(super) const TASKS_DIR: &str = "tasks";
pub(super) const PENDING_FILE: &str = "pending-updates.jsonl";
/// A record keeps the last this many assistant turns.
pub(super) const KEEP_TURNS: usize = 30;
/// A task record (30 turns of 500 characters, at most 500 files with their provenance) is
/// well under this; a larger file is refused (listed as unreadable), never read whole.
pub(super) const MAX_RECORD_BYTES: u64 = 16 * 1024 * 1024;
/// `pending-updates.jsonl` grows by one line per completed run until a session reads it
/// (`pending --hook` clears it); past this it is an error naming the cap, never read whole.
pub(super) const MAX_PENDING_BYTES: u64 = 64 * 1024 * 1024;

/// One assistant turn as the record shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Turn {
    pub text: String,
    pub tool_use_count: usize,
}

/// The token counters, in a form that can be read back.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct UsageRecord {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

impl From<Usage> for UsageRecord {
    fn from(u: Usage) -> Self {
        UsageRecord {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_creation_input_tokens: u.cache_creation_input_tokens,
            cache_read_input_tokens: u.cache_read_input_tokens,
        }
    }
}

/// Where a task stands (SPEC §5's `status`), spelled in the record as before it was typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Running,
    Completed,
    Failed,
    Aborted,
    Skipped,
    Proposed,
    NoChanges,
    Discarded,
    Undone,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 9] = [
        TaskStatus::Running,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Aborted,
        TaskStatus::Skipped,
        TaskStatus::Proposed,
        TaskStatus::NoChanges,
        TaskStatus::Discarded,
        TaskStatus::Undone,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Aborted => "aborted",
            TaskStatus::Skipped => "skipped",
            TaskStatus::Proposed => "proposed",
            TaskStatus::NoChanges => "no_changes",
            TaskStatus::Discarded => "discarded",
            TaskStatus::Undone => "undone",
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a run that ended is recorded. A dry run keeps no record; were one kept, it changed
/// nothing, as a skipped run.
impl From<RunStatus> for TaskStatus {
    fn from(status: RunStatus) -> TaskStatus {
        match status {
            RunStatus::Completed => TaskStatus::Completed,
            RunStatus::Failed => TaskStatus::Failed,
            RunStatus::Aborted => TaskStatus::Aborted,
            RunStatus::Proposed => TaskStatus::Proposed,
            RunStatus::Skipped | RunStatus::DryRun => TaskStatus::Skipped,
            RunStatus::NoChanges => TaskStatus::NoChanges,
        }
    }
}

/// SPEC §5's task record, plus where its snapshot is and what the run changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskRecord {
    pub task_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// running | completed | failed | aborted | skipped | proposed | no_changes | discarded |
    /// undone
    // The schema stays the string it always was (the values are in its description).
    #[schemars(with = "String")]
    pub status: TaskStatus,
    /// starting | updating | done
    pub phase: String,
    pub sessions_reviewing: usize,
    pub files_touched: Vec<String>,
    pub turns: Vec<Turn>,
    pub prior_mtime: i64,
    pub lock_token: Option<String>,
    pub pid: u32,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub usage: UsageRecord,
    pub error: Option<String>,
    /// The snapshot folder, while one is kept (for `undo`, or a manual restore).
    #[serde(default)]
    pub snapshot: Option<String>,
    /// Set when `undo` put the memory dir back.
    #[serde(default)]
    pub undone_at: Option<String>,
    /// Set when the run died unfinished and a later command put its changes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back_at: Option<String>,
    /// A proposal's manifest: each file it changes (relative to the memory dir) with the
    /// sha256 it had there when the proposal was made (`None`: it did not exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<std::collections::BTreeMap<String, Option<String>>>,
    /// A proposal's staged result: each file's sha256 in the staging copy (`None`: deleted),
    /// so `apply` writes exactly what was shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed: Option<std::collections::BTreeMap<String, Option<String>>>,
    /// The memory check's counts before and after the run (`run.health`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<serde_json::Value>,
    /// What the run changed (or proposes), with absolute paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<super::snapshot::Diff>,
    /// The same as a unified diff (`--- a/<rel>` / `+++ b/<rel>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_text: Option<String>,
    /// Set when `apply` wrote a proposal into the memory dir.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_at: Option<String>,
    /// `apply` (the run wrote the memory dir) or `propose` (a staging copy).
    #[serde(default = "apply_mode")]
    pub mode: String,
    /// `model` or `rules` (`--engine`); records from before engines existed are `model`.
    #[serde(default = "model_engine")]
    pub engine: String,
    /// Each change the run made (or proposes), where the engine knows them one by one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<super::changes::Change>,
}

fn apply_mode() -> String {
    "apply".into()
}

fn model_engine() -> String {
    "model".into()
}

impl TaskRecord {
    pub fn new(task_id: &str, sessions: usize, prior_mtime: i64, token: Option<String>) -> Self {
        TaskRecord {
            task_id: task_id.to_string(),
            kind: "dream".into(),
            status: TaskStatus::Running,
            phase: "starting".into(),
            sessions_reviewing: sessions,
            files_touched: Vec::new(),
            turns: Vec::new(),
            prior_mtime,
            lock_token: token,
            pid: std::process::id(),
            started_at: rfc3339(SystemTime::now()),
            ended_at: None,
            usage: UsageRecord::default(),
            error: None,
            snapshot: None,
            undone_at: None,
            rolled_back_at: None,
            proposal: None,
            proposed: None,
            health: None,
            diff: None,
            diff_text: None,
            applied_at: None,
            mode: apply_mode(),
            engine: model_engine(),
            changes: Vec::new(),
        }
    }

    /// When the run's change landed in the memory dir (an applied proposal: when applied).
    pub fn landed_at(&self) -> &str {
        self.applied_at
            .as_deref()
            .or(self.ended_at.as_deref())
            .unwrap_or(&self.started_at)
    }

    pub fn push_turn(&mut self, turn: Turn) {
        self.turns.push(turn);
        if self.turns.len() > KEEP_TURNS {
            let extra = self.turns.len() - KEEP_TURNS;
            self.turns.drain(..extra);
        }
    }

    /// A `running` record whose process is gone (or is a later process with the same PID)
    /// was orphaned: its run died without recording an end.
    pub fn is_orphaned(&self) -> bool {
        if self.status != TaskStatus::Running {
            return false;
        }
        let info = process::probe(self.pid);
        let started = parse_rfc3339(&self.started_at);
        match (info.alive, info.started, started) {
            (false, _, _) => true,
            (true, Some(proc_start), Some(task_start)) => {
                proc_start > task_start + crate::lock::START_SLACK
            }
            _ => false,
        }
    }
}

/// Where task records live.
pub struct TaskStore {
    dir: PathBuf,
}

impl TaskStore {
    pub fn new(state_dir: &Path) -> Self {
        TaskStore {
            dir: state_dir.join(TASKS_DIR),
        }
    }

    /// The project's state dir the records live in.
    pub fn state_dir(&self) -> &Path {
        self.dir.parent().unwrap_or(&self.dir)
    }

    pub fn path_of(&self, task_id: &str) -> PathBuf {
        self.dir.join(format!("{task_id}.json"))
    }

    pub fn save(&self, record: &TaskRecord) -> std::io::Result<()> {
        crate::files::refuse_link(&self.dir)?;
        create_private_dir(&self.dir)?;
        let bytes = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
        write_atomic(&self.path_of(&record.task_id), &bytes, 0o600)
    }

    pub fn load(&self, task_id: &str) -> std::io::Result<TaskRecord> {
        let bytes = crate::files::read_regular_capped(&self.path_of(task_id), MAX_RECORD_BYTES)?;
        serde_json::from_slice(&bytes).map_err(std::io::Error::other)
    }

    /// Every readable record, newest first. A corrupt record is skipped (and named in the
    /// second list) rather than hiding the others.
    pub fn list(&self) -> std::io::Result<(Vec<TaskRecord>, Vec<String>)> {
        // One level by design: the records are `tasks/<id>.json`, nothing below.
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Vec::new(), Vec::new()))
            }
            Err(e) => return Err(e),
        };
        let mut records = Vec::new();
        let mut unreadable = Vec::new();
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if !entry.file_type()?.is_file() {
                continue;
            }
            match self.load(id) {
                Ok(record) => records.push(record),
                Err(_) => unreadable.push(id.to_string()),
            }
        }
        records.sort_by(|a, b| {
            (b.started_at.as_str(), b.task_id.as_str())
                .cmp(&(a.started_at.as_str(), a.task_id.as_str()))
        });
        Ok((records, unreadable))
    }
}

/// One line of `pending-updates.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingUpdate {
    pub source: String,
    pub task_id: String,
    pub files_touched: Vec<String>,
    pub at: String,
}

pub fn pending_path(state_dir: &Path) -> PathBuf {
    state_dir.join(PENDING_FILE)
}

/// The pending updates, oldest first; lines that do not parse are skipped.
pub fn read_pending(state_dir: &Path) -> std::io::Result<Vec<PendingUpdate>> {
    let bytes = match crate::files::read_regular_capped(&pending_path(state_dir), MAX_PENDING_BYTES)
    {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(bytes
        .split(|b| *b == b'\n')
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect())
}

/// Appenders and the clearer of the pending file take this lock, so a clear (a rename) never
/// drops a line appended at the same moment.
fn lock_pending(state_dir: &Path) -> std::io::Result<std::fs::File> {
    create_private_dir(state_dir)?;
    let guard = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .mode(0o600)
        .open(state_dir.join("pending-updates.lock"))?;
    fs4::FileExt::lock(&guard)?;
    Ok(guard)
}

/// Appends one update line (one write; a short write is undone).
pub fn append_pending(state_dir: &Path, update: &PendingUpdate) -> std::io::Result<()> {
    let _guard = lock_pending(state_dir)?;
    let mut line = serde_json::to_vec(update).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let path = pending_path(state_dir);
    // Created (private) if missing; appends never create, so a typo cannot make a file.
    // O_NONBLOCK: a FIFO in its place fails here (no reader) instead of blocking.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| crate::files::unopenable_named(e, &path, true))?;
    crate::files::append_undoable(&path, &line, None)
        .map(|_| ())
        .map_err(std::io::Error::other)
}

/// Empties the pending updates, keeping any line appended after `seen` were read (a run that
/// finished between the read and the clear is not lost).
pub fn clear_pending(state_dir: &Path, seen: &[PendingUpdate]) -> std::io::Result<()> {
    rewrite_pending(state_dir, |u| !seen.contains(u))
}

/// Withdraws a task's update that no session was told about yet (the task was undone).
/// Returns whether there was one.
pub fn withdraw_pending(state_dir: &Path, task_id: &str) -> std::io::Result<bool> {
    if !read_pending(state_dir)?
        .iter()
        .any(|u| u.task_id == task_id)
    {
        return Ok(false);
    }
    rewrite_pending(state_dir, |u| u.task_id != task_id)?;
    Ok(true)
}

/// Rewrites the pending file with the lines `keep` keeps, under the appenders' lock.
fn rewrite_pending(state_dir: &Path, keep: impl Fn(&PendingUpdate) -> bool) -> std::io::Result<()> {
    let _guard = lock_pending(state_dir)?;
    let now = read_pending(state_dir)?;
    let rest: Vec<&PendingUpdate> = now.iter().filter(|u| keep(u)).collect();
    let mut text = String::new();
    for update in rest {
        text.push_str(&serde_json::to_string(update).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    let path = pending_path(state_dir);
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        _ => write_atomic(&path, text.as_bytes(), 0o600),
    }
}

/// Keeps the snapshots of the newest completed runs, drops the rest.
pub fn prune_snapshots(store: &TaskStore, diag: &Diag) {
    // A link in place of `snapshots/` leads out of the state dir: nothing is removed there.
    let snapshots = store.state_dir().join(super::snapshot::SNAPSHOTS_DIR);
    if !std::fs::symlink_metadata(&snapshots).is_ok_and(|meta| meta.is_dir()) {
        return;
    }
    let Ok((records, _)) = store.list() else {
        return;
    };
    let with_snapshot = records.into_iter().filter(|r| {
        r.status == TaskStatus::Completed && r.snapshot.is_some() && is_task_id(&r.task_id)
    });
    for mut old in with_snapshot.skip(super::snapshot::KEEP_COMPLETED) {
        // Always the task's own folder under the state dir: the record only says one exists.
        let dir = super::snapshot::dir_of(store.state_dir(), &old.task_id);
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                diag.warn(&format!(
                    "cannot remove the old snapshot {}: {e}",
                    dir.display()
                ));
                continue;
            }
        }
        old.snapshot = None;
        let _ = store.save(&old);
    }
}

/// Task ids name files: letters, digits and `-` only.
pub fn is_task_id(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_round_trips_as_the_string_records_always_held() {
        for status in TaskStatus::ALL {
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
            assert_eq!(serde_json::from_str::<TaskStatus>(&json).unwrap(), status);
            assert_eq!(status.to_string(), status.as_str());
        }
        let spelled: Vec<&str> = TaskStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            spelled,
            [
                "running",
                "completed",
                "failed",
                "aborted",
                "skipped",
                "proposed",
                "no_changes",
                "discarded",
                "undone"
            ]
        );
        assert!(serde_json::from_str::<TaskStatus>("\"finished\"").is_err());
    }

    #[test]
    fn a_record_on_disk_reads_and_writes_back_byte_identical_whatever_its_status() {
        let mut record = TaskRecord::new("t", 1, 0, None);
        record.started_at = "2026-12-01T00:00:00.000Z".into();
        let running = serde_json::to_string(&record).unwrap();
        assert!(running.contains("\"status\":\"running\""), "{running}");
        for status in TaskStatus::ALL {
            let on_disk = running.replace(
                "\"status\":\"running\"",
                &format!("\"status\":\"{status}\""),
            );
            let read: TaskRecord = serde_json::from_str(&on_disk).unwrap();
            assert_eq!(read.status, status);
            assert_eq!(serde_json::to_string(&read).unwrap(), on_disk);
        }
    }

    #[test]
    fn a_run_status_is_recorded_as_the_same_word() {
        for run in RunStatus::ALL {
            let recorded = TaskStatus::from(run);
            if run == RunStatus::DryRun {
                assert_eq!(recorded, TaskStatus::Skipped);
            } else {
                assert_eq!(recorded.as_str(), run.as_str());
            }
        }
    }

    #[test]
    fn records_round_trip_and_list_newest_first() {
        let tmp = tempfile::tempdir().unwrap();
        let store = TaskStore::new(tmp.path());
        let mut a = TaskRecord::new("a", 2, 0, None);
        a.started_at = "2026-12-01T00:00:00.000Z".into();
        let mut b = TaskRecord::new("b", 3, 5, Some("1:5".into()));
        b.started_at = "2026-12-02T00:00:00.000Z".into();
        store.save(&a).unwrap();
        store.save(&b).unwrap();
        std::fs::write(store.path_of("junk"), "{").unwrap();
        let (list, bad) = store.list().unwrap();
        assert_eq!(
            list.iter().map(|r| r.task_id.as_str()).collect::<Vec<_>>(),
            ["b", "a"]
        );
        assert_eq!(bad, ["junk"]);
        assert_eq!(store.load("b").unwrap(), b);
    }

    #[test]
    fn turns_keep_the_last_thirty() {
        let mut r = TaskRecord::new("t", 1, 0, None);
        for n in 0..35 {
            r.push_turn(Turn {
                text: n.to_string(),
                tool_use_count: 0,
            });
        }
        assert_eq!(r.turns.len(), KEEP_TURNS);
        assert_eq!(r.turns[0].text, "5");
    }

    #[test]
    fn a_running_record_of_a_dead_pid_is_orphaned() {
        let mut r = TaskRecord::new("t", 1, 0, None);
        assert!(!r.is_orphaned(), "our own live process");
        r.pid = u32::MAX - 7;
        assert!(r.is_orphaned());
        r.status = TaskStatus::Completed;
        assert!(!r.is_orphaned());
    }

    #[test]
    fn clearing_keeps_updates_that_arrived_later() {
        let tmp = tempfile::tempdir().unwrap();
        let u = |id: &str| PendingUpdate {
            source: "dream".into(),
            task_id: id.into(),
            files_touched: vec!["a.md".into()],
            at: "2026-12-01T00:00:00.000Z".into(),
        };
        let line = |p: &PendingUpdate| serde_json::to_string(p).unwrap() + "\n";
        std::fs::write(pending_path(tmp.path()), line(&u("1"))).unwrap();
        let seen = read_pending(tmp.path()).unwrap();
        std::fs::write(
            pending_path(tmp.path()),
            line(&u("1")) + &line(&u("2")) + "garbage\n",
        )
        .unwrap();
        clear_pending(tmp.path(), &seen).unwrap();
        assert_eq!(read_pending(tmp.path()).unwrap(), vec![u("2")]);
    }
}
