//! dream-run stamps the topic files it writes as Claude Code does (`metadata.node_type`,
//! `type`, `originSessionId`, `modified`), and leaves team memory (`team/`) undeleted unless
//! told.

use serde_json::{json, Value};

use dreamkit::cli::time::parse_rfc3339;

use crate::support::client_memory::{
    assert_stamped_like_the_client, first_session_writes, is_client_time, EDIT, EDITED_FILE,
};
use crate::support::dream::{tool_results, Dream};
use crate::support::fake_api::Reply;
use crate::support::session_id;

/// A project whose memory dir holds only `files` (relative path, content).
fn dream_with(files: &[(&str, &str)]) -> Dream {
    let d = Dream::new();
    std::fs::remove_dir_all(d.mem()).unwrap();
    for (rel, content) in files {
        let path = d.mem().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    std::fs::create_dir_all(d.mem()).unwrap();
    d
}

/// `dream-run --unlocked ARGS` answered by `turns` (tool calls each) and a closing text; every
/// tool result of every turn must be `ok` (or, when false, an error); the run's document.
fn run(d: &Dream, turns: &[Vec<(&str, Value)>], args: &[&str]) -> Value {
    for calls in turns {
        d.api.push(Reply::anthropic_tools("Working.", calls));
    }
    d.api.push(Reply::anthropic_text("Done."));
    let mut all = vec!["-n", "--unlocked", "--max-calls-per-turn", "20"];
    all.extend_from_slice(args);
    d.tool("dream-run")
        .args(&all)
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_empty()
        .run()
        .json()
}

/// The tool results the model got for turn `n` (0-based).
fn results(d: &Dream, turn: usize) -> Vec<(String, bool)> {
    tool_results(&d.api.requests()[turn + 1])
}

/// The value of `key` under a stamped file's `metadata`.
fn metadata(text: &str, key: &str) -> Option<String> {
    let front = text.strip_prefix("---\n")?.split_once("\n---\n")?.0;
    let block = front.split_once("metadata:\n")?.1;
    block
        .lines()
        .take_while(|line| line.starts_with("  "))
        .find_map(|line| line.trim_start().strip_prefix(&format!("{key}: ")))
        .map(str::to_string)
}

#[test]
fn a_run_stamps_the_clients_writes_key_by_key_as_the_client_did() {
    let d = dream_with(&[]);
    let (index, topics): (Vec<_>, Vec<_>) = first_session_writes()
        .into_iter()
        .partition(|(name, _)| name == "MEMORY.md");
    let write = |(name, content): (String, String)| {
        ("write_file", json!({"path": name, "content": content}))
    };
    let writes: Vec<(&str, Value)> = topics.into_iter().map(write).collect();
    // The edit comes without a read: what the run wrote (stamped) is what it knows the file
    // holds, so it is not refused as changed since read. The index comes last, so it is no
    // older than its topics.
    let mut edit = vec![(
        "edit_file",
        json!({"path": EDITED_FILE, "old_string": EDIT.0, "new_string": EDIT.1}),
    )];
    edit.extend(index.into_iter().map(write));
    let doc = run(&d, &[writes, edit], &[]);
    assert_eq!(doc["run"]["sessions_reviewed"], 5, "{doc}");
    for turn in 0..2 {
        let results = results(&d, turn);
        assert!(results.iter().all(|(_, err)| !err), "{results:?}");
    }
    // The newest session reviewed is where the new files' content came from.
    let modified = assert_stamped_like_the_client(&d.mem(), &session_id(5));
    let edited = modified
        .iter()
        .find(|(name, _)| name == EDITED_FILE)
        .unwrap();
    assert!(
        modified.iter().all(|(_, at)| at <= &edited.1),
        "the edit moved modified: {modified:?}"
    );
}

#[test]
fn a_rewrite_without_metadata_keeps_the_stamps_and_freshens_modified() {
    let origin = "5d2f7a90-8c3e-4b1a-b6d4-9e0f1a2b3c4d";
    let before = "2026-01-02T03:04:05.678Z";
    let stamped = format!(
        "---\nname: deploy\ndescription: How we deploy\nmetadata:\n  node_type: memory\n  type: project\n  originSessionId: {origin}\n  modified: {before}\n---\n\nDeploys use FTP.\n"
    );
    let d = dream_with(&[
        ("MEMORY.md", "- [Deploy](deploy.md) — how we deploy\n"),
        ("deploy.md", &stamped),
    ]);
    let started = std::time::SystemTime::now();
    let rewrite = "---\nname: deploy\ndescription: How we deploy\n---\n\nDeploys are blue-green.\n";
    run(
        &d,
        &[
            vec![
                ("read_file", json!({"path": "deploy.md"})),
                ("read_file", json!({"path": "MEMORY.md"})),
            ],
            vec![(
                "write_file",
                json!({"path": "deploy.md", "content": rewrite}),
            )],
            // No read in between: the run knows the stamped file it wrote. The index is
            // written last, so it is no older than its topics.
            vec![
                (
                    "edit_file",
                    json!({"path": "deploy.md", "old_string": "blue-green.", "new_string": "blue-green (since 2026-12-01)."}),
                ),
                (
                    "edit_file",
                    json!({"path": "MEMORY.md", "old_string": "how we deploy", "new_string": "blue-green deploys"}),
                ),
            ],
        ],
        &[],
    );
    for turn in 0..3 {
        let results = results(&d, turn);
        assert!(results.iter().all(|(_, err)| !err), "{results:?}");
    }
    let after = d.read("deploy.md");
    let modified = metadata(&after, "modified").expect("modified");
    assert!(is_client_time(&modified), "{after}");
    let at = parse_rfc3339(&modified).unwrap();
    assert!(
        at > parse_rfc3339(before).unwrap() && at + std::time::Duration::from_millis(1) >= started,
        "{after}"
    );
    assert_eq!(
        after,
        format!(
            "---\nname: deploy\ndescription: How we deploy\nmetadata:\n  node_type: memory\n  type: project\n  originSessionId: {origin}\n  modified: {modified}\n---\n\nDeploys are blue-green (since 2026-12-01).\n"
        )
    );
    assert_eq!(
        d.read("MEMORY.md"),
        "- [Deploy](deploy.md) — blue-green deploys\n"
    );
}

#[test]
fn a_created_file_is_stamped_in_the_memory_dir_and_in_a_proposal() {
    let d = dream_with(&[]);
    let content = "---\nname: tea\ndescription: What Alice drinks\nmetadata:\n  type: user\n---\n\nAlice drinks oolong.\n";
    // The index comes last, so it is no older than its topic.
    let index = "- [Tea](tea.md) — what Alice drinks\n";
    let writes = || {
        vec![
            ("write_file", json!({"path": "tea.md", "content": content})),
            ("write_file", json!({"path": "MEMORY.md", "content": index})),
        ]
    };
    run(&d, &[writes()], &[]);
    let created = d.read("tea.md");
    assert_eq!(metadata(&created, "node_type").as_deref(), Some("memory"));
    assert_eq!(metadata(&created, "type").as_deref(), Some("user"));
    assert_eq!(
        metadata(&created, "originSessionId"),
        Some(session_id(5)),
        "{created}"
    );
    let modified = metadata(&created, "modified").unwrap();
    assert!(is_client_time(&modified), "{created}");
    assert_eq!(
        created,
        format!(
            "---\nname: tea\ndescription: What Alice drinks\nmetadata:\n  node_type: memory\n  type: user\n  originSessionId: {}\n  modified: {modified}\n---\n\nAlice drinks oolong.\n",
            session_id(5)
        )
    );

    // The index is never stamped.
    assert_eq!(d.read("MEMORY.md"), index);

    // Proposing: the staging copy holds the stamped file, and apply lands it as staged.
    for file in ["tea.md", "MEMORY.md"] {
        std::fs::remove_file(d.mem().join(file)).unwrap();
    }
    let id = d.propose_with(&[], writes(), "");
    let staged = std::fs::read_to_string(
        d.home
            .state_dir()
            .join("proposals")
            .join(&id)
            .join("memory/tea.md"),
    )
    .unwrap();
    assert_eq!(metadata(&staged, "node_type").as_deref(), Some("memory"));
    assert_eq!(metadata(&staged, "originSessionId"), Some(session_id(5)));
    assert!(is_client_time(&metadata(&staged, "modified").unwrap()));
    d.tool("dream-run")
        .arg("apply")
        .success()
        .stdout_json(|doc| assert_eq!(doc["applied"], true, "{doc}"))
        .stderr_empty()
        .run();
    assert_eq!(d.read("tea.md"), staged);
}

#[test]
fn team_memory_is_not_deleted_unless_the_run_allows_it() {
    let d = dream_with(&[
        ("MEMORY.md", "- [Shared](team/shared.md) — the team's\n"),
        ("team/shared.md", "Shared by the team.\n"),
    ]);
    let delete = || {
        vec![
            ("read_file", json!({"path": "team/shared.md"})),
            ("delete_file", json!({"path": "team/shared.md"})),
        ]
    };
    run(&d, &[delete()], &[]);
    let refused = results(&d, 0);
    assert!(!refused[0].1, "{refused:?}");
    assert!(refused[1].1, "{refused:?}");
    assert!(
        refused[1].0.contains("team memory") && refused[1].0.contains("edit"),
        "{refused:?}"
    );
    assert_eq!(d.read("team/shared.md"), "Shared by the team.\n");

    d.touch_sessions();
    let asked = d.api.requests().len();
    d.api
        .push(Reply::anthropic_tools("Working.", &delete()))
        .push(Reply::anthropic_text("Done."));
    d.tool("dream-run")
        .args(["-n", "--unlocked", "--allow-team-delete"])
        .success()
        .stdout_json(|doc| assert_eq!(doc["run"]["status"], "completed", "{doc}"))
        .stderr_is(crate::support::dream::more_problems("dangling_link 0 -> 1"))
        .run();
    let allowed = tool_results(&d.api.requests()[asked + 1]);
    assert!(allowed.iter().all(|(_, err)| !err), "{allowed:?}");
    assert!(!d.mem().join("team/shared.md").exists());
}
