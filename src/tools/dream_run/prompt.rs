//! The consolidation prompt, in our own words: a stable system part (cached: it is the same
//! for every run) and the run's task (the memory dir, the digests, the sessions).

use std::path::Path;

use super::digest::Digest;

/// Claude Code loads only this much of `MEMORY.md`; the check reports what is over.
pub use super::check::{INDEX_FILE, INDEX_LINE_CHARS, INDEX_MAX_CHARS, INDEX_MAX_LINES};

/// The stable part: what a consolidation is and how to do it. No run-specific text here, so
/// the prefix (with the tool list) is cached across runs.
pub fn system_prompt() -> String {
    format!(
        "You maintain a software project's long-term memory: a folder of Markdown files that a \
coding assistant loads at the start of every session. Your job now is one consolidation pass: \
read what happened in recent sessions and fold what is worth keeping into the memory files, so \
the next session starts from accurate, compact notes.

You have five tools. `shell` runs read-only commands (ls, find, grep, cat, stat, wc, head, \
tail, optionally joined with |; no other programs, no redirection, no shell syntax). \
`read_file`, `write_file`, `edit_file` and `delete_file` work on files; you may write, edit and \
delete only `.md` files inside the memory folder. Paths may be absolute or relative to the \
memory folder. Read a file with `read_file` before you replace, edit or delete it: a change \
to a file you have not read, or that someone else changed since you read it, is refused (read \
it again and redo the change on top). A refused call tells you why: adjust and go on.

Work in four phases.

1. Orient. List the memory folder, read {INDEX_FILE} (the index) and skim the topic files it \
points to, so you know what is already recorded and where.

2. Gather recent signal. Read the session digests named in the task first: they hold what the \
person asked, what was answered and which tools ran. Look for decisions, conventions, \
preferences, facts about the code and environment, and things that turned out to be wrong. \
Check facts already in memory that may have drifted from what the sessions show. Use narrow \
`grep` calls on the raw transcripts (.jsonl) only to confirm a detail; never read a whole raw \
transcript.

3. Consolidate. Merge new facts into the existing topic files instead of creating \
near-duplicates; create a new topic file only for a genuinely new subject. Turn relative dates \
(\"yesterday\", \"last week\") into absolute dates. Delete facts that the sessions contradict, \
and files whose content has been fully absorbed elsewhere. Record facts, not narration: no \
session diaries, no secrets or credentials, nothing you merely guess.

4. Prune and index. Keep {INDEX_FILE} under {INDEX_MAX_LINES} lines and {INDEX_MAX_CHARS} \
characters: one line per entry, at most about {INDEX_LINE_CHARS} characters, each pointing to \
its topic file; drop pointers to files that no longer exist. Everything beyond the limits is \
never loaded.

When you are done, reply with a short summary (at most three sentences) of what you changed \
and why, and call no more tools."
    )
}

/// The run's task: where things are, the digests first, then the sessions.
pub fn task_prompt(
    memory_dir: &Path,
    transcripts_dir: &Path,
    digests: &[Digest],
    session_ids: &[String],
    project_dir: Option<&Path>,
    problems: Option<&str>,
) -> String {
    let mut text = format!(
        "Memory folder: {}\nTranscripts folder (raw .jsonl, for narrow greps): {}\n",
        memory_dir.display(),
        transcripts_dir.display()
    );
    if let Some(dir) = project_dir {
        text.push_str(&format!(
            "Project folder (read-only, to check facts against the code): {}\n",
            dir.display()
        ));
    }
    if !digests.is_empty() {
        text.push_str("\nSession digests (read these first):\n");
        for d in digests {
            text.push_str(&format!(
                "- {} ({} bytes; raw transcript {} bytes: {})\n",
                d.path.display(),
                d.digest_bytes,
                d.raw_bytes,
                d.transcript.display()
            ));
        }
    }
    text.push_str(&format!(
        "\nSessions since last consolidation ({}):\n",
        session_ids.len()
    ));
    for id in session_ids {
        text.push_str(&format!("- {id}\n"));
    }
    if let Some(problems) = problems {
        text.push_str(
            "\nProblems a check of the memory folder found before this run (fix what you can, \
most in phase 4; a credential is deleted, never copied):\n",
        );
        text.push_str(problems);
    }
    text.push_str("\nBegin with phase 1.");
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_system_prompt_names_the_phases_and_limits() {
        let p = system_prompt();
        for needle in [
            "1. Orient",
            "2. Gather",
            "3. Consolidate",
            "4. Prune",
            "200 lines",
            "25000",
            "Read a file with `read_file` before you replace, edit or delete it",
        ] {
            assert!(p.contains(needle), "{needle} missing");
        }
    }

    #[test]
    fn the_task_lists_digests_before_sessions() {
        let d = Digest {
            session_id: "s1".into(),
            transcript: PathBuf::from("/t/s1.jsonl"),
            path: PathBuf::from("/state/digests/s1.md"),
            raw_bytes: 1000,
            digest_bytes: 80,
            reused: false,
        };
        let t = task_prompt(
            Path::new("/m"),
            Path::new("/t"),
            &[d],
            &["s1".into(), "s2".into()],
            None,
            Some("- dangling_link MEMORY.md:3: links to gone.md, which does not exist\n"),
        );
        let digest_at = t.find("/state/digests/s1.md").unwrap();
        let sessions_at = t.find("Sessions since last consolidation (2):").unwrap();
        assert!(digest_at < sessions_at);
        assert!(t.contains("- s2\n"));
        let problems_at = t.find("- dangling_link MEMORY.md:3").unwrap();
        assert!(sessions_at < problems_at && problems_at < t.find("Begin with phase 1.").unwrap());
    }
}
