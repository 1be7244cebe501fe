//! Provenance: the `sources` a model names with each write, edit and deletion, checked
//! against the run's transcripts; kept per change in the task record, counted in
//! `run.provenance`, shown by `dream-run show --why`; a new topic file's `originSessionId`
//! from its first verified source.

use serde_json::{json, Value};

use crate::support::dream::{tool_results, Dream};
use crate::support::fake_api::Reply;
use crate::support::session_id;

/// A session that is not one of the run's.
const STRANGER: &str = "99999999-9999-4999-8999-999999999999";

const DEPLOY: &str = "---\nname: deploys\ndescription: how the project deploys\nmetadata:\n  type: project\n---\nDeploys are blue-green.\n**Why:** zero downtime.\n**How to apply:** never plan an FTP upload.\n";

/// Reads, then four changes: a verified source, a quote the session never said, a session
/// that is not the run's, and no source at all.
fn script(d: &Dream) {
    d.api
        .push(Reply::anthropic_tools(
            "Reading.",
            &[
                ("read_file", json!({"path": "MEMORY.md"})),
                ("read_file", json!({"path": "stale.md"})),
                ("read_file", json!({"path": "topics/build.md"})),
            ],
        ))
        .push(Reply::anthropic_tools(
            "Consolidating.",
            &[
                (
                    "write_file",
                    json!({"path": "project_deploys.md", "content": DEPLOY, "sources": [
                        {"session": session_id(3), "quote": "we deploy   with\nblue-green now"}]}),
                ),
                (
                    "edit_file",
                    json!({"path": "MEMORY.md", "old_string": "- [Stale](stale.md): old notes\n",
                        "new_string": "- [Deploys](project_deploys.md) — blue-green\n",
                        "sources": [{"session": session_id(2), "quote": "we deploy on Fridays"}]}),
                ),
                (
                    "delete_file",
                    json!({"path": "stale.md", "sources": [{"session": STRANGER, "quote": "FTP is gone"}]}),
                ),
                (
                    "write_file",
                    json!({"path": "topics/build.md", "content": "Build with make, then make test.\n"}),
                ),
            ],
        ))
        .push(Reply::anthropic_text("Deploys recorded; the FTP note is gone."));
}

