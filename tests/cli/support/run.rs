//! One way to run a tool in a test: say what the exit status, stdout and stderr must be, then
//! run it. Like `just`'s test builder, nothing is left unsaid: `run` fails when any of the
//! three was neither checked nor waived (`*_any`, with a reason), and any failure prints all
//! three. Every run is bounded by a timeout.
//!
//! ```ignore
//! let out = Run::new(&home, "dream-gate")
//!     .args(["--min-hours", "3"])
//!     .code(1)
//!     .stdout_json(|doc| assert_eq!(doc["gate"]["reason"], "too_soon"))
//!     .stderr_is("dream-gate: not due: too_soon: 2.0 h of 3 h\n")
//!     .run();
//! ```

use std::ffi::OsStr;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::ClaudeHome;

/// How long any one run may take before it is killed and the test fails.
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(60);

type TextCheck<'a> = Box<dyn FnOnce(&str) + 'a>;

/// What a stream must hold: a list of checks, or a waiver with its reason.
#[derive(Default)]
struct Stream<'a> {
    checks: Vec<TextCheck<'a>>,
    waived: Option<&'static str>,
}

impl<'a> Stream<'a> {
    fn said(&self) -> bool {
        !self.checks.is_empty() || self.waived.is_some()
    }
}

/// The exit a run must end with.
enum Exit {
    Code(i32),
    Any(&'static str),
}

/// A tool run that is being described; [`Run::run`] runs it and checks it.
#[must_use = "a Run does nothing until .run()"]
pub(crate) struct Run<'a> {
    cmd: assert_cmd::Command,
    label: String,
    timeout: Duration,
    exit: Option<Exit>,
    stdout: Stream<'a>,
    stderr: Stream<'a>,
}

/// What a run printed, once every check passed.
#[derive(Debug)]
pub(crate) struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// stdout as the one JSON document it was checked to be (see [`Run::stdout_json`]).
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).expect("stdout was checked as JSON")
    }
}

impl<'a> Run<'a> {
    /// `bin` (one of ours) with `home`'s clean environment, run from its project.
    pub(crate) fn new(home: &ClaudeHome, bin: &str) -> Self {
        Self::command(home.cmd(bin), bin)
    }

    /// `bin` as an unprivileged user when the tests run as root.
    pub(crate) fn unprivileged(home: &ClaudeHome, bin: &str) -> Self {
        Self::command(home.cmd_unprivileged(bin), bin)
    }

