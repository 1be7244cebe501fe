//! One contract for the seven tools, through the real pipeline: a failing stage never strands
//! the lock; one failure shape; the shared flags where people type them; JSON from the world.

use std::path::Path;
use std::process::Stdio;

use serde_json::{json, Value};

use crate::support::dream::Dream;
use crate::support::fake_api::Reply;
use crate::support::{bin_path, epoch_ms, mtime, session_id, Run};

/// `bin` with this home's environment and the fake model.
fn tool<'a>(d: &Dream, bin: &str) -> Run<'a> {
    Run::ours(d.process(&bin_path(bin)), bin)
}

/// `dream-gate | dream-lock acquire | STAGE | dream-lock release` under sh, with the built
/// binaries on PATH and this home's environment; the caller says what it must print.
fn pipeline<'a>(d: &Dream, stage: &str) -> Run<'a> {
    let line = format!(
        "dream-gate --min-hours 0 --min-sessions 0 --scan-interval 0 | dream-lock acquire | {stage} | dream-lock release"
    );
    Run::command(d.process(Path::new("sh")), "pipeline")
        .args(["-c", &line])
        .stdin_from(Stdio::null())
}

fn lock_state(d: &Dream) -> (Value, i64) {
    let status = tool(d, "dream-lock")
        .arg("status")
        .success()
        .stdout_json(|doc| assert_eq!(doc["held"], false, "{doc}"))
        .stderr_empty()
        .run()
        .json();
    (status, epoch_ms(mtime(&d.home.lock_file())))
}

/// What dream-run prints on stderr for a usage error whose one line is `line`.
fn clap_error(line: &str) -> String {
    crate::support::usage_stderr("dream-run", line)
}

#[test]
fn a_stage_that_fails_before_its_agent_starts_never_strands_the_lock() {
    // The stage's one failure is all that is said on stderr (release rolls back quietly).
    let misplaced = "the argument '--max-turns' cannot be used with the subcommand 'tasks'";
    let cases: &[(&str, &str, &str, String)] = &[
        (
            "no credential",
            "env -u ANTHROPIC_API_KEY dream-run",
            "auth",
            "dream-run: the Anthropic API needs a credential: set ANTHROPIC_API_KEY (or \
             ANTHROPIC_AUTH_TOKEN); for a server or proxy that needs none, set ANTHROPIC_API_KEY \
             to the empty string\n"
                .to_string(),
        ),
        (
            "a bad mode",
            "env DREAMKIT_DREAM_MODE=bogus dream-run",
            "bad_input",
            "dream-run: DREAMKIT_DREAM_MODE must be \"propose\" or \"apply\", not \"bogus\"\n"
                .to_string(),
        ),
        (
            "a usage error",
            "dream-run --bogus",
            "usage",
            clap_error("unexpected argument '--bogus' found"),
        ),
        (
            "a bad --deadline",
            "dream-run --deadline 5x",
            "usage",
            clap_error(
                "invalid value '5x' for '--deadline <DURATION>': unknown unit \"x\" in \"5x\" \
                 (use a number of seconds, or a number with ms, s, m or h)",
            ),
        ),
        (
            "a misplaced flag",
            "dream-run --max-turns 3 tasks",
            "usage",
            clap_error(misplaced),
        ),
    ];
    for (what, stage, kind, stderr) in cases {
        let d = Dream::new();
        let before = epoch_ms(mtime(&d.home.lock_file()));
        pipeline(&d, stage)
            .success()
            .stdout_json(|doc| {
                assert_eq!(doc["lock"]["released"], true, "{what}: {doc}");
                assert_eq!(doc["lock"]["outcome"], "failed", "{what}: {doc}");
                assert_eq!(doc["run"]["status"], "failed", "{what}: {doc}");
                assert_eq!(doc["error"]["kind"], *kind, "{what}: {doc}");
                assert!(doc["error"]["message"].is_string(), "{what}: {doc}");
            })
            .stderr_is(stderr.as_str())
            .run();
        let (status, after) = lock_state(&d);
        assert_eq!(status["held"], false, "{what}: the lock is free");
        assert_eq!(
            after, before,
            "{what}: the last-consolidated time did not move"
        );
        assert!(
            d.api.requests().is_empty(),
            "{what}: nothing asked of the model"
        );
    }
}

#[test]
fn a_run_that_fails_midway_rolls_the_lock_back_and_names_the_model_error() {
    let d = Dream::new();
    let before = epoch_ms(mtime(&d.home.lock_file()));
    let index = d.read("MEMORY.md");
    d.api.push(Reply::anthropic_tools(
        "Starting.",
        &[
            ("read_file", json!({"path": "MEMORY.md"})),
            (
                "write_file",
                json!({"path": "MEMORY.md", "content": "half\n"}),
            ),
        ],
    ));
    for _ in 0..4 {
        d.api.push(
            Reply::error(429, "rate_limit_error", "slow down").with_header("retry-after", "0"),
        );
    }
    pipeline(&d, "dream-run")
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "failed", "{doc}");
            assert_eq!(doc["run"]["error"], "model");
            assert_eq!(doc["error"]["kind"], "rate_limited", "{doc}");
            assert_eq!(doc["lock"]["released"], true);
            assert_eq!(doc["lock"]["outcome"], "failed");
        })
        .stderr_is("dream-run: run failed: rate_limited: slow down\n")
        .run();
    assert_eq!(d.read("MEMORY.md"), index, "restored");
    let (status, after) = lock_state(&d);
    assert_eq!(status["held"], false);
    assert_eq!(after, before, "the time did not move");
}

