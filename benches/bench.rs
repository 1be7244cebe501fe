//! `make bench`: dreamkit against the plain Unix tools that do the same part of the job, in
//! one run, as ratios of medians over repeated, interleaved runs. Tests never assert timings;
//! this prints them.

// Tests and benchmarks drive processes through libc (signals, FIFOs, rlimits) and name
// helpers `pub` for their sibling modules.
#![allow(unsafe_code, unreachable_pub)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

// The integration tests' fake Messages API server, reused as is.
#[allow(dead_code)]
#[path = "../tests/cli/support/fake_api.rs"]
mod fake_api;

const GATE: &str = env!("CARGO_BIN_EXE_dream-gate");
const RECAP: &str = env!("CARGO_BIN_EXE_recap");
const DREAM_RUN: &str = env!("CARGO_BIN_EXE_dream-run");
const STATUS: &str = env!("CARGO_BIN_EXE_turn-status");

struct Fixture {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    config: PathBuf,
    project: PathBuf,
    transcripts: PathBuf,
    lock: PathBuf,
}

fn fixture(sessions: u32, lock_age: Duration) -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(tmp.path()).expect("canonical");
    let home = root.join("home");
    let config = home.join(".claude");
    let project = root.join("proj");
    let slug = dreamkit::claude::paths::slug(&project);
    let transcripts = config.join("projects").join(&slug);
    let memory = transcripts.join("memory");
    std::fs::create_dir_all(&memory).expect("dirs");
    std::fs::create_dir_all(&project).expect("dirs");
    let lock = memory.join(".consolidate-lock");
    std::fs::write(&lock, "").expect("lock");
    set_mtime(&lock, SystemTime::now() - lock_age);
    let line = b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";
    for n in 0..sessions {
        let path = transcripts.join(format!("00000000-0000-4000-8000-{n:012x}.jsonl"));
        std::fs::write(&path, line).expect("session");
    }
    Fixture {
        _tmp: tmp,
        home,
        config,
        project,
        transcripts,
        lock,
    }
}

fn set_mtime(path: &Path, at: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(at))
        .expect("mtime");
}

fn gate_cmd(f: &Fixture, extra: &[&str]) -> Command {
    let mut cmd = Command::new(GATE);
    cmd.arg("--cwd")
        .arg(&f.project)
        .args(extra)
        .env_clear()
        .env("HOME", &f.home)
        .env("CLAUDE_CONFIG_DIR", &f.config)
        .env("XDG_STATE_HOME", f.home.join("state"));
    cmd
}

/// Runs each command `runs` times, interleaved, and returns the medians.
fn medians(commands: &mut [(&str, Command)], runs: usize) -> Vec<Duration> {
    medians_fed(commands, runs, None)
}

/// [`medians`], each run reading `input` (a file) on its stdin when given.
fn medians_fed(
    commands: &mut [(&str, Command)],
    runs: usize,
    input: Option<&Path>,
) -> Vec<Duration> {
    let mut samples = vec![Vec::with_capacity(runs); commands.len()];
    for _ in 0..runs {
        for (i, (name, cmd)) in commands.iter_mut().enumerate() {
            let stdin = match input {
                Some(path) => Stdio::from(std::fs::File::open(path).expect("open input")),
                None => Stdio::null(),
            };
            cmd.stdin(stdin).stdout(Stdio::null()).stderr(Stdio::null());
            let start = Instant::now();
            let status = cmd.status().expect("spawn");
            samples[i].push(start.elapsed());
            assert!(status.code().is_some(), "{name} died of a signal");
        }
    }
    samples
        .into_iter()
        .map(|mut s| {
            s.sort();
            s[s.len() / 2]
        })
        .collect()
}

fn report(what: &str, ours: Duration, theirs: Duration, baseline: &str, target: Option<f64>) {
    let ratio = ours.as_secs_f64() / theirs.as_secs_f64();
    let verdict = match target {
        Some(t) if ratio <= t => format!(" (target <= {t}x, met)"),
        Some(t) => format!(" (target <= {t}x, MISSED)"),
        None => String::new(),
    };
    println!(
        "{what}: {:.3} ms vs {baseline}: {:.3} ms -> {ratio:.2}x{verdict}",
        ours.as_secs_f64() * 1e3,
        theirs.as_secs_f64() * 1e3,
    );
}

