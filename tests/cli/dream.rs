//! dream-run driven as a user drives it: real memory files, real locks and processes, the
//! scripted fake model; every result checked on disk.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::dream::*;
use crate::support::fake_api::Reply;
use crate::support::wait;
use crate::support::{bin_path, session_id, LiveProcess, Run};

#[test]
fn a_full_consolidation_lists_greps_reads_writes_edits_and_deletes() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    script_full_consolidation(&d);
    let doc = d
        .dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run()
        .json();
    let run = &doc["run"];
    assert_eq!(run["status"], "completed");
    assert_eq!(run["mode"], "apply");
    assert_eq!(run["turns"], 4);
    assert_eq!(run["sessions_reviewed"], 5);
    assert_eq!(doc["lock"]["acquired"], true, "the envelope flows on");
    let mem = d.mem();
    let abs = |rel: &str| mem.join(rel).to_string_lossy().into_owned();
    assert_eq!(run["diff"]["created"], json!([abs("topics/deploy.md")]));
    assert_eq!(run["diff"]["modified"], json!([abs("MEMORY.md")]));
    assert_eq!(run["diff"]["deleted"], json!([abs("stale.md")]));
    assert_eq!(run["usage"]["input_tokens"], 900 * 3 + 120);
    assert_eq!(
        d.read("topics/deploy.md"),
        "Deploys are blue-green (since 2026-12-01).\n"
    );
    assert_eq!(
        d.read("MEMORY.md"),
        "# Memory\n- [Build](topics/build.md): how to build\n- [Deploy](topics/deploy.md): blue-green deploys\n"
    );
    assert!(!mem.join("stale.md").exists());
    assert_eq!(d.read("topics/build.md"), "Build with make.\n");

    // What the model saw: the listing, the file, the grep count; no tool refused.
    let requests = d.api.requests();
    assert_eq!(requests.len(), 4);
    let first = &requests[0].body;
    assert_eq!(requests[0].header("x-api-key"), Some(KEY));
    assert_eq!(first["system"][0]["cache_control"]["type"], "ephemeral");
    let task = first["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(
        task.contains("Sessions since last consolidation (5):"),
        "{task}"
    );
    assert!(task.contains(&session_id(3)));
    assert!(task.contains("digests/"), "{task}");
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "shell",
            "read_file",
            "write_file",
            "edit_file",
            "delete_file"
        ]
    );
    let listing = tool_results(&requests[1]);
    assert!(listing.iter().all(|(_, err)| !err), "{listing:?}");
    assert!(
        listing[0].0.contains("MEMORY.md") && listing[0].0.contains("topics"),
        "{listing:?}"
    );
    assert!(listing[1].0.contains("how to build"), "{listing:?}");
    let grep = tool_results(&requests[2]);
    assert_eq!(grep[0].0.trim(), "5", "{grep:?}");
    assert!(tool_results(&requests[3]).iter().all(|(_, err)| !err));

    // The record, the pending update, the digests.
    let task_id = run["task_id"].as_str().unwrap();
    let record = d.task(task_id);
    assert_eq!(record["status"], "completed");
    assert_eq!(record["type"], "dream");
    assert_eq!(record["phase"], "done");
    assert_eq!(record["sessions_reviewing"], 5);
    assert_eq!(record["turns"].as_array().unwrap().len(), 4);
    assert_eq!(record["turns"][2]["tool_use_count"], 3);
    assert_eq!(record["lock_token"], doc["lock"]["token"]);
    let pending =
        std::fs::read_to_string(d.home.state_dir().join("pending-updates.jsonl")).unwrap();
    let line: Value = serde_json::from_str(pending.lines().next().unwrap()).unwrap();
    assert_eq!(line["source"], "dream");
    assert_eq!(line["task_id"], task_id);
    assert_eq!(line["files_touched"].as_array().unwrap().len(), 3);
    let digest = std::fs::read_to_string(
        d.home
            .state_dir()
            .join("digests")
            .join(format!("{}.md", session_id(2))),
    )
    .unwrap();
    assert!(
        digest.contains("User: session 2: we deploy with blue-green now"),
        "{digest}"
    );
}

#[test]
fn the_pipeline_and_the_exec_form_end_to_end() {
    for form in ["pipeline", "exec"] {
        let d = Dream::new();
        script_full_consolidation(&d);
        let line = match form {
            "pipeline" => "dream-gate --min-hours 1 --min-sessions 1 | dream-lock acquire | dream-run | dream-lock release",
            _ => "dream-gate --min-hours 1 --min-sessions 1 | dream-lock exec -- dream-run",
        };
        let before = crate::support::mtime(&d.home.lock_file());
        let doc = Run::command(d.process(Path::new("sh")), "sh")
            .args(["-c", line])
            .stdin_from(Stdio::null())
            .success()
            .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
            .stderr_is(if form == "exec" {
                "dream-lock: released the lock: completed, the consolidation time is now\n"
            } else {
                ""
            })
            .run()
            .json();
        assert_eq!(doc["run"]["status"], "completed", "{form}");
        if form == "pipeline" {
            assert_eq!(doc["lock"]["released"], true);
            assert_eq!(doc["lock"]["outcome"], "completed");
        }
        assert!(!d.mem().join("stale.md").exists(), "{form}");
        assert!(d.mem().join("topics/deploy.md").exists(), "{form}");
        // Released as completed: the lock is free and its time moved to now.
        assert_eq!(std::fs::read(d.home.lock_file()).unwrap(), b"", "{form}");
        assert!(
            crate::support::mtime(&d.home.lock_file()) > before,
            "{form}"
        );
    }
}

