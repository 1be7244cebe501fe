//! `make stress` (not part of `make test`): 64 concurrent `dream-lock acquire` processes per
//! round, 200 rounds. Each round must have exactly one winner, the lock file must name it,
//! and every loser must name it as the holder. Prints the counts; exits 1 on any double hold.

use std::process::{Command, Stdio};
use std::time::Instant;

const LOCK: &str = env!("CARGO_BIN_EXE_dream-lock");

fn main() {
    let acquirers: usize = env_or("DREAMKIT_STRESS_ACQUIRERS", 64);
    let rounds: usize = env_or("DREAMKIT_STRESS_ROUNDS", 200);
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(tmp.path()).expect("canonical");
    let project = root.join("proj");
    std::fs::create_dir_all(&project).expect("project");
    let memory = root.join("memory");
    let lock_file = memory.join(".consolidate-lock");
    // Live holders standing in for 64 hook shells.
    let mut shells: Vec<_> = (0..acquirers)
        .map(|_| Command::new("sleep").arg("3600").spawn().expect("sleep"))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(100));

    let started = Instant::now();
    let (mut double_holds, mut no_winner, mut mismatches) = (0, 0, 0);
    for _ in 0..rounds {
        let children: Vec<_> = shells
            .iter()
            .map(|shell| {
                Command::new(LOCK)
                    .args(["acquire", "--pid", &shell.id().to_string(), "--memory-dir"])
                    .arg(&memory)
                    .arg("--cwd")
                    .arg(&project)
                    .env("HOME", &root)
                    .env("CLAUDE_CONFIG_DIR", root.join("config"))
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("spawn acquire")
            })
            .collect();
        let mut winners = Vec::new();
        let mut named = Vec::new();
        for child in children {
            let out = child.wait_with_output().expect("wait");
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            match out.status.code() {
                Some(0) => winners.push(doc),
                _ => named.push(doc["lock"]["holder_pid"].clone()),
            }
        }
        match winners.len() {
            0 => no_winner += 1,
            1 => {}
            _ => double_holds += 1,
        }
        if let Some(winner) = winners.first() {
            let pid = &winner["lock"]["pid"];
            let content = std::fs::read_to_string(&lock_file).unwrap_or_default();
            if content.parse::<u64>().ok() != pid.as_u64() || named.iter().any(|n| n != pid) {
                mismatches += 1;
            }
            for w in &winners {
                let status = Command::new(LOCK)
                    .args(["release", "--outcome", "failed", "--memory-dir"])
                    .arg(&memory)
                    .arg("--cwd")
                    .arg(&project)
                    .env("HOME", &root)
                    .env("CLAUDE_CONFIG_DIR", root.join("config"))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .spawn()
                    .and_then(|mut c| {
                        use std::io::Write;
                        c.stdin
                            .take()
                            .expect("stdin")
                            .write_all(w.to_string().as_bytes())?;
                        c.wait()
                    })
                    .expect("release");
                assert!(status.code().is_some());
            }
        }
    }
    for shell in &mut shells {
        let _ = shell.kill();
        let _ = shell.wait();
    }
    println!(
        "dream-lock stress: {acquirers} acquirers x {rounds} rounds in {:.1} s: \
         double holds {double_holds}, rounds without a winner {no_winner}, \
         holder mismatches {mismatches}",
        started.elapsed().as_secs_f64()
    );
    if double_holds + no_winner + mismatches > 0 {
        std::process::exit(1);
    }
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
