//! The real Claude Code client (the pinned 2.1.332, installed by
//! `scripts/claude-code/install.sh`), run with no network: each run goes through
//! `scripts/claude-code/run-offline.sh`, which starts a fresh network namespace (`unshare -n`,
//! loopback up), the scripted Messages API stub (`scripts/claude-code/stub.py`, SSE on
//! `POST /v1/messages?beta=true`) inside it, and the client with a temporary HOME.
//!
//! The client is found through `DREAMKIT_TEST_CLAUDE` (the path of `bin/claude.exe`, which
//! `make test-claude` sets). Without it a test prints `SKIP <test>: <why>` on stderr and passes, unless
//! `DREAMKIT_TEST_CLAUDE_REQUIRED=1`, when it fails.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::support::{bin_path, ClaudeHome, Run};

/// The client version these tests pin (and `--version` of every tool names).
pub(crate) const CLIENT_VERSION: &str = "2.1.332";

/// The client's executable, or `None` after printing why the test skips.
pub(crate) fn client(test: &str) -> Option<PathBuf> {
    let required = std::env::var("DREAMKIT_TEST_CLAUDE_REQUIRED").as_deref() == Ok("1");
    let why = match std::env::var_os("DREAMKIT_TEST_CLAUDE") {
        None => "DREAMKIT_TEST_CLAUDE is not set (run `make test-claude`)".to_string(),
        Some(path) => {
            let path = PathBuf::from(path);
            if path.is_file() {
                return Some(path);
            }
            format!("DREAMKIT_TEST_CLAUDE={} is not a file", path.display())
        }
    };
    assert!(!required, "DREAMKIT_TEST_CLAUDE_REQUIRED=1 but {why}");
    crate::support::skip(test, &why);
    None
}

pub(crate) fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's plugin folder.
pub(crate) fn plugin_dir() -> PathBuf {
    repo_root().join("plugin")
}

/// A PATH with the system directories and python3 (the stub needs it), but no dreamkit.
pub(crate) fn system_path() -> String {
    let mut dirs: Vec<String> = Vec::new();
    if let Some(python) = which("python3") {
        dirs.push(python.parent().unwrap().display().to_string());
    }
    for dir in [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ] {
        dirs.push(dir.to_string());
    }
    dirs.join(":")
}

/// `system_path()` with the binaries under test in front.
pub(crate) fn dreamkit_path() -> String {
    let bin_dir = bin_path("dream-run").parent().unwrap().to_path_buf();
    format!("{}:{}", bin_dir.display(), system_path())
}

/// The first `name` on the test process's PATH.
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// `name` on `path` (a PATH value), as a shell would find it.
pub(crate) fn on_path(path: &str, name: &str) -> bool {
    std::env::split_paths(&OsString::from(path)).any(|dir| dir.join(name).is_file())
}

/// One client setup: a temporary home (the client's HOME and dreamkit's), a stub request log.
pub(crate) struct Offline {
    pub claude: PathBuf,
    pub path: String,
    pub log: PathBuf,
}

impl Offline {
    pub(crate) fn new(claude: PathBuf, home: &ClaudeHome) -> Offline {
        Offline {
            claude,
            path: dreamkit_path(),
            log: home.root.join("stub-requests.jsonl"),
        }
    }

