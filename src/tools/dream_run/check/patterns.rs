//! The text patterns the check looks for: credentials, relative dates, repository paths.
//! Each is a small hand-written matcher, deliberately narrow: a false alarm in every run
//! would teach users to ignore the check.

use std::borrow::Cow;
use std::ops::Range;

/// A credential's known prefix and the key-shaped run that must follow it.
struct KeyShape {
    prefix: &'static str,
    what: &'static str,
    /// Characters of the run after the prefix.
    run: fn(u8) -> bool,
    min_run: usize,
    /// The run must mix letters and digits (real keys do; prose does not).
    mixed: bool,
}

fn key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn alnum_underscore(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn upper_alnum(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

fn slack_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// Longest prefixes first: `sk-ant-` is named as what it is, not as `sk-`.
const KEY_SHAPES: &[KeyShape] = &[
    KeyShape {
        prefix: "sk-ant-",
        what: "an Anthropic API key (sk-ant-)",
        run: key_char,
        min_run: 20,
        mixed: true,
    },
    KeyShape {
        prefix: "github_pat_",
        what: "a GitHub token (github_pat_)",
        run: alnum_underscore,
        min_run: 20,
        mixed: true,
    },
    KeyShape {
        prefix: "ghp_",
        what: "a GitHub token (ghp_)",
        run: alnum,
        min_run: 20,
        mixed: true,
    },
    KeyShape {
        prefix: "sk-",
        what: "an API key (sk-)",
        run: key_char,
        min_run: 20,
        mixed: true,
    },
    KeyShape {
        prefix: "AKIA",
        what: "an AWS access key id (AKIA)",
        run: upper_alnum,
        min_run: 16,
        mixed: false,
    },
    KeyShape {
        prefix: "xoxb-",
        what: "a Slack token (xox)",
        run: slack_char,
        min_run: 10,
        mixed: true,
    },
    KeyShape {
        prefix: "xoxp-",
        what: "a Slack token (xox)",
        run: slack_char,
        min_run: 10,
        mixed: true,
    },
    KeyShape {
        prefix: "xoxa-",
        what: "a Slack token (xox)",
        run: slack_char,
        min_run: 10,
        mixed: true,
    },
    KeyShape {
        prefix: "xoxs-",
        what: "a Slack token (xox)",
        run: slack_char,
        min_run: 10,
        mixed: true,
    },
    KeyShape {
        prefix: "xoxr-",
        what: "a Slack token (xox)",
        run: slack_char,
        min_run: 10,
        mixed: true,
    },
];

/// Every credential prefix [`may_hold_secrets`] looks for (the tests' reference).
#[cfg(test)]
pub(super) fn secret_prefixes() -> impl Iterator<Item = &'static str> {
    KEY_SHAPES.iter().map(|k| k.prefix).chain(["-----BEGIN "])
}

/// Whether `text` holds any credential prefix at all: one pass over a whole file for every
/// prefix at once, so the line-by-line [`secrets`] runs only where one might be.
pub(crate) fn may_hold_secrets(text: &str) -> bool {
    static PREFIXES: std::sync::LazyLock<aho_corasick::AhoCorasick> =
        std::sync::LazyLock::new(|| {
            let prefixes = KEY_SHAPES.iter().map(|k| k.prefix).chain(["-----BEGIN "]);
            // Leftmost-first: the kind the vectorised prefilter serves.
            aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(prefixes)
                .expect("fixed patterns build")
        });
    PREFIXES.is_match(text)
}

/// A credential found in a line: what it looks like and where it is (never its value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SecretMatch {
    pub what: &'static str,
    pub range: Range<usize>,
}

