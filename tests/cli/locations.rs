//! Locations every tool takes from flags, hook payloads and envelopes: a project directory
//! that does not exist, a path that no system call or no JSON document could carry, and hook
//! fields of the wrong type are bad input (exit 2) with nothing written; the shared vocabulary
//! of flags and environment variables.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::transcript::{Transcript, SESSION};
use crate::support::*;

const KEY: &str = "sk-ant-test-locations";

/// Every file and directory under `root` with its content, to prove that nothing was written.
fn tree(root: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .flatten()
    {
        let path = entry.into_path();
        let meta = std::fs::symlink_metadata(&path).expect("lstat");
        if meta.is_dir() {
            out.push((path, None));
        } else {
            let content = std::fs::read(&path).ok();
            out.push((path, content));
        }
    }
    out.sort();
    out
}

/// What a gate that is not due for want of sessions says, in a home that never consolidated.
const TOO_FEW: &str =
    "dream-gate: not due: too_few_sessions: 0 of 5 sessions (never consolidated)\n";

/// What `tool` prints on stderr for a usage error whose one line is `line`.
fn clap_error(tool: &str, line: &str) -> String {
    usage_stderr(tool, line)
}

/// The refusal every case here expects: exit 2, `bad_input`, one line on stderr, and the
/// temporary home exactly as it was.
fn assert_refused(home: &ClaudeHome, what: &str, run: Run<'_>, needle: &str) {
    let before = tree(&home.root);
    let ran = run
        .code(2)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "bad_input", "{what}: {doc}");
            let message = doc["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(needle),
                "{what}: {message:?} lacks {needle:?}"
            );
        })
        .stderr_with(|err| assert_eq!(err.lines().count(), 1, "{what}: {err:?}"))
        .run();
    // The one line is the tool's name and the document's message.
    let message = ran.json()["error"]["message"].as_str().unwrap().to_string();
    let (tool, said) = ran.stderr.split_once(": ").expect("tool: message");
    assert!(
        ["dream-gate", "dream-lock", "recap", "feedback"].contains(&tool),
        "{what}: {:?}",
        ran.stderr
    );
    assert_eq!(said, format!("{message}\n"), "{what}");
    assert_eq!(tree(&home.root), before, "{what}: something was written");
}

/// A transcript with one real turn, for recap.
fn transcript(home: &ClaudeHome) -> PathBuf {
    let path = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
    Transcript::started(Duration::from_secs(600))
        .user("Fix the gate.")
        .assistant("Fixed.")
        .write(&path);
    path
}

/// Each binary and dream-lock subcommand that takes a location.
const TOOLS: &[&str] = &[
    "dream-gate",
    "acquire",
    "status",
    "release",
    "exec",
    "recap",
];

/// `what` from [`TOOLS`] with the `extra` flags, ready to get past everything but them (recap
/// needs [`transcript`] written first; its model server is a closed port).
fn tool<'a>(home: &ClaudeHome, what: &str, extra: &[&OsStr]) -> Run<'a> {
    let mut cmd = match what {
        "dream-gate" => Run::new(home, "dream-gate"),
        "recap" => Run::new(home, "recap")
            .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
            .env("ANTHROPIC_API_KEY", KEY)
            .env("DREAMKIT_RETRY_BASE_MS", "1")
            .args(["--retries", "0", "--transcript"])
            .arg(home.transcripts_dir().join(format!("{SESSION}.jsonl"))),
        sub => {
            let cmd = Run::new(home, "dream-lock").arg(sub);
            if sub == "release" {
                cmd.args([
                    "--token",
                    "1:1",
                    "--prior-mtime",
                    "0",
                    "--outcome",
                    "failed",
                ])
            } else {
                cmd
            }
        }
    };
    cmd = cmd.args(extra);
    if what == "exec" {
        cmd = cmd.args(["--", "touch"]).arg(home.root.join("exec-ran"));
    }
    cmd
}

/// Every tool with the flags `extra` is refused, naming `needle`.
fn each_tool_with_flags(home: &ClaudeHome, extra: &[&OsStr], needle: &str) {
    transcript(home);
    for what in TOOLS {
        assert_refused(home, what, tool(home, what, extra), needle);
    }
}

