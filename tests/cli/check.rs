//! `dream-run check` on crafted memory dirs (tests/fixtures/memory-cases/<case>/memory): each
//! problem kind found where it is and nowhere else, the index cut as Claude Code cuts it,
//! secrets never echoed, nothing written; and a run's health before and after.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::dream::Dream;
use crate::support::fake_api::Reply;
use crate::support::{bin_path, copy_tree, hours, set_age, tree, ClaudeHome, LiveProcess, Run};

const KINDS: [&str; 16] = [
    "index_over_limit",
    "index_shape",
    "dangling_link",
    "orphan_file",
    "duplicate_entry",
    "long_entry",
    "front_matter",
    "large_file",
    "continuation_file",
    "relative_date",
    "missing_path",
    "stale_index",
    "secret",
    "not_markdown",
    "unreadable",
    "stray_temp",
];

fn cases() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memory-cases")
}

/// A home whose project is the fixture project and whose memory dir is the case's.
fn home_with(case: &str) -> ClaudeHome {
    let home = ClaudeHome::new();
    copy_tree(&cases().join("project"), &home.project);
    copy_tree(&cases().join(case).join("memory"), &home.memory_dir());
    home
}

/// `dream-run check ARGS`; the caller says what it must print.
fn check<'a>(home: &ClaudeHome, args: &[&str]) -> Run<'a> {
    Run::new(home, "dream-run").arg("check").args(args)
}

/// The line an unhealthy check says on stderr: how many problems, where, of which kinds.
fn summary(doc: &Value) -> String {
    let n = doc["problems"].as_array().unwrap().len();
    let kinds: Vec<String> = counts(doc)
        .iter()
        .map(|(kind, count)| format!("{count} {kind}"))
        .collect();
    format!(
        "dream-run: {n} problem{} in {}: {}\n",
        if n == 1 { "" } else { "s" },
        doc["memory_dir"].as_str().unwrap(),
        kinds.join(", ")
    )
}

/// A run's stderr is dream-run's one line: the message its document's error holds.
fn says_error(ran: &crate::support::run::Ran) {
    let message = ran.json()["error"]["message"].as_str().unwrap().to_string();
    assert_eq!(ran.stderr, format!("dream-run: {message}\n"));
}

/// A check that must find the memory healthy (exit 0, silent); its document.
fn healthy(home: &ClaudeHome, args: &[&str]) -> Value {
    check(home, args)
        .success()
        .stdout_json(|doc| assert_eq!(doc["problems"].as_array().map(Vec::len), Some(0), "{doc}"))
        .stderr_empty()
        .run()
        .json()
}

/// `dream-run` with the envelope on stdin, against the Dream world's fake model.
fn dream_run<'a>(d: &Dream, envelope: &str, args: &[&str]) -> Run<'a> {
    Run::ours(d.process(&bin_path("dream-run")), "dream-run")
        .args(args)
        .stdin(envelope)
}

/// The counts, with every kind present (zeros included).
fn counts(doc: &Value) -> Vec<(String, u64)> {
    let counts = doc["counts"].as_object().unwrap();
    assert_eq!(
        counts.keys().map(String::as_str).collect::<Vec<_>>(),
        KINDS,
        "every kind, in order"
    );
    counts
        .iter()
        .filter(|(_, n)| n.as_u64() != Some(0))
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect()
}

/// `(kind, file, line)` of every problem.
fn problems(doc: &Value) -> Vec<(String, String, Option<u64>)> {
    doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["kind"].as_str().unwrap().to_string(),
                p["file"].as_str().unwrap().to_string(),
                p["line"].as_u64(),
            )
        })
        .collect()
}

/// Every problem's detail, in order.
fn details(doc: &Value) -> Vec<&str> {
    doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["detail"].as_str().unwrap())
        .collect()
}

fn p(kind: &str, file: &str, line: Option<u64>) -> (String, String, Option<u64>) {
    (kind.to_string(), file.to_string(), line)
}

/// Exit 1, the problems as JSON, one line on stderr naming the counts.
fn unhealthy(home: &ClaudeHome, args: &[&str]) -> Value {
    unhealthy_run(check(home, args))
}

/// [`unhealthy`] for a check run already described.
fn unhealthy_run(run: Run<'_>) -> Value {
    let ran = run
        .code(1)
        .stdout_json(|doc| {
            assert!(
                doc["problems"].as_array().is_some_and(|p| !p.is_empty()),
                "{doc}"
            );
        })
        .stderr_with(|stderr| {
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stderr.starts_with("dream-run: "), "{stderr}");
        })
        .run();
    let doc = ran.json();
    let n = doc["problems"].as_array().unwrap().len();
    assert!(
        ran.stderr.contains(&format!("{n} problem")),
        "{} names the count",
        ran.stderr
    );
    assert_eq!(ran.stderr, summary(&doc));
    doc
}

