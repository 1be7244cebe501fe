//! `dream-lock` hardening: only an explicit yes proceeds, no orphaned holder, release rules,
//! and the one stderr line of every exit 1. Real processes, real files, real signals.

use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use crate::support::transcript::Transcript;
use crate::support::*;

/// dream-lock with `stdin`, to be told what it must print.
fn lock<'a>(home: &ClaudeHome, args: &[&str], stdin: &str) -> Run<'a> {
    Run::new(home, "dream-lock").args(args).stdin(stdin)
}

/// An `acquire` (with `args`) that must win: exit 0, silent; the envelope.
fn acquired(home: &ClaudeHome, args: &[&str]) -> Value {
    lock(home, &[&["acquire"], args].concat(), "")
        .success()
        .stdout_json(|doc| assert_eq!(doc["lock"]["acquired"], true))
        .stderr_empty()
        .run()
        .json()
}

/// A `release` that must free the lock (exit 0) and print `err`; the envelope.
fn released(home: &ClaudeHome, args: &[&str], stdin: &str, err: &str) -> Value {
    lock(home, &[&["release"], args].concat(), stdin)
        .success()
        .stdout_json(|doc| assert_eq!(doc["lock"]["released"], true))
        .stderr_is(err)
        .run()
        .json()
}

/// Whether an acquire for `pid` wins now (exit 0, silent) rather than meets a holder
/// (exit 1, one line saying so).
fn acquire_wins(home: &ClaudeHome, pid: u32) -> bool {
    lock(home, &["acquire", "--pid", &pid.to_string()], "")
        .code_any("either: the caller polls until it wins")
        .stdout_json(|doc| assert!(doc["lock"]["acquired"].is_boolean(), "{doc}"))
        .stderr_with(|err| {
            assert!(
                err.is_empty() || err.starts_with("dream-lock: busy: the lock is held by PID "),
                "{err}"
            );
        })
        .run()
        .code
        == Some(0)
}

fn content(home: &ClaudeHome) -> String {
    std::fs::read_to_string(home.lock_file()).expect("lock file")
}

/// `dream-lock exec -- sh -c SCRIPT` from the project directory, stdin closed; the caller
/// says what it must print and starts it.
fn exec_run<'a>(home: &ClaudeHome, script: &str) -> Run<'a> {
    Run::new(home, "dream-lock")
        .args(["exec", "--", "sh", "-c", script])
        .stdin_from(Stdio::null())
}

/// Whether `done` turns true within 10 s.
fn within_10s(done: impl FnMut() -> bool) -> bool {
    wait::within(Duration::from_secs(10), done)
}

/// The PID a command wrote into `file` (once it has).
fn pid_in(file: &Path) -> i32 {
    wait::for_pid(file)
}

/// Dead or a zombie: it runs no more.
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let rest = &stat[stat.rfind(')').unwrap() + 1..];
            matches!(rest.split_whitespace().next(), Some("Z" | "X"))
        }
        Err(_) => true,
    }
}

fn sigkill(pid: i32) {
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// Kills a stray command when a test fails before it is gone.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        sigkill(self.0);
    }
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------
// 1. Only an explicit yes proceeds.

