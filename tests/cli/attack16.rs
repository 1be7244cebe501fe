//! Attacks on what issue 16 delivered (crash safety, limits inside a turn, truthful records,
//! one runner per lock), as a user, an attacker and a crash would try them. Real processes,
//! real signals, files checked on disk.
//!
//! The first half are findings: each asserts the correct behaviour and fails until dream-run
//! (or dream-lock) is fixed. The second half are attacks that held: they pass today and keep
//! it that way.

use std::os::unix::process::CommandExt;
use std::process::Stdio;

use serde_json::{json, Value};

use crate::support::dream::{
    more_problems, rolled_back, script_full_consolidation, tool_results, Dream, LONG_RUN,
};
use crate::support::fake_api::Reply;
use crate::support::{bin_path, mkfifo, session_id, sha256_hex, LiveProcess, Run};

// ---------------------------------------------------------------------------------------------
// Helpers.

/// `dream-run` whose file writes are limited to `limit` bytes ([`limit_file_size`]).
pub(crate) fn limited<'a>(d: &Dream, limit: u64, ignore: bool) -> Run<'a> {
    let mut cmd = d.process(&bin_path("dream-run"));
    limit_file_size(&mut cmd, limit, ignore);
    Run::ours(cmd, "dream-run").timeout(LONG_RUN)
}

/// What a command refused by a live holder of the lock (PID `pid`) says.
fn busy(pid: u32) -> String {
    format!("dream-run: the consolidation lock is held by PID {pid}: try again later\n")
}

/// Limits the size of any file the child writes to `limit` bytes; with `ignore`, a write past
/// it fails with EFBIG (a full disk, as the process sees it), else SIGXFSZ kills the process at
/// that very write (a crash at a precise point).
fn limit_file_size(cmd: &mut std::process::Command, limit: u64, ignore: bool) {
    unsafe {
        cmd.pre_exec(move || {
            let rlimit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rlimit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            if ignore {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            }
            Ok(())
        });
    }
}

impl Dream {
    fn task16(&self, id: &str) -> Value {
        let path = self
            .home
            .state_dir()
            .join("tasks")
            .join(format!("{id}.json"));
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }
}

// =============================================================================================
// Findings: these fail until the bug is fixed.
// =============================================================================================

/// BUG (data loss): `dream-run discard` takes no lock and does not check for a live apply, and
/// `apply` reads each staged file again at write time and takes a missing one as "delete". A
/// discard while an apply of that proposal runs (a second terminal, a hook) removes the
/// staging copy under the apply, which then DELETES the memory files the proposal modifies
/// (here `stale.md` and `topics/build.md`, a user's notes), records the task `completed`
/// (overwriting `discarded`) and exits 0 saying it applied them.
///
/// Expected: discard of a proposal whose apply runs is refused (it is a state-changing
/// command: under the lock, exit 1 busy), and apply never deletes a file the proposal did not
/// delete (it writes exactly the staged bytes whose hash the record holds, or rolls back).
#[test]
fn discard_during_a_live_apply_must_not_make_the_apply_delete_memory_files() {
    let d = Dream::new();
    // The index an hour older than the notes it links: stale_index holds before the run as
    // after it, however long the run's 400 writes take (its 2 s slack is not a race here).
    crate::support::set_age(&d.mem().join("MEMORY.md"), crate::support::hours(1));
    let id = d.propose_with(
        &["stale.md", "topics/build.md"],
        Dream::many_writes(
            400,
            &[
                ("stale.md", "The deploy is blue-green.\n"),
                ("topics/build.md", "Build with make -j2.\n"),
            ],
        ),
        "orphan_file 0 -> 400, duplicate_entry 0 -> 15999, front_matter 2 -> 402",
    );
    let apply = d
        .background(&["apply"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["applied"], true, "{doc}"))
        .stderr_empty()
        .spawn();
    let first = d.mem().join("many/0000.md");
    let journal = d.journal();
    crate::support::wait::busy_until("the apply's first files", || {
        journal.exists() && first.exists()
    });
    apply.signal(libc::SIGSTOP);
    assert!(
        journal.exists(),
        "the apply finished before it could be stopped: make it longer"
    );
    // A person (or a hook) discards the proposal meanwhile: refused, the apply holds the lock.
    let pid = apply.pid();
    d.tool("dream-run")
        .arg("discard")
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(
                doc["discarded"], false,
                "discard succeeded under a live apply of the same proposal: {doc}"
            );
            assert_eq!(doc["reason"], "busy", "{doc}");
            assert_eq!(doc["task_id"], id.as_str(), "{doc}");
            assert_eq!(doc["holder_pid"], pid, "{doc}");
        })
        .stderr_is(busy(pid))
        .run();
    apply.signal(libc::SIGCONT);
    apply.finish();
    // The user's notes still exist, as the proposal made them: never deleted.
    assert!(
        d.mem().join("stale.md").exists() && d.mem().join("topics/build.md").exists(),
        "memory files deleted"
    );
}

/// BUG (arbitrary file truncation): the file lock's guard `<memory_dir>/.consolidate-lock.dreamkit`
/// is opened following symlinks (O_CREAT without O_NOFOLLOW), and since issue 16 it holds the
/// claim, so every acquire/release `set_len(0)`s it and `dream-run` writes its claim JSON into
/// it. A symlink planted there (by anything that can write the memory dir: a Claude Code
/// session's shell, a synced or repo-hosted memory dir) makes `dream-lock acquire` truncate the
/// file it points to (here a stand-in for `~/.bashrc`) and `dream-run` overwrite it.
///
/// Expected: the guard is opened with O_NOFOLLOW (or lstat-checked), a symlink there is refused
/// (exit 3, like a FIFO) and the link's target is never changed.
#[test]
fn a_symlinked_lock_guard_never_truncates_the_file_it_points_to() {
    let d = Dream::new();
    let victim = d.home.home.join(".bashrc");
    std::fs::write(&victim, "export PATH=$HOME/bin:$PATH\n").unwrap();
    let before = std::fs::read(&victim).unwrap();
    let guard = d.mem().join(".consolidate-lock.dreamkit");
    std::os::unix::fs::symlink(&victim, &guard).unwrap();
    let holder = LiveProcess::start();
    let gate = d.gate_now();
    // Refused like a FIFO there (exit 3), so no dream-run gets an envelope to write its claim
    // through the link.
    d.tool("dream-lock")
        .args(["acquire", "--pid", &holder.pid().to_string()])
        .stdin(gate)
        .code(3)
        .stdout_json(|doc| {
            assert_eq!(doc["lock"]["acquired"], false, "{doc}");
            assert_eq!(doc["lock"]["error"]["reason"], "not_a_file", "{doc}");
        })
        .stderr_is(format!(
            "dream-lock: cannot open the lock guard {}: not a regular file (a symbolic link)\n",
            guard.display()
        ))
        .run();
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        before,
        "dream-lock acquire changed the symlink's target"
    );
}