#[test]
fn a_model_failure_restores_the_memory_dir_and_exits_4() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let before_index = d.read("MEMORY.md");
    d.api.push(Reply::anthropic_tools(
        "Writing.",
        &[
            (
                "write_file",
                json!({"path": "new.md", "content": "half a thought\n"}),
            ),
            (
                "write_file",
                json!({"path": "MEMORY.md", "content": "clobbered\n"}),
            ),
            ("delete_file", json!({"path": "stale.md"})),
        ],
    ));
    for _ in 0..4 {
        d.api.push(Reply::error(500, "api_error", "boom"));
    }
    let doc = d
        .dream_run(&envelope, &["--retries", "3"])
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "server", "{doc}");
            assert_eq!(doc["run"]["status"], "failed", "{doc}");
        })
        .stderr_is("dream-run: run failed: server: boom\n")
        .run()
        .json();
    let run = &doc["run"];
    assert_eq!(run["status"], "failed");
    assert_eq!(run["error"], "model");
    assert!(
        run["message"].as_str().unwrap().starts_with("server"),
        "{run}"
    );
    assert_eq!(d.read("MEMORY.md"), before_index);
    assert_eq!(d.read("stale.md"), "The deploy uses FTP.\n");
    assert!(!d.mem().join("new.md").exists());
    let record = d.task(run["task_id"].as_str().unwrap());
    assert_eq!(record["status"], "failed");
    assert_eq!(
        record["snapshot"],
        Value::Null,
        "restored, so the snapshot is gone"
    );
}

#[test]
fn keep_partial_keeps_what_a_failed_run_wrote() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api.push(Reply::anthropic_tools(
        "Writing.",
        &[("write_file", json!({"path": "new.md", "content": "kept\n"}))],
    ));
    d.api
        .push(Reply::error(400, "invalid_request_error", "bad"));
    let ran = d
        .dream_run(&envelope, &["--keep-partial"])
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "failed");
            assert_eq!(doc["run"]["error"], "model");
            assert_eq!(doc["run"]["message"], "invalid_request: bad");
            // The record tells what stayed.
            assert_eq!(
                doc["run"]["diff"]["created"],
                json!([d.mem().join("new.md").to_string_lossy()])
            );
        })
        .stderr_with(|err| {
            let lines: Vec<&str> = err.lines().collect();
            assert_eq!(lines.len(), 3, "{err}");
            assert!(
                lines[0].starts_with("dream-run: --keep-partial: what the failed run changed stays; `dream-run undo "),
                "{err}"
            );
            assert_eq!(lines[1], "dream-run: the run left more problems than it found: orphan_file 0 -> 1, front_matter 2 -> 3 (dream-run check lists them)");
            assert_eq!(lines[2], "dream-run: run failed: invalid_request: bad");
        })
        .run();
    assert_eq!(d.read("new.md"), "kept\n");
    let task_id = ran.json()["run"]["task_id"].as_str().unwrap().to_string();
    d.tool("dream-lock")
        .arg("release")
        .stdin(ran.stdout)
        .success()
        .stdout_json(|doc| assert_eq!(doc["lock"]["outcome"], "failed"))
        .stderr_empty()
        .run();
    // And `undo` takes it back.
    d.tool("dream-run")
        .args(["undo", &task_id])
        .success()
        .stdout_json(|doc| assert_eq!(doc["undone"], true))
        .stderr_empty()
        .run();
    assert!(!d.mem().join("new.md").exists());
}

#[test]
fn max_turns_ends_the_run_failed_and_restored() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    for n in 0..3 {
        d.api.push(Reply::anthropic_tools(
            "More.",
            &[(
                "write_file",
                json!({"path": format!("n{n}.md"), "content": "x\n"}),
            )],
        ));
    }
    d.dream_run(&envelope, &["--max-turns", "2"])
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "failed");
            assert_eq!(doc["run"]["error"], "max_turns");
        })
        .stderr_with(|err| assert!(err.contains("max_turns") || err.contains("--max-turns")))
        .stderr_is("dream-run: run failed: the agent still wanted tools after --max-turns 2\n")
        .run();
    assert!(!d.mem().join("n0.md").exists() && !d.mem().join("n1.md").exists());
    assert_eq!(d.api.requests().len(), 2);
}

#[test]
fn sigterm_mid_run_aborts_and_restores() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let before = d.read("MEMORY.md");
    d.api.push(Reply::anthropic_tools(
        "Writing.",
        &[
            ("read_file", json!({"path": "MEMORY.md"})),
            (
                "write_file",
                json!({"path": "MEMORY.md", "content": "half done\n"}),
            ),
        ],
    ));
    d.api.push(Reply::Hang(Duration::from_secs(30)));
    let running = Run::ours(d.process(&bin_path("dream-run")), "dream-run")
        .stdin(envelope)
        .code(143)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "interrupted", "{doc}");
            assert_eq!(doc["run"]["status"], "aborted", "{doc}");
        })
        .stderr_is("dream-run: run aborted: stopped by signal 15\n")
        .spawn();
    // Wait until the write landed and the second request is hanging.
    wait::until("the run to ask twice", || {
        (d.api.requests().len() >= 2).then_some(())
    });
    assert_eq!(d.read("MEMORY.md"), "half done\n");
    running.signal(libc::SIGTERM);
    let doc = running.finish().json();
    let run = &doc["run"];
    assert_eq!(run["status"], "aborted");
    assert_eq!(d.read("MEMORY.md"), before);
    assert_eq!(
        d.task(run["task_id"].as_str().unwrap())["status"],
        "aborted"
    );
}

#[test]
fn a_lost_lock_stops_the_run_without_restoring() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let thief = LiveProcess::start();
    let lock = d.home.lock_file();
    let thief_pid = thief.pid();
    d.api.push(Reply::anthropic_tools(
        "First.",
        &[(
            "write_file",
            json!({"path": "first.md", "content": "one\n"}),
        )],
    ));
    // Between the two turns another process takes the lock over.
    d.api.push(Reply::After(
        Box::new(move || {
            // The takeover gets an mtime of its own, as a real one would.
            wait::for_clock_past(crate::support::mtime(&lock));
            std::fs::write(&lock, thief_pid.to_string()).unwrap();
        }),
        Box::new(Reply::anthropic_tools(
            "Second.",
            &[(
                "write_file",
                json!({"path": "second.md", "content": "two\n"}),
            )],
        )),
    ));
    let ran = d
        .dream_run(&envelope, &[])
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "failed", "{doc}"))
        .stderr_with(|err| {
            assert!(
                err.starts_with(
                    "dream-run: the lock was lost: nothing was restored; the snapshot is "
                ),
                "{err}"
            );
        })
        .run();
    let doc = ran.json();
    let run = &doc["run"];
    assert_eq!(run["status"], "failed");
    assert_eq!(run["error"], "lock_lost");
    assert_eq!(
        d.read("first.md"),
        "one\n",
        "not restored: that would be an unfenced write"
    );
    assert!(
        !d.mem().join("second.md").exists(),
        "the fenced write never landed"
    );
    let record = d.task(run["task_id"].as_str().unwrap());
    assert_eq!(record["error"], "lock_lost");
    assert!(record["snapshot"].as_str().unwrap().contains("snapshots"));
    assert_eq!(
        ran.stderr,
        format!(
            "dream-run: the lock was lost: nothing was restored; the snapshot is {}\n\
             dream-run: the run left more problems than it found: orphan_file 0 -> 1, front_matter 2 -> 3 (dream-run check lists them)\n\
             dream-run: run failed: the consolidation lock was taken by another process\n",
            record["snapshot"].as_str().unwrap()
        )
    );
    assert_eq!(
        std::fs::read_to_string(d.home.lock_file()).unwrap(),
        thief_pid.to_string()
    );
}

