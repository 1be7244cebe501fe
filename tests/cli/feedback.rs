//! `feedback` against a real local HTTP server and real files.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::transcript::timestamp;
use crate::support::*;

fn drafts_dir(home: &ClaudeHome) -> PathBuf {
    home.config.join("feedback/drafts")
}

/// `feedback ARGS` in `home`, reading `stdin`.
fn fb<'a>(home: &ClaudeHome, args: &[&str], stdin: &str) -> Run<'a> {
    Run::new(home, "feedback").args(args).stdin(stdin)
}

/// What `feedback queue` says on stderr in notify mode (the default) about draft `id`.
fn queued_line(title: &str, id: &str) -> String {
    format!("feedback: draft queued: {title} (review with `feedback show {id}`)\n")
}

/// The run, exit `code`, prints one document whose message is stderr's one line after
/// `feedback: {lead}`; returns the document.
#[track_caller]
fn refused(run: Run, code: i32, lead: &'static str) -> Value {
    let message = Rc::new(RefCell::new(String::new()));
    let said = Rc::clone(&message);
    run.code(code)
        .stdout_json(move |doc| {
            *said.borrow_mut() = doc["error"]["message"]
                .as_str()
                .unwrap_or_else(|| panic!("no message: {doc}"))
                .to_string();
        })
        .stderr_with(move |err| {
            assert_eq!(err, format!("feedback: {lead}{}\n", message.borrow()));
            assert_eq!(err.lines().count(), 1, "one line: {err:?}");
        })
        .run()
        .json()
}

/// What `send` says before the message of a failure that keeps the draft.
const NOT_SENT: &str = "not sent, the draft is kept: ";

/// `feedback queue` of `fields` in notify mode (the default): exit 0, and stderr's one line
/// names the draft of its document, which is returned.
fn queued(home: &ClaudeHome, fields: &Value) -> Value {
    let title = fields["title"].as_str().unwrap().to_string();
    let id = Rc::new(RefCell::new(String::new()));
    let seen = Rc::clone(&id);
    fb(home, &["queue"], &fields.to_string())
        .success()
        .stdout_json(move |out| {
            *seen.borrow_mut() = out["draft_id"].as_str().unwrap().to_string();
        })
        .stderr_with(move |err| assert_eq!(err, queued_line(&title, &id.borrow())))
        .run()
        .json()
}

