//! `recap` against the fake model servers: every result kind, every gate, both providers,
//! every fault.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::transcript::{Transcript, SESSION};
use crate::support::*;

const KEY: &str = "sk-ant-test-SECRET-0123456789";

/// Three real turns with tool use, ten minutes ago: past the away delay, cache still warm.
fn three_turns() -> Transcript {
    Transcript::started(Duration::from_secs(600))
        .user("Why does dream-gate scan so slowly?")
        .assistant("It stats every transcript by full path.")
        .user("Make it stat relative to the directory.")
        .assistant_tool(
            "Running the benchmark.",
            "Bash",
            json!({"command": "make bench", "description": "bench"}),
        )
        .tool_result("0.89x")
        .assistant("The scan now takes 0.89x of find.")
        .user("Good, now update the README.")
        .assistant("Updated the README with the new figures.")
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

impl Setup {
    /// `recap` on this setup's transcript, against its fake server.
    fn recap<'a>(&self) -> Run<'a> {
        Run::new(&self.home, "recap")
            .env("ANTHROPIC_BASE_URL", self.api.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .env("DREAMKIT_RETRY_BASE_MS", "1")
            .arg("--transcript")
            .arg(&self.transcript)
    }
}

/// stderr is the one line `recap: skipped: {reason}: {start}N{end}`, N a number (none
/// when `end` is empty).
fn skipped_line<'c>(reason: &'c str, start: &'c str, end: &'c str) -> impl FnOnce(&str) + 'c {
    move |err: &str| {
        let line = err
            .strip_suffix('\n')
            .unwrap_or_else(|| panic!("not one line: {err:?}"));
        assert!(!line.contains('\n'), "not one line: {err:?}");
        let head = format!("recap: skipped: {reason}: {start}");
        if end.is_empty() {
            assert_eq!(line, head);
            return;
        }
        let number = line
            .strip_prefix(&head)
            .and_then(|rest| rest.strip_suffix(end))
            .unwrap_or_else(|| panic!("not {head:?}N{end:?}: {err:?}"));
        assert!(
            !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()),
            "{err:?}"
        );
    }
}

fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("read")
}

#[test]
fn default_mode_summarises_and_never_writes() {
    let s = setup(&three_turns());
    let before = bytes(&s.transcript);
    s.api.push(Reply::anthropic_text(
        "**Summary:** You were speeding up the `dream-gate` scan.\n- Next: commit the README.",
    ));
    let out = s
        .recap()
        .success()
        .stdout_json(|doc| assert_eq!(doc["status"], "ok", "{doc}"))
        .stderr_empty()
        .run()
        .json();
    assert_eq!(out["status"], "ok");
    assert_eq!(
        out["text"],
        "You were speeding up the dream-gate scan. Next: commit the README."
    );
    assert_eq!(
        out["usage"],
        json!({"input_tokens": 120, "output_tokens": 18, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 40})
    );
    assert!(out.get("record_uuid").is_none());
    assert_eq!(
        bytes(&s.transcript),
        before,
        "the default mode wrote to the transcript"
    );

    let requests = s.api.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.body["model"], "claude-haiku-4-5");
    assert!(
        r.body.get("tools").is_none(),
        "a recap request carries no tools"
    );
    let max_tokens = r.body["max_tokens"].as_u64().unwrap();
    assert!(max_tokens > 0 && max_tokens <= 300, "{max_tokens}");
    assert_eq!(r.body["messages"].as_array().unwrap().len(), 1);
    let prompt = r.body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        prompt.contains("User: Good, now update the README."),
        "{prompt}"
    );
    // One API response (text + tool_use records sharing message.id) is one message.
    assert!(
        prompt.contains("Assistant: Running the benchmark.\nAssistant called Bash(make bench)"),
        "{prompt}"
    );
    assert!(
        !prompt.contains("0.89x\n"),
        "tool output bodies are not context"
    );
    assert!(r.body["system"][0]["text"]
        .as_str()
        .unwrap()
        .contains("40 words"));
}