#[test]
fn a_healthy_memory_exits_0_with_every_count_zero() {
    let home = home_with("healthy");
    let doc = healthy(&home, &[]);
    assert_eq!(counts(&doc), []);
    assert_eq!(doc["problems"], json!([]));
    assert_eq!(doc["files"], 3);
    assert_eq!(
        doc["memory_dir"],
        json!(home.memory_dir().display().to_string())
    );
    assert_eq!(
        doc["project_root"],
        json!(home.project.display().to_string())
    );
    assert_eq!(
        doc["index"],
        json!({
            "path": home.memory_dir().join("MEMORY.md").display().to_string(),
            "exists": true,
            "lines": 4,
            "chars": std::fs::read_to_string(home.memory_dir().join("MEMORY.md")).unwrap().trim().encode_utf16().count(),
            "max_lines": 200,
            "max_chars": 25000,
            "cut_at_load": [],
            "cut_at_load_total": 0,
        })
    );
}

#[test]
fn over_200_lines_cut_at_load_is_what_the_client_drops() {
    let home = home_with("index_over_limit_lines");
    let doc = unhealthy(&home, &[]);
    // Its lines are bullets without a link: each is index_shape too.
    assert_eq!(
        counts(&doc),
        [("index_over_limit".into(), 1), ("index_shape".into(), 260)]
    );
    let mut expected: Vec<_> = (1..=260)
        .map(|line| p("index_shape", "MEMORY.md", Some(line)))
        .collect();
    expected.insert(200, p("index_over_limit", "MEMORY.md", Some(201)));
    assert_eq!(problems(&doc), expected);
    assert!(doc["problems"][200]["detail"]
        .as_str()
        .unwrap()
        .starts_with(
            "260 lines (limit: 200); Claude Code does not load 60 of 260 lines, from line 201 on"
        ));
    let cut = doc["index"]["cut_at_load"].as_array().unwrap();
    assert_eq!(doc["index"]["lines"], 260);
    assert_eq!(cut.len(), 60);
    assert_eq!(
        cut[0],
        json!({"line": 201, "text": "- note 201: a plain entry number 201"})
    );
    assert_eq!(
        cut[59],
        json!({"line": 260, "text": "- note 260: a plain entry number 260"})
    );
}

#[test]
fn over_25000_characters_the_cut_is_at_the_last_newline_before() {
    // SPEC 5: a 150-line, 31 KB index of 213-character lines loses line 118 on.
    let home = home_with("index_over_limit_chars");
    let doc = unhealthy(&home, &[]);
    // Its lines are bullets without a link: each is index_shape too.
    assert_eq!(
        counts(&doc),
        [
            ("index_over_limit".into(), 1),
            ("index_shape".into(), 150),
            ("long_entry".into(), 150)
        ]
    );
    assert_eq!(doc["index"]["lines"], 150);
    assert_eq!(doc["index"]["chars"], 150 * 213 - 1);
    let cut = doc["index"]["cut_at_load"].as_array().unwrap();
    assert_eq!(cut.len(), 33);
    assert_eq!(cut[0]["line"], 118);
    assert!(cut[0]["text"]
        .as_str()
        .unwrap()
        .starts_with("- entry 118: "));
    let over = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "index_over_limit")
        .unwrap();
    assert_eq!(over["line"], 118);
    assert!(over["detail"]
        .as_str()
        .unwrap()
        .contains("31949 characters (limit: 25000): index entries are too long"));
}

#[test]
fn dangling_links_from_the_index_and_from_topic_files() {
    let home = home_with("dangling_link");
    let doc = unhealthy(&home, &[]);
    // a.md has no frontmatter.
    assert_eq!(
        counts(&doc),
        [("dangling_link".into(), 2), ("front_matter".into(), 1)]
    );
    assert_eq!(
        problems(&doc),
        [
            p("dangling_link", "MEMORY.md", Some(3)),
            p("front_matter", "a.md", None),
            p("dangling_link", "a.md", Some(1)),
        ]
    );
    assert_eq!(
        doc["problems"][2]["detail"],
        "links to missing-too.md, which does not exist"
    );
}

#[test]
fn an_orphan_is_a_topic_no_index_reaches_even_through_other_topics() {
    let home = home_with("orphan_file");
    let doc = unhealthy(&home, &[]);
    // Its topic files have no frontmatter.
    assert_eq!(
        counts(&doc),
        [("orphan_file".into(), 1), ("front_matter".into(), 4)]
    );
    assert_eq!(
        problems(&doc),
        [
            p("front_matter", "a.md", None),
            p("front_matter", "b.md", None),
            p("orphan_file", "c.md", None),
            p("front_matter", "c.md", None),
            p("front_matter", "team/x.md", None),
        ]
    );
    assert_eq!(
        doc["problems"][2]["detail"],
        "no MEMORY.md entry leads here: the index does not link it (recall may still find it by its description)"
    );
    assert_eq!(doc["files"], 6);
}

