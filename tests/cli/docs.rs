//! The committed man pages and completions are what the clap definitions generate.

use std::path::Path;

use crate::support::run::{one_json_line, Ran};
use crate::support::Run;

#[test]
fn committed_man_pages_and_completions_are_up_to_date() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = dreamkit::cli::docs::render_all(dreamkit::doc_pages());
    assert!(files.len() >= 4);
    let mut stale = Vec::new();
    for (path, expected) in files {
        let committed = std::fs::read(root.join(&path)).unwrap_or_default();
        if committed != expected {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "out of date: {stale:?}; run `make man completions`"
    );
}

/// Directories and a file to complete against, in a fresh working directory.
fn completion_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("somedir")).unwrap();
    std::fs::write(dir.path().join("somefile"), "").unwrap();
    dir
}

/// What bash offers for the last word of `line`, using the committed completion script the
/// way bash's programmable completion calls it: COMP_WORDS, COMP_CWORD and the function
/// registered with `complete -F`, reading COMPREPLY. `compopt -o plusdirs` (directories
/// added by bash itself) is honoured; it only works inside a real completion, so it is
/// stood in for by a function.
fn bash_complete(line: &str) -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let words: Vec<&str> = if line.ends_with(' ') {
        line.split_whitespace().chain([""]).collect()
    } else {
        line.split_whitespace().collect()
    };
    let bin = words[0];
    let cword = words.len() - 1;
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        r#"set -u
plusdirs=
compopt() {{ [[ " $* " == *" -o plusdirs "* ]] && plusdirs=1; return 0; }}
source '{script}' || exit 90
spec=$(complete -p {bin}) || exit 91
fn=$(sed -E 's/.* -F ([^ ]+) .*/\1/' <<<"$spec")
COMP_WORDS=({words})
COMP_CWORD={cword}
COMPREPLY=()
"$fn" {bin} "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
[ -n "$plusdirs" ] && COMPREPLY+=($(compgen -d -- "${{COMP_WORDS[COMP_CWORD]}}"))
printf '%s\n' "${{COMPREPLY[@]}}"
"#,
        script = root.join(format!("completions/{bin}.bash")).display(),
        words = quoted.join(" "),
    );
    let dir = completion_dir();
    let mut bash = std::process::Command::new("bash");
    bash.args(["--norc", "--noprofile", "-c", &script])
        .current_dir(dir.path());
    let out = Run::command(bash, &format!("bash completion of {line:?}"))
        .success()
        // One candidate a line (an empty COMPREPLY prints one empty line); the callers check
        // which.
        .stdout_with(|text| assert!(text.ends_with('\n'), "{text:?}"))
        .stderr_empty()
        .run();
    let mut candidates: Vec<String> = out
        .stdout
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    candidates.sort();
    candidates
}

#[test]
fn bash_completion_completes_subcommands_flags_and_values() {
    assert_eq!(
        bash_complete("dream-lock release --outcome "),
        ["aborted", "completed", "failed"]
    );
    assert!(bash_complete("dream-lock release --o").contains(&"--outcome".to_string()));
    assert_eq!(bash_complete("dream-lock acq"), ["acquire"]);
    assert!(bash_complete("dream-lock exec --").contains(&"--cwd".to_string()));
    assert!(bash_complete("feedback send --").contains(&"--endpoint".to_string()));
    assert!(bash_complete("dream-gate --min").contains(&"--min-hours".to_string()));
    assert!(bash_complete("recap --").contains(&"--transcript".to_string()));
    // Directory flags offer directories only; path flags offer files too.
    assert_eq!(bash_complete("dream-gate --cwd some"), ["somedir"]);
    assert_eq!(
        bash_complete("dream-lock status --memory-dir some"),
        ["somedir"]
    );
    assert_eq!(
        bash_complete("recap --transcript some"),
        ["somedir", "somefile"]
    );
    // Fixed-value flags offer their values.
    for (line, values) in FIXED_VALUES {
        assert_eq!(bash_complete(line), *values, "{line}");
    }
}

