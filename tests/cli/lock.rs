//! `dream-lock` with real processes, real files and real signals.

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use crate::support::*;

fn lock(home: &ClaudeHome, args: &[&str], stdin: &str) -> (i32, Value) {
    let out = home
        .cmd("dream-lock")
        .args(args)
        .write_stdin(stdin)
        .output()
        .expect("run dream-lock");
    (out.status.code().expect("exit code"), stdout_json(&out))
}

fn acquire_for(home: &ClaudeHome, pid: u32) -> (i32, Value) {
    lock(home, &["acquire", "--pid", &pid.to_string()], "")
}

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
    let (code, out) = acquire_for(&home, holder.pid());
    assert_eq!(code, 0, "{out}");
    let l = &out["lock"];
    assert_eq!(l["acquired"], true);
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
    let (code, out) = lock(&other, &["acquire"], "");
    assert_eq!(code, 0);
    assert_eq!(out["lock"]["pid"], std::process::id());
}

#[test]
fn a_claude_code_lock_is_honoured_and_read_by_the_gate() {
    let home = ClaudeHome::new();
    let claude = LiveProcess::start();
    claude_code_writes(&home, claude.pid(), Duration::ZERO);
    let (code, out) = acquire_for(&home, std::process::id());
    assert_eq!(code, 1, "{out}");
    assert_eq!(out["lock"]["acquired"], false);
    assert_eq!(out["lock"]["reason"], "held");
    assert_eq!(out["lock"]["holder_pid"], claude.pid());
    assert!(out["lock"]["held_since"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        content(&home),
        claude.pid().to_string(),
        "a refused acquire wrote"
    );

    let (code, status) = lock(&home, &["status"], "");
    assert_eq!(code, 1);
    assert_eq!(status["held"], true);
    assert_eq!(status["holder_pid"], claude.pid());
    assert_eq!(status["holder_alive"], true);
    assert_eq!(status["stale"], false);

    let out = home.cmd("dream-gate").output().unwrap();
    let gate = stdout_json(&out);
    assert_eq!(gate["gate"]["reason"], "too_soon");
    assert!(gate["gate"]["hours_since"].as_f64().unwrap() < 0.01);
}

#[test]
fn thirty_two_concurrent_acquirers_have_exactly_one_winner_each_round() {
    let home = ClaudeHome::new();
    let shells: Vec<LiveProcess> = (0..32).map(|_| LiveProcess::start()).collect();
    for round in 0..20 {
        let children: Vec<_> = shells
            .iter()
            .map(|shell| {
                let mut cmd: Command = Command::new(bin_path("dream-lock"));
                cmd.args(["acquire", "--pid", &shell.pid().to_string()])
                    .env("HOME", &home.home)
                    .env("CLAUDE_CONFIG_DIR", &home.config)
                    .env("XDG_STATE_HOME", &home.state_home)
                    .current_dir(&home.project)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                cmd.spawn().expect("spawn acquirer")
            })
            .collect();
        let results: Vec<(i32, Value)> = children
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().expect("wait");
                (out.status.code().expect("code"), stdout_json(&out))
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
        let (code, out) = lock(
            &home,
            &["release", "--outcome", "failed"],
            &winner.to_string(),
        );
        assert_eq!(code, 0, "round {round}: {out}");
        assert!(!home.lock_file().exists());
    }
}

#[test]
fn a_holder_killed_with_sigkill_is_taken_over() {
    let home = ClaudeHome::new();
    let holder = LiveProcess::start();
    let (code, first) = acquire_for(&home, holder.pid());
    assert_eq!(code, 0);
    let first_mtime = epoch_ms(mtime(&home.lock_file()));
    let next = LiveProcess::start();
    assert_eq!(acquire_for(&home, next.pid()).0, 1);

    let dead = holder.pid();
    holder.kill();
    let (code, status) = lock(&home, &["status"], "");
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["holder_pid"], dead);
    assert_eq!(status["holder_alive"], false);
    assert_eq!(status["stale"], true);

    // The takeover writes at a later millisecond than the first acquire.
    wait::for_clock_past(mtime(&home.lock_file()));
    let (code, out) = acquire_for(&home, next.pid());
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["lock"]["prior_mtime"], first_mtime);
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
    let (code, out) = acquire_for(&home, next.pid());
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["lock"]["prior_mtime"], old);
}

