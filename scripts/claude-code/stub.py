#!/usr/bin/env python3
"""A minimal local Anthropic Messages API stub, for running the real Claude Code offline.

    stub.py [--host 127.0.0.1] [--port 0] [--port-file F] [--log requests.jsonl] [REPLIES.json]

Answers POST /v1/messages (any query string, e.g. ?beta=true) with the Messages API's streaming
SSE shape when the request has "stream": true (message_start, content_block_start, ping,
content_block_delta text_delta / input_json_delta, content_block_stop, message_delta with
stop_reason and usage, message_stop), or the plain JSON Message otherwise.
POST /v1/messages/count_tokens answers {"input_tokens": N}, GET/HEAD /api/hello (the client's
connectivity probe) 200. Every other request gets a 404 in the API's error shape. Every request is logged, one JSON object a line, to --log:
method, path, headers (keys redacted), parsed body, and which reply was sent.

REPLIES.json is a list; each entry is consumed by one "main" request (see below), in order:
  "some text"                                   -> a text reply
  {"text": "..."}                               -> a text reply
  {"tool_use": {"name": "Bash", "input": {...}, "id": "toolu_x"}}   -> a tool_use reply
  {"content": [ ...content blocks... ], "stop_reason": "end_turn"}  -> blocks as given
  {"error": {"status": 401, "type": "authentication_error", "message": "invalid x-api-key"},
   "retry_after": "2"}                          -> that HTTP status with the API's error body
      {"type": "error", "error": {"type": ..., "message": ...}}, a request-id header, and a
      retry-after header when "retry_after" is given. The real API's pairs: 400
      invalid_request_error, 401 authentication_error, 429 rate_limit_error, 500 api_error,
      529 overloaded_error. "status" alone picks the matching type and a default message.
  {"cut": true, "text": "partial"}              -> a streamed answer that starts (message_start,
      content_block_start, one text_delta) and then the connection is closed, with no
      content_block_stop / message_delta / message_stop (a non-streamed request gets the
      headers of a JSON reply and then a close with half the body)
  any entry may add "match": "substring" -> only a request whose JSON body contains the
  substring takes it (the first unconsumed matching entry is used).
  any entry may add "any": true -> any /v1/messages request may take it, also one with no
  tools (see below); e.g. a `claude -p --tools ""` call sends no tools at all.
  any entry may add "repeat": N -> it serves N requests before it is used up (default 1).
  any entry may add "delay": SECONDS -> the reply starts that long after the request (a
      model that takes its time, for tests that signal the client's caller mid-answer).
When no entry fits, the reply is --default-text ("Hello from the stub.").

Which requests are "main": Claude Code also makes side requests (title / topic generation,
quota probes, ...) through the same endpoint. With --all-requests every request consumes
entries; by default only requests that carry a non-empty "tools" list do (the agent loop
always sends its tools; the side requests send none), and entries marked "any": true are
open to every request; the rest get the default text.
"""

import argparse
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REDACT = {"x-api-key", "authorization", "proxy-authorization", "cookie"}


class State:
    def __init__(self, replies, default_text, all_requests, log_path):
        self.replies = list(replies)
        self.left = [max(1, int(e.get("repeat", 1))) if isinstance(e, dict) else 1
                     for e in self.replies]
        self.default_text = default_text
        self.all_requests = all_requests
        self.log_path = log_path
        self.lock = threading.Lock()
        self.seq = 0

    def pick(self, body, raw):
        main = self.all_requests or bool(isinstance(body, dict) and body.get("tools"))
        with self.lock:
            self.seq += 1
            seq = self.seq
            for i, entry in enumerate(self.replies):
                if self.left[i] <= 0:
                    continue
                is_any = isinstance(entry, dict) and entry.get("any") is True
                if not (main or is_any):
                    continue
                m = entry.get("match") if isinstance(entry, dict) else None
                if m is not None and m not in raw:
                    continue
                self.left[i] -= 1
                return seq, i, entry
        return seq, None, self.default_text

    def log(self, record):
        if not self.log_path:
            return
        line = json.dumps(record, ensure_ascii=False)
        with self.lock:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(line + "\n")


ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
               403: "permission_error", 404: "not_found_error", 413: "request_too_large",
               429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}
