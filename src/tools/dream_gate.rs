//! `dream-gate`: is memory consolidation due? Checks cheapest first; the first that fails
//! names the reason. The "not due" path costs one process start plus a few `stat`s.

use std::time::{Duration, SystemTime};

use clap::Parser;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::claude::paths::ProjectHints;
use crate::claude::sessions::{sessions_touched_since, SessionFile};
use crate::claude::{Env, Project, Settings};
use crate::cli::args::EnvNamed;
use crate::cli::duration::{count, format_duration, format_elapsed, parse_duration, parse_hours};
use crate::cli::envelope::{over_held, Stage, StageOf};
use crate::cli::time::{epoch_ms, from_epoch_ms, rfc3339};
use crate::cli::{
    Binary, CommonArgs, Context, Delivery, Diag, Enveloped, ErrorBody, Exit, Failure, LocationArgs,
    Report, Section, StageFailed, Tool,
};
use crate::files::{create_private_dir, write_atomic};
use crate::lock::{Backend, BackendArgs};

/// Name of the scan stamp in the project's state dir.
pub const SCAN_STAMP_FILE: &str = "last-scan";
/// The stamp is one number of epoch milliseconds; a larger file is ignored with a warning.
const MAX_SCAN_STAMP_BYTES: u64 = 64;

/// Decide whether memory consolidation is due for a project.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "dream-gate",
    version = crate::cli::VERSION,
    about = "Decide whether memory consolidation is due",
    long_about = "Decide whether memory consolidation (\"dream\") is due for a project, and list \
the sessions to consolidate. Checks run cheapest first and the first that fails names the \
reason: disabled, too_soon, throttled, too_few_sessions. Prints the envelope with its `gate` \
section; exits 0 when due, 1 when not."
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub location: LocationArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Session to leave out, the one still running [default: the hook payload's session_id]
    #[arg(long = "session", visible_alias = "current-session", value_name = "ID")]
    pub current_session: Option<String>,
    /// Time that must pass after the last consolidation: hours, or a duration (24, 24h, 90m)
    #[arg(
        long,
        value_name = "HOURS",
        env = "DREAMKIT_MIN_HOURS",
        default_value = "24",
        value_parser = EnvNamed(parse_hours)
    )]
    pub min_hours: f64,
    /// Sessions that must have changed since the last consolidation
    #[arg(
        long,
        value_name = "N",
        env = "DREAMKIT_MIN_SESSIONS",
        default_value = "5",
        value_parser = EnvNamed(clap::value_parser!(u32))
    )]
    pub min_sessions: u32,
    /// Least time between two scans of the transcripts dir (0 turns throttling off)
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub scan_interval: Duration,
}

/// Why consolidation is not due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    Disabled,
    TooSoon,
    Throttled,
    TooFewSessions,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Disabled => "disabled",
            Reason::TooSoon => "too_soon",
            Reason::Throttled => "throttled",
            Reason::TooFewSessions => "too_few_sessions",
        }
    }
}

/// The thresholds of one decision.
#[derive(Debug, Clone)]
pub struct Policy {
    pub min_hours: f64,
    pub min_sessions: u32,
    pub scan_interval: Duration,
    pub current_session: Option<String>,
}

/// The `gate` section.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub reason: Option<Reason>,
    pub detail: Option<&'static str>,
    pub last_consolidated: Option<SystemTime>,
    pub hours_since: Option<f64>,
    /// `None` when the transcripts were not scanned.
    pub sessions: Option<Vec<SessionFile>>,
    pub last_scan: Option<SystemTime>,
    /// Why not due, for a person: `not due: too_soon: 3.5 h of 24 h`.
    pub note: Option<String>,
}

impl Decision {
    pub fn due(&self) -> bool {
        self.reason.is_none()
    }