#[test]
fn duplicates_by_target_and_by_folded_text() {
    let home = home_with("duplicate_entry");
    let doc = unhealthy(&home, &[]);
    // The index's plain bullets are index_shape, the topic files have no frontmatter.
    assert_eq!(
        counts(&doc),
        [
            ("index_shape".into(), 2),
            ("duplicate_entry".into(), 3),
            ("front_matter".into(), 2)
        ]
    );
    assert_eq!(
        problems(&doc),
        [
            p("duplicate_entry", "MEMORY.md", Some(3)),
            p("index_shape", "MEMORY.md", Some(4)),
            p("index_shape", "MEMORY.md", Some(5)),
            p("duplicate_entry", "MEMORY.md", Some(5)),
            p("front_matter", "build.md", None),
            p("front_matter", "other.md", None),
            p("duplicate_entry", "other.md", Some(2)),
        ]
    );
    let details: Vec<&str> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "duplicate_entry")
        .map(|p| p["detail"].as_str().unwrap())
        .collect();
    assert_eq!(
        details,
        [
            "points at build.md, as line 2 does",
            "the same entry as line 4",
            "the same text as build.md:1",
        ]
    );
}

#[test]
fn topic_files_need_the_clients_frontmatter() {
    let home = home_with("front_matter");
    let doc = unhealthy(&home, &[]);
    assert_eq!(counts(&doc), [("front_matter".into(), 7)]);
    // old.md (no type: older files have none) and quoted.md (quoted values) are fine.
    assert_eq!(
        doc["problems"],
        json!([
            {"kind": "front_matter", "file": "bad_name.md", "line": 2,
             "detail": "name \"Bad Name\" is not a kebab-case slug (lowercase letters and digits joined by single -)"},
            {"kind": "front_matter", "file": "convention.md", "line": 6,
             "detail": "type \"convention\" is none of user, feedback, project, reference"},
            {"kind": "front_matter", "file": "long_description.md", "line": 3,
             "detail": "description is 301 characters (at most 300): one line recall can pick the memory by"},
            {"kind": "front_matter", "file": "no_name.md", "line": 1,
             "detail": "the frontmatter has no name"},
            {"kind": "front_matter", "file": "plain.md",
             "detail": "no frontmatter: a memory file starts with a `---` block holding name, description and metadata.type"},
            {"kind": "front_matter", "file": "top_type.md", "line": 4,
             "detail": "type \"convention\" is none of user, feedback, project, reference"},
            {"kind": "front_matter", "file": "unclosed.md", "line": 1,
             "detail": "the frontmatter's `---` block is never closed: the whole file is read as frontmatter"},
        ])
    );
    // No description: recall has nothing to pick the memory by.
    let mem = home.memory_dir();
    std::fs::write(
        mem.join("no_name.md"),
        "---\nname: no-name\n---\n\nThe body.\n",
    )
    .unwrap();
    let doc = unhealthy(&home, &[]);
    let no_description: Vec<&Value> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["file"] == "no_name.md")
        .collect();
    assert_eq!(
        no_description,
        [
            &json!({"kind": "front_matter", "file": "no_name.md", "line": 1,
                 "detail": "the frontmatter has no description: recall picks memories by it"})
        ]
    );
}

#[test]
fn the_index_holds_headings_and_one_entry_a_line() {
    let home = home_with("index_shape");
    let doc = unhealthy(&home, &[]);
    assert_eq!(counts(&doc), [("index_shape".into(), 7)]);
    assert_eq!(
        doc["problems"],
        json!([
            {"kind": "index_shape", "file": "MEMORY.md", "line": 1,
             "detail": "frontmatter in the index: MEMORY.md holds entries only"},
            {"kind": "index_shape", "file": "MEMORY.md", "line": 6,
             "detail": "neither a heading nor a `- [Title](file.md) — hook` entry: content belongs in a topic file"},
            {"kind": "index_shape", "file": "MEMORY.md", "line": 7,
             "detail": "a bullet that links to no memory file: an entry is `- [Title](file.md) — hook`"},
            {"kind": "index_shape", "file": "MEMORY.md", "line": 8,
             "detail": "2 links on one line: one entry per memory file"},
            {"kind": "index_shape", "file": "MEMORY.md", "line": 11,
             "detail": "code in the index: it belongs in a topic file"},
            {"kind": "index_shape", "file": "MEMORY.md", "line": 12,
             "detail": "code in the index: it belongs in a topic file"},
            {"kind": "index_shape", "file": "MEMORY.md", "line": 13,
             "detail": "code in the index: it belongs in a topic file"},
        ])
    );
}

#[test]
fn a_topic_file_over_4096_bytes() {
    let home = home_with("large_file");
    assert_eq!(
        std::fs::metadata(home.memory_dir().join("edge.md"))
            .unwrap()
            .len(),
        4096,
        "at the limit: fine"
    );
    let doc = unhealthy(&home, &[]);
    assert_eq!(
        doc["problems"],
        json!([{"kind": "large_file", "file": "big.md",
                "detail": "4097 bytes (at most 4096): one memory per file, a few lines; split it or move the detail out"}])
    );
}

#[test]
fn a_continuation_file_beside_its_first_part() {
    let home = home_with("continuation_file");
    let doc = unhealthy(&home, &[]);
    // release-2026.md has no release.md beside it: a name, not a continuation.
    assert_eq!(
        doc["problems"],
        json!([{"kind": "continuation_file", "file": "notes-2.md",
                "detail": "continues notes.md: one memory per file; merge the two or give this one its own name"}])
    );
}

