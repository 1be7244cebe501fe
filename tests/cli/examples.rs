//! Every example a user may copy runs as written: the shell blocks of README.md and of every
//! `docs/*.md`, the hook commands in their JSON blocks, and the example lines of the man
//! pages, in a temporary home with the built binaries on PATH (a fresh one per document).
//!
//! Blocks are marked, when they need to be, by an HTML comment right before the block:
//! `<!-- example: skip (why) -->` (not run), `<!-- example: exits 0 or 1 (why) -->` (exit 1
//! is fine too), `<!-- example: model (why) -->` (run against the fake model server; `model;
//! exits 0 or 1 (why)` allows exit 1 as well). Every
//! other shell block must exit 0 command by command, under `set -o pipefail`. Man page
//! examples may exit 0 or 1 (a clean "no" is a normal answer there). Hook commands get a
//! Stop payload on stdin, must end in `exit 0` and exit 0.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{json, Value};

use crate::support::fake_api::{FakeApi, Reply};
use crate::support::transcript::Transcript;
use crate::support::*;

/// What an example may print on stderr: our tools' diagnostics, each a line naming its tool
/// (`dream-gate: not due: ...`). A shell's error (`bash: ...: command not found`), jq's
/// (`jq: error ...`), or a panic is not one, even where the exit status hides it (a failing
/// command inside `$(...)` or an `if`).
fn only_our_diagnostics(stderr: &str) {
    assert!(
        stderr.is_empty() || stderr.ends_with('\n'),
        "stderr ends mid-line: {stderr:?}"
    );
    for line in stderr.lines() {
        assert!(
            BINARIES
                .iter()
                .any(|tool| line.starts_with(&format!("{tool}: "))),
            "not a diagnostic of ours on stderr: {line:?}"
        );
    }
}

#[derive(Debug)]
struct Block {
    lang: String,
    /// The `<!-- example: ... -->` annotation right before the block.
    note: Option<String>,
    text: String,
    line: usize,
}

/// The documents whose examples a user may copy: README.md first, then every `docs/*.md`.
fn doc_files() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 3, "docs/: {docs:?}");
    std::iter::once("README.md".to_string())
        .chain(docs)
        .collect()
}

/// The fenced blocks of `file` (relative to the repository root).
fn blocks_of(file: &str) -> Vec<Block> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut blocks = Vec::new();
    let mut last_text_line: Option<&str> = None;
    let mut open: Option<Block> = None;
    for (n, line) in readme.lines().enumerate() {
        if let Some(mut block) = open.take() {
            if line.trim_start().starts_with("```") {
                blocks.push(block);
                // A note belongs to the block right after it only.
                last_text_line = None;
            } else {
                block.text.push_str(line);
                block.text.push('\n');
                open = Some(block);
            }
        } else if line.starts_with("```") {
            let note = last_text_line
                .and_then(|l| l.trim().strip_prefix("<!-- example:"))
                .and_then(|l| l.strip_suffix("-->"))
                .map(|l| l.trim().to_string());
            open = Some(Block {
                lang: line.trim_start_matches('`').trim().to_string(),
                note,
                text: String::new(),
                line: n + 1,
            });
        } else if !line.trim().is_empty() {
            last_text_line = Some(line);
        }
    }
    assert!(open.is_none(), "{file} has an unclosed code block");
    blocks
}

/// The commands of a shell block: continuation lines joined, comment lines dropped.
fn commands(text: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if current.is_empty() && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push_str("\\\n");
            }
            None => {
                current.push_str(line);
                commands.push(std::mem::take(&mut current));
            }
        }
    }
    commands
}

/// The example lines of the man pages: every verbatim paragraph of the prose sections.
fn man_examples() -> Vec<(String, String)> {
    let mut examples = Vec::new();
    for page in dreamkit::doc_pages() {
        let tool = page.command.get_name().to_string();
        for (title, text) in page.sections {
            for paragraph in text.trim().split("\n\n") {
                if paragraph.lines().all(|l| l.starts_with("  ")) {
                    for line in paragraph.lines() {
                        examples.push((format!("{tool} {title}"), line.trim().to_string()));
                    }
                }
            }
        }
    }
    examples
}

