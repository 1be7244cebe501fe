//! Where Claude Code keeps a project's files, and where dreamkit keeps its own state.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::settings::expand_memory_directory;
use super::{Env, HookPayload, Settings};
use crate::cli::output::path_lossy;
use crate::cli::{Context, Envelope, Failure, Input, LocationArgs};

/// Slugs longer than this are cut and given a hash suffix (Claude Code's rule).
pub const MAX_SLUG_LEN: usize = 200;

/// What the caller knows about the project; `None` fields are derived.
#[derive(Debug, Clone, Default)]
pub struct ProjectHints {
    /// The project directory. [`ProjectHints::gather`] leaves here only an existing directory,
    /// absolute and with symbolic links resolved (Claude Code names a project by its physical
    /// path); [`Project::resolve`] takes it as it is.
    pub cwd: Option<PathBuf>,
    pub memory_dir: Option<PathBuf>,
    pub transcripts_dir: Option<PathBuf>,
    /// A hook payload's `transcript_path`: its directory is the transcripts dir.
    pub transcript_path: Option<PathBuf>,
    /// The locations an envelope's `project` section names: never taken as they are (stdin
    /// must not widen what a stage reads or writes), only checked against what this stage's
    /// own rules give (see [`Project::resolve`]).
    pub claimed: ClaimedLocations,
}

/// Where a command works, as its flags and stdin name it: worked out once per command.
#[derive(Debug)]
pub struct Located {
    pub hints: ProjectHints,
    pub project: Project,
    pub settings: Settings,
}

impl Context {
    /// The project this command works on, from its location flags and stdin (a hook
    /// payload's `cwd` and `transcript_path`, an envelope's `project`), with the settings
    /// that apply there. Resolved when first asked for and kept: every later ask in the same
    /// command gets the same answer (or the same failure), without reading settings again.
    pub fn project(&self, location: &LocationArgs) -> Result<&Located, Failure> {
        self.project_once(|| {
            let (hints, _hook, _envelope) = ProjectHints::gather(location, self.input()?)?;
            let (project, settings) = Project::resolve(&hints, self.env())?;
            Ok(Located {
                hints,
                project,
                settings,
            })
        })
    }
}

/// An envelope's `project` locations, to be checked.
#[derive(Debug, Clone, Default)]
pub struct ClaimedLocations {
    pub memory_dir: Option<PathBuf>,
    pub transcripts_dir: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
}

impl ProjectHints {
    /// Flags first, then what stdin said: a hook payload's `cwd` and `transcript_path`, or an
    /// envelope's `project` section (then the same hook fields at its top level). Returns the
    /// hints, the hook fields (if stdin held any) and the envelope to build on (empty unless
    /// stdin held one). Every location is checked here, before anything is written: a project
    /// directory that does not exist, or a path dreamkit could not pass on exactly, is bad
    /// input.
    pub fn gather(
        location: &LocationArgs,
        input: Input,
    ) -> Result<(ProjectHints, Option<HookPayload>, Envelope), Failure> {
        let mut cwd = location.cwd.clone().map(|dir| ("--cwd", dir));
        let memory_dir = location.memory_dir.clone().map(|dir| ("--memory-dir", dir));
        let transcripts_dir = location
            .transcripts_dir
            .clone()
            .map(|dir| ("--transcripts-dir", dir));
        let mut claimed = ClaimedLocations::default();
        let (hook, envelope) = match input {
            Input::Nothing => (None, Envelope::new()),
            Input::Hook(map) => (Some(HookPayload::from_map(map)?), Envelope::new()),
            Input::Envelope(envelope) => {
                if let Some(p) = envelope.section::<ProjectSection>("project")? {
                    cwd = cwd.or(p.cwd.map(|dir| ("the envelope's project.cwd", dir)));
                    for (what, dir) in [
                        ("the envelope's project.memory_dir", &p.memory_dir),
                        ("the envelope's project.transcripts_dir", &p.transcripts_dir),
                        ("the envelope's project.state_dir", &p.state_dir),
                    ] {
                        if let Some(dir) = dir {
                            check_location(what, dir)?;
                        }
                    }
                    claimed = ClaimedLocations {
                        memory_dir: p.memory_dir,
                        transcripts_dir: p.transcripts_dir,
                        state_dir: p.state_dir,
                    };
                }
                (HookPayload::fields_of(&envelope)?, envelope)
            }
        };
        if let Some(payload) = &hook {
            cwd = cwd.or(payload
                .cwd
                .clone()
                .map(|dir| ("the hook payload's cwd", dir)));
        }
        let transcript_path = hook.as_ref().and_then(|p| p.transcript_path.clone());
        if let Some(path) = &transcript_path {
            check_location("the hook payload's transcript_path", path)?;
        }
        for (what, dir) in memory_dir.iter().chain(&transcripts_dir) {
            check_location(what, dir)?;
        }
        let hints = ProjectHints {
            cwd: match cwd {
                Some((what, dir)) => Some(project_dir(what, &dir)?),
                None => None,
            },
            memory_dir: memory_dir.map(|(_, dir)| dir),
            transcripts_dir: transcripts_dir.map(|(_, dir)| dir),
            transcript_path,
            claimed,
        };
        Ok((hints, hook, envelope))
    }
}

