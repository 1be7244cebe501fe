//! dream-run attacked through the real binary: the scripted fake model asks for path escapes,
//! odd inputs and huge answers; special files, symlinks and tampered state sit where files are
//! expected. Every wait is bounded, so a hang fails instead of stalling the suite. Expected:
//! never a panic, bad input exit 2 with nothing changed, nothing written outside the memory dir
//! and the state dir, refused tool calls as `is_error` results with the run going on, the
//! memory dir restored on failure, the API key never printed.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::dream::tool_results;
use crate::support::fake_api::{FakeApi, Reply};
use crate::support::run::Ran;
use crate::support::wait;
use crate::support::{hours, mkfifo, session_id, set_age, sha256_hex, tree, ClaudeHome, Run};

const KEY: &str = "sk-ant-attack-SECRET-7d1c";
/// Generous: each run here answers in well under a second when it does not hang.
const BOUND: Duration = Duration::from_secs(30);
const CANARY: &str = "CANARY-51f0-outside";

/// A project with a little memory, one session, an `outside` folder next to it holding a
/// canary, and a fake model.
struct Lab {
    home: ClaudeHome,
    api: FakeApi,
}

impl Lab {
    fn new() -> Lab {
        let home = ClaudeHome::new();
        let mem = home.memory_dir();
        std::fs::create_dir_all(mem.join("topics")).unwrap();
        std::fs::write(
            mem.join("MEMORY.md"),
            "# Memory\n- [Build](topics/build.md)\n",
        )
        .unwrap();
        std::fs::write(mem.join("topics/build.md"), "Build with make.\n").unwrap();
        let session = home.add_session(&session_id(1), hours(2));
        set_age(&session, hours(2));
        home.consolidated(hours(48));
        let outside = home.root.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.md"), format!("{CANARY}\n")).unwrap();
        Lab {
            home,
            api: FakeApi::start(),
        }
    }

    fn mem(&self) -> PathBuf {
        self.home.memory_dir()
    }

    fn outside(&self) -> PathBuf {
        self.home.root.join("outside")
    }

    /// dream-run with the fake model, as a checked run bounded by [`BOUND`].
    fn dream_run<'a>(&self) -> Run<'a> {
        Run::ours(self.process(), "dream-run").timeout(BOUND)
    }

    /// `dream-run -n --unlocked ARGS`, bounded.
    fn run<'a>(&self, args: &[&str]) -> Run<'a> {
        self.dream_run().args(["-n", "--unlocked"]).args(args)
    }

    /// dream-run as a plain process (for pre_exec), with this home's environment and the fake
    /// model; [`Run::command`] runs it.
    fn process(&self) -> Command {
        let mut cmd = self.home.process(crate::support::bin_path("dream-run"));
        cmd.env("ANTHROPIC_BASE_URL", self.api.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .env("DREAMKIT_RETRY_BASE_MS", "1");
        cmd
    }

    /// A completed unlocked run that created `topics/new.md`: its task id.
    fn completed_run_creating_new_md(&self) -> String {
        self.api
            .push(Reply::anthropic_tools(
                "Writing.",
                &[(
                    "write_file",
                    json!({"path": "topics/new.md", "content": "new fact\n"}),
                )],
            ))
            .push(Reply::anthropic_text("Done."));
        let doc = self
            .run(&[])
            .success()
            .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
            // topics/new.md is in no index, and has no frontmatter.
            .stderr_is(
                "dream-run: the run left more problems than it found: orphan_file 0 -> 1, front_matter 1 -> 2 (dream-run check lists them)\n",
            )
            .run_clean()
            .json();
        doc["run"]["task_id"].as_str().unwrap().to_string()
    }

    fn snapshot_dir(&self, task_id: &str) -> PathBuf {
        self.home.state_dir().join("snapshots").join(task_id)
    }

    /// `dream-run undo -n ARGS`, bounded.
    fn undo<'a>(&self, args: &[&str]) -> Run<'a> {
        self.dream_run().args(["undo", "-n"]).args(args)
    }
}

/// The API key appears in neither output.
fn no_secret(ran: &Ran) {
    let all = format!("{}{}", ran.stdout, ran.stderr);
    assert!(!all.contains(KEY), "the API key was printed: {all}");
}

/// A run checked as described and for the API key: never printed, whatever the run does.
trait RunClean {
    fn run_clean(self) -> Ran;
}

impl RunClean for Run<'_> {
    #[track_caller]
    fn run_clean(self) -> Ran {
        let ran = self.run();
        no_secret(&ran);
        ran
    }
}

/// A Messages API answer with exactly these content blocks (ids chosen by the test).
fn raw_tool_answer(content: Vec<Value>) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "msg_raw", "type": "message", "role": "assistant", "model": "test",
            "content": content, "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 10,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        }),
    )
}

// ---------------------------------------------------------------------------------------------
// Findings: these fail until dream-run is fixed.

/// A manifest under the state dir names paths with `..` and an absolute path in `after`: undo
/// must not delete (or write) files outside the memory dir because of it.
#[test]
fn undo_with_a_tampered_manifest_never_touches_files_outside_the_memory_dir() {
    let lab = Lab::new();
    let task = lab.completed_run_creating_new_md();
    let victim_rel = lab.home.root.join("victim-rel.md");
    let victim_abs = lab.home.root.join("victim-abs.md");
    std::fs::write(&victim_rel, "keep me\n").unwrap();
    std::fs::write(&victim_abs, "keep me too\n").unwrap();
    // From the memory dir up to the temporary root: memory, <slug>, projects, .claude, home.
    let rel = "../../../../../victim-rel.md";
    assert!(
        lab.mem().join(rel).exists(),
        "the relative path reaches the victim"
    );
    // The manifest is a log of JSON lines; events appended to it by someone else name the
    // victims. Hashes of what the victims hold now, so "changed since the run" sees nothing
    // changed; absent from `before`, so a restore "deletes the file the run created".
    let manifest_path = lab.snapshot_dir(&task).join("manifest.jsonl");
    let mut log = std::fs::read_to_string(&manifest_path).unwrap();
    for (path, sha) in [
        (rel.to_string(), sha256_hex(b"keep me\n")),
        (
            victim_abs.to_str().unwrap().to_string(),
            sha256_hex(b"keep me too\n"),
        ),
    ] {
        log.push_str(&json!({"event": "after", "path": path, "sha256": sha}).to_string());
        log.push('\n');
    }
    std::fs::write(&manifest_path, log).unwrap();

    // A corrupt snapshot is a local failure (exit 3): nothing restored.
    let doc = lab
        .undo(&[&task])
        .code(3)
        .stdout_json(|doc| assert_ne!(doc["undone"], true, "{doc}"))
        .stderr_with(|err| {
            assert!(
                err.starts_with("dream-run: cannot read the snapshot ")
                    && err.ends_with(
                        "/manifest.jsonl names \"../../../../../victim-rel.md\", which is not inside the memory dir: refused\n"
                    )
                    && err.lines().count() == 1,
                "{err}"
            );
        })
        .run_clean()
        .json();
    assert!(
        victim_rel.exists(),
        "undo deleted {}: {doc}",
        victim_rel.display()
    );
    assert!(
        victim_abs.exists(),
        "undo deleted {}: {doc}",
        victim_abs.display()
    );
    // The run's file left.
    assert!(lab.mem().join("topics/new.md").exists());
}

