//! `--provider claude`: the user's own Claude Code as the model. Against the real client
//! 2.1.332 offline (support/claude_code.rs; `make test-claude` runs these, without the client
//! they print SKIP): the one-shot tools answered through it, a dream-run whose scripted model
//! calls our MCP tools, review mode, SIGTERM mid-run, no credential, the user's hooks never
//! firing, no session written. Without the client: the version check, a missing client and a
//! deadline that ends the client's whole process group (a stand-in script).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::claude_code::{client, stand_in, Offline};
use crate::support::{ClaudeHome, Run};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/claude-code-2.1.332"
);
/// The session of the fixture transcript `session-tool-use.jsonl`.
const SESSION: &str = "854ac185-82c5-458b-8010-937270238761";

macro_rules! claude_or_skip {
    ($name:expr) => {
        match client($name) {
            Some(path) => path,
            None => return,
        }
    };
}

/// A home whose project has the fixture session as its transcript, and a user settings file
/// whose Stop and SessionStart hooks would leave a marker (none may appear).
fn home_with_session() -> (ClaudeHome, PathBuf) {
    let home = ClaudeHome::new();
    let transcript = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
    std::fs::create_dir_all(transcript.parent().unwrap()).unwrap();
    std::fs::copy(format!("{FIXTURES}/session-tool-use.jsonl"), &transcript).unwrap();
    let marker = home.root.join("hook-fired");
    let hook = json!([{"hooks": [{"type": "command",
        "command": format!("touch {}", marker.display())}]}]);
    std::fs::write(
        home.config.join("settings.json"),
        json!({"hooks": {"Stop": hook, "SessionStart": hook}}).to_string(),
    )
    .unwrap();
    (home, marker)
}

/// Every `.jsonl` under the client's `projects/` folder.
fn transcripts(home: &ClaudeHome) -> Vec<PathBuf> {
    walkdir::WalkDir::new(home.config.join("projects"))
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| e.path().to_path_buf())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect()
}

/// The checks every real-client run shares: no hook of the user's fired, and the client
/// wrote no session of its own.
fn sealed_off(home: &ClaudeHome, marker: &Path) {
    assert!(!marker.exists(), "a user hook fired inside the client");
    assert_eq!(
        transcripts(home),
        vec![home.transcripts_dir().join(format!("{SESSION}.jsonl"))],
        "the client wrote a session"
    );
}

/// The runner's last stderr line, for a tool that exited `code`.
fn ends_with_runner_line(code: i32) -> impl Fn(&str) {
    move |stderr: &str| {
        let last = stderr.lines().last().unwrap_or("");
        assert!(
            last.starts_with(&format!("run-offline: claude exit={code} ")),
            "{stderr}"
        );
    }
}

