//! The one network layer, seen from every binary that uses it: an "etcd" that is not etcd
//! (foreign JSON, an empty redirect) or never stops sending, an etcd that dies while the lock
//! is held, base URLs that are malformed or carry a query or fragment, and `feedback send
//! --to github` without a token. Real processes throughout; the fake servers are loopback
//! threads of this test process, etcd is the real one.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::support::etcd::Etcd;
use crate::support::fake_api::{FakeApi, Reply};
use crate::support::run::Ran;
use crate::support::transcript::Transcript;
use crate::support::*;

/// An etcd member that answers like a web server: 200 with JSON of its own.
fn foreign_200() -> Reply {
    Reply::json(200, json!({"ok": true, "items": []}))
}

/// A member that redirects nowhere: a 307 with an empty body.
fn empty_307() -> Reply {
    Reply::Http {
        status: 307,
        headers: Vec::new(),
        body: String::new(),
    }
}

fn lock_url(fake: &FakeApi) -> String {
    format!("etcd://{}/x", fake.url().trim_start_matches("http://"))
}

/// One line on stderr, from `tool`.
fn one_line(tool: &str, err: &str) {
    assert!(err.starts_with(&format!("{tool}: ")), "{err}");
    assert!(err.ends_with('\n'), "{err:?}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// The run's stderr is `tool`'s one line: `lead`, then the message its document holds at
/// `pointer`.
fn said(ran: &Ran, tool: &str, lead: &str, pointer: &str) {
    let doc = ran.json();
    let message = doc
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no {pointer}: {doc}"));
    assert_eq!(ran.stderr, format!("{tool}: {lead}{message}\n"));
}

fn assert_foreign(error: &Value, what: &str) {
    assert_eq!(error["kind"], "remote", "{what}: {error}");
    assert_eq!(error["reason"], "foreign_answer", "{what}: {error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("not an answer from etcd"),
        "{what}: {message}"
    );
}

#[test]
fn an_answer_that_is_not_etcds_is_remote_foreign_answer_never_free_or_due() {
    for (name, reply) in [
        ("foreign 200", foreign_200 as fn() -> Reply),
        ("empty 307", empty_307),
    ] {
        let fake = FakeApi::start();
        let url = lock_url(&fake);
        let home = ClaudeHome::new();
        home.add_session(&session_id(1), hours(30));
        home.add_session(&session_id(2), hours(30));

        fake.push(reply());
        let holder = LiveProcess::start();
        let ran = Run::new(&home, "dream-lock")
            .args(["acquire", "--pid", &holder.pid().to_string()])
            .env("DREAMKIT_LOCK_URL", &url)
            .code(4)
            .stdout_json(|doc| {
                assert_eq!(doc["lock"]["acquired"], false, "{name}: {doc}");
                assert_foreign(&doc["lock"]["error"], name);
            })
            .stderr_with(|e| one_line("dream-lock", e))
            .run();
        said(&ran, "dream-lock", "", "/lock/error/message");

        fake.push(reply());
        let ran = Run::new(&home, "dream-lock")
            .arg("status")
            .env("DREAMKIT_LOCK_URL", &url)
            .code(4)
            .stdout_json(|doc| {
                assert!(
                    doc.get("held").is_none(),
                    "{name}: never held: false: {doc}"
                );
                assert_foreign(&doc["error"], name);
            })
            .stderr_with(|e| one_line("dream-lock", e))
            .run();
        said(&ran, "dream-lock", "", "/error/message");

        // Due by the local sessions, but the last-consolidated time cannot be read: not due.
        fake.push(reply());
        let ran = Run::new(&home, "dream-gate")
            .args([
                "--backend",
                &url,
                "--min-sessions",
                "1",
                "--scan-interval",
                "0",
            ])
            .code(4)
            .stdout_json(|doc| {
                assert_ne!(doc["gate"]["due"], true, "{name}: {doc}");
                assert_foreign(&doc["gate"]["error"], name);
            })
            .stderr_with(|e| one_line("dream-gate", e))
            .run();
        said(&ran, "dream-gate", "", "/gate/error/message");

        fake.push(reply());
        let ran = Run::new(&home, "dream-lock")
            .args(["exec", "--", "sh", "-c", "echo CMD-RAN"])
            .env("DREAMKIT_LOCK_URL", &url)
            .code(4)
            .stdout_with(|out| assert!(!out.contains("CMD-RAN"), "{name}"))
            .stdout_json(|doc| assert_foreign(&doc["error"], name))
            .stderr_with(|e| {
                assert!(!e.contains("CMD-RAN"), "{name}");
                one_line("dream-lock", e);
            })
            .run();
        said(&ran, "dream-lock", "", "/error/message");

        // One request per command: a foreign answer is not retried, nor read as "no key".
        let requests = fake.requests();
        assert_eq!(requests.len(), 4, "{name}: {requests:?}");
        assert!(
            requests.iter().all(|r| r.path.starts_with("/v3/")),
            "{name}"
        );
        assert!(
            !home.memory_dir().exists(),
            "{name}: never a local fallback"
        );
    }
}

/// Runs `cmd` to its end under ptrace, stopping it at its exit (`PTRACE_O_TRACEEXIT`), where
/// its memory is still mapped: its output, and its peak RSS (VmHWM, KiB) read from
/// /proc/PID/status then. The peak is the binary's own after exec; wait4's ru_maxrss would
/// count the pages of this test process it was forked from.
pub(crate) fn run_measuring_peak_rss(mut cmd: Command) -> (Output, u64) {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    cmd.stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap());
    let null = std::ptr::null_mut::<libc::c_void>();
    // SAFETY: between fork and exec only ptrace(PTRACE_TRACEME), which is async-signal-safe
    // and takes no pointers.
    unsafe {
        cmd.pre_exec(|| {
            let null = std::ptr::null_mut::<libc::c_void>();
            if libc::ptrace(libc::PTRACE_TRACEME, 0, null, null) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn under ptrace");
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let wait = || {
        let mut status = 0;
        // SAFETY: waitpid writes the status into a local.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        assert_eq!(rc, pid, "waitpid: {}", std::io::Error::last_os_error());
        status
    };
    // The first stop is the SIGTRAP of the exec.
    let status = wait();
    assert!(
        libc::WIFSTOPPED(status) && libc::WSTOPSIG(status) == libc::SIGTRAP,
        "{status:#x}"
    );
    let options = (libc::PTRACE_O_TRACEEXIT | libc::PTRACE_O_EXITKILL) as usize;
    // SAFETY: ptrace on our own stopped tracee; the data argument is the options word.
    unsafe {
        assert_eq!(
            libc::ptrace(
                libc::PTRACE_SETOPTIONS,
                pid,
                null,
                options as *mut libc::c_void
            ),
            0
        );
        libc::ptrace(libc::PTRACE_CONT, pid, null, null);
    }
    let mut peak_kib = None;
    let status = loop {
        let status = wait();
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            break status;
        }
        let at_exit = status >> 8 == (libc::SIGTRAP | (libc::PTRACE_EVENT_EXIT << 8));
        let signal = if at_exit {
            let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            peak_kib = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            0
        } else {
            // A signal for the tracee: delivered as it would have been.
            libc::WSTOPSIG(status)
        };
        // SAFETY: as above; the data argument is the signal to deliver (0: none).
        unsafe {
            libc::ptrace(
                libc::PTRACE_CONT,
                pid,
                null,
                signal as usize as *mut libc::c_void,
            );
        }
    };
    drop(child);
    let output = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: std::fs::read(&err_path).unwrap(),
    };
    (output, peak_kib.expect("VmHWM read at the exit stop"))
}

#[test]
fn an_etcd_member_streaming_a_huge_answer_is_cut_off_with_bounded_memory() {
    for announce in [false, true] {
        let fake = FakeApi::start();
        let url = lock_url(&fake);
        let home = ClaudeHome::new();
        // 1 GiB: the whole answer in memory would be seen at once.
        fake.push(Reply::Huge {
            bytes: 1024 * 1024 * 1024,
            announce,
        });
        let mut cmd = home.process(bin_path("dream-lock"));
        cmd.arg("status").env("DREAMKIT_LOCK_URL", &url);
        // Not through Run: run under ptrace, which Run cannot do (its wait would take the tracee's
        // stops for its exit); all three streams are checked here instead.
        let (out, peak_kib) = run_measuring_peak_rss(cmd);
        assert_eq!(out.status.code(), Some(4), "{out:?}");
        let doc = run::one_json_line(std::str::from_utf8(&out.stdout).unwrap());
        assert_eq!(doc["error"]["kind"], "remote", "{doc}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "dream-lock: {}\n",
                doc["error"]["message"].as_str().unwrap()
            ),
            "its one line"
        );
        assert_eq!(doc["error"]["reason"], "too_large", "{doc}");
        assert!(doc.get("held").is_none(), "{doc}");
        assert_eq!(fake.requests().len(), 1, "not retried");
        assert!(
            peak_kib < 64 * 1024,
            "peak RSS {} MiB (announce: {announce})",
            peak_kib / 1024
        );
    }
}

#[test]
fn an_exec_whose_etcd_dies_while_the_command_runs_exits_4_and_says_so() {
    let Some(mut etcd) = Etcd::single() else {
        return;
    };
    let url = etcd.url("/dies");
    let home = ClaudeHome::new();
    let ready = home.root.join("ready");
    let go = home.root.join("go");
    mkfifo(&ready);
    mkfifo(&go);
    // The command says it runs, then waits until told to end (after etcd is gone).
    let child = Run::new(&home, "dream-lock")
        .args([
            "exec",
            "--",
            "sh",
            "-c",
            "echo up > \"$1\"; read line < \"$2\"; exit 0",
            "sh",
        ])
        .arg(&ready)
        .arg(&go)
        .env("DREAMKIT_LOCK_URL", &url)
        .stdin_from(Stdio::null())
        .code(4)
        // The command printed nothing of its own; exec says why the release failed, then
        // what that leaves.
        .stdout_empty()
        .stderr_with(|stderr| {
            assert!(
                stderr.contains("release failed: etcd is unreachable"),
                "{stderr}"
            );
            assert!(stderr.contains("could not be released"), "{stderr}");
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(lines.len(), 2, "{stderr}");
            assert!(
                lines[0].starts_with(
                    "dream-lock: release failed: etcd is unreachable, cannot release the lock ("
                ) && lines[0].ends_with("); nothing was changed"),
                "{stderr}"
            );
            assert_eq!(
                lines[1],
                "dream-lock: the lock could not be released after the command: it stays held \
                 until it expires"
            );
        })
        .spawn();
    let mut line = String::new();
    BufReader::new(File::open(&ready).unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "up\n");
    assert!(etcd.get("/dies/holder").is_some(), "held while it runs");
    etcd.kill(0);
    File::options()
        .write(true)
        .open(&go)
        .and_then(|mut f| f.write_all(b"go\n"))
        .unwrap();
    child.finish();
}

#[test]
fn a_dream_run_whose_etcd_dies_mid_run_is_a_remote_failure_and_writes_nothing() {
    let Some(etcd) = Etcd::single() else {
        return;
    };
    let url = etcd.url("/dreams");
    let etcd = Arc::new(Mutex::new(etcd));
    let home = ClaudeHome::new();
    std::fs::create_dir_all(home.memory_dir()).unwrap();
    std::fs::write(home.memory_dir().join("MEMORY.md"), "# Memory\n").unwrap();
    home.add_session(&session_id(1), hours(1));
    let holder = LiveProcess::start();
    let envelope = Run::new(&home, "dream-lock")
        .args(["acquire", "--pid", &holder.pid().to_string()])
        .env("DREAMKIT_LOCK_URL", &url)
        .success()
        .stdout_json(|doc| assert_eq!(doc["lock"]["acquired"], true))
        .stderr_empty()
        .run()
        .json();
    let api = FakeApi::start();
    // etcd dies while the model thinks; its answer then asks for a write.
    let dying = Arc::clone(&etcd);
    api.push(Reply::After(
        Box::new(move || dying.lock().unwrap().kill(0)),
        Box::new(Reply::anthropic_tools(
            "Writing.",
            &[(
                "write_file",
                json!({"path": "first.md", "content": "one\n"}),
            )],
        )),
    ));
    let ran = Run::new(&home, "dream-run")
        .env("DREAMKIT_LOCK_URL", &url)
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-etcd-dies")
        .stdin(envelope.to_string())
        .code(4)
        .stdout_json(|doc| {
            let run = &doc["run"];
            assert_eq!(run["status"], "failed", "{run}");
            assert_eq!(run["error"], "remote", "{run}");
            assert_eq!(run["reason"], "lock_unchecked", "{run}");
            assert!(
                run["message"]
                    .as_str()
                    .unwrap()
                    .contains("the consolidation lock cannot be checked: etcd is unreachable"),
                "{run}"
            );
        })
        .stderr_with(|stderr| {
            assert!(stderr.contains("cannot be checked"), "{stderr}");
            one_line("dream-run", stderr);
        })
        .run();
    said(&ran, "dream-run", "run failed: ", "/run/message");
    assert!(
        !home.memory_dir().join("first.md").exists(),
        "the unfenced write never landed"
    );
    assert_eq!(
        std::fs::read_to_string(home.memory_dir().join("MEMORY.md")).unwrap(),
        "# Memory\n"
    );
    assert_eq!(
        api.requests().len(),
        1,
        "the run stopped at the refused write"
    );
}

/// A one-turn-or-more transcript for recap.
fn transcript(home: &ClaudeHome) -> std::path::PathBuf {
    let path = home
        .transcripts_dir()
        .join(format!("{}.jsonl", session_id(1)));
    Transcript::started(hours(2))
        .user("make the gate faster")
        .assistant("Profiling.")
        .user("and commit")
        .write(&path);
    path
}

/// `feedback show ID` finds the draft.
fn shown(home: &ClaudeHome, id: &str) {
    Run::new(home, "feedback")
        .args(["show", id])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["draft_id"], id);
            assert_eq!(doc["status"], "queued");
        })
        .stderr_empty()
        .run();
}

