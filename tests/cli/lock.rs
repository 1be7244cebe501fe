//! `dream-lock` with real processes, real files and real signals.

use std::process::Stdio;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use crate::support::*;

fn lock<'a>(home: &ClaudeHome, args: &[&str], stdin: &str) -> Run<'a> {
    Run::new(home, "dream-lock").args(args).stdin(stdin)
}

/// `acquire --pid PID`, which must win: exit 0, silent; the envelope.
fn acquire_for(home: &ClaudeHome, pid: u32) -> Value {
    lock(home, &["acquire", "--pid", &pid.to_string()], "")
        .success()
        .stdout_json(|doc| assert_eq!(doc["lock"]["acquired"], true))
        .stderr_empty()
        .run()
        .json()
}

/// `acquire --pid PID`, which must be refused because `holder` holds the lock; the envelope.
fn refused_for(home: &ClaudeHome, pid: u32, holder: u32) -> Value {
    lock(home, &["acquire", "--pid", &pid.to_string()], "")
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["lock"]["acquired"], false);
            assert_eq!(doc["lock"]["reason"], "held");
            assert_eq!(doc["lock"]["holder_pid"], holder);
        })
        .stderr_with(|err| {
            let since = format!("dream-lock: busy: the lock is held by PID {holder} since ");
            assert!(err.starts_with(&since), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        })
        .run()
        .json()
}

/// `status` on a lock nobody holds: exit 0, silent; the document.
fn status_free(home: &ClaudeHome) -> Value {
    lock(home, &["status"], "")
        .success()
        .stdout_json(|doc| assert_eq!(doc["held"], false))
        .stderr_empty()
        .run()
        .json()
}

/// What `release` says when the lock is no longer ours.
const NOT_OURS: &str =
    "dream-lock: not released: the lock is no longer ours (taken over, or released already); nothing was changed\n";

fn content(home: &ClaudeHome) -> String {
    std::fs::read_to_string(home.lock_file()).expect("lock file")
}

/// The lock file exactly as Claude Code writes it: the PID, no newline, mtime now.
fn claude_code_writes(home: &ClaudeHome, pid: u32, age: Duration) {
    std::fs::create_dir_all(home.memory_dir()).unwrap();
    std::fs::write(home.lock_file(), pid.to_string()).unwrap();
    set_age(&home.lock_file(), age);
}

#[test]
fn acquire_records_the_pid_the_way_claude_code_reads_it() {
    let home = ClaudeHome::new();
    let holder = LiveProcess::start();
    let out = acquire_for(&home, holder.pid());
    let l = &out["lock"];
    assert_eq!(l["backend"], "file");
    assert_eq!(l["path"], home.lock_file().display().to_string());
    assert_eq!(l["pid"], holder.pid());
    assert_eq!(l["prior_mtime"], 0);
    // Byte-compatible: decimal PID, nothing else; mtime = now = the token's time.
    assert_eq!(
        std::fs::read(home.lock_file()).unwrap(),
        holder.pid().to_string().as_bytes()
    );
    let written = epoch_ms(mtime(&home.lock_file()));
    assert_eq!(l["token"], format!("{}:{written}", holder.pid()));
    assert!((epoch_ms(SystemTime::now()) - written).abs() < 60_000);
    assert_eq!(
        out["project"]["memory_dir"],
        home.memory_dir().display().to_string()
    );

    // The default PID is the parent process: here, the test runner.
    let other = ClaudeHome::new();
    lock(&other, &["acquire"], "")
        .success()
        .stdout_json(|out| assert_eq!(out["lock"]["pid"], std::process::id()))
        .stderr_empty()
        .run();
}

