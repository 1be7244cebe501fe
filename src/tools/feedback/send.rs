//! Sending a draft: the transcript attachment rules and the payload. The POST itself goes
//! through [`crate::net`] (same-origin redirects only, the answer cap, timeouts, redaction).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::Serialize;
use serde_json::{json, Value};

use super::store::{platform, Draft};

/// GitHub's REST API, when `GITHUB_API_URL` does not name another (GitHub Enterprise).
pub const DEFAULT_GITHUB_API_URL: &str = "https://api.github.com";

/// At most this much of the transcript file is read (its end: the newest messages).
pub const MAX_TRANSCRIPT_READ: u64 = 4 * 1024 * 1024;
/// The whole payload stays within this.
pub const PAYLOAD_BUDGET: usize = 8 * 1024 * 1024 - 64 * 1024;

/// Record markers of sessions served by a third party (Bedrock, Vertex, ...): such a
/// transcript is not ours to send.
pub const THIRD_PARTY_MARKERS: &[&str] = &[
    "msg_bdrk_",
    "msg_vrtx_",
    "bolt-inf-",
    "toolu_bdrk_",
    "toolu_vrtx_",
    "srvtoolu_bdrk_",
    "srvtoolu_vrtx_",
    "req_bdrk_",
    "req_vrtx_",
    "\"type\":\"hybrid-organization\"",
];

/// What happened to the transcript.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Attachment {
    pub attached: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub withheld: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub kept: usize,
    pub total: usize,
    pub truncated: bool,
    #[serde(skip)]
    pub text: Option<String>,
}

impl Attachment {
    fn withheld(reason: &'static str, path: Option<&Path>) -> Attachment {
        Attachment {
            withheld: Some(reason),
            path: path.map(|p| p.display().to_string()),
            ..Attachment::default()
        }
    }
}

/// The payload without a transcript.
pub fn payload(draft: &Draft) -> Value {
    json!({
        "description": format!("{}\n\n{}", draft.title, draft.details),
        "type": draft.kind,
        "title": draft.title,
        "details": draft.details,
        "area": draft.area,
        "trigger": draft.trigger,
        "draft_id": draft.draft_id,
        "version": draft.cli_version.clone().unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string()),
        "platform": draft.os.clone().unwrap_or_else(platform),
    })
}

/// Reads the end of the transcript and decides what may be sent: only a transcript of the
/// draft's own session, never one with third-party markers, newest messages first within the
/// payload budget.
pub fn attach(draft: &Draft, path: Option<&Path>, payload_len: usize) -> Attachment {
    let Some(path) = path else {
        return Attachment::withheld("missing", None);
    };
    let Some(session) = draft.source_session_id.as_deref() else {
        return Attachment::withheld("session_mismatch", Some(path));
    };
    let Ok((window, from_start)) = read_tail(path) else {
        return Attachment::withheld("missing", Some(path));
    };
    if THIRD_PARTY_MARKERS
        .iter()
        .any(|m| memchr::memmem::find(&window, m.as_bytes()).is_some())
    {
        return Attachment::withheld("third_party", Some(path));
    }
    let mut lines: Vec<&[u8]> = window.split(|b| *b == b'\n').collect();
    if !from_start && !lines.is_empty() {
        lines.remove(0); // starts mid-record
    }
    let records: Vec<(&[u8], Value)> = lines
        .into_iter()
        .filter_map(|l| Some((l, serde_json::from_slice::<Value>(l).ok()?)))
        .filter(|(_, v)| v.is_object())
        .collect();
    // The file must be this session's: every record that names a session names it.
    let ids: Vec<&str> = records
        .iter()
        .filter_map(|(_, v)| v.get("sessionId").and_then(Value::as_str))
        .collect();
    if ids.is_empty() || ids.iter().any(|id| *id != session) {
        return Attachment::withheld("session_mismatch", Some(path));
    }

    let total = records.len();
    let mut budget = PAYLOAD_BUDGET.saturating_sub(payload_len + 64);
    let mut kept: Vec<&[u8]> = Vec::new();
    for (line, _) in records.iter().rev() {
        // Its size inside the JSON string, with the newline that joins it.
        let cost = json_string_len(line) + 2;
        if cost > budget {
            break;
        }
        budget -= cost;
        kept.push(line);
    }
    kept.reverse();
    let mut text = String::new();
    let truncated = kept.len() < total;
    if truncated {
        text.push_str(&format!(
            "transcript_truncated: kept {} of {total} messages\n",
            kept.len()
        ));
    }
    for line in &kept {
        text.push_str(&String::from_utf8_lossy(line));
        text.push('\n');
    }
    Attachment {
        attached: true,
        withheld: None,
        path: Some(path.display().to_string()),
        kept: kept.len(),
        total,
        truncated,
        text: Some(text),
    }
}