fn system_texts(body: &Value) -> Vec<String> {
    body["system"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn recap_suggest_and_turn_status_answer_through_the_users_client() {
    let claude = claude_or_skip!("recap_suggest_and_turn_status_answer_through_the_users_client");
    let (home, marker) = home_with_session();
    let offline = Offline::new(claude, &home);
    let transcript = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
    let transcript = transcript.to_str().unwrap();
    let replies = json!([
        {"any": true, "match": "You write the note", "text": "You were running a tool; next, check its output."},
        {"any": true, "match": "naturally type next", "text": "run it again"},
        {"tool_use": {"name": "StructuredOutput", "input": {"state": "blocked",
            "detail": "asks whether to push", "tempo": "blocked",
            "needs": "say yes or no", "result": ""}}},
    ]);
    let recap = offline
        .dreamkit(
            &home,
            &replies,
            "recap",
            &["-n", "--transcript", transcript],
            &[],
        )
        .success()
        .stdout_json(|doc| assert_eq!(doc["status"], "ok", "{doc}"))
        .stderr_with(ends_with_runner_line(0))
        .run()
        .json();
    assert_eq!(
        recap["text"],
        "You were running a tool; next, check its output."
    );
    assert!(
        recap["usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{recap}"
    );
    assert!(
        recap["usage"]["cost_usd"].as_f64().unwrap() > 0.0,
        "{recap}"
    );
    let requests = offline.requests();
    let body = &requests.last().unwrap()["body"];
    // The small model, our system prompt (after the client's own two lines), no tool.
    assert_eq!(body["model"], "claude-haiku-5-5");
    // recap's output cap reaches the API, and a short answer is asked with low effort.
    assert_eq!(body["max_tokens"], 200);
    assert_eq!(body["output_config"]["effort"], "low");
    assert!(
        system_texts(body)
            .last()
            .unwrap()
            .starts_with("You write the note"),
        "{body}"
    );
    assert_eq!(body["tools"], json!([]));

    offline
        .dreamkit(
            &home,
            &replies,
            "suggest",
            &["-n", "--transcript", transcript],
            &[],
        )
        .success()
        .stdout_json(|doc| assert_eq!(doc["suggestion"], "run it again", "{doc}"))
        .stderr_with(ends_with_runner_line(0))
        .run();
    // The main model: the client's default, as no --model was given.
    let requests = offline.requests();
    assert_eq!(requests.last().unwrap()["body"]["model"], "claude-opus-5-5");

    let status = offline
        .dreamkit(
            &home,
            &replies,
            "turn-status",
            &["-n", "--engine", "llm", "--transcript", transcript],
            &[],
        )
        .success()
        .stdout_json(|doc| assert_eq!(doc["status_category"], "blocked", "{doc}"))
        .stderr_with(ends_with_runner_line(0))
        .run()
        .json();
    assert_eq!(status["status_detail"], "asks whether to push");
    let main = offline.main_requests();
    let body = &main.last().unwrap()["body"];
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"StructuredOutput"), "{tools:?}");
    assert_eq!(body["model"], "claude-haiku-5-5");
    sealed_off(&home, &marker);
}

#[test]
fn the_clients_failures_are_our_kinds() {
    let claude = claude_or_skip!("the_clients_failures_are_our_kinds");
    let (home, marker) = home_with_session();
    let offline = Offline::new(claude, &home);
    let transcript = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
    let transcript = transcript.to_str().unwrap();
    let args = ["-n", "--retries", "0", "--transcript", transcript];
    for (status, kind, error_type) in [
        (401, "auth", "authentication_error"),
        (429, "rate_limited", "rate_limit_error"),
        (529, "overloaded", "overloaded_error"),
        (500, "server", "api_error"),
    ] {
        let replies = json!([{"any": true, "error": {"status": status, "type": error_type,
            "message": "scripted"}}]);
        let doc = offline
            .dreamkit(&home, &replies, "recap", &args, &[])
            .code(4)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], kind, "{doc}"))
            .stderr_with(ends_with_runner_line(4))
            .run()
            .json();
        assert_eq!(doc["error"]["status"], status, "{doc}");
    }
    // A stream cut mid-answer, twice (the client retries it once without streaming).
    let replies = json!([{"any": true, "cut": true, "text": "part", "repeat": 4}]);
    offline
        .dreamkit(&home, &replies, "recap", &args, &[])
        .code(4)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "network", "{doc}"))
        .stderr_with(ends_with_runner_line(4))
        .run();
    // No credential at all: the client is not logged in.
    let doc = offline
        .dreamkit(&home, &json!([]), "recap", &args, &["ANTHROPIC_API_KEY"])
        .code(4)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "auth", "{doc}"))
        .stderr_with(ends_with_runner_line(4))
        .run()
        .json();
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("run `claude` once and log in"),
        "{message}"
    );
    sealed_off(&home, &marker);
}

/// A stub reply: the model calls one of our tools, as the client names it.
fn mcp_call(name: &str, input: Value) -> Value {
    json!({"tool_use": {"name": format!("mcp__dreamkit__{name}"), "input": input}})
}

/// The first running process for which `pick` (its /proc entry) holds.
fn process_where(pick: impl Fn(&Path) -> bool) -> Option<i32> {
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| pick(&e.path()))
        .find_map(|e| e.file_name().to_string_lossy().parse().ok())
}

fn exe_of(proc: &Path) -> Option<PathBuf> {
    std::fs::read_link(proc.join("exe")).ok()
}

fn cwd_of(proc: &Path) -> Option<PathBuf> {
    std::fs::read_link(proc.join("cwd")).ok()
}

/// Waits until the process whose pid the stand-in wrote to `pids` is gone (or a zombie
/// waiting for its reaper).
fn wait_gone(pids: &Path) {
    let pid: i32 = std::fs::read_to_string(pids)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    crate::support::wait::for_true("the client's child to be gone", || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.is_empty() || stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z'))
    });
}

