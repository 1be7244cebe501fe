//! Claude Code's world, without tool logic: where its files are, what its settings and
//! environment switches say, how its transcripts and hook payloads are shaped, and the records
//! dreamkit appends, shaped as the client writes them.
//! Nothing here talks to the network.

pub mod hook;
pub mod instructions;
pub mod paths;
#[cfg(test)]
mod props;
pub mod records;
pub mod sessions;
pub mod settings;
pub mod transcript;

pub use crate::cli::env::Env;
pub use hook::HookPayload;
pub use paths::{Project, ProjectHints};
pub use settings::Settings;
