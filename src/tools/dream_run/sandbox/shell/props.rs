//! Property tests of the `shell` tool's tokenizer and policy, on the planned programs only
//! (nothing is spawned): whatever command line it accepts names only the allowed programs,
//! from the system directories, and every argument that names a file resolves inside a
//! readable root.
//!
//! The generator writes each option that takes a text value with its value attached, and
//! grep's pattern right after `grep`, so that every word naming a file in an accepted plan
//! was read as a path: then a word that resolves outside the roots is a hole in the policy,
//! not a pattern that happens to look like a path.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::{plan, ALLOWED};
use crate::cli::props::config;
use crate::tools::dream_run::sandbox::props::{fixture, Fixture};

static FIXTURE: std::sync::LazyLock<Fixture> = std::sync::LazyLock::new(fixture);

/// Paths as the model might name them: inside, outside, through links, by `..`, absolute.
fn path_words(f: &Fixture) -> Vec<String> {
    let mut words: Vec<String> = [
        "MEMORY.md",
        "topic.md",
        "sub/deep.md",
        "sub",
        ".",
        "..",
        "../outside/secret.txt",
        "link.md",
        "linkdir",
        "linkdir/secret.txt",
        "alias/deep.md",
        "sub/../../outside",
        "../transcripts/t1.jsonl",
        "../memlink/topic.md",
        "dir.md",
        "pipe",
        "missing.md",
        "/",
        "/etc/passwd",
        "/proc/self/environ",
        "/dev/zero",
        "-",
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    for p in [
        f.mem.join("topic.md"),
        f.base.join("outside/secret.txt"),
        f.base.join("outside"),
        f.base.join("memlink/../outside/secret.txt"),
        f.transcripts.join("t1.jsonl"),
        f.base.clone(),
    ] {
        words.push(p.display().to_string());
    }
    words
}

/// Option values and patterns: none of them names a file of the fixture.
const TEXT: &[&str] = &["alpha", "zz", "3", "a.*b", "*.md", "%s", "q=1"];

/// Words that stand for themselves and never take the next word as a value (option units
/// that take a value carry it attached).
const UNITS: &[&str] = &[
    "-l",
    "-la",
    "-a",
    "-i",
    "-r",
    "-R",
    "-L",
    "-H",
    "-h",
    "-1",
    "-q",
    "-v",
    "-s",
    "-c3",
    "-n3",
    "-m2",
    "-w80",
    "-C1",
    "-ealpha",
    "-f",
    "-t",
    "-F",
    "-E",
    "-z",
    "-x",
    "--",
    "--count",
    "--include=*.md",
    "--max-count=2",
    "--regexp=zz",
    "--format=%s",
    "--lines=3",
    "--sort=size",
    "--dereference",
    "--files0-from",
    "--follow",
    "--directories=recurse",
    "--recursive",
    "--no-such-option",
];

/// find's expression units, each whole.
const FIND_UNITS: &[&str] = &[
    "-name '*.md'",
    "-iname zz",
    "-type f",
    "-maxdepth 2",
    "-print",
    "-print0",
    "-newer",
    "-anewer",
    "-newermt 2024-01-01",
    "-newermm",
    "-samefile",
    "-exec cat {} \\;",
    "-delete",
    "-fprint out",
    "-follow",
    "-files0-from",
    "\\(",
    "\\)",
    "!",
    "-o",
    "-L",
    "-P",
];

/// Shell constructs that must never get through, and assignments, globs, tildes.
const NOISE: &[&str] = &[
    "$(cat /etc/passwd)",
    "`id`",
    ";",
    "&&",
    "||",
    "&",
    "> out.md",
    ">>x",
    "2>&1",
    "< in",
    "*",
    "*.md",
    "../*",
    "FOO=bar",
    "~",
    "~/x",
    "#c",
    "{a,b}",
    "(",
    ")",
    "'$HOME'",
    "\"$HOME\"",
    "$HOME",
    "${HOME}",
    "<(ls)",
    "a\u{ff5c}b",
    "x\u{200b}y",
];

/// A word rendered as the model might quote it.
fn quoted(text: String) -> impl Strategy<Value = String> {
    let single = format!("'{}'", text.replace('\'', "'\\''"));
    let double = format!(
        "\"{}\"",
        text.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('$', "\\$")
            .replace('`', "\\`")
    );
    let escaped: String = text.chars().flat_map(|c| ['\\', c]).collect();
    let half = text.len() / 2;
    let split = if text.is_char_boundary(half) {
        format!("'{}'{}", &text[..half], &text[half..])
    } else {
        text.clone()
    };
    prop::sample::select(vec![text, single, double, escaped, split])
}

fn path_word(f: &Fixture) -> BoxedStrategy<String> {
    prop::sample::select(path_words(f))
        .prop_flat_map(quoted)
        .boxed()
}

fn program() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(ALLOWED).prop_map(str::to_string),
        1 => prop::sample::select(vec![
            "rm", "sh", "bash", "env", "xargs", "python3", "/bin/ls", "/usr/bin/cat", "./ls",
            "../bin/cat", "LS", "gr\\ep", "'ls'", "\"cat\"", "FOO=1", "ls\u{ff1b}",
        ])
        .prop_map(str::to_string),
    ]
}

