//! The `shell` tool: our own tokenizer, a per-program option allow-list, path checks on every
//! path argument, and a pipeline spawned without a shell.
//!
//! Decisions:
//! - Quoting follows POSIX `sh` for `'...'`, `"..."` and `\`; nothing is ever expanded. `$`
//!   (outside single quotes), backticks, `;`, `&`, `<`, `>`, unquoted `( ) { }`, a leading `#`
//!   or `~`, `||`, empty stages, newlines, NUL and other control characters, invisible
//!   formatting characters and look-alikes of the operators are refused.
//! - Globs are not expanded: an unquoted `*`, `?` or `[` in a path argument is refused (with a
//!   hint to use `find -name`); in a pattern or option value (`grep 'a*'`, `find -name *.md`)
//!   it is passed literally, as the program expects.
//! - Programs are named bare (`ls`, not `/bin/ls`; a path is refused) and run from
//!   `/usr/bin` or `/bin`, with the environment cleared except `PATH=/usr/bin:/bin` and
//!   `LANG=C`, cwd = the memory dir, stdin of the first stage = /dev/null.
//! - Options are an allow-list per program; anything else (including GNU's abbreviations of
//!   long options) is refused rather than guessed. A long option's value must be attached
//!   (`--file=F`, so no version's optional-argument parsing can turn it into an operand we did
//!   not check); short ones take it attached or as the next word, as getopt does. Options that follow symlinks out of the
//!   roots (`grep -R`, `ls -L`, `stat -L`, `find -L -H -follow`), never end (`tail -f`), run
//!   programs or write files (`find -exec -execdir -ok -okdir -delete -fprint* -fls`) or read
//!   a list of file names (`--files0-from`, `find -files0-from`) are refused with a reason.
//! - Every path operand and path-valued option (`grep -f`, `--file=`, `--exclude-from=`,
//!   `find -newer -anewer -cnewer -samefile -newerXY`) must exist and resolve (symlinks
//!   followed) inside a readable root. `-` (stdin) is allowed where it means stdin.

mod options;
#[cfg(test)]
mod props;
mod tokenize;

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{secrets, Sandbox, ToolResult};
use options::{check_find, check_getopt, CAT, GREP, HEAD, LS, STAT, TAIL, WC};
use tokenize::tokenize;

/// The only programs `shell` runs.
pub(super) const ALLOWED: &[&str] = &["ls", "find", "grep", "cat", "stat", "wc", "head", "tail"];
/// Where they are looked up (trusted system directories only, never the caller's PATH).
const PROGRAM_DIRS: &[&str] = &["/usr/bin", "/bin"];
const MAX_COMMAND_BYTES: usize = 8192;
const MAX_WORD_BYTES: usize = 4096;
const MAX_STAGES: usize = 8;
const MAX_WORDS: usize = 256;
/// Share of the output cap left to stderr.
const STDERR_CAP: usize = 8 * 1024;