#[test]
fn model_and_credentials_from_the_environment() {
    let s = setup(&three_turns());
    s.api.push(Reply::anthropic_text("You were testing."));
    s.recap()
        .env_remove("ANTHROPIC_API_KEY")
        .env("ANTHROPIC_AUTH_TOKEN", "bearer-tok")
        .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", "haiku-from-env")
        .success()
        .stdout_json(|doc| assert_eq!(doc["text"], "You were testing."))
        .stderr_empty()
        .run();
    let r = &s.api.requests()[0];
    assert_eq!(r.header("authorization"), Some("Bearer bearer-tok"));
    assert_eq!(r.header("x-api-key"), None);
    assert_eq!(r.body["model"], "haiku-from-env");

    s.api.push(Reply::anthropic_text("You were testing."));
    s.recap()
        .args(["--model", "flag-model"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["text"], "You were testing."))
        .stderr_empty()
        .run();
    assert_eq!(s.api.requests()[1].body["model"], "flag-model");
}

#[test]
fn openai_compatible_provider() {
    let s = setup(&three_turns());
    s.api
        .push(Reply::openai_text("You were tuning the gate; next, push."));
    s.recap()
        .env("OPENAI_BASE_URL", format!("{}/v1", s.api.url()))
        .env("OPENAI_API_KEY", "local-key")
        .args(["--provider", "openai", "--model", "llama-3"])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["text"], "You were tuning the gate; next, push.");
            assert_eq!(doc["usage"]["input_tokens"], 90);
            assert_eq!(doc["usage"]["output_tokens"], 12);
        })
        .stderr_empty()
        .run();
    let r = &s.api.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer local-key"));
    assert_eq!(r.body["model"], "llama-3");
    assert_eq!(r.body["messages"][0]["role"], "system");
    assert!(r.body.get("tools").is_none());

    // openai without a model
    s.recap()
        .args(["--provider", "openai"])
        .code(2)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "usage");
            assert_eq!(
                doc["error"]["message"],
                "--provider openai needs --model (or OPENAI_MODEL)"
            );
        })
        .stderr_is("recap: --provider openai needs --model (or OPENAI_MODEL)\n")
        .run();
}

#[test]
fn no_turn_makes_no_request() {
    let t = Transcript::started(Duration::from_secs(600))
        .slash_command("recap")
        .session_end_noise();
    let s = setup(&t);
    s.recap()
        .code(1)
        .stdout_json(|out| {
            assert_eq!(out["status"], "no-turn");
            assert_eq!(out["usage"]["input_tokens"], 0);
        })
        .stderr_is("recap: no-turn: no real user turn in the transcript\n")
        .run();
    assert!(s.api.requests().is_empty());
}

#[test]
fn real_fixture_transcripts_are_summarised() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    for name in [
        "session-tool-use.jsonl",
        "session-slash-recap.jsonl",
        "session-suggest.jsonl",
    ] {
        api.push(Reply::anthropic_text(
            "You were probing Claude Code offline; next, check the samples.",
        ));
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude-code-2.1.332")
            .join(name);
        Run::new(&home, "recap")
            .env("ANTHROPIC_BASE_URL", api.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .arg("--transcript")
            .arg(&path)
            .success()
            .stdout_json(|doc| {
                assert_eq!(
                    doc["text"], "You were probing Claude Code offline; next, check the samples.",
                    "{name}"
                );
            })
            .stderr_empty()
            .run();
    }
    let prompt = api.requests()[1].body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(prompt.contains("User: run-tool please"), "{prompt}");
    assert!(
        prompt.contains("Assistant called Bash(echo hi)"),
        "{prompt}"
    );
    assert!(
        !prompt.contains("/recap"),
        "slash commands are not turns: {prompt}"
    );
}