/// Flags that take one of a fixed set of values, and what completing them offers (sorted).
const FIXED_VALUES: &[(&str, &[&str])] = &[
    (
        "feedback queue --type ",
        &["bug", "idea", "missing_capability"],
    ),
    (
        "feedback queue --trigger ",
        &[
            "exit_nudge",
            "missing_capability",
            "model_judgment",
            "tool_error",
            "user_frustration",
        ],
    ),
];

/// `Some(path)` of a shell, or None with a note (CI installs them: see .ci/run).
fn shell(name: &str) -> Option<String> {
    let found = std::process::Command::new(name)
        .arg("-c")
        .arg("exit 0")
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        crate::support::skip(
            &format!("{name} completions"),
            &format!("{name} is not installed (.ci/run installs it: apt-get install -y {name})"),
        );
    }
    found.then(|| name.to_string())
}

#[test]
fn zsh_completions_load_without_errors() {
    let Some(zsh) = shell("zsh") else { return };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for bin in ["dream-gate", "dream-lock", "dream-run", "recap", "feedback"] {
        let script = root.join(format!("completions/_{bin}"));
        Run::command(std::process::Command::new(&zsh), &format!("zsh: {bin}"))
            .args(["-f", "-c"])
            .arg(format!(
                "autoload -U compinit && compinit -u -D && source '{}' && \
                 [[ $_comps[{bin}] == _{bin} ]]",
                script.display()
            ))
            .success()
            .stdout_empty()
            .stderr_empty()
            .run();
    }
}

/// What zsh offers for `line`: an interactive zsh under zpty loads the committed script with
/// compinit, and a `compadd` wrapped around the builtin prints the matches the completion
/// adds (between markers) when a Tab is typed after `line`. The markers are never typed
/// whole (`"<"hits">"`): the terminal echoes what is typed, once at once and again when zle
/// reads the line, and an echoed marker would end a read early. The Tab is the last thing typed (zle
/// may skip a completion while more input waits); a completion that adds nothing leaves the
/// read waiting, and the run's timeout ends it as a failure.
fn zsh_complete(zsh: &str, line: &str) -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = completion_dir();
    let script = format!(
        r#"zmodload zsh/zpty || exit 90
zpty -b z {zsh} -f -i || exit 91
zpty -w z 'PS1=; PS2=; unsetopt zle_bracketed_paste 2>/dev/null; fpath=({completions} $fpath); autoload -U compinit; compinit -u -D'
zpty -w z 'compadd() {{ local -a __hits; builtin compadd -O __hits "$@"; (( $#__hits )) && print -r -- "<"hits">${{(j: :)__hits}}</"hits">" >/dev/tty; builtin compadd "$@"; }}'
zpty -w z 'print -r -- "<"ready">"'
zpty -r z out '*<ready>*' || exit 92
zpty -w -n z $'{line}	'
zpty -r z out '*</hits>*' || exit 93
print -r -- "$out"
zpty -d z
"#,
        completions = root.join("completions").display(),
    );
    let out = Run::command(
        std::process::Command::new(zsh),
        &format!("zsh completion of {line:?}"),
    )
    .args(["-f", "-c", &script])
    .env("HOME", dir.path())
    .current_dir(dir.path())
    .success()
    .stdout_any("the terminal's echo around the matches; the callers check the matches")
    .stderr_empty()
    .timeout(std::time::Duration::from_secs(30))
    .run();
    let mut candidates: Vec<String> = out
        .stdout
        .split("<hits>")
        .skip(1)
        .filter_map(|hits| hits.split("</hits>").next())
        .flat_map(str::split_whitespace)
        .map(str::to_string)
        .collect();
    candidates.sort();
    candidates.dedup();
    candidates
}

#[test]
fn zsh_completes_fixed_values() {
    let Some(zsh) = shell("zsh") else { return };
    for (line, values) in FIXED_VALUES {
        assert_eq!(zsh_complete(&zsh, line), *values, "{line}");
    }
}

