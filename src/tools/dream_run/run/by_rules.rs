//! The rules engine's run: the plan made over the memory as it is under the lock, each write
//! made through the same sandboxed tools (and so the same fence, snapshot, stamping and
//! record) as a model's, then the no-lost-words invariant before the run may complete.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::time::SystemTime;

use serde_json::json;

use super::super::anchors::Anchors;
use super::super::check::{self, Health, SecretLines};
use super::super::rules::{self, MemoryText, Plan};
use super::{Agent, End};
use crate::cli::signals;
use crate::store;

/// Set to `lose_word` (tests only), the plan's first write loses its last word: the invariant
/// must then fail the run and restore the memory.
const FAULT_ENV: &str = "DREAMKIT_TEST_RULES_FAULT";

/// The missing words an `invariant` failure names at most.
const NAMED_WORDS: usize = 20;

/// Every `.md` file of the memory dir the engine may change: regular files (no symlink), no
/// dot file or folder, within the tools' per-file cap, UTF-8. Anything else is left alone
/// (and `check` reports it).
pub(super) fn read_memory(dir: &Path, max_bytes: u64) -> BTreeMap<String, MemoryText> {
    let walk = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| !e.file_name().to_string_lossy().starts_with('.'));
    let mut listed: Vec<(String, std::path::PathBuf)> = Vec::new();
    for entry in walk.filter_map(Result::ok) {
        if !entry.file_type().is_file() {
            continue;
        }
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("md") {
            continue;
        }
        let Some(rel) = path.strip_prefix(dir).ok().and_then(Path::to_str) else {
            continue;
        };
        listed.push((rel.to_string(), entry.into_path()));
    }
    // Read on every core, as `check` reads them; the open's own metadata gives the time.
    let read = crate::parallel::map(&listed, |(_, path)| read_one(path, max_bytes));
    listed
        .into_iter()
        .zip(read)
        .filter_map(|((rel, _), text)| Some((rel, text?)))
        .collect()
}

/// One memory file as the engine may change it: a regular file (not through a link) within
/// `max_bytes`, UTF-8.
fn read_one(path: &Path, max_bytes: u64) -> Option<MemoryText> {
    let (mut file, meta) = crate::files::open_regular_no_follow_with_metadata(path).ok()?;
    if meta.len() > max_bytes {
        return None;
    }
    let bytes = crate::files::read_sized(&mut file, meta.len(), max_bytes).ok()?;
    if bytes.len() as u64 > max_bytes {
        return None;
    }
    let text = String::from_utf8(bytes).ok()?;
    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    Some(MemoryText { text, modified })
}

/// The plan for the memory dir `dir` as it is now, with what it was made from.
pub(super) fn plan_for(
    dir: &Path,
    health: &Health,
    anchors: &Anchors,
    max_bytes: u64,
) -> (Plan, BTreeMap<String, MemoryText>) {
    let files = read_memory(dir, max_bytes);
    let anchor = |file: &str, line: &str| anchors.of(file, line);
    let plan = rules::plan(&rules::Input {
        files: &files,
        health,
        anchor: &anchor,
        now: SystemTime::now(),
    });
    (plan, files)
}

