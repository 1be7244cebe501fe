//! `--provider claude`: the user's own Claude Code, run in print mode (`claude -p`), as the
//! model. This is how a user who logs in with a subscription (and has no API key) reaches
//! their model: the client authenticates itself; dreamkit never reads its credentials or
//! settings files, and never passes `--bare` (which skips the login the client keeps).
//!
//! Every run is sealed off from the user's set-up: an empty private working folder, our own
//! system prompt, no built-in tool, no MCP server but ours, no slash command, no hook (theirs
//! or ours: a Stop hook must not start itself again), no auto-memory, no CLAUDE.md, and no
//! session written (a dream must never create the sessions the next gate counts).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use super::{ErrorKind, ModelError, Usage};
use crate::claude::transcript::cut_chars;
use crate::claude::Env;
use crate::cli::Failure;

/// The oldest client version the tests run against: an older one is refused.
pub const OLDEST_TESTED: &str = "2.1.332";
/// The small/fast model, as the client names it (it resolves the alias itself).
pub const SMALL_MODEL: &str = "haiku";
/// The MCP server name of dream-run's tools: the client calls them `mcp__dreamkit__<tool>`.
pub const MCP_SERVER: &str = "dreamkit";
/// Where the client's version is remembered, beside the response-format cache.
pub const VERSION_FILE: &str = "claude-client.json";
/// The settings every run carries: no hook fires inside (so a Stop hook cannot start itself
/// again), no auto-memory.
pub const SETTINGS: &str = r#"{"disableAllHooks":true,"autoMemoryEnabled":false}"#;
/// Variables the child must not inherit: a hook inherits them from the session that ran it,
/// and they would tie the child to that session.
const REMOVED_VARS: [&str; 3] = [
    "CLAUDECODE",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_CODE_ENTRYPOINT",
];
/// The most a one-shot answer's stdout may hold.
pub const ONE_SHOT_STDOUT_CAP: usize = 4 * 1024 * 1024;
/// The most one line of stdout may hold (a stream event, or the one-shot result).
pub const LINE_CAP: usize = 4 * 1024 * 1024;

/// The resolved client: which binary, its version, and how its runs are bounded.
#[derive(Debug, Clone)]
pub struct PrintMode {
    pub bin: PathBuf,
    pub version: String,
    /// dreamkit's state dir: the private working folders are made under it.
    pub state_dir: PathBuf,
    /// `--model`, or the small model's alias; `None`: the client's own default.
    pub model: Option<String>,
    pub retries: u32,
    pub request_timeout: Duration,
    pub deadline: Duration,
    /// The child's environment (see [`PrintMode::child_env`]).
    pub child_env: Vec<(OsString, OsString)>,
}

/// One run of the client.
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    pub system_prompt: String,
    pub max_turns: u32,
    /// Structured output: the client answers through a synthetic tool, the object lands in
    /// the result's `structured_output`.
    pub json_schema: Option<Value>,
    /// `stream-json` (one event a line, `--verbose`) instead of one `json` result.
    pub stream: bool,
    /// The `--mcp-config` JSON (with `--strict-mcp-config`, the only server).
    pub mcp_config: Option<String>,
    /// `--allowedTools`: exact names.
    pub allowed_tools: Vec<String>,
    /// The most output tokens of one answer (`CLAUDE_CODE_MAX_OUTPUT_TOKENS`).
    pub max_output_tokens: Option<u32>,
    /// `--effort`: `low` for a short answer under a small output cap, where thinking would
    /// spend the tokens the answer needs.
    pub effort: Option<&'static str>,
}

impl PrintMode {
    /// Finds the client (`DREAMKIT_CLAUDE_BIN`, else `claude` on PATH) and checks its version
    /// once (remembered per binary, by size and mtime, in [`VERSION_FILE`]).
    pub fn resolve(
        env: &Env,
        model: Option<String>,
        retries: u32,
        request_timeout: Duration,
        deadline: Duration,
    ) -> Result<PrintMode, Failure> {
        let home = crate::claude::paths::home_dir(env);
        let state_dir = crate::claude::paths::state_home(env, home.as_deref())?.join("dreamkit");
        let bin = find_client(env)?;
        let version = version_of(&bin, &state_dir.join(VERSION_FILE))?;
        if older(&version, OLDEST_TESTED) {
            return Err(Failure::environment(format!(
                "Claude Code {version} at {} is older than {OLDEST_TESTED}, the oldest dreamkit is \
tested with: update it (claude update) or use another --provider",
                bin.display()
            )));
        }
        let mut print_mode = PrintMode {
            bin,
            version,
            state_dir,
            model: model.filter(|m| !m.is_empty()),
            retries,
            request_timeout,
            deadline,
            child_env: Vec::new(),
        };
        print_mode.child_env = print_mode.child_env(env);
        Ok(print_mode)
    }

