//! `dream-run`: the restricted consolidation agent, and its history (`tasks`, `pending`,
//! `undo`). The agent's tools and their policy live in `sandbox`, attackable on their own.

mod anchors;
pub mod check;
pub mod diff;
pub mod digest;
pub mod eval;
pub mod history;
mod lease;
pub mod mode;
pub mod prompt;
#[cfg(test)]
mod props;
pub mod recover;
pub mod relay;
pub mod report;
pub mod review;
pub mod rules;
pub mod run;
pub mod sandbox;
// The store is shared with dream-lock; its modules keep their names here.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use schemars::{Schema, SchemaGenerator};

use self::report::OrHook;
use crate::claude::Project;
use crate::cli::args::EnvNamed;
use crate::cli::duration::{parse_duration, parse_hours};
use crate::cli::envelope::{Stage, StageOf};
use crate::cli::{CommonArgs, Context, Delivery, Failure, LocationArgs, Tool};
use crate::lock::BackendArgs;
use crate::model::ModelArgs;

/// The file lock's holder claim lapses after an hour and is never refreshed, so a run under it
/// must end well before: `--deadline` is capped here for the file backend.
pub const FILE_LOCK_MAX_DEADLINE: Duration = Duration::from_secs(50 * 60);

/// Run one memory consolidation, or look at past ones.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "dream-run",
    version = crate::cli::VERSION,
    about = "Run the restricted memory-consolidation agent",
    long_about = "Run one memory consolidation (\"dream\") over the sessions a dream-gate \
envelope lists: a model conversation with five sandboxed tools (read-only shell, read, write, \
edit, delete of .md files inside the memory dir), fenced by the consolidation lock, with a \
snapshot that is restored when the run fails and kept for `undo` when it completes. Reads the \
envelope on stdin and prints it with its `run` section.",
    mut_arg("deadline", |a| a
        .default_value("15m")
        .help("Deadline for the whole run (at most 50m with the file lock)")),
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: Option<Subcommand>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Subcommand {
    /// List task records, newest first (a running record whose process is gone is orphaned)
    Tasks(TasksArgs),
    /// Memory updates not yet announced to a session (`--clear` empties the list)
    Pending(PendingArgs),
    /// Put the memory dir back as it was before a run that changed it (completed, or one
    /// whose snapshot was kept)
    Undo(UndoArgs),
    /// A proposal's changes as JSON, or with --diff as a unified diff [default: the latest]
    Show(ShowArgs),
    /// Write a proposal into the memory dir under the lock, if nothing it touches changed since
    Apply(ApplyArgs),
    /// Drop a proposal (its staged copy); the task becomes discarded
    Discard(DiscardArgs),
    /// Put back what killed commands left: an apply or undo midway, a run that died, their
    /// temporary files (every state-changing command does this first by itself)
    Recover(RecoverArgs),
    /// The memory's health without a model: the index as Claude Code cuts it, dangling
    /// links, orphans, duplicates, relative dates, vanished paths, secrets (reads only)
    Check(CheckArgs),
    /// How good is a consolidation: run a suite of scenarios (memory before, sessions,
    /// project, expectations) each in a temporary home through the real pipeline, and say
    /// which expectations the memory after misses
    Eval(EvalArgs),
    /// The MCP server of a `--provider claude` run: started by the Claude Code client that
    /// dream-run spawns, never by hand. It serves the run's five sandboxed tools as MCP
    /// (JSON-RPC on stdin and stdout) and forwards each call to the running dream-run over
    /// the socket it names; exit 0 at stdin's end, 3 when the socket cannot be reached
    #[command(name = "tool-relay", hide = true)]
    ToolRelay(ToolRelayArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct ToolRelayArgs {
    /// The socket of the running dream-run (relay.sock in its private directory)
    // An Option only so that `--schema` parses without it; clap requires it otherwise.
    #[arg(long, value_name = "PATH", required = true)]
    pub socket: Option<PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub location: LocationArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Who consolidates: `model` (the agent), or `rules` (the fixes that need no judgement;
    /// no model request, no credential, and it runs with no session to review)
    #[arg(
        long,
        value_enum,
        env = "DREAMKIT_DREAM_ENGINE",
        default_value = "model",
        value_parser = EnvNamed(clap::builder::EnumValueParser::<mode::Engine>::new())
    )]
    pub engine: mode::Engine,
    /// Most assistant turns before the run is stopped as failed
    #[arg(long, value_name = "N", default_value_t = 40, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: u32,
    /// Most tokens (input, output and cache writes) the run may use
    #[arg(long, value_name = "N", default_value_t = 2_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tokens: u64,
    /// Most output tokens of one model answer (the request's max_tokens); a reply cut there
    /// is asked to continue once, then the run fails as truncated
    #[arg(long, value_name = "N", default_value_t = 8192, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_answer_tokens: u32,
    /// Most tool calls run per assistant turn; the rest get a tool error saying why
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_calls_per_turn: u32,
    /// Most memory files one run may change; writes to further files get a tool error
    #[arg(long, value_name = "N", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_files: u32,
    /// Keep the project directory out of the agent's reach (by default it may read the
    /// project, read-only, to check memory against the current code; files that may hold
    /// secrets are refused either way)
    #[arg(long, overrides_with = "read_project")]
    pub no_read_project: bool,
    /// The default; kept so that scripts written for earlier versions still run
    #[arg(long, hide = true, overrides_with = "no_read_project")]
    pub read_project: bool,
    /// Run without holding the consolidation lock (no fencing)
    #[arg(long)]
    pub unlocked: bool,
    /// Stage every write in a copy under the state dir and record a proposal instead of
    /// changing the memory dir (also DREAMKIT_DREAM_MODE=propose)
    #[arg(long)]
    pub propose: bool,
    /// Print {prompt, tools, sessions} and stop: no model request, no credentials needed
    #[arg(long)]
    pub dry_run: bool,
    /// Keep what a failed or aborted run wrote instead of restoring the snapshot
    #[arg(long)]
    pub keep_partial: bool,
    /// Progress as JSON Lines events on stderr (turn, tool, file_touched, done)
    #[arg(long)]
    pub events: bool,
    /// Append a memory_saved record to this Claude Code transcript when files changed
    #[arg(long, value_name = "PATH")]
    pub notify_transcript: Option<PathBuf>,
    /// Let the agent delete files under the memory dir's team/ folder: team memory is shared,
    /// so by default the agent may only edit it
    #[arg(long)]
    pub allow_team_delete: bool,
    /// Per-command timeout of the agent's shell tool
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = positive_duration)]
    pub shell_timeout: Duration,
}

