//! `dream-run check`: the memory's health without a model. Reads only: no lock, no state, no
//! recovery. Every run also checks before and after itself (`run.health`), and the problems
//! found before are the prompt's concrete work for the prune-and-index phase.

pub(crate) mod front_matter;
pub(crate) mod index;
pub(crate) mod markdown;
pub(crate) mod patterns;
#[cfg(test)]
mod props;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use self::markdown::Line;
use self::patterns::PathShape;
use super::CheckArgs;
use crate::claude::paths::git_root;
use crate::claude::{sessions, Env, Project};
use crate::cli::output::path_lossy;
use crate::cli::time::rfc3339;
use crate::cli::{Context, Exit, Failure, Report};
use crate::files::file_kind;
use crate::store;

pub use self::index::{MAX_CHARS as INDEX_MAX_CHARS, MAX_LINES as INDEX_MAX_LINES};

/// The index Claude Code loads at every session start.
pub const INDEX_FILE: &str = "MEMORY.md";
/// The overflow index the rules engine moves the oldest entries into when the index is past
/// what Claude Code loads (at the top of the memory dir, linked from the index): an index
/// too, so what it links is indexed.
pub const OVERFLOW_INDEX_FILE: &str = "index-more.md";
/// One index line per entry, about this long at most: what the prompt asks for, as the
/// client's own dream prompt does.
pub const INDEX_LINE_CHARS: usize = 150;
/// An index line longer than this, in UTF-16 units as the client counts, is `long_entry`
/// (the client's dream prompt: "if an index line is over ~200 chars, ... shorten the line").
pub const LONG_ENTRY_UNITS: usize = 200;
/// A topic file larger than this is `large_file`: one memory per file, a few lines long.
pub const LARGE_FILE_BYTES: usize = 4_096;
/// A `description` longer than this (characters) is `front_matter`: recall reads them all.
pub const DESCRIPTION_CHARS: usize = 300;
pub(crate) use self::patterns::{redact_lines, SecretLines, SECRET_LINE};

/// Text that may quote memory (a model's words, a tool call, a diff), as it is shown to a
/// person: no line holding a secret, no control or bidi character.
pub(crate) fn for_a_person(text: &str) -> String {
    crate::cli::text::sanitize(&redact_lines(text)).into_owned()
}

/// A memory file larger than this is not read (and reported unreadable): memory is loaded
/// into a model's context, so nothing that size is memory.
const MAX_FILE_BYTES: u64 = 16 << 20;
/// Topic lines shorter than this (folded) are not compared: headings such as "## Why" recur.
const MIN_DUPLICATE_CHARS: usize = 24;
/// Most project entries looked at to find bare file names (`Makefile`, `lib.rs`) anywhere.
const MAX_PROJECT_ENTRIES: usize = 200_000;
/// What the rules engine writes after an index entry's text when its file is gone.
pub const FILE_MISSING: &str = "(file missing)";
/// The prompt lists at most this many problems.
pub const PROMPT_PROBLEMS: usize = 50;
/// `cut_at_load` lists at most this many lines (`cut_at_load_total` counts them all): an
/// index of megabytes would otherwise be printed back whole.
pub const CUT_LINES: usize = 1_000;
/// Each `cut_at_load` line is cut to this many characters (`…` included).
pub const CUT_LINE_CHARS: usize = 200;

/// What is wrong, in the order reports list the kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    IndexOverLimit,
    IndexShape,
    DanglingLink,
    OrphanFile,
    DuplicateEntry,
    LongEntry,
    FrontMatter,
    LargeFile,
    ContinuationFile,
    RelativeDate,
    MissingPath,
    StaleIndex,
    Secret,
    NotMarkdown,
    Unreadable,
    StrayTemp,
}

impl Kind {
    pub const ALL: [Kind; 16] = [
        Kind::IndexOverLimit,
        Kind::IndexShape,
        Kind::DanglingLink,
        Kind::OrphanFile,
        Kind::DuplicateEntry,
        Kind::LongEntry,
        Kind::FrontMatter,
        Kind::LargeFile,
        Kind::ContinuationFile,
        Kind::RelativeDate,
        Kind::MissingPath,
        Kind::StaleIndex,
        Kind::Secret,
        Kind::NotMarkdown,
        Kind::Unreadable,
        Kind::StrayTemp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::IndexOverLimit => "index_over_limit",
            Kind::IndexShape => "index_shape",
            Kind::DanglingLink => "dangling_link",
            Kind::OrphanFile => "orphan_file",
            Kind::DuplicateEntry => "duplicate_entry",
            Kind::LongEntry => "long_entry",
            Kind::FrontMatter => "front_matter",
            Kind::LargeFile => "large_file",
            Kind::ContinuationFile => "continuation_file",
            Kind::RelativeDate => "relative_date",
            Kind::MissingPath => "missing_path",
            Kind::StaleIndex => "stale_index",
            Kind::Secret => "secret",
            Kind::NotMarkdown => "not_markdown",
            Kind::Unreadable => "unreadable",
            Kind::StrayTemp => "stray_temp",
        }
    }
}

/// One problem: where (a path relative to the memory dir, a 1-based line) and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Problem {
    pub kind: Kind,
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    pub detail: String,
}

impl Problem {
    fn new(kind: Kind, file: &str, line: Option<usize>, detail: impl Into<String>) -> Problem {
        Problem {
            kind,
            file: file.to_string(),
            line,
            // Nothing the check prints may carry a credential.
            detail: patterns::mask_secrets(&detail.into()).into_owned(),
        }
    }

    /// `dangling_link MEMORY.md:12: ...`, for the prompt and stderr.
    pub fn one_line(&self) -> String {
        match self.line {
            Some(line) => format!(
                "{} {}:{line}: {}",
                self.kind.as_str(),
                self.file,
                self.detail
            ),
            None => format!("{} {}: {}", self.kind.as_str(), self.file, self.detail),
        }
    }
}

/// How many problems of each kind: every kind, zeros included, so `jq .counts.secret` works.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts(BTreeMap<Kind, usize>);

impl Counts {
    fn of(problems: &[Problem]) -> Counts {
        let mut counts = BTreeMap::new();
        for p in problems {
            *counts.entry(p.kind).or_insert(0) += 1;
        }
        Counts(counts)
    }

    pub fn get(&self, kind: Kind) -> usize {
        self.0.get(&kind).copied().unwrap_or(0)
    }

    pub fn total(&self) -> usize {
        self.0.values().sum()
    }

    /// The kinds that have more problems here than in `before`.
    pub fn raised_since(&self, before: &Counts) -> Vec<Kind> {
        Kind::ALL
            .into_iter()
            .filter(|&k| self.get(k) > before.get(k))
            .collect()
    }

