//! dream-run's review mode as a person uses it: propose (pipeline, exec, environment), show,
//! apply, discard, undo after apply; every result checked on disk.

use std::path::Path;
use std::process::Stdio;

use serde_json::{json, Value};

use crate::support::dream::{script_full_consolidation, Dream};

use crate::support::{sha256_hex, LiveProcess, Run};

/// What the full consolidation leaves in MEMORY.md.
const NEW_INDEX: &str =
    "# Memory\n- [Build](topics/build.md): how to build\n- [Deploy](topics/deploy.md): blue-green deploys\n";
const OLD_INDEX: &str =
    "# Memory\n- [Build](topics/build.md): how to build\n- [Stale](stale.md): old notes\n";

impl Dream {
    fn abs(&self, rel: &str) -> String {
        self.mem().join(rel).to_string_lossy().into_owned()
    }

    /// `acquire | dream-run --propose | release`, the lock held by a live process meanwhile;
    /// returns the run's document.
    fn propose(&self) -> Value {
        let holder = LiveProcess::start();
        let envelope = self.acquired_envelope(&holder);
        script_full_consolidation(self);
        let ran = self
            .dream_run(&envelope, &["--propose"])
            .success()
            .stdout_json(|doc| assert_eq!(doc["run"]["status"], "proposed", "{doc}"))
            .stderr_empty()
            .run();
        self.tool("dream-lock")
            .arg("release")
            .stdin(ran.stdout.clone())
            .success()
            .stdout_json(|doc| assert_eq!(doc["lock"]["outcome"], "proposed"))
            .stderr_empty()
            .run();
        ran.json()
    }

    /// `dream-run ARGS` (show, apply, discard, undo), as a checked run.
    fn review<'a>(&self, args: &[&str]) -> Run<'a> {
        self.tool("dream-run").args(args)
    }

    fn proposal_dir(&self, task_id: &str) -> std::path::PathBuf {
        self.home.state_dir().join("proposals").join(task_id)
    }
}

fn task_id(doc: &Value) -> String {
    doc["run"]["task_id"].as_str().unwrap().to_string()
}

/// The proposal of the full consolidation, as the `run` section and the record show it.
fn check_proposal(d: &Dream, run: &Value) {
    assert_eq!(run["status"], "proposed", "{run}");
    assert_eq!(run["mode"], "propose");
    assert_eq!(run["diff"]["created"], json!([d.abs("topics/deploy.md")]));
    assert_eq!(run["diff"]["modified"], json!([d.abs("MEMORY.md")]));
    assert_eq!(run["diff"]["deleted"], json!([d.abs("stale.md")]));
    let text = run["diff_text"].as_str().unwrap();
    for line in [
        "--- a/MEMORY.md\n+++ b/MEMORY.md\n",
        "-- [Stale](stale.md): old notes\n",
        "+- [Deploy](topics/deploy.md): blue-green deploys\n",
        // As git writes a deleted and a created file: /dev/null on the side that is not.
        "--- a/stale.md\n+++ /dev/null\n",
        "-The deploy uses FTP.\n",
        "--- /dev/null\n+++ b/topics/deploy.md\n@@ -0,0 +1 @@\n",
        "+Deploys are blue-green (since 2026-12-01).\n",
    ] {
        assert!(text.contains(line), "{line:?} not in\n{text}");
    }
    let record = d.task(run["task_id"].as_str().unwrap());
    assert_eq!(record["status"], "proposed");
    assert_eq!(
        record["proposal"],
        json!({
            "MEMORY.md": sha256_hex(OLD_INDEX.as_bytes()),
            "stale.md": sha256_hex(b"The deploy uses FTP.\n"),
            "topics/deploy.md": null,
        })
    );
    assert!(
        !d.home.state_dir().join("pending-updates.jsonl").exists(),
        "a proposal is announced to no session"
    );
}

