//! The one place for what every binary shares: exit codes, the JSON error, reading stdin,
//! writing stdout, the envelope, common flags, durations, times and doc generation.

pub mod args;
#[cfg(feature = "docs")]
pub mod docs;
pub mod duration;
pub mod envelope;
pub mod exit;
pub mod failure;
pub mod input;
pub mod json;
pub mod output;
pub mod redact;
pub mod run;
pub mod signals;
pub mod text;
pub mod time;

pub use args::{CommonArgs, LocationArgs};
pub use envelope::{Envelope, RunStatus, Upstream};
pub use exit::Exit;
pub use failure::Failure;
pub use input::Input;
pub use output::Diag;
pub use run::{main, Outcome, Tool};
