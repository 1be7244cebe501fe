#!/usr/bin/env python3
"""Run the real client once through run-offline.sh and save what it printed as a fixture.

    provider-case.py OUT.json [--replies R.json] [--stdin FILE] [--env NAME=VALUE]...
                     [--drop-env NAME]... [--home DIR] [--mcp-log FILE] [--settings-file F]
                     [--common] -- CLAUDE ARGS...

Writes OUT.json: {"args", "env", "drop_env", "stdin", "replies", "exit", "seconds", "stdout"
(exactly as printed), "stdout_json" (parsed, or per line for stream-json), "stderr" (claude's,
run-offline's own lines removed), "stub_requests" (trimmed: path, reply_index/reply_error,
model, max_tokens, system texts, tools names, message roles, output_format / tool_choice when
present), "projects_files" (what appeared under $HOME/.claude/projects), "mcp_received" (the
lines of --mcp-log, when given)}.
--common adds the provider's usual flags and env (see FINDINGS.md section 5).
HOME is a fresh dir (removed first) unless --home is given.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

COMMON_ARGS = ["-p", "--output-format", "json", "--system-prompt", "You are a recap writer.",
               "--tools", "", "--strict-mcp-config", "--disable-slash-commands",
               "--no-session-persistence", "--settings",
               '{"disableAllHooks":true,"autoMemoryEnabled":false}',
               "--permission-mode", "dontAsk", "--max-turns", "2"]
COMMON_ENV = ["CLAUDE_CODE_DISABLE_AUTO_MEMORY=1", "CLAUDE_CODE_DISABLE_CLAUDE_MDS=1",
              "CLAUDE_CODE_MAX_RETRIES=0"]


def trim(rec):
    b = rec.get("body") if isinstance(rec.get("body"), dict) else {}
    out = {"path": rec.get("path")}
    for k in ("reply_index", "reply_error", "reply_stop_reason"):
        if k in rec:
            out[k] = rec[k]
    if not b:
        return out
    out["model"] = b.get("model")
    out["max_tokens"] = b.get("max_tokens")
    sysp = b.get("system")
    if isinstance(sysp, list):
        out["system"] = [s.get("text") for s in sysp]
    else:
        out["system"] = sysp
    out["tools"] = [t.get("name") for t in b.get("tools") or []]
    msgs = b.get("messages") or []
    out["messages_roles"] = [m.get("role") for m in msgs]
    users = [m for m in msgs if m.get("role") == "user"]
    if users:  # the last block of the last user message, shortened: prompt or tool_result
        c = users[-1].get("content")
        last = c[-1] if isinstance(c, list) and c else c
        out["last_block"] = json.dumps(last, ensure_ascii=False)[:400]
    for k in ("tool_choice", "output_format", "output_config", "thinking", "stream"):
        if k in b:
            out[k] = b[k]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--replies")
    ap.add_argument("--stdin")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--drop-env", action="append", default=[])
    ap.add_argument("--home")
    ap.add_argument("--mcp-log")
    ap.add_argument("--common", action="store_true")
    ap.add_argument("--timeout", default="120")
    ap.add_argument("--keep-tools-full", action="store_true",
                    help="also save the full tools list of the first request")
    argv = sys.argv[1:]
    args = []
    if "--" in argv:
        i = argv.index("--")
        argv, args = argv[:i], argv[i + 1:]
    a = ap.parse_args(argv)
    env = list(a.env)
    if a.common:
        args = COMMON_ARGS + args
        env = COMMON_ENV + env
    home = a.home or os.path.join(tempfile.gettempdir(), "pc-" + os.path.basename(a.out)[:-5])
    if not a.home and os.path.exists(home):
        shutil.rmtree(home)
    os.makedirs(home, exist_ok=True)
    if a.mcp_log and os.path.exists(a.mcp_log):
        os.remove(a.mcp_log)
    cmd = [os.path.join(HERE, "run-offline.sh"), "--home", home, "--timeout", a.timeout]
    if a.replies:
        cmd += ["--replies", a.replies]
    if a.stdin:
        cmd += ["--stdin", a.stdin]
    for e in env:
        cmd += ["--env", e]
    for d in a.drop_env:
        cmd += ["--drop-env", d]
    cmd += ["--"] + args
    p = subprocess.run(cmd, capture_output=True, text=True)
    err_lines, seconds = [], None
    for line in p.stderr.splitlines(keepends=True):
        if line.startswith("run-offline: claude exit="):
            seconds = float(line.rsplit("seconds=", 1)[1])
        elif line.startswith("run-offline: "):
            pass
        else:
            err_lines.append(line)
    stdout_json = None
    try:
        stdout_json = json.loads(p.stdout)
    except ValueError:
        try:
            stdout_json = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
        except ValueError:
            stdout_json = None
    reqs, first_tools = [], None
    logp = os.path.join(home, "stub-requests.jsonl")
    if os.path.exists(logp):
        for line in open(logp, encoding="utf-8"):
            rec = json.loads(line)
            reqs.append(trim(rec))
            b = rec.get("body")
            if first_tools is None and isinstance(b, dict) and b.get("tools"):
                first_tools = b["tools"]
    proj = os.path.join(home, ".claude", "projects")
    pfiles = []
    if os.path.isdir(proj):
        for d, _, fs in os.walk(proj):
            pfiles += [os.path.relpath(os.path.join(d, f), home) for f in fs]
    out = {"args": args, "env": dict(e.split("=", 1) for e in env), "drop_env": a.drop_env,
           "stdin": open(a.stdin).read() if a.stdin else None,
           "replies": json.load(open(a.replies)) if a.replies else None,
           "exit": p.returncode, "seconds": seconds, "stdout": p.stdout,
           "stdout_json": stdout_json, "stderr": "".join(err_lines), "stub_requests": reqs,
           "projects_files": sorted(pfiles)}
    if a.keep_tools_full:
        out["first_request_tools"] = first_tools
    if a.mcp_log:
        out["mcp_received"] = ([json.loads(l) for l in open(a.mcp_log) if l.strip()]
                               if os.path.exists(a.mcp_log) else None)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    sj = stdout_json if isinstance(stdout_json, dict) else (
        stdout_json[-1] if stdout_json else {})
    print("%s: exit=%s s=%s subtype=%s is_error=%s api_error_status=%s result=%r reqs=%d" % (
        os.path.basename(a.out), p.returncode, seconds, sj.get("subtype"), sj.get("is_error"),
        sj.get("api_error_status"), (sj.get("result") or "")[:120], len(reqs)))
    if not stdout_json:
        print("  stdout=%r stderr=%r" % (p.stdout[:300], "".join(err_lines)[:300]))


if __name__ == "__main__":
    main()
