//! The MCP relay of `--provider claude` runs: how the agent's five sandboxed tools reach the
//! user's Claude Code client, which runs the agent loop itself.
//!
//! ```text
//! claude -p ──stdio, MCP (JSON-RPC 2.0)──> dream-run tool-relay ──relay.sock──> dream-run
//!                                           (serve)                             (Listener)
//! ```
//!
//! Two ends, both here:
//!
//! * [`serve`]: the stdio MCP server the client starts (`dream-run tool-relay --socket PATH`).
//!   It answers `initialize`, `ping` and `tools/list` itself and forwards each `tools/call`
//!   over the socket. Newline-delimited JSON-RPC 2.0 on stdin and stdout, as MCP's stdio
//!   transport defines it; nothing else is ever written to stdout, diagnostics go to stderr.
//! * [`Listener`]: the socket inside the running dream-run, in a private directory, handing
//!   each forwarded call to the run as a [`Call`] to [answer](Call::answer).
//!
//! Between the two, one JSON object per line: `{"name", "arguments"}` one way,
//! `{"content", "is_error"}` back; private to this module.
//!
//! The relay is sequential: it forwards one call and waits for its answer before it reads the
//! next line, so answers go out in the order the requests came (the sandbox runs one tool at
//! a time anyway). A `ping` sent while a call runs is answered when the call is. Cancellation
//! (`notifications/cancelled`) is not honoured: the call runs on and its answer is sent. No
//! async runtime, std threads only.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::sandbox::Sandbox;
use crate::cli::{Context, Exit, Failure, Report};

/// The MCP protocol versions the relay speaks, newest first: a client asking for one of
/// these gets it back, any other gets the newest.
/// 2025-11-25 is what Claude Code 2.1.332 asks for (after its `server/discover` probe, which
/// gets -32601 here).
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The longest line read, on stdin or the socket: a longer one is refused (and skipped to its
/// end) instead of being held in memory.
pub const MAX_LINE_BYTES: usize = 8 << 20;

/// The socket's name inside the listener's private directory.
pub const SOCKET_NAME: &str = "relay.sock";

/// What a call answers when the run ended before running it.
pub const NOT_RUN: &str = "not run: the run ended";

/// What a call answers when the socket to dream-run is gone.
pub const GONE: &str = "dream-run is gone";

/// JSON-RPC 2.0 error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// Why [`serve`] stopped before stdin's end.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The socket of the running dream-run could not be reached (exit 3).
    #[error("cannot connect to dream-run at {}: {source}", path.display())]
    Connect { path: PathBuf, source: io::Error },
    /// stdin could not be read.
    #[error("cannot read stdin: {0}")]
    Stdin(io::Error),
    /// stdout could not be written: the client is gone.
    #[error("cannot write stdout: {0}")]
    Stdout(io::Error),
}

// ---------------------------------------------------------------------------------------
// The wire between the relay and dream-run.

#[derive(Serialize, Deserialize)]
struct WireRequest {
    name: String,
    #[serde(default)]
    arguments: Value,
}

#[derive(Serialize, Deserialize)]
struct WireReply {
    content: String,
    is_error: bool,
}

/// One line read under the cap.
enum Line {
    Eof,
    /// The line, without its newline (a last line without one counts too).
    Text(Vec<u8>),
    /// Over `cap`: what was read of it was dropped, and the rest up to its newline skipped.
    TooLong,
}

