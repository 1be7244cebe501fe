//! One contract for the three model tools (`recap`, `suggest`, `turn-status`), through the real
//! binaries: every failure prints `{"error": {kind, reason?, message}}` beside the tool's own
//! section; a file named by a flag or a payload that is missing, unreadable or not a regular
//! file is exit 3 `environment` with its reason in all three; credentials are checked after
//! the local gates; every model error kind is named in `error.kind`; control characters from
//! a model, a transcript or a payload never reach a text printed for a person; no stderr line
//! repeats the tool's name; `recap -v` explains each gate.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::run::Ran;
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
    fn bare<'a>(&self, tool: &str) -> Run<'a> {
        self.model_env(Run::new(&self.home, tool))
    }

    /// [`Setup::bare`] as an unprivileged user when the tests run as root.
    fn bare_unprivileged<'a>(&self, tool: &str) -> Run<'a> {
        self.model_env(Run::unprivileged(&self.home, tool))
    }

    fn model_env<'a>(&self, run: Run<'a>) -> Run<'a> {
        run.env("ANTHROPIC_BASE_URL", self.api.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .env("DREAMKIT_RETRY_BASE_MS", "1")
            .timeout(BOUND)
    }

    /// `tool` on the transcript, asking the model (turn-status with its LLM engine).
    fn asking<'a>(&self, tool: &str) -> Run<'a> {
        let run = self.bare(tool);
        let run = if tool == "turn-status" {
            run.args(["--engine", "llm"])
        } else {
            run
        };
        run.arg("--transcript").arg(&self.transcript)
    }
}

/// `tool` in `home` with no model settings, bounded.
fn bounded<'a>(home: &ClaudeHome, tool: &str) -> Run<'a> {
    Run::new(home, tool).timeout(BOUND)
}

/// A run that is no failure: exit `code`, one document (returned), and what `stderr` checks.
#[track_caller]
fn answer<'a>(run: Run<'a>, code: i32, stderr: impl FnOnce(&str) + 'a) -> Value {
    run.code(code)
        .stdout_json(|doc| assert!(doc.get("error").is_none(), "{doc}"))
        .stderr_with(stderr)
        .run()
        .json()
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
fn failure<'a>(
    run: Run<'a>,
    tool: &str,
    what: &str,
    code: i32,
    kind: &str,
    reason: Option<&str>,
) -> Run<'a> {
    let (tool, what) = (tool.to_string(), what.to_string());
    let (shown, said) = (what.clone(), tool.clone());
    let (kind, reason) = (kind.to_string(), reason.map(str::to_string));
    run.code(code)
        .stdout_json(move |doc| {
            let error = &doc["error"];
            assert_eq!(error["kind"], kind.as_str(), "{tool} {what}: {doc}");
            if let Some(reason) = &reason {
                assert_eq!(error["reason"], reason.as_str(), "{tool} {what}: {doc}");
            }
            assert!(
                error["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{tool} {what}: {doc}"
            );
            // The caller's mistakes (exit 2) print `{error}` alone, as a usage error from clap
            // does.
            match tool.as_str() {
                _ if code == 2 => {
                    assert_eq!(doc.as_object().map(serde_json::Map::len), Some(1), "{doc}");
                }
                "recap" => assert!(doc["status"].is_string(), "{what}: {doc}"),
                "turn-status" => assert_eq!(
                    doc.get("post_turn_summary"),
                    Some(&Value::Null),
                    "{what}: {doc}"
                ),
                _ => {}
            }
            assert_printable(&what, doc);
        })
        .stderr_with(move |stderr| {
            assert_stderr(&said, stderr);
            assert_eq!(stderr.lines().count(), 1, "{said} {shown}: {stderr}");
        })
}

