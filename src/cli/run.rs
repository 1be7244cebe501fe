//! The shared `main`: parse flags, run the tool, print its one JSON document, exit.

use std::process::ExitCode;

use clap::error::ErrorKind;
use serde::Serialize;

use super::output::write_stdout;
use super::{CommonArgs, Diag, Exit, Failure};

/// What a tool produced: how the process ends and the stdout document, already serialised
/// (typed sections go straight to JSON text, without an intermediate `Value` tree).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub exit: Exit,
    /// `None` only when a child process owned stdout (`dream-lock exec`).
    pub json: Option<String>,
    /// Why the answer is a clean "no": printed as one line on stderr (unless `-q`) when the
    /// exit code is 1, so a person sees why without reading the JSON.
    pub note: Option<String>,
}

impl Outcome {
    pub fn new(exit: Exit, document: &impl Serialize) -> Self {
        match to_json(document) {
            Ok(json) => Outcome {
                exit,
                json: Some(json),
                note: None,
            },
            Err(e) => {
                let failure = Failure::environment(format!("cannot serialise the output: {e}"));
                Outcome {
                    exit: failure.exit(),
                    json: Some(failure.to_document().to_string()),
                    note: None,
                }
            }
        }
    }

    /// Ends the process without a document of ours.
    pub fn without_document(exit: Exit) -> Self {
        Outcome {
            exit,
            json: None,
            note: None,
        }
    }

    /// The one human line that says why (shown for exit 1).
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

/// Compact JSON text; the buffer starts large enough for most documents in one allocation.
fn to_json(document: &impl Serialize) -> Result<String, String> {
    let mut buffer = Vec::with_capacity(16 * 1024);
    serde_json::to_writer(&mut buffer, document).map_err(|e| e.to_string())?;
    String::from_utf8(buffer).map_err(|e| e.to_string())
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
    super::input::set_null_input(common.null_input);
    let diag = Diag::new(&name, common.quiet, common.verbose);
    // Before any I/O, so that a signal ends the tool however it is blocked.
    if let Err(e) = super::signals::install(&name, common.quiet) {
        diag.warn(&format!("cannot install signal handlers: {e}"));
    }
    let outcome = args.run(&diag).unwrap_or_else(|failure| {
        diag.warn(&failure.to_string());
        Outcome::new(failure.exit(), &failure.to_document())
    });
    if outcome.exit == Exit::No {
        if let Some(note) = &outcome.note {
            diag.warn(note);
        }
    }
    // The work is done: a signal now would only cut the document short, so it waits.
    let hold = super::signals::hold();
    if let Some(json) = &outcome.json {
        if let Err(e) = write_stdout(json, common.pretty_output()) {
            diag.warn(&format!("cannot write stdout: {e}"));
            return Exit::Environment.into();
        }
    }
    let _late = hold.end();
    outcome.exit.into()
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
            // The flags did not parse, but a `-q` among them is still honoured.
            let quiet = std::env::args_os().any(|a| a == "-q" || a == "--quiet");
            Diag::new(name, quiet, false).warn(&failure.to_string());
            let _ = write_stdout(&failure.to_document().to_string(), false);
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