/// A duration that is not zero: a zero shell timeout would kill every command at once.
fn positive_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err(format!("{text:?} is zero: give the commands some time")),
        d => Ok(d),
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct TasksArgs {
    #[command(flatten)]
    pub location: LocationArgs,
}

#[derive(Debug, Clone, clap::Args)]
pub struct PendingArgs {
    #[command(flatten)]
    pub location: LocationArgs,
    /// Empty the list after printing it (a SessionStart hook does this)
    #[arg(long)]
    pub clear: bool,
    /// With --clear: print the list and what would be cleared, clear nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Answer as a Claude Code SessionStart hook: the updates as additionalContext (announced
    /// once: the list is cleared), nothing at all when there is none; always exit 0
    #[arg(long, conflicts_with = "dry_run")]
    pub hook: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct UndoArgs {
    #[command(flatten)]
    pub location: LocationArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// The run to undo [default: the newest run that left changes behind]
    #[arg(value_name = "TASK_ID")]
    pub task_id: Option<String>,
    /// Print which files would be put back, change nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub location: LocationArgs,
    /// Print the unified diff as text (coloured on a terminal unless NO_COLOR) instead of JSON
    #[arg(long, conflicts_with = "hook")]
    pub diff: bool,
    /// Print each change with where it came from, as text: a model's sources (session, quote,
    /// verified or not), a rule's name
    #[arg(long, conflicts_with_all = ["hook", "diff"])]
    pub why: bool,
    /// Answer as a Claude Code SessionStart hook: a waiting proposal as additionalContext,
    /// nothing at all when there is none; always exit 0
    #[arg(long)]
    pub hook: bool,
    /// The task to show [default: the latest proposal]
    #[arg(value_name = "TASK_ID")]
    pub task_id: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub location: LocationArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// The proposal to apply [default: the latest]
    #[arg(value_name = "TASK_ID")]
    pub task_id: Option<String>,
    /// Print which files would be written, change nothing (no lock taken)
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct DiscardArgs {
    #[command(flatten)]
    pub location: LocationArgs,
    /// The proposal to drop [default: the latest]
    #[arg(value_name = "TASK_ID")]
    pub task_id: Option<String>,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Print what would be dropped, change nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub location: LocationArgs,
    /// How much older than the project's newest session the index may be (stale_index):
    /// hours, or a duration (24, 24h, 90m)
    #[arg(
        long,
        value_name = "HOURS",
        env = "DREAMKIT_MIN_HOURS",
        default_value = "24",
        value_parser = EnvNamed(parse_hours)
    )]
    pub min_hours: f64,
    /// Answer as a Claude Code SessionStart hook: the problems as additionalContext, nothing
    /// at all when the memory is healthy; always exit 0
    #[arg(long)]
    pub hook: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct EvalArgs {
    /// The suite: a folder of scenario folders, or one scenario folder (relative to the
    /// current directory) [default: evals/]
    #[arg(
        value_name = "SUITE_DIR",
        default_value = "evals",
        hide_default_value = true
    )]
    pub suite: PathBuf,
    /// Who consolidates in every scenario: `model`, or `rules` (no model request; a
    /// scenario with needs_model true is skipped)
    #[arg(
        long,
        value_enum,
        env = "DREAMKIT_DREAM_ENGINE",
        default_value = "model",
        value_parser = EnvNamed(clap::builder::EnumValueParser::<mode::Engine>::new())
    )]
    pub engine: mode::Engine,
    /// The model API, passed to each run [default: the environment's, else anthropic]
    #[arg(long, value_enum)]
    pub provider: Option<crate::model::Provider>,
    /// The model id, passed to each run
    #[arg(long, value_name = "ID")]
    pub model: Option<String>,
    /// Run only this scenario (its folder name; may be repeated)
    #[arg(long, value_name = "NAME")]
    pub only: Vec<String>,
    /// After --: more flags for every scenario's dream-run, such as the limits a slow model
    /// needs (--max-turns, --timeout, --deadline, --max-answer-tokens)
    #[arg(last = true, value_name = "RUN_ARGS")]
    pub run_args: Vec<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RecoverArgs {
    #[command(flatten)]
    pub location: LocationArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Report the interrupted command or killed run (on stderr), roll nothing back
    #[arg(long)]
    pub dry_run: bool,
}

impl crate::cli::Binary for Args {
    const STAGE: Option<&'static dyn Stage> = Some(&StageOf::<run::RunSection>::STAGE);

    const STDIO_SUBCOMMANDS: &'static [&'static str] = &["tool-relay"];

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn dispatch(self, cx: &Context) -> Delivery {
        match self.command {
            None => cx.finish(self.run),
            Some(Subcommand::Tasks(args)) => cx.finish(args),
            Some(Subcommand::Pending(args)) => cx.finish(args),
            Some(Subcommand::Undo(args)) => cx.finish(args),
            Some(Subcommand::Show(args)) => cx.finish(args),
            Some(Subcommand::Apply(args)) => cx.finish(args),
            Some(Subcommand::Discard(args)) => cx.finish(args),
            Some(Subcommand::Recover(args)) => cx.finish(args),
            Some(Subcommand::Check(args)) => cx.finish(args),
            Some(Subcommand::Eval(args)) => cx.finish(args),
            Some(Subcommand::ToolRelay(args)) => cx.finish(args),
        }
    }
}

/// The project a subcommand works on: its flags, and the hook payload or envelope on stdin.
fn project(location: &LocationArgs, cx: &Context) -> Result<Project, Failure> {
    Ok(cx.project(location)?.project.clone())
}

impl Tool for RunArgs {
    type Report = run::RunReport;

    fn run(self, cx: &Context) -> Result<run::RunReport, Failure> {
        run::run(&self, cx)
    }

    /// With `--events`, stdout still holds the envelope: the events go to stderr.
    fn schema(&self, generator: &mut SchemaGenerator) -> Result<Schema, &'static str> {
        Ok(generator.subschema_for::<run::RunReport>())
    }
}

impl Tool for TasksArgs {
    type Report = history::TasksReport;