    /// `2 dangling_link, 1 orphan_file`.
    pub fn summary(&self) -> String {
        Kind::ALL
            .into_iter()
            .filter(|&k| self.get(k) > 0)
            .map(|k| format!("{} {}", self.get(k), k.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Serialize for Counts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(Kind::ALL.len()))?;
        for kind in Kind::ALL {
            map.serialize_entry(kind.as_str(), &self.get(kind))?;
        }
        map.end()
    }
}

/// Every kind, each a count.
impl JsonSchema for Counts {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Counts".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        let properties: serde_json::Map<String, serde_json::Value> = names
            .iter()
            .map(|name| {
                let count = serde_json::json!({"type": "integer", "minimum": 0});
                (name.to_string(), count)
            })
            .collect();
        schemars::json_schema!({
            "type": "object",
            "properties": properties,
            "required": names,
            "additionalProperties": false,
        })
    }
}

/// A line the client drops when it loads the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct CutLine {
    pub line: usize,
    pub text: String,
}

/// The index as the client loads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct IndexHealth {
    #[serde(serialize_with = "path_lossy")]
    #[schemars(with = "String")]
    pub path: PathBuf,
    pub exists: bool,
    pub lines: usize,
    pub chars: usize,
    pub max_lines: usize,
    pub max_chars: usize,
    /// The first [`CUT_LINES`] lines the client drops.
    pub cut_at_load: Vec<CutLine>,
    /// How many lines the client drops.
    pub cut_at_load_total: usize,
}

impl IndexHealth {
    /// The index of the memory dir `dir` before anything is known of it.
    fn empty(dir: &Path) -> IndexHealth {
        IndexHealth {
            path: dir.join(INDEX_FILE),
            exists: false,
            lines: 0,
            chars: 0,
            max_lines: INDEX_MAX_LINES,
            max_chars: INDEX_MAX_CHARS,
            cut_at_load: Vec::new(),
            cut_at_load_total: 0,
        }
    }
}

/// `dream-run check`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Health {
    #[serde(serialize_with = "path_lossy")]
    #[schemars(with = "String")]
    pub memory_dir: PathBuf,
    /// The project whose paths `missing_path` checks; null with `--memory-dir` alone.
    #[serde(serialize_with = "option_path")]
    #[schemars(with = "Option<String>")]
    pub project_root: Option<PathBuf>,
    /// Memory files read (`.md`, the index included).
    pub files: usize,
    pub index: IndexHealth,
    pub problems: Vec<Problem>,
    pub counts: Counts,
    /// What a person should know that is no problem: `no_memory_dir` (nothing written yet,
    /// as before the first consolidation).
    pub notes: Vec<&'static str>,
}

fn option_path<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match path {
        Some(p) => path_lossy(p, s),
        None => s.serialize_none(),
    }
}

impl Health {
    /// The answer for a memory dir that does not exist yet.
    fn no_memory_dir(dir: &Path, scope: &Scope<'_>) -> Health {
        Health {
            memory_dir: dir.to_path_buf(),
            project_root: scope.project_root.map(Path::to_path_buf),
            files: 0,
            index: IndexHealth::empty(dir),
            problems: Vec::new(),
            counts: Counts::default(),
            notes: vec!["no_memory_dir"],
        }
    }

    pub fn is_healthy(&self) -> bool {
        self.problems.is_empty()
    }

    /// The problems as the prompt lists them: at most [`PROMPT_PROBLEMS`], then how many more.
    pub fn for_prompt(&self) -> Option<String> {
        if self.problems.is_empty() {
            return None;
        }
        let mut text = String::new();
        for p in self.problems.iter().take(PROMPT_PROBLEMS) {
            text.push_str("- ");
            text.push_str(&p.one_line());
            text.push('\n');
        }
        let more = self.problems.len().saturating_sub(PROMPT_PROBLEMS);
        if more > 0 {
            text.push_str(&format!(
                "- ... and {more} more ({})\n",
                self.counts.summary()
            ));
        }
        Some(text)
    }
}

/// Where to look besides the memory dir.
#[derive(Debug, Clone)]
pub struct Scope<'a> {
    /// The project root, for `missing_path`; `None` skips that kind.
    pub project_root: Option<&'a Path>,
    /// The directory the project was named by, when it is not the root (a subdirectory):
    /// a path relative to it counts too.
    pub project_cwd: Option<&'a Path>,
    /// The transcripts dir, for the index's age against the newest session; `None` skips it.
    pub transcripts_dir: Option<&'a Path>,
    /// How much older than the newest session the index may be.
    pub min_hours: f64,
}

/// [`Scope`] with its paths owned: what a run keeps to check before and after itself.
#[derive(Debug, Clone)]
pub struct ProjectScope {
    root: Option<PathBuf>,
    cwd: Option<PathBuf>,
    transcripts_dir: Option<PathBuf>,
    min_hours: f64,
}

impl ProjectScope {
    /// The project's root (its git root, as for the memory dir's name), the directory it was
    /// named by and its transcripts; `with_project` false leaves the project out.
    pub fn new(project: &Project, with_project: bool, min_hours: f64) -> ProjectScope {
        ProjectScope {
            root: with_project
                .then(|| git_root(&project.cwd).unwrap_or_else(|| project.cwd.clone())),
            cwd: with_project.then(|| project.cwd.clone()),
            transcripts_dir: with_project.then(|| project.transcripts_dir.clone()),
            min_hours,
        }
    }

    /// The gate's `DREAMKIT_MIN_HOURS` (24 when unset or unreadable: the check only reports).
    pub fn min_hours_from(env: &Env) -> f64 {
        env.get("DREAMKIT_MIN_HOURS")
            .and_then(|v| crate::cli::duration::parse_hours(v.to_str()?).ok())
            .unwrap_or(24.0)
    }

    pub fn scope(&self) -> Scope<'_> {
        Scope {
            project_root: self.root.as_deref(),
            project_cwd: self.cwd.as_deref(),
            transcripts_dir: self.transcripts_dir.as_deref(),
            min_hours: self.min_hours,
        }
    }
}

/// `run.health`: the counts before and after a run, and the kinds it made worse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct RunHealth {
    pub before: CountsOnly,
    /// `None` when the memory dir could not be checked after the run.
    pub after: Option<CountsOnly>,
    pub worse: Vec<Kind>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct CountsOnly {
    pub counts: Counts,
}

impl RunHealth {
    pub fn new(before: &Health) -> RunHealth {
        RunHealth {
            before: CountsOnly {
                counts: before.counts.clone(),
            },
            after: None,
            worse: Vec::new(),
        }
    }

