//! The OpenAI chat-completions wire format (llama.cpp, vLLM, Ollama and others speak it).

use serde_json::{json, Map, Value};

use super::{Block, Request, Response, ResponseFormat, Role, ToolSpec, Usage};

/// The request body. `format` is the structured-output form for a request with an answer
/// schema; `extra` (from `DREAMKIT_OPENAI_EXTRA_BODY`) adds server-specific fields such as
/// llama.cpp's `repeat_penalty`, never replacing the ones set here.
pub(super) fn body(
    model: &str,
    request: &Request,
    format: ResponseFormat,
    extra: &Map<String, Value>,
) -> Value {
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
                            "function": {"name": name, "arguments": arguments_text(input)},
                        })),
                        _ => None,
                    })
                    .collect();
                let mut msg = Map::new();
                msg.insert("role".into(), json!("assistant"));
                // An empty string, not null: llama-cpp-python answers HTTP 500 to an
                // assistant message whose content is null or absent; OpenAI takes either.
                msg.insert("content".into(), json!(text.join("\n")));
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
        // Explicit: some servers (llama-cpp-python) call no tool without it.
        body.insert("tool_choice".into(), json!("auto"));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(answer) = &request.answer_schema {
        match format {
            ResponseFormat::JsonSchema => {
                body.insert(
                    "response_format".into(),
                    json!({"type": "json_schema", "json_schema": {
                        "name": answer.name, "schema": answer.schema,
                    }}),
                );
            }
            ResponseFormat::JsonObjectSchema => {
                body.insert(
                    "response_format".into(),
                    json!({"type": "json_object", "schema": answer.schema}),
                );
            }
            ResponseFormat::Plain => {}
        }
    }
    for (key, value) in extra {
        body.entry(key.clone()).or_insert_with(|| value.clone());
    }
    Value::Object(body)
}

/// A tool call's arguments as the wire carries them: the JSON text, or the model's own text
/// when it was not JSON (kept as a string so the conversation replays what it wrote).
fn arguments_text(input: &Value) -> String {
    match input {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// The answer. Small models behind local servers answer in ways the API does not: an empty
/// or missing call id (one is made up), arguments that are not JSON (kept as the model's text,
/// which the tool then refuses with an error the model reads), or the call written as JSON
/// text in `content` instead of `tool_calls` (recognised when it names a tool offered).
pub(super) fn parse(value: &Value, tools: &[ToolSpec]) -> Result<Response, String> {
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or("answer has no choices")?;
    let message = choice.get("message").ok_or("choice has no message")?;
    let mut content = Vec::new();
    let text = match message.get("content") {
        Some(Value::String(text)) => text.as_str(),
        None | Some(Value::Null) => "",
        Some(_) => return Err("message content is not a string".into()),
    };
    // `function_call` (the legacy field) is ignored: llama-cpp-python fills it with a bogus
    // copy of a tool call.
    let mut ids = std::collections::HashSet::new();
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = call.get("function").ok_or("tool call without function")?;
        // An id given twice would answer two calls under one id: the second gets its own.
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty() && ids.insert(*id));
        content.push(tool_use(
            id,
            function
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            function.get("arguments"),
        ));
    }
    let mut stop_reason = choice
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
    if content.is_empty() {
        match calls_in_text(text, tools) {
            Some(calls) => {
                content = calls;
                if stop_reason.as_deref() == Some("end_turn") {
                    stop_reason = Some("tool_use".into());
                }
            }
            None if !text.is_empty() => content.push(Block::text(text)),
            None => {}
        }
    } else if !text.is_empty() {
        content.insert(0, Block::text(text));
    }
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

            cost_usd: None,
        },
    })
}

/// One tool call. Arguments arrive as JSON text (the API), as an object (some servers), or
/// not at all; text that is not a JSON object is kept as a string for the tool to refuse.
fn tool_use(id: Option<&str>, name: &str, arguments: Option<&Value>) -> Block {
    let input = match arguments {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(raw)) if raw.trim().is_empty() => json!({}),
        Some(Value::String(raw)) => match serde_json::from_str::<Value>(raw) {
            Ok(parsed @ Value::Object(_)) => parsed,
            _ => Value::String(raw.clone()),
        },
        Some(other) => other.clone(),
    };
    Block::ToolUse {
        id: id.map_or_else(new_call_id, str::to_string),
        name: name.to_string(),
        input,
    }
}

fn new_call_id() -> String {
    format!("call_{}", uuid::Uuid::new_v4().simple())
}