#[test]
fn undo_puts_a_run_back_and_refuses_after_a_later_edit() {
    let d = Dream::new();
    let original_index = d.read("MEMORY.md");
    for attempt in ["clean", "edited"] {
        d.touch_sessions();
        let time_before_run = d.lock_ms();
        let holder = LiveProcess::start();
        let envelope = d.acquired_envelope(&holder);
        script_full_consolidation(&d);
        let ran = d
            .dream_run(&envelope, &[])
            .success()
            .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
            .stderr_empty()
            .run();
        let task_id = ran.json()["run"]["task_id"].as_str().unwrap().to_string();
        d.tool("dream-lock")
            .args(["release", "--outcome", "completed"])
            .stdin(ran.stdout)
            .success()
            .stdout_json(|doc| {
                assert_eq!(doc["lock"]["released"], true);
                assert_eq!(doc["lock"]["outcome"], "completed");
            })
            .stderr_empty()
            .run();
        drop(holder);
        if attempt == "edited" {
            std::fs::write(d.mem().join("topics/deploy.md"), "a person's edit\n").unwrap();
            d.tool("dream-run")
                .args(["undo", &task_id])
                .code(1)
                .stdout_json(|doc| {
                    assert_eq!(doc["undone"], false);
                    assert_eq!(doc["reason"], "changed_since");
                    assert_eq!(
                        doc["files"],
                        json!([d.mem().join("topics/deploy.md").to_string_lossy()])
                    );
                })
                .stderr_contains("topics/deploy.md")
                .stderr_is(format!(
                    "dream-run: not undone: changed since the run: {}\n",
                    d.mem().join("topics/deploy.md").display()
                ))
                .run();
            assert_eq!(d.read("topics/deploy.md"), "a person's edit\n");
            assert!(!d.mem().join("stale.md").exists(), "nothing changed");
            return;
        }
        assert_ne!(d.lock_ms(), time_before_run, "the release stamped the run");
        let doc = d
            .tool("dream-run")
            .args(["undo"])
            .success()
            .stdout_json(|doc| assert_eq!(doc["undone"], true, "{doc}"))
            .stderr_empty()
            .run()
            .json();
        assert_eq!(doc["undone"], true);
        assert_eq!(doc["task_id"], task_id.as_str());
        assert_eq!(d.read("MEMORY.md"), original_index);
        assert_eq!(d.read("stale.md"), "The deploy uses FTP.\n");
        assert!(!d.mem().join("topics/deploy.md").exists());
        // The newest consolidation undone: the time is back to before it, to the
        // millisecond, and its sessions are due again.
        assert_eq!(d.lock_ms(), time_before_run, "{doc}");
        assert!(doc["last_consolidated_at"].is_string(), "{doc}");
        d.gate_is_due();
        assert!(d.task(&task_id)["undone_at"].is_string());
        // Undoing twice is refused.
        d.tool("dream-run")
            .args(["undo", &task_id])
            .code(1)
            .stdout_json(|doc| {
                assert_eq!(
                    *doc,
                    json!({"undone": false, "reason": "not_undoable", "task_id": task_id, "files": []})
                );
            })
            .stderr_is(format!(
                "dream-run: task {task_id} cannot be undone: already undone\n"
            ))
            .run();
    }
}

#[test]
fn dry_run_needs_no_credentials_and_sends_nothing() {
    let d = Dream::new();
    let doc = d
        .tool("dream-run")
        .env_remove("ANTHROPIC_API_KEY")
        .args(["--dry-run", "-n"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "dry_run", "{doc}"))
        .stderr_empty()
        .run()
        .json();
    let prompt = doc["prompt"].as_str().unwrap();
    assert!(prompt.contains("1. Orient") && prompt.contains("4. Prune"));
    assert!(prompt.contains("Sessions since last consolidation (5):"));
    assert_eq!(doc["sessions"].as_array().unwrap().len(), 5);
    assert_eq!(doc["tools"].as_array().unwrap().len(), 5);
    assert_eq!(doc["run"], json!({"status": "dry_run"}));
    assert!(d.api.requests().is_empty());
    assert!(
        !d.home.state_dir().join("tasks").exists(),
        "no task recorded"
    );
    // Nothing at all: not even the session digests a real run keeps.
    assert!(!d.home.state_home.exists(), "a dry run wrote state");
}

