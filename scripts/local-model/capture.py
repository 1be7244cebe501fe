#!/usr/bin/env python3
"""Records real request/response pairs from a running llama-cpp-python server.

    capture.py BASE_URL OUT_DIR [--prefix P] [--only NAME,NAME]

BASE_URL is e.g. http://127.0.0.1:41234/v1 (from serve.sh). Every exchange is written to
OUT_DIR/<prefix><name>.json as

    {"request": {"method", "path", "body" | "raw_body"}, "status": 200,
     "headers": {...}, "response": <JSON body, or the text when it is not JSON>,
     "elapsed_s": 1.23}

The date header is dropped so a re-capture only differs where the server does. Standard
library only, so it runs under the venv's python or any python3.
"""

import argparse
import http.client
import json
import os
import sys
import time
import subprocess
import urllib.parse

MODEL = "smollm2-135m-instruct"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write a UTF-8 text file, replacing it if it exists.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "relative path"},
                    "content": {"type": "string", "description": "the whole new text"},
                },
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a shell command and return its output.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    },
]

# turn-status's classifier prompt (copied from src/status/llm.rs) and its answer schema.
STATUS_SYSTEM = (
    "You classify where a coding assistant's turn ended, from the final message it wrote. "
    "Reply with one JSON object and nothing else, of this form:\n"
    '{"state": "working" | "blocked" | "done" | "failed", "detail": string (at most 64 '
    'characters: where it stands), "tempo": "active" | "idle" | "blocked", "needs": '
    'string (the action the user must take when blocked, else ""), "result": string (at most '
    '180 characters: what was achieved, else "")}\n'
    "done: the task is finished (results reported, pushed, committed, PR opened). blocked: it "
    "waits for the user (a question, an approval, input, a login). failed: it gave up or hit an "
    "error it cannot get past. working: anything else, including work still under way."
)
STATUS_SCHEMA = {
    "type": "object",
    "properties": {
        "state": {"type": "string", "enum": ["working", "blocked", "done", "failed"]},
        "detail": {"type": "string", "maxLength": 64},
        "tempo": {"type": "string", "enum": ["active", "idle", "blocked"]},
        "needs": {"type": "string"},
        "result": {"type": "string", "maxLength": 180},
    },
    "required": ["state", "detail", "tempo", "needs", "result"],
    "additionalProperties": False,
}
STATUS_MESSAGES = [
    "All tests pass. I committed the fix as a1b2c3d and pushed it to origin/main.",
    "Should I delete the old migration files too, or keep them? Let me know before I go on.",
    "The build fails with `error[E0432]: unresolved import`, and I could not find the crate "
    "anywhere in the registry. I'm giving up on this approach.",
    "I've updated the parser; now running the full test suite, which takes a few minutes.",
    "Opened PR #42 with the README changes. Nothing else left to do.",
    "I need your GitHub token to push. Please run `gh auth login` and tell me when done.",
    "Refactored three of the five modules so far; next I'll do config.rs and main.rs.",
    "The server keeps crashing with a segfault in libssl and I cannot reproduce it locally, "
    "so I stopped.",
    "Here is the summary you asked for: the API has 12 endpoints, 3 of them deprecated.",
    "Do you want the chart as PNG or SVG?",
]


def status_messages(text):
    return [
        {"role": "system", "content": STATUS_SYSTEM},
        {
            "role": "user",
            "content": "The final message of the turn (its last 2000 characters at most):"
            f"\n\n<message>\n{text}\n</message>",
        },
    ]


def check_status(content):
    """(valid_json, matches_schema, within_lengths, why) for a classifier answer."""
    if not isinstance(content, str):
        return False, False, False, "content is not a string"
    try:
        value = json.loads(content)
    except ValueError as e:
        return False, False, False, f"not JSON: {e}"
    if not isinstance(value, dict):
        return True, False, False, "not an object"
    for key in ("state", "detail", "tempo", "needs", "result"):
        if not isinstance(value.get(key), str):
            return True, False, False, f"{key} missing or not a string"
    if value["state"] not in ("working", "blocked", "done", "failed"):
        return True, False, False, f"unknown state {value['state']!r}"
    if value["tempo"] not in ("active", "idle", "blocked"):
        return True, False, False, f"unknown tempo {value['tempo']!r}"
    lengths = len(value["detail"]) <= 64 and len(value["result"]) <= 180
    return True, True, lengths, "ok" if lengths else "too long"


