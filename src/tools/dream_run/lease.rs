//! The lock for `undo`, `apply`, `discard` and `recover`, which change memory like a run.

use std::time::SystemTime;

use super::report::Refusal;
use crate::cli::Failure;
use crate::lock::{Acquired, Backend, Lease};

/// The lease, or (busy) the clean no `{reason: "busy", task_id, holder_pid}` each of them
/// answers under its own verb.
pub(super) fn take_lock(
    backend: &dyn Backend,
    task_id: &str,
) -> Result<Result<Lease, Refusal>, Failure> {
    match backend.acquire(std::process::id(), SystemTime::now())? {
        Acquired::Yes(lease) => Ok(Ok(lease)),
        Acquired::Held { holder_pid, .. } => Ok(Err(Refusal::new(
            "busy",
            format!(
                "the consolidation lock is held by {}: try again later",
                holder_pid.map_or("another process".into(), |p| format!("PID {p}"))
            ),
        )
        .of_task(task_id)
        .held_by(holder_pid))),
    }
}
