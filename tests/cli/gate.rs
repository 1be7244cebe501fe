//! `dream-gate` as a hook or a user runs it.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

fn gate<'a>(home: &ClaudeHome, args: &[&str]) -> Run<'a> {
    Run::new(home, "dream-gate").args(args)
}

/// What a not-due run prints on stderr: its one line.
fn not_due(line: &str) -> String {
    format!("dream-gate: not due: {line}\n")
}

fn ids(gate: &Value) -> Vec<String> {
    gate["sessions"]
        .as_array()
        .expect("sessions array")
        .iter()
        .map(|s| s["id"].as_str().expect("id").to_string())
        .collect()
}

/// Six sessions, the oldest first: 6h, 5h, ... 1h old.
fn six_sessions(home: &ClaudeHome) -> Vec<String> {
    (1..=6)
        .map(|n| {
            let id = session_id(n);
            home.add_session(&id, hours(7 - u64::from(n)));
            id
        })
        .collect()
}

#[test]
fn due_when_never_consolidated_lists_sessions_oldest_first() {
    let home = ClaudeHome::new();
    let sessions = six_sessions(&home);
    let out = gate(&home, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["gate"]["due"], true, "{doc}"))
        .stderr_empty()
        .run()
        .json();
    let g = &out["gate"];
    assert_eq!(g["due"], true);
    assert_eq!(g["reason"], Value::Null);
    assert_eq!(g["detail"], Value::Null);
    assert_eq!(g["last_consolidated_at"], Value::Null);
    assert_eq!(g["hours_since"], Value::Null);
    assert_eq!(g["min_hours"], 24.0);
    assert_eq!(g["min_sessions"], 5);
    assert_eq!(g["session_count"], 6);
    assert_eq!(ids(g), sessions);
    let first = &g["sessions"][0];
    let path = home
        .transcripts_dir()
        .join(format!("{}.jsonl", sessions[0]));
    assert_eq!(first["path"], path.display().to_string());
    assert_eq!(first["bytes"], std::fs::metadata(&path).unwrap().len());
    let modified = first["modified_at"].as_str().unwrap();
    assert!(
        modified.ends_with('Z') && modified.len() == 24,
        "{modified}"
    );
    assert_eq!(
        out["project"],
        json!({
            "cwd": home.project.display().to_string(),
            "slug": home.slug(),
            "transcripts_dir": home.transcripts_dir().display().to_string(),
            "memory_dir": home.memory_dir().display().to_string(),
            "state_dir": home.state_dir().display().to_string(),
        })
    );
    // A due gate writes nothing.
    assert!(!home.state_home.exists());
}

#[test]
fn too_soon_within_min_hours() {
    let home = ClaudeHome::new();
    six_sessions(&home);
    home.consolidated(hours(2));
    let out = gate(&home, &[])
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["gate"]["due"], false, "{doc}");
            assert_eq!(doc["gate"]["reason"], "too_soon", "{doc}");
        })
        .stderr_is(not_due("too_soon: 2.0 h of 24 h"))
        .run()
        .json();
    let g = &out["gate"];
    assert_eq!(g["due"], false);
    assert_eq!(g["reason"], "too_soon");
    let h = g["hours_since"].as_f64().unwrap();
    assert!((1.99..2.01).contains(&h), "{h}");
    assert!(g["last_consolidated_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(g["session_count"], Value::Null);
    assert_eq!(g["sessions"], json!([]));
}

#[test]
fn only_sessions_newer_than_the_last_consolidation_count() {
    let home = ClaudeHome::new();
    let sessions = six_sessions(&home);
    home.consolidated(Duration::from_secs(3 * HOURS + 1800));
    // Sessions 4, 5, 6 (3h, 2h, 1h old) are newer than the lock.
    gate(&home, &["--min-hours", "3", "--min-sessions", "3"])
        .success()
        .stdout_json(|out| {
            assert_eq!(ids(&out["gate"]), sessions[3..]);
            assert_eq!(out["gate"]["min_hours"], 3.0);
        })
        .stderr_empty()
        .run();

    gate(&home, &["--min-hours", "3.6"])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "too_soon"))
        .stderr_is(not_due("too_soon: 3.5 h of 3.6 h"))
        .run();
}

#[test]
fn environment_thresholds_and_flags_winning_over_them() {
    let home = ClaudeHome::new();
    six_sessions(&home);
    home.consolidated(hours(3));
    let run = |args: &[&str]| {
        gate(&home, args)
            .env("DREAMKIT_MIN_HOURS", "2")
            .env("DREAMKIT_MIN_SESSIONS", "2")
    };
    run(&[])
        .success()
        .stdout_json(|out| {
            assert_eq!(out["gate"]["min_hours"], 2.0);
            assert_eq!(out["gate"]["min_sessions"], 2);
            assert_eq!(out["gate"]["session_count"], 2);
        })
        .stderr_empty()
        .run();
    run(&["--min-hours", "4"])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "too_soon"))
        .stderr_is(not_due("too_soon: 3.0 h of 4 h"))
        .run();
    let since = run(&["--min-sessions", "3"])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "too_few_sessions"))
        .stderr_any("checked below, it names the lock's time")
        .run();
    let at = since.json()["gate"]["last_consolidated_at"].clone();
    assert_eq!(
        since.stderr,
        not_due(&format!(
            "too_few_sessions: 2 of 3 sessions since {}",
            at.as_str().unwrap()
        ))
    );

    gate(&home, &[])
        .env("DREAMKIT_MIN_SESSIONS", "many")
        .code(2)
        .stdout_json(|out| assert_eq!(out["error"]["kind"], "usage"))
        .stderr_contains("DREAMKIT_MIN_SESSIONS")
        .run();
}