fn queue(home: &ClaudeHome, fields: Value) -> String {
    queued(home, &fields)["draft_id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn bug(session: &str) -> Value {
    json!({"type": "bug", "title": "gate crashes on a FIFO", "details": "Run `dream-gate` with a FIFO in the transcripts dir.", "source_session_id": session, "area": "dream-gate", "trigger": "tool_error"})
}

fn draft_files(home: &ClaudeHome) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(drafts_dir(home))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A draft file as Claude Code would leave it, `age_days` old, with a field we do not know.
fn claude_code_draft(home: &ClaudeHome, id: &str, age_days: u64) -> PathBuf {
    let at = std::time::SystemTime::now() - Duration::from_secs(age_days * 86_400 + 60);
    let created = timestamp(epoch_ms(at));
    let draft = json!({
        "draft_id": id, "created_at": created, "source_session_id": "cc-session",
        "cwd": "/home/dev/proj", "model": "claude-sonnet-4-5", "cli_version": "2.1.332", "os": "darwin",
        "type": "idea", "title": format!("idea {id}"), "details": "d", "area": "memory",
        "trigger": "model_judgment",
        "transcript_ref": {"session_file": "x.jsonl", "message_range": [3, 9], "project_dir_key": "-home-dev-proj"},
        "status": "queued", "schema_version": 2
    });
    let path = drafts_dir(home).join(format!("{id}.json"));
    std::fs::create_dir_all(drafts_dir(home)).unwrap();
    std::fs::write(&path, serde_json::to_string_pretty(&draft).unwrap()).unwrap();
    path
}

#[test]
fn queue_writes_a_private_pretty_draft() {
    let home = ClaudeHome::new();
    // notify is the default: stderr names the draft.
    let out = queued(&home, &bug("s1"));
    assert_eq!(out["evicted"], json!([]));
    let id = out["draft_id"].as_str().unwrap();
    let path = drafts_dir(&home).join(format!("{id}.json"));
    assert_eq!(out["path"], path.display().to_string());
    assert_eq!(mode(&std::fs::metadata(&path).unwrap()), 0o600);
    assert_eq!(mode(&std::fs::metadata(drafts_dir(&home)).unwrap()), 0o700);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("{\n  \"draft_id\""), "{text}");
    let draft: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(draft["status"], "queued");
    assert_eq!(draft["type"], "bug");
    assert_eq!(draft["source_session_id"], "s1");
    assert!(draft["created_at"].as_str().unwrap().ends_with('Z'));
    // Flags win over stdin; quiet mode says nothing.
    home.write(
        "home/.claude/settings.json",
        r#"{"feedbackDrafts": "quiet"}"#,
    );
    let out = fb(
        &home,
        &["queue", "--title", "from a flag", "--type", "idea"],
        &bug("s1").to_string(),
    )
    .success()
    .stdout_json(|doc| assert!(doc["draft_id"].is_string(), "{doc}"))
    .stderr_empty()
    .run()
    .json();
    fb(&home, &["show", out["draft_id"].as_str().unwrap()], "")
        .success()
        .stdout_json(|shown| {
            assert_eq!(
                (shown["title"].as_str(), shown["type"].as_str()),
                (Some("from a flag"), Some("idea"))
            );
        })
        .stderr_empty()
        .run();
}

/// A hook that adds the draft's fields to its payload: the draft takes them, and the payload's
/// session, cwd and transcript fill the rest (flags still win).
#[test]
fn queue_merges_draft_fields_given_with_a_hook_payload() {
    let home = ClaudeHome::new();
    home.add_session("s-hook", hours(1));
    let transcript = home.transcripts_dir().join("s-hook.jsonl");
    let payload = json!({
        "hook_event_name": "Stop",
        "session_id": "s-hook",
        "cwd": home.project,
        "transcript_path": transcript,
        "last_assistant_message": "Done.",
        "type": "bug",
        "title": "gate crashes on a FIFO",
        "details": "Steps: mkfifo.",
        "trigger": "tool_error",
    });
    let id = Rc::new(RefCell::new(String::new()));
    let seen = Rc::clone(&id);
    fb(
        &home,
        &["queue", "--area", "dream-gate"],
        &payload.to_string(),
    )
    .success()
    .stdout_json(move |out| *seen.borrow_mut() = out["draft_id"].as_str().unwrap().into())
    .stderr_any("the notify line, checked by queue_writes_a_private_pretty_draft")
    .run();
    let id = id.borrow().clone();
    fb(&home, &["show", &id], "")
        .success()
        .stdout_json(|draft| {
            assert_eq!(draft["type"], "bug");
            assert_eq!(draft["title"], "gate crashes on a FIFO");
            assert_eq!(draft["details"], "Steps: mkfifo.");
            assert_eq!(draft["trigger"], "tool_error");
            assert_eq!(draft["area"], "dream-gate");
            assert_eq!(draft["source_session_id"], "s-hook");
            assert_eq!(draft["cwd"], home.project.display().to_string());
            assert_eq!(
                draft["transcript_ref"]["session_file"],
                transcript.display().to_string()
            );
        })
        .stderr_empty()
        .run();
    // A draft field of the wrong type beside a payload is bad input, and writes nothing.
    let before = draft_files(&home);
    let bad = json!({"hook_event_name": "Stop", "session_id": "s-hook", "type": 5, "title": "t", "details": "d"});
    refused(fb(&home, &["queue"], &bad.to_string()), 2, "");
    assert_eq!(draft_files(&home), before);
}

