//! One way to run a tool in a test: say what the exit status, stdout and stderr must be, then
//! run it. Like `just`'s test builder, nothing is left unsaid: `run` (or `spawn`) fails when
//! any of the three was neither checked nor waived (`*_any`, with a reason), and any failure
//! prints all three. Every run is bounded by a timeout.
//!
//! ```ignore
//! let out = Run::new(&home, "dream-gate")
//!     .args(["--min-hours", "3"])
//!     .code(1)
//!     .stdout_json(|doc| assert_eq!(doc["gate"]["reason"], "too_soon"))
//!     .stderr_is("dream-gate: not due: too_soon: 2.0 h of 3 h\n")
//!     .run();
//! ```
//!
//! A process that a test signals or watches while it runs is described the same way and
//! started with [`Run::spawn`]; [`Running::finish`] then checks it like `run` does.
//!
//! Built on the crates the spec names: the binaries are found by `assert_cmd`'s `cargo_bin`,
//! stdout and stderr are checked with `predicates` (`.stdout(predicate::str::contains(..))`;
//! the `*_is`/`*_contains`/`*_empty` helpers build those predicates) and the exit code, stdout
//! and stderr are asserted by `assert_cmd`'s `Assert` over the run's `Output`, whichever way
//! it was started.
//!
//! A run is described once, as a `std::process::Command` (program, arguments, environment,
//! directory, and the uid of [`ClaudeHome::process_unprivileged`]), and started one of two
//! ways. [`Run::run`] hands a run that reads bytes (or nothing) and gives both outputs back
//! to `assert_cmd::Command` (`from_std`, `write_stdin`, `timeout`, `output`). The rest is
//! spawned here: [`Run::spawn`], whose run the test signals or feeds while it runs, and the
//! runs whose stdin comes from a file or FIFO or whose stdout or stderr goes elsewhere
//! (`/dev/full`, a file): `assert_cmd::Command::output` pipes all three itself, and cannot
//! hand a run over while it runs. So is a run fed more than a pipe holds: `assert_cmd` writes
//! stdin before its timeout starts, and a run that never reads it would block it there. A run that may leave a process behind holding its outputs
//! sends them elsewhere (`.stdout_into`/`.stderr_into`): `assert_cmd` reads them to their end
//! after its timeout, so such a process would hold the read up. Both ways fail the test, not
//! hang it, when that happens anyway.
//!
//! Every JSON document a test reads from stdout is validated against its command's schema
//! (`schemas/`, see [`super::schema`]).
//!
//! Runs kept outside `Run`: the peak-RSS measurements (`net::run_measuring_peak_rss`), which
//! start the binary under ptrace to read its VmHWM at the exit stop; their callers check the
//! three streams themselves.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use assert_cmd::assert::OutputAssertExt as _;
use predicates::{prelude::*, BoxPredicate};
use serde_json::Value;

use super::{bin_path, schema, wait, ClaudeHome};

/// How long any one run may take before it is killed and the test fails.
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// What a pipe holds on Linux before its writer blocks.
const PIPE_CAPACITY: usize = 64 * 1024;

type TextCheck<'a> = Box<dyn FnOnce(&str) + 'a>;

/// What a stream must hold: predicates and checks that read it, or a waiver with its reason.
#[derive(Default)]
struct Stream<'a> {
    predicates: Vec<BoxPredicate<str>>,
    checks: Vec<TextCheck<'a>>,
    waived: Option<String>,
}

impl Stream<'_> {
    fn said(&self) -> bool {
        !self.predicates.is_empty() || !self.checks.is_empty() || self.waived.is_some()
    }
}