/// After a completed run, the memory dir's `topics` folder becomes a symlink to a folder
/// outside (holding the file the run created, as it left it). undo follows the link and
/// deletes the outside file, though the write tools refuse every link.
#[test]
fn undo_does_not_follow_a_symlink_swapped_into_the_memory_dir() {
    let lab = Lab::new();
    let task = lab.completed_run_creating_new_md();
    let elsewhere = lab.home.root.join("elsewhere");
    std::fs::rename(lab.mem().join("topics"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, lab.mem().join("topics")).unwrap();
    let before = tree(&elsewhere);

    let doc = lab
        .undo(&[&task])
        .code(3)
        .stdout_json(|doc| assert_ne!(doc["undone"], true, "{doc}"))
        .stderr_is(format!(
            "dream-run: cannot read {mem}: {mem}/topics is a symlink: not followed\n",
            mem = lab.mem().display()
        ))
        .run_clean()
        .json();
    assert_eq!(
        tree(&elsewhere),
        before,
        "undo changed files outside the memory dir through a symlink: {doc}"
    );
}

/// The same swap while a run is going, then the model fails: the restore after the failure
/// must not delete or rewrite files outside the memory dir through the link.
#[test]
fn a_failed_runs_restore_does_not_follow_a_symlink_swapped_in_mid_run() {
    let lab = Lab::new();
    let (mem, elsewhere) = (lab.mem(), lab.home.root.join("elsewhere"));
    let swap = {
        let (mem, elsewhere) = (mem.clone(), elsewhere.clone());
        move || {
            std::fs::rename(mem.join("topics"), &elsewhere).unwrap();
            std::os::unix::fs::symlink(&elsewhere, mem.join("topics")).unwrap();
        }
    };
    lab.api
        .push(Reply::anthropic_tools(
            "Writing.",
            &[
                (
                    "write_file",
                    json!({"path": "topics/new.md", "content": "new fact\n"}),
                ),
                ("read_file", json!({"path": "topics/build.md"})),
                (
                    "edit_file",
                    json!({"path": "topics/build.md", "old_string": "make", "new_string": "cargo"}),
                ),
            ],
        ))
        // Swapped before the second answer, which fails for good (401 is not retried).
        .push(Reply::After(
            Box::new(swap),
            Box::new(Reply::error(401, "authentication_error", "bad key")),
        ));
    let doc = lab
        .run(&[])
        .code(4)
        .stdout_json(|doc| {
assert_eq!(doc["error"]["kind"], "auth", "{doc}");
assert_eq!(doc["run"]["status"], "failed", "{doc}");
})
        .stderr_with(|err| {
            let mem = mem.display();
            let head = format!(
                "dream-run: not restored: topics/build.md: {mem}/topics is a symlink: not followed\n\
                 dream-run: not restored: topics/new.md: {mem}/topics is a symlink: not followed\n\
                 dream-run: the rest was restored; the snapshot stays in "
            );
            assert!(err.starts_with(&head), "{err}");
            assert!(
                err.ends_with(
                    "\ndream-run: the run left more problems than it found: unreadable 0 -> 1 (dream-run check lists them)\n\
                     dream-run: run failed: auth: bad key\n"
                ),
                "{err}"
            );
            assert_eq!(err.lines().count(), 5, "{err}");
        })
        .run_clean()
        .json();
    assert_eq!(doc["run"]["status"], "failed", "{doc}");
    // What the link's target held when the run failed: left as it was.
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("new.md"))
            .ok()
            .as_deref(),
        Some("new fact\n"),
        "the restore deleted a file outside the memory dir"
    );
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("build.md")).unwrap(),
        "Build with cargo.\n",
        "the restore rewrote a file outside the memory dir"
    );
}

/// MEMORY.md is a FIFO (nobody writes it): a run that changes nothing must still end.
#[test]
fn a_fifo_as_memory_md_does_not_hang_a_run() {
    let lab = Lab::new();
    mkfifo(&lab.mem().join("MEMORY.md"));
    lab.api
        .push(Reply::anthropic_text("Nothing to consolidate."));
    let doc = lab
        .run(&[])
        .code(0)
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run_clean()
        .json();
    assert_eq!(doc["run"]["status"], "completed");
}

/// `dream-run pending` (a SessionStart hook) with a FIFO as pending-updates.jsonl.
#[test]
fn pending_with_a_fifo_as_the_updates_file_exits_3_without_waiting() {
    let lab = Lab::new();
    mkfifo(&lab.home.state_dir().join("pending-updates.jsonl"));
    lab.dream_run()
        .args(["pending", "-n", "--clear"])
        .code(3)
        .stdout_json(|doc| assert!(doc["error"].is_object(), "{doc}"))
        .stderr_is(format!(
            "dream-run: cannot read {}: not a regular file (a FIFO)\n",
            lab.home.state_dir().join("pending-updates.jsonl").display()
        ))
        .run_clean();
}

/// A completed run that changed files appends to pending-updates.jsonl, here a FIFO: it must
/// end (exit 3, the file named) instead of waiting for a reader.
#[test]
fn a_run_with_a_fifo_as_the_updates_file_ends_with_exit_3() {
    let lab = Lab::new();
    let pending = lab.home.state_dir().join("pending-updates.jsonl");
    mkfifo(&pending);
    lab.api
        .push(Reply::anthropic_tools(
            "Writing.",
            &[(
                "write_file",
                json!({"path": "topics/new.md", "content": "new fact\n"}),
            )],
        ))
        .push(Reply::anthropic_text("Done."));
    let doc = lab
        .run(&[])
        .code(3)
        .stdout_json(|doc| {
assert_eq!(doc["error"]["kind"], "environment", "{doc}");
assert_eq!(doc["run"]["status"], "completed", "{doc}");
})
        .stderr_is(format!(
            "dream-run: cannot append to {}: not a regular file (a FIFO)\n{}",
            pending.display(),
            "dream-run: the run left more problems than it found: orphan_file 0 -> 1, front_matter 1 -> 2 (dream-run check lists them)\n"
        ))
        .run_clean()
        .json();
    assert!(
        doc["run"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("pending-updates.jsonl")),
        "{doc}"
    );
}

/// `undo TASK_ID` whose record is a FIFO.
#[test]
fn undo_of_a_task_whose_record_is_a_fifo_exits_3_without_waiting() {
    let lab = Lab::new();
    let id = "20261203T120000Z-deadbeef";
    mkfifo(
        &lab.home
            .state_dir()
            .join("tasks")
            .join(format!("{id}.json")),
    );
    lab.undo(&[id])
        .code(3)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "environment", "{doc}"))
        .stderr_is(format!(
            "dream-run: cannot read {}: not a regular file (a FIFO)\n",
            lab.home
                .state_dir()
                .join("tasks")
                .join(format!("{id}.json"))
                .display()
        ))
        .run_clean();
}

