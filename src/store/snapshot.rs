//! What a run changed in the memory dir, and how to put it back. Each file is copied under
//! the state dir right before the run's first write to it (so a file at any depth, or one
//! Claude Code wrote after the run started, is kept as it was just before the run touched
//! it), with its mode; the content the run left is recorded after each write.
//!
//! Restoring and undoing only touch the files the run itself touched, never through a
//! symlink, and never a file changed by someone else since the run wrote it: a note that
//! Claude Code (or a person) wrote meanwhile is never lost.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::files::{create_private_dir, read_regular, write_atomic};

/// Under the state dir: one folder per run.
pub(super) const SNAPSHOTS_DIR: &str = "snapshots";
/// How many completed runs keep their snapshot (so `undo` can reach them).
pub(super) const KEEP_COMPLETED: usize = 10;
/// The manifest as one document (snapshots made before the log existed; still read).
const MANIFEST: &str = "manifest.json";
/// The manifest as a log of events, one JSON line each, appended as the run goes: the cost
/// of a write does not grow with the number of files written before it.
const LOG: &str = "manifest.jsonl";
const FILES: &str = "files";
/// A manifest names each file a run touched in a line or two (a few hundred bytes); a run
/// touches at most `--max-files` files.
const MAX_MANIFEST: u64 = 64 * 1024 * 1024;

/// A file's content hash, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    crate::files::hex(&sha2::Sha256::digest(bytes))
}

/// A file as it was before the run's first write to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    pub sha256: String,
    pub mode: u32,
}

/// What a snapshot holds, keyed by the path relative to the memory dir.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub task_id: String,
    /// Every file the run touched, as it was before (`None`: it did not exist).
    pub before: BTreeMap<String, Option<Kept>>,
    /// The same files as the run left them (`None`: deleted).
    #[serde(default)]
    pub after: BTreeMap<String, Option<String>>,
    /// Folders the run's writes created, deepest last: removed again when a restore leaves
    /// them empty.
    #[serde(default)]
    pub created_dirs: Vec<String>,
    /// Every content the run wrote (or was about to write) to each file, in order: a run
    /// killed between two writes to one file left one of them there, and each is the run's.
    #[serde(default, skip_serializing)]
    pub written: BTreeMap<String, Vec<Option<String>>>,
}

impl Manifest {
    /// Whether `now` is what the run left in `rel` (its last write, or any earlier one of
    /// this run that a kill left there).
    pub fn left_by_run(&self, rel: &str, now: &Option<String>) -> bool {
        self.after.get(rel) == Some(now)
            || self.written.get(rel).is_some_and(|all| all.contains(now))
    }
}

/// One line of the manifest log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Event {
    Task {
        task_id: String,
    },
    /// A file kept as it was before the run's first write to it, with the folders that write
    /// is about to create.
    Before {
        path: String,
        kept: Option<Kept>,
        #[serde(default)]
        created_dirs: Vec<String>,
    },
    /// What the file holds after the run's write (recorded right before the write lands, so a
    /// run killed in between still knows what it would have left there).
    After {
        path: String,
        sha256: Option<String>,
    },
}

impl Manifest {
    fn apply(&mut self, event: Event) {
        match event {
            Event::Task { task_id } => self.task_id = task_id,
            Event::Before {
                path,
                kept,
                created_dirs,
            } => {
                for dir in created_dirs {
                    if !self.created_dirs.contains(&dir) {
                        self.created_dirs.push(dir);
                    }
                }
                self.before.entry(path).or_insert(kept);
            }
            Event::After { path, sha256 } => {
                let all = self.written.entry(path.clone()).or_default();
                if !all.contains(&sha256) {
                    all.push(sha256.clone());
                }
                self.after.insert(path, sha256);
            }
        }
    }

    /// The manifest as log lines (what [`Snapshot::save`] writes).
    fn events(&self) -> Vec<Event> {
        let mut events = vec![Event::Task {
            task_id: self.task_id.clone(),
        }];
        let mut dirs_given = false;
        for (path, kept) in &self.before {
            events.push(Event::Before {
                path: path.clone(),
                kept: kept.clone(),
                created_dirs: if dirs_given {
                    Vec::new()
                } else {
                    dirs_given = true;
                    self.created_dirs.clone()
                },
            });
        }
        for (path, sha256) in &self.after {
            let earlier = self.written.get(path).into_iter().flatten();
            for written in earlier.filter(|w| *w != sha256) {
                events.push(Event::After {
                    path: path.clone(),
                    sha256: written.clone(),
                });
            }
            events.push(Event::After {
                path: path.clone(),
                sha256: sha256.clone(),
            });
        }
        events
    }
}

