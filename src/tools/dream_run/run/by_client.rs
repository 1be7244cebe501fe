//! A model run through the user's own Claude Code (`--provider claude`): the client runs the
//! conversation, and our five tools reach it over MCP. The client starts `dream-run
//! tool-relay` as its only MCP server; the relay forwards each call over a private Unix socket
//! to this process, which runs it exactly as for the other providers (sandbox, fence,
//! changed-since-read, snapshot, journal, per-turn caps) and answers. The client's
//! `stream-json` events drive the turns, the usage and `--max-tokens`; a signal, the deadline
//! or a lost lock ends the client's whole process group, and the run fails and restores like
//! any other.

use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::super::prompt;
use super::super::relay::{self, Call};
use super::super::sandbox::Sandbox;
use super::{Agent, End, TurnBudget};
use crate::cli::signals;
use crate::model::print_mode::{self, GroupGuard, Invocation, PrintMode};
use crate::model::{ErrorKind, ModelError, Usage};

/// What the loop waits on: a line from the client, its end, or a tool call from the relay.
enum Event {
    Line(Vec<u8>),
    /// stdout closed (the client exited or was killed); `Some`: a line was over the cap.
    Closed(Option<String>),
    Call(Call),
}

/// One assistant message as the stream shows it (one event per content block, the same id).
#[derive(Default)]
struct Message {
    text: String,
    tool_uses: usize,
    usage: Usage,
}

