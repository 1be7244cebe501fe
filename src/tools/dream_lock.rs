//! `dream-lock`: acquire, release, status and exec on the consolidation lock.

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use clap::Parser;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::claude::paths::ProjectHints;
use crate::claude::Project;
use crate::cli::envelope::{json_value, over_held, Stage, StageOf};
use crate::cli::report::{Interrupted, Undo};
use crate::cli::time::{from_epoch_ms, rfc3339};
use crate::cli::{
    signals, Binary, CommonArgs, Context, Delivery, Diag, Envelope, Enveloped, ErrorBody, Exit,
    Failure, FailureDocument, LocationArgs, Report, RunStatus, Section, Tool, Upstream,
};
use crate::lock::process::is_self_or_ancestor;
use crate::lock::{Acquired, Backend, BackendArgs, Lease, Released};
use crate::store;

/// The cross-process consolidation lock.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "dream-lock",
    version = crate::cli::VERSION,
    // `dream-lock` alone is a usage error naming the subcommands, not the help text.
    arg_required_else_help = false,
    about = "The cross-process consolidation lock",
    long_about = "The cross-process consolidation lock of a project's memory, shared with \
Claude Code: <memory_dir>/.consolidate-lock holds the holder's PID and its mtime is the \
last-consolidated time; with --backend etcd://..., the same lock on an etcd cluster that \
several machines share. Reads and writes the envelope passed down a dream pipeline."
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
    /// How the run ended [default: the envelope's run.status, else failed (roll back)]
    #[arg(long, value_enum)]
    pub outcome: Option<RunStatus>,
    /// Fencing token from acquire or status [default: the envelope's lock.token, or the token
    /// of `dream-lock status` output on stdin]
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Prior last-consolidated time in epoch ms, 0 for none [default: lock.prior_mtime, else 0]
    #[arg(long, value_name = "MS", requires = "token", value_parser = clap::value_parser!(i64).range(0..))]
    pub prior_mtime: Option<i64>,
    /// Release even though the holder is alive and is not this shell or one of its parents
    #[arg(long)]
    pub force: bool,
    /// Print what the release would do (lock.dry_run, lock.would_set_last_consolidated_at),
    /// change nothing; exit 0 when it would release, 1 when it would not
    #[arg(long)]
    pub dry_run: bool,
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

/// The envelope's `lock` section, as acquire writes it and release extends it. Fields this
/// version does not know (written by another) pass through unchanged, after the known ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LockSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    acquired: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    backend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prior_mtime: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    /// Busy (and refused releases): who holds it; `Some(None)` prints null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    holder_pid: Option<Option<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    held_since: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    warning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    released: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_consolidated_at: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
    /// `release --dry-run`: nothing was changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dry_run: Option<bool>,
    /// `release --dry-run`: the last-consolidated time the release would leave (now for a
    /// completed run, the prior one for a roll-back; null: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    would_set_last_consolidated_at: Option<Option<String>>,
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

impl LockSection {
    /// Names the backend and where its lock lives (`path` or `key`).
    fn at(mut self, backend: &dyn Backend) -> LockSection {
        let (kind, place) = backend.location();
        self.backend = Some(backend.name().to_string());
        match kind {
            "key" => self.key = Some(place),
            _ => self.path = Some(place),
        }
        self
    }
}

/// What a failed stage leaves in the lock section: a release keeps acquire's lease (token,
/// prior_mtime) for a retry and says `released: false`; an acquire says `acquired: false`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
enum LockFailed {
    Release {
        released: bool,
        error: ErrorBody,
    },
    Acquire {
        acquired: bool,
        reason: &'static str,
        error: ErrorBody,
    },
}

impl Section for LockSection {
    const KEY: &'static str = "lock";

    fn failed(held: Option<&Value>, failure: &Failure) -> Value {
        let error = ErrorBody::of(failure);
        let leased = held.and_then(|h| h.get("token")).is_some();
        let failed = if leased {
            LockFailed::Release {
                released: false,
                error,
            }
        } else {
            LockFailed::Acquire {
                acquired: false,
                reason: "error",
                error,
            }
        };
        over_held(held, &failed)
    }

    fn failed_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<LockFailed>()
    }
}

/// An upstream stage said no: the envelope untouched (exit 1), with why. `acquire`,
/// `release` and `exec` all pass it on.
#[derive(Serialize, JsonSchema)]
pub struct PassedThrough {
    #[serde(flatten)]
    envelope: Envelope,
    #[serde(skip)]
    why: String,
}

impl Report for PassedThrough {
    fn exit(&self) -> Exit {
        Exit::No
    }

    fn note(&self) -> Option<String> {
        Some(self.why.clone())
    }
}

/// The envelope with its `lock` section, the exit code it stands for and the line that says
/// why: a busy lock, a release done or refused, a dry run, or the lock's store failing.
#[derive(Serialize, JsonSchema)]
pub struct LockAnswer {
    #[serde(flatten)]
    document: Enveloped<LockSection>,
    #[serde(skip)]
    exit: Exit,
    #[serde(skip)]
    note: Option<String>,
}

impl LockAnswer {
    fn new(envelope: Envelope, section: LockSection, exit: Exit, note: Option<String>) -> Self {
        LockAnswer {
            document: Enveloped { envelope, section },
            exit,
            note,
        }
    }

    /// The store failed (exit 3 or 4): the failure goes into `lock.error` and the envelope's
    /// `error`, and the envelope flows on.
    fn failed(mut envelope: Envelope, mut lock: LockSection, failure: Failure) -> Self {
        let error = json_value(&ErrorBody::of(&failure));
        lock.error = Some(error.clone());
        envelope.set("error", error);
        LockAnswer::new(envelope, lock, failure.exit(), Some(failure.to_string()))
    }
}

impl Report for LockAnswer {
    fn exit(&self) -> Exit {
        self.exit
    }

    fn note(&self) -> Option<String> {
        self.note.clone()
    }
}

/// What `acquire` answers (and `exec` when it runs no command). The exit code is decided in
/// [`Report::exit`], nowhere else.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum AcquireReport {
    PassedThrough(PassedThrough),
    /// The lock was taken (exit 0). The lease is rolled back when the envelope, its only
    /// record, cannot be printed.
    Acquired {
        #[serde(flatten)]
        document: Enveloped<LockSection>,
        #[serde(skip)]
        lease: Option<(Box<dyn Backend>, Lease)>,
    },
    /// Another holds the lock (exit 1).
    Held(LockAnswer),
    /// The lock's store failed (exit 3 or 4).
    Failed(LockAnswer),
    /// A signal came while the lock was being taken: it was rolled back (exit 130/143).
    Interrupted(Interrupted),
}

