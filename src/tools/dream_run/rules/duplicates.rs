//! `duplicate_entry`, the part that needs no judgement:
//!
//! - index lines equal after folding case, punctuation and white space (`check`'s
//!   `normalized`): the first stays, the later ones go (`may_lose`: their words are the first
//!   one's, but for case and punctuation);
//! - byte-identical topic files: one stays (one under `team/` if any, else one the index
//!   links, else the first by path), the others are deleted and every link to them points at
//!   it. A file under `team/` is never deleted: two copies there both stay.
//!
//! Left to the model, and still reported by `check`: the same line in two topic files (or
//! twice in one), and two index lines that link the same file with different text (which
//! hook to keep is a judgement).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::links::{memory_links, repointed};
use super::{is_team, State, OVERFLOW_INDEX_FILE};
use crate::tools::dream_run::check::{is_index, markdown, Kind, INDEX_FILE};

/// Byte-identical topic files.
pub(super) fn identical_files(state: &mut State<'_>) {
    let mut by_text: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (path, doc) in &state.docs {
        if !is_index(path) && path != OVERFLOW_INDEX_FILE {
            by_text.entry(doc.render()).or_default().push(path.clone());
        }
    }
    let linked = index_targets(state);
    for (_, paths) in by_text {
        if paths.len() < 2 {
            continue;
        }
        let team: Vec<&String> = paths.iter().filter(|p| is_team(p)).collect();
        let preferred = |among: &[&String]| -> Option<String> {
            among
                .iter()
                .find(|p| linked.contains(p.as_str()))
                .or(among.first())
                .map(|p| (*p).clone())
        };
        let keep = if team.is_empty() {
            preferred(&paths.iter().collect::<Vec<_>>())
        } else {
            preferred(&team)
        };
        let Some(keep) = keep else {
            continue;
        };
        for path in paths.iter().filter(|p| **p != keep && !is_team(p)) {
            state.docs.remove(path);
            state.deleted.insert(path.clone());
            state.may_lose.push(path.clone());
            state.delete(
                path,
                Kind::DuplicateEntry,
                format!("the same text as {keep}: deleted, its links now point at {keep}"),
            );
            relink(state, path, &keep);
        }
    }
}

/// What the index links (relative to the memory dir).
fn index_targets(state: &State<'_>) -> HashSet<String> {
    let Some(index) = state.docs.get(INDEX_FILE) else {
        return HashSet::new();
    };
    let dir = &state.input.health.memory_dir;
    let marks = index.marks();
    index
        .lines
        .iter()
        .zip(&marks)
        .filter(|(_, m)| !m.code)
        .flat_map(|(line, _)| memory_links(dir, INDEX_FILE, &line.text))
        .map(|l| l.resolved)
        .collect()
}

/// Every link to `from` in the memory points at `to`.
fn relink(state: &mut State<'_>, from: &str, to: &str) {
    let dir = state.input.health.memory_dir.clone();
    let mut edits: Vec<(String, usize, Option<usize>, String)> = Vec::new();
    for (path, doc) in &state.docs {
        let marks = doc.marks();
        for (at, line) in doc.lines.iter().enumerate() {
            if marks[at].code {
                continue;
            }
            let mut links = memory_links(&dir, path, &line.text);
            links.retain(|l| l.resolved == from);
            if links.is_empty() {
                continue;
            }
            let mut text = line.text.clone();
            // From the end, so the earlier ranges still hold.
            for link in links.iter().rev() {
                text.replace_range(link.range.clone(), &repointed(link, path, to));
            }
            edits.push((path.clone(), at, line.origin, text));
        }
    }
    for (path, at, origin, text) in edits {
        if let Some(doc) = state.docs.get_mut(&path) {
            doc.lines[at].text = text;
        }
        state.change(
            &path,
            origin,
            Kind::DuplicateEntry,
            format!("linked {from}, a copy of {to} that is deleted: now links {to}"),
        );
    }
}

/// Index lines equal, folded, to an earlier one.
pub(super) fn index_lines(state: &mut State<'_>) {
    let Some(index) = state.docs.get(INDEX_FILE) else {
        return;
    };
    let marks = index.marks();
    let mut first: HashMap<String, Option<usize>> = HashMap::new();
    let mut dropped: Vec<(usize, Option<usize>, Option<usize>)> = Vec::new();
    for (at, line) in index.lines.iter().enumerate() {
        if marks[at].code || marks[at].front_matter {
            continue;
        }
        let folded = markdown::normalized(&line.text);
        if folded.is_empty() {
            continue;
        }
        match first.get(&folded) {
            Some(&kept) => dropped.push((at, line.origin, kept)),
            None => {
                first.insert(folded, line.origin);
            }
        }
    }
    let Some(doc) = state.docs.get_mut(INDEX_FILE) else {
        return;
    };
    let mut texts: Vec<String> = dropped
        .iter()
        .rev()
        .map(|&(at, _, _)| doc.lines.remove(at).text)
        .collect();
    texts.reverse();
    for ((_, origin, kept), text) in dropped.into_iter().zip(texts) {
        state.may_lose.push(text);
        let detail = match kept {
            Some(n) => format!("the same entry as line {n}: removed"),
            None => "the same entry as an earlier line: removed".to_string(),
        };
        state.change(INDEX_FILE, origin, Kind::DuplicateEntry, detail);
    }
}
