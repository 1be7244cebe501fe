//! How Claude Code 2.1.332 cuts `MEMORY.md` when it loads it, step for step (read from the
//! client's bundle and observed with it): the text is trimmed; over 200 lines, the first 200
//! are kept; still over 25,000 characters, it is cut at the last newline at or before
//! character 25,000 (or at 25,000 when there is none). Characters are JavaScript's: UTF-16
//! code units, so a character outside the BMP counts two.

/// The client's limits.
pub const MAX_LINES: usize = 200;
pub const MAX_CHARS: usize = 25_000;

/// What the client loads of an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Load {
    /// Lines as the client counts them (of the trimmed text; 0 for an empty index).
    pub lines: usize,
    /// UTF-16 code units of the trimmed text.
    pub chars: usize,
    pub over_lines: bool,
    pub over_chars: bool,
    /// The cut, when there is one.
    pub cut: Option<Cut>,
}

/// Where the load stops, in the file's own terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cut {
    /// The first line (1-based, of the file) not loaded whole.
    pub first_line: usize,
    /// Loaded lines that come before it, whole.
    pub kept_lines: usize,
    /// The lines not loaded whole, from `first_line` on; for a first line cut inside itself,
    /// the part of it that is not loaded comes first.
    pub dropped: Vec<(usize, String)>,
}

/// JavaScript's `String.prototype.trim`: white space and line terminators, the BOM included,
/// U+0085 not.
fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{d}'
            | ' '
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
            | '\u{feff}'
    )
}

/// What the client loads of an index whose text is `text`.
pub(crate) fn load(text: &str) -> Load {
    let trimmed = text.trim_matches(is_js_space);
    let lead = &text[..text.len() - text.trim_start_matches(is_js_space).len()];
    let lead_lines = lead.matches('\n').count();
    let units: Vec<u16> = trimmed.encode_utf16().collect();
    let newline = u16::from(b'\n');
    let lines = if trimmed.is_empty() {
        0
    } else {
        units.iter().filter(|&&u| u == newline).count() + 1
    };
    let over_lines = lines > MAX_LINES;
    let over_chars = units.len() > MAX_CHARS;
    let mut load = Load {
        lines,
        chars: units.len(),
        over_lines,
        over_chars,
        cut: None,
    };
    if !over_lines && !over_chars {
        return load;
    }
    // The kept prefix, in UTF-16 units.
    let mut kept = if over_lines {
        units
            .iter()
            .enumerate()
            .filter(|(_, &u)| u == newline)
            .nth(MAX_LINES - 1)
            .map_or(units.len(), |(i, _)| i)
    } else {
        units.len()
    };
    if kept > MAX_CHARS {
        let search_end = MAX_CHARS.min(kept - 1);
        kept = match units[..=search_end].iter().rposition(|&u| u == newline) {
            Some(i) if i > 0 => i,
            _ => MAX_CHARS,
        };
    }
    let whole = units.get(kept) == Some(&newline);
    let kept_lines = if whole {
        units[..kept].iter().filter(|&&u| u == newline).count() + 1
    } else {
        0
    };
    let all: Vec<&str> = trimmed.split('\n').collect();
    let mut dropped: Vec<(usize, String)> = Vec::new();
    if whole {
        for (i, line) in all.iter().enumerate().skip(kept_lines) {
            dropped.push((lead_lines + i + 1, (*line).to_string()));
        }
    } else {
        // Cut inside the first line: the rest of it, then every other line.
        let first = all.first().copied().unwrap_or_default();
        let units_of_first: Vec<u16> = first.encode_utf16().collect();
        let rest = String::from_utf16_lossy(&units_of_first[kept.min(units_of_first.len())..]);
        dropped.push((lead_lines + 1, rest));
        for (i, line) in all.iter().enumerate().skip(1) {
            dropped.push((lead_lines + i + 1, (*line).to_string()));
        }
    }
    load.cut = Some(Cut {
        first_line: lead_lines + kept_lines + 1,
        kept_lines,
        dropped,
    });
    load
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_lines(n: usize, width: usize) -> String {
        (1..=n)
            .map(|i| {
                let head = format!("- [m{i}](m{i}.md) — ");
                let pad = width.saturating_sub(head.chars().count());
                format!("{head}{}\n", "x".repeat(pad))
            })
            .collect()
    }

    #[test]
    fn within_limits_nothing_is_cut() {
        let text = index_lines(200, 40);
        let load = load(&text);
        assert_eq!(load.lines, 200);
        assert_eq!(load.cut, None);
        assert_eq!(super::load("").lines, 0);
        assert_eq!(super::load("\n\n  \n").cut, None);
    }

    #[test]
    fn over_200_lines_the_client_keeps_the_first_200() {
        // The client's own words for this file: "60 of 260 lines were cut off, starting at
        // line 201".
        let load = load(&index_lines(260, 40));
        assert!(load.over_lines && !load.over_chars);
        let cut = load.cut.unwrap();
        assert_eq!(cut.first_line, 201);
        assert_eq!(cut.kept_lines, 200);
        assert_eq!(cut.dropped.len(), 60);
        assert!(cut.dropped[0].1.starts_with("- [m201](m201.md)"));
    }

    #[test]
    fn over_25000_characters_it_cuts_at_the_last_newline_before() {
        // SPEC 5: a 150-line, 31 KB index of 213-character lines loses line 118 on.
        let text = index_lines(150, 212);
        assert_eq!(text.len() - text.matches('—').count() * 2, 150 * 213);
        let load = load(&text);
        assert!(!load.over_lines && load.over_chars);
        let cut = load.cut.unwrap();
        assert_eq!(cut.first_line, 118);
        assert_eq!(cut.dropped.len(), 33);
        assert!(cut.dropped[0].1.starts_with("- [m118](m118.md)"));
    }

    #[test]
    fn characters_are_utf16_units_and_leading_blank_lines_keep_file_numbers() {
        // 12,501 emoji are 25,002 units: over, although 12,501 chars.
        let text = format!("\n\n{}\nsecond\n", "😀".repeat(12_501));
        let load = load(&text);
        assert_eq!(load.chars, 25_002 + "\nsecond".len());
        let cut = load.cut.unwrap();
        // No newline before unit 25,000: the first line itself is cut, at 25,000 units.
        assert_eq!(cut.kept_lines, 0);
        assert_eq!(cut.first_line, 3);
        assert_eq!(cut.dropped[0], (3, "😀".to_string()));
        assert_eq!(cut.dropped[1], (4, "second".to_string()));
    }
}
