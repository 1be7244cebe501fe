//! Writes the man pages and shell completions generated from the clap definitions
//! (`make man completions`). The docs test fails when the committed copies differ.

fn main() -> std::io::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for (path, contents) in dreamkit::cli::docs::render_all(dreamkit::doc_pages()) {
        let path = root.join(path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, contents)?;
        println!("{}", path.strip_prefix(root).unwrap_or(&path).display());
    }
    Ok(())
}
