//! dream-run when things go wrong midway: SIGTERM and kill -9 during an apply and during a run,
//! limits inside one turn, records that say only what happened. Real processes, real signals,
//! files checked on disk.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::dream::{
    more_problems, rolled_back, script_full_consolidation, tool_results, Dream, LONG_RUN,
};
use crate::support::fake_api::Reply;
use crate::support::run::Running;
use crate::support::{bin_path, mode, mtime, session_id, LiveProcess, Run};

/// What `dream-run` says of the `path` it left out of a run, and `why`.
fn left_out(path: &Path, why: &str) -> String {
    format!(
        "dream-run: session not readable, left out: {}: {why}\n",
        path.display()
    )
}

impl Dream {
    /// A proposal that creates `files` topic files and rewrites MEMORY.md, made by one
    /// proposing run (the lock held meanwhile by a live process, released afterwards).
    fn propose_many(&self, files: usize) -> String {
        let index = "# Memory\n- [Many](many/0000.md): many notes\n";
        // The new index links only the first new file (the others, stale.md and
        // topics/build.md are orphans), the 40 lines of each body repeat in every file, and
        // no file has frontmatter.
        let warning = format!(
            "orphan_file 0 -> {}, duplicate_entry 0 -> {}, front_matter 2 -> {}",
            files + 1,
            40 * files - 1,
            files + 2
        );
        self.propose_with(
            &["MEMORY.md"],
            Dream::many_writes(files, &[("MEMORY.md", index)]),
            &warning,
        )
    }

    /// `apply` killed with SIGKILL midway (its journal written, some files changed).
    pub(crate) fn apply_killed_midway(&self) {
        let apply = self.apply_stopped_midway(
            self.tool("dream-run")
                .arg("apply")
                .killed_by(libc::SIGKILL)
                .stdout_empty()
                .stderr_empty(),
        );
        apply.signal(libc::SIGKILL);
        apply.finish();
    }

    /// `apply` (a `dream-run apply` the caller describes: how it ends is up to the test),
    /// started and stopped (SIGSTOP) once its journal exists and before it finished: the
    /// memory dir is then between the two states.
    fn apply_stopped_midway<'a>(&self, apply: Run<'a>) -> Running<'a> {
        let apply = apply.stdin_from(Stdio::null()).timeout(LONG_RUN).spawn();
        let journal = self.journal();
        let first = self.mem().join("many/0000.md");
        crate::support::wait::busy_until("the apply's first files", || {
            journal.exists() && first.exists()
        });
        apply.signal(libc::SIGSTOP);
        assert!(
            journal.exists(),
            "the apply finished before it could be stopped: make it longer"
        );
        apply
    }
}

#[test]
fn sigterm_in_the_middle_of_an_apply_rolls_everything_back() {
    let d = Dream::new();
    let id = d.propose_many(500);
    let before = d.md_tree();
    let lock_before = d.lock_ms();
    let apply = d.apply_stopped_midway(
        d.tool("dream-run")
            .arg("apply")
            .code(143)
            .stdout_json(|doc| {
                assert_eq!(doc["applied"], false, "{doc}");
                assert_eq!(doc["reason"], "interrupted");
                assert_eq!(doc["error"]["kind"], "interrupted");
            })
            .stderr_is("dream-run: not applied: interrupted by SIGTERM\n"),
    );
    apply.signal(libc::SIGTERM);
    apply.signal(libc::SIGCONT);
    apply.finish();
    assert_eq!(d.md_tree(), before, "the memory dir is byte-identical");
    assert_eq!(d.lock_ms(), lock_before, "the lock's time was rolled back");
    assert_eq!(
        std::fs::read(d.home.lock_file()).unwrap(),
        b"",
        "and it is free"
    );
    assert!(!d.journal().exists());
    assert_eq!(d.task(&id)["status"], "proposed");
    // Still applicable, and then applied whole.
    d.tool("dream-run")
        .arg("apply")
        .success()
        .stdout_json(|doc| assert_eq!(doc["files"].as_array().unwrap().len(), 501))
        .stderr_empty()
        .run();
    assert_eq!(d.task(&id)["status"], "completed");
    assert!(d.read("many/0499.md").starts_with("# 499\n"));
}

/// A journal cut short by hand after an apply was killed midway cannot be rolled back: it is
/// moved aside, and the user is told which memory files are no longer as their copies and
/// where those copies are, to put back by hand.
#[test]
fn a_truncated_journal_after_a_killed_apply_says_what_to_put_back_by_hand() {
    let d = Dream::new();
    d.propose_many(500);
    let index_before = d.read("MEMORY.md");
    d.apply_killed_midway();
    assert_ne!(
        d.read("MEMORY.md"),
        index_before,
        "the apply wrote the index first"
    );
    let jdir = d.journal();
    let intent = jdir.join("intent.json");
    let len = std::fs::metadata(&intent).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&intent)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let out = d
        .tool("dream-run")
        .arg("recover")
        .success()
        .stdout_json(|doc| {
            let files = &doc["journal_corrupt"]["files"];
            assert_eq!(files.as_array().map(Vec::len), Some(1), "{doc}");
            assert_eq!(
                files[0]["path"],
                d.mem().join("MEMORY.md").to_string_lossy().as_ref(),
                "{doc}"
            );
            assert_eq!(files[0]["memory_now"], "differs", "{doc}");
        })
        .stderr_any("checked below, with the folder it names")
        .run();
    let doc = out.json();
    let corrupt = &doc["journal_corrupt"];
    let moved = corrupt["moved_to"].as_str().unwrap();
    let first = out.stderr.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!(
            "dream-run: the journal {} could not be used ({}): moved aside to {moved}, its copies \
             kept; the memory dir is as it is now: 1 memory file is no longer as its copy \
             (journal_corrupt.files names them); copy back by hand from {moved}/files what \
             should be undone",
            jdir.display(),
            corrupt["error"].as_str().unwrap()
        )
    );
    // The copy named is the index from before the apply.
    assert_eq!(
        std::fs::read_to_string(corrupt["files"][0]["backup"].as_str().unwrap()).unwrap(),
        index_before
    );
}

