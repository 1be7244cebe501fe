#!/usr/bin/env bash
# `make eval-local`: the built-in suite (evals/) against the local small model. It sets up (or
# reuses) the server, starts it on a free loopback port, runs `dream-run eval evals --provider
# openai` and stops it. Reported, no threshold: failed scenarios do not fail this script (a
# 135M model passes few); a malformed suite (2), a local failure (3) or a server that stops
# answering (4) do. A visible SKIP (exit 0) when the server cannot be built here (setup exit 3).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/../.."
CARGO=${CARGO:-cargo}
JOBS=${JOBS:-2}

"$CARGO" build --locked -j "$JOBS"
rc=0
url=$("$here/serve.sh" start) || rc=$?
if [ "$rc" -eq 3 ]; then
    echo "SKIP eval-local: the local model server cannot be built on this machine (see the line above)" >&2
    exit 0
elif [ "$rc" -ne 0 ]; then
    echo "eval-local: the local model server did not start (exit $rc)" >&2
    exit "$rc"
fi
trap '"$here/serve.sh" stop >/dev/null 2>&1 || true' EXIT
url=$(printf '%s\n' "$url" | tail -n 1)
echo "eval-local: server at $url" >&2
rc=0
# As the local model's tests run it: deterministic, two turns (its context holds 8,192 tokens:
# a third turn of a consolidation overflows it), the long timeouts a 135M model on
# two cores needs (its answers to a consolidation prompt take minutes).
OPENAI_BASE_URL=$url OPENAI_API_KEY= OPENAI_MODEL=smollm2-135m-instruct \
    DREAMKIT_OPENAI_EXTRA_BODY='{"temperature": 0, "seed": 42, "repeat_penalty": 1.0}' \
    target/debug/dream-run eval evals --provider openai -v --pretty \
    -- --max-turns 2 --max-answer-tokens 200 --timeout 300s --deadline 15m || rc=$?
[ "$rc" -le 1 ] || exit "$rc"
