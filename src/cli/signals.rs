//! SIGINT and SIGTERM: remembered, and forwarded to a child process when there is one, so a
//! tool can finish its bookkeeping (release a lock, restore a snapshot) instead of dying.

use std::sync::atomic::{AtomicI32, Ordering};

use super::Exit;

static RECEIVED: AtomicI32 = AtomicI32::new(0);
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    RECEIVED.store(signal, Ordering::SeqCst);
    let child = CHILD.load(Ordering::SeqCst);
    if child > 0 {
        // SAFETY: kill is async-signal-safe; the PID is a child we spawned and not yet reaped.
        unsafe {
            libc::kill(child, signal);
        }
    }
}

/// Catches SIGINT and SIGTERM from now on (system calls restart after the handler).
pub fn catch_interrupts() -> std::io::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a handler that only touches atomics and calls kill.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Forwards caught signals to `pid` until [`stop_forwarding`]; a signal that arrived before
/// the child existed is delivered to it now.
pub fn forward_to(pid: u32) {
    let pid = libc::pid_t::try_from(pid).unwrap_or(0);
    CHILD.store(pid, Ordering::SeqCst);
    let pending = RECEIVED.load(Ordering::SeqCst);
    if pending != 0 && pid > 0 {
        // SAFETY: as in the handler.
        unsafe {
            libc::kill(pid, pending);
        }
    }
}

pub fn stop_forwarding() {
    CHILD.store(0, Ordering::SeqCst);
}

/// The last SIGINT or SIGTERM caught, if any.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// 130 for SIGINT, 143 for SIGTERM.
pub fn exit_for(signal: i32) -> Exit {
    if signal == libc::SIGINT {
        Exit::Interrupted
    } else {
        Exit::Terminated
    }
}
