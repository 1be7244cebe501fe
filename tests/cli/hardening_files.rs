//! Issue 8: a failed append leaves the transcript as it was; no tool waits on a FIFO or reads
//! `/dev/zero` forever; SIGINT/SIGTERM end every tool promptly with 130/143 and consistent
//! state; a symlink loop in the transcripts dir is skipped. Every wait is bounded, so a
//! regression fails instead of hanging the suite.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::transcript::{Transcript, SESSION};
use crate::support::*;

/// Generous: each of these tools answers in milliseconds when it does not hang.
const BOUND: Duration = Duration::from_secs(10);
const KEY: &str = "sk-ant-test-SECRET-0123456789";

#[derive(Clone, Copy, Debug)]
enum Special {
    Fifo,
    DevZero,
}

const SPECIALS: [Special; 2] = [Special::Fifo, Special::DevZero];

/// Puts a FIFO, or a symlink to `/dev/zero`, at `path` (replacing what was there).
fn make(special: Special, path: &Path) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
    let _ = std::fs::remove_file(path);
    match special {
        Special::Fifo => {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
        }
        Special::DevZero => std::os::unix::fs::symlink("/dev/zero", path).expect("symlink"),
    }
}

fn is_special(special: Special, path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    match special {
        Special::Fifo => std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo()),
        Special::DevZero => {
            std::fs::read_link(path).is_ok_and(|target| target == Path::new("/dev/zero"))
        }
    }
}

/// `bin` with the home's environment, to run to the end within [`BOUND`] (killed and failed
/// otherwise); the caller says what it must print.
fn bounded<'a>(home: &ClaudeHome, bin: &str) -> Run<'a> {
    Run::new(home, bin).timeout(BOUND)
}

/// What the tools call `special` when they refuse it.
fn kind(special: Special) -> &'static str {
    match special {
        Special::Fifo => "a FIFO",
        Special::DevZero => "a character device",
    }
}

/// The refusal of `path`, as `what` names it: "cannot read {what}{path}: not a regular file
/// ({kind})".
fn not_regular(what: &str, path: &Path, special: Special) -> String {
    format!(
        "cannot read {what}{}: not a regular file ({})",
        path.display(),
        kind(special)
    )
}

/// `tool`'s one stderr line saying `message`.
fn line(tool: &str, message: &str) -> String {
    format!("{tool}: {message}\n")
}

/// Waits until process `pid` has its SIGINT and SIGTERM handlers (a signal sent before then
/// would meet the default action, whatever the tool does).
fn wait_for_handlers(pid: u32) {
    let status = format!("/proc/{pid}/status");
    wait::for_true("the signal handlers", || {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        let caught = text
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .unwrap_or(0);
        let bit = |sig: i32| 1u64 << (sig - 1);
        caught & bit(libc::SIGINT) != 0 && caught & bit(libc::SIGTERM) != 0
    });
}

/// A binary as a plain process (for pre_exec), with the home's environment.
fn process(home: &ClaudeHome, bin: &str) -> Command {
    home.process(bin_path(bin))
}

/// A binary to be signalled: stdin closed, bounded.
fn signalled<'a>(home: &ClaudeHome, bin: &str) -> Run<'a> {
    bounded(home, bin).stdin_from(Stdio::null())
}

/// Three real turns ten minutes ago: every away-summary gate passes.
fn three_turns() -> Transcript {
    Transcript::started(Duration::from_secs(600))
        .user("Why does dream-gate scan so slowly?")
        .assistant("It stats every transcript by full path.")
        .user("Make it stat relative to the directory.")
        .assistant("Done; the scan takes 0.89x of find.")
        .user("Good, now update the README.")
        .assistant("Updated the README with the new figures.")
}

fn with_model<'a>(run: Run<'a>, api: &FakeApi) -> Run<'a> {
    run.env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", KEY)
        .env("DREAMKIT_RETRY_BASE_MS", "1")
}

// ---------------------------------------------------------------------------------------------
// 1. A failed append leaves the transcript as it was.

