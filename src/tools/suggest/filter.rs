//! Cleanup and the filters a candidate suggestion must pass (SPEC §8), in one place: pure
//! functions, no I/O, shared by generation and `suggest check`.

/// Most words a suggestion may have.
pub const MAX_WORDS: usize = 12;
/// A suggestion must be shorter than this many characters.
pub const MAX_CHARS: usize = 100;

/// The one-word replies a person naturally types (a `/command` is allowed too).
pub const ALLOWED_SHORT_WORDS: &[&str] = &[
    "yes", "yeah", "yep", "yea", "yup", "sure", "ok", "okay", "push", "commit", "deploy", "stop",
    "continue", "check", "exit", "quit", "no",
];

/// Praise and thanks: what the user might say, but never worth suggesting.
const EVALUATIVE: &[&str] = &[
    "thanks",
    "thank you",
    "looks good",
    "sounds good",
    "that works",
    "that worked",
    "that's all",
    "nice",
    "great",
    "perfect",
    "makes sense",
    "awesome",
    "excellent",
];

/// Openings in the assistant's voice rather than the user's. `sure,` keeps its comma, so a
/// bare `sure` (a fine reply) stays allowed.
const CLAUDE_VOICE: &[&str] = &[
    "let me",
    "i'll",
    "i've",
    "i'm",
    "i can",
    "i would",
    "i think",
    "i notice",
    "here's",
    "here is",
    "here are",
    "that's",
    "this is",
    "this will",
    "you can",
    "you should",
    "you could",
    "sure,",
    "of course",
    "certainly",
];

/// The model saying it has nothing to say.
const META_PREFIXES: &[&str] = &[
    "nothing to suggest",
    "nothing found",
    "no suggestion",
    "no next prompt",
    "no prompt",
];
const META_ANYWHERE: &[&str] = &[
    "stay silent",
    "stays silent",
    "staying silent",
    "remain silent",
    "remaining silent",
    "silence is",
];
const META_WHOLE: &[&str] = &["silence", "none", "nothing", "null", "n/a", "empty"];

/// Error texts that leak into a reply (Claude Code's API error messages).
const ERROR_PREFIXES: &[&str] = &[
    "api error:",
    "prompt is too long",
    "request timed out",
    "invalid api key",
    "image was too large",
];

/// Labels a model puts before its answer; stripped by cleanup (any other `word: ` is
/// rejected as `prefixed_label`).
const LABELS: &[&str] = &[
    "suggestion",
    "suggested prompt",
    "suggested next prompt",
    "suggested reply",
    "next prompt",
    "prompt",
    "user",
];

/// Every rejection reason, in the order the filters run.
pub const REASONS: &[&str] = &[
    "empty",
    "done",
    "meta_text",
    "meta_wrapped",
    "error_message",
    "prefixed_label",
    "too_few_words",
    "too_many_words",
    "too_long",
    "multiple_sentences",
    "has_formatting",
    "evaluative",
    "claude_voice",
];

/// Why a candidate was rejected: the reason (one of [`REASONS`]) and a human detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: &'static str,
    pub detail: String,
}

/// The candidate as a person would read it: control characters (C0 and C1 but newline and
/// tab: an ESC could retitle or clear the terminal that shows it), surrounding blanks,
/// wrappers such as `<suggestion>...</suggestion>`, wrapping quotes and labels such as
/// `Suggestion:` removed, repeatedly (`Suggestion: "run it"` -> `run it`). Inner text is
/// left alone.
pub fn clean(text: &str) -> String {
    let printable = crate::cli::text::sanitize(text);
    let mut text = printable.trim();
    loop {
        let before = text;
        text = strip_tag(text).trim();
        text = strip_label(text).trim();
        text = strip_quotes(text).trim();
        if text == before {
            return text.to_string();
        }
    }
}

/// `<tag>inner</tag>` -> `inner` (any tag name of letters, digits, `_` and `-`).
fn strip_tag(text: &str) -> &str {
    let Some(rest) = text.strip_prefix('<') else {
        return text;
    };
    let Some(close) = rest.find('>') else {
        return text;
    };
    let name = &rest[..close];
    let is_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !is_name {
        return text;
    }
    let inner = &rest[close + 1..];
    let end = format!("</{name}>");
    match inner.strip_suffix(end.as_str()) {
        Some(inner) => inner,
        // An opening tag the model never closed (cut by max_tokens): still a wrapper.
        None if !inner.contains('<') => inner,
        None => text,
    }
}

