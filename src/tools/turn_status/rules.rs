//! The heuristic engine: the rule table (the one place the rules live) and the classifier that
//! applies it to the end of the turn's final assistant text. No model, no I/O.

use crate::cli::text::sanitize;

/// How a turn ended, in the engine's words (SPEC §7). The order of the variants is the order in
/// which categories are tried: the first that matches wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    Failed,
    Blocked,
    Done,
    Working,
}

impl Category {
    /// The engine's word, as the `state` sink prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Failed => "failed",
            Category::Blocked => "blocked",
            Category::Done => "done",
            Category::Working => "working",
        }
    }

    pub fn parse(word: &str) -> Option<Category> {
        match word {
            "failed" => Some(Category::Failed),
            "blocked" => Some(Category::Blocked),
            "done" => Some(Category::Done),
            "working" => Some(Category::Working),
            _ => None,
        }
    }

    /// `status_category` of Claude Code's `post_turn_summary` record.
    pub fn status_category(self) -> &'static str {
        match self {
            Category::Failed => "failed",
            Category::Blocked => "blocked",
            Category::Done => "completed",
            Category::Working => "review_ready",
        }
    }

    /// The `tempo` the heuristic engine gives: the turn is over, so only a block or ongoing
    /// work is not idle.
    pub fn tempo(self) -> &'static str {
        match self {
            Category::Blocked => "blocked",
            Category::Working => "active",
            Category::Done | Category::Failed => "idle",
        }
    }

    /// For the headline: `Blocked: approve the push`.
    pub fn label(self) -> &'static str {
        match self {
            Category::Failed => "Failed",
            Category::Blocked => "Blocked",
            Category::Done => "Done",
            Category::Working => "Working",
        }
    }
}

/// Only the end of the text is classified: this many characters.
pub const TAIL_CHARS: usize = 800;
/// `status_detail`, `needs_action` and the headline are cut to this many characters.
pub const DETAIL_CHARS: usize = 64;

