//! Text made safe for a person's terminal: no control character from a model, a transcript or
//! a payload reaches it (an ESC could retitle the window, clear the screen or fake output).

use std::borrow::Cow;

/// Whether `c` is removed: C0 controls but newline and tab, DEL, and the C1 controls.
fn removed(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c)
}

/// `text` without control characters (newline and tab stay).
pub fn sanitize(text: &str) -> Cow<'_, str> {
    if text.chars().any(removed) {
        Cow::Owned(text.chars().filter(|c| !removed(*c)).collect())
    } else {
        Cow::Borrowed(text)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_bells_go_newlines_and_tabs_stay() {
        assert_eq!(
            sanitize("\u{1b}]0;PWNED\u{7}\u{1b}[2Jrun tests"),
            "]0;PWNED[2Jrun tests"
        );
        assert_eq!(sanitize("a\tb\nc"), "a\tb\nc");
        assert_eq!(sanitize("x\u{9b}31my\u{7f}"), "x31my");
        assert!(matches!(sanitize("plain"), Cow::Borrowed(_)));
        assert_eq!(for_terminal("grep\n -rn\u{1b}[2J   x", 80), "grep -rn[2J x");
        assert_eq!(for_terminal("abcdef", 4), "abc…");
    }
}
