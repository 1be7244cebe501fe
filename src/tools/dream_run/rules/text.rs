//! Text measured and cut as the client counts it.

/// UTF-16 units, as the client counts a line.
pub(super) fn units(text: &str) -> usize {
    text.encode_utf16().count()
}

/// `text` in at most `room` UTF-16 units, cut between words where one is near, marked `…`.
pub(super) fn cut(text: &str, room: usize) -> String {
    if units(text) <= room {
        return text.to_string();
    }
    let mut used = 0;
    let mut end = 0;
    for (at, c) in text.char_indices() {
        if used + c.len_utf16() + 1 > room {
            break;
        }
        used += c.len_utf16();
        end = at + c.len_utf8();
    }
    let kept = &text[..end];
    // Back to the last space when it is not far: a word is not cut in half.
    let kept = match kept.rfind(char::is_whitespace) {
        Some(space) if kept.len() - space < 24 => &kept[..space],
        _ => kept,
    };
    format!("{}…", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_is_char_aware() {
        assert_eq!(cut("😀😀😀", 4), "😀…");
        assert_eq!(cut("ab", 2), "ab");
        assert_eq!(cut("abc", 2), "a…");
    }
}