/// `2 duplicate_entry, 1 orphan_file`.
fn by_rule(changes: &[store::Change]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for change in changes {
        *counts
            .entry(change.rule.as_deref().unwrap_or("other"))
            .or_insert(0) += 1;
    }
    counts
        .iter()
        .map(|(rule, n)| format!("{n} {rule}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The words of `files` that stand on a line holding a secret: an `invariant` failure never
/// names them (a lost word may be a piece of a credential).
fn secret_words(files: &BTreeMap<String, MemoryText>) -> HashSet<String> {
    let mut words = HashSet::new();
    for file in files.values() {
        let secret = SecretLines::of(&file.text);
        for (at, line) in file.text.lines().enumerate() {
            if secret.contains(at) {
                words.extend(
                    line.split(|c: char| !c.is_alphanumeric())
                        .filter(|w| !w.is_empty())
                        .map(str::to_string),
                );
            }
        }
    }
    words
}

/// A plan broken on purpose (see [`FAULT_ENV`]).
fn with_fault(mut plan: Plan, fault: Option<&str>) -> Plan {
    if fault == Some("lose_word") {
        if let Some(text) = plan.writes.iter_mut().find_map(|(_, text)| text.as_mut()) {
            let trimmed = text.trim_end_matches(|c: char| !c.is_alphanumeric());
            let cut = trimmed
                .char_indices()
                .rev()
                .find(|(_, c)| !c.is_alphanumeric())
                .map_or(0, |(i, c)| i + c.len_utf8());
            text.truncate(cut);
        }
    }
    plan
}

impl Agent<'_> {
    /// Plans over the memory as it is now and writes the plan; `Completed` once every write
    /// landed and no word of the memory was lost.
    pub(super) fn run_rules(&mut self, health: &Health, anchors: &Anchors) -> End {
        let memory_dir = self.sandbox.memory_dir().to_path_buf();
        let max_bytes = self.sandbox.limits().max_file_bytes as u64;
        let (plan, before) = plan_for(&memory_dir, health, anchors, max_bytes);
        let fault = self.env.get(FAULT_ENV).and_then(|v| v.to_str());
        let plan = with_fault(plan, fault);
        // Over the file limit, nothing is written: a half-made plan is no state to leave.
        let files: BTreeSet<&str> = plan.writes.iter().map(|(rel, _)| rel.as_str()).collect();
        let max_files = self.args.max_files as usize;
        if files.len() > max_files {
            return End::Failed {
                error: "max_files",
                message: format!(
                    "the rules would change {} files, over --max-files {max_files}; nothing was changed (raise --max-files)",
                    files.len()
                ),
                environment: false,
            };
        }
        for (rel, content) in &plan.writes {
            if let Some(signal) = signals::received() {
                return End::Aborted { signal };
            }
            // The guard lets a write through only over what the plan was made from: a file
            // another session changed since is a conflict, not overwritten.
            match before.get(rel) {
                Some(file) => {
                    self.seen
                        .insert(rel.clone(), store::sha256_hex(file.text.as_bytes()));
                }
                None => {
                    self.seen.remove(rel);
                }
            }
            let (name, input) = match content {
                Some(text) => ("write_file", json!({ "path": rel, "content": text })),
                None => ("delete_file", json!({ "path": rel })),
            };
            self.tool_calls += 1;
            let (result, is_error) = self.call_tool(name, &input);
            if let Some(end) = self.fence_end() {
                return end;
            }
            if is_error {
                return End::Failed {
                    error: "conflict",
                    message: format!("the rules could not write {rel}: {result}"),
                    environment: false,
                };
            }
        }
        self.record.files_touched = self.absolute_touched();
        self.save_record();
        let after = read_memory(&memory_dir, max_bytes);
        let texts = |files: &BTreeMap<String, MemoryText>| -> BTreeMap<String, String> {
            files
                .iter()
                .map(|(rel, f)| (rel.clone(), f.text.clone()))
                .collect()
        };
        // (The old `metadata.modified` stamps, which the stamp replaces, are not counted.)
        let lost = rules::lost_words(&texts(&before), &texts(&after), &plan.may_lose);
        if !lost.is_empty() {
            let secret = secret_words(&before);
            let named: Vec<&str> = lost
                .iter()
                .filter(|w| !secret.contains(*w))
                .take(NAMED_WORDS)
                .map(String::as_str)
                .collect();
            let more = lost.len() - named.len();
            let words = match (named.is_empty(), more) {
                (_, 0) => named.join(", "),
                (true, more) => format!("{more} not shown"),
                (false, more) => format!("{} and {more} more", named.join(", ")),
            };
            return End::Failed {
                error: "invariant",
                message: format!(
                    "the rules would have lost {} word(s) of the memory ({}); nothing was changed",
                    lost.len(),
                    check::for_a_person(&words)
                ),
                environment: false,
            };
        }
        self.record.changes = plan.changes.clone();
        let summary = if plan.changes.is_empty() {
            "rules: nothing to fix".to_string()
        } else {
            format!(
                "rules: {} change(s): {}",
                plan.changes.len(),
                by_rule(&plan.changes)
            )
        };
        End::Completed { summary }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fault_drops_the_last_word_of_the_first_write() {
        let plan = Plan {
            writes: vec![
                ("gone.md".into(), None),
                ("a.md".into(), Some("keep these words.\n".into())),
            ],
            ..Plan::default()
        };
        let broken = with_fault(plan.clone(), Some("lose_word"));
        // (A lost word from a secret's line is never named: see `secret_words`.)
        assert_eq!(broken.writes[1].1.as_deref(), Some("keep these "));
        assert_eq!(with_fault(plan.clone(), None).writes, plan.writes);
    }

    #[test]
    fn words_on_a_secret_line_are_never_named() {
        let mut files = BTreeMap::new();
        files.insert(
            "a.md".to_string(),
            MemoryText {
                text: "Plain words.\nkey sk-ant-api03-FAKEfake0123456789FAKEfake0123 here\n".into(),
                modified: SystemTime::UNIX_EPOCH,
            },
        );
        let secret = secret_words(&files);
        assert!(
            secret.contains("FAKEfake0123456789FAKEfake0123"),
            "{secret:?}"
        );
        assert!(!secret.contains("Plain"), "{secret:?}");
    }
}
