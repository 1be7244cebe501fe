//! The command line's own tokenizer: POSIX `sh` quoting, nothing expanded, every shell
//! construct we do not run refused on the raw text or while splitting.

use super::{allowed_list, MAX_COMMAND_BYTES, MAX_STAGES, MAX_WORDS, MAX_WORD_BYTES};

/// One word of the command line after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Word {
    pub(super) text: String,
    /// An unquoted `*`, `?` or `[` appeared (a shell would have globbed it).
    pub(super) glob: bool,
}

/// Refusal of characters outside any quoting that a reader could take for operators, or that
/// hide text: the model (or a transcript it quotes) should not smuggle meaning past a reviewer.
fn lookalike(c: char) -> bool {
    matches!(
        c,
        '\u{FF5C}' // fullwidth |
            | '\u{FF1B}' // fullwidth ;
            | '\u{FF06}' // fullwidth &
            | '\u{FF1C}' // fullwidth <
            | '\u{FF1E}' // fullwidth >
            | '\u{FF04}' // fullwidth $
            | '\u{FF40}' // fullwidth `
            | '\u{2223}' // divides
            | '\u{01C0}' // latin letter dental click
            | '\u{2502}' // box drawings light vertical
            | '\u{037E}' // greek question mark (looks like ;)
            | '\u{2039}'
            | '\u{203A}'
    )
}

fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00A0}' | '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}'
            | '\u{17B4}' | '\u{17B5}' | '\u{180E}' | '\u{2000}'..='\u{200F}'
            | '\u{2028}'..='\u{202F}' | '\u{205F}'..='\u{206F}' | '\u{3000}'
            | '\u{3164}' | '\u{FEFF}' | '\u{FFA0}' | '\u{FFF9}'..='\u{FFFB}'
    )
}