    /// The client run from `cwd` with `args`, the stub answering `replies` (a JSON list in
    /// stub.py's format; empty: its default text), to be checked: it must exit 0, and its
    /// stderr must be the offline runner's one line and nothing else (the client said nothing
    /// there, and the runner did run it). The caller says what stdout must hold.
    pub(crate) fn claude<'a>(
        &self,
        home: &ClaudeHome,
        cwd: &Path,
        replies: &Value,
        args: &[&str],
    ) -> Run<'a> {
        let mut cmd = self.runner(home, cwd, replies);
        cmd.arg("--").env("CLAUDE_BIN", &self.claude);
        Run::command(cmd, "run-offline.sh -- claude")
            .args(args)
            .stdin_from(Stdio::null())
            // The runner kills the client after CC_TIMEOUT; this bounds the runner itself.
            .timeout(Duration::from_secs(150))
            .success()
            .stderr_with(runner_line_only(0))
    }

    /// The offline runner, set up to run from `cwd` against the stub answering `replies` (a
    /// JSON list in stub.py's format; empty: its default text), with the home's environment;
    /// the caller adds `CLAUDE_BIN`, its options, `--` and the arguments.
    fn runner(&self, home: &ClaudeHome, cwd: &Path, replies: &Value) -> std::process::Command {
        // Kept in the home's root (removed with it): the run reads it after this returns.
        let (_, replies_file) = tempfile::Builder::new()
            .prefix("replies-")
            .suffix(".json")
            .tempfile_in(&home.root)
            .unwrap()
            .keep()
            .unwrap();
        std::fs::write(&replies_file, replies.to_string()).unwrap();
        let mut cmd = std::process::Command::new("bash");
        cmd.arg(repo_root().join("scripts/claude-code/run-offline.sh"))
            .env_clear()
            .env("PATH", &self.path)
            .env("LANG", "C.UTF-8")
            .env("CC_HOME", &home.home)
            // dreamkit in the hooks keeps its state where the tests' own runs do.
            .env("XDG_STATE_HOME", &home.state_home)
            .env("CC_CWD", cwd)
            .env("CC_LOG", &self.log)
            .env("CC_REPLIES", &replies_file)
            .env("CC_TIMEOUT", "120")
            .current_dir(cwd);
        cmd
    }

    /// dreamkit's `tool` with `--provider claude`, run where the client runs (in the offline
    /// runner's namespace, against the stub answering `replies`), the real client as
    /// `DREAMKIT_CLAUDE_BIN`. `drop` leaves variables out of the tool's environment (`ANTHROPIC_API_KEY`: no
    /// credential at all). The caller says what the exit, stdout and stderr must be (stderr
    /// ends with the runner's line).
    pub(crate) fn dreamkit<'a>(
        &self,
        home: &ClaudeHome,
        replies: &Value,
        tool: &str,
        args: &[&str],
        drop: &[&str],
    ) -> Run<'a> {
        let mut cmd = self.runner(home, &home.project, replies);
        cmd.env("CLAUDE_BIN", crate::support::bin_path(tool))
            .env("DREAMKIT_PROVIDER", "claude")
            .env("DREAMKIT_CLAUDE_BIN", &self.claude);
        for name in drop {
            cmd.arg("--drop-env").arg(name);
        }
        cmd.arg("--");
        Run::command(cmd, &format!("run-offline.sh -- {tool}"))
            .args(args)
            .stdin_from(Stdio::null())
            .timeout(Duration::from_secs(150))
    }

    /// The client's `-p` turn as a new session; its json result.
    pub(crate) fn prompt(
        &self,
        home: &ClaudeHome,
        cwd: &Path,
        prompt: &str,
        session: &str,
        resume: bool,
        extra: &[&str],
    ) -> Value {
        let flag = if resume { "--resume" } else { "--session-id" };
        let mut args = vec!["-p", prompt, "--output-format", "json", flag, session];
        args.extend_from_slice(extra);
        self.claude(home, cwd, &Value::Array(Vec::new()), &args)
            .stdout_json(|result| assert_eq!(result["is_error"], false, "{result}"))
            .run()
            .json()
    }

    /// Every request the stub logged, in order (method, path, headers, body).
    pub(crate) fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).expect("stub log line"))
            .collect()
    }

    /// The agent loop's requests (they carry tools; side requests such as titles do not).
    pub(crate) fn main_requests(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| {
                r["body"]["tools"]
                    .as_array()
                    .is_some_and(|tools| !tools.is_empty())
            })
            .collect()
    }

    /// The last main request's body.
    pub(crate) fn last_body(&self) -> Value {
        self.main_requests()
            .pop()
            .map(|r| r["body"].clone())
            .expect("the client sent a request to the stub")
    }
}

/// The offline runner's stderr when the client exited `code` and printed nothing there: the
/// runner's one line `run-offline: claude exit=N seconds=S`.
fn runner_line_only(code: i32) -> impl FnOnce(&str) {
    move |stderr| {
        let seconds = stderr
            .strip_prefix(&format!("run-offline: claude exit={code} seconds="))
            .and_then(|rest| rest.strip_suffix('\n'));
        assert!(
            seconds.is_some_and(|s| s.parse::<f64>().is_ok()),
            "stderr is not the offline runner's one line for exit {code}: {stderr:?}"
        );
    }
}