/// The most bytes in one path component: `NAME_MAX` of Linux's file systems.
pub const NAME_MAX: usize = 255;
/// The most bytes in a whole path: `PATH_MAX` less its terminating NUL.
pub const PATH_MAX: usize = 4095;

/// Refuses a location dreamkit could not use or pass on exactly: [`check_path`], and bytes that
/// are not UTF-8 (the JSON output would have to replace them, and the next stage would then act
/// on another path). Decided from the text alone, without a system call. `what` names where
/// the path came from.
pub fn check_location(what: &str, path: &Path) -> Result<(), Failure> {
    check_path(what, path)?;
    if path.to_str().is_none() {
        let why = "is not valid UTF-8, so the JSON output could not name it exactly";
        return Err(bad_path(what, path, why));
    }
    Ok(())
}

/// Refuses a path no system call could take: empty, with a NUL byte, with a component longer
/// than [`NAME_MAX`], or longer than [`PATH_MAX`] in all. Bad input (exit 2), not a failure of
/// the machine (exit 3), and found before anything is written.
pub fn check_path(what: &str, path: &Path) -> Result<(), Failure> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let why = if bytes.is_empty() {
        "is empty".to_string()
    } else if bytes.contains(&0) {
        "contains a NUL byte".to_string()
    } else if bytes.len() > PATH_MAX {
        format!("is longer than {PATH_MAX} bytes")
    } else if path.iter().any(|c| c.len() > NAME_MAX) {
        format!("has a name longer than {NAME_MAX} bytes")
    } else {
        return Ok(());
    };
    Err(bad_path(what, path, &why))
}

fn bad_path(what: &str, path: &Path, why: &str) -> Failure {
    Failure::BadInput {
        reason: Some("bad_path"),
        message: format!("{what} {path:?} {why}"),
    }
}

/// A project directory named by the caller: it must exist and be a directory. Returns it
/// absolute, `.` and `..` removed lexically (as a shell's `cd` does), then with symbolic links
/// resolved. One `realpath(3)`, the one resolving links needs anyway: the trailing `/` makes it
/// fail for anything but a directory.
pub fn project_dir(what: &str, dir: &Path) -> Result<PathBuf, Failure> {
    check_location(what, dir)?;
    let abs = if dir.is_absolute() {
        normalize(dir)
    } else {
        let process_cwd = std::env::current_dir()
            .map_err(|e| Failure::environment(format!("cannot read the current directory: {e}")))?;
        normalize(&process_cwd.join(dir))
    };
    match std::fs::canonicalize(abs.join("")) {
        Ok(real) => {
            check_location(what, &real)?;
            Ok(real)
        }
        Err(e) => {
            let why = match e.raw_os_error() {
                Some(libc::ENOENT) => "does not exist",
                Some(libc::ENOTDIR) => "is not a directory",
                Some(libc::ENAMETOOLONG) => "is too long for the file system",
                Some(libc::ELOOP) => "has a loop of symbolic links",
                // Permissions or I/O: the directory may well exist.
                _ => return Err(Failure::io("resolve", dir, &e)),
            };
            Err(bad_path(what, dir, why))
        }
    }
}