#[test]
fn disabled_with_each_detail() {
    type Case<'a> = (
        &'a [(&'a str, &'a str)],
        Option<(&'a str, &'a str)>,
        &'a str,
    );
    let cases: &[Case] = &[
        (
            &[],
            Some((
                "home/.claude/settings.json",
                r#"{"autoDreamEnabled": false}"#,
            )),
            "auto_dream_off",
        ),
        (
            &[],
            Some((
                "proj/.claude/settings.local.json",
                r#"{"autoMemoryEnabled": false}"#,
            )),
            "auto_memory_off",
        ),
        (
            &[("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")],
            None,
            "auto_memory_off",
        ),
        (&[("CLAUDE_CODE_SIMPLE", "true")], None, "simple"),
        (&[("CLAUDE_CODE_REMOTE", "1")], None, "remote"),
    ];
    for (env, file, detail) in cases {
        let home = ClaudeHome::new();
        six_sessions(&home);
        if let Some((path, text)) = file {
            home.write(path, text);
        }
        gate(&home, &[])
            .envs(env.iter().copied())
            .code(1)
            .stdout_json(|doc| {
                assert_eq!(doc["gate"]["reason"], "disabled", "{detail}");
                assert_eq!(doc["gate"]["detail"], *detail);
                assert_eq!(doc["gate"]["session_count"], Value::Null);
            })
            .stderr_is(not_due(&format!("disabled: {detail}")))
            .run();
    }

    // Project settings can turn dream back on; an explicit falsy switch beats simple mode.
    let home = ClaudeHome::new();
    six_sessions(&home);
    home.write(
        "home/.claude/settings.json",
        r#"{"autoDreamEnabled": false}"#,
    );
    home.write(
        "proj/.claude/settings.json",
        r#"{"autoDreamEnabled": true}"#,
    );
    gate(&home, &[])
        .env("CLAUDE_CODE_SIMPLE", "1")
        .env("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "0")
        .success()
        .stdout_json(|doc| assert_eq!(doc["gate"]["due"], true))
        .stderr_empty()
        .run();
}

#[test]
fn too_few_sessions_writes_the_scan_stamp_and_then_throttles() {
    let home = ClaudeHome::new();
    home.add_session(&session_id(1), hours(1));
    let out = gate(&home, &[])
        .code(1)
        .stdout_json(|out| {
            assert_eq!(out["gate"]["reason"], "too_few_sessions");
            assert_eq!(out["gate"]["session_count"], 1);
            assert_eq!(ids(&out["gate"]), [session_id(1)]);
        })
        .stderr_is(not_due(
            "too_few_sessions: 1 of 5 sessions (never consolidated)",
        ))
        .run()
        .json();

    let stamp = home.state_dir().join("last-scan");
    let text = std::fs::read_to_string(&stamp).unwrap();
    let ms: i64 = text.parse().unwrap();
    assert!(ms > 1_700_000_000_000, "{text}");
    assert_eq!(mode(&std::fs::metadata(&stamp).unwrap()), 0o600);
    for dir in [home.state_dir(), home.state_home.join("dreamkit")] {
        assert_eq!(
            mode(&std::fs::metadata(&dir).unwrap()),
            0o700,
            "{}",
            dir.display()
        );
    }
    let scanned_at = out["gate"]["last_scan_at"].clone();
    assert!(scanned_at.is_string());

    // Enough sessions now, but the last scan was moments ago.
    six_sessions(&home);
    gate(&home, &[])
        .code(1)
        .stdout_json(|out| {
            assert_eq!(out["gate"]["reason"], "throttled");
            assert_eq!(out["gate"]["last_scan_at"], scanned_at);
            assert_eq!(out["gate"]["session_count"], Value::Null);
        })
        .stderr_contains("dream-gate: not due: throttled: last scan ")
        .run();
    assert_eq!(
        std::fs::read_to_string(&stamp).unwrap(),
        text,
        "throttled run rewrote the stamp"
    );

    // A shorter interval, or an old stamp, lets the scan happen.
    gate(&home, &["--scan-interval", "0"])
        .success()
        .stdout_json(|out| assert_eq!(out["gate"]["session_count"], 6))
        .stderr_empty()
        .run();
    std::fs::write(&stamp, (ms - 11 * 60 * 1000).to_string()).unwrap();
    gate(&home, &[])
        .success()
        .stdout_json(|out| assert_eq!(out["gate"]["session_count"], 6))
        .stderr_empty()
        .run();
}