/// BUG (a killed run cannot be undone): a run's snapshot records only the LAST content it
/// intended for each file (`intend` overwrites `after` before the write lands). When a run
/// writes a file twice and dies between recording the second write and that write landing,
/// the file holds the run's FIRST write, which is neither `before` nor `after`: `dream-run
/// undo` then refuses with `changed_since` ("someone else changed it"), so the crash cannot be
/// repaired. The kill is made deterministic with RLIMIT_FSIZE: SIGXFSZ ends the process at the
/// second write, as a kill -9 or power cut could.
///
/// Expected (issue 16 §2: "a killed run can always be undone"): undo of the orphaned run puts
/// MEMORY.md back as it was before the run (every content the run itself left there counts as
/// the run's, not as someone else's).
#[test]
fn a_run_killed_at_its_second_write_to_a_file_is_rolled_back_and_its_temp_file_swept() {
    let d = Dream::new();
    let before = d.md_tree();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api
        .push(Reply::anthropic_tools(
            "Rewriting the index twice.",
            &[
                ("read_file", json!({"path": "MEMORY.md"})),
                (
                    "write_file",
                    json!({"path": "MEMORY.md", "content": "# Memory\n- first draft\n"}),
                ),
                (
                    "write_file",
                    json!({"path": "MEMORY.md", "content": "# Memory\n".to_string() + &"- a long second draft line\n".repeat(8000)}),
                ),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    // 64 KiB: room for the record, digests and snapshot, not for the 200 KiB second draft.
    // The run was to die at its second write, in the middle of its temporary file.
    limited(&d, 64 * 1024, false)
        .stdin(envelope.as_str())
        .killed_by(libc::SIGXFSZ)
        .stdout_empty()
        .stderr_empty()
        .run();
    assert_eq!(d.read("MEMORY.md"), "# Memory\n- first draft\n");
    let strays: Vec<String> = std::fs::read_dir(d.mem())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".dreamkit-") && name.ends_with(".tmp"))
        .collect();
    assert_eq!(
        strays.len(),
        1,
        "the killed write's temporary file: {strays:?}"
    );
    drop(holder);
    let tasks = d
        .tool("dream-run")
        .arg("tasks")
        .success()
        .stdout_json(|doc| {
            let task = &doc["tasks"][0];
            assert_eq!(task["error"], "orphaned", "{task}");
        })
        .stderr_any("names the task id, checked below")
        .run();
    // The user is told the killed run's write is still there, and how to put it back.
    let id = tasks.json()["tasks"][0]["task_id"].clone();
    assert_eq!(
        tasks.stderr,
        format!(
            "dream-run: task {} died without an end (killed) while it changed the memory dir: \
             `dream-run recover` rolls it back (so does the next run, apply, undo or discard)\n",
            id.as_str().unwrap()
        )
    );
    let memory = d.mem().join("MEMORY.md").to_string_lossy().into_owned();
    let stray = d.mem().join(&strays[0]).to_string_lossy().into_owned();
    d.tool("dream-run")
        .arg("recover")
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["orphans"][0]["outcome"], "rolled_back", "{doc}");
            assert_eq!(doc["orphans"][0]["files"], json!([memory]), "{doc}");
            assert_eq!(doc["swept"], json!({"removed": [stray]}), "{doc}");
        })
        .stderr_with(|text| {
            assert!(
                text.ends_with(" died without an end: rolled back, 1 file put back\n"),
                "{text:?}"
            );
        })
        .run();
    assert_eq!(d.md_tree(), before);
    assert!(!std::path::Path::new(&stray).exists());
}

/// BUG (deletes a directory a record names): `prune_snapshots` (after every completed run and
/// apply) removes `record.snapshot` — a path read from a task record — with `remove_dir_all`,
/// while `undo` deliberately uses only `<state_dir>/snapshots/<task_id>` ("the record only says
/// one exists"). A record naming another folder (a corrupt, hand-edited, restored-from-backup
/// or copied state dir) makes the next completed run delete that folder wherever it is.
///
/// Expected: pruning only ever removes `<state_dir>/snapshots/<task_id>` (a task id being
/// letters, digits and `-`), never the path a record names.
#[test]
fn pruning_snapshots_never_removes_a_folder_a_record_names_outside_the_state_dir() {
    let d = Dream::new();
    let precious = d.home.root.join("precious");
    std::fs::create_dir_all(&precious).unwrap();
    std::fs::write(precious.join("thesis.md"), "years of work\n").unwrap();
    // A real completed run gives a real record to copy.
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    script_full_consolidation(&d);
    let out = d
        .dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run();
    let real_id = out.json()["run"]["task_id"].as_str().unwrap().to_string();
    drop(holder);
    let template = d.task16(&real_id);
    let tasks_dir = d.home.state_dir().join("tasks");
    // Eleven older completed records; the oldest names the precious folder as its snapshot.
    for n in 0..11 {
        let id = format!("20200101T0000{n:02}Z-0000000{n:x}");
        let mut record = template.clone();
        record["task_id"] = json!(id);
        record["started_at"] = json!(format!("2020-01-01T00:00:{:02}.000Z", 20 - n));
        record["snapshot"] = if n == 10 {
            json!(precious.to_str().unwrap())
        } else {
            json!(d
                .home
                .state_dir()
                .join("snapshots")
                .join(&id)
                .to_str()
                .unwrap())
        };
        std::fs::write(
            tasks_dir.join(format!("{id}.json")),
            serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
    }
    // The next completed run prunes.
    d.touch_sessions();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api
        .push(Reply::anthropic_tools(
            "Noting.",
            &[(
                "write_file",
                json!({"path": "topics/note.md", "content": "a note\n"}),
            )],
        ))
        .push(Reply::anthropic_text("Done."));
    d.dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_is(more_problems("orphan_file 0 -> 1, front_matter 2 -> 3"))
        .run();
    assert!(
        precious.join("thesis.md").exists(),
        "a completed run's pruning deleted {}",
        precious.display()
    );
}

/// BUG (limit): "the total tool output returned in one turn is capped (256 KiB)" does not
/// count the refusals: past `--max-calls-per-turn` every extra call still gets a ~110-byte
/// "not run: ..." result, so one reply with 5,000 tool calls makes dream-run send back more
/// than 500 KiB of tool results in one turn (and the cost grows with whatever the model
/// sends). Expected: everything returned in one turn, refusals included, stays within
/// 256 KiB (e.g. one shared refusal, or the calls past the cap answered with an empty error
/// once the cap is reached).
#[test]
fn the_turn_output_cap_counts_the_refusals_too() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let calls: Vec<(&str, Value)> = (0..5000)
        .map(|_| ("shell", json!({"command": "ls"})))
        .collect();
    d.api
        .push(Reply::anthropic_tools("Listing a lot.", &calls))
        .push(Reply::anthropic_text("Done."));
    d.dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run();
    let requests = d.api.requests();
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 5000, "every tool_use gets its result");
    let total: usize = results.iter().map(|(t, _)| t.len()).sum();
    assert!(
        total <= 256 * 1024 + 1024,
        "{total} bytes of tool results returned in one turn"
    );
}