    /// The model as reported: the one asked for, or the client's default.
    pub fn model_name(&self) -> String {
        self.model
            .clone()
            .unwrap_or_else(|| "Claude Code's default model".to_string())
    }

    /// The command line after the binary.
    pub fn args(&self, run: &Invocation) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["-p".into(), "--output-format".into()];
        if run.stream {
            // Print mode streams events only with --verbose.
            args.extend(["stream-json".into(), "--verbose".into()]);
        } else {
            args.push("json".into());
        }
        args.extend([
            "--system-prompt".into(),
            run.system_prompt.clone().into(),
            // No built-in tool; MCP tools (ours) are allowed by name below.
            "--tools".into(),
            "".into(),
            "--strict-mcp-config".into(),
        ]);
        if let Some(config) = &run.mcp_config {
            args.extend(["--mcp-config".into(), config.clone().into()]);
        }
        if !run.allowed_tools.is_empty() {
            args.extend(["--allowedTools".into(), run.allowed_tools.join(",").into()]);
        }
        args.extend([
            "--disable-slash-commands".into(),
            "--no-session-persistence".into(),
            "--settings".into(),
            SETTINGS.into(),
            "--permission-mode".into(),
            "dontAsk".into(),
            "--max-turns".into(),
            run.max_turns.max(1).to_string().into(),
        ]);
        if let Some(schema) = &run.json_schema {
            args.extend(["--json-schema".into(), schema.to_string().into()]);
        }
        if let Some(model) = &self.model {
            args.extend(["--model".into(), model.clone().into()]);
        }
        if let Some(effort) = run.effort {
            args.extend(["--effort".into(), effort.into()]);
        }
        args
    }

    /// The child's environment: the caller's, less the session ties, plus the switches that
    /// keep the run to itself.
    pub fn child_env(&self, env: &Env) -> Vec<(OsString, OsString)> {
        let mut vars: Vec<(OsString, OsString)> = env
            .vars()
            .filter(|(name, _)| !REMOVED_VARS.iter().any(|r| OsStr::new(r) == *name))
            .filter(|(name, _)| !SET_VARS.iter().any(|s| OsStr::new(s) == *name))
            .map(|(k, v)| (k.to_os_string(), v.to_os_string()))
            .collect();
        for name in SET_VARS {
            let value = match name {
                "CLAUDE_CODE_MAX_RETRIES" => self.retries.to_string(),
                "API_TIMEOUT_MS" => self.request_timeout.as_millis().max(1).to_string(),
                _ => "1".to_string(),
            };
            vars.push((name.into(), value.into()));
        }
        vars
    }

    /// The command, ready to spawn in `cwd`: its own process group (so a timeout or a signal
    /// ends everything it started), killed with us, stdin/stdout/stderr piped.
    pub fn command(&self, run: &Invocation, cwd: &Path) -> std::process::Command {
        use std::os::unix::process::CommandExt;
        let mut command = std::process::Command::new(&self.bin);
        command
            .args(self.args(run))
            .env_clear()
            .envs(self.child_env.iter().map(|(k, v)| (k, v)))
            .envs(
                run.max_output_tokens
                    .map(|n| ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", n.to_string())),
            )
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        crate::cli::signals::die_with_parent(&mut command);
        command
    }

    /// An empty private folder for one run, removed when dropped. The empty folders that runs
    /// killed outright left behind (a day old) go first.
    pub fn work_dir(&self) -> Result<tempfile::TempDir, Failure> {
        let parent = self.state_dir.join("print-mode");
        crate::files::create_private_dir(&parent)
            .map_err(|e| Failure::io("create", &parent, &e))?;
        sweep_left_behind(&parent);
        tempfile::Builder::new()
            .prefix("run-")
            .tempdir_in(&parent)
            .map_err(|e| Failure::io("create a folder in", &parent, &e))
    }

    /// One question, one answer: the prompt on stdin, one `json` result on stdout.
    pub async fn one_shot(&self, run: &Invocation, prompt: &str) -> Result<Answer, ModelError> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = self.work_dir().map_err(|f| {
            ModelError::new(ErrorKind::Network, format!("cannot run Claude Code: {f}"))
        })?;
        let mut command = tokio::process::Command::from(self.command(run, dir.path()));
        command.kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| spawn_error(&self.bin, &e))?;
        // Dropped (a timeout, a signal, the caller gone): the whole group goes.
        let group = GroupGuard::of(child.id());
        let mut stdin = child.stdin.take();
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let exchange = async {
            if let Some(mut input) = stdin.take() {
                // A client that exits before reading its prompt is judged by what it printed.
                let _ = input.write_all(prompt.as_bytes()).await;
                drop(input);
            }
            let read_out = async {
                let mut kept = Vec::new();
                if let Some(out) = stdout.as_mut() {
                    let mut limited = out.take(ONE_SHOT_STDOUT_CAP as u64 + 1);
                    let _ = limited.read_to_end(&mut kept).await;
                }
                if kept.len() > ONE_SHOT_STDOUT_CAP {
                    // A client that never stops printing is stopped, not waited for.
                    group.kill();
                }
                kept
            };
            let read_err = async {
                let mut kept = Vec::new();
                if let Some(err) = stderr.as_mut() {
                    let _ = err.take(64 * 1024).read_to_end(&mut kept).await;
                    // The rest is drained, so the client never blocks on a full pipe.
                    let _ = tokio::io::copy(err, &mut tokio::io::sink()).await;
                }
                kept
            };
            let (out, err) = tokio::join!(read_out, read_err);
            let status = child.wait().await;
            (out, err, status)
        };
        let Ok((out, err, status)) = tokio::time::timeout(self.deadline, exchange).await else {
            return Err(ModelError::new(
                ErrorKind::Timeout,
                format!(
                    "Claude Code did not answer within --deadline {}s",
                    self.deadline.as_secs()
                ),
            ));
        };
        group.reaped();
        if out.len() > ONE_SHOT_STDOUT_CAP {
            return Err(ModelError::new(
                ErrorKind::MalformedResponse,
                format!(
                    "Claude Code printed more than {} MiB",
                    ONE_SHOT_STDOUT_CAP / 1024 / 1024
                ),
            ));
        }
        let code = status.ok().and_then(|s| s.code());
        let text = String::from_utf8_lossy(&out);
        let result = text
            .lines()
            .rev()
            .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
            .find(|v| v["type"] == "result");
        match result {
            Some(result) => read_result_for(&result, run.json_schema.is_some()),
            None => Err(no_result(code, &String::from_utf8_lossy(&err))),
        }
    }
}

