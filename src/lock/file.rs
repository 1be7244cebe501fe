//! The file backend: `<memory_dir>/.consolidate-lock`, byte-compatible with Claude Code. Its
//! content is the holder's PID in decimal (no newline); its mtime is the last-consolidated
//! time. dreamkit processes serialise on an `fs4` lock of a sidecar file; against Claude Code,
//! which does not know the sidecar, the write is confirmed by reading it back, as Claude Code
//! does itself.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::process::probe;
use super::{
    Acquired, Backend, Claimant, Claimed, Lease, Released, RunStatus, Status, HOLD_WINDOW,
    START_SLACK,
};
use crate::cli::time::{epoch_ms, from_epoch_ms};
use crate::cli::{signals, Failure};
use crate::files::{not_regular, open_regular, write_atomic_with_mtime};

pub const LOCK_FILE_NAME: &str = ".consolidate-lock";
/// Beside the lock file; only dreamkit uses it, to serialise its own acquirers. Its content is
/// the claim of the current hold (one JSON [`Claimant`]), or empty.
pub const GUARD_FILE_NAME: &str = ".consolidate-lock.dreamkit";
/// A claim is a few hundred bytes; more is not ours.
const MAX_CLAIM: u64 = 4096;
/// Beside the lock file, written by `exec`: its PID, under an exclusive `flock` that `exec`'s
/// command inherits. While any process keeps it open, a lock naming that PID stays held even
/// after the PID died (a `kill -9` of `exec` does not free the lock while its command runs).
pub const HOLDER_FILE_NAME: &str = ".consolidate-lock.dreamkit-holder";
/// Mode of a lock file we create (Claude Code's is 0644 under the usual umask).
const LOCK_MODE: u32 = 0o644;
/// A PID is a few digits; anything longer is not a PID.
const MAX_CONTENT: u64 = 32;

#[derive(Debug, Clone)]
pub struct FileBackend {
    dir: PathBuf,
    path: PathBuf,
}

/// The lock file as read: whether it exists, the PID it names, its mtime and mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Observed {
    pid: Option<u32>,
    mtime: Option<SystemTime>,
    mode: Option<u32>,
}

impl FileBackend {
    pub fn for_memory_dir(memory_dir: &Path) -> Self {
        FileBackend {
            dir: memory_dir.to_path_buf(),
            path: memory_dir.join(LOCK_FILE_NAME),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads content and mtime from one open file, so they belong together. Any error but
    /// "no such file" fails closed, and so does a lock file that is not a regular file (a
    /// FIFO would block the read, `/dev/zero` never ends).
    fn observe(&self) -> Result<Observed, Failure> {
        let mut file = match open_regular(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Observed {
                    pid: None,
                    mtime: None,
                    mode: None,
                })
            }
            Err(e) => return Err(Failure::io("read the lock file", &self.path, &e)),
        };
        let meta = file
            .metadata()
            .map_err(|e| Failure::io("stat the lock file", &self.path, &e))?;
        let mut content = Vec::new();
        file.by_ref()
            .take(MAX_CONTENT + 1)
            .read_to_end(&mut content)
            .map_err(|e| Failure::io("read the lock file", &self.path, &e))?;
        let mtime = meta
            .modified()
            .map_err(|e| Failure::io("read the mtime of", &self.path, &e))?;
        Ok(Observed {
            pid: parse_pid(&content),
            mtime: Some(mtime),
            mode: Some(meta.mode() & 0o7777),
        })
    }

