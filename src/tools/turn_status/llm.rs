//! The LLM engine: the small/fast model (thinking off) classifies the last 2,000 characters of
//! the turn's final text as JSON; a reply that does not parse gets one second attempt with a
//! format correction. The only place turn-status starts an async runtime.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::rules::{cap, tail, Category, Verdict, DETAIL_CHARS};
use crate::cli::{signals, Failure};
use crate::model::{
    self, AnswerSchema, Block, Client, ErrorKind, Message, ModelError, Request, Role, Usage,
};

/// The model sees this many characters from the end of the text.
pub const TEXT_CHARS: usize = 2000;
/// `result` is cut to this many characters.
pub const RESULT_CHARS: usize = 180;
/// Room for the JSON object and a little slack.
pub const MAX_TOKENS: u32 = 300;

const SYSTEM_PROMPT: &str = "You classify where a coding assistant's turn ended, from the \
final message it wrote. Reply with one JSON object and nothing else, of this form:\n\
{\"state\": \"working\" | \"blocked\" | \"done\" | \"failed\", \"detail\": string (at most 64 \
characters: where it stands), \"tempo\": \"active\" | \"idle\" | \"blocked\", \"needs\": \
string (the action the user must take when blocked, else \"\"), \"result\": string (at most \
180 characters: what was achieved, else \"\")}\n\
done: the task is finished (results reported, pushed, committed, PR opened). blocked: it waits \
for the user (a question, an approval, input, a login). failed: it gave up or hit an error it \
cannot get past. working: anything else, including work still under way.";

const CORRECTION: &str = "That reply could not be used. Reply again with only the JSON \
object, no prose and no code fence: {\"state\": ..., \"detail\": ..., \"tempo\": ..., \
\"needs\": ..., \"result\": ...}, with state one of working, blocked, done, failed and tempo \
one of active, idle, blocked.";

/// The parsed answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub verdict: Verdict,
    pub tempo: &'static str,
    pub result: String,
}

/// How the engine ended.
#[derive(Debug)]
pub enum Outcome {
    Classified(Answer, Usage),
    Failed(ModelError, Usage),
    /// SIGINT or SIGTERM arrived: the signal number.
    Interrupted(i32),
}

// The reply the model is asked for. Its JSON Schema is sent as `response_format` to
// OpenAI-compatible servers, where it makes even a 135M model answer JSON (0 of 10 replies
// without it, 9 of 10 with it). The schema asks for every field and no other, but `parse` is
// lenient: a missing or null field reads as "", and a key more is ignored (small local models
// add keys), so no `deny_unknown_fields` here. (Line comments: a doc comment would go on the
// wire as the schema's description.)
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
struct Reply {
    // Each field is read as it came, so that a wrong type is named ("`detail` is not a
    // string"); the schema says what is asked.
    #[schemars(with = "StateName")]
    state: Option<Value>,
    #[schemars(with = "String", length(max = 64))]
    detail: Option<Value>,
    #[schemars(with = "TempoName")]
    tempo: Option<Value>,
    #[schemars(with = "String")]
    needs: Option<Value>,
    #[schemars(with = "String", length(max = 180))]
    result: Option<Value>,
}