/// The part of an envelope's `project` section that names locations.
#[derive(Debug, Default, serde::Deserialize)]
struct ProjectSection {
    cwd: Option<PathBuf>,
    memory_dir: Option<PathBuf>,
    transcripts_dir: Option<PathBuf>,
    state_dir: Option<PathBuf>,
}

/// A resolved project: the envelope's `project` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Project {
    #[serde(serialize_with = "path_lossy")]
    pub cwd: PathBuf,
    pub slug: String,
    #[serde(serialize_with = "path_lossy")]
    pub transcripts_dir: PathBuf,
    #[serde(serialize_with = "path_lossy")]
    pub memory_dir: PathBuf,
    #[serde(serialize_with = "path_lossy")]
    pub state_dir: PathBuf,
    #[serde(skip)]
    pub config_dir: PathBuf,
}

impl Project {
    /// The envelope's `project` section.
    pub fn to_json(&self) -> Result<serde_json::Value, Failure> {
        serde_json::to_value(self)
            .map_err(|e| Failure::environment(format!("cannot serialise the project: {e}")))
    }

    /// Applies the location rules (SPEC §2 "Locations") and loads the merged settings. Every
    /// location derived here is checked like the hints ([`check_location`]; the variable it
    /// came from is named), so a path that cannot be printed exactly is refused, not mangled.
    pub fn resolve(hints: &ProjectHints, env: &Env) -> Result<(Project, Settings), Failure> {
        let process_cwd = std::env::current_dir()
            .map_err(|e| Failure::environment(format!("cannot read the current directory: {e}")))?;
        let cwd = match &hints.cwd {
            Some(dir) => normalize(&process_cwd.join(dir)),
            None => {
                check_location("the current directory", &process_cwd)?;
                process_cwd.clone()
            }
        };
        let home = home_dir(env);
        let config_dir = config_dir(env, home.as_deref())?;
        check_location(config_source(env), &config_dir)?;
        let settings = Settings::load(&config_dir, &cwd)?;
        let slug = slug(&cwd);

        let transcripts_dir = match (&hints.transcripts_dir, &hints.transcript_path) {
            (Some(dir), _) => normalize(&process_cwd.join(dir)),
            (None, Some(file)) if file.parent().is_some_and(std::path::Path::is_absolute) => {
                normalize(file.parent().unwrap_or(file))
            }
            _ => config_dir.join("projects").join(&slug),
        };
        check_location("the transcripts dir", &transcripts_dir)?;

        let (what, memory_dir) = if let Some(dir) = &hints.memory_dir {
            ("the memory dir", normalize(&process_cwd.join(dir)))
        } else if let Some(dir) = env.get("CLAUDE_COWORK_MEMORY_PATH_OVERRIDE") {
            (
                "CLAUDE_COWORK_MEMORY_PATH_OVERRIDE",
                normalize(&process_cwd.join(dir)),
            )
        } else if let Some(dir) = &settings.auto_memory_directory {
            (
                "autoMemoryDirectory",
                normalize(&expand_memory_directory(dir, home.as_deref())?),
            )
        } else {
            let (what, base) = match env.get("CLAUDE_CODE_REMOTE_MEMORY_DIR") {
                Some(dir) => ("CLAUDE_CODE_REMOTE_MEMORY_DIR", PathBuf::from(dir)),
                None => ("the memory dir", config_dir.clone()),
            };
            let root = git_root(&cwd).unwrap_or_else(|| cwd.clone());
            let dir = base.join("projects").join(self::slug(&root)).join("memory");
            (what, dir)
        };
        check_location(what, &memory_dir)?;

        let state_home = state_home(env, home.as_deref())?;
        let what = match env.get("XDG_STATE_HOME").map(Path::new) {
            Some(dir) if dir.is_absolute() => "XDG_STATE_HOME",
            _ => "HOME",
        };
        check_location(what, &state_home)?;
        let state_dir = state_home.join("dreamkit/projects").join(&slug);

        // An envelope's locations are accepted only when they are what this stage's own
        // flags, environment and settings give; a transcripts dir directly under
        // <config>/projects is a Claude Code one (a session started in a subdirectory, or
        // resumed elsewhere) and is used.
        let mismatch = |field: &str, claimed: &Path, own: &Path, flag: &str| {
            Failure::BadInput {
            reason: Some("project_mismatch"),
            message: format!(
                "the envelope's project.{field} {} is not this project's {} (give every stage the same {flag}, or let the environment decide)",
                claimed.display(),
                own.display()
            ),
        }
        };
        let claimed = &hints.claimed;
        if let Some(dir) = &claimed.memory_dir {
            if normalize(&process_cwd.join(dir)) != memory_dir {
                return Err(mismatch("memory_dir", dir, &memory_dir, "--memory-dir"));
            }
        }
        if let Some(dir) = &claimed.state_dir {
            if normalize(&process_cwd.join(dir)) != state_dir {
                return Err(mismatch("state_dir", dir, &state_dir, "XDG_STATE_HOME"));
            }
        }
        let mut transcripts_dir = transcripts_dir;
        if let Some(dir) = &claimed.transcripts_dir {
            let dir = normalize(&process_cwd.join(dir));
            if dir != transcripts_dir {
                let claude_code_own = dir.parent() == Some(config_dir.join("projects").as_path())
                    && hints.transcripts_dir.is_none();
                if !claude_code_own {
                    return Err(mismatch(
                        "transcripts_dir",
                        &dir,
                        &transcripts_dir,
                        "--transcripts-dir",
                    ));
                }
                transcripts_dir = dir;
            }
        }

        Ok((
            Project {
                cwd,
                slug,
                transcripts_dir,
                memory_dir,
                state_dir,
                config_dir,
            },
            settings,
        ))
    }
}

