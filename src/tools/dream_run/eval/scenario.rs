//! A scenario folder, read and checked before anything runs: `memory/`, `sessions/*.jsonl`,
//! `project/` (optional) and `expect.json`. A malformed one is a usage error naming it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use crate::cli::Failure;
use crate::tools::dream_run::check::Kind;

/// One scenario, ready to run.
#[derive(Debug)]
pub(super) struct Scenario {
    pub(super) name: String,
    pub(super) dir: PathBuf,
    pub(super) expect: Expect,
    /// `sessions/*.jsonl`, sorted by name.
    pub(super) sessions: Vec<PathBuf>,
}

/// `expect.json`, validated.
#[derive(Debug)]
pub(super) struct Expect {
    pub(super) must_contain: Vec<Pattern>,
    pub(super) must_not_contain: Vec<Pattern>,
    pub(super) max_problems: BTreeMap<&'static str, u64>,
    pub(super) changes: Option<Changes>,
    pub(super) needs_model: bool,
    /// The scenario's project root as its transcripts name it (default `/project`).
    pub(super) project_root: String,
    /// The scenario's home as its transcripts name it (default `/home/user`).
    pub(super) home: String,
    /// The directory the pipeline runs in, as the transcripts name it (default: the `cwd` of
    /// the session whose last record is newest).
    pub(super) cwd: Option<String>,
    /// Linked git worktrees of the project: the path the transcripts name -> the branch.
    pub(super) worktrees: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Changes {
    None,
    Some,
}

impl Changes {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Changes::None => "none",
            Changes::Some => "some",
        }
    }
}

/// One `must_contain` / `must_not_contain` entry.
#[derive(Debug)]
pub(super) struct Pattern {
    pub(super) source: String,
    pub(super) regex: Regex,
    pub(super) file: Option<String>,
    pub(super) reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    #[serde(default)]
    must_contain: Vec<RawPattern>,
    #[serde(default)]
    must_not_contain: Vec<RawPattern>,
    #[serde(default)]
    max_problems: BTreeMap<String, u64>,
    #[serde(default)]
    changes: Option<String>,
    #[serde(default)]
    needs_model: bool,
    #[serde(default)]
    project_root: Option<String>,
    #[serde(default)]
    home: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    worktrees: BTreeMap<String, String>,
    /// Free text for people; ignored.
    #[serde(default, rename = "description")]
    _description: Option<Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawPattern {
    Plain(String),
    Full {
        pattern: String,
        #[serde(default)]
        file: Option<String>,
        #[serde(default)]
        reason: Option<String>,
    },
}

/// The scenarios of `suite`: the folder itself when it holds `expect.json`, else each folder
/// in it (sorted; hidden ones left out), filtered by `only` (exact names).
pub(super) fn load_suite(suite: &Path, only: &[String]) -> Result<Vec<Scenario>, Failure> {
    let meta = std::fs::metadata(suite).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Failure::Usage(format!(
            "no suite at {}: give the suite folder (default evals/ in the current directory)",
            suite.display()
        )),
        _ => Failure::io("read", suite, &e),
    })?;
    if !meta.is_dir() {
        return Err(Failure::Usage(format!(
            "{} is not a folder of scenarios",
            suite.display()
        )));
    }
    let mut dirs = Vec::new();
    if suite.join("expect.json").exists() {
        dirs.push(suite.to_path_buf());
    } else {
        let entries = std::fs::read_dir(suite).map_err(|e| Failure::io("list", suite, &e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Failure::io("list", suite, &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !entry.path().is_dir() {
                continue;
            }
            dirs.push(entry.path());
        }
        dirs.sort();
    }
    let name_of = |dir: &Path| {
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string())
    };
    for wanted in only {
        if !dirs.iter().any(|d| &name_of(d) == wanted) {
            return Err(Failure::Usage(format!(
                "--only {wanted}: no such scenario in {}",
                suite.display()
            )));
        }
    }
    let mut scenarios = Vec::new();
    for dir in dirs {
        let name = name_of(&dir);
        if !only.is_empty() && !only.contains(&name) {
            continue;
        }
        let scenario = load(&name, &dir).map_err(|why| Failure::BadInput {
            reason: Some("malformed_scenario"),
            message: format!("scenario {name} ({}): {why}", dir.display()),
        })?;
        scenarios.push(scenario);
    }
    if scenarios.is_empty() {
        return Err(Failure::Usage(format!(
            "no scenario in {} (a scenario is a folder with expect.json and memory/)",
            suite.display()
        )));
    }
    Ok(scenarios)
}

