//! `secret`: every credential `check` finds is replaced by `[redacted: KIND]`, KIND the
//! detector's kind in snake case ([`kind_id`]); a PEM private key block goes whole, from its
//! BEGIN line to its END line (to the end of the file when it has none, as `check` reads it),
//! for one `[redacted: private_key]` (text before the BEGIN and after the END marker stays).
//! An AWS secret access key (40 characters) on the line of an access key id goes too: no
//! detector knows its shape alone, and the id's line is where it is written.
//!
//! A change names the file, the line and the kind, never the value; the values are
//! `may_lose`.

use std::ops::Range;

use super::doc::DocLine;
use super::State;
use crate::tools::dream_run::check::patterns::{may_hold_secrets, pem_private_key_header, secrets};
use crate::tools::dream_run::check::Kind;

/// The id of a PEM private key.
const PRIVATE_KEY: &str = "private_key";
/// The id of an AWS secret access key beside its access key id.
const AWS_SECRET: &str = "aws_secret_access_key";

/// The snake_case id of what the detector says a credential looks like.
pub(super) fn kind_id(what: &str) -> &'static str {
    match what {
        "an Anthropic API key (sk-ant-)" => "anthropic_api_key",
        "a GitHub token (github_pat_)" | "a GitHub token (ghp_)" => "github_token",
        "an API key (sk-)" => "api_key",
        "an AWS access key id (AKIA)" => "aws_access_key_id",
        "a Slack token (xox)" => "slack_token",
        "a PEM private key" => PRIVATE_KEY,
        _ => "secret",
    }
}

fn redacted(kind: &str) -> String {
    format!("[redacted: {kind}]")
}

/// `line` with every credential of a known shape redacted: the new line, each value and
/// what it looked like.
fn redact_line(line: &str) -> (String, Vec<(String, &'static str)>) {
    let mut found: Vec<(Range<usize>, &'static str, &'static str)> = secrets(line)
        .into_iter()
        .map(|m| (m.range, kind_id(m.what), m.what))
        .collect();
    if found.iter().any(|(_, id, _)| *id == "aws_access_key_id") {
        for range in aws_secret_keys(line) {
            if !found
                .iter()
                .any(|(r, _, _)| r.start < range.end && range.start < r.end)
            {
                found.push((range, AWS_SECRET, "an AWS secret access key"));
            }
        }
    }
    found.sort_by_key(|(r, _, _)| r.start);
    let mut out = String::with_capacity(line.len());
    let mut values = Vec::new();
    let mut at = 0;
    for (range, id, what) in found {
        if range.start < at {
            continue;
        }
        out.push_str(&line[at..range.start]);
        out.push_str(&redacted(id));
        values.push((line[range.clone()].to_string(), what));
        at = range.end;
    }
    out.push_str(&line[at..]);
    (out, values)
}

/// Runs of exactly 40 base64 characters mixing letters and digits: an AWS secret access key.
fn aws_secret_keys(line: &str) -> Vec<Range<usize>> {
    let key_char = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'+' | b'=');
    let bytes = line.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if !key_char(bytes[at]) {
            at += 1;
            continue;
        }
        let start = at;
        while at < bytes.len() && key_char(bytes[at]) {
            at += 1;
        }
        let run = &bytes[start..at];
        if run.len() == 40
            && run.iter().any(u8::is_ascii_digit)
            && run.iter().any(u8::is_ascii_alphabetic)
        {
            out.push(start..at);
        }
    }
    out
}

/// Where a private key block that opens on line `first` ends: (its last line, the byte after
/// its END marker there). With no END marker, the block is the BEGIN line and the base64
/// lines right after it: a missing END must not take the rest of the file with it.
fn block_end(lines: &[DocLine], first: usize, header_end: usize) -> (usize, usize) {
    let marker_end = |line: &str, from: usize| -> Option<usize> {
        let end = from + line[from..].find("-----END ")?;
        let after = end + "-----END ".len();
        Some(
            line[after..]
                .find("-----")
                .map_or(line.len(), |at| after + at + 5),
        )
    };
    if let Some(end) = marker_end(&lines[first].text, header_end) {
        return (first, end);
    }
    for (at, line) in lines.iter().enumerate().skip(first + 1) {
        if let Some(end) = marker_end(&line.text, 0) {
            return (at, end);
        }
    }
    let base64 = |line: &DocLine| {
        !line.text.is_empty()
            && line
                .text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    };
    let last = first + lines[first + 1..].iter().take_while(|l| base64(l)).count();
    (last, lines[last].text.len())
}

