//! Issue 8: a failed append leaves the transcript as it was; no tool waits on a FIFO or reads
//! `/dev/zero` forever; SIGINT/SIGTERM end every tool promptly with 130/143 and consistent
//! state; a symlink loop in the transcripts dir is skipped. Every wait is bounded, so a
//! regression fails instead of hanging the suite.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
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

/// Runs to the end within [`BOUND`] (killed and failed otherwise): code, document, stderr.
fn bounded(mut cmd: assert_cmd::Command) -> (i32, Value, String) {
    let out = cmd.timeout(BOUND).output().expect("run");
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("no exit code (still running after {BOUND:?}?): {out:?}"));
    (code, stdout_json(&out), stderr_text(&out))
}

/// Waits until `child` has its SIGINT and SIGTERM handlers (a signal sent before then would
/// meet the default action, whatever the tool does).
fn wait_for_handlers(child: &Child) {
    let status = format!("/proc/{}/status", child.id());
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

fn signal(child: &Child, signal: i32) {
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0, "kill");
}

/// A binary as a plain process (for pre_exec and signals), with the home's environment.
fn process(home: &ClaudeHome, bin: &str) -> Command {
    let mut cmd = home.process(bin_path(bin));
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
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

fn with_model(cmd: &mut Command, api: &FakeApi) {
    cmd.env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", KEY)
        .env("DREAMKIT_RETRY_BASE_MS", "1");
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
        let mut cmd = process(&home, "recap");
        with_model(&mut cmd, &api);
        cmd.args(["--auto", "--transcript"]).arg(&transcript);
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
        let out = wait::for_output(cmd.spawn().expect("spawn recap"));
        let doc = stdout_json(&out);
        assert_eq!(out.status.code(), Some(3), "{doc}");
        assert_eq!(doc["status"], "failed");
        let message = doc["message"].as_str().expect("message");
        assert!(message.contains(says), "{message}");
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
            let mut cmd = home.cmd("recap");
            cmd.env("ANTHROPIC_BASE_URL", api.url())
                .env("ANTHROPIC_API_KEY", KEY)
                .args(mode)
                .arg("--transcript")
                .arg(&transcript);
            let (code, out, _) = bounded(cmd);
            assert_eq!(code, 3, "{special:?} {mode:?}: {out}");
            assert_eq!(out["status"], "failed");
            assert!(
                out["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("not a regular file")),
                "{out}"
            );
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
            let mut cmd = home.cmd("dream-lock");
            cmd.args(&args);
            let (code, out, err) = bounded(cmd);
            assert_eq!(code, 3, "{special:?} {args:?}: {out}");
            assert!(err.contains("not a regular file"), "{err}");
        }
        assert!(!marker.exists(), "exec ran its command without the lock");
        let mut gate = home.cmd("dream-gate");
        gate.args(["--min-hours", "0"]);
        let (code, out, _) = bounded(gate);
        assert_eq!(code, 3, "{special:?}: {out}");
        assert_eq!(out["gate"]["reason"], "error");
        assert!(
            is_special(special, &home.lock_file()),
            "{special:?} replaced"
        );
    }
}

fn drafts_dir(home: &ClaudeHome) -> PathBuf {
    home.config.join("feedback/drafts")
}

fn feedback(home: &ClaudeHome, args: &[&str], stdin: &str) -> (i32, Value, String) {
    let mut cmd = home.cmd("feedback");
    cmd.args(args).write_stdin(stdin);
    bounded(cmd)
}

fn bug(session: &str) -> Value {
    json!({"type": "bug", "title": "a FIFO hangs feedback", "details": "mkfifo, then list", "source_session_id": session})
}

