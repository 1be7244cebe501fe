//! `turn-status`: the heuristic table on the messages real sessions end with, every input
//! shape (the real 2.1.332 hook payloads), every sink, `--previous`, `--events`,
//! `--state-file`, and the LLM engine against the fake server.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::transcript::{Transcript, SESSION};
use crate::support::*;

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/claude-code-2.1.332"
);
const KEY: &str = "sk-ant-test-SECRET-0123456789";
/// The session of the real tool-use run (its Stop payload and its transcript).
const REAL_SESSION: &str = "854ac185-82c5-458b-8010-937270238761";
/// The uuid of the last text record of `session-tool-use.jsonl`.
const REAL_LAST_TEXT_UUID: &str = "922c39a3-cee2-42e9-b6aa-f7862893420f";

fn payload(event: &str) -> Value {
    let text = std::fs::read_to_string(format!("{FIXTURES}/hook-input/{event}.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `turn-status` in `home` with `args`, reading `stdin`.
fn status<'a>(home: &ClaudeHome, args: &[&str], stdin: &str) -> Run<'a> {
    Run::new(home, "turn-status")
        .args(args)
        .stdin(stdin)
        .timeout(Duration::from_secs(30))
}

/// A status: exit 0, its one document, nothing on stderr.
#[track_caller]
fn ok(run: Run) -> Value {
    run.success()
        // What the document holds depends on the surface; each caller checks it.
        .stdout_json(|doc| assert!(doc.get("error").is_none(), "{doc}"))
        .stderr_empty()
        .run()
        .json()
}

/// No status (exit 1) or a refusal (2, 3): its one document, whose message is the one line
/// on stderr (after `no status: ` for exit 1).
#[track_caller]
fn refused(run: Run, code: i32) -> Value {
    let message = Rc::new(RefCell::new(String::new()));
    let said = Rc::clone(&message);
    run.code(code)
        .stdout_json(move |doc| {
            *said.borrow_mut() = doc["error"]["message"]
                .as_str()
                .or_else(|| doc["message"].as_str())
                .unwrap_or_else(|| panic!("no message: {doc}"))
                .to_string();
        })
        .stderr_with(move |err| {
            // Exit 1 says why there is no status; a refusal says what is wrong.
            let lead = if code == 1 { "no status: " } else { "" };
            assert_eq!(err, format!("turn-status: {lead}{}\n", message.borrow()));
        })
        .run()
        .json()
}

/// stdout's JSON lines (`--events`).
fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn stop(text: &str) -> String {
    let mut p = payload("Stop");
    p["last_assistant_message"] = json!(text);
    p.to_string()
}

/// Final assistant messages of the kinds real sessions end with, and their category.
fn table() -> Vec<(String, &'static str)> {
    let long_tail = format!(
        "Pushed the branch.\n{}\nThat is all for now.",
        "Notes: the cache layer keeps its old layout for one more release.\n".repeat(15)
    );
    let cases: Vec<(&str, &'static str)> = vec![
        // results, pushes, PRs
        ("Pushed the fix to `main` (abc1234).", "done"),
        ("I've committed the changes as `fix: handle empty stdin`.", "done"),
        ("Opened PR #42: https://github.com/o/r/pull/42", "done"),
        ("Result: 3 files changed, all green.", "done"),
        ("All tests pass (128 passed, 0 failed).", "done"),
        ("The migration is complete. The new column is populated for all 1.2M rows.", "done"),
        ("Merged #17 into main and deleted the branch.", "done"),
        ("Deployed v2.3.1 to staging.", "done"),
        ("## Summary\n\n- Fixed the off-by-one in `tail()`\n- Added a regression test\n\nEverything is committed on `fix/tail`; I haven't pushed it yet.", "done"),
        ("Committed and pushed to origin/feat-x. CI is running now.", "done"),
        ("Here's what I changed:\n\n1. Moved parsing into `args.rs`\n2. Added tests\n\nAll tests passed and the branch is pushed.", "done"),
        // questions and approvals
        ("Should I also update the changelog?", "blocked"),
        ("Do you want me to push this to `main`, or open a PR instead?", "blocked"),
        ("Would you like me to squash the commits before merging?", "blocked"),
        ("The tests pass locally.\n\nWant me to open a PR?", "blocked"),
        ("I need your approval before running `terraform apply`.", "blocked"),
        ("Blocked: the staging database credentials are missing.", "blocked"),
        ("Needs input: which Postgres version should the CI image use", "blocked"),
        ("Awaiting your approval to run the migration on production.", "blocked"),
        ("I'm waiting for your input on the schema before continuing.", "blocked"),
        ("Please run `gh auth login` and then tell me to retry.", "blocked"),
        ("Please provide the API token for the staging environment.", "blocked"),
        ("I couldn't push: the remote rejected the update (protected branch). Please approve the PR so it can be merged.", "blocked"),
        // authentication errors
        ("API Error: 401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key\"}} · Please run /login", "blocked"),
        ("git push failed: Permission denied (publickey).", "blocked"),
        ("The GitHub CLI is not logged in, so I could not open the PR.", "blocked"),
        ("The remote says my OAuth token has expired.", "blocked"),
        // failures and give-ups
        ("API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}", "failed"),
        ("Failed: the build needs a newer glibc than this machine has.", "failed"),
        ("I'm giving up on the flaky test: it fails one run in three and I cannot reproduce it locally.", "failed"),
        ("After three attempts I was unable to complete the upgrade; the lockfile conflicts remain.", "failed"),
        ("Gave up after 3 retries: the registry keeps returning 503.", "failed"),
        // work under way
        ("Let me check the logs for the failing job.", "working"),
        ("Waiting on CI for the checks to finish.", "working"),
        ("The build is running; I'll report back when it finishes.", "working"),
        ("Running the integration tests now.", "working"),
        ("Refactoring is in progress: 4 of 9 modules moved.", "working"),
        ("I haven't committed anything yet. Let me run the full suite first.", "working"),
        ("Once CI is green and all tests pass, I'll merge it.", "working"),
        ("The deploy failed with exit code 137 (out of memory). I'll retry with a larger runner.", "working"),
        // no rule: the last line
        ("I updated the README with the new benchmark figures.", "working"),
        ("Let me know if you'd like any other changes.", "working"),
        ("Here is the fix:\n\n```rust\nlet n = input.parse::<u32>()?\n```\n\nI applied it to `src/args.rs`.", "working"),
        ("```\n$ make test\nok\n```", "working"),
        // CJK
        ("代码已推送到 main 分支。", "done"),
        ("修复已提交 (commit 3f2a1b)。", "done"),
        ("需要你确认一下：要不要删除旧的迁移脚本？", "blocked"),
        ("正在运行测试，请稍候。", "working"),
        ("失败：构建需要更新的 glibc。", "failed"),
        ("The fix is in `src/lib.rs`.\n\n我已完成重构，所有测试都通过了。", "done"),
    ];
    let mut cases: Vec<(String, &'static str)> =
        cases.into_iter().map(|(t, c)| (t.to_string(), c)).collect();
    // Only the last 800 characters count: the push is too far back.
    cases.push((long_tail, "working"));
    cases
}

#[test]
fn heuristic_table_of_real_endings() {
    let home = ClaudeHome::new();
    let cases = table();
    assert!(cases.len() >= 40, "{}", cases.len());
    let mut wrong = Vec::new();
    for (text, expected) in &cases {
        let state = ok(status(&home, &["--surface", "bg"], &stop(text)));
        if state["state"] != *expected {
            wrong.push(format!("{text:?}: expected {expected}, got {state}"));
        }
        assert_eq!(
            state["needs"].as_str().unwrap().is_empty(),
            *expected != "blocked",
            "needs is set exactly when blocked: {text:?} -> {state}"
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn details_come_from_the_deciding_line() {
    let home = ClaudeHome::new();
    let record = |text: &str| ok(status(&home, &[], &stop(text)));
    let r = record("Blocked: the staging database credentials are missing.");
    assert_eq!(r["status_category"], "blocked");
    assert_eq!(
        r["status_detail"],
        "the staging database credentials are missing."
    );
    assert_eq!(
        r["needs_action"],
        "the staging database credentials are missing."
    );
    let r = record(
        "Looked at it.\n\n- **Fixed** the `parse()` bug\n- Updated docs\n\nI updated the README.",
    );
    assert_eq!(r["status_category"], "review_ready");
    assert_eq!(r["status_detail"], "I updated the README.");
    assert_eq!(r["needs_action"], "");
    // A question: its own sentence.
    let r = record("All 212 tests pass. Should I push to main?");
    assert_eq!(r["status_detail"], "Should I push to main?");
    assert_eq!(r["needs_action"], "Should I push to main?");
    let r = record("Result: pushed `v1.2` to origin");
    assert_eq!(r["status_category"], "completed");
    assert_eq!(r["status_detail"], "pushed v1.2 to origin");
    let long = format!("Failed: {}", "the linker ran out of memory ".repeat(10));
    let r = record(&long);
    assert_eq!(r["status_category"], "failed");
    let detail = r["status_detail"].as_str().unwrap();
    assert_eq!(detail.chars().count(), 64, "{detail}");
    assert!(detail.ends_with('…'));
}

#[test]
fn no_escape_or_bidi_control_reaches_the_detail() {
    // The model's text may retitle a terminal, clear it, or reorder what a person reads.
    let home = ClaudeHome::new();
    let evil = "Blocked: run \u{1b}]0;PWNED\u{7}\u{1b}[2Jthe \u{202e}gnp.exe\u{202c} \
                \u{2066}migration\u{2069}\u{202a}\u{202b}\u{202d}\u{2067}\u{2068} first";
    let r = ok(status(&home, &[], &stop(evil)));
    assert_eq!(r["status_category"], "blocked");
    assert_eq!(r["status_detail"], "run the gnp.exe migration first");
    assert_eq!(r["needs_action"], "run the gnp.exe migration first");
    let r = ok(status(&home, &["--surface", "repl"], &stop(evil)));
    assert_eq!(r["headline"], "Blocked: run the gnp.exe migration first");
    // The LLM engine's answer is cleaned the same way.
    let s = Llm::new();
    s.api.push(Reply::anthropic_text(
        &json!({"state": "blocked", "detail": evil, "tempo": "blocked", "needs": "\u{202e}yes\u{1b}[0m", "result": ""})
            .to_string(),
    ));
    let r = s
        .status(&[], &stop("x"))
        .success()
        .stdout_json(|doc| assert_eq!(doc["status_category"], "blocked", "{doc}"))
        .stderr_empty()
        .run()
        .json();
    let detail = r["status_detail"].as_str().unwrap();
    assert!(
        !detail.contains(['\u{1b}', '\u{7}', '\u{202e}', '\u{2066}']) && !detail.contains("PWNED"),
        "{detail:?}"
    );
    assert_eq!(r["needs_action"], "yes");
}

#[test]
fn real_stop_payload_gives_claude_codes_record() {
    let r = ok(status(
        &ClaudeHome::new(),
        &[],
        &payload("Stop").to_string(),
    ));
    let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "type",
            "subtype",
            "summarizes_uuid",
            "status_category",
            "status_detail",
            "needs_action",
            "uuid",
            "session_id"
        ]
    );
    assert_eq!(r["type"], "system");
    assert_eq!(r["subtype"], "post_turn_summary");
    assert_eq!(r["status_category"], "review_ready");
    assert_eq!(r["status_detail"], "Hello from the stub.");
    assert_eq!(r["needs_action"], "");
    assert_eq!(r["session_id"], REAL_SESSION);
    // The payload's transcript_path does not exist on this machine.
    assert_eq!(r["summarizes_uuid"], Value::Null);
    let uuid = r["uuid"].as_str().unwrap();
    assert_eq!(uuid.len(), 36);
    assert_eq!(uuid.as_bytes()[14], b'4', "a v4 uuid: {uuid}");
}

/// The real tool-use transcript copied into the home, and the real payload pointing at it.
fn real_transcript(home: &ClaudeHome, event: &str) -> (PathBuf, Value) {
    let path = home.transcripts_dir().join(format!("{REAL_SESSION}.jsonl"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(format!("{FIXTURES}/session-tool-use.jsonl"), &path).unwrap();
    let mut p = payload(event);
    p["transcript_path"] = json!(path);
    p["cwd"] = json!(home.project);
    (path, p)
}

#[test]
fn summarizes_uuid_comes_from_the_payloads_transcript() {
    let home = ClaudeHome::new();
    let (path, p) = real_transcript(&home, "Stop");
    let r = ok(status(&home, &[], &p.to_string()));
    assert_eq!(r["summarizes_uuid"], REAL_LAST_TEXT_UUID);
    // A text the transcript's last turn does not hold names no record.
    let mut other = p.clone();
    other["last_assistant_message"] = json!("Something else entirely.");
    let r = ok(status(&home, &[], &other.to_string()));
    assert_eq!(r["summarizes_uuid"], Value::Null);
    // --transcript: the same turn, read from the file.
    let r = ok(status(&home, &["--transcript", path.to_str().unwrap()], ""));
    assert_eq!(r["summarizes_uuid"], REAL_LAST_TEXT_UUID);
    assert_eq!(r["status_detail"], "Hello from the stub.");
    assert_eq!(r["session_id"], REAL_SESSION);
}

#[test]
fn every_real_payload_shape() {
    let home = ClaudeHome::new();
    // Events without last_assistant_message read the last turn of their transcript_path.
    for event in [
        "PreToolUse",
        "PostToolUse",
        "UserPromptSubmit",
        "SessionStart",
        "SessionEnd",
    ] {
        let (_, p) = real_transcript(&home, event);
        let r = ok(status(&home, &[], &p.to_string()));
        assert_eq!(r["summarizes_uuid"], REAL_LAST_TEXT_UUID, "{event}");
        assert_eq!(r["session_id"], REAL_SESSION, "{event}");
        // As shipped, their transcript_path does not exist here: a turn with no text yet.
        let out = status(&home, &[], &payload(event).to_string())
            .code(1)
            .stdout_json(|doc| {
                assert_eq!(doc["reason"], "no_text", "{event}");
            })
            .stderr_is("turn-status: no status: the turn has no new assistant text\n")
            .run()
            .json();
        assert_eq!(out["message"], "the turn has no new assistant text");
    }
}

#[test]
fn stop_failure_is_failed_with_its_text_or_error() {
    let mut p = payload("Stop");
    p["hook_event_name"] = json!("StopFailure");
    p["error"] = json!("rate_limit");
    p["last_assistant_message"] = json!("API Error: Rate limit reached for requests");
    let r = ok(status(&ClaudeHome::new(), &[], &p.to_string()));
    assert_eq!(r["status_category"], "failed");
    assert_eq!(
        r["status_detail"],
        "API Error: Rate limit reached for requests"
    );
    assert_eq!(r["needs_action"], "");
    p.as_object_mut().unwrap().remove("last_assistant_message");
    let r = ok(status(&ClaudeHome::new(), &[], &p.to_string()));
    assert_eq!(
        (r["status_category"].clone(), r["status_detail"].clone()),
        (json!("failed"), json!("rate_limit"))
    );
    // Even a text that would read as done: the turn ended on an error.
    p["last_assistant_message"] = json!("Pushed.");
    assert_eq!(
        ok(status(&ClaudeHome::new(), &[], &p.to_string()))["status_category"],
        "failed"
    );
}

#[test]
fn permission_prompts_block_at_once() {
    let mut p = payload("Stop");
    p["hook_event_name"] = json!("Notification");
    p["notification_type"] = json!("permission_prompt");
    p["message"] = json!("Claude needs your permission to use Bash");
    p.as_object_mut().unwrap().remove("last_assistant_message");
    let r = ok(status(&ClaudeHome::new(), &[], &p.to_string()));
    assert_eq!(r["status_category"], "blocked");
    assert_eq!(
        r["status_detail"],
        "Claude needs your permission to use Bash"
    );
    assert_eq!(r["needs_action"], "answer the permission prompt");
    assert_eq!(r["session_id"], REAL_SESSION);
    // Another notification is not a block: its transcript decides (none here: no text).
    p["notification_type"] = json!("idle_prompt");
    refused(status(&ClaudeHome::new(), &[], &p.to_string()), 1);
    // The flag wins over a text that would read as done.
    let r = ok(status(
        &ClaudeHome::new(),
        &["--permission-blocked", "--surface", "bg"],
        &stop("Pushed."),
    ));
    assert_eq!(
        r,
        json!({"state": "blocked", "tempo": "blocked", "needs": "answer the permission prompt"})
    );
    let r = ok(status(
        &ClaudeHome::new(),
        &["--permission-blocked", "-n", "--session", "s-1"],
        "",
    ));
    assert_eq!(r["status_category"], "blocked");
    assert_eq!(r["session_id"], "s-1");
}

#[test]
fn a_transcript_turn_is_read_from_the_end() {
    let home = ClaudeHome::new();
    let path = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
    let t = Transcript::started(Duration::from_secs(60))
        .user("ship it")
        .assistant_tool("Pushing now.", "Bash", json!({"command": "git push"}))
        .tool_result("ok")
        .assistant("Pushed to origin/main.")
        .session_end_noise();
    t.write(&path);
    let args = ["--transcript", path.to_str().unwrap()];
    let r = ok(status(&home, &args, ""));
    assert_eq!(r["status_category"], "completed");
    assert_eq!(r["status_detail"], "Pushed to origin/main.");
    assert_eq!(r["session_id"], SESSION);
    assert_eq!(r["summarizes_uuid"], "00000000-0000-4000-9000-000000000005");
    // A new user turn with no answer yet: nothing new to report.
    t.user("and tag it").write(&path);
    let out = refused(status(&home, &args, ""), 1);
    assert_eq!(out["reason"], "no_text");
    // An API error record: failed with its text.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&json!({"type": "assistant", "uuid": "err-1", "isApiErrorMessage": true, "error": "unknown",
        "message": {"model": "<synthetic>", "role": "assistant", "content": [{"type": "text", "text": "API Error: 500 Internal server error"}]}}).to_string());
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    let r = ok(status(&home, &args, ""));
    assert_eq!(r["status_category"], "failed");
    assert_eq!(r["status_detail"], "API Error: 500 Internal server error");
    assert_eq!(r["summarizes_uuid"], "err-1");
}

#[test]
fn a_statusline_payload_reads_its_transcript() {
    let home = ClaudeHome::new();
    let (path, _) = real_transcript(&home, "Stop");
    // What Claude Code gives a statusLine command: no hook_event_name.
    let stdin = json!({"session_id": REAL_SESSION, "transcript_path": path, "cwd": home.project,
        "model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet"}, "version": "2.1.332"});
    let r = ok(status(&home, &["--surface", "repl"], &stdin.to_string()));
    assert_eq!(r, json!({"headline": "Working: Hello from the stub."}));
}

#[test]
fn every_surface_maps_to_its_sink() {
    let text = stop("Should I push?");
    for surface in ["cli", "ccr", "bridge", "desktop"] {
        let r = ok(status(&ClaudeHome::new(), &["--surface", surface], &text));
        assert_eq!(r["subtype"], "post_turn_summary", "{surface}");
        assert_eq!(r["status_category"], "blocked", "{surface}");
    }
    for surface in ["bg", "watched"] {
        let r = ok(status(&ClaudeHome::new(), &["--surface", surface], &text));
        assert_eq!(
            r,
            json!({"state": "blocked", "tempo": "blocked", "needs": "Should I push?"}),
            "{surface}"
        );
    }
    let r = ok(status(&ClaudeHome::new(), &["--surface", "repl"], &text));
    assert_eq!(r, json!({"headline": "Blocked: Should I push?"}));
    for (text, state, tempo) in [
        ("Pushed.", "done", "idle"),
        ("Let me look.", "working", "active"),
        ("Giving up.", "failed", "idle"),
    ] {
        let r = ok(status(
            &ClaudeHome::new(),
            &["--surface", "watched"],
            &stop(text),
        ));
        assert_eq!(
            r,
            json!({"state": state, "tempo": tempo, "needs": ""}),
            "{text}"
        );
    }
    let clap = "invalid value 'tty' for '--surface <SURFACE>'\n  \
                [possible values: cli, ccr, bridge, desktop, bg, watched, repl]";
    status(&ClaudeHome::new(), &["--surface", "tty"], &text)
        .code(2)
        .stdout_json(|out| {
            assert_eq!(out["error"]["kind"], "usage");
            assert_eq!(out["error"]["message"], clap);
        })
        .stderr_is(usage_stderr(
            "turn-status",
            "invalid value 'tty' for '--surface <SURFACE>' \
             [possible values: cli, ccr, bridge, desktop, bg, watched, repl]",
        ))
        .run();
}

#[test]
fn events_clear_first_then_the_result() {
    status(
        &ClaudeHome::new(),
        &["--events", "--surface", "repl"],
        &stop("Pushed the tag."),
    )
    .success()
    .stdout_with(|out| {
        assert_eq!(
            lines(out),
            [
                json!({"post_turn_summary": null}),
                json!({"headline": "Done: Pushed the tag."})
            ]
        );
    })
    .stderr_empty()
    .run();
}

#[test]
fn state_file_ends_holding_the_result() {
    use std::os::unix::fs::MetadataExt;
    let home = ClaudeHome::new();
    let file = home.root.join("cache/dreamkit/status.json");
    let f = file.to_str().unwrap();
    let out = status(&home, &["--state-file", f], &stop("Opened PR #7."))
        .success()
        .stdout_json(|doc| assert_eq!(doc["status_category"], "completed", "{doc}"))
        .stderr_empty()
        .run();
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(written, format!("{}\n", out.stdout.trim_end()));
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(file.parent().unwrap()).unwrap().mode() & 0o777,
        0o700
    );
    let names: Vec<_> = std::fs::read_dir(file.parent().unwrap()).unwrap().collect();
    assert_eq!(names.len(), 1, "no temporary file left");
    // Bad input changes nothing.
    let out = refused(
        status(
            &home,
            &["--state-file", f],
            r#"{"hook_event_name":"Stop","last_assistant_message":5}"#,
        ),
        2,
    );
    assert_eq!(out["error"]["kind"], "bad_input");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), written);
    // A directory or FIFO is not a state file: the environment, not the caller (exit 3).
    let dir = home.root.join("a-dir");
    std::fs::create_dir(&dir).unwrap();
    let out = refused(
        status(&home, &["--state-file", dir.to_str().unwrap()], &stop("x")),
        3,
    );
    assert_eq!(out["error"]["kind"], "environment");
    assert_eq!(out["error"]["reason"], "not_a_file");
    assert_eq!(
        out["error"]["message"],
        format!(
            "--state-file {} is not a regular file (a directory)",
            dir.display()
        )
    );
}

