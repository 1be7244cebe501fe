//! `dream-lock`: acquire, release, status and exec on the consolidation lock.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use clap::Parser;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::claude::paths::ProjectHints;
use crate::claude::{Env, Project};
use crate::cli::time::rfc3339;
use crate::cli::{
    signals, CommonArgs, Diag, Envelope, Exit, Failure, Input, LocationArgs, Outcome, Tool,
};
use crate::lock::{Acquired, Backend, BackendArgs, Lease, Released, RunOutcome};

/// The cross-process consolidation lock.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "dream-lock",
    version,
    disable_help_subcommand = true,
    about = "The cross-process consolidation lock",
    long_about = "The cross-process consolidation lock of a project's memory, shared with \
Claude Code: <memory_dir>/.consolidate-lock holds the holder's PID and its mtime is the \
last-consolidated time. Reads and writes the envelope passed down a dream pipeline."
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: Subcommand,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Subcommand {
    /// Take the lock (exit 0) or report its holder (exit 1)
    Acquire(AcquireArgs),
    /// Free the lock after a run, or roll it back to the prior time
    Release(ReleaseArgs),
    /// Who holds the lock (exit 0 free, 1 held)
    Status(StatusArgs),
    /// Take the lock, run CMD with the envelope on stdin, release by how CMD ended
    Exec(ExecArgs),
}

/// Which project's lock.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LockLocation {
    #[command(flatten)]
    pub location: LocationArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
}

