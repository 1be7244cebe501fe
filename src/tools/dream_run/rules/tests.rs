//! The planner on small memory dirs, rule by rule, and on the crafted cases
//! (`tests/fixtures/memory-cases/<case>/memory`, the texts after in `.../planned/`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::*;
use crate::tools::dream_run::check::{run_check, Kind, Scope};

/// The run's time in every test: a Friday.
pub(super) const NOW: &str = "2026-11-20T10:00:00.000Z";

pub(super) fn now() -> SystemTime {
    crate::cli::time::parse_rfc3339(NOW).unwrap()
}

pub(super) fn anchored(_: &str, _: &str) -> Option<Anchor> {
    Some(Anchor {
        session: "s1".into(),
        timestamp: NOW.into(),
    })
}

pub(super) fn scope() -> Scope<'static> {
    Scope {
        project_root: None,
        project_cwd: None,
        transcripts_dir: None,
        min_hours: 24.0,
    }
}

/// A memory dir holding `files`.
pub(super) fn memory(files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for (path, text) in files {
        write(tmp.path(), path, text);
    }
    tmp
}

fn write(dir: &Path, path: &str, text: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Every `.md` file under `dir` (no dot folders), as the engine reads them.
pub(super) fn read(dir: &Path) -> BTreeMap<String, MemoryText> {
    let mut out = BTreeMap::new();
    for entry in walkdir::WalkDir::new(dir).min_depth(1) {
        let entry = entry.unwrap();
        let relative = entry
            .path()
            .strip_prefix(dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if entry.file_type().is_file() && relative.ends_with(".md") {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            let modified = entry.metadata().unwrap().modified().unwrap();
            out.insert(relative, MemoryText { text, modified });
        }
    }
    out
}

pub(super) fn texts(files: &BTreeMap<String, MemoryText>) -> BTreeMap<String, String> {
    files
        .iter()
        .map(|(k, v)| (k.clone(), v.text.clone()))
        .collect()
}

/// The plan for the memory dir `dir`.
pub(super) fn plan_dir(
    dir: &Path,
    files: &BTreeMap<String, MemoryText>,
    anchor: &dyn Fn(&str, &str) -> Option<Anchor>,
) -> Plan {
    let health = run_check(dir, &scope()).unwrap();
    plan(&Input {
        files,
        health: &health,
        anchor,
        now: now(),
    })
}

/// Applies `plan`'s writes in `dir`.
pub(super) fn apply(dir: &Path, plan: &Plan) {
    for (path, text) in &plan.writes {
        match text {
            Some(text) => write(dir, path, text),
            None => std::fs::remove_file(dir.join(path)).unwrap(),
        }
    }
}

/// Plans over `files`, applies: the texts after and the plan.
fn run(files: &[(&str, &str)]) -> (BTreeMap<String, String>, Plan) {
    let tmp = memory(files);
    let before = read(tmp.path());
    let plan = plan_dir(tmp.path(), &before, &anchored);
    apply(tmp.path(), &plan);
    let after = texts(&read(tmp.path()));
    assert_eq!(
        lost_words(&texts(&before), &after, &plan.may_lose),
        Vec::<String>::new()
    );
    (after, plan)
}

fn changes(plan: &Plan) -> Vec<String> {
    plan.changes.iter().map(Change::one_line).collect()
}

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/memory-cases")
        .join(case)
}

/// The crafted case `case` copied, planned (every line anchored at [`NOW`]) and applied: the
/// texts after must be those of its `planned/` folder, and `check` must find none of
/// `fixed` after, but for `left` (`(kind, file, line)`).
fn crafted(case: &str, fixed: &[Kind], left: &[(Kind, &str, usize)]) -> Plan {
    let tmp = tempfile::tempdir().unwrap();
    let source = case_dir(case).join("memory");
    for (path, file) in read(&source) {
        write(tmp.path(), &path, &file.text);
    }
    let before = read(tmp.path());
    let plan = plan_dir(tmp.path(), &before, &anchored);
    apply(tmp.path(), &plan);
    let after = texts(&read(tmp.path()));
    let planned = case_dir(case).join("planned");
    if std::env::var_os("DREAMKIT_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&planned);
        for (path, text) in &after {
            write(&planned, path, text);
        }
    }
    assert_eq!(after, texts(&read(&planned)), "{case}: the texts after");
    assert_eq!(
        lost_words(&texts(&before), &after, &plan.may_lose),
        Vec::<String>::new()
    );
    let health = run_check(tmp.path(), &scope()).unwrap();
    let remaining: Vec<(Kind, &str, usize)> = health
        .problems
        .iter()
        .filter(|p| fixed.contains(&p.kind))
        .map(|p| (p.kind, p.file.as_str(), p.line.unwrap_or(0)))
        .collect();
    assert_eq!(remaining, left, "{case}: {:#?}", health.problems);
    // Planned again over its own output: nothing to do.
    let again = plan_dir(tmp.path(), &read(tmp.path()), &anchored);
    assert_eq!(again.writes, Vec::new(), "{case}: a second plan");
    plan
}

#[test]
fn crafted_duplicate_entry() {
    let plan = crafted(
        "duplicate_entry",
        &[Kind::DuplicateEntry],
        // The same file twice with different hooks, and a line in two topic files: the
        // model's.
        &[
            (Kind::DuplicateEntry, "MEMORY.md", 3),
            (Kind::DuplicateEntry, "other.md", 2),
        ],
    );
    assert_eq!(
        changes(&plan),
        ["edit MEMORY.md:5 (duplicate_entry): the same entry as line 4: removed"]
    );
}

#[test]
fn crafted_orphan_file() {
    let plan = crafted("orphan_file", &[Kind::OrphanFile], &[]);
    assert_eq!(
        changes(&plan),
        ["edit MEMORY.md (orphan_file): indexed c.md, which no index linked"]
    );
}

#[test]
fn crafted_dangling_link() {
    let plan = crafted("dangling_link", &[Kind::DanglingLink], &[]);
    assert_eq!(changes(&plan), [
        "edit MEMORY.md:3 (dangling_link): links to gone.md, which does not exist: the link dropped, its text kept and marked (file missing)",
        "edit a.md:1 (dangling_link): links to missing-too.md, which does not exist: the link dropped, its text kept and marked (file missing)",
    ]);
}

#[test]
fn crafted_long_entry() {
    let plan = crafted("long_entry", &[Kind::LongEntry], &[]);
    assert_eq!(changes(&plan), [
        "edit MEMORY.md:2 (long_entry): shortened to at most 150 characters: the rest moved to style.md",
        "edit style.md (long_entry): appended the rest of MEMORY.md line 2, marked as moved from the index",
    ]);
}

#[test]
fn crafted_index_over_limit_lines() {
    let plan = crafted("index_over_limit_lines", &[Kind::IndexOverLimit], &[]);
    assert_eq!(changes(&plan).len(), 2, "{:#?}", changes(&plan));
}

#[test]
fn crafted_index_over_limit_chars() {
    let plan = crafted("index_over_limit_chars", &[Kind::IndexOverLimit], &[]);
    assert_eq!(changes(&plan).len(), 2, "{:#?}", changes(&plan));
}

#[test]
fn crafted_relative_date() {
    let plan = crafted("relative_date", &[Kind::RelativeDate], &[]);
    assert_eq!(changes(&plan), [
        "edit log.md:7 (relative_date): \"yesterday\" -> \"2026-11-19\" [written 2026-11-20T10:00:00.000Z in session s1]",
        "edit log.md:8 (relative_date): \"last week\" -> \"the week of 2026-11-09\" [written 2026-11-20T10:00:00.000Z in session s1]",
    ]);
}

#[test]
fn crafted_secret() {
    let plan = crafted("secret", &[Kind::Secret], &[]);
    assert_eq!(changes(&plan), [
        "edit env.md:1 (secret): an Anthropic API key (sk-ant-): replaced by [redacted: anthropic_api_key]; rotate the credential",
        "edit env.md:2 (secret): an AWS access key id (AKIA): replaced by [redacted: aws_access_key_id]; rotate the credential",
    ]);
}

#[test]
fn identical_files_keep_the_indexed_one_and_never_delete_team() {
    let note = "---\nname: n\ndescription: d\n---\nSame.\n";
    let (after, plan) = run(&[
        ("MEMORY.md", "- [B](b.md) — b\n- [T](team/x.md) — t\n"),
        ("a.md", note),
        ("b.md", note),
        ("c.md", "See [a](a.md#top) and [b](./b.md).\n"),
        ("team/x.md", "Shared.\n"),
        ("y.md", "Shared.\n"),
        ("team/p.md", "Both team.\n"),
        ("team/q.md", "Both team.\n"),
        (
            "team/MEMORY.md",
            "- [p](p.md)\n- [q](q.md)\n- [y](../y.md)\n",
        ),
    ]);
    assert!(!after.contains_key("a.md") && !after.contains_key("y.md"));
    assert!(after.contains_key("team/p.md") && after.contains_key("team/q.md"));
    assert_eq!(after["c.md"], "See [a](b.md#top) and [b](./b.md).\n");
    assert_eq!(
        after["team/MEMORY.md"],
        "- [p](p.md)\n- [q](q.md)\n- [y](x.md)\n"
    );
    assert_eq!(changes(&plan), [
        "delete a.md (duplicate_entry): the same text as b.md: deleted, its links now point at b.md",
        "edit c.md:1 (duplicate_entry): linked a.md, a copy of b.md that is deleted: now links b.md",
        "delete y.md (duplicate_entry): the same text as team/x.md: deleted, its links now point at team/x.md",
        "edit team/MEMORY.md:3 (duplicate_entry): linked y.md, a copy of team/x.md that is deleted: now links team/x.md",
        "edit MEMORY.md (orphan_file): indexed c.md, which no index linked",
    ]);
    // Deletions come last, after the links that pointed at them moved.
    let order: Vec<&str> = plan.writes.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        order,
        ["c.md", "team/MEMORY.md", "MEMORY.md", "a.md", "y.md"]
    );
}

