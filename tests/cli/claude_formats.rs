//! What dreamkit writes for Claude Code to read, in the shapes Claude Code 2.1.332 accepts:
//! feedback drafts (the client's own schema, checked against drafts the real client listed or
//! skipped), the records appended to transcripts, and SessionStart hook answers.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::dream::Dream;
use crate::support::fake_api::Reply;
use crate::support::{bin_path, session_id, ClaudeHome, LiveProcess, Run};

/// `bin` with the Dream world's environment and fake model.
fn tool<'a>(d: &Dream, bin: &str) -> Run<'a> {
    Run::ours(d.process(&bin_path(bin)), bin)
}

/// `dream-run ARGS` with the envelope on stdin, which must succeed and say `stderr`; its
/// document.
fn dream_run(d: &Dream, envelope: &str, args: &[&str], stderr: &str) -> Value {
    tool(d, "dream-run")
        .args(args)
        .stdin(envelope)
        .success()
        .stdout_json(|doc| assert!(doc["run"].is_object(), "{doc}"))
        .stderr_is(stderr)
        .run()
        .json()
}

/// What a run that wrote a file no index links says (the file is new, so it is an orphan;
/// written without frontmatter, it is one more front_matter beside the world's two).
const LEFT_AN_ORPHAN: &str =
    "dream-run: the run left more problems than it found: orphan_file 0 -> 1, \
                              front_matter 2 -> 3 (dream-run check lists them)\n";

/// The line `feedback queue` says for a draft titled `title`.
fn queued_line(title: &str, err: &str) {
    let id = err
        .strip_prefix(&format!(
            "feedback: draft queued: {title} (review with `feedback show "
        ))
        .and_then(|rest| rest.strip_suffix("`)\n"))
        .unwrap_or_else(|| panic!("not the queued line: {err:?}"));
    assert_eq!(id.len(), 36, "{err}");
}

/// Claude Code 2.1.332's reader of feedback drafts, written out from its bundle (the zod
/// schema `Rl` and the listing rules of `wGe`; scripts/claude-code/FINDINGS.md 4d): `Ok` when
/// the client would list the draft, else why it skips it, silently.
fn client_lists(path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    if bytes.len() > 32_768 {
        return Err("over 32,768 bytes".into());
    }
    let d: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    let string = |field: &str| -> Result<&str, String> {
        d.get(field)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{field} is not a string"))
    };
    let one_of = |field: &str, allowed: &[&str]| -> Result<(), String> {
        let v = string(field)?;
        allowed
            .contains(&v)
            .then_some(())
            .ok_or_else(|| format!("{field} {v:?} is not one of {allowed:?}"))
    };
    let id = string("draft_id")?;
    let uuid_shape = id.len() == 36
        && id.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    if !uuid_shape {
        return Err(format!("draft_id {id:?} is not a uuid"));
    }
    let created = string("created_at")?;
    // Date.parse: an ISO 8601 date and time.
    let date_like = created.len() >= 10
        && created.as_bytes()[4] == b'-'
        && created.as_bytes()[7] == b'-'
        && created[..4].bytes().all(|b| b.is_ascii_digit());
    if !date_like {
        return Err(format!("created_at {created:?} is not a date"));
    }
    let session = string("source_session_id")?;
    let session_ok = (1..=128).contains(&session.len())
        && session
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !session_ok {
        return Err(format!(
            "source_session_id {session:?} has other characters"
        ));
    }
    for field in ["cwd", "model", "cli_version", "os", "details"] {
        string(field)?;
    }
    let ids = d
        .get("request_ids")
        .and_then(Value::as_array)
        .ok_or("request_ids is not an array")?;
    if !ids.iter().all(Value::is_string) {
        return Err("request_ids holds a non-string".into());
    }
    one_of("type", &["bug", "idea", "missing_capability"])?;
    if string("title")?.is_empty() {
        return Err("title is empty".into());
    }
    if let Some(area) = d.get("area") {
        area.as_str().ok_or("area is not a string")?;
    }
    one_of(
        "trigger",
        &[
            "tool_error",
            "user_frustration",
            "missing_capability",
            "model_judgment",
            "exit_nudge",
        ],
    )?;
    match d.get("transcript_ref") {
        Some(Value::Null) => {}
        Some(Value::Object(r)) => {
            r.get("session_file")
                .and_then(Value::as_str)
                .ok_or("transcript_ref.session_file is not a string")?;
            match r.get("message_range") {
                Some(Value::Null) => {}
                Some(Value::Array(pair))
                    if pair.len() == 2 && pair.iter().all(Value::is_number) => {}
                other => return Err(format!("transcript_ref.message_range is {other:?}")),
            }
        }
        other => return Err(format!("transcript_ref is {other:?}")),
    }
    one_of("status", &["queued", "submitted", "discarded", "expired"])?;
    if string("status")? != "queued" {
        return Err("not queued: not listed".into());
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name != format!("{id}.json") {
        return Err(format!("file name {name} is not {id}.json"));
    }
    Ok(())
}

#[test]
fn the_checker_agrees_with_the_real_client_on_every_fixture_draft() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code-stub/feedback-drafts");
    let mut seen = 0;
    for (folder, listed) in [("accepted", true), ("rejected", false)] {
        for entry in std::fs::read_dir(root.join(folder)).unwrap() {
            let path = entry.unwrap().path();
            let verdict = client_lists(&path);
            assert_eq!(verdict.is_ok(), listed, "{}: {verdict:?}", path.display());
            seen += 1;
        }
    }
    assert_eq!(seen, 17, "6 accepted and 11 rejected by the real client");
}

