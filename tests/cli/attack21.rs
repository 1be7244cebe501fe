//! Attacks on the day's new features: the OpenAI provider (response_format detection, the
//! extra body, weak-model answers), the dry runs of `dream-lock release` and `recap`, and
//! `dream-run check` on hostile memory dirs.

use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};

use crate::dream::Dream;
use crate::support::fake_api::{Recorded, Reply};
use crate::support::{stderr_text, stdout_json, ClaudeHome, LiveProcess};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/claude-code-2.1.332"
);

fn stop_payload(text: &str) -> String {
    let payload = std::fs::read_to_string(format!("{FIXTURES}/hook-input/Stop.json")).unwrap();
    let mut payload: Value = serde_json::from_str(&payload).unwrap();
    payload["last_assistant_message"] = json!(text);
    payload.to_string()
}

fn openai_env(base_url: &str) -> [(&'static str, String); 5] {
    [
        ("DREAMKIT_PROVIDER", "openai".into()),
        ("OPENAI_BASE_URL", base_url.into()),
        ("OPENAI_API_KEY", String::new()),
        ("OPENAI_MODEL", "m".into()),
        ("DREAMKIT_RETRY_BASE_MS", "1".into()),
    ]
}

fn turn_status(home: &ClaudeHome, base_url: &str) -> Output {
    home.cmd("turn-status")
        .args(["--engine", "llm", "--retries", "1"])
        .envs(openai_env(base_url))
        .write_stdin(stop_payload("All tests pass. I pushed the fix."))
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

fn dream_run(d: &Dream, base_url: &str, envelope: &str, args: &[&str]) -> Output {
    d.cmd("dream-run")
        .envs(openai_env(base_url))
        .args(args)
        .write_stdin(envelope.to_string())
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

fn tool_messages(request: &Recorded) -> Vec<(String, String)> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or("").to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

const GOOD: &str =
    r#"{"state":"done","detail":"pushed the fix","tempo":"idle","needs":"","result":"fix pushed"}"#;

#[test]
fn probe_arguments_of_every_type() {
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api.push(Reply::openai_message(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "write_file", "arguments": {"path": "obj.md", "content": "x\n"}}},
            {"id": "b", "type": "function", "function": {"name": "write_file", "arguments": 42}},
            {"id": "c", "type": "function", "function": {"name": "write_file", "arguments": null}},
            {"id": "d", "type": "function", "function": {"name": "write_file", "arguments": [1, 2]}},
            {"id": "e", "type": "function", "function": {"name": "write_\u{1b}[31mfile\n", "arguments": "{}"}},
            {"id": "f", "type": "function", "function": {"name": "../../etc/passwd", "arguments": "{}"}},
            {"id": "g", "type": "function", "function": {"name": 7, "arguments": "{}"}},
            {"id": 5, "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"MEMORY.md\"}"}},
            {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"../../../../etc/passwd\"}"}},
        ]}),
        "tool_calls",
    ));
    d.api.push(Reply::captured("tools-no-call.json"));
    let out = dream_run(&d, &base, &envelope, &[]);
    eprintln!("exit {:?}\nstderr {}", out.status.code(), stderr_text(&out));
    let requests = d.api.requests();
    eprintln!("requests {}", requests.len());
    if requests.len() > 1 {
        for m in tool_messages(&requests[1]) {
            eprintln!("{m:?}");
        }
    }
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(d.read("obj.md"), "x\n");
    assert!(!stderr_text(&out).contains('\u{1b}'));
}

#[test]
fn probe_a_hundred_thousand_calls_in_content() {
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let calls: Vec<Value> = (0..100_000)
        .map(|n| if n < 100 { json!({"name": "write_file", "arguments": {"path": format!("f{n}.md"), "content": "x"}}) } else { json!({"name": "shell"}) })
        .collect();
    let text = serde_json::to_string(&calls).unwrap();
    eprintln!("content bytes {}", text.len());
    d.api.push(Reply::openai_message(
        json!({"role": "assistant", "content": text}),
        "stop",
    ));
    d.api.push(Reply::captured("tools-no-call.json"));
    let started = std::time::Instant::now();
    let out = dream_run(&d, &base, &envelope, &[]);
    eprintln!(
        "took {:?} exit {:?}\nstderr {}",
        started.elapsed(),
        out.status.code(),
        stderr_text(&out)
    );
    let requests = d.api.requests();
    eprintln!("requests {}", requests.len());
    let written = std::fs::read_dir(d.mem())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('f')
        })
        .count();
    eprintln!("written {written}");
    if requests.len() > 1 {
        let t = tool_messages(&requests[1]);
        eprintln!(
            "tool messages {} first {:?} last {:?}",
            t.len(),
            t.get(63),
            t.last()
        );
    }
    assert!(written <= 64);
}