fn load(name: &str, dir: &Path) -> Result<Scenario, String> {
    let expect_path = dir.join("expect.json");
    let text = match std::fs::read_to_string(&expect_path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("expect.json is missing".into())
        }
        Err(e) => return Err(format!("cannot read expect.json: {e}")),
    };
    let raw: RawExpect =
        serde_json::from_str(&text).map_err(|e| format!("expect.json is not valid: {e}"))?;
    if !dir.join("memory").is_dir() {
        return Err("memory/ is missing (the memory dir before; it may be empty)".into());
    }
    let expect = Expect::of(raw)?;
    let mut sessions = Vec::new();
    let sessions_dir = dir.join("sessions");
    if sessions_dir.exists() {
        let entries =
            std::fs::read_dir(&sessions_dir).map_err(|e| format!("cannot list sessions/: {e}"))?;
        for entry in entries {
            let path = entry
                .map_err(|e| format!("cannot list sessions/: {e}"))?
                .path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                check_session(&path)?;
                sessions.push(path);
            }
        }
        sessions.sort();
    }
    if dir.join("project").exists() && !dir.join("project").is_dir() {
        return Err("project is not a folder".into());
    }
    Ok(Scenario {
        name: name.to_string(),
        dir: dir.to_path_buf(),
        expect,
        sessions,
    })
}

/// Every line of a session is one JSON object.
fn check_session(path: &Path) -> Result<(), String> {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(path).map_err(|e| format!("sessions/{file}: {e}"))?;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(_)) => {}
            Ok(_) => return Err(format!("sessions/{file}:{}: not a JSON object", n + 1)),
            Err(e) => return Err(format!("sessions/{file}:{}: not JSON: {e}", n + 1)),
        }
    }
    Ok(())
}

impl Expect {
    fn of(raw: RawExpect) -> Result<Expect, String> {
        let patterns = |list: Vec<RawPattern>, what: &str| -> Result<Vec<Pattern>, String> {
            list.into_iter()
                .map(|p| {
                    let (source, file, reason) = match p {
                        RawPattern::Plain(s) => (s, None, None),
                        RawPattern::Full {
                            pattern,
                            file,
                            reason,
                        } => (pattern, file, reason),
                    };
                    let regex = Regex::new(&source)
                        .map_err(|e| format!("{what}: bad regex {source:?}: {e}"))?;
                    Ok(Pattern {
                        source,
                        regex,
                        file,
                        reason,
                    })
                })
                .collect()
        };
        let mut max_problems = BTreeMap::new();
        for (kind, max) in raw.max_problems {
            let known = Kind::ALL
                .into_iter()
                .find(|k| k.as_str() == kind)
                .ok_or_else(|| {
                    format!("max_problems: {kind:?} is not a kind of `dream-run check`")
                })?;
            max_problems.insert(known.as_str(), max);
        }
        let changes = match raw.changes.as_deref() {
            None => None,
            Some("none") => Some(Changes::None),
            Some("some") => Some(Changes::Some),
            Some(other) => return Err(format!("changes: {other:?} is not \"none\" or \"some\"")),
        };
        let absolute = |what: &str, path: String| -> Result<String, String> {
            match path.starts_with('/') && path.len() > 1 {
                true => Ok(path.trim_end_matches('/').to_string()),
                false => Err(format!("{what}: {path:?} is not an absolute path")),
            }
        };
        let project_root = absolute(
            "project_root",
            raw.project_root.unwrap_or_else(|| "/project".into()),
        )?;
        let home = absolute("home", raw.home.unwrap_or_else(|| "/home/user".into()))?;
        let cwd = raw.cwd.map(|c| absolute("cwd", c)).transpose()?;
        let mut worktrees = BTreeMap::new();
        for (path, branch) in raw.worktrees {
            let path = absolute("worktrees", path)?;
            if branch.is_empty() || branch.starts_with('-') {
                return Err(format!("worktrees: {path}: bad branch name {branch:?}"));
            }
            worktrees.insert(path, branch);
        }
        Ok(Expect {
            must_contain: patterns(raw.must_contain, "must_contain")?,
            must_not_contain: patterns(raw.must_not_contain, "must_not_contain")?,
            max_problems,
            changes,
            needs_model: raw.needs_model,
            project_root,
            home,
            cwd,
            worktrees,
        })
    }
}