    /// Holds the guard for the life of the returned file (closing it releases the lock).
    /// `interruptible`: a SIGINT/SIGTERM ends the wait for another holder (nothing has been
    /// written yet); a release waits it out, since it is what keeps the lock consistent.
    fn guard(&self, interruptible: bool) -> Result<File, Failure> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| Failure::io("create the memory dir", &self.dir, &e))?;
        let path = self.dir.join(GUARD_FILE_NAME);
        let guard = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            // Never through a symlink: the guard holds the claim, and writing it would write
            // whatever file a link put there leads to.
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| {
                let e = if e.raw_os_error() == Some(libc::ELOOP) {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        crate::files::NotRegular("a symbolic link"),
                    )
                } else {
                    e
                };
                Failure::io("open the lock guard", &path, &e)
            })?;
        let meta = guard
            .metadata()
            .map_err(|e| Failure::io("stat the lock guard", &path, &e))?;
        if !meta.is_file() {
            let e = not_regular(meta.file_type());
            return Err(Failure::io("open the lock guard", &path, &e));
        }
        if !interruptible {
            fs4::FileExt::lock(&guard).map_err(|e| Failure::io("lock", &path, &e))?;
            return Ok(guard);
        }
        // Polled rather than a blocking flock, which a caught signal would only restart.
        loop {
            match fs4::FileExt::try_lock(&guard) {
                Ok(()) => return Ok(guard),
                Err(fs4::TryLockError::WouldBlock) if signals::received().is_some() => {
                    return Err(Failure::environment(format!(
                        "interrupted while waiting for {}",
                        path.display()
                    )))
                }
                Err(fs4::TryLockError::WouldBlock) => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(fs4::TryLockError::Error(e)) => return Err(Failure::io("lock", &path, &e)),
            }
        }
    }

    /// What the guard file records (the caller has locked it, or reads it only to look).
    fn read_state(guard: &mut File) -> GuardState {
        use std::io::Seek;
        if guard.rewind().is_err() {
            return GuardState::default();
        }
        let mut content = Vec::new();
        let read = guard.by_ref().take(MAX_CLAIM + 1).read_to_end(&mut content);
        if read.is_err() || content.len() as u64 > MAX_CLAIM {
            return GuardState::default();
        }
        GuardState::parse(&content)
    }

    /// Replaces the guard file's record (an empty record empties it).
    fn write_state(&self, guard: &mut File, state: &GuardState) -> Result<(), Failure> {
        use std::io::{Seek, Write};
        let path = self.dir.join(GUARD_FILE_NAME);
        let fail = |e: std::io::Error| Failure::io("write the claim in", &path, &e);
        guard.set_len(0).map_err(fail)?;
        if state.hold.is_some() || state.claim.is_some() {
            let bytes = serde_json::to_vec(state).map_err(|e| fail(std::io::Error::other(e)))?;
            guard.rewind().map_err(fail)?;
            guard.write_all(&bytes).map_err(fail)?;
        }
        Ok(())
    }

    /// The guard file's record, read without taking its lock (a reader that only looks, such
    /// as the gate, never waits): a record torn by a writer reads as none.
    fn peek_state(&self) -> GuardState {
        let path = self.dir.join(GUARD_FILE_NAME);
        match crate::files::open_regular_no_follow(&path) {
            Ok(mut file) => Self::read_state(&mut file),
            Err(_) => GuardState::default(),
        }
    }

    /// The last-consolidated time when the lock shows a hold dreamkit took and nobody
    /// released: its holder died (kill -9, a power cut) or outlived the hold window, so the
    /// lock's mtime is when that hold was taken, not a consolidation. The time from before
    /// that hold (epoch ms, 0 = never) is the real one.
    fn unreleased_prior(
        &self,
        observed: &Observed,
        state: &GuardState,
        now: SystemTime,
    ) -> Result<Option<i64>, Failure> {
        let (Some(hold), Some(pid), Some(mtime)) = (state.hold, observed.pid, observed.mtime)
        else {
            return Ok(None);
        };
        let since = from_epoch_ms(hold.since_ms);
        let same_hold =
            hold.pid == pid && mtime + START_SLACK >= since && mtime <= since + START_SLACK;
        // The time before a hold cannot be after it: a record saying so was not written by
        // an acquire (a hand edit, a torn or forged file) and moves no time.
        let possible = (0..=hold.since_ms).contains(&hold.prior_mtime_ms);
        if !same_hold || !possible || self.holder(observed, now)?.held {
            return Ok(None);
        }
        Ok(Some(hold.prior_mtime_ms))
    }

    /// A release's first step, under the guard the caller holds: the lock file (emptied
    /// with the new time, or the prior one, or removed). The hold's record is forgotten only
    /// after it ([`Backend::release`]): a release killed in between leaves a lock that names
    /// no holder, whose stale record nothing reads; the other order would leave a dead
    /// holder's lock with no record of the time before it, and the gate would take the
    /// hold's time for a consolidation (too_soon for a day).
    fn release_lock_file(
        &self,
        token: &str,
        prior_mtime_ms: i64,
        outcome: RunStatus,
    ) -> Result<Released, Failure> {
        let observed = self.observe()?;
        if !matches_token(&observed, token) {
            return Ok(Released::NotHolder {
                holder_pid: observed.pid,
            });
        }
        let last_consolidated = match outcome {
            RunStatus::Completed => {
                self.write(b"", observed.mode, None)?;
                self.observe()?.mtime
            }
            _ if prior_mtime_ms == 0 => match std::fs::remove_file(&self.path) {
                Ok(()) => None,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(Failure::io("remove the lock file", &self.path, &e)),
            },
            _ => {
                let prior = from_epoch_ms(prior_mtime_ms);
                self.write(b"", observed.mode, Some(prior))?;
                Some(prior)
            }
        };
        Ok(Released::Yes { last_consolidated })
    }

    /// What the lock file says of the last consolidation. A released lock (empty) costs one
    /// `stat` (the hot path of `dream-gate`); a lock naming a holder costs the guard file's
    /// record too (none for Claude Code's holds), and the lock's content and its holder only
    /// when that record names a hold.
    fn consolidated(&self, now: SystemTime) -> Result<Consolidated, Failure> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(meta) if !meta.is_file() => {
                return Err(Failure::io(
                    "read the lock file",
                    &self.path,
                    &not_regular(meta.file_type()),
                ))
            }
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Consolidated::Never),
            Err(e) => return Err(Failure::io("stat the lock file", &self.path, &e)),
        };
        let mtime = meta
            .modified()
            .map_err(|e| Failure::io("read the mtime of", &self.path, &e))?;
        if meta.len() == 0 {
            return Ok(Consolidated::At(mtime));
        }
        let state = self.peek_state();
        if state.hold.is_none() {
            return Ok(Consolidated::At(mtime));
        }
        let observed = self.observe()?;
        Ok(match self.unreleased_prior(&observed, &state, now)? {
            Some(prior) => Consolidated::Unreleased(prior),
            None => observed.mtime.map_or(Consolidated::Never, Consolidated::At),
        })
    }

    fn holder_path(&self) -> PathBuf {
        self.dir.join(HOLDER_FILE_NAME)
    }

    /// Whether some process keeps the holder file of `pid` open (see [`HOLDER_FILE_NAME`]).
    /// Checked with a shared lock, so two checkers never see each other as the holder.
    fn pinned(&self, pid: u32) -> Result<bool, Failure> {
        let path = self.holder_path();
        let mut file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Failure::io("open the lock holder", &path, &e)),
        };
        let mut content = Vec::new();
        let is_file = file.metadata().is_ok_and(|m| m.is_file());
        if !is_file
            || file
                .by_ref()
                .take(MAX_CONTENT + 1)
                .read_to_end(&mut content)
                .is_err()
        {
            return Ok(false);
        }
        if parse_pid(&content) != Some(pid) {
            return Ok(false);
        }
        match fs4::FileExt::try_lock_shared(&file) {
            Ok(()) => Ok(false),
            Err(fs4::TryLockError::WouldBlock) => Ok(true),
            Err(fs4::TryLockError::Error(e)) => Err(Failure::io("lock", &path, &e)),
        }
    }

    /// Removes the holder file (under the guard, when the lock changes hands).
    fn unpin(&self) -> Result<(), Failure> {
        let path = self.holder_path();
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Failure::io("remove the lock holder", &path, &e)),
        }
    }

    /// Held = a PID, written within the hour, alive, and started no later than the write
    /// (plus slack): a PID recycled by a later process holds nothing. A PID that died while
    /// the command `exec` ran for it still holds while that command lives.
    fn holder(&self, observed: &Observed, now: SystemTime) -> Result<Holder, Failure> {
        let (Some(pid), Some(mtime)) = (observed.pid, observed.mtime) else {
            return Ok(Holder::default());
        };
        let info = probe(pid);
        let fresh = match now.duration_since(mtime) {
            Ok(age) => age < HOLD_WINDOW,
            // A future mtime (a clock set back, a writer whose clock is ahead) is taken as
            // written now; but nothing is written before its holder started, so it holds at
            // most an hour after that, never for hours.
            Err(_) => info
                .started
                .is_none_or(|started| now.duration_since(started).is_ok_and(|a| a < HOLD_WINDOW)),
        };
        let same_process = info
            .started
            .is_none_or(|started| started <= mtime + START_SLACK);
        let alive = info.alive && same_process;
        let command_running = fresh && !alive && self.pinned(pid)?;
        Ok(Holder {
            held: fresh && (alive || command_running),
            alive: Some(info.alive),
            command_running,
        })
    }

    fn write(
        &self,
        content: &[u8],
        mode: Option<u32>,
        mtime: Option<SystemTime>,
    ) -> Result<(), Failure> {
        write_atomic_with_mtime(&self.path, content, mode.unwrap_or(LOCK_MODE), mtime)
            .map_err(|e| Failure::io("write the lock file", &self.path, &e))
    }
}