/// `undo` of a real completed run whose snapshot manifest was replaced by a FIFO.
#[test]
fn undo_with_a_fifo_as_the_snapshot_manifest_exits_3_without_waiting() {
    let lab = Lab::new();
    let task = lab.completed_run_creating_new_md();
    let manifest = lab.snapshot_dir(&task).join("manifest.jsonl");
    std::fs::remove_file(&manifest).unwrap();
    mkfifo(&manifest);
    lab.undo(&[])
        .code(3)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "environment", "{doc}"))
        .stderr_is(format!(
            "dream-run: cannot read the snapshot {}: not a regular file (a FIFO)\n",
            lab.snapshot_dir(&task).display()
        ))
        .run_clean();
    assert!(lab.mem().join("topics/new.md").exists());
}

/// The digest index under the state dir is a FIFO: the run must not wait on it (rebuilding
/// the digests is fine).
#[test]
fn a_fifo_as_the_digest_index_does_not_hang_a_run() {
    let lab = Lab::new();
    mkfifo(&lab.home.state_dir().join("digests").join("index.json"));
    lab.api
        .push(Reply::anthropic_text("Nothing to consolidate."));
    let ran = lab
        .run(&[])
        .code_any("0 or 3, checked below: rebuilding the digests is fine")
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run_clean();
    assert!(matches!(ran.code, Some(0 | 3)), "{}", ran.stdout);
}

/// A 100 MB answer, far over anything `max_tokens` 8192 allows: a model error (exit 4), not
/// 100 MB (and its copies) taken into memory and sent back in the next request.
#[test]
fn a_100_mb_model_answer_is_a_model_error() {
    let lab = Lab::new();
    let text = "a".repeat(100 * 1024 * 1024);
    lab.api.push(Reply::json(
        200,
        json!({
            "id": "msg_huge", "type": "message", "role": "assistant", "model": "test",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 10,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        }),
    ));
    drop(text);
    lab.run(&[])
        .code(4)
        .stdout_with(|text| assert!(text.len() < 64 * 1024, "printed {} bytes", text.len()))
        .stdout_json(|doc| assert_eq!(doc["run"]["error"], "model"))
        .stderr_is("dream-run: run failed: malformed_response: the answer is larger than 4194304 bytes: stopped reading it\n")
        .run_clean();
}

// ---------------------------------------------------------------------------------------------
// Attacks that held (not covered elsewhere through the binary).