/// Every tool with `stdin` is refused, naming `needle`.
fn each_tool_with_stdin(home: &ClaudeHome, stdin: &str, needle: &str) {
    transcript(home);
    for what in TOOLS {
        let cmd = tool(home, what, &[]).stdin(stdin);
        assert_refused(home, &format!("{what} {stdin}"), cmd, needle);
    }
}

#[test]
fn a_cwd_that_is_not_an_existing_directory_is_refused_by_every_tool() {
    let home = ClaudeHome::new();
    let missing = home.root.join("no-such-project");
    let file = home.write("plain-file", "x");
    for (dir, needle) in [
        (missing.as_os_str(), "does not exist"),
        (file.as_os_str(), "is not a directory"),
        (OsStr::new("/nonexistent"), "does not exist"),
    ] {
        each_tool_with_flags(&home, &["--cwd".as_ref(), dir], needle);
    }
    assert!(!home.config.join("projects/-nonexistent").exists());
}

#[test]
fn a_hook_payload_cwd_that_does_not_exist_is_refused_by_every_tool() {
    let home = ClaudeHome::new();
    let t = transcript(&home);
    let missing = home.root.join("gone");
    let payload = json!({
        "hook_event_name": "Stop",
        "session_id": SESSION,
        "transcript_path": t,
        "cwd": missing,
    })
    .to_string();
    each_tool_with_stdin(&home, &payload, "the hook payload's cwd");
    let queue = Run::new(&home, "feedback")
        .args(["queue", "--type", "bug", "--title", "t", "--details", "d"])
        .stdin(payload.clone());
    assert_refused(&home, "feedback queue", queue, "does not exist");
    // The same fields without hook_event_name are read the same way.
    let bare = json!({"cwd": missing}).to_string();
    let gate = Run::new(&home, "dream-gate").stdin(bare);
    assert_refused(&home, "bare cwd", gate, "does not exist");
}

#[test]
fn an_envelope_project_cwd_that_does_not_exist_is_refused() {
    let home = ClaudeHome::new();
    let envelope = json!({
        "project": {"cwd": home.root.join("gone")},
        "lock": {"acquired": true, "token": "1:1", "prior_mtime": 0},
        "run": {"status": "failed"},
    })
    .to_string();
    let mut cmds = vec![("dream-gate", Run::new(&home, "dream-gate"))];
    for sub in ["acquire", "release", "exec"] {
        let mut cmd = Run::new(&home, "dream-lock").arg(sub);
        if sub == "exec" {
            cmd = cmd.args(["--", "touch"]).arg(home.root.join("exec-ran"));
        }
        cmds.push((sub, cmd));
    }
    for (what, cmd) in cmds {
        assert_refused(&home, what, cmd.stdin(envelope.clone()), "project.cwd");
    }
}

#[test]
fn hook_fields_of_the_wrong_type_are_bad_input_with_or_without_hook_event_name() {
    let home = ClaudeHome::new();
    for bad in [
        json!({"cwd": 5}),
        json!({"hook_event_name": "Stop", "cwd": 5}),
        json!({"session_id": 7, "trace": 1}),
        json!({"hook_event_name": "Stop", "transcript_path": ["x"]}),
        json!({"transcript_path": {"a": 1}}),
        json!({"hook_event_name": 3}),
    ] {
        let field = ["hook_event_name", "cwd", "session_id", "transcript_path"]
            .into_iter()
            .find(|k| bad.get(k).is_some_and(|v| !v.is_string()))
            .expect("a mistyped field");
        each_tool_with_stdin(&home, &bad.to_string(), field);
    }
    // feedback queue reads draft fields (cwd is one) or a hook payload.
    for bad in [
        json!({"cwd": 5}),
        json!({"hook_event_name": "Stop", "cwd": 5}),
    ] {
        let queue = Run::new(&home, "feedback")
            .args(["queue", "--type", "bug", "--title", "t", "--details", "d"])
            .stdin(bad.to_string());
        assert_refused(&home, &format!("feedback {bad}"), queue, "");
    }
}