#[test]
fn an_append_cut_short_by_a_file_size_limit_is_undone_and_exits_3() {
    // 100 bytes of room: the write is short. No room: the write fails with EFBIG.
    for (room, says) in [
        (
            100u64,
            "the partial record was removed, the file is unchanged",
        ),
        (0, "nothing was written"),
    ] {
        let home = ClaudeHome::new();
        let api = FakeApi::start();
        let transcript = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
        three_turns().write(&transcript);
        let before = std::fs::read(&transcript).expect("read");
        api.push(Reply::anthropic_text(
            "You were speeding up the gate; next, update the README.",
        ));
        let limit = before.len() as u64 + room;
        // Why, after the path: the short write's size (of the whole record), or EFBIG.
        let (why, after) = if room == 0 {
            (
                "File too large (os error 27); nothing was written".to_string(),
                "",
            )
        } else {
            (
                format!("short append ({room} of "),
                " bytes); the partial record was removed, the file is unchanged",
            )
        };
        let mut cmd = process(&home, "recap");
        // A full disk without root: the file-size limit makes the write past it short (or
        // EFBIG), and SIGXFSZ ignored lets the process see that instead of dying.
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
        with_model(Run::ours(cmd, "recap"), &api)
            .args(["--auto", "--transcript"])
            .arg(&transcript)
            .stdin_from(Stdio::null())
            .code(3)
            .stdout_json(|doc| {
                assert_eq!(doc["status"], "failed");
                let message = doc["message"].as_str().expect("message");
                assert!(message.contains(says), "{message}");
            })
            .stderr_with(|err| {
                let rest = err
                    .strip_prefix(&format!(
                        "recap: cannot append to {}: {why}",
                        transcript.display()
                    ))
                    .unwrap_or_else(|| panic!("{err:?}"));
                if room == 0 {
                    assert_eq!(rest, "\n");
                } else {
                    let record = rest
                        .strip_suffix(&format!("{after}\n"))
                        .and_then(|n| n.parse::<u64>().ok())
                        .unwrap_or_else(|| panic!("{err:?}"));
                    assert!(record > room, "{err}");
                }
            })
            .run();
        assert_eq!(api.requests().len(), 1);
        assert_eq!(
            std::fs::read(&transcript).expect("read"),
            before,
            "the transcript kept a fragment (room {room})"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 2. No hang on special files.

#[test]
fn recap_refuses_a_special_transcript_in_both_modes() {
    for special in SPECIALS {
        let home = ClaudeHome::new();
        let api = FakeApi::start();
        let transcript = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
        make(special, &transcript);
        for mode in [&[][..], &["--auto"][..]] {
            bounded(&home, "recap")
                .env("ANTHROPIC_BASE_URL", api.url())
                .env("ANTHROPIC_API_KEY", KEY)
                .args(mode)
                .arg("--transcript")
                .arg(&transcript)
                .code(3)
                .stdout_json(|out| {
                    assert_eq!(out["status"], "failed", "{special:?} {mode:?}");
                    assert!(
                        out["message"]
                            .as_str()
                            .is_some_and(|m| m.contains("not a regular file")),
                        "{out}"
                    );
                })
                .stderr_is(line("recap", &not_regular("", &transcript, special)))
                .run();
        }
        assert!(api.requests().is_empty());
        assert!(is_special(special, &transcript));
    }
}

#[test]
fn a_special_lock_file_fails_closed_in_every_tool_without_waiting() {
    for special in SPECIALS {
        let home = ClaudeHome::new();
        make(special, &home.lock_file());
        let marker = home.project.join("ran");
        for args in [
            vec!["status"],
            vec!["acquire"],
            vec!["exec", "--", "touch", marker.to_str().expect("utf-8")],
        ] {
            bounded(&home, "dream-lock")
                .args(&args)
                .code(3)
                .stdout_json(|out| {
                    assert_eq!(
                        out["error"],
                        json!({"kind": "environment", "reason": "not_a_file",
                               "message": not_regular("the lock file ", &home.lock_file(), special)}),
                        "{special:?} {args:?}"
                    );
                })
                .stderr_with(|err| {
                    assert!(err.contains("not a regular file"), "{err}");
                    assert_eq!(
                        err,
                        line(
                            "dream-lock",
                            &not_regular("the lock file ", &home.lock_file(), special)
                        )
                    );
                })
                .run();
        }
        assert!(!marker.exists(), "exec ran its command without the lock");
        bounded(&home, "dream-gate")
            .args(["--min-hours", "0"])
            .code(3)
            .stdout_json(|out| assert_eq!(out["gate"]["reason"], "error", "{special:?}"))
            .stderr_is(line(
                "dream-gate",
                &not_regular("the lock file ", &home.lock_file(), special),
            ))
            .run();
        assert!(
            is_special(special, &home.lock_file()),
            "{special:?} replaced"
        );
    }
}

fn drafts_dir(home: &ClaudeHome) -> PathBuf {
    home.config.join("feedback/drafts")
}

fn feedback<'a>(home: &ClaudeHome, args: &[&str], stdin: &str) -> Run<'a> {
    bounded(home, "feedback").args(args).stdin(stdin)
}

/// `feedback queue` of `fields`, which must succeed; the new draft's id.
fn queued(home: &ClaudeHome, fields: &Value) -> String {
    feedback(home, &["queue"], &fields.to_string())
        .success()
        .stdout_json(|doc| assert!(doc["draft_id"].is_string(), "{doc}"))
        .stderr_with(|err| {
            let id = err
                .strip_prefix(&format!(
                    "feedback: draft queued: {} (review with `feedback show ",
                    fields["title"].as_str().expect("title")
                ))
                .and_then(|rest| rest.strip_suffix("`)\n"))
                .unwrap_or_else(|| panic!("not the queued line: {err:?}"));
            assert_eq!(id.len(), 36, "{err}");
        })
        .run()
        .json()["draft_id"]
        .as_str()
        .expect("id")
        .to_string()
}

fn bug(session: &str) -> Value {
    json!({"type": "bug", "title": "a FIFO hangs feedback", "details": "mkfifo, then list", "source_session_id": session})
}

#[test]
fn special_files_in_the_drafts_dir_are_skipped_by_listings_and_refused_by_show() {
    let home = ClaudeHome::new();
    let real = queued(&home, &bug("s1"));
    make(Special::Fifo, &drafts_dir(&home).join("fifo-draft.json"));
    make(Special::DevZero, &drafts_dir(&home).join("zero-draft.json"));
    let looped = drafts_dir(&home).join("loop-draft.json");
    std::os::unix::fs::symlink(&looped, &looped).expect("symlink");

    feedback(&home, &["list"], "")
        .success()
        .stdout_json(|out| {
            let ids: Vec<&str> = out["drafts"]
                .as_array()
                .expect("drafts")
                .iter()
                .map(|d| d["draft_id"].as_str().expect("id"))
                .collect();
            assert_eq!(ids, [real.as_str()]);
        })
        .stderr_empty()
        .run();

    // Queueing lists the drafts to evict: the special files are not in its way.
    feedback(&home, &["queue"], &bug("s2").to_string())
        .success()
        .stdout_json(|out| assert_eq!(out["evicted"], json!([])))
        .stderr_contains(
            "feedback: draft queued: a FIFO hangs feedback (review with `feedback show ",
        )
        .run();

    for (id, special) in [
        ("fifo-draft", Special::Fifo),
        ("zero-draft", Special::DevZero),
    ] {
        let draft = drafts_dir(&home).join(format!("{id}.json"));
        let refused = line("feedback", &not_regular("", &draft, special));
        feedback(&home, &["show", id], "")
            .code(3)
            .stdout_json(|out| assert_eq!(out["error"]["kind"], "environment", "{id}"))
            .stderr_with(|err| {
                assert!(err.contains("not a regular file"), "{err}");
                assert_eq!(err, refused);
            })
            .run();
        feedback(
            &home,
            &["send", id, "--endpoint", "http://127.0.0.1:9/", "--yes"],
            "",
        )
        .code(3)
        .stdout_json(|out| {
            assert_eq!(out["error"]["kind"], "environment", "{id}");
            assert_eq!(out["error"]["reason"], "not_a_file", "{id}");
        })
        .stderr_is(refused.as_str())
        .run();
    }
}

#[test]
fn a_special_session_file_is_refused_and_nothing_is_sent() {
    for special in SPECIALS {
        let home = ClaudeHome::new();
        let api = FakeApi::start();
        let session_file = home.root.join("session.jsonl");
        make(special, &session_file);
        let mut fields = bug("s1");
        fields["transcript_ref"] = json!({"session_file": session_file});
        let id = queued(&home, &fields);
        api.push(Reply::json(200, json!({"id": 7})));
        let endpoint = format!("{}/feedback", api.url());
        feedback(
            &home,
            &[
                "send",
                &id,
                "--endpoint",
                &endpoint,
                "--with-transcript",
                "--yes",
            ],
            "",
        )
        .code(3)
        .stdout_json(|out| {
            assert_eq!(out["error"]["kind"], "environment", "{special:?}");
            assert_eq!(out["error"]["reason"], "not_a_file");
            assert_eq!(
                (&out["sent"], &out["queued"]),
                (&json!(false), &json!(true))
            );
        })
        .stderr_is(line(
            "feedback",
            &format!(
                "not sent, the draft is kept: {}",
                not_regular("the transcript ", &session_file, special)
            ),
        ))
        .run();
        assert!(api.requests().is_empty(), "sent without the transcript");
    }
}

#[test]
fn special_settings_files_are_refused_not_read() {
    for special in SPECIALS {
        let home = ClaudeHome::new();
        make(special, &home.config.join("settings.json"));
        let settings = home.config.join("settings.json");
        let refusal = not_regular("settings file ", &settings, special);
        bounded(&home, "dream-gate")
            .code(3)
            .stdout_json(|out| {
                assert_eq!(out["gate"]["reason"], "error", "{special:?}");
                assert_eq!(out["error"]["reason"], "not_a_file", "{special:?}");
            })
            .stderr_with(|err| {
                assert!(err.contains("not a regular file"), "{err}");
                assert_eq!(err, line("dream-gate", &refusal));
            })
            .run();
        feedback(&home, &["queue"], &bug("s1").to_string())
            .code(3)
            .stdout_json(|out| {
                assert_eq!(
                    out["error"],
                    json!({"kind": "environment", "reason": "not_a_file", "message": refusal}),
                    "{special:?}"
                );
            })
            .stderr_is(line("feedback", &refusal))
            .run();
        assert!(!drafts_dir(&home).exists(), "queued despite the settings");
    }
}

#[test]
fn the_gate_never_waits_on_a_fifo_dot_git_or_scan_stamp() {
    let home = ClaudeHome::new();
    home.consolidated(hours(48));
    make(Special::Fifo, &home.project.join(".git"));
    make(Special::Fifo, &home.state_dir().join("last-scan"));
    bounded(&home, "dream-gate")
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "too_few_sessions"))
        // A warning for the stamp it could not read, then the reason it is not due.
        .stderr_with(|err| {
            let lines: Vec<&str> = err.lines().collect();
            assert_eq!(lines.len(), 2, "{err}");
            assert_eq!(
                lines[0],
                line(
                    "dream-gate",
                    &not_regular(
                        "scan stamp ",
                        &home.state_dir().join("last-scan"),
                        Special::Fifo
                    )
                )
                .trim_end()
            );
            assert!(
                lines[1]
                    .starts_with("dream-gate: not due: too_few_sessions: 0 of 5 sessions since "),
                "{err}"
            );
        })
        .run();
}

// ---------------------------------------------------------------------------------------------
// 3. Listings skip what is not a transcript.

#[test]
fn the_gate_scan_skips_symlink_loops_fifos_and_devices() {
    let home = ClaudeHome::new();
    home.consolidated(hours(48));
    let real = session_id(1);
    home.add_session(&real, hours(1));
    let dir = home.transcripts_dir();
    let looped = dir.join(format!("{}.jsonl", session_id(2)));
    std::os::unix::fs::symlink(&looped, &looped).expect("symlink loop");
    make(Special::Fifo, &dir.join(format!("{}.jsonl", session_id(3))));
    make(
        Special::DevZero,
        &dir.join(format!("{}.jsonl", session_id(4))),
    );
    bounded(&home, "dream-gate")
        .args(["--min-hours", "24", "--min-sessions", "1"])
        .success()
        .stdout_json(|out| {
            let ids: Vec<&str> = out["gate"]["sessions"]
                .as_array()
                .expect("sessions")
                .iter()
                .map(|s| s["id"].as_str().expect("id"))
                .collect();
            assert_eq!(ids, [real.as_str()]);
        })
        .stderr_empty()
        .run();
}

// ---------------------------------------------------------------------------------------------
// 2. Signals always work.

/// Ended by `name`: exit `code`, the interrupted document and its one stderr line.
fn interrupted<'a>(run: Run<'a>, bin: &str, code: i32, name: &str) -> Run<'a> {
    let line = line(bin, &format!("interrupted by {name}"));
    let name = name.to_string();
    run.code(code)
        .stdout_json(move |doc| {
            assert_eq!(
                *doc,
                json!({"error": {"kind": "interrupted", "message": format!("interrupted by {name}")}})
            );
        })
        .stderr_is(line)
}