    /// Records the check after the run; returns the kinds that rose.
    pub fn record_after(&mut self, after: &Health) -> &[Kind] {
        self.worse = after.counts.raised_since(&self.before.counts);
        self.after = Some(CountsOnly {
            counts: after.counts.clone(),
        });
        &self.worse
    }

    /// `dangling_link 0 -> 1, orphan_file 1 -> 2`.
    pub fn worse_summary(&self) -> String {
        let after = self.after.as_ref().map(|a| &a.counts);
        self.worse
            .iter()
            .map(|&k| {
                format!(
                    "{} {} -> {}",
                    k.as_str(),
                    self.before.counts.get(k),
                    after.map_or(0, |a| a.get(k))
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One file found in the memory dir.
struct MemoryFile {
    /// Relative to the memory dir, `/`-separated.
    relative: String,
    text: String,
    modified: SystemTime,
}

/// What the walk found: the Markdown files to read (relative path, path), and every entry's
/// relative path (so a link's target is looked up without a system call).
struct Listing {
    to_read: Vec<(String, PathBuf)>,
    entries: NameSet<String>,
}

/// `check`'s answer: healthy (exit 0) or not (exit 1, the counts in one line on stderr).
impl Report for Health {
    fn exit(&self) -> Exit {
        if self.is_healthy() {
            Exit::Yes
        } else {
            Exit::No
        }
    }

    fn note(&self) -> Option<String> {
        (!self.is_healthy()).then(|| {
            format!(
                "{} problem{} in {}: {}",
                self.problems.len(),
                if self.problems.len() == 1 { "" } else { "s" },
                self.memory_dir.display(),
                self.counts.summary()
            )
        })
    }
}

impl Health {
    /// What a new session should know: the memory's problems, the first ten of them.
    pub fn session_context(&self) -> Option<String> {
        if self.is_healthy() {
            return None;
        }
        let shown: Vec<String> = self
            .problems
            .iter()
            .take(10)
            .map(Problem::one_line)
            .collect();
        let more = self.problems.len().saturating_sub(shown.len());
        Some(format!(
            "dreamkit's memory check found {} problem{} in this project's memory ({}):\n{}{}\nThe next consolidation works on them; `dream-run check` lists them all.",
            self.problems.len(),
            if self.problems.len() == 1 { "" } else { "s" },
            self.counts.summary(),
            shown.join("\n"),
            if more > 0 { format!("\n... and {more} more") } else { String::new() },
        ))
    }
}

/// `dream-run check`.
pub(super) fn check(args: &CheckArgs, cx: &Context) -> Result<Health, Failure> {
    let diag = cx.diag();
    let located = cx.project(&args.location)?;
    // With --memory-dir alone there is no project to check paths against.
    let with_project = located.hints.cwd.is_some() || args.location.memory_dir.is_none();
    let project = &located.project;
    // A half-done apply or undo explains what the check is about to find: said first, and
    // how to roll it back (the check itself changes nothing).
    super::recover::report(project, diag);
    let scope = ProjectScope::new(project, with_project, args.min_hours);
    let health = match run_check(&project.memory_dir, &scope.scope()) {
        Ok(health) => health,
        // Normal before the first consolidation: nothing to check, nothing wrong. A dir
        // named by --memory-dir is another matter: missing, it is most likely a typo.
        Err(e)
            if e.kind() == io::ErrorKind::NotFound
                && args.location.memory_dir.is_none()
                && std::fs::symlink_metadata(&project.memory_dir).is_err() =>
        {
            Health::no_memory_dir(&project.memory_dir, &scope.scope())
        }
        Err(e) => return Err(Failure::io("read the memory dir", &project.memory_dir, &e)),
    };
    Ok(health)
}

/// Checks the memory dir `dir`. Fails only when `dir` itself cannot be listed.
pub fn run_check(dir: &Path, scope: &Scope<'_>) -> io::Result<Health> {
    let mut problems = Vec::new();
    let Listing { to_read, entries } = list(dir, &mut problems)?;
    let exists = |target: &str| {
        // Dot files and folders are not walked: those few are asked of the file system.
        entries.contains(target) || std::fs::symlink_metadata(dir.join(target)).is_ok()
    };
    let project_names = ProjectNames::new(scope.project_root, scope.project_cwd);
    // Read on every core, then scanned on every core: a phase of system calls, then one of
    // text. Interleaved, the two take longer (each evicts the other's working set).
    let read = crate::parallel::map(&to_read, |(_, path)| read_memory_file(path));
    let mut files = Vec::with_capacity(to_read.len());
    for ((relative, _), result) in to_read.into_iter().zip(read) {
        match result {
            Ok((text, modified)) => files.push(MemoryFile {
                relative,
                text,
                modified,
            }),
            Err(why) => problems.push(Problem::new(Kind::Unreadable, &relative, None, why)),
        }
    }
    // What looks at one file alone, in one pass per file: its lines classified (code, front
    // matter) once for every check, its links, its credentials, dates and paths, and the
    // keys its lines are compared by for duplicates.
    let scanned = crate::parallel::map(&files, |file| {
        scan_file(dir, &file.relative, &file.text, &exists, &project_names)
    });
    let mut keys: Vec<Vec<DuplicateKey>> = Vec::with_capacity(files.len());
    let mut links: Vec<Vec<String>> = Vec::with_capacity(files.len());
    for scan in scanned {
        keys.push(scan.keys);
        links.push(scan.links);
        problems.extend(scan.found);
    }
    // Links, and what the index reaches.
    let edges: NameMap<&str, Vec<String>> = files
        .iter()
        .map(|f| f.relative.as_str())
        .zip(links)
        .collect();
    orphans(&files, &edges, &mut problems);
    let by_name: NameMap<&str, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.relative.as_str(), i))
        .collect();
    continuation_files(&files, &by_name, &mut problems);
    let index_at = by_name.get(INDEX_FILE).copied();
    let mut index = IndexHealth {
        exists: entries.contains(INDEX_FILE),
        ..IndexHealth::empty(dir)
    };

    if let Some(at) = index_at {
        let file = &files[at];
        // Classified again here: one file, and its lines borrow its text.
        let lines = markdown::lines(&file.text);
        check_index(file, &lines, &mut index, &mut problems);
        index_shape(file, &lines, &mut problems);
        if let Some(transcripts) = scope.transcripts_dir {
            stale_against_sessions(file, transcripts, scope.min_hours, &mut problems);
        }
    }
    duplicate_topic_lines(&files, &keys, &mut problems);

    problems
        .sort_by(|a, b| (a.file.as_str(), a.line, a.kind).cmp(&(b.file.as_str(), b.line, b.kind)));
    problems.dedup();
    let counts = Counts::of(&problems);
    Ok(Health {
        memory_dir: dir.to_path_buf(),
        project_root: scope.project_root.map(Path::to_path_buf),
        files: files.len(),
        index,
        problems,
        counts,
        notes: Vec::new(),
    })
}

/// What one file's scan found: the memory files it links to, the keys of its lines for
/// [`duplicate_topic_lines`], and its own problems.
struct Scan {
    links: Vec<String>,
    keys: Vec<DuplicateKey>,
    found: Vec<Problem>,
}

/// Everything that looks at the file `relative` alone. The index's own checks need the
/// whole picture and follow the scan.
fn scan_file(
    dir: &Path,
    relative: &str,
    text: &str,
    exists: &dyn Fn(&str) -> bool,
    project: &ProjectNames,
) -> Scan {
    let lines = markdown::lines(text);
    let mut found = Vec::new();
    let links = memory_links(dir, relative, &lines, exists, &mut found);
    scan_text(dir, relative, text, &lines, project, &mut found);
    let keys = if relative == INDEX_FILE {
        Vec::new()
    } else {
        if !is_index(relative) {
            topic_format(relative, text, &mut found);
        }
        duplicate_keys(text, &lines)
    };
    Scan { links, keys, found }
}

/// A `.dreamkit-<pid>-*.tmp` whose writer is gone (or over 10 minutes old), as a problem.
fn stray_temp(entry: &walkdir::DirEntry, name: &str, prefix: &str) -> Option<Problem> {
    let writer = crate::files::temp_file_writer(name)?;
    let meta = entry.metadata().ok()?;
    if !store::is_stray(name, &meta, std::time::SystemTime::now()) {
        return None;
    }
    let by = writer.map_or_else(String::new, |pid| format!(" (PID {pid})"));
    Some(Problem::new(
        Kind::StrayTemp,
        &format!("{prefix}{name}"),
        None,
        format!(
            "a temporary file a killed dreamkit process{by} left: the next command that changes state (or `dream-run recover`) removes it"
        ),
    ))
}

/// Every `.md` file under `dir` (not following symlinks, leaving out dot files and folders:
/// the lock files, `.git`) to read, in the order of their relative paths; every other entry
/// is a problem of its own.
fn list(dir: &Path, problems: &mut Vec<Problem>) -> io::Result<Listing> {
    // The memory dir itself must be a folder that can be listed (a walk would take a file
    // given as its root for an entry).
    std::fs::read_dir(dir)?;
    let mut to_read: Vec<(String, PathBuf)> = Vec::new();
    let mut seen = NameSet::default();
    // A walk's paths are `dir` joined with the rest: the rest is cut off by length, not
    // found again component by component.
    let joined = dir.join("x");
    let root = joined.as_os_str().as_encoded_bytes();
    let root = &root[..root.len() - 1];
    let relative_of = |path: &Path| match path.as_os_str().as_encoded_bytes().strip_prefix(root) {
        Some(rest) => String::from_utf8_lossy(rest).into_owned(),
        _ => path
            .strip_prefix(dir)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned(),
    };
    // Never through a symbolic link. In the file system's order: the files are sorted once,
    // by their relative paths, as the report lists them.
    let mut walk = walkdir::WalkDir::new(dir).min_depth(1).into_iter();
    while let Some(entry) = walk.next() {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) if e.depth() == 0 => {
                return Err(e
                    .into_io_error()
                    .unwrap_or_else(|| io::Error::other("cannot list the memory dir")))
            }
            Err(e) => {
                let folder = e.path().map(relative_of).unwrap_or_default();
                let why = match e.io_error() {
                    Some(io) => io.to_string(),
                    None => e.to_string(),
                };
                problems.push(Problem::new(
                    Kind::Unreadable,
                    &folder,
                    None,
                    format!("a folder that cannot be listed: {why}"),
                ));
                continue;
            }
        };
        let kind = entry.file_type();
        let Some(name) = entry.file_name().to_str() else {
            if kind.is_dir() {
                walk.skip_current_dir();
            }
            problems.push(Problem::new(
                Kind::Unreadable,
                &relative_of(entry.path()),
                None,
                "a name that is not UTF-8: the dream agent cannot name it",
            ));
            continue;
        };
        let relative = relative_of(entry.path());
        if name.starts_with('.') {
            if kind.is_dir() {
                walk.skip_current_dir();
            }
            // Dot files are not memory; but a temporary file a killed dreamkit process
            // left is reported (the next command that changes state removes it).
            let prefix = &relative[..relative.len() - name.len()];
            if let Some(problem) = stray_temp(&entry, name, prefix) {
                problems.push(problem);
            }
            continue;
        }
        seen.insert(relative.clone());
        if kind.is_dir() {
            // The walk goes into it.
        } else if kind.is_symlink() {
            problems.push(Problem::new(
                Kind::Unreadable,
                &relative,
                None,
                "a symbolic link: dreamkit neither follows nor maintains it",
            ));
        } else if !kind.is_file() {
            problems.push(Problem::new(
                Kind::Unreadable,
                &relative,
                None,
                format!("{}, not a regular file", file_kind(kind)),
            ));
        } else if !is_markdown(name) {
            problems.push(Problem::new(
                Kind::NotMarkdown,
                &relative,
                None,
                "not a .md file: Claude Code's memory holds Markdown only",
            ));
        } else {
            to_read.push((relative, entry.into_path()));
        }
    }
    to_read.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(Listing {
        to_read,
        entries: seen,
    })
}

fn is_markdown(name: &str) -> bool {
    Path::new(name)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("md"))
}

