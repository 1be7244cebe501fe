//! `dream-run --engine rules`: the consolidation with no model, through the same pipeline as
//! a model's (envelope, lock, fencing, snapshot, record, propose/show/apply, undo, the
//! pending line), asking nothing of any model, needing no key and no session.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::dream::Dream;
use crate::support::LiveProcess;

/// An index with a duplicate line (the fourth folds to the third) and a topic file.
const INDEX: &str =
    "# Memory\n- [Build](build.md) — how to build\n- Use cargo nextest.\n- use Cargo-Nextest!\n";
const BUILD: &str = "---\nname: build\ndescription: how the project builds\nmetadata:\n  type: project\n---\n\nBuild with make.\n";

/// A Dream whose memory is [`INDEX`] and [`BUILD`] (its sessions stay: the rules ignore them).
fn rules_dream() -> Dream {
    let d = Dream::new();
    // The memory files go; the lock file beside them stays.
    std::fs::remove_dir_all(d.mem().join("topics")).unwrap();
    std::fs::remove_file(d.mem().join("stale.md")).unwrap();
    std::fs::write(d.mem().join("MEMORY.md"), INDEX).unwrap();
    std::fs::write(d.mem().join("build.md"), BUILD).unwrap();
    d
}

/// `dream-run --engine rules ARGS` with no model credential at all.
fn rules_run<'a>(d: &Dream, envelope: &str, args: &[&str]) -> crate::support::Run<'a> {
    d.dream_run(envelope, &["--engine", "rules"])
        .args(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
}

/// The one change the rules make to [`INDEX`]: its fourth line goes.
fn assert_duplicate_dropped(changes: &Value) {
    let changes = changes.as_array().expect("changes");
    assert_eq!(changes.len(), 1, "{changes:?}");
    let change = &changes[0];
    assert_eq!(change["file"], "MEMORY.md", "{change}");
    assert_eq!(change["action"], "edit", "{change}");
    assert_eq!(change["line"], 4, "{change}");
    assert_eq!(change["rule"], "duplicate_entry", "{change}");
    assert!(
        change["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{change}"
    );
}

const FIXED_INDEX: &str = "# Memory\n- [Build](build.md) — how to build\n- Use cargo nextest.\n";

#[test]
fn a_rules_run_needs_no_key_asks_no_model_and_completes_like_a_consolidation() {
    let d = rules_dream();
    let prior = d.lock_ms();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let out = rules_run(&d, &envelope, &[])
        .success()
        .stdout_json(|doc| {
            let run = &doc["run"];
            assert_eq!(run["status"], "completed", "{doc}");
            assert_eq!(run["engine"], "rules", "{doc}");
            assert_eq!(run["mode"], "apply", "{doc}");
            assert_eq!(run["turns"], 0, "{doc}");
            assert_eq!(run["usage"]["input_tokens"], 0, "{doc}");
            assert_duplicate_dropped(&run["changes"]);
            assert_eq!(
                run["files_touched"],
                json!([d.mem().join("MEMORY.md").to_string_lossy()]),
                "{doc}"
            );
            assert_eq!(
                run["health"]["before"]["counts"]["duplicate_entry"], 1,
                "{doc}"
            );
            assert_eq!(
                run["health"]["after"]["counts"]["duplicate_entry"], 0,
                "{doc}"
            );
            assert!(
                run["summary"]
                    .as_str()
                    .unwrap()
                    .starts_with("rules: 1 change"),
                "{doc}"
            );
        })
        .stderr_empty()
        .run();
    assert!(d.api.requests().is_empty(), "no model was asked");
    assert_eq!(d.read("MEMORY.md"), FIXED_INDEX);
    assert_eq!(
        d.read("build.md"),
        BUILD,
        "a file no rule fixes is left as it was"
    );

    let id = out.json()["run"]["task_id"].as_str().unwrap().to_string();
    let record = d.task(&id);
    assert_eq!(record["engine"], "rules", "{record}");
    assert_eq!(record["status"], "completed", "{record}");
    assert_eq!(record["changes"], out.json()["run"]["changes"], "{record}");
    // Announced like a model's consolidation.
    d.tool("dream-run")
        .arg("pending")
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["updates"][0]["task_id"], id.as_str(), "{doc}");
            assert_eq!(doc["updates"][0]["source"], "dream", "{doc}");
        })
        .stderr_empty()
        .run();
    // Released completed, it moved the last-consolidated time.
    d.release(&out.stdout, "completed");
    assert!(
        d.lock_ms() > prior,
        "the consolidation moved the lock's time"
    );
    holder.kill();

    // Undone like any run.
    d.tool("dream-run")
        .args(["undo", &id])
        .success()
        .stdout_json(|doc| assert_eq!(doc["task_id"], id.as_str(), "{doc}"))
        .stderr_any("undo's own report is tested with the model runs")
        .run();
    assert_eq!(d.read("MEMORY.md"), INDEX);
}