#[test]
fn propose_leaves_the_memory_dir_and_the_lock_time_as_they_were_in_both_forms() {
    for form in ["pipeline", "exec"] {
        let d = Dream::new();
        script_full_consolidation(&d);
        let line = match form {
            "pipeline" => "dream-gate --min-hours 1 --min-sessions 1 | dream-lock acquire | dream-run --propose | dream-lock release",
            _ => "dream-gate --min-hours 1 --min-sessions 1 | dream-lock exec -- dream-run --propose",
        };
        let before = d.md_tree();
        let lock_before = d.lock_ms();
        let transcript = d
            .home
            .transcripts_dir()
            .join(format!("{}.jsonl", crate::support::session_id(5)));
        let transcript_before = std::fs::read(&transcript).unwrap();
        let doc = Run::command(d.process(Path::new("sh")), "sh")
            .args(["-c", line])
            .stdin_from(Stdio::null())
            .success()
            .stdout_json(|doc| check_proposal(&d, &doc["run"]))
            // The exec form says so on stderr (the pipeline's release, in its JSON).
            .stderr_is(if form == "exec" {
                "dream-lock: rolled the lock back (proposed): the consolidation time is as it was\n"
            } else {
                ""
            })
            .run()
            .json();
        if form == "pipeline" {
            assert_eq!(doc["lock"]["released"], true);
            assert_eq!(doc["lock"]["outcome"], "proposed");
        }
        assert_eq!(d.md_tree(), before, "{form}: the memory dir changed");
        assert_eq!(d.lock_ms(), lock_before, "{form}: the time moved");
        assert_eq!(std::fs::read(d.home.lock_file()).unwrap(), b"", "{form}");
        assert_eq!(std::fs::read(&transcript).unwrap(), transcript_before);
        // The staged result is what applying would write.
        let staged = d.proposal_dir(&task_id(&doc)).join("memory");
        assert_eq!(
            std::fs::read_to_string(staged.join("MEMORY.md")).unwrap(),
            NEW_INDEX
        );
        assert!(!staged.join("stale.md").exists());
    }
}

#[test]
fn show_prints_a_proposal_as_json_and_as_a_diff() {
    let d = Dream::new();
    let doc = d.propose();
    let id = task_id(&doc);
    let text = doc["run"]["diff_text"].as_str().unwrap();

    d.review(&["show"])
        .success()
        .stdout_json(|shown| {
            assert_eq!(shown["task_id"], id.as_str());
            assert_eq!(shown["status"], "proposed");
            assert_eq!(shown["diff"], doc["run"]["diff"]);
            assert_eq!(shown["diff_text"], text);
        })
        .stderr_empty()
        .run();

    // Not a terminal: the plain diff, no colour codes.
    d.review(&["show", &id, "--diff"])
        .success()
        .stdout_is(text)
        .stderr_empty()
        .run();

    d.review(&["show", "no-such-task"])
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(
                *doc,
                json!({"reason": "not_found", "task_id": "no-such-task"})
            );
        })
        .stderr_is("dream-run: no task no-such-task\n")
        .run();
    d.review(&["show", "../x"])
        .code(2)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "bad_input"))
        .stderr_is("dream-run: \"../x\" is not a task id\n")
        .run();
}

#[test]
fn apply_writes_exactly_the_proposal_and_undo_puts_it_back() {
    let d = Dream::new();
    let before = d.md_tree();
    let doc = d.propose();
    let id = task_id(&doc);

    // While someone holds the lock, apply waits for nobody: busy, nothing written.
    {
        let holder = LiveProcess::start();
        let envelope = d.acquired_envelope(&holder);
        d.review(&["apply"])
            .code(1)
            .stdout_json(|doc| assert_eq!(doc["reason"], "busy"))
            .stderr_is(format!(
                "dream-run: the consolidation lock is held by PID {}: try again later\n",
                holder.pid()
            ))
            .run();
        assert_eq!(d.md_tree(), before);
        d.tool("dream-lock")
            .args(["release", "--outcome", "failed"])
            .stdin(envelope)
            .success()
            .stdout_json(|doc| {
                assert_eq!(doc["lock"]["released"], true);
                assert_eq!(doc["lock"]["outcome"], "failed");
            })
            .stderr_empty()
            .run();
    }

    let lock_before = d.lock_ms();
    d.review(&["apply"])
        .success()
        .stdout_json(|applied| {
            assert_eq!(applied["applied"], true);
            assert_eq!(applied["task_id"], id.as_str());
        })
        .stderr_empty()
        .run();
    assert_eq!(d.read("MEMORY.md"), NEW_INDEX);
    assert_eq!(
        d.read("topics/deploy.md"),
        "Deploys are blue-green (since 2026-12-01).\n"
    );
    assert!(!d.mem().join("stale.md").exists());
    assert_eq!(d.read("topics/build.md"), "Build with make.\n");
    // Exactly the proposal: the three files and nothing else.
    let changed: Vec<String> = d
        .md_tree()
        .symmetric_difference(&before)
        .map(|(p, _)| p.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(changed, ["MEMORY.md", "stale.md", "topics/deploy.md"]);
    // A consolidation: the time moved and the lock is free.
    assert!(d.lock_ms() > lock_before);
    assert_eq!(std::fs::read(d.home.lock_file()).unwrap(), b"");
    let record = d.task(&id);
    assert_eq!(record["status"], "completed");
    assert!(record["snapshot"].is_string());
    assert!(!d.proposal_dir(&id).exists(), "the staging copy is gone");
    let pending =
        std::fs::read_to_string(d.home.state_dir().join("pending-updates.jsonl")).unwrap();
    let line: Value = serde_json::from_str(pending.lines().next().unwrap()).unwrap();
    assert_eq!(line["task_id"], id.as_str());
    assert_eq!(line["files_touched"].as_array().unwrap().len(), 3);
    // Applied once only.
    d.review(&["apply", &id])
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(
                *doc,
                json!({"applied": false, "reason": "not_a_proposal", "task_id": id, "files": []})
            );
        })
        .stderr_is(format!(
            "dream-run: task {id} is completed, not a proposal\n"
        ))
        .run();

    d.review(&["undo"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["task_id"], id.as_str()))
        .stderr_empty()
        .run();
    assert_eq!(d.md_tree(), before, "undo restored the memory dir");
}