fn line_of(event: &Event) -> std::io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(event).map_err(std::io::Error::other)?;
    line.push(b'\n');
    Ok(line)
}

/// Replays a manifest log. A last line cut short (the run was killed during the append) is
/// dropped; any other line that does not parse makes the log unusable.
fn replay(bytes: &[u8]) -> std::io::Result<Manifest> {
    let mut manifest = Manifest::default();
    let complete = bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let last = lines.len().saturating_sub(1);
    for (n, line) in lines.iter().enumerate() {
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Event>(line) {
            Ok(event) => manifest.apply(event),
            Err(_) if n == last && !complete => {}
            Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        }
    }
    Ok(manifest)
}

/// A run's snapshot on disk.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

/// How a run changed the memory dir.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Diff {
    pub created: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.created.is_empty() && self.modified.is_empty() && self.deleted.is_empty()
    }
}

/// A memory file's relative path as printed: absolute, under the memory dir as the project
/// names it.
pub fn absolute(memory_dir: &Path, rel: &str) -> String {
    memory_dir.join(rel).to_string_lossy().into_owned()
}

/// The snapshot folder of a task.
pub fn dir_of(state_dir: &Path, task_id: &str) -> PathBuf {
    state_dir.join(SNAPSHOTS_DIR).join(task_id)
}

/// A relative `.md` path made only of plain names: what the write tools can touch, and all a
/// manifest may name (one that names anything else was not written by us).
fn is_memory_path(rel: &str) -> bool {
    !rel.is_empty()
        && rel.ends_with(".md")
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// `memory_dir/rel`, refused when `rel` is not a plain relative path or when any component
/// below the memory dir is a symlink (one may have been swapped in since the run wrote).
pub fn target(memory_dir: &Path, rel: &str) -> std::io::Result<PathBuf> {
    if !is_memory_path(rel) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{rel:?} is not a path inside the memory dir"),
        ));
    }
    let mut path = memory_dir.to_path_buf();
    for component in Path::new(rel).components() {
        path.push(component);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(std::io::Error::other(format!(
                    "{} is a symlink: not followed",
                    path.display()
                )))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => return Err(e),
        }
    }
    Ok(memory_dir.join(rel))
}