    /// Any prepared command (for example `home.process("sh")` turned into one).
    pub(crate) fn command(cmd: assert_cmd::Command, label: &str) -> Self {
        Run {
            cmd,
            label: label.to_string(),
            timeout: RUN_TIMEOUT,
            exit: None,
            stdout: Stream::default(),
            stderr: Stream::default(),
        }
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.label.push(' ');
        self.label.push_str(&arg.as_ref().to_string_lossy());
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

    pub(crate) fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    pub(crate) fn stdin(mut self, input: impl Into<Vec<u8>>) -> Self {
        self.cmd.write_stdin(input);
        self
    }

    pub(crate) fn code(mut self, code: i32) -> Self {
        self.exit = Some(Exit::Code(code));
        self
    }

    pub(crate) fn success(self) -> Self {
        self.code(0)
    }

    /// The exit status does not matter here, because `why`.
    pub(crate) fn code_any(mut self, why: &'static str) -> Self {
        self.exit = Some(Exit::Any(why));
        self
    }

    pub(crate) fn stdout_is(self, expected: impl Into<String>) -> Self {
        let expected = expected.into();
        self.stdout_with(move |text| assert_eq!(text, expected, "stdout"))
    }

    pub(crate) fn stdout_empty(self) -> Self {
        self.stdout_is("")
    }

    pub(crate) fn stdout_contains(self, needle: impl Into<String>) -> Self {
        let needle = needle.into();
        self.stdout_with(move |text| {
            assert!(text.contains(&needle), "stdout lacks {needle:?}");
        })
    }

    /// stdout is one compact JSON line, which `check` then looks at.
    pub(crate) fn stdout_json(self, check: impl FnOnce(&Value) + 'a) -> Self {
        self.stdout_with(move |text| check(&one_json_line(text)))
    }

    /// Any other check of stdout.
    pub(crate) fn stdout_with(mut self, check: impl FnOnce(&str) + 'a) -> Self {
        self.stdout.checks.push(Box::new(check));
        self
    }

    /// stdout does not matter here, because `why`.
    pub(crate) fn stdout_any(mut self, why: &'static str) -> Self {
        self.stdout.waived = Some(why);
        self
    }

    pub(crate) fn stderr_is(self, expected: impl Into<String>) -> Self {
        let expected = expected.into();
        self.stderr_with(move |text| assert_eq!(text, expected, "stderr"))
    }

    pub(crate) fn stderr_empty(self) -> Self {
        self.stderr_is("")
    }

    pub(crate) fn stderr_contains(self, needle: impl Into<String>) -> Self {
        let needle = needle.into();
        self.stderr_with(move |text| {
            assert!(text.contains(&needle), "stderr lacks {needle:?}");
        })
    }

    /// Any other check of stderr.
    pub(crate) fn stderr_with(mut self, check: impl FnOnce(&str) + 'a) -> Self {
        self.stderr.checks.push(Box::new(check));
        self
    }

    /// stderr does not matter here, because `why`.
    pub(crate) fn stderr_any(mut self, why: &'static str) -> Self {
        self.stderr.waived = Some(why);
        self
    }

    /// Runs it and checks the exit, stdout and stderr; panics, printing all three, when one
    /// of them is wrong or was never said.
    #[track_caller]
    pub(crate) fn run(self) -> Ran {
        let Run {
            mut cmd,
            label,
            timeout,
            exit,
            stdout,
            stderr,
        } = self;
        let mut unsaid = Vec::new();
        if exit.is_none() {
            unsaid.push("the exit status (.code/.success/.code_any)");
        }
        if !stdout.said() {
            unsaid.push("stdout (.stdout_*)");
        }
        if !stderr.said() {
            unsaid.push("stderr (.stderr_*)");
        }
        assert!(
            unsaid.is_empty(),
            "{label}: the test does not say {}",
            unsaid.join(", ")
        );
        let waived: Vec<String> = [
            match exit {
                Some(Exit::Any(why)) => Some(("exit", why)),
                _ => None,
            },
            stdout.waived.map(|why| ("stdout", why)),
            stderr.waived.map(|why| ("stderr", why)),
        ]
        .into_iter()
        .flatten()
        .map(|(what, why)| format!("{what} not checked: {why}\n"))
        .collect();
        let started = Instant::now();
        let output = cmd
            .timeout(timeout)
            .output()
            .unwrap_or_else(|e| panic!("{label}: cannot run: {e}"));
        let elapsed = started.elapsed();
        let ran = Ran {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        };
        let signal = std::os::unix::process::ExitStatusExt::signal(&output.status);
        let checked = catch_unwind(AssertUnwindSafe(|| {
            assert!(
                elapsed < timeout,
                "timed out after {timeout:?} and was killed"
            );
            match exit {
                Some(Exit::Code(code)) => assert_eq!(ran.code, Some(code), "exit code"),
                Some(Exit::Any(_)) | None => {}
            }
            for check in stdout.checks {
                check(&ran.stdout);
            }
            for check in stderr.checks {
                check(&ran.stderr);
            }
        }));
        if let Err(panic) = checked {
            eprintln!(
                "---- {label}\nexit: {:?} (signal {signal:?}) after {elapsed:?}\n{}\
                 ---- stdout\n{}\n---- stderr\n{}\n----",
                ran.code,
                waived.concat(),
                ran.stdout,
                ran.stderr
            );
            resume_unwind(panic);
        }
        ran
    }
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
