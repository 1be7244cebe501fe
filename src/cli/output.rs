//! Writing the one JSON document to stdout, and human diagnostics to stderr.

use std::borrow::Cow;
use std::io::Write;

use serde_json::Value;

use super::redact::redact;

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
            self.line(message);
        }
    }

    /// Detail only shown with `-v`.
    pub fn info(&self, message: &str) {
        if self.verbose && !self.quiet {
            self.line(message);
        }
    }

    /// One line, secrets and control characters removed, in one write (stderr is
    /// unbuffered): a message may quote a model, a transcript or a file name.
    fn line(&self, message: &str) {
        let clean = super::text::sanitize(message);
        let line = format!("{}: {}\n", self.tool, redact(&clean));
        // Nothing useful can be done when stderr itself is gone.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    pub fn is_verbose(&self) -> bool {
        self.verbose && !self.quiet
    }
}

/// Serialises a path as a string; bytes that are not UTF-8 are replaced, because a JSON
/// document cannot hold them and refusing to print would hide every other field.
pub fn path_lossy<S: serde::Serializer>(path: &std::path::Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// The compact document as printed (without its newline): as is for pipes, indented for
/// terminals and `--pretty`.
pub fn render(json: &str, pretty: bool) -> Cow<'_, [u8]> {
    let indented = pretty
        .then(|| serde_json::from_str::<Value>(json).ok())
        .flatten()
        .and_then(|value| serde_json::to_vec_pretty(&value).ok());
    match indented {
        Some(bytes) => Cow::Owned(bytes),
        None => Cow::Borrowed(json.as_bytes()),
    }
}

/// Writes the document to stdout, indented when `pretty`. A closed pipe (`| head`) is not an
/// error worth reporting.
pub fn write_stdout(json: &str, pretty: bool) -> std::io::Result<()> {
    match write_document(json, pretty) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// As [`write_stdout`], but a closed pipe is an error too: for callers that must know
/// whether the reader got the document.
pub fn write_document(json: &str, pretty: bool) -> std::io::Result<()> {
    let json = redact(json);
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    lock.write_all(&render(&json, pretty))
        .and_then(|_| lock.write_all(b"\n"))
        .and_then(|_| lock.flush())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_is_verbatim_and_pretty_is_indented() {
        let doc = r#"{"a":1,"b":[true]}"#;
        assert_eq!(&*render(doc, false), doc.as_bytes());
        let pretty = String::from_utf8(render(doc, true).into_owned()).unwrap();
        assert!(pretty.starts_with("{\n  \"a\": 1,"), "{pretty}");
        assert!(pretty.ends_with('}'));
    }
}