/// Path escapes by every route, through the real binary: each is a tool error, the run goes
/// on and completes, nothing outside changes, and the canary never reaches the model.
#[test]
fn path_escapes_through_the_binary_are_tool_errors_and_the_run_goes_on() {
    let lab = Lab::new();
    let (mem, outside) = (lab.mem(), lab.outside());
    std::os::unix::fs::symlink(outside.join("secret.md"), mem.join("escape.md")).unwrap();
    std::os::unix::fs::symlink(&outside, mem.join("linked")).unwrap();
    // A hard link to a file outside: readable (its real path is inside), but a write replaces
    // the link, never the outside file.
    std::fs::write(outside.join("hard.md"), "outside hard\n").unwrap();
    std::fs::hard_link(outside.join("hard.md"), mem.join("hard.md")).unwrap();
    let abs = outside.join("new.md").to_string_lossy().into_owned();
    let before = tree(&outside);
    let calls: Vec<(&str, Value)> = vec![
        ("write_file", json!({"path": "../x.md", "content": "x"})),
        (
            "write_file",
            json!({"path": "topics/../../x.md", "content": "x"}),
        ),
        ("write_file", json!({"path": abs, "content": "x"})),
        ("write_file", json!({"path": "escape.md", "content": "x"})),
        (
            "write_file",
            json!({"path": "linked/new.md", "content": "x"}),
        ),
        (
            "edit_file",
            json!({"path": "escape.md", "old_string": "CANARY", "new_string": "x"}),
        ),
        ("delete_file", json!({"path": "escape.md"})),
        ("delete_file", json!({"path": "linked/secret.md"})),
        ("read_file", json!({"path": "escape.md"})),
        ("read_file", json!({"path": "linked/secret.md"})),
        ("read_file", json!({"path": "/proc/self/root/etc/passwd"})),
        ("shell", json!({"command": "cat escape.md"})),
        ("shell", json!({"command": "cat linked/secret.md"})),
        ("shell", json!({"command": "grep -R CANARY ."})),
        ("shell", json!({"command": "grep -r CANARY linked/"})),
        (
            "shell",
            json!({"command": "cat /proc/self/cwd/linked/secret.md"}),
        ),
        (
            "shell",
            json!({"command": "cat /proc/self/root/etc/passwd"}),
        ),
        ("shell", json!({"command": "cat /dev/stdin"})),
        ("shell", json!({"command": "tail -f MEMORY.md"})),
        ("shell", json!({"command": "tail --follow=name MEMORY.md"})),
        ("shell", json!({"command": "tail -F MEMORY.md"})),
        (
            "shell",
            json!({"command": "wc --files0-from=../../../../../outside/secret.md"}),
        ),
        (
            "shell",
            json!({"command": "cat $'..\\x2f..\\x2fsecret.md'"}),
        ),
        (
            "shell",
            json!({"command": "cat MEMORY.md|cat ../../../../../outside/secret.md"}),
        ),
        ("shell", json!({"command": "cat MEMORY.md |& cat"})),
        ("shell", json!({"command": "cat <(cat /etc/passwd)"})),
        ("shell", json!({"command": "stat -L escape.md"})),
        ("shell", json!({"command": "find . -lname '*' -printf %l"})),
        ("shell", json!({"command": "head -c 10 /dev/zero"})),
        ("shell", json!({"command": "grep -D read -r x ."})),
        ("shell", json!({"command": "env cat /etc/passwd"})),
        ("shell", json!({"command": "/usr/bin/env cat /etc/passwd"})),
        ("shell", json!({"command": "cat MEMORY.md | /bin/sh"})),
        ("shell", json!({"command": "ls -d /*"})),
        (
            "shell",
            json!({"command": "grep --exclude-from=escape.md -r x ."}),
        ),
    ];
    let count = calls.len();
    lab.api
        .push(Reply::anthropic_tools("Escaping.", &calls))
        .push(Reply::anthropic_tools(
            "Still here.",
            &[
                ("read_file", json!({"path": "hard.md"})),
                (
                    "write_file",
                    json!({"path": "hard.md", "content": "inside\n"}),
                ),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    let doc = lab
        .run(&[])
        .code(0)
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run_clean()
        .json();
    assert_eq!(doc["run"]["status"], "completed");
    let requests = lab.api.requests();
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), count);
    for ((text, _), (name, input)) in results.iter().zip(&calls) {
        assert!(
            !text.contains(CANARY) && !text.contains("root:x:0"),
            "{name} {input} leaked: {text}"
        );
    }
    // Every write-side call and every read that leaves the roots is refused.
    for (i, (text, is_error)) in results.iter().enumerate().take(11) {
        assert!(is_error, "call {i} {:?} was allowed: {text}", calls[i]);
    }
    let last = tool_results(&requests[2]);
    assert!(!last[1].1, "a write over a hard link inside: {last:?}");
    assert_eq!(
        std::fs::read_to_string(mem.join("hard.md")).unwrap(),
        "inside\n"
    );
    let mut after = tree(&outside);
    assert_eq!(after.len(), before.len());
    after.retain(|(p, _)| !p.ends_with("hard.md"));
    let mut expected = before.clone();
    expected.retain(|(p, _)| !p.ends_with("hard.md"));
    assert_eq!(after, expected);
    assert_eq!(
        std::fs::read_to_string(outside.join("hard.md")).unwrap(),
        "outside hard\n",
        "a write through a hard link changed the outside file"
    );
}

/// Inputs of the wrong JSON type, unknown tools and repeated tool_use ids: each answered with
/// an `is_error` result under its own id, the run goes on.
#[test]
fn wrong_types_unknown_tools_and_repeated_ids_are_tool_errors() {
    let lab = Lab::new();
    let blocks: Vec<Value> = [
        ("shell", json!("ls")),
        ("shell", json!(["ls"])),
        ("shell", Value::Null),
        ("shell", json!({"command": ["ls"]})),
        ("shell", json!({"command": 7})),
        ("read_file", json!({"path": 5})),
        ("read_file", json!({"path": "MEMORY.md", "offset": "x"})),
        ("read_file", json!({"path": "MEMORY.md", "limit": -1})),
        ("write_file", json!({"path": "a.md", "content": {"x": 1}})),
        ("write_file", json!({"path": ["a.md"], "content": "x"})),
        ("edit_file", json!({"path": "MEMORY.md", "old_string": 1, "new_string": 2})),
        ("delete_file", json!({"path": true})),
        ("bash", json!({"command": "ls"})),
        ("", json!({})),
    ]
    .into_iter()
    .map(|(name, input)| json!({"type": "tool_use", "id": "toolu_same", "name": name, "input": input}))
    .collect();
    let count = blocks.len();
    lab.api
        .push(raw_tool_answer(blocks))
        .push(Reply::anthropic_text("Done."));
    let before = tree(&lab.mem());
    let doc = lab
        .run(&[])
        .code(0)
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run_clean()
        .json();
    assert_eq!(doc["run"]["status"], "completed");
    let results = tool_results(&lab.api.requests()[1]);
    assert_eq!(results.len(), count);
    for (text, is_error) in &results {
        assert!(is_error, "allowed: {text}");
    }
    assert_eq!(tree(&lab.mem()), before);
}

/// One answer with 500 tool calls: 500 results in the next request, in order; 64 of them run
/// (the default --max-calls-per-turn), the rest are tool errors saying why; with the limit
/// raised, all run.
#[test]
fn a_reply_with_500_tool_calls_is_answered_call_by_call() {
    let calls: Vec<(&str, Value)> = (0..500)
        .map(|n| {
            if n % 2 == 0 {
                ("read_file", json!({"path": "MEMORY.md", "limit": 1}))
            } else {
                (
                    "write_file",
                    json!({"path": format!("many/{n}.md"), "content": format!("{n}\n")}),
                )
            }
        })
        .collect();
    for (flags, run) in [(&[][..], 64), (&["--max-calls-per-turn", "500"][..], 500)] {
        let lab = Lab::new();
        lab.api
            .push(Reply::anthropic_tools("Many.", &calls))
            .push(Reply::anthropic_text("Done."));
        let doc = lab
            .run(flags)
            .code(0)
            .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
            .stderr_is(format!(
                "dream-run: the run left more problems than it found: orphan_file 0 -> {}, front_matter 1 -> {} (dream-run check lists them)\n",
                run / 2,
                run / 2 + 1
            ))
            .run_clean()
            .json();
        let results = tool_results(&lab.api.requests()[1]);
        assert_eq!(results.len(), 500);
        assert!(results[..run].iter().all(|(_, e)| !e), "{flags:?}");
        // The reason once, then a short refusal for each of the rest.
        for (i, (text, is_error)) in results[run..].iter().enumerate() {
            assert!(is_error);
            if i == 0 {
                assert!(
                    text.contains("at most 64 tool calls run per turn"),
                    "{text}"
                );
            } else {
                assert_eq!(text, "not run");
            }
        }
        assert_eq!(
            doc["run"]["files_touched"].as_array().unwrap().len(),
            run / 2
        );
        assert_eq!(doc["run"]["tool_calls"], 500);
        let last = format!("many/{}.md", run - 1);
        assert_eq!(
            std::fs::read_to_string(lab.mem().join(&last)).unwrap(),
            format!("{}\n", run - 1)
        );
        assert!(!lab.mem().join(format!("many/{}.md", run + 1)).exists());
    }
}

/// A 10 MB write and a path of 10 KB are refused as tool errors, the run goes on; nothing of
/// them lands in the memory dir.
#[test]
fn a_1_mb_write_and_a_10_kb_path_are_tool_errors() {
    let lab = Lab::new();
    let before = tree(&lab.mem());
    lab.api
        .push(Reply::anthropic_tools(
            "Huge.",
            &[
                (
                    "write_file",
                    json!({"path": "big.md", "content": "x".repeat(1024 * 1024)}),
                ),
                (
                    "edit_file",
                    json!({"path": "MEMORY.md", "old_string": "# Memory", "new_string": "y".repeat(1024 * 1024)}),
                ),
                (
                    "write_file",
                    json!({"path": format!("{}.md", "d/".repeat(5000)), "content": "x"}),
                ),
                ("shell", json!({"command": format!("grep {} .", "a".repeat(200_000))})),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    lab.run(&[])
        .code(0)
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run_clean();
    let results = tool_results(&lab.api.requests()[1]);
    assert_eq!(results.len(), 4);
    for (text, is_error) in &results[..3] {
        assert!(is_error, "{}", &text[..text.len().min(200)]);
    }
    assert_eq!(tree(&lab.mem()), before);
}

/// Tool input nested 5000 deep: the answer cannot be parsed, the run fails as a model error
/// (exit 4), restores what it wrote, and does not crash.
#[test]
fn deeply_nested_tool_input_fails_the_run_cleanly_and_restores() {
    let lab = Lab::new();
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let body = format!(
        r#"{{"id":"m","type":"message","role":"assistant","model":"t","stop_reason":"tool_use","usage":{{"input_tokens":1,"output_tokens":1}},"content":[{{"type":"tool_use","id":"toolu_deep","name":"shell","input":{{"command":{deep}}}}}]}}"#
    );
    lab.api.push(Reply::anthropic_tools(
        "Writing.",
        &[(
            "write_file",
            json!({"path": "topics/build.md", "content": "changed\n"}),
        )],
    ));
    for _ in 0..6 {
        lab.api.push(Reply::Http {
            status: 200,
            headers: Vec::new(),
            body: body.clone(),
        });
    }
    let doc = lab
        .run(&[])
        .code(4)
        .stdout_json(|doc| {
assert_eq!(doc["error"]["kind"], "malformed_response", "{doc}");
assert_eq!(doc["run"]["status"], "failed", "{doc}");
})
        .stderr_is("dream-run: run failed: malformed_response: answer is not JSON: recursion limit exceeded at line 1 column 334\n")
        .run_clean()
        .json();
    assert_eq!(doc["run"]["error"], "model");
    assert_eq!(
        std::fs::read_to_string(lab.mem().join("topics/build.md")).unwrap(),
        "Build with make.\n"
    );
}

/// Malformed, empty and truncated answers after a write: exit 4, the write undone.
#[test]
fn broken_model_answers_fail_with_exit_4_and_restore() {
    for broken in ["malformed", "empty", "truncated", "not an object"] {
        let lab = Lab::new();
        lab.api.push(Reply::anthropic_tools(
            "Writing.",
            &[(
                "write_file",
                json!({"path": "topics/new.md", "content": "x\n"}),
            )],
        ));
        for _ in 0..6 {
            lab.api.push(match broken {
                "malformed" => Reply::malformed(),
                "empty" => Reply::Http {
                    status: 200,
                    headers: Vec::new(),
                    body: String::new(),
                },
                "truncated" => Reply::Truncated {
                    status: 200,
                    body: json!({"content": [{"type": "text", "text": "x".repeat(1000)}]})
                        .to_string(),
                },
                _ => Reply::json(200, json!([1, 2, 3])),
            });
        }
        let doc = lab
            .run(&[])
            .code(4)
            .stdout_json(|doc| assert_eq!(doc["run"]["status"], "failed", "{doc}"))
            .stderr_is(match broken {
                "malformed" => "dream-run: run failed: malformed_response: answer is not JSON: expected value at line 1 column 14\n".to_string(),
                "empty" => "dream-run: run failed: malformed_response: answer is not JSON: EOF while parsing a value at line 1 column 0\n".to_string(),
                "truncated" => format!(
                    "dream-run: run failed: network: {}/v1/messages: error reading a body from connection: end of file before message length reached\n",
                    lab.api.url()
                ),
                _ => "dream-run: run failed: malformed_response: answer has no content array\n".to_string(),
            })
            .run_clean()
            .json();
        assert_eq!(doc["run"]["status"], "failed", "{broken}");
        assert!(!lab.mem().join("topics/new.md").exists(), "{broken}");
    }
}

/// Envelopes with wrong types anywhere dream-run reads: exit 2, bad_input, nothing written
/// anywhere, no model request.
#[test]
fn envelopes_with_wrong_types_are_bad_input_and_change_nothing() {
    let lab = Lab::new();
    let before = tree(&lab.home.root);
    let sessions_field = "envelope field `gate.sessions`";
    for (envelope, why) in [
        (
            json!({"gate": {"due": true, "sessions": "all"}, "lock": {"acquired": true, "token": "1:2"}}),
            "envelope field `gate`: invalid type: string \"all\", expected a sequence".to_string(),
        ),
        (
            json!({"gate": {"due": true, "sessions": [{"id": "../../../etc/passwd"}]}, "lock": {"acquired": true, "token": "1:2"}}),
            format!("{sessions_field}: \"../../../etc/passwd\" is not a session id"),
        ),
        (
            json!({"gate": {"due": true, "sessions": [{"id": "a/b"}]}, "lock": {"acquired": true, "token": "1:2"}}),
            format!("{sessions_field}: \"a/b\" is not a session id"),
        ),
        (
            json!({"gate": {"due": true, "sessions": [{"id": 5}]}, "lock": {"acquired": true, "token": "1:2"}}),
            "envelope field `gate`: invalid type: integer `5`, expected a string".to_string(),
        ),
        (
            json!({"gate": {"due": true, "sessions": [session_id(1)]}, "lock": {"acquired": true, "token": "1:2"}}),
            format!(
                "envelope field `gate`: invalid type: string \"{}\", expected struct GateSession",
                session_id(1)
            ),
        ),
        (
            json!({"gate": "yes", "lock": {"acquired": true, "token": "1:2"}}),
            "envelope field `gate.due` must be true or false, not missing (`gate` is \"yes\" (a string))".to_string(),
        ),
        (
            json!({"lock": {"acquired": true, "token": 12345}}),
            "envelope field `lock.token` must be a non-empty string, not 12345".to_string(),
        ),
        (
            json!({"lock": {"acquired": true, "token": ""}}),
            "envelope field `lock.token` must be a non-empty string, not \"\"".to_string(),
        ),
        (
            json!({"lock": {"acquired": true, "token": ["a"]}}),
            "envelope field `lock.token` must be a non-empty string, not [\"a\"]".to_string(),
        ),
        (
            json!({"lock": {"acquired": true, "token": "1:2", "prior_mtime": "yesterday"}}),
            "envelope field `lock.prior_mtime` must be epoch milliseconds, not \"yesterday\"".to_string(),
        ),
        (
            json!({"lock": {"acquired": true, "token": "1:2", "prior_mtime": -5}}),
            "envelope field `lock.prior_mtime` must be epoch milliseconds, not -5".to_string(),
        ),
        (
            json!({"lock": {"acquired": "true", "token": "1:2"}}),
            "envelope field `lock.acquired` must be true or false, not \"true\" (a string)".to_string(),
        ),
        (
            json!({"lock": "held"}),
            "envelope field `lock.acquired` must be true or false, not missing (`lock` is \"held\" (a string))".to_string(),
        ),
        (
            json!([1, 2]),
            "stdin must hold one JSON object, not an array".to_string(),
        ),
        (
            json!("envelope"),
            "stdin must hold one JSON object, not a string".to_string(),
        ),
    ] {
        lab.dream_run()
            .stdin(envelope.to_string())
            .code(2)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "bad_input", "{envelope}: {doc}"))
            .stderr_with(|err| assert_eq!(err.trim_end().lines().count(), 1, "{envelope}"))
            .stderr_is(format!("dream-run: {why}\n"))
            .run_clean();
    }
    for (i, (bytes, why)) in [
        (
            &b"{\"lock\": {\"acquired\": tr"[..],
            "EOF while parsing a value at line 1 column 24",
        ),
        (b"\xff\xfe{}", "expected value at line 1 column 1"),
        (b"{} {}", "trailing characters at line 1 column 4"),
    ]
    .into_iter()
    .enumerate()
    {
        lab.dream_run()
            .stdin(bytes)
            .code(2)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "bad_input", "{i}: {doc}"))
            .stderr_is(format!("dream-run: stdin is not one JSON object: {why}\n"))
            .run_clean();
    }
    assert!(lab.api.requests().is_empty());
    assert_eq!(tree(&lab.home.root), before, "a bad envelope changed files");
}

