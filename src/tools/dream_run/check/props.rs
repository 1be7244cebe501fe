//! Property tests of the check: the index cut against a plain reference of Claude Code's
//! rule, and the detectors (Markdown structure, credentials, dates, paths) on any text: no
//! panic, ranges that slice, a credential never printed, and pathological inputs finished.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::index::{self, MAX_CHARS, MAX_LINES};
use super::{front_matter, markdown, patterns};
use crate::cli::props::config;

/// JavaScript's `trim` set (white space and line terminators, BOM included, U+0085 not).
fn js_space(c: char) -> bool {
    c.is_whitespace() && c != '\u{85}' || c == '\u{feff}'
}

/// What the client loads of `text`, in UTF-16 units of the trimmed text, written as the
/// client's own steps: trim; keep the first 200 lines; still over 25,000 characters, cut at
/// the last newline at or before character 25,000, or at 25,000 when there is none.
fn reference_load(text: &str) -> (Vec<u16>, usize) {
    let trimmed: Vec<u16> = text.trim_matches(js_space).encode_utf16().collect();
    let nl = u16::from(b'\n');
    let mut loaded: Vec<u16> = trimmed
        .split(|u| *u == nl)
        .take(MAX_LINES)
        .collect::<Vec<_>>()
        .join(&nl);
    if loaded.len() > MAX_CHARS {
        let end = match loaded[..=MAX_CHARS].iter().rposition(|u| *u == nl) {
            Some(at) if at > 0 => at,
            _ => MAX_CHARS,
        };
        loaded.truncate(end);
    }
    let cut = loaded.len();
    (trimmed, cut)
}

/// Index text: lines of repeated characters (ASCII, Latin, astral, spaces of every kind),
/// sometimes long, sometimes past 200 of them, with blank edges.
fn index_text() -> impl Strategy<Value = String> {
    let unit = prop::sample::select(vec![
        "a",
        "a",
        "a",
        "é",
        "😀",
        " ",
        "\t",
        "\r",
        "\u{a0}",
        "\u{feff}",
        "\u{85}",
        "\u{2028}",
        "- [x](x.md)",
    ]);
    let line = (unit.clone(), 0..140usize).prop_map(|(u, n)| u.repeat(n));
    // At most one line near the character limit by itself, anywhere.
    let long = prop::option::of((any::<prop::sample::Index>(), unit, 24_990..25_010usize));
    (
        "[ \n\t]{0,3}",
        prop::collection::vec(line, 0..230),
        long,
        "[ \n\t]{0,3}",
    )
        .prop_map(|(head, mut lines, long, tail)| {
            if let Some((at, unit, n)) = long {
                lines.insert(at.index(lines.len() + 1), unit.repeat(n));
            }
            format!("{head}{}{tail}", lines.join("\n"))
        })
}

/// Memory-file text: Markdown's constructs, credential prefixes, date words, paths.
fn memory_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(vec![
            "`",
            "``",
            "```",
            "~~~",
            "\n",
            "\r\n",
            "---",
            "...",
            "\"",
            "'",
            "“",
            "”",
            "name: ",
            "description: ",
            "metadata:\n  type: ",
            "  ",
            "|",
            "[",
            "]",
            "(",
            ")",
            "![",
            "](",
            "]: ",
            "<",
            ">",
            "#",
            "- ",
            "* ",
            " ",
            "\t",
            "\\",
            "/",
            "./",
            "../",
            ":12",
            "#L3",
            "sk-ant-",
            "sk-",
            "ghp_",
            "github_pat_",
            "xoxb-",
            "AKIA",
            "-----BEGIN ",
            "PRIVATE KEY-----",
            "yesterday",
            "last",
            "next",
            "week",
            "Monday",
            "2",
            "days",
            "ago",
            "in",
            "3",
            "src/main.rs",
            "Makefile",
            "a1B2c3D4e5F6g7H8i9J0k",
            "é",
            "😀",
            "\u{200b}",
        ])
        .prop_map(str::to_string),
        "[a-zA-Z0-9_.-]{1,12}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..80).prop_map(|p| p.concat())
}

/// A credential of one of the shapes the check knows, with a run long enough to count.
fn credential() -> impl Strategy<Value = String> {
    let mixed = "[A-Z]{4}[0-9]{4}[A-Za-z0-9]{24,40}";
    prop_oneof![
        (
            prop::sample::select(vec![
                "sk-ant-api03-",
                "sk-",
                "ghp_",
                "github_pat_11",
                "xoxb-"
            ]),
            mixed
        )
            .prop_map(|(prefix, run)| format!("{prefix}{run}")),
        "[A-Z]{4}[0-9]{4}[A-Z0-9]{8,12}".prop_map(|run| format!("AKIA{run}")),
    ]
}