    /// The `gate` section as printed.
    pub fn into_section(self, policy: Policy) -> GateSection {
        GateSection {
            due: self.due(),
            reason: self.reason,
            detail: self.detail,
            last_consolidated_at: self.last_consolidated.map(rfc3339),
            hours_since: self.hours_since.map(|h| (h * 1000.0).round() / 1000.0),
            min_hours: policy.min_hours,
            min_sessions: policy.min_sessions,
            session_count: self.sessions.as_ref().map(Vec::len),
            sessions: self.sessions.unwrap_or_default(),
            current_session: policy.current_session,
            last_scan_at: self.last_scan.map(rfc3339),
        }
    }
}

/// `gate = {due, reason, detail, last_consolidated_at, hours_since, min_hours, min_sessions,
/// session_count, sessions, current_session, last_scan_at}`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct GateSection {
    pub due: bool,
    /// Why not due: the first check that failed.
    pub reason: Option<Reason>,
    /// Which switch turned consolidation off, or `no_transcripts_dir`.
    pub detail: Option<&'static str>,
    pub last_consolidated_at: Option<String>,
    pub hours_since: Option<f64>,
    pub min_hours: f64,
    pub min_sessions: u32,
    /// `null` when the transcripts were not scanned.
    pub session_count: Option<usize>,
    /// The sessions to consolidate, oldest first.
    pub sessions: Vec<SessionFile>,
    pub current_session: Option<String>,
    pub last_scan_at: Option<String>,
}

/// What a failed gate leaves in its section: `{due: false, reason: "error", error}`, written
/// over what the envelope held there.
#[derive(Debug, Serialize, JsonSchema)]
struct GateFailed {
    due: bool,
    reason: &'static str,
    error: ErrorBody,
}

impl Section for GateSection {
    const KEY: &'static str = "gate";

    fn failed(held: Option<&Value>, failure: &Failure) -> Value {
        let failed = GateFailed {
            due: false,
            reason: "error",
            error: ErrorBody::of(failure),
        };
        over_held(held, &failed)
    }

    fn failed_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<GateFailed>()
    }
}

/// What dream-gate prints: the envelope with its `gate` section (exit 0 due, 1 not due), or,
/// when the machine or the lock's store failed, the envelope with the gate failed (exit 3 or
/// 4), so a later stage sees `gate.due == false`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum GateReport {
    Decided {
        #[serde(flatten)]
        document: Enveloped<GateSection>,
        /// Why not due, for a person.
        #[serde(skip)]
        note: Option<String>,
    },
    Failed(StageFailed<GateSection>),
}

impl Report for GateReport {
    fn exit(&self) -> Exit {
        match self {
            GateReport::Decided { document, .. } if document.section.due => Exit::Yes,
            GateReport::Decided { .. } => Exit::No,
            GateReport::Failed(failed) => failed.failure.exit(),
        }
    }

    fn note(&self) -> Option<String> {
        match self {
            GateReport::Decided { note, .. } => note.clone(),
            GateReport::Failed(failed) => Some(failed.failure.to_string()),
        }
    }
}