impl Report for AcquireReport {
    fn exit(&self) -> Exit {
        match self {
            AcquireReport::Acquired { .. } => Exit::Yes,
            AcquireReport::PassedThrough(passed) => passed.exit(),
            AcquireReport::Held(answer) | AcquireReport::Failed(answer) => answer.exit(),
            AcquireReport::Interrupted(interrupted) => interrupted.exit(),
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            AcquireReport::Acquired { .. } => None,
            AcquireReport::PassedThrough(passed) => passed.note(),
            AcquireReport::Held(answer) | AcquireReport::Failed(answer) => answer.note(),
            AcquireReport::Interrupted(interrupted) => interrupted.note(),
        }
    }

    fn take_undo(&mut self) -> Option<Undo> {
        let AcquireReport::Acquired { lease, .. } = self else {
            return None;
        };
        let (backend, lease) = lease.take()?;
        // The token lives only in the printed envelope: a lease nobody received would stay
        // held with nobody to release it.
        Some(Box::new(move |diag: &Diag| {
            let line = match backend.release(&lease.token, lease.prior_mtime_ms, RunStatus::Failed) {
                Ok(Released::Yes { .. }) => {
                    "the lock was rolled back: its token was not delivered".to_string()
                }
                Ok(Released::NotHolder { .. }) => {
                    "the token was not delivered, and the lock is no longer ours: nothing was rolled back".to_string()
                }
                Err(failure) => format!(
                    "the token was not delivered, and rolling the lock back failed: {failure}"
                ),
            };
            diag.warn(&line);
        }))
    }
}

/// What `release` answers. The exit code is decided in [`Report::exit`], nowhere else.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ReleaseReport {
    PassedThrough(PassedThrough),
    /// Released (exit 0), or with `--dry-run` would be.
    Released(LockAnswer),
    /// Not released (exit 1): not ours any more, a live holder, a live claimant; with
    /// `--dry-run`, would not be.
    Refused(LockAnswer),
    /// The lock's store failed (exit 3 or 4).
    Failed(LockAnswer),
}

impl Report for ReleaseReport {
    fn exit(&self) -> Exit {
        match self {
            ReleaseReport::PassedThrough(passed) => passed.exit(),
            ReleaseReport::Released(answer)
            | ReleaseReport::Refused(answer)
            | ReleaseReport::Failed(answer) => answer.exit(),
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            ReleaseReport::PassedThrough(passed) => passed.note(),
            ReleaseReport::Released(answer)
            | ReleaseReport::Refused(answer)
            | ReleaseReport::Failed(answer) => answer.note(),
        }
    }
}

/// `dream-lock status` (exit 0 free, 1 held).
#[derive(Serialize, JsonSchema)]
pub struct StatusReport {
    #[serde(flatten)]
    status: StatusDocument,
    #[serde(skip)]
    note: Option<String>,
}

impl Report for StatusReport {
    fn exit(&self) -> Exit {
        if self.status.held {
            Exit::No
        } else {
            Exit::Yes
        }
    }

    fn note(&self) -> Option<String> {
        self.note.clone()
    }
}

/// `dream-lock exec`: the command's stdout is its own; ours only when no command ran.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ExecReport {
    /// Passed through, busy, or the lock's store failed: what acquire would print.
    Lock(Box<AcquireReport>),
    /// The command could not be started (exit 126, or 127 when not found); the lock was
    /// rolled back.
    NotRun {
        #[serde(flatten)]
        document: FailureDocument,
        #[serde(skip)]
        exit: Exit,
    },
    /// The command ran: its exit code (or ours) is the answer, stdout was its own.
    Ran {
        #[serde(skip)]
        exit: Exit,
    },
}

impl ExecReport {
    fn lock(report: AcquireReport) -> Self {
        ExecReport::Lock(Box::new(report))
    }
}

impl Report for ExecReport {
    fn exit(&self) -> Exit {
        match self {
            ExecReport::Lock(report) => report.exit(),
            ExecReport::NotRun { exit, .. } | ExecReport::Ran { exit } => *exit,
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            ExecReport::Lock(report) => report.note(),
            ExecReport::NotRun { document, .. } => Some(document.error.message.clone()),
            ExecReport::Ran { .. } => None,
        }
    }

    fn printed(&self) -> bool {
        !matches!(self, ExecReport::Ran { .. })
    }
}

/// `dream-lock status`'s document.
#[derive(Debug, Serialize, JsonSchema)]
struct StatusDocument {
    held: bool,
    holder_pid: Option<u32>,
    holder_alive: Option<bool>,
    command_running: bool,
    since: Option<String>,
    stale: bool,
    last_consolidated_at: Option<String>,
    token: Option<String>,
    backend: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    project: Project,
}

/// The project and backend a subcommand works on, with the envelope read from stdin.
struct Target {
    project: Project,
    backend: Box<dyn Backend>,
    /// What the acquire put back before handing the lock on (see [`take_lock`]).
    recovered: Option<Value>,
}

fn target(at: &LockLocation, cx: &Context) -> Result<Target, Failure> {
    let project = cx.project(&at.location)?.project.clone();
    let backend = at.backend.open(&project)?;
    Ok(Target {
        project,
        backend,
        recovered: None,
    })
}

impl Binary for Args {
    const STAGE: Option<&'static dyn Stage> = Some(&StageOf::<LockSection>::STAGE);

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn dispatch(self, cx: &Context) -> Delivery {
        match self.command {
            Subcommand::Acquire(args) => cx.finish(args),
            Subcommand::Release(args) => cx.finish(args),
            Subcommand::Status(args) => cx.finish(args),
            Subcommand::Exec(args) => cx.finish(args),
        }
    }
}

impl Tool for AcquireArgs {
    type Report = AcquireReport;

    fn run(self, cx: &Context) -> Result<AcquireReport, Failure> {
        acquire(&self, cx)
    }
}

impl Tool for ReleaseArgs {
    type Report = ReleaseReport;

    fn run(self, cx: &Context) -> Result<ReleaseReport, Failure> {
        release(&self, cx)
    }
}

impl Tool for StatusArgs {
    type Report = StatusReport;

    fn run(self, cx: &Context) -> Result<StatusReport, Failure> {
        status(&self, cx)
    }
}

impl Tool for ExecArgs {
    type Report = ExecReport;

    fn run(self, cx: &Context) -> Result<ExecReport, Failure> {
        exec(&self, cx)
    }

    fn schema(&self, _: &mut schemars::SchemaGenerator) -> Result<schemars::Schema, &'static str> {
        Err(
            "exec's stdout is the command's own (dream-lock prints the envelope only when \
no command ran: passed through, busy, a failed store, as `dream-lock acquire --schema` \
describes, or {\"error\"} when the command could not be started)",
        )
    }
}

/// `the etcd backend (key /x/holder)`.
fn describe(backend: &dyn Backend) -> String {
    let (kind, place) = backend.location();
    format!("the {} backend ({kind} {place})", backend.name())
}