#[test]
fn index_lines_equal_but_for_case_and_punctuation() {
    let (after, plan) = run(&[
        (
            "MEMORY.md",
            "# Memory\n- [A](a.md) — hook\n\n- [a](a.md): Hook!\n# memory\n```\n# Memory\n```\n",
        ),
        ("a.md", "A.\n"),
    ]);
    assert_eq!(
        after["MEMORY.md"],
        "# Memory\n- [A](a.md) — hook\n\n```\n# Memory\n```\n"
    );
    assert_eq!(
        changes(&plan),
        [
            "edit MEMORY.md:4 (duplicate_entry): the same entry as line 2: removed",
            "edit MEMORY.md:5 (duplicate_entry): the same entry as line 1: removed",
        ]
    );
}

#[test]
fn secrets_are_redacted_and_key_blocks_go_whole() {
    let (after, plan) = run(&[
        ("MEMORY.md", "- [E](env.md) — env\n"),
        (
            "env.md",
            "token ghp_0123456789abcdefABCDEF0123456789abcd here\r\nkey: -----BEGIN RSA PRIVATE KEY-----\r\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\r\n-----END RSA PRIVATE KEY----- (old)\r\nafter\r\n-----BEGIN EC PRIVATE KEY-----\r\nAAAA\r\nnot base64 text\r\n",
        ),
    ]);
    assert_eq!(
        after["env.md"],
        "token [redacted: github_token] here\r\nkey: [redacted: private_key] (old)\r\nafter\r\n[redacted: private_key]\r\nnot base64 text\r\n"
    );
    assert_eq!(changes(&plan), [
        "edit env.md:1 (secret): a GitHub token (ghp_): replaced by [redacted: github_token]; rotate the credential",
        "edit env.md:2 (secret): a PEM private key (3 lines): replaced by one line [redacted: private_key]; rotate the key",
        "edit env.md:6 (secret): a PEM private key (2 lines): replaced by one line [redacted: private_key]; rotate the key",
    ]);
    assert!(plan.changes.iter().all(|c| !c.detail.contains("ghp_0")));
}

