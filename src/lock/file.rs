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
use super::{Acquired, Backend, Lease, Released, RunOutcome, Status, HOLD_WINDOW, START_SLACK};
use crate::cli::time::{epoch_ms, from_epoch_ms};
use crate::cli::{signals, Failure};
use crate::files::{not_regular, open_regular, write_atomic_with_mtime};

pub const LOCK_FILE_NAME: &str = ".consolidate-lock";
/// Beside the lock file; only dreamkit uses it, to serialise its own acquirers.
pub const GUARD_FILE_NAME: &str = ".consolidate-lock.dreamkit";
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
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&path)
            .map_err(|e| Failure::io("open the lock guard", &path, &e))?;
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
                    std::thread::sleep(std::time::Duration::from_millis(2))
                }
                Err(fs4::TryLockError::Error(e)) => return Err(Failure::io("lock", &path, &e)),
            }
        }
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

/// Held = a PID, written within the hour, alive, and started no later than the write
/// (plus slack): a PID recycled by a later process holds nothing.
fn holder(observed: &Observed, now: SystemTime) -> (bool, Option<bool>) {
    let (Some(pid), Some(mtime)) = (observed.pid, observed.mtime) else {
        return (false, None);
    };
    let info = probe(pid);
    let fresh = now
        .duration_since(mtime)
        .map_or(true, |age| age < HOLD_WINDOW);
    let same_process = info
        .started
        .is_none_or(|started| started <= mtime + START_SLACK);
    (fresh && info.alive && same_process, Some(info.alive))
}

fn token(pid: u32, mtime: SystemTime) -> String {
    format!("{pid}:{}", epoch_ms(mtime))
}

impl Backend for FileBackend {
    fn name(&self) -> &'static str {
        "file"
    }

    fn location(&self) -> (&'static str, String) {
        ("path", self.path.to_string_lossy().into_owned())
    }

    fn last_consolidated(&self) -> Result<Option<SystemTime>, Failure> {
        // One stat, no open: this is the hot path of `dream-gate`.
        match std::fs::metadata(&self.path) {
            Ok(meta) if !meta.is_file() => Err(Failure::io(
                "read the lock file",
                &self.path,
                &not_regular(meta.file_type()),
            )),
            Ok(meta) => meta
                .modified()
                .map(Some)
                .map_err(|e| Failure::io("read the mtime of", &self.path, &e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Failure::io("stat the lock file", &self.path, &e)),
        }
    }

    fn status(&self, now: SystemTime) -> Result<Status, Failure> {
        let observed = self.observe()?;
        let (held, alive) = holder(&observed, now);
        Ok(Status {
            held,
            holder_pid: observed.pid,
            holder_alive: alive,
            since: observed.pid.and(observed.mtime),
            stale: observed.pid.is_some() && !held,
            last_consolidated: observed.mtime,
        })
    }

    fn acquire(&self, pid: u32, now: SystemTime) -> Result<Acquired, Failure> {
        let _guard = self.guard(true)?;
        let before = self.observe()?;
        if holder(&before, now).0 {
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
        self.write(pid.to_string().as_bytes(), before.mode, None)?;
        let after = self.observe()?;
        match (after.pid, after.mtime) {
            (Some(p), Some(mtime)) if p == pid => Ok(Acquired::Yes(Lease {
                pid,
                prior_mtime_ms: before.mtime.map_or(0, epoch_ms),
                token: token(pid, mtime),
            })),
            // Claude Code wrote between our write and the read-back: it holds the lock.
            _ => Ok(Acquired::Held {
                holder_pid: after.pid,
                since: after.mtime,
            }),
        }
    }

    fn release(
        &self,
        token: &str,
        prior_mtime_ms: i64,
        outcome: RunOutcome,
    ) -> Result<Released, Failure> {
        let _guard = self.guard(false)?;
        let observed = self.observe()?;
        if !matches_token(&observed, token) {
            return Ok(Released::NotHolder {
                holder_pid: observed.pid,
            });
        }
        let last_consolidated = match outcome {
            RunOutcome::Completed => {
                self.write(b"", observed.mode, None)?;
                self.observe()?.mtime
            }
            RunOutcome::Failed | RunOutcome::Aborted if prior_mtime_ms == 0 => {
                match std::fs::remove_file(&self.path) {
                    Ok(()) => None,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => return Err(Failure::io("remove the lock file", &self.path, &e)),
                }
            }
            RunOutcome::Failed | RunOutcome::Aborted => {
                let prior = from_epoch_ms(prior_mtime_ms);
                self.write(b"", observed.mode, Some(prior))?;
                Some(prior)
            }
        };
        Ok(Released::Yes { last_consolidated })
    }

    fn holds(&self, token: &str) -> Result<bool, Failure> {
        Ok(matches_token(&self.observe()?, token))
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
            b.release(&lease.token, lease.prior_mtime_ms, RunOutcome::Failed)
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
            .release(&lease.token, lease.prior_mtime_ms, RunOutcome::Completed)
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
        b.release(&lease.token, lease.prior_mtime_ms, RunOutcome::Aborted)
            .unwrap();
        assert_eq!(std::fs::read(b.path()).unwrap(), b"");
        assert_eq!(
            std::fs::metadata(b.path()).unwrap().modified().unwrap(),
            prior
        );

        // Releasing again changes nothing.
        assert_eq!(
            b.release(&lease.token, lease.prior_mtime_ms, RunOutcome::Completed)
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
}