#[test]
fn kill_9_in_the_middle_of_an_apply_is_rolled_back_by_the_next_command() {
    for next in ["recover", "apply", "undo", "discard", "acquire"] {
        let d = Dream::new();
        let id = d.propose_many(500);
        let before = d.md_tree();
        let lock_before = d.lock_ms();
        d.apply_killed_midway();
        assert!(
            d.journal().exists(),
            "{next}: the journal stays after kill -9"
        );
        assert_ne!(
            d.md_tree(),
            before,
            "{next}: the memory dir is half applied"
        );
        let intent: Value =
            serde_json::from_slice(&std::fs::read(d.journal().join("intent.json")).unwrap())
                .unwrap();
        let interrupted = format!(
            "dream-run: an interrupted apply of task {id} (started {}) stopped partway through \
             its 501 files: `dream-run recover` (or the next apply, undo, discard or run) rolls \
             it back\n",
            intent["started_at"].as_str().unwrap()
        );

        // Read-only commands report it and leave it.
        for read_only in [&["tasks"][..], &["show", &id][..], &["pending"][..]] {
            d.tool("dream-run")
                .args(read_only)
                .success()
                .stdout_json(|doc| {
                    assert_eq!(
                        doc["interrupted"]["command"], "apply",
                        "{read_only:?}: {doc}"
                    );
                    assert_eq!(doc["interrupted"]["task_id"], id.as_str());
                })
                .stderr_is(interrupted.as_str())
                .run();
        }
        // The check finds the half-applied memory's problems and says where they come from.
        d.tool("dream-run")
            .arg("check")
            .code_any("the problems depend on where the apply stopped")
            .stdout_json(|doc| assert!(doc["counts"].is_object(), "{doc}"))
            .stderr_with(|text| {
                assert!(text.starts_with(interrupted.as_str()), "{text}");
            })
            .run();
        d.tool("dream-run")
            .args(["apply", "--dry-run"])
            .success()
            .stdout_json(|doc| assert_eq!(doc["interrupted"]["command"], "apply"))
            .stderr_is(interrupted.as_str())
            .run();
        assert!(d.journal().exists(), "read-only commands leave it");

        // Nothing is completed yet, so undo has nothing of its own to do (exit 1).
        let code = if next == "undo" { 1 } else { 0 };
        // A new consolidation's acquire puts it back before handing the lock on.
        let recovered_of = |doc: &Value| {
            if next == "acquire" {
                doc["lock"]["recovered"]["recovered"].clone()
            } else {
                doc["recovered"].clone()
            }
        };
        let holder = LiveProcess::start();
        let command = match next {
            "acquire" => {
                d.touch_sessions();
                let gate = d
                    .tool("dream-gate")
                    .args(["--min-hours", "0", "--min-sessions", "0"])
                    .success()
                    .stdout_json(|doc| assert_eq!(doc["gate"]["due"], true))
                    .stderr_empty()
                    .run();
                d.tool("dream-lock")
                    .args(["acquire", "--pid", &holder.pid().to_string()])
                    .stdin(gate.stdout)
            }
            _ => d.tool("dream-run").arg(next),
        };
        let out = command
            .code(code)
            .stdout_json(|doc| assert_eq!(recovered_of(doc)["command"], "apply", "{next}: {doc}"))
            .stderr_contains("rolled back the interrupted apply")
            .run();
        assert!(!d.journal().exists(), "{next}");
        let doc = out.json();
        // It says so first, naming as many files as it put back.
        let mut said = rolled_back("apply", &id, &recovered_of(&doc));
        if next == "acquire" {
            said = said.replacen("dream-run:", "dream-lock:", 1);
        }
        if next == "undo" {
            said.push_str(
                "dream-run: nothing to undo: no completed run, and no failed, aborted or killed \
                 run whose changes were kept\n",
            );
        }
        assert_eq!(out.stderr, said, "{next}");
        match next {
            "recover" => {
                assert_eq!(doc["recovered"]["task_id"], id.as_str(), "{doc}");
                assert_eq!(doc["recovered"]["lock_rolled_back"], true, "{doc}");
                assert_eq!(d.md_tree(), before, "{next}");
                assert_eq!(d.lock_ms(), lock_before, "{next}: the time is given back");
                assert_eq!(d.task(&id)["status"], "proposed");
            }
            "apply" => {
                assert_eq!(doc["recovered"]["command"], "apply", "{doc}");
                assert_eq!(doc["applied"], true, "then applied whole: {doc}");
                assert_eq!(d.task(&id)["status"], "completed");
                assert!(d.read("many/0499.md").starts_with("# 499\n"));
            }
            "undo" => {
                assert_eq!(doc["reason"], "nothing_to_undo", "{doc}");
                assert_eq!(doc["recovered"]["command"], "apply", "{doc}");
                assert_eq!(d.md_tree(), before, "{next}");
                assert_eq!(d.task(&id)["status"], "proposed");
            }
            "discard" => {
                assert_eq!(doc["recovered"]["command"], "apply", "{doc}");
                assert_eq!(doc["discarded"], true);
                assert_eq!(d.md_tree(), before, "{next}");
            }
            _ => {
                assert_eq!(doc["lock"]["acquired"], true, "{doc}");
                assert_eq!(doc["lock"]["prior_mtime"], lock_before, "{doc}");
                assert_eq!(d.md_tree(), before, "{next}");
            }
        }
    }
}

#[test]
fn a_killed_run_is_rolled_back_by_the_next_command_and_postpones_no_dream() {
    let d = Dream::new();
    let before = d.md_tree();
    let prior = d.lock_ms();
    d.run_killed_midway(
        &[
            ("read_file", json!({"path": "MEMORY.md"})),
            ("read_file", json!({"path": "stale.md"})),
            (
                "write_file",
                json!({"path": "MEMORY.md", "content": "half\n"}),
            ),
            ("delete_file", json!({"path": "stale.md"})),
            ("write_file", json!({"path": "new/n.md", "content": "n\n"})),
        ],
        &[],
    );
    assert_eq!(d.read("MEMORY.md"), "half\n");
    assert_ne!(d.lock_ms(), prior, "the acquire wrote its time");

    // The crash postpones nothing: the gate sees the time from before the killed run.
    d.gate_is_due();
    // Read-only: reported, left alone, and the user told what the killed run left and how
    // to put it back.
    let id = std::fs::read_dir(d.home.state_dir().join("tasks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find_map(|p| Some(p.file_stem()?.to_str()?.to_string()))
        .expect("the killed run's task record");
    let orphan_said = format!(
        "dream-run: task {id} died without an end (killed) while it changed the memory dir: \
         `dream-run recover` rolls it back (so does the next run, apply, undo or discard)\n"
    );
    d.tool("dream-run")
        .arg("tasks")
        .success()
        .stdout_json(|doc| {
            let task = &doc["tasks"][0];
            assert_eq!(task["task_id"], id.as_str(), "{task}");
            assert_eq!(task["status"], "failed", "{task}");
            assert_eq!(task["error"], "orphaned");
        })
        .stderr_is(orphan_said.as_str())
        .run();
    // So does `recover --dry-run`, which changes nothing either.
    d.tool("dream-run")
        .args(["recover", "--dry-run"])
        .success()
        .stdout_json(|doc| assert_eq!(doc, &json!({"recovered": null, "dry_run": true})))
        .stderr_is(orphan_said.as_str())
        .run();
    assert_eq!(d.read("MEMORY.md"), "half\n");

    // The next command that changes state rolls it back, and the lock's time with it.
    let abs = |rel: &str| d.mem().join(rel).to_string_lossy().into_owned();
    d.tool("dream-run")
        .arg("recover")
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["recovered"], Value::Null, "{doc}");
            assert_eq!(
                doc["orphans"],
                json!([{
                    "task_id": id,
                    "started_at": d.task(&id)["started_at"],
                    "outcome": "rolled_back",
                    "files": [abs("MEMORY.md"), abs("new/n.md"), abs("stale.md")],
                }]),
                "{doc}"
            );
        })
        .stderr_is(format!(
            "dream-run: task {id} died without an end: rolled back, 3 files put back\n"
        ))
        .run();
    assert_eq!(d.md_tree(), before);
    assert!(!d.mem().join("new").exists(), "the folder it made is gone");
    assert_eq!(d.lock_ms(), prior, "the lock's time is back");
    let record = d.task(&id);
    assert_eq!(record["status"], "failed");
    assert_eq!(record["error"], "orphaned");
    assert_eq!(record["snapshot"], Value::Null);
    assert!(record["rolled_back_at"].is_string(), "{record}");
    // Once: the next command finds nothing more to do.
    d.recovers_nothing();
    d.tool("dream-run")
        .args(["undo", &id])
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["reason"], "no_snapshot", "{doc}"))
        .stderr_is(format!(
            "dream-run: task {id} changed nothing, was restored already, or its snapshot was pruned\n"
        ))
        .run();
}