/// `Suggestion: x`, `**Suggestion:** x`, `Suggestion：x` -> `x`, for the known labels only.
fn strip_label(text: &str) -> &str {
    let (bold, body) = match text.strip_prefix("**") {
        Some(body) => (true, body),
        None => (false, text),
    };
    for label in LABELS {
        let matches = body
            .get(..label.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(label));
        if !matches {
            continue;
        }
        let after = &body[label.len()..];
        // A full-width colon needs no blank after it; an ASCII one does (`x:y` is no label).
        let (rest, needs_blank) = if let Some(rest) = after.strip_prefix(':') {
            (rest, true)
        } else if let Some(rest) = after.strip_prefix('：') {
            (rest, false)
        } else {
            continue;
        };
        let rest = match (bold, rest.strip_prefix("**")) {
            (true, Some(rest)) => rest,
            (true, None) => continue,
            (false, _) => rest,
        };
        if !needs_blank || rest.is_empty() || rest.starts_with(char::is_whitespace) {
            return rest;
        }
    }
    text
}

/// One pair of wrapping quotes.
fn strip_quotes(text: &str) -> &str {
    const PAIRS: &[(char, char)] = &[
        ('"', '"'),
        ('\'', '\''),
        ('`', '`'),
        ('“', '”'),
        ('‘', '’'),
        ('«', '»'),
        ('「', '」'),
        ('『', '』'),
    ];
    for (open, close) in PAIRS {
        if let Some(inner) = text
            .strip_prefix(*open)
            .and_then(|t| t.strip_suffix(*close))
        {
            // A lone `"` is not a pair, and `"a" or "b"` is two quotes, not one wrapping
            // pair (an apostrophe inside a word, as in `don't`, is no quote).
            let quotes_inside = open == close
                && inner.match_indices(*open).any(|(at, q)| {
                    let before = inner[..at].chars().next_back();
                    let after = inner[at + q.len()..].chars().next();
                    before.is_none_or(char::is_whitespace) || after.is_none_or(char::is_whitespace)
                });
            if text.chars().count() >= 2 && !quotes_inside {
                return inner;
            }
        }
    }
    text
}

fn is_han(c: char) -> bool {
    matches!(c,
        '\u{3400}'..='\u{4DBF}'
        | '\u{4E00}'..='\u{9FFF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{2FA1F}'
        | '\u{3005}' | '\u{3007}')
}

/// Hiragana, katakana (with the prolonged sound mark) and Thai: four make a word.
fn is_kana_or_thai(c: char) -> bool {
    matches!(c,
        '\u{3041}'..='\u{309F}'
        | '\u{30A0}'..='\u{30FF}'
        | '\u{31F0}'..='\u{31FF}'
        | '\u{FF66}'..='\u{FF9F}'
        | '\u{0E00}'..='\u{0E7F}')
}

/// Words: whitespace-separated, except that text in scripts written without spaces counts by
/// characters: 2 Han characters, or 4 kana or Thai characters, make one word. Within one
/// whitespace-separated piece, the CJK characters are weighed together (rounded up) and every
/// run of other letters or digits counts as one more word (`测试test` is 2 words).
pub fn word_count(text: &str) -> usize {
    text.split_whitespace().map(piece_words).sum()
}

fn piece_words(piece: &str) -> usize {
    // In quarter words: a Han character is 2, a kana or Thai character 1.
    let mut quarters = 0usize;
    let mut other_runs = 0usize;
    let mut in_run = false;
    let mut any_cjk = false;
    for c in piece.chars() {
        if is_han(c) {
            quarters += 2;
            any_cjk = true;
            in_run = false;
        } else if is_kana_or_thai(c) {
            quarters += 1;
            any_cjk = true;
            in_run = false;
        } else if c.is_alphanumeric() {
            if !in_run {
                other_runs += 1;
            }
            in_run = true;
        } else {
            in_run = false;
        }
    }
    if !any_cjk {
        // Plain whitespace splitting: `-` or `...` on its own is a word too.
        return 1;
    }
    quarters.div_ceil(4) + other_runs
}

