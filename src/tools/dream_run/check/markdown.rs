//! Just enough Markdown for the check: which lines are code, which parts of a line are code
//! spans, and where the links point. No rendering; a construct this does not know is text.

use std::borrow::Cow;
use std::ops::Range;

/// One line of a memory file, with what surrounds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line<'a> {
    /// 1-based, as editors count.
    pub number: usize,
    pub text: &'a str,
    /// Inside a fenced code block (the fence lines included).
    pub code: bool,
    /// Inside the `---` front matter Claude Code's topic files start with.
    pub front_matter: bool,
}

/// The lines of `text` (`\n`-separated; a `\r` before it is not part of the line).
pub(crate) fn lines(text: &str) -> Vec<Line<'_>> {
    // Sized once: a file's lines are many, and grown one by one they would be copied often.
    let mut out = Vec::with_capacity(memchr::memchr_iter(b'\n', text.as_bytes()).count() + 1);
    let mut fence: Option<(u8, usize)> = None;
    let mut front_matter = false;
    // Split at each `\n` by a vectorised search (a line is short: a search per line set up
    // by `str::split` costs more than the line).
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', text.as_bytes()).chain([text.len()]);
    for (i, end) in ends.enumerate() {
        // At a `\n` or the end: always a character boundary.
        let raw = text.get(start..end).unwrap_or_default();
        start = end + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if i == 0 && line == "---" {
            front_matter = true;
            out.push(Line {
                number: 1,
                text: line,
                code: false,
                front_matter: true,
            });
            continue;
        }
        if front_matter {
            out.push(Line {
                number: i + 1,
                text: line,
                code: false,
                front_matter: true,
            });
            if line == "---" || line == "..." {
                front_matter = false;
            }
            continue;
        }
        let marker = fence_marker(line);
        let code = match (fence, marker) {
            (None, Some(open)) => {
                fence = Some(open);
                true
            }
            (Some((ch, len)), Some((c, l))) if c == ch && l >= len && is_bare_fence(line) => {
                fence = None;
                true
            }
            (Some(_), _) => true,
            (None, None) => false,
        };
        out.push(Line {
            number: i + 1,
            text: line,
            code,
            front_matter: false,
        });
    }
    // A trailing newline ends the last line; it does not start an empty one.
    if text.ends_with('\n') {
        out.pop();
    }
    out
}

/// ```` ``` ```` or `~~~` (three or more), indented at most three spaces: (char, run length).
fn fence_marker(line: &str) -> Option<(u8, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line.as_bytes()[indent..];
    let ch = *rest.first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let run = rest.iter().take_while(|&&b| b == ch).count();
    (run >= 3).then_some((ch, run))
}

/// A closing fence has nothing after its run.
fn is_bare_fence(line: &str) -> bool {
    let t = line.trim();
    let ch = t.as_bytes().first().copied();
    t.bytes().all(|b| Some(b) == ch)
}

/// The byte ranges of `line` that are code spans (`` `like this` ``), backticks included.
/// An opening run with no closing run of the same length is plain text.
pub(crate) fn code_spans(line: &str) -> Vec<Range<usize>> {
    let bytes = line.as_bytes();
    let mut spans = Vec::new();
    if memchr::memchr(b'`', bytes).is_none() {
        return spans;
    }
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i] == b'`' {
            i += 1;
        }
        let run = i - start;
        // Find the next run of exactly `run` backticks.
        let mut j = i;
        let mut closed = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let s = j;
                while j < bytes.len() && bytes[j] == b'`' {
                    j += 1;
                }
                if j - s == run {
                    closed = Some(j);
                    break;
                }
            } else {
                j += 1;
            }
        }
        match closed {
            Some(end) => {
                spans.push(start..end);
                i = end;
            }
            None => i = start + run,
        }
    }
    spans
}

/// The text inside each code span, without the backticks and the one space padding.
pub(super) fn code_span_texts<'a>(line: &'a str, spans: &[Range<usize>]) -> Vec<&'a str> {
    spans
        .iter()
        .map(|r| {
            let inner = line[r.clone()].trim_matches('`');
            inner
                .strip_prefix(' ')
                .and_then(|s| s.strip_suffix(' '))
                .unwrap_or(inner)
        })
        .collect()
}

/// `line` with every code span blanked out (same length, so byte offsets still match).
pub(crate) fn prose<'a>(line: &'a str, spans: &[Range<usize>]) -> Cow<'a, str> {
    if spans.is_empty() {
        return Cow::Borrowed(line);
    }
    let mut out = line.to_string();
    for r in spans {
        out.replace_range(r.clone(), &" ".repeat(r.len()));
    }
    Cow::Owned(out)
}

/// A link in a line: where its target is (a byte range of the line) and the target text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Link {
    pub target: String,
    pub range: Range<usize>,
}