#[test]
fn apply_refuses_when_a_person_edited_a_touched_file_and_applies_nothing() {
    let d = Dream::new();
    let doc = d.propose();
    let id = task_id(&doc);
    std::fs::write(
        d.mem().join("stale.md"),
        "The deploy uses FTP. Still true!\n",
    )
    .unwrap();
    let before = d.md_tree();
    let lock_before = d.lock_ms();
    d.review(&["apply", &id])
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["applied"], false);
            assert_eq!(doc["reason"], "changed_since");
            assert_eq!(doc["files"], json!([d.abs("stale.md")]));
        })
        .stderr_contains("stale.md")
        .stderr_is(format!(
            "dream-run: not applied: changed since the proposal was made: {}\n",
            d.abs("stale.md")
        ))
        .run();
    assert_eq!(d.md_tree(), before, "nothing applied");
    assert_eq!(d.lock_ms(), lock_before);
    assert_eq!(std::fs::read(d.home.lock_file()).unwrap(), b"");
    assert_eq!(d.task(&id)["status"], "proposed");
    // A file the proposal creates that someone created meanwhile is a change too.
    std::fs::write(d.mem().join("stale.md"), "The deploy uses FTP.\n").unwrap();
    std::fs::write(d.mem().join("topics/deploy.md"), "mine\n").unwrap();
    d.review(&["apply"])
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["files"], json!([d.abs("topics/deploy.md")])))
        .stderr_is(format!(
            "dream-run: not applied: changed since the proposal was made: {}\n",
            d.abs("topics/deploy.md")
        ))
        .run();
    assert_eq!(d.read("topics/deploy.md"), "mine\n");
    assert_eq!(d.read("MEMORY.md"), OLD_INDEX);
    // Only what was shown is applied: a staged copy changed since is refused too.
    std::fs::remove_file(d.mem().join("topics/deploy.md")).unwrap();
    let staged = d.proposal_dir(&id).join("memory/MEMORY.md");
    std::fs::write(&staged, "# Memory\n- slipped in later\n").unwrap();
    d.review(&["apply"])
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["reason"], "staging_changed");
            assert_eq!(doc["files"], json!([staged.to_string_lossy()]));
        })
        .stderr_is(format!(
            "dream-run: not applied: the staged copy is not what the proposal showed: {}\n",
            staged.display()
        ))
        .run();
    assert_eq!(d.read("MEMORY.md"), OLD_INDEX);
    assert_eq!(d.task(&id)["status"], "proposed");
}

#[test]
fn discard_drops_a_proposal() {
    let d = Dream::new();
    let before = d.md_tree();
    let doc = d.propose();
    let id = task_id(&doc);
    assert!(d.proposal_dir(&id).join("memory/MEMORY.md").exists());
    d.review(&["discard"])
        .success()
        .stdout_json(|doc| assert_eq!(*doc, json!({"discarded": true, "task_id": id})))
        .stderr_empty()
        .run();
    assert!(!d.proposal_dir(&id).exists());
    assert_eq!(d.task(&id)["status"], "discarded");
    assert_eq!(d.md_tree(), before);
    // Nothing left to show or apply.
    d.review(&["show"])
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["reason"], "no_proposal"))
        .stderr_is("dream-run: no memory proposal: run dream-run --propose first\n")
        .run();
    d.review(&["apply", &id])
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["reason"], "not_a_proposal"))
        .stderr_is(format!(
            "dream-run: task {id} is discarded, not a proposal\n"
        ))
        .run();
    assert_eq!(d.md_tree(), before);
}

