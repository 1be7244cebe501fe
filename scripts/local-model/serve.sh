#!/usr/bin/env bash
# Starts llama-cpp-python's OpenAI-compatible server on a loopback port with the
# SmolLM2-135M GGUF from setup.sh, waits until /v1/models answers, and leaves it
# running in the background. See README.md beside this file.
#
#   serve.sh [start] [extra server flags...]   start (default); prints the base URL
#   serve.sh stop                              kill the server recorded in the state dir
#   serve.sh status                            exit 0 and print the base URL if it answers
#
# Environment:
#   DREAMKIT_TEST_CACHE  cache dir of setup.sh (default ~/.cache/dreamkit-test)
#   DREAMKIT_SERVE_DIR   state dir (default $CACHE/server): pid, port, base-url, server.log
#   PORT                 port to listen on (default: a free port picked here)
#   N_CTX (8192) N_THREADS (nproc) SEED (42) CHAT_FORMAT (chatml-function-calling;
#                        set and empty: the GGUF's own chat template)
#   DREAMKIT_SERVE_TIMEOUT  seconds to wait for /v1/models (default 120)
#
# Stdout: the base URL, e.g. http://127.0.0.1:41234/v1, as the last line. Also written
# to $DREAMKIT_SERVE_DIR/base-url; the server's pid is in $DREAMKIT_SERVE_DIR/pid (it
# leads its own process group, so `kill -- -PID` ends it and nothing else).
# Exit: 0 up; 3 setup impossible (from setup.sh); 1 the server did not come up.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${DREAMKIT_TEST_CACHE:-$HOME/.cache/dreamkit-test}
STATE=${DREAMKIT_SERVE_DIR:-$CACHE/server}
VENV=$CACHE/venv
cmd=start
case "${1:-}" in start|stop|status) cmd=$1; shift ;; esac

say() { printf 'local-model: %s\n' "$*" >&2; }

answers() { # $1 = base URL; true when GET $1/models returns a model list
    "$VENV/bin/python" - "$1" <<'EOF' 2>/dev/null
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1] + "/models", timeout=5) as r:
    sys.exit(0 if r.status == 200 and json.load(r).get("data") else 1)
EOF
}

stop_server() {
    local pid
    pid=$(cat "$STATE/pid" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then   # uvicorn waits for a running generation
            kill -9 -- "-$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
        say "stopped server pid $pid"
    fi
    rm -f "$STATE/pid" "$STATE/port" "$STATE/base-url"
}

case $cmd in
stop) stop_server; exit 0 ;;
status)
    url=$(cat "$STATE/base-url" 2>/dev/null) || exit 1
    answers "$url" && { printf '%s\n' "$url"; exit 0; }
    exit 1 ;;
esac

# ---- start --------------------------------------------------------------------
mkdir -p "$STATE"
if url=$(cat "$STATE/base-url" 2>/dev/null) && answers "$url"; then
    say "already running (pid $(cat "$STATE/pid" 2>/dev/null)) at $url"
    printf '%s\n' "$url"; exit 0
fi
stop_server

set +e
gguf=$("$here/setup.sh" | tail -n1)
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || exit "$rc"

port=${PORT:-}
if [ -z "$port" ]; then
    port=$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
url="http://127.0.0.1:$port/v1"
threads=${N_THREADS:-$(nproc 2>/dev/null || echo 2)}
# CHAT_FORMAT= (set and empty) leaves the choice to the server: the GGUF's own template.
chat_format=${CHAT_FORMAT-chatml-function-calling}

# The server reads its settings from the environment too (pydantic-settings: API_KEY,
# MODEL, N_CTX, ...; and HOST/PORT override --host/--port), so it gets a clean one.
say "starting llama_cpp.server on $url (log: $STATE/server.log)"
env -i PATH="$PATH" HOME="$HOME" LANG=C.UTF-8 TMPDIR="${TMPDIR:-/tmp}" PORT="$port" \
    setsid "$VENV/bin/python" -m llama_cpp.server \
    --model "$gguf" --model_alias smollm2-135m-instruct \
    ${chat_format:+--chat_format "$chat_format"} \
    --n_ctx "${N_CTX:-8192}" --n_threads "$threads" --n_threads_batch "$threads" \
    --seed "${SEED:-42}" --host 127.0.0.1 --port "$port" "$@" \
    </dev/null >"$STATE/server.log" 2>&1 &
pid=$!
printf '%s\n' "$pid" >"$STATE/pid"
printf '%s\n' "$port" >"$STATE/port"

deadline=$(( $(date +%s) + ${DREAMKIT_SERVE_TIMEOUT:-120} ))
until answers "$url"; do
    if ! kill -0 "$pid" 2>/dev/null; then
        say "server exited before answering; last log lines:"; tail -n 15 "$STATE/server.log" >&2
        rm -f "$STATE/pid" "$STATE/port"; exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        say "server did not answer $url/models within ${DREAMKIT_SERVE_TIMEOUT:-120} s; stopping it"
        tail -n 15 "$STATE/server.log" >&2; stop_server; exit 1
    fi
    sleep 0.5
done
printf '%s\n' "$url" >"$STATE/base-url"
say "up: pid $pid, $url"
printf '%s\n' "$url"
