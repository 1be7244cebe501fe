//! The consolidation prompt, in our own words: a stable system part (cached: it is the same
//! for every run) and the run's task (the memory dir, the digests, the sessions).

use std::path::{Path, PathBuf};

use super::digest::Digest;

/// Claude Code loads only this much of `MEMORY.md`; the check reports what is over.
pub use super::check::{INDEX_FILE, INDEX_MAX_CHARS, INDEX_MAX_LINES};

/// What an index line aims at (Claude Code's own guidance; `check` flags only lines over
/// 200, where the client warns).
const INDEX_LINE_AIM: usize = 150;
/// About how large one memory file should stay.
const MEMORY_FILE_AIM_KB: usize = 4;

/// The name the client gives one of our tools when it reaches them over MCP
/// (`--provider claude`): `mcp__dreamkit__<tool>`.
pub fn mcp_name(tool: &str) -> String {
    format!("mcp__{}__{tool}", crate::model::print_mode::MCP_SERVER)
}

/// A prompt with each tool named (in backticks) as the client names it over MCP.
pub fn mcp_named(text: &str) -> String {
    let mut named = text.to_string();
    for tool in super::sandbox::Sandbox::tool_specs() {
        named = named.replace(
            &format!("`{}`", tool.name),
            &format!("`{}`", mcp_name(&tool.name)),
        );
    }
    named
}

/// The stable part: what a consolidation is and how to do it. No run-specific text here, so
/// the prefix (with the tool list) is cached across runs. What a memory is, what is never
/// saved and how files and the index look follow what Claude Code itself tells its agent
/// about memory (its recall reads `description`, its loader cuts the index), said in our
/// own words.
pub fn system_prompt() -> String {
    format!(
        "You maintain the long-term memory a coding assistant keeps about one user and one \
project: a folder of small Markdown files, one memory per file, and an index, {INDEX_FILE}, \
that the assistant loads at the start of every session. Your job now is one consolidation \
pass: read what happened in recent sessions and leave the memory folder accurate, compact and \
in the format below, so the next session starts from the right notes.

Tools. `shell` runs read-only commands (ls, find, grep, cat, stat, wc, head, tail, optionally \
joined with |; no other programs, no redirection, no shell syntax). `read_file`, `write_file`, \
`edit_file` and `delete_file` work on files; you may write, edit and delete only `.md` files \
inside the memory folder. Paths may be absolute or relative to the memory folder. Read a file \
with `read_file` before you replace, edit or delete it: a change to a file you have not read, \
or that someone else changed since you read it, is refused (read it again and redo the change \
on top). Files that may hold secrets (.env files, keys, .git/) are never readable. A refused \
call tells you why: adjust and go on.

Sources. With every `write_file`, `edit_file` and `delete_file`, say where its new or changed \
facts come from (for a deletion: what shows the memory is wrong or no longer needed) in \
`sources`: a list of {{session, quote}}, the session id and a short exact quote (at most 300 \
characters) from that session's transcript: words the user or the assistant wrote, a tool's \
input, or a tool's output. Each is checked against the transcript, and the result says which \
could not be verified: quote exactly, never invent one.

What a memory is. Each memory has one of four types:
- `user`: who the user is: their role, expertise and preferences, so answers fit them.
- `feedback`: how the user wants the work done: corrections they made and approaches they \
confirmed, both.
- `project`: context about the work that the code itself does not show: goals, decisions and \
their reasons, deadlines, who is involved.
- `reference`: where to look outside the project: dashboards, ticket queues, documents, \
channels.
A `feedback` or `project` memory states the rule or fact first, then a line starting \
**Why:** (the reason, often the incident or request behind it) and a line starting \
**How to apply:** (when and how it changes what the assistant does).

Never saved, even when a session asked for it: code patterns, conventions, architecture, file \
paths and project structure (the assistant reads these from the project itself, and a copy in \
memory only goes stale); git history; recipes for fixing a bug; anything a CLAUDE.md file \
already says; the state of a task in progress. If memory holds such notes, delete them or cut \
them down to the part that is none of these.

One memory per file, at the top level of the memory folder (not in subfolders), named by type \
and subject, such as `feedback_testing.md` or `user_role.md`, and under about \
{MEMORY_FILE_AIM_KB} KB. Each file starts with frontmatter:
---
name: feedback-testing
description: One specific line saying what this memory holds
metadata:
  type: feedback
---
`name` is a kebab-case slug; `description` is one specific line, because the assistant picks \
which memories to recall by their descriptions alone; `metadata.type` is one of the four types. \
Keep any other `metadata` keys a file already has. When you change what a memory says, make \
its description follow.

{INDEX_FILE} is only an index: no frontmatter, no memory content, one line per memory file:
- [Title](file.md) — a short hook saying when it matters
(a dash, a link, an em dash, a hook), each line under about {INDEX_LINE_AIM} characters. \
Headings may group the lines.

CLAUDE.md files hold the user's and the project's standing instructions. They are readable \
but never yours to change. When memory and a CLAUDE.md disagree, decide which is stale: if \
the memory is, fix or delete the memory; if the CLAUDE.md may be, keep a short `project` \
memory noting the disagreement, and never edit the CLAUDE.md.

Files under `team/` in the memory folder are shared with other people. Change or prune them \
only when they are clearly wrong, never copy a personal memory into them, and do not delete \
them (a delete there is refused unless the run allows it).

Work in four phases.

1. Orient. List the memory folder, read {INDEX_FILE} and skim the memory files it points to, \
so you know what is already recorded and where.

2. Gather recent signal. Read the session digests named in the task first: they hold what the \
person asked, what was answered and which tools ran. Look for what the user said about \
themselves, how they want the work done, decisions and their reasons, deadlines, pointers to \
outside systems, and memories that turned out to be wrong. Check memories that may have \
drifted against the current project files and the CLAUDE.md files. Use narrow `grep` calls on \
the raw transcripts (.jsonl) only to confirm a detail; never read a whole raw transcript.

3. Consolidate. Update the memory on the same subject instead of writing a near-duplicate; \
create a new file only for a new subject. Turn relative dates (\"yesterday\", \"last week\") \
into absolute dates. Delete memories the sessions contradict, and merge files that say the \
same thing. Record what was said or decided, not narration: no session diaries, no secrets or \
credentials, nothing you merely guess.

4. Prune and index. Keep {INDEX_FILE} under {INDEX_MAX_LINES} lines and {INDEX_MAX_CHARS} \
characters, one line per memory file in the shape above; add lines for new files, drop lines \
whose file is gone. Everything beyond the limits is never loaded.

When you are done, reply with a short summary (at most three sentences) of what you changed \
and why, and call no more tools."
    )
}

/// Where a run's task points the agent.
pub struct Task<'a> {
    pub memory_dir: &'a Path,
    pub transcripts_dir: &'a Path,
    pub digests: &'a [Digest],
    pub session_ids: &'a [String],
    /// The project tree, readable (read-only) unless `--no-read-project`.
    pub project_dir: Option<&'a Path>,
    /// The CLAUDE.md files the sessions load, readable and read-only.
    pub claude_md: &'a [PathBuf],
    /// What a check of the memory folder found before the run.
    pub problems: Option<&'a str>,
}

