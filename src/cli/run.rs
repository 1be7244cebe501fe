//! The shared `main`: parse flags, run the tool, print its one JSON document, exit.

use std::process::ExitCode;

use clap::error::ErrorKind;
use serde_json::Value;

use super::output::write_stdout;
use super::{CommonArgs, Diag, Exit, Failure};

/// What a tool produced: the stdout document and how the process ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub exit: Exit,
    pub document: Value,
}

impl Outcome {
    pub fn new(exit: Exit, document: Value) -> Self {
        Outcome { exit, document }
    }
}

/// A dreamkit binary: its clap definition plus what it does.
pub trait Tool: clap::Parser {
    fn common(&self) -> &CommonArgs;

    /// Does the work. A returned `Failure` is printed as `{"error":{...}}` with its exit code;
    /// a tool that must keep an envelope flowing on failure returns an `Outcome` instead.
    fn run(self, diag: &Diag) -> Result<Outcome, Failure>;
}

/// The whole life of a dreamkit process; `src/bin/<tool>.rs` calls only this.
pub fn main<T: Tool>() -> ExitCode {
    let name = T::command().get_name().to_string();
    let args = match T::try_parse() {
        Ok(args) => args,
        Err(err) => return clap_exit(&name, err),
    };
    let common = args.common().clone();
    let diag = Diag::new(&name, common.quiet, common.verbose);
    let (exit, document) = match args.run(&diag) {
        Ok(outcome) => (outcome.exit, outcome.document),
        Err(failure) => {
            diag.warn(&failure.to_string());
            (failure.exit(), failure.to_document())
        }
    };
    if let Err(e) = write_stdout(&document, common.pretty) {
        diag.warn(&format!("cannot write stdout: {e}"));
        return Exit::Environment.into();
    }
    exit.into()
}

/// `--help` and `--version` print as usual; every other clap error is a usage error in our
/// JSON form, with one line on stderr.
fn clap_exit(name: &str, err: clap::Error) -> ExitCode {
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            Exit::Yes.into()
        }
        _ => {
            let failure = Failure::Usage(first_line_of(&err));
            Diag::new(name, false, false).warn(&failure.to_string());
            let _ = write_stdout(&failure.to_document(), false);
            Exit::Usage.into()
        }
    }
}

fn first_line_of(err: &clap::Error) -> String {
    let text = err.render().to_string();
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("invalid command line");
    line.strip_prefix("error: ").unwrap_or(line).to_string()
}
