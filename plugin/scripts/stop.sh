#!/bin/sh
# dreamkit plugin, Stop hook: when a consolidation is due, run it in the background.
#
# The gate runs in the foreground and reads the hook payload (stdin); it is one stat when not
# due. Only a due envelope goes to the detached `dream-lock exec -- dream-run` pipeline, whose
# output goes to the log. The hook always exits 0: exit 2 from a Stop hook would block the turn.
# Set DREAMKIT_DREAM_MODE=propose (settings.json "env") to review each consolidation first, or
# DREAMKIT_PLUGIN_DREAM=0 to turn the consolidation off and keep the commands.
[ "${DREAMKIT_PLUGIN_DREAM:-1}" = 0 ] && exit 0
for b in dream-gate dream-lock dream-run; do
    if ! command -v "$b" >/dev/null 2>&1; then
        echo "dreamkit: $b is not on PATH; memory consolidation skipped (install dreamkit: make install)" >&2
        exit 0
    fi
done
dir=${XDG_STATE_HOME:-${HOME:-/tmp}/.local/state}/dreamkit
mkdir -p "$dir" 2>/dev/null
log=$dir/dream.log
# dream-run needs a model credential (what its --provider reads; an empty value declares a
# server that needs none). Without one it would fail on every turn: start nothing, and say
# why in the log once a day (the stamp holds the day it was said; written by rename).
if [ "${DREAMKIT_PROVIDER:-anthropic}" = openai ]; then
    [ -n "${OPENAI_API_KEY+set}" ] && credential=1 || credential=
    need="OPENAI_API_KEY"
else
    [ -n "${ANTHROPIC_API_KEY+set}${ANTHROPIC_AUTH_TOKEN+set}" ] && credential=1 || credential=
    need="ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN"
fi
if [ -z "$credential" ]; then
    today=$(date -u +%Y-%m-%d)
    stamp=$dir/no-credential
    if [ "$(cat "$stamp" 2>/dev/null)" != "$today" ]; then
        echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) dreamkit: no model credential ($need is not set in the hooks' environment): no consolidation runs (set it in settings.json \"env\"; said once a day)" >>"$log"
        printf '%s\n' "$today" >"$stamp.tmp.$$" && mv -f "$stamp.tmp.$$" "$stamp"
    fi
    exit 0
fi
if e=$(dream-gate -q 2>>"$log"); then printf '%s\n' "$e" | dream-lock -q exec -- dream-run -q >>"$log" 2>&1 & fi; exit 0
