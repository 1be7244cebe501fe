//! The etcd backend against real etcd processes on loopback ports: every lock path on one
//! node, lease expiry, keep-alive, an unreachable etcd, and a 3-node cluster whose leader is
//! killed while acquirers race.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::binaries::runtime_probe;
use crate::support::etcd::{free_ports, Etcd};
use crate::support::run::Ran;
use crate::support::*;

/// What a run that wrote a file no index links says (the file is new, so it is an orphan;
/// written without frontmatter, it is a front_matter problem too).
const LEFT_AN_ORPHAN: &str =
    "dream-run: the run left more problems than it found: orphan_file 0 -> 1, \
                              front_matter 0 -> 1 (dream-run check lists them)\n";

/// The run's stderr is `tool`'s one line: the message its document holds at `pointer`.
fn said(ran: &Ran, tool: &str, pointer: &str) {
    let doc = ran.json();
    let message = doc
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no {pointer}: {doc}"));
    assert_eq!(ran.stderr, format!("{tool}: {message}\n"));
}

/// dream-lock against `url`, with extra environment; the caller says what it must print.
fn lock_run<'a>(
    home: &ClaudeHome,
    url: &str,
    env: &[(&str, &str)],
    args: &[&str],
    stdin: &str,
) -> Run<'a> {
    Run::new(home, "dream-lock")
        .args(args)
        .env("DREAMKIT_LOCK_URL", url)
        .envs(env.iter().copied())
        .stdin(stdin)
}

/// At most one line on stderr, dream-lock's.
fn at_most_one_line(err: &str) {
    assert!(
        err.is_empty()
            || (err.starts_with("dream-lock: ") && err.ends_with('\n') && err.lines().count() == 1),
        "{err:?}"
    );
}

/// What dream-lock `args` says on stderr when it exits `code` with the document `doc`:
/// nothing when it did what was asked (a release without an outcome says how it rolled
/// back), why not otherwise.
fn lock_said(args: &[&str], stdin: &str, code: i32, doc: &Value, err: &str) {
    // A release told no outcome, by flag or by the envelope's run.status.
    let no_outcome = !args.contains(&"--outcome")
        && !args.contains(&"--token")
        && serde_json::from_str::<Value>(stdin).is_ok_and(|e| e["run"]["status"].is_null());
    let message = |doc: &Value| {
        doc["error"]["message"]
            .as_str()
            .or(doc["lock"]["error"]["message"].as_str())
            .unwrap_or_else(|| panic!("no error message: {doc}"))
            .to_string()
    };
    match (args[0], code) {
        ("release", 0) if no_outcome => assert_eq!(
            err,
            "dream-lock: no run.status and no --outcome: rolled back as failed\n"
        ),
        (_, 0) => assert_eq!(err, "", "{args:?}: {doc}"),
        ("status", 1) => assert_eq!(
            err,
            format!(
                "dream-lock: the lock is held by PID {} since {}\n",
                doc["holder_pid"],
                doc["since"].as_str().expect("since")
            )
        ),
        ("acquire", 1) => {
            assert!(
                err.starts_with(&format!(
                    "dream-lock: busy: the lock is held by PID {} since ",
                    doc["lock"]["holder_pid"]
                )),
                "{err}: {doc}"
            );
            at_most_one_line(err);
        }
        ("release", 1) if doc["lock"]["reason"] == "not_holder" => assert_eq!(
            err,
            "dream-lock: not released: the lock is no longer ours (taken over, or released \
             already); nothing was changed\n"
        ),
        ("release", 1) => {
            assert!(
                err.starts_with(&format!(
                    "dream-lock: not released: the lock is held by PID {} since ",
                    doc["lock"]["holder_pid"]
                )) && err.ends_with(
                    " and it is not this shell or a parent of it; pass --force to release it \
                     anyway\n"
                ),
                "{err}: {doc}"
            );
            at_most_one_line(err);
        }
        _ => assert_eq!(
            err,
            format!("dream-lock: {}\n", message(doc)),
            "{args:?} {code}"
        ),
    }
}

