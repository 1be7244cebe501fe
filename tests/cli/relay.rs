//! `dream-run tool-relay`, as the Claude Code client runs it: JSON-RPC on stdin and stdout,
//! each tool call forwarded over the run's socket (stood in for here by a socket server that
//! answers fixed replies).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;

use serde_json::{json, Value};

use crate::support::{usage_stderr, ClaudeHome, Run};

/// A socket server in the place of the running dream-run: it answers each request line of
/// its one connection with `ran <name> <arguments>`, an error for `delete_file`.
fn fake_run(socket: &std::path::Path) -> std::thread::JoinHandle<Vec<Value>> {
    let listener = UnixListener::bind(socket).unwrap();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut writer = stream.try_clone().unwrap();
        let mut seen = Vec::new();
        for line in BufReader::new(stream).lines() {
            let request: Value = serde_json::from_str(&line.unwrap()).unwrap();
            let name = request["name"].as_str().unwrap().to_string();
            let reply = json!({
                "content": format!("ran {name} {}", request["arguments"]),
                "is_error": name == "delete_file",
            });
            writeln!(writer, "{reply}").unwrap();
            seen.push(request);
        }
        seen
    })
}

fn lines(messages: &[Value]) -> String {
    messages.iter().map(|m| format!("{m}\n")).collect()
}

#[test]
fn tool_relay_speaks_mcp_on_stdio_and_forwards_calls_over_the_socket() {
    let home = ClaudeHome::new();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("relay.sock");
    let server = fake_run(&socket);
    let input = lines(&[
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "claude-code", "version": "2.1.332"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "read_file", "arguments": {"path": "MEMORY.md"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "delete_file", "arguments": {"path": "a.md"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "no/such/method"}),
    ]) + "{not json\n";
    Run::new(&home, "dream-run")
        .args(["tool-relay", "--socket"])
        .arg(&socket)
        .stdin(input)
        .success()
        .stderr_empty()
        .stdout_with(|text| {
            let answers: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
                .collect();
            assert_eq!(answers.len(), 6, "{text}");
            assert!(answers.iter().all(|a| a["jsonrpc"] == "2.0"), "{text}");
            assert_eq!(answers[0]["id"], 0);
            assert_eq!(answers[0]["result"]["protocolVersion"], "2025-06-18");
            assert_eq!(answers[0]["result"]["serverInfo"]["name"], "dreamkit");
            assert_eq!(answers[0]["result"]["capabilities"], json!({"tools": {}}));
            let names: Vec<&str> = answers[1]["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap())
                .collect();
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
            assert_eq!(
                answers[2],
                json!({"jsonrpc": "2.0", "id": 2, "result": {
                    "content": [{"type": "text", "text": "ran read_file {\"path\":\"MEMORY.md\"}"}],
                    "isError": false}})
            );
            assert_eq!(answers[3]["result"]["isError"], true);
            assert_eq!(answers[4]["id"], 4);
            assert_eq!(answers[4]["error"]["code"], -32601);
            assert_eq!(answers[5]["id"], Value::Null);
            assert_eq!(answers[5]["error"]["code"], -32700);
        })
        .run();
    let seen = server.join().unwrap();
    assert_eq!(
        seen,
        [
            json!({"name": "read_file", "arguments": {"path": "MEMORY.md"}}),
            json!({"name": "delete_file", "arguments": {"path": "a.md"}}),
        ]
    );
}

#[test]
fn tool_relay_without_its_socket_says_so_on_stderr_and_nothing_on_stdout() {
    let home = ClaudeHome::new();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("gone.sock");
    Run::new(&home, "dream-run")
        .args(["tool-relay", "--socket"])
        .arg(&socket)
        .stdin(r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#.to_owned() + "\n")
        .code(3)
        .stdout_empty()
        .stderr_is(format!(
            "dream-run: cannot connect to dream-run at {}: No such file or directory (os error 2)\n",
            socket.display()
        ))
        .run();
    // A bad flag: the usage line, exit 2, and still nothing on stdout (it is the client's
    // channel), with stdin left unread.
    Run::new(&home, "dream-run")
        .args(["tool-relay", "--sockett", "x"])
        .stdin("{\"not\": \"read\"}\n")
        .code(2)
        .stdout_empty()
        .stderr_is(usage_stderr(
            "dream-run",
            "unexpected argument '--sockett' found",
        ))
        .run();
}