/// Runs the checks in order. Only the session scan's outcome is persisted (the scan stamp).
/// A decision that is not due carries its one human line ([`Decision::note`]); with `-v` each
/// check that passed is reported too. Neither costs a system call beyond the checks'.
pub fn decide(
    project: &Project,
    settings: &Settings,
    env: &Env,
    backend: &dyn Backend,
    policy: &Policy,
    now: SystemTime,
    diag: &Diag,
) -> Result<Decision, Failure> {
    let mut decision = Decision {
        reason: None,
        detail: None,
        last_consolidated: None,
        hours_since: None,
        sessions: None,
        last_scan: None,
        note: None,
    };
    if let Some(off) = settings.dream_disabled(env) {
        decision.reason = Some(Reason::Disabled);
        decision.detail = Some(off.as_str());
        decision.note = Some(format!("not due: disabled: {}", off.as_str()));
        return Ok(decision);
    }
    let passed = |text: &dyn Fn() -> String| {
        if diag.is_verbose() {
            diag.info(&text());
        }
    };
    passed(&|| "enabled: auto memory and auto dream are on".to_string());

    decision.last_consolidated = backend.last_consolidated()?;
    if let Some(last) = decision.last_consolidated {
        // Never negative: a future mtime counts as written now.
        let hours = epoch_ms(now).saturating_sub(epoch_ms(last)).max(0) as f64 / 3_600_000.0;
        decision.hours_since = Some(hours);
        if hours < policy.min_hours {
            decision.reason = Some(Reason::TooSoon);
            decision.note = Some(format!(
                "not due: too_soon: {} h of {} h",
                tenths_down(hours),
                policy.min_hours
            ));
            return Ok(decision);
        }
        passed(&|| {
            format!(
                "time: {} h of {} h since the last consolidation at {}",
                tenths_down(hours),
                policy.min_hours,
                rfc3339(last)
            )
        });
    } else {
        passed(&|| "time: never consolidated".to_string());
    }

    let interval = format_duration(policy.scan_interval);
    if policy.scan_interval.is_zero() {
        passed(&|| "throttle: off (--scan-interval 0)".to_string());
    } else {
        let stamp_path = project.state_dir.join(SCAN_STAMP_FILE);
        decision.last_scan = read_scan_stamp(&stamp_path, diag);
        match decision.last_scan.map(|at| now.duration_since(at)) {
            None => passed(&|| format!("throttle: no earlier scan, interval {interval}")),
            // A stamp from the future (the clock was set back) does not throttle.
            Some(Err(_)) => passed(&|| "throttle: the last scan is in the future".to_string()),
            Some(Ok(elapsed)) if elapsed < policy.scan_interval => {
                decision.reason = Some(Reason::Throttled);
                decision.note = Some(format!(
                    "not due: throttled: last scan {} ago, interval {interval}",
                    format_elapsed(elapsed)
                ));
                return Ok(decision);
            }
            Some(Ok(elapsed)) => passed(&|| {
                format!(
                    "throttle: last scan {} ago, interval {interval}",
                    format_elapsed(elapsed)
                )
            }),
        }
    }

    let sessions = sessions_touched_since(
        &project.transcripts_dir,
        decision.last_consolidated,
        policy.current_session.as_deref(),
    )
    .map_err(|e| Failure::io("scan the transcripts dir", &project.transcripts_dir, &e))?;
    let found = format!(
        "{} of {}{}",
        sessions.len(),
        count(policy.min_sessions, "session", "sessions"),
        match decision.last_consolidated {
            Some(last) => format!(" since {}", rfc3339(last)),
            None => " (never consolidated)".to_string(),
        }
    );
    let too_few = sessions.len() < policy.min_sessions as usize;
    // A project Claude Code never ran in has no transcripts dir: say so, and write no stamp,
    // so that its first sessions are counted at once rather than after the throttle.
    let no_dir = too_few
        && sessions.is_empty()
        && std::fs::metadata(&project.transcripts_dir)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
    decision.sessions = Some(sessions);
    if no_dir {
        decision.reason = Some(Reason::TooFewSessions);
        decision.detail = Some("no_transcripts_dir");
        decision.note = Some(format!("not due: too_few_sessions: {found}"));
    } else if too_few {
        decision.reason = Some(Reason::TooFewSessions);
        decision.note = Some(format!("not due: too_few_sessions: {found}"));
        if policy.scan_interval > Duration::ZERO {
            write_scan_stamp(
                &project.state_dir,
                &project.state_dir.join(SCAN_STAMP_FILE),
                now,
                diag,
            );
            decision.last_scan = Some(now);
        }
    } else {
        passed(&|| format!("due: {found}"));
    }
    Ok(decision)
}

/// Hours to one decimal, rounded down, so that a gate still closed never reads as
/// `24.0 h of 24 h`.
fn tenths_down(hours: f64) -> String {
    format!("{:.1}", (hours * 10.0).floor() / 10.0)
}