/// A memory dir with an index and a stale topic file.
fn seed_memory(home: &ClaudeHome) {
    let memory = home.memory_dir();
    std::fs::create_dir_all(&memory).unwrap();
    std::fs::write(
        memory.join("MEMORY.md"),
        "- [Old](project_old.md) — a plan that was dropped\n",
    )
    .unwrap();
    std::fs::write(
        memory.join("project_old.md"),
        "---\nname: old-plan\ndescription: a plan that was dropped\nmetadata:\n  type: project\n---\nThe old plan.\n",
    )
    .unwrap();
}

const TESTING: &str = "---\nname: testing\ndescription: run the suite before pushing\nmetadata:\n  type: feedback\n---\nRun `make test` before pushing.\n**Why:** CI is slow.\n**How to apply:** every push.\n";

/// The scripted consolidation: reads, a new file, an edit, a deletion, and two refusals.
fn consolidation(summary: &str) -> Value {
    json!([
        mcp_call("read_file", json!({"path": "MEMORY.md"})),
        mcp_call(
            "write_file",
            json!({"path": "feedback_testing.md", "content": TESTING})
        ),
        mcp_call(
            "edit_file",
            json!({"path": "MEMORY.md",
            "old_string": "- [Old](project_old.md) — a plan that was dropped",
            "new_string": "- [Testing](feedback_testing.md) — run the suite before pushing"})
        ),
        mcp_call("read_file", json!({"path": "project_old.md"})),
        mcp_call("delete_file", json!({"path": "project_old.md"})),
        mcp_call(
            "write_file",
            json!({"path": "../escape.md", "content": "x"})
        ),
        mcp_call("shell", json!({"command": "cat MEMORY.md > copy.md"})),
        summary,
    ])
}

/// The tool results the client sent back to the model, in order: (is_error, text).
fn tool_results(offline: &Offline) -> Vec<(bool, String)> {
    let Some(last) = offline.main_requests().pop() else {
        return Vec::new();
    };
    let mut results = Vec::new();
    for message in last["body"]["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                let text = match &block["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect::<Vec<_>>()
                        .join(""),
                    _ => String::new(),
                };
                results.push((block["is_error"] == true, text));
            }
        }
    }
    results
}

#[test]
fn dream_run_consolidates_through_the_client_with_our_tools_over_mcp() {
    let claude =
        claude_or_skip!("dream_run_consolidates_through_the_client_with_our_tools_over_mcp");
    let (home, marker) = home_with_session();
    seed_memory(&home);
    let offline = Offline::new(claude, &home);
    let doc = offline
        .dreamkit(
            &home,
            &consolidation("Consolidated: one feedback memory, the dropped plan removed."),
            "dream-run",
            &["-n", "--unlocked"],
            &[],
        )
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_with(ends_with_runner_line(0))
        .run()
        .json();
    let run = &doc["run"];
    assert_eq!(
        run["summary"],
        "Consolidated: one feedback memory, the dropped plan removed."
    );
    assert_eq!(run["turns"], 8, "{run}");
    assert_eq!(run["tool_calls"], 7, "{run}\n{:?}", tool_results(&offline));
    assert!(run["usage"]["cost_usd"].as_f64().unwrap() > 0.0, "{run}");
    assert!(run["usage"]["input_tokens"].as_u64().unwrap() > 0, "{run}");
    let memory = home.memory_dir();
    assert_eq!(
        std::fs::read_to_string(memory.join("MEMORY.md")).unwrap(),
        "- [Testing](feedback_testing.md) — run the suite before pushing\n"
    );
    let written = std::fs::read_to_string(memory.join("feedback_testing.md")).unwrap();
    assert!(
        written.contains("Run `make test` before pushing."),
        "{written}"
    );
    // Stamped as the client stamps a new memory, from the session reviewed.
    assert!(
        written.contains(&format!("originSessionId: {SESSION}")),
        "{written}"
    );
    assert!(!memory.join("project_old.md").exists());
    assert!(!home.transcripts_dir().join("escape.md").exists());
    assert!(!memory.join("copy.md").exists());
    let results = tool_results(&offline);
    assert_eq!(results.len(), 7, "{results:?}");
    let errors: Vec<bool> = results.iter().map(|(e, _)| *e).collect();
    assert_eq!(
        errors,
        [false, false, false, false, false, true, true],
        "{results:?}"
    );
    assert!(results[6].1.contains("shell: refused"), "{results:?}");
    // The tools were offered under the client's MCP names, and the prompt names them so.
    let body = offline.last_body();
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for tool in [
        "shell",
        "read_file",
        "write_file",
        "edit_file",
        "delete_file",
    ] {
        assert!(
            names.contains(&format!("mcp__dreamkit__{tool}").as_str()),
            "{names:?}"
        );
    }
    assert!(
        system_texts(&body)
            .last()
            .unwrap()
            .contains("`mcp__dreamkit__read_file`"),
        "the prompt names the tools as the client does"
    );
    sealed_off(&home, &marker);
    // The task record kept the run's changes, as for every provider.
    let changes = run["changes"].as_array().unwrap();
    let files: Vec<&str> = changes.iter().filter_map(|c| c["file"].as_str()).collect();
    assert_eq!(files.len(), 3, "{changes:?}");
}