    fn run(self, cx: &Context) -> Result<Self::Report, Failure> {
        history::tasks(&self, cx)
    }
}

impl Tool for PendingArgs {
    type Report = OrHook<history::PendingReport>;

    fn run(self, cx: &Context) -> Result<Self::Report, Failure> {
        let pending = history::pending(&self, cx);
        OrHook::of(
            self.hook,
            pending,
            cx.diag(),
            history::PendingReport::session_context,
        )
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Result<Schema, &'static str> {
        Ok(Self::Report::schema(self.hook, generator))
    }
}

impl Tool for UndoArgs {
    type Report = history::UndoReport;

    fn run(self, cx: &Context) -> Result<Self::Report, Failure> {
        history::undo(&self, cx)
    }
}

impl Tool for ShowArgs {
    type Report = OrHook<review::ShowReport>;

    fn run(self, cx: &Context) -> Result<Self::Report, Failure> {
        let shown = review::show(&self, cx);
        OrHook::of(
            self.hook,
            shown,
            cx.diag(),
            review::ShowReport::session_context,
        )
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Result<Schema, &'static str> {
        if self.hook {
            Ok(Self::Report::schema(self.hook, generator))
        } else if self.diff {
            Err("stdout holds a unified diff, not JSON; for the JSON form (diff_text), run show without --diff")
        } else if self.why {
            Err("stdout holds each change and its sources as text, not JSON; for the JSON form (changes[].sources), run show without --why")
        } else {
            Ok(Self::Report::schema(self.hook, generator))
        }
    }
}

impl Tool for ApplyArgs {
    type Report = review::ApplyReport;

    fn run(self, cx: &Context) -> Result<Self::Report, Failure> {
        review::apply(&self, cx)
    }
}

impl Tool for DiscardArgs {
    type Report = review::DiscardReport;

    fn run(self, cx: &Context) -> Result<Self::Report, Failure> {
        review::discard(&self, cx)
    }
}

impl Tool for RecoverArgs {
    type Report = recover::RecoverReport;

    fn run(self, cx: &Context) -> Result<Self::Report, Failure> {
        recover::recover(&self, cx)
    }
}

impl Tool for CheckArgs {
    type Report = OrHook<check::Health>;

    fn run(self, cx: &Context) -> Result<Self::Report, Failure> {
        let health = check::check(&self, cx);
        OrHook::of(self.hook, health, cx.diag(), check::Health::session_context)
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Result<Schema, &'static str> {
        Ok(Self::Report::schema(self.hook, generator))
    }
}

impl Tool for EvalArgs {
    type Report = eval::EvalReport;

    fn run(self, cx: &Context) -> Result<Self::Report, Failure> {
        eval::eval(&self, cx)
    }
}

impl Tool for ToolRelayArgs {
    type Report = relay::RelayEnded;

    fn run(self, cx: &Context) -> Result<Self::Report, Failure> {
        relay::run(self.socket.as_deref(), cx)
    }

    fn schema(&self, _: &mut SchemaGenerator) -> Result<Schema, &'static str> {
        Err("stdout is the MCP channel (JSON-RPC 2.0) of the Claude Code client that started it")
    }
}

/// Prose for the man page.
#[cfg(feature = "docs")]
pub const MAN_SECTIONS: &[(&str, &str)] = &[
    (
        "THE RUN",
        "dream-run reads the envelope (project, gate.sessions, lock) from stdin. It refuses to \
run without a held lock (lock.acquired true with its token, or DREAMKIT_LOCK_TOKEN under \
`dream-lock exec`) unless --unlocked. Without gate.sessions it lists the sessions changed since \
the last consolidation itself.

The envelope never widens what the run may touch: project.memory_dir, transcripts_dir and \
state_dir are accepted only when each is what dream-run's own flags, environment and settings \
give for the envelope's cwd (a transcripts dir directly under <config>/projects is Claude \
Code's own and is taken); anything else is exit 2, bad_input, reason project_mismatch, before \
any model request. So an override given to dream-gate (--memory-dir, --transcripts-dir) must be \
given to dream-lock and dream-run too; the environment variables reach every stage by \
themselves.

With no session to review (none listed, or every transcript unreadable) nothing is asked of \
the model: run.status skipped, reason no_sessions or no_readable_sessions, exit 1, and the \
release downstream rolls the lock's time back. A session whose transcript cannot be read is \
left out, named in run.unreadable_sessions (warning unreadable_sessions); sessions_reviewed \
counts the others.

One runner per lock: before its first model request the run claims the lock's hold by its \
task id (in the sidecar .consolidate-lock.dreamkit; on etcd in a claim key bound to the holder's \
lease). A second dream-run handed the same envelope, while the first runs or after it \
finished, asks nothing and exits 1 holding nothing: run.status skipped, reason lock_claimed, \
claimed_by the first run's task id; only the claim of a run that crashed is taken over. \
`dream-lock release` of that second envelope changes nothing (exit 1, reason not_holder: its \
run.task_id is not the claim's), even after the first run ended and before its own release.

It builds a digest of each session under <state_dir>/digests/ (real user turns, assistant \
text and tool calls named with their key argument; rebuilt only when a transcript's size or \
mtime changed), then runs one model conversation (the main model, prompt caching on the stable \
prefix) with five tools: shell (ls find grep cat stat wc head tail joined by |, no shell, paths \
confined to the memory dir, transcripts dir, digests, the project dir unless --no-read-project \
(not when the project dir is / or holds the home directory: then it stays out, said with -v), \
and the CLAUDE.md files the sessions load (the user's <config>/CLAUDE.md; CLAUDE.md, \
CLAUDE.local.md and .claude/CLAUDE.md in each session's working directory and every folder \
above it), all read-only; files that may hold secrets are never read, wherever they are \
(.env*, *.pem, *.key, id_rsa and the other SSH key names, .netrc, .npmrc, .pypirc, \
credentials, .git/, .ssh/, .aws/ and the like; refused as arguments and skipped by grep's \
recursion); a FIFO, device or socket as an argument is refused; Landlock-confined where the \
kernel offers it, see -v; never / or a folder above the home directory, which is exit 2), read_file, \
write_file, edit_file and delete_file (.md files strictly inside the memory dir, no symlinks, \
no protected folders such as .git or agents, atomic writes; a write of the bytes a file \
already holds writes nothing). read_file returns a bounded window of lines and refuses (a tool \
error) a window holding a NUL byte: binary or sparse files never reach the model. A refused tool call is an error the model sees; the run goes \
on. A command the shell runs is killed with the run, even by kill -9.