#[test]
fn a_memory_dir_the_real_client_wrote_is_healthy() {
    let written =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-code-memory/memory");
    let home = ClaudeHome::new();
    let doc = healthy(&home, &["--memory-dir", written.to_str().unwrap()]);
    assert_eq!(doc["files"], 5);
    assert_eq!(counts(&doc), []);
    // As a project's memory too, with a session newer than the index by less than a day.
    copy_tree(&written, &home.memory_dir());
    home.add_session(&crate::support::session_id(1), hours(0));
    let doc = healthy(&home, &[]);
    assert_eq!(doc["files"], 5);
}

#[test]
fn a_long_index_line() {
    let home = home_with("long_entry");
    let doc = unhealthy(&home, &[]);
    // style.md has no frontmatter.
    assert_eq!(
        counts(&doc),
        [("long_entry".into(), 1), ("front_matter".into(), 1)]
    );
    assert_eq!(
        problems(&doc),
        [
            p("long_entry", "MEMORY.md", Some(2)),
            p("front_matter", "style.md", None)
        ]
    );
    assert_eq!(
        details(&doc)[0],
        "211 characters (at most 200): keep one short line, the detail in the topic file"
    );
    // Over 200 UTF-16 units, as the client counts: 151 to 200 is fine, and a character
    // outside the BMP counts two.
    let entry = |units: usize| {
        let head = "- [Style](style.md) — 😀 ";
        let head_units = head.encode_utf16().count();
        format!("{head}{}\n", "x".repeat(units - head_units))
    };
    let index = home.memory_dir().join("MEMORY.md");
    std::fs::write(&index, format!("# Memory\n{}", entry(200))).unwrap();
    let doc = unhealthy(&home, &[]);
    assert_eq!(counts(&doc), [("front_matter".into(), 1)]);
    std::fs::write(&index, format!("# Memory\n{}", entry(201))).unwrap();
    let doc = unhealthy(&home, &[]);
    assert_eq!(problems(&doc)[0], p("long_entry", "MEMORY.md", Some(2)));
    assert_eq!(
        details(&doc)[0],
        "201 characters (at most 200): keep one short line, the detail in the topic file"
    );
}

#[test]
fn relative_dates_in_prose_but_not_in_code() {
    let home = home_with("relative_date");
    let doc = unhealthy(&home, &[]);
    assert_eq!(counts(&doc), [("relative_date".into(), 2)]);
    assert_eq!(
        problems(&doc),
        [
            p("relative_date", "log.md", Some(7)),
            p("relative_date", "log.md", Some(8)),
        ]
    );
    assert!(doc["problems"][1]["detail"]
        .as_str()
        .unwrap()
        .starts_with("\"last week\": write the date itself"));
    // Quoted text is a quote, not a date the memory states; an apostrophe quotes nothing.
    let log = home.memory_dir().join("log.md");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str("The user wrote \"ship it tomorrow\" in the review.\n"); // 15
    text.push_str("The bot answers 'done yesterday'; the chart says “last week”.\n"); // 16
    text.push_str("Don't merge today: it's frozen.\n"); // 17
    std::fs::write(&log, text).unwrap();
    let doc = unhealthy(&home, &[]);
    assert_eq!(
        problems(&doc),
        [
            p("relative_date", "log.md", Some(7)),
            p("relative_date", "log.md", Some(8)),
            p("relative_date", "log.md", Some(17)),
        ]
    );
    assert!(doc["problems"][2]["detail"]
        .as_str()
        .unwrap()
        .starts_with("\"today\": write the date itself"));
}

#[test]
fn missing_paths_against_the_project_and_not_without_one() {
    let home = home_with("missing_path");
    let doc = unhealthy(&home, &[]);
    // code.md has no frontmatter.
    assert_eq!(
        counts(&doc),
        [("front_matter".into(), 1), ("missing_path".into(), 3)]
    );
    assert_eq!(
        problems(&doc),
        [
            p("front_matter", "code.md", None),
            p("missing_path", "code.md", Some(1)),
            p("missing_path", "code.md", Some(2)),
            p("missing_path", "code.md", Some(3)),
        ]
    );
    let details = details(&doc);
    assert_eq!(
        details[1..],
        [
            "src/old.rs is not in the project any more",
            "Justfile is not in the project any more",
            "docs/removed.md is not in the project any more",
        ]
    );
    // In a git repository the root is the repository's; a path relative to the
    // subdirectory the project was named by counts too.
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&home.project)
        .status();
    // No git here: the repository half cannot be shown. Where git runs, its init works.
    if let Ok(status) = git {
        assert!(status.success(), "git init: {status}");
        std::fs::create_dir_all(home.project.join("src/parser")).unwrap();
        std::fs::write(home.project.join("src/parser/lexer.rs"), "").unwrap();
        std::fs::write(
            home.memory_dir().join("code.md"),
            format!(
                "{}The lexer is `parser/lexer.rs`.\n",
                std::fs::read_to_string(cases().join("missing_path/memory/code.md")).unwrap()
            ),
        )
        .unwrap();
        let mem = home.memory_dir().display().to_string();
        let from_root = unhealthy(&home, &[]);
        assert_eq!(
            counts(&from_root),
            [("front_matter".into(), 1), ("missing_path".into(), 4)],
            "{from_root}"
        );
        let sub = home.project.join("src").display().to_string();
        let from_sub = unhealthy(&home, &["--cwd", &sub, "--memory-dir", &mem]);
        assert_eq!(
            from_sub["project_root"],
            json!(home.project.display().to_string())
        );
        assert_eq!(
            counts(&from_sub),
            [("front_matter".into(), 1), ("missing_path".into(), 3)],
            "{from_sub}"
        );
    }
    // With --memory-dir alone there is no project: no path is checked.
    let mem = home.memory_dir().display().to_string();
    let doc = unhealthy(&home, &["--memory-dir", &mem]);
    assert_eq!(doc["project_root"], Value::Null);
    assert_eq!(counts(&doc), [("front_matter".into(), 1)]);
}

