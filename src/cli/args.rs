//! Flag families shared by the binaries.

use std::path::PathBuf;

use clap::Args;

/// `-q`, `-v`, `--pretty`: every binary has them (`--help` and `--version` come from clap).
#[derive(Debug, Clone, Default, Args)]
pub struct CommonArgs {
    /// Print no diagnostics on stderr (the JSON on stdout is unchanged)
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Explain decisions on stderr
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// Indent the JSON output (the default when stdout is a terminal)
    #[arg(long, global = true, conflicts_with = "compact")]
    pub pretty: bool,
    /// One-line JSON output, even on a terminal
    #[arg(long, global = true)]
    pub compact: bool,
    /// Read no stdin (as jq's -n): for loops and scripts whose stdin is not for us
    #[arg(short = 'n', long, global = true)]
    pub null_input: bool,
}

impl CommonArgs {
    /// Whether the JSON is indented: `--pretty`, else `--compact`, else when stdout is a terminal.
    pub fn pretty_output(&self) -> bool {
        use std::io::IsTerminal;
        self.pretty || (!self.compact && std::io::stdout().is_terminal())
    }
}

/// Which project and where its Claude Code files are. Flags win over stdin.
#[derive(Debug, Clone, Default, Args)]
pub struct LocationArgs {
    /// Project directory [default: the hook payload's `cwd`, else the current directory]
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Memory directory, overriding every other rule
    #[arg(long, value_name = "DIR")]
    pub memory_dir: Option<PathBuf>,
    /// Directory holding the project's `<session-id>.jsonl` transcripts
    #[arg(long, value_name = "DIR")]
    pub transcripts_dir: Option<PathBuf>,
}