class Server:
    def __init__(self, base_url):
        u = urllib.parse.urlparse(base_url)
        self.host, self.port, self.prefix = u.hostname, u.port, u.path.rstrip("/")

    def call(self, method, path, body=None, raw=None, timeout=900):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        headers = {"Content-Type": "application/json"} if data is not None else {}
        t0 = time.monotonic()
        conn.request(method, self.prefix + path, body=data, headers=headers)
        r = conn.getresponse()
        text = r.read().decode("utf-8", "replace")
        elapsed = round(time.monotonic() - t0, 3)
        conn.close()
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        req = {"method": method, "path": self.prefix + path}
        if raw is not None:
            req["raw_body"] = raw
        elif body is not None:
            req["body"] = body
        return {
            "request": req,
            "status": r.status,
            "headers": {k.lower(): v for k, v in r.getheaders() if k.lower() != "date"},
            "response": parsed,
            "elapsed_s": elapsed,
        }


def chat(**kw):
    body = {"model": MODEL}
    body.update(kw)
    return body


def plan():
    """(name, method, path, body, raw) for every single capture."""
    sys_user = [
        {"role": "system", "content": "You are a helpful assistant. Answer briefly."},
        {"role": "user", "content": "What is the capital of France?"},
    ]
    agent_sys = {
        "role": "system",
        "content": "You are a coding agent working in a project directory. Use the tools "
        "to do what the user asks.",
    }
    p = [
        ("models", "GET", "/models", None, None),
        ("chat-plain", "POST", "/chat/completions",
         chat(messages=sys_user, temperature=0, max_tokens=40), None),
        ("chat-plain-seed", "POST", "/chat/completions",
         chat(messages=sys_user, temperature=0, max_tokens=40, seed=42), None),
        ("chat-length", "POST", "/chat/completions",
         chat(messages=[{"role": "user", "content": "Write a long story about a dragon."}],
              temperature=0, max_tokens=8), None),
        ("chat-max-completion-tokens", "POST", "/chat/completions",
         chat(messages=[{"role": "user", "content": "Write a long story about a dragon."}],
              temperature=0, max_completion_tokens=8, max_tokens=20), None),
        ("chat-seed-1-a", "POST", "/chat/completions",
         chat(messages=[{"role": "user", "content": "Name a random animal."}],
              temperature=1.0, max_tokens=12, seed=1), None),
        ("chat-seed-1-b", "POST", "/chat/completions",
         chat(messages=[{"role": "user", "content": "Name a random animal."}],
              temperature=1.0, max_tokens=12, seed=1), None),
        ("chat-seed-2", "POST", "/chat/completions",
         chat(messages=[{"role": "user", "content": "Name a random animal."}],
              temperature=1.0, max_tokens=12, seed=2), None),
        ("chat-stream", "POST", "/chat/completions",
         chat(messages=sys_user, temperature=0, max_tokens=12, stream=True), None),
        ("chat-unknown-model", "POST", "/chat/completions",
         chat(messages=sys_user, temperature=0, max_tokens=5) | {"model": "gpt-4o-mini"}, None),
        ("chat-extra-fields", "POST", "/chat/completions",
         chat(messages=sys_user, temperature=0, max_tokens=5, max_completion_tokens=5,
              parallel_tool_calls=False, stream_options={"include_usage": True},
              store=False, metadata={"a": "b"}, reasoning_effort="low"), None),
        # (b) tools
        ("tools-write-file", "POST", "/chat/completions",
         chat(messages=[agent_sys, {"role": "user", "content":
              "Create the file notes.md containing the text: hello world"}],
              tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=200), None),
        ("tools-shell", "POST", "/chat/completions",
         chat(messages=[agent_sys, {"role": "user", "content":
              "Use the shell tool to run the command: ls -la"}],
              tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=200), None),
        ("tools-no-call", "POST", "/chat/completions",
         chat(messages=[agent_sys, {"role": "user", "content": "Say hello to me."}],
              tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=60), None),
        ("tools-json-in-content", "POST", "/chat/completions",
         chat(messages=[{"role": "system", "content":
              "You call tools by writing one JSON object "
              '{"name": <tool name>, "arguments": {...}} and nothing else.'},
              {"role": "user", "content": "Write hello into a.txt."}],
              tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=120), None),
        ("tools-no-tool-choice", "POST", "/chat/completions",
         chat(messages=[agent_sys, {"role": "user", "content":
              "Create the file notes.md containing the text: hello world"}],
              tools=TOOLS, temperature=0, max_tokens=120), None),
        ("tools-named-choice", "POST", "/chat/completions",
         chat(messages=[agent_sys, {"role": "user", "content":
              "Create the file notes.md containing the text: hello world"}],
              tools=TOOLS, tool_choice={"type": "function", "function": {"name": "write_file"}},
              temperature=0, max_tokens=120), None),
        ("tools-required-choice", "POST", "/chat/completions",
         chat(messages=[agent_sys, {"role": "user", "content":
              "Create the file notes.md containing the text: hello world"}],
              tools=TOOLS, tool_choice="required", temperature=0, max_tokens=120), None),
        ("tools-max-tokens-5", "POST", "/chat/completions",
         chat(messages=[agent_sys, {"role": "user", "content":
              "Create the file story.md containing a long story about a dragon."}],
              tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=5), None),
        ("tools-stream", "POST", "/chat/completions",
         chat(messages=[agent_sys, {"role": "user", "content":
              "Use the shell tool to run the command: ls -la"}],
              tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=60, stream=True), None),
        # (c) follow-up turn with a tool result
        ("tools-followup", "POST", "/chat/completions",
         chat(messages=[agent_sys,
              {"role": "user", "content": "Use the shell tool to run the command: ls"},
              {"role": "assistant", "content": None, "tool_calls": [
                  {"id": "call_1", "type": "function",
                   "function": {"name": "shell", "arguments": "{\"command\": \"ls\"}"}}]},
              {"role": "tool", "tool_call_id": "call_1", "content": "README.md\nsrc\n"},
              {"role": "user", "content": "Which files are there?"}],
              tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=80), None),
        ("tools-followup-content-empty", "POST", "/chat/completions",
         chat(messages=[agent_sys,
              {"role": "user", "content": "Use the shell tool to run the command: ls"},
              {"role": "assistant", "content": "", "tool_calls": [
                  {"id": "call_1", "type": "function",
                   "function": {"name": "shell", "arguments": "{\"command\": \"ls\"}"}}]},
              {"role": "tool", "tool_call_id": "call_1", "content": "README.md\nsrc\n"}],
              tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=80), None),
        ("tools-followup-content-absent", "POST", "/chat/completions",
         chat(messages=[agent_sys,
              {"role": "user", "content": "Use the shell tool to run the command: ls"},
              {"role": "assistant", "tool_calls": [
                  {"id": "call_1", "type": "function",
                   "function": {"name": "shell", "arguments": "{\"command\": \"ls\"}"}}]},
              {"role": "tool", "tool_call_id": "call_1", "content": "README.md\nsrc\n"}],
              tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=80), None),
        ("tools-followup-content-empty-no-tools", "POST", "/chat/completions",
         chat(messages=[agent_sys,
              {"role": "user", "content": "Use the shell tool to run the command: ls"},
              {"role": "assistant", "content": "", "tool_calls": [
                  {"id": "call_1", "type": "function",
                   "function": {"name": "shell", "arguments": "{\"command\": \"ls\"}"}}]},
              {"role": "tool", "tool_call_id": "call_1", "content": "README.md\nsrc\n"},
              {"role": "user", "content": "Which files are there?"}],
              temperature=0, max_tokens=60), None),
        ("tools-followup-empty-id", "POST", "/chat/completions",
         chat(messages=[agent_sys,
              {"role": "user", "content": "Use the shell tool to run the command: ls"},
              {"role": "assistant", "content": "", "tool_calls": [
                  {"id": "", "type": "function",
                   "function": {"name": "shell", "arguments": "{\"command\": \"ls\"}"}}]},
              {"role": "tool", "tool_call_id": "", "content": "README.md\nsrc\n"}],
              tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=80), None),
        ("tools-followup-no-tools", "POST", "/chat/completions",
         chat(messages=[agent_sys,
              {"role": "user", "content": "Use the shell tool to run the command: ls"},
              {"role": "assistant", "content": None, "tool_calls": [
                  {"id": "call_1", "type": "function",
                   "function": {"name": "shell", "arguments": "{\"command\": \"ls\"}"}}]},
              {"role": "tool", "tool_call_id": "call_1", "content": "README.md\nsrc\n"}],
              temperature=0, max_tokens=60), None),
        # (d)/(e)/(f) response_format, one classifier prompt each
        ("rf-json-schema", "POST", "/chat/completions",
         chat(messages=status_messages(STATUS_MESSAGES[0]), temperature=0, max_tokens=300,
              response_format={"type": "json_schema", "json_schema": {
                  "name": "turn_status", "schema": STATUS_SCHEMA, "strict": True}}), None),
        ("rf-json-schema-with-tools", "POST", "/chat/completions",
         chat(messages=status_messages(STATUS_MESSAGES[0]), temperature=0, max_tokens=300,
              tools=TOOLS, tool_choice="auto",
              response_format={"type": "json_schema", "json_schema": {
                  "name": "turn_status", "schema": STATUS_SCHEMA, "strict": True}}), None),
        ("rf-json-object-schema", "POST", "/chat/completions",
         chat(messages=status_messages(STATUS_MESSAGES[0]), temperature=0, max_tokens=300,
              response_format={"type": "json_object", "schema": STATUS_SCHEMA}), None),
        ("rf-json-object-schema-with-tools", "POST", "/chat/completions",
         chat(messages=status_messages(STATUS_MESSAGES[0]), temperature=0, max_tokens=300,
              tools=TOOLS, tool_choice="auto",
              response_format={"type": "json_object", "schema": STATUS_SCHEMA}), None),
        ("rf-json-object", "POST", "/chat/completions",
         chat(messages=status_messages(STATUS_MESSAGES[0]), temperature=0, max_tokens=300,
              response_format={"type": "json_object"}), None),
        ("rf-none", "POST", "/chat/completions",
         chat(messages=status_messages(STATUS_MESSAGES[0]), temperature=0, max_tokens=300),
         None),
        ("rf-json-object-length", "POST", "/chat/completions",
         chat(messages=status_messages(STATUS_MESSAGES[0]), temperature=0, max_tokens=10,
              response_format={"type": "json_object", "schema": STATUS_SCHEMA}), None),
        # (h) errors
        ("error-bad-json", "POST", "/chat/completions", None,
         '{"model": "x", "messages": [{"role": "user", "content": "hi"}'),
        ("error-wrong-type", "POST", "/chat/completions",
         chat(messages=sys_user, temperature="hot", max_tokens=5), None),
        ("error-unknown-role", "POST", "/chat/completions",
         chat(messages=[{"role": "robot", "content": "hi"}], max_tokens=5), None),
        ("error-unknown-response-format", "POST", "/chat/completions",
         chat(messages=sys_user, max_tokens=5, response_format={"type": "xml"}), None),
        ("no-messages", "POST", "/chat/completions", {"model": MODEL, "max_tokens": 5}, None),
        ("error-context-overflow", "POST", "/chat/completions",
         chat(messages=[{"role": "user", "content": "hello world " * 6000}], max_tokens=5),
         None),
        ("error-prompt-plus-max-tokens-over-ctx", "POST", "/chat/completions",
         chat(messages=[{"role": "user", "content": "hello world " * 4000}], max_tokens=4000,
              temperature=0), None),
        ("error-unknown-path", "GET", "/nothing-here", None, None),
    ]
    return p


