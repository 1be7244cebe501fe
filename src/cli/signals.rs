//! SIGINT and SIGTERM end every tool promptly, whatever it is blocked on (a FIFO, stdin, the
//! network), with exit 130 / 143 and one JSON document, except inside a [`Hold`]: there they
//! are only recorded (and forwarded to a child process), so a lock write, a rollback, an
//! append and its undo, or an atomic rename always finishes; the process then ends when the
//! last hold is dropped, unless the tool [claimed](claim) the signal to report it itself.
//!
//! Exiting from the handler is what makes "whatever it is blocked on" true: the standard
//! library retries system calls that a signal interrupts, so a flag alone is never seen by a
//! thread blocked in `open` or `read`.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicUsize, Ordering};

use super::Exit;

static RECEIVED: AtomicI32 = AtomicI32::new(0);
static CHILD: AtomicI32 = AtomicI32::new(0);
static HOLDS: AtomicUsize = AtomicUsize::new(0);
static CLAIMED: AtomicBool = AtomicBool::new(false);
/// What the handler writes when it ends the process: leaked once at install, so the handler
/// only loads pointers and calls write(2) and _exit(2), which are async-signal-safe.
static INT_LINE: Message = Message::empty();
static TERM_LINE: Message = Message::empty();
static INT_DOC: Message = Message::empty();
static TERM_DOC: Message = Message::empty();

/// One published text. A single pointer to an immutable, leaked record holding both the
/// address and the length: the handler loads it once, so it can never pair one text's
/// address with another's length (two separate atomics could, and write(2) would then print
/// whatever heap bytes follow, a key among them).
struct Message {
    record: AtomicPtr<&'static [u8]>,
}

impl Message {
    const fn empty() -> Self {
        Message {
            record: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Leaks the text and its record; a replaced record is leaked too, because a handler
    /// may be reading it at that very moment (a few of these per process).
    fn set(&self, text: String) {
        let bytes: &'static [u8] = Box::leak(text.into_bytes().into_boxed_slice());
        self.record
            .store(Box::into_raw(Box::new(bytes)), Ordering::SeqCst);
    }

    /// The text published last, if any.
    fn get(&self) -> Option<&'static [u8]> {
        let record = self.record.load(Ordering::SeqCst);
        // SAFETY: a non-null record came from Box::into_raw in `set` and is never freed
        // nor written again.
        #[allow(unsafe_code)]
        unsafe {
            record.as_ref().copied()
        }
    }

    /// Async-signal-safe: one atomic load and one write(2).
    fn write_to(&self, fd: libc::c_int) {
        if let Some(bytes) = self.get() {
            // SAFETY: write(2) has no safe async-signal-safe form here; the slice is leaked,
            // never freed and immutable.
            #[allow(unsafe_code)]
            unsafe {
                libc::write(fd, bytes.as_ptr().cast::<libc::c_void>(), bytes.len());
            }
        }
    }
}

/// The document printed on stdout when a signal ends a tool.
pub fn interrupted_document(signal: i32) -> String {
    let failure = super::Failure::interrupted(signal);
    super::json::to_string(&super::failure::FailureDocument::of(&failure)).unwrap_or_default()
}

/// Replaces the documents a signal prints when it ends the process (an envelope tool, once it
/// read its envelope, prints that envelope with its section failed).
pub fn set_documents(document: impl Fn(i32) -> String) {
    INT_DOC.set(format!("{}\n", document(libc::SIGINT)));
    TERM_DOC.set(format!("{}\n", document(libc::SIGTERM)));
}

/// No document at all when a signal ends the process: stdout is another program's channel
/// (`dream-run tool-relay`), where a stray line would be a protocol error.
pub fn no_documents() {
    INT_DOC.set(String::new());
    TERM_DOC.set(String::new());
}

pub(super) fn name(signal: i32) -> &'static str {
    if signal == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    }
}