#[test]
fn a_tool_blocked_reading_stdin_ends_on_sigint_and_sigterm() {
    for (sig, code, name) in [
        (libc::SIGINT, 130, "SIGINT"),
        (libc::SIGTERM, 143, "SIGTERM"),
    ] {
        for (bin, args) in [
            ("dream-gate", &[][..]),
            ("dream-lock", &["acquire"][..]),
            ("feedback", &["queue"][..]),
        ] {
            let home = ClaudeHome::new();
            // A writer that never writes nor closes (the run holds the pipe's other end):
            // the tool waits in read(2).
            let child = interrupted(
                bounded(&home, bin).args(args).stdin_from(Stdio::piped()),
                bin,
                code,
                name,
            )
            .spawn();
            wait_for_handlers(child.pid());
            // In read(2), not on its way there.
            wait::for_syscall(child.pid() as i32, libc::SYS_read);
            child.signal(sig);
            child.finish();
            assert!(!home.lock_file().exists(), "{bin} left a lock file");
        }
    }
}

#[test]
fn feedback_send_waiting_on_a_silent_server_ends_on_sigterm_and_keeps_the_draft() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let id = queued(&home, &bug("s1"));
    api.push(Reply::Hang(Duration::from_secs(30)));
    let child = interrupted(
        signalled(&home, "feedback")
            .args(["send", &id, "--endpoint"])
            .arg(format!("{}/feedback", api.url()))
            .args(["--yes", "--timeout", "60s", "--retries", "0"]),
        "feedback",
        143,
        "SIGTERM",
    )
    .spawn();
    wait::for_true("the request", || !api.requests().is_empty());
    child.signal(libc::SIGTERM);
    child.finish();
    assert!(drafts_dir(&home).join(format!("{id}.json")).is_file());
}