#[test]
fn dream_run_proposes_through_the_client_then_applies() {
    let claude = claude_or_skip!("dream_run_proposes_through_the_client_then_applies");
    let (home, marker) = home_with_session();
    seed_memory(&home);
    let before = crate::support::tree(&home.memory_dir());
    let offline = Offline::new(claude, &home);
    let doc = offline
        .dreamkit(
            &home,
            &consolidation("Proposed."),
            "dream-run",
            &["-n", "--unlocked", "--propose"],
            &[],
        )
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "proposed", "{doc}"))
        .stderr_with(ends_with_runner_line(0))
        .run()
        .json();
    assert_eq!(
        crate::support::tree(&home.memory_dir()),
        before,
        "a proposal changed memory"
    );
    let task = doc["run"]["task_id"].as_str().unwrap().to_string();
    Run::new(&home, "dream-run")
        .args(["apply", "-n", &task])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["applied"], true, "{doc}");
            assert_eq!(doc["task_id"], task.as_str(), "{doc}");
        })
        .stderr_empty()
        .run();
    assert!(home.memory_dir().join("feedback_testing.md").exists());
    assert!(!home.memory_dir().join("project_old.md").exists());
    sealed_off(&home, &marker);
}

#[test]
fn sigterm_mid_run_ends_the_client_and_restores_memory() {
    let claude = claude_or_skip!("sigterm_mid_run_ends_the_client_and_restores_memory");
    let (home, marker) = home_with_session();
    seed_memory(&home);
    let before = crate::support::tree(&home.memory_dir());
    let offline = Offline::new(claude.clone(), &home);
    // A write lands, then the model takes its time.
    let replies = json!([
        mcp_call("write_file", json!({"path": "feedback_testing.md", "content": TESTING})),
        {"delay": 60, "text": "never seen"},
    ]);
    let running = offline
        .dreamkit(&home, &replies, "dream-run", &["-n", "--unlocked"], &[])
        .code(143)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "interrupted", "{doc}"))
        .stderr_any("the interrupted run's lines and the runner's")
        .spawn();
    let written = home.memory_dir().join("feedback_testing.md");
    crate::support::wait::for_true("the first write to land", || written.exists());
    // dream-run itself (inside the runner's namespace): the one whose cwd is the project
    // (its relay, started by the client, runs in the client's private folder).
    let dream_run = crate::support::bin_path("dream-run");
    let pid = process_where(|proc| {
        exe_of(proc).is_some_and(|exe| exe == dream_run)
            && cwd_of(proc).is_some_and(|cwd| cwd == home.project)
    })
    .expect("the running dream-run");
    assert!(client_running(&claude, &home), "the client runs mid-run");
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    running.finish();
    assert_eq!(
        crate::support::tree(&home.memory_dir()),
        before,
        "memory not restored"
    );
    assert!(
        !client_running(&claude, &home),
        "the client outlived the run"
    );
    sealed_off(&home, &marker);
}

/// Whether a client process runs with this home's private working folder as its cwd.
fn client_running(exe: &Path, home: &ClaudeHome) -> bool {
    let work = home.state_home.join("dreamkit/print-mode");
    process_where(|proc| {
        exe_of(proc).is_some_and(|x| x == exe) && cwd_of(proc).is_some_and(|c| c.starts_with(&work))
    })
    .is_some()
}

