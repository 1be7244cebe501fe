//! dreamkit's own leftovers of a killed process: the temporary files an atomic write makes
//! beside its target (`.dreamkit-<pid>-*.tmp`, see [`crate::files::temp_file_in`]). A kill
//! between the create and the rename leaves one behind; nothing else ever removes it, and it
//! keeps a folder a roll-back would remove from being empty.
//!
//! A temporary file is a stray when its writer is gone (its PID is dead, or is a later
//! process that started after the file was written) or when it is older than
//! [`STALE_AFTER`]: commands that take no lock (`pending --clear`, a status file) write such
//! files too, so a live writer's file is never taken from under it.

use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::files::temp_file_writer;
use crate::lock::process;

/// A temporary file this old is a stray whoever wrote it (no write takes that long).
pub(super) const STALE_AFTER: Duration = Duration::from_secs(600);

/// Whether what `meta` describes was last written over [`STALE_AFTER`] ago.
pub(super) fn is_stale(meta: &Metadata, now: SystemTime) -> bool {
    meta.modified()
        .is_ok_and(|at| now.duration_since(at).is_ok_and(|age| age > STALE_AFTER))
}

/// Whether the file `name` (with its metadata) is a stray temporary file of dreamkit's.
pub fn is_stray(name: &str, meta: &Metadata, now: SystemTime) -> bool {
    let Some(writer) = temp_file_writer(name) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    if is_stale(meta, now) {
        return true;
    }
    let written = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    let Some(pid) = writer else {
        // Written before temporary names carried the PID: only its age tells.
        return false;
    };
    let info = process::probe(pid);
    // A PID alive now but started after the file was written is another process.
    let same_process = info
        .started
        .is_none_or(|started| started <= written + crate::lock::START_SLACK);
    !(info.alive && same_process)
}

/// Every stray temporary file under `dir`, at any depth; symlinks are never followed, and
/// nothing is read but names and metadata.
pub(super) fn strays(dir: &Path, now: SystemTime) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .follow_links(false)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_file())
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy();
            temp_file_writer(&name).is_some()
                && entry
                    .metadata()
                    .is_ok_and(|meta| is_stray(&name, &meta, now))
        })
        .map(walkdir::DirEntry::into_path)
        .collect()
}

/// What a sweep removed, and what it could not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Swept {
    /// Stray temporary files removed (absolute paths).
    pub removed: Vec<String>,
    /// Staged proposals of runs that died, removed (their folders).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proposals: Vec<String>,
    /// Files that could not be removed, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
}

impl Swept {
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.proposals.is_empty() && self.failed.is_empty()
    }
}

/// Removes the stray temporary files in each of `dirs` (the memory dir and the state dir).
pub(super) fn sweep_temp_files(dirs: &[&Path], swept: &mut Swept) {
    let now = SystemTime::now();
    for dir in dirs {
        for path in strays(dir, now) {
            match std::fs::remove_file(&path) {
                Ok(()) => swept.removed.push(path.to_string_lossy().into_owned()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => swept.failed.push(format!("{}: {e}", path.display())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(path: &Path) -> Metadata {
        std::fs::symlink_metadata(path).unwrap()
    }

    fn set_age(path: &Path, age: Duration) {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(SystemTime::now() - age)
            .unwrap();
    }

    #[test]
    fn a_temp_file_is_a_stray_when_its_writer_is_gone_or_it_is_old() {
        let tmp = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let mine = crate::files::temp_file_in(tmp.path()).unwrap();
        let (_, mine) = mine.keep().unwrap();
        let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            !is_stray(&name(&mine), &meta(&mine), now),
            "a live writer's"
        );
        let dead = tmp.path().join(".dreamkit-4194303-abcdef.tmp");
        std::fs::write(&dead, "x").unwrap();
        assert!(is_stray(&name(&dead), &meta(&dead), now), "a dead writer's");
        let unnamed = tmp.path().join(".dreamkit-abcdef.tmp");
        std::fs::write(&unnamed, "x").unwrap();
        assert!(!is_stray(&name(&unnamed), &meta(&unnamed), now), "young");
        set_age(&unnamed, STALE_AFTER + Duration::from_secs(5));
        set_age(&mine, STALE_AFTER + Duration::from_secs(5));
        assert!(is_stray(
            &name(&unnamed),
            &meta(&unnamed),
            SystemTime::now()
        ));
        assert!(is_stray(&name(&mine), &meta(&mine), SystemTime::now()));
        let other = tmp.path().join("notes.tmp");
        std::fs::write(&other, "x").unwrap();
        set_age(&other, STALE_AFTER * 2);
        assert!(!is_stray("notes.tmp", &meta(&other), SystemTime::now()));
    }

    #[test]
    fn a_sweep_removes_strays_at_any_depth_and_follows_no_link() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(mem.join("a/b")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let deep = mem.join("a/b/.dreamkit-4194303-x.tmp");
        std::fs::write(&deep, "x").unwrap();
        let theirs = outside.join(".dreamkit-4194303-y.tmp");
        std::fs::write(&theirs, "x").unwrap();
        std::os::unix::fs::symlink(&outside, mem.join("link")).unwrap();
        let live = crate::files::temp_file_in(&mem).unwrap();
        let mut swept = Swept::default();
        sweep_temp_files(&[&mem], &mut swept);
        assert_eq!(swept.removed, [deep.to_string_lossy()]);
        assert!(!deep.exists() && theirs.exists() && live.path().exists());
    }
}