/// The variable the config dir came from, for messages.
pub fn config_source(env: &Env) -> &'static str {
    if env.get("CLAUDE_CONFIG_DIR").is_some() {
        "CLAUDE_CONFIG_DIR"
    } else {
        "HOME"
    }
}

/// `$HOME`, else the password database.
pub fn home_dir(env: &Env) -> Option<PathBuf> {
    env.get("HOME").map(PathBuf::from).or_else(|| {
        #[allow(deprecated)]
        std::env::home_dir()
    })
}

/// `$CLAUDE_CONFIG_DIR`, default `~/.claude`.
pub fn config_dir(env: &Env, home: Option<&Path>) -> Result<PathBuf, Failure> {
    if let Some(dir) = env.get("CLAUDE_CONFIG_DIR") {
        return Ok(PathBuf::from(dir));
    }
    home.map(|h| h.join(".claude")).ok_or_else(|| {
        Failure::environment(
            "cannot find the Claude config dir: neither CLAUDE_CONFIG_DIR nor HOME is set",
        )
    })
}

/// `$XDG_STATE_HOME` when absolute (the XDG spec says to ignore a relative one), else
/// `~/.local/state`.
pub fn state_home(env: &Env, home: Option<&Path>) -> Result<PathBuf, Failure> {
    if let Some(dir) = env.get("XDG_STATE_HOME").map(PathBuf::from) {
        if dir.is_absolute() {
            return Ok(dir);
        }
    }
    home.map(|h| h.join(".local/state")).ok_or_else(|| {
        Failure::environment("cannot find the state dir: neither XDG_STATE_HOME nor HOME is set")
    })
}

/// Claude Code's project slug: each UTF-16 code unit that is not ASCII alphanumeric becomes
/// `-`; past 200 units the slug is cut and suffixed with `-` and a base-36 hash of the path.
pub fn slug(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut slug = String::with_capacity(text.len());
    for unit in text.encode_utf16() {
        match u8::try_from(unit) {
            Ok(b) if b.is_ascii_alphanumeric() => slug.push(char::from(b)),
            _ => slug.push('-'),
        }
    }
    if slug.len() <= MAX_SLUG_LEN {
        return slug;
    }
    slug.truncate(MAX_SLUG_LEN);
    slug.push('-');
    slug.push_str(&base36(i64::from(java_hash(&text)).unsigned_abs()));
    slug
}