/// Task ids that are not ids: exit 2 (or clap's usage 2), nothing read or changed.
#[test]
fn undo_refuses_odd_task_ids_with_exit_2() {
    let lab = Lab::new();
    let task = lab.completed_run_creating_new_md();
    let before = tree(&lab.home.root);
    let long = "a".repeat(65);
    for id in [
        "../../etc",
        "../tasks/x",
        "/etc/passwd",
        "a b",
        "ÿ",
        "x.json",
        "",
        long.as_str(),
        "-rf",
        "20261203T120000Z-dead\nbeef",
    ] {
        let doc = lab
            .undo(&[id])
            .code(2)
            .stdout_json(move |doc| {
                let kind = if id == "-rf" { "usage" } else { "bad_input" };
                assert_eq!(doc["error"]["kind"], kind, "{doc}");
            })
            .stderr_is(if id == "-rf" {
                crate::support::usage_stderr("dream-run", "unexpected argument '-r' found")
            } else {
                format!("dream-run: {id:?} is not a task id\n")
            })
            .run_clean()
            .json();
        assert!(
            matches!(doc["error"]["kind"].as_str(), Some("bad_input" | "usage")),
            "{id:?}: {doc}"
        );
    }
    assert_eq!(tree(&lab.home.root), before);
    assert!(lab.mem().join("topics/new.md").exists(), "{task}");
}