#[test]
fn dream_run_with_a_client_that_is_not_logged_in_is_auth() {
    let claude = claude_or_skip!("dream_run_with_a_client_that_is_not_logged_in_is_auth");
    let (home, marker) = home_with_session();
    seed_memory(&home);
    let before = crate::support::tree(&home.memory_dir());
    let offline = Offline::new(claude, &home);
    offline
        .dreamkit(
            &home,
            &json!([]),
            "dream-run",
            &["-n", "--unlocked"],
            &["ANTHROPIC_API_KEY"],
        )
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "auth", "{doc}");
            assert!(
                doc["error"]["message"].as_str().unwrap().contains("log in"),
                "{doc}"
            );
        })
        .stderr_any("the failed run's lines and the runner's")
        .run();
    assert_eq!(crate::support::tree(&home.memory_dir()), before);
    sealed_off(&home, &marker);
}

fn recap_via<'a>(home: &ClaudeHome, claude: &Path) -> Run<'a> {
    let transcript = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
    Run::new(home, "recap")
        .args(["-n", "--provider", "claude", "--transcript"])
        .arg(transcript)
        .env("DREAMKIT_CLAUDE_BIN", claude)
}

#[test]
fn an_older_client_or_none_is_environment() {
    let (home, _) = home_with_session();
    let old = stand_in(&home, "2.0.14", "exit 0");
    recap_via(&home, &old)
        .code(3)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "environment", "{doc}");
            let message = doc["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("2.0.14") && message.contains("2.1.332"),
                "{message}"
            );
        })
        .stderr_contains("2.0.14")
        .run();
    recap_via(&home, &home.root.join("no/claude"))
        .code(3)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "environment", "{doc}"))
        .stderr_contains("DREAMKIT_CLAUDE_BIN")
        .run();
    // None on PATH either.
    let transcript = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
    Run::new(&home, "recap")
        .args(["-n", "--provider", "claude", "--transcript"])
        .arg(&transcript)
        .env("PATH", home.root.join("empty"))
        .code(3)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "environment", "{doc}"))
        .stderr_contains("no `claude` on PATH")
        .run();
    // The version is asked once and remembered beside the response-format cache.
    let cache = home.state_home.join("dreamkit/claude-client.json");
    let remembered: Value = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
    assert_eq!(remembered["version"], "2.0.14");
    assert_eq!(
        crate::support::mode(&std::fs::metadata(&cache).unwrap()),
        0o600
    );
}

#[test]
fn the_deadline_ends_the_clients_whole_process_group() {
    let (home, _) = home_with_session();
    let pids = home.root.join("pids");
    // The stand-in starts a grandchild and never answers.
    let body = format!(
        "sleep 300 & echo $! > {pids}; sleep 300",
        pids = pids.display()
    );
    let claude = stand_in(&home, "2.1.332", &body);
    recap_via(&home, &claude)
        .args(["--deadline", "2s"])
        .code(4)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "timeout", "{doc}"))
        .stderr_contains("did not answer within --deadline")
        .run();
    wait_gone(&pids);
    // The private working folder went with the run.
    let work = home.state_home.join("dreamkit/print-mode");
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}

