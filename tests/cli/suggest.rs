//! `suggest` as a user drives it: every suppression reason through the binary (no request
//! made), generation against the fake model server, the filters on its replies, `--events`,
//! model failures, and `suggest check` with no network and no async runtime.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::transcript::{Transcript, SESSION};
use crate::support::*;

const KEY: &str = "sk-ant-test-SECRET-suggest";
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/claude-code-2.1.332/session-suggest.jsonl"
);
/// The session id inside the fixture.
const FIXTURE_SESSION: &str = "db6a9c44-5562-4bc9-91dc-255a839791ce";

const NO_USAGE: &str = r#"{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}"#;

/// Two assistant turns (the first written as a text and a tool_use record sharing message.id),
/// the last with a warm cache.
fn warm() -> Transcript {
    Transcript::started(Duration::from_secs(600))
        .user("the gate test is flaky, look at it")
        .assistant_tool(
            "Running it in a loop.",
            "Bash",
            json!({"command": "cargo test gate -- --test-threads=1", "description": "loop"}),
        )
        .tool_result("ok")
        .assistant("Fixed: the test raced the scan stamp; it now waits for it.")
        .session_end_noise()
}

struct Setup {
    home: ClaudeHome,
    api: FakeApi,
    transcript: PathBuf,
}

fn setup(t: &Transcript) -> Setup {
    let home = ClaudeHome::new();
    let transcript = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
    t.write(&transcript);
    Setup {
        home,
        api: FakeApi::start(),
        transcript,
    }
}

fn setup_fixture() -> Setup {
    let home = ClaudeHome::new();
    let transcript = home
        .transcripts_dir()
        .join(format!("{FIXTURE_SESSION}.jsonl"));
    std::fs::create_dir_all(transcript.parent().unwrap()).unwrap();
    std::fs::copy(FIXTURE, &transcript).unwrap();
    Setup {
        home,
        api: FakeApi::start(),
        transcript,
    }
}