#[test]
fn scan_interval_zero_never_writes_a_stamp_and_a_corrupt_stamp_is_ignored() {
    let home = ClaudeHome::new();
    // An empty transcripts dir: zero sessions, but a project Claude Code has run in.
    std::fs::create_dir_all(home.transcripts_dir()).unwrap();
    let never = not_due("too_few_sessions: 0 of 5 sessions (never consolidated)");
    gate(&home, &["--scan-interval", "0ms"])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "too_few_sessions"))
        .stderr_is(&never)
        .run();
    assert!(!home.state_dir().join("last-scan").exists());

    home.write(
        &format!("state/dreamkit/projects/{}/last-scan", home.slug()),
        "garbage",
    );
    gate(&home, &[])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "too_few_sessions"))
        .stderr_is(never)
        .run();
    let ms: i64 = std::fs::read_to_string(home.state_dir().join("last-scan"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(ms > 0);
}

#[test]
fn current_session_is_excluded_by_flag() {
    let home = ClaudeHome::new();
    let sessions = six_sessions(&home);
    gate(
        &home,
        &["--current-session", &sessions[5], "--min-sessions", "6"],
    )
    .code(1)
    .stdout_json(|out| {
        assert_eq!(out["gate"]["reason"], "too_few_sessions");
        assert_eq!(out["gate"]["session_count"], 5);
        assert_eq!(out["gate"]["current_session"], sessions[5].as_str());
        assert!(!ids(&out["gate"]).contains(&sessions[5]));
    })
    .stderr_is(not_due(
        "too_few_sessions: 5 of 6 sessions (never consolidated)",
    ))
    .run();
}

#[test]
fn stop_hook_payload_supplies_cwd_session_and_transcripts_dir() {
    let home = ClaudeHome::new();
    let sessions = six_sessions(&home);
    let other = home.root.join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let real = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/claude-code-2.1.332/hook-input/Stop.json"
    ))
    .unwrap();
    let mut payload: Value = serde_json::from_str(&real).unwrap();
    payload["session_id"] = json!(sessions[5]);
    payload["cwd"] = json!(home.project);
    payload["transcript_path"] = json!(home
        .transcripts_dir()
        .join(format!("{}.jsonl", sessions[5])));
    gate(&home, &[])
        .current_dir(&other)
        .stdin(payload.to_string())
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["gate"]["current_session"], sessions[5].as_str());
            assert_eq!(ids(&doc["gate"]), sessions[..5]);
            assert_eq!(doc["project"]["cwd"], home.project.display().to_string());
            // The hook payload is input, not an envelope: it is not echoed.
            assert!(doc.get("hook_event_name").is_none());
        })
        .stderr_empty()
        .run();

    // Flags win over the payload.
    gate(&home, &["--current-session", &sessions[0]])
        .stdin(payload.to_string())
        .success()
        .stdout_json(|doc| assert_eq!(doc["gate"]["current_session"], sessions[0].as_str()))
        .stderr_empty()
        .run();
}

#[test]
fn envelope_keys_pass_through_and_project_is_reused() {
    let home = ClaudeHome::new();
    six_sessions(&home);
    let elsewhere = home.root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let input = json!({
        "trace": {"id": "abc", "n": [1, 2, 3]},
        "project": {"cwd": home.project},
        "gate": {"stale": true},
    });
    let doc = gate(&home, &[])
        .current_dir(&elsewhere)
        .stdin(input.to_string())
        .success()
        .stdout_json(|doc| assert_eq!(doc["gate"]["due"], true, "{doc}"))
        .stderr_empty()
        .run()
        .json();
    assert_eq!(doc["trace"], input["trace"]);
    assert_eq!(doc["gate"]["due"], true);
    assert!(doc["gate"].get("stale").is_none());
    assert_eq!(doc["project"]["slug"], home.slug());
    let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["trace", "project", "gate"]);
}

#[test]
fn long_project_paths_get_the_hashed_slug() {
    let long = format!(
        "{}/project.with.dots",
        ["segment-of-thirty-characters-x"; 8].join("/")
    );
    let home = ClaudeHome::with_project(&long);
    assert!(home.project.display().to_string().len() > 200);
    let slug = home.slug();
    assert!(slug.len() > 201 && slug.as_bytes()[200] == b'-', "{slug}");
    six_sessions(&home);
    gate(&home, &[])
        .success()
        .stdout_json(|out| {
            assert_eq!(out["project"]["slug"], slug);
            assert_eq!(out["gate"]["session_count"], 6);
        })
        .stderr_empty()
        .run();
}

#[test]
fn bad_stdin_is_exit_2_with_one_stderr_line_and_nothing_written() {
    let home = ClaudeHome::new();
    home.add_session(&session_id(1), hours(1));
    for bad in [
        "{not json",
        "[1, 2]",
        "42",
        r#"{"hook_event_name": "Stop", "session_id": 7}"#,
        r#"{"hook_event_name": "Stop", "cwd": ["/x"]}"#,
        r#"{"project": {"cwd": false}}"#,
        r#"{"a": 1} {"b": 2}"#,
    ] {
        gate(&home, &[])
            .stdin(bad)
            .code(2)
            .stdout_json(|out| {
                assert_eq!(out["error"]["kind"], "bad_input", "{bad}");
                assert!(out["error"]["message"].as_str().unwrap().len() > 5);
            })
            .stderr_with(|err| {
                assert_eq!(err.lines().count(), 1, "{bad}: {err:?}");
                assert!(err.starts_with("dream-gate: "), "{err}");
            })
            .run();
    }
    assert!(!home.state_home.exists(), "bad input wrote state");
}