#[test]
fn only_an_explicit_yes_of_the_right_type_proceeds() {
    let home = ClaudeHome::new();
    let not_yes = [
        json!({"gate": {"due": "false"}}),
        json!({"gate": {"due": 0}}),
        json!({"gate": {"due": null}}),
        json!({"gate": {"due": {}}}),
        json!({"gate": {"due": []}}),
        json!({"gate": {}}),
        json!({"gate": true}),
        json!({"gate": {"due": true}, "lock": {"acquired": "true"}}),
    ];
    for envelope in &not_yes {
        for args in [
            &["acquire"][..],
            &["exec", "--", "touch", "ran"],
            &["release", "--outcome", "completed"],
        ] {
            let out = lock(&home, args, &envelope.to_string())
                .code(2)
                .stdout_json(|out| {
                    assert_eq!(out["error"]["kind"], "bad_input", "{args:?} {envelope}");
                    let message = out["error"]["message"].as_str().unwrap();
                    assert!(message.starts_with("envelope field `"), "{message}");
                })
                .stderr_with(|err| assert!(err.starts_with("dream-lock: envelope field `")))
                .run();
            let message = out.json()["error"]["message"].clone();
            assert_eq!(
                out.stderr,
                format!("dream-lock: {}\n", message.as_str().unwrap())
            );
        }
    }
    assert!(
        !home.memory_dir().exists(),
        "a mistyped envelope touched the memory dir"
    );
    assert!(!home.project.join("ran").exists(), "exec ran its command");
    let message = "envelope field `gate.due` must be true or false, not \"false\" (a string)";
    lock(&home, &["acquire"], r#"{"gate":{"due":"false"}}"#)
        .code(2)
        .stdout_json(|out| assert_eq!(out["error"]["message"], message))
        .stderr_is(format!("dream-lock: {message}\n"))
        .run();

    // The same rule for lock.acquired and run.status in release: nothing is changed.
    let holder = LiveProcess::start();
    let acquired = acquired(&home, &["--pid", &holder.pid().to_string()]);
    let before = mtime(&home.lock_file());
    for (key, value) in [
        (
            "lock",
            json!({"acquired": 1, "token": acquired["lock"]["token"], "prior_mtime": 0}),
        ),
        ("run", json!({"status": 0})),
        ("run", json!({"status": null})),
        ("run", json!({})),
        ("run", json!("completed")),
    ] {
        let mut envelope = acquired.clone();
        envelope[key] = value.clone();
        lock(&home, &["release"], &envelope.to_string())
            .code(2)
            .stdout_json(|out| assert_eq!(out["error"]["kind"], "bad_input", "{key}: {value}"))
            .stderr_with(|err| {
                assert!(err.starts_with("dream-lock: envelope field `"), "{err}");
                assert_eq!(err.lines().count(), 1, "{err}");
            })
            .run();
        assert_eq!(content(&home), holder.pid().to_string());
        assert_eq!(mtime(&home.lock_file()), before);
    }
    // An explicit yes still works.
    let mut envelope = acquired.clone();
    envelope["gate"] = json!({"due": true});
    envelope["run"] = json!({"status": "completed"});
    released(&home, &[], &envelope.to_string(), "");
    assert_eq!(content(&home), "");
}

// ---------------------------------------------------------------------------------------
// 2. No orphaned holder.

#[test]
fn a_killed_exec_leaves_no_command_running_beside_the_next_acquire() {
    let home = ClaudeHome::new();
    let exec = exec_run(
        &home,
        "echo $$ > cmd.pid; while :; do echo . >> beat; sleep 0.05; done",
    )
    .killed_by(libc::SIGKILL)
    .stdout_empty()
    .stderr_empty()
    .spawn();
    let command = pid_in(&home.project.join("cmd.pid"));
    let _stray = KillOnDrop(command);
    let beat = home.project.join("beat");
    assert!(within_10s(|| len(&beat) > 0), "the command never ran");
    exec.signal(libc::SIGKILL);
    exec.finish();

    let next = LiveProcess::start();
    assert!(
        within_10s(|| acquire_wins(&home, next.pid())),
        "a second acquire never succeeded"
    );
    // Once a second consolidation may start, the first one's command is gone...
    assert!(within_10s(|| gone(command)), "the command outlived exec");
    // ...and nothing of it still writes.
    let size = len(&beat);
    // Kept: not a wait but the observation itself, that nothing appends for a while (the
    // command is already gone; a writer it left behind would show here).
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        len(&beat),
        size,
        "the command still runs beside the new holder"
    );
}