// No doc comments on these two: they would become descriptions on the wire.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
enum StateName {
    Working,
    Blocked,
    Done,
    Failed,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
enum TempoName {
    Active,
    Idle,
    Blocked,
}

/// [`Reply`]'s schema, whole (no `$defs`, no `$schema`, no title), as servers take it.
fn answer_schema() -> AnswerSchema {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.meta_schema = None;
    settings.inline_subschemas = true;
    let mut schema = settings.into_generator().into_root_schema_for::<Reply>();
    schema.remove("title");
    AnswerSchema {
        name: "turn_status",
        schema: schema.to_value(),
    }
}

fn first_request(text: &str) -> Request {
    let mut request = Request::one_shot(
        SYSTEM_PROMPT,
        format!(
            "The final message of the turn (its last {TEXT_CHARS} characters at most):\n\n\
                 <message>\n{}\n</message>",
            tail(text, TEXT_CHARS)
        ),
        MAX_TOKENS,
    );
    request.answer_schema = Some(answer_schema());
    request
}

/// Classifies `text` with the model: at most two requests (each with the client's retries).
pub fn classify(client: &Client, text: &str) -> Result<Outcome, Failure> {
    // While the model is asked, a signal ends the exchange, not the process, so the answer
    // says it was interrupted.
    let hold = signals::hold();
    let outcome = model::block_on(async {
        tokio::select! {
            outcome = exchange(client, text) => outcome,
            signal = crate::model::until_signal() => Outcome::Interrupted(signal),
        }
    })?;
    Ok(match hold.end() {
        Some(signal) => Outcome::Interrupted(signal),
        None => outcome,
    })
}

async fn exchange(client: &Client, text: &str) -> Outcome {
    let mut request = first_request(text);
    let mut usage = Usage::default();
    let response = match client.send(&request).await {
        Ok(response) => response,
        Err(error) => return Outcome::Failed(error, usage),
    };
    usage += response.usage;
    let reply = response.text();
    let why = match parse(&reply) {
        Ok(answer) => return Outcome::Classified(answer, usage),
        Err(why) => why,
    };
    request.messages.push(Message {
        role: Role::Assistant,
        content: vec![Block::text(if reply.trim().is_empty() {
            "(empty)".to_string()
        } else {
            reply
        })],
    });
    request.messages.push(Message {
        role: Role::User,
        content: vec![Block::text(format!("{CORRECTION} (The problem: {why}.)"))],
    });
    let response = match client.send(&request).await {
        Ok(response) => response,
        Err(error) => return Outcome::Failed(error, usage),
    };
    usage += response.usage;
    match parse(&response.text()) {
        Ok(answer) => Outcome::Classified(answer, usage),
        Err(second) => {
            let mut error = ModelError::new(
                ErrorKind::MalformedResponse,
                format!("the model's reply is not the status JSON, twice: {why}; then {second}"),
            );
            error.attempts = 2;
            Outcome::Failed(error, usage)
        }
    }
}

/// The JSON object in a reply (a code fence or words around it are tolerated), checked.
pub fn parse(reply: &str) -> Result<Answer, String> {
    let start = reply.find('{').ok_or("no JSON object in the reply")?;
    let end = reply.rfind('}').ok_or("no JSON object in the reply")?;
    if end < start {
        return Err("no JSON object in the reply".into());
    }
    let value: Value = serde_json::from_str(&reply[start..=end])
        .map_err(|e| format!("the JSON does not parse: {e}"))?;
    // An array or a scalar between the braces (`} {` aside) holds no field: all missing.
    let reply: Reply = serde_json::from_value(value).unwrap_or_default();
    let text = |key: &str, field: &Option<Value>| -> Result<String, String> {
        match field {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.trim().to_string()),
            Some(_) => Err(format!("`{key}` is not a string")),
        }
    };
    let state = text("state", &reply.state)?;
    let category =
        Category::parse(&state).ok_or_else(|| format!("`state` {state:?} is not a state"))?;
    let detail = text("detail", &reply.detail)?;
    if detail.is_empty() {
        return Err("`detail` is missing".into());
    }
    let tempo = match text("tempo", &reply.tempo)?.as_str() {
        "active" => "active",
        "idle" => "idle",
        "blocked" => "blocked",
        "" => category.tempo(),
        other => return Err(format!("`tempo` {other:?} is not a tempo")),
    };
    let needs = text("needs", &reply.needs)?;
    let result = cap(&text("result", &reply.result)?, RESULT_CHARS);
    let mut verdict = Verdict::new(category, &detail, &needs);
    if category == Category::Blocked && verdict.needs.is_empty() {
        verdict.needs = cap(&detail, DETAIL_CHARS);
    }
    Ok(Answer {
        verdict,
        tempo,
        result,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fenced_json_and_caps_fields() {
        let long = "x".repeat(300);
        let reply = format!(
            "```json\n{{\"state\":\"done\",\"detail\":\"{long}\",\"tempo\":\"idle\",\"needs\":\"\",\"result\":\"{long}\"}}\n```"
        );
        let a = parse(&reply).unwrap();
        assert_eq!(a.verdict.category, Category::Done);
        assert_eq!(a.verdict.detail.chars().count(), DETAIL_CHARS);
        assert_eq!(a.result.chars().count(), RESULT_CHARS);
        assert_eq!(a.tempo, "idle");
    }

    #[test]
    fn rejects_what_is_not_the_status() {
        for bad in [
            "I think it is done.",
            "{\"state\":\"finished\",\"detail\":\"x\"}",
            "{\"state\":\"done\"}",
            "{\"state\":\"done\",\"detail\":5}",
            "{\"state\":\"done\",\"detail\":\"x\",\"tempo\":\"fast\"}",
            "} {",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn blocked_without_needs_uses_the_detail() {
        let a = parse("{\"state\":\"blocked\",\"detail\":\"approve the push\"}").unwrap();
        assert_eq!(a.verdict.needs, "approve the push");
        assert_eq!(a.tempo, "blocked");
    }

    #[test]
    fn the_schema_sent_is_the_replys_and_unchanged_on_the_wire() {
        assert_eq!(
            answer_schema().schema,
            serde_json::json!({
                "type": "object",
                "properties": {
                    "state": {"type": "string", "enum": ["working", "blocked", "done", "failed"]},
                    "detail": {"type": "string", "maxLength": 64},
                    "tempo": {"type": "string", "enum": ["active", "idle", "blocked"]},
                    "needs": {"type": "string"},
                    "result": {"type": "string", "maxLength": 180},
                },
                "required": ["state", "detail", "tempo", "needs", "result"],
                "additionalProperties": false,
            })
        );
    }

    #[test]
    fn a_key_more_is_accepted() {
        let a =
            parse(r#"{"state":"done","detail":"pushed","confidence":0.9,"notes":["x"]}"#).unwrap();
        assert_eq!(a.verdict.category, Category::Done);
    }
}
