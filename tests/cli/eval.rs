//! `dream-run eval`: a suite of scenarios, each through the real pipeline in a temporary home;
//! the unmet expectations, the exit codes, malformed scenarios, the built-in suite.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::{ClaudeHome, Run};

const TESTING: &str = "---\nname: testing\ndescription: How the test suite is run\nmetadata:\n  type: project\n---\nRun the tests with `make check`.\n";
const INDEX: &str = "# Memory\n\n- [Testing](testing.md) — how the test suite is run\n";

/// A suite folder of its own.
struct Suite {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Suite {
    fn new() -> Suite {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("suite");
        std::fs::create_dir_all(&dir).unwrap();
        Suite { _tmp: tmp, dir }
    }

    /// A scenario: `memory` files, one session in the client's shape (cwd /project), `expect`.
    fn scenario(&self, name: &str, memory: &[(&str, &str)], expect: Value) -> PathBuf {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(dir.join("memory")).unwrap();
        for (file, text) in memory {
            std::fs::write(dir.join("memory").join(file), text).unwrap();
        }
        std::fs::write(dir.join("expect.json"), expect.to_string()).unwrap();
        let id = crate::support::session_id(7);
        let common = json!({"userType": "external", "entrypoint": "cli", "cwd": "/project",
            "sessionId": id, "version": "2.1.332", "gitBranch": "main"});
        let mut user = json!({"parentUuid": null, "isSidechain": false, "type": "user",
            "message": {"role": "user", "content": "run the tests please"},
            "uuid": "u1", "timestamp": "2026-11-20T10:00:00.000Z"});
        let mut assistant = json!({"parentUuid": "u1", "isSidechain": false, "type": "assistant",
            "message": {"id": "m1", "type": "message", "role": "assistant", "model": "claude-opus-5-5",
                "content": [{"type": "text", "text": "All tests pass."}], "stop_reason": "end_turn"},
            "uuid": "a1", "timestamp": "2026-11-20T10:00:05.000Z"});
        for record in [&mut user, &mut assistant] {
            for (k, v) in common.as_object().unwrap() {
                record[k] = v.clone();
            }
        }
        std::fs::create_dir_all(dir.join("sessions")).unwrap();
        std::fs::write(
            dir.join("sessions").join(format!("{id}.jsonl")),
            format!("{user}\n{assistant}\n"),
        )
        .unwrap();
        dir
    }
}

fn eval<'a>(home: &ClaudeHome, suite: &Path, extra: &[&str]) -> Run<'a> {
    Run::new(home, "dream-run")
        .args(["eval".as_ref(), suite.as_os_str()])
        .args(extra)
}

fn scenario<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no scenario {name} in {doc}"))
}

#[test]
fn eval_a_passing_suite_exits_0_and_skips_what_needs_a_model() {
    let home = ClaudeHome::new();
    let suite = Suite::new();
    suite.scenario(
        "dangling",
        &[
            ("MEMORY.md", &format!("{INDEX}- [Gone](gone.md) — a note that is gone\n")),
            ("testing.md", TESTING),
        ],
        json!({"changes": "some", "max_problems": {"dangling_link": 0},
            "must_contain": ["make check", {"pattern": "\\(testing\\.md\\)", "file": "MEMORY.md", "reason": "kept"}],
            "must_not_contain": [{"pattern": "\\]\\(gone\\.md\\)", "file": "MEMORY.md"}]}),
    );
    suite.scenario(
        "judgement",
        &[("MEMORY.md", INDEX), ("testing.md", TESTING)],
        json!({"needs_model": true, "must_contain": ["never there"]}),
    );
    eval(&home, &suite.dir, &["--engine", "rules"])
        .success()
        .stderr_empty()
        .stdout_json(|doc| {
            assert_eq!(doc["engine"], "rules");
            let s = scenario(doc, "dangling");
            assert_eq!(s["outcome"], "pass", "{doc}");
            assert_eq!(s["pass"], true);
            assert_eq!(s["unmet"], json!([]));
            assert_eq!(s["check"]["before"], json!({"dangling_link": 1}));
            assert_eq!(s["check"]["after"], json!({}));
            assert_eq!(s["run"]["status"], "completed");
            assert_eq!(s["run"]["exit"], 0);
            assert_eq!(s["run"]["changed"], json!(["MEMORY.md"]));
            assert_eq!(s["turns"], 0);
            let j = scenario(doc, "judgement");
            assert_eq!(j["outcome"], "skipped");
            assert_eq!(j["pass"], Value::Null);
            assert_eq!(
                doc["totals"],
                json!({"scenarios": 2, "passed": 1, "failed": 0, "errors": 0, "skipped": 1})
            );
        })
        .run();
}