#[test]
fn a_rules_run_needs_no_session_and_nothing_to_fix_is_no_changes() {
    let d = rules_dream();
    for entry in std::fs::read_dir(d.home.transcripts_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let prior = d.lock_ms();
    // Zero sessions: it still runs.
    rules_run(&d, "{}", &["--unlocked"])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "completed", "{doc}");
            assert_eq!(doc["run"]["sessions_reviewed"], 0, "{doc}");
            assert_duplicate_dropped(&doc["run"]["changes"]);
        })
        .stderr_empty()
        .run();
    assert_eq!(d.read("MEMORY.md"), FIXED_INDEX);
    // Over its own output: nothing to fix, and the lock's time stays as it was.
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let again = rules_run(&d, &envelope, &[])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "no_changes", "{doc}");
            assert_eq!(doc["run"]["changes"], json!([]), "{doc}");
            assert_eq!(doc["run"]["files_touched"], json!([]), "{doc}");
        })
        .stderr_empty()
        .run();
    d.release(&again.stdout, "no_changes");
    holder.kill();
    assert_eq!(
        d.lock_ms(),
        prior,
        "no consolidation: the lock's time rolled back"
    );
    assert_eq!(d.read("MEMORY.md"), FIXED_INDEX);
    assert!(d.api.requests().is_empty());
}

#[test]
fn the_engine_comes_from_the_environment_and_a_wrong_one_is_a_usage_error() {
    let d = rules_dream();
    d.dream_run("{}", &["--unlocked"])
        .env("DREAMKIT_DREAM_ENGINE", "rules")
        .env_remove("ANTHROPIC_API_KEY")
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["engine"], "rules", "{doc}"))
        .stderr_empty()
        .run();
    let before = d.md_tree();
    d.dream_run("{}", &["--unlocked"])
        .env("DREAMKIT_DREAM_ENGINE", "magic")
        .code(2)
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "usage", "{doc}"))
        .stderr_contains("DREAMKIT_DREAM_ENGINE")
        .run();
    assert_eq!(d.md_tree(), before);
    assert!(d.api.requests().is_empty());
}

#[test]
fn a_rules_dry_run_prints_its_changes_and_writes_nothing() {
    let d = rules_dream();
    let memory = d.md_tree();
    let state = crate::support::tree(&d.home.state_dir());
    rules_run(&d, "{\"gate\": {\"due\": true}}", &["--dry-run"])
        .success()
        .stdout_json(|doc| {
            assert_eq!(
                doc["gate"]["due"], true,
                "the envelope passes through: {doc}"
            );
            assert_eq!(doc["engine"], "rules", "{doc}");
            assert_duplicate_dropped(&doc["changes"]);
            assert_eq!(doc["run"]["status"], "dry_run", "{doc}");
            assert_eq!(doc["run"]["changes"], doc["changes"], "{doc}");
            assert!(doc.get("prompt").is_none(), "no prompt: {doc}");
            assert!(doc.get("tools").is_none(), "no tools: {doc}");
        })
        .stderr_empty()
        .run();
    assert_eq!(d.md_tree(), memory);
    assert_eq!(crate::support::tree(&d.home.state_dir()), state);
    assert!(d.api.requests().is_empty());
}

#[test]
fn a_rules_proposal_is_shown_with_its_changes_then_applied() {
    let d = rules_dream();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let out = rules_run(&d, &envelope, &["--propose"])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "proposed", "{doc}");
            assert_duplicate_dropped(&doc["run"]["changes"]);
            let diff = doc["run"]["diff_text"].as_str().unwrap();
            assert!(diff.contains("-- use Cargo-Nextest!\n"), "{diff}");
        })
        .stderr_empty()
        .run();
    d.release(&out.stdout, "proposed");
    holder.kill();
    assert_eq!(
        d.read("MEMORY.md"),
        INDEX,
        "a proposal leaves the memory dir alone"
    );
    let id = out.json()["run"]["task_id"].as_str().unwrap().to_string();
    d.tool("dream-run")
        .arg("show")
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["task_id"], id.as_str(), "{doc}");
            assert_eq!(doc["engine"], "rules", "{doc}");
            assert_duplicate_dropped(&doc["changes"]);
        })
        .stderr_empty()
        .run();
    d.tool("dream-run")
        .arg("apply")
        .success()
        .stdout_json(|doc| assert_eq!(doc["task_id"], id.as_str(), "{doc}"))
        .stderr_any("apply's own report is tested with the model runs")
        .run();
    assert_eq!(d.read("MEMORY.md"), FIXED_INDEX);
    assert!(d.api.requests().is_empty());
}