/// FIFOs as a session transcript and as --notify-transcript: nothing waits on them; the run
/// completes (the notice fails with exit 3 and names the file).
#[test]
fn fifo_session_transcript_and_notify_transcript_never_block() {
    let lab = Lab::new();
    let fifo_session = lab
        .home
        .transcripts_dir()
        .join(format!("{}.jsonl", session_id(2)));
    mkfifo(&fifo_session);
    let notify = lab.home.root.join("notify.jsonl");
    mkfifo(&notify);
    lab.api
        .push(Reply::anthropic_tools(
            "Reading.",
            &[
                ("read_file", json!({"path": fifo_session.to_str().unwrap()})),
                (
                    "shell",
                    json!({"command": format!("wc -l {}", fifo_session.display())}),
                ),
                (
                    "write_file",
                    json!({"path": "topics/new.md", "content": "x\n"}),
                ),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    let envelope =
        json!({"gate": {"due": true, "sessions": [{"id": session_id(1)}, {"id": session_id(2)}]}});
    // A FIFO named as the transcript to notify is refused before anything is asked.
    lab.dream_run()
        .args(["--unlocked", "--shell-timeout", "2s", "--notify-transcript"])
        .arg(&notify)
        .stdin(envelope.to_string())
        .code(3)
        .stdout_json(|doc| {
            assert!(
                doc["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("notify.jsonl"),
                "{doc}"
            );
        })
        .stderr_is(format!(
            "dream-run: cannot open --notify-transcript {}: not a regular file (a FIFO)\n",
            notify.display()
        ))
        .run_clean();
    assert!(lab.api.requests().is_empty(), "nothing asked of the model");
    // Without it the run goes on; the FIFO session is left out, and the tools never wait on
    // it either.
    let doc = lab
        .dream_run()
        .args(["--unlocked", "--shell-timeout", "2s"])
        .stdin(envelope.to_string())
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_is(format!(
            "dream-run: session not readable, left out: {}: a FIFO\n{}",
            fifo_session.display(),
            "dream-run: the run left more problems than it found: orphan_file 0 -> 1, front_matter 1 -> 2 (dream-run check lists them)\n"
        ))
        .run_clean()
        .json();
    assert_eq!(doc["run"]["status"], "completed");
    assert_eq!(doc["run"]["sessions_reviewed"], 1);
    assert_eq!(
        doc["run"]["unreadable_sessions"][0]["session_id"],
        session_id(2)
    );
    assert!(doc["run"]["warnings"]
        .as_array()
        .unwrap()
        .contains(&json!("unreadable_sessions")));
    let results = tool_results(&lab.api.requests()[1]);
    assert!(results[0].1, "read_file of a FIFO: {:?}", results[0]);
    assert!(results[1].1, "wc of a FIFO: {:?}", results[1]);
    assert!(results[1].0.contains("is a FIFO"), "{:?}", results[1]);
}

/// A full disk (file-size limit, SIGXFSZ ignored) when the model writes a large file: a tool
/// error, the run goes on; nothing half-written stays in the memory dir.
#[test]
fn a_full_disk_during_a_write_is_a_tool_error_and_leaves_no_partial_file() {
    let lab = Lab::new();
    let before = tree(&lab.mem());
    lab.api
        .push(Reply::anthropic_tools(
            "Writing.",
            &[(
                "write_file",
                json!({"path": "topics/big.md", "content": "z".repeat(200 * 1024)}),
            )],
        ))
        .push(Reply::anthropic_text("Done."));
    let mut cmd = lab.process();
    // Room for the task record, digests and snapshot, not for a 200 KB memory file.
    let limit: u64 = 64 * 1024;
    unsafe {
        cmd.pre_exec(move || {
            let rlimit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rlimit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    Run::command(cmd, "dream-run (64 KB file-size limit)")
        .args(["-n", "--unlocked"])
        .stdin_from(Stdio::null())
        .timeout(BOUND)
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run_clean();
    let results = tool_results(&lab.api.requests()[1]);
    assert!(results[0].1, "{results:?}");
    assert_eq!(tree(&lab.mem()), before, "a partial file was left");
}

/// SIGTERM while the model is being waited for, right after a write: exit 143, aborted,
/// restored; the task record says so.
#[test]
fn sigterm_while_waiting_for_the_model_aborts_and_restores() {
    let lab = Lab::new();
    lab.api
        .push(Reply::anthropic_tools(
            "Writing.",
            &[(
                "write_file",
                json!({"path": "topics/build.md", "content": "changed\n"}),
            )],
        ))
        .push(Reply::Hang(Duration::from_secs(60)));
    let running = lab
        .run(&[])
        .stdin_from(Stdio::null())
        .code(143)
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "aborted"))
        .stderr_is("dream-run: run aborted: stopped by signal 15\n")
        .spawn();
    wait::until("the second request", || {
        (lab.api.requests().len() >= 2).then_some(())
    });
    running.signal(libc::SIGTERM);
    no_secret(&running.finish());
    assert_eq!(
        std::fs::read_to_string(lab.mem().join("topics/build.md")).unwrap(),
        "Build with make.\n"
    );
}

/// Two runs at once on one project under the lock: the second acquire is refused and nothing
/// runs twice; dream-run with another run's (stale) token cannot write.
#[test]
fn a_second_run_with_a_token_that_is_not_the_holders_cannot_write() {
    let lab = Lab::new();
    let holder = crate::support::LiveProcess::start();
    Run::new(&lab.home, "dream-lock")
        .args(["acquire", "-n", "--pid", &holder.pid().to_string()])
        .success()
        .stdout_json(|doc| assert_eq!(doc["lock"]["acquired"], true))
        .stderr_empty()
        .run();
    Run::new(&lab.home, "dream-lock")
        .args(["acquire", "-n"])
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["lock"]["acquired"], false))
        .stderr_with(|err| {
            assert!(
                err.starts_with(&format!(
                    "dream-lock: busy: the lock is held by PID {} since ",
                    holder.pid()
                )) && err.lines().count() == 1,
                "{err}"
            );
        })
        .run();
    lab.api
        .push(Reply::anthropic_tools(
            "Writing.",
            &[(
                "write_file",
                json!({"path": "topics/build.md", "content": "changed\n"}),
            )],
        ))
        .push(Reply::anthropic_text("Done."));
    let envelope = json!({"lock": {"acquired": true, "token": "999999:1"}});
    lab.dream_run()
        .stdin(envelope.to_string())
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["run"]["error"], "lock_lost"))
        .stderr_is("dream-run: run failed: the consolidation lock is no longer held by this envelope's token\n")
        .run_clean();
    assert_eq!(
        std::fs::read_to_string(lab.mem().join("topics/build.md")).unwrap(),
        "Build with make.\n"
    );
}

/// A proxy or gateway that echoes the key in its error message (as some do for a bad key):
/// dream-run prints the model's message in `run.message` and on stderr, and must redact the
/// key there.
#[test]
fn a_model_error_that_echoes_the_api_key_does_not_print_it() {
    let lab = Lab::new();
    lab.api.push(Reply::error(
        401,
        "authentication_error",
        &format!("invalid x-api-key: {KEY}"),
    ));
    lab.run(&[])
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "failed");
            assert_eq!(doc["run"]["message"], "auth: invalid x-api-key: [redacted]");
        })
        .stderr_is("dream-run: run failed: auth: invalid x-api-key: [redacted]\n")
        .run_clean();
}