/// A killed run whose file someone edited since is left alone, named, and undoable.
#[test]
fn a_killed_run_whose_file_changed_since_is_kept_and_named() {
    let d = Dream::new();
    d.run_killed_midway(
        &[
            ("read_file", json!({"path": "MEMORY.md"})),
            (
                "write_file",
                json!({"path": "MEMORY.md", "content": "half\n"}),
            ),
            ("write_file", json!({"path": "new/n.md", "content": "n\n"})),
        ],
        &[],
    );
    // A session writes a note into the index meanwhile.
    std::fs::write(d.mem().join("MEMORY.md"), "half\n- a note of the user's\n").unwrap();
    let after = d.md_tree();
    let out = d
        .tool("dream-run")
        .arg("recover")
        .success()
        .stdout_json(|doc| {
            let orphan = &doc["orphans"][0];
            assert_eq!(orphan["outcome"], "orphan_kept", "{doc}");
            assert_eq!(
                orphan["files"],
                json!([d.mem().join("MEMORY.md").to_string_lossy()])
            );
            assert_eq!(orphan["why"], "changed since the run wrote them");
        })
        .stderr_with(|text| {
            assert!(
                text.starts_with("dream-run: task ")
                    && text.contains("died without an end and was left alone (changed since the run wrote them): `dream-run undo ")
                    && text.ends_with("` restores its snapshot\n"),
                "{text:?}"
            );
        })
        .run();
    assert_eq!(d.md_tree(), after, "nothing of the user's is lost");
    let id = out.json()["orphans"][0]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let record = d.task(&id);
    assert_eq!(record["status"], "failed");
    assert!(record["snapshot"].is_string(), "{record}");
    // undo stays the way back (and still refuses to lose the user's note).
    d.tool("dream-run")
        .args(["undo", "--dry-run", &id])
        .success()
        .stdout_json(|doc| assert_eq!(doc["task_id"], id.as_str()))
        .stderr_empty()
        .run();
    d.tool("dream-run")
        .args(["undo", &id])
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["reason"], "changed_since", "{doc}"))
        .stderr_any("names the changed file")
        .run();
}

#[test]
fn a_killed_run_leaves_no_shell_command_behind() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let marker = format!("slow-{}.bin", std::process::id());
    std::fs::File::create(d.mem().join(&marker))
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    d.api.push(Reply::anthropic_tools(
        "Reading something slow.",
        &[(
            "shell",
            json!({"command": format!("head -c 64G {marker} | wc -l")}),
        )],
    ));
    let run = d
        .dream_run(&envelope, &["--shell-timeout", "5m"])
        .timeout(LONG_RUN)
        .killed_by(libc::SIGKILL)
        .stdout_empty()
        .stderr_empty()
        .spawn();
    crate::support::wait::busy_until("the shell command", || {
        !processes_naming(&marker).is_empty()
    });
    run.signal(libc::SIGKILL);
    run.finish();
    crate::support::wait::busy_until("the shell command to die with the run", || {
        processes_naming(&marker).is_empty()
    });
}

/// PIDs of live processes whose command line holds `needle`.
fn processes_naming(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(needle) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn the_deadline_holds_inside_a_turn_of_a_thousand_calls() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    // Each call reads 1 GiB of zeros: a thousand of them take far longer than the deadline.
    std::fs::File::create(d.mem().join("zeros.bin"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let calls: Vec<(&str, Value)> = (0..1000)
        .map(|_| ("shell", json!({"command": "head -c 1G zeros.bin | wc -l"})))
        .collect();
    d.api.push(Reply::anthropic_tools("Reading a lot.", &calls));
    let before = d.md_tree();
    d.dream_run(
        &envelope,
        &[
            "--deadline",
            "5s",
            "--max-calls-per-turn",
            "1000",
            "--events",
        ],
    )
    .code(1)
    .stdout_json(|doc| {
        let run = &doc["run"];
        assert_eq!(run["status"], "failed");
        assert_eq!(run["error"], "deadline");
    })
    .stderr_with(|text| {
        // The events (one JSON line each: the turn, a tool line per call run, the end), then
        // the one line that says why.
        let (events, last) = text
            .strip_suffix("dream-run: run failed: the run passed its --deadline of 5s\n")
            .map(|events| (events, true))
            .unwrap_or((text, false));
        assert!(last, "the reason is the last line");
        let events: Vec<Value> = events
            .lines()
            .map(|line| serde_json::from_str(line).expect("an event line"))
            .collect();
        assert_eq!(events[0]["type"], "turn", "{text}");
        assert_eq!(events[0]["tool_use_count"], 1000);
        assert_eq!(
            events.last().unwrap(),
            &json!({"type": "done", "status": "failed", "files_touched": []})
        );
        let ran = events[1..events.len() - 1]
            .iter()
            .inspect(|e| assert_eq!(e["type"], "tool", "{e}"))
            .count();
        assert!(
            ran < 1000,
            "the deadline stopped the turn after {ran} calls"
        );
    })
    .run();
    assert_eq!(d.api.requests().len(), 1, "no second request");
    assert_eq!(d.md_tree(), before);
}

#[test]
fn the_file_limit_and_the_turn_output_cap_are_tool_errors() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let calls: Vec<(&str, Value)> = (0..5)
        .map(|n| {
            (
                "write_file",
                json!({"path": format!("f{n}.md"), "content": "x\n"}),
            )
        })
        .collect();
    std::fs::write(d.mem().join("big.txt"), "y".repeat(60 * 1024) + "\n").unwrap();
    let reads: Vec<(&str, Value)> = (0..6)
        .map(|_| ("shell", json!({"command": "cat big.txt"})))
        .collect();
    d.api
        .push(Reply::anthropic_tools("Writing.", &calls))
        .push(Reply::anthropic_tools("Reading.", &reads))
        .push(Reply::anthropic_text("Done."));
    d.dream_run(&envelope, &["--max-files", "3"])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "completed", "{doc}");
            assert_eq!(doc["run"]["files_touched"].as_array().unwrap().len(), 3);
        })
        .stderr_is(more_problems("orphan_file 0 -> 3, front_matter 2 -> 5"))
        .run();
    let requests = d.api.requests();
    let writes = tool_results(&requests[1]);
    assert!(writes[..3].iter().all(|(_, e)| !e));
    for (text, is_error) in &writes[3..] {
        assert!(*is_error && text.contains("--max-files"), "{text}");
    }
    assert!(!d.mem().join("f3.md").exists());
    let reads = tool_results(&requests[2]);
    let total: usize = reads.iter().map(|(t, _)| t.len()).sum();
    assert!(
        total <= 256 * 1024 + 1024,
        "{total} bytes returned in one turn"
    );
    assert!(reads[4].0.contains("cap of 256 KiB"), "{}", reads[4].0);
    assert!(
        reads[5].1 && reads[5].0.starts_with("not run"),
        "{}",
        reads[5].0
    );
}

#[test]
fn a_shell_timeout_never_outlasts_the_deadline() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    std::fs::File::create(d.mem().join("zeros.bin"))
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    d.api.push(Reply::anthropic_tools(
        "Reading.",
        &[("shell", json!({"command": "head -c 64G zeros.bin | wc -l"}))],
    ));
    // The command would run for minutes and its own timeout is 10 m; the run's deadline is
    // 3 s: the command is killed when the deadline comes.
    d.dream_run(&envelope, &["--deadline", "3s", "--shell-timeout", "10m"])
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["run"]["error"], "deadline"))
        .stderr_is("dream-run: run failed: the run passed its --deadline of 3s\n")
        .run();
}