#[test]
fn release_rolls_back_a_lease_whatever_failed_upstream() {
    let d = Dream::new();
    let before = epoch_ms(mtime(&d.home.lock_file()));
    // A stand-in stage that fails by printing a top-level error and no run section.
    pipeline(
        &d,
        r#"jq -c '. + {"error": {"kind": "environment", "message": "the stand-in broke"}}'"#,
    )
    .success()
    .stdout_json(|doc| {
        assert_eq!(doc["lock"]["released"], true, "{doc}");
        assert_eq!(doc["lock"]["outcome"], "failed");
        assert_eq!(
            doc["lock"]["warning"],
            "an earlier stage failed: rolled back as failed"
        );
    })
    .stderr_is("dream-lock: an earlier stage failed: rolled back as failed\n")
    .run();
    let (status, after) = lock_state(&d);
    assert_eq!(status["held"], false);
    assert_eq!(after, before);
}

#[test]
fn the_shared_flags_go_before_or_after_a_subcommand_in_every_tool() {
    let d = Dream::new();
    let runs: &[&[&str]] = &[
        &["dream-run", "-q", "tasks"],
        &["dream-run", "tasks", "-q"],
        &["dream-run", "--compact", "pending"],
        &["dream-run", "pending", "--pretty"],
        &["dream-lock", "-q", "status"],
        &["dream-lock", "status", "-v"],
        &["feedback", "-q", "list"],
        &["feedback", "list", "--compact"],
        &["suggest", "-n", "check", "run the failing test again"],
        &["suggest", "check", "-n", "run the failing test again"],
    ];
    for args in runs {
        tool(&d, args[0])
            .args(&args[1..])
            .success()
            .stdout_with(|text| {
                assert!(text.trim_start().starts_with('{'), "{args:?}: {text}");
                serde_json::from_str::<Value>(text)
                    .unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"));
            })
            .stderr_empty()
            .run();
    }
    // --pretty indents, --compact keeps one line.
    tool(&d, "dream-run")
        .args(["pending", "--pretty"])
        .success()
        .stdout_with(|text| assert!(text.contains("\n  \""), "{text}"))
        .stderr_empty()
        .run();
    // A tool's own flag before a subcommand it does not belong to is a usage error, not
    // ignored.
    let misplaced = "the argument '--max-turns' cannot be used with the subcommand 'tasks'";
    tool(&d, "dream-run")
        .args(["--max-turns", "3", "tasks"])
        .code(2)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "usage");
            assert!(
                doc["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("'--max-turns' cannot be used with the subcommand 'tasks'"),
                "{doc}"
            );
        })
        .stderr_is(clap_error(misplaced))
        .run();
}

#[test]
fn a_lone_surrogate_escape_reads_as_a_replacement_character() {
    let d = Dream::new();
    // JavaScript's JSON.stringify writes half an emoji as a lone surrogate escape.
    let payload = format!(
        r#"{{"hook_event_name":"Stop","session_id":"{}","cwd":"{}","last_assistant_message":"Pushed the fix \ud83d"}}"#,
        session_id(1),
        d.home.project.display()
    );
    tool(&d, "turn-status")
        .stdin(payload)
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["status_category"], "completed", "{doc}");
            assert!(
                doc["status_detail"].as_str().unwrap().contains('\u{fffd}'),
                "{doc}"
            );
        })
        .stderr_empty()
        .run();
    // A transcript record holding one is kept, not dropped: recap reads its text.
    let transcript = d
        .home
        .transcripts_dir()
        .join(format!("{}.jsonl", session_id(7)));
    let mut lines = String::new();
    for n in 0..4 {
        lines.push_str(&format!(
            r#"{{"type":"user","uuid":"u{n}","sessionId":"{sid}","timestamp":"2026-12-01T10:0{n}:00.000Z","message":{{"role":"user","content":"turn {n}: deploy the \ud83d service"}}}}"#,
            sid = session_id(7)
        ));
        lines.push('\n');
        lines.push_str(&format!(
            r#"{{"type":"assistant","uuid":"a{n}","sessionId":"{sid}","timestamp":"2026-12-01T10:0{n}:05.000Z","message":{{"id":"m{n}","role":"assistant","content":[{{"type":"text","text":"Working on it."}}]}}}}"#,
            sid = session_id(7)
        ));
        lines.push('\n');
    }
    std::fs::write(&transcript, lines).unwrap();
    d.api.push(Reply::anthropic_text(
        "You were deploying the service; next, check it.",
    ));
    tool(&d, "recap")
        .arg("--transcript")
        .arg(&transcript)
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["status"], "ok", "{doc}");
            assert_eq!(
                doc["text"],
                "You were deploying the service; next, check it."
            );
        })
        .stderr_empty()
        .run();
    let sent = d.api.requests()[0].body.to_string();
    assert!(sent.contains("deploy the \u{fffd} service"), "{sent}");
}