/// BUG (undo takes the wrong run): with no id, `undo` takes the newest record by `started_at`,
/// but an applied proposal keeps the start time of the run that proposed it. A proposal made
/// first, a normal run after it, then `dream-run apply` of the proposal: `dream-run undo` (the
/// README: "takes the newest run that left changes behind") undoes the normal run, not the
/// apply the person just did and wants to take back.
///
/// Expected: the newest change to land is undone first (order by when it completed/applied).
#[test]
fn undo_after_apply_undoes_the_apply_not_an_older_run() {
    let d = Dream::new();
    let proposal = d.propose_with(
        &["stale.md"],
        vec![(
            "write_file",
            json!({"path": "stale.md", "content": "The deploy is blue-green.\n"}),
        )],
        "",
    );
    // A normal run, later, changes another file.
    d.touch_sessions();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api
        .push(Reply::anthropic_tools(
            "Noting.",
            &[(
                "write_file",
                json!({"path": "topics/ci.md", "content": "CI runs on push.\n"}),
            )],
        ))
        .push(Reply::anthropic_text("Done."));
    let out = d
        .dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_is(more_problems("orphan_file 0 -> 1, front_matter 2 -> 3"))
        .run();
    d.release(&out.stdout, "completed");
    drop(holder);
    // Now the person applies the proposal, and changes their mind.
    d.tool("dream-run")
        .arg("apply")
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["applied"], true, "{doc}");
            assert_eq!(doc["task_id"], proposal.as_str(), "{doc}");
        })
        .stderr_empty()
        .run();
    d.tool("dream-run")
        .args(["undo", "--dry-run"])
        .success()
        .stdout_json(|doc| {
            assert_eq!(
                doc["task_id"],
                proposal.as_str(),
                "undo picks the run before the apply"
            );
        })
        .stderr_empty()
        .run();
}

/// BUG (inconsistent check): `--notify-transcript` is checked before the run with
/// `open_regular`, which follows symlinks, but appended to with O_NOFOLLOW. A transcript path
/// that is a symlink to a real transcript passes the check, the model is asked, memory is
/// rewritten, and only then the append fails: the consolidation is done but the run exits 3
/// ("cannot append ... Too many levels of symbolic links").
///
/// Expected: the same rule before and after: either a symlink is refused up front (exit 2,
/// before any model request, nothing changed), or it is followed for the append too.
#[test]
fn a_symlinked_notify_transcript_is_judged_the_same_before_and_after_the_run() {
    let d = Dream::new();
    let real = d
        .home
        .transcripts_dir()
        .join(format!("{}.jsonl", session_id(9)));
    std::fs::write(
        &real,
        format!(
            "{}\n",
            json!({"type": "user", "uuid": "u-1", "sessionId": session_id(9), "cwd": "/p",
                   "message": {"role": "user", "content": "hi"}})
        ),
    )
    .unwrap();
    let link_dir = d.home.root.join("links");
    std::fs::create_dir_all(&link_dir).unwrap();
    let link = link_dir.join(format!("{}.jsonl", session_id(9)));
    std::os::unix::fs::symlink(&real, &link).unwrap();
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
    let out = d
        .dream_run(&envelope, &["--notify-transcript", link.to_str().unwrap()])
        .code_any("either rule is right, judged below: refused up front (2) or followed (0)")
        .stdout_json(|doc| {
            let status = &doc["run"]["status"];
            assert!(status == "completed" || status == "failed", "{doc}");
        })
        .stderr_with(|text| assert!(!text.contains("cannot append"), "{text:?}"))
        .run();
    let code = out.code;
    let refused_up_front = code == Some(2) && d.api.requests().is_empty();
    let appended = code == Some(0)
        && std::fs::read_to_string(&real)
            .unwrap()
            .contains("memory_saved");
    assert!(
        refused_up_front || appended,
        "exit {code:?} after {} model requests: {}",
        d.api.requests().len(),
        out.stderr
    );
    if appended {
        assert_eq!(out.json()["run"]["status"], "completed");
        assert_eq!(
            out.stderr,
            more_problems("orphan_file 0 -> 1, front_matter 2 -> 3")
        );
    } else {
        assert_eq!(out.json()["error"]["kind"], "bad_input");
    }
}

/// BUG (report lost): SIGTERM while `dream-run recover` rolls back is held until the roll-back
/// is done (good), but then the Hold's drop ends the process with only
/// `{"error":{"kind":"interrupted"}}`: the JSON does not say that the roll-back happened and
/// what it restored, although it completed. `apply` and `undo` claim the late signal and keep
/// their document; `recover` (and `when_needed`) drop the hold instead.
///
/// Expected: exit 143 (a signal came) with the `recovered` document of what was rolled back.
#[test]
fn sigterm_during_recover_still_reports_what_was_rolled_back() {
    let d = Dream::new();
    let id = d.propose_with(
        &[],
        Dream::many_writes(500, &[]),
        "orphan_file 0 -> 500, duplicate_entry 0 -> 19999, front_matter 2 -> 502",
    );
    let before = d.md_tree();
    // kill -9 in the middle of an apply.
    let apply = d
        .background(&["apply"])
        .killed_by(libc::SIGKILL)
        .stdout_empty()
        .stderr_empty()
        .spawn();
    let journal = d.journal();
    let first = d.mem().join("many/0000.md");
    crate::support::wait::busy_until("the apply's first files", || {
        journal.exists() && first.exists()
    });
    apply.signal(libc::SIGKILL);
    apply.finish();
    assert!(journal.exists());
    // The roll-back removes many/0000.md first (the files go in order); stop it just after.
    let recover = d
        .background(&["recover"])
        .code(143)
        .stdout_json(|doc| {
            assert!(
                doc["recovered"]["restored"]
                    .as_array()
                    .is_some_and(|r| !r.is_empty()),
                "the document hides the roll-back that happened: {doc}"
            );
        })
        .stderr_contains("rolled back the interrupted apply")
        .spawn();
    crate::support::wait::busy_until("the roll-back's first file", || !first.exists());
    recover.signal(libc::SIGSTOP);
    assert!(
        journal.exists(),
        "the roll-back finished before it could be stopped"
    );
    recover.signal(libc::SIGTERM);
    recover.signal(libc::SIGCONT);
    let out = recover.finish();
    assert_eq!(d.md_tree(), before, "the roll-back finished whole");
    assert!(!journal.exists());
    assert_eq!(
        out.stderr,
        rolled_back("apply", &id, &out.json()["recovered"])
    );
}