#[test]
fn a_claude_code_lock_is_honoured_and_read_by_the_gate() {
    let home = ClaudeHome::new();
    let claude = LiveProcess::start();
    claude_code_writes(&home, claude.pid(), Duration::ZERO);
    let out = refused_for(&home, std::process::id(), claude.pid());
    assert!(out["lock"]["held_since"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        content(&home),
        claude.pid().to_string(),
        "a refused acquire wrote"
    );

    let since = out["lock"]["held_since"].as_str().unwrap();
    lock(&home, &["status"], "")
        .code(1)
        .stdout_json(|status| {
            assert_eq!(status["held"], true);
            assert_eq!(status["holder_pid"], claude.pid());
            assert_eq!(status["holder_alive"], true);
            assert_eq!(status["stale"], false);
            assert_eq!(status["since"], since);
        })
        .stderr_is(format!(
            "dream-lock: the lock is held by PID {} since {since}\n",
            claude.pid()
        ))
        .run();

    Run::new(&home, "dream-gate")
        .code(1)
        .stdout_json(|gate| {
            assert_eq!(gate["gate"]["reason"], "too_soon");
            assert!(gate["gate"]["hours_since"].as_f64().unwrap() < 0.01);
        })
        .stderr_is("dream-gate: not due: too_soon: 0.0 h of 24 h\n")
        .run();
}

#[test]
fn thirty_two_concurrent_acquirers_have_exactly_one_winner_each_round() {
    let home = ClaudeHome::new();
    let shells: Vec<LiveProcess> = (0..32).map(|_| LiveProcess::start()).collect();
    for round in 0..20 {
        // Started together, so that they race.
        let acquirers: Vec<_> = shells
            .iter()
            .map(|shell| {
                Run::new(&home, "dream-lock")
                    .args(["acquire", "--pid", &shell.pid().to_string()])
                    .stdin_from(Stdio::null())
                    .code_any("one wins (0), the rest meet it busy (1): checked below")
                    .stdout_json(|doc| assert!(doc["lock"]["acquired"].is_boolean(), "{doc}"))
                    .stderr_any("checked below against its exit")
                    .spawn()
            })
            .collect();
        let results: Vec<(i32, Value)> = acquirers
            .into_iter()
            .map(|acquirer| {
                let ran = acquirer.finish();
                let code = ran.code.expect("code");
                let err = &ran.stderr;
                match code {
                    0 => assert_eq!(err, "", "round {round}: the winner is silent"),
                    _ => assert!(
                        err.starts_with("dream-lock: busy: the lock is held by PID ")
                            && err.lines().count() == 1,
                        "round {round}: {err}"
                    ),
                }
                (code, ran.json())
            })
            .collect();
        let winners: Vec<&Value> = results
            .iter()
            .filter(|(c, _)| *c == 0)
            .map(|(_, v)| v)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {} winners", winners.len());
        assert!(
            results.iter().all(|(c, _)| *c == 0 || *c == 1),
            "round {round}"
        );
        let winner = winners[0];
        assert_eq!(
            content(&home),
            winner["lock"]["pid"].to_string(),
            "round {round}"
        );
        for (_, loser) in results.iter().filter(|(c, _)| *c == 1) {
            assert_eq!(
                loser["lock"]["holder_pid"], winner["lock"]["pid"],
                "round {round}"
            );
        }
        // The winner rolls back, so the next round starts from no lock file.
        lock(
            &home,
            &["release", "--outcome", "failed"],
            &winner.to_string(),
        )
        .success()
        .stdout_json(|out| assert_eq!(out["lock"]["released"], true))
        .stderr_empty()
        .run();
        assert!(!home.lock_file().exists());
    }
}

#[test]
fn a_holder_killed_with_sigkill_is_taken_over() {
    let home = ClaudeHome::new();
    let holder = LiveProcess::start();
    let first = acquire_for(&home, holder.pid());
    let first_mtime = epoch_ms(mtime(&home.lock_file()));
    let next = LiveProcess::start();
    refused_for(&home, next.pid(), holder.pid());

    let dead = holder.pid();
    holder.kill();
    let status = status_free(&home);
    assert_eq!(status["holder_pid"], dead);
    assert_eq!(status["holder_alive"], false);
    assert_eq!(status["stale"], true);

    // The takeover writes at a later millisecond than the first acquire.
    wait::for_clock_past(mtime(&home.lock_file()));
    let out = acquire_for(&home, next.pid());
    // The killed holder never released: its hold moved no time, and the time from before
    // it (never consolidated) is carried forward.
    assert_eq!(out["lock"]["prior_mtime"], first["lock"]["prior_mtime"]);
    assert_ne!(out["lock"]["prior_mtime"], first_mtime);
    assert_ne!(out["lock"]["token"], first["lock"]["token"]);
    assert_eq!(content(&home), next.pid().to_string());
}

/// The 59/61-minute boundary with a live, older holder is unit-tested in `lock::file` with an
/// injected clock; here, a lock over an hour old is taken over from a live process.
#[test]
fn a_lock_older_than_an_hour_is_taken_over_from_a_live_process() {
    let home = ClaudeHome::new();
    let holder = LiveProcess::start();
    claude_code_writes(&home, holder.pid(), Duration::from_secs(3600 + 60));
    let next = LiveProcess::start();
    let old = epoch_ms(mtime(&home.lock_file()));
    let out = acquire_for(&home, next.pid());
    assert_eq!(out["lock"]["prior_mtime"], old);
}

#[test]
fn a_recycled_pid_is_not_a_holder() {
    let home = ClaudeHome::new();
    // Claude Code wrote PID N ten minutes ago; N now belongs to a process started since.
    let newcomer = LiveProcess::start();
    claude_code_writes(&home, newcomer.pid(), Duration::from_secs(600));
    let status = status_free(&home);
    assert_eq!(status["holder_alive"], true);
    assert_eq!(status["stale"], true);
    acquire_for(&home, std::process::id());
}

#[test]
fn empty_or_garbage_content_names_no_holder() {
    for text in ["", "not a pid", "0", "12 34"] {
        let home = ClaudeHome::new();
        std::fs::create_dir_all(home.memory_dir()).unwrap();
        std::fs::write(home.lock_file(), text).unwrap();
        let status = status_free(&home);
        assert_eq!(status["holder_pid"], Value::Null, "{text:?}");
        acquire_for(&home, std::process::id());
    }
}

/// `acquire | release` for each outcome, with and without a prior consolidation.
#[test]
fn release_frees_or_rolls_back_for_each_outcome() {
    let prior_age = Duration::from_secs(30 * 3600);
    for outcome in ["completed", "failed", "aborted"] {
        for had_prior in [false, true] {
            let home = ClaudeHome::new();
            let mut prior_ms = 0;
            if had_prior {
                home.consolidated(prior_age);
                prior_ms = epoch_ms(mtime(&home.lock_file()));
            }
            let acquired = acquire_for(&home, std::process::id());
            assert_eq!(acquired["lock"]["prior_mtime"], prior_ms);
            let mut envelope = acquired.clone();
            envelope["run"] = json!({"status": outcome});
            envelope["trace"] = json!("kept");
            // The outcome comes from run.status.
            let case = format!("{outcome}, prior {had_prior}");
            let out = lock(&home, &["release"], &envelope.to_string())
                .success()
                .stdout_json(|doc| assert_eq!(doc["lock"]["released"], true, "{doc}"))
                .stderr_empty()
                .run()
                .json();
            assert_eq!(out["trace"], "kept");
            assert_eq!(out["run"]["status"], outcome);
            assert_eq!(out["lock"]["released"], true, "{case}");
            assert_eq!(out["lock"]["outcome"], outcome);
            assert_eq!(out["lock"]["token"], acquired["lock"]["token"]);
            match (outcome, had_prior) {
                ("completed", _) => {
                    assert_eq!(content(&home), "", "{case}");
                    let now = epoch_ms(mtime(&home.lock_file()));
                    assert!((epoch_ms(SystemTime::now()) - now).abs() < 60_000, "{case}");
                    assert!(out["lock"]["last_consolidated_at"].is_string());
                }
                (_, false) => {
                    assert!(!home.lock_file().exists(), "{case}");
                    assert_eq!(out["lock"]["last_consolidated_at"], Value::Null);
                }
                (_, true) => {
                    assert_eq!(content(&home), "", "{case}");
                    assert_eq!(epoch_ms(mtime(&home.lock_file())), prior_ms, "{case}");
                }
            }
            // The gate sees the result.
            let (expected, line) = if outcome == "completed" {
                ("too_soon", "too_soon: 0.0 h of 24 h".to_string())
            } else if had_prior {
                (
                    "too_few_sessions",
                    format!(
                        "too_few_sessions: 0 of 5 sessions since {}",
                        dreamkit::cli::time::rfc3339(mtime(&home.lock_file()))
                    ),
                )
            } else {
                (
                    "too_few_sessions",
                    "too_few_sessions: 0 of 5 sessions (never consolidated)".to_string(),
                )
            };
            Run::new(&home, "dream-gate")
                .code(1)
                .stdout_json(|gate| assert_eq!(gate["gate"]["reason"], expected, "{case}"))
                .stderr_is(format!("dream-gate: not due: {line}\n"))
                .run();

            // Releasing again is not ours any more: exit 1, nothing changed.
            let before = std::fs::metadata(home.lock_file())
                .ok()
                .map(|m| m.modified().unwrap());
            lock(&home, &["release"], &envelope.to_string())
                .code(1)
                .stdout_json(|again| {
                    assert_eq!(again["lock"]["reason"], "not_holder", "{case}");
                    assert_eq!(again["lock"]["released"], false);
                })
                .stderr_is(NOT_OURS)
                .run();
            let after = std::fs::metadata(home.lock_file())
                .ok()
                .map(|m| m.modified().unwrap());
            assert_eq!(before, after, "{case}");
        }
    }
}

#[test]
fn release_dry_run_says_what_it_would_do_and_changes_nothing() {
    let home = ClaudeHome::new();
    home.consolidated(Duration::from_secs(30 * 3600));
    let prior_ms = epoch_ms(mtime(&home.lock_file()));
    let acquired = acquire_for(&home, std::process::id());
    let held = (content(&home), mtime(&home.lock_file()));
    for (outcome, would) in [("completed", true), ("failed", false)] {
        let mut envelope = acquired.clone();
        envelope["run"] = json!({"status": outcome});
        let out = lock(&home, &["release", "--dry-run"], &envelope.to_string())
            .success()
            .stdout_json(|doc| assert_eq!(doc["lock"]["released"], false, "{doc}"))
            .stderr_with(|err| {
                assert!(
                    err.starts_with("dream-lock: dry run: would release the lock as"),
                    "{err}"
                );
                assert!(err.ends_with("; nothing was changed\n"), "{err}");
                assert_eq!(err.lines().count(), 1, "{err}");
            })
            .run();
        let doc = out.json();
        assert_eq!(doc["lock"]["dry_run"], true);
        assert_eq!(doc["lock"]["released"], false);
        assert_eq!(doc["lock"]["outcome"], outcome);
        let at = &doc["lock"]["would_set_last_consolidated_at"];
        if would {
            assert!(at.is_string(), "{doc}");
        } else {
            // Rolled back to the time before this hold.
            let prior = dreamkit::cli::time::rfc3339(dreamkit::cli::time::from_epoch_ms(prior_ms));
            assert_eq!(at, &json!(prior), "{doc}");
        }
        assert_eq!(
            (content(&home), mtime(&home.lock_file())),
            held,
            "{outcome}: the lock changed"
        );
    }
    // Once released, a dry run says it would not: exit 1, not_holder.
    lock(&home, &["release"], &acquired.to_string())
        .success()
        .stdout_json(|doc| assert_eq!(doc["lock"]["released"], true))
        .stderr_is("dream-lock: no run.status and no --outcome: rolled back as failed\n")
        .run();
    lock(&home, &["release", "--dry-run"], &acquired.to_string())
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["lock"]["reason"], "not_holder");
            assert_eq!(doc["lock"]["dry_run"], true);
        })
        .stderr_is(
            "dream-lock: dry run: would not release: the lock is no longer ours (taken over, or released already)\n",
        )
        .run();
}