def restart(args):
    """Restarts the server with serve.sh (stop, start) and returns a Server for its URL."""
    subprocess.run([args.restart_cmd, "stop"], check=False)
    out = subprocess.run([args.restart_cmd], check=True, capture_output=True, text=True)
    url = out.stdout.strip().splitlines()[-1]
    print(f"(restarted the server: {url})", file=sys.stderr)
    return Server(url)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base_url")
    ap.add_argument("out_dir")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--only", default="")
    ap.add_argument("--rates", action="store_true",
                    help="measure valid-JSON rates over the 10 classifier prompts instead")
    ap.add_argument("--tag", default="", help="label for --rates output")
    ap.add_argument("--timeout", type=float, default=240, help="seconds per request")
    ap.add_argument("--start", default="", help="skip the plan up to this capture")
    ap.add_argument("--variants", default="", help="comma-separated subset for --rates")
    ap.add_argument("--restart-cmd", default="",
                    help="serve.sh path: on a timeout, restart the server with it and go on")
    args = ap.parse_args()
    srv = Server(args.base_url)
    os.makedirs(args.out_dir, exist_ok=True)
    if args.rates:
        return rates(srv, args)
    only = set(filter(None, args.only.split(",")))
    started = False
    for name, method, path, body, raw in plan():
        if only and name not in only:
            continue
        if args.start and not started:
            if name != args.start:
                continue
            started = True
        try:
            rec = srv.call(method, path, body=body, raw=raw, timeout=args.timeout)
        except TimeoutError:
            rec = {"request": {"method": method, "path": srv.prefix + path, "body": body},
                   "status": None, "timed_out_after_s": args.timeout,
                   "note": "no answer within the client timeout; the server keeps generating "
                           "after the client gives up (it had to be restarted)"}
            with open(os.path.join(args.out_dir, f"{args.prefix}{name}.json"), "w") as f:
                json.dump(rec, f, indent=2, ensure_ascii=False)
                f.write("\n")
            print(f"{name}: TIMEOUT after {args.timeout}s", file=sys.stderr)
            if not args.restart_cmd:
                print("restart the server and go on with --start <next>", file=sys.stderr)
                sys.exit(75)
            srv = restart(args)
            continue
        out = os.path.join(args.out_dir, f"{args.prefix}{name}.json")
        with open(out, "w") as f:
            json.dump(rec, f, indent=2, ensure_ascii=False)
            f.write("\n")
        resp = rec["response"]
        summary = ""
        if isinstance(resp, dict) and resp.get("choices"):
            c = resp["choices"][0]
            m = c.get("message") or {}
            summary = f"finish={c.get('finish_reason')} content={str(m.get('content'))[:60]!r}"
            if m.get("tool_calls"):
                summary += f" tool_calls={[t['function']['name'] for t in m['tool_calls']]}"
        print(f"{name}: {rec['status']} {rec['elapsed_s']}s {summary}", file=sys.stderr)


