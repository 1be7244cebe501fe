//! OpenAI-compatible servers and the small models behind them. The first half replays what
//! llama-cpp-python 0.3.36 really answered (tests/fixtures/llama-cpp-server) from the fake
//! server; the second half runs every model tool against the real server with
//! SmolLM2-135M-Instruct, when `make test-local-model` has started it
//! (`DREAMKIT_TEST_LOCAL_MODEL` is its base URL). A 135M model is a protocol test: these
//! tests assert mechanics and safety (exit codes, JSON shapes, usage, files), never wording.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::dream::Dream;
use crate::support::fake_api::{Recorded, Reply};
use crate::support::transcript::{Transcript, SESSION};

use crate::support::{bin_path, ClaudeHome, LiveProcess, Run};

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

/// What `turn-status --engine llm -v` says on a Stop payload whose transcript (the
/// fixture's, not in this home) it cannot read: that, the model it asks, and the answer's
/// token counts.
fn verbose_classified(err: &str) {
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(
        lines[0].starts_with("turn-status: no summarizes_uuid: cannot read ")
            && lines[0].ends_with(".jsonl"),
        "{err}"
    );
    assert_eq!(lines[1], "turn-status: asking smollm2-135m-instruct");
    let counts = lines[2]
        .strip_prefix("turn-status: llm: done (")
        .and_then(|rest| rest.strip_suffix(" output tokens)"))
        .and_then(|rest| rest.split_once(" input, "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        counts.0.parse::<u64>().is_ok() && counts.1.parse::<u64>().is_ok(),
        "{err}"
    );
}

/// `turn-status --engine llm -v` on a Stop payload of `text`, which must classify it (exit
/// 0); its document.
fn turn_status(home: &ClaudeHome, base_url: &str, text: &str) -> Value {
    Run::new(home, "turn-status")
        .args(["--engine", "llm", "-v"])
        .envs(openai_env(base_url))
        .stdin(stop_payload(text))
        .timeout(Duration::from_secs(300))
        .success()
        .stdout_json(|doc| assert_eq!(doc["status_category"], "completed", "{doc}"))
        .stderr_with(verbose_classified)
        .run()
        .json()
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
    let doc = turn_status(&d.home, &base, "All tests pass. I pushed the fix.");
    assert_eq!(doc["status_category"], "completed");
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
    turn_status(&d.home, &base, "All tests pass. I pushed the fix.");
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
    turn_status(&d.home, &base, "Pushed.");
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
    turn_status(&d.home, &base, "Pushed.");
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
        let ran = Run::new(&d.home, "turn-status")
            .args(["--engine", "llm"])
            .envs(openai_env(&base))
            .env("DREAMKIT_OPENAI_EXTRA_BODY", extra)
            .stdin(stop_payload("Pushed."))
            .code(2)
            .stdout_json(|doc| {
                let error = &doc["error"];
                assert_eq!(error["kind"], "usage");
                assert!(
                    error["message"].as_str().unwrap().contains(why),
                    "{extra}: {error}"
                );
            })
            .stderr_with(|err| {
                assert!(
                    err.starts_with("turn-status: DREAMKIT_OPENAI_EXTRA_BODY "),
                    "{err}"
                );
            })
            .run();
        let message = ran.json()["error"]["message"].as_str().unwrap().to_string();
        assert_eq!(ran.stderr, format!("turn-status: {message}\n"));
    }
    assert!(d.api.requests().is_empty());
    d.api.push(Reply::captured("rf-json-object-schema.json"));
    std::fs::create_dir_all(formats_file(&d.home).parent().unwrap()).unwrap();
    std::fs::write(
        formats_file(&d.home),
        json!({ base.clone(): "json_object_schema" }).to_string(),
    )
    .unwrap();
    Run::new(&d.home, "turn-status")
        .args(["--engine", "llm"])
        .envs(openai_env(&base))
        .env(
            "DREAMKIT_OPENAI_EXTRA_BODY",
            r#"{"repeat_penalty": 1.0, "seed": 42, "temperature": 0}"#,
        )
        .stdin(stop_payload("Pushed."))
        .success()
        .stdout_json(|doc| assert_eq!(doc["status_category"], "completed", "{doc}"))
        .stderr_empty()
        .run();
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

/// `bin` with the Dream world's environment and fake model.
fn tool<'a>(d: &Dream, bin: &str) -> Run<'a> {
    Run::ours(d.process(&bin_path(bin)), bin)
}

/// dream-run on the OpenAI-compatible server at `base_url`, the envelope on stdin; the caller
/// says what it must print.
fn dream_run<'a>(d: &Dream, base_url: &str, envelope: &str, args: &[&str]) -> Run<'a> {
    tool(d, "dream-run")
        .envs(openai_env(base_url))
        .args(args)
        .stdin(envelope)
        .timeout(Duration::from_secs(600))
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
    let doc = dream_run(&d, &base, &envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        // deploys.md is linked from no index.
        .stderr_is(
            "dream-run: the run left more problems than it found: orphan_file 0 -> 1, front_matter 2 -> 3 (dream-run \
             check lists them)\n",
        )
        .run()
        .json();
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
    let doc = dream_run(&d, &base, &envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed"))
        .stderr_empty()
        .run()
        .json();
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
    dream_run(&d, &base, &envelope, &["--max-answer-tokens", "8"])
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "failed", "{doc}");
            assert_eq!(doc["run"]["error"], "truncated", "{doc}");
        })
        .stderr_is(
            "dream-run: run failed: the model's reply was cut at --max-answer-tokens 8 twice, \
             with no tool call\n",
        )
        .run();
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

/// `bin` against the real server, deterministic, with an Anthropic key it must never print.
fn real<'a>(home: &ClaudeHome, base: &str, secret: &str, bin: &str) -> Run<'a> {
    Run::new(home, bin)
        .envs(openai_env(base))
        .env("DREAMKIT_OPENAI_EXTRA_BODY", REAL_EXTRA)
        .env("ANTHROPIC_API_KEY", secret)
        .args(["--timeout", "300s", "--deadline", "10m"])
        .timeout(Duration::from_secs(600))
}

/// Every line on stderr is `tool`'s own.
fn lines_of(tool: &str, err: &str) {
    let prefix = format!("{tool}: ");
    assert!(err.lines().all(|l| l.starts_with(&prefix)), "{err}");
}

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
    let cmd = |bin: &str| real(&home, &base, secret, bin);
    let before = crate::support::tree(&home.root);
    let recap = cmd("recap")
        .args(["--transcript", &transcript])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["status"], "ok", "{doc}");
            assert!(!doc["text"].as_str().unwrap().trim().is_empty(), "{doc}");
            usage_is_the_servers(&doc["usage"]);
        })
        .stderr_empty()
        .run();

    let suggest = cmd("suggest")
        .args(["--transcript", &transcript])
        .code_any("a suggestion (0) or a filtered one (1), as the free model answers")
        .stdout_json(|doc| {
            assert!(doc.get("error").is_none(), "{doc}");
            usage_is_the_servers(&doc["usage"]);
        })
        .stderr_with(|e| lines_of("suggest", e))
        .run();
    // A suggestion, or a filtered one: both are answers, and neither is an error.
    assert!(matches!(suggest.code, Some(0 | 1)), "{:?}", suggest.code);
    if suggest.code == Some(0) {
        assert_eq!(suggest.stderr, "", "a suggestion is printed, not explained");
    }

    let status = cmd("turn-status")
        .args(["--engine", "llm"])
        .stdin(stop_payload(
            "All 42 tests pass. I committed the fix as a1b2c3d and pushed it to origin/main.",
        ))
        .success()
        .stdout_json(|doc| assert_eq!(doc["subtype"], "post_turn_summary", "{doc}"))
        .stderr_empty()
        .run();
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
        .success()
        .stdout_json(|doc| assert_eq!(doc["status"], "ok", "{doc}"))
        .stderr_empty()
        .run();
    let doc = auto.json();
    usage_is_the_servers(&doc["usage"]);
    let written = std::fs::read_to_string(&session).unwrap();
    let last: Value = serde_json::from_str(written.lines().last().unwrap()).unwrap();
    assert_eq!(last["subtype"], "away_summary", "{last}");
    assert_eq!(last["uuid"], doc["record_uuid"]);
    assert_eq!(last["content"], doc["text"]);
    assert_eq!(last["parentUuid"], three_turns.last_uuid());

    // feedback asks no model: unaffected by the provider settings.
    Run::new(&home, "feedback")
        .envs(openai_env(&base))
        .arg("list")
        .success()
        .stdout_json(|doc| assert_eq!(doc["drafts"], json!([])))
        .stderr_empty()
        .run();

    for out in [&recap, &suggest, &status, &auto] {
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(!all.contains(secret), "a secret was printed: {all}");
    }
    // Only dreamkit's state changed, and the transcript written here for the away summary.
    let after = crate::support::tree(&home.root);
    // The tree's paths are relative to the home's root.
    let relative = |path: &Path| path.strip_prefix(&home.root).unwrap().to_path_buf();
    let state = relative(&home.state_home).to_string_lossy().into_owned();
    let session = relative(&session);
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
        tool(&d, "dream-run")
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
            .stdin(envelope)
            .timeout(Duration::from_secs(1200))
    };
    let outside_before = crate::support::tree(&d.home.project);
    let memory_before = memory_files(&d);

    // Apply mode.
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let out = run(&envelope, &[])
        .code_any("completed (0) or out of turns (1), as the free model goes; matched below")
        .stdout_json(|doc| assert!(doc["run"]["status"].is_string(), "{doc}"))
        .stderr_with(|e| lines_of("dream-run", e))
        .run();
    let doc = out.json();
    eprintln!("apply: {}", doc["run"]);
    let status = doc["run"]["status"].as_str().unwrap().to_string();
    match out.code {
        Some(0) => assert_eq!(status, "completed", "{doc}"),
        // A tiny model may well use its two turns and still call tools.
        Some(1) => {
            assert_eq!(status, "failed", "{doc}");
            assert_eq!(doc["run"]["error"], "max_turns", "{doc}");
            assert_eq!(
                out.stderr,
                "dream-run: run failed: the agent still wanted tools after --max-turns 2\n"
            );
        }
        other => panic!("{other:?}: {doc} {}", out.stderr),
    }
    usage_is_the_servers(&doc["run"]["usage"]);
    assert!(doc["run"]["turns"].as_u64().unwrap() <= 2, "{doc}");
    let touched = doc["run"]["files_touched"].as_array().unwrap().clone();
    // Something to undo only after a completed run that touched files.
    let undoes = status == "completed" && !touched.is_empty();
    let undone = tool(&d, "dream-run")
        .args(["undo", doc["run"]["task_id"].as_str().unwrap()])
        .code(if undoes { 0 } else { 1 })
        .stdout_json(move |doc| {
            if undoes {
                assert_eq!(doc["undone"], true, "{doc}");
            }
        })
        .stderr_with(|e| lines_of("dream-run", e))
        .run();
    let (undo_stderr, undone) = (undone.stderr.clone(), undone.json());
    eprintln!("undo: {undone}");
    if undone["reason"] == "no_snapshot" {
        assert_eq!(
            undo_stderr,
            format!(
                "dream-run: task {} changed nothing, was restored already, or its snapshot was \
                 pruned\n",
                doc["run"]["task_id"].as_str().unwrap()
            )
        );
    }
    if undoes {
        assert_eq!(memory_files(&d), memory_before);
    } else if status == "completed" {
        assert_eq!(undone["reason"], "nothing_to_undo", "{undone}");
    } else {
        // A failed run was restored from its snapshot already: nothing is left to undo.
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
    let out = run(&envelope, &["--propose"])
        .code_any("proposed (0) or not (1), as the free model goes; matched below")
        .stdout_json(|doc| assert!(doc["run"]["status"].is_string(), "{doc}"))
        .stderr_with(|e| lines_of("dream-run", e))
        .run();
    let doc = out.json();
    eprintln!("propose: {}", doc["run"]);
    assert!(matches!(out.code, Some(0 | 1)), "{doc} {}", out.stderr);
    if doc["run"]["error"] == "max_turns" {
        assert_eq!(
            out.stderr,
            "dream-run: run failed: the agent still wanted tools after --max-turns 2\n"
        );
    }
    // Review mode never touches the memory dir.
    assert_eq!(memory_files(&d), memory_before);
    let proposed = doc["run"]["status"] == "proposed";
    let shown = tool(&d, "dream-run")
        .arg("show")
        .code(if proposed { 0 } else { 1 })
        .stdout_json(move |doc| {
            if proposed {
                assert!(doc.get("error").is_none(), "{doc}");
            }
        })
        .stderr_with(|e| lines_of("dream-run", e))
        .run();
    if !proposed {
        assert_eq!(shown.json()["reason"], "no_proposal", "{}", shown.stdout);
        assert_eq!(
            shown.stderr,
            "dream-run: no memory proposal: run dream-run --propose first\n"
        );
    }
    // Nothing outside the memory dir and dreamkit's state: the project is as it was.
    assert_eq!(crate::support::tree(&d.home.project), outside_before);
    assert!(!Path::new(&d.home.root.join("escape.md")).exists());
}
