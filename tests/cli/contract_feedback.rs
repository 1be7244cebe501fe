//! `feedback` holds to the contract every tool shares: one failure shape, the same code for
//! the same condition, no control character on a person's screen, one typed document per
//! answer, and the shared flags wherever they are typed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::*;

/// Long enough for any run here; only there so a regression that waits fails, not hangs.
const BOUND: Duration = Duration::from_secs(60);

/// What one run printed: its exit code, its one JSON document and its stderr.
struct Run {
    code: i32,
    out: Value,
    err: String,
}

fn run(mut cmd: assert_cmd::Command, args: &[&str], stdin: &str) -> Run {
    let output = cmd
        .args(args)
        .write_stdin(stdin)
        .timeout(BOUND)
        .output()
        .expect("run feedback");
    Run {
        code: output.status.code().expect("an exit code"),
        out: stdout_json(&output),
        err: stderr_text(&output),
    }
}

fn fb(home: &ClaudeHome, args: &[&str], stdin: &str) -> Run {
    run(home.cmd("feedback"), args, stdin)
}

fn drafts_dir(home: &ClaudeHome) -> PathBuf {
    home.config.join("feedback/drafts")
}

fn draft_file(home: &ClaudeHome, id: &str) -> PathBuf {
    drafts_dir(home).join(format!("{id}.json"))
}

fn bug(session: &str) -> Value {
    json!({"type": "bug", "title": "gate crashes on a FIFO", "details": "Steps: mkfifo.", "source_session_id": session})
}

fn queue(home: &ClaudeHome, fields: &Value) -> String {
    let r = fb(home, &["-q", "queue"], &fields.to_string());
    assert_eq!((r.code, r.err.as_str()), (0, ""), "{}", r.out);
    r.out["draft_id"].as_str().expect("draft_id").to_string()
}

fn transcript_line(session: &str, text: &str) -> String {
    json!({"type": "user", "sessionId": session, "message": {"role": "user", "content": text}})
        .to_string()
}

/// Asserts `{"error": {"kind", "message", "reason"?}}` with this kind and reason, a one-line
/// stderr that names the tool once, and the exit code.
fn assert_failure(r: &Run, code: i32, kind: &str, reason: Option<&str>, what: &str) {
    assert_eq!(r.code, code, "{what}: {} {}", r.out, r.err);
    let error = &r.out["error"];
    assert_eq!(error["kind"], kind, "{what}: {}", r.out);
    assert_eq!(error["reason"].as_str(), reason, "{what}: {}", r.out);
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: no message: {}",
        r.out
    );
    let keys: Vec<&str> = error
        .as_object()
        .expect("error object")
        .keys()
        .map(String::as_str)
        .collect();
    assert!(
        keys.iter()
            .all(|k| ["kind", "reason", "message", "status", "attempts"].contains(k)),
        "{what}: {keys:?}"
    );
    // Ours name the tool once; clap's own usage errors start with its `error:` label.
    assert!(
        (r.err.starts_with("feedback: ") || r.err.starts_with("error: "))
            && !r.err.contains("feedback: feedback"),
        "{what}: {:?}",
        r.err
    );
}

/// A failed send keeps the draft and says so in the document.
fn assert_kept(r: &Run, home: &ClaudeHome, id: &str, what: &str) {
    assert_eq!(r.out["sent"], false, "{what}: {}", r.out);
    assert_eq!(r.out["queued"], true, "{what}: {}", r.out);
    assert_eq!(r.out["draft_id"], id, "{what}: {}", r.out);
    assert!(draft_file(home, id).is_file(), "{what}: the draft is gone");
}

