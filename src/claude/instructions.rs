//! The CLAUDE.md files a session loads: the user's (`<config dir>/CLAUDE.md`), and in the
//! session's working directory and each folder above it `CLAUDE.md`, `CLAUDE.local.md` and
//! `.claude/CLAUDE.md`. A consolidation reads them (never writes them): memory must not repeat
//! them, and where they disagree one of the two is stale.

use std::path::{Path, PathBuf};

use super::transcript::{ForwardReader, Records};

/// The names looked for in a working directory and in each folder above it.
const NAMES: &[&str] = &["CLAUDE.md", "CLAUDE.local.md", ".claude/CLAUDE.md"];

/// How many records of a transcript are read for its working directory: the client writes
/// `cwd` on its first records, so a transcript without one near its start has none to give.
const CWD_RECORDS: usize = 50;

/// Every CLAUDE.md file (regular files only, each once, in a stable order: the user's first,
/// then per working directory from the root down) that sessions started in `cwds` load.
pub fn files(cwds: &[PathBuf], config_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut add = |path: PathBuf| {
        let regular = std::fs::metadata(&path).is_ok_and(|m| m.is_file());
        if regular && !found.contains(&path) {
            found.push(path);
        }
    };
    add(config_dir.join("CLAUDE.md"));
    for cwd in cwds {
        let mut folders: Vec<&Path> = cwd.ancestors().collect();
        folders.reverse();
        for folder in folders {
            for name in NAMES {
                add(folder.join(name));
            }
        }
    }
    found
}

/// The working directory a session ran in, from the first of its transcript's records that
/// names one (an absolute path to an existing folder), or `None`.
pub fn session_cwd(transcript: &Path) -> Option<PathBuf> {
    fn names_cwd(line: &[u8]) -> bool {
        memchr::memmem::find(line, b"\"cwd\"").is_some()
    }
    ForwardReader::open(transcript)
        .ok()?
        .only_lines(names_cwd)
        .records()
        .take(CWD_RECORDS)
        .filter_map(Result::ok)
        .find_map(|record| record.cwd)
        .map(PathBuf::from)
        .filter(|cwd| cwd.is_absolute() && cwd.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_users_and_every_folder_up_from_the_working_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let config = root.join("home/.claude");
        let project = root.join("work/proj");
        let sub = project.join("sub");
        for dir in [&config, &sub, &project.join(".claude")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        for file in [
            config.join("CLAUDE.md"),
            root.join("work/CLAUDE.md"),
            project.join("CLAUDE.md"),
            project.join("CLAUDE.local.md"),
            project.join(".claude/CLAUDE.md"),
            sub.join("CLAUDE.md"),
        ] {
            std::fs::write(file, "x").unwrap();
        }
        // A folder named like a file is not one.
        std::fs::create_dir(root.join("work/CLAUDE.local.md")).unwrap();
        let found = files(&[project.clone(), sub.clone(), project.clone()], &config);
        assert_eq!(
            found,
            vec![
                config.join("CLAUDE.md"),
                root.join("work/CLAUDE.md"),
                project.join("CLAUDE.md"),
                project.join("CLAUDE.local.md"),
                project.join(".claude/CLAUDE.md"),
                sub.join("CLAUDE.md"),
            ]
        );
        assert!(files(&[], &root.join("nowhere")).is_empty());
    }

    #[test]
    fn a_sessions_cwd_is_read_from_its_first_records() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().display().to_string();
        let transcript = tmp.path().join("s.jsonl");
        std::fs::write(
            &transcript,
            format!(
                "{{\"type\":\"summary\"}}\nnot json\n{{\"type\":\"user\",\"cwd\":\"{dir}\"}}\n"
            ),
        )
        .unwrap();
        assert_eq!(session_cwd(&transcript), Some(tmp.path().to_path_buf()));
        // Relative, missing or absent: none.
        for line in [
            "{\"type\":\"user\",\"cwd\":\"rel/dir\"}",
            "{\"type\":\"user\",\"cwd\":\"/no/such/dir/anywhere\"}",
            "{\"type\":\"user\"}",
        ] {
            std::fs::write(&transcript, line).unwrap();
            assert_eq!(session_cwd(&transcript), None, "{line}");
        }
        assert_eq!(session_cwd(&tmp.path().join("missing.jsonl")), None);
    }
}