#[test]
fn a_stale_index_against_the_newest_session_not_its_topics() {
    let home = home_with("stale_index");
    let mem = home.memory_dir();
    set_age(&mem.join("MEMORY.md"), hours(72));
    // A topic file newer than the index is no problem: the client updates files in place.
    set_age(&mem.join("deploy.md"), hours(1));
    home.add_session(&crate::support::session_id(1), hours(2));
    let doc = unhealthy(&home, &[]);
    // deploy.md has no frontmatter.
    assert_eq!(
        counts(&doc),
        [("front_matter".into(), 1), ("stale_index".into(), 1)]
    );
    assert_eq!(
        problems(&doc),
        [
            p("stale_index", "MEMORY.md", None),
            p("front_matter", "deploy.md", None),
        ]
    );
    assert!(doc["problems"][0]["detail"]
        .as_str()
        .unwrap()
        .starts_with("written 70.0 h before the newest session"));
    // --min-hours (or the gate's DREAMKIT_MIN_HOURS) moves the session threshold.
    for args in [&["--min-hours", "100"][..], &[]] {
        let mut cmd = check(&home, args);
        if args.is_empty() {
            cmd = cmd.env("DREAMKIT_MIN_HOURS", "96h");
        }
        let doc = unhealthy_run(cmd);
        assert_eq!(counts(&doc), [("front_matter".into(), 1)], "{args:?}");
    }
    check(&home, &["--min-hours", "soon"])
        .code(2)
        .stdout_json(|doc| {
            assert_eq!(
                doc["error"],
                json!({"kind": "usage", "message": "invalid value 'soon' for '--min-hours <HOURS>': \"soon\" is not a number of hours (examples: 24, 0.5, 24h, 90m)"})
            );
        })
        .stderr_is(crate::support::usage_stderr(
            "dream-run",
            "invalid value 'soon' for '--min-hours <HOURS>': \"soon\" is not a number of \
             hours (examples: 24, 0.5, 24h, 90m)",
        ))
        .run();
}

#[test]
fn secrets_are_named_by_kind_and_never_printed() {
    const KEY: &str = "sk-ant-api03-FAKEfake0123456789FAKEfake0123";
    const AWS: &str = "AKIAFAKEFAKE0123EXAM";
    let home = home_with("secret");
    // A key in an index line the client cuts is masked in cut_at_load too.
    let mut index = String::from("# Memory\n- [Env](env.md) — environment notes\n");
    for i in 3..=205 {
        index.push_str(&format!("- plain entry {i}\n"));
    }
    index.push_str(&format!("- leaked {KEY} here\n"));
    std::fs::write(home.memory_dir().join("MEMORY.md"), &index).unwrap();
    let out = check(&home, &[])
        .code(1)
        .stdout_json(|doc| {
            assert!(
                doc["problems"].as_array().is_some_and(|p| !p.is_empty()),
                "{doc}"
            );
        })
        .stderr_with(|err| assert_eq!(err.lines().count(), 1, "{err}"))
        .run();
    assert_eq!(out.stderr, summary(&out.json()));
    for secret in [KEY, AWS, "FAKEfake0123456789", "FAKEFAKE0123EXAM"] {
        assert!(
            !out.stdout.contains(secret),
            "{secret} printed: {}",
            out.stdout
        );
        assert!(!out.stderr.contains(secret));
    }
    let doc = out.json();
    // The index's plain bullets are index_shape (lines 3 to 206), env.md has no frontmatter.
    assert_eq!(
        counts(&doc),
        [
            ("index_over_limit".into(), 1),
            ("index_shape".into(), 204),
            ("front_matter".into(), 1),
            ("secret".into(), 3)
        ]
    );
    assert_eq!(
        problems(&doc)
            .into_iter()
            .filter(|(k, _, _)| k == "secret")
            .collect::<Vec<_>>(),
        [
            p("secret", "MEMORY.md", Some(206)),
            p("secret", "env.md", Some(1)),
            p("secret", "env.md", Some(2)),
        ]
    );
    let cut = doc["index"]["cut_at_load"].as_array().unwrap();
    assert_eq!(
        cut.last().unwrap(),
        &json!({"line": 206, "text": "[secret: line not shown]"})
    );
    assert!(doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["detail"]
            .as_str()
            .unwrap()
            .starts_with("looks like an Anthropic API key (sk-ant-)")));
}