/// dream-lock against `url`, with extra environment, which must exit `code`; its document.
fn lock_env(
    home: &ClaudeHome,
    url: &str,
    env: &[(&str, &str)],
    args: &[&str],
    stdin: &str,
    code: i32,
) -> Value {
    let ran = lock_run(home, url, env, args, stdin)
        .code(code)
        .stdout_json(move |doc| assert_eq!(doc.get("error").is_some(), code >= 2, "{doc}"))
        .stderr_with(at_most_one_line)
        .run();
    let doc = ran.json();
    lock_said(args, stdin, code, &doc, &ran.stderr);
    doc
}

fn lock(home: &ClaudeHome, url: &str, args: &[&str], stdin: &str, code: i32) -> Value {
    lock_env(home, url, &[], args, stdin, code)
}

fn acquire(home: &ClaudeHome, url: &str, pid: u32, code: i32) -> Value {
    lock(home, url, &["acquire", "--pid", &pid.to_string()], "", code)
}

/// dream-lock whose exit the caller reads (`why` says why it may vary): the exit and the
/// document.
fn lock_any(
    home: &ClaudeHome,
    url: &str,
    args: &[&str],
    stdin: &str,
    why: &'static str,
) -> (i32, Value) {
    let ran = lock_run(home, url, &[], args, stdin)
        .code_any(why)
        .stdout_json(|doc| {
            // The envelope with its lock section, status's document, or a failure.
            assert!(
                doc["lock"].is_object() || doc["held"].is_boolean() || doc["error"].is_object(),
                "{doc}"
            );
        })
        .stderr_with(at_most_one_line)
        .run();
    let code = ran.code.expect("an exit code");
    let doc = ran.json();
    lock_said(args, stdin, code, &doc, &ran.stderr);
    (code, doc)
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
        last = lock_any(
            home,
            url,
            &["status"],
            "",
            "polled until `done`: held or free",
        )
        .1;
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

    let status = lock(&home, &url, &["status"], "", 0);
    assert_eq!(status["held"], false);
    assert_eq!(status["backend"], "etcd");
    assert_eq!(status["key"], "/team/repo/holder");
    assert_eq!(status["last_consolidated_at"], Value::Null);

    let before = epoch_ms(SystemTime::now());
    let acquired = acquire(&home, &url, holder.pid(), 0);
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

    let status = lock(&home, &url, &["status"], "", 1);
    assert_eq!(status["held"], true);
    assert_eq!(status["holder_pid"], holder.pid());
    assert_eq!(status["holder_alive"], true);
    assert_eq!(status["token"], token.as_str());

    let other = LiveProcess::start();
    let busy = acquire(&home, &url, other.pid(), 1);
    assert_eq!(busy["lock"]["reason"], "held");
    assert_eq!(busy["lock"]["holder_pid"], holder.pid());

    let released = lock(
        &home,
        &url,
        &["release", "--outcome", "completed"],
        &acquired.to_string(),
        0,
    );
    assert_eq!(released["lock"]["released"], true);
    assert_eq!(etcd.get("/team/repo/holder"), None);
    let done_ms: i64 = etcd
        .get("/team/repo/last-consolidated")
        .unwrap()
        .parse()
        .unwrap();
    let status = lock(&home, &url, &["status"], "", 0);
    assert_eq!(status["held"], false);
    assert_eq!(status["token"], Value::Null);
    assert_eq!(
        status["last_consolidated_at"],
        released["lock"]["last_consolidated_at"]
    );

    // The gate reads its time from etcd: consolidated moments ago, so too soon.
    let gate = Run::new(&home, "dream-gate")
        .args(["--backend", &url])
        .code(1)
        .stdout_json(|gate| assert_eq!(gate["gate"]["reason"], "too_soon", "{gate}"))
        .stderr_is("dream-gate: not due: too_soon: 0.0 h of 24 h\n")
        .run()
        .json();
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
    let lost = acquire(&home, &url, holder.pid(), 0);
    Run::new(&home, "dream-lock")
        .args(["release", "--outcome", "failed"])
        .stdin(lost.to_string())
        .code(2)
        .stdout_json(|doc| {
            let message = doc["error"]["message"].to_string();
            assert!(message.contains("taken on the etcd backend"), "{message}");
        })
        .stderr_is(format!(
            "dream-lock: the lease in lock was taken on the etcd backend, but this release uses \
             the file backend (path {}): pass the same --backend or DREAMKIT_LOCK_URL as acquire\n",
            home.lock_file().display()
        ))
        .run();
    lock(
        &home,
        &etcd.url("/team/other"),
        &["release", "--outcome", "failed"],
        &lost.to_string(),
        2,
    );
    lock(&home, &url, &["status"], "", 1);
    lock(
        &home,
        &url,
        &["release", "--outcome", "completed"],
        &lost.to_string(),
        0,
    );
    let done_ms: i64 = etcd
        .get("/team/repo/last-consolidated")
        .unwrap()
        .parse()
        .unwrap();

    // Releasing again changes nothing.
    let again = lock(
        &home,
        &url,
        &["release", "--outcome", "failed"],
        &acquired.to_string(),
        1,
    );
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
    assert!(out.status.success(), "date: {out:?}");
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
    let acquired = acquire(&home, &url, holder.pid(), 0);
    assert_eq!(
        acquired["lock"]["key"],
        format!("/dreamkit/{}/holder", home.slug())
    );
    assert!(etcd.get(&key).is_some());
    let released = lock(
        &home,
        &url,
        &["release", "--outcome", "failed"],
        &acquired.to_string(),
        0,
    );
    assert_eq!(released["lock"]["last_consolidated_at"], Value::Null);
    assert_eq!(etcd.get(&key), None);

    // A completed run, then an aborted one: back to the completed run's time exactly.
    let first = acquire(&home, &url, holder.pid(), 0);
    lock(
        &home,
        &url,
        &["release", "--outcome", "completed"],
        &first.to_string(),
        0,
    );
    let completed = etcd.get(&key).expect("a time");
    let second = acquire(&home, &url, holder.pid(), 0);
    assert_eq!(second["lock"]["prior_mtime"].to_string(), completed);
    assert_ne!(etcd.get(&key).unwrap(), completed, "acquire stamps now");
    // The outcome from the envelope's run.status.
    let mut envelope = second.clone();
    envelope["run"] = serde_json::json!({"status": "aborted"});
    let released = lock(&home, &url, &["release"], &envelope.to_string(), 0);
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
    let first = acquire(&home, &url, gone.pid(), 0);
    let gone_pid = gone.pid();
    gone.kill();

    let status = lock(&home, &url, &["status"], "", 0);
    assert_eq!(status["held"], false);
    assert_eq!(status["stale"], true);
    assert_eq!(status["holder_pid"], gone_pid);
    assert_eq!(status["holder_alive"], false);

    let live = LiveProcess::start();
    let second = acquire(&home, &url, live.pid(), 0);
    assert_ne!(second["lock"]["token"], first["lock"]["token"]);

    // The first holder's lease is fenced off: its release changes nothing.
    let refused = lock(
        &home,
        &url,
        &["release", "--outcome", "completed"],
        &first.to_string(),
        1,
    );
    assert_eq!(refused["lock"]["reason"], "not_holder");
    assert_eq!(refused["lock"]["holder_pid"], live.pid());
    let status = lock(&home, &url, &["status"], "", 1);
    assert_eq!(status["token"], second["lock"]["token"]);

    // By hand, a live holder that is not ours takes --force; status | release frees it.
    let status = lock(&home, &url, &["status"], "", 1);
    let out = lock(&home, &url, &["release"], &status.to_string(), 1);
    assert_eq!(out["lock"]["reason"], "live_holder");
    lock(&home, &url, &["release", "--force"], &status.to_string(), 0);
    lock(&home, &url, &["status"], "", 0);
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
    let status = lock(&home, &url, &["status"], "", 1);
    assert_eq!(status["held"], true);
    assert_eq!(status["holder_pid"], 4_000_000);
    assert_eq!(status["holder_alive"], Value::Null, "not probed here");
    let me = LiveProcess::start();
    let busy = acquire(&home, &url, me.pid(), 1);
    assert_eq!(busy["lock"]["holder_pid"], 4_000_000);

    // Written more than an hour ago: stale, and replaced.
    let record = serde_json::json!({
        "pid": 4_000_000, "host": "ci-runner-7", "node": "another-boot/pid:[1]",
        "since_ms": now - 3_601_000,
    });
    etcd.put("/shared/holder", &record.to_string());
    let status = lock(&home, &url, &["status"], "", 0);
    assert_eq!(status["stale"], true);
    acquire(&home, &url, me.pid(), 0);
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
    let first = acquire(&home, &direct, me.pid(), 0);
    lock(
        &home,
        &direct,
        &["release", "--outcome", "completed"],
        &first.to_string(),
        0,
    );
    let completed = etcd.get("/lossy/last-consolidated").unwrap();

    let proxy = crate::support::etcd::lossy_proxy(etcd.members[0].client_port);
    let url = format!("etcd://127.0.0.1:{proxy}/lossy");
    let won = acquire(&home, &url, me.pid(), 0);
    assert_eq!(won["lock"]["prior_mtime"].to_string(), completed);
    let status = lock(&home, &direct, &["status"], "", 1);
    assert_eq!(
        status["token"], won["lock"]["token"],
        "the token is the holder's"
    );
    lock(
        &home,
        &direct,
        &["release", "--outcome", "failed"],
        &won.to_string(),
        0,
    );
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
    let first = lock_env(
        &home,
        &url,
        &ttl,
        &["acquire", "--pid", &holder.pid().to_string()],
        "",
        0,
    );
    let status = status_until(&home, &url, Duration::from_secs(30), |s| s["held"] == false);
    assert_eq!(
        status["holder_pid"],
        Value::Null,
        "the key went with its lease"
    );
    let other = LiveProcess::start();
    let second = acquire(&home, &url, other.pid(), 0);
    let refused = lock(
        &home,
        &url,
        &["release", "--outcome", "completed"],
        &first.to_string(),
        1,
    );
    assert_eq!(refused["lock"]["reason"], "not_holder");
    lock(
        &home,
        &url,
        &["release", "--outcome", "failed"],
        &second.to_string(),
        0,
    );

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
    Run::new(&home, "dream-lock")
        .args(["exec", "--", "sh", "-c", &script])
        .env("DREAMKIT_LOCK_URL", &url)
        .env("DREAMKIT_ETCD_LEASE_TTL", "2")
        .env("PATH", path)
        .success()
        .stdout_with(|text| {
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.last(), Some(&"still-held"), "{text}");
            // The probe that sees no runtime on the file path sees one here (it is not
            // blind).
            assert!(!lines.contains(&"threads=1"), "{text}");
            assert!(!lines.contains(&"anon=0"), "{text}");
        })
        // The command's own `dream-lock status` (held), then exec's release.
        .stderr_with(|err| {
            let lines: Vec<&str> = err.lines().collect();
            assert_eq!(lines.len(), 2, "{err}");
            assert!(
                lines[0].starts_with("dream-lock: the lock is held by PID "),
                "{err}"
            );
            assert_eq!(
                lines[1],
                "dream-lock: released the lock: completed, the consolidation time is now"
            );
        })
        .run();
    // Released after the command.
    lock(&home, &url, &["status"], "", 0);
}