/// The exit a run must end with.
enum Exit {
    Code(i32),
    Signal(i32),
    Any(&'static str),
}

/// Where the run's stdin comes from.
enum Input {
    Bytes(Vec<u8>),
    Stdio(Stdio),
}

/// A tool run that is being described; [`Run::run`] runs it and checks it.
#[must_use = "a Run does nothing until .run() or .spawn()"]
pub(crate) struct Run<'a> {
    cmd: Command,
    input: Input,
    /// stdout or stderr sent somewhere other than the test (a full disk, a closed pipe).
    stdout_to: Option<Stdio>,
    stderr_to: Option<Stdio>,
    label: String,
    timeout: Duration,
    exit: Option<Exit>,
    stdout: Stream<'a>,
    stderr: Stream<'a>,
    /// The schema its stdout documents are validated against, when it is one of ours.
    schema: Option<schema::Command>,
}

/// What a run printed, once every check passed.
#[derive(Debug)]
pub(crate) struct Ran {
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    schema: Option<schema::Command>,
}

impl Ran {
    /// stdout as the one JSON document it was checked to be (see [`Run::stdout_json`]),
    /// validated against its command's schema.
    #[track_caller]
    pub(crate) fn json(&self) -> Value {
        let doc = serde_json::from_str(&self.stdout).expect("stdout was checked as JSON");
        schema::validate(self.schema.as_ref(), &doc);
        doc
    }
}

impl<'a> Run<'a> {
    /// `bin` (one of ours) with `home`'s clean environment, run from its project.
    pub(crate) fn new(home: &ClaudeHome, bin: &str) -> Self {
        Self::ours(home.process(bin_path(bin)), bin)
    }

    /// `bin` as an unprivileged user when the tests run as root.
    pub(crate) fn unprivileged(home: &ClaudeHome, bin: &str) -> Self {
        Self::ours(home.process_unprivileged(bin), bin)
    }

    /// A prepared command that runs our binary `bin`, so its stdout has a schema.
    pub(crate) fn ours(cmd: Command, bin: &str) -> Self {
        let mut run = Self::command(cmd, bin);
        run.schema = Some(schema::Command::of(bin));
        run
    }

    /// Any prepared command (for example `home.process("sh")`), named `label` on failure.
    /// Its stdin is empty unless [`Run::stdin`] says otherwise.
    pub(crate) fn command(cmd: Command, label: &str) -> Self {
        Run {
            cmd,
            input: Input::Bytes(Vec::new()),
            stdout_to: None,
            stderr_to: None,
            label: label.to_string(),
            timeout: RUN_TIMEOUT,
            exit: None,
            stdout: Stream::default(),
            stderr: Stream::default(),
            schema: None,
        }
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        let text = arg.as_ref().to_string_lossy();
        if let Some(schema) = &mut self.schema {
            schema.arg(&text);
        }
        self.label.push(' ');
        self.label.push_str(&text);
        self.cmd.arg(arg);
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for arg in args {
            self = self.arg(arg);
        }
        self
    }

