//! Surfaces and their sinks: the shapes a status is printed in.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::rules::{cap, Verdict, DETAIL_CHARS};

/// Where the status is shown (Claude Code's surface names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Surface {
    Cli,
    Ccr,
    Bridge,
    Desktop,
    Bg,
    Watched,
    Repl,
}

/// The shape a surface wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    /// Claude Code's `post_turn_summary` record.
    Summary,
    /// `{state, tempo, needs}`, for background task state machines.
    State,
    /// `{headline}`, for a compact display.
    Headline,
}

impl Surface {
    pub fn sink(self) -> Sink {
        match self {
            Surface::Cli | Surface::Ccr | Surface::Bridge | Surface::Desktop => Sink::Summary,
            Surface::Bg | Surface::Watched => Sink::State,
            Surface::Repl => Sink::Headline,
        }
    }
}

/// A classified turn with what the record needs around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub verdict: Verdict,
    pub tempo: &'static str,
    pub summarizes_uuid: Option<String>,
    pub session_id: Option<String>,
    /// The record's own uuid (summary sink): made once, so every copy printed or written is
    /// the same record.
    pub uuid: String,
}

impl Status {
    pub fn new(
        verdict: Verdict,
        tempo: &'static str,
        summarizes_uuid: Option<String>,
        session_id: Option<String>,
    ) -> Status {
        Status {
            verdict,
            tempo,
            summarizes_uuid,
            session_id,
            uuid: uuid::Uuid::new_v4().to_string(),
        }
    }
}

/// Claude Code's `post_turn_summary` record.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Record {
    /// `system`.
    #[serde(rename = "type")]
    kind: &'static str,
    /// `post_turn_summary`.
    subtype: &'static str,
    summarizes_uuid: Option<String>,
    status_category: &'static str,
    status_detail: String,
    needs_action: String,
    uuid: String,
    session_id: Option<String>,
}

/// `{state, tempo, needs}`, for background task state machines.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct State {
    state: &'static str,
    tempo: &'static str,
    needs: String,
}

/// `{headline}`, for a compact display.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Headline {
    headline: String,
}

/// A status in one sink's shape.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Document {
    Record(Record),
    State(State),
    Headline(Headline),
}

impl Sink {
    pub fn as_str(self) -> &'static str {
        match self {
            Sink::Summary => "summary",
            Sink::State => "state",
            Sink::Headline => "headline",
        }
    }

    /// `status` in this shape.
    pub fn document(self, status: &Status) -> Document {
        let v = &status.verdict;
        match self {
            Sink::Summary => Document::Record(Record {
                kind: "system",
                subtype: "post_turn_summary",
                summarizes_uuid: status.summarizes_uuid.clone(),
                status_category: v.category.status_category(),
                status_detail: v.detail.clone(),
                needs_action: v.needs.clone(),
                uuid: status.uuid.clone(),
                session_id: status.session_id.clone(),
            }),
            Sink::State => Document::State(State {
                state: v.category.as_str(),
                tempo: status.tempo,
                needs: v.needs.clone(),
            }),
            Sink::Headline => Document::Headline(Headline {
                headline: headline(v),
            }),
        }
    }

    /// Whether `value` is a status of this shape (not a clearing line or an error).
    pub fn holds(self, value: &Value) -> bool {
        match self {
            Sink::Summary => {
                value.get("subtype").and_then(Value::as_str) == Some("post_turn_summary")
                    && value.get("status_category").is_some_and(Value::is_string)
            }
            Sink::State => value.get("state").is_some_and(Value::is_string),
            Sink::Headline => value.get("headline").is_some_and(Value::is_string),
        }
    }
}

/// `Done: pushed the fix to main`, at most 64 characters.
fn headline(v: &Verdict) -> String {
    let label = v.category.label();
    if v.detail.is_empty() {
        return label.to_string();
    }
    cap(&format!("{label}: {}", v.detail), DETAIL_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::turn_status::rules::Category;

    fn status(category: Category, detail: &str) -> Status {
        Status::new(
            Verdict::new(category, detail, detail),
            category.tempo(),
            Some("a-1".into()),
            None,
        )
    }

    fn render(sink: Sink, status: &Status) -> String {
        serde_json::to_string(&sink.document(status)).unwrap()
    }

    #[test]
    fn every_sink_shape() {
        let s = status(Category::Blocked, "approve the push?");
        let record: Value = serde_json::from_str(&render(Sink::Summary, &s)).unwrap();
        let keys: Vec<&str> = record
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "type",
                "subtype",
                "summarizes_uuid",
                "status_category",
                "status_detail",
                "needs_action",
                "uuid",
                "session_id"
            ]
        );
        assert_eq!(record["status_category"], "blocked");
        assert_eq!(record["needs_action"], "approve the push?");
        assert!(Sink::Summary.holds(&record));
        assert_eq!(
            render(Sink::State, &s),
            r#"{"state":"blocked","tempo":"blocked","needs":"approve the push?"}"#
        );
        assert_eq!(
            render(Sink::Headline, &s),
            r#"{"headline":"Blocked: approve the push?"}"#
        );
        let long = status(Category::Done, &"x".repeat(100));
        let h: Value = serde_json::from_str(&render(Sink::Headline, &long)).unwrap();
        assert_eq!(h["headline"].as_str().unwrap().chars().count(), 64);
    }
}