/// The content of a memory file now; `None` when it does not exist. Regular files only (a
/// FIFO is an error, never waited on).
pub fn current(memory_dir: &Path, rel: &str) -> std::io::Result<Option<Vec<u8>>> {
    let path = target(memory_dir, rel)?;
    match read_regular(&path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The hash of a memory file now, read in blocks (a big file is never held whole); `None`
/// when it does not exist.
pub fn current_hash(memory_dir: &Path, rel: &str) -> std::io::Result<Option<String>> {
    match crate::files::sha256_regular(&target(memory_dir, rel)?, u64::MAX) {
        Ok(hash) => Ok(Some(hash)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl Snapshot {
    /// A new, empty snapshot folder for a run.
    pub fn create(dir: &Path, task_id: &str) -> std::io::Result<Snapshot> {
        // Never through a link in place of `snapshots/` or of the run's own folder.
        if let Some(all) = dir.parent() {
            crate::files::refuse_link(all)?;
        }
        crate::files::refuse_link(dir)?;
        create_private_dir(&dir.join(FILES))?;
        let snapshot = Snapshot {
            dir: dir.to_path_buf(),
            manifest: Manifest {
                task_id: task_id.to_string(),
                ..Manifest::default()
            },
        };
        snapshot.save()?;
        Ok(snapshot)
    }

    /// Reads a snapshot (its log, or the one-document manifest of an older snapshot),
    /// refusing a manifest that names anything but memory files.
    pub fn load(dir: &Path) -> std::io::Result<Snapshot> {
        let manifest = match crate::files::read_regular_capped(&dir.join(LOG), MAX_MANIFEST) {
            Ok(bytes) => replay(&bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let bytes = crate::files::read_regular_capped(&dir.join(MANIFEST), MAX_MANIFEST)?;
                serde_json::from_slice(&bytes)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?
            }
            Err(e) => return Err(e),
        };
        let names = manifest
            .before
            .keys()
            .chain(manifest.after.keys())
            .chain(manifest.created_dirs.iter().map(|d| d as &String));
        for name in names {
            let dir_ok = manifest.created_dirs.contains(name)
                && Path::new(name)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)));
            if !is_memory_path(name) && !dir_ok {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "{} names {name:?}, which is not inside the memory dir: refused",
                        dir.join(LOG).display()
                    ),
                ));
            }
        }
        Ok(Snapshot {
            dir: dir.to_path_buf(),
            manifest,
        })
    }

    /// Writes the whole manifest log anew (atomically).
    pub fn save(&self) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        for event in self.manifest.events() {
            bytes.extend(line_of(&event)?);
        }
        write_atomic(&self.dir.join(LOG), &bytes, 0o600)?;
        // An older one-document manifest would otherwise be read by nobody but confuse people.
        match std::fs::remove_file(self.dir.join(MANIFEST)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Adds one event to the log (one appended line) and to the manifest in memory.
    fn append(&mut self, event: Event) -> std::io::Result<()> {
        crate::files::append_undoable(&self.dir.join(LOG), &line_of(&event)?, None)
            .map_err(std::io::Error::other)?;
        self.manifest.apply(event);
        Ok(())
    }

    /// Keeps `rel` as it is now, unless the run already touched it: called right before each
    /// write lands.
    pub fn remember(&mut self, memory_dir: &Path, rel: &str) -> std::io::Result<()> {
        if self.manifest.before.contains_key(rel) {
            return Ok(());
        }
        let path = target(memory_dir, rel)?;
        let kept = match read_regular(&path) {
            Ok(bytes) => {
                // Permission bits only: a set-id or sticky bit is never carried back.
                let mode = std::fs::metadata(&path)?.permissions().mode() & 0o777;
                let copy = self.dir.join(FILES).join(rel);
                if let Some(parent) = copy.parent() {
                    create_private_dir(parent)?;
                }
                write_atomic(&copy, &bytes, 0o600)?;
                Some(Kept {
                    sha256: sha256_hex(&bytes),
                    mode,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        // The folders the write is about to create, outermost first.
        let mut created_dirs = Vec::new();
        if kept.is_none() {
            let mut dir = Path::new(rel).parent();
            while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
                if memory_dir.join(d).exists() {
                    break;
                }
                created_dirs.push(d.to_string_lossy().into_owned());
                dir = d.parent();
            }
            created_dirs.reverse();
        }
        self.append(Event::Before {
            path: rel.to_string(),
            kept,
            created_dirs,
        })
    }

    /// Records what `rel` will hold once the write about to land has landed (`None`: it is
    /// deleted). Called right before the write: a run killed between the two still leaves a
    /// snapshot that knows both states.
    pub fn intend(&mut self, rel: &str, sha256: Option<String>) -> std::io::Result<()> {
        self.append(Event::After {
            path: rel.to_string(),
            sha256,
        })
    }

    /// Records how the run left `rel` (after a write, an edit or a delete), when that is not
    /// what [`Snapshot::intend`] recorded (the write failed).
    pub fn record_written(&mut self, memory_dir: &Path, rel: &str) -> std::io::Result<()> {
        let now = current_hash(memory_dir, rel)?;
        if self.manifest.after.get(rel) == Some(&now) {
            return Ok(());
        }
        self.intend(rel, now)
    }

    /// The content a file had before the run, if it existed.
    pub fn before_content(&self, rel: &str) -> std::io::Result<Option<(Vec<u8>, u32)>> {
        match self.manifest.before.get(rel) {
            Some(Some(kept)) => {
                // Never through a link someone put in the snapshot's place.
                let copy = self.dir.join(FILES).join(rel);
                let (mut file, meta) = crate::files::open_regular_no_follow_with_metadata(&copy)?;
                let bytes = crate::files::read_sized(&mut file, meta.len(), u64::MAX)?;
                if sha256_hex(&bytes) != kept.sha256 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("the snapshot's copy of {rel} does not match its hash"),
                    ));
                }
                Ok(Some((bytes, kept.mode & 0o777)))
            }
            _ => Ok(None),
        }
    }

    /// Created, modified and deleted files (a file written back to what it was is no change).
    pub fn diff(&self, memory_dir: &Path) -> std::io::Result<Diff> {
        let mut diff = Diff::default();
        for (rel, before) in &self.manifest.before {
            match (before, current_hash(memory_dir, rel)?) {
                (None, Some(_)) => diff.created.push(rel.clone()),
                (Some(kept), Some(now)) if kept.sha256 != now => diff.modified.push(rel.clone()),
                (Some(_), None) => diff.deleted.push(rel.clone()),
                _ => {}
            }
        }
        Ok(diff)
    }

    /// Puts the touched files back as they were before the run: rewritten from the copy with
    /// their mode, or deleted when the run created them; then removes the folders the run
    /// created when they are empty again. A file that someone else changed since the run
    /// wrote it, or that a symlink now leads to, is left alone; those are returned with why.
    pub fn restore(&self, memory_dir: &Path) -> std::io::Result<Vec<(String, String)>> {
        let mut skipped = Vec::new();
        for rel in self.manifest.before.keys() {
            if let Some(why) = self.restore_file(memory_dir, rel)? {
                skipped.push((rel.clone(), why));
            }
        }
        self.remove_created_dirs(memory_dir);
        Ok(skipped)
    }

    /// Puts one touched file back as it was before the run; `Some(why)` when it is left
    /// alone (someone else changed it since, or it cannot be read safely).
    pub fn restore_file(&self, memory_dir: &Path, rel: &str) -> std::io::Result<Option<String>> {
        let now = match current_hash(memory_dir, rel) {
            Ok(now) => now,
            Err(e) => return Ok(Some(e.to_string())),
        };
        let before_hash = self
            .manifest
            .before
            .get(rel)
            .and_then(|kept| kept.as_ref().map(|k| k.sha256.clone()));
        if now == before_hash {
            // As it was before the run (its write never landed, or was undone).
            return Ok(None);
        }
        if !self.manifest.left_by_run(rel, &now) {
            return Ok(Some(
                "changed by someone else since the run wrote it".into(),
            ));
        }
        let path = target(memory_dir, rel)?;
        match self.before_content(rel)? {
            Some((bytes, mode)) => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                write_atomic(&path, &bytes, mode)?;
            }
            None => match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            },
        }
        Ok(None)
    }

    /// Removes the folders the run created, when they are empty again.
    pub fn remove_created_dirs(&self, memory_dir: &Path) {
        for dir in self.manifest.created_dirs.iter().rev() {
            // Only when empty: anything someone else put there stays.
            let _ = std::fs::remove_dir(memory_dir.join(dir));
        }
    }

    /// The touched files whose content is no longer what the run left (someone edited them
    /// since): `undo` refuses when there is any.
    pub fn changed_since(&self, memory_dir: &Path) -> std::io::Result<Vec<String>> {
        let mut changed = Vec::new();
        for rel in self.manifest.after.keys() {
            let now = current_hash(memory_dir, rel)?;
            let before = self
                .manifest
                .before
                .get(rel)
                .map(|kept| kept.as_ref().map(|k| k.sha256.clone()));
            if !self.manifest.left_by_run(rel, &now) && Some(&now) != before.as_ref() {
                changed.push(rel.clone());
            }
        }
        Ok(changed)
    }
}