/// Every credential-shaped run in `line`: a known prefix at a token boundary (so "disk-" or
/// "task-" never match) followed by a long key-shaped run, or a PEM private key header.
pub(crate) fn secrets(line: &str) -> Vec<SecretMatch> {
    let bytes = line.as_bytes();
    let mut found: Vec<SecretMatch> = Vec::new();
    let taken = |found: &[SecretMatch], at: usize| found.iter().any(|m| m.range.contains(&at));
    for shape in KEY_SHAPES {
        let mut from = 0;
        while let Some(at) = memchr::memmem::find(&bytes[from..], shape.prefix.as_bytes()) {
            let start = from + at;
            from = start + 1;
            if taken(&found, start) {
                continue;
            }
            let boundary = start == 0 || !key_char(bytes[start - 1]);
            if !boundary {
                continue;
            }
            let run_start = start + shape.prefix.len();
            let run_len = bytes[run_start..]
                .iter()
                .take_while(|&&b| (shape.run)(b))
                .count();
            let run = &bytes[run_start..run_start + run_len];
            let mixed = !shape.mixed
                || (run.iter().any(u8::is_ascii_digit) && run.iter().any(u8::is_ascii_alphabetic));
            let ends = bytes.get(run_start + run_len).is_none_or(|&b| !alnum(b));
            if run_len >= shape.min_run && mixed && ends {
                found.push(SecretMatch {
                    what: shape.what,
                    range: start..run_start + run_len,
                });
                from = run_start + run_len;
            }
        }
    }
    if let Some(range) = pem_private_key_header(line) {
        found.push(SecretMatch {
            what: "a PEM private key",
            range,
        });
    }
    found.sort_by_key(|m| m.range.start);
    found
}

/// Where `line` opens a private key block: `-----BEGIN RSA PRIVATE KEY-----`,
/// `-----BEGIN PGP PRIVATE KEY BLOCK-----` (certificates and public keys are not secret).
pub(crate) fn pem_private_key_header(line: &str) -> Option<Range<usize>> {
    let begin = line.find("-----BEGIN ")?;
    let label = begin + "-----BEGIN ".len();
    let private = label + line[label..].find("PRIVATE KEY")?;
    let after = private + "PRIVATE KEY".len();
    let end = line[after..]
        .find("-----")
        .map_or(after, |at| after + at + "-----".len());
    Some(begin..end)
}

/// What a memory line that must not be echoed is shown as, whole.
pub(crate) const SECRET_LINE: &str = "[secret: line not shown]";

/// The lines of a text (split at `\n`, numbered from 0) that are never echoed: each line that
/// holds a credential, and every line of a private key block, from its BEGIN line to its END
/// line (to the end of the text when it has none): the base64 body matches no key shape, and
/// an AWS secret key beside its `AKIA` id matches none either, so the line goes whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SecretLines(Vec<usize>);

impl SecretLines {
    pub(crate) fn of(text: &str) -> SecretLines {
        let mut lines = Vec::new();
        if !may_hold_secrets(text) {
            return SecretLines(lines);
        }
        let mut in_block = false;
        for (at, line) in text.split('\n').enumerate() {
            if in_block {
                lines.push(at);
                in_block = !line.contains("-----END ");
            } else if let Some(header) = pem_private_key_header(line) {
                lines.push(at);
                in_block = !line[header.end..].contains("-----END ");
            } else if !secrets(line).is_empty() {
                lines.push(at);
            }
        }
        SecretLines(lines)
    }

