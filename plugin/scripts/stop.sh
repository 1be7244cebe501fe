#!/bin/sh
# dreamkit plugin, Stop hook: when a consolidation is due, run it in the background.
#
# The gate runs in the foreground and reads the hook payload (stdin); it is one stat when not
# due. Only a due envelope goes to the detached `dream-lock exec -- dream-run` pipeline, whose
# output goes to the log. The hook always exits 0: exit 2 from a Stop hook would block the turn.
# Set DREAMKIT_DREAM_MODE=propose (settings.json "env") to review each consolidation first, or
# DREAMKIT_PLUGIN_DREAM=0 to turn the consolidation off and keep the commands, or
# DREAMKIT_DREAM_ENGINE=rules|model to choose the engine (default: model when a credential is set).
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
# The model engine needs a model credential (what its --provider reads; an empty value declares
# a server that needs none). Without one the rules engine consolidates instead: the fixes that
# need no model (duplicates, orphans, dangling links, long entries, an index past the load
# limit, anchored relative dates, secrets). The log says so once a day (the stamp holds the day
# it was said; written by rename). DREAMKIT_DREAM_ENGINE, when set, chooses either way.
if [ "${DREAMKIT_PROVIDER:-anthropic}" = openai ]; then
    [ -n "${OPENAI_API_KEY+set}" ] && credential=1 || credential=
    need="OPENAI_API_KEY"
else
    [ -n "${ANTHROPIC_API_KEY+set}${ANTHROPIC_AUTH_TOKEN+set}" ] && credential=1 || credential=
    need="ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN"
fi
engine=${DREAMKIT_DREAM_ENGINE:-}
if [ -z "$engine" ]; then
    if [ -n "$credential" ]; then
        engine=model
    else
        engine=rules
        today=$(date -u +%Y-%m-%d)
        stamp=$dir/no-credential
        if [ "$(cat "$stamp" 2>/dev/null)" != "$today" ]; then
            echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) dreamkit: no model credential ($need is not set in the hooks' environment): the rules engine consolidates, with no model (set it in settings.json \"env\" for the model's consolidation; said once a day)" >>"$log"
            printf '%s\n' "$today" >"$stamp.tmp.$$" && mv -f "$stamp.tmp.$$" "$stamp"
        fi
    fi
fi
if e=$(dream-gate -q 2>>"$log"); then printf '%s\n' "$e" | dream-lock -q exec -- dream-run -q --engine "$engine" >>"$log" 2>&1 & fi; exit 0
