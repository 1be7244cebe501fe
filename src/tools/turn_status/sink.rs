//! Surfaces and their sinks: the shapes a status is printed in.

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
#[derive(Debug, Clone)]
pub struct Status {
    pub verdict: Verdict,
    pub tempo: &'static str,
    pub summarizes_uuid: Option<String>,
    pub session_id: Option<String>,
}

#[derive(Serialize)]
struct Record<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    subtype: &'static str,
    summarizes_uuid: Option<&'a str>,
    status_category: &'static str,
    status_detail: &'a str,
    needs_action: &'a str,
    uuid: String,
    session_id: Option<&'a str>,
}

#[derive(Serialize)]
struct State<'a> {
    state: &'static str,
    tempo: &'static str,
    needs: &'a str,
}

#[derive(Serialize)]
struct Headline {
    headline: String,
}

impl Sink {
    pub fn as_str(self) -> &'static str {
        match self {
            Sink::Summary => "summary",
            Sink::State => "state",
            Sink::Headline => "headline",
        }
    }

    /// The one compact JSON line of `status` in this shape.
    pub fn render(self, status: &Status) -> String {
        let v = &status.verdict;
        let json = match self {
            Sink::Summary => serde_json::to_string(&Record {
                kind: "system",
                subtype: "post_turn_summary",
                summarizes_uuid: status.summarizes_uuid.as_deref(),
                status_category: v.category.status_category(),
                status_detail: &v.detail,
                needs_action: &v.needs,
                uuid: uuid::Uuid::new_v4().to_string(),
                session_id: status.session_id.as_deref(),
            }),
            Sink::State => serde_json::to_string(&State {
                state: v.category.as_str(),
                tempo: status.tempo,
                needs: &v.needs,
            }),
            Sink::Headline => serde_json::to_string(&Headline {
                headline: headline(v),
            }),
        };
        // Plain strings and options cannot fail to serialise.
        json.unwrap_or_default()
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
        Status {
            verdict: Verdict::new(category, detail, detail),
            tempo: category.tempo(),
            summarizes_uuid: Some("a-1".into()),
            session_id: None,
        }
    }

    #[test]
    fn every_sink_shape() {
        let s = status(Category::Blocked, "approve the push?");
        let record: Value = serde_json::from_str(&Sink::Summary.render(&s)).unwrap();
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
            Sink::State.render(&s),
            r#"{"state":"blocked","tempo":"blocked","needs":"approve the push?"}"#
        );
        assert_eq!(
            Sink::Headline.render(&s),
            r#"{"headline":"Blocked: approve the push?"}"#
        );
        let long = status(Category::Done, &"x".repeat(100));
        let h: Value = serde_json::from_str(&Sink::Headline.render(&long)).unwrap();
        assert_eq!(h["headline"].as_str().unwrap().chars().count(), 64);
    }
}
