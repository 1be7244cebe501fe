//! Issue 26, attacked: the recovery every state-changing command runs first (the sweep of
//! stray temporary files, the journal, the orphaned runs) and the guard file's record of each
//! hold, driven with real files, links, processes and signals.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::dream::Dream;
use crate::support::fake_api::Reply;
use crate::support::{LiveProcess, Run};

/// What [`completed_run`] writes in `stale.md`.
const NOTE: &str = "The deploy is blue-green.\n";

/// A PID that certainly names no process: a child that exited and was reaped.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// One applying run that rewrites `stale.md` and completes (lock released); its task id.
fn completed_run(d: &Dream) -> String {
    completed_run_of(d, "stale.md", NOTE)
}

/// One applying run that rewrites `rel` with `content` and completes; its task id.
fn completed_run_of(d: &Dream, rel: &str, content: &str) -> String {
    d.touch_sessions();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api
        .push(Reply::anthropic_tools(
            "Noting.",
            &[
                ("read_file", json!({ "path": rel })),
                ("write_file", json!({"path": rel, "content": content})),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    let out = d
        .dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run();
    d.release(&out.stdout, "completed");
    out.json()["run"]["task_id"].as_str().unwrap().to_string()
}

fn tasks_dir(d: &Dream) -> PathBuf {
    d.home.state_dir().join("tasks")
}

/// The record of `id` rewritten as a run that died while `running` (its PID dead), saved as
/// `file_id`.json.
fn forge_running(d: &Dream, id: &str, file_id: &str, edit: impl FnOnce(&mut Value)) {
    let mut record = d.task(id);
    record["status"] = json!("running");
    record["phase"] = json!("updating");
    record["pid"] = json!(dead_pid());
    record["ended_at"] = Value::Null;
    edit(&mut record);
    std::fs::write(
        tasks_dir(d).join(format!("{file_id}.json")),
        serde_json::to_vec_pretty(&record).unwrap(),
    )
    .unwrap();
}

/// Every file and folder under `root` (links not followed), with file contents.
fn listing(root: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut all = Vec::new();
    for entry in walkdir::WalkDir::new(root).min_depth(1) {
        let entry = entry.unwrap();
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let kind = entry.file_type();
        if kind.is_dir() {
            all.push((rel + "/", None));
        } else if kind.is_file() {
            // A sparse giant is told by its size, not read.
            let len = entry.metadata().unwrap().len();
            let content = if len > 1 << 20 {
                format!("{len} bytes").into_bytes()
            } else {
                std::fs::read(path).unwrap()
            };
            all.push((rel, Some(content)));
        } else {
            all.push((rel, None));
        }
    }
    all.sort();
    all
}

/// A folder's mtime set two hours back.
fn age_dir(dir: &Path) {
    std::fs::File::open(dir)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - crate::support::hours(2))
        .unwrap();
}

fn recover(d: &Dream) -> Run<'static> {
    d.tool("dream-run").arg("recover")
}

/// A folder outside the project with a file in it, named like a task's folder.
fn outside_with_task_folder(d: &Dream, id: &str) -> PathBuf {
    let outside = d.home.root.join("outside");
    std::fs::create_dir_all(outside.join(id)).unwrap();
    std::fs::write(outside.join(id).join("keep.md"), "not dreamkit's\n").unwrap();
    // Older than any stale age: a sweep that looked there would take it for a dead proposal.
    age_dir(&outside.join(id));
    outside
}

/// Attack: `proposals/` is a link to a folder elsewhere holding a folder named like a task id
/// with no record (what a sweep takes for a dead proposal). Nothing outside may go.
#[test]
fn a_link_in_place_of_proposals_leads_the_sweep_nowhere() {
    let d = Dream::new();
    let id = "20200101T000000Z-deadbeef";
    let outside = outside_with_task_folder(&d, id);
    std::fs::create_dir_all(d.home.state_dir()).unwrap();
    symlink(&outside, d.home.state_dir().join("proposals")).unwrap();
    let before = listing(&outside);
    d.recovers_nothing();
    assert_eq!(listing(&outside), before);
}

/// Attack: a run recorded `running` whose PID is dead, with `snapshots/` (then its own
/// `snapshots/<id>`) a link to a copy of its snapshot elsewhere. The copy is never restored
/// from nor removed; the run is kept for `undo`, the memory dir untouched.
#[test]
fn a_link_in_place_of_a_snapshot_is_never_restored_from_nor_removed() {
    for link_whole_folder in [true, false] {
        let d = Dream::new();
        let id = completed_run(&d);
        let snapshots = d.home.state_dir().join("snapshots");
        let outside = d.home.root.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        if link_whole_folder {
            std::fs::rename(&snapshots, outside.join("snapshots")).unwrap();
            symlink(outside.join("snapshots"), &snapshots).unwrap();
        } else {
            std::fs::rename(snapshots.join(&id), outside.join(&id)).unwrap();
            symlink(outside.join(&id), snapshots.join(&id)).unwrap();
        }
        forge_running(&d, &id, &id, |_| {});
        let before = listing(&outside);
        let memory = d.md_tree();
        recover(&d)
            .success()
            .stdout_json(|doc| {
                let orphan = &doc["orphans"][0];
                assert_eq!(orphan["task_id"], id.as_str(), "{doc}");
                assert_eq!(orphan["outcome"], "orphan_kept", "{doc}");
                assert!(
                    orphan["why"]
                        .as_str()
                        .unwrap()
                        .ends_with("is not a snapshot folder: not followed"),
                    "{doc}"
                );
            })
            .stderr_contains("died without an end and was left alone")
            .run();
        assert_eq!(
            listing(&outside),
            before,
            "linked folder: {link_whole_folder}"
        );
        assert_eq!(d.md_tree(), memory);
        assert_eq!(d.task(&id)["error"], "orphaned");
    }
}

/// Attack: a copy of a completed run's record, made `running` with a dead PID, saved under
/// another task's file name. Recovery must not roll back the completed run it names.
#[test]
fn a_record_under_another_name_rolls_back_nothing() {
    let d = Dream::new();
    let id = completed_run(&d);
    let forged = "20200101T000000Z-0000000a";
    forge_running(&d, &id, forged, |_| {});
    let memory = d.md_tree();
    let real = d.task(&id);
    d.recovers_nothing();
    assert_eq!(d.md_tree(), memory);
    assert_eq!(d.read("stale.md"), NOTE);
    assert_eq!(d.task(&id), real);
}

/// Attack: `tasks/` is a link to a folder elsewhere holding a `running` record of a dead PID.
/// Recovery neither rewrites the record there nor rolls anything back.
#[test]
fn a_link_in_place_of_tasks_is_never_written_through() {
    let d = Dream::new();
    let id = completed_run(&d);
    forge_running(&d, &id, &id, |_| {});
    let outside = d.home.root.join("outside");
    std::fs::rename(tasks_dir(&d), &outside).unwrap();
    symlink(&outside, tasks_dir(&d)).unwrap();
    let before = listing(&outside);
    let memory = d.md_tree();
    d.recovers_nothing();
    assert_eq!(listing(&outside), before);
    assert_eq!(d.md_tree(), memory);
}

/// The gate's `hours_since` (the age of the last consolidation it sees).
fn hours_since(d: &Dream) -> f64 {
    let out = d
        .tool("dream-gate")
        .args([
            "--min-hours",
            "0",
            "--min-sessions",
            "0",
            "--scan-interval",
            "0",
        ])
        .success()
        .stdout_json(|doc| assert!(doc["gate"]["hours_since"].is_number(), "{doc}"))
        .stderr_empty()
        .run();
    out.json()["gate"]["hours_since"].as_f64().unwrap()
}

/// A guard file's content made from the dead holder's PID and the hold's time (epoch ms).
type Forgery = dyn Fn(u32, i64) -> Vec<u8>;

/// Attack: a hold its holder never released (kill -9), then its record in the guard file
/// forged: a prior time after the hold itself (years ahead, the largest and the smallest
/// time), content far over any record, content that is not JSON. None is taken as the
/// time from before the hold: the gate and `recover` keep the lock's own time (48 hours),
/// nothing panics.
#[test]
fn a_forged_hold_never_moves_the_last_consolidated_time() {
    let year_2100 = 4_102_444_800_000_i64;
    let forgeries: Vec<Box<Forgery>> = vec![
        Box::new(move |pid, since| {
            json!({"hold": {"pid": pid, "prior_mtime_ms": year_2100, "since_ms": since}})
                .to_string()
                .into_bytes()
        }),
        Box::new(|pid, since| {
            json!({"hold": {"pid": pid, "prior_mtime_ms": i64::MAX, "since_ms": since}})
                .to_string()
                .into_bytes()
        }),
        Box::new(|pid, since| {
            json!({"hold": {"pid": pid, "prior_mtime_ms": i64::MIN, "since_ms": since}})
                .to_string()
                .into_bytes()
        }),
        Box::new(|pid, since| {
            let mut text =
                json!({"hold": {"pid": pid, "prior_mtime_ms": 1, "since_ms": since}}).to_string();
            text.push_str(&" ".repeat(10 << 20));
            text.into_bytes()
        }),
        Box::new(|pid, _| format!("{{\"hold\": {{\"pid\": {pid}, \"prior_mt").into_bytes()),
    ];
    for (n, forge) in forgeries.iter().enumerate() {
        let d = Dream::new();
        let holder = LiveProcess::start();
        d.acquired_envelope(&holder);
        let pid = holder.pid();
        holder.kill();
        // The hold as if taken 48 hours ago: the lock's mtime and the record agree.
        let lock = d.home.lock_file();
        let taken = std::time::SystemTime::now() - crate::support::hours(48);
        std::fs::write(
            d.mem().join(".consolidate-lock.dreamkit"),
            forge(pid, crate::support::epoch_ms(taken)),
        )
        .unwrap();
        std::fs::File::options()
            .write(true)
            .open(&lock)
            .unwrap()
            .set_modified(taken)
            .unwrap();
        assert!(hours_since(&d) > 47.9, "forgery {n}");
        d.recovers_nothing();
        assert_eq!(
            d.lock_ms(),
            crate::support::epoch_ms(taken),
            "forgery {n}: the lock's time"
        );
        assert!(hours_since(&d) > 47.9, "forgery {n}");
    }
}

/// Attack: things named like a dead writer's temporary file that are not its file: a link (to
/// a real stray outside the project), a FIFO, a socket, a folder with a file in it; beside a
/// real stray with a name that is not UTF-8, in the memory dir and the state dir. Only the
/// real strays go; nothing is opened (the FIFO would block), nothing outside is touched.
#[test]
fn only_regular_temporary_files_of_dead_writers_are_swept() {
    use std::os::unix::ffi::OsStrExt;
    let d = Dream::new();
    let dead = dead_pid();
    let name = |what: &str| format!(".dreamkit-{dead}-{what}.tmp");
    let outside = d.home.root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join(name("theirs")), "not dreamkit's\n").unwrap();
    let state = d.home.state_dir();
    std::fs::create_dir_all(&state).unwrap();
    let mut strays = Vec::new();
    for dir in [d.mem(), state.clone()] {
        symlink(outside.join(name("theirs")), dir.join(name("link"))).unwrap();
        symlink(&outside, dir.join(name("dirlink"))).unwrap();
        crate::support::mkfifo(&dir.join(name("fifo")));
        std::fs::create_dir_all(dir.join(name("dir"))).unwrap();
        std::fs::write(dir.join(name("dir")).join("inside.md"), "kept\n").unwrap();
        let mut raw = format!(".dreamkit-{dead}-").into_bytes();
        raw.extend(b"\xff\xfe.tmp");
        let stray = dir.join(std::ffi::OsStr::from_bytes(&raw));
        std::fs::write(&stray, "half a write").unwrap();
        strays.push(stray);
    }
    let _socket = std::os::unix::net::UnixListener::bind(state.join(name("s"))).unwrap();
    let before_outside = listing(&outside);
    recover(&d)
        .success()
        .stdout_json(|doc| {
            assert_eq!(
                doc["swept"]["removed"].as_array().unwrap().len(),
                2,
                "{doc}"
            );
            assert_eq!(doc["swept"].get("failed"), None, "{doc}");
        })
        .stderr_empty()
        .run();
    for stray in &strays {
        assert!(std::fs::symlink_metadata(stray).is_err(), "{stray:?}");
    }
    for dir in [d.mem(), state.clone()] {
        for what in ["link", "dirlink", "fifo", "dir"] {
            assert!(
                std::fs::symlink_metadata(dir.join(name(what))).is_ok(),
                "{what}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(dir.join(name("dir")).join("inside.md")).unwrap(),
            "kept\n"
        );
    }
    assert!(std::fs::symlink_metadata(state.join(name("s"))).is_ok());
    assert_eq!(listing(&outside), before_outside);
}

/// Attack: a memory dir of 20,000 files, a chain of 1,000 nested folders and a link back to
/// its own root (a loop for anyone who follows links). The sweep still ends, removes the one
/// stray at the bottom of the chain and no file of the user's.
#[test]
fn a_sweep_of_a_huge_deep_memory_dir_ends_and_takes_only_the_stray() {
    let d = Dream::new();
    let many = d.mem().join("many");
    std::fs::create_dir_all(&many).unwrap();
    for n in 0..20_000 {
        std::fs::write(many.join(format!("{n:05}.md")), "x\n").unwrap();
    }
    let mut deep = d.mem().join("deep");
    for _ in 0..1_000 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    let stray = deep.join(format!(".dreamkit-{}-x.tmp", dead_pid()));
    std::fs::write(&stray, "half a write").unwrap();
    symlink(d.mem(), d.mem().join("loop")).unwrap();
    let files = crate::support::tree(&d.mem()).len();
    recover(&d)
        .success()
        .stdout_json(|doc| {
            assert_eq!(
                doc["swept"]["removed"],
                json!([stray.to_string_lossy()]),
                "{doc}"
            );
        })
        .stderr_empty()
        .timeout(crate::support::dream::LONG_RUN)
        .run();
    assert!(!stray.exists());
    assert_eq!(crate::support::tree(&d.mem()).len(), files - 1);
}

/// `stale.md` made 200 KiB (more than a 64 KiB file-size limit lets a restore write), then a
/// completed run that rewrote it, recorded as `running` with a dead PID: an orphan whose
/// restore must write 200 KiB. Returns the task id and the big content.
fn orphan_with_a_big_restore(d: &Dream) -> (String, String) {
    let big = "A long line of the deploy's history, kept for reference.\n".repeat(3600);
    std::fs::write(d.mem().join("stale.md"), &big).unwrap();
    let id = completed_run(d);
    forge_running(d, &id, &id, |_| {});
    (id, big)
}

/// Attack: the recovery itself killed (SIGXFSZ at the restore's write, as a kill -9 or a power
/// cut could) and, separately, a full disk during the restore (the write fails). Nothing of
/// the user's is lost: the killed recovery leaves the run to the next command, which rolls it
/// back; the full disk is an environment failure (exit 3) that leaves the run to the next
/// command too, and that command (with room again) rolls it back.
#[test]
fn a_recovery_killed_or_out_of_room_midway_is_finished_by_the_next_command() {
    for full_disk in [false, true] {
        let d = Dream::new();
        let (id, big) = orphan_with_a_big_restore(&d);
        let lock_ms = d.lock_ms();
        let run = crate::attack16::limited(&d, 64 * 1024, full_disk).arg("recover");
        if full_disk {
            run.code(3)
                .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "environment", "{doc}"))
                .stderr_contains("File too large")
                .run();
        } else {
            run.killed_by(libc::SIGXFSZ)
                .stdout_empty()
                .stderr_empty()
                .run();
        }
        assert_eq!(d.read("stale.md"), NOTE, "full disk: {full_disk}");
        assert_eq!(d.task(&id)["status"], "running", "full disk: {full_disk}");
        recover(&d)
            .success()
            .stdout_json(|doc| {
                assert_eq!(doc["orphans"][0]["outcome"], "rolled_back", "{doc}");
            })
            .stderr_contains("died without an end: rolled back, 1 file put back")
            .run();
        assert_eq!(d.read("stale.md"), big, "full disk: {full_disk}");
        assert_eq!(d.lock_ms(), lock_ms);
        let strays: Vec<_> = crate::support::tree(&d.mem())
            .into_iter()
            .filter(|(name, _)| name.contains(".dreamkit-") && name.ends_with(".tmp"))
            .collect();
        assert!(strays.is_empty(), "{strays:?}");
    }
}

