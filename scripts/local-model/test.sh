#!/usr/bin/env bash
# `make test-local-model`: sets up (or reuses) the local model server, starts it on a free
# loopback port, runs the integration tests that talk to it, and stops it.
# A visible SKIP (exit 0) only when setup.sh says the server cannot be built here (exit 3:
# no python, no compiler, no network and nothing cached); any other failure fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/../.."
CARGO=${CARGO:-cargo}
JOBS=${JOBS:-2}

rc=0
url=$("$here/serve.sh" start) || rc=$?
if [ "$rc" -eq 3 ]; then
    echo "SKIP test-local-model: the local model server cannot be built on this machine (see the line above)" >&2
    exit 0
elif [ "$rc" -ne 0 ]; then
    echo "test-local-model: the local model server did not start (exit $rc)" >&2
    exit "$rc"
fi
trap '"$here/serve.sh" stop >/dev/null 2>&1 || true' EXIT
url=$(printf '%s\n' "$url" | tail -n 1)
echo "test-local-model: server at $url" >&2
# One test at a time: the server generates one answer at a time on 2 cores.
DREAMKIT_TEST_LOCAL_MODEL=$url DREAMKIT_TEST_LOCAL_MODEL_REQUIRED=1 \
    "$CARGO" test --locked -j "$JOBS" --test cli local_models -- --test-threads=1