#[test]
fn special_files_in_the_drafts_dir_are_skipped_by_listings_and_refused_by_show() {
    let home = ClaudeHome::new();
    let (code, out, _) = feedback(&home, &["queue"], &bug("s1").to_string());
    assert_eq!(code, 0, "{out}");
    let real = out["draft_id"].as_str().expect("id").to_string();
    make(Special::Fifo, &drafts_dir(&home).join("fifo-draft.json"));
    make(Special::DevZero, &drafts_dir(&home).join("zero-draft.json"));
    let looped = drafts_dir(&home).join("loop-draft.json");
    std::os::unix::fs::symlink(&looped, &looped).expect("symlink");

    let (code, out, _) = feedback(&home, &["list"], "");
    assert_eq!(code, 0, "{out}");
    let ids: Vec<&str> = out["drafts"]
        .as_array()
        .expect("drafts")
        .iter()
        .map(|d| d["draft_id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [real.as_str()]);

    // Queueing lists the drafts to evict: the special files are not in its way.
    let (code, out, _) = feedback(&home, &["queue"], &bug("s2").to_string());
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["evicted"], json!([]));

    for id in ["fifo-draft", "zero-draft"] {
        let (code, out, err) = feedback(&home, &["show", id], "");
        assert_eq!(code, 3, "{id}: {out}");
        assert_eq!(out["error"]["kind"], "environment");
        assert!(err.contains("not a regular file"), "{err}");
        let (code, out, _) = feedback(
            &home,
            &["send", id, "--endpoint", "http://127.0.0.1:9/", "--yes"],
            "",
        );
        assert_eq!(code, 3, "{id}: {out}");
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
        let (code, out, _) = feedback(&home, &["queue"], &fields.to_string());
        assert_eq!(code, 0, "{out}");
        let id = out["draft_id"].as_str().expect("id").to_string();
        api.push(Reply::json(200, json!({"id": 7})));
        let endpoint = format!("{}/feedback", api.url());
        let (code, out, _) = feedback(
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
        );
        assert_eq!(code, 3, "{special:?}: {out}");
        assert_eq!(out["error"]["kind"], "environment");
        assert_eq!(out["error"]["reason"], "not_a_file");
        assert_eq!(
            (&out["sent"], &out["queued"]),
            (&json!(false), &json!(true))
        );
        assert!(api.requests().is_empty(), "sent without the transcript");
    }
}

#[test]
fn special_settings_files_are_refused_not_read() {
    for special in SPECIALS {
        let home = ClaudeHome::new();
        make(special, &home.config.join("settings.json"));
        let (code, out, err) = bounded(home.cmd("dream-gate"));
        assert_eq!(code, 3, "{special:?}: {out}");
        assert!(err.contains("not a regular file"), "{err}");
        let (code, out, _) = feedback(&home, &["queue"], &bug("s1").to_string());
        assert_eq!(code, 3, "{special:?}: {out}");
        assert!(!drafts_dir(&home).exists(), "queued despite the settings");
    }
}

#[test]
fn the_gate_never_waits_on_a_fifo_dot_git_or_scan_stamp() {
    let home = ClaudeHome::new();
    home.consolidated(hours(48));
    make(Special::Fifo, &home.project.join(".git"));
    make(Special::Fifo, &home.state_dir().join("last-scan"));
    let (code, out, _) = bounded(home.cmd("dream-gate"));
    assert_eq!(code, 1, "{out}");
    assert_eq!(out["gate"]["reason"], "too_few_sessions");
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
    let mut cmd = home.cmd("dream-gate");
    cmd.args(["--min-hours", "24", "--min-sessions", "1"]);
    let (code, out, _) = bounded(cmd);
    assert_eq!(code, 0, "{out}");
    let ids: Vec<&str> = out["gate"]["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [real.as_str()]);
}

// ---------------------------------------------------------------------------------------------
// 2. Signals always work.

fn interrupted(out: &Output, code: i32, name: &str) {
    assert_eq!(out.status.code(), Some(code), "{out:?}");
    let doc = stdout_json(out);
    assert_eq!(
        doc,
        json!({"error": {"kind": "interrupted", "message": format!("interrupted by {name}")}})
    );
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
            let mut cmd = process(&home, bin);
            // A writer that never writes nor closes: the tool waits in read(2).
            cmd.args(args).stdin(Stdio::piped());
            let mut child = cmd.spawn().expect("spawn");
            let stdin = child.stdin.take();
            wait_for_handlers(&child);
            // In read(2), not on its way there.
            wait::for_syscall(child.id() as i32, libc::SYS_read);
            signal(&child, sig);
            let out = wait::for_output(child);
            drop(stdin);
            interrupted(&out, code, name);
            assert!(
                stderr_text(&out).contains(&format!("{bin}: interrupted by {name}")),
                "{out:?}"
            );
            assert!(!home.lock_file().exists(), "{bin} left a lock file");
        }
    }
}