/// The last [`MAX_TRANSCRIPT_READ`] bytes, and whether they start at the file's start.
fn read_tail(path: &Path) -> std::io::Result<(Vec<u8>, bool)> {
    // A FIFO or a device as the session file is refused (withheld), never waited on.
    let mut file = crate::files::open_regular(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(MAX_TRANSCRIPT_READ);
    file.seek(SeekFrom::Start(start))?;
    let mut window = Vec::new();
    file.take(MAX_TRANSCRIPT_READ).read_to_end(&mut window)?;
    Ok((window, start == 0))
}

/// Length of `bytes` as the contents of a JSON string (escapes counted).
fn json_string_len(bytes: &[u8]) -> usize {
    let text = String::from_utf8_lossy(bytes);
    serde_json::to_string(text.as_ref()).map_or(bytes.len() * 6, |s| s.len() - 2)
}

/// The GitHub issue for a draft. The transcript is never attached there.
pub fn github_issue(draft: &Draft) -> Value {
    let mut body = format!("{}\n\n---\n", draft.details);
    for (label, value) in [
        ("type", Some(draft.kind.as_str())),
        ("area", draft.area.as_deref()),
        ("trigger", draft.trigger.as_deref()),
        ("version", draft.cli_version.as_deref()),
        ("platform", draft.os.as_deref()),
        ("draft", Some(draft.draft_id.as_str())),
    ] {
        if let Some(value) = value {
            body.push_str(&format!("- {label}: {value}\n"));
        }
    }
    json!({"title": draft.title, "body": body})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(session: &str) -> Draft {
        Draft {
            draft_id: "d1".into(),
            source_session_id: Some(session.into()),
            kind: "bug".into(),
            title: "t".into(),
            details: "d".into(),
            ..Draft::default()
        }
    }

    fn record(session: &str, text: &str) -> String {
        json!({"type": "user", "sessionId": session, "message": {"role": "user", "content": text}})
            .to_string()
    }

    #[test]
    fn attaches_its_own_session_and_withholds_others() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.jsonl");
        std::fs::write(
            &path,
            format!("{}\n{}\n", record("s1", "a"), record("s1", "b")),
        )
        .unwrap();
        let a = attach(&draft("s1"), Some(&path), 100);
        assert!(a.attached && !a.truncated);
        assert_eq!((a.kept, a.total), (2, 2));
        assert!(a.text.unwrap().ends_with("\"b\"}}\n"));
        assert_eq!(
            attach(&draft("s2"), Some(&path), 100).withheld,
            Some("session_mismatch")
        );
        assert_eq!(attach(&draft("s1"), None, 100).withheld, Some("missing"));
        std::fs::write(
            &path,
            format!("{}\n{}\n", record("s1", "a"), record("s9", "b")),
        )
        .unwrap();
        assert_eq!(
            attach(&draft("s1"), Some(&path), 100).withheld,
            Some("session_mismatch")
        );
    }

    #[test]
    fn every_third_party_marker_withholds() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.jsonl");
        for marker in THIRD_PARTY_MARKERS {
            let second = if marker.starts_with('"') {
                format!("{{\"sessionId\":\"s1\",{marker}}}")
            } else {
                format!("{{\"sessionId\":\"s1\",\"id\":\"{marker}0123\"}}")
            };
            std::fs::write(&path, format!("{}\n{second}\n", record("s1", "a"))).unwrap();
            let a = attach(&draft("s1"), Some(&path), 100);
            assert_eq!(a.withheld, Some("third_party"), "{marker}");
            assert!(a.text.is_none());
        }
    }
}