#[test]
fn an_unreachable_etcd_exits_4_and_changes_nothing() {
    let home = ClaudeHome::new();
    let dead = free_ports(2);
    let url = format!("etcd://127.0.0.1:{},127.0.0.1:{}/x", dead[0], dead[1]);
    let holder = LiveProcess::start();

    let out = acquire(&home, &url, holder.pid(), 4);
    assert_eq!(out["lock"]["acquired"], false);
    assert_eq!(out["lock"]["error"]["kind"], "remote");
    let message = out["lock"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("etcd is unreachable"), "{message}");
    assert!(message.contains("nothing was changed"), "{message}");
    assert!(out["project"].is_object(), "the envelope still flows");

    let out = lock(&home, &url, &["status"], "", 4);
    assert_eq!(out["error"]["kind"], "remote");
    let out = lock(
        &home,
        &url,
        &["release", "--token", "7", "--outcome", "completed"],
        "",
        4,
    );
    assert_eq!(out["lock"]["released"], false);
    let ran = Run::new(&home, "dream-gate")
        .args(["--backend", &url])
        .code(4)
        .stdout_json(|doc| assert_eq!(doc["gate"]["error"]["kind"], "remote"))
        .stderr_contains(
            "dream-gate: etcd is unreachable, cannot read the last-consolidated time (",
        )
        .run();
    said(&ran, "dream-gate", "/gate/error/message");
    let ran = Run::new(&home, "dream-lock")
        .args(["exec", "--", "sh", "-c", "echo CMD-RAN"])
        .env("DREAMKIT_LOCK_URL", &url)
        .code(4)
        .stdout_with(|out| assert!(!out.contains("CMD-RAN"), "{out}"))
        .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "remote"))
        .stderr_contains("dream-lock: etcd is unreachable, cannot read the lock (")
        .run();
    said(&ran, "dream-lock", "/error/message");
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
    acquire(&home, &url, holder.pid(), 0);
}

