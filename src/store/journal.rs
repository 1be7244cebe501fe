//! The intent journal of a command that changes several memory files at once (`apply`,
//! `undo`). Before the first file changes, a copy of every file the command will touch and the
//! content each will hold afterwards are written to `<state_dir>/journal/` (made aside and
//! renamed into place, so a journal is whole or absent). The task record the command writes at
//! its end is the commit point; the journal is removed after it.
//!
//! A journal found later means the command was stopped midway (kill -9, a power cut): the next
//! command that changes state, or `dream-run recover`, puts every file back as it was before,
//! under the lock, and the lock's time back too. A file that holds neither its content from
//! before nor the content the command meant to write was changed by someone else since: it is
//! left alone and named. Read-only commands only report the journal.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::snapshot::{self, sha256_hex, Kept};
use crate::cli::time::{parse_rfc3339, rfc3339};
use crate::files::{create_private_dir, read_regular, write_atomic};
use crate::lock::process;

/// Under the state dir.
pub(super) const JOURNAL_DIR: &str = "journal";
const INTENT: &str = "intent.json";
/// A journal being built, beside the state dir's `journal` (renamed into place when whole).
const BUILDING: &str = ".journal-";
const FILES: &str = "files";
/// Mode of a file the roll-back re-creates when the copy has none recorded.
const NEW_FILE_MODE: u32 = 0o644;

/// One file the command changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    /// As it was before the command (`None`: it did not exist); the copy is in the journal.
    pub before: Option<Kept>,
    /// The sha256 of what the command writes there (`None`: it deletes the file).
    pub after: Option<String>,
}

/// What the journal says the command was doing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// `apply` or `undo`.
    pub command: String,
    pub task_id: String,
    pub pid: u32,
    pub started_at: String,
    /// The memory dir as the project names it.
    pub memory_dir: String,
    /// The last-consolidated time before the command took the lock (epoch ms, 0 = never):
    /// what a roll-back gives the lock back.
    pub prior_mtime: i64,
    /// The last-consolidated time the command's own acquire wrote (epoch ms): the lock is
    /// rolled back only while it still shows this time.
    pub lock_time: i64,
    /// Relative to the memory dir.
    pub files: BTreeMap<String, Planned>,
    /// Folders the command creates, outermost first (removed again when left empty).
    #[serde(default)]
    pub created_dirs: Vec<String>,
}

/// What [`Journal::roll_back`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RolledBack {
    /// Files put back as they were (relative to the memory dir).
    pub restored: Vec<String>,
    /// Files left alone, with why (someone changed them since).
    pub skipped: Vec<(String, String)>,
}

/// A journal on disk.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    pub intent: Intent,
}

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(JOURNAL_DIR)
}

impl Intent {
    /// A new intent for `command` on `task_id`; files are added with [`Intent::plan`].
    pub fn new(
        command: &str,
        task_id: &str,
        memory_dir: &Path,
        prior_mtime: i64,
        lock_time: i64,
    ) -> Intent {
        Intent {
            command: command.to_string(),
            task_id: task_id.to_string(),
            pid: std::process::id(),
            started_at: rfc3339(SystemTime::now()),
            memory_dir: memory_dir.to_string_lossy().into_owned(),
            prior_mtime,
            lock_time,
            files: BTreeMap::new(),
            created_dirs: Vec::new(),
        }
    }

    /// Whether the process that wrote this intent still runs (then it is not interrupted).
    pub fn in_progress(&self) -> bool {
        let info = process::probe(self.pid);
        let started = parse_rfc3339(&self.started_at);
        match (info.alive, info.started, started) {
            (false, _, _) => false,
            (true, Some(proc_start), Some(at)) => proc_start <= at + crate::lock::START_SLACK,
            (true, _, _) => true,
        }
    }
}