/// Reads one `\n`-terminated line of at most `cap` bytes, never holding more than that.
fn read_line_capped(input: &mut impl BufRead, cap: usize) -> io::Result<Line> {
    let mut line = Vec::new();
    let mut over = false;
    loop {
        let buf = match input.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(match (over, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Text(line),
            });
        }
        let (chunk, used, done) = match memchr::memchr(b'\n', buf) {
            Some(at) => (&buf[..at], at + 1, true),
            None => (buf, buf.len(), false),
        };
        if !over {
            if line.len() + chunk.len() > cap {
                over = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        input.consume(used);
        if done {
            return Ok(if over {
                Line::TooLong
            } else {
                Line::Text(line)
            });
        }
    }
}

/// Writes `value` as one line and flushes it.
fn write_line(output: &mut impl Write, value: &impl Serialize) -> io::Result<()> {
    let mut bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    output.write_all(&bytes)?;
    output.flush()
}

// ---------------------------------------------------------------------------------------
// The relay: the stdio MCP server.

/// Runs the stdio MCP server until stdin ends: connects to dream-run's socket once (an error
/// when it cannot: nothing is read or written then), then answers every JSON-RPC line of
/// `input` on `output`.
///
/// When the socket drops mid-run (dream-run ended or died), the relay keeps answering until
/// stdin's end, so the client never waits on a dead pipe: every later `tools/call` answers
/// `isError` with "dream-run is gone"; `initialize`, `ping` and `tools/list` still answer.
/// It then ends as on any clean EOF (`Ok`), after one line on stderr saying the socket went.
pub fn serve(socket: &Path, input: impl BufRead, output: impl Write) -> Result<(), RelayError> {
    let stream = UnixStream::connect(socket).map_err(|source| RelayError::Connect {
        path: socket.to_path_buf(),
        source,
    })?;
    Relay::new(stream).serve(input, output)
}

/// The relay's end of the socket; `None` once it dropped.
struct Relay {
    socket: Option<(BufReader<UnixStream>, UnixStream)>,
    /// What went wrong with the socket, said once on stderr.
    gone: Option<String>,
}

/// A JSON-RPC answer: a result or an error, for the request's id.
enum Answer {
    Result(Value),
    Error(i64, String),
}

impl Relay {
    fn new(stream: UnixStream) -> Self {
        let socket = stream
            .try_clone()
            .ok()
            .map(|writer| (BufReader::new(stream), writer));
        Relay { socket, gone: None }
    }

    fn serve(mut self, mut input: impl BufRead, mut output: impl Write) -> Result<(), RelayError> {
        loop {
            let line = match read_line_capped(&mut input, MAX_LINE_BYTES) {
                Ok(Line::Eof) => return Ok(()),
                Ok(Line::Text(line)) => line,
                Ok(Line::TooLong) => {
                    let message = format!("line over {} MiB refused", MAX_LINE_BYTES >> 20);
                    diag(&message);
                    respond(
                        &mut output,
                        &Value::Null,
                        Answer::Error(PARSE_ERROR, message),
                    )?;
                    continue;
                }
                Err(e) => return Err(RelayError::Stdin(e)),
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Some((id, answer)) = self.handle(&line) {
                respond(&mut output, &id, answer)?;
            }
        }
    }

    /// The answer to one line, with the id it goes to; `None` for a notification (or a
    /// response from the client, which the relay never asked for).
    fn handle(&mut self, line: &[u8]) -> Option<(Value, Answer)> {
        let message: Value = match serde_json::from_slice(line) {
            Ok(message) => message,
            Err(e) => {
                return Some((
                    Value::Null,
                    Answer::Error(PARSE_ERROR, format!("parse error: {e}")),
                ))
            }
        };
        let invalid = |id: Value, why: &str| Some((id, Answer::Error(INVALID_REQUEST, why.into())));
        let Value::Object(message) = message else {
            return match message {
                Value::Array(_) => invalid(Value::Null, "batches are not supported"),
                _ => invalid(Value::Null, "a request must be a JSON object"),
            };
        };
        let id = message.get("id").cloned();
        if let Some(id) = &id {
            if !matches!(id, Value::String(_) | Value::Number(_)) {
                return invalid(Value::Null, "id must be a string or a number");
            }
        }
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return invalid(id.unwrap_or(Value::Null), "jsonrpc must be \"2.0\"");
        }
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            if message.contains_key("result") || message.contains_key("error") {
                return None;
            }
            return invalid(id.unwrap_or(Value::Null), "method must be a string");
        };
        // A notification (`notifications/initialized`, `notifications/cancelled`, any
        // other) is never answered, known or not.
        let id = id?;
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        if !matches!(params, Value::Object(_) | Value::Null) {
            return Some((
                id,
                Answer::Error(INVALID_PARAMS, "params must be an object".into()),
            ));
        }
        let answer = match method {
            "initialize" => Answer::Result(initialize(&params)),
            "ping" => Answer::Result(json!({})),
            "tools/list" => Answer::Result(tools_list()),
            "tools/call" => self.call(&params),
            _ => Answer::Error(METHOD_NOT_FOUND, format!("method not found: {method}")),
        };
        Some((id, answer))
    }

    /// `tools/call`: forwarded to dream-run, its answer as MCP's tool result.
    fn call(&mut self, params: &Value) -> Answer {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Answer::Error(INVALID_PARAMS, "params.name must be a string".into());
        };
        if !Sandbox::tool_specs().iter().any(|spec| spec.name == name) {
            return Answer::Error(INVALID_PARAMS, format!("unknown tool: {name}"));
        }
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(arguments @ Value::Object(_)) => arguments.clone(),
            Some(_) => {
                return Answer::Error(INVALID_PARAMS, "params.arguments must be an object".into())
            }
        };
        let request = WireRequest {
            name: name.to_string(),
            arguments,
        };
        let (content, is_error) = match self.forward(&request) {
            Ok(reply) => (reply.content, reply.is_error),
            Err(why) => {
                if self.gone.is_none() {
                    diag(&format!("{GONE}: {why}"));
                    self.gone = Some(why);
                }
                self.socket = None;
                (
                    format!("{GONE}: the run ended; this tool call was not run"),
                    true,
                )
            }
        };
        Answer::Result(json!({
            "content": [{"type": "text", "text": content}],
            "isError": is_error,
        }))
    }

    /// One request over the socket and its reply; `Err` when the socket is gone.
    fn forward(&mut self, request: &WireRequest) -> Result<WireReply, String> {
        if let Some(why) = &self.gone {
            return Err(why.clone());
        }
        let Some((reader, writer)) = &mut self.socket else {
            return Err("the socket could not be used".into());
        };
        write_line(writer, request).map_err(|e| format!("cannot write to the socket: {e}"))?;
        match read_line_capped(reader, MAX_LINE_BYTES) {
            Ok(Line::Text(line)) => serde_json::from_slice(&line)
                .map_err(|e| format!("dream-run answered something unreadable: {e}")),
            Ok(Line::Eof) => Err("the socket closed".into()),
            Ok(Line::TooLong) => Err("dream-run answered a line over the cap".into()),
            Err(e) => Err(format!("cannot read the socket: {e}")),
        }
    }
}

