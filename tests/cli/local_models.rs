//! OpenAI-compatible servers and the small models behind them. The first half replays what
//! llama-cpp-python 0.3.36 really answered (tests/fixtures/llama-cpp-server) from the fake
//! server; the second half runs every model tool against the real server with
//! SmolLM2-135M-Instruct, when `make test-local-model` has started it
//! (`DREAMKIT_TEST_LOCAL_MODEL` is its base URL). A 135M model is a protocol test: these
//! tests assert mechanics and safety (exit codes, JSON shapes, usage, files), never wording.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};

use crate::dream::Dream;
use crate::support::fake_api::{Recorded, Reply};
use crate::support::transcript::{Transcript, SESSION};
use crate::support::{stderr_text, stdout_json, ClaudeHome, LiveProcess};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/claude-code-2.1.332"
);

fn stop_payload(text: &str) -> String {
    let payload = std::fs::read_to_string(format!("{FIXTURES}/hook-input/Stop.json")).unwrap();
    let mut payload: Value = serde_json::from_str(&payload).unwrap();
    payload["last_assistant_message"] = json!(text);
    payload.to_string()
}

/// The variables that point a tool at an OpenAI-compatible server that needs no key.
fn openai_env(base_url: &str) -> [(&'static str, String); 5] {
    [
        ("DREAMKIT_PROVIDER", "openai".into()),
        ("OPENAI_BASE_URL", base_url.into()),
        ("OPENAI_API_KEY", String::new()),
        ("OPENAI_MODEL", "smollm2-135m-instruct".into()),
        ("DREAMKIT_RETRY_BASE_MS", "1".into()),
    ]
}

fn turn_status(home: &ClaudeHome, base_url: &str, text: &str) -> Output {
    let mut cmd = home.cmd("turn-status");
    cmd.args(["--engine", "llm", "-v"])
        .envs(openai_env(base_url))
        .write_stdin(stop_payload(text))
        .timeout(Duration::from_secs(300));
    cmd.output().unwrap()
}

fn formats_file(home: &ClaudeHome) -> std::path::PathBuf {
    home.state_home.join("dreamkit/response-formats.json")
}

fn response_format(request: &Recorded) -> Value {
    request.body["response_format"].clone()
}

#[test]
fn turn_status_finds_the_response_format_llama_cpp_takes_and_remembers_it() {
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    // What llama-cpp-python 0.3.36 answers: HTTP 500 to the json_schema form, JSON to
    // json_object with a schema.
    d.api.push(Reply::captured("rf-json-schema.json"));
    d.api.push(Reply::captured("rf-json-object-schema.json"));
    let out = turn_status(&d.home, &base, "All tests pass. I pushed the fix.");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(stdout_json(&out)["status_category"], "completed");
    let requests = d.api.requests();
    // The refused form is not retried: two requests, not four.
    assert_eq!(requests.len(), 2, "{requests:?}");
    let schema = &requests[1].body["response_format"]["schema"];
    assert_eq!(response_format(&requests[0])["type"], "json_schema");
    assert_eq!(
        response_format(&requests[0])["json_schema"]["schema"],
        *schema
    );
    assert_eq!(response_format(&requests[1])["type"], "json_object");
    assert_eq!(
        schema["properties"]["state"]["enum"],
        json!(["working", "blocked", "done", "failed"])
    );
    let remembered: Value =
        serde_json::from_slice(&std::fs::read(formats_file(&d.home)).unwrap()).unwrap();
    assert_eq!(remembered, json!({ base.clone(): "json_object_schema" }));
    assert_eq!(
        crate::support::mode(&std::fs::metadata(formats_file(&d.home)).unwrap()),
        0o600
    );

    // The next call starts with the form that worked.
    d.api.push(Reply::captured("rf-json-object-schema.json"));
    let out = turn_status(&d.home, &base, "All tests pass. I pushed the fix.");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let requests = d.api.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(response_format(&requests[2])["type"], "json_object");
}

#[test]
fn a_server_that_ignores_response_format_is_asked_the_next_way() {
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    let good = r#"{"state":"done","detail":"pushed the fix","tempo":"idle","needs":"","result":"fix pushed"}"#;
    // The json_schema form answered with prose: the server ignored it.
    d.api.push(Reply::openai_text("The turn is done, I think."));
    d.api.push(Reply::openai_text(good));
    let out = turn_status(&d.home, &base, "Pushed.");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let requests = d.api.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(response_format(&requests[1])["type"], "json_object");
    let remembered: Value =
        serde_json::from_slice(&std::fs::read(formats_file(&d.home)).unwrap()).unwrap();
    assert_eq!(remembered[&base], "json_object_schema");

    // A server that takes none of the forms: the plain request's answer is used, and so is
    // the engine's one correction.
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    for _ in 0..3 {
        d.api.push(Reply::openai_text("done"));
    }
    d.api.push(Reply::openai_text(good));
    let out = turn_status(&d.home, &base, "Pushed.");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let requests = d.api.requests();
    let forms: Vec<Value> = requests
        .iter()
        .map(|r| response_format(r)["type"].clone())
        .collect();
    assert_eq!(
        forms,
        [
            json!("json_schema"),
            json!("json_object"),
            Value::Null,
            json!("json_schema")
        ]
    );
    // Nothing gave JSON until the correction's first form: that one is remembered.
    let remembered: Value =
        serde_json::from_slice(&std::fs::read(formats_file(&d.home)).unwrap()).unwrap();
    assert_eq!(remembered[&base], "json_schema");
}

#[test]
fn a_bad_extra_body_is_a_usage_error_and_a_good_one_is_sent() {
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    for (extra, why) in [
        ("[1]", "a JSON object"),
        (r#"{"model": "x"}"#, "\"model\""),
        (r#"{"max_tokens": 5}"#, "\"max_tokens\""),
    ] {
        let out = d
            .home
            .cmd("turn-status")
            .args(["--engine", "llm"])
            .envs(openai_env(&base))
            .env("DREAMKIT_OPENAI_EXTRA_BODY", extra)
            .write_stdin(stop_payload("Pushed."))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra}");
        let error = &stdout_json(&out)["error"];
        assert_eq!(error["kind"], "usage");
        assert!(
            error["message"].as_str().unwrap().contains(why),
            "{extra}: {error}"
        );
    }
    assert!(d.api.requests().is_empty());
    d.api.push(Reply::captured("rf-json-object-schema.json"));
    std::fs::create_dir_all(formats_file(&d.home).parent().unwrap()).unwrap();
    std::fs::write(
        formats_file(&d.home),
        json!({ base.clone(): "json_object_schema" }).to_string(),
    )
    .unwrap();
    let out = d
        .home
        .cmd("turn-status")
        .args(["--engine", "llm"])
        .envs(openai_env(&base))
        .env(
            "DREAMKIT_OPENAI_EXTRA_BODY",
            r#"{"repeat_penalty": 1.0, "seed": 42, "temperature": 0}"#,
        )
        .write_stdin(stop_payload("Pushed."))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let body = &d.api.requests()[0].body;
    assert_eq!(
        (&body["repeat_penalty"], &body["seed"], &body["temperature"]),
        (&json!(1.0), &json!(42), &json!(0))
    );
    assert_eq!(body["max_tokens"], 300);
}

/// The messages of a chat-completions request with role `tool`: (call id, content).
fn tool_messages(request: &Recorded) -> Vec<(String, String)> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn dream_run(d: &Dream, base_url: &str, envelope: &str, args: &[&str]) -> Output {
    d.cmd("dream-run")
        .envs(openai_env(base_url))
        .args(args)
        .write_stdin(envelope.to_string())
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap()
}

#[test]
fn what_weak_models_send_comes_back_to_them_as_tool_errors() {
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    // Turn 1: an empty id with arguments that are not JSON, a call with no id and an unknown
    // tool; turn 2: the call written as JSON text in content (SmolLM2 with its own chat
    // template does this); turn 3: nothing more to do, in llama-cpp-python's shape.
    d.api.push(Reply::openai_message(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "", "type": "function",
             "function": {"name": "write_file", "arguments": "{\"path\": \"notes.md\", \"content\": "}},
            {"type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}},
        ]}),
        "tool_calls",
    ));
    d.api.push(Reply::openai_message(
        json!({"role": "assistant", "content":
            "{\"name\": \"write_file\", \"arguments\": {\"path\": \"deploys.md\", \"content\": \"We deploy blue-green.\\n\"}}"}),
        "stop",
    ));
    d.api.push(Reply::captured("tools-no-call.json"));
    let out = dream_run(&d, &base, &envelope, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["run"]["status"], "completed", "{doc}");
    let requests = d.api.requests();
    assert_eq!(requests.len(), 3);
    // Every request says tool_choice auto and carries the per-request output limit.
    for r in &requests {
        assert_eq!(r.body["tool_choice"], "auto");
        assert_eq!(r.body["max_tokens"], 8192);
    }
    let turn1 = tool_messages(&requests[1]);
    assert_eq!(turn1.len(), 2, "{turn1:?}");
    assert!(turn1.iter().all(|(id, _)| id.starts_with("call_")));
    assert_ne!(turn1[0].0, turn1[1].0);
    assert!(
        turn1[0]
            .1
            .starts_with("error: write_file: the arguments must be a JSON object"),
        "{}",
        turn1[0].1
    );
    assert!(
        turn1[1].1.starts_with("error: unknown tool \"bash\""),
        "{}",
        turn1[1].1
    );
    // The assistant's turn is replayed with the ids given and an empty (not null) content.
    let replayed = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(replayed["content"], "");
    assert_eq!(replayed["tool_calls"][0]["id"], turn1[0].0.as_str());
    assert_eq!(
        replayed["tool_calls"][0]["function"]["arguments"],
        "{\"path\": \"notes.md\", \"content\": "
    );
    // The call written as text ran.
    let turn2 = tool_messages(&requests[2]);
    assert_eq!(turn2.len(), 3, "{turn2:?}");
    assert!(!turn2[2].1.starts_with("error"), "{}", turn2[2].1);
    assert_eq!(d.read("deploys.md"), "We deploy blue-green.\n");
    assert!(!d.mem().join("notes.md").exists());
    assert_eq!(
        doc["run"]["files_touched"],
        json!([d.mem().join("deploys.md")])
    );
    // Usage is the server's counts, summed.
    assert_eq!(doc["run"]["usage"]["input_tokens"], 3 * 276);
}