#[test]
fn the_outcome_flag_wins_and_release_needs_a_lease() {
    let home = ClaudeHome::new();
    let acquired = acquire_for(&home, std::process::id());
    let mut envelope = acquired.clone();
    envelope["run"] = json!({"status": "completed"});
    lock(
        &home,
        &["release", "--outcome", "failed"],
        &envelope.to_string(),
    )
    .success()
    .stdout_json(|out| assert_eq!(out["lock"]["outcome"], "failed"))
    .stderr_empty()
    .run();
    assert!(!home.lock_file().exists());

    lock(&home, &["release"], "")
        .code(2)
        .stdout_json(|out| assert_eq!(out["error"]["kind"], "usage"))
        .stderr_is(
            "dream-lock: nothing to release: pipe in the envelope from `dream-lock acquire` or the output of `dream-lock status`, or pass --token\n",
        )
        .run();
    let acquired = acquire_for(&home, std::process::id());
    let mut running = acquired.clone();
    running["run"] = json!({"status": "running"});
    lock(&home, &["release"], &running.to_string())
        .code(2)
        .stdout_json(|out| assert_eq!(out["error"]["kind"], "bad_input"))
        .stderr_is(
            "dream-lock: envelope field `run.status` must be one of \"completed\", \"failed\", \"aborted\", \"proposed\", \"skipped\", \"no_changes\", \"dry_run\", not \"running\" (a string)\n",
        )
        .run();
    assert_eq!(
        content(&home),
        std::process::id().to_string(),
        "a refused release wrote"
    );
    // No outcome anywhere (the command in the middle was `cat`): rolled back, with a warning.
    lock(&home, &["release"], &acquired.to_string())
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["lock"]["outcome"], "failed");
            assert_eq!(doc["lock"]["released"], true);
            assert_eq!(
                doc["lock"]["warning"],
                "no run.status and no --outcome: rolled back as failed"
            );
        })
        .stderr_is("dream-lock: no run.status and no --outcome: rolled back as failed\n")
        .run();
    assert!(
        !home.lock_file().exists(),
        "no prior time: rolled back by deleting"
    );
    let acquired = acquire_for(&home, std::process::id());

    // Flags instead of an envelope.
    let token = acquired["lock"]["token"].as_str().unwrap();
    lock(
        &home,
        &[
            "release",
            "--outcome",
            "completed",
            "--token",
            token,
            "--prior-mtime",
            "0",
        ],
        "",
    )
    .success()
    .stdout_json(|out| assert_eq!(out["lock"]["released"], true))
    .stderr_empty()
    .run();
    assert_eq!(content(&home), "");
}