#[test]
fn probe_html_500_naming_response_format() {
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    d.api.push(Reply::Http {
        status: 500,
        headers: vec![("content-type".into(), "text/html".into())],
        body: "<html><body>Unknown field response_format</body></html>".into(),
    });
    d.api.push(Reply::Http {
        status: 500,
        headers: vec![("content-type".into(), "text/html".into())],
        body: "<html><body>Unknown field response_format</body></html>".into(),
    });
    d.api.push(Reply::openai_text(GOOD));
    d.api.push(Reply::openai_text(GOOD));
    let out = turn_status(&d.home, &base);
    eprintln!(
        "exit {:?} {} {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        stderr_text(&out)
    );
    for r in d.api.requests() {
        eprintln!("rf {}", r.body["response_format"]);
    }
}

#[test]
fn probe_non_utf8_answer() {
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    // Invalid UTF-8 cannot be put in a String; a lone surrogate escape is the JSON analogue.
    d.api.push(Reply::Http {
        status: 200,
        headers: vec![],
        body: r#"{"choices":[{"message":{"content":"\ud800 done"},"finish_reason":"stop"}]}"#
            .into(),
    });
    let out = turn_status(&d.home, &base);
    eprintln!(
        "exit {:?} {} {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        stderr_text(&out)
    );
}

fn formats_path(home: &ClaudeHome) -> std::path::PathBuf {
    home.state_home.join("dreamkit/response-formats.json")
}

#[test]
fn probe_state_file_symlink_dir_unwritable() {
    // A symlink to /etc/passwd.
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    let path = formats_path(&d.home);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", &path).unwrap();
    let passwd = std::fs::read("/etc/passwd").unwrap();
    d.api.push(Reply::openai_text(GOOD));
    let out = turn_status(&d.home, &base);
    eprintln!(
        "symlink: exit {:?} {}",
        out.status.code(),
        stderr_text(&out)
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), passwd);
    eprintln!(
        "after: is_symlink {}",
        std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // A directory.
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    let path = formats_path(&d.home);
    std::fs::create_dir_all(&path).unwrap();
    d.api.push(Reply::openai_text(GOOD));
    let out = turn_status(&d.home, &base);
    eprintln!("dir: exit {:?} {}", out.status.code(), stderr_text(&out));
    assert_eq!(out.status.code(), Some(0));

    // An unwritable state dir.
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    let path = formats_path(&d.home);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    crate::support::chmod(path.parent().unwrap(), 0o500);
    d.api.push(Reply::openai_text(GOOD));
    let out = turn_status(&d.home, &base);
    crate::support::chmod(path.parent().unwrap(), 0o700);
    eprintln!("ro: exit {:?} {}", out.status.code(), stderr_text(&out));
    assert_eq!(out.status.code(), Some(0));

    // XDG_STATE_HOME a regular file.
    let d = Dream::new();
    let base = format!("{}/v1", d.api.url());
    std::fs::create_dir_all(d.home.state_home.parent().unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&d.home.state_home);
    std::fs::write(&d.home.state_home, "f").unwrap();
    d.api.push(Reply::openai_text(GOOD));
    let out = turn_status(&d.home, &base);
    eprintln!("file: exit {:?} {}", out.status.code(), stderr_text(&out));
}

#[test]
fn probe_extra_body() {
    for extra in [
        r#"{"stream": false}"#,
        r#"{"n": 3}"#,
        r#"{"max_completion_tokens": 1}"#,
        r#"{"messages": null}"#,
        r#"[]"#,
        r#"{"seed": 1} trailing"#,
        r#"{"tool_choice ": "none"}"#,
        r#"{"functions": [{"name": "shell"}]}"#,
        r#"{"temperature": "hot"}"#,
    ] {
        let d = Dream::new();
        let base = format!("{}/v1", d.api.url());
        d.api.push(Reply::openai_text(GOOD));
        let out = d
            .home
            .cmd("turn-status")
            .args(["--engine", "llm", "--retries", "0"])
            .envs(openai_env(&base))
            .env("DREAMKIT_OPENAI_EXTRA_BODY", extra)
            .write_stdin(stop_payload("done"))
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let r = d.api.requests();
        eprintln!(
            "{extra}: exit {:?} {} sent {:?}",
            out.status.code(),
            stderr_text(&out).lines().next().unwrap_or(""),
            r.first()
                .map(|r| r.body.to_string().chars().take(0).collect::<String>())
        );
    }
}