/// Every detector over `text`, checking that each range slices the line it came from.
fn run_detectors(text: &str) -> usize {
    let mut work = 0;
    let _ = patterns::may_hold_secrets(text);
    let _ = index::load(text);
    if let Some(front) = front_matter::parse(text) {
        for value in [
            &front.name,
            &front.description,
            &front.top_type,
            &front.metadata_type,
        ]
        .into_iter()
        .flatten()
        {
            assert!(value.line >= 2, "{value:?}");
            let _ = front_matter::is_slug(&value.text);
        }
    }
    for line in markdown::lines(text) {
        let spans = markdown::code_spans(line.text);
        for span in &spans {
            assert!(
                line.text.get(span.clone()).is_some(),
                "{span:?} of {:?}",
                line.text
            );
        }
        let prose = markdown::prose(line.text, &spans);
        for link in markdown::links(&prose) {
            assert!(prose.get(link.range.clone()).is_some());
        }
        let _ = markdown::code_span_texts(line.text, &spans);
        for found in patterns::secrets(line.text) {
            assert!(line.text.get(found.range.clone()).is_some());
        }
        let _ = patterns::mask_secrets(line.text);
        let unquoted = patterns::unquoted(&prose);
        assert_eq!(unquoted.len(), prose.len());
        let _ = patterns::relative_date(&unquoted);
        for word in prose.split_whitespace() {
            let _ = patterns::path_candidate(word, false);
            let _ = patterns::path_candidate(word, true);
        }
        let _ = markdown::folded_hash(line.text, 8);
        work += line.text.len() + 1;
    }
    work
}

/// Text made of the words relative dates are made of, in any case, with noise between.
fn date_words() -> impl Strategy<Value = String> {
    let word = prop::sample::select(vec![
        "yesterday",
        "Today",
        "TOMORROW",
        "tonight",
        "last",
        "next",
        "this",
        "coming",
        "past",
        "previous",
        "Monday",
        "sunday",
        "quarter",
        "weekend",
        "sprint",
        "night",
        "morning",
        "afternoon",
        "evening",
        "week",
        "month",
        "year",
        "minutes",
        "hour",
        "days",
        "weeks",
        "a",
        "an",
        "two",
        "few",
        "12",
        "ago",
        "in",
        "the",
        "day-long",
        "agony",
        "noon",
        "é",
    ]);
    let gap = prop::sample::select(vec![" ", "  ", ", ", "-", "\"", ": ", ""]);
    prop::collection::vec((word, gap), 0..12)
        .prop_map(|words| words.into_iter().map(|(w, g)| format!("{w}{g}")).collect())
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn the_relative_date_prefilter_drops_no_phrase(text in date_words()) {
        prop_assert_eq!(patterns::relative_date(&text), patterns::relative_date_in_words(&text));
    }

    #[test]
    fn the_date_pieces_of_a_file_drop_no_line(
        parts in prop::collection::vec(
            (prop_oneof![date_words(), memory_text()], prop::sample::select(vec!["\n", "\r\n"])),
            0..8,
        )
    ) {
        // The check asks a whole file which lines hold a piece, then reads those lines' words.
        let text: String = parts.iter().map(|(t, nl)| format!("{t}{nl}")).collect();
        let mut pieces = patterns::DatePieces::of(&text);
        for line in markdown::lines(&text) {
            let marked = pieces.in_line(line.text);
            let prose = markdown::prose(line.text, &markdown::code_spans(line.text));
            let found = patterns::relative_date_in_words(&patterns::unquoted(&prose));
            prop_assert!(marked || found.is_none(), "{:?} in {:?}", found, line.text);
        }
    }

    #[test]
    fn the_secret_prefilter_finds_every_prefix(text in memory_text()) {
        let any = patterns::secret_prefixes().any(|p| text.contains(p));
        prop_assert_eq!(patterns::may_hold_secrets(&text), any);
    }

    #[test]
    fn the_index_cut_is_the_client_s(text in index_text()) {
        let load = index::load(&text);
        let (trimmed, cut) = reference_load(&text);
        let nl = u16::from(b'\n');
        let lines = if trimmed.is_empty() { 0 } else { trimmed.iter().filter(|u| **u == nl).count() + 1 };
        prop_assert_eq!(load.lines, lines);
        prop_assert_eq!(load.chars, trimmed.len());
        prop_assert_eq!(load.over_lines, lines > MAX_LINES);
        prop_assert_eq!(load.over_chars, trimmed.len() > MAX_CHARS);
        let Some(got) = load.cut else {
            prop_assert_eq!(cut, trimmed.len(), "the client cuts, the check says nothing");
            return Ok(());
        };
        prop_assert!(cut < trimmed.len());
        // What the check says is dropped is exactly what follows the client's cut, with the
        // file's own line numbers (blank lines trimmed off the top still count).
        let lead = text.len() - text.trim_start_matches(js_space).len();
        let lead_lines = text[..lead].matches('\n').count();
        let whole = trimmed[cut] == nl;
        let kept_lines = if whole { trimmed[..cut].iter().filter(|u| **u == nl).count() + 1 } else { 0 };
        prop_assert_eq!(got.kept_lines, kept_lines);
        prop_assert_eq!(got.first_line, lead_lines + kept_lines + 1);
        let from = if whole { cut + 1 } else { cut };
        let mut expected = Vec::new();
        for (i, part) in trimmed[from..].split(|u| *u == nl).enumerate() {
            expected.push((got.first_line + i, String::from_utf16_lossy(part)));
        }
        prop_assert_eq!(got.dropped, expected);
    }

    #[test]
    fn the_detectors_take_any_text(text in memory_text()) {
        run_detectors(&text);
        let lines = markdown::lines(&text);
        // A trailing newline ends the last line; it does not start an empty one.
        let expected = text.split('\n').count() - usize::from(text.ends_with('\n'));
        prop_assert_eq!(lines.len(), expected);
        for (i, line) in lines.iter().enumerate() {
            prop_assert_eq!(line.number, i + 1);
            let spans = markdown::code_spans(line.text);
            prop_assert!(spans.windows(2).all(|w| w[0].end <= w[1].start), "{:?}", spans);
        }
        // The duplicate finder's hash agrees with the text it stands for.
        let folded = markdown::normalized(&text);
        prop_assert_eq!(
            markdown::folded_hash(&text, 5).is_some(),
            folded.chars().count() >= 5
        );
        prop_assert_eq!(markdown::folded_hash(&text, 0), markdown::folded_hash(&folded, 0));
        // A line shorter in bytes than the duplicate minimum is never folded: that holds as
        // long as a fold has at most a character per byte.
        prop_assert!(folded.chars().count() <= text.len());
        for line in &lines {
            let folded = markdown::normalized(line.text);
            prop_assert!(folded.chars().count() <= line.text.len(), "{:?}", line.text);
        }
    }

    #[test]
    fn a_credential_in_a_line_is_never_printed(
        before in memory_text().prop_map(|t| t.replace('\n', " ")),
        key in credential(),
        after in memory_text().prop_map(|t| t.replace('\n', " ")),
    ) {
        let line = format!("{before} {key} {after}");
        let found = patterns::secrets(&line);
        prop_assert!(!found.is_empty(), "{} not found in {:?}", key, line);
        let masked = patterns::mask_secrets(&line);
        // The key's random run, the part that is secret, appears nowhere in what is printed.
        let run = &key[key.len() - 20..];
        prop_assert!(!masked.contains(run), "{:?}", masked);
        prop_assert!(masked.contains("[secret]"));
    }
}

