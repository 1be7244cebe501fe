//! Shared fixtures: a temporary Claude Code home with transcripts whose mtimes we set, and
//! helpers to run the binaries against it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub(crate) mod claude_code;
pub(crate) mod client_memory;
pub(crate) mod dream;
pub(crate) mod etcd;
pub(crate) mod fake_api;
pub(crate) mod run;
pub(crate) mod schema;
pub(crate) mod transcript;
pub(crate) mod wait;

pub(crate) use run::Run;

/// A deterministic session id for index `n`.
pub(crate) fn session_id(n: u32) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// A temporary `HOME` holding `~/.claude`, an XDG state home and a project directory.
pub(crate) struct ClaudeHome {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub config: PathBuf,
    pub state_home: PathBuf,
    pub project: PathBuf,
}

impl ClaudeHome {
    pub(crate) fn new() -> Self {
        Self::with_project("proj")
    }

    /// `project` is a path relative to the temporary root (it may be long or odd).
    pub(crate) fn with_project(project: &str) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(tmp.path()).expect("canonical tempdir");
        let home = root.join("home");
        let config = home.join(".claude");
        let state_home = root.join("state");
        let project = root.join(project);
        for dir in [&config, &project] {
            std::fs::create_dir_all(dir).expect("create dirs");
        }
        ClaudeHome {
            _tmp: tmp,
            root,
            home,
            config,
            state_home,
            project,
        }
    }

    pub(crate) fn slug(&self) -> String {
        slug_of(&self.project)
    }

    pub(crate) fn transcripts_dir(&self) -> PathBuf {
        self.config.join("projects").join(self.slug())
    }

    pub(crate) fn memory_dir(&self) -> PathBuf {
        self.transcripts_dir().join("memory")
    }

    pub(crate) fn state_dir(&self) -> PathBuf {
        self.state_home.join("dreamkit/projects").join(self.slug())
    }

    pub(crate) fn lock_file(&self) -> PathBuf {
        self.memory_dir().join(".consolidate-lock")
    }

    /// A transcript last modified `age` ago.
    pub(crate) fn add_session(&self, id: &str, age: Duration) -> PathBuf {
        let dir = self.transcripts_dir();
        std::fs::create_dir_all(&dir).expect("transcripts dir");
        let path = dir.join(format!("{id}.jsonl"));
        std::fs::write(
            &path,
            format!("{{\"type\":\"user\",\"sessionId\":\"{id}\",\"message\":{{\"role\":\"user\",\"content\":\"hi\"}}}}\n"),
        )
        .expect("write transcript");
        set_age(&path, age);
        path
    }

    /// The lock file as Claude Code leaves it after a consolidation `age` ago.
    pub(crate) fn consolidated(&self, age: Duration) {
        std::fs::create_dir_all(self.memory_dir()).expect("memory dir");
        std::fs::write(self.lock_file(), "").expect("lock file");
        set_age(&self.lock_file(), age);
    }

    pub(crate) fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.root.join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        std::fs::write(&path, text).expect("write");
        path
    }

    /// `program` as a plain process (for `pre_exec`, signals, pipes of our own) with the same
    /// clean environment (`PATH` only, `HOME`, `CLAUDE_CONFIG_DIR` and `XDG_STATE_HOME` here),
    /// run from the project. [`Run::command`] turns it into a checked run.
    pub(crate) fn process(&self, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        let mut cmd = std::process::Command::new(program);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("CLAUDE_CONFIG_DIR", &self.config)
            .env("XDG_STATE_HOME", &self.state_home)
            .current_dir(&self.project);
        cmd
    }

    /// [`ClaudeHome::process`] of `bin`, as the unprivileged user `nobody` when the tests run
    /// as root.
    pub(crate) fn process_unprivileged(&self, bin: &str) -> std::process::Command {
        if unsafe { libc::geteuid() } != 0 {
            return self.process(bin_path(bin));
        }
        let copy = unprivileged_copy(bin);
        chmod(&self.root, 0o755);
        for dir in self.root.ancestors().skip(1) {
            assert!(
                std::fs::metadata(dir)
                    .map(|m| mode(&m) & 0o001 != 0)
                    .unwrap_or(false),
                "{} is not searchable by others",
                dir.display()
            );
        }
        let mut cmd = self.process(&copy);
        std::os::unix::process::CommandExt::uid(&mut cmd, 65534);
        std::os::unix::process::CommandExt::gid(&mut cmd, 65534);
        cmd
    }
}

/// A copy of the binary that `nobody` can run wherever the build directory lives: made once
/// per test process, in a world-readable directory, and run once before it is handed out. A
/// thread that forked while the copy was open for writing holds that descriptor until its
/// exec, and running the copy meanwhile fails with ETXTBSY; the probe waits that out.
fn unprivileged_copy(bin: &str) -> PathBuf {
    static COPIES: std::sync::Mutex<Option<(tempfile::TempDir, Vec<String>)>> =
        std::sync::Mutex::new(None);
    let mut guard = COPIES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (dir, made) = guard.get_or_insert_with(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        chmod(dir.path(), 0o755);
        (dir, Vec::new())
    });
    let copy = dir.path().join(bin);
    if !made.iter().any(|b| b == bin) {
        std::fs::copy(bin_path(bin), &copy).expect("copy binary");
        chmod(&copy, 0o755);
        wait::until(
            "the copy to stop being busy (ETXTBSY)",
            || match std::process::Command::new(&copy)
                .arg("--version")
                .stdout(std::process::Stdio::null())
                .status()
            {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => None,
                _ => Some(()),
            },
        );
        made.push(bin.to_string());
    }
    copy
}

