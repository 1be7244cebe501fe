//! Property tests of the planner on generated memory dirs (index lines with duplicates, long
//! lines, dangling links and overflow; topic files with frontmatter, relative dates, secrets,
//! PEM blocks, links, copies of each other; orphans): after the plan is applied, no word is
//! lost but what it says may go; planned again over its own output, it writes nothing; and
//! `check` reports none of what the rules fix, but for the sub-kinds they leave:
//! `duplicate_entry` for a line in two topic files and for two index lines linking one file
//! with different text, `relative_date` on a line no transcript anchors (here: the lines
//! holding "unanchored"), and `long_entry` on a line that links no topic file.

use proptest::prelude::*;

use super::tests::{anchored, apply, memory, plan_dir, read, scope, texts};
use super::*;
use crate::cli::props::config;
use crate::tools::dream_run::check::{run_check, Kind};

/// Topic file names, some under folders (a name twice, for relinks), and missing ones.
const TOPICS: &[&str] = &[
    "build.md",
    "deploy.md",
    "notes.md",
    "sub/notes.md",
    "team/shared.md",
    "team/rules.md",
    "style.md",
];
const MISSING: &[&str] = &["gone.md", "old/deploy.md", "sub/gone.md", "notes/x.md"];

/// Body lines: plain facts, relative dates (anchored or not), credentials, quotes and code.
fn body_line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "Use cargo nextest for the unit tests.",
            "The release build strips the binaries.",
            "## Why",
            "Ask before force-pushing to main!",
            "Grüße an das Team — ünïcode words stay.",
            "",
            "```sh\nmake test # yesterday's habit\n```",
            "the user said \"ship it tomorrow\" at the review",
        ]).prop_map(str::to_string),
        2 => prop::sample::select(vec![
            "Fixed the lock race yesterday.",
            "Deployed 2 days ago, again last week.",
            "Last Monday the gate got faster; next month we split it.",
            "unanchored: moved the cache last week.",
            "This morning the bench ran in a few minutes ago, in 3 weeks the review.",
        ]).prop_map(str::to_string),
        1 => prop::sample::select(vec![
            "key sk-ant-api03-AbCdEf0123456789xyzXYZ (do not share)",
            "aws AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "deploy key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHC\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY",
            "slack xoxb-1234567890-abcdefghij and ghp_0123456789abcdefABCDEF0123456789abcd",
        ]).prop_map(str::to_string),
        1 => (prop::sample::select(TOPICS), prop::sample::select(MISSING), any::<bool>())
            .prop_map(|(topic, missing, real)| {
                let target = if real { topic } else { missing };
                format!("See [the {}]({target}) too.", target.trim_end_matches(".md"))
            }),
    ]
}

/// A topic file: frontmatter or not, a few body lines.
fn topic_text() -> impl Strategy<Value = String> {
    (
        prop::option::of((
            "[a-z]{1,8}(-[a-z]{1,6})?",
            prop::sample::select(vec![
                "How the build works",
                "Deploy steps, moved yesterday",
                "Token sk-ant-api03-AbCdEf0123456789xyzXYZ leaked",
                "",
            ]),
            1..366u16,
        )),
        prop::collection::vec(body_line(), 0..5),
    )
        .prop_map(|(front, body)| {
            let mut text = String::new();
            if let Some((name, description, day)) = front {
                let date = time::Date::from_ordinal_date(2026, day)
                    .map(|d| d.to_string())
                    .unwrap_or_default();
                text.push_str(&format!(
                    "---\nname: {name}\ndescription: {description}\nmetadata:\n  type: project\n  modified: {date}T08:00:00.000Z\n---\n"
                ));
            }
            for line in body {
                text.push_str(&line);
                text.push('\n');
            }
            text
        })
}