/// What a rule looks for, on the prose lines (fenced code blocks are left out).
#[derive(Debug, Clone, Copy)]
pub enum Test {
    /// A line that starts with this label (`result:`); the detail is what follows it.
    Label(&'static str),
    /// A phrase anywhere in a line; ASCII phrases only at word boundaries.
    Phrase(&'static str),
    /// Like `Phrase`, but not after a negation or a condition ("haven't pushed", "once
    /// tests pass").
    Affirmed(&'static str),
    /// The last prose line ends with a question mark.
    TrailingQuestion,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub category: Category,
    pub test: Test,
    /// The rule does not match a line holding any of these.
    pub unless: &'static [&'static str],
}

const fn rule(category: Category, test: Test) -> Rule {
    Rule {
        category,
        test,
        unless: &[],
    }
}

use Category::{Blocked, Done, Failed, Working};
use Test::{Affirmed, Label, Phrase, TrailingQuestion};

/// Words of an authentication failure: a login fixes it, so it blocks rather than fails.
const AUTH: &[&str] = &[
    "authentication_error",
    "authentication failed",
    "authentication error",
    "invalid api key",
    "invalid x-api-key",
    "unauthorized",
    "not logged in",
    "/login",
    "gh auth login",
    "permission denied (publickey)",
    "token has expired",
    "token expired",
    "oauth token",
];

/// The rule table, in the order it is tried: every failed rule, then blocked, done, working.
/// The first rule that matches decides; no rule matching means `working` with the last line.
pub const RULES: &[Rule] = &[
    // failed
    rule(Failed, Label("failed:")),
    rule(Failed, Label("failure:")),
    rule(Failed, Label("失败：")),
    rule(Failed, Label("失败:")),
    rule(Failed, Phrase("giving up")),
    rule(Failed, Phrase("give up")),
    rule(Failed, Phrase("gave up")),
    rule(Failed, Phrase("unable to complete")),
    rule(Failed, Phrase("could not complete")),
    rule(Failed, Phrase("couldn't complete")),
    rule(Failed, Phrase("放弃")),
    // Claude Code's text for a turn that ended on an API error; a rejected login blocks.
    Rule {
        category: Failed,
        test: Phrase("api error"),
        unless: AUTH,
    },
    // blocked
    rule(Blocked, Label("blocked:")),
    rule(Blocked, Label("needs input:")),
    rule(Blocked, Label("need input:")),
    rule(Blocked, Label("action required:")),
    rule(Blocked, Label("阻塞：")),
    rule(Blocked, Label("需要输入：")),
    rule(Blocked, TrailingQuestion),
    rule(Blocked, Phrase("awaiting your approval")),
    rule(Blocked, Phrase("awaiting your input")),
    rule(Blocked, Phrase("awaiting your confirmation")),
    rule(Blocked, Phrase("awaiting approval")),
    rule(Blocked, Phrase("waiting for your approval")),
    rule(Blocked, Phrase("waiting for your input")),
    rule(Blocked, Phrase("waiting for your confirmation")),
    rule(Blocked, Phrase("waiting for you to")),
    rule(Blocked, Phrase("need your approval")),
    rule(Blocked, Phrase("needs your approval")),
    rule(Blocked, Phrase("need your input")),
    rule(Blocked, Phrase("please run")),
    rule(Blocked, Phrase("please provide")),
    rule(Blocked, Phrase("please approve")),
    rule(Blocked, Phrase("please confirm")),
    rule(Blocked, Phrase("please log in")),
    rule(Blocked, Phrase("请运行")),
    rule(Blocked, Phrase("请提供")),
    rule(Blocked, Phrase("请确认")),
    rule(Blocked, Phrase("等待你的")),
    rule(Blocked, Phrase("等待您的")),
    rule(Blocked, Phrase("authentication_error")),
    rule(Blocked, Phrase("authentication failed")),
    rule(Blocked, Phrase("authentication error")),
    rule(Blocked, Phrase("invalid api key")),
    rule(Blocked, Phrase("invalid x-api-key")),
    rule(Blocked, Phrase("unauthorized")),
    rule(Blocked, Phrase("not logged in")),
    rule(Blocked, Phrase("/login")),
    rule(Blocked, Phrase("gh auth login")),
    rule(Blocked, Phrase("permission denied (publickey)")),
    rule(Blocked, Phrase("token has expired")),
    rule(Blocked, Phrase("token expired")),
    // done
    rule(Done, Label("result:")),
    rule(Done, Label("done:")),
    rule(Done, Label("结果：")),
    rule(Done, Label("完成：")),
    rule(Done, Affirmed("pushed")),
    rule(Done, Affirmed("committed")),
    rule(Done, Affirmed("opened pr")),
    rule(Done, Affirmed("opened a pr")),
    rule(Done, Affirmed("opened a pull request")),
    rule(Done, Affirmed("opened pull request")),
    rule(Done, Affirmed("created a pr")),
    rule(Done, Affirmed("created a pull request")),
    rule(Done, Affirmed("merged")),
    rule(Done, Affirmed("all tests pass")),
    rule(Done, Affirmed("all tests passed")),
    rule(Done, Affirmed("is complete")),
    rule(Done, Affirmed("is now complete")),
    rule(Done, Affirmed("deployed")),
    rule(Done, Phrase("已推送")),
    rule(Done, Phrase("已提交")),
    rule(Done, Phrase("已完成")),
    rule(Done, Phrase("已合并")),
    // working
    rule(Working, Phrase("waiting on ci")),
    rule(Working, Phrase("waiting for ci")),
    rule(Working, Phrase("waiting on the ci")),
    rule(Working, Phrase("waiting for the ci")),
    rule(Working, Phrase("waiting on the build")),
    rule(Working, Phrase("waiting for the build")),
    rule(Working, Phrase("waiting on build")),
    rule(Working, Phrase("waiting for build")),
    Rule {
        category: Working,
        test: Phrase("let me"),
        unless: &["let me know"],
    },
    rule(Working, Phrase("running")),
    rule(Working, Phrase("in progress")),
    rule(Working, Phrase("正在")),
    rule(Working, Phrase("让我")),
];

/// Words that, before an `Affirmed` phrase in its clause (up to the last `.`, `,`, `;`, `:`,
/// `!`, `?` or dash), say it has not happened (any word ending in `n't` too).
const NEGATIONS: &[&str] = &[
    "not", "never", "without", "before", "once", "until", "if", "when", "no", "yet", "be",
];

/// The engine's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub category: Category,
    /// Where the turn stands, at most [`DETAIL_CHARS`].
    pub detail: String,
    /// The action needed when blocked, else empty.
    pub needs: String,
}

impl Verdict {
    /// The detail and the needed action are shown on a terminal (a status line, a headline):
    /// control characters from the turn's text, a payload or a model are removed first.
    pub fn new(category: Category, detail: &str, needs: &str) -> Verdict {
        Verdict {
            category,
            detail: cap(&sanitize(detail), DETAIL_CHARS),
            needs: if category == Category::Blocked {
                cap(&sanitize(needs), DETAIL_CHARS)
            } else {
                String::new()
            },
        }
    }
}

/// Classifies the final assistant text of a turn.
pub fn classify(text: &str) -> Verdict {
    classify_explained(text).0
}

/// [`classify`], with the rule that decided, for `-v`.
pub fn classify_explained(text: &str) -> (Verdict, String) {
    // Without control characters first: none may reach the detail, and a bell or an escape
    // next to a word does not hide it from the rules.
    let text = sanitize(text);
    let lines = prose_lines(tail(&text, TAIL_CHARS));
    for rule in RULES {
        if let Some(detail) = matches(rule, &lines) {
            let why = match rule.test {
                Label(l) => format!("a line starting with {l:?}"),
                Phrase(p) | Affirmed(p) => format!("the phrase {p:?}"),
                TrailingQuestion => "a trailing question".to_string(),
            };
            return (Verdict::new(rule.category, &detail, &detail), why);
        }
    }
    let last = lines.last().cloned().unwrap_or_default();
    (
        Verdict::new(Category::Working, &last, ""),
        "no rule matched".to_string(),
    )
}

/// The detail when `rule` matches: the matching line (latest first), or what follows a label.
fn matches(rule: &Rule, lines: &[String]) -> Option<String> {
    if let TrailingQuestion = rule.test {
        let last = lines.last()?;
        let end = last.trim_end_matches([')', '"', '\'', '*', '_', '”']);
        if !(end.ends_with('?') || end.ends_with('？')) {
            return None;
        }
        // The question itself: the line's last sentence.
        let start = [". ", "! ", "。", "！", "; "]
            .iter()
            .filter_map(|p| last.rfind(p).map(|i| i + p.len()))
            .filter(|i| *i < end.len())
            .max()
            .unwrap_or(0);
        return Some(last[start..].trim().to_string());
    }
    lines.iter().rev().find_map(|line| {
        let lower = line.to_lowercase();
        if rule.unless.iter().any(|u| lower.contains(u)) {
            return None;
        }
        match rule.test {
            Label(label) => {
                let rest = strip_prefix_ignoring_case(line, &lower, label)?;
                Some(if rest.trim().is_empty() {
                    line.clone()
                } else {
                    rest.trim().to_string()
                })
            }
            Phrase(phrase) => find_phrase(&lower, phrase, false).then(|| line.clone()),
            Affirmed(phrase) => find_phrase(&lower, phrase, true).then(|| line.clone()),
            TrailingQuestion => None,
        }
    })
}

/// What follows `label` when `line` starts with it (compared lower-cased).
fn strip_prefix_ignoring_case<'a>(line: &'a str, lower: &str, label: &str) -> Option<&'a str> {
    if !lower.starts_with(label) {
        return None;
    }
    // Lower-casing may change byte lengths; count characters instead.
    let chars = label.chars().count();
    let at = line
        .char_indices()
        .nth(chars)
        .map_or(line.len(), |(i, _)| i);
    Some(&line[at..])
}

