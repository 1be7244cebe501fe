//! One contract for the seven tools, through the real pipeline: a failing stage never strands
//! the lock; one failure shape; the shared flags where people type them; JSON from the world.

use std::path::Path;

use serde_json::{json, Value};

use crate::dream::Dream;
use crate::support::fake_api::Reply;
use crate::support::{epoch_ms, mtime, session_id, stderr_text, stdout_json};

/// `dream-gate | dream-lock acquire | STAGE | dream-lock release` under sh, with the built
/// binaries on PATH and this home's environment.
fn pipeline(d: &Dream, stage: &str) -> std::process::Output {
    let line = format!(
        "dream-gate --min-hours 0 --min-sessions 0 --scan-interval 0 | dream-lock acquire | {stage} | dream-lock release"
    );
    d.process(Path::new("sh"))
        .args(["-c", &line])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn lock_state(d: &Dream) -> (Value, i64) {
    let out = d.cmd("dream-lock").arg("status").output().unwrap();
    let status = stdout_json(&out);
    (status, epoch_ms(mtime(&d.home.lock_file())))
}

#[test]
fn a_stage_that_fails_before_its_agent_starts_never_strands_the_lock() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "no credential",
            "env -u ANTHROPIC_API_KEY dream-run",
            "auth",
        ),
        (
            "a bad mode",
            "env DREAMKIT_DREAM_MODE=bogus dream-run",
            "bad_input",
        ),
        ("a usage error", "dream-run --bogus", "usage"),
        ("a bad --deadline", "dream-run --deadline 5x", "usage"),
        ("a misplaced flag", "dream-run --max-turns 3 tasks", "usage"),
    ];
    for (what, stage, kind) in cases {
        let d = Dream::new();
        let before = epoch_ms(mtime(&d.home.lock_file()));
        let out = pipeline(&d, stage);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr_text(&out));
        let doc = stdout_json(&out);
        assert_eq!(doc["lock"]["released"], true, "{what}: {doc}");
        assert_eq!(doc["lock"]["outcome"], "failed", "{what}: {doc}");
        assert_eq!(doc["run"]["status"], "failed", "{what}: {doc}");
        assert_eq!(doc["error"]["kind"], *kind, "{what}: {doc}");
        assert!(doc["error"]["message"].is_string(), "{what}: {doc}");
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
    let out = pipeline(&d, "dream-run");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["run"]["status"], "failed", "{doc}");
    assert_eq!(doc["run"]["error"], "model");
    assert_eq!(doc["error"]["kind"], "rate_limited", "{doc}");
    assert_eq!(doc["lock"]["released"], true);
    assert_eq!(doc["lock"]["outcome"], "failed");
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
    let out = pipeline(
        &d,
        r#"jq -c '. + {"error": {"kind": "environment", "message": "the stand-in broke"}}'"#,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["lock"]["released"], true, "{doc}");
    assert_eq!(doc["lock"]["outcome"], "failed");
    assert_eq!(
        doc["lock"]["warning"],
        "an earlier stage failed: rolled back as failed"
    );
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
        let out = d.cmd(args[0]).args(&args[1..]).output().unwrap();
        let code = out.status.code();
        assert!(
            code == Some(0) || code == Some(1),
            "{args:?}: exit {code:?}: {}",
            stderr_text(&out)
        );
        let text = String::from_utf8(out.stdout.clone()).unwrap();
        assert!(text.trim_start().starts_with('{'), "{args:?}: {text}");
        serde_json::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"));
    }
    // --pretty indents, --compact keeps one line.
    let pretty = d
        .cmd("dream-run")
        .args(["pending", "--pretty"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&pretty.stdout).contains("\n  \""));
    // A tool's own flag before a subcommand it does not belong to is a usage error, not
    // ignored.
    let out = d
        .cmd("dream-run")
        .args(["--max-turns", "3", "tasks"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let doc = stdout_json(&out);
    assert_eq!(doc["error"]["kind"], "usage");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'--max-turns' cannot be used with the subcommand 'tasks'"),
        "{doc}"
    );
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
    let out = d.cmd("turn-status").write_stdin(payload).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["status_category"], "completed", "{doc}");
    assert!(
        doc["status_detail"].as_str().unwrap().contains('\u{fffd}'),
        "{doc}"
    );
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
    let out = d
        .cmd("recap")
        .arg("--transcript")
        .arg(&transcript)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let sent = d.api.requests()[0].body.to_string();
    assert!(sent.contains("deploy the \u{fffd} service"), "{sent}");
}