/// Each fault: the reply script, the error kind, the requests made.
#[test]
fn every_fault_kind_is_typed_and_exits_4() {
    // (name, replies, extra flags, error kind, requests made)
    type Case = (
        &'static str,
        Vec<Reply>,
        &'static [&'static str],
        &'static str,
        usize,
    );
    let cases: Vec<Case> = vec![
        (
            "401",
            vec![Reply::error(
                401,
                "authentication_error",
                "invalid x-api-key",
            )],
            &[],
            "auth",
            1,
        ),
        (
            "403",
            vec![Reply::error(403, "permission_error", "no")],
            &[],
            "auth",
            1,
        ),
        (
            "400",
            vec![Reply::error(400, "invalid_request_error", "bad")],
            &[],
            "invalid_request",
            1,
        ),
        (
            "429 x4",
            (0..4)
                .map(|_| {
                    Reply::error(429, "rate_limit_error", "slow down")
                        .with_header("retry-after", "0")
                })
                .collect(),
            &[],
            "rate_limited",
            4,
        ),
        (
            "529 x4",
            (0..4)
                .map(|_| Reply::error(529, "overloaded_error", "Overloaded"))
                .collect(),
            &[],
            "overloaded",
            4,
        ),
        (
            "500 x4",
            (0..4)
                .map(|_| Reply::error(500, "api_error", "boom"))
                .collect(),
            &[],
            "server",
            4,
        ),
        (
            "hang",
            vec![Reply::Hang(Duration::from_secs(3))],
            &["--timeout", "300ms", "--retries", "0"],
            "timeout",
            1,
        ),
        (
            "malformed",
            vec![Reply::malformed()],
            &[],
            "malformed_response",
            1,
        ),
        (
            "truncated x2",
            (0..2)
                .map(|_| Reply::Truncated {
                    status: 200,
                    body: json!({"content": [{"type": "text", "text": "cut"}]}).to_string(),
                })
                .collect(),
            &["--retries", "1"],
            "network",
            2,
        ),
    ];
    for (name, replies, args, kind, requests) in cases {
        let s = setup(&three_turns());
        for reply in replies {
            s.api.push(reply);
        }
        s.recap()
            .args(args)
            .code(4)
            .stdout_json(|out| {
                assert_eq!(out["status"], "api-error", "{name}");
                assert_eq!(out["error"]["kind"], kind, "{name}: {out}");
                assert_eq!(out["error"]["attempts"], requests, "{name}");
                assert!(out["usage"].is_object(), "{name}");
            })
            .stderr_is({
                let url = format!("{}/v1/messages", s.api.url());
                let said = match name {
                    "401" => "invalid x-api-key".to_string(),
                    "403" => "no".to_string(),
                    "400" => "bad".to_string(),
                    "429 x4" => "slow down".to_string(),
                    "529 x4" => "Overloaded".to_string(),
                    "500 x4" => "boom".to_string(),
                    "hang" => format!("{url}: no complete answer within 300ms"),
                    "malformed" => {
                        "answer is not JSON: expected value at line 1 column 14".to_string()
                    }
                    "truncated x2" => format!(
                        "{url}: error reading a body from connection: \
                         end of file before message length reached"
                    ),
                    other => unreachable!("{other}"),
                };
                format!("recap: model request failed: {kind}: {said}\n")
            })
            .run();
        assert_eq!(s.api.requests().len(), requests, "{name}");
    }
}

#[test]
fn connection_refused_is_a_network_error() {
    let s = setup(&three_turns());
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    s.recap()
        .env("ANTHROPIC_BASE_URL", &url)
        .args(["--retries", "1"])
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "network");
            assert_eq!(doc["error"]["attempts"], 2);
        })
        .stderr_is(format!(
            "recap: model request failed: network: {url}/v1/messages: \
             tcp connect error: Connection refused (os error 111)\n"
        ))
        .run();
}

#[test]
fn retryable_faults_then_success() {
    let s = setup(&three_turns());
    s.api
        .push(Reply::error(429, "rate_limit_error", "wait").with_header("retry-after-ms", "20"))
        .push(Reply::error(529, "overloaded_error", "Overloaded"))
        .push(Reply::Truncated {
            status: 200,
            body: "{\"content\":[]}".into(),
        })
        .push(Reply::anthropic_text("You were retrying."));
    s.recap()
        .success()
        .stdout_json(|out| assert_eq!(out["text"], "You were retrying."))
        .stderr_empty()
        .run();
    assert_eq!(s.api.requests().len(), 4);
}