/// Whether `phrase` occurs in `lower` at word boundaries (ASCII phrases), and, when
/// `affirmed`, not right after a negation.
fn find_phrase(lower: &str, phrase: &str, affirmed: bool) -> bool {
    let word_like = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let ascii = phrase.is_ascii();
    let mut from = 0;
    while let Some(found) = lower[from..].find(phrase) {
        let start = from + found;
        let end = start + phrase.len();
        from = start + phrase.chars().next().map_or(1, char::len_utf8);
        let before = lower[..start].chars().next_back();
        let after = lower[end..].chars().next();
        let starts_word = phrase
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric());
        if ascii && ((starts_word && word_like(before)) || word_like(after)) {
            continue;
        }
        if affirmed && negated(&lower[..start]) {
            continue;
        }
        return true;
    }
    false
}

/// Whether the words just before a phrase (same clause) deny or condition it.
fn negated(before: &str) -> bool {
    let clause = before
        .rsplit(['.', ';', ',', ':', '!', '?', '—'])
        .next()
        .unwrap_or(before);
    clause
        .split_whitespace()
        .any(|w| NEGATIONS.contains(&w) || w.ends_with("n't") || w.ends_with("n’t"))
}

/// The last `max` characters of `text`.
pub fn tail(text: &str, max: usize) -> &str {
    let count = text.chars().count();
    if count <= max {
        return text;
    }
    let at = text
        .char_indices()
        .nth(count - max)
        .map_or(text.len(), |(i, _)| i);
    &text[at..]
}

