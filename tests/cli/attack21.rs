//! Attacks on the day's new features: the OpenAI provider (response_format detection, the
//! extra body, weak-model answers), the dry runs of `dream-lock release` and `recap`, and
//! `dream-run check` on hostile memory dirs. Only what broke is kept here.

use std::time::Duration;

use crate::support::{ClaudeHome, Run};

/// Every entry under `root`: path, kind, mode, mtime (ns) and a file's bytes.
fn snapshot(root: &std::path::Path) -> Vec<(String, String, u32, i128, Vec<u8>)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .flatten()
    {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(path).unwrap();
        let kind = format!("{:?}", meta.file_type());
        let bytes = if meta.is_file() {
            std::fs::read(path).unwrap_or_default()
        } else {
            Vec::new()
        };
        let mtime = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
        out.push((
            path.display().to_string(),
            if meta.is_dir() { "dir".into() } else { kind },
            meta.mode(),
            if meta.is_dir() { 0 } else { mtime },
            bytes,
        ));
    }
    out.sort();
    out
}

fn lock_cmd<'a>(home: &ClaudeHome, args: &[&str], stdin: &str) -> Run<'a> {
    Run::new(home, "dream-lock")
        .args(args)
        .stdin(stdin)
        .timeout(Duration::from_secs(30))
}

#[test]
fn release_dry_run_by_hand_creates_no_memory_dir_and_no_guard() {
    let home = ClaudeHome::new();
    let before = snapshot(&home.root);
    for args in [
        &["release", "--dry-run", "--token", "1:2"][..],
        &["release", "--dry-run", "--force", "--token", "1:2"][..],
    ] {
        lock_cmd(&home, args, "")
            .code(1)
            .stdout_json(|doc| {
                assert_eq!(doc["lock"]["reason"], "not_holder");
                assert_eq!(doc["lock"]["released"], false);
                assert_eq!(doc["lock"]["dry_run"], true);
            })
            .stderr_is(
                "dream-lock: dry run: would not release: the lock is no longer ours \
                 (taken over, or released already)\n",
            )
            .run();
        assert_eq!(snapshot(&home.root), before, "{args:?} changed the disk");
    }
    assert!(!home.memory_dir().exists());
}