/// `dream-gate | dream-lock exec -- dream-run --dry-run` (dream-run(1)'s "nothing written"
/// example) and `acquire | dream-run --dry-run | release` consolidate nothing: the lock is
/// rolled back to the time it had, and the gate is still due afterwards.
#[test]
fn a_dry_run_under_the_lock_rolls_it_back() {
    for form in ["exec", "pipeline"] {
        let d = Dream::new();
        // The lock keeps milliseconds.
        let before = d.lock_ms();
        let line = match form {
            "exec" => "dream-gate --min-hours 1 --min-sessions 1 | dream-lock exec -- dream-run --dry-run",
            _ => "dream-gate --min-hours 1 --min-sessions 1 | dream-lock acquire | dream-run --dry-run | dream-lock release",
        };
        let doc = Run::command(d.process(Path::new("sh")), "sh")
            .args(["-c", line])
            .stdin_from(Stdio::null())
            .env_remove("ANTHROPIC_API_KEY")
            .success()
            .stdout_json(|doc| assert_eq!(doc["run"]["status"], "dry_run", "{doc}"))
            .stderr_is(if form == "exec" {
                "dream-lock: rolled the lock back (dry_run): the consolidation time is as it was\n"
            } else {
                ""
            })
            .run()
            .json();
        // The dry run's own keys stay at the top level, beside the envelope's sections.
        assert_eq!(doc["run"]["status"], "dry_run", "{form}: {doc}");
        assert_eq!(doc["sessions"].as_array().unwrap().len(), 5, "{form}");
        assert!(
            doc["prompt"].as_str().unwrap().contains("1. Orient"),
            "{form}"
        );
        assert_eq!(doc["gate"]["due"], true, "{form}");
        assert_eq!(doc["lock"]["acquired"], true, "{form}");
        if form == "pipeline" {
            assert_eq!(doc["lock"]["released"], true, "{doc}");
            assert_eq!(doc["lock"]["outcome"], "dry_run", "{doc}");
        }
        assert!(d.api.requests().is_empty(), "{form}");
        assert_eq!(
            d.lock_ms(),
            before,
            "{form}: the last-consolidated time moved"
        );
        assert_eq!(std::fs::read(d.home.lock_file()).unwrap(), b"", "{form}");
        d.tool("dream-gate")
            .args(["--min-hours", "1", "--min-sessions", "1"])
            .success()
            .stdout_json(|doc| assert_eq!(doc["gate"]["due"], true, "{doc}"))
            .stderr_empty()
            .run();
    }
}

/// Two runs fed one envelope: the loser holds nothing (skipped, lock_claimed), and its
/// release, run after the winner's run but before the winner's release, changes nothing: the
/// winner's consolidation is not rolled back, and the winner's own release completes it.
#[test]
fn the_losers_release_never_releases_the_winner() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api
        .push(Reply::anthropic_tools(
            "Consolidating.",
            &[
                ("read_file", json!({"path": "MEMORY.md"})),
                ("read_file", json!({"path": "stale.md"})),
                (
                    "write_file",
                    json!({"path": "MEMORY.md", "content": "# Memory\n- [Build](topics/build.md): how to build\n"}),
                ),
                ("delete_file", json!({"path": "stale.md"})),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    let winner = d
        .dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run();
    let task = winner.json()["run"]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let loser = d
        .dream_run(&envelope, &[])
        .code(1)
        .stdout_json(|doc| {
            let run = &doc["run"];
            assert_eq!(run["status"], "skipped", "{doc}");
            assert_eq!(run["reason"], "lock_claimed", "{doc}");
            assert_eq!(run["task_id"], Value::Null, "{doc}");
            assert_eq!(run["claimed_by"], task.as_str(), "{doc}");
        })
        .stderr_is(format!(
            "dream-run: run skipped: task {task} already ran under this lock: take the lock anew \
             (dream-lock acquire) for another run\n"
        ))
        .run();
    let lock_before = std::fs::read(d.home.lock_file()).unwrap();
    let ms_before = d.lock_ms();
    d.tool("dream-lock")
        .arg("release")
        .stdin(loser.stdout)
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["lock"]["released"], false, "{doc}");
            assert_eq!(doc["lock"]["reason"], "not_holder", "{doc}");
        })
        .stderr_is(format!(
            "dream-lock: not released: the lock is held for dream-run task {task}, not for this \
             envelope's run; that run's own envelope releases it (or pass --force); nothing was \
             changed\n"
        ))
        .run();
    // Nothing changed: the lock still names its holder at the same time, the work stays.
    assert_eq!(std::fs::read(d.home.lock_file()).unwrap(), lock_before);
    assert_eq!(lock_before, holder.pid().to_string().as_bytes());
    assert_eq!(d.lock_ms(), ms_before);
    assert!(!d.mem().join("stale.md").exists());
    d.release(&winner.stdout, "completed");
    assert_eq!(std::fs::read(d.home.lock_file()).unwrap(), b"");
    assert!(d.lock_ms() >= ms_before);
}

#[test]
fn no_lock_is_refused_and_a_declined_envelope_passes_through() {
    let d = Dream::new();
    d.dream_run(r#"{"gate":{"due":true,"sessions":[]}}"#, &[])
        .code(2)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "usage"))
        .stderr_is("dream-run: no lock: run dream-run after `dream-lock acquire` (its envelope on stdin) or under `dream-lock exec`, or pass --unlocked\n")
        .run();
    let declined = r#"{"gate":{"due":false,"reason":"too_soon"}}"#;
    d.dream_run(declined, &[])
        .code(1)
        .stdout_json(|doc| assert_eq!(*doc, serde_json::from_str::<Value>(declined).unwrap()))
        .stderr_with(|err| assert!(!err.is_empty(), "exit 1 says why"))
        .stderr_is("dream-run: passed through: the gate said not due (too_soon)\n")
        .run();
    for (bad, why) in [
        (
            r#"{"lock":{"acquired":"true","token":"1:2"}}"#,
            r#"`lock.acquired` must be true or false, not "true" (a string)"#,
        ),
        (
            r#"{"lock":{"acquired":true,"token":5}}"#,
            "`lock.token` must be a non-empty string, not 5",
        ),
        (
            r#"{"lock":{"acquired":true,"token":"1:2","prior_mtime":"x"}}"#,
            r#"`lock.prior_mtime` must be epoch milliseconds, not "x""#,
        ),
        (
            r#"{"gate":{"sessions":[{"id":"../../etc/passwd"}]},"lock":{"acquired":true,"token":"1:2"}}"#,
            "`gate.due` must be true or false, not missing",
        ),
    ] {
        d.dream_run(bad, &[])
            .code(2)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "bad_input", "{bad}"))
            .stderr_is(format!("dream-run: envelope field {why}\n"))
            .run();
    }
    assert!(d.api.requests().is_empty());
    assert!(!d.home.state_dir().join("tasks").exists());
}