/// Every released binary, as `make install` installs them.
pub(crate) const BINARIES: &[&str] = &[
    "dream-gate",
    "dream-lock",
    "dream-run",
    "recap",
    "turn-status",
    "suggest",
    "feedback",
];

/// What a tool prints on stderr for a usage error (clap's), one line: `line` is clap's
/// message without its `error: ` label, finished by the indented lines right below it.
pub(crate) fn usage_stderr(tool: &str, line: &str) -> String {
    format!("{tool}: {line} (try --help)\n")
}

/// Where cargo built `bin` (one of [`BINARIES`]).
pub(crate) fn bin_path(bin: &str) -> PathBuf {
    assert!(BINARIES.contains(&bin), "unknown binary {bin}");
    assert_cmd::cargo::cargo_bin(bin)
}

/// A live process standing in for a hook's shell: killed and reaped when dropped.
pub(crate) struct LiveProcess(pub std::process::Child);

impl LiveProcess {
    /// Returns once the process runs `sleep` (the fork has exec'd). Its 600 s are not a
    /// wait: they are how long a holder stays alive.
    pub(crate) fn start() -> Self {
        let process = LiveProcess(
            std::process::Command::new("sleep")
                .arg("600")
                .spawn()
                .expect("spawn sleep"),
        );
        wait::for_exec(process.pid() as i32, "sleep");
        process
    }

    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }

    /// SIGKILL, then reap, so the PID is gone.
    pub(crate) fn kill(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for LiveProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn mtime(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .expect("stat")
        .modified()
        .expect("mtime")
}

pub(crate) fn epoch_ms(at: SystemTime) -> i64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .expect("after epoch")
        .as_millis() as i64
}

pub(crate) fn set_age(path: &Path, age: Duration) {
    let at = SystemTime::now() - age;
    File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(at))
        .expect("set mtime");
}

pub(crate) fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

pub(crate) fn mode(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::MetadataExt;
    meta.mode() & 0o7777
}

pub(crate) const HOURS: u64 = 3600;

pub(crate) fn hours(h: u64) -> Duration {
    Duration::from_secs(h * HOURS)
}

/// Claude Code's slug, written out independently of the library: non-alphanumeric UTF-16
/// units become `-`; past 200, a `-` and the base-36 Java hash of the path.
pub(crate) fn slug_of(path: &Path) -> String {
    let text = path.to_str().expect("utf-8 path");
    let units: Vec<u16> = text.encode_utf16().collect();
    let mut slug: String = units
        .iter()
        .map(|u| match char::from_u32(u32::from(*u)) {
            Some(c) if c.is_ascii_alphanumeric() => c,
            _ => '-',
        })
        .collect();
    if slug.len() > 200 {
        let mut h: i32 = 0;
        for u in &units {
            h = h.wrapping_mul(31).wrapping_add(i32::from(*u));
        }
        let mut n = i64::from(h).unsigned_abs();
        let mut digits = Vec::new();
        loop {
            digits.push(std::char::from_digit((n % 36) as u32, 36).expect("digit"));
            n /= 36;
            if n == 0 {
                break;
            }
        }
        slug.truncate(200);
        slug.push('-');
        slug.extend(digits.iter().rev());
    }
    slug
}

/// Every file and symlink under `root` (its path relative to `root`) with its content (a link:
/// its target), for "nothing else changed" checks. Symlinks are not followed.
pub(crate) fn tree(root: &Path) -> std::collections::BTreeSet<(String, Vec<u8>)> {
    let mut found = std::collections::BTreeSet::new();
    for entry in walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .flatten()
    {
        let path = entry.path();
        let kind = entry.file_type();
        // Relative to `root`: two homes holding the same files compare equal.
        let name = path
            .strip_prefix(root)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned();
        if kind.is_symlink() {
            let target = std::fs::read_link(path).unwrap_or_default();
            found.insert((name, target.to_string_lossy().as_bytes().to_vec()));
        } else if kind.is_file() {
            found.insert((name, std::fs::read(path).unwrap_or_default()));
        }
    }
    found
}

/// Whether strace can trace here (it is installed and ptrace is allowed).
pub(crate) fn strace_traces() -> bool {
    std::process::Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// A FIFO at `path` (its folder made, anything there before removed).
pub(crate) fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// The SHA-256 of `bytes`, in lower-case hex (as task records keep it).
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Says on the real stderr (not the harness's captured one, so `make test` shows it) that a
/// test could not run here and why. A skipped test never passes silently.
pub(crate) fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIP {test}: {why}");
}

/// A copy of the tree `from` at `to` (folders made, files copied).
pub(crate) fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let target = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The seed of the random kill moments: `DREAMKIT_TEST_SEED` repeats a run; printed either way.
pub(crate) fn kill_seed(test: &str) -> fastrand::Rng {
    let seed = std::env::var("DREAMKIT_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("{test}: seed {seed} (DREAMKIT_TEST_SEED={seed} repeats these kill moments)");
    fastrand::Rng::with_seed(seed)
}

/// `run`, started and killed with SIGKILL after a random moment of up to `max_ms` (it may
/// have finished by then: either is fine); the next command that changes state then runs.
pub(crate) fn kill_at_random(run: Run<'_>, rng: &mut fastrand::Rng, max_ms: u64) -> run::Ran {
    let running = run
        .stdin_from(std::process::Stdio::null())
        .timeout(dream::LONG_RUN)
        .code_any("killed at a random moment: it may have finished first")
        .stdout_any("killed at a random moment")
        .stderr_any("killed at a random moment")
        .spawn();
    // The random moment itself is what this test is about, not a synchronisation.
    std::thread::sleep(std::time::Duration::from_millis(rng.u64(0..=max_ms)));
    running.signal(libc::SIGKILL);
    running.finish()
}