/// The backend an acquirer's `lock` section names, when it is not `backend`.
fn other_backend(lock: &LockSection, backend: &dyn Backend) -> Option<String> {
    let name = lock.backend.as_deref()?;
    if name != backend.name() {
        return Some(format!("the {name} backend"));
    }
    // Two etcd keys are two locks; file paths are re-resolved from the project, so they
    // are not compared.
    let (kind, place) = backend.location();
    match lock.key.as_deref() {
        Some(named) if kind == "key" && named != place => {
            Some(format!("the {name} backend ({kind} {named})"))
        }
        _ => None,
    }
}

/// The section of a lock taken: with `recovered` when the acquire put back what killed
/// commands left (`orphans`, `recovered`, `journal_corrupt`, `swept`).
fn acquired_section(ctx: &Target, lease: &Lease) -> LockSection {
    let mut other = serde_json::Map::new();
    if let Some(recovered) = &ctx.recovered {
        other.insert("recovered".into(), recovered.clone());
    }
    LockSection {
        acquired: Some(true),
        pid: Some(lease.pid),
        prior_mtime: Some(lease.prior_mtime_ms),
        token: Some(lease.token.clone()),
        other,
        ..LockSection::default()
    }
    .at(ctx.backend.as_ref())
}

/// A busy lock: the envelope's `lock` section, and the one line that says so.
fn held(
    envelope: Envelope,
    backend: &dyn Backend,
    holder_pid: Option<u32>,
    since: Option<SystemTime>,
) -> AcquireReport {
    let lock = LockSection {
        acquired: Some(false),
        reason: Some("held".into()),
        holder_pid: Some(holder_pid),
        held_since: Some(since.map(rfc3339)),
        ..LockSection::default()
    }
    .at(backend);
    AcquireReport::Held(LockAnswer::new(
        envelope,
        lock,
        Exit::No,
        Some(format!("busy: {}", holder_line(holder_pid, since))),
    ))
}

/// `held by PID 4242 since 2026-12-03T10:00:00.000Z`.
fn holder_line(holder_pid: Option<u32>, since: Option<SystemTime>) -> String {
    let who = holder_pid.map_or_else(|| "an unknown process".to_string(), |p| format!("PID {p}"));
    match since {
        Some(since) => format!("the lock is held by {who} since {}", rfc3339(since)),
        None => format!("the lock is held by {who}"),
    }
}

/// An envelope from a stage that said no is passed through untouched; a mistyped one is bad
/// input (returned as the error).
fn declined(envelope: &Envelope) -> Result<Option<String>, Failure> {
    Ok(match envelope.upstream()? {
        Upstream::Proceed => None,
        Upstream::Declined(why) => Some(why),
    })
}

/// Resolves the project, records it in the envelope, and tries to take the lock for `pid`.
/// Taken, it first puts back what killed commands left (a run that died unfinished, an
/// interrupted apply or undo, their temporary files): a new consolidation never starts on
/// top of half-written memory. What it put back is the lease's `recovery`.
fn take_lock(
    at: &LockLocation,
    pid: u32,
    envelope: &mut Envelope,
    cx: &Context,
) -> Result<(Target, Acquired), Failure> {
    let diag = cx.diag();
    let mut ctx = target(at, cx)?;
    envelope.set("project", ctx.project.to_json()?);
    let mut acquired = ctx.backend.acquire(pid, SystemTime::now())?;
    if let Acquired::Yes(lease) = &mut acquired {
        let recovered =
            store::recover_under_lock(&ctx.project, Some(&mut lease.prior_mtime_ms), diag);
        match recovered {
            Ok(recovery) if recovery.is_empty() => {}
            Ok(recovery) => {
                ctx.recovered = Some(serde_json::to_value(&recovery).map_err(|e| {
                    Failure::environment(format!("cannot serialise the recovery: {e}"))
                })?);
            }
            Err(failure) => {
                finish(ctx.backend.as_ref(), lease, RunStatus::Failed, None, diag);
                return Err(failure);
            }
        }
    }
    Ok((ctx, acquired))
}

/// An acquire that failed on its environment or store: the envelope flows, lock.error set.
/// Usage and input failures are returned as they are (exit 2).
fn acquire_failed(envelope: Envelope, failure: Failure) -> Result<AcquireReport, Failure> {
    if !matches!(
        failure,
        Failure::Environment { .. } | Failure::Remote { .. }
    ) {
        return Err(failure);
    }
    let lock = LockSection {
        acquired: Some(false),
        reason: Some("error".into()),
        ..LockSection::default()
    };
    Ok(AcquireReport::Failed(LockAnswer::failed(
        envelope, lock, failure,
    )))
}

fn acquire(args: &AcquireArgs, cx: &Context) -> Result<AcquireReport, Failure> {
    let diag = cx.diag();
    let (_hints, _hook, mut envelope) = ProjectHints::gather(&args.at.location, cx.input()?)?;
    if let Some(why) = declined(&envelope)? {
        return Ok(AcquireReport::PassedThrough(PassedThrough {
            envelope,
            why,
        }));
    }
    let pid = args.pid.unwrap_or_else(std::os::unix::process::parent_id);
    // A signal while the lock is being written waits; then a lock taken is rolled back, so
    // the last-consolidated time never moves for a lease nobody will release.
    let hold = signals::hold();
    let taken = take_lock(&args.at, pid, &mut envelope, cx);
    if let Some(signal) = hold.end() {
        if let Ok((ctx, Acquired::Yes(lease))) = &taken {
            finish(ctx.backend.as_ref(), lease, RunStatus::Aborted, None, diag);
        }
        return Ok(AcquireReport::Interrupted(Interrupted(signal)));
    }
    match taken {
        Ok((ctx, Acquired::Yes(lease))) => Ok(AcquireReport::Acquired {
            document: Enveloped {
                envelope,
                section: acquired_section(&ctx, &lease),
            },
            lease: Some((ctx.backend, lease)),
        }),
        Ok((ctx, Acquired::Held { holder_pid, since })) => {
            Ok(held(envelope, ctx.backend.as_ref(), holder_pid, since))
        }
        Err(failure) => acquire_failed(envelope, failure),
    }
}

/// What a release works from: the lease, and where it came from.
struct ReleaseSource {
    token: String,
    prior_mtime: i64,
    /// The envelope to print: the one read, or a new one when stdin held `status` output.
    envelope: Envelope,
    /// From `--token` or `status` output, not from the acquirer's envelope.
    by_hand: bool,
}