/// Lower case, with typographic apostrophes made plain, for the phrase lists.
fn fold(text: &str) -> String {
    text.to_lowercase().replace(['’', '‘'], "'")
}

/// Whether `phrase` occurs in `text` with no letter or digit touching either end.
fn contains_phrase(text: &str, phrase: &str) -> bool {
    text.match_indices(phrase).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + phrase.len()..].chars().next();
        let edge = |c: Option<char>, phrase_edge: Option<char>| {
            // A phrase ending in punctuation (`sure,`) needs no boundary on that side.
            phrase_edge.is_some_and(|p| !p.is_alphanumeric())
                || !c.is_some_and(char::is_alphanumeric)
        };
        edge(before, phrase.chars().next()) && edge(after, phrase.chars().next_back())
    })
}

fn starts_with_phrase(text: &str, phrase: &str) -> bool {
    let Some(after) = text.strip_prefix(phrase) else {
        return false;
    };
    // `sure,` ends in punctuation: whatever follows, it is that opening. An apostrophe
    // continues the word: `I can't see it` is the user, not `I can`.
    phrase.ends_with(|c: char| !c.is_alphanumeric())
        || !after
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '\'')
}

/// `word: ` at the start, `word` being ASCII letters, digits and `_` (`^\w+:\s`).
fn has_prefixed_label(text: &str) -> bool {
    let word_len = text
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    word_len > 0
        && text[word_len..]
            .strip_prefix(':')
            .and_then(|rest| rest.chars().next())
            .is_some_and(char::is_whitespace)
}

/// `/name` with no further `/` (a path such as `/etc/hosts` is not a command).
fn is_slash_command(text: &str) -> bool {
    text.strip_prefix('/').is_some_and(|name| {
        name.chars().next().is_some_and(char::is_alphanumeric)
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ':' | '.'))
    })
}

/// Sentence end followed by more text: `. X`, `! X`, `? X` (a capital after blanks), or CJK
/// `。！？` followed by anything but more punctuation.
fn has_multiple_sentences(text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if matches!(c, '.' | '!' | '?') {
            let rest = &chars[i + 1..];
            let blanks = rest.iter().take_while(|c| c.is_whitespace()).count();
            if blanks > 0 && rest.get(blanks).is_some_and(|c| c.is_uppercase()) {
                return true;
            }
        }
        if matches!(c, '。' | '！' | '？') {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if next.is_some_and(|c| c.is_alphanumeric()) {
                return true;
            }
        }
    }
    false
}

/// A line break, `*`, or other markdown: backticks, `__`, `~~`, links, headings, list items
/// and quotes at the start.
fn formatting(text: &str) -> Option<&'static str> {
    if text.contains(['\n', '\r']) {
        return Some("a line break");
    }
    if text.contains('*') {
        return Some("`*`");
    }
    if text.contains('`') {
        return Some("a backtick");
    }
    for (mark, what) in [("__", "`__`"), ("~~", "`~~`"), ("](", "a markdown link")] {
        // MCP prompts are commands such as `/mcp__github__list`: not bold.
        if text.contains(mark) && !(mark == "__" && is_slash_command(text)) {
            return Some(what);
        }
    }
    let hashes = text.bytes().take_while(|b| *b == b'#').count();
    if hashes > 0 && text[hashes..].starts_with(' ') {
        return Some("a heading");
    }
    if ["- ", "+ ", "> "].iter().any(|p| text.starts_with(p)) {
        return Some("a list item or quote");
    }
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && text[digits..].starts_with(". ") {
        return Some("a numbered list item");
    }
    None
}

