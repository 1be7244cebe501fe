//! The memory dir's `.md` files as they were before a run's first write, kept under the state
//! dir: restored when a run fails, diffed when it completes, and put back by `undo`.
//!
//! Restoring and undoing only touch the files the run itself touched, so a note that Claude
//! Code (or a person) wrote into the memory dir meanwhile is never lost.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::files::{create_private_dir, write_atomic};

/// Under the state dir: one folder per run.
pub const SNAPSHOTS_DIR: &str = "snapshots";
/// How many completed runs keep their snapshot (so `undo` can reach them).
pub const KEEP_COMPLETED: usize = 10;
const MANIFEST: &str = "manifest.json";
const FILES: &str = "files";
/// Memory dirs nest a little (topic folders); deeper trees are not walked.
const MAX_DEPTH: usize = 8;

/// A file's content hash, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let hash = sha2::Sha256::digest(bytes);
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a snapshot holds: relative path -> hash, before the run and after it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub task_id: String,
    /// Every `.md` file before the run.
    pub before: BTreeMap<String, String>,
    /// The files the run touched, as it left them (`None`: deleted). Set when it completes.
    #[serde(default)]
    pub after: BTreeMap<String, Option<String>>,
}

/// A run's snapshot on disk.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

/// How a run changed the memory dir.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
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

/// Every regular `.md` file under `memory_dir`, relative, without following symlinks.
pub fn markdown_files(memory_dir: &Path) -> std::io::Result<Vec<String>> {
    let mut found = Vec::new();
    walk(memory_dir, Path::new(""), 0, &mut found)?;
    found.sort();
    Ok(found)
}

fn walk(root: &Path, rel: &Path, depth: usize, found: &mut Vec<String>) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(root.join(rel)) {
        Ok(entries) => entries,
        Err(e) if depth == 0 && e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let kind = entry.file_type()?;
        let name = entry.file_name();
        let child = rel.join(&name);
        if kind.is_dir() && depth < MAX_DEPTH {
            walk(root, &child, depth + 1, found)?;
        } else if kind.is_file() && name.to_str().is_some_and(|n| n.ends_with(".md")) {
            // Names that are not UTF-8 cannot be written by the agent (its paths are JSON).
            if let Some(text) = child.to_str() {
                found.push(text.to_string());
            }
        }
    }
    Ok(())
}

impl Snapshot {
    /// Copies every `.md` file of `memory_dir` into `dir` (a fresh folder).
    pub fn take(memory_dir: &Path, dir: &Path, task_id: &str) -> std::io::Result<Snapshot> {
        let files_dir = dir.join(FILES);
        create_private_dir(&files_dir)?;
        let mut manifest = Manifest {
            task_id: task_id.to_string(),
            ..Manifest::default()
        };
        for rel in markdown_files(memory_dir)? {
            let bytes = std::fs::read(memory_dir.join(&rel))?;
            let copy = files_dir.join(&rel);
            if let Some(parent) = copy.parent() {
                create_private_dir(parent)?;
            }
            write_atomic(&copy, &bytes, 0o600)?;
            manifest.before.insert(rel, sha256_hex(&bytes));
        }
        let snapshot = Snapshot {
            dir: dir.to_path_buf(),
            manifest,
        };
        snapshot.save()?;
        Ok(snapshot)
    }

    pub fn load(dir: &Path) -> std::io::Result<Snapshot> {
        let bytes = std::fs::read(dir.join(MANIFEST))?;
        let manifest = serde_json::from_slice(&bytes).map_err(std::io::Error::other)?;
        Ok(Snapshot {
            dir: dir.to_path_buf(),
            manifest,
        })
    }

