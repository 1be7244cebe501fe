//! dreamkit against the real Claude Code 2.1.332, offline (see support/claude_code.rs): the
//! plugin's hooks and commands as the client runs them, a consolidation reaching the next
//! session, appended records surviving `--resume`, marketplace install. `make test-claude`
//! runs these; without `DREAMKIT_TEST_CLAUDE` each prints `SKIP <test>: <why>` and returns.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::claude_code::{
    client, git_repo, git_worktree, hook_responses, message_texts, on_path, plugin_dir, records,
    stream_result, system_path, Offline, CLIENT_VERSION,
};
use crate::support::client_memory::{
    assert_stamped_like_the_client, first_session_writes, EDIT, EDITED_FILE, EDITING_SESSION,
    WRITING_SESSION,
};
use crate::support::fake_api::{FakeApi, Reply};
use crate::support::{slug_of, ClaudeHome, Run};

const S1: &str = "11111111-1111-4111-8111-111111111111";
const KEY: &str = "sk-ant-claude-code-test";

macro_rules! claude_or_skip {
    ($name:expr) => {
        match client($name) {
            Some(path) => path,
            None => return,
        }
    };
}

/// A dreamkit tool with the home's environment and the fake model (outside the client).
fn tool<'a>(home: &ClaudeHome, api: &FakeApi, bin: &str) -> Run<'a> {
    Run::new(home, bin)
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", KEY)
        .env("DREAMKIT_RETRY_BASE_MS", "1")
        .timeout(Duration::from_secs(60))
}

/// What dream-run says after a consolidation whose MEMORY.md is the project's first: its
/// index links deploy.md, which no run writes (a memory dir that already had that index has
/// as many problems after as before, and it says nothing).
const NEW_DANGLING_LINK: &str = "dream-run: the run left more problems than it found: \
    dangling_link 0 -> 1 (dream-run check lists them)\n";

/// A consolidation by dream-run (scripted fake model) that writes MEMORY.md with `marker`,
/// run for the project at `cwd`, saying `says` on stderr; its task id.
fn consolidate(
    home: &ClaudeHome,
    cwd: &Path,
    marker: &str,
    notify: Option<&Path>,
    says: &str,
) -> String {
    let api = FakeApi::start();
    // Read first: a write over a file this run has not read is refused.
    api.push(Reply::anthropic_tools(
        "Orienting.",
        &[("read_file", json!({"path": "MEMORY.md"}))],
    ))
    .push(Reply::anthropic_tools(
        "Consolidating.",
        &[(
            "write_file",
            json!({"path": "MEMORY.md", "content": format!("# Memory\n- [Deploy](deploy.md): {marker}\n")}),
        )],
    ))
    .push(Reply::anthropic_text("Wrote the index."));
    let cwd_arg = cwd.to_string_lossy().into_owned();
    let mut args = vec!["-n", "--unlocked", "--cwd", cwd_arg.as_str()];
    let notify_arg;
    if let Some(t) = notify {
        notify_arg = t.to_string_lossy().into_owned();
        args.extend(["--notify-transcript", notify_arg.as_str()]);
    }
    let doc = tool(home, &api, "dream-run")
        .args(&args)
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_is(says)
        .run()
        .json();
    doc["run"]["task_id"].as_str().unwrap().to_string()
}

/// The `Contents of <memory dir>/MEMORY.md` reminder of a request, if any.
fn memory_reminder(body: &Value) -> Option<String> {
    message_texts(body)
        .into_iter()
        .map(|(_, t)| t)
        .find(|t| t.contains("/MEMORY.md (user's auto-memory"))
}

/// One `-p hello` turn with the plugin loaded, its hook events in the stream-json output
/// (which the caller checks).
fn hello_with_hook_events<'a>(cc: &Offline, home: &ClaudeHome) -> Run<'a> {
    let plugin = plugin_dir().to_string_lossy().into_owned();
    cc.claude(
        home,
        &home.project,
        &json!([]),
        &[
            "--plugin-dir",
            &plugin,
            "-p",
            "hello",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-hook-events",
            "--session-id",
            S1,
        ],
    )
}

