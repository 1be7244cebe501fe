//! One contract for the three model tools (`recap`, `suggest`, `turn-status`), through the real
//! binaries: every failure prints `{"error": {kind, reason?, message}}` beside the tool's own
//! section; a file named by a flag or a payload that is missing, unreadable or not a regular
//! file is exit 3 `environment` with its reason in all three; credentials are checked after
//! the local gates; every model error kind is named in `error.kind`; control characters from
//! a model, a transcript or a payload never reach a text printed for a person; no stderr line
//! repeats the tool's name; `recap -v` explains each gate.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::transcript::{Transcript, SESSION};
use crate::support::*;

const KEY: &str = "sk-ant-test-SECRET-contract";
const TOOLS: [&str; 3] = ["recap", "suggest", "turn-status"];
/// Every run ends well within this; it bounds a run that would hang, it times nothing.
const BOUND: Duration = Duration::from_secs(60);
/// A terminal attack: retitle the window, ring, clear the screen, a C1 CSI, a DEL.
const ATTACK: &str = "\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{9b}31m\u{7f}";

/// Three real user turns and three assistant turns, ten minutes old: past recap's away
/// delay, suggest's cache warm, and a last assistant text for turn-status.
fn conversation() -> Transcript {
    Transcript::started(Duration::from_secs(600))
        .user("the gate test is flaky, look at it")
        .assistant("It races the scan stamp.")
        .user("fix it then")
        .assistant_tool(
            "Running it in a loop.",
            "Bash",
            json!({"command": "cargo test gate", "description": "loop"}),
        )
        .tool_result("ok")
        .user("good, commit")
        .assistant("Committed the fix as 3f2a1b.")
        .session_end_noise()
}

struct Setup {
    home: ClaudeHome,
    api: FakeApi,
    transcript: PathBuf,
}

impl Setup {
    fn new(t: &Transcript) -> Setup {
        let home = ClaudeHome::new();
        let transcript = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
        t.write(&transcript);
        Setup {
            home,
            api: FakeApi::start(),
            transcript,
        }
    }

    /// `tool` pointed at the fake model server, with a key, and nothing else.
    fn bare(&self, tool: &str) -> assert_cmd::Command {
        let mut cmd = self.home.cmd(tool);
        self.model_env(&mut cmd);
        cmd
    }

    fn model_env(&self, cmd: &mut assert_cmd::Command) {
        cmd.env("ANTHROPIC_BASE_URL", self.api.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .env("DREAMKIT_RETRY_BASE_MS", "1")
            .timeout(BOUND);
    }

    /// `tool` on the transcript, asking the model (turn-status with its LLM engine).
    fn asking(&self, tool: &str) -> assert_cmd::Command {
        let mut cmd = self.bare(tool);
        if tool == "turn-status" {
            cmd.args(["--engine", "llm"]);
        }
        cmd.arg("--transcript").arg(&self.transcript);
        cmd
    }
}

struct Run {
    code: i32,
    doc: Value,
    stderr: String,
}

fn run(mut cmd: assert_cmd::Command) -> Run {
    let out: Output = cmd.timeout(BOUND).output().expect("run");
    Run {
        code: out.status.code().expect("an exit code, not a signal"),
        doc: stdout_json(&out),
        stderr: stderr_text(&out),
    }
}

/// The control characters in `text` that must never be printed (newline and tab are fine).
fn control_chars(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| {
            (c.is_control() && *c != '\n' && *c != '\t') || ('\u{80}'..='\u{9f}').contains(c)
        })
        .collect()
}

/// Every string in the document (keys too) is free of control characters.
fn assert_printable(what: &str, value: &Value) {
    match value {
        Value::String(s) => assert!(
            control_chars(s).is_empty(),
            "{what}: control characters in {s:?}"
        ),
        Value::Array(items) => items.iter().for_each(|v| assert_printable(what, v)),
        Value::Object(map) => {
            for (k, v) in map {
                assert!(control_chars(k).is_empty(), "{what}: key {k:?}");
                assert_printable(what, v);
            }
        }
        _ => {}
    }
}