#[test]
fn hook_fields_without_hook_event_name_name_the_project() {
    let home = ClaudeHome::new();
    let elsewhere = home.root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    Run::new(&home, "dream-gate")
        .current_dir(&elsewhere)
        .stdin(json!({"cwd": home.project, "session_id": "s-1", "trace": 1}).to_string())
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["project"]["cwd"], home.project.display().to_string());
            assert_eq!(doc["gate"]["current_session"], "s-1");
            // Still an envelope: its keys pass through.
            assert_eq!(doc["trace"], 1);
        })
        .stderr_is(TOO_FEW)
        .run();
}

#[test]
fn a_cwd_with_a_nul_byte_is_bad_input_everywhere() {
    let home = ClaudeHome::new();
    let payload = json!({"hook_event_name": "Stop", "cwd": "/tmp\u{0}x"}).to_string();
    each_tool_with_stdin(&home, &payload, "NUL");
    let queue = Run::new(&home, "feedback")
        .args(["queue", "--type", "bug", "--title", "t", "--details", "d"])
        .stdin(payload);
    assert_refused(&home, "feedback queue", queue, "NUL");
    // A draft's own cwd too: it names the project whose settings apply.
    let queue = Run::new(&home, "feedback")
        .arg("queue")
        .stdin(json!({"type": "bug", "title": "t", "details": "d", "cwd": "/a\u{0}b"}).to_string());
    assert_refused(&home, "draft cwd", queue, "NUL");
}

#[test]
fn a_name_longer_than_the_file_system_allows_is_bad_input_not_an_environment_failure() {
    let home = ClaudeHome::new();
    let long = home.root.join("n".repeat(300));
    each_tool_with_flags(&home, &["--cwd".as_ref(), long.as_os_str()], "255");
    each_tool_with_flags(&home, &["--memory-dir".as_ref(), long.as_os_str()], "255");
    each_tool_with_flags(
        &home,
        &["--transcripts-dir".as_ref(), long.as_os_str()],
        "255",
    );
    let payload = json!({"hook_event_name": "Stop", "cwd": long}).to_string();
    each_tool_with_stdin(&home, &payload, "255");
    let recap = Run::new(&home, "recap")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .env("ANTHROPIC_API_KEY", KEY)
        .args(["--retries", "0", "--transcript"])
        .arg(long.join("t.jsonl"));
    assert_refused(&home, "recap --transcript", recap, "255");
    let config = Run::new(&home, "feedback")
        .arg("list")
        .env("CLAUDE_CONFIG_DIR", &long);
    assert_refused(
        &home,
        "feedback CLAUDE_CONFIG_DIR",
        config,
        "CLAUDE_CONFIG_DIR",
    );
}

/// A file name that is not UTF-8: the JSON output could only print it with U+FFFD, and a later
/// stage would then act on another path (a stray directory, a lock it cannot find).
fn not_utf8(home: &ClaudeHome, name: &[u8]) -> PathBuf {
    home.root.join(std::ffi::OsStr::from_bytes(name))
}

#[test]
fn paths_the_json_output_could_not_name_exactly_are_refused_at_input() {
    let home = ClaudeHome::new();
    let odd = not_utf8(&home, b"caf\xe9-proj");
    std::fs::create_dir_all(&odd).unwrap();
    each_tool_with_flags(&home, &["--cwd".as_ref(), odd.as_os_str()], "UTF-8");
    let memory = not_utf8(&home, b"mem\xff");
    each_tool_with_flags(
        &home,
        &["--memory-dir".as_ref(), memory.as_os_str()],
        "UTF-8",
    );
    assert!(!memory.exists());

    // The same directory as the process's current directory, and as the config dir.
    let gate = Run::new(&home, "dream-gate").current_dir(&odd);
    assert_refused(&home, "current dir", gate, "the current directory");
    let gate = Run::new(&home, "dream-gate").env("CLAUDE_CONFIG_DIR", not_utf8(&home, b"cfg\xff"));
    assert_refused(&home, "CLAUDE_CONFIG_DIR", gate, "CLAUDE_CONFIG_DIR");
    let gate = Run::new(&home, "dream-gate")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env("HOME", not_utf8(&home, b"home\xff"));
    assert_refused(&home, "HOME", gate, "HOME");
    let gate = Run::new(&home, "dream-gate").env("XDG_STATE_HOME", not_utf8(&home, b"state\xff"));
    assert_refused(&home, "XDG_STATE_HOME", gate, "XDG_STATE_HOME");
    let lock = Run::new(&home, "dream-lock").arg("acquire").env(
        "CLAUDE_COWORK_MEMORY_PATH_OVERRIDE",
        not_utf8(&home, b"cowork\xff"),
    );
    assert_refused(
        &home,
        "cowork override",
        lock,
        "CLAUDE_COWORK_MEMORY_PATH_OVERRIDE",
    );
}