/// A project whose newest transcript was written by Claude Code 2.1.332 with a model.
fn home_with_a_session() -> (ClaudeHome, String) {
    let home = ClaudeHome::new();
    let id = session_id(3);
    let path = home.add_session(&id, std::time::Duration::from_secs(60));
    std::fs::write(
        &path,
        format!(
            "{}\n{}\n",
            json!({"type": "user", "uuid": "u1", "sessionId": id, "cwd": home.project, "version": "2.1.332",
                   "userType": "external", "entrypoint": "cli", "gitBranch": "main",
                   "message": {"role": "user", "content": "the gate crashes"}}),
            json!({"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": id, "cwd": home.project,
                   "version": "2.1.332", "userType": "external", "entrypoint": "cli", "gitBranch": "main",
                   "message": {"id": "msg1", "role": "assistant", "model": "claude-opus-5-5",
                               "content": [{"type": "text", "text": "Looking."}]}}),
        ),
    )
    .unwrap();
    (home, id)
}

fn queued_draft(home: &ClaudeHome, args: &[&str], stdin: &str) -> (Value, std::path::PathBuf) {
    let title = if args.is_empty() {
        serde_json::from_str::<Value>(stdin).unwrap()["title"]
            .as_str()
            .unwrap()
            .to_string()
    } else {
        args[args.iter().position(|a| *a == "--title").unwrap() + 1].to_string()
    };
    let doc = Run::new(home, "feedback")
        .arg("queue")
        .args(args)
        .stdin(stdin)
        .success()
        .stdout_json(|doc| assert!(doc["draft_id"].is_string(), "{doc}"))
        .stderr_with(|err| queued_line(&title, err))
        .run()
        .json();
    let path = std::path::PathBuf::from(doc["path"].as_str().unwrap());
    let draft: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    (draft, path)
}

#[test]
fn every_draft_dreamkit_queues_is_one_claude_code_lists() {
    let (home, id) = home_with_a_session();
    // Flags only, no session named: the newest transcript's.
    let (draft, path) = queued_draft(
        &home,
        &[
            "--type",
            "bug",
            "--title",
            "The gate crashes",
            "--details",
            "It crashes on an empty dir.",
        ],
        "",
    );
    client_lists(&path).unwrap_or_else(|e| panic!("{e}: {draft}"));
    assert_eq!(draft["source_session_id"], id.as_str());
    assert_eq!(draft["cwd"], home.project.to_str().unwrap());
    assert_eq!(draft["cli_version"], "2.1.332");
    assert_eq!(draft["model"], "claude-opus-5-5");
    assert!(draft["os"].as_str().is_some_and(|os| !os.is_empty()));
    assert_eq!(draft["trigger"], "model_judgment", "the default trigger");
    assert_eq!(draft["request_ids"], json!([]));
    assert!(draft.get("area").is_none(), "absent, never null: {draft}");
    assert_eq!(
        draft["transcript_ref"]["session_file"],
        home.transcripts_dir()
            .join(format!("{id}.jsonl"))
            .to_str()
            .unwrap()
    );
    assert_eq!(draft["transcript_ref"]["message_range"], Value::Null);
    assert_eq!(draft["transcript_ref"]["project_dir_key"], home.slug());

    // Every field the client knows, on stdin: kept (request ids: the last five).
    let fields = json!({
        "type": "idea", "title": "Remember deploy windows", "details": "Asked twice.",
        "source_session_id": id, "area": "memory", "trigger": "user_frustration",
        "request_ids": ["r1", "r2", "r3", "r4", "r5", "r6", "r7"],
        "failure_mode": "context_and_memory", "task_category": "plan", "effort": "high",
        "thinking_type": "adaptive", "thinking_budget": 4096, "message_count": 12,
        "assistant_turn_count": 6, "subagent_count": 0,
    });
    let (draft, path) = queued_draft(&home, &[], &fields.to_string());
    client_lists(&path).unwrap_or_else(|e| panic!("{e}: {draft}"));
    assert_eq!(draft["request_ids"], json!(["r3", "r4", "r5", "r6", "r7"]));
    for field in [
        "area",
        "trigger",
        "failure_mode",
        "task_category",
        "effort",
        "thinking_type",
        "thinking_budget",
        "message_count",
        "assistant_turn_count",
        "subagent_count",
    ] {
        assert_eq!(draft[field], fields[field], "{field}");
    }
    // A value the client's enums do not know is refused here rather than dropped there.
    let vibes = Run::new(&home, "feedback")
        .arg("queue")
        .stdin(
            json!({"type": "bug", "title": "t", "details": "d", "failure_mode": "vibes"})
                .to_string(),
        )
        .code(2)
        .stdout_json(|doc| assert_eq!(doc["error"]["reason"], "invalid_draft"))
        .stderr_with(|err| {
            assert!(
                err.starts_with("feedback: failure_mode \"vibes\" is not one of "),
                "{err}"
            );
        })
        .run();
    assert_eq!(
        vibes.stderr,
        format!(
            "feedback: {}\n",
            vibes.json()["error"]["message"].as_str().unwrap()
        )
    );

    // From a hook payload, in a project with no transcript at all: empty strings, not nulls.
    let bare = ClaudeHome::new();
    let payload = json!({"hook_event_name": "Stop", "session_id": "s-1", "cwd": bare.project,
                         "transcript_path": bare.root.join("gone.jsonl")});
    let (draft, path) = queued_draft(
        &bare,
        &["--type", "bug", "--title", "t", "--details", "d"],
        &payload.to_string(),
    );
    client_lists(&path).unwrap_or_else(|e| panic!("{e}: {draft}"));
    assert_eq!(draft["model"], "");
    assert_eq!(draft["cli_version"], "");
}