#[test]
fn previous_is_reused_for_a_turn_with_no_new_text() {
    let home = ClaudeHome::new();
    let file = home.root.join("status.json");
    let f = file.to_str().unwrap();
    let both = ["--previous", f, "--state-file", f];
    let first = status(&home, &both, &stop("Committed as 3f2a1b."))
        .success()
        .stdout_json(|doc| assert_eq!(doc["status_category"], "completed", "{doc}"))
        .stderr_empty()
        .run();
    // A turn with no text: the previous status again, file unchanged in content.
    status(&home, &both, &stop(""))
        .success()
        .stdout_is(first.stdout.clone())
        .stderr_empty()
        .run();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), first.stdout);
    // With --events the clear comes first here too.
    status(&home, &["--previous", f, "--events"], &stop("  "))
        .success()
        .stdout_with(|out| {
            let events = lines(out);
            assert_eq!(events.len(), 2, "{out}");
            assert_eq!(events[0], json!({"post_turn_summary": null}));
            assert_eq!(events[1].to_string(), first.stdout.trim_end());
        })
        .stderr_empty()
        .run();
    // Another sink's shape is no status for this one: nothing to report.
    let out = refused(
        status(&home, &["--previous", f, "--surface", "repl"], &stop("")),
        1,
    );
    assert!(out["message"].as_str().unwrap().contains("headline"));
    // No previous file at all: nothing to report, nothing written.
    let missing = home.root.join("none.json");
    let m = missing.to_str().unwrap();
    let in_new_dir = home.root.join("new-dir/status.json");
    let n = in_new_dir.to_str().unwrap();
    let out = refused(
        status(&home, &["--previous", m, "--state-file", n], &stop("")),
        1,
    );
    assert_eq!(out["reason"], "no_text");
    assert!(out["message"]
        .as_str()
        .unwrap()
        .starts_with("the turn has no new assistant text"));
    assert!(!missing.exists());
    assert!(!home.root.join("new-dir").exists(), "nothing written");
    status(&home, &["-q", "--previous", m], &stop(""))
        .code(1)
        .stdout_json(|out| assert_eq!(out["reason"], "no_text"))
        .stderr_empty()
        .run();
    // A previous file that is not JSON is bad input.
    std::fs::write(&missing, "not json\n").unwrap();
    let out = refused(status(&home, &["--previous", m], &stop("")), 2);
    assert_eq!(out["error"]["kind"], "bad_input");
}

