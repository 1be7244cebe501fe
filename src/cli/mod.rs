//! The one place for what every binary shares: the flow of a run (flags -> [`Context`] ->
//! [`Tool::run`] -> [`Report`] -> stdout and the exit code), exit codes, the JSON error,
//! stdin, stdout, the envelope, common flags, durations, times and doc generation.

pub mod args;
pub mod context;
#[cfg(feature = "docs")]
pub mod docs;
pub mod duration;
pub mod env;
pub mod envelope;
pub mod exit;
pub mod failure;
pub mod input;
pub mod json;
pub mod output;
#[cfg(test)]
pub(crate) mod props;
pub mod redact;
pub mod report;
pub mod run;
#[cfg(feature = "docs")]
pub mod schema;
pub mod signals;
pub mod text;
pub mod time;

pub use args::{CommonArgs, LocationArgs};

/// The Claude Code release dreamkit is tested with, by the real client in CI (`make
/// test-claude`): its transcript, hook, lock and draft formats.
macro_rules! tested_claude_code {
    () => {
        "2.1.332"
    };
}

pub const TESTED_CLAUDE_CODE: &str = tested_claude_code!();

/// What `--version` prints after the tool's name.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (tested with Claude Code ",
    tested_claude_code!(),
    ")"
);
pub use context::Context;
pub use env::Env;
pub use envelope::{Envelope, Enveloped, RunStatus, Section, StageFailed, StageOf, Upstream};
pub use exit::Exit;
pub use failure::Failure;
pub use failure::{ErrorBody, FailureDocument};
pub use input::Input;
pub use output::Diag;
pub use report::{Delivery, Report, Tool};
pub use run::{main, Binary};
