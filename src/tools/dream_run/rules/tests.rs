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

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
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
        "edit log.md:7 (relative_date): \"yesterday\" -> \"2026-11-19\" (written 2026-11-20T10:00:00.000Z) [written 2026-11-20T10:00:00.000Z in session s1]",
        "edit log.md:8 (relative_date): \"last week\" -> \"the week of 2026-11-09\" (written 2026-11-20T10:00:00.000Z) [written 2026-11-20T10:00:00.000Z in session s1]",
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
