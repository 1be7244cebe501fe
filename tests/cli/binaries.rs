//! What holds for every binary: help, version, usage errors in JSON, and no async runtime
//! where the network is not used (the file backend of the lock).

use crate::support::*;

const ALL: &[&str] = crate::support::BINARIES;

#[test]
fn help_version_and_usage_errors() {
    let home = ClaudeHome::new();
    for bin in ALL {
        Run::new(&home, bin)
            .arg("--help")
            .success()
            .stdout_with(|text| {
                assert!(text.contains("--pretty"), "{bin}: {text}");
                assert!(text.contains("--quiet"), "{bin}: {text}");
            })
            .stderr_empty()
            .run();
        Run::new(&home, bin)
            .arg("--version")
            .success()
            .stdout_with(|text| {
                assert!(
                    text.starts_with(&format!("{bin} {}", env!("CARGO_PKG_VERSION"))),
                    "{text}"
                );
            })
            .stderr_empty()
            .run();
        let ran = Run::new(&home, bin)
            .arg("--no-such-flg")
            .code(2)
            .stdout_json(|doc| {
                let message = doc["error"]["message"].as_str().unwrap();
                // The whole of clap's message, the "did you mean" tip and the Usage line
                // included.
                assert!(
                    message.starts_with("unexpected argument '--no-such-flg' found"),
                    "{bin}: {message}"
                );
                assert!(
                    message.contains(&format!("Usage: {bin}")),
                    "{bin}: {message}"
                );
                assert!(!message.contains("For more information"), "{message}");
                assert_eq!(doc["error"]["kind"], "usage");
            })
            // One line, as every other diagnostic: the Usage line and tips are in the JSON.
            .stderr_is(usage_stderr(
                bin,
                "unexpected argument '--no-such-flg' found",
            ))
            .run();
        assert_eq!(ran.stderr, clap_stderr(bin, &ran.json()), "{bin}");
        // -q silences stderr even when the flags do not parse.
        Run::new(&home, bin)
            .args(["-q", "--no-such-flg"])
            .code(2)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "usage"))
            .stderr_empty()
            .run();
    }
}

#[test]
fn usage_errors_name_what_is_missing_and_suggest_the_near_miss() {
    let home = ClaudeHome::new();
    for bin in ["dream-lock", "feedback"] {
        // Alone: a usage error naming the subcommands, not the tool's description.
        let ran = Run::new(&home, bin)
            .code(2)
            .stdout_json(|doc| {
                let message = doc["error"]["message"].as_str().unwrap();
                assert!(
                    message.starts_with(&format!("'{bin}' requires a subcommand")),
                    "{message}"
                );
                assert!(message.contains("[subcommands: "), "{message}");
                assert!(
                    message.contains(&format!("Usage: {bin} [OPTIONS] <COMMAND>")),
                    "{message}"
                );
            })
            .stderr_with(|stderr| {
                assert!(
                    stderr.starts_with(&format!(
                        "{bin}: '{bin}' requires a subcommand but one was not provided \
                         [subcommands: "
                    )),
                    "{stderr}"
                );
            })
            .run();
        assert_eq!(ran.stderr, clap_stderr(bin, &ran.json()), "{bin}");
    }
    let ran = Run::new(&home, "dream-lock")
        .arg("releas")
        .code(2)
        .stdout_json(|doc| {
            let message = &doc["error"]["message"];
            assert!(
                message
                    .as_str()
                    .unwrap()
                    .contains("tip: a similar subcommand exists: 'release'"),
                "{message}"
            );
        })
        .stderr_is(usage_stderr(
            "dream-lock",
            "unrecognized subcommand 'releas'",
        ))
        .run();
    assert_eq!(ran.stderr, clap_stderr("dream-lock", &ran.json()));
    let ran = Run::new(&home, "feedback")
        .arg("show")
        .code(2)
        .stdout_json(|doc| {
            let message = &doc["error"]["message"];
            assert!(
                message.as_str().unwrap().contains("<ID>")
                    && message.as_str().unwrap().contains("Usage: feedback show"),
                "the missing argument is named: {message}"
            );
        })
        .stderr_is(usage_stderr(
            "feedback",
            "the following required arguments were not provided: <ID>",
        ))
        .run();
    assert_eq!(ran.stderr, clap_stderr("feedback", &ran.json()));
}

/// The one stderr line of the usage error whose document is `doc`: its message's first line,
/// with the indented lines right below it.
fn clap_stderr(bin: &str, doc: &serde_json::Value) -> String {
    let message = doc["error"]["message"].as_str().expect("message");
    let mut lines = message.lines();
    let mut line = lines.next().unwrap_or_default().to_string();
    for more in lines.take_while(|l| l.starts_with("  ")) {
        line = format!("{line} {}", more.trim());
    }
    usage_stderr(bin, &line)
}

#[test]
fn help_subcommand_shows_a_subcommands_help() {
    let home = ClaudeHome::new();
    for (bin, sub, flag) in [
        ("dream-lock", "acquire", "--pid"),
        ("dream-lock", "release", "--outcome"),
        ("feedback", "send", "--endpoint"),
    ] {
        Run::new(&home, bin)
            .args(["help", sub])
            .success()
            .stdout_with(|text| {
                assert!(text.contains(&format!("Usage: {bin} {sub}")), "{text}");
                assert!(text.contains(flag), "{text}");
            })
            .stderr_empty()
            .run();
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
    Run::new(&home, "dream-lock")
        .args(["exec", "--", "sh", "-c", &runtime_probe(100)])
        .env_remove("DREAMKIT_LOCK_URL")
        .success()
        // exec on the file backend runs one thread and opens no event loop.
        .stdout_is("threads=1\nanon=0\n")
        .stderr_is("dream-lock: released the lock: completed, the consolidation time is now\n")
        .run();
}

/// A usage error that quotes a URL with a password redacts it on a terminal too (`script`
/// gives the binary a real pseudo-terminal), with NO_COLOR or without: one plain line.
#[test]
fn a_usage_error_on_a_terminal_redacts_a_url_password_in_colour_and_without() {
    let script_runs = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !script_runs {
        skip(
            "a_usage_error_on_a_terminal_redacts_a_url_password_in_colour_and_without",
            "no `script` to make a terminal",
        );
        return;
    }
    let home = ClaudeHome::new();
    let on_terminal = |no_color: bool| {
        let mut cmd = home.process("script");
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        let line = format!(
            "{} status --backend 'etcd://u:pw-SECRET@h:1' </dev/null",
            bin_path("dream-lock").display()
        );
        Run::command(cmd, "script")
            // -e: script exits with the command's code.
            .args(["-qec", &line, "/dev/null"])
            .code(2)
            .stdout_with(|text| {
                assert!(!text.contains("pw-SECRET"), "{text:?}");
                assert!(text.contains("etcd://[redacted]@h:1"), "{text:?}");
            })
            // `script` puts the command's stderr on the terminal too; its own is empty.
            .stderr_empty()
            .run()
            .stdout
    };
    for no_color in [false, true] {
        let shown = on_terminal(no_color);
        assert!(!shown.contains('\x1b'), "{shown:?}");
        assert!(
            shown.contains(
                "dream-lock: invalid value 'etcd://[redacted]@h:1' for '--backend <URL>'"
            ),
            "{shown:?}"
        );
    }
}