/// The memory dir's files and contents, without the lock files (a run moves those).
fn memory_files(d: &Dream) -> Vec<(String, Vec<u8>)> {
    crate::support::tree(&d.mem())
        .into_iter()
        .filter(|(path, _)| !path.contains(".consolidate-lock"))
        .collect()
}

#[test]
fn a_weak_model_that_calls_no_tool_ends_the_run_with_a_warning() {
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let before = memory_files(&d);
    d.api.push(Reply::captured("tools-no-call.json"));
    let out = dream_run(&d, &base, &envelope, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["run"]["status"], "completed");
    assert_eq!(doc["run"]["files_touched"], json!([]));
    assert!(
        doc["run"]["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!("no_tool_calls")),
        "{doc}"
    );
    assert_eq!(d.api.requests().len(), 1);
    assert_eq!(memory_files(&d), before);
}

#[test]
fn a_reply_cut_at_the_per_request_limit_is_truncated() {
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    // Captured: a reply cut by max_tokens (finish_reason "length").
    d.api.push(Reply::captured("chat-length.json"));
    d.api.push(Reply::captured("chat-length.json"));
    let out = dream_run(&d, &base, &envelope, &["--max-answer-tokens", "8"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["run"]["status"], "failed", "{doc}");
    assert_eq!(doc["run"]["error"], "truncated", "{doc}");
    let requests = d.api.requests();
    assert_eq!(requests.len(), 2, "asked once to continue");
    assert_eq!(requests[0].body["max_tokens"], 8);
}

// ---- the real server ------------------------------------------------------------------

/// The real server's base URL, or `None` after a visible SKIP line. With
/// `DREAMKIT_TEST_LOCAL_MODEL_REQUIRED=1` (CI), a missing server fails the test.
fn real_server(test: &str) -> Option<String> {
    match std::env::var("DREAMKIT_TEST_LOCAL_MODEL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("DREAMKIT_TEST_LOCAL_MODEL_REQUIRED").as_deref() == Ok("1") => {
            panic!("{test}: DREAMKIT_TEST_LOCAL_MODEL is not set: run `make test-local-model`")
        }
        _ => {
            crate::support::skip(
                test,
                "no local model server (`make test-local-model` starts one)",
            );
            None
        }
    }
}

/// Deterministic sampling for the real server; `repeat_penalty` 1.0 keeps SmolLM2 from
/// running away inside a tool call's JSON after a tool result (llama.cpp's default 1.1 does).
const REAL_EXTRA: &str = r#"{"temperature": 0, "seed": 42, "repeat_penalty": 1.0}"#;

fn usage_is_the_servers(usage: &Value) {
    assert!(usage["input_tokens"].as_u64().unwrap() > 0, "{usage}");
    assert!(usage["output_tokens"].as_u64().unwrap() > 0, "{usage}");
}

#[test]
fn real_model_recap_suggest_and_turn_status() {
    let Some(base) = real_server("real_model_recap_suggest_and_turn_status") else {
        return;
    };
    let home = ClaudeHome::new();
    let transcript = format!("{FIXTURES}/session-tool-use.jsonl");
    let secret = "sk-ant-api03-never-printed-0123456789abcdefghijklmnop";
    let cmd = |bin: &str| {
        let mut cmd = home.cmd(bin);
        cmd.envs(openai_env(&base))
            .env("DREAMKIT_OPENAI_EXTRA_BODY", REAL_EXTRA)
            .env("ANTHROPIC_API_KEY", secret)
            .args(["--timeout", "300s", "--deadline", "10m"])
            .timeout(Duration::from_secs(600));
        cmd
    };
    let before = crate::support::tree(&home.root);
    let recap = cmd("recap")
        .args(["--transcript", &transcript])
        .output()
        .unwrap();
    assert_eq!(recap.status.code(), Some(0), "{}", stderr_text(&recap));
    let doc = stdout_json(&recap);
    assert_eq!(doc["status"], "ok", "{doc}");
    assert!(!doc["text"].as_str().unwrap().trim().is_empty(), "{doc}");
    usage_is_the_servers(&doc["usage"]);

    let suggest = cmd("suggest")
        .args(["--transcript", &transcript])
        .output()
        .unwrap();
    // A suggestion, or a filtered one: both are answers, and neither is an error.
    assert!(
        matches!(suggest.status.code(), Some(0 | 1)),
        "{}",
        stderr_text(&suggest)
    );
    let doc = stdout_json(&suggest);
    assert!(doc.get("error").is_none(), "{doc}");
    usage_is_the_servers(&doc["usage"]);

    let status = cmd("turn-status")
        .args(["--engine", "llm"])
        .write_stdin(stop_payload(
            "All 42 tests pass. I committed the fix as a1b2c3d and pushed it to origin/main.",
        ))
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(0), "{}", stderr_text(&status));
    let doc = stdout_json(&status);
    assert_eq!(doc["subtype"], "post_turn_summary", "{doc}");
    // The real server refuses json_schema and takes json_object with a schema.
    let remembered: Value =
        serde_json::from_slice(&std::fs::read(formats_file(&home)).unwrap()).unwrap();
    assert_eq!(remembered[&base], "json_object_schema");

    // The away summary: three real turns ten minutes ago, past the delay, cache still warm.
    let session = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
    let three_turns = Transcript::started(Duration::from_secs(600))
        .user("Why does the gate scan slowly?")
        .assistant("It stats every transcript by its full path.")
        .user("Make it stat relative to the directory.")
        .assistant("Done: the scan now takes 0.89x of find.")
        .user("Good, now update the README.")
        .assistant("Updated the README with the new figures.");
    three_turns.write(&session);
    let auto = cmd("recap")
        .args(["--auto", "--transcript"])
        .arg(&session)
        .output()
        .unwrap();
    assert_eq!(auto.status.code(), Some(0), "{}", stderr_text(&auto));
    let doc = stdout_json(&auto);
    assert_eq!(doc["status"], "ok", "{doc}");
    usage_is_the_servers(&doc["usage"]);
    let written = std::fs::read_to_string(&session).unwrap();
    let last: Value = serde_json::from_str(written.lines().last().unwrap()).unwrap();
    assert_eq!(last["subtype"], "away_summary", "{last}");
    assert_eq!(last["uuid"], doc["record_uuid"]);
    assert_eq!(last["content"], doc["text"]);
    assert_eq!(last["parentUuid"], three_turns.last_uuid());

    // feedback asks no model: unaffected by the provider settings.
    let feedback = home
        .cmd("feedback")
        .envs(openai_env(&base))
        .arg("list")
        .output()
        .unwrap();
    assert_eq!(
        feedback.status.code(),
        Some(0),
        "{}",
        stderr_text(&feedback)
    );
    assert_eq!(stdout_json(&feedback)["drafts"], json!([]));

    for out in [&recap, &suggest, &status, &auto] {
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            stderr_text(out)
        );
        assert!(!all.contains(secret), "a secret was printed: {all}");
    }
    // Only dreamkit's state changed, and the transcript written here for the away summary.
    let after = crate::support::tree(&home.root);
    let state = home.state_home.to_string_lossy().into_owned();
    let changed: Vec<_> = after
        .symmetric_difference(&before)
        .filter(|(p, _)| !p.starts_with(&state) && Path::new(p) != session)
        .collect();
    assert!(changed.is_empty(), "{changed:?}");
}