/// BUG (secrets readable): the sandbox refuses `/` and any folder ABOVE the home directory as
/// a readable root ("would open ... the home directory's keys and tokens to the model"), but
/// accepts the home directory itself. `dream-run --read-project` in a project that is `~`
/// (Claude Code started in the home directory is common) makes `~/.ssh`, `~/.aws`, ... readable:
/// the model's `cat ~/.ssh/id_ed25519` succeeds and the private key is sent to the model API.
///
/// Expected: the home directory itself is refused like its parents (exit 2 before any model
/// request), or at least nothing under it outside the project's own dirs reaches the model.
#[test]
fn read_project_never_makes_the_home_directory_itself_readable() {
    let d = Dream::new();
    let home = d.home.home.clone();
    let key = home.join(".ssh/id_ed25519");
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    std::fs::write(
        &key,
        "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-key-bytes\n",
    )
    .unwrap();
    let transcripts = d
        .home
        .config
        .join("projects")
        .join(crate::support::slug_of(&home));
    std::fs::create_dir_all(&transcripts).unwrap();
    std::fs::write(
        transcripts.join(format!("{}.jsonl", session_id(1))),
        format!("{}\n", json!({"type": "user", "sessionId": session_id(1), "message": {"role": "user", "content": "hi"}})),
    )
    .unwrap();
    d.api
        .push(Reply::anthropic_tools(
            "Looking around the project.",
            &[
                (
                    "shell",
                    json!({"command": format!("cat {}", key.display())}),
                ),
                ("read_file", json!({"path": key.to_str().unwrap()})),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    // Refused like its parents, before any model request.
    d.tool("dream-run")
        .args(["-n", "--unlocked", "--read-project", "--cwd"])
        .arg(&home)
        .code(2)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "bad_input", "{doc}"))
        .stderr_is(format!(
            "dream-run: refusing to make {} readable by the agent: it is /, the home directory \
             or holds it\n",
            home.display()
        ))
        .run();
    let leaked = d
        .api
        .requests()
        .iter()
        .any(|r| r.body.to_string().contains("secret-key-bytes"));
    assert!(!leaked, "the private key in ~/.ssh was sent to the model");

    // Without the flag the project is read by default, but never a home directory: the run
    // goes on without it (-v says so), and the key stays out of reach.
    let verbose_line = format!(
        "dream-run: the project dir {} is / or holds the home directory: the agent does not read it",
        home.display()
    );
    d.tool("dream-run")
        .args(["-n", "-v", "--unlocked", "--cwd"])
        .arg(&home)
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_with(move |stderr| assert!(stderr.contains(&verbose_line), "{stderr}"))
        .run();
    let requests = d.api.requests();
    let results = crate::support::dream::tool_results(&requests[1]);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results.iter().all(|(_, is_error)| *is_error), "{results:?}");
    let leaked = requests
        .iter()
        .any(|r| r.body.to_string().contains("secret-key-bytes"));
    assert!(!leaked, "the private key in ~/.ssh was sent to the model");
}

/// BUG (undo takes a run that changed nothing): a `--propose` run killed midway (its writes
/// were all in its staging copy) is left `running`, shown `failed`/`orphaned`, with a snapshot
/// (of the staging copy) named in its record. `dream-run undo` with no id picks it as "the
/// newest run that left changes behind", "restores" nothing in the memory dir, answers
/// `undone: true` naming files it did not touch, and the completed run the person wanted to
/// undo stays. (Its staging copy is also never removed: `discard` only takes `proposed`.)
///
/// Expected: a killed proposal left no changes in the memory dir: undo skips it and takes the
/// completed run.
#[test]
fn undo_without_id_skips_a_killed_proposal_and_takes_the_completed_run() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api
        .push(Reply::anthropic_tools(
            "Noting.",
            &[(
                "write_file",
                json!({"path": "topics/ci.md", "content": "CI runs on push.\n"}),
            )],
        ))
        .push(Reply::anthropic_text("Done."));
    let out = d
        .dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_is(more_problems("orphan_file 0 -> 1, front_matter 2 -> 3"))
        .run();
    let completed = out.json()["run"]["task_id"].as_str().unwrap().to_string();
    d.release(&out.stdout, "completed");
    drop(holder);
    // A proposing run, killed while it waits for its second answer.
    d.touch_sessions();
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
    assert_eq!(
        d.read("stale.md"),
        "The deploy uses FTP.\n",
        "proposing wrote nothing"
    );
    d.tool("dream-run")
        .arg("undo")
        .success()
        .stdout_json(|doc| {
            assert_eq!(
                doc["task_id"],
                completed.as_str(),
                "undo took the killed proposal, which changed no memory file: {doc}"
            );
            // Before its own work, the undo dropped the dead proposal's staging copy.
            assert_eq!(doc["orphans"][0]["outcome"], "proposal_dropped", "{doc}");
            // The newest consolidation undone: its sessions are due again.
            assert!(doc["last_consolidated_at"].is_string(), "{doc}");
        })
        .stderr_with(|text| {
            assert!(
                text.starts_with("dream-run: task ")
                    && text.ends_with(
                        " (proposing) died without an end: its staging copy was removed\n"
                    ),
                "{text:?}"
            );
        })
        .run();
    assert!(
        !d.mem().join("topics/ci.md").exists(),
        "the completed run was not undone"
    );
    let proposals = d.home.state_dir().join("proposals");
    let left: Vec<_> = std::fs::read_dir(&proposals)
        .map(|dir| dir.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// The same session listed twice in the envelope is one session: `sessions_reviewed` counts
/// sessions, not list entries (issue 16 §7: records tell the truth).
#[test]
fn a_session_listed_twice_is_reviewed_and_counted_once() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let mut envelope: Value = serde_json::from_str(&d.acquired_envelope(&holder)).unwrap();
    envelope["gate"]["sessions"] = json!([{"id": session_id(1)}, {"id": session_id(1)}]);
    d.api.push(Reply::anthropic_text("Nothing to change."));
    d.dream_run(&envelope.to_string(), &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["sessions_reviewed"], 1))
        .stderr_empty()
        .run();
    let prompt = d.api.requests()[0].body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        prompt.contains("Sessions since last consolidation (1):"),
        "{prompt}"
    );
}