#[test]
fn secret_lines_past_the_cut_are_never_printed_and_the_cut_is_bounded() {
    // An index of 5,000 lines: a private key whose block opens before the cut and ends after
    // it, an AWS secret key beside its AKIA id, and long lines past the cut.
    const AWS_ID: &str = "AKIAFAKEFAKE0123EXAM";
    const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYFAKEKEY0123";
    const PEM_BODY: [&str; 2] = [
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
        "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
    ];
    let home = home_with("healthy");
    let mut index = String::from("# Memory\n");
    for i in 2..=198 {
        index.push_str(&format!("- plain entry {i}\n"));
    }
    index.push_str("- deploy key below\n"); // 199
    index.push_str("-----BEGIN RSA PRIVATE KEY-----\n"); // 200: loaded
    index.push_str(&format!("{}\n{}\n", PEM_BODY[0], PEM_BODY[1])); // 201, 202: cut
    index.push_str("-----END RSA PRIVATE KEY-----\n"); // 203
    index.push_str(&format!("aws {AWS_ID} {AWS_SECRET}\n")); // 204
    index.push_str("- after the secrets\n"); // 205
    index.push_str(&format!("- long {}\n", "é".repeat(500))); // 206
    for i in 207..=5000 {
        index.push_str(&format!("- entry {i}\n"));
    }
    std::fs::write(home.memory_dir().join("MEMORY.md"), &index).unwrap();
    let out = check(&home, &[])
        .code(1)
        .stdout_json(|doc| {
            assert!(
                doc["problems"].as_array().is_some_and(|p| !p.is_empty()),
                "{doc}"
            );
        })
        .stderr_with(|err| assert_eq!(err.lines().count(), 1, "{err}"))
        .run();
    for secret in [AWS_ID, AWS_SECRET, PEM_BODY[0], PEM_BODY[1], "PRIVATE KEY"] {
        assert!(!out.stdout.contains(secret), "{secret} printed");
        assert!(!out.stderr.contains(secret), "{secret} on stderr");
    }
    let doc = out.json();
    let cut = doc["index"]["cut_at_load"].as_array().unwrap();
    assert_eq!(doc["index"]["cut_at_load_total"], 4800);
    assert_eq!(cut.len(), 1000, "at most 1,000 lines");
    let hidden = json!("[secret: line not shown]");
    let lines: Vec<(u64, &Value)> = cut
        .iter()
        .map(|c| (c["line"].as_u64().unwrap(), &c["text"]))
        .collect();
    assert_eq!(
        lines[..5],
        [
            (201, &hidden),
            (202, &hidden),
            (203, &hidden),
            (204, &hidden),
            (205, &json!("- after the secrets")),
        ]
    );
    let long = cut[5]["text"].as_str().unwrap();
    assert_eq!(long.chars().count(), 200, "at most 200 characters");
    assert!(
        long.starts_with("- long éé") && long.ends_with("é…"),
        "{long}"
    );
    assert_eq!(cut[999], json!({"line": 1200, "text": "- entry 1200"}));
    // The problems name the key once, where it opens, and the AWS line; no detail quotes them.
    assert_eq!(
        problems(&doc)
            .into_iter()
            .filter(|(k, _, _)| k == "secret")
            .collect::<Vec<_>>(),
        [
            p("secret", "MEMORY.md", Some(200)),
            p("secret", "MEMORY.md", Some(204))
        ]
    );
    // A few lines over the limit: every one is listed, as it was.
    let mut short = String::new();
    for i in 1..=203 {
        short.push_str(&format!("- entry {i}\n"));
    }
    std::fs::write(home.memory_dir().join("MEMORY.md"), &short).unwrap();
    let doc = unhealthy(&home, &[]);
    assert_eq!(doc["index"]["cut_at_load_total"], 3);
    assert_eq!(
        doc["index"]["cut_at_load"],
        json!([
            {"line": 201, "text": "- entry 201"},
            {"line": 202, "text": "- entry 202"},
            {"line": 203, "text": "- entry 203"},
        ])
    );
}

