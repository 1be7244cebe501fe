//! The transactional store of a project's memory, shared by every command that changes it
//! (dream-run's runs and subcommands, dream-lock's acquire and exec): task records, a run's
//! snapshot, review mode's staging copy, the intent journal of multi-file commands, and the
//! recovery that puts back what a killed command left half done before anything else is done.
//!
//! Tools use only the names re-exported here; the submodules are the store's own:
//! - recover first: [`recover_under_lock`] (or [`sweep`] when no lock is needed, as
//!   [`needs_recovery`] says); `recover` itself reads [`find_journal`] and [`orphaned_runs`].
//! - a task: [`TaskStore`] saves and lists [`TaskRecord`]s (their [`TaskStatus`]); the
//!   pending-updates queue ([`append_pending`], [`read_pending`], [`clear_pending`],
//!   [`withdraw_pending`]); [`prune_snapshots`] after a completed run.
//! - a run's [`Snapshot`] under [`snapshot_dir`], and the [`Diff`] it reports.
//! - proposing: [`stage_copy`] into [`staging_dir`], then [`record_proposal`].
//! - a multi-file command (`apply`, `undo`): its [`Journal`] of [`Intent`] at [`journal_path`].
//! - what a run changed: one [`Change`] per change ([`Action`], a relative date's [`Anchor`]).
//! - memory paths: [`memory_target`] (never through a symlink), [`absolute_path`], the
//!   [`current_content`] and [`current_hash`] of a file.

mod changes;
mod journal;
mod recovery;
mod snapshot;
mod staging;
mod sweep;
mod tasks;

pub use changes::{Action, Anchor, Change, RuleSource, Source};
pub use journal::{path as journal_path, Intent, Journal};
pub use recovery::{
    find_journal, needs_lock as needs_recovery, orphaned_runs, sweep,
    under_lock as recover_under_lock, CorruptJournal, Found, OrphanRun, Recovered, Recovery,
};
pub use snapshot::{
    absolute as absolute_path, absolute_diff, current as current_content, current_hash,
    dir_of as snapshot_dir, sha256_hex, target as memory_target, Diff, Snapshot,
};
pub use staging::{proposal_dir, record_proposal, stage_copy, staging_dir};
pub use sweep::{is_stray, Swept};
pub use tasks::{
    append_pending, clear_pending, is_task_id, pending_path, prune_snapshots, read_pending,
    withdraw_pending, PendingUpdate, TaskRecord, TaskStatus, TaskStore, Turn, UsageRecord,
};
