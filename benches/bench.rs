//! `make bench`: dreamkit against the plain Unix tools that do the same part of the job, in
//! one run, as ratios of medians over repeated, interleaved runs. Tests never assert timings;
//! this prints them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

const GATE: &str = env!("CARGO_BIN_EXE_dream-gate");

struct Fixture {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    config: PathBuf,
    project: PathBuf,
    transcripts: PathBuf,
    lock: PathBuf,
}

fn fixture(sessions: u32, lock_age: Duration) -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(tmp.path()).expect("canonical");
    let home = root.join("home");
    let config = home.join(".claude");
    let project = root.join("proj");
    let slug = dreamkit::claude::paths::slug(&project);
    let transcripts = config.join("projects").join(&slug);
    let memory = transcripts.join("memory");
    std::fs::create_dir_all(&memory).expect("dirs");
    std::fs::create_dir_all(&project).expect("dirs");
    let lock = memory.join(".consolidate-lock");
    std::fs::write(&lock, "").expect("lock");
    set_mtime(&lock, SystemTime::now() - lock_age);
    let line = b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";
    for n in 0..sessions {
        let path = transcripts.join(format!("00000000-0000-4000-8000-{n:012x}.jsonl"));
        std::fs::write(&path, line).expect("session");
    }
    Fixture {
        _tmp: tmp,
        home,
        config,
        project,
        transcripts,
        lock,
    }
}

fn set_mtime(path: &Path, at: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(at))
        .expect("mtime");
}

fn gate_cmd(f: &Fixture, extra: &[&str]) -> Command {
    let mut cmd = Command::new(GATE);
    cmd.arg("--cwd")
        .arg(&f.project)
        .args(extra)
        .env_clear()
        .env("HOME", &f.home)
        .env("CLAUDE_CONFIG_DIR", &f.config)
        .env("XDG_STATE_HOME", f.home.join("state"));
    cmd
}

/// Runs each command `runs` times, interleaved, and returns the medians.
fn medians(commands: &mut [(&str, Command)], runs: usize) -> Vec<Duration> {
    let mut samples = vec![Vec::with_capacity(runs); commands.len()];
    for _ in 0..runs {
        for (i, (name, cmd)) in commands.iter_mut().enumerate() {
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let start = Instant::now();
            let status = cmd.status().expect("spawn");
            samples[i].push(start.elapsed());
            assert!(status.code().is_some(), "{name} died of a signal");
        }
    }
    samples
        .into_iter()
        .map(|mut s| {
            s.sort();
            s[s.len() / 2]
        })
        .collect()
}

fn report(what: &str, ours: Duration, theirs: Duration, baseline: &str, target: Option<f64>) {
    let ratio = ours.as_secs_f64() / theirs.as_secs_f64();
    let verdict = match target {
        Some(t) if ratio <= t => format!(" (target <= {t}x, met)"),
        Some(t) => format!(" (target <= {t}x, MISSED)"),
        None => String::new(),
    };
    println!(
        "{what}: {:.3} ms vs {baseline}: {:.3} ms -> {ratio:.2}x{verdict}",
        ours.as_secs_f64() * 1e3,
        theirs.as_secs_f64() * 1e3,
    );
}

fn exit_code(mut cmd: Command) -> i32 {
    cmd.stdout(Stdio::null())
        .status()
        .expect("spawn")
        .code()
        .unwrap_or(-1)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to filter here.
    println!("dreamkit benchmarks (medians of interleaved runs)");

    // 1. The "not due" path a Stop hook takes after every turn: process start, settings, one
    //    stat of the lock file.
    let f = fixture(0, Duration::from_secs(3600));
    assert_eq!(
        exit_code(gate_cmd(&f, &[])),
        1,
        "fixture is not on the too_soon path"
    );
    let mut stat = Command::new("stat");
    stat.args(["-c", "%Y"]).arg(&f.lock);
    let m = medians(
        &mut [("dream-gate", gate_cmd(&f, &[])), ("stat", stat)],
        300,
    );
    report(
        "dream-gate not due (too_soon)",
        m[0],
        m[1],
        "`stat -c %Y <lock>`",
        Some(1.5),
    );

    // 2. A scan of 10,000 session files newer than the last consolidation.
    let f = fixture(10_000, Duration::from_secs(48 * 3600));
    let scan_args = ["--scan-interval", "0"];
    assert_eq!(exit_code(gate_cmd(&f, &scan_args)), 0, "fixture is not due");
    let pipeline = format!(
        "find '{}' -maxdepth 1 -name '*.jsonl' -newer '{}' | wc -l",
        f.transcripts.display(),
        f.lock.display()
    );
    let mut find = Command::new("sh");
    find.args(["-c", &pipeline]);
    let mut bare = Command::new("find");
    bare.arg(&f.transcripts)
        .args(["-maxdepth", "1", "-name", "*.jsonl", "-newer"])
        .arg(&f.lock);
    let m = medians(
        &mut [
            ("dream-gate", gate_cmd(&f, &scan_args)),
            ("find | wc", find),
            ("find", bare),
        ],
        40,
    );
    report(
        "dream-gate scan of 10,000 sessions",
        m[0],
        m[1],
        "`find -newer | wc -l`",
        Some(1.0),
    );
    report(
        "  (for reference) the same",
        m[0],
        m[2],
        "`find -newer` alone",
        None,
    );
}