/// How old a run folder must be before it counts as left behind: far past any run's deadline.
const LEFT_BEHIND_AGE: Duration = Duration::from_secs(24 * 3600);

/// Removes the `run-*` folders under `parent` that are empty and a day old: a run killed
/// with SIGKILL cannot remove its own. A folder that is not empty is not ours to judge.
fn sweep_left_behind(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("run-") {
            continue;
        }
        let old = std::fs::symlink_metadata(entry.path())
            .ok()
            .filter(std::fs::Metadata::is_dir)
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > LEFT_BEHIND_AGE);
        if old {
            // Fails, harmlessly, on a folder that is not empty.
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// The variables set for every run (after the caller's are removed).
const SET_VARS: [&str; 7] = [
    // An inherited `=0` would force auto-memory on.
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY",
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "DISABLE_AUTOUPDATER",
    "CLAUDE_CODE_MAX_RETRIES",
    "API_TIMEOUT_MS",
    // The client's own telemetry and error reports stay off in a background run.
    "DISABLE_TELEMETRY",
];

/// What a successful run answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The final text (`result`), or the structured object as JSON text.
    pub text: String,
    pub structured: Option<Value>,
    pub usage: Usage,
    pub turns: u32,
}

/// The usage of a result or an assistant message: the four counters, and the cost when the
/// client states it.
pub fn usage_of(value: &Value, cost: Option<f64>) -> Usage {
    let n = |key: &str| value.get(key).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_creation_input_tokens: n("cache_creation_input_tokens"),
        cache_read_input_tokens: n("cache_read_input_tokens"),
        cost_usd: cost,
    }
}

