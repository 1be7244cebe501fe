//! The schema hook: every JSON document a test reads from a tool's stdout is validated
//! against that command's JSON Schema (draft 2020-12), committed under `schemas/` at the
//! repository root by `make man completions`: `schemas/<binary>.json`,
//! `schemas/<binary>-<subcommand>.json`, and `-hook` / `-events` variants where that flag
//! changes what stdout holds (`dream-run-show-hook.json`, `turn-status-events.json`; each
//! `--events` line is validated on its own). A file holding `{"schema": null, "reason": ..}`
//! says the command prints no JSON document (`dream-lock exec`, `dream-run show --diff`):
//! nothing is validated. A command without a schema file fails the test.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Every binary and its subcommands (`<bin> --help`'s Commands); the structure test checks
/// the binaries against the build.
pub(crate) const SUBCOMMANDS: &[(&str, &[&str])] = &[
    ("dream-gate", &[]),
    ("dream-lock", &["acquire", "release", "status", "exec"]),
    (
        "dream-run",
        &[
            "tasks",
            "pending",
            "undo",
            "show",
            "apply",
            "discard",
            "recover",
            "check",
            "eval",
            // Hidden from --help: only the Claude Code client starts it.
            "tool-relay",
        ],
    ),
    ("recap", &[]),
    ("turn-status", &[]),
    ("suggest", &["check"]),
    ("feedback", &["queue", "list", "show", "send", "discard"]),
];

/// Which command a run of one of our binaries is, read from its argv as it is built.
#[derive(Clone, Debug)]
pub(crate) struct Command {
    bin: String,
    subcommand: Option<String>,
    /// `--events`: stderr carries JSON Lines events; `--hook`: stdout is the hook's answer.
    events: bool,
    hook: bool,
    /// `--schema`, `--help`, `--version`: stdout is not the command's output.
    not_output: bool,
}

/// What one command's stdout is validated with.
enum Shape {
    /// No schema file yet, or `{"schema": null}`: nothing to validate.
    Unchecked,
    /// Each document must match.
    Document(Arc<jsonschema::Validator>),
}

impl Command {
    pub(crate) fn of(bin: &str) -> Self {
        Command {
            bin: bin.to_string(),
            subcommand: None,
            events: false,
            hook: false,
            not_output: false,
        }
    }

    /// Takes in the next argument of the run.
    pub(crate) fn arg(&mut self, arg: &str) {
        match arg {
            "--events" => self.events = true,
            "--hook" => self.hook = true,
            "--schema" | "--help" | "-h" | "--version" | "-V" | "help" => self.not_output = true,
            _ if self.subcommand.is_none() && self.subcommands().contains(&arg) => {
                self.subcommand = Some(arg.to_string());
            }
            _ => {}
        }
    }

    fn subcommands(&self) -> &'static [&'static str] {
        SUBCOMMANDS
            .iter()
            .find(|(bin, _)| *bin == self.bin)
            .map_or(&[], |(_, subs)| subs)
    }

    /// The stdout schema file's name, without `.json`.
    fn file_stem(&self) -> String {
        let mut stem = self.bin.clone();
        if let Some(sub) = &self.subcommand {
            stem.push('-');
            stem.push_str(sub);
        }
        // A flag that changes what stdout holds has its own file (`make man completions`
        // writes one only where the shape differs: `--events` of suggest and turn-status).
        for (given, flag) in [(self.hook, "-hook"), (self.events, "-events")] {
            if given && schema_path(&format!("{stem}{flag}")).exists() {
                stem.push_str(flag);
            }
        }
        stem
    }

    /// The events schema file's name, when the run prints `--events` on stderr and the
    /// events have a schema of their own.
    fn events_stem(&self) -> Option<String> {
        let stem = format!("{}-events", self.bin);
        (self.events && self.subcommand.is_none() && schema_path(&stem).exists()).then_some(stem)
    }

    fn shape(&self, stem: &str) -> Shape {
        if self.not_output {
            return Shape::Unchecked;
        }
        compiled(schema_path(stem)).map_or(Shape::Unchecked, Shape::Document)
    }
}

fn schema_path(stem: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(format!("{stem}.json"))
}

/// The compiled schema at `path`, compiled once per test process; `None` where it says the
/// command prints no JSON. A missing file fails the test.
fn compiled(path: PathBuf) -> Option<Arc<jsonschema::Validator>> {
    static CACHE: Mutex<Option<HashMap<PathBuf, Option<Arc<jsonschema::Validator>>>>> =
        Mutex::new(None);
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .get_or_insert_with(HashMap::new)
        .entry(path.clone())
        .or_insert_with(|| {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!(
                    "{}: {e}: every command has a schema (`make man completions`)",
                    path.display()
                )
            });
            let schema: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
            if schema.get("schema").is_some_and(Value::is_null) {
                return None;
            }
            let validator = jsonschema::draft202012::new(&schema)
                .unwrap_or_else(|e| panic!("{}: not a valid schema: {e}", path.display()));
            Some(Arc::new(validator))
        })
        .clone()
}

/// Fails, listing where and why, when `doc` (stdout) does not match `command`'s schema.
#[track_caller]
pub(crate) fn validate(command: Option<&Command>, doc: &Value) {
    let Some(command) = command else { return };
    validate_against(command, &command.file_stem(), doc);
}

#[track_caller]
fn validate_against(command: &Command, stem: &str, doc: &Value) {
    let Shape::Document(validator) = command.shape(stem) else {
        return;
    };
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("  at {:?}: {e}", e.instance_path.as_str()))
        .collect();
    assert!(
        errors.is_empty(),
        "{doc} does not match schemas/{stem}.json:\n{}",
        errors.join("\n")
    );
}

/// stdout read by a check of its text: the JSON document it holds (or each JSON line).
#[track_caller]
pub(crate) fn validate_text(command: Option<&Command>, stdout: &str) {
    if let Ok(doc) = serde_json::from_str::<Value>(stdout) {
        return validate(command, &doc);
    }
    for line in stdout.lines() {
        if let Ok(doc) = serde_json::from_str::<Value>(line) {
            validate(command, &doc);
        }
    }
}

/// For `--events`: each JSON line of `stderr` must match the event schema.
#[track_caller]
pub(crate) fn validate_events(command: Option<&Command>, stderr: &str) {
    let Some((command, stem)) = command.and_then(|c| Some((c, c.events_stem()?))) else {
        return;
    };
    for line in stderr.lines() {
        if let Ok(doc) = serde_json::from_str::<Value>(line) {
            validate_against(command, &stem, &doc);
        }
    }
}
