//! Writes the man pages and shell completions generated from the clap definitions, and the
//! JSON Schemas generated from the report types (`make man completions`). The docs test fails
//! when the committed copies differ.

fn main() -> std::io::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = dreamkit::cli::docs::render_all(dreamkit::doc_pages())
        .into_iter()
        .chain(dreamkit::schema_files());
    for (path, contents) in files {
        let path = root.join(path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, contents)?;
        println!("{}", path.strip_prefix(root).unwrap_or(&path).display());
    }
    Ok(())
}