#[test]
fn wrong_json_types_are_bad_input() {
    for bad in [
        json!({"hook_event_name": "Stop", "last_assistant_message": 5}),
        json!({"hook_event_name": "Stop", "last_assistant_message": ["a"]}),
        json!({"hook_event_name": "Stop", "session_id": true, "last_assistant_message": "x"}),
        json!({"hook_event_name": "Stop", "transcript_path": 1}),
        json!({"hook_event_name": "Notification", "notification_type": ["permission_prompt"]}),
        json!({"hook_event_name": "Notification", "notification_type": "permission_prompt", "message": 3}),
        json!({"hook_event_name": "StopFailure", "error": {"type": "rate_limit"}}),
        json!({"hook_event_name": "StopFailure", "error_details": 429}),
        json!({"hook_event_name": 7, "last_assistant_message": "x"}),
        json!({"session_id": "s", "transcript_path": false}),
    ] {
        // One line on stderr: the document's message.
        let out = refused(status(&ClaudeHome::new(), &[], &bad.to_string()), 2);
        assert_eq!(out["error"]["kind"], "bad_input", "{bad}");
    }
    for bad in ["[1]", "\"text\"", "{", "null"] {
        let out = refused(status(&ClaudeHome::new(), &[], bad), 2);
        assert_eq!(out["error"]["kind"], "bad_input", "{bad}");
    }
    // Nothing to classify is a usage error.
    let out = refused(status(&ClaudeHome::new(), &["-n"], ""), 2);
    assert_eq!(out["error"]["kind"], "usage");
    let out = refused(
        status(&ClaudeHome::new(), &[], r#"{"hook_event_name":"Stop"}"#),
        2,
    );
    assert!(out["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Stop payload"));
}

#[test]
fn a_fifo_transcript_is_refused_not_waited_on() {
    let home = ClaudeHome::new();
    let fifo = home.root.join("t.jsonl");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = refused(
        status(&home, &["--transcript", fifo.to_str().unwrap()], ""),
        3,
    );
    assert_eq!(out["error"]["kind"], "environment");
    assert_eq!(out["error"]["reason"], "not_a_file");
    let missing = home.root.join("missing.jsonl");
    // A named transcript that cannot be read: exit 3.
    let out = refused(
        status(&home, &["--transcript", missing.to_str().unwrap()], ""),
        3,
    );
    assert_eq!(out["error"]["reason"], "not_found");
}

#[test]
fn the_heuristic_never_reads_the_model_settings() {
    // A model setting that would be a usage error for the LLM engine is not even read.
    let env = [
        ("ANTHROPIC_BASE_URL", "ftp://nowhere"),
        ("DREAMKIT_PROVIDER", "openai"),
    ];
    let home = ClaudeHome::new();
    ok(status(&home, &[], &stop("Pushed.")).envs(env));
    let out = refused(
        status(&home, &["--engine", "llm"], &stop("Pushed.")).envs(env),
        2,
    );
    assert_eq!(out["error"]["kind"], "usage");
    let message = "DREAMKIT_TURN_STATUS_ENGINE=\"magic\": expected one of heuristic, llm";
    status(&home, &[], &stop("Pushed."))
        .env("DREAMKIT_TURN_STATUS_ENGINE", "magic")
        .code(2)
        .stdout_json(|out| {
            assert_eq!(out["error"]["kind"], "usage");
            assert_eq!(out["error"]["message"], message);
            assert!(out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("DREAMKIT_TURN_STATUS_ENGINE"));
        })
        .stderr_is(usage_stderr("turn-status", message))
        .run();
}

// The LLM engine against the fake server.

struct Llm {
    home: ClaudeHome,
    api: FakeApi,
}

impl Llm {
    fn new() -> Self {
        Llm {
            home: ClaudeHome::new(),
            api: FakeApi::start(),
        }
    }

    /// `turn-status --engine llm` against the fake server.
    fn status<'a>(&self, args: &[&str], stdin: &str) -> Run<'a> {
        let mut all = vec!["--engine", "llm"];
        all.extend_from_slice(args);
        status(&self.home, &all, stdin)
            .env("ANTHROPIC_BASE_URL", self.api.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .env("DREAMKIT_RETRY_BASE_MS", "1")
    }
}

const GOOD: &str = r#"{"state":"blocked","detail":"asks whether to push to main","tempo":"blocked","needs":"say yes or no to the push","result":""}"#;

#[test]
fn llm_engine_classifies_with_the_small_model() {
    let s = Llm::new();
    s.api
        .push(Reply::anthropic_text(&format!("```json\n{GOOD}\n```")));
    let long = format!("{}\nShall I push this to main?", "filler ".repeat(600));
    let r = s
        .status(&[], &stop(&long))
        .success()
        .stdout_json(|doc| assert_eq!(doc["status_category"], "blocked", "{doc}"))
        .stderr_empty()
        .run()
        .json();
    assert_eq!(r["status_category"], "blocked");
    assert_eq!(r["status_detail"], "asks whether to push to main");
    assert_eq!(r["needs_action"], "say yes or no to the push");
    let requests = s.api.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0].body;
    assert_eq!(requests[0].header("x-api-key"), Some(KEY));
    assert_eq!(body["model"], "claude-haiku-4-5");
    assert!(body.get("tools").is_none() && body.get("thinking").is_none());
    assert_eq!(body["max_tokens"], 300);
    let prompt = body["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(prompt.contains("Shall I push this to main?"));
    // Only the last 2,000 characters of the text are sent.
    let sent = prompt.matches("filler").count();
    assert!(sent < 300 && sent > 200, "{sent}");
    assert!(body["system"][0]["text"]
        .as_str()
        .unwrap()
        .contains("\"state\""));
    // The state sink takes the model's tempo.
    s.api.push(Reply::anthropic_text(
        r#"{"state":"working","detail":"CI running","tempo":"idle","needs":"","result":""}"#,
    ));
    let r = s
        .status(&["--surface", "bg"], &stop("x"))
        .success()
        .stdout_json(|doc| assert_eq!(doc["state"], "working", "{doc}"))
        .stderr_empty()
        .run()
        .json();
    assert_eq!(r, json!({"state": "working", "tempo": "idle", "needs": ""}));
}

#[test]
fn llm_malformed_first_reply_gets_one_format_correction() {
    let s = Llm::new();
    s.api.push(Reply::anthropic_text(
        "It looks like the assistant is waiting.",
    ));
    s.api.push(Reply::anthropic_text(GOOD));
    s.status(&[], &stop("Shall I push?"))
        .success()
        .stdout_json(|out| assert_eq!(out["status_category"], "blocked"))
        .stderr_empty()
        .run();
    let requests = s.api.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["content"][0]["text"],
        "It looks like the assistant is waiting."
    );
    let correction = messages[2]["content"][0]["text"].as_str().unwrap();
    assert!(correction.contains("only the JSON"), "{correction}");
}

#[test]
fn llm_two_malformed_replies_exit_4_unless_falling_back() {
    let s = Llm::new();
    let file = s.home.root.join("status.json");
    let f = file.to_str().unwrap();
    s.api.push(Reply::anthropic_text("done, I think"));
    s.api.push(Reply::anthropic_text(
        r#"{"state":"finished","detail":"x"}"#,
    ));
    let out = s
        .status(&["--events", "--state-file", f], &stop("Pushed to main."))
        .code(4)
        .stdout_with(|out| assert_eq!(out.lines().count(), 2, "{out}"))
        .stderr_is(
            "turn-status: llm engine failed: malformed_response: the model's reply is not the \
             status JSON, twice: no JSON object in the reply; then `state` \"finished\" is not a state\n",
        )
        .run();
    let lines = lines(&out.stdout);
    assert_eq!(lines[0], json!({"post_turn_summary": null}));
    assert_eq!(lines[1]["post_turn_summary"], Value::Null);
    assert_eq!(lines[1]["error"]["kind"], "malformed_response");
    assert_eq!(lines[1]["error"]["attempts"], 2);
    assert_eq!(lines[1]["usage"]["input_tokens"], 240);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("{}\n", lines[1])
    );

    s.api.push(Reply::anthropic_text("done, I think"));
    s.api.push(Reply::anthropic_text("still not JSON"));
    s.status(&["--fallback", "heuristic"], &stop("Pushed to main."))
        .success()
        .stdout_json(|out| assert_eq!(out["status_category"], "completed"))
        .stderr_is(
            "turn-status: llm engine failed (malformed_response: the model's reply is not the \
             status JSON, twice: no JSON object in the reply; then no JSON object in the reply); \
             classified with the rule table\n",
        )
        .run();
    assert_eq!(s.api.requests().len(), 4);
}

