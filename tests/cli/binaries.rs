//! What holds for every binary: help, version, usage errors in JSON, and no async runtime in
//! the ones that never touch the network.

use predicates::prelude::*;

use crate::support::*;

const ALL: &[&str] = &[
    "dream-gate",
    "dream-lock",
    "recap",
    "turn-status",
    "feedback",
];

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

/// Defined symbols of a binary, demangled (`nm` from binutils, which gcc brings).
fn symbols(bin: &str) -> String {
    let out = std::process::Command::new("nm")
        .arg("-C")
        .arg(bin_path(bin))
        .output()
        .expect("nm (binutils) is needed for this test");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn binaries_that_never_touch_the_network_link_no_async_runtime() {
    let runtime = |bin: &str| {
        symbols(bin)
            .lines()
            .filter(|l| l.contains("tokio::runtime"))
            .count()
    };
    assert!(
        runtime("recap") > 0,
        "the check itself is blind: recap must show a runtime"
    );
    assert_eq!(runtime("dream-gate"), 0);
    assert_eq!(runtime("dream-lock"), 0);
}