#[test]
fn a_rule_that_would_lose_words_fails_the_run_and_restores() {
    let d = rules_dream();
    let before = d.md_tree();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let out = rules_run(&d, &envelope, &[])
        .env("DREAMKIT_TEST_RULES_FAULT", "lose_word")
        .code(1)
        .stdout_json(|doc| {
            let run = &doc["run"];
            assert_eq!(run["status"], "failed", "{doc}");
            assert_eq!(run["error"], "invariant", "{doc}");
            let message = run["message"].as_str().unwrap();
            assert!(
                message.contains("nextest"),
                "the lost word is named: {message}"
            );
            assert_eq!(run["changes"], json!([]), "{doc}");
        })
        .stderr_contains("run failed: the rules would have lost 1 word(s)")
        .run();
    assert_eq!(d.md_tree(), before, "restored");
    d.release(&out.stdout, "failed");
    holder.kill();
    let id = out.json()["run"]["task_id"].as_str().unwrap().to_string();
    let record = d.task(&id);
    assert_eq!(record["status"], "failed", "{record}");
    assert_eq!(record["error"], "invariant", "{record}");
    assert_eq!(record["snapshot"], Value::Null, "{record}");
}

/// A memory dir of `n` indexed topic files, each holding an API key the rules redact: `n`
/// writes, each the same in every home.
fn secrets_dream(n: usize) -> Dream {
    let d = rules_dream();
    let mut index = INDEX.to_string();
    for i in 0..n {
        index.push_str(&format!("- [Key {i}](key-{i:04}.md) — a staging key\n"));
        std::fs::write(
            d.mem().join(format!("key-{i:04}.md")),
            format!("# Key {i}\nThe staging key is sk-ant-api03-{i:04}abcdefghijklmnopqrstuvwxyzABCDEFGH{i:04}.\n"),
        )
        .unwrap();
    }
    std::fs::write(d.mem().join("MEMORY.md"), index).unwrap();
    d
}

/// kill -9 of a rules run at random moments, then the next command: the memory dir is
/// byte-identical to before or to the completed run's result.
#[test]
fn kill_9_of_a_rules_run_leaves_all_before_or_all_after() {
    const FILES: usize = 150;
    let done = secrets_dream(FILES);
    rules_run(&done, "{}", &["--unlocked", "--max-files", "1000"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_any("the health line depends on the rules")
        .run();
    let after = done.md_tree();
    let mut rng = crate::support::kill_seed("kill_9_of_a_rules_run_leaves_all_before_or_all_after");
    for round in 0..3 {
        let d = secrets_dream(FILES);
        let before = d.md_tree();
        crate::support::kill_at_random(
            rules_run(&d, "{}", &["--unlocked", "--max-files", "1000"]),
            &mut rng,
            400,
        );
        d.tool("dream-run")
            .arg("recover")
            .success()
            .stdout_any("what it put back depends on the moment")
            .stderr_any("what it put back depends on the moment")
            .run();
        let now = d.md_tree();
        let like = |other: &std::collections::BTreeSet<(String, Vec<u8>)>| {
            now.iter().filter(|entry| other.contains(entry)).count()
        };
        let odd: Vec<&String> = now
            .iter()
            .filter(|entry| !before.contains(entry) && !after.contains(entry))
            .map(|(name, _)| name)
            .take(5)
            .collect();
        assert!(
            now == before || now == after,
            "round {round}: neither before nor after: {} files, {} as before, {} as after, \
             {} before, {} after; in neither (the first 5): {odd:?}",
            now.len(),
            like(&before),
            like(&after),
            before.len(),
            after.len()
        );
    }
}

/// The crafted cases the rules fix (tests/fixtures/memory-cases/<case>): `memory/` before,
/// `expected/` after a whole rules run (`DREAMKIT_BLESS=1` rewrites them).
const CASES: [&str; 8] = [
    "dangling_link",
    "duplicate_entry",
    "index_over_limit_chars",
    "index_over_limit_lines",
    "long_entry",
    "orphan_file",
    "relative_date",
    "secret",
];

fn case_dir(case: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/memory-cases")
        .join(case)
}

/// A text with what changes from run to run written as placeholders: the stamp's
/// `modified:` value, and the day a long entry's rest was moved.
fn normalized(text: &str) -> String {
    text.lines()
        .map(|line| {
            if let Some(at) = line.find("modified: ") {
                format!("{}modified: MODIFIED", &line[..at])
            } else if let Some(at) = line.find("(Moved from the index on ") {
                let rest = &line[at + "(Moved from the index on ".len()..];
                let after = rest.find(':').map_or("", |i| &rest[i..]);
                format!("{}(Moved from the index on TODAY{after}", &line[..at])
            } else {
                line.to_string()
            }
        })
        .map(|line| line + "\n")
        .collect()
}

/// Every file under `dir`, relative path -> normalized text.
fn texts_under(dir: &Path) -> std::collections::BTreeMap<String, String> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file() && !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| {
            let rel = e
                .path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, normalized(&std::fs::read_to_string(e.path()).unwrap()))
        })
        .collect()
}