    pub(crate) fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    pub(crate) fn envs<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.cmd.envs(vars);
        self
    }

    pub(crate) fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.cmd.env_remove(key);
        self
    }

    pub(crate) fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    /// The bytes the run reads on stdin (closed after them).
    pub(crate) fn stdin(mut self, input: impl Into<Vec<u8>>) -> Self {
        self.input = Input::Bytes(input.into());
        self
    }

    /// stdin from somewhere else: `Stdio::null()`, a FIFO, a pipe the test holds open.
    pub(crate) fn stdin_from(mut self, input: impl Into<Stdio>) -> Self {
        self.input = Input::Stdio(input.into());
        self
    }

    /// The run's stdout goes to `to` (`/dev/full`, a pipe whose reader is gone), not to the
    /// test; `what` says where, and stands for the stdout check.
    pub(crate) fn stdout_into(mut self, to: impl Into<Stdio>, what: &str) -> Self {
        self.stdout_to = Some(to.into());
        self.stdout.waived = Some(format!("it goes to {what}"));
        self
    }

    /// The run's stderr goes to `to`, not to the test; `what` says where, and stands for the
    /// stderr check. For a run whose background process keeps stderr open after it exits.
    pub(crate) fn stderr_into(mut self, to: impl Into<Stdio>, what: &str) -> Self {
        self.stderr_to = Some(to.into());
        self.stderr.waived = Some(format!("it goes to {what}"));
        self
    }

    /// At most `limit` instead of [`RUN_TIMEOUT`].
    pub(crate) fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = limit;
        self
    }

    pub(crate) fn code(mut self, code: i32) -> Self {
        self.exit = Some(Exit::Code(code));
        self
    }

    pub(crate) fn success(self) -> Self {
        self.code(0)
    }

    /// The run must end by `signal` (for example the SIGKILL the test sends it).
    pub(crate) fn killed_by(mut self, signal: i32) -> Self {
        self.exit = Some(Exit::Signal(signal));
        self
    }

    /// The exit status does not matter here, because `why`.
    pub(crate) fn code_any(mut self, why: &'static str) -> Self {
        self.exit = Some(Exit::Any(why));
        self
    }

    /// stdout must satisfy `predicate` (for example `predicate::str::starts_with("{")`).
    pub(crate) fn stdout<P>(mut self, predicate: P) -> Self
    where
        P: Predicate<str> + Send + Sync + 'static,
    {
        self.stdout.predicates.push(predicate.boxed());
        self
    }

    pub(crate) fn stdout_is(self, expected: impl Into<String>) -> Self {
        self.stdout(predicate::str::diff(expected.into()))
    }

    pub(crate) fn stdout_empty(self) -> Self {
        self.stdout(predicate::str::is_empty())
    }

    pub(crate) fn stdout_contains(self, needle: impl Into<String>) -> Self {
        self.stdout(predicate::str::contains(needle.into()))
    }

    /// stdout is one compact JSON line, valid for its command's schema, which `check` then
    /// looks at.
    pub(crate) fn stdout_json(self, check: impl FnOnce(&Value) + 'a) -> Self {
        let schema = self.schema.clone();
        self.stdout_with(move |text| {
            let doc = one_json_line(text);
            schema::validate(schema.as_ref(), &doc);
            check(&doc);
        })
    }

    /// Any other check of stdout.
    pub(crate) fn stdout_with(mut self, check: impl FnOnce(&str) + 'a) -> Self {
        self.stdout.checks.push(Box::new(check));
        self
    }

    /// stdout does not matter here, because `why`.
    pub(crate) fn stdout_any(mut self, why: &'static str) -> Self {
        self.stdout.waived = Some(why.to_string());
        self
    }

    /// stderr must satisfy `predicate` (for example `predicate::str::contains("not due")`).
    pub(crate) fn stderr<P>(mut self, predicate: P) -> Self
    where
        P: Predicate<str> + Send + Sync + 'static,
    {
        self.stderr.predicates.push(predicate.boxed());
        self
    }

    pub(crate) fn stderr_is(self, expected: impl Into<String>) -> Self {
        self.stderr(predicate::str::diff(expected.into()))
    }

    pub(crate) fn stderr_empty(self) -> Self {
        self.stderr(predicate::str::is_empty())
    }

    pub(crate) fn stderr_contains(self, needle: impl Into<String>) -> Self {
        self.stderr(predicate::str::contains(needle.into()))
    }

    /// Any other check of stderr.
    pub(crate) fn stderr_with(mut self, check: impl FnOnce(&str) + 'a) -> Self {
        self.stderr.checks.push(Box::new(check));
        self
    }

    /// stderr does not matter here, because `why`.
    pub(crate) fn stderr_any(mut self, why: &'static str) -> Self {
        self.stderr.waived = Some(why.to_string());
        self
    }

    /// Runs it and checks the exit, stdout and stderr; panics, printing all three, when one
    /// of them is wrong or was never said.
    ///
    /// A run that reads bytes (or nothing) and whose stdout and stderr both come back to the
    /// test is run by `assert_cmd::Command::output`, with its timeout. Any other run (stdin
    /// from a file or FIFO, an output sent elsewhere, stdin bigger than a pipe holds) is
    /// started like [`Run::spawn`] and finished at once.
    #[track_caller]
    pub(crate) fn run(self) -> Ran {
        let plain = self.stdout_to.is_none()
            && self.stderr_to.is_none()
            // assert_cmd writes stdin before its timeout starts, so a run that reads no more
            // than a pipe holds never leaves it blocked there.
            && matches!(&self.input, Input::Bytes(bytes) if bytes.len() <= PIPE_CAPACITY);
        if plain {
            self.run_by_assert_cmd()
        } else {
            self.spawn().finish()
        }
    }

    /// [`Run::run`] through `assert_cmd::Command`: stdin bytes in, both outputs captured,
    /// killed past its timeout.
    #[track_caller]
    fn run_by_assert_cmd(self) -> Ran {
        let (launch, checks) = self.split();
        checks.assert_all_said();
        let Input::Bytes(bytes) = launch.input else {
            unreachable!("run() sends only stdin bytes here")
        };
        let mut cmd = assert_cmd::Command::from_std(launch.cmd);
        cmd.write_stdin(bytes).timeout(checks.timeout);
        // assert_cmd kills the run past its timeout, then reads stdout and stderr to their
        // end: a process the run left behind that holds them open would block that read, so
        // it reads on a thread of its own and this one stops waiting (and fails) like
        // `Running::finish` does.
        let (sent, received) = mpsc::channel();
        let started = Instant::now();
        std::thread::spawn(move || {
            let _ = sent.send(cmd.output());
        });
        let output = match received.recv_timeout(checks.timeout + wait::WAIT_TIMEOUT) {
            Ok(Ok(output)) => output,
            Ok(Err(e)) => panic!("{}: cannot run: {e}", checks.label),
            Err(_) => panic!(
                "{}: its stdout and stderr did not close within {:?} of its end (a process \
                 it started keeps them open? send them elsewhere with \
                 .stdout_into/.stderr_into)",
                checks.label,
                wait::WAIT_TIMEOUT
            ),
        };
        let elapsed = started.elapsed();
        // assert_cmd says nothing when it kills a run: a SIGKILL at or past the limit is it.
        let timed_out = elapsed >= checks.timeout
            && std::os::unix::process::ExitStatusExt::signal(&output.status) == Some(libc::SIGKILL);
        checks.check(output, elapsed, timed_out)
    }

    /// Starts it, checked like [`Run::run`] once [`Running::finish`] is called; meanwhile the
    /// test may signal it and watch what it does.
    #[track_caller]
    pub(crate) fn spawn(self) -> Running<'a> {
        let (launch, checks) = self.split();
        checks.assert_all_said();
        let Launch {
            mut cmd,
            input,
            stdout_to,
            stderr_to,
        } = launch;
        let (stdout_captured, stderr_captured) = (stdout_to.is_none(), stderr_to.is_none());
        cmd.stdout(stdout_to.unwrap_or_else(Stdio::piped))
            .stderr(stderr_to.unwrap_or_else(Stdio::piped));
        let bytes = match input {
            Input::Bytes(bytes) => {
                cmd.stdin(Stdio::piped());
                Some(bytes)
            }
            Input::Stdio(stdio) => {
                cmd.stdin(stdio);
                None
            }
        };
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{}: cannot run: {e}", checks.label));
        // stdin is fed and both outputs drained by threads, so no pipe fills up and blocks
        // the run, even when the test holds the run for long.
        let feeder = bytes.map(|bytes| {
            let mut pipe = child.stdin.take().expect("piped stdin");
            std::thread::spawn(move || {
                // A run may exit without reading all of it; that is its business.
                let _ = pipe.write_all(&bytes);
            })
        });
        let stdout_buf = Arc::new(Mutex::new(Vec::new()));
        let stderr_buf = Arc::new(Mutex::new(Vec::new()));
        let mut drains = Vec::new();
        if stdout_captured {
            drains.push(drain(
                child.stdout.take().expect("piped stdout"),
                &stdout_buf,
            ));
        }
        if stderr_captured {
            drains.push(drain(
                child.stderr.take().expect("piped stderr"),
                &stderr_buf,
            ));
        }
        Running {
            child,
            started: Instant::now(),
            checks: Some(checks),
            stdout_buf,
            stderr_buf,
            feeder,
            drains,
        }
    }

    /// What to start, and what to check once it ended.
    fn split(self) -> (Launch, Checks<'a>) {
        let Run {
            cmd,
            input,
            stdout_to,
            stderr_to,
            label,
            timeout,
            exit,
            stdout,
            stderr,
            schema,
        } = self;
        (
            Launch {
                cmd,
                input,
                stdout_to,
                stderr_to,
            },
            Checks {
                label,
                timeout,
                exit,
                stdout,
                stderr,
                schema,
            },
        )
    }
}