#[test]
fn refused_tool_calls_are_errors_the_run_survives() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let outside = d.home.root.join("outside.md");
    std::fs::write(&outside, "canary\n").unwrap();
    std::os::unix::fs::symlink(&outside, d.mem().join("link.md")).unwrap();
    let attacks = [
        ("shell", json!({"command": "cat MEMORY.md > /tmp/x"})),
        ("shell", json!({"command": "ls; rm -rf ."})),
        ("shell", json!({"command": "cat MEMORY.md | sh"})),
        ("shell", json!({"command": "echo $(id)"})),
        ("shell", json!({"command": "find . -delete"})),
        ("shell", json!({"command": "grep -r root /etc"})),
        (
            "shell",
            json!({"command": format!("cat {}", outside.display())}),
        ),
        (
            "write_file",
            json!({"path": "../escape.md", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": outside.to_string_lossy(), "content": "x"}),
        ),
        ("write_file", json!({"path": "link.md", "content": "x"})),
        (
            "write_file",
            json!({"path": ".git/hooks/pre-commit.md", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "Agents/evil.md", "content": "x"}),
        ),
        ("write_file", json!({"path": "notes.txt", "content": "x"})),
        ("delete_file", json!({"path": "link.md"})),
        (
            "edit_file",
            json!({"path": "MEMORY.md", "old_string": "not there", "new_string": "x"}),
        ),
        ("write_file", json!({"path": 5, "content": "x"})),
        ("no_such_tool", json!({})),
    ];
    d.api
        .push(Reply::anthropic_tools("Trying things.", &attacks));
    d.api.push(Reply::anthropic_text("Nothing to change."));
    let before = crate::support::tree(&d.home.root);
    d.dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed"))
        .stderr_empty()
        .run();
    let results = tool_results(&d.api.requests()[1]);
    assert_eq!(results.len(), attacks.len());
    for ((text, is_error), (name, input)) in results.iter().zip(&attacks) {
        assert!(is_error, "{name} {input} was not refused: {text}");
        assert!(!text.trim().is_empty(), "{name} {input}: no reason given");
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "canary\n");
    // Only dreamkit's own state changed (task record, digests, the run's claim beside the
    // lock).
    let after = crate::support::tree(&d.home.root);
    // The tree's paths are relative to the home's root.
    let relative = |path: &Path| path.strip_prefix(&d.home.root).unwrap().to_path_buf();
    let state = relative(&d.home.state_home).to_string_lossy().into_owned();
    let claim = relative(&d.mem().join(".consolidate-lock.dreamkit"));
    let changed: Vec<_> = after
        .symmetric_difference(&before)
        .filter(|(p, _)| !p.starts_with(&state) && Path::new(p) != claim)
        .collect();
    assert!(changed.is_empty(), "{changed:?}");
    assert!(
        !Path::new("/tmp/x").exists()
            || std::fs::read("/tmp/x")
                .map(|b| b.is_empty())
                .unwrap_or(true)
    );
}

#[test]
fn tasks_pending_and_the_memory_saved_notice() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    script_full_consolidation(&d);
    let transcript = d
        .home
        .transcripts_dir()
        .join(format!("{}.jsonl", session_id(5)));
    let len_before = std::fs::metadata(&transcript).unwrap().len();
    let ran = d
        .dream_run(
            &envelope,
            &[
                "--notify-transcript",
                &transcript.to_string_lossy(),
                "--events",
            ],
        )
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_with(|err| {
            for line in err.lines() {
                assert!(
                    serde_json::from_str::<Value>(line).is_ok(),
                    "not an event: {line:?}"
                );
            }
        })
        .run();
    let task_id = ran.json()["run"]["task_id"].as_str().unwrap().to_string();
    let events: Vec<Value> = ran
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"turn"));
    assert_eq!(kinds.last(), Some(&"done"));
    assert!(
        kinds.contains(&"tool") && kinds.contains(&"file_touched"),
        "{kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| **k == "file_touched").count(), 3);

    let text = std::fs::read_to_string(&transcript).unwrap();
    assert!(text.len() as u64 > len_before);
    let record: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(record["type"], "system");
    assert_eq!(record["subtype"], "memory_saved");
    assert_eq!(record["verb"], "Improved");
    assert_eq!(record["isMeta"], false);
    assert_eq!(record["parentUuid"], "a5");
    assert_eq!(record["sessionId"], session_id(5).as_str());
    assert_eq!(record["writtenPaths"].as_array().unwrap().len(), 2);

    d.tool("dream-run")
        .args(["pending", "--clear"])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["updates"][0]["task_id"], task_id.as_str());
            assert_eq!(doc["cleared"], true);
        })
        .stderr_empty()
        .run();
    d.tool("dream-run")
        .args(["pending"])
        .success()
        .stdout_json(|again| assert_eq!(again["updates"], json!([])))
        .stderr_empty()
        .run();

    // An orphaned record: running, but its process is gone.
    let store = d.home.state_dir().join("tasks");
    let mut orphan = d.task(&task_id);
    orphan["task_id"] = json!("20991231T000000Z-deadbeef");
    orphan["status"] = json!("running");
    orphan["pid"] = json!(u32::MAX - 3);
    orphan["started_at"] = json!("2099-12-31T00:00:00.000Z");
    std::fs::write(
        store.join("20991231T000000Z-deadbeef.json"),
        orphan.to_string(),
    )
    .unwrap();
    let list = d
        .tool("dream-run")
        .args(["tasks"])
        .success()
        .stdout_json(|doc| {
            assert!(
                doc["tasks"].as_array().is_some_and(|t| !t.is_empty()),
                "{doc}"
            );
        })
        .stderr_is(format!(
            "dream-run: task {} died without an end (killed) while it changed the memory dir: \
             `dream-run recover` rolls it back (so does the next run, apply, undo or discard)\n",
            "20991231T000000Z-deadbeef"
        ))
        .run()
        .json();
    let tasks = list["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(
        tasks[0]["task_id"], "20991231T000000Z-deadbeef",
        "newest first"
    );
    assert_eq!(tasks[0]["status"], "failed");
    assert_eq!(tasks[0]["error"], "orphaned");
    assert_eq!(tasks[1]["status"], "completed");
}