#[derive(Debug, Clone, clap::Args)]
pub struct AcquireArgs {
    #[command(flatten)]
    pub at: LockLocation,
    /// PID to record as the holder [default: the parent process, e.g. the hook's shell]
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pid: Option<u32>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub at: LockLocation,
    /// How the run ended [default: the envelope's run.status]
    #[arg(long, value_enum)]
    pub outcome: Option<RunOutcome>,
    /// Fencing token from acquire [default: the envelope's lock.token]
    #[arg(long, value_name = "TOKEN", requires = "prior_mtime")]
    pub token: Option<String>,
    /// Prior last-consolidated time in epoch ms, 0 for none [default: lock.prior_mtime]
    #[arg(long, value_name = "MS", requires = "token", value_parser = clap::value_parser!(i64).range(0..))]
    pub prior_mtime: Option<i64>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub at: LockLocation,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub at: LockLocation,
    /// The command to run while holding the lock, and its arguments
    #[arg(
        value_name = "CMD",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

/// The fields of an envelope's `lock` and `run` sections that a release uses.
#[derive(Debug, Default, Deserialize)]
struct LockSection {
    acquired: Option<bool>,
    token: Option<String>,
    prior_mtime: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct RunSection {
    status: Option<String>,
}

/// The project and backend a subcommand works on, with the envelope read from stdin.
struct Context {
    project: Project,
    backend: Box<dyn Backend>,
}

fn context(at: &LockLocation, hints: &ProjectHints) -> Result<Context, Failure> {
    let (project, _settings) = Project::resolve(hints, &Env::from_process())?;
    let backend = at.backend.open(&project)?;
    Ok(Context { project, backend })
}

impl Tool for Args {
    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn run(self, diag: &Diag) -> Result<Outcome, Failure> {
        match &self.command {
            Subcommand::Acquire(args) => acquire(args, diag),
            Subcommand::Release(args) => release(args, diag),
            Subcommand::Status(args) => status(args),
            Subcommand::Exec(args) => exec(args, diag),
        }
    }
}

fn lock_base(backend: &dyn Backend) -> serde_json::Map<String, Value> {
    let (kind, place) = backend.location();
    let mut lock = serde_json::Map::new();
    lock.insert("backend".into(), json!(backend.name()));
    lock.insert(kind.into(), json!(place));
    lock
}

fn acquired_json(backend: &dyn Backend, lease: &Lease) -> Value {
    let mut lock = serde_json::Map::new();
    lock.insert("acquired".into(), json!(true));
    lock.extend(lock_base(backend));
    lock.insert("pid".into(), json!(lease.pid));
    lock.insert("prior_mtime".into(), json!(lease.prior_mtime_ms));
    lock.insert("token".into(), json!(lease.token));
    Value::Object(lock)
}

fn held_json(backend: &dyn Backend, holder_pid: Option<u32>, since: Option<SystemTime>) -> Value {
    let mut lock = serde_json::Map::new();
    lock.insert("acquired".into(), json!(false));
    lock.insert("reason".into(), json!("held"));
    lock.extend(lock_base(backend));
    lock.insert("holder_pid".into(), json!(holder_pid));
    lock.insert("held_since".into(), json!(since.map(rfc3339)));
    Value::Object(lock)
}

/// Resolves the project, records it in the envelope, and tries to take the lock for `pid`.
fn take_lock(
    at: &LockLocation,
    hints: &ProjectHints,
    pid: u32,
    envelope: &mut Envelope,
) -> Result<(Context, Acquired), Failure> {
    let ctx = context(at, hints)?;
    envelope.set("project", ctx.project.to_json()?);
    let acquired = ctx.backend.acquire(pid, SystemTime::now())?;
    Ok((ctx, acquired))
}

fn acquire_failed(envelope: Envelope, failure: Failure, diag: &Diag) -> Result<Outcome, Failure> {
    let section = json!({"acquired": false, "reason": "error"});
    envelope.fail_stage("lock", section, failure, diag)
}

fn acquire(args: &AcquireArgs, diag: &Diag) -> Result<Outcome, Failure> {
    let (hints, _hook, mut envelope) =
        ProjectHints::gather(&args.at.location, Input::from_stdin()?)?;
    if envelope.upstream_declined() {
        return Ok(Outcome::new(Exit::No, &envelope));
    }
    let pid = args.pid.unwrap_or_else(std::os::unix::process::parent_id);
    // A signal while the lock is being written waits; then a lock taken is rolled back, so
    // the last-consolidated time never moves for a lease nobody will release.
    let hold = signals::hold();
    let taken = take_lock(&args.at, &hints, pid, &mut envelope);
    if let Some(signal) = hold.end() {
        if let Ok((ctx, Acquired::Yes(lease))) = &taken {
            finish(ctx.backend.as_ref(), lease, RunOutcome::Aborted, diag);
        }
        return Ok(signals::outcome(signal));
    }
    let (exit, lock) = match taken {
        Ok((ctx, Acquired::Yes(lease))) => (Exit::Yes, acquired_json(ctx.backend.as_ref(), &lease)),
        Ok((ctx, Acquired::Held { holder_pid, since })) => {
            (Exit::No, held_json(ctx.backend.as_ref(), holder_pid, since))
        }
        Err(failure) => return acquire_failed(envelope, failure, diag),
    };
    envelope.set("lock", lock);
    Ok(Outcome::new(exit, &envelope))
}

fn release(args: &ReleaseArgs, diag: &Diag) -> Result<Outcome, Failure> {
    let (hints, _hook, mut envelope) =
        ProjectHints::gather(&args.at.location, Input::from_stdin()?)?;
    let section: LockSection = envelope.section("lock")?.unwrap_or_default();
    let (token, prior_mtime) = match (&args.token, args.prior_mtime) {
        (Some(token), Some(prior)) => (token.clone(), prior),
        _ => match (section.acquired, section.token, section.prior_mtime) {
            (Some(true), Some(token), Some(prior)) => (token, prior),
            _ if envelope.upstream_declined() => return Ok(Outcome::new(Exit::No, &envelope)),
            _ => {
                return Err(Failure::Usage(
                    "nothing to release: pipe in the envelope from `dream-lock acquire`, or pass --token and --prior-mtime".into(),
                ))
            }
        },
    };
    let outcome = match args.outcome {
        Some(outcome) => outcome,
        None => {
            let run: RunSection = envelope.section("run")?.unwrap_or_default();
            match run.status.as_deref() {
                Some("completed") => RunOutcome::Completed,
                Some("failed") => RunOutcome::Failed,
                Some("aborted") => RunOutcome::Aborted,
                Some(other) => {
                    return Err(Failure::bad_input(format!(
                        "run.status is {other:?}; pass --outcome completed|failed|aborted"
                    )))
                }
                None => {
                    return Err(Failure::Usage(
                        "no outcome: pass --outcome completed|failed|aborted, or an envelope with run.status".into(),
                    ))
                }
            }
        }
    };
    let mut lock = match envelope.get("lock") {
        Some(Value::Object(map)) => map.clone(),
        _ => serde_json::Map::new(),
    };
    // A release is never cut short by a signal; what it did is still reported.
    let hold = signals::hold();
    let result = context(&args.at, &hints).and_then(|ctx| {
        if !envelope.get("project").is_some_and(Value::is_object) {
            envelope.set("project", ctx.project.to_json()?);
        }
        lock.extend(lock_base(ctx.backend.as_ref()));
        ctx.backend.release(&token, prior_mtime, outcome)
    });
    let _late = hold.end();
    lock.insert("outcome".into(), json!(outcome.as_str()));
    match result {
        Ok(Released::Yes { last_consolidated }) => {
            lock.insert("released".into(), json!(true));
            lock.insert(
                "last_consolidated_at".into(),
                json!(last_consolidated.map(rfc3339)),
            );
            envelope.set("lock", Value::Object(lock));
            Ok(Outcome::new(Exit::Yes, &envelope))
        }
        Ok(Released::NotHolder { holder_pid }) => {
            diag.warn("the lock is no longer ours: nothing was changed");
            lock.insert("released".into(), json!(false));
            lock.insert("reason".into(), json!("not_holder"));
            lock.insert("holder_pid".into(), json!(holder_pid));
            envelope.set("lock", Value::Object(lock));
            Ok(Outcome::new(Exit::No, &envelope))
        }
        Err(failure) => {
            lock.insert("released".into(), json!(false));
            envelope.fail_stage("lock", Value::Object(lock), failure, diag)
        }
    }
}

fn status(args: &StatusArgs) -> Result<Outcome, Failure> {
    let (hints, _hook, _envelope) = ProjectHints::gather(&args.at.location, Input::from_stdin()?)?;
    let ctx = context(&args.at, &hints)?;
    let s = ctx.backend.status(SystemTime::now())?;
    let (kind, place) = ctx.backend.location();
    let document = json!({
        "held": s.held,
        "holder_pid": s.holder_pid,
        "holder_alive": s.holder_alive,
        "since": s.since.map(rfc3339),
        "stale": s.stale,
        "last_consolidated_at": s.last_consolidated.map(rfc3339),
        "backend": ctx.backend.name(),
        kind: place,
    });
    Ok(Outcome::new(
        if s.held { Exit::No } else { Exit::Yes },
        &document,
    ))
}

fn exec(args: &ExecArgs, diag: &Diag) -> Result<Outcome, Failure> {
    let (hints, _hook, mut envelope) =
        ProjectHints::gather(&args.at.location, Input::from_stdin()?)?;
    if envelope.upstream_declined() {
        return Ok(Outcome::new(Exit::No, &envelope));
    }
    // From before the lock is taken to its release, signals are forwarded to the command and
    // answered by a rollback, so none can leave the lock held with a moved mtime.
    let hold = signals::hold();
    let (ctx, lease) = match take_lock(&args.at, &hints, std::process::id(), &mut envelope) {
        Ok((ctx, Acquired::Yes(lease))) => (ctx, lease),
        Ok((ctx, Acquired::Held { holder_pid, since })) => {
            envelope.set("lock", held_json(ctx.backend.as_ref(), holder_pid, since));
            return Ok(Outcome::new(Exit::No, &envelope));
        }
        Err(failure) => return acquire_failed(envelope, failure, diag),
    };
    let backend = ctx.backend.as_ref();
    if let Some(signal) = signals::claim() {
        finish(backend, &lease, RunOutcome::Aborted, diag);
        drop(hold);
        return Ok(signals::outcome(signal));
    }
    envelope.set("lock", acquired_json(backend, &lease));

    let mut child = match Command::new(&args.command[0])
        .args(&args.command[1..])
        .env("DREAMKIT_LOCK_TOKEN", &lease.token)
        .stdin(Stdio::piped())
        // Its own process group: a terminal's Ctrl-C reaches it once, through us.
        .process_group(0)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            finish(backend, &lease, RunOutcome::Failed, diag);
            let name = args.command[0].to_string_lossy();
            let failure = Failure::Usage(format!("cannot run {name}: {e}"));
            diag.warn(&failure.to_string());
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return Ok(Outcome {
                exit: Exit::Child(code),
                ..Outcome::new(Exit::Usage, &failure.to_document())
            });
        }
    };
    signals::forward_to(child.id());
    // A separate writer, so a command that never reads stdin cannot block us.
    let stdin_json = serde_json::to_vec(&envelope).unwrap_or_default();
    let writer = child.stdin.take().map(|mut stdin| {
        std::thread::spawn(move || {
            let _ = stdin
                .write_all(&stdin_json)
                .and_then(|_| stdin.write_all(b"\n"));
        })
    });
    let status = child.wait();
    signals::stop_forwarding();
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    let status = match status {
        Ok(status) => status,
        Err(e) => {
            finish(backend, &lease, RunOutcome::Failed, diag);
            return Err(Failure::environment(format!(
                "cannot wait for the command: {e}"
            )));
        }
    };
    let interrupted = signals::claim();
    let outcome = if status.signal().is_some() || interrupted.is_some() {
        RunOutcome::Aborted
    } else if status.success() {
        RunOutcome::Completed
    } else {
        RunOutcome::Failed
    };
    finish(backend, &lease, outcome, diag);
    drop(hold);
    if let (Some(signal), Some(libc::SIGKILL)) = (interrupted, status.signal()) {
        // Killed because we were asked twice: the exit says who asked.
        return Ok(Outcome::without_document(signals::exit_for(signal)));
    }
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(1);
    Ok(Outcome::without_document(Exit::Child(code)))
}