#[test]
fn recap_waiting_on_a_slow_model_ends_on_sigterm_with_143() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let transcript = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
    three_turns().write(&transcript);
    let before = std::fs::read(&transcript).expect("read");
    api.push(Reply::Hang(Duration::from_secs(30)));
    for mode in [&[][..], &["--auto"][..]] {
        let seen = api.requests().len();
        let child = with_model(signalled(&home, "recap"), &api)
            .args(mode)
            .arg("--transcript")
            .arg(&transcript)
            .code(143)
            .stdout_json(|doc| {
                assert_eq!(
                    (doc["status"].as_str(), doc["reason"].as_str()),
                    (Some("aborted"), Some("interrupted")),
                    "{mode:?}"
                );
            })
            .stderr_is("recap: interrupted by SIGTERM\n")
            .spawn();
        wait::for_true("the request", || api.requests().len() > seen);
        child.signal(libc::SIGTERM);
        child.finish();
        api.push(Reply::Hang(Duration::from_secs(30)));
    }
    assert_eq!(std::fs::read(&transcript).expect("read"), before);
}

/// Holds `flock` on the lock's guard file, as another dreamkit acquirer would.
fn hold_guard(home: &ClaudeHome) -> std::fs::File {
    use std::os::unix::io::AsRawFd;
    let path = home.memory_dir().join(".consolidate-lock.dreamkit");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .expect("guard");
    assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0);
    file
}

