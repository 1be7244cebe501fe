//! `relative_date`: a date that only meant something on the day it was written, replaced by
//! the date itself, computed in UTC from the moment the line was written (its anchor: the
//! transcript record of the Write/Edit call that wrote it). A line with no anchor is left
//! (and `check` keeps reporting it); so is a phrase that runs across a code span or a quote.
//! The phrases are exactly those `check` finds (`patterns::relative_date`), outside code and
//! quotes; the replaced phrase is `may_lose`.
//!
//! The phrase table (D is the anchor's date, UTC; a phrase in any case; a capital first
//! letter is kept):
//!
//! | phrase                                    | becomes                              |
//! |-------------------------------------------|--------------------------------------|
//! | today                                     | D                                    |
//! | yesterday / tomorrow                      | D - 1 day / D + 1 day                |
//! | tonight                                   | the night of D                       |
//! | last night / this night / next night      | the night of D - 1 / D / D + 1       |
//! | this morning (afternoon, evening)         | the morning of D (likewise)          |
//! | last / next morning (...)                 | the morning of D - 1 / D + 1         |
//! | last Monday (any weekday; also "past",    | the latest Monday before D           |
//! |   "previous")                             |                                      |
//! | next Monday (also "coming")               | the first Monday after D             |
//! | this Monday                               | the Monday of D's ISO week           |
//! | last / this / next week                   | the week of M - 7 / M / M + 7 (M: the Monday of D's ISO week) |
//! | last / this / next weekend                | the weekend of S - 7 / S / S + 7 (S: the Saturday of D's week) |
//! | last / this / next month                  | YYYY-MM of D's month - 1 / 0 / + 1   |
//! | last / this / next quarter                | YYYY-Qn of D's quarter - 1 / 0 / + 1 |
//! | last / this / next year                   | YYYY of D's year - 1 / 0 / + 1       |
//! | last / this / next sprint                 | the sprint before / of / after D     |
//! | N minutes (hours) ago, in N minutes (...) | the date of the anchor -/+ N units   |
//! | N days ago, in N days                     | D -/+ N days                         |
//! | N weeks ago, in N weeks                   | the week of the Monday of D -/+ 7N days |
//! | N months ago, in N months                 | YYYY-MM, D's month -/+ N             |
//! | N years ago, in N years                   | YYYY, D's year -/+ N                 |
//! | few (couple, several, some) weeks ago,    | few weeks before D                   |
//! |   weeks ago (no count)                    | (the same words, "ago" -> "before D")|
//! | in few (...) weeks                        | few weeks after D                    |
//!
//! N is digits or a, an, one to ten. A date out of range (`9999999 years ago`) is written as
//! the vague form.

use std::ops::Range;

use time::format_description::well_known::Rfc3339;
use time::{Date, Duration, OffsetDateTime, UtcOffset, Weekday};

use super::State;
use crate::tools::dream_run::check::patterns::{relative_date, relative_date_in_words, unquoted};
use crate::tools::dream_run::check::{markdown, Kind};

/// The UTC date of `now`, `YYYY-MM-DD`.
pub(super) fn today(now: std::time::SystemTime) -> String {
    let stamp = crate::cli::time::rfc3339(now);
    stamp.get(..10).unwrap_or(&stamp).to_string()
}

/// Phrases replaced in one line at most: each replacement removes one; a line holding more
/// is left to the next run.
const MAX_PER_LINE: usize = 32;

/// The first relative date of `line` as `check` finds it: its bytes in the line and the text
/// as written there; `None` when there is none or it runs across a code span or a quote.
fn find(line: &str) -> Option<(Range<usize>, String)> {
    let spans = markdown::code_spans(line);
    let prose = markdown::prose(line, &spans);
    let prose = unquoted(&prose);
    let phrase = relative_date(&prose)?;
    let mut from = 0;
    while let Some(at) = prose[from..].find(phrase.as_str()) {
        let start = from + at;
        let end = start + phrase.len();
        from = end;
        let bounded = !prose[..start]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric)
            && !prose[end..]
                .chars()
                .next()
                .is_some_and(char::is_alphanumeric);
        if bounded && relative_date_in_words(&prose[..end]).as_deref() == Some(phrase.as_str()) {
            // Blanked code or quotes inside the phrase: not a phrase of the text itself.
            return (line.get(start..end) == Some(phrase.as_str())).then_some((start..end, phrase));
        }
    }
    None
}

