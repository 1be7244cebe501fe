//! `feedback` holds to the contract every tool shares: one failure shape, the same code for
//! the same condition, no control character on a person's screen, one typed document per
//! answer, and the shared flags wherever they are typed.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::run::Ran;
use crate::support::*;

/// Long enough for any run here; only there so a regression that waits fails, not hangs.
const BOUND: Duration = Duration::from_secs(60);

/// `feedback ARGS` in `home`, reading `stdin`.
fn fb<'a>(home: &ClaudeHome, args: &[&str], stdin: &str) -> Run<'a> {
    Run::new(home, "feedback")
        .args(args)
        .stdin(stdin)
        .timeout(BOUND)
}

/// [`fb`] as an unprivileged user when the tests run as root.
fn fb_unprivileged<'a>(home: &ClaudeHome, args: &[&str]) -> Run<'a> {
    Run::unprivileged(home, "feedback")
        .args(args)
        .timeout(BOUND)
}

/// What `feedback queue` says on stderr in notify mode about draft `id` titled `title`.
fn queued_line(title: &str, id: &str) -> String {
    format!("feedback: draft queued: {title} (review with `feedback show {id}`)\n")
}

/// `feedback queue ARGS` in notify mode: exit 0, and stderr is `line(id)` for the draft its
/// document names; returns the document.
fn queued(run: Run, line: impl Fn(&str) -> String + 'static) -> Value {
    let id = Rc::new(RefCell::new(String::new()));
    let seen = Rc::clone(&id);
    run.success()
        .stdout_json(move |out| {
            *seen.borrow_mut() = out["draft_id"].as_str().expect("draft_id").to_string();
        })
        .stderr_with(move |err| assert_eq!(err, line(&id.borrow())))
        .run()
        .json()
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
    fb(home, &["-q", "queue"], &fields.to_string())
        .success()
        .stdout_json(|doc| assert!(doc["draft_id"].is_string(), "{doc}"))
        .stderr_empty()
        .run()
        .json()["draft_id"]
        .as_str()
        .expect("draft_id")
        .to_string()
}

fn transcript_line(session: &str, text: &str) -> String {
    json!({"type": "user", "sessionId": session, "message": {"role": "user", "content": text}})
        .to_string()
}