/// Attack: the folder of an orphaned run's file made read-only (the recovering user may not
/// write there). The restore cannot happen: exit 3, nothing changed, the run left for a
/// command that can (here the same after the folder is writable again).
#[test]
fn a_read_only_folder_stops_the_restore_with_an_environment_error() {
    let d = Dream::new();
    let id = completed_run_of(&d, "topics/build.md", "Build with make or cargo.\n");
    forge_running(&d, &id, &id, |_| {});
    for path in walkdir_all(&d.home.root) {
        std::os::unix::fs::lchown(&path, Some(65534), Some(65534)).unwrap();
    }
    let topics = d.mem().join("topics");
    crate::support::chmod(&topics, 0o555);
    let memory = d.md_tree();
    Run::unprivileged(&d.home, "dream-run")
        .arg("recover")
        .code(3)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "environment", "{doc}");
            assert_eq!(doc["error"]["reason"], "permission", "{doc}");
        })
        .stderr_contains("Permission denied")
        .run();
    assert_eq!(d.md_tree(), memory);
    assert_eq!(d.task(&id)["status"], "running");
    crate::support::chmod(&topics, 0o755);
    Run::unprivileged(&d.home, "dream-run")
        .arg("recover")
        .success()
        .stdout_json(|doc| assert_eq!(doc["orphans"][0]["outcome"], "rolled_back", "{doc}"))
        .stderr_contains("died without an end: rolled back, 1 file put back")
        .run();
    assert_eq!(d.read("topics/build.md"), "Build with make.\n");
}