#[test]
fn usage_errors_are_json_too() {
    let home = ClaudeHome::new();
    for args in [
        &["--no-such-flag"][..],
        &["--scan-interval", "10 days"],
        &["--min-hours", "-3"],
        &["--min-sessions", "five"],
        &["extra-positional"],
    ] {
        gate(&home, args)
            .code(2)
            .stdout_json(|out| assert_eq!(out["error"]["kind"], "usage", "{args:?}"))
            // One line saying what is wrong; the Usage line is in the JSON.
            .stderr_with(|err| {
                assert!(err.starts_with("dream-gate: "), "{args:?}: {err}");
                assert!(err.ends_with(" (try --help)\n"), "{args:?}: {err}");
                assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            })
            .run();
    }
    gate(&home, &["--version"])
        .success()
        .stdout_is(format!(
            "dream-gate {} (tested with Claude Code 2.1.332)\n",
            env!("CARGO_PKG_VERSION")
        ))
        .stderr_empty()
        .run();
    gate(&home, &["--help"])
        .success()
        .stdout_contains("--min-sessions")
        .stderr_empty()
        .run();
}

#[test]
fn invalid_settings_fail_as_environment_with_the_envelope_kept() {
    let home = ClaudeHome::new();
    six_sessions(&home);
    home.write(
        "proj/.claude/settings.local.json",
        "{\"autoDreamEnabled\": ",
    );
    gate(&home, &[])
        .stdin(r#"{"trace": 1}"#)
        .code(3)
        .stdout_json(|out| {
            assert_eq!(out["trace"], 1);
            assert_eq!(out["gate"]["due"], false);
            assert_eq!(out["gate"]["reason"], "error");
            assert_eq!(out["gate"]["error"]["kind"], "environment");
        })
        .stderr_with(|err| {
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.starts_with("dream-gate: "), "{err}");
            assert!(err.contains("settings.local.json"), "{err}");
        })
        .run();
}

#[test]
fn unreadable_transcripts_dir_is_exit_3() {
    let home = ClaudeHome::new();
    six_sessions(&home);
    chmod(&home.transcripts_dir(), 0o000);
    // The default memory dir lies inside the transcripts dir; keep it reachable so that the
    // scan is what fails.
    let memory = home.root.join("memory");
    let run = Run::unprivileged(&home, "dream-gate")
        .arg("--memory-dir")
        .arg(&memory)
        .code(3)
        .stdout_json(|doc| {
            assert_eq!(doc["gate"]["due"], false);
            assert_eq!(doc["gate"]["error"]["kind"], "environment");
            assert!(doc["gate"]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("transcripts dir"));
        })
        .stderr_with(|err| {
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.starts_with("dream-gate: "), "{err}");
            assert!(err.contains("transcripts dir"), "{err}");
        });
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.run()));
    chmod(&home.transcripts_dir(), 0o755);
    result.unwrap_or_else(|p| std::panic::resume_unwind(p));
}

#[test]
fn unreadable_memory_dir_fails_closed() {
    let home = ClaudeHome::new();
    six_sessions(&home);
    home.consolidated(hours(48));
    chmod(&home.memory_dir(), 0o000);
    let run = Run::unprivileged(&home, "dream-gate")
        .code(3)
        .stdout_json(|doc| {
            assert_eq!(doc["gate"]["due"], false);
            assert!(doc["gate"]["error"]["message"]
                .as_str()
                .unwrap()
                .contains(".consolidate-lock"));
        })
        .stderr_with(|err| {
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains(".consolidate-lock"), "{err}");
        });
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.run()));
    chmod(&home.memory_dir(), 0o755);
    result.unwrap_or_else(|p| std::panic::resume_unwind(p));
}

#[test]
fn pretty_output_is_indented() {
    let home = ClaudeHome::new();
    gate(&home, &["--pretty"])
        .code(1)
        .stdout_with(|text| {
            assert!(text.starts_with("{\n  \"project\": {\n"), "{text}");
            assert!(serde_json::from_str::<Value>(text).is_ok());
        })
        .stderr_is(not_due(
            "too_few_sessions: 0 of 5 sessions (never consolidated)",
        ))
        .run();
}

#[test]
fn quiet_silences_stderr_but_not_stdout() {
    let home = ClaudeHome::new();
    home.write("proj/.claude/settings.json", "not json");
    gate(&home, &["-q"])
        .code(3)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "error"))
        .stderr_empty()
        .run();
}

#[test]
fn a_project_path_that_is_not_utf8_is_refused_not_printed_lossily() {
    use std::os::unix::ffi::OsStrExt;
    let home = ClaudeHome::new();
    let odd = home.root.join(std::ffi::OsStr::from_bytes(b"caf\xe9-proj"));
    std::fs::create_dir_all(&odd).unwrap();
    // Printed with U+FFFD, the path would name another directory to the next stage.
    gate(&home, &["--cwd"])
        .arg(&odd)
        .code(2)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "bad_input");
            assert_eq!(doc["error"]["reason"], "bad_path");
            assert!(doc["error"]["message"].as_str().unwrap().contains("UTF-8"));
        })
        .stderr_with(|err| {
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains("UTF-8"), "{err}");
        })
        .run();
    assert!(!home.state_home.exists());
}

