//! The consolidation lock. Every backend answers the same questions: when was the memory
//! last consolidated, who holds the lock, and acquire / release with a fencing token.

pub mod etcd;
pub mod file;
pub mod outcome;
pub mod process;

use std::time::{Duration, SystemTime};

use clap::Args;

use crate::claude::Project;
use crate::cli::Failure;

pub use etcd::{EtcdBackend, EtcdUrl};
pub use file::FileBackend;

/// A holder's claim lapses an hour after it was written (Claude Code's window).
pub const HOLD_WINDOW: Duration = Duration::from_secs(3600);

/// A holder must have started no later than this after the lock's mtime; the slack covers
/// the one-second resolution of boot time plus clock ticks in `/proc`.
pub const START_SLACK: Duration = Duration::from_secs(2);

/// How a consolidation ended decides what a release leaves behind: `completed` frees the
/// lock and stamps now as the last-consolidated time; every other status rolls back to the
/// prior time, so the next gate can retry.
pub use crate::cli::RunStatus;

/// What an acquirer gets: proof of holding, and what a roll-back restores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub pid: u32,
    /// The last-consolidated time before this acquisition, epoch ms (0 = none).
    pub prior_mtime_ms: i64,
    /// The fencing token: it changes whenever anyone else takes the lock.
    pub token: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    Yes(Lease),
    /// Somebody else holds it.
    Held {
        holder_pid: Option<u32>,
        since: Option<SystemTime>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    /// Done; the last-consolidated time is now this (`None`: never consolidated).
    Yes {
        last_consolidated: Option<SystemTime>,
    },
    /// The lock is no longer ours (taken over, or released already): nothing was changed.
    NotHolder { holder_pid: Option<u32> },
}

/// `dream-lock status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub held: bool,
    pub holder_pid: Option<u32>,
    pub holder_alive: Option<bool>,
    /// The holder PID is gone but the command `exec` ran for it still runs (and holds).
    pub command_running: bool,
    pub since: Option<SystemTime>,
    /// A PID is recorded but does not hold the lock (dead, recycled, or over an hour old).
    pub stale: bool,
    pub last_consolidated: Option<SystemTime>,
    /// The live holder's fencing token (what a release by hand needs); `None` when free.
    pub token: Option<String>,
}

/// The one runner that claimed a hold (see [`Backend::claim`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Claimant {
    /// The hold claimed (the fencing token).
    pub token: String,
    /// The run's task id.
    pub task_id: String,
    pub pid: u32,
    /// Where `pid` runs (`<boot id>` or host name); only a claimant here can be probed.
    #[serde(default)]
    pub node: String,
    /// When it claimed (epoch ms): a later process with the same PID is not the claimant.
    pub since_ms: i64,
}

impl Claimant {
    pub fn new(token: &str, task_id: &str) -> Claimant {
        Claimant {
            token: token.to_string(),
            task_id: task_id.to_string(),
            pid: std::process::id(),
            node: process::this_node(),
            since_ms: crate::cli::time::epoch_ms(SystemTime::now()),
        }
    }

    /// Whether the claiming process still runs (a claimant on another machine is taken at
    /// its word; the lease bounds its claim).
    pub fn alive(&self) -> bool {
        if self.node != process::this_node() {
            return true;
        }
        let info = process::probe(self.pid);
        let since = crate::cli::time::from_epoch_ms(self.since_ms);
        info.alive
            && info
                .started
                .is_none_or(|started| started <= since + START_SLACK)
    }
}

/// What [`Backend::claim`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// The hold is this runner's now.
    Ours,
    /// Another runner claimed this hold first (it may have ended since: see
    /// [`Claimant::alive`]).
    ByOther(Claimant),
    /// The token no longer holds the lock.
    NotHeld,
}

/// A store of the last-consolidated time and the lock's holder.
pub trait Backend {
    /// `file` or `etcd`, as printed in `lock.backend`.
    fn name(&self) -> &'static str;