/// The stamp is a cache: one we cannot read only costs a scan.
fn read_scan_stamp(path: &std::path::Path, diag: &Diag) -> Option<SystemTime> {
    // A FIFO in its place is refused, not waited on.
    match crate::files::read_regular_capped_to_string(path, MAX_SCAN_STAMP_BYTES) {
        Ok(text) => match text.trim().parse::<i64>() {
            Ok(ms) => Some(from_epoch_ms(ms)),
            Err(_) => {
                diag.info(&format!(
                    "ignoring unreadable scan stamp {}",
                    path.display()
                ));
                None
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            diag.warn(&format!("cannot read scan stamp {}: {e}", path.display()));
            None
        }
    }
}

fn write_scan_stamp(
    state_dir: &std::path::Path,
    path: &std::path::Path,
    now: SystemTime,
    diag: &Diag,
) {
    let written = create_private_dir(state_dir)
        .and_then(|_| write_atomic(path, epoch_ms(now).to_string().as_bytes(), 0o600));
    if let Err(e) = written {
        diag.warn(&format!("cannot write scan stamp {}: {e}", path.display()));
    }
}

impl Binary for Args {
    const STAGE: Option<&'static dyn Stage> = Some(&StageOf::<GateSection>::STAGE);

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn dispatch(self, cx: &Context) -> Delivery {
        cx.finish(self)
    }
}

impl Tool for Args {
    type Report = GateReport;

    fn run(self, cx: &Context) -> Result<GateReport, Failure> {
        let diag = cx.diag();
        let (_hints, hook, mut envelope) = ProjectHints::gather(&self.location, cx.input()?)?;
        let current_session = self
            .current_session
            .clone()
            .or_else(|| hook.and_then(|payload| payload.session_id));
        let policy = Policy {
            min_hours: self.min_hours,
            min_sessions: self.min_sessions,
            scan_interval: self.scan_interval,
            current_session,
        };

        let env = cx.env();
        let result = cx.project(&self.location).and_then(|located| {
            let (project, settings) = (&located.project, &located.settings);
            if diag.is_verbose() {
                diag.info(&format!(
                    "memory dir {}, transcripts dir {}",
                    project.memory_dir.display(),
                    project.transcripts_dir.display()
                ));
            }
            envelope.set("project", project.to_json()?);
            let backend = self.backend.open(project)?;
            decide(
                project,
                settings,
                env,
                backend.as_ref(),
                &policy,
                SystemTime::now(),
                diag,
            )
        });
        match result {
            Ok(mut decision) => {
                let note = decision.note.take();
                let section = decision.into_section(policy);
                Ok(GateReport::Decided {
                    document: Enveloped { envelope, section },
                    note,
                })
            }
            // The envelope keeps flowing so a later stage sees `gate.due == false`; usage and
            // input errors are exit 2 (in the envelope too, by the shared main).
            Err(failure @ (Failure::Environment { .. } | Failure::Remote { .. })) => {
                Ok(GateReport::Failed(StageFailed::new(envelope, failure)))
            }
            Err(failure) => Err(failure),
        }
    }
}

/// Prose for the man page.
#[cfg(feature = "docs")]
pub const MAN_SECTIONS: &[(&str, &str)] = &[
    (
        "CHECKS",
        "Run cheapest first; the first that fails is gate.reason (exit 1).

disabled: auto memory or auto dream is off. gate.detail says which: auto_memory_off \
(CLAUDE_CODE_DISABLE_AUTO_MEMORY truthy, or autoMemoryEnabled false), auto_dream_off \
(autoDreamEnabled false), simple (CLAUDE_CODE_SIMPLE), remote (CLAUDE_CODE_REMOTE without \
CLAUDE_CODE_REMOTE_MEMORY_DIR). An explicitly falsy CLAUDE_CODE_DISABLE_AUTO_MEMORY turns auto \
memory on against simple mode, remote mode and the settings, as in Claude Code.

too_soon: less than --min-hours since the last consolidation (a plain number is hours; \
units work too: 24, 24h, 90m), the mtime of \
<memory_dir>/.consolidate-lock. No lock file means never consolidated. A lock file whose state \
cannot be read (permissions, I/O) fails closed: exit 3. With --backend etcd://... (or \
DREAMKIT_LOCK_URL) the time is read from etcd's <prefix>/last-consolidated key instead, \
linearizably; an etcd that cannot be reached is exit 4, never \"due\".

throttled: the time gate passed but the last scan of the transcripts found too few sessions \
less than --scan-interval ago. The stamp (epoch milliseconds) is kept in \
<state_dir>/last-scan and written only when the time gate passed and the session gate failed; \
gate.last_scan_at shows it. A stamp in the future does not throttle.

too_few_sessions: fewer than --min-sessions transcripts <uuid>.jsonl directly in the \
transcripts dir changed after the last consolidation, not counting the current session \
(--session, else the hook payload's session_id). Decided from directory entries and \
stat alone; no transcript is opened. A missing transcripts dir holds no sessions: \
gate.detail is no_transcripts_dir and no scan stamp is written (the project's first sessions \
count at once); an unreadable one is exit 3.",
    ),
    (
        "OUTPUT",
        "The envelope, every key of an envelope read on stdin passed through, with project = \
{cwd, slug, transcripts_dir, memory_dir, state_dir} and gate = {due, reason, detail, \
last_consolidated_at, hours_since, min_hours, min_sessions, session_count, sessions, \
current_session, last_scan_at}. sessions are {id, path, modified_at, bytes}, oldest first. \
session_count is null when the transcripts were not scanned (disabled, too_soon, throttled). \
On an environment failure (exit 3) or an unreachable etcd (exit 4) gate is {due: false, \
reason: \"error\", error: {kind, message}}, so a following dream-lock does nothing.",
    ),
    (
        "LOCATIONS",
        "Flags win, then stdin (a hook payload's cwd, session_id and transcript_path, or an \
envelope's project), then the defaults. The project is --cwd, else the payload's cwd, else \
the current directory, with symbolic links resolved as Claude Code does. The transcripts dir \
is --transcripts-dir, else the directory of the payload's transcript_path, else \
$CLAUDE_CONFIG_DIR/projects/<slug(cwd)>. The memory dir is --memory-dir, else \
CLAUDE_COWORK_MEMORY_PATH_OVERRIDE, else autoMemoryDirectory (~/ expanded), else \
<config>/projects/<slug(git root of cwd, else cwd)>/memory; a linked git worktree uses its main \
repository's root. autoMemoryDirectory is honoured from ~/.claude/settings.json and \
.claude/settings.local.json but not from the committed .claude/settings.json, so a cloned \
repository cannot redirect memory writes. An unreadable or invalid settings file is exit 3.",
    ),
    (
        "ENVIRONMENT",
        "CLAUDE_CONFIG_DIR, HOME, XDG_STATE_HOME, CLAUDE_COWORK_MEMORY_PATH_OVERRIDE, \
CLAUDE_CODE_REMOTE_MEMORY_DIR, CLAUDE_CODE_DISABLE_AUTO_MEMORY, CLAUDE_CODE_SIMPLE, \
CLAUDE_CODE_REMOTE, DREAMKIT_MIN_HOURS, DREAMKIT_MIN_SESSIONS, DREAMKIT_LOCK_URL (the \
--backend default: file, or etcd://host:port[,host:port...][/prefix]; see dream-lock(1)).",
    ),
    (
        "STDIN",
        "stdin is read only when it is not a terminal and -n is not given; an empty stdin is no \
input. A hook gives its payload there; a pipeline gives an envelope. In loops and cron jobs, \
whose stdin is not for dream-gate, pass -n: without it the first dream-gate would read the \
rest of the loop's input.",
    ),
    (
        "EXAMPLES",
        "Is a dream due for this project? (exit 0 yes, 1 no, with gate.reason saying why)

  dream-gate --cwd ~/code/project | jq .gate

Every project listed in dirs.txt, one directory a line, from cron:

  while read -r d; do dream-gate -n --cwd \"$d\" | jq -c 'select(.gate.due)'; done < dirs.txt

As a Claude Code Stop hook, with the hook payload on stdin (end hook commands with exit 0: \
Claude Code reads exit 2 as \"block\"):

  dream-gate -q | jq -c 'select(.gate.due)' >> ~/due.jsonl; exit 0

dream-lock(1) shows the whole dream pipeline.",
    ),
];
