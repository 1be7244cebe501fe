//! `make stress` (not part of `make test`): 64 concurrent `dream-lock acquire` processes per
//! round, 200 rounds. Each round must have exactly one winner, the lock (file, or etcd's
//! holder key) must name it, and every loser must name it as the holder. Prints the counts;
//! exits 1 on any double hold.
//!
//! `DREAMKIT_STRESS_BACKEND=etcd` runs the same over a 3-node etcd cluster on loopback ports
//! (the `etcd` binary must be installed), killing the leader every 50 rounds and restarting
//! it 25 rounds later.

// Tests and benchmarks drive processes through libc (signals, FIFOs, rlimits) and name
// helpers `pub` for their sibling modules.
#![allow(unsafe_code, unreachable_pub)]

use std::process::{Command, Stdio};
use std::time::Instant;

#[allow(dead_code)]
#[path = "../tests/cli/support/etcd.rs"]
mod etcd;

const LOCK: &str = env!("CARGO_BIN_EXE_dream-lock");

fn main() {
    let acquirers: usize = env_or("DREAMKIT_STRESS_ACQUIRERS", 64);
    let rounds: usize = env_or("DREAMKIT_STRESS_ROUNDS", 200);
    let mut cluster = match std::env::var("DREAMKIT_STRESS_BACKEND").as_deref() {
        Ok("etcd") => Some(
            etcd::Etcd::cluster(3)
                .expect("the etcd stress run needs etcd (apt-get install etcd-server)"),
        ),
        Ok("file") | Err(_) => None,
        Ok(other) => {
            eprintln!("DREAMKIT_STRESS_BACKEND={other:?}: expected file or etcd");
            std::process::exit(2);
        }
    };
    let url = cluster.as_ref().map(|c| c.url("/stress"));
    let mut killed = None;
    let mut leaders_killed = 0;
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
    for round in 0..rounds {
        if let Some(cluster) = cluster.as_mut() {
            if round % 50 == 25 {
                if let Some(i) = killed.take() {
                    cluster.start(i);
                }
            } else if round % 50 == 0 && round > 0 {
                killed = cluster.leader();
                if let Some(i) = killed {
                    cluster.kill(i);
                    leaders_killed += 1;
                }
            }
        }
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
                    .env("DREAMKIT_LOCK_URL", url.as_deref().unwrap_or("file"))
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
            let recorded = match &cluster {
                Some(cluster) => cluster
                    .get("/stress/holder")
                    .and_then(|v| serde_json::from_str::<serde_json::Value>(&v).ok())
                    .and_then(|v| v["pid"].as_u64()),
                None => std::fs::read_to_string(&lock_file)
                    .unwrap_or_default()
                    .parse::<u64>()
                    .ok(),
            };
            // A loser that could not reach etcd (an election) names nobody; it is counted
            // below, not as a mismatch.
            let unreached = |n: &serde_json::Value| cluster.is_some() && n.is_null();
            if recorded != pid.as_u64() || named.iter().any(|n| !unreached(n) && n != pid) {
                mismatches += 1;
            }
            for w in &winners {
                // Retried while etcd elects a leader (exit 4); 1 = released already.
                for _ in 0..10 {
                    let status = Command::new(LOCK)
                        .args(["release", "--outcome", "failed", "--memory-dir"])
                        .arg(&memory)
                        .arg("--cwd")
                        .arg(&project)
                        .env("HOME", &root)
                        .env("CLAUDE_CONFIG_DIR", root.join("config"))
                        .env("DREAMKIT_LOCK_URL", url.as_deref().unwrap_or("file"))
                        .stdin(Stdio::piped())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
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
                    if matches!(status.code(), Some(0 | 1)) {
                        break;
                    }
                }
            }
        }
    }
    for shell in &mut shells {
        let _ = shell.kill();
        let _ = shell.wait();
    }
    let backend = if cluster.is_some() {
        format!("etcd, 3 nodes, {leaders_killed} leaders killed")
    } else {
        "file".to_string()
    };
    // Before any exit: the etcd processes are stopped when the cluster is dropped.
    drop(cluster);
    println!(
        "dream-lock stress ({backend}): {acquirers} acquirers x {rounds} rounds in {:.1} s: \
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