#[test]
fn the_lock_stays_held_while_anything_the_command_started_still_runs() {
    let home = ClaudeHome::new();
    // The inner loop is a grandchild of exec: the parent-death signal does not reach it.
    let exec = exec_run(
        &home,
        "sh -c 'echo $$ > inner.pid; while :; do echo . >> beat; sleep 0.05; done' & wait",
    )
    .killed_by(libc::SIGKILL)
    .stdout_into(Stdio::null(), "nowhere: the grandchild outlives exec")
    .stderr_into(Stdio::null(), "nowhere: the grandchild outlives exec")
    .spawn();
    let inner = pid_in(&home.project.join("inner.pid"));
    let _stray = KillOnDrop(inner);
    let exec_pid = exec.pid();
    exec.signal(libc::SIGKILL);
    exec.finish();
    let beat = home.project.join("beat");
    let size = len(&beat);
    assert!(within_10s(|| len(&beat) > size), "the grandchild died too");

    let other = LiveProcess::start();
    let gone_but_running = "(that process is gone; the command it ran still runs)\n";
    lock(&home, &["acquire", "--pid", &other.pid().to_string()], "")
        .code(1)
        .stdout_json(|out| assert_eq!(out["lock"]["holder_pid"], exec_pid))
        .stderr_with(|err| {
            let busy = format!("dream-lock: busy: the lock is held by PID {exec_pid} since ");
            assert!(
                err.starts_with(&busy),
                "acquired beside a running command: {err}"
            );
            assert_eq!(err.lines().count(), 1, "{err}");
        })
        .run();
    lock(&home, &["status"], "")
        .code(1)
        .stdout_json(|status| {
            assert_eq!(status["held"], true);
            assert_eq!(status["holder_alive"], false);
            assert_eq!(status["command_running"], true);
            let token = status["token"].as_str().unwrap();
            assert!(token.starts_with(&format!("{exec_pid}:")), "{token}");
        })
        .stderr_with(|err| {
            assert!(
                err.starts_with(&format!(
                    "dream-lock: the lock is held by PID {exec_pid} since "
                )),
                "{err}"
            );
            assert!(err.ends_with(gone_but_running), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        })
        .run();

    sigkill(inner);
    assert!(
        within_10s(|| acquire_wins(&home, other.pid())),
        "the lock stayed held after the command ended"
    );
}

#[test]
fn nothing_the_command_left_running_outlives_exec() {
    for (how, script) in [
        ("exited", "sh -c 'echo $$ > bg.pid; exec sleep 600' & while [ ! -s bg.pid ]; do sleep 0.01; done; exit 0"),
        ("terminated", "sh -c 'echo $$ > bg.pid; exec sleep 600' & trap 'exit 143' TERM; while :; do sleep 0.05; done"),
    ] {
        let home = ClaudeHome::new();
        let exec = exec_run(&home, script)
            .code(if how == "exited" { 0 } else { 143 })
            .stdout_empty()
            .stderr_any("what exec says of the ended command is tested in lock.rs")
            .spawn();
        let left = pid_in(&home.project.join("bg.pid"));
        let _stray = KillOnDrop(left);
        if how == "terminated" {
            exec.signal(libc::SIGTERM);
        }
        exec.finish();
        assert!(within_10s(|| gone(left)), "{how}: the command's background process outlived exec");
    }
}

// ---------------------------------------------------------------------------------------
// 3. Lower items.

#[test]
fn releasing_a_live_holder_by_hand_needs_force() {
    let home = ClaudeHome::new();
    home.consolidated(hours(30));
    let prior = epoch_ms(mtime(&home.lock_file()));
    let holder = LiveProcess::start();
    let acquired = acquired(&home, &["--pid", &holder.pid().to_string()]);
    let token = acquired["lock"]["token"].as_str().unwrap().to_string();
    let written = mtime(&home.lock_file());

    let hand = ["release", "--token", &token, "--outcome", "failed"];
    let live_holder = |out: &Value| {
        assert_eq!(out["lock"]["released"], false);
        assert_eq!(out["lock"]["reason"], "live_holder");
        assert_eq!(out["lock"]["holder_pid"], holder.pid());
    };
    let says_live_holder = |err: &str| {
        assert!(
            err.starts_with(&format!(
                "dream-lock: not released: the lock is held by PID {} since ",
                holder.pid()
            )) && err.ends_with("pass --force to release it anyway\n"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    };
    lock(&home, &hand, "")
        .code(1)
        .stdout_json(live_holder)
        .stderr_with(says_live_holder)
        .run();
    assert_eq!(content(&home), holder.pid().to_string());
    assert_eq!(mtime(&home.lock_file()), written);
    lock(
        &home,
        &["-q", hand[0], hand[1], hand[2], hand[3], hand[4]],
        "",
    )
    .code(1)
    .stdout_json(live_holder)
    .stderr_empty()
    .run();

    // `status` prints what a person needs; its output can be piped into release.
    let status = lock(&home, &["status"], "")
        .code(1)
        .stdout_json(|status| {
            assert_eq!(status["token"], token);
            assert_eq!(status["holder_pid"], holder.pid());
        })
        .stderr_with(|err| {
            let held = format!(
                "dream-lock: the lock is held by PID {} since ",
                holder.pid()
            );
            assert!(err.starts_with(&held), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        })
        .run()
        .json();
    lock(&home, &["release"], &status.to_string())
        .code(1)
        .stdout_json(live_holder)
        .stderr_with(says_live_holder)
        .run();
    let out = lock(
        &home,
        &[
            "release",
            "--force",
            "--prior-mtime",
            &prior.to_string(),
            "--token",
            &token,
        ],
        &status.to_string(),
    )
    .success()
    .stdout_json(|doc| assert_eq!(doc["lock"]["released"], true, "{doc}"))
    .stderr_with(|err| assert!(err.contains("rolled back as failed"), "{err}"))
    .run()
    .json();
    assert_eq!(out["lock"]["released"], true);
    assert_eq!(out["lock"]["outcome"], "failed");
    assert_eq!(out["lock"]["token"], token);
    assert!(out.get("held").is_none(), "status fields copied: {out}");
    assert_eq!(content(&home), "");
    assert_eq!(epoch_ms(mtime(&home.lock_file())), prior);
}

#[test]
fn status_piped_into_release_force_frees_a_lock_held_elsewhere() {
    let home = ClaudeHome::new();
    let holder = LiveProcess::start();
    acquired(&home, &["--pid", &holder.pid().to_string()]);
    let status = lock(&home, &["status"], "")
        .code(1)
        .stdout_json(|status| assert_eq!(status["held"], true))
        .stderr_contains("dream-lock: the lock is held by PID ")
        .run();
    released(
        &home,
        &["--force", "--outcome", "completed"],
        &status.stdout,
        "",
    );
    assert_eq!(content(&home), "");
    lock(&home, &["status"], "")
        .success()
        .stdout_json(|status| {
            assert_eq!(status["held"], false);
            assert_eq!(status["token"], Value::Null);
        })
        .stderr_empty()
        .run();

    // The caller's own lock (held by this test runner, the parent) needs no --force, and
    // --token alone is enough.
    let acquired = acquired(&home, &[]);
    let token = acquired["lock"]["token"].as_str().unwrap();
    released(&home, &["--token", token, "--outcome", "completed"], "", "");
}

/// `acquire` whose stdout is `/dev/full`, or a pipe nobody reads: the token never reached
/// anyone.
fn acquire_into<'a>(home: &ClaudeHome, stdout: Stdio, what: &str) -> Run<'a> {
    Run::new(home, "dream-lock")
        .arg("acquire")
        .stdin_from(Stdio::null())
        .stdout_into(stdout, what)
}

#[test]
fn an_acquire_whose_token_cannot_be_printed_rolls_back() {
    let home = ClaudeHome::new();
    home.consolidated(hours(30));
    let prior = epoch_ms(mtime(&home.lock_file()));
    let full = File::options().write(true).open("/dev/full").unwrap();
    acquire_into(&home, Stdio::from(full), "/dev/full")
        .code(3)
        .stderr_with(|err| {
            assert!(
                err.starts_with("dream-lock: cannot write stdout: "),
                "{err}"
            );
            assert!(
                err.ends_with(
                    "dream-lock: the lock was rolled back: its token was not delivered\n"
                ),
                "{err}"
            );
        })
        .run();
    assert_eq!(content(&home), "", "the lock was left held");
    assert_eq!(epoch_ms(mtime(&home.lock_file())), prior);

    // A pipe whose reader is gone: the same.
    let fresh = ClaudeHome::new();
    let mut fds = [0; 2];
    // Close-on-exec: a process another test spawns meanwhile must not inherit the read end
    // and keep the pipe open.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(reader);
    acquire_into(&fresh, Stdio::from(writer), "a pipe whose reader is gone")
        .code(3)
        .stderr_contains("dream-lock: the lock was rolled back: its token was not delivered\n")
        .run();
    assert!(!fresh.lock_file().exists(), "the lock was left held");
}

#[test]
fn a_future_mtime_is_taken_as_written_now() {
    let home = ClaudeHome::new();
    home.consolidated(Duration::ZERO);
    let ahead = SystemTime::now() + Duration::from_secs(5 * 3600);
    File::options()
        .write(true)
        .open(home.lock_file())
        .unwrap()
        .set_modified(ahead)
        .unwrap();
    Run::new(&home, "dream-gate")
        .code(1)
        .stdout_with(|text| assert!(!text.contains("-0.0"), "{text}"))
        .stdout_json(|gate| {
            assert_eq!(gate["gate"]["reason"], "too_soon");
            assert_eq!(gate["gate"]["hours_since"], json!(0.0));
        })
        .stderr_is("dream-gate: not due: too_soon: 0.0 h of 24 h\n")
        .run();

    let status = lock(&home, &["status"], "")
        .success()
        .stdout_json(|status| assert_eq!(status["held"], false))
        .stderr_empty()
        .run()
        .json();
    let last = status["last_consolidated_at"].as_str().unwrap().to_string();
    let now = rfc3339_now();
    assert!(last <= now, "{last} is after {now}");

    // A live holder with a future mtime holds, as if it wrote now; a roll-back restores
    // now, not the future.
    let before = epoch_ms(SystemTime::now());
    let acquired = acquired(&home, &[]);
    let prior = acquired["lock"]["prior_mtime"].as_i64().unwrap();
    assert!(
        prior >= before && prior <= epoch_ms(SystemTime::now()),
        "{prior}"
    );
}

fn rfc3339_now() -> String {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%S.999Z"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn exec_whose_command_ignored_sigint_exits_130_as_recorded() {
    let home = ClaudeHome::new();
    home.consolidated(hours(30));
    let prior = epoch_ms(mtime(&home.lock_file()));
    let exec = exec_run(
        &home,
        "trap '' INT; echo $$ > cmd.pid; while [ ! -e go ]; do sleep 0.05; done; exit 0",
    )
    .code(130)
    .stdout_empty()
    .stderr_any("what exec says of an interrupt is tested in lock.rs")
    .spawn();
    pid_in(&home.project.join("cmd.pid"));
    // exec has taken the SIGINT before the command is let go.
    wait::signal_delivered(exec.pid() as i32, libc::SIGINT);
    std::fs::write(home.project.join("go"), "").unwrap();
    exec.finish();
    assert_eq!(content(&home), "");
    assert_eq!(epoch_ms(mtime(&home.lock_file())), prior, "not rolled back");
}

// ---------------------------------------------------------------------------------------
// 4. release when the command in the middle was not dream-run: see lock.rs
//    (`the_outcome_flag_wins_and_release_needs_a_lease`) and the pipeline below.

#[test]
fn a_pass_through_command_never_leaves_the_lock_held_nor_moves_the_time() {
    let home = ClaudeHome::new();
    home.consolidated(hours(30));
    let prior = epoch_ms(mtime(&home.lock_file()));
    let script = format!(
        "{gate} --min-sessions 0 | {lock} acquire | cat | {lock} release",
        gate = bin_path("dream-gate").display(),
        lock = bin_path("dream-lock").display()
    );
    let mut sh = home.process("sh");
    sh.args(["-c", &script]);
    Run::command(sh, "gate | acquire | cat | release")
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["lock"]["outcome"], "failed");
            assert_eq!(doc["lock"]["released"], true);
            assert!(doc["lock"]["warning"].is_string());
        })
        .stderr_is("dream-lock: no run.status and no --outcome: rolled back as failed\n")
        .run();
    assert_eq!(content(&home), "");
    assert_eq!(epoch_ms(mtime(&home.lock_file())), prior);
}

// ---------------------------------------------------------------------------------------
// 5. Say why on stderr (unless -q).

/// Runs `bin args` with `stdin`, with and without `-q`: exit 1, one line, then silence.
fn says_why(home: &ClaudeHome, bin: &str, args: &[&str], stdin: &str) -> String {
    let out = Run::new(home, bin)
        .args(args)
        .stdin(stdin)
        .code(1)
        .stdout_json(|doc| {
            // Exit 1 is an answer (not due, held, not found), never a failure.
            assert!(doc.get("error").is_none(), "{doc}");
        })
        .stderr_with(|err| assert_eq!(err.lines().count(), 1, "{bin} {args:?}: {err:?}"))
        .run();
    Run::new(home, bin)
        .arg("-q")
        .args(args)
        .stdin(stdin)
        .code(1)
        .stdout_is(&out.stdout)
        .stderr_empty()
        .run();
    out.stderr
}

#[test]
fn every_exit_1_says_why_on_stderr() {
    let home = ClaudeHome::new();
    let holder = LiveProcess::start();
    let acquired = acquired(&home, &["--pid", &holder.pid().to_string()]);
    let prefix = format!("the lock is held by PID {} since ", holder.pid());

    let err = says_why(&home, "dream-lock", &["acquire"], "");
    assert!(
        err.starts_with(&format!("dream-lock: busy: {prefix}")),
        "{err}"
    );
    let err = says_why(&home, "dream-lock", &["exec", "--", "true"], "");
    assert!(
        err.starts_with(&format!("dream-lock: busy: {prefix}")),
        "{err}"
    );
    let err = says_why(&home, "dream-lock", &["status"], "");
    assert!(err.starts_with(&format!("dream-lock: {prefix}")), "{err}");

    for args in [&["acquire"][..], &["release"], &["exec", "--", "true"]] {
        let err = says_why(
            &home,
            "dream-lock",
            args,
            r#"{"gate":{"due":false,"reason":"too_soon"}}"#,
        );
        assert_eq!(
            err,
            "dream-lock: passed through: the gate said not due (too_soon)\n"
        );
        let err = says_why(
            &home,
            "dream-lock",
            args,
            r#"{"lock":{"acquired":false,"reason":"held"}}"#,
        );
        assert_eq!(
            err,
            "dream-lock: passed through: the lock was not acquired (held)\n"
        );
    }

    // A lease that is no longer ours.
    let mut stale = acquired.clone();
    stale["lock"]["token"] = json!("1:1");
    stale["run"] = json!({"status": "completed"});
    let err = says_why(&home, "dream-lock", &["release"], &stale.to_string());
    assert_eq!(
        err,
        "dream-lock: not released: the lock is no longer ours (taken over, or released already); nothing was changed\n"
    );

    let id = "00000000-0000-4000-8000-00000000abcd";
    for sub in ["show", "discard"] {
        let err = says_why(&home, "feedback", &[sub, id], "");
        assert_eq!(
            err,
            format!("feedback: no draft {id} (`feedback list` shows the drafts)\n")
        );
    }
}

#[test]
fn recap_exit_1_results_say_why_on_stderr() {
    let home = ClaudeHome::new();
    let transcript = home
        .transcripts_dir()
        .join(format!("{}.jsonl", session_id(1)));
    Transcript::started(Duration::from_secs(600))
        .slash_command("recap")
        .write(&transcript);
    let path = transcript.display().to_string();
    let mut args = vec!["--transcript", path.as_str()];
    let recap = |quiet: bool, args: &[&str], extra: &[(&'static str, &'static str)]| {
        Run::new(&home, "recap")
            .env("ANTHROPIC_API_KEY", "k")
            .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
            .envs(extra.iter().copied())
            .args(quiet.then_some("-q"))
            .args(args)
            .code(1)
    };
    let run_recap =
        |args: &[&str], extra: &[(&'static str, &'static str)], status: &str, err: &str| {
            let out = recap(false, args, extra)
                .stdout_json(|doc| assert_eq!(doc["status"], status))
                .stderr_is(err)
                .run();
            recap(true, args, extra)
                .stdout_is(out.stdout)
                .stderr_empty()
                .run();
        };
    run_recap(
        &args,
        &[],
        "no-turn",
        "recap: no-turn: no real user turn in the transcript\n",
    );
    Transcript::started(Duration::from_secs(600))
        .user("fix the gate")
        .assistant("Done.")
        .write(&transcript);
    args.push("--auto");
    run_recap(
        &args,
        &[("CLAUDE_CODE_ENABLE_AWAY_SUMMARY", "0")],
        "skipped",
        "recap: skipped: disabled: away summaries are turned off\n",
    );
}
