//! The consolidation agent's five tools and their policy, and nothing else.
//!
//! - `shell`: one read-only command line of `ls find grep cat stat wc head tail`, optionally
//!   joined by `|`, tokenized and checked by our own code ([`shell`]), spawned without a shell,
//!   every path argument inside a readable root, Landlock-confined when the kernel allows
//!   ([`confine`]).
//! - `read_file`: regular files inside the readable roots ([`files`]), and the read-only
//!   files named on their own (the CLAUDE.md files).
//! - Reading is refused for secret-bearing files anywhere in a root (`.env*`, keys, `.git/`:
//!   [`secrets`]), as a path and in `grep`'s recursion.
//! - `write_file`, `edit_file`, `delete_file`: `*.md` files strictly inside the memory dir, no
//!   symlink on the way, no forbidden segment ([`paths`]), atomic, after the run's
//!   [`WriteGuard`] agrees. A topic file with frontmatter lands stamped as Claude Code stamps
//!   it ([`stamp`]); team memory (`team/`) is not deleted unless the run allows it.
//!
//! Every refusal is a [`ToolResult`] with `is_error: true` and a reason the model can act on;
//! nothing here panics on model input.

mod confine;
mod files;
mod input;
mod paths;
#[cfg(test)]
mod props;
mod secrets;
mod shell;
mod sources;
mod stamp;
#[cfg(test)]
#[allow(unsafe_code)] // the tests make FIFOs with mkfifo(3)
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

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
    /// Mode of a memory file `write_file` creates (an existing file keeps its own).
    pub new_file_mode: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            shell_timeout: Duration::from_secs(10),
            output_cap: 64 * 1024,
            max_file_bytes: 256 * 1024,
            read_default_lines: 2000,
            new_file_mode: 0o644,
        }
    }
}

