//! The committed JSON Schemas (`schemas/`) are what the report types generate, each is a
//! valid JSON Schema 2020-12, and `--schema` prints them.

use crate::support::{ClaudeHome, Run};

#[test]
fn committed_schemas_are_up_to_date_and_valid() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = dreamkit::schema_files();
    let mut stale = Vec::new();
    for (path, expected) in &files {
        let committed = std::fs::read(root.join(path)).unwrap_or_default();
        if committed != *expected {
            stale.push(path.display().to_string());
        }
        let schema: serde_json::Value = serde_json::from_slice(expected).unwrap();
        if schema.get("schema").is_some_and(serde_json::Value::is_null) {
            let reason = schema["reason"].as_str().unwrap_or_default();
            assert!(
                !reason.is_empty(),
                "{}: no schema and no reason",
                path.display()
            );
            continue;
        }
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema",
            "{}",
            path.display()
        );
        if let Err(e) = jsonschema::draft202012::meta::validate(&schema) {
            panic!("{} is not a valid JSON Schema: {e}", path.display());
        }
    }
    assert!(
        stale.is_empty(),
        "out of date: {stale:?}; run `make man completions`"
    );
    let mut committed: Vec<_> = std::fs::read_dir(root.join("schemas"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    committed.sort();
    let mut generated: Vec<_> = files
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    generated.sort();
    assert_eq!(
        committed, generated,
        "schemas/ holds files nothing generates"
    );
}

#[test]
fn schema_flag_prints_the_committed_schema_and_runs_nothing() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let home = ClaudeHome::new();
    for (args, file) in [
        (&["dream-gate", "--schema"][..], "dream-gate"),
        (&["dream-lock", "acquire", "--schema"], "dream-lock-acquire"),
        (
            &["dream-run", "show", "--diff", "--schema"],
            "dream-run-show-diff",
        ),
        (&["feedback", "send", "--schema"], "feedback-send"),
        (&["suggest", "check", "--schema"], "suggest-check"),
    ] {
        let committed = std::fs::read(root.join(format!("schemas/{file}.json"))).unwrap();
        let committed: serde_json::Value = serde_json::from_slice(&committed).unwrap();
        Run::new(&home, args[0])
            .args(&args[1..])
            .stdin("{\"this\": \"is not read\"")
            .success()
            .stderr_empty()
            .stdout_json(|schema| assert_eq!(schema, &committed, "{args:?}"))
            .run();
    }
    // Nothing ran: no state dir, no memory dir.
    assert!(!home.state_home.exists());
    assert!(!home.memory_dir().exists());
}
