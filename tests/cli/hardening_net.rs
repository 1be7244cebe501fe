//! The network layer as an attacker meets it: redirects to other hosts, servers that echo
//! credentials or never stop sending, URLs with secrets in them, missing or unsendable
//! credentials. Shared by every model tool (recap here) and `feedback send`.

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::run::{one_json_line, Ran};
use crate::support::transcript::Transcript;
use crate::support::{hours, ClaudeHome, Run};

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

    /// recap on the transcript against the fake model, with `env` and `extra`; the caller
    /// says what it must print.
    fn recap<'a>(&self, env: &[(&str, &str)], extra: &[&str]) -> Run<'a> {
        Run::new(&self.home, "recap")
            .env("ANTHROPIC_BASE_URL", self.api.url())
            .env("DREAMKIT_RETRY_BASE_MS", "1")
            .arg("--transcript")
            .arg(&self.transcript)
            .args(extra)
            .envs(env.iter().copied())
    }
}

/// Everything a run printed, stdout then stderr.
fn all_output(ran: &Ran) -> String {
    format!("{}{}", ran.stdout, ran.stderr)
}

/// One line on stderr, from `tool`.
fn one_line(tool: &str, err: &str) {
    assert!(err.starts_with(&format!("{tool}: ")), "{err}");
    assert!(err.ends_with('\n'), "{err:?}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// The run's stderr is `tool`'s one line: `lead`, then the document's `error.message`.
fn said(ran: &Ran, tool: &str, lead: &str) {
    let doc = ran.json();
    let message = doc["error"]["message"].as_str().expect("error.message");
    assert_eq!(ran.stderr, format!("{tool}: {lead}{message}\n"));
}

impl Net {
    /// What `recap -v` says on stderr for a request that failed: how it read the transcript,
    /// the mode, the request when it `asked`, then the failure (`error.kind` and
    /// `error.message` of its document; `model request failed: ` first once it asked).
    fn verbose_failure(&self, ran: &Ran, asked: bool) {
        let doc = ran.json();
        let (kind, message) = (
            doc["error"]["kind"].as_str().expect("kind"),
            doc["error"]["message"].as_str().expect("message"),
        );
        let (asking, failed) = if asked {
            (
                "recap: asking claude-haiku-4-5 about 3 messages\n",
                "model request failed: ",
            )
        } else {
            ("", "")
        };
        assert_eq!(
            ran.stderr,
            format!(
                "recap: read {}: 3 messages of context, 2 real user turns and no away summary, \
                 read to the start\n\
                 recap: default mode (/recap): no gates, nothing is written\n\
                 {asking}recap: {failed}{kind}: {message}\n",
                self.transcript.display()
            )
        );
    }
}

/// Every line `recap -v` prints is its own.
fn recap_lines(err: &str) {
    assert!(err.lines().all(|l| l.starts_with("recap: ")), "{err}");
}

/// `feedback queue` of a bug in `home`, which must succeed; the draft's id.
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
fn a_redirect_to_another_origin_is_not_followed_and_gets_no_key() {
    let n = Net::new();
    let elsewhere = FakeApi::start();
    elsewhere.push(Reply::anthropic_text("stolen"));
    let location = format!("{}/v1/messages", elsewhere.url());
    for status in [301, 302, 307, 308] {
        n.api
            .push(Reply::json(status, json!({})).with_header("location", &location));
        let ran = n
            .recap(&[("ANTHROPIC_API_KEY", KEY)], &["-v"])
            .code(4)
            .stdout_json(|doc| {
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
            })
            .stderr_with(recap_lines)
            .run();
        n.verbose_failure(&ran, true);
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
    let id = queue_draft(&home);
    first.push(
        Reply::json(302, json!({})).with_header("location", &format!("{}/x", elsewhere.url())),
    );
    let ran = Run::new(&home, "feedback")
        .args([
            "send",
            &id,
            "--endpoint",
            &format!("{}/feedback", first.url()),
            "--yes",
            "--retries",
            "0",
        ])
        .code(4)
        .stdout_json(|doc| assert_eq!(doc["sent"], false))
        .stderr_with(|e| one_line("feedback", e))
        .run();
    said(&ran, "feedback", "not sent, the draft is kept: ");
    assert!(
        elsewhere.requests().is_empty(),
        "the payload followed the redirect"
    );
    // The draft is kept for another try.
    Run::new(&home, "feedback")
        .args(["show", &id])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["draft_id"], id.as_str());
            assert_eq!(doc["status"], "queued");
        })
        .stderr_empty()
        .run();
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
        let out = n
            .recap(&[(var, secret)], &["-v"])
            .code(4)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "auth", "{var}"))
            .stderr_with(recap_lines)
            .run();
        n.verbose_failure(&out, true);
        let text = all_output(&out);
        assert!(!text.contains(secret), "{var} printed: {text}");
        assert!(text.contains("[redacted]"), "{text}");
        // A 200 that fails to parse, with the key inside.
        n.api.push(Reply::Http {
            status: 200,
            headers: Vec::new(),
            body: format!("{{\"echo\": \"{secret}\""),
        });
        let out = n
            .recap(&[(var, secret)], &["-v"])
            .code(4)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "malformed_response", "{var}"))
            .stderr_with(recap_lines)
            .run();
        n.verbose_failure(&out, true);
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
    let id = queue_draft(&home);
    let out = Run::new(&home, "feedback")
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
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["sent"], false);
            assert_eq!(doc["error"]["kind"], "auth");
        })
        .stderr_with(|e| one_line("feedback", e))
        .run();
    said(&out, "feedback", "not sent, the draft is kept: ");
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
    let out = n
        .recap(
            &[("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_BASE_URL", base)],
            &["-v", "--retries", "0"],
        )
        .code(4)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "network"))
        .stderr_with(recap_lines)
        .run();
    n.verbose_failure(&out, true);
    let text = all_output(&out);
    assert!(!text.contains("hunter2pass"), "{text}");
    assert!(
        text.contains("127.0.0.1:9"),
        "the host is still named: {text}"
    );
    // A base URL with a query is refused before any request (the path would land in the
    // query), and its values are not shown in the refusal either.
    let base = "http://someone:hunter2pass@127.0.0.1:9/api?key=qsecret98765";
    let out = n
        .recap(
            &[("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_BASE_URL", base)],
            &["-v", "--retries", "0"],
        )
        .code(2)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "usage"))
        .stderr_with(|e| one_line("recap", e))
        .run();
    said(&out, "recap", "");
    let text = all_output(&out);
    assert!(
        !text.contains("hunter2pass") && !text.contains("qsecret98765"),
        "{text}"
    );
    assert!(text.contains("ANTHROPIC_BASE_URL"), "{text}");

    let home = ClaudeHome::new();
    let id = queue_draft(&home);
    let endpoint = "http://u:pw-in-endpoint-42@127.0.0.1:9/f?token=tok-in-endpoint-42";
    let out = Run::new(&home, "feedback")
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
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["sent"], false);
            assert_eq!(doc["error"]["kind"], "network");
        })
        .stderr_with(|e| one_line("feedback", e))
        .run();
    said(&out, "feedback", "not sent, the draft is kept: ");
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
        // Not through Run: run under ptrace, which Run cannot do (its wait would take the tracee's
        // stops for its exit); all three streams are checked here instead.
        let (out, peak_kib) = crate::net::run_measuring_peak_rss(cmd);
        let doc: Value = one_json_line(std::str::from_utf8(&out.stdout).unwrap());
        assert_eq!(out.status.code(), Some(4), "{doc}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "recap: model request failed: malformed_response: {}\n",
                doc["error"]["message"].as_str().unwrap()
            )
        );
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
    let ran = n
        .recap(&[], &[])
        .code(4)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "auth");
            let message = doc["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("ANTHROPIC_API_KEY") && message.contains("ANTHROPIC_AUTH_TOKEN"),
                "{message}"
            );
        })
        .stderr_with(|err| {
            assert_eq!(err.lines().count(), 1, "{err}");
        })
        .run();
    said(&ran, "recap", "auth: ");
    let ran = n
        .recap(&[("OPENAI_MODEL", "llama")], &["--provider", "openai"])
        .code(4)
        .stdout_json(|doc| {
            assert!(doc["error"]["message"]
                .as_str()
                .unwrap()
                .contains("OPENAI_API_KEY"));
        })
        .stderr_with(|e| one_line("recap", e))
        .run();
    said(&ran, "recap", "auth: ");
    assert!(
        n.api.requests().is_empty(),
        "a request went out without a credential"
    );

    // Declared as not needed: an explicitly empty variable.
    n.api.push(Reply::anthropic_text(
        "You were making the gate faster; next, commit.",
    ));
    n.recap(&[("ANTHROPIC_API_KEY", "")], &[])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["status"], "ok");
            assert_eq!(
                doc["text"],
                "You were making the gate faster; next, commit."
            );
        })
        .stderr_empty()
        .run();
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
        let out = n
            .recap(&[("ANTHROPIC_API_KEY", bad)], &["-v"])
            .code(4)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "auth", "{bad:?}"))
            .stderr_with(recap_lines)
            .run();
        n.verbose_failure(&out, false);
        assert!(!all_output(&out).contains("SECRET"), "{}", all_output(&out));
    }
    for url in ["not a url", "http://[::1", "ftp://127.0.0.1/", "http://"] {
        let ran = n
            .recap(
                &[("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_BASE_URL", url)],
                &[],
            )
            .code(2)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "usage", "{url}"))
            .stderr_with(|e| one_line("recap", e))
            .run();
        said(&ran, "recap", "");
    }
    let home = ClaudeHome::new();
    let id = queue_draft(&home);
    for url in ["not a url", "http://[::1", "http://"] {
        let ran = Run::new(&home, "feedback")
            .args(["send", &id, "--endpoint", url, "--yes"])
            .code(2)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "usage", "{url}"))
            .stderr_with(|e| one_line("feedback", e))
            .run();
        said(&ran, "feedback", "");
    }
    assert!(n.api.requests().is_empty());
}