/// A diagnostic line on stderr, as dream-run's (stdout is the MCP channel).
fn diag(message: &str) {
    crate::cli::Diag::new("dream-run", false, false).warn(message);
}

fn respond(output: &mut impl Write, id: &Value, answer: Answer) -> Result<(), RelayError> {
    let message = match answer {
        Answer::Result(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Answer::Error(code, message) => json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message},
        }),
    };
    write_line(output, &message).map_err(RelayError::Stdout)
}

/// `initialize`: the version the client asked for when the relay knows it, else the newest.
fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = PROTOCOL_VERSIONS
        .iter()
        .find(|known| Some(**known) == asked)
        .unwrap_or(&PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "dreamkit", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// `tools/list`: the sandbox's five tools.
fn tools_list() -> Value {
    let tools: Vec<Value> = Sandbox::tool_specs()
        .into_iter()
        .map(|spec| {
            json!({
                "name": spec.name,
                "description": spec.description,
                "inputSchema": spec.input_schema,
            })
        })
        .collect();
    json!({ "tools": tools })
}

/// How `dream-run tool-relay` ended, for the shared `main`: it prints no document (stdout
/// was the MCP channel), and its exit is 0 at stdin's end, or the failure's (3 when the
/// socket cannot be reached) with the failure as its one stderr line.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct RelayEnded {
    #[serde(skip)]
    failure: Option<Failure>,
}

impl Report for RelayEnded {
    fn exit(&self) -> Exit {
        self.failure.as_ref().map_or(Exit::Yes, Failure::exit)
    }