/// The lease to release: `--token` (with `--prior-mtime`, else the stdin's when it names
/// the same token, else 0), else the envelope's `lock`, else `dream-lock status` output.
/// `Ok(Err(report))` is a pass-through of a declined envelope.
fn release_source(
    args: &ReleaseArgs,
    envelope: Envelope,
) -> Result<Result<ReleaseSource, PassedThrough>, Failure> {
    let upstream = envelope.upstream()?;
    // `dream-lock status` prints `held` at the top level, which no envelope has.
    let from_status =
        envelope.get("held").is_some_and(Value::is_boolean) && envelope.get("lock").is_none();
    let (token, prior) = if from_status {
        let token = envelope.get("token").and_then(Value::as_str);
        let prior = envelope.get("prior_mtime").and_then(Value::as_i64);
        (token.map(str::to_string), prior)
    } else {
        let section: LockSection = envelope.section("lock")?.unwrap_or_default();
        (section.token, section.prior_mtime)
    };
    // A stage that said no is passed through, unless the envelope carries a lease (our lock
    // token) or a token on the command line says what to release: whatever failed upstream,
    // a held lock is never stranded.
    if let (None, None, Upstream::Declined(why)) = (&args.token, &token, upstream) {
        return Ok(Err(PassedThrough { envelope, why }));
    }
    let (token, prior_mtime) = match (&args.token, token) {
        (Some(flag), from_stdin) => {
            let same = from_stdin.as_deref() == Some(flag.as_str());
            let prior = args.prior_mtime.or(prior.filter(|_| same)).unwrap_or(0);
            (flag.clone(), prior)
        }
        (None, Some(token)) if from_status => (token, prior.unwrap_or(0)),
        (None, Some(token)) => match prior {
            Some(prior) => (token, prior),
            None => {
                return Err(Failure::bad_input(
                    "envelope field `lock.prior_mtime` is missing: pass --token and --prior-mtime",
                ))
            }
        },
        (None, None) if from_status => {
            return Err(Failure::Usage(
                "nothing to release: status shows no live holder (it printed no token)".into(),
            ))
        }
        (None, None) => {
            return Err(Failure::Usage(
                "nothing to release: pipe in the envelope from `dream-lock acquire` or the output of `dream-lock status`, or pass --token".into(),
            ))
        }
    };
    let envelope = if from_status {
        // Only the project is kept: the rest describes the lock as it was.
        let mut fresh = Envelope::new();
        if let Some(project) = envelope.get("project") {
            fresh.set("project", project.clone());
        }
        fresh
    } else {
        envelope
    };
    Ok(Ok(ReleaseSource {
        token,
        prior_mtime,
        envelope,
        by_hand: args.token.is_some() || from_status,
    }))
}

fn release(args: &ReleaseArgs, cx: &Context) -> Result<ReleaseReport, Failure> {
    let diag = cx.diag();
    let (_hints, _hook, envelope) = ProjectHints::gather(&args.at.location, cx.input()?)?;
    let ReleaseSource {
        token,
        prior_mtime,
        mut envelope,
        by_hand,
    } = match release_source(args, envelope)? {
        Ok(source) => source,
        Err(passed) => return Ok(ReleaseReport::PassedThrough(passed)),
    };
    // Without an outcome the command in the middle said nothing (`cat`, a script that died):
    // roll back, so the next gate retries and the lock is never left held.
    let mut warning = None;
    // A proposal is not a consolidation: released like a roll-back, reported as `proposed`.
    let mut reported = None;
    let outcome = match args.outcome {
        // The flag wins: run.status is not read.
        Some(outcome) => outcome,
        None => match envelope.run_status()? {
            Some(status @ (RunStatus::Completed | RunStatus::Failed | RunStatus::Aborted)) => {
                status
            }
            Some(status) => {
                reported = Some(status.as_str());
                RunStatus::Failed
            }
            None if envelope.get("error").is_some() => {
                warning = Some("an earlier stage failed: rolled back as failed");
                RunStatus::Failed
            }
            None => {
                warning = Some("no run.status and no --outcome: rolled back as failed");
                RunStatus::Failed
            }
        },
    };
    let mut lock: LockSection = envelope.section("lock")?.unwrap_or_default();
    // A failure from an earlier try is not this release's.
    lock.error = None;
    let failed = |envelope, mut lock: LockSection, failure| {
        lock.released = Some(false);
        match failure {
            Failure::Environment { .. } | Failure::Remote { .. } => Ok(ReleaseReport::Failed(
                LockAnswer::failed(envelope, lock, failure),
            )),
            failure => Err(failure),
        }
    };
    let ctx = match target(&args.at, cx) {
        Ok(ctx) => ctx,
        Err(failure) => return failed(envelope, lock, failure),
    };
    if !envelope.get("project").is_some_and(Value::is_object) {
        envelope.set("project", ctx.project.to_json()?);
    }
    // A lease taken on another backend (or another etcd key) cannot be ours here: releasing
    // it would say not_holder and leave it held. (Only `acquire`'s envelope names one.)
    if let Some(other) = other_backend(&lock, ctx.backend.as_ref()) {
        return Err(Failure::Usage(format!(
            "the lease in lock was taken on {other}, but this release uses {}: pass the same --backend or DREAMKIT_LOCK_URL as acquire",
            describe(ctx.backend.as_ref())
        )));
    }
    let mut lock = lock.at(ctx.backend.as_ref());
    lock.token = Some(token.clone());
    lock.outcome = Some(reported.unwrap_or(outcome.as_str()).to_string());
    lock.warning = warning.map(str::to_string);
    let refused = |mut lock: LockSection,
                   envelope: Envelope,
                   reason: &str,
                   holder_pid: Option<u32>,
                   note: String| {
        lock.released = Some(false);
        lock.reason = Some(reason.to_string());
        lock.holder_pid = Some(holder_pid);
        ReleaseReport::Refused(LockAnswer::new(envelope, lock, Exit::No, Some(note)))
    };
    // By hand, a live holder that is not the caller (this shell or a parent of it) is
    // somebody else's run: releasing it lets a second run start beside it, so it takes
    // --force. (The acquirer's envelope is the lease itself, handed down the pipe.)
    if by_hand && !args.force {
        match ctx.backend.status(SystemTime::now()) {
            Ok(status) if status.token.as_deref() == Some(token.as_str()) => {
                let caller = status.holder_pid.is_some_and(is_self_or_ancestor);
                if !caller {
                    let note = format!(
                        "not released: {} and it is not this shell or a parent of it; pass --force to release it anyway",
                        holder_line(status.holder_pid, status.since)
                    );
                    return Ok(refused(
                        lock,
                        envelope,
                        "live_holder",
                        status.holder_pid,
                        note,
                    ));
                }
            }
            Ok(_) => {}
            Err(failure) => return failed(envelope, lock, failure),
        }
    }
    // One runner per lock: once a dream-run claimed this hold, only the envelope of that run
    // (its run.task_id) releases it. Another run handed the same envelope lost the claim and
    // holds nothing; its release must not roll back the winner's consolidation, even after the
    // winner ended and before its own release ran, so liveness cannot decide this. By hand
    // (no run in the envelope), only a claimant that still runs is protected: the claim of a
    // run that ended is what a person frees by hand.
    let run_task = envelope
        .get("run")
        .and_then(|r| r.get("task_id"))
        .and_then(Value::as_str);
    match ctx.backend.claimant(&token) {
        Ok(Some(claimant))
            if run_task != Some(claimant.task_id.as_str())
                && !args.force
                && (!by_hand || envelope.get("run").is_some() || claimant.alive()) =>
        {
            let note = if claimant.alive() {
                format!(
                    "not released: dream-run task {} (PID {}) claimed this lock and still runs; its own envelope releases it (or pass --force)",
                    claimant.task_id, claimant.pid
                )
            } else {
                format!(
                    "not released: the lock is held for dream-run task {}, not for this envelope's run; that run's own envelope releases it (or pass --force); nothing was changed",
                    claimant.task_id
                )
            };
            return Ok(refused(
                lock,
                envelope,
                "not_holder",
                Some(claimant.pid),
                note,
            ));
        }
        Ok(_) => {}
        Err(failure) => return failed(envelope, lock, failure),
    }
    if args.dry_run {
        let report = dry_release(
            ctx.backend.as_ref(),
            envelope,
            lock,
            &token,
            prior_mtime,
            outcome,
        );
        return Ok(report);
    }
    // A release is never cut short by a signal; what it did is still reported.
    let hold = signals::hold();
    let released = ctx.backend.release(&token, prior_mtime, outcome);
    let _late = hold.end();
    match released {
        Ok(Released::Yes { last_consolidated }) => {
            if let Some(text) = warning {
                diag.warn(text);
            }
            lock.released = Some(true);
            lock.last_consolidated_at = Some(last_consolidated.map(rfc3339));
            Ok(ReleaseReport::Released(LockAnswer::new(
                envelope,
                lock,
                Exit::Yes,
                None,
            )))
        }
        Ok(Released::NotHolder { holder_pid }) => Ok(refused(
            lock,
            envelope,
            "not_holder",
            holder_pid,
            "not released: the lock is no longer ours (taken over, or released already); nothing was changed".into(),
        )),
        Err(failure) => failed(envelope, lock, failure),
    }
}

