//! Writing the one JSON document to stdout, and human diagnostics to stderr.

use std::io::{IsTerminal, Write};

use serde_json::Value;

/// Where human diagnostics go: stderr, silenced by `-q`, more of them with `-v`.
#[derive(Debug, Clone)]
pub struct Diag {
    tool: String,
    quiet: bool,
    verbose: bool,
}

impl Diag {
    pub fn new(tool: &str, quiet: bool, verbose: bool) -> Self {
        Diag {
            tool: tool.to_string(),
            quiet,
            verbose,
        }
    }

    /// A diagnostic a user should see (a warning, the one line of an error).
    pub fn warn(&self, message: &str) {
        if !self.quiet {
            // Nothing useful can be done when stderr itself is gone.
            let _ = writeln!(std::io::stderr().lock(), "{}: {message}", self.tool);
        }
    }

    /// Detail only shown with `-v`.
    pub fn info(&self, message: &str) {
        if self.verbose && !self.quiet {
            let _ = writeln!(std::io::stderr().lock(), "{}: {message}", self.tool);
        }
    }

    pub fn is_verbose(&self) -> bool {
        self.verbose && !self.quiet
    }
}

/// Serialises the document compactly (pipes) or pretty (terminals, `--pretty`).
pub fn render(document: &Value, pretty: bool) -> Vec<u8> {
    let mut bytes = if pretty {
        serde_json::to_vec_pretty(document)
    } else {
        serde_json::to_vec(document)
    }
    // A serde_json::Value always serialises.
    .unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Writes the document to stdout. A closed pipe (`| head`) is not an error worth reporting.
pub fn write_stdout(document: &Value, pretty_flag: bool) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let pretty = pretty_flag || stdout.is_terminal();
    let mut lock = stdout.lock();
    let result = lock.write_all(&render(document, pretty)).and_then(|_| lock.flush());
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compact_and_pretty_are_newline_terminated() {
        let doc = json!({"a": 1, "b": [true]});
        assert_eq!(render(&doc, false), b"{\"a\":1,\"b\":[true]}\n");
        let pretty = String::from_utf8(render(&doc, true)).unwrap();
        assert!(pretty.starts_with("{\n  \"a\": 1,"), "{pretty}");
        assert!(pretty.ends_with("}\n"));
    }
}