/// Claude Code's content: the PID in decimal. Blanks around it are tolerated; anything else
/// (empty, text, zero) names no holder.
fn parse_pid(content: &[u8]) -> Option<u32> {
    if content.len() as u64 > MAX_CONTENT {
        return None;
    }
    let text = std::str::from_utf8(content).ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|pid| *pid > 0)
}

/// What [`FileBackend::holder`] found.
#[derive(Debug, Default, Clone, Copy)]
struct Holder {
    held: bool,
    /// Whether the recorded PID is alive; `None` when no PID is recorded.
    alive: Option<bool>,
    /// The PID is gone but the command `exec` ran for it still runs.
    command_running: bool,
}

/// What [`FileBackend::consolidated`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Consolidated {
    Never,
    /// The lock's mtime.
    At(SystemTime),
    /// The lock shows a hold nobody released: the time from before it (epoch ms, 0 = never).
    Unreleased(i64),
}

impl Consolidated {
    /// As the last-consolidated time (a future time is taken as now: never a negative age).
    fn time(self, now: SystemTime) -> Option<SystemTime> {
        match self {
            Consolidated::Never => None,
            Consolidated::At(mtime) => Some(mtime.min(now)),
            Consolidated::Unreleased(prior) => (prior > 0).then(|| from_epoch_ms(prior).min(now)),
        }
    }
}