impl Setup {
    /// `suggest` pointed at the fake server, without the transcript flag.
    fn bare(&self) -> assert_cmd::Command {
        let mut cmd = self.home.cmd("suggest");
        cmd.env("ANTHROPIC_BASE_URL", self.api.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .env("DREAMKIT_RETRY_BASE_MS", "1");
        cmd
    }

    fn cmd(&self) -> assert_cmd::Command {
        let mut cmd = self.bare();
        cmd.arg("--transcript").arg(&self.transcript);
        cmd
    }

    fn run(&self, args: &[&str]) -> (i32, Value, String) {
        outcome(self.cmd().args(args).output().expect("run suggest"))
    }

    fn stop_payload(&self, extra: Value) -> String {
        let mut payload = json!({
            "session_id": "11111111-2222-4333-8444-555555555555",
            "transcript_path": self.transcript,
            "cwd": self.home.project,
            "permission_mode": "default",
            "hook_event_name": "Stop",
            "stop_hook_active": false,
            "last_assistant_message": "Fixed.",
        });
        if let (Some(p), Value::Object(extra)) = (payload.as_object_mut(), extra) {
            p.extend(extra);
        }
        payload.to_string()
    }
}

fn outcome(out: std::process::Output) -> (i32, Value, String) {
    (
        out.status.code().expect("exit code"),
        stdout_json(&out),
        stderr_text(&out),
    )
}

fn usage(input: u64, output: u64, writes: u64) -> Value {
    json!({"input_tokens": input, "output_tokens": output,
           "cache_creation_input_tokens": writes, "cache_read_input_tokens": 30000})
}

/// The usage the fake server reports for every answer.
fn fake_usage() -> Value {
    json!({"input_tokens": 120, "output_tokens": 18, "cache_creation_input_tokens": 0,
           "cache_read_input_tokens": 40})
}

#[test]
fn every_suppression_reason_in_order_with_no_request() {
    let early = Transcript::started(Duration::from_secs(600))
        .user("list the crates")
        .assistant_tool("Listing.", "Bash", json!({"command": "cargo tree"}))
        .session_end_noise();
    let compacted = warm()
        .compact_boundary()
        .user("continue")
        .assistant("Continuing.")
        .session_end_noise();
    let error_only = Transcript::started(Duration::from_secs(600))
        .user("hi")
        .api_error("API Error: 529 overloaded");
    let errored = warm()
        .user("and the docs?")
        .api_error("API Error: 529 overloaded");
    let cold = warm()
        .user("now the README")
        .assistant_with_usage("Updated the README.", usage(9000, 500, 501));
    let fixture = Transcript::started(Duration::from_secs(1)); // replaced by the fixture below
    let plan = json!({"permission_mode": "plan"});
    type Case<'a> = (
        &'a str,
        &'a Transcript,
        &'a [&'a str],
        &'a [(&'a str, &'a str)],
        Option<Value>,
        &'a str,
    );
    let all_flags: &[&str] = &[
        "--pending-permission",
        "--elicitation",
        "--plan-mode",
        "--rate-limited",
    ];
    let cases: &[Case] = &[
        (
            "switch off beats everything",
            &early,
            all_flags,
            &[("CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION", "false")],
            None,
            "disabled",
        ),
        (
            "settings off",
            &warm(),
            &[],
            &[],
            None,
            "disabled_by_settings",
        ),
        (
            "switch on beats the settings",
            &early,
            &[],
            &[("CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION", "1")],
            None,
            "early_conversation_with_settings_off",
        ),
        (
            "one turn of two records",
            &early,
            all_flags,
            &[],
            None,
            "early_conversation",
        ),
        (
            "a compact boundary restarts the count",
            &compacted,
            &[],
            &[],
            None,
            "early_conversation",
        ),
        (
            "a lone API error is one turn",
            &error_only,
            &[],
            &[],
            None,
            "early_conversation",
        ),
        (
            "API error",
            &errored,
            all_flags,
            &[],
            None,
            "last_response_error",
        ),
        (
            "permission prompt",
            &cold,
            all_flags,
            &[],
            None,
            "pending_permission",
        ),
        (
            "elicitation",
            &cold,
            &["--elicitation", "--plan-mode", "--rate-limited"],
            &[],
            None,
            "elicitation_active",
        ),
        (
            "plan mode flag",
            &cold,
            &["--plan-mode", "--rate-limited"],
            &[],
            None,
            "plan_mode",
        ),
        (
            "plan mode from the payload",
            &cold,
            &["--rate-limited"],
            &[],
            Some(plan),
            "plan_mode",
        ),
        (
            "permission prompt notification",
            &cold,
            &["--elicitation"],
            &[],
            Some(
                json!({"hook_event_name": "Notification", "notification_type": "permission_prompt"}),
            ),
            "pending_permission",
        ),
        (
            "elicitation notification",
            &cold,
            &["--plan-mode"],
            &[],
            Some(
                json!({"hook_event_name": "Notification", "notification_type": "elicitation_dialog"}),
            ),
            "elicitation_active",
        ),
        (
            "an idle notification is no reason",
            &cold,
            &[],
            &[],
            Some(json!({"hook_event_name": "Notification", "notification_type": "idle_prompt"})),
            "cache_cold",
        ),
        (
            "rate limit",
            &cold,
            &["--rate-limited"],
            &[],
            None,
            "rate_limit",
        ),
        ("cold cache", &cold, &[], &[], None, "cache_cold"),
        (
            "the real fixture passes the transcript gates",
            &fixture,
            &["--rate-limited"],
            &[],
            None,
            "rate_limit",
        ),
    ];
    for (name, transcript, args, env, payload, expected) in cases {
        let s = if std::ptr::eq(*transcript, &fixture) {
            setup_fixture()
        } else {
            setup(transcript)
        };
        let mut expected = *expected;
        if expected.ends_with("settings") || expected.ends_with("settings_off") {
            s.home.write(
                "home/.claude/settings.json",
                r#"{"promptSuggestionEnabled": false}"#,
            );
            expected = expected
                .trim_end_matches("_with_settings_off")
                .trim_end_matches("_by_settings");
        }
        let mut cmd = match payload {
            Some(extra) => {
                let mut cmd = s.bare();
                cmd.write_stdin(s.stop_payload(extra.clone()));
                cmd
            }
            None => s.cmd(),
        };
        for (k, v) in *env {
            cmd.env(k, v);
        }
        let (code, out, stderr) = outcome(cmd.args(*args).output().unwrap());
        assert_eq!(code, 1, "{name}: {out}");
        assert_eq!(
            out,
            json!({"suppressed": expected, "usage": serde_json::from_str::<Value>(NO_USAGE).unwrap()}),
            "{name}"
        );
        assert!(
            stderr.starts_with(&format!("suggest: suppressed: {expected}: ")),
            "{name}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(s.api.requests().is_empty(), "{name}: a request was made");
        // -q: the same answer, nothing on stderr.
        if *name == "cold cache" {
            let out = s.cmd().arg("-q").output().unwrap();
            assert_eq!(out.status.code(), Some(1));
            assert!(out.stderr.is_empty());
        }
    }
}