#[test]
fn dates_need_an_anchor_and_skip_code_and_quotes() {
    let tmp = memory(&[
        ("MEMORY.md", "- [L](log.md) — log\n"),
        (
            "log.md",
            "Deployed Yesterday and 2 days ago.\nsaid \"ship it tomorrow\" in `today`\nunanchored: moved last week\n",
        ),
    ]);
    let before = read(tmp.path());
    let anchor = |file: &str, line: &str| {
        (file == "log.md" && !line.starts_with("unanchored")).then(|| Anchor {
            session: "s2".into(),
            timestamp: "2026-03-02T23:30:00-02:00".into(),
        })
    };
    let plan = plan_dir(tmp.path(), &before, &anchor);
    apply(tmp.path(), &plan);
    let after = read(tmp.path());
    assert_eq!(
        after["log.md"].text,
        "Deployed 2026-03-02 and 2026-03-01.\nsaid \"ship it tomorrow\" in `today`\nunanchored: moved last week\n"
    );
    assert_eq!(plan.changes.len(), 2);
    assert_eq!(plan.changes[0].anchor.as_ref().unwrap().session, "s2");
    assert_eq!(plan.changes[0].detail, "\"Yesterday\" -> \"2026-03-02\"");
    assert!(plan.may_lose.contains(&"2 days ago".to_string()));
}