fn exit_code(mut cmd: Command) -> i32 {
    cmd.stdout(Stdio::null())
        .status()
        .expect("spawn")
        .code()
        .unwrap_or(-1)
}

/// A transcript of about `bytes`: blocks of realistic records (turns, tool calls with large
/// results, bookkeeping records), ending with the same recent conversation whatever its size.
fn transcript(path: &Path, bytes: u64) {
    let mut block = String::new();
    let big_output = "line of tool output\n".repeat(1500);
    for i in 0..20 {
        block.push_str(&serde_json::json!({"type": "user", "uuid": format!("u{i}"), "sessionId": "s", "timestamp": "2026-12-01T10:00:00.000Z", "message": {"role": "user", "content": format!("please look at module {i}")}}).to_string());
        block.push('\n');
        block.push_str(&serde_json::json!({"type": "assistant", "uuid": format!("a{i}"), "message": {"id": format!("m{i}"), "role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "cat src/lib.rs"}}]}}).to_string());
        block.push('\n');
        block.push_str(&serde_json::json!({"type": "user", "toolUseResult": {"stdout": "x"}, "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": big_output}]}}).to_string());
        block.push('\n');
        block.push_str("{\"type\":\"cost-state\",\"totalCostUSD\":0.5}\n");
    }
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let mut written = 0u64;
    while written + (block.len() as u64) < bytes {
        file.write_all(block.as_bytes()).expect("write");
        written += block.len() as u64;
    }
    for i in 0..40 {
        let line = if i % 2 == 0 {
            serde_json::json!({"type": "user", "uuid": format!("end-u{i}"), "message": {"role": "user", "content": format!("final question {i}")}})
        } else {
            serde_json::json!({"type": "assistant", "uuid": format!("end-a{i}"), "message": {"id": format!("end-m{i}"), "role": "assistant", "content": [{"type": "text", "text": format!("final answer {i}")}]}})
        };
        writeln!(file, "{line}").expect("write");
    }
    file.flush().expect("flush");
}

/// Peak resident set of one run, in KiB.
#[allow(clippy::zombie_processes)] // reaped by wait4, which also reports its rusage
fn peak_rss_kib(mut cmd: Command) -> i64 {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter; the PID is our unreaped child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid, "wait4");
    usage.ru_maxrss
}

fn recap_benchmarks() {
    let api = fake_api::FakeApi::start();
    let tmp = tempfile::tempdir().expect("tempdir");
    let small = tmp.path().join("small.jsonl");
    let large = tmp.path().join("large.jsonl");
    transcript(&small, 1 << 20);
    transcript(&large, 1 << 30);
    let runs = 30;
    for _ in 0..(2 * runs + 2) {
        api.push(fake_api::Reply::anthropic_text(
            "You were benchmarking; next, read the ratios.",
        ));
    }
    let recap = |path: &Path| {
        let mut cmd = Command::new(RECAP);
        cmd.arg("--transcript")
            .arg(path)
            .env_clear()
            .env("HOME", tmp.path())
            .env("ANTHROPIC_BASE_URL", api.url())
            .env("ANTHROPIC_API_KEY", "bench");
        cmd
    };
    assert_eq!(
        exit_code(recap(&large)),
        0,
        "recap failed on the 1 GB transcript"
    );
    let m = medians(
        &mut [("recap 1 GB", recap(&large)), ("recap 1 MB", recap(&small))],
        runs,
    );
    report(
        "recap on a 1 GB transcript",
        m[0],
        m[1],
        "recap on a 1 MB one",
        Some(1.2),
    );
    let rss = peak_rss_kib(recap(&large));
    let verdict = if rss < 32 * 1024 { "met" } else { "MISSED" };
    println!(
        "recap peak RSS on a 1 GB transcript: {:.1} MiB (target < 32 MiB, {verdict})",
        rss as f64 / 1024.0
    );
}