/// The relay killed between two calls: the client starts it again for the next call (as
/// 2.1.332 does), and the run completes with both; were it not started again, the run would
/// have to fail and restore. Either way memory is all-before or all-after.
#[test]
fn a_relay_killed_mid_run_leaves_memory_all_before_or_all_after() {
    let claude = claude_or_skip!("a_relay_killed_mid_run_leaves_memory_all_before_or_all_after");
    let (home, marker) = home_with_session();
    seed_memory(&home);
    let before = crate::support::tree(&home.memory_dir());
    let offline = Offline::new(claude, &home);
    let replies = json!([
        mcp_call("write_file", json!({"path": "feedback_testing.md", "content": TESTING})),
        {"delay": 3, "tool_use": {"name": "mcp__dreamkit__read_file", "input": {"path": "MEMORY.md"}}},
        "done",
    ]);
    let running = offline
        .dreamkit(&home, &replies, "dream-run", &["-n", "--unlocked"], &[])
        .code_any("completed (0) when the client starts the relay again, else failed")
        .stdout_any("checked below")
        .stderr_any("the run's lines and the runner's")
        .spawn();
    let written = home.memory_dir().join("feedback_testing.md");
    crate::support::wait::for_true("the first write to land", || written.exists());
    let dream_run = crate::support::bin_path("dream-run");
    // This test's relay: its socket is under this home's state dir (other tests run theirs
    // at the same time).
    let state = home.state_home.to_string_lossy().into_owned();
    let relay = process_where(|proc| {
        let cmdline = std::fs::read(proc.join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        exe_of(proc).is_some_and(|exe| exe == dream_run)
            && cmdline.contains("tool-relay")
            && cmdline.contains(&state)
    })
    .expect("the relay");
    assert_eq!(unsafe { libc::kill(relay, libc::SIGKILL) }, 0);
    let ran = running.finish();
    let doc = crate::support::run::one_json_line(&ran.stdout);
    assert_eq!(
        ran.code,
        Some(if doc["run"]["status"] == "completed" {
            0
        } else {
            4
        })
    );
    if doc["run"]["status"] == "completed" {
        assert!(written.exists(), "{doc}");
        let results = tool_results(&offline);
        assert_eq!(results.len(), 2, "{results:?}");
        assert!(!results[1].0, "the second call was not served: {results:?}");
    } else {
        assert_eq!(doc["run"]["status"], "failed", "{doc}");
        assert_eq!(
            crate::support::tree(&home.memory_dir()),
            before,
            "memory not restored"
        );
    }
    sealed_off(&home, &marker);
}

#[test]
fn dream_run_enforces_max_tokens_from_the_clients_stream() {
    let claude = claude_or_skip!("dream_run_enforces_max_tokens_from_the_clients_stream");
    let (home, marker) = home_with_session();
    seed_memory(&home);
    let before = crate::support::tree(&home.memory_dir());
    let offline = Offline::new(claude, &home);
    // The first answer already streams more input tokens than the budget: the write it asks
    // for may land, and the run then fails and puts memory back.
    let doc = offline
        .dreamkit(
            &home,
            &consolidation("never reached"),
            "dream-run",
            &["-n", "--unlocked", "--max-tokens", "100"],
            &[],
        )
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["run"]["error"], "max_tokens", "{doc}"))
        .stderr_any("the failed run's lines and the runner's")
        .run()
        .json();
    assert!(
        doc["run"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-tokens 100"),
        "{doc}"
    );
    assert_eq!(
        crate::support::tree(&home.memory_dir()),
        before,
        "memory not restored"
    );
    sealed_off(&home, &marker);
}

/// `--dry-run` and `--engine rules` start no client: they need none.
#[test]
fn dry_runs_and_the_rules_need_no_client() {
    let (home, _) = home_with_session();
    seed_memory(&home);
    let missing = home.root.join("no/claude");
    Run::new(&home, "dream-run")
        .args(["-n", "--unlocked", "--provider", "claude", "--dry-run"])
        .env("DREAMKIT_CLAUDE_BIN", &missing)
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "dry_run", "{doc}"))
        .stderr_empty()
        .run();
    Run::new(&home, "dream-run")
        .args([
            "-n",
            "--unlocked",
            "--provider",
            "claude",
            "--engine",
            "rules",
        ])
        .env("DREAMKIT_CLAUDE_BIN", &missing)
        .code_any("no_changes (1) on a healthy memory")
        .stdout_json(|doc| assert_eq!(doc["run"]["engine"], "rules", "{doc}"))
        .stderr_any("what the rules did")
        .run();
}

/// A client that ends without a result (it crashed, or is not Claude Code): the run fails,
/// exit 4, saying so; nothing is left changed.
#[test]
fn a_client_that_ends_without_a_result_fails_the_run() {
    let (home, _) = home_with_session();
    seed_memory(&home);
    let before = crate::support::tree(&home.memory_dir());
    let client = stand_in(&home, "2.1.332", "cat >/dev/null; echo 'segfault, sorry' >&2; echo '{\"type\":\"system\",\"subtype\":\"init\"}'; exit 139");
    Run::new(&home, "dream-run")
        .args(["-n", "--unlocked", "--provider", "claude"])
        .env("DREAMKIT_CLAUDE_BIN", &client)
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "failed", "{doc}");
            assert_eq!(doc["error"]["kind"], "malformed_response", "{doc}");
            let message = doc["error"]["message"].as_str().unwrap();
            assert!(message.contains("exited 139 without a result"), "{message}");
        })
        .stderr_any("the failed run's line")
        .run();
    assert_eq!(crate::support::tree(&home.memory_dir()), before);
}

