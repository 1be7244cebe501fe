//! A memory file as the rules edit it: its lines, each knowing which line it was before the
//! run (a change names the line as the user saw it), written back byte for byte where
//! nothing changed (`\r\n` endings, a missing final newline).

use crate::tools::dream_run::check::markdown;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DocLine {
    /// Without its `\n` (or `\r\n`).
    pub text: String,
    /// Ended by `\r\n`.
    pub cr: bool,
    /// Its 1-based number before the run; `None` for a line the run added.
    pub origin: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Doc {
    pub lines: Vec<DocLine>,
    /// The text ends with a newline.
    pub final_newline: bool,
}

/// What `check` knows of a line besides its text.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Marks {
    pub code: bool,
    pub front_matter: bool,
}

impl Doc {
    pub(super) fn parse(text: &str) -> Doc {
        if text.is_empty() {
            return Doc::empty();
        }
        let body = text.strip_suffix('\n');
        let lines = body
            .unwrap_or(text)
            .split('\n')
            .enumerate()
            .map(|(i, raw)| {
                let (text, cr) = match raw.strip_suffix('\r') {
                    Some(line) => (line, true),
                    None => (raw, false),
                };
                DocLine {
                    text: text.to_string(),
                    cr,
                    origin: Some(i + 1),
                }
            })
            .collect();
        Doc {
            lines,
            final_newline: body.is_some(),
        }
    }

    pub(super) fn empty() -> Doc {
        Doc {
            lines: Vec::new(),
            final_newline: false,
        }
    }

    pub(super) fn render(&self) -> String {
        let mut out = String::new();
        for (i, line) in self.lines.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&line.text);
            if line.cr {
                out.push('\r');
            }
        }
        if self.final_newline && !self.lines.is_empty() {
            out.push('\n');
        }
        out
    }

    /// Code and front matter, line by line, as `check` reads them.
    pub(super) fn marks(&self) -> Vec<Marks> {
        let text = self.render();
        let mut marks: Vec<Marks> = markdown::lines(&text)
            .iter()
            .map(|l| Marks {
                code: l.code,
                front_matter: l.front_matter,
            })
            .collect();
        marks.resize(self.lines.len(), Marks::default());
        marks
    }

    /// Whether the text after the last line is outside a code block (a line appended there
    /// is read as text, not code).
    pub(super) fn ends_outside_code(&self) -> bool {
        let mut probe = self.clone();
        probe.append(vec!["x".to_string()]);
        probe
            .marks()
            .last()
            .is_some_and(|m| !m.code && !m.front_matter)
    }

    /// Appends `lines` at the end (after a final newline; the file then ends with one).
    pub(super) fn append(&mut self, lines: Vec<String>) {
        // The last line's ending is what the file uses.
        let cr = self.lines.iter().rev().take(2).any(|l| l.cr);
        if let Some(last) = self.lines.last_mut() {
            // The last line had no ending of its own (no final newline): it gets the file's.
            last.cr |= cr;
        }
        for text in lines {
            self.lines.push(DocLine {
                text,
                cr,
                origin: None,
            });
        }
        self.final_newline = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_round_trip() {
        for text in ["", "a", "a\n", "a\r\nb\r\n", "a\r", "\n", "\n\n", "a\n\nb"] {
            assert_eq!(Doc::parse(text).render(), text, "{text:?}");
        }
        let doc = Doc::parse("a\nb\n");
        assert_eq!(doc.lines[1].origin, Some(2));
    }

    #[test]
    fn appending_keeps_the_files_line_ending() {
        let mut doc = Doc::parse("a\r\nb");
        doc.append(vec!["c".into()]);
        assert_eq!(doc.render(), "a\r\nb\r\nc\r\n");
        let mut doc = Doc::parse("a\n");
        doc.append(vec!["".into(), "c".into()]);
        assert_eq!(doc.render(), "a\n\nc\n");
        let mut doc = Doc::empty();
        doc.append(vec!["c".into()]);
        assert_eq!(doc.render(), "c\n");
        assert!(!Doc::parse("```\ncode\n").ends_outside_code());
        assert!(Doc::parse("```\ncode\n```\n").ends_outside_code());
    }
}