/// `release --dry-run`: whether the token still holds, and what the release would leave.
fn dry_release(
    backend: &dyn Backend,
    envelope: Envelope,
    mut lock: LockSection,
    token: &str,
    prior_mtime: i64,
    outcome: RunStatus,
) -> ReleaseReport {
    lock.dry_run = Some(true);
    lock.released = Some(false);
    match backend.holds(token) {
        Ok(true) => {
            let (at, what) = if outcome == RunStatus::Completed {
                (
                    Some(rfc3339(SystemTime::now())),
                    "stamp the consolidation time now",
                )
            } else {
                let prior = (prior_mtime > 0).then(|| from_epoch_ms(prior_mtime));
                (prior.map(rfc3339), "roll the time back to before this hold")
            };
            lock.would_set_last_consolidated_at = Some(at);
            let note = format!(
                "dry run: would release the lock as {} and {what}; nothing was changed",
                outcome.as_str()
            );
            // Said at exit 0 too: the person asked what would happen.
            ReleaseReport::Released(LockAnswer::new(envelope, lock, Exit::Yes, Some(note)))
        }
        Ok(false) => {
            lock.reason = Some("not_holder".into());
            ReleaseReport::Refused(LockAnswer::new(
                envelope,
                lock,
                Exit::No,
                Some("dry run: would not release: the lock is no longer ours (taken over, or released already)".into()),
            ))
        }
        Err(failure) => ReleaseReport::Failed(LockAnswer::failed(envelope, lock, failure)),
    }
}

fn status(args: &StatusArgs, cx: &Context) -> Result<StatusReport, Failure> {
    let ctx = target(&args.at, cx)?;
    let s = ctx.backend.status(SystemTime::now())?;
    let (kind, place) = ctx.backend.location();
    let note = s.held.then(|| {
        let mut note = holder_line(s.holder_pid, s.since);
        if s.command_running {
            note.push_str(" (that process is gone; the command it ran still runs)");
        }
        note
    });
    let status = StatusDocument {
        held: s.held,
        holder_pid: s.holder_pid,
        holder_alive: s.holder_alive,
        command_running: s.command_running,
        since: s.since.map(rfc3339),
        stale: s.stale,
        last_consolidated_at: s.last_consolidated.map(rfc3339),
        token: s.token,
        backend: ctx.backend.name(),
        path: (kind == "path").then(|| place.clone()),
        key: (kind == "key").then_some(place),
        project: ctx.project,
    };
    Ok(StatusReport { status, note })
}