/// DOC BUG (minor): issue 16 §2 asked dream-run-undo(1) to match the new behaviour (undo also
/// repairs failed, aborted and killed runs), but its one-line description (`undo --help`, the
/// man page's NAME) still says "before a completed run".
///
/// Expected: the description names what undo takes (the newest run that left changes behind).
#[test]
fn undo_help_does_not_say_only_completed_runs() {
    let d = Dream::new();
    d.tool("dream-run")
        .args(["undo", "--help"])
        .success()
        .stdout_with(|text| {
            let first = text.lines().next().unwrap_or("");
            assert!(
                !first.contains("before a completed run"),
                "undo --help: {first}"
            );
            assert!(text.contains("Usage: dream-run undo"), "{text}");
        })
        .stderr_empty()
        .run();
}

// =============================================================================================
// Attacks that held: these pass today.
// =============================================================================================

/// A journal forged to name files outside the memory dir (`..`, absolute) is refused by every
/// command that would act on it, and nothing outside is created or changed.
#[test]
fn held_a_forged_journal_naming_outside_paths_is_never_acted_on() {
    let d = Dream::new();
    let outside = d.home.root.join("outside.md");
    std::fs::write(&outside, "mine\n").unwrap();
    let before = d.md_tree();
    let jdir = d.journal();
    for name in ["../../../../outside.md", outside.to_str().unwrap()] {
        let intent = json!({
            "command": "apply", "task_id": "20260101T000000Z-deadbeef", "pid": 999_999_999u32,
            "started_at": "2026-01-01T00:00:00.000Z", "memory_dir": d.mem().to_str().unwrap(),
            "prior_mtime": 0, "lock_time": 0,
            "files": {name: {"before": null, "after": sha256_hex(b"mine\n")}},
            "created_dirs": []
        });
        let why = format!(
            "{} names {name:?}, which is not inside the memory dir: refused",
            jdir.join("intent.json").display()
        );
        journal_moved_aside(
            &d,
            || {
                std::fs::create_dir_all(jdir.join("files")).unwrap();
                std::fs::write(jdir.join("intent.json"), intent.to_string()).unwrap();
            },
            &why,
        );
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine\n");
    }
    assert_eq!(d.md_tree(), before);
}