#[test]
fn files_the_client_will_not_load() {
    let home = home_with("not_markdown");
    let doc = unhealthy(&home, &[]);
    // notes.md has no frontmatter.
    assert_eq!(
        counts(&doc),
        [("front_matter".into(), 1), ("not_markdown".into(), 1)]
    );
    assert_eq!(
        problems(&doc),
        [
            p("front_matter", "notes.md", None),
            p("not_markdown", "todo.txt", None)
        ]
    );

    // Not UTF-8, a FIFO (never opened: the check does not wait on it), a symlink to a device.
    let home = home_with("unreadable");
    let mem = home.memory_dir();
    let fifo = std::ffi::CString::new(mem.join("pipe.md").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::os::unix::fs::symlink("/dev/zero", mem.join("zero.md")).unwrap();
    let doc = unhealthy(&home, &[]);
    // good.md has no frontmatter.
    assert_eq!(
        counts(&doc),
        [("front_matter".into(), 1), ("unreadable".into(), 3)]
    );
    assert_eq!(
        problems(&doc),
        [
            p("unreadable", "bad.md", None),
            p("front_matter", "good.md", None),
            p("unreadable", "pipe.md", None),
            p("unreadable", "zero.md", None),
        ]
    );
    let details: Vec<&str> = details(&doc)
        .into_iter()
        .filter(|d| !d.starts_with("no frontmatter"))
        .collect();
    assert_eq!(
        details,
        [
            "not UTF-8 text (invalid byte at offset 3)",
            "a FIFO, not a regular file",
            "a symbolic link: dreamkit neither follows nor maintains it",
        ]
    );
}

#[test]
fn the_check_reads_only() {
    let home = home_with("dangling_link");
    let before = tree(&home.root);
    unhealthy(&home, &[]);
    check(&home, &["--hook"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["hookSpecificOutput"]["hookEventName"], "SessionStart"))
        .stderr_empty()
        .run();
    assert_eq!(
        tree(&home.root),
        before,
        "nothing written, not even the state dir"
    );
    assert!(!home.state_dir().exists());
}

#[test]
fn no_memory_dir_yet_is_healthy_with_a_note() {
    // Normal before the first consolidation: nothing to check, nothing wrong, nothing made.
    let home = ClaudeHome::new();
    let before = tree(&home.root);
    let doc = healthy(&home, &[]);
    assert_eq!(doc["files"], 0);
    assert_eq!(doc["notes"], json!(["no_memory_dir"]));
    assert_eq!(doc["problems"], json!([]));
    assert_eq!(counts(&doc), []);
    assert_eq!(doc["index"]["exists"], false);
    assert_eq!(doc["index"]["cut_at_load_total"], 0);
    assert_eq!(
        doc["memory_dir"],
        json!(home.memory_dir().display().to_string())
    );
    assert_eq!(tree(&home.root), before);
    assert!(!home.memory_dir().exists());
    // A memory dir that exists has no note.
    assert_eq!(healthy(&home_with("healthy"), &[])["notes"], json!([]));
}

#[test]
fn a_memory_dir_that_cannot_be_read_is_exit_3() {
    let home = ClaudeHome::new();
    // One named by --memory-dir that is not there: a typo, not a project before its first
    // consolidation.
    let missing = home.root.join("no-such-memory");
    let ran = check(&home, &["--memory-dir", missing.to_str().unwrap()])
        .code(3)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "environment");
            assert_eq!(doc["error"]["reason"], "not_found");
        })
        .stderr_is(format!(
            "dream-run: cannot read the memory dir {}: No such file or directory (os error 2)\n",
            missing.display()
        ))
        .run();
    says_error(&ran);
    // A file where the dir should be.
    std::fs::create_dir_all(home.transcripts_dir()).unwrap();
    std::fs::write(home.memory_dir(), "not a dir").unwrap();
    check(&home, &[])
        .code(3)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "environment");
            assert_eq!(doc["error"]["reason"], "not_a_file");
        })
        .stderr_is(format!(
            "dream-run: cannot read the memory dir {}: Not a directory (os error 20)\n",
            home.memory_dir().display()
        ))
        .run();
    // One that may not be listed: reason permission, as dream-run-check(1) says.
    let home = home_with("healthy");
    crate::support::chmod(&home.memory_dir(), 0o000);
    let run = Run::unprivileged(&home, "dream-run")
        .arg("check")
        .code(3)
        .stdout_json(|doc| {
            assert_eq!(doc["error"]["kind"], "environment");
            assert_eq!(doc["error"]["reason"], "permission");
        })
        .stderr_is(format!(
            "dream-run: cannot read the memory dir {}: Permission denied (os error 13)\n",
            home.memory_dir().display()
        ));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.run()));
    crate::support::chmod(&home.memory_dir(), 0o755);
    result.unwrap_or_else(|p| std::panic::resume_unwind(p));
}

#[test]
fn as_a_session_start_hook() {
    let home = home_with("dangling_link");
    check(&home, &["--hook"])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["hookSpecificOutput"]["hookEventName"], "SessionStart");
            let context = doc["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .unwrap();
            assert!(
                context.starts_with("dreamkit's memory check found 3 problems in this project's memory (2 dangling_link, 1 front_matter):\ndangling_link MEMORY.md:3: links to gone.md"),
                "{context}"
            );
        })
        .stderr_empty()
        .run();
    // Healthy: nothing at all.
    let healthy = home_with("healthy");
    check(&healthy, &["--hook"])
        .success()
        .stdout_empty()
        .stderr_empty()
        .run();
    // No memory dir yet: nothing wrong, so nothing at all.
    let none = ClaudeHome::new();
    check(&none, &["--hook"])
        .success()
        .stdout_empty()
        .stderr_empty()
        .run();
    // One that cannot be read: still exit 0, the reason on stderr, nothing on stdout.
    std::fs::create_dir_all(none.transcripts_dir()).unwrap();
    std::fs::write(none.memory_dir(), "not a dir").unwrap();
    check(&none, &["--hook"])
        .success()
        .stdout_empty()
        .stderr_is(format!(
            "dream-run: cannot read the memory dir {}: Not a directory (os error 20)\n",
            none.memory_dir().display()
        ))
        .run();
}