/// Runs it as a [`failure`]; returns what it printed.
#[track_caller]
fn assert_failure(
    tool: &str,
    what: &str,
    run: Run,
    code: i32,
    kind: &str,
    reason: Option<&str>,
) -> Ran {
    failure(run, tool, what, code, kind, reason).run()
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
            let r = assert_failure(
                tool,
                what,
                s.bare(tool).arg("--transcript").arg(path),
                3,
                "environment",
                Some(reason),
            )
            .json();
            match tool {
                "recap" => assert_eq!(r["status"], "failed"),
                "turn-status" => assert_eq!(r["post_turn_summary"], Value::Null),
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
            assert_failure(
                tool,
                what,
                s.bare(tool).stdin(payload.to_string()),
                3,
                "environment",
                Some(reason),
            );
        }
    }
    assert!(s.api.requests().is_empty());
}

#[test]
fn an_unreadable_transcript_is_exit_3_permission_in_every_tool() {
    let s = Setup::new(&conversation());
    chmod(&s.transcript, 0o000);
    for tool in TOOLS {
        assert_failure(
            tool,
            "unreadable",
            s.bare_unprivileged(tool)
                .arg("--transcript")
                .arg(&s.transcript),
            3,
            "environment",
            Some("permission"),
        );
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
        let run = bounded(&s.home, "turn-status")
            .arg("--previous")
            .arg(path)
            .stdin(stop(""));
        if *what == "missing" {
            // No previous status yet: nothing to report.
            let doc = answer(run, 1, |stderr| {
                assert_eq!(
                    stderr,
                    format!(
                        "turn-status: no status: the turn has no new assistant text and \
                         --previous {} holds no summary status\n",
                        path.display()
                    )
                );
            });
            assert_eq!(doc["reason"].as_str(), Some("no_text"));
            continue;
        }
        assert_failure("turn-status", what, run, 3, "environment", Some(reason));
    }
    let unreadable = s.home.root.join("previous.json");
    std::fs::write(
        &unreadable,
        "{\"state\":\"done\",\"tempo\":\"idle\",\"needs\":\"\"}\n",
    )
    .unwrap();
    chmod(&unreadable, 0o000);
    assert_failure(
        "turn-status",
        "unreadable --previous",
        Run::unprivileged(&s.home, "turn-status")
            .timeout(BOUND)
            .args(["--surface", "bg", "--previous"])
            .arg(&unreadable)
            .stdin(stop("")),
        3,
        "environment",
        Some("permission"),
    );

    // --state-file: not a regular file, under a regular file, in a directory we may not write.
    let plain = s.home.root.join("plain-file");
    std::fs::write(&plain, "x").unwrap();
    for (what, path, reason) in cases.iter().filter(|(w, ..)| *w != "missing") {
        assert_failure(
            "turn-status",
            what,
            bounded(&s.home, "turn-status")
                .arg("--state-file")
                .arg(path)
                .stdin(stop("Pushed.")),
            3,
            "environment",
            Some(reason),
        );
    }
    assert_failure(
        "turn-status",
        "under a file",
        bounded(&s.home, "turn-status")
            .arg("--state-file")
            .arg(plain.join("status.json"))
            .stdin(stop("Pushed.")),
        3,
        "environment",
        Some("not_a_file"),
    );
    assert_eq!(std::fs::read(&plain).unwrap(), b"x");
    let locked = s.home.root.join("locked");
    std::fs::create_dir(&locked).unwrap();
    chmod(&locked, 0o555);
    assert_failure(
        "turn-status",
        "unwritable dir",
        Run::unprivileged(&s.home, "turn-status")
            .timeout(BOUND)
            .arg("--state-file")
            .arg(locked.join("status.json"))
            .stdin(stop("Pushed.")),
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
        bounded(&s.home, tool)
            .env("ANTHROPIC_BASE_URL", s.api.url())
            .arg("--transcript")
            .arg(&s.transcript)
    };
    // recap --auto on a one-turn transcript: skipped (exit 1), not auth (exit 4).
    let doc = answer(no_key("recap").arg("--auto"), 1, |stderr| {
        assert_stderr("recap", stderr);
        assert_eq!(
            stderr,
            "recap: skipped: too_few_turns: 1 real user turn; the first summary needs 3\n"
        );
    });
    assert_eq!(
        (doc["status"].as_str(), doc["reason"].as_str()),
        (Some("skipped"), Some("too_few_turns"))
    );
    // suggest: every suppression comes first.
    let doc = answer(no_key("suggest"), 1, |stderr| {
        assert_eq!(
            stderr,
            "suggest: suppressed: early_conversation: 1 assistant turn; needs 2\n"
        );
    });
    assert_eq!(
        doc["suppressed"].as_str(),
        Some("early_conversation"),
        "{doc}"
    );
    let doc = answer(
        no_key("suggest").env("CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION", "false"),
        1,
        |stderr| {
            assert_eq!(
                stderr,
                "suggest: suppressed: disabled: prompt suggestions are turned off \
                 (CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION, else promptSuggestionEnabled)\n"
            );
        },
    );
    assert_eq!(doc["suppressed"].as_str(), Some("disabled"));
    // turn-status --engine llm: no credential needed when the model is not asked.
    let doc = answer(
        bounded(&s.home, "turn-status").args(["--engine", "llm", "--permission-blocked"]),
        0,
        |stderr| assert_eq!(stderr, ""),
    );
    assert_eq!(doc["status_category"].as_str(), Some("blocked"));
    let doc = answer(
        bounded(&s.home, "turn-status")
            .args(["--engine", "llm"])
            .stdin(json!({"hook_event_name": "StopFailure", "error": "rate_limit"}).to_string()),
        0,
        |stderr| assert_eq!(stderr, ""),
    );
    assert_eq!(doc["status_category"].as_str(), Some("failed"));
    let doc = answer(
        bounded(&s.home, "turn-status")
            .args(["--engine", "llm"])
            .stdin(json!({"hook_event_name": "Stop", "last_assistant_message": ""}).to_string()),
        1,
        |stderr| {
            assert_eq!(
                stderr,
                "turn-status: no status: the turn has no new assistant text\n"
            );
        },
    );
    assert_eq!(doc["reason"].as_str(), Some("no_text"));

    // Once a request is due, the missing credential is an `auth` failure (exit 4) in each.
    let three = Setup::new(&conversation());
    for tool in TOOLS {
        let run = bounded(&three.home, tool);
        let run = if tool == "turn-status" {
            run.args(["--engine", "llm"])
        } else {
            run
        };
        let r = assert_failure(
            tool,
            "no key",
            run.arg("--transcript").arg(&three.transcript),
            4,
            "auth",
            Some("no_credential"),
        )
        .json();
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("ANTHROPIC_API_KEY"),
            "{r}"
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
        assert_failure(
            tool,
            "bad base URL",
            bounded(&s.home, tool)
                .env("ANTHROPIC_API_KEY", KEY)
                .env("ANTHROPIC_BASE_URL", "ftp://127.0.0.1/")
                .arg("--transcript")
                .arg(&s.transcript)
                .args(args),
            2,
            "usage",
            None,
        );
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
            let r = assert_failure(
                tool,
                kind,
                s.asking(tool).args(["--retries", "0"]).args(*args),
                4,
                kind,
                None,
            );
            let doc = r.json();
            assert_eq!(doc["error"]["attempts"], 1, "{tool} {kind}: {doc}");
            assert!(doc["usage"].is_object(), "{tool} {kind}: {doc}");
            assert!(r.stderr.contains(kind), "{tool}: {}", r.stderr);
            match tool {
                "recap" => assert_eq!(doc["status"], "api-error"),
                "turn-status" => assert_eq!(doc["post_turn_summary"], Value::Null),
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
        let run = Run::new(&s.home, tool)
            .timeout(BOUND)
            .env("ANTHROPIC_BASE_URL", s.api.url())
            .env("ANTHROPIC_API_KEY", KEY);
        let run = if tool == "turn-status" {
            run.args(["--engine", "llm"])
        } else {
            run
        };
        let running = failure(
            run.arg("--transcript")
                .arg(&s.transcript)
                .stdin_from(std::process::Stdio::null()),
            tool,
            "SIGTERM",
            143,
            "interrupted",
            None,
        )
        .spawn();
        pid_tx.send(running.pid() as i32).unwrap();
        let doc = running.finish().json();
        match tool {
            "recap" => assert_eq!(
                (doc["status"].as_str(), doc["reason"].as_str()),
                (Some("aborted"), Some("interrupted"))
            ),
            _ => assert_eq!(doc["aborted"], "interrupted", "{tool}: {doc}"),
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
    let doc = answer(s.asking("recap").args(["--auto", "-v"]), 0, |stderr| {
        assert_stderr("recap", stderr);
        // -v names times and the record's uuid: its lines are checked as lines.
        assert!(
            stderr.contains("\nrecap: appended the away_summary record "),
            "{stderr}"
        );
    });
    assert_eq!(
        doc["text"],
        "31mYou were fixing the flaky gate test; next, push."
    );
    assert_printable("recap", &doc);
    let text = std::fs::read_to_string(&s.transcript).unwrap();
    let record: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(record["subtype"], "away_summary");
    assert_printable("the appended record", &record);

    // suggest: the suggestion, the event, a rejected candidate and its note.
    let s = Setup::new(&conversation());
    s.api.push(Reply::anthropic_text(
        "\u{1b}]0;PWNED\u{7}\u{1b}[2Jrun tests",
    ));
    let doc = answer(s.asking("suggest"), 0, |stderr| assert_eq!(stderr, ""));
    assert_eq!(doc["suggestion"], "run tests");
    s.api
        .push(Reply::anthropic_text(&format!("push {ATTACK}it")));
    let doc = answer(s.asking("suggest").arg("--events"), 0, |stderr| {
        assert_eq!(stderr, "");
    });
    assert_eq!(doc["type"], "prompt_suggestion");
    assert_printable("suggest --events", &doc);
    s.api
        .push(Reply::anthropic_text("\u{1b}[31mThanks!\u{1b}[0m"));
    let doc = answer(s.asking("suggest"), 1, |stderr| {
        assert_stderr("suggest", stderr);
        assert_eq!(
            stderr,
            "suggest: rejected: too_few_words: 1 word, and not a reply such as yes, push or a /command\n"
        );
    });
    assert_eq!(doc["rejected"].as_str(), Some("too_few_words"));
    assert_printable("suggest rejected", &doc);
    let doc = answer(
        bounded(&s.home, "suggest").args(["check", "-n", "--", &format!("run the {ATTACK}tests")]),
        0,
        |stderr| assert_eq!(stderr, ""),
    );
    assert_printable("suggest check", &doc);

    // turn-status --engine llm: the detail and the needed action.
    let s = Setup::new(&conversation());
    let reply = json!({"state": "blocked", "detail": format!("push {ATTACK}to main?"),
                       "tempo": "blocked", "needs": format!("say {ATTACK}yes"), "result": ""});
    for surface in ["cli", "bg", "repl"] {
        s.api.push(Reply::anthropic_text(&reply.to_string()));
        let doc = answer(
            s.asking("turn-status").args(["--surface", surface]),
            0,
            |stderr| assert_eq!(stderr, ""),
        );
        assert_printable(surface, &doc);
    }

    // A model error message on stderr and in error.message, in each tool.
    for tool in TOOLS {
        s.api.push(Reply::error(
            400,
            "invalid_request_error",
            &format!("bad {ATTACK}request"),
        ));
        let r = assert_failure(
            tool,
            "error message",
            s.asking(tool),
            4,
            "invalid_request",
            None,
        );
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
        let doc = answer(
            bounded(&home, "turn-status")
                .args(["--surface", surface])
                .stdin(stop(&turn)),
            0,
            |stderr| assert_eq!(stderr, ""),
        );
        assert_printable(surface, &doc);
    }
    let doc = answer(
        bounded(&home, "turn-status").stdin(stop(&turn)),
        0,
        |stderr| assert_eq!(stderr, ""),
    );
    assert_eq!(doc["status_category"], "blocked", "{doc}");
    assert!(
        doc["needs_action"]
            .as_str()
            .is_some_and(|n| n.contains("Should I push ") && n.ends_with("to main?")),
        "{doc}"
    );
    for payload in [
        json!({"hook_event_name": "Notification", "notification_type": "permission_prompt",
               "message": format!("Claude needs your permission {ATTACK}to use Bash")}),
        json!({"hook_event_name": "StopFailure", "error": format!("rate{ATTACK}_limit")}),
    ] {
        let doc = answer(
            bounded(&home, "turn-status").stdin(payload.to_string()),
            0,
            |stderr| assert_eq!(stderr, ""),
        );
        assert_printable("payload", &doc);
    }
    // The transcript's own text, and a --previous status printed again.
    let transcript = home.root.join("t.jsonl");
    Transcript::started(Duration::from_secs(60))
        .user("go")
        .assistant(&format!("Pushed {ATTACK}the fix."))
        .write(&transcript);
    let doc = answer(
        bounded(&home, "turn-status")
            .arg("--transcript")
            .arg(&transcript),
        0,
        |stderr| assert_eq!(stderr, ""),
    );
    assert_eq!(doc["status_category"], "completed", "{doc}");
    assert_printable("transcript", &doc);
    let previous = home.root.join("previous.json");
    std::fs::write(
        &previous,
        format!(
            "{}\n",
            json!({"state": "blocked", "tempo": "blocked", "needs": format!("approve {ATTACK}it")})
        ),
    )
    .unwrap();
    let doc = answer(
        bounded(&home, "turn-status")
            .args(["--surface", "bg", "--previous"])
            .arg(&previous)
            .stdin(stop("")),
        0,
        |stderr| assert_eq!(stderr, ""),
    );
    assert_eq!(doc["needs"], "approve 31mit");

    // A path holding control characters, quoted on stderr and in the message, in each tool.
    let s = Setup::new(&conversation());
    let odd = s.home.root.join(format!("gone{ATTACK}.jsonl"));
    for tool in TOOLS {
        assert_failure(
            tool,
            "odd path",
            s.bare(tool).arg("--transcript").arg(&odd),
            3,
            "environment",
            Some("not_found"),
        );
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
    answer(s.asking("recap").args(["--auto", "-v"]), 0, |stderr| {
        assert_stderr("recap", stderr);
        for gate in gates {
            assert!(
                stderr.contains(&format!("recap: checked {gate}: ")),
                "{gate}: {stderr}"
            );
        }
        assert!(stderr.contains("asking claude-haiku-4-5"), "{stderr}");
        assert!(
            stderr.contains("appended the away_summary record"),
            "{stderr}"
        );
    });

    // A skip names the gates that passed, then the one that said no, and stops there.
    let s = Setup::new(&conversation());
    answer(
        s.asking("recap").args(["--auto", "-v", "--pending-work"]),
        1,
        |stderr| {
            assert_stderr("recap", stderr);
            assert!(
                stderr.contains("recap: checked draft_pending: "),
                "{stderr}"
            );
            assert!(
                stderr.contains("recap: skipped: pending_work: work is still running"),
                "{stderr}"
            );
            assert!(!stderr.contains("checked rate_limited"), "{stderr}");
        },
    );
    // Without -v, the one line.
    let doc = answer(
        s.asking("recap").args(["--auto", "--pending-work"]),
        1,
        |stderr| {
            assert_eq!(
                stderr,
                "recap: skipped: pending_work: work is still running\n"
            );
        },
    );
    assert_eq!(doc["reason"], "pending_work");
    // The default mode says it has no gates.
    s.api
        .push(Reply::anthropic_text("You were fixing the gate test."));
    answer(s.asking("recap").arg("-v"), 0, |stderr| {
        assert!(stderr.contains("no gates"), "{stderr}");
        assert!(!stderr.contains("checked "), "{stderr}");
        assert_eq!(
            stderr,
            format!(
                "recap: read {}: 6 messages of context, 3 real user turns and no away summary, \
                 read to the start\n\
                 recap: default mode (/recap): no gates, nothing is written\n\
                 recap: asking claude-haiku-4-5 about 6 messages\n\
                 recap: summary printed; the default mode writes nothing\n",
                s.transcript.display()
            )
        );
    });
}