#[test]
fn a_declined_upstream_stage_passes_through_untouched() {
    let home = ClaudeHome::new();
    for (envelope, why) in [
        (
            json!({"gate": {"due": false, "reason": "too_soon"}, "x": [1, {"y": null}]}),
            "the gate said not due (too_soon)",
        ),
        (
            json!({"lock": {"acquired": false, "reason": "held"}, "z": 1}),
            "the lock was not acquired (held)",
        ),
        (
            json!({"error": {"kind": "bad_input", "message": "m"}}),
            "an earlier stage failed: m",
        ),
    ] {
        for args in [
            &["acquire"][..],
            &["release"],
            &["exec", "--", "touch", "ran"],
        ] {
            lock(&home, args, &envelope.to_string())
                .code(1)
                .stdout_json(|out| assert_eq!(out, &envelope, "{args:?}"))
                .stderr_is(format!("dream-lock: passed through: {why}\n"))
                .run();
        }
    }
    assert!(
        !home.memory_dir().exists(),
        "a declined pipeline touched the memory dir"
    );
    assert!(!home.project.join("ran").exists(), "exec ran its command");
}

#[test]
fn exec_completed_passes_stdout_through_and_frees_the_lock() {
    let home = ClaudeHome::new();
    home.consolidated(hours(30));
    let gate = Run::new(&home, "dream-gate")
        .args(["--min-sessions", "0"])
        .success()
        .stdout_json(|gate| assert_eq!(gate["gate"]["due"], true))
        .stderr_empty()
        .run();
    let script = r#"cat > envelope.json; printf 'token=%s\n' "$DREAMKIT_LOCK_TOKEN"; cat .claude-lock-check 2>/dev/null; exit 0"#;
    // exec's own PID held it; now it is free and now is the last-consolidated time, and
    // stderr says so.
    let out = lock(&home, &["exec", "--", "sh", "-c", script], &gate.stdout)
        .success()
        .stdout_any("checked below against the token the command was given")
        .stderr_is("dream-lock: released the lock: completed, the consolidation time is now\n")
        .run();
    let seen: Value =
        serde_json::from_slice(&std::fs::read(home.project.join("envelope.json")).unwrap())
            .unwrap();
    assert_eq!(seen["gate"]["due"], true);
    assert_eq!(seen["lock"]["acquired"], true);
    let token = seen["lock"]["token"].as_str().unwrap();
    assert_eq!(out.stdout, format!("token={token}\n"));
    assert_eq!(content(&home), "");
    assert!(
        epoch_ms(mtime(&home.lock_file())) > epoch_ms(SystemTime::now() - Duration::from_secs(60))
    );
}