#[test]
fn every_failure_prints_one_error_shape() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let id = queue(&home, &bug("s1"));
    let endpoint = format!("{}/feedback", api.url());

    let r = fb(&home, &["show"], "");
    assert_failure(&r, 2, "usage", None, "a missing argument");
    let r = fb(
        &home,
        &["send", &id, "--endpoint", &endpoint, "--transcript", "t"],
        "",
    );
    assert_failure(
        &r,
        2,
        "usage",
        None,
        "--transcript without --with-transcript",
    );
    let r = fb(
        &home,
        &["send", &id, "--endpoint", "not a url", "--yes"],
        "",
    );
    assert_failure(&r, 2, "usage", None, "a bad --endpoint");
    let r = fb(&home, &["show", "../x"], "");
    assert_failure(&r, 2, "bad_input", Some("invalid_id"), "a bad id");
    let r = fb(&home, &["queue"], r#"{"type":"bug","title":"t"}"#);
    assert_failure(&r, 2, "bad_input", Some("invalid_draft"), "no details");
    let r = fb(&home, &["queue"], "[1]");
    assert_failure(&r, 2, "bad_input", None, "not an object");
    let big = json!({"type": "bug", "title": "t", "details": "🦀".repeat(10_240)});
    let r = fb(&home, &["queue"], &big.to_string());
    assert_failure(&r, 2, "bad_input", Some("too_large"), "a draft over 32 KiB");

    // Once the draft is found, a failure keeps it and says so beside the error.
    let r = fb(&home, &["send", &id, "--endpoint", &endpoint], "");
    assert_failure(&r, 2, "bad_input", Some("consent_required"), "no consent");
    assert_kept(&r, &home, &id, "no consent");
    assert_eq!(
        r.err,
        "feedback: not sent, the draft is kept: without a terminal to ask on, pass --yes to consent\n"
    );

    // No GITHUB_TOKEN is a credential failure, as a missing model key is.
    let r = fb(
        &home,
        &["send", &id, "--to", "github:octo/tools", "--yes"],
        "",
    );
    assert_failure(&r, 4, "auth", Some("no_credential"), "no GITHUB_TOKEN");
    assert_kept(&r, &home, &id, "no GITHUB_TOKEN");
    assert_eq!(r.out["error"]["status"], Value::Null);
    assert_eq!(r.out["error"]["attempts"], 0);

    // A failed request: the documented {sent, queued, error: {kind, status}} plus message.
    api.push(Reply::error(401, "authentication_error", "bad key"));
    let mut cmd = home.cmd("feedback");
    cmd.env("DREAMKIT_RETRY_BASE_MS", "1");
    let r = run(cmd, &["send", &id, "--endpoint", &endpoint, "--yes"], "");
    assert_failure(&r, 4, "auth", None, "a 401");
    assert_kept(&r, &home, &id, "a 401");
    assert_eq!(r.out["error"]["status"], 401);
    assert_eq!(r.out["error"]["attempts"], 1);
    assert!(
        r.err.starts_with("feedback: not sent, the draft is kept: "),
        "{}",
        r.err
    );
    assert_eq!(api.requests().len(), 1);

    // A draft file that holds no draft.
    std::fs::write(draft_file(&home, "corrupt"), "{ not json").unwrap();
    let r = fb(&home, &["show", "corrupt"], "");
    assert_failure(&r, 3, "environment", Some("corrupt"), "a corrupt draft");

    // The clean noes say why in the JSON, with reasons a script can match.
    let r = fb(&home, &["show", "no-such-draft"], "");
    assert_eq!(
        (r.code, &r.out),
        (
            1,
            &json!({"found": false, "draft_id": "no-such-draft", "reason": "not_found"})
        )
    );
    let r = fb(&home, &["discard", "no-such-draft"], "");
    assert_eq!(
        (r.code, &r.out),
        (
            1,
            &json!({"discarded": false, "draft_id": "no-such-draft", "reason": "not_found"})
        )
    );
    home.write(
        "proj/.claude/settings.local.json",
        r#"{"feedbackDrafts": "off"}"#,
    );
    let r = fb(&home, &["queue"], &bug("s1").to_string());
    assert_eq!(
        (r.code, &r.out),
        (1, &json!({"queued": false, "reason": "disabled"}))
    );
}

/// What stands where a file should be.
#[derive(Clone, Copy, Debug)]
enum Bad {
    Missing,
    Fifo,
    Directory,
    Device,
    Socket,
    Unreadable,
}

const BAD: [Bad; 6] = [
    Bad::Missing,
    Bad::Fifo,
    Bad::Directory,
    Bad::Device,
    Bad::Socket,
    Bad::Unreadable,
];

