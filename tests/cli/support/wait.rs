//! Waiting on a condition, never on the clock: each wait polls what it waits for (a file, a
//! process state, a line on a pipe) and fails the test past a bounded deadline.

use std::path::Path;
use std::time::{Duration, Instant};

/// How long any wait may take before the test fails.
pub(crate) const WAIT_TIMEOUT: Duration = Duration::from_secs(20);

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

/// Until `path` exists.
#[track_caller]
pub(crate) fn for_file(path: &Path) {
    until(&format!("{} to exist", path.display()), || {
        path.exists().then_some(())
    });
}

/// Until `path` is gone.
#[track_caller]
pub(crate) fn for_no_file(path: &Path) {
    until(&format!("{} to be removed", path.display()), || {
        (!path.exists()).then_some(())
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

/// Until `path` has grown past `len` bytes (a heartbeat file a live process appends to).
#[track_caller]
pub(crate) fn for_growth(path: &Path, len: u64) -> u64 {
    until(
        &format!("{} to grow past {len} bytes", path.display()),
        || {
            let now = std::fs::metadata(path).ok()?.len();
            (now > len).then_some(now)
        },
    )
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

/// Until `pid` sleeps in a blocking call (state `S`), as a process blocked on a lock does.
#[track_caller]
pub(crate) fn for_sleeping(pid: i32) {
    until(&format!("process {pid} to block"), || {
        (process_state(pid) == Some('S')).then_some(())
    });
}

/// Until `child` exits, at most [`WAIT_TIMEOUT`]; kills it and fails past that.
#[track_caller]
pub(crate) fn for_child(child: &mut std::process::Child) -> std::process::ExitStatus {
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        until(&format!("child {} to exit", child.id()), || {
            child.try_wait().expect("try_wait")
        })
    }));
    found.unwrap_or_else(|panic| {
        let _ = child.kill();
        let _ = child.wait();
        std::panic::resume_unwind(panic)
    })
}
