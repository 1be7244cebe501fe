//! The transactional store of a project's memory, shared by every command that changes it
//! (dream-run's runs and subcommands, dream-lock's acquire and exec): task records, a run's
//! snapshot, the intent journal of multi-file commands, and the recovery that puts back what
//! a killed command left half done before anything else is done.

pub mod journal;
pub mod recovery;
pub mod snapshot;
pub mod staging;
pub mod sweep;
pub mod tasks;