/// Every `"command"` of a hook (`{"type": "command", "command": ...}`) in a JSON value.
fn hook_commands(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if map.get("type") == Some(&json!("command")) {
                if let Some(Value::String(command)) = map.get("command") {
                    out.push(command.clone());
                }
            }
            map.values().for_each(|v| hook_commands(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| hook_commands(v, out)),
        _ => {}
    }
}

/// A home where the examples find a project with two sessions: enough to list, too few for
/// the default gate (so the quick start meets the scan throttle, as a real user would).
struct World {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    bin: PathBuf,
    project: PathBuf,
    transcript: PathBuf,
    session: String,
    api: FakeApi,
}

impl World {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let home = root.join("home");
        let project = home.join("code/project");
        std::fs::create_dir_all(&project).unwrap();
        let transcripts = home.join(".claude/projects").join(slug_of(&project));
        let mut transcript = PathBuf::new();
        let mut session = String::new();
        for n in 1..=2 {
            session = session_id(n);
            transcript = transcripts.join(format!("{session}.jsonl"));
            Transcript::started(hours(2))
                .user("speed up the dream-gate scan")
                .assistant("Profiling the directory walk.")
                .user("now write the README figures")
                .assistant("Drafting the table.")
                .user("commit it")
                .write(&transcript);
        }
        // The project's memory, as Claude Code left it: an index and one topic.
        let memory = transcripts.join("memory");
        std::fs::create_dir_all(&memory).unwrap();
        std::fs::write(
            memory.join("MEMORY.md"),
            "# Memory\n- [Build](build.md) — how to build and test\n",
        )
        .unwrap();
        std::fs::write(
            memory.join("build.md"),
            "---\nname: build\ndescription: how to build and test\nmetadata:\n  type: project\n---\n\nRun make test before committing.\n",
        )
        .unwrap();
        std::fs::write(home.join("dirs.txt"), format!("{}\n", project.display())).unwrap();
        // Only dreamkit's binaries are added to the system PATH.
        let bin = root.join("bin");
        std::fs::create_dir(&bin).unwrap();
        for tool in BINARIES {
            std::os::unix::fs::symlink(bin_path(tool), bin.join(tool)).unwrap();
        }
        let api = FakeApi::start();
        for _ in 0..20 {
            api.push(Reply::anthropic_text(
                "You were speeding up the dream-gate scan; next, commit the README figures.",
            ));
        }
        World {
            _tmp: tmp,
            home,
            bin,
            project,
            transcript,
            session,
            api,
        }
    }

    fn bash(&self, script: &str, model: bool) -> std::process::Command {
        self.shell("bash", &["--norc", "--noprofile"], script, model)
    }

    /// `/bin/sh` (dash on Debian and Ubuntu): hook recipes must not need bash.
    fn sh(&self, script: &str, model: bool) -> std::process::Command {
        self.shell("/bin/sh", &[], script, model)
    }

    /// More finished sessions of the project, enough to make the default gate due.
    fn add_sessions(&self, numbers: std::ops::RangeInclusive<u32>) {
        let transcripts = self.transcript.parent().unwrap();
        for n in numbers {
            Transcript::started(hours(2))
                .user("tidy the lock module")
                .assistant("Moved the claim into its own file.")
                .write(&transcripts.join(format!("{}.jsonl", session_id(n))));
        }
    }

    fn shell(
        &self,
        shell: &str,
        options: &[&str],
        script: &str,
        model: bool,
    ) -> std::process::Command {
        let mut cmd = std::process::Command::new(shell);
        cmd.args(options)
            .args(["-c", script])
            .env_clear()
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    self.bin.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .current_dir(&self.home);
        if model {
            cmd.env("ANTHROPIC_BASE_URL", self.api.url())
                .env("ANTHROPIC_API_KEY", "sk-test-examples")
                .env("DREAMKIT_RETRY_BASE_MS", "1");
        }
        cmd
    }

    /// Runs `commands` as one script (they may share variables); each must exit with one of
    /// `allowed`. Returns the failure, if any, as a readable message.
    fn run(&self, commands: &[String], allowed: &[i32], model: bool) -> Result<(), String> {
        let allowed_list = allowed
            .iter()
            .map(i32::to_string)
            .collect::<Vec<_>>()
            .join(" ");
        let mut script = format!(
            "set -u -o pipefail\n__check() {{ case \" {allowed_list} \" in *\" $1 \"*) ;; \
             *) echo \"__example $2 exited $1\" >&2; exit 99;; esac; }}\n"
        );
        for (i, command) in commands.iter().enumerate() {
            script.push_str(&format!("{command}\n__check $? {i}\n"));
        }
        // Named by its commands, numbered as `__example N exited` says on failure.
        let listed: String = commands
            .iter()
            .enumerate()
            .map(|(i, c)| format!("\n  [{i}] {c}"))
            .collect();
        let run = Run::command(
            self.bash(&script, model),
            &format!("bash, the example commands:{listed}\n"),
        )
        .stdin_from(Stdio::null())
        .code(0)
        .stdout_any(
            "an example prints what its document shows, with this run's paths, times and ids; \
             that it runs as written is the test",
        )
        .stderr_with(only_our_diagnostics);
        // Every failing block is reported (the run prints its three streams), not the first.
        catch_unwind(AssertUnwindSafe(|| {
            run.run();
        }))
        .map_err(|panic| {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| {
                    panic
                        .downcast_ref::<&str>()
                        .map(std::string::ToString::to_string)
                })
                .unwrap_or_default();
            format!("{why}\nthe commands:{listed}")
        })
    }
}