/// Each stderr line is the tool's own (`tool: ...`), does not name the tool again, and holds
/// no control character.
fn assert_stderr(tool: &str, stderr: &str) {
    assert!(
        control_chars(stderr).is_empty(),
        "{tool}: control characters on stderr: {stderr:?}"
    );
    for line in stderr.lines() {
        let rest = line
            .strip_prefix(&format!("{tool}: "))
            .unwrap_or_else(|| panic!("{tool}: a line not of ours: {line:?}"));
        assert!(
            !rest.starts_with(tool) && !rest.starts_with(&format!("{tool}:")),
            "{tool}: the tool named twice: {line:?}"
        );
    }
}

/// A failure: exit `code`, `error.kind` `kind` (and `reason`), the tool's own section beside
/// it, and one line on stderr.
fn assert_failure(tool: &str, what: &str, r: &Run, code: i32, kind: &str, reason: Option<&str>) {
    assert_eq!(r.code, code, "{tool} {what}: {} {}", r.doc, r.stderr);
    let error = &r.doc["error"];
    assert_eq!(error["kind"], kind, "{tool} {what}: {}", r.doc);
    if let Some(reason) = reason {
        assert_eq!(error["reason"], reason, "{tool} {what}: {}", r.doc);
    }
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{tool} {what}: {}",
        r.doc
    );
    // The caller's mistakes (exit 2) print `{error}` alone, as a usage error from clap does.
    match tool {
        _ if code == 2 => assert_eq!(
            r.doc.as_object().map(serde_json::Map::len),
            Some(1),
            "{}",
            r.doc
        ),
        "recap" => assert!(r.doc["status"].is_string(), "{what}: {}", r.doc),
        "turn-status" => assert_eq!(
            r.doc.get("post_turn_summary"),
            Some(&Value::Null),
            "{what}: {}",
            r.doc
        ),
        _ => {}
    }
    assert_printable(what, &r.doc);
    assert_stderr(tool, &r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{tool} {what}: {}", r.stderr);
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

/// Paths that are no regular file, or nothing at all, with the reason each must give. The
/// socket's listener is returned so that the socket lives as long as the paths are used.
fn bad_files(
    root: &Path,
) -> (
    Vec<(&'static str, PathBuf, &'static str)>,
    std::os::unix::net::UnixListener,
) {
    let dir = root.join("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo.jsonl");
    mkfifo(&fifo);
    let directory = dir.join("dir.jsonl");
    std::fs::create_dir(&directory).unwrap();
    let device = dir.join("device.jsonl");
    std::os::unix::fs::symlink("/dev/null", &device).unwrap();
    let socket = dir.join("socket.jsonl");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let cases = vec![
        ("missing", dir.join("missing.jsonl"), "not_found"),
        ("a FIFO", fifo, "not_a_file"),
        ("a directory", directory, "not_a_file"),
        ("a device", device, "not_a_file"),
        ("a socket", socket, "not_a_file"),
    ];
    (cases, listener)
}

// 2. The same condition, the same code.

#[test]
fn a_transcript_flag_naming_no_regular_file_is_exit_3_with_its_reason_in_every_tool() {
    let s = Setup::new(&conversation());
    let (cases, _socket) = bad_files(&s.home.root);
    for tool in TOOLS {
        for (what, path, reason) in &cases {
            let mut cmd = s.bare(tool);
            cmd.arg("--transcript").arg(path);
            let r = run(cmd);
            assert_failure(tool, what, &r, 3, "environment", Some(reason));
            match tool {
                "recap" => assert_eq!(r.doc["status"], "failed"),
                "turn-status" => assert_eq!(r.doc["post_turn_summary"], Value::Null),
                _ => {}
            }
        }
    }
    assert!(s.api.requests().is_empty(), "a request went out");
}

#[test]
fn a_payloads_transcript_path_naming_no_regular_file_is_exit_3_too() {
    let s = Setup::new(&conversation());
    let (cases, _socket) = bad_files(&s.home.root);
    for tool in TOOLS {
        for (what, path, reason) in &cases {
            // turn-status reads a transcript that does not exist yet as a turn with no text.
            if tool == "turn-status" && *what == "missing" {
                continue;
            }
            let payload = json!({
                "hook_event_name": "Stop",
                "session_id": "11111111-2222-4333-8444-555555555555",
                "transcript_path": path,
                "cwd": s.home.project,
            });
            let mut cmd = s.bare(tool);
            cmd.write_stdin(payload.to_string());
            let r = run(cmd);
            assert_failure(tool, what, &r, 3, "environment", Some(reason));
        }
    }
    assert!(s.api.requests().is_empty());
}

#[test]
fn an_unreadable_transcript_is_exit_3_permission_in_every_tool() {
    let s = Setup::new(&conversation());
    chmod(&s.transcript, 0o000);
    for tool in TOOLS {
        let mut cmd = s.home.cmd_unprivileged(tool);
        s.model_env(&mut cmd);
        cmd.arg("--transcript").arg(&s.transcript);
        let r = run(cmd);
        assert_failure(tool, "unreadable", &r, 3, "environment", Some("permission"));
    }
    assert!(s.api.requests().is_empty());
}

#[test]
fn turn_status_previous_and_state_file_problems_are_exit_3_and_write_nothing() {
    let s = Setup::new(&conversation());
    let stop = |text: &str| {
        json!({"hook_event_name": "Stop", "session_id": "s", "last_assistant_message": text})
            .to_string()
    };
    // --previous is read for a turn with no new text.
    let (cases, _socket) = bad_files(&s.home.root);
    for (what, path, reason) in &cases {
        let mut cmd = s.home.cmd("turn-status");
        cmd.arg("--previous").arg(path).write_stdin(stop(""));
        let r = run(cmd);
        if *what == "missing" {
            // No previous status yet: nothing to report.
            assert_eq!((r.code, r.doc["reason"].as_str()), (1, Some("no_text")));
            continue;
        }
        assert_failure("turn-status", what, &r, 3, "environment", Some(reason));
    }
    let unreadable = s.home.root.join("previous.json");
    std::fs::write(
        &unreadable,
        "{\"state\":\"done\",\"tempo\":\"idle\",\"needs\":\"\"}\n",
    )
    .unwrap();
    chmod(&unreadable, 0o000);
    let mut cmd = s.home.cmd_unprivileged("turn-status");
    cmd.args(["--surface", "bg", "--previous"])
        .arg(&unreadable)
        .write_stdin(stop(""));
    let r = run(cmd);
    assert_failure(
        "turn-status",
        "unreadable --previous",
        &r,
        3,
        "environment",
        Some("permission"),
    );

    // --state-file: not a regular file, under a regular file, in a directory we may not write.
    let plain = s.home.root.join("plain-file");
    std::fs::write(&plain, "x").unwrap();
    for (what, path, reason) in cases.iter().filter(|(w, ..)| *w != "missing") {
        let mut cmd = s.home.cmd("turn-status");
        cmd.arg("--state-file")
            .arg(path)
            .write_stdin(stop("Pushed."));
        let r = run(cmd);
        assert_failure("turn-status", what, &r, 3, "environment", Some(reason));
    }
    let mut cmd = s.home.cmd("turn-status");
    cmd.arg("--state-file")
        .arg(plain.join("status.json"))
        .write_stdin(stop("Pushed."));
    let r = run(cmd);
    assert_failure(
        "turn-status",
        "under a file",
        &r,
        3,
        "environment",
        Some("not_a_file"),
    );
    assert_eq!(std::fs::read(&plain).unwrap(), b"x");
    let locked = s.home.root.join("locked");
    std::fs::create_dir(&locked).unwrap();
    chmod(&locked, 0o555);
    let mut cmd = s.home.cmd_unprivileged("turn-status");
    cmd.arg("--state-file")
        .arg(locked.join("status.json"))
        .write_stdin(stop("Pushed."));
    let r = run(cmd);
    assert_failure(
        "turn-status",
        "unwritable dir",
        &r,
        3,
        "environment",
        Some("permission"),
    );
    assert_eq!(std::fs::read_dir(&locked).unwrap().count(), 0);
}

// Credentials after the local gates.

#[test]
fn credentials_are_checked_after_every_local_gate() {
    let one_turn = Transcript::started(Duration::from_secs(600))
        .user("only one")
        .assistant("ok");
    let s = Setup::new(&one_turn);
    let no_key = |tool: &str| {
        let mut cmd = s.home.cmd(tool);
        cmd.env("ANTHROPIC_BASE_URL", s.api.url())
            .arg("--transcript")
            .arg(&s.transcript);
        cmd
    };
    // recap --auto on a one-turn transcript: skipped (exit 1), not auth (exit 4).
    let mut cmd = no_key("recap");
    cmd.arg("--auto");
    let r = run(cmd);
    assert_eq!(r.code, 1, "{} {}", r.doc, r.stderr);
    assert_eq!(
        (r.doc["status"].as_str(), r.doc["reason"].as_str()),
        (Some("skipped"), Some("too_few_turns"))
    );
    assert_stderr("recap", &r.stderr);
    // suggest: every suppression comes first.
    let r = run(no_key("suggest"));
    assert_eq!(
        (r.code, r.doc["suppressed"].as_str()),
        (1, Some("early_conversation")),
        "{}",
        r.doc
    );
    let mut cmd = no_key("suggest");
    cmd.env("CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION", "false");
    let r = run(cmd);
    assert_eq!(
        (r.code, r.doc["suppressed"].as_str()),
        (1, Some("disabled"))
    );
    // turn-status --engine llm: no credential needed when the model is not asked.
    let mut cmd = s.home.cmd("turn-status");
    cmd.args(["--engine", "llm", "--permission-blocked"]);
    let r = run(cmd);
    assert_eq!(
        (r.code, r.doc["status_category"].as_str()),
        (0, Some("blocked"))
    );
    let mut cmd = s.home.cmd("turn-status");
    cmd.args(["--engine", "llm"])
        .write_stdin(json!({"hook_event_name": "StopFailure", "error": "rate_limit"}).to_string());
    let r = run(cmd);
    assert_eq!(
        (r.code, r.doc["status_category"].as_str()),
        (0, Some("failed"))
    );
    let mut cmd = s.home.cmd("turn-status");
    cmd.args(["--engine", "llm"])
        .write_stdin(json!({"hook_event_name": "Stop", "last_assistant_message": ""}).to_string());
    let r = run(cmd);
    assert_eq!((r.code, r.doc["reason"].as_str()), (1, Some("no_text")));

    // Once a request is due, the missing credential is an `auth` failure (exit 4) in each.
    let three = Setup::new(&conversation());
    for tool in TOOLS {
        let mut cmd = three.home.cmd(tool);
        if tool == "turn-status" {
            cmd.args(["--engine", "llm"]);
        }
        cmd.arg("--transcript").arg(&three.transcript);
        let r = run(cmd);
        assert_failure(tool, "no key", &r, 4, "auth", Some("no_credential"));
        assert!(
            r.doc["error"]["message"]
                .as_str()
                .unwrap()
                .contains("ANTHROPIC_API_KEY"),
            "{}",
            r.doc
        );
    }
    // A bad model setting is still the caller's mistake (exit 2), whatever the gates say.
    for (tool, args) in [
        ("recap", &["--auto"][..]),
        ("suggest", &[][..]),
        (
            "turn-status",
            &["--engine", "llm", "--permission-blocked"][..],
        ),
    ] {
        let mut cmd = s.home.cmd(tool);
        cmd.env("ANTHROPIC_API_KEY", KEY)
            .env("ANTHROPIC_BASE_URL", "ftp://127.0.0.1/")
            .arg("--transcript")
            .arg(&s.transcript)
            .args(args);
        let r = run(cmd);
        assert_failure(tool, "bad base URL", &r, 2, "usage", None);
    }
    assert!(s.api.requests().is_empty() && three.api.requests().is_empty());
}

// 1. One failure shape: each model error kind, in each tool.

#[test]
fn every_model_error_kind_is_named_in_error_kind_by_every_tool() {
    type Case = (&'static str, fn() -> Reply, &'static [&'static str]);
    let cases: [Case; 8] = [
        (
            "auth",
            || Reply::error(401, "authentication_error", "invalid x-api-key"),
            &[],
        ),
        (
            "rate_limited",
            || Reply::error(429, "rate_limit_error", "slow down").with_header("retry-after", "0"),
            &[],
        ),
        (
            "overloaded",
            || Reply::error(529, "overloaded_error", "Overloaded"),
            &[],
        ),
        (
            "invalid_request",
            || Reply::error(400, "invalid_request_error", "bad model"),
            &[],
        ),
        ("server", || Reply::error(500, "api_error", "boom"), &[]),
        ("malformed_response", Reply::malformed, &[]),
        (
            "network",
            || Reply::Truncated {
                status: 200,
                body: json!({"content": [{"type": "text", "text": "cut"}]}).to_string(),
            },
            &[],
        ),
        (
            "timeout",
            || Reply::Hang(Duration::from_secs(5)),
            &["--timeout", "200ms"],
        ),
    ];
    let s = Setup::new(&conversation());
    for tool in TOOLS {
        for (kind, reply, args) in &cases {
            s.api.push(reply());
            let mut cmd = s.asking(tool);
            cmd.args(["--retries", "0"]).args(*args);
            let r = run(cmd);
            assert_failure(tool, kind, &r, 4, kind, None);
            assert_eq!(r.doc["error"]["attempts"], 1, "{tool} {kind}: {}", r.doc);
            assert!(r.doc["usage"].is_object(), "{tool} {kind}: {}", r.doc);
            assert!(r.stderr.contains(kind), "{tool}: {}", r.stderr);
            match tool {
                "recap" => assert_eq!(r.doc["status"], "api-error"),
                "turn-status" => assert_eq!(r.doc["post_turn_summary"], Value::Null),
                _ => {}
            }
        }
    }
    assert_eq!(s.api.requests().len(), 3 * cases.len());
}

/// SIGTERM while the model is asked: sent by the fake server once the request is in, so the
/// test waits on the request itself, never on a clock.
#[test]
fn a_signal_during_the_exchange_is_an_interrupted_error_beside_the_section() {
    for tool in TOOLS {
        let s = Setup::new(&conversation());
        let (pid_tx, pid_rx) = std::sync::mpsc::channel::<i32>();
        s.api.push(Reply::After(
            Box::new(move || {
                let pid = pid_rx.recv().expect("the pid");
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }),
            Box::new(Reply::Hang(Duration::from_secs(10))),
        ));
        let mut cmd = s.home.process(bin_path(tool));
        cmd.env("ANTHROPIC_BASE_URL", s.api.url())
            .env("ANTHROPIC_API_KEY", KEY);
        if tool == "turn-status" {
            cmd.args(["--engine", "llm"]);
        }
        cmd.arg("--transcript")
            .arg(&s.transcript)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let child = cmd.spawn().expect("spawn");
        pid_tx.send(child.id() as i32).unwrap();
        let out = child.wait_with_output().unwrap();
        let r = Run {
            code: out.status.code().expect("exit code"),
            doc: stdout_json(&out),
            stderr: stderr_text(&out),
        };
        assert_failure(tool, "SIGTERM", &r, 143, "interrupted", None);
        match tool {
            "recap" => assert_eq!(
                (r.doc["status"].as_str(), r.doc["reason"].as_str()),
                (Some("aborted"), Some("interrupted"))
            ),
            _ => assert_eq!(r.doc["aborted"], "interrupted", "{tool}: {}", r.doc),
        }
    }
}

// 3. Control characters.

#[test]
fn control_characters_in_a_model_reply_never_reach_the_printed_text() {
    let s = Setup::new(&conversation());
    // recap: the summary, printed and appended.
    s.api.push(Reply::anthropic_text(&format!(
        "{ATTACK}You were fixing the flaky gate test; next, push."
    )));
    let mut cmd = s.asking("recap");
    cmd.args(["--auto", "-v"]);
    let r = run(cmd);
    assert_eq!(r.code, 0, "{} {}", r.doc, r.stderr);
    assert_eq!(
        r.doc["text"],
        "31mYou were fixing the flaky gate test; next, push."
    );
    assert_printable("recap", &r.doc);
    assert_stderr("recap", &r.stderr);
    let text = std::fs::read_to_string(&s.transcript).unwrap();
    let record: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(record["subtype"], "away_summary");
    assert_printable("the appended record", &record);

    // suggest: the suggestion, the event, a rejected candidate and its note.
    let s = Setup::new(&conversation());
    s.api.push(Reply::anthropic_text(
        "\u{1b}]0;PWNED\u{7}\u{1b}[2Jrun tests",
    ));
    let r = run(s.asking("suggest"));
    assert_eq!(r.code, 0, "{}", r.doc);
    assert_eq!(r.doc["suggestion"], "run tests");
    s.api
        .push(Reply::anthropic_text(&format!("push {ATTACK}it")));
    let mut cmd = s.asking("suggest");
    cmd.arg("--events");
    let r = run(cmd);
    assert_eq!(r.code, 0, "{}", r.doc);
    assert_eq!(r.doc["type"], "prompt_suggestion");
    assert_printable("suggest --events", &r.doc);
    s.api
        .push(Reply::anthropic_text("\u{1b}[31mThanks!\u{1b}[0m"));
    let r = run(s.asking("suggest"));
    assert_eq!(
        (r.code, r.doc["rejected"].as_str()),
        (1, Some("too_few_words"))
    );
    assert_printable("suggest rejected", &r.doc);
    assert_stderr("suggest", &r.stderr);
    let mut cmd = s.home.cmd("suggest");
    cmd.args(["check", "-n", "--", &format!("run the {ATTACK}tests")]);
    let r = run(cmd);
    assert_eq!(r.code, 0, "{}", r.doc);
    assert_printable("suggest check", &r.doc);

    // turn-status --engine llm: the detail and the needed action.
    let s = Setup::new(&conversation());
    let reply = json!({"state": "blocked", "detail": format!("push {ATTACK}to main?"),
                       "tempo": "blocked", "needs": format!("say {ATTACK}yes"), "result": ""});
    for surface in ["cli", "bg", "repl"] {
        s.api.push(Reply::anthropic_text(&reply.to_string()));
        let mut cmd = s.asking("turn-status");
        cmd.args(["--surface", surface]);
        let r = run(cmd);
        assert_eq!(r.code, 0, "{surface}: {} {}", r.doc, r.stderr);
        assert_printable(surface, &r.doc);
    }

    // A model error message on stderr and in error.message, in each tool.
    for tool in TOOLS {
        s.api.push(Reply::error(
            400,
            "invalid_request_error",
            &format!("bad {ATTACK}request"),
        ));
        let r = run(s.asking(tool));
        assert_failure(tool, "error message", &r, 4, "invalid_request", None);
        assert!(r.stderr.contains("bad 31mrequest"), "{tool}: {}", r.stderr);
    }
}

#[test]
fn control_characters_in_a_transcript_or_payload_never_reach_the_printed_text() {
    let home = ClaudeHome::new();
    let stop = |text: &str| {
        json!({"hook_event_name": "Stop", "session_id": "s", "last_assistant_message": text})
            .to_string()
    };
    let turn = format!("Tests pass.\n{ATTACK}Should I push {ATTACK}to main?");
    for surface in ["cli", "bg", "repl"] {
        let mut cmd = home.cmd("turn-status");
        cmd.args(["--surface", surface]).write_stdin(stop(&turn));
        let r = run(cmd);
        assert_eq!(r.code, 0, "{surface}: {}", r.doc);
        assert_printable(surface, &r.doc);
    }
    let mut cmd = home.cmd("turn-status");
    cmd.write_stdin(stop(&turn));
    let r = run(cmd);
    assert_eq!(r.doc["status_category"], "blocked", "{}", r.doc);
    assert!(
        r.doc["needs_action"]
            .as_str()
            .is_some_and(|n| n.contains("Should I push ") && n.ends_with("to main?")),
        "{}",
        r.doc
    );
    for payload in [
        json!({"hook_event_name": "Notification", "notification_type": "permission_prompt",
               "message": format!("Claude needs your permission {ATTACK}to use Bash")}),
        json!({"hook_event_name": "StopFailure", "error": format!("rate{ATTACK}_limit")}),
    ] {
        let mut cmd = home.cmd("turn-status");
        cmd.write_stdin(payload.to_string());
        let r = run(cmd);
        assert_eq!(r.code, 0, "{payload}: {}", r.doc);
        assert_printable("payload", &r.doc);
    }
    // The transcript's own text, and a --previous status printed again.
    let transcript = home.root.join("t.jsonl");
    Transcript::started(Duration::from_secs(60))
        .user("go")
        .assistant(&format!("Pushed {ATTACK}the fix."))
        .write(&transcript);
    let mut cmd = home.cmd("turn-status");
    cmd.arg("--transcript").arg(&transcript);
    let r = run(cmd);
    assert_eq!(r.doc["status_category"], "completed", "{}", r.doc);
    assert_printable("transcript", &r.doc);
    let previous = home.root.join("previous.json");
    std::fs::write(
        &previous,
        format!(
            "{}\n",
            json!({"state": "blocked", "tempo": "blocked", "needs": format!("approve {ATTACK}it")})
        ),
    )
    .unwrap();
    let mut cmd = home.cmd("turn-status");
    cmd.args(["--surface", "bg", "--previous"])
        .arg(&previous)
        .write_stdin(stop(""));
    let r = run(cmd);
    assert_eq!(r.code, 0, "{}", r.doc);
    assert_eq!(r.doc["needs"], "approve 31mit");

    // A path holding control characters, quoted on stderr and in the message, in each tool.
    let s = Setup::new(&conversation());
    let odd = s.home.root.join(format!("gone{ATTACK}.jsonl"));
    for tool in TOOLS {
        let mut cmd = s.bare(tool);
        cmd.arg("--transcript").arg(&odd);
        let r = run(cmd);
        assert_failure(tool, "odd path", &r, 3, "environment", Some("not_found"));
    }
}

// 5. `recap -v` explains its decisions.

#[test]
fn recap_verbose_explains_each_gate_it_checked() {
    let gates = [
        "disabled",
        "already_summarized",
        "too_few_turns",
        "not_away_long_enough",
        "cache_cold",
        "draft_pending",
        "pending_work",
        "rate_limited",
    ];
    let s = Setup::new(&conversation());
    s.api
        .push(Reply::anthropic_text("You were fixing the gate test."));
    let mut cmd = s.asking("recap");
    cmd.args(["--auto", "-v"]);
    let r = run(cmd);
    assert_eq!(r.code, 0, "{} {}", r.doc, r.stderr);
    assert_stderr("recap", &r.stderr);
    for gate in gates {
        assert!(
            r.stderr.contains(&format!("recap: checked {gate}: ")),
            "{gate}: {}",
            r.stderr
        );
    }
    assert!(r.stderr.contains("asking claude-haiku-4-5"), "{}", r.stderr);
    assert!(
        r.stderr.contains("appended the away_summary record"),
        "{}",
        r.stderr
    );

    // A skip names the gates that passed, then the one that said no, and stops there.
    let s = Setup::new(&conversation());
    let mut cmd = s.asking("recap");
    cmd.args(["--auto", "-v", "--pending-work"]);
    let r = run(cmd);
    assert_eq!(r.code, 1, "{}", r.doc);
    assert_stderr("recap", &r.stderr);
    assert!(
        r.stderr.contains("recap: checked draft_pending: "),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("recap: skipped: pending_work: work is still running"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("checked rate_limited"), "{}", r.stderr);
    // Without -v, the one line.
    let mut cmd = s.asking("recap");
    cmd.args(["--auto", "--pending-work"]);
    let r = run(cmd);
    assert_eq!(
        r.stderr,
        "recap: skipped: pending_work: work is still running\n"
    );
    // The default mode says it has no gates.
    s.api
        .push(Reply::anthropic_text("You were fixing the gate test."));
    let mut cmd = s.asking("recap");
    cmd.arg("-v");
    let r = run(cmd);
    assert_eq!(r.code, 0, "{}", r.doc);
    assert!(r.stderr.contains("no gates"), "{}", r.stderr);
    assert!(!r.stderr.contains("checked "), "{}", r.stderr);
}