#[test]
fn exec_failed_rolls_back_and_exits_with_the_command_code() {
    let home = ClaudeHome::new();
    home.consolidated(hours(30));
    let prior = epoch_ms(mtime(&home.lock_file()));
    let rolled_back = |how: &str| {
        format!("dream-lock: rolled the lock back ({how}): the consolidation time is as it was\n")
    };
    lock(
        &home,
        &[
            "exec",
            "--",
            "sh",
            "-c",
            "cat >/dev/null; echo partial; exit 3",
        ],
        "",
    )
    .code(3)
    .stdout_is("partial\n")
    .stderr_is(rolled_back("failed"))
    .run();
    assert_eq!(content(&home), "");
    assert_eq!(epoch_ms(mtime(&home.lock_file())), prior);

    // A command that does not exist: rolled back (no prior: deleted), 127.
    let fresh = ClaudeHome::new();
    let cannot = "cannot run no-such-dreamkit-cmd: No such file or directory (os error 2)";
    lock(&fresh, &["exec", "--", "no-such-dreamkit-cmd"], "")
        .code(127)
        .stdout_json(|out| {
            assert_eq!(out["error"]["kind"], "usage");
            assert_eq!(out["error"]["message"], cannot);
        })
        .stderr_is(format!("{}dream-lock: {cannot}\n", rolled_back("failed")))
        .run();
    assert!(!fresh.lock_file().exists());
}