    fn note(&self) -> Option<String> {
        self.failure.as_ref().map(ToString::to_string)
    }

    fn printed(&self) -> bool {
        false
    }
}

/// `dream-run tool-relay --socket PATH`: [`serve`] on the process's stdin and stdout, which
/// the shared `main` left unread and unwritten for it.
pub fn run(socket: Option<&Path>, cx: &Context) -> Result<RelayEnded, Failure> {
    let Some(socket) = socket else {
        // clap requires --socket; stdout stays clean all the same.
        let failure = Failure::Usage("the socket is missing (--socket PATH)".into());
        return Ok(RelayEnded {
            failure: Some(failure),
        });
    };
    let (input, output) = cx.stdio_channel()?;
    // Every way it fails is the local machine's: the socket, stdin, stdout (exit 3).
    let failure = serve(socket, input, output)
        .err()
        .map(|e| Failure::environment(e.to_string()));
    Ok(RelayEnded { failure })
}

// ---------------------------------------------------------------------------------------
// dream-run's end: the listener.

/// One tool call forwarded by a relay, for the run to execute and [answer](Call::answer).
/// Dropped unanswered, it answers `is_error` with "not run: the run ended", so a relay
/// never waits for an answer that cannot come.
#[derive(Debug)]
pub struct Call {
    /// The tool's name: one of [`Sandbox::tool_specs`]'s (the relay refuses any other).
    pub name: String,
    /// The tool's arguments, a JSON object.
    pub input: Value,
    reply: mpsc::Sender<WireReply>,
}

impl Call {
    /// Sends the tool's result back to the relay that forwarded the call.
    pub fn answer(self, content: String, is_error: bool) {
        // The connection may be gone (the relay ended): nobody is left to tell.
        let _ = self.reply.send(WireReply { content, is_error });
    }
}

type OnCall = Arc<Mutex<Box<dyn Fn(Call) + Send>>>;

/// The connections being served, to shut down when the listener goes.
type Live = Arc<Mutex<HashMap<u64, UnixStream>>>;

/// The socket relays connect to, in a private directory of its own: `relay.sock` (0600) in a
/// directory made 0700 when it is created.
///
/// No other user can connect at any moment: the directory is 0700 from its `mkdir` on (its
/// mode is given to the system call, and a umask only ever takes permissions away), so the
/// short window between `bind` (which makes the socket with the umask's mode) and the `chmod`
/// to 0600 cannot be used by another user, who cannot even reach the path. The peer's uid
/// is also checked on every connection (SO_PEERCRED, on Linux), and a connection from
/// another uid is closed unserved.
///
/// Dropping it stops accepting, shuts down the connections still open (their relays then
/// answer "dream-run is gone") and removes the directory.
pub struct Listener {
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    live: Live,
    acceptor: Option<JoinHandle<()>>,
    /// Last: removed after the acceptor has stopped.
    dir: Option<tempfile::TempDir>,
}

impl Listener {
    /// Makes the private directory under `parent_dir`, binds its socket and starts accepting.
    /// Every request of every connection (the client may start the relay more than once) is
    /// handed to `on_call`, one at a time: it should hand the call on (a channel) rather than
    /// run it there.
    ///
    /// The socket's path must fit in `sun_path` (about 100 bytes): keep `parent_dir` short.
    pub fn bind(parent_dir: &Path, on_call: impl Fn(Call) + Send + 'static) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("dreamkit-relay-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(parent_dir)?;
        let socket = dir.path().join(SOCKET_NAME);
        let listener = UnixListener::bind(&socket)?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
        let stop = Arc::new(AtomicBool::new(false));
        let live: Live = Arc::default();
        let on_call: OnCall = Arc::new(Mutex::new(Box::new(on_call)));
        let acceptor = std::thread::Builder::new()
            .name("relay-accept".into())
            .spawn({
                let (stop, live) = (stop.clone(), live.clone());
                move || accept(&listener, &stop, &live, &on_call)
            })?;
        Ok(Listener {
            socket,
            stop,
            live,
            acceptor: Some(acceptor),
            dir: Some(dir),
        })
    }