/// One stage: a program, then (for grep) its pattern, then units, paths and noise.
fn stage(f: &Fixture) -> impl Strategy<Value = String> {
    let arg = prop_oneof![
        4 => path_word(f),
        3 => prop::sample::select(UNITS).prop_map(str::to_string),
        2 => prop::sample::select(FIND_UNITS).prop_map(str::to_string),
        1 => prop::sample::select(NOISE).prop_map(str::to_string),
    ];
    (
        program(),
        prop::sample::select(TEXT),
        prop::collection::vec(arg, 0..6),
    )
        .prop_map(|(program, pattern, args)| {
            let mut words = vec![program.clone()];
            // However it is quoted (`gr\ep`), grep's first operand is its pattern.
            if program.replace(['\\', '\'', '"'], "") == "grep" {
                words.push(pattern.to_string());
            }
            words.extend(args);
            words.join(" ")
        })
}

fn command_line(f: &Fixture) -> impl Strategy<Value = String> {
    prop::collection::vec(stage(f), 1..4).prop_map(|stages| stages.join(" | "))
}

/// What a word could name on disk: itself, a long option's value, a short option's
/// attached value.
fn names(word: &str) -> Vec<&str> {
    let mut names = vec![word];
    if let Some((option, value)) = word.split_once('=') {
        if option.starts_with("--") {
            names.push(value);
        }
    }
    if word.starts_with('-') && !word.starts_with("--") {
        names.extend(word.get(2..));
    }
    names
}

fn inside_roots(f: &Fixture, path: &Path) -> bool {
    path.starts_with(&f.mem) || path.starts_with(&f.transcripts)
}

/// Checks an accepted plan: allowed programs from the system directories, every file named
/// inside a root.
fn check_accepted(f: &Fixture, command: &str) -> Result<(), TestCaseError> {
    let Ok(stages) = plan(&f.sandbox, command) else {
        return Ok(());
    };
    prop_assert!(!stages.is_empty());
    for stage in &stages {
        prop_assert!(ALLOWED.contains(&stage.name), "{}", command);
        let dir = stage
            .program
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        prop_assert!(
            dir == Path::new("/usr/bin") || dir == Path::new("/bin"),
            "{} runs {}",
            command,
            stage.program.display()
        );
        prop_assert_eq!(
            stage.program.file_name(),
            Some(std::ffi::OsStr::new(stage.name))
        );
        for arg in &stage.args {
            for name in names(arg) {
                let resolved: Option<PathBuf> = std::fs::canonicalize(f.mem.join(name)).ok();
                if let Some(real) = resolved {
                    prop_assert!(
                        inside_roots(f, &real),
                        "{:?} accepted: {} names {}",
                        command,
                        name,
                        real.display()
                    );
                }
            }
        }
    }
    Ok(())
}

/// Any text: the operators and their look-alikes, quotes, controls, letters of the allowed
/// programs, path pieces.
fn any_line() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        prop::sample::select(vec![
            " ", " ", "|", "||", "&", ";", "$", "`", "(", ")", "{", "}", "<", ">", "'", "\"", "\\",
            "#", "~", "*", "?", "[", "=", "-", "--", "/", "..", ".", "\t", "\n", "\r", "\0",
            "\u{7f}", "\u{ff5c}", "\u{200b}", "\u{a0}", "\u{2028}", "é",
        ])
        .prop_map(str::to_string),
        prop::sample::select(ALLOWED).prop_map(str::to_string),
        "[a-z.]{1,4}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(pieces, 0..24).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn an_accepted_command_line_names_only_allowed_programs_and_paths_inside_the_roots(
        command in command_line(&FIXTURE),
    ) {
        check_accepted(&FIXTURE, &command)?;
    }

    #[test]
    fn any_text_is_refused_or_planned_never_a_panic(command in any_line()) {
        check_accepted(&FIXTURE, &command)?;
    }

    #[test]
    fn a_refusal_is_one_line_and_names_no_file_content(command in command_line(&FIXTURE)) {
        if let Err(message) = plan(&FIXTURE.sandbox, &command) {
            prop_assert!(!message.is_empty());
            prop_assert!(!message.contains("CANARY"));
        }
    }
}

#[test]
fn a_long_or_deep_command_line_is_refused_whole() {
    // Far past every cap: 100,000 characters of one kind, nested substitutions, quotes.
    let f = &*FIXTURE;
    for command in [
        "a".repeat(100_000),
        format!("ls {}", "x ".repeat(50_000)),
        format!("ls {}", "| ls ".repeat(20_000)),
        format!("ls {}", "\\".repeat(99_999)),
        format!("ls '{}'", "a".repeat(100_000)),
        format!("ls {}", "$(".repeat(50_000)),
        format!("cat {}", "'a'".repeat(30_000)),
    ] {
        assert!(
            plan(&f.sandbox, &command).is_err(),
            "{} bytes accepted",
            command.len()
        );
    }
}