/// The first filter `candidate` (already cleaned) fails, or `None` when it passes them all.
pub fn check(candidate: &str) -> Option<Rejection> {
    let reject = |reason: &'static str, detail: String| Some(Rejection { reason, detail });
    let lower = fold(candidate);
    let bare = lower.trim_end_matches(['.', '!', '?']);
    if candidate.is_empty() {
        return reject("empty", "no text".into());
    }
    if bare == "done" {
        return reject("done", "the reply is just \"done\"".into());
    }
    let meta = META_PREFIXES
        .iter()
        .find(|p| lower.starts_with(*p))
        .copied()
        .or_else(|| {
            META_ANYWHERE
                .iter()
                .find(|p| contains_phrase(&lower, p))
                .copied()
        })
        .or_else(|| META_WHOLE.iter().find(|w| bare == **w).copied());
    if let Some(meta) = meta {
        return reject(
            "meta_text",
            format!("says it has nothing to suggest ({meta:?})"),
        );
    }
    let wrapped = [
        ('(', ')'),
        ('[', ']'),
        ('{', '}'),
        ('（', '）'),
        ('【', '】'),
    ]
    .iter()
    .any(|(open, close)| candidate.starts_with(*open) && candidate.ends_with(*close));
    if wrapped {
        return reject("meta_wrapped", "all of it is in brackets".into());
    }
    if let Some(prefix) = ERROR_PREFIXES.iter().find(|p| lower.starts_with(*p)) {
        return reject("error_message", format!("an error message ({prefix:?})"));
    }
    if has_prefixed_label(candidate) {
        let label = candidate.split(':').next().unwrap_or_default();
        return reject(
            "prefixed_label",
            format!("starts with the label \"{label}:\""),
        );
    }
    let words = word_count(candidate);
    if words < 2 && !ALLOWED_SHORT_WORDS.contains(&bare) && !is_slash_command(candidate) {
        return reject(
            "too_few_words",
            format!("{words} word, and not a reply such as yes, push or a /command"),
        );
    }
    if words > MAX_WORDS {
        return reject(
            "too_many_words",
            format!("{words} words (at most {MAX_WORDS})"),
        );
    }
    let chars = candidate.chars().count();
    if chars >= MAX_CHARS {
        return reject(
            "too_long",
            format!("{chars} characters (at most {})", MAX_CHARS - 1),
        );
    }
    if has_multiple_sentences(candidate) {
        return reject("multiple_sentences", "more than one sentence".into());
    }
    if let Some(what) = formatting(candidate) {
        return reject("has_formatting", format!("contains {what}"));
    }
    if let Some(word) = EVALUATIVE.iter().find(|w| contains_phrase(&lower, w)) {
        return reject("evaluative", format!("praise or thanks ({word:?})"));
    }
    if let Some(opening) = CLAUDE_VOICE.iter().find(|p| starts_with_phrase(&lower, p)) {
        return reject(
            "claude_voice",
            format!("starts in the assistant's voice ({opening:?})"),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cleanup then the filters, as `suggest check` runs them.
    fn verdict(text: &str) -> Result<String, (&'static str, String)> {
        let cleaned = clean(text);
        match check(&cleaned) {
            None => Ok(cleaned),
            Some(r) => Err((r.reason, cleaned)),
        }
    }

    #[test]
    fn every_rejection_reason() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("   \n ", "empty"),
            ("<suggestion></suggestion>", "empty"),
            ("\"\"", "empty"),
            ("done", "done"),
            ("Done.", "done"),
            ("Nothing to suggest here.", "meta_text"),
            ("No suggestion", "meta_text"),
            ("no suggestions right now", "meta_text"),
            ("I will stay silent", "meta_text"),
            ("Staying silent", "meta_text"),
            ("silence", "meta_text"),
            ("None.", "meta_text"),
            ("(waiting for the user)", "meta_wrapped"),
            ("[user is reviewing the diff]", "meta_wrapped"),
            ("API Error: 529 overloaded", "error_message"),
            ("Prompt is too long", "error_message"),
            ("Request timed out while waiting", "error_message"),
            ("Invalid API key · Please run /login", "error_message"),
            ("Image was too large to process", "error_message"),
            ("Note: run the tests", "prefixed_label"),
            ("fix: the flaky test", "prefixed_label"),
            ("Answer:\tyes please", "prefixed_label"),
            ("tests", "too_few_words"),
            ("maybe", "too_few_words"),
            ("/etc/hosts", "too_few_words"),
            ("/", "too_few_words"),
            ("你好", "too_few_words"),
            ("テスト", "too_few_words"),
            (
                "please run every test in the suite and then push the branch to origin",
                "too_many_words",
            ),
            (
                "请运行所有测试然后把分支推送到远端仓库再打开合并请求",
                "too_many_words",
            ),
            (
                "supercalifragilisticexpialidocious antidisestablishmentarianism \
                 pneumonoultramicroscopicsilicovolcanoconiosis",
                "too_long",
            ),
            ("Run the tests. Then push.", "multiple_sentences"),
            ("Fix it! Now", "multiple_sentences"),
            ("运行测试。然后提交", "multiple_sentences"),
            ("run the tests\nthen push", "has_formatting"),
            ("run the **unit** tests", "has_formatting"),
            ("fix the `gate.rs` test", "has_formatting"),
            ("- run the tests", "has_formatting"),
            ("# run the tests", "has_formatting"),
            ("1. run the tests", "has_formatting"),
            ("see [the docs](http://x)", "has_formatting"),
            ("thanks, run the tests", "evaluative"),
            ("Thank you so much", "evaluative"),
            ("looks good to me", "evaluative"),
            ("Sounds good, ship it", "evaluative"),
            ("that works for me", "evaluative"),
            ("ok that worked", "evaluative"),
            ("That’s all for today", "evaluative"),
            ("nice, commit it", "evaluative"),
            ("great, now push", "evaluative"),
            ("it's 'great' now", "evaluative"),
            ("perfect, merge it", "evaluative"),
            ("makes sense, go ahead", "evaluative"),
            ("awesome work there", "evaluative"),
            ("excellent, deploy it", "evaluative"),
            ("Let me run the tests", "claude_voice"),
            ("I'll push the branch", "claude_voice"),
            ("I’ve fixed the test", "claude_voice"),
            ("I'm going to refactor", "claude_voice"),
            ("I can run the tests", "claude_voice"),
            ("I would rename it", "claude_voice"),
            ("I think we should merge", "claude_voice"),
            ("I notice the test fails", "claude_voice"),
            ("Here's the fix", "claude_voice"),
            ("Here is the plan", "claude_voice"),
            ("Here are the results", "claude_voice"),
            ("That's the last step", "claude_voice"),
            ("This is ready to merge", "claude_voice"),
            ("This will fix it", "claude_voice"),
            ("You can run make test", "claude_voice"),
            ("You should push now", "claude_voice"),
            ("You could add a test", "claude_voice"),
            ("Sure, run the tests", "claude_voice"),
            ("Of course, pushing now", "claude_voice"),
            ("Certainly, running them", "claude_voice"),
        ];
        let mut seen: Vec<&str> = Vec::new();
        for (text, reason) in cases {
            match verdict(text) {
                Err((got, _)) => assert_eq!(got, *reason, "{text:?}"),
                Ok(c) => panic!("{text:?} passed as {c:?}; expected {reason}"),
            }
            if !seen.contains(reason) {
                seen.push(reason);
            }
        }
        assert_eq!(seen, REASONS, "every reason, in filter order");
    }

    #[test]
    fn filter_order_decides_the_reason() {
        // Each also fails a later filter; the earlier one is reported.
        for (text, reason) in [
            ("Note: thanks", "prefixed_label"),
            ("(thanks)", "meta_wrapped"),
            ("great", "too_few_words"),
            ("Thanks! Looks good.", "multiple_sentences"),
            ("**thanks** for that", "has_formatting"),
            ("I think that looks good", "evaluative"),
        ] {
            assert_eq!(
                check(&clean(text)).map(|r| r.reason),
                Some(reason),
                "{text}"
            );
        }
    }

    #[test]
    fn allowed_short_words_pass_alone() {
        for word in ALLOWED_SHORT_WORDS {
            assert_eq!(verdict(word), Ok(word.to_string()));
            let shouted = word.to_uppercase();
            assert_eq!(verdict(&shouted), Ok(shouted.clone()));
            assert_eq!(verdict(&format!("{word}!")), Ok(format!("{word}!")));
        }
        for command in ["/review", "/compact", "/mcp__github__list", "/init"] {
            assert_eq!(verdict(command), Ok(command.to_string()));
        }
        // `sure,` is Claude's voice only with its comma.
        assert_eq!(verdict("sure"), Ok("sure".into()));
    }

    #[test]
    fn accepted_candidates() {
        for text in [
            "run the tests",
            "commit and push",
            "yes, go ahead",
            "now update the README",
            "can you add a test for the FIFO case?",
            "fix the flaky gate test first",
            "what does cache_cold mean here",
            "deploy to staging",
            "1 2 3 4 5 6 7 8 9 10 11 12",
            "运行测试",
            "テストを実行して",
            "run 测试 please",
            "thanksgiving release notes please",
            "the nicest option is fine",
            "check http://localhost:8080/health",
            "sure thing, push it",
            "I can't see the change",
        ] {
            assert_eq!(verdict(text), Ok(text.to_string()), "{text:?}");
        }
        let at_limit = "a".repeat(MAX_CHARS - 3) + " b";
        assert_eq!(at_limit.chars().count(), MAX_CHARS - 1);
        assert!(check(&at_limit).is_none());
        let over = "a".repeat(MAX_CHARS - 2) + " b";
        assert_eq!(check(&over).map(|r| r.reason), Some("too_long"));
    }

    #[test]
    fn wrappers_quotes_and_labels_are_stripped() {
        for (raw, cleaned) in [
            ("<suggestion>run the tests</suggestion>", "run the tests"),
            (
                "  <suggestion>\n run the tests \n</suggestion>\n",
                "run the tests",
            ),
            ("<prompt>push it</prompt>", "push it"),
            ("<suggestion>run the tests", "run the tests"),
            ("\"run the tests\"", "run the tests"),
            ("'run the tests'", "run the tests"),
            ("“run the tests”", "run the tests"),
            ("「运行测试」", "运行测试"),
            ("'don't stop now'", "don't stop now"),
            ("\"yes\" or \"no\"", "\"yes\" or \"no\""),
            ("'yes' or 'no'", "'yes' or 'no'"),
            ("Suggestion: run the tests", "run the tests"),
            ("suggestion:run the tests", "suggestion:run the tests"),
            ("SUGGESTION:   run the tests", "run the tests"),
            ("**Suggestion:** run the tests", "run the tests"),
            ("Suggested prompt: \"push it\"", "push it"),
            ("Next prompt: push it", "push it"),
            ("User: push it", "push it"),
            ("<suggestion>Suggestion: \"yes\"</suggestion>", "yes"),
            ("Suggestion：运行测试", "运行测试"),
            ("a <b>bold</b> move", "a <b>bold</b> move"),
            ("<a>x</b>", "<a>x</b>"),
            ("\u{1b}]0;PWNED\u{7}\u{1b}[2Jrun tests", "run tests"),
            (
                "<suggestion>\u{9b}push\u{7f} it\u{0}</suggestion>",
                "push it",
            ),
        ] {
            assert_eq!(clean(raw), cleaned, "{raw:?}");
        }
        assert_eq!(
            verdict("<suggestion>run the tests</suggestion>"),
            Ok("run the tests".into())
        );
        assert_eq!(verdict("Suggestion: \"commit\""), Ok("commit".into()));
        // A label not in the list stays, and is rejected.
        assert_eq!(
            verdict("Reply: run the tests").map_err(|e| e.0),
            Err("prefixed_label")
        );
    }

    #[test]
    fn word_counts_in_mixed_scripts() {
        for (text, words) in [
            ("", 0),
            ("run the tests", 3),
            ("  run\tthe \n tests ", 3),
            ("- ...", 2),
            ("你", 1),
            ("你好", 1),
            ("运行测试", 2),
            ("运行测试吧", 3),
            ("テスト", 1),
            ("テストする", 2),
            ("ทดสอบ", 2),
            ("ทดสอบระบบ", 3),
            ("テストを実行して", 3),
            ("run 测试", 2),
            ("测试test", 2),
            ("测试。", 1),
            ("推送到 main 分支", 2 + 1 + 1),
            ("把 README 更新一下然后提交", 1 + 1 + 4),
            ("한국어 문장 입니다", 3),
        ] {
            assert_eq!(word_count(text), words, "{text:?}");
        }
    }
}