#[test]
fn acquire_waiting_for_the_guard_ends_on_sigterm_without_touching_the_lock() {
    let home = ClaudeHome::new();
    home.consolidated(hours(30));
    let mtime_before = mtime(&home.lock_file());
    let guard = hold_guard(&home);
    let live = LiveProcess::start();
    let acquire = Run::new(&home, "dream-lock")
        .args(["acquire", "--pid", &live.pid().to_string()])
        .stdin_from(Stdio::null())
        .code(143)
        .stdout_json(|doc| {
            assert_eq!(
                *doc,
                json!({"error": {"kind": "interrupted", "message": "interrupted by SIGTERM"}})
            );
        })
        .stderr_is("dream-lock: interrupted by SIGTERM\n")
        .spawn();
    // It is waiting for the guard once it has the guard file open.
    let fds = format!("/proc/{}/fd", acquire.pid());
    wait::for_true("the guard wait", || {
        std::fs::read_dir(&fds).is_ok_and(|d| {
            d.flatten().any(|fd| {
                std::fs::read_link(fd.path())
                    .is_ok_and(|t| t.ends_with(".consolidate-lock.dreamkit"))
            })
        })
    });
    acquire.signal(libc::SIGTERM);
    acquire.finish();
    drop(guard);
    assert_eq!(std::fs::read(home.lock_file()).expect("read"), b"");
    assert_eq!(mtime(&home.lock_file()), mtime_before, "the mtime moved");
}