/// A journal that cannot be used never stops the project for good: a read-only command
/// (`tasks`) reports it and leaves it; every command that acts on the journal (recover,
/// apply, undo, discard) moves it aside to `journal.corrupt-<time>`, reports
/// `journal_corrupt` and goes on, changing no memory file. `make` lays the bad journal.
fn journal_moved_aside(d: &Dream, make: impl Fn(), why: &str) {
    let jdir = d.journal();
    let before = d.md_tree();
    for (args, code, rest) in [
        (&["recover"][..], 0, String::new()),
        (
            &["apply"],
            1,
            "dream-run: no memory proposal: run dream-run --propose first\n".to_string(),
        ),
        (
            &["undo"],
            1,
            "dream-run: nothing to undo: no completed run, and no failed, aborted or killed run whose changes were kept\n".to_string(),
        ),
        (
            &["discard"],
            1,
            "dream-run: no memory proposal: run dream-run --propose first\n".to_string(),
        ),
    ] {
        make();
        d.tool("dream-run")
            .arg("tasks")
            .success()
            .stdout_json(|doc| assert_eq!(doc["tasks"], json!([]), "{doc}"))
            .stderr_is(format!(
                "dream-run: the journal {} cannot be used ({why}): `dream-run recover` (or the next apply, undo, discard or run) moves it aside\n",
                jdir.display()
            ))
            .run();
        let out = d
            .tool("dream-run")
            .args(args)
            .code(code)
            .stdout_json(|doc| {
                let corrupt = &doc["journal_corrupt"];
                assert_eq!(corrupt["error"], why, "{args:?}: {doc}");
                assert_eq!(corrupt["files"], json!([]), "{doc}");
            })
            .stderr_with(|text| {
                let moved = text
                    .strip_prefix(&format!(
                        "dream-run: the journal {} could not be used ({why}): moved aside to ",
                        jdir.display()
                    ))
                    .and_then(|t| t.strip_suffix(&format!(
                        ", its copies kept; the memory dir is as it is now\n{rest}"
                    )))
                    .unwrap_or_else(|| panic!("{args:?}: {text:?}"));
                assert!(moved.contains("/journal.corrupt-"), "{moved}");
            })
            .run();
        let moved = out.json()["journal_corrupt"]["moved_to"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(std::fs::symlink_metadata(&moved).is_ok(), "{moved}");
        assert!(std::fs::symlink_metadata(&jdir).is_err(), "{args:?}: still there");
        assert_eq!(d.md_tree(), before, "{args:?}");
    }
}

/// A corrupt journal (garbage, a FIFO in its place, a symlink loop, a file) never hangs a
/// command, never changes the memory dir, and is moved aside by the next command that acts.
#[test]
fn held_a_corrupt_or_fifo_journal_never_hangs_and_changes_nothing() {
    for case in ["garbage", "fifo", "loop", "file", "no_intent"] {
        let d = Dream::new();
        let before = d.md_tree();
        let jdir = d.journal();
        std::fs::create_dir_all(d.home.state_dir()).unwrap();
        let intent = jdir.join("intent.json");
        let why = match case {
            "garbage" => format!(
                "{}: EOF while parsing a value at line 1 column 21",
                intent.display()
            ),
            "fifo" => format!("{}: not a regular file (a FIFO)", intent.display()),
            "loop" => format!(
                "{} is a symbolic link, not a journal folder",
                jdir.display()
            ),
            "file" => format!("{} is a regular file, not a journal folder", jdir.display()),
            _ => format!("{} is missing", intent.display()),
        };
        let make = || match case {
            "garbage" => {
                std::fs::create_dir_all(&jdir).unwrap();
                std::fs::write(&intent, "{\"command\": \"apply\", ").unwrap();
            }
            "fifo" => {
                std::fs::create_dir_all(&jdir).unwrap();
                mkfifo(&intent);
            }
            "loop" => std::os::unix::fs::symlink(&jdir, &jdir).unwrap(),
            "file" => std::fs::write(&jdir, "not a dir").unwrap(),
            _ => std::fs::create_dir_all(jdir.join("files")).unwrap(),
        };
        journal_moved_aside(&d, make, &why);
        assert_eq!(d.md_tree(), before, "{case}");
    }
}

/// A journal whose process still runs is not rolled back under it: `recover` leaves it, and
/// an `apply` refuses rather than writing beside it.
#[test]
fn held_a_journal_of_a_live_process_is_left_alone() {
    let d = Dream::new();
    let id = d.propose_with(
        &[],
        Dream::many_writes(500, &[]),
        "orphan_file 0 -> 500, duplicate_entry 0 -> 19999, front_matter 2 -> 502",
    );
    let apply = d
        .background(&["apply"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["applied"], true, "{doc}"))
        .stderr_empty()
        .spawn();
    let jdir = d.journal();
    let first = d.mem().join("many/0000.md");
    crate::support::wait::busy_until("the apply's first files", || {
        jdir.exists() && first.exists()
    });
    apply.signal(libc::SIGSTOP);
    assert!(jdir.exists());
    let half = d.md_tree();
    let pid = apply.pid();
    for args in [
        &["recover"][..],
        &["undo"],
        &["discard", "--dry-run"],
        &["apply"],
    ] {
        // What each answers while the apply holds the lock: recover leaves its journal, undo
        // finds nothing completed, discard would discard, apply is refused.
        let (code, said) = match args[0] {
            "undo" => (
                1,
                "dream-run: nothing to undo: no completed run, and no failed, aborted or killed \
                 run whose changes were kept\n"
                    .to_string(),
            ),
            "apply" => (1, busy(pid)),
            _ => (0, String::new()),
        };
        d.tool("dream-run")
            .args(args)
            .code(code)
            .stdout_json(|doc| match args[0] {
                "recover" => assert_eq!(doc["recovered"], Value::Null, "{doc}"),
                "undo" => assert_eq!(doc["reason"], "nothing_to_undo", "{doc}"),
                "discard" => {
                    assert_eq!(doc["dry_run"], true, "{doc}");
                    assert_eq!(doc["discarded"], false, "{doc}");
                    assert_eq!(doc["task_id"], id.as_str(), "{doc}");
                }
                _ => {
                    assert_eq!(doc["reason"], "busy", "{doc}");
                    assert_eq!(doc["holder_pid"], pid, "{doc}");
                }
            })
            .stderr_is(said)
            .run();
        assert_eq!(
            d.md_tree(),
            half,
            "{args:?} changed files under a live apply"
        );
        assert!(jdir.exists(), "{args:?}");
    }
    apply.signal(libc::SIGCONT);
    apply.finish();
    assert!(d.read("many/0499.md").starts_with("# 499\n"));
}

/// A full disk (EFBIG from RLIMIT_FSIZE) in the middle of an apply rolls everything back in
/// the process: exit 3, memory dir byte-identical, no journal left, the proposal applicable.
#[test]
fn held_a_full_disk_during_apply_rolls_back() {
    let d = Dream::new();
    let big = "z".repeat(200 * 1024);
    let id = d.propose_with(
        &["MEMORY.md"],
        Dream::many_writes(
            50,
            &[
                ("MEMORY.md", "# Memory\n- rewritten\n"),
                ("zz-big.md", &big),
            ],
        ),
        "index_shape 0 -> 1, orphan_file 0 -> 53, duplicate_entry 0 -> 1999, front_matter 2 -> 53, large_file 0 -> 1",
    );
    let before = d.md_tree();
    let temp = format!("{}/.dreamkit-", d.mem().display());
    limited(&d, 64 * 1024, true)
        .arg("apply")
        .stdin_from(Stdio::null())
        .code(3)
        .stdout_json(|doc| {
            assert_eq!(doc["applied"], false, "{doc}");
            assert_eq!(doc["error"]["kind"], "environment", "{doc}");
        })
        // The temporary file it was writing means nothing to the user: not named.
        .stderr_is("dream-run: not applied: cannot write zz-big.md: File too large (os error 27)\n")
        .run();
    let strays: Vec<String> = crate::support::tree(&d.mem())
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| path.contains("/.dreamkit-") || path.starts_with(".dreamkit-"))
        .collect();
    assert!(strays.is_empty(), "{temp}: {strays:?}");
    assert_eq!(d.md_tree(), before);
    assert!(!d.journal().exists());
    assert_eq!(d.task16(&id)["status"], "proposed");
    d.tool("dream-run")
        .arg("apply")
        .success()
        .stdout_json(|doc| assert_eq!(doc["applied"], true, "{doc}"))
        .stderr_empty()
        .run();
    assert_eq!(d.read("zz-big.md"), big);
}

/// The process killed by SIGXFSZ at a write in the middle of an apply (a crash at a precise
/// point): the journal stays and `recover` puts everything back.
#[test]
fn held_an_apply_killed_at_a_write_is_recovered() {
    let d = Dream::new();
    let big = "z".repeat(200 * 1024);
    let id = d.propose_with(
        &["MEMORY.md"],
        Dream::many_writes(
            50,
            &[
                ("MEMORY.md", "# Memory\n- rewritten\n"),
                ("zz-big.md", &big),
            ],
        ),
        "index_shape 0 -> 1, orphan_file 0 -> 53, duplicate_entry 0 -> 1999, front_matter 2 -> 53, large_file 0 -> 1",
    );
    let before = d.md_tree();
    limited(&d, 64 * 1024, false)
        .arg("apply")
        .stdin_from(Stdio::null())
        .killed_by(libc::SIGXFSZ)
        .stdout_empty()
        .stderr_empty()
        .run();
    assert!(d.journal().exists());
    assert_ne!(d.md_tree(), before);
    let out = d
        .tool("dream-run")
        .arg("recover")
        .success()
        .stdout_json(|doc| assert_eq!(doc["recovered"]["command"], "apply", "{doc}"))
        .stderr_contains("rolled back the interrupted apply")
        .run();
    assert_eq!(
        out.stderr,
        rolled_back("apply", &id, &out.json()["recovered"])
    );
    assert_eq!(d.md_tree(), before);
    assert_eq!(d.task16(&id)["status"], "proposed");
}