#[test]
fn invalid_or_oversized_drafts_write_nothing() {
    let home = ClaudeHome::new();
    let cases = [
        (json!({"title": "t", "details": "d"}), "invalid_draft"),
        (
            json!({"type": "bug", "title": "x".repeat(201), "details": "d"}),
            "invalid_draft",
        ),
        (
            json!({"type": "bug", "title": "t", "details": "d", "area": "a".repeat(65)}),
            "invalid_draft",
        ),
        (
            json!({"type": "complaint", "title": "t", "details": "d"}),
            "invalid_draft",
        ),
        // 10,240 four-byte characters: within the field limit, over 32,768 bytes.
        (
            json!({"type": "bug", "title": "t", "details": "🦀".repeat(10_240)}),
            "too_large",
        ),
    ];
    for (fields, reason) in cases {
        // One line on stderr: the document's message.
        let out = refused(fb(&home, &["queue"], &fields.to_string()), 2, "");
        assert_eq!(out["error"]["kind"], "bad_input");
        assert_eq!(out["error"]["reason"], reason, "{out}");
    }
    // Unknown fields are typos: exit 2.
    let out = refused(
        fb(
            &home,
            &["queue"],
            r#"{"type":"bug","title":"t","details":"d","mood":"angry"}"#,
        ),
        2,
        "",
    );
    assert_eq!(out["error"]["kind"], "bad_input");
    assert!(draft_files(&home).is_empty(), "{:?}", draft_files(&home));
}

#[test]
fn at_most_ten_drafts_are_kept_oldest_evicted() {
    let home = ClaudeHome::new();
    let old: Vec<String> = (0..10).map(|i| format!("old-{i:02}")).collect();
    for (i, id) in old.iter().enumerate() {
        claude_code_draft(&home, id, 20 - i as u64);
    }
    let out = queued(&home, &bug("s1"));
    assert_eq!(out["evicted"], json!(["old-00"]));
    let out = queued(&home, &bug("s1"));
    assert_eq!(out["evicted"], json!(["old-01"]));
    assert_eq!(draft_files(&home).len(), 10);
}

#[test]
fn at_most_ten_queues_per_source_session() {
    let home = ClaudeHome::new();
    for _ in 0..10 {
        queue(&home, bug("busy-session"));
    }
    fb(&home, &["queue"], &bug("busy-session").to_string())
        .code(1)
        .stdout_json(|out| assert_eq!(out["reason"], "session_limit"))
        .stderr_is("feedback: not queued: session busy-session has queued 10 drafts already\n")
        .run();
    queue(&home, bug("another-session"));
}

#[test]
fn feedback_drafts_off_disables_queue() {
    let home = ClaudeHome::new();
    home.write(
        "proj/.claude/settings.local.json",
        r#"{"feedbackDrafts": "off"}"#,
    );
    fb(&home, &["queue"], &bug("s1").to_string())
        .code(1)
        .stdout_json(|out| assert_eq!(out["reason"].as_str(), Some("disabled")))
        .stderr_empty()
        .run();
    assert!(draft_files(&home).is_empty());
}

#[test]
fn list_expires_old_drafts_and_survives_corrupt_files() {
    let home = ClaudeHome::new();
    let stale = claude_code_draft(&home, "stale", 31);
    claude_code_draft(&home, "recent", 29);
    let fresh = queue(&home, bug("s1"));
    std::fs::write(drafts_dir(&home).join("broken.json"), "{ not json").unwrap();
    let out = fb(&home, &["list"], "")
        .success()
        .stdout_json(|doc| assert!(doc["drafts"].is_array(), "{doc}"))
        .stderr_empty()
        .run()
        .json();
    assert_eq!(out["expired"], json!(["stale"]));
    assert!(!stale.exists());
    let ids: Vec<&str> = out["drafts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["draft_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [fresh.as_str(), "recent", "broken"],
        "newest first, broken last"
    );
    let broken = &out["drafts"][2];
    assert!(broken["error"].as_str().unwrap().len() > 3);
    assert!(broken["path"].as_str().unwrap().ends_with("broken.json"));
}