#[test]
fn plugin_hooks_fire_exit_0_and_report_no_errors() {
    let claude = claude_or_skip!("plugin_hooks_fire_exit_0_and_report_no_errors");
    let home = ClaudeHome::new();
    let cc = Offline::new(claude, &home);
    hello_with_hook_events(&cc, &home)
        .stdout_with(|out| {
            let hooks = hook_responses(out);
            let names: Vec<&str> = hooks.iter().map(|h| h.0.as_str()).collect();
            assert_eq!(
                names,
                [
                    "SessionStart:startup",
                    "SessionStart:startup",
                    "Stop",
                    "Stop"
                ],
                "{hooks:?}"
            );
            for (name, code, outcome, stdout, stderr) in &hooks {
                assert_eq!(
                    (*code, outcome.as_str()),
                    (0, "success"),
                    "{name}: {stderr}"
                );
                // Nothing to announce in a fresh project: SessionStart prints nothing at all.
                assert_eq!((stdout.as_str(), stderr.as_str()), ("", ""), "{name}");
            }
            assert_eq!(stream_result(out)["is_error"], false);
        })
        .run();

    // The client's own record of the Stop hooks: both ran, no errors.
    let transcript = home.transcripts_dir().join(format!("{S1}.jsonl"));
    let summary = records(&transcript)
        .into_iter()
        .find(|r| r["subtype"] == "stop_hook_summary")
        .expect("a stop_hook_summary record");
    assert_eq!(summary["hookCount"], 2, "{summary}");
    assert_eq!(summary["hookErrors"], json!([]), "{summary}");
    assert_eq!(summary["preventedContinuation"], false);
    // The Stop hook's gate ran for this project (one session is too few): it left its scan stamp.
    assert!(
        home.state_dir().join("last-scan").is_file(),
        "dream-gate did not run in the Stop hook"
    );
    let log = home.state_home.join("dreamkit/dream.log");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "",
        "-q: nothing logged"
    );
}

#[test]
fn plugin_hooks_without_the_binaries_say_so_in_one_line_and_exit_0() {
    let claude = claude_or_skip!("plugin_hooks_without_the_binaries_say_so_in_one_line_and_exit_0");
    let home = ClaudeHome::new();
    let mut cc = Offline::new(claude, &home);
    cc.path = system_path();
    for bin in crate::support::BINARIES {
        assert!(!on_path(&cc.path, bin), "{bin} is installed on {}", cc.path);
    }
    hello_with_hook_events(&cc, &home)
        .stdout_with(|out| {
            let hooks = hook_responses(out);
            assert_eq!(hooks.len(), 4, "{hooks:?}");
            let mut stderrs: Vec<&str> = Vec::new();
            for (name, code, outcome, stdout, stderr) in &hooks {
                assert_eq!(
                    (*code, outcome.as_str()),
                    (0, "success"),
                    "{name}: {stderr}"
                );
                assert_eq!(stdout, "", "{name}");
                stderrs.push(stderr);
            }
            stderrs.sort();
            assert_eq!(
                stderrs,
                [
                    // turn-status is off by default: it says nothing.
                    "",
                    "dreamkit: dream-gate is not on PATH; memory consolidation skipped (install dreamkit: make install)\n",
                    "dreamkit: dream-run is not on PATH; no memory notice (install dreamkit: make install)\n",
                    "dreamkit: dream-run is not on PATH; no memory notice (install dreamkit: make install)\n",
                ]
            );
            let result = stream_result(out);
            assert_eq!(result["is_error"], false);
            assert_eq!(result["result"], "Hello from the stub.");
        })
        .run();
}

#[test]
fn a_consolidation_is_in_the_next_sessions_request_from_root_subdir_and_worktree() {
    let claude = claude_or_skip!(
        "a_consolidation_is_in_the_next_sessions_request_from_root_subdir_and_worktree"
    );
    let home = ClaudeHome::new();
    git_repo(&home.project);
    let sub = home.project.join("src/sub");
    std::fs::create_dir_all(&sub).unwrap();
    let worktree = home.root.join("wt");
    git_worktree(&home.project, &worktree);
    // Claude Code loads the main worktree root's memory from all three.
    let memory = home.memory_dir();
    let cc = Offline::new(claude, &home);
    for (n, cwd) in [&home.project, &sub, &worktree].into_iter().enumerate() {
        let marker = format!("MEMMARK-{n}-blue-green");
        // A session of the real client there, then a consolidation of it.
        let first = format!("22222222-2222-4222-8222-10000000000{n}");
        cc.prompt(&home, cwd, "we deploy blue-green now", &first, false, &[]);
        let says = if n == 0 { NEW_DANGLING_LINK } else { "" };
        consolidate(&home, cwd, &marker, None, says);
        assert!(
            std::fs::read_to_string(memory.join("MEMORY.md"))
                .unwrap()
                .contains(&marker),
            "{}: dream-run wrote elsewhere",
            cwd.display()
        );
        let session = format!("22222222-2222-4222-8222-00000000000{n}");
        cc.prompt(&home, cwd, "what do you remember?", &session, false, &[]);
        let body = cc.last_body();
        let reminder = memory_reminder(&body)
            .unwrap_or_else(|| panic!("{}: no MEMORY.md in the request", cwd.display()));
        assert!(
            reminder.contains(&format!("Contents of {}/MEMORY.md", memory.display())),
            "{}: {reminder}",
            cwd.display()
        );
        assert!(
            reminder.contains(&format!("- [Deploy](deploy.md): {marker}\n")),
            "{}: {reminder}",
            cwd.display()
        );
        // The session itself is stored under the launch directory's slug.
        assert!(home
            .config
            .join("projects")
            .join(slug_of(cwd))
            .join(format!("{session}.jsonl"))
            .is_file());
    }
}