#[test]
fn each_change_keeps_its_sources_checked_against_the_transcripts() {
    let d = Dream::new();
    script(&d);
    let doc = d
        .tool("dream-run")
        .args(["-n", "--unlocked"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_any("the health line")
        .run()
        .json();
    let run = &doc["run"];
    // Counted per tool call: four changed a file, three named a source, one was verified.
    assert_eq!(
        run["provenance"],
        json!({"changes": 4, "sourced": 3, "verified": 1}),
        "{run}"
    );
    // What the model was told, call by call.
    let requests = d.api.requests();
    let results = tool_results(&requests[2]);
    assert_eq!(results.len(), 4, "{results:?}");
    assert_eq!(
        results[0],
        (
            "created project_deploys.md\nsources: 1 of 1 verified".to_string(),
            false
        )
    );
    assert_eq!(
        results[1],
        (
            format!(
                "edited MEMORY.md\nsources: 0 of 1 verified; not verified: session {} quote \
                 \"we deploy on Fridays\": not found in that session's transcript (quote it \
                 exactly)",
                session_id(2)
            ),
            false
        )
    );
    assert_eq!(
        results[2],
        (
            format!(
                "deleted stale.md\nsources: 0 of 1 verified; not verified: session {STRANGER} \
                 quote \"FTP is gone\": not one of the sessions this run reviews"
            ),
            false
        )
    );
    assert_eq!(results[3], ("wrote topics/build.md".to_string(), false));
    // The task record keeps them per change; the unsourced change has none.
    let task = run["task_id"].as_str().unwrap();
    let record = d.task_record(task);
    let sources_of = |file: &str| -> Value {
        record["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["file"] == file)
            .unwrap_or_else(|| panic!("no change of {file}: {record}"))
            .get("sources")
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        sources_of("project_deploys.md"),
        json!([{"session": session_id(3), "quote": "we deploy   with\nblue-green now", "verified": true}])
    );
    assert_eq!(
        sources_of("MEMORY.md"),
        json!([{"session": session_id(2), "quote": "we deploy on Fridays", "verified": false}])
    );
    assert_eq!(
        sources_of("stale.md"),
        json!([{"session": STRANGER, "quote": "FTP is gone", "verified": false}])
    );
    assert_eq!(sources_of("topics/build.md"), Value::Null);
    assert_eq!(run["changes"], record["changes"]);
    // The new topic file's origin is its first verified source, not the newest session.
    let written = d.read("project_deploys.md");
    assert!(
        written.contains(&format!("originSessionId: {}\n", session_id(3))),
        "{written}"
    );
    // show --why: each change and where it came from.
    d.tool("dream-run")
        .args(["show", "-n", task, "--why"])
        .success()
        .stdout_is(format!(
            "edit MEMORY.md: edited by the model\n    source: session {s2} \"we deploy on Fridays\" (not verified)\n\
             create project_deploys.md: created by the model\n    source: session {s3} \"we deploy   with\\nblue-green now\" (verified)\n\
             delete stale.md: deleted by the model\n    source: session {STRANGER} \"FTP is gone\" (not verified)\n\
             edit topics/build.md: edited by the model\n    no source named\n",
            s2 = session_id(2),
            s3 = session_id(3),
        ))
        .stderr_empty()
        .run();
}

/// `sources` of the wrong shape is a tool error naming the field, and nothing is written.
#[test]
fn malformed_sources_are_refused_with_the_field_named() {
    let d = Dream::new();
    d.api
        .push(Reply::anthropic_tools(
            "Writing.",
            &[
                (
                    "write_file",
                    json!({"path": "a.md", "content": "x\n", "sources": "session 1"}),
                ),
                (
                    "write_file",
                    json!({"path": "b.md", "content": "x\n", "sources": [{"quote": "hi"}]}),
                ),
                (
                    "delete_file",
                    json!({"path": "stale.md", "sources": [{"session": 7}]}),
                ),
            ],
        ))
        .push(Reply::anthropic_text("Done."));
    d.tool("dream-run")
        .args(["-n", "--unlocked"])
        .code_any("no_changes (1): every call was refused")
        .stdout_json(|doc| assert_eq!(doc["run"]["tool_calls"], 3, "{doc}"))
        .stderr_any("the refusals")
        .run();
    let requests = d.api.requests();
    let results = tool_results(&requests[1]);
    assert_eq!(
        results,
        vec![
            (
                "write_file: `sources` must be an array, not a string".to_string(),
                true
            ),
            (
                "write_file: `sources[0]`: missing required field `session`".to_string(),
                true
            ),
            (
                "delete_file: `sources[0]`: `session` must be a string, not a number".to_string(),
                true
            ),
        ]
    );
    assert!(!d.mem().join("a.md").exists() && !d.mem().join("b.md").exists());
    assert!(d.mem().join("stale.md").exists());
}

/// The rules engine's changes carry their rule as their source.
#[test]
fn a_rules_change_names_its_rule_as_its_source() {
    let d = Dream::new();
    std::fs::write(
        d.mem().join("MEMORY.md"),
        "# Memory\n- [Build](topics/build.md): how to build\n- [Stale](stale.md): old notes\n- [Build](topics/build.md): how to build\n",
    )
    .unwrap();
    let doc = d
        .tool("dream-run")
        .args(["-n", "--unlocked", "--engine", "rules"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_any("what the rules did")
        .run()
        .json();
    let changes = doc["run"]["changes"].as_array().unwrap();
    assert!(!changes.is_empty());
    for change in changes {
        assert_eq!(
            change["source"],
            json!({"rule": change["rule"]}),
            "{change}"
        );
        assert!(change.get("sources").is_none(), "{change}");
    }
    assert!(doc["run"].get("provenance").is_none(), "{doc}");
    // Text, not JSON: --schema says so.
    d.tool("dream-run")
        .args(["show", "--why", "--schema"])
        .success()
        .stdout_json(|doc| {
            assert_eq!(doc["schema"], Value::Null, "{doc}");
            assert!(doc["reason"]
                .as_str()
                .unwrap()
                .contains("run show without --why"));
        })
        .stderr_empty()
        .run();
    let task = doc["run"]["task_id"].as_str().unwrap();
    d.tool("dream-run")
        .args(["show", "-n", task, "--why"])
        .success()
        .stdout_with(|text| {
            assert!(
                text.contains("(duplicate_entry)")
                    && text.contains("\n    rule: duplicate_entry\n"),
                "{text}"
            );
        })
        .stderr_empty()
        .run();
}