#[test]
fn notify_transcript_never_corrupts_a_transcript() {
    let d = Dream::new();
    let live = d
        .home
        .transcripts_dir()
        .join(format!("{}.jsonl", session_id(9)));
    let first = json!({"type": "user", "uuid": "u-1", "sessionId": session_id(9), "cwd": "/p",
                       "message": {"role": "user", "content": "hi"}});
    std::fs::write(
        &live,
        format!("{first}\n{{\"type\":\"assistant\",\"uuid\":\"a-"),
    )
    .unwrap();
    let partial = std::fs::read(&live).unwrap();

    // Not a transcript: refused before the model is asked.
    let other = d.home.root.join("notes.jsonl");
    std::fs::write(&other, "{\"a\":1}\n").unwrap();
    let wrong_session = d
        .home
        .transcripts_dir()
        .join(format!("{}.jsonl", session_id(8)));
    std::fs::write(&wrong_session, format!("{first}\n")).unwrap();
    for (bad, why) in [
        (
            &other,
            " is not a Claude Code transcript (<session id>.jsonl)".to_string(),
        ),
        (
            &wrong_session,
            format!(
                ": its records belong to session {}, not to the session its name says",
                session_id(9)
            ),
        ),
    ] {
        let holder = LiveProcess::start();
        let envelope = d.acquired_envelope(&holder);
        d.dream_run(&envelope, &["--notify-transcript", bad.to_str().unwrap()])
            .code(2)
            .stdout_json(|doc| assert_eq!(doc["error"]["reason"], "not_a_transcript"))
            .stderr_is(format!(
                "dream-run: --notify-transcript {}{why}\n",
                bad.display()
            ))
            .run();
        assert!(d.api.requests().is_empty());
    }

    // A live writer mid-record: nothing is appended after its half line.
    d.touch_sessions();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    script_full_consolidation(&d);
    d.dream_run(&envelope, &["--notify-transcript", live.to_str().unwrap()])
        .success()
        .stdout_json(|doc| {
            let run = &doc["run"];
            assert_eq!(run["status"], "completed");
            assert!(
                run["warnings"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("notify_transcript_skipped")),
                "{run}"
            );
        })
        .stderr_is(format!(
            "dream-run: not appended to {}: its last line stayed incomplete (a writer is \
             mid-record); the memory_saved record was skipped\n",
            live.display()
        ))
        .run();
    assert_eq!(std::fs::read(&live).unwrap(), partial, "not touched");
    drop(holder);

    // Once the line is whole, the record follows it, chained to it, with its session.
    std::fs::write(
        &live,
        format!(
            "{first}\n{}\n",
            json!({"type": "assistant", "uuid": "a-2", "sessionId": session_id(9), "cwd": "/p",
                   "message": {"role": "assistant", "content": "ok"}})
        ),
    )
    .unwrap();
    d.touch_sessions();
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
    d.dream_run(&envelope, &["--notify-transcript", live.to_str().unwrap()])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "completed", "{doc}");
            assert_eq!(doc["run"]["warnings"], json!(["health_worse"]), "{doc}");
        })
        .stderr_is(more_problems("orphan_file 0 -> 1, front_matter 2 -> 3"))
        .run();
    let text = std::fs::read_to_string(&live).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["subtype"], "memory_saved");
    assert_eq!(last["parentUuid"], "a-2");
    assert_eq!(last["sessionId"], session_id(9));
    assert_eq!(last["cwd"], "/p");
    drop(holder);
}

#[test]
fn an_envelope_cannot_point_the_run_at_another_memory_dir() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope: Value = serde_json::from_str(&d.acquired_envelope(&holder)).unwrap();
    let elsewhere = d.home.root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    // What each field is checked against, and how to change that.
    let mismatch = |field: &str, value: &Path| {
        let (own, how) = match field {
            "memory_dir" => (d.mem(), "--memory-dir"),
            "transcripts_dir" => (d.home.transcripts_dir(), "--transcripts-dir"),
            _ => (d.home.state_dir(), "XDG_STATE_HOME"),
        };
        format!(
            "dream-run: the envelope's project.{field} {} is not this project's {} (give every \
             stage the same {how}, or let the environment decide)\n",
            value.display(),
            own.display()
        )
    };
    for field in ["memory_dir", "transcripts_dir", "state_dir"] {
        let mut forged = envelope.clone();
        forged["project"][field] = json!(elsewhere.to_str().unwrap());
        d.dream_run(&forged.to_string(), &[])
            .code(2)
            .stdout_json(|doc| {
                let error = &doc["error"];
                assert_eq!(error["kind"], "bad_input", "{field}");
                assert_eq!(error["reason"], "project_mismatch", "{field}");
            })
            .stderr_is(mismatch(field, &elsewhere))
            .run();
        assert!(d.api.requests().is_empty(), "{field}");
    }
    assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
    // The same override given to every stage is accepted.
    let other_mem = d.home.root.join("other-memory");
    std::fs::create_dir_all(&other_mem).unwrap();
    let gate = d
        .tool("dream-gate")
        .args([
            "--min-hours",
            "0",
            "--min-sessions",
            "0",
            "--scan-interval",
            "0",
        ])
        .arg("--memory-dir")
        .arg(&other_mem)
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["gate"]["due"], true, "{doc}");
            assert_eq!(doc["project"]["memory_dir"], other_mem.to_str().unwrap());
        })
        .stderr_empty()
        .run();
    let acquire = d
        .tool("dream-lock")
        .args([
            "acquire",
            "--pid",
            &holder.pid().to_string(),
            "--memory-dir",
        ])
        .arg(&other_mem)
        .stdin(gate.stdout)
        .success()
        .stdout_json(|doc| assert_eq!(doc["lock"]["acquired"], true, "{doc}"))
        .stderr_empty()
        .run();
    // dream-run without the flag refuses.
    d.dream_run(&acquire.stdout, &["--dry-run"])
        .code(2)
        .stdout_json(|doc| assert_eq!(doc["error"]["reason"], "project_mismatch", "{doc}"))
        .stderr_is(mismatch("memory_dir", &other_mem))
        .run();
    d.api.push(Reply::anthropic_text("Nothing."));
    d.dream_run(
        &acquire.stdout,
        &["--memory-dir", other_mem.to_str().unwrap()],
    )
    .success()
    .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
    .stderr_empty()
    .run();
}