#[test]
fn claude_code_drafts_read_back_whole() {
    let home = ClaudeHome::new();
    claude_code_draft(&home, "cc-draft-1", 1);
    fb(&home, &["show", "cc-draft-1"], "")
        .success()
        .stdout_json(|out| {
            assert_eq!(out["cli_version"], "2.1.332");
            assert_eq!(out["transcript_ref"]["message_range"], json!([3, 9]));
            assert_eq!(out["schema_version"], 2, "unknown fields are kept");
        })
        .stderr_empty()
        .run();
}

#[test]
fn show_and_discard() {
    let home = ClaudeHome::new();
    let id = queue(&home, bug("s1"));
    fb(&home, &["discard", &id], "")
        .success()
        .stdout_json(|out| assert_eq!(*out, json!({"discarded": true, "draft_id": id})))
        .stderr_empty()
        .run();
    assert!(draft_files(&home).is_empty());
    let no_draft = format!("feedback: no draft {id} (`feedback list` shows the drafts)\n");
    fb(&home, &["discard", &id], "")
        .code(1)
        .stdout_json(|out| assert_eq!(out["reason"].as_str(), Some("not_found")))
        .stderr_is(no_draft.clone())
        .run();
    fb(&home, &["show", &id], "")
        .code(1)
        .stdout_json(|out| {
            assert_eq!(
                *out,
                json!({"found": false, "draft_id": id, "reason": "not_found"})
            );
        })
        .stderr_is(no_draft)
        .run();
    for bad in ["../../etc/passwd", "a/b", "x.json"] {
        let out = refused(fb(&home, &["show", bad], ""), 2, "");
        assert_eq!(out["error"]["reason"].as_str(), Some("invalid_id"), "{bad}");
        assert_eq!(
            out["error"]["message"],
            format!("{bad:?} is not a draft id"),
            "{bad}"
        );
    }
}

/// `feedback send ID --yes` to the fake server's `/feedback`.
fn sender<'a>(home: &ClaudeHome, api: &FakeApi, id: &str, extra: &[&str]) -> Run<'a> {
    let endpoint = format!("{}/feedback", api.url());
    let mut args = vec!["send", id, "--endpoint", &endpoint, "--yes"];
    args.extend_from_slice(extra);
    Run::new(home, "feedback")
        .env("DREAMKIT_RETRY_BASE_MS", "1")
        .args(&args)
}

#[test]
fn send_posts_the_payload_and_deletes_the_draft() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let id = queue(&home, bug("s1"));
    api.push(Reply::json(200, json!({"feedback_id": "fb_123"})));
    sender(&home, &api, &id, &[])
        .success()
        .stdout_json(|out| {
            assert_eq!(out["sent"], true);
            assert_eq!(out["feedback_id"], "fb_123");
        })
        .stderr_empty()
        .run();
    assert!(draft_files(&home).is_empty());
    let r = &api.requests()[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/feedback"));
    let keys: Vec<&String> = r.body.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "description",
            "type",
            "title",
            "details",
            "area",
            "trigger",
            "draft_id",
            "version",
            "platform"
        ]
    );
    assert_eq!(r.body["draft_id"], id.as_str());
    assert_eq!(r.body["trigger"], "tool_error");
}