#[test]
fn llm_server_failure_exits_4_with_the_error() {
    let s = Llm::new();
    s.api.push(Reply::error(500, "api_error", "boom"));
    s.status(&["--retries", "0"], &stop("Pushed."))
        .code(4)
        .stdout_json(|r| {
            assert_eq!(r["post_turn_summary"], Value::Null);
            assert_eq!(r["error"]["kind"], "server");
            assert_eq!(r["error"]["status"], 500);
        })
        .stdout_with(|out| assert!(!out.contains(KEY)))
        .stderr_with(|err| assert!(!err.contains(KEY)))
        .stderr_is("turn-status: llm engine failed: server: boom\n")
        .run();
}

#[test]
fn llm_state_file_is_cleared_before_the_model_is_asked() {
    let s = Llm::new();
    let file = s.home.root.join("status.json");
    std::fs::write(&file, "{\"headline\":\"old\"}\n").unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (seen2, file2) = (seen.clone(), file.clone());
    s.api.push(Reply::After(
        Box::new(move || {
            *seen2.lock().unwrap() = std::fs::read_to_string(&file2).unwrap_or_default();
        }),
        Box::new(Reply::anthropic_text(GOOD)),
    ));
    s.status(
        &["--surface", "repl", "--state-file", file.to_str().unwrap()],
        &stop("?"),
    )
    .success()
    .stdout_json(|out| {
        assert_eq!(
            *out,
            json!({"headline": "Blocked: asks whether to push to main"})
        );
    })
    .stderr_empty()
    .run();
    assert_eq!(*seen.lock().unwrap(), "{\"post_turn_summary\":null}\n");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "{\"headline\":\"Blocked: asks whether to push to main\"}\n"
    );
}