/// The text's non-empty lines outside fenced code blocks, cleaned of markdown marks (bullets,
/// headings, quotes, bold, code marks). When everything is code, the code lines.
pub fn prose_lines(text: &str) -> Vec<String> {
    let mut prose = Vec::new();
    let mut code = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        let cleaned = clean_line(trimmed);
        if cleaned.is_empty() {
            continue;
        }
        if fenced {
            code.push(cleaned);
        } else {
            prose.push(cleaned);
        }
    }
    if prose.is_empty() {
        code
    } else {
        prose
    }
}

fn clean_line(line: &str) -> String {
    let mut line = line.trim_start_matches('#').trim();
    for bullet in ["- ", "* ", "+ ", "> "] {
        if let Some(rest) = line.strip_prefix(bullet) {
            line = rest.trim_start();
        }
    }
    // A numbered list item: `1. `, `12) `.
    if let Some(i) = line.find(['.', ')']) {
        if i > 0 && i <= 3 && line[..i].bytes().all(|b| b.is_ascii_digit()) {
            if let Some(rest) = line[i + 1..].strip_prefix(' ') {
                line = rest.trim_start();
            }
        }
    }
    let unmarked = line.replace("**", "").replace("__", "").replace('`', "");
    unmarked.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `max` characters; a cut text ends with `…` (counted in the `max`).
pub fn cap(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_category_order() {
        let order = |c: Category| c as u8;
        assert!(RULES
            .windows(2)
            .all(|w| order(w[0].category) <= order(w[1].category)));
    }

    #[test]
    fn phrases_match_whole_words_and_respect_negation() {
        assert!(find_phrase("i pushed it", "pushed", true));
        assert!(!find_phrase("i haven't pushed it", "pushed", true));
        assert!(!find_phrase("not pushed yet", "pushed", true));
        assert!(!find_phrase(
            "once all tests pass, merge",
            "all tests pass",
            true
        ));
        assert!(!find_phrase("overrunning", "running", false));
        assert!(find_phrase("tests running now", "running", false));
        assert!(find_phrase("run /login to continue", "/login", false));
        assert!(find_phrase("代码已推送到远程", "已推送", false));
    }

    #[test]
    fn tail_keeps_the_last_characters() {
        let text = format!("{}\nlast line", "x".repeat(2000));
        assert_eq!(tail(&text, 20), "xxxxxxxxxx\nlast line");
        assert_eq!(tail("short", 800), "short");
        let one = "é".repeat(1000);
        assert_eq!(tail(&one, 800).chars().count(), 800);
    }

    #[test]
    fn control_characters_neither_hide_a_phrase_nor_reach_the_detail() {
        let v = classify("Pushed\u{7} the fix\u{1b}.");
        assert_eq!(v.category, Category::Done);
        assert_eq!(v.detail, "Pushed the fix");
        let v = Verdict::new(Category::Blocked, "ok?\u{9b}2J", "say \u{1b}]0;x\u{7}yes");
        assert_eq!((v.detail.as_str(), v.needs.as_str()), ("ok?2J", "say yes"));
    }

    #[test]
    fn caps_count_characters() {
        assert_eq!(cap("  abc  ", 64), "abc");
        let long = "é".repeat(100);
        let capped = cap(&long, 64);
        assert_eq!(capped.chars().count(), 64);
        assert!(capped.ends_with('…'));
    }

    #[test]
    fn code_blocks_are_not_prose() {
        let lines = prose_lines("Here:\n```rust\nlet x = f()?\n```\nDone.");
        assert_eq!(lines, ["Here:", "Done."]);
        assert_eq!(prose_lines("```\nonly code\n```"), ["only code"]);
    }
}