#[test]
fn every_send_failure_keeps_the_draft_and_exits_4() {
    // (name, replies, extra flags, error kind, HTTP status)
    type Case = (
        &'static str,
        Vec<Reply>,
        &'static [&'static str],
        &'static str,
        Option<u16>,
    );
    let cases: Vec<Case> = vec![
        (
            "401",
            vec![Reply::error(401, "authentication_error", "no")],
            &[],
            "auth",
            Some(401),
        ),
        (
            "413",
            vec![Reply::error(413, "request_too_large", "big")],
            &[],
            "too_large",
            Some(413),
        ),
        (
            "500",
            (0..3)
                .map(|_| Reply::error(500, "api_error", "boom"))
                .collect(),
            &[],
            "server",
            Some(500),
        ),
        (
            "timeout",
            vec![Reply::Hang(Duration::from_secs(3))],
            &["--timeout", "300ms", "--retries", "0"],
            "timeout",
            None,
        ),
    ];
    for (name, replies, extra, kind, status) in cases {
        let home = ClaudeHome::new();
        let api = FakeApi::start();
        let id = queue(&home, bug("s1"));
        let before = std::fs::read(drafts_dir(&home).join(format!("{id}.json"))).unwrap();
        for r in replies {
            api.push(r);
        }
        let out = refused(sender(&home, &api, &id, extra), 4, NOT_SENT);
        assert_eq!(out["sent"], false);
        assert_eq!(out["queued"], true);
        assert_eq!(out["error"]["kind"], kind, "{name}: {out}");
        assert_eq!(out["error"]["status"], json!(status), "{name}");
        assert_eq!(
            std::fs::read(drafts_dir(&home).join(format!("{id}.json"))).unwrap(),
            before,
            "{name}"
        );
    }

    let home = ClaudeHome::new();
    let id = queue(&home, bug("s1"));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/f", closed.local_addr().unwrap());
    drop(closed);
    let doc = refused(
        fb(
            &home,
            &["send", &id, "--endpoint", &url, "--yes", "--retries", "0"],
            "",
        ),
        4,
        NOT_SENT,
    );
    assert_eq!(doc["error"]["kind"].as_str(), Some("network"));
    assert_eq!(draft_files(&home).len(), 1);
}

#[test]
fn absurd_flags_do_not_panic() {
    let home = ClaudeHome::new();
    let id = queue(&home, bug("s1"));
    let doc = refused(
        fb(
            &home,
            &["send", &id, "--endpoint", "http://127.0.0.1:9/x", "--yes"],
            "",
        )
        .args(["--retries", "4294967295", "--timeout", "0"]),
        4,
        NOT_SENT,
    );
    assert_eq!(doc["error"]["kind"], "timeout");
    assert_eq!(draft_files(&home).len(), 1);
}

#[test]
fn no_consent_without_a_terminal_sends_nothing() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let id = queue(&home, bug("s1"));
    let endpoint = format!("{}/feedback", api.url());
    let out = refused(
        fb(&home, &["send", &id, "--endpoint", &endpoint], ""),
        2,
        NOT_SENT,
    );
    assert_eq!(out["error"]["reason"], "consent_required");
    assert!(api.requests().is_empty());
    assert_eq!(draft_files(&home).len(), 1);
}

fn transcript_line(session: &str, text: &str) -> String {
    json!({"type": "user", "sessionId": session, "uuid": "u", "message": {"role": "user", "content": text}}).to_string()
}

fn with_transcript(home: &ClaudeHome, session: &str, transcript: &Path) -> String {
    let mut fields = bug(session);
    fields["transcript_ref"] = json!({"session_file": transcript});
    queue(home, fields)
}

