//! What a run changed, as a person reads it: unified diffs of the snapshot's copies against
//! the files now, for `show --diff`, the task record and `run.diff_text`.

use std::path::Path;

use super::check::{SecretLines, SECRET_LINE};
use crate::store::{current_content, Diff, Snapshot};

/// One file's unified diff, `--- a/<rel>` / `+++ b/<rel>` as git writes it (a created file's
/// old side is `/dev/null`, a deleted file's new side), empty when nothing changed. It is
/// shown to a person and kept in the task record: a line holding a secret, and every line of
/// a private key block, is shown as [`SECRET_LINE`], on either side, and no control or bidi
/// character of a file (or of its name) is kept.
pub fn unified_diff(rel: &str, before: Option<&[u8]>, after: Option<&[u8]>) -> String {
    use similar::ChangeTag;
    let old = before.map(String::from_utf8_lossy).unwrap_or_default();
    let new = after.map(String::from_utf8_lossy).unwrap_or_default();
    if old == new && before.is_some() == after.is_some() {
        return String::new();
    }
    // Judged in the whole file: a key block's body is secret by where it stands.
    let (old_secret, new_secret) = (SecretLines::of(&old), SecretLines::of(&new));
    let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
    let rel = crate::cli::text::sanitize(rel);
    let side = |present: bool, prefix: &str| match present {
        true => format!("{prefix}/{rel}"),
        false => "/dev/null".to_string(),
    };
    let mut text = format!(
        "--- {}\n+++ {}\n",
        side(before.is_some(), "a"),
        side(after.is_some(), "b")
    );
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        text.push_str(&format!("{}\n", hunk.header()));
        for change in hunk.iter_changes() {
            let secret = match change.tag() {
                ChangeTag::Delete => change.old_index().is_some_and(|i| old_secret.contains(i)),
                ChangeTag::Insert => change.new_index().is_some_and(|i| new_secret.contains(i)),
                ChangeTag::Equal => {
                    change.old_index().is_some_and(|i| old_secret.contains(i))
                        || change.new_index().is_some_and(|i| new_secret.contains(i))
                }
            };
            text.push_str(&change.tag().to_string());
            if secret {
                text.push_str(SECRET_LINE);
            } else {
                text.push_str(&crate::cli::text::sanitize(
                    change.value().trim_end_matches('\n'),
                ));
            }
            text.push('\n');
            if change.missing_newline() {
                text.push_str("\\ No newline at end of file\n");
            }
        }
    }
    text
}

/// The diff text of a run's changes: the snapshot's copies against the dir's files now.
pub fn diff_text(snapshot: &Snapshot, dir: &Path, diff: &Diff) -> std::io::Result<String> {
    let mut rels: Vec<&String> = diff
        .created
        .iter()
        .chain(&diff.modified)
        .chain(&diff.deleted)
        .collect();
    rels.sort();
    let mut text = String::new();
    for rel in rels {
        let before = snapshot.before_content(rel)?.map(|(bytes, _)| bytes);
        let after = current_content(dir, rel)?;
        text.push_str(&unified_diff(rel, before.as_deref(), after.as_deref()));
    }
    Ok(text)
}