/// dream-run's context economy: digest size against the raw transcripts, the cost of building
/// digests for 1 GB against reading it with `cat`, and the second run (digests reused)
/// against `find -newer` over the same files.
fn dream_benchmarks() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-code-2.1.332");
    let (mut raw, mut digested) = (0u64, 0u64);
    for entry in std::fs::read_dir(&fixtures).expect("fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            raw += std::fs::metadata(&path).expect("stat").len();
            digested += dreamkit::tools::dream_run::digest::digest_text("fixture", &path)
                .expect("digest")
                .len() as u64;
        }
    }
    println!(
        "dream-run digests of the Claude Code fixtures: {digested} of {raw} bytes -> {:.1}% (target <= 10%, {})",
        100.0 * digested as f64 / raw as f64,
        if digested * 10 <= raw { "met" } else { "MISSED" }
    );

    let f = fixture(0, Duration::from_secs(48 * 3600));
    let files = 16u64;
    for n in 0..files {
        let path = f
            .transcripts
            .join(format!("00000000-0000-4000-8000-{n:012x}.jsonl"));
        transcript(&path, (1u64 << 30) / files);
    }
    let state = f.home.join("state");
    // A run builds (and writes) the digests; the fake model answers at once.
    let api = fake_api::FakeApi::start();
    let run = |extra: &[&str]| {
        let mut cmd = Command::new(DREAM_RUN);
        cmd.args(["--unlocked", "-n", "--cwd"])
            .arg(&f.project)
            .args(extra)
            .env_clear()
            .env("HOME", &f.home)
            .env("CLAUDE_CONFIG_DIR", &f.config)
            .env("XDG_STATE_HOME", &state)
            .env("ANTHROPIC_BASE_URL", api.url())
            .env("ANTHROPIC_API_KEY", "sk-ant-bench");
        cmd
    };
    let real_run = || {
        api.push(fake_api::Reply::anthropic_text("Nothing to change."));
        run(&[])
    };
    // A dry run reads the digests an earlier run left (rebuilding none): the cost of a run's
    // start when nothing changed.
    let dry_run = || run(&["--dry-run"]);
    let mut cat = Command::new("sh");
    cat.args([
        "-c",
        &format!("cat '{}'/*.jsonl > /dev/null", f.transcripts.display()),
    ]);
    assert_eq!(exit_code(real_run()), 0, "dream-run failed");
    let digests_dir = std::fs::read_dir(state.join("dreamkit/projects"))
        .expect("state dir")
        .next()
        .expect("project state")
        .expect("entry")
        .path()
        .join("digests");
    let digest_bytes: u64 = std::fs::read_dir(&digests_dir)
        .expect("digests")
        .filter_map(std::result::Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "md"))
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum();
    println!(
        "dream-run digests of a generated 1 GB corpus: {:.2}% of the raw bytes (target <= 10%, {})",
        100.0 * digest_bytes as f64 / (1u64 << 30) as f64,
        if digest_bytes * 10 <= 1 << 30 {
            "met"
        } else {
            "MISSED"
        }
    );
    // First runs: the digests are rebuilt each time.
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        std::fs::remove_dir_all(&digests_dir).expect("remove digests");
        let cmd = real_run();
        let start = Instant::now();
        assert_eq!(exit_code(cmd), 0);
        ours.push(start.elapsed());
        let start = Instant::now();
        assert!(cat.status().expect("cat").success());
        theirs.push(start.elapsed());
    }
    ours.sort();
    theirs.sort();
    report(
        "dream-run building digests for 1 GB of transcripts",
        ours[2],
        theirs[2],
        "`cat` of the same files to /dev/null",
        Some(4.0),
    );
    let mut find = Command::new("find");
    find.arg(&f.transcripts)
        .args(["-maxdepth", "1", "-name", "*.jsonl", "-newer"])
        .arg(&f.lock);
    let m = medians(&mut [("dream-run", dry_run()), ("find", find)], 40);
    report(
        "dream-run second run (digests reused)",
        m[0],
        m[1],
        "`find -newer` over the transcripts",
        Some(1.5),
    );
    write_scaling(&f, &state, &api);
}

/// An unlocked `dream-run` of the fixture's project against the fake model, allowed `limit`
/// tool calls a turn and `limit` files.
fn writing_run(f: &Fixture, state: &Path, api: &fake_api::FakeApi, limit: &str) -> Command {
    let mut cmd = Command::new(DREAM_RUN);
    cmd.args(["--unlocked", "-n", "--cwd"])
        .arg(&f.project)
        .args(["--max-calls-per-turn", limit, "--max-files", limit])
        .env_clear()
        .env("HOME", &f.home)
        .env("CLAUDE_CONFIG_DIR", &f.config)
        .env("XDG_STATE_HOME", state)
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-bench");
    cmd
}