fn queue_draft(home: &ClaudeHome) -> String {
    Run::new(home, "feedback")
        .arg("queue")
        .stdin(json!({"type": "bug", "title": "t", "details": "d"}).to_string())
        .success()
        .stdout_json(|doc| assert!(doc["draft_id"].is_string(), "{doc}"))
        .stderr_with(|err| {
            assert!(
                err.starts_with("feedback: draft queued: t (review with `feedback show "),
                "{err}"
            );
            one_line("feedback", err);
        })
        .run()
        .json()["draft_id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_bad_base_url_names_its_variable_and_a_query_or_fragment_is_refused_alike() {
    let home = ClaudeHome::new();
    let api = FakeApi::start();
    let path = transcript(&home);
    let bad = |base: &str| {
        vec![
            "not a url".to_string(),
            "ftp://127.0.0.1/".to_string(),
            "http://".to_string(),
            format!("{base}?key=q-secret-4411"),
            format!("{base}?"),
            format!("{base}#fragment"),
        ]
    };
    // Refused as a usage error naming the variable, the query's secret shown nowhere.
    let check = |run: Run<'_>, variable: &str, url: &str| {
        let variable_name = variable.to_string();
        let (variable, url) = (variable.to_string(), url.to_string());
        let (v, u) = (variable.clone(), url.clone());
        let ran = run
            .code(2)
            .stdout_json(move |doc| {
                let error = &doc["error"];
                assert_eq!(error["kind"], "usage", "{variable}={url}");
                let message = error["message"].as_str().unwrap();
                assert!(
                    message.starts_with(&format!("{variable} is not an absolute http(s) URL")),
                    "{variable}={url}: {message}"
                );
                assert!(!doc.to_string().contains("q-secret-4411"), "{doc}");
            })
            .stderr_with(move |err| {
                assert!(!err.contains("q-secret-4411"), "{v}={u}: {err}");
            })
            .run();
        let tool = if variable_name == "GITHUB_API_URL" {
            "feedback"
        } else {
            "recap"
        };
        said(&ran, tool, "", "/error/message");
    };
    for url in bad(&api.url()) {
        check(
            Run::new(&home, "recap")
                .env("ANTHROPIC_API_KEY", "sk-ant-base-url")
                .env("ANTHROPIC_BASE_URL", &url)
                .arg("--transcript")
                .arg(&path),
            "ANTHROPIC_BASE_URL",
            &url,
        );
    }
    for url in bad(&format!("{}/v1", api.url())) {
        check(
            Run::new(&home, "recap")
                .env("OPENAI_API_KEY", "sk-openai-base-url")
                .env("OPENAI_BASE_URL", &url)
                .args(["--provider", "openai", "--model", "llama", "--transcript"])
                .arg(&path),
            "OPENAI_BASE_URL",
            &url,
        );
    }
    let id = queue_draft(&home);
    for url in bad(&api.url()) {
        check(
            Run::new(&home, "feedback")
                .env("GITHUB_TOKEN", "ghp_base_url_test_1234")
                .env("GITHUB_API_URL", &url)
                .args(["send", &id, "--to", "github:octo/tools", "--yes"]),
            "GITHUB_API_URL",
            &url,
        );
    }
    assert!(api.requests().is_empty(), "a refused URL got a request");
    // The draft is kept.
    shown(&home, &id);

    // The same URLs without the query are taken, the trailing slash dropped.
    api.push(Reply::anthropic_text("You were making the gate faster."));
    Run::new(&home, "recap")
        .env("ANTHROPIC_API_KEY", "sk-ant-base-url")
        .env("ANTHROPIC_BASE_URL", format!("{}/", api.url()))
        .arg("--transcript")
        .arg(&path)
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["status"], "ok");
            assert_eq!(doc["text"], "You were making the gate faster.");
        })
        .stderr_empty()
        .run();
    assert_eq!(api.requests()[0].path, "/v1/messages");
}