/// Absolute paths of the allowed programs present on this system.
#[derive(Debug, Clone)]
pub(super) struct Programs(BTreeMap<&'static str, PathBuf>);

impl Programs {
    pub(super) fn locate() -> Programs {
        let mut found = BTreeMap::new();
        for name in ALLOWED {
            for dir in PROGRAM_DIRS {
                let candidate = Path::new(dir).join(name);
                if std::fs::metadata(&candidate).is_ok_and(|m| m.is_file()) {
                    found.insert(*name, candidate);
                    break;
                }
            }
        }
        Programs(found)
    }

    pub(super) fn path(&self, name: &str) -> Option<&Path> {
        self.0.get(name).map(PathBuf::as_path)
    }
}

fn allowed_list() -> String {
    ALLOWED.join(" ")
}

/// One checked program invocation.
#[derive(Debug)]
struct Stage {
    /// The bare name (argv[0], so messages read `grep: ...`).
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    is_grep: bool,
}

/// Tokenizes and checks a whole command line.
fn plan(sandbox: &Sandbox, command: &str) -> Result<Vec<Stage>, String> {
    let mut stages = tokenize(command)?;
    // Proposing: the real memory dir's paths name the staging copy's files.
    for word in stages.iter_mut().flatten() {
        let text = match word.text.split_once('=') {
            Some((option, value)) if option.starts_with("--") => {
                format!("{option}={}", sandbox.unalias(value))
            }
            _ => sandbox.unalias(&word.text).into_owned(),
        };
        word.text = text;
    }
    let mut planned = Vec::new();
    for words in stages {
        let Some((head, args)) = words.split_first() else {
            return Err("empty pipeline stage".into());
        };
        let name = head.text.as_str();
        let assigns = name.split_once('=').is_some_and(|(var, _)| {
            !var.is_empty()
                && !var.starts_with(|c: char| c.is_ascii_digit())
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if assigns {
            return Err(format!(
                "environment assignments (`{name}`) are not supported; run the program directly"
            ));
        }
        if name.contains('/') {
            let base = name.rsplit('/').next().unwrap_or(name);
            return Err(if ALLOWED.contains(&base) {
                format!("name the program bare (`{base}`), not by path (`{name}`)")
            } else {
                format!(
                    "`{name}` is not allowed; the shell tool runs only: {}",
                    allowed_list()
                )
            });
        }
        let Some(name) = ALLOWED.iter().copied().find(|allowed| *allowed == name) else {
            return Err(format!(
                "`{name}` is not allowed; the shell tool runs only: {} (joined with |)",
                allowed_list()
            ));
        };
        let options_end = match name {
            "find" => {
                check_find(sandbox, args)?;
                args.len()
            }
            "ls" => check_getopt(sandbox, &LS, args)?,
            "grep" => check_getopt(sandbox, &GREP, args)?,
            "cat" => check_getopt(sandbox, &CAT, args)?,
            "stat" => check_getopt(sandbox, &STAT, args)?,
            "wc" => check_getopt(sandbox, &WC, args)?,
            "head" => check_getopt(sandbox, &HEAD, args)?,
            "tail" => check_getopt(sandbox, &TAIL, args)?,
            _ => return Err(format!("`{name}` is not allowed")),
        };
        let Some(program) = sandbox.programs.path(name) else {
            return Err(format!("`{name}` is not installed on this system"));
        };
        let mut args: Vec<String> = args.iter().map(|w| w.text.clone()).collect();
        if name == "grep" {
            // After the model's options (the last of contradicting --include/--exclude wins),
            // before the `--` that ends them (after it they would be file names).
            let at = options_end;
            let excludes = secrets::GREP_EXCLUDES.iter().map(ToString::to_string);
            args.splice(at..at, excludes);
        }
        planned.push(Stage {
            name,
            program: program.to_path_buf(),
            args,
            is_grep: name == "grep",
        });
    }
    Ok(planned)
}

/// Reads up to `cap` bytes; past it, either stops (closing the pipe, so the writer gets
/// SIGPIPE) and raises `over`, or drains and discards (`drain`).
fn read_capped(mut source: impl Read, cap: usize, over: Arc<AtomicBool>, drain: bool) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match source.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                if n > room {
                    over.store(true, Ordering::SeqCst);
                    if !drain {
                        break;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    kept
}

/// Kills the pipeline's process group while at least one member is still unreaped (so the
/// group id cannot have been reused).
fn kill_group(pgid: i32, children: &[(Child, Option<std::process::ExitStatus>)]) {
    if children.iter().any(|(_, status)| status.is_none()) {
        if let Some(group) = rustix::process::Pid::from_raw(pgid) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

pub(super) fn run(sandbox: &Sandbox, command: &str) -> ToolResult {
    let stages = match plan(sandbox, command) {
        Ok(s) => s,
        Err(e) => return ToolResult::error(format!("shell: refused: {e}")),
    };
    match spawn_and_wait(sandbox, &stages) {
        Ok(result) => result,
        Err(e) => ToolResult::error(format!("shell: could not run the command: {e}")),
    }
}

fn spawn_and_wait(sandbox: &Sandbox, stages: &[Stage]) -> std::io::Result<ToolResult> {
    let limits = &sandbox.limits;
    // Close-on-exec both ends: only the stages get the writing end, as their stderr.
    let (err_read, err_write) = std::io::pipe()?;
    let mut children: Vec<(Child, Option<std::process::ExitStatus>)> = Vec::new();
    let mut previous: Option<std::process::ChildStdout> = None;
    let mut pgid: i32 = 0;
    let mut last_stdout = None;
    for (position, stage) in stages.iter().enumerate() {
        let mut command = Command::new(&stage.program);
        command
            .arg0(stage.name)
            .args(&stage.args)
            .current_dir(&sandbox.memory_dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LANG", "C")
            .stdin(match previous.take() {
                Some(out) => Stdio::from(out),
                None => Stdio::null(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err_write.try_clone()?))
            .process_group(pgid);
        // Killed with us, even by SIGKILL: a command stuck on a file never outlives the run.
        crate::cli::signals::die_with_parent(&mut command);
        if let Some(confinement) = &sandbox.confinement {
            confinement.apply(&mut command);
        }
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                kill_group(pgid, &children);
                for (child, _) in &mut children {
                    let _ = child.wait();
                }
                return Err(e);
            }
        };
        if position == 0 {
            pgid = i32::try_from(child.id()).unwrap_or(0);
        }
        let out = child.stdout.take();
        if position + 1 == stages.len() {
            last_stdout = out;
        } else {
            previous = out;
        }
        children.push((child, None));
    }
    drop(err_write);

    let stdout_over = Arc::new(AtomicBool::new(false));
    let stderr_over = Arc::new(AtomicBool::new(false));
    let stdout_reader = last_stdout.map(|out| {
        let (over, cap) = (Arc::clone(&stdout_over), limits.output_cap);
        std::thread::spawn(move || read_capped(out, cap, over, false))
    });
    let stderr_reader = {
        let over = Arc::clone(&stderr_over);
        std::thread::spawn(move || read_capped(err_read, STDERR_CAP, over, true))
    };

    let deadline = Instant::now() + limits.shell_timeout;
    let mut timed_out = false;
    let mut interrupted = false;
    loop {
        let mut failed = None;
        for (child, status) in &mut children {
            if status.is_none() {
                match child.try_wait() {
                    Ok(now) => *status = now,
                    Err(e) => failed = Some(e),
                }
            }
        }
        if let Some(e) = failed {
            // Never leave a pipeline running behind an error.
            kill_group(pgid, &children);
            for (child, _) in &mut children {
                let _ = child.wait();
            }
            return Err(e);
        }
        if children.iter().all(|(_, s)| s.is_some()) {
            break;
        }
        if stdout_over.load(Ordering::SeqCst) {
            kill_group(pgid, &children);
            break;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            kill_group(pgid, &children);
            break;
        }
        // The run was asked to stop (SIGINT/SIGTERM): it must not wait out the timeout.
        if crate::cli::signals::received().is_some() {
            interrupted = true;
            kill_group(pgid, &children);
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for (child, status) in &mut children {
        if status.is_none() {
            *status = Some(child.wait()?);
        }
    }
    let stdout = stdout_reader
        .and_then(|h| h.join().ok())
        .unwrap_or_default();
    let stderr = stderr_reader.join().unwrap_or_default();
    let truncated = stdout_over.load(Ordering::SeqCst);

    let mut content = String::from_utf8_lossy(&stdout).into_owned();
    if truncated {
        if !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&format!(
            "[output truncated at {} bytes; narrow the command, e.g. | head or a more specific path]\n",
            limits.output_cap
        ));
    }
    if !stderr.is_empty() {
        content.push_str("[stderr]\n");
        content.push_str(&String::from_utf8_lossy(&stderr));
        if !content.ends_with('\n') {
            content.push('\n');
        }
        if stderr_over.load(Ordering::SeqCst) {
            content.push_str("[stderr truncated]\n");
        }
    }
    let last_status = children.last().and_then(|(_, s)| *s);
    let last_is_grep = stages.last().is_some_and(|s| s.is_grep);
    let mut is_error = false;
    if interrupted {
        is_error = true;
        content.push_str("[interrupted: the run is stopping]\n");
    } else if timed_out {
        is_error = true;
        content.push_str(&format!(
            "[timed out after {} s; the command was killed. Narrow it (a path, -maxdepth, | head)]\n",
            limits.shell_timeout.as_secs_f32()
        ));
    } else if !truncated {
        if let Some(status) = last_status {
            if let Some(code) = status.code() {
                if code != 0 {
                    content.push_str(&format!("[exit status {code}]\n"));
                    is_error = !(last_is_grep && code == 1);
                }
            } else if let Some(signal) = status.signal() {
                content.push_str(&format!("[killed by signal {signal}]\n"));
                is_error = true;
            }
        }
    }
    if content.is_empty() {
        content.push_str("[no output]\n");
    }
    Ok(ToolResult {
        is_error,
        ..ToolResult::ok(content)
    })
}
