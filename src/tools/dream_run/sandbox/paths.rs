//! Path policy: where the model may write (`*.md` strictly inside the memory dir, no symlink,
//! no forbidden segment) and what it may read (anything whose real path is inside a root).

use std::path::{Component, Path, PathBuf};

use super::Sandbox;

/// Longest path string any tool accepts.
pub(super) const MAX_PATH_BYTES: usize = 4096;

/// Segments (compared ignoring ASCII case) that no written path may contain: places where a
/// file would be executed or trusted by some tool (git hooks, editor and agent config).
pub(super) const FORBIDDEN_SEGMENTS: &[&str] = &[
    ".git",
    "hooks",
    ".husky",
    ".githooks",
    "node_modules",
    ".vscode",
    ".idea",
    "config",
    "objects",
    "refs",
    ".claude",
    "skills",
    "commands",
    "agents",
    ".cargo",
    ".devcontainer",
    ".yarn",
    ".mvn",
];

/// A memory file a write/edit/delete may touch.
#[derive(Debug, Clone)]
pub(super) struct WriteTarget {
    /// Canonical memory dir joined with the checked relative path.
    pub path: PathBuf,
    /// The relative path inside the memory dir (what messages show).
    pub relative: PathBuf,
    /// The target's metadata when it exists (then it is a regular file).
    pub existing: Option<std::fs::Metadata>,
    /// Directories between the memory dir and the file that do not exist yet, outermost first.
    pub missing_dirs: Vec<PathBuf>,
}

/// Basic checks on any path string the model sends.
fn check_text(raw: &str) -> Result<(), String> {
    if raw.is_empty() {
        return Err("the path is empty".into());
    }
    if raw.len() > MAX_PATH_BYTES {
        return Err(format!("the path is longer than {MAX_PATH_BYTES} bytes"));
    }
    if raw.chars().any(char::is_control) {
        return Err("the path contains a control character (NUL, newline, ...)".into());
    }
    Ok(())
}

/// The relative path inside the memory dir that `raw` names, checked lexically: absolute paths
/// must start with the memory dir (either spelling), and no `..` may appear anywhere.
fn lexical_relative(sandbox: &Sandbox, raw: &str) -> Result<PathBuf, String> {
    let unaliased = sandbox.unalias(raw);
    let path = Path::new(unaliased.as_ref());
    let rest = if path.is_absolute() {
        if let Ok(rest) = path.strip_prefix(&sandbox.memory_dir) {
            rest
        } else if let Ok(rest) = path.strip_prefix(&sandbox.memory_dir_given) {
            rest
        } else {
            return Err(format!(
                "{raw} is outside the memory directory {}; memory files can only be written there",
                sandbox.memory_dir.display()
            ));
        }
    } else {
        path
    };
    let mut relative = PathBuf::new();
    for component in rest.components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(format!(
                    "{raw}: `..` is not allowed in a memory file path; name the file relative to the memory directory"
                ))
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("{raw} is not inside the memory directory"))
            }
        }
    }
    if relative.as_os_str().is_empty() {
        return Err(format!(
            "{raw} names the memory directory itself, not a .md file"
        ));
    }
    Ok(relative)
}

/// Checks a path for write/edit/delete: lexical rules, the `.md` rule, forbidden segments, and
/// on disk: no symlink on any component (the file included), directories on the way, a regular
/// file when it exists.
pub(super) fn write_target(sandbox: &Sandbox, raw: &str) -> Result<WriteTarget, String> {
    check_text(raw)?;
    let relative = lexical_relative(sandbox, raw)?;
    for part in &relative {
        let lower = part.to_string_lossy().to_ascii_lowercase();
        if FORBIDDEN_SEGMENTS.contains(&lower.as_str()) {
            return Err(format!(
                "{raw}: memory files may not live under `{}` (forbidden: {})",
                part.to_string_lossy(),
                FORBIDDEN_SEGMENTS.join(" ")
            ));
        }
    }
    let name = relative
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !name.ends_with(".md") || name.len() <= ".md".len() {
        return Err(format!(
            "{raw}: only .md files can be written, edited or deleted"
        ));
    }
    // Walk the components on disk from the canonical memory dir, never following a link.
    let mut current = sandbox.memory_dir.clone();
    let mut missing_dirs = Vec::new();
    let mut existing = None;
    let parts: Vec<_> = relative.iter().collect();
    for (index, part) in parts.iter().enumerate() {
        current.push(part);
        let last = index + 1 == parts.len();
        if !missing_dirs.is_empty() {
            // Everything below a missing directory is missing too.
            if !last {
                missing_dirs.push(current.clone());
            }
            continue;
        }
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(format!(
                    "{raw}: {} is a symbolic link; memory files are never written through links",
                    current.display()
                ))
            }
            Ok(meta) if !last && !meta.is_dir() => {
                return Err(format!("{raw}: {} is not a directory", current.display()))
            }
            Ok(meta) if last && !meta.is_file() => {
                return Err(format!(
                    "{raw} exists and is not a regular file; only regular .md files can be changed"
                ))
            }
            Ok(meta) => {
                if last {
                    existing = Some(meta);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !last {
                    missing_dirs.push(current.clone());
                }
            }
            Err(e) => return Err(format!("{raw}: cannot inspect {}: {e}", current.display())),
        }
    }
    Ok(WriteTarget {
        path: current,
        relative,
        existing,
        missing_dirs,
    })
}

/// Creates the missing directories of a target one level at a time, refusing if anything
/// appeared in their place meanwhile (a link would be followed by a later step).
pub(super) fn create_missing_dirs(target: &WriteTarget, private: bool) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    for dir in &target.missing_dirs {
        let mode = if private { 0o700 } else { 0o755 };
        match std::fs::DirBuilder::new().mode(mode).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
        }
        match std::fs::symlink_metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            _ => return Err(format!("{} is not a plain directory", dir.display())),
        }
    }
    Ok(())
}

/// Resolves a path for reading: relative to the memory dir, symlinks followed, and the real
/// path must be inside a readable root.
pub(super) fn read_target(sandbox: &Sandbox, raw: &str) -> Result<PathBuf, String> {
    check_text(raw)?;
    let joined = sandbox.memory_dir.join(sandbox.unalias(raw).as_ref());
    let canonical = match std::fs::canonicalize(&joined) {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{raw}: no such file or directory"))
        }
        Err(e) => return Err(format!("{raw}: {e}")),
    };
    sandbox.check_readable(raw, &canonical)?;
    Ok(canonical)
}

/// The refusal for a path whose real location is outside every root, naming the roots.
pub(super) fn outside_roots_message(sandbox: &Sandbox, raw: &str, canonical: &Path) -> String {
    let roots: Vec<String> = sandbox
        .roots
        .iter()
        .chain(&sandbox.files)
        .map(|r| r.display().to_string())
        .collect();
    let via = if Path::new(raw) != canonical {
        format!(" (it resolves to {})", canonical.display())
    } else {
        String::new()
    };
    format!(
        "{raw} is outside the readable directories{via}; allowed: {}",
        roots.join(", ")
    )
}