/// Reads the `result` event: the answer, or the failure it states. The client's exit code
/// alone says too little (it is 1 for every failure); its fields say which. An API error is
/// `subtype: "success"` with `is_error: true` (2.1.332), so `is_error` decides.
pub fn read_result(result: &Value) -> Result<Answer, ModelError> {
    read_result_for(result, false)
}

/// [`read_result`] of a run that asked for structured output: a success without
/// `structured_output` (the model answered in text, past the client's reminder) is not an
/// answer.
pub fn read_result_for(result: &Value, structured_asked: bool) -> Result<Answer, ModelError> {
    let usage = usage_of(
        &result["usage"],
        result.get("total_cost_usd").and_then(Value::as_f64),
    );
    let turns = result["num_turns"]
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0);
    let subtype = result["subtype"].as_str().unwrap_or("");
    let is_error = result["is_error"].as_bool().unwrap_or(true);
    let text = match &result["result"] {
        Value::String(s) => s.clone(),
        _ => String::new(),
    };
    if subtype == "success" && !is_error {
        let structured = result
            .get("structured_output")
            .filter(|v| !v.is_null())
            .cloned();
        if structured.is_none() && structured_asked {
            return Err(ModelError::new(
                ErrorKind::MalformedResponse,
                "the model answered in text, not through the structured output it was asked for",
            ));
        }
        let text = structured.as_ref().map_or(text, Value::to_string);
        return Ok(Answer {
            text,
            structured,
            usage,
            turns,
        });
    }
    Err(result_error(result, subtype, &text))
}

/// The failure a `result` states, in our kinds.
fn result_error(result: &Value, subtype: &str, text: &str) -> ModelError {
    let status = result["api_error_status"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .or_else(|| status_in(text));
    let errors: Vec<&str> = result["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let said = if text.is_empty() {
        errors.join("; ")
    } else {
        text.to_string()
    };
    let said = crate::cli::redact::redact(&said).into_owned();
    let kind = if let Some(status) = status {
        ErrorKind::from_status(status)
    } else if said.contains("Not logged in") || said.contains("/login") {
        ErrorKind::Auth
    } else if subtype == "error_max_turns" || subtype == "error_max_structured_output_retries" {
        ErrorKind::MalformedResponse
    } else if result["api_error"] == "connection_failed"
        || said.contains("Connection error")
        || said.contains("Connection to the API was lost")
        || said.contains("ECONNREFUSED")
        || said.contains("fetch failed")
        || said.contains("Unable to connect")
    {
        ErrorKind::Network
    } else if said.contains("timed out") || said.contains("Request timed out") {
        ErrorKind::Timeout
    } else {
        ErrorKind::Server
    };
    let message = match (kind, subtype) {
        (ErrorKind::Auth, _) if status.is_none() => format!(
            "Claude Code is not logged in: run `claude` once and log in ({})",
            first_line(&said)
        ),
        (_, "error_max_turns") => format!(
            "Claude Code stopped at --max-turns (error_max_turns){}",
            suffix(&said)
        ),
        (_, "error_max_structured_output_retries") => format!(
            "the model never gave the structured answer (error_max_structured_output_retries){}",
            suffix(&said)
        ),
        _ if said.is_empty() => format!("Claude Code failed ({subtype})"),
        _ => format!("Claude Code: {}", first_line(&said)),
    };
    ModelError {
        kind,
        status,
        message: cut_chars(&message, 500),
        attempts: 1,
        retry_after: None,
    }
}

/// `subtype` of a result that stopped at `--max-turns`.
pub fn is_max_turns(result: &Value) -> bool {
    result["subtype"] == "error_max_turns"
}

/// The HTTP status in the client's `API Error: 529 {...}` text.
fn status_in(text: &str) -> Option<u16> {
    let rest = text.split("API Error: ").nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|s| (400..600).contains(s))
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim()
}

fn suffix(said: &str) -> String {
    if said.is_empty() {
        String::new()
    } else {
        format!(": {}", first_line(said))
    }
}