/// What fish offers for `line` (`complete -C`), with the committed script loaded.
fn fish_complete(fish: &str, line: &str) -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = line.split_whitespace().next().unwrap();
    let dir = completion_dir();
    let out = Run::command(
        std::process::Command::new(fish),
        &format!("fish completion of {line:?}"),
    )
    .args(["--no-config", "-c"])
    .arg(format!(
        "source '{}'; and complete -C '{line}'",
        root.join(format!("completions/{bin}.fish")).display()
    ))
    .env("HOME", dir.path())
    .current_dir(dir.path())
    .success()
    // One candidate a line (a tab before its description); the callers check which.
    .stdout_with(|text| assert!(text.is_empty() || text.ends_with('\n'), "{text:?}"))
    .stderr_empty()
    .run();
    let mut candidates: Vec<String> = out
        .stdout
        .lines()
        .map(|l| l.split('\t').next().unwrap_or("").to_string())
        .collect();
    candidates.sort();
    candidates
}

#[test]
fn fish_completions_load_and_complete() {
    let Some(fish) = shell("fish") else { return };
    assert_eq!(
        fish_complete(&fish, "dream-lock release --outcome "),
        ["aborted", "completed", "failed"]
    );
    assert!(fish_complete(&fish, "feedback send --").contains(&"--endpoint".to_string()));
    assert_eq!(fish_complete(&fish, "dream-gate --cwd some"), ["somedir/"]);
    for (line, values) in FIXED_VALUES {
        assert_eq!(fish_complete(&fish, line), *values, "{line}");
    }
    for bin in ["dream-gate", "recap"] {
        assert!(!fish_complete(&fish, &format!("{bin} --")).is_empty());
    }
}

/// `sudo make install` must not compile as root: install uses what `make` built, and says so
/// when it is missing instead of running cargo.
/// The files `make install` reads, copied into a temporary tree (no `target/` yet).
pub(crate) fn install_tree() -> tempfile::TempDir {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tree = tempfile::tempdir().unwrap();
    std::fs::copy(root.join("Makefile"), tree.path().join("Makefile")).unwrap();
    for dir in [
        "man",
        "completions",
        ".claude-plugin",
        "plugin",
        "plugin/.claude-plugin",
        "plugin/hooks",
        "plugin/scripts",
        "plugin/commands",
        // The Makefile's BINS is this folder.
        "src/bin",
    ] {
        std::fs::create_dir_all(tree.path().join(dir)).unwrap();
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), tree.path().join(dir).join(entry.file_name())).unwrap();
            }
        }
    }
    tree
}

/// `make install PREFIX=prefix` in `tree`, as a user runs it from a shell: not as a sub-make
/// of a `make test` that may be running these tests (with its MAKELEVEL, make would print
/// "Entering directory" lines and name itself `make[2]`).
pub(crate) fn make_install<'a>(tree: &Path, prefix: &Path) -> Run<'a> {
    let mut make = std::process::Command::new("make");
    make.current_dir(tree)
        .env_remove("MAKELEVEL")
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS");
    Run::command(make, "make")
        .arg("install")
        .arg(format!("PREFIX={}", prefix.display()))
}

/// What `make install` says on stdout once it has installed the plugin under `prefix`.
fn plugin_installed(prefix: &Path) -> String {
    format!(
        "installed the Claude Code plugin in {}\n",
        prefix.join("share/dreamkit/plugin").display()
    )
}