    /// Whether line `at` (from 0) is one never echoed.
    pub(crate) fn contains(&self, at: usize) -> bool {
        self.0.binary_search(&at).is_ok()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `text` with every line [`SecretLines`] names replaced by [`SECRET_LINE`], whole: what is
/// echoed of memory text anywhere (a diff, a model's words quoting memory, a tool call).
pub(crate) fn redact_lines(text: &str) -> Cow<'_, str> {
    let secret = SecretLines::of(text);
    if secret.is_empty() {
        return Cow::Borrowed(text);
    }
    let lines: Vec<&str> = text
        .split('\n')
        .enumerate()
        .map(|(at, line)| {
            if secret.contains(at) {
                SECRET_LINE
            } else {
                line
            }
        })
        .collect();
    Cow::Owned(lines.join("\n"))
}

/// `text` with every credential replaced by `[secret]`: what the check prints of a line.
pub(super) fn mask_secrets(text: &str) -> Cow<'_, str> {
    let found = secrets(text);
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for m in found {
        if m.range.start < at {
            continue;
        }
        out.push_str(&text[at..m.range.start]);
        out.push_str("[secret]");
        at = m.range.end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// What a word can be in a relative date, as bits: a word may be several ("week" is a period
/// and a unit; "a" and "7" are counts).
mod role {
    /// "yesterday", "today", "tomorrow", "tonight": a relative date alone.
    pub(super) const ALONE: u8 = 1;
    /// "last", "next", "this", "coming", "past", "previous": one before a period or a day.
    pub(super) const MODIFIER: u8 = 2;
    /// "week", "monday", "sprint", ...: what a modifier makes relative.
    pub(super) const PERIOD: u8 = 4;
    /// "minute(s)" to "year(s)": what "ago" and "in" count.
    pub(super) const UNIT: u8 = 8;
    /// "a", "two", "few", "12", ...
    pub(super) const COUNT: u8 = 16;
    pub(super) const AGO: u8 = 32;
    pub(super) const IN: u8 = 64;
}

/// The roles of `word` (ASCII letters in any case; anything else has none, digits aside).
/// One `match` on the word folded to lower case: this runs for every word of every line.
fn roles(word: &str) -> u8 {
    use role::{AGO, ALONE, COUNT, IN, MODIFIER, PERIOD, UNIT};
    const LONGEST: usize = 9; // "yesterday", "wednesday", "afternoon"
    let bytes = word.as_bytes();
    if bytes.is_empty() {
        return 0;
    }
    if bytes.iter().all(u8::is_ascii_digit) {
        return COUNT;
    }
    if bytes.len() > LONGEST {
        return 0;
    }
    let mut lower = [0u8; LONGEST];
    for (to, from) in lower.iter_mut().zip(bytes) {
        *to = from.to_ascii_lowercase();
    }
    match &lower[..bytes.len()] {
        b"yesterday" | b"today" | b"tomorrow" | b"tonight" => ALONE,
        b"last" | b"next" | b"this" | b"coming" | b"past" | b"previous" => MODIFIER,
        b"monday" | b"tuesday" | b"wednesday" | b"thursday" | b"friday" | b"saturday"
        | b"sunday" | b"quarter" | b"weekend" | b"sprint" | b"night" | b"morning"
        | b"afternoon" | b"evening" => PERIOD,
        b"week" | b"month" | b"year" => PERIOD | UNIT,
        b"minute" | b"minutes" | b"hour" | b"hours" | b"day" | b"days" | b"weeks" | b"months"
        | b"years" => UNIT,
        b"a" | b"an" | b"one" | b"two" | b"three" | b"four" | b"five" | b"six" | b"seven"
        | b"eight" | b"nine" | b"ten" | b"few" | b"couple" | b"several" | b"some" => COUNT,
        b"ago" => AGO,
        b"in" => IN,
        _ => 0,
    }
}

/// The first date in `prose` that only means something on the day it was written
/// ("yesterday", "last week", "next Monday", "2 days ago", "in 3 weeks"), as written.
///
/// One pass over the words, each looked at with the two before it: every phrase is found at
/// its last word. No two phrases can end at the same word (their last words' roles differ),
/// and none ends inside another's span, so this is the first phrase in reading order.
pub(crate) fn relative_date(prose: &str) -> Option<String> {
    // Most lines hold no word a phrase can end with: one automaton pass rules them out.
    if !DatePieces::of(prose).in_line(prose) {
        return None;
    }
    relative_date_in_words(prose)
}

/// Which lines of a file may hold a relative date: one pass over the whole file for the
/// pieces of [`PHRASE_ENDS`], asked line by line, in order. A line without a piece holds no
/// phrase, however its code spans and quotes are blanked (blanking only takes pieces away,
/// and no piece spans a line break).
pub(super) struct DatePieces<'a> {
    text: &'a str,
    /// Where each piece found starts, in order. A piece overlapping one found is not found
    /// again: it is on the same line.
    starts: Vec<usize>,
    next: usize,
}

impl<'a> DatePieces<'a> {
    pub(super) fn of(text: &'a str) -> DatePieces<'a> {
        // The pieces in lower case, searched in the text in lower case: a case-blind search
        // cannot use the automaton's vectorised prefilter, this one can. ASCII case folding
        // keeps every byte where it is.
        let lower = text.as_bytes().to_ascii_lowercase();
        DatePieces {
            text,
            starts: PHRASE_ENDS.find_iter(&lower).map(|m| m.start()).collect(),
            next: 0,
        }
    }

    /// Whether `line`, a slice of the text and after every line asked before, holds a piece.
    pub(super) fn in_line(&mut self, line: &str) -> bool {
        let start = (line.as_ptr() as usize).wrapping_sub(self.text.as_ptr() as usize);
        let end = start.saturating_add(line.len());
        while self.starts.get(self.next).is_some_and(|&at| at < start) {
            self.next += 1;
        }
        self.starts.get(self.next).is_some_and(|&at| at < end)
    }
}

/// What every relative date contains (ASCII, in lower case): a piece of each `ALONE`,
/// `PERIOD` and `UNIT` word of [`roles`] (a phrase ending in "ago" has a unit before it). A
/// line with none of them holds no phrase.
static PHRASE_ENDS: std::sync::LazyLock<aho_corasick::AhoCorasick> =
    std::sync::LazyLock::new(|| {
        // Leftmost-first: the kind the vectorised prefilter serves. A piece that starts inside
        // one found is not found, but it is on the same line.
        aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .build([
                "day",
                "tomorrow",
                "night",
                "quarter",
                "week",
                "sprint",
                "morning",
                "afternoon",
                "evening",
                "month",
                "year",
                "minute",
                "hour",
            ])
            .expect("fixed patterns build")
    });

/// [`relative_date`] without its prefilter: the word-by-word pass.
pub(crate) fn relative_date_in_words(prose: &str) -> Option<String> {
    use role::{AGO, ALONE, COUNT, IN, MODIFIER, PERIOD, UNIT};
    // The two words before this one: (start, roles); roles 0 where there is none.
    let (mut before, mut last) = ((0usize, 0u8), (0usize, 0u8));
    let mut found = None;
    each_word(prose, |word| {
        let roles = roles(&prose[word.clone()]);
        let start = if roles & UNIT != 0 && last.1 & COUNT != 0 && before.1 & IN != 0 {
            Some(before.0)
        } else if roles & AGO != 0 && last.1 & UNIT != 0 {
            Some(if before.1 & COUNT != 0 {
                before.0
            } else {
                last.0
            })
        } else if roles & PERIOD != 0 && last.1 & MODIFIER != 0 {
            Some(last.0)
        } else if roles & ALONE != 0 {
            Some(word.start)
        } else {
            None
        };
        if let Some(start) = start {
            found = Some(prose[start..word.end].to_string());
            return Flow::Stop;
        }
        (before, last) = (last, (word.start, roles));
        Flow::Go
    });
    found
}

/// `prose` with every quoted run blanked out (same length in bytes): `"..."`, `'...'`,
/// `“...”`, `‘...’` (code spans are blanked already). A quote is a quote, not a date the memory
/// states. A quote opens where a word may start and closes where one may end, so the
/// apostrophes of "don't" and "it's" open and close nothing.
pub(crate) fn unquoted(prose: &str) -> Cow<'_, str> {
    /// Each quote's opening and closing character.
    const PAIRS: [(char, char); 4] = [('"', '"'), ('\'', '\''), ('“', '”'), ('‘', '’')];
    // '“' and '‘' both start with the byte 0xE2: a byte search rules most lines out.
    if memchr::memchr3(b'"', b'\'', 0xE2, prose.as_bytes()).is_none() {
        return Cow::Borrowed(prose);
    }
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let chars: Vec<(usize, char)> = prose.char_indices().collect();
    let before = |i: usize| i.checked_sub(1).map(|j| chars[j].1);
    let after = |i: usize| chars.get(i + 1).map(|&(_, c)| c);
    // Where each pair may open and close (indexes into `chars`), found in one pass: then
    // each opening finds its close by a search, never by a scan (a line of unclosed quotes
    // stays linear).
    let mut opens: [Vec<usize>; 4] = Default::default();
    let mut closes: [Vec<usize>; 4] = Default::default();
    for (i, &(_, c)) in chars.iter().enumerate() {
        for (pair, &(open, close)) in PAIRS.iter().enumerate() {
            if c == open && !word(before(i)) && word(after(i)) {
                opens[pair].push(i);
            }
            if c == close && !word(after(i)) {
                closes[pair].push(i);
            }
        }
    }
    let mut blank: Vec<Range<usize>> = Vec::new();
    // Chars before this one are inside a quote already blanked.
    let mut done = 0usize;
    let mut candidates: Vec<(usize, usize)> = opens
        .iter()
        .enumerate()
        .flat_map(|(pair, at)| at.iter().map(move |&i| (i, pair)))
        .collect();
    candidates.sort_unstable();
    for (open, pair) in candidates {
        if open < done {
            continue;
        }
        let list = &closes[pair];
        let next = list.partition_point(|&i| i <= open);
        let Some(&close) = list.get(next) else {
            continue;
        };
        let end = chars[close].0 + chars[close].1.len_utf8();
        blank.push(chars[open].0..end);
        done = close + 1;
    }
    if blank.is_empty() {
        return Cow::Borrowed(prose);
    }
    let mut out = prose.to_string();
    for range in blank {
        out.replace_range(range.clone(), &" ".repeat(range.len()));
    }
    Cow::Owned(out)
}

/// Whether [`each_word`] goes on.
#[derive(PartialEq, Eq)]
enum Flow {
    Go,
    Stop,
}

/// The byte range of each word of `text` (a run of letters and digits), in order, until
/// `visit` says stop. Nothing is collected: this runs for every line of every memory file.
fn each_word(text: &str, visit: impl FnMut(Range<usize>) -> Flow) {
    // Most memory text is ASCII: one byte a character, no Unicode tables.
    if text.is_ascii() {
        let bytes = text.bytes().enumerate();
        each_run(
            bytes.map(|(i, b)| (i, b.is_ascii_alphanumeric())),
            text.len(),
            visit,
        );
    } else {
        let chars = text.char_indices();
        each_run(
            chars.map(|(i, c)| (i, c.is_alphanumeric())),
            text.len(),
            visit,
        );
    }
}

/// The ranges of the runs of `true` in `(offset, is_word)`, the last one ending at `end`.
fn each_run(
    items: impl Iterator<Item = (usize, bool)>,
    end: usize,
    mut visit: impl FnMut(Range<usize>) -> Flow,
) {
    let mut start = None;
    for (i, is_word) in items {
        match (is_word, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if visit(s..i) == Flow::Stop {
                    return;
                }
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        visit(s..end);
    }
}

/// File extensions that make a word a file name.
const EXTENSIONS: &[&str] = &[
    "rs", "toml", "md", "json", "jsonl", "yaml", "yml", "js", "mjs", "cjs", "ts", "tsx", "jsx",
    "py", "go", "c", "h", "cc", "cpp", "hpp", "java", "kt", "kts", "rb", "sh", "bash", "zsh",
    "fish", "lock", "txt", "html", "htm", "css", "scss", "sass", "less", "sql", "proto", "mk",
    "cfg", "ini", "xml", "swift", "cs", "php", "lua", "vue", "svelte", "dart", "ex", "exs", "erl",
    "hs", "ml", "scala", "clj", "gradle", "tf", "hcl", "nix", "cmake", "jl", "pl", "csv", "env",
    "conf",
];

/// File names that are files without an extension.
const PLAIN_NAMES: &[&str] = &[
    "Makefile",
    "GNUmakefile",
    "Dockerfile",
    "Justfile",
    "justfile",
    "Rakefile",
    "Gemfile",
    "Procfile",
    "Vagrantfile",
    "Jenkinsfile",
    "LICENSE",
    "CODEOWNERS",
];

/// How a word came to look like a path, which decides how much evidence it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PathShape {
    /// `dir/file.ext` or `dir/sub`: checked when it has a known extension or its first
    /// segment exists (so "and/or" or "origin/main" are not paths).
    Nested,
    /// `file.ext` or `Makefile`, in a code span only: looked for anywhere in the project.
    Bare,
}

/// `word` as a repository path, if it looks like one: the path (a trailing `:12`, `:12:3` or
/// `#L12` and `./` dropped) and its shape. `in_code_span` allows bare file names.
pub(super) fn path_candidate(word: &str, in_code_span: bool) -> Option<(String, PathShape)> {
    let wrapper = |c: char| {
        matches!(
            c,
            '(' | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '<'
                | '>'
                | ','
                | ';'
                | '!'
                | '?'
                | '"'
                | '\''
                | '*'
                | '“'
                | '”'
                | '‘'
                | '’'
        )
    };
    let word = word
        .trim_start_matches(wrapper)
        .trim_end_matches(|c: char| wrapper(c) || c == '.' || c == ':');
    let word = strip_location(word);
    let word = word.strip_prefix("./").unwrap_or(word);
    if word.is_empty()
        || word.contains("://")
        || word.starts_with(['/', '~', '$', '@', '-', '.'])
        || word.contains("..")
        || !word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/' | b'+'))
    {
        return None;
    }
    if word.contains('/') {
        return Some((word.to_string(), PathShape::Nested));
    }
    if in_code_span && (has_known_extension(word) || PLAIN_NAMES.contains(&word)) {
        return Some((word.to_string(), PathShape::Bare));
    }
    None
}

/// Whether a nested path has a known extension (then it is a path even when its first
/// folder does not exist).
pub(super) fn has_known_extension(path: &str) -> bool {
    let last = path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path);
    last.rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext))
}