#[test]
fn landlock_never_grants_the_root_or_a_parent_of_home() {
    let d = Dream::new();
    d.api.push(Reply::anthropic_text("Nothing."));
    // A session of that project, so there is something to review.
    let transcripts = d
        .home
        .config
        .join("projects")
        .join(crate::support::slug_of(&d.home.root));
    std::fs::create_dir_all(&transcripts).unwrap();
    std::fs::write(
        transcripts.join(format!("{}.jsonl", session_id(1))),
        format!("{}\n", json!({"type": "user", "sessionId": session_id(1), "message": {"role": "user", "content": "hi"}})),
    )
    .unwrap();
    // The home directory's parent as the project, read with --read-project.
    d.tool("dream-run")
        .args(["-n", "--unlocked", "--read-project", "--cwd"])
        .arg(&d.home.root)
        .code(2)
        .stdout_json(|doc| {
            assert!(
                doc["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("the home directory or holds it"),
                "{doc}"
            );
        })
        .stderr_is(format!(
            "dream-run: refusing to make {} readable by the agent: it is /, the home directory \
             or holds it\n",
            d.home.root.display()
        ))
        .run();
    assert!(d.api.requests().is_empty());
}

/// The apply-mode run and the proposal it would have made, with the model naming the real
/// memory dir's paths.
#[test]
fn a_proposal_sees_the_real_memory_dir_and_is_what_an_apply_would_do() {
    let mut results = Vec::new();
    for mode in ["apply", "propose"] {
        let d = Dream::new();
        let mem = d.mem();
        let real = |rel: &str| mem.join(rel).to_string_lossy().into_owned();
        d.api
            .push(Reply::anthropic_tools(
                "Using full paths.",
                &[
                    ("read_file", json!({"path": real("MEMORY.md")})),
                    ("read_file", json!({"path": real("stale.md")})),
                    ("shell", json!({"command": format!("grep -c Build {}", real("MEMORY.md"))})),
                    ("write_file", json!({"path": real("topics/deploy.md"), "content": "blue-green\n"})),
                    ("edit_file", json!({"path": real("MEMORY.md"), "old_string": "- [Stale](stale.md): old notes\n", "new_string": "- [Deploy](topics/deploy.md): deploys\n"})),
                    ("delete_file", json!({"path": real("stale.md")})),
                ],
            ))
            .push(Reply::anthropic_text("Done."));
        let holder = LiveProcess::start();
        let envelope = d.acquired_envelope(&holder);
        let flags: &[&str] = if mode == "propose" {
            &["--propose"]
        } else {
            &[]
        };
        let status = if mode == "propose" {
            "proposed"
        } else {
            "completed"
        };
        let out = d
            .dream_run(&envelope, flags)
            .success()
            .stdout_json(|doc| assert_eq!(doc["run"]["status"], status, "{mode}: {doc}"))
            .stderr_empty()
            .run();
        let run = out.json()["run"].clone();
        let tool_out = tool_results(&d.api.requests()[1]);
        for (text, is_error) in &tool_out {
            assert!(!is_error, "{mode}: {text}");
            assert!(
                !text.contains("proposals"),
                "{mode}: the staging path shows: {text}"
            );
        }
        assert_eq!(tool_out[2].0.trim(), "1", "{mode}");
        // Paths relative to each home's memory dir.
        let prefix = format!("{}/", d.mem().display());
        let diff = json!({
            "created": run["diff"]["created"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().trim_start_matches(&prefix).to_string()).collect::<Vec<_>>(),
            "modified": run["diff"]["modified"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().trim_start_matches(&prefix).to_string()).collect::<Vec<_>>(),
            "deleted": run["diff"]["deleted"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().trim_start_matches(&prefix).to_string()).collect::<Vec<_>>(),
        });
        let tool_out: Vec<(String, bool)> = tool_out
            .into_iter()
            .map(|(text, e)| (text.replace(&prefix, "<mem>/"), e))
            .collect();
        let staged = match mode {
            "propose" => d
                .home
                .state_dir()
                .join("proposals")
                .join(run["task_id"].as_str().unwrap())
                .join("memory"),
            _ => d.mem(),
        };
        let index = std::fs::read_to_string(staged.join("MEMORY.md")).unwrap();
        results.push((diff, index, tool_out));
    }
    assert_eq!(results[0].0, results[1].0, "the same files change");
    assert_eq!(results[0].1, results[1].1, "the same content");
    assert_eq!(
        results[0].2, results[1].2,
        "the model saw the same tool results"
    );
}

#[test]
fn a_run_that_changes_nothing_says_so_and_announces_nothing() {
    // An identical rewrite (the model reads and writes the same bytes).
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let index = d.read("MEMORY.md");
    d.api
        .push(Reply::anthropic_tools(
            "Rewriting.",
            &[
                ("read_file", json!({"path": "MEMORY.md"})),
                ("write_file", json!({"path": "MEMORY.md", "content": index})),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    let transcript = d
        .home
        .transcripts_dir()
        .join(format!("{}.jsonl", session_id(1)));
    let transcript_before = std::fs::read(&transcript).unwrap();
    let mtime_before = mtime(&d.mem().join("MEMORY.md"));
    let out = d
        .dream_run(
            &envelope,
            &["--notify-transcript", transcript.to_str().unwrap()],
        )
        .success()
        .stdout_json(|doc| {
            let run = &doc["run"];
            assert_eq!(run["status"], "completed");
            assert_eq!(run["files_touched"], json!([]));
        })
        .stderr_empty()
        .run();
    let run = &out.json()["run"];
    assert_eq!(
        mtime(&d.mem().join("MEMORY.md")),
        mtime_before,
        "not even rewritten"
    );
    assert!(!d.home.state_dir().join("pending-updates.jsonl").exists());
    assert_eq!(std::fs::read(&transcript).unwrap(), transcript_before);
    let record = d.task(run["task_id"].as_str().unwrap());
    assert_eq!(record["files_touched"], json!([]));
    assert!(record["snapshot"].is_null(), "nothing to undo");
    // Released as completed, the run was a consolidation (it looked and found nothing).
    drop(holder);

    // An empty proposal is not kept.
    d.touch_sessions();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let lock_before = d.lock_ms();
    d.api
        .push(Reply::anthropic_tools(
            "Looking.",
            &[("read_file", json!({"path": "MEMORY.md"}))],
        ))
        .push(Reply::anthropic_text("Nothing to change."));
    let out = d
        .dream_run(&envelope, &["--propose"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "no_changes"))
        .stderr_empty()
        .run();
    let id = out.json()["run"]["task_id"].as_str().unwrap().to_string();
    assert!(!d.home.state_dir().join("proposals").join(&id).exists());
    d.tool("dream-run")
        .arg("show")
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["reason"], "no_proposal"))
        .stderr_is("dream-run: no memory proposal: run dream-run --propose first\n")
        .run();
    d.release(&out.stdout, "no_changes");
    assert!(d.lock_ms() < lock_before, "rolled back, not moved");
    drop(holder);

    // And under exec, the same.
    d.touch_sessions();
    d.api.push(Reply::anthropic_text("Nothing to change."));
    let lock_before = d.lock_ms();
    let gate = d.gate_now();
    d.tool("dream-lock")
        .args([
            "exec",
            "--",
            bin_path("dream-run").to_str().unwrap(),
            "--propose",
        ])
        .stdin(gate)
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "no_changes"))
        .stderr_is(
            "dream-lock: rolled the lock back (no_changes): the consolidation time is as it was\n",
        )
        .run();
    assert_eq!(d.lock_ms(), lock_before, "exec rolled back too");
}

#[test]
fn undo_withdraws_the_pending_line_and_marks_the_task_undone() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    script_full_consolidation(&d);
    let out = d
        .dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run();
    let id = out.json()["run"]["task_id"].as_str().unwrap().to_string();
    d.release(&out.stdout, "completed");
    drop(holder);
    d.tool("dream-run")
        .arg("pending")
        .success()
        .stdout_json(|doc| assert_eq!(doc["updates"][0]["task_id"], id.as_str()))
        .stderr_empty()
        .run();
    d.tool("dream-run")
        .arg("undo")
        .success()
        .stdout_json(|doc| assert_eq!(doc["pending_withdrawn"], true))
        .stderr_empty()
        .run();
    assert_eq!(d.task(&id)["status"], "undone");
    d.tool("dream-run")
        .arg("pending")
        .success()
        .stdout_json(|doc| assert_eq!(doc["updates"], json!([])))
        .stderr_empty()
        .run();
}