/// The diff with absolute paths, as files_touched has them.
pub fn absolute_diff(memory_dir: &Path, diff: Diff) -> Diff {
    let abs = |list: Vec<String>| list.iter().map(|rel| absolute(memory_dir, rel)).collect();
    Diff {
        created: abs(diff.created),
        modified: abs(diff.modified),
        deleted: abs(diff.deleted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn write(mem: &Path, rel: &str, text: &str) {
        let path = mem.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// What a run does to `rel`: remember, write (or delete), record.
    fn run_writes(snap: &mut Snapshot, mem: &Path, rel: &str, text: Option<&str>) {
        snap.remember(mem, rel).unwrap();
        match text {
            Some(text) => write(mem, rel, text),
            None => std::fs::remove_file(mem.join(rel)).unwrap(),
        }
        snap.record_written(mem, rel).unwrap();
    }

    #[test]
    fn diff_restore_and_undo_cycle_at_any_depth_with_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        write(&mem, "MEMORY.md", "index\n");
        let deep = format!("{}deep.md", "d/".repeat(12));
        write(&mem, &deep, "deep\n");
        write(&mem, "gone.md", "old\n");
        std::fs::set_permissions(mem.join("gone.md"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        let snap_dir = tmp.path().join("snap");
        let mut snap = Snapshot::create(&snap_dir, "t1").unwrap();
        run_writes(&mut snap, &mem, "MEMORY.md", Some("index\n- new\n"));
        run_writes(&mut snap, &mem, &deep, Some("deeper\n"));
        run_writes(&mut snap, &mem, "brand/new/x.md", Some("fresh\n"));
        run_writes(&mut snap, &mem, "gone.md", None);
        write(&mem, "person.md", "written by someone else\n");

        let diff = snap.diff(&mem).unwrap();
        assert_eq!(diff.created, ["brand/new/x.md"]);
        assert_eq!(diff.modified, ["MEMORY.md", deep.as_str()]);
        assert_eq!(diff.deleted, ["gone.md"]);
        assert!(snap.changed_since(&mem).unwrap().is_empty());

        let reloaded = Snapshot::load(&snap_dir).unwrap();
        assert_eq!(reloaded.manifest, snap.manifest);
        assert!(reloaded.restore(&mem).unwrap().is_empty());
        assert_eq!(
            std::fs::read_to_string(mem.join("MEMORY.md")).unwrap(),
            "index\n"
        );
        assert_eq!(std::fs::read_to_string(mem.join(&deep)).unwrap(), "deep\n");
        assert_eq!(
            std::fs::read_to_string(mem.join("gone.md")).unwrap(),
            "old\n"
        );
        assert_eq!(
            std::fs::metadata(mem.join("gone.md")).unwrap().mode() & 0o777,
            0o600
        );
        assert!(
            !mem.join("brand").exists(),
            "the folders the run made are gone"
        );
        assert!(mem.join("person.md").exists(), "not the run's: left alone");
    }

    #[test]
    fn a_file_changed_after_the_runs_write_is_not_restored() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        write(&mem, "a.md", "before\n");
        let mut snap = Snapshot::create(&tmp.path().join("s"), "t").unwrap();
        run_writes(&mut snap, &mem, "a.md", Some("run\n"));
        write(&mem, "a.md", "run\nperson\n");
        assert_eq!(snap.changed_since(&mem).unwrap(), ["a.md"]);
        let skipped = snap.restore(&mem).unwrap();
        assert_eq!(skipped.len(), 1);
        assert_eq!(
            std::fs::read_to_string(mem.join("a.md")).unwrap(),
            "run\nperson\n"
        );
    }

    #[test]
    fn symlinks_are_never_followed_and_manifests_name_only_memory_files() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        write(&mem, "topics/a.md", "a\n");
        let mut snap = Snapshot::create(&tmp.path().join("s"), "t").unwrap();
        run_writes(&mut snap, &mem, "topics/a.md", Some("run\n"));
        std::fs::remove_dir_all(mem.join("topics")).unwrap();
        std::fs::write(outside.join("a.md"), "run\n").unwrap();
        std::os::unix::fs::symlink(&outside, mem.join("topics")).unwrap();
        let skipped = snap.restore(&mem).unwrap();
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(
            std::fs::read_to_string(outside.join("a.md")).unwrap(),
            "run\n"
        );

        for bad in ["../x.md", "/etc/x.md", "a/../../x.md", "notes.txt"] {
            let mut m = snap.manifest.clone();
            m.after.insert(bad.to_string(), None);
            let log: Vec<u8> = m
                .events()
                .iter()
                .flat_map(|e| line_of(e).unwrap())
                .collect();
            std::fs::write(snap.dir.join(LOG), log).unwrap();
            let err = Snapshot::load(&snap.dir).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{bad}");
            // The older one-document form is checked the same way.
            std::fs::remove_file(snap.dir.join(LOG)).unwrap();
            std::fs::write(snap.dir.join(MANIFEST), serde_json::to_vec(&m).unwrap()).unwrap();
            let err = Snapshot::load(&snap.dir).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{bad}");
            std::fs::remove_file(snap.dir.join(MANIFEST)).unwrap();
        }
    }

    #[test]
    fn the_log_grows_by_one_line_a_write_and_survives_a_torn_last_line() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        write(&mem, "a.md", "a\n");
        let dir = tmp.path().join("s");
        let mut snap = Snapshot::create(&dir, "t").unwrap();
        snap.remember(&mem, "a.md").unwrap();
        snap.intend("a.md", Some(sha256_hex(b"run\n"))).unwrap();
        write(&mem, "a.md", "run\n");
        snap.remember(&mem, "b.md").unwrap();
        let log = std::fs::read(dir.join(LOG)).unwrap();
        assert_eq!(
            log.iter().filter(|b| **b == b'\n').count(),
            4,
            "task, before, after, before"
        );
        // Killed in the middle of an append: the half line is not an error.
        let mut torn = log.clone();
        torn.extend_from_slice(b"{\"event\":\"after\",\"pa");
        std::fs::write(dir.join(LOG), &torn).unwrap();
        let loaded = Snapshot::load(&dir).unwrap();
        assert_eq!(loaded.manifest, snap.manifest);
        // A write that was intended and landed is undone; one intended but never landed is
        // already as it was.
        assert!(loaded.restore(&mem).unwrap().is_empty());
        assert_eq!(std::fs::read_to_string(mem.join("a.md")).unwrap(), "a\n");
        // A corrupt line in the middle is refused.
        let mut corrupt = b"{oops}\n".to_vec();
        corrupt.extend_from_slice(&log);
        std::fs::write(dir.join(LOG), &corrupt).unwrap();
        assert!(Snapshot::load(&dir).is_err());
    }
}