/// A session that wrote `file` (relative to the memory dir) with `content` at
/// 2026-11-20T10:00:00.000Z, as the client records a Write: the anchor of its lines.
fn session_writing(d: &Dream, file: &str, content: &str) {
    let id = crate::support::session_id(42);
    let record = json!({
        "type": "assistant", "sessionId": id, "uuid": "w1",
        "timestamp": "2026-11-20T10:00:00.000Z",
        "message": {"id": "m1", "role": "assistant", "content": [{
            "type": "tool_use", "id": "toolu_1", "name": "Write",
            "input": {"file_path": d.mem().join(file), "content": content}
        }]}
    });
    let path = d.home.add_session(&id, crate::support::hours(1));
    std::fs::write(path, format!("{record}\n")).unwrap();
}

/// Each crafted case through a whole rules run: the exact files after, the run's changes
/// (the task record's too), and check's counts of the fixed kind before and after.
#[test]
fn each_crafted_case_ends_as_its_expected_folder() {
    for case in CASES {
        let d = rules_dream();
        std::fs::remove_file(d.mem().join("MEMORY.md")).unwrap();
        std::fs::remove_file(d.mem().join("build.md")).unwrap();
        crate::support::copy_tree(&case_dir(case).join("memory"), &d.mem());
        if case == "relative_date" {
            let log = std::fs::read_to_string(d.mem().join("log.md")).unwrap();
            session_writing(&d, "log.md", &log);
        }
        let out = rules_run(&d, "{}", &["--unlocked"])
            .success()
            .stdout_json(|doc| {
                let run = &doc["run"];
                assert_eq!(run["status"], "completed", "{case}: {doc}");
                let changes = run["changes"].as_array().unwrap();
                assert!(!changes.is_empty(), "{case}: {doc}");
                for change in changes {
                    assert!(change["rule"].is_string(), "{case}: {change}");
                    assert!(change["detail"].is_string(), "{case}: {change}");
                }
            })
            // Never more problems after than before.
            .stderr_with(|err| assert!(!err.contains("left more problems"), "{case}: {err}"))
            .run();
        let doc = out.json();
        let kind = match case {
            "index_over_limit_chars" | "index_over_limit_lines" => "index_over_limit",
            other => other,
        };
        let health = &doc["run"]["health"];
        assert!(
            health["before"]["counts"][kind].as_u64().unwrap() > 0,
            "{case}: {health}"
        );
        if !matches!(case, "duplicate_entry") {
            // duplicate_entry keeps its topic files' shared line: the model's to judge.
            assert_eq!(health["after"]["counts"][kind], 0, "{case}: {health}");
        }
        let id = doc["run"]["task_id"].as_str().unwrap();
        assert_eq!(d.task(id)["changes"], doc["run"]["changes"], "{case}");
        let expected = case_dir(case).join("expected");
        let after = texts_under(&d.mem());
        if std::env::var_os("DREAMKIT_BLESS").is_some() {
            let _ = std::fs::remove_dir_all(&expected);
            for (rel, text) in &after {
                let path = expected.join(rel);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
        }
        assert_eq!(after, texts_under(&expected), "{case}: the files after");
        assert!(d.api.requests().is_empty(), "{case}");
    }
}

/// A plan over `--max-files` writes nothing: exit 1, `max_files`, the memory as it was.
#[test]
fn a_plan_over_the_file_limit_writes_nothing() {
    let d = secrets_dream(5);
    let before = d.md_tree();
    rules_run(&d, "{}", &["--unlocked", "--max-files", "3"])
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "failed", "{doc}");
            assert_eq!(doc["run"]["error"], "max_files", "{doc}");
            assert_eq!(doc["run"]["files_touched"], json!([]), "{doc}");
        })
        .stderr_is(
            "dream-run: run failed: the rules would change 6 files, over --max-files 3; nothing \
             was changed (raise --max-files)\n",
        )
        .run();
    assert_eq!(d.md_tree(), before);
}

