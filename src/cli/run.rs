//! The shared `main`: parse flags, run the tool, print its one JSON document, exit.

use std::process::ExitCode;
use std::rc::Rc;

use clap::error::ErrorKind;
use serde::Serialize;

use super::output::{write_document, write_stdout};
use super::{CommonArgs, Diag, Exit, Failure};

/// What a tool produced: how the process ends and the stdout document, already serialised
/// (typed sections go straight to JSON text, without an intermediate `Value` tree).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub exit: Exit,
    /// `None` only when a child process owned stdout (`dream-lock exec`).
    pub json: Option<String>,
    /// Why the answer is a clean "no", or what interrupted the tool: printed as one line on
    /// stderr (unless `-q`) when the exit code is 1, 130 or 143, so a person sees why without
    /// reading the JSON.
    pub note: Option<String>,
    /// What to undo when the document could not be delivered (stdout full, closed or
    /// broken): work whose only record is the document, such as a lock token, is taken back.
    pub undo: Option<Undo>,
}

/// See [`Outcome::undo_unless_printed`].
#[derive(Clone)]
pub struct Undo(Rc<dyn Fn(&Diag)>);

impl std::fmt::Debug for Undo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Undo")
    }
}

impl PartialEq for Undo {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl Outcome {
    pub fn new(exit: Exit, document: &impl Serialize) -> Self {
        match to_json(document) {
            Ok(json) => Outcome {
                exit,
                json: Some(json),
                note: None,
                undo: None,
            },
            Err(e) => {
                let failure = Failure::environment(format!("cannot serialise the output: {e}"));
                Outcome {
                    exit: failure.exit(),
                    json: Some(failure.to_document().to_string()),
                    note: None,
                    undo: None,
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
            undo: None,
        }
    }

    /// The one human line that says why (shown for exit 1, 130 and 143).
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    /// `undo` runs (after the "cannot write stdout" line) when the document could not be
    /// written in full, a closed pipe included: the reader never got it.
    pub fn undo_unless_printed(mut self, undo: impl Fn(&Diag) + 'static) -> Self {
        self.undo = Some(Undo(Rc::new(undo)));
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
    /// The envelope section a pipeline stage adds (`gate`, `lock`, `run`). Every failure of
    /// such a tool, a usage error included, prints the envelope it received with this section
    /// marked failed, so the release at the end of the pipeline can still roll back.
    const ENVELOPE_SECTION: Option<&'static str> = None;

    fn common(&self) -> &CommonArgs;

    /// Does the work. A returned `Failure` is printed as `{"error":{...}}` with its exit code;
    /// a tool that must keep an envelope flowing on failure returns an `Outcome` instead.
    fn run(self, diag: &Diag) -> Result<Outcome, Failure>;
}

/// The whole life of a dreamkit process; `src/bin/<tool>.rs` calls only this.
pub fn main<T: Tool>() -> ExitCode {
    let name = T::command().get_name().to_string();
    if let Some(section) = T::ENVELOPE_SECTION {
        super::input::set_envelope_section(section);
    }
    let args = match parse::<T>() {
        Ok(args) => args,
        Err(err) => return clap_exit(&name, err, T::ENVELOPE_SECTION),
    };
    let common = args.common().clone();
    // First: nothing printed from here on may show a credential.
    super::redact::register_environment();
    super::input::set_null_input(common.null_input);
    let diag = Diag::new(&name, common.quiet, common.verbose);
    // Before any I/O, so that a signal ends the tool however it is blocked.
    if let Err(e) = super::signals::install(&name, common.quiet) {
        diag.warn(&format!("cannot install signal handlers: {e}"));
    }
    let outcome = args.run(&diag).unwrap_or_else(|failure| {
        diag.warn(&failure.to_string());
        failure_outcome(&failure, T::ENVELOPE_SECTION)
    });
    if matches!(
        outcome.exit,
        Exit::No | Exit::Interrupted | Exit::Terminated
    ) {
        if let Some(note) = &outcome.note {
            diag.warn(note);
        }
    }
    // The work is done: a signal now would only cut the document short, so it waits.
    let hold = super::signals::hold();
    if let Some(json) = &outcome.json {
        match write_document(json, common.pretty_output()) {
            Ok(()) => {}
            // A reader that went away (`| head`) is not worth a word, unless work hangs on it.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe && outcome.undo.is_none() => {}
            Err(e) => {
                diag.warn(&format!("cannot write stdout: {e}"));
                if let Some(Undo(undo)) = &outcome.undo {
                    undo(&diag);
                }
                return Exit::Environment.into();
            }
        }
    }
    let _late = hold.end();
    outcome.exit.into()
}

/// The document of a failure: `{"error": ...}`, or for a pipeline stage that read an envelope,
/// that envelope with the stage's section failed (see [`super::envelope::failed`]).
fn failure_outcome(failure: &Failure, section: Option<&str>) -> Outcome {
    match (section, super::input::received_envelope()) {
        (Some(section), Some(envelope)) => Outcome::new(
            failure.exit(),
            &super::envelope::failed(envelope, section, failure),
        ),
        _ => Outcome::new(failure.exit(), &failure.to_document()),
    }
}

/// Parses the command line. The shared flags (`-q -v -n --pretty --compact`) go before or
/// after a subcommand; a tool's own flags never go with a subcommand they do not belong to
/// (`dream-run --max-turns 5 tasks` is a usage error, not a silently ignored flag).
fn parse<T: Tool>() -> Result<T, clap::Error> {
    let mut command = T::command();
    let matches = command.try_get_matches_from_mut(std::env::args_os())?;
    if let Some((subcommand, _)) = matches.subcommand() {
        let misplaced = command.get_arguments().find_map(|arg| {
            let id = arg.get_id().as_str();
            let given = matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
            (given && !arg.is_global_set()).then(|| {
                arg.get_long()
                    .map(|l| format!("--{l}"))
                    .unwrap_or_else(|| id.to_string())
            })
        });
        if let Some(flag) = misplaced {
            let message =
                format!("the argument '{flag}' cannot be used with the subcommand '{subcommand}'");
            return Err(command.error(ErrorKind::ArgumentConflict, message));
        }
    }
    T::from_arg_matches(&matches).map_err(|e| e.format(&mut command))
}

/// `--help` and `--version` (and `help SUBCOMMAND`) print as usual; every other clap error is a
/// usage error: one line on stderr (see [`usage_line`]), and clap's whole text, plain (the
/// missing argument, the "did you mean" tip, the `Usage:` line), in our JSON on stdout (in
/// the envelope, for a pipeline stage whose stdin held one).
fn clap_exit(tool: &str, err: clap::Error, section: Option<&str>) -> ExitCode {
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            Exit::Yes.into()
        }
        _ => {
            let failure = Failure::Usage(plain_message(&err));
            // The flags did not parse, but a `-q` (or `-n`) among them is still honoured.
            let quiet = asks_flag(std::env::args_os().skip(1), "quiet", 'q');
            if !quiet {
                print_usage_line(tool, &err);
            }
            if section.is_some() {
                super::input::set_null_input(asks_flag(
                    std::env::args_os().skip(1),
                    "null-input",
                    'n',
                ));
                // Whatever stdin holds, the usage error is what is reported.
                let _ = super::input::Input::from_stdin();
            }
            let outcome = failure_outcome(&failure, section);
            let _ = write_stdout(outcome.json.as_deref().unwrap_or("{}"), false);
            Exit::Usage.into()
        }
    }
}

/// The usage error's one line on stderr, as every other diagnostic of the tool:
/// `recap: unexpected argument '--foo' found (try --help)`, with what a user put in a URL's
/// userinfo or query redacted (`--backend etcd://u:password@h` that does not parse must not
/// print the password). A lost stderr cannot be reported.
fn print_usage_line(tool: &str, err: &clap::Error) {
    use std::io::Write;
    let line = format!("{}\n", usage_line(tool, &plain_message(err)));
    let _ = std::io::stderr()
        .lock()
        .write_all(super::redact::redact(&line).as_bytes());
}

/// clap's first line, with the indented lines right below it that finish it (the names of
/// the missing arguments, the list of subcommands); the tips and `Usage:` stay in the JSON.
fn usage_line(tool: &str, message: &str) -> String {
    let mut lines = message.lines();
    let mut line = lines.next().unwrap_or_default().trim().to_string();
    for more in lines.take_while(|l| l.starts_with(' ') && !l.trim().is_empty()) {
        line.push(' ');
        line.push_str(more.trim());
    }
    format!("{tool}: {line} (try --help)")
}

/// Whether the command line holds `--<long>`, `-<short>` or a cluster such as `-qn`, before
/// any `--` (what follows belongs to a command, as in `dream-lock exec -- grep -q x`).
fn asks_flag(args: impl Iterator<Item = std::ffi::OsString>, long: &str, short: char) -> bool {
    args.take_while(|a| a != "--").any(|a| {
        let a = a.to_string_lossy();
        a.strip_prefix("--") == Some(long)
            || (a.starts_with('-')
                && !a.starts_with("--")
                && a[1..].chars().all(|c| c.is_ascii_alphabetic())
                && a[1..].contains(short))
    })
}

/// clap's message without colours, without the `error: ` label and without the closing
/// "For more information, try '--help'." hint, which a JSON reader cannot follow.
fn plain_message(err: &clap::Error) -> String {
    // `render()` keeps the styles apart; its `Display` is the plain text.
    let text = err.render().to_string();
    let text = text.trim();
    let text = text.strip_prefix("error: ").unwrap_or(text);
    let text = match text.rfind("For more information, try") {
        Some(at) if !text[at..].contains('\n') => &text[..at],
        _ => text,
    };
    match text.trim_end() {
        "" => "invalid command line".to_string(),
        message => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, Command};

    fn error_for(args: &[&str]) -> clap::Error {
        // Colours on, as on a terminal: the JSON text must still be plain.
        Command::new("tool")
            .color(clap::ColorChoice::Always)
            .arg(Arg::new("name").long("name").required(true))
            .try_get_matches_from(args)
            .err()
            .unwrap()
    }

    #[test]
    fn quiet_is_found_in_clusters_but_not_in_a_commands_arguments() {
        let quiet =
            |args: &[&str]| asks_flag(args.iter().map(std::ffi::OsString::from), "quiet", 'q');
        assert!(quiet(&["-q", "--bad"]));
        assert!(quiet(&["--quiet"]));
        assert!(quiet(&["-nq", "--bad"]));
        assert!(!quiet(&["--bad"]));
        assert!(!quiet(&["--pid", "x", "--", "grep", "-q"]));
        assert!(!quiet(&["--quietly"]));
    }

    #[test]
    fn the_usage_line_is_clap_first_line_with_what_finishes_it() {
        let missing = usage_line("tool", &plain_message(&error_for(&["tool"])));
        assert_eq!(
            missing,
            "tool: the following required arguments were not provided: --name <name> (try --help)"
        );
        let unknown = usage_line("tool", &plain_message(&error_for(&["tool", "--nme", "x"])));
        assert_eq!(
            unknown,
            "tool: unexpected argument '--nme' found (try --help)"
        );
    }

    #[test]
    fn usage_message_keeps_the_whole_text_but_the_help_hint() {
        let err = error_for(&["tool"]);
        assert!(err.render().ansi().to_string().contains('\u{1b}'), "styled");
        let message = plain_message(&err);
        assert!(
            message.starts_with("the following required arguments"),
            "{message}"
        );
        assert!(message.contains("--name <name>"), "{message}");
        assert!(message.contains("Usage: tool --name <name>"), "{message}");
        assert!(!message.contains("For more information"), "{message}");
        assert!(!message.contains('\u{1b}'), "{message}");
        let message = plain_message(&error_for(&["tool", "--nme", "x"]));
        assert!(
            message.contains("tip: a similar argument exists: '--name'"),
            "{message}"
        );
    }
}