#[test]
fn feedback_list_reads_drafts_the_client_wrote() {
    let home = ClaudeHome::new();
    let drafts = home.config.join("feedback/drafts");
    std::fs::create_dir_all(&drafts).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code-stub/feedback-drafts/accepted");
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(root).unwrap() {
        let path = entry.unwrap().path();
        let mut draft: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        // Fresh, so `list` does not expire them.
        draft["created_at"] = json!(dreamkit::cli::time::rfc3339(std::time::SystemTime::now()));
        std::fs::write(drafts.join(path.file_name().unwrap()), draft.to_string()).unwrap();
        ids.push(draft["draft_id"].as_str().unwrap().to_string());
    }
    let doc = Run::new(&home, "feedback")
        .arg("list")
        .success()
        .stdout_json(|doc| assert!(doc["drafts"].is_array(), "{doc}"))
        .stderr_empty()
        .run()
        .json();
    let listed: Vec<&str> = doc["drafts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["draft_id"].as_str())
        .collect();
    for id in &ids {
        assert!(listed.contains(&id.as_str()), "{id} not listed: {doc}");
    }
}

/// The fields Claude Code puts on every record, as the transcript's last record has them.
fn assert_client_fields(record: &Value, last: &Value) {
    assert_eq!(record["parentUuid"], last["uuid"], "{record}");
    assert_eq!(record["isSidechain"], false);
    for field in [
        "sessionId",
        "cwd",
        "userType",
        "entrypoint",
        "version",
        "gitBranch",
    ] {
        assert_eq!(record[field], last[field], "{field}: {record}");
    }
    assert!(record["uuid"].as_str().is_some_and(|u| u.len() == 36));
    assert!(record["timestamp"].is_string());
    assert_eq!(record["isMeta"], false);
}

#[test]
fn appended_records_carry_the_fields_the_client_writes_on_every_record() {
    // memory_saved, from a consolidation.
    let d = Dream::new();
    let live = d
        .home
        .transcripts_dir()
        .join(format!("{}.jsonl", session_id(9)));
    let last = json!({"type": "assistant", "uuid": "a-9", "parentUuid": "u-9", "sessionId": session_id(9),
                      "cwd": "/work/p", "userType": "external", "entrypoint": "cli", "version": "2.1.332",
                      "gitBranch": "main", "message": {"role": "assistant", "content": "ok"}});
    std::fs::write(
        &live,
        format!(
            "{}\n{last}\n{}\n",
            json!({"type": "user", "uuid": "u-9", "sessionId": session_id(9), "message": {"role": "user", "content": "hi"}}),
            // Off the chain: no uuid, so neither the parent nor the fields come from it.
            json!({"type": "last-prompt", "sessionId": "another", "leafUuid": "a-9"}),
        ),
    )
    .unwrap();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api
        .push(Reply::anthropic_tools(
            "Noting.",
            &[(
                "write_file",
                json!({"path": "later.md", "content": "later\n"}),
            )],
        ))
        .push(Reply::anthropic_text("Done."));
    dream_run(
        &d,
        &envelope,
        &["--notify-transcript", live.to_str().unwrap()],
        // later.md is linked from no index.
        LEFT_AN_ORPHAN,
    );
    let text = std::fs::read_to_string(&live).unwrap();
    let saved: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(saved["subtype"], "memory_saved");
    assert_eq!(saved["verb"], "Improved");
    assert_client_fields(&saved, &last);

    // away_summary, from recap --auto.
    let home = ClaudeHome::new();
    let transcript = home
        .transcripts_dir()
        .join(format!("{}.jsonl", session_id(4)));
    std::fs::create_dir_all(home.transcripts_dir()).unwrap();
    let mut lines = String::new();
    let mut last = Value::Null;
    for n in 0..4 {
        for (kind, text) in [
            ("user", format!("step {n}")),
            ("assistant", "done".to_string()),
        ] {
            let record = json!({"type": kind, "uuid": format!("{kind}-{n}"), "sessionId": session_id(4),
                "cwd": "/work/q", "userType": "external", "entrypoint": "sdk-cli", "version": "2.1.332",
                "gitBranch": "HEAD", "timestamp": "2026-12-01T10:00:00.000Z",
                "message": {"id": format!("m{n}"), "role": kind, "content": text}});
            lines.push_str(&record.to_string());
            lines.push('\n');
            last = record;
        }
    }
    std::fs::write(&transcript, lines).unwrap();
    let api = crate::support::fake_api::FakeApi::start();
    api.push(Reply::anthropic_text(
        "You were stepping through; next, step 4.",
    ));
    Run::new(&home, "recap")
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-formats")
        .args([
            "--auto",
            "--away-ms",
            "600000",
            "--cache-age-ms",
            "0",
            "--transcript",
        ])
        .arg(&transcript)
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["status"], "ok");
            assert!(doc["record_uuid"].is_string(), "{doc}");
        })
        .stderr_empty()
        .run();
    let text = std::fs::read_to_string(&transcript).unwrap();
    let away: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(away["subtype"], "away_summary");
    assert_eq!(away["content"], "You were stepping through; next, step 4.");
    assert_client_fields(&away, &last);
}