#[test]
fn no_sessions_or_no_readable_session_asks_nothing_and_rolls_the_lock_back() {
    for case in ["none", "unreadable"] {
        let d = Dream::new();
        let holder = LiveProcess::start();
        let mut envelope: Value = serde_json::from_str(&d.acquired_envelope(&holder)).unwrap();
        let mut said = String::new();
        match case {
            "none" => {
                envelope["gate"]["sessions"] = json!([]);
                said.push_str(
                    "dream-run: run skipped: no sessions to review; nothing was asked of the \
                     model\n",
                );
            }
            _ => {
                for n in 1..=5 {
                    let path = d
                        .home
                        .transcripts_dir()
                        .join(format!("{}.jsonl", session_id(n)));
                    std::fs::remove_file(&path).unwrap();
                    if n % 2 == 0 {
                        std::fs::create_dir(&path).unwrap();
                        said.push_str(&left_out(&path, "a directory"));
                    } else {
                        said.push_str(&left_out(&path, "No such file or directory (os error 2)"));
                    }
                }
                said.push_str(
                    "dream-run: run skipped: none of the 5 listed sessions could be read; \
                     nothing was asked of the model\n",
                );
            }
        }
        let lock_before = d.lock_ms();
        let prior = envelope["lock"]["prior_mtime"].as_i64().unwrap();
        let reason = if case == "none" {
            "no_sessions"
        } else {
            "no_readable_sessions"
        };
        let out = d
            .dream_run(&envelope.to_string(), &[])
            .code(1)
            .stdout_json(|doc| {
                let run = &doc["run"];
                assert_eq!(run["status"], "skipped", "{case}");
                assert_eq!(run["reason"], reason, "{case}");
            })
            .stderr_is(said)
            .run();
        assert!(d.api.requests().is_empty(), "{case}: no model request");
        assert!(
            !d.home.state_dir().join("tasks").exists(),
            "{case}: no task"
        );
        d.release(&out.stdout, "skipped");
        assert!(d.lock_ms() <= lock_before);
        assert_eq!(d.lock_ms(), prior, "{case}: the time is rolled back");
    }
    // Some unreadable: named, and only the readable ones are reviewed.
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let third = d
        .home
        .transcripts_dir()
        .join(format!("{}.jsonl", session_id(3)));
    std::fs::remove_file(&third).unwrap();
    d.api.push(Reply::anthropic_text("Nothing."));
    d.dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| {
            let run = &doc["run"];
            assert_eq!(run["sessions_reviewed"], 4);
            assert_eq!(run["unreadable_sessions"][0]["session_id"], session_id(3));
        })
        .stderr_is(left_out(&third, "No such file or directory (os error 2)"))
        .run();
    let prompt = d.api.requests()[0].body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        prompt.contains("Sessions since last consolidation (4):"),
        "{prompt}"
    );
    assert!(!prompt.contains(&session_id(3)));
}

/// A Messages API answer cut at the output limit.
fn cut_reply(text: &str) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "msg_cut", "type": "message", "role": "assistant", "model": "test",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "max_tokens", "stop_sequence": null,
            "usage": {"input_tokens": 50, "output_tokens": 64,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        }),
    )
}

#[test]
fn a_reply_cut_at_max_tokens_is_continued_once_then_fails_as_truncated() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api
        .push(cut_reply("I will now consolidate the memory by first"))
        .push(Reply::anthropic_text("Done, nothing to change."));
    d.dream_run(&envelope, &["--max-answer-tokens", "64"])
        .success()
        .stdout_json(|doc| {
            let run = &doc["run"];
            assert_eq!(run["turns"], 2);
            assert!(run["warnings"]
                .as_array()
                .unwrap()
                .contains(&json!("no_tool_calls")));
        })
        .stderr_empty()
        .run();
    let requests = d.api.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body["max_tokens"], 64);
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert!(messages.last().unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("cut off"));
    drop(holder);

    d.touch_sessions();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api.push(cut_reply("First")).push(cut_reply("Second"));
    d.dream_run(&envelope, &[])
        .code(1)
        .stdout_json(|doc| {
            let run = &doc["run"];
            assert_eq!(run["status"], "failed");
            assert_eq!(run["error"], "truncated");
        })
        .stderr_is(
            "dream-run: run failed: the model's reply was cut at --max-answer-tokens 8192 twice, \
             with no tool call\n",
        )
        .run();
}

#[test]
fn turns_counts_every_turn_past_the_thirty_the_record_keeps() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    for _ in 0..34 {
        d.api.push(Reply::anthropic_tools(
            "Looking.",
            &[("shell", json!({"command": "ls"}))],
        ));
    }
    d.api.push(Reply::anthropic_text("Done."));
    let out = d
        .dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| {
            let run = &doc["run"];
            assert_eq!(run["turns"], 35);
            assert_eq!(run["tool_calls"], 34);
        })
        .stderr_empty()
        .run();
    let record = d.task(out.json()["run"]["task_id"].as_str().unwrap());
    assert_eq!(record["turns"].as_array().unwrap().len(), 30);
}

#[test]
fn every_file_under_the_state_dir_is_private() {
    let d = Dream::new();
    d.propose_many(3);
    d.tool("dream-run")
        .arg("apply")
        .success()
        .stdout_json(|doc| assert_eq!(doc["applied"], true, "{doc}"))
        .stderr_empty()
        .run();
    d.touch_sessions();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    script_full_consolidation(&d);
    d.dream_run(&envelope, &["--propose"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "proposed", "{doc}"))
        .stderr_empty()
        .run();
    d.tool("dream-run")
        .args(["pending", "--clear"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["cleared"], true, "{doc}"))
        .stderr_empty()
        .run();
    let mut files = 0;
    for entry in walkdir::WalkDir::new(d.home.state_dir()) {
        let entry = entry.unwrap();
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        if meta.is_dir() {
            assert_eq!(mode(&meta), 0o700, "{}", entry.path().display());
        } else {
            files += 1;
            assert_eq!(mode(&meta), 0o600, "{}", entry.path().display());
        }
    }
    assert!(files > 10, "{files} files checked");
}

#[test]
fn two_runs_on_one_token_cannot_both_write() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    // The first run waits in its second request; the second is handed the same envelope.
    d.api
        .push(Reply::anthropic_tools(
            "First.",
            &[("write_file", json!({"path": "first.md", "content": "1\n"}))],
        ))
        .push(Reply::Hang(Duration::from_secs(3)))
        .push(Reply::anthropic_text("Done."));
    let first = d
        .dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_is(more_problems("orphan_file 0 -> 1, front_matter 2 -> 3"))
        .spawn();
    crate::support::wait::busy_until("the first run's second request", || {
        d.api.requests().len() == 2
    });
    // The first run's task, as its record (written when it starts) names it.
    let records: Vec<String> = std::fs::read_dir(d.home.state_dir().join("tasks"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".json").map(str::to_string)
        })
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    let task = records[0].clone();
    let pid = first.pid();
    let second = d
        .dream_run(&envelope, &[])
        .code(1)
        .stdout_json(|doc| {
            let run = &doc["run"];
            assert_eq!(run["status"], "skipped");
            assert_eq!(run["reason"], "lock_claimed");
        })
        .stderr_is(format!(
            "dream-run: run skipped: another dream-run (task {task}, PID {pid}) already runs \
             under this lock\n"
        ))
        .run();
    assert_eq!(d.api.requests().len(), 2, "the second asked nothing");
    // Its envelope cannot free the lock under the first.
    d.tool("dream-lock")
        .arg("release")
        .stdin(second.stdout)
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["lock"]["reason"], "not_holder"))
        .stderr_is(format!(
            "dream-lock: not released: dream-run task {task} (PID {pid}) claimed this lock and \
             still runs; its own envelope releases it (or pass --force)\n"
        ))
        .run();
    let out = first.finish();
    assert_eq!(d.read("first.md"), "1\n");
    assert_eq!(out.json()["run"]["task_id"], task.as_str());
    // After the first finished, a replay of its envelope is refused too.
    d.dream_run(&envelope, &[])
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["run"]["reason"], "lock_claimed"))
        .stderr_is(format!(
            "dream-run: run skipped: task {task} already ran under this lock: take the lock anew \
             (dream-lock acquire) for another run\n"
        ))
        .run();
    d.release(&out.stdout, "completed");
}