impl Bad {
    fn reason(self) -> &'static str {
        match self {
            Bad::Missing => "not_found",
            Bad::Unreadable => "permission",
            _ => "not_a_file",
        }
    }

    /// Puts it at `path`; a socket lives as long as the listener returned.
    fn make(self, path: &Path) -> Option<std::os::unix::net::UnixListener> {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        match self {
            Bad::Missing => {}
            Bad::Fifo => {
                let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
            }
            Bad::Directory => std::fs::create_dir(path).expect("dir"),
            Bad::Device => std::os::unix::fs::symlink("/dev/null", path).expect("symlink"),
            Bad::Socket => {
                return Some(std::os::unix::net::UnixListener::bind(path).expect("bind"));
            }
            Bad::Unreadable => {
                std::fs::write(path, transcript_line("s1", "private") + "\n").expect("write");
                chmod(path, 0o000);
            }
        }
        None
    }
}

/// The drafts readable by an unprivileged user (the permission case runs as one under root).
fn open_up(home: &ClaudeHome) {
    chmod(&home.config.join("feedback"), 0o755);
    chmod(&drafts_dir(home), 0o755);
    for entry in std::fs::read_dir(drafts_dir(home)).expect("drafts") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            chmod(&path, 0o644);
        }
    }
}

#[test]
fn a_transcript_that_cannot_be_read_is_exit_3_with_its_reason_and_nothing_is_sent() {
    for bad in BAD {
        for by_flag in [true, false] {
            let what = format!(
                "{bad:?}, {}",
                if by_flag {
                    "--transcript"
                } else {
                    "the draft's"
                }
            );
            let home = ClaudeHome::new();
            let api = FakeApi::start();
            let path = home.root.join("session.jsonl");
            let _socket = bad.make(&path);
            let mut fields = bug("s1");
            if !by_flag {
                fields["transcript_ref"] = json!({"session_file": path});
            }
            let id = queue(&home, &fields);
            open_up(&home);
            let endpoint = format!("{}/feedback", api.url());
            let mut args = vec![
                "send",
                &id,
                "--endpoint",
                &endpoint,
                "--with-transcript",
                "--yes",
            ];
            let flag = path.to_str().expect("utf-8 path");
            if by_flag {
                args.extend(["--transcript", flag]);
            }
            let r = run(home.cmd_unprivileged("feedback"), &args, "");
            assert_failure(&r, 3, "environment", Some(bad.reason()), &what);
            assert_kept(&r, &home, &id, &what);
            assert!(
                r.out["error"]["message"].as_str().unwrap().contains(flag),
                "{what}: the message names the file: {}",
                r.out
            );
            assert!(api.requests().is_empty(), "{what}: sent anyway");
        }
    }
}

#[test]
fn a_draft_file_that_cannot_be_read_is_exit_3_with_its_reason() {
    for bad in [
        Bad::Fifo,
        Bad::Directory,
        Bad::Device,
        Bad::Socket,
        Bad::Unreadable,
    ] {
        let home = ClaudeHome::new();
        queue(&home, &bug("s1"));
        let id = "broken-draft";
        open_up(&home);
        let path = draft_file(&home, id);
        let _socket = bad.make(&path);
        let what = format!("{bad:?}");
        let send = ["send", id, "--endpoint", "http://127.0.0.1:9/", "--yes"];
        for args in [&["show", id][..], &send[..]] {
            let r = run(home.cmd_unprivileged("feedback"), args, "");
            assert_failure(
                &r,
                3,
                "environment",
                Some(bad.reason()),
                &format!("{what}: {args:?}"),
            );
        }
        if !matches!(bad, Bad::Unreadable) {
            // Only a draft is discarded: what else stands under its name is left alone.
            let r = fb(&home, &["discard", id], "");
            assert_failure(
                &r,
                3,
                "environment",
                Some("not_a_file"),
                &format!("{what}: discard"),
            );
            assert!(std::fs::symlink_metadata(&path).is_ok(), "{what}: removed");
        }
        // The listing skips it, or shows it with its error, and never fails for it.
        let r = fb(&home, &["list"], "");
        assert_eq!(r.code, 0, "{what}: {}", r.out);
    }
    // A missing draft is a clean "no" (exit 1), as documented, not a failure.
    let home = ClaudeHome::new();
    let r = fb(&home, &["show", "never-queued"], "");
    assert_eq!((r.code, r.out["reason"].as_str()), (1, Some("not_found")));
}