#[test]
fn a_retry_after_beyond_the_deadline_is_not_waited_for() {
    let s = setup(&three_turns());
    s.api
        .push(Reply::error(429, "rate_limit_error", "wait").with_header("retry-after", "600"));
    s.recap()
        .args(["--deadline", "20s"])
        .code(4)
        .stdout_json(|out| assert_eq!(out["error"]["kind"], "rate_limited"))
        .stderr_is("recap: model request failed: rate_limited: wait\n")
        .run();
    assert_eq!(s.api.requests().len(), 1);
}

#[test]
fn keys_are_never_printed() {
    let s = setup(&three_turns());
    s.api.push(Reply::error(
        401,
        "authentication_error",
        "invalid x-api-key",
    ));
    s.recap()
        .arg("-v")
        .code(4)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "auth"))
        .stdout_with(|out| assert!(!out.contains("SECRET"), "{out}"))
        .stderr_with(|err| assert!(!err.contains("SECRET"), "{err}"))
        .stderr_is(format!(
            "recap: read {}: 7 messages of context, 3 real user turns and no away summary, \
             read to the start\n\
             recap: default mode (/recap): no gates, nothing is written\n\
             recap: asking claude-haiku-4-5 about 7 messages\n\
             recap: model request failed: auth: invalid x-api-key\n",
            s.transcript.display()
        ))
        .run();
}

#[test]
fn long_answers_are_capped_at_400_characters() {
    let s = setup(&three_turns());
    s.api.push(Reply::anthropic_text(&format!(
        "You were {}",
        "very ".repeat(200)
    )));
    s.recap()
        .success()
        .stdout_json(|out| assert_eq!(out["text"].as_str().unwrap().chars().count(), 400))
        .stderr_empty()
        .run();
}

#[test]
fn auto_appends_one_away_summary_record() {
    let t = three_turns();
    let s = setup(&t);
    let before = bytes(&s.transcript);
    s.api.push(Reply::anthropic_text(
        "You were updating the README; next, commit it.",
    ));
    let out = s
        .recap()
        .arg("--auto")
        .success()
        .stdout_json(|doc| assert_eq!(doc["status"], "ok", "{doc}"))
        .stderr_empty()
        .run()
        .json();
    let after = bytes(&s.transcript);
    assert_eq!(&after[..before.len()], &before[..], "earlier bytes changed");
    let added = std::str::from_utf8(&after[before.len()..]).unwrap();
    assert_eq!(added.matches('\n').count(), 1, "{added}");
    let record: Value = serde_json::from_str(added.trim_end()).unwrap();
    assert_eq!(record["type"], "system");
    assert_eq!(record["subtype"], "away_summary");
    assert_eq!(record["content"], out["text"]);
    assert_eq!(
        record["content"],
        "You were updating the README; next, commit it."
    );
    assert_eq!(record["parentUuid"], t.last_uuid());
    assert_eq!(record["sessionId"], SESSION);
    assert_eq!(record["isMeta"], false);
    assert_eq!(record["uuid"], out["record_uuid"]);
    assert_eq!(record["uuid"].as_str().unwrap().len(), 36);
    assert!(record["timestamp"].as_str().unwrap().ends_with('Z'));

    // Right after, the last conversational record is the summary.
    s.recap()
        .arg("--auto")
        .code(1)
        .stdout_json(|out| {
            assert_eq!(
                (out["status"].as_str(), out["reason"].as_str()),
                (Some("skipped"), Some("already_summarized"))
            );
        })
        .stderr_is("recap: skipped: already_summarized: the last conversational record is an away summary\n")
        .run();
    assert_eq!(s.api.requests().len(), 1);
}

