# dreamkit plugin: which model the hooks use. Sourced by stop.sh and turn-status.sh with $dir
# (dreamkit's state dir) set; sets $plugin_engine (auto, api, claude, rules or off) and
# $plugin_why, and plugin_choose resolves auto.
#
# DREAMKIT_PLUGIN_ENGINE (settings.json "env"), default auto:
#   api     the model API the tools' --provider reads: ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN,
#           or OPENAI_API_KEY with DREAMKIT_PROVIDER=openai
#   claude  the user's own Claude Code in print mode (--provider claude): their login, no key;
#           counted against their plan's limits like Claude Code's own auto-dream
#   rules   no model: dream-run --engine rules, and turn-status's rule table
#   off     the hooks do nothing (the commands stay)
#   auto    api when that credential is set; else claude when the client is found
#           (DREAMKIT_CLAUDE_BIN, else `claude` on PATH) and has not answered "not logged in"
#           today (the stamp $dir/claude-logged-out holds the day it did); else rules
plugin_engine=${DREAMKIT_PLUGIN_ENGINE:-auto}
plugin_why=
if [ "${DREAMKIT_PROVIDER:-anthropic}" = openai ]; then
    [ -n "${OPENAI_API_KEY+set}" ] && plugin_credential=1 || plugin_credential=
    plugin_need="OPENAI_API_KEY"
else
    [ -n "${ANTHROPIC_API_KEY+set}${ANTHROPIC_AUTH_TOKEN+set}" ] && plugin_credential=1 || plugin_credential=
    plugin_need="ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN"
fi
plugin_client() {
    if [ -n "${DREAMKIT_CLAUDE_BIN:-}" ]; then
        [ -x "$DREAMKIT_CLAUDE_BIN" ] && [ -f "$DREAMKIT_CLAUDE_BIN" ]
    else
        command -v claude >/dev/null 2>&1
    fi
}
# The day the client last said it is not logged in (see plugin_logged_out).
plugin_stamp=$dir/claude-logged-out
# Checked at once, with builtins only (the Stop hook runs after every turn): a value it does
# not know is said on stderr and taken as rules.
case $plugin_engine in
    auto | api | claude | rules | off) ;;
    *)
        echo "dreamkit: DREAMKIT_PLUGIN_ENGINE must be auto, api, claude, rules or off, not '$plugin_engine'; using rules" >&2
        plugin_why="DREAMKIT_PLUGIN_ENGINE='$plugin_engine' is not auto, api, claude, rules or off"
        plugin_engine=rules
        ;;
esac

# Today (UTC), asked of `date` once, when first needed.
plugin_today() {
    [ -n "${plugin_day:-}" ] || plugin_day=$(date -u +%Y-%m-%d)
}

# Resolves auto into api, claude or rules. Called only when the answer is needed (stop.sh:
# once a consolidation is due), since it may look up the client and read a stamp.
plugin_choose() {
    [ "$plugin_engine" = auto ] || return 0
    if [ "${DREAMKIT_PROVIDER:-}" = claude ]; then
        plugin_engine=claude
        plugin_why="DREAMKIT_PROVIDER=claude"
        return 0
    fi
    if [ -n "$plugin_credential" ]; then
        plugin_engine=api
        return 0
    fi
    if ! plugin_client; then
        plugin_engine=rules
        plugin_why="no model credential ($plugin_need is not set in the hooks' environment) and no Claude Code client (DREAMKIT_CLAUDE_BIN, or \`claude\` on PATH): the rules engine consolidates, with no model"
        return 0
    fi
    plugin_today
    logged_out=
    read -r logged_out 2>/dev/null <"$plugin_stamp" || true
    if [ "$logged_out" = "$plugin_day" ]; then
        plugin_engine=rules
        plugin_why="no model credential ($plugin_need is not set in the hooks' environment), and Claude Code said today that it is not logged in (run \`claude\` once and log in): the rules engine consolidates, with no model"
    else
        plugin_engine=claude
        plugin_why="no model credential ($plugin_need is not set in the hooks' environment): your own Claude Code answers (--provider claude, your login)"
    fi
}

# Remembers for the day that the client answered "not logged in" (exit 4, kind auth) in the
# output $1: auto then uses the rules until tomorrow. Written by rename.
plugin_logged_out() {
    case $1 in
        *'"kind":"auth"'* | *'llm engine failed (auth'*)
            date -u +%Y-%m-%d >"$plugin_stamp.tmp.$$" && mv -f "$plugin_stamp.tmp.$$" "$plugin_stamp" ;;
    esac
}

# Says $plugin_why in the log $1 once a day (the stamp $dir/engine-said holds the day and the
# engine it said; a change of engine is said again).
plugin_say_once() {
    [ -n "$plugin_why" ] || return 0
    plugin_today
    said=
    read -r said 2>/dev/null <"$dir/engine-said" || true
    if [ "$said" != "$plugin_day $plugin_engine" ]; then
        echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) dreamkit: $plugin_why; said once a day" >>"$1"
        printf '%s\n' "$plugin_day $plugin_engine" >"$dir/engine-said.tmp.$$" && mv -f "$dir/engine-said.tmp.$$" "$dir/engine-said"
    fi
}
