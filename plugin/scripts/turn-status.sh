#!/bin/sh
# dreamkit plugin, Stop hook (off by default): with DREAMKIT_PLUGIN_TURN_STATUS=1 (for example
# in settings.json "env"), keep the post-turn status of each session in
# ${XDG_CACHE_HOME:-~/.cache}/dreamkit/status-<session id>.json for a statusLine to show.
# With DREAMKIT_TURN_STATUS_ENGINE=llm the model gets 5 seconds in all (a Stop hook must not
# hold the turn), then the rule table classifies; so it does without a credential.
[ "${DREAMKIT_PLUGIN_TURN_STATUS:-0}" = 1 ] || exit 0
if ! command -v turn-status >/dev/null 2>&1; then
    echo "dreamkit: turn-status is not on PATH; no post-turn status (install dreamkit: make install)" >&2
    exit 0
fi
dir=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/dreamkit
mkdir -p "$dir" 2>/dev/null
f=$dir/status-${CLAUDE_CODE_SESSION_ID:-unknown}.json
cap="--fallback heuristic --timeout 5s --deadline 5s"
if [ -f "$f" ]; then
    turn-status -q $cap --previous "$f" --state-file "$f" >/dev/null
else
    turn-status -q $cap --state-file "$f" >/dev/null
fi
exit 0