def rates(srv, args):
    variants = {
        "none": None,
        "json_schema": {"type": "json_schema", "json_schema": {
            "name": "turn_status", "schema": STATUS_SCHEMA, "strict": True}},
        "json_object+schema": {"type": "json_object", "schema": STATUS_SCHEMA},
        "json_object": {"type": "json_object"},
        # llama-cpp-python extra field: the server's default repeat_penalty is 1.1
        "json_object+schema+rp1.0": ({"type": "json_object", "schema": STATUS_SCHEMA},
                                                   {"repeat_penalty": 1.0}),
        "none+rp1.0": (None, {"repeat_penalty": 1.0}),
    }
    if args.variants:
        variants = {k: v for k, v in variants.items() if k in args.variants.split(",")}
    report = {"tag": args.tag, "variants": {}}
    for vname, rf in variants.items():
        rows = []
        rf0 = rf
        for text in STATUS_MESSAGES:
            rf = rf0
            body = chat(messages=status_messages(text), temperature=0, max_tokens=300, seed=42)
            extra = {}
            if isinstance(rf, tuple):
                rf, extra = rf
            body.update(extra)
            if rf is not None:
                body["response_format"] = rf
            try:
                rec = srv.call("POST", "/chat/completions", body=body, timeout=args.timeout)
            except TimeoutError:
                print(f"{args.tag} {vname}: TIMEOUT after {args.timeout}s", file=sys.stderr)
                rows.append({"message": text, "status": None, "content": None,
                             "elapsed_s": args.timeout, "timed_out": True, "valid_json": False,
                             "matches_schema": False, "within_lengths": False,
                             "why": "timeout", "usage": None})
                if not args.restart_cmd:
                    sys.exit(75)
                srv = restart(args)
                continue
            content = None
            if rec["status"] == 200:
                content = rec["response"]["choices"][0]["message"].get("content")
            ok_json, ok_schema, ok_len, why = check_status(content)
            rows.append({"message": text, "status": rec["status"], "content": content,
                         "elapsed_s": rec["elapsed_s"], "valid_json": ok_json,
                         "matches_schema": ok_schema, "within_lengths": ok_len, "why": why,
                         "usage": rec["response"].get("usage")
                         if isinstance(rec["response"], dict) else None})
        n = len(rows)
        summary = {k: sum(bool(r[k]) for r in rows) for k in
                   ("valid_json", "matches_schema", "within_lengths")}
        summary["n"] = n
        summary["seconds"] = round(sum(r["elapsed_s"] for r in rows), 1)
        report["variants"][vname] = {"summary": summary, "rows": rows}
        print(f"{args.tag} {vname}: {summary}", file=sys.stderr)
    out = os.path.join(args.out_dir, f"{args.prefix}json-rates.json")
    with open(out, "w") as f:
        json.dump(report, f, indent=2, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