#[test]
fn a_recycled_pid_is_not_a_holder() {
    let home = ClaudeHome::new();
    // Claude Code wrote PID N ten minutes ago; N now belongs to a process started since.
    let newcomer = LiveProcess::start();
    claude_code_writes(&home, newcomer.pid(), Duration::from_secs(600));
    let (code, status) = lock(&home, &["status"], "");
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["held"], false);
    assert_eq!(status["holder_alive"], true);
    assert_eq!(status["stale"], true);
    let (code, out) = acquire_for(&home, std::process::id());
    assert_eq!(code, 0, "{out}");
}

#[test]
fn empty_or_garbage_content_names_no_holder() {
    for text in ["", "not a pid", "0", "12 34"] {
        let home = ClaudeHome::new();
        std::fs::create_dir_all(home.memory_dir()).unwrap();
        std::fs::write(home.lock_file(), text).unwrap();
        let (code, status) = lock(&home, &["status"], "");
        assert_eq!(
            (code, status["held"].clone()),
            (0, json!(false)),
            "{text:?}"
        );
        assert_eq!(status["holder_pid"], Value::Null);
        assert_eq!(acquire_for(&home, std::process::id()).0, 0, "{text:?}");
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
            let (code, acquired) = acquire_for(&home, std::process::id());
            assert_eq!(code, 0);
            assert_eq!(acquired["lock"]["prior_mtime"], prior_ms);
            let mut envelope = acquired.clone();
            envelope["run"] = json!({"status": outcome});
            envelope["trace"] = json!("kept");
            // The outcome comes from run.status.
            let (code, out) = lock(&home, &["release"], &envelope.to_string());
            let case = format!("{outcome}, prior {had_prior}");
            assert_eq!(code, 0, "{case}: {out}");
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
            let gate = stdout_json(&home.cmd("dream-gate").output().unwrap());
            let expected = if outcome == "completed" {
                "too_soon"
            } else {
                "too_few_sessions"
            };
            assert_eq!(gate["gate"]["reason"], expected, "{case}");

            // Releasing again is not ours any more: exit 1, nothing changed.
            let before = std::fs::metadata(home.lock_file())
                .ok()
                .map(|m| m.modified().unwrap());
            let (code, again) = lock(&home, &["release"], &envelope.to_string());
            assert_eq!(code, 1, "{case}");
            assert_eq!(again["lock"]["reason"], "not_holder");
            assert_eq!(again["lock"]["released"], false);
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
    let (code, acquired) = acquire_for(&home, std::process::id());
    assert_eq!(code, 0);
    let held = (content(&home), mtime(&home.lock_file()));
    for (outcome, would) in [("completed", true), ("failed", false)] {
        let mut envelope = acquired.clone();
        envelope["run"] = json!({"status": outcome});
        let out = home
            .cmd("dream-lock")
            .args(["release", "--dry-run"])
            .write_stdin(envelope.to_string())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{outcome}");
        let doc = stdout_json(&out);
        assert_eq!(doc["lock"]["dry_run"], true);
        assert_eq!(doc["lock"]["released"], false);
        assert_eq!(doc["lock"]["outcome"], outcome);
        let at = &doc["lock"]["would_set_last_consolidated_at"];
        if would {
            assert!(at.is_string(), "{doc}");
        } else {
            // Rolled back to the time before this hold.
            let prior = dreamkit::cli::time::rfc3339(
                SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(prior_ms).unwrap()),
            );
            assert_eq!(at, &json!(prior), "{doc}");
        }
        assert!(
            stderr_text(&out).starts_with("dream-lock: dry run: would release the lock as"),
            "{}",
            stderr_text(&out)
        );
        assert_eq!(
            (content(&home), mtime(&home.lock_file())),
            held,
            "{outcome}: the lock changed"
        );
    }
    // Once released, a dry run says it would not: exit 1, not_holder.
    let (code, _) = lock(&home, &["release"], &acquired.to_string());
    assert_eq!(code, 0);
    let (code, doc) = lock(&home, &["release", "--dry-run"], &acquired.to_string());
    assert_eq!(code, 1, "{doc}");
    assert_eq!(doc["lock"]["reason"], "not_holder");
    assert_eq!(doc["lock"]["dry_run"], true);
}