#[test]
fn feedback_send_waiting_on_a_silent_server_ends_on_sigterm_and_keeps_the_draft() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let (code, out, _) = feedback(&home, &["queue"], &bug("s1").to_string());
    assert_eq!(code, 0, "{out}");
    let id = out["draft_id"].as_str().expect("id").to_string();
    api.push(Reply::Hang(Duration::from_secs(30)));
    let mut cmd = process(&home, "feedback");
    cmd.args(["send", &id, "--endpoint"])
        .arg(format!("{}/feedback", api.url()))
        .args(["--yes", "--timeout", "60s", "--retries", "0"]);
    let child = cmd.spawn().expect("spawn");
    wait::for_true("the request", || !api.requests().is_empty());
    signal(&child, libc::SIGTERM);
    let out = wait::for_output(child);
    interrupted(&out, 143, "SIGTERM");
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
        let mut cmd = process(&home, "recap");
        with_model(&mut cmd, &api);
        cmd.args(mode).arg("--transcript").arg(&transcript);
        let seen = api.requests().len();
        let child = cmd.spawn().expect("spawn");
        wait::for_true("the request", || api.requests().len() > seen);
        signal(&child, libc::SIGTERM);
        let out = wait::for_output(child);
        assert_eq!(out.status.code(), Some(143), "{mode:?}: {out:?}");
        let doc = stdout_json(&out);
        assert_eq!(
            (doc["status"].as_str(), doc["reason"].as_str()),
            (Some("aborted"), Some("interrupted"))
        );
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
    let mut cmd = process(&home, "dream-lock");
    cmd.args(["acquire", "--pid", &live.pid().to_string()]);
    let child = cmd.spawn().expect("spawn");
    // It is waiting for the guard once it has the guard file open.
    let fds = format!("/proc/{}/fd", child.id());
    wait::for_true("the guard wait", || {
        std::fs::read_dir(&fds).is_ok_and(|d| {
            d.flatten().any(|fd| {
                std::fs::read_link(fd.path())
                    .is_ok_and(|t| t.ends_with(".consolidate-lock.dreamkit"))
            })
        })
    });
    signal(&child, libc::SIGTERM);
    let out = wait::for_output(child);
    drop(guard);
    interrupted(&out, 143, "SIGTERM");
    assert_eq!(std::fs::read(home.lock_file()).expect("read"), b"");
    assert_eq!(mtime(&home.lock_file()), mtime_before, "the mtime moved");
}

#[test]
fn exec_asked_twice_kills_a_command_that_ignores_sigterm_and_rolls_back() {
    let home = ClaudeHome::new();
    home.consolidated(hours(30));
    let prior = epoch_ms(mtime(&home.lock_file()));
    let marker = home.project.join("started");
    let mut cmd = process(&home, "dream-lock");
    cmd.args(["exec", "--", "sh", "-c"]).arg(format!(
        "trap '' TERM; touch {}; while :; do sleep 0.05; done",
        marker.display()
    ));
    let child = cmd.spawn().expect("spawn");
    wait::for_true("the command", || marker.exists());
    // The first SIGTERM is forwarded and ignored; the second, sent once exec has taken the
    // first (two pending ones would merge into one), kills the command.
    wait::signal_delivered(child.id() as i32, libc::SIGTERM);
    wait::signal_delivered(child.id() as i32, libc::SIGTERM);
    let out = wait::for_output(child);
    assert_eq!(out.status.code(), Some(143), "{out:?}");
    assert_eq!(std::fs::read(home.lock_file()).expect("read"), b"");
    assert_eq!(epoch_ms(mtime(&home.lock_file())), prior, "not rolled back");
}
