#!/bin/sh
# dreamkit plugin, SessionStart hook: `session-start.sh pending` tells the new session which
# memory files the last consolidation changed; `session-start.sh show` says when a proposal
# (DREAMKIT_DREAM_MODE=propose) waits for review. dream-run prints Claude Code's SessionStart
# answer ({"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":...}}), or
# nothing when there is nothing to say, and exits 0; so does this script, always.
case ${1:-} in
    pending | show) ;;
    *) echo "dreamkit: session-start.sh: expected 'pending' or 'show', got '${1:-}'" >&2; exit 0 ;;
esac
if ! command -v dream-run >/dev/null 2>&1; then
    echo "dreamkit: dream-run is not on PATH; no memory notice (install dreamkit: make install)" >&2
    exit 0
fi
dream-run "$1" --hook
exit 0