#[test]
fn the_pending_notice_reaches_the_next_request_once() {
    let claude = claude_or_skip!("the_pending_notice_reaches_the_next_request_once");
    let home = ClaudeHome::new();
    let cc = Offline::new(claude, &home);
    cc.prompt(
        &home,
        &home.project,
        "we deploy blue-green now",
        S1,
        false,
        &[],
    );
    consolidate(&home, &home.project, "PENDMARK", None, NEW_DANGLING_LINK);
    let plugin = plugin_dir().to_string_lossy().into_owned();
    let extra = ["--plugin-dir", plugin.as_str()];
    let s2 = "44444444-4444-4444-8444-444444444444";
    cc.prompt(&home, &home.project, "hello", s2, false, &extra);
    let body = cc.last_body();
    let system: Vec<String> = message_texts(&body)
        .into_iter()
        .filter(|(role, _)| role == "system")
        .map(|(_, t)| t)
        .collect();
    let context = system
        .iter()
        .find(|t| t.starts_with("SessionStart hook additional context: "))
        .unwrap_or_else(|| panic!("no SessionStart context in {system:?}"));
    assert!(context.contains("MEMORY.md"), "{context}");
    // Announced once: dream-run pending --hook cleared the list, the next session hears nothing.
    Run::new(&home, "dream-run")
        .args(["pending", "-n"])
        .success()
        .stdout_json(|pending| assert_eq!(pending["updates"], json!([])))
        .stderr_empty()
        .run();
    cc.prompt(
        &home,
        &home.project,
        "again",
        "33333333-3333-4333-8333-333333333333",
        false,
        &extra,
    );
    let body = cc.last_body();
    assert!(
        !message_texts(&body)
            .iter()
            .any(|(_, t)| t.contains("SessionStart hook additional context")),
        "announced twice"
    );
}

#[test]
fn away_summary_and_memory_saved_survive_resume() {
    let claude = claude_or_skip!("away_summary_and_memory_saved_survive_resume");
    let home = ClaudeHome::new();
    let cc = Offline::new(claude, &home);
    cc.prompt(&home, &home.project, "HISTMARK first turn", S1, false, &[]);
    cc.prompt(&home, &home.project, "second turn", S1, true, &[]);
    cc.prompt(&home, &home.project, "third turn", S1, true, &[]);
    let transcript = home.transcripts_dir().join(format!("{S1}.jsonl"));

    let api = FakeApi::start();
    api.push(Reply::anthropic_text(
        "Testing the stub; next, check the resume.",
    ));
    tool(&home, &api, "recap")
        .args(["--auto", "-n", "--away", "10m", "--cache-age", "0"])
        .arg("--transcript")
        .arg(&transcript)
        .success()
        .stdout_json(|doc| assert_eq!(doc["status"], "ok"))
        .stderr_empty()
        .run();
    consolidate(
        &home,
        &home.project,
        "SAVEDMARK",
        Some(&transcript),
        NEW_DANGLING_LINK,
    );

    let before = records(&transcript);
    let away = before[before.len() - 2].clone();
    let saved = before[before.len() - 1].clone();
    assert_eq!(away["subtype"], "away_summary", "{away}");
    assert_eq!(saved["subtype"], "memory_saved", "{saved}");
    assert_eq!(saved["parentUuid"], away["uuid"]);
    assert_eq!(away["version"], CLIENT_VERSION);

    cc.prompt(&home, &home.project, "fourth turn", S1, true, &[]);
    let after = records(&transcript);
    // Both records are still there, unchanged, and the conversation continues from them.
    assert!(after.contains(&away) && after.contains(&saved));
    let next_user = after[before.len()..]
        .iter()
        .find(|r| r["type"] == "user")
        .expect("the resumed turn's user record");
    assert_eq!(next_user["parentUuid"], saved["uuid"], "{next_user}");
    // The history before them still reaches the model; the records themselves do not.
    let texts = message_texts(&cc.last_body());
    assert!(texts.iter().any(|(_, t)| t.contains("HISTMARK first turn")));
    assert!(texts.iter().any(|(_, t)| t.contains("fourth turn")));
    assert!(!texts
        .iter()
        .any(|(_, t)| t.contains("Testing the stub; next, check the resume.")));
}