#[test]
fn the_transcript_is_attached_only_when_it_is_the_sessions_own() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let path = home.root.join("t.jsonl");
    std::fs::write(
        &path,
        format!(
            "{}\n{}\n",
            transcript_line("s1", "first"),
            transcript_line("s1", "second")
        ),
    )
    .unwrap();
    let id = with_transcript(&home, "s1", &path);
    api.push(Reply::json(200, json!({"id": 7})));
    sender(&home, &api, &id, &["--with-transcript"])
        .success()
        .stdout_json(|out| {
            assert_eq!(out["feedback_id"], 7);
            assert_eq!(out["transcript"]["attached"], true);
        })
        .stderr_empty()
        .run();
    let sent = api.requests()[0].body["transcript"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        sent,
        format!(
            "{}\n{}\n",
            transcript_line("s1", "first"),
            transcript_line("s1", "second")
        )
    );

    // Another session's transcript: sent without it.
    let id = with_transcript(&home, "s2", &path);
    api.push(Reply::json(200, json!({"id": 8})));
    sender(&home, &api, &id, &["--with-transcript"])
        .success()
        .stdout_json(|out| assert_eq!(out["transcript"]["withheld"], "session_mismatch"))
        .stderr_is("feedback: transcript withheld: session_mismatch\n")
        .run();
    assert!(api.requests()[1].body.get("transcript").is_none());

    // A third-party transcript: withheld.
    std::fs::write(
        &path,
        format!(
            "{}\n{}\n",
            transcript_line("s1", "a"),
            json!({"sessionId": "s1", "message": {"id": "msg_bdrk_01abc"}})
        ),
    )
    .unwrap();
    let id = with_transcript(&home, "s1", &path);
    api.push(Reply::json(200, json!({"id": 9})));
    sender(&home, &api, &id, &["--with-transcript"])
        .success()
        .stdout_json(|out| assert_eq!(out["transcript"]["withheld"], "third_party"))
        .stderr_is("feedback: transcript withheld: third_party\n")
        .run();
    assert!(api.requests()[2].body.get("transcript").is_none());
}

#[test]
fn a_large_transcript_is_trimmed_newest_first() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let path = home.root.join("big.jsonl");
    // Quote-heavy records: nearly every byte doubles inside a JSON string (ratio ~1.995), so
    // the 4 MiB read exceed the 8 MiB - 64 KiB budget (ratio 1.984). 6 MiB in all, so the
    // first 2 MiB are never read.
    let quotes = "\"".repeat(20_000);
    let mut text = String::new();
    let mut n = 0;
    while text.len() < 6 * 1024 * 1024 {
        text.push_str(&transcript_line("s1", &format!("{n} {quotes}")));
        text.push('\n');
        n += 1;
    }
    std::fs::write(&path, &text).unwrap();
    let id = with_transcript(&home, "s1", &path);
    api.push(Reply::json(200, json!({"feedback_id": "big"})));
    let out = sender(&home, &api, &id, &["--with-transcript"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["sent"], true, "{doc}"))
        .stderr_empty()
        .run()
        .json();
    let body = &api.requests()[0].body;
    assert!(body.to_string().len() <= 8 * 1024 * 1024 - 64 * 1024);
    let sent = body["transcript"].as_str().unwrap();
    let mut lines = sent.lines();
    let header = lines.next().unwrap();
    let kept: Vec<&str> = lines.collect();
    // M: the complete records in the last 4 MiB of the file.
    let window = &text.as_bytes()[text.len() - 4 * 1024 * 1024..];
    let m = window
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count()
        - 1;
    assert_eq!(
        header,
        format!("transcript_truncated: kept {} of {m} messages", kept.len())
    );
    assert!(kept.len() < m && !kept.is_empty());
    let file_lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        kept,
        file_lines[file_lines.len() - kept.len()..],
        "not the newest records"
    );
    assert_eq!(out["transcript"]["kept"], kept.len());
    assert_eq!(out["transcript"]["total"], m);
    assert_eq!(out["transcript"]["truncated"], true);
}