/// The one line a not-due run prints on stderr, without the tool's prefix.
/// A project Claude Code never ran in: the reason stays, `detail` says why, and no scan stamp
/// is written, so the first sessions are counted at once (not after the throttle).
#[test]
fn no_transcripts_dir_is_its_detail_and_writes_no_stamp() {
    let home = ClaudeHome::new();
    for _ in 0..2 {
        gate(&home, &[])
            .code(1)
            .stdout_json(|out| {
                assert_eq!(out["gate"]["reason"], "too_few_sessions");
                assert_eq!(out["gate"]["detail"], "no_transcripts_dir");
                assert_eq!(out["gate"]["session_count"], 0);
                assert_eq!(out["gate"]["last_scan_at"], Value::Null);
            })
            .stderr_is(not_due(
                "too_few_sessions: 0 of 5 sessions (never consolidated)",
            ))
            .run();
    }
    assert!(!home.state_dir().join("last-scan").exists());
    // Once the dir exists, even empty, it is an ordinary scan: no detail, a stamp.
    std::fs::create_dir_all(home.transcripts_dir()).unwrap();
    gate(&home, &[])
        .code(1)
        .stdout_json(|out| {
            assert_eq!(out["gate"]["reason"], "too_few_sessions");
            assert_eq!(out["gate"]["detail"], Value::Null);
            assert!(out["gate"]["last_scan_at"].is_string());
        })
        .stderr_is(not_due(
            "too_few_sessions: 0 of 5 sessions (never consolidated)",
        ))
        .run();
    assert!(home.state_dir().join("last-scan").is_file());
}

fn note(err: &str) -> &str {
    assert_eq!(err.lines().count(), 1, "{err:?}");
    err.trim_end()
        .strip_prefix("dream-gate: ")
        .unwrap_or_else(|| panic!("{err:?}"))
}

#[test]
fn the_quick_start_says_why_the_second_run_is_not_due() {
    let home = ClaudeHome::new();
    home.add_session(&session_id(1), hours(1));
    let cwd = home.project.display().to_string();
    gate(&home, &["--cwd", &cwd])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "too_few_sessions"))
        .stderr_is(not_due(
            "too_few_sessions: 1 of 5 sessions (never consolidated)",
        ))
        .run();
    // The first run left a scan stamp: the second is throttled, and says so.
    gate(&home, &["--cwd", &cwd])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "throttled"))
        .stderr_with(|err| {
            let line = note(err);
            let secs = line
                .strip_prefix("not due: throttled: last scan ")
                .and_then(|rest| rest.strip_suffix(" s ago, interval 10m"))
                .unwrap_or_else(|| panic!("{line:?}"));
            assert!(secs.parse::<u64>().is_ok_and(|s| s < 600), "{line}");
        })
        .run();
    gate(&home, &["--cwd", &cwd, "--scan-interval", "90m"])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "throttled"))
        .stderr_with(|err| assert!(note(err).ends_with(", interval 90m"), "{err}"))
        .run();
    // -q silences it; stdout is unchanged.
    gate(&home, &["--cwd", &cwd, "-q"])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "throttled"))
        .stderr_empty()
        .run();
}

#[test]
fn every_not_due_reason_has_its_line() {
    let home = ClaudeHome::new();
    home.consolidated(hours(2));
    let too_soon = |line: &str| {
        let line = line.to_string();
        move |out: &Value| {
            assert_eq!(out["gate"]["reason"], "too_soon", "{line}");
        }
    };
    gate(&home, &[])
        .code(1)
        .stdout_json(too_soon("default"))
        .stderr_is(not_due("too_soon: 2.0 h of 24 h"))
        .run();
    gate(&home, &["--min-hours", "150m"])
        .code(1)
        .stdout_json(too_soon("150m"))
        .stderr_is(not_due("too_soon: 2.0 h of 2.5 h"))
        .run();

    let home = ClaudeHome::new();
    home.consolidated(hours(48));
    home.add_session(&session_id(1), hours(50));
    home.add_session(&session_id(2), hours(3));
    home.add_session(&session_id(3), hours(1));
    let out = gate(&home, &["--scan-interval", "0"])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "too_few_sessions"))
        .stderr_any("checked below against the time stdout names")
        .run();
    let since = out.json()["gate"]["last_consolidated_at"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        out.stderr,
        not_due(&format!("too_few_sessions: 2 of 5 sessions since {since}"))
    );
    gate(
        &home,
        &[
            "--scan-interval",
            "0",
            "--min-sessions",
            "3",
            "--session",
            &session_id(3),
        ],
    )
    .code(1)
    .stdout_json(|out| assert_eq!(out["gate"]["session_count"], 1))
    .stderr_is(not_due(&format!(
        "too_few_sessions: 1 of 3 sessions since {since}"
    )))
    .run();
    let home = ClaudeHome::new();
    gate(&home, &["--scan-interval", "0", "--min-sessions", "1"])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["session_count"], 0))
        .stderr_is(not_due(
            "too_few_sessions: 0 of 1 session (never consolidated)",
        ))
        .run();

    let home = ClaudeHome::new();
    home.write(
        "home/.claude/settings.json",
        r#"{"autoDreamEnabled": false}"#,
    );
    for (args, err) in [
        (&[][..], not_due("disabled: auto_dream_off")),
        (&["-q"], String::new()),
    ] {
        gate(&home, args)
            .code(1)
            .stdout_json(|out| assert_eq!(out["gate"]["reason"], "disabled"))
            .stderr_is(err)
            .run();
    }
}