/// SIGTERM while a one-shot tool waits on the client: exit 143, and the client's whole
/// process group is gone.
#[test]
fn sigterm_during_a_one_shot_answer_ends_the_clients_group() {
    let (home, _) = home_with_session();
    let pids = home.root.join("pids");
    let body = format!("sleep 300 & echo $! > {}; sleep 300", pids.display());
    let claude = stand_in(&home, "2.1.332", &body);
    let running = recap_via(&home, &claude)
        .code(143)
        .stdout_json(|doc| assert_eq!(doc["status"], "aborted", "{doc}"))
        .stderr_any("the interrupted line")
        .spawn();
    crate::support::wait::for_true("the client to start", || pids.is_file());
    running.signal(libc::SIGTERM);
    running.finish();
    wait_gone(&pids);
}

/// A state dir whose path is longer than a socket's path may be: the relay's socket goes to
/// the temporary dir instead, and the run works as ever.
#[test]
fn a_long_state_dir_path_still_reaches_the_relay() {
    let claude = claude_or_skip!("a_long_state_dir_path_still_reaches_the_relay");
    let (home, marker) = home_with_session();
    seed_memory(&home);
    let long = home.root.join("s".repeat(60)).join("t".repeat(60));
    std::fs::create_dir_all(&long).unwrap();
    let offline = Offline::new(claude, &home);
    offline
        .dreamkit(
            &home,
            &json!([
                mcp_call("read_file", json!({"path": "MEMORY.md"})),
                "Nothing to change."
            ]),
            "dream-run",
            &["-n", "--unlocked"],
            &[],
        )
        .env("XDG_STATE_HOME", &long)
        .code_any("completed (0) or no_changes (1)")
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["tool_calls"], 1, "{doc}");
            assert_eq!(doc["run"]["summary"], "Nothing to change.", "{doc}");
        })
        .stderr_any("the runner's line")
        .run();
    let results = tool_results(&offline);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].0, "{results:?}");
    sealed_off(&home, &marker);
}

/// A client that never stops printing is cut off at the cap and ended, not waited for until
/// the deadline: `malformed_response`, exit 4.
#[test]
fn a_client_that_never_stops_printing_is_cut_off() {
    let (home, _) = home_with_session();
    let claude = stand_in(
        &home,
        "2.1.332",
        "cat >/dev/null; yes '{\"type\":\"assistant\"}'",
    );
    recap_via(&home, &claude)
        .args(["--deadline", "5m"])
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "malformed_response", "{doc}");
            let message = doc["error"]["message"].as_str().unwrap();
            assert!(message.contains("more than 4 MiB"), "{message}");
        })
        .stderr_any("the failure's line")
        .run();
}

/// The empty private folder a run killed outright left behind goes at the next run, once a
/// day old; a recent one, or one that is not empty, stays.
#[test]
fn folders_left_by_killed_runs_are_swept_a_day_later() {
    let (home, _) = home_with_session();
    let work = home.state_home.join("dreamkit/print-mode");
    let old = work.join("run-old");
    let recent = work.join("run-recent");
    let kept = work.join("run-not-empty");
    for dir in [&old, &recent, &kept] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(kept.join("note"), "x").unwrap();
    for dir in [&old, &kept] {
        // A folder's time is set through a read-only handle (set_age opens files to write).
        std::fs::File::open(dir)
            .and_then(|f| f.set_modified(std::time::SystemTime::now() - crate::support::hours(30)))
            .unwrap();
    }
    let claude = stand_in(
        &home,
        "2.1.332",
        "cat >/dev/null; echo '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"Back to it.\",\"usage\":{}}'",
    );
    recap_via(&home, &claude)
        .success()
        .stdout_json(|doc| assert_eq!(doc["text"], "Back to it.", "{doc}"))
        .stderr_empty()
        .run();
    assert!(!old.exists(), "the day-old empty folder stays");
    assert!(recent.exists() && kept.exists());
    // The run's own folder went with it.
    let left: Vec<_> = std::fs::read_dir(&work)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
}