/// No `.dreamkit-*.tmp` and no journal anywhere in the memory or state dirs.
fn nothing_left_behind(d: &Dream, what: &str) {
    for root in [d.mem(), d.home.state_dir()] {
        let strays: Vec<String> = crate::support::tree(&root)
            .into_iter()
            .map(|(path, _)| path)
            .filter(|path| {
                let name = path.rsplit('/').next().unwrap_or(path);
                name.starts_with(".dreamkit-") && name.ends_with(".tmp")
            })
            .collect();
        assert!(strays.is_empty(), "{what}: {strays:?}");
    }
    assert!(!d.journal().exists(), "{what}: the journal stays");
}

/// The proposal's result, as the task record says it will be: each file's sha256 (`None`:
/// deleted).
fn proposed_hashes(d: &Dream, id: &str) -> Vec<(String, Option<String>)> {
    let record = d.task(id);
    record["proposed"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(rel, sha)| (rel.clone(), sha.as_str().map(str::to_string)))
        .collect()
}

fn hash_now(d: &Dream, rel: &str) -> Option<String> {
    std::fs::read(d.mem().join(rel))
        .ok()
        .map(|bytes| crate::support::sha256_hex(&bytes))
}

/// kill -9 of `apply`, `undo`, `discard` and a run at random moments, then the next command:
/// the memory dir is byte-identical to before or to the full result, no temporary file or
/// journal is left, and the lock's time moved only if a consolidation completed.
#[test]
fn kill_9_at_random_moments_leaves_all_before_or_all_after() {
    let mut rng =
        crate::support::kill_seed("kill_9_at_random_moments_leaves_all_before_or_all_after");
    for round in 0..2 {
        let d = Dream::new();
        let id = d.propose_many(150);
        let before = d.md_tree();
        let lock_before = d.lock_ms();
        let what = format!("round {round}: apply");
        crate::support::kill_at_random(d.tool("dream-run").arg("apply"), &mut rng, 600);
        d.tool("dream-run")
            .arg("recover")
            .success()
            .stdout_any("what it put back depends on the moment")
            .stderr_any("what it put back depends on the moment")
            .run();
        nothing_left_behind(&d, &what);
        let applied = d.task(&id)["status"] == "completed";
        if applied {
            for (rel, sha) in proposed_hashes(&d, &id) {
                assert_eq!(
                    hash_now(&d, &rel),
                    sha,
                    "{what}: {rel} is not the proposal's"
                );
            }
        } else {
            assert_eq!(d.task(&id)["status"], "proposed", "{what}");
            assert_eq!(d.md_tree(), before, "{what}: not all before");
            assert_eq!(d.lock_ms(), lock_before, "{what}: the time moved");
            // Applied whole now, then undone at a random moment.
            d.tool("dream-run")
                .args(["apply", &id])
                .success()
                .stdout_json(|doc| assert_eq!(doc["applied"], true, "{doc}"))
                .stderr_empty()
                .run();
        }
        let after = d.md_tree();
        let lock_after = d.lock_ms();
        let what = format!("round {round}: undo");
        crate::support::kill_at_random(d.tool("dream-run").args(["undo", &id]), &mut rng, 600);
        d.tool("dream-run")
            .arg("recover")
            .success()
            .stdout_any("what it put back depends on the moment")
            .stderr_any("what it put back depends on the moment")
            .run();
        nothing_left_behind(&d, &what);
        if d.task(&id)["status"] == "undone" {
            assert_eq!(d.md_tree(), before, "{what}: not all undone");
        } else {
            assert_eq!(d.md_tree(), after, "{what}: not all applied");
            assert_eq!(d.lock_ms(), lock_after, "{what}: the time moved");
        }

        // discard of a proposal.
        let what = format!("round {round}: discard");
        let d = Dream::new();
        let proposal = d.propose_many(20);
        let now = d.md_tree();
        let lock_now = d.lock_ms();
        crate::support::kill_at_random(
            d.tool("dream-run").args(["discard", &proposal]),
            &mut rng,
            40,
        );
        d.tool("dream-run")
            .arg("recover")
            .success()
            .stdout_any("what it put back depends on the moment")
            .stderr_any("what it put back depends on the moment")
            .run();
        nothing_left_behind(&d, &what);
        assert_eq!(d.md_tree(), now, "{what}: discarding touched memory");
        assert_eq!(d.lock_ms(), lock_now, "{what}: the time moved");
        let staged = d.home.state_dir().join("proposals").join(&proposal);
        match d.task(&proposal)["status"].as_str() {
            Some("discarded") => assert!(!staged.exists(), "{what}"),
            Some("proposed") => assert!(staged.exists(), "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}

/// kill -9 of a consolidation run at a random moment of its writes, then a new acquire: the
/// memory dir is all before (rolled back) or all after (completed), no temporary file is
/// left, and the crash postpones no dream.
#[test]
fn kill_9_of_a_run_at_random_moments_is_rolled_back_by_the_next_acquire() {
    let mut rng = crate::support::kill_seed(
        "kill_9_of_a_run_at_random_moments_is_rolled_back_by_the_next_acquire",
    );
    for round in 0..3 {
        let d = Dream::new();
        let before = d.md_tree();
        let prior = d.lock_ms();
        let holder = LiveProcess::start();
        let envelope = d.acquired_envelope(&holder);
        let writes = Dream::many_writes(
            120,
            &[("MEMORY.md", "# Memory\n- [Many](many/0000.md): many\n")],
        );
        let limit = (writes.len() + 2).to_string();
        let mut calls = vec![("read_file", json!({"path": "MEMORY.md"}))];
        calls.extend(writes);
        d.api
            .push(Reply::anthropic_tools("Writing.", &calls))
            .push(Reply::anthropic_text("Done."));
        let what = format!("round {round}: run");
        let ran = crate::support::kill_at_random(
            d.tool("dream-run")
                .args(["--max-calls-per-turn", &limit, "--max-files", &limit])
                .stdin(envelope),
            &mut rng,
            500,
        );
        drop(holder);
        let completed = ran.code == Some(0);
        nothing_left_behind_but_the_killed_write(&d);
        // The next consolidation's acquire puts back what the killed run left.
        d.touch_sessions();
        let holder = LiveProcess::start();
        let gate = d
            .tool("dream-gate")
            .args([
                "--min-hours",
                "24",
                "--min-sessions",
                "1",
                "--scan-interval",
                "0",
            ])
            .success()
            .stdout_json(|doc| {
                if !completed {
                    assert_eq!(
                        doc["gate"]["due"], true,
                        "{what}: the crash postponed the dream"
                    );
                }
            })
            .stderr_empty()
            .run();
        if !completed {
            d.tool("dream-lock")
                .args(["acquire", "--pid", &holder.pid().to_string()])
                .stdin(gate.stdout)
                .success()
                .stdout_json(|doc| {
                    assert_eq!(doc["lock"]["acquired"], true, "{doc}");
                    assert_eq!(doc["lock"]["prior_mtime"], prior, "{what}: {doc}");
                })
                .stderr_any("what it put back depends on the moment")
                .run();
            nothing_left_behind(&d, &what);
            assert_eq!(d.md_tree(), before, "{what}: not all before");
        }
    }
}

/// After a kill only the state dir's and memory dir's temporary files may be there; the
/// next command removes them (checked by [`nothing_left_behind`] after it).
fn nothing_left_behind_but_the_killed_write(d: &Dream) {
    assert!(!d.journal().exists(), "a run keeps no journal");
}

/// A command killed while it holds the lock (before any journal of its own) moved no time:
/// the gate sees the time from before it, and the next command that changes state writes
/// that time back on the lock file (which Claude Code reads too).
#[test]
fn a_hold_killed_before_its_journal_moves_no_time() {
    let d = Dream::new();
    let prior = d.lock_ms();
    let holder = LiveProcess::start();
    let _envelope = d.acquired_envelope(&holder);
    assert_ne!(d.lock_ms(), prior);
    holder.kill();
    d.gate_is_due();
    d.tool("dream-lock")
        .arg("status")
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["held"], false, "{doc}");
            assert_eq!(doc["stale"], true, "{doc}");
        })
        .stderr_empty()
        .run();
    d.recovers_nothing();
    assert_eq!(d.lock_ms(), prior, "the time is back on the lock file");
    assert_eq!(std::fs::read(d.home.lock_file()).unwrap(), b"");
}

/// A `--propose` run killed midway: its staging copy is swept by the next command, and
/// `discard` of it answers discarded (it never touched the memory dir).
#[test]
fn a_killed_proposal_is_swept_and_can_be_discarded() {
    let d = Dream::new();
    let before = d.md_tree();
    d.run_killed_midway(
        &[
            ("read_file", json!({"path": "stale.md"})),
            (
                "write_file",
                json!({"path": "stale.md", "content": "blue-green\n"}),
            ),
        ],
        &["--propose"],
    );
    let proposals = d.home.state_dir().join("proposals");
    let id = std::fs::read_dir(&proposals)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .to_string_lossy()
        .into_owned();
    assert!(proposals.join(&id).join("memory/stale.md").exists());
    d.tool("dream-run")
        .args(["discard", &id])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["discarded"], true, "{doc}");
            assert_eq!(doc["task_id"], id.as_str());
            assert_eq!(doc["orphans"][0]["outcome"], "proposal_dropped", "{doc}");
        })
        .stderr_is(format!(
            "dream-run: task {id} (proposing) died without an end: its staging copy was removed\n"
        ))
        .run();
    assert!(!proposals.join(&id).exists());
    assert_eq!(d.task(&id)["status"], "discarded");
    assert_eq!(d.md_tree(), before);
}