/// The rule.
pub(super) fn redact(state: &mut State<'_>) {
    let paths: Vec<String> = state.docs.keys().cloned().collect();
    for path in paths {
        let Some(doc) = state.docs.get_mut(&path) else {
            continue;
        };
        // Most files hold no credential prefix at all: one cheap search each, left untouched.
        if !doc.lines.iter().any(|line| may_hold_secrets(&line.text)) {
            continue;
        }
        let old = std::mem::take(&mut doc.lines);
        let mut lines = Vec::with_capacity(old.len());
        // (origin, detail) of each redaction, and the values.
        let mut done: Vec<(Option<usize>, String)> = Vec::new();
        let mut values: Vec<String> = Vec::new();
        let mut at = 0;
        while at < old.len() {
            let line = &old[at];
            let Some(header) = pem_private_key_header(&line.text) else {
                let (new, found) = redact_line(&line.text);
                for (value, what) in found {
                    values.push(value);
                    done.push((line.origin, detail(what)));
                }
                lines.push(DocLine {
                    text: new,
                    ..line.clone()
                });
                at += 1;
                continue;
            };
            let (last, end) = block_end(&old, at, header.end);
            let (head, head_values) = redact_line(&line.text[..header.start]);
            let (tail, tail_values) = redact_line(&old[last].text[end..]);
            let block: Vec<&str> = (at..=last)
                .map(|i| {
                    let text = old[i].text.as_str();
                    let from = if i == at { header.start } else { 0 };
                    let to = if i == last { end } else { text.len() };
                    &text[from..to]
                })
                .collect();
            values.push(block.join("\n"));
            let count = last - at + 1;
            done.push((
                line.origin,
                if count == 1 {
                    "a PEM private key: replaced by [redacted: private_key]; rotate the key"
                        .to_string()
                } else {
                    format!("a PEM private key ({count} lines): replaced by one line [redacted: private_key]; rotate the key")
                },
            ));
            for (value, what) in head_values.into_iter().chain(tail_values) {
                values.push(value);
                done.push((line.origin, detail(what)));
            }
            lines.push(DocLine {
                text: format!("{head}{}{tail}", redacted(PRIVATE_KEY)),
                cr: old[last].cr,
                origin: line.origin,
            });
            at = last + 1;
        }
        doc.lines = lines;
        state.may_lose.extend(values);
        for (origin, detail) in done {
            state.change(&path, origin, Kind::Secret, detail);
        }
    }
}

fn detail(what: &str) -> String {
    let id = match what {
        "an AWS secret access key" => AWS_SECRET,
        what => kind_id(what),
    };
    format!(
        "{what}: replaced by {}; rotate the credential",
        redacted(id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_detector_kind_has_an_id() {
        for line in [
            "sk-ant-api03-AbCdEf0123456789xyzXYZ",
            "ghp_0123456789abcdefABCDEF0123456789abcd",
            "github_pat_11ABCDEFG0123456789_abcdefghijKLMNOP",
            "sk-proj-9aZ8bY7cX6dW5eV4fU3g",
            "AKIAIOSFODNN7EXAMPLE",
            "xoxb-1234567890-abcdefghij",
            "-----BEGIN RSA PRIVATE KEY-----",
        ] {
            let found = secrets(line);
            assert_eq!(found.len(), 1, "{line}");
            assert_ne!(kind_id(found[0].what), "secret", "{line}");
        }
    }

    #[test]
    fn values_go_the_rest_stays() {
        let (line, values) =
            redact_line("aws AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ok");
        assert_eq!(
            line,
            "aws [redacted: aws_access_key_id] [redacted: aws_secret_access_key] ok"
        );
        assert_eq!(values.len(), 2);
        let (line, _) = redact_line(
            "key sk-ant-api03-AbCdEf0123456789xyzXYZ, ghp_0123456789abcdefABCDEF0123456789abcd.",
        );
        assert_eq!(
            line,
            "key [redacted: anthropic_api_key], [redacted: github_token]."
        );
    }
}