/// Releases after `exec`; problems are reported on stderr, since stdout is the command's.
fn finish(backend: &dyn Backend, lease: &Lease, outcome: RunOutcome, diag: &Diag) {
    match backend.release(&lease.token, lease.prior_mtime_ms, outcome) {
        Ok(Released::Yes { .. }) => diag.info(&format!("released: {}", outcome.as_str())),
        Ok(Released::NotHolder { holder_pid }) => diag.warn(&format!(
            "the lock was taken over while the command ran (holder {holder_pid:?}); nothing was released"
        )),
        Err(failure) => diag.warn(&format!("release failed: {failure}")),
    }
}

/// Prose for the man page.
pub const MAN_SECTIONS: &[(&str, &str)] = &[
    (
        "THE LOCK",
        "File backend: <memory_dir>/.consolidate-lock, byte-compatible with Claude Code. Its \
content is the holder's PID in decimal (no newline); its mtime is the last-consolidated time. \
It is held when the mtime is within the last hour, that PID is alive, and that process started \
no later than 2 s after the mtime (a recycled PID holds nothing). Empty or non-numeric content \
names no holder (an empty file is what a completed release leaves). A lock file that cannot be \
read (permissions, I/O) fails closed: exit 3, never treated as stale. A lock file that exists \
but may not be written (read-only) is refused with exit 3, as Claude Code would be.

dreamkit processes serialise on an exclusive lock of the sidecar \
<memory_dir>/.consolidate-lock.dreamkit; against Claude Code, which does not know it, acquire \
writes the PID (atomically, by rename) and reads it back to confirm. The fencing token is \
<pid>:<mtime_ms>: any other writer changes it. The file backend never refreshes the mtime \
while a run goes on (that would move the last-consolidated time), so runs must end within the \
hour.",
    ),
    (
        "SUBCOMMANDS",
        "acquire [--pid PID]: the default PID is the parent process (the hook's shell). Exit 0 \
with lock = {acquired: true, backend, path, pid, prior_mtime, token}; exit 1 with lock = \
{acquired: false, reason: \"held\", backend, path, holder_pid, held_since}.

release [--outcome completed|failed|aborted]: the default outcome is the envelope's \
run.status. completed empties the content (the lock is free; now is the new last-consolidated \
time). failed and aborted roll back: delete the file when prior_mtime was 0, else empty it and \
set its mtime back to prior_mtime, so the next gate can retry. Both exit 0 and add released, \
outcome and last_consolidated_at to lock. Releasing a lock that is no longer ours changes \
nothing and exits 1 with reason \"not_holder\". Without an envelope, pass --token and \
--prior-mtime.

status: prints {held, holder_pid, holder_alive, since, stale, last_consolidated_at, backend, \
path} at the top level; exit 0 when free, 1 when held.

exec [--] CMD [ARGS...]: acquires with exec's own PID, runs CMD with the envelope (with lock) \
on its stdin and DREAMKIT_LOCK_TOKEN set, forwards SIGINT and SIGTERM to it (CMD runs in its own \
process group, so a terminal's Ctrl-C reaches it once), then releases: completed when CMD exits \
0, failed on another exit, aborted when CMD dies of a signal or exec was signalled. CMD's \
stdout is exec's stdout (the one exception to one JSON object); the exit code is CMD's (128 + N \
when CMD died of signal N; 127 when CMD was not found and 126 when it could not be run, after a \
roll-back). When the lock is busy CMD is not run and exec prints the envelope and exits 1. \
Problems releasing after CMD are reported on stderr.",
    ),
    (
        "PIPELINES",
        "Every subcommand but status reads the envelope on stdin and copies its other keys \
through. An envelope from a stage that said no (gate.due false, lock.acquired false, or a \
top-level error) is passed through untouched with exit 1, so a pipeline never consolidates by \
accident. On an environment failure (exit 3) the envelope still flows, with lock.error = \
{kind, message}.

  dream-gate | dream-lock acquire | dream-run | dream-lock release

  dream-gate | dream-lock exec -- dream-run

The second form is safer: the lock is released, or rolled back, however dream-run ends, even \
on a signal.",
    ),
    (
        "ENVIRONMENT",
        "DREAMKIT_LOCK_URL (the --backend default; only file is available in this version, and \
any other URL is refused rather than silently replaced by a local lock), CLAUDE_CONFIG_DIR, \
HOME, CLAUDE_COWORK_MEMORY_PATH_OVERRIDE. exec sets DREAMKIT_LOCK_TOKEN for CMD.",
    ),
];