/// Every path under `root`, links not followed.
fn walkdir_all(root: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .map(|entry| entry.unwrap().into_path())
        .collect()
}

/// Attack: two `recover`s started at once on one orphaned run, five times over. The run is
/// rolled back exactly once; the other finds nothing left or the lock busy; the user's file
/// ends as it was before the run.
#[test]
fn two_recoveries_at_once_roll_back_once() {
    for round in 0..5 {
        let d = Dream::new();
        let id = completed_run(&d);
        forge_running(&d, &id, &id, |_| {});
        let runs: Vec<_> = (0..2)
            .map(|_| {
                recover(&d)
                    .code_any("the loser finds the lock busy (1) or nothing left (0)")
                    .stdout_any("checked below: one rolled back, the other nothing")
                    .stderr_any("checked below with the exit")
                    .spawn()
            })
            .collect();
        let outs: Vec<_> = runs.into_iter().map(|r| r.finish()).collect();
        let rolled: Vec<_> = outs
            .iter()
            .filter(|out| out.stdout.contains("\"rolled_back\""))
            .collect();
        assert_eq!(rolled.len(), 1, "round {round}: {outs:?}");
        for out in &outs {
            let doc = out.json();
            let rolled_back = doc["orphans"][0]["outcome"] == "rolled_back";
            let nothing = doc == json!({"recovered": null});
            let busy = out.code == Some(1) && doc["reason"] == "busy";
            assert!(rolled_back || nothing || busy, "round {round}: {doc}");
        }
        assert_eq!(d.read("stale.md"), "The deploy uses FTP.\n");
        assert_eq!(d.task(&id)["error"], "orphaned");
    }
}

