//! The network layer as an attacker meets it: redirects to other hosts, servers that echo
//! credentials or never stop sending, URLs with secrets in them, missing or unsendable
//! credentials. Shared by every model tool (recap here) and `feedback send`.

use std::process::Output;

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::transcript::Transcript;
use crate::support::{hours, stderr_text, stdout_json, ClaudeHome};

const KEY: &str = "sk-ant-net-SECRET-7f3e9a1c55";

struct Net {
    home: ClaudeHome,
    transcript: std::path::PathBuf,
    api: FakeApi,
}

impl Net {
    fn new() -> Net {
        let home = ClaudeHome::new();
        let transcript = home
            .transcripts_dir()
            .join("00000000-0000-4000-8000-000000000001.jsonl");
        Transcript::started(hours(2))
            .user("make the gate faster")
            .assistant("Profiling.")
            .user("and commit")
            .write(&transcript);
        Net {
            home,
            transcript,
            api: FakeApi::start(),
        }
    }

    fn recap(&self, env: &[(&str, &str)], extra: &[&str]) -> Output {
        let mut cmd = self.home.cmd("recap");
        cmd.env("ANTHROPIC_BASE_URL", self.api.url())
            .env("DREAMKIT_RETRY_BASE_MS", "1")
            .arg("--transcript")
            .arg(&self.transcript)
            .args(extra)
            .timeout(std::time::Duration::from_secs(60));
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }
}

fn all_output(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        stderr_text(out)
    )
}