#[test]
fn feedback_with_a_config_dir_that_is_not_utf8_refuses_before_writing_and_never_panics() {
    let home = ClaudeHome::new();
    let config = not_utf8(&home, b"bad\xffdir");
    std::fs::create_dir_all(config.join("feedback/drafts")).unwrap();
    std::fs::write(config.join("feedback/drafts/x.json"), "not a draft").unwrap();
    let fields = r#"{"type":"bug","title":"t","details":"d"}"#;
    let queue = Run::new(&home, "feedback")
        .arg("queue")
        .env("CLAUDE_CONFIG_DIR", &config)
        .stdin(fields);
    assert_refused(&home, "queue", queue, "CLAUDE_CONFIG_DIR");
    for args in [&["list"][..], &["show", "x"], &["discard", "x"]] {
        let cmd = Run::new(&home, "feedback")
            .args(args)
            .env("CLAUDE_CONFIG_DIR", &config);
        assert_refused(&home, &args.join(" "), cmd, "UTF-8");
    }
}

#[test]
fn a_draft_file_whose_name_is_not_utf8_is_listed_without_a_panic() {
    let home = ClaudeHome::new();
    let drafts = home.config.join("feedback/drafts");
    std::fs::create_dir_all(&drafts).unwrap();
    std::fs::write(
        drafts.join(std::ffi::OsStr::from_bytes(b"odd\xff.json")),
        "{}",
    )
    .unwrap();
    Run::new(&home, "feedback")
        .arg("list")
        .success()
        .stdout_json(|doc| {
            let listed = &doc["drafts"][0];
            assert!(
                listed["path"]
                    .as_str()
                    .unwrap()
                    .ends_with("odd\u{fffd}.json"),
                "{listed}"
            );
            assert!(listed["error"].is_string(), "{listed}");
        })
        .stderr_empty()
        .run();
}

#[test]
fn a_symlinked_cwd_names_the_physical_directory() {
    let home = ClaudeHome::new();
    std::os::unix::fs::symlink(&home.project, home.root.join("link")).unwrap();
    for dir in ["link", "link/", "./link/../link"] {
        Run::new(&home, "dream-gate")
            .current_dir(&home.root)
            .args(["--scan-interval", "0", "--cwd", dir])
            .code(1)
            .stdout_json(|doc| {
                assert_eq!(
                    doc["project"]["cwd"],
                    home.project.display().to_string(),
                    "{dir}"
                );
                assert_eq!(doc["project"]["slug"], home.slug(), "{dir}");
            })
            .stderr_is(TOO_FEW)
            .run();
    }
}

// One vocabulary (flags and environment variables).