/// Every entry under `root`: path, kind, mode, mtime (ns) and a file's bytes.
fn snapshot(root: &std::path::Path) -> Vec<(String, String, u32, i128, Vec<u8>)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let kind = format!("{:?}", meta.file_type());
            let bytes = if meta.is_file() {
                std::fs::read(&path).unwrap_or_default()
            } else {
                Vec::new()
            };
            if meta.is_dir() {
                stack.push(path.clone());
            }
            let mtime = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
            out.push((
                path.display().to_string(),
                if meta.is_dir() { "dir".into() } else { kind },
                meta.mode(),
                if meta.is_dir() { 0 } else { mtime },
                bytes,
            ));
        }
    }
    out.sort();
    out
}

fn lock_cmd(home: &ClaudeHome, args: &[&str], stdin: &str) -> Output {
    home.cmd("dream-lock")
        .args(args)
        .write_stdin(stdin.to_string())
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap()
}

#[test]
fn probe_release_dry_run_paths() {
    // By hand, on a project with no memory dir at all.
    let home = ClaudeHome::new();
    let before = snapshot(&home.root);
    for args in [
        &["release", "--dry-run", "--token", "1:2"][..],
        &["release", "--dry-run", "--force", "--token", "1:2"][..],
        &["release", "--dry-run", "--force", "--token", "garbage"][..],
    ] {
        let out = lock_cmd(&home, args, "");
        eprintln!("{args:?}: {:?} {}", out.status.code(), stderr_text(&out));
        let after = snapshot(&home.root);
        for e in &after {
            if !before.contains(e) {
                eprintln!("  NEW/CHANGED {} {}", e.0, e.1);
            }
        }
    }
    // Held by a live process that is not us, by hand, --force and not.
    let home = ClaudeHome::new();
    home.consolidated(Duration::from_secs(3600 * 30));
    let holder = LiveProcess::start();
    let acquired = lock_cmd(&home, &["acquire", "--pid", &holder.pid().to_string()], "");
    let env: Value = stdout_json(&acquired);
    let token = env["lock"]["token"].as_str().unwrap().to_string();
    let status = lock_cmd(&home, &["status"], "");
    let before = snapshot(&home.root);
    for (args, stdin) in [
        (
            vec!["release", "--dry-run", "--token", &token],
            String::new(),
        ),
        (
            vec!["release", "--dry-run", "--force", "--token", &token],
            String::new(),
        ),
        (
            vec!["release", "--dry-run", "--outcome", "completed"],
            env.to_string(),
        ),
        (
            vec!["release", "--dry-run", "--force"],
            String::from_utf8(status.stdout.clone()).unwrap(),
        ),
    ] {
        let out = lock_cmd(&home, &args, &stdin);
        eprintln!("{args:?}: {:?} {}", out.status.code(), stderr_text(&out));
        assert_eq!(snapshot(&home.root), before, "{args:?}");
    }
    // Taken over by someone else: a stale hold replaced by another acquire.
    holder.kill();
    let other = LiveProcess::start();
    let taken = lock_cmd(&home, &["acquire", "--pid", &other.pid().to_string()], "");
    eprintln!(
        "takeover: {:?} {}",
        taken.status.code(),
        stderr_text(&taken)
    );
    let before = snapshot(&home.root);
    for (args, stdin) in [
        (
            vec!["release", "--dry-run", "--token", &token],
            String::new(),
        ),
        (
            vec!["release", "--dry-run", "--force", "--token", &token],
            String::new(),
        ),
        (vec!["release", "--dry-run", "--force"], env.to_string()),
    ] {
        let out = lock_cmd(&home, &args, &stdin);
        eprintln!("{args:?}: {:?} {}", out.status.code(), stderr_text(&out));
        assert_eq!(snapshot(&home.root), before, "{args:?}");
    }
}

#[test]
fn release_dry_run_by_hand_creates_no_memory_dir_and_no_guard() {
    let home = ClaudeHome::new();
    let before = snapshot(&home.root);
    for args in [
        &["release", "--dry-run", "--token", "1:2"][..],
        &["release", "--dry-run", "--force", "--token", "1:2"][..],
    ] {
        let out = lock_cmd(&home, args, "");
        assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
        assert_eq!(snapshot(&home.root), before, "{args:?} changed the disk");
    }
    assert!(!home.memory_dir().exists());
}