/// Runs `work` on its own thread and fails when it has not finished after a minute: far past
/// what a linear pass over these inputs takes even in a debug build under load, and far short
/// of what a quadratic one would (hours). The throughput is printed, not asserted
/// (`make fuzz` shows it).
fn finishes(label: &str, work: impl FnOnce() -> usize + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(bytes) => {
            let seconds = started.elapsed().as_secs_f64().max(1e-9);
            eprintln!(
                "{label}: {bytes} bytes, {:.1} MB/s",
                bytes as f64 / seconds / 1e6
            );
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{label}: not finished after 60 s: the pass is not linear")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{label}: the detector panicked"),
    }
}

#[test]
fn pathological_inputs_finish() {
    const N: usize = 100_000;
    let repeated = [
        "`",
        "``",
        "[",
        "](",
        "[a](",
        "![",
        "\\",
        "\"",
        "'",
        "“a ",
        "\"a ",
        "(",
        "<",
        "*",
        "-",
        "/",
        "./",
        ".",
        ":",
        "#",
        " ",
        "sk-",
        "sk-ant-",
        "ghp_",
        "xoxb-a",
        "-----BEGIN ",
        "a1",
        "ago ",
        "last ",
        "in 3 ",
        "yesterday ",
        "é",
        "😀",
        "\u{200b}",
    ];
    for piece in repeated {
        let line = piece.repeat(N / piece.len().max(1));
        finishes(&format!("one line of {piece:?}"), move || {
            run_detectors(&line)
        });
    }
    // Deep nesting and many lines: fences opened and never closed, brackets inside brackets.
    let fences = "```\n~~~~\n".repeat(N / 9);
    finishes("unclosed fences", move || run_detectors(&fences));
    let nested = format!("{}x{}", "[".repeat(N / 2), "](a)".repeat(N / 8));
    finishes("nested brackets", move || run_detectors(&nested));
    let spans = format!("{}{}", "`".repeat(N / 2), "a`".repeat(N / 4));
    finishes("unbalanced code spans", move || run_detectors(&spans));
    let front = format!(
        "---\ndescription: |\n{}",
        "  x: 'y\n metadata:\n".repeat(N / 20)
    );
    finishes("a frontmatter block never closed", move || {
        run_detectors(&front)
    });
    let short_lines = "- [m](m.md) yesterday\n".repeat(N / 22);
    finishes("many short lines", move || run_detectors(&short_lines));
}