/// The anchor's moment, in UTC.
fn moment(timestamp: &str) -> Option<OffsetDateTime> {
    Some(
        OffsetDateTime::parse(timestamp, &Rfc3339)
            .ok()?
            .to_offset(UtcOffset::UTC),
    )
}

fn ymd(date: Date) -> String {
    format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

fn plus_days(date: Date, days: i64) -> Option<Date> {
    date.checked_add(Duration::days(days))
}

fn monday_of(date: Date) -> Option<Date> {
    plus_days(date, -i64::from(date.weekday().number_days_from_monday()))
}

/// `YYYY-MM` of the month `months` after `date`'s.
fn month_of(date: Date, months: i64) -> Option<String> {
    let index = i64::from(date.year()) * 12 + i64::from(u8::from(date.month())) - 1 + months;
    let (year, month) = (index.div_euclid(12), index.rem_euclid(12) + 1);
    (0..=9999)
        .contains(&year)
        .then(|| format!("{year:04}-{month:02}"))
}

fn year_of(date: Date, years: i64) -> Option<String> {
    let year = i64::from(date.year()) + years;
    (0..=9999).contains(&year).then(|| format!("{year:04}"))
}

fn quarter_of(date: Date, quarters: i64) -> Option<String> {
    let index = i64::from(date.year()) * 4 + i64::from((u8::from(date.month()) - 1) / 3) + quarters;
    let (year, quarter) = (index.div_euclid(4), index.rem_euclid(4) + 1);
    (0..=9999)
        .contains(&year)
        .then(|| format!("{year:04}-Q{quarter}"))
}

fn weekday(word: &str) -> Option<Weekday> {
    Some(match word {
        "monday" => Weekday::Monday,
        "tuesday" => Weekday::Tuesday,
        "wednesday" => Weekday::Wednesday,
        "thursday" => Weekday::Thursday,
        "friday" => Weekday::Friday,
        "saturday" => Weekday::Saturday,
        "sunday" => Weekday::Sunday,
        _ => return None,
    })
}

fn count(word: &str) -> Option<i64> {
    if word.bytes().all(|b| b.is_ascii_digit()) {
        return word.parse().ok();
    }
    Some(match word {
        "a" | "an" | "one" => 1,
        "two" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        _ => return None,
    })
}

/// The absolute form of `phrase` (as `check` found it) written at `at`, per the table above.
pub(super) fn absolute(phrase: &str, at: OffsetDateTime) -> Option<String> {
    let lower = phrase.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let day = at.date();
    let text = match words[..] {
        ["today"] => ymd(day),
        ["yesterday"] => ymd(plus_days(day, -1)?),
        ["tomorrow"] => ymd(plus_days(day, 1)?),
        ["tonight"] => format!("the night of {}", ymd(day)),
        [modifier, period] if shift(modifier).is_some() => {
            let k = shift(modifier)?;
            by_period(period, k, day)?
        }
        ["in", n, unit] => by_count(&[n], unit, 1, at)?,
        [n, unit, "ago"] => by_count(&[n], unit, -1, at)?,
        [unit, "ago"] => by_count(&[], unit, -1, at)?,
        _ => return None,
    };
    Some(text)
}

/// -1, 0 or +1 for a modifier word.
fn shift(modifier: &str) -> Option<i64> {
    match modifier {
        "last" | "past" | "previous" => Some(-1),
        "this" => Some(0),
        "next" | "coming" => Some(1),
        _ => None,
    }
}

fn by_period(period: &str, k: i64, day: Date) -> Option<String> {
    if let Some(weekday) = weekday(period) {
        let monday = monday_of(day)?;
        let this = plus_days(monday, i64::from(weekday.number_days_from_monday()))?;
        let date = match k {
            0 => this,
            -1 if this < day => this,
            -1 => plus_days(this, -7)?,
            _ if this > day => this,
            _ => plus_days(this, 7)?,
        };
        return Some(ymd(date));
    }
    Some(match period {
        "night" | "morning" | "afternoon" | "evening" => {
            format!("the {period} of {}", ymd(plus_days(day, k)?))
        }
        "week" => format!("the week of {}", ymd(plus_days(monday_of(day)?, 7 * k)?)),
        "weekend" => format!(
            "the weekend of {}",
            ymd(plus_days(monday_of(day)?, 5 + 7 * k)?)
        ),
        "month" => month_of(day, k)?,
        "quarter" => quarter_of(day, k)?,
        "year" => year_of(day, k)?,
        _ => {
            let relation = match k {
                -1 => "before",
                0 => "of",
                _ => "after",
            };
            format!("the {period} {relation} {}", ymd(day))
        }
    })
}

/// `N units ago` (`sign` -1) or `in N units` (+1); `n` empty or vague: the words, with
/// "before D" or "after D".
fn by_count(n: &[&str], unit: &str, sign: i64, at: OffsetDateTime) -> Option<String> {
    let day = at.date();
    let exact = n.first().and_then(|w| count(w)).and_then(|n| {
        let n = n.checked_mul(sign)?;
        Some(match unit.trim_end_matches('s') {
            "minute" => ymd(at
                .checked_add(Duration::minutes(n.clamp(-(1 << 40), 1 << 40)))?
                .date()),
            "hour" => ymd(at
                .checked_add(Duration::hours(n.clamp(-(1 << 40), 1 << 40)))?
                .date()),
            "day" => ymd(plus_days(day, n.clamp(-(1 << 30), 1 << 30))?),
            "week" => format!(
                "the week of {}",
                ymd(monday_of(plus_days(
                    day,
                    n.clamp(-(1 << 30), 1 << 30).checked_mul(7)?
                )?)?)
            ),
            "month" => month_of(day, n.clamp(-(1 << 30), 1 << 30))?,
            "year" => year_of(day, n.clamp(-(1 << 30), 1 << 30))?,
            _ => return None,
        })
    });
    if let Some(text) = exact {
        return Some(text);
    }
    let relation = if sign < 0 { "before" } else { "after" };
    let mut words: Vec<&str> = n.to_vec();
    words.push(unit);
    Some(format!("{} {relation} {}", words.join(" "), ymd(day)))
}

/// `replacement` with the phrase's capital first letter.
fn cased(phrase: &str, replacement: String) -> String {
    let capital = phrase.chars().next().is_some_and(char::is_uppercase);
    let mut chars = replacement.chars();
    match chars.next() {
        Some(first) if capital && first.is_lowercase() => {
            first.to_uppercase().chain(chars).collect()
        }
        _ => replacement,
    }
}

/// The rule.
pub(super) fn absolute_dates(state: &mut State<'_>) {
    // Only the files `check` found a relative date in, and those another rule changed (a
    // redacted key block can uncover a date `check` did not read as text): no rule writes a
    // relative date itself.
    let paths: std::collections::BTreeSet<String> = state
        .input
        .health
        .problems
        .iter()
        .filter(|p| p.kind == Kind::RelativeDate)
        .map(|p| p.file.clone())
        .chain(state.changes.iter().map(|c| c.file.clone()))
        .collect();
    for path in paths {
        let Some(doc) = state.docs.get(&path) else {
            continue;
        };
        // Most files hold no relative date: their lines are only classified (code or not)
        // when one does.
        if !doc.lines.iter().any(|line| find(&line.text).is_some()) {
            continue;
        }
        let marks = doc.marks();
        let mut edits = Vec::new();
        for (at, line) in doc.lines.iter().enumerate() {
            if marks[at].code || find(&line.text).is_none() {
                continue;
            }
            // The transcripts hold the line as it was written, before this run.
            let Some(origin) = line.origin else {
                continue;
            };
            let Some(written) = state.original_line(&path, origin) else {
                continue;
            };
            let Some(anchor) = (state.input.anchor)(&path, written) else {
                continue;
            };
            let Some(moment) = moment(&anchor.timestamp) else {
                continue;
            };
            let mut text = line.text.clone();
            let mut replaced = Vec::new();
            for _ in 0..MAX_PER_LINE {
                let Some((range, phrase)) = find(&text) else {
                    break;
                };
                let Some(new) = absolute(&phrase, moment) else {
                    break;
                };
                let new = cased(&phrase, new);
                text.replace_range(range, &new);
                replaced.push((phrase, new));
            }
            if !replaced.is_empty() {
                edits.push((at, origin, text, replaced, anchor));
            }
        }
        for (at, origin, text, replaced, anchor) in edits {
            if let Some(doc) = state.docs.get_mut(&path) {
                doc.lines[at].text = text;
            }
            for (phrase, new) in replaced {
                state.change(
                    &path,
                    Some(origin),
                    Kind::RelativeDate,
                    // The anchor is recorded beside it (`Change::anchor`).
                    format!("\"{phrase}\" -> \"{new}\""),
                );
                if let Some(change) = state.changes.last_mut() {
                    change.anchor = Some(anchor.clone());
                }
                state.may_lose.push(phrase);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> OffsetDateTime {
        moment(text).unwrap()
    }

    #[test]
    fn the_phrase_table() {
        // A Friday.
        let friday = at("2026-11-20T10:00:00.000Z");
        for (phrase, want) in [
            ("yesterday", "2026-11-19"),
            ("Today", "2026-11-20"),
            ("tomorrow", "2026-11-21"),
            ("tonight", "the night of 2026-11-20"),
            ("last night", "the night of 2026-11-19"),
            ("this morning", "the morning of 2026-11-20"),
            ("last week", "the week of 2026-11-09"),
            ("this week", "the week of 2026-11-16"),
            ("next week", "the week of 2026-11-23"),
            ("last weekend", "the weekend of 2026-11-14"),
            ("last month", "2026-10"),
            ("next month", "2026-12"),
            ("last quarter", "2026-Q3"),
            ("last year", "2025"),
            ("last Monday", "2026-11-16"),
            ("last Friday", "2026-11-13"),
            ("this Friday", "2026-11-20"),
            ("next Friday", "2026-11-27"),
            ("coming Saturday", "2026-11-21"),
            ("last sprint", "the sprint before 2026-11-20"),
            ("2 days ago", "2026-11-18"),
            ("an hour ago", "2026-11-20"),
            ("12 hours ago", "2026-11-19"),
            ("in 3 weeks", "the week of 2026-12-07"),
            ("two months ago", "2026-09"),
            ("in a year", "2027"),
            ("few weeks ago", "few weeks before 2026-11-20"),
            ("months ago", "months before 2026-11-20"),
            ("in several days", "several days after 2026-11-20"),
            (
                "99999999999 years ago",
                "99999999999 years before 2026-11-20",
            ),
        ] {
            assert_eq!(absolute(phrase, friday).as_deref(), Some(want), "{phrase}");
        }
        // UTC: 23:30 at UTC-5 is the next day.
        assert_eq!(
            absolute("today", at("2026-11-20T23:30:00-05:00")).as_deref(),
            Some("2026-11-21")
        );
    }

    #[test]
    fn phrases_are_found_where_check_finds_them() {
        assert_eq!(
            find("Fixed it yesterday."),
            Some((9..18, "yesterday".into()))
        );
        assert_eq!(find("`yesterday` and \"last week\""), None);
        assert_eq!(
            find("said \"no\" then 2 days ago"),
            Some((15..25, "2 days ago".into()))
        );
        // Across a code span: not the text's own phrase.
        assert_eq!(find("last `x` week"), None);
        assert_eq!(cased("Last week", "the week of x".into()), "The week of x");
    }
}