/// The guard file's content: the hold in progress, written before the lock file so that a
/// holder killed before its release leaves the time it took over behind (see
/// [`FileBackend::unreleased_prior`]), and the one run that claimed the hold.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct GuardState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hold: Option<Hold>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    claim: Option<Claimant>,
}

/// A hold as its acquire recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Hold {
    /// The PID the acquire wrote in the lock file.
    pid: u32,
    /// The last-consolidated time before this hold (epoch ms, 0 = never).
    prior_mtime_ms: i64,
    /// When the acquire wrote the lock file (epoch ms): the lock's mtime, give or take.
    since_ms: i64,
}

impl GuardState {
    /// The record, or (as dreamkit wrote it before holds were recorded) a bare claim; any
    /// other content records nothing.
    fn parse(content: &[u8]) -> GuardState {
        if content.iter().all(u8::is_ascii_whitespace) {
            return GuardState::default();
        }
        if let Ok(claim) = serde_json::from_slice::<Claimant>(content) {
            return GuardState {
                hold: None,
                claim: Some(claim),
            };
        }
        serde_json::from_slice(content).unwrap_or_default()
    }
}

fn token(pid: u32, mtime: SystemTime) -> String {
    format!("{pid}:{}", epoch_ms(mtime))
}

/// The last-consolidated time (epoch ms) a file-lock token's acquire wrote: its mtime part.
/// `None` for tokens of other backends.
pub fn token_time_ms(token: &str) -> Option<i64> {
    let (pid, ms) = token.split_once(':')?;
    pid.parse::<u32>().ok()?;
    ms.parse().ok()
}