fn jq_missing() -> bool {
    let missing = std::process::Command::new("jq")
        .arg("--version")
        .output()
        .map_or(true, |o| !o.status.success());
    if missing {
        crate::support::skip(
            "README examples",
            "jq is not installed; the examples use it (.ci/run installs it: apt-get install -y jq)",
        );
    }
    missing
}

#[test]
fn readme_shell_examples_run_as_written() {
    if jq_missing() {
        return;
    }
    let mut failures = Vec::new();
    let mut ran_in_readme = 0;
    let mut ran = 0;
    for file in doc_files() {
        // Each document starts from the same home, so its examples run in the order it shows
        // them, whatever the other documents did.
        let world = World::new();
        let mut asks_model = false;
        for block in blocks_of(&file)
            .iter()
            .filter(|b| b.lang == "sh" || b.lang == "bash")
        {
            let note = block.note.as_deref().unwrap_or("");
            let commands = commands(&block.text);
            if note.starts_with("skip") {
                assert!(note.contains('('), "{file}:{}: a skip says why", block.line);
                eprintln!("{file}:{}: not run: {note}", block.line);
                continue;
            }
            // `model; exits 0 or 1 (why)` combines the two.
            let allowed: &[i32] = if note.starts_with("exits 0 or 1")
                || (note.starts_with("model") && note.contains("exits 0 or 1"))
            {
                &[0, 1]
            } else {
                assert!(
                    note.is_empty() || note.starts_with("model"),
                    "{file}:{}: unknown example note {note:?}",
                    block.line
                );
                &[0]
            };
            asks_model |= note.starts_with("model");
            ran += commands.len();
            if file == "README.md" {
                ran_in_readme += commands.len();
            }
            if let Err(e) = world.run(&commands, allowed, note.starts_with("model")) {
                failures.push(format!("{file}:{}: {e}", block.line));
            }
        }
        // A document's model examples really asked the (fake) model.
        assert!(
            !asks_model || !world.api.requests().is_empty(),
            "{file}: the model examples made no request"
        );
        if file == "README.md" {
            assert!(asks_model, "README.md shows no model example");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        ran_in_readme >= 10,
        "only {ran_in_readme} README commands ran"
    );
    assert!(ran >= 30, "only {ran} commands ran in README.md and docs/");
}

/// The hook commands of `file`'s JSON blocks (every JSON block must parse).
fn hooks_of(file: &str) -> Vec<String> {
    let mut hooks = Vec::new();
    for block in blocks_of(file).iter().filter(|b| b.lang == "json") {
        let value: Value = serde_json::from_str(&block.text)
            .unwrap_or_else(|e| panic!("{file}:{}: JSON block: {e}", block.line));
        hook_commands(&value, &mut hooks);
    }
    hooks
}

#[test]
fn readme_hook_commands_end_in_exit_0_and_succeed() {
    if jq_missing() {
        return;
    }
    let mut total = 0;
    let mut pipelines = Vec::new();
    for file in doc_files() {
        let hooks = hooks_of(&file);
        if hooks.is_empty() {
            continue;
        }
        total += hooks.len();
        let world = World::new();
        if hooks_run_and_pipeline_consolidates(&world, &hooks) {
            pipelines.push(file);
        }
    }
    assert!(total >= 3, "hooks found: {total}");
    assert!(
        pipelines.iter().any(|f| f == "README.md"),
        "README.md shows the Stop pipeline hook: {pipelines:?}"
    );
}

/// Runs every hook with a Stop payload; when one of them is the detached dream pipeline
/// (it logs to dream.log), checks that it consolidated, and says so.
fn hooks_run_and_pipeline_consolidates(world: &World, hooks: &[String]) -> bool {
    // Due by the default gate, so the Stop recipe's background pipeline really consolidates.
    world.add_sessions(3..=8);
    let payload = json!({
        "session_id": world.session,
        "transcript_path": world.transcript,
        "cwd": world.project,
        "hook_event_name": "Stop",
    })
    .to_string();
    for hook in hooks {
        assert!(
            hook.trim_end().ends_with("exit 0"),
            "a hook ends in exit 0 (Claude Code reads 2 as block): {hook}"
        );
        Run::command(world.sh(hook, true), &format!("/bin/sh -c {hook}"))
            .stdin(payload.clone())
            .code(0)
            .stdout_empty()
            .stderr_empty()
            .run();
    }
    if !hooks
        .iter()
        .any(|h| h.contains("dream.log") && h.contains("dream-run"))
    {
        return false;
    }
    // The detached pipeline logs the run's envelope when it ends (waited for as a line).
    let log = world.home.join(".local/state/dreamkit/dream.log");
    let text = wait::until("the detached pipeline's envelope in dream.log", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        (text.contains("\"run\"") && text.ends_with('\n')).then_some(text)
    });
    let envelope: Value = serde_json::from_str(text.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the detached hook's log is not an envelope ({e}): {text}"));
    assert_eq!(envelope["run"]["status"], "completed", "{text}");
    assert_eq!(
        envelope["gate"]["current_session"],
        json!(world.session),
        "{text}"
    );
    // The gate read the payload (the project is the payload's cwd, not the hook's working
    // directory): it runs in front, as a background job's stdin is empty.
    assert_eq!(
        envelope["project"]["cwd"],
        json!(world.project.display().to_string()),
        "{text}"
    );
    true
}

#[test]
fn man_page_examples_run_as_written() {
    if jq_missing() {
        return;
    }
    let world = World::new();
    let examples = man_examples();
    assert!(examples.len() >= 6, "{examples:?}");
    let mut failures = Vec::new();
    for (page, command) in &examples {
        if let Err(e) = world.run(std::slice::from_ref(command), &[0, 1], true) {
            failures.push(format!("{page}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn example_notes_and_commands_are_parsed_as_intended() {
    assert_eq!(
        commands("# comment\necho a \\\n  | cat\n\nls   # trailing\n"),
        ["echo a \\\n  | cat", "ls   # trailing"]
    );
    assert!(blocks_of("README.md")
        .iter()
        .any(|b| b.note.as_deref().is_some_and(|n| n.starts_with("skip ("))));
    // docs/ is read too: every document parses, and its notes are ones the runner knows.
    for file in doc_files() {
        for block in blocks_of(&file) {
            if let Some(note) = &block.note {
                assert!(
                    ["skip (", "exits 0 or 1", "model"]
                        .iter()
                        .any(|known| note.starts_with(known)),
                    "{file}:{}: unknown example note {note:?}",
                    block.line
                );
            }
        }
    }
}

/// `command` under bash in the world with `stdin`, to be checked.
fn run_with_stdin<'a>(world: &World, command: &str, stdin: &str) -> Run<'a> {
    Run::command(world.bash(command, false), &format!("bash -c {command}")).stdin(stdin)
}

#[test]
fn readme_status_hook_feeds_the_status_line() {
    if jq_missing() {
        return;
    }
    let world = World::new();
    let block = doc_files()
        .iter()
        .flat_map(|file| blocks_of(file))
        .find(|b| b.lang == "json" && b.text.contains("\"statusLine\""))
        .expect("a JSON block with a statusLine in README.md or docs/");
    let settings: Value = serde_json::from_str(&block.text).unwrap();
    let mut hooks = Vec::new();
    hook_commands(&settings["hooks"], &mut hooks);
    let hook = hooks
        .iter()
        .find(|h| h.contains("turn-status"))
        .expect("a turn-status hook");
    let status_line = settings["statusLine"]["command"].as_str().unwrap();
    let stop = |text: &str| {
        json!({"session_id": world.session, "transcript_path": world.transcript,
            "cwd": world.project, "hook_event_name": "Stop", "last_assistant_message": text})
        .to_string()
    };
    let line_input = json!({"session_id": world.session, "transcript_path": world.transcript,
        "model": {"id": "claude-sonnet-4-5"}})
    .to_string();
    let status_line_shows = |expected: &str| {
        run_with_stdin(&world, status_line, &line_input)
            .success()
            .stdout_is(expected)
            .stderr_empty()
            .run();
    };
    let hook_runs = |text: &str| {
        run_with_stdin(&world, hook, &stop(text))
            .success()
            .stdout_empty()
            .stderr_empty()
            .run();
    };
    // Before any turn: an empty status line, still exit 0.
    status_line_shows("");
    hook_runs("Pushed the fix to main.");
    let shown = "completed: Pushed the fix to main.\n";
    status_line_shows(shown);
    // A turn with no new text keeps the status.
    hook_runs("");
    status_line_shows(shown);
    hook_runs("Should I tag v1.2?");
    status_line_shows("blocked: Should I tag v1.2?\n");
}

/// The examples not run (they need the Claude Code client, or install into /usr/local) still
/// call our tools with flags those tools take, where those flags are: each call, cut before
/// its `--` or the next shell operator, answers `--help` with exit 0 (a flag given before the
/// subcommand that takes it is a usage error, exit 2).
#[test]
fn skipped_examples_give_our_tools_flags_they_take() {
    const BINARIES: [&str; 7] = [
        "dream-gate",
        "dream-lock",
        "dream-run",
        "recap",
        "turn-status",
        "suggest",
        "feedback",
    ];
    let mut checked = 0;
    for file in doc_files() {
        for block in blocks_of(&file).iter().filter(|b| {
            (b.lang == "sh" || b.lang == "bash")
                && b.note.as_deref().is_some_and(|n| n.starts_with("skip"))
        }) {
            for command in commands(&block.text) {
                let words: Vec<&str> = command.split_whitespace().collect();
                for (at, word) in words.iter().enumerate() {
                    let Some(tool) = BINARIES.iter().find(|b| *b == word) else {
                        continue;
                    };
                    // A shell variable stands for some directory; quotes are the shell's.
                    let args: Vec<String> = words[at + 1..]
                        .iter()
                        .take_while(|w| {
                            !["--", "|", "||", "&", "&&", ";"].contains(w)
                                && !w.starts_with('>')
                                && !w.starts_with("2>")
                                && !w.starts_with('#')
                        })
                        .map(|w| {
                            if w.contains('$') {
                                "/tmp".to_string()
                            } else {
                                w.trim_matches(|c| c == '"' || c == '\'').to_string()
                            }
                        })
                        .collect();
                    Run::command(
                        {
                            let mut c = std::process::Command::new(bin_path(tool));
                            c.args(&args).arg("--help");
                            c
                        },
                        &format!("{file}:{}: {tool} {}", block.line, args.join(" ")),
                    )
                    .stdin_from(Stdio::null())
                    .success()
                    .stdout_any("the help text")
                    .stderr_empty()
                    .run();
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 1, "no skipped example calls one of our tools");
}