impl Journal {
    /// Writes the journal for `intent`, whose files name what will change and to what: the
    /// current content of each file is copied first. Nothing in the memory dir is changed
    /// here. Fails when a journal is already there (recover it first).
    pub fn begin(
        state_dir: &Path,
        memory_dir: &Path,
        mut intent: Intent,
        after: &BTreeMap<String, Option<String>>,
    ) -> std::io::Result<Journal> {
        let dir = path(state_dir);
        if std::fs::symlink_metadata(&dir).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} holds an interrupted command's journal: run `dream-run recover` first",
                    dir.display()
                ),
            ));
        }
        create_private_dir(state_dir)?;
        let building = tempfile::Builder::new()
            .prefix(&format!("{BUILDING}{}-", std::process::id()))
            .tempdir_in(state_dir)?;
        for (rel, wanted) in after {
            let target = snapshot::target(memory_dir, rel)?;
            let before = match read_regular(&target) {
                Ok(bytes) => {
                    // Permission bits only: a set-id or sticky bit is never carried back.
                    let mode = std::fs::metadata(&target)?.permissions().mode() & 0o777;
                    let copy = building.path().join(FILES).join(rel);
                    if let Some(parent) = copy.parent() {
                        create_private_dir(parent)?;
                    }
                    write_atomic(&copy, &bytes, 0o600)?;
                    Some(Kept {
                        sha256: sha256_hex(&bytes),
                        mode,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let mut missing = Vec::new();
                    let mut parent = Path::new(rel).parent();
                    while let Some(d) = parent.filter(|d| !d.as_os_str().is_empty()) {
                        if memory_dir.join(d).exists() {
                            break;
                        }
                        missing.push(d.to_string_lossy().into_owned());
                        parent = d.parent();
                    }
                    for d in missing.into_iter().rev() {
                        if !intent.created_dirs.contains(&d) {
                            intent.created_dirs.push(d);
                        }
                    }
                    None
                }
                Err(e) => return Err(e),
            };
            intent.files.insert(
                rel.clone(),
                Planned {
                    before,
                    after: wanted.clone(),
                },
            );
        }
        let bytes = serde_json::to_vec_pretty(&intent).map_err(std::io::Error::other)?;
        write_atomic(&building.path().join(INTENT), &bytes, 0o600)?;
        let built = building.keep();
        std::fs::set_permissions(&built, std::fs::Permissions::from_mode(0o700))?;
        if let Err(e) = std::fs::rename(&built, &dir) {
            let _ = std::fs::remove_dir_all(&built);
            return Err(e);
        }
        sync_dir(state_dir);
        Ok(Journal { dir, intent })
    }

    /// The journal under `state_dir`, if one is there. A journal that names anything but
    /// memory files was not written by us: an error, never acted on. Half-built or
    /// half-removed journals of earlier processes are cleared away.
    ///
    /// Anything in the journal's place that is not a whole journal (a folder without its
    /// intent, an intent that does not parse, a file or a link where the folder should be)
    /// is an error of kind `InvalidData` ([`is_corrupt`]): the caller moves it aside.
    pub fn find(state_dir: &Path) -> std::io::Result<Option<Journal>> {
        clear_leftovers(state_dir);
        let dir = path(state_dir);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(meta) => {
                let kind = if meta.file_type().is_symlink() {
                    "a symbolic link"
                } else {
                    crate::files::file_kind(meta.file_type())
                };
                return Err(corrupt(format!(
                    "{} is {kind}, not a journal folder",
                    dir.display()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        }
        let intent_path = dir.join(INTENT);
        let bytes = match crate::files::open_regular_no_follow_with_metadata(&intent_path) {
            Ok((mut file, meta)) if meta.len() <= MAX_INTENT => {
                crate::files::read_sized(&mut file, meta.len(), MAX_INTENT)?
            }
            Ok(_) => {
                return Err(corrupt(format!(
                    "{} is over {MAX_INTENT} bytes",
                    intent_path.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(corrupt(format!("{} is missing", intent_path.display())))
            }
            Err(e) if crate::files::is_not_regular(&e) || e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(corrupt(format!("{}: {e}", intent_path.display())))
            }
            Err(e) => return Err(e),
        };
        let intent: Intent = serde_json::from_slice(&bytes)
            .map_err(|e| corrupt(format!("{}: {e}", intent_path.display())))?;
        let names = intent.files.keys().chain(&intent.created_dirs);
        for name in names {
            let plain = Path::new(name)
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            if name.is_empty() || !plain {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "{} names {name:?}, which is not inside the memory dir: refused",
                        dir.join(INTENT).display()
                    ),
                ));
            }
        }
        Ok(Some(Journal { dir, intent }))
    }

    /// The command finished and recorded it: the journal goes (renamed away first, so a
    /// removal cut short never looks like a journal).
    pub fn commit(self) -> std::io::Result<()> {
        let parent = self.dir.parent().unwrap_or(Path::new("."));
        let gone = parent.join(format!(".journal-done-{}", uuid::Uuid::new_v4().simple()));
        std::fs::rename(&self.dir, &gone)?;
        sync_dir(parent);
        std::fs::remove_dir_all(&gone)
    }

    /// Puts every file the command touched back as it was before it, then removes the
    /// journal. `memory_dir` is the project's (the journal's own note of it is only shown).
    pub fn roll_back(self, memory_dir: &Path) -> std::io::Result<RolledBack> {
        let mut done = RolledBack::default();
        for (rel, planned) in &self.intent.files {
            let now = match snapshot::current_hash(memory_dir, rel) {
                Ok(now) => now,
                Err(e) => {
                    done.skipped.push((rel.clone(), e.to_string()));
                    continue;
                }
            };
            let before = planned.before.as_ref().map(|k| k.sha256.clone());
            if now == before {
                continue;
            }
            if now != planned.after {
                done.skipped.push((
                    rel.clone(),
                    "changed by someone else since the command wrote it".into(),
                ));
                continue;
            }
            let target = snapshot::target(memory_dir, rel)?;
            match &planned.before {
                Some(kept) => {
                    // Never through a link someone put in the journal's place.
                    let copy = self.dir.join(FILES).join(rel);
                    let bytes = match crate::files::open_regular_no_follow_with_metadata(&copy) {
                        Ok((mut file, meta)) => {
                            crate::files::read_sized(&mut file, meta.len(), u64::MAX)?
                        }
                        Err(e) => {
                            return Err(corrupt(format!(
                                "the journal's copy of {rel} cannot be read: {e}"
                            )))
                        }
                    };
                    if sha256_hex(&bytes) != kept.sha256 {
                        return Err(corrupt(format!(
                            "the journal's copy of {rel} does not match its hash"
                        )));
                    }
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    // Permission bits only, whatever the journal says (a hand-edited
                    // 0o6777 must not make a memory file set-id).
                    let mode = match kept.mode & 0o777 {
                        0 => NEW_FILE_MODE,
                        mode => mode,
                    };
                    write_atomic(&target, &bytes, mode)?;
                }
                None => match std::fs::remove_file(&target) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                },
            }
            done.restored.push(rel.clone());
        }
        for dir in self.intent.created_dirs.iter().rev() {
            // Only when empty: anything someone else put there stays.
            let _ = std::fs::remove_dir(memory_dir.join(dir));
        }
        self.commit()?;
        Ok(done)
    }
}

/// The most an intent may hold (a few hundred bytes a file, for thousands of files).
const MAX_INTENT: u64 = 64 * 1024 * 1024;

fn corrupt(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

/// Whether an error of [`Journal::find`] or [`Journal::roll_back`] means the journal itself
/// cannot be used (as opposed to the machine failing: a permission, a full disk).
pub(super) fn is_corrupt(err: &std::io::Error) -> bool {
    err.kind() == std::io::ErrorKind::InvalidData
}

/// The backing copies a journal folder holds: each memory file (relative) and its copy.
/// Symlinks are not followed, the journal's own place and its `files` included: a link
/// there leads to what is not a journal's copy.
pub(super) fn backing_copies(journal_dir: &Path) -> Vec<(String, PathBuf)> {
    if !std::fs::symlink_metadata(journal_dir).is_ok_and(|meta| meta.is_dir()) {
        return Vec::new();
    }
    let files = journal_dir.join(FILES);
    walkdir::WalkDir::new(&files)
        .follow_links(false)
        .follow_root_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| {
            let rel = e
                .path()
                .strip_prefix(&files)
                .ok()?
                .to_string_lossy()
                .into_owned();
            Some((rel, e.into_path()))
        })
        .collect()
}

/// Journals being built or removed by a process that died meanwhile.
fn clear_leftovers(state_dir: &Path) {
    // One level by design: journals sit directly in the state dir, and a leftover one goes
    // whole (remove_dir_all), so nothing inside it need be walked.
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_dir {
            continue;
        }
        let old = || {
            entry
                .metadata()
                .is_ok_and(|meta| super::sweep::is_stale(&meta, std::time::SystemTime::now()))
        };
        // `.journal-<pid>-*` is being built by that process: left alone while it lives.
        let builder_gone = || {
            name.strip_prefix(BUILDING)
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<u32>().ok())
                .is_some_and(|pid| !process::probe(pid).alive)
        };
        let stale = name.starts_with(".journal-done-")
            || (name.starts_with(BUILDING) && (builder_gone() || old()));
        if stale {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A rename is durable once its directory is synced; failure to sync is not worth an error.
fn sync_dir(dir: &Path) {
    if let Ok(handle) = std::fs::File::open(dir) {
        let _ = handle.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(mem: &Path, rel: &str, text: &str) {
        let path = mem.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_journal_rolls_back_what_landed_and_leaves_what_others_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        let state = tmp.path().join("state");
        write(&mem, "MEMORY.md", "old index\n");
        write(&mem, "a.md", "a\n");
        write(&mem, "gone.md", "gone\n");
        write(&mem, "person.md", "p\n");
        let mut after = BTreeMap::new();
        after.insert("MEMORY.md".to_string(), Some(sha256_hex(b"new index\n")));
        after.insert("a.md".to_string(), Some(sha256_hex(b"a2\n")));
        after.insert("gone.md".to_string(), None);
        after.insert("new/deep/n.md".to_string(), Some(sha256_hex(b"n\n")));
        after.insert("person.md".to_string(), Some(sha256_hex(b"p2\n")));
        let intent = Intent::new("apply", "t1", &mem, 5, 9);
        let journal = Journal::begin(&state, &mem, intent, &after).unwrap();
        assert!(Journal::begin(&state, &mem, journal.intent.clone(), &after).is_err());
        // Half the command landed; someone else edited person.md meanwhile.
        write(&mem, "MEMORY.md", "new index\n");
        std::fs::remove_file(mem.join("gone.md")).unwrap();
        write(&mem, "new/deep/n.md", "n\n");
        write(&mem, "person.md", "someone else\n");
        drop(journal);
        let found = Journal::find(&state).unwrap().expect("journal");
        assert_eq!(found.intent.created_dirs, ["new", "new/deep"]);
        assert!(found.intent.in_progress(), "our own process");
        let done = found.roll_back(&mem).unwrap();
        assert_eq!(done.restored, ["MEMORY.md", "gone.md", "new/deep/n.md"]);
        assert_eq!(done.skipped.len(), 1);
        assert_eq!(done.skipped[0].0, "person.md");
        assert_eq!(
            std::fs::read_to_string(mem.join("MEMORY.md")).unwrap(),
            "old index\n"
        );
        assert_eq!(
            std::fs::read_to_string(mem.join("gone.md")).unwrap(),
            "gone\n"
        );
        assert_eq!(std::fs::read_to_string(mem.join("a.md")).unwrap(), "a\n");
        assert!(!mem.join("new").exists());
        assert_eq!(
            std::fs::read_to_string(mem.join("person.md")).unwrap(),
            "someone else\n"
        );
        assert!(Journal::find(&state).unwrap().is_none());
        let left: Vec<_> = std::fs::read_dir(&state).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_journal_naming_paths_outside_the_memory_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path();
        let mut intent = Intent::new("apply", "t", tmp.path(), 0, 0);
        intent.files.insert(
            "../../etc/x.md".into(),
            Planned {
                before: None,
                after: None,
            },
        );
        create_private_dir(&path(state)).unwrap();
        std::fs::write(
            path(state).join(INTENT),
            serde_json::to_vec(&intent).unwrap(),
        )
        .unwrap();
        let err = Journal::find(state).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    }
}
