//! dream-run's review mode as a person uses it: propose (pipeline, exec, environment), show,
//! apply, discard, undo after apply; every result checked on disk.

use std::path::Path;

use serde_json::{json, Value};

use crate::dream::{script_full_consolidation, Dream};
use sha2::Digest as _;

use crate::support::{epoch_ms, mtime, stderr_text, stdout_json, tree, LiveProcess};

fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What the full consolidation leaves in MEMORY.md.
const NEW_INDEX: &str =
    "# Memory\n- [Build](topics/build.md): how to build\n- [Deploy](topics/deploy.md): blue-green deploys\n";
const OLD_INDEX: &str =
    "# Memory\n- [Build](topics/build.md): how to build\n- [Stale](stale.md): old notes\n";

impl Dream {
    fn abs(&self, rel: &str) -> String {
        self.mem().join(rel).to_string_lossy().into_owned()
    }

    fn lock_ms(&self) -> i64 {
        epoch_ms(mtime(&self.home.lock_file()))
    }

    /// `acquire | dream-run --propose | release`, the lock held by a live process meanwhile;
    /// returns the run's document.
    fn propose(&self) -> Value {
        let holder = LiveProcess::start();
        let envelope = self.acquired_envelope(&holder);
        script_full_consolidation(self);
        let out = self.run(&envelope, &["--propose"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
        let released = self
            .cmd("dream-lock")
            .arg("release")
            .write_stdin(out.stdout.clone())
            .output()
            .unwrap();
        assert_eq!(
            released.status.code(),
            Some(0),
            "{}",
            stderr_text(&released)
        );
        assert_eq!(stdout_json(&released)["lock"]["outcome"], "proposed");
        stdout_json(&out)
    }

    fn review(&self, args: &[&str]) -> std::process::Output {
        self.cmd("dream-run").args(args).output().unwrap()
    }

    fn proposal_dir(&self, task_id: &str) -> std::path::PathBuf {
        self.home.state_dir().join("proposals").join(task_id)
    }
}

/// The memory files (the lock files live in the memory dir too, and change with the lock).
fn md_tree(d: &Dream) -> std::collections::BTreeSet<(String, Vec<u8>)> {
    let mut files = tree(&d.mem());
    files.retain(|(path, _)| path.ends_with(".md"));
    files
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
        "--- a/stale.md\n+++ b/stale.md\n",
        "-The deploy uses FTP.\n",
        "--- a/topics/deploy.md\n+++ b/topics/deploy.md\n",
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
        let before = md_tree(&d);
        let lock_before = d.lock_ms();
        let transcript = d
            .home
            .transcripts_dir()
            .join(format!("{}.jsonl", crate::support::session_id(5)));
        let transcript_before = std::fs::read(&transcript).unwrap();
        let out = d
            .process(Path::new("sh"))
            .args(["-c", line])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{form}: {}", stderr_text(&out));
        let doc = stdout_json(&out);
        check_proposal(&d, &doc["run"]);
        if form == "pipeline" {
            assert_eq!(doc["lock"]["released"], true);
            assert_eq!(doc["lock"]["outcome"], "proposed");
        }
        assert_eq!(md_tree(&d), before, "{form}: the memory dir changed");
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

    let out = d.review(&["show"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let shown = stdout_json(&out);
    assert_eq!(shown["task_id"], id.as_str());
    assert_eq!(shown["status"], "proposed");
    assert_eq!(shown["diff"], doc["run"]["diff"]);
    assert_eq!(shown["diff_text"], text);

    // Not a terminal: the plain diff, no colour codes.
    let out = d.review(&["show", &id, "--diff"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), text);

    let out = d.review(&["show", "no-such-task"]);
    assert_eq!(out.status.code(), Some(1));
    let out = d.review(&["show", "../x"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout_json(&out)["error"]["kind"], "bad_input");
}

#[test]
fn apply_writes_exactly_the_proposal_and_undo_puts_it_back() {
    let d = Dream::new();
    let before = md_tree(&d);
    let doc = d.propose();
    let id = task_id(&doc);

    // While someone holds the lock, apply waits for nobody: busy, nothing written.
    {
        let holder = LiveProcess::start();
        let envelope = d.acquired_envelope(&holder);
        let out = d.review(&["apply"]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
        assert_eq!(stdout_json(&out)["reason"], "busy");
        assert_eq!(md_tree(&d), before);
        d.cmd("dream-lock")
            .args(["release", "--outcome", "failed"])
            .write_stdin(envelope)
            .assert()
            .code(0);
    }

    let lock_before = d.lock_ms();
    let out = d.review(&["apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let applied = stdout_json(&out);
    assert_eq!(applied["applied"], true);
    assert_eq!(applied["task_id"], id.as_str());
    assert_eq!(d.read("MEMORY.md"), NEW_INDEX);
    assert_eq!(
        d.read("topics/deploy.md"),
        "Deploys are blue-green (since 2026-12-01).\n"
    );
    assert!(!d.mem().join("stale.md").exists());
    assert_eq!(d.read("topics/build.md"), "Build with make.\n");
    // Exactly the proposal: the three files and nothing else.
    let changed: Vec<String> = md_tree(&d)
        .symmetric_difference(&before)
        .map(|(p, _)| p.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        changed,
        [
            d.abs("MEMORY.md"),
            d.abs("stale.md"),
            d.abs("topics/deploy.md")
        ]
    );
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
    assert_eq!(d.review(&["apply", &id]).status.code(), Some(1));

    let out = d.review(&["undo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(stdout_json(&out)["task_id"], id.as_str());
    assert_eq!(md_tree(&d), before, "undo restored the memory dir");
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
    let before = md_tree(&d);
    let lock_before = d.lock_ms();
    let out = d.review(&["apply", &id]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["applied"], false);
    assert_eq!(doc["reason"], "changed_since");
    assert_eq!(doc["files"], json!([d.abs("stale.md")]));
    assert!(
        stderr_text(&out).contains("stale.md"),
        "{}",
        stderr_text(&out)
    );
    assert_eq!(md_tree(&d), before, "nothing applied");
    assert_eq!(d.lock_ms(), lock_before);
    assert_eq!(std::fs::read(d.home.lock_file()).unwrap(), b"");
    assert_eq!(d.task(&id)["status"], "proposed");
    // A file the proposal creates that someone created meanwhile is a change too.
    std::fs::write(d.mem().join("stale.md"), "The deploy uses FTP.\n").unwrap();
    std::fs::write(d.mem().join("topics/deploy.md"), "mine\n").unwrap();
    let out = d.review(&["apply"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout_json(&out)["files"],
        json!([d.abs("topics/deploy.md")])
    );
    assert_eq!(d.read("topics/deploy.md"), "mine\n");
    assert_eq!(d.read("MEMORY.md"), OLD_INDEX);
    // Only what was shown is applied: a staged copy changed since is refused too.
    std::fs::remove_file(d.mem().join("topics/deploy.md")).unwrap();
    let staged = d.proposal_dir(&id).join("memory/MEMORY.md");
    std::fs::write(&staged, "# Memory\n- slipped in later\n").unwrap();
    let out = d.review(&["apply"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["reason"], "staging_changed");
    assert_eq!(doc["files"], json!([staged.to_string_lossy()]));
    assert_eq!(d.read("MEMORY.md"), OLD_INDEX);
    assert_eq!(d.task(&id)["status"], "proposed");
}

#[test]
fn discard_drops_a_proposal() {
    let d = Dream::new();
    let before = md_tree(&d);
    let doc = d.propose();
    let id = task_id(&doc);
    assert!(d.proposal_dir(&id).join("memory/MEMORY.md").exists());
    let out = d.review(&["discard"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(stdout_json(&out), json!({"discarded": true, "task_id": id}));
    assert!(!d.proposal_dir(&id).exists());
    assert_eq!(d.task(&id)["status"], "discarded");
    assert_eq!(md_tree(&d), before);
    // Nothing left to show or apply.
    let out = d.review(&["show"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_json(&out)["reason"], "no_proposal");
    let out = d.review(&["apply", &id]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_json(&out)["reason"], "not_a_proposal");
    assert_eq!(md_tree(&d), before);
}

#[test]
fn the_mode_comes_from_the_environment_and_a_bad_one_is_exit_2() {
    let d = Dream::new();
    let before = md_tree(&d);
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    script_full_consolidation(&d);
    let out = d
        .cmd("dream-run")
        .env("DREAMKIT_DREAM_MODE", "propose")
        .write_stdin(envelope.clone())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    check_proposal(&d, &stdout_json(&out)["run"]);
    assert_eq!(md_tree(&d), before);

    let tasks_before = std::fs::read_dir(d.home.state_dir().join("tasks"))
        .unwrap()
        .count();
    let out = d
        .cmd("dream-run")
        .env("DREAMKIT_DREAM_MODE", "yes")
        .write_stdin(envelope)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
    assert_eq!(stdout_json(&out)["error"]["kind"], "bad_input");
    assert!(stderr_text(&out).contains("DREAMKIT_DREAM_MODE"));
    assert_eq!(
        std::fs::read_dir(d.home.state_dir().join("tasks"))
            .unwrap()
            .count(),
        tasks_before,
        "no task recorded"
    );
    assert_eq!(md_tree(&d), before);
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
        eprintln!("skipped: no `script` to make a terminal");
        return;
    }
    let d = Dream::new();
    d.propose();
    let on_terminal = |no_color: bool| {
        let mut cmd = d.process(Path::new("script"));
        cmd.args(["-qec", "dream-run show --diff", "/dev/null"]);
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
        String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n")
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
    let before = md_tree(&d);
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
    let out = d.run(&envelope, &["--propose"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr_text(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["run"]["status"], "failed");
    assert_eq!(doc["run"]["mode"], "propose");
    let id = task_id(&doc);
    assert!(!d.proposal_dir(&id).exists());
    assert!(!d.home.state_dir().join("snapshots").join(&id).exists());
    assert_eq!(md_tree(&d), before);
    assert_eq!(d.review(&["show"]).status.code(), Some(1));
}

/// `show TASK_ID` also shows what a completed (applied) run changed.
#[test]
fn show_shows_a_completed_runs_changes() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    script_full_consolidation(&d);
    let out = d.run(&envelope, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["run"]["status"], "completed");
    assert!(doc["run"].get("diff_text").is_none(), "only when proposing");
    let id = task_id(&doc);
    let out = d.review(&["show", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let shown = stdout_json(&out);
    assert_eq!(shown["status"], "completed");
    assert_eq!(shown["diff"], doc["run"]["diff"]);
    let text = shown["diff_text"].as_str().unwrap();
    assert!(
        text.contains("-The deploy uses FTP.\n") && text.contains("+++ b/topics/deploy.md\n"),
        "{text}"
    );
    let out = d.review(&["show", &id, "--diff"]);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), text);
}