#[test]
fn make_install_installs_what_was_built_and_never_builds() {
    use crate::support::{bin_path, mode};
    let tree = install_tree();
    // A cargo that leaves a mark if anything calls it.
    let cargo = tree.path().join("fake-cargo");
    let mark = tree.path().join("cargo-was-run");
    std::fs::write(
        &cargo,
        format!("#!/bin/sh\ntouch '{}'\nexit 1\n", mark.display()),
    )
    .unwrap();
    crate::support::chmod(&cargo, 0o755);
    let prefix = tree.path().join("prefix");
    let make = || make_install(tree.path(), &prefix).arg(format!("CARGO={}", cargo.display()));
    make()
        .code(2)
        .stdout_empty()
        .stderr_with(|stderr| {
            // The Makefile's one line, then make's own (its line number may move).
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(
                lines[0],
                "make install: target/release/dream-gate is missing: \
                 run `make` first (as yourself, not root)"
            );
            assert_eq!(lines.len(), 2, "{stderr}");
            assert!(
                lines[1].starts_with("make: *** [Makefile:")
                    && lines[1].ends_with(": install] Error 1")
                    && stderr.ends_with('\n'),
                "{stderr}"
            );
        })
        .run();
    assert!(!mark.exists(), "install ran cargo");
    assert!(!prefix.join("bin").exists(), "nothing is installed");

    let release = tree.path().join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    for bin in crate::support::BINARIES {
        std::fs::copy(bin_path(bin), release.join(bin)).unwrap();
    }
    make()
        .success()
        .stdout_contains(plugin_installed(&prefix))
        .stderr_empty()
        .run();
    assert!(!mark.exists(), "install ran cargo");
    let meta = std::fs::metadata(prefix.join("bin/dream-lock")).unwrap();
    assert_eq!(mode(&meta), 0o755);
    assert!(prefix.join("share/man/man1/dream-lock-exec.1").exists());
    assert!(prefix
        .join("share/bash-completion/completions/dream-lock")
        .exists());
    assert!(prefix.join("share/zsh/site-functions/_feedback").exists());
    assert!(prefix
        .join("share/fish/vendor_completions.d/recap.fish")
        .exists());
    // The Claude Code plugin, loadable with `claude --plugin-dir PREFIX/share/dreamkit/plugin`.
    let plugin = prefix.join("share/dreamkit/plugin");
    assert!(plugin.join(".claude-plugin/plugin.json").is_file());
    assert!(plugin.join("hooks/hooks.json").is_file());
    assert!(plugin.join("commands/dream-show.md").is_file());
    let hook = std::fs::metadata(plugin.join("scripts/stop.sh")).unwrap();
    assert_eq!(mode(&hook), 0o755);
    // Its marketplace beside it, naming it: `claude plugin marketplace add PREFIX/share/dreamkit`
    // installs this copy, which outlives the clone.
    let marketplace: serde_json::Value = serde_json::from_slice(
        &std::fs::read(prefix.join("share/dreamkit/.claude-plugin/marketplace.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(marketplace["plugins"][0]["source"], "./plugin");
    // uninstall takes all of it away.
    let mut make = std::process::Command::new("make");
    make.current_dir(tree.path())
        .env_remove("MAKELEVEL")
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS");
    Run::command(make, "make uninstall")
        .arg("uninstall")
        .arg(format!("PREFIX={}", prefix.display()))
        .success()
        .stdout_any("the commands make echoes")
        .stderr_empty()
        .run();
    assert!(!prefix.join("share/dreamkit").exists());
    assert!(!prefix.join("bin/dream-lock").exists());
}

/// What a reader of the generated man pages relies on.
#[test]
fn man_pages_have_one_subcommands_section_values_in_synopsis_and_see_also() {
    let files = dreamkit::cli::docs::render_all(dreamkit::doc_pages());
    let pages: Vec<(String, String)> = files
        .into_iter()
        .filter(|(path, _)| path.starts_with("man"))
        .map(|(path, text)| (path.display().to_string(), String::from_utf8(text).unwrap()))
        .collect();
    assert!(pages.len() >= 13, "{}", pages.len());
    for (path, text) in &pages {
        let headings: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix(".SH "))
            .map(|h| h.trim_matches('"'))
            .collect();
        for heading in &headings {
            assert_eq!(
                headings.iter().filter(|h| *h == heading).count(),
                1,
                "{path}: section {heading} twice"
            );
        }
        assert!(headings.contains(&"SEE ALSO"), "{path}: {headings:?}");
        assert!(headings.contains(&"EXIT STATUS"), "{path}");
        let synopsis = text
            .split(".SH SYNOPSIS\n")
            .nth(1)
            .and_then(|t| t.lines().next())
            .unwrap_or_default();
        // Every option that takes a value shows it: `--cwd DIR`, not `--cwd`.
        for flag in ["cwd", "memory\\-dir", "transcripts\\-dir", "backend"] {
            if let Some(at) = synopsis.find(&format!("\\fB\\-\\-{flag}\\fR")) {
                assert!(
                    synopsis[at..].contains(&format!("\\-\\-{flag}\\fR \\fI")),
                    "{path}: {synopsis}"
                );
            }
        }
    }
    let page = |name: &str| {
        pages
            .iter()
            .find(|(p, _)| p == name)
            .map(|(_, t)| t.as_str())
            .unwrap()
    };
    let exec = page("man/dream-lock-exec.1");
    for code in ["126", "127", "128+N"] {
        assert!(
            exec.contains(&format!(".TP\n\\fB{code}\\fR\n")),
            "{code}: {exec}"
        );
    }
    assert!(exec.contains("[\\fB\\-\\-\\fR] \\fICMD\\fR..."), "{exec}");
    assert!(page("man/dream-gate.1").contains("\\fBdream\\-lock\\fR(1)"));
    assert!(page("man/dream-lock-release.1").contains("\\fB\\-\\-outcome\\fR \\fIOUTCOME\\fR"));
    assert!(page("man/dream-lock.1").contains("\\fBdream\\-lock\\-exec\\fR(1)"));
}

/// The README and docs/ cite only what the repository holds, the licences `Cargo.toml` declares exist,
/// and the minimum Rust version is the highest any locked dependency declares.
#[test]
fn readme_licenses_and_rust_version_hold() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    // The README and the guide under docs/ it links to.
    let mut docs = vec![std::path::PathBuf::from("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            docs.push(path.strip_prefix(root).unwrap().to_path_buf());
        }
    }
    assert!(docs.len() >= 4, "{docs:?}");
    for doc in &docs {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        let words: Vec<String> = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
            .map(|w| w.trim_matches('.').to_ascii_lowercase())
            .collect();
        for outside in ["spec", "spec.md", "architecture.md"] {
            assert!(
                !words.iter().any(|w| w == outside),
                "{} cites {outside}, which is not in the repository",
                doc.display()
            );
        }
        // Relative links point at files that exist (relative to the document's folder). Text
        // in backticks is code, not a link (the index line's shape, `- [Title](file.md)`).
        let dir = root.join(doc.parent().unwrap_or(std::path::Path::new("")));
        let prose: String = text
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, part)| part)
            .collect::<Vec<_>>()
            .join(" ");
        for link in prose.split("](").skip(1) {
            let target = link.split(')').next().unwrap_or_default();
            let file = target.split('#').next().unwrap_or_default();
            if !target.contains("://") && !file.is_empty() {
                assert!(
                    dir.join(file).exists(),
                    "{} links to {target}",
                    doc.display()
                );
            }
        }
    }
    // Every guide page is reachable from the README.
    for doc in docs.iter().skip(1) {
        assert!(
            readme.contains(&format!("]({})", doc.display())),
            "README.md does not link to {}",
            doc.display()
        );
    }
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("license = \"MIT OR Apache-2.0\""));
    let mit = std::fs::read_to_string(root.join("LICENSE-MIT")).unwrap();
    assert!(
        mit.starts_with("Copyright (c) the dreamkit authors\n"),
        "{mit}"
    );
    assert!(mit.contains("Permission is hereby granted, free of charge"));
    let apache = std::fs::read_to_string(root.join("LICENSE-APACHE")).unwrap();
    assert!(apache.contains("Version 2.0, January 2004"));
    assert!(apache.contains("END OF TERMS AND CONDITIONS"));

    let declared = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("rust-version in Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Its exit tells whether the packages are here; stdout is the one JSON document then,
    // and stderr says why not otherwise (both checked by `metadata_ok`).
    let metadata = |offline: bool| {
        let mut cmd = std::process::Command::new(&cargo);
        cmd.current_dir(root);
        let mut run =
            Run::command(cmd, "cargo").args(["metadata", "--format-version", "1", "--locked"]);
        if offline {
            run = run.arg("--offline");
        }
        run.code_any("0 when the locked packages are here (or fetched), else the test skips")
            .stdout_with(|text| {
                if !text.is_empty() {
                    one_json_line(text);
                }
            })
            .stderr_any("checked by metadata_ok against the exit status")
            .run()
    };
    // Every platform's packages are needed; a fresh clone has only this one's: fetch them
    // (what `.ci/run` does first), or say why this could not be checked.
    let mut out = metadata(true);
    if !metadata_ok(&out, true) {
        out = metadata(false);
        if !metadata_ok(&out, false) {
            crate::support::skip(
                "readme_licenses_and_rust_version_hold",
                &format!(
                    "the locked packages cannot be fetched (offline?): {}",
                    out.stderr.lines().last().unwrap_or("")
                ),
            );
            return;
        }
    }
    assert_eq!(out.code, Some(0));
    let metadata: serde_json::Value = one_json_line(&out.stdout);
    let version = |v: &str| -> Vec<u32> { v.split('.').map(|n| n.parse().unwrap_or(0)).collect() };
    let (floor, by) = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["name"] != "dreamkit")
        .filter_map(|p| Some((p["rust_version"].as_str()?, p["name"].as_str()?)))
        .max_by_key(|(v, _)| version(v))
        .unwrap();
    assert_eq!(
        version(declared)[..2],
        version(floor)[..2],
        "rust-version {declared}, but {by} needs {floor}"
    );
    assert!(
        readme.contains(&format!("{declared} or newer")),
        "the README states the minimum Rust version"
    );
}

