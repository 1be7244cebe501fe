//! The session transcripts of a project, decided from directory entries and `stat` alone.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::cli::time::rfc3339;
use crate::files::is_unresolvable;

/// One `<session-uuid>.jsonl` directly in a transcripts dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFile {
    pub id: String,
    pub path: PathBuf,
    pub modified: SystemTime,
    pub bytes: u64,
}

/// `{id, path, modified_at, bytes}`, as listed in `gate.sessions`.
impl Serialize for SessionFile {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("path", &self.path.to_string_lossy())?;
        map.serialize_entry("modified_at", &rfc3339(self.modified))?;
        map.serialize_entry("bytes", &self.bytes)?;
        map.end()
    }
}

impl schemars::JsonSchema for SessionFile {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SessionFile".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "path": {"type": "string"},
                "modified_at": {"type": "string", "format": "date-time"},
                "bytes": {"type": "integer", "minimum": 0}
            },
            "required": ["id", "path", "modified_at", "bytes"]
        })
    }
}

/// Directories with more candidate transcripts than this are stat'ed on several threads:
/// the kernel's per-file lookup is the whole cost of a large scan, and it runs in parallel.
const PARALLEL_STAT_THRESHOLD: usize = 2048;

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
    let mut candidates: Vec<(String, std::fs::DirEntry)> = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
            continue;
        };
        if is_session_id(id) && exclude != Some(id) {
            candidates.push((id.to_string(), entry));
        }
    }

    let stated =
        crate::parallel::map_from(PARALLEL_STAT_THRESHOLD + 1, &candidates, |(id, entry)| {
            stat_newer(id, entry, since)
        });
    let mut sessions = Vec::with_capacity(stated.len());
    for session in stated {
        sessions.extend(session?);
    }
    // Ids are unique, so an unstable sort gives one order.
    sessions.sort_unstable_by(|a, b| a.modified.cmp(&b.modified).then_with(|| a.id.cmp(&b.id)));
    Ok(sessions)
}

/// The candidate's session when it is a regular file changed after `since`.
fn stat_newer(
    id: &str,
    entry: &std::fs::DirEntry,
    since: Option<SystemTime>,
) -> std::io::Result<Option<SessionFile>> {
    // `DirEntry::metadata` stats relative to the open directory (no path walk per file), but
    // does not follow links: a symlinked transcript is followed like Claude Code's stat.
    let meta = match entry.metadata() {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::metadata(entry.path()),
        other => other,
    };
    let meta = match meta {
        Ok(meta) => meta,
        // Deleted between readdir and stat, a dangling link or a symlink loop: not a
        // transcript, like a FIFO or a directory below.
        Err(e) if is_unresolvable(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    if !meta.is_file() {
        return Ok(None);
    }
    let modified = meta.modified()?;
    if since.is_some_and(|since| modified <= since) {
        return Ok(None);
    }
    Ok(Some(SessionFile {
        id: id.to_string(),
        path: entry.path(),
        modified,
        bytes: meta.len(),
    }))
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
        touch(
            &dir.join(format!("{A}.jsonl")),
            base + Duration::from_secs(300),
        );
        touch(
            &dir.join(format!("{B}.jsonl")),
            base + Duration::from_secs(100),
        );
        touch(
            &dir.join(format!("{C}.jsonl")),
            base + Duration::from_secs(200),
        );
        touch(&dir.join("notes.jsonl"), base + Duration::from_secs(400));
        touch(
            &dir.join(format!("{A}.json")),
            base + Duration::from_secs(400),
        );
        std::fs::create_dir(dir.join("00000000-0000-4000-8000-00000000000d.jsonl")).unwrap();
        std::os::unix::fs::symlink(
            "/nonexistent",
            dir.join(format!("{}.jsonl", &A.replace('8', "9"))),
        )
        .unwrap();
        // A symlink loop and a link to a device are skipped like the dangling link.
        let looped = dir.join(format!("{}.jsonl", &A.replace('8', "7")));
        std::os::unix::fs::symlink(&looped, &looped).unwrap();
        std::os::unix::fs::symlink(
            "/dev/zero",
            dir.join(format!("{}.jsonl", &A.replace('8', "6"))),
        )
        .unwrap();

        let all = sessions_touched_since(dir, None, None).unwrap();
        let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, [B, C, A]);

        let since =
            sessions_touched_since(dir, Some(base + Duration::from_secs(100)), Some(A)).unwrap();
        let ids: Vec<&str> = since.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, [C]);
        assert_eq!(since[0].bytes, 0);
        assert_eq!(since[0].path, dir.join(format!("{C}.jsonl")));
    }

    #[test]
    fn large_directories_are_stated_in_parallel_with_the_same_result() {
        let tmp = tempfile::tempdir().unwrap();
        let base = SystemTime::now() - Duration::from_secs(100_000);
        let n = PARALLEL_STAT_THRESHOLD as u64 + 501;
        for i in 0..n {
            let id = format!("00000000-0000-4000-8000-{i:012x}");
            // Reverse order of mtimes, so the sort is exercised across chunks.
            touch(
                &tmp.path().join(format!("{id}.jsonl")),
                base + Duration::from_secs(n - i),
            );
        }
        let since = Some(base + Duration::from_secs(10));
        let all = sessions_touched_since(tmp.path(), since, None).unwrap();
        assert_eq!(all.len() as u64, n - 10);
        assert!(all.windows(2).all(|w| w[0].modified < w[1].modified));
        assert_eq!(
            all[0].id,
            format!("00000000-0000-4000-8000-{:012x}", n - 11)
        );
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