/// The memory dir itself is a symlink to a folder elsewhere (a synced folder): the run writes
/// through it as the memory dir, a failure restores there, and nothing else changes.
#[test]
fn a_memory_dir_that_is_a_symlink_is_used_as_the_memory_dir() {
    let lab = Lab::new();
    let real = lab.home.root.join("synced-memory");
    std::fs::rename(lab.mem(), &real).unwrap();
    std::os::unix::fs::symlink(&real, lab.mem()).unwrap();
    let mem_abs = lab.mem().join("topics/new.md");
    lab.api
        .push(Reply::anthropic_tools(
            "Writing.",
            &[
                (
                    "write_file",
                    json!({"path": mem_abs.to_str().unwrap(), "content": "a\n"}),
                ),
                ("read_file", json!({"path": "topics/build.md"})),
                (
                    "edit_file",
                    json!({"path": "topics/build.md", "old_string": "make", "new_string": "cargo"}),
                ),
            ],
        ))
        .push(Reply::error(401, "authentication_error", "bad key"));
    let before = tree(&real);
    lab.run(&[])
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "auth", "{doc}");
            assert_eq!(doc["run"]["status"], "failed", "{doc}");
        })
        .stderr_is("dream-run: run failed: auth: bad key\n")
        .run_clean();
    let results = tool_results(&lab.api.requests()[1]);
    assert!(results.iter().all(|(_, e)| !e), "{results:?}");
    assert_eq!(tree(&real), before, "not restored through the link");
    assert!(std::fs::symlink_metadata(lab.mem())
        .unwrap()
        .file_type()
        .is_symlink());
}

fn file_mode(path: &Path) -> u32 {
    crate::support::mode(&std::fs::metadata(path).unwrap())
}

/// A private (0600) memory file the run edited: the restore after a failure puts its content
/// back and must keep it private (it is rewritten 0644 now, readable by every user).
#[test]
fn a_failed_runs_restore_keeps_a_private_files_mode() {
    let lab = Lab::new();
    let build = lab.mem().join("topics/build.md");
    crate::support::chmod(&build, 0o600);
    lab.api
        .push(Reply::anthropic_tools(
            "Editing.",
            &[
                ("read_file", json!({"path": "topics/build.md"})),
                (
                    "edit_file",
                    json!({"path": "topics/build.md", "old_string": "make", "new_string": "cargo"}),
                ),
            ],
        ))
        .push(Reply::error(401, "authentication_error", "bad key"));
    lab.run(&[])
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "auth", "{doc}");
            assert_eq!(doc["run"]["status"], "failed", "{doc}");
        })
        .stderr_is("dream-run: run failed: auth: bad key\n")
        .run_clean();
    assert_eq!(
        std::fs::read_to_string(&build).unwrap(),
        "Build with make.\n"
    );
    assert_eq!(file_mode(&build), 0o600, "the restore widened the mode");
}

/// The same through `undo` of a completed run.
#[test]
fn undo_keeps_a_private_files_mode() {
    let lab = Lab::new();
    let build = lab.mem().join("topics/build.md");
    crate::support::chmod(&build, 0o600);
    lab.api
        .push(Reply::anthropic_tools(
            "Editing.",
            &[
                ("read_file", json!({"path": "topics/build.md"})),
                (
                    "edit_file",
                    json!({"path": "topics/build.md", "old_string": "make", "new_string": "cargo"}),
                ),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    lab.run(&[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed"))
        .stderr_empty()
        .run_clean();
    assert_eq!(file_mode(&build), 0o600, "the edit kept the mode");
    lab.undo(&[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["undone"], true, "{doc}"))
        .stderr_empty()
        .run_clean();
    assert_eq!(
        std::fs::read_to_string(&build).unwrap(),
        "Build with make.\n"
    );
    assert_eq!(file_mode(&build), 0o600, "undo widened the mode");
}

/// The run edits MEMORY.md, then Claude Code (which takes no lock for its own memory writes)
/// adds a line to it, then the run fails: the restore must not throw that line away ("never
/// lose memory"); undo already refuses in this case, the failure restore overwrites.
#[test]
fn a_failed_runs_restore_keeps_an_edit_made_after_the_runs_write() {
    let lab = Lab::new();
    let index = lab.mem().join("MEMORY.md");
    let person = {
        let index = index.clone();
        move || {
            let mut text = std::fs::read_to_string(&index).unwrap();
            text.push_str("- [Person](person.md): written by the session meanwhile\n");
            std::fs::write(&index, text).unwrap();
        }
    };
    lab.api
        .push(Reply::anthropic_tools(
            "Editing.",
            &[(
                "edit_file",
                json!({"path": "MEMORY.md", "old_string": "# Memory\n", "new_string": "# Memory (dreamed)\n"}),
            )],
        ))
        .push(Reply::After(
            Box::new(person),
            Box::new(Reply::error(401, "authentication_error", "bad key")),
        ));
    lab
        .run(&[])
        .code(4)
        .stdout_json(|doc| {
assert_eq!(doc["error"]["kind"], "auth", "{doc}");
assert_eq!(doc["run"]["status"], "failed", "{doc}");
})
        // The person's line points at a file nobody wrote.
        .stderr_is(
            "dream-run: the run left more problems than it found: dangling_link 0 -> 1 (dream-run check lists them)\n\
             dream-run: run failed: auth: bad key\n",
        )
        .run_clean();
    let now = std::fs::read_to_string(&index).unwrap();
    assert!(
        now.contains("written by the session meanwhile"),
        "the restore dropped a line written after the run's edit: {now:?}"
    );
}

/// A memory file nested deeper than the snapshot walks (topic folders in folders): the run
/// edits it and fails. The snapshot never copied it, so the restore takes it for a file the run
/// created and deletes it: memory lost.
#[test]
fn a_failed_runs_restore_never_deletes_a_deep_file_it_only_edited() {
    let lab = Lab::new();
    let rel = "a/b/c/d/e/f/g/h/i/j/deep.md";
    let deep = lab.mem().join(rel);
    std::fs::create_dir_all(deep.parent().unwrap()).unwrap();
    std::fs::write(&deep, "A deep fact.\n").unwrap();
    lab.api
        .push(Reply::anthropic_tools(
            "Editing.",
            &[
                ("read_file", json!({"path": rel})),
                (
                    "edit_file",
                    json!({"path": rel, "old_string": "deep", "new_string": "changed"}),
                ),
            ],
        ))
        .push(Reply::error(401, "authentication_error", "bad key"));
    lab.run(&[])
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "auth", "{doc}");
            assert_eq!(doc["run"]["status"], "failed", "{doc}");
        })
        .stderr_is("dream-run: run failed: auth: bad key\n")
        .run_clean();
    assert_eq!(
        std::fs::read_to_string(&deep).ok().as_deref(),
        Some("A deep fact.\n"),
        "the restore lost a memory file the run had only edited"
    );
}

/// The snapshot is taken before the run's first write; a note Claude Code writes after that,
/// which the run then edits, is not in it: the restore after a failure deletes the note.
#[test]
fn a_failed_runs_restore_never_deletes_a_file_written_after_its_snapshot() {
    let lab = Lab::new();
    let note = lab.mem().join("note.md");
    let person = {
        let note = note.clone();
        move || std::fs::write(&note, "A note from the session.\n").unwrap()
    };
    lab.api
        .push(Reply::anthropic_tools(
            "Writing.",
            &[(
                "write_file",
                json!({"path": "topics/new.md", "content": "new\n"}),
            )],
        ))
        .push(Reply::After(
            Box::new(person),
            Box::new(Reply::anthropic_tools(
                "Editing the note.",
                &[(
                    "edit_file",
                    json!({"path": "note.md", "old_string": "A note", "new_string": "An edited note"}),
                )],
            )),
        ))
        .push(Reply::error(401, "authentication_error", "bad key"));
    lab
        .run(&[])
        .code(4)
        .stdout_json(|doc| {
assert_eq!(doc["error"]["kind"], "auth", "{doc}");
assert_eq!(doc["run"]["status"], "failed", "{doc}");
})
        // The session's note is in no index.
        .stderr_is(
            "dream-run: the run left more problems than it found: orphan_file 0 -> 1, front_matter 1 -> 2 (dream-run check lists them)\n\
             dream-run: run failed: auth: bad key\n",
        )
        .run_clean();
    assert!(!lab.mem().join("topics/new.md").exists());
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("A note from the session.\n"),
        "the restore deleted a note that existed before the run touched it"
    );
}

/// A failed run that created `brand/new/x.md`: the restore removes the file and the folders the
/// run created for it, so the memory dir is as it was.
#[test]
fn a_failed_runs_restore_removes_the_folders_it_created() {
    let lab = Lab::new();
    lab.api
        .push(Reply::anthropic_tools(
            "Writing.",
            &[(
                "write_file",
                json!({"path": "brand/new/x.md", "content": "x\n"}),
            )],
        ))
        .push(Reply::error(401, "authentication_error", "bad key"));
    lab.run(&[])
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "auth", "{doc}");
            assert_eq!(doc["run"]["status"], "failed", "{doc}");
        })
        .stderr_is("dream-run: run failed: auth: bad key\n")
        .run_clean();
    assert!(!lab.mem().join("brand/new/x.md").exists());
    assert!(
        !lab.mem().join("brand").exists(),
        "empty folders left in the memory dir"
    );
}