#[test]
fn sigkill_mid_run_leaves_whole_files_and_a_free_lock() {
    let d = Dream::new();
    d.api.push(Reply::anthropic_tools(
        "Writing.",
        &[
            ("read_file", json!({"path": "MEMORY.md"})),
            (
                "write_file",
                json!({"path": "MEMORY.md", "content": "new index\n".repeat(1000)}),
            ),
        ],
    ));
    d.api.push(Reply::Hang(Duration::from_secs(30)));
    let exec = Run::ours(d.process(&bin_path("dream-lock")), "dream-lock")
        .args(["exec", "--", "dream-run"])
        .stdin_from(Stdio::null())
        .killed_by(libc::SIGKILL)
        .stdout_empty()
        .stderr_empty()
        .spawn();
    wait::until("the run to ask twice", || {
        (d.api.requests().len() >= 2).then_some(())
    });
    let tasks = d
        .tool("dream-run")
        .args(["tasks"])
        .success()
        .stdout_json(|doc| {
            assert!(
                doc["tasks"].as_array().is_some_and(|t| !t.is_empty()),
                "{doc}"
            );
        })
        .stderr_empty()
        .run()
        .json();
    let run_pid = tasks["tasks"][0]["pid"].as_u64().unwrap() as i32;
    // The holder first (the lock's PID), then the run, mid-conversation.
    exec.signal(libc::SIGKILL);
    wait::for_exit(exec.pid() as i32);
    unsafe {
        libc::kill(run_pid, libc::SIGKILL);
    }
    wait::for_exit(run_pid);
    // The run held exec's stdout and stderr too; with both gone they close.
    exec.finish();
    assert_eq!(
        d.read("MEMORY.md"),
        "new index\n".repeat(1000),
        "whole, never torn"
    );
    // Free by liveness.
    d.tool("dream-lock")
        .args(["status"])
        .success()
        .stdout_json(|status| {
            assert_eq!(status["held"], false);
            assert_eq!(status["holder_alive"], false);
        })
        .stderr_empty()
        .run();
    let task_id = tasks["tasks"][0]["task_id"].as_str().unwrap();
    d.tool("dream-run")
        .args(["tasks"])
        .success()
        .stdout_json(|tasks| assert_eq!(tasks["tasks"][0]["error"], "orphaned"))
        .stderr_is(format!(
            "dream-run: task {task_id} died without an end (killed) while it changed the memory \
             dir: `dream-run recover` rolls it back (so does the next run, apply, undo or \
             discard)\n"
        ))
        .run();
}

#[test]
fn limits_end_the_run_failed_and_restored() {
    for (flag, value, error, why) in [
        (
            "--deadline",
            "1s",
            "deadline",
            "the run passed its --deadline of 1s",
        ),
        (
            "--max-tokens",
            "100",
            "max_tokens",
            "used 960 tokens, over --max-tokens 100",
        ),
    ] {
        let d = Dream::new();
        let holder = LiveProcess::start();
        let envelope = d.acquired_envelope(&holder);
        d.api.push(Reply::anthropic_tools(
            "Writing.",
            &[(
                "write_file",
                json!({"path": "MEMORY.md", "content": "partial\n"}),
            )],
        ));
        d.api.push(Reply::Hang(Duration::from_secs(20)));
        let before = std::fs::read_to_string(d.mem().join("MEMORY.md")).unwrap();
        d.dream_run(&envelope, &[flag, value])
            .code(1)
            .stdout_json(|doc| {
                assert_eq!(doc["run"]["status"], "failed", "{flag}");
                assert_eq!(doc["run"]["error"], error, "{flag}");
            })
            .stderr_with(|note| {
                assert_eq!(note.lines().count(), 1, "one line says why: {note}");
                assert!(note.contains("run failed"), "{note}");
            })
            .stderr_is(format!("dream-run: run failed: {why}\n"))
            .run();
        assert_eq!(d.read("MEMORY.md"), before, "{flag}: restored");
    }
}

#[test]
fn a_signal_during_a_shell_command_stops_the_run_promptly() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    // 64 GiB of zeros (sparse: no disk used): reading them takes far longer than the test.
    std::fs::File::create(d.mem().join("slow.bin"))
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    d.api.push(Reply::anthropic_tools(
        "Writing, then reading something slow.",
        &[
            ("read_file", json!({"path": "MEMORY.md"})),
            (
                "write_file",
                json!({"path": "MEMORY.md", "content": "half done\n"}),
            ),
            ("shell", json!({"command": "head -c 64G slow.bin | wc -l"})),
        ],
    ));
    let running = Run::ours(d.process(&bin_path("dream-run")), "dream-run")
        .args(["--shell-timeout", "60s"])
        .stdin(envelope)
        // Bounded below the shell timeout: a run that waited out the 60 s fails here.
        .timeout(Duration::from_secs(45))
        .code(130)
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "aborted"))
        .stderr_is("dream-run: run aborted: stopped by signal 2\n")
        .spawn();
    wait::until("the write to land", || {
        (d.read("MEMORY.md") == "half done\n").then_some(())
    });
    // The shell tool is running its command.
    wait::for_descendant(running.pid() as i32, "head");
    running.signal(libc::SIGINT);
    running.finish();
    assert_ne!(d.read("MEMORY.md"), "half done\n", "restored");
}

#[test]
fn verbose_says_whether_landlock_confines_the_shell_and_a_pipe_gets_no_bar() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api.push(Reply::anthropic_text("Nothing to change."));
    d.api.push(Reply::anthropic_text("Nothing to change."));
    // No progress bar or chatter in a pipe.
    d.dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "completed");
            assert_eq!(doc["run"]["files_touched"], json!([]));
        })
        .stderr_empty()
        .run();
    drop(holder);
    d.touch_sessions();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let ran = d
        .dream_run(&envelope, &["-v"])
        .success()
        .stdout_json(|doc| assert!(doc["run"]["landlock"].is_boolean(), "{doc}"))
        .stderr_with(|said| assert_eq!(said.lines().count(), 3, "{said}"))
        .run();
    let landlock = ran.json()["run"]["landlock"].as_bool().unwrap();
    let said = &ran.stderr;
    let line = said
        .lines()
        .find(|l| l.contains("Landlock"))
        .unwrap_or_else(|| panic!("{said}"));
    assert_eq!(line.contains("Landlock active"), landlock, "{line}");
    let task_id = ran.json()["run"]["task_id"].as_str().unwrap().to_string();
    assert_eq!(
        said.lines().skip(1).collect::<Vec<_>>(),
        [
            format!("dream-run: task {task_id}: 5 sessions, 5 digests, model claude-sonnet-4-5"),
            "dream-run: the model called no tool: it looked at nothing and changed nothing"
                .to_string(),
        ]
    );
}