#[test]
fn a_bad_environment_variable_is_named_as_itself() {
    let home = ClaudeHome::new();
    for (tool, var, value) in [
        ("dream-gate", "DREAMKIT_MIN_HOURS", "abc"),
        ("dream-gate", "DREAMKIT_MIN_SESSIONS", "many"),
        ("recap", "DREAMKIT_PROVIDER", "gpt"),
        ("dream-gate", "DREAMKIT_LOCK_URL", "redis://x"),
    ] {
        let mut cmd = Run::new(&home, tool).env(var, value);
        if tool == "recap" {
            cmd = cmd.args(["--transcript", "t.jsonl"]);
        }
        let ran = cmd
            .code(2)
            .stdout_json(|doc| {
                assert_eq!(doc["error"]["kind"], "usage", "{var}");
                let message = doc["error"]["message"].as_str().unwrap();
                assert!(message.starts_with(&format!("{var}=")), "{message}");
                assert!(
                    !["--min", "--provider", "--backend"]
                        .iter()
                        .any(|flag| message.contains(flag)),
                    "{message}"
                );
            })
            .stderr_with(|err| {
                assert!(err.contains(var), "{err}");
                assert!(err.starts_with(&format!("{tool}: {var}=")), "{err}");
            })
            .run();
        // The usage error's one line: the message and where to read more.
        let message = ran.json()["error"]["message"].as_str().unwrap().to_string();
        assert_eq!(ran.stderr, usage_stderr(tool, &message), "{var}");
    }
    // The wrapped parsers still list their values for help and completions.
    Run::new(&home, "recap")
        .arg("--help")
        .success()
        .stdout_with(|help| {
            assert!(
                help.contains("[possible values: anthropic, openai, claude]"),
                "{help}"
            );
        })
        .stderr_empty()
        .run();
    // The flag wins over a bad variable; an empty variable is unset.
    Run::new(&home, "dream-gate")
        .env("DREAMKIT_MIN_HOURS", "abc")
        .env("DREAMKIT_MIN_SESSIONS", "")
        .args(["--min-hours", "1", "--scan-interval", "0"])
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["gate"]["min_hours"], 1.0);
            assert_eq!(doc["gate"]["min_sessions"], 5);
        })
        .stderr_is(TOO_FEW)
        .run();
}

#[test]
fn min_hours_takes_hours_or_a_duration() {
    let home = ClaudeHome::new();
    for (value, hours) in [
        ("24", 24.0),
        ("24h", 24.0),
        ("90m", 1.5),
        ("0.5", 0.5),
        ("1800s", 0.5),
    ] {
        Run::new(&home, "dream-gate")
            .args(["--scan-interval", "0", "--min-hours", value])
            .code(1)
            .stdout_json(|doc| assert_eq!(doc["gate"]["min_hours"], hours, "{value}"))
            .stderr_is(TOO_FEW)
            .run();
        Run::new(&home, "dream-gate")
            .env("DREAMKIT_MIN_HOURS", value)
            .args(["--scan-interval", "0"])
            .code(1)
            .stdout_json(|doc| assert_eq!(doc["gate"]["min_hours"], hours, "env {value}"))
            .stderr_is(TOO_FEW)
            .run();
    }
    Run::new(&home, "dream-gate")
        .args(["--min-hours", "2d"])
        .code(2)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"].as_str(), Some("usage")))
        .stderr_is(clap_error(
            "dream-gate",
            "invalid value '2d' for '--min-hours <HOURS>': \"2d\" is not a number of hours \
             (examples: 24, 0.5, 24h, 90m)",
        ))
        .run();
}

/// Three real turns, ten minutes ago, for the away-summary gates.
fn three_turns() -> Transcript {
    Transcript::started(Duration::from_secs(600))
        .user("one")
        .assistant("a")
        .user("two")
        .assistant("b")
        .user("three")
        .assistant("c")
}

struct Recap {
    home: ClaudeHome,
    api: FakeApi,
    transcript: PathBuf,
}

impl Recap {
    fn new(t: &Transcript) -> Recap {
        let home = ClaudeHome::new();
        let transcript = home.transcripts_dir().join(format!("{SESSION}.jsonl"));
        t.write(&transcript);
        Recap {
            home,
            api: FakeApi::start(),
            transcript,
        }
    }

