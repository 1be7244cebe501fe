//! The session transcripts of a project, decided from directory entries and `stat` alone.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One `<session-uuid>.jsonl` directly in a transcripts dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFile {
    pub id: String,
    pub path: PathBuf,
    pub modified: SystemTime,
    pub bytes: u64,
}

/// Sessions whose transcript changed after `since` (all of them when `None`), leaving out
/// `exclude`, oldest first. A missing directory holds no sessions; an unreadable one is an
/// error. No transcript is opened.
pub fn sessions_touched_since(
    dir: &Path,
    since: Option<SystemTime>,
    exclude: Option<&str>,
) -> std::io::Result<Vec<SessionFile>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut sessions = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
            continue;
        };
        if !is_session_id(id) || exclude == Some(id) {
            continue;
        }
        let path = entry.path();
        // Follows a symlinked transcript, as Claude Code's stat does.
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            // Deleted between readdir and stat, or a dangling link.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if !meta.is_file() {
            continue;
        }
        let modified = meta.modified()?;
        if since.is_some_and(|since| modified <= since) {
            continue;
        }
        sessions.push(SessionFile {
            id: id.to_string(),
            path,
            modified,
            bytes: meta.len(),
        });
    }
    sessions.sort_by(|a, b| a.modified.cmp(&b.modified).then_with(|| a.id.cmp(&b.id)));
    Ok(sessions)
}

/// A UUID in its 8-4-4-4-12 hexadecimal form, any case.
pub fn is_session_id(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const A: &str = "854ac185-82c5-458b-8010-937270238761";
    const B: &str = "00000000-0000-4000-8000-000000000002";
    const C: &str = "00000000-0000-4000-8000-00000000000C";

    fn touch(path: &Path, at: SystemTime) {
        let f = std::fs::File::create(path).unwrap();
        f.set_modified(at).unwrap();
    }

    #[test]
    fn ids() {
        assert!(is_session_id(A));
        assert!(is_session_id(C));
        assert!(!is_session_id("agent-123"));
        assert!(!is_session_id("854ac185-82c5-458b-8010-93727023876"));
        assert!(!is_session_id("854ac185x82c5-458b-8010-937270238761"));
    }

    #[test]
    fn filters_sorts_and_excludes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let base = SystemTime::now() - Duration::from_secs(10_000);
        touch(&dir.join(format!("{A}.jsonl")), base + Duration::from_secs(300));
        touch(&dir.join(format!("{B}.jsonl")), base + Duration::from_secs(100));
        touch(&dir.join(format!("{C}.jsonl")), base + Duration::from_secs(200));
        touch(&dir.join("notes.jsonl"), base + Duration::from_secs(400));
        touch(&dir.join(format!("{A}.json")), base + Duration::from_secs(400));
        std::fs::create_dir(dir.join(format!("00000000-0000-4000-8000-00000000000d.jsonl")))
            .unwrap();
        std::os::unix::fs::symlink("/nonexistent", dir.join(format!("{}.jsonl", &A.replace('8', "9")))).unwrap();

        let all = sessions_touched_since(dir, None, None).unwrap();
        let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, [B, C, A]);

        let since = sessions_touched_since(dir, Some(base + Duration::from_secs(100)), Some(A)).unwrap();
        let ids: Vec<&str> = since.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, [C]);
        assert_eq!(since[0].bytes, 0);
        assert_eq!(since[0].path, dir.join(format!("{C}.jsonl")));
    }

    #[test]
    fn missing_dir_is_empty() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(sessions_touched_since(&tmp.path().join("nope"), None, None)
            .unwrap()
            .is_empty());
        let file = tmp.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(sessions_touched_since(&file, None, None).is_err());
    }
}