    /// Where the lock lives: `("path", ...)` or `("key", ...)`.
    fn location(&self) -> (&'static str, String);

    /// When the memory was last consolidated; `None` when never. A state that cannot be read
    /// is an error, never "never": a gate that guessed would run consolidation twice.
    fn last_consolidated(&self) -> Result<Option<SystemTime>, Failure>;

    fn status(&self, now: SystemTime) -> Result<Status, Failure>;

    /// Takes the lock for `pid` unless a live holder has it.
    fn acquire(&self, pid: u32, now: SystemTime) -> Result<Acquired, Failure>;

    /// Releases a lease; changes nothing unless `token` still holds the lock.
    fn release(
        &self,
        token: &str,
        prior_mtime_ms: i64,
        outcome: RunStatus,
    ) -> Result<Released, Failure>;

    /// Whether `token` still holds the lock (checked before every fenced write).
    fn holds(&self, token: &str) -> Result<bool, Failure>;

    /// Binds the hold of `token` to one runner, `task_id`, so that two runs handed the same
    /// envelope (the same token) cannot both write: the first claims, the next is told who
    /// did (alive or not: whether a dead claimant's run crashed or finished is the caller's
    /// to judge). `replace` names a claimant's task the caller judged crashed: its claim is
    /// taken over. The claim goes with the hold.
    fn claim(&self, token: &str, task_id: &str, replace: Option<&str>) -> Result<Claimed, Failure>;

    /// The runner that claimed the hold of `token`, if any, alive or not: a run that finished
    /// and has not released yet is no longer alive, yet the hold is still its own.
    fn claimant(&self, token: &str) -> Result<Option<Claimant>, Failure>;

    /// Whether the lock shows a hold whose holder died (or outlived the hold window) without
    /// releasing it: its time is not a consolidation, and the next holder's release puts the
    /// time from before it back. `false` for backends whose holds expire on their own.
    fn unreleased_hold(&self) -> Result<bool, Failure> {
        Ok(false)
    }

    /// Keeps `lease` held, even after its PID dies, for as long as any process has the
    /// returned file open: `exec` hands it to its command, so a killed `exec` does not free
    /// the lock while the command still runs. `None`: this backend has no such thing.
    fn pin(&self, _lease: &Lease) -> Result<Option<std::fs::File>, Failure> {
        Ok(None)
    }

    /// Keeps the hold of `token` from expiring while the returned guard lives (a thread
    /// renews the etcd lease; `exec` holds one while its command runs, and so must any
    /// process that works under the lock for longer than the lease). `None`: this backend's
    /// holds do not expire on their own (the file backend). Fails when `token` does not hold.
    fn keep_alive(&self, _token: &str) -> Result<Option<KeepAlive>, Failure> {
        Ok(None)
    }
}

/// A running keep-alive: renews until dropped (which stops and joins its thread).
pub struct KeepAlive {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    lost: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl KeepAlive {
    pub(crate) fn new(
        stop: std::sync::mpsc::Sender<()>,
        thread: std::thread::JoinHandle<()>,
        lost: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        KeepAlive {
            stop: Some(stop),
            thread: Some(thread),
            lost,
        }
    }

    /// Whether the lease is gone (expired, revoked, or refused by etcd): the hold is lost,
    /// and `holds` will say so. A renewal that merely failed to reach etcd is retried.
    pub fn lost(&self) -> bool {
        self.lost.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        // Closing the channel wakes the thread at once.
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `--backend URL` (or `DREAMKIT_LOCK_URL`), shared by the tools that read the lock.
#[derive(Debug, Clone, Default, Args)]
pub struct BackendArgs {
    /// Lock backend: `file` (the default: <memory_dir>/.consolidate-lock) or
    /// etcd://host:port[,host:port...][/prefix]
    #[arg(
        long,
        value_name = "URL",
        env = "DREAMKIT_LOCK_URL",
        value_parser = crate::cli::args::EnvNamed(known_backend)
    )]
    pub backend: Option<String>,
}

/// Refuses an unknown or malformed backend while the flags are parsed, so that a bad
/// `DREAMKIT_LOCK_URL` is reported under its own name; [`BackendArgs::open`] decides the rest.
fn known_backend(url: &str) -> Result<String, String> {
    match url.trim() {
        "" | "file" | "file:" | "file://" => Ok(url.to_string()),
        other if other.starts_with("etcd://") => EtcdUrl::parse(other).map(|_| url.to_string()),
        other => Err(format!(
            "unknown lock backend {other:?} (expected `file` or etcd://host:port[,host:port...][/prefix])"
        )),
    }
}

impl BackendArgs {
    /// The backend for a project. A URL naming another backend is refused rather than
    /// silently replaced by local files, which would split a team onto separate locks.
    pub fn open(&self, project: &Project) -> Result<Box<dyn Backend>, Failure> {
        match self.backend.as_deref().map(str::trim) {
            None | Some("" | "file" | "file:" | "file://") => {
                Ok(Box::new(FileBackend::for_memory_dir(&project.memory_dir)))
            }
            Some(url) if url.starts_with("etcd://") => {
                let url = EtcdUrl::parse(url).map_err(Failure::Usage)?;
                Ok(Box::new(EtcdBackend::open(&url, &project.slug)?))
            }
            Some(url) => Err(Failure::Usage(format!(
                "unknown lock backend {url:?} (expected `file` or etcd://host:port[,host:port...][/prefix])"
            ))),
        }
    }
}