/// Attack: an orphaned run's snapshot log given lines naming a file outside the memory dir
/// (by `../` and by an absolute path) as one the run created (a restore would delete it);
/// and records whose task id holds `/` or `..`. No file outside is touched; the run is kept
/// for `undo` with why; the odd records are left alone.
#[test]
fn a_forged_snapshot_or_task_id_never_reaches_outside_the_memory_dir() {
    for victim_named in ["../victim.md", "ABSOLUTE"] {
        let d = Dream::new();
        let id = completed_run(&d);
        let victim = d.mem().parent().unwrap().join("victim.md");
        std::fs::write(&victim, "the user's\n").unwrap();
        let named = if victim_named == "ABSOLUTE" {
            victim.to_string_lossy().into_owned()
        } else {
            victim_named.to_string()
        };
        let log = d
            .home
            .state_dir()
            .join("snapshots")
            .join(&id)
            .join("manifest.jsonl");
        let mut text = std::fs::read_to_string(&log).unwrap();
        text.push_str(&format!(
            "{}\n{}\n",
            json!({"event": "before", "path": named, "kept": null, "created_dirs": []}),
            json!({"event": "after", "path": named, "sha256": null}),
        ));
        std::fs::write(&log, text).unwrap();
        forge_running(&d, &id, &id, |_| {});
        for (file, bad_id) in [("x1", "../../x1"), ("x2", "a/b"), ("x3", "..")] {
            forge_running(&d, &id, file, |r| r["task_id"] = json!(bad_id));
        }
        let memory = d.md_tree();
        recover(&d)
            .success()
            .stdout_json(|doc| {
                assert_eq!(doc["orphans"].as_array().unwrap().len(), 1, "{doc}");
                assert_eq!(doc["orphans"][0]["outcome"], "orphan_kept", "{doc}");
                let why = doc["orphans"][0]["why"].as_str().unwrap();
                assert!(why.starts_with("its snapshot cannot be read: "), "{why}");
                assert!(
                    why.ends_with("which is not inside the memory dir: refused"),
                    "{why}"
                );
            })
            .stderr_contains("died without an end and was left alone")
            .run();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the user's\n");
        assert_eq!(d.md_tree(), memory);
        for file in ["x1", "x2", "x3"] {
            assert_eq!(d.task(file)["status"], "running", "{file}");
        }
    }
}