#[test]
fn real_model_dream_run_apply_undo_propose_and_show() {
    let Some(base) = real_server("real_model_dream_run_apply_undo_propose_and_show") else {
        return;
    };
    let d = Dream::new();
    let run = |envelope: &str, args: &[&str]| {
        d.cmd("dream-run")
            .envs(openai_env(&base))
            .env("DREAMKIT_OPENAI_EXTRA_BODY", REAL_EXTRA)
            .args([
                "--max-turns",
                "2",
                "--max-answer-tokens",
                "300",
                "--timeout",
                "300s",
                "--deadline",
                "15m",
            ])
            .args(args)
            .write_stdin(envelope.to_string())
            .timeout(Duration::from_secs(1200))
            .output()
            .unwrap()
    };
    let outside_before = crate::support::tree(&d.home.project);
    let memory_before = memory_files(&d);

    // Apply mode.
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let out = run(&envelope, &[]);
    let doc = stdout_json(&out);
    eprintln!("apply: {}", doc["run"]);
    let status = doc["run"]["status"].as_str().unwrap().to_string();
    match out.status.code() {
        Some(0) => assert_eq!(status, "completed", "{doc}"),
        // A tiny model may well use its two turns and still call tools.
        Some(1) => {
            assert_eq!(status, "failed", "{doc}");
            assert_eq!(doc["run"]["error"], "max_turns", "{doc}");
        }
        other => panic!("{other:?}: {doc} {}", stderr_text(&out)),
    }
    usage_is_the_servers(&doc["run"]["usage"]);
    assert!(doc["run"]["turns"].as_u64().unwrap() <= 2, "{doc}");
    let touched = doc["run"]["files_touched"].as_array().unwrap().clone();
    let undo = d
        .cmd("dream-run")
        .args(["undo", doc["run"]["task_id"].as_str().unwrap()])
        .output()
        .unwrap();
    let undone = stdout_json(&undo);
    eprintln!("undo: {undone}");
    if status == "completed" && !touched.is_empty() {
        assert_eq!(undo.status.code(), Some(0), "{undone}");
        assert_eq!(memory_files(&d), memory_before);
    } else if status == "completed" {
        assert_eq!(undo.status.code(), Some(1), "{undone}");
        assert_eq!(undone["reason"], "nothing_to_undo", "{undone}");
    } else {
        // A failed run was restored from its snapshot already: nothing is left to undo.
        assert_eq!(undo.status.code(), Some(1), "{undone}");
        assert!(
            matches!(
                undone["reason"].as_str(),
                Some("no_snapshot" | "nothing_to_undo")
            ),
            "{undone}"
        );
        assert_eq!(memory_files(&d), memory_before);
    }
    drop(holder);

    // Review mode, then show.
    d.touch_sessions();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let memory_before = memory_files(&d);
    let out = run(&envelope, &["--propose"]);
    let doc = stdout_json(&out);
    eprintln!("propose: {}", doc["run"]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{doc} {}",
        stderr_text(&out)
    );
    // Review mode never touches the memory dir.
    assert_eq!(memory_files(&d), memory_before);
    let show = d.cmd("dream-run").arg("show").output().unwrap();
    let shown = stdout_json(&show);
    match doc["run"]["status"].as_str().unwrap() {
        "proposed" => assert_eq!(show.status.code(), Some(0), "{shown}"),
        _ => {
            assert_eq!(show.status.code(), Some(1), "{shown}");
            assert_eq!(shown["reason"], "no_proposal", "{shown}");
        }
    }
    // Nothing outside the memory dir and dreamkit's state: the project is as it was.
    assert_eq!(crate::support::tree(&d.home.project), outside_before);
    assert!(!Path::new(&d.home.root.join("escape.md")).exists());
}