#[test]
fn a_due_gate_is_silent_and_verbose_says_which_checks_passed() {
    let home = ClaudeHome::new();
    six_sessions(&home);
    gate(&home, &[])
        .success()
        .stdout_json(|out| assert_eq!(out["gate"]["due"], true))
        .stderr_empty()
        .run();
    gate(&home, &["-v"])
        .success()
        .stdout_json(|out| assert_eq!(out["gate"]["due"], true))
        .stderr_with(|err| {
            for line in [
                "dream-gate: enabled: auto memory and auto dream are on",
                "dream-gate: time: never consolidated",
                "dream-gate: throttle: no earlier scan, interval 10m",
                "dream-gate: due: 6 of 5 sessions (never consolidated)",
            ] {
                assert!(err.lines().any(|l| l == line), "{line:?} not in {err}");
            }
        })
        .run();

    // Not due: the checks that passed, then the reason.
    home.consolidated(hours(30));
    let out = gate(&home, &["-v", "--min-sessions", "7"])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "too_few_sessions"))
        .stderr_any("checked below against the time stdout names")
        .run();
    let since = out.json()["gate"]["last_consolidated_at"]
        .as_str()
        .unwrap()
        .to_string();
    let lines: Vec<&str> = out.stderr.lines().collect();
    let time = format!("dream-gate: time: 30.0 h of 24 h since the last consolidation at {since}");
    assert!(lines.contains(&time.as_str()), "{}", out.stderr);
    assert_eq!(
        lines.last().copied(),
        Some(
            format!("dream-gate: not due: too_few_sessions: 6 of 7 sessions since {since}")
                .as_str()
        ),
        "{}",
        out.stderr
    );
    gate(&home, &["-v", "--min-sessions", "7"])
        .code(1)
        .stdout_json(|out| assert_eq!(out["gate"]["reason"], "throttled"))
        .stderr_with(|err| {
            assert!(
                err.lines()
                    .any(|l| l.starts_with("dream-gate: time: 30.0 h of 24 h")),
                "{err}"
            );
            assert!(
                err.trim_end()
                    .lines()
                    .last()
                    .unwrap()
                    .contains("not due: throttled"),
                "{err}"
            );
        })
        .run();
    gate(&home, &["-v", "--scan-interval", "0"])
        .success()
        .stdout_json(|out| assert_eq!(out["gate"]["due"], true))
        .stderr_contains("dream-gate: throttle: off (--scan-interval 0)")
        .run();
}

#[test]
fn session_is_the_flag_and_current_session_its_alias() {
    let home = ClaudeHome::new();
    let sessions = six_sessions(&home);
    for flag in ["--session", "--current-session"] {
        gate(
            &home,
            &[
                flag,
                &sessions[5],
                "--min-sessions",
                "6",
                "--scan-interval",
                "0",
            ],
        )
        .code(1)
        .stdout_json(|out| {
            assert_eq!(
                out["gate"]["current_session"],
                sessions[5].as_str(),
                "{flag}"
            );
            assert_eq!(out["gate"]["session_count"], 5, "{flag}");
        })
        .stderr_is(not_due(
            "too_few_sessions: 5 of 6 sessions (never consolidated)",
        ))
        .run();
    }
    gate(&home, &["--help"])
        .success()
        .stdout_with(|help| {
            assert!(help.contains("--session <ID>"), "{help}");
            assert!(help.contains("current-session"), "{help}");
        })
        .stderr_empty()
        .run();
}

#[test]
fn quiet_usage_errors_print_nothing_on_stderr() {
    let home = ClaudeHome::new();
    gate(&home, &["-q", "--bogus"])
        .code(2)
        .stdout_json(|out| assert_eq!(out["error"]["kind"], "usage"))
        .stderr_empty()
        .run();
}

#[test]
fn non_session_files_are_ignored() {
    let home = ClaudeHome::new();
    six_sessions(&home);
    let dir = home.transcripts_dir();
    std::fs::write(dir.join("notes.jsonl"), "x").unwrap();
    std::fs::create_dir_all(dir.join(format!("{}/subagents", session_id(9)))).unwrap();
    std::fs::write(
        dir.join(format!(
            "{}/subagents/{}.jsonl",
            session_id(9),
            session_id(10)
        )),
        "x",
    )
    .unwrap();
    std::fs::write(dir.join(format!("{}.jsonl.bak", session_id(11))), "x").unwrap();
    gate(&home, &[])
        .success()
        .stdout_json(|out| assert_eq!(out["gate"]["session_count"], 6))
        .stderr_empty()
        .run();
}

