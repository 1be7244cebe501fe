//! The committed man pages and completions are what the clap definitions generate.

#[test]
fn committed_man_pages_and_completions_are_up_to_date() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = dreamkit::cli::docs::render_all(dreamkit::doc_pages());
    assert!(files.len() >= 4);
    let mut stale = Vec::new();
    for (path, expected) in files {
        let committed = std::fs::read(root.join(&path)).unwrap_or_default();
        if committed != expected {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "out of date: {stale:?}; run `make man completions`"
    );
}