#[test]
fn dangling_links_point_at_the_one_file_of_that_name() {
    let (after, plan) = run(&[
        (
            "MEMORY.md",
            "- [N](notes.md#x) — moved\n- [T](twice.md) — two of them\n- [S](sub/s.md)\n- [U](sub/u.md)\n",
        ),
        ("sub/notes.md", "Notes, see [s](../s.md).\n"),
        ("sub/s.md", "S.\n"),
        ("sub/u.md", "U, see [n](notes.md) and [gone](../nowhere.md).\n"),
        ("a/twice.md", "A.\n"),
        ("b/twice.md", "B.\n"),
    ]);
    assert_eq!(
        after["MEMORY.md"],
        "- [N](sub/notes.md#x) — moved\n- T (file missing) — two of them\n- [S](sub/s.md)\n- [U](sub/u.md)\n- [twice](a/twice.md) — A.\n- [twice](b/twice.md) — B.\n"
    );
    assert_eq!(after["sub/notes.md"], "Notes, see [s](s.md).\n");
    assert_eq!(
        after["sub/u.md"],
        "U, see [n](notes.md) and gone (file missing).\n"
    );
    assert!(plan.may_lose.contains(&"twice.md".to_string()));
}

#[test]
fn long_entries_without_a_topic_stay() {
    let long = format!("- [G](gone.md) — {}", "word ".repeat(50).trim_end());
    let index = format!(
        "{long}\n- [T](team/t.md) — {}\n",
        "more ".repeat(50).trim_end()
    );
    let (after, _) = run(&[("MEMORY.md", &index), ("team/t.md", "T.\n")]);
    let lines: Vec<&str> = after["MEMORY.md"].lines().collect();
    assert!(
        lines[0].starts_with("- G (file missing) — word"),
        "{}",
        lines[0]
    );
    assert!(lines[1].starts_with("- [T](team/t.md) — more") && lines[1].ends_with("more…"));
    assert!(after["team/t.md"].starts_with("T.\n\n(Moved from the index on 2026-11-20:) more"));
}

#[test]
fn orphans_are_indexed_in_the_clients_shape() {
    let (after, plan) = run(&[
        ("a.md", "---\nname: deploy-steps\ndescription: How we deploy, step by step\nmetadata:\n  type: project\n---\nBody.\n"),
        ("team/b.md", "# Team rules\n\nAsk first. Then act.\n"),
        ("x y.md", "Just text without a stop"),
    ]);
    assert_eq!(
        after["MEMORY.md"],
        "- [deploy-steps](a.md) — How we deploy, step by step\n- [Team rules](team/b.md) — Ask first.\n- [x y](x%20y.md) — Just text without a stop\n"
    );
    assert_eq!(plan.changes[0].action, Action::Create);
    assert_eq!(plan.writes[0].0, "MEMORY.md");
}

#[test]
fn the_oldest_entries_move_to_the_overflow_index() {
    let mut files: Vec<(String, String)> = Vec::new();
    let mut index = String::from("# Memory\n");
    for i in 0..210 {
        // Topic i was modified on day i of 2026 (the stamp), so the first ones are oldest,
        // but topic 5 is the newest of all.
        let day = if i == 5 { 300 } else { i + 1 };
        let date = time::Date::from_ordinal_date(2026, day as u16).unwrap();
        files.push((
            format!("t{i:03}.md"),
            format!("---\nname: t{i}\nmetadata:\n  modified: {date}T00:00:00Z\n---\nTopic {i}.\n"),
        ));
        index.push_str(&format!("- [Topic {i}](t{i:03}.md) — topic {i}\n"));
    }
    files.push(("MEMORY.md".into(), index));
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let (after, plan) = run(&borrowed);
    let kept: Vec<&str> = after["MEMORY.md"].lines().collect();
    assert_eq!(kept.len(), KEEP_LINES_FOR_TEST);
    assert_eq!(kept[0], "# Memory");
    // 212 lines (the new one included) down to 180: the oldest 32 went, 0-4 and 6-32.
    assert_eq!(kept[1], "- [Topic 5](t005.md) — topic 5");
    assert_eq!(kept[2], "- [Topic 33](t033.md) — topic 33");
    assert_eq!(
        *kept.last().unwrap(),
        "- [Older memories](index-more.md) — 32 more entries: Topic 0, Topic 1, Topic 2, Topic 3, Topic 4, Topic 6, Topic 7, Topic 8, Topic 9, Topic 10, …"
    );
    let more = &after["index-more.md"];
    assert!(more.starts_with("# Older memories\n\nIndex entries moved out of MEMORY.md, so that Claude Code loads the whole index.\n\n- [Topic 0](t000.md) — topic 0\n"));
    assert_eq!(plan.changes.len(), 2);
    assert_eq!(plan.writes[0].0, "index-more.md");
}