/// No `result` event: the client died, or is not Claude Code.
pub fn no_result(code: Option<i32>, stderr: &str) -> ModelError {
    let said = crate::cli::redact::redact(first_line(stderr)).into_owned();
    let how = code.map_or_else(|| "was killed".to_string(), |c| format!("exited {c}"));
    ModelError::new(
        ErrorKind::MalformedResponse,
        cut_chars(
            &if said.is_empty() {
                format!("Claude Code {how} without a result")
            } else {
                format!("Claude Code {how} without a result: {said}")
            },
            500,
        ),
    )
}

fn spawn_error(bin: &Path, e: &std::io::Error) -> ModelError {
    ModelError::new(
        ErrorKind::Network,
        format!("cannot start Claude Code ({}): {e}", bin.display()),
    )
}

/// Kills a child's process group when dropped before the child was reaped: a timeout, a
/// signal or a dropped future never leaves the client (or what it started) running.
pub struct GroupGuard {
    group: Option<rustix::process::Pid>,
}

impl GroupGuard {
    pub fn of(pid: Option<u32>) -> GroupGuard {
        GroupGuard {
            group: pid
                .and_then(|p| i32::try_from(p).ok())
                .and_then(rustix::process::Pid::from_raw),
        }
    }

    /// The leader was reaped: its group id may be reused, so it is not signalled any more.
    /// What it started is on its own by then (the client waits for its MCP servers).
    pub fn reaped(mut self) {
        self.group = None;
    }

    /// Ends the group now (SIGTERM, then SIGKILL shortly after if the leader lingers).
    pub fn kill(&self) {
        if let Some(group) = self.group {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::TERM);
            std::thread::sleep(Duration::from_millis(50));
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `DREAMKIT_CLAUDE_BIN`, else `claude` on PATH.
pub fn find_client(env: &Env) -> Result<PathBuf, Failure> {
    if let Some(bin) = env.get("DREAMKIT_CLAUDE_BIN") {
        let bin = PathBuf::from(bin);
        return if is_executable(&bin) {
            Ok(bin)
        } else {
            Err(Failure::environment(format!(
                "DREAMKIT_CLAUDE_BIN={} is not an executable file",
                bin.display()
            )))
        };
    }
    let path = env.get("PATH").unwrap_or_default();
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("claude"))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            Failure::environment(
                "--provider claude needs Claude Code: no `claude` on PATH (install it, or set \
DREAMKIT_CLAUDE_BIN to its path)",
            )
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The client's version: remembered per binary (path, size, mtime); else `--version`.
fn version_of(bin: &Path, cache: &Path) -> Result<String, Failure> {
    let meta = std::fs::metadata(bin).map_err(|e| Failure::io("read", bin, &e))?;
    let key = format!(
        "{}:{}:{}",
        bin.display(),
        meta.len(),
        meta.modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos())
    );
    let known = crate::files::read_regular_capped(cache, 64 * 1024)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .filter(|v| v["key"] == key.as_str())
        .and_then(|v| v["version"].as_str().map(str::to_string));
    if let Some(version) = known {
        return Ok(version);
    }
    let version = ask_version(bin)?;
    if let Some(dir) = cache.parent() {
        if crate::files::create_private_dir(dir).is_ok() {
            let record = serde_json::json!({"key": key, "version": version});
            let _ = crate::files::write_atomic(cache, record.to_string().as_bytes(), 0o600);
        }
    }
    Ok(version)
}

/// `claude --version` (`2.1.332 (Claude Code)`), bounded to 30 s.
fn ask_version(bin: &Path) -> Result<String, Failure> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(bin);
    command
        .arg("--version")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    crate::cli::signals::die_with_parent(&mut command);
    let mut child = command.spawn().map_err(|e| {
        Failure::environment(format!("cannot run {} --version: {e}", bin.display()))
    })?;
    let guard = GroupGuard::of(Some(child.id()));
    let mut out = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut kept = Vec::new();
        if let Some(out) = out.as_mut() {
            let _ = out.take(4096).read_to_end(&mut kept);
        }
        kept
    });
    let started = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => {
                drop(guard);
                let _ = child.wait();
                return Err(Failure::environment(format!(
                    "{} --version did not answer within 30s",
                    bin.display()
                )));
            }
        }
    }
    guard.reaped();
    let out = reader.join().unwrap_or_default();
    let text = String::from_utf8_lossy(&out);
    parse_version(&text).ok_or_else(|| {
        Failure::environment(format!(
            "{} --version said {:?}, not a Claude Code version",
            bin.display(),
            cut_chars(first_line(&text), 80)
        ))
    })
}