    /// The socket's path, for `dream-run tool-relay --socket`.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the acceptor from `accept`: it sees `stop` and ends.
        let _ = UnixStream::connect(&self.socket);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let live = std::mem::take(&mut *lock(&self.live));
        for stream in live.values() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        if let Some(dir) = self.dir.take() {
            let _ = dir.close();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The acceptor thread: a thread per connection of the same user, until `stop`.
fn accept(listener: &UnixListener, stop: &AtomicBool, live: &Live, on_call: &OnCall) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        // Out of descriptors or the like: a moment, then accept again.
        let Ok(stream) = stream else {
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        };
        if !same_user(&stream) {
            continue;
        }
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        if let Ok(clone) = stream.try_clone() {
            lock(live).insert(id, clone);
        }
        let spawned = std::thread::Builder::new()
            .name("relay-conn".into())
            .spawn({
                let (live, on_call) = (live.clone(), on_call.clone());
                move || {
                    connection(stream, &on_call);
                    lock(&live).remove(&id);
                }
            });
        if spawned.is_err() {
            if let Some(stream) = lock(live).remove(&id) {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// Whether the peer runs as this process's user (SO_PEERCRED). Elsewhere than Linux the
/// private directory alone keeps other users out.
fn same_user(stream: &UnixStream) -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        match rustix::net::sockopt::socket_peercred(stream) {
            Ok(cred) => cred.uid == rustix::process::getuid(),
            Err(_) => false,
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = stream;
        true
    }
}

/// One connection: each request line becomes a [`Call`]; its answer (or the dropped call's
/// "not run") is written back before the next line is read.
fn connection(stream: UnixStream, on_call: &OnCall) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let line = match read_line_capped(&mut reader, MAX_LINE_BYTES) {
            Ok(Line::Text(line)) => line,
            // A peer that sends more than a line may hold is not a relay: hang up.
            Ok(Line::Eof | Line::TooLong) | Err(_) => return,
        };
        let reply = match serde_json::from_slice::<WireRequest>(&line) {
            Ok(request) => {
                let (tx, rx) = mpsc::channel();
                let call = Call {
                    name: request.name,
                    input: request.arguments,
                    reply: tx,
                };
                (lock(on_call))(call);
                rx.recv().unwrap_or_else(|_| WireReply {
                    content: NOT_RUN.into(),
                    is_error: true,
                })
            }
            Err(e) => WireReply {
                content: format!("not run: unreadable request: {e}"),
                is_error: true,
            },
        };
        if write_line(&mut writer, &reply).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A listener whose calls are answered by `answer` on a thread of their own.
    fn fake_run(
        parent: &Path,
        answer: impl Fn(&Call) -> Option<(String, bool)> + Send + 'static,
    ) -> Listener {
        Listener::bind(parent, move |call: Call| match answer(&call) {
            Some((content, is_error)) => call.answer(content, is_error),
            None => drop(call),
        })
        .unwrap()
    }

    /// `serve` over the given stdin lines; every stdout line, parsed.
    fn session(listener: &Listener, lines: &[&str]) -> Vec<Value> {
        let input = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
        let mut output = Vec::new();
        serve(listener.socket_path(), input.as_bytes(), &mut output).unwrap();
        String::from_utf8(output)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn echo(call: &Call) -> Option<(String, bool)> {
        Some((format!("{} {}", call.name, call.input), false))
    }

    #[test]
    fn initialize_answers_the_asked_version_when_known_else_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake_run(dir.path(), echo);
        let answers = session(
            &run,
            &[
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"claude-code","version":"2"}}}"#,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                r#"{"jsonrpc":"2.0","id":"b","method":"initialize","params":{"protocolVersion":"1999-01-01"}}"#,
                r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
            ],
        );
        assert_eq!(answers.len(), 3, "{answers:?}");
        assert_eq!(
            answers[0],
            json!({"jsonrpc": "2.0", "id": 0, "result": {
                "protocolVersion": "2025-03-26",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "dreamkit", "version": env!("CARGO_PKG_VERSION")},
            }})
        );
        assert_eq!(answers[1]["id"], "b");
        assert_eq!(answers[1]["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(answers[2], json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
        // What Claude Code 2.1.332 sends first: a discovery probe (unknown here), then the
        // version it speaks.
        let answers = session(
            &run,
            &[
                r#"{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"protocolVersion":"2026-07-28"}}}"#,
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#,
            ],
        );
        assert_eq!(answers[0]["error"]["code"], -32601, "{answers:?}");
        assert_eq!(answers[1]["result"]["protocolVersion"], "2025-11-25");
    }

    #[test]
    fn tools_list_lists_the_five_sandbox_tools_with_their_schemas() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake_run(dir.path(), echo);
        let answers = session(&run, &[r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#]);
        let tools = answers[0]["result"]["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "shell",
                "read_file",
                "write_file",
                "edit_file",
                "delete_file"
            ]
        );
        for tool in tools {
            assert!(tool["inputSchema"].is_object(), "{tool}");
            assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
            assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()));
        }
    }

    #[test]
    fn tools_call_round_trips_content_and_is_error() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake_run(dir.path(), |call| {
            Some(match call.name.as_str() {
                "read_file" => (format!("read {}", call.input["path"]), false),
                _ => ("refused: outside the memory dir".into(), true),
            })
        });
        let answers = session(
            &run,
            &[
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"MEMORY.md"}}}"#,
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/etc/passwd"}}}"#,
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"shell"}}"#,
            ],
        );
        assert_eq!(
            answers[0],
            json!({"jsonrpc": "2.0", "id": 1, "result": {
                "content": [{"type": "text", "text": "read \"MEMORY.md\""}],
                "isError": false,
            }})
        );
        assert_eq!(
            answers[1]["result"]["content"][0]["text"],
            "refused: outside the memory dir"
        );
        assert_eq!(answers[1]["result"]["isError"], true);
        assert_eq!(answers[2]["result"]["isError"], true, "no arguments: {{}}");
    }

    #[test]
    fn bad_params_are_invalid_params() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake_run(dir.path(), echo);
        let answers = session(
            &run,
            &[
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"rm","arguments":{}}}"#,
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"shell","arguments":"ls"}}"#,
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":[1]}"#,
            ],
        );
        assert_eq!(answers.len(), 4);
        for (n, answer) in answers.iter().enumerate() {
            assert_eq!(answer["id"], n + 1);
            assert_eq!(answer["error"]["code"], INVALID_PARAMS, "{answer}");
        }
    }

    #[test]
    fn unknown_methods_malformed_lines_and_batches_get_errors_and_notifications_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake_run(dir.path(), echo);
        let answers = session(
            &run,
            &[
                r#"{"jsonrpc":"2.0","id":7,"method":"resources/list"}"#,
                r#"{"jsonrpc":"2.0","id":8,"method":"#,
                "",
                r#"[{"jsonrpc":"2.0","id":9,"method":"ping"}]"#,
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
                r#"{"jsonrpc":"2.0","method":"no/such/notification"}"#,
                r#"{"jsonrpc":"2.0","id":5,"result":{}}"#,
                r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#,
                r#"{"id":10,"method":"ping"}"#,
            ],
        );
        let codes: Vec<(Value, Value)> = answers
            .iter()
            .map(|a| (a["id"].clone(), a["error"]["code"].clone()))
            .collect();
        assert_eq!(
            codes,
            [
                (json!(7), json!(METHOD_NOT_FOUND)),
                (Value::Null, json!(PARSE_ERROR)),
                (Value::Null, json!(INVALID_REQUEST)),
                (Value::Null, json!(INVALID_REQUEST)),
                (json!(10), json!(INVALID_REQUEST)),
            ]
        );
    }

    #[test]
    fn a_line_over_the_cap_is_refused_and_the_next_one_read() {
        let long = format!("{}\n{{}}\n", "x".repeat(100));
        let mut input = long.as_bytes();
        assert!(matches!(
            read_line_capped(&mut input, 10).unwrap(),
            Line::TooLong
        ));
        assert!(matches!(read_line_capped(&mut input, 10).unwrap(), Line::Text(l) if l == b"{}"));
        assert!(matches!(
            read_line_capped(&mut input, 10).unwrap(),
            Line::Eof
        ));
        // Exactly the cap is fine; a last line without its newline too.
        let mut input = &b"0123456789"[..];
        assert!(
            matches!(read_line_capped(&mut input, 10).unwrap(), Line::Text(l) if l.len() == 10)
        );
        let mut input = &b"0123456789a"[..];
        assert!(matches!(
            read_line_capped(&mut input, 10).unwrap(),
            Line::TooLong
        ));
    }

    #[test]
    fn a_dropped_call_answers_that_it_was_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake_run(dir.path(), |_| None);
        let answers = session(
            &run,
            &[
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell","arguments":{"command":"ls"}}}"#,
            ],
        );
        assert_eq!(answers[0]["result"]["isError"], true);
        assert_eq!(answers[0]["result"]["content"][0]["text"], NOT_RUN);
    }

    #[test]
    fn a_run_that_ended_answers_dream_run_is_gone_until_stdin_ends() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake_run(dir.path(), echo);
        let stream = UnixStream::connect(run.socket_path()).unwrap();
        // The relay connected; then the run ends.
        drop(run);
        let input = concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell","arguments":{}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell","arguments":{}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
            "\n",
        );
        let mut output = Vec::new();
        Relay::new(stream)
            .serve(input.as_bytes(), &mut output)
            .unwrap();
        let answers: Vec<Value> = String::from_utf8(output)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(answers.len(), 3);
        for answer in &answers[..2] {
            assert_eq!(answer["result"]["isError"], true);
            let text = answer["result"]["content"][0]["text"].as_str().unwrap();
            assert!(text.starts_with(GONE), "{text}");
        }
        assert_eq!(answers[2]["result"], json!({}));
    }

    #[test]
    fn a_missing_socket_is_a_connect_error_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut output = Vec::new();
        let err = serve(
            &dir.path().join("nope.sock"),
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"[..],
            &mut output,
        )
        .unwrap_err();
        assert!(matches!(err, RelayError::Connect { .. }), "{err}");
        assert!(output.is_empty());
    }

    #[test]
    fn the_socket_is_0600_in_a_0700_dir_that_drop_removes() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake_run(dir.path(), echo);
        let socket = run.socket_path().to_path_buf();
        let private = socket.parent().unwrap().to_path_buf();
        assert_eq!(private.parent().unwrap(), dir.path());
        assert_eq!(socket.file_name().unwrap(), SOCKET_NAME);
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&socket), 0o600);
        assert_eq!(mode(&private), 0o700);
        drop(run);
        assert!(!private.exists());
        assert!(UnixStream::connect(&socket).is_err());
    }

    #[test]
    fn connections_are_served_each_on_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake_run(dir.path(), echo);
        let mut first = UnixStream::connect(run.socket_path()).unwrap();
        let mut second = UnixStream::connect(run.socket_path()).unwrap();
        let ask = |stream: &mut UnixStream, name: &str| {
            write_line(stream, &json!({"name": name, "arguments": {"n": 1}})).unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let Line::Text(line) = read_line_capped(&mut reader, MAX_LINE_BYTES).unwrap() else {
                panic!("no reply");
            };
            serde_json::from_slice::<Value>(&line).unwrap()
        };
        assert_eq!(
            ask(&mut second, "shell"),
            json!({"content": "shell {\"n\":1}", "is_error": false})
        );
        assert_eq!(
            ask(&mut first, "read_file")["content"],
            "read_file {\"n\":1}"
        );
        // An unreadable request is answered, and the connection goes on.
        first.write_all(b"[1]\n").unwrap();
        let mut reader = BufReader::new(first.try_clone().unwrap());
        let Line::Text(line) = read_line_capped(&mut reader, MAX_LINE_BYTES).unwrap() else {
            panic!("no reply");
        };
        let reply: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(reply["is_error"], true);
        assert_eq!(ask(&mut first, "shell")["is_error"], false);
    }
}