#[test]
fn a_redirect_to_another_origin_is_not_followed_and_gets_no_key() {
    let n = Net::new();
    let elsewhere = FakeApi::start();
    elsewhere.push(Reply::anthropic_text("stolen"));
    let location = format!("{}/v1/messages", elsewhere.url());
    for status in [301, 302, 307, 308] {
        n.api
            .push(Reply::json(status, json!({})).with_header("location", &location));
        let out = n.recap(&[("ANTHROPIC_API_KEY", KEY)], &["-v"]);
        assert_eq!(out.status.code(), Some(4), "{status}: {}", all_output(&out));
        let doc = stdout_json(&out);
        assert_eq!(doc["status"], "api-error", "{status}");
        assert_eq!(doc["error"]["kind"], "invalid_request", "{status}");
        assert_eq!(
            doc["error"]["attempts"], 1,
            "{status}: a redirect is not retried"
        );
        assert!(
            doc["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&location),
            "{status}: the error names the Location: {doc}"
        );
    }
    assert!(
        elsewhere.requests().is_empty(),
        "the other host got a request"
    );
    assert_eq!(n.api.requests().len(), 4);
}

#[test]
fn feedback_send_does_not_follow_a_redirect_with_the_payload() {
    let home = ClaudeHome::new();
    let first = FakeApi::start();
    let elsewhere = FakeApi::start();
    elsewhere.push(Reply::json(200, json!({"id": "fb-1"})));
    let out = home
        .cmd("feedback")
        .arg("queue")
        .write_stdin(json!({"type": "bug", "title": "t", "details": "d"}).to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let id = stdout_json(&out)["draft_id"].as_str().unwrap().to_string();
    first.push(
        Reply::json(302, json!({})).with_header("location", &format!("{}/x", elsewhere.url())),
    );
    let out = home
        .cmd("feedback")
        .args([
            "send",
            &id,
            "--endpoint",
            &format!("{}/feedback", first.url()),
            "--yes",
            "--retries",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", all_output(&out));
    assert_eq!(stdout_json(&out)["sent"], false);
    assert!(
        elsewhere.requests().is_empty(),
        "the payload followed the redirect"
    );
    // The draft is kept for another try.
    let show = home.cmd("feedback").args(["show", &id]).output().unwrap();
    assert_eq!(show.status.code(), Some(0));
}

#[test]
fn credentials_echoed_by_a_server_are_never_printed() {
    let n = Net::new();
    let token = "sk-ant-oat-TOKEN-0a9b8c7d6e";
    for (var, secret) in [("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_AUTH_TOKEN", token)] {
        n.api.push(Reply::error(
            401,
            "authentication_error",
            &format!("invalid credential: {secret}"),
        ));
        let out = n.recap(&[(var, secret)], &["-v"]);
        assert_eq!(out.status.code(), Some(4), "{var}");
        let text = all_output(&out);
        assert!(!text.contains(secret), "{var} printed: {text}");
        assert!(text.contains("[redacted]"), "{text}");
        // A 200 that fails to parse, with the key inside.
        n.api.push(Reply::Http {
            status: 200,
            headers: Vec::new(),
            body: format!("{{\"echo\": \"{secret}\""),
        });
        let out = n.recap(&[(var, secret)], &["-v"]);
        assert_eq!(out.status.code(), Some(4), "{var}");
        assert!(
            !all_output(&out).contains(secret),
            "{var}: {}",
            all_output(&out)
        );
    }
}

#[test]
fn github_tokens_echoed_back_are_never_printed() {
    let home = ClaudeHome::new();
    let github = FakeApi::start();
    let token = "ghp_NETtest1234567890abcdef";
    github.push(Reply::json(
        401,
        json!({"message": format!("Bad credentials: {token}")}),
    ));
    let out = home
        .cmd("feedback")
        .arg("queue")
        .write_stdin(json!({"type": "bug", "title": "t", "details": "d"}).to_string())
        .output()
        .unwrap();
    let id = stdout_json(&out)["draft_id"].as_str().unwrap().to_string();
    let out = home
        .cmd("feedback")
        .env("GITHUB_TOKEN", token)
        .env("GITHUB_API_URL", github.url())
        .args([
            "-v",
            "send",
            &id,
            "--to",
            "github:octo/tools",
            "--yes",
            "--retries",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", all_output(&out));
    assert!(!all_output(&out).contains(token), "{}", all_output(&out));
    assert_eq!(
        github.requests()[0].header("authorization"),
        Some(format!("Bearer {token}").as_str())
    );
}

#[test]
fn secrets_in_urls_are_redacted_from_every_message() {
    let n = Net::new();
    // Port 9 (discard) on loopback refuses at once: a network error naming the URL.
    let base = "http://someone:hunter2pass@127.0.0.1:9/api";
    let out = n.recap(
        &[("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_BASE_URL", base)],
        &["-v", "--retries", "0"],
    );
    assert_eq!(out.status.code(), Some(4), "{}", all_output(&out));
    let text = all_output(&out);
    assert!(!text.contains("hunter2pass"), "{text}");
    assert!(
        text.contains("127.0.0.1:9"),
        "the host is still named: {text}"
    );
    // A base URL with a query is refused before any request (the path would land in the
    // query), and its values are not shown in the refusal either.
    let base = "http://someone:hunter2pass@127.0.0.1:9/api?key=qsecret98765";
    let out = n.recap(
        &[("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_BASE_URL", base)],
        &["-v", "--retries", "0"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", all_output(&out));
    let text = all_output(&out);
    assert!(
        !text.contains("hunter2pass") && !text.contains("qsecret98765"),
        "{text}"
    );
    assert!(text.contains("ANTHROPIC_BASE_URL"), "{text}");

    let home = ClaudeHome::new();
    let out = home
        .cmd("feedback")
        .arg("queue")
        .write_stdin(json!({"type": "bug", "title": "t", "details": "d"}).to_string())
        .output()
        .unwrap();
    let id = stdout_json(&out)["draft_id"].as_str().unwrap().to_string();
    let endpoint = "http://u:pw-in-endpoint-42@127.0.0.1:9/f?token=tok-in-endpoint-42";
    let out = home
        .cmd("feedback")
        .args([
            "-v",
            "send",
            &id,
            "--endpoint",
            endpoint,
            "--yes",
            "--retries",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", all_output(&out));
    let text = all_output(&out);
    assert!(
        !text.contains("pw-in-endpoint-42") && !text.contains("tok-in-endpoint-42"),
        "{text}"
    );
}

#[test]
fn a_server_that_never_stops_sending_is_cut_off_with_bounded_memory() {
    for announce in [true, false] {
        let n = Net::new();
        n.api.push(Reply::Huge {
            bytes: 256 * 1024 * 1024,
            announce,
        });
        let mut cmd = n.home.process(crate::support::bin_path("recap"));
        cmd.env("ANTHROPIC_BASE_URL", n.api.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .arg("--transcript")
            .arg(&n.transcript);
        // The peak is read at the process's exit, its own memory after exec.
        let (out, peak_kib) = crate::net::run_measuring_peak_rss(cmd);
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(4), "{doc}");
        assert_eq!(doc["error"]["kind"], "malformed_response", "{doc}");
        assert_eq!(doc["error"]["attempts"], 1, "not retried: {doc}");
        // A memory bound, not a timing: the whole answer would be 256 MiB.
        let peak_mib = peak_kib / 1024;
        assert!(
            peak_mib < 64,
            "peak RSS {peak_mib} MiB (announce: {announce})"
        );
    }
}

#[test]
fn no_credential_means_no_request() {
    let n = Net::new();
    let out = n.recap(&[], &[]);
    assert_eq!(out.status.code(), Some(4), "{}", all_output(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["error"]["kind"], "auth");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("ANTHROPIC_API_KEY") && message.contains("ANTHROPIC_AUTH_TOKEN"),
        "{message}"
    );
    assert_eq!(
        stderr_text(&out).lines().count(),
        1,
        "{}",
        stderr_text(&out)
    );
    let out = n.recap(&[("OPENAI_MODEL", "llama")], &["--provider", "openai"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(stdout_json(&out)["error"]["message"]
        .as_str()
        .unwrap()
        .contains("OPENAI_API_KEY"));
    assert!(
        n.api.requests().is_empty(),
        "a request went out without a credential"
    );

    // Declared as not needed: an explicitly empty variable.
    n.api.push(Reply::anthropic_text(
        "You were making the gate faster; next, commit.",
    ));
    let out = n.recap(&[("ANTHROPIC_API_KEY", "")], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    let sent = &n.api.requests()[0];
    assert_eq!(sent.header("x-api-key"), None);
    assert_eq!(sent.header("authorization"), None);
}

#[test]
fn an_unsendable_key_is_auth_and_an_unparsable_url_is_usage() {
    let n = Net::new();
    for bad in [
        "sk-ant-line\nbreak-SECRET",
        "sk-ant-cr\rreturn-SECRET",
        "sk-ant-nul\u{1}-SECRET",
    ] {
        let out = n.recap(&[("ANTHROPIC_API_KEY", bad)], &["-v"]);
        assert_eq!(out.status.code(), Some(4), "{bad:?}");
        assert_eq!(stdout_json(&out)["error"]["kind"], "auth");
        assert!(!all_output(&out).contains("SECRET"), "{}", all_output(&out));
    }
    for url in ["not a url", "http://[::1", "ftp://127.0.0.1/", "http://"] {
        let out = n.recap(
            &[("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_BASE_URL", url)],
            &[],
        );
        assert_eq!(out.status.code(), Some(2), "{url}: {}", all_output(&out));
        assert_eq!(stdout_json(&out)["error"]["kind"], "usage", "{url}");
    }
    let home = ClaudeHome::new();
    let out = home
        .cmd("feedback")
        .arg("queue")
        .write_stdin(json!({"type": "bug", "title": "t", "details": "d"}).to_string())
        .output()
        .unwrap();
    let id = stdout_json(&out)["draft_id"].as_str().unwrap().to_string();
    for url in ["not a url", "http://[::1", "http://"] {
        let out = home
            .cmd("feedback")
            .args(["send", &id, "--endpoint", url, "--yes"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}: {}", all_output(&out));
        assert_eq!(stdout_json(&out)["error"]["kind"], "usage", "{url}");
    }
    assert!(n.api.requests().is_empty());
}