/// Ends the process for `signal` now: one line on stderr (unless `-q`), the interrupted
/// document on stdout, exit 130 / 143. Only async-signal-safe calls.
fn exit_now(signal: i32) -> ! {
    let (line, doc) = if signal == libc::SIGINT {
        (&INT_LINE, &INT_DOC)
    } else {
        (&TERM_LINE, &TERM_DOC)
    };
    line.write_to(libc::STDERR_FILENO);
    doc.write_to(libc::STDOUT_FILENO);
    // SAFETY: _exit(2) is async-signal-safe and never returns (std's exit is neither).
    #[allow(unsafe_code)]
    unsafe {
        libc::_exit(i32::from(Exit::of_signal(signal).code()))
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    // The interrupted code may be about to read errno: what the handler's calls set there
    // is put back before it returns.
    let saved = errno::get();
    let first = RECEIVED.swap(signal, Ordering::SeqCst) == 0;
    let child = CHILD.load(Ordering::SeqCst);
    if let Some(pid) = rustix::process::Pid::from_raw(child) {
        // kill(2) is async-signal-safe; the PID is a child we spawned and not yet reaped.
        if first {
            if let Some(sig) = rustix::process::Signal::from_named_raw(signal) {
                let _ = rustix::process::kill_process(pid, sig);
            }
        } else {
            // Asked twice: the command had its chance to stop cleanly. It leads its own
            // process group (exec), so the group goes with it.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        errno::set(saved);
        return;
    }
    if HOLDS.load(Ordering::SeqCst) == 0 && !CLAIMED.load(Ordering::SeqCst) {
        exit_now(signal);
    }
    errno::set(saved);
}

/// errno of the calling thread, read and written from the signal handler.
mod errno {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn location() -> *mut libc::c_int {
        // SAFETY: libc's thread-local errno; no preconditions.
        #[allow(unsafe_code)]
        unsafe {
            libc::__errno_location()
        }
    }

    #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
    fn location() -> *mut libc::c_int {
        // SAFETY: libc's thread-local errno; no preconditions.
        #[allow(unsafe_code)]
        unsafe {
            libc::__error()
        }
    }

    pub(super) fn get() -> libc::c_int {
        // SAFETY: the pointer is the calling thread's errno, valid for its lifetime.
        #[allow(unsafe_code)]
        unsafe {
            *location()
        }
    }

    pub(super) fn set(value: libc::c_int) {
        // SAFETY: as in `get`.
        #[allow(unsafe_code)]
        unsafe {
            *location() = value;
        }
    }
}

/// Installs the handlers for SIGINT and SIGTERM (the shared `main` does, before any I/O).
/// `tool` and `quiet` shape the stderr line printed when a signal ends the process.
pub fn install(tool: &str, quiet: bool) -> std::io::Result<()> {
    for (signal, line, doc) in [
        (libc::SIGINT, &INT_LINE, &INT_DOC),
        (libc::SIGTERM, &TERM_LINE, &TERM_DOC),
    ] {
        if !quiet {
            line.set(format!("{tool}: interrupted by {}\n", name(signal)));
        }
        doc.set(format!("{}\n", interrupted_document(signal)));
    }
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction(2) has no safe form in std or rustix. A zeroed sigaction with a
        // handler that only touches atomics and errno, kill, write and _exit. SA_RESTART:
        // inside a hold the interrupted call (waitpid, flock) simply goes on; outside one
        // the handler does not return.
        #[allow(unsafe_code)]
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

/// While a `Hold` lives, SIGINT and SIGTERM are recorded instead of ending the process. When
/// the last one is dropped with a signal pending that nobody [claimed](claim), the process
/// ends then (exit 130 / 143). Holds nest and are meant for short critical sections.
#[must_use = "a hold protects only while it lives"]
pub struct Hold(());

pub fn hold() -> Hold {
    HOLDS.fetch_add(1, Ordering::SeqCst);
    Hold(())
}

impl Hold {
    /// Ends the hold and claims a signal that arrived meanwhile: the caller reports it.
    pub fn end(self) -> Option<i32> {
        let signal = claim();
        drop(self);
        signal
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if HOLDS.fetch_sub(1, Ordering::SeqCst) == 1 && !CLAIMED.load(Ordering::SeqCst) {
            if let Some(signal) = received() {
                exit_now(signal);
            }
        }
    }
}

/// The signal received, if any, now the caller's to report (with [`Exit::of_signal`]): from here on
/// signals no longer end the process by themselves, because it is on its way out.
pub fn claim() -> Option<i32> {
    let signal = received();
    if signal.is_some() {
        CLAIMED.store(true, Ordering::SeqCst);
    }
    signal
}

/// Forwards caught signals to `pid` until [`stop_forwarding`] (a second signal kills it);
/// a signal that arrived before the child existed is delivered to it now.
pub fn forward_to(pid: u32) {
    let pid = libc::pid_t::try_from(pid).unwrap_or(0);
    CHILD.store(pid, Ordering::SeqCst);
    let pending = RECEIVED.load(Ordering::SeqCst);
    let signal = rustix::process::Signal::from_named_raw(pending);
    if let (Some(pid), Some(signal)) = (rustix::process::Pid::from_raw(pid), signal) {
        let _ = rustix::process::kill_process(pid, signal);
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

/// Makes a child spawned from `command` end when this process ends, even by SIGKILL (the
/// kernel's parent-death signal on Linux; it is sent when the spawning thread exits, so spawn
/// from a thread that lives as long as the child should). A parent already gone before the
/// child could ask for the signal makes the spawn fail instead.
pub fn die_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    // SAFETY: pre_exec has no safe form. Between fork and exec only async-signal-safe
    // calls (prctl, getppid), and no allocation (another thread may have held the
    // allocator's lock at fork).
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::Message;

    #[test]
    fn a_message_read_while_it_is_replaced_is_always_one_whole_text() {
        // Texts of different lengths: a torn read (one text's address, another's length)
        // would return bytes that equal neither.
        static MESSAGE: Message = Message::empty();
        let short = "interrupted\n".to_owned();
        let long = format!("{{\"error\":\"{}\"}}\n", "x".repeat(4096));
        assert_eq!(MESSAGE.get(), None);
        MESSAGE.set(short.clone());
        let reader = {
            let (short, long) = (short.clone(), long.clone());
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    let seen = MESSAGE.get().expect("published before the reader started");
                    assert!(
                        seen == short.as_bytes() || seen == long.as_bytes(),
                        "a torn message of {} bytes",
                        seen.len()
                    );
                }
            })
        };
        for round in 0..2_000 {
            MESSAGE.set(if round % 2 == 0 {
                long.clone()
            } else {
                short.clone()
            });
        }
        reader.join().expect("the reader saw only whole texts");
        assert_eq!(MESSAGE.get(), Some(short.as_bytes()));
    }
}