/// The plugin's Stop hook (plugin/scripts/stop.sh) in `home`, the built binaries first on
/// PATH, with no model credential unless the caller sets one.
fn plugin_stop_hook<'a>(home: &ClaudeHome) -> Run<'a> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin/scripts/stop.sh");
    let bin = bin_path("dream-gate").parent().unwrap().to_path_buf();
    let mut cmd = home.process("sh");
    cmd.arg(script).env(
        "PATH",
        format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    );
    // No Claude Code client unless the caller names one (a `claude` on this machine's PATH
    // must not change what auto chooses).
    cmd.env("DREAMKIT_CLAUDE_BIN", home.root.join("no-claude-here"));
    let payload = json!({
        "hook_event_name": "Stop",
        "session_id": session_id(99),
        "cwd": home.project,
    });
    Run::command(cmd, "plugin/scripts/stop.sh").stdin(payload.to_string())
}

/// Without a model credential the plugin's Stop hook consolidates with the rules engine (no
/// model, no key), and says so in dream.log once a day: a dated stamp keeps the day it said so.
#[test]
fn the_plugin_stop_hook_without_a_credential_runs_the_rules_and_says_so_once_a_day() {
    let home = ClaudeHome::new();
    six_sessions(&home);
    std::fs::create_dir_all(home.memory_dir()).unwrap();
    let index = home.memory_dir().join("MEMORY.md");
    std::fs::write(
        &index,
        "# Memory\n- Deploy on Fridays.\n- deploy on fridays!\n",
    )
    .unwrap();
    let dir = home.state_home.join("dreamkit");
    let log = dir.join("dream.log");
    let tasks = home.state_dir().join("tasks");
    // Completed and released: the lock file is back to empty.
    let finished = || {
        std::fs::read_dir(&tasks).ok().is_some_and(|entries| {
            entries.filter_map(Result::ok).any(|e| {
                std::fs::read(e.path())
                    .ok()
                    .and_then(|t| serde_json::from_slice::<Value>(&t).ok())
                    .is_some_and(|record| record["status"] == "completed")
            })
        }) && std::fs::metadata(home.lock_file()).is_ok_and(|m| m.len() == 0)
    };
    plugin_stop_hook(&home)
        .code(0)
        .stdout_empty()
        .stderr_empty()
        .run();
    crate::support::wait::busy_until("the background rules run", finished);
    assert_eq!(
        std::fs::read_to_string(&index).unwrap(),
        "# Memory\n- Deploy on Fridays.\n"
    );
    for _ in 0..2 {
        plugin_stop_hook(&home)
            .code(0)
            .stdout_empty()
            .stderr_empty()
            .run();
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let said =
        "dreamkit: no model credential (ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN is not set \
                in the hooks' environment) and no Claude Code client (DREAMKIT_CLAUDE_BIN, or \
                `claude` on PATH): the rules engine consolidates, with no model; said once a day";
    assert_eq!(text.matches(said).count(), 1, "{text}");
    let stamp = dir.join("engine-said");
    let today = std::fs::read_to_string(&stamp).unwrap();
    assert_eq!(today.len(), "2026-12-04 rules\n".len(), "{today:?}");
    assert!(today.ends_with(" rules\n"), "{today:?}");
    // Another day, and a consolidation due again (the choice is made, and said, only when
    // one is due): said once more.
    std::fs::write(&stamp, "2000-01-01 rules\n").unwrap();
    home.consolidated(hours(48));
    plugin_stop_hook(&home)
        .code(0)
        .stdout_empty()
        .stderr_empty()
        .run();
    assert_eq!(
        std::fs::read_to_string(&log).unwrap().matches(said).count(),
        2
    );
    assert_eq!(std::fs::read_to_string(&stamp).unwrap(), today);

    // For an OpenAI-compatible server it is OPENAI_API_KEY (empty: a server that needs none).
    let home = ClaudeHome::new();
    six_sessions(&home);
    plugin_stop_hook(&home)
        .env("DREAMKIT_PROVIDER", "openai")
        .env("ANTHROPIC_API_KEY", "not the one openai reads")
        .code(0)
        .stdout_empty()
        .stderr_empty()
        .run();
    let log = home.state_home.join("dreamkit/dream.log");
    assert!(std::fs::read_to_string(&log)
        .unwrap()
        .contains("(OPENAI_API_KEY is not set"));
    // With it, and nothing due: the gate ran (its scan stamp) and nothing else, so the log
    // has nothing to say.
    let home = ClaudeHome::new();
    std::fs::create_dir_all(home.transcripts_dir()).unwrap();
    plugin_stop_hook(&home)
        .env("DREAMKIT_PROVIDER", "openai")
        .env("OPENAI_API_KEY", "")
        .code(0)
        .stdout_empty()
        .stderr_empty()
        .run();
    assert!(home.state_dir().join("last-scan").is_file());
    let log = home.state_home.join("dreamkit/dream.log");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "");

    // DREAMKIT_PLUGIN_DREAM=0 turns the consolidation off (the commands stay): nothing runs,
    // nothing is written, credential or not.
    let home = ClaudeHome::new();
    six_sessions(&home);
    for key in [None, Some("sk-test")] {
        let mut run = plugin_stop_hook(&home).env("DREAMKIT_PLUGIN_DREAM", "0");
        if let Some(key) = key {
            run = run.env("ANTHROPIC_API_KEY", key);
        }
        run.code(0).stdout_empty().stderr_empty().run();
    }
    assert!(!home.state_home.exists());
    assert!(!home.lock_file().exists());
}

