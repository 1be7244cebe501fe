//! Locations every tool takes from flags, hook payloads and envelopes: a project directory
//! that does not exist, a path that no system call or no JSON document could carry, and hook
//! fields of the wrong type are bad input (exit 2) with nothing written; the shared vocabulary
//! of flags and environment variables.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::transcript::{Transcript, SESSION};
use crate::support::*;

const KEY: &str = "sk-ant-test-locations";

/// Every file and directory under `root` with its content, to prove that nothing was written.
fn tree(root: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("dir entry").path();
            let meta = std::fs::symlink_metadata(&path).expect("lstat");
            if meta.is_dir() {
                stack.push(path.clone());
                out.push((path, None));
            } else {
                let content = std::fs::read(&path).ok();
                out.push((path, content));
            }
        }
    }
    out.sort();
    out
}

/// One run: exit code, stdout document, stderr.
struct Run {
    code: i32,
    doc: Value,
    err: String,
}

fn run(mut cmd: assert_cmd::Command) -> Run {
    let out = cmd.output().expect("run");
    Run {
        code: out.status.code().expect("exit code"),
        doc: stdout_json(&out),
        err: stderr_text(&out),
    }
}

/// The refusal every case here expects: exit 2, `bad_input`, one line on stderr, and the
/// temporary home exactly as it was.
fn assert_refused(home: &ClaudeHome, what: &str, cmd: assert_cmd::Command, needle: &str) {
    let before = tree(&home.root);
    let r = run(cmd);
    assert_eq!(r.code, 2, "{what}: {} {}", r.doc, r.err);
    assert_eq!(r.doc["error"]["kind"], "bad_input", "{what}: {}", r.doc);
    let message = r.doc["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(needle),
        "{what}: {message:?} lacks {needle:?}"
    );
    assert_eq!(r.err.lines().count(), 1, "{what}: {:?}", r.err);
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
fn tool(home: &ClaudeHome, what: &str, extra: &[&OsStr]) -> assert_cmd::Command {
    let mut cmd = match what {
        "dream-gate" => home.cmd("dream-gate"),
        "recap" => {
            let mut cmd = home.cmd("recap");
            cmd.env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
                .env("ANTHROPIC_API_KEY", KEY)
                .env("DREAMKIT_RETRY_BASE_MS", "1")
                .args(["--retries", "0", "--transcript"])
                .arg(home.transcripts_dir().join(format!("{SESSION}.jsonl")));
            cmd
        }
        sub => {
            let mut cmd = home.cmd("dream-lock");
            cmd.arg(sub);
            if sub == "release" {
                cmd.args([
                    "--token",
                    "1:1",
                    "--prior-mtime",
                    "0",
                    "--outcome",
                    "failed",
                ]);
            }
            cmd
        }
    };
    cmd.args(extra);
    if what == "exec" {
        cmd.args(["--", "touch"]).arg(home.root.join("exec-ran"));
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
        let mut cmd = tool(home, what, &[]);
        cmd.write_stdin(stdin.to_string());
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
    let mut queue = home.cmd("feedback");
    queue
        .args(["queue", "--type", "bug", "--title", "t", "--details", "d"])
        .write_stdin(payload.clone());
    assert_refused(&home, "feedback queue", queue, "does not exist");
    // The same fields without hook_event_name are read the same way.
    let bare = json!({"cwd": missing}).to_string();
    let mut gate = home.cmd("dream-gate");
    gate.write_stdin(bare);
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
    let mut cmds = vec![("dream-gate", home.cmd("dream-gate"))];
    for sub in ["acquire", "release", "exec"] {
        let mut cmd = home.cmd("dream-lock");
        cmd.arg(sub);
        if sub == "exec" {
            cmd.args(["--", "touch"]).arg(home.root.join("exec-ran"));
        }
        cmds.push((sub, cmd));
    }
    for (what, mut cmd) in cmds {
        cmd.write_stdin(envelope.clone());
        assert_refused(&home, what, cmd, "project.cwd");
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
        let mut queue = home.cmd("feedback");
        queue
            .args(["queue", "--type", "bug", "--title", "t", "--details", "d"])
            .write_stdin(bad.to_string());
        assert_refused(&home, &format!("feedback {bad}"), queue, "");
    }
}

#[test]
fn hook_fields_without_hook_event_name_name_the_project() {
    let home = ClaudeHome::new();
    let elsewhere = home.root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let r = run({
        let mut cmd = home.cmd("dream-gate");
        cmd.current_dir(&elsewhere)
            .write_stdin(json!({"cwd": home.project, "session_id": "s-1", "trace": 1}).to_string());
        cmd
    });
    assert_eq!(r.code, 1, "{}", r.doc);
    assert_eq!(r.doc["project"]["cwd"], home.project.display().to_string());
    assert_eq!(r.doc["gate"]["current_session"], "s-1");
    // Still an envelope: its keys pass through.
    assert_eq!(r.doc["trace"], 1);
}

#[test]
fn a_cwd_with_a_nul_byte_is_bad_input_everywhere() {
    let home = ClaudeHome::new();
    let payload = json!({"hook_event_name": "Stop", "cwd": "/tmp\u{0}x"}).to_string();
    each_tool_with_stdin(&home, &payload, "NUL");
    let mut queue = home.cmd("feedback");
    queue
        .args(["queue", "--type", "bug", "--title", "t", "--details", "d"])
        .write_stdin(payload);
    assert_refused(&home, "feedback queue", queue, "NUL");
    // A draft's own cwd too: it names the project whose settings apply.
    let mut queue = home.cmd("feedback");
    queue.arg("queue").write_stdin(
        json!({"type": "bug", "title": "t", "details": "d", "cwd": "/a\u{0}b"}).to_string(),
    );
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
    let mut recap = home.cmd("recap");
    recap
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .env("ANTHROPIC_API_KEY", KEY)
        .args(["--retries", "0", "--transcript"])
        .arg(long.join("t.jsonl"));
    assert_refused(&home, "recap --transcript", recap, "255");
    let mut config = home.cmd("feedback");
    config.arg("list").env("CLAUDE_CONFIG_DIR", &long);
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
    let mut gate = home.cmd("dream-gate");
    gate.current_dir(&odd);
    assert_refused(&home, "current dir", gate, "the current directory");
    let mut gate = home.cmd("dream-gate");
    gate.env("CLAUDE_CONFIG_DIR", not_utf8(&home, b"cfg\xff"));
    assert_refused(&home, "CLAUDE_CONFIG_DIR", gate, "CLAUDE_CONFIG_DIR");
    let mut gate = home.cmd("dream-gate");
    gate.env_remove("CLAUDE_CONFIG_DIR")
        .env("HOME", not_utf8(&home, b"home\xff"));
    assert_refused(&home, "HOME", gate, "HOME");
    let mut gate = home.cmd("dream-gate");
    gate.env("XDG_STATE_HOME", not_utf8(&home, b"state\xff"));
    assert_refused(&home, "XDG_STATE_HOME", gate, "XDG_STATE_HOME");
    let mut lock = home.cmd("dream-lock");
    lock.arg("acquire").env(
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
    let mut queue = home.cmd("feedback");
    queue
        .arg("queue")
        .env("CLAUDE_CONFIG_DIR", &config)
        .write_stdin(fields);
    assert_refused(&home, "queue", queue, "CLAUDE_CONFIG_DIR");
    for args in [&["list"][..], &["show", "x"], &["discard", "x"]] {
        let mut cmd = home.cmd("feedback");
        cmd.args(args).env("CLAUDE_CONFIG_DIR", &config);
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
    let r = run({
        let mut cmd = home.cmd("feedback");
        cmd.arg("list");
        cmd
    });
    assert_eq!(r.code, 0, "{} {}", r.doc, r.err);
    let listed = &r.doc["drafts"][0];
    assert!(
        listed["path"]
            .as_str()
            .unwrap()
            .ends_with("odd\u{fffd}.json"),
        "{listed}"
    );
    assert!(listed["error"].is_string(), "{listed}");
}

#[test]
fn a_symlinked_cwd_names_the_physical_directory() {
    let home = ClaudeHome::new();
    std::os::unix::fs::symlink(&home.project, home.root.join("link")).unwrap();
    for dir in ["link", "link/", "./link/../link"] {
        let r = run({
            let mut cmd = home.cmd("dream-gate");
            cmd.current_dir(&home.root)
                .args(["--scan-interval", "0", "--cwd", dir]);
            cmd
        });
        assert_eq!(r.code, 1, "{dir}: {}", r.doc);
        assert_eq!(
            r.doc["project"]["cwd"],
            home.project.display().to_string(),
            "{dir}"
        );
        assert_eq!(r.doc["project"]["slug"], home.slug(), "{dir}");
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
        let mut cmd = home.cmd(tool);
        cmd.env(var, value);
        if tool == "recap" {
            cmd.args(["--transcript", "t.jsonl"]);
        }
        let r = run(cmd);
        assert_eq!(r.code, 2, "{var}: {}", r.doc);
        assert_eq!(r.doc["error"]["kind"], "usage", "{var}");
        let message = r.doc["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("{var}=")), "{message}");
        assert!(
            !["--min", "--provider", "--backend"]
                .iter()
                .any(|flag| message.contains(flag)),
            "{message}"
        );
        assert!(r.err.contains(var), "{}", r.err);
    }
    // The wrapped parsers still list their values for help and completions.
    let out = home.cmd("recap").arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("[possible values: anthropic, openai]"),
        "{help}"
    );
    // The flag wins over a bad variable; an empty variable is unset.
    let r = run({
        let mut cmd = home.cmd("dream-gate");
        cmd.env("DREAMKIT_MIN_HOURS", "abc")
            .env("DREAMKIT_MIN_SESSIONS", "")
            .args(["--min-hours", "1", "--scan-interval", "0"]);
        cmd
    });
    assert_eq!(r.code, 1, "{}", r.doc);
    assert_eq!(r.doc["gate"]["min_hours"], 1.0);
    assert_eq!(r.doc["gate"]["min_sessions"], 5);
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
        let r = run({
            let mut cmd = home.cmd("dream-gate");
            cmd.args(["--scan-interval", "0", "--min-hours", value]);
            cmd
        });
        assert_eq!(r.doc["gate"]["min_hours"], hours, "{value}");
        let r = run({
            let mut cmd = home.cmd("dream-gate");
            cmd.env("DREAMKIT_MIN_HOURS", value)
                .args(["--scan-interval", "0"]);
            cmd
        });
        assert_eq!(r.doc["gate"]["min_hours"], hours, "env {value}");
    }
    let r = run({
        let mut cmd = home.cmd("dream-gate");
        cmd.args(["--min-hours", "2d"]);
        cmd
    });
    assert_eq!(
        (r.code, r.doc["error"]["kind"].as_str()),
        (2, Some("usage"))
    );
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

    fn run(&self, args: &[&str]) -> Run {
        let mut cmd = self.home.cmd("recap");
        cmd.env("ANTHROPIC_BASE_URL", self.api.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .env("DREAMKIT_RETRY_BASE_MS", "1")
            .arg("--transcript")
            .arg(&self.transcript)
            .args(args);
        run(cmd)
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
    let out = r.run(&[&gates[..], &["--away", "15.999s"]].concat());
    assert_eq!(out.code, 1, "{}", out.doc);
    assert_eq!(out.doc["reason"], "not_away_long_enough");
    // Plain numbers are seconds; minutes and hours work too.
    let out = r.run(&["--auto", "--cache-age", "55m", "--cache-ttl", "1h"]);
    assert_eq!(out.doc["reason"], "cache_cold", "{}", out.doc);
    let out = r.run(&["--auto", "--away", "100", "--delay", "2m"]);
    assert_eq!(out.doc["reason"], "not_away_long_enough", "{}", out.doc);
    // Each pair conflicts.
    for pair in [
        ["--away", "1m", "--away-ms", "60000"],
        ["--delay", "1m", "--delay-ms", "60000"],
        ["--cache-ttl", "1h", "--cache-ttl-ms", "3600000"],
        ["--cache-age", "1m", "--cache-age-ms", "60000"],
    ] {
        let out = r.run(&pair);
        assert_eq!(out.code, 2, "{pair:?}");
        assert_eq!(out.doc["error"]["kind"], "usage", "{pair:?}");
    }
    // Last: a summary that is written ends the away-summary gates' interest.
    r.api.push(Reply::anthropic_text("You were testing."));
    let out = r.run(&[&gates[..], &["--away", "16s"]].concat());
    assert_eq!(out.code, 0, "{}", out.doc);
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
    let out = r.run(&["--timeout", "0", "--retries", "0", "--deadline", "1m"]);
    assert_eq!(out.code, 0, "{} {}", out.doc, out.err);
    assert_eq!(out.doc["text"], "You were waiting.");
}

#[test]
fn counts_read_in_the_singular_and_the_plural() {
    let one = Transcript::started(Duration::from_secs(600))
        .user("only one")
        .assistant("ok");
    let r = Recap::new(&one);
    let out = r.run(&["--auto"]);
    assert_eq!(out.doc["reason"], "too_few_turns", "{}", out.doc);
    assert_eq!(
        out.doc["message"],
        "1 real user turn; the first summary needs 3"
    );
    let two = Transcript::started(Duration::from_secs(600))
        .user("one")
        .user("two")
        .assistant("ok");
    let r = Recap::new(&two);
    let out = r.run(&["--auto"]);
    assert_eq!(
        out.doc["message"],
        "2 real user turns; the first summary needs 3"
    );
    let after = three_turns()
        .away_summary("You were testing.")
        .user("again");
    let r = Recap::new(&after);
    let out = r.run(&["--auto"]);
    assert_eq!(
        out.doc["message"],
        "1 real user turn since the last summary; needs 2"
    );
}