/// Runs it and asserts `{"error": {"kind", "message", "reason"?}}` with this kind and
/// reason, a stderr that names the tool once and is `stderr`, and the exit code; returns what
/// it printed.
#[track_caller]
fn assert_failure(
    run: Run,
    code: i32,
    kind: &str,
    reason: Option<&str>,
    what: &str,
    stderr: String,
) -> Ran {
    let what = what.to_string();
    let shown = what.clone();
    let (kind, reason) = (kind.to_string(), reason.map(str::to_string));
    run.code(code)
        .stdout_json(move |out| {
            let error = &out["error"];
            assert_eq!(error["kind"], kind.as_str(), "{what}: {out}");
            assert_eq!(error["reason"].as_str(), reason.as_deref(), "{what}: {out}");
            assert!(
                error["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{what}: no message: {out}"
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
        })
        // Ours name the tool once; clap's own usage errors start with its `error:` label.
        .stderr_with(move |err| {
            assert!(
                (err.starts_with("feedback: ") || err.starts_with("error: "))
                    && !err.contains("feedback: feedback"),
                "{shown}: {err:?}"
            );
        })
        .stderr_is(stderr)
        .run()
}

/// A failed send keeps the draft and says so in the document.
fn assert_kept(r: &Ran, home: &ClaudeHome, id: &str, what: &str) {
    let out = r.json();
    assert_eq!(out["sent"], false, "{what}: {out}");
    assert_eq!(out["queued"], true, "{what}: {out}");
    assert_eq!(out["draft_id"], id, "{what}: {out}");
    assert!(draft_file(home, id).is_file(), "{what}: the draft is gone");
}

#[test]
fn every_failure_prints_one_error_shape() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let id = queue(&home, &bug("s1"));
    let endpoint = format!("{}/feedback", api.url());

    assert_failure(
        fb(&home, &["show"], ""),
        2,
        "usage",
        None,
        "a missing argument",
        usage_stderr(
            "feedback",
            "the following required arguments were not provided: <ID>",
        ),
    );
    assert_failure(
        fb(
            &home,
            &["send", &id, "--endpoint", &endpoint, "--transcript", "t"],
            "",
        ),
        2,
        "usage",
        None,
        "--transcript without --with-transcript",
        usage_stderr(
            "feedback",
            "the following required arguments were not provided: --with-transcript",
        ),
    );
    assert_failure(
        fb(
            &home,
            &["send", &id, "--endpoint", "not a url", "--yes"],
            "",
        ),
        2,
        "usage",
        None,
        "a bad --endpoint",
        "feedback: --endpoint is not an absolute http(s) URL: \"not a url\" \
         (relative URL without a base)\n"
            .to_string(),
    );
    assert_failure(
        fb(&home, &["show", "../x"], ""),
        2,
        "bad_input",
        Some("invalid_id"),
        "a bad id",
        "feedback: \"../x\" is not a draft id\n".to_string(),
    );
    assert_failure(
        fb(&home, &["queue"], r#"{"type":"bug","title":"t"}"#),
        2,
        "bad_input",
        Some("invalid_draft"),
        "no details",
        "feedback: details is required\n".to_string(),
    );
    assert_failure(
        fb(&home, &["queue"], "[1]"),
        2,
        "bad_input",
        None,
        "not an object",
        "feedback: stdin must hold one JSON object, not an array\n".to_string(),
    );
    let big = json!({"type": "bug", "title": "t", "details": "🦀".repeat(10_240)});
    assert_failure(
        fb(&home, &["queue"], &big.to_string()),
        2,
        "bad_input",
        Some("too_large"),
        "a draft over 32 KiB",
        "feedback: the draft is 41333 bytes; at most 32768\n".to_string(),
    );

    // Once the draft is found, a failure keeps it and says so beside the error.
    let r = assert_failure(
        fb(&home, &["send", &id, "--endpoint", &endpoint], ""),
        2,
        "bad_input",
        Some("consent_required"),
        "no consent",
        "feedback: not sent, the draft is kept: without a terminal to ask on, \
         pass --yes to consent\n"
            .to_string(),
    );
    assert_kept(&r, &home, &id, "no consent");
    assert_eq!(
        r.stderr,
        "feedback: not sent, the draft is kept: without a terminal to ask on, pass --yes to consent\n"
    );

    // No GITHUB_TOKEN is a credential failure, as a missing model key is.
    let r = assert_failure(
        fb(
            &home,
            &["send", &id, "--to", "github:octo/tools", "--yes"],
            "",
        ),
        4,
        "auth",
        Some("no_credential"),
        "no GITHUB_TOKEN",
        "feedback: not sent, the draft is kept: --to github needs a credential: \
         set GITHUB_TOKEN (a token that may create issues in the repository); nothing was sent\n"
            .to_string(),
    );
    assert_kept(&r, &home, &id, "no GITHUB_TOKEN");
    assert_eq!(r.json()["error"]["status"], Value::Null);
    assert_eq!(r.json()["error"]["attempts"], 0);

    // A failed request: the documented {sent, queued, error: {kind, status}} plus message.
    api.push(Reply::error(401, "authentication_error", "bad key"));
    let r = assert_failure(
        fb(&home, &["send", &id, "--endpoint", &endpoint, "--yes"], "")
            .env("DREAMKIT_RETRY_BASE_MS", "1"),
        4,
        "auth",
        None,
        "a 401",
        "feedback: not sent, the draft is kept: bad key\n".to_string(),
    );
    assert_kept(&r, &home, &id, "a 401");
    assert_eq!(r.json()["error"]["status"], 401);
    assert_eq!(r.json()["error"]["attempts"], 1);
    assert!(
        r.stderr
            .starts_with("feedback: not sent, the draft is kept: "),
        "{}",
        r.stderr
    );
    assert_eq!(api.requests().len(), 1);

    // A draft file that holds no draft.
    std::fs::write(draft_file(&home, "corrupt"), "{ not json").unwrap();
    assert_failure(
        fb(&home, &["show", "corrupt"], ""),
        3,
        "environment",
        Some("corrupt"),
        "a corrupt draft",
        format!(
            "feedback: {} is not a draft: key must be a string at line 1 column 3\n",
            draft_file(&home, "corrupt").display()
        ),
    );

    // The clean noes say why in the JSON, with reasons a script can match.
    let no_draft = "feedback: no draft no-such-draft (`feedback list` shows the drafts)\n";
    fb(&home, &["show", "no-such-draft"], "")
        .code(1)
        .stdout_json(|out| {
            assert_eq!(
                *out,
                json!({"found": false, "draft_id": "no-such-draft", "reason": "not_found"})
            );
        })
        .stderr_is(no_draft)
        .run();
    fb(&home, &["discard", "no-such-draft"], "")
        .code(1)
        .stdout_json(|out| {
            assert_eq!(
                *out,
                json!({"discarded": false, "draft_id": "no-such-draft", "reason": "not_found"})
            );
        })
        .stderr_is(no_draft)
        .run();
    home.write(
        "proj/.claude/settings.local.json",
        r#"{"feedbackDrafts": "off"}"#,
    );
    fb(&home, &["queue"], &bug("s1").to_string())
        .code(1)
        .stdout_json(|out| assert_eq!(*out, json!({"queued": false, "reason": "disabled"})))
        .stderr_empty()
        .run();
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
    /// What a tool says when it cannot read what stands here.
    fn read_error(self) -> &'static str {
        match self {
            Bad::Missing => "No such file or directory (os error 2)",
            Bad::Fifo => "not a regular file (a FIFO)",
            Bad::Directory => "not a regular file (a directory)",
            Bad::Device => "not a regular file (a character device)",
            Bad::Socket => "not a regular file (a socket)",
            Bad::Unreadable => "Permission denied (os error 13)",
        }
    }

    /// The kind of file it is, as the tools name it.
    fn kind(self) -> &'static str {
        match self {
            Bad::Fifo => "a FIFO",
            Bad::Directory => "a directory",
            Bad::Device => "a character device",
            Bad::Socket => "a socket",
            Bad::Missing | Bad::Unreadable => unreachable!("{self:?} is no file kind"),
        }
    }

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
            let r = assert_failure(
                fb_unprivileged(&home, &args),
                3,
                "environment",
                Some(bad.reason()),
                &what,
                format!(
                    "feedback: not sent, the draft is kept: cannot read the transcript {flag}: {}\n",
                    bad.read_error()
                ),
            );
            assert_kept(&r, &home, &id, &what);
            assert!(
                r.json()["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains(flag),
                "{what}: the message names the file: {}",
                r.stdout
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
            assert_failure(
                fb_unprivileged(&home, args),
                3,
                "environment",
                Some(bad.reason()),
                &format!("{what}: {args:?}"),
                format!(
                    "feedback: cannot read {}: {}\n",
                    path.display(),
                    bad.read_error()
                ),
            );
        }
        if !matches!(bad, Bad::Unreadable) {
            // Only a draft is discarded: what else stands under its name is left alone.
            assert_failure(
                fb(&home, &["discard", id], ""),
                3,
                "environment",
                Some("not_a_file"),
                &format!("{what}: discard"),
                format!(
                    "feedback: cannot delete {}: not a regular file ({})\n",
                    path.display(),
                    bad.kind()
                ),
            );
            assert!(std::fs::symlink_metadata(&path).is_ok(), "{what}: removed");
        }
        // The listing skips it, or shows it with its error, and never fails for it.
        fb(&home, &["list"], "")
            .success()
            .stdout_json(|out| assert!(out["drafts"].is_array(), "{what}: {out}"))
            .stderr_empty()
            .run();
    }
    // A missing draft is a clean "no" (exit 1), as documented, not a failure.
    let home = ClaudeHome::new();
    fb(&home, &["show", "never-queued"], "")
        .code(1)
        .stdout_json(|out| assert_eq!(out["reason"].as_str(), Some("not_found")))
        .stderr_is("feedback: no draft never-queued (`feedback list` shows the drafts)\n")
        .run();
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
    let r = queued(fb(&home, &["queue"], &nasty().to_string()), |id| {
        queued_line(SAFE_TITLE, id)
    });
    let id = r["draft_id"].as_str().unwrap().to_string();

    // The file keeps the user's bytes.
    let stored: Value =
        serde_json::from_slice(&std::fs::read(draft_file(&home, &id)).unwrap()).unwrap();
    assert_eq!(stored["title"], NASTY_TITLE);
    assert_eq!(stored["details"], NASTY_DETAILS);

    // show and list display them made safe: no control character, not even JSON-escaped.
    let safe = |text: &str| {
        assert!(
            !has_control(text.trim_end()) && !text.contains("\\u00"),
            "{text:?}"
        );
    };
    fb(&home, &["show", &id], "")
        .success()
        .stdout_json(|out| {
            assert_eq!(out["title"], SAFE_TITLE);
            assert_eq!(out["details"], SAFE_DETAILS);
            assert_eq!(out["area"], "gate");
        })
        .stdout_with(safe)
        .stderr_empty()
        .run();
    fb(&home, &["list"], "")
        .success()
        .stdout_with(safe)
        .stdout_json(|listed| {
            assert_eq!(listed["drafts"][0]["title"], SAFE_TITLE);
            assert_eq!(listed["drafts"][0]["details"], SAFE_DETAILS);
        })
        .stderr_empty()
        .run();
    // The pretty form on request is as safe.
    fb(&home, &["show", &id, "--pretty"], "")
        .success()
        .stdout_with(|text| assert!(!has_control(&text.replace('\n', ""))))
        .stderr_empty()
        .run();

    // What is sent is what the user wrote.
    let api = FakeApi::start();
    api.push(Reply::json(200, json!({"feedback_id": "fb\u{1b}[2J1"})));
    let endpoint = format!("{}/feedback", api.url());
    fb(&home, &["send", &id, "--endpoint", &endpoint, "--yes"], "")
        .success()
        .stdout_json(|out| {
            assert_eq!(
                out["feedback_id"], "fb1",
                "the server's text is made safe too"
            );
        })
        .stderr_empty()
        .run();
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
    // The screen is what `script` relays from the pty: stdout.
    let screen = |answer: &str, code: i32, check: &dyn Fn(&str)| {
        let mut script = home.process("script");
        script.args(["-qec", &command, "/dev/null"]);
        Run::command(script, "script feedback send")
            .stdin(answer)
            .code(code)
            .stdout_with(check)
            .stderr_empty()
            .run();
    };
    screen("n\n", 1, &|text| {
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
    });
    assert!(api.requests().is_empty());

    api.push(Reply::json(200, json!({"feedback_id": "fb_tty"})));
    screen("y\n", 0, &|text| assert!(text.contains("fb_tty"), "{text}"));
    assert_eq!(api.requests()[0].body["title"], NASTY_TITLE);
}