/// How a run is started: its command line, environment and directory (the one description
/// both ways of starting use), and where its stdio goes.
struct Launch {
    cmd: Command,
    input: Input,
    stdout_to: Option<Stdio>,
    stderr_to: Option<Stdio>,
}

/// What a run must end with, checked the same way however it was started.
struct Checks<'a> {
    label: String,
    timeout: Duration,
    exit: Option<Exit>,
    stdout: Stream<'a>,
    stderr: Stream<'a>,
    schema: Option<schema::Command>,
}

impl Checks<'_> {
    /// Fails before anything starts when the exit, stdout or stderr was neither checked nor
    /// waived.
    #[track_caller]
    fn assert_all_said(&self) {
        let mut unsaid = Vec::new();
        if self.exit.is_none() {
            unsaid.push("the exit status (.code/.success/.killed_by/.code_any)");
        }
        if !self.stdout.said() {
            unsaid.push("stdout (.stdout_*)");
        }
        if !self.stderr.said() {
            unsaid.push("stderr (.stderr_*)");
        }
        assert!(
            unsaid.is_empty(),
            "{}: the test does not say {}",
            self.label,
            unsaid.join(", ")
        );
        let exit_waiver = match self.exit {
            Some(Exit::Any(why)) => Some(why),
            _ => None,
        };
        let unexplained: Vec<&str> = [
            ("the exit status", exit_waiver),
            ("stdout", self.stdout.waived.as_deref()),
            ("stderr", self.stderr.waived.as_deref()),
        ]
        .into_iter()
        .filter(|(_, why)| why.is_some_and(|why| why.trim().is_empty()))
        .map(|(what, _)| what)
        .collect();
        assert!(
            unexplained.is_empty(),
            "{}: the test waives {} without saying why",
            self.label,
            unexplained.join(", ")
        );
    }

    /// Checks the exit, stdout and stderr of a run that ended after `elapsed`; panics,
    /// printing all three, when one of them is wrong.
    #[track_caller]
    fn check(self, output: std::process::Output, elapsed: Duration, timed_out: bool) -> Ran {
        let Checks {
            label,
            timeout,
            exit,
            stdout,
            stderr,
            schema,
        } = self;
        let ran = Ran {
            code: output.status.code(),
            signal: std::os::unix::process::ExitStatusExt::signal(&output.status),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            schema,
        };
        let waived: Vec<String> = [
            match exit {
                Some(Exit::Any(why)) => Some(format!("exit not checked: {why}\n")),
                _ => None,
            },
            stdout
                .waived
                .as_ref()
                .map(|why| format!("stdout not checked: {why}\n")),
            stderr
                .waived
                .as_ref()
                .map(|why| format!("stderr not checked: {why}\n")),
        ]
        .into_iter()
        .flatten()
        .collect();
        let checked = catch_unwind(AssertUnwindSafe(|| {
            assert!(!timed_out, "timed out after {timeout:?} and was killed");
            let read_stdout = !stdout.checks.is_empty() || !stdout.predicates.is_empty();
            let read_stderr = !stderr.checks.is_empty() || !stderr.predicates.is_empty();
            let mut assert = output.assert();
            match exit {
                Some(Exit::Code(code)) => assert = assert.code(code),
                Some(Exit::Signal(signal)) => {
                    assert_eq!(ran.signal, Some(signal), "ended by signal");
                }
                Some(Exit::Any(_)) | None => {}
            }
            for predicate in stdout.predicates {
                assert = assert.stdout(predicate);
            }
            for predicate in stderr.predicates {
                assert = assert.stderr(predicate);
            }
            for check in stdout.checks {
                check(&ran.stdout);
            }

            for check in stderr.checks {
                check(&ran.stderr);
            }
            if read_stdout {
                schema::validate_text(ran.schema.as_ref(), &ran.stdout);
            }
            if read_stderr {
                schema::validate_events(ran.schema.as_ref(), &ran.stderr);
            }
        }));
        if let Err(panic) = checked {
            eprintln!(
                "---- {label}\nexit: {:?} (signal {:?}) after {elapsed:?}\n{}\
                 ---- stdout\n{}\n---- stderr\n{}\n----",
                ran.code,
                ran.signal,
                waived.concat(),
                ran.stdout,
                ran.stderr
            );
            resume_unwind(panic);
        }
        ran
    }
}