/// Undoing a consolidation that a later one followed leaves the last-consolidated time.
#[test]
fn undo_of_an_older_consolidation_leaves_the_time() {
    let d = Dream::new();
    let mut ids = Vec::new();
    for topic in ["a", "b"] {
        d.touch_sessions();
        let holder = LiveProcess::start();
        let envelope = d.acquired_envelope(&holder);
        d.api
            .push(Reply::anthropic_tools(
                "Noting.",
                &[(
                    "write_file",
                    json!({"path": format!("topics/{topic}.md"), "content": format!("{topic}\n")}),
                )],
            ))
            .push(Reply::anthropic_text("Done."));
        let out = d
            .dream_run(&envelope, &[])
            .success()
            .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
            .stderr_any("the health warning depends on the round")
            .run();
        ids.push(out.json()["run"]["task_id"].as_str().unwrap().to_string());
        d.release(&out.stdout, "completed");
    }
    let lock = d.lock_ms();
    d.tool("dream-run")
        .args(["undo", &ids[0]])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["undone"], true, "{doc}");
            assert_eq!(doc.get("last_consolidated_at"), None, "{doc}");
        })
        .stderr_empty()
        .run();
    assert!(!d.mem().join("topics/a.md").exists());
    assert!(d.mem().join("topics/b.md").exists());
    assert_eq!(d.lock_ms(), lock, "a later consolidation still stands");
}

/// A hand-edited journal: a set-id mode is never restored (permission bits only), and a
/// backing copy swapped for a link is never followed (the journal is moved aside instead).
#[test]
fn a_journal_restores_permission_bits_only_and_follows_no_link() {
    for case in ["setid", "link"] {
        let d = Dream::new();
        let _id = d.propose_many(300);
        let outside = d.home.root.join("outside.md");
        std::fs::write(&outside, "secret of another user\n").unwrap();
        d.apply_killed_midway();
        let intent_path = d.journal().join("intent.json");
        let mut intent: Value =
            serde_json::from_slice(&std::fs::read(&intent_path).unwrap()).unwrap();
        let copy = d.journal().join("files/MEMORY.md");
        if case == "setid" {
            intent["files"]["MEMORY.md"]["before"]["mode"] = json!(0o6777);
            std::fs::write(&intent_path, intent.to_string()).unwrap();
        } else {
            std::fs::remove_file(&copy).unwrap();
            std::os::unix::fs::symlink(&outside, &copy).unwrap();
        }
        let out = d
            .tool("dream-run")
            .arg("recover")
            .success()
            .stdout_any("checked below")
            .stderr_any("checked below")
            .run();
        let doc = out.json();
        assert!(!d.read("MEMORY.md").contains("secret"), "{case}");
        if case == "setid" {
            assert_eq!(doc["recovered"]["command"], "apply", "{doc}");
            let meta = std::fs::metadata(d.mem().join("MEMORY.md")).unwrap();
            assert_eq!(mode(&meta), 0o777, "no set-id bit");
        } else {
            assert!(
                doc["journal_corrupt"]["error"]
                    .as_str()
                    .unwrap()
                    .starts_with("the journal's copy of MEMORY.md cannot be read"),
                "{doc}"
            );
            assert!(!d.journal().exists());
        }
    }
}

/// kill -9 of the lock's own writes at random moments (`dream-lock acquire`, then `release`
/// as completed or failed), then the next command: the lock's time is the one from before
/// unless a release of a completed consolidation ran to its end, and nothing is left behind.
#[test]
fn kill_9_of_lock_writes_at_random_moments_moves_no_time() {
    let mut rng =
        crate::support::kill_seed("kill_9_of_lock_writes_at_random_moments_moves_no_time");
    let d = Dream::new();
    for round in 0..12 {
        let prior = d.lock_ms();
        let holder = LiveProcess::start();
        let gate = d.gate_now();
        let acquired = crate::support::kill_at_random(
            d.tool("dream-lock")
                .args(["acquire", "--pid", &holder.pid().to_string()])
                .stdin(gate),
            &mut rng,
            25,
        );
        let outcome = if rng.bool() { "completed" } else { "failed" };
        let mut completed = false;
        if acquired.code == Some(0) {
            let released = crate::support::kill_at_random(
                d.tool("dream-lock")
                    .args(["release", "--outcome", outcome])
                    .stdin(acquired.stdout.clone()),
                &mut rng,
                25,
            );
            completed = released.code == Some(0) && outcome == "completed";
        }
        holder.kill();
        let what = format!("round {round}: acquire, release {outcome}");
        d.tool("dream-run")
            .arg("recover")
            .success()
            .stdout_any("what it put back depends on the moment")
            .stderr_empty()
            .run();
        nothing_left_behind(&d, &what);
        if completed {
            assert!(
                d.lock_ms() > prior,
                "{what}: a completed release stamps the time"
            );
        } else if d.lock_ms() != prior {
            // Killed after the release's lock write: the time it wrote is the release's
            // (completed: now; failed: the prior time).
            assert_eq!(outcome, "completed", "{what}: the time moved");
            assert_eq!(std::fs::read(d.home.lock_file()).unwrap(), b"", "{what}");
        }
        d.tool("dream-lock")
            .arg("status")
            .success()
            .stdout_json(|doc| assert_eq!(doc["held"], false, "{what}: {doc}"))
            .stderr_empty()
            .run();
    }
}