#[test]
fn the_mode_comes_from_the_environment_and_a_bad_one_is_exit_2() {
    let d = Dream::new();
    let before = d.md_tree();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    script_full_consolidation(&d);
    d.dream_run(&envelope, &[])
        .env("DREAMKIT_DREAM_MODE", "propose")
        .success()
        .stdout_json(|doc| check_proposal(&d, &doc["run"]))
        .stderr_empty()
        .run();
    assert_eq!(d.md_tree(), before);

    let tasks_before = std::fs::read_dir(d.home.state_dir().join("tasks"))
        .unwrap()
        .count();
    d.dream_run(&envelope, &[])
        .env("DREAMKIT_DREAM_MODE", "yes")
        .code(2)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "bad_input"))
        .stderr_contains("DREAMKIT_DREAM_MODE")
        .stderr_is("dream-run: DREAMKIT_DREAM_MODE must be \"propose\" or \"apply\", not \"yes\"\n")
        .run();
    assert_eq!(
        std::fs::read_dir(d.home.state_dir().join("tasks"))
            .unwrap()
            .count(),
        tasks_before,
        "no task recorded"
    );
    assert_eq!(d.md_tree(), before);
}

/// On a terminal the diff is coloured (red removals, green additions, cyan headers), unless
/// NO_COLOR is set. `script` gives the command a real pseudo-terminal.
#[test]
fn show_diff_is_coloured_only_on_a_terminal_without_no_color() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        crate::support::skip(
            "show_diff_is_coloured_only_on_a_terminal_without_no_color",
            "no `script` to make a terminal",
        );
        return;
    }
    let d = Dream::new();
    d.propose();
    let on_terminal = |no_color: bool| {
        let mut cmd = d.process(Path::new("script"));
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        Run::command(cmd, "script")
            .args(["-qec", "dream-run show --diff", "/dev/null"])
            .success()
            // The terminal's output, checked by the caller.
            .stdout_with(|text| assert!(text.contains("--- a/MEMORY.md"), "{text:?}"))
            // `script` puts the command's stderr on the terminal too; its own is empty.
            .stderr_empty()
            .run()
            .stdout
            .replace("\r\n", "\n")
    };
    let coloured = on_terminal(false);
    for piece in [
        "\x1b[36m--- a/MEMORY.md\x1b[0m\n",
        "\x1b[31m-The deploy uses FTP.\x1b[0m\n",
        "\x1b[32m+Deploys are blue-green (since 2026-12-01).\x1b[0m\n",
    ] {
        assert!(coloured.contains(piece), "{piece:?} not in {coloured:?}");
    }
    let plain = on_terminal(true);
    assert!(!plain.contains('\x1b'), "{plain:?}");
    assert!(plain.contains("-The deploy uses FTP.\n"), "{plain:?}");
}

/// A proposing run that fails leaves nothing to review: no staging copy, no proposal, and the
/// memory dir as it was.
#[test]
fn a_failed_proposal_leaves_no_staging_copy() {
    let d = Dream::new();
    let before = d.md_tree();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api
        .push(crate::support::fake_api::Reply::anthropic_tools(
            "Writing.",
            &[("write_file", json!({"path": "new.md", "content": "x\n"}))],
        ))
        .push(crate::support::fake_api::Reply::error(
            401,
            "authentication_error",
            "bad key",
        ));
    let doc = d
        .dream_run(&envelope, &["--propose"])
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "auth", "{doc}");
            assert_eq!(doc["run"]["status"], "failed", "{doc}");
        })
        .stderr_is("dream-run: run failed: auth: bad key\n")
        .run()
        .json();
    assert_eq!(doc["run"]["status"], "failed");
    assert_eq!(doc["run"]["mode"], "propose");
    let id = task_id(&doc);
    assert!(!d.proposal_dir(&id).exists());
    assert!(!d.home.state_dir().join("snapshots").join(&id).exists());
    assert_eq!(d.md_tree(), before);
    d.review(&["show"])
        .code(1)
        .stdout_json(|doc| assert_eq!(*doc, json!({"reason": "no_proposal"})))
        .stderr_is("dream-run: no memory proposal: run dream-run --propose first\n")
        .run();
}

/// `show TASK_ID` also shows what a completed (applied) run changed.
#[test]
fn show_shows_a_completed_runs_changes() {
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
    assert_eq!(doc["run"]["status"], "completed");
    assert!(doc["run"].get("diff_text").is_none(), "only when proposing");
    let id = task_id(&doc);
    let shown = d
        .review(&["show", &id])
        .success()
        .stdout_json(|doc| assert_eq!(doc["status"], "completed", "{doc}"))
        .stderr_empty()
        .run()
        .json();
    assert_eq!(shown["status"], "completed");
    assert_eq!(shown["diff"], doc["run"]["diff"]);
    let text = shown["diff_text"].as_str().unwrap();
    assert!(
        text.contains("-The deploy uses FTP.\n") && text.contains("+++ b/topics/deploy.md\n"),
        "{text}"
    );
    d.review(&["show", &id, "--diff"])
        .success()
        .stdout_is(text)
        .stderr_empty()
        .run();
}
