//! A scenario's temporary home: `HOME`, the Claude config dir, the XDG state home, the
//! project (a git repository with one commit, and its linked worktrees), the memory dir and the
//! transcripts, each placed where Claude Code would have written it. The paths the scenario's
//! transcripts name (its home, project root and worktrees) are rewritten onto the temporary
//! ones, so a session whose `cwd` is `/project/sub` lands in the same project.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use walkdir::WalkDir;

use super::scenario::Scenario;
use crate::claude::paths::slug;

pub(super) struct Home {
    _tmp: tempfile::TempDir,
    pub(super) root: PathBuf,
    pub(super) home: PathBuf,
    pub(super) config: PathBuf,
    pub(super) state: PathBuf,
    pub(super) memory_dir: PathBuf,
    /// Where the pipeline runs (`--cwd`).
    pub(super) run_cwd: PathBuf,
}

/// Scenario path prefix -> temporary path, longest first.
struct PathMap(Vec<(String, String)>);

impl Home {
    /// Builds it; `env` is the environment git runs with (its own HOME, no user config).
    pub(super) fn build(scenario: &Scenario, env: &[(OsString, OsString)]) -> Result<Home, String> {
        let tmp = tempfile::Builder::new()
            .prefix("dreamkit-eval-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary folder: {e}"))?;
        let root = std::fs::canonicalize(tmp.path())
            .map_err(|e| format!("cannot resolve the temporary folder: {e}"))?;
        let home = root.join("home");
        let config = home.join(".claude");
        let state = root.join("state");
        let project = root.join("project");
        for dir in [&config, &state, &project] {
            mkdirs(dir)?;
        }
        let expect = &scenario.expect;

        let project_files = scenario.dir.join("project");
        if project_files.is_dir() {
            copy_tree(&project_files, &project)?;
        }
        let git = |args: &[&str], dir: &Path| -> Result<(), String> {
            let out = Command::new("git")
                .args(args)
                .current_dir(dir)
                .env_clear()
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot run git (it makes the project a repository): {e}"))?;
            match out.status.success() {
                true => Ok(()),
                false => Err(format!(
                    "git {} failed: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
            }
        };
        git(&["init", "-q"], &project)?;
        git(&["add", "-A"], &project)?;
        git(
            &[
                "-c",
                "user.name=dreamkit eval",
                "-c",
                "user.email=eval@localhost",
                "-c",
                "commit.gpgsign=false",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "scenario",
            ],
            &project,
        )?;

        let mut roots = vec![(expect.project_root.clone(), project.clone())];
        for (i, (path, branch)) in expect.worktrees.iter().enumerate() {
            let base = Path::new(path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| format!("worktree-{i}"));
            let real = root.join("worktrees").join(base);
            mkdirs(&root.join("worktrees"))?;
            let real_text = real.to_string_lossy().into_owned();
            git(
                &["worktree", "add", "-q", "-b", branch, &real_text],
                &project,
            )?;
            roots.push((path.clone(), real));
        }

        let mut map = Vec::new();
        let scenario_config = format!("{}/.claude/projects", expect.home);
        for (from, to) in &roots {
            map.push((
                format!("{scenario_config}/{}", slug(Path::new(from))),
                config
                    .join("projects")
                    .join(slug(to))
                    .to_string_lossy()
                    .into_owned(),
            ));
        }
        map.push((expect.home.clone(), home.to_string_lossy().into_owned()));
        for (from, to) in &roots {
            map.push((from.clone(), to.to_string_lossy().into_owned()));
        }
        map.sort_by_key(|m| std::cmp::Reverse(m.0.len()));
        let map = PathMap(map);

        let memory_dir = config.join("projects").join(slug(&project)).join("memory");
        mkdirs(&memory_dir)?;
        copy_tree(&scenario.dir.join("memory"), &memory_dir)?;

        // Each session where Claude Code keeps it: <config>/projects/<slug(cwd)>/<id>.jsonl.
        let mut newest: Option<(String, PathBuf)> = None;
        for path in &scenario.sessions {
            let file = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read sessions/{file}: {e}"))?;
            let mut out = String::with_capacity(text.len());
            let (mut id, mut cwd, mut last) = (None, None, String::new());
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let mut record: Value = serde_json::from_str(line)
                    .map_err(|e| format!("sessions/{file}: not JSON: {e}"))?;
                map.rewrite(&mut record);
                if id.is_none() {
                    id = record["sessionId"].as_str().map(str::to_string);
                }
                if cwd.is_none() {
                    cwd = record["cwd"].as_str().map(PathBuf::from);
                }
                if let Some(at) = record["timestamp"].as_str() {
                    if at > last.as_str() {
                        last = at.to_string();
                    }
                }
                out.push_str(&record.to_string());
                out.push('\n');
            }
            let id = id.unwrap_or_else(|| file.trim_end_matches(".jsonl").to_string());
            let cwd = cwd.unwrap_or_else(|| project.clone());
            if !cwd.starts_with(&root) {
                return Err(format!(
                    "sessions/{file}: its cwd {} is outside the project root {} and its worktrees (set project_root or worktrees in expect.json)",
                    cwd.display(),
                    expect.project_root
                ));
            }
            mkdirs(&cwd)?;
            let dir = config.join("projects").join(slug(&cwd));
            mkdirs(&dir)?;
            std::fs::write(dir.join(format!("{id}.jsonl")), out)
                .map_err(|e| format!("cannot write the session {id}: {e}"))?;
            if newest.as_ref().is_none_or(|(at, _)| last >= *at) {
                newest = Some((last, cwd));
            }
        }
        let run_cwd = match &expect.cwd {
            Some(cwd) => PathBuf::from(map.text(cwd).unwrap_or_else(|| cwd.clone())),
            None => newest.map_or_else(|| project.clone(), |(_, cwd)| cwd),
        };
        if !run_cwd.starts_with(&root) {
            return Err(format!(
                "cwd {} is not in the project",
                expect.cwd.as_deref().unwrap_or_default()
            ));
        }
        mkdirs(&run_cwd)?;
        Ok(Home {
            _tmp: tmp,
            root,
            home,
            config,
            state,
            memory_dir,
            run_cwd,
        })
    }
}

