//! The etcd backend against real etcd processes on loopback ports: every lock path on one
//! node, lease expiry, keep-alive, an unreachable etcd, and a 3-node cluster whose leader is
//! killed while acquirers race.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::binaries::runtime_probe;
use crate::support::etcd::{free_ports, Etcd};
use crate::support::*;

/// dream-lock against `url`, with extra environment.
fn lock_env(
    home: &ClaudeHome,
    url: &str,
    env: &[(&str, &str)],
    args: &[&str],
    stdin: &str,
) -> (i32, Value) {
    let mut cmd = home.cmd("dream-lock");
    cmd.args(args)
        .env("DREAMKIT_LOCK_URL", url)
        .write_stdin(stdin);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run dream-lock");
    (out.status.code().expect("exit code"), stdout_json(&out))
}

fn lock(home: &ClaudeHome, url: &str, args: &[&str], stdin: &str) -> (i32, Value) {
    lock_env(home, url, &[], args, stdin)
}

fn acquire(home: &ClaudeHome, url: &str, pid: u32) -> (i32, Value) {
    lock(home, url, &["acquire", "--pid", &pid.to_string()], "")
}

/// Polls `dream-lock status` until `done` says so, for at most `limit`.
fn status_until(
    home: &ClaudeHome,
    url: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    let found = wait::within_every(limit, Duration::from_millis(100), || {
        last = lock(home, url, &["status"], "").1;
        done(&last)
    });
    assert!(found, "still not there after {limit:?}: {last}");
    last
}

