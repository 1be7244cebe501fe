//! The hand-off between a run and the release of its lock: `dream-lock exec` cannot read its
//! command's JSON, so a run that was no consolidation (`proposed`, `no_changes`, `skipped`,
//! `dry_run`) says so in a file exec made and named in [`OUTCOME_FILE_ENV`]; the release then rolls back.

use std::io::Write;

use crate::claude::Env;
use crate::cli::{Diag, RunStatus};

/// Set by `dream-lock exec` for its command.
pub const OUTCOME_FILE_ENV: &str = "DREAMKIT_LOCK_OUTCOME_FILE";

/// The file holds one status word: anything longer is not a run's word.
const MAX_OUTCOME_BYTES: u64 = 64;

/// Tells `dream-lock exec` that this run was no consolidation (`proposed`, `no_changes`, ...), so
/// its release must roll back. Only a file exec made is written: nothing is created at a path
/// from the environment.
pub fn report(env: &Env, diag: &Diag, outcome: RunStatus) {
    let outcome = outcome.as_str();
    let Some(path) = env.get(OUTCOME_FILE_ENV).filter(|p| !p.is_empty()) else {
        return;
    };
    let written = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags_nonblock()
        .open(path)
        .and_then(|mut f| f.write_all(format!("{outcome}\n").as_bytes()));
    if let Err(e) = written {
        diag.warn(&format!(
            "cannot tell dream-lock exec that this run ended {outcome} ({OUTCOME_FILE_ENV}): {e}"
        ));
    }
}

/// O_NONBLOCK on an open, so a FIFO put in the file's place fails instead of blocking.
trait NonBlocking {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlocking for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::custom_flags(self, libc::O_NONBLOCK)
    }
}

/// What the command wrote in the outcome file, when its run was no consolidation.
pub fn read(path: &std::path::Path) -> Option<RunStatus> {
    let bytes = crate::files::read_regular_capped(path, MAX_OUTCOME_BYTES).ok()?;
    RunStatus::ALL
        .into_iter()
        .filter(|s| s.is_no_consolidation())
        .find(|s| bytes.trim_ascii() == s.as_str().as_bytes())
}
