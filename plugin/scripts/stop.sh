#!/bin/sh
# dreamkit plugin, Stop hook: when a consolidation is due, run it in the background.
#
# The gate runs in the foreground and reads the hook payload (stdin); it is one stat when not
# due. Only a due envelope goes to the detached `dream-lock exec -- dream-run` pipeline, whose
# output goes to the log. The hook always exits 0: exit 2 from a Stop hook would block the turn.
# Which model consolidates: DREAMKIT_PLUGIN_ENGINE=auto|api|claude|rules|off (engine.sh says
# how auto chooses: an API key, else the user's own Claude Code, else the rules engine).
# Set DREAMKIT_DREAM_MODE=propose (settings.json "env") to review each consolidation first.
# Older switches still work: DREAMKIT_PLUGIN_DREAM=0 (off), DREAMKIT_DREAM_ENGINE=rules|model.
[ "${DREAMKIT_PLUGIN_DREAM:-1}" = 0 ] && exit 0
for b in dream-gate dream-lock dream-run; do
    if ! command -v "$b" >/dev/null 2>&1; then
        echo "dreamkit: $b is not on PATH; memory consolidation skipped (install dreamkit: make install)" >&2
        exit 0
    fi
done
dir=${XDG_STATE_HOME:-${HOME:-/tmp}/.local/state}/dreamkit
log=$dir/dream.log
. "$(dirname "$0")/engine.sh"
# Off writes nothing at all.
[ "$plugin_engine" = off ] && exit 0
mkdir -p "$dir" 2>/dev/null
# The gate first: after most turns nothing is due, and then nothing else runs.
e=$(dream-gate -q 2>>"$log") || exit 0
plugin_choose
case ${DREAMKIT_DREAM_ENGINE:-} in
    rules) plugin_engine=rules; plugin_why= ;;
    model) [ "$plugin_engine" = rules ] && plugin_engine=api && plugin_why= ;;
esac
plugin_say_once "$log"
case $plugin_engine in
    api) run="dream-run -q --engine model" ;;
    claude) run="dream-run -q --engine model --provider claude" ;;
    *) run="dream-run -q --engine rules" ;;
esac
# Detached from the hook's stdout and stderr (the client waits for those to close).
(
    out=$(printf '%s\n' "$e" | dream-lock -q exec -- $run 2>>"$log")
    printf '%s\n' "$out" >>"$log"
    [ "$plugin_engine" = claude ] && plugin_logged_out "$out"
) </dev/null >/dev/null 2>&1 &
exit 0