#[test]
fn an_index_over_claude_codes_limits_is_a_warning() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api.push(Reply::anthropic_tools(
        "Indexing.",
        &[
            ("read_file", json!({"path": "MEMORY.md"})),
            (
                "write_file",
                json!({"path": "MEMORY.md", "content": "- entry\n".repeat(250)}),
            ),
        ],
    ));
    d.api.push(Reply::anthropic_text("Indexed everything."));
    let ran = d
        .dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_with(|stderr| {
            assert!(stderr.contains("MEMORY.md is over"), "{stderr}");
            assert!(
                stderr.contains("the run left more problems than it found: index_over_limit 0 -> 1, index_shape 0 -> 250, orphan_file 0 -> 2, duplicate_entry 0 -> 249"),
                "{stderr}"
            );
        })
        .stderr_is(
            "dream-run: MEMORY.md is over Claude Code's limits (200 lines, 25000 characters): the rest is never loaded\n\
             dream-run: the run left more problems than it found: index_over_limit 0 -> 1, index_shape 0 -> 250, orphan_file 0 -> 2, duplicate_entry 0 -> 249 (dream-run check lists them)\n",
        )
        .run();
    let doc = ran.json();
    let run = &doc["run"];
    assert_eq!(run["warnings"], json!(["index_over_limit", "health_worse"]));
    // 250 identical lines: over the limit, 249 duplicates, 250 bullets without a link, and
    // the two topic files the old index pointed at are reached by nothing now.
    assert_eq!(run["health"]["before"]["counts"]["index_over_limit"], 0);
    assert_eq!(run["health"]["after"]["counts"]["index_over_limit"], 1);
    assert_eq!(run["health"]["after"]["counts"]["duplicate_entry"], 249);
    assert_eq!(run["health"]["after"]["counts"]["orphan_file"], 2);
    assert_eq!(run["health"]["after"]["counts"]["index_shape"], 250);
    assert_eq!(
        run["health"]["worse"],
        json!([
            "index_over_limit",
            "index_shape",
            "orphan_file",
            "duplicate_entry"
        ])
    );
    // The task record keeps both.
    let record = d.task_record(run["task_id"].as_str().unwrap());
    assert_eq!(record["health"], run["health"]);
}

#[test]
fn useless_limits_are_usage_errors() {
    let d = Dream::new();
    for (args, why) in [
        (
            ["--shell-timeout", "0"],
            "'--shell-timeout <DURATION>': \"0\" is zero: give the commands some time",
        ),
        (
            ["--max-tokens", "0"],
            "'--max-tokens <N>': 0 is not in 1..18446744073709551615",
        ),
        (
            ["--max-turns", "0"],
            "'--max-turns <N>': 0 is not in 1..=4294967295",
        ),
    ] {
        d.tool("dream-run")
            .args(args)
            .arg("-n")
            .code(2)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "usage", "{args:?}"))
            .stderr_is(crate::support::usage_stderr(
                "dream-run",
                &format!("invalid value '0' for {why}"),
            ))
            .run();
    }
    assert!(d.api.requests().is_empty());
}

/// Another writer (a Claude Code session) rewrites a file between the agent's read and its
/// edit: the edit is refused with an error the model can act on, the other writer's content
/// stays, and the run goes on.
#[test]
fn an_edit_of_a_file_changed_since_it_was_read_is_refused_and_keeps_the_other_write() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let build = d.mem().join("topics/build.md");
    let other_writer = {
        let build = build.clone();
        move || std::fs::write(&build, "Build with make; a session added this.\n").unwrap()
    };
    d.api
        .push(Reply::anthropic_tools(
            "Reading.",
            &[("read_file", json!({"path": "topics/build.md"}))],
        ))
        .push(Reply::After(
            Box::new(other_writer),
            Box::new(Reply::anthropic_tools(
                "Editing.",
                &[
                    (
                        "edit_file",
                        json!({"path": "topics/build.md", "old_string": "make", "new_string": "cargo"}),
                    ),
                    (
                        "write_file",
                        json!({"path": "topics/build.md", "content": "Build with cargo.\n"}),
                    ),
                    ("delete_file", json!({"path": "topics/build.md"})),
                ],
            )),
        ))
        .push(Reply::anthropic_text("Left it alone."));
    d.dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "completed");
            assert_eq!(doc["run"]["files_touched"], json!([]));
        })
        .stderr_empty()
        .run();
    let results = tool_results(&d.api.requests()[2]);
    assert_eq!(results.len(), 3, "{results:?}");
    for (text, is_error) in &results {
        assert!(is_error, "{results:?}");
        assert!(
            text.contains("topics/build.md changed since you read it")
                && text.contains("read it again"),
            "{text}"
        );
    }
    assert_eq!(
        d.read("topics/build.md"),
        "Build with make; a session added this.\n"
    );
}