#[test]
fn stderr_lines_name_the_tool_once() {
    let home = ClaudeHome::new();
    queued(
        fb(
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
        ),
        |id| queued_line("plain", id),
    );
    // A draft naming no session says, on the same line, that Claude Code will not list it.
    queued(
        fb(
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
        ),
        |id| {
            format!("feedback: draft queued: loose (review with `feedback show {id}`; it names no session (no --session, hook payload or transcript of this project), so Claude Code will not list it)\n")
        },
    );
    fb(&home, &["show", "nothing-here"], "")
        .code(1)
        .stdout_json(|out| assert_eq!(out["reason"], "not_found"))
        .stderr_is("feedback: no draft nothing-here (`feedback list` shows the drafts)\n")
        .run();
    for _ in 0..10 {
        queue(&home, &bug("busy"));
    }
    fb(&home, &["queue"], &bug("busy").to_string())
        .code(1)
        .stdout_json(|out| assert_eq!(out["reason"].as_str(), Some("session_limit")))
        .stderr_is("feedback: not queued: session busy has queued 10 drafts already\n")
        .run();
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
        fb(&home, args, &fields)
            .success()
            .stdout_json(|out| assert!(out["draft_id"].is_string(), "{args:?}: {out}"))
            .stderr_empty()
            .run();
    }
    for args in [
        &["-v", "list"][..],
        &["list", "-v"],
        &["list", "--compact"],
        &["--compact", "list"],
    ] {
        fb(&home, args, "")
            .success()
            .stdout_json(|out| assert!(out["drafts"].is_array(), "{args:?}"))
            .stderr_empty()
            .run();
    }
    for args in [&["--pretty", "show", &id][..], &["show", &id, "--pretty"]] {
        fb(&home, args, "")
            .success()
            .stdout_with(|text| {
                assert!(
                    text.starts_with("{\n  \""),
                    "{args:?}: not indented: {text}"
                );
                assert_eq!(
                    serde_json::from_str::<Value>(text).unwrap()["draft_id"],
                    id.as_str()
                );
            })
            .stderr_empty()
            .run();
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
        fb(&home, &args, "not json at all")
            .success()
            .stdout_json(|out| assert!(out["draft_id"].is_string(), "{args:?}: {out}"))
            .stderr_empty()
            .run();
    }
    // Without -n stdin is read: exit 2.
    let mut args = vec!["-q", "queue"];
    args.extend(flags);
    fb(&home, &args, "not json at all")
        .code(2)
        .stdout_json(|out| assert_eq!(out["error"]["kind"], "bad_input"))
        .stderr_empty()
        .run();
}