impl Agent<'_> {
    pub(super) fn converse_via_client(
        &mut self,
        client: &PrintMode,
        task: &str,
        deadline: Duration,
    ) -> End {
        let started = Instant::now();
        match self.client_exchange(client, task, deadline, started) {
            Ok(end) | Err(end) => end,
        }
    }

    fn client_exchange(
        &mut self,
        client: &PrintMode,
        task: &str,
        deadline: Duration,
        started: Instant,
    ) -> Result<End, End> {
        let environment = |message: String| End::Failed {
            error: "environment",
            message,
            environment: true,
        };
        let (events, inbox) = mpsc::channel::<Event>();
        let calls = events.clone();
        let listener = relay::Listener::bind(&relay_parent(client), move |call| {
            let _ = calls.send(Event::Call(call));
        })
        .map_err(|e| environment(format!("cannot open the tool relay's socket: {e}")))?;
        let relay_bin = std::env::current_exe()
            .map_err(|e| environment(format!("cannot find dream-run's own binary: {e}")))?;
        let mcp_config = serde_json::json!({"mcpServers": {print_mode::MCP_SERVER: {
            "type": "stdio",
            "command": relay_bin,
            "args": ["tool-relay", "--socket", listener.socket_path()],
        }}});
        let run = Invocation {
            system_prompt: prompt::mcp_named(&prompt::system_prompt()),
            max_turns: self.args.max_turns,
            max_output_tokens: Some(self.args.max_answer_tokens),
            effort: None,
            json_schema: None,
            stream: true,
            mcp_config: Some(mcp_config.to_string()),
            allowed_tools: Sandbox::tool_specs()
                .iter()
                .map(|t| prompt::mcp_name(&t.name))
                .collect(),
        };
        let work = client.work_dir().map_err(|f| environment(f.to_string()))?;
        let mut command = client.command(&run, work.path());
        let mut child = command.spawn().map_err(|e| {
            environment(format!(
                "cannot start Claude Code ({}): {e}",
                client.bin.display()
            ))
        })?;
        // Whatever ends the loop, the client and what it started go with it.
        let group = GroupGuard::of(Some(child.id()));
        let task = prompt::mcp_named(task);
        if let Some(mut stdin) = child.stdin.take() {
            // Written beside the loop: a prompt larger than the pipe must not block it.
            std::thread::spawn(move || {
                let _ = stdin.write_all(task.as_bytes());
            });
        }
        if let Some(stdout) = child.stdout.take() {
            let lines = events.clone();
            std::thread::spawn(move || read_lines(stdout, &lines));
        }
        let mut stderr = child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                let _ = err.by_ref().take(16 * 1024).read_to_end(&mut kept);
                // Drained to the end, so the client never blocks on a full pipe.
                let _ = std::io::copy(&mut err, &mut std::io::sink());
                kept
            })
        });
        drop(events);

        let mut messages: Vec<(String, Message)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut budget = TurnBudget::new(self.args.max_calls_per_turn as usize);
        let mut result: Option<Value> = None;
        let mut closed: Option<Option<String>> = None;
        let end = loop {
            if let Some(signal) = signals::received() {
                break End::Aborted { signal };
            }
            let left = self.time_left(started, deadline);
            if left.is_zero() {
                break self.deadline_passed(deadline);
            }
            if closed.is_some() {
                break self.after_client(&result, &closed, &mut child, &mut stderr);
            }
            let event = match inbox.recv_timeout(left.min(Duration::from_millis(50))) {
                Ok(event) => event,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                // Every sender gone: stdout closed and the listener dropped.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    closed.get_or_insert(None);
                    continue;
                }
            };
            match event {
                Event::Closed(over) => closed = Some(over),
                Event::Call(call) => {
                    let refusal = budget.admit();
                    let (content, is_error) = match refusal {
                        Some(text) => (text, true),
                        None => {
                            self.sandbox
                                .set_shell_timeout(self.args.shell_timeout.min(left));
                            let name = call.name.strip_prefix(MCP_PREFIX).unwrap_or(&call.name);
                            let (mut content, is_error) = self.call_tool(name, &call.input);
                            budget.charge(&mut content);
                            (content, is_error)
                        }
                    };
                    self.tool_calls += 1;
                    call.answer(content, is_error);
                    if let Some(end) = self.fence_end() {
                        break end;
                    }
                    self.record.files_touched = self.absolute_touched();
                    self.save_record();
                }
                Event::Line(line) => {
                    let Ok(value) = serde_json::from_slice::<Value>(&line) else {
                        continue;
                    };
                    match value["type"].as_str() {
                        Some("assistant") => {
                            let id = value["message"]["id"].as_str().unwrap_or("").to_string();
                            if !index.contains_key(&id) {
                                // A new turn: the one before it is complete.
                                if let Some((_, done)) = messages.last() {
                                    self.turn_done(done, messages.len(), started);
                                }
                                index.insert(id.clone(), messages.len());
                                messages.push((id.clone(), Message::default()));
                                budget = TurnBudget::new(self.args.max_calls_per_turn as usize);
                            }
                            let message = &mut messages[index[&id]].1;
                            absorb(message, &value["message"]);
                            self.usage =
                                messages.iter().fold(Usage::default(), |mut sum, (_, m)| {
                                    sum += m.usage;
                                    sum
                                });
                            self.record.usage = self.usage.into();
                            if let Some(end) = self.over_token_budget() {
                                break end;
                            }
                        }
                        Some("system") if value["subtype"] == "init" => {
                            if let Some(why) = relay_not_connected(&value) {
                                break environment(why);
                            }
                        }
                        Some("result") => result = Some(value),
                        _ => {}
                    }
                }
            }
        };
        // The client is done or is ended now; the relay's last calls get "not run".
        group.kill();
        let _ = child.wait();
        group.reaped();
        drop(listener);
        if let Some((_, last)) = messages.last() {
            self.turn_done(last, messages.len(), started);
        }
        self.turns = u32::try_from(messages.len()).unwrap_or(u32::MAX);
        if let Some(result) = &result {
            // The client's own count and cost are the ones it bills by.
            if let Some(usage) = result.get("usage").filter(|u| u.is_object()) {
                let total = print_mode::usage_of(usage, result["total_cost_usd"].as_f64());
                if total.input_tokens + total.output_tokens > 0 {
                    self.usage = total;
                } else {
                    self.usage.cost_usd = total.cost_usd;
                }
                self.record.usage = self.usage.into();
            }
        }
        Ok(end)
    }

    /// Records one finished assistant turn (once).
    fn turn_done(&mut self, message: &Message, n: usize, started: Instant) {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        if n > self.turns {
            self.note_turn(n, &message.text, message.tool_uses, started);
        }
    }

    /// How the run ends once the client's stdout closed: its result says, else its exit.
    fn after_client(
        &self,
        result: &Option<Value>,
        closed: &Option<Option<String>>,
        child: &mut std::process::Child,
        stderr: &mut Option<std::thread::JoinHandle<Vec<u8>>>,
    ) -> End {
        if let Some(Some(over)) = closed {
            return End::model(&ModelError::new(ErrorKind::MalformedResponse, over.clone()));
        }
        let Some(result) = result else {
            // Give it a moment to be reaped, so the exit code can be named.
            let mut code = None;
            for _ in 0..50 {
                if let Ok(Some(status)) = child.try_wait() {
                    code = status.code();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            // What it said on stderr, if that pipe is closed too (a child of the client may
            // still hold it open: then nothing is waited for).
            let said = match stderr.take() {
                Some(reader) if reader.is_finished() => {
                    String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned()
                }
                other => {
                    *stderr = other;
                    String::new()
                }
            };
            return End::model(&print_mode::no_result(code, &said));
        };
        if print_mode::is_max_turns(result) {
            return End::max_turns(self.args.max_turns);
        }
        match print_mode::read_result(result) {
            Ok(answer) => End::completed(&answer.text),
            Err(error) => End::model(&error),
        }
    }
}

/// Where the relay's private socket folder is made: dreamkit's state dir when its path is
/// short enough, else the temporary dir (a socket's path holds at most 107 bytes, and a
/// project's state dir may be longer than that).
fn relay_parent(client: &PrintMode) -> std::path::PathBuf {
    let root = client.state_dir.join("relay");
    if root.as_os_str().len() <= RELAY_PARENT_MAX && crate::files::create_private_dir(&root).is_ok()
    {
        root
    } else {
        std::env::temp_dir()
    }
}

/// The longest parent path the relay's socket folder may have: the folder's own name and
/// `relay.sock` add about 25 bytes.
const RELAY_PARENT_MAX: usize = 80;

/// The prefix the client gives our tools' names.
const MCP_PREFIX: &str = "mcp__dreamkit__";

/// Adds one stream event's part of an assistant message: its text, its tool calls, and its
/// usage (each event of a message repeats the message's usage so far: the last one counts).
fn absorb(message: &mut Message, event: &Value) {
    for block in event["content"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => message.text.push_str(block["text"].as_str().unwrap_or("")),
            Some("tool_use") => message.tool_uses += 1,
            _ => {}
        }
    }
    if event["usage"].is_object() {
        message.usage = print_mode::usage_of(&event["usage"], None);
    }
}