#[test]
fn auto_dry_run_applies_the_gates_and_sends_and_writes_nothing() {
    let t = three_turns();
    let s = setup(&t);
    let before = bytes(&s.transcript);
    s.recap()
        .args(["--auto", "--dry-run"])
        .success()
        .stdout_json(|out| {
            assert_eq!(out["status"], "dry-run");
            let message = out["message"].as_str().unwrap();
            assert!(
                message.contains("would ask") && message.contains("away_summary"),
                "{message}"
            );
        })
        .stderr_is(format!(
            "recap: dry run: every away-summary gate let it go on: would ask claude-haiku-4-5 \
             about 7 messages and append an away_summary record to {}\n",
            s.transcript.display()
        ))
        .run();
    assert_eq!(bytes(&s.transcript), before, "the transcript was written");
    assert!(s.api.requests().is_empty(), "a request was sent");
    // No credential is needed to ask.
    s.recap()
        .env_remove("ANTHROPIC_API_KEY")
        .args(["--auto", "--dry-run"])
        .success()
        .stdout_json(|out| assert_eq!(out["status"], "dry-run"))
        .stderr_is(format!(
            "recap: dry run: every away-summary gate let it go on: would ask the small/fast model \
             about 7 messages and append an away_summary record to {}\n",
            s.transcript.display()
        ))
        .run();
    // A gate that says no says it in a dry run too.
    std::fs::write(&s.transcript, &before).unwrap();
    s.api
        .push(Reply::anthropic_text("You were updating the README."));
    s.recap()
        .arg("--auto")
        .success()
        .stdout_json(|out| assert_eq!(out["status"], "ok"))
        .stderr_empty()
        .run();
    s.recap()
        .args(["--auto", "--dry-run"])
        .code(1)
        .stdout_json(|out| {
            assert_eq!(
                (out["status"].as_str(), out["reason"].as_str()),
                (Some("skipped"), Some("already_summarized"))
            );
        })
        .stderr_is("recap: skipped: already_summarized: the last conversational record is an away summary\n")
        .run();
    assert_eq!(s.api.requests().len(), 1);
}

/// `recap --auto` with `args` and `env`, which must exit `code` and print what `stderr`
/// checks: its document and the requests it made.
fn skip_reason<'c>(
    t: &Transcript,
    args: &[&str],
    env: &[(&str, &str)],
    code: i32,
    stderr: impl FnOnce(&str) + 'c,
) -> (Value, usize) {
    let s = setup(t);
    let before = bytes(&s.transcript);
    s.api.push(Reply::anthropic_text("You were testing gates."));
    let doc = s
        .recap()
        .envs(env.iter().copied())
        .arg("--auto")
        .args(args)
        .code(code)
        .stdout_json(|doc| {
            assert!(
                matches!(doc["status"].as_str(), Some("ok" | "skipped")),
                "{doc}"
            );
        })
        .stderr_with(stderr)
        .run()
        .json();
    if code != 0 {
        assert_eq!(bytes(&s.transcript), before, "a skipped recap wrote");
    }
    (doc, s.api.requests().len())
}

#[test]
fn every_away_gate_skips_without_a_request() {
    let base = three_turns();
    let after_summary = Transcript::started(Duration::from_secs(600))
        .user("a")
        .user("b")
        .user("c")
        .away_summary("You were testing.")
        .user("d")
        .assistant("ok");
    let two_turns = Transcript::started(Duration::from_secs(600))
        .user("a")
        .assistant("x")
        .user("b")
        .assistant("y");
    let recent = Transcript::started(Duration::from_secs(30))
        .user("a")
        .user("b")
        .user("c")
        .assistant("now");
    // (name, transcript, flags, environment, skip reason)
    type Case<'a> = (
        &'a str,
        &'a Transcript,
        Vec<&'a str>,
        Vec<(&'a str, &'a str)>,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "env off",
            &base,
            vec![],
            vec![("CLAUDE_CODE_ENABLE_AWAY_SUMMARY", "0")],
            "disabled",
        ),
        ("too few", &two_turns, vec![], vec![], "too_few_turns"),
        (
            "one since summary",
            &after_summary,
            vec![],
            vec![],
            "too_few_turns",
        ),
        (
            "just active",
            &recent,
            vec![],
            vec![],
            "not_away_long_enough",
        ),
        (
            "away flag",
            &base,
            vec!["--away-ms", "1000"],
            vec![],
            "not_away_long_enough",
        ),
        (
            "cold cache",
            &base,
            vec!["--cache-age-ms", "3240001"],
            vec![],
            "cache_cold",
        ),
        (
            "draft",
            &base,
            vec!["--draft", "half-typed"],
            vec![],
            "draft_pending",
        ),
        (
            "pending",
            &base,
            vec!["--pending-work"],
            vec![],
            "pending_work",
        ),
        (
            "rate",
            &base,
            vec!["--rate-limited"],
            vec![],
            "rate_limited",
        ),
    ];
    for (name, t, args, env, reason) in cases {
        let (start, end) = match name {
            "env off" => ("away summaries are turned off", ""),
            "too few" => ("2 real user turns; the first summary needs 3", ""),
            "one since summary" => ("1 real user turn since the last summary; needs 2", ""),
            "just active" => ("away ", " ms; the delay is 180000 ms"),
            "away flag" => ("away 1000 ms; the delay is 180000 ms", ""),
            "cold cache" => ("cache is 3240001 ms old; the limit is 3240000 ms", ""),
            "draft" => ("the user has an unsent draft", ""),
            "pending" => ("work is still running", ""),
            "rate" => ("the account is rate-limited", ""),
            other => unreachable!("{other}"),
        };
        let (out, requests) = skip_reason(t, &args, &env, 1, skipped_line(reason, start, end));
        assert_eq!(out["status"], "skipped", "{name}");
        assert_eq!(out["reason"], reason, "{name}: {out}");
        assert_eq!(requests, 0, "{name}");
    }
}