/// `src/a.rs:12`, `src/a.rs:12:3`, `src/a.rs#L12` -> `src/a.rs`.
fn strip_location(word: &str) -> &str {
    let word = match word.rsplit_once("#L") {
        Some((path, line)) if !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) => path,
        _ => word,
    };
    let mut word = word;
    for _ in 0..2 {
        match word.rsplit_once(':') {
            Some((path, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                word = path;
            }
            _ => break,
        }
    }
    word
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whats(line: &str) -> Vec<&'static str> {
        secrets(line).into_iter().map(|m| m.what).collect()
    }

    #[test]
    fn credentials_are_found_at_token_boundaries_only() {
        assert_eq!(
            whats("key: sk-ant-api03-AbCdEf0123456789xyzXYZ-_q"),
            ["an Anthropic API key (sk-ant-)"]
        );
        assert_eq!(
            whats("OPENAI=sk-proj-9aZ8bY7cX6dW5eV4fU3g"),
            ["an API key (sk-)"]
        );
        assert_eq!(
            whats("ghp_0123456789abcdefABCDEF0123456789abcd"),
            ["a GitHub token (ghp_)"]
        );
        assert_eq!(
            whats("github_pat_11ABCDEFG0123456789_abcdefghijKLMNOP"),
            ["a GitHub token (github_pat_)"]
        );
        assert_eq!(
            whats("AKIAIOSFODNN7EXAMPLE"),
            ["an AWS access key id (AKIA)"]
        );
        assert_eq!(
            whats("slack xoxb-1234567890-abcdefghij"),
            ["a Slack token (xox)"]
        );
        assert_eq!(
            whats("-----BEGIN OPENSSH PRIVATE KEY-----"),
            ["a PEM private key"]
        );
        // Words that merely contain a prefix, short runs, prose runs, certificates.
        for clean in [
            "the disk-0123456789abcdefghijklmnop is full",
            "task-20261203T101010Z-0123456789abcdef done",
            "ask-sk-x",
            "sk-short1",
            "sk-this-is-a-long-prose-run-without-digits",
            "AKIAFOO",
            "xAKIAIOSFODNN7EXAMPLE",
            "-----BEGIN CERTIFICATE-----",
            "risk-assessment-2026-for-the-q4-release",
        ] {
            assert!(whats(clean).is_empty(), "{clean}");
        }
    }

    #[test]
    fn lines_with_a_secret_and_whole_key_blocks_go_whole() {
        let text = "# Env\n\
                    aws AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n\
                    deploy key:\n\
                    -----BEGIN RSA PRIVATE KEY-----\n\
                    MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n\
                    VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n\
                    -----END RSA PRIVATE KEY-----\n\
                    after the block\n\
                    -----BEGIN PGP PRIVATE KEY BLOCK-----\n\
                    lQOYBF0\n\
                    never ended";
        let s = SECRET_LINE;
        assert_eq!(
            redact_lines(text),
            format!("# Env\n{s}\ndeploy key:\n{s}\n{s}\n{s}\n{s}\nafter the block\n{s}\n{s}\n{s}")
        );
        assert_eq!(
            SecretLines::of("a\n-----BEGIN EC PRIVATE KEY----- x -----END EC PRIVATE KEY-----\nb"),
            SecretLines(vec![1])
        );
        let plain = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----";
        assert!(matches!(redact_lines(plain), Cow::Borrowed(_)));
    }

    #[test]
    fn masking_hides_the_value_and_keeps_the_rest() {
        assert_eq!(
            mask_secrets("use sk-ant-api03-AbCdEf0123456789xyzXYZ now"),
            "use [secret] now"
        );
        assert_eq!(mask_secrets("nothing here"), "nothing here");
    }

    #[test]
    fn relative_dates_are_found_as_written() {
        for (line, phrase) in [
            ("Fixed yesterday.", "yesterday"),
            ("- Deployed Today to prod", "Today"),
            ("moved last week", "last week"),
            ("ship it next Monday", "next Monday"),
            ("broke 2 days ago", "2 days ago"),
            ("a few weeks ago we", "few weeks ago"),
            ("due in 3 weeks", "in 3 weeks"),
            ("this morning the build", "this morning"),
            ("TONIGHT", "TONIGHT"),
            ("since Last Wednesday", "Last Wednesday"),
            ("the coming weekend", "coming weekend"),
            ("12 hours ago", "12 hours ago"),
            ("an hour ago", "an hour ago"),
            ("months ago", "months ago"),
            ("in a year", "in a year"),
            ("done in 10 minutes", "in 10 minutes"),
            ("past quarter: the week after next sprint", "past quarter"),
        ] {
            assert_eq!(relative_date(line).as_deref(), Some(phrase), "{line}");
        }
        for clean in [
            "On 2026-12-01 we moved the lock",
            "the last step of the week-long plan",
            "next steps: none",
            "a day of work",
            "holidays",
            "in the years after",
            "yesterdays",
            "ago",
            "next-generation 12345678901 ago",
            "this todayish plan",
            "última semana",
        ] {
            assert_eq!(relative_date(clean), None, "{clean}");
        }
    }

    #[test]
    fn quoted_text_holds_no_relative_date() {
        for quoted in [
            "the user said \"ship it tomorrow\" at the review",
            "the bot replies 'done yesterday' to every ping",
            "the label reads “last week” on the chart",
            "the doc's ‘next Monday’ is a placeholder",
        ] {
            let prose = unquoted(quoted);
            assert_eq!(prose.len(), quoted.len());
            assert_eq!(relative_date(&prose), None, "{quoted}");
        }
        for unquoted_date in [
            "don't deploy today, it's frozen",
            "moved last week; the \"freeze\" holds",
            "a \"quote never closed yesterday",
            "rock'n'roll yesterday",
        ] {
            assert!(
                relative_date(&unquoted(unquoted_date)).is_some(),
                "{unquoted_date}"
            );
        }
    }

    #[test]
    fn path_candidates() {
        let c = |w: &str, code: bool| path_candidate(w, code);
        assert_eq!(
            c("src/foo.rs", false),
            Some(("src/foo.rs".into(), PathShape::Nested))
        );
        assert_eq!(
            c("(src/foo.rs:12).", false),
            Some(("src/foo.rs".into(), PathShape::Nested))
        );
        assert_eq!(
            c("./src/a.rs#L3", true),
            Some(("src/a.rs".into(), PathShape::Nested))
        );
        assert_eq!(
            c("Makefile", true),
            Some(("Makefile".into(), PathShape::Bare))
        );
        assert_eq!(
            c("Cargo.toml", true),
            Some(("Cargo.toml".into(), PathShape::Bare))
        );
        assert_eq!(c("Makefile", false), None);
        assert_eq!(c("Cargo.toml", false), None);
        for not_a_path in [
            "https://example.org/a.rs",
            "/etc/hosts",
            "~/x.rs",
            "../up.rs",
            "@scope/pkg",
            "--flag",
            "foo()",
            "std::fs",
            "e.g.",
            "v1.2.3",
            "",
        ] {
            assert_eq!(c(not_a_path, true), None, "{not_a_path}");
        }
        assert!(has_known_extension("src/foo.rs"));
        assert!(!has_known_extension("and/or"));
    }
}