/// With no API key, auto consolidates through the user's own Claude Code; when it answers
/// "not logged in" the plugin remembers that for the day and uses the rules engine instead.
#[test]
fn the_plugin_stop_hook_without_a_key_uses_the_users_client_until_it_says_logged_out() {
    let home = ClaudeHome::new();
    six_sessions(&home);
    std::fs::create_dir_all(home.memory_dir()).unwrap();
    let index = home.memory_dir().join("MEMORY.md");
    std::fs::write(
        &index,
        "# Memory\n- Deploy on Fridays.\n- deploy on fridays!\n",
    )
    .unwrap();
    let client = crate::support::claude_code::stand_in_answering(
        &home,
        &json!({"type": "result", "subtype": "success", "is_error": true,
            "api_error_status": null, "result": "Not logged in · Please run /login"}),
        1,
    );
    let dir = home.state_home.join("dreamkit");
    let stamp = dir.join("claude-logged-out");
    plugin_stop_hook(&home)
        .env("DREAMKIT_CLAUDE_BIN", &client)
        .code(0)
        .stdout_empty()
        .stderr_empty()
        .run();
    crate::support::wait::busy_until("the logged-out day to be remembered", || stamp.is_file());
    let args = std::fs::read_to_string(home.root.join("claude-args")).unwrap();
    assert!(
        args.starts_with("-p --output-format stream-json --verbose"),
        "{args}"
    );
    assert!(args.contains("--mcp-config"), "{args}");
    let log = std::fs::read_to_string(dir.join("dream.log")).unwrap();
    assert!(
        log.contains("your own Claude Code answers (--provider claude, your login)"),
        "{log}"
    );
    assert!(log.contains("\"kind\":\"auth\""), "{log}");
    // The failed run rolled back: memory untouched, the lock's time too.
    assert_eq!(
        std::fs::read_to_string(&index).unwrap(),
        "# Memory\n- Deploy on Fridays.\n- deploy on fridays!\n"
    );
    // Today the rules consolidate instead, and the log says why.
    let tasks = home.state_dir().join("tasks");
    plugin_stop_hook(&home)
        .env("DREAMKIT_CLAUDE_BIN", &client)
        .code(0)
        .stdout_empty()
        .stderr_empty()
        .run();
    crate::support::wait::busy_until("the rules run", || {
        std::fs::read_to_string(&index).is_ok_and(|t| t == "# Memory\n- Deploy on Fridays.\n")
    });
    let log = std::fs::read_to_string(dir.join("dream.log")).unwrap();
    assert!(
        log.contains("Claude Code said today that it is not logged in"),
        "{log}"
    );
    assert_eq!(
        std::fs::read_to_string(home.root.join("claude-args")).unwrap(),
        args,
        "the client was asked again"
    );
    assert!(tasks.is_dir());
}

/// DREAMKIT_PLUGIN_ENGINE chooses over auto: off does nothing, rules needs no credential even
/// with one set, and a value it does not know is said on stderr and taken as rules.
#[test]
fn the_plugin_engine_variable_chooses() {
    let home = ClaudeHome::new();
    six_sessions(&home);
    plugin_stop_hook(&home)
        .env("DREAMKIT_PLUGIN_ENGINE", "off")
        .env("ANTHROPIC_API_KEY", "sk-test")
        .code(0)
        .stdout_empty()
        .stderr_empty()
        .run();
    assert!(!home.lock_file().exists(), "off ran the gate's pipeline");
    // off wins over the older engine switch too.
    plugin_stop_hook(&home)
        .env("DREAMKIT_PLUGIN_ENGINE", "off")
        .env("DREAMKIT_DREAM_ENGINE", "rules")
        .code(0)
        .stdout_empty()
        .stderr_empty()
        .run();
    assert!(!home.lock_file().exists(), "off ran the rules");
    assert!(!home.state_home.exists(), "off wrote state");
    std::fs::create_dir_all(home.memory_dir()).unwrap();
    let index = home.memory_dir().join("MEMORY.md");
    std::fs::write(&index, "# Memory\n- a\n- a\n").unwrap();
    plugin_stop_hook(&home)
        .env("DREAMKIT_PLUGIN_ENGINE", "rules")
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .code(0)
        .stdout_empty()
        .stderr_empty()
        .run();
    crate::support::wait::busy_until("the rules run", || {
        std::fs::read_to_string(&index).is_ok_and(|t| t == "# Memory\n- a\n")
    });
    let home = ClaudeHome::new();
    plugin_stop_hook(&home)
        .env("DREAMKIT_PLUGIN_ENGINE", "sometimes")
        .code(0)
        .stdout_empty()
        .stderr_is(
            "dreamkit: DREAMKIT_PLUGIN_ENGINE must be auto, api, claude, rules or off, not 'sometimes'; using rules\n",
        )
        .run();
}
