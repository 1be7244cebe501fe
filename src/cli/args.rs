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
    /// Print the JSON Schema of what this command prints on stdout, and run nothing
    #[arg(long, global = true)]
    pub schema: bool,
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

/// Wraps a flag's value parser so that a bad value taken from the flag's environment variable
/// (`#[arg(env = ...)]`) is reported under the variable's name rather than the flag's, and an
/// empty variable counts as unset (the flag's default applies), as for every other variable.
///
/// clap does not tell a value parser where a value came from; it was the variable when the
/// flag is absent from the command line and the variable holds exactly this value.
#[derive(Debug, Clone)]
pub struct EnvNamed<P>(pub P);

impl<P: clap::builder::TypedValueParser> clap::builder::TypedValueParser for EnvNamed<P> {
    type Value = P::Value;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        let Some((arg, name)) = arg.and_then(|a| Some((a, from_env(a, value)?))) else {
            return self.0.parse_ref(cmd, arg, value);
        };
        if value.to_str().is_some_and(|v| v.trim().is_empty()) {
            if let Some(default) = arg.get_default_values().first() {
                return self.0.parse_ref(cmd, Some(arg), default);
            }
        }
        self.0.parse_ref(cmd, Some(arg), value).map_err(|err| {
            let why = match (std::error::Error::source(&err), valid_values(&err)) {
                (Some(source), _) => source.to_string(),
                (None, Some(values)) => format!("expected one of {values}"),
                (None, None) => "not a valid value".to_string(),
            };
            clap::Error::raw(
                clap::error::ErrorKind::InvalidValue,
                format!("{name}={value:?}: {why}\n"),
            )
        })
    }

    /// The wrapped parser's values, for help and completions.
    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        self.0.possible_values()
    }
}

/// The name of `arg`'s environment variable when `value` came from it.
fn from_env(arg: &clap::Arg, value: &std::ffi::OsStr) -> Option<String> {
    let name = arg.get_env()?;
    if std::env::var_os(name).as_deref() != Some(value) {
        return None;
    }
    let mut spellings: Vec<String> = Vec::new();
    if let Some(long) = arg.get_long() {
        spellings.push(format!("--{long}"));
    }
    for alias in arg.get_all_aliases().unwrap_or_default() {
        spellings.push(format!("--{alias}"));
    }
    let on_command_line = std::env::args_os().skip(1).any(|a| {
        let a = a.to_string_lossy();
        spellings
            .iter()
            .any(|s| a == s.as_str() || a.starts_with(&format!("{s}=")))
    });
    (!on_command_line).then(|| name.to_string_lossy().into_owned())
}

/// The accepted values an invalid-value error lists (value enums).
fn valid_values(err: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    match err.get(ContextKind::ValidValue)? {
        ContextValue::Strings(values) => Some(values.join(", ")),
        ContextValue::String(value) => Some(value.clone()),
        _ => None,
    }
}