#[test]
fn acquire_status_release_and_the_gate_on_one_node() {
    let Some(etcd) = Etcd::single() else {
        return;
    };
    let url = etcd.url("/team/repo");
    let home = ClaudeHome::new();
    let holder = LiveProcess::start();

    let (code, status) = lock(&home, &url, &["status"], "");
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["held"], false);
    assert_eq!(status["backend"], "etcd");
    assert_eq!(status["key"], "/team/repo/holder");
    assert_eq!(status["last_consolidated_at"], Value::Null);

    let before = epoch_ms(SystemTime::now());
    let (code, acquired) = acquire(&home, &url, holder.pid());
    assert_eq!(code, 0, "{acquired}");
    let l = &acquired["lock"];
    assert_eq!(l["acquired"], true);
    assert_eq!(l["backend"], "etcd");
    assert_eq!(l["key"], "/team/repo/holder");
    assert_eq!(l["pid"], holder.pid());
    assert_eq!(l["prior_mtime"], 0);
    let token = l["token"].as_str().expect("token").to_string();
    assert!(token.parse::<u64>().is_ok_and(|t| t > 0), "{token}");
    // The holder key names the PID; the last-consolidated key is now (as the file's mtime).
    let record: Value =
        serde_json::from_str(&etcd.get("/team/repo/holder").expect("holder")).unwrap();
    assert_eq!(record["pid"], holder.pid());
    let stamped: i64 = etcd
        .get("/team/repo/last-consolidated")
        .unwrap()
        .parse()
        .unwrap();
    assert!(stamped >= before - 1000, "{stamped} < {before}");
    // Nothing local: the file backend's lock file is not created.
    assert!(!home.lock_file().exists());

    let (code, status) = lock(&home, &url, &["status"], "");
    assert_eq!(code, 1, "{status}");
    assert_eq!(status["held"], true);
    assert_eq!(status["holder_pid"], holder.pid());
    assert_eq!(status["holder_alive"], true);
    assert_eq!(status["token"], token.as_str());

    let other = LiveProcess::start();
    let (code, busy) = acquire(&home, &url, other.pid());
    assert_eq!(code, 1, "{busy}");
    assert_eq!(busy["lock"]["reason"], "held");
    assert_eq!(busy["lock"]["holder_pid"], holder.pid());

    let (code, released) = lock(
        &home,
        &url,
        &["release", "--outcome", "completed"],
        &acquired.to_string(),
    );
    assert_eq!(code, 0, "{released}");
    assert_eq!(released["lock"]["released"], true);
    assert_eq!(etcd.get("/team/repo/holder"), None);
    let done_ms: i64 = etcd
        .get("/team/repo/last-consolidated")
        .unwrap()
        .parse()
        .unwrap();
    let (code, status) = lock(&home, &url, &["status"], "");
    assert_eq!(code, 0);
    assert_eq!(status["held"], false);
    assert_eq!(status["token"], Value::Null);
    assert_eq!(
        status["last_consolidated_at"],
        released["lock"]["last_consolidated_at"]
    );

    // The gate reads its time from etcd: consolidated moments ago, so too soon.
    let out = home
        .cmd("dream-gate")
        .args(["--backend", &url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let gate = stdout_json(&out);
    assert_eq!(gate["gate"]["reason"], "too_soon", "{gate}");
    assert_eq!(
        gate["gate"]["last_consolidated_at"],
        released["lock"]["last_consolidated_at"]
    );
    assert_eq!(
        parse_time(&gate["gate"]["last_consolidated_at"]),
        done_ms,
        "the time in etcd, to the millisecond"
    );

    // An envelope from the etcd lock is refused by a release on another backend or key,
    // rather than answered not_holder with the lease left held.
    let (code, lost) = acquire(&home, &url, holder.pid());
    assert_eq!(code, 0, "{lost}");
    let out = home
        .cmd("dream-lock")
        .args(["release", "--outcome", "failed"])
        .write_stdin(lost.to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let message = stdout_json(&out)["error"]["message"].to_string();
    assert!(message.contains("taken on the etcd backend"), "{message}");
    let (code, out) = lock(
        &home,
        &etcd.url("/team/other"),
        &["release", "--outcome", "failed"],
        &lost.to_string(),
    );
    assert_eq!(code, 2, "{out}");
    let (code, _) = lock(&home, &url, &["status"], "");
    assert_eq!(code, 1, "still held: nothing was changed");
    let (code, out) = lock(
        &home,
        &url,
        &["release", "--outcome", "completed"],
        &lost.to_string(),
    );
    assert_eq!(code, 0, "{out}");
    let done_ms: i64 = etcd
        .get("/team/repo/last-consolidated")
        .unwrap()
        .parse()
        .unwrap();

    // Releasing again changes nothing.
    let (code, again) = lock(
        &home,
        &url,
        &["release", "--outcome", "failed"],
        &acquired.to_string(),
    );
    assert_eq!(code, 1, "{again}");
    assert_eq!(again["lock"]["reason"], "not_holder");
    assert_eq!(
        etcd.get("/team/repo/last-consolidated").unwrap(),
        done_ms.to_string()
    );
}

fn parse_time(v: &Value) -> i64 {
    let text = v.as_str().expect("a time");
    let out = Command::new("date")
        .args(["-u", "-d", text, "+%s%3N"])
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("ms")
}

#[test]
fn failed_and_aborted_roll_back_the_last_consolidated_time() {
    let Some(etcd) = Etcd::single() else {
        return;
    };
    let url = etcd.url("");
    let home = ClaudeHome::new();
    let holder = LiveProcess::start();
    // Without a prefix the keys are per project.
    let key = format!("/dreamkit/{}/last-consolidated", home.slug());

    // Never consolidated: a failed run leaves no time at all.
    let (code, acquired) = acquire(&home, &url, holder.pid());
    assert_eq!(code, 0, "{acquired}");
    assert_eq!(
        acquired["lock"]["key"],
        format!("/dreamkit/{}/holder", home.slug())
    );
    assert!(etcd.get(&key).is_some());
    let (code, released) = lock(
        &home,
        &url,
        &["release", "--outcome", "failed"],
        &acquired.to_string(),
    );
    assert_eq!(code, 0, "{released}");
    assert_eq!(released["lock"]["last_consolidated_at"], Value::Null);
    assert_eq!(etcd.get(&key), None);

    // A completed run, then an aborted one: back to the completed run's time exactly.
    let (_, first) = acquire(&home, &url, holder.pid());
    let (code, _) = lock(
        &home,
        &url,
        &["release", "--outcome", "completed"],
        &first.to_string(),
    );
    assert_eq!(code, 0);
    let completed = etcd.get(&key).expect("a time");
    let (code, second) = acquire(&home, &url, holder.pid());
    assert_eq!(code, 0, "{second}");
    assert_eq!(second["lock"]["prior_mtime"].to_string(), completed);
    assert_ne!(etcd.get(&key).unwrap(), completed, "acquire stamps now");
    // The outcome from the envelope's run.status.
    let mut envelope = second.clone();
    envelope["run"] = serde_json::json!({"status": "aborted"});
    let (code, released) = lock(&home, &url, &["release"], &envelope.to_string());
    assert_eq!(code, 0, "{released}");
    assert_eq!(released["lock"]["outcome"], "aborted");
    assert_eq!(etcd.get(&key).unwrap(), completed);
}

#[test]
fn a_dead_holder_is_stale_and_replaced_and_its_token_is_refused() {
    let Some(etcd) = Etcd::single() else {
        return;
    };
    let url = etcd.url("/p");
    let home = ClaudeHome::new();
    let gone = LiveProcess::start();
    let (code, first) = acquire(&home, &url, gone.pid());
    assert_eq!(code, 0, "{first}");
    let gone_pid = gone.pid();
    gone.kill();

    let (code, status) = lock(&home, &url, &["status"], "");
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["held"], false);
    assert_eq!(status["stale"], true);
    assert_eq!(status["holder_pid"], gone_pid);
    assert_eq!(status["holder_alive"], false);

    let live = LiveProcess::start();
    let (code, second) = acquire(&home, &url, live.pid());
    assert_eq!(code, 0, "{second}");
    assert_ne!(second["lock"]["token"], first["lock"]["token"]);

    // The first holder's lease is fenced off: its release changes nothing.
    let (code, refused) = lock(
        &home,
        &url,
        &["release", "--outcome", "completed"],
        &first.to_string(),
    );
    assert_eq!(code, 1, "{refused}");
    assert_eq!(refused["lock"]["reason"], "not_holder");
    assert_eq!(refused["lock"]["holder_pid"], live.pid());
    let (_, status) = lock(&home, &url, &["status"], "");
    assert_eq!(status["token"], second["lock"]["token"]);

    // By hand, a live holder that is not ours takes --force; status | release frees it.
    let (code, status) = lock(&home, &url, &["status"], "");
    assert_eq!(code, 1);
    let (code, out) = lock(&home, &url, &["release"], &status.to_string());
    assert_eq!(code, 1, "{out}");
    assert_eq!(out["lock"]["reason"], "live_holder");
    let (code, out) = lock(&home, &url, &["release", "--force"], &status.to_string());
    assert_eq!(code, 0, "{out}");
    let (code, _) = lock(&home, &url, &["status"], "");
    assert_eq!(code, 0);
}

#[test]
fn a_holder_on_another_machine_is_taken_at_its_word_for_the_hour() {
    let Some(etcd) = Etcd::single() else {
        return;
    };
    let url = etcd.url("/shared");
    let home = ClaudeHome::new();
    let now = epoch_ms(SystemTime::now());
    // A PID that does not exist here: on another machine it may well be alive.
    let record = serde_json::json!({
        "pid": 4_000_000, "host": "ci-runner-7", "node": "another-boot/pid:[1]", "since_ms": now,
    });
    etcd.put("/shared/holder", &record.to_string());
    let (code, status) = lock(&home, &url, &["status"], "");
    assert_eq!(code, 1, "{status}");
    assert_eq!(status["held"], true);
    assert_eq!(status["holder_pid"], 4_000_000);
    assert_eq!(status["holder_alive"], Value::Null, "not probed here");
    let me = LiveProcess::start();
    let (code, busy) = acquire(&home, &url, me.pid());
    assert_eq!(code, 1, "{busy}");
    assert_eq!(busy["lock"]["holder_pid"], 4_000_000);

    // Written more than an hour ago: stale, and replaced.
    let record = serde_json::json!({
        "pid": 4_000_000, "host": "ci-runner-7", "node": "another-boot/pid:[1]",
        "since_ms": now - 3_601_000,
    });
    etcd.put("/shared/holder", &record.to_string());
    let (code, status) = lock(&home, &url, &["status"], "");
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["stale"], true);
    let (code, acquired) = acquire(&home, &url, me.pid());
    assert_eq!(code, 0, "{acquired}");
}

