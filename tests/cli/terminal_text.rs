//! Text for a person, everywhere dream-run shows it: no terminal escape, bell or bidi control
//! from the model or the memory, and no memory line holding a secret, in `--events`, the `-v`
//! lines, `tasks` (which also says when it leaves a record out) and `show`.

use serde_json::{json, Value};

use crate::support::dream::Dream;
use crate::support::fake_api::Reply;
use crate::support::LiveProcess;

/// What a model may write: a window title, a cleared screen, reordered text.
const EVIL: &str =
    "Looking \u{1b}]0;PWNED\u{7}\u{1b}[2J around \u{202e}gnp.exe\u{202c} \u{2066}x\u{2069}";
/// [`EVIL`] as a person is shown it.
const SHOWN: &str = "Looking  around gnp.exe x";
const KEY: &str = "sk-ant-api03-FAKEfake0123456789FAKEfake0123";
const PEM_BODY: &str = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun";
const HIDDEN: &str = "[secret: line not shown]";

/// The characters of `text` no person may be shown: C0 but newline and tab, DEL, C1, and the
/// bidi embeddings, overrides and isolates.
fn unfit(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n' && c != '\t')
                || ('\u{202a}'..='\u{202e}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c)
        })
        .collect()
}

#[track_caller]
fn assert_fit(what: &str, text: &str) {
    assert_eq!(unfit(text), Vec::<char>::new(), "{what}: {text:?}");
    for never in ["PWNED", KEY, PEM_BODY] {
        assert!(!text.contains(never), "{what} shows {never}: {text:?}");
    }
}

/// Every string of a document, keys too: what `jq -r` would print raw.
#[track_caller]
fn assert_fit_json(what: &str, value: &Value) {
    match value {
        Value::String(s) => assert_fit(what, s),
        Value::Array(items) => items.iter().for_each(|v| assert_fit_json(what, v)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            assert_fit(what, k);
            assert_fit_json(what, v);
        }),
        _ => {}
    }
}

/// A proposing run whose model writes [`EVIL`] everywhere it can: its words (quoting a key
/// from memory), a tool call's path, and a new memory file holding a private key; run with
/// `--events -v`. Returns the task id.
fn evil_proposal(d: &Dream) -> String {
    let holder = LiveProcess::start();
    let envelope = d.acquired_envelope(&holder);
    let content = format!(
        "# Notes\n{EVIL}\n-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\n"
    );
    d.api
        .push(Reply::anthropic_tools(
            &format!("{EVIL}\nquoting memory: {KEY}"),
            &[
                (
                    "read_file",
                    json!({"path": "gone\u{1b}]0;PWNED\u{7}\u{202e}.md"}),
                ),
                (
                    "write_file",
                    json!({"path": "topics/notes.md", "content": content}),
                ),
            ],
        ))
        .push(Reply::anthropic_text(EVIL));
    let ran = d
        .dream_run(&envelope, &["--propose", "--events", "-v"])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["run"]["status"], "proposed", "{doc}");
            // What `jq -r .run.summary` prints raw.
            assert_eq!(doc["run"]["summary"], SHOWN, "{doc}");
            assert_fit_json("the run section", &doc["run"]);
        })
        .stderr_with(|err| {
            for line in err.lines() {
                assert_fit("stderr", line);
                match serde_json::from_str::<Value>(line) {
                    Ok(event) => assert_fit_json("an event", &event),
                    Err(_) => assert!(line.starts_with("dream-run: "), "{line:?}"),
                }
            }
        })
        .run();
    d.release(&ran.stdout, "proposed");
    let events: Vec<Value> = ran
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(events[0]["type"], "turn");
    assert_eq!(events[0]["text"], format!("{SHOWN}\n{HIDDEN}"));
    let calls: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool")
        .map(|e| e["call"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["read_file(gone.md)", "write_file(topics/notes.md)"]);
    // -v names the refused call, cleaned.
    let refused: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.starts_with("dream-run: tool read_file refused: "))
        .collect();
    assert_eq!(refused.len(), 1, "{}", ran.stderr);
    ran.json()["run"]["task_id"].as_str().unwrap().to_string()
}

#[test]
fn events_and_verbose_lines_show_no_escape_bidi_or_secret_line() {
    let d = Dream::new();
    evil_proposal(&d);
}

#[test]
fn show_prints_the_diff_clean_from_dev_null_with_secret_lines_hidden() {
    let d = Dream::new();
    let task_id = evil_proposal(&d);
    let expected = format!(
        "--- /dev/null\n+++ b/topics/notes.md\n@@ -0,0 +1,5 @@\n+# Notes\n+{SHOWN}\n+{HIDDEN}\n+{HIDDEN}\n+{HIDDEN}\n"
    );
    let shown = d
        .tool("dream-run")
        .args(["show", &task_id])
        .success()
        .stdout_json(|doc| assert_fit_json("show", doc))
        .stderr_empty()
        .run()
        .json();
    let text = shown["diff_text"].as_str().unwrap();
    assert!(text.ends_with(&expected), "{text}");
    assert_eq!(d.task(&task_id)["diff_text"], shown["diff_text"]);
    d.tool("dream-run")
        .args(["show", &task_id, "--diff"])
        .success()
        .stdout_with(|out| {
            assert_fit("show --diff", out);
            assert!(out.ends_with(&expected), "{out}");
        })
        .stderr_empty()
        .run();
}

#[test]
fn tasks_shows_records_clean_and_warns_of_one_it_leaves_out() {
    let d = Dream::new();
    let task_id = evil_proposal(&d);
    let corrupt = d
        .home
        .state_dir()
        .join("tasks")
        .join("task-20260101T000000Z-0123456789abcdef.json");
    std::fs::write(&corrupt, "{\"task_id\": \"half a rec").unwrap();
    let doc = d
        .tool("dream-run")
        .arg("tasks")
        .success()
        .stdout_json(|doc| assert_fit_json("tasks", doc))
        .stderr_is(format!(
            "dream-run: a task record that cannot be read is left out: {}\n",
            corrupt.display()
        ))
        .run()
        .json();
    assert_eq!(
        doc["unreadable"],
        json!(["task-20260101T000000Z-0123456789abcdef"])
    );
    assert_eq!(doc["warnings"], json!(["unreadable_task_records"]));
    let tasks = doc["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0]["task_id"], task_id.as_str());
    let turns: Vec<&str> = tasks[0]["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["text"].as_str().unwrap())
        .collect();
    assert_eq!(turns, [format!("{SHOWN}\n{HIDDEN}"), SHOWN.to_string()]);
    // Nothing left out: no warning.
    std::fs::remove_file(&corrupt).unwrap();
    d.tool("dream-run")
        .arg("tasks")
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["unreadable"], json!([]));
            assert_eq!(doc["warnings"], json!([]));
        })
        .stderr_empty()
        .run();
}