const KEEP_LINES_FOR_TEST: usize = super::overflow::KEEP_LINES;

#[test]
fn the_overflow_index_is_reused_by_later_runs() {
    let mut index = String::from("- [Older memories](index-more.md) — 1 more entry\n");
    for i in 0..230 {
        index.push_str(&format!("- note {i}\n"));
    }
    let (after, _) = run(&[
        ("MEMORY.md", &index),
        (
            "index-more.md",
            "# Older memories\n\n- [Old](old.md) — old\n",
        ),
        ("old.md", "Old.\n"),
    ]);
    let kept: Vec<&str> = after["MEMORY.md"].lines().collect();
    assert_eq!(
        kept[0],
        "- [Older memories](index-more.md) — 52 more entries: Old"
    );
    assert_eq!(kept.len(), 180);
    assert!(
        after["index-more.md"].starts_with("# Older memories\n\n- [Old](old.md) — old\n- note 0\n")
    );
}

#[test]
fn writes_stay_inside_the_memory_dir_and_never_delete_team() {
    for path in ["MEMORY.md", "team/a.md", "a b/c.md"] {
        assert!(is_writable(path), "{path}");
    }
    for path in [
        "",
        "/etc/x.md",
        "../x.md",
        "a/../../x.md",
        ".git/x.md",
        "a.txt",
        "a//b.md",
        "a\\b.md",
    ] {
        assert!(!is_writable(path), "{path}");
    }
    // Planned writes only name memory files, whatever the input names.
    let mut files = BTreeMap::new();
    for (path, text) in [
        ("../out.md", "- [x](../out.md)\n"),
        ("note.txt", "hello"),
        ("team/a.md", "Same.\n"),
        ("team/b.md", "Same.\n"),
        ("MEMORY.md", "- [a](team/a.md)\n"),
    ] {
        files.insert(
            path.to_string(),
            MemoryText {
                text: text.to_string(),
                modified: now(),
            },
        );
    }
    let tmp = memory(&[]);
    let health = run_check(tmp.path(), &scope()).unwrap();
    let plan = plan(&Input {
        files: &files,
        health: &health,
        anchor: &anchored,
        now: now(),
    });
    for (path, text) in &plan.writes {
        assert!(is_writable(path), "{path}");
        assert!(text.is_some() || !path.starts_with("team/"), "{path}");
    }
}

/// A deleted duplicate's links resolve from its own folder: a file only it reached is an
/// orphan after the deletion, and gets its index line though `check` found no orphan before.
#[test]
fn a_file_only_a_deleted_duplicate_reached_is_indexed() {
    let twin = "# Twin\nSee [the note](note.md).\n";
    let (after, plan) = run(&[
        (
            "MEMORY.md",
            "# Memory\n- [A](a/twin.md) — twin a\n- [B](b/twin.md) — twin b\n",
        ),
        ("a/twin.md", twin),
        ("b/twin.md", twin),
        ("a/note.md", "# Note A\nOnly a/twin.md links here.\n"),
        ("b/note.md", "# Note B\nOnly b/twin.md links here.\n"),
    ]);
    let gone: Vec<&str> = ["a/twin.md", "b/twin.md"]
        .into_iter()
        .filter(|f| !after.contains_key(*f))
        .collect();
    assert_eq!(gone.len(), 1, "one twin deleted: {after:?}");
    let orphan = if gone[0] == "a/twin.md" {
        "a/note.md"
    } else {
        "b/note.md"
    };
    assert!(
        after["MEMORY.md"].contains(&format!("]({orphan})")),
        "{orphan} is indexed: {}",
        after["MEMORY.md"]
    );
    assert!(
        changes(&plan).iter().any(|c| c.contains("orphan_file")),
        "{:?}",
        changes(&plan)
    );
}

/// A relative date `check` does not see (it follows an unterminated key block) shows once the
/// key is redacted: the same plan makes it absolute, so a second plan has nothing to do.
#[test]
fn a_date_a_redaction_uncovers_is_fixed_in_the_same_plan() {
    let (after, _) = run(&[(
        "build.md",
        "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY\nFixed the lock race yesterday.\n",
    )]);
    let build = &after["build.md"];
    assert!(build.starts_with("[redacted: private_key]\n"), "{build}");
    assert!(!build.contains("yesterday"), "{build}");
}