#[test]
fn malformed_etcd_urls_are_usage_errors() {
    let home = ClaudeHome::new();
    for bad in ["etcd://host", "etcd://h:0", "etcd://h:1/../x"] {
        let ran = Run::new(&home, "dream-lock")
            .args(["status", "--backend", bad])
            .code(2)
            .stdout_json(|doc| assert_eq!(doc["error"]["kind"], "usage", "{bad}"))
            .stderr_contains(format!(
                "dream-lock: invalid value '{bad}' for '--backend <URL>': "
            ))
            .run();
        // The usage error's one line: the message, then where to read more.
        assert_eq!(
            ran.stderr,
            usage_stderr(
                "dream-lock",
                ran.json()["error"]["message"].as_str().unwrap()
            )
        );
        let ran = Run::new(&home, "dream-gate")
            .env("DREAMKIT_LOCK_URL", bad)
            .code(2)
            .stdout_json(|doc| {
                let message = doc["error"]["message"].to_string();
                assert!(message.contains("DREAMKIT_LOCK_URL"), "{message}");
            })
            .stderr_contains(format!("dream-gate: DREAMKIT_LOCK_URL=\"{bad}\": "))
            .run();
        assert_eq!(
            ran.stderr,
            usage_stderr(
                "dream-gate",
                ran.json()["error"]["message"].as_str().unwrap()
            )
        );
    }
    // With a user and password in the URL, both streams say it redacted.
    let bad = "etcd://u:pw-SECRET@h:1";
    let shown = "etcd://[redacted]@h:1";
    let refusal = format!(
        "lock backend \"{shown}\": no user, query, fragment or blanks allowed (etcd://host:port[,host:port...][/prefix])"
    );
    Run::new(&home, "dream-lock")
        .args(["status", "--backend", bad])
        .stdin_from(Stdio::null())
        .code(2)
        .stdout_json(|doc| {
            assert_eq!(
                doc["error"],
                json!({"kind": "usage", "message": format!("invalid value '{shown}' for '--backend <URL>': {refusal}")})
            );
        })
        .stderr_is(usage_stderr(
            "dream-lock",
            &format!("invalid value '{shown}' for '--backend <URL>': {refusal}"),
        ))
        .run();
    Run::new(&home, "dream-gate")
        .env("DREAMKIT_LOCK_URL", bad)
        .stdin_from(Stdio::null())
        .code(2)
        .stdout_json(|doc| {
            assert_eq!(
                doc["error"],
                json!({"kind": "usage", "message": format!("DREAMKIT_LOCK_URL=\"{shown}\": {refusal}")})
            );
        })
        .stderr_is(usage_stderr(
            "dream-gate",
            &format!("DREAMKIT_LOCK_URL=\"{shown}\": {refusal}"),
        ))
        .run();
    Run::new(&home, "dream-lock")
        .args(["status", "--backend", "etcd://127.0.0.1:1"])
        .env("DREAMKIT_ETCD_LEASE_TTL", "soon")
        .code(2)
        .stdout_json(|doc| {
            assert_eq!(
                doc["error"],
                json!({"kind": "usage", "message": "DREAMKIT_ETCD_LEASE_TTL=\"soon\": expected seconds from 1 to 3600"})
            );
        })
        .stderr_is("dream-lock: DREAMKIT_ETCD_LEASE_TTL=\"soon\": expected seconds from 1 to 3600\n")
        .run();
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
                let args = ["acquire", "--pid", &shell.pid().to_string()].map(String::from);
                Run::new(&home, "dream-lock")
                    .args(&args)
                    .env("DREAMKIT_LOCK_URL", &url)
                    .stdin_from(Stdio::null())
                    .code_any("32 race: one wins (0), the rest meet it (1); an election fails some")
                    .stdout_json(|doc| {
                        assert!(
                            doc["lock"]["acquired"].is_boolean() || doc["error"].is_object(),
                            "{doc}"
                        );
                    })
                    .stderr_with(at_most_one_line)
                    .spawn()
            })
            .collect();
        let mut winners = Vec::new();
        for child in children {
            let out = child.finish();
            if let Some(code @ (0 | 1)) = out.code {
                lock_said(&["acquire"], "", code, &out.json(), &out.stderr);
            }
            match out.code {
                Some(0) => winners.push(out.json()),
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
                let (code, out) = lock_any(
                    &home,
                    &url,
                    &["release", "--outcome", "failed"],
                    &w.to_string(),
                    "retried while etcd elects a leader",
                );
                if code == 0 || code == 1 {
                    break;
                }
                assert!(started.elapsed() < Duration::from_secs(60), "{out}");
            }
        }
        let started = Instant::now();
        loop {
            let (code, status) = lock_any(
                &home,
                &url,
                &["status"],
                "",
                "free (0) ends the wait; held (1) is forced free; else etcd elects",
            );
            if code == 0 {
                break;
            }
            if code == 1 {
                lock_any(
                    &home,
                    &url,
                    &["release", "--force"],
                    &status.to_string(),
                    "forced free, or not while etcd elects: the status after says",
                );
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
    let envelope = acquire(&home, &url, holder.pid(), 0);
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
    Run::new(&home, "dream-run")
        .env("DREAMKIT_LOCK_URL", &url)
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-etcd-test")
        .stdin(envelope.to_string())
        .code(1)
        .stdout_json(|doc| {
            let run = &doc["run"];
            assert_eq!(run["status"], "failed");
            assert_eq!(run["error"], "lock_lost");
        })
        // What was lost and kept, the first write's orphan, then why it failed.
        .stderr_with(|err| {
            let lines: Vec<&str> = err.lines().collect();
            assert_eq!(lines.len(), 3, "{err}");
            assert!(
                lines[0].starts_with(&format!(
                    "dream-run: the lock was lost: nothing was restored; the snapshot is {}/",
                    home.state_dir().join("snapshots").display()
                )),
                "{err}"
            );
            assert_eq!(format!("{}\n", lines[1]), LEFT_AN_ORPHAN);
            assert_eq!(
                lines[2],
                "dream-run: run failed: the consolidation lock was taken by another process"
            );
        })
        .run();
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
    let envelope = lock_env(
        &home,
        &url,
        &ttl,
        &["acquire", "--pid", &holder.pid().to_string()],
        "",
        0,
    );
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
    Run::new(&home, "dream-run")
        .env("DREAMKIT_LOCK_URL", &url)
        .env("DREAMKIT_ETCD_LEASE_TTL", "2")
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-etcd-test")
        .stdin(envelope.to_string())
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed"))
        // late.md is linked from no index.
        .stderr_is(LEFT_AN_ORPHAN)
        .run();
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
    let envelope = acquire(&home, &url, holder.pid(), 0);
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
        Run::new(home, "dream-run")
            .env("DREAMKIT_LOCK_URL", &url)
            .env("ANTHROPIC_BASE_URL", api.url())
            .env("ANTHROPIC_API_KEY", "sk-ant-etcd-test")
            .env("DREAMKIT_RETRY_BASE_MS", "1")
            .stdin(envelope.to_string())
    };
    // A second run handed the envelope the first one runs under is refused.
    let claimed = |run: Run<'_>, why: &dyn Fn(&str)| {
        run.code(1)
            .stdout_json(|doc| {
                assert_eq!(doc["run"]["status"], "skipped", "{doc}");
                assert_eq!(doc["run"]["reason"], "lock_claimed", "{doc}");
            })
            .stderr_with(why)
            .run()
            .stdout
    };
    let first = run(&home)
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        // first.md is linked from no index.
        .stderr_is(LEFT_AN_ORPHAN)
        .spawn();
    wait::for_true("the first run to ask twice", || api.requests().len() >= 2);
    let first_pid = first.pid();
    claimed(run(&home), &|err| {
        assert!(
            err.starts_with("dream-run: run skipped: another dream-run (task ")
                && err.ends_with(&format!(
                    ", PID {first_pid}) already runs under this lock\n"
                )),
            "{err}"
        );
    });
    assert_eq!(api.requests().len(), 2, "the second asked nothing");
    // The token is still the holder's: the claim did not touch the holder key.
    let status = lock(&home, &url, &["status"], "", 1);
    assert_eq!(status["token"], token.as_str());
    let first = first.finish();
    // Replayed after it finished: refused too.
    let task = first.json()["run"]["task_id"].as_str().unwrap().to_string();
    let loser = claimed(run(&home), &|err| {
        assert_eq!(
            err,
            format!(
                "dream-run: run skipped: task {task} already ran under this lock: take the lock \
                 anew (dream-lock acquire) for another run\n"
            )
        );
    });
    // The loser's release, after the first run ended and before its release: the first's
    // consolidation is not rolled back, the hold is left untouched.
    lock_run(&home, &url, &[], &["release"], &loser)
        .code(1)
        .stdout_json(|doc| {
            assert_eq!(doc["lock"]["released"], false, "{doc}");
            assert_eq!(doc["lock"]["reason"], "not_holder", "{doc}");
        })
        .stderr_is(format!(
            "dream-lock: not released: the lock is held for dream-run task {task}, not for this \
             envelope's run; that run's own envelope releases it (or pass --force); nothing was \
             changed\n"
        ))
        .run();
    let status = lock(&home, &url, &["status"], "", 1);
    assert_eq!(status["token"], token.as_str());
    // Not rolled back: the time acquire set is still there (a roll-back deletes it).
    assert!(status["last_consolidated_at"].is_string(), "{status}");
    let released = lock(&home, &url, &["release"], &first.stdout, 0);
    assert_eq!(released["lock"]["outcome"], "completed");
    assert!(
        released["lock"]["last_consolidated_at"].is_string(),
        "{released}"
    );
    // A new hold has no claim: a run under it goes ahead (on a session newer than the
    // consolidation just released).
    let fresh = home.add_session(&crate::support::session_id(2), Duration::ZERO);
    std::fs::File::options()
        .write(true)
        .open(&fresh)
        .and_then(|f| f.set_modified(SystemTime::now() + Duration::from_secs(1)))
        .unwrap();
    let envelope = acquire(&home, &url, holder.pid(), 0);
    api.push(Reply::anthropic_text("Nothing."));
    Run::new(&home, "dream-run")
        .env("DREAMKIT_LOCK_URL", &url)
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-etcd-test")
        .stdin(envelope.to_string())
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run();
}