/// The reply to the winning transaction is lost and the request retried: the retry's
/// compare fails on our own write, and acquire must see that the holder is its own.
#[test]
fn an_acquire_whose_answer_was_lost_still_knows_it_won() {
    let Some(etcd) = Etcd::single() else {
        return;
    };
    let home = ClaudeHome::new();
    let me = LiveProcess::start();
    let direct = etcd.url("/lossy");
    // A consolidation on record, so the prior time the winner reports can be checked.
    let (_, first) = acquire(&home, &direct, me.pid());
    let (code, _) = lock(
        &home,
        &direct,
        &["release", "--outcome", "completed"],
        &first.to_string(),
    );
    assert_eq!(code, 0);
    let completed = etcd.get("/lossy/last-consolidated").unwrap();

    let proxy = crate::support::etcd::lossy_proxy(etcd.members[0].client_port);
    let url = format!("etcd://127.0.0.1:{proxy}/lossy");
    let (code, won) = acquire(&home, &url, me.pid());
    assert_eq!(code, 0, "{won}");
    assert_eq!(won["lock"]["prior_mtime"].to_string(), completed);
    let (code, status) = lock(&home, &direct, &["status"], "");
    assert_eq!(code, 1);
    assert_eq!(
        status["token"], won["lock"]["token"],
        "the token is the holder's"
    );
    let (code, released) = lock(
        &home,
        &direct,
        &["release", "--outcome", "failed"],
        &won.to_string(),
    );
    assert_eq!(code, 0, "{released}");
    assert_eq!(etcd.get("/lossy/last-consolidated").unwrap(), completed);
}