/// Inline links and images (`[text](target "title")`, `[text](<tar get>)`) and reference
/// definitions (`[label]: target`) in `prose` (code spans already blanked).
pub(crate) fn links(prose: &str) -> Vec<Link> {
    let mut out = Vec::new();
    if let Some(link) = reference_definition(prose) {
        out.push(link);
        return out;
    }
    let bytes = prose.as_bytes();
    let mut from = 0;
    while let Some(at) = memchr::memchr(b']', &bytes[from..]) {
        let close = from + at;
        from = close + 1;
        if bytes.get(close + 1) != Some(&b'(') {
            continue;
        }
        let open = close + 2;
        from = open;
        let (target, end) = if bytes.get(open) == Some(&b'<') {
            match memchr::memchr(b'>', &bytes[open + 1..]) {
                Some(close) => (&prose[open + 1..open + 1 + close], open + 1 + close + 1),
                None => continue,
            }
        } else {
            let mut depth = 0usize;
            let mut end = open;
            while end < bytes.len() {
                match bytes[end] {
                    b'(' => depth += 1,
                    b')' if depth == 0 => break,
                    b')' => depth -= 1,
                    b' ' | b'\t' => break,
                    _ => {}
                }
                end += 1;
            }
            (&prose[open..end], end)
        };
        if !target.is_empty() {
            out.push(Link {
                target: target.to_string(),
                range: open..end,
            });
        }
        from = end.max(open);
    }
    out
}

/// `[label]: target` at the start of a line (indented at most three spaces).
fn reference_definition(line: &str) -> Option<Link> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = line[indent..].strip_prefix('[')?;
    let close = rest.find("]:")?;
    if close == 0 || rest[..close].contains('[') {
        return None;
    }
    let after = &rest[close + 2..];
    let target_start = line.len() - after.trim_start().len();
    let target = after.split_whitespace().next()?;
    let target = target
        .strip_prefix('<')
        .and_then(|t| t.strip_suffix('>'))
        .unwrap_or(target);
    Some(Link {
        target: target.to_string(),
        range: target_start..target_start + target.len(),
    })
}

/// The folded text, a character at a time: letters and digits in lower case, every run of
/// anything else one space between them, none at either end.
fn fold(text: &str, mut emit: impl FnMut(char)) {
    let mut started = false;
    let mut gap = false;
    if text.is_ascii() {
        // Most memory text: one byte a character, no Unicode tables.
        for byte in text.bytes() {
            if !byte.is_ascii_alphanumeric() {
                gap = true;
                continue;
            }
            if gap && started {
                emit(' ');
            }
            (gap, started) = (false, true);
            emit(char::from(byte.to_ascii_lowercase()));
        }
        return;
    }
    for c in text.chars() {
        if !c.is_alphanumeric() {
            gap = true;
            continue;
        }
        if gap && started {
            emit(' ');
        }
        (gap, started) = (false, true);
        c.to_lowercase().for_each(&mut emit);
    }
}

/// A hash of [`normalized`] `text` without building it, or `None` when the folded text is
/// shorter than `min_chars` characters.
pub(super) fn folded_hash(text: &str, min_chars: usize) -> Option<u64> {
    let (hash, chars) = if text.is_ascii() {
        ascii_folded_hash(text.as_bytes())
    } else {
        let mut hash = WordHash::default();
        let mut chars = 0usize;
        fold(text, |c| {
            let mut buf = [0u8; 4];
            for &byte in c.encode_utf8(&mut buf).as_bytes() {
                hash.push(byte);
            }
            chars += 1;
        });
        (hash, chars)
    };
    (chars >= min_chars).then(|| hash.finish())
}

/// [`folded_hash`] of ASCII text (a byte a character, folded by a table, nothing decoded),
/// and how many characters its fold has. A function of its own: its hash state stays in
/// registers.
fn ascii_folded_hash(bytes: &[u8]) -> (WordHash, usize) {
    let mut hash = WordHash::default();
    let mut started = false;
    let mut space = false;
    for &byte in bytes {
        let folded = ASCII_FOLD[usize::from(byte & 0x7f)];
        if folded == 0 {
            space = started;
            continue;
        }
        if space {
            hash.push(b' ');
            space = false;
        }
        started = true;
        hash.push(folded);
    }
    let chars = hash.len();
    (hash, chars)
}

/// Each ASCII byte as [`fold`] keeps it: a letter in lower case, a digit; 0 for the rest.
static ASCII_FOLD: [u8; 128] = {
    let mut table = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        let byte = b as u8;
        if byte.is_ascii_alphanumeric() {
            table[b] = byte.to_ascii_lowercase();
        }
        b += 1;
    }
    table
};