ERROR_MESSAGES = {400: "stub: invalid request", 401: "invalid x-api-key",
                  403: "stub: permission denied", 404: "stub: not found",
                  413: "stub: request too large", 429: "stub: rate limited",
                  500: "Internal server error", 529: "Overloaded"}


def blocks_for(entry):
    """Content blocks and stop_reason for one reply entry."""
    if isinstance(entry, str):
        return [{"type": "text", "text": entry}], "end_turn"
    if "error" in entry:
        return [], "error"
    if entry.get("cut"):
        return [{"type": "text", "text": entry.get("text", "partial")}], "end_turn"
    if "content" in entry:
        blocks = entry["content"]
        stop = entry.get("stop_reason") or (
            "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn")
        return blocks, stop
    if "tool_use" in entry:
        t = entry["tool_use"]
        block = {"type": "tool_use", "id": t.get("id") or "toolu_" + uuid.uuid4().hex[:24],
                 "name": t["name"], "input": t.get("input", {})}
        blocks = [{"type": "text", "text": entry["text"]}] if entry.get("text") else []
        return blocks + [block], "tool_use"
    return [{"type": "text", "text": entry.get("text", "")}], entry.get("stop_reason", "end_turn")


def usage(input_tokens, output_tokens):
    return {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0, "output_tokens": output_tokens,
            "service_tier": "standard"}


def chunks(text, n=3):
    """Split text into n roughly equal non-empty pieces (at least one)."""
    if not text:
        return [""]
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)]


