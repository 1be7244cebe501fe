//! The shared `main`: parse flags, run the tool, print its one JSON document, exit.

use std::process::ExitCode;

use clap::error::ErrorKind;
use serde_json::Value;

use super::context::{read_stdin, Context};
use super::envelope::Stage;
use super::failure::FailureDocument;
use super::output::{write_document, write_stdout};
use super::report::{generator, Delivery, Tool};
use super::{CommonArgs, Diag, Env, Exit, Failure};

/// A dreamkit binary: its clap definition, its envelope stage, and which of its commands the
/// flags name.
pub trait Binary: clap::Parser {
    /// The envelope section the binary adds (`gate`, `lock`, `run`). Every failure of such a
    /// tool, a usage error included, prints the envelope it received with this section
    /// failed, so the release at the end of the pipeline can still roll back.
    const STAGE: Option<&'static dyn Stage> = None;

    /// Subcommands that speak their own protocol on stdin and stdout (`dream-run tool-relay`:
    /// MCP, for the Claude Code client that starts it). For them the shared `main` reads
    /// nothing from stdin (the command takes it, [`Context::stdio_channel`]), a signal and a
    /// usage error print nothing on stdout (the usage error keeps its stderr line and exit 2,
    /// and no envelope is read), and the report prints no document
    /// ([`Report::printed`](super::Report::printed) false): its exit code is still the
    /// report's.
    const STDIO_SUBCOMMANDS: &'static [&'static str] = &[];

    fn common(&self) -> &CommonArgs;

    /// Runs the command the flags name, through [`Context::finish`].
    fn dispatch(self, cx: &Context) -> Delivery;
}

impl Context {
    /// Runs one command (or, with `--schema`, prints what it would print) and makes its
    /// report ready for stdout. Every binary's commands end here.
    pub fn finish<T: Tool>(&self, tool: T) -> Delivery {
        if self.common().schema {
            return Delivery::document(&schema_answer(&tool, self.stage()));
        }
        match tool.run(self) {
            Ok(report) => Delivery::of(report),
            Err(failure) => self.failed(&failure),
        }
    }

    /// The document of a failure: `{"error": ...}`, or for a pipeline stage that read an
    /// envelope, that envelope with the stage's section failed.
    fn failed(&self, failure: &Failure) -> Delivery {
        let note = Some(failure.to_string());
        let json = match (self.stage(), self.received_envelope()) {
            (Some(stage), Some(envelope)) => stage.failed(envelope, failure).to_string(),
            _ => super::json::to_string(&FailureDocument::of(failure)).unwrap_or_default(),
        };
        Delivery {
            exit: failure.exit(),
            json: Some(json),
            note,
            undo: None,
        }
    }
}

/// `--schema`'s answer where stdout holds no JSON document of ours.
#[derive(serde::Serialize)]
struct NoSchema {
    /// Always null.
    schema: Option<()>,
    reason: &'static str,
}

/// `--schema`: the JSON Schema (2020-12) of what the command prints on stdout, its report or
/// its failure; `{"schema": null, "reason"}` where stdout holds no JSON document of ours.
fn schema_answer<T: Tool>(tool: &T, stage: Option<&'static dyn Stage>) -> Value {
    let mut generator = generator();
    let report = match tool.schema(&mut generator) {
        Ok(schema) => schema,
        Err(reason) => {
            return super::envelope::json_value(&NoSchema {
                schema: None,
                reason,
            })
        }
    };
    // A failure prints `{"error"}`; a stage that read an envelope prints it, failed.
    let mut documents = vec![
        report.to_value(),
        generator.subschema_for::<FailureDocument>().to_value(),
    ];
    if let Some(stage) = stage {
        documents.push(stage.failed_schema(&mut generator).to_value());
    }
    let mut root = serde_json::Map::new();
    root.insert(
        "$schema".into(),
        "https://json-schema.org/draft/2020-12/schema".into(),
    );
    root.insert("anyOf".into(), Value::Array(documents));
    let definitions = generator.take_definitions(true);
    if !definitions.is_empty() {
        root.insert("$defs".into(), Value::Object(definitions));
    }
    Value::Object(root)
}

/// The whole life of a dreamkit process; `src/bin/<tool>.rs` calls only this.
pub fn main<T: Binary>() -> ExitCode {
    let name = T::command().get_name().to_string();
    let stdio = names_stdio_subcommand::<T>(std::env::args_os().skip(1));
    let args = match parse::<T>() {
        Ok(args) => args,
        Err(err) => return clap_exit(&name, err, T::STAGE, stdio),
    };
    let common = args.common().clone();
    // First: nothing printed from here on may show a credential.
    super::redact::register_environment();
    let diag = Diag::new(&name, common.quiet, common.verbose);
    // Before any I/O, so that a signal ends the tool however it is blocked.
    if let Err(e) = super::signals::install(&name, common.quiet) {
        diag.warn(&format!("cannot install signal handlers: {e}"));
    }
    if stdio {
        super::signals::no_documents();
    }
    // `--schema` runs nothing, so it reads nothing; a command with its own channel reads it
    // itself.
    let stdin = if common.schema || stdio {
        Ok(None)
    } else {
        read_stdin(common.null_input)
    };
    let cx = Context::with_stdin(diag, common, Env::from_process(), T::STAGE, stdin);
    let cx = if stdio && !cx.common().schema {
        cx.owning_stdio()
    } else {
        cx
    };
    let delivery = args.dispatch(&cx);
    deliver(delivery, &cx)
}

