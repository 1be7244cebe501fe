//! The file backend: `<memory_dir>/.consolidate-lock`, byte-compatible with Claude Code.
//! Its content is the holder's PID; its mtime is the last-consolidated time.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::Backend;
use crate::cli::Failure;

pub const LOCK_FILE_NAME: &str = ".consolidate-lock";

#[derive(Debug, Clone)]
pub struct FileBackend {
    path: PathBuf,
}

impl FileBackend {
    pub fn for_memory_dir(memory_dir: &Path) -> Self {
        FileBackend {
            path: memory_dir.join(LOCK_FILE_NAME),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Backend for FileBackend {
    fn name(&self) -> &'static str {
        "file"
    }

    fn last_consolidated(&self) -> Result<Option<SystemTime>, Failure> {
        match std::fs::metadata(&self.path) {
            Ok(meta) => meta
                .modified()
                .map(Some)
                .map_err(|e| Failure::io("read the mtime of", &self.path, &e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Failure::io("stat the lock file", &self.path, &e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn mtime_is_the_last_consolidated_time() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = FileBackend::for_memory_dir(tmp.path());
        assert_eq!(backend.last_consolidated().unwrap(), None);
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let f = std::fs::File::create(backend.path()).unwrap();
        f.set_modified(at).unwrap();
        assert_eq!(backend.last_consolidated().unwrap(), Some(at));
    }

    #[test]
    fn a_memory_dir_that_is_a_file_fails_closed() {
        let tmp = tempfile::tempdir().unwrap();
        let not_dir = tmp.path().join("file");
        std::fs::write(&not_dir, "").unwrap();
        let err = FileBackend::for_memory_dir(&not_dir)
            .last_consolidated()
            .unwrap_err();
        assert_eq!(err.kind(), "environment");
    }
}
