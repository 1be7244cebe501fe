//! The consolidation lock. Every backend answers the same questions; `dream-gate` asks only
//! for the last-consolidated time, `dream-lock` for the rest.

pub mod file;

use std::time::SystemTime;

use crate::claude::Project;
use crate::cli::Failure;

pub use file::FileBackend;

/// A store of the last-consolidated time and the holder of the lock.
pub trait Backend {
    /// `file` or `etcd`, as printed in `lock.backend`.
    fn name(&self) -> &'static str;

    /// When the memory was last consolidated; `None` when never. A state that cannot be read
    /// is an error, never "never": a gate that guessed would run consolidation twice.
    fn last_consolidated(&self) -> Result<Option<SystemTime>, Failure>;
}

/// The backend for a project. Only the file backend exists so far.
pub fn backend_for(project: &Project) -> Box<dyn Backend> {
    Box::new(FileBackend::for_memory_dir(&project.memory_dir))
}