/// After `make install PREFIX=~/.local`, as a user without root does it, the completions are
/// found by real shells: fish and bash-completion look there by themselves; zsh does not, so
/// make prints the one line to add, and with it zsh finds them.
#[test]
fn completions_are_found_after_a_user_install() {
    let tree = install_tree();
    let release = tree.path().join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    for bin in crate::support::BINARIES {
        std::fs::copy(crate::support::bin_path(bin), release.join(bin)).unwrap();
    }
    let home = tree.path().join("home");
    let prefix = home.join(".local");
    let said = make_install(tree.path(), &prefix)
        .env("HOME", &home)
        .success()
        .stdout_contains(plugin_installed(&prefix))
        .stderr_empty()
        .run()
        .stdout;
    if let Some(zsh) = shell("zsh") {
        let line = said
            .lines()
            .find(|l| l.trim_start().starts_with("fpath=("))
            .unwrap_or_else(|| panic!("no fpath line for zsh: {said}"))
            .trim()
            .to_string();
        let script = format!(
            "{line}; autoload -Uz compinit && compinit -u -d {}/zcompdump && print -r -- ${{_comps[dream-lock]}} ${{_comps[turn-status]}}",
            tree.path().display()
        );
        Run::command(std::process::Command::new(zsh), "zsh")
            .args(["-fc", &script])
            .env("HOME", &home)
            .success()
            .stdout_is("_dream-lock _turn-status\n")
            .stderr_empty()
            .run();
    }
    if let Some(fish) = shell("fish") {
        Run::command(std::process::Command::new(fish), "fish")
            .args(["-c", "complete -C 'dream-lock rel'"])
            .env("HOME", &home)
            .env_remove("XDG_DATA_HOME")
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    prefix.join("bin").display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .success()
            .stdout_with(|offered| assert!(offered.starts_with("release\t"), "{offered}"))
            .stderr_empty()
            .run();
    }
}

/// Whether a `cargo metadata` run had the packages: then it printed the document (checked by
/// the run) and, offline, nothing on stderr (online it may say what it downloaded); else no
/// document, and stderr says why.
fn metadata_ok(out: &Ran, offline: bool) -> bool {
    if out.code == Some(0) {
        assert!(!out.stdout.is_empty(), "cargo metadata printed nothing");
        if offline {
            assert_eq!(out.stderr, "", "cargo metadata --offline");
        }
        true
    } else {
        assert!(out.code.is_some(), "cargo metadata was killed: {out:?}");
        assert_eq!(out.stdout, "", "cargo metadata failed but printed");
        assert!(
            !out.stderr.is_empty(),
            "cargo metadata failed and said nothing"
        );
        false
    }
}