/// The staged copy changed between propose and apply (a file edited, one deleted, one made a
/// symlink): apply refuses with `staging_changed` and writes nothing.
#[test]
fn held_a_staging_copy_tampered_before_apply_is_refused() {
    for case in ["edit", "delete", "symlink"] {
        let d = Dream::new();
        let id = d.propose_with(
            &["stale.md"],
            vec![
                (
                    "write_file",
                    json!({"path": "stale.md", "content": "blue-green\n"}),
                ),
                (
                    "write_file",
                    json!({"path": "topics/new.md", "content": "new\n"}),
                ),
            ],
            "orphan_file 0 -> 1, front_matter 2 -> 3",
        );
        let staged = d
            .home
            .state_dir()
            .join("proposals")
            .join(&id)
            .join("memory");
        let changed = match case {
            "edit" => {
                std::fs::write(staged.join("stale.md"), "evil\n").unwrap();
                staged.join("stale.md")
            }
            "delete" => {
                std::fs::remove_file(staged.join("topics/new.md")).unwrap();
                staged.join("topics/new.md")
            }
            _ => {
                let outside = d.home.root.join("evil.md");
                std::fs::write(&outside, "new\n").unwrap();
                std::fs::remove_file(staged.join("topics/new.md")).unwrap();
                std::os::unix::fs::symlink(&outside, staged.join("topics/new.md")).unwrap();
                staged.join("topics/new.md")
            }
        };
        let before = d.md_tree();
        d.tool("dream-run")
            .arg("apply")
            .code(1)
            .stdout_json(|doc| assert_eq!(doc["reason"], "staging_changed", "{case}"))
            .stderr_is(format!(
                "dream-run: not applied: the staged copy is not what the proposal showed: {}\n",
                changed.display()
            ))
            .run();
        assert_eq!(d.md_tree(), before, "{case}");
    }
}

/// Envelope project fields with `..` and relative spellings: one that names this project's
/// own dirs is accepted, one that leads elsewhere is `project_mismatch` before any request.
#[test]
fn held_dotdot_and_relative_project_fields_are_judged_by_where_they_lead() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope: Value = serde_json::from_str(&d.acquired_envelope(&holder)).unwrap();
    let mem = d.mem();
    let mem_s = mem.to_str().unwrap().to_string();
    let parent = mem.parent().unwrap().to_str().unwrap().to_string();
    let state = d.home.state_dir().display().to_string();
    let transcripts = d.home.transcripts_dir().display().to_string();
    // What the run says of each: the value as given (the transcripts dir's `..` resolved),
    // and the project's own dir with how to change it.
    let not_ours = |field: &str, shown: &str| {
        let (own, how) = match field {
            "memory_dir" => (mem_s.as_str(), "--memory-dir"),
            "state_dir" => (state.as_str(), "XDG_STATE_HOME"),
            _ => (transcripts.as_str(), "--transcripts-dir"),
        };
        format!(
            "dream-run: the envelope's project.{field} {shown} is not this project's {own} (give \
             every stage the same {how}, or let the environment decide)\n"
        )
    };
    for (field, value, said) in [
        (
            "memory_dir",
            format!("{mem_s}/../../elsewhere/memory"),
            not_ours("memory_dir", &format!("{mem_s}/../../elsewhere/memory")),
        ),
        (
            "memory_dir",
            format!("{parent}/../x/memory"),
            not_ours("memory_dir", &format!("{parent}/../x/memory")),
        ),
        (
            "memory_dir",
            "memory".to_string(),
            not_ours("memory_dir", "memory"),
        ),
        (
            "state_dir",
            format!("{state}/.."),
            not_ours("state_dir", &format!("{state}/..")),
        ),
        (
            "transcripts_dir",
            format!("{transcripts}/../../.."),
            not_ours("transcripts_dir", &d.home.home.display().to_string()),
        ),
        (
            "transcripts_dir",
            "/".to_string(),
            not_ours("transcripts_dir", "/"),
        ),
        (
            "transcripts_dir",
            "".to_string(),
            "dream-run: the envelope's project.transcripts_dir \"\" is empty\n".to_string(),
        ),
    ] {
        let mut forged = envelope.clone();
        forged["project"][field] = json!(value);
        d.dream_run(&forged.to_string(), &[])
            .code(2)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "bad_input", "{field}={value}"))
            .stderr_is(said)
            .run();
        assert!(d.api.requests().is_empty(), "{field}={value}");
    }
    // The project's own memory dir, spelt with `..` and `.`: accepted.
    let mut same = envelope.clone();
    same["project"]["memory_dir"] = json!(format!("{parent}/./x/../memory"));
    d.api.push(Reply::anthropic_text("Nothing to change."));
    d.dream_run(&same.to_string(), &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run();
    // Wrong types in the project section are bad input.
    for (field, value, kind) in [
        ("memory_dir", json!(5), "integer `5`"),
        ("state_dir", json!(["a"]), "sequence"),
        ("transcripts_dir", json!({"p": 1}), "map"),
        ("cwd", json!(true), "boolean `true`"),
    ] {
        let mut forged = envelope.clone();
        forged["project"][field] = value.clone();
        d.dream_run(&forged.to_string(), &[])
            .code(2)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "bad_input", "{field}={value}"))
            .stderr_is(format!(
                "dream-run: envelope field `project`: invalid type: {kind}, expected path string\n"
            ))
            .run();
    }
}