#[test]
fn github_issues_never_carry_the_transcript() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let path = home.root.join("t.jsonl");
    std::fs::write(&path, transcript_line("s1", "secret context") + "\n").unwrap();
    let id = with_transcript(&home, "s1", &path);
    api.push(Reply::json(
        201,
        json!({"number": 42, "html_url": "https://github.com/octo/tools/issues/42"}),
    ));
    let out = fb(
        &home,
        &[
            "send",
            &id,
            "--to",
            "github:octo/tools",
            "--with-transcript",
            "--yes",
        ],
        "",
    )
    .env("GITHUB_API_URL", api.url())
    .env("GITHUB_TOKEN", "ghp_test_SECRET")
    .success()
    .stdout_json(|doc| assert_eq!(doc["sent"], true, "{doc}"))
    .stdout_with(|out| assert!(!out.contains("SECRET")))
    .stderr_with(|err| assert!(!err.contains("SECRET")))
    .stderr_is("feedback: the transcript is never attached to a GitHub issue\n")
    .run();
    let doc = out.json();
    assert_eq!(doc["feedback_id"], 42);
    assert_eq!(doc["url"], "https://github.com/octo/tools/issues/42");
    assert_eq!(doc["transcript"]["withheld"], "github");
    let r = &api.requests()[0];
    assert_eq!(r.path, "/repos/octo/tools/issues");
    assert_eq!(r.header("authorization"), Some("Bearer ghp_test_SECRET"));
    assert_eq!(r.header("accept"), Some("application/vnd.github+json"));
    assert_eq!(r.body["title"], "gate crashes on a FIFO");
    assert!(!r.body.to_string().contains("secret context"));
    assert!(!out.stdout.contains("SECRET"));
    assert!(draft_files(&home).is_empty());

    let id = queue(&home, bug("s1"));
    // No GITHUB_TOKEN: exit 4.
    let doc = refused(
        fb(
            &home,
            &["send", &id, "--to", "github:octo/tools", "--yes"],
            "",
        ),
        4,
        NOT_SENT,
    );
    assert_eq!(
        (doc["error"]["kind"].as_str(), &doc["sent"], &doc["queued"]),
        (Some("auth"), &json!(false), &json!(true))
    );
    assert_eq!(draft_files(&home).len(), 1, "the draft is kept");
    let doc = refused(
        fb(&home, &["send", &id, "--to", "gitlab:x/y", "--yes"], "").env("GITHUB_TOKEN", "t"),
        2,
        "",
    );
    assert_eq!(doc["error"]["kind"], "usage");
}

/// On a terminal (a real pty from util-linux `script`), send shows the payload and asks.
#[test]
fn on_a_terminal_send_shows_the_payload_and_asks() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let id = queue(&home, bug("s1"));
    let command = format!(
        "{} send {id} --endpoint {}/feedback",
        bin_path("feedback").display(),
        api.url()
    );
    // The screen is what `script` relays from the pty: stdout. The pty echoes the answer
    // when it arrives, which may be before or in the middle of the prompt (the answer is
    // written at once): the echo is taken out before the screen is read. No line the tool
    // prints before the prompt ends with the one-letter answer, so the first such line is
    // the echo.
    let run = |answer: &str, code: i32, screen: &dyn Fn(&str)| {
        let mut script = home.process("script");
        script.args(["-qec", &command, "/dev/null"]);
        Run::command(script, "script feedback send")
            .stdin(answer)
            .code(code)
            .stdout_with(|out| screen(&out.replace('\r', "").replacen(answer, "", 1)))
            .stderr_empty()
            .run();
    };
    run("n\n", 1, &|screen| {
        assert!(
            screen.contains(&format!("This will be sent to {}/feedback", api.url())),
            "{screen}"
        );
        assert!(
            screen.contains("\"title\": \"gate crashes on a FIFO\""),
            "{screen}"
        );
        assert!(
            screen.contains("Send it? [y/N]") && screen.contains("declined"),
            "{screen}"
        );
    });
    assert!(api.requests().is_empty());
    assert_eq!(draft_files(&home).len(), 1);

    api.push(Reply::json(200, json!({"feedback_id": "fb_tty"})));
    run("y\n", 0, &|screen| {
        assert!(screen.contains("fb_tty"), "{screen}");
    });
    assert_eq!(api.requests().len(), 1);
    assert!(draft_files(&home).is_empty());
}