#[test]
fn eval_names_each_unmet_expectation_and_exits_1() {
    let home = ClaudeHome::new();
    let suite = Suite::new();
    let missing = "---\nname: layout\ndescription: Where the entry point is\nmetadata:\n  type: project\n---\nThe entry point is `src/gone/main.rs`.\n";
    suite.scenario(
        "changed",
        &[
            (
                "MEMORY.md",
                &format!(
                    "{INDEX}- [Layout](layout.md) — where the entry point is\n- [Gone](gone.md) — a note that is gone\n"
                ),
            ),
            ("testing.md", TESTING),
            ("layout.md", missing),
        ],
        json!({"changes": "none",
            "must_contain": ["absent words"],
            "must_not_contain": [{"pattern": "make check", "file": "testing.md", "reason": "the old command"}],
            "max_problems": {"missing_path": 0, "dangling_link": 0}}),
    );
    suite.scenario(
        "unchanged",
        &[("MEMORY.md", INDEX), ("testing.md", TESTING)],
        json!({"changes": "some", "must_contain": [{"pattern": "make", "file": "nowhere.md"}]}),
    );
    eval(&home, &suite.dir, &["--engine", "rules"])
        .code(1)
        .stderr_is("dream-run: 2 of 2 scenarios did not pass: changed, unchanged\n")
        .stdout_json(|doc| {
            let s = scenario(doc, "changed");
            assert_eq!(s["outcome"], "fail", "{doc}");
            assert_eq!(s["pass"], false);
            assert_eq!(
                s["unmet"],
                json!([
                    {"kind": "must_contain", "pattern": "absent words", "expected": "a match", "found": "no match"},
                    {"kind": "must_not_contain", "pattern": "make check", "file": "testing.md",
                        "reason": "the old command", "expected": "no match",
                        "found": "testing.md:7: make check"},
                    {"kind": "max_problems", "problem": "missing_path", "expected": 0, "found": 1},
                    {"kind": "changes", "expected": "none", "found": "some: MEMORY.md"},
                ])
            );
            let u = scenario(doc, "unchanged");
            assert_eq!(
                u["unmet"],
                json!([
                    {"kind": "must_contain", "pattern": "make", "file": "nowhere.md",
                        "expected": "a match", "found": "no file nowhere.md"},
                    {"kind": "changes", "expected": "some", "found": "none"},
                ])
            );
            assert_eq!(u["run"]["status"], "no_changes");
            assert_eq!(
                doc["totals"],
                json!({"scenarios": 2, "passed": 0, "failed": 2, "errors": 0, "skipped": 0})
            );
        })
        .run();
}