/// A write or delete of an existing file the run never read is refused (the run goes on); a
/// file the run wrote itself can be written and edited again, and a re-read file is writable.
#[test]
fn unread_files_are_refused_and_the_runs_own_files_stay_writable() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api
        .push(Reply::anthropic_tools(
            "Writing blind.",
            &[
                (
                    "write_file",
                    json!({"path": "MEMORY.md", "content": "blind\n"}),
                ),
                ("delete_file", json!({"path": "stale.md"})),
                (
                    "edit_file",
                    json!({"path": "topics/build.md", "old_string": "make", "new_string": "cargo"}),
                ),
                ("write_file", json!({"path": "new.md", "content": "one\n"})),
                (
                    "edit_file",
                    json!({"path": "new.md", "old_string": "one", "new_string": "two"}),
                ),
                (
                    "write_file",
                    json!({"path": "new.md", "content": "three\n"}),
                ),
                ("read_file", json!({"path": "stale.md"})),
                ("delete_file", json!({"path": "stale.md"})),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    d.dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed"))
        .stderr_is("dream-run: the run left more problems than it found: dangling_link 0 -> 1, orphan_file 0 -> 1 (dream-run check lists them)\n")
        .run();
    let results = tool_results(&d.api.requests()[1]);
    let errors: Vec<bool> = results.iter().map(|(_, e)| *e).collect();
    assert_eq!(
        errors,
        [true, true, true, false, false, false, false, false],
        "{results:?}"
    );
    assert!(results[0].0.contains("you have not read it"), "{results:?}");
    assert!(d.read("MEMORY.md").starts_with("# Memory\n"));
    assert_eq!(d.read("topics/build.md"), "Build with make.\n");
    assert_eq!(d.read("new.md"), "three\n");
    assert!(!d.mem().join("stale.md").exists());
}

const PROJECT_CANARY: &str = "CANARY-51f0 a token in the project";

/// A project with code, a CLAUDE.md (and the user's), and secret-bearing files.
fn project_with_instructions_and_secrets(d: &Dream) {
    let project = &d.home.project;
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::create_dir_all(project.join("keys")).unwrap();
    std::fs::write(
        project.join("src/lib.rs"),
        "pub fn deploy() {} // blue-green\n",
    )
    .unwrap();
    std::fs::write(
        project.join("CLAUDE.md"),
        "Run the tests with `make test`.\n",
    )
    .unwrap();
    std::fs::write(d.home.config.join("CLAUDE.md"), "Answer briefly.\n").unwrap();
    std::fs::write(project.join(".env"), format!("TOKEN={PROJECT_CANARY}\n")).unwrap();
    std::fs::write(project.join("keys/id_rsa"), PROJECT_CANARY).unwrap();
}

#[test]
fn the_dry_run_prompt_says_what_a_memory_is_and_names_the_claude_md_files() {
    let d = Dream::new();
    project_with_instructions_and_secrets(&d);
    let project = d.home.project.display().to_string();
    let prompt_of = |args: &[&str]| -> String {
        let doc = d
            .tool("dream-run")
            .args(["--dry-run", "-n"])
            .args(args)
            .success()
            .stdout_json(|doc| assert_eq!(doc["run"]["status"], "dry_run", "{doc}"))
            .stderr_empty()
            .run()
            .json();
        doc["prompt"].as_str().unwrap().to_string()
    };
    let prompt = prompt_of(&[]);
    for needle in [
        "- `user`: who the user is",
        "- `feedback`: how the user wants the work done",
        "- `project`: context about the work that the code itself does not show",
        "- `reference`: where to look outside the project",
        "**Why:**",
        "**How to apply:**",
        "Never saved, even when a session asked for it: code patterns, conventions",
        "anything a CLAUDE.md file already says",
        "One memory per file",
        "metadata:\n  type: feedback\n---",
        "- [Title](file.md) \u{2014} a short hook",
        "never edit the CLAUDE.md",
        "Files under `team/`",
    ] {
        assert!(prompt.contains(needle), "{needle:?} missing");
    }
    let claude_md = format!(
        "CLAUDE.md files (read-only; never edit them):\n- {}\n- {project}/CLAUDE.md\n",
        d.home.config.join("CLAUDE.md").display()
    );
    assert!(prompt.contains(&claude_md), "{prompt}");
    let project_line = format!(
        "Project folder (read-only, to check memories against the current code): {project}\n"
    );
    assert!(prompt.contains(&project_line), "{prompt}");

    let without = prompt_of(&["--no-read-project"]);
    assert!(!without.contains("Project folder"), "{without}");
    assert!(
        without.contains(&claude_md),
        "the CLAUDE.md files stay readable"
    );
    // The earlier flag is still taken, and is the default.
    assert!(prompt_of(&["--no-read-project", "--read-project"]).contains(&project_line));
}

#[test]
fn the_agent_reads_the_project_and_claude_md_but_never_a_secret_nor_writes_claude_md() {
    let d = Dream::new();
    project_with_instructions_and_secrets(&d);
    let project = d.home.project.clone();
    let p = |rel: &str| project.join(rel).display().to_string();
    d.api
        .push(Reply::anthropic_tools(
            "Checking the code and the instructions.",
            &[
                (
                    "shell",
                    json!({"command": format!("cat {}", p("src/lib.rs"))}),
                ),
                ("read_file", json!({"path": p("CLAUDE.md")})),
                ("shell", json!({"command": format!("cat {}", p(".env"))})),
                ("read_file", json!({"path": p("keys/id_rsa")})),
                (
                    "shell",
                    json!({"command": format!("grep -r CANARY {}", project.display())}),
                ),
                (
                    "write_file",
                    json!({"path": p("CLAUDE.md"), "content": "Changed.\n"}),
                ),
            ],
        ))
        .push(Reply::anthropic_text("Nothing to change."));
    d.tool("dream-run")
        .args(["--unlocked", "-n"])
        .code(0)
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "completed", "{doc}");
            assert_eq!(doc["run"]["files_touched"], json!([]), "{doc}");
        })
        .stderr_any("the run's notes are not what this test checks")
        .run();
    let requests = d.api.requests();
    let results = tool_results(&requests[1]);
    let errors: Vec<bool> = results.iter().map(|(_, is_error)| *is_error).collect();
    assert_eq!(
        errors,
        [false, false, true, true, false, true],
        "{results:?}"
    );
    assert!(results[0].0.contains("blue-green"), "{results:?}");
    assert!(results[1].0.contains("make test"), "{results:?}");
    assert!(
        results[2]
            .0
            .contains("files that may hold secrets are never read"),
        "{results:?}"
    );
    assert!(
        results[3]
            .0
            .contains("files that may hold secrets are never read"),
        "{results:?}"
    );
    for request in &requests {
        assert!(
            !request.body.to_string().contains(PROJECT_CANARY),
            "a secret reached the model"
        );
    }
    assert_eq!(
        std::fs::read_to_string(project.join("CLAUDE.md")).unwrap(),
        "Run the tests with `make test`.\n"
    );
}