/// A hash of a byte stream, eight bytes to a multiply: the folded text's UTF-8, a line at a
/// time, for every line of every topic file. A hit is compared in full, so the hash's
/// quality only decides how often that happens.
#[derive(Default)]
struct WordHash {
    hash: u64,
    /// The bytes not mixed in yet, the first lowest.
    word: u64,
    /// Where the next byte goes in `word`, in bits.
    shift: u32,
    /// Bytes mixed in.
    mixed: usize,
}

impl WordHash {
    const K: u64 = 0x517c_c1b7_2722_0a95;

    #[inline]
    fn push(&mut self, byte: u8) {
        self.word |= u64::from(byte) << self.shift;
        self.shift += 8;
        if self.shift == 64 {
            self.mix();
        }
    }

    #[inline]
    fn mix(&mut self) {
        self.hash = (self.hash.rotate_left(5) ^ self.word).wrapping_mul(Self::K);
        self.mixed += (self.shift / 8) as usize;
        (self.word, self.shift) = (0, 0);
    }

    /// Bytes pushed.
    fn len(&self) -> usize {
        self.mixed + (self.shift / 8) as usize
    }

    fn finish(mut self) -> u64 {
        if self.shift > 0 {
            self.mix();
        }
        // The length, then a final avalanche (murmur3's): the last word's few bytes reach
        // every bit.
        let mut h = self.hash ^ self.mixed as u64;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// Text folded for comparing entries: lower case, every run of punctuation and whitespace
/// one space, trimmed.
pub(crate) fn normalized(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    fold(text, |c| out.push(c));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_and_front_matter_are_marked() {
        let text = "---\nname: x\n---\n# T\n```sh\nls\n```\nafter\n~~~~\n```\nstill\n~~~~\nend\n";
        let marks: Vec<(usize, bool, bool)> = lines(text)
            .iter()
            .map(|l| (l.number, l.code, l.front_matter))
            .collect();
        assert_eq!(
            marks,
            [
                (1, false, true),
                (2, false, true),
                (3, false, true),
                (4, false, false),
                (5, true, false),
                (6, true, false),
                (7, true, false),
                (8, false, false),
                (9, true, false),
                (10, true, false),
                (11, true, false),
                (12, true, false),
                (13, false, false),
            ]
        );
    }

    #[test]
    fn crlf_lines_lose_their_cr() {
        let l = lines("a\r\nb");
        assert_eq!(l[0].text, "a");
        assert_eq!(l[1].text, "b");
    }

    #[test]
    fn code_spans_pair_runs_of_the_same_length() {
        let line = "a `b` c ``d ` e`` f `g";
        let spans = code_spans(line);
        assert_eq!(code_span_texts(line, &spans), ["b", "d ` e"]);
        assert_eq!(prose(line, &spans), "a     c           f `g");
    }

    #[test]
    fn links_inline_angle_and_reference() {
        let targets = |l: &str| -> Vec<String> { links(l).into_iter().map(|k| k.target).collect() };
        assert_eq!(
            targets("- [Tests](testing.md) — how, and [x](<a b.md>) ![img](p.png \"t\")"),
            ["testing.md", "a b.md", "p.png"]
        );
        assert_eq!(
            targets("[w](https://e.org/a_(b)) end"),
            ["https://e.org/a_(b)"]
        );
        assert_eq!(targets("  [ref]: notes/x.md \"title\""), ["notes/x.md"]);
        assert_eq!(targets("no link [here] (x.md)"), Vec::<String>::new());
    }

    #[test]
    fn the_folded_hash_is_the_hash_of_the_folded_text() {
        let a = folded_hash("- Use  **cargo-nextest**, always!", 5);
        assert_eq!(a, folded_hash("use cargo nextest ... ALWAYS", 5));
        assert_ne!(a, folded_hash("use cargo test always", 5));
        assert_eq!(folded_hash("ab cd", 6), None);
        assert!(folded_hash("ab cd", 5).is_some());
        // ASCII and Unicode text take one fold: the hash of a text is the hash of its fold.
        for text in [
            "Grüße, STRASSE — Ünïcode!",
            "  plain ASCII, text.  ",
            "Ǆemal",
        ] {
            assert_eq!(
                folded_hash(text, 0),
                folded_hash(&normalized(text), 0),
                "{text}"
            );
            assert!(!normalized(text).starts_with(' ') && !normalized(text).ends_with(' '));
        }
        assert_eq!(normalized("Grüße, STRASSE"), "grüße strasse");
    }

    #[test]
    fn normalised_text_folds_case_punctuation_and_space() {
        assert_eq!(
            normalized("- Use  **cargo-nextest**, always!"),
            "use cargo nextest always"
        );
        assert_eq!(
            normalized("use cargo nextest ... ALWAYS"),
            "use cargo nextest always"
        );
    }
}