/// The `epoll_create*` calls of one run, as strace saw them; `None` when strace cannot trace
/// here (not installed, or ptrace refused). The run classifies `Pushed the fix.` as
/// `category` and prints nothing on stderr.
fn epoll_calls(
    home: &ClaudeHome,
    args: &[&str],
    env: &[(&str, &str)],
    category: &str,
) -> Option<String> {
    if !strace_traces() {
        return None;
    }
    let log = home.root.join(format!("strace-{}.txt", args.len()));
    let mut strace = home.process("strace");
    strace
        .args(["-f", "-qq", "-e", "trace=epoll_create1,epoll_create", "-o"])
        .arg(&log)
        .arg(bin_path("turn-status"))
        .args(args);
    Run::command(strace, "strace turn-status")
        .envs(env.iter().copied())
        .stdin(stop("Pushed the fix."))
        .success()
        .stdout_json(|doc| assert_eq!(doc["status_category"], category))
        .stderr_empty()
        .run();
    Some(std::fs::read_to_string(&log).expect("strace's log"))
}

#[test]
fn the_heuristic_starts_no_async_runtime() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    api.push(Reply::anthropic_text(GOOD));
    let url = api.url();
    let env = [
        ("ANTHROPIC_BASE_URL", url.as_str()),
        ("ANTHROPIC_API_KEY", KEY),
    ];
    // The LLM engine's runtime opens an epoll instance: the check is not blind.
    let Some(llm) = epoll_calls(&home, &["--engine", "llm"], &env, "blocked") else {
        crate::support::skip(
            "turn-status syscalls",
            "strace is not available or may not trace here",
        );
        return;
    };
    assert!(llm.contains("epoll_create"), "{llm}");
    let heuristic = epoll_calls(&home, &[], &env, "completed").expect("strace ran before");
    assert!(!heuristic.contains("epoll_create"), "{heuristic}");
}