/// The text of every block of every message of a request body, in order.
pub(crate) fn message_texts(body: &Value) -> Vec<(String, String)> {
    let mut texts = Vec::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or("").to_string();
        match &message["content"] {
            Value::String(s) => texts.push((role, s.clone())),
            Value::Array(blocks) => {
                for block in blocks {
                    if let Some(t) = block["text"].as_str() {
                        texts.push((role.clone(), t.to_string()));
                    }
                }
            }
            _ => {}
        }
    }
    texts
}

/// The events of a `--output-format stream-json` run: one JSON object a line, every line.
pub(crate) fn stream_events(stdout: &str) -> Vec<Value> {
    assert!(
        stdout.ends_with('\n'),
        "stream-json output not newline-terminated: {stdout:?}"
    );
    stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .unwrap_or_else(|e| panic!("a stream-json line is not JSON ({e}): {l:?}"))
        })
        .collect()
}

/// The `hook_response` events of a `--output-format stream-json --verbose
/// --include-hook-events` run: (hook_name, exit_code, outcome, stdout, stderr).
pub(crate) fn hook_responses(stdout: &str) -> Vec<(String, i64, String, String, String)> {
    stream_events(stdout)
        .into_iter()
        .filter(|e| e["type"] == "system" && e["subtype"] == "hook_response")
        .map(|e| {
            (
                e["hook_name"].as_str().unwrap_or("").to_string(),
                e["exit_code"].as_i64().unwrap_or(-1),
                e["outcome"].as_str().unwrap_or("").to_string(),
                e["stdout"].as_str().unwrap_or("").to_string(),
                e["stderr"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The final `result` event of a stream-json run.
pub(crate) fn stream_result(stdout: &str) -> Value {
    stream_events(stdout)
        .into_iter()
        .find(|e| e["type"] == "result")
        .unwrap_or_else(|| panic!("no result event in: {stdout}"))
}

/// The records of a transcript.
pub(crate) fn records(transcript: &Path) -> Vec<Value> {
    std::fs::read_to_string(transcript)
        .unwrap_or_else(|e| panic!("{}: {e}", transcript.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("transcript line"))
        .collect()
}

/// A git repository at `dir` with one commit (for the subdirectory and worktree cases).
pub(crate) fn git_repo(dir: &Path) {
    let git = |args: &[&str], cwd: &Path| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(cwd)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::create_dir_all(dir).unwrap();
    git(&["init", "-q", "-b", "main"], dir);
    std::fs::write(dir.join("README"), "x\n").unwrap();
    git(&["add", "README"], dir);
    git(&["commit", "-q", "-m", "init"], dir);
}

/// `git worktree add` of the repository at `repo` into `path`.
pub(crate) fn git_worktree(repo: &Path, path: &Path) {
    let out = std::process::Command::new("git")
        .args(["worktree", "add", "-q", "-b", "wt"])
        .arg(path)
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", repo)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git worktree add: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A stand-in `claude` at `<home root>/bin/claude`: answers `--version` with `version`, else
/// runs `body` (sh), for the tests that need no real client (version checks, process groups,
/// the plugin's choice of engine).
pub(crate) fn stand_in(home: &ClaudeHome, version: &str, body: &str) -> PathBuf {
    let path = home.root.join("bin/claude");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{version} (Claude Code)'; exit 0; fi\n{body}\n"
        ),
    )
    .unwrap();
    crate::support::chmod(&path, 0o755);
    path
}

/// A stand-in whose every print-mode answer is `result` (one line), after it appends its
/// arguments to `<home root>/claude-args`; it exits `code`.
pub(crate) fn stand_in_answering(home: &ClaudeHome, result: &Value, code: i32) -> PathBuf {
    let log = home.root.join("claude-args");
    stand_in(
        home,
        CLIENT_VERSION,
        &format!(
            "echo \"$*\" >> '{log}'\ncat >/dev/null\necho '{result}'\nexit {code}",
            log = log.display(),
            result = result.to_string().replace('\'', ""),
        ),
    )
}
