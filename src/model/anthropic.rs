//! The Anthropic Messages API wire format.

use serde_json::{json, Map, Value};

use super::{Block, Request, Response, Role, Usage};

const EPHEMERAL: &str = "ephemeral";

pub(super) fn body(model: &str, request: &Request) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(request.max_tokens));
    if !request.system.is_empty() {
        let system: Vec<Value> = request
            .system
            .iter()
            .map(|s| with_cache(json!({"type": "text", "text": s.text}), s.cache))
            .collect();
        body.insert("system".into(), Value::Array(system));
    }
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| {
            json!({
                "role": match m.role { Role::User => "user", Role::Assistant => "assistant" },
                "content": m.content.iter().map(block).collect::<Vec<_>>(),
            })
        })
        .collect();
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let last = request.tools.len() - 1;
        let tools: Vec<Value> = request
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                with_cache(
                    json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}),
                    request.cache_tools && i == last,
                )
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    Value::Object(body)
}

fn with_cache(mut value: Value, cache: bool) -> Value {
    if cache {
        value["cache_control"] = json!({"type": EPHEMERAL});
    }
    value
}

fn block(b: &Block) -> Value {
    match b {
        Block::Text { text, cache } => with_cache(json!({"type": "text", "text": text}), *cache),
        Block::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => json!({
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": content,
            "is_error": is_error,
        }),
    }
}

pub(super) fn parse(value: &Value) -> Result<Response, String> {
    if value.get("type").and_then(Value::as_str) == Some("error") {
        return Err(format!("error object in a success answer: {value}"));
    }
    let blocks = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or("answer has no content array")?;
    let mut content = Vec::new();
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => content.push(Block::text(
                b.get("text")
                    .and_then(Value::as_str)
                    .ok_or("text block without text")?,
            )),
            Some("tool_use") => content.push(Block::ToolUse {
                id: b
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or("tool_use without id")?
                    .to_string(),
                name: b
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or("tool_use without name")?
                    .to_string(),
                input: b.get("input").cloned().unwrap_or_else(|| json!({})),
            }),
            // thinking, redacted_thinking and future block types carry nothing we use.
            _ => {}
        }
    }
    let usage = value.get("usage");
    let count = |name: &str| {
        usage
            .and_then(|u| u.get(name))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Ok(Response {
        content,
        stop_reason: value
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        usage: Usage {
            input_tokens: count("input_tokens"),
            output_tokens: count("output_tokens"),
            cache_creation_input_tokens: count("cache_creation_input_tokens"),
            cache_read_input_tokens: count("cache_read_input_tokens"),

            cost_usd: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_shape_with_cache_marks_and_tools() {
        let request = super::super::sample_request();
        let b = body("m", &request);
        assert_eq!(b["model"], "m");
        assert_eq!(b["max_tokens"], 100);
        assert_eq!(b["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(b["tools"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(b["messages"][1]["content"][0]["type"], "tool_use");
        assert_eq!(b["messages"][2]["content"][0]["tool_use_id"], "t1");
        assert_eq!(b["messages"][2]["content"][0]["is_error"], true);
        assert!(b.get("temperature").is_none());
    }

    #[test]
    fn parses_text_tool_use_and_usage() {
        let answer = json!({
            "id": "msg_1", "type": "message", "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "/m"}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 7}
        });
        let r = parse(&answer).unwrap();
        assert_eq!(r.text(), "Let me look.");
        assert_eq!(r.content.len(), 2);
        assert_eq!(r.stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 10,
                output_tokens: 5,
                cache_creation_input_tokens: 3,
                cache_read_input_tokens: 7,
                cost_usd: None
            }
        );
        assert!(parse(&json!({"content": "no"})).is_err());
        assert!(parse(&json!({"type": "error", "error": {}})).is_err());
    }
}