/// Java's `String.hashCode` over UTF-16 units: `h = 31 * h + unit`, wrapping at 32 bits.
fn java_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// The top of the git work tree holding `dir`, found by looking for `.git` upwards (no git
/// process is started: this runs on every turn). A linked worktree resolves to its main
/// repository, so all worktrees of a repository share one memory, as in Claude Code.
pub fn git_root(dir: &Path) -> Option<PathBuf> {
    // One lstat per level; the usual `.git` directory needs nothing more.
    let (top, meta) = dir
        .ancestors()
        .find_map(|d| Some((d, d.join(".git").symlink_metadata().ok()?)))?;
    let dot_git = top.join(".git");
    if meta.is_dir() || (meta.file_type().is_symlink() && dot_git.is_dir()) {
        return Some(top.to_path_buf());
    }
    Some(worktree_main_root(top, &dot_git).unwrap_or_else(|| top.to_path_buf()))
}

/// `.git` file `gitdir: <dir>`; `<dir>/commondir` names the main `.git` of a worktree.
fn worktree_main_root(top: &Path, dot_git: &Path) -> Option<PathBuf> {
    // One path each: a larger file is no worktree link, and is not read whole.
    const MAX_LINK_BYTES: u64 = 64 * 1024;
    // Regular files only: a FIFO named `.git` must not hang the gate.
    let text = crate::files::read_regular_capped_to_string(dot_git, MAX_LINK_BYTES).ok()?;
    let gitdir = top.join(text.trim().strip_prefix("gitdir:")?.trim());
    let common =
        crate::files::read_regular_capped_to_string(&gitdir.join("commondir"), MAX_LINK_BYTES)
            .ok()?;
    let common = normalize(&gitdir.join(common.trim()));
    if common.file_name()? == ".git" {
        common.parent().map(Path::to_path_buf)
    } else {
        None
    }
}