/// Bad JSON, a missing part, a bad regex: exit 2 naming the scenario, and nothing runs (the
/// good scenario, sorted first, would ask the model).
#[test]
fn eval_refuses_a_malformed_scenario_before_running_any() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    type Spoil<'a> = &'a dyn Fn(&Path);
    let cases: [(&str, Spoil, &str); 4] = [
        (
            "bad JSON",
            &|dir| std::fs::write(dir.join("expect.json"), "{\"changes\": ").unwrap(),
            "expect.json is not valid",
        ),
        (
            "no expect.json",
            &|dir| std::fs::remove_file(dir.join("expect.json")).unwrap(),
            "expect.json is missing",
        ),
        (
            "no memory/",
            &|dir| std::fs::remove_dir_all(dir.join("memory")).unwrap(),
            "memory/ is missing",
        ),
        (
            "a bad regex",
            &|dir| {
                std::fs::write(
                    dir.join("expect.json"),
                    r#"{"must_contain": ["(unclosed"]}"#,
                )
                .unwrap();
            },
            "must_contain: bad regex \"(unclosed\"",
        ),
    ];
    for (what, spoil, message) in cases {
        let suite = Suite::new();
        suite.scenario("a-good", &[("MEMORY.md", INDEX)], json!({}));
        let bad = suite.scenario("b-bad", &[("MEMORY.md", INDEX)], json!({}));
        spoil(&bad);
        eval(&home, &suite.dir, &[])
            .env("ANTHROPIC_BASE_URL", api.url())
            .env("ANTHROPIC_API_KEY", "sk-test-eval")
            .code(2)
            .stderr_with(move |err| {
                assert!(err.contains("scenario b-bad"), "{what}: {err}");
                assert!(err.contains(message), "{what}: {err}");
            })
            .stdout_json(move |doc| {
                assert_eq!(
                    doc["error"]["reason"], "malformed_scenario",
                    "{what}: {doc}"
                );
            })
            .run();
    }
    assert_eq!(api.requests().len(), 0, "a scenario ran");
}

#[test]
fn eval_with_the_model_passes_and_counts_tokens_and_exits_4_when_the_model_fails() {
    let home = ClaudeHome::new();
    let suite = Suite::new();
    suite.scenario(
        "quiet",
        &[("MEMORY.md", INDEX), ("testing.md", TESTING)],
        json!({"changes": "none", "needs_model": true, "must_contain": ["make check"]}),
    );
    let api = FakeApi::start();
    api.push(Reply::anthropic_text("Nothing new to keep."));
    eval(&home, &suite.dir, &[])
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-test-eval")
        .success()
        .stderr_empty()
        .stdout_json(|doc| {
            let s = scenario(doc, "quiet");
            assert_eq!(s["outcome"], "pass", "{doc}");
            assert_eq!(s["run"]["status"], "completed");
            assert_eq!(s["turns"], 1);
            assert!(s["tokens"]["input"].as_u64().unwrap() > 0, "{doc}");
        })
        .run();
    assert_eq!(api.requests().len(), 1);

    let failing = FakeApi::start();
    failing.push(Reply::error(
        401,
        "authentication_error",
        "invalid x-api-key",
    ));
    eval(&home, &suite.dir, &[])
        .env("ANTHROPIC_BASE_URL", failing.url())
        .env("ANTHROPIC_API_KEY", "sk-test-eval")
        .code(4)
        .stderr_is("dream-run: 1 of 1 scenarios did not pass: quiet\n")
        .stdout_json(|doc| {
            let s = scenario(doc, "quiet");
            assert_eq!(s["outcome"], "error", "{doc}");
            assert_eq!(s["run"]["exit"], 4);
            assert!(
                s["error"].as_str().unwrap().starts_with("the model failed"),
                "{doc}"
            );
        })
        .run();
}

/// A request one scenario made too large (`invalid_request`) fails that scenario only: the
/// next still runs; the exit is 4 (a model failed). An auth failure stops the rest (above).
#[test]
fn eval_goes_on_after_a_scenario_the_model_refused() {
    let home = ClaudeHome::new();
    let suite = Suite::new();
    for name in ["a-too-big", "b-quiet"] {
        suite.scenario(
            name,
            &[("MEMORY.md", INDEX), ("testing.md", TESTING)],
            json!({"changes": "none", "needs_model": true}),
        );
    }
    let api = FakeApi::start();
    api.push(Reply::error(
        400,
        "invalid_request_error",
        "prompt is too long: 9000 tokens > 8192 maximum",
    ))
    .push(Reply::anthropic_text("Nothing new to keep."));
    eval(&home, &suite.dir, &[])
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-test-eval")
        .code(4)
        .stderr_is("dream-run: 1 of 2 scenarios did not pass: a-too-big\n")
        .stdout_json(|doc| {
            let big = scenario(doc, "a-too-big");
            assert_eq!(big["outcome"], "error", "{doc}");
            assert!(
                big["error"]
                    .as_str()
                    .unwrap()
                    .starts_with("the model failed: invalid_request"),
                "{doc}"
            );
            assert_eq!(scenario(doc, "b-quiet")["outcome"], "pass", "{doc}");
        })
        .run();
    assert_eq!(api.requests().len(), 2);
}

