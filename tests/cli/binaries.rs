//! What holds for every binary: help, version, usage errors in JSON, and no async runtime
//! where the network is not used (the file backend of the lock).

use predicates::prelude::*;

use crate::support::*;

const ALL: &[&str] = crate::support::BINARIES;

#[test]
fn help_version_and_usage_errors() {
    let home = ClaudeHome::new();
    for bin in ALL {
        home.cmd(bin)
            .arg("--help")
            .assert()
            .success()
            .stdout(predicate::str::contains("--pretty").and(predicate::str::contains("--quiet")));
        home.cmd(bin)
            .arg("--version")
            .assert()
            .success()
            .stdout(predicate::str::starts_with(format!(
                "{bin} {}",
                env!("CARGO_PKG_VERSION")
            )));
        let out = home.cmd(bin).arg("--no-such-flg").output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bin}");
        let message = stdout_json(&out)["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        // The whole of clap's message, the "did you mean" tip and the Usage line included.
        assert!(
            message.starts_with("unexpected argument '--no-such-flg' found"),
            "{bin}: {message}"
        );
        assert!(
            message.contains(&format!("Usage: {bin}")),
            "{bin}: {message}"
        );
        assert!(!message.contains("For more information"), "{message}");
        let stderr = stderr_text(&out);
        assert!(
            stderr.starts_with("error: unexpected argument '--no-such-flg' found"),
            "{bin}: {stderr}"
        );
        assert!(stderr.contains(&format!("\nUsage: {bin}")), "{stderr}");
        assert_eq!(stdout_json(&out)["error"]["kind"], "usage");
        // -q silences stderr even when the flags do not parse.
        home.cmd(bin)
            .args(["-q", "--no-such-flg"])
            .assert()
            .code(2)
            .stderr("");
    }
}

#[test]
fn usage_errors_name_what_is_missing_and_suggest_the_near_miss() {
    let home = ClaudeHome::new();
    for bin in ["dream-lock", "feedback"] {
        // Alone: a usage error naming the subcommands, not the tool's description.
        let out = home.cmd(bin).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let message = stdout_json(&out)["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            message.starts_with(&format!("'{bin}' requires a subcommand")),
            "{message}"
        );
        assert!(message.contains("[subcommands: "), "{message}");
        assert!(
            message.contains(&format!("Usage: {bin} [OPTIONS] <COMMAND>")),
            "{message}"
        );
        assert!(stderr_text(&out).contains("requires a subcommand"));
    }
    let out = home.cmd("dream-lock").arg("releas").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let message = stdout_json(&out)["error"]["message"].clone();
    assert!(
        message
            .as_str()
            .unwrap()
            .contains("tip: a similar subcommand exists: 'release'"),
        "{message}"
    );
    let out = home.cmd("feedback").arg("show").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let message = stdout_json(&out)["error"]["message"].clone();
    assert!(
        message.as_str().unwrap().contains("<ID>")
            && message.as_str().unwrap().contains("Usage: feedback show"),
        "the missing argument is named: {message}"
    );
}

#[test]
fn help_subcommand_shows_a_subcommands_help() {
    let home = ClaudeHome::new();
    for (bin, sub, flag) in [
        ("dream-lock", "acquire", "--pid"),
        ("dream-lock", "release", "--outcome"),
        ("feedback", "send", "--endpoint"),
    ] {
        home.cmd(bin).args(["help", sub]).assert().success().stdout(
            predicate::str::contains(format!("Usage: {bin} {sub}"))
                .and(predicate::str::contains(flag)),
        );
    }
}

/// What `dream-lock exec` looks like from its command while the command runs: the threads
/// of exec (waiting up to `tries` tenths of a second for the envelope's writer to end) and
/// its epoll / eventfd descriptors, which every tokio runtime opens. The etcd tests run the
/// same probe and see a runtime.
pub(crate) fn runtime_probe(tries: u32) -> String {
    format!(
        "cat >/dev/null; \
         for i in $(seq {tries}); do n=$(ls /proc/$PPID/task | wc -l); [ \"$n\" -eq 1 ] && break; sleep 0.1; done; \
         echo threads=$n; echo anon=$(ls -l /proc/$PPID/fd | grep -c 'anon_inode:\\[event')"
    )
}

#[test]
fn the_file_backend_starts_no_async_runtime() {
    let home = ClaudeHome::new();
    let out = home
        .cmd("dream-lock")
        .args(["exec", "--", "sh", "-c", &runtime_probe(100)])
        .env_remove("DREAMKIT_LOCK_URL")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "threads=1\nanon=0\n",
        "exec on the file backend runs one thread and opens no event loop"
    );
}