#[test]
fn github_without_a_token_is_auth_before_any_request() {
    let home = ClaudeHome::new();
    let github = FakeApi::start();
    let id = queue_draft(&home);
    for token in [None, Some(""), Some("  ")] {
        let mut run = Run::new(&home, "feedback")
            .env("GITHUB_API_URL", github.url())
            .args(["send", &id, "--to", "github:octo/tools", "--yes"]);
        if let Some(token) = token {
            run = run.env("GITHUB_TOKEN", token);
        }
        let ran = run
            .code(4)
            .stdout_json(|doc| {
                let error = &doc["error"];
                assert_eq!(error["kind"], "auth", "{token:?}: {error}");
                assert_eq!(error["reason"], "no_credential", "{token:?}: {error}");
                assert!(
                    error["message"].as_str().unwrap().contains("GITHUB_TOKEN"),
                    "{error}"
                );
            })
            .stderr_with(|e| one_line("feedback", e))
            .run();
        said(
            &ran,
            "feedback",
            "not sent, the draft is kept: ",
            "/error/message",
        );
    }
    // A token that cannot be sent as a header is auth too, its value not shown.
    let ran = Run::new(&home, "feedback")
        .env("GITHUB_API_URL", github.url())
        .env("GITHUB_TOKEN", "ghp_line\nbreak_SECRET")
        .args(["-v", "send", &id, "--to", "github:octo/tools", "--yes"])
        .code(4)
        .stdout_json(|doc| {
            let error = &doc["error"];
            assert_eq!(
                (&error["kind"], &error["reason"]),
                (&json!("auth"), &json!("unsendable_credential"))
            );
            assert!(!doc.to_string().contains("SECRET"), "{doc}");
        })
        .stderr_with(|err| {
            assert!(!err.contains("SECRET"), "{err}");
            one_line("feedback", err);
        })
        .run();
    said(&ran, "feedback", "", "/error/message");
    assert!(
        github.requests().is_empty(),
        "a request went out without a token"
    );
    // The draft is kept.
    shown(&home, &id);
}