#[test]
fn the_outcome_flag_wins_and_release_needs_a_lease() {
    let home = ClaudeHome::new();
    let (_, acquired) = acquire_for(&home, std::process::id());
    let mut envelope = acquired.clone();
    envelope["run"] = json!({"status": "completed"});
    let (code, out) = lock(
        &home,
        &["release", "--outcome", "failed"],
        &envelope.to_string(),
    );
    assert_eq!(code, 0);
    assert_eq!(out["lock"]["outcome"], "failed");
    assert!(!home.lock_file().exists());

    let (code, out) = lock(&home, &["release"], "");
    assert_eq!(code, 2);
    assert_eq!(out["error"]["kind"], "usage");
    let (_, acquired) = acquire_for(&home, std::process::id());
    let mut running = acquired.clone();
    running["run"] = json!({"status": "running"});
    let (code, out) = lock(&home, &["release"], &running.to_string());
    assert_eq!(
        (code, out["error"]["kind"].as_str()),
        (2, Some("bad_input"))
    );
    assert_eq!(
        content(&home),
        std::process::id().to_string(),
        "a refused release wrote"
    );
    // No outcome anywhere (the command in the middle was `cat`): rolled back, with a warning.
    let out = home
        .cmd("dream-lock")
        .arg("release")
        .write_stdin(acquired.to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "no outcome anywhere");
    let doc = stdout_json(&out);
    assert_eq!(doc["lock"]["outcome"], "failed");
    assert_eq!(doc["lock"]["released"], true);
    assert_eq!(
        doc["lock"]["warning"],
        "no run.status and no --outcome: rolled back as failed"
    );
    assert_eq!(
        stderr_text(&out),
        "dream-lock: no run.status and no --outcome: rolled back as failed\n"
    );
    assert!(
        !home.lock_file().exists(),
        "no prior time: rolled back by deleting"
    );
    let (_, acquired) = acquire_for(&home, std::process::id());

    // Flags instead of an envelope.
    let token = acquired["lock"]["token"].as_str().unwrap();
    let (code, out) = lock(
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
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(content(&home), "");
}

#[test]
fn a_declined_upstream_stage_passes_through_untouched() {
    let home = ClaudeHome::new();
    for envelope in [
        json!({"gate": {"due": false, "reason": "too_soon"}, "x": [1, {"y": null}]}),
        json!({"lock": {"acquired": false, "reason": "held"}, "z": 1}),
        json!({"error": {"kind": "bad_input", "message": "m"}}),
    ] {
        for args in [
            &["acquire"][..],
            &["release"],
            &["exec", "--", "touch", "ran"],
        ] {
            let out = home
                .cmd("dream-lock")
                .args(args)
                .write_stdin(envelope.to_string())
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(1), "{args:?} {envelope}");
            assert_eq!(stdout_json(&out), envelope, "{args:?}");
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
    let gate = home
        .cmd("dream-gate")
        .args(["--min-sessions", "0"])
        .output()
        .unwrap();
    let script = r#"cat > envelope.json; printf 'token=%s\n' "$DREAMKIT_LOCK_TOKEN"; cat .claude-lock-check 2>/dev/null; exit 0"#;
    let out = home
        .cmd("dream-lock")
        .args(["exec", "--", "sh", "-c", script])
        .write_stdin(gate.stdout)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let seen: Value =
        serde_json::from_slice(&std::fs::read(home.project.join("envelope.json")).unwrap())
            .unwrap();
    assert_eq!(seen["gate"]["due"], true);
    assert_eq!(seen["lock"]["acquired"], true);
    let token = seen["lock"]["token"].as_str().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("token={token}\n")
    );
    // exec's own PID held it; now it is free and now is the last-consolidated time, and
    // stderr says so.
    assert_eq!(
        stderr_text(&out).trim_end(),
        "dream-lock: released the lock: completed, the consolidation time is now"
    );
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
    let out = home
        .cmd("dream-lock")
        .args([
            "exec",
            "--",
            "sh",
            "-c",
            "cat >/dev/null; echo partial; exit 3",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "partial\n");
    assert_eq!(
        stderr_text(&out).trim_end(),
        "dream-lock: rolled the lock back (failed): the consolidation time is as it was"
    );
    assert_eq!(content(&home), "");
    assert_eq!(epoch_ms(mtime(&home.lock_file())), prior);

    // A command that does not exist: rolled back (no prior: deleted), 127.
    let fresh = ClaudeHome::new();
    let out = fresh
        .cmd("dream-lock")
        .args(["exec", "--", "no-such-dreamkit-cmd"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(!fresh.lock_file().exists());
    assert_eq!(stdout_json(&out)["error"]["kind"], "usage");
}

#[test]
fn exec_forwards_sigterm_rolls_back_and_exits_143() {
    let home = ClaudeHome::new();
    home.consolidated(hours(30));
    let prior = epoch_ms(mtime(&home.lock_file()));
    let marker = home.project.join("started");
    let mut child = Command::new(bin_path("dream-lock"))
        .args(["exec", "--", "sh", "-c"])
        .arg(format!(
            "trap 'echo got-term > {0}.term; exit 143' TERM; touch {0}; while :; do sleep 0.05; done",
            marker.display()
        ))
        .env("HOME", &home.home)
        .env("CLAUDE_CONFIG_DIR", &home.config)
        .env("XDG_STATE_HOME", &home.state_home)
        .current_dir(&home.project)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The script's own `sleep 0.05` loop is the command staying alive, not a wait.
    wait::for_file(&marker);
    assert_eq!(
        content(&home),
        child.id().to_string(),
        "exec holds the lock with its own PID"
    );
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
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
    let out = home
        .cmd("dream-lock")
        .args(["exec", "--", "sh", "-c", "kill -KILL $$"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(137));
    assert!(!home.lock_file().exists(), "aborted without prior: deleted");
}

#[test]
fn exec_does_not_run_the_command_when_the_lock_is_busy() {
    let home = ClaudeHome::new();
    let holder = LiveProcess::start();
    assert_eq!(acquire_for(&home, holder.pid()).0, 0);
    let out = home
        .cmd("dream-lock")
        .args(["exec", "--", "touch", "ran"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_json(&out)["lock"]["reason"], "held");
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
        let out = home
            .cmd_unprivileged("dream-lock")
            .args(args)
            .output()
            .unwrap();
        let doc = stdout_json(&out);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {doc}");
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
    let out = home
        .cmd_unprivileged("dream-lock")
        .args(["acquire"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stdout_json(&out));
    assert_eq!(mtime(&home.lock_file()), before);
    assert_eq!(content(&home), "999999");

    chmod(&home.lock_file(), 0o644);
    chmod(&home.memory_dir(), 0o555);
    let out = home
        .cmd_unprivileged("dream-lock")
        .args(["acquire"])
        .output()
        .unwrap();
    chmod(&home.memory_dir(), 0o755);
    assert_eq!(out.status.code(), Some(3), "{}", stdout_json(&out));
    assert_eq!(content(&home), "999999");
}

#[test]
fn other_backends_are_refused_not_replaced() {
    let home = ClaudeHome::new();
    // etcd is a backend now (tests/cli/etcd.rs); a malformed etcd URL is still refused.
    let (code, out) = lock(&home, &["status", "--backend", "etcd://127.0.0.1"], "");
    assert_eq!(code, 2);
    assert!(out["error"]["message"].as_str().unwrap().contains("etcd"));
    let out = home
        .cmd("dream-gate")
        .env("DREAMKIT_LOCK_URL", "redis://x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let (code, _) = lock(&home, &["status", "--backend", "file"], "");
    assert_eq!(code, 0);
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
        let (code, out) = lock(&home, args, "");
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(out["error"]["kind"], "usage", "{args:?}");
    }
    let (code, out) = lock(&home, &["acquire"], "{broken");
    assert_eq!(
        (code, out["error"]["kind"].as_str()),
        (2, Some("bad_input"))
    );
    assert!(!home.memory_dir().exists());
}