/// Attack: in the journal's place, a link to a folder elsewhere shaped like a journal (an
/// intent and a backing copy); then a journal whose intent names `../` paths. Each is moved
/// aside whole, never read through nor acted on; nothing outside changes.
#[test]
fn a_linked_or_forged_journal_is_moved_aside_and_never_followed() {
    let d = Dream::new();
    let outside = d.home.root.join("outside");
    std::fs::create_dir_all(outside.join("files")).unwrap();
    std::fs::write(outside.join("files/MEMORY.md"), "someone's copy\n").unwrap();
    std::fs::write(outside.join("intent.json"), "{}").unwrap();
    std::fs::create_dir_all(d.home.state_dir()).unwrap();
    symlink(&outside, d.journal()).unwrap();
    let memory = d.md_tree();
    let before = listing(&outside);
    let out = recover(&d)
        .success()
        .stdout_json(|doc| {
            let corrupt = &doc["journal_corrupt"];
            assert!(
                corrupt["error"]
                    .as_str()
                    .unwrap()
                    .ends_with("is a symbolic link, not a journal folder"),
                "{doc}"
            );
            assert_eq!(corrupt["files"], json!([]), "{doc}");
        })
        .stderr_contains("could not be used")
        .run();
    let moved = PathBuf::from(out.json()["journal_corrupt"]["moved_to"].as_str().unwrap());
    assert_eq!(std::fs::read_link(&moved).unwrap(), outside);
    assert_eq!(listing(&outside), before);
    assert_eq!(d.md_tree(), memory);

    let victim = d.mem().parent().unwrap().join("victim.md");
    std::fs::write(&victim, "the user's\n").unwrap();
    std::fs::create_dir_all(d.journal()).unwrap();
    let intent = json!({
        "command": "apply", "task_id": "t", "pid": dead_pid(),
        "started_at": "2026-01-01T00:00:00.000Z", "memory_dir": d.mem(),
        "prior_mtime": 0, "lock_time": 0,
        "files": {"../victim.md": {"before": null, "after": null}},
    });
    std::fs::write(d.journal().join("intent.json"), intent.to_string()).unwrap();
    recover(&d)
        .success()
        .stdout_json(|doc| {
            let error = doc["journal_corrupt"]["error"].as_str().unwrap();
            assert!(
                error.ends_with("which is not inside the memory dir: refused"),
                "{doc}"
            );
        })
        .stderr_contains("could not be used")
        .run();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the user's\n");
    assert_eq!(d.md_tree(), memory);
    assert!(std::fs::symlink_metadata(d.journal()).is_err());

    // A journal folder of its own whose `files` is a link elsewhere: no copy is listed.
    std::fs::create_dir_all(d.journal()).unwrap();
    std::fs::write(d.journal().join("intent.json"), "not json").unwrap();
    symlink(outside.join("files"), d.journal().join("files")).unwrap();
    recover(&d)
        .success()
        .stdout_json(|doc| assert_eq!(doc["journal_corrupt"]["files"], json!([]), "{doc}"))
        .stderr_contains("could not be used")
        .run();
    assert_eq!(listing(&outside), before);
}