#[test]
fn exec_asked_twice_kills_a_command_that_ignores_sigterm_and_rolls_back() {
    let home = ClaudeHome::new();
    home.consolidated(hours(30));
    let prior = epoch_ms(mtime(&home.lock_file()));
    let marker = home.project.join("started");
    let child = signalled(&home, "dream-lock")
        .args(["exec", "--", "sh", "-c"])
        .arg(format!(
            "trap '' TERM; touch {}; while :; do sleep 0.05; done",
            marker.display()
        ))
        .code(143)
        // The command's stdout was the test's: it printed nothing.
        .stdout_empty()
        .stderr_is(
            "dream-lock: rolled the lock back (aborted): the consolidation time is as it was\n",
        )
        .spawn();
    wait::for_true("the command", || marker.exists());
    // The first SIGTERM is forwarded and ignored; the second, sent once exec has taken the
    // first (two pending ones would merge into one), kills the command.
    wait::signal_delivered(child.pid() as i32, libc::SIGTERM);
    wait::signal_delivered(child.pid() as i32, libc::SIGTERM);
    child.finish();
    assert_eq!(std::fs::read(home.lock_file()).expect("read"), b"");
    assert_eq!(epoch_ms(mtime(&home.lock_file())), prior, "not rolled back");
}

/// A 1 GiB file with no data blocks: reading it whole would show as 1 GiB of RSS.
fn sparse_gib(path: &Path) {
    std::fs::File::create(path)
        .and_then(|f| f.set_len(1024 * 1024 * 1024))
        .unwrap();
}