#[test]
fn exec_forwards_sigterm_rolls_back_and_exits_143() {
    let home = ClaudeHome::new();
    home.consolidated(hours(30));
    let prior = epoch_ms(mtime(&home.lock_file()));
    let marker = home.project.join("started");
    let exec = Run::new(&home, "dream-lock")
        .args(["exec", "--", "sh", "-c"])
        .arg(format!(
            "trap 'echo got-term > {0}.term; exit 143' TERM; touch {0}; while :; do sleep 0.05; done",
            marker.display()
        ))
        .stdin_from(Stdio::null())
        .code(143)
        .stdout_empty()
        .stderr_is(
            "dream-lock: rolled the lock back (aborted): the consolidation time is as it was\n",
        )
        .spawn();
    // The script's own `sleep 0.05` loop is the command staying alive, not a wait.
    wait::for_file(&marker);
    assert_eq!(
        content(&home),
        exec.pid().to_string(),
        "exec holds the lock with its own PID"
    );
    exec.signal(libc::SIGTERM);
    exec.finish();
    assert_eq!(
        std::fs::read_to_string(home.project.join("started.term")).unwrap(),
        "got-term\n"
    );
    assert_eq!(content(&home), "");
    assert_eq!(
        epoch_ms(mtime(&home.lock_file())),
        prior,
        "aborted run did not roll back"
    );
}

#[test]
fn exec_reports_a_command_killed_by_a_signal_as_128_plus_n() {
    let home = ClaudeHome::new();
    lock(&home, &["exec", "--", "sh", "-c", "kill -KILL $$"], "")
        .code(137)
        .stdout_empty()
        .stderr_is(
            "dream-lock: rolled the lock back (aborted): the consolidation time is as it was\n",
        )
        .run();
    assert!(!home.lock_file().exists(), "aborted without prior: deleted");
}

#[test]
fn exec_does_not_run_the_command_when_the_lock_is_busy() {
    let home = ClaudeHome::new();
    let holder = LiveProcess::start();
    acquire_for(&home, holder.pid());
    lock(&home, &["exec", "--", "touch", "ran"], "")
        .code(1)
        .stdout_json(|out| assert_eq!(out["lock"]["reason"], "held"))
        .stderr_with(|err| {
            let busy = format!(
                "dream-lock: busy: the lock is held by PID {} since ",
                holder.pid()
            );
            assert!(err.starts_with(&busy), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        })
        .run();
    assert!(!home.project.join("ran").exists());
    assert_eq!(content(&home), holder.pid().to_string());
}

#[test]
fn an_unreadable_lock_file_fails_closed() {
    let home = ClaudeHome::new();
    let holder = LiveProcess::start();
    claude_code_writes(&home, holder.pid(), Duration::from_secs(7200));
    chmod(&home.memory_dir(), 0o777);
    chmod(&home.lock_file(), 0o000);
    let before = mtime(&home.lock_file());
    for args in [&["acquire", "--pid", "1"][..], &["status"]] {
        let out = Run::unprivileged(&home, "dream-lock")
            .args(args)
            .code(3)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "environment", "{doc}"))
            .stderr_with(|err| {
                assert_eq!(err.lines().count(), 1, "{err}");
                assert!(err.starts_with("dream-lock: "), "{err}");
                assert!(err.contains(".consolidate-lock"), "{err}");
            })
            .run();
        let doc = out.json();
        let message = if args[0] == "status" {
            doc["error"]["message"].clone()
        } else {
            assert_eq!(doc["lock"]["acquired"], false);
            doc["lock"]["error"]["message"].clone()
        };
        assert!(
            message.as_str().unwrap().contains(".consolidate-lock"),
            "{doc}"
        );
    }
    chmod(&home.lock_file(), 0o644);
    assert_eq!(mtime(&home.lock_file()), before);
    assert_eq!(content(&home), holder.pid().to_string());
}