/// Flags after `--` reach every scenario's dream-run: a limit the model then hits fails the
/// scenario as an unmet `run` expectation.
#[test]
fn eval_passes_the_flags_after_the_separator_to_each_run() {
    let home = ClaudeHome::new();
    let suite = Suite::new();
    suite.scenario(
        "limited",
        &[("MEMORY.md", INDEX), ("testing.md", TESTING)],
        json!({"changes": "none", "needs_model": true}),
    );
    let api = FakeApi::start();
    api.push(Reply::anthropic_tools(
        "Looking.",
        &[("read_file", json!({"path": "MEMORY.md"}))],
    ));
    eval(&home, &suite.dir, &["--", "--max-turns", "1"])
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-test-eval")
        .code(1)
        .stderr_is("dream-run: 1 of 1 scenarios did not pass: limited\n")
        .stdout_json(|doc| {
            let s = scenario(doc, "limited");
            assert_eq!(s["outcome"], "fail", "{doc}");
            assert_eq!(s["run"]["error"], "max_turns", "{doc}");
            assert_eq!(s["turns"], 1, "{doc}");
        })
        .run();
    assert_eq!(api.requests().len(), 1, "--max-turns 1 allows one request");
}

/// The built-in suite: every scenario that needs no model passes with the rules engine, the
/// rest are skipped, and no request reaches any model server.
#[test]
fn eval_builtin_suite_passes_with_the_rules_engine_without_network() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let evals = Path::new(env!("CARGO_MANIFEST_DIR")).join("evals");
    eval(&home, &evals, &["--engine", "rules"])
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-test-eval")
        .env("OPENAI_BASE_URL", format!("{}/v1", api.url()))
        .env("OPENAI_API_KEY", "sk-test-eval")
        .success()
        .stderr_empty()
        .stdout_json(|doc| {
            let scenarios = doc["scenarios"].as_array().unwrap();
            assert!(scenarios.len() >= 12, "{doc}");
            for s in scenarios {
                let want = match s["needs_model"].as_bool().unwrap() {
                    true => "skipped",
                    false => "pass",
                };
                assert_eq!(s["outcome"], want, "{}: {s}", s["name"]);
            }
            assert_eq!(doc["totals"]["failed"], 0);
            assert_eq!(doc["totals"]["errors"], 0);
        })
        .run();
    assert_eq!(api.requests().len(), 0, "the rules engine asked a model");
}

#[test]
fn eval_only_runs_the_named_scenario_and_refuses_an_unknown_name() {
    let home = ClaudeHome::new();
    let suite = Suite::new();
    suite.scenario(
        "one",
        &[("MEMORY.md", INDEX), ("testing.md", TESTING)],
        json!({}),
    );
    suite.scenario(
        "two",
        &[("MEMORY.md", INDEX), ("testing.md", TESTING)],
        json!({}),
    );
    eval(&home, &suite.dir, &["--engine", "rules", "--only", "two"])
        .success()
        .stderr_empty()
        .stdout_json(|doc| {
            assert_eq!(doc["scenarios"].as_array().unwrap().len(), 1);
            assert_eq!(doc["scenarios"][0]["name"], "two");
        })
        .run();
    eval(&home, &suite.dir, &["--engine", "rules", "--only", "three"])
        .code(2)
        .stderr_contains("--only three: no such scenario")
        .stdout_any("the usage error's document")
        .run();
}