/// Tool calls a model wrote as text: `{"name": T, "arguments": {...}}` (or `parameters`), a
/// list of them, or either inside a code fence or `<tool_call>` tags, where every `T` is a
/// tool that was offered. Anything else is text.
fn calls_in_text(text: &str, tools: &[ToolSpec]) -> Option<Vec<Block>> {
    if tools.is_empty() {
        return None;
    }
    let body = unwrapped(text, &[TOOL_CALL_TAGS, JSON_FENCE, FENCE]);
    if !body.starts_with(['{', '[']) {
        return None;
    }
    let value: Value = serde_json::from_str(body).ok()?;
    let items = match value {
        Value::Array(items) => items,
        one => vec![one],
    };
    let mut calls = Vec::new();
    for item in &items {
        let name = item.get("name").and_then(Value::as_str)?;
        if !tools.iter().any(|t| t.name == name) {
            return None;
        }
        let arguments = item.get("arguments").or_else(|| item.get("parameters"));
        calls.push(tool_use(None, name, arguments));
    }
    (!calls.is_empty()).then_some(calls)
}

/// Whether a reply is one JSON object (a code fence around it tolerated): what a server that
/// honours `response_format` returns.
pub(super) fn holds_json_object(text: &str) -> bool {
    let body = unwrapped(text, &[JSON_FENCE, FENCE]);
    matches!(serde_json::from_str::<Value>(body), Ok(Value::Object(_)))
}

const TOOL_CALL_TAGS: (&str, &str) = ("<tool_call>", "</tool_call>");
const JSON_FENCE: (&str, &str) = ("```json", "```");
const FENCE: (&str, &str) = ("```", "```");

