#!/usr/bin/env bash
# Run the real Claude Code client with no network: a fresh network namespace (`unshare -n`,
# loopback only), the stub Messages API (stub.py) inside it, and a temporary HOME.
#
#   run-offline.sh [options] [--] [claude args...]
#
# Options (each also settable by the env var in brackets):
#   --home DIR       HOME for claude (kept between runs, so --resume works) [CC_HOME]
#                    default: a new mktemp dir, printed on stderr
#   --cwd DIR        directory claude runs in (created; default $HOME/proj)  [CC_CWD]
#   --replies FILE   scripted replies for the stub (see stub.py)             [CC_REPLIES]
#   --log FILE       stub request log, JSONL, appended (default $HOME/stub-requests.jsonl) [CC_LOG]
#   --timeout SECS   kill claude after this long (default 120)              [CC_TIMEOUT]
#   --claude PATH    claude executable (default: scripts/claude-code/install.sh's) [CLAUDE_BIN]
#   --tmux SESSION   run claude interactively inside a detached tmux session (socket
#                    $HOME/tmux.sock) on a pty instead of in the foreground; this script (and
#                    the namespace, and the stub) lives until that tmux session ends
#   --drop-env NAME  leave one of the switches CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC,
#                    DISABLE_AUTOUPDATER, DISABLE_ERROR_REPORTING, DISABLE_TELEMETRY (all =1 by
#                    default) unset, or ANTHROPIC_API_KEY (claude then has no credential at
#                    all) or any other name; repeatable [CC_DROP_ENV, space-separated]. Nothing
#                    can leave the namespace anyway.
#   --env NAME=VALUE an extra variable for claude (overrides the defaults above); repeatable
#                    [CC_ENV, space-separated NAME=VALUE words, no spaces inside values]
#   --stdin FILE     feed FILE to claude's stdin (default /dev/null)          [CC_STDIN]
#   --keep-telemetry same as --drop-env DISABLE_TELEMETRY
#
# With no claude args, a demo: `-p hello --output-format json --session-id UUID`, then
# `-p again --output-format json --resume UUID`.
# Claude's stdout/stderr pass through; one line "run-offline: claude exit=N seconds=S" goes to
# stderr per run. Exit status: claude's.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

CC_HOME=${CC_HOME:-}
CC_CWD=${CC_CWD:-}
CC_REPLIES=${CC_REPLIES:-}
CC_LOG=${CC_LOG:-}
CC_TIMEOUT=${CC_TIMEOUT:-120}
CLAUDE_BIN=${CLAUDE_BIN:-}
CC_TMUX=${CC_TMUX:-}
CC_DROP_ENV=${CC_DROP_ENV:-}
CC_ENV=${CC_ENV:-}
CC_STDIN=${CC_STDIN:-}

while [ $# -gt 0 ]; do
    case $1 in
        --home) CC_HOME=$2; shift 2 ;;
        --cwd) CC_CWD=$2; shift 2 ;;
        --replies) CC_REPLIES=$2; shift 2 ;;
        --log) CC_LOG=$2; shift 2 ;;
        --timeout) CC_TIMEOUT=$2; shift 2 ;;
        --claude) CLAUDE_BIN=$2; shift 2 ;;
        --tmux) CC_TMUX=$2; shift 2 ;;
        --drop-env) CC_DROP_ENV="$CC_DROP_ENV $2"; shift 2 ;;
        --env) CC_ENV="$CC_ENV $2"; shift 2 ;;
        --stdin) CC_STDIN=$2; shift 2 ;;
        --keep-telemetry) CC_DROP_ENV="$CC_DROP_ENV DISABLE_TELEMETRY"; shift ;;
        --) shift; break ;;
        *) break ;;
    esac
done

die() { printf 'run-offline: %s\n' "$*" >&2; exit 1; }

if [ -z "${_CC_IN_NETNS:-}" ]; then
    # Outer half: resolve paths, then re-exec inside a new network namespace.
    command -v unshare >/dev/null || die "unshare (util-linux) is missing"
    command -v python3 >/dev/null || die "python3 is missing (the stub needs it)"
    if [ -z "$CLAUDE_BIN" ]; then
        CLAUDE_BIN=$("$here/install.sh") || die "could not install claude (install.sh failed)"
    fi
    [ -x "$CLAUDE_BIN" ] || die "no claude executable at $CLAUDE_BIN"
    if [ -z "$CC_HOME" ]; then
        CC_HOME=$(mktemp -d /tmp/cc-offline.XXXXXX)
        printf 'run-offline: HOME=%s\n' "$CC_HOME" >&2
    fi
    mkdir -p "$CC_HOME"
    CC_HOME=$(cd "$CC_HOME" && pwd -P)
    CC_CWD=${CC_CWD:-$CC_HOME/proj}
    mkdir -p "$CC_CWD"
    CC_CWD=$(cd "$CC_CWD" && pwd -P)
    CC_LOG=${CC_LOG:-$CC_HOME/stub-requests.jsonl}
    [ -z "$CC_REPLIES" ] || CC_REPLIES=$(cd "$(dirname "$CC_REPLIES")" && pwd -P)/$(basename "$CC_REPLIES")
    if [ -n "$CC_STDIN" ]; then
        [ -r "$CC_STDIN" ] || die "cannot read --stdin $CC_STDIN"
        CC_STDIN=$(cd "$(dirname "$CC_STDIN")" && pwd -P)/$(basename "$CC_STDIN")
    fi
    export CC_HOME CC_CWD CC_REPLIES CC_LOG CC_TIMEOUT CLAUDE_BIN CC_TMUX CC_DROP_ENV CC_ENV
    export CC_STDIN
    export _CC_IN_NETNS=1
    unshare -n true 2>/dev/null || die "unshare -n is not permitted here (needs root or user namespaces)"
    exec unshare -n -- "$BASH" "${BASH_SOURCE[0]}" -- "$@"