impl Backend for FileBackend {
    fn name(&self) -> &'static str {
        "file"
    }

    fn location(&self) -> (&'static str, String) {
        ("path", self.path.to_string_lossy().into_owned())
    }

    fn last_consolidated(&self) -> Result<Option<SystemTime>, Failure> {
        let now = SystemTime::now();
        Ok(self.consolidated(now)?.time(now))
    }

    fn status(&self, now: SystemTime) -> Result<Status, Failure> {
        let observed = self.observe()?;
        let holder = self.holder(&observed, now)?;
        let written = observed.mtime.map(|mtime| mtime.min(now));
        let last_consolidated = match self.unreleased_prior(&observed, &self.peek_state(), now)? {
            Some(prior) => Consolidated::Unreleased(prior).time(now),
            None => written,
        };
        Ok(Status {
            held: holder.held,
            holder_pid: observed.pid,
            holder_alive: holder.alive,
            command_running: holder.command_running,
            since: observed.pid.and(written),
            stale: observed.pid.is_some() && !holder.held,
            last_consolidated,
            token: match (holder.held, observed.pid, observed.mtime) {
                (true, Some(pid), Some(mtime)) => Some(token(pid, mtime)),
                _ => None,
            },
        })
    }

    fn acquire(&self, pid: u32, now: SystemTime) -> Result<Acquired, Failure> {
        let mut guard = self.guard(true)?;
        let before = self.observe()?;
        if self.holder(&before, now)?.held {
            return Ok(Acquired::Held {
                holder_pid: before.pid,
                since: before.mtime,
            });
        }
        // A lock file we may not write (read-only, or on a read-only mount) is refused as
        // Claude Code would be refused, rather than replaced by a rename around it.
        if before.mtime.is_some() {
            OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                .open(&self.path)
                .map_err(|e| Failure::io("write the lock file", &self.path, &e))?;
        }
        // A hold nobody released (its holder was killed) moved the time without a
        // consolidation: the time from before it is carried forward.
        let prior_mtime_ms =
            match self.unreleased_prior(&before, &Self::read_state(&mut guard), now)? {
                Some(prior) => prior,
                // A future mtime is taken as written now, so a roll-back cannot restore it.
                None => before.mtime.map_or(0, |prior| epoch_ms(prior.min(now))),
            };
        // A holder file left by an earlier `exec` names a holder that no longer holds, and a
        // claim of an earlier hold claims nothing now. The new hold, with the time it takes
        // over, is recorded before the lock file changes.
        self.unpin()?;
        let hold = Hold {
            pid,
            prior_mtime_ms,
            since_ms: epoch_ms(SystemTime::now()),
        };
        self.write_state(
            &mut guard,
            &GuardState {
                hold: Some(hold),
                claim: None,
            },
        )?;
        self.write(pid.to_string().as_bytes(), before.mode, None)?;
        let after = self.observe()?;
        match (after.pid, after.mtime) {
            (Some(p), Some(mtime)) if p == pid => Ok(Acquired::Yes(Lease {
                pid,
                prior_mtime_ms,
                token: token(pid, mtime),
            })),
            // Claude Code wrote between our write and the read-back: it holds the lock.
            _ => {
                self.write_state(&mut guard, &GuardState::default())?;
                Ok(Acquired::Held {
                    holder_pid: after.pid,
                    since: after.mtime,
                })
            }
        }
    }

    fn release(
        &self,
        token: &str,
        prior_mtime_ms: i64,
        outcome: RunStatus,
    ) -> Result<Released, Failure> {
        let mut guard = self.guard(false)?;
        let released = self.release_lock_file(token, prior_mtime_ms, outcome)?;
        if let Released::Yes { .. } = released {
            self.unpin()?;
            self.write_state(&mut guard, &GuardState::default())?;
        }
        Ok(released)
    }

    fn unreleased_hold(&self) -> Result<bool, Failure> {
        Ok(matches!(
            self.consolidated(SystemTime::now())?,
            Consolidated::Unreleased(_)
        ))
    }

    fn holds(&self, token: &str) -> Result<bool, Failure> {
        Ok(matches_token(&self.observe()?, token))
    }

    fn claim(&self, token: &str, task_id: &str, replace: Option<&str>) -> Result<Claimed, Failure> {
        let mut guard = self.guard(true)?;
        if !matches_token(&self.observe()?, token) {
            return Ok(Claimed::NotHeld);
        }
        let mut state = Self::read_state(&mut guard);
        if let Some(other) = &state.claim {
            let theirs = other.task_id != task_id && Some(other.task_id.as_str()) != replace;
            if other.token == token && theirs {
                return Ok(Claimed::ByOther(other.clone()));
            }
        }
        state.claim = Some(Claimant::new(token, task_id));
        self.write_state(&mut guard, &state)?;
        Ok(Claimed::Ours)
    }

    fn claimant(&self, token: &str) -> Result<Option<Claimant>, Failure> {
        // No guard, no claim: a question creates neither it nor the memory dir (a
        // `release --dry-run` changes nothing on disk).
        if std::fs::symlink_metadata(self.dir.join(GUARD_FILE_NAME))
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            return Ok(None);
        }
        let mut guard = self.guard(false)?;
        Ok(Self::read_state(&mut guard)
            .claim
            .filter(|c| c.token == token))
    }

    fn pin(&self, lease: &Lease) -> Result<Option<File>, Failure> {
        let _guard = self.guard(false)?;
        if !matches_token(&self.observe()?, &lease.token) {
            return Err(Failure::environment(
                "the lock was taken over before its command started",
            ));
        }
        let path = self.holder_path();
        let fail = |e: std::io::Error| Failure::io("write the lock holder", &path, &e);
        // A new file each time: a process left over from an earlier run may still hold the
        // old one open (and locked).
        let mut tmp = crate::files::temp_file_in(&self.dir).map_err(fail)?;
        // Readable by all, like the lock file: any user's status may need to check it.
        tmp.as_file()
            .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(LOCK_MODE))
            .map_err(fail)?;
        std::io::Write::write_all(&mut tmp, lease.pid.to_string().as_bytes()).map_err(fail)?;
        fs4::FileExt::try_lock(tmp.as_file()).map_err(|e| fail(e.into()))?;
        tmp.persist(&path).map(Some).map_err(|e| fail(e.error))
    }
}