/// The cost of N writes in one run grows linearly: one turn of N `write_file` calls, for 100
/// and for 1,000 files, each against `cp` of the same number of files.
fn write_scaling(f: &Fixture, state: &Path, api: &fake_api::FakeApi) {
    let mut per_write = Vec::new();
    for n in [100usize, 1000] {
        let body = "A fact worth keeping.\n".repeat(20);
        let calls: Vec<(&str, serde_json::Value)> = (0..n)
            .map(|i| {
                (
                    "write_file",
                    serde_json::json!({"path": format!("w{n}/{i:04}.md"), "content": body}),
                )
            })
            .collect();
        let limit = n.to_string();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for round in 0..3 {
            api.push(fake_api::Reply::anthropic_tools("Writing.", &calls))
                .push(fake_api::Reply::anthropic_text("Done."));
            let memory = f.transcripts.join("memory");
            let _ = std::fs::remove_dir_all(memory.join(format!("w{n}")));
            let cmd = writing_run(f, state, api, &limit);
            let start = Instant::now();
            assert_eq!(exit_code(cmd), 0, "dream-run with {n} writes failed");
            ours.push(start.elapsed());
            // The plain tool: copy the same files into a fresh folder.
            let from = memory.join(format!("w{n}"));
            let to = f.home.join(format!("cp-{n}-{round}"));
            let mut cp = Command::new("cp");
            cp.arg("-r").arg(&from).arg(&to);
            let start = Instant::now();
            assert!(cp.status().expect("cp").success());
            theirs.push(start.elapsed());
        }
        ours.sort();
        theirs.sort();
        report(
            &format!("dream-run writing {n} memory files in one turn"),
            ours[1],
            theirs[1],
            "`cp -r` of the same files",
            None,
        );
        per_write.push(ours[1].as_secs_f64() / n as f64);
    }
    deadline_with_restore(f, state, api);
    let growth = per_write[1] / per_write[0];
    println!(
        "dream-run cost per write, 1,000 writes against 100: {growth:.2}x (target <= 1.5x: linear, {})",
        if growth <= 1.5 { "met" } else { "MISSED" }
    );
}

/// `--deadline` bounds the whole run, restore included: 3,000 writes in one turn, then a
/// model that never answers, under `--deadline 3s`; the run's wall time against the deadline.
fn deadline_with_restore(f: &Fixture, state: &Path, api: &fake_api::FakeApi) {
    let n = 3000usize;
    let body = "A fact worth keeping.\n".repeat(20);
    let calls: Vec<(&str, serde_json::Value)> = (0..n)
        .map(|i| {
            (
                "write_file",
                serde_json::json!({"path": format!("late/{i:04}.md"), "content": body}),
            )
        })
        .collect();
    let limit = n.to_string();
    let deadline = Duration::from_secs(3);
    let mut walls = Vec::new();
    for _ in 0..3 {
        api.push(fake_api::Reply::anthropic_tools("Writing.", &calls))
            .push(fake_api::Reply::Hang(Duration::from_secs(60)));
        let mut cmd = writing_run(f, state, api, &limit);
        cmd.args(["--deadline", "3s"]);
        let start = Instant::now();
        assert_eq!(exit_code(cmd), 1, "the run did not stop at its deadline");
        walls.push(start.elapsed());
        assert!(
            !f.transcripts.join("memory/late").exists(),
            "the run's writes were not restored"
        );
    }
    walls.sort();
    report(
        "dream-run --deadline 3s, 3,000 writes then a silent model (restore included)",
        walls[1],
        deadline,
        "its --deadline",
        Some(1.1),
    );
}