#[test]
fn gates_at_their_boundaries() {
    let base = three_turns();
    // delay = min(max(10000, 30000), 0.8 x 20000) = 16000.
    let delay = [
        "--delay-ms",
        "10000",
        "--cache-ttl-ms",
        "20000",
        "--cache-age-ms",
        "0",
    ];
    let (out, _) = skip_reason(
        &base,
        &[&delay[..], &["--away-ms", "15999"]].concat(),
        &[],
        1,
        skipped_line(
            "not_away_long_enough",
            "away 15999 ms; the delay is 16000 ms",
            "",
        ),
    );
    assert_eq!(out["reason"], "not_away_long_enough");
    let (out, _) = skip_reason(
        &base,
        &[&delay[..], &["--away-ms", "16000"]].concat(),
        &[],
        0,
        |err| assert_eq!(err, ""),
    );
    assert_eq!(out["status"], "ok", "{out}");
    // 0.9 x 3600000 = 3240000 is still warm.
    let (out, _) = skip_reason(&base, &["--cache-age-ms", "3240000"], &[], 0, |err| {
        assert_eq!(err, "");
    });
    assert_eq!(out["status"], "ok", "{out}");
    // a blank draft is no draft
    let (out, _) = skip_reason(&base, &["--draft", "   "], &[], 0, |err| {
        assert_eq!(err, "");
    });
    assert_eq!(out["status"], "ok", "{out}");
    // The environment switch wins over the setting.
    let s = setup(&base);
    s.home.write(
        "home/.claude/settings.json",
        r#"{"awaySummaryEnabled": false}"#,
    );
    s.recap()
        .arg("--auto")
        .code(1)
        .stdout_json(|out| assert_eq!(out["reason"], "disabled", "{out}"))
        .stderr_is("recap: skipped: disabled: away summaries are turned off\n")
        .run();
    s.api.push(Reply::anthropic_text("You were testing."));
    s.recap()
        .arg("--auto")
        .env("CLAUDE_CODE_ENABLE_AWAY_SUMMARY", "1")
        .success()
        .stdout_json(|out| assert_eq!(out["status"], "ok"))
        .stderr_empty()
        .run();
}

#[test]
fn a_transcript_that_changes_during_generation_drops_the_summary() {
    let s = setup(&three_turns());
    let path = s.transcript.clone();
    let appended = "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"I'm back\"}}\n";
    s.api.push(Reply::After(
        Box::new(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            f.write_all(appended.as_bytes()).unwrap();
        }),
        Box::new(Reply::anthropic_text("You were away.")),
    ));
    s.recap()
        .arg("--auto")
        .code(1)
        .stdout_json(|out| {
            assert_eq!(out["status"], "aborted");
            assert_eq!(out["reason"], "stale");
        })
        .stderr_is("recap: aborted: stale: the transcript changed while the summary was written\n")
        .run();
    let text = String::from_utf8(bytes(&s.transcript)).unwrap();
    assert!(
        text.ends_with(appended),
        "our record was written after the new one"
    );
    assert!(!text.contains("away_summary"));
}