/// Attack: a journal that cannot be used, in a state dir the user may not write (the move
/// aside fails). `recover` and `dream-lock acquire` fail as the environment (exit 3), the
/// journal stays where it is, the lock is given back with its time, no new hold is left.
#[test]
fn a_journal_that_cannot_be_moved_aside_is_an_environment_failure() {
    let d = Dream::new();
    std::fs::create_dir_all(d.journal()).unwrap();
    std::fs::write(d.journal().join("intent.json"), "not json").unwrap();
    for path in walkdir_all(&d.home.root) {
        std::os::unix::fs::lchown(&path, Some(65534), Some(65534)).unwrap();
    }
    let state = d.home.state_dir();
    std::os::unix::fs::lchown(&state, Some(0), Some(0)).unwrap();
    crate::support::chmod(&state, 0o755);
    let lock_ms = d.lock_ms();
    Run::unprivileged(&d.home, "dream-run")
        .arg("recover")
        .code(3)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "environment", "{doc}");
            assert_eq!(doc["error"]["reason"], "permission", "{doc}");
        })
        .stderr_contains("cannot move aside the journal")
        .run();
    let gate = d.gate_now();
    Run::unprivileged(&d.home, "dream-lock")
        .args(["acquire", "--pid", &std::process::id().to_string()])
        .stdin(gate)
        .code(3)
        .stdout_json(|doc| {
            assert_eq!(doc["lock"]["acquired"], false, "{doc}");
            assert_eq!(doc["lock"]["error"]["kind"], "environment", "{doc}");
        })
        .stderr_contains("cannot move aside the journal")
        .run();
    assert_eq!(
        std::fs::read(d.journal().join("intent.json")).unwrap(),
        b"not json"
    );
    assert_eq!(d.lock_ms(), lock_ms);
    assert_eq!(std::fs::read(d.home.lock_file()).unwrap(), b"");
}