#[test]
fn an_expired_lease_loses_the_lock_and_exec_keeps_its_lease_alive() {
    let Some(etcd) = Etcd::single() else {
        return;
    };
    let url = etcd.url("/ttl");
    let home = ClaudeHome::new();
    let ttl = [("DREAMKIT_ETCD_LEASE_TTL", "2")];

    // A holder whose lease nobody renews loses the lock when it expires.
    let holder = LiveProcess::start();
    let (code, first) = lock_env(
        &home,
        &url,
        &ttl,
        &["acquire", "--pid", &holder.pid().to_string()],
        "",
    );
    assert_eq!(code, 0, "{first}");
    let status = status_until(&home, &url, Duration::from_secs(30), |s| s["held"] == false);
    assert_eq!(
        status["holder_pid"],
        Value::Null,
        "the key went with its lease"
    );
    let other = LiveProcess::start();
    let (code, second) = acquire(&home, &url, other.pid());
    assert_eq!(code, 0, "{second}");
    let (code, refused) = lock(
        &home,
        &url,
        &["release", "--outcome", "completed"],
        &first.to_string(),
    );
    assert_eq!(code, 1, "{refused}");
    assert_eq!(refused["lock"]["reason"], "not_holder");
    let (code, _) = lock(
        &home,
        &url,
        &["release", "--outcome", "failed"],
        &second.to_string(),
    );
    assert_eq!(code, 0);

    // exec renews the lease while its command runs, well past the TTL; the command sees
    // itself holding the lock, and the runtime the etcd backend needs.
    let script = format!(
        // Kept: `sleep 6` is the command outliving three lease TTLs, the thing tested.
        "{}; sleep 6; dream-lock status | grep -q \"\\\"token\\\":\\\"$DREAMKIT_LOCK_TOKEN\\\"\" && echo still-held",
        runtime_probe(3)
    );
    let bin_dir = bin_path("dream-lock").parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = home
        .cmd("dream-lock")
        .args(["exec", "--", "sh", "-c", &script])
        .env("DREAMKIT_LOCK_URL", &url)
        .env("DREAMKIT_ETCD_LEASE_TTL", "2")
        .env("PATH", path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"still-held"), "{text}");
    // The probe that sees no runtime on the file path sees one here (it is not blind).
    assert!(!lines.contains(&"threads=1"), "{text}");
    assert!(!lines.contains(&"anon=0"), "{text}");
    let (code, status) = lock(&home, &url, &["status"], "");
    assert_eq!(code, 0, "released after the command: {status}");
}