/// No memory dir yet (before the first consolidation): nothing to fix, nothing made.
#[test]
fn no_memory_dir_is_nothing_to_fix() {
    let d = Dream::new();
    std::fs::remove_dir_all(d.mem()).unwrap();
    rules_run(&d, "{}", &["--dry-run"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["changes"], json!([]), "{doc}"))
        .stderr_empty()
        .run();
    assert!(!d.mem().exists());
    rules_run(&d, "{}", &["--unlocked"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "no_changes", "{doc}"))
        .stderr_empty()
        .run();
    assert!(d.md_tree().is_empty());
}

/// `--notify-transcript`: a completed rules run tells the session as a model's run does.
#[test]
fn a_rules_run_appends_memory_saved_to_the_named_transcript() {
    let d = rules_dream();
    let transcript = d
        .home
        .transcripts_dir()
        .join(format!("{}.jsonl", crate::support::session_id(1)));
    rules_run(
        &d,
        "{}",
        &[
            "--unlocked",
            "--notify-transcript",
            transcript.to_str().unwrap(),
        ],
    )
    .success()
    .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
    .stderr_empty()
    .run();
    let text = std::fs::read_to_string(&transcript).unwrap();
    let saved: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(saved["subtype"], "memory_saved", "{saved}");
    assert_eq!(
        saved["writtenPaths"],
        json!([d.mem().join("MEMORY.md").to_string_lossy()]),
        "{saved}"
    );
}

/// A topic file the rules change is stamped as the real client stamps (the memory dir it
/// wrote, tests/fixtures/claude-code-memory): its `metadata` keys in the client's order, its
/// origin kept, `modified` moved in the client's form; nothing else of it touched.
#[test]
fn a_file_the_rules_change_is_stamped_like_the_clients() {
    use crate::support::client_memory::{
        assert_stamped_like_the_client, fixture_dir, WRITING_SESSION,
    };
    let d = rules_dream();
    std::fs::remove_file(d.mem().join("MEMORY.md")).unwrap();
    std::fs::remove_file(d.mem().join("build.md")).unwrap();
    crate::support::copy_tree(&fixture_dir(), &d.mem());
    let file = d.mem().join("feedback_testing.md");
    let original = std::fs::read_to_string(&file).unwrap();
    let token = "ghp_FAKEfake0123456789FAKEfake0123456789";
    std::fs::write(&file, format!("{original}Token: {token}\n")).unwrap();
    rules_run(&d, "{}", &["--unlocked"])
        .success()
        .stdout_json(|doc| {
            let changes = doc["run"]["changes"].as_array().unwrap();
            assert_eq!(changes.len(), 1, "{doc}");
            assert_eq!(changes[0]["rule"], "secret", "{doc}");
            assert_eq!(changes[0]["file"], "feedback_testing.md", "{doc}");
            assert!(
                !doc.to_string().contains(token),
                "the value is never printed"
            );
        })
        .stderr_empty()
        .run();
    let after = std::fs::read_to_string(&file).unwrap();
    let redacted = "Token: [redacted: github_token]\n";
    assert!(after.ends_with(redacted), "{after}");
    // Without the line the rule changed, the file is the client's but for `modified`.
    std::fs::write(&file, after.strip_suffix(redacted).unwrap()).unwrap();
    let modified = assert_stamped_like_the_client(&d.mem(), WRITING_SESSION);
    let moved: Vec<&str> = modified
        .iter()
        .filter(|(name, value)| {
            let theirs = std::fs::read_to_string(fixture_dir().join(name)).unwrap();
            !theirs.contains(value.as_str())
        })
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(moved, ["feedback_testing.md"]);
}
