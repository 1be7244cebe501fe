//! File-system primitives every writer shares: private directories and atomic replacement.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;
use std::time::SystemTime;

/// Creates `dir` and any missing parents with mode 0700 (an existing directory is left as is).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Replaces `path` with `bytes` atomically: a temporary file in the same directory, written,
/// synced and given `mode`, then renamed over the target. Readers see the old or the new
/// content, never a torn file; on any error the target is untouched.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    write_atomic_with_mtime(path, bytes, mode, None)
}

/// [`write_atomic`], with the new file's mtime set before it replaces the target (so no
/// reader ever sees the content with a different mtime).
pub fn write_atomic_with_mtime(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    mtime: Option<SystemTime>,
) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".dreamkit-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.write_all(bytes)?;
    if let Some(mtime) = mtime {
        tmp.as_file().set_modified(mtime)?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Appends `bytes` with one `O_APPEND` write (creating the file with `mode`); a short or
/// failed write is undone by truncating back, when nobody appended meanwhile.
pub fn append_undoable(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(mode)
        .open(path)?;
    let before = file.metadata()?.len();
    match file.write(bytes) {
        Ok(n) if n == bytes.len() => Ok(()),
        outcome => {
            if file.metadata()?.len() <= before + bytes.len() as u64 {
                file.set_len(before)?;
            }
            match outcome {
                Err(e) => Err(e),
                Ok(n) => Err(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    format!("short append ({n} of {} bytes), undone", bytes.len()),
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn atomic_write_replaces_with_mode_and_leaves_no_temp() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("f.json");
        std::fs::write(&target, "old").unwrap();
        write_atomic(&target, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn atomic_write_can_set_the_mtime() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("lock");
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
        write_atomic_with_mtime(&target, b"", 0o644, Some(at)).unwrap();
        let meta = std::fs::metadata(&target).unwrap();
        assert_eq!(meta.modified().unwrap(), at);
        assert_eq!(meta.len(), 0);
        assert_eq!(meta.mode() & 0o777, 0o644);
    }

    #[test]
    fn private_dirs_are_0700() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/c");
        create_private_dir(&dir).unwrap();
        for d in [tmp.path().join("a"), tmp.path().join("a/b"), dir] {
            assert_eq!(
                std::fs::metadata(&d).unwrap().mode() & 0o777,
                0o700,
                "{d:?}"
            );
        }
    }
}