/// `dream-run check` over a generated 5,000-file memory dir against `grep -r` over the same
/// files, and the health before and after a scripted consolidation of each crafted case.
fn check_benchmarks() {
    let f = fixture(0, Duration::from_secs(48 * 3600));
    let memory = f.transcripts.join("memory");
    generated_memory(&memory, 5000);
    let mut check = Command::new(DREAM_RUN);
    check
        .args(["check", "-n", "--memory-dir"])
        .arg(&memory)
        .env_clear()
        .env("HOME", &f.home)
        .env("CLAUDE_CONFIG_DIR", &f.config)
        .env("XDG_STATE_HOME", f.home.join("state"));
    let out = check.output().expect("check");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("check JSON");
    println!(
        "dream-run check of 5,000 generated memory files: {} files, problems {}",
        doc["files"], doc["counts"]
    );
    let mut grep = Command::new("grep");
    grep.args(["-r", "-c", "yesterday"]).arg(&memory);
    let m = medians(&mut [("dream-run check", check), ("grep", grep)], 15);
    report(
        "dream-run check of a 5,000-file memory dir",
        m[0],
        m[1],
        "`grep -r -c yesterday` over the same files",
        Some(2.0),
    );
    scripted_consolidations();
}

/// `n` generated notes in 50 folders, the index linking the first 150: orphans, dangling
/// links (the last 50 link past the end), code spans, dates, frontmatter.
fn generated_memory(memory: &Path, n: usize) {
    let mut index = String::from("# Memory\n");
    for i in 0..n {
        let dir = format!("topic-{:02}", i % 50);
        let name = format!("{dir}/note-{i:04}.md");
        if i < 150 {
            index.push_str(&format!("- [Note {i}]({name}) — what note {i} holds\n"));
        }
        let next = format!("note-{:04}.md", i + 50);
        let body = format!(
            "---\nname: note-{i}\ndescription: generated note {i}\ntype: project\n---\n\n\
# Note {i}\n\nOn 2026-11-{:02} the team agreed on rule {i}: run `make test` before a commit \
and keep `src/lib.rs` small.\nSee [the next note]({next}) for more.\n\n\
- fact {i}.1: the build takes about {i} seconds on a cold cache\n\
- fact {i}.2: the deploy of service {i} is blue-green\n\
- fact {i}.3: owner of area {i} reviews changes within a day\n\n\
```sh\nmake test\n```\n",
            1 + i % 28
        );
        let path = memory.join(&name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        std::fs::write(&path, body).expect("note");
    }
    std::fs::write(memory.join("MEMORY.md"), index).expect("index");
}

/// `dream-run ARGS` (or `dream-run check`) in fixture `f`'s home, with no model credential.
fn dream_run_in(f: &Fixture, args: &[&str]) -> Command {
    let mut cmd = Command::new(DREAM_RUN);
    cmd.args(args)
        .arg("--cwd")
        .arg(&f.project)
        .env_clear()
        .env("HOME", &f.home)
        .env("CLAUDE_CONFIG_DIR", &f.config)
        .env("XDG_STATE_HOME", f.home.join("state"));
    cmd
}

/// The rules engine (`--engine rules --dry-run`: the check, the transcripts' scan and the
/// whole plan, nothing written, so every repetition does the same work) against `check` over
/// the same generated 5,000-file dir, and its cost at 1,000 files against 5,000.
fn rules_benchmarks() {
    let rules = ["--engine", "rules", "--dry-run", "-n", "-q"];
    let mut sizes = Vec::new();
    for n in [1000, 5000] {
        let f = fixture(20, Duration::from_secs(48 * 3600));
        generated_memory(&f.transcripts.join("memory"), n);
        let out = dream_run_in(&f, &rules).output().expect("rules");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("rules JSON");
        let changes = doc["changes"].as_array().map_or(0, Vec::len);
        println!("dream-run --engine rules over {n} generated memory files: {changes} changes");
        assert!(changes > 0, "the generated dir has fixes to make: {doc}");
        sizes.push(f);
    }
    let m = medians(
        &mut [
            ("rules", dream_run_in(&sizes[1], &rules)),
            ("check", dream_run_in(&sizes[1], &["check", "-n", "-q"])),
            ("rules at 1,000", dream_run_in(&sizes[0], &rules)),
        ],
        11,
    );
    report(
        "dream-run --engine rules over a 5,000-file memory dir",
        m[0],
        m[1],
        "`dream-run check` of the same dir",
        Some(3.0),
    );
    report(
        "dream-run --engine rules at 5,000 files",
        m[0],
        m[2] * 5,
        "5 x its time at 1,000 files (linear: about 1x)",
        Some(1.3),
    );
}

/// One scripted consolidation per crafted case (tests/fixtures/memory-cases): what it fixes
/// shows in `run.health`, before and after.
fn scripted_consolidations() {
    use serde_json::json;
    let cases = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memory-cases");
    let read = |p: &str| ("read_file", json!({ "path": p }));
    let edit = |p: &str, old: &str, new: &str| {
        (
            "edit_file",
            json!({"path": p, "old_string": old, "new_string": new}),
        )
    };
    let write = |p: &str, content: &str| ("write_file", json!({"path": p, "content": content}));
    let short_index: String = (1..=150)
        .map(|i| format!("- note {i}: a plain entry number {i}\n"))
        .collect();
    let short_entries: String = (1..=150)
        .map(|i| format!("- entry {i:03}: abc\n"))
        .collect();
    let scripts: Vec<(&str, Vec<(&str, serde_json::Value)>)> = vec![
        ("healthy", vec![read("MEMORY.md")]),
        (
            "index_over_limit_lines",
            vec![read("MEMORY.md"), write("MEMORY.md", &short_index)],
        ),
        (
            "index_over_limit_chars",
            vec![read("MEMORY.md"), write("MEMORY.md", &short_entries)],
        ),
        (
            "dangling_link",
            vec![
                read("MEMORY.md"),
                edit("MEMORY.md", "- [Gone](gone.md) — deleted long ago\n", ""),
                read("a.md"),
                edit("a.md", "[the missing one](missing-too.md#part) and ", ""),
            ],
        ),
        (
            "orphan_file",
            vec![
                read("MEMORY.md"),
                edit(
                    "MEMORY.md",
                    "entry point\n",
                    "entry point\n- [C](c.md) — found again\n",
                ),
            ],
        ),
        (
            "duplicate_entry",
            vec![
                read("MEMORY.md"),
                edit(
                    "MEMORY.md",
                    "- [Build again](build.md) — the same file twice\n",
                    "",
                ),
                edit("MEMORY.md", "- use Cargo-Nextest!\n", ""),
                read("other.md"),
                write("other.md", "## Notes\nNothing else yet.\n"),
            ],
        ),
        (
            "long_entry",
            vec![
                read("MEMORY.md"),
                write(
                    "MEMORY.md",
                    "# Memory\n- [Style](style.md) — the style rules\n",
                ),
            ],
        ),
        (
            "relative_date",
            vec![
                read("log.md"),
                edit("log.md", "yesterday", "on 2026-12-02"),
                edit("log.md", "moved last week", "moved on 2026-11-25"),
            ],
        ),
        (
            "missing_path",
            vec![
                read("code.md"),
                write(
                    "code.md",
                    "The library is `src/lib.rs`; build with the `Makefile`.\n",
                ),
            ],
        ),
        (
            "secret",
            vec![
                read("env.md"),
                write("env.md", "The staging key lives in the team's vault.\n"),
            ],
        ),
        ("not_markdown", vec![read("MEMORY.md")]),
        ("unreadable", vec![read("MEMORY.md")]),
    ];
    let api = fake_api::FakeApi::start();
    println!("dream-run health before -> after a scripted consolidation of each crafted case:");
    for (case, calls) in scripts {
        let f = fixture(0, Duration::from_secs(48 * 3600));
        let memory = f.transcripts.join("memory");
        copy_dir(&cases.join(case).join("memory"), &memory);
        copy_dir(&cases.join("project"), &f.project);
        transcript(
            &f.transcripts
                .join("00000000-0000-4000-8000-000000000001.jsonl"),
            4096,
        );
        api.push(fake_api::Reply::anthropic_tools("Consolidating.", &calls))
            .push(fake_api::Reply::anthropic_text("Done."));
        let out = Command::new(DREAM_RUN)
            .args(["--unlocked", "-n", "--cwd"])
            .arg(&f.project)
            .env_clear()
            .env("HOME", &f.home)
            .env("CLAUDE_CONFIG_DIR", &f.config)
            .env("XDG_STATE_HOME", f.home.join("state"))
            .env("ANTHROPIC_BASE_URL", api.url())
            .env("ANTHROPIC_API_KEY", "sk-ant-bench")
            .output()
            .expect("dream-run");
        let doc: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        let nonzero = |counts: &serde_json::Value| -> String {
            let parts: Vec<String> = counts
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(_, n)| n.as_u64() != Some(0))
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            if parts.is_empty() {
                "healthy".into()
            } else {
                parts.join(", ")
            }
        };
        let health = &doc["run"]["health"];
        println!(
            "  {case}: {} -> {} ({})",
            nonzero(&health["before"]["counts"]),
            nonzero(&health["after"]["counts"]),
            doc["run"]["status"].as_str().unwrap_or("no run")
        );
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// `turn-status` (heuristic): a 1 GB transcript against a 1 MB one, its peak memory, and the
/// Stop-hook path against `jq` pulling the same field out of the same payload.
fn status_benchmarks() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let small = tmp.path().join("small.jsonl");
    let large = tmp.path().join("large.jsonl");
    transcript(&small, 1 << 20);
    transcript(&large, 1 << 30);
    let status = |args: &[&std::ffi::OsStr]| {
        let mut cmd = Command::new(STATUS);
        cmd.args(args).env_clear().env("HOME", tmp.path());
        cmd
    };
    let on = |path: &Path| status(&["--transcript".as_ref(), path.as_os_str()]);
    assert_eq!(
        exit_code(on(&large)),
        0,
        "turn-status failed on the 1 GB transcript"
    );
    let m = medians(
        &mut [
            ("turn-status 1 GB", on(&large)),
            ("turn-status 1 MB", on(&small)),
        ],
        100,
    );
    report(
        "turn-status (heuristic) on a 1 GB transcript",
        m[0],
        m[1],
        "on a 1 MB one",
        Some(1.2),
    );
    let rss = peak_rss_kib(on(&large));
    let verdict = if rss < 32 * 1024 { "met" } else { "MISSED" };
    println!(
        "turn-status peak RSS on a 1 GB transcript: {:.1} MiB (target < 32 MiB, {verdict})",
        rss as f64 / 1024.0
    );

    // The real Stop payload of Claude Code 2.1.332, as a Stop hook gets it after every turn.
    let payload = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code-2.1.332/hook-input/Stop.json");
    let mut jq = Command::new("jq");
    jq.args(["-r", ".last_assistant_message"]);
    let m = medians_fed(
        &mut [("turn-status", status(&[])), ("jq", jq)],
        300,
        Some(&payload),
    );
    report(
        "turn-status (heuristic) from a Stop payload",
        m[0],
        m[1],
        "`jq -r .last_assistant_message`",
        Some(1.5),
    );
}

/// The groups `main` can run, by name: `cargo bench --bench bench -- status` runs one.
const GROUPS: &[(&str, fn())] = &[
    ("gate", gate_benchmarks),
    ("recap", recap_benchmarks),
    ("status", status_benchmarks),
    ("dream", dream_benchmarks),
    ("check", check_benchmarks),
    ("rules", rules_benchmarks),
    ("local-model", local_model_benchmarks),
];

fn main() {
    // `cargo bench` passes `--bench`; other words name groups (none: all of them).
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    println!("dreamkit benchmarks (medians of interleaved runs)");
    for (name, group) in GROUPS {
        if wanted.is_empty() || wanted.iter().any(|w| w == name) {
            group();
        }
    }
}

fn gate_benchmarks() {
    // 1. The "not due" path a Stop hook takes after every turn: process start, settings, one
    //    stat of the lock file.
    let f = fixture(0, Duration::from_secs(3600));
    assert_eq!(
        exit_code(gate_cmd(&f, &[])),
        1,
        "fixture is not on the too_soon path"
    );
    let mut stat = Command::new("stat");
    stat.args(["-c", "%Y"]).arg(&f.lock);
    let m = medians(
        &mut [("dream-gate", gate_cmd(&f, &[])), ("stat", stat)],
        300,
    );
    report(
        "dream-gate not due (too_soon)",
        m[0],
        m[1],
        "`stat -c %Y <lock>`",
        Some(1.5),
    );

    // 2. A scan of 10,000 session files newer than the last consolidation.
    let f = fixture(10_000, Duration::from_secs(48 * 3600));
    let scan_args = ["--scan-interval", "0"];
    assert_eq!(exit_code(gate_cmd(&f, &scan_args)), 0, "fixture is not due");
    let pipeline = format!(
        "find '{}' -maxdepth 1 -name '*.jsonl' -newer '{}' | wc -l",
        f.transcripts.display(),
        f.lock.display()
    );
    let mut find = Command::new("sh");
    find.args(["-c", &pipeline]);
    let mut bare = Command::new("find");
    bare.arg(&f.transcripts)
        .args(["-maxdepth", "1", "-name", "*.jsonl", "-newer"])
        .arg(&f.lock);
    let m = medians(
        &mut [
            ("dream-gate", gate_cmd(&f, &scan_args)),
            ("find | wc", find),
            ("find", bare),
        ],
        40,
    );
    report(
        "dream-gate scan of 10,000 sessions",
        m[0],
        m[1],
        "`find -newer | wc -l`",
        Some(1.0),
    );
    report(
        "  (for reference) the same",
        m[0],
        m[2],
        "`find -newer` alone",
        None,
    );
}

/// Final messages of the kinds turns end with (done, blocked, failed, working).
const ENDINGS: [&str; 10] = [
    "All tests pass. I committed the fix as a1b2c3d and pushed it to origin/main.",
    "Opened PR #42: https://github.com/o/r/pull/42",
    "Deployed v2.3.1 to staging.",
    "Do you want me to push this to `main`, or open a PR instead?",
    "I need your approval before running `terraform apply`.",
    "Blocked: the staging database credentials are missing.",
    "I could not get the build to pass: the linker cannot find libssl. I am giving up here.",
    "The migration failed with a foreign key error and I cannot fix it without the schema.",
    "Now I will update the remaining call sites in src/net.rs.",
    "Reading the test output next to see which case fails.",
];

/// Against the real local model server (`DREAMKIT_TEST_LOCAL_MODEL`, its base URL, as
/// `make test-local-model` prints it): the llm engine's success rate without and with
/// `response_format`, and what one dream-run turn costs on this CPU.
fn local_model_benchmarks() {
    let Ok(base) = std::env::var("DREAMKIT_TEST_LOCAL_MODEL") else {
        println!("local-model: SKIP (set DREAMKIT_TEST_LOCAL_MODEL to the server's base URL: scripts/local-model/serve.sh prints it)");
        return;
    };
    let payload = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/claude-code-2.1.332/hook-input/Stop.json"
    ))
    .expect("the Stop payload fixture");
    let payload: serde_json::Value = serde_json::from_str(&payload).expect("payload JSON");
    let extra = r#"{"temperature": 0, "seed": 42, "repeat_penalty": 1.0}"#;
    for (label, seeded) in [
        ("without response_format", Some("plain")),
        ("with response_format (detected)", None),
    ] {
        let f = fixture(0, Duration::from_secs(3600));
        let state = f.home.join("state");
        let mut classified = 0;
        let started = Instant::now();
        for text in ENDINGS {
            // A fresh state dir each time: nothing remembered but what is seeded.
            let _ = std::fs::remove_dir_all(&state);
            if let Some(form) = seeded {
                std::fs::create_dir_all(state.join("dreamkit")).expect("state");
                std::fs::write(
                    state.join("dreamkit/response-formats.json"),
                    serde_json::json!({ base.clone(): form }).to_string(),
                )
                .expect("seed");
            }
            let mut p = payload.clone();
            p["last_assistant_message"] = serde_json::json!(text);
            let mut cmd = Command::new(STATUS);
            cmd.args(["--engine", "llm", "--timeout", "300s", "--deadline", "10m"])
                .env_clear()
                .env("HOME", &f.home)
                .env("CLAUDE_CONFIG_DIR", &f.config)
                .env("XDG_STATE_HOME", &state)
                .env("DREAMKIT_PROVIDER", "openai")
                .env("OPENAI_BASE_URL", &base)
                .env("OPENAI_API_KEY", "")
                .env("OPENAI_MODEL", "smollm2-135m-instruct")
                .env("DREAMKIT_OPENAI_EXTRA_BODY", extra)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            let mut child = cmd.spawn().expect("turn-status");
            {
                use std::io::Write;
                let mut stdin = child.stdin.take().expect("stdin");
                stdin.write_all(p.to_string().as_bytes()).expect("payload");
            }
            if child.wait().expect("wait").code() == Some(0) {
                classified += 1;
            }
        }
        println!(
            "turn-status --engine llm on SmolLM2-135M-Instruct Q4_1 (llama-cpp-python 0.3.36), {label}: {classified}/{} classified, {:.1} s in all",
            ENDINGS.len(),
            started.elapsed().as_secs_f64()
        );
    }
}