#[test]
fn sigterm_during_generation_aborts_without_writing() {
    let s = setup(&three_turns());
    let before = bytes(&s.transcript);
    s.api.push(Reply::Hang(Duration::from_secs(8)));
    let running = Run::new(&s.home, "recap")
        .args(["--auto", "--transcript"])
        .arg(&s.transcript)
        .env("ANTHROPIC_BASE_URL", s.api.url())
        .env("ANTHROPIC_API_KEY", KEY)
        .stdin_from(std::process::Stdio::null())
        .code(143)
        .stdout_json(|doc| assert_eq!(doc["status"], "aborted"))
        .stderr_is("recap: interrupted by SIGTERM\n")
        .spawn();
    wait::for_true("the request", || !s.api.requests().is_empty());
    assert_eq!(s.api.requests().len(), 1);
    running.signal(libc::SIGTERM);
    running.finish();
    assert_eq!(bytes(&s.transcript), before);
}

#[test]
fn a_hook_payload_names_the_transcript_and_session() {
    let s = setup(&three_turns());
    s.api.push(Reply::anthropic_text("You were hooked."));
    let payload = json!({
        "hook_event_name": "Stop",
        "session_id": "11111111-2222-4333-8444-555555555555",
        "transcript_path": s.transcript,
        "cwd": s.home.project,
        "stop_hook_active": false,
    });
    Run::new(&s.home, "recap")
        .env("ANTHROPIC_BASE_URL", s.api.url())
        .env("ANTHROPIC_API_KEY", KEY)
        .arg("--auto")
        .stdin(payload.to_string())
        .success()
        .stdout_json(|out| assert_eq!(out["text"], "You were hooked."))
        .stderr_empty()
        .run();
    let text = String::from_utf8(bytes(&s.transcript)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let record: Value = serde_json::from_str(lines[lines.len() - 1]).unwrap();
    // The chain's last record before ours (records without a uuid are off the chain).
    let before: Value = lines[..lines.len() - 1]
        .iter()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["uuid"].is_string())
        .unwrap();
    // The record joins the transcript's chain: its session is the transcript's own (the
    // payload's session names it only when the records do not).
    assert_eq!(record["sessionId"], before["sessionId"]);
    assert_eq!(record["parentUuid"], before["uuid"]);
}

#[test]
fn missing_transcripts_and_usage_errors() {
    let s = setup(&three_turns());
    Run::new(&s.home, "recap")
        .code(2)
        .stdout_json(|out| assert_eq!(out["error"]["kind"], "usage"))
        .stderr_is(
            "recap: no transcript: pass --transcript PATH or a hook payload with transcript_path\n",
        )
        .run();
    Run::new(&s.home, "recap")
        .env("ANTHROPIC_API_KEY", KEY)
        .args(["--transcript", "/nonexistent/x.jsonl"])
        .code(3)
        .stdout_json(|out| assert_eq!(out["status"], "failed"))
        .stderr_is(
            "recap: cannot read /nonexistent/x.jsonl: No such file or directory (os error 2)\n",
        )
        .run();
    s.recap()
        .args(["--timeout", "soon"])
        .code(2)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "usage");
            assert_eq!(
                doc["error"]["message"],
                "invalid value 'soon' for '--timeout <DURATION>': unknown unit \"soon\" in \"soon\" \
                 (use a number of seconds, or a number with ms, s, m or h)"
            );
        })
        .stderr_is(usage_stderr(
            "recap",
            "invalid value 'soon' for '--timeout <DURATION>': unknown unit \"soon\" in \"soon\" \
             (use a number of seconds, or a number with ms, s, m or h)",
        ))
        .run();
    assert!(s.api.requests().is_empty());
}