/// The run's task: where things are, the digests first, then the sessions.
pub fn task_prompt(task: &Task) -> String {
    let mut text = format!(
        "Memory folder: {}\nTranscripts folder (raw .jsonl, for narrow greps): {}\n",
        task.memory_dir.display(),
        task.transcripts_dir.display()
    );
    if let Some(dir) = task.project_dir {
        text.push_str(&format!(
            "Project folder (read-only, to check memories against the current code): {}\n",
            dir.display()
        ));
    }
    if !task.claude_md.is_empty() {
        text.push_str("\nCLAUDE.md files (read-only; never edit them):\n");
        for file in task.claude_md {
            text.push_str(&format!("- {}\n", file.display()));
        }
    }
    if !task.digests.is_empty() {
        text.push_str("\nSession digests (read these first):\n");
        for d in task.digests {
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
        task.session_ids.len()
    ));
    for id in task.session_ids {
        text.push_str(&format!("- {id}\n"));
    }
    if let Some(problems) = task.problems {
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

    fn task_with(claude_md: &[PathBuf], digests: &[Digest], problems: Option<&str>) -> String {
        task_prompt(&Task {
            memory_dir: Path::new("/m"),
            transcripts_dir: Path::new("/t"),
            digests,
            session_ids: &["s1".into(), "s2".into()],
            project_dir: Some(Path::new("/p")),
            claude_md,
            problems,
        })
    }

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
    fn the_system_prompt_says_what_a_memory_is_and_what_is_never_saved() {
        let p = system_prompt();
        for needle in [
            // The four types, each with what it holds.
            "- `user`: who the user is",
            "- `feedback`: how the user wants the work done",
            "- `project`: context about the work that the code itself does not show",
            "- `reference`: where to look outside the project",
            "**Why:**",
            "**How to apply:**",
            // The never-save list.
            "Never saved, even when a session asked for it: code patterns, conventions, \
architecture, file paths and project structure",
            "git history",
            "recipes for fixing a bug",
            "anything a CLAUDE.md file already says",
            "the state of a task in progress",
            // The file format.
            "One memory per file, at the top level of the memory folder",
            "`feedback_testing.md`",
            "under about 4 KB",
            "---\nname: feedback-testing\ndescription: ",
            "metadata:\n  type: feedback\n---",
            "`name` is a kebab-case slug",
            "its description follow",
            // The index.
            "MEMORY.md is only an index: no frontmatter, no memory content",
            "- [Title](file.md) \u{2014} a short hook",
            "under about 150 characters",
            // CLAUDE.md and team/.
            "if the CLAUDE.md may be, keep a short `project` memory noting the disagreement, \
and never edit the CLAUDE.md",
            "Files under `team/` in the memory folder are shared with other people",
        ] {
            assert!(p.contains(needle), "{needle:?} missing from:\n{p}");
        }
        // What the old prompt asked for and the client's guidance forbids.
        assert!(!p.contains("facts about the code"));
        assert!(!p.contains("Merge new facts into the existing topic files"));
    }

    #[test]
    fn the_task_names_the_claude_md_files_and_the_project() {
        let files = [
            PathBuf::from("/p/CLAUDE.md"),
            PathBuf::from("/h/.claude/CLAUDE.md"),
        ];
        let t = task_with(&files, &[], None);
        assert!(t.contains(
            "Project folder (read-only, to check memories against the current code): /p\n"
        ));
        assert!(t.contains(
            "CLAUDE.md files (read-only; never edit them):\n- /p/CLAUDE.md\n- /h/.claude/CLAUDE.md\n"
        ));
        assert!(!task_with(&[], &[], None).contains("CLAUDE.md files"));
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
        let t = task_with(
            &[],
            &[d],
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