#[test]
fn the_slash_commands_run_our_binaries_in_the_session() {
    let claude = claude_or_skip!("the_slash_commands_run_our_binaries_in_the_session");
    let home = ClaudeHome::new();
    let cc = Offline::new(claude, &home);
    let plugin = plugin_dir().to_string_lossy().into_owned();
    let extra = ["--plugin-dir", plugin.as_str()];
    cc.prompt(
        &home,
        &home.project,
        "/dreamkit:dream-status",
        S1,
        false,
        &extra,
    );
    let texts = message_texts(&cc.last_body());
    let body = texts
        .iter()
        .map(|(_, t)| t.as_str())
        .find(|t| t.contains("## dream-lock status"))
        .unwrap_or_else(|| panic!("the command's output is not in the request: {texts:?}"));
    // Each tool's JSON and exit code: the lock is free, a fresh project is not due.
    let lines: Vec<&str> = body.lines().collect();
    let at = |header: &str| lines.iter().position(|l| *l == header).unwrap();
    let lock: Value = serde_json::from_str(lines[at("## dream-lock status") + 1]).unwrap();
    assert_eq!(lock["held"], false);
    assert_eq!(lines[at("## dream-lock status") + 2], "(exit 0)");
    let gate_at = at("## dream-gate (exit 0 due, 1 not due)");
    let gate: Value = serde_json::from_str(lines[gate_at + 1]).unwrap();
    assert_eq!(gate["gate"]["due"], false);
    assert_eq!(lines[gate_at + 2], "(exit 1)");
    let tasks: Value = serde_json::from_str(lines[at("## dream-run tasks") + 1]).unwrap();
    assert_eq!(tasks["tasks"], json!([]));
    // Not throttled: /dream-status asks with --scan-interval 0, which leaves no scan stamp.
    assert_eq!(gate["gate"]["reason"], "too_few_sessions");
    assert_eq!(gate["gate"]["last_scan_at"], Value::Null);

    // An argument that is not a task id is refused by the client before anything runs.
    cc.claude(
        &home,
        &home.project,
        &json!([]),
        &[
            "--plugin-dir",
            &plugin,
            "-p",
            "/dreamkit:dream-undo x;touch pwned",
            "--output-format",
            "json",
        ],
    )
    .stdout_json(|result| {
        assert!(
            result["result"]
                .as_str()
                .unwrap()
                .starts_with("Shell command permission check failed"),
            "{result}"
        );
    })
    .run();
    assert!(!home.project.join("pwned").exists());
}