/// What the run must do before a write lands (fencing check, snapshot before the first write,
/// changed-since-read check). `Err` stops the write.
pub trait WriteGuard {
    /// Called with the absolute path (canonical memory dir joined with the checked relative
    /// path) and the content about to be written (`None`: a deletion), right before the
    /// write, replacement or deletion lands, after every policy check.
    fn before_write(&mut self, path: &Path, content: Option<&[u8]>) -> Result<(), GuardRefusal>;
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
    fn before_write(&mut self, _path: &Path, _content: Option<&[u8]>) -> Result<(), GuardRefusal> {
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
    /// The sources a write, edit or delete named, each checked ([`sources`]).
    pub sources: Vec<crate::store::Source>,
}

impl ToolResult {
    fn ok(content: impl Into<String>) -> ToolResult {
        ToolResult {
            content: content.into(),
            is_error: false,
            touched: None,
            stop_run: false,
            read_path: None,
            sources: Vec::new(),
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
    /// Canonical files readable on their own, outside the roots (the CLAUDE.md files).
    files: Vec<PathBuf>,
    limits: Limits,
    /// Absolute paths of the allowed programs found in the system directories.
    programs: shell::Programs,
    /// The Landlock ruleset applied in every spawned child, when the probe found it enforced.
    confinement: Option<confine::Confinement>,
    /// Proposing: the real memory dir (as given, and canonical), whose paths the tools read as
    /// paths in the staging copy, so the model sees one memory dir whichever it names.
    alias: Vec<PathBuf>,
    /// `originSessionId` of a topic file the model creates (the newest session reviewed),
    /// unless its first verified source names another.
    origin_session: Option<String>,
    /// The run's sessions, for checking the `sources` a write names.
    sessions: sources::Sessions,
    /// Whether `delete_file` may delete under the memory dir's shared `team/` folder.
    allow_team_delete: bool,
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
        // `/`, the home directory or a folder above it would open every user's files, or the
        // home directory's keys and tokens (~/.ssh, ~/.aws), to the model.
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .and_then(|h| std::fs::canonicalize(h).ok());
        for root in &roots {
            let above_home = home.as_ref().is_some_and(|home| home.starts_with(root));
            if root == Path::new("/") || above_home {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "refusing to make {} readable by the agent: it is /, the home directory or holds it",
                        root.display()
                    ),
                ));
            }
        }
        let programs = shell::Programs::locate();
        let confinement = confine::Confinement::probe(&roots, &programs, &canonical);
        Ok(Sandbox {
            memory_dir: canonical,
            memory_dir_given,
            roots,
            files: Vec::new(),
            limits,
            programs,
            confinement,
            alias: Vec::new(),
            origin_session: None,
            sessions: sources::Sessions::default(),
            allow_team_delete: false,
        })
    }

    /// Makes each of `files` that is a regular file readable on its own (read-only, like
    /// everything but the memory dir), wherever it is: `~/.claude/CLAUDE.md` may be read
    /// though the home directory may not. Files that do not exist are skipped.
    pub fn with_readable_files(mut self, files: &[PathBuf]) -> Sandbox {
        for file in files {
            let Ok(canonical) = std::fs::canonicalize(file) else {
                continue;
            };
            let regular = std::fs::metadata(&canonical).is_ok_and(|m| m.is_file());
            if regular && !self.files.contains(&canonical) {
                self.files.push(canonical);
            }
        }
        if !self.files.is_empty() && self.confinement.is_some() {
            let granted: Vec<PathBuf> = self.roots.iter().chain(&self.files).cloned().collect();
            self.confinement =
                confine::Confinement::probe(&granted, &self.programs, &self.memory_dir);
        }
        self
    }

    /// Names `session` as the `originSessionId` of the topic files the model creates.
    pub fn with_origin_session(mut self, session: Option<String>) -> Sandbox {
        self.origin_session = session;
        self
    }

    /// The run's sessions (id -> transcript), against which `sources` are checked.
    pub fn with_sessions(
        mut self,
        transcripts: std::collections::BTreeMap<String, PathBuf>,
    ) -> Sandbox {
        self.sessions = sources::Sessions::new(transcripts);
        self
    }

    /// Lets `delete_file` delete team memory (`team/`), refused by default.
    pub fn with_team_delete(mut self, allowed: bool) -> Sandbox {
        self.allow_team_delete = allowed;
        self
    }

    /// Makes paths under `real` (the real memory dir, while the sandbox works in a staging
    /// copy) name the same files in the copy, and shows the copy's paths as `real` again.
    pub fn with_alias(mut self, real: &Path) -> Sandbox {
        if let Ok(absolute) = std::path::absolute(real) {
            self.alias.push(absolute);
        }
        if let Ok(canonical) = std::fs::canonicalize(real) {
            if !self.alias.contains(&canonical) {
                self.alias.push(canonical);
            }
        }
        self.alias
            .retain(|a| *a != self.memory_dir && *a != self.memory_dir_given);
        // The copy lives under the state dir, where every file is private; apply gives a new
        // file the usual mode.
        self.limits.new_file_mode = 0o600;
        self
    }

    /// `raw` with a leading alias of the memory dir (see [`Sandbox::with_alias`]) replaced by
    /// the memory dir itself.
    fn unalias<'a>(&self, raw: &'a str) -> std::borrow::Cow<'a, str> {
        for alias in &self.alias {
            let Some(prefix) = alias.to_str() else {
                continue;
            };
            if let Some(rest) = raw.strip_prefix(prefix) {
                if rest.is_empty() || rest.starts_with('/') {
                    return std::borrow::Cow::Owned(format!("{}{rest}", self.memory_dir.display()));
                }
            }
        }
        std::borrow::Cow::Borrowed(raw)
    }

    /// Tool output with the staging copy's paths shown as the real memory dir's.
    fn realias(&self, text: String) -> String {
        let Some(real) = self.alias.first().and_then(|a| a.to_str()) else {
            return text;
        };
        let mut text = text;
        for shown in [&self.memory_dir, &self.memory_dir_given] {
            if let Some(staging) = shown.to_str().filter(|s| text.contains(*s)) {
                text = text.replace(staging, real);
            }
        }
        text
    }

    /// Adjusts the caps (the shell timeout shrinks as the run's deadline nears).
    pub fn set_shell_timeout(&mut self, timeout: Duration) {
        self.limits.shell_timeout = timeout;
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The five tools, as the model sees them; each input schema is derived from the struct
    /// the tool parses its input into ([`input`]).
    pub fn tool_specs() -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: "shell".into(),
                description: "Run one read-only command line: only ls, find, grep, cat, stat, wc, head and \
                    tail, optionally joined with |. No shell: no redirects, ;, &&, ||, &, $VAR, $(...), \
                    backticks, globs (use find -name) or env assignments; find without -exec/-delete/-fprint*. \
                    Every path must be inside the memory directory or the other readable directories. \
                    Runs in the memory directory, with a timeout and an output cap."
                    .into(),
                input_schema: input::schema_of::<input::ShellInput>(),
            },
            ToolSpec {
                name: "read_file".into(),
                description: "Read a text file inside the readable directories (memory files, session \
                    digests, transcripts), numbered like cat -n. offset is the first line (1-based), \
                    limit the number of lines."
                    .into(),
                input_schema: input::schema_of::<input::ReadFileInput>(),
            },
            ToolSpec {
                name: "write_file".into(),
                description: "Create or replace a .md file inside the memory directory with the given content. \
                    sources: where its new or changed facts come from, each {session, quote}: a session \
                    id and a short exact quote (at most 300 characters) from that session's transcript; \
                    each is checked and the result says which could not be verified."
                    .into(),
                input_schema: input::schema_of::<input::WriteFileInput>(),
            },
            ToolSpec {
                name: "edit_file".into(),
                description: "Replace the one exact occurrence of old_string with new_string in a .md file \
                    inside the memory directory; old_string must occur exactly once. sources: as for \
                    write_file."
                    .into(),
                input_schema: input::schema_of::<input::EditFileInput>(),
            },
            ToolSpec {
                name: "delete_file".into(),
                description: "Delete a .md file inside the memory directory. sources: what shows it is \
                    wrong or no longer needed, as for write_file."
                    .into(),
                input_schema: input::schema_of::<input::DeleteFileInput>(),
            },
        ]
    }

    /// Runs one tool call. Never panics on model input; every refusal is `is_error: true`.
    pub fn call(&mut self, name: &str, input: &Value, guard: &mut dyn WriteGuard) -> ToolResult {
        let mut result = self.dispatch(name, input, guard);
        if !self.alias.is_empty() {
            result.content = self.realias(result.content);
        }
        result
    }

    fn dispatch(&self, name: &str, input: &Value, guard: &mut dyn WriteGuard) -> ToolResult {
        let Some(input) = input.as_object() else {
            return ToolResult::error(match input {
                // What a weak model wrote where the JSON arguments belong.
                Value::String(raw) => format!(
                    "{name}: the arguments must be a JSON object, not the text {:?}; call it \
again with JSON arguments",
                    raw.chars().take(200).collect::<String>()
                ),
                _ => format!("{name}: the input must be a JSON object"),
            });
        };
        match name {
            "shell" => parsed(name, input, |i: input::ShellInput| shell::run(self, &i.command)),
            "read_file" => parsed(name, input, |i| files::read_file(self, &i)),
            "write_file" => parsed(name, input, |i| files::write_file(self, &i, guard)),
            "edit_file" => parsed(name, input, |i| files::edit_file(self, &i, guard)),
            "delete_file" => parsed(name, input, |i| files::delete_file(self, &i, guard)),
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
    /// Whether the agent may read `canonical` (what `raw` resolved to): inside a root (or one
    /// of the files readable on their own) and not a secret-bearing file. The refusal says
    /// why, for the model.
    fn check_readable(&self, raw: &str, canonical: &Path) -> Result<(), String> {
        if self.files.iter().any(|file| canonical == file) {
            return Ok(());
        }
        let root = self
            .roots
            .iter()
            .filter(|root| canonical.starts_with(root))
            .max_by_key(|root| root.as_os_str().len());
        let Some(root) = root else {
            return Err(paths::outside_roots_message(self, raw, canonical));
        };
        let relative = canonical.strip_prefix(root).unwrap_or(canonical);
        match secrets::refusal(relative) {
            Some(why) => Err(format!(
                "{raw} is not readable: {why}; files that may hold secrets are never read"
            )),
            None => Ok(()),
        }
    }
}

/// Runs `tool` on its parsed input, or answers the parse's refusal as a tool error.
fn parsed<T: schemars::JsonSchema + serde::de::DeserializeOwned>(
    tool: &str,
    input: &serde_json::Map<String, Value>,
    run: impl FnOnce(T) -> ToolResult,
) -> ToolResult {
    match input::parse(tool, input) {
        Ok(parsed) => run(parsed),
        Err(refusal) => ToolResult::error(refusal),
    }
}
