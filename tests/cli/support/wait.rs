//! Waiting on a condition, never on the clock: each wait polls what it waits for (a file, a
//! process state, a line on a pipe) and fails the test past a bounded deadline.

use std::path::Path;
use std::time::{Duration, Instant};

/// How long any wait may take before the test fails.
pub(crate) const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a condition is polled.
const POLL: Duration = Duration::from_millis(5);

/// `probe` until it answers `Some`, at most [`WAIT_TIMEOUT`]; `what` names it on failure.
#[track_caller]
pub(crate) fn until<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "gave up after {WAIT_TIMEOUT:?} waiting for {what}"
        );
        std::thread::sleep(POLL);
    }
}

/// Until `ready` holds, checking as often as the machine allows (no sleep between probes):
/// for what may last only a fraction of a second, such as an apply between its first file
/// and its last. Bounded like every wait.
#[track_caller]
pub(crate) fn busy_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    while !ready() {
        assert!(Instant::now() < deadline, "{what}: never happened");
        std::thread::yield_now();
    }
}

/// Until `path` exists.
#[track_caller]
pub(crate) fn for_file(path: &Path) {
    until(&format!("{} to exist", path.display()), || {
        path.exists().then_some(())
    });
}

/// Until `path` holds a non-empty text ending in a newline or parsing whole (a PID file
/// written by `echo $$ > f`), and returns it trimmed.
#[track_caller]
pub(crate) fn for_content(path: &Path) -> String {
    until(&format!("{} to be written", path.display()), || {
        let text = std::fs::read_to_string(path).ok()?;
        text.ends_with('\n').then(|| text.trim().to_string())
    })
}

/// Until the PID written to `path` is read (see [`for_content`]).
#[track_caller]
pub(crate) fn for_pid(path: &Path) -> i32 {
    let text = for_content(path);
    text.parse()
        .unwrap_or_else(|_| panic!("{}: not a PID: {text:?}", path.display()))
}

/// The state letter of `pid` in `/proc` (`R`, `S`, `Z`, ...), `None` once it is reaped.
pub(crate) fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces; the state follows it.
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Until `pid` has exited (gone, or a zombie awaiting its parent).
#[track_caller]
pub(crate) fn for_exit(pid: i32) {
    until(&format!("process {pid} to exit"), || {
        matches!(process_state(pid), None | Some('Z' | 'X')).then_some(())
    });
}

/// Until `pid` runs `comm` (it has exec'd), not the copy of its parent `fork` made.
#[track_caller]
pub(crate) fn for_exec(pid: i32, comm: &str) {
    until(&format!("process {pid} to exec {comm}"), || {
        let now = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        (now.trim_end() == comm).then_some(())
    });
}

/// Whether `signal` is still pending for `pid` (sent, not yet taken by the process).
fn pending(pid: i32, signal: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let bit = 1u64 << (signal - 1);
    status
        .lines()
        .filter_map(|l| {
            l.strip_prefix("SigPnd:\t")
                .or_else(|| l.strip_prefix("ShdPnd:\t"))
        })
        .any(|mask| u64::from_str_radix(mask.trim(), 16).is_ok_and(|m| m & bit != 0))
}

/// Sends `signal` to `pid` and waits until the process has taken it (no longer pending).
#[track_caller]
pub(crate) fn signal_delivered(pid: i32, signal: i32) {
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill {pid} {signal}");
    until(&format!("process {pid} to take signal {signal}"), || {
        (!pending(pid, signal)).then_some(())
    });
}

/// The parent of `pid`, from `/proc`.
fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()
}

/// Until a descendant of `ancestor` runs `comm`; its PID.
#[track_caller]
pub(crate) fn for_descendant(ancestor: i32, comm: &str) -> i32 {
    until(&format!("a {comm} under process {ancestor}"), || {
        std::fs::read_dir("/proc")
            .ok()?
            .flatten()
            .find_map(|entry| {
                let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
                let name = std::fs::read_to_string(entry.path().join("comm")).ok()?;
                if name.trim_end() != comm {
                    return None;
                }
                let mut up = parent(pid);
                for _ in 0..64 {
                    match up {
                        Some(p) if p == ancestor => return Some(pid),
                        Some(p) if p > 1 => up = parent(p),
                        _ => return None,
                    }
                }
                None
            })
    })
}

/// Until some thread of `pid` is blocked in system call `nr` (`libc::SYS_read`, ...).
#[track_caller]
pub(crate) fn for_syscall(pid: i32, nr: libc::c_long) {
    until(&format!("process {pid} to block in syscall {nr}"), || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .ok()?
            .flatten()
            .any(|task| {
                let text = std::fs::read_to_string(task.path().join("syscall")).unwrap_or_default();
                text.split(' ').next() == Some(&nr.to_string())
                    && std::fs::read_to_string(task.path().join("stat"))
                        .ok()
                        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.starts_with('S')))
                        .unwrap_or(false)
            })
            .then_some(())
    });
}

/// Until the wall clock has moved past `at` by a millisecond (a file written now gets a
/// later mtime than one written at `at`).
#[track_caller]
pub(crate) fn for_clock_past(at: std::time::SystemTime) {
    let after = at + Duration::from_millis(1);
    until("the clock to move on", || {
        (std::time::SystemTime::now() > after).then_some(())
    });
}

/// Whether `probe` turns true within `limit` (polled; for a test that reports the miss in
/// its own words).
pub(crate) fn within(limit: Duration, probe: impl FnMut() -> bool) -> bool {
    within_every(limit, POLL, probe)
}

/// [`within`], probing every `every` (for a probe that costs a process or a round trip).
pub(crate) fn within_every(
    limit: Duration,
    every: Duration,
    mut probe: impl FnMut() -> bool,
) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if probe() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(every);
    }
}

/// Until `ready` says so, at most [`WAIT_TIMEOUT`]; `what` names it on failure.
#[track_caller]
pub(crate) fn for_true(what: &str, mut ready: impl FnMut() -> bool) {
    until(what, || ready().then_some(()));
}