#[test]
fn a_run_works_on_the_problems_found_before_and_reports_both_counts() {
    let d = Dream::new();
    // The Dream world's memory, with a link to nowhere.
    std::fs::write(
        d.mem().join("MEMORY.md"),
        "# Memory\n- [Build](topics/build.md): how to build\n- [Stale](stale.md): old notes\n- [Gone](gone.md): removed\n",
    )
    .unwrap();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api.push(Reply::anthropic_tools(
        "Fixing the index.",
        &[
            ("read_file", json!({"path": "MEMORY.md"})),
            (
                "edit_file",
                json!({"path": "MEMORY.md", "old_string": "- [Gone](gone.md): removed\n", "new_string": ""}),
            ),
        ],
    ));
    d.api
        .push(Reply::anthropic_text("Dropped the dangling entry."));
    let doc = dream_run(&d, &envelope, &[])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run()
        .json();
    let run = &doc["run"];
    assert_eq!(run["health"]["before"]["counts"]["dangling_link"], 1);
    assert_eq!(run["health"]["after"]["counts"]["dangling_link"], 0);
    assert_eq!(run["health"]["worse"], json!([]));
    assert_eq!(run["warnings"], json!([]));
    // The first request names the problem as work to do.
    let first = &d.api.requests()[0];
    let prompt = first.body["messages"][0]["content"].to_string();
    assert!(
        prompt.contains("Problems a check of the memory folder found before this run")
            && prompt
                .contains("- dangling_link MEMORY.md:4: links to gone.md, which does not exist"),
        "{prompt}"
    );
    let record = d.task_record(run["task_id"].as_str().unwrap());
    assert_eq!(record["health"], run["health"]);
}

#[test]
fn a_proposal_is_checked_in_its_copy() {
    let d = Dream::new();
    std::fs::write(d.mem().join("orphan.md"), "Nothing links here.\n").unwrap();
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    d.api.push(Reply::anthropic_tools(
        "Linking it.",
        &[
            ("read_file", json!({"path": "MEMORY.md"})),
            (
                "edit_file",
                json!({"path": "MEMORY.md", "old_string": "old notes\n", "new_string": "old notes\n- [Orphan](orphan.md): found again\n"}),
            ),
        ],
    ));
    d.api.push(Reply::anthropic_text("Linked the orphan."));
    let doc = dream_run(&d, &envelope, &["--propose"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "proposed", "{doc}"))
        .stderr_empty()
        .run()
        .json();
    let run = &doc["run"];
    assert_eq!(run["status"], "proposed");
    assert_eq!(run["health"]["before"]["counts"]["orphan_file"], 1);
    assert_eq!(run["health"]["after"]["counts"]["orphan_file"], 0);
    // The memory dir itself is unchanged: the orphan is still one there.
    let now = unhealthy(&d.home, &[]);
    assert_eq!(now["counts"]["orphan_file"], 1);
}

/// A temporary file a killed dreamkit process left is reported (`stray_temp`), a live
/// writer's is not, and the next command that changes state removes it.
#[test]
fn a_stray_temporary_file_is_reported_and_swept() {
    let home = ClaudeHome::new();
    let mem = home.memory_dir();
    std::fs::create_dir_all(mem.join("topics")).unwrap();
    std::fs::write(mem.join("MEMORY.md"), "# Memory\n").unwrap();
    let stray = mem.join("topics/.dreamkit-4194303-AbC123.tmp");
    std::fs::write(&stray, "half a file").unwrap();
    let live = mem.join(format!(".dreamkit-{}-XyZ789.tmp", std::process::id()));
    std::fs::write(&live, "being written").unwrap();
    Run::new(&home, "dream-run")
        .arg("check")
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(
                doc["problems"],
                json!([{
                    "kind": "stray_temp",
                    "file": "topics/.dreamkit-4194303-AbC123.tmp",
                    "detail": "a temporary file a killed dreamkit process (PID 4194303) left: the next command that changes state (or `dream-run recover`) removes it",
                }]),
                "{doc}"
            );
        })
        .stderr_is(format!("dream-run: 1 problem in {}: 1 stray_temp\n", mem.display()))
        .run();
    Run::new(&home, "dream-run")
        .arg("recover")
        .success()
        .stdout_json(|doc| {
            assert_eq!(
                doc,
                &json!({"recovered": null, "swept": {"removed": [stray.to_string_lossy()]}})
            );
        })
        .stderr_empty()
        .run();
    assert!(!stray.exists());
    assert!(live.exists(), "a live writer's file is left alone");
}

/// The rules engine's overflow index (`index-more.md`, linked from MEMORY.md) is an index:
/// what it links is indexed, and it is no topic file (no frontmatter asked of it).
#[test]
fn the_overflow_index_is_an_index() {
    let home = home_with("overflow_index");
    let doc = unhealthy(&home, &[]);
    assert_eq!(
        problems(&doc),
        vec![p("orphan_file", "lost.md", None)],
        "{doc}"
    );
    std::fs::remove_file(home.memory_dir().join("lost.md")).unwrap();
    healthy(&home, &[]);
}