#[test]
fn marketplace_add_and_install_work_offline_and_the_hooks_fire() {
    let claude = claude_or_skip!("marketplace_add_and_install_work_offline_and_the_hooks_fire");
    let home = ClaudeHome::new();
    // What `make install` puts under PREFIX, from a clone (a copy of what it reads, with the
    // built binaries), then the clone goes away: the installed copy is all the client has.
    let clone = crate::docs::install_tree();
    let release = clone.path().join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    for bin in crate::support::BINARIES {
        std::fs::copy(crate::support::bin_path(bin), release.join(bin)).unwrap();
    }
    let prefix = home.root.join("prefix");
    crate::docs::make_install(clone.path(), &prefix)
        .success()
        .stdout_contains(format!(
            "add it once: claude plugin marketplace add {}/share/dreamkit",
            prefix.display()
        ))
        .stderr_empty()
        .run();
    drop(clone);
    let mut cc = Offline::new(claude, &home);
    cc.path = format!("{}:{}", prefix.join("bin").display(), system_path());
    let repo_arg = prefix.join("share/dreamkit").to_string_lossy().into_owned();

    // The installed plugin validates, and declares what it reaches (`network.hosts`).
    let plugin_arg = prefix
        .join("share/dreamkit/plugin")
        .to_string_lossy()
        .into_owned();
    cc.claude(
        &home,
        &home.project,
        &json!([]),
        &["plugin", "validate", &plugin_arg],
    )
    .stdout_with(|out| {
        assert!(
            out.contains("Hosts: api.anthropic.com (declared), api.openai.com (declared)"),
            "{out}"
        );
        assert!(!out.contains("Hosts not declared"), "{out}");
        assert!(out.contains("Validation passed"), "{out}");
    })
    .run();

    cc.claude(
        &home,
        &home.project,
        &json!([]),
        &["plugin", "marketplace", "add", &repo_arg],
    )
    .stdout_contains("Successfully added marketplace: dreamkit")
    .run();
    cc.claude(
        &home,
        &home.project,
        &json!([]),
        &["plugin", "install", "dreamkit@dreamkit"],
    )
    .stdout_contains("Successfully installed plugin: dreamkit@dreamkit")
    .run();
    let settings: Value =
        serde_json::from_slice(&std::fs::read(home.config.join("settings.json")).unwrap()).unwrap();
    assert_eq!(
        settings["enabledPlugins"]["dreamkit@dreamkit"], true,
        "{settings}"
    );

    // The next session, with no --plugin-dir, runs the installed plugin's hooks.
    cc.claude(
        &home,
        &home.project,
        &json!([]),
        &[
            "-p",
            "hello",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-hook-events",
        ],
    )
    .stdout_with(|out| {
        let hooks = hook_responses(out);
        let summary: Vec<(&str, i64, &str)> = hooks
            .iter()
            .map(|h| (h.0.as_str(), h.1, h.2.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("SessionStart:startup", 0, "success"),
                ("SessionStart:startup", 0, "success"),
                ("Stop", 0, "success"),
                ("Stop", 0, "success"),
            ]
        );
    })
    .run();
    assert!(home.state_dir().join("last-scan").is_file());
}

/// One session of the client whose model makes the tool calls `calls` (name, input), one a
/// turn, then says it is done; acceptEdits, as in the fixture's capture.
fn memory_session(cc: &Offline, home: &ClaudeHome, session: &str, calls: Vec<(&str, Value)>) {
    let mut replies: Vec<Value> = calls
        .into_iter()
        .enumerate()
        .map(|(n, (name, input))| {
            json!({"tool_use": {"name": name, "id": format!("toolu_{n:02}"), "input": input}})
        })
        .collect();
    replies.push(json!("Saved."));
    cc.claude(
        home,
        &home.project,
        &Value::Array(replies),
        &[
            "-p",
            "remember this",
            "--output-format",
            "json",
            "--session-id",
            session,
            "--permission-mode",
            "acceptEdits",
        ],
    )
    .stdout_json(|result| assert_eq!(result["is_error"], false, "{result}"))
    .run();
}

/// The capture of tests/fixtures/claude-code-memory again: a client that stamps its memory
/// files otherwise than the fixture (which dream-run copies) fails here.
#[test]
fn the_client_stamps_memory_files_as_the_committed_fixture_shows() {
    let claude = claude_or_skip!("the_client_stamps_memory_files_as_the_committed_fixture_shows");
    let home = ClaudeHome::new();
    let cc = Offline::new(claude, &home);
    let mem = home.memory_dir();
    std::fs::create_dir_all(&mem).unwrap();
    let file_path = |name: &str| mem.join(name).to_string_lossy().into_owned();
    // The topic files first, the index last, as the fixture's model did.
    let (index, topics): (Vec<_>, Vec<_>) = first_session_writes()
        .into_iter()
        .partition(|(name, _)| name == "MEMORY.md");
    let writes = topics
        .into_iter()
        .chain(index)
        .map(|(name, content)| {
            (
                "Write",
                json!({"file_path": file_path(&name), "content": content}),
            )
        })
        .collect();
    memory_session(&cc, &home, WRITING_SESSION, writes);
    let first = crate::support::tree(&mem);
    let modified_of = |text: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix("  modified: "))
            .map(str::to_string)
    };
    let edited_before = modified_of(&std::fs::read_to_string(mem.join(EDITED_FILE)).unwrap());

    // The client's Edit wants a Read of the file first.
    memory_session(
        &cc,
        &home,
        EDITING_SESSION,
        vec![
            ("Read", json!({"file_path": file_path(EDITED_FILE)})),
            (
                "Edit",
                json!({"file_path": file_path(EDITED_FILE), "old_string": EDIT.0, "new_string": EDIT.1}),
            ),
        ],
    );
    // The edit moved `modified` alone: `originSessionId` stays the writing session's, and
    // the other files are as the first session left them.
    assert_stamped_like_the_client(&mem, WRITING_SESSION);
    let edited_after = modified_of(&std::fs::read_to_string(mem.join(EDITED_FILE)).unwrap());
    assert!(
        edited_after > edited_before,
        "{edited_before:?} -> {edited_after:?}"
    );
    let second = crate::support::tree(&mem);
    let changed: Vec<_> = first
        .symmetric_difference(&second)
        .map(|(path, _)| path.clone())
        .filter(|path| path.ends_with(".md"))
        .collect();
    assert!(
        changed.iter().all(|path| path.ends_with(EDITED_FILE)),
        "{changed:?}"
    );
}