fn drain(mut from: impl Read + Send + 'static, into: &Arc<Mutex<Vec<u8>>>) -> JoinHandle<()> {
    let into = Arc::clone(into);
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = from.read(&mut chunk) {
            if n == 0 {
                break;
            }
            into.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend_from_slice(&chunk[..n]);
        }
    })
}

/// A run that was started and is not yet checked. Dropped unfinished, it is killed and
/// reaped, so no test leaves a process behind.
pub(crate) struct Running<'a> {
    child: Child,
    started: Instant,
    /// Taken by [`Running::finish`]; still here when it is dropped unfinished.
    checks: Option<Checks<'a>>,
    stdout_buf: Arc<Mutex<Vec<u8>>>,
    stderr_buf: Arc<Mutex<Vec<u8>>>,
    feeder: Option<JoinHandle<()>>,
    drains: Vec<JoinHandle<()>>,
}

impl Running<'_> {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn label(&self) -> &str {
        self.checks
            .as_ref()
            .map_or("", |checks| checks.label.as_str())
    }

    /// Sends `signal` to the process.
    #[track_caller]
    pub(crate) fn signal(&self, signal: i32) {
        let pid = i32::try_from(self.child.id()).expect("pid");
        assert_eq!(
            unsafe { libc::kill(pid, signal) },
            0,
            "{}: kill {signal}",
            self.label()
        );
    }

    /// Waits for it to end (killing it past its timeout) and checks the exit, stdout and
    /// stderr as described; panics, printing all three, when one of them is wrong.
    #[track_caller]
    pub(crate) fn finish(mut self) -> Ran {
        let checks = self.checks.take().expect("finished once");
        let deadline = self.started + checks.timeout;
        let mut timed_out = false;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() >= deadline {
                timed_out = true;
                let _ = self.child.kill();
                break self.child.wait().expect("wait");
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let elapsed = self.started.elapsed();
        if let Some(feeder) = self.feeder.take() {
            let _ = feeder.join();
        }
        // The outputs end when the last writer closes them; a process the run left behind
        // that keeps them open fails the test instead of hanging it.
        let drains = std::mem::take(&mut self.drains);
        wait::for_true(
            &format!(
                "{}: its stdout and stderr to close (a process it started keeps them open? \
                 send them elsewhere with .stdout_into/.stderr_into)",
                checks.label
            ),
            || drains.iter().all(JoinHandle::is_finished),
        );
        let output = std::process::Output {
            status,
            stdout: bytes_of(&self.stdout_buf),
            stderr: bytes_of(&self.stderr_buf),
        };
        checks.check(output, elapsed, timed_out)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.checks.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn bytes_of(buf: &Mutex<Vec<u8>>) -> Vec<u8> {
    buf.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// The one JSON document a tool printed: one line, newline-terminated.
pub(crate) fn one_json_line(text: &str) -> Value {
    assert!(
        text.ends_with('\n'),
        "stdout not newline-terminated: {text:?}"
    );
    assert_eq!(
        text.trim_end().lines().count(),
        1,
        "not one compact line: {text:?}"
    );
    serde_json::from_str(text).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {text:?}"))
}

/// The runner itself: what it refuses and what it stops.
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    use super::{Ran, Run};
    use crate::support::ClaudeHome;

    /// The message `run` panicked with; fails when it did not panic.
    fn panic_of(run: impl FnOnce() -> Ran) -> String {
        let panic = catch_unwind(AssertUnwindSafe(run)).expect_err("the run was accepted");
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .expect("a text panic")
    }

    fn echo(home: &ClaudeHome) -> Run<'static> {
        Run::command(home.process("sh"), "sh").args(["-c", "echo out; echo err >&2"])
    }

    #[test]
    fn a_stream_left_unchecked_fails_the_run() {
        let home = ClaudeHome::new();
        let message = panic_of(|| echo(&home).success().stdout_is("out\n").run());
        assert!(
            message.ends_with("the test does not say stderr (.stderr_*)"),
            "{message}"
        );
        let message = panic_of(|| echo(&home).stderr_is("err\n").stdout_is("out\n").run());
        assert!(
            message.ends_with(
                "the test does not say the exit status \
                 (.code/.success/.killed_by/.code_any)"
            ),
            "{message}"
        );
        // The same rule holds for a run the test is handed.
        let message = panic_of(|| echo(&home).success().stderr_is("err\n").spawn().finish());
        assert!(
            message.ends_with("the test does not say stdout (.stdout_*)"),
            "{message}"
        );
    }

    #[test]
    fn a_waiver_without_a_reason_fails_the_run() {
        let home = ClaudeHome::new();
        let message = panic_of(|| {
            echo(&home)
                .success()
                .stdout_any(" ")
                .stderr_is("err\n")
                .run()
        });
        assert!(
            message.ends_with("the test waives stdout without saying why"),
            "{message}"
        );
        let message = panic_of(|| {
            echo(&home)
                .code_any("")
                .stdout_is("out\n")
                .stderr_any("")
                .run()
        });
        assert!(
            message.ends_with("the test waives the exit status, stderr without saying why"),
            "{message}"
        );
        // Said, with reasons, the same run passes.
        let ran = echo(&home)
            .code_any("the runner is under test")
            .stdout_is("out\n")
            .stderr_any("the runner is under test")
            .run();
        assert_eq!((ran.code, ran.stderr.as_str()), (Some(0), "err\n"));
    }

    /// Both ways of starting kill a run past its timeout and fail the test.
    #[test]
    fn a_run_past_its_timeout_is_killed_and_fails() {
        let home = ClaudeHome::new();
        let sleeper = || {
            Run::command(home.process("sleep"), "sleep 30")
                .arg("30")
                .timeout(Duration::from_millis(200))
                .code_any("it is killed")
                .stdout_empty()
                .stderr_empty()
        };
        let started = Instant::now();
        let message = panic_of(|| sleeper().run());
        assert_eq!(message, "timed out after 200ms and was killed");
        let message = panic_of(|| sleeper().stdin_from(Stdio::null()).run());
        assert_eq!(message, "timed out after 200ms and was killed");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }
}
