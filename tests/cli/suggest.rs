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
    fn bare<'a>(&self) -> Run<'a> {
        Run::new(&self.home, "suggest")
            .env("ANTHROPIC_BASE_URL", self.api.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .env("DREAMKIT_RETRY_BASE_MS", "1")
    }

    /// `suggest` on this setup's transcript, pointed at the fake server.
    fn suggest<'a>(&self) -> Run<'a> {
        self.bare().arg("--transcript").arg(&self.transcript)
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

fn no_usage() -> Value {
    serde_json::from_str(NO_USAGE).unwrap()
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
        let run = match payload {
            Some(extra) => s.bare().stdin(s.stop_payload(extra.clone())),
            None => s.suggest(),
        };
        run.envs(env.iter().copied())
            .args(*args)
            .code(1)
            .stdout_json(|out| {
                assert_eq!(
                    *out,
                    json!({"suppressed": expected, "usage": no_usage()}),
                    "{name}"
                );
            })
            .stderr_with(|stderr| {
                assert!(
                    stderr.starts_with(&format!("suggest: suppressed: {expected}: ")),
                    "{name}: {stderr}"
                );
                assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
            })
            .stderr_is({
                let why = match expected {
                    "disabled" => "prompt suggestions are turned off \
                                   (CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION, else promptSuggestionEnabled)",
                    "early_conversation" => "1 assistant turn; needs 2",
                    "last_response_error" => "the last assistant record is an API error",
                    "pending_permission" => "a permission prompt is waiting",
                    "elicitation_active" => "a question is waiting for an answer",
                    "plan_mode" => "the session is in plan mode",
                    "cache_cold" => "the last turn's uncached input, cache writes and output are \
                                     10001 tokens (over 10000)",
                    "rate_limit" => "the account is rate-limited",
                    other => unreachable!("{other}"),
                };
                format!("suggest: suppressed: {expected}: {why}\n")
            })
            .run();
        assert!(s.api.requests().is_empty(), "{name}: a request was made");
        // -q: the same answer, nothing on stderr.
        if *name == "cold cache" {
            s.suggest()
                .arg("-q")
                .code(1)
                .stdout_json(|out| {
                    assert_eq!(*out, json!({"suppressed": expected, "usage": no_usage()}));
                })
                .stderr_empty()
                .run();
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
    s.suggest()
        .success()
        .stdout_json(|out| assert_eq!(out["suggestion"], "commit and push"))
        .stderr_empty()
        .run();
    // -v says what was read and why it went ahead.
    s.api.push(Reply::anthropic_text("commit and push"));
    s.suggest()
        .arg("-v")
        .success()
        .stdout_json(|out| assert_eq!(out["suggestion"], "commit and push"))
        .stderr_with(|stderr| {
            assert!(stderr.contains("enabled: on (the default)"), "{stderr}");
            assert!(
                stderr.contains("2 assistant turns (2 needed), the last not an error, 10000 uncached tokens in it (limit 10000), plan mode off"),
                "{stderr}"
            );
            assert!(stderr.contains("asking claude-sonnet-4-5"), "{stderr}");
        })
        .stderr_is(format!(
            "suggest: enabled: on (the default)\n\
             suggest: {} read: 2 assistant turns (2 needed), the last not an error, \
             10000 uncached tokens in it (limit 10000), plan mode off\n\
             suggest: asking claude-sonnet-4-5 about the last 5 messages\n",
            s.transcript.display()
        ))
        .run();
    // A project's local settings can turn it off too.
    s.home.write(
        "proj/.claude/settings.local.json",
        r#"{"promptSuggestionEnabled": false}"#,
    );
    s.suggest()
        .code(1)
        .stdout_json(|out| assert_eq!(out["suppressed"].as_str(), Some("disabled")))
        .stderr_is(
            "suggest: suppressed: disabled: prompt suggestions are turned off \
             (CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION, else promptSuggestionEnabled)\n",
        )
        .run();
    assert_eq!(s.api.requests().len(), 2);
}

#[test]
fn generation_is_one_request_without_tools_on_the_main_model() {
    let s = setup(&warm());
    s.api.push(Reply::anthropic_text(
        "<suggestion>run the whole suite now</suggestion>",
    ));
    s.suggest()
        .success()
        .stdout_json(|out| {
            assert_eq!(
                *out,
                json!({"suggestion": "run the whole suite now", "usage": fake_usage()})
            );
        })
        .stderr_empty()
        .run();
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
    s.suggest()
        .env("ANTHROPIC_MODEL", "main-from-env")
        .success()
        .stdout_json(|out| assert_eq!(out["suggestion"], "yes"))
        .stderr_empty()
        .run();
    s.suggest()
        .env("ANTHROPIC_MODEL", "main-from-env")
        .args(["--model", "flag-model"])
        .success()
        .stdout_json(|out| assert_eq!(out["suggestion"], "yes"))
        .stderr_empty()
        .run();
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
        match expected {
            Ok(suggestion) => {
                s.suggest()
                    .success()
                    .stdout_json(|out| {
                        assert_eq!(
                            *out,
                            json!({"suggestion": suggestion, "usage": fake_usage()}),
                            "{reply:?}"
                        );
                    })
                    .stderr_empty()
                    .run();
            }
            Err((reason, candidate)) => {
                s.suggest()
                    .code(1)
                    .stdout_json(|out| {
                        assert_eq!(
                            *out,
                            json!({"rejected": reason, "candidate": candidate, "usage": fake_usage()}),
                            "{reply:?}"
                        );
                    })
                    .stderr_with(|stderr| {
                        assert!(
                            stderr.starts_with(&format!("suggest: rejected: {reason}: ")),
                            "{stderr}"
                        );
                    })
                    .stderr_is({
                        let why = match *reason {
                            "empty" => "no text",
                            "evaluative" => "praise or thanks (\"looks good\")",
                            "claude_voice" => "starts in the assistant's voice (\"let me\")",
                            "multiple_sentences" => "more than one sentence",
                            "meta_wrapped" => "all of it is in brackets",
                            "meta_text" => "says it has nothing to suggest (\"nothing to suggest\")",
                            other => unreachable!("{other}"),
                        };
                        format!("suggest: rejected: {reason}: {why}\n")
                    })
                    .run();
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
    let first = s
        .bare()
        .arg("--events")
        .stdin(s.stop_payload(json!({})))
        .success()
        .stdout_json(|doc| assert_eq!(doc["type"], "prompt_suggestion", "{doc}"))
        .stderr_empty()
        .run()
        .json();
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
    s.suggest()
        .args(["--events", "--session", "my-session"])
        .success()
        .stdout_json(|second| {
            assert_eq!(second["session_id"], "my-session");
            assert_ne!(second["uuid"], first["uuid"], "a new uuid per event");
        })
        .stderr_empty()
        .run();
    s.suggest()
        .arg("--events")
        .success()
        .stdout_json(|third| assert_eq!(third["session_id"], SESSION))
        .stderr_empty()
        .run();

    // A rejection is not an event: the usual document, exit 1.
    s.api.push(Reply::anthropic_text("Thanks!"));
    s.suggest()
        .arg("--events")
        .code(1)
        .stdout_json(|out| {
            assert_eq!(out["rejected"], "too_few_words");
            assert!(out.get("type").is_none());
        })
        .stderr_is(
            "suggest: rejected: too_few_words: 1 word, and not a reply such as yes, push or a /command\n",
        )
        .run();
}

#[test]
fn the_real_fixture_session_gets_a_suggestion() {
    let s = setup_fixture();
    s.api.push(Reply::anthropic_text("run-tool again"));
    s.suggest()
        .arg("--events")
        .success()
        .stdout_json(|out| {
            assert_eq!(out["suggestion"], "run-tool again");
            assert_eq!(out["session_id"], FIXTURE_SESSION);
        })
        .stderr_empty()
        .run();
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
        s.suggest()
            .code(4)
            .stdout_json(|out| {
                assert_eq!(out["error"]["kind"], kind, "{out}");
                assert_eq!(out["error"]["attempts"], 1, "{kind} is not retried");
                assert_eq!(out["usage"], no_usage());
                assert!(!out.to_string().contains(KEY));
            })
            .stderr_with(|stderr| {
                assert!(stderr.contains("model request failed"), "{stderr}");
                assert!(!stderr.contains(KEY));
            })
            .stderr_is({
                let why = match kind {
                    "auth" => "invalid x-api-key",
                    "invalid_request" => "bad model",
                    "malformed_response" => {
                        "answer is not JSON: expected value at line 1 column 14"
                    }
                    other => unreachable!("{other}"),
                };
                format!("suggest: model request failed: {kind}: {why}\n")
            })
            .run();
    }
    // Overloaded after every retry.
    for _ in 0..3 {
        s.api
            .push(Reply::error(529, "overloaded_error", "Overloaded"));
    }
    s.suggest()
        .args(["--retries", "2"])
        .code(4)
        .stdout_json(|out| {
            assert_eq!(out["error"]["kind"], "overloaded");
            assert_eq!(out["error"]["attempts"], 3);
        })
        .stderr_is("suggest: model request failed: overloaded: Overloaded\n")
        .run();
}

#[test]
fn openai_compatible_provider() {
    let s = setup(&warm());
    s.api.push(Reply::openai_text("deploy to staging"));
    s.suggest()
        .env("OPENAI_BASE_URL", format!("{}/v1", s.api.url()))
        .env("OPENAI_API_KEY", "local-key")
        .args(["--provider", "openai", "--model", "llama-3"])
        .success()
        .stdout_json(|out| {
            assert_eq!(out["suggestion"], "deploy to staging");
            assert_eq!(out["usage"]["input_tokens"], 90);
        })
        .stderr_empty()
        .run();
    let r = &s.api.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert!(r.body.get("tools").is_none());
}

#[test]
fn transcript_problems() {
    let s = setup(&warm());
    // None named.
    s.bare()
        .code(2)
        .stdout_json(|out| {
            assert_eq!(out["error"]["kind"], "usage");
            assert!(out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--transcript"));
        })
        .stderr_is("suggest: no transcript: pass --transcript PATH or a hook payload with transcript_path\n")
        .run();
    // Missing: an environment failure.
    s.bare()
        .args(["--transcript", "/nonexistent/t.jsonl"])
        .code(3)
        .stdout_json(|out| {
            assert_eq!(
                (
                    out["error"]["kind"].as_str(),
                    out["error"]["reason"].as_str()
                ),
                (Some("environment"), Some("not_found"))
            );
        })
        .stderr_is("suggest: cannot read the transcript /nonexistent/t.jsonl: No such file or directory (os error 2)\n")
        .run();
    // A FIFO is refused at once, never waited on: the environment, not the caller.
    let fifo = s.home.root.join("fifo.jsonl");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    s.bare()
        .arg("--transcript")
        .arg(&fifo)
        .timeout(Duration::from_secs(20))
        .code(3)
        .stdout_json(|out| {
            assert_eq!(
                (
                    out["error"]["kind"].as_str(),
                    out["error"]["reason"].as_str()
                ),
                (Some("environment"), Some("not_a_file"))
            );
        })
        .stderr_is(format!(
            "suggest: cannot read the transcript {}: not a regular file (a FIFO)\n",
            fifo.display()
        ))
        .run();
    // A hook payload of the wrong shape.
    s.bare()
        .stdin(r#"{"hook_event_name":"Stop","transcript_path":5}"#)
        .code(2)
        .stdout_json(|out| assert_eq!(out["error"]["kind"], "bad_input"))
        .stderr_is(
            "suggest: hook payload: field `transcript_path`: invalid type: integer `5`, expected path string\n",
        )
        .run();
    // `check` takes none of the generation flags.
    s.suggest()
        .args(["check", "run the tests"])
        .code(2)
        .stdout_json(|out| {
            assert_eq!(out["error"]["kind"], "usage");
            assert_eq!(
                out["error"]["message"],
                "the argument '--transcript' cannot be used with the subcommand 'check'\n\n\
                 Usage: suggest [OPTIONS] [COMMAND]"
            );
        })
        .stderr_is(usage_stderr(
            "suggest",
            "the argument '--transcript' cannot be used with the subcommand 'check'",
        ))
        .run();
    assert!(s.api.requests().is_empty());
}

#[test]
fn check_runs_the_filters_alone() {
    let home = ClaudeHome::new();
    let check = |args: &[&str], stdin: &str| -> Run {
        Run::new(&home, "suggest")
            .arg("check")
            .args(args)
            .stdin(stdin)
    };
    check(&["run the tests"], "")
        .success()
        .stdout_json(|out| assert_eq!(*out, json!({"suggestion": "run the tests"})))
        .stderr_empty()
        .run();
    // stdin as plain text, its final newline not a line break.
    check(&[], "<suggestion>commit it</suggestion>\n")
        .success()
        .stdout_json(|out| assert_eq!(*out, json!({"suggestion": "commit it"})))
        .stderr_empty()
        .run();
    // TEXT wins over stdin.
    check(&["yes"], "ignored words here")
        .success()
        .stdout_json(|out| assert_eq!(*out, json!({"suggestion": "yes"})))
        .stderr_empty()
        .run();
    check(&["--", "Thanks, looks good!"], "")
        .code(1)
        .stdout_json(|out| {
            assert_eq!(
                *out,
                json!({"rejected": "evaluative", "candidate": "Thanks, looks good!"})
            );
        })
        .stderr_with(|stderr| {
            assert!(
                stderr.starts_with("suggest: rejected: evaluative: "),
                "{stderr}"
            );
        })
        .stderr_is("suggest: rejected: evaluative: praise or thanks (\"thanks\")\n")
        .run();
    check(&["-q", "--", "-v"], "")
        .code(1)
        .stdout_json(|out| {
            assert_eq!(
                *out,
                json!({"rejected": "too_few_words", "candidate": "-v"})
            );
        })
        .stderr_empty()
        .run();
    check(&[""], "")
        .code(1)
        .stdout_json(|out| assert_eq!(*out, json!({"rejected": "empty", "candidate": ""})))
        .stderr_is("suggest: rejected: empty: no text\n")
        .run();
    check(&[], "run the tests\nthen push\n")
        .code(1)
        .stdout_json(|out| assert_eq!(out["rejected"], "has_formatting"))
        .stderr_is("suggest: rejected: has_formatting: contains a line break\n")
        .run();
    // No text at all, or -n: a usage error, not a verdict on nothing.
    for (args, stdin) in [(&[][..], ""), (&["-n"][..], "run the tests")] {
        check(args, stdin)
            .code(2)
            .stdout_json(|out| assert_eq!(out["error"]["kind"], "usage", "{args:?}"))
            .stderr_is("suggest: no text to check: pass TEXT, or plain text on stdin\n")
            .run();
    }
    check(&[], "")
        .stdin(vec![b'o', b'k', 0xff, b'\n'])
        .code(2)
        .stdout_json(|out| assert_eq!(out["error"]["kind"].as_str(), Some("bad_input")))
        .stderr_is(
            "suggest: stdin is not UTF-8 text: invalid utf-8 sequence of 1 bytes from index 2\n",
        )
        .run();
}

#[test]
fn check_makes_no_request_and_starts_no_runtime() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    // No credential and a reachable server: check must not care about either.
    Run::new(&home, "suggest")
        .env("ANTHROPIC_BASE_URL", api.url())
        .args(["check", "-n", "run the tests"])
        .success()
        .stdout_json(|out| assert_eq!(*out, json!({"suggestion": "run the tests"})))
        .stderr_empty()
        .run();
    assert!(api.requests().is_empty());

    let Some(check) = syscalls(
        &home,
        &["check", "-n", "run the tests"],
        None,
        json!({"suggestion": "run the tests"}),
    ) else {
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
        json!({"suggestion": "push it", "usage": fake_usage()}),
    )
    .unwrap_or_default();
    assert!(generate.contains("epoll_create"), "{generate}");
    assert!(generate.contains("socket("), "{generate}");
}

/// The system calls `suggest ARGS` makes, as strace reports them, the run succeeding with
/// `document` and nothing on stderr; `None` (and a note) when strace is missing or not
/// permitted here.
fn syscalls(
    home: &ClaudeHome,
    args: &[&str],
    api: Option<&str>,
    document: Value,
) -> Option<String> {
    if !strace_traces() {
        crate::support::skip(
            "suggest syscalls",
            "strace is missing or cannot trace here (apt-get install strace)",
        );
        return None;
    }
    let log = home.root.join(format!("strace-{}.log", args.len()));
    let mut strace = home.process("strace");
    strace
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=epoll_create,epoll_create1,socket",
            "-o",
        ])
        .arg(&log)
        .arg(bin_path("suggest"))
        .args(args);
    if let Some(url) = api {
        strace
            .env("ANTHROPIC_BASE_URL", url)
            .env("ANTHROPIC_API_KEY", KEY);
    }
    Run::command(strace, "strace suggest")
        .stdin_from(std::process::Stdio::null())
        .success()
        .stdout_json(move |out| assert_eq!(*out, document))
        .stderr_empty()
        .run();
    Some(std::fs::read_to_string(&log).expect("strace's log"))
}

#[test]
fn help_names_the_subcommand_and_its_text() {
    let home = ClaudeHome::new();
    Run::new(&home, "suggest")
        .arg("--help")
        .success()
        .stdout_with(|help| {
            for needle in [
                "check",
                "--transcript",
                "--events",
                "--plan-mode",
                "--pretty",
            ] {
                assert!(help.contains(needle), "{needle}: {help}");
            }
        })
        .stderr_empty()
        .run();
    Run::new(&home, "suggest")
        .args(["help", "check"])
        .success()
        .stdout_contains("[TEXT]")
        .stderr_empty()
        .run();
    for args in [&["--no-such-flg"][..], &["check", "a", "b"][..]] {
        Run::new(&home, "suggest")
            .args(args)
            .code(2)
            .stdout_json(|out| {
                assert_eq!(out["error"]["kind"], "usage", "{args:?}");
                assert!(
                    out["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("Usage: suggest"),
                    "{out}"
                );
            })
            .stderr_is(usage_stderr(
                "suggest",
                match args[0] {
                    "--no-such-flg" => "unexpected argument '--no-such-flg' found",
                    _ => "unexpected argument 'b' found",
                },
            ))
            .run();
    }
    Run::new(&home, "suggest")
        .arg("--version")
        .success()
        .stdout_with(|out| {
            assert!(out.starts_with(&format!("suggest {}", env!("CARGO_PKG_VERSION"))));
        })
        .stdout_is(format!(
            "suggest {} (tested with Claude Code 2.1.332)\n",
            env!("CARGO_PKG_VERSION")
        ))
        .stderr_empty()
        .run();
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
fn run_recipe<'a>(lines: &[String], dir: &std::path::Path, stdin: &str) -> Run<'a> {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let _ = std::os::unix::fs::symlink(bin_path("suggest"), bin.join("suggest"));
    let script = format!("set -u -o pipefail\n{}\n", lines.join("\n"));
    let mut bash = std::process::Command::new("bash");
    bash.args(["--norc", "--noprofile", "-c", &script])
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
        .current_dir(dir);
    Run::command(bash, "the README recipe").stdin(stdin)
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
    run_recipe(
        &readme_block("prompt> "),
        tmp.path(),
        "run the tests\nThanks!\n-v\n\n<suggestion>push it</suggestion>\n",
    )
    .success()
    .stdout_is(
        "run the tests\nrejected (too_few_words): Thanks!\nrejected (too_few_words): -v\n\
         rejected (empty): \npush it\n",
    )
    .stderr_empty()
    .run();
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
    run_recipe(&lines, tmp.path(), "")
        .success()
        .stdout_empty()
        .stderr_empty()
        .run();
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
    run_recipe(&without_printf, tmp.path(), "")
        .code(1)
        .stdout_is("evaluative: Thanks, looks good!\nclaude_voice: Let me check the logs\n")
        .stderr_empty()
        .run();
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("rejected.txt")).unwrap(),
        "evaluative: Thanks, looks good!\nclaude_voice: Let me check the logs\n"
    );
}

#[test]
fn sigint_during_generation_ends_at_once_with_130() {
    let s = setup(&warm());
    s.api.push(Reply::Hang(Duration::from_secs(8)));
    let running = Run::new(&s.home, "suggest")
        .arg("--transcript")
        .arg(&s.transcript)
        .env("ANTHROPIC_BASE_URL", s.api.url())
        .env("ANTHROPIC_API_KEY", KEY)
        .stdin_from(std::process::Stdio::null())
        .code(130)
        .stdout_json(|out| {
            assert_eq!(
                *out,
                json!({"aborted": "interrupted",
                       "error": {"kind": "interrupted", "message": "interrupted by SIGINT"},
                       "usage": no_usage()})
            );
        })
        .stderr_is("suggest: interrupted by SIGINT\n")
        .spawn();
    wait::for_true("the request", || !s.api.requests().is_empty());
    assert_eq!(s.api.requests().len(), 1);
    running.signal(libc::SIGINT);
    running.finish();
}