/// The rules engine's relative-date anchor found in transcripts the real client wrote: a
/// line written by its Write in one session and one added by its Edit in another each become
/// the date of their own record, and the change names that record.
#[test]
fn relative_dates_are_anchored_at_the_clients_own_write_and_edit_records() {
    let claude =
        claude_or_skip!("relative_dates_are_anchored_at_the_clients_own_write_and_edit_records");
    let home = ClaudeHome::new();
    let cc = Offline::new(claude, &home);
    let mem = home.memory_dir();
    std::fs::create_dir_all(&mem).unwrap();
    let log = mem.join("project_log.md").to_string_lossy().into_owned();
    let index = mem.join("MEMORY.md").to_string_lossy().into_owned();
    let content = "---\nname: project-log\ndescription: what happened to the gate\nmetadata:\n  type: project\n---\n\nThe gate got a scan throttle yesterday.\n";
    memory_session(
        &cc,
        &home,
        WRITING_SESSION,
        vec![
            ("Write", json!({"file_path": log, "content": content})),
            (
                "Write",
                json!({"file_path": index, "content": "# Memory\n- [Project log](project_log.md) — what happened to the gate\n"}),
            ),
        ],
    );
    memory_session(
        &cc,
        &home,
        EDITING_SESSION,
        vec![
            ("Read", json!({"file_path": log})),
            (
                "Edit",
                json!({"file_path": log, "old_string": "yesterday.\n", "new_string": "yesterday.\nThe lock moved to etcd 2 days ago.\n"}),
            ),
        ],
    );
    // The records' own times, as the client wrote them.
    let write_time = |session: &str, tool: &str| -> String {
        records(&home.transcripts_dir().join(format!("{session}.jsonl")))
            .into_iter()
            .find(|r| {
                r["message"]["content"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|b| b["type"] == "tool_use" && b["name"] == tool)
                })
            })
            .and_then(|r| r["timestamp"].as_str().map(str::to_string))
            .expect("the tool_use record")
    };
    let written = write_time(WRITING_SESSION, "Write");
    let edited = write_time(EDITING_SESSION, "Edit");
    let day = |at: &str, back: i64| {
        let date = time::Date::parse(
            &at[..10],
            &time::macros::format_description!("[year]-[month]-[day]"),
        )
        .unwrap();
        (date - time::Duration::days(back)).to_string()
    };
    let api = FakeApi::start();
    tool(&home, &api, "dream-run")
        .args(["--engine", "rules", "-n", "--unlocked"])
        .env_remove("ANTHROPIC_API_KEY")
        .success()
        .stdout_json(|doc| {
            let changes = doc["run"]["changes"].as_array().unwrap();
            let dates: Vec<&Value> = changes
                .iter()
                .filter(|c| c["rule"] == "relative_date")
                .collect();
            assert_eq!(dates.len(), 2, "{doc}");
            assert_eq!(dates[0]["anchor"]["session"], WRITING_SESSION, "{doc}");
            assert_eq!(dates[0]["anchor"]["timestamp"], written.as_str(), "{doc}");
            assert_eq!(dates[1]["anchor"]["session"], EDITING_SESSION, "{doc}");
            assert_eq!(dates[1]["anchor"]["timestamp"], edited.as_str(), "{doc}");
        })
        .stderr_empty()
        .run();
    let text = std::fs::read_to_string(mem.join("project_log.md")).unwrap();
    assert!(
        text.contains(&format!(
            "The gate got a scan throttle {}.\n",
            day(&written, 1)
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("The lock moved to etcd {}.\n", day(&edited, 2))),
        "{text}"
    );
    assert!(api.requests().is_empty());
}