#[test]
fn session_start_hooks_get_the_clients_json_or_nothing_and_always_exit_0() {
    let d = Dream::new();
    for args in [&["pending", "--hook"][..], &["show", "--hook"][..]] {
        // Nothing to say, nothing printed.
        tool(&d, "dream-run")
            .args(args)
            .success()
            .stdout_empty()
            .stderr_empty()
            .run();
    }
    // A run that changed memory: announced once.
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    crate::support::dream::script_full_consolidation(&d);
    dream_run(&d, &envelope, &[], "");
    drop(holder);
    let doc = tool(&d, "dream-run")
        .args(["pending", "--hook"])
        .success()
        .stdout_json(|doc| {
            assert_eq!(
                doc["hookSpecificOutput"]["hookEventName"], "SessionStart",
                "{doc}"
            );
        })
        .stderr_empty()
        .run()
        .json();
    assert_eq!(doc["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let context = doc["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        context.contains("MEMORY.md") && context.contains("topics/deploy.md"),
        "{context}"
    );
    assert_eq!(doc.as_object().unwrap().len(), 1, "{doc}");
    // Announced once.
    tool(&d, "dream-run")
        .args(["pending", "--hook"])
        .success()
        .stdout_empty()
        .stderr_empty()
        .run();

    // A proposal waiting for review.
    d.touch_sessions();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api
        .push(Reply::anthropic_tools(
            "Proposing.",
            &[(
                "write_file",
                json!({"path": "idea.md", "content": "an idea\n"}),
            )],
        ))
        .push(Reply::anthropic_text("Proposed."));
    let id = dream_run(&d, &envelope, &["--propose"], LEFT_AN_ORPHAN)["run"]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let context = tool(&d, "dream-run")
        .args(["show", "--hook"])
        .success()
        .stdout_json(|doc| {
            assert_eq!(
                doc["hookSpecificOutput"]["hookEventName"], "SessionStart",
                "{doc}"
            );
        })
        .stderr_empty()
        .run()
        .json()["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        context.contains(&id) && context.contains("dream-run apply"),
        "{context}"
    );

    // Even a failure answers exit 0 (a hook error would show at every session start), with
    // its one line on stderr and nothing on stdout.
    let tasks = d.home.state_dir().join("tasks");
    std::fs::remove_dir_all(&tasks).unwrap();
    std::fs::write(&tasks, "not a folder").unwrap();
    tool(&d, "dream-run")
        .args(["show", "--hook"])
        .success()
        .stdout_empty()
        .stderr_with(|err| {
            assert!(!err.is_empty());
            assert_eq!(
                err,
                format!(
                    "dream-run: cannot list the task records in {}: Not a directory (os error 20)\n",
                    d.home.state_dir().display()
                )
            );
        })
        .run();
}