/// Removes `.` and resolves `..` lexically (the path may not exist yet).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            // `..` of the root is the root; of a relative start it is kept.
            Component::ParentDir => {
                if !out.pop() && !out.has_root() {
                    out.push(component);
                }
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(OsString::from("."));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slug_replaces_every_non_alphanumeric() {
        assert_eq!(slug(Path::new("/home/a/my.proj")), "-home-a-my-proj");
        assert_eq!(slug(Path::new("/tmp/x_y z")), "-tmp-x-y-z");
        // é is one UTF-16 unit, 😀 is two.
        assert_eq!(slug(Path::new("/é/😀")), "-----");
    }

    #[test]
    fn java_hash_matches_known_values() {
        // Values of String.hashCode in Java.
        assert_eq!(java_hash(""), 0);
        assert_eq!(java_hash("a"), 97);
        assert_eq!(java_hash("hello"), 99_162_322);
        assert_eq!(java_hash("polygenelubricants"), i32::MIN);
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36), "10");
        // |i32::MIN| does not fit an i32; JavaScript's Math.abs gives 2147483648.
        assert_eq!(base36(i64::from(i32::MIN).unsigned_abs()), "zik0zk");
    }

    #[test]
    fn long_paths_are_cut_and_hashed() {
        let long = format!("/{}", "abcdefghij/".repeat(25));
        let path = Path::new(&long);
        let s = slug(path);
        let expected_hash = base36(i64::from(java_hash(&long)).unsigned_abs());
        assert_eq!(s.len(), 200 + 1 + expected_hash.len());
        assert_eq!(&s[..12], "-abcdefghij-");
        assert_eq!(s[200..], format!("-{expected_hash}"));
        // 200 exactly is not cut.
        let exact = format!("/{}", "a".repeat(199));
        assert_eq!(slug(Path::new(&exact)).len(), 200);
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/./b/../c/")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/..")), PathBuf::from("/"));
    }

    #[test]
    fn git_root_finds_repo_and_worktree_main() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join(".git/worktrees/wt")).unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        assert_eq!(git_root(&repo.join("src/deep")), Some(repo.clone()));

        let wt = tmp.path().join("wt");
        std::fs::create_dir_all(wt.join("sub")).unwrap();
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", repo.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        std::fs::write(repo.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        assert_eq!(git_root(&wt.join("sub")), Some(repo.clone()));

        // A .git symlink to a directory is a repository too.
        let linked = tmp.path().join("linked");
        std::fs::create_dir_all(linked.join("sub")).unwrap();
        std::os::unix::fs::symlink(repo.join(".git"), linked.join(".git")).unwrap();
        assert_eq!(git_root(&linked.join("sub")), Some(linked.clone()));

        // A submodule-style .git file without commondir stays where it is.
        let sm = tmp.path().join("sm");
        std::fs::create_dir_all(&sm).unwrap();
        std::fs::write(sm.join(".git"), "gitdir: ../repo/.git/modules/sm\n").unwrap();
        assert_eq!(git_root(&sm), Some(sm.clone()));
    }

    #[test]
    fn locations_that_cannot_be_used_or_printed_exactly_are_bad_input() {
        use std::os::unix::ffi::OsStrExt;
        let ok = format!("/{}/{}", "a".repeat(NAME_MAX), "b".repeat(NAME_MAX));
        assert!(check_location("x", Path::new(&ok)).is_ok());
        let cases: [(&[u8], &str); 5] = [
            (b"", "is empty"),
            (b"/a\0b", "NUL"),
            (b"/caf\xe9", "UTF-8"),
            (&[b'a'; NAME_MAX + 1], "longer than 255"),
            (&[b'/'; PATH_MAX + 1], "longer than 4095"),
        ];
        for (bytes, why) in cases {
            let path = Path::new(std::ffi::OsStr::from_bytes(bytes));
            let err = check_location("--cwd", path).unwrap_err();
            assert_eq!(err.kind(), "bad_input");
            assert_eq!(err.reason(), Some("bad_path"));
            let message = err.to_string();
            assert!(
                message.starts_with("--cwd ") && message.contains(why),
                "{message}"
            );
        }
        // Not UTF-8 is fine where the path is never printed.
        assert!(check_path("x", Path::new(std::ffi::OsStr::from_bytes(b"/caf\xe9"))).is_ok());
    }

    #[test]
    fn the_context_resolves_the_project_once_and_keeps_it() {
        use crate::cli::{CommonArgs, Diag};
        let tmp = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(tmp.path()).unwrap();
        let project_dir = dir.join("proj");
        std::fs::create_dir(&project_dir).unwrap();
        let home = dir.join("home").display().to_string();
        let cx = Context::with_stdin(
            Diag::new("test", true, false),
            CommonArgs::default(),
            Env::from_pairs([("HOME", home.as_str())]),
            None,
            Ok(Some(
                format!(r#"{{"cwd": "{}"}}"#, project_dir.display()).into_bytes(),
            )),
        );
        let first = cx.project(&LocationArgs::default()).unwrap();
        assert_eq!(first.project.cwd, project_dir);
        assert_eq!(first.hints.cwd.as_deref(), Some(project_dir.as_path()));
        // Later asks get the same value, even with other flags: one command, one project.
        let other = LocationArgs {
            cwd: Some(dir.clone()),
            ..LocationArgs::default()
        };
        let again = cx.project(&other).unwrap();
        assert!(std::ptr::eq(first, again));

        // A failure is kept too: asking again does not resolve again.
        let cx = Context::with_stdin(
            Diag::new("test", true, false),
            CommonArgs::default(),
            Env::from_pairs([("HOME", home.as_str())]),
            None,
            Ok(None),
        );
        let missing = LocationArgs {
            cwd: Some(dir.join("missing")),
            ..LocationArgs::default()
        };
        let failure = cx.project(&missing).unwrap_err();
        assert_eq!(failure.exit(), crate::cli::Exit::Usage);
        let fine = LocationArgs {
            cwd: Some(project_dir.clone()),
            ..LocationArgs::default()
        };
        assert_eq!(
            cx.project(&fine).unwrap_err().to_string(),
            failure.to_string()
        );
    }

    #[test]
    fn a_project_dir_must_be_an_existing_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let tmp = std::fs::canonicalize(tmp.path()).unwrap();
        let dir = tmp.join("proj");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(tmp.join("file"), "").unwrap();
        std::os::unix::fs::symlink(&dir, tmp.join("link")).unwrap();
        std::os::unix::fs::symlink(tmp.join("file"), tmp.join("file-link")).unwrap();
        assert_eq!(project_dir("x", &dir).unwrap(), dir);
        assert_eq!(project_dir("x", &tmp.join("link")).unwrap(), dir);
        assert_eq!(project_dir("x", &tmp.join("link/../proj/.")).unwrap(), dir);
        for (path, why) in [
            (tmp.join("missing"), "does not exist"),
            (tmp.join("file"), "is not a directory"),
            (tmp.join("file-link"), "is not a directory"),
        ] {
            let err = project_dir("--cwd", &path).unwrap_err();
            assert_eq!(err.kind(), "bad_input", "{err}");
            assert!(err.to_string().contains(why), "{err}");
        }
    }

    fn resolve_in(tmp: &Path, pairs: &[(&str, &str)], hints: ProjectHints) -> Project {
        let home = tmp.join("home").display().to_string();
        let mut all = vec![("HOME", home.as_str())];
        all.extend_from_slice(pairs);
        Project::resolve(&hints, &Env::from_pairs(all)).unwrap().0
    }

    #[test]
    fn default_locations() {
        let tmp = tempfile::tempdir().unwrap();
        let tmp = std::fs::canonicalize(tmp.path()).unwrap();
        let proj = tmp.join("proj");
        std::fs::create_dir_all(proj.join(".git")).unwrap();
        std::fs::create_dir_all(proj.join("sub")).unwrap();
        let p = resolve_in(
            &tmp,
            &[],
            ProjectHints {
                cwd: Some(proj.join("sub")),
                ..Default::default()
            },
        );
        let home = tmp.join("home");
        assert_eq!(p.cwd, proj.join("sub"));
        assert_eq!(p.slug, slug(&proj.join("sub")));
        assert_eq!(p.config_dir, home.join(".claude"));
        // Transcripts under the launch directory's slug, memory under the git root's.
        assert_eq!(
            p.transcripts_dir,
            home.join(".claude/projects").join(slug(&proj.join("sub")))
        );
        assert_eq!(
            p.memory_dir,
            home.join(".claude/projects")
                .join(slug(&proj))
                .join("memory")
        );
        assert_eq!(
            p.state_dir,
            home.join(".local/state/dreamkit/projects").join(&p.slug)
        );
    }

    #[test]
    fn overrides_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let tmp = std::fs::canonicalize(tmp.path()).unwrap();
        let proj = tmp.join("proj");
        std::fs::create_dir_all(proj.join(".claude")).unwrap();
        std::fs::write(
            proj.join(".claude/settings.local.json"),
            r#"{"autoMemoryDirectory":"~/mem"}"#,
        )
        .unwrap();
        let hints = ProjectHints {
            cwd: Some(proj.clone()),
            ..Default::default()
        };
        let cfg = tmp.join("cfg").display().to_string();
        let state = tmp.join("state").display().to_string();
        let p = resolve_in(
            &tmp,
            &[("CLAUDE_CONFIG_DIR", &cfg), ("XDG_STATE_HOME", &state)],
            hints.clone(),
        );
        assert_eq!(p.memory_dir, tmp.join("home/mem"));
        assert_eq!(p.transcripts_dir, tmp.join("cfg/projects").join(&p.slug));
        assert!(p.state_dir.starts_with(tmp.join("state/dreamkit/projects")));

        let p = resolve_in(
            &tmp,
            &[
                ("CLAUDE_COWORK_MEMORY_PATH_OVERRIDE", "/cowork/mem"),
                ("XDG_STATE_HOME", "rel"),
            ],
            hints.clone(),
        );
        assert_eq!(p.memory_dir, PathBuf::from("/cowork/mem"));
        // A relative XDG_STATE_HOME is ignored.
        assert!(p.state_dir.starts_with(tmp.join("home/.local/state")));

        let p = resolve_in(
            &tmp,
            &[("CLAUDE_COWORK_MEMORY_PATH_OVERRIDE", "/cowork/mem")],
            ProjectHints {
                memory_dir: Some("/flag/mem/".into()),
                transcripts_dir: Some("/flag/tr".into()),
                transcript_path: Some("/ignored/x.jsonl".into()),
                ..hints.clone()
            },
        );
        assert_eq!(p.memory_dir, PathBuf::from("/flag/mem"));
        assert_eq!(p.transcripts_dir, PathBuf::from("/flag/tr"));

        let p = resolve_in(
            &tmp,
            &[],
            ProjectHints {
                transcript_path: Some("/cc/projects/-x/abc.jsonl".into()),
                ..hints
            },
        );
        assert_eq!(p.transcripts_dir, PathBuf::from("/cc/projects/-x"));
    }
}