// The plugin's Stop hook (plugin/scripts/turn-status.sh), as Claude Code runs it.

/// The plugin's turn-status hook in `home`, the built binaries first on PATH, reading `stdin`.
fn plugin_hook<'a>(home: &ClaudeHome, stdin: &str) -> Run<'a> {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin/scripts/turn-status.sh");
    let bin = bin_path("turn-status").parent().unwrap().to_path_buf();
    let mut cmd = home.process("sh");
    cmd.arg(script)
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("XDG_CACHE_HOME", home.root.join("cache"))
        .env("CLAUDE_CODE_SESSION_ID", "s-hook")
        .env("DREAMKIT_PLUGIN_TURN_STATUS", "1")
        // No Claude Code client unless the test names one.
        .env("DREAMKIT_CLAUDE_BIN", home.root.join("no-claude-here"));
    Run::command(cmd, "plugin/scripts/turn-status.sh").stdin(stdin)
}

/// With the llm engine and a server that accepts and never answers, the Stop hook does not
/// hold the turn: the model gets its few seconds, then the rule table classifies, and the
/// status file holds that. (The run's own timeout, far below the 3 minutes a model request
/// may take by default, kills a hook that waits on.)
#[test]
fn the_plugin_hook_with_the_llm_engine_and_an_endless_server_falls_back() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    for _ in 0..4 {
        api.push(Reply::Hang(Duration::from_secs(600)));
    }
    plugin_hook(&home, &stop("Pushed the fix to main."))
        .env("DREAMKIT_TURN_STATUS_ENGINE", "llm")
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", KEY)
        .timeout(Duration::from_secs(60))
        .code(0)
        .stdout_empty()
        .stderr_empty()
        .run();
    assert_eq!(api.requests().len(), 1, "the model was asked once");
    let file = home.root.join("cache/dreamkit/status-s-hook.json");
    let status: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(status["status_category"], "completed", "{status}");
    assert_eq!(
        status["status_detail"], "Pushed the fix to main.",
        "{status}"
    );
    assert_eq!(mode(&std::fs::metadata(&file).unwrap()), 0o600);

    // Without a credential the model is not asked at all: the rule table, at once.
    let home = ClaudeHome::new();
    plugin_hook(&home, &stop("Blocked: needs your approval to push."))
        .env("DREAMKIT_TURN_STATUS_ENGINE", "llm")
        .env("ANTHROPIC_BASE_URL", api.url())
        .code(0)
        .stdout_empty()
        .stderr_empty()
        .run();
    assert_eq!(api.requests().len(), 1, "no second request");
    let status: Value = serde_json::from_str(
        &std::fs::read_to_string(home.root.join("cache/dreamkit/status-s-hook.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(status["status_category"], "blocked", "{status}");
}

/// With the llm engine and no API key, the user's own Claude Code classifies in the
/// background: the hook returns at once (nothing on stdout or stderr), and the status file
/// holds the model's answer when it comes.
#[test]
fn the_plugin_hook_through_the_users_client_runs_in_the_background() {
    let home = ClaudeHome::new();
    let client = crate::support::claude_code::stand_in_answering(
        &home,
        &json!({"type": "result", "subtype": "success", "is_error": false, "result": "",
            "num_turns": 2, "total_cost_usd": 0.0001,
            "usage": {"input_tokens": 5, "output_tokens": 3},
            "structured_output": serde_json::from_str::<Value>(GOOD).unwrap()}),
        0,
    );
    plugin_hook(&home, &stop("Shall I push this to main?"))
        .env("DREAMKIT_TURN_STATUS_ENGINE", "llm")
        .env("DREAMKIT_CLAUDE_BIN", &client)
        .env("XDG_STATE_HOME", home.root.join("state"))
        .code(0)
        .stdout_empty()
        .stderr_empty()
        .run();
    let file = home.root.join("cache/dreamkit/status-s-hook.json");
    crate::support::wait::busy_until("the background status", || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.contains("asks whether to push"))
    });
    let status: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(status["status_category"], "blocked", "{status}");
    let args = std::fs::read_to_string(home.root.join("claude-args")).unwrap();
    assert!(
        args.contains("--json-schema") && args.contains("--model haiku"),
        "{args}"
    );
}