/// `text` trimmed, and out of the first of `wrappers` (opening, closing) that encloses it all.
fn unwrapped<'t>(text: &'t str, wrappers: &[(&str, &str)]) -> &'t str {
    let body = text.trim();
    wrappers
        .iter()
        .find_map(|(open, close)| {
            body.strip_prefix(open)
                .and_then(|rest| rest.trim_end().strip_suffix(close))
        })
        .map_or(body, str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AnswerSchema;

    /// A response captured from llama-cpp-python 0.3.36 (tests/fixtures/llama-cpp-server).
    fn captured(name: &str) -> Value {
        let path = format!(
            "{}/tests/fixtures/llama-cpp-server/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let fixture: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        fixture["response"].clone()
    }

    fn offered() -> Vec<ToolSpec> {
        ["shell", "write_file"]
            .map(|name| ToolSpec {
                name: name.into(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
            })
            .to_vec()
    }

    #[test]
    fn request_shape() {
        let request = Request {
            temperature: Some(0.0),
            ..super::super::sample_request()
        };
        let extra = json!({"repeat_penalty": 1.0, "temperature": 0.7})
            .as_object()
            .unwrap()
            .clone();
        let b = body("llama", &request, ResponseFormat::Plain, &extra);
        let m = &b["messages"];
        assert_eq!(m[0], json!({"role": "system", "content": "stable"}));
        assert_eq!(m[1], json!({"role": "user", "content": "hi"}));
        assert_eq!(
            m[2]["tool_calls"][0]["function"]["arguments"],
            "{\"path\":\".\"}"
        );
        // llama-cpp-python refuses a null content with HTTP 500.
        assert_eq!(m[2]["content"], "");
        assert_eq!(
            m[3],
            json!({"role": "tool", "tool_call_id": "t1", "content": "error: a.md"})
        );
        assert_eq!(b["tools"][0]["function"]["parameters"]["type"], "object");
        assert_eq!(b["tool_choice"], "auto");
        assert_eq!(b["max_tokens"], 100);
        // The extra fields add, never replace.
        assert_eq!(
            (b["temperature"].clone(), b["repeat_penalty"].clone()),
            (json!(0.0), json!(1.0))
        );
        assert!(b.get("response_format").is_none());
    }

    #[test]
    fn response_format_forms() {
        let mut request = Request::one_shot("s", "u".into(), 10);
        let schema = json!({"type": "object", "properties": {"state": {"type": "string"}}});
        let none = Map::new();
        assert!(body("m", &request, ResponseFormat::JsonSchema, &none)
            .get("response_format")
            .is_none());
        request.answer_schema = Some(AnswerSchema {
            name: "turn_status",
            schema: schema.clone(),
        });
        assert_eq!(
            body("m", &request, ResponseFormat::JsonSchema, &none)["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "turn_status", "schema": schema}})
        );
        assert_eq!(
            body("m", &request, ResponseFormat::JsonObjectSchema, &none)["response_format"],
            json!({"type": "json_object", "schema": schema})
        );
        assert!(body("m", &request, ResponseFormat::Plain, &none)
            .get("response_format")
            .is_none());
        assert!(body("m", &request, ResponseFormat::Plain, &none)
            .get("tool_choice")
            .is_none());
    }

    #[test]
    fn parses_choices_tool_calls_and_usage() {
        let answer = json!({
            "choices": [{"message": {"role": "assistant", "content": "ok", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\":\"/m\"}"}}
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 60}}
        });
        let r = parse(&answer, &[]).unwrap();
        assert_eq!(r.text(), "ok");
        assert_eq!(r.stop_reason.as_deref(), Some("tool_use"));
        assert!(
            matches!(&r.content[1], Block::ToolUse { name, id, .. } if name == "ls" && id == "c1")
        );
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 40,
                output_tokens: 7,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 60,
                cost_usd: None
            }
        );
        assert!(parse(&json!({"choices": []}), &[]).is_err());
    }

    #[test]
    fn a_real_llama_cpp_tool_call_ignores_the_legacy_function_call() {
        let r = parse(&captured("tools-write-file.json"), &offered()).unwrap();
        assert_eq!(r.stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(r.content.len(), 1, "{:?}", r.content);
        let Block::ToolUse { id, name, input } = &r.content[0] else {
            panic!("{:?}", r.content)
        };
        assert!(id.starts_with("call__0_write_file_cmpl-"), "{id}");
        assert_eq!(name, "write_file");
        assert!(input.is_object(), "{input}");
        assert_eq!(
            r.usage.input_tokens,
            captured("tools-write-file.json")["usage"]["prompt_tokens"]
                .as_u64()
                .unwrap()
        );
    }

    #[test]
    fn weak_model_tool_calls_become_calls_the_tools_can_refuse() {
        // Malformed arguments, an empty id, no name.
        let answer = json!({"choices": [{"message": {"content": null, "tool_calls": [
            {"id": "", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\": \"a.md\", "}},
            {"type": "function", "function": {"arguments": {"command": "ls"}}}
        ]}, "finish_reason": "tool_calls"}]});
        let r = parse(&answer, &offered()).unwrap();
        let [Block::ToolUse { id: a, name, input }, Block::ToolUse {
            id: b,
            name: none,
            input: object,
        }] = &r.content[..]
        else {
            panic!("{:?}", r.content)
        };
        assert!(a.starts_with("call_") && a.len() > 10 && a != b, "{a} {b}");
        assert_eq!(name, "write_file");
        assert_eq!(input, &json!("{\"path\": \"a.md\", "));
        assert_eq!((none.as_str(), object), ("", &json!({"command": "ls"})));
        // One id given twice: the second call gets one of its own.
        let twice = json!({"choices": [{"message": {"tool_calls": [
            {"id": "a", "function": {"name": "shell", "arguments": "{}"}},
            {"id": "a", "function": {"name": "shell", "arguments": "{}"}}
        ]}, "finish_reason": "tool_calls"}]});
        let r = parse(&twice, &offered()).unwrap();
        let ids: Vec<&str> = r
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids[0], "a");
        assert!(ids[1].starts_with("call_"), "{ids:?}");
        // Replayed as the model wrote it.
        assert_eq!(arguments_text(input), "{\"path\": \"a.md\", ");
    }

    #[test]
    fn a_tool_call_written_as_json_text_is_a_call() {
        // Captured: SmolLM2 with its own chat template writes the call into content.
        let r = parse(
            &captured("plain-tools-json-in-content-fewshot.json"),
            &offered(),
        )
        .unwrap();
        assert_eq!(r.stop_reason.as_deref(), Some("tool_use"));
        let [Block::ToolUse { id, name, input }] = &r.content[..] else {
            panic!("{:?}", r.content)
        };
        assert!(id.starts_with("call_"));
        assert_eq!((name.as_str(), input), ("shell", &json!({"command": "ls"})));
        for text in [
            "```json\n{\"name\": \"shell\", \"arguments\": \"{\\\"command\\\": \\\"ls\\\"}\"}\n```",
            "<tool_call>\n{\"name\": \"shell\", \"parameters\": {\"command\": \"ls\"}}\n</tool_call>",
            "[{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}]",
        ] {
            let calls = calls_in_text(text, &offered()).unwrap_or_else(|| panic!("{text}"));
            assert!(
                matches!(&calls[..], [Block::ToolUse { name, input, .. }] if name == "shell" && input == &json!({"command": "ls"})),
                "{text}: {calls:?}"
            );
        }
        // Not a call: a tool that was not offered, prose, no tools offered, plain JSON.
        for text in [
            "{\"name\": \"rm\", \"arguments\": {}}",
            "I would call shell with ls.",
            "{\"state\": \"done\"}",
        ] {
            assert!(calls_in_text(text, &offered()).is_none(), "{text}");
        }
        assert!(calls_in_text("{\"name\": \"shell\", \"arguments\": {}}", &[]).is_none());
        let prose = parse(&captured("plain-tools-json-in-content.json"), &offered()).unwrap();
        assert!(matches!(&prose.content[..], [Block::Text { .. }]));
        assert_eq!(prose.stop_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn an_empty_content_is_no_block() {
        let r = parse(&captured("tools-no-call.json"), &offered()).unwrap();
        assert!(r.content.is_empty());
        assert_eq!(r.stop_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn json_objects_are_told_from_text() {
        assert!(holds_json_object("{\"a\": 1}"));
        assert!(holds_json_object(" ```json\n{\"a\": 1}\n``` "));
        assert!(!holds_json_object("Sure: {\"a\": 1}"));
        assert!(!holds_json_object("[1]"));
        assert!(!holds_json_object("{\"a\": "));
    }
}