/// Checks the raw text, then splits it into pipeline stages of words.
pub(super) fn tokenize(command: &str) -> Result<Vec<Vec<Word>>, String> {
    if command.len() > MAX_COMMAND_BYTES {
        return Err(format!(
            "the command is {} bytes; the limit is {MAX_COMMAND_BYTES}",
            command.len()
        ));
    }
    if command.contains('\0') {
        return Err("the command contains a NUL byte".into());
    }
    if command.contains(['\n', '\r']) {
        return Err("the command contains a line break; send exactly one command line (join programs with | only)".into());
    }
    if let Some(c) = command.chars().find(|&c| c != '\t' && c.is_control()) {
        return Err(format!(
            "the command contains the control character U+{:04X}",
            c as u32
        ));
    }
    if let Some(c) = command.chars().find(|&c| invisible(c)) {
        return Err(format!(
            "the command contains the invisible or non-ASCII space character U+{:04X}; use plain ASCII spaces",
            c as u32
        ));
    }
    if command.trim().is_empty() {
        return Err(format!(
            "the command is empty; give one of: {}",
            allowed_list()
        ));
    }

    let mut stages: Vec<Vec<Word>> = Vec::new();
    let mut stage: Vec<Word> = Vec::new();
    let mut word: Option<Word> = None;
    let mut chars = command.chars().peekable();

    fn push_char(word: &mut Option<Word>, c: char) {
        word.get_or_insert_with(|| Word {
            text: String::new(),
            glob: false,
        })
        .text
        .push(c);
    }
    fn finish(word: &mut Option<Word>, stage: &mut Vec<Word>) {
        if let Some(w) = word.take() {
            stage.push(w);
        }
    }

    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => finish(&mut word, &mut stage),
            '|' => {
                if chars.peek() == Some(&'|') {
                    return Err("`||` is not supported: one pipeline only, no conditionals".into());
                }
                finish(&mut word, &mut stage);
                if stage.is_empty() {
                    return Err("a `|` has no command before it".into());
                }
                stages.push(std::mem::take(&mut stage));
            }
            '&' => {
                return Err(if chars.peek() == Some(&'&') {
                    "`&&` is not supported: run one pipeline per call".into()
                } else if chars.peek() == Some(&'>') {
                    "redirects (`&>`) are not supported: the output comes back to you".into()
                } else {
                    "`&` (background jobs) is not supported".into()
                })
            }
            ';' => return Err("`;` is not supported: run one pipeline per call".into()),
            '<' | '>' => {
                return Err(format!(
                    "redirects (`{c}`) are not supported: the output comes back to you and files are read by naming them"
                ))
            }
            '(' | ')' => {
                return Err(
                    "subshells and unquoted parentheses are not supported (for find grouping write \\( and \\))"
                        .into(),
                )
            }
            '{' | '}' => {
                return Err("unquoted braces are not supported (no brace expansion or groups); quote them".into())
            }
            '$' => {
                return Err("`$` expansion (variables, $(...), ${...}) is not supported; quote a literal $ in single quotes".into())
            }
            '`' => return Err("backticks (command substitution) are not supported".into()),
            '#' if word.is_none() => {
                return Err("comments (`#`) are not supported; quote a literal #".into())
            }
            '~' if word.is_none() => {
                return Err("`~` is not expanded; give the absolute path".into())
            }
            '\\' => match chars.next() {
                Some(next) => push_char(&mut word, next),
                None => return Err("the command ends with a lone backslash".into()),
            },
            '\'' => {
                let mut closed = false;
                word.get_or_insert_with(|| Word {
                    text: String::new(),
                    glob: false,
                });
                for inner in chars.by_ref() {
                    if inner == '\'' {
                        closed = true;
                        break;
                    }
                    push_char(&mut word, inner);
                }
                if !closed {
                    return Err("unterminated single quote".into());
                }
            }
            '"' => {
                let mut closed = false;
                word.get_or_insert_with(|| Word {
                    text: String::new(),
                    glob: false,
                });
                while let Some(inner) = chars.next() {
                    match inner {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '$' => return Err("`$` inside double quotes would expand; use single quotes for a literal $".into()),
                        '`' => return Err("backticks (command substitution) are not supported".into()),
                        '\\' => match chars.peek() {
                            Some(&next @ ('\\' | '"' | '$' | '`')) => {
                                chars.next();
                                push_char(&mut word, next);
                            }
                            _ => push_char(&mut word, '\\'),
                        },
                        other => push_char(&mut word, other),
                    }
                }
                if !closed {
                    return Err("unterminated double quote".into());
                }
            }
            '*' | '?' | '[' => {
                push_char(&mut word, c);
                if let Some(w) = word.as_mut() {
                    w.glob = true;
                }
            }
            other if lookalike(other) => {
                return Err(format!(
                    "the character {other:?} (U+{:04X}) looks like a shell operator and is refused; quote it if you mean it literally",
                    other as u32
                ))
            }
            other => push_char(&mut word, other),
        }
    }
    finish(&mut word, &mut stage);
    if stage.is_empty() {
        return Err(if stages.is_empty() {
            format!("the command is empty; give one of: {}", allowed_list())
        } else {
            "the command ends with `|` and no program after it".into()
        });
    }
    stages.push(stage);
    if stages.len() > MAX_STAGES {
        return Err(format!("at most {MAX_STAGES} programs per pipeline"));
    }
    for stage in &stages {
        if stage.len() > MAX_WORDS {
            return Err(format!("at most {MAX_WORDS} arguments per program"));
        }
        if let Some(w) = stage.iter().find(|w| w.text.len() > MAX_WORD_BYTES) {
            return Err(format!(
                "an argument is {} bytes; the limit is {MAX_WORD_BYTES}",
                w.text.len()
            ));
        }
        if let Some(w) = stage.iter().find(|w| w.text.is_empty()) {
            let _ = w;
            return Err("empty arguments ('') are not supported".into());
        }
    }
    Ok(stages)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(command: &str) -> Vec<Vec<(String, bool)>> {
        tokenize(command)
            .unwrap()
            .into_iter()
            .map(|stage| stage.into_iter().map(|w| (w.text, w.glob)).collect())
            .collect()
    }

    #[test]
    fn quoting_follows_sh_and_expands_nothing() {
        let w = |t: &str, g: bool| (t.to_string(), g);
        assert_eq!(
            words(r#"grep 'a b$' "c\"d\\e\x" f\ g *.md '*.md' x\*"#),
            vec![vec![
                w("grep", false),
                w("a b$", false),
                w("c\"d\\e\\x", false),
                w("f g", false),
                w("*.md", true),
                w("*.md", false),
                w("x*", false),
            ]]
        );
        assert_eq!(
            words("cat a|grep -n x |  wc\t-l"),
            vec![
                vec![w("cat", false), w("a", false)],
                vec![w("grep", false), w("-n", false), w("x", false)],
                vec![w("wc", false), w("-l", false)],
            ]
        );
        // A `#` or `~` inside a word is literal, as in sh.
        assert_eq!(
            words("grep a#b~c"),
            vec![vec![w("grep", false), w("a#b~c", false)]]
        );
    }
}