/// `read_file` of a 1 GiB sparse `.md` in the memory dir: the model gets a tool error (its
/// window holds NUL bytes, never sent), the file is not hashed whole (over the per-file cap it
/// is not tracked), and the run's peak RSS stays small.
#[test]
fn read_file_of_a_sparse_gib_memory_file_is_refused_with_bounded_memory() {
    let d = crate::support::dream::Dream::new();
    sparse_gib(&d.mem().join("big.md"));
    d.api
        .push(Reply::anthropic_tools(
            "Reading.",
            &[("read_file", json!({"path": "big.md"}))],
        ))
        .push(Reply::anthropic_text("Nothing to change."));
    let mut cmd = d.process(&bin_path("dream-run"));
    cmd.args(["--unlocked", "-n"]);
    // Not through Run: under ptrace (see net::run_measuring_peak_rss); the three streams are
    // checked here.
    let (out, peak_kib) = crate::net::run_measuring_peak_rss(cmd);
    let doc = run::one_json_line(std::str::from_utf8(&out.stdout).unwrap());
    assert_eq!(out.status.code(), Some(0), "{doc}");
    // Nothing written: completed with no file touched.
    assert_eq!(doc["run"]["status"], "completed", "{doc}");
    assert_eq!(doc["run"]["files_touched"], json!([]), "{doc}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{doc}");
    let requests = d.api.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        crate::support::dream::tool_results(&requests[1]),
        vec![(
            "big.md: line 1 holds a NUL byte: not a text file, nothing of it is shown".to_string(),
            true
        )]
    );
    assert!(
        peak_kib < 64 * 1024,
        "peak RSS {} MiB reading a 1 GiB memory file",
        peak_kib / 1024
    );
}

/// A 1 GiB `response-formats.json` (sparse) is over its cap: ignored, as a corrupt one is
/// (the form is detected again), never read whole, and replaced by the small file it should be.
#[test]
fn a_gib_response_formats_file_is_ignored_with_bounded_memory() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let formats = home.state_home.join("dreamkit/response-formats.json");
    std::fs::create_dir_all(formats.parent().unwrap()).unwrap();
    sparse_gib(&formats);
    api.push(Reply::openai_text(
        &json!({"state": "done", "detail": "pushed the fix", "tempo": "idle", "needs": "", "result": "pushed"})
            .to_string(),
    ));
    let base = format!("{}/v1", api.url());
    // The run under ptrace gets no stdin: the turn comes from a transcript.
    let transcript = home.root.join(format!("{SESSION}.jsonl"));
    std::fs::write(
        &transcript,
        format!(
            "{}\n",
            json!({"type": "assistant", "sessionId": SESSION, "uuid": "a1",
                   "timestamp": "2026-12-01T10:00:05.000Z",
                   "message": {"id": "msg1", "role": "assistant",
                               "content": [{"type": "text", "text": "All tests pass. I pushed the fix."}]}})
        ),
    )
    .unwrap();
    let mut cmd = home.process(bin_path("turn-status"));
    cmd.args(["--engine", "llm", "--transcript"])
        .arg(&transcript)
        .env("DREAMKIT_PROVIDER", "openai")
        .env("OPENAI_BASE_URL", &base)
        .env("OPENAI_API_KEY", "")
        .env("OPENAI_MODEL", "small-model")
        .env("DREAMKIT_RETRY_BASE_MS", "1");
    let (out, peak_kib) = crate::net::run_measuring_peak_rss(cmd);
    let doc = run::one_json_line(std::str::from_utf8(&out.stdout).unwrap());
    assert_eq!(out.status.code(), Some(0), "{doc}");
    assert_eq!(doc["status_category"], "completed", "{doc}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{doc}");
    assert_eq!(api.requests().len(), 1);
    assert!(
        peak_kib < 64 * 1024,
        "peak RSS {} MiB with a 1 GiB response-formats.json",
        peak_kib / 1024
    );
    // Replaced by the one server's form, written atomically.
    let remembered: Value = serde_json::from_slice(&std::fs::read(&formats).unwrap()).unwrap();
    assert_eq!(remembered, json!({ base: "json_schema" }));
}