    pub fn save(&self) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(&self.manifest).map_err(std::io::Error::other)?;
        write_atomic(&self.dir.join(MANIFEST), &bytes, 0o600)
    }

    /// The content a file had before the run, if it existed.
    pub fn before_content(&self, rel: &str) -> std::io::Result<Option<Vec<u8>>> {
        if !self.manifest.before.contains_key(rel) {
            return Ok(None);
        }
        std::fs::read(self.dir.join(FILES).join(rel)).map(Some)
    }

    /// Records how the run left the files it touched.
    pub fn record_after(&mut self, memory_dir: &Path, touched: &[String]) -> std::io::Result<()> {
        self.manifest.after = touched
            .iter()
            .map(|rel| Ok((rel.clone(), current_hash(memory_dir, rel)?)))
            .collect::<std::io::Result<_>>()?;
        self.save()
    }

    /// Created, modified and deleted files among `touched` (a file written back to what it
    /// was is no change).
    pub fn diff(&self, memory_dir: &Path, touched: &[String]) -> std::io::Result<Diff> {
        let mut diff = Diff::default();
        for rel in touched {
            let now = current_hash(memory_dir, rel)?;
            match (self.manifest.before.get(rel), now) {
                (None, Some(_)) => diff.created.push(rel.clone()),
                (Some(before), Some(now)) if *before != now => diff.modified.push(rel.clone()),
                (Some(_), None) => diff.deleted.push(rel.clone()),
                _ => {}
            }
        }
        Ok(diff)
    }

    /// Puts the `touched` files back as they were before the run: rewritten from the copy, or
    /// deleted when the run created them.
    pub fn restore(&self, memory_dir: &Path, touched: &[String]) -> std::io::Result<()> {
        for rel in touched {
            let path = memory_dir.join(rel);
            match self.before_content(rel)? {
                Some(bytes) => {
                    if std::fs::read(&path).ok().as_deref() != Some(bytes.as_slice()) {
                        if let Some(parent) = path.parent() {
                            std::fs::create_dir_all(parent)?;
                        }
                        write_atomic(&path, &bytes, 0o644)?;
                    }
                }
                None => match std::fs::remove_file(&path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                },
            }
        }
        Ok(())
    }

    /// The touched files whose content is no longer what the run left (someone edited them
    /// since): `undo` refuses when there is any.
    pub fn changed_since(&self, memory_dir: &Path) -> std::io::Result<Vec<String>> {
        let mut changed = Vec::new();
        for (rel, after) in &self.manifest.after {
            if current_hash(memory_dir, rel)? != *after {
                changed.push(rel.clone());
            }
        }
        Ok(changed)
    }
}

/// The hash of a memory file now; `None` when it does not exist.
fn current_hash(memory_dir: &Path, rel: &str) -> std::io::Result<Option<String>> {
    match std::fs::read(memory_dir.join(rel)) {
        Ok(bytes) => Ok(Some(sha256_hex(&bytes))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touched(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn take_diff_restore_undo_cycle() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        std::fs::create_dir_all(mem.join("topics")).unwrap();
        std::fs::write(mem.join("MEMORY.md"), "index\n").unwrap();
        std::fs::write(mem.join("topics/a.md"), "a\n").unwrap();
        std::fs::write(mem.join("gone.md"), "old\n").unwrap();
        std::fs::write(mem.join("notes.txt"), "not markdown").unwrap();
        let snap_dir = tmp.path().join("snap");
        let mut snap = Snapshot::take(&mem, &snap_dir, "t1").unwrap();
        assert_eq!(
            snap.manifest.before.keys().collect::<Vec<_>>(),
            ["MEMORY.md", "gone.md", "topics/a.md"]
        );

        std::fs::write(mem.join("MEMORY.md"), "index\n- new\n").unwrap();
        std::fs::write(mem.join("new.md"), "fresh\n").unwrap();
        std::fs::remove_file(mem.join("gone.md")).unwrap();
        std::fs::write(mem.join("person.md"), "written by someone else\n").unwrap();
        let run = touched(&["MEMORY.md", "new.md", "gone.md", "topics/a.md"]);
        let diff = snap.diff(&mem, &run).unwrap();
        assert_eq!(diff.created, ["new.md"]);
        assert_eq!(diff.modified, ["MEMORY.md"]);
        assert_eq!(diff.deleted, ["gone.md"]);

        snap.record_after(&mem, &run).unwrap();
        assert!(snap.changed_since(&mem).unwrap().is_empty());
        let reloaded = Snapshot::load(&snap_dir).unwrap();
        assert_eq!(reloaded.manifest, snap.manifest);

        reloaded.restore(&mem, &run).unwrap();
        assert_eq!(
            std::fs::read_to_string(mem.join("MEMORY.md")).unwrap(),
            "index\n"
        );
        assert_eq!(
            std::fs::read_to_string(mem.join("gone.md")).unwrap(),
            "old\n"
        );
        assert!(!mem.join("new.md").exists());
        // Not touched by the run: left alone.
        assert!(mem.join("person.md").exists());
        assert!(mem.join("notes.txt").exists());
    }

    #[test]
    fn a_later_edit_is_detected() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        std::fs::create_dir_all(&mem).unwrap();
        let mut snap = Snapshot::take(&mem, &tmp.path().join("s"), "t").unwrap();
        std::fs::write(mem.join("a.md"), "run\n").unwrap();
        snap.record_after(&mem, &touched(&["a.md"])).unwrap();
        std::fs::write(mem.join("a.md"), "person\n").unwrap();
        assert_eq!(snap.changed_since(&mem).unwrap(), ["a.md"]);
    }

    #[test]
    fn symlinks_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&mem).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.md"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, mem.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret.md"), mem.join("l.md")).unwrap();
        assert!(markdown_files(&mem).unwrap().is_empty());
    }
}