/// Attack: the lock file names a live process that has nothing to do with dreamkit (PID 1,
/// written now) while an orphaned run waits. It is a holder as far as anyone can tell:
/// `recover` and `acquire` are refused (exit 1, busy), the run and the lock stay as they are.
#[test]
fn a_lock_naming_a_live_unrelated_process_blocks_recovery_and_changes_nothing() {
    let d = Dream::new();
    let id = completed_run(&d);
    forge_running(&d, &id, &id, |_| {});
    std::fs::write(d.home.lock_file(), "1").unwrap();
    let lock_ms = d.lock_ms();
    recover(&d)
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["recovered"], false, "{doc}");
            assert_eq!(doc["reason"], "busy", "{doc}");
            assert_eq!(doc["holder_pid"], 1, "{doc}");
        })
        .stderr_contains("held by PID 1")
        .run();
    d.tool("dream-lock")
        .args(["acquire", "--pid", &std::process::id().to_string()])
        .stdin("{}")
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["lock"]["acquired"], false, "{doc}");
            assert_eq!(doc["lock"]["holder_pid"], 1, "{doc}");
        })
        .stderr_contains("dream-lock: busy: the lock is held by PID 1 since ")
        .run();
    assert_eq!(d.task(&id)["status"], "running");
    assert_eq!(d.read("stale.md"), NOTE);
    assert_eq!(d.lock_ms(), lock_ms);
    assert_eq!(std::fs::read(d.home.lock_file()).unwrap(), b"1");
}

/// Attack: under `proposals/`, an old folder whose name is not UTF-8 and one whose record is
/// a FIFO; under `tasks/`, a record whose name is not UTF-8 and one far over any record's
/// size. Nothing blocks (the FIFO is never opened for a read that waits), nothing is removed.
#[test]
fn odd_names_and_files_among_proposals_and_tasks_are_left_alone() {
    use std::os::unix::ffi::OsStrExt;
    let d = Dream::new();
    let state = d.home.state_dir();
    let proposals = state.join("proposals");
    let tasks = tasks_dir(&d);
    std::fs::create_dir_all(&tasks).unwrap();
    let odd = proposals.join(std::ffi::OsStr::from_bytes(b"2020\xff-dead"));
    let fifo_id = "20200101T000000Z-0000fifo";
    for dir in [odd.clone(), proposals.join(fifo_id)] {
        std::fs::create_dir_all(dir.join("staging")).unwrap();
        std::fs::write(dir.join("staging/MEMORY.md"), "staged\n").unwrap();
        age_dir(&dir);
    }
    crate::support::mkfifo(&tasks.join(format!("{fifo_id}.json")));
    std::fs::write(
        tasks.join(std::ffi::OsStr::from_bytes(b"\xff.json")),
        "{\"status\": \"running\"}",
    )
    .unwrap();
    let huge = tasks.join("20200101T000000Z-0000huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let before = listing(&state);
    d.recovers_nothing();
    assert_eq!(listing(&state), before);
}

/// Attack: SIGTERM (then SIGINT) to `recover` while it waits for the lock's guard (another
/// dreamkit process is in the middle of taking the lock), an orphaned run waiting. It stops
/// as interrupted (143 / 130), having changed nothing; the next `recover` rolls the run back.
#[test]
fn a_signal_while_recover_waits_for_the_guard_interrupts_it_changing_nothing() {
    use std::os::fd::AsRawFd;
    for (signal, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let d = Dream::new();
        let id = completed_run(&d);
        forge_running(&d, &id, &id, |_| {});
        let guard = std::fs::File::options()
            .read(true)
            .write(true)
            .open(d.mem().join(".consolidate-lock.dreamkit"))
            .unwrap();
        assert_eq!(unsafe { libc::flock(guard.as_raw_fd(), libc::LOCK_EX) }, 0);
        let lock_ms = d.lock_ms();
        let running = recover(&d)
            .code(code)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "interrupted", "{doc}"))
            .stderr_any("the interruption, checked by the exit")
            .spawn();
        crate::support::wait::for_syscall(running.pid() as i32, libc::SYS_clock_nanosleep);
        crate::support::wait::signal_delivered(running.pid() as i32, signal);
        running.finish();
        drop(guard);
        assert_eq!(d.task(&id)["status"], "running");
        assert_eq!(d.read("stale.md"), NOTE);
        assert_eq!(d.lock_ms(), lock_ms);
        recover(&d)
            .success()
            .stdout_json(|doc| assert_eq!(doc["orphans"][0]["outcome"], "rolled_back", "{doc}"))
            .stderr_contains("rolled back, 1 file put back")
            .run();
        assert_eq!(d.read("stale.md"), "The deploy uses FTP.\n");
    }
}