#[test]
fn the_cache_gate_is_strictly_above_ten_thousand() {
    // 9000 + 500 + 500 = 10,000 exactly: still warm, so a suggestion is made.
    let t = warm()
        .user("now the README")
        .assistant_with_usage("Updated the README.", usage(9000, 500, 500));
    let s = setup(&t);
    s.api.push(Reply::anthropic_text("commit and push"));
    let (code, out, _) = s.run(&[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["suggestion"], "commit and push");
    // -v says what was read and why it went ahead.
    s.api.push(Reply::anthropic_text("commit and push"));
    let (code, _, stderr) = s.run(&["-v"]);
    assert_eq!(code, 0);
    assert!(stderr.contains("enabled: on (the default)"), "{stderr}");
    assert!(
        stderr.contains("2 assistant turns (2 needed), the last not an error, 10000 uncached tokens in it (limit 10000), plan mode off"),
        "{stderr}"
    );
    assert!(stderr.contains("asking claude-sonnet-4-5"), "{stderr}");
    // A project's local settings can turn it off too.
    s.home.write(
        "proj/.claude/settings.local.json",
        r#"{"promptSuggestionEnabled": false}"#,
    );
    let (code, out, _) = s.run(&[]);
    assert_eq!((code, out["suppressed"].as_str()), (1, Some("disabled")));
    assert_eq!(s.api.requests().len(), 2);
}

#[test]
fn generation_is_one_request_without_tools_on_the_main_model() {
    let s = setup(&warm());
    s.api.push(Reply::anthropic_text(
        "<suggestion>run the whole suite now</suggestion>",
    ));
    let (code, out, stderr) = s.run(&[]);
    assert_eq!(code, 0, "{out} {stderr}");
    assert_eq!(
        out,
        json!({"suggestion": "run the whole suite now", "usage": fake_usage()})
    );
    assert!(stderr.is_empty(), "{stderr}");
    let requests = s.api.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert!(r.body.get("tools").is_none(), "tools sent: {}", r.body);
    assert!(r.body.get("tool_choice").is_none());
    assert_eq!(r.body["model"], "claude-sonnet-4-5", "the main model");
    let max_tokens = r.body["max_tokens"].as_u64().unwrap();
    assert!(max_tokens > 0 && max_tokens <= 100, "{max_tokens}");
    assert_eq!(r.body["messages"].as_array().unwrap().len(), 1);
    let prompt = r.body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        prompt.contains("User: the gate test is flaky, look at it"),
        "{prompt}"
    );
    assert!(
        prompt.contains(
            "Assistant: Running it in a loop.\nAssistant called Bash(cargo test gate -- --test-threads=1)"
        ),
        "{prompt}"
    );
    assert!(
        prompt.contains("Assistant: Fixed: the test raced"),
        "{prompt}"
    );
    let system = r.body["system"][0]["text"].as_str().unwrap();
    assert!(system.contains("2 to 12 words"), "{system}");
    assert!(system.contains("style"), "{system}");

    // ANTHROPIC_MODEL names the main model; --model wins over it.
    s.api.push(Reply::anthropic_text("yes"));
    s.api.push(Reply::anthropic_text("yes"));
    let out = s
        .cmd()
        .env("ANTHROPIC_MODEL", "main-from-env")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = s
        .cmd()
        .env("ANTHROPIC_MODEL", "main-from-env")
        .args(["--model", "flag-model"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let requests = s.api.requests();
    assert_eq!(requests[1].body["model"], "main-from-env");
    assert_eq!(requests[2].body["model"], "flag-model");
}

/// A reply and what becomes of it: the suggestion, or `(reason, candidate)`.
type Expected<'a> = Result<&'a str, (&'a str, &'a str)>;

#[test]
fn replies_are_cleaned_and_filtered() {
    let s = setup(&warm());
    let cases: &[(&str, Expected)] = &[
        ("Suggestion: \"commit and push\"", Ok("commit and push")),
        ("  yes\n", Ok("yes")),
        ("**Suggestion:** /review", Ok("/review")),
        ("", Err(("empty", ""))),
        ("<suggestion></suggestion>", Err(("empty", ""))),
        ("Looks good!", Err(("evaluative", "Looks good!"))),
        (
            "Let me run the tests",
            Err(("claude_voice", "Let me run the tests")),
        ),
        (
            "Run the tests. Then push.",
            Err(("multiple_sentences", "Run the tests. Then push.")),
        ),
        (
            "(no obvious next step)",
            Err(("meta_wrapped", "(no obvious next step)")),
        ),
        (
            "Nothing to suggest.",
            Err(("meta_text", "Nothing to suggest.")),
        ),
    ];
    for (reply, expected) in cases {
        s.api.push(Reply::anthropic_text(reply));
        let (code, out, stderr) = s.run(&[]);
        match expected {
            Ok(suggestion) => {
                assert_eq!(code, 0, "{reply:?}: {out}");
                assert_eq!(
                    out,
                    json!({"suggestion": suggestion, "usage": fake_usage()}),
                    "{reply:?}"
                );
            }
            Err((reason, candidate)) => {
                assert_eq!(code, 1, "{reply:?}: {out}");
                assert_eq!(
                    out,
                    json!({"rejected": reason, "candidate": candidate, "usage": fake_usage()}),
                    "{reply:?}"
                );
                assert!(
                    stderr.starts_with(&format!("suggest: rejected: {reason}: ")),
                    "{stderr}"
                );
            }
        }
    }
    assert_eq!(s.api.requests().len(), cases.len(), "one request per run");
}

#[test]
fn events_are_claude_codes_prompt_suggestion() {
    let s = setup(&warm());
    for _ in 0..3 {
        s.api.push(Reply::anthropic_text("push it"));
    }
    // From a Stop hook: the payload names the transcript and the session.
    let out = s
        .bare()
        .arg("--events")
        .write_stdin(s.stop_payload(json!({})))
        .output()
        .unwrap();
    let (code, first, _) = outcome(out);
    assert_eq!(code, 0, "{first}");
    let keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["type", "suggestion", "uuid", "session_id"]);
    assert_eq!(first["type"], "prompt_suggestion");
    assert_eq!(first["suggestion"], "push it");
    assert_eq!(first["session_id"], "11111111-2222-4333-8444-555555555555");
    let uuid = first["uuid"].as_str().unwrap();
    assert_eq!(uuid.len(), 36, "{uuid}");
    assert_eq!(uuid.as_bytes()[14], b'4', "a v4 uuid: {uuid}");

    // --session wins; without a payload the transcript's sessionId is used.
    let (_, second, _) = s.run(&["--events", "--session", "my-session"]);
    assert_eq!(second["session_id"], "my-session");
    assert_ne!(second["uuid"], first["uuid"], "a new uuid per event");
    let (_, third, _) = s.run(&["--events"]);
    assert_eq!(third["session_id"], SESSION);

    // A rejection is not an event: the usual document, exit 1.
    s.api.push(Reply::anthropic_text("Thanks!"));
    let (code, out, _) = s.run(&["--events"]);
    assert_eq!(code, 1);
    assert_eq!(out["rejected"], "too_few_words");
    assert!(out.get("type").is_none());
}

#[test]
fn the_real_fixture_session_gets_a_suggestion() {
    let s = setup_fixture();
    s.api.push(Reply::anthropic_text("run-tool again"));
    let (code, out, _) = s.run(&["--events"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["suggestion"], "run-tool again");
    assert_eq!(out["session_id"], FIXTURE_SESSION);
    let prompt = s.api.requests()[0].body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(prompt.contains("User: run-tool please"), "{prompt}");
    assert!(prompt.contains("Assistant called Bash("), "{prompt}");
    assert!(
        prompt.contains("Assistant: Hello from the stub."),
        "{prompt}"
    );
    assert!(
        !prompt.contains("command-name"),
        "the /recap wrapper is not a user turn: {prompt}"
    );
}

#[test]
fn model_failures_exit_4_with_a_typed_error() {
    let s = setup(&warm());
    for (reply, kind) in [
        (
            Reply::error(401, "authentication_error", "invalid x-api-key"),
            "auth",
        ),
        (
            Reply::error(400, "invalid_request_error", "bad model"),
            "invalid_request",
        ),
        (Reply::malformed(), "malformed_response"),
    ] {
        s.api.push(reply);
        let (code, out, stderr) = s.run(&[]);
        assert_eq!(code, 4, "{kind}: {out}");
        assert_eq!(out["error"]["kind"], kind, "{out}");
        assert_eq!(out["error"]["attempts"], 1, "{kind} is not retried");
        assert_eq!(
            out["usage"],
            serde_json::from_str::<Value>(NO_USAGE).unwrap()
        );
        assert!(stderr.contains("model request failed"), "{stderr}");
        assert!(!stderr.contains(KEY) && !out.to_string().contains(KEY));
    }
    // Overloaded after every retry.
    for _ in 0..3 {
        s.api
            .push(Reply::error(529, "overloaded_error", "Overloaded"));
    }
    let (code, out, _) = s.run(&["--retries", "2"]);
    assert_eq!(code, 4);
    assert_eq!(out["error"]["kind"], "overloaded");
    assert_eq!(out["error"]["attempts"], 3);
}

#[test]
fn openai_compatible_provider() {
    let s = setup(&warm());
    s.api.push(Reply::openai_text("deploy to staging"));
    let out = s
        .cmd()
        .env("OPENAI_BASE_URL", format!("{}/v1", s.api.url()))
        .env("OPENAI_API_KEY", "local-key")
        .args(["--provider", "openai", "--model", "llama-3"])
        .output()
        .unwrap();
    let (code, out, _) = outcome(out);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["suggestion"], "deploy to staging");
    assert_eq!(out["usage"]["input_tokens"], 90);
    let r = &s.api.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert!(r.body.get("tools").is_none());
}

#[test]
fn transcript_problems() {
    let s = setup(&warm());
    // None named.
    let (code, out, _) = outcome(s.bare().output().unwrap());
    assert_eq!(code, 2);
    assert_eq!(out["error"]["kind"], "usage");
    assert!(out["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--transcript"));
    // Missing: an environment failure.
    let (code, out, _) = outcome(
        s.bare()
            .args(["--transcript", "/nonexistent/t.jsonl"])
            .output()
            .unwrap(),
    );
    assert_eq!(code, 3, "{out}");
    assert_eq!(
        (
            out["error"]["kind"].as_str(),
            out["error"]["reason"].as_str()
        ),
        (Some("environment"), Some("not_found"))
    );
    // A FIFO is refused at once, never waited on: the environment, not the caller.
    let fifo = s.home.root.join("fifo.jsonl");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (code, out, _) = outcome(
        s.bare()
            .arg("--transcript")
            .arg(&fifo)
            .timeout(Duration::from_secs(20))
            .output()
            .unwrap(),
    );
    assert_eq!(code, 3, "{out}");
    assert_eq!(
        (
            out["error"]["kind"].as_str(),
            out["error"]["reason"].as_str()
        ),
        (Some("environment"), Some("not_a_file"))
    );
    // A hook payload of the wrong shape.
    let (code, out, _) = outcome(
        s.bare()
            .write_stdin(r#"{"hook_event_name":"Stop","transcript_path":5}"#)
            .output()
            .unwrap(),
    );
    assert_eq!(code, 2, "{out}");
    assert_eq!(out["error"]["kind"], "bad_input");
    // `check` takes none of the generation flags.
    let (code, out, _) = outcome(s.cmd().args(["check", "run the tests"]).output().unwrap());
    assert_eq!(code, 2, "{out}");
    assert!(s.api.requests().is_empty());
}

#[test]
fn check_runs_the_filters_alone() {
    let home = ClaudeHome::new();
    let check = |args: &[&str], stdin: &str| {
        outcome(
            home.cmd("suggest")
                .arg("check")
                .args(args)
                .write_stdin(stdin)
                .output()
                .unwrap(),
        )
    };
    assert_eq!(
        check(&["run the tests"], ""),
        (0, json!({"suggestion": "run the tests"}), String::new())
    );
    // stdin as plain text, its final newline not a line break.
    let (code, out, _) = check(&[], "<suggestion>commit it</suggestion>\n");
    assert_eq!((code, out), (0, json!({"suggestion": "commit it"})));
    // TEXT wins over stdin.
    let (_, out, _) = check(&["yes"], "ignored words here");
    assert_eq!(out, json!({"suggestion": "yes"}));
    let (code, out, stderr) = check(&["--", "Thanks, looks good!"], "");
    assert_eq!(code, 1);
    assert_eq!(
        out,
        json!({"rejected": "evaluative", "candidate": "Thanks, looks good!"})
    );
    assert!(
        stderr.starts_with("suggest: rejected: evaluative: "),
        "{stderr}"
    );
    let (code, out, _) = check(&["-q", "--", "-v"], "");
    assert_eq!(
        (code, out),
        (1, json!({"rejected": "too_few_words", "candidate": "-v"}))
    );
    let (code, out, _) = check(&[""], "");
    assert_eq!(
        (code, out),
        (1, json!({"rejected": "empty", "candidate": ""}))
    );
    let (code, out, _) = check(&[], "run the tests\nthen push\n");
    assert_eq!(code, 1);
    assert_eq!(out["rejected"], "has_formatting");
    // No text at all, or -n: a usage error, not a verdict on nothing.
    for (args, stdin) in [(&[][..], ""), (&["-n"][..], "run the tests")] {
        let (code, out, _) = check(args, stdin);
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(out["error"]["kind"], "usage");
    }
    let out = home
        .cmd("suggest")
        .arg("check")
        .write_stdin(vec![b'o', b'k', 0xff, b'\n'])
        .output()
        .unwrap();
    let (code, out, _) = outcome(out);
    assert_eq!(
        (code, out["error"]["kind"].as_str()),
        (2, Some("bad_input"))
    );
}

#[test]
fn check_makes_no_request_and_starts_no_runtime() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    // No credential and a reachable server: check must not care about either.
    let out = home
        .cmd("suggest")
        .env("ANTHROPIC_BASE_URL", api.url())
        .args(["check", "-n", "run the tests"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(api.requests().is_empty());

    let Some(check) = syscalls(&home, &["check", "-n", "run the tests"], None) else {
        return;
    };
    assert!(!check.contains("epoll_create"), "{check}");
    assert!(!check.contains("socket("), "{check}");
    // The probe is not blind: generation does start a runtime and connect.
    let s = setup(&warm());
    s.api.push(Reply::anthropic_text("push it"));
    let generate = syscalls(
        &s.home,
        &["--transcript", s.transcript.to_str().unwrap()],
        Some(&s.api.url()),
    )
    .unwrap_or_default();
    assert!(generate.contains("epoll_create"), "{generate}");
    assert!(generate.contains("socket("), "{generate}");
}

/// The system calls `suggest ARGS` makes, as strace reports them; `None` (and a note) when
/// strace is missing or not permitted here.
fn syscalls(home: &ClaudeHome, args: &[&str], api: Option<&str>) -> Option<String> {
    let log = home.root.join(format!("strace-{}.log", args.len()));
    let mut cmd = std::process::Command::new("strace");
    cmd.args([
        "-f",
        "-qq",
        "-e",
        "trace=epoll_create,epoll_create1,socket",
        "-o",
    ])
    .arg(&log)
    .arg(bin_path("suggest"))
    .args(args)
    .env_clear()
    .env("HOME", &home.home)
    .env("CLAUDE_CONFIG_DIR", &home.config)
    .current_dir(&home.project)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    if let Some(url) = api {
        cmd.env("ANTHROPIC_BASE_URL", url)
            .env("ANTHROPIC_API_KEY", KEY);
    }
    match cmd.status() {
        Ok(status) if status.success() => std::fs::read_to_string(&log).ok(),
        _ => {
            crate::support::skip(
                "suggest syscalls",
                "strace is missing or cannot trace here (apt-get install strace)",
            );
            None
        }
    }
}

#[test]
fn help_names_the_subcommand_and_its_text() {
    let home = ClaudeHome::new();
    let out = home.cmd("suggest").arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    for needle in [
        "check",
        "--transcript",
        "--events",
        "--plan-mode",
        "--pretty",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
    let out = home
        .cmd("suggest")
        .args(["help", "check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("[TEXT]"));
    for args in [&["--no-such-flg"][..], &["check", "a", "b"][..]] {
        let (code, out, stderr) = outcome(home.cmd("suggest").args(args).output().unwrap());
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(out["error"]["kind"], "usage");
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Usage: suggest"),
            "{out}"
        );
        assert!(stderr.starts_with("error: "), "{stderr}");
    }
    let out = home.cmd("suggest").arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout)
        .starts_with(&format!("suggest {}", env!("CARGO_PKG_VERSION"))));
}

/// The README's `sh` block that contains `needle`, as its lines.
fn readme_block(needle: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    readme
        .split("```sh\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .find(|block| block.contains(needle))
        .unwrap_or_else(|| panic!("no README block with {needle:?}"))
        .lines()
        .map(str::to_string)
        .collect()
}

/// bash with `suggest` on PATH, in a fresh directory, `stdin` fed to the script.
fn run_recipe(lines: &[String], dir: &std::path::Path, stdin: &str) -> std::process::Output {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let _ = std::os::unix::fs::symlink(bin_path("suggest"), bin.join("suggest"));
    let script = format!("set -u -o pipefail\n{}\n", lines.join("\n"));
    assert_cmd::Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .env_clear()
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("HOME", dir)
        .env("LANG", "C.UTF-8")
        .current_dir(dir)
        .write_stdin(stdin)
        .output()
        .unwrap()
}

#[test]
fn readme_prompt_loop_gives_a_verdict_per_line() {
    if std::process::Command::new("jq")
        .arg("--version")
        .output()
        .is_err()
    {
        crate::support::skip("suggest jq recipe", "jq is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = run_recipe(
        &readme_block("prompt> "),
        tmp.path(),
        "run the tests\nThanks!\n-v\n\n<suggestion>push it</suggestion>\n",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "run the tests\nrejected (too_few_words): Thanks!\nrejected (too_few_words): -v\n\
         rejected (empty): \npush it\n"
    );
}

#[test]
fn readme_ci_lint_fails_on_a_rejected_prompt_and_names_it() {
    if std::process::Command::new("jq")
        .arg("--version")
        .output()
        .is_err()
    {
        crate::support::skip("suggest jq recipe", "jq is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let lines = readme_block("prompts.txt");
    // The README's own prompts all pass.
    let out = run_recipe(&lines, tmp.path(), "");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    // Our own file, with two bad prompts among good ones.
    std::fs::write(
        tmp.path().join("prompts.txt"),
        "run the tests\nThanks, looks good!\nyes\nLet me check the logs\n",
    )
    .unwrap();
    let without_printf: Vec<String> = lines
        .into_iter()
        .filter(|l| !l.starts_with("printf"))
        .collect();
    let out = run_recipe(&without_printf, tmp.path(), "");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("rejected.txt")).unwrap(),
        "evaluative: Thanks, looks good!\nclaude_voice: Let me check the logs\n"
    );
}

#[test]
fn sigint_during_generation_ends_at_once_with_130() {
    let s = setup(&warm());
    s.api.push(Reply::Hang(Duration::from_secs(8)));
    let child = std::process::Command::new(bin_path("suggest"))
        .arg("--transcript")
        .arg(&s.transcript)
        .env("HOME", &s.home.home)
        .env("CLAUDE_CONFIG_DIR", &s.home.config)
        .env("ANTHROPIC_BASE_URL", s.api.url())
        .env("ANTHROPIC_API_KEY", KEY)
        .current_dir(&s.home.project)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait::for_true("the request", || !s.api.requests().is_empty());
    assert_eq!(s.api.requests().len(), 1);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(
        stdout_json(&out),
        json!({"aborted": "interrupted",
               "error": {"kind": "interrupted", "message": "interrupted by SIGINT"},
               "usage": serde_json::from_str::<Value>(NO_USAGE).unwrap()})
    );
}