#[test]
fn a_read_only_lock_file_or_memory_dir_is_refused_without_change() {
    let home = ClaudeHome::new();
    claude_code_writes(&home, 999_999, Duration::from_secs(7200));
    chmod(&home.memory_dir(), 0o777);
    chmod(&home.lock_file(), 0o444);
    let before = mtime(&home.lock_file());
    let refused = || {
        Run::unprivileged(&home, "dream-lock")
            .arg("acquire")
            .code(3)
            .stdout_json(|doc| {
                assert_eq!(doc["lock"]["acquired"], false);
                assert_eq!(doc["lock"]["error"]["kind"], "environment");
            })
            .stderr_with(|err| {
                assert_eq!(err.lines().count(), 1, "{err}");
                assert!(err.starts_with("dream-lock: "), "{err}");
            })
    };
    refused().run();
    assert_eq!(mtime(&home.lock_file()), before);
    assert_eq!(content(&home), "999999");

    chmod(&home.lock_file(), 0o644);
    chmod(&home.memory_dir(), 0o555);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| refused().run()));
    chmod(&home.memory_dir(), 0o755);
    result.unwrap_or_else(|p| std::panic::resume_unwind(p));
    assert_eq!(content(&home), "999999");
}

#[test]
fn other_backends_are_refused_not_replaced() {
    let home = ClaudeHome::new();
    // etcd is a backend now (tests/cli/etcd.rs); a malformed etcd URL is still refused.
    lock(&home, &["status", "--backend", "etcd://127.0.0.1"], "")
        .code(2)
        .stdout_json(|out| {
            assert_eq!(out["error"]["kind"], "usage");
            assert!(out["error"]["message"].as_str().unwrap().contains("etcd"));
        })
        .stderr_is(usage_stderr(
            "dream-lock",
            "invalid value 'etcd://127.0.0.1' for '--backend <URL>': lock backend \"etcd://127.0.0.1\": member \"127.0.0.1\": expected host:port (etcd's client port, e.g. 2379)",
        ))
        .run();
    Run::new(&home, "dream-gate")
        .env("DREAMKIT_LOCK_URL", "redis://x")
        .code(2)
        .stdout_json(|out| assert_eq!(out["error"]["kind"], "usage"))
        .stderr_is(usage_stderr(
            "dream-gate",
            "DREAMKIT_LOCK_URL=\"redis://x\": unknown lock backend \"redis://x\" (expected `file` or etcd://host:port[,host:port...][/prefix])",
        ))
        .run();
    lock(&home, &["status", "--backend", "file"], "")
        .success()
        .stdout_json(|out| assert_eq!(out["backend"], "file"))
        .stderr_empty()
        .run();
}

#[test]
fn usage_errors() {
    let home = ClaudeHome::new();
    for args in [
        &[][..],
        &["exec"],
        &["acquire", "--pid", "0"],
        &["release", "--outcome", "maybe"],
        &["release", "--token", "1:2", "--prior-mtime", "-5"],
        &["frobnicate"],
    ] {
        lock(&home, args, "")
            .code(2)
            .stdout_json(|out| assert_eq!(out["error"]["kind"], "usage", "{args:?}"))
            .stderr_with(|err| {
                assert!(err.starts_with("dream-lock: "), "{args:?}: {err}");
                assert!(err.ends_with(" (try --help)\n"), "{args:?}: {err}");
                assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            })
            .run();
    }
    lock(&home, &["acquire"], "{broken")
        .code(2)
        .stdout_json(|out| assert_eq!(out["error"]["kind"], "bad_input"))
        .stderr_is(
            "dream-lock: stdin is not one JSON object: key must be a string at line 1 column 2\n",
        )
        .run();
    assert!(!home.memory_dir().exists());
}