/// Shell arguments that are FIFOs (directly, through a symlink, a device, a socket) are
/// refused at once; `grep -r` over a folder holding a FIFO does not wait on it.
#[test]
fn held_the_shell_refuses_fifos_devices_and_sockets_even_through_links() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    mkfifo(&d.mem().join("pipe.md"));
    std::os::unix::fs::symlink(d.mem().join("pipe.md"), d.mem().join("link.md")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.mem().join("zero.md")).unwrap();
    let socket = d.mem().join("sock.md");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    d.api
        .push(Reply::anthropic_tools(
            "Reading odd files.",
            &[
                ("shell", json!({"command": "cat pipe.md"})),
                ("shell", json!({"command": "head -c 10 link.md"})),
                ("shell", json!({"command": "wc -c zero.md"})),
                ("shell", json!({"command": "cat sock.md"})),
                ("shell", json!({"command": "grep -r deploy ."})),
                ("read_file", json!({"path": "link.md"})),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    d.dream_run(&envelope, &["--shell-timeout", "5m"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run();
    let results = tool_results(&d.api.requests()[1]);
    for (n, (text, is_error)) in results.iter().enumerate() {
        if n == 4 {
            assert!(!text.contains("timed out"), "{text}");
        } else {
            assert!(is_error, "{n}: {text}");
        }
    }
}

/// Two runs and a replay on one token: the second and the replay exit `lock_claimed` before
/// any request, whatever the first does; a forged claim naming a finished task of another
/// token does not block the real holder.
#[test]
fn held_a_claim_of_an_older_hold_does_not_block_a_new_hold() {
    let d = Dream::new();
    let guard = d.mem().join(".consolidate-lock.dreamkit");
    // A claim left in the guard by an older hold (a different token).
    std::fs::write(
        &guard,
        json!({"token": "1:1", "task_id": "20200101T000000Z-00000000", "pid": 1,
               "node": "", "since_ms": 1})
        .to_string(),
    )
    .unwrap();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api.push(Reply::anthropic_text("Nothing to change."));
    let out = d
        .dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run();
    let task = out.json()["run"]["task_id"].as_str().unwrap().to_string();
    d.dream_run(&envelope, &[])
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["run"]["reason"], "lock_claimed"))
        .stderr_is(format!(
            "dream-run: run skipped: task {task} already ran under this lock: take the lock anew \
             (dream-lock acquire) for another run\n"
        ))
        .run();
    assert_eq!(d.api.requests().len(), 1);
}

/// A reply of 1,000 writes under `--deadline 2s` with every call allowed: the deadline stops
/// the turn between calls and the run's writes are restored.
#[test]
fn held_the_deadline_stops_a_turn_of_a_thousand_writes_and_restores() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let before = d.md_tree();
    let calls = Dream::many_writes(1000, &[]);
    d.api.push(Reply::anthropic_tools("Writing a lot.", &calls));
    d.dream_run(
        &envelope,
        &[
            "--deadline",
            "2s",
            "--max-calls-per-turn",
            "1000",
            "--max-files",
            "1000",
        ],
    )
    .code(1)
    .stdout_json(|doc| assert_eq!(doc["run"]["error"], "deadline"))
    .stderr_is("dream-run: run failed: the run passed its --deadline of 2s\n")
    .run();
    assert_eq!(d.md_tree(), before);
    assert!(!d.mem().join("many").exists());
}

/// The default 64 calls per turn and 500 files per run hold over several turns.
#[test]
fn held_default_call_and_file_limits() {
    let d = Dream::new();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let first: Vec<(&str, Value)> = Dream::many_writes(100, &[]);
    d.api.push(Reply::anthropic_tools("Writing.", &first));
    for turn in 0..10 {
        let calls: Vec<(&str, Value)> = (0..64)
            .map(|n| {
                (
                    "write_file",
                    json!({"path": format!("more/{turn}-{n}.md"), "content": "x\n"}),
                )
            })
            .collect();
        d.api.push(Reply::anthropic_tools("More.", &calls));
    }
    d.api.push(Reply::anthropic_text("Done."));
    d.dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["files_touched"].as_array().unwrap().len(), 500))
        .stderr_is(more_problems(
            "orphan_file 0 -> 500, duplicate_entry 0 -> 2559, front_matter 2 -> 502",
        ))
        .run();
    let results = tool_results(&d.api.requests()[1]);
    assert!(results[..64].iter().all(|(_, e)| !e));
    assert!(results[64].1 && results[64].0.contains("--max-calls-per-turn"));
    assert!(results[65..].iter().all(|(t, e)| *e && t == "not run"));
}

/// kill -9 in the middle of an `undo` of a 500-file apply: `recover` puts the applied state
/// back (the undo never happened), the task stays `completed`, and `undo` then works whole.
#[test]
fn held_kill_9_during_undo_is_rolled_back_and_undo_works_again() {
    let d = Dream::new();
    let before = d.md_tree();
    let id = d.propose_with(
        &[],
        Dream::many_writes(500, &[]),
        "orphan_file 0 -> 500, duplicate_entry 0 -> 19999, front_matter 2 -> 502",
    );
    d.tool("dream-run")
        .arg("apply")
        .success()
        .stdout_json(|doc| assert_eq!(doc["applied"], true, "{doc}"))
        .stderr_empty()
        .run();
    let applied = d.md_tree();
    let undo = d
        .background(&["undo"])
        .killed_by(libc::SIGKILL)
        .stdout_empty()
        .stderr_empty()
        .spawn();
    let jdir = d.journal();
    let first = d.mem().join("many/0000.md");
    crate::support::wait::busy_until("the undo's first files", || {
        jdir.exists() && !first.exists()
    });
    undo.signal(libc::SIGSTOP);
    assert!(
        jdir.exists(),
        "the undo finished before it could be stopped"
    );
    undo.signal(libc::SIGKILL);
    undo.finish();
    assert_ne!(d.md_tree(), applied, "half undone");
    let out = d
        .tool("dream-run")
        .arg("recover")
        .success()
        .stdout_json(|doc| assert_eq!(doc["recovered"]["command"], "undo"))
        .stderr_contains("rolled back the interrupted undo")
        .run();
    assert_eq!(
        out.stderr,
        rolled_back("undo", &id, &out.json()["recovered"])
    );
    assert_eq!(d.md_tree(), applied);
    assert_eq!(d.task16(&id)["status"], "completed");
    d.tool("dream-run")
        .arg("undo")
        .success()
        .stdout_json(|doc| assert_eq!(doc["undone"], true, "{doc}"))
        .stderr_empty()
        .run();
    assert_eq!(d.md_tree(), before);
    assert_eq!(d.task16(&id)["status"], "undone");
}

/// Every file and folder under the state dir stays private through a proposal that makes new
/// folders, an apply killed midway (its journal and snapshot) and the recover.
#[test]
fn held_the_state_dir_stays_private_with_a_journal_left_by_a_kill() {
    let d = Dream::new();
    let id = d.propose_with(
        &[],
        Dream::many_writes(500, &[]),
        "orphan_file 0 -> 500, duplicate_entry 0 -> 19999, front_matter 2 -> 502",
    );
    let apply = d
        .background(&["apply"])
        .killed_by(libc::SIGKILL)
        .stdout_empty()
        .stderr_empty()
        .spawn();
    let jdir = d.journal();
    let first = d.mem().join("many/0000.md");
    crate::support::wait::busy_until("the apply's first files", || {
        jdir.exists() && first.exists()
    });
    apply.signal(libc::SIGKILL);
    apply.finish();
    let check = |d: &Dream| {
        for entry in walkdir::WalkDir::new(d.home.state_dir()) {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            let want = if meta.is_dir() { 0o700 } else { 0o600 };
            assert_eq!(
                crate::support::mode(&meta),
                want,
                "{}",
                entry.path().display()
            );
        }
    };
    assert!(jdir.exists());
    check(&d);
    let out = d
        .tool("dream-run")
        .arg("recover")
        .success()
        .stdout_json(|doc| assert_eq!(doc["recovered"]["command"], "apply", "{doc}"))
        .stderr_contains("rolled back the interrupted apply")
        .run();
    assert_eq!(
        out.stderr,
        rolled_back("apply", &id, &out.json()["recovered"])
    );
    check(&d);
}