/// Attack: `snapshots/` a link to a folder elsewhere holding folders named like the
/// snapshots of eleven old completed runs. The next completed run prunes old snapshots: it
/// removes nothing through the link.
#[test]
fn pruning_never_removes_through_a_link_in_place_of_snapshots() {
    let d = Dream::new();
    let id = completed_run(&d);
    let template = d.task(&id);
    let outside = d.home.root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let snapshots = d.home.state_dir().join("snapshots");
    std::fs::remove_dir_all(&snapshots).unwrap();
    symlink(&outside, &snapshots).unwrap();
    for n in 0..11 {
        let old = format!("20200101T0000{n:02}Z-0000000{n:x}");
        let mut record = template.clone();
        record["task_id"] = json!(old);
        record["started_at"] = json!(format!("2020-01-01T00:00:{:02}.000Z", 20 - n));
        record["snapshot"] = json!(snapshots.join(&old).to_str().unwrap());
        std::fs::write(
            tasks_dir(&d).join(format!("{old}.json")),
            serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
        std::fs::create_dir_all(outside.join(&old)).unwrap();
        std::fs::write(outside.join(&old).join("thesis.md"), "years of work\n").unwrap();
    }
    let before: Vec<_> = listing(&outside)
        .into_iter()
        .filter(|(name, _)| name.starts_with("2020"))
        .collect();
    // A completed run prunes old snapshots; one that writes nothing (a run that writes is
    // stopped at its first write: its snapshot would go through the link).
    d.touch_sessions();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api
        .push(Reply::anthropic_tools(
            "Looking.",
            &[("read_file", json!({"path": "MEMORY.md"}))],
        ))
        .push(Reply::anthropic_text("Nothing to change."));
    let out = d
        .dream_run(&envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run();
    d.release(&out.stdout, "completed");
    let after: Vec<_> = listing(&outside)
        .into_iter()
        .filter(|(name, _)| name.starts_with("2020"))
        .collect();
    assert_eq!(after, before);
}

/// Attack: a link in place of `tasks/` or `snapshots/` before a run. The run writes neither
/// its record nor its copies through it: it stops before any memory file changes (exit 3,
/// the folder behind the link untouched).
#[test]
fn a_run_writes_nothing_through_a_link_in_place_of_its_folders() {
    for folder in ["tasks", "snapshots"] {
        let d = Dream::new();
        let outside = d.home.root.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(d.home.state_dir()).unwrap();
        symlink(&outside, d.home.state_dir().join(folder)).unwrap();
        let memory = d.md_tree();
        let holder = LiveProcess::start();
        let envelope = d.acquired_envelope(&holder);
        d.api
            .push(Reply::anthropic_tools(
                "Writing.",
                &[
                    ("read_file", json!({"path": "MEMORY.md"})),
                    (
                        "write_file",
                        json!({"path": "MEMORY.md", "content": "# Memory\n"}),
                    ),
                ],
            ))
            .push(Reply::anthropic_text("Done."));
        d.dream_run(&envelope, &[])
            .code(3)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "environment", "{folder}: {doc}"))
            .stderr_with(|text| {
                assert!(
                    text.contains(&format!("{folder} is a symbolic link: not followed")),
                    "{folder}: {text:?}"
                );
            })
            .run();
        assert_eq!(listing(&outside), [], "{folder}: written through the link");
        assert_eq!(d.md_tree(), memory, "{folder}");
    }
}