#[test]
fn an_unreachable_etcd_exits_4_and_changes_nothing() {
    let home = ClaudeHome::new();
    let dead = free_ports(2);
    let url = format!("etcd://127.0.0.1:{},127.0.0.1:{}/x", dead[0], dead[1]);
    let holder = LiveProcess::start();

    let (code, out) = acquire(&home, &url, holder.pid());
    assert_eq!(code, 4, "{out}");
    assert_eq!(out["lock"]["acquired"], false);
    assert_eq!(out["lock"]["error"]["kind"], "remote");
    let message = out["lock"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("etcd is unreachable"), "{message}");
    assert!(message.contains("nothing was changed"), "{message}");
    assert!(out["project"].is_object(), "the envelope still flows");

    let (code, out) = lock(&home, &url, &["status"], "");
    assert_eq!(code, 4, "{out}");
    assert_eq!(out["error"]["kind"], "remote");
    let (code, out) = lock(
        &home,
        &url,
        &["release", "--token", "7", "--outcome", "completed"],
        "",
    );
    assert_eq!(code, 4, "{out}");
    assert_eq!(out["lock"]["released"], false);
    let out = home
        .cmd("dream-gate")
        .args(["--backend", &url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(stdout_json(&out)["gate"]["error"]["kind"], "remote");
    let out = home
        .cmd("dream-lock")
        .args(["exec", "--", "sh", "-c", "echo CMD-RAN"])
        .env("DREAMKIT_LOCK_URL", &url)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("CMD-RAN"));
    // Never a silent local fallback.
    assert!(!home.memory_dir().exists());

    // A dead member first in the list: the next member answers.
    let Some(etcd) = Etcd::single() else {
        return;
    };
    let url = format!(
        "etcd://127.0.0.1:{},{}/x",
        dead[0],
        etcd.members[0].endpoint()
    );
    let (code, out) = acquire(&home, &url, holder.pid());
    assert_eq!(code, 0, "{out}");
}

#[test]
fn malformed_etcd_urls_are_usage_errors() {
    let home = ClaudeHome::new();
    for bad in [
        "etcd://host",
        "etcd://h:0",
        "etcd://h:1/../x",
        "etcd://u@h:1",
    ] {
        let out = home
            .cmd("dream-lock")
            .args(["status", "--backend", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert_eq!(stdout_json(&out)["error"]["kind"], "usage", "{bad}");
        let out = home
            .cmd("dream-gate")
            .env("DREAMKIT_LOCK_URL", bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let message = stdout_json(&out)["error"]["message"].to_string();
        assert!(message.contains("DREAMKIT_LOCK_URL"), "{message}");
    }
    let out = home
        .cmd("dream-lock")
        .args(["status", "--backend", "etcd://127.0.0.1:1"])
        .env("DREAMKIT_ETCD_LEASE_TTL", "soon")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The fencing check dream-run makes before each write, and the keep-alive it holds.
#[test]
fn holds_is_a_linearizable_token_check_and_keep_alive_renews() {
    use dreamkit::lock::{Acquired, Backend, EtcdBackend, EtcdUrl};
    let Some(etcd) = Etcd::single() else {
        return;
    };
    let url = EtcdUrl::parse(&etcd.url("/lib")).unwrap();
    let backend = EtcdBackend::open(&url, "unused").unwrap().with_lease_ttl(2);
    let Acquired::Yes(lease) = backend
        .acquire(std::process::id(), SystemTime::now())
        .unwrap()
    else {
        panic!("not acquired")
    };
    assert!(backend.holds(&lease.token).unwrap());
    assert!(!backend.holds("1").unwrap());
    // From async code too (dream-run's model loop runs on a runtime of its own).
    let inside = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { backend.holds(&lease.token) });
    assert!(inside.unwrap());
    let keep = backend
        .keep_alive(&lease.token)
        .unwrap()
        .expect("etcd renews");
    // Kept: the time is what is tested (held past two and a half TTLs while renewed).
    std::thread::sleep(Duration::from_secs(5));
    assert!(!keep.lost());
    assert!(
        backend.holds(&lease.token).unwrap(),
        "renewed past its 2 s TTL"
    );
    drop(keep);
    // Unrenewed, the lease expires and the token no longer holds.
    assert!(
        wait::within_every(Duration::from_secs(30), Duration::from_millis(100), || {
            !backend.holds(&lease.token).unwrap()
        }),
        "the unrenewed lease never expired"
    );
    assert!(backend.keep_alive(&lease.token).is_err());
}

/// 32 acquirers race for 20 rounds on a 3-node cluster whose leader is killed and restarted
/// twice; no round may have two winners.
#[test]
fn three_nodes_no_double_hold_while_the_leader_dies() {
    let Some(mut etcd) = Etcd::cluster(3) else {
        return;
    };
    let url = etcd.url("/race");
    let home = ClaudeHome::new();
    let shells: Vec<LiveProcess> = (0..32).map(|_| LiveProcess::start()).collect();
    let (mut double_holds, mut winners_total, mut errors) = (0, 0, 0);
    let mut killed = None;
    for round in 0..20 {
        match round {
            4 | 12 => {
                let leader = etcd.leader().expect("a leader");
                etcd.kill(leader);
                killed = Some(leader);
            }
            8 | 16 => {
                if let Some(i) = killed.take() {
                    etcd.start(i);
                }
            }
            _ => {}
        }
        let children: Vec<_> = shells
            .iter()
            .map(|shell| {
                Command::new(bin_path("dream-lock"))
                    .args(["acquire", "--pid", &shell.pid().to_string()])
                    .env_clear()
                    .env("HOME", &home.home)
                    .env("CLAUDE_CONFIG_DIR", &home.config)
                    .env("XDG_STATE_HOME", &home.state_home)
                    .env("DREAMKIT_LOCK_URL", &url)
                    .current_dir(&home.project)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("spawn acquire")
            })
            .collect();
        let mut winners = Vec::new();
        for child in children {
            let out = child.wait_with_output().expect("wait");
            match out.status.code() {
                Some(0) => winners.push(stdout_json(&out)),
                Some(1) => {}
                _ => errors += 1,
            }
        }
        if winners.len() > 1 {
            double_holds += 1;
        }
        winners_total += winners.len();
        // Free the lock for the next round: each winner releases (retried while etcd
        // elects), then whatever an acquirer that failed mid-way left is forced free.
        for w in &winners {
            let started = Instant::now();
            loop {
                let (code, out) = lock(
                    &home,
                    &url,
                    &["release", "--outcome", "failed"],
                    &w.to_string(),
                );
                if code == 0 || code == 1 {
                    break;
                }
                assert!(started.elapsed() < Duration::from_secs(60), "{out}");
            }
        }
        let started = Instant::now();
        loop {
            let (code, status) = lock(&home, &url, &["status"], "");
            if code == 0 {
                break;
            }
            if code == 1 {
                lock(&home, &url, &["release", "--force"], &status.to_string());
            }
            assert!(started.elapsed() < Duration::from_secs(60), "{status}");
        }
    }
    eprintln!(
        "3 nodes, 32 acquirers x 20 rounds: {winners_total} winners, {double_holds} double holds, {errors} errors"
    );
    assert_eq!(double_holds, 0, "rounds with two winners");
    // A lost round is allowed (an election), a dead lock is not.
    assert!(
        winners_total >= 10,
        "only {winners_total} rounds had a winner ({errors} errors)"
    );
}

/// dream-run under an etcd lock: its writes are fenced by the holder key's mod_revision, so
/// a run whose lock went to another holder (its lease expired, another machine took over)
/// stops with `lock_lost` before its next write lands.
#[test]
fn a_dream_run_whose_etcd_lock_was_taken_over_stops_with_lock_lost() {
    use crate::support::fake_api::{FakeApi, Reply};
    let Some(etcd) = Etcd::single() else {
        return;
    };
    let url = etcd.url("/dreams");
    let home = ClaudeHome::new();
    std::fs::create_dir_all(home.memory_dir()).unwrap();
    std::fs::write(home.memory_dir().join("MEMORY.md"), "# Memory\n").unwrap();
    home.add_session(&crate::support::session_id(1), crate::support::hours(1));
    let holder = LiveProcess::start();
    let (code, envelope) = acquire(&home, &url, holder.pid());
    assert_eq!(code, 0, "{envelope}");
    let api = FakeApi::start();
    let port = etcd.members[0].client_port;
    api.push(Reply::anthropic_tools(
        "First.",
        &[(
            "write_file",
            json!({"path": "first.md", "content": "one\n"}),
        )],
    ));
    api.push(Reply::After(
        Box::new(move || {
            use base64::Engine as _;
            let b64 = base64::engine::general_purpose::STANDARD;
            let body = json!({
                "key": b64.encode("/dreams/holder"),
                "value": b64.encode(r#"{"pid":1,"host":"another-machine"}"#),
            });
            crate::support::etcd::post(port, "/v3/kv/put", &body.to_string())
                .expect("etcd answers");
        }),
        Box::new(Reply::anthropic_tools(
            "Second.",
            &[(
                "write_file",
                json!({"path": "second.md", "content": "two\n"}),
            )],
        )),
    ));
    let out = home
        .cmd("dream-run")
        .env("DREAMKIT_LOCK_URL", &url)
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-etcd-test")
        .write_stdin(envelope.to_string())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = &stdout_json(&out)["run"];
    assert_eq!(run["status"], "failed");
    assert_eq!(run["error"], "lock_lost");
    assert_eq!(
        std::fs::read_to_string(home.memory_dir().join("first.md")).unwrap(),
        "one\n",
        "the fenced first write landed and is not restored"
    );
    assert!(
        !home.memory_dir().join("second.md").exists(),
        "the unfenced write never landed"
    );
}

/// In the `acquire | dream-run | release` form nobody else renews the lease: dream-run
/// keeps it alive, so a run longer than the lease's TTL keeps its lock and its writes land.
#[test]
fn a_dream_run_keeps_its_etcd_lease_alive_past_the_ttl() {
    use crate::support::fake_api::{FakeApi, Reply};
    let Some(etcd) = Etcd::single() else {
        return;
    };
    let url = etcd.url("/long");
    let home = ClaudeHome::new();
    std::fs::create_dir_all(home.memory_dir()).unwrap();
    home.add_session(&crate::support::session_id(1), crate::support::hours(1));
    let holder = LiveProcess::start();
    let ttl = [("DREAMKIT_ETCD_LEASE_TTL", "2")];
    let (code, envelope) = lock_env(
        &home,
        &url,
        &ttl,
        &["acquire", "--pid", &holder.pid().to_string()],
        "",
    );
    assert_eq!(code, 0, "{envelope}");
    let api = FakeApi::start();
    // The model thinks for three lease lifetimes before it writes.
    api.push(Reply::After(
        // Kept: the model's slowness is the thing tested, not a wait.
        Box::new(|| std::thread::sleep(Duration::from_secs(6))),
        Box::new(Reply::anthropic_tools(
            "Writing.",
            &[(
                "write_file",
                json!({"path": "late.md", "content": "late\n"}),
            )],
        )),
    ));
    api.push(Reply::anthropic_text("Done."));
    let out = home
        .cmd("dream-run")
        .env("DREAMKIT_LOCK_URL", &url)
        .env("DREAMKIT_ETCD_LEASE_TTL", "2")
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-etcd-test")
        .write_stdin(envelope.to_string())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout_json(&out)["run"]["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(home.memory_dir().join("late.md")).unwrap(),
        "late\n"
    );
}

/// One runner per lock on etcd: the claim lives in its own key under the holder's lease (the
/// holder key, whose mod_revision is the token, is untouched); a second run handed the same
/// envelope is refused while the first runs and after it finished; release clears the claim.
#[test]
fn two_dream_runs_on_one_etcd_token_cannot_both_write() {
    use crate::support::fake_api::{FakeApi, Reply};
    let Some(etcd) = Etcd::single() else {
        return;
    };
    let url = etcd.url("/claims");
    let home = ClaudeHome::new();
    std::fs::create_dir_all(home.memory_dir()).unwrap();
    std::fs::write(home.memory_dir().join("MEMORY.md"), "# Memory\n").unwrap();
    home.add_session(&crate::support::session_id(1), crate::support::hours(1));
    let holder = LiveProcess::start();
    let (code, envelope) = acquire(&home, &url, holder.pid());
    assert_eq!(code, 0, "{envelope}");
    let token = envelope["lock"]["token"].as_str().unwrap().to_string();
    let api = FakeApi::start();
    api.push(Reply::anthropic_tools(
        "First.",
        &[(
            "write_file",
            json!({"path": "first.md", "content": "one\n"}),
        )],
    ))
    .push(Reply::Hang(Duration::from_secs(3)))
    .push(Reply::anthropic_text("Done."));
    let run = |home: &ClaudeHome| {
        let mut cmd = home.process(bin_path("dream-run"));
        cmd.env("DREAMKIT_LOCK_URL", &url)
            .env("ANTHROPIC_BASE_URL", api.url())
            .env("ANTHROPIC_API_KEY", "sk-ant-etcd-test")
            .env("DREAMKIT_RETRY_BASE_MS", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(envelope.to_string().as_bytes())
                .unwrap();
        }
        child
    };
    let first = run(&home);
    let started = Instant::now();
    while api.requests().len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the first run never asked twice"
        );
        std::thread::yield_now();
    }
    let second = run(&home).wait_with_output().unwrap();
    assert_eq!(
        second.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert_eq!(stdout_json(&second)["run"]["error"], "lock_claimed");
    assert_eq!(api.requests().len(), 2, "the second asked nothing");
    // The token is still the holder's: the claim did not touch the holder key.
    let (code, status) = lock(&home, &url, &["status"], "");
    assert_eq!(code, 1, "{status}");
    assert_eq!(status["token"], token.as_str());
    let first = first.wait_with_output().unwrap();
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let replay = run(&home).wait_with_output().unwrap();
    assert_eq!(replay.status.code(), Some(1));
    assert_eq!(stdout_json(&replay)["run"]["error"], "lock_claimed");
    let (code, released) = lock(
        &home,
        &url,
        &["release"],
        &String::from_utf8_lossy(&first.stdout),
    );
    assert_eq!(code, 0, "{released}");
    // A new hold has no claim: a run under it goes ahead (on a session newer than the
    // consolidation just released).
    let fresh = home.add_session(&crate::support::session_id(2), Duration::ZERO);
    std::fs::File::options()
        .write(true)
        .open(&fresh)
        .and_then(|f| f.set_modified(SystemTime::now() + Duration::from_secs(1)))
        .unwrap();
    let (code, envelope) = acquire(&home, &url, holder.pid());
    assert_eq!(code, 0, "{envelope}");
    api.push(Reply::anthropic_text("Nothing."));
    let out = home
        .cmd("dream-run")
        .env("DREAMKIT_LOCK_URL", &url)
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-etcd-test")
        .write_stdin(envelope.to_string())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