/// Prints the report's line and document; the exit code is the report's, unless the document
/// could not be written.
fn deliver(delivery: Delivery, cx: &Context) -> ExitCode {
    let diag = cx.diag();
    if let Some(note) = &delivery.note {
        diag.warn(note);
    }
    // The work is done: a signal now would only cut the document short, so it waits.
    let hold = super::signals::hold();
    if let Some(json) = &delivery.json {
        match write_document(json, cx.common().pretty_output()) {
            Ok(()) => {}
            // A reader that went away (`| head`) is not worth a word, unless work hangs on it.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe && delivery.undo.is_none() => {}
            Err(e) => {
                diag.warn(&format!("cannot write stdout: {e}"));
                if let Some(undo) = delivery.undo {
                    undo(diag);
                }
                return Exit::Environment.into();
            }
        }
    }
    let _late = hold.end();
    delivery.exit.into()
}

/// Parses the command line. The shared flags (`-q -v -n --pretty --compact`) go before or
/// after a subcommand; a tool's own flags never go with a subcommand they do not belong to
/// (`dream-run --max-turns 5 tasks` is a usage error, not a silently ignored flag).
fn parse<T: Binary>() -> Result<T, clap::Error> {
    parse_from::<T>(std::env::args_os().collect())
}

/// [`parse`] of a given command line. With `--schema` nothing runs, so no argument is
/// required (`feedback send --schema` needs no `--endpoint`).
pub(super) fn parse_from<T: Binary>(argv: Vec<std::ffi::OsString>) -> Result<T, clap::Error> {
    let schema = asks_flag(argv.iter().skip(1).cloned(), "schema", '\0');
    match parse_once::<T>(argv.clone(), schema) {
        Err(_) if schema => parse_once::<T>(with_placeholders(&T::command(), argv), schema),
        parsed => parsed,
    }
}

/// The command line with a value for each required positional argument of the subcommand it
/// names, which the parsed type needs even with `--schema` (the values are never used).
pub(super) fn with_placeholders(
    command: &clap::Command,
    mut argv: Vec<std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let at = argv
        .iter()
        .position(|a| command.find_subcommand(a).is_some())
        .unwrap_or(0);
    let sub = match at {
        0 => command,
        _ => command.find_subcommand(&argv[at]).unwrap_or(command),
    };
    let values: Vec<std::ffi::OsString> = sub
        .get_arguments()
        .filter(|arg| {
            arg.is_required_set() && arg.is_positional() && arg.get_default_values().is_empty()
        })
        .map(|arg| {
            arg.get_possible_values()
                .first()
                .map_or_else(|| "0".into(), |v| v.get_name().into())
        })
        .collect();
    argv.splice(at + 1..at + 1, values);
    argv
}

fn parse_once<T: Binary>(argv: Vec<std::ffi::OsString>, schema: bool) -> Result<T, clap::Error> {
    let mut command = if schema {
        relaxed(T::command())
    } else {
        T::command()
    };
    let matches = command.try_get_matches_from_mut(argv)?;
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

/// The command with nothing required: no argument, group or subcommand.
fn relaxed(command: clap::Command) -> clap::Command {
    let groups: Vec<clap::Id> = command.get_groups().map(|g| g.get_id().clone()).collect();
    let mut command = command.subcommand_required(false).mut_args(|arg| {
        arg.required(false)
            .required_unless_present(clap::builder::Resettable::Reset)
    });
    for group in groups {
        command = command.mut_group(group, |g| g.required(false));
    }
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, relaxed);
    }
    command
}

/// `--help` and `--version` (and `help SUBCOMMAND`) print as usual; every other clap error is a
/// usage error: one line on stderr (see [`usage_line`]), and clap's whole text, plain (the
/// missing argument, the "did you mean" tip, the `Usage:` line), in our JSON on stdout (in
/// the envelope, for a pipeline stage whose stdin held one).
fn clap_exit(
    tool: &str,
    err: clap::Error,
    stage: Option<&'static dyn Stage>,
    stdio: bool,
) -> ExitCode {
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
            // stdin and stdout are another program's channel: neither is touched.
            if stdio {
                return Exit::Usage.into();
            }
            // Whatever stdin holds, the usage error is what is reported; a stage reads it to
            // keep the envelope flowing.
            let stdin = match stage {
                Some(_) => read_stdin(asks_flag(std::env::args_os().skip(1), "null-input", 'n')),
                None => Ok(None),
            };
            let diag = Diag::new(tool, true, false);
            let cx = Context::with_stdin(diag, CommonArgs::default(), Env::default(), stage, stdin);
            let _ = cx.input();
            let delivery = cx.failed(&failure);
            let _ = write_stdout(delivery.json.as_deref().unwrap_or("{}"), false);
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

/// Whether the command line (without the program's name) names one of
/// [`Binary::STDIO_SUBCOMMANDS`]: its first word that is a subcommand of the binary, before
/// any `--`. Read before the flags are parsed, so that a usage error of such a command
/// leaves its stdin and stdout alone too.
fn names_stdio_subcommand<T: Binary>(args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    if T::STDIO_SUBCOMMANDS.is_empty() {
        return false;
    }
    let command = T::command();
    args.take_while(|a| a != "--")
        .find_map(|a| {
            command
                .find_subcommand(&a)
                .map(|sub| sub.get_name().to_string())
        })
        .is_some_and(|name| T::STDIO_SUBCOMMANDS.contains(&name.as_str()))
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