fi

# Inner half: loopback up, stub up, claude. Our own variables stay out of claude's env.
unset _CC_IN_NETNS
ip link set lo up 2>/dev/null || die "cannot bring loopback up in the namespace (ip link set lo up)"

portfile=$(mktemp /tmp/cc-stub-port.XXXXXX); rm -f "$portfile"
stub_args=(--port 0 --port-file "$portfile" --log "$CC_LOG")
[ -z "$CC_REPLIES" ] || stub_args+=("$CC_REPLIES")
python3 "$here/stub.py" "${stub_args[@]}" 2>>"$CC_HOME/stub.stderr" &
stub_pid=$!
cleanup() { kill "$stub_pid" 2>/dev/null || true; rm -f "$portfile"; }
trap cleanup EXIT
for _ in $(seq 100); do [ -s "$portfile" ] && break; sleep 0.05; done
[ -s "$portfile" ] || die "the stub did not start (see $CC_HOME/stub.stderr)"
port=$(cat "$portfile")

env_args=(
    -u CC_HOME -u CC_CWD -u CC_REPLIES -u CC_LOG -u CC_TIMEOUT -u CLAUDE_BIN -u CC_TMUX
    -u CC_DROP_ENV -u CC_ENV -u CC_STDIN
    HOME="$CC_HOME"
    ANTHROPIC_BASE_URL="http://127.0.0.1:$port"
)
defaults=(CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1
          DISABLE_ERROR_REPORTING=1 DISABLE_TELEMETRY=1 ANTHROPIC_API_KEY=sk-ant-offline-test)
for kv in "${defaults[@]}"; do
    case " $CC_DROP_ENV " in
        *" ${kv%%=*} "*) ;;
        *) env_args+=("$kv") ;;
    esac
done
for v in $CC_DROP_ENV; do env_args=(-u "$v" "${env_args[@]}"); done
for kv in $CC_ENV; do env_args+=("$kv"); done

run_claude() {
    local start end rc=0
    start=$(date +%s%N)
    (cd "$CC_CWD" && env "${env_args[@]}" timeout "$CC_TIMEOUT" "$CLAUDE_BIN" "$@" <"${CC_STDIN:-/dev/null}") || rc=$?
    end=$(date +%s%N)
    printf 'run-offline: claude exit=%s seconds=%s.%03d\n' "$rc" \
        $(((end - start) / 1000000000)) $((((end - start) / 1000000) % 1000)) >&2
    return "$rc"
}

if [ -n "$CC_TMUX" ]; then
    # Interactive: claude on a pty in tmux. The tmux server gets its own socket in HOME so it
    # is started here, inside the namespace (a server already running outside would run
    # claude with the network). Drive it from anywhere with
    #   tmux -S "$CC_HOME/tmux.sock" send-keys -t SESSION ... / capture-pane -p -t SESSION
    # This script returns when the tmux session ends (kill-session ends it).
    sock=$CC_HOME/tmux.sock
    cmd=$(printf '%q ' env "${env_args[@]}" "$CLAUDE_BIN" "$@")
    tmux -S "$sock" new-session -d -s "$CC_TMUX" -x 200 -y 50 -c "$CC_CWD" \
        "$cmd; echo CLAUDE-EXITED-\$?; sleep 3600"
    printf 'run-offline: tmux -S %s attach -t %s\n' "$sock" "$CC_TMUX" >&2
    while tmux -S "$sock" has-session -t "$CC_TMUX" 2>/dev/null; do sleep 1; done
    exit 0
fi

if [ $# -eq 0 ]; then
    sid=$(python3 -c 'import uuid; print(uuid.uuid4())')
    run_claude -p hello --output-format json --session-id "$sid"
    echo
    run_claude -p again --output-format json --resume "$sid"
    echo
    exit 0
fi
run_claude "$@"
