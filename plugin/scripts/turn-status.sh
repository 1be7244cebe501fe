#!/bin/sh
# dreamkit plugin, Stop hook (off by default): with DREAMKIT_PLUGIN_TURN_STATUS=1 (for example
# in settings.json "env"), keep the post-turn status of each session in
# ${XDG_CACHE_HOME:-~/.cache}/dreamkit/status-<session id>.json for a statusLine to show.
# With DREAMKIT_TURN_STATUS_ENGINE=llm a model classifies, chosen as the dream's is
# (DREAMKIT_PLUGIN_ENGINE, engine.sh): an API gets 5 seconds in all (a Stop hook must not hold
# the turn); the user's own Claude Code runs in the background instead (its start-up alone
# takes about half a second), and the file is written when it answers. Either way the rule
# table classifies when the model fails, so it does without a credential.
[ "${DREAMKIT_PLUGIN_TURN_STATUS:-0}" = 1 ] || exit 0
if ! command -v turn-status >/dev/null 2>&1; then
    echo "dreamkit: turn-status is not on PATH; no post-turn status (install dreamkit: make install)" >&2
    exit 0
fi
dir=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/dreamkit
mkdir -p "$dir" 2>/dev/null
f=$dir/status-${CLAUDE_CODE_SESSION_ID:-unknown}.json
previous=
[ -f "$f" ] && previous="--previous $f"
engine=
if [ "${DREAMKIT_TURN_STATUS_ENGINE:-}" = llm ]; then
    state=$dir
    dir=${XDG_STATE_HOME:-${HOME:-/tmp}/.local/state}/dreamkit
    mkdir -p "$dir" 2>/dev/null
    . "$(dirname "$0")/engine.sh"
    plugin_choose
    engine=$plugin_engine
    dir=$state
fi
case $engine in
    off) exit 0 ;;
    claude)
        # The payload is read now: the background run outlives the hook's stdin.
        payload=$(cat)
        (
            said=$(printf '%s\n' "$payload" | turn-status --engine llm --provider claude \
                --fallback heuristic --deadline 60s $previous --state-file "$f" 2>&1 >/dev/null)
            plugin_logged_out "$said"
        ) </dev/null >/dev/null 2>&1 &
        ;;
    rules) turn-status -q --engine heuristic $previous --state-file "$f" >/dev/null ;;
    *) turn-status -q --fallback heuristic --timeout 5s --deadline 5s $previous --state-file "$f" >/dev/null ;;
esac
exit 0
