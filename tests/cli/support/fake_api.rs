//! A local HTTP server that speaks the Anthropic Messages API and the OpenAI
//! chat-completions API with scripted replies, records every request, and injects faults.
//! Loopback only; every wait is bounded.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// What the server does with the next request.
pub(crate) enum Reply {
    /// A complete answer.
    Http {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Reads the request, then says nothing for this long and closes.
    Hang(Duration),
    /// Promises `Content-Length` bytes, sends half of the body, closes.
    Truncated { status: u16, body: String },
    /// Runs `before` (e.g. appends to a transcript), then answers with `then`.
    After(Box<dyn FnOnce() + Send>, Box<Reply>),
    /// A 200 whose body is `bytes` long (a JSON string that never ends in time), streamed
    /// without holding it in memory; `announce` sends its Content-Length, else it is chunked
    /// by closing the connection at the end.
    Huge { bytes: usize, announce: bool },
}

impl Reply {
    pub(crate) fn json(status: u16, body: Value) -> Reply {
        Reply::Http {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    pub(crate) fn with_header(self, name: &str, value: &str) -> Reply {
        match self {
            Reply::Http {
                status,
                mut headers,
                body,
            } => {
                headers.push((name.to_string(), value.to_string()));
                Reply::Http {
                    status,
                    headers,
                    body,
                }
            }
            other => other,
        }
    }

    /// A Messages API answer with one text block.
    pub(crate) fn anthropic_text(text: &str) -> Reply {
        Reply::json(
            200,
            json!({
                "id": "msg_test", "type": "message", "role": "assistant", "model": "test",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 120, "output_tokens": 18,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 40}
            }),
        )
    }

    /// A Messages API answer that calls tools (`stop_reason: tool_use`), with a short text.
    pub(crate) fn anthropic_tools(text: &str, calls: &[(&str, Value)]) -> Reply {
        static NEXT_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let mut content = vec![json!({"type": "text", "text": text})];
        for (name, input) in calls {
            let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
            content.push(json!({"type": "tool_use", "id": format!("toolu_{id:04}"), "name": name, "input": input}));
        }
        Reply::json(
            200,
            json!({
                "id": "msg_tools", "type": "message", "role": "assistant", "model": "test",
                "content": content,
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 900, "output_tokens": 60,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 3000}
            }),
        )
    }

    /// A chat-completions answer with one message.
    pub(crate) fn openai_text(text: &str) -> Reply {
        Reply::json(
            200,
            json!({
                "id": "chatcmpl-test", "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 90, "completion_tokens": 12, "total_tokens": 102}
            }),
        )
    }

    /// A reply captured from the real llama-cpp-python server
    /// (`tests/fixtures/llama-cpp-server/NAME`): its status and body, byte for byte the
    /// shape the real server sends.
    pub(crate) fn captured(name: &str) -> Reply {
        let path = format!(
            "{}/tests/fixtures/llama-cpp-server/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let fixture: Value =
            serde_json::from_slice(&std::fs::read(&path).expect("fixture")).expect("fixture JSON");
        let status = fixture["status"].as_u64().expect("a captured status");
        Reply::json(
            u16::try_from(status).expect("status"),
            fixture["response"].clone(),
        )
    }

    /// A chat-completions answer as llama-cpp-python sends it, `message` given.
    pub(crate) fn openai_message(message: Value, finish_reason: &str) -> Reply {
        Reply::json(
            200,
            json!({
                "id": "chatcmpl-test", "object": "chat.completion", "created": 1796322616,
                "model": "smollm2-135m-instruct",
                "choices": [{"index": 0, "message": message, "logprobs": null,
                             "finish_reason": finish_reason}],
                "usage": {"prompt_tokens": 276, "completion_tokens": 9, "total_tokens": 285}
            }),
        )
    }

    /// An API error in the Messages API's shape.
    pub(crate) fn error(status: u16, kind: &str, message: &str) -> Reply {
        Reply::json(
            status,
            json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }

    pub(crate) fn malformed() -> Reply {
        Reply::Http {
            status: 200,
            headers: Vec::new(),
            body: "{\"content\": [oops".into(),
        }
    }
}

/// One request as received.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub method: String,
    pub path: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    requests: Vec<Recorded>,
}

pub(crate) struct FakeApi {
    port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl FakeApi {
    pub(crate) fn start() -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let s = s.clone();
                std::thread::spawn(move || serve(stream, &s));
            }
        });
        FakeApi { port, state, stop }
    }

    /// `http://127.0.0.1:PORT` (the Anthropic base URL; OpenAI's adds `/v1`).
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn push(&self, reply: Reply) -> &Self {
        self.state.lock().expect("state").replies.push_back(reply);
        self
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.state.lock().expect("state").requests.clone()
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Some(recorded) = read_request(&stream) else {
        return;
    };
    let reply = {
        let mut state = state.lock().expect("state");
        state.requests.push(recorded);
        state.replies.pop_front()
    };
    let reply = reply.unwrap_or_else(|| Reply::error(500, "api_error", "no scripted reply left"));
    respond(&stream, reply);
}

fn respond(mut stream: &TcpStream, reply: Reply) {
    match reply {
        Reply::After(before, then) => {
            before();
            respond(stream, *then);
        }
        Reply::Hang(duration) => std::thread::sleep(duration),
        Reply::Huge { bytes, announce } => {
            let mut head =
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
                    .to_string();
            if announce {
                head.push_str(&format!("content-length: {bytes}\r\n"));
            }
            head.push_str("\r\n");
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            let block = vec![b'a'; 64 * 1024];
            let mut sent = 0;
            let _ = stream.write_all(b"{\"content\":\"");
            while sent < bytes {
                let n = block.len().min(bytes - sent);
                // The client hanging up (it stopped reading) ends the reply.
                if stream.write_all(&block[..n]).is_err() {
                    return;
                }
                sent += n;
            }
        }
        Reply::Truncated { status, body } => {
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body.as_bytes()[..body.len() / 2]);
        }
        Reply::Http {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
        }
    }
    let _ = stream.flush();
}

fn read_request(stream: &TcpStream) -> Option<Recorded> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_string());
        if name == "content-length" {
            length = value.parse().ok()?;
        }
        headers.push((name, value));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Recorded {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}
