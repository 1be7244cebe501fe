//! The consolidation agent's five tools and their policy, and nothing else.
//!
//! - `shell`: one read-only command line of `ls find grep cat stat wc head tail`, optionally
//!   joined by `|`, tokenized and checked by our own code ([`shell`]), spawned without a shell,
//!   every path argument inside a readable root, Landlock-confined when the kernel allows
//!   ([`confine`]).
//! - `read_file`: regular files inside the readable roots ([`files`]).
//! - `write_file`, `edit_file`, `delete_file`: `*.md` files strictly inside the memory dir, no
//!   symlink on the way, no forbidden segment ([`paths`]), atomic, after the run's
//!   [`WriteGuard`] agrees.
//!
//! Every refusal is a [`ToolResult`] with `is_error: true` and a reason the model can act on;
//! nothing here panics on model input.

mod confine;
mod files;
mod paths;
mod shell;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::model::ToolSpec;

/// The caps every tool call runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock limit of one `shell` call; the whole pipeline is killed past it.
    pub shell_timeout: Duration,
    /// Bytes of `shell` output (stdout; stderr has its own smaller share) and of `read_file`
    /// output returned to the model; the rest is cut with a note.
    pub output_cap: usize,
    /// Largest memory file `write_file`/`edit_file` will produce or `edit_file` will load.
    pub max_file_bytes: usize,
    /// Lines `read_file` returns when the call gives no `limit`.
    pub read_default_lines: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            shell_timeout: Duration::from_secs(10),
            output_cap: 64 * 1024,
            max_file_bytes: 256 * 1024,
            read_default_lines: 2000,
        }
    }
}

/// What the run must do before a write lands (fencing check, snapshot before the first write,
/// changed-since-read check). `Err` stops the write.
pub trait WriteGuard {
    /// Called with the absolute path (canonical memory dir joined with the checked relative
    /// path) right before the write, replacement or deletion lands, after every policy check.
    fn before_write(&mut self, path: &Path) -> Result<(), GuardRefusal>;
}

/// A [`WriteGuard`]'s refusal: `message` becomes the tool error; `stop_run` tells the run to
/// end (the lock was lost).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardRefusal {
    pub message: String,
    pub stop_run: bool,
}

/// A guard that lets every write through (tests, `--unlocked` experiments).
#[derive(Debug, Default, Clone, Copy)]
pub struct AllowAll;

impl WriteGuard for AllowAll {
    fn before_write(&mut self, _path: &Path) -> Result<(), GuardRefusal> {
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Modified,
    Deleted,
}

impl Change {
    /// `created`, `modified` or `deleted` (for diffs and events).
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Modified => "modified",
            Change::Deleted => "deleted",
        }
    }
}

/// The outcome of one tool call, ready to become a `tool_result`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub content: String,
    pub is_error: bool,
    /// The memory file a successful write/edit/delete changed (absolute, under the canonical
    /// memory dir), and how.
    pub touched: Option<(PathBuf, Change)>,
    /// The guard asked the run to end (lock lost).
    pub stop_run: bool,
    /// The canonical path of the file a successful `read_file` read (for "changed since read":
    /// the caller hashes or snapshots it). `None` for every other call.
    pub read_path: Option<PathBuf>,
}

impl ToolResult {
    fn ok(content: impl Into<String>) -> ToolResult {
        ToolResult {
            content: content.into(),
            is_error: false,
            touched: None,
            stop_run: false,
            read_path: None,
        }
    }

    fn error(content: impl Into<String>) -> ToolResult {
        ToolResult {
            is_error: true,
            ..ToolResult::ok(content)
        }
    }
}

/// The agent's tools over one memory dir and a set of readable roots.
#[derive(Debug)]
pub struct Sandbox {
    /// Canonical memory dir: the cwd of every command and the only place writes land.
    memory_dir: PathBuf,
    /// The memory dir as the caller spelled it (absolute), so model paths using that
    /// spelling are accepted too.
    memory_dir_given: PathBuf,
    /// Canonical readable roots; always includes the memory dir.
    roots: Vec<PathBuf>,
    limits: Limits,
    /// Absolute paths of the allowed programs found in the system directories.
    programs: shell::Programs,
    /// The Landlock ruleset applied in every spawned child, when the probe found it enforced.
    confinement: Option<confine::Confinement>,
}