    /// recap on the transcript with `args`; the caller says what it must print.
    fn run<'a>(&self, args: &[&str]) -> Run<'a> {
        Run::new(&self.home, "recap")
            .env("ANTHROPIC_BASE_URL", self.api.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .env("DREAMKIT_RETRY_BASE_MS", "1")
            .arg("--transcript")
            .arg(&self.transcript)
            .args(args)
    }
}

#[test]
fn recap_durations_take_units_beside_the_millisecond_flags() {
    let r = Recap::new(&three_turns());
    // delay = min(max(10 s, 30 s), 0.8 x 20 s) = 16 s.
    let gates = [
        "--auto",
        "--delay",
        "10s",
        "--cache-ttl",
        "20s",
        "--cache-age",
        "0",
    ];
    r.run(&[&gates[..], &["--away", "15.999s"]].concat())
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["reason"], "not_away_long_enough"))
        .stderr_is("recap: skipped: not_away_long_enough: away 15999 ms; the delay is 16000 ms\n")
        .run();
    // Plain numbers are seconds; minutes and hours work too.
    r.run(&["--auto", "--cache-age", "55m", "--cache-ttl", "1h"])
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["reason"], "cache_cold", "{doc}"))
        .stderr_is("recap: skipped: cache_cold: cache is 3300000 ms old; the limit is 3240000 ms\n")
        .run();
    r.run(&["--auto", "--away", "100", "--delay", "2m"])
        .code(1)
        .stdout_json(|doc| assert_eq!(doc["reason"], "not_away_long_enough", "{doc}"))
        .stderr_is("recap: skipped: not_away_long_enough: away 100000 ms; the delay is 120000 ms\n")
        .run();
    // Each pair conflicts.
    for pair in [
        ["--away", "1m", "--away-ms", "60000"],
        ["--delay", "1m", "--delay-ms", "60000"],
        ["--cache-ttl", "1h", "--cache-ttl-ms", "3600000"],
        ["--cache-age", "1m", "--cache-age-ms", "60000"],
    ] {
        let (long, ms) = (pair[0], pair[2]);
        let value = "<DURATION>";
        r.run(&pair)
            .code(2)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "usage", "{pair:?}"))
            .stderr_is(clap_error(
                "recap",
                &format!("the argument '{long} {value}' cannot be used with '{ms} <MS>'"),
            ))
            .run();
    }
    // Last: a summary that is written ends the away-summary gates' interest.
    r.api.push(Reply::anthropic_text("You were testing."));
    r.run(&[&gates[..], &["--away", "16s"]].concat())
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["status"], "ok");
            assert_eq!(doc["text"], "You were testing.");
            assert!(doc["record_uuid"].is_string(), "{doc}");
        })
        .stderr_empty()
        .run();
    assert_eq!(r.api.requests().len(), 1);
}

#[test]
fn recap_timeout_zero_means_no_per_request_timeout() {
    let r = Recap::new(&three_turns());
    r.api.push(Reply::After(
        // Kept: a slow answer is the thing tested (no per-request timeout cuts it).
        Box::new(|| std::thread::sleep(Duration::from_millis(300))),
        Box::new(Reply::anthropic_text("You were waiting.")),
    ));
    r.run(&["--timeout", "0", "--retries", "0", "--deadline", "1m"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["text"], "You were waiting."))
        .stderr_empty()
        .run();
}

#[test]
fn counts_read_in_the_singular_and_the_plural() {
    let one = Transcript::started(Duration::from_secs(600))
        .user("only one")
        .assistant("ok");
    let r = Recap::new(&one);
    r.run(&["--auto"])
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["reason"], "too_few_turns", "{doc}");
            assert_eq!(
                doc["message"],
                "1 real user turn; the first summary needs 3"
            );
        })
        .stderr_is("recap: skipped: too_few_turns: 1 real user turn; the first summary needs 3\n")
        .run();
    let two = Transcript::started(Duration::from_secs(600))
        .user("one")
        .user("two")
        .assistant("ok");
    let r = Recap::new(&two);
    r.run(&["--auto"])
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(
                doc["message"],
                "2 real user turns; the first summary needs 3"
            );
        })
        .stderr_is("recap: skipped: too_few_turns: 2 real user turns; the first summary needs 3\n")
        .run();
    let after = three_turns()
        .away_summary("You were testing.")
        .user("again");
    let r = Recap::new(&after);
    r.run(&["--auto"])
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(
                doc["message"],
                "1 real user turn since the last summary; needs 2"
            );
        })
        .stderr_is(
            "recap: skipped: too_few_turns: 1 real user turn since the last summary; needs 2\n",
        )
        .run();
}