fn matches_token(observed: &Observed, expected: &str) -> bool {
    match (observed.pid, observed.mtime) {
        (Some(pid), Some(mtime)) => token(pid, mtime) == expected,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn backend() -> (tempfile::TempDir, FileBackend) {
        let tmp = tempfile::tempdir().unwrap();
        let b = FileBackend::for_memory_dir(&tmp.path().join("memory"));
        (tmp, b)
    }

    fn set_mtime(path: &Path, at: SystemTime) {
        File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(at)
            .unwrap();
    }

    #[test]
    fn pid_content() {
        assert_eq!(parse_pid(b"4242"), Some(4242));
        assert_eq!(parse_pid(b" 4242\n"), Some(4242));
        for none in [
            &b""[..],
            b"0",
            b"-1",
            b"12ab",
            b"pid 12",
            b"99999999999999",
            &[b'1'; 40],
        ] {
            assert_eq!(parse_pid(none), None, "{:?}", String::from_utf8_lossy(none));
        }
    }

    #[test]
    fn mtime_is_the_last_consolidated_time() {
        let (_tmp, b) = backend();
        assert_eq!(b.last_consolidated().unwrap(), None);
        std::fs::create_dir_all(b.path().parent().unwrap()).unwrap();
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        std::fs::write(b.path(), "").unwrap();
        set_mtime(b.path(), at);
        assert_eq!(b.last_consolidated().unwrap(), Some(at));
    }

    #[test]
    fn a_memory_dir_that_is_a_file_fails_closed() {
        let tmp = tempfile::tempdir().unwrap();
        let not_dir = tmp.path().join("file");
        std::fs::write(&not_dir, "").unwrap();
        let b = FileBackend::for_memory_dir(&not_dir);
        assert_eq!(b.last_consolidated().unwrap_err().kind(), "environment");
        assert_eq!(
            b.status(SystemTime::now()).unwrap_err().kind(),
            "environment"
        );
    }

    #[test]
    fn acquire_writes_the_pid_without_newline_and_a_token() {
        let (_tmp, b) = backend();
        let me = std::process::id();
        let Acquired::Yes(lease) = b.acquire(me, SystemTime::now()).unwrap() else {
            panic!("not acquired")
        };
        assert_eq!(std::fs::read(b.path()).unwrap(), me.to_string().as_bytes());
        assert_eq!(lease.prior_mtime_ms, 0);
        let mtime = std::fs::metadata(b.path()).unwrap().modified().unwrap();
        assert_eq!(lease.token, format!("{me}:{}", epoch_ms(mtime)));
        assert!(b.holds(&lease.token).unwrap());
        // We are alive and started before the write: a second acquire is refused.
        let again = b.acquire(me, SystemTime::now()).unwrap();
        assert_eq!(
            again,
            Acquired::Held {
                holder_pid: Some(me),
                since: Some(mtime)
            }
        );
        let status = b.status(SystemTime::now()).unwrap();
        assert!(status.held && !status.stale);
        assert_eq!(status.holder_alive, Some(true));
    }

    #[test]
    fn release_outcomes() {
        let (_tmp, b) = backend();
        let me = std::process::id();
        // No prior file: a failed run deletes it.
        let Acquired::Yes(lease) = b.acquire(me, SystemTime::now()).unwrap() else {
            panic!()
        };
        assert_eq!(
            b.release(&lease.token, lease.prior_mtime_ms, RunStatus::Failed)
                .unwrap(),
            Released::Yes {
                last_consolidated: None
            }
        );
        assert!(!b.path().exists());

        // Completed: empty content, mtime now.
        let Acquired::Yes(lease) = b.acquire(me, SystemTime::now()).unwrap() else {
            panic!()
        };
        let Released::Yes {
            last_consolidated: Some(at),
        } = b
            .release(&lease.token, lease.prior_mtime_ms, RunStatus::Completed)
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(std::fs::read(b.path()).unwrap(), b"");
        assert_eq!(std::fs::metadata(b.path()).unwrap().modified().unwrap(), at);

        // Aborted with a prior time: emptied, mtime restored.
        let prior = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        set_mtime(b.path(), prior);
        let Acquired::Yes(lease) = b.acquire(me, SystemTime::now()).unwrap() else {
            panic!()
        };
        assert_eq!(lease.prior_mtime_ms, 1_700_000_000_123);
        b.release(&lease.token, lease.prior_mtime_ms, RunStatus::Aborted)
            .unwrap();
        assert_eq!(std::fs::read(b.path()).unwrap(), b"");
        assert_eq!(
            std::fs::metadata(b.path()).unwrap().modified().unwrap(),
            prior
        );

        // Releasing again changes nothing.
        assert_eq!(
            b.release(&lease.token, lease.prior_mtime_ms, RunStatus::Completed)
                .unwrap(),
            Released::NotHolder { holder_pid: None }
        );
        assert_eq!(
            std::fs::metadata(b.path()).unwrap().modified().unwrap(),
            prior
        );
    }

    #[test]
    fn the_hold_window_is_one_hour() {
        let (_tmp, b) = backend();
        let me = std::process::id();
        let t0 = SystemTime::now();
        let Acquired::Yes(_) = b.acquire(me, t0).unwrap() else {
            panic!()
        };
        let minutes = |m: u64| t0 + Duration::from_secs(m * 60);
        assert!(b.status(minutes(59)).unwrap().held);
        assert!(matches!(
            b.acquire(me, minutes(59)).unwrap(),
            Acquired::Held { .. }
        ));
        let status = b.status(minutes(61)).unwrap();
        assert!(!status.held && status.stale && status.holder_alive == Some(true));
        assert!(matches!(
            b.acquire(me, minutes(61)).unwrap(),
            Acquired::Yes(_)
        ));
    }

    #[test]
    fn an_old_lock_is_stale() {
        let (_tmp, b) = backend();
        std::fs::create_dir_all(b.path().parent().unwrap()).unwrap();
        std::fs::write(b.path(), std::process::id().to_string()).unwrap();
        set_mtime(b.path(), SystemTime::now() - Duration::from_secs(3601));
        let status = b.status(SystemTime::now()).unwrap();
        assert!(!status.held && status.stale);
        assert!(matches!(
            b.acquire(std::process::id(), SystemTime::now()).unwrap(),
            Acquired::Yes(_)
        ));
    }

    #[test]
    fn a_future_mtime_is_taken_as_now_and_never_holds_for_hours() {
        let (_tmp, b) = backend();
        std::fs::create_dir_all(b.path().parent().unwrap()).unwrap();
        let now = SystemTime::now();
        let ahead = now + Duration::from_secs(5 * 3600);
        std::fs::write(b.path(), "").unwrap();
        set_mtime(b.path(), ahead);
        let last = b.last_consolidated().unwrap().unwrap();
        assert!(
            last <= SystemTime::now(),
            "the last consolidation is in the future"
        );
        assert!(b.status(now).unwrap().last_consolidated.unwrap() <= now);

        // A live holder (this test process, started moments ago) holds it for now...
        std::fs::write(b.path(), std::process::id().to_string()).unwrap();
        set_mtime(b.path(), ahead);
        let status = b.status(now).unwrap();
        assert!(status.held);
        assert_eq!(status.since, Some(now));
        // ...but not for hours: at most an hour after the holder started.
        let later = now + Duration::from_secs(61 * 60);
        let status = b.status(later).unwrap();
        assert!(!status.held && status.stale, "{status:?}");
        let Acquired::Yes(lease) = b.acquire(std::process::id(), later).unwrap() else {
            panic!("a future mtime held the lock for hours")
        };
        assert_eq!(
            lease.prior_mtime_ms,
            epoch_ms(later),
            "the future time came back"
        );
    }

    #[test]
    fn a_hold_whose_holder_died_unreleased_moved_no_time() {
        let (_tmp, b) = backend();
        std::fs::create_dir_all(b.path().parent().unwrap()).unwrap();
        let prior = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        std::fs::write(b.path(), "").unwrap();
        set_mtime(b.path(), prior);
        let mut holder = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let Acquired::Yes(lease) = b.acquire(holder.id(), SystemTime::now()).unwrap() else {
            panic!("not acquired")
        };
        assert_eq!(lease.prior_mtime_ms, 1_700_000_000_123);
        // While the holder lives, the hold's time is the lock's time (Claude Code's rule).
        let taken = std::fs::metadata(b.path()).unwrap().modified().unwrap();
        assert_eq!(b.last_consolidated().unwrap(), Some(taken));
        holder.kill().unwrap();
        holder.wait().unwrap();
        // Killed before its release: the time from before the hold is the last consolidation,
        // for the gate, for status, and for the next acquire, which carries it forward.
        assert_eq!(b.last_consolidated().unwrap(), Some(prior));
        let status = b.status(SystemTime::now()).unwrap();
        assert_eq!(status.last_consolidated, Some(prior));
        assert!(!status.held && status.stale);
        let Acquired::Yes(next) = b.acquire(std::process::id(), SystemTime::now()).unwrap() else {
            panic!("not acquired")
        };
        assert_eq!(next.prior_mtime_ms, 1_700_000_000_123);
        b.release(&next.token, next.prior_mtime_ms, RunStatus::Failed)
            .unwrap();
        assert_eq!(
            std::fs::metadata(b.path()).unwrap().modified().unwrap(),
            prior
        );
        assert_eq!(b.last_consolidated().unwrap(), Some(prior));
    }

    #[test]
    fn a_release_killed_midway_moves_no_time() {
        // `exec` killed while it releases (after its command failed): whatever it got to, the
        // gate must not take the hold's time for a consolidation.
        let prior = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        for had_prior in [false, true] {
            let (_tmp, b) = backend();
            std::fs::create_dir_all(b.path().parent().unwrap()).unwrap();
            if had_prior {
                std::fs::write(b.path(), "").unwrap();
                set_mtime(b.path(), prior);
            }
            let expected = had_prior.then_some(prior);
            let mut holder = std::process::Command::new("sleep")
                .arg("60")
                .spawn()
                .unwrap();
            let Acquired::Yes(lease) = b.acquire(holder.id(), SystemTime::now()).unwrap() else {
                panic!("not acquired")
            };
            // Killed after the lock file, before the hold's record is forgotten.
            let guard = b.guard(false).unwrap();
            b.release_lock_file(&lease.token, lease.prior_mtime_ms, RunStatus::Failed)
                .unwrap();
            drop(guard);
            holder.kill().unwrap();
            holder.wait().unwrap();
            assert_eq!(b.last_consolidated().unwrap(), expected, "{had_prior}");
            let status = b.status(SystemTime::now()).unwrap();
            assert_eq!(status.last_consolidated, expected, "{had_prior}");
            assert!(!status.held, "{had_prior}");
            let Acquired::Yes(next) = b.acquire(std::process::id(), SystemTime::now()).unwrap()
            else {
                panic!("not acquired")
            };
            assert_eq!(
                next.prior_mtime_ms,
                expected.map_or(0, epoch_ms),
                "{had_prior}"
            );
        }
    }

    #[test]
    fn a_dead_holder_that_dreamkit_did_not_record_keeps_its_time() {
        // Claude Code's own consolidation leaves its PID in the lock: its mtime is the time.
        let (_tmp, b) = backend();
        std::fs::create_dir_all(b.path().parent().unwrap()).unwrap();
        let at = SystemTime::now() - Duration::from_secs(600);
        std::fs::write(b.path(), "4194300").unwrap();
        set_mtime(b.path(), at);
        let guard = b.path().with_file_name(GUARD_FILE_NAME);
        for content in [
            "",
            "{",
            r#"{"hold":{"pid":17,"prior_mtime_ms":5,"since_ms":9}}"#,
        ] {
            std::fs::write(&guard, content).unwrap();
            assert_eq!(b.last_consolidated().unwrap(), Some(at), "{content}");
        }
    }

    #[test]
    fn a_pinned_lease_stays_held_after_its_pid_dies() {
        let (_tmp, b) = backend();
        let mut exec = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let Acquired::Yes(lease) = b.acquire(exec.id(), SystemTime::now()).unwrap() else {
            panic!()
        };
        let pin = b.pin(&lease).unwrap().expect("the file backend pins");
        assert_eq!(
            std::fs::read_to_string(b.path().with_file_name(HOLDER_FILE_NAME)).unwrap(),
            exec.id().to_string()
        );
        exec.kill().unwrap();
        exec.wait().unwrap();
        let status = b.status(SystemTime::now()).unwrap();
        assert!(status.held && status.command_running, "{status:?}");
        assert_eq!(status.holder_alive, Some(false));
        assert_eq!(status.token.as_deref(), Some(lease.token.as_str()));
        assert!(matches!(
            b.acquire(std::process::id(), SystemTime::now()).unwrap(),
            Acquired::Held { .. }
        ));
        // The last process with the holder open is gone: the lock is free to take over.
        drop(pin);
        let status = b.status(SystemTime::now()).unwrap();
        assert!(!status.held && status.stale && !status.command_running);
        assert_eq!(status.token, None);
        assert!(matches!(
            b.acquire(std::process::id(), SystemTime::now()).unwrap(),
            Acquired::Yes(_)
        ));
        assert!(!b.path().with_file_name(HOLDER_FILE_NAME).exists());
    }
}
