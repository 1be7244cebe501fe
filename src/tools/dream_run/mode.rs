//! How a run works: apply or propose (`--propose`, `DREAMKIT_DREAM_MODE`; review mode's
//! staging copy itself is the store's), and which engine consolidates (`--engine`).

use crate::claude::Env;
use crate::cli::Failure;

/// The mode without flags, for hook pipelines.
pub const MODE_ENV: &str = "DREAMKIT_DREAM_MODE";

/// Apply (write the memory dir) or propose (write a staging copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Apply,
    Propose,
}

impl Mode {
    /// `--propose` wins; else `DREAMKIT_DREAM_MODE` (`apply` when unset or empty). Any other
    /// value is bad input.
    pub fn resolve(propose: bool, env: &Env) -> Result<Mode, Failure> {
        if propose {
            return Ok(Mode::Propose);
        }
        match env.get(MODE_ENV).map(|v| v.to_str()) {
            None => Ok(Mode::Apply),
            Some(Some("" | "apply")) => Ok(Mode::Apply),
            Some(Some("propose")) => Ok(Mode::Propose),
            Some(other) => Err(Failure::bad_input(format!(
                "{MODE_ENV} must be \"propose\" or \"apply\", not {:?}",
                other.unwrap_or("(not UTF-8)")
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Apply => "apply",
            Mode::Propose => "propose",
        }
    }
}

/// Who consolidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// The agent: a model with the five sandboxed tools
    Model,
    /// The fixes that need no judgement (duplicates, orphans, dangling links, long entries,
    /// an index over the load limit, anchored relative dates, secrets): no model, no
    /// credential, no session needed
    Rules,
}

impl Engine {
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Model => "model",
            Engine::Rules => "rules",
        }
    }
}