const NASTY_TITLE: &str = "\u{1b}]0;PWNED\u{7}\u{1b}[2Jgate\u{9b}31m crashes\u{7f}";
const NASTY_DETAILS: &str = "Steps:\n\t1. \u{1b}[1;1Hrun\u{0}\u{8} it\u{85}";
const SAFE_TITLE: &str = "gate31m crashes";
const SAFE_DETAILS: &str = "Steps:\n\t1. run it";

fn has_control(text: &str) -> bool {
    text.chars()
        .any(|c| (c.is_control() && c != '\n' && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c))
}

fn nasty() -> Value {
    json!({"type": "bug", "title": NASTY_TITLE, "details": NASTY_DETAILS, "source_session_id": "s1", "area": "gate\u{1b}[8m"})
}

#[test]
fn control_characters_never_reach_the_person_and_the_draft_keeps_them() {
    let home = ClaudeHome::new();
    let r = fb(&home, &["queue"], &nasty().to_string());
    assert_eq!(r.code, 0, "{}", r.out);
    let id = r.out["draft_id"].as_str().unwrap().to_string();
    assert_eq!(
        r.err,
        format!("feedback: draft queued: {SAFE_TITLE} (review with `feedback show {id}`)\n")
    );

    // The file keeps the user's bytes.
    let stored: Value =
        serde_json::from_slice(&std::fs::read(draft_file(&home, &id)).unwrap()).unwrap();
    assert_eq!(stored["title"], NASTY_TITLE);
    assert_eq!(stored["details"], NASTY_DETAILS);

    // show and list display them made safe: no control character, not even JSON-escaped.
    let show = home.cmd("feedback").args(["show", &id]).output().unwrap();
    let r = Run {
        code: show.status.code().unwrap(),
        out: stdout_json(&show),
        err: stderr_text(&show),
    };
    assert_eq!((r.code, r.err.as_str()), (0, ""));
    assert_eq!(r.out["title"], SAFE_TITLE);
    assert_eq!(r.out["details"], SAFE_DETAILS);
    assert_eq!(r.out["area"], "gate");
    let text = String::from_utf8(show.stdout).unwrap();
    assert!(
        !has_control(text.trim_end()) && !text.contains("\\u00"),
        "{text:?}"
    );
    let list = home.cmd("feedback").arg("list").output().unwrap();
    let text = String::from_utf8(list.stdout.clone()).unwrap();
    assert!(
        !has_control(text.trim_end()) && !text.contains("\\u00"),
        "{text:?}"
    );
    let listed = stdout_json(&list);
    assert_eq!(listed["drafts"][0]["title"], SAFE_TITLE);
    assert_eq!(listed["drafts"][0]["details"], SAFE_DETAILS);
    // The pretty form on request is as safe.
    let pretty = home
        .cmd("feedback")
        .args(["show", &id, "--pretty"])
        .output()
        .unwrap();
    assert!(!has_control(
        &String::from_utf8(pretty.stdout).unwrap().replace('\n', "")
    ));

    // What is sent is what the user wrote.
    let api = FakeApi::start();
    api.push(Reply::json(200, json!({"feedback_id": "fb\u{1b}[2J1"})));
    let endpoint = format!("{}/feedback", api.url());
    let r = fb(&home, &["send", &id, "--endpoint", &endpoint, "--yes"], "");
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(
        r.out["feedback_id"], "fb1",
        "the server's text is made safe too"
    );
    let body = &api.requests()[0].body;
    assert_eq!(body["title"], NASTY_TITLE);
    assert_eq!(body["details"], NASTY_DETAILS);
}

/// On a terminal (a real pty from util-linux `script`), the prompt shows the payload without
/// its control characters, says so, and the request still carries the user's bytes.
#[test]
fn the_consent_prompt_shows_the_payload_made_safe() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let id = queue(&home, &nasty());
    let command = format!(
        "{} send {id} --endpoint {}/feedback",
        bin_path("feedback").display(),
        api.url()
    );
    let screen = |answer: &str| {
        let out = std::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .env("HOME", &home.home)
            .env("CLAUDE_CONFIG_DIR", &home.config)
            .env("XDG_STATE_HOME", &home.state_home)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(answer.as_bytes())?;
                child.wait_with_output()
            })
            .expect("script");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = screen("n\n");
    assert_eq!(code, Some(1), "{text}");
    // The pty turns \n into \r\n; every other control character must be gone.
    let bare = text.replace("\r\n", "\n");
    assert!(!has_control(&bare), "{bare:?}");
    assert!(!bare.contains("\\u00"), "{bare:?}");
    assert!(
        bare.contains(&format!("\"title\": \"{SAFE_TITLE}\"")),
        "{bare}"
    );
    assert!(
        bare.contains("(control characters are not shown here; they are sent as written)"),
        "{bare}"
    );
    assert!(
        bare.contains("feedback: not sent (declined); the draft is kept"),
        "{bare}"
    );
    assert!(api.requests().is_empty());

    api.push(Reply::json(200, json!({"feedback_id": "fb_tty"})));
    let (code, text) = screen("y\n");
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(api.requests()[0].body["title"], NASTY_TITLE);
}

