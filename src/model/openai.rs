//! The OpenAI chat-completions wire format (llama.cpp, vLLM, Ollama and others speak it).

use serde_json::{json, Map, Value};

use super::{Block, Request, Response, Role, Usage};

pub(super) fn body(model: &str, request: &Request) -> Value {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        let text: Vec<&str> = request.system.iter().map(|s| s.text.as_str()).collect();
        messages.push(json!({"role": "system", "content": text.join("\n\n")}));
    }
    for m in &request.messages {
        let text: Vec<&str> = m
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        match m.role {
            Role::User => {
                // Tool results are messages of their own in this API.
                for b in &m.content {
                    if let Block::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } = b
                    {
                        let content = if *is_error {
                            format!("error: {content}")
                        } else {
                            content.clone()
                        };
                        messages.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
                    }
                }
                if !text.is_empty() {
                    messages.push(json!({"role": "user", "content": text.join("\n")}));
                }
            }
            Role::Assistant => {
                let calls: Vec<Value> = m
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::ToolUse { id, name, input } => Some(json!({
                            "id": id,
                            "type": "function",
                            "function": {"name": name, "arguments": input.to_string()},
                        })),
                        _ => None,
                    })
                    .collect();
                let mut msg = Map::new();
                msg.insert("role".into(), json!("assistant"));
                msg.insert(
                    "content".into(),
                    if text.is_empty() {
                        Value::Null
                    } else {
                        json!(text.join("\n"))
                    },
                );
                if !calls.is_empty() {
                    msg.insert("tool_calls".into(), Value::Array(calls));
                }
                messages.push(Value::Object(msg));
            }
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(request.max_tokens));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema,
                }})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    Value::Object(body)
}

pub(super) fn parse(value: &Value) -> Result<Response, String> {
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or("answer has no choices")?;
    let message = choice.get("message").ok_or("choice has no message")?;
    let mut content = Vec::new();
    match message.get("content") {
        Some(Value::String(text)) if !text.is_empty() => content.push(Block::text(text.as_str())),
        None | Some(Value::Null | Value::String(_)) => {}
        Some(_) => return Err("message content is not a string".into()),
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = call.get("function").ok_or("tool call without function")?;
        let arguments = function
            .get("arguments")
            .and_then(Value::as_str)
            .unwrap_or("{}");
        content.push(Block::ToolUse {
            id: call
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            name: function
                .get("name")
                .and_then(Value::as_str)
                .ok_or("tool call without name")?
                .to_string(),
            input: serde_json::from_str(arguments)
                .map_err(|e| format!("tool call arguments are not JSON: {e}"))?,
        });
    }
    let stop_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(|r| {
            match r {
                "stop" => "end_turn",
                "tool_calls" => "tool_use",
                "length" => "max_tokens",
                other => other,
            }
            .to_string()
        });
    let usage = value.get("usage");
    let count = |path: &str| {
        usage
            .and_then(|u| u.pointer(path))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let cached = count("/prompt_tokens_details/cached_tokens");
    Ok(Response {
        content,
        stop_reason,
        usage: Usage {
            input_tokens: count("/prompt_tokens").saturating_sub(cached),
            output_tokens: count("/completion_tokens"),
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: cached,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_shape() {
        let request = Request {
            temperature: Some(0.0),
            ..super::super::sample_request()
        };
        let b = body("llama", &request);
        let m = &b["messages"];
        assert_eq!(m[0], json!({"role": "system", "content": "stable"}));
        assert_eq!(m[1], json!({"role": "user", "content": "hi"}));
        assert_eq!(
            m[2]["tool_calls"][0]["function"]["arguments"],
            "{\"path\":\".\"}"
        );
        assert_eq!(m[2]["content"], Value::Null);
        assert_eq!(
            m[3],
            json!({"role": "tool", "tool_call_id": "t1", "content": "error: a.md"})
        );
        assert_eq!(b["tools"][0]["function"]["parameters"]["type"], "object");
        assert_eq!(b["temperature"], 0.0);
    }

    #[test]
    fn parses_choices_tool_calls_and_usage() {
        let answer = json!({
            "choices": [{"message": {"role": "assistant", "content": "ok", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\":\"/m\"}"}}
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 60}}
        });
        let r = parse(&answer).unwrap();
        assert_eq!(r.text(), "ok");
        assert_eq!(r.stop_reason.as_deref(), Some("tool_use"));
        assert!(matches!(&r.content[1], Block::ToolUse { name, .. } if name == "ls"));
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 40,
                output_tokens: 7,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 60
            }
        );
        assert!(parse(&json!({"choices": []})).is_err());
        let bad_args = json!({"choices": [{"message": {"tool_calls": [{"function": {"name": "x", "arguments": "{"}}]}}]});
        assert!(parse(&bad_args).is_err());
    }
}