impl PathMap {
    fn rewrite(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if let Some(mapped) = self.text(s) {
                    *s = mapped;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.rewrite(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.rewrite(v)),
            _ => {}
        }
    }

    /// `text` with every scenario path replaced where it stands as a path (not inside a
    /// longer name); `None` when nothing changed.
    fn text(&self, text: &str) -> Option<String> {
        let name_char = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
        let mut out = String::new();
        let mut changed = false;
        let mut i = 0;
        let mut prev: Option<char> = None;
        'outer: while i < text.len() {
            let rest = &text[i..];
            if !prev.is_some_and(name_char) {
                for (from, to) in &self.0 {
                    if rest.starts_with(from.as_str())
                        && !rest[from.len()..].chars().next().is_some_and(name_char)
                    {
                        out.push_str(to);
                        i += from.len();
                        prev = from.chars().last();
                        changed = true;
                        continue 'outer;
                    }
                }
            }
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            prev = Some(c);
            i += c.len_utf8();
        }
        changed.then_some(out)
    }
}

fn mkdirs(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// Copies folders and regular files (links and anything else are left out).
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    for entry in WalkDir::new(from).min_depth(1).sort_by_file_name() {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", from.display()))?;
        let rel = entry.path().strip_prefix(from).unwrap_or(entry.path());
        let target = to.join(rel);
        if entry.file_type().is_dir() {
            mkdirs(&target)?;
        } else if entry.file_type().is_file() {
            std::fs::copy(entry.path(), &target)
                .map_err(|e| format!("cannot copy {}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::PathMap;

    #[test]
    fn paths_are_mapped_where_they_stand_as_paths() {
        let map = PathMap(vec![
            ("/home/user".into(), "/t/home".into()),
            ("/project".into(), "/t/project".into()),
        ]);
        assert_eq!(map.text("/project/sub").as_deref(), Some("/t/project/sub"));
        assert_eq!(map.text("/project").as_deref(), Some("/t/project"));
        assert_eq!(
            map.text("cd /project && ls /home/user/x").as_deref(),
            Some("cd /t/project && ls /t/home/x")
        );
        assert_eq!(map.text("/projects/a"), None);
        assert_eq!(
            map.text("/home/user/project"),
            Some("/t/home/project".into())
        );
        assert_eq!(map.text("a/project"), None);
    }
}