/// The same deep file edited by a completed run: the diff calls it created, and undo would
/// delete it.
#[test]
fn a_completed_runs_edit_of_a_deep_file_is_modified_and_undo_restores_it() {
    let lab = Lab::new();
    let rel = "a/b/c/d/e/f/g/h/i/j/deep.md";
    let deep = lab.mem().join(rel);
    std::fs::create_dir_all(deep.parent().unwrap()).unwrap();
    std::fs::write(&deep, "A deep fact.\n").unwrap();
    lab.api
        .push(Reply::anthropic_tools(
            "Editing.",
            &[
                ("read_file", json!({"path": rel})),
                (
                    "edit_file",
                    json!({"path": rel, "old_string": "deep", "new_string": "changed"}),
                ),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    let doc = lab
        .run(&[])
        .code(0)
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run_clean()
        .json();
    let abs = deep.to_string_lossy().into_owned();
    assert_eq!(doc["run"]["diff"]["modified"], json!([abs]), "{doc}");
    lab.undo(&[])
        .success()
        .stdout_json(|undo| assert_eq!(undo["undone"], true, "{undo}"))
        .stderr_empty()
        .run_clean();
    assert_eq!(
        std::fs::read_to_string(&deep).ok().as_deref(),
        Some("A deep fact.\n"),
        "undo lost a memory file the run had only edited"
    );
}

/// A task record whose `snapshot` names a folder outside the state dir, holding a crafted
/// manifest and copy: undo must only ever restore from the task's own snapshot folder.
#[test]
fn undo_only_restores_from_the_tasks_own_snapshot_folder() {
    let lab = Lab::new();
    let task = lab.completed_run_creating_new_md();
    let crafted = lab.home.root.join("crafted");
    std::fs::create_dir_all(crafted.join("files")).unwrap();
    std::fs::write(crafted.join("files/MEMORY.md"), "# Planted\n").unwrap();
    let manifest = json!({
        "task_id": task,
        "before": {"MEMORY.md": sha256_hex(b"# Planted\n")},
        "after": {"MEMORY.md": sha256_hex(&std::fs::read(lab.mem().join("MEMORY.md")).unwrap())},
    });
    std::fs::write(
        crafted.join("manifest.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    let record_path = lab
        .home
        .state_dir()
        .join("tasks")
        .join(format!("{task}.json"));
    let mut record: Value = serde_json::from_slice(&std::fs::read(&record_path).unwrap()).unwrap();
    record["snapshot"] = json!(crafted.to_str().unwrap());
    std::fs::write(&record_path, serde_json::to_vec(&record).unwrap()).unwrap();
    let index_before = std::fs::read(lab.mem().join("MEMORY.md")).unwrap();

    let doc = lab
        .undo(&[&task])
        .success()
        .stdout_json(|doc| assert_eq!(doc["undone"], true, "{doc}"))
        .stderr_empty()
        .run_clean()
        .json();
    // The task's own snapshot is the only one used: the run is undone (its new file is
    // gone) and nothing from the crafted folder is planted.
    assert_eq!(
        std::fs::read(lab.mem().join("MEMORY.md")).unwrap(),
        index_before,
        "undo restored from {crafted:?}: {doc}"
    );
    assert_eq!(doc["undone"], true, "{doc}");
    assert!(!lab.mem().join("topics/new.md").exists(), "{doc}");
}

/// A full disk while the copy of a file is kept (a 100 KB memory file the run edits, a 64 KB
/// file-size limit): the write is refused, the run stops as an environment failure (exit 3)
/// and the memory dir is as it was.
#[test]
fn a_full_disk_during_the_snapshot_stops_the_run_with_nothing_changed() {
    let lab = Lab::new();
    std::fs::write(lab.mem().join("topics/large.md"), "l".repeat(100 * 1024)).unwrap();
    let before = tree(&lab.mem());
    lab.api
        .push(Reply::anthropic_tools(
            "Writing.",
            &[
                ("read_file", json!({"path": "topics/large.md"})),
                (
                    "write_file",
                    json!({"path": "topics/large.md", "content": "small now\n"}),
                ),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    let mut cmd = lab.process();
    let limit: u64 = 64 * 1024;
    unsafe {
        cmd.pre_exec(move || {
            let rlimit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rlimit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    Run::command(cmd, "dream-run (64 KB file-size limit)")
        .args(["-n", "--unlocked"])
        .stdin_from(Stdio::null())
        .timeout(BOUND)
        .code(3)
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "failed");
            assert_eq!(doc["run"]["error"], "environment");
        })
        .stderr_with(|err| {
            let large = lab.mem().join("topics/large.md");
            assert!(
                err.starts_with(&format!(
                    "dream-run: run failed: cannot keep a copy of {} in ",
                    large.display()
                )) && err.contains(": File too large (os error 27)")
                    && err.lines().count() == 1,
                "{err}"
            );
        })
        .run_clean();
    assert_eq!(tree(&lab.mem()), before);
}