class Handler(BaseHTTPRequestHandler):
    server_version = "dreamkit-stub/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet stderr
        if os.environ.get("STUB_VERBOSE"):
            sys.stderr.write("stub: " + (fmt % args) + "\n")

    # -- helpers -------------------------------------------------------------------------
    def _read_body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        text = raw.decode("utf-8", "replace")
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = text
        return text, body

    def _headers_dict(self):
        out = {}
        for k, v in self.headers.items():
            out[k.lower()] = "<redacted>" if k.lower() in REDACT else v
        return out

    def _send_json(self, status, obj, extra=None):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_stub_" + uuid.uuid4().hex[:20])
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _record(self, body, **extra):
        rec = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z",
               "method": self.command, "path": self.path,
               "headers": self._headers_dict(), "body": body}
        rec.update(extra)
        self.server.state.log(rec)

    # -- verbs ---------------------------------------------------------------------------
    def do_GET(self):
        self._record(None)
        if self.path.split("?", 1)[0] == "/api/hello":
            # the client's connectivity probe (HEAD, interactive mode, when
            # CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC is unset)
            return self._send_json(200, {"message": "hello"})
        self._not_found()

    do_HEAD = do_GET
    do_DELETE = do_GET

    def do_POST(self):
        raw, body = self._read_body()
        path = self.path.split("?", 1)[0]
        if path == "/v1/messages":
            return self._messages(raw, body)
        if path == "/v1/messages/count_tokens":
            self._record(body)
            return self._send_json(200, {"input_tokens": max(1, len(raw) // 4)})
        self._record(body)
        self._not_found()

    def _not_found(self):
        self._send_json(404, {"type": "error", "error": {
            "type": "not_found_error", "message": "stub: no such endpoint " + self.path}})

    def _messages(self, raw, body):
        state = self.server.state
        seq, index, entry = state.pick(body, raw)
        if isinstance(entry, dict) and entry.get("delay"):
            time.sleep(float(entry["delay"]))
        blocks, stop = blocks_for(entry)
        if stop == "error":
            return self._error_reply(body, seq, index, entry)
        model = (body or {}).get("model", "claude-stub") if isinstance(body, dict) else "claude-stub"
        stream = isinstance(body, dict) and body.get("stream") is True
        self._record(body, seq=seq, reply_index=index, reply_stop_reason=stop, stream=stream)
        msg_id = "msg_stub%02d%s" % (seq, uuid.uuid4().hex[:16])
        in_tok = max(1, len(raw) // 4)
        out_tok = max(1, sum(len(json.dumps(b)) for b in blocks) // 4)
        if isinstance(entry, dict) and entry.get("cut"):
            return self._cut_reply(msg_id, model, stream, in_tok, entry.get("text", "partial"))
        if not stream:
            return self._send_json(200, {
                "id": msg_id, "type": "message", "role": "assistant", "model": model,
                "content": blocks, "stop_reason": stop, "stop_sequence": None,
                "usage": usage(in_tok, out_tok)})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.send_header("request-id", "req_stub_" + uuid.uuid4().hex[:20])
        self.end_headers()
        self.close_connection = True

        def ev(name, data):
            self.wfile.write(("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode())
            self.wfile.flush()

        ev("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": usage(in_tok, 1)}})
        for i, b in enumerate(blocks):
            if b.get("type") == "text":
                ev("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": {"type": "text", "text": ""}})
                if i == 0:
                    ev("ping", {"type": "ping"})
                for piece in chunks(b.get("text", "")):
                    ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                               "delta": {"type": "text_delta", "text": piece}})
            elif b.get("type") == "tool_use":
                ev("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": {"type": "tool_use", "id": b["id"],
                                                             "name": b["name"], "input": {}}})
                for piece in chunks(json.dumps(b.get("input", {})), 2):
                    ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                               "delta": {"type": "input_json_delta",
                                                         "partial_json": piece}})
            else:  # anything else: send it whole in the start event
                ev("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": b})
            ev("content_block_stop", {"type": "content_block_stop", "index": i})
        ev("message_delta", {"type": "message_delta",
                             "delta": {"stop_reason": stop, "stop_sequence": None},
                             "usage": {"output_tokens": out_tok}})
        ev("message_stop", {"type": "message_stop"})


    def _error_reply(self, body, seq, index, entry):
        e = entry["error"]
        status = int(e.get("status", 500))
        etype = e.get("type") or ERROR_TYPES.get(status, "api_error")
        msg = e.get("message") or ERROR_MESSAGES.get(status, "stub error")
        extra = {}
        if entry.get("retry_after") is not None:
            extra["retry-after"] = str(entry["retry_after"])
        self._record(body, seq=seq, reply_index=index, reply_error=status,
                     stream=isinstance(body, dict) and body.get("stream") is True)
        self.close_connection = True
        self._send_json(status, {"type": "error", "error": {"type": etype, "message": msg}},
                        extra)

    def _cut_reply(self, msg_id, model, stream, in_tok, text):
        self.close_connection = True
        if not stream:
            data = json.dumps({"id": msg_id, "type": "message", "role": "assistant",
                               "model": model, "content": [{"type": "text", "text": text}]})
            data = data.encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
        else:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.send_header("request-id", "req_stub_" + uuid.uuid4().hex[:20])
            self.end_headers()
            for name, data in (
                    ("message_start", {"type": "message_start", "message": {
                        "id": msg_id, "type": "message", "role": "assistant", "model": model,
                        "content": [], "stop_reason": None, "stop_sequence": None,
                        "usage": usage(in_tok, 1)}}),
                    ("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}}),
                    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": text}})):
                self.wfile.write(("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode())
            self.wfile.flush()
        try:
            self.connection.shutdown(2)
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("replies", nargs="?", help="JSON file: a list of scripted replies")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--port-file", help="write the bound port here once listening")
    ap.add_argument("--log", help="append one JSON line per request here")
    ap.add_argument("--default-text", default="Hello from the stub.")
    ap.add_argument("--all-requests", action="store_true",
                    help="every /v1/messages request consumes a scripted reply")
    a = ap.parse_args()
    replies = []
    if a.replies:
        with open(a.replies, encoding="utf-8") as f:
            replies = json.load(f)
        if not isinstance(replies, list):
            sys.exit("stub.py: %s must hold a JSON list" % a.replies)
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    srv.daemon_threads = True
    srv.state = State(replies, a.default_text, a.all_requests, a.log)
    port = srv.server_address[1]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, a.port_file)
    sys.stderr.write("stub: listening on http://%s:%d\n" % (a.host, port))
    sys.stderr.flush()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
