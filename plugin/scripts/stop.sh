#!/bin/sh
# dreamkit plugin, Stop hook: when a consolidation is due, run it in the background.
#
# The gate runs in the foreground and reads the hook payload (stdin); it is one stat when not
# due. Only a due envelope goes to the detached `dream-lock exec -- dream-run` pipeline, whose
# output goes to the log. The hook always exits 0: exit 2 from a Stop hook would block the turn.
# Set DREAMKIT_DREAM_MODE=propose (settings.json "env") to review each consolidation first.
for b in dream-gate dream-lock dream-run; do
    if ! command -v "$b" >/dev/null 2>&1; then
        echo "dreamkit: $b is not on PATH; memory consolidation skipped (install dreamkit: make install)" >&2
        exit 0
    fi
done
dir=${XDG_STATE_HOME:-${HOME:-/tmp}/.local/state}/dreamkit
mkdir -p "$dir" 2>/dev/null
log=$dir/dream.log
if e=$(dream-gate -q 2>>"$log"); then printf '%s\n' "$e" | dream-lock -q exec -- dream-run -q >>"$log" 2>&1 & fi; exit 0