Limits inside a turn: --deadline is checked before every tool call, and --shell-timeout never \
exceeds what is left of it; at most --max-calls-per-turn (64) tool calls run per assistant \
turn and at most --max-files (500) memory files change per run, the rest get a tool error \
saying why; the tool output returned in one turn is capped at 256 KiB. --max-answer-tokens \
(8192) is each request's max_tokens; a reply cut there with no tool call is asked once to \
continue, then the run fails (error truncated). --max-tokens is the whole run's budget.

Changed since read: write_file over an existing file, edit_file and delete_file are refused \
(a tool error: read it again) when the file's content differs from what this run last read or \
wrote there, or the run never read it, so a Claude Code session writing memory meanwhile never \
loses its write. Files the run created itself stay writable. Files are hashed in blocks, never \
held whole; a file over the 256 KiB per-file cap is not tracked (the tools cannot write one \
that size), so a write over it is refused.

Before every write the lock token is checked with the backend; a lost lock stops the run \
(status failed, error lock_lost) without restoring, since a restore would itself be an \
unfenced write; the task record names the snapshot for a manual restore. A check that cannot \
reach etcd stops it the same way, but as exit 4 (error remote, reason lock_unchecked). Right before the \
run's first write to a file, the file (content and mode) is copied to \
<state_dir>/snapshots/<task_id>/ together with what the write will leave there (an appended \
log, so a run killed between the two still knows both). A failed or aborted run restores the \
files it touched and removes the folders it made (unless --keep-partial); files it did not \
touch, such as a note Claude Code wrote meanwhile, are never changed, nor is a file someone \
edited after the run wrote it (named on stderr; the snapshot is kept), nor anything behind a \
symlink.",
    ),
    (
        "RESULT",
        "run = {status: completed|proposed|no_changes|skipped|dry_run|failed|aborted, task_id (null \
when no task started), mode: apply|propose, error, reason (skipped: no_sessions, \
no_readable_sessions, lock_claimed), message, sessions_reviewed, files_touched, diff: {created, modified, \
deleted}, diff_text (when proposing), warnings, summary, turns (every assistant turn), \
tool_calls, usage, landlock, recovered (an interrupted apply or undo rolled back first), \
unreadable_sessions, claimed_by, health}. files_touched and diff name what differs from \
before, byte for byte: a run that wrote only what files already held is completed with \
files_touched []. warnings may hold index_over_limit (MEMORY.md over what Claude Code loads), \
no_tool_calls (the model looked at nothing), health_worse (the run raised a count of the \
memory check, named on stderr and in health.worse), unreadable_sessions and \
notify_transcript_skipped.

health = {before: {counts}, after: {counts}, worse: [kind, ...]}: `dream-run check` run where \
the run works (the memory dir, or a proposal's staging copy, which keeps the files' mtimes but \
holds only the .md files) after any recovery and again after the run (after a restore, when \
one was done). The problems found before, at most 50, are listed in the prompt as work for \
the prune-and-index phase. The task record keeps health too. A memory dir that cannot be \
checked leaves health out, and the run goes on. error is one of max_turns, deadline, max_tokens, truncated, \
lock_lost, model (with the model error kind in message), environment, \
interrupted.

A completed run that changed files appends {source: \"dream\", task_id, files_touched, at} to \
<state_dir>/pending-updates.jsonl and, with --notify-transcript PATH, a memory_saved record to \
that transcript; a run that changed nothing appends neither. --notify-transcript must name a \
Claude Code transcript (<session id>.jsonl whose records carry that sessionId): anything else \
is exit 2 (reason not_a_transcript), a missing or non-regular file exit 3, both before any \
model request. The record follows the transcript's last record at the moment of the append \
(parentUuid, sessionId, cwd taken from it; a live session that appends meanwhile is read \
again); it is never appended after an incomplete last line: after a short wait the record is \
skipped with the warning notify_transcript_skipped. One O_APPEND write, undone if short.

Exit codes: 0 completed, proposed, no_changes or dry_run; 1 skipped (a claimed lock \
included), the run did not complete for a limit (max_turns, deadline, max_tokens, truncated), \
lost its lock, or an \
upstream stage said no (the envelope passes through); 2 bad input, a project mismatch or no \
lock; 3 local failure; 4 model failure after retries; 130/143 SIGINT/SIGTERM (the run is \
recorded aborted and restored).",
    ),
    (
        "HISTORY",
        "Task records are <state_dir>/tasks/<task_id>.json, rewritten atomically as the run \
goes: {task_id, type, status, phase, sessions_reviewing, files_touched, turns (the last 30), \
prior_mtime, lock_token, pid, started_at, ended_at, usage, error, snapshot}. `dream-run tasks` \
lists them newest first, {tasks, unreadable, warnings}, and reports a running record whose \
process is gone as failed with error orphaned (a run killed with kill -9), saying on stderr, \
when it had begun to write, that `dream-run recover` rolls it back; a record that \
cannot be read is left out, its id in unreadable, the warning unreadable_task_records in \
warnings and one line on stderr. The texts of the records it prints (turns, summary, errors, \
the diff) carry no control or bidi character and no memory line holding a secret. Every file \
under the state dir is mode 0600, every folder 0700, and is read with a size cap, never whole \
past it: a task record over 16 MiB is listed as unreadable, pending-updates.jsonl over 64 MiB \
is an error naming the cap (exit 3), and a digest index over 64 MiB is ignored (the digests \
are rebuilt).

`dream-run undo [TASK_ID]` puts the files a run touched back as they were before it. Without \
TASK_ID it takes the newest run that left changes behind: a completed run, or a failed, \
aborted or killed one whose snapshot was kept (--keep-partial, or orphan_kept below). It takes \
the lock like a run and releases it rolled back (undo is no consolidation). Undoing the newest \
consolidation also puts the last-consolidated time back to that run's prior_mtime, so its \
sessions are due again, and says so (last_consolidated_at in its JSON); undoing an older one \
leaves the time alone. When a file the run touched has changed since, it refuses with exit \
1 and names the files. The undone task becomes undone, its pending-updates line is withdrawn \
when no session was told yet, and `pending` no longer lists it. The snapshots of the last 10 \
completed runs are kept. `dream-run pending [--clear]` prints {updates: [...]} and, with \
--clear, empties the list.

For a Claude Code SessionStart hook, `dream-run pending --hook` and `dream-run show --hook` \
answer in the client's own JSON, {\"hookSpecificOutput\": {\"hookEventName\": \"SessionStart\", \
\"additionalContext\": \"...\"}}: the memory files changed since the last session (pending \
--hook clears the list: each update is announced once), or the proposal waiting for review. \
With nothing to say they print nothing at all (the one exception to one JSON object), and they \
always exit 0, a failure included (its one line on stderr), since the client shows any other \
exit as a hook error at every session start.

Crash safety: apply and undo change many files at once, all or nothing. Before the first file \
changes they write an intent journal, <state_dir>/journal/ (a copy of every file they will \
touch and what each will hold); the task record is their commit point; the journal goes \
after it. SIGINT or SIGTERM during them rolls back at the next file boundary (exit 130/143, \
the memory dir as before, the lock rolled back, the task unchanged). After a kill -9, \
`dream-run recover` and every command that changes state (a run, apply, undo, discard) find \
the journal and roll it back first, under the lock, saying so on stderr and in their JSON \
(recovered: {command, task_id, restored, skipped, lock_rolled_back}); a file someone changed \
since is left alone and named. Read-only commands (tasks, show, pending without --clear, any \
--dry-run) report it (interrupted: {command, task_id, started_at, files, journal}) and leave \
it. A journal that cannot be used (truncated, hand-edited, naming a path outside the memory \
dir, a file or link in its place) is moved aside to <state_dir>/journal.corrupt-<time> with its \
backing copies, and reported (journal_corrupt: {moved_to, error, files: [{path, backup, \
memory_now}]}); the command goes on. Only permission bits are ever restored (mode & 0o777), \
and backing copies are opened without following a link.

A run killed while it ran (kill -9, a power cut: its record still says running, its process \
is gone) is an incomplete transaction. The next command that changes state (a run's acquire, \
dream-lock acquire and exec, apply, undo, discard, recover) restores its snapshot first, \
under the lock, and marks it failed, error orphaned, with rolled_back_at (orphans: [{task_id, \
started_at, outcome: \"rolled_back\", files}]). When a file it touched changed since it last \
wrote it, nothing of it is restored: outcome orphan_kept names the files, its snapshot stays, \
and `dream-run undo TASK_ID` is the way back; so is it when its snapshot is not a folder of \
its own (a link in its place, or in place of snapshots/, is never followed). A restore the \
machine stops (a full disk, a folder the user may not write) fails the command (exit 3) and \
leaves the run as it was, for the next command to finish. A record is acted on only as the \
file of its own task id holds it; a link in place of tasks/ or proposals/ is never entered. \
A proposing run that died never touched the \
memory dir: its staging copy is removed (outcome proposal_dropped), and `dream-run discard \
TASK_ID` of it answers discarded. Nor does a crash postpone the next dream: a hold its holder \
never released (the lock file still names a dead PID) moved no time; dream-gate, status and \
the next acquire see the time from before it, and the next command that changes state puts \
that time back on the lock file, which Claude Code reads too (a hold record whose time from \
before is after the hold itself moves none).

Temporary files are named .dreamkit-<pid>-<random>.tmp beside the file they replace. Those a \
killed process left (its PID is dead, or the file is over 10 minutes old) are removed by every \
command that changes state, in the memory and state dirs (swept: {removed: [...], proposals: \
[...]}), with the staging copies of proposals whose run ended without proposing; `dream-run \
check` reports any it finds (stray_temp).

--dry-run on a run prints {prompt, tools, sessions, digests} at the top level, beside the \
envelope's sections and run = {status: \"dry_run\"}, and writes nothing, not even the digests; \
a release downstream (dream-lock release, or exec through its outcome file) rolls the lock back \
as for proposed, so a dry run under the lock never moves the last-consolidated time; on undo, apply, discard, pending --clear and recover it prints what would be done and \
changes nothing.",
    ),
    (
        "check/OUTPUT",
        "Checks the memory dir as Claude Code will load it, without a model, a lock or any \
write: no state dir is created, no interrupted apply is rolled back (one is named on stderr, \
with the way back, before the problems it explains). It reads every .md file \
under the memory dir (not following symbolic links, leaving out dot files and dot folders such \
as the lock files and .git; at most 16 MiB each) and prints {memory_dir, project_root, files, \
index: {path, exists, lines, chars, max_lines: 200, max_chars: 25000, cut_at_load: [{line, \
text}], cut_at_load_total}, problems: [{kind, file, line, detail}], counts: {kind: n}, notes}. \
file is relative to the memory dir, line is 1-based (absent for a whole file), counts names \
every kind, zeros included, in the order below. Problems are sorted by file, then line. \
cut_at_load lists at most 1,000 lines, each cut to 200 characters (… marks a cut), with no \
control or bidi character; cut_at_load_total counts every line cut. A line holding a \
credential, and every line of a private key block (BEGIN to END), is shown whole as \
[secret: line not shown]: here, in show and the diff of task records, and in --events. notes \
holds no_memory_dir when the project has no memory dir yet (as before its first \
consolidation): exit 0, files 0, nothing else to say.

The project (for missing_path and stale_index) is --cwd, the hook \
payload's or envelope's cwd, else the current directory; project_root is its git root (the \
folder the memory dir is named after). With --memory-dir alone there is no project: \
project_root is null and neither is checked.",
    ),
    (
        "check/PROBLEMS",
        "index_over_limit: MEMORY.md over 200 lines or 25,000 characters. Claude Code 2.1.332 \
trims the index, keeps its first 200 lines, and then, still over 25,000 characters, cuts at the \
last newline at or before character 25,000 (characters as JavaScript counts them: UTF-16 \
units). index.cut_at_load holds exactly the lines it drops, with their line numbers in the \
file; line is the first of them.

index_shape: MEMORY.md as the client writes it: no frontmatter (line 1), and each non-blank \
line a Markdown heading or one bullet entry linking a .md file, its hook after it (- \
[Title](file.md) — hook). A prose line, a code block, a bullet without such a link and two \
links on one line are each reported; the line is never quoted.

dangling_link: a Markdown link ([text](file.md), <...> targets, reference definitions) in the \
index or a topic file to a path inside the memory dir that does not exist. Links to the web, \
to anchors and to paths outside the memory dir are not memory links.

orphan_file: a .md file no chain of links from an index reaches (MEMORY.md, and a MEMORY.md \
in a sub-folder, is an index). The index does not link it; recall may still find it by its \
description.

duplicate_entry: two index lines linking the same file, two index lines with the same text \
once case, punctuation and white space are folded, or the same folded line (24 characters or \
more) in two places of the topic files. The detail names the first.

long_entry: an index line over 200 characters, counted in UTF-16 units as the client counts \
(151 to 200 is fine; the dream prompt still asks for about 150).

front_matter: a topic file (a .md file other than a MEMORY.md) not in the client's format: no \
frontmatter (a --- block at the top), one never closed, no name or no description, a name \
that is not a kebab-case slug (lowercase ASCII letters and digits joined by single -), a \
description over 300 characters, or a type (metadata.type, else a top-level type, as the \
client reads it) other than user, feedback, project or reference. No type at all is fine: \
older files have none and the client reads them. The frontmatter is read minimally (key: \
value lines, quoted values, block scalars, the nested metadata block by indentation); what it \
cannot read is passed over, never an error.

large_file: a topic file over 4,096 bytes: one memory per file, a few lines.

continuation_file: name-2.md (any -<digits> suffix) beside name.md in the same folder: one \
memory spilled over two files.

relative_date: yesterday, today, tomorrow, tonight, last/next/this/coming/past week (month, \
year, quarter, weekend, sprint, night, morning, afternoon, evening, a weekday), N units ago, \
in N units: in prose, not in code spans, fenced code or quoted text (\"...\", '...', “...”, \
‘...’; an apostrophe as in don't quotes nothing). The dream prompt asks for absolute dates.

missing_path: a repository path written in memory that the project no longer has, relative \
to its root or to the directory it was named by. Paths are words with a slash (checked when \
their last part has a known file extension or their first folder exists, so and/or and \
origin/main are not paths) and, in code spans only, file names with a known extension or \
such as Makefile (looked for anywhere in the project, leaving out dot folders, node_modules \
and target, and not at all in a project of more than 200,000 entries). URLs, absolute and ~ \
paths, and names of memory files are not checked.

stale_index: the index older than the project's newest session by more than --min-hours \
(the gate's DREAMKIT_MIN_HOURS, default 24). A topic file newer than the index is no problem: \
the client updates topic files in place.

secret: a credential: sk-ant-, sk-, ghp_, github_pat_, AKIA, xoxb-/xoxp-/xoxa-/xoxs-/xoxr- \
at a token boundary followed by a long key-shaped run (letters and digits mixed; AKIA and 16 \
capitals or digits), or a PEM private key header. Memory is sent to a model every session. \
The detail names the kind of credential only; the value is never printed, and cut_at_load \
shows the whole line as [secret: line not shown] (an AWS secret key beside its AKIA id, a key \
block's body).

not_markdown: a file that is not .md (Claude Code's memory is Markdown). unreadable: a file \
that cannot be read, is not UTF-8, is over 16 MiB, is a FIFO, socket or device (never \
opened), or is a symbolic link (not followed); a folder that cannot be listed. stray_temp: a \
temporary file (.dreamkit-<pid>-<random>.tmp) that a killed dreamkit process left (its PID is \
gone, or it is over 10 minutes old); the next command that changes state removes it.",
    ),
    (
        "check/EXIT STATUS",
        "0 healthy: no problem.

1 problems: each in problems, the counts in one line on stderr.

2 usage error or bad input (a bad --min-hours, a bad payload).

0 too when the project has no memory dir yet (notes: [no_memory_dir]).

3 the memory dir cannot be read (not a directory, no permission, or a --memory-dir that does \
not exist): nothing to check; error.reason says which (not_found, permission, not_a_file).",
    ),
    (
        "check/EXAMPLES",
        "  dream-run check -n --cwd ~/code/project | jq -c .counts

  dream-run check -n --cwd ~/code/project | jq -r '.problems[] | \"\\(.file):\\(.line // \"-\"): \\(.kind): \\(.detail)\"'

  dream-run check -n --cwd ~/code/project | jq -r '.index.cut_at_load[] | \"\\(.line): \\(.text)\"'

In CI, over a memory dir kept in the repository: dream-run check -n --memory-dir memory/ \
(exit 1 fails the job). As a SessionStart hook that tells the session what is wrong with its \
memory (nothing when it is healthy; always exit 0): dream-run check --hook; exit 0",
    ),
    (
        "eval/SCENARIOS",
        "A suite is a folder of scenario folders (hidden ones left out), or one scenario folder \
(one holding expect.json). A scenario holds memory/ (the memory dir before; may be empty), \
sessions/*.jsonl (at least one Claude Code transcript, in the client's record shape), project/ \
(optional: the repository's files, made a git repository with one commit; without it the \
project is an empty repository) and expect.json:

must_contain, must_not_contain: lists of regular expressions (Rust regex syntax; (?i), (?m), \
(?s) flags inline), each a string or {pattern, file, reason}: matched over the memory after, \
every .md file concatenated (sorted by path, one newline between), or the one file (relative \
to the memory dir; a missing file is no match).

max_problems: {kind: N}: at most N problems of that `dream-run check` kind after the run.

changes: \"none\" or \"some\": whether any .md file of the memory dir differs after the run.

needs_model: true when only judgement can pass it (--engine rules skips it).

project_root (default /project), home (default /home/user): the paths the transcripts name; \
worktrees: {path: branch}: linked git worktrees of the project (git worktree add), at paths \
the transcripts name; cwd: where the pipeline runs (default: the cwd of the session whose last \
record is newest). description: free text.

Each scenario runs in a temporary home (HOME, CLAUDE_CONFIG_DIR and XDG_STATE_HOME inside it; \
nothing of the user's is read or written): its paths are rewritten in every string of every \
record (home/.claude/projects/<slug> onto the temporary one, then the home, the worktrees and \
the project root, where each stands as a path), and each session is placed by its cwd, in \
<config>/projects/<slug(cwd)>/<sessionId>.jsonl, as the client does: a session in a \
subdirectory or a worktree shares the project's memory. Then dream-run check, the pipeline \
dream-gate --min-hours 0 --min-sessions 1 --scan-interval 0 | dream-lock exec -- dream-run \
--engine E [--provider P] [--model M] (the binaries beside this one, as processes, with the \
caller's model variables: ANTHROPIC_*, OPENAI_*, DREAMKIT_PROVIDER, CLAUDE_CODE_OAUTH_TOKEN, \
...; not the ones that place files: CLAUDE_*, XDG_*, GIT_*, DREAMKIT_LOCK_URL, ...), and \
dream-run check again.

The result: {suite, engine, provider, model, scenarios: [{name, outcome: \
pass|fail|error|skipped, pass (null when it did not run), error, needs_model, unmet: [{kind: \
must_contain|must_not_contain|max_problems|changes|run, pattern, file, reason, problem, \
expected, found}], check: {before, after} (the kinds above zero), run: {status, error, exit, \
changed}, tokens: {input, output, cache_creation, cache_read}, turns, seconds}], totals: \
{scenarios, passed, failed, errors, skipped}}. A run that ends neither completed nor \
no_changes is an unmet run expectation. On a terminal (or with -v) one line per scenario on \
stderr: eval: 3/12 duplicate-notes: pass (1.2 s). After a model failure (the run's exit 4) the \
scenarios left are not run. With --engine rules no network request is made.",
    ),
    (
        "eval/EXIT STATUS",
        "0 every scenario that ran passed (skipped ones aside).

1 some scenario failed, or could not run (error).

2 a malformed suite or scenario (bad JSON, no expect.json, no memory/ or no session, a bad \
regular expression, an unknown check kind, --only naming no scenario): the error names the \
scenario and what is wrong, and nothing runs.

3 the pipeline's binaries are not beside this one.

4 the model failed (a run's exit 4).",
    ),
    (
        "eval/EXAMPLES",
        "From a clone of dreamkit, the built-in suite without a model (what make eval runs): \
dream-run eval evals --engine rules | jq .totals

Against a model, one scenario, its unmet expectations: dream-run eval evals --only \
test-command-changed | jq '.scenarios[].unmet'

The local model (make eval-local does this): OPENAI_BASE_URL=$(scripts/local-model/serve.sh) \
OPENAI_API_KEY= OPENAI_MODEL=smollm2-135m-instruct dream-run eval evals --provider openai

Your own Claude Code, logged in through CLAUDE_CODE_OAUTH_TOKEN (the scenario's home is \
temporary, so the login kept in ~/.claude is not seen): dream-run eval evals --provider claude",
    ),
    (
        "RULES ENGINE",
        "--engine rules (or DREAMKIT_DREAM_ENGINE=rules; default model) makes the fixes that need \
no judgement, with no model request and no credential, through the same pipeline as a model \
run: envelope, lock, fencing and claim, snapshot, task record (engine: rules), --propose, \
show, apply, discard, undo, the pending-updates line, --notify-transcript, run.health, the \
same exit codes. It needs no session (with none it still runs). Each write goes through \
write_file or delete_file, so the write guard and the frontmatter stamp apply. run.changes \
(the task record's changes, show's changes) holds each change as {file, action, line, rule, \
detail, anchor}; --dry-run prints changes at the top level and run: {status: dry_run, changes}.

The rules, in order, repeated until nothing changes: secret (the value replaced by [redacted: \
KIND], a PEM private key block whole); relative_date (made absolute in UTC from the moment \
the line was written, as the Write/Edit/MultiEdit call of a transcript records it; each \
transcript scanned once and cached beside its digest; an unanchored line is left); \
duplicate_entry (a later index line equal once folded is removed; of byte-identical topic \
files one stays, never deleting under team/); dangling_link (relinked when one file of that \
name exists elsewhere, else the link dropped and its text marked (file missing)); long_entry \
(an index line over 200 characters cut to its title, link and a hook within 150, the rest \
appended to its topic file after (Moved from the index on DATE:)); orphan_file (an index line \
- [Title](file.md) — hook from the frontmatter); index_over_limit (the entries whose files \
changed longest ago moved to index-more.md, linked from one index line; check reads it as an \
index). missing_path, stale_index, duplicate lines across topic files and unanchored dates \
are left to the model and stay reported.

Before it completes, every word of the memory before must still be in the memory after, but \
for what a rule removed on purpose (a duplicate line, a redacted value, a replaced date \
phrase, a dropped link target, the old metadata.modified); else the run fails with error \
invariant (exit 1), naming the words, and the snapshot is restored. A rules run that changes \
nothing is no_changes (the lock's time rolls back); a completed one moves it like any \
consolidation: a pass that must not put off a model dream runs with --unlocked.",
    ),
    (
        "THROUGH YOUR CLAUDE CODE",
        "--provider claude (or DREAMKIT_PROVIDER=claude) lets the user's own Claude Code run the \
conversation with their login, no API key: DREAMKIT_CLAUDE_BIN, else claude on PATH, in print \
mode (-p --output-format stream-json --verbose), in an empty private folder, with our system \
prompt, no tool of its own (--tools \"\"), no hook (--settings disableAllHooks), no \
auto-memory, no CLAUDE.md, no slash command, no session saved (--no-session-persistence), \
--permission-mode dontAsk and --max-turns. The five tools stay ours: the client starts \
`dream-run tool-relay --socket PATH` (hidden; never run by hand) as its only MCP server, and the \
relay forwards each call over a 0600 Unix socket to this run, which runs it as for every \
provider (sandbox, Landlock, fence, changed-since-read, snapshot, journal, per-turn limits). \
The client calls them mcp__dreamkit__shell, mcp__dreamkit__read_file, mcp__dreamkit__write_file, \
mcp__dreamkit__edit_file and mcp__dreamkit__delete_file (allowed by those exact names). Its \
stream drives the progress, run.turns, usage (with usage.cost_usd) and --max-tokens; its \
error_max_turns is max_turns; \"Not logged in\" is auth (exit 4). A signal, the deadline, a \
lost lock or a client that ends without a result ends the client's process group, and the run \
fails and restores like any failure.",
    ),
    (
        "PROVENANCE",
        "write_file, edit_file and delete_file take an optional sources: [{session, quote}], \
which the prompt asks for with every new or changed fact and every deletion. Each source is \
checked as the call runs: the session must be one of the run's, and the quote (at most 300 \
characters) must occur in its transcript as decoded text (user and assistant text, tool inputs, \
tool_result bodies; whitespace folded; each transcript read once, streamed). The call runs \
either way; its result says which sources were not verified and why. Each change in the task \
record, run.changes and show keeps sources: [{session, quote, verified}]; a rules-engine \
change has source: {rule}. run.provenance: {changes, sourced, verified} counts the model's \
changing calls, those that named a source and those with one verified. A new topic file's \
originSessionId is its first verified source. `dream-run show TASK_ID --why` prints each \
change with where it came from, as text.",
    ),
    (
        "REVIEW MODE",
        "With --propose (or DREAMKIT_DREAM_MODE=propose; apply is the default, any other value \
is exit 2) the run is the same, but the agent works in a staging copy of the memory dir, \
<state_dir>/proposals/<task_id>/memory (every regular .md file, copied without following \
symlinks): nothing is written in the memory dir. The model is told the real memory dir and \
sees one memory dir: its reads and writes of the real paths go to the copy, and the copy's \
paths are shown as the real ones, so a proposal is exactly what an apply-mode run would have \
done. The run ends with status proposed, run.diff (paths as the real memory files) and \
run.diff_text (a unified diff, --- a/<rel> / +++ b/<rel>, /dev/null for the side of a created \
or deleted file, as git writes it); the task record has status proposed, \
the same diff, and a proposal manifest (each file it changes with the sha256 it had in the \
memory dir when the proposal was made, or null). A proposal whose diff is empty is not kept: \
status no_changes, the staging copy removed, nothing to show. No pending-updates line and no \
memory_saved record are written. A proposal is not a consolidation: `dream-lock release` reads \
run.status proposed, no_changes and skipped as a roll-back (exit 0, the outcome named), and \
under `dream-lock exec` the run writes its status to DREAMKIT_LOCK_OUTCOME_FILE so exec rolls \
back too; the last-consolidated time does not move.

`dream-run show [TASK_ID] [--diff]` prints {task_id, status, diff, diff_text} of a proposal \
(default: the latest; none is exit 1, reason no_proposal) or of any run that recorded its \
changes; with --diff, the unified diff as text, coloured (red, green, cyan headers) only on a \
terminal without NO_COLOR. `dream-run apply [TASK_ID]` takes the lock (busy: exit 1), checks \
that every file the proposal changes still has the sha256 recorded at proposal time (else exit \
1 naming the files, nothing applied), then writes the files all or nothing (see Crash safety), \
keeping each in the task's snapshot so `undo` works; it releases as completed (the time moves: \
this is the consolidation), records the task completed and appends the pending-updates line. \
`dream-run discard [TASK_ID]` deletes the staging copy and marks the task discarded.",
    ),
    (
        "*/ENVIRONMENT",
        "The model's: ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL, \
ANTHROPIC_MODEL (the main model), DREAMKIT_PROVIDER, OPENAI_BASE_URL, OPENAI_API_KEY (empty: none \
needed), OPENAI_MODEL, DREAMKIT_OPENAI_EXTRA_BODY, DREAMKIT_CLAUDE_BIN (--provider claude), \
DREAMKIT_RETRY_BASE_MS; see recap(1) for each. \
The values of the keys are never printed.

DREAMKIT_LOCK_TOKEN: the lock token when dream-run runs under dream-lock exec (the envelope's \
lock.token wins). DREAMKIT_LOCK_URL: the lock backend (file, or etcd://...; see dream-lock(1)). \
DREAMKIT_MIN_HOURS: check's --min-hours. DREAMKIT_DREAM_MODE=propose: as --propose. \
DREAMKIT_DREAM_ENGINE=rules|model: as --engine. \
CLAUDE_CONFIG_DIR, HOME, XDG_STATE_HOME (task records, snapshots, digests under \
$XDG_STATE_HOME/dreamkit/projects/SLUG), CLAUDE_COWORK_MEMORY_PATH_OVERRIDE, \
CLAUDE_CODE_REMOTE_MEMORY_DIR: where memory is, as for dream-gate(1).",
    ),
    (
        "EXAMPLES",
        "What would a consolidation do now? (no model request, nothing written)

  dream-gate --min-hours 0 --min-sessions 0 --scan-interval 0 | dream-lock exec -- dream-run --dry-run | jq .run

The fixes that need no model, listed, then made (no key needed):

  dream-run --engine rules --dry-run -n | jq -c '.changes[] | {file, line, rule, detail}'

  dream-gate --min-hours 0 --min-sessions 0 --scan-interval 0 | dream-lock exec -- dream-run --engine rules | jq -c '.run | {status, changes}'

The Stop hook pipeline (end hook commands with exit 0):

  dream-gate -q | dream-lock -q exec -- dream-run -q; exit 0

The runs so far, newest last:

  dream-run tasks | jq -r '.tasks[] | \"\\(.task_id) \\(.status)\"'

Help for one subcommand:

  dream-run help undo",
    ),
    (
        "apply/EXAMPLES",
        "Read the proposal, see which files applying it would write, then apply it:

  dream-run show | jq .; dream-run apply --dry-run | jq .",
    ),
    (
        "discard/EXAMPLES",
        "Drop the pending proposal (see first what would go):

  dream-run discard --dry-run | jq .",
    ),
    (
        "pending/EXAMPLES",
        "The consolidations Claude Code has not announced yet, and what --clear would drop:

  dream-run pending | jq '.updates'; dream-run pending --clear --dry-run | jq .would_clear

As a SessionStart hook (prints the client's hook JSON, or nothing):

  dream-run pending --hook; exit 0",
    ),
    (
        "recover/EXAMPLES",
        "After a crash or kill -9 during apply: roll back the interrupted apply, under the lock:

  dream-run recover | jq .recovered",
    ),
    (
        "show/EXAMPLES",
        "The proposal's diff, for a person:

  dream-run show | jq -r '.diff // empty'",
    ),
    (
        "tasks/EXAMPLES",
        "Failed runs and why:

  dream-run tasks | jq -c '.tasks[] | select(.status == \"failed\") | {task_id, error}'",
    ),
    (
        "undo/EXAMPLES",
        "Which files undoing the newest run that left changes would put back, then undo it:

  dream-run undo --dry-run | jq .; dream-run undo | jq .undone",
    ),
];