impl Sandbox {
    /// `memory_dir` must exist (the caller creates it); it and `readable_roots` are
    /// canonicalised here (a root that does not exist is an error). Probes Landlock once.
    pub fn new(
        memory_dir: &Path,
        readable_roots: &[PathBuf],
        limits: Limits,
    ) -> std::io::Result<Sandbox> {
        let memory_dir_given = std::path::absolute(memory_dir)?;
        let canonical = std::fs::canonicalize(memory_dir)?;
        if !std::fs::metadata(&canonical)?.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("memory dir {} is not a directory", memory_dir.display()),
            ));
        }
        let mut roots = vec![canonical.clone()];
        for root in readable_roots {
            let root = std::fs::canonicalize(root)?;
            if !roots.contains(&root) {
                roots.push(root);
            }
        }
        let programs = shell::Programs::locate();
        let confinement = confine::Confinement::probe(&roots, &programs, &canonical);
        Ok(Sandbox {
            memory_dir: canonical,
            memory_dir_given,
            roots,
            limits,
            programs,
            confinement,
        })
    }

    /// The five tools, as the model sees them.
    pub fn tool_specs() -> Vec<ToolSpec> {
        let path = json!({"type": "string", "description": "Absolute, or relative to the memory directory"});
        vec![
            ToolSpec {
                name: "shell".into(),
                description: "Run one read-only command line: only ls, find, grep, cat, stat, wc, head and \
                    tail, optionally joined with |. No shell: no redirects, ;, &&, ||, &, $VAR, $(...), \
                    backticks, globs (use find -name) or env assignments; find without -exec/-delete/-fprint*. \
                    Every path must be inside the memory directory or the other readable directories. \
                    Runs in the memory directory, with a timeout and an output cap."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"command": {"type": "string", "description": "e.g. grep -rn 'deploy' . | head -20"}},
                    "required": ["command"],
                    "additionalProperties": false
                }),
            },
            ToolSpec {
                name: "read_file".into(),
                description: "Read a text file inside the readable directories (memory files, session \
                    digests, transcripts), numbered like cat -n. offset is the first line (1-based), \
                    limit the number of lines."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "path": path,
                        "offset": {"type": "integer", "minimum": 1},
                        "limit": {"type": "integer", "minimum": 1}
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
            },
            ToolSpec {
                name: "write_file".into(),
                description: "Create or replace a .md file inside the memory directory with the given content."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"path": path, "content": {"type": "string"}},
                    "required": ["path", "content"],
                    "additionalProperties": false
                }),
            },
            ToolSpec {
                name: "edit_file".into(),
                description: "Replace the one exact occurrence of old_string with new_string in a .md file \
                    inside the memory directory; old_string must occur exactly once."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "path": path,
                        "old_string": {"type": "string"},
                        "new_string": {"type": "string"}
                    },
                    "required": ["path", "old_string", "new_string"],
                    "additionalProperties": false
                }),
            },
            ToolSpec {
                name: "delete_file".into(),
                description: "Delete a .md file inside the memory directory.".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"path": path},
                    "required": ["path"],
                    "additionalProperties": false
                }),
            },
        ]
    }

    /// Runs one tool call. Never panics on model input; every refusal is `is_error: true`.
    pub fn call(&mut self, name: &str, input: &Value, guard: &mut dyn WriteGuard) -> ToolResult {
        let Some(input) = input.as_object() else {
            return ToolResult::error(format!("{name}: the input must be a JSON object"));
        };
        match name {
            "shell" => match str_field(input, "command") {
                Ok(command) => shell::run(self, command),
                Err(e) => ToolResult::error(e),
            },
            "read_file" => files::read_file(self, input),
            "write_file" => files::write_file(self, input, guard),
            "edit_file" => files::edit_file(self, input, guard),
            "delete_file" => files::delete_file(self, input, guard),
            other => ToolResult::error(format!(
                "unknown tool {other:?}; the tools are shell, read_file, write_file, edit_file, delete_file"
            )),
        }
    }

    /// Whether spawned commands run under Landlock (probed once in [`Sandbox::new`]).
    pub fn landlock_active(&self) -> bool {
        self.confinement.is_some()
    }

    /// The canonical memory dir.
    pub fn memory_dir(&self) -> &Path {
        &self.memory_dir
    }

    /// The canonical readable roots (the memory dir first).
    pub fn readable_roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Whether a canonical path lies inside one of the readable roots.
    fn inside_roots(&self, canonical: &Path) -> bool {
        self.roots.iter().any(|root| canonical.starts_with(root))
    }
}

/// A required string field, or a tool error naming what is wrong.
fn str_field<'a>(input: &'a serde_json::Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match input.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "`{key}` must be a string, not {}",
            crate::cli::input::json_type_name(other)
        )),
        None => Err(format!("missing required field `{key}`")),
    }
}