/// A memory file's text and mtime, or why it cannot be had. Opened as every reader of ours
/// opens (a FIFO or device swapped in since the listing is refused, never waited on), and
/// without following a symlink swapped in.
fn read_memory_file(path: &Path) -> Result<(String, SystemTime), String> {
    let (mut file, meta) =
        crate::files::open_regular_no_follow_with_metadata(path).map_err(|e| e.to_string())?;
    let over = |len: u64| format!("{len} bytes, over {} MiB: not read", MAX_FILE_BYTES >> 20);
    if meta.len() > MAX_FILE_BYTES {
        return Err(over(meta.len()));
    }
    let bytes = crate::files::read_sized(&mut file, meta.len(), MAX_FILE_BYTES)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(over(bytes.len() as u64));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok((text, meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)))
}

/// The memory files `file` links to (relative paths); a link to a memory file that does not
/// exist is a `dangling_link`. Links outside the memory dir (the web, the repository) are not
/// memory links.
fn memory_links(
    dir: &Path,
    relative: &str,
    lines: &[Line<'_>],
    exists: &dyn Fn(&str) -> bool,
    problems: &mut Vec<Problem>,
) -> Vec<String> {
    let mut out = Vec::new();
    let from = relative.rsplit_once('/').map_or("", |(d, _)| d);
    for line in lines {
        // Every link, inline or by reference, has a `]`.
        if line.code || memchr::memchr(b']', line.text.as_bytes()).is_none() {
            continue;
        }
        let spans = markdown::code_spans(line.text);
        let prose = markdown::prose(line.text, &spans);
        for link in markdown::links(&prose) {
            let Some(target) = resolve_link(dir, from, &link.target) else {
                continue;
            };
            if target.is_empty() {
                continue;
            }
            if !exists(&target) {
                problems.push(Problem::new(
                    Kind::DanglingLink,
                    relative,
                    Some(line.number),
                    format!("links to {target}, which does not exist"),
                ));
            }
            out.push(target);
        }
    }
    out
}

/// A link target as a path relative to the memory dir, when it points inside it.
pub(crate) fn resolve_link(dir: &Path, from: &str, target: &str) -> Option<String> {
    let target = target.split(['#', '?']).next().unwrap_or_default();
    if target.is_empty() || has_scheme(target) {
        return None;
    }
    // Most links: plain relative names, nothing to decode or fold.
    if !target.starts_with('/')
        && !target.contains('%')
        && target
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
    {
        let mut path = String::with_capacity(from.len() + 1 + target.len());
        if !from.is_empty() {
            path.push_str(from);
            path.push('/');
        }
        path.push_str(target);
        return Some(path);
    }
    let decoded = percent_decoded(target);
    let path = Path::new(&decoded);
    let relative: PathBuf = if path.is_absolute() {
        path.strip_prefix(dir).ok()?.to_path_buf()
    } else {
        Path::new(from).join(path)
    };
    // Lexically, without touching the disk: `..` above the memory dir leaves it.
    let mut parts: Vec<String> = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?.to_string()),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

/// `https:`, `mailto:`, `file:` ...: a URL, not a path.
fn has_scheme(target: &str) -> bool {
    match target.split_once(':') {
        Some((scheme, _)) => {
            scheme.len() > 1
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

/// `%20` and friends decoded; anything malformed left as it is.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let hex = |b: u8| char::from(b).to_digit(16);
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// Every `MEMORY.md` (the top one and any in a sub-folder) is an index, and so is the
/// overflow index at the top.
pub(crate) fn is_index(name: &str) -> bool {
    name == INDEX_FILE
        || name == OVERFLOW_INDEX_FILE
        || name
            .strip_suffix(INDEX_FILE)
            .is_some_and(|folder| folder.ends_with('/'))
}

/// A topic file in the client's format: frontmatter with a slug `name`, a one-line
/// `description` and a known type (none is fine: older files have none, and the client
/// reads them); a few lines, not a document.
fn topic_format(relative: &str, text: &str, problems: &mut Vec<Problem>) {
    if text.len() > LARGE_FILE_BYTES {
        problems.push(Problem::new(
            Kind::LargeFile,
            relative,
            None,
            format!(
                "{} bytes (at most {LARGE_FILE_BYTES}): one memory per file, a few lines; split it or move the detail out",
                text.len()
            ),
        ));
    }
    let mut problem = |line: Option<usize>, detail: String| {
        problems.push(Problem::new(Kind::FrontMatter, relative, line, detail));
    };
    let Some(front) = front_matter::parse(text) else {
        return problem(
            None,
            "no frontmatter: a memory file starts with a `---` block holding name, description and metadata.type".to_string(),
        );
    };
    if !front.closed {
        return problem(
            Some(1),
            "the frontmatter's `---` block is never closed: the whole file is read as frontmatter"
                .to_string(),
        );
    }
    match front.name.as_ref().filter(|v| !v.text.is_empty()) {
        None => problem(Some(1), "the frontmatter has no name".to_string()),
        Some(name) if !front_matter::is_slug(&name.text) => problem(
            Some(name.line),
            format!(
                "name {:?} is not a kebab-case slug (lowercase letters and digits joined by single -)",
                name.text
            ),
        ),
        Some(_) => {}
    }
    match front.description.as_ref().filter(|v| !v.text.is_empty()) {
        None => problem(
            Some(1),
            "the frontmatter has no description: recall picks memories by it".to_string(),
        ),
        Some(description) => {
            let chars = description.text.chars().count();
            if chars > DESCRIPTION_CHARS {
                problem(
                    Some(description.line),
                    format!(
                        "description is {chars} characters (at most {DESCRIPTION_CHARS}): one line recall can pick the memory by"
                    ),
                );
            }
        }
    }
    if let Some(kind) = front.memory_type() {
        if !front_matter::TYPES.contains(&kind.text.as_str()) {
            problem(
                Some(kind.line),
                format!(
                    "type {:?} is none of {}",
                    kind.text,
                    front_matter::TYPES.join(", ")
                ),
            );
        }
    }
}

/// `name-2.md` beside `name.md` (any `-<digits>` suffix): one memory spilled over two files.
fn continuation_files(
    files: &[MemoryFile],
    by_name: &NameMap<&str, usize>,
    problems: &mut Vec<Problem>,
) {
    for file in files {
        let Some(stem) = file.relative.strip_suffix(".md") else {
            continue;
        };
        let Some((base, digits)) = stem.rsplit_once('-') else {
            continue;
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let first = format!("{base}.md");
        if base.is_empty() || base.ends_with('/') || !by_name.contains_key(first.as_str()) {
            continue;
        }
        let first_name = first.rsplit('/').next().unwrap_or(&first);
        problems.push(Problem::new(
            Kind::ContinuationFile,
            &file.relative,
            None,
            format!("continues {first_name}: one memory per file; merge the two or give this one its own name"),
        ));
    }
}

/// The index as the client writes it: no frontmatter; each line a heading or one
/// `- [Title](file.md) — hook` entry. Content belongs in topic files.
fn index_shape(file: &MemoryFile, lines: &[Line<'_>], problems: &mut Vec<Problem>) {
    let mut problem = |line: usize, detail: String| {
        problems.push(Problem::new(
            Kind::IndexShape,
            &file.relative,
            Some(line),
            detail,
        ));
    };
    if lines.first().is_some_and(|l| l.front_matter) {
        problem(
            1,
            "frontmatter in the index: MEMORY.md holds entries only".to_string(),
        );
    }
    for line in lines {
        let text = line.text.trim();
        if line.front_matter || text.is_empty() || is_heading(text) {
            continue;
        }
        let bullet = text
            .strip_prefix(['-', '*', '+'])
            .filter(|rest| rest.starts_with([' ', '\t']))
            .map(str::trim_start);
        let prose = markdown::prose(text, &markdown::code_spans(text));
        let links = markdown::links(&prose);
        let to_memory = |link: &markdown::Link| {
            let target = link.target.split(['#', '?']).next().unwrap_or_default();
            target.len() > ".md".len() && target.to_ascii_lowercase().ends_with(".md")
        };
        let detail = match bullet {
            _ if line.code => "code in the index: it belongs in a topic file".to_string(),
            Some(_) if links.len() > 1 => format!(
                "{} links on one line: one entry per memory file",
                links.len()
            ),
            Some(entry) if entry.starts_with('[') && links.first().is_some_and(to_memory) => {
                continue
            }
            // An entry whose file is gone, marked so by the rules engine: still an entry,
            // and `dangling_link` no more; what to do with it is the model's to judge.
            Some(entry) if links.is_empty() && entry.contains(FILE_MISSING) => continue,
            Some(_) => "a bullet that links to no memory file: an entry is `- [Title](file.md) — hook`".to_string(),
            None => "neither a heading nor a `- [Title](file.md) — hook` entry: content belongs in a topic file".to_string(),
        };
        problem(line.number, detail);
    }
}

/// `# Title` to `###### Title` (or a bare `#`).
pub(crate) fn is_heading(text: &str) -> bool {
    let hashes = text.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes)
        && text[hashes..]
            .chars()
            .next()
            .is_none_or(char::is_whitespace)
}

/// Topic files no link path from an index reaches. Every `MEMORY.md` (the top one and any in
/// a sub-folder) is an index.
fn orphans(files: &[MemoryFile], edges: &NameMap<&str, Vec<String>>, problems: &mut Vec<Problem>) {
    let mut reached: NameSet<&str> = NameSet::default();
    let mut queue: VecDeque<&str> = files
        .iter()
        .map(|f| f.relative.as_str())
        .filter(|n| is_index(n))
        .collect();
    reached.extend(queue.iter().copied());
    while let Some(name) = queue.pop_front() {
        for target in edges.get(name).into_iter().flatten() {
            if let Some((known, _)) = edges.get_key_value(target.as_str()) {
                if reached.insert(known) {
                    queue.push_back(known);
                }
            }
        }
    }
    for file in files {
        if !reached.contains(file.relative.as_str()) {
            problems.push(Problem::new(
                Kind::OrphanFile,
                &file.relative,
                None,
                format!("no {INDEX_FILE} entry leads here: the index does not link it (recall may still find it by its description)"),
            ));
        }
    }
}

/// The index's own problems: the cut at load, long entries, duplicate entries.
fn check_index(
    file: &MemoryFile,
    lines: &[Line<'_>],
    index: &mut IndexHealth,
    problems: &mut Vec<Problem>,
) {
    let load = index::load(&file.text);
    index.lines = load.lines;
    index.chars = load.chars;
    if let Some(cut) = &load.cut {
        // A line is judged in its file (a key block may open before the cut), then shown as
        // any memory text is: never a secret, never a control character, never at length.
        let secret = SecretLines::of(&file.text);
        index.cut_at_load_total = cut.dropped.len();
        index.cut_at_load = cut
            .dropped
            .iter()
            .take(CUT_LINES)
            .map(|(line, text)| CutLine {
                line: *line,
                text: if secret.contains(line.saturating_sub(1)) {
                    SECRET_LINE.to_string()
                } else {
                    crate::claude::transcript::cut_chars(
                        &crate::cli::text::sanitize(&patterns::mask_secrets(text)),
                        CUT_LINE_CHARS - 1,
                    )
                },
            })
            .collect();
        let over = match (load.over_lines, load.over_chars) {
            (true, false) => format!("{} lines (limit: {INDEX_MAX_LINES})", load.lines),
            (false, true) => format!(
                "{} characters (limit: {INDEX_MAX_CHARS}): index entries are too long",
                load.chars
            ),
            _ => format!(
                "{} lines and {} characters (limits: {INDEX_MAX_LINES}, {INDEX_MAX_CHARS})",
                load.lines, load.chars
            ),
        };
        let lost = if cut.kept_lines == 0 {
            "everything after the first 25000 characters of its first line".to_string()
        } else {
            format!(
                "{} of {} lines, from line {} on",
                cut.dropped.len(),
                load.lines,
                cut.first_line
            )
        };
        problems.push(Problem::new(
            Kind::IndexOverLimit,
            &file.relative,
            Some(cut.first_line),
            format!("{over}; Claude Code does not load {lost} (index.cut_at_load)"),
        ));
    }

    let mut seen_text: HashMap<String, usize> = HashMap::new();
    let mut seen_target: HashMap<String, usize> = HashMap::new();
    let from = "";
    for line in lines {
        if line.code || line.front_matter || line.text.trim().is_empty() {
            continue;
        }
        // UTF-16 units, as the client counts; most lines are ASCII and short.
        let length = if line.text.len() <= LONG_ENTRY_UNITS {
            0
        } else {
            line.text.encode_utf16().count()
        };
        if length > LONG_ENTRY_UNITS {
            problems.push(Problem::new(
                Kind::LongEntry,
                &file.relative,
                Some(line.number),
                format!(
                    "{length} characters (at most {LONG_ENTRY_UNITS}): keep one short line, the detail in the topic file"
                ),
            ));
        }
        let folded = markdown::normalized(line.text);
        if !folded.is_empty() {
            if let Some(first) = seen_text.get(&folded) {
                problems.push(Problem::new(
                    Kind::DuplicateEntry,
                    &file.relative,
                    Some(line.number),
                    format!("the same entry as line {first}"),
                ));
                continue;
            }
            seen_text.insert(folded, line.number);
        }
        let spans = markdown::code_spans(line.text);
        let prose = markdown::prose(line.text, &spans);
        let mut targets_here = HashSet::new();
        for link in markdown::links(&prose) {
            let Some(target) = resolve_link(Path::new(""), from, &link.target) else {
                continue;
            };
            if target.is_empty() || !targets_here.insert(target.clone()) {
                continue;
            }
            match seen_target.get(&target) {
                Some(first) => problems.push(Problem::new(
                    Kind::DuplicateEntry,
                    &file.relative,
                    Some(line.number),
                    format!("points at {target}, as line {first} does"),
                )),
                None => {
                    seen_target.insert(target, line.number);
                }
            }
        }
    }
}

/// The index older than the project's newest session by more than `min_hours`.
fn stale_against_sessions(
    index: &MemoryFile,
    transcripts: &Path,
    min_hours: f64,
    problems: &mut Vec<Problem>,
) {
    let Ok(sessions) = sessions::sessions_touched_since(transcripts, None, None) else {
        return;
    };
    let Some(newest) = sessions.iter().map(|s| s.modified).max() else {
        return;
    };
    let Ok(age) = newest.duration_since(index.modified) else {
        return;
    };
    let hours = age.as_secs_f64() / 3600.0;
    if hours > min_hours {
        problems.push(Problem::new(
            Kind::StaleIndex,
            &index.relative,
            None,
            format!(
                "written {hours:.1} h before the newest session ({}; --min-hours {min_hours}): a consolidation is due",
                rfc3339(newest)
            ),
        ));
    }
}

/// A topic-file line long enough to compare for duplicates: the hash of its folded text, and
/// where the line is (its number; its bytes in the file's text, compared on a hash hit).
struct DuplicateKey {
    hash: u64,
    number: usize,
    text: std::ops::Range<usize>,
}

/// For [`duplicate_topic_lines`]: the key of each line of the topic file `text` that is long
/// enough to compare (code and front matter are not).
fn duplicate_keys(text: &str, lines: &[Line<'_>]) -> Vec<DuplicateKey> {
    lines
        .iter()
        // A line's fold has at most a character per byte of it: a shorter line is not
        // folded at all.
        .filter(|line| !line.code && !line.front_matter && line.text.len() >= MIN_DUPLICATE_CHARS)
        .filter_map(|line| {
            let hash = markdown::folded_hash(line.text, MIN_DUPLICATE_CHARS)?;
            // The line is a slice of `text`: its offset is the distance between the two.
            let start = line.text.as_ptr() as usize - text.as_ptr() as usize;
            Some(DuplicateKey {
                hash,
                number: line.number,
                text: start..start + line.text.len(),
            })
        })
        .collect()
}

/// The same fact twice in topic files (lines of at least [`MIN_DUPLICATE_CHARS`] folded).
/// Lines are compared by a hash of their folded text (`keys`, from [`duplicate_keys`]), the
/// text itself only on a hit.
fn duplicate_topic_lines(
    files: &[MemoryFile],
    keys: &[Vec<DuplicateKey>],
    problems: &mut Vec<Problem>,
) {
    // The key is a hash already: hashed again by nothing. The first line of each hash is
    // kept inline; lines whose hash matched but whose text did not (a collision) in a list.
    let mut seen: HashMap<u64, (usize, usize), std::hash::BuildHasherDefault<PassThrough>> =
        HashMap::default();
    let mut collided: HashMap<u64, Vec<(usize, usize)>> = HashMap::new();
    let text_of = |(f, k): (usize, usize)| &files[f].text[keys[f][k].text.clone()];
    for (at, (file, file_keys)) in files.iter().zip(keys).enumerate() {
        for (n, key) in file_keys.iter().enumerate() {
            let first = match seen.entry(key.hash) {
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert((at, n));
                    continue;
                }
                std::collections::hash_map::Entry::Occupied(first) => *first.get(),
            };
            let folded = markdown::normalized(text_of((at, n)));
            let others = collided.entry(key.hash).or_default();
            let first = std::iter::once(first)
                .chain(others.iter().copied())
                .find(|&other| markdown::normalized(text_of(other)) == folded);
            match first {
                Some((f, k)) => problems.push(Problem::new(
                    Kind::DuplicateEntry,
                    &file.relative,
                    Some(key.number),
                    format!(
                        "the same text as {}:{}",
                        files[f].relative, keys[f][k].number
                    ),
                )),
                None => others.push((at, n)),
            }
        }
    }
}

/// The memory dir's paths, looked up by the thousand (every entry, every link).
type NameSet<K> = HashSet<K, std::hash::BuildHasherDefault<NameHasher>>;
type NameMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<NameHasher>>;

/// A hasher for the memory dir's own paths: a multiply per eight bytes. SipHash's defence
/// against chosen keys buys nothing here (the names are the user's own files); its cost
/// showed in every check.
#[derive(Default)]
struct NameHasher(u64);

impl NameHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for NameHasher {
    fn finish(&self) -> u64 {
        // murmur3's final mix: the table takes its bucket from the low bits.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for chunk in &mut words {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }
}

/// A hasher for keys that are hashes already.
#[derive(Default)]
struct PassThrough(u64);

impl std::hash::Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// Line by line: credentials, relative dates, repository paths that are gone.
fn scan_text(
    dir: &Path,
    relative: &str,
    text: &str,
    lines: &[Line<'_>],
    project: &ProjectNames,
    problems: &mut Vec<Problem>,
) {
    // Most files hold no credential prefix at all: one pass over the whole text decides.
    let may_hold_secrets = patterns::may_hold_secrets(text);
    let secret = if may_hold_secrets {
        SecretLines::of(text)
    } else {
        SecretLines::default()
    };
    let mut dates = patterns::DatePieces::of(text);
    for line in lines {
        let may_date = dates.in_line(line.text);
        if let Some(found) = may_hold_secrets
            .then(|| patterns::secrets(line.text))
            .and_then(|found| found.into_iter().next())
        {
            problems.push(Problem::new(
                Kind::Secret,
                relative,
                Some(line.number),
                format!(
                    "looks like {}: memory is sent to a model every session; remove it and rotate the credential",
                    found.what
                ),
            ));
        }
        // The other checks quote what they find: nothing of a secret line (a key block's body
        // has slashes enough to pass for a path).
        if line.code
            || secret.contains(line.number.saturating_sub(1))
            || !may_date && project.root.is_none()
        {
            continue;
        }
        let spans = markdown::code_spans(line.text);
        let prose = markdown::prose(line.text, &spans);
        if let Some(phrase) = may_date
            // The line holds a piece: the words themselves decide.
            .then(|| patterns::relative_date_in_words(&patterns::unquoted(&prose)))
            .flatten()
        {
            problems.push(Problem::new(
                Kind::RelativeDate,
                relative,
                Some(line.number),
                format!("\"{phrase}\": write the date itself (YYYY-MM-DD); it means nothing a day later"),
            ));
        }
        if project.root.is_some() {
            missing_paths(dir, relative, line, &spans, &prose, project, problems);
        }
    }
}

/// Repository paths a line names that the project no longer has.
fn missing_paths(
    dir: &Path,
    relative: &str,
    line: &Line<'_>,
    spans: &[std::ops::Range<usize>],
    prose: &str,
    project: &ProjectNames,
    problems: &mut Vec<Problem>,
) {
    // Link targets are memory links (or URLs), not repository paths written in prose.
    let mut prose = prose.to_string();
    for link in markdown::links(&prose.clone()) {
        prose.replace_range(link.range.clone(), &" ".repeat(link.range.len()));
    }
    let mut candidates: Vec<(String, PathShape)> = Vec::new();
    for text in markdown::code_span_texts(line.text, spans) {
        if !text.contains(char::is_whitespace) {
            candidates.extend(patterns::path_candidate(text, true));
        }
    }
    for word in prose.split_whitespace() {
        candidates.extend(patterns::path_candidate(word, false));
    }
    let mut reported = HashSet::new();
    let from = relative.rsplit_once('/').map_or("", |(d, _)| d);
    for (path, shape) in candidates {
        if !reported.insert(path.clone()) || names_memory_file(dir, from, &path) {
            continue;
        }
        if project.is_missing(&path, shape) {
            problems.push(Problem::new(
                Kind::MissingPath,
                relative,
                Some(line.number),
                format!("{path} is not in the project any more"),
            ));
        }
    }
}

/// A path that names a memory file (`feedback.md`, `notes/ci.md`) is not a repository path.
fn names_memory_file(dir: &Path, from: &str, path: &str) -> bool {
    [dir.join(path), dir.join(from).join(path)]
        .iter()
        .any(|p| std::fs::symlink_metadata(p).is_ok())
}

/// The project's file names, walked once and only when a bare name needs them.
struct ProjectNames {
    root: Option<PathBuf>,
    /// The root, and the directory the project was named by when that is another one.
    bases: Vec<PathBuf>,
    /// Shared by the scanning threads: the first bare name that needs it walks the project.
    names: std::sync::OnceLock<Option<HashSet<String>>>,
}

impl ProjectNames {
    fn new(root: Option<&Path>, cwd: Option<&Path>) -> ProjectNames {
        let mut bases: Vec<PathBuf> = root.into_iter().map(Path::to_path_buf).collect();
        if let (Some(_), Some(cwd)) = (root, cwd) {
            if !bases.iter().any(|b| b == cwd) {
                bases.push(cwd.to_path_buf());
            }
        }
        ProjectNames {
            root: root.map(Path::to_path_buf),
            bases,
            names: std::sync::OnceLock::new(),
        }
    }

    fn is_missing(&self, path: &str, shape: PathShape) -> bool {
        let Some(root) = self.root.as_deref() else {
            return false;
        };
        if self
            .bases
            .iter()
            .any(|base| std::fs::symlink_metadata(base.join(path)).is_ok())
        {
            return false;
        }
        match shape {
            // "and/or", "origin/main": not paths unless they end in a file extension or
            // their first folder is one of the project's.
            PathShape::Nested => {
                let first = path.split('/').next().unwrap_or_default();
                patterns::has_known_extension(path)
                    || self.bases.iter().any(|base| base.join(first).is_dir())
            }
            PathShape::Bare => match self.all_names(root) {
                Some(names) => !names.contains(path),
                // A project too large to list: no claim.
                None => false,
            },
        }
    }

    /// Every file and folder name in the project (leaving out dot folders, `node_modules`
    /// and `target`), or `None` beyond [`MAX_PROJECT_ENTRIES`].
    fn all_names(&self, root: &Path) -> Option<&HashSet<String>> {
        self.names.get_or_init(|| list_names(root)).as_ref()
    }
}

fn list_names(root: &Path) -> Option<HashSet<String>> {
    let mut names = HashSet::new();
    let mut seen = 0usize;
    let mut walk = walkdir::WalkDir::new(root).min_depth(1).into_iter();
    while let Some(entry) = walk.next() {
        // An entry that cannot be read, or a folder that cannot be listed, is left out.
        let Ok(entry) = entry else {
            continue;
        };
        seen += 1;
        if seen > MAX_PROJECT_ENTRIES {
            return None;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().is_dir()
            && (name.starts_with('.') || name == "node_modules" || name == "target")
        {
            walk.skip_current_dir();
        }
        names.insert(name);
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_resolve_inside_the_memory_dir_only() {
        let dir = Path::new("/m");
        assert_eq!(resolve_link(dir, "", "a.md").as_deref(), Some("a.md"));
        assert_eq!(
            resolve_link(dir, "team", "notes/b.md").as_deref(),
            Some("team/notes/b.md")
        );
        assert_eq!(
            resolve_link(dir, "team", "./b.md").as_deref(),
            Some("team/b.md")
        );
        assert_eq!(
            resolve_link(dir, "", "team//b.md").as_deref(),
            Some("team/b.md")
        );
        assert_eq!(resolve_link(dir, "", "../../x.md"), None);
        assert_eq!(
            resolve_link(dir, "team", "../b.md#x").as_deref(),
            Some("b.md")
        );
        assert_eq!(
            resolve_link(dir, "", "my%20notes.md").as_deref(),
            Some("my notes.md")
        );
        assert_eq!(resolve_link(dir, "", "/m/c.md").as_deref(), Some("c.md"));
        assert_eq!(resolve_link(dir, "", "/elsewhere/c.md"), None);
        assert_eq!(resolve_link(dir, "", "../../src/lib.rs"), None);
        assert_eq!(resolve_link(dir, "", "https://x.org/a.md"), None);
        assert_eq!(resolve_link(dir, "", "mailto:a@b.c"), None);
        assert_eq!(resolve_link(dir, "", "#anchor"), None);
        assert_eq!(resolve_link(dir, "", "%é%2").as_deref(), Some("%é%2"));
    }

    #[test]
    fn counts_name_every_kind_and_what_rose() {
        let before = Counts::of(&[Problem::new(Kind::OrphanFile, "a.md", None, "x")]);
        let after = Counts::of(&[
            Problem::new(Kind::DanglingLink, "MEMORY.md", Some(1), "x"),
            Problem::new(Kind::OrphanFile, "a.md", None, "x"),
        ]);
        assert_eq!(after.raised_since(&before), [Kind::DanglingLink]);
        assert_eq!(after.summary(), "1 dangling_link, 1 orphan_file");
        let json = serde_json::to_value(&before).unwrap();
        assert_eq!(json.as_object().unwrap().len(), Kind::ALL.len());
        assert_eq!(json["orphan_file"], 1);
        assert_eq!(json["secret"], 0);
    }

    #[test]
    fn details_never_carry_a_credential() {
        let p = Problem::new(
            Kind::MissingPath,
            "a.md",
            Some(1),
            "sk-ant-api03-AbCdEf0123456789xyzXYZ is gone",
        );
        assert_eq!(p.detail, "[secret] is gone");
    }
}
