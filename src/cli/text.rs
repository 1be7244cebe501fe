//! Text made safe for a person's terminal: no control character from a model, a transcript or
//! a payload reaches it (an ESC could retitle the window, clear the screen or fake output; a
//! bidi override could show `rm -rf /` as something else).

use std::borrow::Cow;

/// Whether `c` is removed: C0 controls but newline and tab, DEL, the C1 controls, and the
/// bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), which reorder
/// what a person reads without being seen.
fn removed(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || ('\u{80}'..='\u{9f}').contains(&c)
        || is_bidi_control(c)
}

fn is_bidi_control(c: char) -> bool {
    ('\u{202a}'..='\u{202e}').contains(&c) || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `text` without control characters (newline and tab stay). A terminal escape sequence goes
/// whole, not only its ESC: `\e]0;title\a` (OSC, to BEL or ST), `\e[2J` (CSI, to its final
/// byte), `\e(B` and other short escapes.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    if !text.chars().any(removed) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        // A C1 code point is dropped alone: UTF-8 terminals do not read it as an introducer,
        // and the text after it is the person's.
        let introducer = match c {
            '\u{1b}' => chars.next_if(|n| ('\u{20}'..='\u{7e}').contains(n)),
            c if removed(c) => continue,
            c => {
                out.push(c);
                continue;
            }
        };
        match introducer {
            // CSI: parameters and intermediates, then one final byte.
            Some('[') => {
                for n in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&n) || removed(n) {
                        break;
                    }
                }
            }
            // OSC, DCS, SOS, PM, APC: a string up to BEL or ST (ESC \ or its C1 form).
            Some(']' | 'P' | 'X' | '^' | '_') => {
                while let Some(n) = chars.next() {
                    if n == '\u{7}' || n == '\u{9c}' {
                        break;
                    }
                    if n == '\u{1b}' {
                        chars.next_if_eq(&'\\');
                        break;
                    }
                }
            }
            // `\e(B`, `\e#8` and the like: intermediates, then one final character.
            Some(' '..='/') => {
                while chars.next_if(|n| (' '..='/').contains(n)).is_some() {}
                chars.next_if(|n| ('0'..='~').contains(n));
            }
            // A two-character escape (`\eM`), or a lone ESC.
            _ => {}
        }
    }
    Cow::Owned(out)
}

/// One line for a status display: sanitised, blanks folded to single spaces, at most
/// `max_chars` characters (cut with `…`).
pub fn for_terminal(text: &str, max_chars: usize) -> String {
    let clean = sanitize(text);
    let flat = clean.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max_chars {
        return flat;
    }
    let mut cut: String = flat.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// `value` with every string in it, keys included, passed through `clean`: a JSON document
/// whose texts a reader prints raw (`jq -r`).
pub fn map_strings(value: serde_json::Value, clean: &dyn Fn(&str) -> String) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(text) => Value::String(clean(&text)),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| map_strings(v, clean)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, v)| (clean(&key), map_strings(v, clean)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_bells_go_newlines_and_tabs_stay() {
        assert_eq!(
            sanitize("\u{1b}]0;PWNED\u{7}\u{1b}[2Jrun tests"),
            "run tests"
        );
        assert_eq!(sanitize("a\u{1b}[1;31mred\u{1b}[0m b"), "ared b");
        assert_eq!(
            sanitize("t\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\"),
            "tlink"
        );
        assert_eq!(sanitize("\u{1b}(Bx\u{1b}My\u{9b}2Jz"), "xy2Jz");
        assert_eq!(sanitize("end\u{1b}"), "end");
        assert_eq!(sanitize("a\tb\nc"), "a\tb\nc");
        assert_eq!(sanitize("x\u{9b}31my\u{7f}"), "x31my");
        assert_eq!(sanitize("bell\u{7} and nul\u{0}"), "bell and nul");
        assert!(matches!(sanitize("plain"), Cow::Borrowed(_)));
        assert_eq!(
            sanitize("a\u{202e}txt.exe\u{202c} \u{2066}b\u{2069}\u{202a}\u{2067}\u{2068}c\u{202b}\u{202d}"),
            "atxt.exe bc"
        );
        // Marks that only hint a direction, and right-to-left text itself, stay.
        assert_eq!(sanitize("\u{200f}שלום \u{2065}"), "\u{200f}שלום \u{2065}");
        assert_eq!(sanitize("x\u{1b}[2J\u{202e}y"), "xy");
        assert_eq!(for_terminal("grep\n -rn\u{1b}[2J   x", 80), "grep -rn x");
        assert_eq!(for_terminal("abcdef", 4), "abc…");
    }

    #[test]
    fn every_string_of_a_document_keys_included() {
        let doc = serde_json::json!({"a\u{202e}": ["x\u{1b}[2Jy", 1, {"k": "\u{7}z"}], "n": null});
        let clean = map_strings(doc, &|t| sanitize(t).into_owned());
        assert_eq!(
            clean,
            serde_json::json!({"a": ["xy", 1, {"k": "z"}], "n": null})
        );
    }
}