/// `2.1.332 (Claude Code)` -> `2.1.332`.
fn parse_version(text: &str) -> Option<String> {
    let word = text.split_whitespace().next()?;
    let parts: Vec<&str> = word.split('.').collect();
    (parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
    .then(|| word.to_string())
}

/// Whether version `a` is older than `b` (both `x.y.z`).
fn older(a: &str, b: &str) -> bool {
    let parse = |v: &str| -> Vec<u64> { v.split('.').filter_map(|p| p.parse().ok()).collect() };
    parse(a) < parse(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn print_mode() -> PrintMode {
        PrintMode {
            bin: "/usr/bin/claude".into(),
            version: "2.1.332".into(),
            state_dir: "/tmp/state/dreamkit".into(),
            model: Some(SMALL_MODEL.into()),
            retries: 2,
            request_timeout: Duration::from_secs(60),
            deadline: Duration::from_secs(180),
            child_env: Vec::new(),
        }
    }

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn value_after<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
        let at = args.iter().position(|a| a == flag)?;
        args.get(at + 1).map(String::as_str)
    }

    #[test]
    fn a_one_shot_run_is_sealed_off() {
        let run = Invocation {
            system_prompt: "be brief".into(),
            max_turns: 2,
            effort: Some("low"),
            ..Invocation::default()
        };
        let args = strings(&print_mode().args(&run));
        assert_eq!(&args[..3], ["-p", "--output-format", "json"]);
        for (flag, value) in [
            ("--system-prompt", "be brief"),
            ("--tools", ""),
            ("--settings", SETTINGS),
            ("--permission-mode", "dontAsk"),
            ("--max-turns", "2"),
            ("--model", "haiku"),
            ("--effort", "low"),
        ] {
            assert_eq!(value_after(&args, flag), Some(value), "{flag} in {args:?}");
        }
        for flag in [
            "--strict-mcp-config",
            "--disable-slash-commands",
            "--no-session-persistence",
        ] {
            assert!(args.iter().any(|a| a == flag), "{flag} missing: {args:?}");
        }
        for absent in [
            "--bare",
            "--verbose",
            "--mcp-config",
            "--json-schema",
            "--allowedTools",
        ] {
            assert!(!args.iter().any(|a| a == absent), "{absent} in {args:?}");
        }
        let settings: Value = serde_json::from_str(SETTINGS).unwrap();
        assert_eq!(
            settings,
            json!({"disableAllHooks": true, "autoMemoryEnabled": false})
        );
    }

    #[test]
    fn structured_and_streamed_runs_add_their_flags() {
        let schema = json!({"type": "object"});
        let run = Invocation {
            system_prompt: "s".into(),
            max_turns: 40,
            json_schema: Some(schema.clone()),
            stream: true,
            mcp_config: Some("{\"mcpServers\":{}}".into()),
            allowed_tools: vec![
                "mcp__dreamkit__read_file".into(),
                "mcp__dreamkit__shell".into(),
            ],
            max_output_tokens: Some(8192),
            effort: None,
        };
        let main = PrintMode {
            model: None,
            ..print_mode()
        };
        let args = strings(&main.args(&run));
        assert_eq!(
            &args[..4],
            ["-p", "--output-format", "stream-json", "--verbose"]
        );
        assert_eq!(
            value_after(&args, "--json-schema"),
            Some(schema.to_string().as_str())
        );
        assert_eq!(
            value_after(&args, "--mcp-config"),
            Some("{\"mcpServers\":{}}")
        );
        assert_eq!(
            value_after(&args, "--allowedTools"),
            Some("mcp__dreamkit__read_file,mcp__dreamkit__shell")
        );
        assert_eq!(value_after(&args, "--max-turns"), Some("40"));
        // The main model: the client's default unless --model says; its effort too.
        assert!(
            !args.iter().any(|a| a == "--model" || a == "--effort"),
            "{args:?}"
        );
        // The output cap is the environment's, not a flag.
        let command = main.command(&run, Path::new("/"));
        let cap = command
            .get_envs()
            .find(|(k, _)| *k == "CLAUDE_CODE_MAX_OUTPUT_TOKENS")
            .and_then(|(_, v)| v);
        assert_eq!(cap, Some(OsStr::new("8192")));
    }

    #[test]
    fn the_environment_drops_the_session_ties_and_forces_the_switches() {
        let env = Env::from_pairs([
            ("HOME", "/home/u"),
            ("ANTHROPIC_API_KEY", "sk-ant-x"),
            ("CLAUDECODE", "1"),
            ("CLAUDE_CODE_SESSION_ID", "abc"),
            ("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "0"),
            ("CLAUDE_CODE_MAX_RETRIES", "10"),
        ]);
        let vars: std::collections::BTreeMap<String, String> = print_mode()
            .child_env(&env)
            .into_iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect();
        assert_eq!(vars.get("HOME").map(String::as_str), Some("/home/u"));
        // The client authenticates itself: an API key it would use is passed through.
        assert_eq!(
            vars.get("ANTHROPIC_API_KEY").map(String::as_str),
            Some("sk-ant-x")
        );
        assert!(!vars.contains_key("CLAUDECODE") && !vars.contains_key("CLAUDE_CODE_SESSION_ID"));
        for (name, value) in [
            ("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1"),
            ("CLAUDE_CODE_DISABLE_CLAUDE_MDS", "1"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("CLAUDE_CODE_MAX_RETRIES", "2"),
            ("API_TIMEOUT_MS", "60000"),
        ] {
            assert_eq!(vars.get(name).map(String::as_str), Some(value), "{name}");
        }
    }

    #[test]
    fn a_success_carries_text_usage_and_cost() {
        let result = json!({"type": "result", "subtype": "success", "is_error": false,
            "num_turns": 1, "result": "All done.", "total_cost_usd": 0.0123,
            "usage": {"input_tokens": 10, "output_tokens": 5,
                "cache_creation_input_tokens": 2, "cache_read_input_tokens": 3}});
        let answer = read_result(&result).unwrap();
        assert_eq!(answer.text, "All done.");
        assert_eq!(answer.turns, 1);
        assert_eq!(
            (answer.usage.input_tokens, answer.usage.output_tokens),
            (10, 5)
        );
        assert_eq!(answer.usage.cost_usd, Some(0.0123));
        let structured = json!({"type": "result", "subtype": "success", "is_error": false,
            "result": "", "structured_output": {"status": "ok"}, "usage": {}});
        let answer = read_result(&structured).unwrap();
        assert_eq!(answer.structured, Some(json!({"status": "ok"})));
        assert_eq!(answer.text, r#"{"status":"ok"}"#);
    }

    #[test]
    fn failures_map_onto_our_kinds() {
        let error = |fields: Value| {
            let mut result = json!({"type": "result", "subtype": "success", "is_error": true});
            result
                .as_object_mut()
                .unwrap()
                .extend(fields.as_object().unwrap().clone());
            read_result(&result).unwrap_err()
        };
        for (status, kind) in [
            (401, ErrorKind::Auth),
            (429, ErrorKind::RateLimited),
            (529, ErrorKind::Overloaded),
            (500, ErrorKind::Server),
            (400, ErrorKind::InvalidRequest),
        ] {
            let e = error(json!({"api_error_status": status, "result": "API Error"}));
            assert_eq!((e.kind, e.status), (kind, Some(status)), "{status}");
        }
        let e = error(json!({"result": "API Error: 529 {\"type\":\"error\"}"}));
        assert_eq!(e.kind, ErrorKind::Overloaded);
        let e = error(json!({"result": "Not logged in · Please run /login"}));
        assert_eq!(e.kind, ErrorKind::Auth);
        assert!(
            e.message.contains("run `claude` once and log in"),
            "{}",
            e.message
        );
        let e = error(json!({"subtype": "error_max_turns", "errors": []}));
        assert_eq!(e.kind, ErrorKind::MalformedResponse);
        assert!(e.message.contains("error_max_turns"));
        let e = error(json!({"subtype": "error_max_structured_output_retries"}));
        assert!(e.message.contains("structured"), "{}", e.message);
        let e = error(json!({"result": "API Error: Connection error."}));
        assert_eq!(e.kind, ErrorKind::Network);
        // A credential of the environment the client echoes is never repeated.
        crate::cli::redact::register("sk-ant-print-mode-echoed-4821");
        let e = error(json!({"result": "API Error: 401 key sk-ant-print-mode-echoed-4821 bad"}));
        assert!(!e.message.contains("echoed-4821"), "{}", e.message);
    }

    /// The results the real client 2.1.332 printed (tests/fixtures/claude-code-provider).
    fn fixture(name: &str) -> Value {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude-code-provider")
            .join(format!("{name}.json"));
        let case: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let stdout = case["stdout"].as_str().unwrap();
        stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .rfind(|v| v["type"] == "result")
            .unwrap_or_else(|| panic!("{name}: no result"))
    }

    #[test]
    fn the_real_clients_results_map_onto_our_kinds() {
        for (name, kind, status) in [
            ("error-401", ErrorKind::Auth, Some(401)),
            ("error-429", ErrorKind::RateLimited, Some(429)),
            ("error-529", ErrorKind::Overloaded, Some(529)),
            ("error-500", ErrorKind::Server, Some(500)),
            ("error-400", ErrorKind::InvalidRequest, Some(400)),
            ("error-cut-stream", ErrorKind::Network, None),
            ("error-no-credential", ErrorKind::Auth, None),
            ("max-turns-tool-use", ErrorKind::MalformedResponse, None),
            (
                "structured-invalid-input",
                ErrorKind::MalformedResponse,
                None,
            ),
            (
                "structured-never-called-max-turns-1",
                ErrorKind::MalformedResponse,
                None,
            ),
        ] {
            let e = read_result(&fixture(name)).unwrap_err();
            assert_eq!((e.kind, e.status), (kind, status), "{name}: {}", e.message);
            assert!(!e.message.is_empty(), "{name}");
        }
        let login = read_result(&fixture("error-no-credential")).unwrap_err();
        assert!(login.message.contains("log in"), "{}", login.message);
        assert!(is_max_turns(&fixture("max-turns-tool-use")));
        let text = read_result(&fixture("oneshot-text")).unwrap();
        assert!(!text.text.is_empty() && text.usage.input_tokens > 0);
        assert!(text.usage.cost_usd.is_some_and(|c| c > 0.0));
        let ok = read_result_for(&fixture("structured-ok"), true).unwrap();
        assert_eq!(ok.structured, Some(json!({"status": "ok"})));
        // A success in text where structure was asked for is not an answer.
        let never = read_result_for(&fixture("structured-never-called"), true).unwrap_err();
        assert_eq!(never.kind, ErrorKind::MalformedResponse);
        // Retried by the client until it got through: a success.
        for name in [
            "error-429-retry-then-ok",
            "error-529-retry-then-ok",
            "error-cut-stream-then-ok",
        ] {
            assert!(read_result(&fixture(name)).is_ok(), "{name}");
        }
    }

    #[test]
    fn no_result_names_the_exit() {
        let e = no_result(Some(1), "boom\nmore");
        assert_eq!(e.kind, ErrorKind::MalformedResponse);
        assert!(
            e.message.contains("exited 1") && e.message.contains("boom"),
            "{}",
            e.message
        );
        assert!(no_result(None, "").message.contains("was killed"));
    }

    #[test]
    fn versions() {
        assert_eq!(
            parse_version("2.1.332 (Claude Code)\n").as_deref(),
            Some("2.1.332")
        );
        assert_eq!(parse_version("v2"), None);
        assert_eq!(parse_version(""), None);
        assert!(older("2.1.9", "2.1.332") && older("1.9.999", "2.1.332"));
        assert!(!older("2.1.332", "2.1.332") && !older("2.2.0", "2.1.332"));
    }

    #[test]
    fn the_client_is_found_by_variable_then_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("claude");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        let path = dir.path().display().to_string();
        let none = Env::from_pairs([("PATH", "/nonexistent")]);
        assert_eq!(find_client(&none).unwrap_err().kind(), "environment");
        let not_exec = Env::from_pairs([("PATH", path.as_str())]);
        assert_eq!(find_client(&not_exec).unwrap_err().kind(), "environment");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find_client(&not_exec).unwrap(), bin);
        let named = Env::from_pairs([("DREAMKIT_CLAUDE_BIN", "/nonexistent/claude")]);
        let e = find_client(&named).unwrap_err();
        assert!(e.to_string().contains("DREAMKIT_CLAUDE_BIN"), "{e}");
    }
}