/// Why the client's init event shows our server not connected (`None`: it is).
fn relay_not_connected(init: &Value) -> Option<String> {
    let servers = init["mcp_servers"].as_array()?;
    let ours = servers
        .iter()
        .find(|s| s["name"] == print_mode::MCP_SERVER)?;
    // "failed" is final; "pending" (still starting) is not a failure yet.
    match ours["status"].as_str() {
        Some(status @ ("failed" | "needs-auth")) => Some(format!(
            "Claude Code could not start dream-run's tool relay (MCP server {:?}: {status})",
            print_mode::MCP_SERVER
        )),
        _ => None,
    }
}

/// Sends each stdout line (capped at [`print_mode::LINE_CAP`]), then `Closed`.
fn read_lines(stdout: impl Read, events: &mpsc::Sender<Event>) {
    let mut reader = std::io::BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(print_mode::LINE_CAP as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => break,
            Ok(_) if line.len() > print_mode::LINE_CAP && !line.ends_with(b"\n") => {
                let _ = events.send(Event::Closed(Some(format!(
                    "a line of Claude Code's output is over {} MiB",
                    print_mode::LINE_CAP / 1024 / 1024
                ))));
                return;
            }
            Ok(_) => {
                if events.send(Event::Line(std::mem::take(&mut line))).is_err() {
                    return;
                }
            }
        }
    }
    let _ = events.send(Event::Closed(None));
}