fn exec(args: &ExecArgs, cx: &Context) -> Result<ExecReport, Failure> {
    let diag = cx.diag();
    let (_hints, _hook, mut envelope) = ProjectHints::gather(&args.at.location, cx.input()?)?;
    if let Some(why) = declined(&envelope)? {
        return Ok(ExecReport::lock(AcquireReport::PassedThrough(
            PassedThrough { envelope, why },
        )));
    }
    // From before the lock is taken to its release, signals are forwarded to the command and
    // answered by a rollback, so none can leave the lock held with a moved mtime.
    let hold = signals::hold();
    let (ctx, lease) = match take_lock(&args.at, std::process::id(), &mut envelope, cx) {
        Ok((ctx, Acquired::Yes(lease))) => (ctx, lease),
        Ok((ctx, Acquired::Held { holder_pid, since })) => {
            return Ok(ExecReport::lock(held(
                envelope,
                ctx.backend.as_ref(),
                holder_pid,
                since,
            )));
        }
        Err(failure) => return acquire_failed(envelope, failure).map(ExecReport::lock),
    };
    let backend = ctx.backend.as_ref();
    if let Some(signal) = signals::claim() {
        finish(backend, &lease, RunStatus::Aborted, None, diag);
        drop(hold);
        return Ok(ExecReport::lock(AcquireReport::Interrupted(Interrupted(
            signal,
        ))));
    }
    envelope.set(
        "lock",
        serde_json::to_value(acquired_section(&ctx, &lease))
            .map_err(|e| Failure::environment(format!("cannot serialise the lock: {e}")))?,
    );
    // The command inherits the pin: the lock stays held while it runs, even if we are killed.
    let pin = match backend.pin(&lease) {
        Ok(pin) => pin,
        Err(failure) => {
            finish(backend, &lease, RunStatus::Failed, None, diag);
            return acquire_failed(envelope, failure).map(ExecReport::lock);
        }
    };
    // A lease that expires on its own (etcd) is renewed while the command runs.
    let keep_alive = match backend.keep_alive(&lease.token) {
        Ok(keep_alive) => keep_alive,
        Err(failure) => {
            finish(backend, &lease, RunStatus::Failed, None, diag);
            return acquire_failed(envelope, failure).map(ExecReport::lock);
        }
    };

    // Where the command may say `proposed` (dream-run --propose): then the release rolls back,
    // since a proposal is not a consolidation. Private, and removed when we are done.
    let outcome_file = tempfile::Builder::new()
        .prefix("dreamkit-outcome-")
        .tempfile();
    let mut command = Command::new(&args.command[0]);
    if let Ok(file) = &outcome_file {
        command.env(crate::lock::outcome::OUTCOME_FILE_ENV, file.path());
    }
    command
        .args(&args.command[1..])
        .env("DREAMKIT_LOCK_TOKEN", &lease.token)
        .stdin(Stdio::piped())
        // Its own process group: a terminal's Ctrl-C reaches it once, through us, and what
        // it leaves behind can be ended with it.
        .process_group(0);
    // The command must not outlive us: if we are killed (even with SIGKILL) the kernel kills
    // it too.
    signals::die_with_parent(&mut command);
    let pin_fd = pin.as_ref().map(AsRawFd::as_raw_fd);
    #[allow(unsafe_code)]
    // SAFETY: pre_exec has no safe form. Between fork and exec the closure makes one raw
    // fcntl system call (async-signal-safe, no allocation) on a descriptor this process
    // holds open for the command's life.
    unsafe {
        command.pre_exec(move || {
            if let Some(fd) = pin_fd {
                let fd = std::os::fd::BorrowedFd::borrow_raw(fd);
                rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
            }
            Ok(())
        });
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            finish(backend, &lease, RunStatus::Failed, None, diag);
            let name = args.command[0].to_string_lossy();
            let failure = Failure::Usage(format!("cannot run {name}: {e}"));
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return Ok(ExecReport::NotRun {
                document: FailureDocument::of(&failure),
                exit: Exit::Child(code),
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
    // Nothing of the command may outlive the lock: once it has exited (still unreaped, so
    // its group ID cannot be reused), whatever it left running in its group is killed.
    let ended = wait_unreaped(child.id());
    signals::stop_forwarding();
    if ended.is_ok() {
        kill_group(child.id());
    }
    let status = child.wait();
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    let status = match status {
        Ok(status) => status,
        Err(e) => {
            finish(backend, &lease, RunStatus::Failed, None, diag);
            return Err(Failure::environment(format!(
                "cannot wait for the command: {e}"
            )));
        }
    };
    let interrupted = signals::claim();
    if let Some(keep_alive) = keep_alive {
        if keep_alive.lost() {
            diag.warn("the lock's lease was lost while the command ran (expired or revoked)");
        }
        drop(keep_alive);
    }
    let said = outcome_file
        .as_ref()
        .ok()
        .and_then(|f| crate::lock::outcome::read(f.path()))
        .map(RunStatus::as_str);
    let outcome = if status.signal().is_some() || interrupted.is_some() {
        RunStatus::Aborted
    } else if status.success() && said.is_none() {
        RunStatus::Completed
    } else {
        RunStatus::Failed
    };
    if let Some(said) = said {
        diag.info(&format!(
            "the command ended {said} (not a consolidation): rolling back"
        ));
    }
    // The command's word names the roll-back only when it is the reason for it.
    let reason = said.filter(|_| outcome == RunStatus::Failed && status.success());
    let release_failed = finish(backend, &lease, outcome, reason, diag);
    drop(pin);
    drop(hold);
    // A release that failed (etcd died while the command ran) left the lock held until its
    // lease expires, with the last-consolidated time moved: that is the failure's exit (4 for
    // etcd), whatever the command said.
    if let Some(exit) = release_failed {
        diag.warn(
            "the lock could not be released after the command: it stays held until it expires",
        );
        return Ok(ExecReport::Ran { exit });
    }
    // Our exit code says what the lock recorded: a run we were told to stop is aborted, even
    // when the command ignored the signal and exited 0, or was killed because we were asked
    // twice.
    if let Some(signal) = interrupted {
        return Ok(ExecReport::Ran {
            exit: Exit::of_signal(signal),
        });
    }
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(1);
    Ok(ExecReport::Ran {
        exit: Exit::Child(code),
    })
}

/// Waits until the child `pid` has exited, leaving it unreaped.
fn wait_unreaped(pid: u32) -> std::io::Result<()> {
    use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| std::io::Error::other("not a process id"))?;
    loop {
        // WNOWAIT leaves the child to Child::wait.
        match waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// SIGKILL to the process group `pgid` (the command's own), if anything is left in it.
fn kill_group(pgid: u32) {
    let group = i32::try_from(pgid)
        .ok()
        .filter(|p| *p > 1)
        .and_then(rustix::process::Pid::from_raw);
    if let Some(group) = group {
        // The group is the command's, whose leader is not yet reaped.
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
}

/// Releases after `exec`; problems are reported on stderr, since stdout is the command's.
/// The exit of the failure when the release failed (etcd could not be reached, or answered
/// wrongly), so the lock may still be held.
/// `said` is what the command wrote to the outcome file (`proposed`...), shown as the reason
/// of a roll-back the command asked for.
fn finish(
    backend: &dyn Backend,
    lease: &Lease,
    outcome: RunStatus,
    said: Option<&str>,
    diag: &Diag,
) -> Option<Exit> {
    match backend.release(&lease.token, lease.prior_mtime_ms, outcome) {
        Ok(Released::Yes { .. }) => {
            // Said without -v: whether the consolidation time moved is what a person wants
            // to know after the command (-q silences it).
            diag.warn(&match outcome {
                RunStatus::Completed => {
                    "released the lock: completed, the consolidation time is now".to_string()
                }
                other => format!(
                    "rolled the lock back ({}): the consolidation time is as it was",
                    said.unwrap_or(other.as_str())
                ),
            });
            None
        }
        Ok(Released::NotHolder { holder_pid }) => {
            diag.warn(&format!(
                "the lock was taken over while the command ran (holder {holder_pid:?}); nothing was released"
            ));
            None
        }
        Err(failure) => {
            diag.warn(&format!("release failed: {failure}"));
            Some(failure.exit())
        }
    }
}

/// Prose for the man page.
#[cfg(feature = "docs")]
pub const MAN_SECTIONS: &[(&str, &str)] = &[
    (
        "THE LOCK",
        "File backend: <memory_dir>/.consolidate-lock, byte-compatible with Claude Code. Its \
content is the holder's PID in decimal (no newline); its mtime is the last-consolidated time. \
It is held when the mtime is within the last hour, that PID is alive, and that process started \
no later than 2 s after the mtime (a recycled PID holds nothing). Empty or non-numeric content \
names no holder (an empty file is what a completed release leaves). A lock file that cannot be \
read (permissions, I/O) fails closed: exit 3, never treated as stale. A lock file that exists \
but may not be written (read-only) is refused with exit 3, as Claude Code would be. A mtime in \
the future (a clock set back, a writer whose clock is ahead) is taken as written now: the gate \
never sees a negative age, a roll-back restores now rather than the future time, and a live \
holder keeps such a lock at most an hour after its process started, never for hours.

dreamkit processes serialise on an exclusive lock of the sidecar \
<memory_dir>/.consolidate-lock.dreamkit; against Claude Code, which does not know it, acquire \
writes the PID (atomically, by rename) and reads it back to confirm. The fencing token is \
<pid>:<mtime_ms>: any other writer changes it. The file backend never refreshes the mtime \
while a run goes on (that would move the last-consolidated time), so runs must end within the \
hour.

exec also writes <memory_dir>/.consolidate-lock.dreamkit-holder (its PID, under an exclusive \
flock) and its command inherits that descriptor: while any process keeps it open, a lock \
naming that PID stays held for dreamkit even after the PID died (within the hour). Claude Code \
does not read it; for Claude Code the parent-death signal below is what keeps the command from \
outliving exec.",
    ),
    (
        "ETCD BACKEND",
        "--backend etcd://host:port[,host:port...][/prefix] (or DREAMKIT_LOCK_URL) keeps the \
same lock on an etcd v3 cluster, for machines that share one memory; the status and envelope \
name key instead of path. The prefix names the shared memory (default /dreamkit/<slug>): the \
holder lives in <prefix>/holder, bound to a one-hour lease, and the last-consolidated time \
(epoch ms) in <prefix>/last-consolidated, which dream-gate reads. Acquire reads both keys in one \
linearizable read and writes both in one transaction that compares what it read: \
create_revision 0 for a free lock, the stale holder's mod_revision to replace it, so one of \
any number of racing acquirers wins. The holder key's mod_revision is the fencing token. \
Release deletes the holder and sets or deletes the time in one transaction that changes nothing \
unless the token still holds, then revokes the lease. The holder record names the PID, the host \
and the machine's boot and PID namespace: on the same machine a dead or recycled PID is stale at \
once; a holder elsewhere is taken at its word (holder_alive null) until its lease expires or \
the hour is over. exec renews the lease while its command runs.

Members are tried in the order given; one that refuses the connection, times out or has no \
leader is skipped for the next, within about 15 s. When none answers, every subcommand exits 4 \
with error.kind \"remote\" (in the envelope when there is one) and nothing is changed; there is \
never a local fallback. The URL speaks etcd's JSON gateway over plain HTTP. \
DREAMKIT_ETCD_LEASE_TTL (seconds, 1-3600, default 3600) shortens the lease, for tests.

A lease alone cannot guarantee mutual exclusion (a holder paused past its lease resumes \
believing it holds): what guards the memory is the token, checked against etcd before each \
write (dream-run) and by release.",
    ),
    (
        "PIPELINES",
        "Every subcommand but status reads the envelope on stdin and copies its other keys \
through. A stage proceeds only on an explicit yes of the right JSON type: gate.due and \
lock.acquired must be true or false, and run.status one of \"completed\", \"failed\", \
\"aborted\", \"proposed\", \"skipped\", \"no_changes\", \"dry_run\"; any other value there (\"false\", 0, null, a missing field, a section that is not \
an object) is bad input: exit 2, nothing changed. An envelope from a stage that said no \
(gate.due false, lock.acquired false, or a top-level error) is passed through untouched with \
exit 1 and one line on stderr saying why, so a pipeline never consolidates by accident. The one \
exception is release: whenever the envelope carries our lock token (lock.token) it releases \
(run.status completed) or rolls back (anything else, a top-level error or no run.status \
included), whatever failed upstream, so a failing stage never strands the lock. Every failing \
stage (dream-run included, a usage error or a missing credential too) prints the envelope it \
received with its own section failed and {kind, reason?, message} in a top-level error. On an \
environment failure (exit 3) the envelope still flows, with lock.error = {kind, message}. \
stdin is read only when it is not a terminal and -n is not given; an empty stdin is no input.

The stage between acquire and release is usually dream-run, but any command can stand in \
for it: it gets the envelope on stdin. This stand-in prints the sessions a run would \
consolidate, then fails on purpose, so the lock is rolled back and the last-consolidated time \
does not move:

  dream-gate | dream-lock exec -- sh -c 'jq -c .gate.sessions; exit 1'

The acquire | run | release form, with a stand-in that sets run.status for release:

  dream-gate | dream-lock acquire | jq -c '.run = {status: \"failed\"}' | dream-lock release

exec is the safer form: the lock is released, or rolled back, however the command ends, even \
on a signal. Each subcommand has its own page with its exit codes.",
    ),
    (
        "acquire/OUTPUT",
        "The default PID is the parent process (the hook's shell). On success lock = {acquired: \
true, backend, path, pid, prior_mtime, token}; when another live process holds the lock, lock \
= {acquired: false, reason: \"held\", backend, path, holder_pid, held_since} and the line \
\"busy: the lock is held by PID N since TIME\" on stderr. The token exists only in the printed \
envelope: when stdout cannot be written (a full disk, a closed pipe), acquire says so on \
stderr, rolls the lock back and exits 3.",
    ),
    (
        "acquire/EXIT STATUS",
        "0 acquired.

1 held by another live process, or an envelope from a stage that said no, passed through.

2 usage error or bad input (stdin that is not a JSON object).

3 the lock cannot be read or written: fails closed; the envelope flows with lock.error; or \
the token could not be printed (the lock was rolled back).

4 etcd backend: no member answered (or etcd refused); nothing was changed, and the envelope \
flows with lock.error.",
    ),
    (
        "release/OUTCOMES",
        "The outcome is --outcome, else the envelope's run.status. completed empties the \
content (the lock is free; now is the new last-consolidated time). failed and aborted roll \
back: delete the file when prior_mtime is 0 or unknown (a release by hand without \
--prior-mtime), else empty it and set its mtime back to prior_mtime, so the next gate can \
retry. With no outcome at all, release rolls back as \
failed, with a warning on stderr and lock.warning in the JSON: a pass-through stage such as \
cat never leaves the lock held nor moves the last-consolidated time. run.status proposed \
(dream-run --propose), no_changes (the run changed nothing), skipped (nothing to review, or \
the loser of a claim) and dry_run (dream-run --dry-run) are no consolidation and roll back too, \
reported as that outcome. Both add released, outcome \
and last_consolidated_at to lock.

One runner per lock: once a dream-run claimed this hold, only an envelope whose run.task_id \
is that run's releases it; any other (the loser of two runs handed the same envelope, whose \
run.status is skipped, reason lock_claimed) is refused with exit 1, reason \"not_holder\", and \
nothing is changed, also after the first run ended and before its own release: the lock is left \
to the first (--force overrides). By hand (--token or status output, no run section), only a \
claimant that still runs is protected.

The lease comes from the envelope's lock section (acquire's output), or from status's output \
on stdin, or from --token alone, to release by hand. Releasing a lock that is no longer ours \
changes nothing and exits 1 with reason \"not_holder\". An envelope whose lock names \
another backend, or another etcd key, than this release uses is refused with exit 2 (pass the \
same --backend or DREAMKIT_LOCK_URL as acquire). By hand (--token or status output), \
a holder that is alive (or whose command still runs) and is neither this process nor one of \
its parents is somebody else's run: release refuses with exit 1, reason \"live_holder\", \
unless --force. --outcome wins over run.status. To free a lock by hand: `dream-lock status | \
dream-lock release --force` (rolls back) or `dream-lock release --token TOKEN --outcome \
completed`.

--dry-run goes through every check above and stops before the release: lock.dry_run true, \
lock.released false, and lock.would_set_last_consolidated_at, the last-consolidated time the \
release would leave (now for completed, prior_mtime for a roll-back, null for none); exit 0 \
when the lock is still ours, 1 when it is not (reason not_holder) or a check refused. Nothing \
is created or changed, not even the guard file.",
    ),
    (
        "release/EXIT STATUS",
        "0 freed (completed) or rolled back (failed, aborted, or no outcome); with --dry-run, \
would be.

1 not ours any more (another process holds or changed the lock, or another dream-run claimed \
this hold; nothing changed), a live holder released by hand without --force, or an envelope \
from a stage that said no, passed through.

2 usage error or bad input: no lease to release, an unknown outcome, or a lease taken on \
another backend.

3 the lock cannot be read or written.

4 etcd backend: no member answered; the envelope flows with lock.error.",
    ),
    (
        "status/OUTPUT",
        "Prints {held, holder_pid, holder_alive, command_running, since, stale, \
last_consolidated_at, token, backend, path, project} at the top level. token is the live \
holder's (null when free), which release accepts on stdin; command_running is true when the \
holder (a killed exec) is gone but its command still runs. It reads no envelope.",
    ),
    (
        "status/EXIT STATUS",
        "0 free.

1 held by a live process.

2 usage error.

3 the lock cannot be read: fails closed.

4 etcd backend: no member answered.",
    ),
    (
        "exec/RUNNING CMD",
        "exec acquires with its own PID, runs CMD with the envelope (with lock) on its stdin and \
DREAMKIT_LOCK_TOKEN set, forwards SIGINT and SIGTERM to it (CMD runs in its own process \
group, so a terminal's Ctrl-C reaches it once), then releases: completed when CMD exits 0, \
rolled back when CMD exits 0 but wrote proposed, no_changes, skipped or dry_run to the file \
DREAMKIT_LOCK_OUTCOME_FILE names (a private temporary file exec makes; dream-run does this when \
its run was no consolidation), failed on another exit, aborted when CMD dies of a signal or exec was signalled. CMD cannot \
outlive exec: it gets SIGKILL when exec dies, even of SIGKILL (Linux parent-death signal), and \
whatever CMD leaves running in its process group is killed before the release. CMD's stdout \
is exec's stdout (the one exception to one JSON object). When the lock is busy, or the \
envelope said no, CMD is not run and exec prints the envelope and exits 1. Problems releasing \
after CMD are reported on stderr.",
    ),
    (
        "exec/EXIT STATUS",
        "0 CMD exited 0; the lock was released as completed (rolled back if CMD said proposed, \
no_changes, skipped or dry_run).

1-125 CMD's own exit code, after the lock was rolled back. exec's own answers share this \
range: 1 when CMD was not run because the lock is busy or the envelope said no (the envelope \
is on stdout), 2 for a usage error, 3 when the lock cannot be read (CMD not run), 4 when etcd \
cannot be reached or gives an answer that is not etcd's (CMD not run, nothing changed).

4 also when CMD ran but the lock could not be released afterwards (etcd died meanwhile): said \
on stderr; CMD's own exit code is not passed on, and the lock stays held until its lease \
expires.

126 CMD was found but could not be run; the lock was rolled back.

127 CMD was not found; the lock was rolled back.

128+N CMD died of signal N; the lock was rolled back.

130 exec was interrupted by SIGINT (while acquiring, or while CMD ran, whatever CMD then \
exited with); the lock was rolled back.

143 exec was terminated by SIGTERM, likewise; the lock was rolled back.",
    ),
    (
        "*/ENVIRONMENT",
        "DREAMKIT_LOCK_URL (the --backend default: file, or an etcd:// URL; anything else is \
refused rather than silently replaced by a local lock), DREAMKIT_ETCD_LEASE_TTL (a testing \
knob: the etcd holder lease in seconds), CLAUDE_CONFIG_DIR, HOME, \
CLAUDE_COWORK_MEMORY_PATH_OVERRIDE. exec sets DREAMKIT_LOCK_TOKEN and \
DREAMKIT_LOCK_OUTCOME_FILE for CMD.",
    ),
    (
        "EXAMPLES",
        "Who holds this project's lock, and since when? (exit 0 free, 1 held)

  dream-lock status | jq '{held, holder_pid, since, last_consolidated_at}'

The consolidation pipeline of a Stop hook: the gate's envelope, the lock taken for the run and \
released by its outcome:

  dream-gate -q | dream-lock -q exec -- dream-run -q",
    ),
    (
        "acquire/EXAMPLES",
        "Take the lock when a dream is due, and keep the envelope (its lock.token releases it):

  dream-gate -q | dream-lock acquire > envelope.json; jq .lock envelope.json",
    ),
    (
        "release/EXAMPLES",
        "Take the lock, ask what releasing it as completed would do, then roll it back:

  e=$(dream-gate --min-hours 0 --min-sessions 0 --scan-interval 0 | dream-lock acquire); echo \"$e\" | dream-lock release --dry-run --outcome completed | jq .lock; echo \"$e\" | dream-lock release --outcome failed | jq .lock.released",
    ),
    (
        "status/EXAMPLES",
        "One line for a prompt or a status bar:

  dream-lock status | jq -r 'if .held then \"dream running (PID \\(.holder_pid))\" else \"memory idle\" end'",
    ),
    (
        "exec/EXAMPLES",
        "Run a script of your own under the lock: it reads the envelope on stdin and finds the \
token in DREAMKIT_LOCK_TOKEN; exit 0 releases as completed, anything else rolls back:

  dream-gate --min-hours 0 --min-sessions 0 --scan-interval 0 | dream-lock exec -- sh -c 'cat >/dev/null; echo \"held with $DREAMKIT_LOCK_TOKEN\"; exit 1'",
    ),
];
