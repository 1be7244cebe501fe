//! Builds Claude Code transcripts line by line, shaped like the real 2.1.332 records.

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

pub(crate) const SESSION: &str = "5863f677-7155-4b7d-aec0-5407794eb905";

pub(crate) struct Transcript {
    lines: Vec<Value>,
    at: SystemTime,
    n: u32,
}

impl Transcript {
    /// Records start `age` ago, one second apart.
    pub(crate) fn started(age: Duration) -> Self {
        Transcript {
            lines: Vec::new(),
            at: SystemTime::now() - age,
            n: 0,
        }
    }

    fn base(&mut self, kind: &str) -> Value {
        self.n += 1;
        self.at += Duration::from_secs(1);
        let ms = self
            .at
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let parent = self.lines.iter().rev().find_map(|l| l.get("uuid").cloned());
        json!({
            "parentUuid": parent,
            "isSidechain": false,
            "type": kind,
            "uuid": format!("00000000-0000-4000-9000-{:012}", self.n),
            "timestamp": timestamp(ms),
            "userType": "external",
            "cwd": "/home/dev/proj",
            "sessionId": SESSION,
            "version": "2.1.332",
        })
    }

    pub(crate) fn user(mut self, text: &str) -> Self {
        let mut r = self.base("user");
        r["message"] = json!({"role": "user", "content": text});
        self.lines.push(r);
        self
    }

    pub(crate) fn assistant(self, text: &str) -> Self {
        let id = format!("msg_{}", self.n);
        self.assistant_block(&id, json!({"type": "text", "text": text}))
    }

    /// One API response written as a text record and a tool_use record sharing message.id.
    pub(crate) fn assistant_tool(mut self, text: &str, tool: &str, input: Value) -> Self {
        let id = format!("msg_{}", self.n);
        self = self.assistant_block(&id, json!({"type": "text", "text": text}));
        self.assistant_block(
            &id,
            json!({"type": "tool_use", "id": "toolu_1", "name": tool, "input": input}),
        )
    }

    fn assistant_block(self, id: &str, block: Value) -> Self {
        let usage = json!({"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 500});
        self.assistant_record(id, block, usage)
    }

    fn assistant_record(mut self, id: &str, block: Value, usage: Value) -> Self {
        let mut r = self.base("assistant");
        r["message"] = json!({
            "id": id, "role": "assistant", "model": "claude-sonnet-4-5", "type": "message",
            "content": [block],
            "usage": usage
        });
        self.lines.push(r);
        self
    }

    /// An assistant text reply whose `message.usage` is `usage` (for the cache gates).
    pub(crate) fn assistant_with_usage(self, text: &str, usage: Value) -> Self {
        let id = format!("msg_{}", self.n);
        self.assistant_record(&id, json!({"type": "text", "text": text}), usage)
    }

    /// An API error as Claude Code writes it: a synthetic assistant record.
    pub(crate) fn api_error(mut self, text: &str) -> Self {
        let mut r = self.base("assistant");
        r["isApiErrorMessage"] = json!(true);
        r["error"] = json!("overloaded");
        r["message"] = json!({
            "id": uuid_like(self.n), "role": "assistant", "model": "<synthetic>", "type": "message",
            "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        });
        self.lines.push(r);
        self
    }

    /// A `/compact` boundary: what came before is summarised away.
    pub(crate) fn compact_boundary(mut self) -> Self {
        let mut r = self.base("system");
        r["subtype"] = json!("compact_boundary");
        r["content"] = json!("Conversation compacted");
        self.lines.push(r);
        self
    }

    pub(crate) fn tool_result(mut self, output: &str) -> Self {
        let mut r = self.base("user");
        r["message"] = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": output}]});
        r["toolUseResult"] = json!({"stdout": output});
        self.lines.push(r);
        self
    }

    pub(crate) fn slash_command(mut self, name: &str) -> Self {
        let mut caveat = self.base("user");
        caveat["isMeta"] = json!(true);
        caveat["message"] = json!({"role": "user", "content": "<local-command-caveat>Caveat</local-command-caveat>"});
        self.lines.push(caveat);
        let mut cmd = self.base("user");
        cmd["message"] =
            json!({"role": "user", "content": format!("<command-name>/{name}</command-name>")});
        self.lines.push(cmd);
        self
    }

    pub(crate) fn away_summary(mut self, text: &str) -> Self {
        let mut r = self.base("system");
        r["subtype"] = json!("away_summary");
        r["content"] = json!(text);
        r["isMeta"] = json!(false);
        self.lines.push(r);
        self
    }

    /// The non-message records a session usually ends with.
    pub(crate) fn session_end_noise(mut self) -> Self {
        let mut hook = self.base("system");
        hook["subtype"] = json!("stop_hook_summary");
        self.lines.push(hook);
        self.lines
            .push(json!({"type": "last-prompt", "lastPrompt": "x", "sessionId": SESSION}));
        self.lines
            .push(json!({"type": "cost-state", "totalCostUSD": 0.1, "sessionId": SESSION}));
        self
    }

    pub(crate) fn write(&self, path: &Path) {
        let mut text = String::new();
        for line in &self.lines {
            text.push_str(&line.to_string());
            text.push('\n');
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// The uuid of the last record that has one.
    pub(crate) fn last_uuid(&self) -> String {
        self.lines
            .iter()
            .rev()
            .find_map(|l| l["uuid"].as_str())
            .unwrap()
            .to_string()
    }
}

fn uuid_like(n: u32) -> String {
    format!("00000000-0000-4000-a000-{n:012}")
}

/// RFC 3339 with milliseconds, as Claude Code writes it.
pub(crate) fn timestamp(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let dt = time::OffsetDateTime::from_unix_timestamp(secs).unwrap();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        dt.year(),
        u8::from(dt.month()),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        ms.rem_euclid(1000)
    )
}