#[test]
fn stderr_lines_name_the_tool_once() {
    let home = ClaudeHome::new();
    let r = fb(
        &home,
        &[
            "queue",
            "--type",
            "idea",
            "--title",
            "plain",
            "--details",
            "d",
            "--session",
            "s-plain",
        ],
        "",
    );
    let id = r.out["draft_id"].as_str().unwrap();
    assert_eq!(
        r.err,
        format!("feedback: draft queued: plain (review with `feedback show {id}`)\n")
    );
    // A draft naming no session says, on the same line, that Claude Code will not list it.
    let r = fb(
        &home,
        &[
            "queue",
            "--type",
            "idea",
            "--title",
            "loose",
            "--details",
            "d",
        ],
        "",
    );
    let id = r.out["draft_id"].as_str().unwrap();
    assert_eq!(
        r.err,
        format!("feedback: draft queued: loose (review with `feedback show {id}`; it names no session (no --session, hook payload or transcript of this project), so Claude Code will not list it)\n")
    );
    let r = fb(&home, &["show", "nothing-here"], "");
    assert_eq!(
        r.err,
        "feedback: no draft nothing-here (`feedback list` shows the drafts)\n"
    );
    for _ in 0..9 {
        fb(&home, &["-q", "queue"], &bug("busy").to_string());
    }
    fb(&home, &["-q", "queue"], &bug("busy").to_string());
    let r = fb(&home, &["queue"], &bug("busy").to_string());
    assert_eq!(
        (r.code, r.out["reason"].as_str()),
        (1, Some("session_limit"))
    );
    assert_eq!(
        r.err,
        "feedback: not queued: session busy has queued 10 drafts already\n"
    );
}

#[test]
fn shared_flags_work_before_and_after_the_subcommand() {
    let home = ClaudeHome::new();
    let id = queue(&home, &bug("s1"));
    let fields = bug("s2").to_string();
    for args in [
        &["-q", "queue"][..],
        &["queue", "-q"],
        &["queue", "--quiet"],
    ] {
        let r = fb(&home, args, &fields);
        assert_eq!((r.code, r.err.as_str()), (0, ""), "{args:?}: {}", r.out);
    }
    for args in [
        &["-v", "list"][..],
        &["list", "-v"],
        &["list", "--compact"],
        &["--compact", "list"],
    ] {
        let r = fb(&home, args, "");
        assert_eq!(r.code, 0, "{args:?}: {} {}", r.out, r.err);
        assert!(r.out["drafts"].is_array(), "{args:?}");
    }
    for args in [&["--pretty", "show", &id][..], &["show", &id, "--pretty"]] {
        let out = home.cmd("feedback").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.starts_with("{\n  \""),
            "{args:?}: not indented: {text}"
        );
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap()["draft_id"],
            id.as_str()
        );
    }
    // -n: stdin is not read, wherever the flag stands.
    let flags = ["--type", "bug", "--title", "from flags", "--details", "d"];
    for n_first in [true, false] {
        let mut args = vec!["-q"];
        if n_first {
            args.extend(["-n", "queue"]);
        } else {
            args.extend(["queue", "-n"]);
        }
        args.extend(flags);
        let r = fb(&home, &args, "not json at all");
        assert_eq!(r.code, 0, "{args:?}: {} {}", r.out, r.err);
    }
    let mut args = vec!["-q", "queue"];
    args.extend(flags);
    let r = fb(&home, &args, "not json at all");
    assert_eq!(r.code, 2, "without -n stdin is read: {}", r.out);
}
