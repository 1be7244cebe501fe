//! Review mode's staging copy: where a proposing run writes (a copy of the memory dir under
//! the state dir), and the record of what a proposal changes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::snapshot::{self, Diff};
use super::tasks::TaskRecord;
use crate::files::{copy_regular_atomic, create_private_dir};

/// Under the state dir: one folder per proposal, holding the staged `memory` copy.
pub(super) const PROPOSALS_DIR: &str = "proposals";

/// A proposal's folder (its staging copy is under it).
pub fn proposal_dir(state_dir: &Path, task_id: &str) -> PathBuf {
    state_dir.join(PROPOSALS_DIR).join(task_id)
}

/// Where a proposing run writes: the `memory` copy in its proposal's folder.
pub fn staging_dir(state_dir: &Path, task_id: &str) -> PathBuf {
    proposal_dir(state_dir, task_id).join("memory")
}

/// Copies every regular `.md` file of the memory dir (recursively, never through a symlink)
/// into `staging`; returns rel -> sha256 of what was copied (the base the proposal is made
/// against).
pub fn stage_copy(memory_dir: &Path, staging: &Path) -> std::io::Result<BTreeMap<String, String>> {
    create_private_dir(staging)?;
    let mut base = BTreeMap::new();
    // A folder before what it holds; a link is neither a folder nor a file here.
    for entry in walkdir::WalkDir::new(memory_dir).min_depth(1) {
        let entry = match entry {
            Ok(entry) => entry,
            // No memory dir yet: nothing to copy.
            Err(e)
                if e.depth() == 0
                    && e.io_error().map(std::io::Error::kind)
                        == Some(std::io::ErrorKind::NotFound) =>
            {
                return Ok(base)
            }
            Err(e) => {
                return Err(e
                    .into_io_error()
                    .unwrap_or_else(|| std::io::Error::other("cannot walk the memory dir")))
            }
        };
        let Ok(child) = entry.path().strip_prefix(memory_dir) else {
            continue;
        };
        let kind = entry.file_type();
        if kind.is_dir() {
            create_private_dir(&staging.join(child))?;
        } else if kind.is_file() && child.extension().is_some_and(|e| e == "md") {
            // Under the state dir every file is private; apply keeps the memory file's mode.
            // The mtime is kept so the health check sees the copy as it sees the memory.
            // Copied in blocks: a huge memory file never becomes memory of ours.
            let mtime = entry.metadata()?.modified().ok();
            let sha256 = copy_regular_atomic(entry.path(), &staging.join(child), 0o600, mtime)?;
            base.insert(child.to_string_lossy().into_owned(), sha256);
        }
    }
    Ok(base)
}

/// The proposal manifest: every file a proposal changes, with the sha256 it had in the memory
/// dir when the proposal was made (`None`: it did not exist).
fn manifest(diff: &Diff, base: &BTreeMap<String, String>) -> BTreeMap<String, Option<String>> {
    diff.created
        .iter()
        .chain(&diff.modified)
        .chain(&diff.deleted)
        .map(|rel| (rel.clone(), base.get(rel).cloned()))
        .collect()
}

/// The run's staged result for the record: what a proposal changes, against what.
pub fn record_proposal(
    record: &mut TaskRecord,
    diff: &Diff,
    text: String,
    base: &BTreeMap<String, String>,
    (memory_dir, staging): (&Path, &Path),
) -> std::io::Result<()> {
    let proposal = manifest(diff, base);
    let mut proposed = BTreeMap::new();
    for rel in proposal.keys() {
        proposed.insert(rel.clone(), snapshot::current_hash(staging, rel)?);
    }
    record.proposal = Some(proposal);
    record.proposed = Some(proposed);
    record.diff = Some(snapshot::absolute_diff(memory_dir, diff.clone()));
    record.diff_text = Some(text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_staging_copy_takes_md_files_at_any_depth_and_never_follows_a_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(mem.join("a/b")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(mem.join("MEMORY.md"), "index\n").unwrap();
        std::fs::write(mem.join("a/b/deep.md"), "deep\n").unwrap();
        std::fs::write(mem.join("notes.txt"), "not memory\n").unwrap();
        std::fs::write(outside.join("secret.md"), "secret\n").unwrap();
        std::os::unix::fs::symlink(outside.join("secret.md"), mem.join("link.md")).unwrap();
        std::os::unix::fs::symlink(&outside, mem.join("linked")).unwrap();
        let staging = tmp.path().join("staging");
        let base = stage_copy(&mem, &staging).unwrap();
        assert_eq!(
            base.keys().collect::<Vec<_>>(),
            ["MEMORY.md", "a/b/deep.md"]
        );
        assert_eq!(
            std::fs::read_to_string(staging.join("a/b/deep.md")).unwrap(),
            "deep\n"
        );
        for absent in ["notes.txt", "link.md", "linked"] {
            assert!(
                std::fs::symlink_metadata(staging.join(absent)).is_err(),
                "{absent}"
            );
        }
    }
}