/// An index line.
fn index_line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (prop::sample::select(TOPICS), "[A-Z][a-z]{2,8}", "[a-z ]{0,30}")
            .prop_map(|(t, title, hook)| format!("- [{title}]({t}) — {hook}")),
        1 => (prop::sample::select(MISSING), "[a-z]{0,20}")
            .prop_map(|(t, hook)| format!("- [Old]({t}) — {hook}")),
        1 => (prop::sample::select(TOPICS), 30..60usize).prop_map(|(t, n)| {
            format!("- [Long]({t}) — {}", "many words here ".repeat(n).trim_end())
        }),
        1 => prop::sample::select(vec![
            "# Memory",
            "- Use cargo nextest.",
            "- use Cargo-Nextest!",
            "- fixed yesterday",
            "- unanchored: last week",
            "",
        ]).prop_map(str::to_string),
    ]
}

/// A memory dir: `(path, text)`.
fn memory_dir() -> impl Strategy<Value = Vec<(String, String)>> {
    (
        prop::collection::vec(index_line(), 0..12),
        // Sometimes enough plain lines to go over what the client loads.
        prop::option::weighted(0.3, 150..240usize),
        prop::collection::vec((prop::sample::select(TOPICS), topic_text()), 0..7),
        // Copies: one topic's text also at another path.
        prop::collection::vec(
            (any::<prop::sample::Index>(), prop::sample::select(TOPICS)),
            0..2,
        ),
    )
        .prop_map(|(mut index, filler, topics, copies)| {
            if let Some(n) = filler {
                index.extend((0..n).map(|i| format!("- note {i}: a plain entry")));
            }
            let mut files: BTreeMap<String, String> = topics
                .into_iter()
                .map(|(p, t)| (p.to_string(), t))
                .collect();
            for (from, to) in copies {
                if files.is_empty() {
                    break;
                }
                let text = files.values().nth(from.index(files.len())).cloned();
                if let Some(text) = text {
                    files.insert(to.to_string(), text);
                }
            }
            if !index.is_empty() {
                files.insert(INDEX_FILE.to_string(), index.join("\n") + "\n");
            }
            files.into_iter().collect()
        })
}

/// Anchored unless the line says it is not.
fn anchor(file: &str, line: &str) -> Option<Anchor> {
    if line.contains("unanchored") {
        None
    } else {
        anchored(file, line)
    }
}

/// What `check` may still report after a run: the sub-kinds the rules leave, and the kinds
/// they do not fix.
fn left_to_the_model(kind: Kind, detail: &str, line_text: &str) -> bool {
    match kind {
        Kind::DuplicateEntry => {
            detail.starts_with("the same text as") || detail.starts_with("points at")
        }
        Kind::RelativeDate => line_text.contains("unanchored"),
        Kind::LongEntry => !line_text.contains(".md)"),
        Kind::OrphanFile | Kind::DanglingLink | Kind::IndexOverLimit | Kind::Secret => false,
        _ => true,
    }
}

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn plans_lose_nothing_settle_and_leave_only_the_models_work(files in memory_dir()) {
        let pairs: Vec<(&str, &str)> =
            files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
        let tmp = memory(&pairs);
        let before = read(tmp.path());
        let plan = plan_dir(tmp.path(), &before, &anchor);
        for (path, text) in &plan.writes {
            prop_assert!(is_writable(path), "{path}");
            prop_assert!(text.is_some() || !is_team(path), "{path}");
        }
        for change in &plan.changes {
            prop_assert!(
                !change.detail.contains("sk-ant-api03") && !change.detail.contains("AKIAIOSF"),
                "{}",
                change.detail
            );
        }
        apply(tmp.path(), &plan);
        let after = read(tmp.path());
        let lost = lost_words(&texts(&before), &texts(&after), &plan.may_lose);
        prop_assert!(lost.is_empty(), "lost {lost:?}\n{:#?}", texts(&after));

        let again = plan_dir(tmp.path(), &after, &anchor);
        prop_assert!(
            again.writes.is_empty(),
            "a second plan writes {:#?}\nover {:#?}",
            again.writes,
            texts(&after)
        );

        let health = run_check(tmp.path(), &scope()).unwrap();
        for p in &health.problems {
            let line_text = after
                .get(&p.file)
                .and_then(|f| f.text.split('\n').nth(p.line.unwrap_or(1).saturating_sub(1)))
                .unwrap_or_default();
            prop_assert!(
                left_to_the_model(p.kind, &p.detail, line_text),
                "{} on {line_text:?}\n{:#?}",
                p.one_line(),
                texts(&after)
            );
        }
    }
}
