//! What holds for every binary: help, version, usage errors in JSON, and no async runtime in
//! the ones that never touch the network.

use predicates::prelude::*;

use crate::support::*;

const ALL: &[&str] = &["dream-gate", "dream-lock", "recap", "feedback"];

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
        home.cmd(bin)
            .arg("--no-such-flag")
            .assert()
            .code(2)
            .stdout(predicate::str::starts_with(
                r#"{"error":{"kind":"usage","message":"#,
            ))
            .stderr(predicate::str::is_match(format!("^{bin}: [^\n]+\n$")).unwrap());
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
